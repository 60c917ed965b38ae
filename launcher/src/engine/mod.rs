//! The load engine: issues prepared requests on a precomputed schedule (open loop) or keeps N in flight (closed
//! loop), and records every request raw. It knows nothing of profiles or metrics: a plan comes in, records go out
//! as they finish (to `requests.jsonl` and the in-memory list the metrics are derived from afterwards).
//!
//! Open-loop requests are issued at `stage start + offset` whatever happened before, so a slow server or a slow
//! client shows up as schedule delay and in the from-scheduled latencies instead of silently lowering the rate
//! (no coordinated omission).

pub mod client;
pub mod http1;
pub mod sse;

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinSet;

pub use client::{Clock, Issue, PreparedRequest, Target, Transport};

use crate::record::RequestRecord;

/// How one stage issues requests.
#[derive(Debug, Clone)]
pub enum StagePlan {
    /// Send at these offsets from the stage start; with `max_concurrency`, a request waits for a free slot before
    /// it is sent (vllm bench serve's `--max-concurrency`), and the wait counts as schedule delay.
    Open {
        send_at: Vec<Duration>,
        max_concurrency: Option<usize>,
    },
    /// Keep `concurrency` requests in flight until `total` have been issued or `duration` has passed; with a
    /// `rampup`, the workers start evenly spread over it.
    Closed {
        concurrency: usize,
        total: Option<u64>,
        duration: Option<Duration>,
        rampup: Duration,
    },
}

/// One load stage.
#[derive(Debug, Clone)]
pub struct Stage {
    pub plan: StagePlan,
    /// The rate the profile asked for, reported beside the achieved rate.
    pub requested_rate: Option<f64>,
}

/// Everything the engine needs for a run.
#[derive(Debug, Clone)]
pub struct RunPlan {
    pub stages: Vec<Stage>,
    /// The pause between stages.
    pub interval: Duration,
    /// Request bodies, used in order and cycled when a run issues more requests than there are prompts.
    pub requests: Arc<[PreparedRequest]>,
}

/// When each stage ran, in nanoseconds on the run clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StageTimes {
    pub start_ns: u64,
    pub end_ns: u64,
}

/// Counters a progress display reads while the run goes on.
#[derive(Debug, Default)]
pub struct Progress {
    pub issued: AtomicU64,
    pub finished: AtomicU64,
    pub failed: AtomicU64,
    pub stage: AtomicU64,
}

/// Errors that stop a run (a single request's failure never does; it is recorded).
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("the run has no requests to send: the workload produced no prompts")]
    NoRequests,
    #[error("cannot write {path}: {source}")]
    WriteRecords {
        path: String,
        source: std::io::Error,
    },
}

/// Where finished records go: a channel to the writer task that appends them to `requests.jsonl`.
#[derive(Debug, Clone)]
pub struct RecordSink {
    tx: mpsc::UnboundedSender<RequestRecord>,
    progress: Arc<Progress>,
}

impl RecordSink {
    fn finish(&self, record: RequestRecord) {
        self.progress.finished.fetch_add(1, Ordering::Relaxed);
        if !record.succeeded() {
            self.progress.failed.fetch_add(1, Ordering::Relaxed);
        }
        // The writer outlives every sender; a send can only fail after it stopped on a write error, which the run
        // reports when it joins the writer.
        let _ = self.tx.send(record);
    }
}

/// How long the record writer waits between batches; a killed launcher loses at most this much of finished
/// records on top of the requests in flight.
const WRITER_PAUSE: Duration = Duration::from_millis(5);

/// Starts the writer that appends each finished record to `out` as one JSON line, flushing after every batch so
/// a killed launcher loses at most the requests in flight and the last [`WRITER_PAUSE`] of records. Returns the sink and the writer's handle, which yields
/// every record once all sinks are dropped.
pub fn record_writer(
    out: Box<dyn Write + Send>,
    path: String,
    progress: Arc<Progress>,
) -> (
    RecordSink,
    tokio::task::JoinHandle<Result<Vec<RequestRecord>, EngineError>>,
) {
    let (tx, mut rx) = mpsc::unbounded_channel::<RequestRecord>();
    let handle = tokio::task::spawn_blocking(move || {
        let mut out = std::io::BufWriter::with_capacity(1 << 16, out);
        let mut records = Vec::new();
        let fail = |source: std::io::Error| EngineError::WriteRecords {
            path: path.clone(),
            source,
        };
        let mut batch = Vec::new();
        while let Some(first) = rx.blocking_recv() {
            batch.push(first);
            while let Ok(more) = rx.try_recv() {
                batch.push(more);
            }
            for record in batch.drain(..) {
                serde_json::to_writer(&mut out, &record).map_err(|e| fail(e.into()))?;
                out.write_all(b"\n").map_err(fail)?;
                records.push(record);
            }
            out.flush().map_err(fail)?;
            // Let records pile up for a moment: waking this thread for every record costs the I/O workers a
            // futex call each (thousands per second at the ceiling), while a batch every few ms costs nothing.
            std::thread::sleep(WRITER_PAUSE);
        }
        Ok(records)
    });
    (RecordSink { tx, progress }, handle)
}

/// Runs every stage of `plan` against `target`, sending each finished record to `sink`.
pub async fn run(
    target: Arc<Target>,
    plan: RunPlan,
    clock: Clock,
    sink: RecordSink,
) -> Result<Vec<StageTimes>, EngineError> {
    if plan.requests.is_empty() {
        return Err(EngineError::NoRequests);
    }
    let next_id = Arc::new(AtomicU64::new(0));
    let mut times = Vec::with_capacity(plan.stages.len());
    for (index, stage) in plan.stages.iter().enumerate() {
        if index > 0 && !plan.interval.is_zero() {
            tokio::time::sleep(plan.interval).await;
        }
        sink.progress.stage.store(index as u64, Ordering::Relaxed);
        let context = StageContext {
            target: Arc::clone(&target),
            requests: Arc::clone(&plan.requests),
            clock,
            sink: sink.clone(),
            next_id: Arc::clone(&next_id),
            stage: u32::try_from(index).unwrap_or(u32::MAX),
        };
        let start_ns = clock.now_ns();
        match &stage.plan {
            StagePlan::Open {
                send_at,
                max_concurrency,
            } => run_open(context, send_at, *max_concurrency).await,
            StagePlan::Closed {
                concurrency,
                total,
                duration,
                rampup,
            } => run_closed(context, *concurrency, *total, *duration, *rampup).await,
        }
        times.push(StageTimes {
            start_ns,
            end_ns: clock.now_ns(),
        });
    }
    Ok(times)
}

#[derive(Clone)]
struct StageContext {
    target: Arc<Target>,
    requests: Arc<[PreparedRequest]>,
    clock: Clock,
    sink: RecordSink,
    next_id: Arc<AtomicU64>,
    stage: u32,
}

impl StageContext {
    async fn issue(&self, scheduled_ns: u64) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.sink.progress.issued.fetch_add(1, Ordering::Relaxed);
        let request = &self.requests[(id % self.requests.len() as u64) as usize];
        let issue = Issue {
            id,
            stage: self.stage,
            scheduled_ns,
        };
        let record = client::execute(&self.target, request, issue, &self.clock).await;
        self.sink.finish(record);
    }
}

async fn run_open(context: StageContext, send_at: &[Duration], max_concurrency: Option<usize>) {
    let stage_start = Instant::now();
    let slots = max_concurrency.map(|n| Arc::new(Semaphore::new(n.max(1))));
    let mut in_flight = JoinSet::new();
    for offset in send_at {
        let due = stage_start + *offset;
        // tokio's wheel alone would send up to a millisecond late: one tick per request at 1 000 req/s.
        crate::timer::sleep_until(due).await;
        let scheduled_ns = context.clock.ns_of(due);
        let context = context.clone();
        let slots = slots.clone();
        in_flight.spawn(async move {
            // Held for the request's lifetime; the semaphore is never closed, so acquiring cannot fail.
            let _slot = match &slots {
                Some(s) => Arc::clone(s).acquire_owned().await.ok(),
                None => None,
            };
            context.issue(scheduled_ns).await;
        });
        // Reap finished tasks as we go so a long stage does not hold every handle.
        while in_flight.try_join_next().is_some() {}
    }
    while in_flight.join_next().await.is_some() {}
}

async fn run_closed(
    context: StageContext,
    concurrency: usize,
    total: Option<u64>,
    duration: Option<Duration>,
    rampup: Duration,
) {
    let start = Instant::now();
    let deadline = duration.map(|d| start + d);
    let issued = Arc::new(AtomicU64::new(0));
    let mut workers = JoinSet::new();
    let concurrency = concurrency.max(1);
    for worker in 0..concurrency {
        let context = context.clone();
        let issued = Arc::clone(&issued);
        let begin = start + rampup.mul_f64(worker as f64 / concurrency as f64);
        workers.spawn(async move {
            tokio::time::sleep_until(begin.into()).await;
            loop {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    break;
                }
                if let Some(total) = total
                    && issued.fetch_add(1, Ordering::Relaxed) >= total
                {
                    break;
                }
                // A closed loop sends as soon as a slot frees: the intended time is now.
                let scheduled_ns = context.clock.now_ns();
                context.issue(scheduled_ns).await;
            }
        });
    }
    while workers.join_next().await.is_some() {}
}
