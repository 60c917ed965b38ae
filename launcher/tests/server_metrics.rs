//! Server metrics against real servers: our own `llmbench sim` started in-process, a port nobody listens on, and
//! llm-d-inference-sim (when `tests/tools/build-tools.sh` has built it; skipped with a note otherwise). Each test
//! scrapes while it sends load, then reads `server_metrics.jsonl` back and summarizes it as a run would.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use llmbench_metrics::server_metrics::summary::find;
use llmbench_metrics::server_metrics::{
    Figures, MetricSummary, StageWindow, Window, inference_perf_prometheus_metrics,
    llmd_observability, plot_series_file, read_jsonl, spawn, summarize_file,
};
use llmbench_sim::sim::{SimConfig, start};
use serde_json::json;

const INTERVAL: Duration = Duration::from_millis(100);

fn since(t0: Instant) -> f64 {
    t0.elapsed().as_secs_f64()
}

fn gauge_max(metrics: &[MetricSummary], key: &str) -> f64 {
    match find(metrics, key).map(|m| &m.figures) {
        Some(Figures::Gauge { max, .. }) => *max,
        other => panic!("{key}: {other:?}"),
    }
}

fn increase(metrics: &[MetricSummary], key: &str) -> f64 {
    match find(metrics, key).map(|m| &m.figures) {
        Some(Figures::Counter { increase, .. }) => *increase,
        other => panic!("{key}: {other:?}"),
    }
}

fn histogram_count(metrics: &[MetricSummary], key: &str) -> f64 {
    match find(metrics, key).map(|m| &m.figures) {
        Some(Figures::Histogram { count, .. }) => *count,
        other => panic!("{key}: {other:?}"),
    }
}

/// Streams one completion to its end.
async fn stream_completion(
    client: &reqwest::Client,
    base: &str,
    prompt_words: usize,
    max_tokens: u32,
) {
    let prompt = vec!["word"; prompt_words].join(" ");
    let response = client
        .post(format!("{base}/v1/completions"))
        .json(&json!({"prompt": prompt, "max_tokens": max_tokens, "ignore_eos": true, "stream": true}))
        .send()
        .await
        .expect("request sent");
    assert_eq!(response.status(), 200);
    let mut body = response.bytes_stream();
    while let Some(chunk) = body.next().await {
        chunk.expect("stream chunk");
    }
}

#[tokio::test]
async fn scraping_llmbench_sim_under_load_summarizes_per_stage() {
    let sim = start(SimConfig {
        port: 0,
        seed: Some(3),
        // Slow tokens keep the seats full for about 1.5 s, so a scraper that a loaded machine delays by a few
        // hundred ms still sees them full (scrapes are 100 ms apart).
        ttft: Duration::from_millis(20),
        itl: Duration::from_millis(40),
        max_num_seqs: 4,
        max_model_len: 1000,
        ..SimConfig::default()
    })
    .await
    .expect("simulator starts");
    let base = sim.base_url();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("server_metrics.jsonl");
    let t0 = Instant::now();
    let scraper = spawn(vec![format!("{base}/metrics")], INTERVAL, t0, out.clone()).unwrap();

    // Stage 0: 8 streams at once on 4 seats, 50 prompt and 20 output tokens each: two waves of about 780 ms.
    tokio::time::sleep(Duration::from_millis(150)).await;
    let stage0_start = since(t0);
    let client = reqwest::Client::new();
    futures_util::future::join_all((0..8).map(|_| stream_completion(&client, &base, 50, 20))).await;
    let stage0_end = since(t0);
    // Stage 1: idle, starting after a scrape has seen the end of stage 0.
    tokio::time::sleep(Duration::from_millis(250)).await;
    let stage1_start = since(t0);
    tokio::time::sleep(Duration::from_millis(400)).await;
    let stage1_end = since(t0);
    let outcome = scraper.stop().await;
    sim.shutdown().await.unwrap();

    let status = &outcome.targets[0];
    assert_eq!(status.failed, 0, "{status:?}");
    assert_eq!(status.warnings, Vec::<String>::new());
    assert!(status.scrapes >= 10, "{status:?}");

    let stages = [
        StageWindow {
            stage: 0,
            start_s: stage0_start,
            end_s: stage0_end,
            began_s: None,
        },
        StageWindow {
            stage: 1,
            start_s: stage1_start,
            end_s: stage1_end,
            began_s: None,
        },
    ];
    let run = Window {
        start_s: 0.0,
        end_s: stage1_end,
    };
    let summary = summarize_file(&out, INTERVAL, run, &stages, Some(&outcome)).unwrap();
    assert_eq!(summary.warnings, Vec::<String>::new());

    let busy = &summary.stages[0].aggregate;
    assert_eq!(increase(busy, "prompt_tokens"), 8.0 * 50.0);
    assert_eq!(increase(busy, "generation_tokens"), 8.0 * 20.0);
    assert_eq!(increase(busy, "requests_finished"), 8.0);
    assert_eq!(increase(busy, "prefix_cache_queries"), 8.0 * 50.0);
    assert_eq!(histogram_count(busy, "e2e"), 8.0);
    assert_eq!(histogram_count(busy, "ttft"), 8.0);
    // Four seats were full for the whole stage, and four requests waited through the first wave.
    assert_eq!(gauge_max(busy, "running"), 4.0);
    assert!(gauge_max(busy, "waiting") >= 1.0);
    // Four requests of 50 prompt tokens plus some output, over 4 × 1000 tokens of KV capacity: at least 5 %.
    let kv = gauge_max(busy, "kv_cache_usage");
    assert!((0.05..=0.2).contains(&kv), "{kv}");
    // The 8 prompts are the same 50 words: the first admitted finds nothing, each other one its first 3 blocks of
    // 16 (the cap of 49 tokens allows 3): 7 × 48 hits of 400 queried tokens.
    assert_eq!(increase(busy, "prefix_cache_hits"), 7.0 * 48.0);
    assert_eq!(
        find(busy, "prefix_cache_hit_rate").map(|m| &m.figures),
        Some(&Figures::Ratio { percent: 84.0 })
    );

    let idle = &summary.stages[1].aggregate;
    assert_eq!(increase(idle, "prompt_tokens"), 0.0);
    assert_eq!(gauge_max(idle, "running"), 0.0);
    assert_eq!(gauge_max(idle, "kv_cache_usage"), 0.0);
    assert_eq!(
        increase(&summary.overall.aggregate, "requests_finished"),
        8.0
    );

    let inference_perf = inference_perf_prometheus_metrics(&summary.stages[0]);
    assert_eq!(inference_perf["successes"]["count"], 8.0);
    assert_eq!(
        inference_perf["successes"]["time_to_first_token"]["mean"]
            .as_f64()
            .map(|v| v >= 0.02),
        Some(true)
    );

    let series = plot_series_file(&out).unwrap();
    let running = series
        .iter()
        .find(|s| s.metric == "vllm:num_requests_running")
        .unwrap();
    assert!(running.points.iter().any(|p| p.1 == 4.0));
    assert!(series.iter().any(|s| s.metric == "generation tokens/s"));
    let observability = llmd_observability(&summary.stages[0], &series, 1_795_000_000_000_000_000);
    assert_eq!(
        observability["components"][0]["aggregate"]["running_requests"]["max"],
        4.0
    );
    assert!(
        observability["components"][0]["time_series"]["kv_cache_usage"]["series"]
            .as_array()
            .is_some_and(|points| !points.is_empty())
    );
}

#[tokio::test]
async fn an_unreachable_endpoint_yields_warnings_and_no_error() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("server_metrics.jsonl");
    let t0 = Instant::now();
    let scraper = spawn(
        vec![format!("http://127.0.0.1:{port}/metrics")],
        INTERVAL,
        t0,
        out.clone(),
    )
    .unwrap();
    tokio::time::sleep(Duration::from_millis(250)).await;
    let outcome = scraper.stop().await;
    let status = &outcome.targets[0];
    assert_eq!(status.scrapes, 0);
    assert!(status.failed >= 2);
    assert_eq!(status.warnings.len(), 1, "{status:?}");
    let summary = summarize_file(
        &out,
        INTERVAL,
        Window {
            start_s: 0.0,
            end_s: since(t0),
        },
        &[],
        Some(&outcome),
    )
    .unwrap();
    assert!(summary.overall.aggregate.is_empty());
    assert_eq!(summary.targets[0].failed, status.failed);
}

/// Where `tests/tools/build-tools.sh` puts llm-d-inference-sim: `LLMBENCH_TOOLS_DIR/<tool>`, else
/// `<cache>/llm-d-inference-sim-<version>/bin/` under `LLMBENCH_TOOLS_CACHE` or `~/.cache/llmbench-tools`.
fn inference_sim_binary() -> Option<PathBuf> {
    let var = |name| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(dir) = var("LLMBENCH_TOOLS_DIR") {
        let path = Path::new(&dir).join("llm-d-inference-sim");
        return path.is_file().then_some(path);
    }
    let cache = match var("LLMBENCH_TOOLS_CACHE") {
        Some(cache) => PathBuf::from(cache),
        None => Path::new(&var("HOME")?).join(".cache/llmbench-tools"),
    };
    let versions = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/tools/versions.env");
    let version = std::fs::read_to_string(versions)
        .ok()?
        .lines()
        .find_map(|line| {
            line.strip_prefix("INFERENCE_SIM_VERSION=")
                .map(str::to_owned)
        })?;
    let path = cache
        .join(format!("llm-d-inference-sim-{version}"))
        .join("bin/llm-d-inference-sim");
    path.is_file().then_some(path)
}

#[tokio::test]
async fn scraping_llm_d_inference_sim_reads_its_0_0_4_text() {
    let Some(binary) = inference_sim_binary() else {
        eprintln!("skipping: llm-d-inference-sim is not built (run tests/tools/build-tools.sh)");
        return;
    };
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = tokio::process::Command::new(&binary)
        .args([
            "--model",
            "m",
            "--force-dummy-tokenizer",
            "--port",
            &port.to_string(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("llm-d-inference-sim starts");
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let ready = client.get(format!("{base}/v1/models")).send().await;
        if ready.is_ok_and(|r| r.status() == 200) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "llm-d-inference-sim did not answer on {base}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let metrics_url = format!("{base}/metrics");
    assert!(llmbench_metrics::server_metrics::probe(&metrics_url).await);

    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("server_metrics.jsonl");
    let t0 = Instant::now();
    let scraper = spawn(vec![metrics_url.clone()], INTERVAL, t0, out.clone()).unwrap();
    tokio::time::sleep(Duration::from_millis(150)).await;
    for _ in 0..5 {
        let response = client
            .post(format!("{base}/v1/completions"))
            .json(&json!({"model": "m", "prompt": "hello there world", "max_tokens": 5}))
            .send()
            .await
            .expect("request sent");
        assert_eq!(response.status(), 200);
        response.bytes().await.expect("body");
    }
    tokio::time::sleep(Duration::from_millis(250)).await;
    let outcome = scraper.stop().await;
    let _ = child.kill().await;

    let status = &outcome.targets[0];
    assert_eq!(status.failed, 0, "{status:?}");
    assert_eq!(status.warnings, Vec::<String>::new());
    // Counters typed the 0.0.4 way (`# TYPE vllm:prompt_tokens_total counter`) resolve like OpenMetrics ones.
    let last = read_jsonl(&out).unwrap().last().unwrap().unwrap();
    assert_eq!(
        last.types.get("vllm:prompt_tokens_total"),
        Some(&llmbench_metrics::server_metrics::MetricKind::Counter),
        "{:?}",
        last.types
    );
    let summary = summarize_file(
        &out,
        INTERVAL,
        Window {
            start_s: 0.0,
            end_s: since(t0),
        },
        &[],
        Some(&outcome),
    )
    .unwrap();
    let aggregate = &summary.overall.aggregate;
    assert_eq!(histogram_count(aggregate, "e2e"), 5.0);
    // The dummy tokenizer counts "hello there world" as 3 tokens.
    assert_eq!(increase(aggregate, "prompt_tokens"), 15.0);
    assert!(find(aggregate, "running").is_some());
    assert!(find(aggregate, "kv_cache_usage").is_some());
    let inference_perf = inference_perf_prometheus_metrics(&summary.overall);
    assert_eq!(
        inference_perf["successes"]["request_latency"]["mean"]
            .as_f64()
            .map(|v| v >= 0.0),
        Some(true)
    );
}
