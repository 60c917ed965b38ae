//! The scraper: a task on the current tokio runtime that fetches every target's Prometheus page once per interval
//! (all targets of a tick concurrently), appends one line per target per scrape to `server_metrics.jsonl`, and on
//! [`Scraper::stop`] takes one final scrape and reports what happened to each target.
//!
//! A scrape is bounded in time (min(interval, 5 s)), in bytes ([`MAX_PAGE_BYTES`], read incrementally and cut
//! there) and in series ([`MAX_SERIES`]); memory holds one page per target. A target that never answers, answers with
//! an error status, or serves something that is not Prometheus text gives failed scrapes and warnings, never an error.

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write as _};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;

use super::ServerMetricsError;
use super::jsonl::{ScrapeLine, Truncated, round_to};
use super::parse::{MAX_PAGE_BYTES, MAX_SERIES, Page, PageParser};

/// The shortest scrape interval accepted: below it a scrape of a large page could not finish before the next.
pub(crate) const MIN_INTERVAL: Duration = Duration::from_millis(100);
/// The longest a single scrape may take, whatever the interval.
pub(crate) const MAX_SCRAPE_TIMEOUT: Duration = Duration::from_secs(5);
/// Distinct warnings kept per target; further distinct ones are only counted.
pub(crate) const MAX_WARNINGS: usize = 20;
/// How long [`probe`] waits for an answer.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// Plain 0.0.4 text first (no `_created` lines, smaller pages), OpenMetrics text accepted.
const ACCEPT: &str =
    "text/plain;version=0.0.4;q=1.0,application/openmetrics-text;version=1.0.0;q=0.5,*/*;q=0.1";

/// What happened to one target over the run. `scrapes` counts successful scrapes, `failed` the others.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetStatus {
    pub url: String,
    pub scrapes: u64,
    pub failed: u64,
    /// Scrapes whose page was cut by the byte cap or the series cap.
    pub truncated: u64,
    /// Series dropped beyond the cap, summed over scrapes.
    pub dropped_series: u64,
    /// Distinct warnings, at most [`MAX_WARNINGS`] (plus one line counting the rest).
    pub warnings: Vec<String>,
    /// The engine its metrics' names say it is (`vLLM`, `llama.cpp`, `vLLM + llm-d EPP` for a federated page), from
    /// the summary; absent when none of its names is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
}

/// What [`Scraper::stop`] returns.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ScrapeOutcome {
    pub interval_s: f64,
    pub targets: Vec<TargetStatus>,
    /// Problems not tied to one target (the file could not be written, …).
    pub warnings: Vec<String>,
}

/// Distinct warnings, capped.
#[derive(Debug, Default)]
struct Warnings {
    kept: Vec<String>,
    seen: HashSet<String>,
    omitted: u64,
}

impl Warnings {
    /// Records `message`; true the first time it is seen (so it is logged once, not every tick).
    fn add(&mut self, message: String) -> bool {
        if self.seen.contains(&message) {
            return false;
        }
        if self.kept.len() >= MAX_WARNINGS {
            // Remembered so the same message is counted once, but bounded all the same.
            if self.seen.len() < 10 * MAX_WARNINGS {
                self.seen.insert(message);
            }
            self.omitted += 1;
            return false;
        }
        self.seen.insert(message.clone());
        self.kept.push(message);
        true
    }

    fn into_vec(self) -> Vec<String> {
        let mut kept = self.kept;
        if self.omitted > 0 {
            kept.push(format!(
                "… and {} more distinct warning(s) not kept",
                self.omitted
            ));
        }
        kept
    }
}

#[derive(Debug)]
struct Target {
    url: String,
    status: TargetStatus,
    warnings: Warnings,
}

impl Target {
    fn warn(&mut self, message: String) {
        if self.warnings.add(message.clone()) {
            tracing::warn!(target_url = %self.url, "server metrics: {message}");
        } else {
            tracing::debug!(target_url = %self.url, "server metrics: {message}");
        }
    }
}

/// A scraper running in the background; [`Scraper::stop`] ends it. Dropping it ends it too (after a final scrape),
/// without waiting for the outcome.
#[derive(Debug)]
pub struct Scraper {
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<ScrapeOutcome>,
    interval: Duration,
    urls: Vec<String>,
}

/// Starts scraping `targets` (full URLs including the path, e.g. `http://10.0.0.5:8000/metrics`) every `interval`
/// from now, appending to `out`. `t0` is the run's origin: every line's `t_s` is measured from it.
pub fn spawn(
    targets: Vec<String>,
    interval: Duration,
    t0: Instant,
    out: PathBuf,
) -> Result<Scraper, ServerMetricsError> {
    if interval < MIN_INTERVAL {
        return Err(ServerMetricsError::InvalidInterval {
            interval,
            reason: format!("must be at least {MIN_INTERVAL:?}"),
        });
    }
    let mut urls: Vec<String> = Vec::with_capacity(targets.len());
    for url in targets {
        validate_url(&url)?;
        if !urls.contains(&url) {
            urls.push(url);
        }
    }
    if urls.is_empty() {
        return Err(ServerMetricsError::InvalidTarget {
            url: String::new(),
            reason: "no targets to scrape".to_owned(),
        });
    }
    let runtime = tokio::runtime::Handle::try_current()
        .map_err(|source| ServerMetricsError::NoRuntime { source })?;
    let timeout = interval.min(MAX_SCRAPE_TIMEOUT);
    // reqwest's own limit sits a little later, so a slow page fails with our one stable message.
    let client = client(timeout + Duration::from_millis(500))?;
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&out)
        .map_err(|source| ServerMetricsError::CreateFile {
            path: out.clone(),
            source,
        })?;
    let (stop_tx, stop_rx) = oneshot::channel();
    let targets = urls
        .iter()
        .map(|url| Target {
            url: url.clone(),
            status: TargetStatus {
                url: url.clone(),
                ..TargetStatus::default()
            },
            warnings: Warnings::default(),
        })
        .collect();
    let task = runtime.spawn(
        ScrapeLoop {
            client,
            timeout,
            interval,
            t0,
            out,
            writer: BufWriter::with_capacity(1 << 20, file),
            write_failed: false,
            warnings: Warnings::default(),
            targets,
        }
        .run(stop_rx),
    );
    Ok(Scraper {
        stop: Some(stop_tx),
        task,
        interval,
        urls,
    })
}

impl Scraper {
    /// Takes one final scrape of every target, flushes the file, and reports per target.
    pub async fn stop(mut self) -> ScrapeOutcome {
        if let Some(stop) = self.stop.take() {
            // The task may already be gone (it only ends on this signal or a panic); its join says which.
            let _ = stop.send(());
        }
        match (&mut self.task).await {
            Ok(outcome) => outcome,
            Err(join) => ScrapeOutcome {
                interval_s: self.interval.as_secs_f64(),
                targets: self
                    .urls
                    .iter()
                    .map(|url| TargetStatus {
                        url: url.clone(),
                        ..TargetStatus::default()
                    })
                    .collect(),
                warnings: vec![format!("the server metrics scraper task failed: {join}")],
            },
        }
    }
}

/// Does `url` answer with Prometheus text? For deciding whether to scrape an endpoint's own `/metrics` by default.
pub async fn probe(url: &str) -> bool {
    if validate_url(url).is_err() {
        return false;
    }
    let Ok(client) = client(PROBE_TIMEOUT) else {
        return false;
    };
    match tokio::time::timeout(PROBE_TIMEOUT, fetch(&client, url)).await {
        Ok(Ok(fetched)) => !fetched.page.samples.is_empty(),
        _ => false,
    }
}

fn validate_url(url: &str) -> Result<(), ServerMetricsError> {
    let invalid = |reason: String| ServerMetricsError::InvalidTarget {
        url: url.to_owned(),
        reason,
    };
    let parsed = reqwest::Url::parse(url).map_err(|e| invalid(e.to_string()))?;
    match parsed.scheme() {
        "http" | "https" => Ok(()),
        other => Err(invalid(format!("scheme {other:?} is not http or https"))),
    }
}

fn client(timeout: Duration) -> Result<reqwest::Client, ServerMetricsError> {
    reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(timeout)
        .pool_max_idle_per_host(1)
        .user_agent(concat!("llmbench/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|source| ServerMetricsError::HttpClient { source })
}

/// A page fetched and parsed.
struct Fetched {
    /// When the response head arrived: the moment the server's page describes.
    arrived: Instant,
    page: Page,
    /// Bytes read when the byte cap cut the page.
    cut_at: Option<u64>,
}

/// The chain of an error's causes in one line ("error sending request: …: Connection refused").
fn describe(error: &(dyn std::error::Error + 'static)) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        source = cause.source();
    }
    message
}

async fn fetch(client: &reqwest::Client, url: &str) -> Result<Fetched, String> {
    let mut response = client
        .get(url)
        .header(reqwest::header::ACCEPT, ACCEPT)
        .send()
        .await
        .map_err(|e| describe(&e))?;
    let arrived = Instant::now();
    let status = response.status();
    if !status.is_success() {
        return Err(format!("HTTP {status}"));
    }
    let content_type = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    if ["text/html", "application/json", "application/xhtml"]
        .iter()
        .any(|kind| content_type.starts_with(kind))
    {
        return Err(format!("not Prometheus text (content-type {content_type})"));
    }
    let mut parser = PageParser::new(MAX_SERIES);
    let mut read = 0usize;
    let mut cut_at = None;
    while let Some(chunk) = response.chunk().await.map_err(|e| describe(&e))? {
        let room = MAX_PAGE_BYTES - read;
        if chunk.len() > room {
            parser.feed(&chunk[..room]);
            read += room;
            cut_at = Some(read as u64);
            // Dropping the response closes the connection: the rest of the page is never read.
            break;
        }
        parser.feed(&chunk);
        read += chunk.len();
    }
    let page = parser.finish(cut_at.is_some());
    if page.not_prometheus {
        return Err(page
            .warning()
            .unwrap_or_else(|| "not Prometheus text".to_owned()));
    }
    Ok(Fetched {
        arrived,
        page,
        cut_at,
    })
}

/// Seconds from `t0` to `at`, negative when `at` is earlier.
fn signed_secs(at: Instant, t0: Instant) -> f64 {
    match at.checked_duration_since(t0) {
        Some(after) => after.as_secs_f64(),
        None => -(t0 - at).as_secs_f64(),
    }
}

struct ScrapeLoop {
    client: reqwest::Client,
    timeout: Duration,
    interval: Duration,
    t0: Instant,
    out: PathBuf,
    writer: BufWriter<File>,
    write_failed: bool,
    warnings: Warnings,
    targets: Vec<Target>,
}

impl ScrapeLoop {
    async fn run(mut self, mut stop: oneshot::Receiver<()>) -> ScrapeOutcome {
        let mut ticker = tokio::time::interval(self.interval);
        // A slow scrape delays the next tick instead of causing a burst of catch-up scrapes.
        ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                biased;
                // A dropped Scraper counts as a stop.
                _ = &mut stop => break,
                _ = ticker.tick() => self.round().await,
            }
        }
        self.round().await;
        self.finish()
    }

    /// One scrape of every target, concurrently; then their lines, in target order, and a flush.
    async fn round(&mut self) {
        let attempts = futures_util::future::join_all(self.targets.iter().map(|target| {
            let client = &self.client;
            let url = target.url.as_str();
            let timeout = self.timeout;
            async move {
                let started = Instant::now();
                let result = tokio::time::timeout(timeout, fetch(client, url))
                    .await
                    .unwrap_or_else(|_elapsed| {
                        Err(format!("timed out after {} ms", timeout.as_millis()))
                    });
                (started, Instant::now(), result)
            }
        }))
        .await;
        for (i, (started, ended, result)) in attempts.into_iter().enumerate() {
            self.record(i, started, ended, result);
        }
        if let Err(e) = self.writer.flush() {
            self.write_error(&e);
        }
    }

    fn record(
        &mut self,
        i: usize,
        started: Instant,
        ended: Instant,
        result: Result<Fetched, String>,
    ) {
        let t0 = self.t0;
        let target = &mut self.targets[i];
        let line = match &result {
            Err(error) => {
                target.status.failed += 1;
                target.warn(error.clone());
                serde_json::to_vec(&ScrapeLine {
                    t_s: round_to(signed_secs(ended, t0), 6),
                    target: &target.url,
                    ok: false,
                    scrape_ms: None,
                    error: Some(error),
                    types: None,
                    samples: None,
                    truncated: None,
                })
            }
            Ok(fetched) => {
                target.status.scrapes += 1;
                let page = &fetched.page;
                let truncated =
                    (fetched.cut_at.is_some() || page.dropped_series > 0).then(|| Truncated {
                        bytes: fetched.cut_at.unwrap_or(0),
                        dropped_series: page.dropped_series,
                    });
                if let Some(bytes) = fetched.cut_at {
                    target.warn(format!("page truncated at {bytes} bytes"));
                }
                if page.dropped_series > 0 {
                    target.warn(format!(
                        "series beyond the cap of {MAX_SERIES} per scrape dropped"
                    ));
                }
                if truncated.is_some() {
                    target.status.truncated += 1;
                    target.status.dropped_series += page.dropped_series;
                }
                if let Some(warning) = page.warning() {
                    target.warn(warning);
                }
                serde_json::to_vec(&ScrapeLine {
                    t_s: round_to(signed_secs(fetched.arrived, t0), 6),
                    target: &target.url,
                    ok: true,
                    scrape_ms: Some(round_to(
                        ended.duration_since(started).as_secs_f64() * 1000.0,
                        3,
                    )),
                    error: None,
                    types: Some(&page.types),
                    samples: Some(&page.samples),
                    truncated,
                })
            }
        };
        match line {
            Ok(mut line) => {
                line.push(b'\n');
                if let Err(e) = self.writer.write_all(&line) {
                    self.write_error(&e);
                }
            }
            Err(e) => {
                let message = format!("a scrape could not be encoded as JSON: {e}");
                if self.warnings.add(message.clone()) {
                    tracing::warn!("server metrics: {message}");
                }
            }
        }
    }

    fn write_error(&mut self, error: &std::io::Error) {
        let message = format!("failed to write {}: {error}", self.out.display());
        if self.warnings.add(message.clone()) {
            tracing::warn!("server metrics: {message}");
        }
        self.write_failed = true;
    }

    fn finish(mut self) -> ScrapeOutcome {
        if let Err(e) = self.writer.flush() {
            self.write_error(&e);
        }
        if self.write_failed {
            tracing::warn!(
                path = %self.out.display(),
                "server metrics file is incomplete: writes failed during the run"
            );
        }
        ScrapeOutcome {
            interval_s: self.interval.as_secs_f64(),
            targets: self
                .targets
                .into_iter()
                .map(|target| TargetStatus {
                    warnings: target.warnings.into_vec(),
                    ..target.status
                })
                .collect(),
            warnings: self.warnings.into_vec(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use axum::Router;
    use axum::http::header::CONTENT_TYPE;
    use axum::routing::get;

    use super::*;
    use crate::server_metrics::read_jsonl;
    use llmbench_sim::sim::{SimConfig, start};

    /// Serves `app` on a loopback port; the URL of `path` on it.
    async fn serve(app: Router, path: &str) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        format!("http://{addr}{path}")
    }

    #[tokio::test]
    async fn scraping_the_simulator_writes_one_line_per_scrape_with_typed_vllm_families() {
        let sim = start(SimConfig {
            port: 0,
            seed: Some(1),
            ..SimConfig::default()
        })
        .await
        .unwrap();
        let url = format!("{}/metrics", sim.base_url());
        assert!(probe(&url).await);
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("server_metrics.jsonl");
        let t0 = Instant::now() + Duration::from_millis(50);
        let scraper = spawn(vec![url.clone()], MIN_INTERVAL, t0, out.clone()).unwrap();
        let client = reqwest::Client::new();
        for _ in 0..3 {
            let response = client
                .post(format!("{}/v1/completions", sim.base_url()))
                .json(
                    &serde_json::json!({"prompt": "a b c d", "max_tokens": 5, "ignore_eos": true}),
                )
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), 200);
        }
        tokio::time::sleep(Duration::from_millis(350)).await;
        let outcome = scraper.stop().await;
        assert_eq!(outcome.targets.len(), 1);
        let status = &outcome.targets[0];
        assert_eq!(status.failed, 0, "{status:?}");
        assert!(status.scrapes >= 3, "{status:?}");
        assert_eq!(status.warnings, Vec::<String>::new());
        let scrapes: Vec<_> = read_jsonl(&out).unwrap().map(Result::unwrap).collect();
        assert_eq!(scrapes.len() as u64, status.scrapes);
        // The first scrape is taken at once, before t0.
        assert!(scrapes[0].t_s < 0.0, "{}", scrapes[0].t_s);
        assert!(scrapes.windows(2).all(|w| w[0].t_s < w[1].t_s));
        let last = scrapes.last().unwrap();
        assert!(last.ok && last.scrape_ms.is_some());
        assert_eq!(
            last.types.get("vllm:time_to_first_token_seconds"),
            Some(&crate::server_metrics::MetricKind::Histogram)
        );
        assert_eq!(
            last.types.get("vllm:prompt_tokens"),
            Some(&crate::server_metrics::MetricKind::Counter)
        );
        let prompt = last
            .samples
            .iter()
            .find(|s| s.name == "vllm:prompt_tokens_total")
            .unwrap();
        assert_eq!(prompt.value, 12.0);
        sim.shutdown().await.unwrap();
    }

    #[tokio::test]
    async fn an_unreachable_target_is_failed_scrapes_and_a_warning_not_an_error() {
        // A port that was free a moment ago: nothing listens there.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url = format!("http://127.0.0.1:{port}/metrics");
        assert!(!probe(&url).await);
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("server_metrics.jsonl");
        let scraper = spawn(vec![url.clone()], MIN_INTERVAL, Instant::now(), out.clone()).unwrap();
        tokio::time::sleep(Duration::from_millis(150)).await;
        let outcome = scraper.stop().await;
        let status = &outcome.targets[0];
        assert_eq!(status.scrapes, 0);
        assert!(status.failed >= 2, "{status:?}");
        assert_eq!(status.warnings.len(), 1, "{status:?}");
        assert!(
            status.warnings[0].to_lowercase().contains("connect"),
            "{status:?}"
        );
        let lines: Vec<_> = read_jsonl(&out).unwrap().map(Result::unwrap).collect();
        assert_eq!(lines.len() as u64, status.failed);
        assert!(lines.iter().all(|l| !l.ok && l.error.is_some()));
    }

    #[tokio::test]
    async fn a_target_that_never_answers_times_out_each_scrape() {
        let app = Router::new().route(
            "/metrics",
            get(|| async {
                tokio::time::sleep(Duration::from_secs(30)).await;
                "late 1\n"
            }),
        );
        let url = serve(app, "/metrics").await;
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("server_metrics.jsonl");
        let started = Instant::now();
        let scraper = spawn(vec![url], MIN_INTERVAL, Instant::now(), out).unwrap();
        tokio::time::sleep(Duration::from_millis(250)).await;
        let outcome = scraper.stop().await;
        // Each scrape gives up after the interval, so stopping never waits for the server.
        assert!(started.elapsed() < Duration::from_secs(2));
        let status = &outcome.targets[0];
        assert_eq!(status.scrapes, 0);
        assert!(status.failed >= 2, "{status:?}");
        assert_eq!(status.warnings, ["timed out after 100 ms"]);
    }

    #[tokio::test]
    async fn html_and_error_statuses_fail_the_scrape_with_a_warning() {
        let app = Router::new()
            .route(
                "/html",
                get(|| async { ([(CONTENT_TYPE, "text/html")], "<html>metric 1</html>") }),
            )
            .route(
                "/plainhtml",
                get(|| async { ([(CONTENT_TYPE, "text/plain")], "<!doctype html><p>hi</p>") }),
            )
            .route(
                "/json",
                get(|| async { ([(CONTENT_TYPE, "text/plain")], "{\"a\": [1, 2]}") }),
            )
            .route(
                "/missing",
                get(|| async { (axum::http::StatusCode::NOT_FOUND, "no") }),
            );
        let base = serve(app, "").await;
        let client = client(Duration::from_secs(2)).unwrap();
        for (path, expected) in [
            ("/html", "not Prometheus text (content-type text/html)"),
            ("/plainhtml", "not Prometheus text (the body is markup)"),
            (
                "/json",
                "not Prometheus text (line 1: expected '=' after a label name)",
            ),
            ("/missing", "HTTP 404 Not Found"),
        ] {
            let err = fetch(&client, &format!("{base}{path}")).await.err();
            assert_eq!(err.as_deref(), Some(expected), "{path}");
            assert!(!probe(&format!("{base}{path}")).await);
        }
    }

    #[tokio::test]
    async fn a_ten_megabyte_page_is_read_only_to_the_cap_and_flagged() {
        let served = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&served);
        let app = Router::new().route(
            "/metrics",
            get(move || {
                let counter = Arc::clone(&counter);
                async move {
                    counter.fetch_add(1, Ordering::Relaxed);
                    // 10 MB of short series in 64 KiB chunks, streamed.
                    let line = "padding_metric_with_a_long_name{label=\"value\"} 1\n";
                    let chunk = line.repeat(64 * 1024 / line.len());
                    let chunks = (10 * 1024 * 1024) / chunk.len() + 1;
                    let stream = futures_util::stream::iter(
                        (0..chunks).map(move |_| Ok::<_, std::io::Error>(chunk.clone())),
                    );
                    axum::body::Body::from_stream(stream)
                }
            }),
        );
        let url = serve(app, "/metrics").await;
        let fetched = fetch(&client(Duration::from_secs(5)).unwrap(), &url)
            .await
            .unwrap();
        assert_eq!(fetched.cut_at, Some(MAX_PAGE_BYTES as u64));
        assert_eq!(fetched.page.samples.len(), MAX_SERIES);
        // 4 MiB of 50-byte lines is about 84,000 lines: the rest beyond 20,000 are counted, not kept.
        assert!(
            fetched.page.dropped_series > 60_000,
            "{}",
            fetched.page.dropped_series
        );

        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("server_metrics.jsonl");
        let scraper = spawn(
            vec![url],
            Duration::from_secs(60),
            Instant::now(),
            out.clone(),
        )
        .unwrap();
        let outcome = scraper.stop().await;
        let status = &outcome.targets[0];
        assert_eq!(status.truncated, status.scrapes);
        assert!(
            status
                .warnings
                .contains(&format!("page truncated at {MAX_PAGE_BYTES} bytes")),
            "{status:?}"
        );
        let line = read_jsonl(&out).unwrap().next().unwrap().unwrap();
        let truncated = line.truncated.unwrap();
        assert_eq!(truncated.bytes, MAX_PAGE_BYTES as u64);
        assert_eq!(truncated.dropped_series, fetched.page.dropped_series);
        assert_eq!(line.samples.len(), MAX_SERIES);
        assert!(served.load(Ordering::Relaxed) >= 2);
    }

    #[test]
    fn spawn_rejects_bad_targets_and_intervals_and_needs_a_runtime() {
        let out = PathBuf::from("/nonexistent/x.jsonl");
        assert!(matches!(
            spawn(
                vec!["ftp://h/metrics".to_owned()],
                MIN_INTERVAL,
                Instant::now(),
                out.clone()
            ),
            Err(ServerMetricsError::InvalidTarget { .. })
        ));
        assert!(matches!(
            spawn(
                vec!["not a url".to_owned()],
                MIN_INTERVAL,
                Instant::now(),
                out.clone()
            ),
            Err(ServerMetricsError::InvalidTarget { .. })
        ));
        assert!(matches!(
            spawn(vec![], MIN_INTERVAL, Instant::now(), out.clone()),
            Err(ServerMetricsError::InvalidTarget { .. })
        ));
        assert!(matches!(
            spawn(
                vec!["http://h/metrics".to_owned()],
                Duration::from_millis(10),
                Instant::now(),
                out.clone()
            ),
            Err(ServerMetricsError::InvalidInterval { .. })
        ));
        assert!(matches!(
            spawn(
                vec!["http://h/metrics".to_owned()],
                MIN_INTERVAL,
                Instant::now(),
                out
            ),
            Err(ServerMetricsError::NoRuntime { .. })
        ));
    }

    #[test]
    fn warnings_are_distinct_and_capped() {
        let mut warnings = Warnings::default();
        assert!(warnings.add("a".to_owned()));
        assert!(!warnings.add("a".to_owned()));
        for i in 0..30 {
            warnings.add(format!("w{i}"));
        }
        let list = warnings.into_vec();
        assert_eq!(list.len(), MAX_WARNINGS + 1);
        assert_eq!(list[0], "a");
        assert_eq!(
            list[MAX_WARNINGS],
            "… and 11 more distinct warning(s) not kept"
        );
    }

    #[test]
    fn signed_seconds_are_negative_before_t0() {
        let t0 = Instant::now() + Duration::from_millis(500);
        let at = t0 - Duration::from_millis(250);
        assert!((signed_secs(at, t0) + 0.25).abs() < 1e-9);
        assert!((signed_secs(t0 + Duration::from_secs(2), t0) - 2.0).abs() < 1e-9);
    }
}
