//! The engine against the embedded simulator over real loopback HTTP: timings match the injected latency, counts
//! match the plan, and faults are classified without stopping the run or losing a record.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use llmbench_engine::engine::http1::Http1Endpoint;
use llmbench_engine::engine::{
    self, Clock, Control, ErrorLimits, PreparedRequest, Progress, Requests, RunPlan, Stage,
    StagePlan, StopReason, Target, Transport,
};
use llmbench_model::record::{ErrorClass, RequestRecord};
use llmbench_sim::sim::{self, FailureKind, SimConfig};
use llmbench_workload::workload::{ErrorLimit, StopScope};

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
        ignore_eos: false,
        header: None,
        inputs: None,
        adapter: None,
        images: None,
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
            api: llmbench_workload::workload::ApiKind::Completion,
            keep_text: false,
            request_ids: llmbench_engine::engine::RequestIds::NONE,
            spread: Vec::new(),
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
    let path =
        std::env::temp_dir().join(format!("llmbench-engine-{name}-{}.bin", std::process::id()));
    let file = std::fs::File::create(&path).expect("temp file");
    let progress = Arc::new(Progress::default());
    let (sink, writer) = engine::record_writer(
        Box::new(file),
        path.display().to_string(),
        progress,
        Control::default(),
    );
    engine::run(target, plan, Clock::start(), sink, Control::default())
        .await
        .expect("run completes");
    let records = writer
        .await
        .expect("writer joins")
        .expect("records written");
    let (in_file, torn) = llmbench_model::record_file::RunRecords {
        path: path.clone(),
        format: llmbench_model::record_file::RecordsFormat::Binary,
    }
    .read_all()
    .expect("the records file reads back");
    assert_eq!(torn, 0);
    assert_eq!(
        in_file, records,
        "the records file holds every request as it ended"
    );
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
            errors: Default::default(),
        }],
        interval: Duration::ZERO,
        requests: Requests::Fixed(Arc::from(vec![completion_body(32)])),
        warmup: None,
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
            // The simulator paces token k at admitted + 50 + 10·k ms, so a first token that came late is followed
            // by tokens that catch up: the 31 gaps span at least 360 − TTFT ms, not 31 × 10.
            let tpot_floor = (360.0 - ttft_ms) / 31.0 - 0.01;
            assert!(
                tpot_ms >= tpot_floor && tpot_ms < 25.0,
                "tpot {tpot_ms} ms, floor {tpot_floor} (ttft {ttft_ms})"
            );
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
            errors: Default::default(),
        }],
        interval: Duration::ZERO,
        requests: Requests::Fixed(Arc::from(vec![completion_body(8), completion_body(4)])),
        warmup: None,
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
            errors: Default::default(),
        }],
        interval: Duration::ZERO,
        requests: Requests::Fixed(Arc::from(vec![completion_body(16)])),
        warmup: None,
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

/// A stage of `n` requests, one every `gap_ms`.
fn open_stage(n: u64, gap_ms: u64, errors: ErrorLimits) -> Stage {
    Stage {
        plan: StagePlan::Open {
            send_at: (0..n).map(|i| Duration::from_millis(i * gap_ms)).collect(),
            max_concurrency: None,
        },
        requested_rate: Some(1000.0 / gap_ms as f64),
        errors,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stage_that_reaches_max_errors_stops_and_the_next_stage_runs() {
    // Every request fails (500): with max_errors 5 the first stage ends after its 5th error, its requests still
    // in flight cancelled and recorded; the second stage (scope: this stage only) runs whole.
    let sim = sim::start(SimConfig {
        port: 0,
        ttft: Duration::from_millis(30),
        failure_rate: 1.0,
        failure_kinds: vec![FailureKind::Http500],
        ..SimConfig::default()
    })
    .await
    .expect("sim starts");
    let max_errors = ErrorLimits {
        max_errors: Some(ErrorLimit {
            limit: 5,
            scope: StopScope::Stage,
        }),
        ..ErrorLimits::default()
    };
    let plan = RunPlan {
        stages: vec![
            open_stage(100, 5, max_errors),
            open_stage(3, 5, ErrorLimits::default()),
        ],
        interval: Duration::ZERO,
        requests: Requests::Fixed(Arc::from(vec![completion_body(4)])),
        warmup: None,
    };
    let [(_, target), _] = targets(&sim.base_url(), Duration::from_secs(10));
    let path = std::env::temp_dir().join(format!("llmbench-limits-{}.jsonl", std::process::id()));
    let progress = Arc::new(Progress::default());
    let (sink, writer) = engine::record_writer(
        Box::new(std::fs::File::create(&path).expect("file")),
        path.display().to_string(),
        Arc::clone(&progress),
        Control::default(),
    );
    let times = engine::run(target, plan, Clock::start(), sink, Control::default())
        .await
        .expect("runs");
    let records = writer.await.expect("joins").expect("written");
    let _ = std::fs::remove_file(&path);
    assert_eq!(times.len(), 2);
    assert_eq!(times[0].stopped, Some(StopReason::MaxErrors));
    assert_eq!(times[1].stopped, None);
    let first: Vec<&RequestRecord> = records.iter().filter(|r| r.stage == 0).collect();
    let errored = first
        .iter()
        .filter(|r| r.error_class() == Some(ErrorClass::HttpStatus))
        .count();
    assert!(errored >= 5, "{errored}");
    assert!(
        first.len() < 100,
        "the stage stopped issuing: {}",
        first.len()
    );
    assert_eq!(
        first.len() as u64,
        progress.issued.load(std::sync::atomic::Ordering::Relaxed) - 3,
        "every request the stage sent is recorded, cancelled ones included"
    );
    assert_eq!(records.iter().filter(|r| r.stage == 1).count(), 3);
    sim.shutdown().await.expect("sim stops");
}

/// A writer that fails like a full disk once it has taken `room` bytes.
struct FullDisk {
    room: usize,
}

impl std::io::Write for FullDisk {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.room == 0 {
            return Err(std::io::Error::from(std::io::ErrorKind::StorageFull));
        }
        let n = buf.len().min(self.room);
        self.room -= n;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_records_cannot_be_written_stops_issuing() {
    let sim = sim::start(SimConfig {
        port: 0,
        ..SimConfig::default()
    })
    .await
    .expect("sim starts");
    let plan = RunPlan {
        stages: vec![open_stage(200, 10, ErrorLimits::default())],
        interval: Duration::ZERO,
        requests: Requests::Fixed(Arc::from(vec![completion_body(2)])),
        warmup: None,
    };
    let [(_, target), _] = targets(&sim.base_url(), Duration::from_secs(10));
    let progress = Arc::new(Progress::default());
    let control = Control::default();
    let (sink, writer) = engine::record_writer(
        Box::new(FullDisk { room: 100 }),
        "requests.jsonl".to_owned(),
        Arc::clone(&progress),
        control.clone(),
    );
    let started = std::time::Instant::now();
    engine::run(target, plan, Clock::start(), sink, control.clone())
        .await
        .expect("runs");
    let error = writer.await.expect("joins").expect_err("the disk is full");
    assert!(error.to_string().contains("stopped issuing"), "{error}");
    assert_eq!(control.reason(), Some(StopReason::RecordsUnwritable));
    let issued = progress.issued.load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        issued < 50,
        "it stopped issuing soon after the first failed write: {issued}"
    );
    assert!(started.elapsed() < Duration::from_secs(1));
    sim.shutdown().await.expect("sim stops");
}
