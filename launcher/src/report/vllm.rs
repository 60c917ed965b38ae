//! vllm bench serve's result JSON (`--save-result`; `vllm/benchmarks/serve.py` `calculate_metrics`), in ms.
//!
//! vLLM's own definitions (v0.32): TTFT ends at the first chunk carrying `choices` (even empty or role-only); ITL
//! is the gap between consecutive `choices` chunks, pooled; E2EL ends at the last `choices` chunk (not the usage
//! chunk); TPOT = (E2EL − TTFT)/(n − 1) for n > 1; a stream without a `choices` chunk failed; input tokens are
//! the server's `usage.prompt_tokens` when it reports them, else the prompt lengths as built. Statistics are
//! numpy's: mean, median, population std and linear percentiles, 0 for an empty sample. `duration` spans the
//! first scheduled send to the last response.

use serde_json::{Map, Value, json};

use super::meta::{ApiKind, RunMeta};
use super::{secs, sorted};
use crate::metrics::percentile_linear;
use crate::record::RequestRecord;
use crate::wallclock;

/// The `backend` / `endpoint_type` vLLM names for the API we used.
fn backend(meta: &RunMeta) -> &'static str {
    match meta.api {
        ApiKind::Chat => "openai-chat",
        ApiKind::Completion => "vllm",
    }
}

/// Python's `str(float)`: `10.0`, `2.5`, `inf`.
fn py_float(x: f64) -> String {
    if x.is_infinite() && x > 0.0 {
        "inf".to_owned()
    } else {
        format!("{x:?}")
    }
}

/// `{label or backend}-{request_rate}qps[-concurrency{N}]-{model basename}-{YYYYmmdd-HHMMSS}.json`, as
/// `vllm bench serve --save-result` names it. A run of several stages writes one file per stage, told apart
/// by `-stage{N}` before the stamp.
pub fn vllm_result_file(meta: &RunMeta, stage: u32, several_stages: bool) -> String {
    if let Some(name) = result_filename(meta) {
        // `--result-filename` replaces the generated name; a run of several stages keeps them apart.
        return if several_stages {
            let (stem, ext) = name.rsplit_once('.').unwrap_or((&name, "json"));
            format!("{stem}-stage{stage}.{ext}")
        } else {
            name
        };
    }
    let stage_meta = meta.stages.get(stage as usize).copied().unwrap_or_default();
    let label = meta
        .report
        .vllm_label
        .clone()
        .unwrap_or_else(|| backend(meta).to_owned());
    let rate = py_float(stage_meta.rate.unwrap_or(f64::INFINITY));
    let concurrency = stage_meta
        .concurrency
        .map(|c| format!("-concurrency{c}"))
        .unwrap_or_default();
    let model = meta.model.rsplit('/').next().unwrap_or(&meta.model);
    let stage_part = if several_stages {
        format!("-stage{stage}")
    } else {
        String::new()
    };
    let stamp = wallclock::compact_utc((meta.t0_unix_ns / 1_000_000_000) as i64);
    format!("{label}-{rate}qps{concurrency}-{model}{stage_part}-{stamp}.json")
}

/// Success as vLLM counts it: a stream that never carried a `choices` chunk failed ("Never received a valid chunk
/// to calculate TTFT"), even when the server ended it properly.
pub(super) fn succeeded(r: &RequestRecord) -> bool {
    r.succeeded() && (!r.streaming || r.chunks.iter().any(|c| c.kind.has_choices()))
}

/// `--result-filename`, as a file name inside the results directory: vLLM joins it to `--result-dir`, which
/// llmbench replaces with its own directory, so only its last component is used.
fn result_filename(meta: &RunMeta) -> Option<String> {
    let name = meta.report.vllm_result_filename.as_deref()?;
    let last = name.rsplit(['/', '\\']).next().unwrap_or(name);
    (!last.is_empty() && last != "." && last != "..").then(|| last.to_owned())
}

/// numpy's mean, median, population std and linear percentiles, in ms, of values in seconds; 0 when empty.
fn stats_ms(values: Vec<f64>, percentiles: &[f64]) -> (f64, f64, f64, Vec<(f64, f64)>) {
    if values.is_empty() {
        return (
            0.0,
            0.0,
            0.0,
            percentiles.iter().map(|&p| (p, 0.0)).collect(),
        );
    }
    let n = values.len() as f64;
    let values = sorted(values);
    let mean = values.iter().sum::<f64>() / n;
    let std = (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n).sqrt();
    let at = |p: f64| percentile_linear(&values, p).unwrap_or(0.0) * 1000.0;
    let ps = percentiles.iter().map(|&p| (p, at(p / 100.0))).collect();
    (mean * 1000.0, at(0.5), std * 1000.0, ps)
}

/// The result JSON of one stage's requests.
pub fn vllm_result(meta: &RunMeta, stage: u32, records: &[&RequestRecord]) -> Value {
    let stage_meta = meta.stages.get(stage as usize).copied().unwrap_or_default();
    let ok: Vec<&RequestRecord> = records.iter().copied().filter(|r| succeeded(r)).collect();
    let start = records
        .iter()
        .map(|r| r.scheduled_ns.min(r.sent_ns))
        .min()
        .unwrap_or(0);
    let end = records.iter().map(|r| r.end_ns).max().unwrap_or(0);
    let duration = secs(end.saturating_sub(start));
    let per_s = |amount: f64| {
        if duration > 0.0 {
            amount / duration
        } else {
            0.0
        }
    };

    // vLLM takes the server's `usage.prompt_tokens` over its own count when the stream reports one.
    let total_input: u64 = ok.iter().map(|r| u64::from(r.prompt_tokens())).sum();
    let total_output: u64 = ok.iter().map(|r| u64::from(r.output_tokens())).sum();
    let (max_tokens_per_s, max_concurrent) = peak_second(&ok);

    let mut out = Map::new();
    out.insert(
        "date".into(),
        json!(wallclock::compact_utc(
            (meta.t0_unix_ns / 1_000_000_000) as i64
        )),
    );
    out.insert("endpoint_type".into(), json!(backend(meta)));
    out.insert("backend".into(), json!(backend(meta)));
    out.insert("label".into(), json!(meta.report.vllm_label));
    out.insert("model_id".into(), json!(meta.model));
    out.insert(
        "tokenizer_id".into(),
        json!(meta.tokenizer.as_deref().unwrap_or(&meta.model)),
    );
    out.insert("num_prompts".into(), json!(records.len()));
    out.insert(
        "request_rate".into(),
        stage_meta.rate.map_or_else(|| json!("inf"), |r| json!(r)),
    );
    out.insert(
        "burstiness".into(),
        json!(
            stage_meta
                .burstiness
                .unwrap_or(super::meta::Burstiness::Factor(1.0))
        ),
    );
    out.insert("max_concurrency".into(), json!(stage_meta.concurrency));
    out.insert("duration".into(), json!(duration));
    out.insert("completed".into(), json!(ok.len()));
    out.insert("failed".into(), json!(records.len() - ok.len()));
    out.insert("total_input_tokens".into(), json!(total_input));
    out.insert("total_output_tokens".into(), json!(total_output));
    out.insert("request_throughput".into(), json!(per_s(ok.len() as f64)));
    // vLLM writes null without `--goodput`, else good requests per second of the run's duration.
    let goodput = super::goodput::goodput(
        records,
        &meta.report.goodput,
        super::goodput::Definition::Vllm,
        duration,
    );
    out.insert(
        "request_goodput".into(),
        goodput.map_or(Value::Null, |g| json!(g.requests_per_s)),
    );
    out.insert(
        "output_throughput".into(),
        json!(per_s(total_output as f64)),
    );
    out.insert(
        "total_token_throughput".into(),
        json!(per_s((total_input + total_output) as f64)),
    );
    out.insert("max_output_tokens_per_s".into(), json!(max_tokens_per_s));
    out.insert("max_concurrent_requests".into(), json!(max_concurrent));

    let e2el = |r: &RequestRecord| r.e2e_vllm_ns().unwrap_or_else(|| r.e2e_ns());
    let metrics: [(&str, Vec<f64>); 4] = [
        (
            "ttft",
            ok.iter()
                .filter_map(|r| r.ttft_vllm_ns())
                .map(secs)
                .collect(),
        ),
        (
            "tpot",
            ok.iter()
                .filter_map(|r| r.tpot_vllm_ns())
                .map(secs)
                .collect(),
        ),
        (
            "itl",
            ok.iter()
                .flat_map(|r| r.itl_vllm_gaps_ns())
                .map(secs)
                .collect(),
        ),
        ("e2el", ok.iter().map(|r| secs(e2el(r))).collect()),
    ];
    let percentiles = &meta.report.vllm_metric_percentiles;
    for (name, values) in metrics {
        if !meta
            .report
            .vllm_percentile_metrics
            .iter()
            .any(|m| m == name)
        {
            continue;
        }
        let (mean, median, std, ps) = stats_ms(values, percentiles);
        out.insert(format!("mean_{name}_ms"), json!(mean));
        out.insert(format!("median_{name}_ms"), json!(median));
        out.insert(format!("std_{name}_ms"), json!(std));
        for (p, v) in ps {
            out.insert(
                format!("p{}_{name}_ms", super::percentile_word(p)),
                json!(v),
            );
        }
    }

    if meta.report.vllm_save_detailed {
        // Per request, failures included with zeros, as vLLM lists its outputs; generated texts are not kept.
        let ok_or = |r: &RequestRecord, v: Value| if succeeded(r) { v } else { json!(0) };
        out.insert(
            "input_lens".into(),
            records.iter().map(|r| json!(r.prompt_tokens())).collect(),
        );
        out.insert(
            "output_lens".into(),
            records
                .iter()
                .map(|r| ok_or(r, json!(r.output_tokens())))
                .collect(),
        );
        out.insert(
            "ttfts".into(),
            records
                .iter()
                .map(|r| ok_or(r, json!(r.ttft_vllm_ns().map_or(0.0, secs))))
                .collect(),
        );
        out.insert(
            "itls".into(),
            records
                .iter()
                .map(|r| json!(r.itl_vllm_gaps_ns().map(secs).collect::<Vec<f64>>()))
                .collect(),
        );
        out.insert(
            "errors".into(),
            records
                .iter()
                .map(|r| json!(r.error.as_ref().map_or("", |e| e.message.as_str())))
                .collect(),
        );
    }
    Value::Object(out)
}

/// vLLM's `max_output_tokens_per_s` and `max_concurrent_requests`: 1-second buckets from the earliest send,
/// each `choices` chunk of a successful request counted as a token in the bucket it arrived in, each request
/// counted in every bucket from its send to its last chunk.
fn peak_second(ok: &[&RequestRecord]) -> (f64, u64) {
    let Some(min_start) = ok.iter().map(|r| r.sent_ns).min() else {
        return (0.0, 0);
    };
    let end_of = |r: &RequestRecord| r.sent_ns + r.e2e_vllm_ns().unwrap_or_else(|| r.e2e_ns());
    let max_end = ok.iter().map(|r| end_of(r)).max().unwrap_or(min_start);
    let buckets = (secs(max_end - min_start).ceil() as usize) + 1;
    let mut tokens = vec![0u64; buckets];
    let mut concurrent = vec![0u64; buckets];
    let bucket = |ns: u64| ((ns.saturating_sub(min_start)) / 1_000_000_000) as usize;
    for r in ok {
        for c in r
            .chunks
            .iter()
            .filter(|c| r.streaming && c.kind.has_choices())
        {
            if let Some(slot) = tokens.get_mut(bucket(c.at_ns)) {
                *slot += 1;
            }
        }
        let seconds = bucket(r.sent_ns)..=bucket(end_of(r)).min(buckets - 1);
        for slot in concurrent.get_mut(seconds).unwrap_or_default() {
            *slot += 1;
        }
    }
    (
        tokens.into_iter().max().unwrap_or(0) as f64,
        concurrent.into_iter().max().unwrap_or(0),
    )
}
