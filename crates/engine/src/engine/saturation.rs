//! guidellm's `over_saturation` constraint, fed live ([`llmbench_workload::workload::over_saturation`]): each
//! request's start (as it goes out, with the stage's in-flight count), its first token (from the stream, once,
//! as it arrives; a non-streamed answer when it completes) and its end, each timed from the stage's start as
//! guidellm times its updates from the scheduler's. When the detector says over-saturated, `enforce` stops the
//! stage (or, with `stopping_scope: all`, the run) and cancels what is in flight, as guidellm's `stop_all` does;
//! `monitor` logs it once.

use std::collections::HashSet;
use std::sync::{Mutex, PoisonError};

use llmbench_model::record::RequestRecord;
use llmbench_workload::workload::StopScope;
use llmbench_workload::workload::over_saturation::{Detector, OverSaturation, Verdict};

use super::control::{Control, StopReason};

/// One stage's detector and what it needs to act.
#[derive(Debug)]
pub(crate) struct SaturationWatch {
    state: Mutex<State>,
    /// The stage's start on the run's clock.
    origin_ns: u64,
    stage: Control,
    run: Control,
}

#[derive(Debug)]
struct State {
    detector: Detector,
    /// The requests in flight (guidellm's `processing_requests`), by id.
    in_flight: HashSet<u64>,
    /// Whether the detector has said over-saturated (acted on once).
    alerted: bool,
}

impl SaturationWatch {
    pub(crate) fn new(
        config: OverSaturation,
        origin_ns: u64,
        stage: Control,
        run: Control,
    ) -> Self {
        SaturationWatch {
            state: Mutex::new(State {
                detector: Detector::new(config),
                in_flight: HashSet::new(),
                alerted: false,
            }),
            origin_ns,
            stage,
            run,
        }
    }

    fn seconds(&self, at_ns: u64) -> f64 {
        at_ns.saturating_sub(self.origin_ns) as f64 / 1e9
    }

    /// Request `id` goes out at `at_ns`.
    pub(crate) fn started(&self, id: u64, at_ns: u64) {
        let at = self.seconds(at_ns);
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.in_flight.insert(id);
        let in_flight = state.in_flight.len() as u64;
        let verdict = state.detector.started(at, in_flight);
        self.act(&mut state, verdict);
    }

    /// A streamed answer's first token arrived at `at_ns`, the request having been sent at `sent_ns`.
    pub(crate) fn first_token(&self, at_ns: u64, sent_ns: u64) {
        let at = self.seconds(at_ns);
        let ttft = at_ns.saturating_sub(sent_ns) as f64 / 1e9;
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.detector.config().ttft_at_completion {
            return;
        }
        let verdict = state.detector.first_token(at, ttft);
        self.act(&mut state, verdict);
    }

    /// `record` ended. A non-streamed success reports its TTFT now (guidellm's `completed` update carries the
    /// first token a streamed answer reported as it came; before guidellm 0.7 every success reported it here); a
    /// record that never went out changes nothing.
    pub(crate) fn finished(&self, record: &RequestRecord) {
        let at = self.seconds(record.end_ns);
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if !state.in_flight.remove(&record.id) {
            return;
        }
        let verdict = match record.ttft_ns() {
            Some(ttft)
                if (!record.streaming || state.detector.config().ttft_at_completion)
                    && record.succeeded() =>
            {
                state.detector.first_token(at, ttft as f64 / 1e9)
            }
            _ => state.detector.tick(at),
        };
        self.act(&mut state, verdict);
    }

    fn act(&self, state: &mut State, verdict: Verdict) {
        if !verdict.over_saturated || state.alerted {
            return;
        }
        state.alerted = true;
        let config = *state.detector.config();
        let Verdict {
            ttft_slope,
            ttft_slope_moe,
            ttft_n,
            ttft_violations,
            concurrent_slope,
            concurrent_slope_moe,
            concurrent_n,
            ..
        } = verdict;
        if !config.enforce {
            tracing::warn!(
                ?concurrent_slope,
                ?concurrent_slope_moe,
                concurrent_n,
                ?ttft_slope,
                ?ttft_slope_moe,
                ttft_n,
                ttft_violations,
                "the server is over-saturated (guidellm over_saturation, mode monitor): the run goes on"
            );
            return;
        }
        tracing::warn!(
            ?concurrent_slope,
            ?concurrent_slope_moe,
            concurrent_n,
            ?ttft_slope,
            ?ttft_slope_moe,
            ttft_n,
            ttft_violations,
            "stopping the {}: the server is over-saturated (guidellm over_saturation); what was in flight is \
             cancelled, every record is kept",
            if config.scope == StopScope::Run {
                "run"
            } else {
                "stage"
            }
        );
        self.stage.stop_now(StopReason::OverSaturation);
        if config.scope == StopScope::Run {
            self.run.stop_now(StopReason::OverSaturation);
        }
    }
}
