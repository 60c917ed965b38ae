//! `fetch` and `list` end to end against a fake API server: REST answered by hand over HTTP/1.1, and the exec
//! subresource over a real WebSocket (`v4.channel.k8s.io`) that runs the command on this machine with `/requests`
//! mapped to a temporary directory, so `du` and `tar` are real. It pins the shell's sequence (run, claim, pods,
//! create, wait, du, tar, delete), its errors and its cleanup without a kubelet; the real cluster's end-to-end
//! test covers the rest.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{SinkExt as _, StreamExt as _};
use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStatus, PersistentVolumeClaim,
    PersistentVolumeClaimSpec, Pod, PodStatus,
};
use llmbench_api::v1alpha1::{BenchmarkRun, BenchmarkRunSpec, BenchmarkRunStatus, Phase};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::Role;

use super::{FetchArgs, KubeArgs, ListArgs, ResultsError, cluster};

const NAMESPACE: &str = "bench";
const UID: &str = "0f3c9a2e-5b7d-4c1e-9a8b-1234567890ab";
const RUN_DIR: &str = "bench-1-0f3c9a2e";

/// What the fake cluster holds, and what was done to it.
#[derive(Default)]
struct State {
    runs: Vec<BenchmarkRun>,
    claims: Vec<String>,
    /// The claim's contents: what `/requests` is in the reader pod.
    volume: PathBuf,
    forbid_exec: bool,
    created: Vec<Pod>,
    deleted: Vec<String>,
    execs: Vec<Vec<String>>,
    /// GETs of the reader pod answered Pending before it runs.
    pending_gets: u32,
    /// ConfigMaps by name: an emptyDir run's kept results, each one part.
    config_maps: BTreeMap<String, Vec<u8>>,
}

type Shared = Arc<Mutex<State>>;

fn lock(state: &Shared) -> std::sync::MutexGuard<'_, State> {
    state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn run(phase: Phase) -> BenchmarkRun {
    let spec: BenchmarkRunSpec = serde_saphyr::from_str(
        "harness: inference-perf\nworkload:\n  builtin: sanity_random\nstack:\n  endpoint: http://vllm:8000\n  model: m\n",
    )
    .expect("spec");
    let mut run = BenchmarkRun::new("bench-1", spec);
    run.metadata.namespace = Some(NAMESPACE.to_owned());
    run.metadata.uid = Some(UID.to_owned());
    run.status = Some(BenchmarkRunStatus {
        phase: Some(phase),
        results_path: Some(format!("workload-pvc:/requests/{RUN_DIR}")),
        ..BenchmarkRunStatus::default()
    });
    run
}

struct Fake {
    state: Shared,
    kubeconfig: PathBuf,
    _dir: tempfile::TempDir,
    to: PathBuf,
}

impl Fake {
    async fn start(runs: Vec<BenchmarkRun>) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let volume = dir.path().join("volume");
        let results = volume.join(RUN_DIR);
        std::fs::create_dir_all(results.join("shard-0")).expect("volume");
        std::fs::write(results.join("run.json"), "{\"run\":1}").expect("write");
        std::fs::write(results.join("shard-0/requests.jsonl"), "a\nb\n").expect("write");
        let old = filetime::FileTime::from_unix_time(1_600_000_000, 0);
        filetime::set_file_mtime(results.join("run.json"), old).expect("mtime");
        let state = Arc::new(Mutex::new(State {
            runs,
            claims: vec!["workload-pvc".to_owned()],
            volume,
            pending_gets: 2,
            ..State::default()
        }));
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("address");
        let served = Arc::clone(&state);
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, Arc::clone(&served)));
            }
        });
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: http://{address}\n\
                 contexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake\n    namespace: {NAMESPACE}\n\
                 current-context: fake\nusers:\n- name: fake\n  user: {{}}\n"
            ),
        )
        .expect("kubeconfig");
        let to = dir.path().join("out");
        Self {
            state,
            kubeconfig,
            _dir: dir,
            to,
        }
    }

    fn fetch_args(&self) -> FetchArgs {
        FetchArgs {
            run: "bench-1".to_owned(),
            namespace: None,
            to: self.to.clone(),
            force: false,
            allow_partial: false,
            claim: None,
            dir: None,
            image: None,
            pod_timeout: Duration::from_secs(20),
            deadline: Duration::from_secs(600),
            kube: KubeArgs {
                context: None,
                kubeconfig: Some(self.kubeconfig.clone()),
            },
        }
    }
}

/// Serves HTTP/1.1 requests on one connection until it closes or is upgraded to a WebSocket.
async fn serve(mut stream: TcpStream, state: Shared) {
    let mut buffer = Vec::new();
    loop {
        let (head_len, method, target, headers) = loop {
            let mut parsed_headers = [httparse::EMPTY_HEADER; 64];
            let mut request = httparse::Request::new(&mut parsed_headers);
            if let Ok(httparse::Status::Complete(len)) = request.parse(&buffer) {
                let headers: BTreeMap<String, String> = request
                    .headers
                    .iter()
                    .map(|h| {
                        (
                            h.name.to_ascii_lowercase(),
                            String::from_utf8_lossy(h.value).into_owned(),
                        )
                    })
                    .collect();
                break (
                    len,
                    request.method.unwrap_or("GET").to_owned(),
                    request.path.unwrap_or("/").to_owned(),
                    headers,
                );
            }
            let mut chunk = [0u8; 8192];
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buffer.extend_from_slice(&chunk[..n]),
            }
        };
        let body_len: usize = headers
            .get("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        while buffer.len() < head_len + body_len {
            let mut chunk = [0u8; 8192];
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buffer.extend_from_slice(&chunk[..n]),
            }
        }
        let body = buffer[head_len..head_len + body_len].to_vec();
        buffer.drain(..head_len + body_len);

        if headers
            .get("upgrade")
            .is_some_and(|u| u.eq_ignore_ascii_case("websocket"))
        {
            exec(stream, &target, &headers, &state).await;
            return;
        }
        let (code, json) = route(&method, &target, &body, &state);
        let body = json.to_string();
        let response = format!(
            "HTTP/1.1 {code} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        if stream.write_all(response.as_bytes()).await.is_err() {
            return;
        }
    }
}

fn not_found(what: &str, name: &str) -> (u16, serde_json::Value) {
    (
        404,
        serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": format!("{what} \"{name}\" not found"), "reason": "NotFound",
            "details": {"name": name, "kind": what}, "code": 404
        }),
    )
}

fn list(kind: &str, items: Vec<serde_json::Value>) -> (u16, serde_json::Value) {
    (
        200,
        serde_json::json!({"apiVersion": "v1", "kind": kind, "metadata": {"resourceVersion": "1"}, "items": items}),
    )
}

fn route(method: &str, target: &str, body: &[u8], state: &Shared) -> (u16, serde_json::Value) {
    let path = target.split('?').next().unwrap_or_default();
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let mut state = lock(state);
    match (method, segments.as_slice()) {
        (
            "GET",
            [
                "apis",
                "llmbench.dev",
                "v1alpha1",
                "namespaces",
                _,
                "benchmarkruns",
            ],
        ) => list("BenchmarkRunList", state.runs.iter().map(to_json).collect()),
        (
            "GET",
            [
                "apis",
                "llmbench.dev",
                "v1alpha1",
                "namespaces",
                _,
                "benchmarkruns",
                name,
            ],
        ) => {
            match state
                .runs
                .iter()
                .find(|r| r.metadata.name.as_deref() == Some(name))
            {
                Some(run) => (200, to_json(run)),
                None => not_found("benchmarkruns.llmbench.dev", name),
            }
        }
        ("GET", ["api", "v1", "namespaces", _, "persistentvolumeclaims", name]) => {
            if state.claims.iter().any(|c| c == name) {
                let claim = PersistentVolumeClaim {
                    metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                        name: Some((*name).to_owned()),
                        ..Default::default()
                    },
                    spec: Some(PersistentVolumeClaimSpec {
                        access_modes: Some(vec!["ReadWriteOnce".to_owned()]),
                        ..PersistentVolumeClaimSpec::default()
                    }),
                    ..PersistentVolumeClaim::default()
                };
                (200, to_json(&claim))
            } else {
                not_found("persistentvolumeclaims", name)
            }
        }
        ("GET", ["api", "v1", "namespaces", _, "configmaps", name]) => {
            match state.config_maps.get(*name) {
                Some(part) => (
                    200,
                    serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
                    "binaryData": {llmbench_api::results_log::PART_KEY: to_json(&k8s_openapi::ByteString(part.clone()))}}),
                ),
                None => not_found("configmaps", name),
            }
        }
        ("GET", ["api", "v1", "namespaces", _, "pods"]) => list("PodList", Vec::new()),
        ("POST", ["api", "v1", "namespaces", _, "pods"]) => {
            let mut pod: Pod = serde_json::from_slice(body).expect("a pod");
            let name = format!(
                "{}x7k2p",
                pod.metadata.generate_name.clone().unwrap_or_default()
            );
            pod.metadata.name = Some(name);
            state.created.push(pod.clone());
            (201, to_json(&pod))
        }
        ("GET", ["api", "v1", "namespaces", _, "pods", name]) => {
            let Some(mut pod) = state
                .created
                .iter()
                .find(|p| p.metadata.name.as_deref() == Some(name))
                .cloned()
            else {
                return not_found("pods", name);
            };
            let running = state.pending_gets == 0;
            state.pending_gets = state.pending_gets.saturating_sub(1);
            pod.status = Some(PodStatus {
                phase: Some(if running { "Running" } else { "Pending" }.to_owned()),
                container_statuses: running.then(|| {
                    vec![ContainerStatus {
                        name: "reader".to_owned(),
                        state: Some(ContainerState {
                            running: Some(ContainerStateRunning::default()),
                            ..ContainerState::default()
                        }),
                        ..ContainerStatus::default()
                    }]
                }),
                ..PodStatus::default()
            });
            (200, to_json(&pod))
        }
        ("DELETE", ["api", "v1", "namespaces", _, "pods", name]) => {
            state.deleted.push((*name).to_owned());
            match state
                .created
                .iter()
                .find(|p| p.metadata.name.as_deref() == Some(name))
            {
                Some(pod) => (200, to_json(pod)),
                None => not_found("pods", name),
            }
        }
        _ => (
            404,
            serde_json::json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "the server could not find the requested resource", "reason": "NotFound", "code": 404}),
        ),
    }
}

fn to_json<T: serde::Serialize>(value: &T) -> serde_json::Value {
    serde_json::to_value(value).expect("serialisable")
}

/// The exec subresource: the command from the query, run here with `/requests` mapped to the volume; stdout and
/// stderr as channels 1 and 2, the exit status as a Status on channel 3, as the kubelet sends them.
async fn exec(
    mut stream: TcpStream,
    target: &str,
    headers: &BTreeMap<String, String>,
    state: &Shared,
) {
    let (forbidden, volume) = {
        let state = lock(state);
        (state.forbid_exec, state.volume.clone())
    };
    if forbidden {
        let _ = stream
            .write_all(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
            .await;
        return;
    }
    let query = target.split_once('?').map(|(_, q)| q).unwrap_or_default();
    let command: Vec<String> = url_pairs(query)
        .into_iter()
        .filter(|(k, _)| k == "command")
        .map(|(_, v)| map_requests(&v, &volume))
        .collect();
    lock(state).execs.push(command.clone());
    let key = headers
        .get("sec-websocket-key")
        .cloned()
        .unwrap_or_default();
    let accept = tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes());
    let response = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Accept: {accept}\r\nSec-WebSocket-Protocol: v4.channel.k8s.io\r\n\r\n"
    );
    if stream.write_all(response.as_bytes()).await.is_err() {
        return;
    }
    let mut socket =
        tokio_tungstenite::WebSocketStream::from_raw_socket(stream, Role::Server, None).await;
    // busybox's applets where this machine has busybox, as in the llmbench image; else the system's tools.
    let busybox = std::process::Command::new("busybox")
        .arg("--help")
        .output()
        .is_ok();
    let mut process = if busybox {
        let mut process = tokio::process::Command::new("busybox");
        process.args(&command);
        process
    } else {
        let mut process = tokio::process::Command::new(&command[0]);
        process.args(&command[1..]);
        process
    };
    let output = process.output().await.expect("the command runs");
    let frame = |channel: u8, data: &[u8]| {
        let mut bytes = vec![channel];
        bytes.extend_from_slice(data);
        Message::binary(bytes)
    };
    for chunk in output.stdout.chunks(4096) {
        let _ = socket.send(frame(1, chunk)).await;
    }
    if !output.stderr.is_empty() {
        let _ = socket.send(frame(2, &output.stderr)).await;
    }
    let status = match output.status.code() {
        Some(0) => serde_json::json!({"metadata": {}, "status": "Success"}),
        code => {
            serde_json::json!({"metadata": {}, "status": "Failure", "reason": "NonZeroExitCode",
            "message": "command terminated with non-zero exit code",
            "details": {"causes": [{"reason": "ExitCode", "message": code.unwrap_or(-1).to_string()}]}})
        }
    };
    let _ = socket.send(frame(3, status.to_string().as_bytes())).await;
    let _ = socket.close(None).await;
    while socket.next().await.is_some() {}
}

fn map_requests(arg: &str, volume: &Path) -> String {
    match arg.strip_prefix("/requests") {
        Some("") => volume.display().to_string(),
        Some(rest) if rest.starts_with('/') => format!("{}{rest}", volume.display()),
        _ => arg.to_owned(),
    }
}

fn url_pairs(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .map(|(k, v)| (decode(k), decode(v)))
        .collect()
}

fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = (bytes[i] == b'%')
            .then(|| bytes.get(i + 1..i + 3))
            .flatten()
            .and_then(|hex| u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok());
        match (bytes[i], escaped) {
            (_, Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (b'+', None) => {
                out.push(b' ');
                i += 1;
            }
            (byte, None) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test]
async fn fetch_copies_the_run_directory_keeps_mtimes_and_deletes_the_reader_pod() {
    let fake = Fake::start(vec![run(Phase::Succeeded)]).await;
    let path = cluster::fetch(&fake.fetch_args()).await.expect("fetched");
    assert_eq!(
        path,
        std::path::absolute(fake.to.join("bench-1")).expect("absolute")
    );
    assert_eq!(
        std::fs::read_to_string(path.join("run.json")).expect("run.json"),
        "{\"run\":1}"
    );
    assert_eq!(
        std::fs::read_to_string(path.join("shard-0/requests.jsonl")).expect("records"),
        "a\nb\n"
    );
    let mtime = filetime::FileTime::from_last_modification_time(
        &std::fs::metadata(path.join("run.json")).expect("metadata"),
    );
    assert_eq!(mtime.unix_seconds(), 1_600_000_000);
    assert!(!fake.to.join("bench-1.partial").exists());

    let state = lock(&fake.state);
    assert_eq!(state.created.len(), 1);
    let reader = &state.created[0];
    let claim = reader
        .spec
        .as_ref()
        .and_then(|s| s.volumes.as_ref())
        .and_then(|v| v[0].persistent_volume_claim.as_ref())
        .expect("the claim");
    assert_eq!(claim.claim_name, "workload-pvc");
    assert_eq!(claim.read_only, Some(true));
    assert_eq!(
        reader.spec.as_ref().expect("spec").containers[0]
            .image
            .as_deref(),
        Some(super::source::DEFAULT_IMAGE)
    );
    assert_eq!(state.deleted, vec!["bench-1-results-x7k2p".to_owned()]);
    let commands: Vec<&str> = state.execs.iter().map(|c| c[0].as_str()).collect();
    assert_eq!(commands, ["du", "tar"]);
}

#[tokio::test]
async fn a_second_fetch_refuses_to_overwrite_without_force_and_replaces_with_it() {
    let fake = Fake::start(vec![run(Phase::Failed)]).await;
    cluster::fetch(&fake.fetch_args()).await.expect("fetched");
    let again = cluster::fetch(&fake.fetch_args()).await;
    assert!(
        matches!(again, Err(ResultsError::DestinationExists { .. })),
        "{again:?}"
    );
    assert_eq!(lock(&fake.state).created.len(), 1, "refused before any pod");
    let forced = FetchArgs {
        force: true,
        ..fake.fetch_args()
    };
    cluster::fetch(&forced).await.expect("replaced");
}

#[tokio::test]
async fn a_missing_run_is_named_with_its_namespace() {
    let fake = Fake::start(Vec::new()).await;
    let error = cluster::fetch(&fake.fetch_args())
        .await
        .expect_err("no run");
    assert_eq!(
        error.to_string(),
        "no BenchmarkRun bench-1 in namespace bench; if it finished and was deleted (its ttlSecondsAfterFinished, \
         or by hand), its results stay on its claim: `llmbench results fetch bench-1 -n bench --claim CLAIM` (the \
         claim is workload-pvc unless the run named another)"
    );
}

#[tokio::test]
async fn a_deleted_runs_results_come_from_its_claim_by_the_directory_named_after_it() {
    // No BenchmarkRun at all: its TTL deleted it. The claim holds its directory and another run's.
    let fake = Fake::start(Vec::new()).await;
    let other = lock(&fake.state).volume.join("bench-10-12345678");
    std::fs::create_dir_all(&other).expect("other run");
    let args = FetchArgs {
        claim: Some("workload-pvc".to_owned()),
        ..fake.fetch_args()
    };
    let path = cluster::fetch(&args).await.expect("fetched");
    assert_eq!(
        std::fs::read_to_string(path.join("run.json")).expect("run.json"),
        "{\"run\":1}"
    );
    assert_eq!(
        std::fs::read_to_string(path.join("shard-0/requests.jsonl")).expect("records"),
        "a\nb\n"
    );
    {
        let state = lock(&fake.state);
        let commands: Vec<&str> = state.execs.iter().map(|c| c[0].as_str()).collect();
        assert_eq!(commands, ["find", "du", "tar"]);
        assert_eq!(state.deleted, vec!["bench-1-results-x7k2p".to_owned()]);
    }

    // Named with --dir, nothing is looked up.
    let named = FetchArgs {
        claim: Some("workload-pvc".to_owned()),
        dir: Some("bench-10-12345678".to_owned()),
        force: true,
        ..fake.fetch_args()
    };
    cluster::fetch(&named).await.expect("fetched by --dir");
    let state = lock(&fake.state);
    let commands: Vec<&str> = state.execs[3..].iter().map(|c| c[0].as_str()).collect();
    assert_eq!(commands, ["du", "tar"]);
}

#[tokio::test]
async fn a_run_still_running_is_refused_without_allow_partial_and_fetched_with_it() {
    let fake = Fake::start(vec![run(Phase::Running)]).await;
    let error = cluster::fetch(&fake.fetch_args())
        .await
        .expect_err("refused");
    assert_eq!(error.exit_code(), Some(super::EXIT_RUN_NOT_FINISHED));
    assert!(lock(&fake.state).created.is_empty());
    let partial = FetchArgs {
        allow_partial: true,
        ..fake.fetch_args()
    };
    cluster::fetch(&partial).await.expect("a partial copy");
}

#[tokio::test]
async fn a_deleted_claim_is_reported_before_any_pod_starts() {
    let fake = Fake::start(vec![run(Phase::Succeeded)]).await;
    lock(&fake.state).claims.clear();
    let error = cluster::fetch(&fake.fetch_args())
        .await
        .expect_err("no claim");
    assert!(
        matches!(error, ResultsError::ClaimMissing { .. }),
        "{error}"
    );
    assert!(lock(&fake.state).created.is_empty());
}

#[tokio::test]
async fn a_refused_exec_names_the_permission_and_leaves_nothing_behind() {
    let fake = Fake::start(vec![run(Phase::Succeeded)]).await;
    lock(&fake.state).forbid_exec = true;
    let error = cluster::fetch(&fake.fetch_args())
        .await
        .expect_err("forbidden");
    assert!(
        error
            .to_string()
            .starts_with("forbidden: you may not create pods/exec in namespace bench"),
        "{error}"
    );
    assert_eq!(
        lock(&fake.state).deleted.len(),
        1,
        "the reader pod is deleted"
    );
    assert!(!fake.to.join("bench-1.partial").exists());
    assert!(!fake.to.join("bench-1").exists());
}

#[tokio::test]
async fn a_run_directory_missing_from_the_claim_is_reported() {
    let fake = Fake::start(vec![run(Phase::Succeeded)]).await;
    let volume = lock(&fake.state).volume.clone();
    std::fs::remove_dir_all(volume.join(RUN_DIR)).expect("remove");
    let error = cluster::fetch(&fake.fetch_args())
        .await
        .expect_err("missing");
    assert!(
        matches!(error, ResultsError::ResultsDirMissing { .. }),
        "{error}"
    );
    assert_eq!(lock(&fake.state).deleted.len(), 1);
}

#[tokio::test]
async fn list_shows_the_runs_of_the_contexts_namespace() {
    let fake = Fake::start(vec![run(Phase::Succeeded)]).await;
    let table = cluster::list(&ListArgs {
        namespace: None,
        all_namespaces: false,
        kube: KubeArgs {
            context: None,
            kubeconfig: Some(fake.kubeconfig.clone()),
        },
    })
    .await
    .expect("listed");
    let row: Vec<&str> = table
        .lines()
        .nth(1)
        .expect("a row")
        .split_whitespace()
        .collect();
    assert_eq!(&row[..4], ["bench-1", "Succeeded", "workload-pvc", RUN_DIR]);
}

#[tokio::test]
async fn an_empty_dir_runs_kept_results_are_joined_from_their_config_maps_in_order() {
    let mut kept_run = run(Phase::Succeeded);
    let fake = Fake::start(Vec::new()).await;
    // The launcher's block of the run's directory, as the operator took it from the log and split it.
    let volume = lock(&fake.state).volume.join(RUN_DIR);
    let block = super::pack::results_block(&volume, RUN_DIR, 1 << 20).expect("packs");
    let archive = llmbench_core::results_log::extract(&block)
        .expect("a block")
        .expect("an archive");
    let (first, second) = archive.split_at(archive.len() / 2);
    {
        let mut state = lock(&fake.state);
        state
            .config_maps
            .insert("bench-1-results-0".to_owned(), first.to_vec());
        state
            .config_maps
            .insert("bench-1-results-1".to_owned(), second.to_vec());
    }
    let status = kept_run.status.as_mut().expect("status");
    status.results_path = Some(format!("emptyDir:/requests/{RUN_DIR}"));
    status.results_kept = Some(llmbench_api::v1alpha1::ResultsKept {
        config_maps: vec![
            "bench-1-results-0".to_owned(),
            "bench-1-results-1".to_owned(),
        ],
        bytes: archive.len() as u64,
        dir: RUN_DIR.to_owned(),
    });
    lock(&fake.state).runs.push(kept_run.clone());
    let path = cluster::fetch(&fake.fetch_args()).await.expect("fetched");
    assert_eq!(
        std::fs::read_to_string(path.join("run.json")).expect("run.json"),
        "{\"run\":1}"
    );
    assert_eq!(
        std::fs::read_to_string(path.join("shard-0/requests.jsonl")).expect("records"),
        "a\nb\n"
    );
    // No reader pod: the results come from the ConfigMaps.
    assert!(lock(&fake.state).created.is_empty());

    // A part missing from the status's count is an error, not a shorter directory.
    let mut short = kept_run;
    if let Some(kept) = short.status.as_mut().and_then(|s| s.results_kept.as_mut()) {
        kept.bytes += 1;
    }
    lock(&fake.state).runs = vec![short];
    let mut args = fake.fetch_args();
    args.force = true;
    let error = cluster::fetch(&args)
        .await
        .expect_err("a size that does not add up");
    assert!(
        matches!(error, ResultsError::KeptSizeMismatch { .. }),
        "{error}"
    );
}
