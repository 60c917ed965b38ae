//! The flags of `llmbench run`.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use llmbench_core::harness::Harness;
use llmbench_engine::engine;
use llmbench_workload::workload::load_flags::LoadFlags;

use super::ApiKey;
use crate::plan::Shard;

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
    /// from memory; past the budget the launcher keeps no record in memory (requests.bin has them all) and
    /// summarises the run from disk afterwards in bounded memory, with the same numbers and every report file,
    /// byte for byte. The pictures keep 80 bytes per request: past half the budget in those they place a uniform
    /// sample of the requests (and say so), with the rates over time counted from every one. MLPerf runs keep
    /// every record for LoadGen's verdict, with a warning past the budget.
    #[arg(long, value_parser = llmbench_workload::limits::parse_bytes, default_value = "256MiB", value_name = "BYTES")]
    pub records_memory: u64,
    /// For a results directory that dies with its container (a Kubernetes emptyDir): once the run ended, however
    /// it ended, write the directory to standard output as a gzipped tar in a base64 block of at most BYTES (e.g.
    /// 4MiB), largest files left out first and named in its NOT_KEPT.txt. The BenchmarkRun operator sets it for
    /// emptyDir runs and keeps the block in ConfigMaps, which `llmbench results fetch` reads. Needs --run-id.
    #[arg(long, value_parser = llmbench_workload::limits::parse_bytes, value_name = "BYTES", requires = "run_id")]
    pub results_to_log: Option<u64>,
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
    #[arg(long, default_value_t = llmbench_engine::stack::serve::DEFAULT_HEALTH_FAILURES, value_name = "N")]
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
    /// Run the pre-flight alone and stop: check the server as the run would (the same profile, flags, API path,
    /// key and model), then exit 0 when it passes and 6 when it does not; no prompt is built, nothing is timed and
    /// no results directory is made. With --summary-file, the verdict in words goes there (the operator's
    /// pre-flight pod writes it to its termination message). The server is --endpoint, else the one the profile
    /// names; there is no embedded simulator to check.
    #[arg(
        long,
        conflicts_with_all = [
            "no_preflight", "serve", "wait_for_release", "results_to_log", "capacity_search",
            "reset_prefix_cache", "warm_prefix_cache", "vllm_profiler",
        ]
    )]
    pub preflight_only: bool,
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
