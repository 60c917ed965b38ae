//! The load engine: issues prepared requests on a precomputed schedule (open loop) or keeps N in flight (closed
//! loop), and records every request raw. It knows nothing of profiles or metrics: a plan comes in, records go out
//! as they finish (to `requests.bin`, and to the in-memory list the metrics are derived from afterwards while
//! that list fits its budget; past it, a long run is summarised from the file). With a sent log, each request
//! also leaves a small entry as it goes out ([`llmbench_model::sent`]), so a run killed with requests in flight
//! still says what it sent.
//!
//! A plan's stages are fixed ([`RunPlan`]), or decided one at a time by a [`StagePlanner`] from what the stages
//! before measured ([`Stages::Adaptive`]: sweeps, searches): the engine hands the planner each finished stage,
//! with a copy of its records when the planner asked for them, and runs whatever it decides next.
//!
//! Open-loop requests are issued at `stage start + offset` whatever happened before, so a slow server or a slow
//! client shows up as schedule delay and in the from-scheduled latencies instead of silently lowering the rate
//! (no coordinated omission).

mod aiperf_sessions;
mod aiperf_users;
mod api_events;
mod chunk_scan;
pub mod client;
pub mod control;
pub mod conversation;
pub mod http1;
pub mod lmbench;
pub mod request_ids;
mod saturation;
pub mod sessions;
pub mod sse;
pub mod trace;
pub mod unreachable;
pub mod weka_session;

use std::collections::VecDeque;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio::task::JoinSet;

pub use client::{Clock, Issue, Target, Transport};
pub use control::{Control, Signal, StopReason};
pub use conversation::Conversations;
pub use llmbench_workload::request::PreparedRequest;
pub use request_ids::RequestIds;
pub use trace::Replay;
pub use unreachable::DEFAULT_MAX_CONNECT_FAILURES;

use llmbench_model::record::{ErrorClass, RequestRecord};
use llmbench_model::record_file;
use llmbench_model::sent::SentEntry;
use llmbench_workload::workload::circuit_breaker;
use llmbench_workload::workload::over_saturation::OverSaturation;
use llmbench_workload::workload::{
    ErrorLimit, FailedRequestThreshold, GlobalErrorRate, StopScope, WindowedErrorRate,
};

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
    /// AIPerf's request-rate loop ([`Paced`]).
    Paced(Box<Paced>),
    /// Replay a trace's sessions (AIPerf's Mooncake traces); the run's requests are [`Requests::Trace`].
    Trace(Arc<Replay>),
    /// inference-perf `trace_session_replay`: sessions of dependent calls ([`sessions`]); the run's requests are
    /// [`Requests::Trace`].
    Sessions(Arc<sessions::SessionReplay>),
    /// One QPS value of an LMBenchmark scenario (fmperf profiles): its users' sessions decide what is sent and
    /// when, step by step ([`lmbench`]).
    LmBench(Arc<lmbench::LmBenchStage>),
    /// Queries of `group` requests sent together, the next query once every request of the previous one has
    /// returned (MLPerf LoadGen's MultiStream).
    Lockstep(Lockstep),
}

/// AIPerf 0.13's `RequestRateStrategy.execute_phase` ([`StagePlan::Paced`]): a send at the end of each interval of
/// `pace`, the first one interval after the phase starts, the targets kept on an absolute schedule; with
/// `max_concurrency` (AIPerf's session slots), an interval that finds every slot taken sends nothing and the loop
/// waits for the next one (without a rate, the sends wait for a slot). Sending ends once `total` were sent or
/// `duration` has passed; with a duration, what is still in flight at `duration + grace` is cancelled (AIPerf's
/// grace period, whose late responses it leaves out of its metrics).
#[derive(Debug, Clone, PartialEq)]
pub struct Paced {
    pub pace: llmbench_workload::workload::AiperfPace,
    pub max_concurrency: Option<usize>,
    pub total: Option<u64>,
    pub duration: Option<Duration>,
    pub grace: Option<Duration>,
    /// AIPerf's `--warmup-request-count`: a phase of this many requests, paced alike by a generator of its own,
    /// flagged warm-up; the profiling phase, and its duration, start once all of them returned.
    pub warmup: u64,
    /// AIPerf's session count (`--conversation-num` over multi-turn conversations): the profiling phase starts
    /// no session after this many, and ends once their turns were all sent.
    pub sessions: Option<u64>,
    /// AIPerf's prefill slots and request cancellation.
    pub credits: llmbench_workload::workload::AiperfCredits,
}

/// A lockstep stage's shape ([`StagePlan::Lockstep`]): LoadGen's MultiStream query scheduler
/// (`loadgen/issue_query_controller.cc` `QueryScheduler<TestScenario::MultiStream>::Wait` waits for every sample
/// of the previous query, then stamps the next query's scheduled and issued time with now) and its issue loop's
/// ending rules (`IssueQueriesInternal`: after issuing a query, end once `min_queries` are issued and
/// `min_duration` has passed since the start; end early at `max_queries` or past `max_duration`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lockstep {
    /// Requests per query (LoadGen's `samples_per_query`).
    pub group: usize,
    /// The queries generated in advance; the stage never issues more.
    pub queries: u64,
    pub min_queries: u64,
    pub min_duration: Duration,
    /// 0 / `None`: unbounded.
    pub max_queries: u64,
    pub max_duration: Option<Duration>,
}

impl Lockstep {
    /// Whether the issue loop ends after issuing its `issued`-th query `elapsed` after the stage started, as
    /// LoadGen's `IssueQueriesInternal` checks it (natural end, then max query count, then max duration).
    pub(crate) fn ends_after(&self, issued: u64, elapsed: Duration) -> bool {
        (issued >= self.min_queries && elapsed >= self.min_duration)
            || (self.max_queries != 0 && issued >= self.max_queries)
            || self.max_duration.is_some_and(|max| elapsed > max)
            || issued >= self.queries
    }
}

/// One load stage.
#[derive(Debug, Clone)]
pub struct Stage {
    pub plan: StagePlan,
    /// The rate the profile asked for, reported beside the achieved rate.
    pub requested_rate: Option<f64>,
    /// When errors end the stage early (guidellm's error constraints).
    pub errors: ErrorLimits,
}

/// guidellm's error stop conditions for one stage (`scheduler/constraints/error.py`), and the run's inference-perf
/// circuit breakers.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ErrorLimits {
    pub max_errors: Option<ErrorLimit<u64>>,
    pub max_error_rate: Option<ErrorLimit<WindowedErrorRate>>,
    pub max_global_error_rate: Option<ErrorLimit<GlobalErrorRate>>,
    /// inference-perf `load.circuit_breakers`: one state shared by every stage of the run, as upstream's breakers
    /// outlive the stage that opened them; an open breaker stops the run.
    pub breakers: Option<RunBreakers>,
    /// guidellm `over_saturation`: a detector of the stage's own, fed each request's start, first token and end.
    pub over_saturation: Option<OverSaturation>,
    /// AIPerf `--failed-request-threshold`: the stage's measured requests only, and it stops the whole run.
    pub failed_request_threshold: Option<FailedRequestThreshold>,
}

/// The run's circuit breakers ([`llmbench_workload::workload::circuit_breaker`]), fed every finished request.
#[derive(Debug, Clone)]
pub struct RunBreakers(Arc<Mutex<circuit_breaker::Breakers>>);

impl RunBreakers {
    /// The breakers `load.circuit_breakers` enables, or `None` when it enables none.
    pub fn new(configs: &[circuit_breaker::CircuitBreaker]) -> Option<Self> {
        (!configs.is_empty()).then(|| {
            RunBreakers(Arc::new(Mutex::new(circuit_breaker::Breakers::new(
                configs,
            ))))
        })
    }

    /// Feeds `record`; the name of the open breaker, if one is open now.
    fn feed(&self, record: &RequestRecord) -> Option<String> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .feed(record)
            .map(str::to_owned)
    }
}

impl PartialEq for RunBreakers {
    /// The same run's breakers.
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// What requests a run sends.
#[derive(Debug, Clone)]
pub enum Requests {
    /// Independent request bodies, built before the clock started, used in order and cycled when a run issues
    /// more requests than there are bodies.
    Fixed(Arc<[PreparedRequest]>),
    /// Multi-turn conversations, whose bodies carry the answers of earlier turns.
    Conversations(Arc<Conversations>),
    /// A trace: each stage's [`StagePlan::Trace`] carries its requests with their times.
    Trace,
}

impl Requests {
    fn is_empty(&self) -> bool {
        match self {
            Requests::Fixed(requests) => requests.is_empty(),
            Requests::Conversations(_) | Requests::Trace => false,
        }
    }
}

/// vllm bench serve's warm-up (`--num-warmups`): `count` copies of the first request, sent at once (at most
/// `max_concurrency` at a time) before the first stage; recorded, and left out of every metric.
#[derive(Debug, Clone)]
pub struct Warmup {
    pub count: u64,
    pub max_concurrency: Option<usize>,
    /// What the warm-ups send when it is not the first request: under LoRA traffic vLLM warms the base model
    /// (`test_input` keeps `model_id`), while the first request names its adapter.
    pub request: Option<PreparedRequest>,
}

/// Everything the engine needs for a run whose stages are known before it starts.
#[derive(Debug, Clone)]
pub struct RunPlan {
    pub stages: Vec<Stage>,
    /// The pause between stages.
    pub interval: Duration,
    pub requests: Requests,
    pub warmup: Option<Warmup>,
}

/// Everything the engine needs for a run, its stages fixed or decided as it goes. A [`RunPlan`] converts into
/// one with fixed stages.
pub struct EnginePlan {
    pub stages: Stages,
    /// The pause between stages (none after a probe).
    pub interval: Duration,
    pub requests: Requests,
    pub warmup: Option<Warmup>,
    /// Awaited once, after the warm-up and before the first stage: opens the profiling window
    /// (`--profiler-start`), so the warm-up stays outside it.
    pub before_measured: Option<futures_util::future::BoxFuture<'static, ()>>,
    /// Connection-level failures in a row that stop the run (0: never); see [`unreachable`].
    pub max_connect_failures: u32,
    /// Each stage's own requests, where a stage must not re-send another's (fresh prompts per stage); `None`:
    /// every stage sends from `requests`.
    pub stage_requests: Option<Box<dyn StageRequests>>,
    /// Sent once each before the first stage (after the warm-up), recorded as warm-up and left out of every
    /// figure: the priming pass that warms the server's prefix cache with the run's prompts
    /// (`--warm-prefix-cache`).
    pub prime: Option<Arc<[PreparedRequest]>>,
}

/// Gives each stage of a run its own requests instead of the run's one list.
pub trait StageRequests: Send {
    /// The requests of the `nth` stage the run starts (0-based, probes counted: a probe's prompts must not be the
    /// next stage's either), or `None` to send from the run's own list. Called between stages, with nothing of the
    /// run in flight and before the stage's clock starts.
    fn requests(&mut self, nth: u32, stage: &Stage) -> Result<Option<Requests>, PlannerError>;

    /// Whether each stage sends its list from the first body, as inference-perf numbers each stage's requests
    /// from 0 (`get_data` starts again); otherwise a stage goes on where the one before it stopped.
    fn restarts_each_stage(&self) -> bool {
        false
    }
}

/// Every stage sends the run's own list, each from its first body.
#[derive(Debug, Clone, Copy, Default)]
pub struct FromFirstEachStage;

impl StageRequests for FromFirstEachStage {
    fn requests(&mut self, _nth: u32, _stage: &Stage) -> Result<Option<Requests>, PlannerError> {
        Ok(None)
    }

    fn restarts_each_stage(&self) -> bool {
        true
    }
}

/// How many priming requests are in flight at once: enough to prime a large pool quickly, few enough that a
/// small server queues rather than rejects them.
pub(crate) const PRIME_CONCURRENCY: usize = 32;

impl From<RunPlan> for EnginePlan {
    fn from(plan: RunPlan) -> Self {
        EnginePlan {
            stages: Stages::Fixed(plan.stages),
            interval: plan.interval,
            requests: plan.requests,
            warmup: plan.warmup,
            before_measured: None,
            max_connect_failures: DEFAULT_MAX_CONNECT_FAILURES,
            stage_requests: None,
            prime: None,
        }
    }
}

/// A run's stages.
pub enum Stages {
    /// Known before the run: each runs in turn.
    Fixed(Vec<Stage>),
    /// Decided one at a time, from what the earlier stages measured.
    Adaptive(Box<dyn StagePlanner>),
}

/// Decides an adaptive run's stages one at a time.
pub trait StagePlanner: Send {
    /// The next stage, given the one that just finished (`None` before the first); `Ok(None)` ends the run, and an
    /// error ends it as failed ([`EngineError::Planner`]). Not asked again once the run is stopped (an interrupt,
    /// an error limit with `stopping_scope: all`).
    fn next_stage(
        &mut self,
        finished: Option<FinishedStage>,
    ) -> Result<Option<PlannedStage>, PlannerError>;
}

/// Why a planner could not decide the next stage.
pub type PlannerError = Box<dyn std::error::Error + Send + Sync>;

/// A stage a [`StagePlanner`] decided.
#[derive(Debug, Clone)]
pub struct PlannedStage {
    pub stage: Stage,
    /// Hand the stage's records to the planner when it ends: copies taken as they finish (every record still goes
    /// to the writer), held for this stage only and dropped once the planner has seen them.
    pub keep_records: bool,
    /// A probe, run to measure and not to report: its records are flagged `warmup` (left out of every figure and
    /// report, still written to `requests.bin` with the index the next stage will have), it is not counted as a
    /// stage (no index, no times among the run's), and the stage after it follows without the interval.
    pub probe: bool,
    /// Ends the stage this long after it starts: nothing more is sent, and requests still in flight are cancelled
    /// (recorded as `cancelled`).
    pub deadline: Option<Duration>,
    /// What run.json says of the stage, for the planner's caller; the engine does not read it (nor is it used
    /// for a probe).
    pub meta: llmbench_workload::workload::stage_meta::StageMeta,
}

/// A stage that ended, as its planner is told.
#[derive(Debug)]
pub struct FinishedStage {
    /// Its index among the run's stages; a probe carries the index the next stage will have.
    pub index: u32,
    pub probe: bool,
    pub times: StageTimes,
    /// Its records in the order they finished, when the planned stage asked to keep them; else empty.
    pub records: Vec<RequestRecord>,
}

/// A fixed list of stages, handed out in order: how the engine runs a [`Stages::Fixed`].
struct FixedStages(std::vec::IntoIter<Stage>);

impl StagePlanner for FixedStages {
    fn next_stage(
        &mut self,
        _finished: Option<FinishedStage>,
    ) -> Result<Option<PlannedStage>, PlannerError> {
        Ok(self.0.next().map(|stage| PlannedStage {
            stage,
            keep_records: false,
            probe: false,
            deadline: None,
            meta: llmbench_workload::workload::stage_meta::StageMeta::default(),
        }))
    }
}

/// When each stage ran, in nanoseconds on the run clock, and why it ended early if it did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StageTimes {
    /// When the stage's first request went out: its warm-ups, and a probe run just before it, included. Between
    /// one stage's end and the next one's `began_ns` nothing of the run is sent.
    pub began_ns: u64,
    pub start_ns: u64,
    pub end_ns: u64,
    pub stopped: Option<StopReason>,
    /// A trace session replay's finished sessions (one small record each; empty for other stages).
    pub sessions: Vec<llmbench_model::record::SessionRecord>,
}

/// Counters a progress display reads while the run goes on, and the run's planned / sent / finished counts.
#[derive(Debug, Default)]
pub struct Progress {
    /// Requests sent (or, for a conversation turn, about to be).
    pub issued: AtomicU64,
    /// Records handed to the writer.
    pub finished: AtomicU64,
    pub failed: AtomicU64,
    pub stage: AtomicU64,
    /// Requests the launcher plans to send, warm-ups included, when its plan says (0: not known in advance, as
    /// for a run bounded by time).
    pub planned: AtomicU64,
}

/// Errors that stop a run (a single request's failure never does; it is recorded).
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("the run has no requests to send: the workload produced no prompts")]
    NoRequests,
    #[error(
        "a trace replay's stages and requests go together: every stage replays the trace, or none does"
    )]
    TraceMismatch,
    #[error(
        "cannot write {path} ({source}) after {written} record(s): the run stopped issuing requests it could not \
         record"
    )]
    WriteRecords {
        path: String,
        written: u64,
        source: std::io::Error,
    },
    /// The planner could not decide the next stage; `ran` holds the times of the stages that ran before.
    #[error("{source}")]
    Planner {
        ran: Vec<StageTimes>,
        source: PlannerError,
    },
}

/// What the I/O tasks hand the record writer, on one channel: a request as it goes out, and its record once it
/// ended. One channel keeps them in order, so a request's sent entry is never written after its record.
#[derive(Debug)]
enum ToWriter {
    Sent(SentEntry),
    Finished(RequestRecord),
}

/// Where finished records go: a channel to the writer task that appends them to `requests.bin` (and, with a
/// sent log, each request's entry as it goes out).
#[derive(Debug, Clone)]
pub struct RecordSink {
    tx: mpsc::UnboundedSender<ToWriter>,
    progress: Arc<Progress>,
    /// The writer's memory budget for records, which a stage's copies for its planner are held to as well.
    budget_bytes: u64,
    /// Whether the writer keeps a sent log: without one, nothing is sent down the channel as requests go out.
    logs_sent: bool,
}

impl RecordSink {
    fn finish(&self, record: RequestRecord) {
        self.progress.finished.fetch_add(1, Ordering::Relaxed);
        if !record.succeeded() {
            self.progress.failed.fetch_add(1, Ordering::Relaxed);
        }
        // The writer outlives every sender; a send can only fail after it stopped on a write error, which the run
        // reports when it joins the writer.
        let _ = self.tx.send(ToWriter::Finished(record));
    }

    /// Counts a request that goes out now and, with a sent log, hands the writer its entry.
    fn went_out(&self, entry: impl FnOnce() -> SentEntry) {
        self.progress.issued.fetch_add(1, Ordering::Relaxed);
        if self.logs_sent {
            let _ = self.tx.send(ToWriter::Sent(entry()));
        }
    }
}

/// The sent log a run's writer appends each request's entry to as it goes out ([`llmbench_model::sent`]): the
/// file, its header already written, and its path for errors.
pub struct SentLog {
    pub out: Box<dyn Write + Send>,
    pub path: String,
}

/// How long the record writer waits between batches; a killed launcher loses at most this much of finished
/// records on top of the requests in flight.
const WRITER_PAUSE: Duration = Duration::from_millis(5);

/// Sees every finished record on the record writer's thread, once it is written: live metrics are kept here, off
/// the request path (the I/O tasks only hand records to a channel, as they do without an observer).
pub trait ObserveRecords: Send + 'static {
    /// A batch the writer has just written, in the order its records finished. Runs on the writer's blocking
    /// thread between writes, so it should be quick; it never sees a record twice.
    fn observe(&mut self, batch: &[RequestRecord]);
}

/// The record writer's handle: yields every record once all sinks are dropped.
pub(crate) type WriterHandle = tokio::task::JoinHandle<Result<Vec<RequestRecord>, EngineError>>;

/// How many records the writer keeps in memory once it has written them (`llmbench run --records-memory`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordsBudget {
    /// The records' estimated memory ([`RequestRecord::memory_bytes`]) the writer keeps at most.
    pub bytes: u64,
    /// What happens past it.
    pub past: PastBudget,
}

/// What the writer does once the records it keeps outgrow their budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PastBudget {
    /// Frees them and keeps none from then on: the run is summarised from requests.bin ([`Written::spilled`]).
    Spill,
    /// Keeps every record all the same, with one warning: for a run whose verdict needs them all (MLPerf).
    Keep,
}

impl RecordsBudget {
    /// Keep everything, warn never.
    pub(crate) const UNLIMITED: RecordsBudget = RecordsBudget {
        bytes: u64::MAX,
        past: PastBudget::Keep,
    };
}

/// What the record writer leaves once every sink is dropped.
#[derive(Debug, Default)]
pub struct Written {
    /// Every record written, in the order they finished; empty when [`spilled`](Self::spilled).
    pub records: Vec<RequestRecord>,
    /// The records outgrew their budget: none is kept, requests.bin holds them all.
    pub spilled: bool,
    /// How many records were written.
    pub written: u64,
}

/// The budgeted record writer's handle.
pub type BudgetedWriterHandle = tokio::task::JoinHandle<Result<Written, EngineError>>;

/// Starts the writer that appends each finished record to `out` in the records file's compact form
/// ([`llmbench_model::record_file`], its header first), flushing after every batch so
/// a killed launcher loses at most the requests in flight and the last [`WRITER_PAUSE`] of records. A write that
/// fails (a full disk) stops the run at once through `control`: load that cannot be recorded is not sent. Returns
/// the sink and the writer's handle, which yields every record once all sinks are dropped.
pub fn record_writer(
    out: Box<dyn Write + Send>,
    path: String,
    progress: Arc<Progress>,
    control: Control,
) -> (RecordSink, WriterHandle) {
    record_writer_observed(out, path, progress, control, None)
}

/// [`record_writer`], also showing each written batch to `observer` (`llmbench run --metrics-listen`). Records
/// that could not be written are not shown: the observer sees what the records file holds.
pub(crate) fn record_writer_observed(
    out: Box<dyn Write + Send>,
    path: String,
    progress: Arc<Progress>,
    control: Control,
    observer: Option<Box<dyn ObserveRecords>>,
) -> (RecordSink, WriterHandle) {
    let (tx, rx) = mpsc::unbounded_channel::<ToWriter>();
    let files = WriterFiles {
        records: out,
        records_path: path,
        sent: None,
    };
    let handle = tokio::task::spawn_blocking(move || {
        write_records(rx, files, control, observer, RecordsBudget::UNLIMITED)
            .map(|written| written.records)
    });
    let sink = RecordSink {
        tx,
        progress,
        budget_bytes: u64::MAX,
        logs_sent: false,
    };
    (sink, handle)
}

/// [`record_writer_observed`] keeping the records it wrote within `budget`: past it, a long run holds no record in
/// memory ([`PastBudget::Spill`]) and is summarised from the records file afterwards. With `sent`, each request's
/// entry is appended there as it goes out, in the same batches as the records and flushed before them.
pub fn record_writer_budgeted(
    out: Box<dyn Write + Send>,
    path: String,
    progress: Arc<Progress>,
    control: Control,
    observer: Option<Box<dyn ObserveRecords>>,
    budget: RecordsBudget,
    sent: Option<SentLog>,
) -> (RecordSink, BudgetedWriterHandle) {
    let (tx, rx) = mpsc::unbounded_channel::<ToWriter>();
    let logs_sent = sent.is_some();
    let files = WriterFiles {
        records: out,
        records_path: path,
        sent,
    };
    let handle =
        tokio::task::spawn_blocking(move || write_records(rx, files, control, observer, budget));
    let sink = RecordSink {
        tx,
        progress,
        budget_bytes: budget.bytes,
        logs_sent,
    };
    (sink, handle)
}

/// What the writer appends to.
struct WriterFiles {
    records: Box<dyn Write + Send>,
    records_path: String,
    sent: Option<SentLog>,
}

/// The writer's loop, on a blocking thread: appends each batch (the sent entries first, flushed before the
/// records, so a record on disk always has its entry there too), shows it to the observer, and keeps it while
/// the kept records fit `budget`.
fn write_records(
    mut rx: mpsc::UnboundedReceiver<ToWriter>,
    files: WriterFiles,
    control: Control,
    mut observer: Option<Box<dyn ObserveRecords>>,
    budget: RecordsBudget,
) -> Result<Written, EngineError> {
    let WriterFiles {
        records: out,
        records_path: path,
        sent,
    } = files;
    let mut out = std::io::BufWriter::with_capacity(1 << 16, out);
    // The header is written before any record, so even a run killed before its first answer leaves a file
    // that reads as no record.
    let mut failure: Option<(String, std::io::Error)> = record_file::write_header(&mut out)
        .and_then(|()| out.flush())
        .err()
        .map(|e| {
            control.stop_now(StopReason::RecordsUnwritable);
            (path.clone(), e)
        });
    let mut writer = record_file::RecordWriter::default();
    let (mut sent_out, sent_path) = match sent {
        Some(SentLog { out, path }) => {
            (Some(std::io::BufWriter::with_capacity(1 << 16, out)), path)
        }
        None => (None, String::new()),
    };
    let mut kept = Written::default();
    let mut held = 0u64;
    let mut warned = false;
    let mut batch = Vec::new();
    // The sent entries are written as they are drained, into the sent log's buffer; the first error stops them.
    let mut sent_failure: Option<std::io::Error> = None;
    while let Some(first) = rx.blocking_recv() {
        let mut next = Some(first);
        while let Some(message) = next {
            match message {
                ToWriter::Finished(record) => batch.push(record),
                ToWriter::Sent(entry) => {
                    if let (Some(sent), None) = (sent_out.as_mut(), &sent_failure)
                        && let Err(e) = entry.write_to(sent)
                    {
                        sent_failure = Some(e);
                    }
                }
            }
            next = rx.try_recv().ok();
        }
        if failure.is_some() {
            // Drain what is still in flight so its senders never block; it can no longer be recorded.
            batch.clear();
            continue;
        }
        let sent_flushed = match (sent_failure.take(), sent_out.as_mut()) {
            (Some(e), _) => Err(e),
            (None, Some(sent)) => sent.flush(),
            (None, None) => Ok(()),
        };
        if let Err(e) = sent_flushed {
            control.stop_now(StopReason::RecordsUnwritable);
            failure = Some((sent_path.clone(), e));
            batch.clear();
            continue;
        }
        match write_batch(&mut out, &batch, &mut writer) {
            Ok(()) => {
                kept.written += batch.len() as u64;
                if let Some(observer) = observer.as_mut() {
                    observer.observe(&batch);
                }
                if kept.spilled {
                    batch.clear();
                } else {
                    held = held.saturating_add(batch.iter().map(RequestRecord::memory_bytes).sum());
                    if held > budget.bytes && budget.past == PastBudget::Spill {
                        tracing::info!(
                            budget = %llmbench_workload::limits::bytes(budget.bytes),
                            records = kept.written,
                            "the records outgrew their memory budget (--records-memory): none is kept in memory \
                             from now on, and the run will be summarised from the records file"
                        );
                        kept.spilled = true;
                        // Freed now, not at the end: the point is what the run holds while it goes.
                        kept.records = Vec::new();
                        batch.clear();
                    } else {
                        if held > budget.bytes && !warned {
                            tracing::warn!(
                                budget = %llmbench_workload::limits::bytes(budget.bytes),
                                "this run keeps every record in memory for its verdict (MLPerf), past the records \
                                 memory budget (--records-memory)"
                            );
                            warned = true;
                        }
                        kept.records.append(&mut batch);
                    }
                }
            }
            Err(e) => {
                control.stop_now(StopReason::RecordsUnwritable);
                failure = Some((path.clone(), e));
                batch.clear();
                continue;
            }
        }
        // Let records pile up for a moment: waking this thread for every record costs the I/O workers a
        // futex call each (thousands per second at the ceiling), while a batch every few ms costs nothing.
        std::thread::sleep(WRITER_PAUSE);
    }
    match failure {
        Some((path, source)) => Err(EngineError::WriteRecords {
            path,
            written: kept.written,
            source,
        }),
        None => Ok(kept),
    }
}

fn write_batch(
    out: &mut impl Write,
    batch: &[RequestRecord],
    writer: &mut record_file::RecordWriter,
) -> std::io::Result<()> {
    for record in batch {
        writer.write(out, record)?;
    }
    out.flush()
}

/// Runs the warm-up and every stage of `plan` against `target`, sending each finished record to `sink`. `control`
/// stops the run early (an interrupt, a full disk), and so does a server that stopped answering ([`unreachable`]);
/// a stage may also stop itself on its error limits, or end at its deadline. Returns each stage that ran with its times (probes left out); the stages after a run-wide stop are
/// neither run nor, for an adaptive plan, asked for.
pub async fn run(
    target: Arc<Target>,
    plan: impl Into<EnginePlan>,
    clock: Clock,
    sink: RecordSink,
    control: Control,
) -> Result<Vec<StageTimes>, EngineError> {
    let mut plan = plan.into();
    // LMBenchmark stages build their own requests.
    let builds_own = matches!(&plan.stages, Stages::Fixed(stages)
        if !stages.is_empty() && stages.iter().all(|s| matches!(s.plan, StagePlan::LmBench(_))));
    if plan.requests.is_empty() && !builds_own {
        return Err(EngineError::NoRequests);
    }
    let next_id = Arc::new(AtomicU64::new(0));
    // The ids the warm-ups and the priming pass took: the measured requests still start at the list's first
    // body, as vLLM sends its input requests in order after its warm-ups.
    let measured_from = std::cell::Cell::new(0u64);
    let connect_failures = Arc::new(unreachable::ConnectFailures::new(plan.max_connect_failures));
    let context = |requests: Requests,
                   stage: u32,
                   levels: StageLevels,
                   errors: ErrorLimits,
                   kept: Option<Kept>| StageContext {
        saturation: errors.over_saturation.map(|config| {
            Arc::new(saturation::SaturationWatch::new(
                config,
                clock.now_ns(),
                levels.stage.clone(),
                control.clone(),
            ))
        }),
        target: Arc::clone(&target),
        requests,
        clock,
        sink: sink.clone(),
        next_id: Arc::clone(&next_id),
        measured_from: measured_from.get(),
        stage,
        control: levels.requests,
        limits: levels.stage,
        run: control.clone(),
        tally: Arc::new(Mutex::new(Tally::default())),
        errors,
        probe: levels.probe,
        kept,
        connect_failures: Arc::clone(&connect_failures),
    };
    if let (Some(warmup), Requests::Fixed(_)) = (plan.warmup, &plan.requests) {
        let level = control.child();
        let levels = StageLevels {
            stage: level.clone(),
            requests: level,
            probe: false,
        };
        let context = context(
            plan.requests.clone(),
            0,
            levels,
            ErrorLimits::default(),
            None,
        );
        run_warmup(context, warmup).await;
    }
    if let Some(prime) = plan.prime.take() {
        let level = control.child();
        let levels = StageLevels {
            stage: level.clone(),
            requests: level,
            probe: false,
        };
        let context = context(
            Requests::Fixed(Arc::clone(&prime)),
            0,
            levels,
            ErrorLimits::default(),
            None,
        );
        run_prime(context, prime).await;
    }
    measured_from.set(next_id.load(Ordering::Relaxed));
    if let Some(hook) = plan.before_measured.take() {
        hook.await;
    }
    let mut stage_requests = plan.stage_requests.take();
    // Stages started so far, probes counted: what `StageRequests` numbers them by.
    let mut started: u32 = 0;
    let mut planner: Box<dyn StagePlanner> = match plan.stages {
        Stages::Fixed(stages) => Box::new(FixedStages(stages.into_iter())),
        Stages::Adaptive(planner) => planner,
    };
    let mut times: Vec<StageTimes> = Vec::new();
    // When the work towards the next recorded stage began (a probe before it included).
    let mut work_began: Option<u64> = None;
    let mut finished: Option<FinishedStage> = None;
    // The interval separates stages; the first stage and a stage after a probe start at once.
    let mut pause = false;
    loop {
        if control.issuing_stopped() {
            break;
        }
        let planned = match planner.next_stage(finished.take()) {
            Ok(Some(planned)) => planned,
            Ok(None) => break,
            Err(source) => return Err(EngineError::Planner { ran: times, source }),
        };
        let own = match stage_requests.as_mut() {
            Some(source) => match source.requests(started, &planned.stage) {
                Ok(own) => own,
                Err(source) => return Err(EngineError::Planner { ran: times, source }),
            },
            None => None,
        };
        started = started.saturating_add(1);
        if stage_requests
            .as_ref()
            .is_some_and(|source| source.restarts_each_stage())
        {
            measured_from.set(next_id.load(Ordering::Relaxed));
        }
        if pause && !plan.interval.is_zero() {
            tokio::select! {
                () = tokio::time::sleep(plan.interval) => {}
                () = control.issuing_ended() => break,
            }
        }
        if matches!(
            planned.stage.plan,
            StagePlan::Trace(_) | StagePlan::Sessions(_)
        ) != matches!(plan.requests, Requests::Trace)
        {
            return Err(EngineError::TraceMismatch);
        }
        let index = u32::try_from(times.len()).unwrap_or(u32::MAX);
        sink.progress
            .stage
            .store(u64::from(index), Ordering::Relaxed);
        let stage_control = control.child();
        // The stage's requests wait on a level of their own below the stage's: a deadline ends them there, while
        // the stage's level keeps the reason its error limits stopped it for.
        let requests_control = stage_control.child();
        let kept: Option<Kept> = planned.keep_records.then(Kept::default);
        let levels = StageLevels {
            stage: stage_control.clone(),
            requests: requests_control.clone(),
            probe: planned.probe,
        };
        let stage_context = context(
            own.unwrap_or_else(|| plan.requests.clone()),
            index,
            levels,
            planned.stage.errors.clone(),
            kept.clone(),
        );
        // The stage's origin: its schedule's offsets count from here, and so do its times.
        let start = Instant::now();
        let mut start_ns = clock.ns_of(start);
        let began_ns = *work_began.get_or_insert(start_ns);
        let mut finished_sessions = Vec::new();
        let deadline = planned.deadline.map(|after| {
            let due = tokio::time::Instant::from_std(start + after);
            let requests = requests_control.clone();
            tokio::spawn(async move {
                tokio::time::sleep_until(due).await;
                requests.stop_now(DEADLINE);
            })
        });
        match &planned.stage.plan {
            StagePlan::Open {
                send_at,
                max_concurrency,
            } => run_open(stage_context, start, send_at, *max_concurrency).await,
            StagePlan::Paced(paced) => {
                // With a warm-up phase, the stage's figures start with the profiling phase.
                if let Some(profiling) = run_paced(stage_context, start, paced).await {
                    start_ns = profiling;
                }
            }
            StagePlan::Closed {
                concurrency,
                total,
                duration,
                rampup,
            } => {
                let closed = ClosedLoop {
                    concurrency: *concurrency,
                    total: *total,
                    duration: *duration,
                    rampup: *rampup,
                };
                run_closed(stage_context, start, closed).await;
            }
            StagePlan::Trace(replay) => {
                trace::run_trace(stage_context, start, Arc::clone(replay)).await;
            }
            StagePlan::Sessions(replay) => {
                finished_sessions =
                    sessions::run_sessions(stage_context, start, Arc::clone(replay)).await;
            }
            StagePlan::LmBench(stage) => {
                // The stage's figures start with its measured invocation, after its warm-ups.
                if let Some(measured) = lmbench::run_lmbench(stage_context, Arc::clone(stage)).await
                {
                    start_ns = measured;
                }
            }
            StagePlan::Lockstep(lockstep) => run_lockstep(stage_context, start, lockstep).await,
        }
        if let Some(deadline) = deadline {
            deadline.abort();
        }
        let stage_times = StageTimes {
            began_ns,
            start_ns,
            end_ns: clock.now_ns(),
            stopped: stage_control.reason().or_else(|| control.reason()),
            sessions: finished_sessions,
        };
        if !planned.probe {
            times.push(stage_times.clone());
            work_began = None;
        }
        pause = !planned.probe;
        finished = Some(FinishedStage {
            index,
            probe: planned.probe,
            times: stage_times,
            records: kept.map(Kept::take).unwrap_or_default(),
        });
    }
    Ok(times)
}

/// A deadline stops only the level a stage's requests wait on: the stage's cancelled requests say it came.
const DEADLINE: StopReason = StopReason::Deadline;

/// The control levels of one stage: the stage's own (its error limits stop it, and its reason is the stage's), and
/// the one its requests wait on, below it (a deadline stops that one alone).
struct StageLevels {
    stage: Control,
    requests: Control,
    probe: bool,
}

/// A stage's records kept for its planner, copied as they finish. A capacity search or a sweep judges each of
/// its stages from them, so they are kept whatever their size; one stage at a time, dropped once the planner has
/// seen them, with a warning when they alone outgrow the records memory budget.
#[derive(Clone, Default)]
struct Kept(Arc<Mutex<KeptRecords>>);

#[derive(Default)]
struct KeptRecords {
    records: Vec<RequestRecord>,
    bytes: u64,
    warned: bool,
}

impl Kept {
    fn push(&self, record: &RequestRecord, budget_bytes: u64) {
        let mut kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        kept.bytes = kept.bytes.saturating_add(record.memory_bytes());
        if kept.bytes > budget_bytes && !kept.warned {
            kept.warned = true;
            tracing::warn!(
                stage = record.stage,
                budget = %llmbench_workload::limits::bytes(budget_bytes),
                "this stage's records, kept in memory for the planner to judge the stage (capacity search, \
                 sweep), outgrow the records memory budget (--records-memory); shorter points keep them smaller"
            );
        }
        kept.records.push(record.clone());
    }

    fn take(self) -> Vec<RequestRecord> {
        std::mem::take(
            &mut self
                .0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .records,
        )
    }
}

#[derive(Clone)]
struct StageContext {
    target: Arc<Target>,
    requests: Requests,
    clock: Clock,
    sink: RecordSink,
    next_id: Arc<AtomicU64>,
    /// The first id of a measured request: request `id` sends body `id - measured_from` (cycling).
    measured_from: u64,
    stage: u32,
    /// What the stage's requests wait on: stopped with the stage, and by its deadline …
    control: Control,
    /// … the stage's own level (its error limits stop it) …
    limits: Control,
    /// … and the run's (an error limit with `stopping_scope: all` stops it).
    run: Control,
    tally: Arc<Mutex<Tally>>,
    errors: ErrorLimits,
    /// A probe's records are flagged `warmup`.
    probe: bool,
    /// Where the stage's records are copied for its planner, if it asked for them.
    kept: Option<Kept>,
    /// The run's streak of connection-level failures, which stops it when the server is gone.
    connect_failures: Arc<unreachable::ConnectFailures>,
    /// guidellm's over-saturation detector, when the stage has one; timed from the stage's start.
    saturation: Option<Arc<saturation::SaturationWatch>>,
}

impl StageContext {
    /// Sends `request`, scheduled at `scheduled_ns`, under the stage's next id and returns its record unrecorded
    /// (the caller may tag it first; `warmup` says whether it will flag it a warm-up, for the sent log).
    async fn send(
        &self,
        request: &PreparedRequest,
        scheduled_ns: u64,
        warmup: bool,
    ) -> RequestRecord {
        let issue = Issue {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            stage: self.stage,
            scheduled_ns,
            abandon_after: None,
        };
        self.went_out(&issue, request, warmup);
        self.execute(request, issue, self.control.in_flight(), None)
            .await
    }

    /// Sends `request` (already counted as gone out), telling the stage's over-saturation detector, if it has one,
    /// of its first token as it arrives, and releasing `prefill` (an AIPerf prefill slot) there.
    async fn execute(
        &self,
        request: &PreparedRequest,
        issue: Issue,
        cancel: &control::Flag,
        prefill: Option<OwnedSemaphorePermit>,
    ) -> RequestRecord {
        if self.saturation.is_none() && prefill.is_none() {
            return client::execute(&self.target, request, issue, &self.clock, cancel).await;
        }
        let mut watch = FirstToken {
            saturation: self.saturation.as_deref(),
            prefill,
        };
        client::execute_watched(
            &self.target,
            request,
            issue,
            &self.clock,
            cancel,
            &mut watch,
        )
        .await
    }

    /// Sends one request scheduled at `scheduled_ns` and records it. Returns whether it failed before the server
    /// answered anything (a closed loop backs off after such a failure).
    async fn issue(&self, scheduled_ns: u64) -> bool {
        self.issue_credit(scheduled_ns, Credit::default()).await
    }

    /// [`issue`](Self::issue) for an AIPerf credit: abandoned or holding a prefill slot as `credit` says.
    async fn issue_credit(&self, scheduled_ns: u64, credit: Credit) -> bool {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let issue = Issue {
            id,
            stage: self.stage,
            scheduled_ns,
            abandon_after: credit.abandon_after,
        };
        let cancel = self.control.in_flight();
        match &self.requests {
            Requests::Fixed(requests) => {
                let position = id.saturating_sub(self.measured_from);
                let request = &requests[(position % requests.len() as u64) as usize];
                self.went_out(&issue, request, false);
                let record = self.execute(request, issue, cancel, credit.prefill).await;
                self.record(record)
            }
            // Only a trace's own stages send its requests (`trace::run_trace`), and `run` refuses any other.
            Requests::Trace => false,
            Requests::Conversations(conversations) => {
                let Some(turn) = conversations.begin(id, self.stage, cancel).await else {
                    // Stopped while waiting for the session's previous round: never sent.
                    return false;
                };
                self.went_out(&issue, &turn.request, false);
                let mut record = self
                    .execute(&turn.request, issue, cancel, credit.prefill)
                    .await;
                if let Some(think) = conversations.think_time(&turn, &record) {
                    // inference-perf's tool-call latency: slept holding the session and this request's slot,
                    // and inside the request's end time as upstream measures it.
                    tokio::select! {
                        () = tokio::time::sleep(think) => {}
                        () = cancel.raised() => {}
                    }
                    record.end_ns = self.clock.now_ns();
                }
                let cancelled = conversations.finish(turn, &mut record, false, self.clock.now_ns());
                let connection_failed = self.record(record);
                for record in cancelled {
                    self.record(record);
                }
                connection_failed
            }
        }
    }

    /// Counts `request` as sent now and hands its sent entry to the writer: the last step before the client sends
    /// it, so the entry is on its way to disk before any answer can be.
    fn went_out(&self, issue: &Issue, request: &PreparedRequest, warmup: bool) {
        self.sink.went_out(|| SentEntry {
            id: issue.id,
            stage: issue.stage,
            scheduled_ns: issue.scheduled_ns,
            sent_ns: self.clock.now_ns(),
            input_tokens: request.input_tokens,
            max_tokens: request.max_tokens,
            warmup: warmup || self.probe,
        });
        if let Some(watch) = &self.saturation {
            watch.started(issue.id, self.clock.now_ns());
        }
    }

    /// Hands `record` to the writer (and a copy to the stage's planner, if it keeps them) and checks the stage's
    /// error limits and the run's connection failures with it. Returns whether it failed before the server
    /// answered anything.
    fn record(&self, mut record: RequestRecord) -> bool {
        let errored = !record.succeeded() && record.error_class() != Some(ErrorClass::Cancelled);
        let connection_failed = unreachable::is_connection_failure(&record);
        if let Some(reason) = self.connect_failures.observe(&record) {
            tracing::error!(
                %reason,
                "stopping the run: the server no longer accepts connections (--max-connect-failures); what was \
                 in flight is cancelled, every record is kept"
            );
            self.run.stop_now(reason);
        }
        record.warmup |= self.probe;
        if let Some(watch) = &self.saturation {
            watch.finished(&record);
        }
        if let Some(kept) = &self.kept {
            kept.push(&record, self.sink.budget_bytes);
        }
        if let Some(breakers) = &self.errors.breakers
            && let Some(name) = breakers.feed(&record)
            && !self.run.issuing_stopped()
        {
            // inference-perf leaves the stage (and, the breaker staying open, every later one).
            tracing::warn!(
                breaker = name,
                "stopping the run: circuit breaker \"{name}\" is open; what was in flight is cancelled, every \
                 record is kept"
            );
            self.run.stop_now(StopReason::CircuitBreakerOpen);
        }
        let warmup = record.warmup;
        self.sink.finish(record);
        if self.errors.max_errors.is_none()
            && self.errors.max_error_rate.is_none()
            && self.errors.max_global_error_rate.is_none()
            && self.errors.failed_request_threshold.is_none()
        {
            // No limits: no shared tally to lock for every request.
            return connection_failed;
        }
        let tripped = self
            .tally
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .observe(errored, warmup, &self.errors);
        if let Some((reason, scope)) = tripped {
            self.limits.stop_now(reason);
            if scope == StopScope::Run {
                self.run.stop_now(reason);
            }
        }
        connection_failed
    }
}

/// What a stream's first token ends: the stage's over-saturation detector is told of it, and an AIPerf prefill
/// slot is released (`on_first_token`; a request that returns without one releases it as it returns).
struct FirstToken<'a> {
    saturation: Option<&'a saturation::SaturationWatch>,
    prefill: Option<OwnedSemaphorePermit>,
}

impl client::Watch for FirstToken<'_> {
    fn first_token(&mut self, at_ns: u64, sent_ns: u64) {
        if let Some(watch) = self.saturation {
            watch.first_token(at_ns, sent_ns);
        }
        self.prefill = None;
    }
}

/// What AIPerf's credit issuer attaches to one credit (`Credit.cancel_after_ns`, its prefill slot).
#[derive(Default)]
struct Credit {
    abandon_after: Option<Duration>,
    prefill: Option<OwnedSemaphorePermit>,
}

/// A stage's finished requests, as guidellm's error constraints count them.
#[derive(Debug, Default)]
struct Tally {
    processed: u64,
    errored: u64,
    /// Whether each of the last `window` finished requests errored.
    window: VecDeque<bool>,
    /// Finished and errored requests that are not warm-ups (AIPerf counts its profiling phase's records only).
    measured: u64,
    measured_errored: u64,
}

impl Tally {
    /// Counts one finished request; returns the limit it made trip, if any (checked in guidellm's order, then
    /// AIPerf's threshold).
    fn observe(
        &mut self,
        errored: bool,
        warmup: bool,
        limits: &ErrorLimits,
    ) -> Option<(StopReason, StopScope)> {
        if !warmup {
            self.measured += 1;
            self.measured_errored += u64::from(errored);
        }
        self.processed += 1;
        self.errored += u64::from(errored);
        if let Some(limit) = &limits.max_error_rate {
            self.window.push_back(errored);
            while self.window.len() as u64 > limit.limit.window {
                self.window.pop_front();
            }
        }
        if let Some(limit) = &limits.max_errors
            && self.errored >= limit.limit
        {
            return Some((StopReason::MaxErrors, limit.scope));
        }
        if let Some(limit) = &limits.max_error_rate {
            let in_window = self.window.len() as f64;
            let rate = self.window.iter().filter(|e| **e).count() as f64 / in_window.max(1.0);
            if self.processed >= limit.limit.window && rate >= limit.limit.rate {
                return Some((StopReason::MaxErrorRate, limit.scope));
            }
        }
        if let Some(limit) = &limits.max_global_error_rate {
            let rate = self.errored as f64 / self.processed as f64;
            if self.processed >= limit.limit.minimum && rate >= limit.limit.rate {
                return Some((StopReason::MaxGlobalErrorRate, limit.scope));
            }
        }
        if let Some(threshold) = &limits.failed_request_threshold
            && !warmup
        {
            // `_maybe_trigger_failed_request_abort`: armed once `grace` records finished, then strictly above.
            let ratio = self.measured_errored as f64 / self.measured as f64;
            if self.measured >= threshold.grace && ratio > threshold.ratio {
                tracing::warn!(
                    "--failed-request-threshold exceeded: {}/{} = {ratio:.3} > {:.3} (grace floor {}); stopping \
                     the run, what is in flight is cancelled",
                    self.measured_errored,
                    self.measured,
                    threshold.ratio,
                    threshold.grace
                );
                return Some((StopReason::FailedRequestThreshold, StopScope::Run));
            }
        }
        None
    }
}

async fn run_warmup(context: StageContext, warmup: Warmup) {
    let Requests::Fixed(requests) = &context.requests else {
        return;
    };
    let slots = Arc::new(Semaphore::new(
        warmup.max_concurrency.unwrap_or(usize::MAX >> 4).max(1),
    ));
    let mut in_flight = JoinSet::new();
    for _ in 0..warmup.count {
        if context.control.issuing_stopped() {
            break;
        }
        let context = context.clone();
        let slots = Arc::clone(&slots);
        let first = warmup
            .request
            .clone()
            .unwrap_or_else(|| requests[0].clone());
        in_flight.spawn(async move {
            let _slot = slots.acquire_owned().await.ok();
            let mut record = context.send(&first, context.clock.now_ns(), true).await;
            record.warmup = true;
            context.record(record);
        });
    }
    while in_flight.join_next().await.is_some() {}
}

/// The priming pass: each of `requests` once, [`PRIME_CONCURRENCY`] at a time, recorded as warm-up.
async fn run_prime(context: StageContext, requests: Arc<[PreparedRequest]>) {
    let slots = Arc::new(Semaphore::new(PRIME_CONCURRENCY));
    let mut in_flight = JoinSet::new();
    for index in 0..requests.len() {
        if context.control.issuing_stopped() {
            break;
        }
        let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
            break;
        };
        let context = context.clone();
        let requests = Arc::clone(&requests);
        in_flight.spawn(async move {
            let _slot = slot;
            let mut record = context
                .send(&requests[index], context.clock.now_ns(), true)
                .await;
            record.warmup = true;
            context.record(record);
        });
    }
    while in_flight.join_next().await.is_some() {}
}

async fn run_open(
    context: StageContext,
    stage_start: Instant,
    send_at: &[Duration],
    max_concurrency: Option<usize>,
) {
    let slots = max_concurrency.map(|n| Arc::new(Semaphore::new(n.max(1))));
    let mut in_flight = JoinSet::new();
    for offset in send_at {
        let due = stage_start + *offset;
        // tokio's wheel alone would send up to a millisecond late: one tick per request at 1 000 req/s.
        tokio::select! {
            biased;
            () = context.control.issuing_ended() => break,
            () = llmbench_model::timer::sleep_until(due) => {}
        }
        let scheduled_ns = context.clock.ns_of(due);
        let context = context.clone();
        let slots = slots.clone();
        in_flight.spawn(async move {
            // Held for the request's lifetime; the semaphore is never closed, so acquiring cannot fail.
            let _slot = match &slots {
                Some(s) => tokio::select! {
                    slot = Arc::clone(s).acquire_owned() => slot.ok(),
                    // Stopped while waiting for a slot: the request was never sent.
                    () = context.control.issuing_ended() => return,
                },
                None => None,
            };
            context.issue(scheduled_ns).await;
        });
        // Reap finished tasks as we go so a long stage does not hold every handle.
        while in_flight.try_join_next().is_some() {}
    }
    while in_flight.join_next().await.is_some() {}
}

/// Runs AIPerf's warm-up phase (when there is one) and then its profiling phase; returns when the profiling
/// phase started if a warm-up came first (the stage's figures start there).
async fn run_paced(context: StageContext, start: Instant, paced: &Paced) -> Option<u64> {
    let credits = &paced.credits;
    let session_target = paced.max_concurrency.map(|n| n.max(1) as u32);
    let mut start = start;
    let mut profiling_start = None;
    if paced.warmup > 0 {
        // AIPerf's warm-up phase: its requests are sent like the profiling phase's, and the profiling phase
        // starts once every one of them has returned. Flagged warm-up, they stay out of every figure.
        let mut warmup = context.clone();
        warmup.probe = true;
        let mut in_flight = JoinSet::new();
        let prefill = credits
            .warmup_prefill_concurrency
            .or(credits.prefill_concurrency);
        let (slots, prefill, _ramping) =
            phase_slots(start, session_target, prefill, credits.warmup_ramps);
        let phase = Phase {
            start,
            total: Some(paced.warmup),
            sending_ends: None,
            sessions: None,
            prefill,
            // `next_cancellation_delay_ns`: never in the warm-up phase.
            cancellation: None,
            rate_ramp: credits.warmup_ramps.rate,
            // The warm-up phase takes no series (`_converter_warmup` routes none to it).
            rate_series: None,
        };
        send_phase(&warmup, phase, paced, slots.as_ref(), &mut in_flight).await;
        while in_flight.join_next().await.is_some() {}
        if context.control.issuing_stopped() {
            return None;
        }
        start = Instant::now();
        profiling_start = Some(context.clock.ns_of(start));
    }
    let mut in_flight = JoinSet::new();
    let (slots, prefill, ramping) = phase_slots(
        start,
        session_target,
        credits.prefill_concurrency,
        credits.ramps,
    );
    let phase = Phase {
        start,
        total: paced.total,
        sending_ends: paced.duration.map(|d| start + d),
        sessions: paced.sessions,
        prefill,
        cancellation: credits.cancellation,
        rate_ramp: credits.ramps.rate,
        rate_series: credits.rate_series.clone(),
    };
    send_phase(&context, phase, paced, slots.as_ref(), &mut in_flight).await;
    // The sending is over: the slots need not grow any more.
    drop(ramping);
    if let (Some(duration), Some(grace)) = (paced.duration, paced.grace) {
        let cut = start + duration + grace;
        let drained = async { while in_flight.join_next().await.is_some() {} };
        tokio::select! {
            () = drained => return profiling_start,
            () = llmbench_model::timer::sleep_until(cut) => context.control.stop_now(DEADLINE),
        }
    }
    while in_flight.join_next().await.is_some() {}
    profiling_start
}

/// One phase's session and prefill slots (AIPerf's concurrency manager keeps each phase's apart), and the tasks
/// that ramp them (dropping them stops the ramps): a ramped set starts with one slot and gains one at each of
/// [`aiperf_ramp_steps`](llmbench_workload::workload::aiperf_ramp_steps)'s times from `start`.
fn phase_slots(
    start: Instant,
    sessions: Option<u32>,
    prefill: Option<u32>,
    ramps: llmbench_workload::workload::AiperfRamps,
) -> (Option<Arc<Semaphore>>, Option<Arc<Semaphore>>, JoinSet<()>) {
    let mut ramping = JoinSet::new();
    let mut slots = |target: Option<u32>, ramp: Option<Duration>| {
        let target = target?.max(1);
        let Some(duration) = ramp else {
            return Some(Arc::new(Semaphore::new(target as usize)));
        };
        let semaphore = Arc::new(Semaphore::new(1));
        let grown = Arc::clone(&semaphore);
        ramping.spawn(async move {
            for at in llmbench_workload::workload::aiperf_ramp_steps(target, duration) {
                llmbench_model::timer::sleep_until(start + at).await;
                grown.add_permits(1);
            }
        });
        Some(semaphore)
    };
    let session_slots = slots(sessions, ramps.session);
    let prefill_slots = slots(prefill, ramps.prefill);
    (session_slots, prefill_slots, ramping)
}

/// One phase of AIPerf's rate loop: its start, and when it stops sending.
struct Phase {
    start: Instant,
    total: Option<u64>,
    sending_ends: Option<Instant>,
    /// AIPerf's session count (multi-turn sessions only).
    sessions: Option<u64>,
    /// The phase's prefill slots (`--prefill-concurrency`).
    prefill: Option<Arc<Semaphore>>,
    /// Which of the phase's credits are abandoned, and when.
    cancellation: Option<llmbench_workload::workload::AiperfCancellation>,
    /// The phase's request rate ramp.
    rate_ramp: Option<Duration>,
    /// The phase's request-rate series.
    rate_series: Option<llmbench_workload::workload::AiperfRateSeries>,
}

/// Resolves at `end`, or never without one (a phase's end of sending).
async fn until(end: Option<Instant>) {
    match end {
        Some(end) => llmbench_model::timer::sleep_until(end).await,
        None => std::future::pending().await,
    }
}

/// How far behind its schedule AIPerf's rate loop catches up before it re-anchors the next target at now
/// (`Environment.TIMING.MAX_CATCHUP_SECONDS`, 10 ms by default).
const AIPERF_MAX_CATCHUP: Duration = Duration::from_millis(10);

/// The ends of AIPerf's rate intervals for one phase, on an absolute schedule: the first one interval after the
/// phase starts; a loop more than [`AIPERF_MAX_CATCHUP`] behind re-anchors the next target at now.
struct RateTicks {
    intervals: llmbench_workload::workload::AiperfIntervals,
    target: Instant,
    /// What changes the rate while the phase runs, in the order AIPerf starts them: its rate ramp, then its
    /// request-rate series.
    controls: Vec<RateControl>,
}

/// One of AIPerf's rate controllers. A ramp (`Ramper._run_continuous`, linear) is the two-point series from its
/// start rate to the phase's rate over its duration; a series (`RateSeriesController._run`) starts once the ramp
/// is over. Each sets its rate at its start, then every `AIPERF_RATE_RAMP_UPDATE` after its last update, and
/// stops once past its last point, at that point's rate.
struct RateControl {
    series: llmbench_workload::workload::AiperfRateSeries,
    start: Instant,
    next_update: Instant,
}

impl RateTicks {
    /// A new generator of `paced`'s intervals (AIPerf builds one for each phase), starting at `start`, its rate
    /// ramped over `rate_ramp` and then driven by `series` when there are.
    fn new(
        paced: &Paced,
        start: Instant,
        rate_ramp: Option<Duration>,
        series: Option<llmbench_workload::workload::AiperfRateSeries>,
    ) -> RateTicks {
        use llmbench_workload::workload::{AIPERF_RATE_RAMP_UPDATE, AiperfRateSeries};
        let mut intervals = paced.pace.intervals();
        let mut controls = Vec::new();
        let mut series_start = start;
        if let (Some(duration), Some(to)) = (rate_ramp.filter(|d| !d.is_zero()), intervals.rate()) {
            // `_create_rampers`: one linear increment of the rate, not a fixed 1 req/s.
            let from = to * (AIPERF_RATE_RAMP_UPDATE.as_secs_f64() / duration.as_secs_f64());
            controls.push(RateControl {
                series: AiperfRateSeries {
                    points: vec![(0.0, from), (duration.as_secs_f64(), to)].into(),
                },
                start,
                next_update: start,
            });
            series_start = start + duration;
        }
        if let (Some(series), Some(_)) = (series, intervals.rate()) {
            controls.push(RateControl {
                series,
                start: series_start,
                next_update: series_start,
            });
        }
        // The controllers' tasks run before the rate loop's: one starting with the phase sets its first rate
        // before the first interval is drawn ...
        let mut changed = false;
        if let Some(first) = controls.iter_mut().find(|c| c.start == start) {
            let rate = first.series.value_at(0.0);
            changed = intervals.rate() != Some(rate);
            intervals.set_rate(rate);
            first.next_update = start + AIPERF_RATE_RAMP_UPDATE;
        }
        let mut target = start + intervals.next().unwrap_or_default();
        if changed {
            // ... and that change (`set_request_rate` wakes the loop only for a changed rate) finds the loop's
            // first target set, which it reschedules (`_reschedule_for_rate_update`) with a fresh draw.
            target = target.min(Instant::now() + intervals.next().unwrap_or_default());
        }
        RateTicks {
            intervals,
            target,
            controls,
        }
    }

    /// When the next rate change is due.
    fn next_control(&self) -> Option<Instant> {
        self.controls.iter().map(|c| c.next_update).min()
    }

    /// Applies the rate changes that are due, in the controllers' order: each one's value now, or its last
    /// point's rate (and its end) once past it.
    fn apply_controls(&mut self) {
        use llmbench_workload::workload::AIPERF_RATE_RAMP_UPDATE;
        let now = Instant::now();
        let mut rates = Vec::new();
        self.controls.retain_mut(|control| {
            if control.next_update > now {
                return true;
            }
            let elapsed = now.saturating_duration_since(control.start).as_secs_f64();
            rates.push(control.series.value_at(elapsed));
            control.next_update = now + AIPERF_RATE_RAMP_UPDATE;
            elapsed < control.series.end_s()
        });
        for rate in rates {
            self.set_rate(rate, now);
        }
    }

    /// `set_request_rate`: a changed rate reschedules the next target to the earlier of it and now plus a fresh
    /// interval at the new rate; an unchanged one wakes nothing.
    fn set_rate(&mut self, rate: f64, now: Instant) {
        if self.intervals.rate() != Some(rate) && rate > 0.0 {
            self.intervals.set_rate(rate);
            self.target = self
                .target
                .min(now + self.intervals.next().unwrap_or_default());
        }
    }

    /// Waits for the next interval's end and returns it, the following target already set (so a slow send does
    /// not move the schedule); `None` once issuing ended or `sending_ends` passed. Rate changes are applied on
    /// the way, each rescheduling the target to the earlier of it and now plus a fresh interval.
    async fn next(
        &mut self,
        context: &StageContext,
        sending_ends: Option<Instant>,
    ) -> Option<Instant> {
        loop {
            let now = Instant::now();
            if self.target + AIPERF_MAX_CATCHUP < now {
                self.target = now;
            }
            let update = self.next_control();
            let wake = update.map_or(self.target, |u| u.min(self.target));
            let sending_over = until(sending_ends);
            tokio::select! {
                biased;
                () = context.control.issuing_ended() => return None,
                () = sending_over => return None,
                () = llmbench_model::timer::sleep_until(wake) => {}
            }
            if update.is_some_and(|u| u <= self.target) {
                self.apply_controls();
                continue;
            }
            let due = self.target;
            self.target += self.intervals.next().unwrap_or_default();
            return Some(due);
        }
    }

    /// Moves the next target to `now`: a send that waited for its slot (no rate) starts the schedule again.
    fn reanchor(&mut self, now: Instant) {
        self.target = now;
    }
}

/// `RequestRateStrategy.execute_phase` for one phase, with a new interval generator (AIPerf builds a strategy,
/// and so a generator, for each phase): wait for the target, move the target one interval on, then send if a
/// slot is free — an interval without one sends nothing (`try_issue_credit` → `None`). Without a rate (intervals
/// of 0) a send waits for its slot instead, which is what AIPerf's polling loop amounts to.
async fn send_phase(
    context: &StageContext,
    phase: Phase,
    paced: &Paced,
    slots: Option<&Arc<Semaphore>>,
    in_flight: &mut JoinSet<()>,
) {
    if let Requests::Conversations(conversations) = &context.requests
        && conversations.is_aiperf()
    {
        if let llmbench_workload::workload::AiperfPace::UserCentric { rate, users } = paced.pace {
            let shape = aiperf_users::UserCentric { rate, users };
            return aiperf_users::send_phase(context, conversations, phase, shape, in_flight).await;
        }
        return aiperf_sessions::send_phase(context, conversations, phase, paced, slots, in_flight)
            .await;
    }
    if let llmbench_workload::workload::AiperfPace::UserCentric { .. } = paced.pace {
        // The profile parser allows it only over multi-turn conversations: never a flood of single prompts.
        tracing::error!(
            "AIPerf's user-centric phase needs multi-turn conversations; nothing was sent"
        );
        return;
    }
    let Phase {
        start,
        total,
        sending_ends,
        sessions: _,
        prefill,
        cancellation,
        rate_ramp,
        rate_series,
    } = phase;
    if total == Some(0) {
        return;
    }
    let burst = paced.pace == llmbench_workload::workload::AiperfPace::Burst;
    let mut ticks = RateTicks::new(paced, start, rate_ramp, rate_series);
    let mut cancellations = cancellation.map(|c| c.decisions());
    let mut sent: u64 = 0;
    loop {
        let Some(due) = ticks.next(context, sending_ends).await else {
            break;
        };
        // The session slot, then the prefill slot (`try_issue_credit`).
        let mut scheduled = due;
        let mut held = [None, None];
        for (hold, semaphore) in held.iter_mut().zip([slots, prefill.as_ref()]) {
            let Some(semaphore) = semaphore else {
                continue;
            };
            *hold = match Arc::clone(semaphore).try_acquire_owned() {
                Ok(slot) => Some(slot),
                // A rate's interval that finds no free slot is skipped (a session slot taken is given back).
                Err(_) if !burst => break,
                Err(_) => {
                    let slot = tokio::select! {
                        biased;
                        () = context.control.issuing_ended() => None,
                        slot = Arc::clone(semaphore).acquire_owned() => slot.ok(),
                    };
                    let now = Instant::now();
                    if slot.is_none() || sending_ends.is_some_and(|end| now >= end) {
                        return;
                    }
                    ticks.reanchor(now);
                    scheduled = now;
                    slot
                }
            };
        }
        let [slot, prefill_slot] = held;
        if (slots.is_some() && slot.is_none()) || (prefill.is_some() && prefill_slot.is_none()) {
            continue;
        }
        let credit = Credit {
            abandon_after: cancellations.as_mut().and_then(|c| c.next_credit()),
            prefill: prefill_slot,
        };
        let scheduled_ns = context.clock.ns_of(scheduled);
        let request_context = context.clone();
        in_flight.spawn(async move {
            let _slot = slot;
            request_context.issue_credit(scheduled_ns, credit).await;
        });
        while in_flight.try_join_next().is_some() {}
        sent += 1;
        if total.is_some_and(|total| sent >= total) {
            break;
        }
    }
}

/// A closed loop's shape ([`StagePlan::Closed`]).
struct ClosedLoop {
    concurrency: usize,
    total: Option<u64>,
    duration: Option<Duration>,
    rampup: Duration,
}

async fn run_closed(context: StageContext, start: Instant, closed: ClosedLoop) {
    let ClosedLoop {
        concurrency,
        total,
        duration,
        rampup,
    } = closed;
    let deadline = duration.map(|d| start + d);
    let issued = Arc::new(AtomicU64::new(0));
    let mut workers = JoinSet::new();
    let concurrency = concurrency.max(1);
    for worker in 0..concurrency {
        let context = context.clone();
        let issued = Arc::clone(&issued);
        let begin = start + rampup.mul_f64(worker as f64 / concurrency as f64);
        workers.spawn(async move {
            tokio::select! {
                () = tokio::time::sleep_until(begin.into()) => {}
                () = context.control.issuing_ended() => return,
            }
            let mut backoff = unreachable::Backoff::default();
            loop {
                if context.control.issuing_stopped()
                    || deadline.is_some_and(|d| Instant::now() >= d)
                {
                    break;
                }
                if let Some(total) = total
                    && issued.fetch_add(1, Ordering::Relaxed) >= total
                {
                    break;
                }
                // A closed loop sends as soon as a slot frees: the intended time is now.
                let scheduled_ns = context.clock.now_ns();
                let connection_failed = context.issue(scheduled_ns).await;
                // Not at once after a connection failure: a dead server must not become a storm of records.
                if let Some(wait) = backoff.after(connection_failed) {
                    tokio::select! {
                        () = tokio::time::sleep(wait) => {}
                        () = context.control.issuing_ended() => break,
                    }
                }
            }
        });
    }
    while workers.join_next().await.is_some() {}
}

/// Issues `lockstep`'s queries one after the other: every request of a query shares its scheduled time (when it
/// was issued, as LoadGen stamps it), and the next query waits for the slowest of them.
async fn run_lockstep(context: StageContext, start: Instant, lockstep: &Lockstep) {
    let mut issued = 0u64;
    let mut backoff = unreachable::Backoff::default();
    loop {
        if context.control.issuing_stopped() {
            break;
        }
        let now = Instant::now();
        let scheduled_ns = context.clock.ns_of(now);
        let mut query = JoinSet::new();
        for _ in 0..lockstep.group.max(1) {
            let context = context.clone();
            query.spawn(async move { context.issue(scheduled_ns).await });
        }
        issued += 1;
        let ends = lockstep.ends_after(issued, now.duration_since(start));
        let mut connection_failed = false;
        while let Some(joined) = query.join_next().await {
            connection_failed |= joined.unwrap_or(false);
        }
        if ends {
            break;
        }
        // The next query follows the last at once, as a closed loop's next request does: not after a failure to
        // connect.
        if let Some(wait) = backoff.after(connection_failed) {
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = context.control.issuing_ended() => break,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lockstep_ends_as_loadgen_multistream_issue_loop_does() {
        let plan = Lockstep {
            group: 8,
            queries: 1000,
            min_queries: 662,
            min_duration: Duration::from_secs(600),
            max_queries: 0,
            max_duration: None,
        };
        // Both minimums are needed for the natural end.
        assert!(!plan.ends_after(662, Duration::from_secs(599)));
        assert!(!plan.ends_after(661, Duration::from_secs(600)));
        assert!(plan.ends_after(662, Duration::from_secs(600)));
        // The generated queries run out.
        assert!(plan.ends_after(1000, Duration::from_secs(1)));
        let capped = Lockstep {
            max_queries: 10,
            max_duration: Some(Duration::from_secs(5)),
            ..plan
        };
        assert!(capped.ends_after(10, Duration::ZERO));
        // Past max_duration, not at it (`duration > settings.max_duration`).
        assert!(!capped.ends_after(3, Duration::from_secs(5)));
        assert!(capped.ends_after(3, Duration::from_millis(5001)));
    }

    fn limits(
        max_errors: Option<u64>,
        rate: Option<(f64, u64)>,
        global: Option<(f64, u64)>,
    ) -> ErrorLimits {
        ErrorLimits {
            max_errors: max_errors.map(|limit| ErrorLimit {
                limit,
                scope: StopScope::Stage,
            }),
            max_error_rate: rate.map(|(rate, window)| ErrorLimit {
                limit: WindowedErrorRate { rate, window },
                scope: StopScope::Run,
            }),
            max_global_error_rate: global.map(|(rate, minimum)| ErrorLimit {
                limit: GlobalErrorRate { rate, minimum },
                scope: StopScope::Stage,
            }),
            breakers: None,
            over_saturation: None,
            failed_request_threshold: None,
        }
    }

    #[test]
    fn aiperfs_failed_request_threshold_is_armed_at_its_grace_floor_and_strictly_above() {
        let limits = ErrorLimits {
            failed_request_threshold: Some(FailedRequestThreshold {
                ratio: 0.5,
                grace: 10,
            }),
            ..ErrorLimits::default()
        };
        // Errors first: 9 of 9 is not checked (9 < the floor of 10); the 10th record arms it and 9/10 > 0.5.
        let mut pattern = vec![true; 9];
        pattern.push(false);
        assert_eq!(
            trips_at(&limits, &pattern),
            Some((10, StopReason::FailedRequestThreshold))
        );
        // Exactly half is not above half: good, bad, good, … gives 5 of 10, 5 of 11, 6 of 12 — never above; a
        // 13th that fails, 7 of 13, trips.
        let mut half: Vec<bool> = (0..12).map(|i| i % 2 == 1).collect();
        assert_eq!(trips_at(&limits, &half), None);
        half.push(true);
        assert_eq!(
            trips_at(&limits, &half),
            Some((13, StopReason::FailedRequestThreshold))
        );
        // A ratio of 0: any error past the floor.
        let zero = ErrorLimits {
            failed_request_threshold: Some(FailedRequestThreshold {
                ratio: 0.0,
                grace: 10,
            }),
            ..ErrorLimits::default()
        };
        let mut late = vec![false; 11];
        late.push(true);
        assert_eq!(
            trips_at(&zero, &late),
            Some((12, StopReason::FailedRequestThreshold))
        );
        // Warm-ups are not counted: ten failed warm-ups, then ten good requests, never trip.
        let mut tally = Tally::default();
        for _ in 0..10 {
            assert_eq!(tally.observe(true, true, &limits), None);
        }
        for _ in 0..10 {
            assert_eq!(tally.observe(false, false, &limits), None);
        }
    }

    /// The index (1-based) of the request that trips, feeding `pattern` (true = errored).
    fn trips_at(limits: &ErrorLimits, pattern: &[bool]) -> Option<(usize, StopReason)> {
        let mut tally = Tally::default();
        pattern.iter().enumerate().find_map(|(i, errored)| {
            tally
                .observe(*errored, false, limits)
                .map(|(r, _)| (i + 1, r))
        })
    }

    #[test]
    fn max_errors_trips_on_the_errored_request_that_reaches_the_count() {
        let l = limits(Some(3), None, None);
        // ok, err, ok, err, err → the third error is the 5th request.
        assert_eq!(
            trips_at(&l, &[false, true, false, true, true, true]),
            Some((5, StopReason::MaxErrors))
        );
        assert_eq!(trips_at(&l, &[true, true, false, false]), None);
    }

    #[test]
    fn max_error_rate_waits_for_a_full_window_then_uses_only_the_window() {
        // window 4, rate 0.5: three errors in the first three requests do not count before 4 are processed.
        let l = limits(None, Some((0.5, 4)), None);
        assert_eq!(
            trips_at(&l, &[true, true, true, false]),
            Some((4, StopReason::MaxErrorRate))
        );
        // Errors early, then successes: the window slides past them.
        assert_eq!(
            trips_at(&l, &[true, false, false, false, false, true, false]),
            None
        );
        // Exactly at the rate counts (guidellm: error_rate >= max).
        assert_eq!(
            trips_at(&l, &[false, false, true, true]),
            Some((4, StopReason::MaxErrorRate))
        );
    }

    #[test]
    fn max_global_error_rate_applies_after_its_minimum_over_the_whole_stage() {
        let l = limits(None, None, Some((0.25, 8)));
        // 2 errors in the first 2: 100 %, but only 2 of the minimum 8 processed.
        let mut pattern = vec![true, true];
        pattern.extend([false; 5]);
        // After 7: 2/7 ≈ 0.29 ≥ 0.25 but 7 < 8; the 8th (ok) makes 2/8 = 0.25: trips.
        pattern.push(false);
        assert_eq!(
            trips_at(&l, &pattern),
            Some((8, StopReason::MaxGlobalErrorRate))
        );
    }

    /// A successful record with only its id set apart.
    fn record(id: u64) -> RequestRecord {
        RequestRecord::builder(id)
            .end(1)
            .input_tokens(1)
            .ok()
            .build()
    }

    /// The ids an observer saw, in the order it saw them.
    #[derive(Clone, Default)]
    struct Seen(Arc<Mutex<Vec<u64>>>);

    impl ObserveRecords for Seen {
        fn observe(&mut self, batch: &[RequestRecord]) {
            self.0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .extend(batch.iter().map(|r| r.id));
        }
    }

    #[tokio::test]
    async fn the_observer_sees_every_written_record_once_in_finishing_order() {
        let seen = Seen::default();
        let progress = Arc::new(Progress::default());
        let (sink, writer) = record_writer_observed(
            Box::new(std::io::sink()),
            "requests.bin".to_owned(),
            Arc::clone(&progress),
            Control::default(),
            Some(Box::new(seen.clone())),
        );
        for id in [3, 1, 4, 0, 2] {
            sink.finish(record(id));
        }
        drop(sink);
        let records = writer.await.expect("the writer joins").expect("writes");
        assert_eq!(records.len(), 5);
        assert_eq!(*seen.0.lock().expect("lock"), [3, 1, 4, 0, 2]);
        assert_eq!(progress.finished.load(Ordering::Relaxed), 5);
    }

    /// A file in memory that the test can read after the writer is done.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[tokio::test]
    async fn records_past_their_budget_are_freed_and_only_written() {
        let out = Shared::default();
        let one = record(0).memory_bytes();
        let (sink, writer) = record_writer_budgeted(
            Box::new(out.clone()),
            "requests.bin".to_owned(),
            Arc::new(Progress::default()),
            Control::default(),
            None,
            RecordsBudget {
                bytes: 3 * one,
                past: PastBudget::Spill,
            },
            None,
        );
        for id in 0..10 {
            sink.finish(record(id));
        }
        drop(sink);
        let written = writer.await.expect("the writer joins").expect("writes");
        assert!(written.spilled);
        assert!(written.records.is_empty());
        assert_eq!(written.written, 10);
        let bytes = out.0.lock().expect("lock").clone();
        let mut ids = Vec::new();
        record_file::for_each_record(&bytes[..], |r| {
            ids.push(r.id);
            Ok(())
        })
        .expect("reads");
        assert_eq!(ids, (0..10).collect::<Vec<_>>());
    }

    #[tokio::test]
    async fn records_within_their_budget_or_kept_past_it_are_all_returned() {
        let one = record(0).memory_bytes();
        for budget in [
            RecordsBudget {
                bytes: 100 * one,
                past: PastBudget::Spill,
            },
            RecordsBudget {
                bytes: one,
                past: PastBudget::Keep,
            },
        ] {
            let (sink, writer) = record_writer_budgeted(
                Box::new(std::io::sink()),
                "requests.bin".to_owned(),
                Arc::new(Progress::default()),
                Control::default(),
                None,
                budget,
                None,
            );
            for id in 0..10 {
                sink.finish(record(id));
            }
            drop(sink);
            let written = writer.await.expect("the writer joins").expect("writes");
            assert!(!written.spilled);
            assert_eq!(written.records.len(), 10);
        }
    }

    #[tokio::test]
    async fn each_sent_entry_is_written_in_order_and_before_its_record() {
        let records = Shared::default();
        let sent = Shared::default();
        let mut header = Vec::new();
        llmbench_model::sent::write_header(&mut header).expect("header");
        sent.clone().write_all(&header).expect("header");
        let (sink, writer) = record_writer_budgeted(
            Box::new(records.clone()),
            "requests.bin".to_owned(),
            Arc::new(Progress::default()),
            Control::default(),
            None,
            RecordsBudget::UNLIMITED,
            Some(SentLog {
                out: Box::new(sent.clone()),
                path: "sent.bin".to_owned(),
            }),
        );
        let entry = |id: u64| SentEntry {
            id,
            stage: 1,
            scheduled_ns: 10 * id,
            sent_ns: 10 * id + 3,
            input_tokens: 32,
            max_tokens: Some(16),
            warmup: id == 0,
        };
        // Three go out; one of them (1) comes back; 0 and 2 are still in flight when the writer stops.
        for id in 0..3 {
            sink.went_out(|| entry(id));
        }
        sink.finish(record(1));
        drop(sink);
        let written = writer.await.expect("the writer joins").expect("writes");
        assert_eq!(written.written, 1);
        let bytes = sent.0.lock().expect("lock").clone();
        let mut read = Vec::new();
        let end = llmbench_model::sent::for_each_sent(&bytes[..], |e| read.push(e)).expect("reads");
        assert_eq!(read, vec![entry(0), entry(1), entry(2)]);
        assert_eq!(end.torn, 0);
        // Forty bytes a request, past the file's eight-byte header.
        assert_eq!(bytes.len(), 8 + 3 * 40);
    }

    #[tokio::test]
    async fn a_sink_without_a_sent_log_sends_no_entry_but_still_counts_the_request() {
        let progress = Arc::new(Progress::default());
        let (sink, writer) = record_writer(
            Box::new(std::io::sink()),
            "requests.bin".to_owned(),
            Arc::clone(&progress),
            Control::default(),
        );
        sink.went_out(|| unreachable!("no entry is built without a sent log"));
        drop(sink);
        writer.await.expect("the writer joins").expect("writes");
        assert_eq!(progress.issued.load(Ordering::Relaxed), 1);
    }

    /// A disk that is always full.
    struct Full;

    impl Write for Full {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::Error::other("no space left on device"))
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[tokio::test]
    async fn the_observer_never_sees_a_record_that_could_not_be_written() {
        let seen = Seen::default();
        let (sink, writer) = record_writer_observed(
            Box::new(Full),
            "requests.bin".to_owned(),
            Arc::new(Progress::default()),
            Control::default(),
            Some(Box::new(seen.clone())),
        );
        sink.finish(record(0));
        drop(sink);
        assert!(matches!(
            writer.await.expect("the writer joins"),
            Err(EngineError::WriteRecords { written: 0, .. })
        ));
        assert!(seen.0.lock().expect("lock").is_empty());
    }

    #[test]
    fn the_first_limit_that_trips_names_its_scope() {
        let l = limits(None, Some((0.5, 2)), None);
        let mut tally = Tally::default();
        tally.observe(true, false, &l);
        assert_eq!(
            tally.observe(true, false, &l),
            Some((StopReason::MaxErrorRate, StopScope::Run))
        );
    }
}
