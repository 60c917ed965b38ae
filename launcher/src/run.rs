//! `llmbench run`: profile in, results out. Render the profile with the shared renderer, parse its dialect into
//! the workload model, build every prompt and request body before the clock starts, run the engine, then derive
//! the summary and every report from the raw records.
//!
//! The server is `--endpoint`, else the one the profile names, else the embedded simulator on loopback (so the
//! main job runs on a fresh machine with no cluster and no network). The command line beats the profile for the
//! model and the tokenizer too; the run's first line says where the server, the model and the tokenizer came from.
//!
//! A run never hangs and never loses what it measured: every request ends at its timeout at the latest; SIGTERM
//! and SIGINT stop issuing, give the requests in flight a grace period, record the rest as cancelled and still
//! write every report, marked interrupted; records are flushed as they finish, so a SIGKILL loses at most the last
//! few milliseconds of them; a results directory is never reused by accident.

mod api_key;
mod cache;
mod capacity;
mod fmperf;
mod mlperf;
pub mod nop;
mod output;
pub mod preflight;
mod profile;
mod replay;
mod runner;
mod server;
mod target;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use clap::Args;
use llmbench_core::harness::Harness;

pub use api_key::ApiKey;
pub use cache::{CacheResetError, reset_prefix_cache};
pub use output::{LOCK_FILE, OutputError, in_use, validate_run_id};
pub use runner::RunOutcome;
pub use server::ScrapePlan;
pub use target::{EndpointError, Server, UNSET_ENDPOINT};

use fmperf::FmperfRun;
use mlperf::MlperfRun;
use nop::NopRun;
use profile::ProfileRun;
use replay::{SessionReplay, TraceReplay};
use runner::Runner;

use crate::conversations::ConversationError;
use crate::data::DataError;
use crate::engine::{
    self, Clock, Control, EngineError, EnginePlan, FinishedStage, PlannedStage, PlannerError,
    Progress, Requests, Signal, StagePlanner, Stages, StopReason, Target, Transport,
};
use crate::metrics::{RunSummary, WriteSummaryError, write_compact_summary, write_summary_json};
use crate::plan::{PlanError, Shard, expected_size, stage_meta};
use crate::profile::{Edits, ProfileError, Template, TemplateSource, Values, render_edited};
use crate::prompts::{PromptError, PromptOrigin};
use crate::record::RequestRecord;
use crate::report::{
    self, CacheMeta, Formats, LLMBENCH_VERSION, PreflightMeta, ProfileNote, PromptsMeta,
    PromptsOrigin, RUN_META_SCHEMA, ReportError, ReportOptions, RunEnd, RunMeta, ServerMetricsMeta,
    ShardMeta, StageMeta,
};
use crate::request::BodyStyle;
use crate::sim::{self, SimConfig, SimError};
use crate::stack::profiler::{self, ProfilerHooks};
use crate::stack::{StackSource, StackSpec, identity};
use crate::tokenizer::TokenizerError;
use crate::workload::load_flags::{self, LoadFlagError, LoadFlags, LoadFlagsRecord};
use crate::workload::{
    Api, ApiKind, DataSpec, ParseOptions, Warning, Workload, WorkloadError, parse_profile,
};
use crate::{progress, wallclock};

/// How long requests in flight may still finish after SIGTERM or SIGINT before they are cancelled (`--interrupt-grace`'s
/// default, which a test holds to this value); the operator's launcher pods use it too.
pub use llmbench_core::launcher_command::DEFAULT_INTERRUPT_GRACE;

/// The model name the embedded simulator serves.
pub const SIM_MODEL: &str = "llmbench-sim";

/// Flags of `llmbench run`.
#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// The profile dialect: inference-perf, guidellm, vllm-benchmark, inferencemax, aiperf, mlperf, fmperf or nop.
    #[arg(long)]
    pub harness: Harness,
    /// A bundled profile name (e.g. sanity_random) or a profile file (yaml or yaml.in).
    #[arg(long, value_name = "NAME|FILE")]
    pub profile: String,
    /// The stack's OpenAI-compatible base URL. Without it, the server the profile names; without that either (an
    /// unset endpoint placeholder counts as none), the embedded simulator on loopback.
    #[arg(long, value_name = "URL")]
    pub endpoint: Option<String>,
    /// The served model name (fills REPLACE_ENV_LLMDBENCH_DEPLOY_CURRENT_MODEL). Default with the embedded
    /// simulator: llmbench-sim.
    #[arg(long)]
    pub model: Option<String>,
    /// The tokenizer used to build exact-length prompts: a tokenizer.json, a directory holding one, a Hugging Face
    /// model id (HF_TOKEN, HF_ENDPOINT and the hub cache are honoured), or `builtin`. Default: the profile's
    /// tokenizer, else the model; `builtin` with the embedded simulator.
    #[arg(long, value_name = "SPEC")]
    pub tokenizer: Option<String>,
    /// The model's context length (fills REPLACE_ENV_LLMDBENCH_DEPLOY_CURRENT_MAX_MODEL_LEN).
    #[arg(long, value_name = "TOKENS")]
    pub max_model_len: Option<u32>,
    /// A placeholder value, NAME=VALUE (NAME with or without the REPLACE_ENV_ prefix).
    #[arg(long = "set", value_name = "NAME=VALUE")]
    pub set: Vec<String>,
    /// A profile override, KEY=VALUE (see `llmbench render --help`). Every key of the path must exist, the last one
    /// too: a key that matches nothing fails the run, naming the nearest key (or the dialect's own path when KEY is
    /// another dialect's, e.g. `load.stages.0.rate` on a guidellm profile).
    #[arg(long = "override", value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,
    /// Create a profile key, KEY=VALUE: KEY is a path from the root whose last key is created under a mapping that
    /// exists (set when it exists); a missing parent or an index past a list's end still fails. Applied before
    /// --override, so an --override may set what it created.
    #[arg(long = "override-add", value_name = "KEY=VALUE")]
    pub override_add: Vec<String>,
    /// Results go to OUTPUT/RUN_ID/.
    #[arg(long, short, default_value = "results", value_name = "DIR")]
    pub output: PathBuf,
    /// The run's id and results directory name. Default: <harness>-<profile>-<UTC time>.
    #[arg(long, value_name = "ID")]
    pub run_id: Option<String>,
    /// Also write a compact JSON summary (at most 4096 bytes) here, e.g. /dev/termination-log in a pod.
    #[arg(long, value_name = "PATH")]
    pub summary_file: Option<PathBuf>,
    /// Reject every profile key the dialect does not know. Without it: a key one edit from a key that changes what
    /// is sent, when, or what is measured (`api.streamming` for `streaming`) is an error naming the file, line and
    /// the key meant; other unknown keys, and near misses of keys llmbench does not act on (storage, report
    /// locations, labels), are warnings recorded in run.json.
    #[arg(long, conflicts_with = "lenient")]
    pub strict: bool,
    /// Turn the errors that guard against typos into warnings: a near-miss profile key is ignored, and an
    /// --override whose last key is missing creates it (llm-d-benchmark's rule). Each is warned about and recorded
    /// in run.json.
    #[arg(long)]
    pub lenient: bool,
    /// Seed for arrivals and prompts when the profile sets none.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Run only this launcher's share, INDEX/COUNT, of a run spread over COUNT launchers.
    #[arg(long, value_name = "INDEX/COUNT", value_parser = Shard::parse, default_value = "0/1")]
    pub shard: Shard,
    /// Replace an earlier run's results directory of the same --run-id (never one a run is still writing).
    #[arg(long)]
    pub overwrite: bool,
    /// After SIGTERM or SIGINT, how long requests in flight may still finish before they are recorded as
    /// cancelled; a second signal cancels them at once.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "5s", value_name = "DURATION")]
    pub interrupt_grace: Duration,
    /// Run an SLO capacity search instead of the profile's stages: the highest load meeting every objective, as
    /// JSON or YAML (`{load: rate, slo: ["ttft_p99<=500ms"], start: 1, max: 64}`; see README). Overrides the
    /// profile's own `capacity_search:`.
    #[arg(long, value_name = "SPEC")]
    pub capacity_search: Option<String>,
    /// Serve this run's live metrics (requests, failures by class, in flight, stage, TTFT / ITL / E2E and schedule
    /// delay histograms) at http://ADDR/metrics while it goes, e.g. 0.0.0.0:9464; port 0 picks a free port, and
    /// the address is logged. Off by default, so local runs and parallel tests never compete for a port. An
    /// address that cannot be bound is a warning, not a failure: the run goes on without live metrics.
    #[arg(long, value_name = "ADDR", value_parser = crate::release::parse_listen_addr)]
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// A shard of a sharded run: prepare everything, then wait for a release on ADDR (`GET /ready` answers
    /// `waiting`; `POST /release {"at_unix_ns": …}` names the instant every shard starts at) and start the clock at
    /// that instant. The BenchmarkRun operator sets it for `parallelism > 1`; run.json records the instant and the
    /// actual start.
    #[arg(long, value_name = "ADDR", value_parser = crate::release::parse_listen_addr)]
    pub wait_for_release: Option<std::net::SocketAddr>,
    /// How long --wait-for-release waits before the run fails.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "15m", value_name = "DURATION")]
    pub release_timeout: Duration,
    /// A Prometheus endpoint of the stack to scrape during the run (repeatable), e.g.
    /// http://vllm-0:8000/metrics. Default: the endpoint's own /metrics when it answers with Prometheus text, and
    /// the Prometheus server an inference-perf profile's `metrics:` names.
    #[arg(long = "metrics-endpoint", value_name = "URL")]
    pub metrics_endpoints: Vec<String>,
    /// How often to scrape the server metrics (at least 100ms).
    #[arg(long, value_parser = parse_scrape_interval, default_value = "1s", value_name = "DURATION")]
    pub metrics_interval: Duration,
    /// Scrape no server metrics at all, not even the endpoint's own /metrics.
    #[arg(long, conflicts_with = "metrics_endpoints")]
    pub no_server_metrics: bool,
    /// Memory for the records of finished requests (e.g. 256MiB, 1GiB). A run whose records fit is summarised
    /// from memory; past the budget the launcher keeps no record in memory (requests.jsonl has them all) and
    /// summarises the run from disk afterwards in bounded memory, with the same numbers. The per-request files
    /// (inference-perf's per-request metrics, guidellm's benchmarks.json, vllm's --save-detailed arrays) and the
    /// pictures need every record in memory, and are then not written: summary.json says so. MLPerf runs keep
    /// every record for LoadGen's verdict, with a warning past the budget.
    #[arg(long, value_parser = crate::limits::parse_bytes, default_value = "256MiB", value_name = "BYTES")]
    pub records_memory: u64,
    /// The nop harness: a vLLM server's log to read model-load times from, as llm-d-benchmark's nop does (weights
    /// loading, torch.compile, CUDA graph capture, … by startup phase). Its files go into the results directory
    /// (result.yaml, <name>/categories.log, analysis/result.txt) and the figures into summary.json's
    /// `model_load`. Refused with any other harness.
    #[arg(long, value_name = "FILE")]
    pub vllm_log: Option<PathBuf>,
    /// How the stack under test was started, as a JSON file `{"image": …, "command": […], "args": […], "env":
    /// {…}}` (the operator writes it for a standalone stack). Recorded in run.json's `stack`, the llm-d report's
    /// `scenario.stack` and the summary's `engine`, beside what the server says it is (run.json's `server`: its
    /// `GET /v1/models`, `/version`, `/props`, `/get_server_info` and `/info` answers, asked before the run; a
    /// question not answered is recorded, never fatal). Env values whose names look like secrets
    /// (…TOKEN…, …KEY…, …SECRET…, …PASSWORD…) are recorded as `<redacted>`.
    #[arg(long, value_name = "FILE")]
    pub stack_info: Option<PathBuf>,
    /// Start the stack under test for this run: the command after `--` (e.g. `--serve -- vllm serve MODEL --port
    /// 8000`), its output appended to stack.log in the results directory. The run starts once --serve-ready-path
    /// and then /v1/models answer 200; the stack exiting, or --serve-health-failures failed health checks a second
    /// apart, stops the run (stopped: stack_failed, with its exit status and log tail in run.json); afterwards it
    /// gets SIGTERM, then SIGKILL 30s later. The endpoint is --endpoint, else http://127.0.0.1:PORT with the port
    /// of the command's --port (default 8000). Its command line and engine env (VLLM_*, CUDA_*, NCCL_*, HF_*, …;
    /// secret-looking values redacted) are recorded as --stack-info records them.
    #[arg(long, requires = "serve_command", conflicts_with = "stack_info")]
    pub serve: bool,
    /// The command --serve runs, after `--`.
    #[arg(last = true, value_name = "CMD", requires = "serve")]
    pub serve_command: Vec<String>,
    /// --serve: the path that answers 200 once the stack is ready (vLLM's /health).
    #[arg(
        long,
        default_value = "/health",
        value_name = "PATH",
        requires = "serve"
    )]
    pub serve_ready_path: String,
    /// --serve: how long the stack may take to get ready (loading weights, compiling) before the run fails.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "10m", value_name = "DURATION")]
    pub serve_timeout: Duration,
    /// --serve: consecutive failed health checks (a second apart) that fail the run.
    #[arg(long, default_value_t = crate::stack::serve::DEFAULT_HEALTH_FAILURES, value_name = "N")]
    pub serve_health_failures: u32,
    /// --serve: leave the stack running after the run.
    #[arg(long, requires = "serve")]
    pub serve_keep: bool,
    /// Open a profiling window: POST (empty body) to this hook just before the measured phase, after any warm-up.
    /// An http(s) URL, or a path on the endpoint's base URL. Its status (or error) and latency go into run.json's
    /// `profiling`; a failed hook is warned about, never fatal.
    #[arg(long, value_name = "URL|/PATH", conflicts_with = "vllm_profiler")]
    pub profiler_start: Option<String>,
    /// Close the profiling window: POST to this hook just after the measured phase (see --profiler-start).
    #[arg(long, value_name = "URL|/PATH", conflicts_with = "vllm_profiler")]
    pub profiler_stop: Option<String>,
    /// vLLM's profiler: --profiler-start /start_profile --profiler-stop /stop_profile (the server must run with
    /// VLLM_TORCH_PROFILER_DIR set, else it answers 404, which is recorded).
    #[arg(long)]
    pub vllm_profiler: bool,
    /// The API key, sent as `Authorization: Bearer KEY`; it beats the profile's own key. Without either,
    /// OPENAI_API_KEY is sent when set (as vllm bench serve does). run.json records where the key came from, never
    /// the key; no file of the results holds it.
    #[arg(long, value_name = "KEY")]
    pub api_key: Option<ApiKey>,
    /// Embedded simulator: time to first token.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "50ms", value_name = "DURATION")]
    pub sim_ttft: Duration,
    /// Embedded simulator: time between tokens.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "10ms", value_name = "DURATION")]
    pub sim_itl: Duration,
    /// Skip the pre-flight. By default, before any prompt is built or timed, the run checks its server: that it
    /// accepts connections, that GET /v1/models lists the model, and that one tiny request of the run's own kind
    /// (its API path, streaming, headers and API key; one output token) succeeds and answers for that model. A
    /// failure stops the run with the fix and exit code 6, having timed and written nothing; run.json records what
    /// the checks found. Skip it when the server must receive no request but the measured ones (request quotas,
    /// billing, a server that counts requests), or when the endpoint only answers once the run's load arrives.
    /// It also skips asking the server what it is (engine, version, models: run.json's `server`), unless
    /// --stack-info or --serve describes the stack.
    #[arg(long)]
    pub no_preflight: bool,
    /// How long the pre-flight's test request may take: a cold engine can be slow to answer its first request.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "60s", value_name = "DURATION")]
    pub preflight_timeout: Duration,
    /// Go on (with a warning, and the server's own model name recorded in run.json) when the pre-flight finds that
    /// the server does not list the model, or answers as another model: a server that ignores the request's model
    /// field (llama.cpp, many proxies), or a gateway that serves models it does not list.
    #[arg(long)]
    pub allow_model_mismatch: bool,
    /// Stop the run after N requests in a row failed before the server answered anything (connection refused,
    /// DNS, reset before any byte): the server stopped answering. The run ends with "the server stopped answering
    /// at t=…" and exit code 7, every record kept and every report written. Meanwhile a concurrency slot waits
    /// after each such failure (10ms, doubling to 1s) rather than re-sending at once; a rate stage keeps its
    /// schedule. 0 never stops.
    #[arg(long, default_value_t = engine::DEFAULT_MAX_CONNECT_FAILURES, value_name = "N")]
    pub max_connect_failures: u32,
    /// Empty the server's prefix cache just before the run's clock starts, so the run measures a cold cache even
    /// with prompts an earlier run sent (a dataset, a pinned seed). The engine is found by its endpoint, tried in
    /// this order: vLLM's POST /reset_prefix_cache (served with VLLM_SERVER_DEV_MODE=1; also the embedded
    /// simulator), SGLang's POST /flush_cache, llama.cpp's slot erase (GET /slots, then POST
    /// /slots/ID?action=erase; llama-server needs --slot-save-path, and --cache-ram 0 to keep no copy in host
    /// memory). A server with none of them is refused before anything is timed. run.json's `cache.reset` records
    /// the engine and every call.
    #[arg(long)]
    pub reset_prefix_cache: bool,
    /// Warm the server's prefix cache before the first stage: each of the run's prompts is sent once (one output
    /// token each, recorded as warm-up and left out of every figure), and every stage then draws from those same
    /// prompts, so the run measures a cache that holds them (the `warm` side of an experiment's cold/warm
    /// comparison). Not for multi-turn or trace runs, whose requests are built as they go.
    #[arg(long)]
    pub warm_prefix_cache: bool,
    /// Set by `llmbench experiment` for a run whose server it has already checked: why this run's pre-flight is
    /// skipped.
    #[arg(skip)]
    pub preflight_done: Option<String>,
    #[command(flatten)]
    pub load: LoadFlags,
}

/// `--metrics-interval`: a duration of at least 100 ms (a faster scrape loads the server more than it tells).
fn parse_scrape_interval(text: &str) -> Result<Duration, String> {
    let interval = humantime::parse_duration(text).map_err(|e| e.to_string())?;
    if interval < Duration::from_millis(100) {
        return Err(format!(
            "{text} is below the shortest scrape interval, 100ms"
        ));
    }
    Ok(interval)
}

/// Why a run could not be carried out (a failing request never is: it is recorded).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Profile(#[from] ProfileError),
    #[error(transparent)]
    Workload(#[from] WorkloadError),
    #[error(transparent)]
    LoadFlags(#[from] LoadFlagError),
    #[error(
        "--capacity-search varies the load itself and sizes each point, so {flag} has nothing to set\n  help: set \
         the search's `start`, `max`, `min_duration` and `min_requests` in its spec, or drop --capacity-search to \
         run at one load"
    )]
    LoadFlagWithCapacitySearch { flag: &'static str },
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error("cannot start the embedded simulator: {0}")]
    Sim(#[from] SimError),
    #[error("tokenizer: {0}")]
    Tokenizer(#[from] TokenizerError),
    #[error(transparent)]
    Prompts(#[from] PromptError),
    #[error(transparent)]
    Conversations(#[from] ConversationError),
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error("no model to send: {0}")]
    NoModel(String),
    #[error(transparent)]
    Output(#[from] OutputError),
    #[error(transparent)]
    EndpointUrl(#[from] EndpointError),
    #[error("cannot write {path}: {source}")]
    WriteOutput {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Summary(#[from] WriteSummaryError),
    #[error("cannot build the HTTP client: {0}")]
    Client(reqwest::Error),
    #[error("cannot scrape the server metrics: {0}")]
    ServerMetrics(#[from] crate::server_metrics::ServerMetricsError),
    #[error("cannot use the endpoint: {0}")]
    Endpoint(#[from] engine::http1::Http1Error),
    #[error(transparent)]
    Report(#[from] ReportError),
    #[error("mlperf: {0}")]
    Mlperf(#[from] crate::mlperf::MlperfError),
    #[error("cannot read {what} {path}: {source}")]
    ReadInput {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot handle {signal}: {source}")]
    Signals {
        signal: Signal,
        source: std::io::Error,
    },
    #[error(transparent)]
    Limit(#[from] crate::limits::LimitError),
    #[error(transparent)]
    Release(#[from] crate::release::ReleaseError),
    #[error("not supported: {0}")]
    Unsupported(String),
    #[error(
        "--vllm-log is read by the nop harness only (llm-d-benchmark's nop reads model-load times from the server's \
         log); the {harness} harness sends load and reads no log — run `--harness nop --profile nop --vllm-log FILE`"
    )]
    VllmLogNeedsNop { harness: Harness },
    #[error(transparent)]
    Nop(#[from] nop::NopError),
    #[error(transparent)]
    Stack(#[from] crate::stack::StackError),
    #[error(transparent)]
    Profiler(#[from] crate::stack::profiler::ProfilerError),
    #[error("--serve: {0}")]
    Serve(#[from] crate::stack::serve::ServeError),
    #[error("capacity search: {0}")]
    CapacitySearch(String),
    #[error("trace replay: {0}")]
    Trace(#[from] crate::trace::ReplayError),
    #[error(transparent)]
    SessionReplay(#[from] crate::session_replay::SessionReplayError),
    #[error(
        "pre-flight: {0}\n  note: nothing was timed and no results were written; --no-preflight runs without these \
         checks"
    )]
    Preflight(#[from] preflight::PreflightError),
    /// The pre-flight found this run's own requests unusable on the server (longer than its context): a failure of
    /// the run, not of the server, which other runs against it may still use.
    #[error(
        "pre-flight: {0}\n  note: nothing was timed and no results were written; --no-preflight runs without these \
         checks"
    )]
    RequestsUnfit(preflight::PreflightError),
    #[error("{0}\n  note: nothing was timed and no results were written")]
    CacheReset(#[from] CacheResetError),
    #[error(
        "{source}; the run stopped there: the stages that ran are recorded and reported in {}",
        dir.display()
    )]
    Adaptive {
        source: engine::PlannerError,
        dir: PathBuf,
    },
}

impl From<DataError> for RunError {
    fn from(e: DataError) -> Self {
        RunError::Prompts(PromptError::Data(e))
    }
}

/// Carries out one run.
pub async fn run(args: RunArgs) -> Result<RunOutcome, RunError> {
    if args.vllm_log.is_some() && args.harness != Harness::Nop {
        return Err(RunError::VllmLogNeedsNop {
            harness: args.harness,
        });
    }
    if let Some(id) = &args.run_id {
        validate_run_id(id)?;
    }
    // Read before anything starts, so a bad record fails the run at once.
    let stack = args
        .stack_info
        .as_deref()
        .map(crate::stack::read_stack_info)
        .transpose()?
        .map(|info| StackSpec::new(StackSource::StackInfo, info));
    let flag = args
        .endpoint
        .as_deref()
        .map(|url| target::validate(url, "--endpoint"))
        .transpose()?;
    let template = Template::load(args.harness.as_str(), &template_source(&args.profile))?;
    let server = match flag {
        // A served stack is where the run goes: --endpoint, else the port its command names.
        Some(url) if args.serve => Server::Served(url),
        None if args.serve => Server::Served(target::validate(
            &crate::stack::serve::serve_endpoint(&args.serve_command),
            "the --serve command's --host and --port",
        )?),
        Some(url) => Server::Flag(url),
        None => Server::Embedded,
    };
    // What the profile itself names, to choose the server, the model and the tokenizer; the command line wins.
    let facts = profile_facts(&args, &template, &server)?;
    let server = match server {
        Server::Embedded => match target::choose(None, facts.base_url.as_deref()) {
            Server::Profile(url) => Server::Profile(target::validate(
                &url,
                &format!("the server {} names", template.name),
            )?),
            other => other,
        },
        other => other,
    };
    let embedded_server = server == Server::Embedded;
    let model = choose_model(&args, &facts, &server)?;
    // The first line a user sees says what is being measured, and where each part of it came from.
    println!(
        "llmbench: {} {} against {server}{}",
        args.harness,
        template.name,
        sources(&args, &facts, &model, embedded_server)
    );
    let (endpoint, embedded) = match &server {
        Server::Flag(url) | Server::Profile(url) | Server::Served(url) => (url.clone(), None),
        Server::Embedded => {
            // The simulator serves the model the requests will name.
            let sim = sim::start(SimConfig {
                port: 0,
                model: model.name.clone().unwrap_or_else(|| SIM_MODEL.to_owned()),
                ttft: args.sim_ttft,
                itl: args.sim_itl,
                seed: args.seed,
                ..SimConfig::default()
            })
            .await?;
            (sim.base_url(), Some(sim))
        }
    };
    let mut model = model.name;
    let served = if args.serve {
        let served = crate::stack::serve::Served::start(crate::stack::serve::ServeOptions {
            command: args.serve_command.clone(),
            base_url: endpoint.clone(),
            ready_path: args.serve_ready_path.clone(),
            ready_timeout: args.serve_timeout,
            health_failures: args.serve_health_failures,
            keep: args.serve_keep,
            log_dir: args.output.clone(),
        })
        .await?;
        Some(served)
    } else {
        None
    };
    if let Some(served) = &served
        && model.is_none()
    {
        // The model the stack serves, as the embedded simulator's is: requests name what is there.
        model = served.served_model().await;
    }
    let stack = served.as_ref().map(|s| s.spec()).or(stack);
    let outcome = run_against(
        &args,
        &template,
        &endpoint,
        model,
        embedded.is_some(),
        stack,
        served.clone(),
    )
    .await;
    // Stopped on every way out of the run, failed or not.
    if let Some(served) = &served {
        served.stop().await;
    }
    if let Some(sim) = embedded
        && let Err(e) = sim.shutdown().await
    {
        tracing::warn!(error = %e, "the embedded simulator did not shut down cleanly");
    }
    outcome
}

/// Stands in for the model placeholder while finding out what the profile names itself: a model key that still
/// holds it names no model of its own.
const UNSET_MODEL: &str = "llmbench-model-unset.invalid";

/// What a profile names itself: its server, its model and its tokenizer (each `None` when it names none, or only
/// through a placeholder the command line fills).
#[derive(Debug, Default)]
struct ProfileFacts {
    base_url: Option<String>,
    model: Option<String>,
    tokenizer: Option<String>,
    /// The profile's model is the model placeholder.
    model_is_placeholder: bool,
}

/// Renders and parses the profile to learn what it names itself. The endpoint placeholder holds the chosen server
/// (or [`UNSET_ENDPOINT`] while none is chosen, so a bundled profile whose server is only that placeholder names
/// none); the model placeholder holds `--model`, else [`UNSET_MODEL`].
fn profile_facts(
    args: &RunArgs,
    template: &Template,
    server: &Server,
) -> Result<ProfileFacts, RunError> {
    let endpoint = match server {
        Server::Flag(url) | Server::Profile(url) | Server::Served(url) => url.clone(),
        Server::Embedded => UNSET_ENDPOINT.to_owned(),
    };
    let values = Values {
        model: Some(args.model.clone().unwrap_or_else(|| UNSET_MODEL.to_owned())),
        tokenizer: args.tokenizer.clone(),
        endpoint: Some(endpoint),
        max_model_len: args.max_model_len,
        set: args.set.clone(),
    };
    let rendered = render_edited(template, &values, &edits(args), args.harness)?.text;
    // Applied here too, so a refused flag stops the run before a simulator starts.
    let rendered = load_flags::apply(args.harness, &template.name, &rendered, &args.load)?.profile;
    let options = parse_options(args);
    let (api, tokenizer) = match args.harness {
        Harness::Mlperf => (
            crate::mlperf::parse_settings(&template.name, &rendered, None, &options)?
                .settings
                .server,
            None,
        ),
        Harness::Fmperf => (
            crate::workload::parse_fmperf(&template.name, &rendered)?
                .0
                .api,
            None,
        ),
        harness => {
            let workload = parse_profile(harness, &template.name, &rendered, &options)?.workload;
            (workload.api, workload.tokenizer.map(|t| t.name_or_path))
        }
    };
    let unset = |name: &Option<String>| name.as_deref().is_some_and(|n| n.contains(UNSET_MODEL));
    let model_is_placeholder = unset(&api.model);
    Ok(ProfileFacts {
        base_url: api.base_url,
        model: api.model.filter(|_| !model_is_placeholder),
        tokenizer: tokenizer.filter(|t| !unset(&Some(t.clone()))),
        model_is_placeholder,
    })
}

/// The model a run names, and where it came from.
#[derive(Debug)]
struct ModelChoice {
    /// `None` until a `--serve` stack says what it serves, and for the nop harness, which sends nothing.
    name: Option<String>,
    from: ModelFrom,
}

#[derive(Debug, PartialEq)]
enum ModelFrom {
    Flag,
    Profile,
    Simulator,
    ServedStack,
    Nothing,
}

/// `--model`, else the model the profile names, else the embedded simulator's, else what a `--serve` stack serves.
/// A run against a server with none of them fails before anything starts, saying to pass `--model`.
fn choose_model(
    args: &RunArgs,
    facts: &ProfileFacts,
    server: &Server,
) -> Result<ModelChoice, RunError> {
    let (name, from) = match (&args.model, &facts.model, server) {
        (Some(m), _, _) => (Some(m.clone()), ModelFrom::Flag),
        (None, Some(m), _) => (Some(m.clone()), ModelFrom::Profile),
        (None, None, Server::Embedded) => (Some(SIM_MODEL.to_owned()), ModelFrom::Simulator),
        (None, None, Server::Served(_)) => (None, ModelFrom::ServedStack),
        (None, None, _) if args.harness == Harness::Nop => (None, ModelFrom::Nothing),
        (None, None, _) => {
            return Err(RunError::NoModel(if facts.model_is_placeholder {
                format!(
                    "pass --model NAME (the profile's model is the placeholder {}{})",
                    llmbench_core::render::TOKEN_PREFIX,
                    llmbench_core::render::well_known::MODEL
                )
            } else {
                "the profile names none; pass --model NAME".to_owned()
            }));
        }
    };
    Ok(ModelChoice { name, from })
}

/// `, model m (--model, the profile's x overridden), tokenizer builtin (embedded simulator)`: the run's model and
/// tokenizer, each with where it came from.
fn sources(args: &RunArgs, facts: &ProfileFacts, model: &ModelChoice, embedded: bool) -> String {
    if model.from == ModelFrom::Nothing || args.harness == Harness::Nop {
        return String::new();
    }
    let Some(name) = model.name.as_deref() else {
        // A --serve stack names its model once it is up.
        return match &args.tokenizer {
            Some(t) => format!(", the model the --serve stack serves, tokenizer {t} (--tokenizer)"),
            None => ", the model the --serve stack serves and its tokenizer".to_owned(),
        };
    };
    let model_from = match (&model.from, &facts.model) {
        (ModelFrom::Flag, Some(own)) if own != name => {
            format!("--model, the profile's {own} overridden")
        }
        (ModelFrom::Flag, _) => "--model".to_owned(),
        (ModelFrom::Profile, _) => "the profile's".to_owned(),
        (ModelFrom::Simulator, _) => "the embedded simulator's".to_owned(),
        (ModelFrom::ServedStack | ModelFrom::Nothing, _) => "the stack's".to_owned(),
    };
    let (tokenizer, tokenizer_from) = match (&args.tokenizer, &facts.tokenizer) {
        (Some(t), Some(own)) if own != t && own != name => (
            t.clone(),
            format!("--tokenizer, the profile's {own} overridden"),
        ),
        (Some(t), _) => (t.clone(), "--tokenizer".to_owned()),
        (None, _) if embedded => (
            crate::tokenizer::BUILTIN.to_owned(),
            "embedded simulator".to_owned(),
        ),
        (None, Some(own)) if own != name => (own.clone(), "the profile's".to_owned()),
        (None, _) => (name.to_owned(), "the model's".to_owned()),
    };
    format!(", model {name} ({model_from}), tokenizer {tokenizer} ({tokenizer_from})")
}

/// The command line's edits to the profile.
fn edits(args: &RunArgs) -> Edits {
    Edits {
        overrides: args.overrides.clone(),
        add: args.override_add.clone(),
        lenient: args.lenient,
    }
}

fn parse_options(args: &RunArgs) -> ParseOptions {
    ParseOptions {
        strict: args.strict,
        lenient: args.lenient,
        default_seed: args.seed,
    }
}

async fn run_against(
    args: &RunArgs,
    template: &Template,
    endpoint: &str,
    model: Option<String>,
    embedded: bool,
    stack: Option<StackSpec>,
    served: Option<Arc<crate::stack::serve::Served>>,
) -> Result<RunOutcome, RunError> {
    let harness = args.harness;
    let values = Values {
        model: model.clone(),
        tokenizer: args.tokenizer.clone(),
        endpoint: Some(endpoint.to_owned()),
        max_model_len: args.max_model_len,
        set: args.set.clone(),
    };
    let rendered = render_edited(template, &values, &edits(args), harness)?;
    let created = rendered.warnings();
    let rendered = rendered.text;
    if args.capacity_search.is_some()
        && let Some(flag) = args.load.stage_flag()
    {
        return Err(RunError::LoadFlagWithCapacitySearch { flag });
    }
    let applied = load_flags::apply(harness, &template.name, &rendered, &args.load)?;
    if !applied.edits.is_empty() {
        tracing::info!("load flags: {}", load_flags::describe(&applied.edits));
    }
    let rendered = applied.profile;
    let options = parse_options(args);
    let mut context = RunContext {
        args,
        endpoint,
        model,
        embedded,
        template_name: &template.name,
        rendered: &rendered,
        load_flags: LoadFlagsRecord::new(&args.load, &applied.edits),
        notes: Vec::new(),
        capacity_search: None,
        prometheus: None,
        profile_no_server_metrics: false,
        stack,
        served,
        prompts: None,
    };
    for warning in created {
        tracing::warn!("{warning}");
        context.notes.push(ProfileNote {
            key: "--override".to_owned(),
            line: None,
            kind: "created".to_owned(),
            message: warning,
        });
    }
    if args.capacity_search.is_some()
        && matches!(harness, Harness::Mlperf | Harness::Nop | Harness::Fmperf)
    {
        return Err(RunError::CapacitySearch(format!(
            "the {harness} harness has no load to vary; a capacity search runs with inference-perf, guidellm, \
             vllm-benchmark or inferencemax profiles"
        )));
    }
    // The harnesses that read their own profile format.
    match harness {
        Harness::Mlperf => return MlperfRun { options }.run(&mut context).await,
        Harness::Fmperf => return FmperfRun.run(&mut context).await,
        _ => {}
    }
    let parsed = parse_profile(harness, &template.name, &rendered, &options)?;
    context.note_warnings(&parsed.warnings);
    context.capacity_search = match &args.capacity_search {
        Some(text) => Some(capacity_search_flag(text)?),
        None => parsed.capacity,
    };
    let workload = parsed.workload;
    context.prometheus = workload.server_metrics.clone();
    context.profile_no_server_metrics = workload.no_server_metrics;
    match workload.data {
        _ if harness == Harness::Nop => NopRun { workload }.run(&mut context).await,
        DataSpec::OtelTrace(_) => SessionReplay { workload }.run(&mut context).await,
        DataSpec::MooncakeTrace(_) | DataSpec::AzureTrace(_) => {
            TraceReplay { workload }.run(&mut context).await
        }
        _ => ProfileRun { workload }.run(&mut context).await,
    }
}

/// What every run shares, whatever its dialect: the flags, the endpoint and the rendered profile.
pub(crate) struct RunContext<'a> {
    pub args: &'a RunArgs,
    pub endpoint: &'a str,
    /// The model the run chose: `--model`, else the profile's, else the embedded simulator's or what a `--serve`
    /// stack serves.
    pub model: Option<String>,
    pub embedded: bool,
    pub template_name: &'a str,
    pub rendered: &'a str,
    /// The profile's keys that were not acted on, for run.json and the summary.
    pub notes: Vec<ProfileNote>,
    /// The SLO capacity search the run carries out, for run.json.
    pub capacity_search: Option<llmbench_core::capacity::CapacitySearchSpec>,
    /// The Prometheus server the profile names for server metrics (inference-perf `metrics:`).
    pub prometheus: Option<crate::workload::PrometheusSource>,
    /// The profile turns server metrics off (AIPerf `no-server-metrics`).
    pub profile_no_server_metrics: bool,
    /// How the stack under test was started, when the launcher knows (`--stack-info`, `--serve`).
    pub stack: Option<StackSpec>,
    /// The stack this launcher started (`--serve`): its log moves into the results directory, and it is watched
    /// during the run.
    pub served: Option<Arc<crate::stack::serve::Served>>,
    /// The load flags given and what they changed in the profile, for run.json.
    pub load_flags: Option<LoadFlagsRecord>,
    /// Where the run's prompts come from, for run.json's `cache` (its reset and priming are added by `execute`).
    pub prompts: Option<PromptsMeta>,
}

/// A run's stages.
pub(crate) enum RunStages {
    /// Known before the run: what the whole run asks (for run.json) and this launcher's share of it (what it
    /// sends).
    Fixed {
        whole_run: Vec<StageMeta>,
        mine: Vec<engine::Stage>,
    },
    /// Decided as the run goes, from what it measures (sweeps).
    Adaptive(Adaptive),
}

/// An adaptive run's stages.
pub(crate) struct Adaptive {
    /// How many stages the run expects at most, for the progress line.
    pub stages: usize,
    /// Makes the planner once the run's clock has started and run.json has its anchor.
    pub planner: MakePlanner,
}

/// Makes an adaptive run's planner from its run.json as it starts.
pub(crate) type MakePlanner = Box<dyn FnOnce(&RunMeta) -> Box<dyn StagePlanner> + Send>;

impl RunStages {
    /// How many requests this launcher plans to send and for how long at least, when the plan says in advance
    /// (an adaptive one does not).
    fn expected_size(&self, interval: Duration) -> (Option<u64>, Option<Duration>) {
        match self {
            RunStages::Fixed { mine, .. } => expected_size(mine, interval),
            RunStages::Adaptive(_) => (None, None),
        }
    }
}

/// A run ready to go: every request body built, the stages sharded.
pub(crate) struct Execution<'a> {
    pub api: &'a Api,
    pub request_model: String,
    pub tokenizer_spec: String,
    pub stages: RunStages,
    pub interval: Duration,
    pub requests: Requests,
    pub warmup: Option<engine::Warmup>,
    pub request_timeout: Option<Duration>,
    pub max_concurrency: Option<u32>,
    pub report: ReportOptions,
    /// Keep each response's text in its record (MLPerf accuracy mode; conversations, which take it out again).
    pub keep_text: bool,
    /// What the pre-flight found ([`RunContext::preflight`]), for run.json; `None` for a run that sends nothing.
    pub preflight: Option<PreflightMeta>,
    /// Each stage's own fresh prompts (see [`cache::FreshStagePrompts`]); `None`: every stage sends `requests`.
    pub stage_requests: Option<Box<dyn engine::StageRequests>>,
    /// `--warm-prefix-cache`: the run's prompts, one output token each, sent once before the first stage.
    pub prime: Option<Arc<[engine::PreparedRequest]>>,
}

/// A finished execution, before its summary and reports are written: a harness may add its verdict first.
pub(crate) struct Executed {
    pub dir: PathBuf,
    pub meta: RunMeta,
    /// Every record, unless they outgrew `--records-memory` (then empty, and `spilled` is set).
    pub records: Vec<RequestRecord>,
    pub stage_times: Vec<engine::StageTimes>,
    pub summary: RunSummary,
    /// The run summarised from requests.jsonl, its records having outgrown `--records-memory`.
    pub spilled: Option<report::SpilledRun>,
    /// Why an adaptive run could not go on: its reports are written, then the run fails.
    pub failure: Option<engine::PlannerError>,
    /// Held until the reports are written: a second run with this id is refused meanwhile.
    pub _lock: output::RunDir,
}

impl RunContext<'_> {
    /// `--tokenizer`, else the built-in one for the embedded simulator, else the profile's, else the model.
    pub fn tokenizer_spec(&self, from_profile: Option<String>) -> Result<String, RunError> {
        self.args
            .tokenizer
            .clone()
            .or_else(|| self.embedded.then(|| crate::tokenizer::BUILTIN.to_owned()))
            .or(from_profile)
            .or_else(|| self.model.clone())
            .ok_or_else(|| RunError::NoModel("pass --model NAME, or --tokenizer SPEC".to_owned()))
    }

    /// `api` with the key the run sends (`--api-key`, else the profile's, else OPENAI_API_KEY), and where it came
    /// from.
    pub fn api_with_key(&self, api: &Api) -> (Api, Option<api_key::KeySource>) {
        api_key::with_key(api, self.args.api_key.as_ref(), api_key::from_environment())
    }

    /// The model name sent in each request: `--model`, else the profile's, else the one the run chose (the
    /// embedded simulator's, or what a `--serve` stack serves).
    pub fn request_model(&self, from_profile: Option<String>) -> Result<String, RunError> {
        self.args
            .model
            .clone()
            .or(from_profile)
            .or_else(|| self.model.clone())
            .ok_or_else(|| RunError::NoModel("pass --model NAME".to_owned()))
    }

    /// Checks the run's server before any prompt is built or timed ([`preflight`]), with the run's own API, client
    /// settings and model; or says why it is not checked (`--no-preflight`, an experiment that checked it before).
    /// Called once per run, whatever its stages (a sweep's or a capacity search's included).
    pub async fn preflight(&self, api: &Api, model: &str) -> Result<PreflightMeta, RunError> {
        let args = self.args;
        let skipped = args
            .preflight_done
            .clone()
            .or_else(|| args.no_preflight.then(|| "--no-preflight".to_owned()));
        if let Some(reason) = skipped {
            tracing::info!(reason, "pre-flight skipped");
            return Ok(PreflightMeta {
                skipped: Some(reason),
                ..PreflightMeta::default()
            });
        }
        // The key the run's requests will carry (--api-key, the profile's, OPENAI_API_KEY): a server behind a key
        // must see it on the test request too.
        let (api, _) = self.api_with_key(api);
        let api = &api;
        let url = format!("{}{}", self.endpoint, api.path());
        let target = Target {
            transport: transport(&url, api.api_key.as_deref(), &api.headers, Some(1))?,
            url,
            api_key: api.api_key.clone(),
            headers: api.headers.clone(),
            request_timeout: Some(args.preflight_timeout),
            streaming: api.streaming,
            keep_text: false,
            // Not one of the run's requests: the run has no id yet, and a probe is not looked for in the logs.
            request_ids: engine::RequestIds::NONE,
        };
        let checks = preflight::Checks {
            endpoint: self.endpoint,
            api,
            model,
            style: BodyStyle::of(args.harness),
            request_timeout: args.preflight_timeout,
            allow_model_mismatch: args.allow_model_mismatch,
        };
        let meta = preflight::check(&checks, target).await?;
        tracing::info!(
            endpoint = self.endpoint,
            model,
            answered_in_ms = meta.request.as_ref().map(|r| r.latency_ms),
            "pre-flight passed: the server answers for the model"
        );
        Ok(meta)
    }

    /// Says where the run's prompts come from (the log now, run.json later): fresh, and so new to the server, or
    /// pinned, and so possibly cached from an earlier run. `shares` says the prompts share prefixes by design;
    /// `distinct` counts the run's (first stage's) prompts.
    pub fn note_prompts(
        &mut self,
        origin: &PromptOrigin,
        shares: bool,
        per_stage: bool,
        distinct: Option<u64>,
    ) {
        let meta = match origin {
            PromptOrigin::Fresh { seed } => {
                tracing::info!(
                    seed,
                    per_stage,
                    "prompts: fresh for this run{}, so no earlier run sent them (--seed {seed} draws them again)",
                    if per_stage { " and for each stage" } else { "" }
                );
                PromptsMeta {
                    origin: PromptsOrigin::Fresh,
                    seed: Some(*seed),
                    pinned_by: None,
                    per_stage,
                    shares_prefixes: shares,
                    distinct,
                }
            }
            PromptOrigin::Pinned { by } => {
                tracing::info!(
                    "prompts: pinned by {by}: every run sends the same ones, so the server's prefix cache may hold \
                     them from an earlier run{}",
                    if self.args.reset_prefix_cache {
                        " (--reset-prefix-cache empties it first)"
                    } else {
                        "; --reset-prefix-cache empties it first"
                    }
                );
                PromptsMeta {
                    origin: PromptsOrigin::Pinned,
                    seed: None,
                    pinned_by: Some(by.clone()),
                    per_stage: false,
                    shares_prefixes: shares,
                    distinct,
                }
            }
        };
        self.prompts = Some(meta);
    }

    /// Logs the parser's findings (after the run's first line) and keeps them for run.json and the summary.
    pub fn note_warnings(&mut self, warnings: &[Warning]) {
        for warning in warnings {
            tracing::warn!("{warning}");
            self.notes.push(ProfileNote::from(warning));
        }
    }

    /// `whole_run` as run.json records it (with each stage's warm-up, cool-down and limits), and this launcher's
    /// share of it (`--shard`).
    pub fn shard(
        &self,
        whole_run: Vec<engine::Stage>,
        profile_stages: &[crate::workload::Stage],
    ) -> Result<RunStages, RunError> {
        Ok(RunStages::Fixed {
            whole_run: whole_run
                .iter()
                .enumerate()
                .map(|(i, stage)| stage_meta(stage, profile_stages.get(i)))
                .collect(),
            mine: self.args.shard.apply(whole_run)?,
        })
    }

    /// Claims the results directory, writes profile.yaml and run.json (before the first request), runs
    /// `execution` with requests.jsonl written as requests finish, and derives the summary; [`RunContext::finish`]
    /// writes it with every report.
    pub async fn execute(&self, mut execution: Execution<'_>) -> Result<Executed, RunError> {
        let args = self.args;
        let harness = args.harness;
        let (expected_requests, expected_duration) =
            execution.stages.expected_size(execution.interval);
        let planned_requests = expected_requests.map(|n| {
            n + execution.warmup.map_or(0, |w| w.count)
                + execution.prime.as_ref().map_or(0, |p| p.len() as u64)
        });

        // The key the requests carry (and the probes and hooks): --api-key, the profile's, else OPENAI_API_KEY.
        let (api, api_key_source) = self.api_with_key(execution.api);
        let api = &api;
        // Named before anything is written, so a mistyped hook fails the run before it starts.
        let hooks = ProfilerHooks::resolve(
            args.profiler_start.as_deref(),
            args.profiler_stop.as_deref(),
            args.vllm_profiler,
            self.endpoint,
        )?;
        let hook_client = if hooks.is_empty() {
            None
        } else {
            Some(profiler::client(api.api_key.as_deref(), &api.headers)?)
        };
        // Before anything is written: a server that cannot be reset fails the run with nothing timed. Right before
        // the clock, after the prompts are built and the pre-flight's test request is answered.
        let reset = if args.reset_prefix_cache {
            let reset = cache::reset_prefix_cache(self.endpoint, api).await?;
            tracing::info!(
                engine = reset.engine,
                calls = reset.calls.len(),
                "prefix cache reset before the run"
            );
            if let Some(note) = &reset.note {
                tracing::warn!("{note}");
            }
            Some(reset)
        } else {
            None
        };
        let cache = CacheMeta {
            prompts: self.prompts.clone(),
            reset,
            primed_prompts: execution.prime.as_ref().map(|p| p.len() as u64),
        };
        // What the server is, asked before anything is written (a request longer than its context fails the run
        // here) and before the clock starts, so the questions never overlap the measured requests;
        // not under --no-preflight (nothing is sent before the clock) unless the stack was described to us.
        let answers = if args.no_preflight && self.stack.is_none() {
            None
        } else {
            Some(identity::ask(self.endpoint, api.api_key.as_deref(), &api.headers).await)
        };
        let server = answers.as_ref().map(identity::identify);
        // Requests longer than the server's context, found before the clock starts.
        if let (Some(server), Requests::Fixed(requests)) = (&server, &execution.requests) {
            let limit = server
                .models
                .iter()
                .find(|m| m.id == execution.request_model)
                .and_then(|m| m.max_model_len);
            preflight::check_context(
                &execution.request_model,
                limit,
                requests.iter().map(|r| (r.input_tokens, r.max_tokens)),
            )
            .map_err(RunError::RequestsUnfit)?;
        }
        if let Some(server) = &server {
            tracing::info!(
                engine = server.engine.as_deref().unwrap_or("unknown"),
                version = server.version.as_deref().unwrap_or_default(),
                models = server.models.len(),
                "server under test"
            );
            for failed in server.probes.iter().filter(|p| p.error.is_some()) {
                tracing::debug!(url = failed.url, error = failed.error, "not answered");
            }
        }
        let (run_id, run_dir) = self.claim_output()?;
        let dir = run_dir.path.clone();
        if let Some(served) = &self.served {
            served.attach(&dir);
        }
        write_file(&dir.join(report::PROFILE_FILE), self.rendered.as_bytes())?;

        let url = format!("{}{}", self.endpoint, api.path());
        let target = Arc::new(Target {
            transport: transport(
                &url,
                api.api_key.as_deref(),
                &api.headers,
                execution.max_concurrency,
            )?,
            url,
            api_key: api.api_key.clone(),
            headers: api.headers.clone(),
            request_timeout: execution.request_timeout,
            streaming: api.streaming,
            keep_text: execution.keep_text,
            request_ids: engine::RequestIds::for_run(
                &run_id,
                args.shard.index,
                args.shard.count,
                &api.headers,
                api.session_id_header.as_deref(),
                api.request_id_prefix.as_deref(),
            ),
        });
        // An adaptive run lists its stages as they are decided.
        let (stage_meta, expected_stages) = match &mut execution.stages {
            RunStages::Fixed { whole_run, mine } => (std::mem::take(whole_run), mine.len()),
            RunStages::Adaptive(adaptive) => (Vec::new(), adaptive.stages),
        };
        let scraping = self.scrape_targets().await?;
        let stack = self
            .stack
            .as_ref()
            .zip(answers.as_ref())
            .map(|(spec, answers)| spec.meta(answers.models.clone(), answers.version.clone()));
        let records_path = dir.join(report::REQUESTS_FILE);
        let records_file =
            std::fs::File::create(&records_path).map_err(|source| RunError::WriteOutput {
                path: records_path.clone(),
                source,
            })?;
        let control = Control::default();
        let progress_counters = Arc::new(Progress::default());
        // `--metrics-listen`: served until this function returns (the records are summarised by then); dropping
        // the server stops it, on every path out.
        let live = match args.metrics_listen {
            Some(addr) => {
                let progress = Arc::clone(&progress_counters);
                crate::live::LiveServer::start_or_warn(addr, &run_id, harness.as_str(), progress)
                    .await
            }
            None => None,
        };
        // MLPerf's verdict reads every record; any other run keeps its records only while they fit.
        let past = match harness {
            Harness::Mlperf => engine::PastBudget::Keep,
            _ => engine::PastBudget::Spill,
        };
        let (sink, writer) = engine::record_writer_budgeted(
            Box::new(records_file),
            records_path.display().to_string(),
            Arc::clone(&progress_counters),
            control.clone(),
            live.as_ref().map(crate::live::LiveServer::observer),
            engine::RecordsBudget {
                bytes: args.records_memory,
                past,
            },
        );
        tracing::info!(
            run_id,
            endpoint = self.endpoint,
            model = execution.request_model,
            requests = planned_requests,
            "starting run"
        );
        // A shard waits here, with everything prepared, until the operator releases every shard at one instant.
        let (_release_server, release) = match args.wait_for_release {
            Some(addr) => {
                let (server, release) =
                    crate::release::wait_for_release(addr, args.release_timeout).await?;
                (Some(server), Some(release))
            }
            None => (None, None),
        };
        let clock = Clock::start();
        let t0_unix_ns = wallclock::unix_ns_now();
        let mut meta = RunMeta {
            launcher_cpus: Some(crate::sizing::available_cpus()),
            schema: RUN_META_SCHEMA.to_owned(),
            run_id: run_id.clone(),
            harness,
            profile: self.template_name.to_owned(),
            model: execution.request_model.clone(),
            endpoint: self.endpoint.to_owned(),
            tokenizer: Some(execution.tokenizer_spec),
            started_at: wallclock::rfc3339_millis(t0_unix_ns),
            t0_unix_ns,
            api: match api.kind {
                ApiKind::Completion => report::ApiKind::Completion,
                ApiKind::Chat => report::ApiKind::Chat,
            },
            stages: stage_meta,
            shard: ShardMeta {
                index: args.shard.index,
                count: args.shard.count,
            },
            llmbench_version: LLMBENCH_VERSION.to_owned(),
            report: execution.report,
            planned_requests,
            profile_notes: self.notes.clone(),
            end: None,
            capacity_search: self.capacity_search.clone(),
            server_metrics: scraping.as_ref().map(ServerMetricsMeta::planned),
            release,
            stack,
            server,
            profiling: None,
            preflight: execution.preflight,
            load_flags: self.load_flags.clone(),
            api_key_source: api_key_source.map(|s| s.as_str().to_owned()),
            cache: (cache != CacheMeta::default()).then_some(cache),
        };
        // Written before the first request, so a killed run can still be reported from requests.jsonl; an adaptive
        // run rewrites it as each stage is decided.
        meta.write(&dir)?;
        // Started just before the first request: its first scrape is the base the first stage's counters grow from.
        let scraper = match &scraping {
            Some(plan) => Some(crate::server_metrics::spawn(
                plan.targets.clone(),
                plan.interval,
                clock.t0(),
                dir.join(report::SERVER_METRICS_FILE),
            )?),
            None => None,
        };
        let (stages, decided) = match execution.stages {
            RunStages::Fixed { mine, .. } => (Stages::Fixed(mine), None),
            RunStages::Adaptive(adaptive) => {
                let recorder = RecordDecisions::new((adaptive.planner)(&meta), &meta, &dir);
                let decided = Arc::clone(&recorder.decided);
                (Stages::Adaptive(Box::new(recorder)), Some(decided))
            }
        };
        let nothing_to_send = matches!(&stages, Stages::Fixed(s) if s.is_empty());
        // The window's start, called by the engine once the warm-up is over; its outcome lands here.
        let profiling_start: Arc<Mutex<Option<profiler::HookCall>>> = Arc::default();
        let before_measured = match (&hook_client, &hooks.start) {
            (Some(client), Some(url)) => {
                let (client, url, slot) =
                    (client.clone(), url.clone(), Arc::clone(&profiling_start));
                let call: futures_util::future::BoxFuture<'static, ()> = Box::pin(async move {
                    let call = profiler::call(&client, &url, clock, "start").await;
                    *slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(call);
                });
                Some(call)
            }
            _ => None,
        };
        let plan = EnginePlan {
            stages,
            interval: execution.interval,
            requests: execution.requests,
            warmup: execution.warmup,
            before_measured,
            max_connect_failures: args.max_connect_failures,
            stage_requests: execution.stage_requests.take(),
            prime: execution.prime.take(),
        };
        let signals = watch_signals(&control, args.interrupt_grace)?;
        if let Some(served) = &self.served {
            served.hand_signals_to_the_run();
        }
        // A stack that dies mid-run stops it as an interrupt does.
        let heartbeat = self
            .served
            .as_ref()
            .map(|served| served.watch(control.clone(), args.interrupt_grace));
        let display = progress::spawn(
            Arc::clone(&progress_counters),
            progress::Expectation {
                requests: planned_requests,
                duration: expected_duration,
                stages: expected_stages,
            },
        );
        let ran = if nothing_to_send {
            // Nothing to send (the nop harness): the run still leaves its files behind.
            drop(sink);
            if let Some(hook) = plan.before_measured {
                hook.await;
            }
            Ok(Vec::new())
        } else {
            engine::run(target, plan, clock, sink, control.clone()).await
        };
        if let Some(heartbeat) = heartbeat
            && let Some(failure) = heartbeat.finish()
            && let Some(stack) = &mut meta.stack
        {
            stack.failure = Some(failure);
        }
        // Closed as soon as the measured phase is over, before anything else is waited for.
        if let Some(client) = &hook_client {
            let stop = match &hooks.stop {
                Some(url) => Some(profiler::call(client, url, clock, "stop").await),
                None => None,
            };
            let start = profiling_start
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
            meta.profiling = Some(profiler::ProfilingMeta { start, stop });
        }
        display.abort();
        progress::finish();
        let written = writer.await.map_err(|join| RunError::WriteOutput {
            path: records_path.clone(),
            source: std::io::Error::other(join.to_string()),
        });
        let scraped = match (scraper, scraping) {
            (Some(scraper), Some(plan)) => {
                // Through a Prometheus server the last requests show up only after its next scrape (inference-perf
                // waits the same); an interrupted run does not wait for them.
                let interrupted = matches!(control.reason(), Some(StopReason::Interrupted { .. }));
                if !plan.tail.is_zero() && !interrupted {
                    tracing::info!(
                        wait = %humantime::format_duration(plan.tail),
                        "waiting for the Prometheus server's samples of the last requests"
                    );
                    tokio::time::sleep(plan.tail).await;
                }
                let outcome = scraper.stop().await;
                meta.server_metrics = Some(ServerMetricsMeta::new(&plan, &outcome));
                Some(outcome)
            }
            _ => None,
        };
        signals.abort();
        let (stage_times, failure) = match ran {
            Ok(times) => (times, None),
            Err(EngineError::Planner { ran, source }) => (ran, Some(source)),
            Err(e) => return Err(e.into()),
        };
        if let Some(decided) = decided {
            // The stages that ran, as they were decided (not one the run stopped before).
            meta.stages =
                std::mem::take(&mut *decided.lock().unwrap_or_else(PoisonError::into_inner));
            meta.stages.truncate(stage_times.len());
        }
        let stopped = control.reason();
        let mut end = RunEnd::new(stopped, planned_requests, &progress_counters, &stage_times);
        if let Some(failure) = &failure {
            tracing::error!(%failure, "the run could not decide its next stage");
            end = end.failed(failure.to_string());
        }
        meta.end = Some(end);
        // The end goes into run.json even when records were lost, so `llmbench report` can say what happened.
        let rewritten = meta.write(&dir);
        let written = written??;
        rewritten?;
        if let Some(reason) = stopped {
            tracing::warn!(%reason, "the run stopped before its plan was done");
        }
        let (records, spilled) = if written.spilled {
            let formats = Formats::for_harness(harness);
            let spilled = report::summarize_spilled(
                &dir,
                &meta,
                &report::RecordsFile::of(&dir),
                formats,
                args.records_memory,
            )?;
            (Vec::new(), Some(spilled))
        } else {
            (written.records, None)
        };
        let mut summary = match &spilled {
            Some(spilled) => spilled.summary().clone(),
            None => report::summarize_run(&meta, &records),
        };
        report::add_server_metrics(&dir, &meta, scraped.as_ref(), &mut summary);
        if let Some(warm) = &summary.prefix_cache_warm {
            tracing::warn!("{}", warm.message);
        }
        Ok(Executed {
            dir,
            meta,
            records,
            stage_times,
            summary,
            spilled,
            failure,
            _lock: run_dir,
        })
    }

    /// What this launcher scrapes: see [`server::plan`]. The endpoint's own `/metrics` is probed first and left
    /// out quietly when it does not answer with Prometheus text (a gateway, an OpenAI-compatible service without
    /// metrics). Only shard 0 of a sharded run scrapes, for the whole run.
    async fn scrape_targets(&self) -> Result<Option<server::ScrapePlan>, RunError> {
        let args = self.args;
        if args.shard.index > 0 {
            return Ok(None);
        }
        let Some(mut plan) = server::plan(
            &args.metrics_endpoints,
            args.no_server_metrics || self.profile_no_server_metrics,
            args.metrics_interval,
            self.endpoint,
            self.prometheus.as_ref(),
        )?
        else {
            return Ok(None);
        };
        if let Some(url) = plan.default_target.take() {
            if crate::server_metrics::probe(&url).await {
                plan.targets.push(url);
            } else {
                tracing::info!(
                    url,
                    "no server metrics: the endpoint's /metrics does not answer with Prometheus text (give \
                     --metrics-endpoint URL to scrape the serving pods)"
                );
            }
        }
        Ok((!plan.targets.is_empty()).then_some(plan))
    }

    /// The run's directory: `--run-id` exactly (refused if it exists, unless `--overwrite`), or a fresh default
    /// id; a shard writes into its own `shard-N` below it.
    fn claim_output(&self) -> Result<(String, output::RunDir), RunError> {
        let args = self.args;
        let sharded = args.shard.count > 1;
        let shard_dir = |run: PathBuf| run.join(format!("shard-{}", args.shard.index));
        Ok(match &args.run_id {
            Some(id) => {
                let run = args.output.join(id);
                let path = if sharded { shard_dir(run) } else { run };
                (id.clone(), output::claim(&path, args.overwrite)?)
            }
            None if sharded => {
                let id = self.default_run_id();
                let dir = output::claim(&shard_dir(args.output.join(&id)), args.overwrite)?;
                (id, dir)
            }
            None => output::claim_fresh(&args.output, &self.default_run_id())?,
        })
    }

    fn default_run_id(&self) -> String {
        format!(
            "{}-{}-{}",
            self.args.harness,
            profile_stem(self.template_name),
            wallclock::compact_utc_now()
        )
    }

    /// Writes what every run leaves besides its records: summary.json, the compact summary (`--summary-file`),
    /// the harness's own result files and the llm-d report.
    pub fn finish(&self, executed: Executed) -> Result<RunOutcome, RunError> {
        let Executed {
            dir,
            meta,
            records,
            summary,
            spilled,
            failure,
            ..
        } = executed;
        write_summary_json(&dir.join(report::SUMMARY_FILE), &summary)?;
        if let Some(path) = &self.args.summary_file {
            write_compact_summary(path, &summary)?;
        }
        match spilled {
            // Only what bounded memory can write; the rest is named in a warning and in summary.json.
            Some(spilled) => {
                spilled.write_reports(&dir, &meta, &summary)?;
            }
            None => {
                report::write_all(
                    &dir,
                    &meta,
                    &records,
                    &summary,
                    Formats::for_harness(self.args.harness),
                )?;
                crate::plot::write_pictures(&dir, &meta, &records, &summary);
            }
        }
        if let Some(source) = failure {
            return Err(RunError::Adaptive { source, dir });
        }
        Ok(RunOutcome {
            dir,
            summary,
            mlperf: None,
            accuracy: None,
            stopped: meta.end.as_ref().and_then(|end| end.stopped),
            meta,
        })
    }
}

/// An adaptive run's planner, with every stage it decides added to run.json before the stage starts, so a killed
/// run can still be reported with the stages it ran. Probes are not stages and are not listed.
struct RecordDecisions {
    inner: Box<dyn StagePlanner>,
    meta: RunMeta,
    dir: PathBuf,
    /// The stages decided so far, for the run's end.
    decided: Arc<Mutex<Vec<StageMeta>>>,
}

impl RecordDecisions {
    fn new(inner: Box<dyn StagePlanner>, meta: &RunMeta, dir: &Path) -> Self {
        RecordDecisions {
            inner,
            meta: meta.clone(),
            dir: dir.to_owned(),
            decided: Arc::default(),
        }
    }
}

impl StagePlanner for RecordDecisions {
    fn next_stage(
        &mut self,
        finished: Option<FinishedStage>,
    ) -> Result<Option<PlannedStage>, PlannerError> {
        let next = self.inner.next_stage(finished)?;
        if let Some(planned) = next.as_ref().filter(|p| !p.probe) {
            self.meta.stages.push(planned.meta);
            self.decided
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(planned.meta);
            self.meta.write(&self.dir)?;
        }
        Ok(next)
    }
}

/// `--capacity-search`: the spec as JSON or YAML (JSON is YAML), checked as a profile's would be.
fn capacity_search_flag(
    text: &str,
) -> Result<llmbench_core::capacity::CapacitySearchSpec, RunError> {
    let spec: llmbench_core::capacity::CapacitySearchSpec = serde_saphyr::from_str(text)
        .map_err(|e| RunError::CapacitySearch(format!("--capacity-search: {e}")))?;
    llmbench_core::capacity::CapacitySearch::try_from(&spec)
        .map_err(|e| RunError::CapacitySearch(format!("--capacity-search: {e}")))?;
    Ok(spec)
}

/// Turns SIGTERM and SIGINT into a stop: the first stops issuing and gives requests in flight `grace`, a second
/// cancels them at once. The handlers live until the returned task is aborted.
fn watch_signals(
    control: &Control,
    grace: Duration,
) -> Result<tokio::task::JoinHandle<()>, RunError> {
    use tokio::signal::unix::{SignalKind, signal};
    let listen = |kind: SignalKind, name: Signal| {
        signal(kind).map_err(|source| RunError::Signals {
            signal: name,
            source,
        })
    };
    let mut term = listen(SignalKind::terminate(), Signal::Sigterm)?;
    let mut int = listen(SignalKind::interrupt(), Signal::Sigint)?;
    let control = control.clone();
    Ok(tokio::spawn(async move {
        let mut first = true;
        loop {
            let signal = tokio::select! {
                Some(()) = term.recv() => Signal::Sigterm,
                Some(()) = int.recv() => Signal::Sigint,
                else => return,
            };
            let reason = StopReason::Interrupted { signal };
            if first {
                tracing::warn!(
                    %signal,
                    grace = %humantime::format_duration(grace),
                    "stopping: no new requests; requests in flight may finish within the grace period"
                );
                control.stop_after(reason, grace);
                first = false;
            } else {
                tracing::warn!(%signal, "stopping now: cancelling the requests in flight");
                control.stop_now(reason);
            }
        }
    }))
}

/// The profile's report settings in the terms of the result files that use them.
fn report_options(workload: &Workload) -> ReportOptions {
    let mut options = ReportOptions {
        goodput: workload
            .goodput
            .iter()
            .map(|c| report::Slo {
                metric: c.metric,
                limit_s: c.limit.as_secs_f64(),
            })
            .collect(),
        ..ReportOptions::default()
    };
    match workload.harness {
        Harness::VllmBenchmark | Harness::Inferencemax => {
            options.vllm_metric_percentiles = workload.report.percentiles.clone();
            if !workload.report.percentile_metrics.is_empty() {
                options.vllm_percentile_metrics = workload.report.percentile_metrics.clone();
            }
            options.vllm_save_detailed = workload.report.per_request;
            options.vllm_result_filename = workload.report.file_name.clone();
        }
        _ => {
            options.percentiles = workload.report.percentiles.clone();
            options.inference_perf_summary = workload.report.summary;
            options.inference_perf_per_stage = workload.report.per_stage;
            options.inference_perf_per_request = workload.report.per_request;
            options.inference_perf_use_server_output_tokens =
                workload.report.use_server_output_tokens;
            options.prometheus_summary = workload.report.prometheus_summary;
            options.prometheus_per_stage = workload.report.prometheus_per_stage;
            options.session_summary = workload.report.session_summary;
            options.session_per_stage = workload.report.session_per_stage;
            options.session_per_session = workload.report.session_per_session;
        }
    }
    options
}

/// A name with a path separator or a YAML suffix, or one that exists on disk, is a file; anything else names a
/// bundled profile.
fn template_source(profile: &str) -> TemplateSource {
    let path = Path::new(profile);
    if path.exists()
        || profile.contains('/')
        || profile.ends_with(".yaml")
        || profile.ends_with(".in")
    {
        TemplateSource::File(path.to_owned())
    } else {
        TemplateSource::Builtin(profile.to_owned())
    }
}

fn profile_stem(template_name: &str) -> &str {
    let file = template_name.rsplit('/').next().unwrap_or(template_name);
    file.trim_end_matches(".in").trim_end_matches(".yaml")
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), RunError> {
    std::fs::write(path, bytes).map_err(|source| RunError::WriteOutput {
        path: path.to_owned(),
        source,
    })
}

/// The run's HTTP client. Plain `http://` goes through the engine's own HTTP/1.1 client unless a proxy is
/// configured; TLS and proxies through reqwest. Either way one pool for the run, sized so a run with thousands of
/// concurrent streams never queues inside the client, with Nagle off so small requests go out at once. Neither
/// follows redirects: a 3xx is the server's answer, recorded as a failed request, as our own client records it.
fn transport(
    url: &str,
    api_key: Option<&str>,
    headers: &[(String, String)],
    max_concurrency: Option<u32>,
) -> Result<Transport, RunError> {
    let idle = max_concurrency.map_or(1024, |c| c as usize).max(64);
    if url.starts_with("http://") && !proxy_configured() {
        let mut headers = headers.to_vec();
        if let Some(key) = api_key {
            headers.push(("Authorization".to_owned(), format!("Bearer {key}")));
        }
        let endpoint = engine::http1::Http1Endpoint::new(url, &headers, idle)?;
        return Ok(Transport::Http1(endpoint));
    }
    reqwest::Client::builder()
        .pool_max_idle_per_host(idle)
        .tcp_nodelay(true)
        .http1_only()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map(Transport::Reqwest)
        .map_err(RunError::Client)
}

/// Whether the environment names an HTTP proxy, which reqwest honours (with NO_PROXY) and our client does not.
fn proxy_configured() -> bool {
    ["http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"]
        .iter()
        .any(|name| std::env::var_os(name).is_some_and(|value| !value.is_empty()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profile_names_and_files_are_told_apart() {
        assert!(matches!(
            template_source("sanity_random"),
            TemplateSource::Builtin(_)
        ));
        assert!(matches!(
            template_source("./mine.yaml"),
            TemplateSource::File(_)
        ));
        assert!(matches!(
            template_source("mine.yaml.in"),
            TemplateSource::File(_)
        ));
    }

    #[test]
    fn the_default_run_id_uses_the_profile_stem() {
        assert_eq!(
            profile_stem("inference-perf/sanity_random.yaml.in"),
            "sanity_random"
        );
        assert_eq!(profile_stem("/tmp/x/mine.yaml"), "mine");
    }
}
