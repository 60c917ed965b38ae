//! The simulated engine: admission through the `max-num-seqs` queue, token timing against
//! absolute deadlines, injected faults, and the metrics vLLM would record along the way.
//!
//! Each request is planned up front (lengths, fault, id: see [`Engine::plan`]); a streaming
//! response is then a small state machine polled by the connection's own task, so 10,000 slow
//! streams cost 10,000 parked futures and timer entries, not threads or extra tasks. Every token
//! event of a request but the last is the same bytes, built once and shared.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::{Bytes, BytesMut};
use futures_util::Stream;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use rand::rngs::SmallRng;
use rand::{RngExt as _, SeedableRng as _};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::time::Instant;

use super::metrics::{FinishedReason, FinishedRequest, KvHold, SimMetrics};
use super::openai::{ChunkHeader, DONE_EVENT, Endpoint, MALFORMED_EVENT, TOKEN_TEXT, Usage};
use super::prefix_cache::PrefixCache;
use super::{FailureKind, Phase, SimConfig};

/// Shared state of one simulator.
#[derive(Debug)]
pub(crate) struct Engine {
    pub config: SimConfig,
    seed: u64,
    seats: Arc<Semaphore>,
    requests: AtomicU64,
    pub metrics: SimMetrics,
    pub registry: Registry,
    pub prefix_cache: PrefixCache,
    phase: watch::Receiver<Phase>,
    /// The profiler hooks called so far, for tests (`RunningSim::profiler_calls`).
    pub profiler: Arc<std::sync::Mutex<Vec<super::ProfilerCall>>>,
}

/// What the handler validated from a request body.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RequestShape {
    pub endpoint: Endpoint,
    pub stream: bool,
    pub include_usage: bool,
    pub prompt_tokens: u32,
    pub max_tokens: u32,
    /// The shortest answer without `ignore_eos` (vLLM's `min_tokens`, at most `max_tokens`).
    pub min_tokens: u32,
    pub ignore_eos: bool,
    /// Tokens the answer reasons before it answers (`--reasoning-tokens`, chat only).
    pub reasoning_tokens: u32,
}

/// Everything decided about a request before any waiting starts.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub shape: RequestShape,
    pub id: String,
    pub created: u64,
    pub output_tokens: u32,
    pub finish: FinishedReason,
    pub fault: Option<FailureKind>,
}

impl Plan {
    fn finish_reason(&self) -> &'static str {
        match self.finish {
            FinishedReason::Length => "length",
            // Planned requests end by length or by a (simulated) EOS, never by abort.
            FinishedReason::Stop | FinishedReason::Abort => "stop",
        }
    }

    /// Mid-stream faults strike when this many tokens have been sent.
    fn fault_at(&self) -> u32 {
        self.output_tokens / 2
    }
}

/// Why a response was cut off; hyper closes the connection when a body stream yields it.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Cutoff {
    #[error("llmbench sim: injected disconnect for request {id}")]
    InjectedDisconnect { id: String },
    #[error("llmbench sim: stalled request {id} released at shutdown")]
    StallReleased { id: String },
    #[error("llmbench sim: request {id} cut off by shutdown")]
    Shutdown { id: String },
}

impl Engine {
    pub fn new(config: SimConfig, seed: u64, phase: watch::Receiver<Phase>) -> Self {
        let mut registry = Registry::default();
        // Room for every seat to hold a full context: see `metrics` on what KV-cache usage models.
        let kv_capacity =
            (config.max_num_seqs as u64).saturating_mul(u64::from(config.max_model_len));
        let metrics = SimMetrics::register(
            &mut registry,
            &config.model,
            config.max_model_len,
            kv_capacity,
        );
        let prefix_cache = PrefixCache::new(config.block_size, config.prefix_cache_blocks);
        Self {
            seats: Arc::new(Semaphore::new(config.max_num_seqs)),
            prefix_cache,
            config,
            seed,
            requests: AtomicU64::new(0),
            metrics,
            registry,
            phase,
            profiler: Arc::default(),
        }
    }

    /// Requests that have arrived so far (each one planned, whatever became of it).
    pub fn arrived(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// Draws this request's length, fault and id from an RNG seeded by `(seed, arrival number)`.
    pub fn plan(&self, shape: RequestShape) -> Plan {
        let number = self.requests.fetch_add(1, Ordering::Relaxed);
        let mut rng = SmallRng::seed_from_u64(
            self.seed ^ number.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(17),
        );
        let fault = (self.config.failure_rate > 0.0 && rng.random_bool(self.config.failure_rate))
            .then(|| {
                let kinds = &self.config.failure_kinds;
                kinds.get(rng.random_range(0..kinds.len())).copied()
            })
            .flatten();
        // The handler rejects max_tokens < 1; the floor keeps the range non-empty regardless.
        let max_tokens = shape.max_tokens.max(1);
        let output_tokens = if shape.ignore_eos {
            max_tokens
        } else {
            rng.random_range(shape.min_tokens.clamp(1, max_tokens)..=max_tokens)
        };
        let finish = if output_tokens == max_tokens {
            FinishedReason::Length
        } else {
            FinishedReason::Stop
        };
        let id = format!(
            "{}{:016x}{:016x}",
            shape.endpoint.id_prefix(),
            rng.random::<u64>(),
            rng.random::<u64>()
        );
        let created = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| since.as_secs());
        Plan {
            shape,
            id,
            created,
            output_tokens,
            finish,
            fault,
        }
    }

    fn first_token_deadline(&self, admitted: Instant) -> Instant {
        self.token_deadline(admitted, 0)
    }

    /// When token `index` (0-based) is due: `admitted + ttft + index * itl`, so timer slop never
    /// accumulates. Absurd durations saturate to a deadline a year away instead of overflowing.
    fn token_deadline(&self, admitted: Instant, index: u32) -> Instant {
        let offset = self
            .config
            .ttft
            .saturating_add(self.config.itl.saturating_mul(index));
        admitted
            .checked_add(offset)
            .unwrap_or_else(|| admitted + Duration::from_secs(365 * 24 * 3600))
    }
}

/// One request from arrival to its end; recording `abort` if dropped before it finished.
#[derive(Debug)]
pub(crate) struct Job {
    engine: Arc<Engine>,
    pub plan: Plan,
    /// The prompt's full-block hashes for the prefix cache, until admission looks them up (then dropped).
    blocks: Vec<u64>,
    /// Prompt tokens found in the prefix cache at admission; `None` while not admitted or with the cache off.
    cached_tokens: Option<u32>,
    arrival: Instant,
    phase: watch::Receiver<Phase>,
    seat: Option<Seat>,
    admitted: Instant,
    ended: bool,
}

/// A `max-num-seqs` slot, counted in `vllm:num_requests_running` while held, with the request's
/// share of the KV cache.
#[derive(Debug)]
struct Seat {
    _permit: OwnedSemaphorePermit,
    running: Gauge,
    kv: KvHold,
}

impl Drop for Seat {
    fn drop(&mut self) {
        self.running.dec();
    }
}

/// Counts a request in `vllm:num_requests_waiting` for as long as it exists.
struct Waiting<'a>(&'a SimMetrics);

impl<'a> Waiting<'a> {
    fn new(metrics: &'a SimMetrics) -> Self {
        metrics.waiting().inc();
        Self(metrics)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.waiting().dec();
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        if !self.ended {
            self.engine.metrics.aborted();
        }
    }
}

impl Job {
    /// `blocks` are the prompt's full-block hashes (empty with the prefix cache off).
    pub fn new(engine: Arc<Engine>, plan: Plan, blocks: Vec<u64>, arrival: Instant) -> Self {
        let phase = engine.phase.clone();
        Self {
            engine,
            plan,
            blocks,
            cached_tokens: None,
            arrival,
            phase,
            seat: None,
            admitted: arrival,
            ended: false,
        }
    }

    /// Waits for a seat (FIFO); `false` if the server cut the request off meanwhile. A request that finds a
    /// seat free is admitted as of its arrival, so its clock starts when it reached the socket; one that queued,
    /// when its seat freed.
    pub async fn admit(&mut self) -> bool {
        if *self.phase.borrow() == Phase::Aborting {
            return false;
        }
        let seats = Arc::clone(&self.engine.seats);
        let (permit, admitted) = match Arc::clone(&seats).try_acquire_owned() {
            Ok(permit) => (permit, self.arrival),
            Err(_) => {
                let _waiting = Waiting::new(&self.engine.metrics);
                let permit = tokio::select! {
                    biased;
                    () = aborting(&mut self.phase) => return false,
                    permit = seats.acquire_owned() => match permit {
                        Ok(permit) => permit,
                        // The semaphore is never closed; treat it like a shutdown all the same.
                        Err(_closed) => return false,
                    },
                };
                (permit, Instant::now())
            }
        };
        let running = self.engine.metrics.running().clone();
        running.inc();
        self.admitted = admitted;
        // Looked up once scheduled, as vLLM's scheduler calls `get_computed_blocks` when it admits a request.
        let prompt_tokens = self.plan.shape.prompt_tokens;
        self.cached_tokens = self.engine.prefix_cache.admit(&self.blocks, prompt_tokens);
        self.blocks = Vec::new();
        let kv = self.engine.metrics.admitted(
            self.admitted - self.arrival,
            prompt_tokens,
            self.cached_tokens,
        );
        self.seat = Some(Seat {
            _permit: permit,
            running,
            kv,
        });
        true
    }

    /// Sleeps until `deadline`; `false` if the server cut the request off meanwhile.
    async fn sleep_until(&mut self, deadline: Instant) -> bool {
        if Instant::now() >= deadline {
            return true;
        }
        tokio::select! {
            biased;
            () = aborting(&mut self.phase) => false,
            // Precise to tens of microseconds: the injected TTFT and ITL are the truth clients are checked against.
            () = llmbench_model::timer::sleep_until(deadline.into_std()) => true,
        }
    }

    /// Gives up the seat and counts the request as aborted, as a stuck or dropped request would be.
    fn abandon(&mut self) {
        self.seat = None;
        if !self.ended {
            self.ended = true;
            self.engine.metrics.aborted();
        }
    }

    /// Holds a stalled response open until the server drains.
    async fn stall(&mut self) {
        self.abandon();
        let _ = self.phase.wait_for(|phase| *phase >= Phase::Draining).await;
    }

    fn finish(&mut self, first_token_at: Instant, now: Instant) {
        self.ended = true;
        self.seat = None;
        self.engine.metrics.finished(
            self.plan.finish,
            &FinishedRequest {
                e2e: now - self.arrival,
                prefill: first_token_at - self.admitted,
                decode: now - first_token_at,
                prompt_tokens: self.plan.shape.prompt_tokens,
                generation_tokens: self.plan.output_tokens,
                max_tokens: self.plan.shape.max_tokens,
            },
        );
    }

    /// The response's `usage`: with `prompt_tokens_details` only when tokens hit and the details are on, as vLLM
    /// writes it (`if self.enable_prompt_tokens_details and num_cached_tokens:` in its serving code).
    fn usage(&self) -> Usage {
        let usage = Usage::new(self.plan.shape.prompt_tokens, self.plan.output_tokens);
        match self.cached_tokens {
            Some(cached) if cached > 0 && self.engine.config.enable_prompt_tokens_details => {
                usage.with_cached_tokens(cached)
            }
            _ => usage,
        }
    }

    fn cutoff(&self) -> Cutoff {
        Cutoff::Shutdown {
            id: self.plan.id.clone(),
        }
    }

    fn header(&self) -> ChunkHeader<'_> {
        ChunkHeader {
            endpoint: self.plan.shape.endpoint,
            id: &self.plan.id,
            created: self.plan.created,
            model: &self.engine.config.model,
        }
    }
}

/// Resolves once the server cuts off requests in flight (or is dropped).
async fn aborting(phase: &mut watch::Receiver<Phase>) {
    let _ = phase.wait_for(|phase| *phase == Phase::Aborting).await;
}

/// The outcome of a non-streaming request.
pub(crate) enum Completed {
    /// The JSON body.
    Body(Vec<u8>),
    /// The injected `malformed` fault: truncated JSON.
    Malformed(Vec<u8>),
    /// The injected `disconnect` or a released `stall`: close the connection instead of answering.
    Cutoff(Cutoff),
    /// The server is shutting down.
    ShuttingDown,
}

/// Runs a non-streaming request: queue, then `ttft + (n-1) * itl`, then the whole body at once.
pub(crate) async fn complete(mut job: Job) -> Completed {
    if !job.admit().await {
        return Completed::ShuttingDown;
    }
    let admitted = job.admitted;
    if job.plan.fault == Some(FailureKind::Stall) {
        job.stall().await;
        return Completed::Cutoff(Cutoff::StallReleased {
            id: job.plan.id.clone(),
        });
    }
    let n = job.plan.output_tokens;
    let last = job.engine.token_deadline(admitted, n - 1);
    if !job.sleep_until(last).await {
        return Completed::ShuttingDown;
    }
    if job.plan.fault == Some(FailureKind::Disconnect) {
        job.abandon();
        return Completed::Cutoff(Cutoff::InjectedDisconnect {
            id: job.plan.id.clone(),
        });
    }
    // The engine generated every token even though none was sent: record them as vLLM would.
    let first_token_at = job.engine.first_token_deadline(admitted);
    let metrics = &job.engine.metrics;
    metrics.first_token(job.plan.shape.prompt_tokens, first_token_at - job.arrival);
    metrics.next_tokens(job.engine.config.itl, n - 1);
    let reasoning = job.plan.shape.reasoning_tokens.min(n);
    let text = TOKEN_TEXT.repeat((n - reasoning) as usize);
    let reasoning = (reasoning > 0).then(|| TOKEN_TEXT.repeat(reasoning as usize));
    let body = job.header().response_body(
        &text,
        reasoning.as_deref(),
        job.plan.finish_reason(),
        job.usage(),
    );
    let malformed = job.plan.fault == Some(FailureKind::Malformed);
    job.finish(first_token_at, Instant::now());
    if malformed {
        let mut body = body;
        body.truncate(body.len() / 2);
        Completed::Malformed(body)
    } else {
        Completed::Body(body)
    }
}

/// The most a batch of due tokens fills before it goes out: one 128-token completion at zero latency (about
/// 230 bytes a token) is one write, and a very long one still lets other connections run between writes.
const BATCH_BYTES: usize = 32 * 1024;

/// Where a streaming response is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Admit,
    Role,
    Token,
    Usage,
    Done,
    End,
}

/// A streaming response: SSE events of the request's tokens, on time.
struct SseResponse {
    job: Job,
    step: Step,
    /// Tokens sent so far.
    sent: u32,
    fault_pending: bool,
    first_token_at: Instant,
    last_token_at: Instant,
    /// Built once per request: every token event but the last is these same bytes.
    token_event: Bytes,
    /// The same for the reasoning tokens that come first (empty without reasoning).
    reasoning_event: Bytes,
}

/// The body stream of a streaming response; polled by the connection's task.
pub(crate) fn sse_stream(job: Job) -> impl Stream<Item = Result<Bytes, Cutoff>> + Send + 'static {
    let fault_pending = matches!(
        job.plan.fault,
        Some(FailureKind::Stall | FailureKind::Disconnect | FailureKind::Malformed)
    );
    let token_event = job.header().token_event(None);
    let reasoning_event = if job.plan.shape.reasoning_tokens > 0 {
        job.header().reasoning_event(None)
    } else {
        Bytes::new()
    };
    let now = Instant::now();
    let response = SseResponse {
        job,
        step: Step::Admit,
        sent: 0,
        fault_pending,
        first_token_at: now,
        last_token_at: now,
        token_event,
        reasoning_event,
    };
    futures_util::stream::unfold(response, |mut response| async move {
        let event = response.next_event().await?;
        if event.is_err() {
            response.step = Step::End;
        }
        Some((event, response))
    })
}

impl SseResponse {
    async fn next_event(&mut self) -> Option<Result<Bytes, Cutoff>> {
        loop {
            match self.step {
                Step::Admit => {
                    if !self.job.admit().await {
                        return Some(Err(self.job.cutoff()));
                    }
                    self.step = if self.job.plan.shape.endpoint.opens_stream() {
                        Step::Role
                    } else {
                        Step::Token
                    };
                }
                Step::Role => {
                    // vLLM sends the role-only delta together with the first token.
                    let due = self.job.engine.first_token_deadline(self.job.admitted);
                    if !self.job.sleep_until(due).await {
                        return Some(Err(self.job.cutoff()));
                    }
                    self.step = Step::Token;
                    return Some(Ok(self.job.header().open_event(self.job.usage())));
                }
                Step::Token => return Some(self.tokens().await),
                Step::Usage | Step::Done => return self.closing_event().map(Ok),
                Step::End => return None,
            }
        }
    }

    /// The usage event or `[DONE]` that closes the stream after the last token, or `None` once closed.
    fn closing_event(&mut self) -> Option<Bytes> {
        match self.step {
            Step::Usage => {
                let endpoint = self.job.plan.shape.endpoint;
                self.step = if endpoint.has_own_stream_end() {
                    Step::End
                } else {
                    Step::Done
                };
                let text = if endpoint.has_own_stream_end() {
                    TOKEN_TEXT.repeat(self.sent as usize)
                } else {
                    String::new()
                };
                let finish = self.job.plan.finish_reason();
                Some(
                    self.job
                        .header()
                        .usage_event(self.job.usage(), &text, finish),
                )
            }
            Step::Done => {
                self.step = Step::End;
                Some(Bytes::from_static(DONE_EVENT))
            }
            _ => None,
        }
    }

    /// The next token once it is due, together with every later token (and the stream's close) already due by
    /// then: a server that is behind, or runs with no inter-token latency, writes what it has in one go instead
    /// of one write per token. The events and each token's metrics are those of sending them one by one.
    async fn tokens(&mut self) -> Result<Bytes, Cutoff> {
        let sent_before = self.sent;
        let first = self.token().await?;
        let now = self.last_token_at;
        // An injected malformed event is not a token: the token after it takes its own turn.
        if self.sent == sent_before || !self.next_is_due(now) {
            return Ok(first);
        }
        let mut batch = BytesMut::with_capacity(BATCH_BYTES.min(first.len() * 32));
        batch.extend_from_slice(&first);
        while self.next_is_due(now) && batch.len() < BATCH_BYTES {
            let event = self.emit(now);
            batch.extend_from_slice(&event);
        }
        if self.step != Step::Token {
            while let Some(event) = self.closing_event() {
                batch.extend_from_slice(&event);
            }
        }
        Ok(batch.freeze())
    }

    /// Whether the next token can go out with the one just sent at `now`: it is due, and no injected fault
    /// waits before it (a fault takes its own turn, as it would one token at a time).
    fn next_is_due(&self, now: Instant) -> bool {
        self.step == Step::Token
            && !(self.fault_pending && self.sent == self.job.plan.fault_at())
            && self.job.engine.token_deadline(self.job.admitted, self.sent) <= now
    }

    async fn token(&mut self) -> Result<Bytes, Cutoff> {
        let due = self.job.engine.token_deadline(self.job.admitted, self.sent);
        if self.sent > 0 && self.job.engine.config.itl.is_zero() {
            // As fast as possible, but let other connections run between tokens.
            tokio::task::coop::consume_budget().await;
        } else if !self.job.sleep_until(due).await {
            return Err(self.job.cutoff());
        }

        if self.fault_pending && self.sent == self.job.plan.fault_at() {
            self.fault_pending = false;
            match self.job.plan.fault {
                Some(FailureKind::Stall) => {
                    self.job.stall().await;
                    return Err(Cutoff::StallReleased {
                        id: self.job.plan.id.clone(),
                    });
                }
                Some(FailureKind::Disconnect) => {
                    // hyper drops unflushed output when a body fails; pausing once lets it flush
                    // the events already produced, so the cut really comes mid-stream.
                    tokio::task::yield_now().await;
                    self.job.abandon();
                    return Err(Cutoff::InjectedDisconnect {
                        id: self.job.plan.id.clone(),
                    });
                }
                // The token follows on the next poll, still on time.
                Some(FailureKind::Malformed) => return Ok(Bytes::from_static(MALFORMED_EVENT)),
                _ => {}
            }
        }
        Ok(self.emit(Instant::now()))
    }

    /// Sends the next token at `now`: its metrics, and its event.
    fn emit(&mut self, now: Instant) -> Bytes {
        let metrics = &self.job.engine.metrics;
        if self.sent == 0 {
            self.first_token_at = now;
            metrics.first_token(self.job.plan.shape.prompt_tokens, now - self.job.arrival);
        } else {
            metrics.next_token(now - self.last_token_at);
        }
        self.last_token_at = now;
        self.sent += 1;
        if let Some(seat) = self.job.seat.as_mut() {
            seat.kv.grow();
        }

        // The token just sent (numbered from 1) is reasoning while it is among the first `reasoning_tokens`.
        let reasoning = self.sent <= self.job.plan.shape.reasoning_tokens;
        if self.sent < self.job.plan.output_tokens {
            return if reasoning {
                self.reasoning_event.clone()
            } else {
                self.token_event.clone()
            };
        }
        self.job.finish(self.first_token_at, now);
        self.step = if self.job.plan.shape.include_usage
            || self.job.plan.shape.endpoint.has_own_stream_end()
        {
            Step::Usage
        } else {
            Step::Done
        };
        let finish = Some(self.job.plan.finish_reason());
        let header = self.job.header();
        if reasoning {
            header.reasoning_event(finish)
        } else {
            header.token_event(finish)
        }
    }
}
