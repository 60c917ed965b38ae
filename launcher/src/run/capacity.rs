//! A capacity search inside one run: every point of the search is a stage of the run, sent with the profile's own
//! arrival process at the point's load, so the run's requests.jsonl, summary.json and every native report show the
//! whole curve, and `summary.json` gains a `capacity` block with the answer.
//!
//! A point's stage is the profile's first stage with its load replaced:
//! - rate: the dialect's own open-loop arrivals at the point's rate — inference-perf `constant`/`poisson`,
//!   guidellm `constant`/`poisson`, vllm bench serve gamma arrivals with the profile's burstiness — for the point's
//!   duration and request count (a closed-loop profile stage becomes the dialect's constant-rate arrivals);
//! - concurrency: a closed loop of that many requests in flight for the point's duration.
//!
//! The profile stage's `max_concurrency` cap (vllm `--max-concurrency`) and guidellm warm-up / cool-down windows
//! are kept: they are part of the treatment being measured. Error limits are not: a search point must run its
//! whole length to be judged.

use std::time::Duration;

use llmbench_core::capacity::{CapacitySearch, LoadAxis};
use llmbench_core::harness::Harness;

use crate::plan::{engine_stage, stage_meta};
use llmbench_engine::engine::{FinishedStage, PlannedStage, PlannerError, StagePlanner};
use llmbench_metrics::metrics::Summary;
use llmbench_metrics::metrics::capacity::{Point, Search};
use llmbench_model::record::RequestRecord;
use llmbench_report::report::{RunMeta, StageMeta};
use llmbench_workload::workload::{
    Arrival, LoadKind, Rate, Stage, StageLimit, Workload, stage_seed,
};

/// The stage that runs `point`, shaped like `template` (the profile's first stage) for `harness`.
pub(crate) fn point_stage(
    harness: Harness,
    template: &Stage,
    axis: LoadAxis,
    point: &Point,
) -> Stage {
    let (load, arrival, limit) = match axis {
        LoadAxis::Concurrency => (
            LoadKind::Concurrent,
            Arrival::Closed {
                concurrency: point.load.round().max(1.0) as u32,
                rampup: Duration::ZERO,
            },
            StageLimit::duration(point.duration),
        ),
        LoadAxis::Rate => {
            let rate = point.load;
            let requests = point
                .requests
                .unwrap_or_else(|| (rate * point.duration.as_secs_f64()).ceil() as u64)
                .max(1);
            let poisson = matches!(
                template.arrival,
                Arrival::InferencePerfPoisson { .. } | Arrival::GuidellmPoisson { .. }
            );
            match harness {
                Harness::InferencePerf => (
                    if poisson {
                        LoadKind::Poisson
                    } else {
                        LoadKind::Constant
                    },
                    if poisson {
                        Arrival::InferencePerfPoisson {
                            rate,
                            duration: point.duration,
                        }
                    } else {
                        Arrival::InferencePerfConstant {
                            rate,
                            duration: point.duration,
                        }
                    },
                    StageLimit::duration(point.duration),
                ),
                Harness::Guidellm => (
                    if poisson {
                        LoadKind::Poisson
                    } else {
                        LoadKind::Constant
                    },
                    if poisson {
                        Arrival::GuidellmPoisson { rate }
                    } else {
                        Arrival::GuidellmConstant {
                            rate,
                            rampup: Duration::ZERO,
                        }
                    },
                    // By count only: guidellm's i-th request goes at i/rate, so the last of ceil(rate × duration)
                    // falls on the duration itself, where a time limit would cut it.
                    StageLimit::requests(requests),
                ),
                // vllm bench serve and InferenceMAX (and anything else): gamma arrivals, burstiness kept.
                _ => {
                    let burstiness = match template.arrival {
                        Arrival::VllmGamma { burstiness, .. } => burstiness,
                        _ => 1.0,
                    };
                    (
                        if burstiness == 1.0 {
                            LoadKind::Poisson
                        } else {
                            LoadKind::Gamma
                        },
                        Arrival::VllmGamma {
                            rate: Rate::PerSecond(rate),
                            burstiness,
                            count: requests,
                        },
                        StageLimit::requests(requests),
                    )
                }
            }
        }
    };
    Stage {
        load,
        arrival,
        limit,
        max_concurrency: template.max_concurrency,
        warmup: template.warmup,
        cooldown: template.cooldown,
    }
}

/// How much longer than its planned length a point may take to drain before what is still in flight is cancelled
/// (and counted as failed, which fails the point): twice its length plus this.
const DRAIN_ALLOWANCE: Duration = Duration::from_secs(5);

/// The run's planner for a capacity search: each point a stage, judged on the stage's own summary.
pub(crate) struct CapacityPlanner {
    harness: Harness,
    template: Stage,
    seed: u64,
    in_flight_cap: Option<usize>,
    axis: LoadAxis,
    search: Search,
    /// The point running now, and what run.json says of its stage.
    current: Option<(Point, StageMeta)>,
    /// run.json as the run started: its goodput objectives and warm-up rules decide what a point measured.
    meta: RunMeta,
}

impl CapacityPlanner {
    /// A planner for `search`, its points shaped like `template` (the profile's first stage). The summary's
    /// `capacity` is not taken from here but replayed from the stages' figures (`llmbench_metrics::metrics::capacity::replay`), which
    /// gives the same outcome and survives `llmbench report`.
    pub(crate) fn new(
        workload: &Workload,
        template: Stage,
        search: CapacitySearch,
        in_flight_cap: Option<usize>,
        meta: &RunMeta,
    ) -> CapacityPlanner {
        CapacityPlanner {
            harness: workload.harness,
            template,
            seed: workload.seed,
            in_flight_cap,
            axis: search.load,
            search: Search::new(search),
            current: None,
            meta: meta.clone(),
        }
    }

    /// The summary of one finished point, exactly as summary.json will give its stage: its measured requests (a
    /// guidellm warm-up or cool-down left out) and the profile's goodput.
    fn point_summary(&self, index: u32, meta: StageMeta, records: &[RequestRecord]) -> Summary {
        let mut stage_meta = self.meta.clone();
        stage_meta.stages = vec![StageMeta::default(); index as usize];
        stage_meta.stages.push(meta);
        let summary = llmbench_report::report::summarize_run(&stage_meta, records);
        summary
            .stages
            .into_iter()
            .find(|s| s.stage == index)
            .map_or(summary.overall, |s| s.summary)
    }
}

impl StagePlanner for CapacityPlanner {
    fn next_stage(
        &mut self,
        finished: Option<FinishedStage>,
    ) -> Result<Option<PlannedStage>, PlannerError> {
        if let (Some(finished), Some((point, meta))) = (finished, self.current.take()) {
            let summary = self.point_summary(finished.index, meta, &finished.records);
            self.search.set_stage(finished.index);
            self.search.record(&point, &summary);
            let passed = self
                .search
                .outcome()
                .points
                .last()
                .is_some_and(|p| p.passed);
            tracing::info!(
                load = point.load,
                phase = ?point.phase,
                passed,
                "capacity search: point {} done",
                finished.index
            );
        }
        let Some(point) = self.search.next_point() else {
            return Ok(None);
        };
        let index = self.search.outcome().points.len();
        let stage = point_stage(self.harness, &self.template, self.axis, &point);
        let mut built = engine_stage(&stage, stage_seed(self.seed, index))
            .ok_or("a capacity search point cannot be a sweep")?;
        // A point runs its whole length: error limits would cut it short of a verdict.
        built.errors = llmbench_engine::engine::ErrorLimits::default();
        if let Some(cap) = self.in_flight_cap {
            crate::plan::cap_in_flight(std::slice::from_mut(&mut built), cap);
        }
        let meta = stage_meta(&built, Some(&stage));
        self.current = Some((point.clone(), meta));
        Ok(Some(PlannedStage {
            stage: built,
            keep_records: true,
            probe: false,
            deadline: Some(point.duration * 2 + DRAIN_ALLOWANCE),
            meta,
        }))
    }
}

/// Whether `spec` can run on `workload`: one launcher (the search decides from what it measures), no sweep of the
/// profile's own (both would decide the stages), a load stage to shape the points, and goodput objectives on the
/// requests when the search bounds goodput.
pub(crate) fn check(
    spec: &llmbench_core::capacity::CapacitySearchSpec,
    workload: &Workload,
    shard: crate::plan::Shard,
    has_sweep: bool,
) -> Result<CapacitySearch, String> {
    let search = CapacitySearch::try_from(spec).map_err(|e| e.to_string())?;
    if shard.count > 1 {
        return Err(format!(
            "a search decides each point from what the one launcher measured, so it cannot be spread over {} \
             launchers; run it with parallelism 1",
            shard.count
        ));
    }
    if has_sweep {
        return Err(
            "the profile is a sweep, which decides its own stages; remove the sweep or the capacity search"
                .to_owned(),
        );
    }
    if workload.stages.is_empty() {
        return Err("the profile has no load stage to shape the points".to_owned());
    }
    let bounds_goodput = search
        .objectives
        .iter()
        .any(|o| o.metric == llmbench_core::capacity::Metric::Goodput);
    if bounds_goodput && workload.goodput.is_empty() {
        return Err(
            "a goodput objective needs the per-request objectives that make a request good: set the profile's \
             goodput (vllm --goodput, inference-perf report.goodput) or bound the latencies directly"
                .to_owned(),
        );
    }
    Ok(search)
}
