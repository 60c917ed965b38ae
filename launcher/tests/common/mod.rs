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
