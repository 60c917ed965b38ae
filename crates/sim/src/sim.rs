//! `llmbench sim`: an embedded, vLLM-compatible OpenAI server that generates tokens on a timer.
//!
//! It exists so that a fresh machine (or a CI job) can drive the load generator end to end without a
//! GPU: it speaks `/v1/completions` and `/v1/chat/completions` (streaming and not), the Responses and Messages
//! APIs, the pooling routes (`/v1/embeddings`, `/pooling`, `/v1/rerank`, `/rerank`, `/v2/rerank`, `/v1/score`, NIM's `/v1/ranking`:
//! prefill alone, see `pooling`), `/v1/models`,
//! `/health`, `/version`, vLLM's profiler hooks (`/start_profile`, `/stop_profile`, counted) and a vLLM-named
//! `/metrics`, with a configurable time to first token, inter-token
//! latency, a `max-num-seqs` admission queue, and injected faults for testing failure handling.
//!
//! What it deliberately does not do, and why:
//! - **No tokenizer.** Prompt tokens are estimated cheaply and deterministically: a text prompt
//!   counts its whitespace-separated words, a token-id array counts its ids, a chat request counts
//!   the words of every message's text. Output is the word `" token"` repeated, which real BPE
//!   tokenizers also count as one token each, so a client that re-tokenises the output agrees with
//!   `usage.completion_tokens`.
//! - **Output length.** With `ignore_eos: true` (vLLM's extension) the output is exactly
//!   `max_tokens` long and ends with `finish_reason: "length"`. Without it the length is drawn
//!   uniformly from `[max(1, min_tokens), max_tokens]` by the seeded RNG (`min_tokens`, vLLM's extension, above
//!   `max_tokens` or below 0 is refused with 400 as vLLM refuses it); the request ends with `"length"` when the
//!   draw is `max_tokens` and with `"stop"` otherwise. A prompt plus `max_tokens` past `--max-model-len` is
//!   refused with 400 as vLLM refuses it, or with `--stop-at-context-end` answered up to the context's end and
//!   ended with `"length"`, as llama.cpp's server does (an answer shorter than asked).
//! - **Reasoning.** With `--reasoning-tokens N` a chat answer's first N tokens are reasoning, streamed as
//!   `delta.reasoning_content` (and a whole answer's `message.reasoning_content`), as vLLM serves a model with a
//!   reasoning parser; `usage.completion_tokens` counts them, and, as vLLM's, reports no
//!   `completion_tokens_details`.
//! - **Request ids.** A request's `x-request-id` is echoed in the response's headers, as vLLM does with
//!   `--enable-request-id-headers`, and logged (debug) with its `traceparent`, so a client's ids can be checked.
//! - **Determinism.** Request number `k` (in arrival order) draws its length, fault and id from an
//!   RNG seeded with `(--seed, k)`, so a sequential run replays exactly; concurrent runs replay up to
//!   arrival order.
//! - **One choice.** `n` other than 1 and batched prompts are rejected with 400 rather than answered
//!   partially.
//! - **Prefix cache.** Prompts are hashed in blocks of `--block-size` tokens and looked up in an LRU of
//!   `--prefix-cache-blocks` blocks as vLLM's automatic prefix caching does (see `prefix_cache`); the hits are
//!   reported as `usage.prompt_tokens_details.cached_tokens` (as vLLM does with `--enable-prompt-tokens-details`:
//!   only when some tokens hit) and counted in `vllm:prefix_cache_hits`. Cached tokens do not shorten the time
//!   to first token: the simulator's TTFT is the flat `--ttft`, which does not depend on prompt length at all.
//!   `POST /reset_prefix_cache` empties it, as vLLM's dev-mode endpoint of that name does (mounted here always).

mod api_shapes;
mod engine;
mod metrics;
mod openai;
mod pooling;
mod prefix_cache;
mod server;
mod stamped;
#[cfg(test)]
mod tests;

use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use metrics::SimMetrics;

/// What the simulator's `GET /version` ends with after llmbench's version, so a record of what served a run tells
/// it from a vLLM release (the launcher's `stack::identity` reads it).
pub const VERSION_SUFFIX: &str = "+llmbench-sim";

/// The simulator's prompt-token count for a text prompt, for the test that pins it to the built-in tokenizer's.
#[cfg(test)]
pub(crate) fn text_prompt_tokens(text: &str) -> u32 {
    openai::Prompt::Text(text.to_owned())
        .token_count()
        .unwrap_or(u32::MAX)
}

/// Command-line flags of `llmbench sim`.
#[derive(clap::Args, Debug, Clone)]
pub struct SimArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,

    /// Port to listen on; 0 picks any free port (the chosen address is logged).
    #[arg(long, default_value_t = 8000)]
    pub port: u16,

    /// Served model name: requests must name it (or omit `model`), otherwise they get 404 like vLLM.
    #[arg(long, default_value = "llmbench-sim")]
    pub model: String,

    /// Time to first token, counted from admission (queue wait comes on top), e.g. `50ms`. A request that finds
    /// a free seat is admitted as of the moment it reached the socket (the kernel's receive timestamp on Linux).
    #[arg(long, default_value = "0ms", value_parser = humantime::parse_duration)]
    pub ttft: Duration,

    /// Inter-token latency after the first token, e.g. `10ms`; 0 sends tokens as fast as possible.
    #[arg(long, default_value = "0ms", value_parser = humantime::parse_duration)]
    pub itl: Duration,

    /// Requests generating at once; excess requests wait in a FIFO queue, and the wait adds to
    /// their time to first token (vLLM's `--max-num-seqs`).
    #[arg(long, default_value_t = 256)]
    pub max_num_seqs: usize,

    /// Context length: prompt tokens plus `max_tokens` beyond it are rejected with 400, like vLLM (see
    /// `--stop-at-context-end`).
    #[arg(long, default_value_t = 32768)]
    pub max_model_len: u32,

    /// Answer a request whose prompt plus `max_tokens` passes `--max-model-len` up to the context's end, ending it
    /// with `finish_reason: "length"` short of `max_tokens`, as llama.cpp's server does, instead of rejecting it
    /// with 400 as vLLM does (a prompt that fills the context alone is still rejected).
    #[arg(long)]
    pub stop_at_context_end: bool,

    /// Make the first N tokens of every chat answer reasoning, streamed as `delta.reasoning_content` as vLLM
    /// streams them with a reasoning parser (0: no reasoning). Completions have none.
    #[arg(long, default_value_t = 0)]
    pub reasoning_tokens: u32,

    /// Output tokens to generate when a request has no `max_tokens` (vLLM's completions default is
    /// 16; its chat default, the rest of the context window, is far too long for a simulator).
    /// Capped by the room left in `--max-model-len`.
    #[arg(long, default_value_t = 16)]
    pub default_output_tokens: u32,

    /// Seed for output lengths, fault injection and ids; random (and logged) when absent.
    #[arg(long)]
    pub seed: Option<u64>,

    /// Fraction of requests (0.0–1.0) that fail on purpose, with a kind from `--failure-kinds`.
    #[arg(long, default_value_t = 0.0)]
    pub failure_rate: f64,

    /// Comma-separated fault kinds a failing request picks from (uniformly, seeded): `http429`,
    /// `http500` (error status with an OpenAI error body), `stall` (the stream stops mid-way and
    /// never ends until the client gives up), `disconnect` (the connection closes mid-stream),
    /// `malformed` (a non-JSON `data:` event mid-stream, then the stream goes on).
    #[arg(long, default_value = "http500")]
    pub failure_kinds: String,

    /// On shutdown, how long requests in flight may run to completion before their connections
    /// are closed.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    pub shutdown_grace: Duration,

    /// Prefix-cache block size in tokens (vLLM's `--block-size`): prompts are hashed and cached in full
    /// blocks of this many tokens.
    #[arg(long, default_value_t = prefix_cache::DEFAULT_BLOCK_SIZE)]
    pub block_size: u32,

    /// Blocks the prefix cache holds, evicting the least recently used; 0 disables prefix caching (vLLM
    /// without `--enable-prefix-caching`).
    #[arg(long, default_value_t = prefix_cache::DEFAULT_BLOCKS)]
    pub prefix_cache_blocks: usize,

    /// Report `usage.prompt_tokens_details.cached_tokens` as vLLM does with its flag of the same name: only
    /// for requests with cached tokens. `false` never reports it, as vLLM by default.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub enable_prompt_tokens_details: bool,

    /// LoRA adapters served beside the model, as `vllm serve --lora-modules` names them (`NAME` or
    /// `NAME=PATH`, several after one flag): listed in `/v1/models` with the model as their parent, and accepted
    /// as a request's `model`. The simulator answers them as it answers the model.
    #[arg(long, num_args = 1..)]
    pub lora_modules: Vec<String>,
}

/// Simulator settings, each field meaning what the flag of the same name does. Build one from
/// [`SimArgs`] (validated) or start from [`SimConfig::default`] (validated again by [`start`]).
#[derive(Debug, Clone, PartialEq)]
pub struct SimConfig {
    pub host: String,
    pub port: u16,
    pub model: String,
    pub ttft: Duration,
    pub itl: Duration,
    pub max_num_seqs: usize,
    pub max_model_len: u32,
    pub stop_at_context_end: bool,
    pub reasoning_tokens: u32,
    pub default_output_tokens: u32,
    pub seed: Option<u64>,
    pub failure_rate: f64,
    pub failure_kinds: Vec<FailureKind>,
    pub shutdown_grace: Duration,
    pub block_size: u32,
    pub prefix_cache_blocks: usize,
    pub enable_prompt_tokens_details: bool,
    /// The LoRA adapters' names (`--lora-modules`, without their paths).
    pub lora_modules: Vec<String>,
}

impl Default for SimConfig {
    /// The same values as the flags' defaults (pinned by a test).
    fn default() -> Self {
        Self {
            host: "127.0.0.1".to_owned(),
            port: 8000,
            model: "llmbench-sim".to_owned(),
            ttft: Duration::ZERO,
            itl: Duration::ZERO,
            max_num_seqs: 256,
            max_model_len: 32768,
            stop_at_context_end: false,
            reasoning_tokens: 0,
            default_output_tokens: 16,
            seed: None,
            failure_rate: 0.0,
            failure_kinds: vec![FailureKind::Http500],
            shutdown_grace: Duration::from_secs(5),
            block_size: prefix_cache::DEFAULT_BLOCK_SIZE,
            prefix_cache_blocks: prefix_cache::DEFAULT_BLOCKS,
            enable_prompt_tokens_details: true,
            lora_modules: Vec::new(),
        }
    }
}

impl TryFrom<SimArgs> for SimConfig {
    type Error = SimError;

    fn try_from(args: SimArgs) -> Result<Self, SimError> {
        let failure_kinds = parse_failure_kinds(&args.failure_kinds)?;
        let config = Self {
            host: args.host,
            port: args.port,
            model: args.model,
            ttft: args.ttft,
            itl: args.itl,
            max_num_seqs: args.max_num_seqs,
            max_model_len: args.max_model_len,
            stop_at_context_end: args.stop_at_context_end,
            reasoning_tokens: args.reasoning_tokens,
            default_output_tokens: args.default_output_tokens,
            seed: args.seed,
            failure_rate: args.failure_rate,
            failure_kinds,
            shutdown_grace: args.shutdown_grace,
            block_size: args.block_size,
            prefix_cache_blocks: args.prefix_cache_blocks,
            enable_prompt_tokens_details: args.enable_prompt_tokens_details,
            lora_modules: args
                .lora_modules
                .iter()
                .map(|m| {
                    m.split_once('=')
                        .map_or(m.as_str(), |(name, _)| name)
                        .to_owned()
                })
                .collect(),
        };
        config.validate()?;
        Ok(config)
    }
}

impl SimConfig {
    /// Checks the values a hand-built config could get wrong; [`start`] calls it too.
    pub fn validate(&self) -> Result<(), SimError> {
        let invalid = |flag: &'static str, value: String, reason: &str| SimError::InvalidFlag {
            flag,
            value,
            reason: reason.to_owned(),
        };
        if self.model.trim().is_empty() {
            return Err(invalid("--model", self.model.clone(), "must not be empty"));
        }
        if let Some(bad) = self
            .lora_modules
            .iter()
            .find(|m| m.trim().is_empty() || **m == self.model)
        {
            return Err(invalid(
                "--lora-modules",
                bad.clone(),
                "an adapter needs a name of its own, not empty and not the model's",
            ));
        }
        if !(0.0..=1.0).contains(&self.failure_rate) {
            return Err(invalid(
                "--failure-rate",
                self.failure_rate.to_string(),
                "must be a fraction between 0.0 and 1.0",
            ));
        }
        if self.failure_rate > 0.0 && self.failure_kinds.is_empty() {
            return Err(invalid(
                "--failure-kinds",
                String::new(),
                "must name at least one kind when --failure-rate is above 0",
            ));
        }
        if self.max_num_seqs == 0 || self.max_num_seqs > tokio::sync::Semaphore::MAX_PERMITS {
            return Err(invalid(
                "--max-num-seqs",
                self.max_num_seqs.to_string(),
                "must be at least 1 (and fit a semaphore)",
            ));
        }
        if self.max_model_len == 0 {
            return Err(invalid(
                "--max-model-len",
                "0".to_owned(),
                "must be at least 1",
            ));
        }
        if self.block_size == 0 {
            return Err(invalid(
                "--block-size",
                "0".to_owned(),
                "must be at least 1",
            ));
        }
        if self.default_output_tokens == 0 {
            return Err(invalid(
                "--default-output-tokens",
                "0".to_owned(),
                "must be at least 1",
            ));
        }
        Ok(())
    }
}

fn parse_failure_kinds(list: &str) -> Result<Vec<FailureKind>, SimError> {
    let mut kinds = Vec::new();
    for item in list
        .split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
    {
        let kind = item
            .parse()
            .map_err(|reason: String| SimError::InvalidFlag {
                flag: "--failure-kinds",
                value: item.to_owned(),
                reason,
            })?;
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    Ok(kinds)
}

/// A way an injected failure shows itself to the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// 429 with an OpenAI error body, before any work.
    Http429,
    /// 500 with an OpenAI error body, before any work.
    Http500,
    /// The response stops half-way and never ends (until the client gives up or the server shuts
    /// down); the request frees its `max-num-seqs` seat when it stalls.
    Stall,
    /// The connection is closed half-way through the response.
    Disconnect,
    /// A `data:` event that is not JSON half-way through the stream (a non-streaming response gets a
    /// truncated JSON body instead).
    Malformed,
}

impl FailureKind {
    pub const ALL: [FailureKind; 5] = [
        FailureKind::Http429,
        FailureKind::Http500,
        FailureKind::Stall,
        FailureKind::Disconnect,
        FailureKind::Malformed,
    ];

    pub fn name(self) -> &'static str {
        match self {
            FailureKind::Http429 => "http429",
            FailureKind::Http500 => "http500",
            FailureKind::Stall => "stall",
            FailureKind::Disconnect => "disconnect",
            FailureKind::Malformed => "malformed",
        }
    }
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for FailureKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|kind| kind.name() == s)
            .ok_or_else(|| {
                let known: Vec<&str> = Self::ALL.iter().map(|kind| kind.name()).collect();
                format!("unknown failure kind; expected one of {}", known.join(", "))
            })
    }
}

/// Everything that can go wrong starting, running or stopping the simulator.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("invalid value {value:?} for {flag}: {reason}")]
    InvalidFlag {
        flag: &'static str,
        value: String,
        reason: String,
    },
    #[error("failed to bind the simulator listener on {addr}")]
    Bind { addr: String, source: io::Error },
    #[error("failed to read the address the simulator listener on {addr} is bound to")]
    LocalAddr { addr: String, source: io::Error },
    #[error("simulator server on {addr} failed")]
    Serve { addr: SocketAddr, source: io::Error },
    #[error("simulator server task on {addr} panicked or was cancelled")]
    ServerTask {
        addr: SocketAddr,
        source: tokio::task::JoinError,
    },
    #[error("failed to listen for the shutdown signal")]
    Signal { source: io::Error },
}

/// Lifecycle of a running simulator, broadcast to every request in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Phase {
    Serving,
    /// No new connections; stalled responses end, others run to completion.
    Draining,
    /// Every response still in flight is cut off.
    Aborting,
}

/// Which profiler hook was called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProfilerHook {
    Start,
    Stop,
}

/// One call of `POST /start_profile` or `POST /stop_profile`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProfilerCall {
    pub hook: ProfilerHook,
    /// Completion requests that had arrived before it: tells a test whether a warm-up was inside the window.
    pub requests_before: u64,
}

/// A simulator serving in the background; dropping it closes every connection at once.
#[derive(Debug)]
pub struct RunningSim {
    local_addr: SocketAddr,
    profiler: Arc<std::sync::Mutex<Vec<ProfilerCall>>>,
    seed: u64,
    phase: watch::Sender<Phase>,
    server: JoinHandle<io::Result<()>>,
    shutdown_grace: Duration,
}

impl RunningSim {
    /// The address the listener is bound to (with the real port when started on port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The RNG seed in use (drawn at random when the config had none); pass it as `--seed` to
    /// replay the same lengths, faults and ids.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The profiler hooks called so far, in order.
    pub fn profiler_calls(&self) -> Vec<ProfilerCall> {
        self.profiler
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// `http://IP:PORT`, using loopback when the listener is bound to an unspecified address.
    pub fn base_url(&self) -> String {
        let ip = match self.local_addr.ip() {
            IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
            ip => ip,
        };
        format!("http://{}", SocketAddr::new(ip, self.local_addr.port()))
    }

    /// Stops accepting connections, ends stalled responses, lets the others finish for up to the
    /// configured grace period, then cuts off what is left and waits for the server to stop.
    pub async fn shutdown(mut self) -> Result<(), SimError> {
        self.phase.send_replace(Phase::Draining);
        let joined = match tokio::time::timeout(self.shutdown_grace, &mut self.server).await {
            Ok(joined) => joined,
            Err(_elapsed) => {
                tracing::warn!(
                    grace = ?self.shutdown_grace,
                    "simulator requests still in flight after the grace period; closing them"
                );
                self.phase.send_replace(Phase::Aborting);
                (&mut self.server).await
            }
        };
        let addr = self.local_addr;
        joined
            .map_err(|source| SimError::ServerTask { addr, source })?
            .map_err(|source| SimError::Serve { addr, source })
    }
}

/// Binds the listener and serves in a background task until [`RunningSim::shutdown`].
pub async fn start(config: SimConfig) -> Result<RunningSim, SimError> {
    config.validate()?;
    let bind_addr = format!("{}:{}", config.host, config.port);
    let listener = bind_listener(&config.host, config.port)
        .await
        .map_err(|source| SimError::Bind {
            addr: bind_addr.clone(),
            source,
        })?;
    let local_addr = listener
        .local_addr()
        .map_err(|source| SimError::LocalAddr {
            addr: bind_addr,
            source,
        })?;
    let listener = stamped::StampedListener(listener);

    let seed = config.seed.unwrap_or_else(rand::random);
    let (phase, phase_rx) = watch::channel(Phase::Serving);
    let shutdown_grace = config.shutdown_grace;
    let engine = Arc::new(engine::Engine::new(config, seed, phase_rx.clone()));
    let profiler = Arc::clone(&engine.profiler);
    let app = server::router(engine);

    let mut signal_rx = phase_rx;
    // Fires on Draining, or when the RunningSim is dropped (the sender closes).
    let signal = async move {
        let _ = signal_rx.wait_for(|phase| *phase != Phase::Serving).await;
    };
    let server = tokio::spawn(async move {
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<stamped::RequestArrival>(),
        )
        .with_graceful_shutdown(signal)
        .await
    });
    Ok(RunningSim {
        local_addr,
        profiler,
        seed,
        phase,
        server,
        shutdown_grace,
    })
}

/// Connection backlog of the listener; the kernel caps it at `net.core.somaxconn`. Tokio's default
/// (1024) drops SYNs when thousands of clients connect at once, and each drop costs the client a
/// one-second SYN retransmission that would show up as TTFT.
const LISTEN_BACKLOG: u32 = 8192;

/// Binds the first address `host` resolves to that accepts the bind, like `TcpListener::bind`
/// but with a deeper backlog.
async fn bind_listener(host: &str, port: u16) -> io::Result<TcpListener> {
    let mut last_error = None;
    for addr in tokio::net::lookup_host((host, port)).await? {
        let attempt = (|| {
            let socket = match addr {
                SocketAddr::V4(_) => TcpSocket::new_v4()?,
                SocketAddr::V6(_) => TcpSocket::new_v6()?,
            };
            #[cfg(unix)]
            socket.set_reuseaddr(true)?;
            socket.bind(addr)?;
            socket.listen(LISTEN_BACKLOG)
        })();
        match attempt {
            Ok(listener) => return Ok(listener),
            Err(err) => last_error = Some(err),
        }
    }
    Err(last_error.unwrap_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "the host resolved to no address",
        )
    }))
}

/// Runs the simulator for the CLI until Ctrl-C (or SIGTERM on Unix), then shuts down gracefully.
pub async fn run_until_ctrl_c(args: SimArgs) -> Result<(), SimError> {
    let config = SimConfig::try_from(args)?;
    let model = config.model.clone();
    let sim = start(config).await?;
    tracing::info!(
        address = %sim.local_addr(),
        base_url = %sim.base_url(),
        %model,
        seed = sim.seed(),
        "llmbench sim listening"
    );
    wait_for_shutdown_signal().await?;
    tracing::info!("shutting down llmbench sim");
    sim.shutdown().await
}

async fn wait_for_shutdown_signal() -> Result<(), SimError> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term =
            signal(SignalKind::terminate()).map_err(|source| SimError::Signal { source })?;
        tokio::select! {
            result = tokio::signal::ctrl_c() => result.map_err(|source| SimError::Signal { source }),
            _ = term.recv() => Ok(()),
        }
    }
    #[cfg(not(unix))]
    {
        tokio::signal::ctrl_c()
            .await
            .map_err(|source| SimError::Signal { source })
    }
}
