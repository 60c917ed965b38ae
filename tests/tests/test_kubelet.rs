//! The test kubelet behaves as the operator's end-to-end tests assume a kubelet does: it binds and runs a pod with
//! its volumes mapped, reports Running and then the exit code and termination message, falls back to the log tail
//! on failure when asked, and completes graceful deletion of a running pod.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, PostParams};
use llmbench_e2e::cluster::create_namespace;
use llmbench_e2e::{ControlPlane, KubeletConfig, TestKubelet, e2e_disabled};
use serde_json::json;

const SELECTOR: &str = "llmbench-e2e/kubelet-test=yes";

fn shell_pod(name: &str, script: &str, policy: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"llmbench-e2e/kubelet-test": "yes"}},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{
                "name": "main",
                "image": "busybox",
                // Paths go in as separate arguments: the kubelet maps arguments, not words inside a script.
                "command": ["sh", "-c", script, "sh", "/etc/config", "/data", "/dev/termination-log"],
                "terminationMessagePolicy": policy,
                "volumeMounts": [
                    {"name": "config", "mountPath": "/etc/config"},
                    {"name": "data", "mountPath": "/data"},
                ],
            }],
            "volumes": [
                {"name": "config", "configMap": {"name": "settings"}},
                {"name": "data", "persistentVolumeClaim": {"claimName": "shared"}},
            ],
        }
    }))
    .expect("pod literal")
}

async fn wait_for_phase(
    pods: &Api<Pod>,
    name: &str,
    phases: &[&str],
    kubelet: &TestKubelet,
) -> Pod {
    for _ in 0..150 {
        if let Ok(pod) = pods.get(name).await
            && let Some(phase) = pod.status.as_ref().and_then(|s| s.phase.as_deref())
            && phases.contains(&phase)
        {
            return pod;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "pod {name} never reached {phases:?}; kubelet errors: {:?}",
        kubelet.errors()
    );
}

fn terminated(pod: &Pod) -> (i32, String) {
    let state = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.first())
        .and_then(|c| c.state.as_ref())
        .and_then(|s| s.terminated.as_ref())
        .expect("a terminated container state");
    (state.exit_code, state.message.clone().unwrap_or_default())
}

#[tokio::test]
async fn the_test_kubelet_runs_pods_with_their_volumes_and_reports_how_they_ended() {
    if e2e_disabled("the_test_kubelet_runs_pods_with_their_volumes_and_reports_how_they_ended") {
        return;
    }
    let cp = ControlPlane::start()
        .await
        .unwrap_or_else(|e| panic!("starting the control plane: {e}"));
    let client = cp.admin_client().await.expect("admin client");
    create_namespace(&client, "kubelet").await;
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), "kubelet");
    let settings: ConfigMap = serde_json::from_value(
        json!({"metadata": {"name": "settings"}, "data": {"greeting": "hello"}}),
    )
    .expect("config map literal");
    config_maps
        .create(&PostParams::default(), &settings)
        .await
        .expect("create config map");

    let root = tempfile::tempdir().expect("kubelet root");
    let kubelet = TestKubelet::start(
        client.clone(),
        KubeletConfig {
            node_name: "test-node".to_owned(),
            root: root.path().to_owned(),
            label_selector: SELECTOR.to_owned(),
            binaries: BTreeMap::new(),
        },
    );
    let pods: Api<Pod> = Api::namespaced(client.clone(), "kubelet");

    let ok = shell_pod(
        "ok",
        r#"cat "$1/greeting" > "$2/copied" && printf done > "$3""#,
        "File",
    );
    pods.create(&PostParams::default(), &ok)
        .await
        .expect("create pod ok");
    let pod = wait_for_phase(&pods, "ok", &["Succeeded", "Failed"], &kubelet).await;
    assert_eq!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded")
    );
    assert_eq!(
        pod.spec.as_ref().and_then(|s| s.node_name.as_deref()),
        Some("test-node")
    );
    assert_eq!(terminated(&pod), (0, "done".to_owned()));
    let copied = std::fs::read_to_string(kubelet.pvc_dir("kubelet", "shared").join("copied"))
        .expect("PVC file");
    assert_eq!(copied, "hello");

    let failing = shell_pod(
        "failing",
        "echo first; echo the last words >&2; exit 3",
        "FallbackToLogsOnError",
    );
    pods.create(&PostParams::default(), &failing)
        .await
        .expect("create pod failing");
    let pod = wait_for_phase(&pods, "failing", &["Succeeded", "Failed"], &kubelet).await;
    assert_eq!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Failed")
    );
    let (code, message) = terminated(&pod);
    assert_eq!(code, 3);
    assert!(message.ends_with("the last words"), "{message:?}");

    let sleeper = shell_pod("sleeper", "sleep 600", "File");
    pods.create(&PostParams::default(), &sleeper)
        .await
        .expect("create pod sleeper");
    wait_for_phase(&pods, "sleeper", &["Running"], &kubelet).await;
    pods.delete("sleeper", &DeleteParams::default())
        .await
        .expect("delete sleeper");
    for _ in 0..100 {
        if pods
            .get_opt("sleeper")
            .await
            .expect("get sleeper")
            .is_none()
        {
            assert!(kubelet.errors().is_empty(), "{:?}", kubelet.errors());
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let left = pods.get("sleeper").await.map(|p| p.name_any());
    panic!("the deleted running pod is still there: {left:?}");
}
