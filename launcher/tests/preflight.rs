//! The pre-flight through the real binary: each way a server can be unusable stops the run before anything is
//! timed, with exit code 6, a message naming what was tried and how to fix it, and no results directory; a server
//! that passes has what it answered recorded in run.json, and the run's records are the run's requests alone. A
//! sweep and an experiment check their server once.

mod common;

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{SimProcess, json, llmbench, run_profile, stderr, succeeded, write};
use serde_json::Value;

/// The exit code of a failed pre-flight.
const PREFLIGHT_FAILED: i32 = 6;

/// Three streamed completions (vllm bench serve's default API) of a few tokens.
const SMALL_VLLM: &str = "dataset-name: random\nrandom-input-len: 4\nrandom-output-len: 2\nnum-prompts: 3\n\
                          request-rate: 100\n";

/// One request a [`TinyServer`] read.
#[derive(Debug, Clone)]
struct Request {
    method: String,
    path: String,
    body: Value,
}

/// How a [`TinyServer`] answers a request.
enum Answer {
    /// This status and JSON body.
    Json(u16, String),
    /// A streamed completion of two tokens, each chunk naming `model` when given.
    Stream(Option<&'static str>),
    /// Nothing, ever: the connection stays open.
    Stall,
}

/// An HTTP/1.1 server in a thread that answers each request as its `answer` says and keeps every request.
struct TinyServer {
    url: String,
    seen: Arc<Mutex<Vec<Request>>>,
}

impl TinyServer {
    fn start(answer: fn(&Request) -> Answer) -> TinyServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&seen);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let kept = Arc::clone(&kept);
                std::thread::spawn(move || serve(stream, &kept, answer));
            }
        });
        TinyServer { url, seen }
    }

    fn seen(&self) -> Vec<Request> {
        self.seen.lock().expect("lock").clone()
    }
}

fn serve(stream: TcpStream, kept: &Mutex<Vec<Request>>, answer: fn(&Request) -> Answer) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut writer = stream;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let method = parts.next().unwrap_or_default().to_owned();
        let path = parts.next().unwrap_or_default().to_owned();
        let mut length = 0usize;
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            if header == "\r\n" {
                break;
            }
            if let Some(v) = header
                .to_ascii_lowercase()
                .strip_prefix("content-length:")
                .and_then(|v| v.trim().parse().ok())
            {
                length = v;
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let request = Request {
            method,
            path,
            body: serde_json::from_slice(&body).unwrap_or(Value::Null),
        };
        let answer = answer(&request);
        kept.lock().expect("lock").push(request);
        let (status, content_type, body) = match answer {
            Answer::Json(status, body) => (status, "application/json", body),
            Answer::Stream(model) => {
                let model = model
                    .map(|m| format!(r#""model":"{m}","#))
                    .unwrap_or_default();
                let body = format!(
                    "data: {{{model}\"choices\":[{{\"index\":0,\"text\":\" a\",\"finish_reason\":null}}]}}\n\n\
                     data: {{{model}\"choices\":[{{\"index\":0,\"text\":\" b\",\"finish_reason\":\"length\"}}]}}\n\n\
                     data: {{{model}\"choices\":[],\"usage\":{{\"prompt_tokens\":4,\"completion_tokens\":2}}}}\n\n\
                     data: [DONE]\n\n"
                );
                (200, "text/event-stream", body)
            }
            Answer::Stall => {
                std::thread::sleep(Duration::from_secs(3600));
                return;
            }
        };
        let head = format!(
            "HTTP/1.1 {status} X\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\r\n",
            body.len()
        );
        if writer.write_all(head.as_bytes()).is_err() || writer.write_all(body.as_bytes()).is_err()
        {
            return;
        }
    }
}

fn models(ids: &[&str]) -> Answer {
    let data: Vec<Value> = ids
        .iter()
        .map(|id| serde_json::json!({"id": id, "object": "model"}))
        .collect();
    Answer::Json(
        200,
        serde_json::json!({"object": "list", "data": data}).to_string(),
    )
}

fn not_found() -> Answer {
    Answer::Json(404, r#"{"detail":"Not Found"}"#.to_owned())
}

/// A loopback URL nothing listens on.
fn closed_endpoint() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    drop(listener);
    url
}

/// Runs the small vllm-benchmark profile against `endpoint` as `run_id`, with `extra` flags.
fn small_run(dir: &Path, endpoint: &str, run_id: &str, extra: &[&str]) -> Output {
    let profile = write(dir, "small.yaml", SMALL_VLLM);
    let mut args = vec!["--endpoint", endpoint, "--tokenizer", "builtin"];
    if !extra.contains(&"--model") {
        args.extend(["--model", "m"]);
    }
    args.extend(extra);
    run_profile(dir, "vllm-benchmark", &profile, run_id, &args)
}

/// Asserts a failed pre-flight: exit 6, each of `needles` in the message, the way out named, no results.
fn assert_refused(output: &Output, run_dir: &Path, needles: &[&str]) {
    let err = stderr(output);
    assert_eq!(output.status.code(), Some(PREFLIGHT_FAILED), "{err}");
    assert!(err.contains("llmbench: error: pre-flight: "), "{err}");
    for needle in needles {
        assert!(err.contains(needle), "{needle:?} not in: {err}");
    }
    assert!(err.contains("help: "), "{err}");
    assert!(
        err.contains("nothing was timed and no results were written; --no-preflight"),
        "{err}"
    );
    assert!(
        !run_dir.exists(),
        "a failed pre-flight writes no results directory: {}",
        run_dir.display()
    );
}

#[test]
fn nothing_listening_fails_the_preflight_as_refused_naming_the_url_tried() {
    let dir = tempfile::tempdir().expect("tmp");
    let endpoint = closed_endpoint();
    let output = small_run(dir.path(), &endpoint, "refused", &[]);
    assert_refused(
        &output,
        &dir.path().join("refused"),
        &[
            &format!("cannot connect to {endpoint}/v1/models: connection refused"),
            "3 attempts",
            "--endpoint http://HOST:PORT",
        ],
    );
}

#[test]
fn a_host_that_does_not_resolve_and_a_tls_endpoint_on_plain_http_are_named_as_such() {
    let dir = tempfile::tempdir().expect("tmp");
    // `.invalid` never resolves (RFC 2606).
    let output = small_run(
        dir.path(),
        "http://llmbench-preflight.invalid:8000",
        "dns",
        &[],
    );
    assert_refused(
        &output,
        &dir.path().join("dns"),
        &["the host name `llmbench-preflight.invalid` does not resolve (DNS)"],
    );
    // A server that answers the TLS handshake's first bytes as a plain HTTP request (with a 400).
    let sim = SimProcess::start(&["--model", "m"]);
    let https = sim.url.replace("http://", "https://");
    let output = small_run(dir.path(), &https, "tls", &[]);
    assert_refused(
        &output,
        &dir.path().join("tls"),
        &["the TLS handshake with", "use http:// in the endpoint"],
    );
}

#[test]
fn a_404_on_the_api_path_names_the_path_and_what_the_server_must_serve() {
    let server = TinyServer::start(|r| match r.path.as_str() {
        "/v1/models" => models(&["m"]),
        _ => not_found(),
    });
    let dir = tempfile::tempdir().expect("tmp");
    let output = small_run(dir.path(), &server.url, "no-path", &[]);
    assert_refused(
        &output,
        &dir.path().join("no-path"),
        &[
            &format!(
                "POST {}/v1/completions answered HTTP 404 Not Found: {{\"detail\":\"Not Found\"}}",
                server.url
            ),
            "the server has no /v1/completions",
            "OpenAI's completions API",
        ],
    );
    // One test request, of the run's own kind: streamed, its model, one token.
    let posts: Vec<Request> = server
        .seen()
        .into_iter()
        .filter(|r| r.method == "POST")
        .collect();
    assert_eq!(posts.len(), 1, "{posts:?}");
    assert_eq!(posts[0].body["model"], "m");
    assert_eq!(posts[0].body["stream"], true);
    assert_eq!(posts[0].body["max_tokens"], 1);
}

#[test]
fn a_base_url_ending_in_v1_is_told_to_drop_it() {
    let sim = SimProcess::start(&["--model", "m"]);
    let dir = tempfile::tempdir().expect("tmp");
    for (suffix, run_id) in [("/v1", "v1"), ("/v1/completions/", "v1-completions")] {
        let endpoint = format!("{}{suffix}", sim.url);
        let output = small_run(dir.path(), &endpoint, run_id, &[]);
        let tried = format!("{}{}/v1/completions", sim.url, suffix.trim_end_matches('/'));
        assert_refused(
            &output,
            &dir.path().join(run_id),
            &[
                &format!("POST {tried} answered HTTP 404 Not Found"),
                &format!(
                    "the endpoint already ends in `{}`, and llmbench appends /v1/completions to it: give the \
                     server's base URL, --endpoint {}",
                    suffix.trim_end_matches('/'),
                    sim.url
                ),
            ],
        );
    }
}

#[test]
fn a_model_the_server_does_not_list_is_refused_naming_what_it_serves() {
    let sim = SimProcess::start(&["--model", "served-model"]);
    let dir = tempfile::tempdir().expect("tmp");
    let output = small_run(dir.path(), &sim.url, "wrong", &["--model", "wrong-model"]);
    assert_refused(
        &output,
        &dir.path().join("wrong"),
        &[
            &format!(
                "the server does not serve the model `wrong-model`: GET {}/v1/models lists served-model",
                sim.url
            ),
            "help: pass --model served-model",
        ],
    );
}

#[test]
fn a_server_that_ignores_the_model_field_is_refused_unless_the_mismatch_is_allowed() {
    // No model list, and every answer names the one model it serves, whatever was asked (llama.cpp's way).
    let server = TinyServer::start(|r| match (r.method.as_str(), r.path.as_str()) {
        ("POST", _) => Answer::Stream(Some("the-only-model")),
        _ => not_found(),
    });
    let dir = tempfile::tempdir().expect("tmp");
    let output = small_run(dir.path(), &server.url, "ignored", &[]);
    assert_refused(
        &output,
        &dir.path().join("ignored"),
        &[
            "the server answered the test request as the model `the-only-model`, not `m`",
            "pass --model the-only-model",
            "--allow-model-mismatch",
        ],
    );

    let output = small_run(
        dir.path(),
        &server.url,
        "allowed",
        &["--allow-model-mismatch"],
    );
    succeeded(&output);
    assert!(
        stderr(&output).contains("going on as --allow-model-mismatch asks"),
        "{}",
        stderr(&output)
    );
    let meta = json(&dir.path().join("allowed/run.json"));
    let preflight = &meta["preflight"];
    assert_eq!(preflight["model"], "m", "{preflight}");
    assert_eq!(preflight["server_model"], "the-only-model", "{preflight}");
    assert_eq!(preflight["models"]["status"], 404, "{preflight}");
    assert!(
        preflight["models"]["note"]
            .as_str()
            .is_some_and(|n| n.contains("checked by the test request alone")),
        "{preflight}"
    );
    assert_eq!(preflight["request"]["status"], 200, "{preflight}");
    assert_eq!(
        preflight["warnings"].as_array().map(Vec::len),
        Some(1),
        "{preflight}"
    );
}

#[test]
fn a_test_request_that_gets_no_answer_ends_at_the_preflight_timeout() {
    let server = TinyServer::start(|r| match r.path.as_str() {
        "/v1/models" => models(&["m"]),
        _ => Answer::Stall,
    });
    let dir = tempfile::tempdir().expect("tmp");
    let output = small_run(
        dir.path(),
        &server.url,
        "stalled",
        &["--preflight-timeout", "1s"],
    );
    assert_refused(
        &output,
        &dir.path().join("stalled"),
        &[
            "the test request got no complete answer within 1s",
            "raise --preflight-timeout",
        ],
    );
}

#[test]
fn a_server_error_on_the_test_request_is_shown_with_its_status_and_body() {
    let server = TinyServer::start(|r| match r.path.as_str() {
        "/v1/models" => models(&["m"]),
        _ => Answer::Json(
            503,
            r#"{"error":{"message":"the model is still loading"}}"#.to_owned(),
        ),
    });
    let dir = tempfile::tempdir().expect("tmp");
    let output = small_run(dir.path(), &server.url, "loading", &[]);
    assert_refused(
        &output,
        &dir.path().join("loading"),
        &[
            "HTTP 503 Service Unavailable: {\"error\":{\"message\":\"the model is still loading\"}}",
            "--serve",
        ],
    );
}

#[test]
fn a_server_that_passes_is_recorded_in_run_json_and_the_records_hold_only_the_run() {
    // The embedded simulator is checked like any server: it proves the wiring.
    let dir = tempfile::tempdir().expect("tmp");
    let profile = write(dir.path(), "small.yaml", SMALL_VLLM);
    let output = run_profile(dir.path(), "vllm-benchmark", &profile, "passed", &[]);
    succeeded(&output);
    let run = dir.path().join("passed");
    let meta = json(&run.join("run.json"));
    let preflight = &meta["preflight"];
    let endpoint = meta["endpoint"].as_str().expect("endpoint");
    assert_eq!(preflight["skipped"], Value::Null, "{preflight}");
    assert_eq!(
        preflight["models"]["url"],
        format!("{endpoint}/v1/models"),
        "{preflight}"
    );
    assert_eq!(preflight["models"]["status"], 200);
    assert_eq!(preflight["models"]["listed"][0], "llmbench-sim");
    assert_eq!(
        preflight["request"]["url"],
        format!("{endpoint}/v1/completions")
    );
    assert_eq!(preflight["request"]["status"], 200);
    assert!(
        preflight["request"]["latency_ms"]
            .as_f64()
            .is_some_and(|ms| ms > 0.0)
    );
    assert_eq!(preflight["model"], "llmbench-sim");
    assert_eq!(preflight["server_model"], "llmbench-sim");
    // Never in the records or the figures: three requests planned, three recorded.
    let records = common::requests_jsonl(&run.join("requests.jsonl")).expect("records");
    assert_eq!(records.lines().count(), 3);
    assert_eq!(json(&run.join("summary.json"))["requests"]["total"], 3);
}

#[test]
fn no_preflight_goes_straight_to_the_run_and_says_so_in_run_json() {
    let dir = tempfile::tempdir().expect("tmp");
    let endpoint = closed_endpoint();
    let output = small_run(dir.path(), &endpoint, "skipped", &["--no-preflight"]);
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("none of the 3 requests succeeded"),
        "{}",
        stderr(&output)
    );
    let run = dir.path().join("skipped");
    let meta = json(&run.join("run.json"));
    assert_eq!(
        meta["preflight"],
        serde_json::json!({"skipped": "--no-preflight"})
    );
    let records = common::requests_jsonl(&run.join("requests.jsonl")).expect("records");
    assert_eq!(records.lines().count(), 3);
    assert!(
        records.lines().all(|l| l.contains(r#""class":"connect""#)),
        "{records}"
    );
}

/// `llmbench run --preflight-only`, as the operator's pre-flight pod runs it: the small profile against
/// `endpoint`, the verdict written to `verdict.txt` (the pod's termination log).
fn preflight_only(dir: &Path, endpoint: &str, model: &str) -> (Output, String) {
    let verdict = dir.join("verdict.txt");
    let output = small_run(
        dir,
        endpoint,
        "checked",
        &[
            "--model",
            model,
            "--preflight-only",
            "--summary-file",
            verdict.to_str().expect("utf-8"),
        ],
    );
    let text = std::fs::read_to_string(&verdict).unwrap_or_default();
    (output, text)
}

#[test]
fn preflight_only_checks_the_server_as_the_run_would_and_sends_and_writes_nothing_else() {
    let dir = tempfile::tempdir().expect("tmp");
    let server = TinyServer::start(answering);
    let (output, verdict) = preflight_only(dir.path(), &server.url, "m");
    succeeded(&output);
    let url = &server.url;
    assert_eq!(
        verdict.split(" in ").next(),
        Some(
            format!(
                "pre-flight passed for `m`: GET {url}/v1/models lists m; a one-token request to POST \
                 {url}/v1/completions answered HTTP 200 as `m`"
            )
            .as_str()
        ),
        "{verdict}"
    );
    assert!(verdict.ends_with(" ms"), "{verdict}");
    // The listing and the one test request of the run's own kind (streamed, one token), and nothing else.
    let seen = server.seen();
    let calls: Vec<(&str, &str)> = seen
        .iter()
        .map(|r| (r.method.as_str(), r.path.as_str()))
        .collect();
    assert_eq!(
        calls,
        [("GET", "/v1/models"), ("POST", "/v1/completions")],
        "{seen:?}"
    );
    assert_eq!(seen[1].body["max_tokens"], 1, "{:?}", seen[1].body);
    assert_eq!(seen[1].body["stream"], true, "{:?}", seen[1].body);
    assert!(!dir.path().join("checked").exists(), "no results directory");
}

#[test]
fn preflight_only_fails_with_exit_6_and_the_checks_own_words_in_the_verdict_file() {
    let dir = tempfile::tempdir().expect("tmp");
    let endpoint = closed_endpoint();
    let (output, verdict) = preflight_only(dir.path(), &endpoint, "m");
    assert_eq!(
        output.status.code(),
        Some(PREFLIGHT_FAILED),
        "{}",
        stderr(&output)
    );
    assert!(
        verdict.starts_with(&format!(
            "pre-flight: cannot connect to {endpoint}/v1/models: connection refused"
        )),
        "{verdict}"
    );
    // The run's note on --no-preflight is not the probe's: there the check is all there is.
    assert!(!verdict.contains("--no-preflight"), "{verdict}");
    assert!(
        stderr(&output).contains(&format!("llmbench: error: {verdict}")),
        "{}",
        stderr(&output)
    );

    let server = TinyServer::start(answering);
    let (output, verdict) = preflight_only(dir.path(), &server.url, "other");
    assert_eq!(output.status.code(), Some(PREFLIGHT_FAILED), "{verdict}");
    assert_eq!(
        verdict,
        format!(
            "pre-flight: the server does not serve the model `other`: GET {}/v1/models lists m\n  help: pass \
             --model m; if the server serves models it does not list, pass --allow-model-mismatch",
            server.url
        )
    );
    assert!(!dir.path().join("checked").exists());
}

#[test]
fn preflight_only_refuses_a_run_with_no_server_to_check_and_flags_that_belong_to_a_run() {
    let dir = tempfile::tempdir().expect("tmp");
    let profile = write(dir.path(), "small.yaml", SMALL_VLLM);
    // No --endpoint and a profile that names no server: the embedded simulator is not what is checked.
    let output = run_profile(
        dir.path(),
        "vllm-benchmark",
        &profile,
        "x",
        &["--model", "m", "--preflight-only"],
    );
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains(
            "--preflight-only: there is no server to check: pass --endpoint URL (the profile names none)"
        ),
        "{}",
        stderr(&output)
    );
    let output = small_run(
        dir.path(),
        &closed_endpoint(),
        "x",
        &["--preflight-only", "--no-preflight"],
    );
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("cannot be used with"),
        "{}",
        stderr(&output)
    );
}

/// A completions server that lists `m` and streams an answer to every request.
fn answering(r: &Request) -> Answer {
    match (r.method.as_str(), r.path.as_str()) {
        ("GET", "/v1/models") => models(&["m"]),
        ("POST", "/v1/completions") => Answer::Stream(Some("m")),
        _ => not_found(),
    }
}

fn model_listings(server: &TinyServer) -> usize {
    server
        .seen()
        .iter()
        .filter(|r| r.method == "GET" && r.path == "/v1/models")
        .count()
}

#[test]
fn a_sweep_checks_its_server_once_whatever_its_stages() {
    let server = TinyServer::start(answering);
    let dir = tempfile::tempdir().expect("tmp");
    let profile = write(
        dir.path(),
        "sweep.yaml",
        "spec:\n  backend: {kind: openai_http, target: REPLACE_ENV_LLMDBENCH_HARNESS_STACK_ENDPOINT_URL, model: \
         REPLACE_ENV_LLMDBENCH_DEPLOY_CURRENT_MODEL, request_format: /v1/completions, stream: true}\n  data: \
         [{kind: synthetic_text, prompt_tokens: 8, output_tokens: 2}]\n  profile: {kind: sweep, sweep_size: 4, \
         strategy_type: constant, max_concurrency: 4}\n  constraints: [{kind: max_requests, count: 3}]\n",
    );
    let output = run_profile(
        dir.path(),
        "guidellm",
        &profile,
        "sweep",
        &[
            "--endpoint",
            &server.url,
            "--model",
            "m",
            "--tokenizer",
            "builtin",
            "--no-server-metrics",
        ],
    );
    succeeded(&output);
    let meta = json(&dir.path().join("sweep/run.json"));
    assert_eq!(meta["stages"].as_array().map(Vec::len), Some(4));
    // Listed twice: once by the pre-flight, once when the run asks the server what it is (run.json's `server`).
    assert_eq!(model_listings(&server), 2);
    let one_token = server
        .seen()
        .iter()
        .filter(|r| r.method == "POST" && r.body["max_tokens"] == 1)
        .count();
    assert_eq!(one_token, 1, "one test request for the whole sweep");
}

fn experiment(dir: &Path, endpoint: &str, id: &str) -> (Output, PathBuf) {
    let file = write(
        dir,
        "two.yaml",
        "treatments:\n  - {name: a, max-concurrency: 1}\n  - {name: b, max-concurrency: 2}\n",
    );
    let out = dir.join("out");
    let output = llmbench()
        .arg("experiment")
        .arg(&file)
        .arg("--output")
        .arg(&out)
        .args(["--id", id])
        .args([
            "--harness",
            "vllm-benchmark",
            "--profile",
            "random_concurrent",
            "--endpoint",
            endpoint,
            "--model",
            "m",
            "--tokenizer",
            "builtin",
            "--override",
            "num-prompts=4",
            "--override",
            "random-input-len=8",
            "--override",
            "random-output-len=2",
        ])
        .output()
        .expect("runs");
    (output, out.join(id))
}

#[test]
fn an_experiment_checks_each_server_once_and_skips_the_runs_against_one_that_fails() {
    let server = TinyServer::start(answering);
    let dir = tempfile::tempdir().expect("tmp");
    let (output, exp) = experiment(dir.path(), &server.url, "up");
    succeeded(&output);
    // Checked once for two runs (one test request); listed once by that check and once by each run, which asks
    // the server what it is, as it may have been restarted between treatments.
    let test_requests = server
        .seen()
        .iter()
        .filter(|r| r.method == "POST" && r.body["max_tokens"] == 1)
        .count();
    assert_eq!(test_requests, 1, "checked once for two runs");
    assert_eq!(model_listings(&server), 3);
    let first = json(&exp.join("a-r1/run.json"));
    assert_eq!(first["preflight"]["request"]["status"], 200);
    let second = json(&exp.join("b-r1/run.json"));
    assert!(
        second["preflight"]["skipped"]
            .as_str()
            .is_some_and(|s| s.contains("a-r1")),
        "{}",
        second["preflight"]
    );

    let endpoint = closed_endpoint();
    let (output, exp) = experiment(dir.path(), &endpoint, "down");
    assert_eq!(
        output.status.code(),
        Some(PREFLIGHT_FAILED),
        "{}",
        stderr(&output)
    );
    assert!(
        stderr(&output)
            .contains("a server failed its pre-flight, and the runs against it were skipped"),
        "{}",
        stderr(&output)
    );
    let plan = json(&exp.join("experiment.json"));
    assert_eq!(plan["runs"][0]["status"], "failed");
    assert!(
        plan["runs"][0]["error"]
            .as_str()
            .is_some_and(|e| e.contains("connection refused")),
        "{}",
        plan["runs"][0]
    );
    assert_eq!(plan["runs"][1]["status"], "skipped");
    assert_eq!(
        plan["runs"][1]["error"],
        "skipped: its server failed the pre-flight in run a-r1"
    );
    assert!(!exp.join("a-r1").exists() && !exp.join("b-r1").exists());
}

/// Requests longer than the server's context (`max_model_len` in `GET /v1/models`) are found before the clock
/// starts: all of them fails the pre-flight; some of them is a warning with their count, and the run goes on.
#[test]
fn requests_longer_than_the_servers_context_are_refused_or_counted_before_the_clock() {
    let sim = SimProcess::start(&["--model", "m", "--max-model-len", "1024"]);
    let dir = tempfile::tempdir().expect("tempdir");
    let output = small_run(
        dir.path(),
        &sim.url,
        "long",
        &["--input-tokens", "1000", "--output-tokens", "100"],
    );
    assert_refused(
        &output,
        &dir.path().join("long"),
        &[
            "asks for more tokens than the server's context of 1024",
            "prompt + max_tokens is 1100 at least",
        ],
    );
    // vLLM's random dataset spreads the prompts ±50 % around 800: some fit with 100 more tokens, some do not.
    let profile = write(
        dir.path(),
        "spread.yaml",
        "dataset-name: random\nrandom-input-len: 800\nrandom-range-ratio: 0.5\nrandom-output-len: 100\n\
         num-prompts: 40\nrequest-rate: inf\nignore-eos: true\n",
    );
    let output = run_profile(
        dir.path(),
        "vllm-benchmark",
        &profile,
        "spread",
        &[
            "--endpoint",
            &sim.url,
            "--model",
            "m",
            "--tokenizer",
            "builtin",
        ],
    );
    let err = stderr(&output);
    assert!(
        err.contains("ask for more tokens than the server's context of 1024"),
        "{err}"
    );
    assert!(dir.path().join("spread/summary.json").is_file(), "{err}");
}
