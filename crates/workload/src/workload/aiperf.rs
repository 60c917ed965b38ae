//! llm-d-benchmark's `aiperf` flag maps → `Workload` (FORMATS 1.4 §aiperf).
//!
//! The harness (`llm-d/llm-d-benchmark: workload/harnesses/aiperf-llm-d-benchmark.sh`) turns every non-null,
//! non-empty `key: value` into `--key=value` and `key: none` into a bare `--key`, and runs `aiperf profile` with
//! them. AIPerf's command line refuses a flag it does not know, so an unknown key is an error here too.
//!
//! Semantics, from `ai-dynamo/aiperf`:
//! - `aiperf/common/config/user_config.py` `validate_timing_mode`: a `mooncake_trace` whose first record has a
//!   timestamp runs the fixed schedule whatever `--concurrency` says; otherwise, without `--request-rate`, a
//!   concurrency burst (closed loop) of `--concurrency` (default 1). `get_effective_request_count`: a mooncake
//!   trace sends every record, whatever `--request-count` says (default 10 otherwise).
//! - `aiperf/common/config/prompt_config.py`, `config_defaults.py`: `--isl` (mean 550, stddev 0),
//!   `--osl` (no default: without it no `max_tokens` is sent), `--isl-block-size` (512). A stddev of 0 makes
//!   every length exactly the mean (`utils.sample_positive_normal_integer`).
//! - `aiperf/clients/openai/openai_chat.py`: chat requests carry `max_completion_tokens`, completions
//!   `max_tokens`; `--extra-inputs` entries are merged into every body (`ignore_eos:true` → `"ignore_eos": true`).
//! - AIPerf 0.13's `aiperf/timing/strategies/request_rate.py` `RequestRateStrategy.execute_phase` and
//!   `aiperf/timing/intervals.py`: with `--request-rate`, a send at the end of every interval, the first one
//!   interval into the phase — `expovariate(rate)` for `--request-rate-mode poisson` (the default; CPython's
//!   generator seeded with `rng.derive("timing.request.poisson_interval")` of `--random-seed`, a SHA-256
//!   derivation, so the intervals are AIPerf's own), `1/rate` for `constant`; `--concurrency` beside a rate are
//!   session slots, and an interval that finds them all taken sends nothing (`try_issue_credit` → `None`).
//!   `--benchmark-duration` replaces the request count, nothing is sent after it, and what is still in flight
//!   `--benchmark-grace-period` (default 30 s) later is cut and left out of every metric.
//! - Warm-up: `--warmup-request-count` (`--num-warmup-requests`, default 0) is a phase of that many requests
//!   before the profiling phase, paced alike by a strategy (and interval generator) of its own, so its intervals
//!   start again from the seed's first draw; the profiling phase starts once they all returned. Its records are
//!   flagged warm-up and left out of every figure.
//! - `aiperf/dataset/composer/synthetic.py` and `base.py`: the dataset's entries (AIPerf 0.13's `_resolve_entries`:
//!   `--num-dataset-entries`/`--num-prompts`, else `--conversation-num`, else an explicit `--request-count`, else
//!   100), each with its prompt length drawn by `sample_positive_normal_integer(isl, isl_stddev)` (a normal redrawn
//!   below 0, rounded up) and its `max_tokens` by the same over `osl`/`osl_stddev`; requests reuse the entries in
//!   order (0.13's sequential sampler). The length draws use llmbench's seeded generator, not numpy's.
//! - AIPerf 0.13's stop conditions (`config/flags/_converter_profiling.py`): `--conversation-num`
//!   (`--num-conversations`, `--num-sessions`) is also the session count (a single-turn session is one request);
//!   without a request count, duration or session count a run is 10 requests.
//! - `--extra-inputs` (`config_validators.py` `parse_str_or_dict_as_tuple_list`, `coerce_value`): every entry set
//!   in every body after AIPerf's own fields; only those llmbench builds and measures by (`stream`, `model`,
//!   `max_tokens`, …) are refused. `--header`/`-H` the same way, sent with every request.
//! - `--goodput` (`good_request_count_metric.py`): `time_to_first_token`, `inter_token_latency`,
//!   `request_latency` in ms, judged by AIPerf's definitions; `summary.json` and `profile_export_aiperf.json` carry
//!   the good request count and goodput. Other metric tags are refused.
//! - Multi-turn conversations (`--conversation-turn-*`) and the prompt prefix pool: `aiperf_conversation.rs`.
//! - Custom datasets `single_turn`, `multi_turn`, `random_pool`: `aiperf_custom.rs`.
//! - Still refused, by name: an input file without a type, a rate or duration over a trace, and every other flag.

use std::time::Duration;

use super::ParseOptions;
use super::aiperf_config;
use super::aiperf_conversation;
use super::aiperf_custom;
use super::error::{WarningKind, WorkloadError};
use super::inference_perf::set_default_seed;
use super::limits::{self, Limit};
use super::model::*;
use super::mooncake::FixedSchedule;
use super::reader::{At, Ctx, MapReader};
use super::vllm_bench::{flag, number, text};
use super::yaml::{Node, Value};
use llmbench_data::image::{ImageFormat, NormalImages, PixelLength};
use llmbench_text::py_random::aiperf_derived_seed;

/// AIPerf's defaults (`aiperf/common/config/config_defaults.py`).
const DEFAULT_REQUEST_COUNT: u64 = 10;
const DEFAULT_CONCURRENCY: u32 = 1;
const DEFAULT_ISL: u64 = 550;
const DEFAULT_BLOCK_SIZE: u64 = 512;
/// `--num-dataset-entries`: the synthetic prompts AIPerf makes, which its requests then reuse.
const DEFAULT_DATASET_ENTRIES: u64 = 100;

pub(crate) fn parse(
    ctx: &mut Ctx,
    doc: &Node,
    options: &ParseOptions,
) -> Result<Workload, WorkloadError> {
    if !aiperf_config::is_config(doc) {
        return parse_flags(ctx, doc, options);
    }
    // An AIPerf config file runs as the flags it stands for; messages name the config's keys.
    let flags = aiperf_config::to_flags(ctx, doc)?;
    let mut w = parse_flags(ctx, &flags.map, options).map_err(|e| flags.relabel_error(e))?;
    flags.relabel_warnings(&mut ctx.warnings);
    // Each later profiling phase is a stage of its own, after the one before it drained (AIPerf's phases run in
    // order, a phase starting once every credit of the one before returned), over the same dataset and endpoint.
    for (later, (path, line)) in flags.later_phases.iter().zip(&flags.later_at) {
        let known = ctx.warnings.len();
        let phase = parse_flags(ctx, &later.map, options).map_err(|e| later.relabel_error(e))?;
        // The keys every phase shares were warned about once already.
        let mut warnings = ctx.warnings.split_off(known);
        later.relabel_warnings(&mut warnings);
        warnings.retain(|w| !ctx.warnings.contains(w));
        ctx.warnings.extend(warnings);
        if phase.data != w.data || phase.api != w.api {
            return Err(ctx.unsupported(
                path,
                *line,
                "a later profiling phase whose dataset or endpoint differs from the first phase's (its request \
                 count sizes AIPerf's dataset when `dataset.entries` is not given: set `entries`)",
            ));
        }
        w.stages.extend(phase.stages);
    }
    if flags.phase_names.len() > 1 {
        w.report.aiperf_phases = flags.phase_names.clone();
    }
    w.dialect = Dialect::AiperfConfig;
    Ok(w)
}

/// The flags AIPerf 0.13 takes a list of (`parse_int_or_int_list`, `parse_float_or_float_list`), each list a sweep.
const SWEEP_FLAGS: &[&str] = &[
    "concurrency",
    "prefill-concurrency",
    "request-rate",
    "request-count",
    "num-requests",
    "benchmark-duration",
    "conversation-num",
    "num-conversations",
    "num-sessions",
    "conversation-turn-mean",
    "session-turns-mean",
    "isl",
    "synthetic-input-tokens-mean",
    "prompt-input-tokens-mean",
    "isl-stddev",
    "synthetic-input-tokens-stddev",
    "prompt-input-tokens-stddev",
    "osl",
    "output-tokens-mean",
    "prompt-output-tokens-mean",
    "osl-stddev",
    "output-tokens-stddev",
    "prompt-output-tokens-stddev",
];

/// A list (or comma-separated values) under a flag AIPerf sweeps: AIPerf promotes it to a sweep, one benchmark per
/// value; llmbench runs one.
fn refuse_sweeps(ctx: &Ctx, doc: &Node) -> Result<(), WorkloadError> {
    for (key, value) in doc.entries().unwrap_or_default() {
        let listed = match &value.value {
            Value::Seq(items) => items.len() > 1,
            Value::Str(text) => text.contains(','),
            _ => false,
        };
        if listed && SWEEP_FLAGS.contains(&key.name.as_str()) {
            return Err(ctx.unsupported(
                &key.name,
                key.line,
                "a list of values, which AIPerf sweeps (one benchmark per value, each in its own artifact \
                 directory); run one value per llmbench run, or an llmbench experiment with a factor over it \
                 (docs/experiments.md)",
            ));
        }
    }
    Ok(())
}

/// `--model-names` (`--model`, `-m`): one name, or several as a list or comma-separated (`parse_str_or_list`,
/// each trimmed).
fn model_names(ctx: &Ctx, f: &At<'_>) -> Result<Vec<String>, WorkloadError> {
    str_or_list(ctx, f, "a model name")
}

/// AIPerf's `parse_str_or_list`: one value, several as a YAML list or comma-separated, each trimmed; none empty.
fn str_or_list(ctx: &Ctx, f: &At<'_>, what: &str) -> Result<Vec<String>, WorkloadError> {
    let items: Vec<String> = match &f.node.value {
        Value::Seq(items) => items
            .iter()
            .map(|n| {
                n.scalar_text()
                    .ok_or_else(|| ctx.wrong_type(&f.path, n, what))
            })
            .collect::<Result<_, _>>()?,
        _ => vec![text(ctx, f)?],
    };
    let names: Vec<String> = items
        .iter()
        .flat_map(|item| item.split(','))
        .map(|name| name.trim().to_owned())
        .collect();
    if names.iter().any(String::is_empty) {
        return Err(f.invalid(ctx, format!("names an empty value where {what} goes")));
    }
    Ok(names)
}

/// Several `--model-names`: each turn names one, chosen when the dataset is composed
/// (`BaseDatasetComposer._select_model_name`, `dataset/composer/base.py`, AIPerf 0.13): `round_robin` (the
/// default) takes turn `n`'s model at `n mod len`; `random` is `choice` from the generator derived as
/// `composer.turn.model_selection` of `--random-seed`. Spread over the run's requests as LoRA traffic is, with
/// figures per model; one model sends every request to it.
fn model_selection(
    ctx: &mut Ctx,
    m: &mut MapReader<'_>,
    names: Vec<String>,
    seed: u64,
) -> Result<Option<LoraTraffic>, WorkloadError> {
    let strategy = m.get("model-selection-strategy");
    let pick = match &strategy {
        None => LoraPick::RoundRobin,
        Some(f) => {
            match text(ctx, f)?.to_ascii_lowercase().as_str() {
                "round_robin" => LoraPick::RoundRobin,
                "random" => LoraPick::PythonChoice {
                    seed: aiperf_derived_seed(seed, "composer.turn.model_selection"),
                },
                "weighted" => {
                    return Err(f.unsupported(
                    ctx,
                    "`model-selection-strategy: weighted` (AIPerf 0.13's dataset composers raise \"Invalid model \
                     selection strategy\" on it)",
                ));
                }
                other => {
                    return Err(f.invalid(
                    ctx,
                    format!("`{other}` is not one of AIPerf's strategies: round_robin, random, weighted"),
                ));
                }
            }
        }
    };
    Ok((names.len() > 1).then_some(LoraTraffic {
        adapters: names,
        pick,
    }))
}

fn parse_flags(
    ctx: &mut Ctx,
    doc: &Node,
    options: &ParseOptions,
) -> Result<Workload, WorkloadError> {
    refuse_sweeps(ctx, doc)?;
    let mut m = MapReader::root(ctx, doc)?;
    let mut w = Workload::empty(Harness::Aiperf, Dialect::AiperfFlags);
    set_default_seed(&mut w, options, 0);

    let model_field = m.require(ctx, "model", "`aiperf profile` needs `--model`")?;
    let model_names = model_names(ctx, &model_field)?;
    let model = model_names[0].clone();
    w.tokenizer = Some(TokenizerSpec {
        // AIPerf's tokenizer defaults to the model's name (`--tokenizer` unset).
        name_or_path: match m.get("tokenizer") {
            Some(f) => text(ctx, &f)?,
            None => model.clone(),
        },
        token: None,
        trust_remote_code: match m.take("tokenizer-trust-remote-code") {
            Some(f) => flag(ctx, &f)?,
            None => false,
        },
    });
    w.api.model = Some(model);
    if let Some(f) = m.get("url") {
        // `parse_str_or_list`, then `normalize_http_urls`: `http://` before a URL without `://`.
        let mut urls = str_or_list(ctx, &f, "a URL")?.into_iter().map(|url| {
            if url.contains("://") {
                url
            } else {
                format!("http://{url}")
            }
        });
        w.api.base_url = urls.next();
        w.api.more_urls = urls.collect();
    }
    // `--url-strategy`: AIPerf 0.13 registers `round_robin` alone (`timing/url_samplers.py`).
    if let Some(f) = m.get("url-strategy")
        && !text(ctx, &f)?.eq_ignore_ascii_case("round_robin")
    {
        return Err(f.invalid(ctx, "AIPerf 0.13's only URL strategy is `round_robin`"));
    }
    if let Some(f) = m.get("endpoint-type") {
        let name = text(ctx, &f)?;
        w.api.kind = match name.as_str() {
            "chat" => ApiKind::Chat,
            "completions" => ApiKind::Completion,
            // `EmbeddingsEndpoint` (aiperf/endpoints/openai_embeddings.py, AIPerf 0.13): POST /v1/embeddings.
            "embeddings" => ApiKind::Embeddings,
            // `aiperf/endpoints/{nim,cohere,hf_tei}_rankings.py` (AIPerf 0.13): a query and its passages, from the
            // synthetic rankings composer (`DatasetManager._is_rankings_endpoint`: "rankings" in the type's name).
            "nim_rankings" | "cohere_rankings" | "hf_tei_rankings" => {
                w.api.rankings = Some(match name.as_str() {
                    "nim_rankings" => RankingsWire::Nim,
                    "cohere_rankings" => RankingsWire::Cohere,
                    _ => RankingsWire::HfTei,
                });
                ApiKind::Rerank
            }
            other => {
                let why = match other {
                    "chat_embeddings" | "nim_embeddings" => {
                        "it sends chat messages or images to /v1/embeddings; llmbench sends text: use \
                         `endpoint-type: embeddings`"
                    }
                    "rankings" => {
                        return Err(f.invalid(
                            ctx,
                            "`rankings` is not an AIPerf 0.13 endpoint type (its rankings types are \
                             nim_rankings, cohere_rankings and hf_tei_rankings)",
                        ));
                    }
                    _ => {
                        "chat, completions, embeddings, nim_rankings, cohere_rankings and hf_tei_rankings are; \
                         AIPerf 0.13 has no Responses or Anthropic endpoint type"
                    }
                };
                return Err(f.unsupported(ctx, format!("endpoint type `{other}` ({why})")));
            }
        };
    } else {
        w.api.kind = ApiKind::Chat;
    }
    // `--endpoint` (`--custom-endpoint`): the path under the URL in place of the endpoint type's
    // (`ModelEndpointInfo.url`: base URL, `/`, the path without its leading slashes).
    if let Some(f) = m.get_any(&["endpoint", "custom-endpoint"]) {
        let path = text(ctx, &f)?;
        w.api.endpoint = Some(format!("/{}", path.trim_start_matches('/')));
    }
    dedup_url_path(&mut w.api);
    w.api.streaming = match m.take("streaming") {
        Some(f) => {
            let streaming = flag(ctx, &f)?;
            if streaming && w.api.kind.is_pooling() {
                // `EndpointConfig` turns streaming off for an endpoint type whose `supports_streaming` is false,
                // with a warning.
                ctx.warn(
                    &f.path,
                    f.line,
                    WarningKind::Ignored,
                    "AIPerf disables streaming for the embeddings and rankings endpoint types, which never stream",
                );
            }
            streaming && !w.api.kind.is_pooling()
        }
        None => false,
    };
    // `--api-key`: sent as `Authorization: Bearer <key>` (`endpoints/base_endpoint.py` `get_headers`).
    if let Some(f) = m.get("api-key") {
        w.api.api_key = Some(text(ctx, &f)?);
    }
    // `--request-timeout-seconds` (default 6 h): a request still unanswered then fails.
    if let Some(f) = m.get("request-timeout-seconds") {
        let secs = number(ctx, &f)?;
        if !(secs.is_finite() && secs > 0.0) {
            return Err(f.invalid(
                ctx,
                format!("must be greater than 0 (seconds), found {secs}"),
            ));
        }
        limits::check(ctx, &f, Limit::Duration, secs)?;
        w.request_timeout = Some(Duration::from_secs_f64(secs));
    }
    // `--session-header`: the header each session's id goes in, in place of `X-Correlation-ID`
    // (`transports/base_transports.py`).
    let session_header = m.get("session-header");
    if let Some(f) = &session_header {
        w.api.session_id_header = Some(text(ctx, f)?);
    }
    if let Some(f) = m.get("extra-inputs") {
        extra_inputs(ctx, &f, &mut w.api)?;
    }
    if let Some(f) = m.get_any(&["header", "H"]) {
        headers(ctx, &f, &mut w.api)?;
    }
    if let Some(f) = m.get("goodput") {
        w.goodput = goodput(ctx, &f)?;
        // `_configure_goodput`: TTFT and ITL are streaming-only metrics, not computed without a stream.
        if !w.api.streaming {
            let mut missing: Vec<&str> = w
                .goodput
                .iter()
                .filter_map(|c| match c.metric {
                    SloMetric::Ttft => Some("time_to_first_token"),
                    SloMetric::Itl => Some("inter_token_latency"),
                    _ => None,
                })
                .collect();
            missing.sort_unstable();
            if !missing.is_empty() {
                return Err(f.invalid(
                    ctx,
                    format!(
                        "metric(s) {} are not applicable without streaming (AIPerf refuses it: \"Invalid --goodput: \
                         metric(s) … are not applicable to the current endpoint/configuration\"; add --streaming)",
                        missing.join(", ")
                    ),
                ));
            }
        }
    }
    // Server-side token counts: the reports take `usage` figures over the tokenizer's (llmbench always asks for
    // usage and prefers it; this makes output counts come from it as well).
    if let Some(f) = m.take("use-server-token-count") {
        w.report.use_server_output_tokens = flag(ctx, &f)?;
    }
    // AIPerf's scrape of the server's /metrics, off: llmbench's own scrape is the same thing, so it is off too.
    if let Some(f) = m.take("no-server-metrics") {
        w.no_server_metrics = flag(ctx, &f)?;
    }

    let concurrency_field = m.get("concurrency");
    let concurrency = match &concurrency_field {
        Some(f) => {
            let n = positive(ctx, f)?;
            limits::check(ctx, f, Limit::Concurrency, n as f64)?;
            u32::try_from(n).map_err(|_| f.invalid(ctx, format!("{n} is too large")))?
        }
        None => DEFAULT_CONCURRENCY,
    };
    // `--random-seed`: AIPerf seeds its Poisson gaps (and its synthetic data) with it.
    if let Some(f) = m.get("random-seed") {
        w.seed = non_negative(ctx, &f)?;
        w.seed_origin = SeedOrigin::Profile;
    }
    w.api.lora = model_selection(ctx, &mut m, model_names, w.seed)?;
    let load = load(ctx, &mut m, w.seed)?;
    let mut load = load;
    (load.credits, load.credits_flag) = credit_flags(
        ctx,
        &mut m,
        CreditChecks {
            seed: w.seed,
            warmup: load.warmup,
            streaming: w.api.streaming,
            concurrency: concurrency_field.as_ref().map(|_| concurrency),
            rate: matches!(
                load.pace,
                AiperfPace::Poisson { .. } | AiperfPace::Gamma { .. } | AiperfPace::Constant { .. }
            ),
        },
    )?;
    load.credits.rate_series = load.rate_series.take();
    if let (Some(_), Some(line)) = (load.credits.prefill_concurrency, load.user_centric_line) {
        return Err(ctx.unsupported(
            "user-centric-rate",
            line,
            "prefill concurrency beside --user-centric-rate (AIPerf's users then wait for prefill slots at \
             their turns' times, which llmbench's user-centric schedule does not build)",
        ));
    }
    let request_count_field = m.get_any(&["request-count", "num-requests"]);
    if let (Some(f), Some(_)) = (&request_count_field, load.duration) {
        return Err(f.invalid(
            ctx,
            "cannot be used together with benchmark-duration (AIPerf refuses it: a run is count- or duration-based)",
        ));
    }
    let request_count = match &request_count_field {
        Some(f) => {
            let n = positive(ctx, f)?;
            limits::check(ctx, f, Limit::Arrivals, n as f64)?;
            n
        }
        None => DEFAULT_REQUEST_COUNT,
    };
    let isl = m.get_any(&[
        "isl",
        "synthetic-input-tokens-mean",
        "prompt-input-tokens-mean",
    ]);
    let isl_stddev = m.get_any(&[
        "isl-stddev",
        "synthetic-input-tokens-stddev",
        "prompt-input-tokens-stddev",
    ]);
    let osl = m.get_any(&["osl", "output-tokens-mean", "prompt-output-tokens-mean"]);
    let osl_stddev = m.get_any(&[
        "osl-stddev",
        "output-tokens-stddev",
        "prompt-output-tokens-stddev",
    ]);
    let isl_stddev = isl_stddev.map(|f| stddev(ctx, &f)).transpose()?;
    let osl_stddev = osl_stddev.map(|f| stddev(ctx, &f)).transpose()?;
    let images = synthetic_images(ctx, &mut m)?;
    // AIPerf 0.13 (`config/flags/_converter_profiling.py`, `_converter_dataset.py` `_resolve_entries`):
    // `--conversation-num` (`--num-conversations`, `--num-sessions`) is the profiling phase's session count — no
    // new session once that many started — and sizes the dataset; `--num-dataset-entries` (`--num-prompts`)
    // sizes the dataset only, and wins; without either an explicit `--request-count` sizes it, else 100.
    let sessions_field = m.get_any(&["conversation-num", "num-conversations", "num-sessions"]);
    let sessions = match &sessions_field {
        Some(f) => {
            let n = positive(ctx, f)?;
            limits::check(ctx, f, Limit::Samples, n as f64)?;
            Some(n)
        }
        None => None,
    };
    let dataset_entries_field = m.get_any(&["num-dataset-entries", "num-prompts"]);
    let entries = match &dataset_entries_field {
        Some(f) => {
            let n = positive(ctx, f)?;
            limits::check(ctx, f, Limit::Samples, n as f64)?;
            n
        }
        None => sessions
            .or(request_count_field.is_some().then_some(request_count))
            .unwrap_or(DEFAULT_DATASET_ENTRIES),
    };
    // `prof.setdefault("requests", 10)` only when no request count, duration or session count bounds the run.
    let request_limit = match (&request_count_field, sessions) {
        (Some(_), _) => Some(request_count),
        (None, Some(_)) => None,
        (None, None) => Some(DEFAULT_REQUEST_COUNT),
    };
    let block_size = match m.get_any(&[
        "isl-block-size",
        "synthetic-input-tokens-block-size",
        "prompt-input-tokens-block-size",
    ]) {
        Some(f) => {
            let n = positive(ctx, &f)?;
            u32::try_from(n).map_err(|_| f.invalid(ctx, format!("{n} is too large")))?
        }
        None => DEFAULT_BLOCK_SIZE as u32,
    };
    let (schedule, schedule_flag) = fixed_schedule(ctx, &mut m)?;
    let sampling_field = m.get("dataset-sampling-strategy");
    let sampling = sampling_field
        .as_ref()
        .map(|f| sampling_strategy(ctx, f))
        .transpose()?;
    let conversation = aiperf_conversation::read(ctx, &mut m)?;
    let rankings = rankings_flags(ctx, &mut m)?;
    if w.api.rankings.is_none()
        && let Some((key, line)) = &rankings.first
    {
        ctx.warn(
            key,
            *line,
            WarningKind::Ignored,
            "only the rankings endpoint types (nim_rankings, cohere_rankings, hf_tei_rankings) read the \
             `rankings-*` flags",
        );
    }

    let input_file = m.get("input-file");
    let dataset_type = m.get("custom-dataset-type");
    if let (AiperfPace::UserCentric { users, .. }, Some(line)) = (load.pace, load.user_centric_line)
    {
        user_centric_checks(
            ctx,
            UserCentricChecks {
                users,
                line,
                // A duration bounds the phase instead (a request count beside one is refused above).
                requests: request_limit.filter(|_| load.duration.is_none()),
                sessions,
                concurrency: concurrency_field.as_ref(),
                input_file: input_file.as_ref(),
                turn_mean: conversation.turn_mean,
            },
        )?;
    }
    // What the rankings composers (file or synthetic) do not read, and the one stage of their single-turn
    // requests.
    let rankings_refused = || RankingsRefused {
        isl: isl.as_ref(),
        osl: osl.as_ref(),
        conversation: conversation.first.clone(),
        sessions: sampling_field
            .as_ref()
            .filter(|_| sampling.is_some_and(|s| s != AiperfSamplingStrategy::Sequential))
            .or(session_header.as_ref())
            .map(|f| (f.path.clone(), f.line)),
        images: images.as_ref().map(|(_, key, line)| (key.clone(), *line)),
    };
    let rankings_stage = || {
        synthetic_stage(
            &load,
            concurrency_field.is_some().then_some(concurrency),
            Bounds {
                requests: request_limit,
                sessions,
                conversations: false,
            },
        )
    };
    if let (Some(file), Some(wire)) = (&input_file, w.api.rankings) {
        w.data = rankings_file(
            ctx,
            wire,
            RankingsFile {
                file,
                kind: dataset_type.as_ref(),
                schedule_flag,
                entries: dataset_entries_field.as_ref(),
                rankings: rankings.first,
                refused: rankings_refused(),
            },
        )?;
        w.stages = vec![rankings_stage()];
        return finish_flags(ctx, &m, w);
    }
    if let (Some(_), Some((_, key, line))) = (&input_file, &images) {
        return Err(ctx.unsupported(
            key,
            *line,
            "synthetic images beside an input file (AIPerf 0.13 refuses `--image-batch-size` and \
             `--image-source` with a file dataset other than random_pool's, and a file's turns carry their own \
             images, which llmbench does not send yet)",
        ));
    }
    match (&input_file, &dataset_type) {
        (Some(file), Some(kind)) if aiperf_custom::file_kind(ctx, kind)?.is_some() => {
            aiperf_custom::custom_dataset(
                ctx,
                &mut w,
                aiperf_custom::Flags {
                    file,
                    kind,
                    isl: isl.as_ref(),
                    osl: osl.as_ref().map(|f| tokens(ctx, f)).transpose()?,
                    osl_stddev,
                    entries,
                    entries_field: dataset_entries_field.as_ref(),
                    sampling,
                    conversation: &conversation,
                    schedule_flag,
                },
            )?;
            w.stages = vec![synthetic_stage(
                &load,
                concurrency_field.is_some().then_some(concurrency),
                Bounds {
                    requests: request_limit,
                    sessions,
                    conversations: true,
                },
            )];
        }
        (Some(file), Some(kind)) => {
            if let Some((name, line)) = load.flag() {
                return Err(ctx.unsupported(
                    name,
                    line,
                    "a request rate, benchmark duration or warm-up over a trace (not implemented: AIPerf db4f6397 \
                     runs a trace without timestamps with its rate loop, each credit the next session in file \
                     order, wrapping, as many credits as the file has records; with timestamps its fixed schedule \
                     takes over and leaves the rate unused; llmbench replays traces on the fixed schedule or at a \
                     concurrency)",
                ));
            }
            if let Some((name, line)) = &load.credits_flag {
                return Err(ctx.unsupported(
                    name,
                    *line,
                    "prefill concurrency or request cancellation over a mooncake trace (AIPerf's fixed schedule \
                     issues its credits through the same issuer; llmbench's trace replay does not build them)",
                ));
            }
            if let Some(f) = &session_header {
                return Err(f.unsupported(
                    ctx,
                    "a session header over a mooncake trace (llmbench's trace replay sends no session id)",
                ));
            }
            if let Some(f) = &sampling_field
                && sampling != Some(AiperfSamplingStrategy::Sequential)
            {
                return Err(f.unsupported(
                    ctx,
                    "a random or shuffle sampler over a mooncake trace (AIPerf refuses one on a fixed schedule; \
                     without timestamps llmbench replays the trace's sessions in file order)",
                ));
            }
            let kind_name = text(ctx, kind)?;
            if kind_name != "mooncake_trace" {
                return Err(kind.invalid(
                    ctx,
                    format!(
                        "`{kind_name}` is not a custom dataset type (single_turn, multi_turn, random_pool, \
                         mooncake_trace)"
                    ),
                ));
            }
            // Lengths come from the trace: AIPerf reads `input_length`/`output_length` per record and ignores
            // `--isl`/`--osl` for it.
            for f in [&isl, &osl].into_iter().flatten() {
                ctx.warn(
                    &f.path,
                    f.line,
                    WarningKind::Ignored,
                    "a mooncake trace sets each request's lengths",
                );
            }
            if let Some((key, line)) = &conversation.first {
                ctx.warn(
                    key,
                    *line,
                    WarningKind::Ignored,
                    "a mooncake trace's records are its turns and prompts (AIPerf's synthetic conversations and \
                     prefix pool are not used for one)",
                );
            }
            if let Some(f) = &request_count_field {
                ctx.warn(
                    &f.path,
                    f.line,
                    WarningKind::Ignored,
                    "AIPerf sends every record of a mooncake trace, whatever the request count",
                );
            }
            w.data = DataSpec::MooncakeTrace(MooncakeTraceData {
                path: text(ctx, file)?,
                block_size,
            });
            w.stages = vec![Stage {
                load: LoadKind::Trace,
                arrival: Arrival::MooncakeTrace {
                    schedule,
                    concurrency,
                },
                limit: StageLimit::default(),
                max_concurrency: None,
                warmup: None,
                cooldown: None,
            }];
        }
        (Some(file), None) => {
            return Err(file.unsupported(
                ctx,
                "an input file without `custom-dataset-type` (AIPerf db4f6397 would ignore the file and send \
                 synthetic prompts; name its type: single_turn, multi_turn, random_pool or mooncake_trace)",
            ));
        }
        (None, Some(kind)) => {
            return Err(ctx.missing(
                "input-file",
                kind.line,
                "`custom-dataset-type` needs the file it describes",
            ));
        }
        (None, None) => {
            if let Some((key, line)) = schedule_flag {
                return Err(ctx.invalid(
                    &key,
                    line,
                    "the fixed-schedule options need a trace (`input-file`, `custom-dataset-type: mooncake_trace`)",
                ));
            }
            let input = match &isl {
                Some(f) => tokens(ctx, f)?,
                None => DEFAULT_ISL,
            };
            let output = osl.as_ref().map(|f| tokens(ctx, f)).transpose()?;
            // AIPerf 0.13's completions endpoint raises on a session's second turn ("Completions endpoint only
            // supports one turn", `endpoints/openai_completions.py`): its turns accumulate.
            if conversation.multi_turn
                && w.api.kind == ApiKind::Completion
                && let Some((key, line)) = &conversation.first
            {
                return Err(ctx.unsupported(
                    key,
                    *line,
                    "multi-turn conversations over `endpoint-type: completions` (AIPerf 0.13 fails on each \
                     session's second turn: its completions endpoint takes one turn; use `endpoint-type: chat`)",
                ));
            }
            // A sampler other than sequential picks each session's entry, and a session header carries each
            // session's id: the conversations path runs AIPerf's sessions (a single-turn one is one request).
            let sampling = sampling.unwrap_or(AiperfSamplingStrategy::Sequential);
            let sessions_path = conversation.needs_conversations()
                || sampling != AiperfSamplingStrategy::Sequential
                || session_header.is_some();
            if let Some(wire) = w.api.rankings {
                w.data = rankings_dataset(ctx, wire, rankings, entries, rankings_refused())?;
                w.stages = vec![rankings_stage()];
                return finish_flags(ctx, &m, w);
            }
            if let Some((_, key, line)) = &images {
                if sessions_path {
                    return Err(ctx.unsupported(
                        key,
                        *line,
                        "images in AIPerf's sessions (multi-turn conversations, a sampling strategy or a session \
                         header: each turn's history would carry the earlier turns' images, which llmbench's \
                         sessions do not keep; single-turn synthetic requests carry them)",
                    ));
                }
                if w.api.kind != ApiKind::Chat {
                    return Err(ctx.unsupported(
                        key,
                        *line,
                        "images with an endpoint type other than chat (llmbench sends images as chat \
                         messages' image_url parts; use `endpoint-type: chat`)",
                    ));
                }
                w.api.images = true;
            }
            w.data = if sessions_path {
                DataSpec::AiperfConversations(AiperfConversations {
                    conversations: entries,
                    turns: conversation.turns,
                    prompt: lengths(input, isl_stddev),
                    output: output.map(|mean| lengths(mean, osl_stddev)),
                    prefix_pool: conversation.prefix_pool,
                    turn_delay: conversation.turn_delay,
                    sampling,
                })
            } else {
                DataSpec::SyntheticText(SyntheticText {
                    prompt: lengths(input, isl_stddev),
                    // AIPerf samples `max_tokens` only when `--osl` is given; a stddev alone sends none.
                    output: output.map(|mean| lengths(mean, osl_stddev)),
                    turns: 1,
                    prefix_buckets: Vec::new(),
                    samples: entries,
                    think_time: None,
                    images: images.map(|(spec, _, _)| spec),
                })
            };
            let conversations = matches!(w.data, DataSpec::AiperfConversations(_));
            w.stages = vec![synthetic_stage(
                &load,
                concurrency_field.is_some().then_some(concurrency),
                Bounds {
                    requests: request_limit,
                    sessions,
                    conversations,
                },
            )];
        }
    }
    // `--failed-request-threshold` (0.13, `ProfilingPhase.failed_request_threshold`): every profiling phase's own,
    // its grace floor `max(concurrency, 10)` (`build_failed_request_abort_config`, a phase without a concurrency
    // counting 1).
    if let Some(f) = m.get("failed-request-threshold") {
        let ratio = number(ctx, &f)?;
        if !(0.0..=1.0).contains(&ratio) {
            return Err(f.invalid(
                ctx,
                format!("must be between 0 and 1 (a ratio of failed requests), found {ratio}"),
            ));
        }
        let phase_concurrency = if concurrency_field.is_some() {
            concurrency
        } else {
            1
        };
        let grace = u64::from(phase_concurrency).max(10);
        for stage in &mut w.stages {
            stage.limit.failed_request_threshold = Some(FailedRequestThreshold { ratio, grace });
        }
    }
    finish_flags(ctx, &m, w)
}

/// AIPerf's command line refuses a flag it does not know.
fn finish_flags(ctx: &Ctx, m: &MapReader<'_>, w: Workload) -> Result<Workload, WorkloadError> {
    if let Some(key) = m.unread().next() {
        if matches!(key.name.as_str(), "config" | "f") {
            return Err(ctx.unsupported(
                &key.name,
                key.line,
                "`--config`/`-f` inside a flag profile (give the AIPerf config file itself as the profile: \
                 `llmbench run --harness aiperf --profile FILE.yaml` reads it; flags beside it are not merged)",
            ));
        }
        if let Some(known) = m.nearest_known(&key.name) {
            return Err(ctx.invalid(
                &key.name,
                key.line,
                format!("not an aiperf flag (aiperf refuses it) — did you mean `{known}`?"),
            ));
        }
        return Err(ctx.unsupported(
            &key.name,
            key.line,
            "this aiperf flag (known: model, tokenizer, url, endpoint-type, endpoint, streaming, api-key, \
             request-timeout-seconds, session-header, concurrency, request-count, request-rate, request-rate-mode, \
             random-seed, benchmark-duration, benchmark-grace-period, failed-request-threshold, warmup-request-count, \
             isl, osl, isl-stddev, \
             osl-stddev, num-dataset-entries, dataset-sampling-strategy, conversation-num, conversation-turn-mean, \
             conversation-turn-stddev, conversation-turn-delay-mean/stddev/ratio, prompt-prefix-pool-size, \
             prompt-prefix-length, extra-inputs, header, goodput, input-file, custom-dataset-type, \
             use-server-token-count, tokenizer-trust-remote-code, no-server-metrics, isl-block-size, fixed-schedule*, \
             image-width-mean/stddev, image-height-mean/stddev, image-batch-size, image-format, \
             rankings-passages-mean/stddev, rankings-passages-prompt-token-mean/stddev, \
             rankings-query-prompt-token-mean/stddev)",
        ));
    }
    Ok(w)
}

/// The `--rankings-*` flags (AIPerf 0.13 `config/flags/cli_config.py`; `_converter_dataset.py` `_build_rankings`):
/// each mean/stddev pair becomes `dataset.rankings`' distribution only when one of the two is given, so without
/// them `RankingsConfig`'s defaults apply (10 passages of 128 tokens, a query of 32), not the flags' own defaults
/// (1, 550, 550). A stddev alone is a `NormalDistribution` without its required mean: AIPerf refuses it.
struct RankingsFlags {
    passages: (u64, u64),
    query: TokenLengths,
    passage: TokenLengths,
    /// The first `rankings-*` flag given, for a warning or a refusal.
    first: Option<(String, u32)>,
}

fn rankings_flags(ctx: &Ctx, m: &mut MapReader<'_>) -> Result<RankingsFlags, WorkloadError> {
    let mut first: Option<(String, u32)> = None;
    let mut pair = |mean_key: &str,
                    stddev_key: &str,
                    default: u64,
                    limit: Limit|
     -> Result<(u64, u64), WorkloadError> {
        let mean = m.get(mean_key);
        let stddev = m.get(stddev_key);
        for f in mean.iter().chain(stddev.iter()) {
            if first.is_none() {
                first = Some((f.path.clone(), f.line));
            }
        }
        let mean = match (&mean, &stddev) {
            (Some(f), _) => {
                // `Field(ge=1)`, an `int`.
                let n = positive(ctx, f)?;
                limits::check(ctx, f, limit, n as f64)?;
                n
            }
            (None, Some(f)) => {
                return Err(f.invalid(
                    ctx,
                    format!(
                        "needs `{mean_key}` beside it (AIPerf 0.13 makes `{{stddev}}` alone a normal distribution \
                         without its required mean, and refuses it)"
                    ),
                ));
            }
            (None, None) => default,
        };
        let stddev = match &stddev {
            Some(f) => {
                // `Field(ge=0)`, an `int`.
                let n = non_negative(ctx, f)?;
                limits::check(ctx, f, limit, n as f64)?;
                n
            }
            None => 0,
        };
        Ok((mean, stddev))
    };
    let passages = pair(
        "rankings-passages-mean",
        "rankings-passages-stddev",
        DEFAULT_RANKINGS_PASSAGES,
        Limit::Samples,
    )?;
    let (passage_mean, passage_stddev) = pair(
        "rankings-passages-prompt-token-mean",
        "rankings-passages-prompt-token-stddev",
        DEFAULT_RANKINGS_PASSAGE_TOKENS,
        Limit::Tokens,
    )?;
    let (query_mean, query_stddev) = pair(
        "rankings-query-prompt-token-mean",
        "rankings-query-prompt-token-stddev",
        DEFAULT_RANKINGS_QUERY_TOKENS,
        Limit::Tokens,
    )?;
    Ok(RankingsFlags {
        passages,
        query: lengths(query_mean, Some(query_stddev as f64)),
        passage: lengths(passage_mean, Some(passage_stddev as f64)),
        first,
    })
}

/// `RankingsConfig`'s defaults (`config/dataset/content.py`, AIPerf 0.13).
const DEFAULT_RANKINGS_PASSAGES: u64 = 10;
const DEFAULT_RANKINGS_PASSAGE_TOKENS: u64 = 128;
const DEFAULT_RANKINGS_QUERY_TOKENS: u64 = 32;

/// What a rankings run refuses or ignores beside the rankings flags.
struct RankingsRefused<'a, 'n> {
    isl: Option<&'a At<'n>>,
    osl: Option<&'a At<'n>>,
    /// The first of the multi-turn, prefix-pool and turn-delay flags, which the rankings composer never reads.
    conversation: Option<(String, u32)>,
    /// A sampler other than sequential, or a session header: AIPerf's sessions, which rankings runs do not take.
    sessions: Option<(String, u32)>,
    images: Option<(String, u32)>,
}

/// AIPerf's synthetic rankings dataset (`SyntheticRankingsDatasetComposer`, chosen for every endpoint type with
/// "rankings" in its name): `entries` entries of one query and its passages, reused in order by the requests.
fn rankings_dataset(
    ctx: &mut Ctx,
    wire: RankingsWire,
    flags: RankingsFlags,
    entries: u64,
    refused: RankingsRefused<'_, '_>,
) -> Result<DataSpec, WorkloadError> {
    if let Some((key, line)) = refused.sessions {
        return Err(ctx.unsupported(
            &key,
            line,
            format!(
                "AIPerf's sessions (a sampling strategy other than sequential, a session header) with \
                 `endpoint-type: {}`: llmbench sends the rankings entries in order, one request each",
                wire.name()
            ),
        ));
    }
    if let Some((key, line)) = &refused.conversation {
        // `SyntheticRankingsDatasetComposer` makes one turn per entry and reads no prefix or turn-delay config.
        ctx.warn(
            key,
            *line,
            WarningKind::Ignored,
            "AIPerf's rankings composer makes one turn per entry, without prefix prompts or turn delays",
        );
    }
    if let Some((key, line)) = refused.images {
        return Err(ctx.unsupported(
            &key,
            line,
            "images with a rankings endpoint type (its requests carry a query and passages of text)",
        ));
    }
    // The rankings composer reads neither: a query and passages have their own lengths, and `format_payload` warns
    // that `max_tokens` is not supported for rankings and sends none.
    for f in [refused.isl, refused.osl].into_iter().flatten() {
        ctx.warn(
            &f.path,
            f.line,
            WarningKind::Ignored,
            "the rankings endpoint types take their lengths from the `rankings-*` flags and send no max_tokens",
        );
    }
    Ok(DataSpec::AiperfRankings(AiperfRankings {
        entries,
        passages_mean: flags.passages.0,
        passages_stddev: flags.passages.1,
        query: flags.query,
        passage: flags.passage,
    }))
}

/// What a rankings run over an input file reads of the profile.
struct RankingsFile<'a, 'n> {
    file: &'a At<'n>,
    kind: Option<&'a At<'n>>,
    schedule_flag: Option<(String, u32)>,
    /// `--num-dataset-entries`: a file has one entry per line.
    entries: Option<&'a At<'n>>,
    /// The first `rankings-*` flag: only the synthetic rankings composer reads them.
    rankings: Option<(String, u32)>,
    refused: RankingsRefused<'a, 'n>,
}

/// A rankings endpoint type over `--input-file` (AIPerf 0.13): the file takes `CustomDatasetComposer`, not the
/// synthetic rankings composer (`DatasetManager` checks `_is_rankings_endpoint` for synthetic data only), and each
/// turn's texts named `query`/`queries` and `passages` become its request (`base_rankings_endpoint.py`
/// `format_payload`). A `single_turn` file is read (`prompts/aiperf_rankings_file.rs`); the other layouts are
/// refused with what AIPerf does with them.
fn rankings_file(
    ctx: &mut Ctx,
    wire: RankingsWire,
    flags: RankingsFile<'_, '_>,
) -> Result<DataSpec, WorkloadError> {
    let Some(kind) = flags.kind else {
        return Err(flags.file.unsupported(
            ctx,
            format!(
                "an input file without `custom-dataset-type` with `endpoint-type: {}` (name its layout; llmbench \
                 reads a single_turn file for the rankings endpoint types)",
                wire.name()
            ),
        ));
    };
    match text(ctx, kind)?.as_str() {
        "single_turn" => {}
        "multi_turn" => {
            return Err(kind.unsupported(
                ctx,
                format!(
                    "a multi_turn file with `endpoint-type: {}` (AIPerf 0.13 sends a session's turns accumulated, \
                     and its rankings endpoints fail every turn after a session's first: \"Rankings endpoint only \
                     supports one turn\"; write one turn per line as a single_turn file)",
                    wire.name()
                ),
            ));
        }
        "random_pool" => {
            return Err(kind.unsupported(
                ctx,
                format!(
                    "a random_pool file with `endpoint-type: {}` (AIPerf samples the pool's entries with \
                     replacement and shuffles them, and names a directory's pools by file, e.g. queries.jsonl's \
                     texts `queries`; not built for rankings: write the entries as a single_turn file)",
                    wire.name()
                ),
            ));
        }
        "mooncake_trace" => {
            return Err(kind.unsupported(
                ctx,
                format!(
                    "a mooncake trace with `endpoint-type: {}` (a trace's prompts are unnamed texts, in which \
                     AIPerf's rankings endpoints find no `query` and fail)",
                    wire.name()
                ),
            ));
        }
        other => {
            return Err(kind.invalid(
                ctx,
                format!(
                    "`{other}` is not a custom dataset type (single_turn, multi_turn, random_pool, mooncake_trace)"
                ),
            ));
        }
    }
    if let Some((key, line)) = flags.schedule_flag {
        return Err(ctx.unsupported(
            &key,
            line,
            "a fixed schedule over a single_turn file's timestamps (not implemented; without it AIPerf runs the \
             file with its request-rate loop, as llmbench does)",
        ));
    }
    let refused = flags.refused;
    if let Some((key, line)) = refused.sessions {
        return Err(ctx.unsupported(
            &key,
            line,
            format!(
                "AIPerf's sessions (a sampling strategy other than sequential, a session header) with \
                 `endpoint-type: {}`: llmbench sends the file's lines in order, one request each",
                wire.name()
            ),
        ));
    }
    if let Some((key, line)) = refused.images {
        return Err(ctx.unsupported(
            &key,
            line,
            "images with a rankings endpoint type (its requests carry a query and passages of text)",
        ));
    }
    if let Some((key, line)) = &refused.conversation {
        ctx.warn(
            key,
            *line,
            WarningKind::Ignored,
            "AIPerf's turn and prefix-pool flags apply to synthetic data only, not to a single_turn file",
        );
    }
    if let Some((key, line)) = &flags.rankings {
        ctx.warn(
            key,
            *line,
            WarningKind::Ignored,
            "the `rankings-*` flags shape AIPerf's synthetic rankings dataset; a file's lines carry their own \
             queries and passages",
        );
    }
    if let Some(f) = flags.entries {
        ctx.warn(
            &f.path,
            f.line,
            WarningKind::Ignored,
            "a single_turn file has one entry per line",
        );
    }
    // `--isl` is not read for a file; `--osl` sets each turn's `max_tokens`, which `format_payload` warns that
    // rankings do not support and never sends.
    for f in [refused.isl, refused.osl].into_iter().flatten() {
        ctx.warn(
            &f.path,
            f.line,
            WarningKind::Ignored,
            "a rankings file's lines are its queries and passages, and rankings bodies send no max_tokens",
        );
    }
    Ok(DataSpec::AiperfRankingsFile(AiperfRankingsFile {
        path: text(ctx, flags.file)?,
    }))
}

/// `--dataset-sampling-strategy` (`DatasetSamplingStrategy`: sequential, random, shuffle).
/// AIPerf 0.13's image flags (`config/flags/cli_config.py`, `_converter_dataset.py` `_build_images`): any of them
/// turns images on, one a request unless `--image-batch-size` says otherwise (`_apply_implicit_media_batch`),
/// 512 × 512 unless a mean is given (`ImageConfig`), JPEG unless `--image-format` says `png` or `random`, noise
/// pixels (the default `--image-source`). The spec, with the first flag's key and line for a refusal.
fn synthetic_images(
    ctx: &Ctx,
    m: &mut MapReader<'_>,
) -> Result<Option<(NormalImages, String, u32)>, WorkloadError> {
    for key in ["image-source", "image-source-sampling"] {
        if let Some(f) = m.get(key) {
            let value = text(ctx, &f)?;
            if !(value.eq_ignore_ascii_case("noise")
                || value.eq_ignore_ascii_case("random-with-replacement"))
            {
                return Err(f.unsupported(
                    ctx,
                    format!(
                        "`{key}: {value}` (resizing AIPerf's bundled photos or a directory of images is not built; \
                         llmbench draws noise images, AIPerf's default)"
                    ),
                ));
            }
        }
    }
    let width_mean = m.get("image-width-mean");
    let width_stddev = m.get("image-width-stddev");
    let height_mean = m.get("image-height-mean");
    let height_stddev = m.get("image-height-stddev");
    let batch = m.get_any(&["image-batch-size", "batch-size-image"]);
    let format = m.get("image-format");
    let first = [
        &width_mean,
        &width_stddev,
        &height_mean,
        &height_stddev,
        &batch,
        &format,
    ]
    .into_iter()
    .flatten()
    .min_by_key(|f| f.line);
    let Some(first) = first else {
        return Ok(None);
    };
    let (key, line) = (first.path.clone(), first.line);
    let pixels = |f: &Option<At<'_>>, default: f64| -> Result<f64, WorkloadError> {
        match f {
            Some(f) => {
                let v = number(ctx, f)?;
                if !(v.is_finite() && v >= 0.0) {
                    return Err(f.invalid(ctx, format!("must be a number ≥ 0, found {v}")));
                }
                Ok(v)
            }
            None => Ok(default),
        }
    };
    let width = PixelLength {
        mean: pixels(&width_mean, DEFAULT_IMAGE_SIDE)?,
        stddev: pixels(&width_stddev, 0.0)?,
    };
    let height = PixelLength {
        mean: pixels(&height_mean, DEFAULT_IMAGE_SIDE)?,
        stddev: pixels(&height_stddev, 0.0)?,
    };
    let per_request = match &batch {
        Some(f) => u32::try_from(non_negative(ctx, f)?).map_err(|_| f.invalid(ctx, "too large"))?,
        None => 1,
    };
    if per_request == 0 || width.mean < 1.0 || height.mean < 1.0 {
        // `images_enabled` is false, yet AIPerf's composer still gives each turn an empty image list, which makes
        // its content a list of one text part instead of a string.
        return Err(ctx.unsupported(
            &key,
            line,
            "image flags with `image-batch-size: 0` or a zero mean size (AIPerf then sends no image but the text \
             as a one-part list; drop the image flags for text)",
        ));
    }
    let format = match &format {
        None => ImageFormat::Jpeg,
        Some(f) => match text(ctx, f)?.to_ascii_lowercase().as_str() {
            "jpeg" => ImageFormat::Jpeg,
            "png" => ImageFormat::Png,
            "random" => ImageFormat::Random,
            other => {
                return Err(f.invalid(
                    ctx,
                    format!("`{other}` is not an image format (png, jpeg, random)"),
                ));
            }
        },
    };
    Ok(Some((
        NormalImages {
            per_request,
            width,
            height,
            format,
        },
        key,
        line,
    )))
}

/// AIPerf's `ImageConfig` width and height when no mean is given.
const DEFAULT_IMAGE_SIDE: f64 = 512.0;

fn sampling_strategy(ctx: &Ctx, f: &At<'_>) -> Result<AiperfSamplingStrategy, WorkloadError> {
    match text(ctx, f)?.as_str() {
        "sequential" => Ok(AiperfSamplingStrategy::Sequential),
        "random" => Ok(AiperfSamplingStrategy::Random),
        "shuffle" => Ok(AiperfSamplingStrategy::Shuffle),
        other => Err(f.invalid(
            ctx,
            format!("`{other}` is not a dataset sampling strategy (sequential, random, shuffle)"),
        )),
    }
}

/// AIPerf 0.13's URL (`transports/aiohttp_transport.py` `build_url`, `_dedup_path_overlap`): the endpoint's path is
/// appended to the URL's own path unless that already ends with it, and a URL path ending in `/v1` drops the
/// path's leading `v1/`; so `--url http://host/v1/chat/completions` sends to that URL, not to a doubled path.
fn dedup_url_path(api: &mut Api) {
    let Some(url) = &api.base_url else { return };
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    let Some(slash) = url[after_scheme..].find('/').map(|i| after_scheme + i) else {
        return;
    };
    let base_path = url[slash..].trim_end_matches('/');
    if base_path.is_empty() {
        api.base_url = Some(url[..slash].to_owned());
        return;
    }
    let sub = api.path().trim_start_matches('/').to_owned();
    let path = if sub.is_empty() || base_path.ends_with(&format!("/{sub}")) {
        base_path.to_owned()
    } else if base_path.ends_with("/v1") && sub.starts_with("v1/") {
        format!("{base_path}/{}", &sub[3..])
    } else {
        format!("{base_path}/{sub}")
    };
    api.base_url = Some(url[..slash].to_owned());
    api.endpoint = Some(path);
}

/// The load flags of AIPerf's rate loop (`aiperf/common/config/loadgen_config.py`).
struct Load {
    /// `--request-rate` with `--request-rate-mode`; `None`: AIPerf's concurrency burst.
    pace: AiperfPace,
    /// `--benchmark-duration`: the profiling phase sends until it, instead of a request count.
    duration: Option<Duration>,
    /// `--benchmark-grace-period` (only with a duration; AIPerf's default 30 s; `None`: `inf`, never cut).
    grace: Option<Duration>,
    /// `--warmup-request-count` (`--num-warmup-requests`): AIPerf's warm-up phase.
    warmup: u64,
    /// The first of these flags the profile set, with its line, for a refusal that must name one.
    first: Option<(String, u32)>,
    /// `--user-centric-rate`'s line, for the refusals that concern the user-centric phase.
    user_centric_line: Option<u32>,
    /// `--prefill-concurrency` and `--request-cancellation-rate`.
    credits: AiperfCredits,
    /// The first of the credit flags the profile set, with its line.
    credits_flag: Option<(String, u32)>,
    /// `--request-rate-series`, which the credits carry to the engine.
    rate_series: Option<AiperfRateSeries>,
}

impl Load {
    fn flag(&self) -> Option<(&str, u32)> {
        self.first
            .as_ref()
            .map(|(name, line)| (name.as_str(), *line))
    }
}

/// AIPerf's `--benchmark-grace-period` default (`LoadGeneratorDefaults.BENCHMARK_GRACE_PERIOD`).
const DEFAULT_GRACE: Duration = Duration::from_secs(30);

/// Reads `--request-rate`, `--request-rate-mode`, `--benchmark-duration` and `--benchmark-grace-period`, checked as
/// AIPerf's `UserConfig` validators check them (`validate_timing_mode`, `validate_benchmark_mode`).
fn load(ctx: &mut Ctx, m: &mut MapReader<'_>, seed: u64) -> Result<Load, WorkloadError> {
    let mut first: Option<(String, u32)> = None;
    let mut note = |f: &At<'_>| {
        if first.is_none() {
            first = Some((f.path.clone(), f.line));
        }
    };
    let mut rate_line = 0;
    let rate = match m.get("request-rate") {
        Some(f) => {
            note(&f);
            rate_line = f.line;
            let rate = number(ctx, &f)?;
            if !(rate.is_finite() && rate > 0.0) {
                return Err(f.invalid(ctx, format!("must be greater than 0, found {rate}")));
            }
            limits::check(ctx, &f, Limit::Rate, rate)?;
            Some(rate)
        }
        None => None,
    };
    // `--request-rate-series` instead of a rate (`_apply_profiling_rate_series`): the phase's rate is the series'
    // first (`get_phase_rate`: `initial_qps`), and the series drives it from there.
    let series = match m.get("request-rate-series") {
        Some(f) => {
            note(&f);
            if rate.is_some() {
                return Err(f.invalid(
                    ctx,
                    "--request-rate and --request-rate-series are mutually exclusive (AIPerf refuses it)",
                ));
            }
            if m.get("user-centric-rate").is_some() {
                return Err(f.invalid(
                    ctx,
                    "--request-rate-series is not supported with --user-centric-rate (AIPerf refuses it)",
                ));
            }
            Some((rate_series(ctx, &f)?, f))
        }
        None => None,
    };
    let rate = rate.or_else(|| {
        series
            .as_ref()
            .and_then(|(s, _)| s.points.first().map(|p| p.1))
    });
    // `--arrival-pattern` (0.13's name; `--request-rate-mode` is its alias).
    let pattern = m.get_any(&["arrival-pattern", "request-rate-mode"]);
    let mode = match &pattern {
        Some(f) => {
            let mode = text(ctx, f)?;
            match (mode.as_str(), rate) {
                ("poisson" | "constant" | "gamma", _) => {}
                ("concurrency_burst", None) => {}
                ("concurrency_burst", Some(_)) => {
                    return Err(f.invalid(
                        ctx,
                        "cannot be concurrency_burst when a request rate is given (AIPerf refuses it)",
                    ));
                }
                (other, _) => {
                    return Err(f.invalid(
                        ctx,
                        format!(
                            "`{other}` is not an arrival pattern (constant, poisson, gamma, concurrency_burst)"
                        ),
                    ));
                }
            }
            Some(mode)
        }
        None => None,
    };
    // `--user-centric-rate` with `--num-users` (`timing/strategies/user_centric_rate.py`): the profiling phase
    // becomes AIPerf's user-centric phase, whose rate is this one (`_PROF_FIELD_ROUTES` sets it after
    // `--request-rate`'s, so it wins).
    let user_centric = match m.get("user-centric-rate") {
        Some(f) => {
            note(&f);
            let rate = number(ctx, &f)?;
            if !(rate.is_finite() && rate > 0.0) {
                return Err(f.invalid(ctx, format!("must be greater than 0, found {rate}")));
            }
            limits::check(ctx, &f, Limit::Rate, rate)?;
            Some((rate, f))
        }
        None => None,
    };
    let users = match (m.get("num-users"), &user_centric) {
        (Some(f), Some(_)) => {
            let n = positive(ctx, &f)?;
            limits::check(ctx, &f, Limit::Concurrency, n as f64)?;
            Some(n as u32)
        }
        (Some(f), None) => {
            return Err(f.invalid(
                ctx,
                "requires --user-centric-rate (AIPerf refuses it: pass --user-centric-rate to enable user-centric \
                 mode, or drop --num-users)",
            ));
        }
        (None, Some((_, f))) => {
            return Err(ctx.missing(
                "num-users",
                f.line,
                "--user-centric-rate needs --num-users (AIPerf's user-centric phase requires its `users`)",
            ));
        }
        (None, None) => None,
    };
    if let (Some(_), Some(_)) = (&user_centric, rate) {
        ctx.warn(
            "request-rate",
            rate_line,
            WarningKind::Ignored,
            "--user-centric-rate sets the rate of AIPerf's user-centric phase, and wins over --request-rate",
        );
    }
    if let (Some(_), Some(f)) = (&user_centric, &pattern) {
        // `_profiling_phase_type` makes the phase user-centric whatever the pattern says.
        ctx.warn(
            &f.path,
            f.line,
            WarningKind::Ignored,
            "AIPerf's user-centric phase has no arrival pattern: --user-centric-rate paces it",
        );
    }
    // `--arrival-smoothness` (`--vllm-burstiness`): the gamma shape. Alone it selects gamma
    // (`_profiling_phase_type`'s "v1 parity"); beside another pattern, or with no rate (a concurrency phase),
    // `_apply_phase_specific_routes` refuses it.
    let smoothness = match m.get_any(&["arrival-smoothness", "vllm-burstiness"]) {
        Some(f) => {
            let k = number(ctx, &f)?;
            if !(k.is_finite() && k > 0.0) {
                return Err(f.invalid(ctx, format!("must be greater than 0, found {k}")));
            }
            let gamma = rate.is_some()
                && user_centric.is_none()
                && matches!(mode.as_deref(), None | Some("gamma"));
            if !gamma {
                return Err(f.invalid(
                    ctx,
                    "is only supported with --arrival-pattern gamma and a request rate (AIPerf refuses it)",
                ));
            }
            Some((k, f))
        }
        None => None,
    };
    let gamma = mode.as_deref() == Some("gamma") || (mode.is_none() && smoothness.is_some());
    let pace = match (rate, &user_centric, users) {
        (_, Some((rate, _)), Some(users)) => AiperfPace::UserCentric { rate: *rate, users },
        (Some(rate), _, _) if mode.as_deref() == Some("constant") => AiperfPace::Constant { rate },
        (Some(rate), _, _) if gamma => AiperfPace::Gamma {
            rate,
            // `GammaIntervalGenerator`: `config.arrival_smoothness or 1.0`.
            smoothness: smoothness.as_ref().map_or(1.0, |(k, _)| *k),
            seed,
        },
        // `LoadGeneratorDefaults.REQUEST_RATE_MODE`: poisson.
        (Some(rate), _, _) => AiperfPace::Poisson { rate, seed },
        // Without a rate AIPerf runs its concurrency burst, whatever the pattern said.
        (None, _, _) => AiperfPace::Burst,
    };
    let duration = match m.get("benchmark-duration") {
        Some(f) => {
            note(&f);
            let secs = number(ctx, &f)?;
            if !(secs.is_finite() && secs >= 1.0) {
                return Err(f.invalid(ctx, format!("must be at least 1 (seconds), found {secs}")));
            }
            limits::check(ctx, &f, Limit::Duration, secs)?;
            Some(Duration::from_secs_f64(secs))
        }
        None => None,
    };
    let grace = match m.get("benchmark-grace-period") {
        Some(f) if duration.is_none() => {
            return Err(f.invalid(
                ctx,
                "can only be used with benchmark-duration (AIPerf refuses it)",
            ));
        }
        Some(f) => {
            let secs = number(ctx, &f)?;
            if secs.is_nan() || secs < 0.0 {
                return Err(f.invalid(
                    ctx,
                    format!("must be at least 0 (seconds) or inf, found {secs}"),
                ));
            }
            // `inf` (AIPerf's "wait indefinitely for all responses"): nothing in flight is cut.
            if secs.is_infinite() {
                None
            } else {
                limits::check(ctx, &f, Limit::Duration, secs)?;
                Some(Duration::from_secs_f64(secs))
            }
        }
        None => Some(DEFAULT_GRACE),
    };
    let warmup = match m.get_any(&["warmup-request-count", "num-warmup-requests"]) {
        Some(f) => {
            let n = non_negative(ctx, &f)?;
            if n > 0 {
                note(&f);
            }
            limits::check(ctx, &f, Limit::Arrivals, n as f64)?;
            n
        }
        None => 0,
    };
    // The warm-up phase takes `--arrival-pattern` itself (`_warmup_pattern_type`): poisson when only the
    // smoothness made the profiling phase gamma. llmbench paces both phases alike.
    if let Some((_, f)) = &smoothness
        && warmup > 0
        && mode.is_none()
    {
        return Err(f.unsupported(
            ctx,
            "a warm-up with `--arrival-smoothness` but no `--arrival-pattern gamma`: AIPerf then paces the \
             warm-up poisson and the profiling phase gamma, and llmbench paces both phases alike; add \
             `--arrival-pattern gamma`",
        ));
    }
    // The warm-up phase takes `--request-rate` (`_warmup_pattern_type`), which a user-centric run has not: AIPerf
    // then runs the warm-up as a concurrency burst. llmbench paces both phases alike.
    if let Some((_, f)) = &user_centric
        && warmup > 0
    {
        return Err(f.unsupported(
            ctx,
            "a warm-up beside --user-centric-rate (AIPerf runs that warm-up as a concurrency burst, unlike the \
             user-centric phase; llmbench paces both phases alike)",
        ));
    }
    // The warm-up phase takes `--request-rate` (`_warmup_pattern_type`), which a series phase has not.
    if let Some((_, f)) = &series
        && warmup > 0
    {
        return Err(f.unsupported(
            ctx,
            "a warm-up beside --request-rate-series (AIPerf paces that warm-up without the series' rate; \
             llmbench paces both phases alike)",
        ));
    }
    Ok(Load {
        pace,
        duration,
        grace,
        warmup,
        first,
        user_centric_line: user_centric.as_ref().map(|(_, f)| f.line),
        credits: AiperfCredits::default(),
        credits_flag: None,
        rate_series: series.map(|(s, _)| s),
    })
}

/// `--request-rate-series`: a JSON file's points (a list, or `{"points": [...]}`), or the points themselves (a
/// config's inline `rateSeries`), checked as `RateSeriesConfig` and `read_rate_series_json` check them.
fn rate_series(ctx: &Ctx, f: &At<'_>) -> Result<AiperfRateSeries, WorkloadError> {
    let document: serde_json::Value = match &f.node.value {
        Value::Str(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| {
                f.invalid(
                    ctx,
                    format!("cannot read request-rate series JSON '{path}': {e}"),
                )
            })?;
            serde_json::from_str(&text).map_err(|e| {
                f.invalid(
                    ctx,
                    format!("invalid request-rate series JSON '{path}': {e}"),
                )
            })?
        }
        _ => f.node.to_json(),
    };
    let points = match document {
        serde_json::Value::Array(points) => points,
        serde_json::Value::Object(mut map) if map.len() == 1 && map.contains_key("points") => {
            match map.remove("points") {
                Some(serde_json::Value::Array(points)) => points,
                _ => return Err(f.invalid(ctx, "request-rate series JSON points must be an array")),
            }
        }
        serde_json::Value::Object(_) => {
            return Err(f.invalid(
                ctx,
                "request-rate series JSON must contain exactly one top-level key: points",
            ));
        }
        _ => {
            return Err(f.invalid(
                ctx,
                "request-rate series JSON must be an object with points or a points array",
            ));
        }
    };
    let mut read = Vec::with_capacity(points.len());
    for (index, point) in points.iter().enumerate() {
        let bad = |why: &str| {
            f.invalid(
                ctx,
                format!("invalid request-rate series point {index}: {why}"),
            )
        };
        let serde_json::Value::Object(point) = point else {
            return Err(bad("not an object of time_s and qps"));
        };
        // AIPerf's config models take camelCase too.
        if let Some(extra) = point
            .keys()
            .find(|k| !matches!(k.as_str(), "time_s" | "timeS" | "qps"))
        {
            return Err(bad(&format!("`{extra}` is not a field (time_s, qps)")));
        }
        let number = |key: &str| point.get(key).and_then(serde_json::Value::as_f64);
        let (Some(time_s), Some(qps)) =
            (number("time_s").or_else(|| number("timeS")), number("qps"))
        else {
            return Err(bad("time_s and qps are required numbers"));
        };
        if !(time_s.is_finite() && qps.is_finite()) {
            return Err(f.invalid(ctx, "request-rate series values must be finite"));
        }
        if time_s < 0.0 {
            return Err(bad("time_s must be at least 0"));
        }
        if qps <= 0.0 {
            return Err(bad("qps must be greater than 0"));
        }
        limits::check(ctx, f, Limit::Duration, time_s)?;
        limits::check(ctx, f, Limit::Rate, qps)?;
        read.push((time_s, qps));
    }
    if read.len() < 2 {
        return Err(f.invalid(ctx, "a request-rate series requires at least two points"));
    }
    if read.windows(2).any(|w| w[1].0 <= w[0].0) {
        return Err(f.invalid(
            ctx,
            "request-rate series time_s values must be strictly increasing",
        ));
    }
    Ok(AiperfRateSeries {
        points: read.into(),
    })
}

/// What the credit flags are checked against.
struct CreditChecks {
    /// AIPerf's seed, which the cancellation generator is derived from.
    seed: u64,
    /// The warm-up request count.
    warmup: u64,
    streaming: bool,
    /// `--concurrency`, when given.
    concurrency: Option<u32>,
    /// Whether the rate loop has a rate (`--request-rate`, not a user-centric phase).
    rate: bool,
}

/// `--prefill-concurrency` (`--warmup-prefill-concurrency` for the warm-up phase) and
/// `--request-cancellation-rate`/`-delay`, checked as AIPerf 0.13 checks them (`PhaseConfig`'s `ge=1`,
/// `CLIConfig`'s `gt=0, le=100` and `ge=0`, `_converter_profiling.py` `apply_cancellation`), with the first one set.
fn credit_flags(
    ctx: &mut Ctx,
    m: &mut MapReader<'_>,
    checks: CreditChecks,
) -> Result<(AiperfCredits, Option<(String, u32)>), WorkloadError> {
    let CreditChecks {
        seed,
        warmup,
        streaming,
        concurrency,
        rate: has_rate,
    } = checks;
    let mut first: Option<(String, u32)> = None;
    let mut note = |f: &At<'_>| {
        if first.is_none() {
            first = Some((f.path.clone(), f.line));
        }
    };
    // `--*concurrency-ramp-duration` (`gt=0`): seconds.
    let mut ramp = |name: &str,
                    m: &mut MapReader<'_>,
                    ctx: &mut Ctx|
     -> Result<Option<(Duration, u32)>, WorkloadError> {
        let Some(f) = m.get(name) else {
            return Ok(None);
        };
        note(&f);
        let secs = number(ctx, &f)?;
        if !(secs.is_finite() && secs > 0.0) {
            return Err(f.invalid(
                ctx,
                format!("must be greater than 0 (seconds), found {secs}"),
            ));
        }
        limits::check(ctx, &f, Limit::Duration, secs)?;
        Ok(Some((Duration::from_secs_f64(secs), f.line)))
    };
    let rate_ramp = ramp("request-rate-ramp-duration", m, ctx)?;
    let warmup_rate_ramp = ramp("warmup-request-rate-ramp-duration", m, ctx)?;
    let session_ramp = ramp("concurrency-ramp-duration", m, ctx)?;
    let prefill_ramp = ramp("prefill-concurrency-ramp-duration", m, ctx)?;
    let warmup_session_ramp = ramp("warmup-concurrency-ramp-duration", m, ctx)?;
    let warmup_prefill_ramp = ramp("warmup-prefill-concurrency-ramp-duration", m, ctx)?;
    let mut slots = |name: &str, m: &mut MapReader<'_>| -> Result<Option<u32>, WorkloadError> {
        let Some(f) = m.get(name) else {
            return Ok(None);
        };
        note(&f);
        let n = positive(ctx, &f)?;
        limits::check(ctx, &f, Limit::Concurrency, n as f64)?;
        // `AIPerfConfig.validate_prefill_requires_streaming` and `PhaseConfig`'s check against the concurrency.
        if !streaming {
            return Err(f.invalid(
                ctx,
                "requires streaming (AIPerf refuses it: a prefill slot is released at the request's first token; \
                 add --streaming)",
            ));
        }
        if let Some(limit) = concurrency
            && n > u64::from(limit)
        {
            return Err(f.invalid(
                ctx,
                format!(
                    "{n} is more than --concurrency {limit} (AIPerf refuses it: prefill_concurrency must be <= \
                     concurrency)"
                ),
            ));
        }
        Ok(Some(u32::try_from(n).map_err(|_| {
            f.invalid(ctx, format!("{n} is too large"))
        })?))
    };
    let prefill_concurrency = slots("prefill-concurrency", m)?;
    let warmup_field_line = m.get("warmup-prefill-concurrency").map(|f| f.line);
    let warmup_prefill_concurrency = slots("warmup-prefill-concurrency", m)?;
    if let (Some(line), 0) = (warmup_field_line, warmup) {
        ctx.warn(
            "warmup-prefill-concurrency",
            line,
            WarningKind::Ignored,
            "there is no warm-up phase (--warmup-request-count)",
        );
    }
    let rate = match m.get("request-cancellation-rate") {
        Some(f) => {
            note(&f);
            let percent = number(ctx, &f)?;
            if !(percent > 0.0 && percent <= 100.0) {
                return Err(f.invalid(
                    ctx,
                    format!(
                        "must be greater than 0 and at most 100 (a percentage), found {percent}"
                    ),
                ));
            }
            Some(percent)
        }
        None => None,
    };
    let delay = match m.get("request-cancellation-delay") {
        Some(f) => {
            let secs = number(ctx, &f)?;
            if !(secs.is_finite() && secs >= 0.0) {
                return Err(f.invalid(ctx, format!("must be at least 0 (seconds), found {secs}")));
            }
            limits::check(ctx, &f, Limit::Duration, secs)?;
            if rate.is_none() {
                return Err(f.invalid(
                    ctx,
                    "requires --request-cancellation-rate to be set (AIPerf refuses it: cancellation is disabled \
                     when the rate is unset)",
                ));
            }
            Duration::from_secs_f64(secs)
        }
        None => Duration::ZERO,
    };
    // `_create_rampers` ramps only what the phase has (`if config.concurrency_ramp_duration_sec and
    // config.concurrency`): a ramp of nothing is said to do nothing.
    let warmup_prefill = warmup_prefill_concurrency.or(prefill_concurrency);
    // A rate ramp needs the rate loop's rate: AIPerf's user-centric strategy cannot take one (it warns and keeps
    // the rate fixed) and a burst has none.
    let rated = has_rate.then_some(1);
    for (name, ramp, of) in [
        ("request-rate-ramp-duration", rate_ramp, rated),
        ("warmup-request-rate-ramp-duration", warmup_rate_ramp, rated),
        ("concurrency-ramp-duration", session_ramp, concurrency),
        (
            "prefill-concurrency-ramp-duration",
            prefill_ramp,
            prefill_concurrency,
        ),
        (
            "warmup-concurrency-ramp-duration",
            warmup_session_ramp,
            concurrency,
        ),
        (
            "warmup-prefill-concurrency-ramp-duration",
            warmup_prefill_ramp,
            warmup_prefill,
        ),
    ] {
        if let (Some((_, line)), None) = (ramp, of) {
            ctx.warn(
                name,
                line,
                WarningKind::Ignored,
                "the phase has nothing to ramp (AIPerf ramps the phase's --concurrency or \
                 --prefill-concurrency from 1, and the rate of a --request-rate phase)",
            );
        }
    }
    let only =
        |ramp: Option<(Duration, u32)>, of: Option<u32>| ramp.filter(|_| of.is_some()).map(|r| r.0);
    let credits = AiperfCredits {
        // Read with the rate (`load`), whose place it takes.
        rate_series: None,
        prefill_concurrency,
        warmup_prefill_concurrency,
        cancellation: rate.map(|percent| AiperfCancellation {
            percent,
            delay,
            seed,
        }),
        ramps: AiperfRamps {
            session: only(session_ramp, concurrency),
            prefill: only(prefill_ramp, prefill_concurrency),
            rate: only(rate_ramp, rated),
        },
        // `_warmup_ramps`: the warm-up's own, else the profiling phase's.
        warmup_ramps: AiperfRamps {
            session: only(warmup_session_ramp.or(session_ramp), concurrency),
            prefill: only(warmup_prefill_ramp.or(prefill_ramp), warmup_prefill),
            rate: only(warmup_rate_ramp.or(rate_ramp), rated),
        },
    };
    Ok((credits, first))
}

/// What AIPerf's user-centric phase is checked against.
struct UserCentricChecks<'a, 'n> {
    users: u32,
    /// `--user-centric-rate`'s line.
    line: u32,
    /// The request count, AIPerf's default of 10 included.
    requests: Option<u64>,
    sessions: Option<u64>,
    concurrency: Option<&'a At<'n>>,
    input_file: Option<&'a At<'n>>,
    turn_mean: u64,
}

/// `UserCentricPhase.validate_user_centric_constraints` and `_validate_profiling`'s turn check, and what llmbench
/// does not build beside it.
fn user_centric_checks(ctx: &Ctx, c: UserCentricChecks<'_, '_>) -> Result<(), WorkloadError> {
    let users = u64::from(c.users);
    if let Some(requests) = c.requests
        && requests < users
    {
        return Err(ctx.invalid(
            "user-centric-rate",
            c.line,
            format!(
                "--request-count ({requests}) must be >= --num-users ({users}). Each user needs at least one \
                 request (AIPerf refuses it; without --request-count a run is 10 requests)"
            ),
        ));
    }
    if let Some(sessions) = c.sessions
        && sessions < users
    {
        return Err(ctx.invalid(
            "user-centric-rate",
            c.line,
            format!(
                "--num-sessions ({sessions}) must be >= --num-users ({users}). Each user needs at least one \
                 session (AIPerf refuses it)"
            ),
        ));
    }
    if let Some(f) = c.input_file {
        return Err(f.unsupported(
            ctx,
            "--user-centric-rate over an input file (llmbench runs AIPerf's user-centric phase over its \
             synthetic multi-turn conversations)",
        ));
    }
    if c.turn_mean < 2 {
        return Err(ctx.invalid(
            "user-centric-rate",
            c.line,
            "User-centric rate mode requires --session-turns-mean >= 2. For single-turn workloads, use \
             --request-rate instead (AIPerf refuses it)",
        ));
    }
    if let Some(f) = c.concurrency {
        return Err(f.unsupported(
            ctx,
            "--concurrency beside --user-centric-rate (AIPerf then holds each new user's first turn until a \
             session slot frees; llmbench's user-centric schedule is open-loop only)",
        ));
    }
    Ok(())
}

/// The one stage of a synthetic run: AIPerf's profiling phase, after its warm-up phase if any. A plain
/// concurrency burst by count is llmbench's closed loop (AIPerf's semaphore with no gaps is one); a rate, a
/// duration or a warm-up is AIPerf's own rate loop.
/// What ends AIPerf's profiling phase besides a duration: a request count and a session count (the first
/// reached wins), and whether its sessions are conversations (which always run AIPerf's rate loop).
struct Bounds {
    requests: Option<u64>,
    sessions: Option<u64>,
    conversations: bool,
}

fn synthetic_stage(load: &Load, concurrency: Option<u32>, bounds: Bounds) -> Stage {
    let limit = match load.duration {
        Some(d) => StageLimit::duration(d),
        // A single-turn session is one request, so a session count is a request count.
        None if !bounds.conversations => StageLimit {
            requests: match (bounds.requests, bounds.sessions) {
                (Some(r), Some(s)) => Some(r.min(s)),
                (r, s) => r.or(s),
            },
            ..StageLimit::default()
        },
        None => StageLimit {
            requests: bounds.requests,
            ..StageLimit::default()
        },
    };
    let sessions = if bounds.conversations {
        bounds.sessions
    } else {
        None
    };
    let (kind, arrival) = match (load.pace, load.duration) {
        (AiperfPace::Burst, None)
            if load.warmup == 0
                && !bounds.conversations
                && load.credits == AiperfCredits::default() =>
        {
            (
                LoadKind::Concurrent,
                Arrival::Closed {
                    concurrency: concurrency.unwrap_or(DEFAULT_CONCURRENCY),
                    rampup: Duration::ZERO,
                },
            )
        }
        (pace, duration) => (
            match pace {
                AiperfPace::Poisson { .. } => LoadKind::Poisson,
                AiperfPace::Gamma { .. } => LoadKind::Gamma,
                AiperfPace::UserCentric { .. } => LoadKind::UserCentric,
                AiperfPace::Constant { .. } => LoadKind::Constant,
                AiperfPace::Burst => LoadKind::Concurrent,
            },
            Arrival::AiperfRate {
                pace,
                // The burst needs its semaphore: AIPerf sets concurrency 1 when none is given.
                concurrency: match pace {
                    AiperfPace::Burst => Some(concurrency.unwrap_or(DEFAULT_CONCURRENCY)),
                    _ => concurrency,
                },
                grace: duration.and(load.grace),
                warmup_requests: load.warmup,
                sessions,
                credits: load.credits.clone(),
            },
        ),
    };
    Stage {
        load: kind,
        arrival,
        limit,
        max_concurrency: None,
        warmup: None,
        cooldown: None,
    }
}

/// `--fixed-schedule`, `--fixed-schedule-auto-offset`, `--fixed-schedule-start-offset`,
/// `--fixed-schedule-end-offset` (ms) and `--fixed-schedule-speedup`, checked as AIPerf's `InputConfig` checks them.
fn fixed_schedule(
    ctx: &Ctx,
    m: &mut MapReader<'_>,
) -> Result<(FixedSchedule, Option<(String, u32)>), WorkloadError> {
    let mut schedule = FixedSchedule::default();
    let mut first: Option<(String, u32)> = None;
    if let Some(f) = m.take("fixed-schedule") {
        if !flag(ctx, &f)? {
            return Err(f.unsupported(
                ctx,
                "turning the fixed schedule off for a trace with timestamps",
            ));
        }
        first = Some((f.path.clone(), f.line));
    }
    if let Some(f) = m.take("fixed-schedule-auto-offset") {
        schedule.auto_offset = flag(ctx, &f)?;
        first.get_or_insert((f.path.clone(), f.line));
    }
    let start = m.get("fixed-schedule-start-offset");
    if let Some(f) = &start {
        if schedule.auto_offset {
            return Err(f.invalid(
                ctx,
                "cannot be used together with fixed-schedule-auto-offset (AIPerf refuses it)",
            ));
        }
        schedule.start_offset_ms = Some(non_negative(ctx, f)?);
        first.get_or_insert((f.path.clone(), f.line));
    }
    if let Some(f) = m.get("fixed-schedule-end-offset") {
        let end = non_negative(ctx, &f)?;
        if schedule.start_offset_ms.is_some_and(|s| s > end) {
            return Err(f.invalid(
                ctx,
                "must be at least fixed-schedule-start-offset (AIPerf refuses it)",
            ));
        }
        schedule.end_offset_ms = Some(end);
        first.get_or_insert((f.path.clone(), f.line));
    }
    if let Some(f) = m.get("fixed-schedule-speedup") {
        let v = number(ctx, &f)?;
        if !(v.is_finite() && v > 0.0) {
            return Err(f.invalid(ctx, format!("must be a number greater than 0, found {v}")));
        }
        schedule.speedup = v;
        first.get_or_insert((f.path.clone(), f.line));
    }
    Ok((schedule, first))
}

/// `--extra-inputs` (or a list of them): merged into every request body after AIPerf's own fields, later entries
/// winning (`payload.update(extra)` in `openai_chat.py`/`openai_completions.py`). `ignore_eos` is also what
/// llmbench's records say of each request's length; fields that decide what llmbench sends or parses are refused.
fn extra_inputs(ctx: &Ctx, f: &At<'_>, api: &mut Api) -> Result<(), WorkloadError> {
    for (name, value) in pairs(ctx, f)? {
        match name.as_str() {
            "ignore_eos" => match value {
                serde_json::Value::Bool(on) => api.ignore_eos = on,
                other => {
                    return Err(f.invalid(
                        ctx,
                        format!(
                            "the extra input `ignore_eos` must be true or false, found {other}"
                        ),
                    ));
                }
            },
            "stream"
            | "stream_options"
            | "model"
            | "messages"
            | "prompt"
            | "max_tokens"
            | "max_completion_tokens"
            | "n" => {
                return Err(f.unsupported(
                    ctx,
                    format!(
                        "the extra input `{name}` (llmbench builds it from the other flags and measures by it: \
                         use --model, --streaming or --osl)"
                    ),
                ));
            }
            _ => {
                // A later entry replaces an earlier one, and moves to the end, as AIPerf's dict does.
                api.extra_body.shift_remove(&name);
                api.extra_body.insert(name, value);
            }
        }
    }
    Ok(())
}

/// `--header` (`-H`): `Header:Value` pairs sent with every request, parsed as the extra inputs are.
fn headers(ctx: &Ctx, f: &At<'_>, api: &mut Api) -> Result<(), WorkloadError> {
    for (name, value) in pairs(ctx, f)? {
        let value = match value {
            serde_json::Value::String(s) => s,
            other => other.to_string(),
        };
        api.headers.push((name, value));
    }
    Ok(())
}

/// `--goodput "time_to_first_token:100 inter_token_latency:3.4"`: AIPerf's `parse_str_as_numeric_dict` (space-
/// separated `tag:value`, values floats, a repeated tag's last value) in each metric's display unit, ms for the
/// three latencies llmbench measures as AIPerf does.
fn goodput(ctx: &Ctx, f: &At<'_>) -> Result<Vec<GoodputConstraint>, WorkloadError> {
    let raw = text(ctx, f)?;
    if raw.trim().is_empty() {
        return Err(f.invalid(
            ctx,
            "expected space-separated `tag:value` pairs, found nothing",
        ));
    }
    let mut out: Vec<GoodputConstraint> = Vec::new();
    for item in raw.split_whitespace() {
        let Some((tag, value)) = item.split_once(':') else {
            return Err(f.invalid(ctx, format!("`{item}` is not in `tag:value` format")));
        };
        let metric = match tag.trim() {
            "time_to_first_token" => SloMetric::Ttft,
            "inter_token_latency" => SloMetric::Itl,
            "request_latency" => SloMetric::E2e,
            other => {
                return Err(f.unsupported(
                    ctx,
                    format!(
                        "the goodput metric `{other}` (time_to_first_token, inter_token_latency and \
                         request_latency are supported)"
                    ),
                ));
            }
        };
        let ms: f64 = value.trim().parse().map_err(|_| {
            f.invalid(
                ctx,
                format!("the value for `{tag}` must be numeric, found `{value}`"),
            )
        })?;
        if !(ms.is_finite() && ms >= 0.0) {
            return Err(f.invalid(
                ctx,
                format!("the value for `{tag}` must be at least 0, found {ms}"),
            ));
        }
        out.retain(|c| c.metric != metric);
        out.push(GoodputConstraint {
            metric,
            limit: Duration::from_secs_f64(ms / 1000.0),
        });
    }
    Ok(out)
}

/// AIPerf's `parse_str_or_dict_as_tuple_list` (`aiperf/common/config/config_validators.py`): a JSON object when the
/// text starts with `{`, else comma-separated `name:value` items whose values `coerce_value` types; a list is each
/// of its items in turn.
fn pairs(ctx: &Ctx, f: &At<'_>) -> Result<Vec<(String, serde_json::Value)>, WorkloadError> {
    let listed;
    let items: Vec<&At<'_>> = match &f.node.value {
        super::yaml::Value::Seq(_) => {
            listed = f.seq(ctx)?;
            listed.iter().collect()
        }
        _ => vec![f],
    };
    let mut pairs = Vec::new();
    for item in items {
        let raw = text(ctx, item)?;
        if raw.starts_with('{') {
            let map: serde_json::Map<String, serde_json::Value> = serde_json::from_str(&raw)
                .map_err(|e| item.invalid(ctx, format!("not a valid JSON object: {e}")))?;
            pairs.extend(map);
            continue;
        }
        for part in raw.split(',') {
            let mut halves = part.split(':');
            match (halves.next(), halves.next(), halves.next()) {
                (Some(name), Some(value), None) => {
                    pairs.push((name.trim().to_owned(), coerce_value(value.trim())));
                }
                // Python's `key, value = item.split(":")` fails on anything but exactly one colon.
                _ => {
                    return Err(item.invalid(
                        ctx,
                        format!("`{part}` is not `name:value` with exactly one colon (AIPerf refuses it)"),
                    ));
                }
            }
        }
    }
    Ok(pairs)
}

/// AIPerf's `coerce_value`: `true`/`false` (any case) → a bool, `none`/`null` → null, plain digits without a
/// leading zero (`0` itself, and with a leading `-`) → an int, digits with one `.` → a float, else the text.
fn coerce_value(value: &str) -> serde_json::Value {
    use serde_json::Value;
    let lower = value.to_ascii_lowercase();
    if lower == "true" || lower == "false" {
        return Value::Bool(lower == "true");
    }
    if lower == "none" || lower == "null" {
        return Value::Null;
    }
    // `str.isdigit()`: non-empty, every character a digit.
    let digits = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
    let int = |s: &str| s.parse::<i64>().map(Value::from).ok();
    if digits(value)
        && (!value.starts_with('0') || value == "0")
        && let Some(v) = int(value)
    {
        return v;
    }
    if let Some(rest) = value.strip_prefix('-')
        && digits(rest)
        && (!value.starts_with("-0") || value == "-0")
        && let Some(v) = int(value)
    {
        return v;
    }
    let without_dot = value.replacen('.', "", 1);
    if value.matches('.').count() == 1
        && (digits(&without_dot) || without_dot.strip_prefix('-').is_some_and(digits))
        && let Ok(v) = value.parse::<f64>()
        && let Some(n) = serde_json::Number::from_f64(v)
    {
        return Value::Number(n);
    }
    Value::String(value.to_owned())
}

/// A length of `mean` tokens with AIPerf's stddev: `sample_positive_normal_integer(mean, stddev)` per dataset
/// entry; a stddev of 0 draws the mean itself.
pub(super) fn lengths(mean: u64, stddev: Option<f64>) -> TokenLengths {
    match stddev {
        Some(std_dev) if std_dev > 0.0 => TokenLengths {
            shape: LengthShape::PositiveNormal {
                mean: mean as f64,
                std_dev,
            },
            total_count: None,
        },
        _ => TokenLengths::fixed(mean),
    }
}

/// `--isl-stddev`, `--osl-stddev`: AIPerf takes any float and numpy refuses a negative scale.
fn stddev(ctx: &Ctx, f: &At<'_>) -> Result<f64, WorkloadError> {
    let v = number(ctx, f)?;
    if !(v.is_finite() && v >= 0.0) {
        return Err(f.invalid(ctx, format!("must be at least 0, found {v}")));
    }
    limits::check(ctx, f, Limit::Tokens, v)?;
    Ok(v)
}

pub(super) fn non_negative(ctx: &Ctx, f: &At<'_>) -> Result<u64, WorkloadError> {
    let v = number(ctx, f)?;
    if v.fract() != 0.0 || v < 0.0 {
        return Err(f.invalid(
            ctx,
            format!("must be a whole number of at least 0, found {v}"),
        ));
    }
    Ok(v as u64)
}

pub(super) fn positive(ctx: &Ctx, f: &At<'_>) -> Result<u64, WorkloadError> {
    let n = non_negative(ctx, f)?;
    if n == 0 {
        return Err(f.invalid(ctx, "must be at least 1"));
    }
    Ok(n)
}

fn tokens(ctx: &Ctx, f: &At<'_>) -> Result<u64, WorkloadError> {
    let n = positive(ctx, f)?;
    limits::check(ctx, f, Limit::Tokens, n as f64)?;
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{ParseOptions, parse_profile};

    /// The upstream profiles (`llm-d-benchmark: workload/profiles/aiperf/*.yaml.in`), rendered with test values.
    fn render(template: &str) -> String {
        template
            .replace(
                "REPLACE_ENV_LLMDBENCH_DEPLOY_CURRENT_MODEL",
                "Qwen/Qwen3-0.6B",
            )
            .replace(
                "REPLACE_ENV_LLMDBENCH_HARNESS_STACK_ENDPOINT_URL",
                "http://stack:8000",
            )
            .replace(
                "REPLACE_ENV_LLMDBENCH_RUN_DATASET_DIR",
                "/requests/datasets",
            )
            .replace("REPLACE_ENV_LLMDBENCH_RUN_DATASET_FILE", "trace.jsonl")
    }

    fn parse_text(text: &str) -> Result<Workload, WorkloadError> {
        parse_profile(Harness::Aiperf, "p.yaml", text, &ParseOptions::default()).map(|p| p.workload)
    }

    /// The credit flags of the only stage (`AiperfCredits::default()` when it is not AIPerf's rate loop).
    fn credits(w: &Workload) -> AiperfCredits {
        match &w.stages[0].arrival {
            Arrival::AiperfRate { credits, .. } => credits.clone(),
            _ => AiperfCredits::default(),
        }
    }

    /// `--prefill-concurrency` and `--request-cancellation-rate`/`-delay` become the rate loop's credits (a
    /// concurrency burst with them is the rate loop, not the closed loop), seeded by `--random-seed`.
    #[test]
    fn prefill_concurrency_and_request_cancellation_ride_on_aiperfs_rate_loop() {
        let w = parse_text(
            "model: m\nstreaming: true\nconcurrency: 8\nprefill-concurrency: 2\nwarmup-request-count: 3\n\
             warmup-prefill-concurrency: 1\nrequest-cancellation-rate: 12.5\nrequest-cancellation-delay: 0.25\n\
             random-seed: 9\n",
        )
        .expect("parses");
        assert_eq!(
            credits(&w),
            AiperfCredits {
                prefill_concurrency: Some(2),
                warmup_prefill_concurrency: Some(1),
                cancellation: Some(AiperfCancellation {
                    percent: 12.5,
                    delay: Duration::from_millis(250),
                    seed: 9,
                }),
                ..AiperfCredits::default()
            }
        );
        assert!(matches!(
            w.stages[0].arrival,
            Arrival::AiperfRate {
                pace: AiperfPace::Burst,
                concurrency: Some(8),
                ..
            }
        ));
        // A rate alone: cancelled at once after the send (`delay` defaults to 0).
        let w = parse_text("model: m\nrequest-cancellation-rate: 100\n").expect("parses");
        assert_eq!(
            credits(&w).cancellation.map(|c| (c.percent, c.delay)),
            Some((100.0, Duration::ZERO))
        );
    }

    /// `--concurrency-ramp-duration` and its prefill and warm-up forms: the warm-up takes its own, else the
    /// profiling phase's (`_warmup_ramps`); a ramp of slots the phase does not have is said to do nothing.
    #[test]
    fn concurrency_ramps_are_read_per_phase_with_the_warmups_falling_back_to_the_profiling_ones() {
        let w = parse_text(
            "model: m\nstreaming: true\nconcurrency: 6\nprefill-concurrency: 3\nconcurrency-ramp-duration: 2\n\
             prefill-concurrency-ramp-duration: 1.5\nwarmup-request-count: 2\n\
             warmup-concurrency-ramp-duration: 0.5\n",
        )
        .expect("parses");
        let c = credits(&w);
        let s = Duration::from_secs_f64;
        assert_eq!(
            c.ramps,
            AiperfRamps {
                session: Some(s(2.0)),
                prefill: Some(s(1.5)),
                rate: None,
            }
        );
        assert_eq!(
            c.warmup_ramps,
            AiperfRamps {
                session: Some(s(0.5)),
                prefill: Some(s(1.5)),
                rate: None,
            }
        );
        // A rate ramp needs a rate: a burst has none, so it is said to do nothing.
        let w = parse_text("model: m\nrequest-rate: 5\nrequest-rate-ramp-duration: 4\n")
            .expect("parses");
        assert_eq!(credits(&w).ramps.rate, Some(s(4.0)));
        assert_eq!(credits(&w).warmup_ramps.rate, Some(s(4.0)));
        let parsed = parse_profile(
            Harness::Aiperf,
            "p.yaml",
            "model: m\nconcurrency: 2\nrequest-rate-ramp-duration: 4\n",
            &ParseOptions::default(),
        )
        .expect("parses");
        assert_eq!(credits(&parsed.workload).ramps.rate, None);
        assert_eq!(parsed.warnings[0].key, "request-rate-ramp-duration");
        let parsed = parse_profile(
            Harness::Aiperf,
            "p.yaml",
            "model: m\nrequest-rate: 5\nconcurrency-ramp-duration: 3\n",
            &ParseOptions::default(),
        )
        .expect("parses");
        assert_eq!(credits(&parsed.workload).ramps, AiperfRamps::default());
        assert_eq!(parsed.warnings[0].key, "concurrency-ramp-duration");
        assert!(parsed.warnings[0].message.contains("nothing to ramp"));
    }

    /// `--request-rate-series`: a JSON file of points (a list or `{"points": [...]}`) or the points themselves,
    /// checked as `RateSeriesConfig` checks them, instead of `--request-rate`.
    #[test]
    fn a_request_rate_series_is_read_from_its_json_file_or_inline_points() {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join("rates.json");
        std::fs::write(
            &file,
            r#"{"points": [{"time_s": 0, "qps": 2}, {"time_s": 1.5, "qps": 8}]}"#,
        )
        .expect("write");
        let w = parse_text(&format!(
            "model: m\nrequest-rate-series: {}\n",
            file.display()
        ))
        .expect("parses");
        let series = credits(&w).rate_series.expect("a series");
        assert_eq!(&*series.points, &[(0.0, 2.0), (1.5, 8.0)]);
        // The series takes the rate's place: the phase's rate is its first (poisson unless a pattern says).
        assert!(matches!(
            w.stages[0].arrival,
            Arrival::AiperfRate {
                pace: AiperfPace::Poisson { rate, .. },
                ..
            } if rate == 2.0
        ));
        let w = parse_text(
            "model: m\nrequest-rate-mode: constant\nrequest-rate-series: [{time_s: 0, qps: 1}, {time_s: 2, qps: 3}]\n",
        )
        .expect("parses");
        assert_eq!(
            &*credits(&w).rate_series.expect("a series").points,
            &[(0.0, 1.0), (2.0, 3.0)]
        );
        for (series, says) in [
            ("[{time_s: 0, qps: 1}]", "at least two points"),
            (
                "[{time_s: 1, qps: 1}, {time_s: 1, qps: 2}]",
                "strictly increasing",
            ),
            (
                "[{time_s: 0, qps: 1}, {time_s: 1, qps: 0}]",
                "point 1: qps must be greater than 0",
            ),
            (
                "[{time_s: 0, qps: 1}, {time_s: 1, rps: 2}]",
                "point 1: `rps` is not a field",
            ),
            (
                "{points: [], extra: 1}",
                "exactly one top-level key: points",
            ),
            (
                "/nowhere/rates.json",
                "cannot read request-rate series JSON '/nowhere/rates.json'",
            ),
        ] {
            let err = parse_text(&format!("model: m\nrequest-rate-series: {series}\n"))
                .expect_err("refused")
                .to_string();
            assert!(
                err.starts_with("p.yaml:2: `request-rate-series`") && err.contains(says),
                "{series}: {err}"
            );
        }
        for (yaml, says) in [
            (
                "model: m\nrequest-rate: 5\nrequest-rate-series: [{time_s: 0, qps: 1}, {time_s: 2, qps: 3}]\n",
                "--request-rate and --request-rate-series are mutually exclusive",
            ),
            (
                "model: m\nrequest-rate-series: [{time_s: 0, qps: 1}, {time_s: 2, qps: 3}]\n\
                 warmup-request-count: 2\n",
                "a warm-up beside --request-rate-series",
            ),
        ] {
            let err = parse_text(yaml).expect_err("refused").to_string();
            assert!(err.contains(says), "{yaml}: {err}");
        }
    }

    /// AIPerf's linear stepped ramp from 1 to 4 slots over 3 s: slot 2 at 1 s, 3 at 2 s, 4 at 3 s.
    #[test]
    fn a_linear_ramp_adds_one_slot_at_each_even_step_of_its_duration() {
        let s = Duration::from_secs;
        assert_eq!(aiperf_ramp_steps(4, s(3)), [s(1), s(2), s(3)]);
        assert_eq!(
            aiperf_ramp_steps(3, Duration::from_millis(500)),
            [Duration::from_millis(250), Duration::from_millis(500)]
        );
        assert!(aiperf_ramp_steps(1, s(3)).is_empty());
    }

    /// `--concurrency 1,2,4` (or a YAML list) is an AIPerf sweep: refused by name, with what to do instead.
    #[test]
    fn value_lists_that_aiperf_sweeps_are_refused_with_the_way_to_run_them() {
        for yaml in [
            "model: m\nconcurrency: 1,2,4\n",
            "model: m\nrequest-rate: [10, 20]\n",
        ] {
            let err = parse_text(yaml).expect_err("refused").to_string();
            assert!(
                err.starts_with("p.yaml:2: `")
                    && err.contains("which AIPerf sweeps")
                    && err.contains("experiment"),
                "{yaml}: {err}"
            );
        }
        // One value in a list is no sweep (and is read as AIPerf's parser reads it, or refused as a type).
        assert!(parse_text("model: m\nconcurrency: 4\n").is_ok());
    }

    #[test]
    fn credit_flags_are_checked_as_aiperf_checks_them() {
        for (yaml, says) in [
            (
                "model: m\nrequest-cancellation-delay: 1\n",
                "p.yaml:2: `request-cancellation-delay`: requires --request-cancellation-rate",
            ),
            (
                "model: m\nrequest-cancellation-rate: 0\n",
                "p.yaml:2: `request-cancellation-rate`: must be greater than 0 and at most 100",
            ),
            (
                "model: m\nrequest-cancellation-rate: 100.5\n",
                "must be greater than 0 and at most 100 (a percentage), found 100.5",
            ),
            (
                "model: m\nrequest-cancellation-rate: 5\nrequest-cancellation-delay: -1\n",
                "p.yaml:3: `request-cancellation-delay`: must be at least 0",
            ),
            (
                "model: m\nprefill-concurrency: 2\n",
                "p.yaml:2: `prefill-concurrency`: requires streaming",
            ),
            (
                "model: m\nstreaming: true\nconcurrency: 2\nprefill-concurrency: 3\n",
                "p.yaml:4: `prefill-concurrency`: 3 is more than --concurrency 2",
            ),
            (
                "model: m\nstreaming: true\nprefill-concurrency: 0\n",
                "p.yaml:3: `prefill-concurrency`",
            ),
            (
                "model: m\nstreaming: true\nprefill-concurrency: 2\nprefill-concurrency-ramp-duration: 0\n",
                "p.yaml:4: `prefill-concurrency-ramp-duration`: must be greater than 0",
            ),
            (
                "model: m\nstreaming: true\nuser-centric-rate: 2\nnum-users: 2\nprefill-concurrency: 1\n\
                 conversation-turn-mean: 2\n",
                "p.yaml:3: `user-centric-rate`: prefill concurrency beside --user-centric-rate",
            ),
            (
                "model: m\nstreaming: true\ninput-file: t.jsonl\ncustom-dataset-type: mooncake_trace\n\
                 request-cancellation-rate: 10\n",
                "p.yaml:5: `request-cancellation-rate`: prefill concurrency or request cancellation over a \
                 mooncake trace",
            ),
        ] {
            let err = parse_text(yaml).expect_err("refused").to_string();
            assert!(err.contains(says), "{yaml}: {err}");
        }
        // A warm-up's own prefill slots without a warm-up phase do nothing: said so.
        let parsed = parse_profile(
            Harness::Aiperf,
            "p.yaml",
            "model: m\nstreaming: true\nwarmup-prefill-concurrency: 2\n",
            &ParseOptions::default(),
        )
        .expect("parses");
        assert_eq!(parsed.warnings[0].key, "warmup-prefill-concurrency");
    }

    /// The rankings endpoint types: AIPerf's rankings composer and each type's path; without `rankings-*` flags
    /// `RankingsConfig`'s defaults (10 passages of 128 tokens, a query of 32), not the flags' own (1, 550, 550).
    #[test]
    fn rankings_endpoint_types_build_aiperfs_rankings_dataset() {
        for (name, wire, path) in [
            ("nim_rankings", RankingsWire::Nim, "/v1/ranking"),
            ("cohere_rankings", RankingsWire::Cohere, "/v2/rerank"),
            ("hf_tei_rankings", RankingsWire::HfTei, "/rerank"),
        ] {
            let w = parse_text(&format!("model: m\nendpoint-type: {name}\n")).expect("parses");
            assert_eq!(
                (w.api.kind, w.api.rankings, w.api.path()),
                (ApiKind::Rerank, Some(wire), path)
            );
            assert_eq!(
                w.data,
                DataSpec::AiperfRankings(AiperfRankings {
                    entries: 100,
                    passages_mean: 10,
                    passages_stddev: 0,
                    query: TokenLengths::fixed(32),
                    passage: TokenLengths::fixed(128),
                })
            );
        }
        let w = parse_text(
            "model: m\nendpoint-type: cohere_rankings\nrequest-count: 7\nrankings-passages-mean: 4\n\
             rankings-passages-stddev: 2\nrankings-passages-prompt-token-mean: 50\n\
             rankings-passages-prompt-token-stddev: 5\nrankings-query-prompt-token-mean: 9\nisl: 20\n\
             url: http://h/v2/rerank\n",
        )
        .expect("parses");
        assert_eq!(
            w.data,
            DataSpec::AiperfRankings(AiperfRankings {
                entries: 7,
                passages_mean: 4,
                passages_stddev: 2,
                query: TokenLengths::fixed(9),
                passage: lengths(50, Some(5.0)),
            })
        );
        // A URL that already ends with the type's path is kept whole (`_dedup_path_overlap`); only `/v1` and
        // `v1/` overlap otherwise, so a `/v2` base would be `/v2/v2/rerank`, as AIPerf sends it.
        assert_eq!(w.api.path(), "/v2/rerank");
    }

    #[test]
    fn rankings_runs_ignore_the_turn_flags_and_refuse_a_sampler() {
        let parsed = parse_profile(
            Harness::Aiperf,
            "p.yaml",
            "model: m\nendpoint-type: nim_rankings\nconversation-turn-mean: 3\nosl: 5\n",
            &ParseOptions::default(),
        )
        .expect("parses");
        assert!(matches!(parsed.workload.data, DataSpec::AiperfRankings(_)));
        for key in ["conversation-turn-mean", "osl"] {
            assert!(
                parsed.warnings.iter().any(|w| w.key == key),
                "{key}: {:?}",
                parsed.warnings
            );
        }
        let err = parse_text("model: m\nendpoint-type: nim_rankings\nsession-header: X-S\n")
            .expect_err("refused");
        assert!(err.to_string().contains("session-header"), "{err}");
    }

    #[test]
    fn rankings_flags_beside_another_endpoint_type_are_ignored_with_a_warning() {
        let parsed = parse_profile(
            Harness::Aiperf,
            "p.yaml",
            "model: m\nendpoint-type: chat\nrankings-passages-mean: 3\n",
            &ParseOptions::default(),
        )
        .expect("parses");
        assert!(matches!(parsed.workload.data, DataSpec::SyntheticText(_)));
        assert!(
            parsed
                .warnings
                .iter()
                .any(|w| w.key == "rankings-passages-mean"),
            "{:?}",
            parsed.warnings
        );
    }

    #[test]
    fn a_rankings_type_over_a_single_turn_file_reads_the_file_and_ignores_the_synthetic_flags() {
        let parsed = parse_profile(
            Harness::Aiperf,
            "p.yaml",
            "model: m\nendpoint-type: hf_tei_rankings\ninput-file: r.jsonl\ncustom-dataset-type: single_turn\n\
             rankings-passages-mean: 3\nnum-dataset-entries: 4\nosl: 5\nisl: 9\nconversation-turn-mean: 2\n\
             request-count: 6\nconcurrency: 2\n",
            &ParseOptions::default(),
        )
        .expect("parses");
        assert_eq!(
            parsed.workload.data,
            DataSpec::AiperfRankingsFile(AiperfRankingsFile {
                path: "r.jsonl".to_owned()
            })
        );
        assert_eq!(parsed.workload.stages[0].limit.requests, Some(6));
        let mut ignored: Vec<&str> = parsed.warnings.iter().map(|w| w.key.as_str()).collect();
        ignored.sort_unstable();
        assert_eq!(
            ignored,
            [
                "conversation-turn-mean",
                "isl",
                "num-dataset-entries",
                "osl",
                "rankings-passages-mean"
            ]
        );
    }

    #[test]
    fn a_rankings_type_refuses_the_other_file_layouts_and_sessions_with_the_reason() {
        let base = "model: m\nendpoint-type: nim_rankings\ninput-file: r.jsonl\n";
        for (rest, says) in [
            (
                "custom-dataset-type: multi_turn\n",
                "p.yaml:4: `custom-dataset-type`",
            ),
            (
                "custom-dataset-type: multi_turn\n",
                "only supports one turn",
            ),
            (
                "custom-dataset-type: random_pool\n",
                "samples the pool's entries",
            ),
            ("custom-dataset-type: mooncake_trace\n", "find no `query`"),
            (
                "custom-dataset-type: sharegpt\n",
                "not a custom dataset type",
            ),
            ("", "p.yaml:3: `input-file`"),
            (
                "custom-dataset-type: single_turn\ndataset-sampling-strategy: random\n",
                "p.yaml:5: `dataset-sampling-strategy`",
            ),
            (
                "custom-dataset-type: single_turn\nsession-header: X-S\n",
                "AIPerf's sessions",
            ),
            (
                "custom-dataset-type: single_turn\nfixed-schedule: true\n",
                "a fixed schedule over a single_turn file",
            ),
            (
                "custom-dataset-type: single_turn\nimage-width-mean: 64\n",
                "images with a rankings endpoint type",
            ),
        ] {
            let err = parse_text(&format!("{base}{rest}"))
                .expect_err(rest)
                .to_string();
            assert!(err.contains(says), "{rest}: {err}");
        }
        // A sequential sampler is the one single_turn takes anyway.
        assert!(
            parse_text(&format!(
                "{base}custom-dataset-type: single_turn\ndataset-sampling-strategy: sequential\n"
            ))
            .is_ok()
        );
    }

    const SYNTHETIC: &str = include_str!("../../../../workload/profiles/aiperf/synthetic.yaml.in");
    const DATASET: &str = include_str!("../../../../workload/profiles/aiperf/dataset.yaml.in");

    fn api(kind: ApiKind, ignore_eos: bool) -> Api {
        Api {
            kind,
            streaming: true,
            ignore_eos,
            model: Some("Qwen/Qwen3-0.6B".to_owned()),
            base_url: Some("http://stack:8000".to_owned()),
            ..Api::default()
        }
    }

    #[test]
    fn the_synthetic_profile_is_a_closed_loop_of_fixed_lengths() {
        let w = parse_text(&render(SYNTHETIC)).expect("parses");
        assert_eq!(w.dialect, Dialect::AiperfFlags);
        // `streaming: none` is the bare `--streaming`; `extra-inputs: ignore_eos:true` goes into every body.
        assert_eq!(w.api, api(ApiKind::Chat, true));
        // isl 1000 / osl 200 with AIPerf's stddev 0: exactly those lengths.
        assert_eq!(
            w.data,
            DataSpec::SyntheticText(SyntheticText {
                prompt: TokenLengths::fixed(1000),
                output: Some(TokenLengths::fixed(200)),
                turns: 1,
                prefix_buckets: Vec::new(),
                // AIPerf 0.13 sizes the dataset by an explicit `--request-count` (500) when neither
                // `--num-dataset-entries` nor `--conversation-num` is given (`_resolve_entries`).
                samples: 500,
                think_time: None,
                images: None,
            })
        );
        // No request rate: AIPerf's concurrency burst, 16 in flight, 500 requests, no warm-up.
        assert_eq!(
            w.stages,
            [Stage {
                load: LoadKind::Concurrent,
                arrival: Arrival::Closed {
                    concurrency: 16,
                    rampup: Duration::ZERO
                },
                limit: StageLimit::requests(500),
                max_concurrency: None,
                warmup: None,
                cooldown: None,
            }]
        );
        assert_eq!(w.warmup_requests, 0);
        assert!(w.report.use_server_output_tokens);
        // `no-server-metrics: none`: the scrape of the server's /metrics is off, as the flag turns AIPerf's off.
        assert!(w.no_server_metrics);
        assert!(
            w.tokenizer
                .as_ref()
                .is_some_and(|t| t.trust_remote_code && t.name_or_path == "Qwen/Qwen3-0.6B")
        );
    }

    #[test]
    fn the_dataset_profile_replays_a_mooncake_trace() {
        let parsed = parse_profile(
            Harness::Aiperf,
            "p.yaml",
            &render(DATASET),
            &ParseOptions::default(),
        )
        .expect("parses");
        let w = parsed.workload;
        assert_eq!(w.api, api(ApiKind::Chat, false));
        assert_eq!(
            w.data,
            DataSpec::MooncakeTrace(MooncakeTraceData {
                path: "/requests/datasets/trace.jsonl".to_owned(),
                block_size: 512,
            })
        );
        // The trace decides: fixed schedule if it has timestamps, else 16 sessions at once; every record is sent.
        assert_eq!(
            w.stages[0].arrival,
            Arrival::MooncakeTrace {
                schedule: FixedSchedule::default(),
                concurrency: 16
            }
        );
        assert_eq!(w.stages[0].limit, StageLimit::default());
        assert!(parsed.warnings.iter().any(|w| w.key == "request-count"));
    }

    #[test]
    fn fixed_schedule_options_are_read_and_checked() {
        let text = "model: m\ninput-file: t.jsonl\ncustom-dataset-type: mooncake_trace\nfixed-schedule-speedup: 2.5\n\
                    fixed-schedule-start-offset: 100\nfixed-schedule-end-offset: 900\nisl-block-size: 16\n";
        let w = parse_text(text).expect("parses");
        assert_eq!(
            w.stages[0].arrival,
            Arrival::MooncakeTrace {
                schedule: FixedSchedule {
                    speedup: 2.5,
                    auto_offset: false,
                    start_offset_ms: Some(100),
                    end_offset_ms: Some(900)
                },
                concurrency: 1
            }
        );
        assert!(matches!(&w.data, DataSpec::MooncakeTrace(d) if d.block_size == 16));
        let both = "model: m\ninput-file: t\ncustom-dataset-type: mooncake_trace\nfixed-schedule-auto-offset: none\n\
                    fixed-schedule-start-offset: 5\n";
        assert!(
            parse_text(both)
                .expect_err("refused")
                .to_string()
                .contains("fixed-schedule-start-offset")
        );
    }

    fn images_of(yaml: &str) -> NormalImages {
        match parse_text(yaml).expect("parses").data {
            DataSpec::SyntheticText(SyntheticText {
                images: Some(images),
                ..
            }) => images,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn any_image_flag_sends_one_512_pixel_jpeg_a_request_unless_told_otherwise() {
        let images = images_of("model: m\nendpoint-type: chat\nimage-width-mean: 64\n");
        assert_eq!(
            images,
            NormalImages {
                per_request: 1,
                width: PixelLength {
                    mean: 64.0,
                    stddev: 0.0
                },
                height: PixelLength {
                    mean: 512.0,
                    stddev: 0.0
                },
                format: ImageFormat::Jpeg,
            }
        );
        let images = images_of(
            "model: m\nendpoint-type: chat\nbatch-size-image: 3\nimage-height-mean: 20\n\
             image-height-stddev: 4\nimage-format: PNG\n",
        );
        assert_eq!(images.per_request, 3);
        assert_eq!(
            images.height,
            PixelLength {
                mean: 20.0,
                stddev: 4.0
            }
        );
        assert_eq!(images.format, ImageFormat::Png);
        let w =
            parse_text("model: m\nendpoint-type: chat\nimage-format: random\n").expect("parses");
        assert!(
            w.api.images,
            "the pre-flight's test request carries an image too"
        );
    }

    #[test]
    fn images_are_refused_where_llmbench_would_not_send_them_as_aiperf_does() {
        for (yaml, says) in [
            (
                "model: m\nendpoint-type: completions\nimage-width-mean: 64\n",
                "`image-width-mean`: images with an endpoint type other than chat",
            ),
            (
                "model: m\nendpoint-type: chat\nconversation-turn-mean: 2\nimage-batch-size: 1\n",
                "`image-batch-size`: images in AIPerf's sessions",
            ),
            (
                "model: m\nendpoint-type: chat\nimage-batch-size: 0\n",
                "`image-batch-size`: image flags with `image-batch-size: 0`",
            ),
            (
                "model: m\nendpoint-type: chat\nimage-source: assets\n",
                "`image-source`: `image-source: assets`",
            ),
            (
                "model: m\nendpoint-type: chat\nimage-format: gif\n",
                "not an image format",
            ),
            (
                "model: m\nendpoint-type: chat\ninput-file: t.jsonl\ncustom-dataset-type: single_turn\n\
                 image-width-mean: 8\n",
                "synthetic images beside an input file",
            ),
        ] {
            let err = parse_text(yaml).expect_err("refused").to_string();
            assert!(err.contains(says), "{yaml}: {err}");
        }
    }

    #[test]
    fn unknown_flags_and_unsupported_values_are_refused_with_their_line() {
        let err = parse_text("model: m\nrequest-rate-series: rates.csv\n")
            .expect_err("refused")
            .to_string();
        assert!(err.starts_with("p.yaml:2: `request-rate-series`"), "{err}");
        let err = parse_text("model: m\nconfig: aiperf.yaml\n")
            .expect_err("refused")
            .to_string();
        assert!(
            err.starts_with("p.yaml:2: `config`")
                && err.contains("give the AIPerf config file itself as the profile"),
            "{err}"
        );
        let err = parse_text("model: m\nextra-inputs: temperature:0.5,stream:false\n")
            .expect_err("refused")
            .to_string();
        assert!(
            err.contains("p.yaml:2: `extra-inputs`") && err.contains("`stream`"),
            "{err}"
        );
        let err = parse_text("model: m\nextra-inputs: url:http://x\n")
            .expect_err("refused")
            .to_string();
        assert!(err.contains("exactly one colon"), "{err}");
        let err = parse_text("model: m\ninput-file: x\ncustom-dataset-type: sharegpt\n")
            .expect_err("refused")
            .to_string();
        assert!(err.contains("p.yaml:3: `custom-dataset-type`"), "{err}");
        let err = parse_text("model: m\nisl: 10\nisl-stddev: -3\n")
            .expect_err("refused")
            .to_string();
        assert!(err.contains("p.yaml:3: `isl-stddev`"), "{err}");
        let err = parse_text("url: http://x\n")
            .expect_err("refused")
            .to_string();
        assert!(err.contains("`model` is required"), "{err}");
    }

    fn aiperf_stage(text: &str) -> Stage {
        let mut w = parse_text(text).expect("parses");
        assert_eq!(w.stages.len(), 1);
        w.stages.remove(0)
    }

    #[test]
    fn gamma_arrivals_come_from_the_pattern_or_from_a_smoothness_alone() {
        // `--arrival-pattern gamma` without a smoothness: `GammaIntervalGenerator` takes 1.0.
        let stage = aiperf_stage(
            "model: m\nrequest-rate: 2\narrival-pattern: gamma\nrandom-seed: 7\nrequest-count: 5\n",
        );
        assert_eq!(stage.load, LoadKind::Gamma);
        assert!(matches!(
            stage.arrival,
            Arrival::AiperfRate {
                pace: AiperfPace::Gamma {
                    rate: 2.0,
                    smoothness: 1.0,
                    seed: 7
                },
                ..
            }
        ));
        // `--vllm-burstiness` alone (no pattern) selects gamma, as `_profiling_phase_type` does; with an explicit
        // gamma pattern a warm-up is paced alike.
        for text in [
            "model: m\nrequest-rate: 2\nvllm-burstiness: 0.25\nrandom-seed: 7\n",
            "model: m\nrequest-rate: 2\nrequest-rate-mode: gamma\narrival-smoothness: 0.25\nrandom-seed: 7\n\
             warmup-request-count: 2\n",
        ] {
            let stage = aiperf_stage(text);
            assert!(
                matches!(
                    stage.arrival,
                    Arrival::AiperfRate {
                        pace: AiperfPace::Gamma {
                            rate: 2.0,
                            smoothness: 0.25,
                            seed: 7
                        },
                        ..
                    }
                ),
                "{text}: {:?}",
                stage.arrival
            );
        }
    }

    #[test]
    fn user_centric_flags_make_the_user_centric_phase_over_conversations() {
        let w = parse_text(
            "model: m\nendpoint-type: chat\nuser-centric-rate: 8\nnum-users: 4\nconversation-turn-mean: 3\n\
             request-count: 12\n",
        )
        .expect("parses");
        assert_eq!(w.stages[0].load, LoadKind::UserCentric);
        assert!(matches!(
            w.stages[0].arrival,
            Arrival::AiperfRate {
                pace: AiperfPace::UserCentric {
                    rate: 8.0,
                    users: 4
                },
                concurrency: None,
                warmup_requests: 0,
                ..
            }
        ));
        assert_eq!(w.stages[0].limit, StageLimit::requests(12));
        assert!(matches!(w.data, DataSpec::AiperfConversations(_)));
        // A request rate and an arrival pattern beside it are not used, and said so at their own lines.
        let parsed = parse_profile(
            Harness::Aiperf,
            "p.yaml",
            "model: m\nuser-centric-rate: 8\nnum-users: 4\nconversation-turn-mean: 3\nrequest-rate: 2\n\
             arrival-pattern: gamma\n",
            &ParseOptions::default(),
        )
        .expect("parses");
        let ignored: Vec<(&str, Option<u32>)> = parsed
            .warnings
            .iter()
            .map(|w| (w.key.as_str(), w.line))
            .collect();
        assert_eq!(
            ignored,
            [("request-rate", Some(5)), ("arrival-pattern", Some(6))]
        );
        assert!(matches!(
            parsed.workload.stages[0].arrival,
            Arrival::AiperfRate {
                pace: AiperfPace::UserCentric {
                    rate: 8.0,
                    users: 4
                },
                ..
            }
        ));
    }

    #[test]
    fn a_request_rate_is_poisson_by_default_seeded_by_random_seed_and_capped_by_concurrency() {
        let stage = aiperf_stage(
            "model: m\nrequest-rate: 2.5\nconcurrency: 4\nrandom-seed: 42\nnum-requests: 7\n",
        );
        assert_eq!(stage.load, LoadKind::Poisson);
        assert_eq!(
            stage.arrival,
            Arrival::AiperfRate {
                pace: AiperfPace::Poisson {
                    rate: 2.5,
                    seed: 42
                },
                concurrency: Some(4),
                grace: None,
                warmup_requests: 0,
                sessions: None,
                credits: AiperfCredits::default(),
            }
        );
        assert_eq!(stage.limit, StageLimit::requests(7));
        // Without `--random-seed` the gaps come from the run's seed; without `--concurrency` nothing caps them.
        let stage = aiperf_stage("model: m\nrequest-rate: 3\nrequest-rate-mode: constant\n");
        assert_eq!(stage.load, LoadKind::Constant);
        assert_eq!(
            stage.arrival,
            Arrival::AiperfRate {
                pace: AiperfPace::Constant { rate: 3.0 },
                concurrency: None,
                grace: None,
                warmup_requests: 0,
                sessions: None,
                credits: AiperfCredits::default(),
            }
        );
        assert_eq!(stage.limit, StageLimit::requests(10));
        let w = parse_text("model: m\nrequest-rate: 3\n").expect("parses");
        assert!(matches!(
            w.stages[0].arrival,
            Arrival::AiperfRate { pace: AiperfPace::Poisson { seed, .. }, .. } if seed == w.seed
        ));
    }

    #[test]
    fn a_failed_request_threshold_gets_the_grace_floor_of_its_phases_concurrency_and_at_least_ten()
    {
        // `build_failed_request_abort_config`: max(concurrency, 10), a phase without a concurrency counting 1.
        let stage = aiperf_stage(
            "model: m\nconcurrency: 16\nrequest-count: 40\nfailed-request-threshold: 0.25\n",
        );
        assert_eq!(
            stage.limit.failed_request_threshold,
            Some(FailedRequestThreshold {
                ratio: 0.25,
                grace: 16
            })
        );
        let stage = aiperf_stage(
            "model: m\nrequest-rate: 4\nrequest-count: 40\nfailed-request-threshold: 0\n",
        );
        assert_eq!(
            stage.limit.failed_request_threshold,
            Some(FailedRequestThreshold {
                ratio: 0.0,
                grace: 10
            })
        );
        assert_eq!(
            aiperf_stage("model: m\n").limit.failed_request_threshold,
            None
        );
        // `Field(ge=0.0, le=1.0)`.
        let err = parse_text("model: m\nfailed-request-threshold: 1.5\n")
            .expect_err("refused")
            .to_string();
        assert!(
            err.contains("`failed-request-threshold`") && err.contains("between 0 and 1"),
            "{err}"
        );
    }

    #[test]
    fn a_benchmark_duration_replaces_the_count_with_a_thirty_second_grace_by_default() {
        let stage = aiperf_stage("model: m\nrequest-rate: 8\nbenchmark-duration: 60\n");
        assert_eq!(stage.limit, StageLimit::duration(Duration::from_secs(60)));
        assert!(matches!(
            stage.arrival,
            Arrival::AiperfRate { grace: Some(g), .. } if g == Duration::from_secs(30)
        ));
        // No rate: AIPerf's concurrency burst (concurrency 1 unless given) for the duration.
        let stage = aiperf_stage(
            "model: m\nconcurrency: 3\nbenchmark-duration: 2.5\nbenchmark-grace-period: 0\n",
        );
        assert_eq!(stage.load, LoadKind::Concurrent);
        assert_eq!(
            stage.limit,
            StageLimit::duration(Duration::from_millis(2500))
        );
        assert_eq!(
            stage.arrival,
            Arrival::AiperfRate {
                pace: AiperfPace::Burst,
                concurrency: Some(3),
                grace: Some(Duration::ZERO),
                warmup_requests: 0,
                sessions: None,
                credits: AiperfCredits::default(),
            }
        );
    }

    #[test]
    fn a_warmup_request_count_is_a_warmup_phase_of_the_same_pacing() {
        let stage = aiperf_stage("model: m\nrequest-rate: 5\nwarmup-request-count: 3\n");
        assert!(matches!(
            stage.arrival,
            Arrival::AiperfRate {
                warmup_requests: 3,
                ..
            }
        ));
        // A burst with a warm-up is AIPerf's rate loop too (its closed loop has no warm-up phase); the alias works.
        let stage = aiperf_stage("model: m\nconcurrency: 2\nnum-warmup-requests: 4\n");
        assert_eq!(
            stage.arrival,
            Arrival::AiperfRate {
                pace: AiperfPace::Burst,
                concurrency: Some(2),
                grace: None,
                warmup_requests: 4,
                sessions: None,
                credits: AiperfCredits::default(),
            }
        );
        assert_eq!(stage.limit, StageLimit::requests(10));
        // Zero is AIPerf's default: no warm-up, the plain closed loop.
        let stage = aiperf_stage("model: m\nwarmup-request-count: 0\n");
        assert!(matches!(stage.arrival, Arrival::Closed { .. }));
    }

    #[test]
    fn the_quick_start_profile_is_a_poisson_rate_of_64_streamed_chat_requests() {
        const QUICKSTART: &str =
            include_str!("../../../../workload/profiles/aiperf/quickstart.yaml.in");
        let w = parse_text(&render(QUICKSTART)).expect("parses");
        assert_eq!(
            w.api,
            Api {
                endpoint: Some("/v1/chat/completions".to_owned()),
                ..api(ApiKind::Chat, false)
            }
        );
        assert_eq!(
            w.stages[0].arrival,
            Arrival::AiperfRate {
                pace: AiperfPace::Poisson {
                    rate: 32.0,
                    seed: w.seed
                },
                concurrency: None,
                grace: None,
                warmup_requests: 0,
                sessions: None,
                credits: AiperfCredits::default(),
            }
        );
        assert_eq!(w.stages[0].limit, StageLimit::requests(64));
        // No `--isl`/`--osl`: AIPerf's 550-token prompts and no output limit.
        assert!(
            matches!(&w.data, DataSpec::SyntheticText(s) if s.prompt == TokenLengths::fixed(550) && s.output.is_none())
        );
        let custom = parse_text("model: m\ncustom-endpoint: v2/generate\n").expect("parses");
        assert_eq!(custom.api.endpoint.as_deref(), Some("/v2/generate"));
    }

    #[test]
    fn length_stddevs_are_aiperfs_positive_normal_drawn_once_per_dataset_entry() {
        let w = parse_text(
            "model: m\nsynthetic-input-tokens-mean: 200\nsynthetic-input-tokens-stddev: 50\n\
             output-tokens-mean: 100\noutput-tokens-stddev: 20\nnum-dataset-entries: 7\n",
        )
        .expect("parses");
        let normal = |mean: f64, std_dev: f64| TokenLengths {
            shape: LengthShape::PositiveNormal { mean, std_dev },
            total_count: None,
        };
        assert_eq!(
            w.data,
            DataSpec::SyntheticText(SyntheticText {
                prompt: normal(200.0, 50.0),
                output: Some(normal(100.0, 20.0)),
                turns: 1,
                prefix_buckets: Vec::new(),
                samples: 7,
                think_time: None,
                images: None,
            })
        );
        // An output stddev without `--osl` sends no `max_tokens`, as AIPerf samples one only with a mean.
        let w = parse_text("model: m\nosl-stddev: 5\nnum-prompts: 3\n").expect("parses");
        assert!(
            matches!(&w.data, DataSpec::SyntheticText(s) if s.output.is_none() && s.samples == 3)
        );
    }

    #[test]
    fn extra_input_values_are_typed_as_aiperfs_coerce_value_types_them() {
        use serde_json::json;
        for (text, value) in [
            ("true", json!(true)),
            ("FALSE", json!(false)),
            ("None", json!(null)),
            ("null", json!(null)),
            ("42", json!(42)),
            ("0", json!(0)),
            ("-7", json!(-7)),
            ("-0", json!(0)),
            ("007", json!("007")),
            ("-07", json!("-07")),
            ("0.5", json!(0.5)),
            ("-1.25", json!(-1.25)),
            (".5", json!(0.5)),
            ("1.2.3", json!("1.2.3")),
            ("1e3", json!("1e3")),
            ("", json!("")),
            ("text", json!("text")),
        ] {
            assert_eq!(coerce_value(text), value, "{text:?}");
        }
    }

    #[test]
    fn extra_inputs_and_headers_are_read_as_aiperf_reads_them() {
        let w = parse_text(
            "model: m\nextra-inputs:\n  - min_tokens:200\n  - ignore_eos:true\n  - '{\"top_k\": 5, \"min_tokens\": 100}'\n\
             H: 'X-A:1, X-B : two'\n",
        )
        .expect("parses");
        // Later entries win, as `payload.update` with the list of pairs makes them.
        assert_eq!(
            w.api.extra_body.iter().collect::<Vec<_>>(),
            [
                (&"top_k".to_owned(), &serde_json::json!(5)),
                (&"min_tokens".to_owned(), &serde_json::json!(100)),
            ]
        );
        assert!(w.api.ignore_eos);
        assert_eq!(
            w.api.headers,
            [
                ("X-A".to_owned(), "1".to_owned()),
                ("X-B".to_owned(), "two".to_owned())
            ]
        );
    }

    #[test]
    fn goodput_objectives_are_aiperfs_tags_in_milliseconds() {
        let w = parse_text(
            "model: m\nstreaming: true\ngoodput: 'time_to_first_token:100 inter_token_latency:3.40 request_latency:2500 time_to_first_token:50'\n",
        )
        .expect("parses");
        assert_eq!(
            w.goodput,
            [
                GoodputConstraint {
                    metric: SloMetric::Itl,
                    limit: Duration::from_micros(3400)
                },
                GoodputConstraint {
                    metric: SloMetric::E2e,
                    limit: Duration::from_millis(2500)
                },
                // A repeated tag keeps its last value, as a dict does.
                GoodputConstraint {
                    metric: SloMetric::Ttft,
                    limit: Duration::from_millis(50)
                },
            ]
        );
        for (text, says) in [
            (
                "model: m\ngoodput: output_token_throughput_per_user:600\n",
                "output_token_throughput_per_user",
            ),
            ("model: m\ngoodput: time_to_first_token=100\n", "tag:value"),
            (
                "model: m\ngoodput: 'request_latency:900 time_to_first_token:100 inter_token_latency:3'\n",
                "p.yaml:2: `goodput`: metric(s) inter_token_latency, time_to_first_token are not applicable without \
                 streaming",
            ),
            ("model: m\ngoodput: time_to_first_token:fast\n", "numeric"),
        ] {
            let err = parse_text(text).expect_err(text).to_string();
            assert!(
                err.contains("p.yaml:2: `goodput`") && err.contains(says),
                "{err}"
            );
        }
    }

    #[test]
    fn rate_and_duration_flags_are_checked_as_aiperf_checks_them() {
        for (text, key, says) in [
            (
                "model: m\nrequest-count: 5\nbenchmark-duration: 10\n",
                "p.yaml:2: `request-count`",
                "benchmark-duration",
            ),
            (
                "model: m\nbenchmark-grace-period: 5\n",
                "p.yaml:2: `benchmark-grace-period`",
                "only be used with benchmark-duration",
            ),
            (
                "model: m\nrequest-rate: 4\nrequest-rate-mode: concurrency_burst\n",
                "p.yaml:3: `request-rate-mode`",
                "concurrency_burst",
            ),
            (
                "model: m\nrequest-rate: 4\narrival-pattern: bursty\n",
                "p.yaml:3: `arrival-pattern`",
                "not an arrival pattern",
            ),
            (
                "model: m\nrequest-rate: 4\narrival-pattern: poisson\narrival-smoothness: 2\n",
                "p.yaml:4: `arrival-smoothness`",
                "only supported with --arrival-pattern gamma",
            ),
            (
                "model: m\nconcurrency: 4\nvllm-burstiness: 2\n",
                "p.yaml:3: `vllm-burstiness`",
                "only supported with --arrival-pattern gamma and a request rate",
            ),
            (
                "model: m\nnum-users: 4\n",
                "p.yaml:2: `num-users`",
                "requires --user-centric-rate",
            ),
            (
                "model: m\nuser-centric-rate: 4\nconversation-turn-mean: 3\n",
                "p.yaml:2: `num-users`",
                "needs --num-users",
            ),
            (
                "model: m\nuser-centric-rate: 4\nnum-users: 11\nconversation-turn-mean: 3\n",
                "p.yaml:2: `user-centric-rate`",
                "--request-count (10) must be >= --num-users (11)",
            ),
            (
                "model: m\nuser-centric-rate: 4\nnum-users: 3\nnum-sessions: 2\nconversation-turn-mean: 3\n",
                "p.yaml:2: `user-centric-rate`",
                "--num-sessions (2) must be >= --num-users (3)",
            ),
            (
                "model: m\nuser-centric-rate: 4\nnum-users: 3\n",
                "p.yaml:2: `user-centric-rate`",
                "requires --session-turns-mean >= 2",
            ),
            (
                "model: m\nuser-centric-rate: 4\nnum-users: 3\nconversation-turn-mean: 3\nconcurrency: 2\n",
                "p.yaml:5: `concurrency`",
                "open-loop only",
            ),
            (
                "model: m\nuser-centric-rate: 4\nnum-users: 3\nconversation-turn-mean: 3\nwarmup-request-count: 2\n",
                "p.yaml:2: `user-centric-rate`",
                "a warm-up beside --user-centric-rate",
            ),
            (
                "model: m\nuser-centric-rate: 4\nnum-users: 3\nrequest-rate: 2\narrival-smoothness: 2\n",
                "p.yaml:5: `arrival-smoothness`",
                "only supported with --arrival-pattern gamma",
            ),
            (
                "model: m\nrequest-rate: 4\narrival-smoothness: 0\n",
                "p.yaml:3: `arrival-smoothness`",
                "greater than 0",
            ),
            (
                "model: m\nrequest-rate: 4\narrival-smoothness: 2\nwarmup-request-count: 3\n",
                "p.yaml:3: `arrival-smoothness`",
                "warm-up poisson",
            ),
            (
                "model: m\nrequest-rate: 0\n",
                "p.yaml:2: `request-rate`",
                "greater than 0",
            ),
            (
                "model: m\nbenchmark-duration: 0.5\n",
                "p.yaml:2: `benchmark-duration`",
                "at least 1",
            ),
            (
                "model: m\ninput-file: t.jsonl\ncustom-dataset-type: mooncake_trace\nrequest-rate: 2\n",
                "p.yaml:4: `request-rate`",
                "over a trace",
            ),
        ] {
            let err = parse_text(text).expect_err(text).to_string();
            assert!(err.starts_with(key) && err.contains(says), "{text}: {err}");
        }
    }

    #[test]
    fn defaults_are_aiperfs() {
        let w = parse_text("model: m\n").expect("parses");
        assert_eq!(w.api.kind, ApiKind::Chat);
        assert!(!w.api.streaming);
        assert!(
            matches!(&w.data, DataSpec::SyntheticText(s) if s.prompt == TokenLengths::fixed(550) && s.output.is_none())
        );
        assert_eq!(w.stages[0].limit, StageLimit::requests(10));
        assert_eq!(
            w.stages[0].arrival,
            Arrival::Closed {
                concurrency: 1,
                rampup: Duration::ZERO
            }
        );
    }
}
