//! `experiment.json`: an experiment's plan and, as runs finish, their outcome. The launcher writes it before the
//! first run and rewrites it after each one; the operator builds the same JSON (it mirrors these types, as it
//! cannot depend on the launcher crate) and mounts it into the pod that runs `llmbench experiment report`. The
//! schema is in the parent module's documentation.

use std::collections::BTreeMap;
use std::path::Path;

use llmbench_api::capacity::CapacitySearchSpec;
use llmbench_api::experiment::ResolvedTreatment;
use llmbench_api::v1alpha1::{CacheState, Hook, SloSpec};
use serde::{Deserialize, Serialize};

use super::ExperimentError;

/// The schema id of `experiment.json`.
pub const EXPERIMENT_SCHEMA: &str = "llmbench.experiment/v1";
/// The plan's file name in the experiment directory.
pub const EXPERIMENT_FILE: &str = "experiment.json";

/// An experiment's plan and outcome (`experiment.json`). Flat on purpose: names, strings and numbers, a list of
/// treatments and a list of runs, so the operator can mirror it without our types.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExperimentPlan {
    /// Always [`EXPERIMENT_SCHEMA`].
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

impl PlanTreatment {
    /// The treatment as the shared table code takes it.
    pub fn resolved(&self) -> ResolvedTreatment {
        ResolvedTreatment {
            name: self.name.clone(),
            overrides: self.overrides.clone(),
            levels: self.levels.clone(),
            model: self.model.clone(),
            cache: self.cache,
        }
    }
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
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Pending => "pending",
            RunStatus::Succeeded => "succeeded",
            RunStatus::Failed => "failed",
            RunStatus::Skipped => "skipped",
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

/// One hook call and how it went: an HTTP status, or the error that kept it from getting one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HookCall {
    pub name: String,
    pub method: String,
    pub url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl ExperimentPlan {
    /// Reads and checks a plan file.
    pub fn read(path: &Path) -> Result<Self, ExperimentError> {
        let text = std::fs::read_to_string(path).map_err(|source| ExperimentError::Read {
            path: path.to_owned(),
            source,
        })?;
        let plan: ExperimentPlan =
            serde_json::from_str(&text).map_err(|e| ExperimentError::BadPlan {
                path: path.to_owned(),
                message: e.to_string(),
            })?;
        if plan.schema != EXPERIMENT_SCHEMA {
            return Err(ExperimentError::BadPlan {
                path: path.to_owned(),
                message: format!(
                    "schema is `{}`, expected `{EXPERIMENT_SCHEMA}`",
                    plan.schema
                ),
            });
        }
        let names: std::collections::BTreeSet<&str> =
            plan.treatments.iter().map(|t| t.name.as_str()).collect();
        if let Some(run) = plan
            .runs
            .iter()
            .find(|r| !names.contains(r.treatment.as_str()))
        {
            return Err(ExperimentError::BadPlan {
                path: path.to_owned(),
                message: format!(
                    "run `{}` names treatment `{}`, which is not among its treatments",
                    run.dir, run.treatment
                ),
            });
        }
        if let Some(run) = plan.runs.iter().find(|r| !safe_dir(&r.dir)) {
            return Err(ExperimentError::BadPlan {
                path: path.to_owned(),
                message: format!(
                    "run directory `{}` must be a relative path inside the experiment directory",
                    run.dir
                ),
            });
        }
        Ok(plan)
    }

    /// Writes the plan as pretty JSON, through a temporary file so a reader never sees half of it.
    pub fn write(&self, path: &Path) -> Result<(), ExperimentError> {
        let mut text = serde_json::to_string_pretty(self).map_err(|e| ExperimentError::Write {
            path: path.to_owned(),
            source: std::io::Error::other(e),
        })?;
        text.push('\n');
        write_atomic(path, text.as_bytes())
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

/// Writes `bytes` to `path` through `path.tmp` and a rename.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), ExperimentError> {
    let tmp = path.with_extension("tmp");
    let fail = |source| ExperimentError::Write {
        path: path.to_owned(),
        source,
    };
    std::fs::write(&tmp, bytes).map_err(fail)?;
    std::fs::rename(&tmp, path).map_err(fail)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the operator writes: only the fields it knows, statuses from its runs' phases.
    const OPERATOR_PLAN: &str = r#"{
      "schema": "llmbench.experiment/v1",
      "name": "sweep",
      "harness": "vllm-benchmark",
      "profile": "random_concurrent",
      "repeats": 1,
      "slo": {"ttftP99Ms": 500},
      "treatments": [{"name": "c8", "overrides": ["max-concurrency=8"], "levels": {"max-concurrency": "8"}}],
      "runs": [{"dir": "c8-r1", "treatment": "c8", "repeat": 1, "status": "failed"}]
    }"#;

    #[test]
    fn a_minimal_plan_as_the_operator_builds_it_reads_with_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(EXPERIMENT_FILE);
        std::fs::write(&path, OPERATOR_PLAN).unwrap();
        let plan = ExperimentPlan::read(&path).unwrap();
        assert_eq!(plan.max_attempts, 1);
        assert_eq!(plan.runs[0].status, RunStatus::Failed);
        assert_eq!(plan.slo.as_ref().and_then(|s| s.ttft_p99_ms), Some(500.0));
        assert!(plan.runs[0].hooks.is_empty());
        // Round trip: what we write reads back the same.
        plan.write(&path).unwrap();
        assert_eq!(ExperimentPlan::read(&path).unwrap(), plan);
    }

    #[test]
    fn a_plan_whose_runs_leave_the_directory_or_name_no_treatment_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(EXPERIMENT_FILE);
        std::fs::write(
            &path,
            OPERATOR_PLAN.replace("\"dir\": \"c8-r1\"", "\"dir\": \"../x\""),
        )
        .unwrap();
        let err = ExperimentPlan::read(&path).unwrap_err().to_string();
        assert!(err.contains("relative path"), "{err}");
        std::fs::write(
            &path,
            OPERATOR_PLAN.replace("\"treatment\": \"c8\"", "\"treatment\": \"c9\""),
        )
        .unwrap();
        let err = ExperimentPlan::read(&path).unwrap_err().to_string();
        assert!(err.contains("`c9`"), "{err}");
        std::fs::write(&path, OPERATOR_PLAN.replace("llmbench.experiment/v1", "v0")).unwrap();
        let err = ExperimentPlan::read(&path).unwrap_err().to_string();
        assert!(err.contains("schema"), "{err}");
    }
}
