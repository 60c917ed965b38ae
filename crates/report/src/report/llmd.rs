//! The llm-d benchmark report v0.2 (`reference/llm-d-benchmark/benchmark_report/br_v0_2_json_schema.json`),
//! one per stage as llm-d-benchmark's analyser writes one per guidellm or inference-perf stage.
//!
//! Latencies use the definitions of inference-perf's own v0.2 adapter (FORMATS.md §3.2, §3.7): TTFT to the
//! first content token, TPOT = (last − first token)/(n − 1), ITL per-token gaps pooled, NTPOT = E2E/n (0 for
//! n = 0), all from the send; statistics are mean, sample stddev (ddof = 1), min, max and numpy linear
//! percentiles 0.1 … 99.9, in seconds. Throughput comes from our summary (inference-perf's window), as single
//! values in `mean`. `load.standardized.tool` names the harness dialect the profile was written in (the
//! upstream models accept only those names); `tool_version` says it was llmbench. `scenario.stack` describes the
//! stack under test: what the server said it is and, when the launcher knows, how it was started (see
//! [`stack_component`]).
//!
//! The prefix-cache hit rate the server reported in its responses (`usage.prompt_tokens_details.cached_tokens`, see
//! `metrics::summary::PrefixCacheHits`) has no place of its own in v0.2: `ResourceMetrics.cache_hit_rate` is a
//! per-component figure of the stack's own metrics (which `server_metrics` fills from the engine's cache counters), and
//! `results.request_performance` is closed. It goes under `results.observability`, the one open object, as the
//! llmbench extension [`PREFIX_CACHE_KEY`].

use std::io;

use serde_json::{Map, Value, json};

use super::inference_perf::Lifecycle;
use super::meta::RunMeta;
use super::sample::{FloatStore, SampleView};
use super::secs;
use llmbench_metrics::metrics::Summary;
use llmbench_model::record::RequestRecord;
use llmbench_model::wallclock;

/// The llmbench extension key under `results.observability` for the client-reported prefix-cache hits.
pub const PREFIX_CACHE_KEY: &str = "llmbench_prefix_cache";

/// The file name prefix; the comma is part of upstream's names.
pub const LLMD_REPORT_PREFIX: &str = "benchmark_report_v0.2,_";

/// A stage's report file: `benchmark_report_v0.2,_stage_N.yaml`.
pub fn llmd_report_v02_file(stage: u32) -> String {
    format!("{LLMD_REPORT_PREFIX}stage_{stage}.yaml")
}

/// The percentiles of a `Statistics` object: key and fraction.
pub(crate) const STAT_PERCENTILES: [(&str, f64); 11] = [
    ("p0p1", 0.001),
    ("p1", 0.01),
    ("p5", 0.05),
    ("p10", 0.1),
    ("p25", 0.25),
    ("p50", 0.5),
    ("p75", 0.75),
    ("p90", 0.9),
    ("p95", 0.95),
    ("p99", 0.99),
    ("p99p9", 0.999),
];

/// A `Statistics` object of a sample in `units`; `None` for an empty sample.
fn statistics(sample: &mut SampleView<'_>, units: &str) -> io::Result<Option<Value>> {
    let (Some(mean), Some((min, max))) = (sample.mean(), sample.min_max()?) else {
        return Ok(None);
    };
    let n = sample.len();
    let stddev = if n < 2 {
        0.0
    } else {
        (sample.squared_deviations(mean)? / (n as f64 - 1.0)).sqrt()
    };
    let fractions = STAT_PERCENTILES.map(|(_, p)| p);
    let values = sample.percentiles(&fractions)?;
    let mut out = Map::new();
    out.insert("units".into(), json!(units));
    out.insert("mean".into(), json!(mean));
    out.insert("stddev".into(), json!(stddev));
    out.insert("min".into(), json!(min));
    for ((key, _), value) in STAT_PERCENTILES.iter().zip(values) {
        out.insert((*key).into(), json!(value));
    }
    out.insert("max".into(), json!(max));
    Ok(Some(Value::Object(out)))
}

/// A `Statistics` object holding one value.
fn single(value: f64, units: &str) -> Value {
    json!({ "units": units, "mean": value })
}

/// Inserts `value` under `key` unless it is `None`.
fn put(map: &mut Map<String, Value>, key: &str, value: Option<Value>) {
    if let Some(value) = value {
        map.insert(key.to_owned(), value);
    }
}

/// ISO-8601 duration in seconds, e.g. `PT49.972S`.
fn iso_duration(seconds: f64) -> String {
    format!("PT{seconds}S")
}

/// The v0.2 report of one stage's requests; `summary` is that stage's summary from the same records.
pub fn llmd_report_v02(
    meta: &RunMeta,
    stage: u32,
    records: &[&RequestRecord],
    summary: &Summary,
) -> Value {
    let mut store = FloatStore::memory();
    let mut bucket = Lifecycle::new(&mut store, &[]);
    records.iter().for_each(|r| bucket.add(r, &mut store));
    // Samples in memory cannot fail to be read.
    llmd_report_v02_of(meta, stage, &bucket, &mut store, summary).unwrap_or(Value::Null)
}

/// The v0.2 report of one stage from its requests' figures gathered in `bucket` (in memory or spilled).
pub(crate) fn llmd_report_v02_of(
    meta: &RunMeta,
    stage: u32,
    bucket: &Lifecycle,
    store: &mut FloatStore,
    summary: &Summary,
) -> io::Result<Value> {
    let (start_ns, end_ns) = bucket.span_ns();
    let stage_meta = meta.stages.get(stage as usize).copied().unwrap_or_default();
    let ok = bucket.succeeded();
    // Means of token counts: exact integer sums over the successes.
    let mean = |sum: u64| if ok == 0 { 0.0 } else { sum as f64 / ok as f64 };

    let mut requests = Map::new();
    requests.insert("total".into(), json!(bucket.count()));
    requests.insert("failures".into(), json!(bucket.count() - ok));
    requests.insert("incomplete".into(), json!(0));
    put(
        &mut requests,
        "input_length",
        statistics(&mut store.view(&bucket.input), "count")?,
    );
    put(
        &mut requests,
        "output_length",
        statistics(&mut store.view(&bucket.output), "count")?,
    );

    let mut latency = Map::new();
    put(
        &mut latency,
        "time_to_first_token",
        statistics(&mut store.view(&bucket.ttft), "s")?,
    );
    put(
        &mut latency,
        "normalized_time_per_output_token",
        statistics(&mut store.view(&bucket.ntpot), "s/token")?,
    );
    put(
        &mut latency,
        "time_per_output_token",
        statistics(&mut store.view(&bucket.tpot), "s/token")?,
    );
    put(
        &mut latency,
        "inter_token_latency",
        statistics(&mut store.view(&bucket.itl), "s/token")?,
    );
    put(
        &mut latency,
        "request_latency",
        statistics(&mut store.view(&bucket.request_latency), "s")?,
    );

    let t = &summary.throughput;
    let throughput = json!({
        "input_token_rate": single(t.input_tokens_per_s, "tokens/s"),
        "output_token_rate": single(t.output_tokens_per_s, "tokens/s"),
        "total_token_rate": single(t.total_tokens_per_s, "tokens/s"),
        "request_rate": single(t.requests_per_s, "queries/s"),
    });

    let mut standardized = Map::new();
    standardized.insert("tool".into(), json!(meta.harness.as_str()));
    standardized.insert(
        "tool_version".into(),
        json!(format!("llmbench-{}", meta.llmbench_version)),
    );
    standardized.insert("parallelism".into(), json!(meta.shard.count.max(1)));
    standardized.insert("source".into(), json!("unknown"));
    standardized.insert("stage".into(), json!(stage));
    standardized.insert(
        "input_seq_len".into(),
        json!({ "distribution": "other", "value": mean(bucket.input_sum) }),
    );
    standardized.insert(
        "output_seq_len".into(),
        json!({ "distribution": "other", "value": mean(bucket.output_sum) }),
    );
    if let Some(rate) = stage_meta.rate.filter(|r| *r > 0.0 && r.is_finite()) {
        standardized.insert("rate_qps".into(), json!(rate));
    }
    if let Some(c) = stage_meta.concurrency.filter(|c| *c >= 1) {
        standardized.insert("concurrency".into(), json!(c));
    }

    let mut results = json!({
        "request_performance": {
            "aggregate": {
                "requests": Value::Object(requests),
                "latency": Value::Object(latency),
                "throughput": throughput,
            },
        },
    });
    if let (Some(hits), Some(object)) = (summary.prefix_cache, results.as_object_mut()) {
        object.insert(
            "observability".into(),
            json!({ PREFIX_CACHE_KEY: prefix_cache_extension(&hits) }),
        );
    }

    let mut scenario = json!({
        "load": {
            "metadata": { "schema_version": "0.0.1", "description": format!("{} profile {}", meta.harness, meta.profile) },
            "standardized": Value::Object(standardized),
            "native": {
                "args": { "profile": meta.profile, "model": meta.model, "endpoint": meta.endpoint },
            },
        },
    });
    if let (Some(component), Some(object)) = (stack_component(meta), scenario.as_object_mut()) {
        object.insert("stack".into(), json!([component]));
    }

    Ok(json!({
        "version": "0.2",
        "run": {
            "uid": format!("{}-stage-{stage}", meta.run_id),
            "eid": meta.run_id,
            "time": {
                "start": wallclock::rfc3339_millis(meta.t0_unix_ns.saturating_add(start_ns)),
                "end": wallclock::rfc3339_millis(meta.t0_unix_ns.saturating_add(end_ns)),
                "duration": iso_duration(secs(end_ns.saturating_sub(start_ns))),
            },
            "description": meta.run_id,
        },
        "scenario": scenario,
        "results": results,
    }))
}

/// The stack under test as one `scenario.stack` component, when the run knows anything of it: what the server
/// said it is (run.json's `server`, asked of every server) and how it was started (`--stack-info`, `--serve`). The
/// schema's `inference_engine` kind requires the accelerator (model, count, parallelism), which neither a command
/// line nor the server's answers say, so the component is `generic` (whose extra fields the schema leaves open):
/// `tool` is the engine the server named (`llama.cpp`), else the command's program (`vllm`), else the image;
/// `tool_version` the engine's version, else the image; `model` the one that answered the run. `native` carries the
/// engine flags as upstream's example does (`--flag: value`, a bare flag `null`), the env as given (secrets
/// redacted) and, under `config`, the exact command line, the raw `/v1/models` answer and the server's record.
fn stack_component(meta: &RunMeta) -> Option<Value> {
    let (stack, server) = (meta.stack.as_ref(), meta.server.as_ref());
    if stack.is_none() && server.is_none() {
        return None;
    }
    let program = stack
        .and_then(|s| s.command.first())
        .and_then(|program| program.rsplit('/').next())
        .filter(|name| !name.is_empty())
        .map(str::to_owned);
    let image = stack.and_then(|s| s.image.clone());
    let tool = server
        .and_then(|s| s.engine.clone())
        .or(program)
        .or_else(|| image.clone())
        .unwrap_or_else(|| "unknown".to_owned());
    let tool_version = server
        .and_then(|s| s.version.clone())
        .or_else(|| stack.and_then(|s| s.version.clone()))
        .or_else(|| image.clone())
        .unwrap_or_else(|| "unknown".to_owned());
    let mut standardized = Map::new();
    standardized.insert("kind".into(), json!("generic"));
    standardized.insert("tool".into(), json!(tool));
    standardized.insert("tool_version".into(), json!(tool_version));
    let model = super::served_model(meta)
        .or_else(|| stack.and_then(llmbench_engine::stack::StackMeta::model));
    if let Some(model) = model {
        standardized.insert("model".into(), json!({ "name": model }));
    }
    if let Some(image) = &image {
        standardized.insert("image".into(), json!(image));
    }
    let empty = Vec::new();
    let args = stack.map_or(&empty, |s| &s.args);
    let command: Vec<&String> = stack
        .map(|s| s.command.iter().chain(&s.args).collect())
        .unwrap_or_default();
    let description = match stack.map(|s| s.source) {
        Some(llmbench_engine::stack::StackSource::Serve) => "started by llmbench --serve",
        Some(llmbench_engine::stack::StackSource::StackInfo) => "as --stack-info describes it",
        None => "as its answers describe it",
    };
    Some(json!({
        "metadata": {
            "schema_version": "0.0.1",
            "label": "stack-0",
            "cfg_id": cfg_id(stack, server),
            "description": format!("the stack under test ({description})"),
        },
        "standardized": Value::Object(standardized),
        "native": {
            "args": Value::Object(flag_map(args)),
            "envars": stack.map(|s| json!(s.env)).unwrap_or_else(|| json!({})),
            "config": {
                "command": command,
                "models": stack.and_then(|s| s.models.body.clone()),
                "server": server,
            },
        },
    }))
}

/// Command-line flags as upstream's report lists them: `--flag value` and `--flag=value` as `"--flag": "value"`, a
/// flag followed by another flag (or nothing) as `"--flag": null`. Positional arguments (`serve`, the model) are
/// not flags; the exact command line is in `native.config.command`.
pub(crate) fn flag_map(args: &[String]) -> Map<String, Value> {
    let mut flags = Map::new();
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        i += 1;
        if !arg.starts_with('-') || arg == "-" || arg == "--" {
            continue;
        }
        if let Some((name, value)) = arg.split_once('=') {
            flags.insert(name.to_owned(), json!(value));
            continue;
        }
        // A negative number is a value, not a flag.
        match args.get(i) {
            Some(next) if !next.starts_with('-') || next.parse::<f64>().is_ok() => {
                flags.insert(arg.clone(), json!(next));
                i += 1;
            }
            _ => {
                flags.insert(arg.clone(), Value::Null);
            }
        }
    }
    flags
}

/// The component's configuration id, "a hash of this component's configuration": 64-bit FNV-1a of its image,
/// command line and env, and of the engine, version, models and settings the server reported, in hex. Stable
/// across runs and machines (unlike std's randomly keyed hasher), so two runs of one configuration share it.
fn cfg_id(
    stack: Option<&llmbench_engine::stack::StackMeta>,
    server: Option<&llmbench_engine::stack::identity::ServerIdentity>,
) -> String {
    let mut hash = llmbench_core::fnv::Fnv1a64::new();
    // Each text ends in 0xff, a byte no UTF-8 text holds, so ("ab", "c") and ("a", "bc") differ.
    let mut feed = |text: &str| {
        hash.write(text.as_bytes());
        hash.write(&[0xff]);
    };
    if let Some(stack) = stack {
        feed(stack.image.as_deref().unwrap_or_default());
        stack
            .command
            .iter()
            .chain(&stack.args)
            .for_each(|a| feed(a));
        for (name, value) in &stack.env {
            feed(name);
            feed(value);
        }
    }
    if let Some(server) = server {
        feed(server.engine.as_deref().unwrap_or_default());
        feed(server.version.as_deref().unwrap_or_default());
        for model in &server.models {
            feed(&model.id);
        }
        for (name, value) in &server.settings {
            feed(name);
            feed(&value.to_string());
        }
    }
    format!("{:016x}", hash.finish())
}

/// The llmbench extension: the hit rate as a `Statistics` in percent (the unit of the schema's own
/// `cache_hit_rate`), with the sums and counts it is made of and where it comes from.
fn prefix_cache_extension(hits: &llmbench_metrics::metrics::PrefixCacheHits) -> Value {
    json!({
        "source": "usage.prompt_tokens_details.cached_tokens",
        "hit_rate": single(hits.hit_rate * 100.0, "percent"),
        "cached_tokens": hits.cached_tokens,
        "prompt_tokens": hits.prompt_tokens,
        "requests_with_usage": hits.requests_with_usage,
        "requests_reporting": hits.requests_reporting,
    })
}
