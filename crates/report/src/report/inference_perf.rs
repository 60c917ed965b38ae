//! inference-perf's `*_lifecycle_metrics.json` (`ResponsesSummary` of `inference_perf/reportgen/base.py`):
//! seconds, numpy linear percentiles keyed `p0.1 … median … p99.9`, the send time as the clock start.
//!
//! Per successful request: `request_latency = end − sent`; `normalized_time_per_output_token = latency / n`
//! (0 for n = 0); with more than one token timestamp (streaming), `time_to_first_token = first token − sent`,
//! `time_per_output_token = (last token − first token) / (n − 1)` and the per-token gaps pooled into
//! `inter_token_latency` (every token of a chunk stamped with the chunk's arrival, so 0 inside a chunk).
//!
//! An answer cut short (llmbench's `truncated` outcome) is a failure here, `TruncatedResponseError` (label
//! `truncatedresponseerror`, the message naming the tokens delivered of those requested and the finish reason),
//! as inference-perf's fix for short completions under `ignore_eos` records it (kubernetes-sigs/inference-perf#746,
//! closing #655); llmbench applies it to every answer it counts as cut short, a server's abort and its own length
//! limit included. Each per-request entry carries the `finish_reason` and the `max_tokens` asked, as that change
//! adds them.

use std::io;

use serde_json::{Map, Value, json};

use super::goodput::{Definition, GoodputTally};
use super::meta::{Slo, StageMeta};
use super::sample::{FloatStore, SampleId, SampleView};
use super::secs;
use llmbench_model::record::{ErrorClass, Outcome, RequestRecord};

/// The whole run's file.
pub const SUMMARY_LIFECYCLE_FILE: &str = "summary_lifecycle_metrics.json";

/// `report.request_lifecycle.per_request`'s file.
pub const PER_REQUEST_LIFECYCLE_FILE: &str = "per_request_lifecycle_metrics.json";

/// A stage's file: `stage_N_lifecycle_metrics.json`.
pub fn stage_lifecycle_file(stage: u32) -> String {
    format!("stage_{stage}_lifecycle_metrics.json")
}

/// inference-perf's `summarize`: `mean`, `min`, `max`, then each percentile (in percent) as `median` for 50
/// and `p{p:g}` otherwise; `null` for an empty sample.
pub(crate) fn summarize(sample: &mut SampleView<'_>, percentiles: &[f64]) -> io::Result<Value> {
    let (Some(mean), Some((min, max))) = (sample.mean(), sample.min_max()?) else {
        return Ok(Value::Null);
    };
    let fractions: Vec<f64> = percentiles.iter().map(|p| p / 100.0).collect();
    let values = sample.percentiles(&fractions)?;
    let mut out = Map::new();
    out.insert("mean".into(), json!(mean));
    out.insert("min".into(), json!(min));
    out.insert("max".into(), json!(max));
    for (&p, value) in percentiles.iter().zip(values) {
        let key = if p == 50.0 {
            "median".to_owned()
        } else {
            format!("p{}", super::percentile_word(p))
        };
        out.insert(key, json!(value));
    }
    Ok(Value::Object(out))
}

/// `summarize` of `n` zeros: every statistic 0, null for none.
fn zeros(n: u64, percentiles: &[f64]) -> Value {
    if n == 0 {
        return Value::Null;
    }
    let mut out = Map::new();
    for key in ["mean", "min", "max"] {
        out.insert(key.into(), json!(0.0));
    }
    for &p in percentiles {
        let key = if p == 50.0 {
            "median".to_owned()
        } else {
            format!("p{}", super::percentile_word(p))
        };
        out.insert(key, json!(0.0));
    }
    Value::Object(out)
}

/// One request's latencies by inference-perf's definitions, in seconds (the llm-d report uses them too).
pub(super) struct Latencies {
    pub(super) request_latency: f64,
    pub(super) ntpot: f64,
    pub(super) ttft: Option<f64>,
    pub(super) tpot: Option<f64>,
    pub(super) itl: Vec<f64>,
}

pub(super) fn latencies(r: &RequestRecord) -> Latencies {
    let itl: Vec<f64> = r.itl_token_gaps_ns().map(secs).collect();
    // More than one token timestamp ⇔ at least one per-token gap.
    let streamed = !itl.is_empty();
    Latencies {
        itl,
        ..scalar_latencies(r, streamed)
    }
}

/// [`latencies`] but the gaps (left empty): `streamed` says whether the request has any per-token gap.
fn scalar_latencies(r: &RequestRecord, streamed: bool) -> Latencies {
    let request_latency = secs(r.e2e_ns());
    let n = r.output_tokens();
    Latencies {
        request_latency,
        ntpot: if n > 0 {
            request_latency / f64::from(n)
        } else {
            0.0
        },
        ttft: if streamed {
            r.ttft_ns().map(secs)
        } else {
            None
        },
        tpot: if streamed {
            r.tpot_ns().map(secs)
        } else {
            None
        },
        itl: Vec::new(),
    }
}

/// What inference-perf's lifecycle metrics (and the llm-d report, which takes the same per-request figures) need
/// of a bucket of requests, gathered request by request: counts, extremes and exact sums here, each sample in a
/// [`FloatStore`]. A stage's bucket is filled from its records; the whole run's is the stages' merged.
#[derive(Debug, Clone)]
pub(crate) struct Lifecycle {
    count: u64,
    min_sent_ns: u64,
    max_sent_ns: u64,
    max_end_ns: u64,
    schedule_delay: Vec<SampleId>,
    ok: u64,
    pub(super) request_latency: Vec<SampleId>,
    pub(super) ntpot: Vec<SampleId>,
    pub(super) tpot: Vec<SampleId>,
    pub(super) ttft: Vec<SampleId>,
    pub(super) itl: Vec<SampleId>,
    pub(super) input: Vec<SampleId>,
    pub(super) output: Vec<SampleId>,
    pub(super) input_sum: u64,
    pub(super) output_sum: u64,
    /// Σ `usage.prompt_tokens_details.cached_tokens` of the successes (0 where not reported).
    cached_sum: u64,
    failed_cached_sum: u64,
    goodput: GoodputTally,
    failed: u64,
    failed_latency: Vec<SampleId>,
    failed_prompt: Vec<SampleId>,
    labels: FailureLabels,
    /// The successes' images (`RequestMetrics.image`): per request their count, per image its pixels, encoded
    /// bytes and aspect ratio, and their sum for `images_per_sec`.
    images: ImageFigures,
}

#[derive(Debug, Clone)]
struct ImageFigures {
    count: Vec<SampleId>,
    pixels: Vec<SampleId>,
    bytes: Vec<SampleId>,
    aspect_ratio: Vec<SampleId>,
    sum: u64,
}

impl Lifecycle {
    /// An empty bucket whose samples live in `store`; `goodput` are the profile's objectives.
    pub(crate) fn new(store: &mut FloatStore, goodput: &[Slo]) -> Lifecycle {
        let mut sample = || vec![store.sample()];
        Lifecycle {
            count: 0,
            min_sent_ns: u64::MAX,
            max_sent_ns: 0,
            max_end_ns: 0,
            schedule_delay: sample(),
            ok: 0,
            request_latency: sample(),
            ntpot: sample(),
            tpot: sample(),
            ttft: sample(),
            itl: sample(),
            input: sample(),
            output: sample(),
            input_sum: 0,
            output_sum: 0,
            cached_sum: 0,
            failed_cached_sum: 0,
            goodput: GoodputTally::new(goodput, Definition::InferencePerf),
            failed: 0,
            failed_latency: sample(),
            failed_prompt: sample(),
            labels: FailureLabels::default(),
            images: ImageFigures {
                count: sample(),
                pixels: sample(),
                bytes: sample(),
                aspect_ratio: sample(),
                sum: 0,
            },
        }
    }

    /// Counts `r`.
    pub(crate) fn add(&mut self, r: &RequestRecord, store: &mut FloatStore) {
        self.count += 1;
        self.min_sent_ns = self.min_sent_ns.min(r.sent_ns);
        self.max_sent_ns = self.max_sent_ns.max(r.sent_ns);
        self.max_end_ns = self.max_end_ns.max(r.end_ns);
        store.push(self.schedule_delay[0], schedule_delay_s(r));
        if r.outcome() != Outcome::Succeeded {
            self.failed += 1;
            store.push(self.failed_latency[0], secs(r.e2e_ns()));
            store.push(self.failed_prompt[0], f64::from(r.prompt_tokens()));
            self.failed_cached_sum += cached_tokens(r);
            self.labels.add(r);
            return;
        }
        self.ok += 1;
        // The gaps go straight into the store, after the figures they decide.
        let mut gaps = r.itl_token_gaps_ns().peekable();
        let l = scalar_latencies(r, gaps.peek().is_some());
        store.push(self.request_latency[0], l.request_latency);
        store.push(self.ntpot[0], l.ntpot);
        if let Some(tpot) = l.tpot {
            store.push(self.tpot[0], tpot);
        }
        if let Some(ttft) = l.ttft {
            store.push(self.ttft[0], ttft);
        }
        for gap in gaps {
            store.push(self.itl[0], secs(gap));
        }
        store.push(self.input[0], f64::from(r.prompt_tokens()));
        store.push(self.output[0], f64::from(r.output_tokens()));
        self.input_sum += u64::from(r.prompt_tokens());
        self.output_sum += u64::from(r.output_tokens());
        self.cached_sum += cached_tokens(r);
        self.goodput.add(r);
        let images = r.images.as_deref().map_or(&[][..], Vec::as_slice);
        store.push(self.images.count[0], images.len() as f64);
        self.images.sum += images.len() as u64;
        for image in images {
            store.push(self.images.pixels[0], image.pixels() as f64);
            store.push(self.images.bytes[0], f64::from(image.bytes));
            store.push(self.images.aspect_ratio[0], image.aspect_ratio());
        }
    }

    /// Adds `other`'s requests, counted after this bucket's.
    pub(crate) fn merge(&mut self, other: &Lifecycle) {
        self.count += other.count;
        self.min_sent_ns = self.min_sent_ns.min(other.min_sent_ns);
        self.max_sent_ns = self.max_sent_ns.max(other.max_sent_ns);
        self.max_end_ns = self.max_end_ns.max(other.max_end_ns);
        self.ok += other.ok;
        self.input_sum += other.input_sum;
        self.output_sum += other.output_sum;
        self.cached_sum += other.cached_sum;
        self.failed_cached_sum += other.failed_cached_sum;
        self.failed += other.failed;
        self.goodput.merge(&other.goodput);
        self.labels.merge(&other.labels);
        self.images.sum += other.images.sum;
        for (mine, theirs) in [
            (&mut self.schedule_delay, &other.schedule_delay),
            (&mut self.request_latency, &other.request_latency),
            (&mut self.ntpot, &other.ntpot),
            (&mut self.tpot, &other.tpot),
            (&mut self.ttft, &other.ttft),
            (&mut self.itl, &other.itl),
            (&mut self.input, &other.input),
            (&mut self.output, &other.output),
            (&mut self.failed_latency, &other.failed_latency),
            (&mut self.failed_prompt, &other.failed_prompt),
            (&mut self.images.count, &other.images.count),
            (&mut self.images.pixels, &other.images.pixels),
            (&mut self.images.bytes, &other.images.bytes),
            (&mut self.images.aspect_ratio, &other.images.aspect_ratio),
        ] {
            mine.extend(theirs);
        }
    }

    /// Requests counted.
    pub(crate) fn count(&self) -> u64 {
        self.count
    }

    /// Successful requests counted.
    pub(super) fn succeeded(&self) -> u64 {
        self.ok
    }

    /// The first send and the last end; (0, 0) without requests.
    pub(super) fn span_ns(&self) -> (u64, u64) {
        if self.count == 0 {
            (0, 0)
        } else {
            (self.min_sent_ns, self.max_end_ns)
        }
    }

    /// The `ResponsesSummary` of this bucket: the whole run (`stage` `None`), or one stage with what the profile
    /// asked of it.
    pub(crate) fn metrics(
        &self,
        store: &mut FloatStore,
        percentiles: &[f64],
        stage: Option<StageMeta>,
    ) -> io::Result<Value> {
        let (min_sent, max_sent) = if self.count == 0 {
            (0, 0)
        } else {
            (self.min_sent_ns, self.max_sent_ns)
        };
        let max_end = self.span_ns().1;
        let total_time = secs(max_end.saturating_sub(min_sent));
        let mut summarize_of = |ids: &[SampleId]| summarize(&mut store.view(ids), percentiles);

        let mut load = Map::new();
        load.insert("count".into(), json!(self.count));
        load.insert("schedule_delay".into(), summarize_of(&self.schedule_delay)?);
        if let Some(stage) = stage {
            let send_duration = secs(max_sent - min_sent);
            let achieved = if send_duration > 0.0 {
                self.count as f64 / send_duration
            } else {
                0.0
            };
            load.insert("send_duration".into(), json!(send_duration));
            load.insert("requested_rate".into(), json!(stage.rate));
            load.insert("achieved_rate".into(), json!(achieved));
            if let Some(c) = stage.concurrency {
                load.insert("concurrency".into(), json!(c));
            }
        }

        let per_s = |amount: f64| {
            if total_time > 0.0 {
                amount / total_time
            } else {
                0.0
            }
        };
        let (input_sum, output_sum) = (self.input_sum as f64, self.output_sum as f64);
        let latency = json!({
            "request_latency": summarize_of(&self.request_latency)?,
            "normalized_time_per_output_token": summarize_of(&self.ntpot)?,
            "time_per_output_token": summarize_of(&self.tpot)?,
            "time_to_first_token": summarize_of(&self.ttft)?,
            "inter_token_latency": summarize_of(&self.itl)?,
        });
        let mut successes = json!({
            "count": self.ok,
            "latency": latency,
            "throughput": {
                "input_tokens_per_sec": per_s(input_sum),
                "output_tokens_per_sec": per_s(output_sum),
                "total_tokens_per_sec": per_s(input_sum + output_sum),
                "requests_per_sec": per_s(self.ok as f64),
                "images_per_sec": per_s(self.images.sum as f64),
                // llmbench sends no video or audio (refused when a profile asks for them).
                "videos_per_sec": 0.0,
                "audios_per_sec": 0.0,
            },
            "image": {
                "count": summarize_of(&self.images.count)?,
                "pixels": summarize_of(&self.images.pixels)?,
                "bytes": summarize_of(&self.images.bytes)?,
                "aspect_ratio": summarize_of(&self.images.aspect_ratio)?,
            },
            // Every success carried 0 videos and 0 audios: their counts summarise to zeros, the rest to null
            // (`summarize` of no instance), as upstream writes them for a run without either.
            "video": {
                "count": zeros(self.ok, percentiles),
                "frames": Value::Null,
                "pixels": Value::Null,
                "bytes": Value::Null,
                "aspect_ratio": Value::Null,
            },
            "audio": {
                "count": zeros(self.ok, percentiles),
                "seconds": Value::Null,
                "bytes": Value::Null,
            },
            "prompt_tokens": token_usage(&mut store.view(&self.input), percentiles, Some(self.cached_sum))?,
            // `prompt_len` is the older name, still read by llm-d-benchmark's converter for old reports.
            "prompt_len": summarize(&mut store.view(&self.input), percentiles)?,
            "output_len": summarize(&mut store.view(&self.output), percentiles)?,
            "output_tokens": token_usage(&mut store.view(&self.output), percentiles, None)?,
            "token_count_mismatches": 0,
        });

        if let (Some(goodput), Some(object)) = (
            self.goodput.inference_perf_metrics(),
            successes.as_object_mut(),
        ) {
            object.insert("goodput_metrics".into(), goodput);
        }

        let failures = json!({
            "count": self.failed,
            "request_latency": summarize(&mut store.view(&self.failed_latency), percentiles)?,
            "prompt_tokens": token_usage(&mut store.view(&self.failed_prompt), percentiles, Some(self.failed_cached_sum))?,
            "by_label": self.labels.to_json(),
        });

        Ok(json!({
            "benchmark_time_seconds": total_time,
            "load_summary": Value::Object(load),
            "successes": successes,
            "failures": failures,
        }))
    }
}

/// The `ResponsesSummary` of a bucket of requests: the whole run (`stage` `None`), or one stage with what the
/// profile asked of it.
pub fn lifecycle_metrics(
    records: &[&RequestRecord],
    percentiles: &[f64],
    stage: Option<StageMeta>,
    goodput: &[Slo],
) -> Value {
    let mut store = FloatStore::memory();
    let mut bucket = Lifecycle::new(&mut store, goodput);
    records.iter().for_each(|r| bucket.add(r, &mut store));
    // Samples in memory cannot fail to be read.
    bucket
        .metrics(&mut store, percentiles, stage)
        .unwrap_or(Value::Null)
}

/// `per_request_lifecycle_metrics.json`: one entry per request, as inference-perf writes `RequestLifecycleMetric`
/// (`start_time`, `end_time` on the run's monotonic clock in seconds; `info` with the request's input tokens and
/// the response's output tokens, the server's usage, and for a stream every chunk's and every token's arrival;
/// `error` with inference-perf's error type). llmbench does not keep request and response bodies — they are what
/// makes inference-perf's file reach gigabytes (inference-perf #522) — so `request` and `response` are null.
pub fn per_request_lifecycle(records: &[&RequestRecord]) -> Value {
    Value::Array(records.iter().map(|r| per_request(r)).collect())
}

/// One request's entry of [`per_request_lifecycle`].
pub(crate) fn per_request(r: &RequestRecord) -> Value {
    let mut response = Map::new();
    response.insert("output_tokens".into(), json!(r.output_tokens()));
    response.insert(
        "server_usage".into(),
        r.usage.map_or(Value::Null, |u| {
            let mut usage = json!({
                "prompt_tokens": u.prompt_tokens,
                "completion_tokens": u.completion_tokens,
                "total_tokens": u.prompt_tokens.saturating_add(u.completion_tokens),
            });
            // inference-perf keeps the server's usage object whole; the part of it we keep is the cached count.
            if let (Some(cached), Some(object)) = (u.cached_tokens, usage.as_object_mut()) {
                object.insert(
                    "prompt_tokens_details".into(),
                    json!({ "cached_tokens": cached }),
                );
            }
            usage
        }),
    );
    if r.streaming {
        let chunk_times: Vec<f64> = r.chunks.iter().map(|c| secs(c.at_ns)).collect();
        let token_times: Vec<f64> = r
            .chunks
            .iter()
            .filter_map(|c| c.kind.tokens().map(|n| (secs(c.at_ns), n)))
            .flat_map(|(t, n)| std::iter::repeat_n(t, n as usize))
            .collect();
        response.insert("response_chunks".into(), json!([]));
        response.insert("chunk_times".into(), json!(chunk_times));
        response.insert("output_token_times".into(), json!(token_times));
    }
    let mut extra = Map::new();
    if let Some(of) = r.conversation {
        extra.insert("user_session".into(), json!(of.id.to_string()));
        extra.insert("chat_round".into(), json!(of.turn + 1));
    }
    response.insert(
        "finish_reason".into(),
        r.finish_reason
            .as_ref()
            .map_or(Value::Null, |f| json!(f.as_str())),
    );
    let error = failure(r).map(|(error_type, error_msg)| {
        json!({
            "error_type": error_type,
            "error_msg": error_msg,
        })
    });
    json!({
        "start_time": secs(r.sent_ns),
        "end_time": secs(r.end_ns),
        "max_tokens": r.max_tokens,
        "request": Value::Null,
        "response": Value::Null,
        "info": {
            "request_metrics": {"text": {"input_tokens": r.input_tokens}, "image": null, "video": null, "audio": null},
            "response_metrics": Value::Object(response),
            "extra_info": Value::Object(extra),
            "lora_adapter": r.adapter.as_deref(),
            "labels": {},
            "input_tokens": r.input_tokens,
        },
        "error": error,
    })
}

pub(super) use llmbench_model::inference_perf::error_type;
use llmbench_model::inference_perf::{TRUNCATED_RESPONSE_ERROR, failure};

/// `sent − scheduled` in seconds, negative for an early send as inference-perf reports it.
fn schedule_delay_s(r: &RequestRecord) -> f64 {
    (r.sent_ns as f64 - r.scheduled_ns as f64) / 1e9
}

/// A request's reported cached prompt tokens, 0 when not reported (inference-perf's
/// `safe_float(prompt_tokens_details.get("cached_tokens"))`).
fn cached_tokens(r: &RequestRecord) -> u64 {
    r.usage.and_then(|u| u.cached_tokens).map_or(0, u64::from)
}

/// `{total, [cached, uncached,] …distribution}` as `summarize_prompt_token_usage` / `…_output_…` write it:
/// `cached` (given for prompt tokens) is the sum of the reported `cached_tokens`, `uncached` is `max(total −
/// cached, 0)`.
fn token_usage(
    sample: &mut SampleView<'_>,
    percentiles: &[f64],
    cached: Option<u64>,
) -> io::Result<Value> {
    let total = sample.sum();
    let mut out = Map::new();
    out.insert("total".into(), json!(total));
    if let Some(cached) = cached {
        let cached = cached as f64;
        out.insert("cached".into(), json!(cached));
        out.insert("uncached".into(), json!((total - cached).max(0.0)));
    }
    if let Value::Object(dist) = summarize(sample, percentiles)? {
        out.extend(dist);
    }
    Ok(Value::Object(out))
}

/// inference-perf's `make_concise_label`: `"<code> - <label>"` for HTTP errors, `Timeout`, `Connection Error`,
/// or the error type in lower case (`truncatedresponseerror` for an answer cut short).
fn concise_label(r: &RequestRecord) -> String {
    if r.outcome() == Outcome::Truncated {
        return TRUNCATED_RESPONSE_ERROR.to_ascii_lowercase();
    }
    let message = r
        .error
        .as_ref()
        .map_or("", |e| e.message.as_str())
        .to_ascii_lowercase();
    let class = r.error_class().unwrap_or(ErrorClass::Other);
    if class == ErrorClass::HttpStatus {
        let code = r
            .http_status
            .map_or_else(|| "?".to_owned(), |s| s.to_string());
        let label = match code.as_str() {
            "429" => "Rate Limit",
            "500" => "Internal Server Error",
            "502" => "Bad Gateway",
            "503" => "Service Unavailable",
            "504" => "Gateway Timeout",
            _ if [
                "context length",
                "maximum context",
                "max_tokens",
                "token limit",
            ]
            .iter()
            .any(|k| message.contains(k)) =>
            {
                "Context Window"
            }
            _ if message.contains("timeout") || message.contains("timed out") => "Timeout",
            _ if message.contains("model not found") || message.contains("no such model") => {
                "Model Not Found"
            }
            _ => "other",
        };
        return format!("{code} - {label}");
    }
    match class {
        ErrorClass::Timeout => "Timeout".to_owned(),
        _ if message.contains("timeout") || message.contains("timed out") => "Timeout".to_owned(),
        ErrorClass::Connect => "Connection Error".to_owned(),
        _ if message.contains("connect") => "Connection Error".to_owned(),
        other => other.as_str().to_owned(),
    }
}

/// inference-perf's failures `by_label`, gathered request by request: each label's count and first distinct
/// messages, in the order labels were first seen.
#[derive(Debug, Clone, Default)]
struct FailureLabels(Vec<(String, u64, Vec<String>)>);

impl FailureLabels {
    /// At most this many distinct messages are kept per label.
    const MAX_MESSAGES: usize = 100;

    fn add(&mut self, r: &RequestRecord) {
        let label = concise_label(r);
        let message = failure(r).map(|(_, message)| message).unwrap_or_default();
        self.count(label, 1, &[message.as_str()]);
    }

    fn count(&mut self, label: String, count: u64, messages: &[&str]) {
        let index = match self.0.iter().position(|l| l.0 == label) {
            Some(i) => i,
            None => {
                self.0.push((label, 0, Vec::new()));
                self.0.len() - 1
            }
        };
        let entry = &mut self.0[index];
        entry.1 += count;
        for message in messages {
            if !entry.2.iter().any(|m| m == message) && entry.2.len() < Self::MAX_MESSAGES {
                entry.2.push((*message).to_owned());
            }
        }
    }

    /// Adds `other`'s failures, seen after this bucket's.
    fn merge(&mut self, other: &FailureLabels) {
        for (label, count, messages) in &other.0 {
            let messages: Vec<&str> = messages.iter().map(String::as_str).collect();
            self.count(label.clone(), *count, &messages);
        }
    }

    /// `{label: {count, messages: [{message}]}}`, most frequent label first.
    fn to_json(&self) -> Value {
        let mut labels = self.0.clone();
        // Stable: equal counts keep their first-seen order, as Python's sorted does.
        labels.sort_by_key(|l| std::cmp::Reverse(l.1));
        let mut out = Map::new();
        for (label, count, messages) in labels {
            let messages: Vec<Value> = messages
                .into_iter()
                .map(|m| json!({ "message": m }))
                .collect();
            out.insert(label, json!({ "count": count, "messages": messages }));
        }
        Value::Object(out)
    }
}
