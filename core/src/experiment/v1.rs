//! `llmbench.experiment/v1`, the one definition of the experiment contracts between the operator and the launcher:
//!
//! - **`experiment.json`** ([`ExperimentPlan`]): an experiment's plan and, as runs finish, their outcome. The
//!   launcher's `llmbench experiment` writes it before the first run and rewrites it after each one; the operator
//!   writes it for the collector pod that runs `llmbench experiment report`, which reads either.
//! - **Hook calls** ([`HookCall`]): how each HTTP call on the stack before a run went, in `runs[].hooks[]`.
//! - **Comparison figures** ([`RunFigures`]): what one finished run contributes to its treatment's row.
//!
//! The CRD vocabulary the plan embeds ([`Hook`], [`CacheState`]) is defined here too; `llmbench-api` embeds it in
//! `BenchmarkExperiment`, so its doc comments are the CRD's descriptions.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::capacity::CapacitySearchSpec;
use crate::slo::SloSpec;

/// The schema id of `experiment.json`.
pub const SCHEMA: &str = "llmbench.experiment/v1";
/// The plan's file name in the experiment directory.
pub const FILE: &str = "experiment.json";

/// An experiment's plan and outcome (`experiment.json`). Flat on purpose: names, strings and numbers, a list of
/// treatments and a list of runs, so a reader needs no more than these types.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExperimentPlan {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// The experiment's name (metadata.name, or llm-d-benchmark's `experiment.name`, or the file's stem).
    pub name: String,
    /// The experiment's directory name below the output directory.
    #[serde(default)]
    pub id: String,
    /// The profile dialect, e.g. `vllm-benchmark`.
    pub harness: String,
    /// The profile every treatment runs unless it names its own: a bundled profile's name, or a file.
    pub profile: String,
    /// The file the experiment was read from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// `BenchmarkExperiment` (a manifest) or `llm-d-benchmark` (an experiment file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_format: Option<String>,
    /// The stack's base URL; absent when the runs drove the embedded simulator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Overrides every run applies before its treatment's own (the template's, the file's constants, the
    /// command line's `--override`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overrides: Vec<String>,
    /// Keys every run creates before any override (the template's `overrideAdd`, the command line's
    /// `--override-add`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub override_add: Vec<String>,
    pub repeats: u32,
    /// The capacity search every run carries out, as the BenchmarkExperiment's `capacitySearch`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_search: Option<CapacitySearchSpec>,
    /// The SLO each run is judged by, as the run template's `slo`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo: Option<SloSpec>,
    /// Attempts per run (llm-d-benchmark's `treatment_max_attempts`); 1 = no retry.
    #[serde(default = "one")]
    pub max_attempts: u32,
    /// A run with failed requests counts as failed (llm-d-benchmark's `validate_failures`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub validate_failures: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stop_on_failure: bool,
    /// The pause between runs, e.g. `30s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cooldown: Option<String>,
    /// HTTP calls on the stack before each run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<Hook>,
    /// Every run resets the engine's prefix cache before its clock starts (`cacheReset`, the template's
    /// `prefixCache.reset`, llm-d-benchmark's `reset_caches`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cache_reset: bool,
    /// Every run warms the prefix cache with its own prompts first (the template's `prefixCache.warm`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cache_warm: bool,
    /// llm-d-benchmark setup treatments, each run against an already deployed stack (`--setup-endpoint`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub setup_treatments: Vec<PlanSetup>,
    pub treatments: Vec<PlanTreatment>,
    /// Every run, in the order they run (repeat-major).
    pub runs: Vec<PlanRun>,
    /// RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    /// Wall time of the whole experiment, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_s: Option<f64>,
    /// The experiment was stopped by SIGINT or SIGTERM; the runs it did not start are `skipped`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
}

fn one() -> u32 {
    1
}

/// An llm-d-benchmark setup treatment: the stack configuration it stands for and where that stack was reached.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanSetup {
    pub name: String,
    /// The plan-config overrides (`decode.replicas=2`) the file gives it: what the stack at `endpoint` was said
    /// to be deployed with. llmbench deploys nothing and cannot check them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overrides: Vec<String>,
    pub endpoint: String,
}

/// A treatment: its name and the overrides that make it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanTreatment {
    pub name: String,
    /// key=value, applied after the plan's `overrides`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overrides: Vec<String>,
    /// Factor → level, or override key → value, for the comparison table.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub levels: BTreeMap<String, String>,
    /// Its own profile, where it does not run the plan's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// The setup treatment it runs under, and that stack's endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// The model it serves and names (`models`), where it is not the plan's `model`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The prefix cache its runs meet (`cacheStates`): `cold` (reset first) or `warm` (primed first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<CacheState>,
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    /// Not run yet (only while the experiment is going, or when it was killed).
    #[default]
    Pending,
    Succeeded,
    Failed,
    /// Never started: the experiment stopped first (stopOnFailure, or an interrupt).
    Skipped,
    /// Started and never ended: its launcher was killed (SIGKILL, the OOM killer) or crashed mid-run, so its
    /// run.json has no end. `llmbench experiment report` says so, rebuilds its reports from what it recorded
    /// (figures of part of a run, kept out of the table) and counts the requests that were in flight as lost.
    Killed,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Pending => "pending",
            RunStatus::Succeeded => "succeeded",
            RunStatus::Failed => "failed",
            RunStatus::Skipped => "skipped",
            RunStatus::Killed => "killed",
        }
    }
}

/// One run of the plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanRun {
    /// Its results directory, relative to the experiment directory: `<treatment>-r<repeat>`.
    pub dir: String,
    pub treatment: String,
    /// 1-based.
    pub repeat: u32,
    #[serde(default)]
    pub status: RunStatus,
    /// How many times it was started (retries included).
    #[serde(default)]
    pub attempts: u32,
    /// The hooks called before it (before each attempt), in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<HookCall>,
    /// Why it failed (the last attempt's reason).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    /// Wall time of all its attempts, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_s: Option<f64>,
}

/// One hook call and how it went: an HTTP status, or the error that kept it from getting one. The operator
/// records it in `status.runs[].hooks` and in `runs[].hooks[]` of the plan it writes; the launcher in its own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookCall {
    pub name: String,
    pub method: String,
    pub url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl HookCall {
    /// Whether the call got a 2xx answer.
    pub fn succeeded(&self) -> bool {
        self.status.is_some_and(|s| (200..300).contains(&s))
    }

    /// The line in `status.runs[].hooks`: `reset-prefix-cache: 200`, `warm: error: connection refused`.
    pub fn record(&self) -> String {
        match (&self.status, &self.error) {
            (Some(status), _) => format!("{}: {status}", self.name),
            (None, Some(error)) => format!("{}: error: {error}", self.name),
            (None, None) => format!("{}: no answer", self.name),
        }
    }
}

/// Why a plan cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("schema is `{found}`, expected `{SCHEMA}`")]
    Schema { found: String },
    #[error("run `{dir}` names treatment `{treatment}`, which is not among its treatments")]
    UnknownTreatment { dir: String, treatment: String },
    #[error("run directory `{dir}` must be a relative path inside the experiment directory")]
    UnsafeDir { dir: String },
}

impl ExperimentPlan {
    /// Checks what a reader relies on: the schema id, every run's treatment among the treatments, and every run's
    /// directory inside the experiment directory.
    pub fn check(&self) -> Result<(), PlanError> {
        if self.schema != SCHEMA {
            return Err(PlanError::Schema {
                found: self.schema.clone(),
            });
        }
        let names: std::collections::BTreeSet<&str> =
            self.treatments.iter().map(|t| t.name.as_str()).collect();
        if let Some(run) = self
            .runs
            .iter()
            .find(|r| !names.contains(r.treatment.as_str()))
        {
            return Err(PlanError::UnknownTreatment {
                dir: run.dir.clone(),
                treatment: run.treatment.clone(),
            });
        }
        if let Some(run) = self.runs.iter().find(|r| !safe_dir(&r.dir)) {
            return Err(PlanError::UnsafeDir {
                dir: run.dir.clone(),
            });
        }
        Ok(())
    }

    /// The index of the treatment named `name`.
    pub fn treatment_index(&self, name: &str) -> Option<usize> {
        self.treatments.iter().position(|t| t.name == name)
    }
}

/// A relative path without `..`, `.` or empty segments.
fn safe_dir(dir: &str) -> bool {
    !dir.is_empty()
        && !dir.starts_with('/')
        && dir
            .split('/')
            .all(|s| !s.is_empty() && s != "." && s != "..")
}

/// What one finished run contributes to its treatment's row: the operator's status table and comparison.json's
/// `runs[].figures` (`llmbench experiment report`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunFigures {
    pub requests_per_second: f64,
    pub output_tokens_per_second: f64,
    pub ttft_p50_ms: Option<f64>,
    pub ttft_p99_ms: Option<f64>,
    pub tpot_p50_ms: Option<f64>,
    pub tpot_p99_ms: Option<f64>,
    pub itl_p50_ms: Option<f64>,
    pub itl_p99_ms: Option<f64>,
    pub goodput_percent: Option<f64>,
    /// The capacity the run's search found.
    pub capacity: Option<f64>,
    /// The share of prompt tokens the stack served from its prefix cache, in percent, where it reported them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_cache_hit_percent: Option<f64>,
    pub failures: u64,
    /// Whether the run met its SLO; None without one.
    pub slo_met: Option<bool>,
}

/// The prefix cache a run of a cold/warm comparison meets.
#[derive(
    JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash,
)]
#[serde(rename_all = "lowercase")]
pub enum CacheState {
    /// Reset before the run, with prompts new to it.
    Cold,
    /// Primed with the run's own prompts before the run.
    Warm,
}

impl CacheState {
    pub fn as_str(self) -> &'static str {
        match self {
            CacheState::Cold => "cold",
            CacheState::Warm => "warm",
        }
    }

    /// Parses `cold` or `warm`.
    pub fn parse(text: &str) -> Option<CacheState> {
        match text.trim() {
            "cold" => Some(CacheState::Cold),
            "warm" => Some(CacheState::Warm),
            _ => None,
        }
    }
}

/// An HTTP call on the stack between runs.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Hook {
    /// A name for the record, e.g. reset-prefix-cache.
    #[schemars(regex(pattern = r"^[A-Za-z0-9_.-]{1,63}$"))]
    pub name: String,
    /// The HTTP method. Default POST.
    #[serde(default = "default_method")]
    #[schemars(regex(pattern = r"^(GET|POST|PUT|DELETE)$"))]
    pub method: String,
    /// A path on the stack's endpoint (/reset_prefix_cache) or a full http(s) URL.
    #[schemars(length(min = 1, max = 2048))]
    pub url: String,
}

fn default_method() -> String {
    "POST".to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every field, as the launcher's `llmbench experiment` writes them (compact here; it writes them pretty).
    const FULL: &str = r#"{"schema":"llmbench.experiment/v1","name":"sweep","id":"sweep-7d1e2f30","harness":"vllm-benchmark","profile":"random_concurrent","source":"exp.yaml","source_format":"llm-d-benchmark","endpoint":"http://a:8000","model":"m","overrides":["a=1"],"override_add":["b=2"],"repeats":2,"capacity_search":{"load":"rate","slo":["ttft_p99<=100ms"],"start":1.0,"max":8.0},"slo":{"ttftP99Ms":500.0,"maxFailureRate":0.01},"max_attempts":3,"validate_failures":true,"stop_on_failure":true,"cooldown":"30s","hooks":[{"name":"reset","method":"POST","url":"/reset_prefix_cache"}],"cache_reset":true,"cache_warm":true,"setup_treatments":[{"name":"s1","overrides":["decode.replicas=2"],"endpoint":"http://b:8000"}],"treatments":[{"name":"c8","overrides":["max-concurrency=8"],"levels":{"max-concurrency":"8"},"profile":"other","setup":"s1","endpoint":"http://b:8000","model":"m2","cache":"warm"}],"runs":[{"dir":"c8-r1","treatment":"c8","repeat":1,"status":"failed","attempts":3,"hooks":[{"name":"reset","method":"POST","url":"http://b:8000/reset_prefix_cache","status":200},{"name":"warm","method":"GET","url":"http://b:8000/x","error":"connection refused"}],"error":"HTTP 500","started_at":"2026-11-22T04:35:12Z","finished_at":"2026-11-22T04:36:12Z","duration_s":60.0}],"started_at":"2026-11-22T04:35:00Z","finished_at":"2026-11-22T04:37:00Z","duration_s":120.0,"interrupted":true}"#;

    /// What the operator writes for the collector: the fields it knows.
    const OPERATOR: &str = r#"{"schema":"llmbench.experiment/v1","name":"sweep","id":"sweep-7d1e2f30","harness":"inference-perf","profile":"sanity_random","source_format":"BenchmarkExperiment","model":"","repeats":1,"max_attempts":1,"treatments":[{"name":"rate-5","overrides":["load.stages.0.rate=5"],"levels":{"rate":"5"}}],"runs":[{"dir":"rate-5-r1","treatment":"rate-5","repeat":1,"status":"skipped","attempts":0}],"finished_at":"2026-11-22T04:37:00Z"}"#;

    #[test]
    fn the_plan_round_trips_byte_for_byte_with_every_field() {
        let plan: ExperimentPlan = serde_json::from_str(FULL).expect("parses");
        assert_eq!(serde_json::to_string(&plan).expect("serializes"), FULL);
        assert_eq!(plan.check(), Ok(()));
        assert_eq!(
            plan.runs[0].hooks[1].error.as_deref(),
            Some("connection refused")
        );
        assert_eq!(plan.treatments[0].cache, Some(CacheState::Warm));
    }

    #[test]
    fn the_operators_plan_round_trips_and_reads_with_the_launchers_defaults() {
        let plan: ExperimentPlan = serde_json::from_str(OPERATOR).expect("parses");
        assert_eq!(serde_json::to_string(&plan).expect("serializes"), OPERATOR);
        assert_eq!(plan.runs[0].status, RunStatus::Skipped);
        assert!(plan.setup_treatments.is_empty() && !plan.interrupted && !plan.cache_reset);
        // A plan that leaves out `max_attempts` means one attempt.
        let without: ExperimentPlan =
            serde_json::from_str(&OPERATOR.replace(r#""max_attempts":1,"#, "")).expect("parses");
        assert_eq!(without.max_attempts, 1);
    }

    #[test]
    fn a_killed_run_round_trips_under_its_own_status() {
        let killed = OPERATOR.replace(r#""status":"skipped""#, r#""status":"killed""#);
        let plan: ExperimentPlan = serde_json::from_str(&killed).expect("parses");
        assert_eq!(plan.runs[0].status, RunStatus::Killed);
        assert_eq!(plan.runs[0].status.as_str(), "killed");
        assert_eq!(serde_json::to_string(&plan).expect("serializes"), killed);
    }

    #[test]
    fn a_plan_with_another_schema_a_stray_run_or_an_escaping_directory_is_refused() {
        let plan: ExperimentPlan = serde_json::from_str(OPERATOR).expect("parses");
        let mut other = plan.clone();
        other.schema = "v0".into();
        assert_eq!(
            other.check().map_err(|e| e.to_string()),
            Err("schema is `v0`, expected `llmbench.experiment/v1`".into())
        );
        let mut stray = plan.clone();
        stray.runs[0].treatment = "rate-9".into();
        assert!(matches!(
            stray.check(),
            Err(PlanError::UnknownTreatment { .. })
        ));
        for dir in ["../x", "/x", "a//b", "./a", ""] {
            let mut escaping = plan.clone();
            escaping.runs[0].dir = dir.into();
            assert!(
                matches!(escaping.check(), Err(PlanError::UnsafeDir { .. })),
                "{dir:?}"
            );
        }
        assert_eq!(plan.treatment_index("rate-5"), Some(0));
        assert_eq!(plan.treatment_index("rate-9"), None);
    }

    #[test]
    fn a_hook_call_says_how_it_went() {
        let call = |status, error: Option<&str>| HookCall {
            name: "reset".into(),
            method: "POST".into(),
            url: "http://a/reset_prefix_cache".into(),
            status,
            error: error.map(str::to_owned),
        };
        assert!(call(Some(204), None).succeeded());
        assert!(!call(Some(500), None).succeeded());
        assert_eq!(call(Some(200), None).record(), "reset: 200");
        assert_eq!(
            call(None, Some("refused")).record(),
            "reset: error: refused"
        );
        assert_eq!(call(None, None).record(), "reset: no answer");
    }

    #[test]
    fn comparison_figures_round_trip_and_leave_out_only_an_unknown_cache_hit_rate() {
        let text = r#"{"requests_per_second":5.0,"output_tokens_per_second":40.0,"ttft_p50_ms":10.0,"ttft_p99_ms":80.0,"tpot_p50_ms":2.0,"tpot_p99_ms":3.0,"itl_p50_ms":null,"itl_p99_ms":null,"goodput_percent":null,"capacity":4.5,"failures":1,"slo_met":true}"#;
        let figures: RunFigures = serde_json::from_str(text).expect("parses");
        assert_eq!(figures.prefix_cache_hit_percent, None);
        assert_eq!(serde_json::to_string(&figures).expect("serializes"), text);
        let cached = RunFigures {
            prefix_cache_hit_percent: Some(42.0),
            ..figures
        };
        let json = serde_json::to_value(&cached).expect("serializes");
        assert_eq!(json["prefix_cache_hit_percent"], 42.0);
    }
}
