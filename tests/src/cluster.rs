//! Cluster set-up for the end-to-end tests: our CRDs applied, namespaces, and the operator as it runs in production —
//! the chart's ServiceAccount and RBAC installed (cluster scope, as `helm template` renders them) and the operator binary
//! started with that ServiceAccount's token, never as admin, so a permission the chart lacks fails the tests.

use std::future::Future;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Client, ResourceExt};
use serde_json::json;

use crate::control_plane::{ControlPlane, Tool};
use crate::processes::{free_port, workspace_binary};

const FIELD_MANAGER: &str = "llmbench-e2e";
/// Where the chart installs the operator.
pub const OPERATOR_NAMESPACE: &str = "llmbench-system";

/// A control plane ready for the operator: our CRDs applied, the operator's namespace and `namespace` created, and
/// the chart's RBAC installed; returns it with an admin client and the operator's kubeconfig.
pub async fn prepared(namespace: &str) -> (ControlPlane, Client, PathBuf) {
    let cp = ControlPlane::start()
        .await
        .unwrap_or_else(|e| panic!("starting the control plane: {e}"));
    let admin = cp.admin_client().await.expect("admin client");
    apply_crds(&admin).await;
    create_namespace(&admin, OPERATOR_NAMESPACE).await;
    create_namespace(&admin, namespace).await;
    let kubeconfig = install_chart_rbac(&cp).await;
    (cp, admin, kubeconfig)
}

/// Applies `crds/*.yaml` and waits until both are Established.
pub async fn apply_crds(client: &Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for (file, yaml) in llmbench_api::crd_manifests() {
        let yaml = yaml.unwrap_or_else(|e| panic!("{file} serializes: {e}"));
        let crd: CustomResourceDefinition =
            serde_saphyr::from_str(&yaml).unwrap_or_else(|e| panic!("{file} parses: {e}"));
        let name = crd.name_any();
        crds.patch(
            &name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&crd),
        )
        .await
        .unwrap_or_else(|e| panic!("the apiserver rejected crds/{file}: {e}"));
        tokio::time::timeout(
            Duration::from_secs(30),
            await_condition(crds.clone(), &name, conditions::is_crd_established()),
        )
        .await
        .unwrap_or_else(|_| panic!("{name} is not Established after 30s"))
        .unwrap_or_else(|e| panic!("watching {name}: {e}"));
    }
}

/// An apiserver error as its message and one line per cause (the field and the rule's message).
pub fn explain(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => {
            let causes: Vec<String> = status
                .details
                .iter()
                .flat_map(|d| &d.causes)
                .map(|c| format!("  - {}: {}", c.field, c.message))
                .collect();
            if causes.is_empty() {
                format!("{} ({} {})", status.message, status.code, status.reason)
            } else {
                format!("{} {}:\n{}", status.code, status.reason, causes.join("\n"))
            }
        }
        other => other.to_string(),
    }
}

/// Creates namespace `name`.
pub async fn create_namespace(client: &Client, name: &str) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": name}}))
        .unwrap_or_else(|e| panic!("{e}"));
    namespaces
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap_or_else(|e| panic!("creating namespace {name}: {e}"));
}

/// Installs the chart's ServiceAccount and RBAC into [`OPERATOR_NAMESPACE`] (which must exist) and returns a
/// kubeconfig holding that ServiceAccount's token.
pub async fn install_chart_rbac(cp: &ControlPlane) -> PathBuf {
    let helm = cp
        .tools()
        .path(Tool::Helm)
        .unwrap_or_else(|e| panic!("{e}"));
    let chart = Path::new(env!("CARGO_MANIFEST_DIR")).join("../charts/llmbench");
    let rendered = Command::new(helm)
        .args(["template", "llmbench"])
        .arg(&chart)
        .args(["--namespace", OPERATOR_NAMESPACE])
        .args([
            "--show-only",
            "templates/serviceaccount.yaml",
            "--show-only",
            "templates/rbac.yaml",
        ])
        .output()
        .unwrap_or_else(|e| panic!("running helm: {e}"));
    assert!(
        rendered.status.success(),
        "helm template: {}",
        String::from_utf8_lossy(&rendered.stderr)
    );
    kubectl_apply(cp, &rendered.stdout)
        .unwrap_or_else(|e| panic!("kubectl apply of the chart's RBAC: {e}"));
    let token = cp
        .token_for_service_account(OPERATOR_NAMESPACE, "llmbench")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    cp.kubeconfig_for_token("operator", &token)
        .unwrap_or_else(|e| panic!("{e}"))
}

/// `kubectl apply -f -` of `manifests` as admin; `Err` carries kubectl's stderr.
pub fn kubectl_apply(cp: &ControlPlane, manifests: &[u8]) -> Result<String, String> {
    let mut kubectl = cp
        .kubectl()
        .map_err(|e| e.to_string())?
        .args(["apply", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("running kubectl: {e}"))?;
    if let Some(mut stdin) = kubectl.stdin.take() {
        stdin
            .write_all(manifests)
            .map_err(|e| format!("writing to kubectl: {e}"))?;
    }
    let out = kubectl
        .wait_with_output()
        .map_err(|e| format!("waiting for kubectl: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// The operator binary, running with a kubeconfig; killed when dropped.
pub struct OperatorProcess {
    child: Child,
    metrics_port: u16,
    log: PathBuf,
}

impl OperatorProcess {
    /// Starts `llmbench-operator run` with leader election on a short Lease (so a restarted operator takes over
    /// within seconds), its log in `log_dir`.
    pub fn start(kubeconfig: &Path, identity: &str, log_dir: &Path) -> Self {
        let binary = workspace_binary("llmbench-operator").unwrap_or_else(|e| panic!("{e}"));
        let metrics_port = free_port().unwrap_or_else(|e| panic!("{e}"));
        let log = log_dir.join(format!("operator-{identity}.log"));
        let file = std::fs::File::create(&log).unwrap_or_else(|e| panic!("{}: {e}", log.display()));
        let child = Command::new(binary)
            .args([
                "run",
                "--leader-elect",
                "--lease-name",
                "llmbench",
                "--lease-namespace",
                OPERATOR_NAMESPACE,
            ])
            .args([
                "--identity",
                identity,
                "--lease-duration",
                "4s",
                "--renew-deadline",
                "3s",
                "--retry-period",
                "1s",
            ])
            .args([
                "--metrics-bind",
                &format!("127.0.0.1:{metrics_port}"),
                "--launcher-image",
                "llmbench:e2e",
            ])
            .env("KUBECONFIG", kubeconfig)
            .env("RUST_LOG", "info,llmbench_operator=debug")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .unwrap_or_else(|e| panic!("starting the operator: {e}"));
        Self {
            child,
            metrics_port,
            log,
        }
    }

    /// The port of `/metrics`, `/healthz` and `/readyz`.
    pub fn metrics_port(&self) -> u16 {
        self.metrics_port
    }

    /// The last lines of the operator's log, for a failing test's message.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    /// Kills the process as a crash would: no graceful shutdown, the Lease left to expire.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for OperatorProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Polls `probe` until it yields a value; panics with `what` after `timeout`.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A plain HTTP/1.1 GET on loopback: the whole response, or `None` when nothing answers.
pub fn http_get(port: u16, path: &str) -> Option<String> {
    use std::io::Read;
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
