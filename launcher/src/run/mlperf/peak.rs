//! `mode: FindPeakPerformance` (LoadGen's mode 3) on the engine: every pass of LoadGen's peak search
//! ([`llmbench_metrics::mlperf::peak`]) is a stage of one adaptive run, planned once the pass before it is judged,
//! each a Server performance pass at its own `target_qps` with LoadGen's schedule and sample order for that rate
//! (every pass starts its sample and schedule generators from their seeds, as `GenerateQueries` does). The result
//! files are the peak pass's: `mlperf_log_summary.txt` and the detail log's results, with every pass and search
//! message before them.

use std::sync::{Arc, Mutex, PoisonError};

use llmbench_engine::engine::{
    FinishedStage, PlannedStage, PlannerError, PreparedRequest, Requests, Stage, StagePlanner,
    StageRequests, StageTimes,
};
use llmbench_metrics::mlperf::peak::{PeakLine, PeakSearch, PeakStep, qps_field};
use llmbench_metrics::mlperf::{MlperfSettings, Mode, RunTimes, Verdict, build_schedule, evaluate};

/// A pass the search ran, judged.
pub(super) struct PeakPass {
    pub(super) target_qps: f64,
    /// The search's lines logged before the pass.
    pub(super) lines: Vec<PeakLine>,
    pub(super) generated_queries: u64,
    /// Its stage among the run's, the id of its first request and the dataset index of each request.
    pub(super) stage: u32,
    pub(super) first_id: u64,
    pub(super) samples: Vec<usize>,
    pub(super) times: StageTimes,
    pub(super) verdict: Verdict,
}

/// How the search ended: the result pass, the lines logged after the last pass, LoadGen's error if the lower bound
/// failed.
pub(super) struct PeakOutcome {
    pub(super) pass: usize,
    pub(super) lines: Vec<PeakLine>,
    pub(super) error: Option<String>,
}

/// What the planner and the per-stage requests share, and what the runner reads once the run is over.
#[derive(Default)]
pub(super) struct PeakShared {
    /// The dataset index of every request of the stage just planned, for [`PeakRequests`].
    pending: Option<Vec<usize>>,
    /// The id the engine gives the next request (ids run on across stages).
    next_id: u64,
    pub(super) passes: Vec<PeakPass>,
    pub(super) outcome: Option<PeakOutcome>,
}

pub(super) type Shared = Arc<Mutex<PeakShared>>;

fn lock(shared: &Shared) -> std::sync::MutexGuard<'_, PeakShared> {
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The pass now running: its QPS, the lines logged before it, its query count, its first request's id and the
/// dataset index of each of its requests.
pub(super) struct Running {
    target_qps: f64,
    lines: Vec<PeakLine>,
    generated_queries: u64,
    first_id: u64,
    samples: Vec<usize>,
}

/// The search as an adaptive run's planner.
pub(super) struct PeakPlanner {
    pub(super) shared: Shared,
    /// The run's settings (mode FindPeakPerformance, the requested `target_qps`).
    pub(super) settings: MlperfSettings,
    pub(super) dataset_len: usize,
    /// The warm-up stage and its samples, run before the first pass when the profile asks for one.
    pub(super) warmup: Option<(Stage, Vec<usize>)>,
    pub(super) search: PeakSearch,
    /// The pass now running.
    pub(super) running: Option<Running>,
}

impl PeakPlanner {
    /// The settings of a pass at `target_qps`: LoadGen copies the base settings and changes only the rate.
    fn pass_settings(&self, target_qps: f64) -> MlperfSettings {
        MlperfSettings {
            target_qps,
            ..self.settings.clone()
        }
    }

    fn plan(&self, stage: Stage, samples: Vec<usize>) -> PlannedStage {
        lock(&self.shared).pending = Some(samples);
        PlannedStage {
            meta: crate::plan::stage_meta(&stage, None),
            stage,
            keep_records: true,
            probe: false,
            deadline: None,
        }
    }

    /// Judges the pass that just ran as `PerfConstraintsMet` does; returns whether it met them and the
    /// recommendation when it did not.
    fn judge(&mut self, finished: &FinishedStage) -> Option<(bool, String)> {
        let Running {
            target_qps,
            lines,
            generated_queries,
            first_id,
            samples,
        } = self.running.take()?;
        let settings = self.pass_settings(target_qps);
        let verdict = evaluate(
            &settings,
            &finished.records,
            &RunTimes {
                measured_stage: finished.index,
                start_ns: finished.times.start_ns,
                end_ns: finished.times.end_ns,
            },
        );
        let met = verdict.checks.performance_constraints.unwrap_or(true);
        let recommendation = verdict
            .recommendations
            .iter()
            .find(|r| r.contains("constrain not met"))
            .cloned()
            .unwrap_or_default();
        tracing::info!(
            target_qps = %qps_field(target_qps),
            met,
            "FindPeakPerformance: pass judged"
        );
        lock(&self.shared).passes.push(PeakPass {
            target_qps,
            lines,
            generated_queries,
            stage: finished.index,
            first_id,
            samples,
            times: finished.times.clone(),
            verdict,
        });
        Some((met, recommendation))
    }
}

impl StagePlanner for PeakPlanner {
    fn next_stage(
        &mut self,
        finished: Option<FinishedStage>,
    ) -> Result<Option<PlannedStage>, PlannerError> {
        let mut last = None;
        if let Some(finished) = &finished {
            let issued = finished.records.iter().map(|r| r.id + 1).max();
            if let Some(issued) = issued {
                let mut shared = lock(&self.shared);
                shared.next_id = shared.next_id.max(issued);
            }
            last = self.judge(finished);
        }
        if let Some((stage, samples)) = self.warmup.take() {
            return Ok(Some(self.plan(stage, samples)));
        }
        let last = last.as_ref().map(|(met, msg)| (*met, msg.as_str()));
        match self.search.next(last) {
            PeakStep::Run { target_qps, lines } => {
                let mut schedule = build_schedule(
                    &MlperfSettings {
                        mode: Mode::PerformanceOnly,
                        warmup_queries: 0,
                        ..self.pass_settings(target_qps)
                    },
                    self.dataset_len,
                )?;
                let stage = schedule
                    .stages
                    .pop()
                    .ok_or("the peak search's pass has no stage")?;
                self.running = Some(Running {
                    target_qps,
                    lines,
                    generated_queries: schedule.generated_queries,
                    first_id: lock(&self.shared).next_id,
                    samples: schedule.samples.clone(),
                });
                Ok(Some(self.plan(stage, schedule.samples)))
            }
            PeakStep::Done { pass, lines, error } => {
                lock(&self.shared).outcome = Some(PeakOutcome { pass, lines, error });
                Ok(None)
            }
        }
    }
}

/// Each pass's requests: its samples in its own order, from its first request on.
pub(super) struct PeakRequests {
    pub(super) shared: Shared,
    /// The request body of every dataset sample.
    pub(super) prepared: Arc<[PreparedRequest]>,
}

impl StageRequests for PeakRequests {
    fn requests(&mut self, _nth: u32, _stage: &Stage) -> Result<Option<Requests>, PlannerError> {
        let (samples, first_id) = {
            let mut shared = lock(&self.shared);
            (shared.pending.take(), shared.next_id)
        };
        let Some(samples) = samples.filter(|s| !s.is_empty()) else {
            return Ok(None);
        };
        Ok(Some(Requests::Fixed(rotated(
            &samples,
            first_id,
            &self.prepared,
        ))))
    }
}

/// The engine sends request `id` from `list[id mod len]`, ids running on across stages; a pass's `j`-th
/// request is `samples[j]`, so the list is the samples rotated by the pass's first id.
fn rotated<T: Clone>(samples: &[usize], first_id: u64, bodies: &[T]) -> Arc<[T]> {
    let n = samples.len();
    let shift = (first_id % n as u64) as usize;
    (0..n)
        .map(|i| bodies[samples[(i + n - shift) % n]].clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pass_sends_its_first_sample_first_whatever_id_it_starts_at() {
        let bodies = ["s0", "s1", "s2", "s3", "s4"];
        let samples = [3, 1, 4];
        // Ids 7, 8, 9 take list[7 mod 3 = 1], list[2], list[0]: samples 3, 1, 4 in that order.
        let list = rotated(&samples, 7, &bodies);
        let sent: Vec<&str> = (7..10).map(|id| list[id % 3]).collect();
        assert_eq!(sent, ["s3", "s1", "s4"]);
        // From id 0 the list is the samples as they are.
        assert_eq!(&*rotated(&samples, 0, &bodies), ["s3", "s1", "s4"]);
    }
}
