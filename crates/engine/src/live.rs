//! Live metrics: the launcher's own `/metrics` while a run goes (`llmbench run --metrics-listen ADDR`), so a
//! Prometheus (the chart's launcher PodMonitor) can watch a long run before its reports exist. Off unless asked
//! for, so local runs and parallel tests never compete for a port.
//!
//! What is served (OpenMetrics text), and where each figure comes from:
//! - `llmbench_run_info{run_id, harness}` = 1.
//! - `llmbench_requests_issued_total`, `llmbench_requests_finished_total`, `llmbench_requests_in_flight` (issued −
//!   finished) and `llmbench_stage_index` (the stage under way, from 0): read from the engine's [`Progress`]
//!   counters when scraped, so nothing is updated for them at all; `llmbench_requests_planned` (warm-ups included)
//!   when the plan says how many requests it sends (the operator's Progress column is finished over planned).
//! - `llmbench_requests_failed_total{class}`: one series per [`ErrorClass`] (a fixed set of eight, all present
//!   from the start), counted from the records.
//! - `llmbench_output_tokens_total` and the histograms `llmbench_ttft_seconds`, `llmbench_itl_seconds`,
//!   `llmbench_e2e_seconds` and `llmbench_schedule_delay_seconds`: from the records, through the record helpers
//!   that summary.json uses (TTFT to the first content chunk and E2E from the send, as inference-perf defines them;
//!   ITL per content chunk, as summary.json pools it; schedule delay = sent − scheduled). Latencies and tokens are
//!   of successful requests, as in every report; schedule delay is of every request that went on the wire.
//!
//! Warm-up requests (vllm `--num-warmups`, and a capacity search's probes, which the engine flags the same way)
//! are on the wire, so they count in issued / finished / in flight / failed like any request (as the progress
//! line counts them); they are left out of the histograms and the token counter, as they are left out of every
//! report.
//!
//! The records reach this module on the record writer's blocking thread ([`ObserveRecords`]), after they are
//! written: the I/O tasks do nothing more than without live metrics. The failure counts, token counter and
//! histograms therefore lag the progress counters by one writer batch (a few milliseconds).
//!
//! The server lives from just before the first request until the run's records are summarised; an address that
//! cannot be bound is a warning and the run goes on without it ([`LiveServer::start_or_warn`]).

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use tokio::sync::oneshot;

use crate::engine::{ObserveRecords, Progress};
use llmbench_model::record::{ErrorClass, RequestRecord};

/// TTFT bounds in seconds: 10 ms (a warm cache on a small model) to 2 min (a long prompt queued behind others).
const TTFT_BUCKETS: [f64; 18] = [
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.5, 5.0, 10.0, 20.0, 60.0,
    120.0,
];
/// Inter-token gaps in seconds: 1 ms (speculative decoding, batched chunks) to 5 s (a preempted sequence).
const ITL_BUCKETS: [f64; 16] = [
    0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05, 0.075, 0.1, 0.2, 0.5, 1.0, 2.5,
    5.0,
];
/// Whole requests in seconds: 100 ms (a few tokens) to 30 min (a long generation under heavy load).
const E2E_BUCKETS: [f64; 18] = [
    0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 7.5, 10.0, 15.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0,
    1200.0, 1800.0,
];
/// How late sends were, in seconds: 100 µs (on time, within timer slack) to 10 s (a client far behind its
/// schedule, or a concurrency cap holding requests back).
const SCHEDULE_DELAY_BUCKETS: [f64; 15] = [
    0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// Every failure class, so each series exists (at 0) from the first scrape and `rate()` sees its first failure.
const CLASSES: [ErrorClass; 9] = ErrorClass::ALL;

/// Fails to compile when a class is added, as a reminder to list it in [`CLASSES`].
const fn listed(class: ErrorClass) -> ErrorClass {
    match class {
        ErrorClass::HttpStatus
        | ErrorClass::Timeout
        | ErrorClass::ConnectionReset
        | ErrorClass::Connect
        | ErrorClass::StreamCut
        | ErrorClass::MalformedEvent
        | ErrorClass::Cancelled
        | ErrorClass::ClientCancelled
        | ErrorClass::Other => class,
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FailureLabels {
    class: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RunInfoLabels {
    run_id: String,
    harness: String,
}

/// The figures taken from finished records: shared handles, so the copy the writer thread updates and the one
/// the registry encodes are the same series.
#[derive(Clone, Debug)]
pub(crate) struct RecordMetrics {
    ttft: Histogram,
    itl: Histogram,
    e2e: Histogram,
    schedule_delay: Histogram,
    failed: Family<FailureLabels, Counter>,
    output_tokens: Counter,
}

fn seconds(ns: u64) -> f64 {
    ns as f64 / 1e9
}

impl RecordMetrics {
    fn new() -> Self {
        let failed = Family::<FailureLabels, Counter>::default();
        for class in CLASSES {
            // Creating the series is the point; the guard is not needed.
            drop(failed.get_or_create(&FailureLabels {
                class: listed(class).as_str(),
            }));
        }
        RecordMetrics {
            ttft: Histogram::new(TTFT_BUCKETS),
            itl: Histogram::new(ITL_BUCKETS),
            e2e: Histogram::new(E2E_BUCKETS),
            schedule_delay: Histogram::new(SCHEDULE_DELAY_BUCKETS),
            failed,
            output_tokens: Counter::default(),
        }
    }

    /// Counts one finished record (see the module doc for which figures a record feeds).
    pub(crate) fn observe_record(&self, record: &RequestRecord) {
        if let Some(class) = record.error_class() {
            self.failed
                .get_or_create(&FailureLabels {
                    class: class.as_str(),
                })
                .inc();
        }
        if record.warmup {
            return;
        }
        if record.was_sent() {
            self.schedule_delay
                .observe(seconds(record.schedule_delay_ns()));
        }
        if !record.succeeded() {
            return;
        }
        self.e2e.observe(seconds(record.e2e_ns()));
        if let Some(ttft) = record.ttft_ns() {
            self.ttft.observe(seconds(ttft));
        }
        for gap in record.itl_gaps_ns() {
            self.itl.observe(seconds(gap));
        }
        self.output_tokens.inc_by(u64::from(record.output_tokens()));
    }
}

impl ObserveRecords for RecordMetrics {
    fn observe(&mut self, batch: &[RequestRecord]) {
        for record in batch {
            self.observe_record(record);
        }
    }
}

/// Reads the engine's progress counters when scraped: they are kept anyway, so serving them costs the run nothing.
#[derive(Debug)]
struct ProgressCollector(Arc<Progress>);

impl Collector for ProgressCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let progress = &self.0;
        // Finished first: a request that finishes between the two loads then never shows as finished before it
        // shows as issued.
        let finished = progress.finished.load(Ordering::Relaxed);
        let issued = progress.issued.load(Ordering::Relaxed);
        let stage = progress.stage.load(Ordering::Relaxed);
        let counters = [
            (
                "requests_issued",
                "Requests sent (warm-ups included)",
                issued,
            ),
            (
                "requests_finished",
                "Requests finished, successful or not (warm-ups included)",
                finished,
            ),
        ];
        for (name, help, value) in counters {
            let counter = ConstCounter::new(value);
            counter.encode(encoder.encode_descriptor(
                name,
                help,
                None,
                counter.metric_type(),
            )?)?;
        }
        let gauges = [
            (
                "requests_in_flight",
                "Requests sent and not yet finished",
                // A conversation turn cancelled before it was sent finishes without being issued: never below 0.
                issued.saturating_sub(finished),
            ),
            ("stage_index", "The load stage under way, from 0", stage),
        ];
        let planned = progress.planned.load(Ordering::Relaxed);
        for (name, help, value) in gauges {
            let gauge = ConstGauge::new(i64::try_from(value).unwrap_or(i64::MAX));
            gauge.encode(encoder.encode_descriptor(name, help, None, gauge.metric_type())?)?;
        }
        // Only when the plan says: a run bounded by time has no count to be a share of.
        if planned > 0 {
            let gauge = ConstGauge::new(i64::try_from(planned).unwrap_or(i64::MAX));
            gauge.encode(encoder.encode_descriptor(
                "requests_planned",
                "Requests this launcher plans to send, warm-ups included",
                None,
                gauge.metric_type(),
            )?)?;
        }
        Ok(())
    }
}

/// A run's live metrics: the registry `/metrics` encodes, and the record observer that feeds it.
#[derive(Debug)]
pub(crate) struct LiveMetrics {
    registry: Registry,
    records: RecordMetrics,
}

impl LiveMetrics {
    /// The metrics of run `run_id` of `harness`, reading `progress` when scraped.
    pub fn new(run_id: &str, harness: &str, progress: Arc<Progress>) -> Self {
        let mut root = Registry::default();
        let registry = root.sub_registry_with_prefix("llmbench");
        let info = Family::<RunInfoLabels, Gauge>::default();
        info.get_or_create(&RunInfoLabels {
            run_id: run_id.to_owned(),
            harness: harness.to_owned(),
        })
        .set(1);
        registry.register("run_info", "The run this launcher carries out", info);
        registry.register_collector(Box::new(ProgressCollector(progress)));
        let records = RecordMetrics::new();
        registry.register(
            "requests_failed",
            "Requests that failed, by failure class (warm-ups included)",
            records.failed.clone(),
        );
        registry.register(
            "output_tokens",
            "Output tokens of successful requests (warm-ups excluded)",
            records.output_tokens.clone(),
        );
        registry.register(
            "ttft_seconds",
            "Time to first token: first content chunk − send, of successful streamed requests",
            records.ttft.clone(),
        );
        registry.register(
            "itl_seconds",
            "Inter-token latency: gaps between consecutive content chunks of successful streamed requests",
            records.itl.clone(),
        );
        registry.register(
            "e2e_seconds",
            "End-to-end latency: end − send, of successful requests",
            records.e2e.clone(),
        );
        registry.register(
            "schedule_delay_seconds",
            "How late each request was sent: sent − scheduled",
            records.schedule_delay.clone(),
        );
        LiveMetrics {
            registry: root,
            records,
        }
    }

    /// The observer to hand the record writer ([`crate::engine::record_writer_observed`]).
    #[cfg(test)]
    fn observer(&self) -> Box<dyn ObserveRecords> {
        Box::new(self.records.clone())
    }

    /// The metrics as OpenMetrics text.
    pub fn encode(&self) -> Result<String, fmt::Error> {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry)?;
        Ok(text)
    }
}

/// Why the live metrics server could not start.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error("--metrics-listen: cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// The `/metrics` server of a run. Dropping it stops it: it stops accepting, and closes each connection once its
/// request in progress is answered.
#[derive(Debug)]
pub struct LiveServer {
    addr: SocketAddr,
    observer: RecordMetrics,
    _serving: Serving,
}

impl LiveServer {
    /// Serves the live metrics of run `run_id` on `addr` (port 0 picks a free port), reading `progress` when
    /// scraped, and logs the address it serves on.
    pub async fn start(
        addr: SocketAddr,
        run_id: &str,
        harness: &str,
        progress: Arc<Progress>,
    ) -> Result<LiveServer, LiveError> {
        let metrics = LiveMetrics::new(run_id, harness, progress);
        let observer = metrics.records.clone();
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| LiveError::Bind { addr, source })?;
        let bound = listener.local_addr().unwrap_or(addr);
        let router = Router::new()
            .route("/metrics", get(metrics_handler))
            .with_state(Arc::new(metrics));
        let serving = serve_until_dropped(listener, router, "the live metrics server");
        // The address in the message itself, so a test (or a user) finds it in plain or JSON logs alike.
        tracing::info!("live metrics: http://{bound}/metrics");
        Ok(LiveServer {
            addr: bound,
            observer,
            _serving: serving,
        })
    }

    /// [`LiveServer::start`], or `None` with a warning when `addr` cannot be bound: live metrics are a view of the
    /// run, not part of it, and a launcher sharing its host's network (a test kubelet, `hostNetwork` pods, shards
    /// side by side) must not fail its benchmark over a port.
    pub async fn start_or_warn(
        addr: SocketAddr,
        run_id: &str,
        harness: &str,
        progress: Arc<Progress>,
    ) -> Option<LiveServer> {
        match LiveServer::start(addr, run_id, harness, progress).await {
            Ok(server) => Some(server),
            Err(e) => {
                tracing::warn!(error = %e, "the run goes on without live metrics");
                None
            }
        }
    }

    /// The address the server listens on (the actual port when asked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The observer to hand the record writer ([`crate::engine::record_writer_observed`]).
    pub fn observer(&self) -> Box<dyn ObserveRecords> {
        Box::new(self.observer.clone())
    }
}

/// A server that runs until this is dropped: it then stops accepting, and closes each connection once its request in
/// progress is answered.
#[derive(Debug)]
pub struct Serving(Option<oneshot::Sender<()>>);

impl Drop for Serving {
    fn drop(&mut self) {
        if let Some(shutdown) = self.0.take() {
            // The server may already have stopped on an error (logged); nothing is left to stop then.
            let _ = shutdown.send(());
        }
    }
}

/// Serves `router` on `listener` in the background until the returned guard is dropped; `what` names the server in
/// the warning should it stop on an error.
pub fn serve_until_dropped(
    listener: tokio::net::TcpListener,
    router: Router,
    what: &'static str,
) -> Serving {
    let addr = listener.local_addr().ok();
    let (shutdown, stopped) = oneshot::channel::<()>();
    tokio::spawn(async move {
        let stopped = async {
            // A dropped sender stops the server as a sent signal does.
            let _ = stopped.await;
        };
        if let Err(e) = axum::serve(listener, router)
            .with_graceful_shutdown(stopped)
            .await
        {
            tracing::warn!(addr = ?addr, error = %e, "{what} stopped");
        }
    });
    Serving(Some(shutdown))
}

async fn metrics_handler(State(metrics): State<Arc<LiveMetrics>>) -> impl IntoResponse {
    match metrics.encode() {
        Ok(body) => (
            StatusCode::OK,
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            body,
        ),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            format!("cannot encode metrics: {e}"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use llmbench_model::record::RequestError;

    /// A streamed request scheduled at 0 and sent at 2 ms, with content chunks at 100, 130 and 150 ms (one token
    /// each) and its end at 160 ms: TTFT 98 ms, ITL gaps 30 and 20 ms, E2E 158 ms, schedule delay 2 ms.
    fn streamed() -> RequestRecord {
        let ms = 1_000_000;
        let mut record = RequestRecord::builder(0)
            .sent(2 * ms)
            .scheduled(0)
            .end(160 * ms)
            .input_tokens(10)
            .max_tokens(3)
            .ok();
        for at in [100, 130, 150] {
            record = record.content_at(at * ms, 1);
        }
        record.build()
    }

    fn failed(class: ErrorClass) -> RequestRecord {
        RequestRecord {
            error: Some(Box::new(RequestError {
                class,
                message: String::new(),
            })),
            http_status: None,
            ..streamed()
        }
    }

    fn metrics() -> LiveMetrics {
        LiveMetrics::new("bench-1", "inference-perf", Arc::new(Progress::default()))
    }

    /// The line of `text` that starts with `series ` (name and labels exactly), without it.
    fn value<'a>(text: &'a str, series: &str) -> &'a str {
        text.lines()
            .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
            .unwrap_or_else(|| panic!("no {series} in:\n{text}"))
    }

    #[test]
    fn a_successful_streamed_request_feeds_every_latency_histogram() {
        let live = metrics();
        live.observer().observe(&[streamed()]);
        let text = live.encode().expect("encodes");
        // TTFT 100 − 2 = 98 ms: above the 0.075 bound, within 0.1.
        assert_eq!(value(&text, "llmbench_ttft_seconds_count"), "1");
        assert_eq!(value(&text, "llmbench_ttft_seconds_sum"), "0.098");
        assert_eq!(
            value(&text, r#"llmbench_ttft_seconds_bucket{le="0.075"}"#),
            "0"
        );
        assert_eq!(
            value(&text, r#"llmbench_ttft_seconds_bucket{le="0.1"}"#),
            "1"
        );
        // Gaps 130 − 100 = 30 ms and 150 − 130 = 20 ms: both within 0.03, one within 0.02.
        assert_eq!(value(&text, "llmbench_itl_seconds_count"), "2");
        assert_eq!(
            value(&text, r#"llmbench_itl_seconds_bucket{le="0.02"}"#),
            "1"
        );
        assert_eq!(
            value(&text, r#"llmbench_itl_seconds_bucket{le="0.03"}"#),
            "2"
        );
        // E2E 160 − 2 = 158 ms.
        assert_eq!(value(&text, "llmbench_e2e_seconds_sum"), "0.158");
        assert_eq!(
            value(&text, r#"llmbench_e2e_seconds_bucket{le="0.1"}"#),
            "0"
        );
        assert_eq!(
            value(&text, r#"llmbench_e2e_seconds_bucket{le="0.25"}"#),
            "1"
        );
        // Sent 2 ms after its scheduled time.
        assert_eq!(value(&text, "llmbench_schedule_delay_seconds_sum"), "0.002");
        assert_eq!(
            value(
                &text,
                r#"llmbench_schedule_delay_seconds_bucket{le="0.001"}"#
            ),
            "0"
        );
        assert_eq!(
            value(
                &text,
                r#"llmbench_schedule_delay_seconds_bucket{le="0.0025"}"#
            ),
            "1"
        );
        // Three one-token content chunks.
        assert_eq!(value(&text, "llmbench_output_tokens_total"), "3");
        assert_eq!(
            value(&text, r#"llmbench_requests_failed_total{class="timeout"}"#),
            "0"
        );
    }

    #[test]
    fn a_failure_counts_under_its_class_and_only_in_the_schedule_delay() {
        let live = metrics();
        let mut not_found = failed(ErrorClass::HttpStatus);
        not_found.error = None;
        not_found.http_status = Some(404);
        live.observer().observe(&[
            failed(ErrorClass::Timeout),
            failed(ErrorClass::Timeout),
            not_found,
        ]);
        let text = live.encode().expect("encodes");
        assert_eq!(
            value(&text, r#"llmbench_requests_failed_total{class="timeout"}"#),
            "2"
        );
        // A non-2xx answer without an error is an http_status failure, as the summary counts it.
        assert_eq!(
            value(
                &text,
                r#"llmbench_requests_failed_total{class="http_status"}"#
            ),
            "1"
        );
        assert_eq!(
            value(
                &text,
                r#"llmbench_requests_failed_total{class="cancelled"}"#
            ),
            "0"
        );
        assert_eq!(value(&text, "llmbench_schedule_delay_seconds_count"), "3");
        assert_eq!(value(&text, "llmbench_ttft_seconds_count"), "0");
        assert_eq!(value(&text, "llmbench_e2e_seconds_count"), "0");
        assert_eq!(value(&text, "llmbench_output_tokens_total"), "0");
    }

    #[test]
    fn warm_ups_count_as_failures_but_stay_out_of_the_histograms() {
        let live = metrics();
        let mut warm = streamed();
        warm.warmup = true;
        let mut cut = failed(ErrorClass::StreamCut);
        cut.warmup = true;
        live.observer().observe(&[warm, cut]);
        let text = live.encode().expect("encodes");
        assert_eq!(
            value(
                &text,
                r#"llmbench_requests_failed_total{class="stream_cut"}"#
            ),
            "1"
        );
        for series in [
            "llmbench_ttft_seconds_count",
            "llmbench_e2e_seconds_count",
            "llmbench_schedule_delay_seconds_count",
            "llmbench_output_tokens_total",
        ] {
            assert_eq!(value(&text, series), "0", "{series}");
        }
    }

    #[test]
    fn a_conversation_turn_never_sent_has_no_schedule_delay() {
        let live = metrics();
        // Cancelled because an earlier turn failed: sent == end, no answer.
        let mut unsent = failed(ErrorClass::Cancelled);
        unsent.chunks.clear();
        unsent.end_ns = unsent.sent_ns;
        live.observer().observe(&[unsent]);
        let text = live.encode().expect("encodes");
        assert_eq!(
            value(
                &text,
                r#"llmbench_requests_failed_total{class="cancelled"}"#
            ),
            "1"
        );
        assert_eq!(value(&text, "llmbench_schedule_delay_seconds_count"), "0");
    }

    #[test]
    fn progress_counters_are_read_when_scraped() {
        let progress = Arc::new(Progress::default());
        let live = LiveMetrics::new("bench-1", "guidellm", Arc::clone(&progress));
        progress.issued.store(12, Ordering::Relaxed);
        progress.finished.store(9, Ordering::Relaxed);
        progress.stage.store(2, Ordering::Relaxed);
        let text = live.encode().expect("encodes");
        assert_eq!(value(&text, "llmbench_requests_issued_total"), "12");
        assert_eq!(value(&text, "llmbench_requests_finished_total"), "9");
        // 12 − 9.
        assert_eq!(value(&text, "llmbench_requests_in_flight"), "3");
        assert_eq!(value(&text, "llmbench_stage_index"), "2");
        assert_eq!(
            value(
                &text,
                r#"llmbench_run_info{run_id="bench-1",harness="guidellm"}"#
            ),
            "1"
        );
        // An unsent conversation turn finishes without being issued: in flight never goes negative.
        progress.finished.store(13, Ordering::Relaxed);
        let text = live.encode().expect("encodes");
        assert_eq!(value(&text, "llmbench_requests_in_flight"), "0");
    }

    #[test]
    fn the_planned_count_is_served_only_when_the_plan_says() {
        let progress = Arc::new(Progress::default());
        let live = LiveMetrics::new("bench-1", "aiperf", Arc::clone(&progress));
        // Bounded by time: no count to be a share of.
        let text = live.encode().expect("encodes");
        assert!(!text.contains("llmbench_requests_planned"), "{text}");
        progress.planned.store(500, Ordering::Relaxed);
        let text = live.encode().expect("encodes");
        assert_eq!(value(&text, "llmbench_requests_planned"), "500");
    }

    #[test]
    fn every_failure_class_is_served_from_the_start() {
        let text = metrics().encode().expect("encodes");
        for class in CLASSES {
            let series = format!(
                "llmbench_requests_failed_total{{class=\"{}\"}}",
                class.as_str()
            );
            assert_eq!(value(&text, &series), "0");
        }
    }

    #[tokio::test]
    async fn the_server_serves_until_dropped() {
        let progress = Arc::new(Progress::default());
        progress.issued.store(4, Ordering::Relaxed);
        let server = LiveServer::start(
            "127.0.0.1:0".parse().expect("addr"),
            "bench-1",
            "nop",
            progress,
        )
        .await
        .expect("binds");
        let addr = server.local_addr();
        assert_ne!(addr.port(), 0);
        let body = get(addr).await.expect("serves");
        assert_eq!(value(&body, "llmbench_requests_issued_total"), "4");
        drop(server);
        // Stopping is asynchronous: the listener closes once the server task sees the signal.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while get(addr).await.is_ok() {
            assert!(std::time::Instant::now() < deadline, "still serving");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    #[tokio::test]
    async fn a_port_in_use_is_an_error_naming_the_address() {
        let taken = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binds");
        let addr = taken.local_addr().expect("addr");
        let error = LiveServer::start(addr, "bench-1", "nop", Arc::new(Progress::default()))
            .await
            .expect_err("the port is taken");
        assert!(error.to_string().contains(&addr.to_string()), "{error}");
    }

    /// `GET /metrics` over a fresh connection; the body.
    async fn get(addr: SocketAddr) -> std::io::Result<String> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(addr).await?;
        stream
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
            .await?;
        let mut response = String::new();
        stream.read_to_string(&mut response).await?;
        match response.split_once("\r\n\r\n") {
            Some((head, body)) if head.starts_with("HTTP/1.1 200") => Ok(body.to_owned()),
            _ => Err(std::io::Error::other(response)),
        }
    }
}
