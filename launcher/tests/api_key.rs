//! `--api-key` and `OPENAI_API_KEY` through the binary: a server sees the bearer token on every request, the flag
//! beats the profile's key, which beats the environment, and no file of the results (nor the output) holds the
//! key.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::{Arc, Mutex};

use common::*;

/// A key no file could hold by chance.
const SECRET: &str = "sk-llmbench-test-7f3a9c2e51d4";

/// An OpenAI-compatible server that keeps the `Authorization` header of every request to the API (`/v1/…`;
/// `None` when absent) and answers completions with a streamed two-token answer, and `GET /v1/models` with one
/// model. Other paths (the run's probe of `/metrics`, which vLLM serves without a key) get 404.
struct KeyServer {
    url: String,
    seen: Arc<Mutex<Vec<Option<String>>>>,
}

impl KeyServer {
    fn start() -> KeyServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&seen);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let kept = Arc::clone(&kept);
                std::thread::spawn(move || serve(stream, &kept));
            }
        });
        KeyServer { url, seen }
    }

    fn seen(&self) -> Vec<Option<String>> {
        self.seen.lock().expect("lock").clone()
    }
}

fn serve(stream: std::net::TcpStream, seen: &Mutex<Vec<Option<String>>>) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut writer = stream;
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
            return;
        }
        let mut authorization = None;
        let mut length = 0usize;
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            if line == "\r\n" {
                break;
            }
            if let Some((name, value)) = line.split_once(':') {
                let value = value.trim().to_owned();
                match name.to_ascii_lowercase().as_str() {
                    "authorization" => authorization = Some(value),
                    "content-length" => length = value.parse().unwrap_or(0),
                    _ => {}
                }
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        if request_line.contains(" /v1/") {
            seen.lock().expect("lock").push(authorization);
        }
        let response = if request_line.starts_with("GET ") && request_line.contains("/v1/models") {
            let body = r#"{"object":"list","data":[{"id":"m","object":"model"}]}"#;
            format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            )
        } else if !request_line.contains(" /v1/") {
            "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n".to_owned()
        } else {
            let chunk = r#"{"choices":[{"index":0,"text":"one two","finish_reason":"length"}]}"#;
            let usage = r#"{"choices":[],"usage":{"prompt_tokens":4,"completion_tokens":2}}"#;
            let events = format!("data: {chunk}\n\ndata: {usage}\n\ndata: [DONE]\n\n");
            format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\r\n{events}",
                events.len()
            )
        };
        if writer.write_all(response.as_bytes()).is_err() {
            return;
        }
    }
}

/// A vllm bench serve profile against `url`: three random prompts.
fn vllm_profile(dir: &Path, url: &str) -> std::path::PathBuf {
    write(
        dir,
        "vllm.yaml",
        &format!(
            "base-url: {url}\nmodel: m\ndataset-name: random\nrandom-input-len: 4\nrandom-output-len: 2\n\
             num-prompts: 3\n"
        ),
    )
}

/// Every file under `dir` whose bytes hold `needle`.
fn files_holding(dir: &Path, needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_owned()];
    while let Some(path) = pending.pop() {
        if path.is_dir() {
            for entry in std::fs::read_dir(&path).expect("read dir") {
                pending.push(entry.expect("entry").path());
            }
        } else {
            let bytes = std::fs::read(&path).expect("read file");
            if bytes.windows(needle.len()).any(|w| w == needle.as_bytes()) {
                found.push(path.display().to_string());
            }
        }
    }
    found
}

#[test]
fn the_api_key_flag_is_sent_as_a_bearer_token_and_written_nowhere() {
    let server = KeyServer::start();
    let dir = tempfile::tempdir().expect("tmp");
    let profile = vllm_profile(dir.path(), &server.url);
    let output = llmbench()
        .env("RUST_LOG", "debug")
        .env_remove("OPENAI_API_KEY")
        .args(["run", "--harness", "vllm-benchmark", "--profile"])
        .arg(&profile)
        .args(["--run-id", "r", "--output"])
        .arg(dir.path())
        .args(["--tokenizer", "builtin", "--api-key", SECRET])
        .output()
        .expect("runs");
    succeeded(&output);
    let seen = server.seen();
    assert!(seen.len() >= 3, "{seen:?}");
    assert!(
        seen.iter()
            .all(|a| a.as_deref() == Some(&format!("Bearer {SECRET}"))),
        "every request carries the key: {seen:?}"
    );
    let results = dir.path().join("r");
    assert!(
        results.join("report.html").is_file(),
        "the run wrote its files"
    );
    assert_eq!(files_holding(&results, SECRET), Vec::<String>::new());
    assert!(!stdout(&output).contains(SECRET) && !stderr(&output).contains(SECRET));
    assert_eq!(
        json(&results.join("run.json"))["api_key_source"],
        "--api-key"
    );
}

#[test]
fn openai_api_key_is_sent_when_neither_flag_nor_profile_has_a_key() {
    let server = KeyServer::start();
    let dir = tempfile::tempdir().expect("tmp");
    let profile = vllm_profile(dir.path(), &server.url);
    let output = llmbench()
        .env("OPENAI_API_KEY", SECRET)
        .args(["run", "--harness", "vllm-benchmark", "--profile"])
        .arg(&profile)
        .args(["--run-id", "r", "--output"])
        .arg(dir.path())
        .args(["--tokenizer", "builtin"])
        .output()
        .expect("runs");
    succeeded(&output);
    assert!(
        server
            .seen()
            .iter()
            .all(|a| a.as_deref() == Some(&format!("Bearer {SECRET}")))
    );
    let results = dir.path().join("r");
    assert_eq!(files_holding(&results, SECRET), Vec::<String>::new());
    assert_eq!(
        json(&results.join("run.json"))["api_key_source"],
        "OPENAI_API_KEY"
    );
}

#[test]
fn the_flag_beats_the_profiles_key_which_beats_the_environment() {
    let server = KeyServer::start();
    let dir = tempfile::tempdir().expect("tmp");
    let profile = write(
        dir.path(),
        "ip.yaml",
        &format!(
            "server:\n  type: vllm\n  base_url: {}\n  model_name: m\n  api_key: from-profile\napi:\n  streaming: true\n\
             data:\n  type: random\n  input_distribution: {{min: 4, max: 4, mean: 4, std_dev: 0}}\n  \
             output_distribution: {{min: 2, max: 2, mean: 2, std_dev: 0}}\nload:\n  type: concurrent\n  stages:\n  \
             - {{num_requests: 2, concurrency_level: 1}}\n",
            server.url
        ),
    );
    let run = |run_id: &str, flag: &[&str]| {
        let output = llmbench()
            .env("OPENAI_API_KEY", "from-environment")
            .args(["run", "--harness", "inference-perf", "--profile"])
            .arg(&profile)
            .args(["--run-id", run_id, "--output"])
            .arg(dir.path())
            .args(["--tokenizer", "builtin", "--no-server-metrics"])
            .args(flag)
            .output()
            .expect("runs");
        succeeded(&output);
    };
    run("flag", &["--api-key", SECRET]);
    let with_flag = server.seen();
    assert!(
        !with_flag.is_empty()
            && with_flag
                .iter()
                .all(|a| a.as_deref() == Some(&format!("Bearer {SECRET}"))),
        "{with_flag:?}"
    );
    assert_eq!(
        files_holding(&dir.path().join("flag"), SECRET),
        Vec::<String>::new()
    );
    run("profile", &[]);
    let with_profile = &server.seen()[with_flag.len()..];
    assert!(
        !with_profile.is_empty()
            && with_profile
                .iter()
                .all(|a| a.as_deref() == Some("Bearer from-profile")),
        "{with_profile:?}"
    );
    assert_eq!(
        json(&dir.path().join("profile/run.json"))["api_key_source"],
        "profile"
    );
}
