//! Sweeps: load stages decided as the run goes from what the run measured, as each tool decides them. Each sweep
//! is a [`StagePlanner`] the engine asks for one stage at a time.
//!
//! - guidellm `sweep` (`benchmark/profiles/sweep.py`): a synchronous stage, a throughput stage, then `size − 2`
//!   constant or Poisson stages at `np.linspace(sync_rate, throughput_rate, size − 1)[1:]`, each rate a stage's
//!   `request_throughput.successful.mean` computed exactly as benchmarks.json reports it. No rate → the run fails
//!   as guidellm's does; a non-positive rate ends the sweep; an error limit with `stopping_scope: all` ends it in
//!   the rate phase (the engine stops the run) but not in the synchronous or throughput stage, which guidellm's
//!   sweep never stops escalating after.
//! - inference-perf `load.sweep` (`loadgen/load_generator.py`, `preprocess`): a probe of `num_requests` requests
//!   over 5 s, ended at `timeout`, whose records are left out of every report (inference-perf's stage −1); the
//!   saturation rate from the probe's active-request counter ([`saturation_rate`]); then `num_stages` stages of
//!   `stage_duration` at `generateRates` ([`llmbench_workload::workload::inference_perf_sweep_rates`]), numbered from 0.

use std::time::Duration;

use super::{PlanError, Shard, cap_in_flight, engine_stage, requested_rate, stage_meta};
use llmbench_engine::engine::{self, FinishedStage, PlannedStage, PlannerError, StagePlanner};
use llmbench_metrics::metrics::percentile_linear;
use llmbench_model::record::RequestRecord;
use llmbench_workload::workload::stage_meta::StageMeta;
use llmbench_workload::workload::{
    Arrival, LoadKind, Stage, StageLimit, StopScope, Sweep, SweepMeasurements, SweepProcess,
    Workload, stage_seed,
};

/// Why a sweep could not decide its next stage: the run fails, as the tool's does.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum SweepError {
    /// guidellm's `RuntimeError("Invalid rates in sweep; aborting. Were there any successful requests?")`.
    #[error(
        "guidellm sweep: invalid rates in sweep; aborting: the synchronous stage measured {synchronous} successful \
         requests/s and the throughput stage {throughput}, so there are no rates to sweep between. Were there any \
         successful requests?"
    )]
    NoSuccessfulRate { synchronous: f64, throughput: f64 },
    /// inference-perf's "Loadgen preprocessing failed to gather enough samples to determine saturation".
    #[error(
        "inference-perf sweep: the saturation probe failed to gather enough samples to determine saturation, try \
         increasing the num_requests or timeout ({rates} of its half-second samples had fewer requests in flight \
         than the one before within the {timeout_s} s timeout; at least 2 are needed)"
    )]
    SaturationSamples { rates: usize, timeout_s: f64 },
}

/// A workload's sweep, ready to become its run's planner.
pub(crate) struct SweepPlan {
    sweep: Planner,
}

enum Planner {
    Guidellm(Box<GuidellmSweep>),
    InferencePerf(Box<InferencePerfSweep>),
}

impl SweepPlan {
    /// How many stages the sweep runs at most (probes aside).
    pub(crate) fn stages(&self) -> usize {
        match &self.sweep {
            Planner::Guidellm(g) => g.size as usize,
            Planner::InferencePerf(p) => p.num_stages as usize,
        }
    }

    /// The run's planner. `t0_unix_ns` is the wall clock at the run's t0: guidellm's rates are figured on epoch
    /// timestamps, as its report figures them.
    pub(crate) fn planner(self, t0_unix_ns: u64) -> Box<dyn StagePlanner> {
        match self.sweep {
            Planner::Guidellm(mut g) => {
                g.t0_unix_ns = t0_unix_ns;
                g
            }
            Planner::InferencePerf(p) => p,
        }
    }
}

/// The sweep of `workload`, if it has one. `in_flight_cap` bounds what every stage keeps in flight (inference-perf's
/// workers × their concurrency). A sweep is refused across shards: its rates come from what the launcher measures.
pub(crate) fn sweep_plan(
    workload: &Workload,
    shard: Shard,
    in_flight_cap: Option<usize>,
) -> Result<Option<SweepPlan>, PlanError> {
    let Some((index, sweep)) =
        workload
            .stages
            .iter()
            .enumerate()
            .find_map(|(i, stage)| match &stage.arrival {
                Arrival::Sweep(sweep) => Some((i, sweep)),
                _ => None,
            })
    else {
        return Ok(None);
    };
    let (tool, measured) = match sweep {
        Sweep::InferencePerf { .. } => ("inference-perf", "its saturation probe"),
        Sweep::Guidellm { .. } => ("guidellm", "its synchronous and throughput stages"),
    };
    if shard.count > 1 {
        return Err(PlanError::SweepSharded {
            tool,
            measured,
            count: shard.count,
        });
    }
    let shape = PlanError::SweepShape {
        tool,
        stage: index,
        stages: workload.stages.len(),
    };
    let sweep = match (sweep, workload.stages.as_slice()) {
        (
            Sweep::InferencePerf {
                process,
                num_stages,
                num_requests,
                timeout,
                saturation_percentile,
                ..
            },
            [_],
        ) => Planner::InferencePerf(Box::new(InferencePerfSweep {
            sweep: sweep.clone(),
            process: *process,
            num_stages: *num_stages,
            num_requests: num_requests.unwrap_or(INFERENCE_PERF_PROBE_REQUESTS),
            timeout: timeout.unwrap_or(INFERENCE_PERF_PROBE_TIMEOUT),
            percentile: saturation_percentile.unwrap_or(INFERENCE_PERF_SATURATION_PERCENTILE),
            seed: workload.seed,
            cap: in_flight_cap,
            stages: Vec::new(),
        })),
        (Sweep::Guidellm { size, .. }, [synchronous, throughput, template])
            if index == 2
                && synchronous.load == LoadKind::Synchronous
                && throughput.load == LoadKind::Throughput =>
        {
            Planner::Guidellm(Box::new(GuidellmSweep {
                synchronous: synchronous.clone(),
                throughput: throughput.clone(),
                sweep: sweep.clone(),
                template: template.clone(),
                size: *size,
                seed: workload.seed,
                t0_unix_ns: 0,
                synchronous_rate: 0.0,
                last: StageMeta::default(),
                rates: Vec::new(),
            }))
        }
        _ => return Err(shape),
    };
    Ok(Some(SweepPlan { sweep }))
}

/// An engine stage of `stage`, seeded for the run's `index`-th stage, and what run.json says of it.
fn build(stage: &Stage, seed: u64, index: u32) -> Result<(engine::Stage, StageMeta), PlannerError> {
    let built = engine_stage(stage, stage_seed(seed, index as usize))
        .ok_or("a sweep's generated stage is itself a sweep")?;
    let meta = stage_meta(&built, Some(stage));
    Ok((built, meta))
}

/// guidellm's `sweep` profile.
struct GuidellmSweep {
    synchronous: Stage,
    throughput: Stage,
    sweep: Sweep,
    /// The workload's sweep stage: its warm-up and cool-down apply to every rate stage.
    template: Stage,
    size: u32,
    seed: u64,
    t0_unix_ns: u64,
    synchronous_rate: f64,
    /// What run.json says of the stage that ran last.
    last: StageMeta,
    /// The rate stages, once the throughput stage has run.
    rates: Vec<Stage>,
}

impl GuidellmSweep {
    fn plan(&mut self, stage: &Stage, index: u32) -> Result<PlannedStage, PlannerError> {
        let (mut built, meta) = build(stage, self.seed, index)?;
        let measuring = index < 2;
        if measuring {
            // guidellm's sweep goes on after its synchronous and throughput benchmarks whatever stopped them
            // (`_should_stop_escalating` is not asked for them): an error limit's `all` ends only the stage here.
            built.errors = stage_scope(built.errors);
        }
        self.last = meta;
        Ok(PlannedStage {
            stage: built,
            keep_records: measuring,
            probe: false,
            deadline: None,
            meta,
        })
    }

    /// The finished stage's `request_throughput.successful.mean`.
    fn rate(&self, finished: &FinishedStage) -> f64 {
        llmbench_report::report::guidellm_successful_rate(
            &self.last,
            self.t0_unix_ns,
            finished.times.start_ns,
            &finished.records,
        )
    }
}

impl StagePlanner for GuidellmSweep {
    fn next_stage(
        &mut self,
        finished: Option<FinishedStage>,
    ) -> Result<Option<PlannedStage>, PlannerError> {
        let Some(finished) = finished else {
            let synchronous = self.synchronous.clone();
            return self.plan(&synchronous, 0).map(Some);
        };
        match finished.index {
            0 => {
                self.synchronous_rate = self.rate(&finished);
                let throughput = self.throughput.clone();
                return self.plan(&throughput, 1).map(Some);
            }
            1 => {
                let (synchronous_rate, throughput_rate) =
                    (self.synchronous_rate, self.rate(&finished));
                if synchronous_rate <= 0.0 && throughput_rate <= 0.0 {
                    return Err(SweepError::NoSuccessfulRate {
                        synchronous: synchronous_rate,
                        throughput: throughput_rate,
                    }
                    .into());
                }
                self.rates = self
                    .sweep
                    .stages(&SweepMeasurements {
                        saturation_rate: 0.0,
                        synchronous_rate,
                        throughput_rate,
                    })
                    .into_iter()
                    .map(|mut stage| {
                        stage.warmup = self.template.warmup;
                        stage.cooldown = self.template.cooldown;
                        stage
                    })
                    .collect();
                tracing::info!(
                    synchronous_rate,
                    throughput_rate,
                    rates = ?self.rates.iter().filter_map(requested_rate).collect::<Vec<_>>(),
                    "guidellm sweep: rates between the synchronous and throughput request rates"
                );
            }
            _ => {}
        }
        let next = finished.index + 1;
        let Some(stage) = (next as usize)
            .checked_sub(2)
            .and_then(|i| self.rates.get(i))
            .cloned()
        else {
            return Ok(None);
        };
        // guidellm stops when the next rate is not positive (a throughput rate below the synchronous one).
        if !requested_rate(&stage).is_some_and(|rate| rate > 0.0) {
            return Ok(None);
        }
        self.plan(&stage, next).map(Some)
    }
}

/// `errors` with every limit's reach narrowed to the stage (`stopping_scope: current`).
fn stage_scope(mut errors: engine::ErrorLimits) -> engine::ErrorLimits {
    if let Some(limit) = &mut errors.max_errors {
        limit.scope = StopScope::Stage;
    }
    if let Some(limit) = &mut errors.max_error_rate {
        limit.scope = StopScope::Stage;
    }
    if let Some(limit) = &mut errors.max_global_error_rate {
        limit.scope = StopScope::Stage;
    }
    if let Some(limit) = &mut errors.over_saturation {
        limit.scope = StopScope::Stage;
    }
    errors
}

/// inference-perf's `SweepConfig` defaults (`config/loadgen/config.py`).
const INFERENCE_PERF_PROBE_REQUESTS: u64 = 2000;
const INFERENCE_PERF_PROBE_TIMEOUT: Duration = Duration::from_secs(60);
const INFERENCE_PERF_SATURATION_PERCENTILE: f64 = 95.0;
/// The probe sends its requests over 5 s (`preprocess`: `duration = 5`).
const INFERENCE_PERF_PROBE_SECONDS: u64 = 5;
/// The probe's arrivals get a seed of their own, apart from every stage's.
const PROBE_SEED_INDEX: usize = usize::MAX;

/// inference-perf's `load.sweep`.
struct InferencePerfSweep {
    sweep: Sweep,
    process: SweepProcess,
    num_stages: u32,
    num_requests: u64,
    timeout: Duration,
    percentile: f64,
    seed: u64,
    cap: Option<usize>,
    /// The stages, once the probe has found the saturation rate.
    stages: Vec<Stage>,
}

impl InferencePerfSweep {
    /// The saturation probe (inference-perf's stage −1): `num_requests` at `num_requests / 5` per second with the
    /// load's own arrivals, ended at `timeout` (0: inference-perf's `if timeout` sets none).
    fn probe(&self) -> Result<PlannedStage, PlannerError> {
        let duration = Duration::from_secs(INFERENCE_PERF_PROBE_SECONDS);
        let rate = self.num_requests as f64 / INFERENCE_PERF_PROBE_SECONDS as f64;
        let (load, arrival) = match self.process {
            SweepProcess::Constant => (
                LoadKind::Constant,
                Arrival::InferencePerfConstant { rate, duration },
            ),
            SweepProcess::Poisson => (
                LoadKind::Poisson,
                Arrival::InferencePerfPoisson { rate, duration },
            ),
        };
        let probe = Stage {
            load,
            arrival,
            limit: StageLimit::duration(duration),
            max_concurrency: None,
            warmup: None,
            cooldown: None,
        };
        let mut built = engine_stage(&probe, stage_seed(self.seed, PROBE_SEED_INDEX))
            .ok_or("the saturation probe is not a sweep")?;
        let meta = stage_meta(&built, Some(&probe));
        self.cap_in_flight(&mut built);
        Ok(PlannedStage {
            stage: built,
            keep_records: true,
            probe: true,
            deadline: Some(self.timeout).filter(|t| !t.is_zero()),
            meta,
        })
    }

    fn stage(&self, index: u32) -> Result<Option<PlannedStage>, PlannerError> {
        let Some(stage) = self.stages.get(index as usize) else {
            return Ok(None);
        };
        // run.json says what the profile asks, before the workers' cap (as for a fixed inference-perf run).
        let (mut built, meta) = build(stage, self.seed, index)?;
        self.cap_in_flight(&mut built);
        Ok(Some(PlannedStage {
            stage: built,
            keep_records: false,
            probe: false,
            deadline: None,
            meta,
        }))
    }

    fn cap_in_flight(&self, stage: &mut engine::Stage) {
        if let Some(cap) = self.cap {
            cap_in_flight(std::slice::from_mut(stage), cap);
        }
    }
}

impl StagePlanner for InferencePerfSweep {
    fn next_stage(
        &mut self,
        finished: Option<FinishedStage>,
    ) -> Result<Option<PlannedStage>, PlannerError> {
        let Some(finished) = finished else {
            return self.probe().map(Some);
        };
        if !finished.probe {
            return self.stage(finished.index + 1);
        }
        let saturation = saturation_rate(
            &sent(&finished.records),
            finished.times.start_ns,
            self.timeout,
            self.percentile,
        )?;
        self.stages = self.sweep.stages(&SweepMeasurements {
            saturation_rate: saturation,
            synchronous_rate: 0.0,
            throughput_rate: 0.0,
        });
        tracing::info!(
            saturation,
            stages = ?self.stages.iter().filter_map(requested_rate).collect::<Vec<_>>(),
            "inference-perf sweep: saturation point estimated, load stages generated"
        );
        self.stage(0)
    }
}

/// How often inference-perf samples its active-request counter during the probe.
const SAMPLE_PERIOD_NS: i128 = 500_000_000;
/// How long before the probe's schedule starts inference-perf takes its first sample: `preprocess` starts
/// sampling, then `run_stage` starts the schedule at `perf_counter() + 1`.
const SAMPLING_LEAD_NS: i128 = 1_000_000_000;

/// inference-perf's saturation rate from its probe (`preprocess`), reconstructed from the probe's requests, each
/// `(sent_ns, end_ns)` on the run clock, its schedule having started at `start_ns`.
///
/// inference-perf counts a request active from just before it is sent until its response is processed, and
/// samples that counter every 0.5 s from 1 s before the schedule starts; it keeps the samples taken before
/// `start − 1 s + timeout`, takes `|Δactive / Δt|` of every two consecutive samples where the count fell, and
/// reports the `percentile`-th percentile of those rates (numpy's linear interpolation). Here the samples are at
/// exactly `start − 1 s + k · 0.5 s`, and active(t) = #{requests: sent ≤ t < end}. Fewer than two rates is
/// inference-perf's error.
pub(crate) fn saturation_rate(
    requests: &[(u64, u64)],
    start_ns: u64,
    timeout: Duration,
    percentile: f64,
) -> Result<f64, SweepError> {
    let mut sent: Vec<i128> = requests.iter().map(|r| i128::from(r.0)).collect();
    let mut ended: Vec<i128> = requests.iter().map(|r| i128::from(r.1)).collect();
    sent.sort_unstable();
    ended.sort_unstable();
    // Every request ends after it is sent, so #{sent ≤ t < end} = #{sent ≤ t} − #{end ≤ t}.
    let active = |t: i128| {
        let sent_by = sent.partition_point(|&s| s <= t);
        let ended_by = ended.partition_point(|&e| e <= t);
        sent_by.saturating_sub(ended_by) as f64
    };
    let first = i128::from(start_ns) - SAMPLING_LEAD_NS;
    let until = first + i128::try_from(timeout.as_nanos()).unwrap_or(i128::MAX);
    let period_s = SAMPLE_PERIOD_NS as f64 / 1e9;
    let mut rates = Vec::new();
    let mut previous: Option<f64> = None;
    let mut t = first;
    while t < until {
        let now = active(t);
        if let Some(before) = previous
            && now < before
        {
            rates.push((now - before).abs() / period_s);
        }
        previous = Some(now);
        t += SAMPLE_PERIOD_NS;
    }
    if rates.len() <= 1 {
        return Err(SweepError::SaturationSamples {
            rates: rates.len(),
            timeout_s: timeout.as_secs_f64(),
        });
    }
    rates.sort_by(f64::total_cmp);
    Ok(percentile_linear(&rates, percentile / 100.0).unwrap_or(0.0))
}

/// `(sent_ns, end_ns)` of each of `records` that was sent: a request cancelled before it was sent was never
/// active.
fn sent(records: &[RequestRecord]) -> Vec<(u64, u64)> {
    records
        .iter()
        .filter(|r| r.was_sent())
        .map(|r| (r.sent_ns, r.end_ns))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The whole run in one launcher.
    const WHOLE: Shard = Shard { index: 0, count: 1 };
    const S: u64 = 1_000_000_000;
    const MS: u64 = 1_000_000;

    #[test]
    fn saturation_is_the_percentile_of_the_rates_at_which_requests_in_flight_fell() {
        // The schedule starts at 10 s; timeout 3 s: samples at 9.0, 9.5, 10.0, 10.5, 11.0, 11.5 (all < 9 + 3).
        // Four requests sent at 10.1–10.4, ending at 10.7, 10.8, 11.2 and 11.6:
        //   active = 0, 0, 0, 4 (10.5), 2 (11.0), 1 (11.5)
        // falls: 4 → 2 and 2 → 1 over 0.5 s each: rates 4/s and 2/s.
        // p95 of [2, 4], linear: 2 + 0.95 · (4 − 2) = 3.9; p50: 3.
        let requests = [
            (10_100 * MS, 10_700 * MS),
            (10_200 * MS, 10_800 * MS),
            (10_300 * MS, 11_200 * MS),
            (10_400 * MS, 11_600 * MS),
        ];
        let timeout = Duration::from_secs(3);
        let p95 = saturation_rate(&requests, 10 * S, timeout, 95.0).unwrap();
        assert!((p95 - 3.9).abs() < 1e-12, "{p95}");
        assert_eq!(saturation_rate(&requests, 10 * S, timeout, 50.0), Ok(3.0));
    }

    #[test]
    fn a_request_counts_from_its_send_and_not_at_its_end() {
        // Schedule at 10 s, timeout 3 s: samples 9.0 … 11.5. A is sent exactly on the 10.5 s sample and ends
        // exactly on the 11.0 s one; B is sent on 10.5 and ends on 11.5; C runs 10.4 → 11.7.
        //   active(10.5) = 3 (A, B, C: sent ≤ t), active(11.0) = 2 (A ended: t < end fails), active(11.5) = 1.
        // Falls 3 → 2 and 2 → 1: 2/s each, so every percentile is 2. (Counting a send only after its sample, or
        // an end only after it, would leave one fall or none, and inference-perf's error.)
        let requests = [
            (10_500 * MS, 11_000 * MS),
            (10_500 * MS, 11_500 * MS),
            (10_400 * MS, 11_700 * MS),
        ];
        assert_eq!(
            saturation_rate(&requests, 10 * S, Duration::from_secs(3), 95.0),
            Ok(2.0)
        );
        // One request alone falls once (1 → 0): inference-perf's "not enough samples".
        assert_eq!(
            saturation_rate(&requests[..1], 10 * S, Duration::from_secs(3), 95.0),
            Err(SweepError::SaturationSamples {
                rates: 1,
                timeout_s: 3.0
            })
        );
    }

    #[test]
    fn samples_at_or_after_the_timeout_window_are_left_out() {
        // Schedule at 10 s, timeout 2 s: samples 9.0, 9.5, 10.0, 10.5 (< 11.0). Requests in flight at 10.0,
        // ending between the samples 10.0 and 10.5 and between 10.5 and 11.0.
        let requests = [
            (10 * S - 1, 10_400 * MS),
            (10 * S - 1, 10_400 * MS),
            (10 * S - 1, 10_900 * MS),
        ];
        // active at 10.0 = 3, at 10.5 = 1: one fall (4/s); 10.5 → 11.0 (1 → 0) is outside the window.
        assert!(saturation_rate(&requests, 10 * S, Duration::from_secs(2), 95.0).is_err());
        // With a 2.5 s timeout the 11.0 sample counts: falls of 4/s and 2/s; p100 = 4, p0 = 2.
        let timeout = Duration::from_millis(2500);
        assert_eq!(saturation_rate(&requests, 10 * S, timeout, 100.0), Ok(4.0));
        assert_eq!(saturation_rate(&requests, 10 * S, timeout, 0.0), Ok(2.0));
    }

    #[test]
    fn a_probe_that_starts_in_the_runs_first_second_samples_before_the_clock() {
        // Schedule at 0.2 s: samples from −0.8 s. Requests sent at 0.25 s ending at 0.6, 0.6, 1.1 and 1.6 s:
        // samples −0.8, −0.3, 0.2 (0), 0.7 (2), 1.2 (1), 1.7 (0) with timeout 3 s (< 2.2): falls 2/s and 2/s.
        let requests = [
            (250 * MS, 600 * MS),
            (250 * MS, 600 * MS),
            (250 * MS, 650 * MS),
            (250 * MS, 1_100 * MS),
            (250 * MS, 1_600 * MS),
        ];
        // active at 0.7: the two ending at 0.6 and the one at 0.65 are gone → 2; at 1.2 → 1; at 1.7 → 0.
        assert_eq!(
            saturation_rate(&requests, 200 * MS, Duration::from_secs(3), 95.0),
            Ok(2.0)
        );
    }

    fn parse(harness: llmbench_workload::workload::Harness, yaml: &str) -> Workload {
        llmbench_workload::workload::parse_profile(harness, "t.yaml", yaml, &Default::default())
            .expect("parses")
            .workload
    }

    fn guidellm(extra_constraint: &str) -> Workload {
        parse(
            llmbench_workload::workload::Harness::Guidellm,
            &format!(
                "spec:\n  backend: {{kind: openai_http, target: http://x}}\n  \
                 data: [{{kind: synthetic_text, prompt_tokens: 8, output_tokens: 4}}]\n  \
                 profile: {{kind: sweep, sweep_size: 5, max_concurrency: 8}}\n  \
                 constraints: [{{kind: max_duration, seconds: 30}}{extra_constraint}]\n"
            ),
        )
    }

    /// A request sent at `sent_s` that ended at `end_s` (run-clock seconds), successful unless `failed`.
    fn record(id: u64, sent_s: f64, end_s: f64, failed: bool) -> RequestRecord {
        use llmbench_model::record::ErrorClass;
        let ns = |s: f64| (s * 1e9) as u64;
        let record = RequestRecord::builder(id)
            .sent(ns(sent_s))
            .end(ns(end_s))
            .input_tokens(8)
            .max_tokens(4)
            .streaming(false);
        if failed {
            record.status(500).error(ErrorClass::HttpStatus, "500")
        } else {
            record.ok()
        }
        .build()
    }

    /// Four requests one after the other, each 0.5 s, from `from_s`.
    fn sequential(from_s: f64, failed: bool) -> Vec<RequestRecord> {
        (0..4)
            .map(|i| {
                let start = from_s + 0.5 * i as f64;
                record(i, start, start + 0.5, failed)
            })
            .collect()
    }

    fn finished(planned: &PlannedStage, index: u32, records: Vec<RequestRecord>) -> FinishedStage {
        let start_ns = records.iter().map(|r| r.sent_ns).min().unwrap_or(0);
        let end_ns = records.iter().map(|r| r.end_ns).max().unwrap_or(0);
        FinishedStage {
            index,
            probe: planned.probe,
            times: engine::StageTimes {
                began_ns: start_ns,
                start_ns,
                end_ns,
                stopped: None,
                sessions: Vec::new(),
            },
            records,
        }
    }

    fn rate_of(planned: &PlannedStage) -> Option<f64> {
        planned.stage.requested_rate
    }

    #[test]
    fn the_guidellm_sweep_runs_synchronous_throughput_then_rates_between_their_rates() {
        let w = guidellm("");
        let sweep = sweep_plan(&w, WHOLE, None).unwrap().expect("a sweep");
        assert_eq!(sweep.stages(), 5);
        let mut planner = sweep.planner(0);
        let sync = planner.next_stage(None).unwrap().expect("synchronous");
        assert!(matches!(
            sync.stage.plan,
            engine::StagePlan::Closed { concurrency: 1, .. }
        ));
        assert_eq!(sync.meta.load, Some(LoadKind::Synchronous));
        assert!(sync.keep_records && !sync.probe);
        let sync_records = sequential(0.0, false);
        let s = llmbench_report::report::guidellm_successful_rate(&sync.meta, 0, 0, &sync_records);
        let throughput = planner
            .next_stage(Some(finished(&sync, 0, sync_records)))
            .unwrap()
            .expect("throughput");
        assert!(matches!(
            throughput.stage.plan,
            engine::StagePlan::Closed { concurrency: 8, .. }
        ));
        assert_eq!(throughput.meta.load, Some(LoadKind::Throughput));
        // Eight at once, each 0.25 s, four times over: a rate well above the synchronous one.
        let throughput_records: Vec<RequestRecord> = (0..32)
            .map(|i| {
                let start = 3.0 + 0.25 * (i / 8) as f64;
                record(i, start, start + 0.25, false)
            })
            .collect();
        let t = llmbench_report::report::guidellm_successful_rate(
            &throughput.meta,
            0,
            3_000_000_000,
            &throughput_records,
        );
        assert!(s > 0.0 && t > s, "{s} {t}");
        let mut next = planner
            .next_stage(Some(finished(&throughput, 1, throughput_records)))
            .unwrap();
        // linspace(s, t, 4)[1:], each a constant stage capped at the sweep's max_concurrency.
        let step = (t - s) / 3.0;
        for (index, rate) in [(2, step + s), (3, 2.0 * step + s), (4, t)] {
            let planned = next.expect("a rate stage");
            assert_eq!(rate_of(&planned), Some(rate));
            assert_eq!(planned.meta.load, Some(LoadKind::Constant));
            assert_eq!(planned.meta.concurrency, Some(8));
            assert!(!planned.keep_records);
            assert!(matches!(
                planned.stage.plan,
                engine::StagePlan::Open {
                    max_concurrency: Some(8),
                    ..
                }
            ));
            next = planner
                .next_stage(Some(finished(&planned, index, Vec::new())))
                .unwrap();
        }
        assert!(next.is_none(), "sweep_size 5 runs five stages");
    }

    #[test]
    fn a_guidellm_sweep_without_any_successful_rate_fails() {
        let mut planner = sweep_plan(&guidellm(""), WHOLE, None)
            .unwrap()
            .expect("a sweep")
            .planner(0);
        let sync = planner.next_stage(None).unwrap().expect("synchronous");
        let throughput = planner
            .next_stage(Some(finished(&sync, 0, sequential(0.0, true))))
            .unwrap()
            .expect("throughput");
        let error = planner
            .next_stage(Some(finished(&throughput, 1, sequential(3.0, true))))
            .expect_err("no rates");
        assert_eq!(
            error.downcast_ref::<SweepError>(),
            Some(&SweepError::NoSuccessfulRate {
                synchronous: 0.0,
                throughput: 0.0
            })
        );
        assert!(
            error
                .to_string()
                .contains("Were there any successful requests?")
        );
    }

    #[test]
    fn a_throughput_rate_below_the_synchronous_one_ends_the_sweep_at_its_first_non_positive_rate() {
        let mut planner = sweep_plan(&guidellm(""), WHOLE, None)
            .unwrap()
            .expect("a sweep")
            .planner(0);
        let sync = planner.next_stage(None).unwrap().expect("synchronous");
        let records = sequential(0.0, false);
        let s = llmbench_report::report::guidellm_successful_rate(&sync.meta, 0, 0, &records);
        let throughput = planner
            .next_stage(Some(finished(&sync, 0, records)))
            .unwrap()
            .expect("throughput");
        // Nothing succeeded at throughput: linspace(s, 0, 4)[1:] = 2s/3, s/3, 0 — the 0 is not run.
        let first = planner
            .next_stage(Some(finished(&throughput, 1, sequential(3.0, true))))
            .unwrap()
            .expect("2s/3");
        let step = (0.0 - s) / 3.0;
        assert_eq!(rate_of(&first), Some(step + s));
        let second = planner
            .next_stage(Some(finished(&first, 2, Vec::new())))
            .unwrap()
            .expect("s/3");
        assert_eq!(rate_of(&second), Some(2.0 * step + s));
        assert!(
            planner
                .next_stage(Some(finished(&second, 3, Vec::new())))
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn an_all_scope_error_limit_reaches_past_its_stage_only_in_the_rate_phase() {
        let w = guidellm(", {kind: max_errors, count: 3, stopping_scope: all}");
        let mut planner = sweep_plan(&w, WHOLE, None)
            .unwrap()
            .expect("a sweep")
            .planner(0);
        let scope = |p: &PlannedStage| p.stage.errors.max_errors.map(|l| (l.limit, l.scope));
        let sync = planner.next_stage(None).unwrap().expect("synchronous");
        assert_eq!(scope(&sync), Some((3, StopScope::Stage)));
        let records = sequential(0.0, false);
        let throughput = planner
            .next_stage(Some(finished(&sync, 0, records)))
            .unwrap()
            .expect("throughput");
        assert_eq!(scope(&throughput), Some((3, StopScope::Stage)));
        let rate = planner
            .next_stage(Some(finished(&throughput, 1, sequential(3.0, false))))
            .unwrap()
            .expect("a rate");
        assert_eq!(scope(&rate), Some((3, StopScope::Run)));
    }

    fn inference_perf(sweep: &str) -> Workload {
        parse(
            llmbench_workload::workload::Harness::InferencePerf,
            &format!("server:\n  base_url: http://x\nload:\n  type: constant\n  sweep: {sweep}\n"),
        )
    }

    #[test]
    fn the_inference_perf_sweep_probes_then_runs_generate_rates_of_the_saturation() {
        let w = inference_perf(
            "{type: linear, num_requests: 100, timeout: 12, num_stages: 3, stage_duration: 20}",
        );
        let mut planner = sweep_plan(&w, WHOLE, Some(7))
            .unwrap()
            .expect("a sweep")
            .planner(0);
        // The probe: 100 requests at 100/5 per second, the last exactly at 5 s; ended at the 12 s timeout; under
        // the workers' in-flight cap.
        let probe = planner.next_stage(None).unwrap().expect("the probe");
        assert!(probe.probe && probe.keep_records);
        assert_eq!(probe.deadline, Some(Duration::from_secs(12)));
        assert_eq!(rate_of(&probe), Some(20.0));
        let engine::StagePlan::Open {
            send_at,
            max_concurrency,
        } = &probe.stage.plan
        else {
            panic!("an open stage");
        };
        assert_eq!(send_at.len(), 100);
        assert_eq!(send_at.last(), Some(&Duration::from_secs(5)));
        assert_eq!(*max_concurrency, Some(7));

        // The first saturation test's requests, their schedule at 10 s; with this 12 s timeout the 12.0 s sample
        // counts too: falls of 4/s (10.5 → 11.0), 2/s (11.0 → 11.5) and 2/s (11.5 → 12.0). p95 of [2, 2, 4]:
        // 2 + 0.9 · (4 − 2) = 3.8; linspace(1, 3.8, 3) = 1, 2.4, 3.8; int(rate × 20) = 20, 48, 76 requests.
        let requests = [(10.1, 10.7), (10.2, 10.8), (10.3, 11.2), (10.4, 11.6)];
        let mut probe_done = finished(
            &probe,
            0,
            requests
                .iter()
                .enumerate()
                .map(|(i, (sent, end))| record(i as u64, *sent, *end, false))
                .collect(),
        );
        probe_done.times.start_ns = 10 * S;
        let mut next = planner.next_stage(Some(probe_done)).unwrap();
        for (index, (rate, requests)) in [(1.0, 20), (2.4, 48), (3.8, 76)].into_iter().enumerate() {
            let stage = next.expect("a stage");
            assert!(!stage.probe && !stage.keep_records && stage.deadline.is_none());
            assert_eq!(rate_of(&stage), Some(rate));
            assert_eq!(stage.meta.rate, Some(rate));
            assert_eq!(stage.meta.load, Some(LoadKind::Constant));
            assert_eq!(stage.meta.max_duration_s, Some(20.0));
            // run.json says what the profile asks; the cap applies to what is sent.
            assert_eq!(stage.meta.concurrency, None);
            let engine::StagePlan::Open {
                send_at,
                max_concurrency,
            } = &stage.stage.plan
            else {
                panic!("an open stage");
            };
            // int(rate × 20) arrivals.
            assert_eq!((send_at.len(), *max_concurrency), (requests, Some(7)));
            next = planner
                .next_stage(Some(finished(&stage, index as u32, Vec::new())))
                .unwrap();
        }
        assert!(next.is_none());
    }

    #[test]
    fn a_probe_with_too_few_falls_fails_the_sweep() {
        let mut planner = sweep_plan(&inference_perf("{type: geometric}"), WHOLE, None)
            .unwrap()
            .expect("a sweep")
            .planner(0);
        let probe = planner.next_stage(None).unwrap().expect("the probe");
        // inference-perf's defaults: 2000 requests, a 60 s timeout.
        assert_eq!(probe.deadline, Some(Duration::from_secs(60)));
        let error = planner
            .next_stage(Some(finished(&probe, 0, Vec::new())))
            .expect_err("no samples");
        assert!(
            error
                .to_string()
                .contains("try increasing the num_requests or timeout"),
            "{error}"
        );
    }

    #[test]
    fn a_sweep_across_shards_is_refused() {
        let w = inference_perf("{type: linear}");
        assert!(matches!(
            sweep_plan(&w, Shard { index: 0, count: 2 }, None),
            Err(PlanError::SweepSharded { count: 2, .. })
        ));
        assert!(matches!(
            crate::plan::engine_stages(&w),
            Err(PlanError::Adaptive { stage: 0, .. })
        ));
    }

    #[test]
    fn only_sent_requests_count_as_active() {
        use llmbench_model::record::ErrorClass;
        let record = |sent_ns: u64, end_ns: u64, cancelled: bool| {
            let record = RequestRecord::builder(0)
                .sent(sent_ns)
                .end(end_ns)
                .input_tokens(1)
                .streaming(false)
                .warmup();
            if cancelled {
                record.error(ErrorClass::Cancelled, "")
            } else {
                record
            }
            .build()
        };
        // A turn cancelled before it was sent (sent = end, no response) is not active.
        let records = [record(5 * S, 5 * S, true), record(5 * S, 6 * S, false)];
        assert_eq!(sent(&records), vec![(5 * S, 6 * S)]);
    }
}
