//! The thin shell of `llmbench results`: reads the run, its claim and pods, runs the reader pod, and streams the
//! copy through exec. Every decision is made by the pure functions of `source`, `unpack`, `local` and `progress`.
//!
//! The reader pod is polled (a GET a second) rather than watched: a fetch waits for one pod once, and polling
//! needs neither kube's runtime nor list/watch permission on pods.

use std::io::IsTerminal as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::{Api, AttachParams, AttachedProcess, DeleteParams, ListParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config, ResourceExt};
use llmbench_api::v1alpha1::{BenchmarkRun, LauncherSpec, WORKLOAD_MOUNT_PATH};
use tokio::io::{AsyncRead, AsyncReadExt};

use super::local::Destination;
use super::progress::{final_line, parse_du_kib, progress_line};
use super::source::{
    DEFAULT_IMAGE, ExecOutcome, PodState, ReaderSettings, Request, RunResults, api_error,
    exec_outcome, is_forbidden, is_not_found, launcher_image, list_table, locate, pick_run_dir,
    pin_node, pod_state, reader_pod,
};
use super::unpack::{ChunkReader, UnpackError, Unpacked, unpack};
use super::{FetchArgs, KubeArgs, ListArgs, ResultsError};

const RUNS: &str = "benchmarkruns.llmbench.dev";
/// How much of a command's stderr is kept for an error message.
const STDERR_CAP: usize = 16 * 1024;
/// The exec's stdout pipe: large enough that the WebSocket reader rarely waits for the unpacker.
const STDOUT_BUFFER: usize = 1024 * 1024;
/// How long an exec's exit status may lag behind the end of its output.
const STATUS_GRACE: Duration = Duration::from_secs(30);
/// How long deleting the reader pod may take before we leave it to its deadline.
const DELETE_TIMEOUT: Duration = Duration::from_secs(15);

/// A client from the user's kubeconfig: `--kubeconfig` or $KUBECONFIG or ~/.kube/config (or the in-cluster
/// account), at `--context` or the current context.
async fn client(kube: &KubeArgs) -> Result<Client, ResultsError> {
    let failed = |source: Box<dyn std::error::Error + Send + Sync>| ResultsError::Kubeconfig {
        context: kube.context.clone(),
        source,
    };
    let options = KubeConfigOptions {
        context: kube.context.clone(),
        ..KubeConfigOptions::default()
    };
    let config = match (&kube.kubeconfig, &kube.context) {
        (Some(path), _) => {
            let file = Kubeconfig::read_from(path).map_err(|e| failed(Box::new(e)))?;
            Config::from_custom_kubeconfig(file, &options)
                .await
                .map_err(|e| failed(Box::new(e)))?
        }
        (None, Some(_)) => Config::from_kubeconfig(&options)
            .await
            .map_err(|e| failed(Box::new(e)))?,
        (None, None) => Config::infer().await.map_err(|e| failed(Box::new(e)))?,
    };
    Client::try_from(config).map_err(|e| failed(Box::new(e)))
}

/// Ctrl-C or SIGTERM, seen by every step of a fetch so that each can stop cleanly.
struct Interrupt {
    fired: tokio::sync::watch::Receiver<bool>,
    listener: tokio::task::JoinHandle<()>,
}

impl Interrupt {
    fn listen() -> Self {
        let (tx, fired) = tokio::sync::watch::channel(false);
        let listener = tokio::spawn(async move {
            shutdown_signal().await;
            let _ = tx.send(true);
        });
        Self { fired, listener }
    }

    /// Resolves once interrupted; never otherwise.
    async fn fired(&self) {
        let mut fired = self.fired.clone();
        if fired.wait_for(|f| *f).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

impl Drop for Interrupt {
    fn drop(&mut self) {
        self.listener.abort();
    }
}

async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            // No handler could be installed: never report an interruption that did not happen.
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    () = ctrl_c => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => ctrl_c.await,
        }
    }
    #[cfg(not(unix))]
    ctrl_c.await;
}

/// `llmbench results fetch`: returns the absolute path of the run's local directory.
pub(crate) async fn fetch(args: &FetchArgs) -> Result<PathBuf, ResultsError> {
    let destination = Destination::new(&args.to, &args.run)?;
    destination.check(args.force)?;
    let client = client(&args.kube).await?;
    let namespace = args
        .namespace
        .clone()
        .unwrap_or_else(|| client.default_namespace().to_owned());
    // A run that is gone: its directory straight from the claim it names, found once the reader runs.
    if let Some(claim) = &args.claim {
        let results = RunResults {
            run: args.run.clone(),
            namespace,
            uid: String::new(),
            claim: claim.clone(),
            dir: args.dir.clone().unwrap_or_default(),
            phase: None,
        };
        return read_claim(
            &client,
            results,
            &LauncherSpec::default(),
            args,
            false,
            &destination,
        )
        .await;
    }
    let run = get_run(&client, &namespace, &args.run).await?;
    // An emptyDir run's results, kept by the operator in ConfigMaps once its launcher ended.
    if let Some(kept) = run.status.as_ref().and_then(|s| s.results_kept.as_ref()) {
        return fetch_kept(&client, &namespace, &run, kept, &destination, args.force).await;
    }
    let results = locate(&run)?;
    let partial = !results.finished();
    if partial {
        if !args.allow_partial {
            return Err(ResultsError::NotFinished {
                phase: results.phase_name(),
                run: results.run,
                namespace,
            });
        }
        tracing::warn!(
            run = %results.run,
            phase = %results.phase_name(),
            "the run has not finished: fetching what its launchers have written so far, which is incomplete"
        );
    }
    read_claim(
        &client,
        results,
        &run.spec.launcher,
        args,
        partial,
        &destination,
    )
    .await
}

/// Copies `results` from its claim through a reader pod scheduled as `launcher` says. An empty `results.dir` is
/// looked up on the claim once the reader runs (a run that is gone, fetched with --claim alone).
async fn read_claim(
    client: &Client,
    mut results: RunResults,
    launcher: &LauncherSpec,
    args: &FetchArgs,
    partial: bool,
    destination: &Destination,
) -> Result<PathBuf, ResultsError> {
    let namespace = results.namespace.clone();
    let access_modes = claim_access_modes(client, &results).await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    let run_pods = launcher_pods(&pods, &results).await;
    let launchers = launcher_image(&run_pods);
    let (image, image_pull_policy) = match (&args.image, &launcher.image, &launchers) {
        (Some(image), _, _) => (image.clone(), None),
        (None, Some(image), Some((ran, policy))) if ran == image => (image.clone(), policy.clone()),
        (None, Some(image), _) => (image.clone(), None),
        (None, None, Some((ran, policy))) => (ran.clone(), policy.clone()),
        (None, None, None) => (DEFAULT_IMAGE.to_owned(), None),
    };
    let settings = ReaderSettings {
        image,
        image_pull_policy,
        deadline: args.deadline,
        node: pin_node(&run_pods, &results.claim, &access_modes),
    };
    if let Some(node) = &settings.node {
        tracing::info!(%node, claim = %results.claim, "a launcher of the run is still on the claim: the reader joins it on its node");
    }
    destination.prepare()?;
    let interrupt = Interrupt::listen();
    // Not raced against the interrupt: a create cut short could leave a pod whose name we never learnt. An
    // interruption meanwhile is seen by the first step of the copy.
    let reader_spec = reader_pod(launcher, &results, &settings);
    let reader = match pods.create(&PostParams::default(), &reader_spec).await {
        Ok(pod) => pod.name_any(),
        Err(e) => {
            destination.discard();
            return Err(api_error(
                e,
                &Request {
                    verb: "create",
                    resource: "pods",
                    name: None,
                    namespace: Some(&namespace),
                },
            ));
        }
    };
    tracing::info!(
        pod = %reader,
        image = %settings.image,
        claim = %results.claim,
        dir = %results.mount_path(),
        "started the reader pod"
    );
    let copied = copy(
        &pods,
        &reader,
        &mut results,
        args,
        partial,
        destination,
        &interrupt,
    )
    .await;
    delete_reader(&pods, &reader, &namespace).await;
    match copied {
        Ok(()) => destination
            .commit(args.force)
            .inspect_err(|_| destination.discard()),
        Err(e) => {
            destination.discard();
            Err(e)
        }
    }
}

/// `results fetch` of an emptyDir run: its kept archive, joined from its ConfigMaps in order and unpacked.
async fn fetch_kept(
    client: &Client,
    namespace: &str,
    run: &BenchmarkRun,
    kept: &llmbench_api::v1alpha1::ResultsKept,
    destination: &Destination,
    force: bool,
) -> Result<PathBuf, ResultsError> {
    use llmbench_api::results_log::PART_KEY;
    let maps: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(client.clone(), namespace);
    let mut archive = Vec::with_capacity(usize::try_from(kept.bytes).unwrap_or(0));
    for name in &kept.config_maps {
        let map = maps.get(name).await.map_err(|e| {
            api_error(
                e,
                &Request {
                    verb: "get",
                    resource: "configmaps",
                    name: Some(name),
                    namespace: Some(namespace),
                },
            )
        })?;
        let part = map
            .binary_data
            .and_then(|mut data| data.remove(PART_KEY))
            .ok_or_else(|| ResultsError::KeptPartMissing {
                run: run.name_any(),
                config_map: name.clone(),
            })?;
        archive.extend_from_slice(&part.0);
    }
    if archive.len() as u64 != kept.bytes {
        return Err(ResultsError::KeptSizeMismatch {
            run: run.name_any(),
            got: archive.len() as u64,
            want: kept.bytes,
        });
    }
    destination.prepare()?;
    let unpacked = super::pack::unpack_kept(&archive, &destination.partial, &kept.dir);
    match unpacked {
        Ok(unpacked) => {
            tracing::info!(
                files = unpacked.files,
                bytes = unpacked.bytes,
                config_maps = kept.config_maps.len(),
                "unpacked the run's kept results"
            );
            destination
                .commit(force)
                .inspect_err(|_| destination.discard())
        }
        Err(source) => {
            destination.discard();
            Err(ResultsError::Unpack {
                run: run.name_any(),
                dir: destination.partial.clone(),
                source,
            })
        }
    }
}

async fn get_run(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<BenchmarkRun, ResultsError> {
    let runs: Api<BenchmarkRun> = Api::namespaced(client.clone(), namespace);
    runs.get(name).await.map_err(|e| match &e {
        kube::Error::Api(status) if is_not_found(&e) && names_an_object(status) => {
            ResultsError::RunNotFound {
                run: name.to_owned(),
                namespace: namespace.to_owned(),
            }
        }
        _ if is_not_found(&e) => ResultsError::NoBenchmarkRunApi,
        _ => api_error(
            e,
            &Request {
                verb: "get",
                resource: RUNS,
                name: Some(name),
                namespace: Some(namespace),
            },
        ),
    })
}

/// A 404 about an object carries its name; one about the resource type (the CRD is not installed) does not.
fn names_an_object(status: &kube::core::Status) -> bool {
    status.details.as_ref().is_some_and(|d| !d.name.is_empty())
}

/// The claim's access modes, after checking that it is still there. A user who may not read claims still gets
/// the fetch (the reader pod would fail to schedule on a missing claim, and says so).
async fn claim_access_modes(
    client: &Client,
    results: &RunResults,
) -> Result<Vec<String>, ResultsError> {
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &results.namespace);
    match claims.get(&results.claim).await {
        Ok(claim) => {
            if claim.metadata.deletion_timestamp.is_some() {
                return Err(ResultsError::ClaimTerminating {
                    claim: results.claim.clone(),
                    namespace: results.namespace.clone(),
                });
            }
            let phase = claim.status.as_ref().and_then(|s| s.phase.as_deref());
            if phase == Some("Lost") {
                tracing::warn!(claim = %results.claim, "the claim has lost its volume: the reader pod may not start");
            }
            Ok(claim.spec.and_then(|s| s.access_modes).unwrap_or_default())
        }
        Err(e) if is_not_found(&e) => Err(ResultsError::ClaimMissing {
            claim: results.claim.clone(),
            run: results.run.clone(),
            namespace: results.namespace.clone(),
        }),
        Err(e) if is_forbidden(&e) => {
            tracing::warn!(
                claim = %results.claim,
                "you may not get persistentvolumeclaims here: going on without checking the claim"
            );
            Ok(Vec::new())
        }
        Err(e) => Err(api_error(
            e,
            &Request {
                verb: "get",
                resource: "persistentvolumeclaims",
                name: Some(&results.claim),
                namespace: Some(&results.namespace),
            },
        )),
    }
}

/// The run's own pods (launchers, merge), by the operator's run-uid label: their image and node. Optional
/// knowledge: without list permission on pods, none.
async fn launcher_pods(pods: &Api<Pod>, results: &RunResults) -> Vec<Pod> {
    if results.uid.is_empty() {
        // A run fetched from its claim alone is gone, and so are its pods.
        return Vec::new();
    }
    let selector = format!("llmbench.dev/run-uid={}", results.uid);
    match pods.list(&ListParams::default().labels(&selector)).await {
        Ok(list) => list.items,
        Err(e) => {
            tracing::debug!(error = %e, "cannot list the run's pods; using the default image and no node pin");
            Vec::new()
        }
    }
}

/// Waits for the reader, sizes the run's directory, and streams it into the partial copy.
async fn copy(
    pods: &Api<Pod>,
    reader: &str,
    results: &mut RunResults,
    args: &FetchArgs,
    partial: bool,
    destination: &Destination,
    interrupt: &Interrupt,
) -> Result<(), ResultsError> {
    let interrupted = || ResultsError::Interrupted {
        run: results.run.clone(),
    };
    tokio::select! {
        ready = wait_running(pods, reader, &results.namespace, args.pod_timeout) => ready?,
        () = interrupt.fired() => return Err(interrupted()),
    }
    if results.dir.is_empty() {
        results.dir = tokio::select! {
            dir = find_run_dir(pods, reader, results) => dir?,
            () = interrupt.fired() => return Err(interrupted()),
        };
        tracing::info!(dir = %results.dir, claim = %results.claim, "found the run's directory on the claim");
    }
    let total = tokio::select! {
        total = disk_usage(pods, reader, results) => total?,
        () = interrupt.fired() => return Err(interrupted()),
    };
    eprintln!(
        "{}: copying {}:{}{} through pod {reader}",
        results.run,
        results.claim,
        results.mount_path(),
        total
            .map(|t| format!(" (~{})", super::progress::format_bytes(t)))
            .unwrap_or_default(),
    );
    let started = Instant::now();
    let (unpacked, streamed) = stream_tar(
        pods,
        reader,
        results,
        partial,
        destination,
        total,
        interrupt,
    )
    .await?;
    eprintln!(
        "{}",
        final_line(&results.run, &unpacked, streamed, started.elapsed())
    );
    for skipped in &unpacked.skipped {
        tracing::warn!(entry = %skipped, "not recreated");
    }
    Ok(())
}

async fn wait_running(
    pods: &Api<Pod>,
    name: &str,
    namespace: &str,
    timeout: Duration,
) -> Result<(), ResultsError> {
    let started = Instant::now();
    let mut last = "Pending".to_owned();
    loop {
        match pods.get(name).await {
            Ok(pod) => match pod_state(&pod) {
                PodState::Running => return Ok(()),
                PodState::Failed(reason) => {
                    return Err(ResultsError::PodFailed {
                        pod: name.to_owned(),
                        namespace: namespace.to_owned(),
                        reason,
                    });
                }
                PodState::Waiting(reason) => {
                    if reason != last {
                        tracing::info!(pod = %name, "waiting for the reader pod: {reason}");
                    }
                    last = reason;
                }
            },
            Err(e) if is_not_found(&e) => {
                return Err(ResultsError::PodFailed {
                    pod: name.to_owned(),
                    namespace: namespace.to_owned(),
                    reason: "it was deleted while starting".to_owned(),
                });
            }
            Err(e) => {
                return Err(api_error(
                    e,
                    &Request {
                        verb: "get",
                        resource: "pods",
                        name: Some(name),
                        namespace: Some(namespace),
                    },
                ));
            }
        }
        if started.elapsed() >= timeout {
            return Err(ResultsError::PodNotReady {
                pod: name.to_owned(),
                namespace: namespace.to_owned(),
                waited: timeout,
                reason: last,
            });
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

fn exec_params() -> AttachParams {
    AttachParams::default()
        .stdin(false)
        .stdout(true)
        .stderr(true)
        .max_stdout_buf_size(STDOUT_BUFFER)
        .max_stderr_buf_size(STDERR_CAP)
}

async fn start_exec(
    pods: &Api<Pod>,
    reader: &str,
    namespace: &str,
    command: &[String],
) -> Result<AttachedProcess, ResultsError> {
    pods.exec(reader, command.to_vec(), &exec_params())
        .await
        .map_err(|e| {
            api_error(
                e,
                &Request {
                    verb: "create",
                    resource: "pods/exec",
                    name: Some(reader),
                    namespace: Some(namespace),
                },
            )
        })
}

/// Reads `stream` to its end, keeping at most `cap` bytes (the rest is drained so the writer never blocks).
async fn read_capped(stream: Option<impl AsyncRead + Unpin>, cap: usize) -> Vec<u8> {
    let mut kept = Vec::new();
    let Some(mut stream) = stream else {
        return kept;
    };
    let mut buffer = vec![0u8; 8192];
    loop {
        match stream.read(&mut buffer).await {
            Ok(0) | Err(_) => return kept,
            Ok(n) => {
                let room = cap.saturating_sub(kept.len());
                kept.extend_from_slice(&buffer[..n.min(room)]);
            }
        }
    }
}

/// Runs a short command in the reader to its end: how it ended, its stdout (at most `stdout_cap` bytes) and its
/// stderr (capped too).
async fn run_in_reader(
    pods: &Api<Pod>,
    reader: &str,
    namespace: &str,
    command: &[String],
    stdout_cap: usize,
) -> Result<(ExecOutcome, Vec<u8>, Vec<u8>), ResultsError> {
    let mut attached = start_exec(pods, reader, namespace, command).await?;
    let status = attached.take_status();
    let (stdout, stderr) = tokio::join!(
        read_capped(attached.stdout(), stdout_cap),
        read_capped(attached.stderr(), STDERR_CAP)
    );
    let status = match status {
        Some(status) => tokio::time::timeout(STATUS_GRACE, status)
            .await
            .ok()
            .flatten(),
        None => None,
    };
    Ok((exec_outcome(status.as_ref()), stdout, stderr))
}

/// The directory of a run that is gone: `find` lists the claim's top-level directories named after the run, and
/// `pick_run_dir` takes the one with the operator's `<run>-<uid8>` shape.
async fn find_run_dir(
    pods: &Api<Pod>,
    reader: &str,
    results: &RunResults,
) -> Result<String, ResultsError> {
    let command: Vec<String> = [
        "find",
        WORKLOAD_MOUNT_PATH,
        "-mindepth",
        "1",
        "-maxdepth",
        "1",
        "-type",
        "d",
        "-name",
        &format!("{}-*", results.run),
    ]
    .map(str::to_owned)
    .to_vec();
    let (outcome, stdout, stderr) =
        run_in_reader(pods, reader, &results.namespace, &command, STDOUT_BUFFER).await?;
    match outcome {
        ExecOutcome::Success => pick_run_dir(
            &results.run,
            &results.claim,
            &String::from_utf8_lossy(&stdout),
        ),
        outcome => Err(ResultsError::Exec {
            command: command.join(" "),
            pod: reader.to_owned(),
            code: match outcome {
                ExecOutcome::ExitCode(code) => Some(code),
                _ => None,
            },
            stderr: match outcome {
                ExecOutcome::Failure(why) if stderr.is_empty() => why,
                _ => String::from_utf8_lossy(&stderr).trim().to_owned(),
            },
        }),
    }
}

/// The size of the run's directory (`du -sk`), for progress; `None` when `du` cannot tell. A directory that is
/// not there is an error: nothing was written.
async fn disk_usage(
    pods: &Api<Pod>,
    reader: &str,
    results: &RunResults,
) -> Result<Option<u64>, ResultsError> {
    let command = vec!["du".to_owned(), "-sk".to_owned(), results.mount_path()];
    let (outcome, stdout, stderr) =
        run_in_reader(pods, reader, &results.namespace, &command, STDERR_CAP).await?;
    let stderr = String::from_utf8_lossy(&stderr).trim().to_owned();
    match outcome {
        ExecOutcome::Success => Ok(parse_du_kib(&String::from_utf8_lossy(&stdout))),
        _ if stderr.contains("No such file or directory") => Err(ResultsError::ResultsDirMissing {
            run: results.run.clone(),
            claim: results.claim.clone(),
            path: results.mount_path(),
        }),
        outcome => {
            tracing::warn!(?outcome, %stderr, "cannot size the run's directory; progress will show no total");
            Ok(None)
        }
    }
}

/// How reading the exec's stdout ended.
enum PumpEnd {
    /// The stream ended.
    Eof,
    /// The unpacker stopped reading (it failed; its error says why).
    Abandoned,
    /// Reading failed (also passed on to the unpacker).
    Failed,
}

/// Passes the exec's stdout on to the unpacker chunk by chunk, counting bytes for the progress line.
async fn pump(
    mut stdout: impl AsyncRead + Unpin,
    chunks: tokio::sync::mpsc::Sender<std::io::Result<Bytes>>,
    streamed: &AtomicU64,
) -> PumpEnd {
    loop {
        let mut buffer = BytesMut::with_capacity(64 * 1024);
        match stdout.read_buf(&mut buffer).await {
            Ok(0) => return PumpEnd::Eof,
            Ok(n) => {
                streamed.fetch_add(n as u64, Ordering::Relaxed);
                if chunks.send(Ok(buffer.freeze())).await.is_err() {
                    return PumpEnd::Abandoned;
                }
            }
            Err(e) => {
                let _ = chunks.send(Err(e)).await;
                return PumpEnd::Failed;
            }
        }
    }
}

/// `tar cf - -C /requests <dir>` in the reader, unpacked as it arrives. Returns what was unpacked and the bytes
/// streamed.
async fn stream_tar(
    pods: &Api<Pod>,
    reader: &str,
    results: &RunResults,
    partial: bool,
    destination: &Destination,
    total: Option<u64>,
    interrupt: &Interrupt,
) -> Result<(Unpacked, u64), ResultsError> {
    let command = vec![
        "tar".to_owned(),
        "cf".to_owned(),
        "-".to_owned(),
        "-C".to_owned(),
        WORKLOAD_MOUNT_PATH.to_owned(),
        results.dir.clone(),
    ];
    let mut attached = start_exec(pods, reader, &results.namespace, &command).await?;
    let status = attached.take_status();
    let stdout = attached.stdout();
    let stderr = tokio::spawn(read_capped(attached.stderr(), STDERR_CAP));

    let (chunks, received) = tokio::sync::mpsc::channel(64);
    let prefix = results.dir.clone();
    let root = destination.partial.clone();
    let unpacker =
        tokio::task::spawn_blocking(move || unpack(ChunkReader::new(received), &prefix, &root));
    let streamed = Arc::new(AtomicU64::new(0));
    let ticker = spawn_ticker(results.run.clone(), Arc::clone(&streamed), total);

    let ended = match stdout {
        Some(stdout) => tokio::select! {
            ended = pump(stdout, chunks, &streamed) => Some(ended),
            () = interrupt.fired() => None,
        },
        // Asked for, so always there; without it there is nothing to unpack, which the unpacker reports.
        None => {
            drop(chunks);
            Some(PumpEnd::Eof)
        }
    };
    // The sender is gone either way, so the unpacker ends; wait for it so that nothing writes into the partial
    // copy once this returns.
    let unpacked = unpacker.await;
    if let Some(ticker) = ticker {
        ticker.abort();
        eprint!("\r\x1b[K");
    }
    let streamed = streamed.load(Ordering::Relaxed);
    let Some(ended) = ended else {
        return Err(ResultsError::Interrupted {
            run: results.run.clone(),
        });
    };
    let unpacked = unpacked.map_err(|e| ResultsError::Stream {
        run: results.run.clone(),
        pod: reader.to_owned(),
        source: Box::new(e),
    })?;
    // Once the output has ended the status has been sent; after a failure tar may be blocked, so do not wait long.
    let grace = if unpacked.is_ok() && matches!(ended, PumpEnd::Eof) {
        STATUS_GRACE
    } else {
        Duration::from_secs(2)
    };
    let status = match status {
        Some(status) => tokio::time::timeout(grace, status).await.ok().flatten(),
        None => None,
    };
    let outcome = exec_outcome(status.as_ref());
    let stderr = match tokio::time::timeout(Duration::from_secs(2), stderr).await {
        Ok(Ok(bytes)) => String::from_utf8_lossy(&bytes).trim().to_owned(),
        _ => String::new(),
    };
    let tar_failed = |code| ResultsError::Exec {
        pod: reader.to_owned(),
        command: command.join(" "),
        code,
        stderr: if stderr.is_empty() {
            "no message".to_owned()
        } else {
            stderr.clone()
        },
    };
    match (unpacked, outcome) {
        (Ok(unpacked), ExecOutcome::Success) => Ok((unpacked, streamed)),
        // A run still writing can change under tar (a file that grows or shrinks while read); the archive is
        // whole all the same, and the user asked for a partial copy.
        (Ok(unpacked), ExecOutcome::ExitCode(code)) if partial => {
            tracing::warn!(code, %stderr, "tar reported a problem reading a run that is still writing; the copy is partial");
            Ok((unpacked, streamed))
        }
        (Ok(unpacked), ExecOutcome::Unknown) => {
            tracing::warn!(
                "the exec ended without tar's exit status; the archive itself was complete"
            );
            Ok((unpacked, streamed))
        }
        (Ok(_), ExecOutcome::ExitCode(code)) => Err(tar_failed(Some(code))),
        (_, ExecOutcome::Failure(message)) => Err(ResultsError::Exec {
            pod: reader.to_owned(),
            command: command.join(" "),
            code: None,
            stderr: if stderr.is_empty() {
                message
            } else {
                format!("{message}: {stderr}")
            },
        }),
        // tar failing first explains the unpacker's complaint (e.g. a stream cut short).
        (Err(_), ExecOutcome::ExitCode(code)) => Err(tar_failed(Some(code))),
        (Err(source), _) => {
            if matches!(source, UnpackError::Read { .. })
                && let Ok(Err(connection)) =
                    tokio::time::timeout(Duration::from_secs(2), attached.join()).await
            {
                return Err(ResultsError::Stream {
                    run: results.run.clone(),
                    pod: reader.to_owned(),
                    source: Box::new(connection),
                });
            }
            Err(ResultsError::Unpack {
                run: results.run.clone(),
                dir: destination.partial.clone(),
                source,
            })
        }
    }
}

/// A progress line a second on a terminal (rewritten in place); nothing otherwise, where the final line suffices.
fn spawn_ticker(
    run: String,
    streamed: Arc<AtomicU64>,
    total: Option<u64>,
) -> Option<tokio::task::JoinHandle<()>> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let started = Instant::now();
    Some(tokio::spawn(async move {
        let mut ticker = tokio::time::interval(Duration::from_secs(1));
        ticker.tick().await;
        loop {
            ticker.tick().await;
            let line = progress_line(
                &run,
                streamed.load(Ordering::Relaxed),
                total,
                started.elapsed(),
            );
            eprint!("\r{line}\x1b[K");
        }
    }))
}

/// Deletes the reader pod with its own one-second grace period: quick, yet confirmed by the kubelet (a grace
/// period of 0 would remove the object at once while the container and its mount lived on). A failure is only a
/// warning: the pod's deadline ends it anyway.
async fn delete_reader(pods: &Api<Pod>, name: &str, namespace: &str) {
    let params = DeleteParams::default();
    let attempt = || tokio::time::timeout(DELETE_TIMEOUT, pods.delete(name, &params));
    let mut deleted = attempt().await;
    // A refused exec upgrade can leave the client's pooled connection reset by the server; the delete that
    // follows on it fails before the apiserver ever sees it. One retry opens a fresh connection.
    if let Ok(Err(e)) = &deleted
        && is_transport_error(e)
    {
        tracing::debug!(pod = %name, error = %e, "the reader pod's delete failed in transport; retrying once");
        deleted = attempt().await;
    }
    match deleted {
        Ok(Ok(_)) => tracing::debug!(pod = %name, "deleted the reader pod"),
        Ok(Err(e)) if is_not_found(&e) => {}
        Ok(Err(e)) => tracing::warn!(
            pod = %name,
            error = %e,
            "could not delete the reader pod; its deadline ends it, or run: kubectl delete pod {name} -n {namespace}"
        ),
        Err(_) => tracing::warn!(
            pod = %name,
            "deleting the reader pod timed out; its deadline ends it, or run: kubectl delete pod {name} -n {namespace}"
        ),
    }
}

/// An error of the connection (reset, closed, refused), not an answer of the apiserver.
fn is_transport_error(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Service(_) | kube::Error::HyperError(_))
}

/// `llmbench results list`: the table, or an empty string (and a note on stderr) when there are no runs.
pub(crate) async fn list(args: &ListArgs) -> Result<String, ResultsError> {
    let client = client(&args.kube).await?;
    let namespace = (!args.all_namespaces).then(|| {
        args.namespace
            .clone()
            .unwrap_or_else(|| client.default_namespace().to_owned())
    });
    let api: Api<BenchmarkRun> = match &namespace {
        Some(namespace) => Api::namespaced(client, namespace),
        None => Api::all(client),
    };
    let mut runs = api
        .list(&ListParams::default())
        .await
        .map_err(|e| match &e {
            _ if is_not_found(&e) => ResultsError::NoBenchmarkRunApi,
            _ => api_error(
                e,
                &Request {
                    verb: "list",
                    resource: RUNS,
                    name: None,
                    namespace: namespace.as_deref(),
                },
            ),
        })?
        .items;
    if runs.is_empty() {
        match &namespace {
            Some(namespace) => eprintln!("No BenchmarkRuns in namespace {namespace}."),
            None => eprintln!("No BenchmarkRuns in any namespace."),
        }
        return Ok(String::new());
    }
    runs.sort_by(|a, b| {
        (a.namespace(), &a.metadata.creation_timestamp, a.name_any()).cmp(&(
            b.namespace(),
            &b.metadata.creation_timestamp,
            b.name_any(),
        ))
    });
    Ok(list_table(&runs, namespace.is_none()))
}
