//! The harness itself: RBAC is really on (a ServiceAccount token gets only what it is bound to), a startup failure
//! carries the apiserver's log, and no server outlives its control plane — on drop, on a panic, and when the test
//! process is killed outright.

use std::io::{BufRead as _, BufReader};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, ListParams, PostParams};
use llmbench_e2e::{ControlPlane, HarnessError, Tool, Tools, e2e_disabled};
use serde_json::json;

fn port_of(cp: &ControlPlane) -> u16 {
    cp.server_url()
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("the server URL ends in a port")
}

/// Wait until nothing listens on `port` and `dir` is gone.
fn assert_gone(port: u16, dir: &Path, after: &str) {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let listening = TcpStream::connect(("127.0.0.1", port)).is_ok();
        if !listening && !dir.exists() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{after}: apiserver still listening: {listening}; {} still exists: {}",
            dir.display(),
            dir.exists()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

async fn create<K>(api: &Api<K>, value: serde_json::Value) -> K
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + serde::Serialize,
{
    let object: K = serde_json::from_value(value).expect("a valid object");
    api.create(&PostParams::default(), &object)
        .await
        .expect("created")
}

#[tokio::test]
async fn a_service_account_token_gets_only_what_rbac_grants() {
    if e2e_disabled("a_service_account_token_gets_only_what_rbac_grants") {
        return;
    }
    let cp = ControlPlane::start().await.expect("control plane starts");
    let admin = cp.admin_client().await.expect("admin client");
    let ns = "rbac";
    create(
        &Api::<Namespace>::all(admin.clone()),
        json!({"metadata": {"name": ns}}),
    )
    .await;
    create(
        &Api::<ServiceAccount>::namespaced(admin.clone(), ns),
        json!({"metadata": {"name": "operator"}}),
    )
    .await;

    let token = cp
        .token_for_service_account(ns, "operator")
        .await
        .expect("a token");
    let operator = cp.client_for_token(&token).await.expect("token client");
    let configmaps: Api<ConfigMap> = Api::namespaced(operator, ns);
    match configmaps.list(&ListParams::default()).await {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 403, "{status:?}");
            assert!(
                status
                    .message
                    .contains("system:serviceaccount:rbac:operator"),
                "the apiserver knows who asked: {}",
                status.message
            );
        }
        other => panic!("without a RoleBinding the list must be forbidden, got {other:?}"),
    }

    create(
        &Api::<Role>::namespaced(admin.clone(), ns),
        json!({
            "metadata": {"name": "read-configmaps"},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}],
        }),
    )
    .await;
    create(
        &Api::<RoleBinding>::namespaced(admin.clone(), ns),
        json!({
            "metadata": {"name": "operator-reads-configmaps"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "read-configmaps"},
            "subjects": [{"kind": "ServiceAccount", "name": "operator", "namespace": ns}],
        }),
    )
    .await;
    // RBAC is read from an informer; give it a moment.
    let deadline = Instant::now() + Duration::from_secs(10);
    while let Err(e) = configmaps.list(&ListParams::default()).await {
        assert!(
            Instant::now() < deadline,
            "still forbidden after the RoleBinding: {e}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The same token in a kubeconfig, as a process under test would use it.
    let kubeconfig = cp
        .kubeconfig_for_token("operator", &token)
        .expect("kubeconfig");
    let kubectl = |args: &[&str]| {
        Command::new(cp.tools().path(Tool::Kubectl).expect("kubectl"))
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(args)
            .output()
            .expect("kubectl runs")
    };
    let allowed = kubectl(&["get", "configmaps", "-n", ns]);
    assert!(
        allowed.status.success(),
        "{}",
        String::from_utf8_lossy(&allowed.stderr)
    );
    let denied = kubectl(&["get", "secrets", "-n", ns]);
    assert!(!denied.status.success());
    assert!(
        String::from_utf8_lossy(&denied.stderr).contains("forbidden"),
        "{}",
        String::from_utf8_lossy(&denied.stderr)
    );

    let missing = cp.token_for_service_account(ns, "nobody").await;
    assert!(
        matches!(missing, Err(HarnessError::TokenRequest { .. })),
        "{missing:?}"
    );
}

#[tokio::test]
async fn dropping_the_control_plane_stops_the_servers_and_removes_its_directory() {
    if e2e_disabled("dropping_the_control_plane_stops_the_servers_and_removes_its_directory") {
        return;
    }
    let cp = ControlPlane::start().await.expect("control plane starts");
    let (port, dir) = (port_of(&cp), cp.dir().to_path_buf());
    assert!(dir.join("kube-apiserver.log").is_file());
    assert!(TcpStream::connect(("127.0.0.1", port)).is_ok());
    drop(cp);
    assert_gone(port, &dir, "after drop");
}

#[test]
fn a_panicking_test_leaves_no_servers_behind() {
    if e2e_disabled("a_panicking_test_leaves_no_servers_behind") {
        return;
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let panicked = std::thread::spawn(move || {
        let runtime = tokio::runtime::Runtime::new().expect("runtime");
        runtime.block_on(async {
            let cp = ControlPlane::start().await.expect("control plane starts");
            tx.send((port_of(&cp), cp.dir().to_path_buf()))
                .expect("send");
            panic!("a test fails while the control plane runs");
        })
    })
    .join();
    assert!(panicked.is_err(), "the thread panicked");
    let (port, dir) = rx.recv().expect("the control plane had started");
    assert_gone(port, &dir, "after a panic");
}

const CHILD_ENV: &str = "LLMBENCH_E2E_KILLED_CHILD";

/// Run in a child process by `killing_the_test_process_kills_the_servers`: start a control plane, say where it is,
/// and wait to be killed.
#[tokio::test]
#[ignore = "a helper: killing_the_test_process_kills_the_servers runs it in a child process"]
async fn child_that_gets_killed() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    let cp = ControlPlane::start().await.expect("control plane starts");
    println!("READY {} {}", port_of(&cp), cp.dir().display());
    tokio::time::sleep(Duration::from_secs(300)).await;
}

#[test]
fn killing_the_test_process_kills_the_servers() {
    if e2e_disabled("killing_the_test_process_kills_the_servers") {
        return;
    }
    let mut child = Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "child_that_gets_killed",
            "--ignored",
            "--nocapture",
        ])
        .env(CHILD_ENV, "1")
        .stdout(Stdio::piped())
        .spawn()
        .expect("child test runs");
    let stdout = child.stdout.take().expect("stdout");
    let ready = BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .find_map(|line| {
            let rest = line.strip_prefix("READY ")?;
            let (port, dir) = rest.split_once(' ')?;
            Some((port.parse::<u16>().ok()?, PathBuf::from(dir)))
        });
    let Some((port, dir)) = ready else {
        let _ = child.kill();
        panic!("the child never started its control plane");
    };
    assert!(TcpStream::connect(("127.0.0.1", port)).is_ok());
    // SIGKILL: no destructor runs; only the watchdogs can clean up.
    child.kill().expect("kill the child");
    child.wait().expect("reap the child");
    assert_gone(port, &dir, "after SIGKILL of the test process");
}

#[tokio::test]
async fn a_missing_tool_fails_with_the_build_hint() {
    let err = ControlPlane::start_with(Tools::Flat(PathBuf::from("/nonexistent/tools")))
        .await
        .expect_err("no tools there");
    let message = err.to_string();
    assert!(
        message.contains("bash tests/tools/build-tools.sh")
            && message.contains("/nonexistent/tools/etcd"),
        "{message}"
    );
}

#[tokio::test]
async fn an_apiserver_that_fails_to_start_reports_its_last_log_lines() {
    if e2e_disabled("an_apiserver_that_fails_to_start_reports_its_last_log_lines") {
        return;
    }
    // The real etcd beside a kube-apiserver that logs 40 lines and exits.
    let tools = tempfile::tempdir().expect("tempdir");
    let etcd = Tools::from_env()
        .and_then(|t| t.path(Tool::Etcd))
        .expect("etcd is built");
    std::os::unix::fs::symlink(etcd, tools.path().join("etcd")).expect("symlink etcd");
    let fake = tools.path().join("kube-apiserver");
    std::fs::write(
        &fake,
        "#!/bin/sh\nfor i in $(seq 1 40); do echo \"log line $i\"; done\necho 'E1122 fatal: broken on purpose' >&2\nexit 3\n",
    )
    .expect("write the fake apiserver");
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");

    let err = ControlPlane::start_with(Tools::Flat(tools.path().to_path_buf()))
        .await
        .expect_err("the apiserver exits");
    let message = err.to_string();
    assert!(
        matches!(
            err,
            HarnessError::Exited {
                tool: "kube-apiserver",
                ..
            }
        ),
        "{message}"
    );
    assert!(message.contains("exit status: 3"), "{message}");
    assert!(
        message.contains("E1122 fatal: broken on purpose"),
        "{message}"
    );
    assert!(
        message.contains("log line 12\n") && !message.contains("log line 11\n"),
        "exactly the last 30 lines: {message}"
    );
}
