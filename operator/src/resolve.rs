//! Resolve a run's workload (WorkloadProfile, bundled library or inline template) and render it with the shared
//! renderer: the same text `llmbench render` prints for the same inputs.

use kube::ResourceExt;
use llmbench_api::library::{LibraryError, builtin_profile};
use llmbench_api::render::{Override, OverrideError, RenderError, render_profile};
use llmbench_api::v1alpha1::{BenchmarkRun, Harness, WorkloadProfile};

/// A rendered profile and where its template came from.
#[derive(Debug, Clone, PartialEq)]
pub struct RenderedProfile {
    pub template_name: String,
    pub text: String,
}

/// Why a run's profile cannot be rendered; the message becomes the ProfileRendered condition and an Event.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    #[error("spec.workload sets no profile source: set one of profileRef, builtin or template")]
    NoSource,
    #[error(
        "WorkloadProfile {name} (spec.workload.profileRef) was not found in namespace {namespace}"
    )]
    ProfileNotFound { name: String, namespace: String },
    #[error(
        "WorkloadProfile {name} is written for harness {profile_harness}, but the run's spec.harness is {run_harness}"
    )]
    HarnessMismatch {
        name: String,
        profile_harness: Harness,
        run_harness: Harness,
    },
    #[error("spec.workload.builtin: {0}")]
    Library(#[from] LibraryError),
    #[error("spec.{field}: {source}")]
    Override {
        field: &'static str,
        source: OverrideError,
    },
    #[error("{0}")]
    Render(#[from] RenderError),
}

impl ResolveError {
    /// The condition reason for this error.
    pub fn reason(&self) -> &'static str {
        match self {
            ResolveError::NoSource => "NoWorkload",
            ResolveError::ProfileNotFound { .. } => "ProfileNotFound",
            ResolveError::HarnessMismatch { .. } => "HarnessMismatch",
            ResolveError::Library(_) => "UnknownBuiltinProfile",
            ResolveError::Override { .. } => "MalformedOverride",
            ResolveError::Render(RenderError::UnresolvedPlaceholders { .. }) => {
                "UnresolvedPlaceholder"
            }
            ResolveError::Render(RenderError::UnmatchedOverrides { .. }) => "UnmatchedOverride",
            ResolveError::Render(_) => "RenderFailed",
        }
    }
}

/// Renders `run`'s profile. `profile` is the WorkloadProfile named by `spec.workload.profileRef`, when the run
/// uses one and it exists; its parameter defaults fill placeholders the run leaves unset.
pub fn render_run_profile(
    run: &BenchmarkRun,
    profile: Option<&WorkloadProfile>,
) -> Result<RenderedProfile, ResolveError> {
    let spec = &run.spec;
    let namespace = run.namespace().unwrap_or_default();
    let mut values = crate::builders::run_values(run);
    let (template_name, template) = match (
        &spec.workload.profile_ref,
        &spec.workload.builtin,
        &spec.workload.template,
    ) {
        (Some(reference), _, _) => {
            let profile = profile.ok_or_else(|| ResolveError::ProfileNotFound {
                name: reference.name.clone(),
                namespace: namespace.clone(),
            })?;
            if profile.spec.harness != spec.harness {
                return Err(ResolveError::HarnessMismatch {
                    name: reference.name.clone(),
                    profile_harness: profile.spec.harness,
                    run_harness: spec.harness,
                });
            }
            for parameter in &profile.spec.parameters {
                if let Some(default) = &parameter.default {
                    values
                        .entry(parameter.name.clone())
                        .or_insert_with(|| default.clone());
                }
            }
            (
                format!("WorkloadProfile {}", reference.name),
                profile.spec.template.clone(),
            )
        }
        (None, Some(name), _) => {
            let builtin = builtin_profile(spec.harness.as_str(), name)?;
            (builtin.file_name(), builtin.template.to_owned())
        }
        (None, None, Some(text)) => (
            format!("BenchmarkRun {} spec.workload.template", run.name_any()),
            text.clone(),
        ),
        (None, None, None) => return Err(ResolveError::NoSource),
    };
    // Adds first, so an override (an experiment's factor among them) may set a key an add created.
    let overrides = spec
        .override_add
        .iter()
        .map(|o| {
            Override::parse_add(o).map_err(|source| ResolveError::Override {
                field: "overrideAdd",
                source,
            })
        })
        .chain(spec.overrides.iter().map(|o| {
            Override::parse(o).map_err(|source| ResolveError::Override {
                field: "overrides",
                source,
            })
        }))
        .collect::<Result<Vec<_>, _>>()?;
    let text = render_profile(&template_name, &template, &values, &overrides)?;
    Ok(RenderedProfile {
        template_name,
        text,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builders::fixtures;
    use llmbench_api::v1alpha1::{ProfileParameter, WorkloadProfileSpec};

    #[test]
    fn a_builtin_profile_renders_with_the_stack_values() {
        let rendered = render_run_profile(&fixtures::run(fixtures::BASIC), None).expect("renders");
        assert_eq!(
            rendered.template_name,
            "inference-perf/sanity_random.yaml.in"
        );
        assert!(
            rendered
                .text
                .contains("base_url: http://vllm.llm-d.svc:8000"),
            "{}",
            rendered.text
        );
        assert!(!rendered.text.contains("REPLACE_ENV_"));
    }

    #[test]
    fn an_unmatched_override_is_reported_with_its_reason() {
        let run = fixtures::run(&format!(
            "{}overrides: [load.stages.1.rate=7]\n",
            fixtures::BASIC
        ));
        let err = render_run_profile(&run, None).expect_err("unmatched");
        assert_eq!(err.reason(), "UnmatchedOverride");
        assert!(err.to_string().contains("load.stages.1.rate"), "{err}");
    }

    #[test]
    fn an_override_whose_last_key_is_missing_fails_and_names_override_add() {
        let run = fixtures::run(&format!(
            "{}overrides: [load.stages.0.rat=5]\n",
            fixtures::BASIC
        ));
        let err = render_run_profile(&run, None).expect_err("a typo creates nothing");
        assert_eq!(err.reason(), "UnmatchedOverride");
        let message = err.to_string();
        assert!(
            message.contains("did you mean `load.stages.0.rate`?")
                && message.contains("spec.overrideAdd"),
            "{message}"
        );
    }

    #[test]
    fn override_add_creates_a_key_that_overrides_then_set() {
        let run = fixtures::run(&format!(
            "{}overrideAdd: [data.input_distribution.skew=1]\noverrides: [data.input_distribution.skew=2]\n",
            fixtures::BASIC
        ));
        let rendered = render_run_profile(&run, None).expect("renders");
        let doc: serde_json::Value = serde_saphyr::from_str(&rendered.text).expect("yaml");
        assert_eq!(doc["data"]["input_distribution"]["skew"], 2);
    }

    #[test]
    fn a_malformed_override_add_names_its_field() {
        let run = fixtures::run(&format!("{}overrideAdd: [novalue]\n", fixtures::BASIC));
        let err = render_run_profile(&run, None).expect_err("malformed");
        assert_eq!(err.reason(), "MalformedOverride");
        assert!(err.to_string().starts_with("spec.overrideAdd: "), "{err}");
    }

    #[test]
    fn an_unresolved_placeholder_in_an_inline_template_names_the_run() {
        let run = fixtures::run(
            "harness: nop\nworkload:\n  template: \"x: REPLACE_ENV_MISSING\"\nstack:\n  endpoint: http://a:1\n  model: m\n",
        );
        let err = render_run_profile(&run, None).expect_err("unresolved");
        assert_eq!(err.reason(), "UnresolvedPlaceholder");
        assert!(
            err.to_string()
                .contains("BenchmarkRun bench-1 spec.workload.template"),
            "{err}"
        );
        assert!(
            err.to_string().contains("REPLACE_ENV_MISSING (line 1)"),
            "{err}"
        );
    }

    fn profile(harness: Harness) -> WorkloadProfile {
        WorkloadProfile::new(
            "chat",
            WorkloadProfileSpec {
                harness,
                template:
                    "model: REPLACE_ENV_LLMDBENCH_DEPLOY_CURRENT_MODEL\nrate: REPLACE_ENV_RATE\n"
                        .to_owned(),
                description: None,
                parameters: vec![ProfileParameter {
                    name: "RATE".to_owned(),
                    default: Some("4".to_owned()),
                    description: None,
                }],
            },
        )
    }

    #[test]
    fn a_workload_profile_fills_its_parameter_defaults_and_the_run_env_wins() {
        let base = "harness: inference-perf\nworkload:\n  profileRef: {name: chat}\nstack:\n  endpoint: http://a:1\n  model: m\n";
        let rendered =
            render_run_profile(&fixtures::run(base), Some(&profile(Harness::InferencePerf)))
                .expect("renders");
        assert_eq!(rendered.text, "model: m\nrate: 4\n");
        let with_env = fixtures::run(&format!("{base}env:\n  RATE: '9'\n"));
        let rendered =
            render_run_profile(&with_env, Some(&profile(Harness::InferencePerf))).expect("renders");
        assert_eq!(rendered.text, "model: m\nrate: 9\n");
    }

    #[test]
    fn a_missing_or_mismatched_workload_profile_is_an_error() {
        let base = "harness: guidellm\nworkload:\n  profileRef: {name: chat}\nstack:\n  endpoint: http://a:1\n  model: m\n";
        let run = fixtures::run(base);
        assert_eq!(
            render_run_profile(&run, None)
                .expect_err("missing")
                .reason(),
            "ProfileNotFound"
        );
        let err =
            render_run_profile(&run, Some(&profile(Harness::InferencePerf))).expect_err("mismatch");
        assert_eq!(err.reason(), "HarnessMismatch");
    }
}

#[cfg(test)]
mod examples {
    use super::*;
    use kube::api::DynamicObject;

    /// Every BenchmarkRun in examples/ renders (with the WorkloadProfiles of the same file), so the README's
    /// walk-through never starts with a broken file.
    #[test]
    fn every_example_run_renders() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
        let mut runs = 0;
        for entry in std::fs::read_dir(&dir).expect("examples/ exists") {
            let path = entry.expect("entry").path();
            // examples/local/ holds what only the CLI runs (no stack to send to in a cluster).
            if path.is_dir() {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("readable");
            let docs: Vec<DynamicObject> = serde_saphyr::from_multiple(&text)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let mut profiles = Vec::new();
            for doc in &docs {
                let kind = doc.types.as_ref().map(|t| t.kind.as_str());
                if kind == Some("WorkloadProfile") {
                    let value = serde_json::to_value(doc).expect("json");
                    profiles.push(
                        serde_json::from_value::<WorkloadProfile>(value)
                            .expect("a WorkloadProfile"),
                    );
                }
            }
            for doc in docs
                .iter()
                .filter(|d| d.types.as_ref().map(|t| t.kind.as_str()) == Some("BenchmarkRun"))
            {
                let value = serde_json::to_value(doc).expect("json");
                let mut run: BenchmarkRun = serde_json::from_value(value)
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                run.metadata.namespace = Some("default".to_owned());
                let profile = run.spec.workload.profile_ref.as_ref().and_then(|r| {
                    profiles
                        .iter()
                        .find(|p| p.metadata.name.as_deref() == Some(r.name.as_str()))
                });
                render_run_profile(&run, profile)
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                runs += 1;
            }
        }
        assert!(runs >= 3, "found {runs} example runs");
    }
}
