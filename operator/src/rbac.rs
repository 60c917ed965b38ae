//! Every API permission the operator uses, in one table beside the code that uses it. The chart's RBAC rules
//! (charts/llmbench/templates/_helpers.tpl) must grant exactly these: a test fails when either side drifts, and
//! the end-to-end tests run the operator under the chart's RBAC, so a missing verb fails there too.

/// `(apiGroup, resource, verbs)`, each verb with the call that needs it.
pub const PERMISSIONS: &[(&str, &str, &[&str])] = &[
    // Controller watch (list, watch); fresh read each reconcile (get); finalizer add/remove (patch); an
    // experiment's runs created (create) and deleted with it (delete).
    (
        "llmbench.dev",
        "benchmarkruns",
        &["get", "list", "watch", "patch", "create", "delete"],
    ),
    // Server-side apply of the status.
    ("llmbench.dev", "benchmarkruns/status", &["patch"]),
    // Owner references with blockOwnerDeletion (OwnerReferencesPermissionEnforcement).
    ("llmbench.dev", "benchmarkruns/finalizers", &["update"]),
    // Experiment controller watch (list, watch); fresh read (get); finalizer add/remove (patch).
    (
        "llmbench.dev",
        "benchmarkexperiments",
        &["get", "list", "watch", "patch"],
    ),
    ("llmbench.dev", "benchmarkexperiments/status", &["patch"]),
    // An experiment's runs, plan ConfigMap and collector carry blockOwnerDeletion owner references.
    (
        "llmbench.dev",
        "benchmarkexperiments/finalizers",
        &["update"],
    ),
    // Profile controller watch; a run's profileRef read (get).
    (
        "llmbench.dev",
        "workloadprofiles",
        &["get", "list", "watch"],
    ),
    ("llmbench.dev", "workloadprofiles/status", &["patch"]),
    // Launcher and collector creation, listing by run label, the owned-pod watch, the collector read and the
    // owner check of a pod whose name is taken (get), deletion on timeout/failure/cleanup.
    ("", "pods", &["create", "get", "list", "watch", "delete"]),
    // A failed launcher's log tail; a standalone stack's log (its tail when it fails, the nop harness's whole log).
    ("", "pods/log", &["get"]),
    // <run>-profile and <experiment>-plan: read to check who owns one of that name (get), created where absent,
    // server-side applied while owned (patch), deleted with their owner.
    ("", "configmaps", &["get", "create", "patch", "delete"]),
    // Created if absent; never updated or deleted.
    ("", "persistentvolumeclaims", &["get", "create"]),
    // A run's standalone stack: the owned-Deployment watch (list, watch), the owner check and the readiness and
    // heartbeat reads (get), created where absent, deleted after the run.
    (
        "apps",
        "deployments",
        &["get", "list", "watch", "create", "delete"],
    ),
    // The standalone stack's Service: the owner check (get), created where absent, deleted after the run.
    ("", "services", &["get", "create", "delete"]),
    // kube::runtime::events::Recorder (creates, then patches a repeated event's series).
    ("events.k8s.io", "events", &["create", "patch"]),
];

/// The leader Lease: created once (create cannot be limited by name), then read and replaced by name.
pub const LEASE_PERMISSIONS: &[(&str, &str, &[&str])] = &[(
    "coordination.k8s.io",
    "leases",
    &["create", "get", "update"],
)];

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    type Grants = BTreeSet<(String, String, String)>;

    fn flatten(table: &[(&str, &str, &[&str])]) -> Grants {
        table
            .iter()
            .flat_map(|(group, resource, verbs)| {
                verbs
                    .iter()
                    .map(|v| ((*group).to_owned(), (*resource).to_owned(), (*v).to_owned()))
            })
            .collect()
    }

    /// The rules inside `{{- define "<name>" -}} … {{- end -}}` of the chart helpers, as YAML.
    fn chart_rules(name: &str) -> Grants {
        let helpers = include_str!("../../charts/llmbench/templates/_helpers.tpl");
        let start = format!("{{{{- define \"{name}\" -}}}}");
        let body = helpers
            .split_once(&start)
            .map(|(_, rest)| rest)
            .and_then(|rest| rest.split_once("{{- end -}}"))
            .map(|(body, _)| body)
            .unwrap_or_else(|| panic!("the chart helpers define {name}"));
        // Template expressions only appear as resourceNames values; they do not change the grants.
        let body: String = body
            .lines()
            .filter(|l| !l.contains("{{"))
            .collect::<Vec<_>>()
            .join("\n");
        let rules: Vec<serde_json::Value> = serde_saphyr::from_str(&body).expect("rules are YAML");
        let mut grants = Grants::new();
        for rule in rules {
            let strings = |key: &str| -> Vec<String> {
                rule[key]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|v| v.as_str().map(str::to_owned))
                            .collect()
                    })
                    .unwrap_or_default()
            };
            for group in strings("apiGroups") {
                for resource in strings("resources") {
                    for verb in strings("verbs") {
                        grants.insert((group.clone(), resource.clone(), verb));
                    }
                }
            }
        }
        grants
    }

    #[test]
    fn the_chart_grants_exactly_what_the_operator_uses() {
        assert_eq!(chart_rules("llmbench.workloadRules"), flatten(PERMISSIONS));
        assert_eq!(
            chart_rules("llmbench.leaseRules"),
            flatten(LEASE_PERMISSIONS)
        );
    }

    #[test]
    fn the_operator_never_deletes_or_updates_a_claim() {
        let claims: Vec<_> = flatten(PERMISSIONS)
            .into_iter()
            .filter(|(_, r, _)| r == "persistentvolumeclaims")
            .map(|(_, _, v)| v)
            .collect();
        assert_eq!(claims, vec!["create".to_owned(), "get".to_owned()]);
    }
}
