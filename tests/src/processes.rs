//! The processes an end-to-end test starts besides the control plane: our own binaries as `cargo test` built
//! them, and llm-d-inference-sim or our own `llmbench sim` as the stack under load.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};

use crate::control_plane::{HarnessError, Tool, Tools};

/// Why a test process could not be found or started.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    #[error(
        "{name} is not built at {path}: run the tests through `make test` or `cargo test --workspace --all-targets`, \
         which build the workspace's binaries first (or `cargo build --bins` before `cargo test -p llmbench-e2e`)"
    )]
    BinaryMissing { name: String, path: PathBuf },
    #[error("cannot tell where cargo put the test binaries: {0}")]
    NoTargetDir(std::io::Error),
    #[error(transparent)]
    Tool(#[from] HarnessError),
    #[error("starting {what}: {source}")]
    Spawn {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{what} did not answer on {url} within {waited:?}; its log ends with:\n{log_tail}")]
    NotReady {
        what: String,
        url: String,
        waited: Duration,
        log_tail: String,
    },
    #[error("no free loopback port: {0}")]
    Port(std::io::Error),
}

/// A binary of this workspace (`llmbench`, `llmbench-operator`) from the target directory this test runs from.
pub fn workspace_binary(name: &str) -> Result<PathBuf, ProcessError> {
    let exe = std::env::current_exe().map_err(ProcessError::NoTargetDir)?;
    // Test executables live in <target>/<profile>/deps/; the workspace's binaries one level up.
    let profile_dir = exe.parent().and_then(Path::parent).ok_or_else(|| {
        ProcessError::NoTargetDir(std::io::Error::other(format!(
            "{} has no grandparent",
            exe.display()
        )))
    })?;
    let path = profile_dir.join(name);
    if path.is_file() {
        Ok(path)
    } else {
        Err(ProcessError::BinaryMissing {
            name: name.to_owned(),
            path,
        })
    }
}

/// A loopback port nobody listens on right now.
pub fn free_port() -> Result<u16, ProcessError> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(ProcessError::Port)?;
    Ok(listener.local_addr().map_err(ProcessError::Port)?.port())
}

/// A simulator process on a loopback port, killed when dropped.
struct SimProcess {
    child: Child,
    base_url: String,
    _log_dir: tempfile::TempDir,
}

impl SimProcess {
    /// Starts `binary ARGS… --port <free port>` (its log in a temporary directory) and waits until it answers
    /// `/v1/models`; `what` names it in errors.
    async fn start(
        what: &str,
        binary: &std::path::Path,
        args: &[&str],
    ) -> Result<Self, ProcessError> {
        let port = free_port()?;
        let log_dir = tempfile::tempdir().map_err(|source| ProcessError::Spawn {
            what: format!("a log directory for {what}"),
            source,
        })?;
        let log_path = log_dir.path().join("sim.log");
        let spawn_err = |source| ProcessError::Spawn {
            what: what.to_owned(),
            source,
        };
        let log = std::fs::File::create(&log_path).map_err(spawn_err)?;
        let log_err = log.try_clone().map_err(spawn_err)?;
        let child = Command::new(binary)
            .args(args)
            .args(["--port", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .kill_on_drop(true)
            .spawn()
            .map_err(spawn_err)?;
        let sim = Self {
            child,
            base_url: format!("http://127.0.0.1:{port}"),
            _log_dir: log_dir,
        };
        let waited = Duration::from_secs(30);
        let deadline = Instant::now() + waited;
        while Instant::now() < deadline {
            if http_status(port, "/v1/models").await == Some(200) {
                return Ok(sim);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let log = std::fs::read_to_string(&log_path).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(20).collect();
        Err(ProcessError::NotReady {
            what: what.to_owned(),
            url: format!("{}/v1/models", sim.base_url),
            waited,
            log_tail: tail.into_iter().rev().collect::<Vec<_>>().join("\n"),
        })
    }
}

impl Drop for SimProcess {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

/// llm-d-inference-sim on a loopback port, killed when dropped.
pub struct InferenceSim(SimProcess);

impl InferenceSim {
    /// Start the simulator serving `model` with the dummy tokenizer (no model download), plus `extra` flags such as
    /// latencies or `--max-num-seqs`.
    pub async fn start(model: &str, extra: &[&str]) -> Result<Self, ProcessError> {
        let binary = Tools::from_env()?.path(Tool::LlmDInferenceSim)?;
        let mut args = vec!["--model", model, "--force-dummy-tokenizer"];
        args.extend_from_slice(extra);
        SimProcess::start("llm-d-inference-sim", &binary, &args)
            .await
            .map(Self)
    }

    /// `http://127.0.0.1:<port>`.
    pub fn base_url(&self) -> &str {
        &self.0.base_url
    }
}

/// `llmbench sim` (the embedded vLLM-compatible simulator of our own binary) on a loopback port, killed when
/// dropped.
pub struct LlmbenchSim(SimProcess);

impl LlmbenchSim {
    /// Start the simulator serving `model`, plus `extra` flags such as `--ttft 5ms`.
    pub async fn start(model: &str, extra: &[&str]) -> Result<Self, ProcessError> {
        let binary = workspace_binary("llmbench")?;
        let mut args = vec!["sim", "--model", model];
        args.extend_from_slice(extra);
        SimProcess::start("llmbench sim", &binary, &args)
            .await
            .map(Self)
    }

    /// `http://127.0.0.1:<port>`.
    pub fn base_url(&self) -> &str {
        &self.0.base_url
    }
}

/// The status code of `GET path` on a loopback port, or None when nothing answers.
async fn http_status(port: u16, path: &str) -> Option<u16> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).await.ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut head = [0u8; 32];
    let n = stream.read(&mut head).await.ok()?;
    let line = std::str::from_utf8(&head[..n]).ok()?;
    line.split_whitespace().nth(1)?.parse().ok()
}
