//! From the parsed workload to the engine's plan: each stage's arrival process becomes precomputed send times
//! (or a closed loop), seeded per stage so a run is reproducible. A sweep's stages depend on what the run
//! measures, so they are decided as it goes ([`sweep`]).

mod sweep;

use std::time::Duration;

pub(crate) use sweep::sweep_plan;

use llmbench_engine::engine;
use llmbench_workload::workload::stage_meta::StageMeta;
use llmbench_workload::workload::{
    AiperfPace, Arrival, Rate, Schedule, Stage, WorkerSettings, Workload, schedule, stage_seed,
};

/// A stage the engine cannot run.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum PlanError {
    #[error(
        "stage {stage} is a {tool} sweep, whose stages are decided as the run goes from what it measures; it has no \
         fixed plan (plan it with `plan::sweep_plan`)"
    )]
    Adaptive { stage: usize, tool: &'static str },
    #[error(
        "a {tool} sweep cannot be spread over {count} launchers (--shard): its rates come from what {measured} \
         measured, which each launcher would measure for its own share only; run the sweep in one launcher"
    )]
    SweepSharded {
        tool: &'static str,
        measured: &'static str,
        count: u32,
    },
    #[error(
        "the {tool} sweep must be the workload's only load (inference-perf) or follow its synchronous and \
         throughput stages (guidellm); found it at stage {stage} of {stages}"
    )]
    SweepShape {
        tool: &'static str,
        stage: usize,
        stages: usize,
    },
    #[error(
        "stage {stage} replays a trace, whose send times are in the trace file; it is planned from the file when \
         the run starts (`trace::replay_plan`)"
    )]
    Trace { stage: usize },
    #[error(
        "stage {stage} is AIPerf's request-rate loop, which cannot be spread over {count} launchers (--shard, \
         launcher.parallelism): each wait follows the send before it, and a send held by the concurrency delays \
         every later one, so no split sends what one loop sends; run it in one launcher"
    )]
    PacedSharded { stage: usize, count: u32 },
    #[error("the workload has no load stages (harness {harness}); nothing to send")]
    NoStages { harness: String },
    #[error(
        "stage {stage}'s {what} of {limit} cannot be spread over {count} launchers (--shard, launcher.parallelism): \
         each launcher needs at least one stream of it, so together they would not send what one launcher sends; \
         use at most {limit} launchers"
    )]
    ShardTooNarrow {
        stage: usize,
        what: &'static str,
        limit: usize,
        count: u32,
    },
}

/// The engine stages of `workload`, with the rate each one asked for. A workload with a sweep has none: see
/// [`sweep_plan`].
pub(crate) fn engine_stages(workload: &Workload) -> Result<Vec<engine::Stage>, PlanError> {
    if workload.stages.is_empty() {
        return Err(PlanError::NoStages {
            harness: workload.harness.to_string(),
        });
    }
    // One state for the run: a breaker that opened in a stage stays open for the next.
    let breakers = engine::RunBreakers::new(&workload.circuit_breakers);
    workload
        .stages
        .iter()
        .enumerate()
        .map(|(index, stage)| {
            if matches!(
                stage.arrival,
                Arrival::MooncakeTrace { .. }
                    | Arrival::InferencePerfTrace { .. }
                    | Arrival::GuidellmReplay { .. }
                    | Arrival::TraceSessions { .. }
            ) {
                return Err(PlanError::Trace { stage: index });
            }
            let mut engine_stage = engine_stage(stage, stage_seed(workload.seed, index))
                .ok_or_else(|| PlanError::Adaptive {
                    stage: index,
                    tool: sweep_tool(stage),
                })?;
            engine_stage.errors.breakers = breakers.clone();
            Ok(engine_stage)
        })
        .collect()
}

/// The tool whose sweep `stage` is.
fn sweep_tool(stage: &Stage) -> &'static str {
    match &stage.arrival {
        Arrival::Sweep(llmbench_workload::workload::Sweep::InferencePerf { .. }) => {
            "inference-perf"
        }
        _ => "guidellm",
    }
}

/// One workload stage as the engine runs it, its arrivals drawn with `seed`; `None` for a sweep.
pub(crate) fn engine_stage(stage: &Stage, seed: u64) -> Option<engine::Stage> {
    let plan = match schedule(stage, seed) {
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
        Schedule::Paced {
            pace,
            max_in_flight,
            total,
            duration,
            grace,
            warmup,
            sessions,
            credits,
        } => engine::StagePlan::Paced(Box::new(engine::Paced {
            pace,
            max_concurrency: max_in_flight.map(|n| n as usize),
            total,
            duration,
            grace,
            warmup,
            sessions,
            credits,
        })),
        Schedule::Sweep(_) | Schedule::Trace => return None,
    };
    Some(engine::Stage {
        plan,
        requested_rate: requested_rate(stage),
        errors: engine::ErrorLimits {
            max_errors: stage.limit.max_errors,
            max_error_rate: stage.limit.max_error_rate,
            max_global_error_rate: stage.limit.max_global_error_rate,
            breakers: None,
            over_saturation: stage.limit.over_saturation,
            failed_request_threshold: stage.limit.failed_request_threshold,
        },
    })
}

/// What run.json records of a stage: its load, the rate or concurrency the profile asked of the whole run, and
/// what decides which of its requests are measured.
pub(crate) fn stage_meta(stage: &engine::Stage, workload_stage: Option<&Stage>) -> StageMeta {
    let concurrency = match &stage.plan {
        engine::StagePlan::Open {
            max_concurrency, ..
        } => *max_concurrency,
        engine::StagePlan::Closed { concurrency, .. } => Some(*concurrency),
        engine::StagePlan::Paced(paced) => paced.max_concurrency,
        engine::StagePlan::Trace(replay) => replay.concurrency,
        engine::StagePlan::Sessions(replay) => {
            Some(replay.concurrent_sessions as usize).filter(|c| *c > 0)
        }
        engine::StagePlan::LmBench(stage) => Some(stage.run.num_users as usize),
        engine::StagePlan::Lockstep(lockstep) => Some(lockstep.group),
    };
    StageMeta {
        load: workload_stage.map(|s| s.load),
        rate: stage.requested_rate,
        concurrency: concurrency.and_then(|c| u32::try_from(c).ok()),
        max_requests: workload_stage.and_then(|s| s.limit.requests),
        max_duration_s: workload_stage
            .and_then(|s| s.limit.duration)
            .map(|d| d.as_secs_f64()),
        warmup: workload_stage.and_then(|s| s.warmup),
        cooldown: workload_stage.and_then(|s| s.cooldown),
        burstiness: workload_stage.and_then(|s| match s.arrival {
            Arrival::VllmGamma { burstiness, .. } => Some(
                llmbench_workload::workload::stage_meta::Burstiness::of(burstiness),
            ),
            _ => None,
        }),
        session_rate: match &stage.plan {
            engine::StagePlan::Sessions(replay) => replay.session_rate,
            _ => None,
        },
    }
}

/// inference-perf's in-flight cap: each of `num_workers` worker processes holds `worker_max_concurrency`
/// semaphore slots (default 100), so no more than their product are ever in flight, whatever the load asks
/// (`loadgen/load_generator.py`). Without `num_workers` inference-perf starts one worker per CPU; `cpus` is ours
/// (the cgroup's, where inference-perf counts the node's: inference-perf PR #722).
pub(crate) fn inference_perf_worker_cap(workers: &WorkerSettings, cpus: usize) -> usize {
    const DEFAULT_WORKER_MAX_CONCURRENCY: u64 = 100;
    let processes = workers.num_workers.map_or(cpus as u64, u64::from).max(1);
    let per_worker = workers
        .worker_max_concurrency
        .map_or(DEFAULT_WORKER_MAX_CONCURRENCY, u64::from);
    usize::try_from(processes.saturating_mul(per_worker)).unwrap_or(usize::MAX)
}

/// Caps what `stages` keep in flight at `cap`: an open stage waits for a free slot (the wait is schedule delay),
/// a closed loop runs at most `cap` at once.
pub(crate) fn cap_in_flight(stages: &mut [engine::Stage], cap: usize) {
    for stage in stages {
        match &mut stage.plan {
            engine::StagePlan::Open {
                max_concurrency, ..
            } => *max_concurrency = Some(max_concurrency.map_or(cap, |c| c.min(cap))),
            engine::StagePlan::Closed { concurrency, .. } => *concurrency = (*concurrency).min(cap),
            // AIPerf's rate loop has its own `--concurrency` and nothing else; it is not an inference-perf workload.
            engine::StagePlan::Paced(_) => {}
            // AIPerf caps nothing on its fixed schedule; a replay is not an inference-perf workload.
            engine::StagePlan::Trace(_) => {}
            // Capped when planned: its cap holds calls waiting for their predecessors too.
            engine::StagePlan::Sessions(_) => {}
            // Its users have at most one request each in flight; upstream has no other cap.
            engine::StagePlan::LmBench(_) => {}
            // MLPerf's MultiStream query size is the benchmark's definition, not a load to cap.
            engine::StagePlan::Lockstep(_) => {}
        }
    }
}

/// The rate a stage asked for; `None` for closed loops, whose rate is whatever the server sustains.
pub(crate) fn requested_rate(stage: &Stage) -> Option<f64> {
    match &stage.arrival {
        Arrival::InferencePerfConstant { rate, .. }
        | Arrival::InferencePerfPoisson { rate, .. }
        | Arrival::GuidellmConstant { rate, .. }
        | Arrival::GuidellmPoisson { rate }
        | Arrival::AiperfRate {
            pace:
                AiperfPace::Poisson { rate, .. }
                | AiperfPace::Gamma { rate, .. }
                | AiperfPace::Constant { rate }
                | AiperfPace::UserCentric { rate, .. },
            ..
        } => Some(*rate),
        Arrival::VllmGamma {
            rate: Rate::PerSecond(rate),
            ..
        } => Some(*rate),
        // A ramp has no one rate: each request goes at its own.
        Arrival::VllmGamma {
            rate: Rate::Infinite | Rate::RampUp(_),
            ..
        }
        | Arrival::AiperfRate {
            pace: AiperfPace::Burst,
            ..
        }
        | Arrival::Closed { .. }
        | Arrival::Sweep(_)
        | Arrival::MooncakeTrace { .. }
        | Arrival::InferencePerfTrace { .. }
        | Arrival::GuidellmReplay { .. }
        | Arrival::TraceSessions { .. } => None,
    }
}

/// How many requests the plan issues, when that is known in advance (closed loops bounded only by time are
/// not), and how long it is expected to take at least.
pub(crate) fn expected_size(
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
            // A count is sent in full; a duration sends what its gaps and concurrency allow.
            engine::StagePlan::Paced(paced) => {
                // The warm-up phase's requests are sent and recorded too.
                requests = requests.zip(paced.total).map(|(r, t)| r + t + paced.warmup);
                duration += paced.duration.unwrap_or_else(|| {
                    let sends = paced.warmup + paced.total.unwrap_or(0);
                    paced
                        .pace
                        .mean_interval()
                        .saturating_mul(u32::try_from(sends).unwrap_or(u32::MAX))
                });
            }
            engine::StagePlan::Trace(replay) => {
                requests = requests.map(|r| r + replay.requests());
                duration += replay.span();
            }
            // Every call of every session, unless one fails (its successors are then not sent).
            engine::StagePlan::Sessions(replay) => {
                requests = requests.map(|r| r + replay.requests());
            }
            // Sessions send what their users' answers allow: the count is not known in advance.
            engine::StagePlan::LmBench(stage) => {
                requests = None;
                duration += Duration::from_secs(stage.warmup.time + stage.run.time);
            }
            // At most the generated queries; the issue loop may end sooner.
            engine::StagePlan::Lockstep(lockstep) => {
                requests = requests.map(|r| r + lockstep.queries * lockstep.group as u64);
                duration += lockstep.min_duration;
            }
        }
    }
    (requests, Some(duration).filter(|d| !d.is_zero()))
}

/// One launcher's share of a run spread over `count` launcher pods (`--shard index/count`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

impl Shard {
    /// Parses `index/count`, with `index < count`.
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        let (index, count) = text
            .split_once('/')
            .ok_or_else(|| format!("--shard {text:?}: expected INDEX/COUNT, e.g. 0/4"))?;
        let index: u32 = index
            .trim()
            .parse()
            .map_err(|_| format!("--shard {text:?}: INDEX is not a number"))?;
        let count: u32 = count
            .trim()
            .parse()
            .map_err(|_| format!("--shard {text:?}: COUNT is not a number"))?;
        if count == 0 || index >= count {
            return Err(format!(
                "--shard {text:?}: INDEX must be below COUNT, and COUNT at least 1"
            ));
        }
        Ok(Shard { index, count })
    }

    /// This launcher's part of `count` things: an even split, the first `count % shards` launchers taking one more.
    fn part(self, count: u64) -> u64 {
        let (n, i) = (u64::from(self.count), u64::from(self.index));
        count / n + u64::from(i < count % n)
    }

    /// This launcher's part of `stages`. Every launcher computes the same seeded schedule and keeps every
    /// `count`-th arrival starting at its index, so together they send exactly the whole schedule; closed loops split
    /// their concurrency and totals, and a cap on what is in flight is split too. A concurrency (or cap) below the
    /// number of launchers cannot be split so that each has a stream, and is refused.
    pub(crate) fn apply(self, stages: Vec<engine::Stage>) -> Result<Vec<engine::Stage>, PlanError> {
        if self.count == 1 {
            return Ok(stages);
        }
        let too_narrow = |stage: usize, what: &'static str, limit: usize| {
            (limit < self.count as usize).then_some(PlanError::ShardTooNarrow {
                stage,
                what,
                limit,
                count: self.count,
            })
        };
        stages
            .into_iter()
            .enumerate()
            .map(|(index, stage)| {
                let plan = match stage.plan {
                    engine::StagePlan::Open {
                        send_at,
                        max_concurrency,
                    } => {
                        if let Some(refused) =
                            max_concurrency.and_then(|c| too_narrow(index, "max concurrency", c))
                        {
                            return Err(refused);
                        }
                        engine::StagePlan::Open {
                            send_at: send_at
                                .into_iter()
                                .skip(self.index as usize)
                                .step_by(self.count as usize)
                                .collect(),
                            max_concurrency: max_concurrency.map(|c| self.part(c as u64) as usize),
                        }
                    }
                    engine::StagePlan::Closed {
                        concurrency,
                        total,
                        duration,
                        rampup,
                    } => {
                        if let Some(refused) = too_narrow(index, "concurrency", concurrency) {
                            return Err(refused);
                        }
                        engine::StagePlan::Closed {
                            concurrency: self.part(concurrency as u64) as usize,
                            total: total.map(|t| self.part(t)),
                            duration,
                            rampup,
                        }
                    }
                    engine::StagePlan::Paced(_) => {
                        return Err(PlanError::PacedSharded {
                            stage: index,
                            count: self.count,
                        });
                    }
                    engine::StagePlan::Trace(replay) => {
                        if let Some(refused) = too_narrow(index, "sessions", replay.sessions.len())
                        {
                            return Err(refused);
                        }
                        engine::StagePlan::Trace(std::sync::Arc::new(
                            replay.shard(self.index, self.count),
                        ))
                    }
                    engine::StagePlan::Sessions(replay) => {
                        if let Some(refused) = too_narrow(index, "sessions", replay.sessions.len())
                        {
                            return Err(refused);
                        }
                        engine::StagePlan::Sessions(std::sync::Arc::new(
                            replay.shard(self.index, self.count),
                        ))
                    }
                    // LMBenchmark's users belong to one step loop; the fmperf runner refuses a sharded run.
                    plan @ engine::StagePlan::LmBench(_) => plan,
                    // One issuer's queries follow each other; the mlperf runner refuses a sharded run.
                    plan @ engine::StagePlan::Lockstep(_) => plan,
                };
                Ok(engine::Stage {
                    plan,
                    requested_rate: stage.requested_rate.map(|r| r / f64::from(self.count)),
                    errors: stage.errors,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inference_perf_caps_what_is_in_flight_at_workers_times_their_concurrency() {
        // 2 workers × 10 slots: 20; defaults: one worker per CPU × 100.
        let two_by_ten = WorkerSettings {
            num_workers: Some(2),
            worker_max_concurrency: Some(10),
            ..WorkerSettings::default()
        };
        assert_eq!(inference_perf_worker_cap(&two_by_ten, 16), 20);
        assert_eq!(
            inference_perf_worker_cap(&WorkerSettings::default(), 4),
            400
        );
        let mut stages = vec![open(5), closed_stage(50)];
        cap_in_flight(&mut stages, 20);
        assert!(matches!(
            stages[0].plan,
            engine::StagePlan::Open {
                max_concurrency: Some(20),
                ..
            }
        ));
        assert!(matches!(
            stages[1].plan,
            engine::StagePlan::Closed {
                concurrency: 20,
                ..
            }
        ));
    }

    fn closed_stage(concurrency: usize) -> engine::Stage {
        engine::Stage {
            plan: engine::StagePlan::Closed {
                concurrency,
                total: Some(100),
                duration: None,
                rampup: Duration::ZERO,
            },
            requested_rate: None,
            errors: engine::ErrorLimits::default(),
        }
    }

    fn open(n: u64) -> engine::Stage {
        engine::Stage {
            plan: engine::StagePlan::Open {
                send_at: (0..n).map(Duration::from_millis).collect(),
                max_concurrency: None,
            },
            requested_rate: Some(10.0),
            errors: engine::ErrorLimits::default(),
        }
    }

    #[test]
    fn shards_together_send_exactly_the_whole_schedule() {
        let mut all: Vec<Duration> = Vec::new();
        for index in 0..3 {
            let shard = Shard { index, count: 3 };
            let stages = shard.apply(vec![open(10)]).unwrap();
            let engine::StagePlan::Open { send_at, .. } = &stages[0].plan else {
                panic!("open stays open");
            };
            assert_eq!(stages[0].requested_rate, Some(10.0 / 3.0));
            all.extend(send_at);
        }
        all.sort();
        assert_eq!(all, (0..10).map(Duration::from_millis).collect::<Vec<_>>());
    }

    #[test]
    fn closed_loops_split_concurrency_and_totals_evenly() {
        let closed = engine::Stage {
            plan: engine::StagePlan::Closed {
                concurrency: 10,
                total: Some(101),
                duration: None,
                rampup: Duration::ZERO,
            },
            requested_rate: None,
            errors: engine::ErrorLimits::default(),
        };
        let parts: Vec<(usize, Option<u64>)> = (0..4)
            .map(|index| {
                match &(Shard { index, count: 4 })
                    .apply(vec![closed.clone()])
                    .unwrap()[0]
                    .plan
                {
                    engine::StagePlan::Closed {
                        concurrency, total, ..
                    } => (*concurrency, *total),
                    engine::StagePlan::Open { .. }
                    | engine::StagePlan::Paced(_)
                    | engine::StagePlan::Trace(_)
                    | engine::StagePlan::Sessions(_)
                    | engine::StagePlan::LmBench(_)
                    | engine::StagePlan::Lockstep(_) => {
                        panic!("closed stays closed")
                    }
                }
            })
            .collect();
        assert_eq!(
            parts,
            vec![(3, Some(26)), (3, Some(25)), (2, Some(25)), (2, Some(25))]
        );
    }

    #[test]
    fn aiperfs_rate_loop_is_refused_over_several_launchers() {
        let paced = engine::Stage {
            plan: engine::StagePlan::Paced(Box::new(engine::Paced {
                pace: llmbench_workload::workload::AiperfPace::Constant { rate: 10.0 },
                max_concurrency: Some(4),
                total: Some(4),
                duration: None,
                grace: None,
                warmup: 0,
                sessions: None,
                credits: llmbench_workload::workload::AiperfCredits::default(),
            })),
            requested_rate: Some(10.0),
            errors: engine::ErrorLimits::default(),
        };
        assert_eq!(
            Shard { index: 0, count: 2 }
                .apply(vec![paced.clone()])
                .unwrap_err(),
            PlanError::PacedSharded { stage: 0, count: 2 }
        );
        // One launcher runs it whole.
        assert!(Shard { index: 0, count: 1 }.apply(vec![paced]).is_ok());
    }

    #[test]
    fn a_concurrency_below_the_launcher_count_is_refused_not_lost() {
        let shard = Shard { index: 3, count: 4 };
        let error = shard
            .apply(vec![closed_stage(4), closed_stage(3)])
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "stage 1's concurrency of 3 cannot be spread over 4 launchers (--shard, launcher.parallelism): each \
             launcher needs at least one stream of it, so together they would not send what one launcher sends; use \
             at most 3 launchers"
        );
        let mut capped = open(10);
        if let engine::StagePlan::Open {
            max_concurrency, ..
        } = &mut capped.plan
        {
            *max_concurrency = Some(2);
        }
        assert!(matches!(
            shard.apply(vec![capped]),
            Err(PlanError::ShardTooNarrow {
                what: "max concurrency",
                limit: 2,
                ..
            })
        ));
    }

    #[test]
    fn shard_specs_are_validated() {
        assert_eq!(Shard::parse("1/4"), Ok(Shard { index: 1, count: 4 }));
        for bad in ["4/4", "1", "a/2", "0/0"] {
            assert!(Shard::parse(bad).is_err(), "{bad}");
        }
    }

    /// Every upstream profile with a fixed plan, spread over 2, 3 and 4 launchers: the launchers' arrivals together are
    /// exactly the one-launcher schedule (open loops), their concurrencies, caps and request totals add up to the
    /// whole (closed loops), or the split is refused because a concurrency is below the launcher count. Sweeps are
    /// decided as they run and are refused for shards elsewhere (`PlanError::SweepSharded`).
    #[test]
    fn every_upstream_profile_spread_over_launchers_sends_exactly_the_whole_schedule() {
        use crate::plan::{PlanError, Shard, engine_stages};
        use llmbench_engine::engine::StagePlan;
        use llmbench_workload::workload::testing::{PROFILES, upstream};
        let (mut open, mut closed, mut refused) = (0, 0, 0);
        for harness in [
            "inference-perf",
            "guidellm",
            "vllm-benchmark",
            "inferencemax",
        ] {
            let dir = format!("{PROFILES}/{harness}");
            let mut files: Vec<String> = std::fs::read_dir(&dir)
                .unwrap_or_else(|e| panic!("{dir}: {e}"))
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            files.sort();
            for file in files {
                let Ok(parsed) = upstream(harness, &file) else {
                    continue;
                };
                let Ok(whole) = engine_stages(&parsed.workload) else {
                    continue;
                };
                for count in 2..=4u32 {
                    let shards: Result<Vec<Vec<llmbench_engine::engine::Stage>>, PlanError> = (0
                        ..count)
                        .map(|index| Shard { index, count }.apply(whole.clone()))
                        .collect();
                    let shards = match shards {
                        Ok(shards) => shards,
                        Err(PlanError::ShardTooNarrow { limit, .. }) => {
                            assert!((limit as u32) < count, "{harness}/{file}");
                            refused += 1;
                            continue;
                        }
                        Err(e) => panic!("{harness}/{file} over {count}: {e}"),
                    };
                    for (stage_index, stage) in whole.iter().enumerate() {
                        let parts = shards.iter().map(|stages| &stages[stage_index].plan);
                        match &stage.plan {
                            StagePlan::Open {
                                send_at,
                                max_concurrency,
                            } => {
                                open += 1;
                                let mut union = Vec::new();
                                let mut caps = Vec::new();
                                for part in parts {
                                    let StagePlan::Open {
                                        send_at,
                                        max_concurrency,
                                    } = part
                                    else {
                                        panic!("{harness}/{file}: an open stage became closed");
                                    };
                                    union.extend(send_at.iter().copied());
                                    caps.push(*max_concurrency);
                                }
                                union.sort();
                                let mut whole_sorted = send_at.clone();
                                whole_sorted.sort();
                                assert_eq!(union, whole_sorted, "{harness}/{file} over {count}");
                                let cap_sum = caps.iter().copied().sum::<Option<usize>>();
                                assert_eq!(
                                    cap_sum, *max_concurrency,
                                    "{harness}/{file} over {count}"
                                );
                            }
                            StagePlan::Closed {
                                concurrency,
                                total,
                                duration,
                                ..
                            } => {
                                closed += 1;
                                let (mut streams, mut totals) = (0, Vec::new());
                                for part in parts {
                                    let StagePlan::Closed {
                                        concurrency: c,
                                        total: t,
                                        duration: d,
                                        ..
                                    } = part
                                    else {
                                        panic!("{harness}/{file}: a closed stage became open");
                                    };
                                    assert!(*c >= 1, "{harness}/{file}: a shard without a stream");
                                    assert_eq!(d, duration, "{harness}/{file}");
                                    streams += c;
                                    totals.push(*t);
                                }
                                assert_eq!(streams, *concurrency, "{harness}/{file} over {count}");
                                assert_eq!(
                                    totals.into_iter().sum::<Option<u64>>(),
                                    *total,
                                    "{harness}/{file} over {count}"
                                );
                            }
                            StagePlan::Trace(_) | StagePlan::Sessions(_) => {
                                panic!("{harness}/{file}: engine_stages never plans a trace")
                            }
                            StagePlan::LmBench(_) => {
                                panic!("{harness}/{file}: no LMBenchmark stage here")
                            }
                            StagePlan::Paced(_) => {
                                panic!(
                                    "{harness}/{file}: only the aiperf dialect plans its rate loop"
                                )
                            }
                            StagePlan::Lockstep(_) => {
                                panic!(
                                    "{harness}/{file}: only MLPerf's MultiStream plans lockstep queries"
                                )
                            }
                        }
                    }
                }
            }
        }
        // The upstream library has both kinds, and inferencemax's concurrency-1 profiles cannot be split.
        assert!(
            open > 0 && closed > 0 && refused > 0,
            "{open} {closed} {refused}"
        );
    }
}
