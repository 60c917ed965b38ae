//! Server metrics of every engine the catalogue knows, pinned by `/metrics` pages under `fixtures/server_metrics/`:
//! llama.cpp's recorded from the real `llama-server`, the others written from each project's source (each file's
//! header says which file and commit). Each test summarizes two or three pages as a run's scrapes would be and checks
//! the keys and values against figures worked out by hand from the pages. Then the same through the binary: a run
//! whose metrics endpoint replays llama.cpp's recorded pages, one whose endpoint names no known engine, and (when
//! `LLMBENCH_LLAMA_SERVER`, `LLMBENCH_LLAMA_MODEL` and `LLMBENCH_LLAMA_TOKENIZER` point at a built `llama-server`, a
//! GGUF model and its `tokenizer.json`) a run against the real server.

mod common;

use std::path::Path;
use std::time::Duration;

use common::{LlamaServer, json, llmbench, run_profile, stdout, succeeded, write};
use llmbench_metrics::server_metrics::parse::parse_page;
use llmbench_metrics::server_metrics::summary::find;
use llmbench_metrics::server_metrics::{
    Figures, MetricSummary, Scrape, ServerMetricsSummary, Window,
    inference_perf_prometheus_metrics, plot_series, summarize,
};
use serde_json::{Value, json};

const TARGET: &str = "http://10.0.0.7:8000/metrics";

fn fixture(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/server_metrics")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A successful scrape of `target` at `t` whose page is the fixture `name`.
fn scrape_of(target: &str, t: f64, name: &str) -> Scrape {
    let page = parse_page(&fixture(name), 100_000);
    assert_eq!(page.warning(), None, "{name}");
    Scrape {
        t_s: t,
        target: target.to_owned(),
        ok: true,
        scrape_ms: Some(2.0),
        error: None,
        types: page.types,
        samples: page.samples,
        truncated: None,
    }
}

/// The pages `names` of one target, one second apart, summarized over their whole span.
fn summary_of(names: &[&str]) -> ServerMetricsSummary {
    let scrapes: Vec<Scrape> = names
        .iter()
        .enumerate()
        .map(|(i, name)| scrape_of(TARGET, i as f64, name))
        .collect();
    let end = (names.len() - 1) as f64;
    summarize(
        scrapes,
        Duration::from_secs(1),
        Window {
            start_s: 0.0,
            end_s: end,
        },
        &[],
        None,
    )
}

fn metric<'a>(metrics: &'a [MetricSummary], key: &str) -> &'a MetricSummary {
    find(metrics, key).unwrap_or_else(|| panic!("no `{key}` in {metrics:#?}"))
}

fn increase(metrics: &[MetricSummary], key: &str) -> f64 {
    match &metric(metrics, key).figures {
        Figures::Counter { increase, .. } => *increase,
        other => panic!("{key}: {other:?}"),
    }
}

/// (mean, max) of a gauge.
fn gauge(metrics: &[MetricSummary], key: &str) -> (f64, f64) {
    match &metric(metrics, key).figures {
        Figures::Gauge { mean, max, .. } => (*mean, *max),
        other => panic!("{key}: {other:?}"),
    }
}

/// (count, mean, p50, p90) of a histogram.
fn histogram(metrics: &[MetricSummary], key: &str) -> (f64, f64, Option<f64>, Option<f64>) {
    match &metric(metrics, key).figures {
        Figures::Histogram {
            count,
            mean,
            p50,
            p90,
            ..
        } => (*count, *mean, *p50, *p90),
        other => panic!("{key}: {other:?}"),
    }
}

fn percent(metrics: &[MetricSummary], key: &str) -> f64 {
    match &metric(metrics, key).figures {
        Figures::Ratio { percent } => *percent,
        other => panic!("{key}: {other:?}"),
    }
}

fn close(actual: f64, expected: f64) -> bool {
    (actual - expected).abs() <= 1e-9 * expected.abs().max(1.0)
}

#[track_caller]
fn assert_close(actual: f64, expected: f64) {
    assert!(close(actual, expected), "{actual} ≠ {expected}");
}

fn raw_names(metrics: &[MetricSummary]) -> Vec<&str> {
    metrics
        .iter()
        .filter(|m| m.key.is_none())
        .map(|m| m.name.as_str())
        .collect()
}

#[test]
fn llama_cpp_recorded_pages_give_running_waiting_tokens_and_a_hit_rate_from_cached_tokens() {
    let summary = summary_of(&[
        "llamacpp_idle.prom",
        "llamacpp_busy.prom",
        "llamacpp_after.prom",
    ]);
    assert_eq!(summary.targets[0].engine.as_deref(), Some("llama.cpp"));
    assert!(summary.warnings.is_empty(), "{:?}", summary.warnings);
    let metrics = &summary.overall.targets[0].metrics;
    // requests_processing 0, 4, 0; requests_deferred 0, 6, 0.
    assert_eq!(
        metric(metrics, "running").name,
        "llamacpp:requests_processing"
    );
    let (mean, max) = gauge(metrics, "running");
    assert_close(mean, 4.0 / 3.0);
    assert_eq!(max, 4.0);
    assert_eq!(gauge(metrics, "waiting"), (2.0, 6.0));
    // prompt_tokens_total 11661 → 13591 leaves the cached ones out; prompt_tokens_cached_total 11653 → 14543.
    assert_eq!(increase(metrics, "prompt_tokens_computed"), 1930.0);
    assert_eq!(increase(metrics, "prompt_tokens_cached"), 2890.0);
    // Every prompt token: 1930 + 2890 = 4820 = 10 × 482, what the server's usage said.
    assert_eq!(increase(metrics, "prompt_tokens"), 4820.0);
    assert_eq!(
        metric(metrics, "prompt_tokens").name,
        "llamacpp:prompt_tokens_total + llamacpp:prompt_tokens_cached_total"
    );
    // tokens_predicted_total 2878 → 6878: 10 × 400.
    assert_eq!(increase(metrics, "generation_tokens"), 4000.0);
    // 2890 of 4820 prompt tokens came from the cache (usage: 4 × 1 + 6 × 481).
    assert_close(
        percent(metrics, "prefix_cache_hit_rate"),
        2890.0 / 4820.0 * 100.0,
    );
    // What llama.cpp does not report is absent, not 0.
    for key in [
        "kv_cache_usage",
        "ttft",
        "e2e",
        "requests_finished",
        "preemptions",
    ] {
        assert!(find(metrics, key).is_none(), "{key}");
    }
    assert!(raw_names(metrics).contains(&"llamacpp:n_decode_total"));
    // One target: the aggregate says the same.
    assert_eq!(summary.overall.aggregate, *metrics);

    let file = inference_perf_prometheus_metrics(&summary.overall);
    let successes = &file["successes"];
    assert_eq!(
        successes["prefix_cache_hit_percent"],
        json!({"mean": 59.958506})
    );
    assert_eq!(successes["prompt_tokens_cached"], 2890.0);
    // 4000 generated tokens in the 2 s window; 4820 prompt tokens.
    assert_eq!(
        successes["output_len"],
        json!({"mean": 2000.0, "rate": 2000.0})
    );
    assert_eq!(successes["prompt_len"]["rate"], 2410.0);
    assert_eq!(successes["num_requests_running"], json!({"mean": 1.333333}));
    assert_eq!(successes["queue_len"], json!({"mean": 2.0}));
    // Not reported by llama.cpp: null, where inference-perf would write a 0 indistinguishable from a measured one.
    let nothing = json!({"mean": null, "median": null, "p90": null, "p99": null});
    assert_eq!(successes["kv_cache_usage_percentage"], nothing);
    assert_eq!(successes["time_to_first_token"], nothing);
    assert_eq!(successes["count"], Value::Null);
    assert_eq!(successes["num_preemptions_total"], json!({"mean": null}));

    let series = plot_series(vec![
        scrape_of(TARGET, 0.0, "llamacpp_idle.prom"),
        scrape_of(TARGET, 1.0, "llamacpp_busy.prom"),
        scrape_of(TARGET, 2.0, "llamacpp_after.prom"),
    ]);
    let line = |name: &str| {
        series
            .iter()
            .find(|s| s.metric == name)
            .unwrap_or_else(|| panic!("no {name} in {series:#?}"))
    };
    assert_eq!(
        line("llamacpp:requests_processing").points,
        [(0.0, 0.0), (1.0, 4.0), (2.0, 0.0)]
    );
    // Per interval: 4 of 1928 prompt tokens cached while the slots filled, then 2886 of 2892.
    let hit_rate = &line("prefix cache hit rate").points;
    assert_eq!(hit_rate.len(), 2);
    assert_close(hit_rate[0].1, 4.0 / 1928.0 * 100.0);
    assert_close(hit_rate[1].1, 2886.0 / 2892.0 * 100.0);
    assert_eq!(
        line("prompt tokens/s").points,
        [(1.0, 1928.0), (2.0, 2892.0)]
    );
}

#[test]
fn an_older_llama_cpp_without_a_cached_token_counter_has_no_hit_rate_rather_than_zero() {
    let summary = summary_of(&["llamacpp_old_0.prom", "llamacpp_old_1.prom"]);
    assert_eq!(summary.targets[0].engine.as_deref(), Some("llama.cpp"));
    let metrics = &summary.overall.aggregate;
    // Its KV-cache gauge, gone from later releases.
    assert_eq!(
        metric(metrics, "kv_cache_usage").name,
        "llamacpp:kv_cache_usage_ratio"
    );
    assert_eq!(gauge(metrics, "kv_cache_usage"), (0.1875, 0.375));
    assert_eq!(increase(metrics, "prompt_tokens_computed"), 1200.0);
    assert_eq!(increase(metrics, "generation_tokens"), 800.0);
    // Computed tokens alone say nothing of the cache: no prompt-token total, no hit rate.
    assert!(find(metrics, "prompt_tokens").is_none());
    assert!(find(metrics, "prefix_cache_hit_rate").is_none());
    let successes = &inference_perf_prometheus_metrics(&summary.overall)["successes"];
    assert_eq!(successes["prefix_cache_hit_percent"], json!({"mean": null}));
    assert_eq!(successes["prompt_len"], json!({"mean": null, "rate": null}));
    assert_eq!(successes["kv_cache_usage_percentage"]["mean"], 0.1875);
}

#[test]
fn vllm_0_10_counts_each_figure_once_though_it_exposes_old_and_new_names() {
    let summary = summary_of(&["vllm_0.prom", "vllm_1.prom"]);
    assert_eq!(summary.targets[0].engine.as_deref(), Some("vLLM"));
    let metrics = &summary.overall.aggregate;
    // prefix_cache_queries 1000 → 5000 and gpu_prefix_cache_queries the same: 4000, not 8000.
    assert_eq!(increase(metrics, "prefix_cache_queries"), 4000.0);
    assert_eq!(
        metric(metrics, "prefix_cache_queries").name,
        "vllm:prefix_cache_queries_total"
    );
    assert_eq!(increase(metrics, "prefix_cache_hits"), 2000.0);
    assert_eq!(percent(metrics, "prefix_cache_hit_rate"), 50.0);
    // The deprecated spellings are kept raw, under their own names.
    let raw = raw_names(metrics);
    for name in [
        "vllm:gpu_cache_usage_perc",
        "vllm:gpu_prefix_cache_queries_total",
        "vllm:gpu_prefix_cache_hits_total",
    ] {
        assert!(raw.contains(&name), "{name} not in {raw:?}");
    }
    assert_eq!(
        metric(metrics, "kv_cache_usage").name,
        "vllm:kv_cache_usage_perc"
    );
    let (mean, max) = gauge(metrics, "kv_cache_usage");
    assert_close(mean, 0.21);
    assert_eq!(max, 0.42);
    assert_eq!(gauge(metrics, "running"), (4.0, 8.0));
    assert_eq!(increase(metrics, "prompt_tokens"), 4000.0);
    assert_eq!(increase(metrics, "generation_tokens"), 2000.0);
    // 30 length + 2 stop.
    assert_eq!(increase(metrics, "requests_finished"), 32.0);
    assert_eq!(increase(metrics, "preemptions"), 1.0);
    // TTFT: 16 in (0.06, 0.08], 16 in (0.1, 0.25], 3.2 s in all. p50 at rank 16 ends the first bucket: 0.08; p90 at
    // rank 28.8 is 12.8 into the second: 0.1 + 0.15 · 12.8 / 16 = 0.22.
    let (count, mean, p50, p90) = histogram(metrics, "ttft");
    assert_eq!(count, 32.0);
    assert_close(mean, 0.1);
    assert_close(p50.unwrap(), 0.08);
    assert_close(p90.unwrap(), 0.22);
    // 0.10's name for the inter-token histogram.
    assert_eq!(
        metric(metrics, "itl").name,
        "vllm:time_per_output_token_seconds"
    );
    let (count, mean, ..) = histogram(metrics, "itl");
    assert_eq!(count, 1968.0);
    assert_close(mean, 0.01);
    let (count, mean, ..) = histogram(metrics, "e2e");
    assert_eq!((count, mean), (32.0, 2.0));
    assert!(find(metrics, "tpot").is_none());
}

#[test]
fn sglang_hit_rate_comes_from_cached_over_prompt_tokens_and_a_counter_born_mid_run_counts_from_zero()
 {
    let summary = summary_of(&["sglang_0.prom", "sglang_1.prom"]);
    assert_eq!(summary.targets[0].engine.as_deref(), Some("SGLang"));
    let metrics = &summary.overall.aggregate;
    assert_eq!(gauge(metrics, "running"), (8.0, 16.0));
    assert_eq!(gauge(metrics, "waiting"), (2.0, 4.0));
    assert_eq!(metric(metrics, "kv_cache_usage").name, "sglang:token_usage");
    assert_close(gauge(metrics, "kv_cache_usage").0, 0.315);
    assert_eq!(increase(metrics, "prompt_tokens"), 8000.0);
    // sglang:cached_tokens_total appears on the second page only: all 6000 are new.
    assert_eq!(increase(metrics, "prompt_tokens_cached"), 6000.0);
    assert_eq!(percent(metrics, "prefix_cache_hit_rate"), 75.0);
    assert_eq!(increase(metrics, "generation_tokens"), 3000.0);
    assert_eq!(increase(metrics, "requests_finished"), 16.0);
    assert_eq!(increase(metrics, "preemptions"), 2.0);
    let (count, mean, ..) = histogram(metrics, "ttft");
    assert_eq!(count, 16.0);
    assert_close(mean, 0.5);
    let (count, mean, ..) = histogram(metrics, "e2e");
    assert_eq!((count, mean), (16.0, 3.0));
    let (count, mean, ..) = histogram(metrics, "queue_time");
    assert_eq!(count, 16.0);
    assert_close(mean, 0.1);
    // Its own hit-rate gauge is a different figure (recent prefills), kept raw.
    assert!(raw_names(metrics).contains(&"sglang:cache_hit_rate"));
}

#[test]
fn tgi_token_counts_come_from_its_length_histograms_and_what_it_lacks_is_null() {
    let summary = summary_of(&["tgi_0.prom", "tgi_1.prom"]);
    assert_eq!(summary.targets[0].engine.as_deref(), Some("TGI"));
    let metrics = &summary.overall.aggregate;
    assert_eq!(gauge(metrics, "running"), (6.0, 12.0));
    assert_eq!(gauge(metrics, "waiting"), (1.5, 3.0));
    // Counters without `_total`, as its Rust exporter writes them; the failure counter is born on page 1.
    assert_eq!(increase(metrics, "requests_finished"), 20.0);
    assert_eq!(increase(metrics, "requests_failed"), 1.0);
    let (count, mean, ..) = histogram(metrics, "e2e");
    assert_eq!(count, 20.0);
    assert_close(mean, 2.5);
    let (_, mean, ..) = histogram(metrics, "queue_time");
    assert_close(mean, 0.1);
    let (_, mean, ..) = histogram(metrics, "tpot");
    assert_close(mean, 0.025);
    // 20 requests of 500 prompt and 200 generated tokens, from the histograms' sums.
    assert_eq!(increase(metrics, "prompt_tokens"), 10000.0);
    assert_eq!(
        metric(metrics, "prompt_tokens").name,
        "tgi_request_input_length_sum"
    );
    assert_eq!(increase(metrics, "generation_tokens"), 4000.0);
    for key in ["prefix_cache_hit_rate", "ttft", "kv_cache_usage"] {
        assert!(find(metrics, key).is_none(), "{key}");
    }
    let file = inference_perf_prometheus_metrics(&summary.overall);
    let successes = &file["successes"];
    assert_eq!(successes["prefix_cache_hit_percent"], json!({"mean": null}));
    assert_eq!(successes["time_to_first_token"]["p90"], Value::Null);
    assert_eq!(successes["count"], 20.0);
    assert_eq!(successes["prompt_len"]["rate"], 10000.0);
}

#[test]
fn trtllm_serve_maps_and_its_hit_rate_comes_from_cached_prompt_tokens() {
    let summary = summary_of(&["trtllm_0.prom", "trtllm_1.prom"]);
    assert_eq!(summary.targets[0].engine.as_deref(), Some("TensorRT-LLM"));
    let metrics = &summary.overall.aggregate;
    assert_eq!(gauge(metrics, "running"), (3.0, 6.0));
    assert_eq!(gauge(metrics, "kv_cache_usage"), (0.25, 0.5));
    assert_eq!(increase(metrics, "requests_finished"), 12.0);
    // 1500 of 6000 prompt tokens from the KV cache.
    assert_eq!(percent(metrics, "prefix_cache_hit_rate"), 25.0);
    for (key, expected) in [
        ("ttft", 0.1),
        ("tpot", 0.02),
        ("e2e", 0.5),
        ("queue_time", 0.01),
    ] {
        let (count, mean, ..) = histogram(metrics, key);
        assert_eq!(count, 12.0, "{key}");
        assert_close(mean, expected);
    }
}

#[test]
fn triton_takes_its_tensorrt_llm_backends_figures_and_milliseconds_become_seconds() {
    let summary = summary_of(&["triton_trtllm_0.prom", "triton_trtllm_1.prom"]);
    assert_eq!(
        summary.targets[0].engine.as_deref(),
        Some("TensorRT-LLM + Triton")
    );
    let metrics = &summary.overall.aggregate;
    // One gauge family, told apart by request_type.
    assert_eq!(
        metric(metrics, "running").name,
        "nv_trt_llm_request_metrics{request_type=\"active\"}"
    );
    assert_eq!(gauge(metrics, "running"), (2.5, 5.0));
    // The batcher's queue, not Triton's pending count (0 on both pages), which stays raw.
    assert_eq!(gauge(metrics, "waiting"), (1.5, 3.0));
    let raw = raw_names(metrics);
    for name in [
        "nv_inference_pending_request_count",
        "nv_trt_llm_request_metrics{request_type=\"max\"}",
        "nv_inference_request_success",
    ] {
        assert!(raw.contains(&name), "{name} not in {raw:?}");
    }
    assert_eq!(gauge(metrics, "kv_cache_usage"), (0.125, 0.25));
    // 10 first responses in (100, 200] ms, 1500 ms in all: seconds, p50 = 0.1 + 0.1 · 5 / 10.
    let first = metric(metrics, "first_response");
    assert_eq!(first.unit.as_deref(), Some("s"));
    let (count, mean, p50, p90) = histogram(metrics, "first_response");
    assert_eq!(count, 10.0);
    assert_close(mean, 0.15);
    assert_close(p50.unwrap(), 0.15);
    assert_close(p90.unwrap(), 0.19);
    assert_eq!(increase(metrics, "prompt_tokens"), 3000.0);
    assert_eq!(increase(metrics, "generation_tokens"), 1000.0);
    assert!(find(metrics, "ttft").is_none());
}

#[test]
fn epp_counts_requests_once_though_it_exposes_old_and_new_names() {
    let summary = summary_of(&["epp_0.prom", "epp_1.prom"]);
    assert_eq!(summary.targets[0].engine.as_deref(), Some("llm-d EPP"));
    let metrics = &summary.overall.aggregate;
    assert_eq!(increase(metrics, "epp_requests"), 30.0);
    assert_eq!(
        metric(metrics, "epp_requests").name,
        "llm_d_epp_request_total"
    );
    let (count, mean, ..) = histogram(metrics, "epp_request_duration");
    assert_eq!(count, 30.0);
    assert_close(mean, 1.2);
    assert_close(gauge(metrics, "pool_kv_cache_usage").0, 0.3);
    assert_eq!(gauge(metrics, "pool_ready_pods"), (2.0, 2.0));
    assert!(raw_names(metrics).contains(&"inference_objective_request_total"));
}

#[test]
fn a_server_with_no_known_names_is_kept_raw_and_the_summary_says_so() {
    let summary = summary_of(&["unknown_0.prom", "unknown_1.prom"]);
    assert_eq!(summary.targets[0].engine, None);
    assert_eq!(
        summary.warnings,
        [format!(
            "no known engine metrics at {TARGET}: 4 families kept raw"
        )]
    );
    let metrics = &summary.overall.aggregate;
    assert_eq!(metrics.len(), 4);
    assert!(metrics.iter().all(|m| m.key.is_none()));
    match &metric(metrics, "http_requests_total").figures {
        Figures::Counter { increase, .. } => assert_eq!(*increase, 30.0),
        other => panic!("{other:?}"),
    }
}

#[test]
fn targets_of_different_engines_aggregate_by_key() {
    let scrapes = vec![
        scrape_of("http://vllm:8000/metrics", 0.0, "vllm_0.prom"),
        scrape_of("http://llama:8080/metrics", 0.01, "llamacpp_idle.prom"),
        scrape_of("http://vllm:8000/metrics", 1.0, "vllm_1.prom"),
        scrape_of("http://llama:8080/metrics", 1.01, "llamacpp_after.prom"),
    ];
    let summary = summarize(
        scrapes,
        Duration::from_secs(1),
        Window {
            start_s: 0.0,
            end_s: 1.0,
        },
        &[],
        None,
    );
    let engines: Vec<Option<&str>> = summary
        .targets
        .iter()
        .map(|t| t.engine.as_deref())
        .collect();
    assert_eq!(engines, [Some("vLLM"), Some("llama.cpp")]);
    let aggregate = &summary.overall.aggregate;
    // vLLM's own counter plus llama.cpp's computed + cached.
    assert_eq!(increase(aggregate, "prompt_tokens"), 4000.0 + 4820.0);
    assert_eq!(
        metric(aggregate, "prompt_tokens").name,
        "vllm:prompt_tokens_total, llamacpp:prompt_tokens_total + llamacpp:prompt_tokens_cached_total"
    );
    assert_eq!(increase(aggregate, "generation_tokens"), 2000.0 + 4000.0);
    // Each target's own formula: 2000 of 4000 queried tokens hit, 2890 of 4820 prompt tokens cached.
    assert_close(
        percent(aggregate, "prefix_cache_hit_rate"),
        (2000.0 + 2890.0) / (4000.0 + 4820.0) * 100.0,
    );
    // Running: 0 + 0, then 8 + 0 (llama.cpp idle after its burst).
    assert_eq!(gauge(aggregate, "running"), (4.0, 8.0));
}

// ---- Through the binary ----

/// One completion stage against the embedded simulator, with inference-perf's Prometheus summary asked for.
const PROFILE: &str = "\
load:
  type: constant
  stages:
    - {rate: 5, duration: 2}
api:
  type: completion
  streaming: true
server:
  type: vllm
  model_name: llmbench-sim
  base_url: REPLACE_ENV_LLMDBENCH_HARNESS_STACK_ENDPOINT_URL
  ignore_eos: true
data:
  type: random
  input_distribution: {min: 20, max: 40, mean: 30, std: 5}
  output_distribution: {min: 5, max: 15, mean: 10, std: 3}
report:
  prometheus:
    summary: true
";

/// A bare HTTP/1.1 server answering its n-th request with `pages[n]`, and with the last page once they run out.
fn replay(pages: Vec<String>) -> u16 {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for (n, stream) in listener.incoming().enumerate() {
            let Ok(mut stream) = stream else { continue };
            let mut request = [0u8; 4096];
            let _ = stream.read(&mut request);
            let page = &pages[n.min(pages.len() - 1)];
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: {}\r\nconnection: \
                 close\r\n\r\n{page}",
                page.len()
            );
        }
    });
    port
}

#[test]
fn a_run_names_the_engine_and_says_what_it_does_not_report() {
    let out = tempfile::tempdir().expect("tempdir");
    let profile = write(out.path(), "one.yaml", PROFILE);
    let port = replay(vec![
        fixture("llamacpp_idle.prom"),
        fixture("llamacpp_busy.prom"),
        fixture("llamacpp_after.prom"),
    ]);
    let url = format!("http://127.0.0.1:{port}/metrics");
    let output = run_profile(
        out.path(),
        "inference-perf",
        &profile,
        "llama",
        &["--metrics-endpoint", &url],
    );
    succeeded(&output);
    let printed = stdout(&output);
    assert!(
        printed.contains(&format!("of {url} (llama.cpp), 0 failed")),
        "{printed}"
    );
    assert!(
        printed.contains("not reported by llama.cpp: KV cache %, TTFT\n"),
        "{printed}"
    );
    let dir = out.path().join("llama");
    let summary = json(&dir.join("summary.json"));
    let server = &summary["server_metrics"];
    assert_eq!(server["targets"][0]["engine"], "llama.cpp");
    let hit_rate = server["overall"]["aggregate"]
        .as_array()
        .expect("aggregate")
        .iter()
        .find(|m| m["key"] == "prefix_cache_hit_rate")
        .expect("a hit rate from llama.cpp's cached tokens")["percent"]
        .as_f64()
        .expect("percent");
    // inference-perf's file carries the same rate, and null where llama.cpp reports nothing.
    let file = json(&dir.join("summary_prometheus_metrics.json"));
    let successes = &file["successes"];
    let written = successes["prefix_cache_hit_percent"]["mean"]
        .as_f64()
        .expect("a number");
    assert!((written - hit_rate).abs() < 1e-6, "{written} vs {hit_rate}");
    assert_eq!(successes["kv_cache_usage_percentage"]["mean"], Value::Null);
    assert_eq!(successes["time_to_first_token"]["mean"], Value::Null);
}

#[test]
fn a_run_against_a_server_of_no_known_engine_says_its_families_were_kept_raw() {
    let out = tempfile::tempdir().expect("tempdir");
    let profile = write(out.path(), "one.yaml", PROFILE);
    let port = replay(vec![fixture("unknown_0.prom"), fixture("unknown_1.prom")]);
    let url = format!("http://127.0.0.1:{port}/metrics");
    let output = run_profile(
        out.path(),
        "inference-perf",
        &profile,
        "gateway",
        &["--metrics-endpoint", &url],
    );
    succeeded(&output);
    let printed = stdout(&output);
    let note = format!("server metrics: no known engine metrics at {url}: 4 families kept raw\n");
    assert!(printed.contains(&note), "{printed}");
    assert!(!printed.contains("not reported by"), "{printed}");
    let summary = json(&out.path().join("gateway/summary.json"));
    assert_eq!(summary["server_metrics"]["targets"][0].get("engine"), None);
}

// ---- Against the real llama-server ----

#[test]
fn a_run_against_llama_server_maps_its_metrics_and_counts_every_prompt_token() {
    let Some(server) = LlamaServer::start(&["-c", "4096", "-np", "4", "--metrics"]) else {
        return;
    };
    let endpoint = server.url.clone();
    let out = tempfile::tempdir().expect("tempdir");
    let output = llmbench()
        .args([
            "run",
            "--harness",
            "inference-perf",
            "--profile",
            "sanity_random",
        ])
        .args(["--endpoint", &endpoint, "--model", &server.model])
        .arg("--tokenizer")
        .arg(&server.tokenizer)
        .args(["--run-id", "real", "--output"])
        .arg(out.path())
        .output()
        .expect("runs");
    succeeded(&output);
    let printed = stdout(&output);
    assert!(printed.contains("(llama.cpp)"), "{printed}");
    let dir = out.path().join("real");
    let summary = json(&dir.join("summary.json"));
    let server = &summary["server_metrics"];
    assert_eq!(server["targets"][0]["engine"], "llama.cpp");
    let aggregate = server["overall"]["aggregate"]
        .as_array()
        .expect("aggregate");
    let increase_of = |key: &str| {
        aggregate
            .iter()
            .find(|m| m["key"] == key)
            .and_then(|m| m["increase"].as_f64())
            .unwrap_or_else(|| panic!("no `{key}` in {aggregate:#?}"))
    };
    // The server's counters against its own usage in every response.
    let (mut prompt, mut cached, mut completion) = (0.0, 0.0, 0.0);
    for line in common::requests_jsonl(&dir.join("requests.jsonl"))
        .expect("records")
        .lines()
    {
        let record: Value = serde_json::from_str(line).expect("a record");
        let usage = &record["usage"];
        prompt += usage["prompt_tokens"].as_f64().unwrap_or(0.0);
        completion += usage["completion_tokens"].as_f64().unwrap_or(0.0);
        cached += usage["cached_tokens"].as_f64().unwrap_or(0.0);
    }
    assert_eq!(increase_of("prompt_tokens"), prompt);
    assert_eq!(increase_of("prompt_tokens_cached"), cached);
    assert_eq!(increase_of("generation_tokens"), completion);
    assert!(
        aggregate
            .iter()
            .any(|m| m["key"] == "prefix_cache_hit_rate"),
        "{aggregate:#?}"
    );
}
