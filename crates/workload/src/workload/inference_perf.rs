//! inference-perf's config file (`inference_perf/config/config.py`, FORMATS 1.4) → `Workload`.
//!
//! Lenient like inference-perf ≤ v0.6.1 (unknown keys are warnings), with the exceptions that
//! would silently change what runs: a section nested where it is never read, and features
//! llmbench does not run yet, are errors.

use std::time::Duration;

use super::ParseOptions;
use super::error::{WarningKind, WorkloadError};
use super::limits::{self, Limit};
use super::model::*;
use super::reader::{At, Ctx, MapReader, join};
use super::yaml::Node;

const SECTIONS: [&str; 9] = [
    "load",
    "api",
    "server",
    "tokenizer",
    "data",
    "report",
    "storage",
    "metrics",
    "circuit_breakers",
];

/// aiohttp's default total timeout, which inference-perf keeps when a profile sets no `load.request_timeout`.
pub(crate) const INFERENCE_PERF_DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(300);

pub(crate) fn parse(
    ctx: &mut Ctx,
    doc: &Node,
    options: &ParseOptions,
) -> Result<Workload, WorkloadError> {
    let mut root = MapReader::root(ctx, doc)?;
    reject_misplaced_sections(ctx, doc)?;

    let mut workload = Workload::empty(Harness::InferencePerf, Dialect::InferencePerf);
    workload.stage_interval = Duration::from_secs(1);
    workload.api.ignore_eos = true;

    // Load first: an unsupported load type is the most fundamental thing to report.
    let load = match root.get("load") {
        Some(f) => Some(f.map(ctx)?),
        None => None,
    };
    let Some(load) = load else {
        return Err(ctx.missing("load", 0, "an inference-perf profile needs `load.stages`"));
    };
    let load_line = load.line;
    // `load.circuit_breakers`: (name, key path, line) of each breaker the load enables.
    let mut enabled_breakers = Vec::new();
    let mut lora_split_line = None;
    let trace_replay = parse_load(
        ctx,
        load,
        &mut workload,
        options,
        &mut enabled_breakers,
        &mut lora_split_line,
    )?;
    let session_replay = workload
        .stages
        .iter()
        .any(|s| matches!(s.arrival, Arrival::TraceSessions { .. }));

    let mut session_header_line = 0;
    let slo_headers = match root.get("api") {
        Some(f) => Some(parse_api(
            ctx,
            f.map(ctx)?,
            &mut workload.api,
            &mut session_header_line,
        )?),
        None => None,
    };
    if let Some(f) = root.get("server") {
        parse_server(ctx, f.map(ctx)?, &mut workload.api)?;
    }
    if let Some(f) = root.get("tokenizer") {
        workload.tokenizer = parse_tokenizer(ctx, f.map(ctx)?)?;
    }
    workload.data = match root.get("data") {
        Some(f) => parse_data(
            ctx,
            f.map(ctx)?,
            &mut workload.api,
            trace_replay.is_some(),
            session_replay,
        )?,
        None => DataSpec::Mock,
    };
    if workload.api.session_id_header.is_some()
        && !matches!(
            workload.data,
            DataSpec::OtelTrace(_) | DataSpec::ConversationReplay(_)
        )
    {
        // Upstream sends it for any data carrying a session (`openai_client.py`: `session_id` or
        // `user_session_id`); shared_prefix's sessions are the ones llmbench does not name yet.
        return Err(ctx.unsupported(
            "api.session_id_header_key",
            session_header_line,
            "a session-id header on data other than trace_session_replay and conversation_replay \
             (shared_prefix sessions are not named yet)",
        ));
    }
    if session_replay && !matches!(workload.data, DataSpec::OtelTrace(_)) {
        // `run_session_stage`: "Session-based replay requires a SessionGenerator".
        return Err(ctx.invalid(
            "load.type",
            load_line,
            "`trace_session_replay` replays the sessions of `data.type: otel_trace_replay` (or \
             `weka_trace_replay`) only",
        ));
    }
    if let Some(line) = trace_replay
        && !matches!(workload.data, DataSpec::AzureTrace(_))
    {
        // `load_generator.py` `run_stage`: without `data.trace` a stage sends `int(rate × duration)` requests of
        // its data at the trace's times (and fails once the trace runs out).
        return Err(ctx.unsupported(
            "load.type",
            line,
            "`trace_replay` with prompts from other than `data.type: random` with `data.trace` (inference-perf \
             then sends `int(rate × duration)` requests of that data at the trace's times)",
        ));
    }
    if let Some(f) = root.get("report") {
        parse_report(ctx, f.map(ctx)?, &mut workload)?;
    }
    if let Some(slo) = slo_headers {
        slo.apply(ctx, &workload.api, &mut workload.goodput)?;
    }
    if let Some(f) = root.get_output("storage") {
        parse_storage(ctx, f.map(ctx)?, &mut workload.report)?;
    }
    if let Some(f) = root.get("metrics") {
        workload.server_metrics = parse_metrics(ctx, f.map(ctx)?)?;
    }
    // inference-perf's main: per-stage Prometheus reports need every stage's last samples scraped before the next
    // stage starts, so the pause between stages is at least the Prometheus scrape interval.
    if let Some(source) = &workload.server_metrics
        && workload.report.prometheus_per_stage
    {
        workload.stage_interval = workload.stage_interval.max(source.scrape_interval);
    }
    let configured = match root.get("circuit_breakers").filter(|f| !f.is_null()) {
        Some(f) => super::circuit_breaker::parse_configs(ctx, &f)?,
        None => Vec::new(),
    };
    workload.circuit_breakers =
        super::circuit_breaker::enabled(ctx, configured, &enabled_breakers)?;
    if let Some((_, path, line)) = enabled_breakers.first()
        && workload.stages.iter().any(|s| {
            matches!(
                s.arrival,
                Arrival::Sweep(_)
                    | Arrival::InferencePerfTrace { .. }
                    | Arrival::TraceSessions { .. }
            )
        })
    {
        return Err(ctx.unsupported(
            path,
            *line,
            "circuit breakers with a sweep or a trace replay (llmbench feeds them on constant, poisson and \
             concurrent stages)",
        ));
    }
    // Adapters are spread over a run's list of prompts; a session's requests are built as its answers come.
    if let (Some(_), Some((path, line))) = (&workload.api.lora, lora_split_line) {
        let sessions = match &workload.data {
            DataSpec::SharedPrefix(shared) => shared.multi_turn,
            DataSpec::ConversationReplay(_) | DataSpec::OtelTrace(_) | DataSpec::AzureTrace(_) => {
                true
            }
            _ => false,
        };
        if sessions {
            return Err(ctx.unsupported(
                &path,
                line,
                "LoRA traffic with multi-turn sessions, conversation replays and traces (llmbench spreads the \
                 adapters over a run's list of prompts)",
            ));
        }
    }
    root.finish(ctx, &[]);
    Ok(workload)
}

/// `tokenizer: {data: ...}` and the like: inference-perf never reads a section nested inside
/// another one, so the file would run with defaults (lenient) or be rejected (strict).
fn reject_misplaced_sections(ctx: &Ctx, doc: &Node) -> Result<(), WorkloadError> {
    let Some(entries) = doc.entries() else {
        return Ok(());
    };
    for (section, node) in entries {
        let Some(inner) = node.entries() else {
            continue;
        };
        for (key, _) in inner {
            // `load.circuit_breakers` is the load's list of breakers to enable, not the top-level section.
            let own_field = section.name == "load" && key.name == "circuit_breakers";
            if SECTIONS.contains(&key.name.as_str()) && key.name != section.name && !own_field {
                let top_level = doc.get(&key.name).is_some();
                return Err(ctx.misplaced(
                    &format!("{}.{}", section.name, key.name),
                    key.line,
                    format!(
                        "`{}` is a top-level section; nested under `{}` it is never read, so \
                         inference-perf would run with {} (lenient versions) or reject the file \
                         (strict versions); move it to the top level",
                        key.name,
                        section.name,
                        if top_level {
                            "the top-level one only".to_string()
                        } else {
                            format!("the default `{}`", default_of(&key.name))
                        },
                    ),
                ));
            }
        }
    }
    Ok(())
}

fn default_of(section: &str) -> &'static str {
    match section {
        "data" => "mock data",
        "load" => "load (constant)",
        _ => "settings",
    }
}

/// Parses `load`; returns the line of `load.type` when it is `trace_replay`.
fn parse_load(
    ctx: &mut Ctx,
    mut load: MapReader<'_>,
    workload: &mut Workload,
    options: &ParseOptions,
    enabled_breakers: &mut Vec<(String, String, u32)>,
    lora_split_line: &mut Option<(String, u32)>,
) -> Result<Option<u32>, WorkloadError> {
    let type_line = load.get("type").map_or(load.line, |f| f.line);
    // `trace_session_replay`: sessions of a trace corpus, each a graph of dependent calls.
    let mut sessions = false;
    let kind = match load.get("type") {
        None => LoadKind::Constant,
        Some(f) => match f.str(ctx)? {
            "constant" => LoadKind::Constant,
            "poisson" => LoadKind::Poisson,
            "concurrent" => LoadKind::Concurrent,
            "trace_replay" => LoadKind::Trace,
            "trace_session_replay" => {
                sessions = true;
                LoadKind::Trace
            }
            other => {
                return Err(f.invalid(
                    ctx,
                    format!(
                        "unknown load type `{other}`; expected constant, poisson, concurrent, \
                         trace_replay or trace_session_replay"
                    ),
                ));
            }
        },
    };
    if sessions {
        // `run_session_stage` never reads `load.trace`: the sessions' own times are the schedule.
        load.ignore(
            ctx,
            "trace",
            "a `trace_session_replay` load takes its times from the session traces",
        );
    }
    let trace_file = match load.get("trace") {
        Some(f) if kind == LoadKind::Trace => Some(trace_config(ctx, &f)?),
        Some(f) => return Err(f.unsupported(ctx, "trace replay (`load.trace`)")),
        // `LoadGenerator.__init__`: "Trace file is required for trace replay load generator".
        None if kind == LoadKind::Trace && !sessions => {
            return Err(ctx.missing(
                "load.trace",
                type_line,
                "`type: trace_replay` needs `load.trace: {file, format}`",
            ));
        }
        None => None,
    };
    if let Some(f) = load.get("circuit_breakers") {
        for item in f.seq(ctx)? {
            enabled_breakers.push((item.str(ctx)?.to_owned(), item.path.clone(), item.line));
        }
    }
    if let Some(f) = load.get("interval") {
        workload.stage_interval = f.seconds(ctx)?;
    }
    if let Some(f) = load.get("num_workers") {
        workload.workers.num_workers = Some(f.concurrency(ctx)?);
    }
    if let Some(f) = load.get("worker_max_concurrency") {
        workload.workers.worker_max_concurrency = Some(f.concurrency(ctx)?);
    }
    if let Some(f) = load.get("worker_max_tcp_connections") {
        // Each worker's aiohttp connector holds at most this many connections; llmbench opens one per request
        // in flight. A cap at or above the worker's in-flight cap never binds, so it changes nothing; a lower
        // one would queue requests inside the client, which llmbench does not reproduce.
        let connections = f.concurrency(ctx)?;
        let in_flight = workload
            .workers
            .worker_max_concurrency
            .unwrap_or(INFERENCE_PERF_WORKER_MAX_CONCURRENCY);
        if connections < in_flight {
            return Err(f.unsupported(
                ctx,
                format!(
                    "a TCP connection cap ({connections}) below the worker's in-flight cap \
                     (`worker_max_concurrency`, {in_flight}), which makes requests queue for a connection inside \
                     the client (raise it to at least {in_flight})"
                ),
            ));
        }
        workload.workers.worker_max_tcp_connections = Some(connections);
    }
    // Without `request_timeout` inference-perf's aiohttp session keeps aiohttp's default timeout, 300 s in all
    // (`openai_client.py`: `ClientTimeout(total=timeout) if timeout else sentinel`).
    workload.request_timeout = Some(match load.get("request_timeout") {
        Some(f) => f.positive_seconds(ctx)?,
        None => INFERENCE_PERF_DEFAULT_REQUEST_TIMEOUT,
    });
    match load.get("base_seed") {
        Some(f) => {
            workload.seed = f.u64(ctx)?;
            workload.seed_origin = SeedOrigin::Profile;
        }
        None => set_default_seed(workload, options, 0),
    }
    if let Some(f) = load.get("lora_traffic_split") {
        workload.api.lora = lora_traffic_split(ctx, &f, workload.seed)?;
        *lora_split_line = Some((f.path.clone(), f.line));
    }

    if let Some(f) = load.get("sweep") {
        if sessions {
            // `LoadConfig` validation: "Cannot have sweep config with CONCURRENT or TRACE_SESSION_REPLAY".
            return Err(f.invalid(
                ctx,
                "a sweep cannot be combined with a `trace_session_replay` load",
            ));
        }
        if kind == LoadKind::Trace {
            return Err(f.unsupported(ctx, "a sweep over a `trace_replay` load"));
        }
        if kind == LoadKind::Concurrent {
            return Err(f.invalid(ctx, "a sweep cannot be combined with a `concurrent` load"));
        }
        let process = if kind == LoadKind::Poisson {
            SweepProcess::Poisson
        } else {
            SweepProcess::Constant
        };
        let sweep = parse_sweep(ctx, &f, process)?;
        // The sweep generates the stages; listed ones are replaced, as upstream does.
        load.ignore(ctx, "stages", "replaced by the stages the sweep generates");
        workload.stages = vec![Stage {
            load: LoadKind::Sweep,
            arrival: Arrival::Sweep(sweep),
            limit: StageLimit::default(),
            max_concurrency: None,
            warmup: None,
            cooldown: None,
        }];
        load.finish(ctx, &[]);
        return Ok(None);
    }

    let stages = load.require(ctx, "stages", "at least one stage (or a `sweep`)")?;
    let items = stages.stage_list(ctx)?;
    if items.is_empty() {
        return Err(stages.invalid(ctx, "needs at least one stage"));
    }
    for (index, item) in items.into_iter().enumerate() {
        let stage = match (kind, &trace_file) {
            _ if sessions => parse_session_stage(ctx, &item)?,
            (LoadKind::Concurrent, _) => parse_concurrent_stage(ctx, &item)?,
            (LoadKind::Trace, Some(file)) => {
                if index > 0 {
                    // The random data generator's rows are indexed across stages (`data_index` keeps counting)
                    // and a second stage indexes past them: upstream fails there.
                    return Err(item.unsupported(
                        ctx,
                        "a second `trace_replay` stage (inference-perf's trace-driven data has run out by then)",
                    ));
                }
                // The stage's `rate` and `duration` are checked as upstream's `StandardLoadStage` checks them, but
                // with `data.trace` neither is used: the trace's rows are the requests, sent at their times, and
                // the stage waits for all of them (`run_stage`).
                let mut stage = parse_rate_stage(ctx, &item, LoadKind::Constant)?;
                stage.load = LoadKind::Trace;
                stage.arrival = Arrival::InferencePerfTrace { file: file.clone() };
                stage.limit = StageLimit::default();
                stage
            }
            _ => parse_rate_stage(ctx, &item, kind)?,
        };
        workload.stages.push(stage);
    }
    load.finish(ctx, &[]);
    Ok((kind == LoadKind::Trace && !sessions).then_some(type_line))
}

/// A `trace_session_replay` stage (`TraceSessionReplayLoadStage`): `concurrent_sessions` (required, 0 = no limit),
/// `session_rate` (> 0, at most `concurrent_sessions` when that is set), `num_sessions` (> 0) and `timeout` (s,
/// > 0).
fn parse_session_stage(ctx: &mut Ctx, item: &At<'_>) -> Result<Stage, WorkloadError> {
    let mut m = item.map(ctx)?;
    let field = m.require(
        ctx,
        "concurrent_sessions",
        "a `trace_session_replay` stage has `concurrent_sessions` (0 for all at once)",
    )?;
    let concurrent_sessions = u32::try_from(field.u64(ctx)?)
        .map_err(|_| field.invalid(ctx, "too many concurrent sessions"))?;
    let session_rate = match m.get("session_rate") {
        Some(f) => {
            let rate = f.positive_f64(ctx)?;
            if concurrent_sessions > 0 && rate > f64::from(concurrent_sessions) {
                return Err(f.invalid(
                    ctx,
                    format!(
                        "session_rate ({rate}) cannot exceed concurrent_sessions ({concurrent_sessions}), as \
                         inference-perf checks"
                    ),
                ));
            }
            Some(rate)
        }
        None => None,
    };
    let num_sessions = m.get("num_sessions").map(|f| f.requests(ctx)).transpose()?;
    let timeout = m
        .get("timeout")
        .map(|f| f.positive_seconds(ctx))
        .transpose()?;
    m.finish(ctx, &[]);
    Ok(Stage {
        load: LoadKind::Trace,
        arrival: Arrival::TraceSessions {
            concurrent_sessions,
            session_rate,
            num_sessions,
            timeout,
        },
        limit: StageLimit {
            duration: timeout,
            ..StageLimit::default()
        },
        max_concurrency: None,
        warmup: None,
        cooldown: None,
    })
}

/// `TraceConfig` (`config/datagen/replay.py`): `file`, and `format` (only `AzurePublicDataset`, the default).
fn trace_config(ctx: &mut Ctx, f: &At<'_>) -> Result<String, WorkloadError> {
    let mut m = f.map(ctx)?;
    let file = m
        .require(ctx, "file", "a trace names its `file`")?
        .str(ctx)?
        .to_string();
    if let Some(format) = m.get("format") {
        let value = format.str(ctx)?;
        if value != "AzurePublicDataset" {
            return Err(format.invalid(
                ctx,
                format!("unknown trace format `{value}`; expected AzurePublicDataset"),
            ));
        }
    }
    m.finish(ctx, &[]);
    Ok(file)
}

/// `load.lora_traffic_split: [{name, split}]` (`MultiLoRAConfig`), validated as `LoadConfig` validates it: the
/// splits' float sum must be exactly 1.0 (`[0.7, 0.2, 0.1]` sums to 0.9999999999999999 and is refused upstream
/// too). A negative split passes upstream's validator and then fails numpy's `choice` at the first request, so it
/// is refused here before the clock. An empty list sends to the base model, as upstream does.
fn lora_traffic_split(
    ctx: &mut Ctx,
    f: &At<'_>,
    seed: u64,
) -> Result<Option<LoraTraffic>, WorkloadError> {
    let mut adapters = Vec::new();
    let mut weights = Vec::new();
    for item in f.seq(ctx)? {
        let mut entry = item.map(ctx)?;
        let name = entry.require(
            ctx,
            "name",
            "each `lora_traffic_split` entry names its adapter",
        )?;
        adapters.push(name.str(ctx)?.to_owned());
        let split_at = entry.require(
            ctx,
            "split",
            "each `lora_traffic_split` entry gives its fraction of the traffic",
        )?;
        let split = split_at.f64(ctx)?;
        if split.is_nan() || split < 0.0 {
            return Err(split_at.invalid(
                ctx,
                format!("{split} is not a fraction of the traffic (numpy's choice refuses negative probabilities)"),
            ));
        }
        weights.push(split);
        entry.finish(ctx, &[]);
    }
    if adapters.is_empty() {
        return Ok(None);
    }
    let total: f64 = weights.iter().fold(0.0, |sum, w| sum + w);
    if total != 1.0 {
        return Err(f.invalid(
            ctx,
            format!(
                "the splits add up to {total:?}, not 1.0 (inference-perf refuses it: \"MultiLoRA traffic split in load \
                 config does not add up to 1.0\"; it adds the floats in order and wants exactly 1.0)"
            ),
        ));
    }
    Ok(Some(LoraTraffic {
        adapters,
        pick: LoraPick::Weighted {
            weights,
            // numpy's legacy seeding takes 32 bits.
            seed: (seed % (1 << 32)) as u32,
        },
    }))
}

pub(crate) fn set_default_seed(workload: &mut Workload, options: &ParseOptions, tool: u64) {
    match options.default_seed {
        Some(seed) => {
            workload.seed = seed;
            workload.seed_origin = SeedOrigin::Caller;
        }
        None => {
            workload.seed = tool;
            workload.seed_origin = SeedOrigin::ToolDefault;
        }
    }
}

fn parse_rate_stage(ctx: &mut Ctx, item: &At<'_>, kind: LoadKind) -> Result<Stage, WorkloadError> {
    let mut m = item.map(ctx)?;
    let rate_field = m.require(
        ctx,
        "rate",
        "a rate stage has `rate` (requests/s) and `duration` (s)",
    )?;
    let rate = rate_field.rate(ctx)?;
    let duration_field = m.require(
        ctx,
        "duration",
        "a rate stage has `rate` (requests/s) and `duration` (s)",
    )?;
    let duration = duration_field.positive_seconds(ctx)?;
    let seconds = duration_field.positive_u64(ctx)?;
    // Every send time of the stage is computed before it starts: `int(rate × duration)` of them.
    let arrivals = (rate * seconds as f64).floor();
    if arrivals > limits::MAX_ARRIVALS as f64 {
        return Err(rate_field.invalid(
            ctx,
            format!(
                "{rate} requests/s for {seconds} s is {arrivals} requests; {}",
                limits::exceeded(Limit::Arrivals, arrivals)
            ),
        ));
    }
    // Explicit nulls are accepted (guide_pd-disaggregation_{1,2}); values are not.
    for key in ["num_requests", "concurrency_level"] {
        if let Some(f) = m.get(key) {
            return Err(f.invalid(
                ctx,
                format!(
                    "a `{}` stage takes `rate` and `duration`; `{key}` belongs to `concurrent` \
                     stages",
                    kind.name()
                ),
            ));
        }
    }
    m.finish(ctx, &[]);
    let arrival = if kind == LoadKind::Poisson {
        Arrival::InferencePerfPoisson { rate, duration }
    } else {
        Arrival::InferencePerfConstant { rate, duration }
    };
    Ok(Stage {
        load: kind,
        arrival,
        limit: StageLimit::duration(duration),
        max_concurrency: None,
        warmup: None,
        cooldown: None,
    })
}

fn parse_concurrent_stage(ctx: &mut Ctx, item: &At<'_>) -> Result<Stage, WorkloadError> {
    let mut m = item.map(ctx)?;
    let why = "a `concurrent` stage has `num_requests` and `concurrency_level`";
    let num_requests = m.require(ctx, "num_requests", why)?.requests(ctx)?;
    let concurrency = m.require(ctx, "concurrency_level", why)?.concurrency(ctx)?;
    for key in ["rate", "duration"] {
        if let Some(f) = m.get(key) {
            return Err(f.invalid(
                ctx,
                format!(
                    "a `concurrent` stage takes `num_requests` and `concurrency_level`; `{key}` \
                     belongs to `constant` and `poisson` stages"
                ),
            ));
        }
    }
    m.finish(ctx, &[]);
    Ok(Stage {
        load: LoadKind::Concurrent,
        arrival: Arrival::Closed {
            concurrency,
            rampup: Duration::ZERO,
        },
        limit: StageLimit::requests(num_requests),
        max_concurrency: None,
        warmup: None,
        cooldown: None,
    })
}

fn parse_sweep(ctx: &mut Ctx, f: &At<'_>, process: SweepProcess) -> Result<Sweep, WorkloadError> {
    let mut m = f.map(ctx)?;
    // `SweepConfig` in inference-perf's loadgen config: `type` has no default; the rest do.
    let type_field = m.require(
        ctx,
        "type",
        "inference-perf's sweep needs its `type` (linear or geometric)",
    )?;
    let progression = match type_field.str(ctx)? {
        "linear" => SweepProgression::Linear,
        "geometric" => SweepProgression::Geometric,
        other => {
            return Err(type_field.invalid(
                ctx,
                format!("unknown sweep type `{other}`; expected linear or geometric"),
            ));
        }
    };
    let num_stages = match m.get("num_stages") {
        Some(f) => {
            let n = f.positive_within(ctx, Limit::Stages)?;
            u32::try_from(n).map_err(|_| f.invalid(ctx, format!("{n} is too large")))?
        }
        None => 5,
    };
    let stage_duration = match m.get("stage_duration") {
        Some(f) => {
            let d = f.positive_seconds(ctx)?;
            f.positive_u64(ctx)?;
            d
        }
        None => Duration::from_secs(180),
    };
    let num_requests = Some(match m.get("num_requests") {
        Some(f) => f.requests(ctx)?,
        None => 2000,
    });
    let timeout = Some(match m.get("timeout") {
        Some(f) => f.seconds(ctx)?,
        None => Duration::from_secs(60),
    });
    let saturation_percentile = Some(match m.get("saturation_percentile") {
        Some(p) => {
            let v = p.positive_f64(ctx)?;
            if v > 100.0 {
                return Err(p.invalid(ctx, format!("a percentile is at most 100, found {v}")));
            }
            v
        }
        None => 95.0,
    });
    m.finish(ctx, &[]);
    Ok(Sweep::InferencePerf {
        process,
        progression,
        num_stages,
        stage_duration,
        num_requests,
        timeout,
        saturation_percentile,
    })
}

/// `session_id_header_key` is checked against the data once it is read (see [`parse`]).
fn parse_api<'n>(
    ctx: &mut Ctx,
    mut m: MapReader<'n>,
    api: &mut Api,
    session_header_line: &mut u32,
) -> Result<SloHeaders<'n>, WorkloadError> {
    if let Some(f) = m.get("type") {
        api.kind = match f.str(ctx)? {
            "completion" => ApiKind::Completion,
            "chat" => ApiKind::Chat,
            // `AnthropicMessagesAPIData` (apis/anthropic_messages.py): POST /v1/messages.
            "anthropic_messages" => ApiKind::Messages,
            other => {
                return Err(f.invalid(
                    ctx,
                    format!(
                        "unknown API type `{other}`; expected completion, chat or \
                         anthropic_messages"
                    ),
                ));
            }
        };
    }
    if let Some(f) = m.get("streaming") {
        api.streaming = f.bool(ctx)?;
    }
    if let Some(f) = m.get("headers") {
        api.headers = string_map(ctx, &f)?;
    }
    if let Some(f) = m.get("response_format")
        && !f.is_null()
    {
        let format = response_format(ctx, &f)?;
        // `openai_client.py` `process_request`: added to every body but an Anthropic Messages one, after the body
        // is built (so it replaces a field of the same name, as `extra_body` does).
        if api.kind == ApiKind::Messages {
            ctx.warn(
                &f.path,
                f.line,
                WarningKind::Ignored,
                "not sent: inference-perf sends `response_format` to OpenAI APIs only, not to `anthropic_messages`",
            );
        } else {
            api.extra_body.insert("response_format".to_owned(), format);
        }
    }
    if let Some(f) = m.get("session_id_header_key")
        && !f.is_null()
    {
        let name = f.str(ctx)?;
        if !name.is_empty() {
            let bad = |b: u8| b.is_ascii_control() || b == b':' || b == b' ';
            if name.bytes().any(bad) {
                return Err(f.invalid(ctx, format!("`{name}` is not an HTTP header name")));
            }
            api.session_id_header = Some(name.to_string());
            *session_header_line = f.line;
        }
    }
    if let Some(f) = m.get("session_token_header_key")
        && !f.is_null()
    {
        return Err(f.unsupported(
            ctx,
            "a session token echoed from responses (`session_token_header_key`: llmbench does not read response \
             headers yet)",
        ));
    }
    let slo = SloHeaders {
        unit: m.get("slo_unit").map(|f| f.str(ctx)).transpose()?,
        ttft: m.get("slo_ttft_header").map(|f| f.str(ctx)).transpose()?,
        tpot: m.get("slo_tpot_header").map(|f| f.str(ctx)).transpose()?,
    };
    m.finish(ctx, &[]);
    Ok(slo)
}

/// `api.response_format` as `ResponseFormat.to_api_format` (config/apis/config.py) sends it: `{"type":
/// "json_object"}`, or `{"type": "json_schema", "json_schema": {"name": <name>, "schema": <json_schema>}}` with
/// `name` defaulting to `structured_output` and a missing schema sent as `null`, as inference-perf sends it.
fn response_format(ctx: &mut Ctx, f: &At<'_>) -> Result<serde_json::Value, WorkloadError> {
    let mut m = f.map(ctx)?;
    let schema_type = match m.get("type") {
        None => "json_schema",
        Some(t) => match t.str(ctx)? {
            kind @ ("json_schema" | "json_object") => kind,
            other => {
                return Err(t.invalid(
                    ctx,
                    format!("unknown response_format type `{other}`; expected json_schema or json_object"),
                ));
            }
        },
    };
    let name = m
        .get("name")
        .map(|n| n.str(ctx))
        .transpose()?
        .unwrap_or("structured_output");
    let schema = match m.get("json_schema") {
        Some(s) if !s.is_null() => {
            let schema = s.node.to_json();
            if !schema.is_object() {
                return Err(ctx.wrong_type(&s.path, s.node, "a JSON schema (a map)"));
            }
            schema
        }
        _ => serde_json::Value::Null,
    };
    m.finish(ctx, &[]);
    Ok(if schema_type == "json_object" {
        serde_json::json!({"type": "json_object"})
    } else {
        serde_json::json!({"type": "json_schema", "json_schema": {"name": name, "schema": schema}})
    })
}

/// inference-perf's per-request SLO headers (`api.slo_unit`, `slo_ttft_header`, `slo_tpot_header`): when a
/// streamed request carries `x-slo-ttft-<unit>` / `x-slo-tpot-<unit>` (or the configured names) among its
/// headers, the value, in `unit` (`ms` by default; `s`, `us`; any other unit counts as seconds), is that
/// request's TTFT / TPOT SLO for goodput, taking precedence over `report.goodput` (`openai_client.py`,
/// `reportgen/base.py::calculate_goodput_metrics`). Every request carries the same `api.headers`, so the
/// header values become the run's TTFT / TPOT goodput constraints.
struct SloHeaders<'n> {
    unit: Option<&'n str>,
    ttft: Option<&'n str>,
    tpot: Option<&'n str>,
}

impl SloHeaders<'_> {
    fn apply(
        &self,
        ctx: &Ctx,
        api: &Api,
        goodput: &mut Vec<GoodputConstraint>,
    ) -> Result<(), WorkloadError> {
        // Only streamed requests with token timestamps get header SLOs upstream.
        if !api.streaming {
            return Ok(());
        }
        let unit = self.unit.unwrap_or("ms");
        let factor = match unit.to_ascii_lowercase().as_str() {
            "s" => 1.0,
            "ms" => 0.001,
            "us" => 0.000_001,
            _ => 1.0,
        };
        for (metric, configured, name) in [
            (SloMetric::Ttft, self.ttft, "ttft"),
            (SloMetric::Tpot, self.tpot, "tpot"),
        ] {
            let header = configured.map_or_else(|| format!("x-slo-{name}-{unit}"), str::to_string);
            let Some((_, value)) = api
                .headers
                .iter()
                .rev()
                .find(|(k, _)| k.eq_ignore_ascii_case(&header))
            else {
                continue;
            };
            if value == "default" {
                continue;
            }
            let key = format!("api.headers.{header}");
            let seconds = value
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v >= 0.0)
                .ok_or_else(|| {
                    // inference-perf logs "Invalid TTFT SLO value" and ignores it; a goodput SLO that silently
                    // vanishes changes what is measured, so it is refused here.
                    ctx.invalid(
                        &key,
                        0,
                        format!("`{value}` is not a number of {unit}: the header is inference-perf's per-request {} SLO", name.to_uppercase()),
                    )
                })?
                * factor;
            let limit = Duration::try_from_secs_f64(seconds)
                .ok()
                .filter(|d| *d <= limits::MAX_DURATION)
                .ok_or_else(|| ctx.invalid(&key, 0, limits::exceeded(Limit::Duration, seconds)))?;
            goodput.retain(|c| c.metric != metric);
            goodput.push(GoodputConstraint { metric, limit });
        }
        Ok(())
    }
}

/// inference-perf's default `load.worker_max_concurrency`.
const INFERENCE_PERF_WORKER_MAX_CONCURRENCY: u32 = 100;

/// A map of header-like `name: value` pairs; scalar values are taken as text.
pub(crate) fn string_map(ctx: &Ctx, f: &At<'_>) -> Result<Vec<(String, String)>, WorkloadError> {
    let Some(entries) = f.node.entries() else {
        return Err(ctx.wrong_type(&f.path, f.node, "a map of names to values"));
    };
    entries
        .iter()
        .map(|(k, v)| {
            v.scalar_text()
                .map(|text| (k.name.clone(), text))
                .ok_or_else(|| ctx.wrong_type(&join(&f.path, &k.name), v, "a string"))
        })
        .collect()
}

fn parse_server(ctx: &mut Ctx, mut m: MapReader<'_>, api: &mut Api) -> Result<(), WorkloadError> {
    if let Some(f) = m.get("type") {
        match f.str(ctx)? {
            "vllm" | "sglang" | "tgi" => {}
            "mock" => {
                return Err(f.unsupported(
                    ctx,
                    "inference-perf's in-process `mock` server (use `llmbench sim` instead)",
                ));
            }
            other => {
                return Err(f.invalid(
                    ctx,
                    format!("unknown server type `{other}`; expected vllm, sglang, tgi or mock"),
                ));
            }
        }
    }
    if let Some(f) = m.get("model_name") {
        api.model = Some(f.str(ctx)?.to_string());
    }
    api.base_url = Some(
        m.require(ctx, "base_url", "inference-perf needs the server's URL")?
            .str(ctx)?
            .to_string(),
    );
    if let Some(f) = m.get("ignore_eos") {
        api.ignore_eos = f.bool(ctx)?;
    }
    if let Some(f) = m.get("api_key") {
        api.api_key = Some(f.str(ctx)?.to_string());
    }
    for key in ["cert_path", "key_path"] {
        if let Some(f) = m.get(key) {
            return Err(f.unsupported(ctx, "TLS client certificates"));
        }
    }
    m.finish(ctx, &[]);
    Ok(())
}

fn parse_tokenizer(
    ctx: &mut Ctx,
    mut m: MapReader<'_>,
) -> Result<Option<TokenizerSpec>, WorkloadError> {
    let name = m
        .get("pretrained_model_name_or_path")
        .map(|f| f.str(ctx).map(str::to_string))
        .transpose()?;
    let trust_remote_code = m
        .get("trust_remote_code")
        .map(|f| f.bool(ctx))
        .transpose()?
        .unwrap_or(false);
    let token = m
        .get("token")
        .map(|f| f.str(ctx).map(str::to_string))
        .transpose()?;
    m.finish(ctx, &[]);
    Ok(name.map(|name_or_path| TokenizerSpec {
        name_or_path,
        token,
        trust_remote_code,
    }))
}

const DATA_TYPES: &str = "mock, shareGPT, synthetic, random, shared_prefix, cnn_dailymail, \
                          infinity_instruct, billsum_conversations, otel_trace_replay, \
                          weka_trace_replay, conversation_replay, visionarena";

/// Per-type sub-maps: read only when `type` names them.
const TYPE_SUBMAPS: [&str; 4] = [
    "otel_trace_replay",
    "weka_trace_replay",
    "conversation_replay",
    "visionarena",
];

fn parse_data(
    ctx: &mut Ctx,
    mut m: MapReader<'_>,
    api: &mut Api,
    trace_replay: bool,
    session_replay: bool,
) -> Result<DataSpec, WorkloadError> {
    let type_field = m.get("type");
    let kind = match &type_field {
        Some(f) => f.str(ctx)?,
        None => "mock",
    };
    let unsupported = |feature: &str| -> WorkloadError {
        match &type_field {
            Some(f) => f.unsupported(ctx, feature),
            None => ctx.unsupported(&join(&m.path, "type"), m.line, feature),
        }
    };
    if api.kind == ApiKind::Messages {
        // The generators whose `get_supported_apis` lists `APIType.AnthropicMessages`: mock, shareGPT and the
        // replay-graph traces; every other one refuses it before the run.
        match kind {
            "mock" | "shareGPT" | "weka_trace_replay" => {}
            "otel_trace_replay" => {
                return Err(unsupported(
                    "`otel_trace_replay` data over `api.type: anthropic_messages` (inference-perf's \
                     `SessionAnthropicMessagesAPIData` replays the trace's chat turns as Anthropic messages; \
                     llmbench replays them as chat only)",
                ));
            }
            other => {
                let problem = format!(
                    "inference-perf's `{other}` data does not support `api.type: anthropic_messages` (its \
                     generator's `get_supported_apis` leaves it out); use `type: mock` or `type: shareGPT`"
                );
                return Err(match &type_field {
                    Some(f) => f.invalid(ctx, problem),
                    None => ctx.invalid(&join(&m.path, "type"), m.line, problem),
                });
            }
        }
    }
    match kind {
        "otel_trace_replay" | "weka_trace_replay" if !session_replay => {
            // `Config.validate_trace_replay_load_type`.
            let problem = format!(
                "data.type '{kind}' requires load.type 'trace_session_replay', as inference-perf checks"
            );
            return Err(match &type_field {
                Some(f) => f.invalid(ctx, problem),
                None => ctx.invalid(&join(&m.path, "type"), m.line, problem),
            });
        }
        "otel_trace_replay" if api.kind != ApiKind::Chat => {
            // `ReplayGraphSessionGeneratorBase.get_supported_apis`: chat and Anthropic messages.
            return Err(unsupported(
                "`otel_trace_replay` data over `api.type: completion` (inference-perf replays traces as chat \
                 requests only; set `api.type: chat`)",
            ));
        }
        "conversation_replay" if api.kind == ApiKind::Chat => {
            // `ConversationReplayDataGenerator.get_supported_apis` is `[APIType.Completion]`.
            return Err(unsupported(
                "`conversation_replay` data over `api.type: chat` (inference-perf replays conversations as \
                 completion prompts only; set `api.type: completion`)",
            ));
        }
        "visionarena" if api.kind != ApiKind::Chat => {
            // `VisionArenaDataGenerator.get_supported_apis` is `[APIType.Chat]`: `DataGenerator.__init__` raises
            // "Unsupported API type".
            let problem = "inference-perf's `visionarena` data is sent as chat requests only (its generator \
                           raises \"Unsupported API type\" for any other); set `api.type: chat`";
            return Err(match &type_field {
                Some(f) => f.invalid(ctx, problem),
                None => ctx.invalid(&join(&m.path, "type"), m.line, problem),
            });
        }
        "cnn_dailymail" | "infinity_instruct" | "billsum_conversations" => {
            return Err(unsupported(&format!(
                "`{kind}` data (a Hugging Face dataset download)"
            )));
        }
        _ => {}
    }
    // `data.multimodal` is read by the shared_prefix generator (the question's images) and by the synthetic one
    // (`MultimodalDataGenerator`); every other generator leaves it unread.
    let question_images = match kind {
        "shared_prefix" => match m.get("multimodal") {
            Some(f) => multimodal(ctx, &f)?.map(|images| (f, images)),
            None => None,
        },
        "synthetic" => {
            if let Some(f) = m.get("multimodal").filter(|f| !f.is_null()) {
                return Err(f.unsupported(
                    ctx,
                    "`data.multimodal` with `type: synthetic` (inference-perf then switches to its \
                     `MultimodalDataGenerator`, whose text is random vocabulary ids decoded, not the corpus; \
                     llmbench weaves images into `shared_prefix` data only)",
                ));
            }
            None
        }
        _ => {
            m.ignore(
                ctx,
                "multimodal",
                &format!("inference-perf's `{kind}` data generator never reads `data.multimodal`"),
            );
            None
        }
    };
    let trace = match m.get("trace") {
        // Only the random generator reads `data.trace` (`random_datagen.py`); with a rate load its rows would
        // set the request count under the rate's times, which llmbench does not build.
        Some(f) if kind == "random" && trace_replay => {
            if api.kind == ApiKind::Chat {
                // `RandomDataGenerator.get_data`: "RandomDataGenerator only supports Completion".
                return Err(f.unsupported(
                    ctx,
                    "`data.trace` over `api.type: chat` (inference-perf's random data is completion-only)",
                ));
            }
            Some(trace_config(ctx, &f)?)
        }
        Some(f) => {
            return Err(f.unsupported(
                ctx,
                "trace-driven data (`data.trace`) other than `type: random` under a `trace_replay` load",
            ));
        }
        None => None,
    };
    if let Some(f) = m.get("use_chat_template") {
        let wrap = f.bool(ctx)?;
        if wrap && kind != "random" {
            return Err(f.invalid(
                ctx,
                format!(
                    "inference-perf accepts `use_chat_template` only with `type: random` (this is `{kind}`); unset it"
                ),
            ));
        }
        // `RandomDataGenerator`: each prompt (of a distribution's length, or of a `data.trace` row's
        // `ContextTokens`) is the templated text, converged to its length, and the request
        // asks the server to add no special tokens of its own (`CompletionAPIData.add_special_tokens = False`).
        api.use_chat_template = Some(wrap);
        if wrap {
            api.extra_body.insert(
                "add_special_tokens".to_owned(),
                serde_json::Value::Bool(false),
            );
        }
    }
    for key in TYPE_SUBMAPS.into_iter().filter(|k| *k != kind) {
        m.ignore(ctx, key, &format!("only read when `type` is `{key}`"));
    }

    let spec = match kind {
        "mock" => DataSpec::Mock,
        "random" if trace.is_some() => {
            // `RandomDataGenerator.__init__`: "Ignoring input and output distributions configurations as trace
            // file ... is provided".
            for key in ["input_distribution", "output_distribution"] {
                m.ignore(ctx, key, "the lengths come from `data.trace`");
            }
            DataSpec::AzureTrace(AzureTraceData {
                path: trace.unwrap_or_default(),
            })
        }
        "otel_trace_replay" => {
            let f = m.require(
                ctx,
                "otel_trace_replay",
                "`type: otel_trace_replay` needs an `otel_trace_replay` section",
            )?;
            DataSpec::OtelTrace(otel_trace_replay(ctx, &f, None)?)
        }
        "weka_trace_replay" => {
            let f = m.require(
                ctx,
                "weka_trace_replay",
                "`type: weka_trace_replay` needs a `weka_trace_replay` section",
            )?;
            let corpus = m
                .get("corpus_file_path")
                .map(|path| path.str(ctx).map(str::to_string))
                .transpose()?;
            DataSpec::OtelTrace(otel_trace_replay(ctx, &f, Some(corpus))?)
        }
        "conversation_replay" => {
            // `ConversationReplayDataGenerator.__init__`: "conversation_replay config is required."
            let f = m.require(
                ctx,
                "conversation_replay",
                "`type: conversation_replay` needs a `conversation_replay` section",
            )?;
            DataSpec::ConversationReplay(conversation_replay(ctx, &f)?)
        }
        "random" | "synthetic" => {
            let why = "inference-perf's random and synthetic data need both length distributions";
            let input = distribution(ctx, &m.require(ctx, "input_distribution", why)?)?;
            let output = distribution(ctx, &m.require(ctx, "output_distribution", why)?)?;
            let text = if kind == "random" {
                PromptText::RandomTokens
            } else {
                let path = match m.get_any(&["corpus_file_path", "path"]) {
                    Some(f) => Some(f.str(ctx)?.to_string()),
                    None => {
                        // inference-perf's built-in corpus is Shakespeare, which llmbench does not ship: the
                        // prompt words differ, their token counts do not.
                        ctx.warn(
                            &join(&m.path, "type"),
                            m.line,
                            WarningKind::Ignored,
                            "`synthetic` without `corpus_file_path` cuts prompts from inference-perf's built-in \
                             Shakespeare text; llmbench draws its own words, with the same token counts (set \
                             `corpus_file_path` to cut them from a file)",
                        );
                        None
                    }
                };
                PromptText::Corpus { path }
            };
            DataSpec::Random(RandomData {
                input,
                output,
                prefix_len: 0,
                text,
                rerank: None,
                images: None,
            })
        }
        "shared_prefix" => {
            let f = m.require(
                ctx,
                "shared_prefix",
                "`type: shared_prefix` needs a `shared_prefix` section",
            )?;
            let mut shared = shared_prefix(ctx, &f)?;
            if let Some((at, images)) = question_images {
                woven_images_fit(ctx, &at, &shared, api)?;
                shared.question_images = Some(images);
            }
            if shared.prefix_images.is_some() {
                woven_images_fit(ctx, &f, &shared, api)?;
            }
            // The pre-flight's test request then carries an image too.
            api.images = shared.prefix_images.is_some() || shared.question_images.is_some();
            DataSpec::SharedPrefix(shared)
        }
        "visionarena" => {
            // `DataGenerator.__init__`: "IO distribution not supported for this data generator", "Shared prefix
            // not supported for this data generator" (`is_io_distribution_supported`, `is_shared_prefix_supported`
            // are false).
            for key in ["input_distribution", "output_distribution", "shared_prefix"] {
                if let Some(f) = m.get(key).filter(|f| !f.is_null()) {
                    return Err(f.invalid(
                        ctx,
                        format!(
                            "inference-perf's `visionarena` data takes no `{key}` (its generator raises \"{} not \
                             supported for this data generator\"); unset it",
                            if key == "shared_prefix" {
                                "Shared prefix"
                            } else {
                                "IO distribution"
                            }
                        ),
                    ));
                }
            }
            // main.py: "visionarena data generator requires 'visionarena' to be configured".
            let f = m.require(
                ctx,
                "visionarena",
                "`type: visionarena` needs a `visionarena` section (inference-perf's main.py requires it)",
            )?;
            // Every request carries an image: the pre-flight's test request carries one too.
            api.images = true;
            DataSpec::VisionArena(visionarena(ctx, &f)?)
        }
        "shareGPT" => {
            let path = match m.get("path") {
                Some(f) => {
                    // `HFShareGPTDataGenerator`: a `.json` file, or a directory of them.
                    let path = f.str(ctx)?;
                    if !path.ends_with(".json")
                        && !path.ends_with('/')
                        && std::path::Path::new(path).is_file()
                    {
                        return Err(f.invalid(
                            ctx,
                            format!(
                                "inference-perf reads ShareGPT from a `.json` file (or a directory of them); \
                                 `{path}` is neither"
                            ),
                        ));
                    }
                    Some(path.to_string())
                }
                None => None,
            };
            // Both distributions are filters only: an entry whose prompt (answer) token count is outside
            // `[min, max]` is skipped, and the answer's own length is the request's `max_tokens`
            // (`hf_sharegpt_datagen.py`). Their mean, spread and type are not used.
            let input_filter = m
                .get("input_distribution")
                .map(|f| distribution(ctx, &f))
                .transpose()?;
            let output_filter = m
                .get("output_distribution")
                .map(|f| distribution(ctx, &f))
                .transpose()?;
            DataSpec::ShareGpt(ShareGpt {
                path,
                input_filter,
                output: None,
                output_filter,
                shuffle: false,
            })
        }
        other => {
            let at = type_field
                .as_ref()
                .map_or((join(&m.path, "type"), m.line), |f| {
                    (f.path.clone(), f.line)
                });
            return Err(ctx.invalid(
                &at.0,
                at.1,
                format!("unknown data type `{other}`; expected one of {DATA_TYPES}"),
            ));
        }
    };
    // Keys of the other data types are known; they just do nothing for this one.
    for key in [
        "path",
        "corpus_file_path",
        "input_distribution",
        "output_distribution",
        "shared_prefix",
    ] {
        if !m.is_read(key) {
            m.ignore(ctx, key, &format!("not used by `{kind}` data"));
        }
    }
    m.finish(ctx, &[]);
    Ok(spec)
}

/// An inference-perf distribution object, with its defaults.
pub(crate) fn distribution(ctx: &mut Ctx, f: &At<'_>) -> Result<TokenLengths, WorkloadError> {
    let mut m = f.map(ctx)?;
    let min = m
        .get("min")
        .map(|f| f.tokens(ctx))
        .transpose()?
        .unwrap_or(10);
    let max = m
        .get("max")
        .map(|f| f.tokens(ctx))
        .transpose()?
        .unwrap_or(1024);
    let mean_field = m.get("mean");
    let mean = match &mean_field {
        Some(f) => {
            let v = f.non_negative_f64(ctx)?;
            limits::check(ctx, f, Limit::Tokens, v)?;
            v
        }
        None => 512.0,
    };
    let std_dev_field = m.get("std_dev");
    let std_dev = std_dev_field
        .as_ref()
        .map(|f| f.non_negative_f64(ctx))
        .transpose()?;
    let variance = m.get("variance");
    // `Distribution.validate_distribution`: `variance` is refused while `std_dev` is above 0, and `std_dev`
    // defaults to 200, so `variance` needs an explicit `std_dev: 0` beside it.
    let spread = match (std_dev, &variance) {
        (Some(0.0), Some(v)) => Spread::Variance(v.non_negative_f64(ctx)?),
        (_, Some(v)) => {
            return Err(v.invalid(
                ctx,
                "inference-perf refuses `variance` while `std_dev` is above 0, and `std_dev` defaults to 200: \
                 set `std_dev` instead, or add `std_dev: 0` beside `variance`",
            ));
        }
        (Some(s), None) => Spread::StdDev(s),
        (None, None) => Spread::StdDev(200.0),
    };
    let total_count = m
        .get("total_count")
        .map(|f| f.positive_within(ctx, Limit::Samples))
        .transpose()?;
    let skew = m.get("skew").map(|f| f.f64(ctx)).transpose()?;
    if min > max {
        return Err(f.invalid(ctx, format!("`min` ({min}) is greater than `max` ({max})")));
    }
    let shape = match m.get("type") {
        None => LengthShape::Normal {
            mean,
            spread,
            min,
            max,
        },
        Some(t) => match t.str(ctx)? {
            "normal" => LengthShape::Normal {
                mean,
                spread,
                min,
                max,
            },
            "skew_normal" => LengthShape::SkewNormal {
                mean,
                spread,
                skew: skew.unwrap_or(0.0),
                min,
                max,
            },
            "lognormal" => LengthShape::LogNormal {
                mean,
                spread,
                min,
                max,
            },
            "uniform" => LengthShape::Uniform { min, max },
            "poisson" => LengthShape::Poisson { mean, min, max },
            "fixed" => {
                if mean.fract() != 0.0 {
                    let at = mean_field.as_ref().unwrap_or(f);
                    return Err(at.invalid(
                        ctx,
                        format!("a `fixed` length must be a whole number of tokens, found {mean}"),
                    ));
                }
                LengthShape::Fixed(mean as u64)
            }
            other => {
                return Err(t.invalid(
                    ctx,
                    format!(
                        "unknown distribution type `{other}`; expected normal, skew_normal, \
                         lognormal, uniform, poisson or fixed"
                    ),
                ));
            }
        },
    };
    m.finish(
        ctx,
        &[(
            "std",
            "did you mean `std_dev`? inference-perf ≤ v0.6.1 ignores it and uses the default \
             std_dev (200); later versions reject the file",
        )],
    );
    Ok(TokenLengths { shape, total_count })
}

/// inference-perf's `data.conversation_replay` (`config/datagen/replay.py::ConversationReplayConfig`, with its
/// defaults: seed 42, 200 conversations, an 8359-token shared system prompt).
/// The dataset `VisionArenaConfig.hf_dataset_name` names by default.
const VISIONARENA_HUB_ID: &str = "lmarena-ai/VisionArena-Chat";

/// `visionarena.insertion_point` as a `Distribution` (inference_perf/config/common.py), validated as its model
/// validates it and sampled as `sample_from_distribution` samples it: `fixed` is `int(mean)` without a draw,
/// `uniform` a draw per image; the other types are refused.
fn arena_point_distribution(ctx: &mut Ctx, f: &At<'_>) -> Result<ArenaPoint, WorkloadError> {
    let mut d = f.map(ctx)?;
    let integer = |ctx: &mut Ctx,
                   d: &mut MapReader<'_>,
                   key: &str,
                   default: i64|
     -> Result<i64, WorkloadError> {
        match d.get(key) {
            None => Ok(default),
            Some(v) => {
                let x = v.f64(ctx)?;
                if x.fract() != 0.0 || x.abs() > 1e15 {
                    return Err(v.invalid(ctx, format!("`{key}` of a distribution is an integer")));
                }
                Ok(x as i64)
            }
        }
    };
    let min = integer(ctx, &mut d, "min", 10)?;
    let max = integer(ctx, &mut d, "max", 1024)?;
    let mean = d
        .get("mean")
        .map(|v| v.f64(ctx))
        .transpose()?
        .unwrap_or(512.0);
    let std_dev = d
        .get("std_dev")
        .map(|v| v.f64(ctx))
        .transpose()?
        .unwrap_or(200.0);
    let variance = d.get("variance").map(|v| v.f64(ctx)).transpose()?;
    for key in ["total_count", "skew"] {
        d.take(key);
    }
    let kind = match d.get("type") {
        Some(t) => t.str(ctx)?.to_owned(),
        None => "normal".to_owned(),
    };
    // `Distribution.validate_distribution`.
    if variance.is_some() && std_dev > 0.0 {
        return Err(f.invalid(ctx, "Specify either 'std_dev' or 'variance', not both."));
    }
    if variance.is_some_and(|v| v < 0.0) {
        return Err(f.invalid(ctx, "Variance cannot be negative."));
    }
    if min > max {
        return Err(f.invalid(
            ctx,
            format!("min ({min}) cannot be greater than max ({max})."),
        ));
    }
    if std_dev < 0.0 {
        return Err(f.invalid(ctx, "std_dev cannot be negative."));
    }
    d.finish(ctx, &[]);
    match kind.as_str() {
        "fixed" => Ok(ArenaPoint::At(mean.trunc())),
        "uniform" => Ok(ArenaPoint::UniformInts { min, max }),
        "normal" | "skew_normal" | "lognormal" | "poisson" => Err(f.unsupported(
            ctx,
            format!(
                "`insertion_point` as a `{kind}` distribution (upstream draws it per image from numpy's \
                 `default_rng(data_index)`, whose {kind} sampler llmbench does not reproduce; `fixed`, `uniform`, \
                 a number in [0, 1] or `null` for a uniform draw per image are read)"
            ),
        )),
        other => Err(f.invalid(
            ctx,
            format!(
                "unknown distribution type `{other}`; expected one of normal, skew_normal, lognormal, uniform, \
                 poisson, fixed"
            ),
        )),
    }
}

/// `data.visionarena` (`VisionArenaConfig`, inference_perf/config/datagen/visionarena.py at
/// kubernetes-sigs/inference-perf 7de5ef2).
fn visionarena(ctx: &mut Ctx, f: &At<'_>) -> Result<VisionArenaData, WorkloadError> {
    let mut m = f.map(ctx)?;
    let name = m.get("hf_dataset_name");
    let path = match &name {
        Some(name) => name.str(ctx)?.to_owned(),
        None => VISIONARENA_HUB_ID.to_owned(),
    };
    // `load_dataset(path, ...)` reads a local directory when there is one at `path`; a file is no dataset to it
    // (it looks a relative name up on the Hub, else "Couldn't find any data file"), and anything else is a Hub id.
    let local = std::path::Path::new(&path);
    if !local.is_dir() {
        let problem = if local.is_file() {
            format!(
                "`{path}` is a file: inference-perf's `load_dataset(hf_dataset_name, ...)` reads a dataset directory \
                 (or a Hub id), not a file; give the directory that holds it"
            )
        } else {
            format!(
                "`{path}` is not a local directory: llmbench does not download datasets (inference-perf streams \
                 `{path}` from the Hugging Face Hub); download it (`huggingface-cli download --repo-type dataset \
                 {path} --include 'data/*' --local-dir DIR`), then set `hf_dataset_name: DIR/data`"
            )
        };
        return Err(match &name {
            Some(name) => name.invalid(ctx, problem),
            None => ctx.invalid(
                &join(&m.path, "hf_dataset_name"),
                m.line,
                format!("unset, so {problem}"),
            ),
        });
    }
    let split = match m.get("hf_split") {
        Some(f) => f.str(ctx)?.to_owned(),
        None => "train".to_owned(),
    };
    if let Some(files) = m.get("hf_data_files").filter(|f| !f.is_null()) {
        return Err(files.unsupported(
            ctx,
            "`hf_data_files` (a `data_files` glob `datasets` resolves against the dataset's files; put the files \
             it picks in a directory of their own and give that directory as `hf_dataset_name`)",
        ));
    }
    let num_rows = m
        .get("num_rows")
        .map(|f| f.positive_within(ctx, Limit::Samples))
        .transpose()?
        .unwrap_or(1000);
    let max_images_per_request = m
        .get("max_images_per_request")
        .map(|f| f.positive_u64(ctx))
        .transpose()?
        .unwrap_or(1);
    let insertion_point = match m.take("insertion_point") {
        None => ArenaPoint::At(0.0),
        Some(f) if f.is_null() => ArenaPoint::Uniform,
        Some(f) if matches!(f.node.value, super::yaml::Value::Map(_)) => {
            arena_point_distribution(ctx, &f)?
        }
        Some(f) => {
            let point = f.f64(ctx)?;
            if point.is_nan() {
                return Err(f.invalid(ctx, "`insertion_point` must be a number in [0, 1], not NaN"));
            }
            ArenaPoint::At(point)
        }
    };
    m.finish(ctx, &[]);
    Ok(VisionArenaData {
        path,
        split,
        num_rows,
        max_images_per_request,
        insertion_point,
    })
}

fn conversation_replay(ctx: &mut Ctx, f: &At<'_>) -> Result<ConversationReplay, WorkloadError> {
    let mut m = f.map(ctx)?;
    let seed = m.get("seed").map(|f| f.u64(ctx)).transpose()?.unwrap_or(42);
    let num_conversations = m
        .get("num_conversations")
        .map(|f| f.positive_within(ctx, Limit::Samples))
        .transpose()?
        .unwrap_or(200);
    let shared_system_prompt_len = m
        .get("shared_system_prompt_len")
        .map(|f| f.tokens(ctx))
        .transpose()?
        .unwrap_or(8359);
    let mut dist = |key: &str| -> Result<Option<TokenLengths>, WorkloadError> {
        m.get(key).map(|f| distribution(ctx, &f)).transpose()
    };
    let dynamic_system_prompt_len = dist("dynamic_system_prompt_len")?;
    let turns_per_conversation = dist("turns_per_conversation")?;
    let input_tokens_per_turn = dist("input_tokens_per_turn")?;
    let output_tokens_per_turn = dist("output_tokens_per_turn")?;
    let tool_call_latency_sec = dist("tool_call_latency_sec")?;
    let max_model_len = m
        .get("max_model_len")
        .map(|f| f.positive_within(ctx, Limit::Tokens))
        .transpose()?;
    m.finish(ctx, &[]);
    Ok(ConversationReplay {
        seed,
        num_conversations,
        shared_system_prompt_len,
        dynamic_system_prompt_len,
        turns_per_conversation,
        input_tokens_per_turn,
        output_tokens_per_turn,
        tool_call_latency_sec,
        max_model_len,
    })
}

/// `data.otel_trace_replay` (`OTelTraceReplayConfig` and its `SessionReplayConfig` base).
/// `data.otel_trace_replay`, or with `weka_corpus` (`Some(data.corpus_file_path)`) `data.weka_trace_replay`: both
/// are `SessionReplayConfig`s with the same trace sources.
fn otel_trace_replay(
    ctx: &mut Ctx,
    f: &At<'_>,
    weka_corpus: Option<Option<String>>,
) -> Result<OtelTraceData, WorkloadError> {
    let mut m = f.map(ctx)?;
    let section = if weka_corpus.is_some() {
        "weka_trace_replay"
    } else {
        "otel_trace_replay"
    };
    let directory = m.get("trace_directory");
    let files = m.get("trace_files");
    let hf = m.get("hf_dataset_path");
    let sources = [&directory, &files, &hf]
        .iter()
        .filter(|s| s.is_some())
        .count();
    if sources > 1 {
        return Err(f.invalid(
            ctx,
            "Cannot specify multiple trace sources; choose one of: trace_directory, trace_files, or hf_dataset_path",
        ));
    }
    let source = match (directory, files, hf) {
        (Some(d), _, _) => OtelTraceSource::Directory(d.str(ctx)?.to_string()),
        (_, Some(list), _) => {
            let mut paths = Vec::new();
            for item in list.seq(ctx)? {
                // OTel glob patterns are expanded when the run starts (`session_replay`), as upstream expands
                // them; WEKA's reader takes each entry as a path.
                paths.push(item.str(ctx)?.to_string());
            }
            OtelTraceSource::Files(paths)
        }
        (_, _, Some(hf)) if weka_corpus.is_some() => {
            if matches!(hf.node.value, super::yaml::Value::Map(_)) {
                return Err(hf.unsupported(
                    ctx,
                    "`hf_dataset_path` as a mapping (its `path` is all inference-perf's WEKA reader uses; give that \
                     path as a string)",
                ));
            }
            // inference-perf downloads the dataset's `traces.jsonl` (`hf_hub_download`); llmbench reads a local copy
            // and refuses a repository id when the run starts, saying how to download it.
            OtelTraceSource::HfCopy(hf.str(ctx)?.to_string())
        }
        (_, _, Some(hf)) => {
            return Err(hf.unsupported(
                ctx,
                "`hf_dataset_path` (a Hugging Face dataset download; put the trace files in a directory and use \
                 `trace_directory`)",
            ));
        }
        (None, None, None) => {
            return Err(f.invalid(
                ctx,
                format!(
                    "Either trace_directory, trace_files, or hf_dataset_path must be provided in {section} config"
                ),
            ));
        }
    };
    let flag = |m: &mut MapReader<'_>, ctx: &mut Ctx, key: &str, default: bool| {
        m.get(key)
            .map(|f| f.bool(ctx))
            .transpose()
            .map(|v| v.unwrap_or(default))
    };
    // `validate_static_model`. The model names themselves are not sent: upstream's requests carry the server's
    // `model_name` (`to_request_body(effective_model_name, ...)`), whatever the trace recorded.
    let use_static_model = flag(&mut m, ctx, "use_static_model", false)?;
    let static_model_name = m
        .get("static_model_name")
        .map(|f| f.str(ctx).map(str::to_string))
        .transpose()?
        .unwrap_or_default();
    // An empty mapping is falsy in the check below, as in Python.
    let model_mapping = match m.get("model_mapping") {
        Some(f) if !f.is_null() => !string_map(ctx, &f)?.is_empty(),
        _ => false,
    };
    if use_static_model && static_model_name.is_empty() {
        return Err(f.invalid(
            ctx,
            "static_model_name is required when use_static_model=True",
        ));
    }
    if !use_static_model && !static_model_name.is_empty() && !model_mapping {
        return Err(f.invalid(
            ctx,
            "Either use_static_model must be True or model_mapping must be provided",
        ));
    }
    let include_errors = flag(&mut m, ctx, "include_errors", true)?;
    let skip_invalid_files = flag(&mut m, ctx, "skip_invalid_files", false)?;
    let max_wait_ms = m
        .get("max_wait_ms")
        .map(|f| f.u64(ctx))
        .transpose()?
        .unwrap_or(15_000);
    let predecessor_wait_timeout = match m.get("predecessor_wait_timeout_sec") {
        Some(f) => Some(f.seconds(ctx)?).filter(|d| !d.is_zero()),
        None => Some(Duration::from_secs(3600)),
    };
    if let Some(f) = m.get("default_max_tokens") {
        // Declared by `SessionReplayConfig`, read by neither generator: a call asks for its recorded output length.
        f.positive_u64(ctx)?;
    }
    if let Some(f) = m.get("override_tool_call_max_tokens") {
        // Acts on calls whose recorded output is a tool call: llmbench refuses OTel traces with tool calls, and a
        // WEKA trace records none.
        f.bool(ctx)?;
    }
    if let Some(f) = m.get("duplicate_sessions_target")
        && !f.is_null()
    {
        return Err(f.unsupported(
            ctx,
            "`duplicate_sessions_target` (duplicated sessions with random strings injected into their messages)",
        ));
    }
    let inject_field = m.get("inject_random_session_id");
    let inject_random_session_id = match &inject_field {
        Some(f) => f.bool(ctx)?,
        None => false,
    };
    if let Some(corpus_file) = weka_corpus {
        // Upstream validates the section (a strict model) before it reads the corpus.
        let options = weka_options(ctx, &mut m, corpus_file.clone().unwrap_or_default())?;
        // `WekaTraceReplayDataGenerator.__init__` tokenizes `data.corpus_file_path`, else the Shakespeare text
        // inference-perf ships (`inference_perf/assets/shakespeare.txt`), which llmbench does not.
        if corpus_file.is_none() {
            return Err(f.unsupported(
                ctx,
                "`weka_trace_replay` without `data.corpus_file_path` (inference-perf then cuts each hash id's text \
                 from its bundled `inference_perf/assets/shakespeare.txt`, which llmbench does not ship; set \
                 `data.corpus_file_path` to a copy of that file, or to any text to cut the prompts from)",
            ));
        }
        m.finish(ctx, &[]);
        return Ok(OtelTraceData {
            source,
            include_errors,
            skip_invalid_files,
            max_wait_ms,
            predecessor_wait_timeout,
            disable_output_substitution: false,
            inject_random_session_id,
            format: SessionTraceFormat::Weka(options),
        });
    }
    let disable_output_substitution = flag(&mut m, ctx, "disable_output_substitution", false)?;
    if let Some(f) = m.get("bad_tool_call_handling") {
        match f.str(ctx)? {
            // Both only differ on live tool calls, which llmbench never asks for: it refuses traces with tool
            // calls, and sends no tool definitions.
            "none" | "use_recorded" => {}
            other => {
                return Err(f.invalid(
                    ctx,
                    format!(
                        "unknown bad_tool_call_handling `{other}`; expected none or use_recorded"
                    ),
                ));
            }
        }
    }
    for (key, feature) in [
        (
            "filter",
            "`filter` (a Python lambda that inference-perf evaluates on each trace record)",
        ),
        (
            "attribute_to_header_map",
            "`attribute_to_header_map` (request headers taken from span attributes)",
        ),
        (
            "attribute_to_label_map",
            "`attribute_to_label_map` (request labels taken from span attributes)",
        ),
    ] {
        if let Some(f) = m.get(key)
            && !f.is_null()
        {
            return Err(f.unsupported(ctx, feature));
        }
    }
    if let Some(f) =
        inject_field.filter(|_| inject_random_session_id && disable_output_substitution)
    {
        // `OTelTraceReplayConfig.validate_output_substitution`.
        return Err(f.invalid(
            ctx,
            "disable_output_substitution=True cannot be combined with inject_random_session_id: those options \
             trigger random session-ID injection, which substitutes live predecessor output into output/shared \
             segments — the opposite of replaying recorded outputs as-is",
        ));
    }
    m.finish(ctx, &[]);
    Ok(OtelTraceData {
        source,
        include_errors,
        skip_invalid_files,
        max_wait_ms,
        predecessor_wait_timeout,
        disable_output_substitution,
        inject_random_session_id,
        format: SessionTraceFormat::Otel,
    })
}

/// `WekaTraceReplayConfig`'s own keys.
fn weka_options(
    ctx: &mut Ctx,
    m: &mut MapReader<'_>,
    corpus_file: String,
) -> Result<WekaTraceOptions, WorkloadError> {
    let default_block_size = match m.get("default_block_size") {
        Some(f) => {
            let size = f.u64(ctx)?;
            if size == 0 {
                // A trace without its own block size would divide by it (upstream fails on 0).
                return Err(f.invalid(
                    ctx,
                    "default_block_size must be a positive number of tokens",
                ));
            }
            i64::try_from(size).unwrap_or(i64::MAX)
        }
        None => 64,
    };
    let idle_gap_cap_seconds = match m.get("trace_idle_gap_cap_seconds") {
        Some(f) => f.f64(ctx)?,
        None => 60.0,
    };
    for key in [
        "filter",
        "disable_output_substitution",
        "bad_tool_call_handling",
        "attribute_to_header_map",
        "attribute_to_label_map",
    ] {
        if let Some(f) = m.get(key) {
            // `WekaTraceReplayConfig` is a strict model without them: pydantic refuses the config.
            return Err(f.invalid(
                ctx,
                format!(
                    "inference-perf's `weka_trace_replay` has no `{key}` (only `otel_trace_replay` does) and refuses \
                     the config; remove it"
                ),
            ));
        }
    }
    for key in ["ignore_trace_delays", "use_think_time_only"] {
        if let Some(f) = m.get(key) {
            f.bool(ctx)?;
            ctx.warn(
                &f.path,
                f.line,
                WarningKind::Ignored,
                "inference-perf declares it but its WEKA generator never reads it (7de5ef2): the trace's start \
                 times are replayed, with idle gaps capped by `trace_idle_gap_cap_seconds`",
            );
        }
    }
    // Only the `hf_dataset_path` reader stops after this many lines; the trace files are all read.
    let num_dataset_entries = match m.get("num_dataset_entries") {
        Some(f) => f.u64(ctx)?,
        None => 100,
    };
    Ok(WekaTraceOptions {
        corpus_file,
        default_block_size,
        idle_gap_cap_seconds,
        num_dataset_entries,
    })
}

/// An int, or a distribution object (shared_prefix lengths).
fn length(ctx: &mut Ctx, f: &At<'_>) -> Result<TokenLengths, WorkloadError> {
    if f.node.entries().is_some() {
        distribution(ctx, f)
    } else {
        Ok(TokenLengths::fixed(f.tokens(ctx)?))
    }
}

fn shared_prefix(ctx: &mut Ctx, f: &At<'_>) -> Result<SharedPrefix, WorkloadError> {
    let mut m = f.map(ctx)?;
    let prefix_images = match m.get("multimodal") {
        Some(mm) => multimodal(ctx, &mm)?,
        None => None,
    };
    let groups_field = m.get_any(&["num_groups", "num_unique_system_prompts"]);
    let num_groups = groups_field
        .as_ref()
        .map(|f| f.positive_within(ctx, Limit::Prefixes))
        .transpose()?
        .unwrap_or(10);
    let per_group_field = m.get_any(&["num_prompts_per_group", "num_users_per_system_prompt"]);
    let num_prompts_per_group = per_group_field
        .as_ref()
        .map(|f| f.positive_within(ctx, Limit::Samples))
        .transpose()?
        .unwrap_or(10);
    // Every prompt of every group is built before the run.
    let prompts = num_groups.saturating_mul(num_prompts_per_group);
    if prompts > limits::MAX_SAMPLES {
        let at = per_group_field
            .as_ref()
            .or(groups_field.as_ref())
            .unwrap_or(f);
        return Err(at.invalid(
            ctx,
            format!(
                "{num_groups} groups × {num_prompts_per_group} prompts per group: {}",
                limits::exceeded(Limit::Samples, prompts as f64)
            ),
        ));
    }
    let system_prompt_len = match m.get("system_prompt_len") {
        Some(f) => length(ctx, &f)?,
        None => TokenLengths::fixed(100),
    };
    // `question_len` / `output_len`: an int or an inline distribution; the legacy `question_distribution` /
    // `output_distribution` replace an int (`_resolve_distribution`), and both at once is an error upstream.
    let mut resolved = |m: &mut MapReader<'_>, key: &str, legacy: &str, default: u64| {
        let inline = m.get(key);
        let legacy_field = m.get(legacy);
        match (inline, legacy_field) {
            (Some(i), Some(l)) if i.node.entries().is_some() => Err(l.invalid(
                ctx,
                format!(
                    "`{key}` is already a distribution; inference-perf refuses `{legacy}` beside it"
                ),
            )),
            (_, Some(l)) => distribution(ctx, &l),
            (Some(i), None) => length(ctx, &i),
            (None, None) => Ok(TokenLengths::fixed(default)),
        }
    };
    let question_len = resolved(&mut m, "question_len", "question_distribution", 50)?;
    let output_len = resolved(&mut m, "output_len", "output_distribution", 50)?;
    let seed = m.get("seed").map(|f| f.u64(ctx)).transpose()?;
    let multi_turn = m
        .get("enable_multi_turn_chat")
        .map(|f| f.bool(ctx))
        .transpose()?
        .unwrap_or(false);
    m.finish(ctx, &[]);
    Ok(SharedPrefix {
        num_groups,
        num_prompts_per_group,
        system_prompt_len,
        question_len,
        output_len,
        seed,
        multi_turn,
        style: SharedPrefixStyle::InferencePerf,
        prefix_images,
        question_images: None,
    })
}

/// What inference-perf's shared_prefix generator needs to send images: chat requests (`load_lazy_data` returns
/// `ChatCompletionAPIData` whatever `api.type` says) and single turns.
fn woven_images_fit(
    ctx: &mut Ctx,
    at: &At<'_>,
    shared: &SharedPrefix,
    api: &Api,
) -> Result<(), WorkloadError> {
    if shared.multi_turn {
        // `SharedPrefixDataGenerator.load_lazy_data` raises at the first request.
        return Err(at.invalid(
            ctx,
            "inference-perf raises \"Multimodal multi-turn shared prefix is not supported yet.\" for images \
             with `enable_multi_turn_chat: true`",
        ));
    }
    if api.kind != ApiKind::Chat {
        return Err(at.unsupported(
            ctx,
            "shared_prefix images over a completion API (inference-perf then sends chat requests to \
             /v1/chat/completions whatever `api.type` says; set `api.type: chat`)",
        ));
    }
    Ok(())
}

/// A `multimodal` section (`SyntheticMultimodalDatagenConfig`, inference_perf/config/datagen/multimodal.py at
/// kubernetes-sigs/inference-perf 7de5ef2): its images, `None` when it makes none (no `image`, or no
/// `image.count`: `_sample_spec` draws images only `if img_cfg and img_cfg.count`).
fn multimodal(ctx: &mut Ctx, f: &At<'_>) -> Result<Option<WovenImageSpec>, WorkloadError> {
    if f.is_null() {
        return Ok(None);
    }
    let mut m = f.map(ctx)?;
    // A strict model: pydantic refuses the image keys one level too high ("Extra inputs are not permitted"), as
    // in llm-d-benchmark's guide_multimodal-serving_1 where `image:` is left empty above them.
    for key in ["count", "insertion_point", "resolutions", "representation"] {
        if let Some(stray) = m.get(key) {
            return Err(stray.invalid(
                ctx,
                format!(
                    "inference-perf's `multimodal` holds only `image`, `video` and `audio`, and its strict model \
                     refuses `{key}` here (\"Extra inputs are not permitted\"); indent it under `image:`"
                ),
            ));
        }
    }
    if let Some(video) = m.get("video").filter(|v| !v.is_null()) {
        return Err(video.unsupported(
            ctx,
            "inference-perf's synthetic video (H.264 MP4 through PyAV, or frames as images): llmbench encodes no \
             video",
        ));
    }
    if let Some(audio) = m.get("audio").filter(|a| !a.is_null()) {
        return Err(audio.unsupported(
            ctx,
            "inference-perf's synthetic audio (`input_audio` WAV parts): llmbench sends no audio",
        ));
    }
    let images = match m.get("image").filter(|i| !i.is_null()) {
        Some(image) => image_config(ctx, &image)?,
        None => None,
    };
    m.finish(ctx, &[]);
    Ok(images)
}

/// The most pixels a side of an image llmbench draws may have.
const MAX_IMAGE_SIDE: u64 = 16_384;

/// `ImageDatagenConfig`: `count`, `insertion_point`, `resolutions`, `representation`.
fn image_config(ctx: &mut Ctx, f: &At<'_>) -> Result<Option<WovenImageSpec>, WorkloadError> {
    let mut m = f.map(ctx)?;
    let count = match m.get("count").filter(|c| !c.is_null()) {
        Some(c) => Some(distribution(ctx, &c)?),
        None => None,
    };
    let insertion_point = match m.get("insertion_point").filter(|p| !p.is_null()) {
        Some(p) if p.node.entries().is_some() => {
            return Err(p.unsupported(
                ctx,
                "an `insertion_point` distribution (inference-perf draws integers from it, so only 0 and 1 pass \
                 its [0, 1] check); give a number",
            ));
        }
        Some(p) => {
            let v = p.f64(ctx)?;
            if !(0.0..=1.0).contains(&v) {
                return Err(p.invalid(
                    ctx,
                    "inference-perf's `insertion_point` is between 0.0 and 1.0 (`MediaSpec` checks it)",
                ));
            }
            Some(v)
        }
        None => None,
    };
    let (resolutions, weighted) = match m.get("resolutions").filter(|r| !r.is_null()) {
        None => (Vec::new(), false),
        Some(r) if matches!(r.node.value, super::yaml::Value::Seq(_)) => {
            let mut buckets = Vec::new();
            for item in r.seq(ctx)? {
                let mut entry = item.map(ctx)?;
                let res = entry.require(
                    ctx,
                    "resolution",
                    "a `resolutions` entry needs its `resolution`",
                )?;
                let (width, height) = resolution(ctx, &res)?;
                let weight = match entry.get("weight") {
                    Some(w) => {
                        let v = w.f64(ctx)?;
                        if v < 0.0 {
                            // numpy's `choice`: "probabilities are not non-negative".
                            return Err(w.invalid(
                                ctx,
                                "inference-perf's resolution weights are not negative (numpy refuses them)",
                            ));
                        }
                        v
                    }
                    None => 1.0,
                };
                entry.finish(ctx, &[]);
                buckets.push(llmbench_data::image::ImageBucket {
                    height,
                    width,
                    weight,
                });
            }
            (buckets, true)
        }
        Some(r) => {
            let (width, height) = resolution(ctx, &r)?;
            (
                vec![llmbench_data::image::ImageBucket {
                    height,
                    width,
                    weight: 1.0,
                }],
                false,
            )
        }
    };
    if let Some(rep) = m.get("representation") {
        match rep.str(ctx)? {
            // `_encode_image` writes PNG for anything but JPEG, `webp` included (with a PNG MIME type).
            "png" | "webp" => {}
            "jpeg" => {
                return Err(rep.unsupported(
                    ctx,
                    "`representation: jpeg` (inference-perf writes a solid-colour JPEG through Pillow at quality \
                     75; llmbench's JPEGs are noise, orders of magnitude larger on the wire)",
                ));
            }
            other => {
                return Err(rep.invalid(
                    ctx,
                    format!("`{other}` is not an image representation (png, jpeg, webp)"),
                ));
            }
        }
    }
    m.finish(ctx, &[]);
    let Some(count) = count else {
        return Ok(None);
    };
    Ok(Some(WovenImageSpec {
        count,
        insertion_point,
        resolutions,
        weighted,
    }))
}

/// A `resolution`: a preset (`ResolutionPreset`) or `{width, height}`.
fn resolution(ctx: &mut Ctx, f: &At<'_>) -> Result<(u32, u32), WorkloadError> {
    if f.node.entries().is_none() {
        // `_PRESET_TO_WH` in inference_perf/datagen/multimodal_sampling.py.
        return match f.str(ctx)? {
            "4k" => Ok((3840, 2160)),
            "1080p" => Ok((1920, 1080)),
            "720p" => Ok((1280, 720)),
            "360p" => Ok((640, 360)),
            other => Err(f.invalid(
                ctx,
                format!(
                    "`{other}` is not a resolution preset of inference-perf (4k, 1080p, 720p, 360p)"
                ),
            )),
        };
    }
    let mut m = f.map(ctx)?;
    let side = |m: &mut MapReader<'_>, key: &str| -> Result<u32, WorkloadError> {
        let at = m.require(
            ctx,
            key,
            "an explicit resolution needs `width` and `height`",
        )?;
        let v = at.u64(ctx)?;
        if v == 0 || v > MAX_IMAGE_SIDE {
            // `generate_png_bytes`: "PNG dimensions must be positive".
            return Err(at.invalid(
                ctx,
                format!("an image side is 1 to {MAX_IMAGE_SIDE} pixels (inference-perf refuses 0)"),
            ));
        }
        Ok(v as u32)
    };
    let height = side(&mut m, "height")?;
    let width = side(&mut m, "width")?;
    m.finish(ctx, &[]);
    Ok((width, height))
}

fn parse_report(
    ctx: &mut Ctx,
    mut m: MapReader<'_>,
    workload: &mut Workload,
) -> Result<(), WorkloadError> {
    if let Some(f) = m.get("request_lifecycle") {
        let mut rl = f.map(ctx)?;
        let report = &mut workload.report;
        if let Some(f) = rl.get("summary") {
            report.summary = f.bool(ctx)?;
        }
        if let Some(f) = rl.get("per_stage") {
            report.per_stage = f.bool(ctx)?;
        }
        if let Some(f) = rl.get("per_request") {
            report.per_request = f.bool(ctx)?;
        }
        if let Some(f) = rl.get("use_server_output_tokens") {
            report.use_server_output_tokens = f.bool(ctx)?;
        }
        if let Some(f) = rl.get("percentiles") {
            report.percentiles = percentiles(ctx, &f)?;
        }
        if let Some(f) = rl.get("per_adapter") {
            report.per_adapter = f.bool(ctx)?;
        }
        if let Some(f) = rl.get("per_adapter_stage") {
            report.per_adapter_stage = f.bool(ctx)?;
        }
        rl.ignore(
            ctx,
            "max_error_messages",
            "how many distinct error messages inference-perf lists in its report; llmbench records every error",
        );
        rl.finish(ctx, &[]);
    }
    if let Some(f) = m.get("goodput") {
        let mut g = f.map(ctx)?;
        if let Some(c) = g.get("constraints") {
            let mut c = c.map(ctx)?;
            for (key, metric) in [
                ("ttft", SloMetric::Ttft),
                ("tpot", SloMetric::Tpot),
                ("itl", SloMetric::Itl),
                ("ntpot", SloMetric::Ntpot),
                ("request_latency", SloMetric::E2e),
            ] {
                if let Some(v) = c.get(key) {
                    v.positive_f64(ctx)?;
                    workload.goodput.push(GoodputConstraint {
                        metric,
                        limit: v.seconds(ctx)?,
                    });
                }
            }
            c.finish(ctx, &[]);
        }
        g.finish(ctx, &[]);
    }
    // `prometheus: null` is pydantic's None: no Prometheus reports at all (not the defaults).
    if let Some(f) = m.take("prometheus") {
        let report = &mut workload.report;
        if f.is_null() {
            report.prometheus_summary = false;
            report.prometheus_per_stage = false;
        } else {
            let mut p = f.map(ctx)?;
            if let Some(f) = p.get("summary") {
                report.prometheus_summary = f.bool(ctx)?;
            }
            if let Some(f) = p.get("per_stage") {
                report.prometheus_per_stage = f.bool(ctx)?;
            }
            p.finish(ctx, &[]);
        }
    }
    // `SessionLifecycleReportConfig` (`config/reportgen/config.py`): a mapping (not Optional, so no `null`) of
    // three switches; the reports are written for a `trace_session_replay` only, as upstream's session collector
    // exists for session stages only.
    if let Some(f) = m.take("session_lifecycle") {
        if f.is_null() {
            return Err(f.invalid(
                ctx,
                "inference-perf's `session_lifecycle` is a mapping of `summary`, `per_stage` and `per_session` \
                 (not Optional: pydantic refuses `null`)",
            ));
        }
        let mut s = f.map(ctx)?;
        let report = &mut workload.report;
        if let Some(f) = s.get("summary") {
            report.session_summary = f.bool(ctx)?;
        }
        if let Some(f) = s.get("per_stage") {
            report.session_per_stage = f.bool(ctx)?;
        }
        if let Some(f) = s.get("per_session") {
            report.session_per_session = f.bool(ctx)?;
        }
        s.finish(ctx, &[]);
    }
    m.finish(ctx, &[]);
    Ok(())
}

/// `metrics: {type, prometheus: {url, scrape_interval, filters, google_managed}}` (inference-perf
/// `MetricsClientConfig`). `type: default` (or no `prometheus:` section) is no Prometheus client: the run falls back to
/// its own defaults (the endpoint's `/metrics`, `--metrics-endpoint`).
fn parse_metrics(
    ctx: &mut Ctx,
    mut m: MapReader<'_>,
) -> Result<Option<PrometheusSource>, WorkloadError> {
    let kind = m.require(
        ctx,
        "type",
        "inference-perf's metrics client needs a `type`",
    )?;
    let prometheus = match kind.str(ctx)? {
        "prometheus" => true,
        "default" => false,
        other => {
            return Err(kind.invalid(
                ctx,
                format!("`{other}` is not a metrics client type; inference-perf knows prometheus and default"),
            ));
        }
    };
    let Some(section) = m.get("prometheus") else {
        m.finish(ctx, &[]);
        return Ok(None);
    };
    let section_line = section.line;
    let mut p = section.map(ctx)?;
    let google = match p.get("google_managed") {
        Some(f) => Some((f.bool(ctx)?, f)),
        None => None,
    };
    if let Some((true, f)) = google {
        return Err(f.unsupported(
            ctx,
            "Google Cloud Managed Prometheus (it needs Google credentials in the launcher); give the serving \
             pods' /metrics URLs with --metrics-endpoint or stack.metricsEndpoints instead",
        ));
    }
    let url = match p.get("url") {
        Some(f) => {
            let url = f.str(ctx)?;
            if !(url.starts_with("http://") || url.starts_with("https://"))
                || url.contains(char::is_whitespace)
            {
                return Err(f.invalid(
                    ctx,
                    format!("`{url}` is not an http(s) URL of a Prometheus server"),
                ));
            }
            Some(url.trim_end_matches('/').to_owned())
        }
        None => None,
    };
    let scrape_interval = match p.get("scrape_interval") {
        Some(f) => Duration::from_secs(f.positive_u64(ctx)?),
        None => Duration::from_secs(15),
    };
    let mut filters = Vec::new();
    if let Some(f) = p.get("filters") {
        for item in f.seq(ctx)? {
            let filter = item.str(ctx)?.trim();
            let well_formed = ["=~", "!~", "!=", "="].iter().any(|op| {
                filter.split_once(op).is_some_and(|(label, value)| {
                    let label = label.trim();
                    !label.is_empty()
                        && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                        && value.trim().starts_with('"')
                        && value.trim().ends_with('"')
                        && value.trim().len() >= 2
                })
            });
            if !well_formed {
                return Err(item.invalid(
                    ctx,
                    format!("`{filter}` is not a PromQL label matcher like namespace=\"llm-d\""),
                ));
            }
            filters.push(filter.to_owned());
        }
    }
    p.finish(ctx, &[]);
    m.finish(ctx, &[]);
    if !prometheus {
        return Ok(None);
    }
    let Some(url) = url else {
        return Err(ctx.missing(
            "metrics.prometheus.url",
            section_line,
            "inference-perf needs exactly one of `url` or `google_managed`",
        ));
    };
    Ok(Some(PrometheusSource {
        url,
        scrape_interval,
        filters,
    }))
}

/// A list of percentiles in (0, 100].
pub(crate) fn percentiles(ctx: &Ctx, f: &At<'_>) -> Result<Vec<f64>, WorkloadError> {
    f.seq(ctx)?
        .iter()
        .map(|p| {
            let v = p.positive_f64(ctx)?;
            if v > 100.0 {
                Err(p.invalid(ctx, format!("a percentile is at most 100, found {v}")))
            } else {
                Ok(v)
            }
        })
        .collect()
}

fn parse_storage(
    ctx: &mut Ctx,
    m: MapReader<'_>,
    report: &mut ReportOptions,
) -> Result<(), WorkloadError> {
    let mut m = m.output_only();
    if let Some(f) = m.get("local_storage") {
        let mut ls = f.map(ctx)?.output_only();
        if let Some(p) = ls.get("path") {
            report.output_path = Some(p.str(ctx)?.to_string());
        }
        if let Some(p) = ls.get("report_file_prefix") {
            report.file_name = Some(p.str(ctx)?.to_string());
        }
        ls.finish(ctx, &[]);
    }
    for key in ["google_cloud_storage", "simple_storage_service"] {
        m.ignore(
            ctx,
            key,
            "llmbench writes results to its --output directory; upload them from there",
        );
    }
    m.finish(ctx, &[]);
    Ok(())
}
