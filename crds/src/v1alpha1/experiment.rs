//! `BenchmarkExperiment`: many BenchmarkRuns as one object, the way a CronJob owns Jobs or AIPerf's operator owns
//! a sweep. A run template, treatments (a list, or factors × levels), repeats, an optional SLO capacity search,
//! ordering and hooks between runs. The operator creates one owned BenchmarkRun per treatment × repeat and keeps a
//! comparison table in status.
//!
//! Status size: a row of the table is at most ~1.2 KiB in JSON (ten aggregates of three numbers, a few short
//! strings, levels bounded by the factor count), and `runs` entries ~150 B. With at most 100 treatments and
//! 1000 runs (treatments × repeats, CEL-checked for the matrix form by the operator) the status stays under
//! ~300 KiB, well inside etcd's 1.5 MiB object limit.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::BenchmarkRunSpec;
use crate::capacity::CapacitySearchSpec;
pub use llmbench_core::experiment::v1::{CacheState, Hook};

/// The most treatments an experiment may have (list entries, or the product of the factors' levels).
pub const MAX_TREATMENTS: usize = 100;
/// The most repeats of each treatment.
pub const MAX_REPEATS: u32 = 10;

/// Many benchmark runs as one object: a run template, treatments applied to it as profile overrides, repeats, an
/// optional capacity search, and a comparison table in status.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "llmbench.dev",
    version = "v1alpha1",
    kind = "BenchmarkExperiment",
    doc = "A BenchmarkExperiment runs one BenchmarkRun per treatment and repeat (one at a time by default) and keeps a comparison table of them in its status.",
    namespaced,
    status = "BenchmarkExperimentStatus",
    shortname = "bx",
    category = "llmbench",
    derive = "PartialEq",
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase", description = "Where the experiment is"),
    printcolumn(name = "Progress", type_ = "string", json_path = ".status.progress", description = "Runs finished / runs in all"),
    printcolumn(name = "Best", type_ = "string", json_path = ".status.best", description = "The best treatment that met the SLO"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"),
    validation = Rule::new(
        "!has(oldSelf.status) || !has(oldSelf.status.startTime) || self.spec == oldSelf.spec"
    ).message("spec is immutable once the experiment has started; create a new BenchmarkExperiment instead")
)]
#[x_kube(validation = Rule::new("!(has(self.treatments) && has(self.factors)) && (has(self.treatments) || has(self.factors) || has(self.models) || has(self.cacheStates))").message("set at most one of treatments (a list) or factors (a matrix), and at least one of them, models or cacheStates"))]
#[x_kube(validation = Rule::new("!has(self.template.ttlSecondsAfterFinished)").message("set ttlSecondsAfterFinished on the experiment, not on its template: an experiment's runs stay while it does, and its TTL removes them with it"))]
#[serde(rename_all = "camelCase")]
pub struct BenchmarkExperimentSpec {
    /// Everything a BenchmarkRun takes; each run is this template with its treatment's overrides appended to
    /// template.overrides (so a treatment's value wins over the template's for the same key).
    pub template: BenchmarkRunSpec,
    /// The treatments, as a list: each a name and the overrides that make it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 100))]
    pub treatments: Option<Vec<Treatment>>,
    /// The treatments, as a full factorial matrix: every combination of the factors' levels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 8))]
    pub factors: Option<Vec<Factor>>,
    /// The models to run every treatment with, one run per model and treatment, as llm-d-benchmark's model
    /// list (LLMDBENCH_DEPLOY_MODEL_LIST) runs the harness once per model. Each model is a level of the factor
    /// `model` in the table; it becomes the run's stack.model (so also its tokenizer unless template.stack.tokenizer
    /// is set, and the model a standalone stack serves). Treatments are named `<treatment>-<model>` with the
    /// model's last path component (the whole name when two would collide); with no treatments or factors, each
    /// model alone is a treatment.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16), inner(length(min = 1, max = 512)))]
    pub models: Vec<String>,
    /// How many times each treatment runs. Default 1.
    #[serde(default = "default_repeats")]
    #[schemars(range(min = 1, max = 10))]
    pub repeats: u32,
    /// Run a capacity search in every run: the highest load that meets the SLO, per treatment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_search: Option<CapacitySearchSpec>,
    /// How runs follow one another.
    #[serde(default)]
    pub ordering: Ordering,
    /// HTTP calls on the stack before each run (after the cool-down), e.g. vLLM's POST /reset_prefix_cache as
    /// llm-d-benchmark's reset_caches does. A failing hook is recorded on the run's row, never fatal.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8))]
    pub hooks: Vec<Hook>,
    /// Empty the stack's prefix cache before every run (each run's prefixCache.reset): the engine's own reset,
    /// found by its endpoint (vLLM with VLLM_SERVER_DEV_MODE=1, SGLang, llama.cpp with --slot-save-path).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cache_reset: bool,
    /// Compare the stack with a cold and a warm prefix cache: every treatment runs once per state listed, named
    /// `<treatment>-<state>`, with the state as the table's `cache` column. cold: the cache is reset before the run
    /// and the prompts are new to it; warm: the run's prompts are sent once before it, so it meets a cache that
    /// holds them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 2))]
    pub cache_states: Vec<CacheState>,
    /// Delete the experiment this many seconds after it finished, and with it its runs and their pods; the
    /// results on the PVC stay. Unset: the operator's default (the chart's ttlSecondsAfterFinished), else kept.
    /// (template.ttlSecondsAfterFinished is refused: the experiment's runs go with it.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub ttl_seconds_after_finished: Option<i32>,
}

fn default_repeats() -> u32 {
    1
}

/// One treatment: a name and the overrides (key=value, as BenchmarkRun.overrides) that make it.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Treatment {
    /// The treatment's name: lowercase letters, digits and '-', as it appears in run names and the table.
    #[schemars(regex(pattern = r"^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$"))]
    pub name: String,
    /// Profile overrides, key=value.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64), inner(length(max = 4096)))]
    pub overrides: Vec<String>,
}

/// A factor of a matrix: a profile key and the levels it takes.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Factor {
    /// The factor's name, used in treatment names and as a column of the table.
    #[schemars(regex(pattern = r"^[A-Za-z0-9_.-]{1,63}$"))]
    pub name: String,
    /// The profile key it sets (an override key: a dotted path from the root, or a bare name).
    #[schemars(length(min = 1, max = 253))]
    pub key: String,
    /// Its levels, typed like YAML scalars when applied.
    #[schemars(length(min = 1, max = 32), inner(length(max = 256)))]
    pub levels: Vec<String>,
}

/// How the runs of an experiment follow one another.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Ordering {
    /// How many runs may go at once. Default 1: one at a time, so runs never share the stack.
    #[serde(default = "default_parallelism")]
    #[schemars(range(min = 1, max = 16))]
    pub parallelism: u32,
    /// A pause after each run before the next starts (a duration such as 30s). Default none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self.matches('^([0-9]+(\\\\.[0-9]+)?(ns|us|ms|s|m|h))+$')").message("cooldown must be a duration such as 30s or 2m"))]
    #[schemars(length(max = 64))]
    pub cooldown: Option<String>,
    /// Stop starting runs once one has failed. Default false: a failed run is reported and the rest go on.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stop_on_failure: bool,
}

impl Default for Ordering {
    fn default() -> Self {
        Ordering {
            parallelism: default_parallelism(),
            cooldown: None,
            stop_on_failure: false,
        }
    }
}

fn default_parallelism() -> u32 {
    1
}

/// Where an experiment is.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ExperimentPhase {
    /// Accepted and validated; no run has started.
    #[default]
    Pending,
    /// Runs are going.
    Running,
    /// Every run finished (some may have failed: see the table); the comparison files are being written.
    Collecting,
    /// Every run finished and the comparison is in status and on the volume.
    Succeeded,
    /// The experiment is invalid, or stopped (stopOnFailure), or its comparison could not be written.
    Failed,
}

/// The observed state of a BenchmarkExperiment.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BenchmarkExperimentStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<ExperimentPhase>,
    /// Valid and Completed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    // A map keyed by type: server-side apply merges conditions by type, and the API server refuses duplicates.
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The generation of the spec this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Runs finished / runs in all, e.g. 5/12.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<String>,
    /// When the first run was created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
    /// The experiment's directory on the workload volume; each run writes below it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub results_path: Option<String>,
    /// Every run of the experiment, in plan order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runs: Vec<ExperimentRun>,
    /// Per treatment, its figures over its repeats.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub table: Vec<TreatmentRow>,
    /// The treatment with the highest output tokens/s among those whose every run met the SLO (or, with a
    /// capacity search, the highest capacity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub best: Option<String>,
}

/// One run of the experiment.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ExperimentRun {
    /// The BenchmarkRun's name.
    pub name: String,
    /// The treatment it runs.
    pub treatment: String,
    /// 1-based.
    pub repeat: u32,
    /// The run's phase as last seen; empty until it is created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// The hooks called before it, and how each went (e.g. `reset-prefix-cache: 200`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<String>,
}

/// A treatment's row of the comparison table.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TreatmentRow {
    /// The treatment's name.
    pub treatment: String,
    /// The factor levels (or overrides) that make it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub levels: BTreeMap<String, String>,
    /// Runs finished successfully / repeats.
    pub runs: u32,
    /// Runs that failed (or left no summary to compare).
    pub failed_runs: u32,
    /// Failed requests over all its runs.
    pub failures: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_per_second: Option<Aggregate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens_per_second: Option<Aggregate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_p50_ms: Option<Aggregate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_p99_ms: Option<Aggregate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpot_p50_ms: Option<Aggregate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpot_p99_ms: Option<Aggregate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub itl_p50_ms: Option<Aggregate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub itl_p99_ms: Option<Aggregate>,
    /// Goodput in percent, where the runs measured it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goodput_percent: Option<Aggregate>,
    /// The capacity found by each run's search, where the experiment has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<Aggregate>,
    /// The share of prompt tokens the stack served from its prefix cache, in percent, where the runs' responses
    /// reported cached tokens: tells a cold run from a warm one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_cache_hit_percent: Option<Aggregate>,
    /// passed (every finished run met the SLO), failed, or none (no SLO).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<String>,
}

/// A figure over a treatment's repeats.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Aggregate {
    /// The mean over the runs.
    pub mean: f64,
    /// Sample standard deviation (n − 1); 0 for one value.
    pub stddev: f64,
    /// Coefficient of variation, stddev / mean; 0 when the mean is 0.
    pub cv: f64,
    /// How many runs the figure is over.
    pub n: u32,
}
