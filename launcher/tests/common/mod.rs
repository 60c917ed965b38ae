//! What the binary's end-to-end tests share: starting `llmbench`, running a profile, reading its files. Each test
//! binary uses a subset.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The `llmbench` binary under test, quiet, and never through a proxy.
pub fn llmbench() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_llmbench"));
    command.env("RUST_LOG", "warn").env_remove("HTTP_PROXY");
    command
}

/// `llmbench run --harness HARNESS --profile PROFILE --run-id ID --output DIR EXTRA…`, run to its end.
pub fn run_profile(
    dir: &Path,
    harness: &str,
    profile: impl AsRef<std::ffi::OsStr>,
    run_id: &str,
    extra: &[&str],
) -> Output {
    llmbench()
        .args(["run", "--harness", harness, "--profile"])
        .arg(profile)
        .args(["--run-id", run_id, "--output"])
        .arg(dir)
        .args(extra)
        .output()
        .expect("runs")
}

pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write fixture");
    path
}

pub fn json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Asserts the command succeeded, showing its output when it did not.
pub fn succeeded(output: &Output) {
    assert!(
        output.status.success(),
        "status {:?}\nstdout: {}\nstderr: {}",
        output.status,
        stdout(output),
        stderr(output)
    );
}

/// The body of the next HTTP/1.1 request on `reader` (by its `content-length`), for the tests' bare servers;
/// `None` once the client has closed the connection or the body is cut short.
pub fn read_request(reader: &mut impl std::io::BufRead) -> Option<Vec<u8>> {
    let mut length = 0usize;
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return None;
        }
        if line == "\r\n" {
            break;
        }
        if let Some(v) = line
            .to_ascii_lowercase()
            .strip_prefix("content-length:")
            .map(str::trim)
            .and_then(|v| v.parse().ok())
        {
            length = v;
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(body)
}

/// `llmbench sim --port PORT ARGS…` on a free port, owned at once so it is killed (on drop) even when the test
/// panics while it starts.
pub struct SimProcess {
    child: Child,
    pub port: u16,
    pub url: String,
}

impl SimProcess {
    /// Starts the simulator with `args` after `--port` and waits until it accepts connections (20 s at most: a
    /// bound for a loaded machine, not a timing).
    pub fn start(args: &[&str]) -> SimProcess {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let child = llmbench()
            .args(["sim", "--port", &port.to_string()])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starts the simulator");
        let sim = SimProcess {
            child,
            port,
            url: format!("http://127.0.0.1:{port}"),
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "the simulator did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        sim
    }

    /// Kills the simulator now (a server that dies mid-run).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for SimProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A real llama.cpp `llama-server` serving the tiny model, on a free port, killed on drop (however the test ends).
/// Tests against it are gated on `LLMBENCH_LLAMA_SERVER` (the binary), `LLMBENCH_LLAMA_MODEL` (the GGUF) and
/// `LLMBENCH_LLAMA_TOKENIZER` (its tokenizer.json), which `make test` sets.
pub struct LlamaServer {
    child: Child,
    pub endpoint: String,
    /// The model file, as given to `-m`: the name the server answers with (it has no `--alias`).
    pub model: PathBuf,
    pub tokenizer: PathBuf,
}

impl LlamaServer {
    /// Starts the server (4 slots of 1024 tokens, metrics on) and waits until `/health` answers 200 — or, when the
    /// variables are not all set, says so and returns None, so the test passes without one.
    pub fn start(test: &str) -> Option<LlamaServer> {
        let var = |name| {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let (Some(binary), Some(model), Some(tokenizer)) = (
            var("LLMBENCH_LLAMA_SERVER"),
            var("LLMBENCH_LLAMA_MODEL"),
            var("LLMBENCH_LLAMA_TOKENIZER"),
        ) else {
            eprintln!(
                "skipping {test}: set LLMBENCH_LLAMA_SERVER, LLMBENCH_LLAMA_MODEL and LLMBENCH_LLAMA_TOKENIZER to \
                 run against a real llama-server"
            );
            return None;
        };
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let child = Command::new(&binary)
            .arg("-m")
            .arg(&model)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["-c", "4096", "-np", "4", "--metrics"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("llama-server starts");
        let server = LlamaServer {
            child,
            endpoint: format!("http://127.0.0.1:{port}"),
            model,
            tokenizer,
        };
        // Loading the model: wait for /health, as a deployment's readiness probe would (60 s at most: a bound for
        // a loaded machine, not a timing).
        let health = format!("{}/health", server.endpoint);
        let deadline = Instant::now() + Duration::from_secs(60);
        while http_status(&health) != Some(200) {
            assert!(
                Instant::now() < deadline,
                "llama-server did not become ready on {}",
                server.endpoint
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        Some(server)
    }

    /// The name the server gives its model.
    pub fn model_name(&self) -> String {
        self.model.display().to_string()
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The HTTP status of a GET, or None when nothing answers.
pub fn http_status(url: &str) -> Option<u16> {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://")?;
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    let mut stream = std::net::TcpStream::connect(host).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(
        stream,
        "GET /{path} HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\n\r\n"
    )
    .ok()?;
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
}
