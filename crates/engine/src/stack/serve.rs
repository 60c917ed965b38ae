//! `llmbench run --serve -- CMD ARGS…`: a stack this launcher starts, waits for, watches and stops, as the MLPerf
//! harnesses and llm-d-benchmark's standalone mode own the server for the length of a run.
//!
//! - **Start**: the command runs in a process group of its own (a Ctrl-C at the terminal reaches the launcher, which
//!   stops the run and then the stack, not both at once), its stdout and stderr appended to one log file — created
//!   in `--output` and moved into the results directory as `stack.log` once the run has one, so the stack keeps
//!   writing to it with `--serve-keep` after the launcher is gone, and memory never holds the log.
//! - **Ready**: `GET <ready-path>` (default `/health`) and then `GET /v1/models` answer 200 before `--serve-timeout`;
//!   the process exiting first fails at once, with its exit status and its log's last lines.
//! - **Heartbeat**: during the run, the process exiting, or [`DEFAULT_HEALTH_FAILURES`] consecutive failed health
//!   checks a second apart, stop the run as an interrupt does (no new requests; those in flight get the interrupt
//!   grace, then are cancelled; every record is kept and classified) with [`StopReason::StackFailed`], and run.json's
//!   `stack.failure` says what happened, with the log's tail.
//! - **Stop**: SIGTERM, then SIGKILL to its process group after [`STOP_GRACE`]; not at all with `--serve-keep`.

use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::{StackFailure, StackInfo, StackSource, StackSpec};
use crate::engine::{Control, StopReason};

/// The stack's log inside the results directory.
pub(crate) const STACK_LOG_FILE: &str = "stack.log";

/// The stack's process id inside the results directory, for whoever needs to find it (tests kill it by it).
pub(crate) const STACK_PID_FILE: &str = "stack.pid";

/// How many of the log's last lines a failure carries.
pub const LOG_TAIL_LINES: usize = 40;

/// How much of the log's end is read for its tail: 40 lines of a chatty engine fit, a binary blob cannot flood
/// the record.
const LOG_TAIL_BYTES: u64 = 64 * 1024;

/// Consecutive failed health checks that fail the run: one slow answer under load is not a dead stack.
pub const DEFAULT_HEALTH_FAILURES: u32 = 3;

/// Between two health checks during the run, and between two readiness checks (faster: startup is what is waited
/// for).
const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(1);
const READY_POLL_INTERVAL: Duration = Duration::from_millis(250);

/// How long one health check may take.
const HEALTH_TIMEOUT: Duration = Duration::from_secs(2);

/// Between SIGTERM and SIGKILL when the stack is stopped: vLLM drains and frees its GPU memory within it.
pub(crate) const STOP_GRACE: Duration = Duration::from_secs(30);

/// The port vLLM (`vllm serve`) listens on unless told otherwise.
pub(crate) const VLLM_DEFAULT_PORT: u16 = 8000;

/// The prefixes of the environment variables recorded with a served stack: what configures an engine (vLLM, CUDA,
/// NCCL, the Hugging Face hub, PyTorch). Everything else in the launcher's environment is the user's business.
const RECORDED_ENV_PREFIXES: [&str; 10] = [
    "VLLM_",
    "CUDA_",
    "NCCL_",
    "HF_",
    "HUGGING_FACE_",
    "TRANSFORMERS_",
    "TORCH_",
    "PYTORCH_",
    "OMP_",
    "UCX_",
];

/// Why a served stack could not be started or did not get ready.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("--serve needs a command after `--`, e.g. `--serve -- vllm serve MODEL`")]
    NoCommand,
    #[error("cannot create the stack's log {path}: {source}")]
    Log { path: PathBuf, source: io::Error },
    #[error("cannot start the stack `{program}`: {source}")]
    Spawn { program: String, source: io::Error },
    #[error(
        "the stack exited before it was ready ({status}); its log is {log}, ending:\n{tail}",
        log = log.display()
    )]
    ExitedBeforeReady {
        status: String,
        log: PathBuf,
        tail: String,
    },
    #[error(
        "the stack was not ready within {timeout} ({last}); it was stopped; its log is {log}, ending:\n{tail}",
        timeout = humantime::format_duration(*timeout),
        log = log.display()
    )]
    NotReady {
        timeout: Duration,
        last: String,
        log: PathBuf,
        tail: String,
    },
}

/// How to serve the stack.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// The command and its args.
    pub command: Vec<String>,
    /// The stack's base URL.
    pub base_url: String,
    pub ready_path: String,
    pub ready_timeout: Duration,
    pub health_failures: u32,
    pub keep: bool,
    /// Where the log starts out (`--output`), until the run's directory exists.
    pub log_dir: PathBuf,
}

/// The base URL of a stack started with `command`: `http://127.0.0.1:PORT` with the port its `--port N` (or
/// `--port=N`) names, else vLLM's default 8000; a `--host` other than an unspecified address (0.0.0.0, ::) is used
/// instead of loopback.
pub fn serve_endpoint(command: &[String]) -> String {
    let value_of = |flag: &str| {
        let prefixed = format!("{flag}=");
        command.iter().enumerate().find_map(|(i, arg)| {
            if arg == flag {
                command.get(i + 1).cloned()
            } else {
                arg.strip_prefix(&prefixed).map(str::to_owned)
            }
        })
    };
    let port = value_of("--port")
        .and_then(|p| p.parse::<u16>().ok())
        .unwrap_or(VLLM_DEFAULT_PORT);
    let host = value_of("--host")
        .filter(|h| !matches!(h.as_str(), "" | "0.0.0.0" | "::" | "[::]"))
        .unwrap_or_else(|| "127.0.0.1".to_owned());
    let host = if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host
    };
    format!("http://{host}:{port}")
}

/// The environment recorded with a served stack: the variables whose names start with one of
/// [`RECORDED_ENV_PREFIXES`] (secret-looking values are redacted by [`StackSpec::new`]).
pub(crate) fn recorded_env(
    vars: impl IntoIterator<Item = (String, String)>,
) -> BTreeMap<String, String> {
    vars.into_iter()
        .filter(|(name, _)| RECORDED_ENV_PREFIXES.iter().any(|p| name.starts_with(p)))
        .collect()
}

/// The last `n` lines of `bytes` (a log's end, which may start mid-line: that partial first line is dropped unless
/// it is all there is), lossily decoded.
pub fn tail_lines(bytes: &[u8], n: usize, starts_mid_line: bool) -> Vec<String> {
    let text = String::from_utf8_lossy(bytes);
    let mut lines: Vec<&str> = text.lines().collect();
    if starts_mid_line && lines.len() > 1 {
        lines.remove(0);
    }
    let skip = lines.len().saturating_sub(n);
    lines[skip..].iter().map(|l| (*l).to_owned()).collect()
}

/// A stack this launcher started.
#[derive(Debug)]
pub struct Served {
    options: ServeOptions,
    pid: u32,
    /// The exit status, once the process has exited.
    exited: watch::Receiver<Option<String>>,
    /// The log, open for reading its tail whatever its path.
    log: File,
    log_path: Mutex<PathBuf>,
    env: BTreeMap<String, String>,
    /// Set once the run's own signal handling is in place.
    run_owns_signals: AtomicBool,
}

impl Served {
    /// Starts the stack and waits until it is ready; on failure it is stopped again.
    pub async fn start(options: ServeOptions) -> Result<Arc<Served>, ServeError> {
        let Some((program, args)) = options.command.split_first() else {
            return Err(ServeError::NoCommand);
        };
        std::fs::create_dir_all(&options.log_dir).map_err(|source| ServeError::Log {
            path: options.log_dir.clone(),
            source,
        })?;
        let log_path = options.log_dir.join(format!(
            "stack-{}-{}.log",
            llmbench_model::wallclock::compact_utc_now(),
            std::process::id()
        ));
        let open_log = || {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .read(true)
                .open(&log_path)
                .map_err(|source| ServeError::Log {
                    path: log_path.clone(),
                    source,
                })
        };
        let log = open_log()?;
        let (stdout, stderr) = (open_log()?, open_log()?);
        let mut command = tokio::process::Command::new(program);
        command
            .args(args)
            .stdin(std::process::Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            // --serve-keep leaves it running after the launcher exits.
            .kill_on_drop(false);
        #[cfg(unix)]
        command.process_group(0);
        let mut child = command.spawn().map_err(|source| ServeError::Spawn {
            program: program.clone(),
            source,
        })?;
        let pid = child.id().unwrap_or_default();
        tracing::info!(
            pid,
            command = options.command.join(" "),
            log = %log_path.display(),
            "started the stack"
        );
        let (exit_tx, exited) = watch::channel(None);
        tokio::spawn(async move {
            let status = match child.wait().await {
                Ok(status) => status.to_string(),
                Err(e) => format!("cannot wait for it: {e}"),
            };
            exit_tx.send_replace(Some(status));
        });
        let served = Arc::new(Served {
            env: recorded_env(std::env::vars()),
            options,
            pid,
            exited,
            log,
            log_path: Mutex::new(log_path),
            run_owns_signals: AtomicBool::new(false),
        });
        served.guard_signals();
        match served.wait_ready().await {
            Ok(()) => Ok(served),
            Err(e) => {
                served.terminate().await;
                Err(e)
            }
        }
    }

    /// Until the run watches SIGINT and SIGTERM itself ([`Served::hand_signals_to_the_run`]), a signal stops the
    /// stack (unless `--serve-keep`) and ends the launcher with the shell's code for it (130, 143): the stack is
    /// in a process group of its own, so it would outlive a launcher killed while it waited for the stack to load
    /// its weights or built its prompts. Once the run has the signals, an interrupt is the run's, as without
    /// `--serve`.
    fn guard_signals(self: &Arc<Self>) {
        use tokio::signal::unix::{SignalKind, signal};
        let served = Arc::downgrade(self);
        tokio::spawn(async move {
            let (Ok(mut term), Ok(mut int)) = (
                signal(SignalKind::terminate()),
                signal(SignalKind::interrupt()),
            ) else {
                tracing::warn!("cannot watch SIGTERM and SIGINT while the stack starts");
                return;
            };
            loop {
                let code = tokio::select! {
                    Some(()) = term.recv() => 143,
                    Some(()) = int.recv() => 130,
                    else => return,
                };
                let Some(served) = served.upgrade() else {
                    return;
                };
                if served.run_owns_signals.load(Ordering::Acquire) {
                    continue;
                }
                tracing::warn!("interrupted before the run started; stopping the stack");
                served.stop().await;
                std::process::exit(code);
            }
        });
    }

    /// The run watches the signals from now on (see [`Served::guard_signals`]).
    pub fn hand_signals_to_the_run(&self) {
        self.run_owns_signals.store(true, Ordering::Release);
    }

    /// Polls the readiness path, then `/v1/models`, until both answer 200.
    async fn wait_ready(&self) -> Result<(), ServeError> {
        let started = Instant::now();
        let client = health_client()?;
        let ready_url = super::join_url(&self.options.base_url, &self.options.ready_path);
        let models_url = super::join_url(&self.options.base_url, "/v1/models");
        let mut last = "no answer yet".to_owned();
        loop {
            if let Some(status) = self.exit_status() {
                return Err(ServeError::ExitedBeforeReady {
                    status,
                    log: self.log_path(),
                    tail: self.log_tail().join("\n"),
                });
            }
            if started.elapsed() >= self.options.ready_timeout {
                return Err(ServeError::NotReady {
                    timeout: self.options.ready_timeout,
                    last,
                    log: self.log_path(),
                    tail: self.log_tail().join("\n"),
                });
            }
            match check(&client, &ready_url).await {
                Ok(()) => match check(&client, &models_url).await {
                    Ok(()) => {
                        tracing::info!(
                            after = %humantime::format_duration(Duration::from_millis(
                                started.elapsed().as_millis() as u64
                            )),
                            "the stack is ready"
                        );
                        return Ok(());
                    }
                    Err(e) => last = e,
                },
                Err(e) => last = e,
            }
            let mut exited = self.exited.clone();
            tokio::select! {
                () = tokio::time::sleep(READY_POLL_INTERVAL) => {}
                _ = exited.changed() => {}
            }
        }
    }

    /// The first model the stack lists at `/v1/models`: what requests name when `--model` does not say.
    pub async fn served_model(&self) -> Option<String> {
        let client = health_client().ok()?;
        let url = super::join_url(&self.options.base_url, "/v1/models");
        let body: serde_json::Value = client.get(&url).send().await.ok()?.json().await.ok()?;
        super::first_model_id(&body)
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    pub fn base_url(&self) -> &str {
        &self.options.base_url
    }

    /// The exit status, once it has exited.
    pub fn exit_status(&self) -> Option<String> {
        self.exited.borrow().clone()
    }

    pub fn log_path(&self) -> PathBuf {
        self.log_path
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The log's last [`LOG_TAIL_LINES`] lines.
    pub fn log_tail(&self) -> Vec<String> {
        read_tail(&self.log).unwrap_or_else(|e| vec![format!("(cannot read the stack's log: {e})")])
    }

    /// The record of how it was started (run.json's `stack`).
    pub fn spec(&self) -> StackSpec {
        let (command, args) = self
            .options
            .command
            .split_at(1.min(self.options.command.len()));
        StackSpec::new(
            StackSource::Serve,
            StackInfo::new(None, command.to_vec(), args.to_vec(), self.env.clone()),
        )
    }

    /// Moves the log into the run's directory as `stack.log` (the stack goes on writing to it) and writes
    /// `stack.pid` beside it. A failure is a warning: the run does not depend on it.
    pub fn attach(&self, dir: &Path) {
        let target = dir.join(STACK_LOG_FILE);
        let mut path = self.log_path.lock().unwrap_or_else(PoisonError::into_inner);
        match std::fs::rename(&*path, &target) {
            Ok(()) => *path = target,
            Err(e) => tracing::warn!(
                from = %path.display(),
                to = %target.display(),
                error = %e,
                "cannot move the stack's log into the results directory; it stays where it is"
            ),
        }
        let pid_path = dir.join(STACK_PID_FILE);
        if let Err(e) = std::fs::write(&pid_path, format!("{}\n", self.pid)) {
            tracing::warn!(path = %pid_path.display(), error = %e, "cannot write the stack's pid");
        }
    }

    /// Watches the stack during the run: see the module's heartbeat. Dropping or [`Heartbeat::finish`]ing the
    /// returned heartbeat ends the watch (before the stack is stopped on purpose).
    pub fn watch(self: &Arc<Self>, control: Control, grace: Duration) -> Heartbeat {
        let failure: Arc<Mutex<Option<StackFailure>>> = Arc::default();
        let served = Arc::clone(self);
        let slot = Arc::clone(&failure);
        let task = tokio::spawn(async move {
            let Some(found) = served.heartbeat().await else {
                return;
            };
            tracing::error!(
                reason = found.reason,
                log = %served.log_path().display(),
                "the stack failed; stopping the run (what was measured is kept)\n{}",
                found.log_tail.join("\n")
            );
            *slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(found);
            control.stop_after(StopReason::StackFailed, grace);
        });
        Heartbeat { task, failure }
    }

    /// Runs until the stack fails, and says how.
    async fn heartbeat(&self) -> Option<StackFailure> {
        let client = health_client().ok()?;
        let url = super::join_url(&self.options.base_url, &self.options.ready_path);
        let limit = self.options.health_failures.max(1);
        let mut failed = 0u32;
        let mut last = String::new();
        let mut exited = self.exited.clone();
        loop {
            if let Some(status) = self.exit_status() {
                return Some(StackFailure {
                    reason: format!("the stack exited ({status})"),
                    exit_status: Some(status),
                    log_tail: self.log_tail(),
                });
            }
            if failed >= limit {
                return Some(StackFailure {
                    reason: format!(
                        "{failed} consecutive health checks of {url} failed (the last: {last})"
                    ),
                    exit_status: None,
                    log_tail: self.log_tail(),
                });
            }
            tokio::select! {
                () = tokio::time::sleep(HEARTBEAT_INTERVAL) => {}
                _ = exited.changed() => continue,
            }
            match check(&client, &url).await {
                Ok(()) => failed = 0,
                Err(e) => {
                    failed += 1;
                    tracing::warn!(url, error = e, failed, "a health check of the stack failed");
                    last = e;
                }
            }
        }
    }

    /// Stops the stack unless `--serve-keep`: SIGTERM, then SIGKILL to its process group after [`STOP_GRACE`].
    pub async fn stop(&self) {
        if self.options.keep {
            tracing::info!(
                pid = self.pid,
                url = self.options.base_url,
                "--serve-keep: the stack keeps running"
            );
            return;
        }
        self.terminate().await;
    }

    async fn terminate(&self) {
        if self.exit_status().is_some() {
            return;
        }
        signal(self.pid, Stop::Term);
        let termed = tokio::time::Instant::now();
        let mut exited = self.exited.clone();
        let gone = tokio::time::timeout(STOP_GRACE, exited.wait_for(Option::is_some))
            .await
            .is_ok();
        // The rest of the group (vLLM's workers) gets what is left of the grace to follow its leader.
        while gone && group_alive(self.pid) && termed.elapsed() < STOP_GRACE {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        if !gone {
            tracing::warn!(
                pid = self.pid,
                grace = %humantime::format_duration(STOP_GRACE),
                "the stack did not stop on SIGTERM; killing it"
            );
            signal(self.pid, Stop::Kill);
            let _ = tokio::time::timeout(STOP_GRACE, exited.wait_for(Option::is_some)).await;
        } else if group_alive(self.pid) {
            // The leader is gone but processes it forked still run after the grace (children that ignore
            // SIGTERM): nothing of the stack may outlive the run.
            tracing::warn!(
                pid = self.pid,
                "processes of the stack's group outlived its leader; killing them"
            );
            signal(self.pid, Stop::Kill);
        }
        match self.exit_status() {
            Some(status) => tracing::info!(pid = self.pid, %status, "the stack stopped"),
            None => tracing::warn!(pid = self.pid, "the stack may still be running"),
        }
    }
}

/// The heartbeat of a run's stack.
#[derive(Debug)]
pub struct Heartbeat {
    task: tokio::task::JoinHandle<()>,
    failure: Arc<Mutex<Option<StackFailure>>>,
}

impl Heartbeat {
    /// Ends the watch and says how the stack failed, if it did.
    pub fn finish(self) -> Option<StackFailure> {
        self.task.abort();
        self.failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[derive(Debug, Clone, Copy)]
enum Stop {
    Term,
    Kill,
}

/// SIGTERM, then SIGKILL, to the stack's whole process group (its id is the leader's pid, `process_group(0)`):
/// whatever the stack's command forked — a launcher script's server, vLLM's workers — is signalled with it.
#[cfg(target_os = "linux")]
fn signal(pid: u32, stop: Stop) {
    use nix::sys::signal::{Signal, killpg};
    use nix::unistd::Pid;
    let Ok(raw) = i32::try_from(pid) else {
        return;
    };
    let pid = Pid::from_raw(raw);
    let sent = match stop {
        Stop::Term => killpg(pid, Signal::SIGTERM),
        Stop::Kill => killpg(pid, Signal::SIGKILL),
    };
    if let Err(e) = sent {
        tracing::debug!(%pid, error = %e, "cannot signal the stack (it may be gone)");
    }
}

/// Whether any process of the stack's group is still there.
#[cfg(target_os = "linux")]
fn group_alive(pid: u32) -> bool {
    let Ok(raw) = i32::try_from(pid) else {
        return false;
    };
    nix::sys::signal::killpg(nix::unistd::Pid::from_raw(raw), None).is_ok()
}

#[cfg(not(target_os = "linux"))]
fn group_alive(_pid: u32) -> bool {
    false
}

#[cfg(not(target_os = "linux"))]
fn signal(pid: u32, stop: Stop) {
    let name = match stop {
        Stop::Term => "-TERM",
        Stop::Kill => "-KILL",
    };
    if let Err(e) = std::process::Command::new("kill")
        .args([name, &pid.to_string()])
        .status()
    {
        tracing::debug!(pid, error = %e, "cannot signal the stack");
    }
}

fn health_client() -> Result<reqwest::Client, ServeError> {
    reqwest::Client::builder()
        .timeout(HEALTH_TIMEOUT)
        .connect_timeout(HEALTH_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .build()
        .map_err(|e| ServeError::Spawn {
            program: "(the health check's HTTP client)".to_owned(),
            source: io::Error::other(e),
        })
}

/// `GET url` answered 200, or why not.
async fn check(client: &reqwest::Client, url: &str) -> Result<(), String> {
    match client.get(url).send().await {
        Ok(response) if response.status() == reqwest::StatusCode::OK => Ok(()),
        Ok(response) => Err(format!("{url}: HTTP {}", response.status().as_u16())),
        Err(e) => Err(format!("{url}: {}", super::error_chain(&e))),
    }
}

/// The last lines of the log, read through its open handle (its path changes when it moves).
fn read_tail(log: &File) -> io::Result<Vec<String>> {
    use std::os::unix::fs::FileExt;
    let len = log.metadata()?.len();
    let start = len.saturating_sub(LOG_TAIL_BYTES);
    let mut bytes = vec![0u8; usize::try_from(len - start).unwrap_or(0)];
    let mut read = 0;
    while read < bytes.len() {
        let n = log.read_at(&mut bytes[read..], start + read as u64)?;
        if n == 0 {
            break;
        }
        read += n;
    }
    bytes.truncate(read);
    Ok(tail_lines(&bytes, LOG_TAIL_LINES, start > 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn the_endpoint_follows_the_commands_port_and_host() {
        assert_eq!(
            serve_endpoint(&argv("vllm serve m")),
            "http://127.0.0.1:8000"
        );
        assert_eq!(
            serve_endpoint(&argv("vllm serve m --port 8123")),
            "http://127.0.0.1:8123"
        );
        assert_eq!(
            serve_endpoint(&argv("llmbench sim --port=9001 --host 0.0.0.0")),
            "http://127.0.0.1:9001"
        );
        assert_eq!(
            serve_endpoint(&argv("vllm serve m --host 10.0.0.5 --port 80")),
            "http://10.0.0.5:80"
        );
        assert_eq!(
            serve_endpoint(&argv("x --host ::1 --port 7")),
            "http://[::1]:7"
        );
        // A port that is no number leaves vLLM's default.
        assert_eq!(
            serve_endpoint(&argv("x --port auto")),
            "http://127.0.0.1:8000"
        );
    }

    #[test]
    fn only_engine_variables_are_recorded() {
        let vars = [
            ("VLLM_LOGGING_LEVEL", "DEBUG"),
            ("CUDA_VISIBLE_DEVICES", "0"),
            ("HF_TOKEN", "hf_x"),
            ("HOME", "/root"),
            ("AWS_SECRET_ACCESS_KEY", "s"),
            ("PATH", "/bin"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()));
        let env = recorded_env(vars);
        assert_eq!(
            env.keys().map(String::as_str).collect::<Vec<_>>(),
            ["CUDA_VISIBLE_DEVICES", "HF_TOKEN", "VLLM_LOGGING_LEVEL"]
        );
        // …and HF_TOKEN's value never reaches the record.
        let spec = StackSpec::new(
            StackSource::Serve,
            StackInfo {
                env,
                ..StackInfo::default()
            },
        );
        assert_eq!(spec.info.env["HF_TOKEN"], super::super::REDACTED);
    }

    #[test]
    fn the_tail_is_the_last_whole_lines() {
        let log = b"one\ntwo\nthree\nfour\n";
        assert_eq!(tail_lines(log, 2, false), ["three", "four"]);
        assert_eq!(tail_lines(log, 10, false).len(), 4);
        // Read from mid-line: the partial first line goes.
        assert_eq!(tail_lines(b"ne\ntwo\nthree", 10, true), ["two", "three"]);
        assert_eq!(tail_lines(b"only part", 10, true), ["only part"]);
        assert!(tail_lines(b"", 10, false).is_empty());
    }

    fn options(command: &str, dir: &Path, timeout: Duration) -> ServeOptions {
        ServeOptions {
            command: argv(command),
            base_url: "http://127.0.0.1:9".to_owned(),
            ready_path: "/health".to_owned(),
            ready_timeout: timeout,
            health_failures: DEFAULT_HEALTH_FAILURES,
            keep: false,
            log_dir: dir.to_owned(),
        }
    }

    #[tokio::test]
    async fn a_stack_that_exits_before_it_is_ready_fails_with_its_status_and_log_tail() {
        let tmp = tempfile::tempdir().expect("tmp");
        let mut options = options("sh -c", tmp.path(), Duration::from_secs(30));
        options
            .command
            .push("echo booting; echo no GPU >&2; exit 3".to_owned());
        let err = Served::start(options).await.expect_err("exits");
        let text = err.to_string();
        assert!(
            matches!(err, ServeError::ExitedBeforeReady { .. }),
            "{text}"
        );
        assert!(text.contains("exit status: 3"), "{text}");
        assert!(text.contains("booting\nno GPU"), "{text}");
    }

    #[tokio::test]
    async fn a_stack_that_never_gets_ready_is_stopped_at_the_timeout() {
        let tmp = tempfile::tempdir().expect("tmp");
        let err = Served::start(options("sleep 30", tmp.path(), Duration::from_millis(600)))
            .await
            .expect_err("not ready");
        assert!(matches!(err, ServeError::NotReady { .. }), "{err}");
        assert!(err.to_string().contains("127.0.0.1:9/health"), "{err}");
    }

    /// A stack whose process lives on but whose health check starts failing: the heartbeat stops the run after
    /// `health_failures` consecutive failures (3 here, a second apart), with the stack-failed reason.
    #[tokio::test]
    async fn consecutive_failed_health_checks_stop_the_run_as_a_stack_failure() {
        use std::sync::atomic::AtomicBool;
        let healthy = Arc::new(AtomicBool::new(true));
        let flag = Arc::clone(&healthy);
        let app = axum::Router::new()
            .route(
                "/health",
                axum::routing::get(move || {
                    let ok = flag.load(Ordering::Relaxed);
                    async move {
                        if ok {
                            axum::http::StatusCode::OK
                        } else {
                            axum::http::StatusCode::SERVICE_UNAVAILABLE
                        }
                    }
                }),
            )
            .route(
                "/v1/models",
                axum::routing::get(|| async { r#"{"data":[{"id":"m"}]}"# }),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let base_url = format!("http://{}", listener.local_addr().expect("addr"));
        tokio::spawn(async move { axum::serve(listener, app).await });
        let tmp = tempfile::tempdir().expect("tmp");
        let mut options = options("sleep 60", tmp.path(), Duration::from_secs(10));
        options.base_url = base_url;
        let served = Served::start(options).await.expect("ready");
        assert_eq!(served.served_model().await.as_deref(), Some("m"));
        let control = Control::default();
        let heartbeat = served.watch(control.clone(), Duration::from_millis(10));
        // Healthy: two seconds of checks change nothing.
        tokio::time::sleep(Duration::from_millis(2_100)).await;
        assert_eq!(control.reason(), None);
        healthy.store(false, Ordering::Relaxed);
        let deadline = Instant::now() + Duration::from_secs(10);
        while control.reason().is_none() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(control.reason(), Some(StopReason::StackFailed));
        let failure = heartbeat.finish().expect("a failure");
        assert!(
            failure.reason.starts_with("3 consecutive health checks"),
            "{failure:?}"
        );
        assert!(failure.reason.contains("HTTP 503"), "{failure:?}");
        assert_eq!(failure.exit_status, None);
        served.stop().await;
        assert!(served.exit_status().is_some(), "the stack was stopped");
    }

    #[tokio::test]
    async fn a_command_that_cannot_start_is_named() {
        let tmp = tempfile::tempdir().expect("tmp");
        let err = Served::start(options(
            "/nonexistent/vllm serve",
            tmp.path(),
            Duration::from_secs(1),
        ))
        .await
        .expect_err("no such program");
        assert!(err.to_string().contains("`/nonexistent/vllm`"), "{err}");
        let err = Served::start(options("", tmp.path(), Duration::from_secs(1)))
            .await
            .expect_err("empty");
        assert!(matches!(err, ServeError::NoCommand));
    }
}
