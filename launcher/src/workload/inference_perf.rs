//! inference-perf's config file (`inference_perf/config/config.py`, FORMATS 1.4) → `Workload`.
//!
//! Lenient like inference-perf ≤ v0.6.1 (unknown keys are warnings), with the exceptions that
//! would silently change what runs: a section nested where it is never read, and features
//! llmbench does not run yet, are errors.

use std::time::Duration;

use super::ParseOptions;
use super::error::WorkloadError;
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
    parse_load(ctx, load, &mut workload, options)?;

    if let Some(f) = root.get("api") {
        parse_api(ctx, f.map(ctx)?, &mut workload.api)?;
    }
    if let Some(f) = root.get("server") {
        parse_server(ctx, f.map(ctx)?, &mut workload.api)?;
    }
    if let Some(f) = root.get("tokenizer") {
        workload.tokenizer = parse_tokenizer(ctx, f.map(ctx)?)?;
    }
    workload.data = match root.get("data") {
        Some(f) => parse_data(ctx, f.map(ctx)?, &mut workload.api)?,
        None => DataSpec::Mock,
    };
    if let Some(f) = root.get("report") {
        parse_report(ctx, f.map(ctx)?, &mut workload)?;
    }
    if let Some(f) = root.get("storage") {
        parse_storage(ctx, f.map(ctx)?, &mut workload.report)?;
    }
    root.ignore(
        ctx,
        "metrics",
        "server metrics are collected from the run's metricsEndpoints, not from the profile",
    );
    if let Some(f) = root.get("circuit_breakers") {
        let empty = matches!(&f.node.value, super::yaml::Value::Seq(v) if v.is_empty());
        if !empty {
            return Err(f.unsupported(ctx, "circuit breakers"));
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
            if SECTIONS.contains(&key.name.as_str()) && key.name != section.name {
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

fn parse_load(
    ctx: &mut Ctx,
    mut load: MapReader<'_>,
    workload: &mut Workload,
    options: &ParseOptions,
) -> Result<(), WorkloadError> {
    let kind = match load.get("type") {
        None => LoadKind::Constant,
        Some(f) => match f.str(ctx)? {
            "constant" => LoadKind::Constant,
            "poisson" => LoadKind::Poisson,
            "concurrent" => LoadKind::Concurrent,
            "trace_replay" => {
                return Err(f.unsupported(ctx, "`trace_replay` load (replaying a request trace)"));
            }
            "trace_session_replay" => {
                return Err(f.unsupported(
                    ctx,
                    "`trace_session_replay` load (replaying agent sessions from traces)",
                ));
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
    if let Some(f) = load.get("trace") {
        return Err(f.unsupported(ctx, "trace replay (`load.trace`)"));
    }
    if let Some(f) = load.get("lora_traffic_split") {
        let empty = matches!(&f.node.value, super::yaml::Value::Seq(v) if v.is_empty());
        if !empty {
            return Err(f.unsupported(ctx, "LoRA traffic split"));
        }
    }
    if let Some(f) = load.get("interval") {
        workload.stage_interval = f.seconds(ctx)?;
    }
    if let Some(f) = load.get("num_workers") {
        workload.workers.num_workers = Some(f.positive_u32(ctx)?);
    }
    if let Some(f) = load.get("worker_max_concurrency") {
        workload.workers.worker_max_concurrency = Some(f.positive_u32(ctx)?);
    }
    if let Some(f) = load.get("worker_max_tcp_connections") {
        workload.workers.worker_max_tcp_connections = Some(f.positive_u32(ctx)?);
    }
    if let Some(f) = load.get("request_timeout") {
        f.positive_f64(ctx)?;
        workload.request_timeout = Some(f.seconds(ctx)?);
    }
    match load.get("base_seed") {
        Some(f) => {
            workload.seed = f.u64(ctx)?;
            workload.seed_origin = SeedOrigin::Profile;
        }
        None => set_default_seed(workload, options, 0),
    }

    if let Some(f) = load.get("sweep") {
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
        return Ok(());
    }

    let stages = load.require(ctx, "stages", "at least one stage (or a `sweep`)")?;
    let items = stages.seq(ctx)?;
    if items.is_empty() {
        return Err(stages.invalid(ctx, "needs at least one stage"));
    }
    for item in items {
        let stage = match kind {
            LoadKind::Concurrent => parse_concurrent_stage(ctx, &item)?,
            _ => parse_rate_stage(ctx, &item, kind)?,
        };
        workload.stages.push(stage);
    }
    load.finish(ctx, &[]);
    Ok(())
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
    let rate = m
        .require(
            ctx,
            "rate",
            "a rate stage has `rate` (requests/s) and `duration` (s)",
        )?
        .positive_f64(ctx)?;
    let duration_field = m.require(
        ctx,
        "duration",
        "a rate stage has `rate` (requests/s) and `duration` (s)",
    )?;
    let duration = Duration::from_secs(duration_field.positive_u64(ctx)?);
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
    let num_requests = m.require(ctx, "num_requests", why)?.positive_u64(ctx)?;
    let concurrency = m
        .require(ctx, "concurrency_level", why)?
        .positive_u32(ctx)?;
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
    let progression = match m.get("type") {
        None => SweepProgression::Linear,
        Some(t) => match t.str(ctx)? {
            "linear" => SweepProgression::Linear,
            "geometric" => SweepProgression::Geometric,
            other => {
                return Err(t.invalid(
                    ctx,
                    format!("unknown sweep type `{other}`; expected linear or geometric"),
                ));
            }
        },
    };
    let why = "llmbench needs it written out for a sweep";
    let num_stages = m.require(ctx, "num_stages", why)?.positive_u32(ctx)?;
    let stage_duration =
        Duration::from_secs(m.require(ctx, "stage_duration", why)?.positive_u64(ctx)?);
    let num_requests = m
        .get("num_requests")
        .map(|f| f.positive_u64(ctx))
        .transpose()?;
    let timeout = m.get("timeout").map(|f| f.seconds(ctx)).transpose()?;
    let saturation_percentile = match m.get("saturation_percentile") {
        Some(p) => {
            let v = p.positive_f64(ctx)?;
            if v > 100.0 {
                return Err(p.invalid(ctx, format!("a percentile is at most 100, found {v}")));
            }
            Some(v)
        }
        None => None,
    };
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

fn parse_api(ctx: &mut Ctx, mut m: MapReader<'_>, api: &mut Api) -> Result<(), WorkloadError> {
    if let Some(f) = m.get("type") {
        api.kind = match f.str(ctx)? {
            "completion" => ApiKind::Completion,
            "chat" => ApiKind::Chat,
            "anthropic_messages" => {
                return Err(f.unsupported(ctx, "the `anthropic_messages` API"));
            }
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
    if let Some(f) = m.get("response_format") {
        return Err(f.unsupported(ctx, "structured output (`response_format`)"));
    }
    m.finish(ctx, &[]);
    Ok(())
}

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
const TYPE_SUBMAPS: [&str; 3] = [
    "otel_trace_replay",
    "weka_trace_replay",
    "conversation_replay",
];

fn parse_data(
    ctx: &mut Ctx,
    mut m: MapReader<'_>,
    api: &mut Api,
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
    match kind {
        "otel_trace_replay" => {
            return Err(unsupported(
                "`otel_trace_replay` data (OpenTelemetry trace replay)",
            ));
        }
        "weka_trace_replay" => {
            return Err(unsupported("`weka_trace_replay` data (WEKA trace replay)"));
        }
        "conversation_replay" => {
            return Err(unsupported(
                "`conversation_replay` data (multi-turn agentic conversation replay)",
            ));
        }
        "visionarena" => return Err(unsupported("`visionarena` data (multimodal)")),
        "cnn_dailymail" | "infinity_instruct" | "billsum_conversations" => {
            return Err(unsupported(&format!(
                "`{kind}` data (a Hugging Face dataset download)"
            )));
        }
        _ => {}
    }
    if let Some(f) = m.get("multimodal") {
        return Err(f.unsupported(ctx, "multimodal data"));
    }
    if let Some(f) = m.get("trace") {
        return Err(f.unsupported(ctx, "trace-driven data (`data.trace`)"));
    }
    if let Some(f) = m.get("use_chat_template") {
        api.use_chat_template = Some(f.bool(ctx)?);
    }
    for key in TYPE_SUBMAPS {
        m.ignore(ctx, key, &format!("only read when `type` is `{key}`"));
    }

    let spec = match kind {
        "mock" => DataSpec::Mock,
        "random" | "synthetic" => {
            let why = "inference-perf's random and synthetic data need both length distributions";
            let input = distribution(ctx, &m.require(ctx, "input_distribution", why)?)?;
            let output = distribution(ctx, &m.require(ctx, "output_distribution", why)?)?;
            let text = if kind == "random" {
                PromptText::RandomTokens
            } else {
                let path = match m.get_any(&["corpus_file_path", "path"]) {
                    Some(f) => Some(f.str(ctx)?.to_string()),
                    None => None,
                };
                PromptText::Corpus { path }
            };
            DataSpec::Random(RandomData {
                input,
                output,
                prefix_len: 0,
                text,
            })
        }
        "shared_prefix" => {
            let f = m.require(
                ctx,
                "shared_prefix",
                "`type: shared_prefix` needs a `shared_prefix` section",
            )?;
            DataSpec::SharedPrefix(shared_prefix(ctx, &f)?)
        }
        "shareGPT" => {
            let path = match m.get("path") {
                Some(f) => Some(f.str(ctx)?.to_string()),
                None => None,
            };
            let input_filter = m
                .get("input_distribution")
                .map(|f| distribution(ctx, &f))
                .transpose()?;
            let output = m
                .get("output_distribution")
                .map(|f| distribution(ctx, &f))
                .transpose()?;
            DataSpec::ShareGpt(ShareGpt {
                path,
                input_filter,
                output,
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
    let min = m.get("min").map(|f| f.u64(ctx)).transpose()?.unwrap_or(10);
    let max = m
        .get("max")
        .map(|f| f.u64(ctx))
        .transpose()?
        .unwrap_or(1024);
    let mean_field = m.get("mean");
    let mean = mean_field
        .as_ref()
        .map(|f| f.non_negative_f64(ctx))
        .transpose()?
        .unwrap_or(512.0);
    let std_dev = m
        .get("std_dev")
        .map(|f| f.non_negative_f64(ctx))
        .transpose()?;
    let variance = m.get("variance");
    let spread = match (std_dev, &variance) {
        (Some(_), Some(v)) => {
            return Err(v.invalid(ctx, "`variance` and `std_dev` are exclusive; set one"));
        }
        (Some(s), None) => Spread::StdDev(s),
        (None, Some(v)) => Spread::Variance(v.non_negative_f64(ctx)?),
        (None, None) => Spread::StdDev(200.0),
    };
    let total_count = m
        .get("total_count")
        .map(|f| f.positive_u64(ctx))
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

/// An int, or a distribution object (shared_prefix lengths).
fn length(ctx: &mut Ctx, f: &At<'_>) -> Result<TokenLengths, WorkloadError> {
    if f.node.entries().is_some() {
        distribution(ctx, f)
    } else {
        Ok(TokenLengths::fixed(f.u64(ctx)?))
    }
}

fn shared_prefix(ctx: &mut Ctx, f: &At<'_>) -> Result<SharedPrefix, WorkloadError> {
    let mut m = f.map(ctx)?;
    if let Some(mm) = m.get("multimodal") {
        return Err(mm.unsupported(ctx, "multimodal shared-prefix data"));
    }
    let num_groups = m
        .get_any(&["num_groups", "num_unique_system_prompts"])
        .map(|f| f.positive_u64(ctx))
        .transpose()?
        .unwrap_or(10);
    let num_prompts_per_group = m
        .get_any(&["num_prompts_per_group", "num_users_per_system_prompt"])
        .map(|f| f.positive_u64(ctx))
        .transpose()?
        .unwrap_or(10);
    let mut len = |m: &mut MapReader<'_>, key: &str, default: u64| match m.get(key) {
        Some(f) => length(ctx, &f),
        None => Ok(TokenLengths::fixed(default)),
    };
    let system_prompt_len = len(&mut m, "system_prompt_len", 100)?;
    let question_len = len(&mut m, "question_len", 50)?;
    let output_len = len(&mut m, "output_len", 50)?;
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
    })
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
    m.ignore(
        ctx,
        "prometheus",
        "server metrics are collected from the run's metricsEndpoints, not from the profile",
    );
    m.ignore(
        ctx,
        "session_lifecycle",
        "session reports belong to trace_session_replay, which llmbench does not run",
    );
    m.finish(ctx, &[]);
    Ok(())
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
    mut m: MapReader<'_>,
    report: &mut ReportOptions,
) -> Result<(), WorkloadError> {
    if let Some(f) = m.get("local_storage") {
        let mut ls = f.map(ctx)?;
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
