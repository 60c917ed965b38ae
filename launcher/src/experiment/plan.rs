//! `experiment.json`: an experiment's plan and, as runs finish, their outcome. The launcher writes it before the
//! first run and rewrites it after each one; the operator writes the same type (`llmbench_core::experiment::v1`)
//! and mounts it into the pod that runs `llmbench experiment report`. The schema is in the parent module's
//! documentation.

use std::path::Path;

pub use llmbench_core::experiment::v1::{
    ExperimentPlan, FILE as EXPERIMENT_FILE, HookCall, PlanRun, PlanSetup, PlanTreatment,
    RunStatus, SCHEMA as EXPERIMENT_SCHEMA,
};

use super::ExperimentError;

/// Reads and checks a plan file.
pub(crate) fn read(path: &Path) -> Result<ExperimentPlan, ExperimentError> {
    let text = std::fs::read_to_string(path).map_err(|source| ExperimentError::Read {
        path: path.to_owned(),
        source,
    })?;
    let bad = |message: String| ExperimentError::BadPlan {
        path: path.to_owned(),
        message,
    };
    let plan: ExperimentPlan = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
    plan.check().map_err(|e| bad(e.to_string()))?;
    Ok(plan)
}

/// Writes the plan as pretty JSON, through a temporary file so a reader never sees half of it.
pub(crate) fn write(plan: &ExperimentPlan, path: &Path) -> Result<(), ExperimentError> {
    let mut text = serde_json::to_string_pretty(plan).map_err(|e| ExperimentError::Write {
        path: path.to_owned(),
        source: std::io::Error::other(e),
    })?;
    text.push('\n');
    write_atomic(path, text.as_bytes())
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
        let plan = read(&path).unwrap();
        assert_eq!(plan.max_attempts, 1);
        assert_eq!(plan.runs[0].status, RunStatus::Failed);
        assert_eq!(plan.slo.as_ref().and_then(|s| s.ttft_p99_ms), Some(500.0));
        assert!(plan.runs[0].hooks.is_empty());
        // Round trip: what we write reads back the same.
        write(&plan, &path).unwrap();
        assert_eq!(read(&path).unwrap(), plan);
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
        let err = read(&path).unwrap_err().to_string();
        assert!(err.contains("relative path"), "{err}");
        std::fs::write(
            &path,
            OPERATOR_PLAN.replace("\"treatment\": \"c8\"", "\"treatment\": \"c9\""),
        )
        .unwrap();
        let err = read(&path).unwrap_err().to_string();
        assert!(err.contains("`c9`"), "{err}");
        std::fs::write(&path, OPERATOR_PLAN.replace("llmbench.experiment/v1", "v0")).unwrap();
        let err = read(&path).unwrap_err().to_string();
        assert!(err.contains("schema"), "{err}");
    }
}
