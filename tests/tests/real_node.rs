//! The in-cluster path on a real node (tests/src/node.rs): the image `image/build.sh` made, imported into
//! containerd; the chart installed with `helm install`; the operator running as a pod under its ServiceAccount;
//! `llmbench sim` as a Deployment behind a Service; a BenchmarkRun on a claim that the controller-manager binds;
//! `llmbench results fetch` bringing the run's directory home through `pods/exec`; the chart's dashboard listing
//! the finished runs from the claim; and the garbage collector removing what the run owned once it is deleted.
//!
//! `make test` builds the image (`IMAGE_PROFILE=debug bash image/build.sh`) and the pause image
//! (`bash image/build.sh --pause`) first; `LLMBENCH_IMAGE_ARCHIVE` names another archive.

use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use futures_util::FutureExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::{Client, ResourceExt};
use llmbench_api::v1alpha1::{BenchmarkRun, Phase};
use llmbench_e2e::browser::{Killed, chromium, render};
use llmbench_e2e::cluster::{apply_crds, eventually};
use llmbench_e2e::node::{NodeNetwork, PAUSE_TAG, RealNode};
use llmbench_e2e::{ControlPlane, Tool, Tools, e2e_disabled, workspace_binary};
use serde_json::{Value, json};

const NAMESPACE: &str = "bench";
const OPERATOR_NAMESPACE: &str = "llmbench-system";
const IMAGE_REPOSITORY: &str = "ghcr.io/llmbench/llmbench";
const VERSION: &str = env!("CARGO_PKG_VERSION");
const MODEL: &str = "llmbench-sim";

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

fn image_archive() -> PathBuf {
    std::env::var_os("LLMBENCH_IMAGE_ARCHIVE")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(format!("target/image/llmbench-{VERSION}.oci.tar")))
}

fn pause_archive() -> PathBuf {
    let cache = std::env::var_os("LLMBENCH_TOOLS_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                .join(".cache/llmbench-tools")
        });
    cache.join(format!("pause-{PAUSE_TAG}/pause.oci.tar"))
}

/// `llmbench results <args> -n bench` as the user of `kubeconfig`.
fn results(
    llmbench: &Path,
    kubeconfig: &Path,
    args: &[&str],
) -> std::io::Result<std::process::Output> {
    Command::new(llmbench)
        .env("KUBECONFIG", kubeconfig)
        .arg("results")
        .args(args)
        .args(["-n", NAMESPACE])
        .output()
}

/// `llmbench results ARGS`, which must succeed: the fetched directory its last line names.
fn fetch(llmbench: &Path, kubeconfig: &Path, args: &[&str], what: &str) -> PathBuf {
    let stdout = check(results(llmbench, kubeconfig, args), what);
    PathBuf::from(stdout.lines().last().unwrap_or_default().trim())
}

/// The fetched run's `summary.json` tells the numbers of its status summary.
fn compare_fetched(
    fetched: &Path,
    status: &llmbench_api::v1alpha1::RunSummary,
) -> Result<(), String> {
    let path = fetched.join("summary.json");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    compare_with_status(
        &serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?,
        status,
    )
}

fn check(output: std::io::Result<std::process::Output>, what: &str) -> String {
    let output = output.unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        output.status.success(),
        "{what} failed ({}):\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

async fn create<K>(api: &Api<K>, value: Value)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let object: K = serde_json::from_value(value).expect("a valid manifest");
    api.create(&PostParams::default(), &object)
        .await
        .unwrap_or_else(|e| panic!("creating {}: {e}", object.name_any()));
}

/// The simulator from our own image, as a Deployment behind a ClusterIP Service on port 8000.
async fn deploy_sim(client: &Client) {
    let image = format!("{IMAGE_REPOSITORY}:{VERSION}");
    create(
        &Api::<Deployment>::namespaced(client.clone(), NAMESPACE),
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "sim"},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "sim"}},
                "template": {
                    "metadata": {"labels": {"app": "sim"}},
                    "spec": {
                        "containers": [{
                            "name": "sim",
                            "image": image,
                            "command": ["llmbench", "sim", "--host", "0.0.0.0", "--port", "8000",
                                        "--model", MODEL, "--ttft", "20ms", "--itl", "2ms"],
                            "ports": [{"name": "http", "containerPort": 8000}],
                            "readinessProbe": {"httpGet": {"path": "/health", "port": "http"}, "periodSeconds": 1},
                            "securityContext": {"runAsNonRoot": true, "allowPrivilegeEscalation": false},
                        }],
                    },
                },
            },
        }),
    )
    .await;
    let services = Api::<Service>::namespaced(client.clone(), NAMESPACE);
    create(
        &services,
        json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "sim"},
            "spec": {"selector": {"app": "sim"}, "ports": [{"name": "http", "port": 8000, "targetPort": "http"}]},
        }),
    )
    .await;
    let deployments = Api::<Deployment>::namespaced(client.clone(), NAMESPACE);
    eventually(
        "the sim Deployment available",
        Duration::from_secs(120),
        || {
            let deployments = deployments.clone();
            async move {
                let d = deployments.get("sim").await.ok()?;
                (d.status?.available_replicas? >= 1).then_some(())
            }
        },
    )
    .await;
    // A user's stack has been up for a while; here the run would start while kube-proxy is still programming the
    // Service. Wait for the ready endpoint it consumes, then for its sync (minSyncPeriod is 1 s).
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), NAMESPACE);
    eventually(
        "a ready endpoint of the sim Service",
        Duration::from_secs(60),
        || {
            let slices = slices.clone();
            async move {
                let list = slices
                    .list(&ListParams::default().labels("kubernetes.io/service-name=sim"))
                    .await
                    .ok()?;
                let ready = list
                    .items
                    .iter()
                    .flat_map(|s| &s.endpoints)
                    .any(|e| e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(false));
                ready.then_some(())
            }
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
}

fn helm_install(cp: &ControlPlane) {
    let helm = cp.tools().path(Tool::Helm).expect("helm");
    let chart = repo_root().join("charts/llmbench");
    check(
        Command::new(helm)
            .arg("--kubeconfig")
            .arg(cp.kubeconfig_path())
            .args(["install", "llmbench"])
            .arg(&chart)
            .args(["--namespace", OPERATOR_NAMESPACE, "--create-namespace"])
            .args([
                "--set",
                "logFormat=text",
                "--set",
                "leaderElection.enabled=true",
                // One CPU for every launcher, set once for the platform: the run below names no resources, so
                // it must inherit these, and the launcher must size itself from its container's cgroup quota,
                // not the node's CPUs.
                "--set-json",
                r#"launcher.defaults.resources={"limits":{"cpu":"1","memory":"1Gi"}}"#,
            ])
            .args(["--wait", "--timeout", "180s"])
            .output(),
        "helm install charts/llmbench",
    );
}

/// A run against the sim by Service name (`http://sim.bench.svc:8000`): cluster DNS, kube-proxy and the Service.
fn run_manifest() -> Value {
    json!({
        "apiVersion": "llmbench.dev/v1alpha1", "kind": "BenchmarkRun",
        "metadata": {"name": "incluster", "namespace": NAMESPACE},
        "spec": {
            "harness": "inference-perf",
            "workload": {"builtin": "sanity_random"},
            "stack": {"serviceRef": {"name": "sim", "port": 8000}, "model": MODEL, "tokenizer": "builtin"},
            "overrides": ["load.stages.0.rate=10", "load.stages.0.duration=3"],
            "timeout": "5m",
            // No launcher resources: the chart's launcher.defaults give one CPU (see helm_install).
        },
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_benchmark_run_succeeds_in_containers_on_a_real_node_and_its_results_come_home() {
    if e2e_disabled(
        "a_benchmark_run_succeeds_in_containers_on_a_real_node_and_its_results_come_home",
    ) {
        return;
    }
    let archive = image_archive();
    assert!(
        archive.exists(),
        "{} is missing: run `IMAGE_PROFILE=debug bash image/build.sh` (make test does)",
        archive.display()
    );
    let network = NodeNetwork::create().unwrap_or_else(|e| panic!("the node's network: {e}"));
    let cp = ControlPlane::start_for_node(Tools::from_env().expect("tools"), network.host_ip())
        .await
        .unwrap_or_else(|e| panic!("the control plane: {e}"));
    let node = RealNode::start(&cp, network, &pause_archive())
        .await
        .unwrap_or_else(|e| panic!("the node: {e}"));
    node.import_image(&archive, IMAGE_REPOSITORY)
        .unwrap_or_else(|e| panic!("importing {}: {e}", archive.display()));
    let admin = cp.admin_client().await.expect("admin client");
    // Any failure, an assertion's panic included, ends with what the cluster and the node's components said: CI
    // shows the end of a failing test's output, and the node is gone once the test returns.
    let outcome = AssertUnwindSafe(scenario(&cp, &admin)).catch_unwind().await;
    match outcome {
        Ok(Ok(())) => {}
        Ok(Err(message)) => panic!("{message}\n\n{}", node.diagnosis(&admin).await),
        Err(panic) => {
            eprintln!("\n{}", node.diagnosis(&admin).await);
            std::panic::resume_unwind(panic)
        }
    }
}

async fn scenario(cp: &ControlPlane, admin: &Client) -> Result<(), String> {
    // The CRDs come with the chart (charts/llmbench/crds); apply_crds only waits until they are established when
    // a test runs before helm. Here helm installs them, so only wait.
    helm_install(cp);
    apply_crds(admin).await;
    let namespaces = Api::<k8s_openapi::api::core::v1::Namespace>::all(admin.clone());
    create(
        &namespaces,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}),
    )
    .await;
    deploy_sim(admin).await;

    let runs: Api<BenchmarkRun> = Api::namespaced(admin.clone(), NAMESPACE);
    create(&runs, run_manifest()).await;
    let (run, seen) = finished(&runs, "incluster").await;
    let status = run.status.clone().unwrap_or_default();
    if status.phase != Some(Phase::Succeeded) {
        return Err(format!(
            "the run ended {:?}: {:#?}",
            status.phase, status.conditions
        ));
    }
    if !seen.contains(&Phase::Running) {
        return Err(format!("the run never showed Running: {seen:?}"));
    }
    let summary = status.summary.clone().ok_or("no summary in status")?;
    if summary.requests != 30 || summary.failures != 0 {
        return Err(format!(
            "expected 30 requests (10/s for 3 s), none failed: {summary:?}"
        ));
    }

    // The claim bound to one of the node's volumes, as on a real cluster.
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(admin.clone(), NAMESPACE);
    let claim = claims
        .list(&ListParams::default())
        .await
        .map_err(|e| format!("listing claims: {e}"))?
        .items
        .into_iter()
        .next()
        .ok_or("the run made no claim")?;
    let claim_phase = claim.status.and_then(|s| s.phase).unwrap_or_default();
    if claim_phase != "Bound" {
        return Err(format!(
            "claim {} is {claim_phase}",
            claim.metadata.name.unwrap_or_default()
        ));
    }

    // Fetch the whole directory with the user's kubeconfig, through a reader pod and `pods/exec`.
    let to = tempfile::tempdir().map_err(|e| e.to_string())?;
    let llmbench = workspace_binary("llmbench").map_err(|e| e.to_string())?;
    let admin_config = cp.kubeconfig_path();
    let to_dir = to.path().display().to_string();
    let fetched = fetch(
        &llmbench,
        admin_config,
        &["fetch", "incluster", "--to", &to_dir],
        "llmbench results fetch",
    );
    compare_fetched(&fetched, &summary)?;
    let run_json = fetched.join("run.json");
    let run_meta: Value =
        serde_json::from_str(&std::fs::read_to_string(&run_json).map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
    if run_meta.get("launcher_cpus") != Some(&json!(1)) {
        return Err(format!(
            "the launcher limited to 1 CPU by the chart's launcher.defaults sized itself for {:?} (defaults not \
             inherited, or the cgroup quota not read?)",
            run_meta.get("launcher_cpus")
        ));
    }
    // A second fetch is safe: it refuses to overwrite, or replaces with --force.
    let refetch = ["fetch", "incluster", "--force", "--to", &to_dir];
    check(
        results(&llmbench, admin_config, &refetch),
        "llmbench results fetch --force (again)",
    );

    let listed = check(
        results(&llmbench, admin_config, &["list"]),
        "llmbench results list",
    );
    let row = listed
        .lines()
        .find(|l| l.starts_with("incluster"))
        .unwrap_or_default();
    if !(row.contains("Succeeded") && row.contains("workload-pvc") && row.contains("30")) {
        return Err(format!(
            "results list does not show the run, its claim and its 30 requests:\n{listed}"
        ));
    }

    // The errors a user meets first, from the real apiserver: a run that does not exist, and a user who may read
    // runs and start pods but not exec into them.
    let missing = results(
        &llmbench,
        admin_config,
        &["fetch", "no-such-run", "--to", &to_dir],
    )
    .map_err(|e| e.to_string())?;
    let said = String::from_utf8_lossy(&missing.stderr);
    if missing.status.code() != Some(1)
        || !said.contains("no BenchmarkRun no-such-run in namespace bench")
    {
        return Err(format!(
            "fetching a missing run: {:?}\n{said}",
            missing.status
        ));
    }
    let reader = reader_without_exec(cp, admin).await?;
    let denied = results(&llmbench, &reader, &refetch).map_err(|e| e.to_string())?;
    let said = String::from_utf8_lossy(&denied.stderr);
    if denied.status.code() != Some(1) || !said.contains("create pods/exec") {
        return Err(format!(
            "fetching without pods/exec: {:?}\n{said}",
            denied.status
        ));
    }
    let readers: Api<Pod> = Api::namespaced(admin.clone(), NAMESPACE);
    eventually(
        "the denied fetch's reader pod to be deleted",
        Duration::from_secs(60),
        || {
            let readers = readers.clone();
            async move {
                let left = readers
                    .list(
                        &ListParams::default().labels("app.kubernetes.io/component=results-reader"),
                    )
                    .await
                    .ok()?;
                left.items.is_empty().then_some(())
            }
        },
    )
    .await;

    sharded_run(cp, &runs, &llmbench, to.path()).await?;
    standalone_runs(cp, admin, &runs, &llmbench, to.path()).await?;
    let expired = expired_and_ephemeral_runs(cp, admin, &runs, &llmbench, to.path()).await?;
    dashboard(cp, admin, &runs, &[expired]).await?;

    // Deleting the run: the garbage collector removes what it owned.
    let pods: Api<Pod> = Api::namespaced(admin.clone(), NAMESPACE);
    let selector = ListParams::default().labels("app.kubernetes.io/managed-by=llmbench-operator");
    let before = pods
        .list(&selector)
        .await
        .map_err(|e| e.to_string())?
        .items
        .len();
    if before == 0 {
        return Err(
            "the run's pods are not labelled app.kubernetes.io/managed-by=llmbench-operator"
                .to_owned(),
        );
    }
    // Everything a run made is controlled by it, so the garbage collector would remove it even without the
    // operator's finalizer...
    let run_uids: Vec<String> = runs
        .list(&ListParams::default())
        .await
        .map_err(|e| e.to_string())?
        .items
        .iter()
        .filter_map(|r| r.metadata.uid.clone())
        .collect();
    let mut owned: Vec<(
        String,
        Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference>,
    )> = pods
        .list(&selector)
        .await
        .map_err(|e| e.to_string())?
        .items
        .into_iter()
        .map(|p| {
            (
                format!("pod {}", p.name_any()),
                p.metadata.owner_references.unwrap_or_default(),
            )
        })
        .collect();
    let configmaps: Api<ConfigMap> = Api::namespaced(admin.clone(), NAMESPACE);
    for name in ["incluster-profile", "sharded-profile"] {
        let cm = configmaps
            .get(name)
            .await
            .map_err(|e| format!("ConfigMap {name}: {e}"))?;
        owned.push((
            format!("ConfigMap {name}"),
            cm.metadata.owner_references.unwrap_or_default(),
        ));
    }
    for (what, refs) in &owned {
        let controlled = refs.iter().any(|r| {
            r.kind == "BenchmarkRun" && r.controller == Some(true) && run_uids.contains(&r.uid)
        });
        if !controlled {
            return Err(format!(
                "{what} is not controlled by its BenchmarkRun: {refs:?}"
            ));
        }
    }
    // ...and the real one runs here: deleting the sim's Deployment takes its ReplicaSet and pod with it.
    Api::<Deployment>::namespaced(admin.clone(), NAMESPACE)
        .delete("sim", &DeleteParams::background())
        .await
        .map_err(|e| format!("deleting the sim Deployment: {e}"))?;
    eventually(
        "the garbage collector to remove the sim's pod",
        Duration::from_secs(120),
        || {
            let pods = pods.clone();
            async move {
                let left = pods
                    .list(&ListParams::default().labels("app=sim"))
                    .await
                    .ok()?;
                left.items.is_empty().then_some(())
            }
        },
    )
    .await;

    for name in [
        "incluster",
        "sharded",
        "standalone",
        "stack-dies",
        "ephemeral",
    ] {
        runs.delete(name, &DeleteParams::background())
            .await
            .map_err(|e| format!("deleting run {name}: {e}"))?;
    }
    eventually(
        "the runs' pods and ConfigMaps to go",
        Duration::from_secs(120),
        || {
            let (pods, configmaps, selector) = (pods.clone(), configmaps.clone(), selector.clone());
            async move {
                let left = pods.list(&selector).await.ok()?.items.len();
                let profiles = configmaps
                    .get_opt("incluster-profile")
                    .await
                    .ok()?
                    .is_some()
                    || configmaps.get_opt("sharded-profile").await.ok()?.is_some();
                (left == 0 && !profiles).then_some(())
            }
        },
    )
    .await;
    Ok(())
}

/// The chart's dashboard over the runs' claim, turned on by `helm upgrade` once the claim exists (its pod mounts it
/// read-only and starts only then). A pod in the namespace asks its Service (cluster DNS, kube-proxy) for
/// `/api/runs` and a run's report.html, as a user's port-forward would: the finished runs are listed with the
/// figures of their status. (The node's pod network is not routed from the host, so the test asks from inside.)
async fn dashboard(
    cp: &ControlPlane,
    admin: &Client,
    runs: &Api<BenchmarkRun>,
    gone: &[(String, u64)],
) -> Result<(), String> {
    let helm = cp.tools().path(Tool::Helm).map_err(|e| e.to_string())?;
    check(
        Command::new(helm)
            .arg("--kubeconfig")
            .arg(cp.kubeconfig_path())
            .args(["upgrade", "llmbench"])
            .arg(repo_root().join("charts/llmbench"))
            .args(["--namespace", OPERATOR_NAMESPACE, "--reuse-values"])
            .args(["--set", "dashboard.enabled=true"])
            .args(["--set", &format!("dashboard.namespace={NAMESPACE}")])
            .args(["--wait", "--timeout", "180s"])
            .output(),
        "helm upgrade charts/llmbench --set dashboard.enabled=true",
    );
    // Each unsharded run that succeeded, by its results directory (`<name>-<uid8>`), with its request count.
    let mut expected = Vec::new();
    for name in ["incluster", "standalone"] {
        let run = runs
            .get(name)
            .await
            .map_err(|e| format!("run {name}: {e}"))?;
        let status = run.status.unwrap_or_default();
        if status.phase != Some(Phase::Succeeded) {
            continue;
        }
        let uid = run.metadata.uid.unwrap_or_default();
        let requests = status.summary.map(|s| s.requests).unwrap_or_default();
        expected.push((format!("{name}-{}", &uid[..8.min(uid.len())]), requests));
    }
    // Runs deleted by their TTL: their directories stay on the claim, so the dashboard lists them still.
    expected.extend(gone.iter().cloned());
    let Some((first, _)) = expected.first().cloned() else {
        return Err("no run succeeded for the dashboard to list".to_owned());
    };

    const CUT: &str = "==== report ====";
    let script = format!(
        "until runs=$(wget -qO- http://llmbench-dashboard:8089/api/runs); do sleep 1; done; echo \"$runs\"; \
         echo '{CUT}'; wget -qO- http://llmbench-dashboard:8089/files/{first}/report.html | head -c 4096"
    );
    let pods: Api<Pod> = Api::namespaced(admin.clone(), NAMESPACE);
    create(
        &pods,
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "dashboard-probe"},
            "spec": {
                "restartPolicy": "Never",
                "activeDeadlineSeconds": 180,
                "automountServiceAccountToken": false,
                "containers": [{
                    "name": "probe",
                    "image": format!("{IMAGE_REPOSITORY}:{VERSION}"),
                    "imagePullPolicy": "Never",
                    "command": ["sh", "-c", script],
                }],
            },
        }),
    )
    .await;
    let phase = eventually(
        "the dashboard probe pod to finish",
        Duration::from_secs(240),
        || {
            let pods = pods.clone();
            async move {
                let phase = pods.get("dashboard-probe").await.ok()?.status?.phase?;
                matches!(phase.as_str(), "Succeeded" | "Failed").then_some(phase)
            }
        },
    )
    .await;
    let log = pods
        .logs("dashboard-probe", &kube::api::LogParams::default())
        .await
        .map_err(|e| format!("the dashboard probe's log: {e}"))?;
    let _ = pods
        .delete("dashboard-probe", &DeleteParams::background())
        .await;
    let (listing, report) = log
        .split_once(CUT)
        .ok_or_else(|| format!("the dashboard probe ({phase}) said:\n{log}"))?;
    let listing: Value = serde_json::from_str(listing.trim())
        .map_err(|e| format!("/api/runs is not JSON ({e}):\n{listing}"))?;
    let rows = listing["runs"].as_array().cloned().unwrap_or_default();
    for (id, requests) in &expected {
        let listed = rows.iter().any(|r| {
            r["id"] == id.as_str()
                && r["state"] == "complete"
                && r["figures"]["requests"] == *requests
        });
        if !listed {
            return Err(format!(
                "the dashboard does not list {id} complete with its {requests} requests: {listing}"
            ));
        }
    }
    if !report.contains(&format!("llmbench run {first}")) {
        return Err(format!(
            "the dashboard served no report.html for {first}:\n{report}"
        ));
    }
    let ids: Vec<String> = expected.into_iter().map(|(id, _)| id).collect();
    let kubectl = cp.tools().path(Tool::Kubectl).map_err(|e| e.to_string())?;
    let kubeconfig = cp.kubeconfig_path().to_owned();
    tokio::task::spawn_blocking(move || dashboard_in_browser(&kubectl, &kubeconfig, &ids))
        .await
        .map_err(|e| format!("the browser check panicked: {e}"))?
}

/// The in-cluster dashboard in a real browser, reached as a user reaches it: `kubectl port-forward` to its Service
/// (the apiserver, the kubelet and containerd carry the stream). The list shows every run, and the compare page the
/// first two side by side. Screenshots are left in `target/real-node-dashboard/` to look at.
fn dashboard_in_browser(kubectl: &Path, kubeconfig: &Path, ids: &[String]) -> Result<(), String> {
    use std::io::BufRead as _;
    let Some(chromium) = chromium() else {
        return Ok(());
    };
    let mut forward = Command::new(kubectl)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args([
            "port-forward",
            "-n",
            NAMESPACE,
            "svc/llmbench-dashboard",
            ":8089",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| format!("kubectl port-forward: {e}"))?;
    let stdout = forward.stdout.take();
    let forward = Killed(forward);
    // "Forwarding from 127.0.0.1:43567 -> 8089"
    let (said, heard) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let Some(stdout) = stdout else { return };
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            let _ = said.send(line);
        }
    });
    let line = heard
        .recv_timeout(Duration::from_secs(60))
        .map_err(|_| "kubectl port-forward said nothing in 60 s".to_owned())?;
    let port: u16 = line
        .split("127.0.0.1:")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|port| port.parse().ok())
        .ok_or_else(|| format!("kubectl port-forward said: {line}"))?;
    let [a, b, ..] = ids else {
        return Err(format!("two runs are needed to compare: {ids:?}"));
    };
    // Drawn once here (`llmbench plot`'s comparison in the dashboard's pod), so the browser finds it ready.
    let drawn = llmbench_e2e::cluster::http_get(port, &format!("/api/compare?runs={a},{b}"))
        .unwrap_or_default();
    if !drawn.starts_with("HTTP/1.1 200") {
        return Err(format!("/api/compare through the port-forward:\n{drawn}"));
    }
    let shots = repo_root().join("target/real-node-dashboard");
    std::fs::create_dir_all(&shots).map_err(|e| e.to_string())?;
    let profile = tempfile::tempdir().map_err(|e| e.to_string())?;
    let base = format!("http://127.0.0.1:{port}/");
    let list = render(&chromium, profile.path(), &base, &shots.join("list.png"));
    for id in ids {
        if !list.contains(&format!("data-run-id=\"{id}\"")) {
            return Err(format!(
                "the dashboard's list in the browser has no row {id}:\n{list}"
            ));
        }
    }
    let compare = render(
        &chromium,
        profile.path(),
        &format!("{base}#/compare/{a},{b}"),
        &shots.join("compare.png"),
    );
    let table = compare
        .find("id=\"compare-table\"")
        .map(|at| &compare[at..])
        .ok_or_else(|| format!("no comparison table in the browser:\n{compare}"))?;
    let table = &table[..table.find("</table>").unwrap_or(table.len())];
    if !(table.contains(a.as_str()) && table.contains(b.as_str())) {
        return Err(format!(
            "the comparison does not show {a} and {b}:\n{table}"
        ));
    }
    drop(forward);
    eprintln!(
        "the real node's dashboard in Chromium: screenshots in {}",
        shots.display()
    );
    Ok(())
}

/// Issue 31 on the real node: (a) a run with `ttlSecondsAfterFinished` is deleted once it finished, its pods with
/// it, and its results are fetched from the claim without it (`results fetch --claim`); (b) a run on an emptyDir
/// keeps its results past its pod (the launcher writes them into its log, the operator reads the log through the
/// real kubelet into ConfigMaps) and `results fetch` brings them home. Returns the expired run's results
/// directory and request count, for the dashboard to list.
async fn expired_and_ephemeral_runs(
    cp: &ControlPlane,
    admin: &Client,
    runs: &Api<BenchmarkRun>,
    llmbench: &Path,
    to: &Path,
) -> Result<(String, u64), String> {
    let mut expires = run_manifest();
    expires["metadata"]["name"] = json!("expires");
    expires["spec"]["ttlSecondsAfterFinished"] = json!(5);
    create(runs, expires).await;
    let mut ephemeral = run_manifest();
    ephemeral["metadata"]["name"] = json!("ephemeral");
    ephemeral["spec"]["storage"] = json!({"emptyDir": {}});
    create(runs, ephemeral).await;

    let (run, _) = finished(runs, "expires").await;
    let status = run.status.clone().unwrap_or_default();
    let summary = status
        .summary
        .clone()
        .ok_or("the expiring run has no summary")?;
    if status.phase != Some(Phase::Succeeded) || summary.requests != 30 {
        return Err(format!(
            "the expiring run ended {:?} with {summary:?}: {:#?}",
            status.phase, status.conditions
        ));
    }
    let uid = run.metadata.uid.clone().unwrap_or_default();
    let dir = format!("expires-{}", &uid[..8.min(uid.len())]);
    let expired_requests = summary.requests;
    let pods: Api<Pod> = Api::namespaced(admin.clone(), NAMESPACE);
    let own_pods = format!("llmbench.dev/run-uid={uid}");
    eventually(
        "the expiring run and its pods to be deleted by its TTL",
        Duration::from_secs(120),
        || {
            let (runs, pods, own_pods) = (runs.clone(), pods.clone(), own_pods.clone());
            async move {
                let gone = runs.get_opt("expires").await.ok()?.is_none();
                let left = pods
                    .list(&ListParams::default().labels(&own_pods))
                    .await
                    .ok()?;
                (gone && left.items.is_empty()).then_some(())
            }
        },
    )
    .await;
    let to_dir = to.display().to_string();
    let fetched = fetch(
        llmbench,
        cp.kubeconfig_path(),
        &[
            "fetch",
            "expires",
            "--claim",
            "workload-pvc",
            "--to",
            &to_dir,
        ],
        "llmbench results fetch expires --claim workload-pvc (the run deleted by its TTL)",
    );
    compare_fetched(&fetched, &summary)?;
    eprintln!("expires on the real node: deleted by its TTL, {dir} fetched from its claim");

    let (run, _) = finished(runs, "ephemeral").await;
    let status = run.status.clone().unwrap_or_default();
    let summary = status
        .summary
        .clone()
        .ok_or("the emptyDir run has no summary")?;
    if status.phase != Some(Phase::Succeeded) {
        return Err(format!(
            "the emptyDir run ended {:?}: {:#?}",
            status.phase, status.conditions
        ));
    }
    // The operator keeps the archive once the launcher ended, a pass after the run finished.
    let kept = eventually(
        "the emptyDir run's results to be kept in ConfigMaps",
        Duration::from_secs(60),
        || {
            let runs = runs.clone();
            async move { runs.get("ephemeral").await.ok()?.status?.results_kept }
        },
    )
    .await;
    let fetched = fetch(
        llmbench,
        cp.kubeconfig_path(),
        &["fetch", "ephemeral", "--to", &to_dir],
        "llmbench results fetch ephemeral (an emptyDir run)",
    );
    compare_fetched(&fetched, &summary)?;
    if !fetched.join("requests.bin").is_file() {
        return Err(format!(
            "the emptyDir run's kept results have no requests.bin: {}",
            fetched.display()
        ));
    }
    eprintln!(
        "ephemeral on the real node: {} bytes kept in {:?}, fetched whole",
        kept.bytes, kept.config_maps
    );
    Ok((dir, expired_requests))
}

/// A kubeconfig for ServiceAccount `reader`, which may read runs and claims and manage pods in the namespace but
/// not `create pods/exec`.
async fn reader_without_exec(cp: &ControlPlane, admin: &Client) -> Result<PathBuf, String> {
    use k8s_openapi::api::core::v1::ServiceAccount;
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
    create(
        &Api::<ServiceAccount>::namespaced(admin.clone(), NAMESPACE),
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "reader"}}),
    )
    .await;
    create(
        &Api::<Role>::namespaced(admin.clone(), NAMESPACE),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "reader"},
            "rules": [
                {"apiGroups": ["llmbench.dev"], "resources": ["benchmarkruns"], "verbs": ["get", "list"]},
                {"apiGroups": [""], "resources": ["persistentvolumeclaims"], "verbs": ["get"]},
                {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "create", "delete", "watch"]},
            ],
        }),
    )
    .await;
    create(
        &Api::<RoleBinding>::namespaced(admin.clone(), NAMESPACE),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "reader"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": NAMESPACE}],
        }),
    )
    .await;
    let token = cp
        .token_for_service_account(NAMESPACE, "reader")
        .await
        .map_err(|e| e.to_string())?;
    cp.kubeconfig_for_token("reader", &token)
        .map_err(|e| e.to_string())
}

/// Waits until run `name` is Succeeded or Failed; returns it and the phases it was seen in.
async fn finished(runs: &Api<BenchmarkRun>, name: &str) -> (BenchmarkRun, Vec<Phase>) {
    let seen = std::sync::Mutex::new(Vec::new());
    let run = eventually(
        &format!("BenchmarkRun {name} to finish"),
        Duration::from_secs(300),
        || {
            let runs = runs.clone();
            let seen = &seen;
            async move {
                let run = runs.get(name).await.ok()?;
                let phase = run.status.as_ref().and_then(|s| s.phase);
                if let Some(p) = phase
                    && let Ok(mut seen) = seen.lock()
                    && seen.last() != Some(&p)
                {
                    seen.push(p);
                }
                matches!(phase, Some(Phase::Succeeded | Phase::Failed)).then_some(run)
            }
        },
    )
    .await;
    (run, seen.into_inner().unwrap_or_default())
}

/// The same workload spread over two launchers on the default ReadWriteOnce claim: the real scheduler must honour
/// the shards' required pod affinity (one node), the operator releases them at one instant over their pod IPs, and
/// the merge pod writes the exact summary.
fn sharded_manifest() -> Value {
    let mut run = run_manifest();
    run["metadata"]["name"] = json!("sharded");
    run["spec"]["launcher"] = json!({
        "parallelism": 2,
        "resources": {
            "requests": {"cpu": "250m", "memory": "256Mi"},
            "limits": {"cpu": "1", "memory": "1Gi"},
        },
    });
    run
}

async fn sharded_run(
    cp: &ControlPlane,
    runs: &Api<BenchmarkRun>,
    llmbench: &Path,
    to: &Path,
) -> Result<(), String> {
    create(runs, sharded_manifest()).await;
    let (run, _) = finished(runs, "sharded").await;
    let status = run.status.unwrap_or_default();
    if status.phase != Some(Phase::Succeeded) {
        return Err(format!(
            "the sharded run ended {:?}: {:#?}",
            status.phase, status.conditions
        ));
    }
    let confirmed = status.release.as_ref().map(|r| r.confirmed);
    if confirmed != Some(2) || status.shards.len() != 2 {
        return Err(format!(
            "the sharded run's release confirmed {confirmed:?} shards, status has {} shard summaries",
            status.shards.len()
        ));
    }
    let summary = status.summary.ok_or("the sharded run has no summary")?;
    eprintln!(
        "sharded run on the real node: start skew {:?} ms",
        summary.start_skew_ms
    );
    if summary.requests != 30 {
        return Err(format!(
            "two launchers together must send what one sends (30): {summary:?}"
        ));
    }
    let to_dir = to.display().to_string();
    let fetched = fetch(
        llmbench,
        cp.kubeconfig_path(),
        &["fetch", "sharded", "--to", &to_dir],
        "llmbench results fetch sharded",
    );
    for shard in ["shard-0", "shard-1"] {
        if !fetched.join(shard).join("requests.bin").is_file() {
            return Err(format!("{} has no {shard}/requests.bin", fetched.display()));
        }
    }
    compare_fetched(&fetched, &summary)
}

/// A run with a standalone stack: our image's `llmbench sim`, `args` under the image's entrypoint.
fn standalone_manifest(name: &str, duration_s: u32) -> Value {
    let mut run = run_manifest();
    run["metadata"]["name"] = json!(name);
    run["spec"]["stack"] = json!({
        "model": MODEL,
        "tokenizer": "builtin",
        "standalone": {
            "image": format!("{IMAGE_REPOSITORY}:{VERSION}"),
            "command": ["llmbench"],
            "args": ["sim", "--host", "0.0.0.0", "--port", "8000", "--model", MODEL, "--ttft", "20ms",
                     "--itl", "2ms"],
            "readiness": {"timeout": "2m"},
        },
        // The simulator answers vLLM's profiler endpoints.
        "profiling": {"vllm": true},
    });
    run["spec"]["overrides"] = json!([
        "load.stages.0.rate=10",
        format!("load.stages.0.duration={duration_s}")
    ]);
    run
}

/// Issue 18 on the real node: (a) a standalone stack comes up (StackReady), is benchmarked through its Service and
/// is torn down; (b) a stack whose pod is deleted mid-run fails the run with StackFailed, naming what happened,
/// and the records measured until then are kept on the claim.
async fn standalone_runs(
    cp: &ControlPlane,
    admin: &Client,
    runs: &Api<BenchmarkRun>,
    llmbench: &Path,
    to: &Path,
) -> Result<(), String> {
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), NAMESPACE);
    let services: Api<Service> = Api::namespaced(admin.clone(), NAMESPACE);
    create(runs, standalone_manifest("standalone", 3)).await;
    let (run, seen) = finished(runs, "standalone").await;
    let status = run.status.clone().unwrap_or_default();
    if status.phase != Some(Phase::Succeeded) {
        return Err(format!(
            "the standalone run ended {:?} (seen {seen:?}): {:#?}",
            status.phase, status.conditions
        ));
    }
    let ready = status.conditions.iter().find(|c| c.type_ == "StackReady");
    if ready.map(|c| c.status.as_str()) != Some("True") {
        return Err(format!("the stack never was StackReady: {ready:?}"));
    }
    let stack = status.stack.clone().ok_or("no status.stack")?;
    if stack.url != "http://standalone-stack.bench.svc:8000" || !stack.deleted {
        return Err(format!("status.stack: {stack:?}"));
    }
    let summary = status
        .summary
        .clone()
        .ok_or("the standalone run has no summary")?;
    if summary.requests != 30 || summary.failures != 0 {
        return Err(format!(
            "expected 30 requests (10/s for 3 s) to the standalone stack, none failed: {summary:?}"
        ));
    }
    // The launcher recorded the stack it was told about (--stack-info) and what it probed.
    let engine = summary
        .engine
        .clone()
        .ok_or("status.summary.engine is missing")?;
    // The image and command line come from the stack-info record the operator wrote.
    if engine.image.as_deref() != Some(&format!("{IMAGE_REPOSITORY}:{VERSION}")[..])
        || engine.command.first().map(String::as_str) != Some("llmbench")
    {
        return Err(format!("status.summary.engine: {engine:?}"));
    }
    eprintln!("standalone on the real node: status.summary.engine {engine:?}");
    // run.json has the stack the launcher was told about and the profiling window's two calls, both answered.
    let to_dir = to.display().to_string();
    let fetched = fetch(
        llmbench,
        cp.kubeconfig_path(),
        &["fetch", "standalone", "--to", &to_dir],
        "llmbench results fetch standalone",
    );
    let run_json = fetched.join("run.json");
    let meta: Value = serde_json::from_str(
        &std::fs::read_to_string(&run_json).map_err(|e| format!("{}: {e}", run_json.display()))?,
    )
    .map_err(|e| e.to_string())?;
    for (hook, path) in [("start", "/start_profile"), ("stop", "/stop_profile")] {
        let call = &meta["profiling"][hook];
        if call["status"] != json!(200)
            || call["url"] != json!(format!("http://standalone-stack.bench.svc:8000{path}"))
        {
            return Err(format!("run.json profiling.{hook}: {call}"));
        }
    }
    if meta["stack"]["image"] != json!(format!("{IMAGE_REPOSITORY}:{VERSION}")) {
        return Err(format!("run.json stack: {}", meta["stack"]));
    }
    eventually(
        "the standalone stack's Deployment and Service to go after the run",
        Duration::from_secs(60),
        || {
            let (deployments, services) = (deployments.clone(), services.clone());
            async move {
                let left = deployments
                    .get_opt("standalone-stack")
                    .await
                    .ok()?
                    .is_some()
                    || services.get_opt("standalone-stack").await.ok()?.is_some();
                (!left).then_some(())
            }
        },
    )
    .await;

    // (b): a long run whose stack pod is deleted once load flows.
    create(runs, standalone_manifest("stack-dies", 60)).await;
    let stack_pod = eventually(
        "the stack-dies run to run against its stack",
        Duration::from_secs(180),
        || {
            let runs = runs.clone();
            async move {
                let run = runs.get("stack-dies").await.ok()?;
                let status = run.status?;
                (status.phase == Some(Phase::Running)).then_some(())?;
                status.stack?.pod
            }
        },
    )
    .await;
    // Let the launcher send for a few seconds first.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let pods: Api<Pod> = Api::namespaced(admin.clone(), NAMESPACE);
    pods.delete(&stack_pod, &DeleteParams::default())
        .await
        .map_err(|e| format!("deleting the stack pod {stack_pod}: {e}"))?;
    let (run, _) = finished(runs, "stack-dies").await;
    let status = run.status.clone().unwrap_or_default();
    let failed = status.conditions.iter().find(|c| c.type_ == "Failed");
    let reason_ok = failed.is_some_and(|c| {
        c.reason == "StackFailed" && c.message.contains(&format!("stack pod {stack_pod}"))
    });
    if status.phase != Some(Phase::Failed) || !reason_ok {
        return Err(format!(
            "the run whose stack died ended {:?}: {:#?}",
            status.phase, status.conditions
        ));
    }
    eprintln!(
        "stack-dies on the real node: {}",
        failed.map(|c| c.message.as_str()).unwrap_or_default()
    );
    // What the launcher measured until it was stopped is on the claim.
    let to_dir = to.display().to_string();
    let fetched = fetch(
        llmbench,
        cp.kubeconfig_path(),
        &["fetch", "stack-dies", "--to", &to_dir],
        "llmbench results fetch stack-dies",
    );
    let (records, _) = llmbench_model::record_file::RunRecords::in_dir(&fetched)
        .read_all()
        .map_err(|e| format!("{}: {e}", fetched.display()))?;
    let kept = records.len();
    // A record without an error is a request that succeeded.
    let succeeded = records.iter().filter(|r| r.error.is_none()).count();
    eprintln!("stack-dies on the real node: {kept} records kept, {succeeded} successful");
    // 10/s for the 6 s before the stack went, less the launcher's own start: at least 2 s of it.
    if succeeded < 20 {
        return Err(format!(
            "the run whose stack died kept {kept} records ({succeeded} successful), expected at least 20 \
             successful"
        ));
    }
    eventually(
        "the dead stack's Deployment and Service to go",
        Duration::from_secs(60),
        || {
            let (deployments, services) = (deployments.clone(), services.clone());
            async move {
                let left = deployments
                    .get_opt("stack-dies-stack")
                    .await
                    .ok()?
                    .is_some()
                    || services.get_opt("stack-dies-stack").await.ok()?.is_some();
                (!left).then_some(())
            }
        },
    )
    .await;
    // The stacks' pods go with their Deployments (the garbage collector, through their ReplicaSets).
    eventually("the stacks' pods to go", Duration::from_secs(120), || {
        let pods = pods.clone();
        async move {
            let left = pods
                .list(&ListParams::default().labels("app.kubernetes.io/component=stack"))
                .await
                .ok()?;
            left.items.is_empty().then_some(())
        }
    })
    .await;
    Ok(())
}

/// The fetched `summary.json` and the status summary the operator copied must tell the same numbers.
fn compare_with_status(
    local: &Value,
    status: &llmbench_api::v1alpha1::RunSummary,
) -> Result<(), String> {
    let number = |pointer: &str| local.pointer(pointer).and_then(Value::as_f64);
    let mut differences = Vec::new();
    let mut expect = |what: &str, fetched: Option<f64>, in_status: f64| {
        if fetched != Some(in_status) {
            differences.push(format!("{what}: fetched {fetched:?}, status {in_status}"));
        }
    };
    expect(
        "requests",
        number("/requests/total"),
        status.requests as f64,
    );
    expect(
        "failures",
        number("/requests/failed"),
        status.failures as f64,
    );
    expect(
        "requests/s",
        number("/throughput/requests_per_s"),
        status.throughput.requests_per_second,
    );
    for (name, stats) in [
        ("ttft", &status.latency_ms.ttft),
        ("e2e", &status.latency_ms.e2e),
    ] {
        let stats = stats.as_ref();
        for (q, value) in [
            ("p50", stats.map(|s| s.p50)),
            ("p90", stats.map(|s| s.p90)),
            ("p99", stats.map(|s| s.p99)),
        ] {
            expect(
                &format!("{name} {q}"),
                number(&format!("/latency_ms/{name}/{q}")),
                value.unwrap_or(f64::NAN),
            );
        }
    }
    if differences.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "the fetched summary.json and status.summary differ:\n{}\n{local:#}",
            differences.join("\n")
        ))
    }
}
