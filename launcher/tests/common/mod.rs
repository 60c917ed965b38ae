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
    read_whole_request(reader).map(|request| request.body)
}

/// One HTTP/1.1 request as a bare server read it: its request line, headers (names lowercased, values trimmed) and
/// body.
pub struct WireRequest {
    pub line: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl WireRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// The next HTTP/1.1 request on `reader` (its body by `content-length`); `None` once the client has closed the
/// connection or the body is cut short.
pub fn read_whole_request(reader: &mut impl std::io::BufRead) -> Option<WireRequest> {
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
        return None;
    }
    let mut headers = Vec::new();
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return None;
        }
        if line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            headers.push((name.to_ascii_lowercase(), value.trim().to_owned()));
        }
    }
    let length = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0usize);
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(WireRequest {
        line: request_line.trim_end().to_owned(),
        headers,
        body,
    })
}

/// A bare server on a free port that keeps every POST it reads and answers each request (POST or not: the
/// server-metrics scrape is a GET) with the whole HTTP response `answer` writes for it. Returns its base URL and
/// what it kept, in arrival order.
pub fn capturing_server(
    answer: fn(&WireRequest) -> String,
) -> (String, std::sync::Arc<std::sync::Mutex<Vec<WireRequest>>>) {
    use std::io::Write as _;
    use std::sync::{Arc, Mutex};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let kept = Arc::clone(&seen);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let seen = Arc::clone(&kept);
            std::thread::spawn(move || {
                let mut writer = stream.try_clone().expect("clone");
                let mut reader = std::io::BufReader::new(stream);
                while let Some(request) = read_whole_request(&mut reader) {
                    let response = answer(&request);
                    if request.line.starts_with("POST ") {
                        seen.lock().expect("lock").push(request);
                    }
                    if writer.write_all(response.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (url, seen)
}

/// A streamed answer to `request`: one chunk of `text` (a chat delta when the body has `messages`, else a
/// completion's text) ending with `finish`, a usage chunk of 4 prompt and `completion_tokens` tokens, `[DONE]`.
pub fn streamed_text(
    request: &WireRequest,
    text: &str,
    finish: &str,
    completion_tokens: u32,
) -> String {
    let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
    let chunk = if body.get("messages").is_some() {
        serde_json::json!({"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": finish}]})
    } else {
        serde_json::json!({"choices": [{"index": 0, "text": text, "finish_reason": finish}]})
    };
    let usage = serde_json::json!({"choices": [],
                                   "usage": {"prompt_tokens": 4, "completion_tokens": completion_tokens}});
    ok_response(
        "text/event-stream",
        &format!("data: {chunk}\n\ndata: {usage}\n\ndata: [DONE]\n\n"),
    )
}

/// A `200 OK` response of `content_type` carrying `body`.
pub fn ok_response(content_type: &str, body: &str) -> String {
    format!(
        "HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// `llmbench sim --port PORT ARGS…` on a free port, owned at once so it is killed (on drop) even when the test
/// panics while it starts.
pub struct SimProcess {
    child: Child,
    pub port: u16,
    pub url: String,
}

impl SimProcess {
    /// Starts the simulator with `args` on a port it picks itself (`--port 0`) and reads the address it logs, so
    /// no other test can take the port between its choice and the bind (20 s at most: a bound for a loaded
    /// machine, not a timing).
    pub fn start(args: &[&str]) -> SimProcess {
        use std::io::BufRead as _;
        let mut child = llmbench()
            .args(["sim", "--port", "0", "--log-format", "text"])
            .args(args)
            // The one line that names the address is at info.
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starts the simulator");
        let stderr = child.stderr.take().expect("the simulator's stderr");
        let (found, address) = std::sync::mpsc::channel();
        // Reads the log until the address, then drains it so the simulator never blocks on a full pipe.
        std::thread::spawn(move || {
            let mut sent = false;
            for line in std::io::BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if !sent
                    && let Some(rest) = line.split("listening address=").nth(1)
                    && let Some(addr) = rest.split_whitespace().next()
                {
                    let _ = found.send(addr.to_owned());
                    sent = true;
                }
            }
        });
        let mut sim = SimProcess {
            child,
            port: 0,
            url: String::new(),
        };
        let address = address
            .recv_timeout(Duration::from_secs(20))
            .expect("the simulator logs the address it listens on");
        sim.port = address
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .expect("a port");
        sim.url = format!("http://{address}");
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

/// The name the tests' llama-server serves its model under (without `--alias` it is the GGUF's path).
pub const LLAMA_MODEL_NAME: &str = "llmbench-tiny";

/// llama.cpp's real `llama-server` with the tests' tiny model (`make test` builds both: `tests/tools/
/// build-llama-server.sh`, `tests/tools/make-tiny-model.py`), started on a free port and killed on drop. Found through
/// `LLMBENCH_LLAMA_SERVER` (the binary), `LLMBENCH_LLAMA_MODEL` (the GGUF) and `LLMBENCH_LLAMA_TOKENIZER` (the same
/// tokenizer as tokenizer.json), which `make test` sets.
pub struct LlamaServer {
    child: Child,
    pub url: String,
    /// The tokenizer.json of the model, for `--tokenizer`.
    pub tokenizer: PathBuf,
    /// The name the server serves its model under (`--alias`).
    pub model: String,
}

impl LlamaServer {
    /// Starts the server with `args` after the model, host and port (e.g. `-c 4096 -np 4 --metrics`) and waits for
    /// its `/health`, as a deployment's readiness probe would (the bound is for a loaded machine, not a timing).
    /// None, with a note on stderr, when the variables are not set: `cargo test` alone skips these tests, `make
    /// test` runs them.
    pub fn start(args: &[&str]) -> Option<LlamaServer> {
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
                "skipping: set LLMBENCH_LLAMA_SERVER, LLMBENCH_LLAMA_MODEL and LLMBENCH_LLAMA_TOKENIZER (make test \
                 does) to run against a real llama-server"
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
            .args(["--alias", LLAMA_MODEL_NAME])
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display()));
        let server = LlamaServer {
            child,
            url: format!("http://127.0.0.1:{port}"),
            tokenizer,
            model: LLAMA_MODEL_NAME.to_owned(),
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while http_get(&format!("{}/health", server.url)).map(|(status, _)| status) != Some(200) {
            assert!(
                Instant::now() < deadline,
                "llama-server did not become ready on {}",
                server.url
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        Some(server)
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A plain HTTP/1.1 GET: the status and the body, or None when nothing answers.
pub fn http_get(url: &str) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://")?;
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    let mut stream = std::net::TcpStream::connect(host).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        stream,
        "GET /{path} HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\n\r\n"
    )
    .ok()?;
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    let status = response.split_whitespace().nth(1)?.parse().ok()?;
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Some((status, body))
}

/// A word-level tokenizer.json: ChatML's two markers are special tokens, every other whitespace-separated word is
/// one token (known or `[UNK]`), so counts can be worked out by hand.
pub const WORD_TOKENIZER: &str = r#"{"version": "1.0", "truncation": null, "padding": null,
 "added_tokens": [
  {"id": 0, "content": "<|im_start|>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
  {"id": 1, "content": "<|im_end|>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}],
 "normalizer": null, "pre_tokenizer": {"type": "WhitespaceSplit"}, "post_processor": null, "decoder": null,
 "model": {"type": "WordLevel", "vocab": {"<|im_start|>": 0, "<|im_end|>": 1, "[UNK]": 2, "user": 3,
           "assistant": 4}, "unk_token": "[UNK]"}}"#;

/// The classic ChatML template (as OpenHermes-2.5 ships it in its tokenizer_config.json).
pub const CHATML: &str = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + \
                      '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}\
                      {% endif %}";

/// `llmbench run` of the `harness` profile at `profile` against `endpoint` with `tokenizer` (`builtin` or a path),
/// without the pre-flight, its results in `out/run_id`.
pub fn run_against(
    harness: &str,
    profile: &Path,
    endpoint: &str,
    tokenizer: impl AsRef<std::ffi::OsStr>,
    out: &Path,
    run_id: &str,
) -> Output {
    llmbench()
        .args(["run", "--harness", harness, "--profile"])
        .arg(profile)
        .args(["--endpoint", endpoint, "--tokenizer"])
        .arg(tokenizer)
        .args(["--no-preflight", "--run-id", run_id, "--output"])
        .arg(out)
        .output()
        .expect("runs")
}

/// `llmbench run` of the `harness` profile at `profile` against `sim` for model `m` with the built-in tokenizer,
/// without the pre-flight or server metrics, its results in `dir/run_id`.
pub fn run_on_sim(
    dir: &Path,
    harness: &str,
    profile: &Path,
    run_id: &str,
    sim: &SimProcess,
) -> Output {
    run_profile(
        dir,
        harness,
        profile,
        run_id,
        &[
            "--endpoint",
            &sim.url,
            "--model",
            "m",
            "--tokenizer",
            "builtin",
            "--no-preflight",
            "--no-server-metrics",
        ],
    )
}

/// A tokenizer directory under `dir` holding [`WORD_TOKENIZER`] and a tokenizer_config.json with [`CHATML`] as its
/// chat template.
pub fn chatml_tokenizer(dir: &Path) -> PathBuf {
    let tokenizer = dir.join("tok");
    std::fs::create_dir(&tokenizer).expect("mkdir");
    write(&tokenizer, "tokenizer.json", WORD_TOKENIZER);
    let config = serde_json::json!({"eos_token": "<|im_end|>", "chat_template": CHATML});
    write(&tokenizer, "tokenizer_config.json", &config.to_string());
    tokenizer
}

/// A run's records as `requests.jsonl` text, one JSON object per line, exactly what `llmbench export` writes:
/// `path` names the `requests.jsonl` of a run directory, and the records are read from the `requests.bin` beside
/// it (or from `path` itself, for a file a test wrote). A torn last record is left out, as every reader does.
pub fn requests_jsonl(path: &Path) -> std::io::Result<String> {
    use llmbench_model::record_file::{RECORDS_FILE, RunRecords, write_jsonl_line};
    let dir = path.parent().unwrap_or(Path::new("."));
    if !dir.join(RECORDS_FILE).exists() {
        return std::fs::read_to_string(path);
    }
    let (records, _) = RunRecords::in_dir(dir)
        .read_all()
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    let mut out = Vec::new();
    for record in &records {
        write_jsonl_line(&mut out, record)?;
    }
    String::from_utf8(out).map_err(std::io::Error::other)
}

/// How many whole records a run has written so far (`path`: its `requests.jsonl`, as for [`requests_jsonl`]): a
/// record still being written, or torn by a kill, is not counted.
pub fn recorded(path: &Path) -> u64 {
    let dir = path.parent().unwrap_or(Path::new("."));
    llmbench_model::record_file::count_records_from(
        &dir.join(llmbench_model::record_file::RECORDS_FILE),
        0,
    )
    .map_or(0, |(_, whole)| whole)
}
