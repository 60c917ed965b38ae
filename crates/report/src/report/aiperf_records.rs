//! AIPerf's per-request file, `profile_export.jsonl`: one line per request, warm-up included, as AIPerf 0.13's
//! `RecordExportJSONLWriter` (`aiperf/post_processors/record_export_jsonl_writer.py`, at its default
//! `--export-level records`) writes a `MetricRecordInfo` (`aiperf/common/models/record_models.py`, dumped with
//! `exclude_none`): `{"metadata": {…}, "metrics": {tag: {"value", "unit"}}, "error": {…}}`.
//!
//! The metrics are those AIPerf 0.13 computes for a chat or completions request with `--use-server-token-count`
//! (llmbench's token counts are the server's `usage`, as that flag makes AIPerf's; a run of the real AIPerf 0.13
//! against `llmbench sim` with that flag writes exactly these tags), each by its class in `aiperf/metrics/types/`,
//! in display units (ns → ms):
//! - every valid request: `request_latency` (last content response − send), `usage_prompt_tokens`,
//!   `usage_completion_tokens`,
//!   `usage_total_tokens` (when the server sent `usage`), `input_sequence_length`, `output_sequence_length`,
//!   `output_token_count` (the output without its reasoning, when not 0), `reasoning_token_count` (when not 0),
//!   `e2e_output_token_throughput` (OSL over the request latency in s), `osl_mismatch_diff_pct`
//!   (`(osl − max_tokens) / max_tokens × 100`, when `max_tokens` was sent);
//! - streams only (0.13 flags these `STREAMING_ONLY`): `time_to_first_token` (first content response − send),
//!   `time_to_first_output_token` (first content, not reasoning), `time_to_second_token`,
//!   `inter_chunk_latency` (the gaps between content responses, a list), `inter_token_latency`
//!   (`(request_latency − ttft) / (osl − 1)`, osl ≥ 2), `decode_duration` (`request_latency − ttft`),
//!   `prefill_throughput_per_user` (ISL over TTFT in s), `output_token_throughput_per_user` (1 / ITL in s);
//! - with `--goodput`: `good_request_count`, 1 or 0.
//!
//! A failed request has no metrics (`{}`: its token counts would be the server's) and an `error`: an HTTP failure
//! as AIPerf's client reports it (`code` the status, `type` its reason phrase, `message` the body), anything else
//! with llmbench's failure class as `type`; a request cut at the end of `--benchmark-grace-period` is
//! `was_cancelled` with code 499 and AIPerf's `RequestCancellationError`.
//!
//! The metadata (`MetricRecordMetadata`): `session_num` is the request's number in its phase from 0 (AIPerf's
//! credit id), `benchmark_phase`/`phase_name`/`phase_kind` `warmup` or `profiling`, `phase_index` counting the
//! warm-up phase first, `profiling_index` 0; times are wall-clock ns (`credit_issued_ns` the scheduled send,
//! `request_start_ns` the send, `request_end_ns` the last byte), from the run's monotonic clock anchored at
//! `t0_unix_ns`; `x_request_id` is the `x-request-id` llmbench sent; a conversation's turn carries its
//! `conversation_id` and `turn_index`. Left out, with nothing behind them in llmbench: `x_correlation_id` and
//! `root_correlation_id` (llmbench sends no `X-Correlation-ID`), `request_ack_ns` (the response headers' time is
//! not recorded), and the `http_req_*` trace metrics (AIPerf's aiohttp trace: DNS, connect, send and receive
//! phases, which llmbench's client does not time apart).
//!
//! Lines are written as the records go by (bounded memory at any run length); warm-up requests come first in a
//! records file, since AIPerf's profiling phase starts once every warm-up request returned.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use super::meta::{RunMeta, Slo};
use llmbench_model::record::{ErrorClass, RequestRecord};
use llmbench_workload::workload::SloMetric;

/// The file, beside `profile_export_aiperf.json`.
pub(crate) const AIPERF_RECORDS_FILE: &str = "profile_export.jsonl";

/// `profile_export.jsonl` being written, one record at a time.
pub(crate) struct AiperfRecords {
    path: PathBuf,
    out: BufWriter<File>,
    t0_unix_ns: u64,
    worker: String,
    slos: Vec<Slo>,
    /// Warm-up requests seen so far.
    warmups: u64,
    /// Requests seen so far, and the stage the last profiling one was in with the requests seen before that
    /// stage's first: a request's number in its phase is its id less those (each stage's requests come after the
    /// last one's, which had drained).
    seen: u64,
    stage_base: Option<(u32, u64)>,
    /// The profiling phases' names, one per stage (an AIPerf config's several phases; else `profiling`).
    phases: Vec<String>,
    /// The first write that failed; later records are skipped and [`finish`](Self::finish) reports it.
    failed: Option<io::Error>,
}

impl AiperfRecords {
    /// Creates (truncating) the file in `dir`.
    pub(crate) fn create(dir: &Path, meta: &RunMeta) -> io::Result<AiperfRecords> {
        let path = dir.join(AIPERF_RECORDS_FILE);
        let out = BufWriter::with_capacity(1 << 16, File::create(&path)?);
        Ok(AiperfRecords {
            path,
            out,
            t0_unix_ns: meta.t0_unix_ns,
            worker: format!("{}", meta.shard.index),
            slos: meta.report.goodput.clone(),
            warmups: 0,
            seen: 0,
            stage_base: None,
            phases: meta.report.aiperf_phases.clone(),
            failed: None,
        })
    }

    /// Writes `r`'s line.
    pub(crate) fn add(&mut self, r: &RequestRecord) {
        if self.failed.is_some() {
            return;
        }
        let line = self.line(r);
        let written = serde_json::to_writer(&mut self.out, &line)
            .map_err(io::Error::other)
            .and_then(|()| self.out.write_all(b"\n"));
        if let Err(e) = written {
            self.failed = Some(e);
        }
    }

    /// Flushes the file; the first failed write, if any.
    pub(crate) fn finish(mut self) -> io::Result<PathBuf> {
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        self.out.flush()?;
        Ok(self.path)
    }

    fn line(&mut self, r: &RequestRecord) -> Value {
        let wall = |ns: u64| self.t0_unix_ns.saturating_add(ns);
        let phase = aiperf_phase(r.warmup, r.stage, self.warmups > 0, &self.phases);
        let session_num = if r.warmup {
            self.warmups += 1;
            r.id
        } else {
            let base = match self.stage_base {
                Some((stage, base)) if stage == r.stage => base,
                _ => {
                    self.stage_base = Some((r.stage, self.seen));
                    self.seen
                }
            };
            r.id.saturating_sub(base)
        };
        self.seen += 1;
        // Cut at the end of the grace period, or abandoned on purpose (`--request-cancellation-rate`): AIPerf
        // stamps both with a cancellation time.
        let cancelled = matches!(
            r.error_class(),
            Some(ErrorClass::Cancelled | ErrorClass::ClientCancelled)
        );
        let mut metadata = Map::new();
        metadata.insert("session_num".into(), json!(session_num));
        if let Some(id) = &r.request_id {
            metadata.insert("x_request_id".into(), json!(id));
        }
        if let Some(turn) = r.conversation {
            metadata.insert("conversation_id".into(), json!(turn.id.to_string()));
        }
        let turn_index = r.conversation.map_or(0, |turn| turn.turn);
        metadata.insert("turn_index".into(), json!(turn_index));
        metadata.insert("credit_issued_ns".into(), json!(wall(r.scheduled_ns)));
        metadata.insert("request_start_ns".into(), json!(wall(r.sent_ns)));
        metadata.insert("request_end_ns".into(), json!(wall(r.end_ns)));
        metadata.insert("worker_id".into(), json!(format!("worker_{}", self.worker)));
        metadata.insert(
            "record_processor_id".into(),
            json!(format!("record_processor_{}", self.worker)),
        );
        metadata.insert("benchmark_phase".into(), json!(phase.kind));
        metadata.insert("phase_index".into(), json!(phase.index));
        if let Some(index) = phase.profiling_index {
            metadata.insert("profiling_index".into(), json!(index));
        }
        metadata.insert("phase_name".into(), json!(phase.name));
        metadata.insert("phase_kind".into(), json!(phase.kind));
        metadata.insert("was_cancelled".into(), json!(cancelled));
        if cancelled {
            metadata.insert("cancellation_time_ns".into(), json!(wall(r.end_ns)));
        }
        metadata.insert("context_overflow_skip".into(), json!(false));
        metadata.insert("agent_depth".into(), json!(0));

        let mut line = Map::new();
        line.insert("metadata".into(), Value::Object(metadata));
        if r.succeeded() {
            line.insert(
                "metrics".into(),
                Value::Object(record_metrics(r, &self.slos)),
            );
        } else {
            line.insert("metrics".into(), Value::Object(Map::new()));
            line.insert("error".into(), error_details(r, cancelled));
        }
        Value::Object(line)
    }
}

/// The AIPerf phase a request ran in: the warm-up (phase 0), or its stage's profiling phase (after the warm-up,
/// when there was one), named as the config named it — else `profiling` for the first stage and `profiling_<n>`
/// for a later one (a run of several stages from another dialect), so no two phases share a directory.
pub(crate) struct AiperfPhase<'a> {
    pub index: u32,
    pub profiling_index: Option<u32>,
    pub name: std::borrow::Cow<'a, str>,
    pub kind: &'static str,
}

pub(crate) fn aiperf_phase(
    warmup: bool,
    stage: u32,
    had_warmup: bool,
    names: &[String],
) -> AiperfPhase<'_> {
    use std::borrow::Cow;
    if warmup {
        return AiperfPhase {
            index: 0,
            profiling_index: None,
            name: Cow::Borrowed("warmup"),
            kind: "warmup",
        };
    }
    let name = match names.get(stage as usize) {
        Some(name) => Cow::Borrowed(name.as_str()),
        None if stage == 0 => Cow::Borrowed("profiling"),
        None => Cow::Owned(format!("profiling_{stage}")),
    };
    AiperfPhase {
        index: stage + u32::from(had_warmup),
        profiling_index: Some(stage),
        name,
        kind: "profiling",
    }
}

/// A valid request's metrics, in the order AIPerf 0.13 computes them (its dependency order).
pub(crate) fn record_metrics(r: &RequestRecord, slos: &[Slo]) -> Map<String, Value> {
    let mut out = Map::new();
    let mut put = |tag: &str, value: Value, unit: &str| {
        out.insert(tag.into(), json!({"value": value, "unit": unit}));
    };
    let ms = |ns: f64| json!(ns / 1e6);
    let times: AiperfTimes = aiperf_times(r);
    let has_content = r.chunks.iter().any(|c| c.kind.tokens().is_some()) || !r.streaming;
    let latency_ns = has_content.then_some(times.request_latency_ns);
    let osl = r.output_tokens();
    let isl = r.prompt_tokens();
    let reasoning = r.reasoning_tokens();
    if let Some(latency) = latency_ns {
        put("request_latency", ms(latency), "ms");
    }
    if let Some(ns) = r.ttfo_ns() {
        put("time_to_first_output_token", ms(ns as f64), "ms");
    }
    if let Some(usage) = r.usage {
        put("usage_prompt_tokens", json!(usage.prompt_tokens), "tokens");
    }
    put("output_sequence_length", json!(osl), "tokens");
    if let Some(usage) = r.usage {
        let total = u64::from(usage.prompt_tokens) + u64::from(usage.completion_tokens);
        put("usage_total_tokens", json!(total), "tokens");
    }
    // `TTFTMetric` is `STREAMING_TOKENS_ONLY` in 0.13: a run without `--streaming` has none (checked against the
    // real AIPerf 0.13 on `llmbench sim`).
    if let Some(ttft) = times.ttft_ns.filter(|_| r.streaming) {
        put("time_to_first_token", ms(ttft), "ms");
    }
    put("input_sequence_length", json!(isl), "tokens");
    let output = osl.saturating_sub(reasoning);
    if output > 0 {
        put("output_token_count", json!(output), "tokens");
    }
    if reasoning > 0 {
        put("reasoning_token_count", json!(reasoning), "tokens");
    }
    if let Some(usage) = r.usage {
        put(
            "usage_completion_tokens",
            json!(usage.completion_tokens),
            "tokens",
        );
    }
    if r.streaming {
        let content: Vec<u64> = r
            .chunks
            .iter()
            .filter(|c| c.kind.tokens().is_some())
            .map(|c| c.at_ns)
            .collect();
        if content.len() >= 2 {
            let gaps: Vec<Value> = content
                .windows(2)
                .map(|w| ms(w[1].saturating_sub(w[0]) as f64))
                .collect();
            put("inter_chunk_latency", Value::Array(gaps), "ms");
        }
    }
    if let Some(ttst) = times.ttst_ns {
        put("time_to_second_token", ms(ttst), "ms");
    }
    if let Some(latency) = latency_ns.filter(|l| *l > 0.0) {
        put(
            "e2e_output_token_throughput",
            json!(f64::from(osl) / (latency / 1e9)),
            "tokens/sec/user",
        );
    }
    if let Some(max_tokens) = r.max_tokens.filter(|m| *m > 0) {
        let diff = (f64::from(osl) - f64::from(max_tokens)) / f64::from(max_tokens) * 100.0;
        put("osl_mismatch_diff_pct", json!(diff), "%");
    }
    if let Some(itl) = times.itl_ns {
        put("inter_token_latency", ms(itl), "ms");
    }
    if let (true, Some(latency), Some(ttft)) = (r.streaming, latency_ns, times.ttft_ns) {
        put("decode_duration", ms(latency - ttft), "ms");
        if ttft > 0.0 {
            put(
                "prefill_throughput_per_user",
                json!(f64::from(isl) / (ttft / 1e9)),
                "tokens/sec/user",
            );
        }
    }
    if let Some(itl) = times.itl_ns.filter(|itl| *itl > 0.0) {
        put(
            "output_token_throughput_per_user",
            json!(1e9 / itl),
            "tokens/sec/user",
        );
    }
    if !slos.is_empty() {
        let good = aiperf_good(&times, slos);
        put("good_request_count", json!(u32::from(good)), "requests");
    }
    if r.inputs().is_some() {
        // An embeddings request: AIPerf's endpoint `produces_tokens: false`, so no metric flagged
        // `PRODUCES_TOKENS_ONLY` (TTFT's `STREAMING_TOKENS_ONLY` includes it) is computed.
        for tag in [
            "time_to_first_token",
            "output_sequence_length",
            "usage_total_tokens",
            "usage_completion_tokens",
            "output_token_count",
            "e2e_output_token_throughput",
            "osl_mismatch_diff_pct",
        ] {
            out.remove(tag);
        }
    }
    out
}

/// A failed request's `ErrorDetails`: an HTTP failure as AIPerf's aiohttp client reports it (the status, its
/// reason phrase, the body), a cancelled one as its `RequestCancellationError` (an abandoned one's message is
/// AIPerf's own, `Request cancelled 0.100s after being sent`), any other with llmbench's class.
pub(crate) fn error_details(r: &RequestRecord, cancelled: bool) -> Value {
    let message = r.error.as_ref().map_or("", |e| e.message.as_str());
    if cancelled {
        return json!({"code": 499, "type": "RequestCancellationError", "message": message});
    }
    match (r.error_class(), r.http_status) {
        (Some(ErrorClass::HttpStatus), Some(status)) => {
            // llmbench's message is `HTTP <status>[ <reason>][: <body>]`.
            let rest = message
                .strip_prefix(&format!("HTTP {status}"))
                .unwrap_or(message);
            let (reason, body) = match rest.split_once(": ") {
                Some((reason, body)) => (reason.trim(), body),
                None => (rest.trim(), ""),
            };
            let mut details = Map::new();
            details.insert("code".into(), json!(status));
            if !reason.is_empty() {
                details.insert("type".into(), json!(reason));
            }
            details.insert("message".into(), json!(body));
            Value::Object(details)
        }
        (class, status) => {
            let mut details = Map::new();
            if let Some(status) = status {
                details.insert("code".into(), json!(status));
            }
            details.insert(
                "type".into(),
                json!(class.map_or("other", ErrorClass::as_str)),
            );
            details.insert("message".into(), json!(message));
            Value::Object(details)
        }
    }
}

/// The times AIPerf measures of one valid request, in nanoseconds: `request_latency` (last response − send; without a
/// stream the one response is the whole body), `time_to_first_token` (first response with tokens − send; without a
/// stream the request latency), the second response's time after the first, and `inter_token_latency` =
/// `(request_latency − ttft) / (osl − 1)` for osl ≥ 2, streams only.
pub(crate) struct AiperfTimes {
    pub last_response_ns: u64,
    pub request_latency_ns: f64,
    pub ttft_ns: Option<f64>,
    pub ttst_ns: Option<f64>,
    pub itl_ns: Option<f64>,
}

pub(crate) fn aiperf_times(r: &RequestRecord) -> AiperfTimes {
    // Every response that carried tokens, reasoning included (AIPerf's `content_responses`).
    let mut content = r
        .chunks
        .iter()
        .filter(|c| r.streaming && c.kind.tokens().is_some())
        .map(|c| c.at_ns);
    let first = content.next();
    let second = content.next();
    let last = content.next_back().or(second).or(first).unwrap_or(r.end_ns);
    let request_latency_ns = last.saturating_sub(r.sent_ns) as f64;
    // Without a stream the whole body is the one content response: TTFT is the request latency
    // (`ttft_metric.py` has no streaming flag), and there is no second token or inter-token latency (theirs has).
    let ttft_ns = if r.streaming {
        first.map(|f| f.saturating_sub(r.sent_ns) as f64)
    } else {
        Some(request_latency_ns)
    };
    let out = f64::from(r.output_tokens());
    AiperfTimes {
        last_response_ns: last,
        request_latency_ns,
        ttft_ns,
        ttst_ns: first.zip(second).map(|(f, s)| s.saturating_sub(f) as f64),
        itl_ns: ttft_ns
            .filter(|_| r.streaming && out >= 2.0)
            .map(|t| (request_latency_ns - t) / (out - 1.0)),
    }
}

/// Whether a valid request met every `--goodput` objective (`GoodRequestCountMetric._is_good`): each metric at most
/// its limit (all three are smaller-is-better), and a metric the request does not have fails it.
pub(crate) fn aiperf_good(times: &AiperfTimes, slos: &[Slo]) -> bool {
    slos.iter()
        .all(|slo| aiperf_metric_s(times, slo.metric).is_some_and(|v| v <= slo.limit_s))
}

/// The AIPerf metric an objective names, in seconds: `time_to_first_token`, `inter_token_latency` or
/// `request_latency`; `None` when the request has none.
pub(crate) fn aiperf_metric_s(times: &AiperfTimes, metric: SloMetric) -> Option<f64> {
    let ns = match metric {
        SloMetric::Ttft => times.ttft_ns,
        SloMetric::Itl => times.itl_ns,
        SloMetric::E2e => Some(times.request_latency_ns),
        // The aiperf dialect maps no AIPerf tag to these.
        SloMetric::Tpot | SloMetric::Ntpot => None,
    };
    ns.map(|v| v / 1e9)
}
