//! What an experiment's runs say, and the experiment status and plan file that follow from it. Pure: the
//! reconciler passes the runs it listed (by plan index) and writes back what comes out, so a restart derives the
//! same answer.
//!
//! Conditions (type → reasons):
//! - `Valid`: True/`Valid`; False/why not (`InvalidPlan`, `UnmatchedOverride`, `ProfileNotFound`,
//!   `InvalidCapacitySearch`, `EmptyDirStorage`, …) — no run is created.
//! - `Completed`: False/`Pending`|`Running`|`Collecting` while under way; True/`Succeeded` once the comparison is
//!   written; True/`Failed` when the experiment is invalid, stopped by stopOnFailure, or its collector failed —
//!   so `kubectl wait --for=condition=Completed` returns either way.
//!
//! Size: an experiment has at most 1000 runs (100 treatments × 10 repeats) and 100 rows. Each entry of `runs` is
//! bounded (name ≤ 63, treatment ≤ 40, hook records ≤ 256 bytes in all, the full records being on the run's
//! annotation), and so is each row (numbers, and at most 16 levels of at most 64 characters a side), and each
//! condition message (8 KiB), so the largest status is about 0.5 MiB whatever the spec — inside etcd's 1.5 MiB
//! object limit with room for the spec (a test builds it).

use std::collections::BTreeMap;

use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use llmbench_api::experiment::{RunFigures, RunResult, best, table};
use llmbench_api::v1alpha1::{
    BenchmarkExperiment, BenchmarkRun, ExperimentRun, Phase, RunSummary, TreatmentRow,
};

use llmbench_core::experiment::v1::{ExperimentPlan, PlanRun, PlanTreatment, RunStatus, SCHEMA};

use super::hooks::HookCall;
use super::schedule::RunState;
use super::validate::Plan;
use crate::builders::experiment::recorded_hooks;
use crate::status::{COMPLETED, SLO_MET};

pub const VALID: &str = "Valid";

/// The longest reason a failed run's entry in the plan file carries.
const MAX_RUN_ERROR_CHARS: usize = 512;
/// The longest hook record in `status.runs[].hooks`.
const MAX_HOOK_RECORD_CHARS: usize = 96;
/// The most hook text one entry of `status.runs` carries; the rest is on the run's `llmbench.dev/hooks`
/// annotation.
const MAX_HOOK_BYTES_PER_RUN: usize = 256;
/// The most levels a row of the table shows, and the longest key or value of one.
const MAX_LEVELS_PER_ROW: usize = 16;
const MAX_LEVEL_CHARS: usize = 64;

/// One planned run as observed.
#[derive(Debug, Clone, PartialEq)]
pub struct Observation {
    pub state: RunState,
    /// The run's phase for `status.runs[]`; `None` until it is created, `Lost` when it vanished.
    pub phase: Option<String>,
    /// What it contributes to the table.
    pub result: RunResult,
    pub hooks: Vec<HookCall>,
    /// Why it failed, in brief.
    pub error: Option<String>,
    pub started_at: Option<Timestamp>,
    pub finished_at: Option<Timestamp>,
}

impl Observation {
    /// A run not created yet.
    pub fn not_created() -> Self {
        Observation {
            state: RunState::NotCreated,
            phase: None,
            result: RunResult::Pending,
            hooks: Vec::new(),
            error: None,
            started_at: None,
            finished_at: None,
        }
    }

    /// A run that was created and is gone (deleted by hand before the experiment finished).
    pub fn lost() -> Self {
        Observation {
            state: RunState::Finished {
                failed: true,
                at: None,
            },
            phase: Some("Lost".to_owned()),
            result: RunResult::Failed,
            error: Some("the BenchmarkRun was deleted before the experiment finished".to_owned()),
            ..Observation::not_created()
        }
    }

    /// A run just created by this reconcile.
    pub fn created(hooks: Vec<HookCall>) -> Self {
        Observation {
            state: RunState::Active,
            phase: Some("Pending".to_owned()),
            hooks,
            ..Observation::not_created()
        }
    }
}

/// Whether `run`'s condition `type_` is True (`Some(true)`), False, or absent.
fn condition_is(run: &BenchmarkRun, type_: &str) -> Option<bool> {
    run.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| c.status == "True")
}

fn shorten(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// A run's hook records for its status entry, at most [`MAX_HOOK_BYTES_PER_RUN`] bytes in all.
fn status_hooks(calls: &[HookCall]) -> Vec<String> {
    let mut records = Vec::new();
    let mut used = 0;
    for (index, call) in calls.iter().enumerate() {
        let record = shorten(&call.record(), MAX_HOOK_RECORD_CHARS);
        if used + record.len() > MAX_HOOK_BYTES_PER_RUN {
            records.push(format!(
                "+{} more on the run's llmbench.dev/hooks annotation",
                calls.len() - index
            ));
            break;
        }
        used += record.len();
        records.push(record);
    }
    records
}

/// A row's levels within [`MAX_LEVELS_PER_ROW`] entries of at most [`MAX_LEVEL_CHARS`] characters a side (the
/// whole treatment is in the spec and the plan file).
fn bounded_levels(levels: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut bounded: BTreeMap<String, String> = levels
        .iter()
        .take(MAX_LEVELS_PER_ROW)
        .map(|(k, v)| (shorten(k, MAX_LEVEL_CHARS), shorten(v, MAX_LEVEL_CHARS)))
        .collect();
    if levels.len() > MAX_LEVELS_PER_ROW {
        bounded.insert(
            "…".to_owned(),
            format!("{} more", levels.len() - MAX_LEVELS_PER_ROW),
        );
    }
    bounded
}

fn first_line(text: &str) -> String {
    shorten(text.lines().next().unwrap_or_default(), MAX_RUN_ERROR_CHARS)
}

/// What `run` says.
pub fn observe(run: &BenchmarkRun) -> Observation {
    let status = run.status.clone().unwrap_or_default();
    let phase = status.phase.unwrap_or(Phase::Pending);
    let hooks = recorded_hooks(run);
    let (state, result, error) = match phase {
        Phase::Succeeded => {
            let at = status.completion_time.as_ref().map(|t| t.0);
            match &status.summary {
                Some(summary) => (
                    RunState::Finished { failed: false, at },
                    RunResult::Succeeded(figures(summary, condition_is(run, SLO_MET))),
                    None,
                ),
                // Nothing to compare: it counts as failed in the table.
                None => (
                    RunState::Finished { failed: false, at },
                    RunResult::Failed,
                    Some("the run succeeded but left no summary".to_owned()),
                ),
            }
        }
        Phase::Failed => (
            RunState::Finished {
                failed: true,
                at: status.completion_time.as_ref().map(|t| t.0),
            },
            RunResult::Failed,
            status
                .conditions
                .iter()
                .find(|c| c.type_ == COMPLETED)
                .map(|c| first_line(&format!("{}: {}", c.reason, c.message))),
        ),
        Phase::Pending | Phase::Running | Phase::Collecting => {
            (RunState::Active, RunResult::Pending, None)
        }
    };
    Observation {
        state,
        phase: Some(format!("{phase:?}")),
        result,
        hooks,
        error,
        started_at: status.start_time.as_ref().map(|t| t.0),
        finished_at: status.completion_time.as_ref().map(|t| t.0),
    }
}

/// A run's figures for the table, from its status summary; `slo_met` from its SLOMet condition.
pub fn figures(summary: &RunSummary, slo_met: Option<bool>) -> RunFigures {
    let latency = &summary.latency_ms;
    RunFigures {
        requests_per_second: summary.throughput.requests_per_second,
        output_tokens_per_second: summary.throughput.output_tokens_per_second,
        ttft_p50_ms: latency.ttft.as_ref().map(|s| s.p50),
        ttft_p99_ms: latency.ttft.as_ref().map(|s| s.p99),
        tpot_p50_ms: latency.tpot.as_ref().map(|s| s.p50),
        tpot_p99_ms: latency.tpot.as_ref().map(|s| s.p99),
        itl_p50_ms: latency.itl.as_ref().map(|s| s.p50),
        itl_p99_ms: latency.itl.as_ref().map(|s| s.p99),
        goodput_percent: summary.goodput_percent,
        capacity: summary.capacity.as_ref().and_then(|c| c.answer),
        // The responses' cached tokens, else the server's own counters.
        prefix_cache_hit_percent: summary.prefix_cache_hit_percent.or_else(|| {
            summary
                .server
                .as_ref()
                .and_then(|s| s.prefix_cache_hit_percent)
        }),
        failures: summary.failures,
        slo_met,
    }
}

/// `status.runs`: every planned run, in plan order.
pub fn experiment_runs(plan: &Plan, observations: &[Observation]) -> Vec<ExperimentRun> {
    plan.runs
        .iter()
        .zip(&plan.names)
        .zip(observations)
        .map(|((planned, name), seen)| ExperimentRun {
            name: name.clone(),
            treatment: plan
                .treatments
                .get(planned.treatment)
                .map(|t| t.name.clone())
                .unwrap_or_default(),
            repeat: planned.repeat,
            phase: seen.phase.clone(),
            hooks: status_hooks(&seen.hooks),
        })
        .collect()
}

/// How many runs finished.
pub fn finished(observations: &[Observation]) -> usize {
    observations
        .iter()
        .filter(|o| matches!(o.state, RunState::Finished { .. }))
        .count()
}

/// `finished/total`, e.g. `5/12`.
pub fn progress(observations: &[Observation]) -> String {
    format!("{}/{}", finished(observations), observations.len())
}

/// The comparison table over every planned run, and the best treatment.
pub fn comparison(
    plan: &Plan,
    observations: &[Observation],
) -> (Vec<TreatmentRow>, Option<String>) {
    let results: Vec<(usize, RunResult)> = plan
        .runs
        .iter()
        .zip(observations)
        .map(|(planned, seen)| (planned.treatment, seen.result.clone()))
        .collect();
    let mut rows = table(&plan.treatments, &results);
    let best = best(&rows);
    for row in &mut rows {
        row.levels = bounded_levels(&row.levels);
    }
    (rows, best)
}

fn seconds_between(start: Option<Timestamp>, end: Option<Timestamp>) -> Option<f64> {
    Some(end?.duration_since(start?).as_secs_f64()).filter(|s| *s >= 0.0)
}

/// The plan file for the collector: the experiment, its treatments, and every run with how it ended. Runs that
/// never started (stopOnFailure) are `skipped`.
pub fn plan_file(
    experiment: &BenchmarkExperiment,
    plan: &Plan,
    observations: &[Observation],
    endpoint: Option<String>,
    now: Timestamp,
) -> ExperimentPlan {
    let spec = &experiment.spec;
    let template = &spec.template;
    let workload = &template.workload;
    let profile = match (&workload.builtin, &workload.profile_ref) {
        (Some(name), _) => name.clone(),
        (None, Some(reference)) => reference.name.clone(),
        (None, None) => "inline template".to_owned(),
    };
    let started = observations.iter().filter_map(|o| o.started_at).min();
    let runs = plan
        .runs
        .iter()
        .zip(&plan.dirs)
        .zip(observations)
        .map(|((planned, dir), seen)| PlanRun {
            dir: dir.clone(),
            treatment: plan
                .treatments
                .get(planned.treatment)
                .map(|t| t.name.clone())
                .unwrap_or_default(),
            repeat: planned.repeat,
            status: match (&seen.state, &seen.result) {
                (RunState::NotCreated, _) => RunStatus::Skipped,
                (RunState::Active, _) | (_, RunResult::Pending) => RunStatus::Pending,
                (_, RunResult::Succeeded(_)) => RunStatus::Succeeded,
                (_, RunResult::Failed) => RunStatus::Failed,
            },
            attempts: u32::from(!matches!(seen.state, RunState::NotCreated)),
            hooks: seen.hooks.clone(),
            error: seen.error.clone(),
            started_at: seen.started_at.map(|t| t.to_string()),
            finished_at: seen.finished_at.map(|t| t.to_string()),
            duration_s: seconds_between(seen.started_at, seen.finished_at),
        })
        .collect();
    ExperimentPlan {
        schema: SCHEMA.to_owned(),
        name: experiment.name_any(),
        id: plan.experiment_dir.clone(),
        harness: template.harness.to_string(),
        profile,
        source: None,
        source_format: Some("BenchmarkExperiment".to_owned()),
        endpoint,
        model: Some(template.stack.model.clone()),
        overrides: template.overrides.clone(),
        override_add: Vec::new(),
        repeats: spec.repeats,
        capacity_search: spec
            .capacity_search
            .clone()
            .or_else(|| template.capacity_search.clone()),
        slo: template.slo.clone(),
        max_attempts: 1,
        validate_failures: false,
        stop_on_failure: spec.ordering.stop_on_failure,
        cooldown: spec.ordering.cooldown.clone(),
        hooks: spec.hooks.clone(),
        cache_reset: false,
        cache_warm: false,
        setup_treatments: Vec::new(),
        treatments: plan
            .treatments
            .iter()
            .map(|t| PlanTreatment {
                name: t.name.clone(),
                overrides: t.overrides.clone(),
                levels: t.levels.clone(),
                profile: None,
                setup: None,
                endpoint: None,
                model: t.model.clone(),
                cache: t.cache,
            })
            .collect(),
        runs,
        started_at: started.map(|t| t.to_string()),
        finished_at: Some(now.to_string()),
        duration_s: seconds_between(started, Some(now)),
        interrupted: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builders::experiment::fixtures::{TWO_BY_TWO, experiment};
    use crate::experiment::validate::validate;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
    use llmbench_api::capacity::{CapacityAnswer, LoadAxis};
    use llmbench_api::v1alpha1::{
        BenchmarkRunStatus, Latencies, LatencyStats, RunSummary, Throughput,
    };

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(second).expect("time")
    }

    fn summary(rps: f64, ttft_p99: f64) -> RunSummary {
        RunSummary {
            requests: 100,
            failures: 1,
            truncated: 0,
            duration_seconds: 10.0,
            throughput: Throughput {
                requests_per_second: rps,
                input_tokens_per_second: 10.0 * rps,
                output_tokens_per_second: 5.0 * rps,
            },
            latency_ms: Latencies {
                ttft: Some(LatencyStats {
                    mean: 10.0,
                    p50: 9.0,
                    p90: 12.0,
                    p99: ttft_p99,
                }),
                itl: Some(LatencyStats {
                    mean: 2.0,
                    p50: 2.0,
                    p90: 3.0,
                    p99: 4.0,
                }),
                ..Latencies::default()
            },
            verdict: None,
            goodput_percent: Some(99.0),
            capacity: Some(CapacityAnswer {
                load: LoadAxis::Rate,
                status: "found".into(),
                answer: Some(rps * 2.0),
                passing: None,
                failing: None,
                points: 5,
            }),
            server: None,
            start_skew_ms: None,
            prefix_cache_hit_percent: None,
            model_load: None,
            engine: None,
        }
    }

    fn condition(type_: &str, status: &str, reason: &str, message: &str) -> Condition {
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message: message.into(),
            observed_generation: None,
            last_transition_time: Time(at(0)),
        }
    }

    fn run(phase: Phase, summary: Option<RunSummary>, slo_met: Option<bool>) -> BenchmarkRun {
        let exp = experiment(TWO_BY_TWO);
        let plan = validate(&exp, None).expect("valid");
        let mut run =
            crate::builders::experiment::experiment_run(&exp, &plan.treatments, &plan.runs[0], &[])
                .expect("builds");
        let mut conditions = Vec::new();
        if let Some(met) = slo_met {
            conditions.push(condition(
                SLO_MET,
                if met { "True" } else { "False" },
                "x",
                "",
            ));
        }
        if phase == Phase::Failed {
            conditions.push(condition(
                COMPLETED,
                "False",
                "LauncherFailed",
                "launcher pod x exited with code 3\nlog tail:\n…",
            ));
        }
        run.status = Some(BenchmarkRunStatus {
            phase: Some(phase),
            start_time: Some(Time(at(100))),
            completion_time: matches!(phase, Phase::Succeeded | Phase::Failed)
                .then(|| Time(at(112))),
            summary,
            conditions,
            ..BenchmarkRunStatus::default()
        });
        run
    }

    #[test]
    fn a_run_summary_becomes_the_figures_the_table_compares() {
        let f = figures(&summary(4.0, 45.0), Some(true));
        assert_eq!(f.requests_per_second, 4.0);
        assert_eq!(f.output_tokens_per_second, 20.0);
        assert_eq!((f.ttft_p50_ms, f.ttft_p99_ms), (Some(9.0), Some(45.0)));
        assert_eq!((f.itl_p50_ms, f.itl_p99_ms), (Some(2.0), Some(4.0)));
        assert_eq!((f.tpot_p50_ms, f.tpot_p99_ms), (None, None));
        assert_eq!(f.goodput_percent, Some(99.0));
        assert_eq!(f.capacity, Some(8.0));
        assert_eq!((f.failures, f.slo_met), (1, Some(true)));
    }

    #[test]
    fn a_run_is_observed_from_its_status_alone() {
        let done = observe(&run(
            Phase::Succeeded,
            Some(summary(4.0, 45.0)),
            Some(false),
        ));
        assert_eq!(
            done.state,
            RunState::Finished {
                failed: false,
                at: Some(at(112))
            }
        );
        assert_eq!(done.phase.as_deref(), Some("Succeeded"));
        let RunResult::Succeeded(f) = &done.result else {
            panic!("{:?}", done.result)
        };
        assert_eq!(f.slo_met, Some(false));
        let failed = observe(&run(Phase::Failed, None, None));
        assert_eq!(failed.result, RunResult::Failed);
        assert_eq!(
            failed.error.as_deref(),
            Some("LauncherFailed: launcher pod x exited with code 3")
        );
        let running = observe(&run(Phase::Running, None, None));
        assert_eq!(
            (running.state, running.result),
            (RunState::Active, RunResult::Pending)
        );
        let empty = observe(&run(Phase::Succeeded, None, None));
        assert_eq!(
            empty.result,
            RunResult::Failed,
            "no summary, nothing to compare"
        );
    }

    #[test]
    fn status_lists_every_run_and_the_table_aggregates_repeats() {
        let exp = experiment(TWO_BY_TWO);
        let plan = validate(&exp, None).expect("valid");
        let mut observations = vec![
            observe(&run(Phase::Succeeded, Some(summary(4.0, 40.0)), None)),
            observe(&run(Phase::Succeeded, Some(summary(8.0, 80.0)), None)),
            observe(&run(Phase::Succeeded, Some(summary(6.0, 60.0)), None)),
            Observation::created(vec![HookCall {
                name: "reset".into(),
                method: "POST".into(),
                url: "http://a/reset".into(),
                status: Some(503),
                error: None,
            }]),
        ];
        assert_eq!(progress(&observations), "3/4");
        let runs = experiment_runs(&plan, &observations);
        assert_eq!(runs.len(), 4);
        assert_eq!(
            (
                runs[3].name.as_str(),
                runs[3].treatment.as_str(),
                runs[3].repeat
            ),
            ("sweep-rate-10-r2", "rate-10", 2)
        );
        assert_eq!(runs[3].phase.as_deref(), Some("Pending"));
        assert_eq!(runs[3].hooks, ["reset: 503"]);
        observations[3] = observe(&run(Phase::Succeeded, Some(summary(10.0, 90.0)), None));
        let (rows, best) = comparison(&plan, &observations);
        assert_eq!(rows.len(), 2);
        let slow = rows[0].requests_per_second.expect("rps");
        assert_eq!((slow.mean, slow.n), (5.0, 2));
        assert_eq!(rows[1].ttft_p99_ms.map(|a| a.mean), Some(85.0));
        assert_eq!(rows[1].capacity.map(|a| a.mean), Some(18.0));
        assert_eq!(best.as_deref(), Some("rate-10"));
    }

    #[test]
    fn the_status_of_the_largest_experiment_stays_well_inside_etcds_limit() {
        use llmbench_api::v1alpha1::{BenchmarkExperimentStatus, MAX_REPEATS, MAX_TREATMENTS};
        // 10 × 10 factors of long levels (100 treatments, the most), 10 repeats (the most): 1000 runs.
        let level = |f: usize, i: usize| format!("{f}{i}{}", "v".repeat(254));
        let factors: String = (0..2)
            .map(|f| {
                let levels: Vec<String> = (0..10).map(|i| format!("'{}'", level(f, i))).collect();
                format!(
                    "  - {{name: f{f}{}, key: k{f}, levels: [{}]}}\n",
                    "n".repeat(60),
                    levels.join(", ")
                )
            })
            .collect();
        let exp = experiment(&format!(
            "template:\n  harness: inference-perf\n  workload: {{builtin: sanity_random}}\n  stack: {{endpoint: \
             http://a:1, model: m}}\nfactors:\n{factors}repeats: {MAX_REPEATS}\n"
        ));
        let plan = plan_of_largest(&exp);
        assert_eq!(plan.treatments.len(), MAX_TREATMENTS);
        assert_eq!(plan.runs.len(), 1000);
        let hook = |i: usize| HookCall {
            name: format!("hook-{i}-{}", "h".repeat(56)),
            method: "POST".into(),
            url: format!("http://a/{}", "u".repeat(2000)),
            status: None,
            error: Some("e".repeat(200)),
        };
        let mut done = observe(&run(Phase::Succeeded, Some(summary(4.0, 40.0)), Some(true)));
        done.hooks = (0..8).map(hook).collect();
        let observations = vec![done; plan.runs.len()];
        let (table, best) = comparison(&plan, &observations);
        let status = BenchmarkExperimentStatus {
            runs: experiment_runs(&plan, &observations),
            progress: Some(progress(&observations)),
            table,
            best,
            ..BenchmarkExperimentStatus::default()
        };
        assert!(status.runs[0].hooks.len() < 8, "{:?}", status.runs[0].hooks);
        assert!(
            status.table[0]
                .levels
                .values()
                .all(|v| v.chars().count() <= 65)
        );
        let bytes = serde_json::to_vec(&status).expect("json").len();
        assert!(bytes < 900 * 1024, "{bytes} bytes");
    }

    fn plan_of_largest(exp: &BenchmarkExperiment) -> Plan {
        crate::experiment::validate::plan_of(exp).expect("plans")
    }

    #[test]
    fn the_plan_file_has_the_launchers_shape() {
        let exp = experiment(TWO_BY_TWO);
        let plan = validate(&exp, None).expect("valid");
        let observations = vec![
            observe(&run(Phase::Succeeded, Some(summary(4.0, 40.0)), None)),
            observe(&run(Phase::Failed, None, None)),
            Observation::lost(),
            Observation::not_created(),
        ];
        let file = plan_file(
            &exp,
            &plan,
            &observations,
            Some("http://vllm.llm-d.svc:8000".into()),
            at(200),
        );
        let json = serde_json::to_value(&file).expect("json");
        assert_eq!(json["schema"], "llmbench.experiment/v1");
        assert_eq!(json["name"], "sweep");
        assert_eq!(json["id"], "sweep-7d1e2f30");
        assert_eq!(json["harness"], "inference-perf");
        assert_eq!(json["profile"], "sanity_random");
        assert_eq!(json["repeats"], 2);
        assert_eq!(
            json["overrides"],
            serde_json::json!(["load.stages.0.duration=5"])
        );
        assert_eq!(
            json["treatments"][1],
            serde_json::json!({"name": "rate-10", "overrides": ["load.stages.0.rate=10"], "levels": {"rate": "10"}})
        );
        let statuses: Vec<&str> = json["runs"]
            .as_array()
            .expect("runs")
            .iter()
            .map(|r| r["status"].as_str().expect("status"))
            .collect();
        assert_eq!(statuses, ["succeeded", "failed", "failed", "skipped"]);
        assert_eq!(json["runs"][0]["dir"], "rate-5-r1");
        assert_eq!(json["runs"][0]["duration_s"], 12.0);
        assert_eq!(json["runs"][3]["attempts"], 0);
        assert_eq!(json["duration_s"], 100.0);
    }
}
