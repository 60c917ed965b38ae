//! What the binary's end-to-end tests share: starting `llmbench`, running a profile, reading its files. Each test
//! binary uses a subset.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

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
