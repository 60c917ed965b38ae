//! The chart's launcher defaults (`launcher.defaults` in values.yaml, handed to the operator as JSON in
//! `LLMBENCH_LAUNCHER_DEFAULTS`): what every launcher, merge and collector pod, and the workload PVC the operator
//! creates, get when the run does not say, so a platform team sets resources, placement, pull secrets, the Hugging
//! Face token and the storage class once instead of in every run. A run's own field always wins, whole (a run's
//! nodeSelector replaces the default one, it is not merged key by key, as a pod template's would not be).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    LocalObjectReference, ResourceRequirements, SecretKeySelector, Toleration,
};
use serde::Deserialize;

/// The environment variable the chart passes [`LauncherDefaults`] in.
pub const LAUNCHER_DEFAULTS_ENV: &str = "LLMBENCH_LAUNCHER_DEFAULTS";

/// Operator-wide defaults for what runs leave unset. Unknown keys are refused, so a typo in the chart's values
/// stops the operator with the key's name instead of being ignored.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LauncherDefaults {
    /// Requests and limits of runs without `spec.launcher.resources` (else llmbench's own sizing).
    #[serde(default)]
    pub resources: Option<ResourceRequirements>,
    /// Node labels for runs without `spec.launcher.nodeSelector`.
    #[serde(default)]
    pub node_selector: BTreeMap<String, String>,
    /// Tolerations for runs without `spec.launcher.tolerations`.
    #[serde(default)]
    pub tolerations: Vec<Toleration>,
    /// Pull secrets of every pod the operator starts for a run (runs have no field of their own for them).
    #[serde(default)]
    pub image_pull_secrets: Vec<LocalObjectReference>,
    /// The ServiceAccount of runs without `spec.launcher.serviceAccountName`.
    #[serde(default)]
    pub service_account_name: Option<String>,
    /// The Secret key holding the Hugging Face token, for runs without `spec.launcher.hfTokenSecretRef`.
    #[serde(default)]
    pub hf_token_secret_ref: Option<HfTokenSecret>,
    /// The storage class of a workload PVC the operator creates for a run that names none.
    #[serde(default)]
    pub storage_class_name: Option<String>,
}

/// A Secret and key; an empty name (the chart's default) means none.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HfTokenSecret {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub key: String,
}

/// Why the defaults cannot be read.
#[derive(Debug, thiserror::Error)]
#[error(
    "{LAUNCHER_DEFAULTS_ENV} (the chart's launcher.defaults) is not valid: {reason}\n  help: the keys are \
     resources, nodeSelector, tolerations, imagePullSecrets, serviceAccountName, hfTokenSecretRef {{name, key}} \
     and storageClassName"
)]
pub struct LauncherDefaultsError {
    reason: String,
}

impl LauncherDefaults {
    /// Reads the JSON the chart renders; blank text means no defaults. Empty values as the chart writes them for
    /// "unset" (`""`, `{}`, a secret without a name) are read as unset.
    pub fn from_json(text: &str) -> Result<Self, LauncherDefaultsError> {
        if text.trim().is_empty() {
            return Ok(Self::default());
        }
        let mut defaults: Self = serde_json::from_str(text).map_err(|e| LauncherDefaultsError {
            reason: e.to_string(),
        })?;
        defaults.resources = defaults
            .resources
            .filter(|r| r != &ResourceRequirements::default());
        defaults.service_account_name = defaults.service_account_name.filter(|s| !s.is_empty());
        defaults.storage_class_name = defaults.storage_class_name.filter(|s| !s.is_empty());
        defaults.hf_token_secret_ref = match defaults.hf_token_secret_ref {
            Some(secret) if secret.name.is_empty() => None,
            Some(secret) if secret.key.is_empty() => {
                return Err(LauncherDefaultsError {
                    reason: format!("hfTokenSecretRef names Secret {} but no key", secret.name),
                });
            }
            other => other,
        };
        Ok(defaults)
    }

    /// The HF token's Secret key as a pod's env source takes it.
    pub fn hf_token_secret(&self) -> Option<SecretKeySelector> {
        self.hf_token_secret_ref
            .as_ref()
            .map(|secret| SecretKeySelector {
                name: secret.name.clone(),
                key: secret.key.clone(),
                optional: None,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blank_text_and_the_charts_empty_values_mean_no_defaults() {
        assert_eq!(
            LauncherDefaults::from_json("").expect("blank"),
            LauncherDefaults::default()
        );
        let chart_empty = r#"{"resources":{},"nodeSelector":{},"tolerations":[],"imagePullSecrets":[],
            "serviceAccountName":"","hfTokenSecretRef":{"name":"","key":"token"},"storageClassName":""}"#;
        assert_eq!(
            LauncherDefaults::from_json(chart_empty).expect("empty values"),
            LauncherDefaults::default()
        );
    }

    #[test]
    fn set_values_are_read_and_a_typo_is_refused_with_its_key() {
        let defaults = LauncherDefaults::from_json(
            r#"{"resources":{"limits":{"cpu":"4"}},"nodeSelector":{"pool":"bench"},
                "imagePullSecrets":[{"name":"regcred"}],"hfTokenSecretRef":{"name":"hf","key":"token"},
                "storageClassName":"fast"}"#,
        )
        .expect("valid");
        assert_eq!(defaults.node_selector["pool"], "bench");
        assert_eq!(defaults.image_pull_secrets[0].name, "regcred");
        assert_eq!(defaults.storage_class_name.as_deref(), Some("fast"));
        assert_eq!(
            defaults.hf_token_secret().map(|s| (s.name, s.key)),
            Some(("hf".to_owned(), "token".to_owned()))
        );
        let typo = LauncherDefaults::from_json(r#"{"nodeSelecter":{"pool":"bench"}}"#)
            .expect_err("a typo is refused")
            .to_string();
        assert!(typo.contains("unknown field `nodeSelecter`"), "{typo}");
        assert!(typo.contains("nodeSelector"), "{typo}");
        let keyless = LauncherDefaults::from_json(r#"{"hfTokenSecretRef":{"name":"hf","key":""}}"#)
            .expect_err("a secret without a key is refused")
            .to_string();
        assert!(keyless.contains("names Secret hf but no key"), "{keyless}");
    }
}
