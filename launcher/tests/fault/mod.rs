//! A loopback HTTP server that misbehaves on purpose, and a harness that runs the real `llmbench` binary
//! against it as a user would, then reads back what the run recorded.
//!
//! A fault is a script of wire-level steps (send these bytes, trickle, pause, stall, close, reset) played on
//! every connection, after reading each request or without reading it. Responses are written by hand, byte for
//! byte, so a case can break exactly one rule of HTTP/1.1 or SSE and nothing else.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use llmbench_model::record::{ErrorClass, RequestRecord};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

/// One step of a fault's script on a connection.
#[derive(Debug, Clone)]
pub enum Step {
    /// Write these bytes at once.
    Send(Vec<u8>),
    /// Write these bytes one at a time, pausing after each (a zero pause only lets the client read in between).
    Trickle(Vec<u8>, Duration),
    Pause(Duration),
    /// Send nothing more, read nothing more, and keep the connection open.
    Stall,
    /// Close the connection (FIN).
    Close,
    /// Abort the connection (RST: `SO_LINGER` 0, then close).
    Reset,
    /// Write `unit` over and over until the client goes away.
    Endless(Vec<u8>),
}

/// How the server treats every connection.
#[derive(Debug, Clone)]
pub struct Fault {
    /// False: nothing listens on the port, so every connection is refused.
    pub listens: bool,
    /// Whether each request is read before the script plays; a server that never reads leaves it unread.
    pub reads_request: bool,
    /// Played once per request; a script that neither closes, resets nor stalls leaves the connection open for
    /// the next request (keep-alive).
    pub script: Vec<Step>,
}

impl Fault {
    /// Reads each request, then plays `script`.
    pub fn answer(script: Vec<Step>) -> Self {
        Self {
            listens: true,
            reads_request: true,
            script,
        }
    }

    /// Accepts connections but never reads a request, then plays `script`.
    pub fn without_reading(script: Vec<Step>) -> Self {
        Self {
            reads_request: false,
            ..Self::answer(script)
        }
    }

    /// Nothing listens: connections are refused.
    pub fn refused() -> Self {
        Self {
            listens: false,
            ..Self::answer(Vec::new())
        }
    }

    /// Reads each request and sends `response` whole, keeping the connection for the next request.
    pub fn respond(response: impl Into<Vec<u8>>) -> Self {
        Self::answer(vec![Step::Send(response.into())])
    }

    /// Reads each request, sends `response` whole and closes the connection.
    pub fn respond_and_close(response: impl Into<Vec<u8>>) -> Self {
        Self::answer(vec![Step::Send(response.into()), Step::Close])
    }
}

/// Starts the fault server on 127.0.0.1 and returns its port; it serves until the runtime ends.
pub async fn serve(fault: Fault) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("local address").port();
    if !fault.listens {
        return port;
    }
    let fault = Arc::new(fault);
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let _ = socket.set_nodelay(true);
            tokio::spawn(connection(socket, Arc::clone(&fault)));
        }
    });
    port
}

async fn connection(mut socket: TcpStream, fault: Arc<Fault>) {
    loop {
        if fault.reads_request && !read_request(&mut socket).await {
            return;
        }
        for step in &fault.script {
            if !play(&mut socket, step).await {
                return;
            }
        }
        if !fault.reads_request {
            // Nothing would ever tell this server a next request began.
            stall().await;
            return;
        }
    }
}

/// Plays one step; false once the connection is over.
async fn play(socket: &mut TcpStream, step: &Step) -> bool {
    match step {
        Step::Send(bytes) => socket.write_all(bytes).await.is_ok() && socket.flush().await.is_ok(),
        Step::Trickle(bytes, every) => {
            for byte in bytes {
                if socket.write_all(&[*byte]).await.is_err() {
                    return false;
                }
                if every.is_zero() {
                    tokio::task::yield_now().await;
                } else {
                    tokio::time::sleep(*every).await;
                }
            }
            true
        }
        Step::Pause(pause) => {
            tokio::time::sleep(*pause).await;
            true
        }
        Step::Stall => {
            stall().await;
            false
        }
        Step::Close => {
            let _ = socket.shutdown().await;
            false
        }
        Step::Reset => {
            let _ = socket.set_zero_linger();
            false
        }
        Step::Endless(unit) => {
            while socket.write_all(unit).await.is_ok() {}
            false
        }
    }
}

/// Waits while the caller holds its connection open without reading or answering; the test's runtime drops
/// the connection when the test ends. Nothing is read, so a request still being written stays blocked.
async fn stall() {
    tokio::time::sleep(Duration::from_secs(3600)).await;
}

/// Reads one request: its head, then `Content-Length` bytes of body. False when the client closed first.
async fn read_request(socket: &mut TcpStream) -> bool {
    let mut request = Vec::new();
    let mut buffer = [0_u8; 8192];
    let head_end = loop {
        if let Some(at) = request.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        match socket.read(&mut buffer).await {
            Ok(0) | Err(_) => return false,
            Ok(n) => request.extend_from_slice(&buffer[..n]),
        }
    };
    let head = String::from_utf8_lossy(&request[..head_end]).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|line| line.strip_prefix("content-length:"))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(0);
    while request.len() < head_end + length {
        match socket.read(&mut buffer).await {
            Ok(0) | Err(_) => return false,
            Ok(n) => request.extend_from_slice(&buffer[..n]),
        }
    }
    true
}

// ---- Responses, written by hand ----

/// A complete response with a `Content-Length` body.
pub fn response(status: &str, headers: &str, body: &[u8]) -> Vec<u8> {
    let mut wire = format!(
        "HTTP/1.1 {status}\r\n{headers}content-length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    wire.extend_from_slice(body);
    wire
}

/// The head of a chunked SSE stream.
pub const SSE_HEAD: &[u8] =
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
/// The last chunk of a chunked body.
pub const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

/// One chunk of a chunked body.
pub fn chunk(data: &[u8]) -> Vec<u8> {
    let mut wire = format!("{:x}\r\n", data.len()).into_bytes();
    wire.extend_from_slice(data);
    wire.extend_from_slice(b"\r\n");
    wire
}

/// A completions SSE event carrying `text`.
pub fn token(text: &str) -> Vec<u8> {
    format!(
        "data: {{\"choices\":[{{\"index\":0,\"text\":\"{text}\",\"finish_reason\":null}}]}}\n\n"
    )
    .into_bytes()
}

/// The last token event of a completion, with its finish reason.
pub fn last_token(text: &str) -> Vec<u8> {
    format!(
        "data: {{\"choices\":[{{\"index\":0,\"text\":\"{text}\",\"finish_reason\":\"length\"}}]}}\n\n"
    )
    .into_bytes()
}

/// A chat completions SSE event: a delta with `content`, and a finish reason when `last`.
pub fn chat_delta(content: &str, last: bool) -> Vec<u8> {
    let finish = if last { r#""length""# } else { "null" };
    format!(
        "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{content}\"}},\"finish_reason\":{finish}}}]}}\n\n"
    )
    .into_bytes()
}

pub const DONE: &[u8] = b"data: [DONE]\n\n";

/// The SSE body of a good four-token completion: tokens, a finish reason, usage, `[DONE]`.
pub fn good_events() -> Vec<Vec<u8>> {
    vec![
        token(" one"),
        token(" two"),
        token(" three"),
        last_token(" four"),
        b"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":8,\"completion_tokens\":4}}\n\n"
            .to_vec(),
        DONE.to_vec(),
    ]
}

/// A chunked SSE response, one chunk per event.
pub fn sse_response(events: &[Vec<u8>]) -> Vec<u8> {
    let mut wire = SSE_HEAD.to_vec();
    for event in events {
        wire.extend(chunk(event));
    }
    wire.extend_from_slice(LAST_CHUNK);
    wire
}

/// A good non-streamed completion body.
pub const COMPLETION_JSON: &[u8] = concat!(
    r#"{"id":"c","object":"text_completion","#,
    r#""choices":[{"index":0,"text":" one two three four","finish_reason":"length"}],"#,
    r#""usage":{"prompt_tokens":8,"completion_tokens":4,"total_tokens":12}}"#
)
.as_bytes();

// ---- Running the binary ----

/// The request timeout every case's profile sets.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(4);
/// Longest a run may take before the case fails and the process is killed: a hang must fail fast, not wait for
/// the test harness.
const HARD_LIMIT: Duration = Duration::from_secs(90);

/// Which profile dialect drives the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// vllm-benchmark, streamed completions (`vllm bench serve`'s default).
    VllmStreamed,
    /// vllm-benchmark with `backend: openai-chat`, streamed chat completions.
    VllmChat,
    /// inference-perf, non-streamed completions.
    InferencePerfUnstreamed,
}

/// A run to make: the dialect, how many requests it plans, and which client the binary must use.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    pub dialect: Dialect,
    pub requests: usize,
    /// Point `HTTP_PROXY` at the fault server, so the binary goes through reqwest rather than its own client.
    pub via_reqwest: bool,
    /// The run's request timeout, in seconds ([`REQUEST_TIMEOUT`] unless a case needs room).
    pub timeout_s: u64,
}

impl Plan {
    pub const fn streamed(requests: usize) -> Self {
        Self {
            dialect: Dialect::VllmStreamed,
            requests,
            via_reqwest: false,
            timeout_s: REQUEST_TIMEOUT.as_secs(),
        }
    }

    pub const fn chat(requests: usize) -> Self {
        Self {
            dialect: Dialect::VllmChat,
            requests,
            via_reqwest: false,
            timeout_s: REQUEST_TIMEOUT.as_secs(),
        }
    }

    /// inference-perf's constant load at `requests` per second for one second.
    pub const fn unstreamed(requests: usize) -> Self {
        Self {
            dialect: Dialect::InferencePerfUnstreamed,
            requests,
            via_reqwest: false,
            timeout_s: REQUEST_TIMEOUT.as_secs(),
        }
    }

    pub const fn through_reqwest(self) -> Self {
        Self {
            via_reqwest: true,
            ..self
        }
    }

    /// A request timeout far past what the case needs, for a case whose failure must come before any timeout
    /// however loaded the machine (reading 64 MiB through a debug build can take seconds).
    pub const fn with_room(self) -> Self {
        Self {
            timeout_s: 20,
            ..self
        }
    }

    fn profile(&self, port: u16) -> String {
        let timeout = self.timeout_s;
        let requests = self.requests;
        match self.dialect {
            Dialect::VllmStreamed | Dialect::VllmChat => {
                let chat = if self.dialect == Dialect::VllmChat {
                    "backend: openai-chat\nendpoint: /v1/chat/completions\n"
                } else {
                    ""
                };
                format!(
                    "dataset-name: random\nrandom-input-len: 8\nrandom-output-len: 4\nnum-prompts: {requests}\n\
                     request-rate: 50\nrequest-timeout: {timeout}\n{chat}"
                )
            }
            Dialect::InferencePerfUnstreamed => format!(
                "api: {{type: completion, streaming: false}}\n\
                 load: {{type: constant, stages: [{{rate: {requests}, duration: 1}}], request_timeout: {timeout}}}\n\
                 server: {{type: vllm, base_url: 'http://127.0.0.1:{port}', model_name: m, ignore_eos: true}}\n\
                 data: {{type: random, input_distribution: {{min: 8, max: 8, mean: 8, std_dev: 0}}, \
                 output_distribution: {{min: 4, max: 4, mean: 4, std_dev: 0}}}}\n"
            ),
        }
    }

    fn harness(&self) -> &'static str {
        match self.dialect {
            Dialect::VllmStreamed | Dialect::VllmChat => "vllm-benchmark",
            Dialect::InferencePerfUnstreamed => "inference-perf",
        }
    }
}

/// What a finished run left behind.
#[derive(Debug)]
pub struct Outcome {
    pub exit_code: Option<i32>,
    pub records: Vec<RequestRecord>,
    pub wall: Duration,
    pub stderr: String,
    pub dir: PathBuf,
}

/// Runs `llmbench run` against the fault server on `port` and reads its records back.
pub async fn run_binary(name: &str, port: u16, plan: Plan, scratch: &Path) -> Outcome {
    let profile = scratch.join(format!("{name}.yaml"));
    std::fs::write(&profile, plan.profile(port)).expect("write profile");
    let output = scratch.join("results");
    let endpoint = format!("http://127.0.0.1:{port}");
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_llmbench"));
    command
        .args(["run", "--harness", plan.harness(), "--profile"])
        .arg(&profile)
        .args([
            "--endpoint",
            &endpoint,
            "--model",
            "m",
            "--tokenizer",
            "builtin",
        ])
        .arg("--output")
        .arg(&output)
        .args(["--run-id", name])
        // These cases are about what each request records. The /metrics probe would meet the same fault through
        // reqwest, and a flood of 1xx heads keeps hyper's connection task busy for seconds after the probe's
        // timeout, which made a case overrun RUN_LIMIT on a loaded machine.
        .arg("--no-server-metrics")
        // The fault server answers every request the same broken way, the pre-flight's too, which would stop
        // the run before the requests whose records these cases check (`preflight.rs` tests the pre-flight).
        .arg("--no-preflight")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for proxy in [
        "http_proxy",
        "HTTP_PROXY",
        "all_proxy",
        "ALL_PROXY",
        "no_proxy",
        "NO_PROXY",
    ] {
        command.env_remove(proxy);
    }
    if plan.via_reqwest {
        // reqwest sends to the proxy, which is the fault server itself: it answers every request the same way.
        command.env("HTTP_PROXY", &endpoint);
    }
    let started = Instant::now();
    let child = command.spawn().expect("llmbench starts");
    let finished = tokio::time::timeout(HARD_LIMIT, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("{name}: the run did not end within {HARD_LIMIT:?}"))
        .expect("llmbench runs");
    let wall = started.elapsed();
    let dir = output.join(name);
    let records = if llmbench_model::record_file::RunRecords::exist_in(&dir) {
        llmbench_model::record_file::RunRecords::in_dir(&dir)
            .read_all()
            .expect("every record reads back")
            .0
    } else {
        Vec::new()
    };
    Outcome {
        exit_code: finished.status.code(),
        records,
        wall,
        stderr: String::from_utf8_lossy(&finished.stderr).into_owned(),
        dir,
    }
}

// ---- What a case expects ----

/// How long each request may take.
#[derive(Debug, Clone, Copy)]
pub enum Timing {
    /// Well before the request timeout: the client saw the answer was complete (or broken) and did not wait.
    Prompt,
    /// Ended by the request timeout, not before and not much after.
    AtTimeout,
    /// Under this long, which is under the request timeout.
    Under(Duration),
    /// No bound: the record's class and message say what ended it.
    Any,
}

/// What every record of a case must show.
#[derive(Debug, Clone)]
pub struct Expect {
    /// `None`: every request succeeded.
    pub class: Option<ErrorClass>,
    pub http_status: Option<u16>,
    /// Each must appear in every failed record's message (case-insensitive).
    pub message: Vec<&'static str>,
    pub timing: Timing,
    /// The fewest chunk events each record must have kept.
    pub min_chunks: usize,
    /// Every answer came back whole but shorter than asked: neither a success nor a failure, so nothing succeeded.
    pub cut_short: bool,
}

impl Expect {
    pub fn success() -> Self {
        Self {
            class: None,
            http_status: Some(200),
            message: Vec::new(),
            timing: Timing::Prompt,
            min_chunks: 1,
            cut_short: false,
        }
    }

    /// No error, but every answer shorter than asked under `ignore_eos` ([`RequestRecord::truncated`]).
    pub fn cut_short() -> Self {
        Self {
            cut_short: true,
            ..Self::success()
        }
    }

    pub fn failure(class: ErrorClass, message: &[&'static str]) -> Self {
        Self {
            class: Some(class),
            http_status: None,
            message: message.to_vec(),
            timing: Timing::Prompt,
            min_chunks: 0,
            cut_short: false,
        }
    }

    pub fn status(code: u16, message: &[&'static str]) -> Self {
        Self {
            http_status: Some(code),
            ..Self::failure(ErrorClass::HttpStatus, message)
        }
    }

    pub fn timeout() -> Self {
        Self {
            timing: Timing::AtTimeout,
            ..Self::failure(ErrorClass::Timeout, &["within the 4s request timeout"])
        }
    }

    pub fn with_status(self, code: u16) -> Self {
        Self {
            http_status: Some(code),
            ..self
        }
    }

    pub fn with_chunks(self, min_chunks: usize) -> Self {
        Self { min_chunks, ..self }
    }

    pub fn with_timing(self, timing: Timing) -> Self {
        Self { timing, ..self }
    }
}

/// One fault-mode case: a name, the server's behaviour, the run and what it must record.
#[derive(Debug, Clone)]
pub struct Case {
    pub name: &'static str,
    pub fault: Fault,
    pub plan: Plan,
    pub expect: Expect,
}

impl Case {
    pub fn new(name: &'static str, fault: Fault, plan: Plan, expect: Expect) -> Self {
        Self {
            name,
            fault,
            plan,
            expect,
        }
    }
}

/// The most a request may take to count as prompt: half the timeout, so no request waited for it. Seconds, not
/// milliseconds, apart: a loaded two-core machine (load average 15) delays a prompt answer by a second.
const PROMPT: Duration = Duration::from_secs(2);
/// How far past its timeout a timed-out request may end (scheduling on a loaded two-core machine).
const TIMEOUT_SLACK: Duration = Duration::from_secs(3);
/// The longest a whole run may take: startup, the requests, the reports (on a loaded machine).
const RUN_LIMIT: Duration = Duration::from_secs(60);

/// Runs every case at once (each against its own server, each run a process of its own) and returns every
/// mismatch found, so one failing test lists all the cases that broke.
pub async fn check_all(cases: Vec<Case>) -> Vec<String> {
    let mut running = tokio::task::JoinSet::new();
    // A few at a time: each run is a process with its own runtime, and the machine may have two cores.
    let slots = Arc::new(tokio::sync::Semaphore::new(6));
    for case in cases {
        let slots = Arc::clone(&slots);
        running.spawn(async move {
            let _slot = slots.acquire_owned().await.expect("semaphore open");
            check(&case).await
        });
    }
    let mut problems = Vec::new();
    while let Some(found) = running.join_next().await {
        problems.extend(found.expect("case task"));
    }
    problems
}

/// Runs one case and lists what differs from its expectation.
pub async fn check(case: &Case) -> Vec<String> {
    let scratch = tempfile::tempdir().expect("temp dir");
    let port = serve(case.fault.clone()).await;
    let outcome = run_binary(case.name, port, case.plan, scratch.path()).await;
    // Shown with `--nocapture`: what each case recorded, to read beside the expectations.
    if let Some(first) = outcome.records.first() {
        eprintln!(
            "{}: exit {:?}, {} record(s) in {:?}; first: status {:?}, {} chunk(s), {:?}",
            case.name,
            outcome.exit_code,
            outcome.records.len(),
            outcome.wall,
            first.http_status,
            first.chunks.len(),
            first.error.as_deref()
        );
    }
    let mut problems = Vec::new();
    let mut problem = |what: String| problems.push(format!("{}: {what}", case.name));
    let expect = &case.expect;
    let planned = case.plan.requests;
    let want_exit = if expect.class.is_none() && !expect.cut_short {
        0
    } else {
        3
    };
    if outcome.exit_code != Some(want_exit) {
        problem(format!(
            "exit code {:?}, expected {want_exit}; stderr: {}",
            outcome.exit_code,
            outcome.stderr.trim()
        ));
    }
    if outcome.records.len() != planned {
        problem(format!(
            "{} record(s) in {}, expected {planned}",
            outcome.records.len(),
            outcome.dir.display()
        ));
    }
    if outcome.wall > RUN_LIMIT {
        problem(format!("the run took {:?}", outcome.wall));
    }
    for record in &outcome.records {
        for found in record_problems(record, expect) {
            problem(format!("request {}: {found}", record.id));
        }
    }
    problems
}

fn record_problems(record: &RequestRecord, expect: &Expect) -> Vec<String> {
    let mut problems = Vec::new();
    let message = record
        .error
        .as_ref()
        .map_or(String::new(), |error| error.message.clone());
    if record.error_class() != expect.class {
        problems.push(format!(
            "class {:?}, expected {:?} (message {message:?})",
            record.error_class(),
            expect.class
        ));
    }
    if expect.http_status.is_some() && record.http_status != expect.http_status {
        problems.push(format!(
            "http_status {:?}, expected {:?}",
            record.http_status, expect.http_status
        ));
    }
    if record.truncated() != expect.cut_short {
        problems.push(format!(
            "cut short: {}, expected {} ({} of {:?} tokens, finish_reason {:?})",
            record.truncated(),
            expect.cut_short,
            record.output_tokens(),
            record.max_tokens,
            record.finish_reason
        ));
    }
    let lowered = message.to_ascii_lowercase();
    for word in &expect.message {
        if !lowered.contains(&word.to_ascii_lowercase()) {
            problems.push(format!("message {message:?} does not name {word:?}"));
        }
    }
    if record.chunks.len() < expect.min_chunks {
        problems.push(format!(
            "{} chunk(s) kept, expected at least {}",
            record.chunks.len(),
            expect.min_chunks
        ));
    }
    let took = Duration::from_nanos(record.end_ns.saturating_sub(record.sent_ns));
    match expect.timing {
        Timing::Prompt if took >= PROMPT => {
            problems.push(format!("took {took:?}, expected under {PROMPT:?}"));
        }
        Timing::AtTimeout
            if took < REQUEST_TIMEOUT - Duration::from_millis(50)
                || took > REQUEST_TIMEOUT + TIMEOUT_SLACK =>
        {
            problems.push(format!(
                "took {took:?}, expected the {REQUEST_TIMEOUT:?} timeout"
            ));
        }
        Timing::Under(limit) if took >= limit => {
            problems.push(format!("took {took:?}, expected under {limit:?}"));
        }
        _ => {}
    }
    problems
}
