//! The raw per-request record: what the engine timestamps during a run, one line of `requests.jsonl` per
//! request. Every metric is derived from these records afterwards (see `metrics`), so each tool's definition
//! (inference-perf, vllm bench serve, guidellm, MLPerf LoadGen; FORMATS.md §3) can be computed from the same run.
//!
//! All times are `u64` nanoseconds since the run's monotonic t0. The engine owns the `Instant`; this module
//! never sees a clock. A record stays small while a request is in flight (no text, no per-chunk strings: one
//! 16-byte [`ChunkEvent`] per SSE chunk), so tens of thousands of concurrent streams cost little.
//!
//! Conventions the engine follows when filling a record:
//! - `sent_ns` is taken just before the request goes on the wire; `scheduled_ns` is when the schedule wanted it.
//! - Every SSE chunk is recorded on arrival, before parsing, classified by what it carried ([`ChunkKind`]).
//!   Arrival is when its bytes reached the socket where the kernel stamps them (Linux, plain-http client), else
//!   when the read returned.
//! - A non-streaming request records at most one `Content` chunk (the body); token-timing metrics (TTFT, TPOT,
//!   ITL) are `None` for it, as inference-perf reports them null without streaming.
//! - A failed request carries `error`; a response with a non-2xx status counts as failed even without one.
//! - An answer shorter than asked is not an error: the record keeps what the server said (`finish_reason`, `usage`)
//!   and what was asked (`max_tokens`, `ignore_eos`), and [`RequestRecord::outcome`] calls it `truncated`.
//! - A chunk that carried only reasoning (`reasoning_content`, or `reasoning`) is a [`ChunkKind::Reasoning`]: a
//!   token like any other for TTFT, TPOT and ITL, and the end of the wait for TTFO only when content follows.

use std::fmt;
use std::io::BufRead;

use serde::{Deserialize, Serialize};

/// One request as measured by the engine. Serialized as one compact JSON line of `requests.jsonl`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestRecord {
    /// Request id, unique within the run.
    pub id: u64,
    /// Index of the load stage that issued the request.
    pub stage: u32,
    /// When the schedule intended the request to be sent.
    pub scheduled_ns: u64,
    /// When the request was actually sent.
    pub sent_ns: u64,
    /// When the response was complete (or the request failed).
    pub end_ns: u64,
    /// Prompt length in tokens, as we built it.
    pub input_tokens: u32,
    /// The `max_tokens` we asked for, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Whether the request asked for exactly `max_tokens` output tokens (`ignore_eos: true`), so a shorter answer
    /// is [`Outcome::Truncated`].
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ignore_eos: bool,
    /// Whether the request asked for a streamed (SSE) response.
    pub streaming: bool,
    /// For a pooling request (embeddings, rerank): the inputs it carried — embedding inputs, rerank documents —
    /// for inputs/s; 0 for a generation request (see [`RequestRecord::inputs`]). A plain count rather than an
    /// `Option` keeps the record within its three cache lines.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub inputs: u32,
    /// HTTP status of the response, if one arrived.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_status: Option<u16>,
    /// Token counts reported by the server (`usage`), if it sent them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// Why the server ended the answer, as it sent it (`choices[0].finish_reason`; streamed, the last chunk's that
    /// carried one); `None` when it sent none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<FinishReason>,
    /// Why the request failed; `None` for a success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<Box<RequestError>>,
    /// Every response chunk in arrival order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub chunks: Vec<ChunkEvent>,
    /// The generated text, kept only when the run needs it (MLPerf accuracy mode scores it); None otherwise. Boxed
    /// so that records of load runs stay one pointer larger, not three.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<Box<String>>,
    /// For a turn of a multi-turn conversation: which conversation, and which turn of it (from 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation: Option<TurnOf>,
    /// A warm-up request (vllm `--num-warmups`): sent and recorded, but left out of every metric and report.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub warmup: bool,
    /// The `x-request-id` header the request carried, so it can be found in the server's logs; `None` when
    /// llmbench sent none (the profile sets its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<Box<String>>,
    /// The W3C `traceparent` header the request carried, so it can be found in the server's traces; `None` when
    /// llmbench sent none (the profile sets its own).
    /// Boxed (made before the send time, as `request_id`), so the record keeps to three cache lines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<Box<TraceParent>>,
    /// The LoRA adapter the request named as its `model` (vLLM `--lora-modules`, inference-perf
    /// `lora_traffic_split`); `None` for the base model. Shared with the prepared body, so it costs no allocation;
    /// a thin pointer, as `request_id` and `FinishReason::Other`, so the record keeps to three cache lines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adapter: Option<std::sync::Arc<String>>,
    /// The synthetic images the request carried, as inference-perf's lifecycle metrics measure them; `None` for a
    /// request without any (or whose images are dataset paths, whose size the client never reads). Shared with the
    /// prepared body, a thin pointer like `adapter`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub images: Option<std::sync::Arc<Vec<SentImage>>>,
}

/// One synthetic image a request carried (inference-perf `payloads/image/metrics.py` `Image`: its pixels, the
/// encoded bytes sent, its aspect ratio), kept as the image's size and bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SentImage {
    pub width: u32,
    pub height: u32,
    /// The encoded image's bytes (PNG or JPEG), before base64.
    pub bytes: u32,
}

impl SentImage {
    /// `width · height`.
    pub fn pixels(&self) -> u64 {
        u64::from(self.width) * u64::from(self.height)
    }

    /// `width / height`, 0 for an image of no height (as inference-perf's `get_metrics`).
    pub fn aspect_ratio(&self) -> f64 {
        if self.height > 0 {
            f64::from(self.width) / f64::from(self.height)
        } else {
            0.0
        }
    }
}

/// A request's place in a multi-turn conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnOf {
    /// The conversation (inference-perf: the user session), unique within the run.
    pub id: u32,
    /// The turn (inference-perf: the chat round), from 0.
    pub turn: u32,
}

/// One finished session of an inference-perf `trace_session_replay` (`SessionLifecycleMetric` of
/// `inference_perf/apis/base.py`, built by `build_session_metric` in
/// `datagen/replay/replay_graph_session_datagen.py`): what only the engine knows — the session's graph size, its
/// calls that answered, and those never sent after its first failure. Token totals and the first request error
/// are added from the session's request records when the reports are written. A session is recorded once it
/// answered every call or first failed; one still running when its stage stops is not (upstream reports only the
/// sessions its main loop saw complete).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionRecord {
    /// Its conversation id: the records of its calls carry it as `conversation.id`.
    pub id: u32,
    /// Upstream's `session_id` (`trace{slot}_{session}`).
    pub name: String,
    /// The trace file it was read from (upstream's `file_path`).
    pub file: String,
    pub stage: u32,
    /// When its roots were due, on the run clock.
    pub start_ns: u64,
    /// When its last call answered, or when it first failed.
    pub end_ns: u64,
    /// Calls in its graph.
    pub num_events: u32,
    /// Calls that answered (before the first failure, for a failed session).
    pub completed: u32,
    /// For a failed session, its calls that neither answered nor were the failing one (upstream:
    /// `total_events_in_session − completed_so_far − 1`); 0 for one that succeeded.
    pub cancelled: u32,
    /// Why it failed when the failing call was not sent (upstream's `SessionReplayError` reason); a session whose
    /// failing call was sent takes that call's error instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}

/// Token counts from the server's `usage` object.
///
/// JSON: `{"prompt_tokens":…,"completion_tokens":…}`, plus `"cached_tokens":…` when the server reported
/// `usage.prompt_tokens_details.cached_tokens` and `"reasoning_tokens":…` when it reported
/// `usage.completion_tokens_details.reasoning_tokens`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub prompt_tokens: u32,
    /// Every generated token, reasoning included (OpenAI's and vLLM's `completion_tokens`).
    pub completion_tokens: u32,
    /// `usage.prompt_tokens_details.cached_tokens`: prompt tokens the server took from its prefix cache. `None`
    /// when the server did not send it, which is not the same as 0: vLLM sends it only with
    /// `--enable-prompt-tokens-details`, and then only for requests that hit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u32>,
    /// `usage.completion_tokens_details.reasoning_tokens`: the part of `completion_tokens` the model spent
    /// reasoning (OpenAI's field; AIPerf reads it with `--use-server-token-count`). `None` when not reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u32>,
}

/// Why the server ended an answer: `choices[0].finish_reason` as it sent it.
///
/// The reasons OpenAI-compatible servers send have a variant each (so recording one allocates nothing on the
/// request path); any other is kept verbatim.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FinishReason {
    /// A stop condition: end of sequence, a stop string or token.
    Stop,
    /// A length limit: `max_tokens`, or the server's own context end (llama.cpp).
    Length,
    /// The server aborted the request (vLLM, SGLang).
    Abort,
    /// The model called a tool.
    ToolCalls,
    /// A content filter cut the answer.
    ContentFilter,
    /// The server failed the request mid-answer (vLLM's `error`).
    Error,
    /// Any other reason, verbatim. Boxed twice so the enum stays two words (a tag and a thin pointer) in every
    /// record.
    Other(Box<String>),
}

impl FinishReason {
    /// The reason a server sent.
    pub fn from_server(reason: &str) -> FinishReason {
        match reason {
            "stop" => FinishReason::Stop,
            "length" => FinishReason::Length,
            "abort" => FinishReason::Abort,
            "tool_calls" => FinishReason::ToolCalls,
            "content_filter" => FinishReason::ContentFilter,
            "error" => FinishReason::Error,
            other => FinishReason::Other(Box::new(other.to_owned())),
        }
    }

    /// The reason as the server spelled it.
    pub fn as_str(&self) -> &str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
            FinishReason::Abort => "abort",
            FinishReason::ToolCalls => "tool_calls",
            FinishReason::ContentFilter => "content_filter",
            FinishReason::Error => "error",
            FinishReason::Other(other) => other.as_str(),
        }
    }
}

impl fmt::Display for FinishReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for FinishReason {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for FinishReason {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let reason = std::borrow::Cow::<'de, str>::deserialize(deserializer)?;
        Ok(FinishReason::from_server(&reason))
    }
}

/// A W3C Trace Context `traceparent` (version 00, sampled): the trace and parent span a request carried, written
/// `00-<32 hex trace id>-<16 hex span id>-01`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TraceParent {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
}

impl TraceParent {
    /// The header's length: `00-` + 32 + `-` + 16 + `-01`.
    pub const LEN: usize = 55;

    /// The header value, written into a fixed buffer (no allocation: it is built on the request path).
    pub fn header_value(&self) -> [u8; Self::LEN] {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut out = [0u8; Self::LEN];
        out[..3].copy_from_slice(b"00-");
        let mut at = 3;
        for byte in self.trace_id {
            out[at] = HEX[usize::from(byte >> 4)];
            out[at + 1] = HEX[usize::from(byte & 0xf)];
            at += 2;
        }
        out[at] = b'-';
        at += 1;
        for byte in self.span_id {
            out[at] = HEX[usize::from(byte >> 4)];
            out[at + 1] = HEX[usize::from(byte & 0xf)];
            at += 2;
        }
        out[at..].copy_from_slice(b"-01");
        out
    }
}

impl fmt::Display for TraceParent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let value = self.header_value();
        // Only ASCII hex digits and dashes are ever written.
        f.write_str(std::str::from_utf8(&value).map_err(|_| fmt::Error)?)
    }
}

impl std::str::FromStr for TraceParent {
    type Err = String;

    /// Parses `00-<trace id>-<span id>-<flags>` (the flags are not kept: llmbench always sends `01`).
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("not a W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>): {s:?}");
        let mut parts = s.split('-');
        let (Some("00"), Some(trace), Some(span), Some(flags), None) = (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
        ) else {
            return Err(bad());
        };
        let hex = |text: &str, out: &mut [u8]| -> Option<()> {
            if text.len() != out.len() * 2 {
                return None;
            }
            for (i, byte) in out.iter_mut().enumerate() {
                *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
            }
            Some(())
        };
        let mut parent = TraceParent {
            trace_id: [0; 16],
            span_id: [0; 8],
        };
        hex(trace, &mut parent.trace_id).ok_or_else(bad)?;
        hex(span, &mut parent.span_id).ok_or_else(bad)?;
        hex(flags, &mut [0u8]).ok_or_else(bad)?;
        Ok(parent)
    }
}

impl Serialize for TraceParent {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for TraceParent {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = std::borrow::Cow::<'de, str>::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// One response chunk: when it arrived and what it carried.
///
/// JSON: `{"at_ns":…,"kind":"content","tokens":1}`, `{"at_ns":…,"kind":"reasoning","tokens":1}`,
/// `{"at_ns":…,"kind":"empty"}`, `{"at_ns":…,"kind":"usage_only"}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "ChunkEventRepr", into = "ChunkEventRepr")]
pub struct ChunkEvent {
    pub at_ns: u64,
    pub kind: ChunkKind,
}

/// What a chunk carried. The kinds matter because the tools disagree on which chunk ends TTFT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChunkKind {
    /// A `choices` chunk with non-empty text/content. `tokens` is what the server said the chunk carried when
    /// known, else 1.
    Content { tokens: u32 },
    /// A chat chunk whose delta carried reasoning (`reasoning_content`, or `reasoning`) and no content: tokens
    /// the model generated, which a user does not see as the answer (AIPerf's and guidellm's TTFO waits past
    /// them). Counted like content everywhere else.
    Reasoning { tokens: u32 },
    /// A `choices` chunk with empty text, or a role-only chat delta. vllm bench serve counts it for TTFT;
    /// inference-perf does not.
    Empty,
    /// The final chunk with empty `choices` that carries only `usage`.
    UsageOnly,
}

impl ChunkKind {
    /// Whether the chunk carried `choices` (Content or Empty): vllm bench serve's notion of a token chunk.
    pub fn has_choices(self) -> bool {
        !matches!(self, ChunkKind::UsageOnly)
    }

    /// Tokens carried by a token chunk (`Content` or `Reasoning`); `None` for the other kinds.
    pub fn tokens(self) -> Option<u32> {
        match self {
            ChunkKind::Content { tokens } | ChunkKind::Reasoning { tokens } => Some(tokens),
            ChunkKind::Empty | ChunkKind::UsageOnly => None,
        }
    }
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum ChunkKindTag {
    Content,
    Reasoning,
    Empty,
    UsageOnly,
}

/// The flat JSON shape of a chunk, so a line reads `{"at_ns":5,"kind":"content","tokens":1}` rather than
/// serde's nested enum form.
#[derive(Serialize, Deserialize)]
struct ChunkEventRepr {
    at_ns: u64,
    kind: ChunkKindTag,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tokens: Option<u32>,
}

impl From<ChunkEventRepr> for ChunkEvent {
    fn from(repr: ChunkEventRepr) -> Self {
        let kind = match repr.kind {
            // A content chunk whose token count is unknown carries one token, as the engine records it.
            ChunkKindTag::Content => ChunkKind::Content {
                tokens: repr.tokens.unwrap_or(1),
            },
            ChunkKindTag::Reasoning => ChunkKind::Reasoning {
                tokens: repr.tokens.unwrap_or(1),
            },
            ChunkKindTag::Empty => ChunkKind::Empty,
            ChunkKindTag::UsageOnly => ChunkKind::UsageOnly,
        };
        ChunkEvent {
            at_ns: repr.at_ns,
            kind,
        }
    }
}

impl From<ChunkEvent> for ChunkEventRepr {
    fn from(event: ChunkEvent) -> Self {
        let (kind, tokens) = match event.kind {
            ChunkKind::Content { tokens } => (ChunkKindTag::Content, Some(tokens)),
            ChunkKind::Reasoning { tokens } => (ChunkKindTag::Reasoning, Some(tokens)),
            ChunkKind::Empty => (ChunkKindTag::Empty, None),
            ChunkKind::UsageOnly => (ChunkKindTag::UsageOnly, None),
        };
        ChunkEventRepr {
            at_ns: event.at_ns,
            kind,
            tokens,
        }
    }
}

/// Why a request failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestError {
    pub class: ErrorClass,
    pub message: String,
}

/// Failure classes, counted per class in the summary's `errors`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorClass {
    /// The server answered with a non-2xx status (the code is in `RequestRecord::http_status`).
    HttpStatus,
    /// The request exceeded its timeout.
    Timeout,
    /// The connection was reset or closed by the peer.
    ConnectionReset,
    /// The connection could not be established.
    Connect,
    /// The stream ended before `[DONE]` or a finish reason.
    StreamCut,
    /// A response event could not be parsed.
    MalformedEvent,
    /// The run stopped the request: an interrupt (SIGTERM, SIGINT), an error limit of the stage, or an earlier
    /// turn of its conversation that failed. The record keeps the timings it had.
    Cancelled,
    /// The load generator abandoned the request on purpose once it was sent, before its answer was complete: a
    /// simulated client disconnect (AIPerf's `--request-cancellation-rate`), an error as AIPerf counts it.
    ClientCancelled,
    /// Anything else.
    Other,
}

impl ErrorClass {
    /// Every class, in declaration order (the records file's codes are their places here).
    pub const ALL: [ErrorClass; 9] = [
        ErrorClass::HttpStatus,
        ErrorClass::Timeout,
        ErrorClass::ConnectionReset,
        ErrorClass::Connect,
        ErrorClass::StreamCut,
        ErrorClass::MalformedEvent,
        ErrorClass::Cancelled,
        ErrorClass::ClientCancelled,
        ErrorClass::Other,
    ];

    /// The snake_case name, as in JSON and as the key in `errors {<class>: count}`.
    pub const fn as_str(self) -> &'static str {
        match self {
            ErrorClass::HttpStatus => "http_status",
            ErrorClass::Timeout => "timeout",
            ErrorClass::ConnectionReset => "connection_reset",
            ErrorClass::Connect => "connect",
            ErrorClass::StreamCut => "stream_cut",
            ErrorClass::MalformedEvent => "malformed_event",
            ErrorClass::Cancelled => "cancelled",
            ErrorClass::ClientCancelled => "client_cancelled",
            ErrorClass::Other => "other",
        }
    }
}

impl fmt::Display for ErrorClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a failed request is counted in `errors`: its class, and for HTTP failures the status, so the summary
/// says `http_429` rather than a bare `http_status` (a 429 and a 503 call for different fixes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ErrorKey {
    pub class: ErrorClass,
    pub http_status: Option<u16>,
}

impl fmt::Display for ErrorKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.class, self.http_status) {
            (ErrorClass::HttpStatus, Some(status)) => write!(f, "http_{status}"),
            (class, _) => f.write_str(class.as_str()),
        }
    }
}

/// How a request ended, as every summary counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// It answered what was asked.
    Succeeded,
    /// It answered, but shorter than asked ([`RequestRecord::truncated`]): counted apart from successes, and kept
    /// out of the latency figures, whose tokens it did not all produce.
    Truncated,
    /// It failed; counted under this key in `errors`.
    Failed(ErrorKey),
}

/// `a − b`, or 0 if the clock readings are out of order (they never should be; a bad record must not wrap).
fn since(a: u64, b: u64) -> u64 {
    a.saturating_sub(b)
}

impl RequestRecord {
    /// About how many bytes the record holds in memory: the struct, its chunks, its text and its error message.
    /// Cheap (no walk over the chunks), for the record writer's memory budget.
    pub fn memory_bytes(&self) -> u64 {
        let chunks = self.chunks.capacity() * std::mem::size_of::<ChunkEvent>();
        let text = self
            .text
            .as_ref()
            .map_or(0, |t| std::mem::size_of::<String>() + t.capacity());
        let error = self.error.as_ref().map_or(0, |e| {
            std::mem::size_of::<RequestError>() + e.message.capacity()
        });
        let request_id = self
            .request_id
            .as_ref()
            .map_or(0, |id| std::mem::size_of::<String>() + id.capacity());
        let reason = match &self.finish_reason {
            Some(FinishReason::Other(reason)) => std::mem::size_of::<String>() + reason.capacity(),
            _ => 0,
        };
        (std::mem::size_of::<RequestRecord>() + chunks + text + error + request_id + reason) as u64
    }

    /// The inputs a pooling request carried; `None` for a generation request.
    pub fn inputs(&self) -> Option<u32> {
        (self.inputs > 0).then_some(self.inputs)
    }

    /// Whether the request went on the wire. Only a record the run made for a request it never sent is not: a
    /// later turn of a guidellm conversation whose earlier turn failed, recorded `cancelled` with its send time
    /// equal to its end and no response.
    pub fn was_sent(&self) -> bool {
        !(self.error_class() == Some(ErrorClass::Cancelled)
            && self.sent_ns == self.end_ns
            && self.http_status.is_none()
            && self.chunks.is_empty())
    }

    /// Whether the request succeeded: no error, and no non-2xx status. An answer cut short succeeded in this
    /// sense (the server answered); [`outcome`](Self::outcome) tells the two apart.
    pub fn succeeded(&self) -> bool {
        self.error_class().is_none()
    }

    /// Whether the answer came back shorter than asked, though the server answered (no error, a 2xx status):
    /// - it asked for `max_tokens` and got fewer [output tokens](Self::output_tokens), and either asked for exactly
    ///   that many (`ignore_eos`: inference-perf counts this case a failure, `TruncatedResponseError`,
    ///   kubernetes-sigs/inference-perf#746) or was told the server stopped at a length limit (`finish_reason:
    ///   length` short of `max_tokens`: the server's own context end, where llama.cpp stops instead of refusing);
    ///   a whole body without `usage` is not judged so, its length being unknown;
    /// - or the server said it gave up on the answer (`finish_reason: abort`, vLLM's and SGLang's, or `error`,
    ///   vLLM's for a request that failed in the engine), however long it was.
    pub fn truncated(&self) -> bool {
        if !self.succeeded() {
            return false;
        }
        if matches!(
            self.finish_reason,
            Some(FinishReason::Abort | FinishReason::Error)
        ) {
            return true;
        }
        let Some(max_tokens) = self.max_tokens else {
            return false;
        };
        let length_known = self.usage.is_some() || self.streaming;
        length_known
            && self.output_tokens() < max_tokens
            && (self.ignore_eos || self.finish_reason == Some(FinishReason::Length))
    }

    /// How the request ended: succeeded, answered short of what was asked, or failed.
    pub fn outcome(&self) -> Outcome {
        match self.error_key() {
            Some(key) => Outcome::Failed(key),
            None if self.truncated() => Outcome::Truncated,
            None => Outcome::Succeeded,
        }
    }

    /// The failure class: the recorded error's, or `HttpStatus` for a non-2xx response recorded without one.
    pub fn error_class(&self) -> Option<ErrorClass> {
        match (&self.error, self.http_status) {
            (Some(error), _) => Some(error.class),
            (None, Some(status)) if !(200..300).contains(&status) => Some(ErrorClass::HttpStatus),
            (None, _) => None,
        }
    }

    /// The key this request is counted under in `errors`, `None` for a success.
    pub(crate) fn error_key(&self) -> Option<ErrorKey> {
        self.error_class().map(|class| ErrorKey {
            class,
            http_status: self.http_status.filter(|_| class == ErrorClass::HttpStatus),
        })
    }

    /// Output tokens: the server's `usage.completion_tokens` when present (vllm, guidellm, inference-perf with
    /// server counts), else the sum of the token chunks' tokens (reasoning included, as in `completion_tokens`).
    pub fn output_tokens(&self) -> u32 {
        match self.usage {
            Some(usage) => usage.completion_tokens,
            None => self
                .chunks
                .iter()
                .filter_map(|c| c.kind.tokens())
                .fold(0u32, u32::saturating_add),
        }
    }

    /// Reasoning tokens: the server's `usage.completion_tokens_details.reasoning_tokens` when it reported them,
    /// else the tokens of the streamed reasoning chunks; 0 for an answer without reasoning. They are part of
    /// [`output_tokens`](Self::output_tokens), as they are of the server's `completion_tokens`.
    pub fn reasoning_tokens(&self) -> u32 {
        match self.usage.and_then(|u| u.reasoning_tokens) {
            Some(reported) => reported,
            None => self
                .streamed_chunks()
                .iter()
                .filter_map(|c| match c.kind {
                    ChunkKind::Reasoning { tokens } => Some(tokens),
                    _ => None,
                })
                .fold(0u32, u32::saturating_add),
        }
    }

    /// Input tokens: the server's `usage.prompt_tokens` when present, else the prompt length as we built it
    /// (inference-perf's rule).
    pub fn prompt_tokens(&self) -> u32 {
        self.usage.map_or(self.input_tokens, |u| u.prompt_tokens)
    }

    /// The chunks that carry token timing: all of them when streaming, none otherwise.
    fn streamed_chunks(&self) -> &[ChunkEvent] {
        if self.streaming { &self.chunks } else { &[] }
    }

    /// The streamed chunks that carried tokens: content and reasoning.
    fn token_chunks(&self) -> impl DoubleEndedIterator<Item = &ChunkEvent> {
        self.streamed_chunks()
            .iter()
            .filter(|c| c.kind.tokens().is_some())
    }

    fn first_token_ns(&self) -> Option<u64> {
        self.token_chunks().next().map(|c| c.at_ns)
    }

    fn last_token_ns(&self) -> Option<u64> {
        self.token_chunks().next_back().map(|c| c.at_ns)
    }

    /// End-to-end latency from the send: `end − sent` (inference-perf's `request_latency`, guidellm's).
    pub fn e2e_ns(&self) -> u64 {
        since(self.end_ns, self.sent_ns)
    }

    /// End-to-end latency from the scheduled time: `end − scheduled` (MLPerf LoadGen; free of coordinated
    /// omission, since a late send counts against the system).
    pub fn e2e_from_scheduled_ns(&self) -> u64 {
        since(self.end_ns, self.scheduled_ns)
    }

    /// How late the send was: `sent − scheduled` (inference-perf's `schedule_delay`); 0 if sent early.
    pub fn schedule_delay_ns(&self) -> u64 {
        since(self.sent_ns, self.scheduled_ns)
    }

    /// TTFT as inference-perf and guidellm define it: first chunk with non-empty content (or reasoning: the first
    /// token, whatever it is) − sent. `None` without a token chunk or without streaming.
    pub fn ttft_ns(&self) -> Option<u64> {
        self.first_token_ns().map(|t| since(t, self.sent_ns))
    }

    /// Time to first output token (TTFO) as AIPerf (`time_to_first_output_token`) and guidellm 0.8
    /// (`time_to_first_output_token_ms`) define it: the first chunk with content, not reasoning, − sent. Equal to
    /// [`ttft_ns`](Self::ttft_ns) for an answer without reasoning; `None` without content or without streaming.
    pub fn ttfo_ns(&self) -> Option<u64> {
        self.streamed_chunks()
            .iter()
            .find(|c| matches!(c.kind, ChunkKind::Content { .. }))
            .map(|c| since(c.at_ns, self.sent_ns))
    }

    /// TTFT from the scheduled time: first token chunk − scheduled (MLPerf LoadGen's first-token latency).
    pub fn ttft_from_scheduled_ns(&self) -> Option<u64> {
        self.first_token_ns().map(|t| since(t, self.scheduled_ns))
    }

    /// TTFT as vllm bench serve defines it: first chunk carrying `choices`, even with empty text or a role-only
    /// delta, − sent.
    pub fn ttft_vllm_ns(&self) -> Option<u64> {
        self.streamed_chunks()
            .iter()
            .find(|c| c.kind.has_choices())
            .map(|c| since(c.at_ns, self.sent_ns))
    }

    /// E2E as vllm bench serve defines it (v0.32 `endpoint_request_func.py`): the last chunk carrying `choices`
    /// − sent; the trailing usage-only chunk does not advance it. `None` without such a chunk or without streaming.
    pub fn e2e_vllm_ns(&self) -> Option<u64> {
        self.streamed_chunks()
            .iter()
            .rev()
            .find(|c| c.kind.has_choices())
            .map(|c| since(c.at_ns, self.sent_ns))
    }

    /// TPOT as inference-perf defines it (and guidellm's "ITL"): `(last content − first content) / (n − 1)`,
    /// n = [`output_tokens`](Self::output_tokens). Excludes the first token; `None` for n < 2. Truncated to whole ns.
    pub fn tpot_ns(&self) -> Option<u64> {
        let n = self.output_tokens();
        if n < 2 {
            return None;
        }
        let first = self.first_token_ns()?;
        let last = self.last_token_ns()?;
        Some(since(last, first) / u64::from(n - 1))
    }

    /// TPOT as vllm bench serve defines it: `(e2e_vllm − ttft_vllm) / (n − 1)`; `None` for n < 2.
    pub fn tpot_vllm_ns(&self) -> Option<u64> {
        let n = self.output_tokens();
        if n < 2 {
            return None;
        }
        let e2e = self.e2e_vllm_ns()?;
        let ttft = self.ttft_vllm_ns()?;
        Some(since(e2e, ttft) / u64::from(n - 1))
    }

    /// NTPOT as inference-perf defines it: `(end − sent) / n`, streaming or not; `None` for n = 0.
    pub fn ntpot_ns(&self) -> Option<u64> {
        match self.output_tokens() {
            0 => None,
            n => Some(self.e2e_ns() / u64::from(n)),
        }
    }

    /// guidellm's `time_per_output_token`: `(last token − sent) / n`, TTFT included but ending at the last
    /// token rather than at the end of the request; `None` for n = 0, without a content chunk or without
    /// streaming.
    pub fn guidellm_tpot_ns(&self) -> Option<u64> {
        let n = self.output_tokens();
        if n == 0 {
            return None;
        }
        let last = self.last_token_ns()?;
        Some(since(last, self.sent_ns) / u64::from(n))
    }

    /// Inter-token latency per chunk: the gap between each pair of consecutive token chunks (what our
    /// summary's ITL pools). Empty without streaming.
    pub fn itl_gaps_ns(&self) -> impl Iterator<Item = u64> + '_ {
        gaps(self.token_chunks())
    }

    /// Inter-token latency as vllm bench serve defines it: gaps between consecutive chunks carrying `choices`
    /// (Empty included). Empty without streaming.
    pub fn itl_vllm_gaps_ns(&self) -> impl Iterator<Item = u64> + '_ {
        gaps(
            self.streamed_chunks()
                .iter()
                .filter(|c| c.kind.has_choices()),
        )
    }

    /// Inter-token latency as inference-perf defines it: per token, each token stamped with its chunk's arrival,
    /// so a chunk of k tokens contributes its gap to the previous chunk and then k − 1 zeros. Yields n − 1 gaps
    /// for n content tokens. Empty without streaming.
    pub fn itl_token_gaps_ns(&self) -> impl Iterator<Item = u64> + '_ {
        let mut prev: Option<u64> = None;
        self.token_chunks().flat_map(move |c| {
            let tokens = c.kind.tokens().unwrap_or(0);
            let (gap, zeros) = if tokens == 0 {
                // A chunk the server says carried no token stamps nothing.
                (None, 0)
            } else {
                let gap = prev.map(|p| since(c.at_ns, p));
                prev = Some(c.at_ns);
                (gap, tokens - 1)
            };
            gap.into_iter()
                .chain(std::iter::repeat_n(0, zeros as usize))
        })
    }
}

/// Gaps between consecutive chunk arrivals.
fn gaps<'a>(chunks: impl Iterator<Item = &'a ChunkEvent> + 'a) -> impl Iterator<Item = u64> + 'a {
    let mut prev: Option<u64> = None;
    chunks.filter_map(move |c| {
        let gap = prev.map(|p| since(c.at_ns, p));
        prev = Some(c.at_ns);
        gap
    })
}

/// Reading `requests.jsonl` back failed.
#[derive(Debug, thiserror::Error)]
pub enum ReadRecordsError {
    #[error("failed to read the records file")]
    Io(#[from] std::io::Error),
    #[error("malformed request record on line {line} of requests.jsonl")]
    Parse {
        line: usize,
        #[source]
        source: serde_json::Error,
    },
    /// The first bytes are not `record_file::MAGIC` (spelled out here: that module builds on this one).
    #[error(
        "the records file does not start with \"LLMBREC1\": it is not an llmbench records file, or one of another \
         version"
    )]
    NotARecordsFile,
    #[error("record {record} of the records file is damaged: {message}")]
    Decode { record: u64, message: &'static str },
}

/// Reads `requests.jsonl`: one record per line, blank lines ignored. A last line whose JSON is cut short is the
/// record a killed launcher was writing: it is skipped with a warning, not an error.
pub fn read_jsonl(reader: impl BufRead) -> Result<Vec<RequestRecord>, ReadRecordsError> {
    read_jsonl_counting_truncated(reader).map(|(records, _)| records)
}

/// Like [`read_jsonl`], also saying how many truncated last lines were skipped (0 or 1), so `llmbench report`
/// can tell the user the run was killed mid-write.
pub fn read_jsonl_counting_truncated(
    reader: impl BufRead,
) -> Result<(Vec<RequestRecord>, usize), ReadRecordsError> {
    let mut records = Vec::new();
    let skipped = for_each_jsonl(reader, |record| {
        records.push(record);
        Ok(())
    })?;
    Ok((records, skipped))
}

/// Reads `requests.jsonl` one record at a time, handing each to `f` and keeping none: memory is one line,
/// however long the run. Blank lines are ignored; a last line whose JSON is cut short (a killed launcher's) is
/// skipped with a warning. Returns how many lines were skipped so (0 or 1). An error `f` returns stops the read.
pub fn for_each_jsonl(
    mut reader: impl BufRead,
    mut f: impl FnMut(RequestRecord) -> Result<(), ReadRecordsError>,
) -> Result<usize, ReadRecordsError> {
    let mut skipped = 0;
    // One line of lookahead: only the last line may be torn.
    let mut line = Vec::new();
    let mut next = Vec::new();
    let mut index = 0;
    let mut more = reader.read_until(b'\n', &mut line)? > 0;
    while more {
        next.clear();
        let has_next = reader.read_until(b'\n', &mut next)? > 0;
        index += 1;
        if !line.iter().all(u8::is_ascii_whitespace) {
            match serde_json::from_slice(&line) {
                Ok(record) => f(record)?,
                // The writer appends whole lines, so more output means it finished this one.
                Err(source) if !has_next && source.is_eof() => {
                    tracing::warn!(
                        line = index,
                        "skipping a truncated last line of requests.jsonl"
                    );
                    skipped += 1;
                }
                Err(source) => {
                    return Err(ReadRecordsError::Parse {
                        line: index,
                        source,
                    });
                }
            }
        }
        std::mem::swap(&mut line, &mut next);
        more = has_next;
    }
    Ok(skipped)
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl RequestRecord {
    /// A record set field by field, for tests and tools in any crate: request `id`, stage 0, every time 0, no
    /// input tokens, streaming, and no answer until one is given (`.ok()`, `.status(…)`, `.error(…)`). A field
    /// added to [`RequestRecord`] gets its default here once, not in every test.
    pub fn builder(id: u64) -> RequestRecordBuilder {
        RequestRecordBuilder(RequestRecord {
            id,
            stage: 0,
            scheduled_ns: 0,
            sent_ns: 0,
            end_ns: 0,
            input_tokens: 0,
            max_tokens: None,
            ignore_eos: false,
            streaming: true,
            inputs: 0,
            http_status: None,
            usage: None,
            finish_reason: None,
            error: None,
            chunks: Vec::new(),
            text: None,
            conversation: None,
            warmup: false,
            request_id: None,
            traceparent: None,
            adapter: None,
            images: None,
        })
    }
}

/// Builds a [`RequestRecord`]: `RequestRecord::builder(7).sent(ms(5)).end(ms(90)).ok().content_at(ms(40), 3).build()`.
/// Times are nanoseconds since the run's t0, as in the record.
#[derive(Debug, Clone)]
#[must_use]
pub struct RequestRecordBuilder(RequestRecord);

impl RequestRecordBuilder {
    pub fn stage(mut self, stage: u32) -> Self {
        self.0.stage = stage;
        self
    }

    /// When the schedule wanted the request sent.
    pub fn scheduled(mut self, ns: u64) -> Self {
        self.0.scheduled_ns = ns;
        self
    }

    /// When it was sent, and scheduled for then too (set [`scheduled`](Self::scheduled) after it to differ).
    pub fn sent(mut self, ns: u64) -> Self {
        self.0.scheduled_ns = ns;
        self.0.sent_ns = ns;
        self
    }

    pub fn end(mut self, ns: u64) -> Self {
        self.0.end_ns = ns;
        self
    }

    pub fn input_tokens(mut self, tokens: u32) -> Self {
        self.0.input_tokens = tokens;
        self
    }

    pub fn max_tokens(mut self, tokens: u32) -> Self {
        self.0.max_tokens = Some(tokens);
        self
    }

    pub fn ignore_eos(mut self) -> Self {
        self.0.ignore_eos = true;
        self
    }

    pub fn streaming(mut self, streaming: bool) -> Self {
        self.0.streaming = streaming;
        self
    }

    /// A pooling request carrying `inputs` inputs (not streamed).
    pub fn inputs(mut self, inputs: u32) -> Self {
        self.0.inputs = inputs;
        self.0.streaming = false;
        self
    }

    /// Answered 200.
    pub fn ok(self) -> Self {
        self.status(200)
    }

    pub fn status(mut self, status: u16) -> Self {
        self.0.http_status = Some(status);
        self
    }

    /// The answer's `usage` with prompt and completion tokens only.
    pub fn usage(self, prompt_tokens: u32, completion_tokens: u32) -> Self {
        self.usage_of(Usage {
            prompt_tokens,
            completion_tokens,
            cached_tokens: None,
            reasoning_tokens: None,
        })
    }

    pub fn usage_of(mut self, usage: Usage) -> Self {
        self.0.usage = Some(usage);
        self
    }

    pub fn finish_reason(mut self, reason: FinishReason) -> Self {
        self.0.finish_reason = Some(reason);
        self
    }

    /// Failed: `class`, with `message`.
    pub fn error(mut self, class: ErrorClass, message: impl Into<String>) -> Self {
        self.0.error = Some(Box::new(RequestError {
            class,
            message: message.into(),
        }));
        self
    }

    /// A chunk arrived at `at_ns`, carrying `kind`.
    pub fn chunk(mut self, at_ns: u64, kind: ChunkKind) -> Self {
        self.0.chunks.push(ChunkEvent { at_ns, kind });
        self
    }

    /// A content chunk of `tokens` tokens arrived at `at_ns`.
    pub fn content_at(self, at_ns: u64, tokens: u32) -> Self {
        self.chunk(at_ns, ChunkKind::Content { tokens })
    }

    /// The answer's text (kept only with `--save-text` and the like).
    pub fn text(mut self, text: impl Into<String>) -> Self {
        self.0.text = Some(Box::new(text.into()));
        self
    }

    /// Turn `turn` of conversation `id`.
    pub fn turn(mut self, id: u32, turn: u32) -> Self {
        self.0.conversation = Some(TurnOf { id, turn });
        self
    }

    pub fn warmup(mut self) -> Self {
        self.0.warmup = true;
        self
    }

    pub fn request_id(mut self, id: &str) -> Self {
        self.0.request_id = Some(Box::new(id.into()));
        self
    }

    pub fn build(self) -> RequestRecord {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ChunkKind::{Content, Empty, Reasoning, UsageOnly};

    fn content(tokens: u32) -> ChunkKind {
        Content { tokens }
    }

    /// A streamed chat request scheduled at 90, sent at 100 and ended at 320, with these chunks.
    fn streamed(chunks: &[(u64, ChunkKind)]) -> RequestRecord {
        let mut record = RequestRecord::builder(1)
            .sent(100)
            .scheduled(90)
            .end(320)
            .input_tokens(10)
            .max_tokens(4)
            .ok();
        for &(at_ns, kind) in chunks {
            record = record.chunk(at_ns, kind);
        }
        record.build()
    }

    /// Role-only delta at 150, tokens at 200, 230, 260, 300, usage chunk at 310.
    #[test]
    fn the_builder_sets_what_it_is_told_and_leaves_the_rest_unanswered() {
        let bare = RequestRecord::builder(3).build();
        assert_eq!(
            (bare.id, bare.stage, bare.sent_ns, bare.end_ns),
            (3, 0, 0, 0)
        );
        assert!(bare.streaming && bare.http_status.is_none() && bare.error.is_none());
        assert!(bare.chunks.is_empty() && bare.usage.is_none() && !bare.warmup);
        let record = RequestRecord::builder(7)
            .stage(2)
            .sent(100)
            .scheduled(90)
            .end(400)
            .input_tokens(12)
            .max_tokens(3)
            .ignore_eos()
            .ok()
            .usage(12, 3)
            .finish_reason(FinishReason::Length)
            .content_at(200, 2)
            .chunk(300, UsageOnly)
            .turn(4, 1)
            .request_id("r-7")
            .build();
        assert_eq!(
            (record.scheduled_ns, record.sent_ns, record.end_ns),
            (90, 100, 400)
        );
        assert_eq!(
            (record.stage, record.max_tokens, record.ignore_eos),
            (2, Some(3), true)
        );
        assert_eq!(record.http_status, Some(200));
        assert_eq!(
            record.usage.map(|u| (u.prompt_tokens, u.completion_tokens)),
            Some((12, 3))
        );
        assert_eq!(
            record.chunks,
            [
                ChunkEvent {
                    at_ns: 200,
                    kind: content(2)
                },
                ChunkEvent {
                    at_ns: 300,
                    kind: UsageOnly
                }
            ]
        );
        assert_eq!(record.conversation, Some(TurnOf { id: 4, turn: 1 }));
        assert_eq!(
            record.request_id.as_deref().map(String::as_str),
            Some("r-7")
        );
        let failed = RequestRecord::builder(1)
            .status(503)
            .error(ErrorClass::HttpStatus, "busy")
            .build();
        assert_eq!(
            failed.error.map(|e| (e.class, e.message)),
            Some((ErrorClass::HttpStatus, "busy".to_owned()))
        );
        assert!(
            !RequestRecord::builder(0)
                .streaming(false)
                .warmup()
                .text("hi")
                .build()
                .streaming
        );
    }

    fn chat() -> RequestRecord {
        streamed(&[
            (150, Empty),
            (200, content(1)),
            (230, content(1)),
            (260, content(1)),
            (300, content(1)),
            (310, UsageOnly),
        ])
    }

    #[test]
    fn ttft_waits_for_the_first_content_chunk() {
        // inference-perf: the role-only delta at 150 does not count; 200 − 100 = 100.
        assert_eq!(chat().ttft_ns(), Some(100));
    }

    #[test]
    fn vllm_ttft_counts_a_role_only_chunk() {
        // vllm bench serve: the first chunk with choices, the role-only delta at 150; 150 − 100 = 50.
        assert_eq!(chat().ttft_vllm_ns(), Some(50));
    }

    #[test]
    fn ttft_is_none_without_content() {
        let r = streamed(&[(150, Empty), (310, UsageOnly)]);
        assert_eq!(r.ttft_ns(), None);
        assert_eq!(r.ttft_vllm_ns(), Some(50));
        assert_eq!(streamed(&[(310, UsageOnly)]).ttft_vllm_ns(), None);
    }

    #[test]
    fn tpot_excludes_the_first_token() {
        // n = 4 tokens: (300 − 200) / (4 − 1) = 33 (33.3 truncated to whole ns).
        assert_eq!(chat().tpot_ns(), Some(33));
        let r = streamed(&[(200, content(1)), (260, content(1)), (320, content(1))]);
        // (320 − 200) / 2 = 60.
        assert_eq!(r.tpot_ns(), Some(60));
    }

    #[test]
    fn tpot_divides_by_tokens_not_chunks() {
        // Two chunks carrying 3 and 2 tokens: n = 5, (260 − 200) / 4 = 15.
        let r = streamed(&[(200, content(3)), (260, content(2))]);
        assert_eq!(r.tpot_ns(), Some(15));
    }

    #[test]
    fn tpot_is_none_for_a_single_token() {
        let r = streamed(&[(200, content(1)), (310, UsageOnly)]);
        assert_eq!(r.tpot_ns(), None);
        assert_eq!(r.tpot_vllm_ns(), None);
    }

    #[test]
    fn vllm_tpot_runs_from_the_first_choices_chunk_to_the_last_choices_chunk() {
        // e2e_vllm = 300 (the last choices chunk; the usage chunk at 310 does not count) − 100 = 200;
        // ttft_vllm = 50; (200 − 50) / (4 − 1) = 50.
        let r = chat();
        assert_eq!(r.e2e_vllm_ns(), Some(200));
        assert_eq!(r.tpot_vllm_ns(), Some(50));
    }

    #[test]
    fn output_tokens_prefer_the_server_usage() {
        let mut r = chat();
        assert_eq!(r.output_tokens(), 4);
        r.usage = Some(Usage {
            prompt_tokens: 12,
            completion_tokens: 7,
            cached_tokens: None,
            reasoning_tokens: None,
        });
        assert_eq!(r.output_tokens(), 7);
        // (300 − 200) / (7 − 1) = 16 with the server's count.
        assert_eq!(r.tpot_ns(), Some(16));
        assert_eq!(r.prompt_tokens(), 12);
    }

    #[test]
    fn output_tokens_sum_the_content_chunks_without_usage() {
        let r = streamed(&[
            (150, Empty),
            (200, content(3)),
            (260, content(2)),
            (300, UsageOnly),
        ]);
        assert_eq!(r.output_tokens(), 5);
        assert_eq!(r.prompt_tokens(), 10);
    }

    #[test]
    fn ntpot_includes_the_first_token_and_runs_to_the_end() {
        // (320 − 100) / 4 = 55.
        assert_eq!(chat().ntpot_ns(), Some(55));
        assert_eq!(streamed(&[(150, Empty)]).ntpot_ns(), None);
    }

    #[test]
    fn guidellm_tpot_runs_from_the_send_to_the_last_token() {
        // (300 − 100) / 4 = 50: ends at the last token, not at the end (320).
        assert_eq!(chat().guidellm_tpot_ns(), Some(50));
    }

    #[test]
    fn itl_gaps_are_per_content_chunk() {
        // 200 → 230 → 260 → 300: gaps 30, 30, 40; the role-only and usage chunks are not tokens.
        assert_eq!(chat().itl_gaps_ns().collect::<Vec<_>>(), [30, 30, 40]);
    }

    #[test]
    fn vllm_itl_gaps_include_empty_choices_chunks() {
        // 150 → 200 → 230 → 260 → 300; the usage-only chunk has no choices.
        assert_eq!(
            chat().itl_vllm_gaps_ns().collect::<Vec<_>>(),
            [50, 30, 30, 40]
        );
    }

    #[test]
    fn token_itl_puts_zero_gaps_inside_a_chunk() {
        // inference-perf stamps every token with its chunk's arrival: chunk of 3 at 200, chunk of 2 at 260 gives
        // tokens at 200, 200, 200, 260, 260 → gaps 0, 0, 60, 0 (n − 1 = 4 gaps).
        let r = streamed(&[(150, Empty), (200, content(3)), (260, content(2))]);
        assert_eq!(r.itl_token_gaps_ns().collect::<Vec<_>>(), [0, 0, 60, 0]);
    }

    #[test]
    fn latency_from_the_schedule_includes_the_send_delay() {
        let r = chat();
        // Scheduled 90, sent 100.
        assert_eq!(r.schedule_delay_ns(), 10);
        assert_eq!(r.e2e_ns(), 220);
        assert_eq!(r.e2e_from_scheduled_ns(), 230);
        assert_eq!(r.ttft_from_scheduled_ns(), Some(110));
    }

    #[test]
    fn early_send_has_zero_schedule_delay() {
        let mut r = chat();
        r.scheduled_ns = 105;
        assert_eq!(r.schedule_delay_ns(), 0);
    }

    #[test]
    fn non_streaming_request_has_no_token_timing() {
        let mut r = streamed(&[(310, content(4))]);
        r.streaming = false;
        assert_eq!(r.ttft_ns(), None);
        assert_eq!(r.ttft_vllm_ns(), None);
        assert_eq!(r.tpot_ns(), None);
        assert_eq!(r.itl_gaps_ns().count(), 0);
        // NTPOT and E2E hold either way: (320 − 100) / 4 = 55.
        assert_eq!(r.output_tokens(), 4);
        assert_eq!(r.ntpot_ns(), Some(55));
        assert_eq!(r.e2e_ns(), 220);
    }

    #[test]
    fn out_of_order_timestamps_never_wrap() {
        let mut r = chat();
        r.end_ns = 50;
        assert_eq!(r.e2e_ns(), 0);
    }

    #[test]
    fn a_non_2xx_status_fails_the_request_even_without_an_error() {
        let mut r = chat();
        assert!(r.succeeded());
        r.http_status = Some(503);
        assert!(!r.succeeded());
        assert_eq!(r.error_key().unwrap().to_string(), "http_503");
    }

    #[test]
    fn error_key_names_the_class_and_the_http_status() {
        let mut r = chat();
        r.http_status = Some(429);
        r.error = Some(Box::new(RequestError {
            class: ErrorClass::HttpStatus,
            message: "Too Many Requests".into(),
        }));
        assert_eq!(r.error_key().unwrap().to_string(), "http_429");
        // A stream cut after a 200 is counted as a stream cut, whatever the status was.
        r.http_status = Some(200);
        r.error = Some(Box::new(RequestError {
            class: ErrorClass::StreamCut,
            message: "ended before [DONE]".into(),
        }));
        assert_eq!(r.error_key().unwrap().to_string(), "stream_cut");
        r.http_status = None;
        r.error = Some(Box::new(RequestError {
            class: ErrorClass::HttpStatus,
            message: String::new(),
        }));
        assert_eq!(r.error_key().unwrap().to_string(), "http_status");
    }

    #[test]
    fn error_classes_display_as_their_snake_case_json_names() {
        for class in ErrorClass::ALL {
            assert_eq!(serde_json::to_value(class).unwrap(), class.to_string());
        }
        assert_eq!(ErrorClass::MalformedEvent.to_string(), "malformed_event");
    }

    #[test]
    fn record_serializes_as_one_flat_json_line() {
        let mut r = streamed(&[(150, Empty), (200, content(2)), (310, UsageOnly)]);
        r.usage = Some(Usage {
            prompt_tokens: 10,
            completion_tokens: 2,
            cached_tokens: None,
            reasoning_tokens: None,
        });
        let line = serde_json::to_string(&r).unwrap();
        assert_eq!(
            line,
            r#"{"id":1,"stage":0,"scheduled_ns":90,"sent_ns":100,"end_ns":320,"input_tokens":10,"max_tokens":4,"streaming":true,"http_status":200,"usage":{"prompt_tokens":10,"completion_tokens":2},"chunks":[{"at_ns":150,"kind":"empty"},{"at_ns":200,"kind":"content","tokens":2},{"at_ns":310,"kind":"usage_only"}]}"#
        );
        assert_eq!(serde_json::from_str::<RequestRecord>(&line).unwrap(), r);
        // Reported cached tokens join the usage object; records written before they existed still read.
        r.usage = Some(Usage {
            prompt_tokens: 10,
            completion_tokens: 2,
            cached_tokens: Some(8),
            reasoning_tokens: None,
        });
        let line = serde_json::to_string(&r).unwrap();
        assert!(
            line.contains(
                r#""usage":{"prompt_tokens":10,"completion_tokens":2,"cached_tokens":8}"#
            ),
            "{line}"
        );
        assert_eq!(serde_json::from_str::<RequestRecord>(&line).unwrap(), r);
    }

    #[test]
    fn failed_record_round_trips_with_its_error() {
        let mut r = streamed(&[]);
        r.http_status = None;
        r.error = Some(Box::new(RequestError {
            class: ErrorClass::ConnectionReset,
            message: "connection reset by peer".into(),
        }));
        let line = serde_json::to_string(&r).unwrap();
        assert!(line.contains(
            r#""error":{"class":"connection_reset","message":"connection reset by peer"}"#
        ));
        assert!(!line.contains("chunks"));
        assert_eq!(serde_json::from_str::<RequestRecord>(&line).unwrap(), r);
    }

    #[test]
    fn content_chunk_without_a_token_count_carries_one_token() {
        let c: ChunkEvent = serde_json::from_str(r#"{"at_ns":5,"kind":"content"}"#).unwrap();
        assert_eq!(c.kind, content(1));
    }

    #[test]
    fn record_stays_compact_in_memory() {
        // 16 bytes per chunk (8 for the time, 8 for the kind and its token count); the record itself fits three
        // cache lines, so 10,000 in-flight streams hold about 1.9 MB plus their chunks. A streamed answer's chunks
        // outweigh it after a dozen tokens; the third line holds how the request ended and the ids it carried.
        assert_eq!(std::mem::size_of::<ChunkEvent>(), 16);
        assert!(
            std::mem::size_of::<RequestRecord>() <= 192,
            "{}",
            std::mem::size_of::<RequestRecord>()
        );
    }

    /// A streamed answer of `got` tokens (by the server's usage) to a request for `max_tokens` 4.
    fn answered(got: u32, finish: Option<FinishReason>, ignore_eos: bool) -> RequestRecord {
        let mut r = chat();
        r.usage = Some(Usage {
            prompt_tokens: 10,
            completion_tokens: got,
            cached_tokens: None,
            reasoning_tokens: None,
        });
        r.finish_reason = finish;
        r.ignore_eos = ignore_eos;
        r
    }

    #[test]
    fn an_answer_short_of_max_tokens_under_ignore_eos_is_truncated_whatever_the_reason() {
        for finish in [Some(FinishReason::Length), Some(FinishReason::Stop), None] {
            let r = answered(3, finish.clone(), true);
            assert!(r.truncated(), "{finish:?}");
            assert!(r.succeeded(), "the server answered");
            assert_eq!(r.outcome(), Outcome::Truncated);
        }
        assert_eq!(
            answered(4, Some(FinishReason::Length), true).outcome(),
            Outcome::Succeeded
        );
    }

    #[test]
    fn a_length_stop_short_of_max_tokens_is_truncated_even_without_ignore_eos() {
        // llama.cpp at its context end: finish_reason length with fewer tokens than asked.
        assert!(answered(3, Some(FinishReason::Length), false).truncated());
        // A model that stopped at its end of sequence answered in full.
        assert!(!answered(3, Some(FinishReason::Stop), false).truncated());
        assert!(!answered(3, None, false).truncated());
    }

    #[test]
    fn a_failure_is_never_truncated_and_a_whole_body_without_usage_is_not_judged() {
        let mut failed = answered(1, Some(FinishReason::Length), true);
        failed.http_status = Some(500);
        assert!(!failed.truncated());
        assert!(matches!(failed.outcome(), Outcome::Failed(_)));
        // One content chunk stands for the whole body: its length is unknown, not 1.
        let mut whole = streamed(&[(300, content(1))]);
        whole.streaming = false;
        whole.ignore_eos = true;
        assert!(!whole.truncated());
        // Streamed without usage, the chunks are the count: 4 of 4 is whole, 2 of 4 is short.
        let mut counted = chat();
        counted.ignore_eos = true;
        assert!(!counted.truncated());
        counted.chunks.truncate(3);
        assert!(counted.truncated());
        // Without max_tokens nothing was asked.
        let mut open = answered(1, Some(FinishReason::Length), true);
        open.max_tokens = None;
        assert!(!open.truncated());
    }

    #[test]
    fn an_answer_the_server_aborted_is_truncated_however_long() {
        for reason in [FinishReason::Abort, FinishReason::Error] {
            let mut r = answered(4, Some(reason.clone()), false);
            assert!(r.truncated(), "{reason}");
            r.max_tokens = None;
            assert!(r.truncated(), "{reason} without max_tokens");
        }
    }

    #[test]
    fn reasoning_chunks_are_tokens_and_ttfo_waits_for_content() {
        // Reasoning at 150 and 180, content at 200 and 230.
        let r = streamed(&[
            (120, Empty),
            (150, Reasoning { tokens: 1 }),
            (180, Reasoning { tokens: 1 }),
            (200, content(1)),
            (230, content(1)),
        ]);
        assert_eq!(r.ttft_ns(), Some(50), "the first token, reasoning or not");
        assert_eq!(r.ttfo_ns(), Some(100), "the first content");
        assert_eq!(r.output_tokens(), 4);
        assert_eq!(r.reasoning_tokens(), 2);
        assert_eq!(r.itl_gaps_ns().collect::<Vec<_>>(), [30, 20, 30]);
        // Without reasoning TTFO is TTFT; without content there is none.
        assert_eq!(chat().ttfo_ns(), chat().ttft_ns());
        assert_eq!(chat().reasoning_tokens(), 0);
        assert_eq!(streamed(&[(150, Reasoning { tokens: 1 })]).ttfo_ns(), None);
    }

    #[test]
    fn the_servers_reasoning_count_wins_over_the_streamed_one() {
        let mut r = streamed(&[(150, Reasoning { tokens: 1 }), (200, content(1))]);
        r.usage = Some(Usage {
            prompt_tokens: 10,
            completion_tokens: 9,
            cached_tokens: None,
            reasoning_tokens: Some(7),
        });
        assert_eq!(r.reasoning_tokens(), 7);
    }

    #[test]
    fn finish_reasons_round_trip_as_the_server_spelled_them() {
        for reason in [
            "stop",
            "length",
            "abort",
            "tool_calls",
            "content_filter",
            "error",
            "eos_token",
        ] {
            let parsed = FinishReason::from_server(reason);
            assert_eq!(parsed.as_str(), reason);
            let json = serde_json::to_string(&parsed).unwrap();
            assert_eq!(json, format!("\"{reason}\""));
            assert_eq!(serde_json::from_str::<FinishReason>(&json).unwrap(), parsed);
        }
        assert_eq!(
            FinishReason::from_server("eos_token"),
            FinishReason::Other(Box::new("eos_token".to_owned()))
        );
    }

    #[test]
    fn a_traceparent_is_written_and_read_in_the_w3c_form() {
        let parent = TraceParent {
            trace_id: [
                0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e,
                0x47, 0x36,
            ],
            span_id: [0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7],
        };
        let text = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        assert_eq!(parent.to_string(), text);
        assert_eq!(&parent.header_value()[..], text.as_bytes());
        assert_eq!(text.parse::<TraceParent>(), Ok(parent));
        assert!(
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
                .parse::<TraceParent>()
                .is_err()
        );
        assert!(
            "00-4bf92f35-00f067aa0ba902b7-01"
                .parse::<TraceParent>()
                .is_err()
        );
    }

    #[test]
    fn how_a_request_ended_and_its_ids_round_trip_and_old_records_still_read() {
        let mut r = answered(3, Some(FinishReason::Length), true);
        r.chunks.push(ChunkEvent {
            at_ns: 140,
            kind: Reasoning { tokens: 1 },
        });
        r.request_id = Some(Box::new("llmbench-run-1".into()));
        r.traceparent = Some(Box::new(
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
                .parse()
                .unwrap(),
        ));
        r.usage = r.usage.map(|u| Usage {
            reasoning_tokens: Some(1),
            ..u
        });
        let line = serde_json::to_string(&r).unwrap();
        for part in [
            r#""ignore_eos":true"#,
            r#""finish_reason":"length""#,
            r#""reasoning_tokens":1"#,
            r#"{"at_ns":140,"kind":"reasoning","tokens":1}"#,
            r#""request_id":"llmbench-run-1""#,
            r#""traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01""#,
        ] {
            assert!(line.contains(part), "{part} in {line}");
        }
        assert_eq!(serde_json::from_str::<RequestRecord>(&line).unwrap(), r);
        let old = r#"{"id":1,"stage":0,"scheduled_ns":90,"sent_ns":100,"end_ns":320,"input_tokens":10,"streaming":true}"#;
        let old: RequestRecord = serde_json::from_str(old).unwrap();
        assert_eq!(
            (old.finish_reason, old.ignore_eos, old.request_id),
            (None, false, None)
        );
    }

    #[test]
    fn read_jsonl_skips_a_truncated_last_line() {
        let a = serde_json::to_string(&chat()).unwrap();
        let text = format!("{a}\n\n{a}\n{}", &a[..a.len() / 2]);
        let records = read_jsonl(text.as_bytes()).unwrap();
        assert_eq!(records.len(), 2);
        let (records, skipped) = read_jsonl_counting_truncated(text.as_bytes()).unwrap();
        assert_eq!((records.len(), skipped), (2, 1));
        let whole = format!("{a}\n{a}\n");
        let (_, skipped) = read_jsonl_counting_truncated(whole.as_bytes()).unwrap();
        assert_eq!(skipped, 0);
    }

    #[test]
    fn read_jsonl_names_the_line_of_a_malformed_record() {
        let a = serde_json::to_string(&chat()).unwrap();
        let text = format!("{a}\n{{\"id\":\"x\"}}\n{a}\n");
        match read_jsonl(text.as_bytes()) {
            Err(ReadRecordsError::Parse { line, .. }) => assert_eq!(line, 2),
            other => panic!("expected a parse error, got {other:?}"),
        }
    }
}
