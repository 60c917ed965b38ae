//! One request on the wire: send a prepared body, timestamp every response chunk on arrival, classify how it
//! ended. Chunks are timestamped before they are parsed; parsing only decides what kind of chunk it was.

use std::borrow::Cow;
use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use serde::Deserialize;

use super::chunk_scan::{ChunkTemplate, scan_openai_chunk, scan_openai_chunk_learning};
use super::http1::{BodyEnd, BodyError, Flow, Http1Endpoint};
use super::request_ids::{REQUEST_ID_HEADER, RequestIds, TRACEPARENT_HEADER};
use super::sse::{SseError, SseEvent, SseParser};
use llmbench_model::record::{
    ChunkEvent, ChunkKind, ErrorClass, FinishReason, RequestError, RequestRecord, Usage,
};
use llmbench_workload::request::PreparedRequest;
use llmbench_workload::workload::ApiKind;

/// How long a request may take when its profile sets no timeout: one hour, from send to the end of the
/// response, however the server stalls (no head, a stall after it, a trickle, a request it never reads).
///
/// Without a bound a hung server hangs the run, and the records of the requests it holds are never written.
/// The anchors, when their user sets nothing: inference-perf runs on aiohttp's default session timeout,
/// `ClientTimeout(total=300)`; `vllm bench serve` on `AIOHTTP_TIMEOUT = ClientTimeout(total=6 * 60 * 60)`;
/// guidellm bounds connecting (5 s) but not reading; MLPerf LoadGen has no per-query timeout, and its Offline
/// scenario issues every sample at once, so a query may queue for most of a run. One hour is a BenchmarkRun's
/// default budget and llm-d-benchmark's harness wait (3 600 s): no single request outlasts a default run, yet a
/// request queued behind an Offline burst or a `request-rate: inf` run — where vLLM's six hours and LoadGen's
/// none matter — is not cut at five minutes. inference-perf's five minutes are that harness's own default:
/// its dialect is the place to apply them, not every run.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(60 * 60);

/// The largest non-streamed response body accepted. A completion with logprobs for tens of thousands of tokens
/// stays below it; beyond it is a server that does not stop, and keeping its bytes would take the launcher's
/// memory.
pub(crate) const MAX_BODY: usize = 64 * 1024 * 1024;

/// The run's monotonic clock: every timestamp is nanoseconds since `t0`.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    t0: Instant,
}

impl Clock {
    pub fn start() -> Self {
        Self { t0: Instant::now() }
    }

    pub fn t0(&self) -> Instant {
        self.t0
    }

    pub(crate) fn ns_of(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.t0).as_nanos()).unwrap_or(u64::MAX)
    }

    pub(crate) fn now_ns(&self) -> u64 {
        self.ns_of(Instant::now())
    }
}

/// Where requests go and how.
#[derive(Debug)]
pub struct Target {
    pub transport: Transport,
    /// The full URL of the completions or chat completions endpoint.
    pub url: String,
    pub api_key: Option<String>,
    pub headers: Vec<(String, String)>,
    pub request_timeout: Option<Duration>,
    pub streaming: bool,
    /// The API the requests speak, which decides how response events read.
    pub api: ApiKind,
    /// Keep each response's generated text in its record (for accuracy scoring; off for load runs).
    pub keep_text: bool,
    /// The `x-request-id` and `traceparent` each request carries.
    pub request_ids: RequestIds,
    /// Further endpoints the requests are spread over in turn (AIPerf's several `--url`): request `id` goes to
    /// endpoint `id mod (1 + spread.len())`, `transport` and `url` being endpoint 0.
    pub spread: Vec<(Transport, String)>,
}

impl Target {
    /// The client and URL of request `id`.
    fn endpoint(&self, id: u64) -> (&Transport, &str) {
        let n = 1 + self.spread.len() as u64;
        match (id % n).checked_sub(1) {
            Some(k) => {
                let (transport, url) = &self.spread[k as usize];
                (transport, url)
            }
            None => (&self.transport, &self.url),
        }
    }
}

/// Anthropic's API version header, as inference-perf sends it beside a key (`ANTHROPIC_VERSION`).
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// The headers that carry the API key: `Authorization: Bearer KEY` for OpenAI's APIs; for Anthropic's Messages
/// API, `x-api-key: KEY` and `anthropic-version`, as inference-perf sends them (`openai_client.py`, 7de5ef2).
pub fn key_headers(api: ApiKind, key: &str) -> Vec<(String, String)> {
    match api {
        ApiKind::Messages => vec![
            ("x-api-key".to_owned(), key.to_owned()),
            ("anthropic-version".to_owned(), ANTHROPIC_VERSION.to_owned()),
        ],
        ApiKind::Completion
        | ApiKind::Chat
        | ApiKind::Responses
        | ApiKind::Embeddings
        | ApiKind::Rerank => {
            vec![("Authorization".to_owned(), format!("Bearer {key}"))]
        }
    }
}

/// The HTTP client a run uses.
#[derive(Debug)]
pub enum Transport {
    /// Plain `http://` with no proxy: our own HTTP/1.1 client, one wake-up per read and no per-connection buffers
    /// (see [`super::http1`]). The endpoint carries the URL and headers.
    Http1(Http1Endpoint),
    /// TLS or a proxy: reqwest, which handles both.
    Reqwest(reqwest::Client),
}

/// The identity of one issued request.
#[derive(Debug, Clone, Copy)]
pub struct Issue {
    pub id: u64,
    pub stage: u32,
    pub scheduled_ns: u64,
    /// Abandon the request this long after it was fully written, answered or not (AIPerf's request
    /// cancellation); `None` for every other request.
    pub abandon_after: Option<Duration>,
}

/// Sends `request` and returns its complete record. Never fails: every failure is classified in the record. When
/// `cancel` fires first (the run was interrupted, or its stage hit an error limit), the request ends as
/// `cancelled` with the timings it had.
pub async fn execute(
    target: &Target,
    request: &PreparedRequest,
    issue: Issue,
    clock: &Clock,
    cancel: &super::control::Flag,
) -> RequestRecord {
    execute_tapped(target, request, issue, clock, cancel, &mut ()).await
}

/// What a caller sees of a response as it arrives; a run's requests watch nothing (`()`), which compiles to
/// nothing.
pub(crate) trait Watch {
    /// Every piece of a successful response's body, before it is parsed.
    fn bytes(&mut self, _bytes: &[u8]) {}
    /// A stream's first token chunk arrived at `at_ns`; the request went out at `sent_ns`. Called once.
    fn first_token(&mut self, _at_ns: u64, _sent_ns: u64) {}
}

impl Watch for () {}

/// [`execute`], telling `watch` of the stream's first token as it arrives (guidellm's over-saturation detector).
pub(crate) async fn execute_watched<W: Watch>(
    target: &Target,
    request: &PreparedRequest,
    issue: Issue,
    clock: &Clock,
    cancel: &super::control::Flag,
    watch: &mut W,
) -> RequestRecord {
    execute_tapped(target, request, issue, clock, cancel, watch).await
}

/// The probe's watch: keeps the start of the body.
struct KeepBody<'a>(&'a mut Vec<u8>);

impl Watch for KeepBody<'_> {
    fn bytes(&mut self, bytes: &[u8]) {
        let room = PROBE_BODY_LIMIT.saturating_sub(self.0.len());
        self.0.extend_from_slice(&bytes[..bytes.len().min(room)]);
    }
}

/// The most of a test request's response body [`probe`] keeps.
pub(crate) const PROBE_BODY_LIMIT: usize = 64 * 1024;

/// A test request's outcome: its record, classified exactly as a run's request would be, and the start of its
/// response body (at most [`PROBE_BODY_LIMIT`] bytes; for a stream, the event text without its HTTP framing).
#[derive(Debug)]
pub struct Probed {
    pub record: RequestRecord,
    pub body: Vec<u8>,
}

/// Sends `request` once, as [`execute`] sends a run's request (the same transport, headers and API key, the
/// target's timeout), keeping its response body: the pre-flight's test request, which reads what a record does
/// not keep (the model the answer names).
pub async fn probe(target: &Target, request: &PreparedRequest, clock: &Clock) -> Probed {
    let mut body = Vec::new();
    let never = super::control::Flag::default();
    let issue = Issue {
        id: 0,
        stage: 0,
        scheduled_ns: clock.now_ns(),
        abandon_after: None,
    };
    let record = execute_tapped(
        target,
        request,
        issue,
        clock,
        &never,
        &mut KeepBody(&mut body),
    )
    .await;
    Probed { record, body }
}

/// [`execute`], showing every piece of a successful response's body to `tap` as it arrives (a run's requests
/// pass a tap that does nothing, which compiles to nothing).
async fn execute_tapped<T: Watch>(
    target: &Target,
    request: &PreparedRequest,
    issue: Issue,
    clock: &Clock,
    cancel: &super::control::Flag,
    tap: &mut T,
) -> RequestRecord {
    let mut record = RequestRecord {
        id: issue.id,
        stage: issue.stage,
        scheduled_ns: issue.scheduled_ns,
        sent_ns: 0,
        end_ns: 0,
        input_tokens: request.input_tokens,
        max_tokens: request.max_tokens,
        ignore_eos: request.ignore_eos,
        streaming: target.streaming,
        inputs: request.inputs.unwrap_or(0),
        http_status: None,
        usage: None,
        finish_reason: None,
        error: None,
        // One event per token plus the usage and role events, so a short stream's vector never grows on the I/O
        // path; capped so a huge max_tokens the server never reaches does not reserve memory for nothing.
        chunks: Vec::with_capacity(request.max_tokens.map_or(0, |n| n as usize + 2).min(256)),
        text: None,
        conversation: None,
        warmup: false,
        // Made before the clock reads the send time, so they cost the measured latency nothing.
        request_id: target.request_ids.request_id(issue.id),
        traceparent: target.request_ids.traceparent(issue.id).map(Box::new),
        adapter: request.adapter.clone(),
        images: request.images.clone(),
    };
    let limit = target.request_timeout.unwrap_or(DEFAULT_REQUEST_TIMEOUT);
    let (written, abandoned) = match issue.abandon_after {
        Some(delay) => {
            let (written, was_written) = tokio::sync::oneshot::channel();
            (Some(written), Some(abandon(was_written, delay)))
        }
        None => (None, None),
    };
    // The exchange writes into `record` as it goes, so chunks that arrived before a timeout stay in it.
    let exchange = exchange(target, issue.id, request, clock, &mut record, tap, written);
    let limited = async {
        tokio::time::timeout(limit, exchange)
            .await
            .unwrap_or_else(|_| {
                Err(RequestError {
                    class: ErrorClass::Timeout,
                    message: format!(
                        "no complete response within the {} request timeout",
                        humantime::format_duration(limit)
                    ),
                })
            })
    };
    let stopped = || RequestError {
        class: ErrorClass::Cancelled,
        message:
            "cancelled in flight: the run or its stage stopped (see the summary's stop reason)"
                .to_owned(),
    };
    let outcome = match abandoned {
        None => tokio::select! {
            outcome = limited => outcome,
            () = cancel.raised() => Err(stopped()),
        },
        Some(abandoned) => tokio::select! {
            outcome = limited => outcome,
            () = cancel.raised() => Err(stopped()),
            error = abandoned => Err(error),
        },
    };
    record.end_ns = clock.now_ns();
    if record.sent_ns == 0 {
        record.sent_ns = record.end_ns;
    }
    if let Err(error) = outcome {
        record.error = Some(Box::new(error));
    }
    record
}

/// Resolves `delay` after the request was fully written (`was_written`), with the error that abandons it, as
/// AIPerf's `_request_with_cancellation` does: the request always reaches the server, then the client hangs up
/// (the connection is dropped, not pooled), discarding whatever of the answer had arrived. Never resolves when
/// the request was never written (its exchange fails on its own).
async fn abandon(was_written: tokio::sync::oneshot::Receiver<()>, delay: Duration) -> RequestError {
    if was_written.await.is_err() {
        return std::future::pending().await;
    }
    llmbench_model::timer::sleep_until(Instant::now() + delay).await;
    RequestError {
        class: ErrorClass::ClientCancelled,
        // AIPerf's own message (`f"Request cancelled {timeout_s:.3f}s after being sent"`).
        message: format!(
            "Request cancelled {:.3}s after being sent",
            delay.as_secs_f64()
        ),
    }
}

async fn exchange<T: Watch>(
    target: &Target,
    id: u64,
    request: &PreparedRequest,
    clock: &Clock,
    record: &mut RequestRecord,
    tap: &mut T,
    written: Option<tokio::sync::oneshot::Sender<()>>,
) -> Result<(), RequestError> {
    match target.endpoint(id) {
        (Transport::Http1(endpoint), _) => {
            exchange_http1(endpoint, target, request, clock, record, tap, written).await
        }
        (Transport::Reqwest(client), url) => {
            exchange_reqwest((client, url), target, request, clock, record, tap, written).await
        }
    }
}

async fn exchange_http1<T: Watch>(
    endpoint: &Http1Endpoint,
    target: &Target,
    request: &PreparedRequest,
    clock: &Clock,
    record: &mut RequestRecord,
    tap: &mut T,
    written: Option<tokio::sync::oneshot::Sender<()>>,
) -> Result<(), RequestError> {
    let traceparent = record.traceparent.as_ref().map(|t| t.header_value());
    let ids = [
        record
            .request_id
            .as_deref()
            .map(|id| (REQUEST_ID_HEADER, id.as_bytes())),
        traceparent
            .as_ref()
            .map(|value| (TRACEPARENT_HEADER, value.as_slice())),
    ];
    record.sent_ns = clock.now_ns();
    let response = endpoint
        .send(
            &request.body,
            request.header.as_deref(),
            &ids,
            clock,
            written,
        )
        .await?;
    let status = response.status();
    record.http_status = Some(status);
    if !(200..300).contains(&status) {
        let body = response
            .read_prefix(clock, ERROR_BODY_LIMIT, ERROR_BODY_WAIT)
            .await;
        return Err(status_error(status, &body));
    }
    if target.streaming {
        let mut events = StreamEvents::new(target.api, target.keep_text);
        let ended = response
            .read_body(clock, |bytes, at_ns| {
                tap.bytes(bytes);
                events.push(bytes, at_ns, record, tap)
            })
            .await;
        match ended {
            Ok(BodyEnd::Stopped) => Ok(()),
            Ok(BodyEnd::Complete) => events.at_end(record),
            Err(BodyError::Caller(error)) => Err(error),
            Err(BodyError::Cut(reason)) => Err(stream_cut(record, &reason)),
        }
    } else {
        let mut body = Vec::new();
        let mut at_ns = 0;
        let ended = response
            .read_body(clock, |bytes, at| {
                tap.bytes(bytes);
                append_capped(&mut body, bytes)?;
                at_ns = at;
                Ok(Flow::More)
            })
            .await;
        match ended {
            Ok(_) => whole_body(&body, at_ns, record, target.api, target.keep_text),
            Err(BodyError::Caller(error)) => Err(error),
            Err(BodyError::Cut(reason)) => Err(body_cut(&reason)),
        }
    }
}

async fn exchange_reqwest<T: Watch>(
    (client, url): (&reqwest::Client, &str),
    target: &Target,
    request: &PreparedRequest,
    clock: &Clock,
    record: &mut RequestRecord,
    tap: &mut T,
    written: Option<tokio::sync::oneshot::Sender<()>>,
) -> Result<(), RequestError> {
    let mut builder = client
        .post(url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(request.body.clone());
    if let Some(key) = &target.api_key {
        for (name, value) in key_headers(target.api, key) {
            builder = builder.header(name, value);
        }
    }
    for (name, value) in &target.headers {
        builder = builder.header(name, value);
    }
    if let Some(header) = &request.header {
        builder = builder.header(&header.0, &header.1);
    }
    if let Some(id) = &record.request_id {
        builder = builder.header(REQUEST_ID_HEADER, &**id);
    }
    if let Some(parent) = &record.traceparent {
        builder = builder.header(TRACEPARENT_HEADER, parent.header_value().as_slice());
    }
    record.sent_ns = clock.now_ns();
    // reqwest does not say when its connection wrote the request: an abandon's clock starts at the hand-off.
    if let Some(written) = written {
        let _ = written.send(());
    }
    let mut response = builder.send().await.map_err(classify_send_error)?;
    let status = response.status();
    record.http_status = Some(status.as_u16());
    if !status.is_success() {
        let body = read_error_body(response).await;
        return Err(status_error(status.as_u16(), &body));
    }
    if target.streaming {
        let mut body = response.bytes_stream();
        let mut events = StreamEvents::new(target.api, target.keep_text);
        while let Some(read) = body.next().await {
            let at_ns = clock.now_ns();
            let bytes = read.map_err(|e| stream_cut(record, &error_chain(&e)))?;
            tap.bytes(&bytes);
            if events.push(&bytes, at_ns, record, tap)? == Flow::Stop {
                return Ok(());
            }
        }
        events.at_end(record)
    } else {
        let mut body = Vec::new();
        while let Some(bytes) = response
            .chunk()
            .await
            .map_err(|e| body_cut(&error_chain(&e)))?
        {
            tap.bytes(&bytes);
            append_capped(&mut body, &bytes)?;
        }
        whole_body(&body, clock.now_ns(), record, target.api, target.keep_text)
    }
}

/// Appends a read of a non-streamed body, failing once the body would pass [`MAX_BODY`].
fn append_capped(body: &mut Vec<u8>, bytes: &[u8]) -> Result<(), RequestError> {
    if body.len().saturating_add(bytes.len()) > MAX_BODY {
        return Err(RequestError {
            class: ErrorClass::MalformedEvent,
            message: format!(
                "malformed response: the body is longer than the {MAX_BODY}-byte limit"
            ),
        });
    }
    body.extend_from_slice(bytes);
    Ok(())
}

/// The most of an error response's body kept in the record's message.
const ERROR_BODY_LIMIT: usize = 2048;
/// How long an error response's body is waited for once its status arrived: the status is the answer, the body
/// only its explanation, so a server that stalls there gets an `http_status` record, not a timeout.
const ERROR_BODY_WAIT: Duration = Duration::from_secs(1);

/// `HTTP 429 Too Many Requests: <the body's prefix>`, the body left out when the server sent none.
fn status_error(status: u16, body: &[u8]) -> RequestError {
    let mut message = format!("HTTP {status}");
    if let Some(reason) = reqwest::StatusCode::from_u16(status)
        .ok()
        .and_then(|code| code.canonical_reason())
    {
        message.push(' ');
        message.push_str(reason);
    }
    let body = String::from_utf8_lossy(&body[..body.len().min(ERROR_BODY_LIMIT)]);
    if !body.trim().is_empty() {
        message.push_str(": ");
        message.push_str(body.trim());
    }
    RequestError {
        class: ErrorClass::HttpStatus,
        message,
    }
}

fn stream_cut(record: &RequestRecord, reason: &str) -> RequestError {
    RequestError {
        class: ErrorClass::StreamCut,
        message: format!(
            "stream cut after {} chunk(s): {reason}",
            record.chunks.len()
        ),
    }
}

/// A non-streamed body that ended early.
fn body_cut(reason: &str) -> RequestError {
    RequestError {
        class: ErrorClass::StreamCut,
        message: format!("response body cut: {reason}"),
    }
}

/// An SSE response on its way into a record: every event timestamped with the read it arrived in.
struct StreamEvents {
    parser: SseParser,
    finished: bool,
    api: ApiKind,
    keep_text: bool,
    /// Whether a token chunk arrived (the watch is told of the first).
    token_seen: bool,
    /// The last chunk scanned whole, which the next ones are usually read from.
    template: ChunkTemplate,
}

impl StreamEvents {
    fn new(api: ApiKind, keep_text: bool) -> Self {
        Self {
            parser: SseParser::default(),
            finished: false,
            api,
            keep_text,
            token_seen: false,
            template: ChunkTemplate::default(),
        }
    }

    /// Takes one network read; `Stop` once `[DONE]` arrived.
    fn push<W: Watch>(
        &mut self,
        bytes: &[u8],
        at_ns: u64,
        record: &mut RequestRecord,
        watch: &mut W,
    ) -> Result<Flow, RequestError> {
        self.parser.push(bytes);
        while let Some(event) = self.parser.next_event().map_err(malformed_stream)? {
            match event {
                SseEvent::Done => return Ok(Flow::Stop),
                SseEvent::Data(payload) => {
                    let chunk = parse_stream_chunk(
                        payload,
                        self.api,
                        self.keep_text,
                        Some(&mut self.template),
                    )?;
                    if let Some(usage) = chunk.usage {
                        record.usage = Some(usage.over(record.usage));
                    }
                    keep(record, chunk.text);
                    if let Some(reason) = chunk.finish_reason {
                        // The last chunk that carried one says how the answer ended.
                        record.finish_reason = Some(reason);
                        self.finished = true;
                    }
                    if let Some(kind) = chunk.kind {
                        if !self.token_seen && kind.tokens().is_some() {
                            self.token_seen = true;
                            watch.first_token(at_ns, record.sent_ns);
                        }
                        record.chunks.push(ChunkEvent { at_ns, kind });
                    }
                }
            }
        }
        self.parser.compact();
        Ok(Flow::More)
    }

    /// The body ended without `[DONE]`: fine after a finish reason (some servers stop there), a cut otherwise.
    fn at_end(&self, record: &RequestRecord) -> Result<(), RequestError> {
        if self.finished && !self.parser.has_partial() {
            return Ok(());
        }
        Err(RequestError {
            class: ErrorClass::StreamCut,
            message: format!(
                "stream ended without [DONE] after {} chunk(s)",
                record.chunks.len()
            ),
        })
    }
}

fn malformed_stream(error: SseError) -> RequestError {
    RequestError {
        class: ErrorClass::MalformedEvent,
        message: format!("malformed response event stream: {error}"),
    }
}

/// A whole (non-streamed) response body, arrived at `at_ns`.
fn whole_body(
    body: &[u8],
    at_ns: u64,
    record: &mut RequestRecord,
    api: ApiKind,
    keep_text: bool,
) -> Result<(), RequestError> {
    if body.is_empty() {
        return Err(RequestError {
            class: ErrorClass::MalformedEvent,
            message: "malformed response: the body is empty".to_owned(),
        });
    }
    let chunk = parse_chunk(body, api, keep_text)?;
    record.usage = chunk.usage.map(|usage| usage.over(None));
    record.finish_reason = chunk.finish_reason;
    keep(record, chunk.text);
    if let Some(kind) = chunk.kind {
        record.chunks.push(ChunkEvent { at_ns, kind });
    }
    Ok(())
}

/// Appends a chunk's text to the record's generated text.
fn keep(record: &mut RequestRecord, text: Option<String>) {
    if let Some(text) = text {
        record.text.get_or_insert_with(Box::default).push_str(&text);
    }
}

/// What one JSON chunk (or a whole non-streamed response) told us.
#[derive(Debug, Default, PartialEq)]
pub(super) struct ParsedChunk {
    pub(super) kind: Option<ChunkKind>,
    pub(super) usage: Option<UsageSeen>,
    /// The first choice's `finish_reason` that is set (`null` until the last chunk).
    pub(super) finish_reason: Option<FinishReason>,
    /// The chunk's generated text, when asked for.
    pub(super) text: Option<String>,
    /// The server failed the request in this event.
    pub(super) error: Option<RequestError>,
}

/// The token counts one event reported. OpenAI's chunks carry the whole usage each time; Anthropic's split it
/// (`message_start` has the input, `message_delta` the output), so a count an event leaves out keeps the one an
/// earlier event gave.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct UsageSeen {
    pub(super) prompt_tokens: Option<u32>,
    pub(super) completion_tokens: Option<u32>,
    pub(super) cached_tokens: Option<u32>,
    pub(super) reasoning_tokens: Option<u32>,
}

impl UsageSeen {
    /// The record's usage once this event is read over what it had.
    fn over(self, before: Option<Usage>) -> Usage {
        Usage {
            prompt_tokens: self
                .prompt_tokens
                .or(before.map(|u| u.prompt_tokens))
                .unwrap_or(0),
            completion_tokens: self
                .completion_tokens
                .or(before.map(|u| u.completion_tokens))
                .unwrap_or(0),
            cached_tokens: self.cached_tokens.or(before.and_then(|u| u.cached_tokens)),
            reasoning_tokens: self
                .reasoning_tokens
                .or(before.and_then(|u| u.reasoning_tokens)),
        }
    }
}

#[derive(Deserialize)]
struct ChunkJson<'a> {
    #[serde(default, borrow)]
    choices: Vec<ChoiceJson<'a>>,
    #[serde(default)]
    usage: Option<UsageJson>,
    /// Present only when the server failed the request mid-stream, so its fields may be owned.
    #[serde(default)]
    error: Option<ErrorJson>,
}

#[derive(Deserialize)]
struct ChoiceJson<'a> {
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    delta: Option<MessageJson<'a>>,
    #[serde(default, borrow)]
    message: Option<MessageJson<'a>>,
    /// `null` until the last chunk; borrowed, so reading it allocates nothing.
    #[serde(default, borrow)]
    finish_reason: Option<Cow<'a, str>>,
}

impl<'a> ChoiceJson<'a> {
    /// A chat chunk's `delta`, or a whole chat answer's `message`.
    fn message(&self) -> Option<&MessageJson<'a>> {
        self.delta.as_ref().or(self.message.as_ref())
    }
}

#[derive(Deserialize)]
struct MessageJson<'a> {
    #[serde(default, borrow)]
    content: Option<Cow<'a, str>>,
    /// vLLM's reasoning parsers' field (before v0.10.2 the only one)…
    #[serde(default, borrow)]
    reasoning_content: Option<Cow<'a, str>>,
    /// … and its newer name, which OpenAI-compatible servers (vLLM since 0.10.2, Ollama, OpenRouter) send.
    #[serde(default, borrow)]
    reasoning: Option<Cow<'a, str>>,
}

impl MessageJson<'_> {
    fn has_content(&self) -> bool {
        self.content.as_deref().is_some_and(|c| !c.is_empty())
    }

    fn has_reasoning(&self) -> bool {
        [&self.reasoning_content, &self.reasoning]
            .into_iter()
            .any(|r| r.as_deref().is_some_and(|r| !r.is_empty()))
    }
}

#[derive(Deserialize)]
struct UsageJson {
    #[serde(default)]
    prompt_tokens: u32,
    #[serde(default)]
    completion_tokens: u32,
    /// OpenAI's and vLLM's `PromptTokenUsageInfo`; vLLM writes `null` (or leaves it out) unless it runs with
    /// `--enable-prompt-tokens-details` and the request hit its prefix cache.
    #[serde(default)]
    prompt_tokens_details: Option<PromptTokensDetailsJson>,
    /// OpenAI's `CompletionTokensDetails`: the reasoning part of `completion_tokens`.
    #[serde(default)]
    completion_tokens_details: Option<CompletionTokensDetailsJson>,
}

#[derive(Deserialize)]
struct PromptTokensDetailsJson {
    #[serde(default)]
    cached_tokens: Option<u32>,
}

#[derive(Deserialize)]
struct CompletionTokensDetailsJson {
    #[serde(default)]
    reasoning_tokens: Option<u32>,
}

/// An error a server put in place of a chunk: OpenAI and vLLM send `{"error": {"message", "type", "code"}}`,
/// some servers a bare string.
#[derive(Deserialize)]
#[serde(untagged)]
enum ErrorJson {
    Message(String),
    Object {
        #[serde(default)]
        message: Option<String>,
        #[serde(default, rename = "type")]
        kind: Option<String>,
        #[serde(default)]
        code: Option<serde_json::Value>,
    },
}

impl ErrorJson {
    fn into_request_error(self) -> RequestError {
        let described = match self {
            ErrorJson::Message(message) => message,
            ErrorJson::Object {
                message,
                kind,
                code,
            } => {
                let mut described = message.unwrap_or_else(|| "(no message)".to_owned());
                let labels: Vec<String> = kind
                    .into_iter()
                    .chain(code.filter(|c| !c.is_null()).map(|c| c.to_string()))
                    .collect();
                if !labels.is_empty() {
                    described.push_str(&format!(" ({})", labels.join(", ")));
                }
                described
            }
        };
        RequestError {
            class: ErrorClass::Other,
            message: format!("server reported an error in the response: {described}"),
        }
    }
}

fn parse_chunk(payload: &[u8], api: ApiKind, keep_text: bool) -> Result<ParsedChunk, RequestError> {
    parse_stream_chunk(payload, api, keep_text, None)
}

/// [`parse_chunk`] for the next event of a stream whose last scanned chunk is `template` (see
/// [`ChunkTemplate`]): read from it when only its text differs, else scanned whole and learnt from.
fn parse_stream_chunk(
    payload: &[u8],
    api: ApiKind,
    keep_text: bool,
    template: Option<&mut ChunkTemplate>,
) -> Result<ParsedChunk, RequestError> {
    let openai = matches!(api, ApiKind::Completion | ApiKind::Chat);
    if openai
        && let Some(template) = &template
        && let Some(parsed) = template.reread(payload, keep_text)
    {
        return Ok(parsed);
    }
    let malformed = |reason: String| RequestError {
        class: ErrorClass::MalformedEvent,
        message: format!("malformed response event ({reason}): {}", preview(payload)),
    };
    // JSON is UTF-8 throughout: checking the whole event once is cheaper than serde_json checking every key and
    // string it meets, the largest part of a chunk's parse.
    let text = std::str::from_utf8(payload).map_err(|e| malformed(e.to_string()))?;
    let parsed = match api {
        // The scanner reads the usual chunk without a JSON tree; whatever it cannot prove it reads exactly, the
        // reference parser reads (see `chunk_scan`).
        ApiKind::Completion | ApiKind::Chat => {
            let scanned = match template {
                Some(template) => scan_openai_chunk_learning(text, keep_text, template),
                None => scan_openai_chunk(text, keep_text),
            };
            match scanned {
                Some(parsed) => Ok(parsed),
                None => parse_openai_chunk(text, keep_text),
            }
        }
        ApiKind::Responses => super::api_events::parse_responses(text, keep_text),
        ApiKind::Messages => super::api_events::parse_messages(text, keep_text),
        ApiKind::Embeddings | ApiKind::Rerank => super::api_events::parse_pooling(text),
    };
    let mut parsed = parsed.map_err(|e| malformed(e.to_string()))?;
    match parsed.error.take() {
        Some(error) => Err(error),
        None => Ok(parsed),
    }
}

/// A completions or chat completions chunk, or a whole answer of either, read by serde_json: the reference that
/// `chunk_scan` must agree with, and the reader of every event it leaves.
pub(super) fn parse_openai_chunk(
    text: &str,
    keep_text: bool,
) -> Result<ParsedChunk, serde_json::Error> {
    let chunk: ChunkJson<'_> = serde_json::from_str(text)?;
    if let Some(error) = chunk.error {
        return Ok(ParsedChunk {
            error: Some(error.into_request_error()),
            ..ParsedChunk::default()
        });
    }
    let usage = chunk.usage.map(|u| UsageSeen {
        prompt_tokens: Some(u.prompt_tokens),
        completion_tokens: Some(u.completion_tokens),
        cached_tokens: u.prompt_tokens_details.and_then(|d| d.cached_tokens),
        reasoning_tokens: u.completion_tokens_details.and_then(|d| d.reasoning_tokens),
    });
    let finish_reason = chunk
        .choices
        .iter()
        .find_map(|c| c.finish_reason.as_deref())
        .map(FinishReason::from_server);
    let kind = if chunk.choices.is_empty() {
        usage.map(|_| ChunkKind::UsageOnly)
    } else {
        let has_content = chunk.choices.iter().any(|c| {
            c.text.as_deref().is_some_and(|t| !t.is_empty())
                || c.message().is_some_and(MessageJson::has_content)
        });
        let has_reasoning = || {
            chunk
                .choices
                .iter()
                .any(|c| c.message().is_some_and(MessageJson::has_reasoning))
        };
        Some(if has_content {
            ChunkKind::Content { tokens: 1 }
        } else if has_reasoning() {
            ChunkKind::Reasoning { tokens: 1 }
        } else {
            ChunkKind::Empty
        })
    };
    let text = keep_text.then(|| {
        chunk
            .choices
            .iter()
            .map(|c| {
                let message = c.delta.as_ref().or(c.message.as_ref());
                let content = message
                    .and_then(|m| m.content.as_deref())
                    .unwrap_or_default();
                format!("{}{content}", c.text.as_deref().unwrap_or_default())
            })
            .collect::<String>()
    });
    Ok(ParsedChunk {
        kind,
        usage,
        finish_reason,
        text,
        error: None,
    })
}

fn preview(payload: &[u8]) -> String {
    let text = String::from_utf8_lossy(&payload[..payload.len().min(120)]);
    text.into_owned()
}

/// At most [`ERROR_BODY_LIMIT`] bytes of an error response's body, read for at most [`ERROR_BODY_WAIT`].
async fn read_error_body(mut response: reqwest::Response) -> Vec<u8> {
    let mut body = Vec::new();
    let read = async {
        while let Ok(Some(chunk)) = response.chunk().await {
            body.extend_from_slice(&chunk);
            if body.len() >= ERROR_BODY_LIMIT {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(ERROR_BODY_WAIT, read).await;
    body
}

fn classify_send_error(error: reqwest::Error) -> RequestError {
    let message = error_chain(&error);
    let class = if error.is_timeout() {
        ErrorClass::Timeout
    } else if error.is_connect() {
        ErrorClass::Connect
    } else if is_reset(&error) {
        ErrorClass::ConnectionReset
    } else {
        ErrorClass::Other
    };
    RequestError { class, message }
}

fn is_reset(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = source {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind::{
                BrokenPipe, ConnectionAborted, ConnectionReset, UnexpectedEof,
            };
            if matches!(
                io.kind(),
                ConnectionReset | ConnectionAborted | BrokenPipe | UnexpectedEof
            ) {
                return true;
            }
        }
        if e.to_string()
            .contains("connection closed before message completed")
        {
            return true;
        }
        source = e.source();
    }
    false
}

fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        message.push_str(": ");
        message.push_str(&e.to_string());
        source = e.source();
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_role_only_chat_delta_is_an_empty_chunk() {
        let chunk = parse_chunk(
            br#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#,
            ApiKind::Chat,
            false,
        )
        .expect("parses");
        assert_eq!(chunk.kind, Some(ChunkKind::Empty));
    }

    #[test]
    fn a_completion_token_is_a_content_chunk_and_a_finish_reason_is_seen() {
        let chunk = parse_chunk(
            br#"{"choices":[{"index":0,"text":" hi","finish_reason":"length"}],"usage":null}"#,
            ApiKind::Chat,
            true,
        )
        .expect("parses");
        assert_eq!(chunk.kind, Some(ChunkKind::Content { tokens: 1 }));
        assert_eq!(chunk.finish_reason, Some(FinishReason::Length));
        assert_eq!(chunk.usage, None);
        assert_eq!(chunk.text.as_deref(), Some(" hi"));
    }

    #[test]
    fn a_finish_reason_is_read_as_sent_and_null_is_none() {
        let reason = |json: &[u8]| {
            parse_chunk(json, ApiKind::Chat, false)
                .expect("parses")
                .finish_reason
        };
        // llama.cpp's last chunk: empty text, the reason, and usage together.
        assert_eq!(
            reason(br#"{"choices":[{"text":"","index":0,"logprobs":null,"finish_reason":"length"}],"usage":{"completion_tokens":323,"prompt_tokens":701}}"#),
            Some(FinishReason::Length)
        );
        assert_eq!(
            reason(br#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#),
            Some(FinishReason::Stop)
        );
        assert_eq!(
            reason(br#"{"choices":[{"index":0,"text":"a","finish_reason":null}]}"#),
            None
        );
        assert_eq!(
            reason(br#"{"choices":[{"index":0,"text":"","finish_reason":"eos_token"}]}"#),
            Some(FinishReason::Other(Box::new("eos_token".to_owned())))
        );
    }

    #[test]
    fn a_delta_of_reasoning_alone_is_a_reasoning_chunk_and_content_wins_over_it() {
        let kind = |json: &[u8]| parse_chunk(json, ApiKind::Chat, true).expect("parses").kind;
        for field in ["reasoning_content", "reasoning"] {
            let json = format!(r#"{{"choices":[{{"index":0,"delta":{{"{field}":"hmm"}}}}]}}"#);
            assert_eq!(
                kind(json.as_bytes()),
                Some(ChunkKind::Reasoning { tokens: 1 }),
                "{field}"
            );
        }
        assert_eq!(
            kind(
                br#"{"choices":[{"index":0,"delta":{"reasoning_content":"so","content":"Yes"}}]}"#
            ),
            Some(ChunkKind::Content { tokens: 1 })
        );
        assert_eq!(
            kind(br#"{"choices":[{"index":0,"delta":{"reasoning_content":"","content":""}}]}"#),
            Some(ChunkKind::Empty)
        );
        // The kept text is the answer's, not the reasoning.
        let chunk = parse_chunk(
            br#"{"choices":[{"index":0,"delta":{"reasoning_content":"so"}}]}"#,
            ApiKind::Chat,
            true,
        )
        .expect("parses");
        assert_eq!(chunk.text.as_deref(), Some(""));
    }

    #[test]
    fn reasoning_tokens_are_read_from_completion_tokens_details() {
        let chunk = parse_chunk(
            br#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":40,"completion_tokens_details":{"reasoning_tokens":31}}}"#, ApiKind::Chat, false)
        .expect("parses");
        assert_eq!(chunk.usage.and_then(|u| u.reasoning_tokens), Some(31));
    }

    #[test]
    fn chat_deltas_keep_their_text_only_when_asked() {
        let payload = br#"{"choices":[{"index":0,"delta":{"content":"Hello"}}]}"#;
        assert_eq!(
            parse_chunk(payload, ApiKind::Chat, true)
                .expect("parses")
                .text
                .as_deref(),
            Some("Hello")
        );
        assert_eq!(
            parse_chunk(payload, ApiKind::Chat, false)
                .expect("parses")
                .text,
            None
        );
    }

    #[test]
    fn the_usage_chunk_carries_token_counts() {
        let chunk = parse_chunk(br#"{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}"#, ApiKind::Chat, false)
            .expect("parses");
        assert_eq!(chunk.kind, Some(ChunkKind::UsageOnly));
        assert_eq!(
            chunk.usage.map(|u| u.over(None)),
            Some(Usage {
                prompt_tokens: 7,
                completion_tokens: 3,
                cached_tokens: None,
                reasoning_tokens: None,
            })
        );
    }

    #[test]
    fn cached_tokens_are_read_from_prompt_tokens_details_and_absent_stays_absent() {
        let cached = |json: &[u8]| {
            parse_chunk(json, ApiKind::Chat, false)
                .expect("parses")
                .usage
                .expect("usage")
                .cached_tokens
        };
        assert_eq!(
            cached(br#"{"choices":[],"usage":{"prompt_tokens":26,"total_tokens":28,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":20}}}"#),
            Some(20)
        );
        // OpenAI's shape, with other details beside it; a reported 0 is kept as 0.
        assert_eq!(
            cached(br#"{"usage":{"prompt_tokens":5,"completion_tokens":1,"prompt_tokens_details":{"audio_tokens":0,"cached_tokens":0}},"choices":[]}"#),
            Some(0)
        );
        // vLLM's whole body without the details: null, not 0.
        assert_eq!(
            cached(br#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":1,"prompt_tokens_details":null}}"#),
            None
        );
        assert_eq!(
            cached(br#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":1,"prompt_tokens_details":{}}}"#),
            None
        );
    }

    #[test]
    fn a_non_json_event_is_malformed() {
        let error = parse_chunk(b"this is not json", ApiKind::Chat, false).expect_err("malformed");
        assert_eq!(error.class, ErrorClass::MalformedEvent);
        assert!(error.message.contains("this is not json"));
    }

    #[test]
    fn an_error_object_in_the_stream_fails_the_request() {
        let error = parse_chunk(
            br#"{"error":{"message":"boom","code":500}}"#,
            ApiKind::Chat,
            false,
        )
        .expect_err("error");
        assert!(error.message.contains("boom"));
    }

    /// A record of a request whose head said 200 (from JSON, so fields added to records later need no change).
    fn record_of(streaming: bool) -> RequestRecord {
        serde_json::from_value(serde_json::json!({
            "id": 0, "stage": 0, "scheduled_ns": 0, "sent_ns": 0, "end_ns": 0, "input_tokens": 0,
            "streaming": streaming, "http_status": 200,
        }))
        .expect("a minimal record")
    }

    #[test]
    fn a_status_error_names_the_code_and_the_body_only_when_there_is_one() {
        let error = status_error(429, b"");
        assert_eq!(error.class, ErrorClass::HttpStatus);
        assert_eq!(error.message, "HTTP 429 Too Many Requests");
        let error = status_error(503, b"  {\"message\":\"overloaded\"}\n");
        assert_eq!(
            error.message,
            "HTTP 503 Service Unavailable: {\"message\":\"overloaded\"}"
        );
        assert_eq!(status_error(599, b"x").message, "HTTP 599: x");
    }

    #[test]
    fn an_error_given_as_a_bare_string_fails_the_request_with_it() {
        let error = parse_chunk(br#"{"error":"model is loading"}"#, ApiKind::Chat, false)
            .expect_err("error");
        assert_eq!(error.class, ErrorClass::Other);
        assert!(
            error.message.ends_with(": model is loading"),
            "{}",
            error.message
        );
        let chunk =
            parse_chunk(br#"{"choices":[],"error":null}"#, ApiKind::Chat, false).expect("no error");
        assert_eq!(chunk.kind, None);
    }

    #[test]
    fn an_sse_line_past_the_limit_is_a_malformed_event_naming_the_limit() {
        let mut record = record_of(true);
        let mut events = StreamEvents::new(ApiKind::Chat, false);
        let mut line = b"data: ".to_vec();
        line.resize(super::super::sse::MAX_LINE + 1, b'a');
        let error = events
            .push(&line, 0, &mut record, &mut ())
            .expect_err("over the limit");
        assert_eq!(error.class, ErrorClass::MalformedEvent);
        assert!(
            error.message.contains("16777216-byte limit"),
            "{}",
            error.message
        );
    }

    #[test]
    fn a_non_streamed_body_is_refused_past_its_limit_and_when_empty() {
        let mut body = vec![0; MAX_BODY - 1];
        append_capped(&mut body, b"x").expect("up to the limit");
        let error = append_capped(&mut body, b"y").expect_err("past the limit");
        assert_eq!(error.class, ErrorClass::MalformedEvent);
        assert!(
            error.message.contains("67108864-byte limit"),
            "{}",
            error.message
        );
        let mut record = record_of(false);
        let error = whole_body(b"", 0, &mut record, ApiKind::Chat, false).expect_err("empty");
        assert_eq!(error.class, ErrorClass::MalformedEvent);
        assert!(error.message.contains("empty"), "{}", error.message);
    }
}
