//! The internal workload model: what every dialect parses into and what the engine runs.
//!
//! Figures are kept exactly as the profile wrote them (rates as `f64`, distribution parameters
//! as given); derived values, such as guidellm's default length bounds, are computed the way the
//! tool computes them and documented where they are.

use std::time::Duration;

use llmbench_text::py_random::{PyRandom, aiperf_derived_seed};

/// The profile dialect, shared with the API types so the CLI, the operator and the parsers agree on names.
pub use llmbench_core::harness::Harness;

/// Which of a harness's file formats the profile was written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// inference-perf's `Config` YAML.
    InferencePerf,
    /// guidellm v0.7 scenario: `spec:` plus `benchmarks[]` (dialect C).
    GuidellmScenario,
    /// guidellm ≤ v0.6 flat scenario, hyphenated or underscored keys (dialects A and B).
    GuidellmFlat,
    /// `vllm bench serve` / InferenceMAX flag map.
    VllmFlags,
    /// llm-d-benchmark's `aiperf` flag map (`aiperf profile --key=value`).
    AiperfFlags,
    /// AIPerf 0.13's YAML config file (`aiperf profile --config FILE`), read as the flags it stands for.
    AiperfConfig,
    /// No traffic.
    Nop,
}

/// The whole workload of one profile.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    pub harness: Harness,
    pub dialect: Dialect,
    pub api: Api,
    /// Run in order; each has its own arrival process and limit.
    pub stages: Vec<Stage>,
    /// Pause between stages (inference-perf `load.interval`, 1 s by default; 0 elsewhere).
    pub stage_interval: Duration,
    pub data: DataSpec,
    pub request_timeout: Option<Duration>,
    /// Seed for arrivals and data; see `seed_origin`.
    pub seed: u64,
    pub seed_origin: SeedOrigin,
    pub workers: WorkerSettings,
    pub report: ReportOptions,
    /// Service-level objectives a request must all meet to count as "good".
    pub goodput: Vec<GoodputConstraint>,
    /// vllm `--num-warmups`: this many copies of the first request, sent at once (under `max_concurrency`)
    /// before the first stage and left out of every metric and report.
    pub warmup_requests: u64,
    pub tokenizer: Option<TokenizerSpec>,
    /// Where the profile says server metrics come from (inference-perf `metrics:`); `None` = the run's defaults.
    pub server_metrics: Option<PrometheusSource>,
    /// The profile turns the server-metrics scrape off (AIPerf `no-server-metrics`), as `--no-server-metrics`
    /// does.
    pub no_server_metrics: bool,
    /// inference-perf's circuit breakers that `load.circuit_breakers` enables, in its order.
    pub circuit_breakers: Vec<super::circuit_breaker::CircuitBreaker>,
}

/// inference-perf `metrics: {type: prometheus, prometheus: {url, scrape_interval, filters}}`: a Prometheus server
/// that scrapes the stack. llmbench reads the series it holds through the server's `/federate` endpoint (the
/// latest sample of every matching series, in the text format its own scraper reads), instead of evaluating
/// PromQL at the end, so the figures come from the same per-stage arithmetic as a direct scrape.
#[derive(Debug, Clone, PartialEq)]
pub struct PrometheusSource {
    /// The Prometheus server's base URL.
    pub url: String,
    /// `scrape_interval` (s, default 15): how stale the server's samples can be. inference-perf waits this plus
    /// 2 s after the run before it queries, and stretches `load.interval` to at least this between stages when
    /// per-stage Prometheus reports are asked for; llmbench does both.
    pub scrape_interval: Duration,
    /// `filters`: label matchers added to every selector, e.g. `namespace="llm-d"`.
    pub filters: Vec<String>,
}

impl Workload {
    /// A workload that sends nothing (the `nop` harness).
    pub fn empty(harness: Harness, dialect: Dialect) -> Self {
        Workload {
            harness,
            dialect,
            api: Api::default(),
            stages: Vec::new(),
            stage_interval: Duration::ZERO,
            data: DataSpec::Mock,
            request_timeout: None,
            seed: 0,
            seed_origin: SeedOrigin::ToolDefault,
            workers: WorkerSettings::default(),
            report: ReportOptions::default(),
            goodput: Vec::new(),
            warmup_requests: 0,
            tokenizer: None,
            server_metrics: None,
            no_server_metrics: false,
            circuit_breakers: Vec::new(),
        }
    }
}

/// Where `Workload::seed` came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeedOrigin {
    /// Written in the profile.
    Profile,
    /// `ParseOptions::default_seed` (e.g. `--seed`, or the wall clock as upstream wrappers do).
    Caller,
    /// The tool's fixed default: guidellm 42, vllm 0; inference-perf has none (it uses the
    /// current time), so 0 stands in.
    ToolDefault,
}

/// The HTTP API requests are sent to.
#[derive(Debug, Clone, PartialEq)]
pub struct Api {
    pub kind: ApiKind,
    pub streaming: bool,
    /// Ask the server to ignore EOS so outputs have exactly the requested length.
    pub ignore_eos: bool,
    pub model: Option<String>,
    pub base_url: Option<String>,
    /// Path under `base_url` when the profile gives one (vllm `endpoint`, guidellm
    /// `request_format`); otherwise `/v1/completions` or `/v1/chat/completions` by `kind`.
    pub endpoint: Option<String>,
    pub api_key: Option<String>,
    /// Extra request headers, in profile order.
    pub headers: Vec<(String, String)>,
    /// inference-perf `data.use_chat_template`: wrap completion prompts in the chat template.
    pub use_chat_template: Option<bool>,
    /// inference-perf `api.session_id_header_key`: each request of a session carries its session id in this
    /// header (`openai_client.py`; llmbench sends it for `trace_session_replay` sessions).
    pub session_id_header: Option<String>,
    /// Fields merged last into every request body, replacing the tool's own of the same name: vLLM's sampling
    /// flags then its `--extra-body`, merged as `serve.py` merges them (`{**sampling_params, **extra_body}`).
    pub extra_body: serde_json::Map<String, serde_json::Value>,
    /// vLLM `--logprobs`: its completions bodies carry it, `null` when unset (its chat bodies carry none).
    pub logprobs: Option<i64>,
    /// vLLM `--request-id-prefix`: each request's `x-request-id` is this and the request's number.
    pub request_id_prefix: Option<String>,
    /// Query parameters added to every request's URL, in order (guidellm `extras.params`, sent by httpx).
    pub query: Vec<(String, String)>,
    /// For a pooling API ([`ApiKind::is_pooling`]): how many prompts each request carries (vLLM
    /// `--random-batch-size`); 1 for every other API.
    pub inputs_per_request: u32,
    /// LoRA traffic: each request names one of these adapters as its `model` (vLLM `--lora-modules`,
    /// inference-perf `load.lora_traffic_split`); `None` sends every request to the base model.
    pub lora: Option<LoraTraffic>,
    /// Base URLs after `base_url` that the requests are spread over in turn (AIPerf's several `--url`, its
    /// `round_robin` URL strategy): request `i` goes to URL `i mod n`, `base_url` first.
    pub more_urls: Vec<String>,
    /// The run's chat requests carry images (vLLM `random-mm`): the pre-flight's test request carries one too, so
    /// a server that cannot take images is found before the clock starts.
    pub images: bool,
    /// For [`ApiKind::Rerank`] from AIPerf's rankings endpoint types: whose rankings API the bodies are written
    /// for (each prompt a query with its passages); `None` sends vLLM's rerank bodies.
    pub rankings: Option<RankingsWire>,
}

/// AIPerf 0.13's rankings endpoint types (`aiperf/endpoints/*_rankings.py`, paths from `plugin/plugins.yaml`):
/// one query and its passages per request, never streamed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RankingsWire {
    /// `nim_rankings`: POST `/v1/ranking`, `{model, query: {text}, passages: [{text}]}`.
    Nim,
    /// `cohere_rankings`: POST `/v2/rerank`, `{model, query, documents}`.
    Cohere,
    /// `hf_tei_rankings`: POST `/rerank`, `{query, texts}` (no model).
    HfTei,
}

impl RankingsWire {
    /// The endpoint type's path (`endpoint_path` in AIPerf's `plugins.yaml`).
    pub fn path(self) -> &'static str {
        match self {
            RankingsWire::Nim => "/v1/ranking",
            RankingsWire::Cohere => "/v2/rerank",
            RankingsWire::HfTei => "/rerank",
        }
    }

    /// AIPerf's name for it (`--endpoint-type`).
    pub fn name(self) -> &'static str {
        match self {
            RankingsWire::Nim => "nim_rankings",
            RankingsWire::Cohere => "cohere_rankings",
            RankingsWire::HfTei => "hf_tei_rankings",
        }
    }
}

/// The LoRA adapters a run spreads its requests over, and how each request's adapter is chosen.
#[derive(Debug, Clone, PartialEq)]
pub struct LoraTraffic {
    /// Adapter names, as the server lists them in `/v1/models`, in the profile's order.
    pub adapters: Vec<String>,
    pub pick: LoraPick,
}

/// How a request's adapter is chosen, before the clock starts, in the order of the run's requests.
#[derive(Debug, Clone, PartialEq)]
pub enum LoraPick {
    /// vLLM `--lora-assignment round-robin`: request `i` goes to adapter `i mod n`.
    RoundRobin,
    /// vLLM `--lora-assignment random` (its default): `random.choice(adapters)` once per request, from Python's
    /// global generator as `random.seed(seed)` left it (the dataset must not have drawn from it first).
    PythonChoice { seed: u64 },
    /// inference-perf `lora_traffic_split`: `np.random.choice(adapters, p=weights)` per request. Upstream's
    /// generator is the unseeded global one; llmbench seeds a legacy `RandomState` with the run's seed, so a run
    /// can be repeated.
    Weighted { weights: Vec<f64>, seed: u32 },
}

impl Default for Api {
    fn default() -> Self {
        Api {
            kind: ApiKind::Completion,
            streaming: false,
            ignore_eos: false,
            model: None,
            base_url: None,
            endpoint: None,
            api_key: None,
            headers: Vec::new(),
            use_chat_template: None,
            session_id_header: None,
            extra_body: serde_json::Map::new(),
            logprobs: None,
            request_id_prefix: None,
            query: Vec::new(),
            inputs_per_request: 1,
            lora: None,
            more_urls: Vec::new(),
            images: false,
            rankings: None,
        }
    }
}

impl Api {
    /// The request path: the profile's, or the OpenAI default for `kind`.
    pub fn path(&self) -> &str {
        match (&self.endpoint, self.kind) {
            (Some(p), _) => p,
            (None, ApiKind::Completion) => "/v1/completions",
            (None, ApiKind::Chat) => "/v1/chat/completions",
            (None, ApiKind::Responses) => "/v1/responses",
            (None, ApiKind::Messages) => "/v1/messages",
            (None, ApiKind::Embeddings) => "/v1/embeddings",
            (None, ApiKind::Rerank) => self.rankings.map_or("/v1/rerank", RankingsWire::path),
        }
    }

    /// The prompts `requests` requests carry: `inputs_per_request` each (the last batch may carry fewer, which
    /// the data's own count decides).
    pub fn prompts_for(&self, requests: Option<u64>) -> Option<u64> {
        requests.map(|n| n.saturating_mul(u64::from(self.inputs_per_request.max(1))))
    }

    /// The request target: [`Api::path`] and the query parameters, encoded as httpx encodes them
    /// (`urllib.parse.urlencode`: `quote_plus` on each name and value).
    pub fn target(&self) -> String {
        let mut target = self.path().to_owned();
        for (i, (name, value)) in self.query.iter().enumerate() {
            target.push(if i == 0 && !target.contains('?') {
                '?'
            } else {
                '&'
            });
            quote_plus(&mut target, name);
            target.push('=');
            quote_plus(&mut target, value);
        }
        target
    }
}

/// Python's `urllib.parse.quote_plus`: letters, digits and `_.-~` as they are, a space as `+`, every other byte of
/// the UTF-8 text as `%XX`.
fn quote_plus(out: &mut String, text: &str) {
    for b in text.bytes() {
        match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'.' | b'-' | b'~' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApiKind {
    /// `/v1/completions`
    Completion,
    /// `/v1/chat/completions`
    Chat,
    /// OpenAI's Responses API, `/v1/responses`: `input` items in, `response.output_text.delta` events out, usage
    /// as `input_tokens`/`output_tokens` on `response.completed`.
    Responses,
    /// Anthropic's Messages API, `/v1/messages` (vLLM and llama.cpp serve it): `content_block_delta` events out,
    /// usage split between `message_start` (input) and `message_delta` (output).
    Messages,
    /// OpenAI's embeddings API, `/v1/embeddings`: one or a batch of inputs in, one vector each out, never
    /// streamed; usage as `prompt_tokens` only. No token is generated, so no TTFT, TPOT or ITL.
    Embeddings,
    /// A rerank API (vLLM's and Jina's `/v1/rerank`): a query and documents in, a relevance score per document
    /// out, never streamed. No token is generated.
    Rerank,
}

impl ApiKind {
    /// Whether the API answers with vectors or scores rather than tokens (vLLM's `TaskType.POOLING`): requests are
    /// never streamed, may carry several inputs, and have a latency but no token timing.
    pub fn is_pooling(self) -> bool {
        matches!(self, ApiKind::Embeddings | ApiKind::Rerank)
    }
}

/// One stage: how requests arrive and when the stage stops.
#[derive(Debug, Clone, PartialEq)]
pub struct Stage {
    pub load: LoadKind,
    pub arrival: Arrival,
    pub limit: StageLimit,
    /// Cap on requests in flight on top of the arrival process (vllm `--max-concurrency`,
    /// guidellm `max_concurrency`).
    pub max_concurrency: Option<u32>,
    /// Requests at the start of the stage left out of its metrics (guidellm `warmup`).
    pub warmup: Option<Transient>,
    /// Requests at the end of the stage left out of its metrics (guidellm `cooldown`).
    pub cooldown: Option<Transient>,
}

/// The tool's own name for the stage's load, for reports (run.json carries it as this name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LoadKind {
    Constant,
    Poisson,
    Concurrent,
    Synchronous,
    Throughput,
    /// vllm gamma arrivals with burstiness ≠ 1.
    Gamma,
    Sweep,
    /// A trace replayed at its own times (AIPerf's fixed schedule) or as its sessions allow.
    Trace,
    /// AIPerf's user-centric phase: users whose turns go a fixed gap apart.
    UserCentric,
}

impl LoadKind {
    pub fn name(self) -> &'static str {
        match self {
            LoadKind::Constant => "constant",
            LoadKind::Poisson => "poisson",
            LoadKind::Concurrent => "concurrent",
            LoadKind::Synchronous => "synchronous",
            LoadKind::Throughput => "throughput",
            LoadKind::Gamma => "gamma",
            LoadKind::Sweep => "sweep",
            LoadKind::Trace => "trace",
            LoadKind::UserCentric => "user_centric",
        }
    }
}

/// A request rate that may be unbounded (vllm `--request-rate inf`) or ramp up over the run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rate {
    PerSecond(f64),
    Infinite,
    /// vllm `--ramp-up-strategy`: request `i` of `n` goes at its own rate, from `start_rps` for the first to
    /// `end_rps` for the last (`serve.py` `_get_current_request_rate`).
    RampUp(RampUp),
}

/// vllm bench serve's ramp-up from `start_rps` to `end_rps` (whole numbers: argparse reads them as `int`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RampUp {
    pub strategy: RampUpStrategy,
    pub start_rps: u64,
    pub end_rps: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RampUpStrategy {
    /// `start + (end − start)·progress`
    Linear,
    /// `start·(end/start)^progress`
    Exponential,
}

impl RampUp {
    /// The rate of request `index` of `total`, `progress` being `index / max(total − 1, 1)`.
    pub fn rate(&self, index: u64, total: u64) -> f64 {
        let progress = index as f64 / total.saturating_sub(1).max(1) as f64;
        let (start, end) = (self.start_rps as f64, self.end_rps as f64);
        match self.strategy {
            RampUpStrategy::Linear => start + (end - start) * progress,
            RampUpStrategy::Exponential => start * (end / start).powf(progress),
        }
    }
}

/// Each tool's arrival process, exactly as that tool generates it (FORMATS 3.8).
#[derive(Debug, Clone, PartialEq)]
pub enum Arrival {
    /// inference-perf `constant`: `int(rate·duration)` exponential gaps rescaled to sum to
    /// `duration`.
    InferencePerfConstant { rate: f64, duration: Duration },
    /// inference-perf `poisson`: per 1-s slot, `n ~ Poisson(rate)` arrivals placed like
    /// `constant` with rate n over 1 s; an empty slot skips 1 s; `int(rate·duration)` in all.
    InferencePerfPoisson { rate: f64, duration: Duration },
    /// guidellm `constant`: the i-th request (1-based) at `i/rate`; with a ramp-up the
    /// index-to-time map is `n = rate·t²/(2·rampup)` until the ramp ends.
    GuidellmConstant { rate: f64, rampup: Duration },
    /// guidellm `poisson`: `expovariate(rate)` gaps, the first one included.
    GuidellmPoisson { rate: f64 },
    /// vllm bench serve: gamma gaps (shape = burstiness, scale = 1/(rate·burstiness)), the
    /// cumulative sum rescaled so the last of `count` arrivals is at exactly `count/rate`;
    /// an infinite rate sends everything at t = 0.
    VllmGamma {
        rate: Rate,
        burstiness: f64,
        count: u64,
    },
    /// AIPerf 0.13's `RequestRateStrategy.execute_phase` (`aiperf/timing/strategies/request_rate.py`): one send at
    /// the end of each interval of the phase's own generator, the first one interval after the phase starts; with
    /// `concurrency` (its session slots), an interval that finds every slot taken sends nothing (`try_issue_credit`
    /// returns `None` and the loop waits for the next interval); without a rate, the slots alone pace the sends.
    /// The stage's limit is a request count or, for `--benchmark-duration`, a duration: nothing is sent after it,
    /// and what is still in flight `grace` later is cancelled.
    AiperfRate {
        pace: AiperfPace,
        concurrency: Option<u32>,
        /// `--benchmark-grace-period` (a duration limit only).
        grace: Option<Duration>,
        /// `--warmup-request-count`: a warm-up phase of this many requests, paced the same way, before the stage's
        /// own (its profiling phase), which starts once they all returned; they are left out of every figure.
        warmup_requests: u64,
        /// `--conversation-num` (AIPerf 0.13's `phase.sessions`): no new session once this many started; the
        /// started ones send all their turns (the request count, when there is one, still stops sending).
        sessions: Option<u64>,
        /// `--prefill-concurrency` and `--request-cancellation-rate`: what AIPerf's credit issuer does to each
        /// credit beyond pacing it.
        credits: AiperfCredits,
    },
    /// Closed loop: keep `concurrency` requests in flight (inference-perf `concurrent`,
    /// guidellm `concurrent`/`synchronous`/`throughput`). `rampup` staggers the first starts.
    Closed { concurrency: u32, rampup: Duration },
    /// Rates that depend on measurements made during the run.
    Sweep(Sweep),
    /// AIPerf's Mooncake trace replay (`super::mooncake`): with timestamps in the trace (its first record has
    /// one), the fixed schedule sends each session's first turn at its time; without, `concurrency` sessions run
    /// at once. Later turns of a session follow their previous turn by their delay. The times come from the
    /// trace, read when the run starts, so the schedule is built there (the `trace` module).
    MooncakeTrace {
        schedule: super::mooncake::FixedSchedule,
        /// Sessions in flight when the trace has no timestamps (AIPerf's concurrency burst; its default 1).
        concurrency: u32,
    },
    /// guidellm `replay` ([`super::guidellm_replay`]): each row of the trace data at `time_scale` × its offset
    /// from the first row; read when the run starts.
    GuidellmReplay { time_scale: f64 },
    /// inference-perf `trace_replay` (`load.trace`, `super::azure_trace`): the stage sends its requests at the
    /// trace's row times, relative to the first row (`loadgen/load_timer.py` `TraceReplayLoadTimer`). Read when
    /// the run starts, with the data's trace (`trace::azure_replay_plan`).
    InferencePerfTrace {
        /// `load.trace.file`: the rows whose times are the send times.
        file: String,
    },
    /// inference-perf `trace_session_replay` (`TraceSessionReplayLoadStage`, `load_generator.py`
    /// `run_session_stage`): a pool of at most `concurrent_sessions` sessions (0: all at once), a new one started
    /// as one completes, at most `session_rate` starts a second; each session's calls go out as its replay graph
    /// allows ([`super::otel_trace`]). The stage runs the next `num_sessions` of the corpus (all remaining when
    /// unset) and is cut off after `timeout`.
    TraceSessions {
        concurrent_sessions: u32,
        session_rate: Option<f64>,
        num_sessions: Option<u64>,
        timeout: Option<Duration>,
    },
}

/// The intervals of AIPerf 0.13's arrival patterns (`aiperf/timing/intervals.py`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum AiperfPace {
    /// `--request-rate-mode poisson` (its default): `PoissonIntervalGenerator`, `expovariate(rate)` from a CPython
    /// `random.Random` seeded with `rng.derive("timing.request.poisson_interval")` of the run's seed `seed`
    /// (`--random-seed`; without it, the run's seed), so a seed gives AIPerf's own intervals.
    Poisson { rate: f64, seed: u64 },
    /// `--arrival-pattern gamma` (or `--arrival-smoothness` alone, which selects it): `GammaIntervalGenerator`,
    /// `gammavariate(smoothness, 1 / (rate · smoothness))` from a CPython `random.Random` seeded with
    /// `rng.derive("timing.request.gamma_interval")`; `smoothness` is 1.0 when not given (exponential gaps, but
    /// from the gamma generator's own seed).
    Gamma {
        rate: f64,
        smoothness: f64,
        seed: u64,
    },
    /// `--request-rate-mode constant`: `ConstantIntervalGenerator`, `1/rate`.
    Constant { rate: f64 },
    /// No `--request-rate` (`ConcurrencyBurstIntervalGenerator`): intervals of 0; the concurrency alone paces the
    /// sends.
    Burst,
    /// `--user-centric-rate rate --num-users users` (`timing/strategies/user_centric_rate.py`): `users` users,
    /// each a multi-turn session whose turns go `users / rate` apart, their first turns staggered `1 / rate` apart
    /// as if the run were already in its steady state, a new user spawned as each one's last turn is due. Not an
    /// interval generator: the engine schedules it on its own.
    UserCentric { rate: f64, users: u32 },
}

/// The component name AIPerf 0.13 derives its Poisson generator's seed from.
const AIPERF_POISSON_RNG: &str = "timing.request.poisson_interval";
/// The component name AIPerf 0.13 derives its gamma generator's seed from.
const AIPERF_GAMMA_RNG: &str = "timing.request.gamma_interval";

impl AiperfPace {
    /// A new generator of this pace's intervals, as AIPerf makes one for each phase (the warm-up phase and the
    /// profiling phase each start from the seed's first draw).
    pub fn intervals(&self) -> AiperfIntervals {
        AiperfIntervals {
            pace: *self,
            rng: match self {
                AiperfPace::Poisson { seed, .. } => Some(PyRandom::seed(aiperf_derived_seed(
                    *seed,
                    AIPERF_POISSON_RNG,
                ))),
                AiperfPace::Gamma { seed, .. } => {
                    Some(PyRandom::seed(aiperf_derived_seed(*seed, AIPERF_GAMMA_RNG)))
                }
                AiperfPace::Constant { .. }
                | AiperfPace::Burst
                | AiperfPace::UserCentric { .. } => None,
            },
        }
    }

    /// The mean interval: what a request count takes at this pace, roughly.
    pub fn mean_interval(&self) -> Duration {
        match self {
            AiperfPace::Poisson { rate, .. }
            | AiperfPace::Gamma { rate, .. }
            | AiperfPace::Constant { rate }
            | AiperfPace::UserCentric { rate, .. } => seconds(1.0 / rate),
            AiperfPace::Burst => Duration::ZERO,
        }
    }
}

/// What AIPerf 0.13's credit issuer (`credit/issuer.py`) does to each credit beyond pacing it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AiperfCredits {
    /// `--prefill-concurrency`: a second slot every request (a continuation turn too) must hold from its issue
    /// to its first token (or its return without one), acquired after the session slot; a rate's interval that
    /// finds none free sends nothing, a continuation waits for one.
    pub prefill_concurrency: Option<u32>,
    /// `--warmup-prefill-concurrency` (else `--prefill-concurrency`): the warm-up phase's.
    pub warmup_prefill_concurrency: Option<u32>,
    /// `--request-cancellation-rate`/`-delay`: profiling requests the client abandons after they were sent.
    pub cancellation: Option<AiperfCancellation>,
    /// `--concurrency-ramp-duration`, `--prefill-concurrency-ramp-duration`: the profiling phase's ramps.
    pub ramps: AiperfRamps,
    /// `--warmup-concurrency-ramp-duration`, `--warmup-prefill-concurrency-ramp-duration` (else the profiling
    /// phase's): the warm-up phase's.
    pub warmup_ramps: AiperfRamps,
    /// `--request-rate-series` (a config phase's `rateSeries`): the profiling phase's rate over time.
    pub rate_series: Option<AiperfRateSeries>,
}

/// AIPerf 0.13's request-rate series (`config/rate_series.py`, `timing/rate_series.py` `RateSeriesController`):
/// control points `(time_s, qps)`, at least two, times strictly increasing from 0 or later. From the end of the
/// phase's rate ramp (else its start) the rate is set to the series' value at once and every
/// [`AIPERF_RATE_RAMP_UPDATE`] after: the first point's rate before it, linear between points, the last point's
/// rate from it on (the series then stops).
#[derive(Debug, Clone, PartialEq)]
pub struct AiperfRateSeries {
    pub points: std::sync::Arc<[(f64, f64)]>,
}

impl AiperfRateSeries {
    /// `RateSeriesController.value_at`: the rate `elapsed_s` into the series.
    pub fn value_at(&self, elapsed_s: f64) -> f64 {
        let points = &self.points;
        let (Some(first), Some(last)) = (points.first(), points.last()) else {
            return 0.0;
        };
        if elapsed_s <= first.0 {
            return first.1;
        }
        if elapsed_s >= last.0 {
            return last.1;
        }
        // `bisect_right(times, elapsed)`: the first point after `elapsed`.
        let right = points.partition_point(|p| p.0 <= elapsed_s);
        let ((t0, q0), (t1, q1)) = (points[right - 1], points[right]);
        q0 + (q1 - q0) * ((elapsed_s - t0) / (t1 - t0))
    }

    /// When the series reaches its last point, from its start.
    pub fn end_s(&self) -> f64 {
        self.points.last().map_or(0.0, |p| p.0)
    }
}

/// AIPerf 0.13's concurrency rampers (`timing/phase/runner.py` `_create_rampers`, `timing/ramping.py`): a phase's
/// session (or prefill) slots start at 1 and grow by one at a time, linearly, reaching the target `duration` after
/// the phase started — slot count `v` from `duration · (v − 1) / (target − 1)` on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AiperfRamps {
    pub session: Option<Duration>,
    pub prefill: Option<Duration>,
    /// `--request-rate-ramp-duration`: the rate starts at `rate · update / duration` and is raised every
    /// [`AIPERF_RATE_RAMP_UPDATE`] to `start + (rate − start) · elapsed / duration` (`Ramper._run_continuous`,
    /// `BaseRampStrategy.value_at`), the rate itself once the duration has passed; each change reschedules the
    /// next send to the earlier of its target and now plus a fresh interval at the new rate
    /// (`RequestRateStrategy._reschedule_for_rate_update`).
    pub rate: Option<Duration>,
}

/// AIPerf's `Environment.TIMING.RATE_RAMP_UPDATE_INTERVAL` default: how often a rate ramp updates the rate.
pub const AIPERF_RATE_RAMP_UPDATE: Duration = Duration::from_millis(100);

/// When each slot of a linear ramp from 1 to `target` over `duration` is added, from the phase's start (AIPerf's
/// `LinearStrategy` stepping by one: `time_at_next = duration · (next − start) / (target − start)`).
pub fn aiperf_ramp_steps(target: u32, duration: Duration) -> Vec<Duration> {
    if target <= 1 {
        return Vec::new();
    }
    let range = f64::from(target - 1);
    (2..=target)
        .map(|v| duration.mul_f64(f64::from(v - 1) / range))
        .collect()
}

/// AIPerf 0.13's `RequestCancellationSimulator` (`timing/request_cancellation.py`): each profiling credit is
/// cancelled when `random() < percent / 100` from a CPython `random.Random` seeded with
/// `rng.derive("timing.request.cancellation")` of `seed`, one draw per credit in issue order (a new generator
/// for each phase; warm-up credits draw nothing); a cancelled request is abandoned `delay` after it was fully
/// written, whatever had arrived of its answer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AiperfCancellation {
    /// 0 < percent ≤ 100.
    pub percent: f64,
    pub delay: Duration,
    pub seed: u64,
}

/// The component name AIPerf 0.13 derives its cancellation generator's seed from.
const AIPERF_CANCELLATION_RNG: &str = "timing.request.cancellation";

impl AiperfCancellation {
    /// A new generator of the phase's decisions (AIPerf makes one per phase runner).
    pub fn decisions(&self) -> AiperfCancellations {
        AiperfCancellations {
            rng: PyRandom::seed(aiperf_derived_seed(self.seed, AIPERF_CANCELLATION_RNG)),
            rate: self.percent / 100.0,
            delay: self.delay,
        }
    }
}

/// The per-credit decisions of an [`AiperfCancellation`]: `Some(delay)` for a credit to cancel.
pub struct AiperfCancellations {
    rng: PyRandom,
    rate: f64,
    delay: Duration,
}

impl AiperfCancellations {
    /// The next issued credit's decision (`next_cancellation_delay_ns`).
    pub fn next_credit(&mut self) -> Option<Duration> {
        (self.rng.random() < self.rate).then_some(self.delay)
    }
}

/// The endless intervals of an [`AiperfPace`] ([`AiperfPace::intervals`]).
pub struct AiperfIntervals {
    pace: AiperfPace,
    rng: Option<PyRandom>,
}

impl AiperfIntervals {
    /// The pace's rate (none for a burst).
    pub fn rate(&self) -> Option<f64> {
        match self.pace {
            AiperfPace::Poisson { rate, .. }
            | AiperfPace::Gamma { rate, .. }
            | AiperfPace::Constant { rate }
            | AiperfPace::UserCentric { rate, .. } => Some(rate),
            AiperfPace::Burst => None,
        }
    }

    /// Changes the rate of the intervals still to be drawn (`set_rate`), the generator's state kept.
    pub fn set_rate(&mut self, new_rate: f64) {
        match &mut self.pace {
            AiperfPace::Poisson { rate, .. }
            | AiperfPace::Gamma { rate, .. }
            | AiperfPace::Constant { rate }
            | AiperfPace::UserCentric { rate, .. } => *rate = new_rate,
            AiperfPace::Burst => {}
        }
    }
}

impl Iterator for AiperfIntervals {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        Some(match (self.pace, self.rng.as_mut()) {
            (AiperfPace::Poisson { rate, .. }, Some(rng)) => seconds(rng.expovariate(rate)),
            // The rate and smoothness are checked positive when read, so the draw is always made.
            (
                AiperfPace::Gamma {
                    rate, smoothness, ..
                },
                Some(rng),
            ) => seconds(
                rng.gammavariate(smoothness, 1.0 / (rate * smoothness))
                    .unwrap_or(0.0),
            ),
            (AiperfPace::Constant { rate }, _) => seconds(1.0 / rate),
            (
                AiperfPace::Poisson { .. }
                | AiperfPace::Gamma { .. }
                | AiperfPace::Burst
                | AiperfPace::UserCentric { .. },
                _,
            ) => Duration::ZERO,
        })
    }
}

/// `s` seconds, saturating (a rate is checked positive and finite, so this only guards the arithmetic).
fn seconds(s: f64) -> Duration {
    Duration::try_from_secs_f64(s.max(0.0)).unwrap_or(Duration::MAX)
}

/// An adaptive sweep; see `Sweep::stages` for how the measured figures become stages.
#[derive(Debug, Clone, PartialEq)]
pub enum Sweep {
    /// inference-perf `load.sweep`: a probe finds the saturation rate, then `num_stages` stages
    /// of `stage_duration` at [`inference_perf_sweep_rates`].
    InferencePerf {
        process: SweepProcess,
        progression: SweepProgression,
        num_stages: u32,
        stage_duration: Duration,
        /// Requests of the saturation probe (`sweep.num_requests`).
        num_requests: Option<u64>,
        timeout: Option<Duration>,
        saturation_percentile: Option<f64>,
    },
    /// guidellm `sweep`: synchronous, throughput, then `size − 2` rates
    /// `linspace(sync_rate, throughput_rate, size − 1)[1:]` of `process` ([`guidellm_sweep_rates`]), each capped at
    /// `max_concurrency` requests in flight.
    Guidellm {
        size: u32,
        process: SweepProcess,
        limit: StageLimit,
        /// The sweep's `max_concurrency` (guidellm's default for a sweep: 512), which its throughput stage and
        /// every rate stage keep in flight at most.
        max_concurrency: u32,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SweepProcess {
    Constant,
    Poisson,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SweepProgression {
    Linear,
    Geometric,
}

/// Figures measured during a sweep.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SweepMeasurements {
    /// inference-perf: the saturation rate found by the probe (requests/s).
    pub saturation_rate: f64,
    /// guidellm: the synchronous benchmark's successful request rate.
    pub synchronous_rate: f64,
    /// guidellm: the throughput benchmark's successful request rate.
    pub throughput_rate: f64,
}

impl Sweep {
    /// The rate stages that follow the measuring phase.
    pub fn stages(&self, measured: &SweepMeasurements) -> Vec<Stage> {
        match self {
            Sweep::InferencePerf {
                process,
                progression,
                num_stages,
                stage_duration,
                ..
            } => inference_perf_sweep_rates(measured.saturation_rate, *num_stages, *progression)
                .into_iter()
                .map(|rate| {
                    let (load, arrival) = match process {
                        SweepProcess::Constant => (
                            LoadKind::Constant,
                            Arrival::InferencePerfConstant {
                                rate,
                                duration: *stage_duration,
                            },
                        ),
                        SweepProcess::Poisson => (
                            LoadKind::Poisson,
                            Arrival::InferencePerfPoisson {
                                rate,
                                duration: *stage_duration,
                            },
                        ),
                    };
                    Stage {
                        load,
                        arrival,
                        limit: StageLimit::duration(*stage_duration),
                        max_concurrency: None,
                        warmup: None,
                        cooldown: None,
                    }
                })
                .collect(),
            Sweep::Guidellm {
                size,
                process,
                limit,
                max_concurrency,
            } => guidellm_sweep_rates(measured.synchronous_rate, measured.throughput_rate, *size)
                .into_iter()
                .map(|rate| {
                    // guidellm's sweep builds its constant strategies without the profile's ramp-up.
                    let (load, arrival) = match process {
                        SweepProcess::Constant => (
                            LoadKind::Constant,
                            Arrival::GuidellmConstant {
                                rate,
                                rampup: Duration::ZERO,
                            },
                        ),
                        SweepProcess::Poisson => {
                            (LoadKind::Poisson, Arrival::GuidellmPoisson { rate })
                        }
                    };
                    Stage {
                        load,
                        arrival,
                        limit: limit.clone(),
                        max_concurrency: Some(*max_concurrency),
                        warmup: None,
                        cooldown: None,
                    }
                })
                .collect(),
        }
    }
}

/// inference-perf's `generateRates` (`loadgen/load_generator.py`): geometric → `round(1 + sat − g, 2)` for g in
/// `np.geomspace(sat, 1, n)`; linear → `round(r, 2)` for r in `np.linspace(1, sat, n)`. Rounded as numpy rounds a
/// float64 (`np.round`: × 100, round half to even, ÷ 100).
pub fn inference_perf_sweep_rates(
    saturation: f64,
    stages: u32,
    progression: SweepProgression,
) -> Vec<f64> {
    let n = stages as usize;
    let rates = match progression {
        SweepProgression::Linear => linspace(1.0, saturation, n),
        SweepProgression::Geometric => geomspace(saturation, 1.0, n)
            .into_iter()
            .map(|g| 1.0 + saturation - g)
            .collect(),
    };
    rates.into_iter().map(|r| numpy_round(r, 2)).collect()
}

/// guidellm's sweep rates after its synchronous and throughput benchmarks (`profiles/sweep.py`):
/// `np.linspace(synchronous, throughput, size − 1)[1:]`, unrounded.
pub(crate) fn guidellm_sweep_rates(synchronous: f64, throughput: f64, size: u32) -> Vec<f64> {
    let n = (size as usize).saturating_sub(1);
    linspace(synchronous, throughput, n)
        .into_iter()
        .skip(1)
        .collect()
}

/// numpy's `round(x, decimals)` of a float64: `rint(x · 10^d) / 10^d`, halves to even.
fn numpy_round(x: f64, decimals: i32) -> f64 {
    let scale = 10f64.powi(decimals);
    (x * scale).round_ties_even() / scale
}

/// numpy's `linspace(a, b, n)` (both ends included): `i · step + a` with `step = (b − a)/(n − 1)`, the last
/// value exactly `b`.
fn linspace(a: f64, b: f64, n: usize) -> Vec<f64> {
    match n {
        0 => Vec::new(),
        1 => vec![a],
        _ => {
            let step = (b - a) / (n - 1) as f64;
            (0..n)
                .map(|i| if i == n - 1 { b } else { i as f64 * step + a })
                .collect()
        }
    }
}

/// numpy's `geomspace(a, b, n)` for positive a and b: `10 ** linspace(log10 a, log10 b, n)`, the ends exactly a
/// and b.
fn geomspace(a: f64, b: f64, n: usize) -> Vec<f64> {
    linspace(a.log10(), b.log10(), n)
        .into_iter()
        .enumerate()
        .map(|(i, l)| match i {
            0 => a,
            _ if i == n - 1 => b,
            _ => 10f64.powf(l),
        })
        .collect()
}

/// When a stage stops. Both set: whichever comes first.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StageLimit {
    /// guidellm `max_duration`, inference-perf rate-stage `duration`.
    pub duration: Option<Duration>,
    /// guidellm `max_requests`, vllm `--num-prompts`, inference-perf `num_requests`.
    pub requests: Option<u64>,
    /// guidellm `max_errors`: stop once this many requests of the stage have errored.
    pub max_errors: Option<ErrorLimit<u64>>,
    /// guidellm `max_error_rate`: stop once the errored share of the last `window` finished requests reaches
    /// `rate` (checked only after `window` requests finished).
    pub max_error_rate: Option<ErrorLimit<WindowedErrorRate>>,
    /// guidellm `max_global_error_rate`: stop once errored / finished over the whole stage reaches `rate`
    /// (checked only after `minimum` requests finished).
    pub max_global_error_rate: Option<ErrorLimit<GlobalErrorRate>>,
    /// guidellm `over_saturation`: stop (or, in `monitor` mode, only report) once the stage's in-flight count and
    /// TTFT rise together ([`super::over_saturation`]).
    pub over_saturation: Option<super::over_saturation::OverSaturation>,
    /// AIPerf `--failed-request-threshold`: stop the whole run once the stage's errored share exceeds the ratio.
    pub failed_request_threshold: Option<FailedRequestThreshold>,
}

/// AIPerf `--failed-request-threshold` (`records/records_manager.py` `_maybe_trigger_failed_request_abort`): once at
/// least `grace` of the phase's measured requests (warm-ups never count) have finished, the run is cancelled the
/// first time errored / finished is strictly above `ratio` (what was in flight is cancelled, every record kept,
/// and the run exits non-zero).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FailedRequestThreshold {
    /// In [0, 1].
    pub ratio: f64,
    /// `max(concurrency, 10)`: the phase's concurrency, 1 when it has none.
    pub grace: u64,
}

/// An error stop condition and how far its stop reaches (guidellm `stopping_scope`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ErrorLimit<T> {
    pub limit: T,
    pub scope: StopScope,
}

/// What an error stop condition ends when it trips.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StopScope {
    /// guidellm `current` (its default): this stage only; later stages run.
    #[default]
    Stage,
    /// guidellm `all`: this stage and every later one.
    Run,
}

/// guidellm `max_error_rate {rate, window}` (window default 30).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WindowedErrorRate {
    /// In (0, 1).
    pub rate: f64,
    pub window: u64,
}

/// guidellm `max_global_error_rate {rate, minimum}` (minimum default 30).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GlobalErrorRate {
    /// In (0, 1).
    pub rate: f64,
    pub minimum: u64,
}

/// guidellm's defaults for the error-rate windows (`settings.constraint_error_window_size`,
/// `settings.constraint_error_min_processed`).
pub(crate) const GUIDELLM_ERROR_WINDOW: u64 = 30;
pub(crate) const GUIDELLM_ERROR_MIN_PROCESSED: u64 = 30;

/// A stage's warm-up or cool-down: requests sent like any other but left out of the stage's metrics.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Transient {
    /// guidellm ≤ v0.3 `warmup_percent` / `cooldown_percent` (a fraction in (0, 1]): a request is left out when
    /// its completion index is within the first (last) `fraction × max_requests`, or when it started within
    /// the first (last) `fraction × max_duration` of the stage (`aggregator.py`).
    GuidellmFraction { fraction: f64 },
    /// guidellm ≥ v0.4 `TransientPhaseConfig`: the stage's measurement window starts after (ends before) the
    /// phase, and only requests overlapping the window are measured (`benchmark/schemas/base.py`).
    GuidellmPhase(TransientPhase),
}

/// guidellm's `TransientPhaseConfig {percent, value, mode}`. A bare number `n` in a profile is
/// `percent = n` when `n < 1`, else `value = n`.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TransientPhase {
    /// A fraction in [0, 1) of the stage's duration or request budget.
    pub percent: Option<f64>,
    /// Seconds or requests, by `mode`.
    pub value: Option<f64>,
    pub mode: TransientMode,
}

/// How a [`TransientPhase`] is measured (guidellm default `prefer_duration`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TransientMode {
    Duration,
    Requests,
    #[default]
    PreferDuration,
    PreferRequests,
    Both,
}

impl StageLimit {
    pub fn duration(d: Duration) -> Self {
        StageLimit {
            duration: Some(d),
            ..StageLimit::default()
        }
    }

    pub fn requests(n: u64) -> Self {
        StageLimit {
            requests: Some(n),
            ..StageLimit::default()
        }
    }
}

/// Process-level sizing as the profile asks for it (the engine may size from the cgroup).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct WorkerSettings {
    pub num_workers: Option<u32>,
    pub worker_max_concurrency: Option<u32>,
    pub worker_max_tcp_connections: Option<u32>,
}

/// What to report.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportOptions {
    pub summary: bool,
    pub per_stage: bool,
    pub per_request: bool,
    /// Percentiles to report, as written (e.g. `0.1`, `99.9`).
    pub percentiles: Vec<f64>,
    /// vllm `--percentile-metrics` (e.g. `ttft`, `tpot`, `itl`, `e2el`); empty = tool default.
    pub percentile_metrics: Vec<String>,
    /// inference-perf `use_server_output_tokens`.
    pub use_server_output_tokens: bool,
    /// Where the tool would write results (inference-perf `storage.local_storage.path`,
    /// vllm `result-dir`); llmbench writes to its `--output` regardless.
    pub output_path: Option<String>,
    /// inference-perf `report_file_prefix`, vllm `result-filename`.
    pub file_name: Option<String>,
    /// inference-perf `report.prometheus.summary` (default true): `summary_prometheus_metrics.json`.
    pub prometheus_summary: bool,
    /// inference-perf `report.prometheus.per_stage` (default false): `stage_N_prometheus_metrics.json`.
    pub prometheus_per_stage: bool,
    /// inference-perf `report.session_lifecycle.summary` (default true): `summary_session_lifecycle_metrics.json`.
    pub session_summary: bool,
    /// inference-perf `report.session_lifecycle.per_stage` (default true): `stage_N_session_lifecycle_metrics.json`.
    pub session_per_stage: bool,
    /// inference-perf `report.session_lifecycle.per_session` (default false): `per_session_lifecycle_metrics.json`.
    pub session_per_session: bool,
    /// inference-perf `report.request_lifecycle.per_adapter` (default true): `adapter_{name}_lifecycle_metrics.json`
    /// for each LoRA adapter that requests went to.
    pub per_adapter: bool,
    /// inference-perf `report.request_lifecycle.per_adapter_stage` (default false):
    /// `adapter_{name}_stage_{N}_lifecycle_metrics.json`.
    pub per_adapter_stage: bool,
    /// An AIPerf config's profiling phase names, one per stage, when it has several (empty: one phase,
    /// `profiling`).
    pub aiperf_phases: Vec<String>,
}

/// inference-perf's and guidellm's default percentiles.
pub const DEFAULT_PERCENTILES: [f64; 11] = [
    0.1, 1.0, 5.0, 10.0, 25.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.9,
];

impl Default for ReportOptions {
    fn default() -> Self {
        ReportOptions {
            summary: true,
            per_stage: true,
            per_request: false,
            percentiles: DEFAULT_PERCENTILES.to_vec(),
            percentile_metrics: Vec::new(),
            use_server_output_tokens: false,
            output_path: None,
            file_name: None,
            prometheus_summary: true,
            prometheus_per_stage: false,
            session_summary: true,
            session_per_stage: true,
            session_per_session: false,
            per_adapter: true,
            per_adapter_stage: false,
            aiperf_phases: Vec::new(),
        }
    }
}

/// A latency bound for goodput.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GoodputConstraint {
    pub metric: SloMetric,
    pub limit: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SloMetric {
    Ttft,
    Tpot,
    Itl,
    Ntpot,
    /// inference-perf `request_latency`, vllm `e2el`.
    E2e,
}

/// The tokenizer the profile names.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenizerSpec {
    /// Hub id or local path.
    pub name_or_path: String,
    /// inference-perf `tokenizer.token` (a hub token written in the profile).
    pub token: Option<String>,
    /// Recorded for fidelity; the `tokenizers` crate never runs model code.
    pub trust_remote_code: bool,
}

/// Where prompts come from and how long prompts and outputs are.
#[derive(Debug, Clone, PartialEq)]
pub enum DataSpec {
    /// inference-perf `mock` (its default): a fixed placeholder prompt.
    Mock,
    /// Generated prompts of sampled token lengths (inference-perf `random` / `synthetic`,
    /// vllm `random`).
    Random(RandomData),
    /// Groups of prompts sharing a system prompt (inference-perf `shared_prefix`).
    SharedPrefix(SharedPrefix),
    /// guidellm `synthetic_text`.
    SyntheticText(SyntheticText),
    /// ShareGPT conversations (inference-perf `shareGPT`, vllm `sharegpt`).
    ShareGpt(ShareGpt),
    /// vllm `sonnet`: lines of a poem, with a shared prefix.
    Sonnet(Sonnet),
    /// A dataset file (vllm `custom`: JSONL with a `prompt` field).
    File(DatasetFile),
    /// guidellm data from a local file (`json_file`, `csv_file`, `text_file`, or a bare path): each row becomes one
    /// request through guidellm's default column mapper.
    GuidellmFile(GuidellmFile),
    /// vLLM's `burstgpt`: rows of a BurstGPT CSV sampled as `BurstGPTDataset` samples them, each sending a prompt
    /// of the row's request tokens for its response tokens.
    BurstGpt(BurstGpt),
    /// vLLM's `hf` dataset from a local copy of a Hugging Face dataset, read as the `HuggingFaceDataset` subclass
    /// vLLM picks by `dataset-path` or `hf-name`.
    VllmHf(VllmHf),
    /// inference-perf `conversation_replay`: synthetic multi-turn agentic conversations.
    ConversationReplay(ConversationReplay),
    /// AIPerf `mooncake_trace`: JSONL records whose `hash_ids` name shared prompt blocks.
    MooncakeTrace(MooncakeTraceData),
    /// AIPerf's synthetic conversations of several turns, or with a prompt prefix pool.
    AiperfConversations(AiperfConversations),
    /// AIPerf's synthetic rankings dataset (`SyntheticRankingsDatasetComposer`): each entry one query and its
    /// passages, for the rankings endpoint types.
    AiperfRankings(AiperfRankings),
    /// AIPerf's rankings endpoint types over a `single_turn` `--input-file`: each line one query and its passages,
    /// from its texts named `query`/`queries` and `passages` (`prompts/aiperf_rankings_file.rs`).
    AiperfRankingsFile(AiperfRankingsFile),
    /// AIPerf `--input-file` with `--custom-dataset-type single_turn`, `multi_turn` or `random_pool`.
    AiperfFile(AiperfFile),
    /// inference-perf `random` data with `data.trace`: one prompt of each row's `ContextTokens` random tokens
    /// and `max_tokens` of its `GeneratedTokens` (`datagen/synthetic/random_datagen.py`).
    AzureTrace(AzureTraceData),
    /// inference-perf `otel_trace_replay` (OpenTelemetry traces) or `weka_trace_replay` (WEKA agent traces), one
    /// session per trace, replayed as graphs of dependent calls (`trace_session_replay` load only).
    OtelTrace(OtelTraceData),
    /// inference-perf `visionarena`: real image+prompt pairs from a local copy of `lmarena-ai/VisionArena-Chat`.
    VisionArena(VisionArenaData),
    /// guidellm `trace_synthetic`: rows of timestamps and token counts, replayed by the `replay` profile
    /// ([`super::guidellm_replay`]).
    GuidellmTrace(super::guidellm_replay::GuidellmTrace),
}

/// inference-perf `data.visionarena` (`VisionArenaConfig`, inference_perf/config/datagen/visionarena.py at
/// kubernetes-sigs/inference-perf 7de5ef2), read from a local directory as `load_dataset(dir, streaming=True,
/// split=hf_split)` reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct VisionArenaData {
    /// `hf_dataset_name`: a local directory (a Hub id is refused: llmbench downloads nothing).
    pub path: String,
    /// `hf_split` (`train`).
    pub split: String,
    /// `num_rows` (1000): the usable rows kept in the pool, the first ones in file order.
    pub num_rows: u64,
    /// `max_images_per_request` (1): a row's image list is cut to this many before its images are read.
    pub max_images_per_request: u64,
    /// `insertion_point` (0.0).
    pub insertion_point: ArenaPoint,
}

/// `VisionArenaConfig.insertion_point`, as `sample_insertion_point` resolves it per image with request
/// `data_index`'s `np.random.default_rng(data_index)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ArenaPoint {
    /// A number, or a `fixed` distribution (`int(mean)`, no draw): every image's point.
    At(f64),
    /// `null`: `rng.uniform(0.0, 1.0)` per image.
    Uniform,
    /// A `uniform` distribution (`sample_from_distribution`): `rng.uniform(min, max + 1)` clipped to `[min, max]`
    /// and rounded half to even (`np.round`).
    UniformInts { min: i64, max: i64 },
}

/// inference-perf `data.otel_trace_replay` (`config/datagen/replay.py::OTelTraceReplayConfig`), the keys that
/// change what is sent; `use_static_model`, `static_model_name` and `model_mapping` are checked as upstream
/// checks them and change nothing (upstream sends the server's `model_name` on every request).
#[derive(Debug, Clone, PartialEq)]
pub struct OtelTraceData {
    pub source: OtelTraceSource,
    /// `include_errors` (true): replay spans whose status is an error.
    pub include_errors: bool,
    /// `skip_invalid_files` (false): a file that is not JSON is left out instead of failing the run.
    pub skip_invalid_files: bool,
    /// `max_wait_ms` (15000): the recorded wait after a call's predecessors is capped at this.
    pub max_wait_ms: u64,
    /// `predecessor_wait_timeout_sec` (3600; 0 = forever): a call whose predecessors take longer fails.
    pub predecessor_wait_timeout: Option<Duration>,
    /// `disable_output_substitution` (false): send the recorded messages instead of the live answers.
    pub disable_output_substitution: bool,
    /// `inject_random_session_id` (false): each session's unique messages start with `[SESS:<16 hex>] `, drawn
    /// per session, so sessions (and runs) do not share cached prefixes.
    pub inject_random_session_id: bool,
    /// Which kind of trace the files hold.
    pub format: SessionTraceFormat,
}

/// The trace format of a session replay.
#[derive(Debug, Clone, PartialEq)]
pub enum SessionTraceFormat {
    /// `otel_trace_replay`: OpenTelemetry spans.
    Otel,
    /// `weka_trace_replay`: WEKA KV-cache-tester agent traces, their prompts rebuilt from block hash ids
    /// (`llmbench_data::weka_trace`).
    Weka(WekaTraceOptions),
}

/// inference-perf `data.weka_trace_replay`'s own keys (`WekaTraceReplayConfig`), and `data.corpus_file_path`.
#[derive(Debug, Clone, PartialEq)]
pub struct WekaTraceOptions {
    /// `data.corpus_file_path`: the text each hash id's tokens are cut from (after inference-perf's instruction
    /// line), tokenized with the run's tokenizer.
    pub corpus_file: String,
    /// `default_block_size` (64): a trace's block size when its own `block_size` is 0.
    pub default_block_size: i64,
    /// `trace_idle_gap_cap_seconds` (60): longer gaps between request starts are shortened to this; 0 or less
    /// keeps the recorded times.
    pub idle_gap_cap_seconds: f64,
    /// `num_dataset_entries` (100): how many lines of an `hf_dataset_path` copy's `traces.jsonl` are read.
    pub num_dataset_entries: u64,
}

/// Where the traces are.
#[derive(Debug, Clone, PartialEq)]
pub enum OtelTraceSource {
    /// `trace_directory`: its `*.json` files, sorted by name.
    Directory(String),
    /// `trace_files`: these files, and the files their glob patterns (`*`, `?`, `**`) match (OTel only: the WEKA
    /// reader takes each entry as a path).
    Files(Vec<String>),
    /// `hf_dataset_path` (WEKA only): a local copy of the dataset, a directory holding its `traces.jsonl` or that
    /// file, read as inference-perf reads the file it downloads.
    HfCopy(String),
}

/// inference-perf `data.trace` (`format: AzurePublicDataset`).
#[derive(Debug, Clone, PartialEq)]
pub struct AzureTraceData {
    /// `data.trace.file`.
    pub path: String,
}

/// AIPerf's synthetic dataset when it is more than single prompts (`aiperf/dataset/composer/synthetic.py`):
/// `conversations` conversations, each of a number of turns drawn once, each turn with its own prompt length and
/// `max_tokens` drawn; the first turn of each starts with a prefix from the pool. See
/// `workload/aiperf_conversation.rs` for how AIPerf sends them.
#[derive(Debug, Clone, PartialEq)]
pub struct AiperfConversations {
    /// `--conversation-num` (default 100).
    pub conversations: u64,
    /// `--conversation-turn-mean`/`--conversation-turn-stddev`.
    pub turns: TokenLengths,
    /// `--isl`/`--isl-stddev`, drawn per turn.
    pub prompt: TokenLengths,
    /// `--osl`/`--osl-stddev`, drawn per turn; `None`: no `max_tokens` is sent.
    pub output: Option<TokenLengths>,
    /// `--prompt-prefix-pool-size` prefixes of `--prompt-prefix-length` tokens.
    pub prefix_pool: Option<AiperfPrefixPool>,
    /// `--conversation-turn-delay-*`: the think time drawn for every turn but the first; `None` without a mean.
    pub turn_delay: Option<AiperfTurnDelay>,
    /// `--dataset-sampling-strategy` (sequential for synthetic data).
    pub sampling: AiperfSamplingStrategy,
}

/// AIPerf 0.13's synthetic rankings entries (`dataset/composer/synthetic_rankings.py`, `config/dataset/content.py`
/// `RankingsConfig`): `entries` entries, each with `passages` passages. The passage counts are AIPerf's own draws
/// (`sample_positive_normal_integer(int(mean), int(stddev))` on `rng.derive("dataset.rankings.passages")`); the
/// query and passage lengths are drawn alike, with llmbench's generator.
#[derive(Debug, Clone, PartialEq)]
pub struct AiperfRankings {
    /// The dataset's entries (`--num-dataset-entries`, …, 100); requests reuse them in order.
    pub entries: u64,
    /// `--rankings-passages-mean` (10 when no rankings passage flag is given) and `-stddev` (0).
    pub passages_mean: u64,
    pub passages_stddev: u64,
    /// `--rankings-query-prompt-token-mean`/`-stddev` (32, 0).
    pub query: TokenLengths,
    /// `--rankings-passages-prompt-token-mean`/`-stddev` (128, 0), drawn per passage.
    pub passage: TokenLengths,
}

/// A `single_turn` file read by AIPerf 0.13's custom composer for a rankings endpoint type, read when the run
/// starts: one request per line, in file order and wrapping (the sequential sampler `single_turn` prefers).
#[derive(Debug, Clone, PartialEq)]
pub struct AiperfRankingsFile {
    pub path: String,
}

/// AIPerf's `--dataset-sampling-strategy` (`dataset/dataset_samplers.py`): which conversation each new session takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AiperfSamplingStrategy {
    /// In dataset order, wrapping.
    Sequential,
    /// `random.Random(derive("dataset.sampler.random")).choice`, with replacement.
    Random,
    /// numpy's shuffle (`derive("dataset.sampler.shuffle")`), gone through, shuffled again.
    Shuffle,
}

/// AIPerf 0.13's turn delay (`composer/synthetic.py` `_create_turn`): `sample_positive_normal_integer(int(mean),
/// int(stddev))` milliseconds times `ratio`, drawn for each turn but a conversation's first.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AiperfTurnDelay {
    pub mean_ms: f64,
    pub stddev_ms: f64,
    pub ratio: f64,
}

/// An AIPerf custom dataset file other than a Mooncake trace (`aiperf/dataset/loader/`), read when the run
/// starts; see `aiperf_dataset.rs` for each layout.
#[derive(Debug, Clone, PartialEq)]
pub struct AiperfFile {
    pub path: String,
    pub kind: AiperfFileKind,
    /// `--conversation-num`: how many conversations `random_pool` samples from its pool (the other layouts have
    /// one conversation per line or session).
    pub conversations: u64,
    /// `--osl`/`--osl-stddev`: every turn's `max_tokens`, drawn per turn (`_finalize_turn`); `None`: none sent.
    pub output: Option<TokenLengths>,
    /// The sampler: `--dataset-sampling-strategy` unless it is sequential and the loader prefers another
    /// (`config/dataset/resolver.py` `_resolve_sampling`: shuffle for `random_pool`).
    pub sampling: AiperfSamplingStrategy,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AiperfFileKind {
    SingleTurn,
    MultiTurn,
    RandomPool,
}

/// AIPerf's prefix prompt pool (`PromptGenerator._create_prefix_prompt_pool`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AiperfPrefixPool {
    pub size: u64,
    pub tokens: u64,
}

/// A Mooncake trace file and how its prompts are made (AIPerf `--input-file`, `--custom-dataset-type
/// mooncake_trace`).
#[derive(Debug, Clone, PartialEq)]
pub struct MooncakeTraceData {
    pub path: String,
    /// AIPerf `--isl-block-size` (512): the tokens of one hash block.
    pub block_size: u32,
}

/// inference-perf `data.conversation_replay` (`config/datagen/replay.py::ConversationReplayConfig`). A
/// distribution left out is `None`; the generator's fallbacks (10 turns, 512 input and 256 output tokens, no
/// dynamic prompt, no tool-call latency) are applied where the conversations are built.
#[derive(Debug, Clone, PartialEq)]
pub struct ConversationReplay {
    pub seed: u64,
    pub num_conversations: u64,
    pub shared_system_prompt_len: u64,
    pub dynamic_system_prompt_len: Option<TokenLengths>,
    pub turns_per_conversation: Option<TokenLengths>,
    pub input_tokens_per_turn: Option<TokenLengths>,
    pub output_tokens_per_turn: Option<TokenLengths>,
    /// Whole seconds after a successful answer before the conversation's next turn.
    pub tool_call_latency_sec: Option<TokenLengths>,
    /// Context window the sessions are truncated to; upstream assumes 225000 when unset.
    pub max_model_len: Option<u64>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RandomData {
    pub input: TokenLengths,
    pub output: TokenLengths,
    /// vllm `--random-prefix-len`: a fixed random prefix before every prompt.
    pub prefix_len: u64,
    pub text: PromptText,
    /// vLLM's `random-rerank` dataset: one query for every request, then the documents.
    pub rerank: Option<RandomRerank>,
    /// vLLM `random-mm`: the images each prompt carries after its text.
    pub images: Option<llmbench_data::image::RandomImages>,
}

/// vLLM's `RandomDatasetForReranking` (`vllm/benchmarks/datasets.py`): one query of about half the input length,
/// `num-prompts` documents of the rest, each request the query and `batch_size` documents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RandomRerank {
    /// Documents per request (`--random-batch-size`).
    pub batch_size: u64,
    /// Not `--no-reranker`: the query pairs with each document, a separator token between them; with it, the
    /// query is one more input of the batch.
    pub is_reranker: bool,
}

/// What prompt text is made of.
#[derive(Debug, Clone, PartialEq)]
pub enum PromptText {
    /// Random token ids decoded to text (inference-perf `random`, vllm `random`).
    RandomTokens,
    /// Text cut from a corpus (inference-perf `synthetic`; its built-in corpus when `path` is
    /// unset).
    Corpus { path: Option<String> },
}

#[derive(Debug, Clone, PartialEq)]
pub struct SharedPrefix {
    /// `num_groups` (alias `num_unique_system_prompts`).
    pub num_groups: u64,
    /// `num_prompts_per_group` (alias `num_users_per_system_prompt`).
    pub num_prompts_per_group: u64,
    pub system_prompt_len: TokenLengths,
    pub question_len: TokenLengths,
    pub output_len: TokenLengths,
    pub seed: Option<u64>,
    /// `enable_multi_turn_chat`: each group's user keeps its conversation and resends it.
    pub multi_turn: bool,
    /// Whose dataset this is, which decides the order and how lengths count special tokens.
    pub style: SharedPrefixStyle,
    /// inference-perf's `shared_prefix.multimodal.image`: images woven into each group's system prompt.
    pub prefix_images: Option<WovenImageSpec>,
    /// inference-perf's `data.multimodal.image` beside `shared_prefix`: images woven into each question.
    pub question_images: Option<WovenImageSpec>,
}

/// inference-perf's synthetic images (`ImageDatagenConfig`), as [`llmbench_data::image::WovenImages`] draws them.
#[derive(Debug, Clone, PartialEq)]
pub struct WovenImageSpec {
    /// `count`: images per request.
    pub count: TokenLengths,
    /// `insertion_point`; `None` draws one uniformly for each image.
    pub insertion_point: Option<f64>,
    /// `resolutions`; empty for the default 512 × 512.
    pub resolutions: Vec<llmbench_data::image::ImageBucket>,
    /// `resolutions` was a list, drawn from by weight.
    pub weighted: bool,
}

/// The tools that send groups of prompts sharing a prefix, each ordering and counting them its own way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SharedPrefixStyle {
    /// inference-perf's `shared_prefix`: groups interleaved in a seeded random order; each length counts the
    /// special tokens the tokenizer adds, as inference-perf does.
    #[default]
    InferencePerf,
    /// vLLM's `prefix_repetition` (`PrefixRepetitionRandomDataset`): exactly `prefix_len + suffix_len` tokens
    /// (the server adds its special tokens on top), shuffled by CPython's `random.shuffle` seeded with `--seed`
    /// unless `--disable-shuffle`.
    VllmPrefixRepetition { shuffle: bool },
}

#[derive(Debug, Clone, PartialEq)]
pub struct SyntheticText {
    pub prompt: TokenLengths,
    /// None: no `max_tokens` is sent, the server decides.
    pub output: Option<TokenLengths>,
    /// Turns per conversation (1 = single turn).
    pub turns: u32,
    pub prefix_buckets: Vec<PrefixBucket>,
    /// `data_loader.samples` / `samples` (1000).
    pub samples: u64,
    /// `delay` (with `delay_stdev`, `delay_min`, `delay_max`): the think time between a conversation's turns.
    pub think_time: Option<ThinkTime>,
    /// AIPerf's `--image-*` flags: the images each prompt carries after its text.
    pub images: Option<llmbench_data::image::NormalImages>,
}

/// guidellm's think time (`delay*` of synthetic data, `utils/random.py` `FloatRangeSampler`): one value per
/// conversation, drawn from a normal of `mean` and `stdev` clipped to [min, max] (min defaults to
/// max(0, mean − 5·stdev), max to mean + 5·stdev), uniform over [min, max] without a stdev, `mean` itself when
/// the bounds meet. A turn's next turn may go that long after its answer ended.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ThinkTime {
    pub mean: f64,
    pub stdev: Option<f64>,
    pub min: Option<f64>,
    pub max: Option<f64>,
}

impl ThinkTime {
    /// The bounds the sampler draws within, in seconds.
    pub fn bounds(&self) -> (f64, f64) {
        let stdev = self.stdev.filter(|s| *s > 0.0);
        let min = self.min.unwrap_or_else(|| match stdev {
            Some(s) => (self.mean - 5.0 * s).max(0.0),
            None => self.mean,
        });
        let max = self.max.unwrap_or(match stdev {
            Some(s) => self.mean + 5.0 * s,
            None => self.mean,
        });
        (min, max)
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PrefixBucket {
    pub prefix_tokens: u64,
    pub prefix_count: u64,
    /// Relative weight (guidellm default 100).
    pub bucket_weight: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ShareGpt {
    /// None: the tool's default download, which llmbench does not perform.
    pub path: Option<String>,
    /// inference-perf: input lengths outside `[min, max]` are filtered out.
    pub input_filter: Option<TokenLengths>,
    /// inference-perf: output length distribution; vllm `--sharegpt-output-len`: fixed.
    pub output: Option<TokenLengths>,
    /// inference-perf `output_distribution`: entries whose reference answer is outside `[min, max]` tokens are
    /// skipped, and the answer's own length is the request's `max_tokens`.
    pub output_filter: Option<TokenLengths>,
    /// vllm: shuffle the entries with the run's seed before taking them (unless `--disable-shuffle`);
    /// inference-perf reads the file in order.
    pub shuffle: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Sonnet {
    pub path: String,
    pub input_len: u64,
    pub output_len: u64,
    pub prefix_len: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DatasetFile {
    pub path: String,
    /// vllm `--custom-output-len`; None for `-1` (the dataset's own output lengths).
    pub output_len: Option<u64>,
    /// Shuffle the records with the run's seed before taking them (vllm, unless `--disable-shuffle`).
    pub shuffle: bool,
    /// Render each prompt through the tokenizer's chat template as one user turn (vllm without
    /// `--skip-chat-template`), with these extra template variables (`--chat-template-kwargs`).
    pub chat_template: Option<serde_json::Map<String, serde_json::Value>>,
    /// Which of vLLM's JSONL datasets reads the file.
    pub rows: DatasetRows,
}

/// How a vLLM JSONL dataset turns a record into a prompt.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum DatasetRows {
    /// `custom` (`CustomDataset`): each record's `prompt`, and its `output_tokens` with `custom-output-len -1`.
    #[default]
    Custom,
    /// `spec_bench` (`SpecBench`, Spec-Bench's `question.jsonl`): each record's first `turns` entry, only the
    /// records of `category` when one is given.
    SpecBench { category: Option<String> },
    /// `custom_mm` (`CustomMMDataset`): each record's `prompt`, never templated, with the first of its
    /// `image_files` as an `image_url` part (`process_image`: a path as a `file://` URL).
    CustomMm,
}

/// vLLM's `hf` dataset (`vllm/benchmarks/datasets.py` `get_samples`) read from local files: a directory laid out as
/// `load_dataset(path)` reads it (or one JSON file), its rows shuffled as `datasets` shuffles them.
#[derive(Debug, Clone, PartialEq)]
pub struct VllmHf {
    /// `dataset-path`: a directory of `.jsonl`/`.json` files (or one such file).
    pub path: String,
    /// Which `HuggingFaceDataset` subclass turns a row into a request.
    pub kind: HfDatasetKind,
    /// `hf-split`, or the split vLLM sets for the class.
    pub split: String,
    /// `hf-output-len`: every request's `max_tokens`; None for the class's own (a default, or the reference answer's
    /// length).
    pub output_len: Option<u64>,
    /// Loaded with `streaming=True` (vLLM's default; `no-stream` turns it off), which shuffles the files' order too.
    pub streaming: bool,
    /// Shuffled with `--seed` (unless `disable-shuffle`).
    pub shuffle: bool,
    /// Render each prompt through the tokenizer's chat template (the classes that do, unless `skip-chat-template`).
    pub chat_template: bool,
}

/// The text-only `HuggingFaceDataset` subclasses of vLLM that llmbench reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HfDatasetKind {
    /// `InstructCoderDataset` (`likaixin/InstructCoder`): `{input}\n\n{instruction} Just output the code, do not
    /// include any explanation.`, 200 tokens unless `hf-output-len`.
    InstructCoder,
    /// `MTBenchDataset` (`philschmid/mt-bench`): the first of `turns`, 256 tokens unless `hf-output-len`.
    MtBench,
    /// `AIMODataset` (`AI-MO/aimo-validation-aime`, `AI-MO/NuminaMath-1.5`, `AI-MO/NuminaMath-CoT`): `problem`, with
    /// `solution`'s length as `max_tokens` unless `hf-output-len`.
    Aimo,
    /// `ConversationDataset` (`Aeala/ShareGPT_Vicuna_unfiltered`): the first two of `conversations`.
    Conversation,
    /// `VisionArenaDataset` (`lmarena-ai/VisionArena-Chat`: `conversation[0][0]["content"]`;
    /// `lmarena-ai/vision-arena-bench-v0.1`, `bench`: `turns[0][0]["content"]`) with the first of its `images`,
    /// 128 tokens unless `hf-output-len`; the chat backend only.
    VisionArena { bench: bool },
}

/// vLLM's BurstGPT dataset (`BurstGPTDataset`, vllm/benchmarks/datasets.py) from a local CSV.
#[derive(Debug, Clone, PartialEq)]
pub struct BurstGpt {
    pub path: String,
}

/// guidellm data read from a local file (`data/deserializers/file.py`), mapped to requests by its generative column
/// mapper (`data/preprocessors/mappers.py`) and request handlers (`backends/openai/request_handlers.py`).
#[derive(Debug, Clone, PartialEq)]
pub struct GuidellmFile {
    pub path: String,
    pub format: GuidellmFileFormat,
    /// `data_column_mapper.column_mappings`: per column type (`text_column`, `prefix_column`, …) the candidate
    /// column names, in priority order; given, they replace guidellm's defaults entirely, as upstream does.
    pub column_mappings: Option<Vec<(String, Vec<String>)>>,
    /// `data_loader.samples` / `data_samples`: only the first this many rows (guidellm refuses a file with fewer);
    /// None: every row, read again from the top once the file is used up.
    pub samples: Option<u64>,
    /// The backend's `max_tokens`, sent (without `ignore_eos`) when the rows carry no output token count.
    pub default_max_tokens: Option<u64>,
}

/// Which of guidellm's file deserializers reads the file, by its suffix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GuidellmFileFormat {
    /// `.json` (an array of records, or records one per line) and `.jsonl`.
    Json,
    /// `.csv`, with a header row.
    Csv,
    /// `.txt` / `.text`: each line (with its line break, as Python's `readlines`) is a row's `text`.
    Text,
    /// `.parquet` (`load_dataset("parquet", data_files=path)`): each row's columns.
    Parquet,
}

/// A token-length distribution, clipped to its bounds and rounded when sampled.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenLengths {
    pub shape: LengthShape,
    /// inference-perf `total_count`: how many lengths to pre-generate.
    pub total_count: Option<u64>,
}

impl TokenLengths {
    pub fn fixed(n: u64) -> Self {
        TokenLengths {
            shape: LengthShape::Fixed(n),
            total_count: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum LengthShape {
    Fixed(u64),
    /// Uniform integers in `[min, max]`.
    Uniform {
        min: u64,
        max: u64,
    },
    Normal {
        mean: f64,
        spread: Spread,
        min: u64,
        max: u64,
    },
    SkewNormal {
        mean: f64,
        spread: Spread,
        skew: f64,
        min: u64,
        max: u64,
    },
    LogNormal {
        mean: f64,
        spread: Spread,
        min: u64,
        max: u64,
    },
    Poisson {
        mean: f64,
        min: u64,
        max: u64,
    },
    /// AIPerf's `sample_positive_normal_integer` (`aiperf/dataset/utils.py`): normal draws, redrawn until one is
    /// at least 0, rounded up; no upper bound.
    PositiveNormal {
        mean: f64,
        std_dev: f64,
    },
    /// vllm `--random-*-len L --random-range-ratio r`: uniform in `[L·(1−r), L·(1+r)]`.
    RangeRatio {
        len: u64,
        ratio: f64,
    },
}

/// A distribution's spread, as written: inference-perf accepts either (exclusively).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Spread {
    StdDev(f64),
    Variance(f64),
}

impl Spread {
    pub fn std_dev(self) -> f64 {
        match self {
            Spread::StdDev(s) => s,
            Spread::Variance(v) => v.sqrt(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `RequestCancellationSimulator` with `--random-seed 7`, 50 %: CPython's
    /// `random.Random(int.from_bytes(sha256(b"7:timing.request.cancellation").digest()[:8], "big"))` draws
    /// 0.5931, 0.2288, 0.4141, 0.6010, 0.2441, 0.2316, 0.6101, 0.5867, 0.3892, 0.7711: the 2nd, 3rd, 5th, 6th and
    /// 9th credits are cancelled; each phase starts from the first draw again.
    /// `RateSeriesController.value_at` over (0 s, 2), (1 s, 10), (3 s, 4): the first rate before and at the first
    /// point, linear between points (`bisect_right` picks the segment: at 1 s exactly, the one that starts there),
    /// the last rate from the last point on.
    #[test]
    fn a_rate_series_interpolates_its_points_and_holds_its_ends() {
        let series = AiperfRateSeries {
            points: vec![(0.0, 2.0), (1.0, 10.0), (3.0, 4.0)].into(),
        };
        let at: Vec<f64> = [-1.0, 0.0, 0.5, 1.0, 2.0, 2.5, 3.0, 9.0]
            .iter()
            .map(|t| series.value_at(*t))
            .collect();
        assert_eq!(at, [2.0, 2.0, 6.0, 10.0, 7.0, 5.5, 4.0, 4.0]);
        assert_eq!(series.end_s(), 3.0);
    }

    #[test]
    fn cancellation_decisions_are_aiperfs_derived_random_draws_below_the_rate() {
        let cancellation = AiperfCancellation {
            percent: 50.0,
            delay: Duration::from_millis(250),
            seed: 7,
        };
        let mut decisions = cancellation.decisions();
        let cancelled: Vec<bool> = (0..10).map(|_| decisions.next_credit().is_some()).collect();
        let t = true;
        let f = false;
        assert_eq!(cancelled, [f, t, t, f, t, t, f, f, t, f]);
        let mut fresh = cancellation.decisions();
        assert_eq!(fresh.next_credit(), None);
        assert_eq!(fresh.next_credit(), Some(Duration::from_millis(250)));
        let at_30: Vec<bool> = {
            let mut d = AiperfCancellation {
                percent: 30.0,
                ..cancellation
            }
            .decisions();
            (0..10).map(|_| d.next_credit().is_some()).collect()
        };
        assert_eq!(at_30, [f, t, f, f, t, t, f, f, f, f]);
    }

    #[test]
    fn query_parameters_are_appended_to_the_path_as_urlencode_quotes_them() {
        let api = Api {
            query: vec![("a b".into(), "x/y?".into()), ("n".into(), "é~_.-".into())],
            ..Api::default()
        };
        // urllib.parse.urlencode([("a b", "x/y?"), ("n", "é~_.-")]) == "a+b=x%2Fy%3F&n=%C3%A9~_.-"
        assert_eq!(api.target(), "/v1/completions?a+b=x%2Fy%3F&n=%C3%A9~_.-");
        let api = Api {
            endpoint: Some("/v1/completions?api-version=1".into()),
            query: vec![("k".into(), String::new())],
            ..Api::default()
        };
        assert_eq!(api.target(), "/v1/completions?api-version=1&k=");
        assert_eq!(Api::default().target(), "/v1/completions");
    }

    #[test]
    fn inference_perf_geometric_rates_crowd_towards_saturation_rounded_to_cents() {
        // geomspace(10, 1, 5) = 10, 10^0.75 = 5.6234, 10^0.5 = 3.1623, 10^0.25 = 1.7783, 1
        // → 1 + 10 − g = 1, 5.3766, 7.8377, 9.2217, 10 → round(·, 2).
        assert_eq!(
            inference_perf_sweep_rates(10.0, 5, SweepProgression::Geometric),
            [1.0, 5.38, 7.84, 9.22, 10.0]
        );
    }

    #[test]
    fn inference_perf_linear_rates_run_from_one_to_saturation_rounded_to_cents() {
        // linspace(1, 10, 5): step 9/4 = 2.25.
        assert_eq!(
            inference_perf_sweep_rates(10.0, 5, SweepProgression::Linear),
            [1.0, 3.25, 5.5, 7.75, 10.0]
        );
        // A saturation with more decimals is rounded too: linspace(1, 7.456, 3) = 1, 4.228, 7.456.
        assert_eq!(
            inference_perf_sweep_rates(7.456, 3, SweepProgression::Linear),
            [1.0, 4.23, 7.46]
        );
    }

    #[test]
    fn rounding_is_numpys_half_to_even_of_the_scaled_float() {
        // 0.125 · 100 = 12.5 exactly → 12; 0.375 · 100 = 37.5 → 38. 2.675 is 2.674999999999999822…, but its
        // product with 100 rounds to 267.5 → 268: numpy's 2.68, where Python's own (correctly rounded) `round`
        // of a float says 2.67.
        assert_eq!(numpy_round(0.125, 2), 0.12);
        assert_eq!(numpy_round(0.375, 2), 0.38);
        assert_eq!(numpy_round(2.675, 2), 2.68);
    }

    #[test]
    fn guidellm_rates_interpolate_between_synchronous_and_throughput() {
        // sweep_size 5: linspace(2, 17, 4) = 2, 7, 12, 17, without the synchronous rate it starts at.
        assert_eq!(guidellm_sweep_rates(2.0, 17.0, 5), [7.0, 12.0, 17.0]);
        // sweep_size 2 runs only synchronous and throughput; 3 adds the throughput rate once more.
        assert!(guidellm_sweep_rates(2.0, 17.0, 2).is_empty());
        assert_eq!(guidellm_sweep_rates(2.0, 17.0, 3), [17.0]);
        // numpy's i·step + start: linspace(0.3, 1.0, 4)[1] = 1 · (0.7/3) + 0.3.
        assert_eq!(
            guidellm_sweep_rates(0.3, 1.0, 5)[0],
            (1.0f64 - 0.3) / 3.0 + 0.3
        );
    }

    #[test]
    fn guidellm_sweep_stages_keep_the_sweeps_cap_and_limits() {
        let sweep = Sweep::Guidellm {
            size: 4,
            process: SweepProcess::Poisson,
            limit: StageLimit::requests(20),
            max_concurrency: 512,
        };
        let stages = sweep.stages(&SweepMeasurements {
            saturation_rate: 0.0,
            synchronous_rate: 1.0,
            throughput_rate: 5.0,
        });
        // linspace(1, 5, 3)[1:] = 3, 5.
        assert_eq!(
            stages.iter().map(|s| s.arrival.clone()).collect::<Vec<_>>(),
            [
                Arrival::GuidellmPoisson { rate: 3.0 },
                Arrival::GuidellmPoisson { rate: 5.0 }
            ]
        );
        assert!(stages.iter().all(|s| s.max_concurrency == Some(512)
            && s.limit == StageLimit::requests(20)
            && s.load == LoadKind::Poisson));
    }
}
