//! The WorkloadProfile reconciler: status lists the template's placeholders and whether it renders with its
//! parameter defaults and standard stack values.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::ResourceExt;
use kube::runtime::controller::Action;
use llmbench_api::render::{placeholders, render_profile, well_known};
use llmbench_api::v1alpha1::{
    DEFAULT_PVC_NAME, WORKLOAD_MOUNT_PATH, WorkloadProfile, WorkloadProfileStatus,
};

use super::{Ctx, apply_status};
use crate::metrics::ControllerName;

/// Why reconciling a WorkloadProfile failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("WorkloadProfile {profile} has no namespace")]
    MissingNamespace { profile: String },
    #[error("failed to write the status of WorkloadProfile {profile}: {source}")]
    PatchStatus {
        profile: String,
        source: kube::Error,
    },
}

/// Stand-ins for the values a run derives from its stack, so a template is checked as a run would render it.
fn standard_values() -> BTreeMap<String, String> {
    BTreeMap::from([
        (well_known::MODEL.to_owned(), "example/model".to_owned()),
        (well_known::TOKENIZER.to_owned(), "example/model".to_owned()),
        (well_known::MAX_MODEL_LEN.to_owned(), "4096".to_owned()),
        (
            well_known::ENDPOINT_URL.to_owned(),
            "http://stack.example.svc:8000".to_owned(),
        ),
        (
            well_known::DATASET_DIR.to_owned(),
            format!("{WORKLOAD_MOUNT_PATH}/datasets"),
        ),
        (well_known::PVC_NAME.to_owned(), DEFAULT_PVC_NAME.to_owned()),
    ])
}

/// The status of `profile`: pure.
pub fn profile_status(profile: &WorkloadProfile) -> WorkloadProfileStatus {
    let spec = &profile.spec;
    let mut values = standard_values();
    for parameter in &spec.parameters {
        if let Some(default) = &parameter.default {
            values.insert(parameter.name.clone(), default.clone());
        }
    }
    let template_name = format!("WorkloadProfile {}", profile.name_any());
    let result = render_profile(&template_name, &spec.template, &values, &[]);
    WorkloadProfileStatus {
        placeholders: placeholders(&spec.template),
        renders_with_defaults: Some(result.is_ok()),
        message: result.err().map(|e| e.to_string()),
        observed_generation: profile.metadata.generation,
    }
}

pub async fn reconcile(profile: Arc<WorkloadProfile>, ctx: Ctx) -> Result<Action, Error> {
    let started = Instant::now();
    let result = write_status(&profile, &ctx).await;
    ctx.metrics.reconciled(
        ControllerName::workloadprofile,
        started.elapsed().as_secs_f64(),
    );
    result.map(|()| Action::await_change())
}

pub fn error_policy(profile: Arc<WorkloadProfile>, error: &Error, ctx: Ctx) -> Action {
    ctx.metrics
        .failed(ControllerName::workloadprofile, "patch_status");
    tracing::warn!(profile = %profile.name_any(), error = %error, "reconcile failed");
    Action::requeue(Duration::from_secs(10))
}

async fn write_status(profile: &WorkloadProfile, ctx: &Ctx) -> Result<(), Error> {
    let status = profile_status(profile);
    if profile.status.as_ref() == Some(&status) {
        return Ok(());
    }
    let name = profile.name_any();
    if profile.namespace().is_none() {
        return Err(Error::MissingNamespace { profile: name });
    }
    apply_status(&ctx.client, profile, &status)
        .await
        .map_err(|source| Error::PatchStatus {
            profile: name,
            source,
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use llmbench_api::v1alpha1::{Harness, ProfileParameter, WorkloadProfileSpec};

    fn profile(template: &str, parameters: Vec<ProfileParameter>) -> WorkloadProfile {
        let mut p = WorkloadProfile::new(
            "chat",
            WorkloadProfileSpec {
                harness: Harness::InferencePerf,
                template: template.to_owned(),
                description: None,
                parameters,
            },
        );
        p.metadata.generation = Some(3);
        p
    }

    #[test]
    fn a_template_with_defaults_for_every_placeholder_renders() {
        let status = profile_status(&profile(
            "model: REPLACE_ENV_LLMDBENCH_DEPLOY_CURRENT_MODEL\nrate: REPLACE_ENV_RATE\n",
            vec![ProfileParameter {
                name: "RATE".to_owned(),
                default: Some("4".to_owned()),
                description: None,
            }],
        ));
        assert_eq!(
            status.placeholders,
            vec![
                "LLMDBENCH_DEPLOY_CURRENT_MODEL".to_owned(),
                "RATE".to_owned()
            ]
        );
        assert_eq!(status.renders_with_defaults, Some(true));
        assert_eq!(status.message, None);
        assert_eq!(status.observed_generation, Some(3));
    }

    #[test]
    fn a_placeholder_without_a_default_is_reported_by_name() {
        let status = profile_status(&profile("rate: REPLACE_ENV_RATE\n", vec![]));
        assert_eq!(status.renders_with_defaults, Some(false));
        let message = status.message.expect("message");
        assert!(message.contains("REPLACE_ENV_RATE"), "{message}");
        assert!(message.contains("WorkloadProfile chat"), "{message}");
    }
}
