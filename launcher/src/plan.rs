//! From the parsed workload to the engine's plan: each stage's arrival process becomes precomputed send times
//! (or a closed loop), seeded per stage so a run is reproducible.

use std::time::Duration;

use crate::engine;
use crate::workload::{Arrival, Rate, Schedule, Stage, Workload, schedule, stage_seed};

/// A stage the engine cannot run.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum PlanError {
    #[error(
        "stage {stage} is a {tool} sweep, whose rates come from a saturation probe; sweeps are not run yet — list \
         the rates as explicit stages instead"
    )]
    SweepNotRun { stage: usize, tool: &'static str },
    #[error("the workload has no load stages (harness {harness}); nothing to send")]
    NoStages { harness: String },
}

/// The engine stages of `workload`, with the rate each one asked for.
pub fn engine_stages(workload: &Workload) -> Result<Vec<engine::Stage>, PlanError> {
    if workload.stages.is_empty() {
        return Err(PlanError::NoStages {
            harness: workload.harness.to_string(),
        });
    }
    workload
        .stages
        .iter()
        .enumerate()
        .map(|(index, stage)| {
            let plan = match schedule(stage, stage_seed(workload.seed, index)) {
                Schedule::Open {
                    send_at,
                    max_in_flight,
                } => engine::StagePlan::Open {
                    send_at,
                    max_concurrency: max_in_flight.map(|n| n as usize),
                },
                Schedule::Closed {
                    concurrency,
                    total,
                    duration,
                    rampup,
                } => engine::StagePlan::Closed {
                    concurrency: concurrency as usize,
                    total,
                    duration,
                    rampup,
                },
                Schedule::Sweep(sweep) => {
                    let tool = match sweep {
                        crate::workload::Sweep::InferencePerf { .. } => "inference-perf",
                        crate::workload::Sweep::Guidellm { .. } => "guidellm",
                    };
                    return Err(PlanError::SweepNotRun { stage: index, tool });
                }
            };
            Ok(engine::Stage {
                plan,
                requested_rate: requested_rate(stage),
            })
        })
        .collect()
}

/// The rate a stage asked for; `None` for closed loops, whose rate is whatever the server sustains.
pub fn requested_rate(stage: &Stage) -> Option<f64> {
    match &stage.arrival {
        Arrival::InferencePerfConstant { rate, .. }
        | Arrival::InferencePerfPoisson { rate, .. }
        | Arrival::GuidellmConstant { rate, .. }
        | Arrival::GuidellmPoisson { rate } => Some(*rate),
        Arrival::VllmGamma {
            rate: Rate::PerSecond(rate),
            ..
        } => Some(*rate),
        Arrival::VllmGamma {
            rate: Rate::Infinite,
            ..
        }
        | Arrival::Closed { .. }
        | Arrival::Sweep(_) => None,
    }
}

/// How many requests the plan issues, when that is known in advance (closed loops bounded only by time are
/// not), and how long it is expected to take at least.
pub fn expected_size(
    stages: &[engine::Stage],
    interval: Duration,
) -> (Option<u64>, Option<Duration>) {
    let mut requests = Some(0u64);
    let mut duration = Duration::ZERO;
    for (index, stage) in stages.iter().enumerate() {
        if index > 0 {
            duration += interval;
        }
        match &stage.plan {
            engine::StagePlan::Open { send_at, .. } => {
                requests = requests.map(|r| r + send_at.len() as u64);
                duration += send_at.last().copied().unwrap_or_default();
            }
            engine::StagePlan::Closed {
                total, duration: d, ..
            } => {
                requests = requests.zip(*total).map(|(r, t)| r + t);
                duration += d.unwrap_or_default();
            }
        }
    }
    (requests, Some(duration).filter(|d| !d.is_zero()))
}
