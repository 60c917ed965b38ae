//! The operator binary on a real kube-apiserver, under the chart's RBAC (its ServiceAccount's token, leader
//! election on): a profile that cannot render gets ProfileRendered=False, a Warning event and no pod; a run gets
//! its ConfigMap, PVC and launcher pod; a launcher's termination message becomes the summary; a timeout deletes
//! the pod; deleting a run removes its pod and ConfigMap but keeps the PVC — with no controller-manager running.
//!
//! No kubelet runs here: the test writes the launcher pod's status itself, as the test kubelet will.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, PersistentVolumeClaim, Pod};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Client, ResourceExt};
use llmbench_api::v1alpha1::{BenchmarkRun, Phase};
use llmbench_e2e::{ControlPlane, e2e_disabled};
use serde_json::json;

const MANAGER: &str = "llmbench-e2e";

struct Operator(Child);

impl Drop for Operator {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn operator_binary() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let path = target.join("debug/llmbench-operator");
    assert!(
        path.exists(),
        "{} is missing: run `cargo build -p llmbench-operator` (make test builds it)",
        path.display()
    );
    path
}

async fn apply_crds(client: &Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for (file, yaml) in llmbench_api::crd_manifests() {
        let crd: CustomResourceDefinition = serde_saphyr::from_str(&yaml.expect("serializes"))
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        let name = crd.name_any();
        crds.patch(
            &name,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(&crd),
        )
        .await
        .unwrap_or_else(|e| panic!("applying {file}: {e}"));
        tokio::time::timeout(
            Duration::from_secs(30),
            await_condition(crds.clone(), &name, conditions::is_crd_established()),
        )
        .await
        .expect("CRD established in time")
        .expect("watch");
    }
}

/// Installs the chart's ServiceAccount and RBAC (cluster scope) into llmbench-system, as `helm template` renders it.
fn install_chart_rbac(cp: &ControlPlane) {
    let helm = cp
        .tools()
        .path(llmbench_e2e::Tool::Helm)
        .expect("helm is built");
    let chart = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../charts/llmbench");
    let rendered = Command::new(helm)
        .args(["template", "llmbench"])
        .arg(&chart)
        .args([
            "--namespace",
            "llmbench-system",
            "--show-only",
            "templates/serviceaccount.yaml",
        ])
        .args(["--show-only", "templates/rbac.yaml"])
        .output()
        .expect("helm runs");
    assert!(
        rendered.status.success(),
        "helm template: {}",
        String::from_utf8_lossy(&rendered.stderr)
    );
    let mut apply = cp
        .kubectl()
        .expect("kubectl")
        .args(["apply", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl runs");
    {
        use std::io::Write;
        let mut stdin = apply.stdin.take().expect("stdin");
        stdin.write_all(&rendered.stdout).expect("write manifests");
    }
    let out = apply.wait_with_output().expect("kubectl finishes");
    assert!(
        out.status.success(),
        "kubectl apply: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

async fn eventually<T, F, Fut>(what: &str, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(v) = probe().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn run(name: &str, spec: serde_json::Value) -> BenchmarkRun {
    serde_json::from_value(json!({
        "apiVersion": "llmbench.dev/v1alpha1", "kind": "BenchmarkRun",
        "metadata": {"name": name}, "spec": spec
    }))
    .expect("a BenchmarkRun")
}

/// A plain HTTP/1.1 GET on loopback; the whole response, or `None` when nothing answers.
fn http_get(port: u16, path: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    Some(response)
}

const SUMMARY: &str = r#"{"schema":"llmbench.summary/v1","run_id":"x","harness":"inference-perf","model":"m","endpoint":"http://a:1","requests":{"total":100,"succeeded":100,"failed":0},"duration_s":30.0,"throughput":{"requests_per_s":3.3,"input_tokens_per_s":1200.0,"output_tokens_per_s":160.0},"latency_ms":{"ttft":{"mean":20.0,"p50":18.0,"p90":30.0,"p99":45.0},"tpot":null,"itl":null,"ntpot":null,"e2e":null},"schedule":{"requested_rate":1.0,"achieved_rate":1.0,"delay_ms":null},"errors":{},"stages":[]}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_drives_runs_under_the_charts_rbac() {
    if e2e_disabled("the_operator_drives_runs_under_the_charts_rbac") {
        return;
    }
    let binary = operator_binary();
    let cp = ControlPlane::start()
        .await
        .unwrap_or_else(|e| panic!("control plane: {e}"));
    let admin = cp.admin_client().await.expect("admin client");
    apply_crds(&admin).await;
    let namespaces: Api<Namespace> = Api::all(admin.clone());
    for ns in ["llmbench-system", "smoke"] {
        let object: Namespace =
            serde_json::from_value(json!({"metadata": {"name": ns}})).expect("ns");
        namespaces
            .create(&PostParams::default(), &object)
            .await
            .expect("namespace");
    }
    install_chart_rbac(&cp);
    let token = cp
        .token_for_service_account("llmbench-system", "llmbench")
        .await
        .expect("token");
    let kubeconfig = cp
        .kubeconfig_for_token("operator", &token)
        .expect("kubeconfig");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let _operator = Operator(
        Command::new(binary)
            .args([
                "run",
                "--leader-elect",
                "--lease-name",
                "llmbench",
                "--lease-namespace",
                "llmbench-system",
            ])
            .args([
                "--metrics-bind",
                &format!("127.0.0.1:{port}"),
                "--launcher-image",
                "llmbench:test",
            ])
            .env("KUBECONFIG", &kubeconfig)
            .env("RUST_LOG", "info,llmbench_operator=debug")
            .spawn()
            .expect("operator starts"),
    );

    eventually("/readyz", || async {
        (http_get(port, "/readyz")?.starts_with("HTTP/1.1 200")).then_some(())
    })
    .await;

    let runs: Api<BenchmarkRun> = Api::namespaced(admin.clone(), "smoke");
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "smoke");
    let pp = PostParams::default();

    // A profile that cannot render: condition, Warning event, no pod.
    runs.create(
        &pp,
        &run(
            "bad",
            json!({
                "harness": "nop", "workload": {"template": "x: REPLACE_ENV_MISSING\n"},
                "stack": {"endpoint": "http://127.0.0.1:1", "model": "m"}
            }),
        ),
    )
    .await
    .expect("create bad");
    let reason = eventually("ProfileRendered=False", || async {
        let r = runs.get("bad").await.ok()?;
        let c = r
            .status?
            .conditions
            .into_iter()
            .find(|c| c.type_ == "ProfileRendered")?;
        (c.status == "False").then_some(c.reason)
    })
    .await;
    assert_eq!(reason, "UnresolvedPlaceholder");
    let events: Api<Event> = Api::namespaced(admin.clone(), "smoke");
    eventually("a Warning event", || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        list.items
            .iter()
            .any(|e| {
                e.type_.as_deref() == Some("Warning")
                    && e.reason.as_deref() == Some("UnresolvedPlaceholder")
            })
            .then_some(())
    })
    .await;
    assert!(pods.get_opt("bad-launcher-0").await.expect("get").is_none());

    // A good run: ConfigMap, PVC, pod; the termination message becomes the summary.
    runs.create(
        &pp,
        &run(
            "good",
            json!({
                "harness": "inference-perf", "workload": {"builtin": "sanity_random"},
                "stack": {"endpoint": "http://127.0.0.1:1", "model": "m"}
            }),
        ),
    )
    .await
    .expect("create good");
    let pod = eventually("the launcher pod", || async {
        pods.get_opt("good-launcher-0").await.ok()?
    })
    .await;
    let spec = pod.spec.expect("pod spec");
    assert_eq!(spec.automount_service_account_token, Some(false));
    let cms: Api<ConfigMap> = Api::namespaced(admin.clone(), "smoke");
    assert!(cms.get_opt("good-profile").await.expect("get").is_some());
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(admin.clone(), "smoke");
    assert!(pvcs.get_opt("workload-pvc").await.expect("get").is_some());
    pods.patch_status(
        "good-launcher-0",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Succeeded", "containerStatuses": [{
            "name": "launcher", "image": "llmbench:test", "imageID": "", "ready": false, "restartCount": 0,
            "state": {"terminated": {"exitCode": 0, "reason": "Completed", "message": SUMMARY}}
        }]}})),
    )
    .await
    .expect("pod status");
    let status = eventually("Succeeded", || async {
        let s = runs.get("good").await.ok()?.status?;
        (s.phase == Some(Phase::Succeeded)).then_some(s)
    })
    .await;
    assert_eq!(status.summary.as_ref().map(|s| s.requests), Some(100));
    assert!(
        status
            .results_path
            .as_deref()
            .is_some_and(|p| p.starts_with("workload-pvc:/requests/good-"))
    );

    // Timeout: the pod goes, the run fails with reason Timeout.
    runs.create(
        &pp,
        &run(
            "slow",
            json!({
                "harness": "inference-perf", "workload": {"builtin": "sanity_random"},
                "stack": {"endpoint": "http://127.0.0.1:1", "model": "m"}, "timeout": "3s"
            }),
        ),
    )
    .await
    .expect("create slow");
    let reason = eventually("Failed/Timeout", || async {
        let s = runs.get("slow").await.ok()?.status?;
        let c = s.conditions.into_iter().find(|c| c.type_ == "Failed")?;
        (s.phase == Some(Phase::Failed)).then_some(c.reason)
    })
    .await;
    assert_eq!(reason, "Timeout");
    eventually("the timed-out pod gone", || async {
        pods.get_opt("slow-launcher-0")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;

    let metrics = http_get(port, "/metrics").expect("/metrics answers");
    assert!(
        metrics.contains("llmbench_operator_benchmark_runs{phase=\"Succeeded\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("llmbench_operator_reconciles_total{controller=\"benchmarkrun\"}"),
        "{metrics}"
    );

    // Deletion: pod and ConfigMap go with the run, the PVC stays.
    runs.delete("good", &DeleteParams::default())
        .await
        .expect("delete");
    eventually("the run gone", || async {
        runs.get_opt("good").await.ok()?.is_none().then_some(())
    })
    .await;
    assert!(
        pods.get_opt("good-launcher-0")
            .await
            .expect("get")
            .is_none()
    );
    assert!(cms.get_opt("good-profile").await.expect("get").is_none());
    assert!(pvcs.get_opt("workload-pvc").await.expect("get").is_some());
}
