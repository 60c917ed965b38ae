//! Everything checked before an experiment's first run, with no client: the plan (treatments × repeats), each
//! treatment's profile rendered exactly as its run's will be (so a level that matches no key is caught before
//! any load is sent), the capacity search, the cool-down, storage the comparison can be written to, and names
//! and directories within their bounds.

use kube::ResourceExt;
use llmbench_api::capacity::{CapacitySearch, ObjectiveError};
use llmbench_api::experiment::{ExperimentError, PlannedRun, ResolvedTreatment, plan};
use llmbench_api::v1alpha1::{BenchmarkExperiment, WorkloadProfile};

use super::schedule::OrderingRules;
use crate::builders::BuildError;
use crate::builders::experiment::{
    MAX_RESULTS_DIR, experiment_dir, experiment_run, experiment_run_name,
};
use crate::resolve::{ResolveError, render_run_profile};

/// An experiment's runs, named and placed.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub treatments: Vec<ResolvedTreatment>,
    /// Every run, repeat-major.
    pub runs: Vec<PlannedRun>,
    /// Each run's directory below the experiment's, `<treatment>-r<repeat>`.
    pub dirs: Vec<String>,
    /// Each run's BenchmarkRun name.
    pub names: Vec<String>,
    /// The experiment's directory on the workload volume.
    pub experiment_dir: String,
    pub ordering: OrderingRules,
}

/// Why an experiment cannot start; the message becomes the Valid condition and a Warning event.
#[derive(Debug, thiserror::Error)]
pub enum Invalid {
    #[error("{0}")]
    Plan(#[from] ExperimentError),
    #[error("treatment `{treatment}`: {source}")]
    Render {
        treatment: String,
        #[source]
        source: ResolveError,
    },
    #[error("{field}: {source}")]
    CapacitySearch {
        field: &'static str,
        #[source]
        source: ObjectiveError,
    },
    #[error("spec.ordering.cooldown: {0}")]
    Cooldown(String),
    #[error(
        "spec.template.storage.emptyDir: an experiment needs a PVC — its runs write below one directory and the \
         collector reads them all afterwards, which scratch space that dies with each pod cannot give"
    )]
    EmptyDir,
    #[error(
        "spec.template.{field} is set: an experiment runs load and compares the results, so its runs cannot \
         {what}"
    )]
    Template {
        field: &'static str,
        what: &'static str,
    },
    #[error(
        "run {run} would write to `{dir}` ({len} characters), more than the {MAX_RESULTS_DIR} a results directory \
         may have: shorten spec.template.resultsDir"
    )]
    ResultsDirTooLong {
        run: String,
        dir: String,
        len: usize,
    },
    #[error("runs {first} and {second} would both be named {name}; rename a treatment")]
    NameClash {
        first: String,
        second: String,
        name: String,
    },
    #[error("{0}")]
    Build(#[from] BuildError),
}

impl Invalid {
    /// The Valid condition's reason.
    pub fn reason(&self) -> &'static str {
        match self {
            Invalid::Plan(_) => "InvalidPlan",
            Invalid::Render { source, .. } => source.reason(),
            Invalid::CapacitySearch { .. } => "InvalidCapacitySearch",
            Invalid::Cooldown(_) => "InvalidCooldown",
            Invalid::EmptyDir => "EmptyDirStorage",
            Invalid::Template { .. } => "UnsupportedTemplate",
            Invalid::ResultsDirTooLong { .. } => "ResultsDirTooLong",
            Invalid::NameClash { .. } => "RunNameClash",
            Invalid::Build(_) => "BuildFailed",
        }
    }
}

/// The plan of `experiment`, every name and directory checked, without rendering: for an experiment that has
/// started (its spec is frozen, so it was fully validated before its first run).
pub fn plan_of(experiment: &BenchmarkExperiment) -> Result<Plan, Invalid> {
    let spec = &experiment.spec;
    let (treatments, runs) = plan(spec)?;
    let dir = experiment_dir(experiment)?;
    let dirs: Vec<String> = runs.iter().map(|r| r.dir_name(&treatments)).collect();
    let names: Vec<String> = dirs
        .iter()
        .map(|d| experiment_run_name(&experiment.name_any(), d))
        .collect();
    for (name, run_dir) in names.iter().zip(&dirs) {
        let full = format!("{dir}/{run_dir}");
        if full.len() > MAX_RESULTS_DIR {
            return Err(Invalid::ResultsDirTooLong {
                run: name.clone(),
                len: full.len(),
                dir: full,
            });
        }
    }
    let mut seen = std::collections::BTreeMap::new();
    for (name, run_dir) in names.iter().zip(&dirs) {
        if let Some(first) = seen.insert(name.as_str(), run_dir.as_str()) {
            return Err(Invalid::NameClash {
                first: first.to_owned(),
                second: run_dir.clone(),
                name: name.clone(),
            });
        }
    }
    let cooldown = match &spec.ordering.cooldown {
        Some(text) => llmbench_api::experiment::cooldown(text)
            .map_err(|e| Invalid::Cooldown(e.to_string()))?,
        None => std::time::Duration::ZERO,
    };
    Ok(Plan {
        treatments,
        runs,
        dirs,
        names,
        experiment_dir: dir,
        ordering: OrderingRules {
            parallelism: spec.ordering.parallelism,
            cooldown,
            stop_on_failure: spec.ordering.stop_on_failure,
        },
    })
}

/// Everything checked before the first run. `profile` is the WorkloadProfile the template's profileRef names,
/// when it has one and it exists.
pub fn validate(
    experiment: &BenchmarkExperiment,
    profile: Option<&WorkloadProfile>,
) -> Result<Plan, Invalid> {
    let template = &experiment.spec.template;
    if template.storage.pvc.is_none() && template.storage.empty_dir.is_some() {
        return Err(Invalid::EmptyDir);
    }
    if template.skip_run {
        return Err(Invalid::Template {
            field: "skipRun",
            what: "only collect earlier results",
        });
    }
    if template.launcher.debug {
        return Err(Invalid::Template {
            field: "launcher.debug",
            what: "be debug pods that measure nothing",
        });
    }
    for (field, search) in [
        (
            "spec.capacitySearch",
            experiment.spec.capacity_search.as_ref(),
        ),
        (
            "spec.template.capacitySearch",
            template.capacity_search.as_ref(),
        ),
    ] {
        if let Some(search) = search {
            CapacitySearch::try_from(search)
                .map_err(|source| Invalid::CapacitySearch { field, source })?;
        }
    }
    let plan = plan_of(experiment)?;
    // One render per treatment: the repeats of a treatment render the same profile.
    for (index, treatment) in plan.treatments.iter().enumerate() {
        let Some(first) = plan.runs.iter().find(|r| r.treatment == index) else {
            continue;
        };
        let run = experiment_run(experiment, &plan.treatments, first, &[])?;
        render_run_profile(&run, profile).map_err(|source| Invalid::Render {
            treatment: treatment.name.clone(),
            source,
        })?;
    }
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builders::experiment::fixtures::{TWO_BY_TWO, experiment};

    #[test]
    fn a_good_experiment_plans_named_runs_below_its_directory() {
        let plan = validate(&experiment(TWO_BY_TWO), None).expect("valid");
        assert_eq!(
            plan.names,
            [
                "sweep-rate-5-r1",
                "sweep-rate-10-r1",
                "sweep-rate-5-r2",
                "sweep-rate-10-r2"
            ]
        );
        assert_eq!(plan.dirs[1], "rate-10-r1");
        assert_eq!(plan.experiment_dir, "sweep-7d1e2f30");
        assert_eq!(plan.ordering.parallelism, 1);
    }

    #[test]
    fn a_level_matching_no_profile_key_names_the_treatment_and_the_key() {
        let exp = experiment(&TWO_BY_TWO.replace("load.stages.0.rate", "load.stage.0.rate"));
        let err = validate(&exp, None).expect_err("unmatched");
        assert_eq!(err.reason(), "UnmatchedOverride");
        let message = err.to_string();
        assert!(message.starts_with("treatment `rate-5`: "), "{message}");
        assert!(message.contains("load.stage.0.rate"), "{message}");
    }

    #[test]
    fn a_list_treatment_with_a_bad_override_is_caught_before_any_run() {
        let exp = experiment(
            "template:\n  harness: inference-perf\n  workload: {builtin: sanity_random}\n  stack: {endpoint: \
             http://a:1, model: m}\ntreatments:\n  - {name: good, overrides: [load.stages.0.rate=2]}\n  - {name: bad, \
             overrides: [no_such_key=1]}\n",
        );
        let err = validate(&exp, None).expect_err("unmatched");
        assert!(err.to_string().contains("treatment `bad`"), "{err}");
        assert!(err.to_string().contains("no_such_key"), "{err}");
    }

    #[test]
    fn plan_errors_capacity_searches_and_storage_are_refused_with_their_reason() {
        let mut both = experiment(TWO_BY_TWO);
        both.spec.treatments = Some(vec![]);
        assert_eq!(
            validate(&both, None).expect_err("both").reason(),
            "InvalidPlan"
        );
        let search = experiment(&format!(
            "{TWO_BY_TWO}capacitySearch:\n  load: rate\n  slo: ['ttft_p98<=1ms']\n"
        ));
        let err = validate(&search, None).expect_err("bad objective");
        assert_eq!(err.reason(), "InvalidCapacitySearch");
        assert!(
            err.to_string().starts_with("spec.capacitySearch: "),
            "{err}"
        );
        let scratch = experiment(&TWO_BY_TWO.replace(
            "  overrides: [load.stages.0.duration=5]\n",
            "  overrides: [load.stages.0.duration=5]\n  storage:\n    emptyDir: {}\n",
        ));
        assert_eq!(
            validate(&scratch, None).expect_err("emptyDir").reason(),
            "EmptyDirStorage"
        );
        let mut debug = experiment(TWO_BY_TWO);
        debug.spec.template.launcher.debug = true;
        assert_eq!(
            validate(&debug, None).expect_err("debug").reason(),
            "UnsupportedTemplate"
        );
    }

    #[test]
    fn a_missing_workload_profile_is_reported_as_the_run_would() {
        let exp = experiment(
            "template:\n  harness: inference-perf\n  workload: {profileRef: {name: chat}}\n  stack: {endpoint: \
             http://a:1, model: m}\ntreatments:\n  - {name: a}\n",
        );
        assert_eq!(
            validate(&exp, None).expect_err("missing").reason(),
            "ProfileNotFound"
        );
    }

    #[test]
    fn a_results_dir_too_deep_for_the_runs_is_refused() {
        let mut exp = experiment(TWO_BY_TWO);
        exp.spec.template.results_dir = Some("d".repeat(250));
        assert_eq!(
            validate(&exp, None).expect_err("too long").reason(),
            "ResultsDirTooLong"
        );
    }

    #[test]
    fn the_cooldown_is_parsed() {
        let mut exp = experiment(TWO_BY_TWO);
        exp.spec.ordering.cooldown = Some("1m30s".to_owned());
        let plan = plan_of(&exp).expect("valid");
        assert_eq!(plan.ordering.cooldown, std::time::Duration::from_secs(90));
    }

    #[test]
    fn a_cooldown_longer_than_a_run_may_last_is_refused() {
        let mut exp = experiment(TWO_BY_TWO);
        exp.spec.ordering.cooldown = Some("720h".to_owned());
        plan_of(&exp).expect("30 days is the limit itself");
        exp.spec.ordering.cooldown = Some("744h".to_owned());
        let Err(Invalid::Cooldown(message)) = plan_of(&exp) else {
            panic!("31 days is refused");
        };
        assert_eq!(
            message,
            "`744h`: 2678400 s is above llmbench's limit of 2592000 s (30 days), the longest a run may last; a \
             longer pause is a sequence of experiments"
        );
    }
}
