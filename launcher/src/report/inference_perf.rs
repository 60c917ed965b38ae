//! inference-perf's `*_lifecycle_metrics.json` (`ResponsesSummary` of `inference_perf/reportgen/base.py`):
//! seconds, numpy linear percentiles keyed `p0.1 … median … p99.9`, the send time as the clock start.
//!
//! Per successful request: `request_latency = end − sent`; `normalized_time_per_output_token = latency / n`
//! (0 for n = 0); with more than one token timestamp (streaming), `time_to_first_token = first token − sent`,
//! `time_per_output_token = (last token − first token) / (n − 1)` and the per-token gaps pooled into
//! `inter_token_latency` (every token of a chunk stamped with the chunk's arrival, so 0 inside a chunk).

use serde_json::{Map, Value, json};

use super::goodput::inference_perf_goodput_metrics;
use super::meta::{Slo, StageMeta};
use super::{secs, sorted};
use crate::metrics::percentile_linear;
use crate::record::{ErrorClass, RequestRecord};

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
pub(crate) fn summarize(values: Vec<f64>, percentiles: &[f64]) -> Value {
    if values.is_empty() {
        return Value::Null;
    }
    let n = values.len() as f64;
    let values = sorted(values);
    let mut out = Map::new();
    out.insert("mean".into(), json!(values.iter().sum::<f64>() / n));
    out.insert("min".into(), json!(values[0]));
    out.insert("max".into(), json!(values[values.len() - 1]));
    for &p in percentiles {
        let key = if p == 50.0 {
            "median".to_owned()
        } else {
            format!("p{}", super::percentile_word(p))
        };
        out.insert(key, json!(percentile_linear(&values, p / 100.0)));
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
    let request_latency = secs(r.e2e_ns());
    let n = r.output_tokens();
    let itl: Vec<f64> = r.itl_token_gaps_ns().map(secs).collect();
    // More than one token timestamp ⇔ at least one per-token gap.
    let streamed = !itl.is_empty();
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
        itl,
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
    let (ok, failed): (Vec<&RequestRecord>, Vec<&RequestRecord>) =
        records.iter().partition(|r| r.succeeded());
    let min_sent = records.iter().map(|r| r.sent_ns).min().unwrap_or(0);
    let max_sent = records.iter().map(|r| r.sent_ns).max().unwrap_or(0);
    let max_end = records.iter().map(|r| r.end_ns).max().unwrap_or(0);
    let total_time = secs(max_end.saturating_sub(min_sent));

    let delays = records.iter().map(|r| schedule_delay_s(r)).collect();
    let mut load = Map::new();
    load.insert("count".into(), json!(records.len()));
    load.insert("schedule_delay".into(), summarize(delays, percentiles));
    if let Some(stage) = stage {
        let send_duration = secs(max_sent - min_sent);
        let achieved = if send_duration > 0.0 {
            records.len() as f64 / send_duration
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

    let lat: Vec<Latencies> = ok.iter().map(|r| latencies(r)).collect();
    let per_s = |amount: f64| {
        if total_time > 0.0 {
            amount / total_time
        } else {
            0.0
        }
    };
    let input: Vec<f64> = ok.iter().map(|r| f64::from(r.prompt_tokens())).collect();
    let output: Vec<f64> = ok.iter().map(|r| f64::from(r.output_tokens())).collect();
    let (input_sum, output_sum) = (input.iter().sum::<f64>(), output.iter().sum::<f64>());

    let mut successes = json!({
        "count": ok.len(),
        "latency": {
            "request_latency": summarize(lat.iter().map(|l| l.request_latency).collect(), percentiles),
            "normalized_time_per_output_token": summarize(lat.iter().map(|l| l.ntpot).collect(), percentiles),
            "time_per_output_token": summarize(lat.iter().filter_map(|l| l.tpot).collect(), percentiles),
            "time_to_first_token": summarize(lat.iter().filter_map(|l| l.ttft).collect(), percentiles),
            "inter_token_latency": summarize(lat.iter().flat_map(|l| l.itl.iter().copied()).collect(), percentiles),
        },
        "throughput": {
            "input_tokens_per_sec": per_s(input_sum),
            "output_tokens_per_sec": per_s(output_sum),
            "total_tokens_per_sec": per_s(input_sum + output_sum),
            "requests_per_sec": per_s(ok.len() as f64),
            "images_per_sec": 0.0,
            "videos_per_sec": 0.0,
            "audios_per_sec": 0.0,
        },
        "prompt_tokens": token_usage(input.clone(), percentiles, true),
        // `prompt_len` is the older name, still read by llm-d-benchmark's converter for old reports.
        "prompt_len": summarize(input, percentiles),
        "output_len": summarize(output.clone(), percentiles),
        "output_tokens": token_usage(output, percentiles, false),
        "token_count_mismatches": 0,
    });

    if let (Some(goodput), Some(object)) = (
        inference_perf_goodput_metrics(&ok, goodput),
        successes.as_object_mut(),
    ) {
        object.insert("goodput_metrics".into(), goodput);
    }

    let failures = json!({
        "count": failed.len(),
        "request_latency": summarize(failed.iter().map(|r| secs(r.e2e_ns())).collect(), percentiles),
        "prompt_tokens": token_usage(failed.iter().map(|r| f64::from(r.prompt_tokens())).collect(), percentiles, true),
        "by_label": failures_by_label(&failed),
    });

    json!({
        "benchmark_time_seconds": total_time,
        "load_summary": Value::Object(load),
        "successes": successes,
        "failures": failures,
    })
}

/// `per_request_lifecycle_metrics.json`: one entry per request, as inference-perf writes `RequestLifecycleMetric`
/// (`start_time`, `end_time` on the run's monotonic clock in seconds; `info` with the request's input tokens and
/// the response's output tokens, the server's usage, and for a stream every chunk's and every token's arrival;
/// `error` with inference-perf's error type). llmbench does not keep request and response bodies — they are what
/// makes inference-perf's file reach gigabytes (inference-perf #522) — so `request` and `response` are null.
pub fn per_request_lifecycle(records: &[&RequestRecord]) -> Value {
    Value::Array(records.iter().map(|r| per_request(r)).collect())
}

fn per_request(r: &RequestRecord) -> Value {
    let mut response = Map::new();
    response.insert("output_tokens".into(), json!(r.output_tokens()));
    response.insert(
        "server_usage".into(),
        r.usage.map_or(Value::Null, |u| {
            json!({
                "prompt_tokens": u.prompt_tokens,
                "completion_tokens": u.completion_tokens,
                "total_tokens": u.prompt_tokens.saturating_add(u.completion_tokens),
            })
        }),
    );
    if r.streaming {
        let chunk_times: Vec<f64> = r.chunks.iter().map(|c| secs(c.at_ns)).collect();
        let token_times: Vec<f64> = r
            .chunks
            .iter()
            .filter_map(|c| c.kind.content_tokens().map(|n| (secs(c.at_ns), n)))
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
    let error = r.error_class().map(|class| {
        json!({
            "error_type": error_type(r, class),
            "error_msg": r.error.as_ref().map_or("", |e| e.message.as_str()),
        })
    });
    json!({
        "start_time": secs(r.sent_ns),
        "end_time": secs(r.end_ns),
        "request": Value::Null,
        "response": Value::Null,
        "info": {
            "request_metrics": {"text": {"input_tokens": r.input_tokens}, "image": null, "video": null, "audio": null},
            "response_metrics": Value::Object(response),
            "extra_info": Value::Object(extra),
            "lora_adapter": null,
            "labels": {},
            "input_tokens": r.input_tokens,
        },
        "error": error,
    })
}

/// The exception name inference-perf (aiohttp) records for each way a request fails.
fn error_type(r: &RequestRecord, class: ErrorClass) -> String {
    match class {
        ErrorClass::HttpStatus => format!(
            "HTTP Error {}",
            r.http_status
                .map_or_else(|| "?".to_owned(), |s| s.to_string())
        ),
        ErrorClass::Timeout => "TimeoutError".to_owned(),
        ErrorClass::Connect => "ClientConnectorError".to_owned(),
        ErrorClass::ConnectionReset => "ServerDisconnectedError".to_owned(),
        ErrorClass::StreamCut => "ClientPayloadError".to_owned(),
        ErrorClass::MalformedEvent => "JSONDecodeError".to_owned(),
        ErrorClass::Cancelled => "CancelledError".to_owned(),
        ErrorClass::Other => "Exception".to_owned(),
    }
}

/// `sent − scheduled` in seconds, negative for an early send as inference-perf reports it.
fn schedule_delay_s(r: &RequestRecord) -> f64 {
    (r.sent_ns as f64 - r.scheduled_ns as f64) / 1e9
}

/// `{total, [cached, uncached,] …distribution}` as `summarize_prompt_token_usage` / `…_output_…` write it. We
/// do not record cached prompt tokens, so `cached` is 0.
fn token_usage(values: Vec<f64>, percentiles: &[f64], prompt: bool) -> Value {
    let total: f64 = values.iter().sum();
    let mut out = Map::new();
    out.insert("total".into(), json!(total));
    if prompt {
        out.insert("cached".into(), json!(0.0));
        out.insert("uncached".into(), json!(total));
    }
    if let Value::Object(dist) = summarize(values, percentiles) {
        out.extend(dist);
    }
    Value::Object(out)
}

/// inference-perf's `make_concise_label`: `"<code> - <label>"` for HTTP errors, `Timeout`, `Connection Error`,
/// or the error type in lower case.
fn concise_label(r: &RequestRecord) -> String {
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

/// `{label: {count, messages: [{message}]}}`, most frequent label first, at most 100 distinct messages each.
fn failures_by_label(failed: &[&RequestRecord]) -> Value {
    const MAX_MESSAGES: usize = 100;
    let mut labels: Vec<(String, u64, Vec<String>)> = Vec::new();
    for r in failed {
        let label = concise_label(r);
        let message = r
            .error
            .as_ref()
            .map_or_else(String::new, |e| e.message.clone());
        let index = match labels.iter().position(|l| l.0 == label) {
            Some(i) => i,
            None => {
                labels.push((label, 0, Vec::new()));
                labels.len() - 1
            }
        };
        let entry = &mut labels[index];
        entry.1 += 1;
        if !entry.2.contains(&message) && entry.2.len() < MAX_MESSAGES {
            entry.2.push(message);
        }
    }
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
