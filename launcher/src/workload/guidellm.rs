//! guidellm scenarios → `Workload`: the v0.7 `spec:` format with `benchmarks[]` (dialect C) and
//! the older flat format with hyphenated or underscored keys (dialects A and B, FORMATS 1.4).
//!
//! Each `benchmarks[]` entry is a map of dotted paths relative to `spec` (`profile.streams`,
//! `constraints[0].count`); it is applied to a copy of `spec`, and the result is parsed like a
//! scenario of its own, so the base `spec` may be incomplete (multi-turn's `max_requests`
//! without `count`, `concurrent` without `streams`) as long as every entry completes it.

use std::time::Duration;

use super::ParseOptions;
use super::error::WorkloadError;
use super::inference_perf::{set_default_seed, string_map};
use super::model::*;
use super::reader::{At, Ctx, MapReader, join};
use super::yaml::{Key, Node, Value};

/// guidellm's `settings.max_concurrency`, the stream count of `throughput` without a cap.
const DEFAULT_MAX_CONCURRENCY: u32 = 10240;
/// guidellm's default seed.
const DEFAULT_SEED: u64 = 42;
/// guidellm's default synthetic `samples` and sweep size.
const DEFAULT_SAMPLES: u64 = 1000;
const DEFAULT_SWEEP_SIZE: u32 = 10;

pub(crate) fn parse(
    ctx: &mut Ctx,
    doc: &Node,
    options: &ParseOptions,
) -> Result<Workload, WorkloadError> {
    if doc.get("spec").is_some() {
        parse_scenario(ctx, doc, options)
    } else {
        parse_flat(ctx, doc, options)
    }
}

/// What one (possibly overlaid) `spec` yields.
struct SpecParts {
    api: Api,
    data: DataSpec,
    stages: Vec<Stage>,
    seed: Option<u64>,
    timeout: Option<Duration>,
    tokenizer: Option<TokenizerSpec>,
}

fn parse_scenario(
    ctx: &mut Ctx,
    doc: &Node,
    options: &ParseOptions,
) -> Result<Workload, WorkloadError> {
    let mut root = MapReader::root(ctx, doc)?;
    let spec = root.require(ctx, "spec", "a guidellm scenario has a `spec`")?;
    let spec_node = spec.node.clone();
    let spec_line = spec.line;
    if let Some(meta) = root.get("metadata") {
        meta.map(ctx)?; // must be a map; its labels are descriptive only
    }
    let benchmarks = match root.get("benchmarks") {
        Some(f) => f.seq(ctx)?,
        None => Vec::new(),
    };
    root.finish(ctx, &[]);

    let mut parts: Vec<SpecParts> = Vec::new();
    if benchmarks.is_empty() {
        parts.push(parse_spec(ctx, &spec_node, spec_line)?);
    } else {
        for (i, bench) in benchmarks.iter().enumerate() {
            let Some(entries) = bench.node.entries() else {
                return Err(ctx.wrong_type(
                    &bench.path,
                    bench.node,
                    "a map of dotted `spec` paths",
                ));
            };
            let mut overlaid = spec_node.clone();
            for (key, value) in entries {
                set_path(&mut overlaid, &key.name, value.clone(), key.line).map_err(|problem| {
                    ctx.invalid(&join(&bench.path, &key.name), key.line, problem)
                })?;
            }
            let part = parse_spec(ctx, &overlaid, spec_line)
                .map_err(|e| e.in_context(&format!("benchmarks[{i}]")))?;
            parts.push(part);
        }
    }

    let mut workload = Workload::empty(Harness::Guidellm, Dialect::GuidellmScenario);
    let Some(first) = parts.first() else {
        return Err(ctx.missing("spec", spec_line, "a scenario needs a `spec`"));
    };
    if let Some((i, _)) = parts
        .iter()
        .enumerate()
        .find(|(_, p)| p.api != first.api || p.data != first.data)
    {
        return Err(ctx.unsupported(
            &format!("benchmarks[{i}]"),
            benchmarks.get(i).map_or(0, |b| b.line),
            "benchmarks that change the backend or the data of the scenario",
        ));
    }
    workload.api = first.api.clone();
    workload.data = first.data.clone();
    workload.request_timeout = first.timeout;
    workload.tokenizer = first.tokenizer.clone();
    match first.seed {
        Some(seed) => {
            workload.seed = seed;
            workload.seed_origin = SeedOrigin::Profile;
        }
        None => set_default_seed(&mut workload, options, DEFAULT_SEED),
    }
    workload.stages = parts.into_iter().flat_map(|p| p.stages).collect();
    Ok(workload)
}

fn parse_spec(ctx: &mut Ctx, spec: &Node, line: u32) -> Result<SpecParts, WorkloadError> {
    let at = At::new(spec, "spec", line);
    let mut m = at.map(ctx)?;

    let mut api = Api {
        streaming: true,
        kind: ApiKind::Chat,
        ..Api::default()
    };
    let mut timeout = None;
    let backend = m.require(
        ctx,
        "backend",
        "a scenario names its `backend` and `target`",
    )?;
    parse_backend(ctx, &backend, &mut api, &mut timeout)?;

    let tokenizer = match m.get("processor") {
        Some(f) => Some(TokenizerSpec {
            name_or_path: f.str(ctx)?.to_string(),
            token: None,
            trust_remote_code: false,
        }),
        None => None,
    };
    m.ignore(
        ctx,
        "processor_args",
        "tokenizer arguments are not used by llmbench",
    );

    let samples = match m.get("data_loader") {
        Some(f) => {
            let mut dl = f.map(ctx)?;
            if let Some(k) = dl.get("kind") {
                let kind = k.str(ctx)?;
                if kind != "pytorch" {
                    return Err(k.unsupported(ctx, format!("data loader `{kind}`")));
                }
            }
            let samples = dl.get("samples").map(|s| s.positive_u64(ctx)).transpose()?;
            dl.finish(ctx, &[]);
            samples
        }
        None => None,
    };
    let data_field = m.require(ctx, "data", "a scenario needs a `data` source")?;
    let data = scenario_data(ctx, &data_field, samples)?;
    if let DataSpec::SyntheticText(s) = &data {
        // guidellm sends `ignore_eos` with `max_tokens` for synthetic data with output lengths.
        api.ignore_eos = s.output.is_some();
    }

    let constraints = match m.get("constraints") {
        Some(f) => constraints(ctx, &f)?,
        None => StageLimit::default(),
    };

    let mut seed = match m.get("seed") {
        Some(f) => Some(seed_value(ctx, &f)?),
        None => None,
    };
    let profile = m.require(ctx, "profile", "a scenario needs a `profile` (its load)")?;
    let mut pm = profile.map(ctx)?;
    let kind_field = pm.require(ctx, "kind", "the profile kind")?;
    let kind = kind_field.str(ctx)?;
    if let Some(s) = pm.get("random_seed") {
        seed.get_or_insert(s.u64(ctx)?);
    }
    let mut stages = profile_stages(ctx, &mut pm, &kind_field, kind, &constraints, false)?;
    // v0.7 keeps warm-up and cool-down in `profile`; earlier scenarios had them beside it.
    let mut transients = [None, None];
    for (slot, key) in transients.iter_mut().zip(["warmup", "cooldown"]) {
        if let Some(f) = m.get(key) {
            *slot = transient_phase(ctx, &f)?;
        }
        if let Some(f) = pm.get(key) {
            *slot = transient_phase(ctx, &f)?;
        }
    }
    for stage in &mut stages {
        [stage.warmup, stage.cooldown] = transients;
    }
    pm.finish(ctx, &[]);
    for key in ["outputs", "output", "request_formatter"] {
        m.ignore(ctx, key, "not used by llmbench");
    }
    m.finish(ctx, &[]);
    Ok(SpecParts {
        api,
        data,
        stages,
        seed,
        timeout,
        tokenizer,
    })
}

fn parse_backend(
    ctx: &mut Ctx,
    f: &At<'_>,
    api: &mut Api,
    timeout: &mut Option<Duration>,
) -> Result<(), WorkloadError> {
    let mut b = f.map(ctx)?;
    if let Some(k) = b.get("kind") {
        let kind = k.str(ctx)?;
        if kind != "openai_http" {
            return Err(k.unsupported(ctx, format!("backend `{kind}`")));
        }
    }
    api.base_url = Some(
        b.require(ctx, "target", "the server's URL")?
            .str(ctx)?
            .to_string(),
    );
    if let Some(f) = b.get("model") {
        api.model = Some(f.str(ctx)?.to_string());
    }
    if let Some(f) = b.get("request_format") {
        let (kind, path) = request_format(ctx, &f)?;
        api.kind = kind;
        api.endpoint = path;
    }
    if let Some(f) = b.get("api_key") {
        api.api_key = Some(f.str(ctx)?.to_string());
    }
    if let Some(f) = b.get("headers") {
        api.headers = string_map(ctx, &f)?;
    }
    if let Some(f) = b.get("stream") {
        api.streaming = f.bool(ctx)?;
    }
    if let Some(f) = b.get("timeout") {
        *timeout = Some(f.seconds(ctx)?);
    }
    b.finish(ctx, &[]);
    Ok(())
}

/// `/v1/completions`, `/v1/chat/completions`, or the ≤ v0.6 names.
fn request_format(ctx: &Ctx, f: &At<'_>) -> Result<(ApiKind, Option<String>), WorkloadError> {
    match f.str(ctx)? {
        "/v1/completions" => Ok((ApiKind::Completion, Some("/v1/completions".into()))),
        "/v1/chat/completions" => Ok((ApiKind::Chat, Some("/v1/chat/completions".into()))),
        "text_completions" => Ok((ApiKind::Completion, None)),
        "chat_completions" => Ok((ApiKind::Chat, None)),
        other => Err(f.unsupported(ctx, format!("request format `{other}`"))),
    }
}

fn seed_value(ctx: &mut Ctx, f: &At<'_>) -> Result<u64, WorkloadError> {
    if f.node.entries().is_none() {
        return f.u64(ctx);
    }
    let mut m = f.map(ctx)?;
    if let Some(k) = m.get("kind") {
        let kind = k.str(ctx)?;
        if kind != "static" {
            return Err(k.unsupported(ctx, format!("seed kind `{kind}`")));
        }
    }
    let v = m
        .require(ctx, "value", "a static seed has a `value`")?
        .u64(ctx)?;
    m.finish(ctx, &[]);
    Ok(v)
}

/// `constraints[]` of a v0.7 scenario.
fn constraints(ctx: &mut Ctx, f: &At<'_>) -> Result<StageLimit, WorkloadError> {
    let items = if f.node.entries().is_some() {
        vec![At::new(f.node, f.path.clone(), f.line)]
    } else {
        f.seq(ctx)?
    };
    let mut limit = StageLimit::default();
    for item in items {
        let mut c = item.map(ctx)?;
        let kind_field = c.require(ctx, "kind", "each constraint has a `kind`")?;
        match kind_field.str(ctx)? {
            "max_duration" => {
                let s = c.require(ctx, "seconds", "`max_duration` needs `seconds`")?;
                s.positive_f64(ctx)?;
                limit.duration = Some(s.seconds(ctx)?);
            }
            "max_requests" => {
                let n = c.require(ctx, "count", "`max_requests` needs `count`")?;
                limit.requests = Some(n.positive_u64(ctx)?);
            }
            "max_errors" => {
                let n = c.require(ctx, "count", "`max_errors` needs `count`")?;
                limit.max_errors = Some(ErrorLimit {
                    limit: n.positive_u64(ctx)?,
                    scope: stopping_scope(ctx, &mut c)?,
                });
            }
            "max_error_rate" => {
                let rate = error_rate(
                    ctx,
                    &c.require(ctx, "rate", "`max_error_rate` needs `rate`")?,
                )?;
                let window = match c.get("window") {
                    Some(w) => w.positive_u64(ctx)?,
                    None => GUIDELLM_ERROR_WINDOW,
                };
                limit.max_error_rate = Some(ErrorLimit {
                    limit: WindowedErrorRate { rate, window },
                    scope: stopping_scope(ctx, &mut c)?,
                });
            }
            "max_global_error_rate" => {
                let rate = error_rate(
                    ctx,
                    &c.require(ctx, "rate", "`max_global_error_rate` needs `rate`")?,
                )?;
                let minimum = match c.get("minimum") {
                    Some(w) => w.positive_u64(ctx)?,
                    None => GUIDELLM_ERROR_MIN_PROCESSED,
                };
                limit.max_global_error_rate = Some(ErrorLimit {
                    limit: GlobalErrorRate { rate, minimum },
                    scope: stopping_scope(ctx, &mut c)?,
                });
            }
            "over_saturation" => {
                return Err(kind_field.unsupported(ctx, "the `over_saturation` constraint"));
            }
            other => {
                return Err(kind_field.invalid(
                    ctx,
                    format!(
                        "unknown constraint `{other}`; expected max_duration, max_requests, \
                         max_errors, max_error_rate, max_global_error_rate or over_saturation"
                    ),
                ));
            }
        }
        c.finish(ctx, &[]);
    }
    Ok(limit)
}

/// An error rate as guidellm validates it: strictly between 0 and 1.
fn error_rate(ctx: &Ctx, f: &At<'_>) -> Result<f64, WorkloadError> {
    let v = f.positive_f64(ctx)?;
    if v >= 1.0 {
        return Err(f.invalid(
            ctx,
            format!("an error rate is a fraction in (0, 1), found {v}"),
        ));
    }
    Ok(v)
}

/// A constraint's `stopping_scope`: `current` (guidellm's default) or `all`.
fn stopping_scope(ctx: &mut Ctx, c: &mut MapReader<'_>) -> Result<StopScope, WorkloadError> {
    match c.get("stopping_scope") {
        None => Ok(StopScope::Stage),
        Some(f) => match f.str(ctx)? {
            "current" => Ok(StopScope::Stage),
            "all" => Ok(StopScope::Run),
            other => Err(f.invalid(
                ctx,
                format!("unknown stopping_scope `{other}`; expected current or all"),
            )),
        },
    }
}

/// guidellm ≥ v0.4 `warmup` / `cooldown` (`TransientPhaseConfig`): a number (a fraction when below 1, else
/// seconds or requests), a JSON string of either, or `{percent, value, mode}`.
fn transient_phase(ctx: &mut Ctx, f: &At<'_>) -> Result<Option<Transient>, WorkloadError> {
    let parsed;
    let f = match &f.node.value {
        Value::Str(text) => {
            parsed = string_data(text, f.line)
                .filter(|_| text.trim_start().starts_with('{'))
                .or_else(|| {
                    text.trim()
                        .parse::<f64>()
                        .ok()
                        .map(|v| Node::new(Value::Float(v), f.line))
                })
                .ok_or_else(|| {
                    ctx.wrong_type(&f.path, f.node, "a number or {percent, value, mode}")
                })?;
            At::new(&parsed, f.path.clone(), f.line)
        }
        _ => At::new(f.node, f.path.clone(), f.line),
    };
    let phase = if f.node.entries().is_some() {
        let mut m = f.map(ctx)?;
        let percent = match m.get("percent") {
            Some(p) => Some(transient_percent(ctx, &p)?),
            None => None,
        };
        let value = m.get("value").map(|v| v.non_negative_f64(ctx)).transpose()?;
        let mode = match m.get("mode") {
            None => TransientMode::PreferDuration,
            Some(k) => match k.str(ctx)? {
                "duration" => TransientMode::Duration,
                "requests" => TransientMode::Requests,
                "prefer_duration" => TransientMode::PreferDuration,
                "prefer_requests" => TransientMode::PreferRequests,
                "both" => TransientMode::Both,
                other => {
                    return Err(k.invalid(
                        ctx,
                        format!(
                            "unknown mode `{other}`; expected duration, requests, prefer_duration, \
                             prefer_requests or both"
                        ),
                    ));
                }
            },
        };
        m.finish(ctx, &[]);
        TransientPhase {
            percent,
            value,
            mode,
        }
    } else {
        let v = f.non_negative_f64(ctx)?;
        TransientPhase {
            percent: (v < 1.0).then_some(v),
            value: (v >= 1.0).then_some(v),
            mode: TransientMode::PreferDuration,
        }
    };
    let empty = phase.percent.is_none_or(|p| p == 0.0) && phase.value.is_none_or(|v| v == 0.0);
    Ok((!empty).then_some(Transient::GuidellmPhase(phase)))
}

fn transient_percent(ctx: &Ctx, f: &At<'_>) -> Result<f64, WorkloadError> {
    let v = f.non_negative_f64(ctx)?;
    if v >= 1.0 {
        return Err(f.invalid(
            ctx,
            format!("`percent` is a fraction of the stage in [0, 1), found {v}"),
        ));
    }
    Ok(v)
}

/// A number or a list of numbers, each > 0 (rates, stream counts).
fn scalar_or_list<'n>(ctx: &Ctx, f: &At<'n>) -> Result<Vec<At<'n>>, WorkloadError> {
    if matches!(f.node.value, Value::Seq(_)) {
        let items = f.seq(ctx)?;
        if items.is_empty() {
            return Err(f.invalid(ctx, "the list is empty"));
        }
        Ok(items)
    } else {
        Ok(vec![At::new(f.node, f.path.clone(), f.line)])
    }
}

/// Turns a profile kind and its parameters into stages. `flat`: the ≤ v0.6 meaning of `rate`
/// (stream count for concurrent, sweep size for sweep).
fn profile_stages(
    ctx: &mut Ctx,
    pm: &mut MapReader<'_>,
    kind_field: &At<'_>,
    kind: &str,
    limit: &StageLimit,
    flat: bool,
) -> Result<Vec<Stage>, WorkloadError> {
    let max_concurrency = pm
        .get("max_concurrency")
        .map(|f| f.positive_u32(ctx))
        .transpose()?;
    let rampup = match pm.get_any(&["rampup_duration", "rampup"]) {
        Some(f) => f.seconds(ctx)?,
        None => Duration::ZERO,
    };
    let needs_limit = |ctx: &Ctx| -> Result<(), WorkloadError> {
        if limit.duration.is_none() && limit.requests.is_none() {
            let key = if flat {
                "max_seconds"
            } else {
                "spec.constraints"
            };
            return Err(ctx.missing(
                key,
                kind_field.line,
                "a duration or request limit (max_duration / max_requests); without one the \
                 benchmark never ends",
            ));
        }
        Ok(())
    };
    let closed = |load: LoadKind, concurrency: u32| Stage {
        load,
        arrival: Arrival::Closed {
            concurrency,
            rampup,
        },
        limit: limit.clone(),
        max_concurrency: None,
        warmup: None,
        cooldown: None,
    };
    let stages = match kind {
        "synchronous" => {
            needs_limit(ctx)?;
            if flat {
                pm.skip("rate");
            }
            vec![closed(LoadKind::Synchronous, 1)]
        }
        "throughput" => {
            needs_limit(ctx)?;
            if flat {
                pm.skip("rate");
            }
            vec![closed(
                LoadKind::Throughput,
                max_concurrency.unwrap_or(DEFAULT_MAX_CONCURRENCY),
            )]
        }
        "concurrent" => {
            needs_limit(ctx)?;
            let key = if flat { "rate" } else { "streams" };
            let f = match pm.get(key) {
                Some(f) => f,
                None => {
                    return Err(ctx.missing(
                        &join(&pm.path, key),
                        kind_field.line,
                        "a `concurrent` profile needs its number of streams",
                    ));
                }
            };
            scalar_or_list(ctx, &f)?
                .iter()
                .map(|s| Ok(closed(LoadKind::Concurrent, s.positive_u32(ctx)?)))
                .collect::<Result<Vec<_>, WorkloadError>>()?
        }
        "constant" | "async" | "poisson" => {
            needs_limit(ctx)?;
            let f = match pm.get("rate") {
                Some(f) => f,
                None => {
                    return Err(ctx.missing(
                        &join(&pm.path, "rate"),
                        kind_field.line,
                        "a rate profile needs `rate` (requests/s)",
                    ));
                }
            };
            scalar_or_list(ctx, &f)?
                .iter()
                .map(|r| {
                    let rate = r.positive_f64(ctx)?;
                    let (load, arrival) = if kind == "poisson" {
                        (LoadKind::Poisson, Arrival::GuidellmPoisson { rate })
                    } else {
                        (
                            LoadKind::Constant,
                            Arrival::GuidellmConstant { rate, rampup },
                        )
                    };
                    Ok(Stage {
                        load,
                        arrival,
                        limit: limit.clone(),
                        max_concurrency,
                        warmup: None,
                        cooldown: None,
                    })
                })
                .collect::<Result<Vec<_>, WorkloadError>>()?
        }
        "sweep" => {
            needs_limit(ctx)?;
            let size_key = if flat { "rate" } else { "sweep_size" };
            let size = match pm.get_any(&[size_key, "sweep_size"]) {
                Some(f) => {
                    let n = f.positive_u32(ctx)?;
                    if n < 2 {
                        return Err(f.invalid(
                            ctx,
                            "a sweep runs synchronous and throughput first, so its size is at least 2",
                        ));
                    }
                    n
                }
                None => DEFAULT_SWEEP_SIZE,
            };
            let process = match pm.get_any(&["strategy_type", "strategy"]) {
                None => SweepProcess::Constant,
                Some(f) => match f.str(ctx)? {
                    "constant" | "async" => SweepProcess::Constant,
                    "poisson" => SweepProcess::Poisson,
                    other => {
                        return Err(f.invalid(
                            ctx,
                            format!(
                                "unknown sweep strategy `{other}`; expected constant or poisson"
                            ),
                        ));
                    }
                },
            };
            vec![
                closed(LoadKind::Synchronous, 1),
                closed(
                    LoadKind::Throughput,
                    max_concurrency.unwrap_or(DEFAULT_MAX_CONCURRENCY),
                ),
                Stage {
                    load: LoadKind::Sweep,
                    arrival: Arrival::Sweep(Sweep::Guidellm {
                        size,
                        process,
                        limit: limit.clone(),
                    }),
                    limit: limit.clone(),
                    max_concurrency,
                    warmup: None,
                    cooldown: None,
                },
            ]
        }
        "replay" => return Err(kind_field.unsupported(ctx, "the `replay` profile (trace replay)")),
        other => {
            return Err(kind_field.invalid(
                ctx,
                format!(
                    "unknown profile `{other}`; expected synchronous, concurrent, throughput, \
                     constant, poisson or sweep"
                ),
            ));
        }
    };
    Ok(stages)
}

/// `spec.data`: one synthetic_text source (a one-item list, or a map).
fn scenario_data(
    ctx: &mut Ctx,
    f: &At<'_>,
    samples: Option<u64>,
) -> Result<DataSpec, WorkloadError> {
    let items = if f.node.entries().is_some() {
        vec![At::new(f.node, f.path.clone(), f.line)]
    } else {
        f.seq(ctx)?
    };
    match items.len() {
        0 => return Err(f.invalid(ctx, "needs one data source")),
        1 => {}
        _ => return Err(items[1].unsupported(ctx, "more than one data source")),
    }
    let item = &items[0];
    if let Value::Str(s) = &item.node.value {
        return Err(item.unsupported(
            ctx,
            format!("dataset `{s}` (a file or Hugging Face dataset)"),
        ));
    }
    let mut m = item.map(ctx)?;
    if let Some(k) = m.get_any(&["kind", "type"]) {
        let kind = k.str(ctx)?;
        if kind != "synthetic_text" {
            return Err(k.unsupported(ctx, format!("data kind `{kind}`")));
        }
    }
    let data = synthetic(ctx, &mut m, samples)?;
    m.finish(ctx, &[]);
    Ok(DataSpec::SyntheticText(data))
}

/// The synthetic_text keys, shared by every dialect.
fn synthetic(
    ctx: &mut Ctx,
    m: &mut MapReader<'_>,
    samples: Option<u64>,
) -> Result<SyntheticText, WorkloadError> {
    let prompt = lengths(ctx, m, "prompt_tokens")?.ok_or_else(|| {
        ctx.missing(
            &join(&m.path, "prompt_tokens"),
            m.line,
            "synthetic data needs the prompt length",
        )
    })?;
    let output = lengths(ctx, m, "output_tokens")?;
    let turns = m
        .get("turns")
        .map(|f| f.positive_u32(ctx))
        .transpose()?
        .unwrap_or(1);
    let samples = match m.get("samples") {
        Some(f) => f.positive_u64(ctx)?,
        None => samples.unwrap_or(DEFAULT_SAMPLES),
    };
    let mut prefix_buckets = Vec::new();
    if let Some(f) = m.get("prefix_buckets") {
        for b in f.seq(ctx)? {
            let mut bm = b.map(ctx)?;
            let prefix_tokens = bm
                .require(ctx, "prefix_tokens", "a prefix bucket has `prefix_tokens`")?
                .u64(ctx)?;
            let prefix_count = bm
                .get("prefix_count")
                .map(|f| f.positive_u64(ctx))
                .transpose()?
                .unwrap_or(1);
            let bucket_weight = bm
                .get("bucket_weight")
                .map(|f| f.positive_u64(ctx))
                .transpose()?
                .unwrap_or(100);
            bm.finish(ctx, &[]);
            prefix_buckets.push(PrefixBucket {
                prefix_tokens,
                prefix_count,
                bucket_weight,
            });
        }
    }
    // ≤ v0.6: one prefix of `prefix_tokens`, shared by `prefix_count` groups.
    if let Some(f) = m.get("prefix_tokens") {
        let prefix_tokens = f.u64(ctx)?;
        let prefix_count = m
            .get("prefix_count")
            .map(|f| f.positive_u64(ctx))
            .transpose()?
            .unwrap_or(1);
        if prefix_tokens > 0 {
            prefix_buckets.push(PrefixBucket {
                prefix_tokens,
                prefix_count,
                bucket_weight: 100,
            });
        }
    }
    m.ignore(ctx, "source", "llmbench generates its own synthetic text");
    for key in ["tool_call_turns", "tools"] {
        if let Some(f) = m.get(key) {
            return Err(f.unsupported(ctx, "synthetic tool-call turns"));
        }
    }
    Ok(SyntheticText {
        prompt,
        output,
        turns,
        prefix_buckets,
        samples,
    })
}

/// `<name>`, `<name>_stdev`, `<name>_min`, `<name>_max` as guidellm's `IntegerRangeSampler`
/// reads them (`src/guidellm/utils/random.py`): without a stdev, min and max default to the
/// average and the draw is uniform in [min, max]; with one, min defaults to
/// max(1, avg − 5·stdev), max to avg + 5·stdev, and the draw is a clipped normal.
fn lengths(
    ctx: &mut Ctx,
    m: &mut MapReader<'_>,
    name: &str,
) -> Result<Option<TokenLengths>, WorkloadError> {
    let Some(avg_field) = m.get(name) else {
        for suffix in ["_stdev", "_min", "_max"] {
            if let Some(f) = m.get(&format!("{name}{suffix}")) {
                return Err(ctx.missing(
                    &join(&m.path, name),
                    f.line,
                    format!("`{name}{suffix}` is set, so the average `{name}` is needed too"),
                ));
            }
        }
        return Ok(None);
    };
    let avg = avg_field.u64(ctx)?;
    let stdev = m
        .get(&format!("{name}_stdev"))
        .map(|f| f.u64(ctx))
        .transpose()?
        .filter(|s| *s > 0);
    let min = m
        .get(&format!("{name}_min"))
        .map(|f| f.u64(ctx))
        .transpose()?;
    let max = m
        .get(&format!("{name}_max"))
        .map(|f| f.u64(ctx))
        .transpose()?;
    let calc_min = min.unwrap_or(match stdev {
        Some(s) => avg.saturating_sub(s.saturating_mul(5)).max(1),
        None => avg.max(1),
    });
    let calc_max = max.unwrap_or(match stdev {
        Some(s) => avg.saturating_add(s.saturating_mul(5)),
        None => avg,
    });
    if calc_min > calc_max {
        return Err(avg_field.invalid(
            ctx,
            format!("the length range [{calc_min}, {calc_max}] is empty"),
        ));
    }
    let shape = if calc_min == calc_max {
        LengthShape::Fixed(calc_min)
    } else {
        match stdev {
            None => LengthShape::Uniform {
                min: calc_min,
                max: calc_max,
            },
            Some(s) => LengthShape::Normal {
                mean: avg as f64,
                spread: Spread::StdDev(s as f64),
                min: calc_min,
                max: calc_max,
            },
        }
    };
    Ok(Some(TokenLengths {
        shape,
        total_count: None,
    }))
}

/// Dialects A and B: a flat map; `-` and `_` are interchangeable in keys (as in v0.4–v0.6).
fn parse_flat(
    ctx: &mut Ctx,
    doc: &Node,
    options: &ParseOptions,
) -> Result<Workload, WorkloadError> {
    let Some(entries) = doc.entries() else {
        return Err(ctx.wrong_type("(document root)", doc, "a map of settings"));
    };
    let normalized: Vec<(Key, Node)> = entries
        .iter()
        .map(|(k, v)| {
            (
                Key {
                    name: k.name.replace('-', "_"),
                    line: k.line,
                },
                v.clone(),
            )
        })
        .collect();
    let mut m = MapReader::new(&normalized, "", doc.line);
    let mut workload = Workload::empty(Harness::Guidellm, Dialect::GuidellmFlat);
    workload.api.streaming = true;

    workload.api.base_url = Some(
        m.require(ctx, "target", "the server's URL")?
            .str(ctx)?
            .to_string(),
    );
    if let Some(f) = m.get("model") {
        workload.api.model = Some(f.str(ctx)?.to_string());
    }
    if let Some(f) = m.get_any(&["backend_type", "backend"]) {
        let kind = f.str(ctx)?;
        if kind != "openai_http" {
            return Err(f.unsupported(ctx, format!("backend `{kind}`")));
        }
    }
    if let Some(f) = m.get("request_type") {
        let (kind, path) = request_format(ctx, &f)?;
        workload.api.kind = kind;
        workload.api.endpoint = path;
    }
    if let Some(f) = m.get("processor") {
        workload.tokenizer = Some(TokenizerSpec {
            name_or_path: f.str(ctx)?.to_string(),
            token: None,
            trust_remote_code: false,
        });
    }
    for key in [
        "backend_args",
        "processor_args",
        "data_args",
        "data_sampler",
        "output_path",
        "output_sampling",
    ] {
        m.ignore(ctx, key, "not used by llmbench");
    }

    let data_field = m.require(
        ctx,
        "data",
        "the data source (e.g. `prompt_tokens=256,output_tokens=128`)",
    )?;
    let data = flat_data(ctx, &data_field)?;
    workload.api.ignore_eos = data.output.is_some();
    workload.data = DataSpec::SyntheticText(data);

    let mut limit = StageLimit::default();
    if let Some(f) = m.get("max_seconds") {
        f.positive_f64(ctx)?;
        limit.duration = Some(f.seconds(ctx)?);
    }
    if let Some(f) = m.get("max_requests") {
        limit.requests = Some(f.positive_u64(ctx)?);
    }
    if let Some(f) = m.get_any(&["max_errors", "max_error"]) {
        limit.max_errors = Some(ErrorLimit {
            limit: f.positive_u64(ctx)?,
            scope: StopScope::Stage,
        });
    }
    if let Some(f) = m.get("max_error_rate") {
        limit.max_error_rate = Some(ErrorLimit {
            limit: WindowedErrorRate {
                rate: error_rate(ctx, &f)?,
                window: GUIDELLM_ERROR_WINDOW,
            },
            scope: StopScope::Stage,
        });
    }
    if let Some(f) = m.get("max_global_error_rate") {
        limit.max_global_error_rate = Some(ErrorLimit {
            limit: GlobalErrorRate {
                rate: error_rate(ctx, &f)?,
                minimum: GUIDELLM_ERROR_MIN_PROCESSED,
            },
            scope: StopScope::Stage,
        });
    }
    // ≤ v0.3: `warmup_percent` / `cooldown_percent`, fractions in (0, 1]; v0.4–v0.6: `warmup` / `cooldown`.
    let mut transients = [None, None];
    for (slot, (old, new)) in transients.iter_mut().zip([
        ("warmup_percent", "warmup"),
        ("cooldown_percent", "cooldown"),
    ]) {
        if let Some(f) = m.get(old) {
            let v = f.positive_f64(ctx)?;
            if v > 1.0 {
                return Err(f.invalid(ctx, format!("a fraction of the stage in (0, 1], found {v}")));
            }
            *slot = Some(Transient::GuidellmFraction(v));
        }
        if let Some(f) = m.get(new) {
            *slot = transient_phase(ctx, &f)?;
        }
    }
    match m.get("random_seed") {
        Some(f) => {
            workload.seed = f.u64(ctx)?;
            workload.seed_origin = SeedOrigin::Profile;
        }
        None => set_default_seed(&mut workload, options, DEFAULT_SEED),
    }

    let kind_field = m.get_any(&["profile", "rate_type"]).ok_or_else(|| {
        ctx.missing("profile", 0, "the load (`profile` or `rate-type`: synchronous, concurrent, throughput, constant, poisson, sweep)")
    })?;
    let kind = kind_field.str(ctx)?;
    workload.stages = profile_stages(ctx, &mut m, &kind_field, kind, &limit, true)?;
    for stage in &mut workload.stages {
        [stage.warmup, stage.cooldown] = transients;
    }
    m.finish(ctx, &[]);
    Ok(workload)
}

/// Flat `data`: a map, a JSON object string, or `key=value,...`; anything else names a
/// dataset, which llmbench does not download.
fn flat_data(ctx: &mut Ctx, f: &At<'_>) -> Result<SyntheticText, WorkloadError> {
    let node = match &f.node.value {
        Value::Map(_) => f.node.clone(),
        Value::Str(s) => match string_data(s, f.line) {
            Some(node) => node,
            None => {
                return Err(f.unsupported(
                    ctx,
                    format!("dataset `{s}` (a file or Hugging Face dataset)"),
                ));
            }
        },
        _ => return Err(ctx.wrong_type(&f.path, f.node, "a map or a `key=value,...` string")),
    };
    let at = At::new(&node, f.path.clone(), f.line);
    let mut m = at.map(ctx)?;
    let data = synthetic(ctx, &mut m, None)?;
    m.finish(ctx, &[]);
    Ok(data)
}

/// `prompt_tokens=256,output_tokens=128` or `{"prompt_tokens": 256}` as a map node.
fn string_data(s: &str, line: u32) -> Option<Node> {
    let trimmed = s.trim();
    if trimmed.starts_with('{') {
        let json: serde_json::Value = serde_json::from_str(trimmed).ok()?;
        let obj = json.as_object()?;
        let entries = obj
            .iter()
            .map(|(k, v)| {
                let value = match v {
                    serde_json::Value::Number(n) => n
                        .as_i64()
                        .map(Value::Int)
                        .or_else(|| n.as_f64().map(Value::Float))?,
                    serde_json::Value::String(s) => Value::Str(s.clone()),
                    serde_json::Value::Bool(b) => Value::Bool(*b),
                    serde_json::Value::Null => Value::Null,
                    _ => return None,
                };
                Some((
                    Key {
                        name: k.clone(),
                        line,
                    },
                    Node::new(value, line),
                ))
            })
            .collect::<Option<Vec<_>>>()?;
        return Some(Node::new(Value::Map(entries), line));
    }
    if !trimmed.contains('=') {
        return None;
    }
    let mut entries = Vec::new();
    for part in trimmed.split(',').filter(|p| !p.trim().is_empty()) {
        let (k, v) = part.split_once('=')?;
        let v = v.trim();
        let value = v
            .parse::<i64>()
            .map(Value::Int)
            .or_else(|_| v.parse::<f64>().map(Value::Float))
            .unwrap_or_else(|_| Value::Str(v.to_string()));
        entries.push((
            Key {
                name: k.trim().replace('-', "_"),
                line,
            },
            Node::new(value, line),
        ));
    }
    Some(Node::new(Value::Map(entries), line))
}

/// Sets a dotted path (`profile.streams`, `constraints[0].count`, `constraints.0.count`) in a
/// copy of `spec`. Missing map keys are created; list indexes must exist.
fn set_path(root: &mut Node, path: &str, value: Node, line: u32) -> Result<(), String> {
    let mut segments: Vec<Segment> = Vec::new();
    for part in path.split('.') {
        let (name, mut rest) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if name.is_empty() && rest.is_empty() {
            return Err(format!("`{path}` has an empty segment"));
        }
        if !name.is_empty() {
            match name.parse::<usize>() {
                Ok(i) => segments.push(Segment::Index(i)),
                Err(_) => segments.push(Segment::Key(name.to_string())),
            }
        }
        while let Some(stripped) = rest.strip_prefix('[') {
            let end = stripped
                .find(']')
                .ok_or_else(|| format!("`{path}`: unclosed `[`"))?;
            let index = stripped[..end]
                .trim()
                .parse::<usize>()
                .map_err(|_| format!("`{path}`: `{}` is not a list index", &stripped[..end]))?;
            segments.push(Segment::Index(index));
            rest = &stripped[end + 1..];
        }
        if !rest.is_empty() {
            return Err(format!("`{path}`: unexpected `{rest}`"));
        }
    }
    let mut node = root;
    for (i, seg) in segments.iter().enumerate() {
        let last = i + 1 == segments.len();
        if matches!(seg, Segment::Key(_)) && node.is_null() {
            node.value = Value::Map(Vec::new());
        }
        node = match (seg, &mut node.value) {
            (Segment::Key(k), Value::Map(entries)) => {
                let pos = match entries.iter().position(|(key, _)| key.name == *k) {
                    Some(pos) => pos,
                    None => {
                        entries.push((
                            Key {
                                name: k.clone(),
                                line,
                            },
                            Node::new(Value::Map(Vec::new()), line),
                        ));
                        entries.len() - 1
                    }
                };
                &mut entries[pos].1
            }
            (Segment::Index(idx), Value::Seq(items)) => {
                let len = items.len();
                items.get_mut(*idx).ok_or_else(|| {
                    format!("`{path}`: index {idx} is out of range (the list has {len})")
                })?
            }
            (seg, other) => {
                return Err(format!(
                    "`{path}`: cannot apply `{}` to {}",
                    seg.describe(),
                    other.describe()
                ));
            }
        };
        if last {
            *node = value;
            return Ok(());
        }
    }
    Err(format!("`{path}` is empty"))
}

enum Segment {
    Key(String),
    Index(usize),
}

impl Segment {
    fn describe(&self) -> String {
        match self {
            Segment::Key(k) => format!("key `{k}`"),
            Segment::Index(i) => format!("index [{i}]"),
        }
    }
}
