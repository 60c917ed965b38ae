//! The engine against the embedded simulator over real loopback HTTP: timings match the injected latency, counts
//! match the plan, and faults are classified without stopping the run or losing a record.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use llmbench::engine::http1::Http1Endpoint;
use llmbench::engine::{
    self, Clock, PreparedRequest, Progress, RunPlan, Stage, StagePlan, Target, Transport,
};
use llmbench::record::{ErrorClass, RequestRecord};
use llmbench::sim::{self, FailureKind, SimConfig};

fn completion_body(max_tokens: u32) -> PreparedRequest {
    let body = serde_json::json!({
        "model": "llmbench-sim",
        "prompt": "one two three four five six seven eight",
        "max_tokens": max_tokens,
        "ignore_eos": true,
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    PreparedRequest {
        body: Bytes::from(body.to_string()),
        input_tokens: 8,
        max_tokens: Some(max_tokens),
    }
}

/// The same target through each transport the engine has: its own HTTP/1.1 client, and reqwest (TLS, proxies).
fn targets(base_url: &str, timeout: Duration) -> [(&'static str, Arc<Target>); 2] {
    let url = format!("{base_url}/v1/completions");
    let target = |transport| {
        Arc::new(Target {
            transport,
            url: url.clone(),
            api_key: None,
            headers: Vec::new(),
            request_timeout: Some(timeout),
            streaming: true,
            keep_text: false,
        })
    };
    let http1 = Http1Endpoint::new(&url, &[], 64).expect("plain http endpoint");
    [
        ("http1", target(Transport::Http1(http1))),
        (
            "reqwest",
            target(Transport::Reqwest(reqwest::Client::new())),
        ),
    ]
}

async fn run(name: &str, target: Arc<Target>, plan: RunPlan) -> Vec<RequestRecord> {
    let path = std::env::temp_dir().join(format!(
        "llmbench-engine-{name}-{}.jsonl",
        std::process::id()
    ));
    let file = std::fs::File::create(&path).expect("temp file");
    let progress = Arc::new(Progress::default());
    let (sink, writer) =
        engine::record_writer(Box::new(file), path.display().to_string(), progress);
    engine::run(target, plan, Clock::start(), sink)
        .await
        .expect("run completes");
    let records = writer
        .await
        .expect("writer joins")
        .expect("records written");
    let lines = std::fs::read_to_string(&path)
        .expect("jsonl readable")
        .lines()
        .count();
    assert_eq!(lines, records.len(), "requests.jsonl holds every request");
    let _ = std::fs::remove_file(&path);
    records
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn injected_ttft_and_itl_are_what_the_records_show() {
    let sim = sim::start(SimConfig {
        port: 0,
        ttft: Duration::from_millis(50),
        itl: Duration::from_millis(10),
        ..SimConfig::default()
    })
    .await
    .expect("sim starts");
    let plan = RunPlan {
        stages: vec![Stage {
            plan: StagePlan::Open {
                send_at: (0..20).map(|i| Duration::from_millis(i * 50)).collect(),
                max_concurrency: None,
            },
            requested_rate: Some(20.0),
        }],
        interval: Duration::ZERO,
        requests: Arc::from(vec![completion_body(32)]),
    };
    for (transport, target) in targets(&sim.base_url(), Duration::from_secs(10)) {
        let records = run(&format!("timing-{transport}"), target, plan.clone()).await;
        assert_eq!(records.len(), 20, "{transport}");
        for r in &records {
            assert!(r.succeeded(), "{r:?}");
            assert_eq!(
                r.output_tokens(),
                32,
                "usage reports exactly max_tokens under ignore_eos"
            );
            let ttft_ms = r.ttft_ns().expect("streamed") as f64 / 1e6;
            let tpot_ms = r.tpot_ns().expect("32 tokens") as f64 / 1e6;
            let e2e_ms = r.e2e_ns() as f64 / 1e6;
            assert!((50.0..150.0).contains(&ttft_ms), "ttft {ttft_ms} ms");
            assert!((9.0..25.0).contains(&tpot_ms), "tpot {tpot_ms} ms");
            assert!(
                (360.0..600.0).contains(&e2e_ms),
                "e2e {e2e_ms} ms (50 + 31 x 10 = 360)"
            );
            assert!(r.schedule_delay_ns() < 50_000_000, "sent close to schedule");
        }
    }
    sim.shutdown().await.expect("sim stops");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_loop_keeps_n_in_flight_and_issues_exactly_the_total() {
    let sim = sim::start(SimConfig {
        port: 0,
        itl: Duration::from_millis(1),
        ..SimConfig::default()
    })
    .await
    .expect("sim starts");
    let plan = RunPlan {
        stages: vec![Stage {
            plan: StagePlan::Closed {
                concurrency: 4,
                total: Some(37),
                duration: None,
                rampup: Duration::ZERO,
            },
            requested_rate: None,
        }],
        interval: Duration::ZERO,
        requests: Arc::from(vec![completion_body(8), completion_body(4)]),
    };
    for (transport, target) in targets(&sim.base_url(), Duration::from_secs(10)) {
        let records = run(&format!("closed-{transport}"), target, plan.clone()).await;
        assert_eq!(records.len(), 37, "{transport}");
        let mut ids: Vec<u64> = records.iter().map(|r| r.id).collect();
        ids.sort_unstable();
        assert_eq!(ids, (0..37).collect::<Vec<_>>());
        assert!(records.iter().all(|r| r.succeeded()));
        let tokens: u32 = records.iter().map(RequestRecord::output_tokens).sum();
        assert_eq!(
            tokens,
            19 * 8 + 18 * 4,
            "bodies are used in order and cycled"
        );
    }
    sim.shutdown().await.expect("sim stops");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_are_classified_and_never_stop_the_run() {
    let sim = sim::start(SimConfig {
        port: 0,
        itl: Duration::from_millis(2),
        failure_rate: 0.5,
        failure_kinds: FailureKind::ALL.to_vec(),
        seed: Some(7),
        ..SimConfig::default()
    })
    .await
    .expect("sim starts");
    let plan = RunPlan {
        stages: vec![Stage {
            plan: StagePlan::Open {
                send_at: (0..100).map(|i| Duration::from_millis(i * 5)).collect(),
                max_concurrency: None,
            },
            requested_rate: Some(200.0),
        }],
        interval: Duration::ZERO,
        requests: Arc::from(vec![completion_body(16)]),
    };
    for (transport, target) in targets(&sim.base_url(), Duration::from_millis(800)) {
        let records = run(&format!("faults-{transport}"), target, plan.clone()).await;
        assert_eq!(records.len(), 100, "every request is recorded");
        let mut classes: BTreeMap<String, usize> = BTreeMap::new();
        for r in &records {
            let key = match r.error_class() {
                None => "ok".to_owned(),
                Some(ErrorClass::HttpStatus) => {
                    format!("http_{}", r.http_status.unwrap_or_default())
                }
                Some(class) => class.to_string(),
            };
            *classes.entry(key).or_default() += 1;
        }
        for expected in [
            "ok",
            "http_429",
            "http_500",
            "timeout",
            "stream_cut",
            "malformed_event",
        ] {
            assert!(
                classes.contains_key(expected),
                "{transport}: {expected} missing from {classes:?}"
            );
        }
    }
    sim.shutdown().await.expect("sim stops");
}
