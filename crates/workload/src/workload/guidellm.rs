//! guidellm scenarios → `Workload`: the v0.7 `spec:` format with `benchmarks[]` (dialect C) and
//! the older flat format with hyphenated or underscored keys (dialects A and B, FORMATS 1.4).
//!
//! Each `benchmarks[]` entry is a map of dotted paths relative to `spec` (`profile.streams`,
//! `constraints[0].count`); it is applied to a copy of `spec`, and the result is parsed like a
//! scenario of its own, so the base `spec` may be incomplete (multi-turn's `max_requests`
//! without `count`, `concurrent` without `streams`) as long as every entry completes it.

use std::time::Duration;

use super::ParseOptions;
use super::error::{WarningKind, WorkloadError};
use super::guidellm_replay;
use super::inference_perf::{set_default_seed, string_map};
use super::limits::{self, Limit};
use super::model::*;
use super::reader::{At, Ctx, MapReader, join};
use super::yaml::{Key, Node, Value};

/// guidellm's `settings.max_concurrency`, the stream count of `throughput` without a cap.
const DEFAULT_MAX_CONCURRENCY: u32 = 10240;
/// The `max_concurrency` of guidellm's `sweep` profile (`SweepProfileArgs`, v0.7), for its throughput and rate
/// stages; before v0.7 a sweep left it unset and guidellm's `settings.max_concurrency`, also 512, applied.
const SWEEP_MAX_CONCURRENCY: u32 = 512;
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
    let mut workload = if doc.get("spec").is_some() {
        parse_scenario(ctx, doc, options)?
    } else {
        parse_flat(ctx, doc, options)?
    };
    if workload.api.kind == ApiKind::Embeddings {
        embeddings_only_text(ctx, &mut workload)?;
    }
    Ok(workload)
}

/// `EmbeddingsRequestHandler` (request_handlers.py at ee7a774) never streams (`arguments.stream = False`) and
/// sends only the request's text column: no history and no prefix column, which llmbench would otherwise send.
fn embeddings_only_text(ctx: &Ctx, workload: &mut Workload) -> Result<(), WorkloadError> {
    workload.api.streaming = false;
    if let DataSpec::SyntheticText(text) = &workload.data {
        let dropped = if text.turns > 1 {
            Some("turns > 1")
        } else if !text.prefix_buckets.is_empty() {
            Some("prefix_tokens")
        } else {
            None
        };
        if let Some(key) = dropped {
            return Err(ctx.unsupported(
                &format!("data {key}"),
                0,
                format!(
                    "`{key}` over request_format /v1/embeddings (guidellm's embeddings handler sends only each \
                     request's text, leaving the history and the prefix out; drop `{key}`)"
                ),
            ));
        }
    }
    Ok(())
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
    let mut bm = backend.map(ctx)?;
    if let Some(k) = bm.get("kind") {
        let kind = k.str(ctx)?;
        if kind != "openai_http" {
            return Err(k.unsupported(ctx, format!("backend `{kind}`")));
        }
    }
    let mut request_max_tokens = backend_args(ctx, &mut bm, &mut api, &mut timeout, true)?;
    bm.finish(ctx, &[]);
    if let Some(f) = m.get("request_formatter")
        && let Some(n) = request_formatter(ctx, &f, &mut api)?
    {
        request_max_tokens = Some(n);
    }

    let tokenizer = scenario_tokenizer(ctx, &mut m)?;

    let samples = match m.get("data_loader") {
        Some(f) => {
            let mut dl = f.map(ctx)?;
            if let Some(k) = dl.get("kind") {
                let kind = k.str(ctx)?;
                if kind != "pytorch" {
                    return Err(k.unsupported(ctx, format!("data loader `{kind}`")));
                }
            }
            let samples = match dl.get("samples") {
                Some(s) if matches!(s.node.value, Value::Int(-1)) => None,
                Some(s) => Some(s.positive_within(ctx, Limit::Samples)?),
                None => None,
            };
            let shuffle = dl.get("shuffle").filter(|f| !f.is_null());
            dl.ignore(ctx, "num_workers", "data-loading processes");
            dl.finish(ctx, &[]);
            (samples, shuffle)
        }
        None => (None, None),
    };
    let (samples, shuffle) = samples;
    let mappings = column_mapper(ctx, &mut m)?;
    only_default(ctx, &mut m, "data_preprocessors", &["encode_media"])?;
    only_default(ctx, &mut m, "data_finalizer", &["generative"])?;
    let data_field = m.require(ctx, "data", "a scenario needs a `data` source")?;
    let mut data = scenario_data(ctx, &data_field, samples)?;
    file_settings(ctx, &mut data, mappings, samples, shuffle)?;
    apply_request_max_tokens(&mut data, &mut api, request_max_tokens);
    if let Some(f) = m.get("metrics") {
        metrics_args(ctx, &f)?;
    }

    let constraints = match m.get("constraints") {
        Some(f) => constraints(ctx, &f)?,
        None => Constraints::default(),
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
    replay_needs_a_trace(ctx, &data, &stages, &kind_field, &data_field)?;
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
    for key in ["outputs", "output"] {
        m.ignore(
            ctx,
            key,
            "guidellm's output files; llmbench writes its results (benchmarks.json included) to --output",
        );
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

/// The OpenAI HTTP backend's arguments (`OpenAIHTTPBackendArgs` in v0.7, the backend's constructor and
/// `backend_kwargs` in v0.4–v0.6). Returns `max_tokens` when the backend sets one for requests whose data gives
/// no output length. `with_target`: the target is required here (v0.7 `spec.backend`); flat scenarios give it at
/// the top level.
fn backend_args(
    ctx: &mut Ctx,
    b: &mut MapReader<'_>,
    api: &mut Api,
    timeout: &mut Option<Duration>,
    with_target: bool,
) -> Result<Option<u64>, WorkloadError> {
    let target = if with_target {
        Some(b.require(ctx, "target", "the server's URL")?)
    } else {
        b.get("target")
    };
    if let Some(f) = target {
        api.base_url = Some(guidellm_target(f.str(ctx)?));
    }
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
        // Not a guidellm backend argument (v0.7 refuses it; headers go in `extras.headers`), but an explicit
        // wish for headers that llmbench can honour.
        api.headers = string_map(ctx, &f)?;
    }
    if let Some(f) = b.get("stream") {
        api.streaming = f.bool(ctx)?;
    }
    if let Some(f) = b.get("timeout") {
        *timeout = Some(f.positive_seconds(ctx)?);
    }
    let max_tokens = match b.get_any(&["max_tokens", "max_completion_tokens", "max_output_tokens"])
    {
        Some(f) => Some(f.positive_within(ctx, Limit::Tokens)?),
        None => None,
    };
    if let Some(f) = b.get("extras") {
        extras(ctx, &f, api)?;
    }
    // v0.3's backend sends these as OpenAI's organization and project headers.
    for (key, header) in [
        ("organization", "OpenAI-Organization"),
        ("project", "OpenAI-Project"),
    ] {
        if let Some(f) = b.get(key) {
            api.headers
                .push((header.to_string(), f.str(ctx)?.to_string()));
        }
    }
    for key in ["extra_query", "extra_body"] {
        if let Some(f) = b.get(key) {
            return Err(f.unsupported(ctx, format!("extra request arguments (`{key}`)")));
        }
    }
    if let Some(f) = b.get("api_routes") {
        // Merged over the default routes: only a route for the request format in use matters.
        let routes = string_map(ctx, &f)?;
        let format = api.path().to_string();
        if let Some((_, route)) = routes.iter().find(|(k, _)| *k == format) {
            let route = if route.starts_with('/') {
                route.clone()
            } else {
                format!("/{route}")
            };
            api.endpoint = Some(route);
        }
    }
    if let Some(f) = b.get("request_handlers") {
        return Err(f.unsupported(ctx, "custom request handlers (`request_handlers`)"));
    }
    for key in ["server_history", "multiturn_reasoning"] {
        if let Some(f) = b.get(key) {
            let on = match &f.node.value {
                Value::Bool(b) => *b,
                Value::Str(s) => !s.is_empty() && !s.eq_ignore_ascii_case("false"),
                _ => true,
            };
            if on {
                return Err(f.unsupported(
                    ctx,
                    format!("`{key}` (server-side or reasoning-carrying conversation history)"),
                ));
            }
        }
    }
    b.ignore(
        ctx,
        "timeout_connect",
        "only bounds connecting; a request that cannot connect fails either way",
    );
    b.ignore(
        ctx,
        "http2",
        "guidellm speaks HTTP/2 only over TLS (httpx negotiates it by ALPN); over http:// both send HTTP/1.1",
    );
    b.ignore(
        ctx,
        "follow_redirects",
        "an OpenAI endpoint does not redirect",
    );
    b.ignore(
        ctx,
        "verify",
        "TLS certificate checks; llmbench always verifies certificates on https endpoints",
    );
    b.ignore(
        ctx,
        "validate_backend",
        "guidellm's health check before the run; it is not measured",
    );
    b.ignore(
        ctx,
        "tool_call_missing_behavior",
        "only used with tool calls, which llmbench refuses",
    );
    Ok(max_tokens)
}

/// guidellm's `strip_target`: trailing slashes and a trailing `/v1` are removed, since the request paths carry
/// `/v1` themselves.
fn guidellm_target(target: &str) -> String {
    let trimmed = target.trim_end_matches('/');
    trimmed.strip_suffix("/v1").unwrap_or(trimmed).to_string()
}

/// `extras` (`GenerationRequestArguments`): extra request headers are honoured; anything that changes the
/// request body or its method is refused.
fn extras(ctx: &mut Ctx, f: &At<'_>, api: &mut Api) -> Result<(), WorkloadError> {
    let mut m = f.map(ctx)?;
    if let Some(h) = m.get("headers") {
        api.headers.extend(string_map(ctx, &h)?);
    }
    if let Some(s) = m.get("stream") {
        api.streaming = s.bool(ctx)?;
    }
    if let Some(b) = m.get("body") {
        // `GenerationRequestArguments.model_combine`: the body's fields go over guidellm's model, stream and
        // token fields; the prompt or messages guidellm writes after them.
        let value = b.node.to_json();
        let serde_json::Value::Object(fields) = value else {
            return Err(ctx.wrong_type(&b.path, b.node, "a map of request body fields"));
        };
        for (name, value) in fields {
            if matches!(
                name.as_str(),
                "prompt" | "messages" | "model" | "stream" | "stream_options"
            ) {
                return Err(b.unsupported(
                    ctx,
                    format!(
                        "`extras.body.{name}` (llmbench builds it and measures by it: the profile's data, model and \
                         `stream` set it)"
                    ),
                ));
            }
            api.extra_body.insert(name, value);
        }
    }
    if let Some(p) = m.get("params") {
        api.query.extend(query_params(ctx, &p)?);
    }
    for key in ["method", "files", "content"] {
        if let Some(x) = m.get(key) {
            return Err(x.unsupported(ctx, format!("extra request arguments (`extras.{key}`)")));
        }
    }
    m.finish(ctx, &[]);
    Ok(())
}

/// `extras.params`: the query parameters httpx sends (`QueryParams`: a list value repeats its name; `True`,
/// `False` and `None` as `true`, `false` and nothing; numbers as Python writes them).
fn query_params(ctx: &mut Ctx, f: &At<'_>) -> Result<Vec<(String, String)>, WorkloadError> {
    let serde_json::Value::Object(params) = f.node.to_json() else {
        return Err(ctx.wrong_type(&f.path, f.node, "a map of query parameters"));
    };
    let text = |name: &str, v: &serde_json::Value| -> Result<String, WorkloadError> {
        Ok(match v {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Bool(b) => b.to_string(),
            serde_json::Value::Null => String::new(),
            serde_json::Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
                (Some(i), _, _) => i.to_string(),
                (_, Some(u), _) => u.to_string(),
                // Python's repr of a float: `1.0` for a whole one; Rust's shortest round trip matches it between
                // 1e-4 and 1e16, where Python writes no exponent.
                (_, _, Some(x)) if x.fract() == 0.0 && x.abs() < 1e16 => format!("{x:.1}"),
                (_, _, Some(x)) if (1e-4..1e16).contains(&x.abs()) => x.to_string(),
                _ => {
                    return Err(f.invalid(
                        ctx,
                        format!(
                            "`{name}`: {n} is written with an exponent by Python; give it as text (in quotes)"
                        ),
                    ));
                }
            },
            serde_json::Value::Array(_) | serde_json::Value::Object(_) => {
                return Err(f.invalid(
                    ctx,
                    format!("`{name}`: a query parameter is text, a number, true/false or a list of them"),
                ));
            }
        })
    };
    let mut pairs = Vec::new();
    for (name, value) in &params {
        match value {
            serde_json::Value::Array(items) => {
                for item in items {
                    pairs.push((name.clone(), text(name, item)?));
                }
            }
            other => pairs.push((name.clone(), text(name, other)?)),
        }
    }
    Ok(pairs)
}

/// `/v1/completions`, `/v1/chat/completions`, `/v1/responses` (`ResponsesRequestHandler`), or the ≤ v0.6 names.
fn request_format(ctx: &Ctx, f: &At<'_>) -> Result<(ApiKind, Option<String>), WorkloadError> {
    match f.str(ctx)? {
        "/v1/completions" => Ok((ApiKind::Completion, Some("/v1/completions".into()))),
        "/v1/chat/completions" => Ok((ApiKind::Chat, Some("/v1/chat/completions".into()))),
        "text_completions" => Ok((ApiKind::Completion, None)),
        "chat_completions" => Ok((ApiKind::Chat, None)),
        "/v1/responses" => Ok((ApiKind::Responses, Some("/v1/responses".into()))),
        "/v1/embeddings" => Ok((ApiKind::Embeddings, Some("/v1/embeddings".into()))),
        "/pooling" => Err(f.unsupported(
            ctx,
            "request format `/pooling` (`PoolingRequestHandler` sends each row's `pooling_column`, a dataset's own \
             pooling `data`, which llmbench's data has none of)",
        )),
        other @ ("/v1/audio/transcriptions"
        | "/v1/audio/translations"
        | "audio_transcriptions"
        | "audio_translations") => Err(f.unsupported(
            ctx,
            format!("request format `{other}` (llmbench sends no audio)"),
        )),
        other => Err(f.invalid(
            ctx,
            format!(
                "unknown request format `{other}`; guidellm takes /v1/completions, /v1/chat/completions (or \
                 text_completions, chat_completions), /v1/responses, /v1/embeddings, the audio routes or /pooling"
            ),
        )),
    }
}

/// guidellm v0.4–v0.6 `data_request_formatter` (aliases `request_type`, `request-type`): a formatter name, or a
/// map of the name (`request_type`) and the formatter's arguments (`stream`, `max_tokens`,
/// `max_completion_tokens`, `extras`, `encode_kwargs`). Returns the formatter's `max_tokens`, which applies to
/// requests whose data gives no output length.
fn request_formatter(
    ctx: &mut Ctx,
    f: &At<'_>,
    api: &mut Api,
) -> Result<Option<u64>, WorkloadError> {
    if !matches!(f.node.value, Value::Map(_)) {
        let (kind, path) = request_format(ctx, f)?;
        api.kind = kind;
        api.endpoint = path;
        return Ok(None);
    }
    let mut m = f.map(ctx)?;
    if let Some(t) = m.get("request_type") {
        let (kind, path) = request_format(ctx, &t)?;
        api.kind = kind;
        api.endpoint = path;
    }
    if let Some(s) = m.get("stream") {
        api.streaming = s.bool(ctx)?;
    }
    let max_tokens = match m.get_any(&["max_tokens", "max_completion_tokens"]) {
        Some(n) => Some(n.positive_within(ctx, Limit::Tokens)?),
        None => None,
    };
    if let Some(x) = m.get("extras") {
        extras(ctx, &x, api)?;
    }
    m.ignore(
        ctx,
        "encode_kwargs",
        "how guidellm encodes images, audio and video; synthetic text has none",
    );
    m.finish(ctx, &[]);
    Ok(max_tokens)
}

/// A backend or formatter `max_tokens` is sent when the data gives no output length (without `ignore_eos`, which
/// guidellm adds only for lengths from the data).
fn apply_request_max_tokens(data: &mut DataSpec, api: &mut Api, max_tokens: Option<u64>) {
    if let DataSpec::GuidellmFile(file) = data {
        // The rows decide `ignore_eos` when the prompts are built (`prompts::asks_exact_lengths`).
        file.default_max_tokens = max_tokens;
    }
    if let DataSpec::GuidellmTrace(_) = data {
        // Every trace row has an output count (a zero one is refused when the trace is read): guidellm sends
        // `ignore_eos` with its `max_tokens`.
        api.ignore_eos = true;
    }
    if let DataSpec::SyntheticText(s) = data {
        // guidellm sends `ignore_eos` with `max_tokens` for synthetic data with output lengths.
        api.ignore_eos = s.output.is_some();
        if s.output.is_none() {
            s.output = max_tokens.map(TokenLengths::fixed);
        }
    }
}

/// v0.7 `spec.tokenizer {kind: huggingface_auto | hf_auto, model, load_kwargs}`, or the older `processor`.
fn scenario_tokenizer(
    ctx: &mut Ctx,
    m: &mut MapReader<'_>,
) -> Result<Option<TokenizerSpec>, WorkloadError> {
    let mut name = match m.get("processor") {
        Some(f) => Some(f.str(ctx)?.to_string()),
        None => None,
    };
    m.ignore(
        ctx,
        "processor_args",
        "arguments for loading the tokenizer (revision, cache); llmbench loads the named tokenizer.json",
    );
    if let Some(f) = m.get("tokenizer") {
        let mut t = f.map(ctx)?;
        if let Some(k) = t.get("kind") {
            let kind = k.str(ctx)?;
            if kind != "huggingface_auto" && kind != "hf_auto" {
                return Err(k.unsupported(ctx, format!("tokenizer kind `{kind}`")));
            }
        }
        if let Some(n) = t.get("model") {
            name = Some(n.str(ctx)?.to_string());
        }
        t.ignore(
            ctx,
            "load_kwargs",
            "arguments for loading the tokenizer (revision, cache); llmbench loads the named tokenizer.json",
        );
        t.finish(ctx, &[]);
    }
    Ok(name.map(|name_or_path| TokenizerSpec {
        name_or_path,
        token: None,
        trust_remote_code: false,
    }))
}

/// v0.7 `spec.metrics {kind: generative, sample_size, prefer_response_metrics}`.
fn metrics_args(ctx: &mut Ctx, f: &At<'_>) -> Result<(), WorkloadError> {
    let mut m = f.map(ctx)?;
    if let Some(k) = m.get("kind") {
        let kind = k.str(ctx)?;
        if kind != "generative" {
            return Err(k.unsupported(ctx, format!("metrics kind `{kind}`")));
        }
    }
    sample_size(ctx, &mut m, "sample_size");
    prefer_response_metrics(ctx, &mut m)?;
    m.finish(ctx, &[]);
    Ok(())
}

/// `sample_size` / `sample_requests`: how many requests guidellm keeps in full in its report file; every
/// statistic is computed over all of them either way.
fn sample_size(ctx: &mut Ctx, m: &mut MapReader<'_>, key: &str) {
    m.ignore(
        ctx,
        key,
        "how many requests guidellm lists in full in its report; statistics cover every request either way, \
         and llmbench keeps every request in requests.jsonl",
    );
}

/// `prefer_response_metrics` (default true): token counts from the server's `usage` rather than counted
/// locally. llmbench always prefers the server's counts, so only `true` is what it does.
fn prefer_response_metrics(ctx: &mut Ctx, m: &mut MapReader<'_>) -> Result<(), WorkloadError> {
    if let Some(f) = m.get("prefer_response_metrics")
        && !f.bool(ctx)?
    {
        return Err(f.unsupported(
                ctx,
                "counting tokens locally instead of taking the server's `usage` (`prefer_response_metrics: \
                 false`)",
            ));
    }
    Ok(())
}

/// A pipeline stage llmbench runs only in its default form: the default name, `{kind: <default>}`, or a list of
/// those; anything else (a custom column mapping, extra preprocessors) changes the requests and is refused.
fn only_default(
    ctx: &mut Ctx,
    m: &mut MapReader<'_>,
    key: &str,
    defaults: &[&str],
) -> Result<(), WorkloadError> {
    let Some(f) = m.get(key) else {
        return Ok(());
    };
    let items = match &f.node.value {
        Value::Seq(items) => items.iter().collect::<Vec<_>>(),
        _ => vec![f.node],
    };
    for node in items {
        let name = match &node.value {
            Value::Str(s) => Some(s.as_str()),
            Value::Map(entries) if entries.len() == 1 && entries[0].0.name == "kind" => entries[0]
                .1
                .scalar_text()
                .and_then(|_| match &entries[0].1.value {
                    Value::Str(s) => Some(s.as_str()),
                    _ => None,
                }),
            _ => None,
        };
        if !name.is_some_and(|n| defaults.contains(&n)) {
            return Err(f.unsupported(
                ctx,
                format!(
                    "a `{key}` other than guidellm's default ({}), which changes how the data becomes requests,",
                    defaults.join(", ")
                ),
            ));
        }
    }
    Ok(())
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

/// A v0.7 scenario's constraints. Every figure may be a list: the i-th stage a profile runs (its i-th rate or
/// stream count) takes item `min(i, len − 1)` (`MaxNumberConstraint`, `current_index`).
#[derive(Debug, Clone, Default, PartialEq)]
struct Constraints {
    duration: Vec<Duration>,
    requests: Vec<u64>,
    max_errors: Option<(Vec<u64>, StopScope)>,
    max_error_rate: Option<(Vec<f64>, u64, StopScope)>,
    max_global_error_rate: Option<(Vec<f64>, u64, StopScope)>,
    over_saturation: Option<super::over_saturation::OverSaturation>,
}

fn pick<T: Copy>(values: &[T], i: usize) -> Option<T> {
    values.get(i.min(values.len().saturating_sub(1))).copied()
}

impl Constraints {
    /// The limits of the profile's `i`-th stage.
    fn at(&self, i: usize) -> StageLimit {
        StageLimit {
            duration: pick(&self.duration, i),
            requests: pick(&self.requests, i),
            max_errors: self.max_errors.as_ref().and_then(|(v, scope)| {
                pick(v, i).map(|limit| ErrorLimit {
                    limit,
                    scope: *scope,
                })
            }),
            max_error_rate: self.max_error_rate.as_ref().and_then(|(v, window, scope)| {
                pick(v, i).map(|rate| ErrorLimit {
                    limit: WindowedErrorRate {
                        rate,
                        window: *window,
                    },
                    scope: *scope,
                })
            }),
            max_global_error_rate: self.max_global_error_rate.as_ref().and_then(
                |(v, minimum, scope)| {
                    pick(v, i).map(|rate| ErrorLimit {
                        limit: GlobalErrorRate {
                            rate,
                            minimum: *minimum,
                        },
                        scope: *scope,
                    })
                },
            ),
            over_saturation: self.over_saturation,
            failed_request_threshold: None,
        }
    }

    /// The longest list of any figure.
    fn longest(&self) -> usize {
        [
            self.duration.len(),
            self.requests.len(),
            self.max_errors.as_ref().map_or(0, |(v, _)| v.len()),
            self.max_error_rate.as_ref().map_or(0, |(v, _, _)| v.len()),
            self.max_global_error_rate
                .as_ref()
                .map_or(0, |(v, _, _)| v.len()),
        ]
        .into_iter()
        .max()
        .unwrap_or(0)
    }

    fn has_stop(&self) -> bool {
        !self.duration.is_empty() || !self.requests.is_empty()
    }

    /// Flat scenarios' single figures.
    fn from_limit(limit: &StageLimit) -> Self {
        Constraints {
            duration: limit.duration.into_iter().collect(),
            requests: limit.requests.into_iter().collect(),
            max_errors: limit.max_errors.map(|e| (vec![e.limit], e.scope)),
            max_error_rate: limit
                .max_error_rate
                .map(|e| (vec![e.limit.rate], e.limit.window, e.scope)),
            max_global_error_rate: limit
                .max_global_error_rate
                .map(|e| (vec![e.limit.rate], e.limit.minimum, e.scope)),
            over_saturation: limit.over_saturation,
        }
    }
}

/// A constraint figure: a number or a non-empty list of numbers.
fn figures<'n>(ctx: &Ctx, f: &At<'n>) -> Result<Vec<At<'n>>, WorkloadError> {
    if matches!(f.node.value, Value::Seq(_)) {
        let items = f.stage_list(ctx)?;
        if items.is_empty() {
            return Err(f.invalid(ctx, "the list is empty"));
        }
        Ok(items)
    } else {
        Ok(vec![At::new(f.node, f.path.clone(), f.line)])
    }
}

/// `constraints[]` of a v0.7 scenario.
fn constraints(ctx: &mut Ctx, f: &At<'_>) -> Result<Constraints, WorkloadError> {
    let items = if f.node.entries().is_some() {
        vec![At::new(f.node, f.path.clone(), f.line)]
    } else {
        f.seq(ctx)?
    };
    let mut limit = Constraints::default();
    for item in items {
        let mut c = item.map(ctx)?;
        let kind_field = c.require(ctx, "kind", "each constraint has a `kind`")?;
        match kind_field.str(ctx)? {
            "max_duration" => {
                let s = c.require(ctx, "seconds", "`max_duration` needs `seconds`")?;
                limit.duration = figures(ctx, &s)?
                    .iter()
                    .map(|v| v.positive_seconds(ctx))
                    .collect::<Result<_, _>>()?;
                stage_only_scope(ctx, &mut c, "max_duration")?;
            }
            "max_requests" => {
                let n = c.require(ctx, "count", "`max_requests` needs `count`")?;
                limit.requests = figures(ctx, &n)?
                    .iter()
                    .map(|v| v.requests(ctx))
                    .collect::<Result<_, _>>()?;
                stage_only_scope(ctx, &mut c, "max_requests")?;
            }
            "max_errors" => {
                let n = c.require(ctx, "count", "`max_errors` needs `count`")?;
                let counts = figures(ctx, &n)?
                    .iter()
                    .map(|v| v.requests(ctx))
                    .collect::<Result<_, _>>()?;
                limit.max_errors = Some((counts, stopping_scope(ctx, &mut c)?));
            }
            "max_error_rate" => {
                let r = c.require(ctx, "rate", "`max_error_rate` needs `rate`")?;
                let rates = figures(ctx, &r)?
                    .iter()
                    .map(|v| error_rate(ctx, v))
                    .collect::<Result<_, _>>()?;
                let window = match c.get("window") {
                    Some(w) => w.requests(ctx)?,
                    None => GUIDELLM_ERROR_WINDOW,
                };
                limit.max_error_rate = Some((rates, window, stopping_scope(ctx, &mut c)?));
            }
            "max_global_error_rate" => {
                let r = c.require(ctx, "rate", "`max_global_error_rate` needs `rate`")?;
                let rates = figures(ctx, &r)?
                    .iter()
                    .map(|v| error_rate(ctx, v))
                    .collect::<Result<_, _>>()?;
                let minimum = match c.get("minimum") {
                    Some(w) => w.requests(ctx)?,
                    None => GUIDELLM_ERROR_MIN_PROCESSED,
                };
                limit.max_global_error_rate = Some((rates, minimum, stopping_scope(ctx, &mut c)?));
            }
            "over_saturation" => {
                let scope = stopping_scope(ctx, &mut c)?;
                limit.over_saturation =
                    Some(super::over_saturation::parse_args(ctx, &mut c, scope)?);
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

/// The `stopping_scope` of a duration or request constraint: `current` (guidellm's default) only. With `all`,
/// guidellm ends its rate or stream escalation after the first benchmark that reaches the figure, which llmbench
/// does not do.
fn stage_only_scope(ctx: &mut Ctx, c: &mut MapReader<'_>, kind: &str) -> Result<(), WorkloadError> {
    let Some(f) = c.get("stopping_scope") else {
        return Ok(());
    };
    match f.str(ctx)? {
        "current" => Ok(()),
        "all" => Err(f.unsupported(
            ctx,
            format!(
                "`stopping_scope: all` on `{kind}` (ending every later benchmark once one reaches its limit)"
            ),
        )),
        other => Err(f.invalid(
            ctx,
            format!("unknown stopping_scope `{other}`; expected current or all"),
        )),
    }
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
        let value = m
            .get("value")
            .map(|v| v.non_negative_f64(ctx))
            .transpose()?;
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
        let items = f.stage_list(ctx)?;
        if items.is_empty() {
            return Err(f.invalid(ctx, "the list is empty"));
        }
        Ok(items)
    } else {
        Ok(vec![At::new(f.node, f.path.clone(), f.line)])
    }
}

/// Turns a profile kind and its parameters into stages; the i-th stage takes the constraints' i-th figures.
/// `flat`: the ≤ v0.6 meaning of `rate` (stream count for concurrent, sweep size for sweep).
fn profile_stages(
    ctx: &mut Ctx,
    pm: &mut MapReader<'_>,
    kind_field: &At<'_>,
    kind: &str,
    limits_of: &Constraints,
    flat: bool,
) -> Result<Vec<Stage>, WorkloadError> {
    let max_concurrency_field = pm.get("max_concurrency");
    let max_concurrency = max_concurrency_field
        .as_ref()
        .map(|f| f.concurrency(ctx))
        .transpose()?;
    let rampup = match pm.get_any(&["rampup_duration", "rampup"]) {
        Some(f) => f.seconds(ctx)?,
        None => Duration::ZERO,
    };
    let needs_limit = |ctx: &Ctx| -> Result<(), WorkloadError> {
        if !limits_of.has_stop() {
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
    let closed = |load: LoadKind, concurrency: u32, index: usize| Stage {
        load,
        arrival: Arrival::Closed {
            concurrency,
            rampup,
        },
        limit: limits_of.at(index),
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
            vec![closed(LoadKind::Synchronous, 1, 0)]
        }
        "throughput" => {
            needs_limit(ctx)?;
            if flat {
                pm.skip("rate");
            }
            vec![closed(
                LoadKind::Throughput,
                max_concurrency.unwrap_or(DEFAULT_MAX_CONCURRENCY),
                0,
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
                .enumerate()
                .map(|(i, s)| Ok(closed(LoadKind::Concurrent, s.concurrency(ctx)?, i)))
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
                .enumerate()
                .map(|(i, r)| {
                    let rate = r.rate(ctx)?;
                    let limit = limits_of.at(i);
                    check_arrivals(ctx, r, rate, &limit, kind == "poisson")?;
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
                        limit,
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
                    let f = match scalar_or_list(ctx, &f)?.as_slice() {
                        [one] => At::new(one.node, one.path.clone(), one.line),
                        _ => {
                            return Err(f.invalid(ctx, "a sweep has one size, not a list of them"));
                        }
                    };
                    let n = f.positive_within(ctx, Limit::Stages)?;
                    if n < 2 {
                        return Err(f.invalid(
                            ctx,
                            "a sweep runs synchronous and throughput first, so its size is at least 2",
                        ));
                    }
                    u32::try_from(n).map_err(|_| f.invalid(ctx, format!("{n} is too large")))?
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
            // Synchronous is the sweep's stage 0 and throughput stage 1; the measured rates are stages 2 and
            // on, which llmbench generates from one limit, so their constraint figures must agree.
            if limits_of.longest() > 3 {
                return Err(kind_field.unsupported(
                    ctx,
                    "constraint lists with a different figure for each rate of a sweep (give at most three: \
                     synchronous, throughput, and every measured rate)",
                ));
            }
            let rates_limit = limits_of.at(2);
            let cap = max_concurrency.unwrap_or(SWEEP_MAX_CONCURRENCY);
            vec![
                closed(LoadKind::Synchronous, 1, 0),
                closed(LoadKind::Throughput, cap, 1),
                Stage {
                    load: LoadKind::Sweep,
                    arrival: Arrival::Sweep(Sweep::Guidellm {
                        size,
                        process,
                        limit: rates_limit.clone(),
                        max_concurrency: cap,
                    }),
                    limit: rates_limit,
                    max_concurrency: Some(cap),
                    warmup: None,
                    cooldown: None,
                },
            ]
        }
        "replay" => {
            if let Some(f) = max_concurrency_field {
                return Err(f.invalid(
                    ctx,
                    "not an argument of guidellm's replay profile (`ReplayProfileArgs` takes `time_scale`)",
                ));
            }
            let time_scale = guidellm_replay::time_scale(ctx, pm)?;
            guidellm_replay::warn_rampup(ctx, pm, rampup, kind_field.line);
            vec![Stage {
                load: LoadKind::Trace,
                arrival: Arrival::GuidellmReplay { time_scale },
                limit: limits_of.at(0),
                max_concurrency: None,
                warmup: None,
                cooldown: None,
            }]
        }
        other => {
            return Err(kind_field.invalid(
                ctx,
                format!(
                    "unknown profile `{other}`; expected synchronous, concurrent, throughput, \
                     constant, poisson, sweep or replay"
                ),
            ));
        }
    };
    if stages.len() as u64 > limits::MAX_STAGES {
        return Err(kind_field.invalid(ctx, limits::exceeded(Limit::Stages, stages.len() as f64)));
    }
    Ok(stages)
}

/// The replay profile and trace data go together: guidellm's replay sends rows without a timestamp (synthetic
/// text, data files) all at its start, and runs a trace's rows under another profile ignoring their times; llmbench
/// replays traces only.
fn replay_needs_a_trace(
    ctx: &Ctx,
    data: &DataSpec,
    stages: &[Stage],
    kind_field: &At<'_>,
    data_field: &At<'_>,
) -> Result<(), WorkloadError> {
    let replay = stages
        .iter()
        .any(|s| matches!(s.arrival, Arrival::GuidellmReplay { .. }));
    let trace = matches!(data, DataSpec::GuidellmTrace(_));
    if replay && !trace {
        return Err(kind_field.unsupported(
            ctx,
            "the replay profile over data without timestamps (guidellm would send every request at once; replay \
             a `kind: trace_synthetic` or `kind: mooncake` trace)",
        ));
    }
    if trace && !replay {
        return Err(data_field.unsupported(
            ctx,
            "a trace under a profile other than `replay` (guidellm would leave its rows' times unused)",
        ));
    }
    Ok(())
}

/// A rate stage's send times are all computed before it starts: at most the request limit, else
/// `rate × duration` (with room for a Poisson process's spread).
fn check_arrivals(
    ctx: &Ctx,
    rate_field: &At<'_>,
    rate: f64,
    limit: &StageLimit,
    poisson: bool,
) -> Result<(), WorkloadError> {
    let by_time = limit.duration.map(|d| {
        let mean = rate * d.as_secs_f64();
        if poisson {
            mean + 6.0 * mean.sqrt()
        } else {
            mean
        }
    });
    let expected = match (limit.requests.map(|n| n as f64), by_time) {
        (Some(n), Some(t)) => n.min(t),
        (Some(n), None) => n,
        (None, Some(t)) => t,
        (None, None) => return Ok(()),
    };
    if expected > limits::MAX_ARRIVALS as f64 {
        return Err(rate_field.invalid(
            ctx,
            format!(
                "{rate} requests/s within the stage's limits is about {} requests; {}",
                expected.floor(),
                limits::exceeded(Limit::Arrivals, expected.floor())
            ),
        ));
    }
    Ok(())
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
        // The command line's `--data` forms: `prompt_tokens=256,output_tokens=128` (or JSON), else a path.
        if let Some(node) = string_data(s, item.line) {
            let at = At::new(&node, item.path.clone(), item.line);
            return data_item(ctx, &at, samples);
        }
        return data_path(ctx, item, s, None).map(DataSpec::GuidellmFile);
    }
    data_item(ctx, item, samples)
}

/// One data source written as a map: synthetic text (`kind: synthetic_text` or none), a data file, or a trace.
fn data_item(
    ctx: &mut Ctx,
    item: &At<'_>,
    samples: Option<u64>,
) -> Result<DataSpec, WorkloadError> {
    let mut m = item.map(ctx)?;
    if let Some(k) = m.get_any(&["kind", "type"]) {
        let kind = k.str(ctx)?.to_owned();
        match kind.as_str() {
            "synthetic_text" => {}
            "json_file" | "csv_file" | "text_file" | "parquet_file" => {
                let path_field = m.require(ctx, "path", "a file data source names its `path`")?;
                let path = path_field.str(ctx)?.to_owned();
                if let Some(f) = m.get("load_kwargs")
                    && !f.node.entries().is_some_and(<[_]>::is_empty)
                    && !f.is_null()
                {
                    return Err(
                        f.unsupported(ctx, "Hugging Face loading arguments (`load_kwargs`)")
                    );
                }
                m.finish(ctx, &[]);
                return data_path(ctx, &path_field, &path, Some(&kind)).map(DataSpec::GuidellmFile);
            }
            "trace_synthetic" | "mooncake" => {
                let trace = guidellm_replay::trace_data(ctx, &mut m, kind == "mooncake")?;
                m.finish(ctx, &[]);
                return Ok(DataSpec::GuidellmTrace(trace));
            }
            "weka" => {
                return Err(k.unsupported(
                    ctx,
                    "the `weka` trace format (conversations whose hash-id blocks and offsets restart with each one, \
                     which guidellm itself marks unreliable; llmbench replays `trace_synthetic` and `mooncake` traces)",
                ));
            }
            _ => return Err(k.unsupported(ctx, format!("data kind `{kind}`"))),
        }
    }
    let data = synthetic(ctx, &mut m, samples)?;
    m.finish(ctx, &[]);
    Ok(DataSpec::SyntheticText(data))
}

/// A local data file, read by the guidellm deserializer its suffix selects (`kind`, when the profile names one,
/// must agree, as each deserializer checks the suffix); anything else guidellm loads is refused by name.
fn data_path(
    ctx: &Ctx,
    f: &At<'_>,
    path: &str,
    kind: Option<&str>,
) -> Result<GuidellmFile, WorkloadError> {
    let suffix = std::path::Path::new(path)
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .unwrap_or_default();
    let format = match suffix.as_str() {
        "json" | "jsonl" => GuidellmFileFormat::Json,
        "csv" => GuidellmFileFormat::Csv,
        "txt" | "text" => GuidellmFileFormat::Text,
        "parquet" => GuidellmFileFormat::Parquet,
        "arrow" | "hdf5" | "h5" | "db" | "tar" => {
            return Err(f.unsupported(
                ctx,
                format!(
                    "a .{suffix} data file (llmbench reads guidellm's .json, .jsonl, .csv, .parquet and .txt \
                     files; convert it to JSON lines)"
                ),
            ));
        }
        _ => {
            return Err(f.unsupported(
                ctx,
                format!(
                    "dataset `{path}` (a Hugging Face dataset, a dataset directory or a file of another kind; \
                     llmbench reads local .json, .jsonl, .csv, .parquet and .txt files)"
                ),
            ));
        }
    };
    let expected = match format {
        GuidellmFileFormat::Json => "json_file",
        GuidellmFileFormat::Csv => "csv_file",
        GuidellmFileFormat::Text => "text_file",
        GuidellmFileFormat::Parquet => "parquet_file",
    };
    if let Some(kind) = kind
        && kind != expected
    {
        return Err(f.invalid(
            ctx,
            format!("`{path}` is not a {kind} (guidellm's {kind} reads {expected} suffixes only: name it {expected})"),
        ));
    }
    Ok(GuidellmFile {
        path: path.to_owned(),
        format,
        column_mappings: None,
        samples: None,
        default_max_tokens: None,
    })
}

/// guidellm's column types (`GenerativeColumnMapper.defaults`), the keys `column_mappings` takes.
const COLUMN_TYPES: &[&str] = &[
    "prompt_tokens_count_column",
    "output_tokens_count_column",
    "prefix_column",
    "text_column",
    "image_column",
    "video_column",
    "audio_column",
    "tools_column",
    "tool_response_column",
    "relative_timestamp_column",
    "requeue_delay_column",
    "conversation_turns_column",
];

/// A profile's `column_mappings`, and where it is.
struct ColumnMappings {
    path: String,
    line: u32,
    mappings: Vec<(String, Vec<String>)>,
}

/// `data_column_mapper`: guidellm's default mapper, with or without `column_mappings` (per column type, a name or
/// a list of names).
fn column_mapper(
    ctx: &mut Ctx,
    m: &mut MapReader<'_>,
) -> Result<Option<ColumnMappings>, WorkloadError> {
    let Some(f) = m.get("data_column_mapper") else {
        return Ok(None);
    };
    if matches!(&f.node.value, Value::Str(s) if s == "generative_column_mapper") {
        return Ok(None);
    }
    // guidellm ≤ v0.6 took the mappings themselves (`{text_column: question}`); later ones take the mapper's
    // arguments (`{kind, column_mappings}`).
    let bare = f.node.entries().is_some_and(|entries| {
        entries
            .iter()
            .all(|(k, _)| k.name != "kind" && k.name != "column_mappings")
    });
    if bare {
        let mappings = column_mappings(ctx, &f)?;
        return Ok(Some(mappings));
    }
    let mut mapper = f.map(ctx)?;
    if let Some(k) = mapper.get("kind") {
        let kind = k.str(ctx)?;
        if kind != "generative_column_mapper" {
            return Err(k.unsupported(
                ctx,
                format!(
                    "the column mapper `{kind}` (guidellm's generative_column_mapper is supported)"
                ),
            ));
        }
    }
    let mappings = match mapper.get("column_mappings").filter(|f| !f.is_null()) {
        Some(c) => Some(column_mappings(ctx, &c)?),
        None => None,
    };
    mapper.finish(ctx, &[]);
    Ok(mappings)
}

/// `column_mappings`: per guidellm column type, a column name or a list of names in priority order.
fn column_mappings(ctx: &mut Ctx, c: &At<'_>) -> Result<ColumnMappings, WorkloadError> {
    let Some(entries) = c.node.entries() else {
        return Err(ctx.wrong_type(&c.path, c.node, "a map of column types to column names"));
    };
    let mut mappings = Vec::new();
    for (key, value) in entries {
        let path = join(&c.path, &key.name);
        if !COLUMN_TYPES.contains(&key.name.as_str()) {
            let hint = super::reader::nearest_key(&key.name, COLUMN_TYPES.iter().copied())
                .map(|k| format!(" — did you mean `{k}`?"))
                .unwrap_or_default();
            return Err(ctx.invalid(
                &path,
                key.line,
                format!(
                    "not a guidellm column type (known: {}){hint}",
                    COLUMN_TYPES.join(", ")
                ),
            ));
        }
        let names = match &value.value {
            Value::Str(s) => vec![s.clone()],
            Value::Seq(items) => items
                .iter()
                .map(|n| match &n.value {
                    Value::Str(s) => Ok(s.clone()),
                    _ => Err(ctx.wrong_type(&path, n, "a column name")),
                })
                .collect::<Result<_, _>>()?,
            _ => return Err(ctx.wrong_type(&path, value, "a column name or a list of names")),
        };
        mappings.push((key.name.clone(), names));
    }
    Ok(ColumnMappings {
        path: c.path.clone(),
        line: c.line,
        mappings,
    })
}

/// Settings that only a data file takes: its column mapping, its sample count, and the loader's shuffle (torch's
/// shuffled order cannot be reproduced, so it is refused for a file; for synthetic samples, independent draws,
/// it changes nothing).
fn file_settings(
    ctx: &mut Ctx,
    data: &mut DataSpec,
    mappings: Option<ColumnMappings>,
    samples: Option<u64>,
    shuffle: Option<At<'_>>,
) -> Result<(), WorkloadError> {
    match data {
        DataSpec::GuidellmFile(file) => {
            if let Some(f) = shuffle
                && f.bool(ctx)?
            {
                return Err(f.unsupported(
                    ctx,
                    "shuffling a data file's rows (torch's shuffled order cannot be reproduced; guidellm's default reads them in file order)",
                ));
            }
            file.column_mappings = mappings.map(|m| m.mappings);
            file.samples = samples;
        }
        DataSpec::GuidellmTrace(trace) => {
            if let Some(f) = shuffle
                && f.bool(ctx)?
            {
                return Err(f.unsupported(
                    ctx,
                    "shuffling a trace's rows (torch's shuffled order cannot be reproduced; guidellm's default \
                     replays them in time order)",
                ));
            }
            if let Some(m) = mappings {
                return Err(ctx.unsupported(
                    &m.path,
                    m.line,
                    "column mappings for a trace (guidellm's defaults read the prompt and token counts the trace \
                     deserializer yields; name the trace's own columns with `timestamp_column`, \
                     `prompt_tokens_column`, `output_tokens_column`)",
                ));
            }
            trace.samples = samples;
        }
        _ => {
            if let Some(m) = mappings {
                return Err(ctx.unsupported(
                    &m.path,
                    m.line,
                    "column mappings for synthetic data (they apply to data files)",
                ));
            }
            if let Some(f) = shuffle {
                ctx.warn(
                    &f.path,
                    f.line,
                    WarningKind::Ignored,
                    "shuffles the order of synthetic samples, which are independent draws; the distribution sent \
                     is the same",
                );
            }
        }
    }
    Ok(())
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
    let turns = match m.get("turns") {
        Some(f) => {
            let n = f.positive_within(ctx, Limit::Turns)?;
            u32::try_from(n).map_err(|_| f.invalid(ctx, format!("{n} is too large")))?
        }
        None => 1,
    };
    let samples = match m.get("samples") {
        Some(f) => f.positive_within(ctx, Limit::Samples)?,
        None => samples.unwrap_or(DEFAULT_SAMPLES),
    };
    let mut prefix_buckets = Vec::new();
    let mut prefixes: u64 = 0;
    if let Some(f) = m.get("prefix_buckets") {
        for b in f.seq(ctx)? {
            let mut bm = b.map(ctx)?;
            let prefix_tokens = bm
                .require(ctx, "prefix_tokens", "a prefix bucket has `prefix_tokens`")?
                .tokens(ctx)?;
            let count_field = bm.get("prefix_count");
            let prefix_count = count_field
                .as_ref()
                .map(|f| f.positive_within(ctx, Limit::Prefixes))
                .transpose()?
                .unwrap_or(1);
            // Every prefix of every bucket is synthesised and kept for the run.
            prefixes = prefixes.saturating_add(prefix_count);
            if prefixes > limits::MAX_PREFIXES {
                return Err(count_field.as_ref().unwrap_or(&b).invalid(
                    ctx,
                    format!(
                        "the buckets so far hold {prefixes} prefixes: {}",
                        limits::exceeded(Limit::Prefixes, prefixes as f64)
                    ),
                ));
            }
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
        let prefix_tokens = f.tokens(ctx)?;
        let prefix_count = m
            .get("prefix_count")
            .map(|f| f.positive_within(ctx, Limit::Prefixes))
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
    m.ignore(
        ctx,
        "source",
        "the corpus guidellm cuts prompt text from; llmbench's prompt words are its own either way, with the \
         same token counts",
    );
    for key in [
        "tool_call_turns",
        "tools",
        "tool_response_tokens",
        "tool_response_tokens_stdev",
        "tool_response_tokens_min",
        "tool_response_tokens_max",
        "server_tool_call_turns",
    ] {
        if let Some(f) = m.get(key) {
            return Err(f.unsupported(ctx, "synthetic tool-call turns"));
        }
    }
    let think_time = think_time(ctx, m)?;
    Ok(SyntheticText {
        prompt,
        output,
        turns,
        prefix_buckets,
        samples,
        think_time,
        images: None,
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
    let avg = avg_field.tokens(ctx)?;
    let stdev = m
        .get(&format!("{name}_stdev"))
        .map(|f| f.tokens(ctx))
        .transpose()?
        .filter(|s| *s > 0);
    let min = m
        .get(&format!("{name}_min"))
        .map(|f| f.tokens(ctx))
        .transpose()?;
    let max = m
        .get(&format!("{name}_max"))
        .map(|f| f.tokens(ctx))
        .transpose()?;
    let calc_min = min.unwrap_or(match stdev {
        Some(s) => avg.saturating_sub(s.saturating_mul(5)).max(1),
        None => avg.max(1),
    });
    let calc_max = max.unwrap_or(match stdev {
        Some(s) => avg.saturating_add(s.saturating_mul(5)),
        None => avg,
    });
    if calc_max > limits::MAX_TOKENS {
        return Err(avg_field.invalid(
            ctx,
            format!(
                "lengths reach {calc_max} tokens (the average plus five `{name}_stdev`, as guidellm draws them): {}; \
                 set `{name}_max`",
                limits::exceeded(Limit::Tokens, calc_max as f64)
            ),
        ));
    }
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
    // The default request format changed with v0.4: v0.3 sent text completions
    // (`settings.preferred_route`), v0.4–v0.6 chat completions (`data_request_formatter`, `DEFAULT_API`).
    // A file with hyphenated keys is v0.4+ (v0.3 read underscores only); v0.3-only keys mark a v0.3 file.
    let v03 = !entries.iter().any(|(k, _)| k.name.contains('-'))
        && [
            "rate_type",
            "backend_type",
            "backend_args",
            "warmup_percent",
            "cooldown_percent",
            "output_sampling",
        ]
        .iter()
        .any(|k| doc.get(k).is_some());
    workload.api.kind = if v03 {
        ApiKind::Completion
    } else {
        ApiKind::Chat
    };

    workload.api.base_url = Some(guidellm_target(
        m.require(ctx, "target", "the server's URL")?.str(ctx)?,
    ));
    if let Some(f) = m.get("model") {
        workload.api.model = Some(f.str(ctx)?.to_string());
    }
    if let Some(f) = m.get_any(&["backend_type", "backend"]) {
        let kind = f.str(ctx)?;
        if kind != "openai_http" {
            return Err(f.unsupported(ctx, format!("backend `{kind}`")));
        }
    }
    let mut request_max_tokens = None;
    let mut timeout = None;
    if let Some(f) = m.get_any(&["backend_kwargs", "backend_args"]) {
        let mut b = f.map(ctx)?;
        request_max_tokens = backend_args(ctx, &mut b, &mut workload.api, &mut timeout, false)?;
        b.finish(ctx, &[]);
    }
    workload.request_timeout = timeout;
    // `data_request_formatter` and its aliases `request_type` / `request-type` (v0.4–v0.6), or a v0.6
    // `request_format` path.
    if let Some(f) = m.get_any(&["data_request_formatter", "request_type", "request_format"])
        && let Some(n) = request_formatter(ctx, &f, &mut workload.api)?
    {
        request_max_tokens = Some(n);
    }
    workload.tokenizer = scenario_tokenizer(ctx, &mut m)?;
    if let Some(f) = m.get("data_args") {
        let empty = match &f.node.value {
            Value::Seq(items) => items
                .iter()
                .all(|n| n.is_null() || n.entries().is_some_and(<[_]>::is_empty)),
            Value::Map(entries) => entries.is_empty(),
            _ => false,
        };
        if !empty {
            return Err(f.unsupported(ctx, "per-dataset loading arguments (`data_args`)"));
        }
    }
    let data_samples = m
        .get("data_samples")
        .filter(|f| !matches!(f.node.value, Value::Int(-1)));
    let mappings = column_mapper(ctx, &mut m)?;
    only_default(ctx, &mut m, "data_preprocessors", &["encode_media"])?;
    only_default(ctx, &mut m, "data_finalizer", &["generative"])?;
    only_default(ctx, &mut m, "data_collator", &["generative"])?;
    let sampler = m.get("data_sampler").filter(|f| !f.is_null());
    for key in [
        "data_num_workers",
        "dataloader_kwargs",
        "data_preprocessors_kwargs",
    ] {
        m.ignore(
            ctx,
            key,
            "how guidellm's data loader runs; the data it yields is the same",
        );
    }
    for key in ["outputs", "output_dir", "output_path"] {
        m.ignore(
            ctx,
            key,
            "guidellm's output files; llmbench writes its results (benchmarks.json included) to --output",
        );
    }
    sample_size(ctx, &mut m, "sample_requests");
    sample_size(ctx, &mut m, "output_sampling");
    prefer_response_metrics(ctx, &mut m)?;
    let over_saturation = match m.get("over_saturation") {
        Some(f) => {
            let parsed = match &f.node.value {
                Value::Str(s) => string_data(s, f.line),
                _ => None,
            };
            let at = match &parsed {
                Some(node) => At::new(node, f.path.clone(), f.line),
                None => At::new(f.node, f.path.clone(), f.line),
            };
            super::over_saturation::parse_flat(ctx, &at)?
        }
        None => None,
    };

    let data_field = m.require(
        ctx,
        "data",
        "the data source (e.g. `prompt_tokens=256,output_tokens=128`)",
    )?;
    workload.data = flat_data(ctx, &data_field)?;
    let samples = match &data_samples {
        Some(f) if matches!(workload.data, DataSpec::GuidellmFile(_)) => {
            Some(f.positive_within(ctx, Limit::Samples)?)
        }
        Some(f) => {
            return Err(f.unsupported(
                ctx,
                "capping the number of synthetic samples (`data_samples` other than -1)",
            ));
        }
        None => None,
    };
    // `data_sampler: shuffle` is torch's random order (refused for a file, meaningless for synthetic draws).
    let shuffle = match &sampler {
        Some(f) => Some(f.str(ctx)? == "shuffle"),
        None => None,
    };
    if let (Some(f), Some(true), DataSpec::GuidellmFile(_)) = (&sampler, shuffle, &workload.data) {
        return Err(f.unsupported(
            ctx,
            "shuffling a data file's rows (torch's shuffled order cannot be reproduced; guidellm's default reads \
             them in file order)",
        ));
    }
    if let Some(f) = &sampler
        && !matches!(workload.data, DataSpec::GuidellmFile(_))
    {
        ctx.warn(
            &f.path,
            f.line,
            WarningKind::Ignored,
            "the order synthetic samples are drawn in; they are independent draws, so the distribution sent is \
             the same",
        );
    }
    file_settings(ctx, &mut workload.data, mappings, samples, None)?;
    apply_request_max_tokens(&mut workload.data, &mut workload.api, request_max_tokens);

    let mut limit = StageLimit {
        over_saturation,
        ..StageLimit::default()
    };
    if let Some(f) = m.get("max_seconds") {
        limit.duration = Some(f.positive_seconds(ctx)?);
    }
    if let Some(f) = m.get("max_requests") {
        limit.requests = Some(f.requests(ctx)?);
    }
    if let Some(f) = m.get_any(&["max_errors", "max_error"]) {
        limit.max_errors = Some(ErrorLimit {
            limit: f.requests(ctx)?,
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
            *slot = Some(Transient::GuidellmFraction { fraction: v });
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
    workload.stages = profile_stages(
        ctx,
        &mut m,
        &kind_field,
        kind,
        &Constraints::from_limit(&limit),
        true,
    )?;
    replay_needs_a_trace(
        ctx,
        &workload.data,
        &workload.stages,
        &kind_field,
        &data_field,
    )?;
    for stage in &mut workload.stages {
        [stage.warmup, stage.cooldown] = transients;
    }
    m.finish(ctx, &[]);
    Ok(workload)
}

/// Flat `data`: a map, a JSON object string, or `key=value,...`; anything else names a
/// dataset, which llmbench does not download.
fn flat_data(ctx: &mut Ctx, f: &At<'_>) -> Result<DataSpec, WorkloadError> {
    let node = match &f.node.value {
        Value::Map(_) => f.node.clone(),
        Value::Str(s) => match string_data(s, f.line) {
            Some(node) => node,
            None => return data_path(ctx, f, s, None).map(DataSpec::GuidellmFile),
        },
        _ => return Err(ctx.wrong_type(&f.path, f.node, "a map or a `key=value,...` string")),
    };
    let at = At::new(&node, f.path.clone(), f.line);
    let mut m = at.map(ctx)?;
    let data = synthetic(ctx, &mut m, None)?;
    m.finish(ctx, &[]);
    Ok(DataSpec::SyntheticText(data))
}

/// `delay`, `delay_stdev`, `delay_min`, `delay_max` (seconds), checked as guidellm's `SyntheticTextDatasetConfig`
/// checks them (`delay` and `delay_stdev` > 0, `delay_min` ≥ 0, `delay_max` > 0). Without `delay` guidellm draws no
/// think time, whatever the others say.
fn think_time(ctx: &mut Ctx, m: &mut MapReader<'_>) -> Result<Option<ThinkTime>, WorkloadError> {
    let seconds = |ctx: &mut Ctx, f: &At<'_>, zero_ok: bool| -> Result<f64, WorkloadError> {
        let v = f.f64(ctx)?;
        if v < 0.0 || (v == 0.0 && !zero_ok) {
            return Err(f.invalid(
                ctx,
                format!(
                    "must be {} 0 seconds, found {v}",
                    if zero_ok { "at least" } else { "more than" }
                ),
            ));
        }
        limits::check(ctx, f, Limit::Duration, v)?;
        Ok(v)
    };
    let mean = m.get("delay");
    let stdev = m
        .get("delay_stdev")
        .map(|f| seconds(ctx, &f, false))
        .transpose()?;
    let min = m
        .get("delay_min")
        .map(|f| seconds(ctx, &f, true))
        .transpose()?;
    let max = m
        .get("delay_max")
        .map(|f| seconds(ctx, &f, false))
        .transpose()?;
    let Some(mean_field) = mean else {
        if stdev.is_some() || min.is_some() || max.is_some() {
            ctx.warn(
                &join(&m.path, "delay_stdev"),
                m.line,
                WarningKind::Ignored,
                "without `delay` guidellm draws no think time",
            );
        }
        return Ok(None);
    };
    let think = ThinkTime {
        mean: seconds(ctx, &mean_field, false)?,
        stdev,
        min,
        max,
    };
    let (low, high) = think.bounds();
    if low > high {
        return Err(mean_field.invalid(
            ctx,
            format!("the think time's bounds are crossed: {low} s is above {high} s"),
        ));
    }
    Ok(Some(think))
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
