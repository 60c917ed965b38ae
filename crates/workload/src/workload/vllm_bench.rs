//! `vllm bench serve` / InferenceMAX flag maps → `Workload` (FORMATS 1.4, 3.4, 3.8).
//!
//! Every key is a command-line flag (`--key=value`); `none` (or an empty value) is a bare flag,
//! `executable` names the script and is not a flag. As vLLM's argument parser does, `_` and `-`
//! are interchangeable in flag names. Values reach the tool as text, so quoted numbers are fine.

use std::time::Duration;

use super::ParseOptions;
use super::error::{WarningKind, WorkloadError};
use super::inference_perf::set_default_seed;
use super::limits::{self, Limit};
use super::model::*;
use super::reader::{At, Ctx, MapReader};
use super::yaml::{Key, Node, Value};
use llmbench_data::image::{ImageBucket, RandomImages};

// Defaults of `vllm bench serve` (vllm/benchmarks/serve.py, datasets/arg_utils.py).
const DEFAULT_NUM_PROMPTS: u64 = 1000;
const DEFAULT_RANDOM_INPUT_LEN: u64 = 1024;
const DEFAULT_RANDOM_OUTPUT_LEN: u64 = 128;
const DEFAULT_SONNET_INPUT_LEN: u64 = 550;
const DEFAULT_SONNET_OUTPUT_LEN: u64 = 150;
const DEFAULT_SONNET_PREFIX_LEN: u64 = 200;
const DEFAULT_CUSTOM_OUTPUT_LEN: i64 = 256;

/// Flags that configure one dataset or another: known whichever dataset is chosen, and without effect on the
/// others (vLLM parses them all and reads only the chosen dataset's).
const DATASET_KEYS: [&str; 48] = [
    "dataset-path",
    "random-input-len",
    "random-output-len",
    "random-prefix-len",
    "random-range-ratio",
    "random-batch-size",
    "no-reranker",
    "random-mm-base-items-per-request",
    "random-mm-num-mm-items-range-ratio",
    "random-mm-limit-mm-per-prompt",
    "random-mm-bucket-config",
    "sharegpt-output-len",
    "sonnet-input-len",
    "sonnet-output-len",
    "sonnet-prefix-len",
    "custom-output-len",
    "custom-skip-chat-template",
    "custom-ensure-client-side-data",
    "skip-chat-template",
    "chat-template-kwargs",
    "hf-subset",
    "hf-split",
    "hf-name",
    "hf-output-len",
    "no-stream",
    "spec-bench-output-len",
    "spec-bench-category",
    "speed-bench-dataset-subset",
    "speed-bench-output-len",
    "speed-bench-category",
    "blazedit-min-distance",
    "blazedit-max-distance",
    "asr-max-audio-len-sec",
    "asr-min-audio-len-sec",
    "timed-trace-chunk-hash-size",
    "timed-trace-sec-multiplier",
    "timed-trace-label-timestamp",
    "timed-trace-label-input-length",
    "timed-trace-label-output-length",
    "timed-trace-label-hash-ids",
    "prefix-repetition-prefix-len",
    "prefix-repetition-suffix-len",
    "prefix-repetition-num-prefixes",
    "prefix-repetition-output-len",
    "bfcl-categories",
    "enable-multimodal-chat",
    "disable-shuffle",
    "no-oversample",
];

/// Flags that only change what vLLM prints or where it writes its own files; llmbench writes its results to
/// `--output` whatever they say.
const OUTPUT_ONLY: [(&str, &str); 7] = [
    ("save-result", ""),
    ("disable-tqdm", ""),
    (
        "label",
        "the result label vLLM writes into its JSON; llmbench names results by --run-id",
    ),
    (
        "metadata",
        "KEY=VALUE pairs vLLM copies into its result JSON",
    ),
    (
        "append-result",
        "llmbench writes a fresh result file per run",
    ),
    ("plot-timeline", "vLLM's HTML timeline plot"),
    ("plot-dataset-stats", "vLLM's dataset statistics plot"),
];

/// vLLM's sampling flags as `serve.py` collects them into `sampling_params` (in its order), each with the body
/// field it fills and whether argparse reads it as an `int` (`--top-k`) or a `float`.
const SAMPLING_FLAGS: [(&str, &str, bool); 7] = [
    ("top-p", "top_p", false),
    ("top-k", "top_k", true),
    ("min-p", "min_p", false),
    ("temperature", "temperature", false),
    ("frequency-penalty", "frequency_penalty", false),
    ("presence-penalty", "presence_penalty", false),
    ("repetition-penalty", "repetition_penalty", false),
];

/// Body fields `--extra-body` may not replace: llmbench builds them from the dataset and reads the answer by them
/// (the prompt's token count, whether and how the answer streams).
const BUILT_BODY_FIELDS: [&str; 4] = ["prompt", "messages", "stream", "stream_options"];

pub(crate) fn parse(
    ctx: &mut Ctx,
    harness: Harness,
    doc: &Node,
    options: &ParseOptions,
) -> Result<Workload, WorkloadError> {
    let Some(entries) = doc.entries() else {
        return Err(ctx.wrong_type("(document root)", doc, "a map of command-line flags"));
    };
    let normalized: Vec<(Key, Node)> = entries
        .iter()
        .map(|(k, v)| {
            (
                Key {
                    name: k.name.replace('_', "-"),
                    line: k.line,
                },
                v.clone(),
            )
        })
        .collect();
    let mut m = MapReader::new(&normalized, "", doc.line);
    let mut w = Workload::empty(harness, Dialect::VllmFlags);
    w.api.streaming = true; // vllm bench serve always streams
    w.report.percentiles = vec![99.0];
    w.report.percentile_metrics = vec!["ttft".into(), "tpot".into(), "itl".into()];

    m.skip("executable");
    // The tokenizer is `--tokenizer`, else `--model`; the name sent in requests is `--served-model-name`, else
    // `--model` (serve.py `main_async`). Without `--model` vLLM asks the server for its first model and ignores
    // `--served-model-name`.
    let model = m.get("model").map(|f| text(ctx, &f)).transpose()?;
    let tokenizer = m.get("tokenizer").map(|f| text(ctx, &f)).transpose()?;
    let served = m.get("served-model-name");
    w.api.model = match (&model, served) {
        (Some(_), Some(f)) => Some(text(ctx, &f)?),
        (None, Some(f)) => {
            ctx.warn(
                &f.path,
                f.line,
                WarningKind::Ignored,
                "vLLM uses it only together with `model`; without one it asks the server for its first model",
            );
            None
        }
        (model, None) => model.clone(),
    };
    if let Some(name) = tokenizer.or(model) {
        w.tokenizer = Some(TokenizerSpec {
            name_or_path: name,
            token: None,
            trust_remote_code: false,
        });
    }
    if let Some(f) = m.get("tokenizer-mode") {
        let mode = text(ctx, &f)?;
        // `auto` and `hf` load the Hugging Face fast tokenizer (tokenizer.json), which is what llmbench loads;
        // the others load different tokenizer implementations, whose counts can differ.
        if mode != "auto" && mode != "hf" {
            return Err(f.unsupported(
                ctx,
                format!("tokenizer mode `{mode}` (llmbench loads tokenizer.json, as `hf` does)"),
            ));
        }
    }
    // The `tokenizers` crate never runs model code, so remote code is irrelevant.
    m.skip("trust-remote-code");
    w.api.base_url = match m.get("base-url") {
        Some(f) => Some(text(ctx, &f)?),
        None => {
            let host = m.get("host").map(|f| text(ctx, &f)).transpose()?;
            let port = m.get("port").map(|f| text(ctx, &f)).transpose()?;
            match (host, port) {
                (None, None) => None,
                (h, p) => Some(format!(
                    "http://{}:{}",
                    h.unwrap_or_else(|| "127.0.0.1".into()),
                    p.unwrap_or_else(|| "8000".into())
                )),
            }
        }
    };
    let backend_field = m.get("backend");
    let backend = match &backend_field {
        Some(f) => text(ctx, f)?,
        None => "openai".to_string(),
    };
    let (kind, suffix, api_name) = match backend.as_str() {
        "openai-chat" => (ApiKind::Chat, "chat/completions", "OpenAI Chat Completions"),
        "openai" | "vllm" => (ApiKind::Completion, "completions", "OpenAI Completions"),
        // `async_request_openai_embeddings` and `async_request_vllm_rerank` (`_validate_api_url` names them).
        "openai-embeddings" => (ApiKind::Embeddings, "embeddings", "OpenAI Embeddings"),
        "vllm-rerank" => (ApiKind::Rerank, "rerank", "vLLM score"),
        other => {
            let line = backend_field.as_ref().map_or(0, |f| f.line);
            // vLLM's bench has no backend for the Responses or Messages APIs (`ASYNC_REQUEST_FUNCS`).
            let why = match other {
                "openai-embeddings-chat"
                | "openai-embeddings-clip"
                | "openai-embeddings-vlm2vec" => {
                    " (it sends chat messages, with images for CLIP and VLM2Vec models, to /v1/embeddings; \
                     llmbench sends text embeddings: use `backend: openai-embeddings`)"
                }
                "infinity-embeddings" | "infinity-embeddings-clip" => {
                    " (Infinity's embedding server body; llmbench sends vLLM's: use `backend: \
                     openai-embeddings`)"
                }
                "openai-audio" => " (llmbench sends no audio)",
                // `async_request_vllm_pooling`: `payload | request_func_input.prompt`.
                "vllm-pooling" => {
                    " (it merges each prompt, a JSON object such as an IO-processor plugin's input, into the \
                     /pooling body; vLLM's text datasets make strings, which it cannot merge)"
                }
                _ => "",
            };
            return Err(ctx.unsupported("backend", line, format!("backend `{other}`{why}")));
        }
    };
    w.api.kind = kind;
    if kind.is_pooling() {
        // `_run_pooling_request` posts once and reads the whole answer.
        w.api.streaming = false;
        w.report.percentile_metrics = vec!["e2el".into()];
    }
    // vLLM's default endpoint is /v1/completions whatever the backend, and each backend checks the URL's end
    // (`_validate_api_url`): a chat backend needs `chat/completions`.
    let endpoint_field = m.get("endpoint");
    let path = match &endpoint_field {
        Some(f) => text(ctx, f)?,
        None => "/v1/completions".to_string(),
    };
    if !path.ends_with(suffix) {
        let (key, line) = match &endpoint_field {
            Some(f) => (f.path.clone(), f.line),
            None => (
                "endpoint".to_string(),
                backend_field.as_ref().map_or(0, |f| f.line),
            ),
        };
        return Err(ctx.invalid(
            &key,
            line,
            format!(
                "backend `{backend}` sends {api_name} requests, whose URL must end with `{suffix}` (vLLM refuses \
                 `{path}`, its default being /v1/completions); set `endpoint: /v1/{suffix}`"
            ),
        ));
    }
    if let Some(f) = &endpoint_field
        && w.api.kind == ApiKind::Completion
        && path.ends_with("chat/completions")
    {
        // vLLM's check passes (the URL ends with `completions`), but it then posts a completions body (a
        // `prompt`) to the chat endpoint, which every server refuses.
        return Err(f.invalid(
            ctx,
            format!(
                "backend `{backend}` sends completions requests (a `prompt`), which `{path}` does not take; use \
                 `backend: openai-chat` for the chat endpoint"
            ),
        ));
    }
    w.api.endpoint = endpoint_field.is_some().then_some(path);
    if let Some(f) = m.get("header") {
        w.api.headers = headers(ctx, &f)?;
    }
    w.api.extra_body = extra_body(ctx, &mut m)?;
    if let Some(f) = m.get("logprobs") {
        w.api.logprobs = Some(integer(ctx, &f)?);
        if w.api.kind == ApiKind::Chat {
            // `async_request_openai_chat_completions` builds its payload without `logprobs`.
            ctx.warn(
                &f.path,
                f.line,
                WarningKind::Ignored,
                "vLLM sends it only in completions requests; its chat requests carry no logprobs",
            );
        }
    }
    // Each request's `x-request-id` is the prefix and the request's number (`SampleRequest.request_id`).
    if let Some(f) = m.get("request-id-prefix") {
        w.api.request_id_prefix = Some(text(ctx, &f)?);
    }
    let ignore_eos = match m.take("ignore-eos") {
        Some(f) => flag(ctx, &f)?,
        None => false,
    };

    let num_prompts = match m.get("num-prompts") {
        Some(f) => {
            let n = positive_u64(ctx, &f)?;
            // Every send time is computed before the run (vLLM builds every request first too).
            limits::check(ctx, &f, Limit::Arrivals, n as f64)?;
            n
        }
        None => DEFAULT_NUM_PROMPTS,
    };
    let rate_field = m.get("request-rate");
    let rate = match &rate_field {
        None => Rate::Infinite,
        Some(f) => {
            let t = text(ctx, f)?;
            if is_inf(&t) {
                Rate::Infinite
            } else {
                let v = number(ctx, f)?;
                if v.is_infinite() && v > 0.0 {
                    Rate::Infinite
                } else if v > 0.0 {
                    limits::check(ctx, f, Limit::Rate, v)?;
                    Rate::PerSecond(v)
                } else {
                    return Err(
                        f.invalid(ctx, format!("must be greater than 0 (or `inf`), found {t}"))
                    );
                }
            }
        }
    };
    let burstiness = match m.get("burstiness") {
        Some(f) => {
            // `inf` makes the gaps constant (1/rate).
            let v = if is_inf(&text(ctx, &f)?) {
                f64::INFINITY
            } else {
                number(ctx, &f)?
            };
            if v.is_nan() || v <= 0.0 {
                return Err(f.invalid(ctx, format!("must be greater than 0 (or `inf`), found {v}")));
            }
            v
        }
        None => 1.0,
    };
    let max_concurrency = m
        .get("max-concurrency")
        .map(|f| {
            let n = positive_u64(ctx, &f)?;
            limits::check(ctx, &f, Limit::Concurrency, n as f64)?;
            u32::try_from(n).map_err(|_| f.invalid(ctx, format!("{n} is too large")))
        })
        .transpose()?;
    let rate = match ramp_up(ctx, &mut m)? {
        Some((ramp, strategy_line)) => {
            if let Some(f) = &rate_field
                && rate != Rate::Infinite
            {
                return Err(f.invalid(
                    ctx,
                    format!(
                        "vLLM refuses a `request-rate` with a ramp-up (line {strategy_line}): the ramp sets the \
                         rate; remove `request-rate`"
                    ),
                ));
            }
            Rate::RampUp(ramp)
        }
        None => rate,
    };
    match m.get("seed") {
        Some(f) => {
            w.seed = non_negative_u64(ctx, &f)?;
            w.seed_origin = SeedOrigin::Profile;
        }
        None => set_default_seed(&mut w, options, 0),
    }

    let dataset = match m.get("dataset-name") {
        Some(f) => (text(ctx, &f)?, f.line),
        None => ("random".to_string(), 0),
    };
    // The general lengths of recent vLLM: `input-len` sets `random-input-len`, `output-len` every dataset's
    // output length (serve.py `main_async`).
    let general = GeneralLengths {
        input: m
            .get("input-len")
            .map(|f| positive_u64(ctx, &f).map(|n| (n, f)))
            .transpose()?,
        output: m
            .get("output-len")
            .map(|f| positive_u64(ctx, &f).map(|n| (n, f)))
            .transpose()?,
    };
    w.data = dataset_spec(ctx, &mut m, &dataset.0, dataset.1, &general)?;
    w.api.lora = lora_modules(ctx, &mut m, &dataset.0, w.seed)?;
    // serve.py: "Multi-modal content is only supported on 'openai-chat' and 'openai-audio' backend."
    let images = match &w.data {
        DataSpec::Random(r) => r.images.is_some(),
        DataSpec::File(f) => f.rows == DatasetRows::CustomMm,
        DataSpec::VllmHf(hf) => matches!(hf.kind, HfDatasetKind::VisionArena { .. }),
        _ => false,
    };
    if images && w.api.kind != ApiKind::Chat {
        return Err(ctx.invalid(
            "dataset-name",
            dataset.1,
            format!(
                "the `{}` dataset sends images in chat messages, which backend `{backend}` does not send (vLLM \
                 refuses it too); use `backend: openai-chat` and `endpoint: /v1/chat/completions`",
                dataset.0
            ),
        ));
    }
    w.api.images = images;
    // The random dataset's `--random-batch-size` ("only used for embeddings benchmark"): `RandomDataset.sample`
    // makes `num-prompts` prompts, then one request of each `batchsize` of them, the last with what is left.
    let batch_field = match w.data {
        DataSpec::Random(_) => m.get("random-batch-size"),
        _ => None,
    };
    let batch_size = match (&mut w.data, &batch_field) {
        (DataSpec::Random(random), Some(f)) => {
            let size = positive_u64(ctx, f)?;
            if size != 1 && !w.api.kind.is_pooling() {
                return Err(f.unsupported(
                    ctx,
                    format!(
                        "batched prompts with `backend: {backend}` (a list of prompts in one generation request; \
                         vLLM batches for its embeddings and rerank backends)"
                    ),
                ));
            }
            random.input.total_count = Some(num_prompts);
            u32::try_from(size).map_err(|_| f.invalid(ctx, "too large"))?
        }
        _ => 1,
    };
    // `random-rerank`: each request is the query and its batch of documents (with `no-reranker`, the query and
    // one document fewer, as vLLM takes one off both the count and the batch).
    let rerank = match &mut w.data {
        DataSpec::Random(RandomData {
            rerank: Some(rerank),
            input,
            ..
        }) => {
            rerank.batch_size = u64::from(batch_size);
            // The documents: `num-prompts` of them.
            input.total_count = Some(num_prompts);
            Some(*rerank)
        }
        _ => None,
    };
    let batch_size = match rerank {
        Some(r) if r.is_reranker => batch_size.saturating_add(1),
        Some(_) if batch_size < 2 || num_prompts < 2 => {
            let (key, line) = batch_field
                .as_ref()
                .map_or(("random-batch-size".to_owned(), 0), |f| {
                    (f.path.clone(), f.line)
                });
            return Err(ctx.invalid(
                &key,
                line,
                "`no-reranker` needs `random-batch-size` and `num-prompts` of 2 or more (vLLM asserts both: the \
                 query is one input of each batch)",
            ));
        }
        _ => batch_size,
    };
    if rerank.is_some() && !w.api.kind.is_pooling() {
        return Err(ctx.invalid(
            "dataset-name",
            dataset.1,
            format!(
                "the `random-rerank` dataset makes batches of a query and documents, which `backend: {backend}` \
                 would send as one generation request; use `backend: vllm-rerank` (or an embeddings backend)"
            ),
        ));
    }
    w.api.inputs_per_request = batch_size;
    if w.api.kind == ApiKind::Rerank
        && rerank.is_none()
        && !(matches!(w.data, DataSpec::Random(_)) && batch_size > 1)
    {
        // `async_request_vllm_rerank` asserts a list of at least two prompts: a query and its documents.
        let (key, line) = match &batch_field {
            Some(f) => (f.path.clone(), f.line),
            None => (
                "backend".to_owned(),
                backend_field.as_ref().map_or(0, |f| f.line),
            ),
        };
        return Err(ctx.invalid(
            &key,
            line,
            "backend `vllm-rerank` sends a query and its documents, which vLLM takes from a batch of prompts: \
             use `dataset-name: random` with `random-batch-size` of 2 or more (the first prompt of each batch is \
             the query)",
        ));
    }
    // vLLM sends what the dataset returns: prefix_repetition makes `num-prefixes` whole groups, so
    // `num-prompts` rounds down to a multiple of them (and fewer prompts than prefixes is vLLM's ValueError).
    let num_prompts = match &mut w.data {
        DataSpec::SharedPrefix(shared) => {
            let per_prefix = num_prompts / shared.num_groups;
            if per_prefix == 0 {
                return Err(ctx.invalid(
                    "num-prompts",
                    m.get("num-prompts").map_or(0, |f| f.line),
                    format!(
                        "num_requests ({num_prompts}) must be greater than or equal to num_prefixes ({}), as \
                         vLLM's prefix_repetition dataset requires",
                        shared.num_groups
                    ),
                ));
            }
            shared.num_prompts_per_group = per_prefix;
            per_prefix * shared.num_groups
        }
        // `random-rerank`: `range(0, num_requests, batchsize)` over the documents.
        _ => match rerank {
            Some(r) if r.is_reranker => num_prompts.div_ceil(r.batch_size),
            Some(r) => (num_prompts - 1).div_ceil(r.batch_size - 1),
            None => num_prompts.div_ceil(u64::from(batch_size)),
        },
    };
    m.known(&DATASET_KEYS);
    for key in DATASET_KEYS {
        if !m.is_read(key) {
            m.ignore(
                ctx,
                key,
                &format!("not used by the `{}` dataset", dataset.0),
            );
        }
    }
    // vllm forces ignore_eos for random data with OpenAI backends (FORMATS 3.4).
    w.api.ignore_eos =
        ignore_eos || (matches!(w.data, DataSpec::Random(_)) && !w.api.kind.is_pooling());

    if let Some(f) = m.get("percentile-metrics") {
        let t = text(ctx, &f)?;
        let metrics: Vec<String> = t
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect();
        for metric in &metrics {
            match metric.as_str() {
                "ttft" | "tpot" | "itl" | "e2el" => {}
                "client_queue_time" | "e2el_including_client_queue" => {
                    return Err(f.unsupported(
                        ctx,
                        format!("the `{metric}` percentile metric (time spent waiting for the client's concurrency cap)"),
                    ));
                }
                other => {
                    return Err(f.invalid(
                        ctx,
                        format!("unknown metric `{other}`; expected ttft, tpot, itl or e2el"),
                    ));
                }
            }
        }
        w.report.percentile_metrics = metrics;
    }
    if let Some(f) = m.get("metric-percentiles") {
        let t = text(ctx, &f)?;
        let mut out = Vec::new();
        for part in t.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            match part.parse::<f64>() {
                Ok(v) if v > 0.0 && v <= 100.0 => out.push(v),
                _ => {
                    return Err(f.invalid(ctx, format!("`{part}` is not a percentile in (0, 100]")));
                }
            }
        }
        w.report.percentiles = out;
    }
    if let Some(f) = m.get("num-warmups") {
        let n = non_negative_u64(ctx, &f)?;
        limits::check(ctx, &f, Limit::Requests, n as f64)?;
        w.warmup_requests = n;
    }
    if let Some(f) = m.get("goodput") {
        w.goodput = goodput(ctx, &f)?;
    }
    if let Some(f) = m.get("result-filename") {
        w.report.file_name = Some(text(ctx, &f)?);
    }
    if let Some(f) = m.get("result-dir") {
        w.report.output_path = Some(text(ctx, &f)?);
    }
    if let Some(f) = m.take("save-detailed") {
        w.report.per_request = flag(ctx, &f)?;
    }
    if let Some(f) = m.get("request-timeout") {
        let v = number(ctx, &f)?;
        if !(v > 0.0 && v.is_finite()) {
            return Err(f.invalid(ctx, format!("must be greater than 0, found {v}")));
        }
        limits::check(ctx, &f, Limit::Duration, v)?;
        w.request_timeout = Some(
            Duration::try_from_secs_f64(v)
                .map_err(|_| f.invalid(ctx, format!("{v} s is out of range")))?,
        );
    }
    for (key, why) in OUTPUT_ONLY {
        if why.is_empty() {
            m.skip(key);
        } else {
            m.ignore(ctx, key, why);
        }
    }
    m.ignore(
        ctx,
        "timeline-itl-thresholds",
        "colours of vLLM's timeline plot, which llmbench does not draw",
    );
    refuse_unsupported_flags(ctx, &mut m, w.api.base_url.as_deref())?;

    w.stages = vec![Stage {
        load: match rate {
            Rate::Infinite if max_concurrency.is_some() => LoadKind::Concurrent,
            Rate::Infinite => LoadKind::Throughput,
            Rate::PerSecond(_) | Rate::RampUp(_) if burstiness == 1.0 => LoadKind::Poisson,
            Rate::PerSecond(_) | Rate::RampUp(_) if burstiness.is_infinite() => LoadKind::Constant,
            Rate::PerSecond(_) | Rate::RampUp(_) => LoadKind::Gamma,
        },
        arrival: Arrival::VllmGamma {
            rate,
            burstiness,
            count: num_prompts,
        },
        limit: StageLimit::requests(num_prompts),
        max_concurrency,
        warmup: None,
        cooldown: None,
    }];
    w.stage_interval = Duration::ZERO;
    m.finish(ctx, &[]);
    Ok(w)
}

/// `--lora-modules NAME…` and `--lora-assignment`: each request names one adapter as its model, chosen as
/// `serve.py`'s `benchmark()` chooses it (see [`LoraPick`]). `random` draws from Python's global generator after
/// the dataset was sampled; only the synthetic datasets leave it as `random.seed(seed)` left it (their samplers
/// use a generator of their own), so with any other dataset `random` is refused and `round-robin` offered.
fn lora_modules(
    ctx: &mut Ctx,
    m: &mut MapReader<'_>,
    dataset: &str,
    seed: u64,
) -> Result<Option<LoraTraffic>, WorkloadError> {
    let assignment = m.get("lora-assignment");
    let Some(f) = m.get("lora-modules") else {
        if let Some(a) = assignment {
            ctx.warn(
                &a.path,
                a.line,
                WarningKind::Ignored,
                "vLLM reads it only with `lora-modules`",
            );
        }
        return Ok(None);
    };
    let adapters = words(ctx, &f, "an adapter name")?;
    if adapters.is_empty() {
        return Err(f.invalid(
            ctx,
            "names no adapter (vLLM's `--lora-modules` takes one or more)",
        ));
    }
    let pick = match &assignment {
        None => LoraPick::PythonChoice { seed },
        Some(a) => match text(ctx, a)?.as_str() {
            "random" => LoraPick::PythonChoice { seed },
            "round-robin" => LoraPick::RoundRobin,
            other => {
                return Err(a.invalid(
                    ctx,
                    format!("`{other}` is not one of vLLM's choices: `random`, `round-robin`"),
                ));
            }
        },
    };
    if matches!(pick, LoraPick::PythonChoice { .. })
        && !matches!(dataset, "random" | "random-mm" | "random-rerank")
    {
        let at = assignment.as_ref().unwrap_or(&f);
        return Err(at.unsupported(
            ctx,
            format!(
                "`lora-assignment: random` with the `{dataset}` dataset (vLLM draws the adapters from Python's \
                 global generator after this dataset has drawn from it, which llmbench does not replay; \
                 `lora-assignment: round-robin` works with every dataset)"
            ),
        ));
    }
    Ok(Some(LoraTraffic { adapters, pick }))
}

/// A flag argparse reads with `nargs="+"`: a YAML list, or the words of one string (`what` each is, for the
/// error when an item is not text).
fn words(ctx: &Ctx, f: &At<'_>, what: &str) -> Result<Vec<String>, WorkloadError> {
    match &f.node.value {
        Value::Seq(items) => items
            .iter()
            .map(|n| {
                n.scalar_text()
                    .ok_or_else(|| ctx.wrong_type(&f.path, n, what))
            })
            .collect(),
        _ => Ok(text(ctx, f)?
            .split_whitespace()
            .map(str::to_string)
            .collect()),
    }
}

/// Flags that change what is sent or measured in ways llmbench does not reproduce: each is refused when it asks
/// for something other than what llmbench does (a flag at its default value is accepted).
fn refuse_unsupported_flags(
    ctx: &mut Ctx,
    m: &mut MapReader<'_>,
    base_url: Option<&str>,
) -> Result<(), WorkloadError> {
    if let Some(f) = m.take("use-beam-search")
        && flag(ctx, &f)?
    {
        return Err(f.unsupported(ctx, "beam search (`--use-beam-search`)"));
    }
    if let Some(f) = m.take("profile")
        && flag(ctx, &f)?
    {
        return Err(f.unsupported(
            ctx,
            "vLLM's profiler (`--profile` calls the server's /start_profile and /stop_profile)",
        ));
    }
    for (key, feature) in [
        (
            "ready-check-timeout-sec",
            "waiting for the endpoint to answer before the run (`ready-check-timeout-sec` above 0)",
        ),
        (
            "probe-request-rate",
            "probe requests beside the workload (`probe-request-rate` above 0)",
        ),
    ] {
        if let Some(f) = m.get(key)
            && number(ctx, &f)? != 0.0
        {
            return Err(f.unsupported(ctx, feature));
        }
    }
    if let Some(f) = m.take("self-timed") {
        return Err(f.invalid(
            ctx,
            "vLLM accepts `self-timed` only with the `timed_trace` dataset, which llmbench does not run",
        ));
    }
    if let Some(f) = m.take("skip-tokenizer-init")
        && flag(ctx, &f)?
    {
        return Err(f.unsupported(
                ctx,
                "running without a tokenizer (`skip-tokenizer-init`: vLLM then counts every prompt as 1 token)",
            ));
    }
    if let Some(f) = m.take("insecure")
        && flag(ctx, &f)?
    {
        if base_url.is_some_and(|u| u.starts_with("https://")) {
            return Err(f.unsupported(
                    ctx,
                    "skipping TLS certificate checks (`insecure`: llmbench always verifies certificates)",
                ));
        }
        ctx.warn(
            &f.path,
            f.line,
            WarningKind::Ignored,
            "only turns off TLS certificate checks, and the endpoint is not https",
        );
    }
    Ok(())
}

/// `--ramp-up-strategy` with its start and end rates, checked as `serve.py` `main_async` checks them; with the
/// strategy's line for messages. Without a strategy vLLM reads neither rate.
fn ramp_up(ctx: &mut Ctx, m: &mut MapReader<'_>) -> Result<Option<(RampUp, u32)>, WorkloadError> {
    let start = m.get("ramp-up-start-rps");
    let end = m.get("ramp-up-end-rps");
    let Some(f) = m.get("ramp-up-strategy") else {
        for f in [start, end].into_iter().flatten() {
            ctx.warn(
                &f.path,
                f.line,
                WarningKind::Ignored,
                "vLLM reads it only with `ramp-up-strategy`",
            );
        }
        return Ok(None);
    };
    let strategy = match text(ctx, &f)?.as_str() {
        "linear" => RampUpStrategy::Linear,
        "exponential" => RampUpStrategy::Exponential,
        other => {
            return Err(f.invalid(
                ctx,
                format!("unknown ramp-up strategy `{other}`; expected linear or exponential"),
            ));
        }
    };
    let (Some(start), Some(end)) = (start, end) else {
        return Err(f.invalid(
            ctx,
            "vLLM needs both `ramp-up-start-rps` and `ramp-up-end-rps` with a ramp-up strategy",
        ));
    };
    let start_rps = non_negative_u64(ctx, &start)?;
    let end_rps = non_negative_u64(ctx, &end)?;
    limits::check(ctx, &end, Limit::Rate, end_rps as f64)?;
    if start_rps > end_rps {
        return Err(start.invalid(
            ctx,
            format!("must not be above `ramp-up-end-rps` ({end_rps}), found {start_rps} (vLLM refuses it)"),
        ));
    }
    if start_rps == 0 {
        // Exponential: vLLM refuses it; linear: its first request's rate is 0, which `get_request` asserts against.
        return Err(start.invalid(
            ctx,
            "must be at least 1: the first request goes at the start rate, and vLLM fails on a rate of 0",
        ));
    }
    Ok(Some((
        RampUp {
            strategy,
            start_rps,
            end_rps,
        },
        f.line,
    )))
}

/// What vLLM merges into every body: the sampling flags given, then `--extra-body` over them
/// (`extra_body = {**sampling_params, **extra_body}` in `serve.py` `main_async`).
fn extra_body(
    ctx: &Ctx,
    m: &mut MapReader<'_>,
) -> Result<serde_json::Map<String, serde_json::Value>, WorkloadError> {
    let mut body = serde_json::Map::new();
    for (key, field, is_int) in SAMPLING_FLAGS {
        let Some(f) = m.get(key) else { continue };
        let value = if is_int {
            serde_json::Value::from(integer(ctx, &f)?)
        } else {
            let v = number(ctx, &f)?;
            // Python's json would write NaN or Infinity, which no server parses.
            if !v.is_finite() {
                return Err(f.invalid(ctx, format!("must be a finite number, found {v}")));
            }
            // A float, as argparse's `type=float` makes it: `--temperature 0` is sent as 0.0.
            serde_json::Value::from(v)
        };
        body.insert(field.to_owned(), value);
    }
    if let Some(f) = m.get("extra-body") {
        let t = text(ctx, &f)?;
        let extra: serde_json::Value = serde_json::from_str(&t).map_err(|e| {
            f.invalid(
                ctx,
                format!("not JSON (vLLM reads it with json.loads): {e}"),
            )
        })?;
        let serde_json::Value::Object(extra) = extra else {
            return Err(f.invalid(ctx, "must be a JSON object of body fields"));
        };
        for (key, value) in extra {
            if BUILT_BODY_FIELDS.contains(&key.as_str()) {
                return Err(f.unsupported(
                    ctx,
                    format!(
                        "replacing the body's `{key}` through `extra-body` (llmbench builds it from the dataset \
                         and reads the answer by it)"
                    ),
                ));
            }
            let ok = match key.as_str() {
                "max_tokens" | "max_completion_tokens" => value.as_u64().is_some(),
                "ignore_eos" => value.is_boolean(),
                _ => true,
            };
            if !ok {
                return Err(f.invalid(
                    ctx,
                    format!(
                        "`{key}` must be a {}",
                        if key == "ignore_eos" {
                            "boolean"
                        } else {
                            "whole number of tokens"
                        }
                    ),
                ));
            }
            body.insert(key, value);
        }
    }
    Ok(body)
}

/// `input-len` / `output-len` with their fields, for messages.
struct GeneralLengths<'n> {
    input: Option<(u64, At<'n>)>,
    output: Option<(u64, At<'n>)>,
}

fn dataset_spec(
    ctx: &mut Ctx,
    m: &mut MapReader<'_>,
    name: &str,
    line: u32,
    general: &GeneralLengths<'_>,
) -> Result<DataSpec, WorkloadError> {
    let len = |m: &mut MapReader<'_>, key: &str, default: u64| -> Result<u64, WorkloadError> {
        match m.get(key) {
            Some(f) => {
                let n = non_negative_u64(ctx, &f)?;
                limits::check(ctx, &f, Limit::Tokens, n as f64)?;
                Ok(n)
            }
            None => Ok(default),
        }
    };
    let with_general = |n: u64, general: &Option<(u64, At<'_>)>| -> Result<u64, WorkloadError> {
        match general {
            Some((g, f)) => {
                limits::check(ctx, f, Limit::Tokens, *g as f64)?;
                Ok(*g)
            }
            None => Ok(n),
        }
    };
    let shuffle = match m.take("disable-shuffle") {
        Some(f) => !flag(ctx, &f)?,
        None => true,
    };
    for (key, feature) in [
        (
            "no-oversample",
            "sending fewer requests than `num-prompts` when the dataset is smaller (`no-oversample`)",
        ),
        (
            "enable-multimodal-chat",
            "multimodal chat messages (`enable-multimodal-chat`)",
        ),
    ] {
        if let Some(f) = m.take(key)
            && flag(ctx, &f)?
        {
            return Err(f.unsupported(ctx, feature));
        }
    }
    let spec = match name {
        "random" | "random-rerank" | "random-mm" => {
            if let Some(f) = m.get("dataset-path") {
                return Err(f.invalid(
                    ctx,
                    format!(
                        "vLLM refuses a `dataset-path` with the `{name}` dataset; remove it, or choose the dataset \
                         that reads the file (`sharegpt`, `custom`)"
                    ),
                ));
            }
            // `RandomDatasetForReranking.sample` takes the input length, the range ratio and the batch size;
            // `--no-reranker` makes the query one more input instead of each document's pair.
            let rerank = if name == "random-rerank" {
                let is_reranker = match m.take("no-reranker") {
                    Some(f) => !flag(ctx, &f)?,
                    None => true,
                };
                Some(RandomRerank {
                    // Set with `random-batch-size` below.
                    batch_size: 1,
                    is_reranker,
                })
            } else {
                None
            };
            let input = with_general(
                len(m, "random-input-len", DEFAULT_RANDOM_INPUT_LEN)?,
                &general.input,
            )?;
            let output = with_general(
                len(m, "random-output-len", DEFAULT_RANDOM_OUTPUT_LEN)?,
                &general.output,
            )?;
            let prefix_len = len(m, "random-prefix-len", 0)?;
            let (input_ratio, output_ratio) = match m.get("random-range-ratio") {
                Some(f) => range_ratios(ctx, &f)?,
                None => (0.0, 0.0),
            };
            let shape = |l: u64, ratio: f64| TokenLengths {
                shape: if ratio == 0.0 {
                    LengthShape::Fixed(l)
                } else {
                    LengthShape::RangeRatio { len: l, ratio }
                },
                total_count: None,
            };
            if rerank.is_some()
                && prefix_len > 0
                && let Some(f) = m.get("random-prefix-len")
            {
                ctx.warn(
                    &f.path,
                    f.line,
                    WarningKind::Ignored,
                    "vLLM's `RandomDatasetForReranking.sample` takes no random prefix",
                );
            }
            DataSpec::Random(RandomData {
                input: shape(input, input_ratio),
                output: shape(output, output_ratio),
                prefix_len: if rerank.is_some() { 0 } else { prefix_len },
                text: PromptText::RandomTokens,
                rerank,
                images: if name == "random-mm" {
                    Some(random_mm_images(ctx, m)?)
                } else {
                    None
                },
            })
        }
        "sharegpt" => {
            let path = m
                .require(
                    ctx,
                    "dataset-path",
                    "the sharegpt dataset is read from a JSON file",
                )
                .and_then(|f| text(ctx, &f))?;
            let output = match m.get("sharegpt-output-len") {
                Some(f) => {
                    let n = non_negative_u64(ctx, &f)?;
                    limits::check(ctx, &f, Limit::Tokens, n as f64)?;
                    Some(n)
                }
                None => None,
            };
            let output = match &general.output {
                Some((n, _)) => Some(*n),
                None => output,
            };
            DataSpec::ShareGpt(ShareGpt {
                path: Some(path),
                input_filter: None,
                output: output.map(TokenLengths::fixed),
                output_filter: None,
                shuffle,
            })
        }
        "sonnet" => {
            let path = m
                .require(
                    ctx,
                    "dataset-path",
                    "the sonnet dataset is read from a text file",
                )
                .and_then(|f| text(ctx, &f))?;
            // With any backend but openai-chat vLLM sends each prompt rendered through the tokenizer's chat
            // template (`get_samples`: `return_prompt_formatted=True`); the prompts module renders it.
            let input_field = m.get("sonnet-input-len");
            let input_len = len(m, "sonnet-input-len", DEFAULT_SONNET_INPUT_LEN)?;
            let output_len = len(m, "sonnet-output-len", DEFAULT_SONNET_OUTPUT_LEN)?;
            let prefix_len = len(m, "sonnet-prefix-len", DEFAULT_SONNET_PREFIX_LEN)?;
            if input_len == 0 {
                let line = input_field.map_or(line, |f| f.line);
                return Err(ctx.invalid(
                    "sonnet-input-len",
                    line,
                    "must be greater than the base prompt's length (vLLM refuses 0)",
                ));
            }
            DataSpec::Sonnet(Sonnet {
                path,
                input_len,
                output_len,
                prefix_len,
            })
        }
        "custom" => {
            let path = jsonl_path(ctx, m, "custom", "a `prompt`")?;
            let output_len = match m.get("custom-output-len") {
                None => Some(DEFAULT_CUSTOM_OUTPUT_LEN as u64),
                Some(f) => {
                    let v = integer(ctx, &f)?;
                    match v {
                        -1 => None,
                        v if v > 0 => {
                            limits::check(ctx, &f, Limit::Tokens, v as f64)?;
                            Some(v as u64)
                        }
                        v => {
                            return Err(f.invalid(
                                ctx,
                                format!(
                                    "must be > 0, or -1 for each record's `output_tokens`; found {v}"
                                ),
                            ));
                        }
                    }
                }
            };
            let output_len = match &general.output {
                Some((n, _)) => Some(*n),
                None => output_len,
            };
            // `CustomDataset.sample` renders every prompt through the tokenizer's chat template unless told to
            // skip it, and sends the rendered text (to either endpoint).
            let mut skip_template = false;
            for key in ["skip-chat-template", "custom-skip-chat-template"] {
                if let Some(f) = m.take(key) {
                    skip_template |= flag(ctx, &f)?;
                }
            }
            let chat_template = if skip_template {
                None
            } else {
                Some(chat_template_kwargs(ctx, m)?)
            };
            DataSpec::File(DatasetFile {
                path,
                output_len,
                shuffle,
                chat_template,
                rows: DatasetRows::Custom,
            })
        }
        "spec_bench" => {
            // `SpecBench` (a `CustomDataset`): each record's first turn, of `spec-bench-category` only when given.
            // get_samples passes it no `skip_chat_template`, so every prompt goes through the chat template.
            let path = m
                .require(
                    ctx,
                    "dataset-path",
                    "the spec_bench dataset is read from Spec-Bench's question.jsonl",
                )
                .and_then(|f| text(ctx, &f))?;
            let output_len = with_general(len(m, "spec-bench-output-len", 256)?, &general.output)?;
            let category = m
                .get("spec-bench-category")
                .map(|f| text(ctx, &f))
                .transpose()?;
            for key in ["skip-chat-template", "custom-skip-chat-template"] {
                if let Some(f) = m.take(key)
                    && flag(ctx, &f)?
                {
                    ctx.warn(
                        key,
                        f.line,
                        WarningKind::Ignored,
                        "vLLM's spec_bench dataset renders every prompt through the chat template whatever this \
                         says (get_samples does not pass it on); llmbench does the same",
                    );
                }
            }
            DataSpec::File(DatasetFile {
                path,
                output_len: Some(output_len),
                shuffle,
                chat_template: Some(chat_template_kwargs(ctx, m)?),
                rows: DatasetRows::SpecBench { category },
            })
        }
        "prefix_repetition" => {
            // `PrefixRepetitionRandomDataset` (vllm/benchmarks/datasets.py): `num-prefixes` random prefixes of
            // `prefix-len` tokens, each followed by `num-prompts // num-prefixes` random suffixes of
            // `suffix-len` tokens; `output-len` sets every answer's length. The general `input-len` is not read.
            let prefix_len = len(m, "prefix-repetition-prefix-len", 256)?;
            let suffix_len = len(m, "prefix-repetition-suffix-len", 256)?;
            let output_len = with_general(
                len(m, "prefix-repetition-output-len", 128)?,
                &general.output,
            )?;
            let num_prefixes = match m.get("prefix-repetition-num-prefixes") {
                Some(f) => {
                    let n = positive_u64(ctx, &f)?;
                    limits::check(ctx, &f, Limit::Prefixes, n as f64)?;
                    n
                }
                None => 10,
            };
            DataSpec::SharedPrefix(SharedPrefix {
                num_groups: num_prefixes,
                // Set from `num-prompts` by the caller, which knows it.
                num_prompts_per_group: 0,
                system_prompt_len: TokenLengths::fixed(prefix_len),
                question_len: TokenLengths::fixed(suffix_len),
                output_len: TokenLengths::fixed(output_len),
                seed: None,
                multi_turn: false,
                style: SharedPrefixStyle::VllmPrefixRepetition { shuffle },
                prefix_images: None,
                question_images: None,
            })
        }
        "burstgpt" => {
            // `BurstGPTDataset` reads `dataset-path` with pandas and samples `num-prompts` rows; no length flag
            // reaches it (`output-len` is not mapped to it).
            let path = m
                .require(
                    ctx,
                    "dataset-path",
                    "the burstgpt dataset is read from a CSV file",
                )
                .and_then(|f| text(ctx, &f))?;
            DataSpec::BurstGpt(BurstGpt { path })
        }
        "hf" => hf_dataset(ctx, m, general, shuffle)?,
        "instructcoder" | "mtbench" => {
            let id = if name == "instructcoder" {
                "likaixin/InstructCoder"
            } else {
                "philschmid/mt-bench"
            };
            return Err(ctx.invalid(
                "dataset-name",
                line,
                format!(
                    "vLLM has no `{name}` dataset name: it reads that dataset as `dataset-name: hf` with \
                     `dataset-path: {id}` (or a local copy's directory and `hf-name: {id}`)"
                ),
            ));
        }
        "custom_mm" => {
            // `CustomMMDataset`: `CustomDataset.load_data` (JSONL only, shuffled with the default seed 0), then
            // each record's `prompt` as it is (no chat template) with the first of its `image_files`.
            let path = jsonl_path(ctx, m, "custom_mm", "a `prompt` and `image_files`")?;
            let output_len = match m.get("custom-output-len") {
                None => DEFAULT_CUSTOM_OUTPUT_LEN as u64,
                Some(f) => {
                    let v = integer(ctx, &f)?;
                    if v <= 0 {
                        return Err(f.invalid(
                            ctx,
                            format!(
                                "must be > 0 for the custom_mm dataset, found {v} (CustomMMDataset sends it as \
                                 every request's output length as it is; it reads no `output_tokens`)"
                            ),
                        ));
                    }
                    limits::check(ctx, &f, Limit::Tokens, v as f64)?;
                    v as u64
                }
            };
            let output_len = match &general.output {
                Some((n, _)) => *n,
                None => output_len,
            };
            DataSpec::File(DatasetFile {
                path,
                output_len: Some(output_len),
                shuffle,
                chat_template: None,
                rows: DatasetRows::CustomMm,
            })
        }
        "sharegpt4v" | "visionarena" => {
            return Err(ctx.invalid(
                "dataset-name",
                line,
                format!(
                    "`{name}` is not a vLLM dataset name: a ShareGPT4V file is read by `dataset-name: sharegpt` \
                     (with `backend: openai-chat` its `image` entries are sent), VisionArena by `dataset-name: hf` \
                     with `hf-name: lmarena-ai/VisionArena-Chat`"
                ),
            ));
        }
        "custom_image" => {
            return Err(ctx.unsupported(
                "dataset-name",
                line,
                "the `custom_image` dataset (a newer vLLM's; the release llmbench follows names it `custom_mm`, \
                 which runs)",
            ));
        }
        "speed_bench" | "custom_audio" | "timed_trace" => {
            return Err(ctx.unsupported("dataset-name", line, format!("the `{name}` dataset")));
        }
        other => {
            return Err(ctx.invalid(
                "dataset-name",
                line,
                format!(
                    "unknown dataset `{other}`; llmbench runs random, random-mm, sharegpt, sonnet, custom, hf, spec_bench, \
                     prefix_repetition and burstgpt"
                ),
            ));
        }
    };
    Ok(spec)
}

/// The `HuggingFaceDataset` subclasses `get_samples` picks from `dataset-path` (or `hf-name`), in its order, with
/// the split it sets when `hf-split` is not given; the multimodal ones and those llmbench does not read are named
/// with the reason.
const HF_DATASETS: [(&[&str], HfClass); 13] = [
    (
        &["lmarena-ai/VisionArena-Chat"],
        HfClass::Read(HfDatasetKind::VisionArena { bench: false }, Some("train")),
    ),
    (
        &["lmarena-ai/vision-arena-bench-v0.1"],
        HfClass::Read(HfDatasetKind::VisionArena { bench: true }, Some("train")),
    ),
    (
        &["yale-nlp/MMVU"],
        HfClass::Refused("MMVUDataset (videos: llmbench encodes and sends no video)"),
    ),
    (
        &["likaixin/InstructCoder"],
        HfClass::Read(HfDatasetKind::InstructCoder, Some("train")),
    ),
    (
        &["philschmid/mt-bench"],
        HfClass::Read(HfDatasetKind::MtBench, Some("train")),
    ),
    (
        &["lmms-lab/LLaVA-OneVision-Data"],
        HfClass::Refused("MultiModalConversationDataset (images: multimodal inputs are issue 32)"),
    ),
    (
        &["Aeala/ShareGPT_Vicuna_unfiltered"],
        HfClass::Read(HfDatasetKind::Conversation, None),
    ),
    (
        &[
            "AI-MO/aimo-validation-aime",
            "AI-MO/NuminaMath-1.5",
            "AI-MO/NuminaMath-CoT",
        ],
        HfClass::Read(HfDatasetKind::Aimo, Some("train")),
    ),
    (
        &["zed-industries/zeta"],
        HfClass::Refused(
            "NextEditPredictionDataset (its zeta prompt format is not reproduced yet)",
        ),
    ),
    (
        &[
            "openslr/librispeech_asr",
            "facebook/voxpopuli",
            "LIUM/tedlium",
            "edinburghcstr/ami",
            "speechcolab/gigaspeech",
            "kensho/spgispeech",
        ],
        HfClass::Refused("ASRDataset (audio: llmbench sends no audio)"),
    ),
    (
        &["vdaita/edit_5k_char", "vdaita/edit_10k_char"],
        HfClass::Refused(
            "BlazeditDataset (its `norm_distance` filter and prompt are not reproduced yet)",
        ),
    ),
    (
        &[
            "mgoin/mlperf-inference-llama2-data",
            "mgoin/mlperf-inference-llama3.1-data",
        ],
        HfClass::Refused(
            "MLPerfDataset (a system and a user turn through the chat template, not reproduced yet)",
        ),
    ),
    (
        &["Lin-Chen/MMStar"],
        HfClass::Refused("MMStarDataset (images: multimodal inputs are issue 32)"),
    ),
];

#[derive(Clone, Copy)]
enum HfClass {
    /// Read by llmbench, with the split vLLM sets (none: `hf-split` must be given).
    Read(HfDatasetKind, Option<&'static str>),
    Refused(&'static str),
}

/// `dataset-path` of a dataset `CustomDataset.load_data` reads: JSONL only (it raises on anything else).
fn jsonl_path(
    ctx: &Ctx,
    m: &mut MapReader<'_>,
    dataset: &str,
    record: &str,
) -> Result<String, WorkloadError> {
    let field = m.require(
        ctx,
        "dataset-path",
        &format!("the {dataset} dataset is read from a JSONL file"),
    )?;
    let path = text(ctx, &field)?;
    if !path.ends_with(".jsonl") {
        return Err(field.invalid(
            ctx,
            format!(
                "vLLM's {dataset} dataset reads only `.jsonl` files (one JSON record with {record} per line); \
                 `{path}` is not one"
            ),
        ));
    }
    Ok(path)
}

/// `dataset-name: hf`: the class `get_samples` picks (by `dataset-path`, then by `hf-name`, which names the
/// dataset when the path is a local copy), read from the local directory `dataset-path`.
fn hf_dataset(
    ctx: &mut Ctx,
    m: &mut MapReader<'_>,
    general: &GeneralLengths<'_>,
    shuffle: bool,
) -> Result<DataSpec, WorkloadError> {
    let path_field = m.require(
        ctx,
        "dataset-path",
        "the hf dataset is read from a local copy of the dataset (a directory of .jsonl/.json files)",
    )?;
    let path = text(ctx, &path_field)?;
    let name_field = m.get("hf-name");
    let hf_name = name_field.as_ref().map(|f| text(ctx, f)).transpose()?;
    let (ids, class) = HF_DATASETS
        .iter()
        .find(|(ids, class)| {
            // vLLM matches Blazedit by `dataset-path` only.
            let by_name = !matches!(class, HfClass::Refused(r) if r.starts_with("Blazedit"));
            ids.contains(&path.as_str()) || (by_name && hf_name.as_deref().is_some_and(|n| ids.contains(&n)))
        })
        .ok_or_else(|| {
            let known: Vec<&str> = HF_DATASETS.iter().flat_map(|(ids, _)| ids.iter().copied()).collect();
            let (key, line) = match &name_field {
                Some(f) => ("hf-name", f.line),
                None => ("dataset-path", path_field.line),
            };
            ctx.invalid(
                key,
                line,
                format!(
                    "vLLM's hf dataset reads only the datasets it knows ({}); for a local copy name it with \
                     `hf-name`",
                    known.join(", ")
                ),
            )
        })?;
    let (kind, default_split) = match *class {
        HfClass::Read(kind, split) => (kind, split),
        HfClass::Refused(why) => {
            let (key, line) = if ids.contains(&path.as_str()) {
                ("dataset-path", path_field.line)
            } else {
                ("hf-name", name_field.as_ref().map_or(0, |f| f.line))
            };
            return Err(ctx.unsupported(key, line, format!("vLLM's {why}")));
        }
    };
    let split = match m.get("hf-split") {
        Some(f) => text(ctx, &f)?,
        None => match default_split {
            Some(split) => split.to_owned(),
            None => {
                return Err(path_field.invalid(
                    ctx,
                    "vLLM sets no split for ConversationDataset, and `load_dataset` without one returns every \
                     split, which it cannot sample; set `hf-split` (e.g. `train`)",
                ));
            }
        },
    };
    if let Some(f) = m.get("hf-subset") {
        let subset = text(ctx, &f)?;
        // A directory of data files has one configuration, `default` (`load_dataset(..., name=...)` refuses others).
        if subset != "default" {
            return Err(f.invalid(
                ctx,
                format!(
                    "BuilderConfig '{subset}' not found: a local directory of data files has one subset, \
                     `default` (as `load_dataset` says); point `dataset-path` at the subset's own directory"
                ),
            ));
        }
    }
    let output_len = match m.get("hf-output-len") {
        Some(f) => {
            let n = positive_u64(ctx, &f)?;
            limits::check(ctx, &f, Limit::Tokens, n as f64)?;
            Some(n)
        }
        None => None,
    };
    // The general `output-len` sets `hf-output-len` (serve.py `main_async`).
    let output_len = general.output.as_ref().map(|(n, _)| *n).or(output_len);
    let streaming = match m.take("no-stream") {
        Some(f) => !flag(ctx, &f)?,
        None => true,
    };
    // InstructCoder and MT-Bench render their prompt through the chat template unless `skip-chat-template`; the
    // others send the row's text as it is and do not read the flag.
    let templated = matches!(kind, HfDatasetKind::InstructCoder | HfDatasetKind::MtBench);
    let chat_template = if templated {
        match m.take("skip-chat-template") {
            Some(f) => !flag(ctx, &f)?,
            None => true,
        }
    } else {
        false
    };
    Ok(DataSpec::VllmHf(VllmHf {
        path,
        kind,
        split,
        output_len,
        streaming,
        shuffle,
        chat_template,
    }))
}

/// `chat-template-kwargs`: a JSON object of extra template variables (none when not given).
fn chat_template_kwargs(
    ctx: &mut Ctx,
    m: &mut MapReader<'_>,
) -> Result<serde_json::Map<String, serde_json::Value>, WorkloadError> {
    let Some(f) = m.get("chat-template-kwargs") else {
        return Ok(serde_json::Map::new());
    };
    let t = text(ctx, &f)?;
    match serde_json::from_str(&t) {
        Ok(serde_json::Value::Object(kwargs)) => Ok(kwargs),
        Ok(_) => Err(f.invalid(ctx, "must be a JSON object of template variables")),
        Err(e) => Err(f.invalid(
            ctx,
            format!("not JSON (vLLM reads it with json.loads): {e}"),
        )),
    }
}

/// vLLM's `RandomMultiModalDataset` defaults (datasets/random.py at vllm-project/vllm 237145e).
const DEFAULT_MM_BASE_ITEMS: u64 = 1;
const DEFAULT_MM_IMAGE_LIMIT: u64 = 255;
const DEFAULT_MM_BUCKETS: &str = "{(256, 256, 1): 0.5, (720, 1280, 1): 0.5, (720, 1280, 16): 0.0}";

/// The `random-mm` flags as `get_mm_item_sampling_params` reads them: the count range
/// `[floor(n·(1−r)), min(limit, ceil(n·(1+r)))]`, the image buckets with a positive weight.
fn random_mm_images(ctx: &Ctx, m: &mut MapReader<'_>) -> Result<RandomImages, WorkloadError> {
    let base = match m.get("random-mm-base-items-per-request") {
        Some(f) => non_negative_u64(ctx, &f)?,
        None => DEFAULT_MM_BASE_ITEMS,
    };
    let ratio_field = m.get("random-mm-num-mm-items-range-ratio");
    let ratio = match &ratio_field {
        Some(f) => {
            let r = number(ctx, f)?;
            if !(0.0..=1.0).contains(&r) {
                return Err(f.invalid(ctx, format!("must be in [0, 1], found {r}")));
            }
            r
        }
        None => 0.0,
    };
    let limit_field = m.get("random-mm-limit-mm-per-prompt");
    let image_limit = match &limit_field {
        Some(f) => mm_image_limit(ctx, f)?,
        None => Some(DEFAULT_MM_IMAGE_LIMIT),
    };
    let buckets_field = m.get("random-mm-bucket-config");
    let buckets = match &buckets_field {
        Some(f) => {
            let t = text(ctx, f).map_err(|_| {
                f.invalid(
                    ctx,
                    "give the bucket config as one quoted string, as on vLLM's command line: \
                     '{(256, 256, 1): 0.5, (720, 1280, 1): 0.5}'",
                )
            })?;
            parse_bucket_config(&t).map_err(|e| f.invalid(ctx, e))?
        }
        None => parse_bucket_config(DEFAULT_MM_BUCKETS).unwrap_or_default(),
    };
    let at = |f: &Option<At<'_>>, key: &str| {
        f.as_ref()
            .map_or((key.to_owned(), 0), |f| (f.path.clone(), f.line))
    };
    let (key, line) = at(&buckets_field, "random-mm-bucket-config");
    if buckets.iter().any(|(_, weight)| *weight < 0.0) {
        return Err(ctx.invalid(&key, line, "Bucket config values must be non-negative."));
    }
    let positive: Vec<_> = buckets.into_iter().filter(|(_, w)| *w > 0.0).collect();
    if positive.is_empty() {
        return Err(ctx.invalid(
            &key,
            line,
            "Got invalid bucket config. Bucket config values must be non-zero.",
        ));
    }
    let mut images = Vec::new();
    for ((height, width, frames), weight) in positive {
        match frames {
            1 => images.push(ImageBucket {
                height,
                width,
                weight,
            }),
            0 => {
                return Err(ctx.invalid(
                    &key,
                    line,
                    format!("Invalid multimodal item configuration: ({height}, {width}, 0)"),
                ));
            }
            _ => {
                return Err(ctx.unsupported(
                    &key,
                    line,
                    format!(
                        "video buckets ((height, width, frames) with frames > 1, here ({height}, {width}, \
                         {frames}): vLLM sends them as MP4 data URLs, which llmbench does not encode; give them \
                         weight 0)"
                    ),
                ));
            }
        }
    }
    let Some(limit) = image_limit else {
        let (key, line) = at(&limit_field, "random-mm-limit-mm-per-prompt");
        return Err(ctx.invalid(
            &key,
            line,
            "Modality image is not in limit_mm_per_prompt (the bucket config draws images)",
        ));
    };
    let max = ((base as f64) * (1.0 + ratio)).ceil() as u64;
    let max = max.min(limit);
    let min = ((base as f64) * (1.0 - ratio)).floor().max(0.0) as u64;
    if min > max {
        let (key, line) = at(&limit_field, "random-mm-limit-mm-per-prompt");
        return Err(ctx.invalid(
            &key,
            line,
            format!("Min num mm items is greater than max mm items: {min} > {max}"),
        ));
    }
    let items = |n: u64, key: &str| {
        u32::try_from(n)
            .map_err(|_| ctx.invalid(key, 0, format!("{n} images per request is too many")))
    };
    Ok(RandomImages {
        min_items: items(min, "random-mm-base-items-per-request")?,
        max_items: items(max, "random-mm-base-items-per-request")?,
        buckets: images,
    })
}

/// `--random-mm-limit-mm-per-prompt` (JSON, `{"image": 3, "video": 0}`, or a YAML map): the image limit, `None`
/// when it names none.
fn mm_image_limit(ctx: &Ctx, f: &At<'_>) -> Result<Option<u64>, WorkloadError> {
    let json = match &f.node.value {
        Value::Map(_) => f.node.to_json(),
        _ => {
            let t = text(ctx, f)?;
            serde_json::from_str(&t).map_err(|e| {
                f.invalid(
                    ctx,
                    format!("not a JSON object such as {{\"image\": 3, \"video\": 0}}: {e}"),
                )
            })?
        }
    };
    let Some(object) = json.as_object() else {
        return Err(f.invalid(
            ctx,
            "must be an object such as {\"image\": 3, \"video\": 0}",
        ));
    };
    match object.get("image") {
        None => Ok(None),
        Some(v) => match v.as_u64() {
            Some(n) => Ok(Some(n)),
            None => Err(f.invalid(
                ctx,
                format!("`image` must be a whole number ≥ 0, found {v}"),
            )),
        },
    }
}

/// One `(height, width, frames): weight` entry of `--random-mm-bucket-config`.
type BucketEntry = ((u32, u32, u32), f64);

/// A Python dict literal of `(height, width, frames): weight` entries, as vLLM's `_parse_mm_bucket_config`
/// reads it with `ast.literal_eval` (a key may also be quoted, as JSON requires).
fn parse_bucket_config(text: &str) -> Result<Vec<BucketEntry>, String> {
    let inner = text
        .trim()
        .strip_prefix('{')
        .and_then(|t| t.strip_suffix('}'))
        .ok_or_else(|| format!("`{text}` is not a dict such as {{(256, 256, 1): 0.5}}"))?;
    let mut entries = Vec::new();
    let mut rest = inner.trim();
    while !rest.is_empty() {
        let unquoted = rest.trim_start_matches(['"', '\'']);
        let open = unquoted
            .strip_prefix('(')
            .ok_or_else(|| format!("expected a (height, width, frames) key at `{rest}`"))?;
        let (key, after) = open
            .split_once(')')
            .ok_or_else(|| format!("unclosed key at `{rest}`"))?;
        let numbers: Vec<u32> = key
            .split(',')
            .map(|n| n.trim().parse::<u32>())
            .collect::<Result<_, _>>()
            .map_err(|_| format!("Invalid bucket key ({key}). Expected tuple (H, W, T)."))?;
        let [h, w, t] = numbers[..] else {
            return Err(format!(
                "Invalid bucket key ({key}). Expected tuple (H, W, T)."
            ));
        };
        let after = after
            .trim_start_matches(['"', '\''])
            .trim_start()
            .strip_prefix(':')
            .ok_or_else(|| format!("expected `:` after ({key})"))?;
        let (value, next) = after.split_once(',').unwrap_or((after, ""));
        let weight: f64 = value
            .trim()
            .parse()
            .map_err(|_| format!("`{}` is not a probability", value.trim()))?;
        entries.push(((h, w, t), weight));
        rest = next.trim();
    }
    Ok(entries)
}

/// `--random-range-ratio`: one number for both lengths, or (recent vLLM) a JSON object
/// `{"input": r, "output": r}`; each in [0, 1).
fn range_ratios(ctx: &Ctx, f: &At<'_>) -> Result<(f64, f64), WorkloadError> {
    let check = |r: f64| -> Result<f64, WorkloadError> {
        if (0.0..1.0).contains(&r) {
            Ok(r)
        } else {
            Err(f.invalid(ctx, format!("must be in [0, 1), found {r}")))
        }
    };
    if let Value::Map(entries) = &f.node.value {
        let get = |name: &str| -> Result<f64, WorkloadError> {
            match entries.iter().find(|(k, _)| k.name == name) {
                Some((_, v)) => {
                    number(ctx, &At::new(v, format!("{}.{name}", f.path), f.line)).and_then(check)
                }
                None => Ok(0.0),
            }
        };
        return Ok((get("input")?, get("output")?));
    }
    let t = text(ctx, f)?;
    if t.trim_start().starts_with('{') {
        let json: serde_json::Value = serde_json::from_str(&t)
            .map_err(|e| f.invalid(ctx, format!("not a number or a JSON object: {e}")))?;
        let get = |name: &str| -> Result<f64, WorkloadError> {
            match json.get(name) {
                None => Ok(0.0),
                Some(v) => v
                    .as_f64()
                    .ok_or_else(|| f.invalid(ctx, format!("`{name}` is not a number")))
                    .and_then(check),
            }
        };
        return Ok((get("input")?, get("output")?));
    }
    let r = check(number(ctx, f)?)?;
    Ok((r, r))
}

/// `--header KEY=VALUE [KEY=VALUE...]`: pairs separated by whitespace (or given as a list); vLLM refuses a pair
/// without `=`.
fn headers(ctx: &Ctx, f: &At<'_>) -> Result<Vec<(String, String)>, WorkloadError> {
    words(ctx, f, "KEY=VALUE text")?
        .iter()
        .map(|item| {
            let (k, v) = item.split_once('=').ok_or_else(|| {
                f.invalid(ctx, format!("`{item}` is not KEY=VALUE (vLLM refuses it)"))
            })?;
            let k = k.trim();
            if k.is_empty() {
                return Err(f.invalid(ctx, format!("`{item}` has an empty header name")));
            }
            Ok((k.to_string(), v.trim().to_string()))
        })
        .collect()
}

/// `--goodput ttft:500 tpot:50` (milliseconds); commas are accepted as separators too.
fn goodput(ctx: &Ctx, f: &At<'_>) -> Result<Vec<GoodputConstraint>, WorkloadError> {
    let t = text(ctx, f)?;
    let mut out = Vec::new();
    for item in t.split([' ', ',']).map(str::trim).filter(|s| !s.is_empty()) {
        let Some((name, value)) = item.split_once(':') else {
            return Err(f.invalid(ctx, format!("`{item}` is not `metric:milliseconds`")));
        };
        let metric = match name {
            "ttft" => SloMetric::Ttft,
            "tpot" => SloMetric::Tpot,
            "e2el" => SloMetric::E2e,
            other => {
                return Err(f.invalid(
                    ctx,
                    format!("unknown goodput metric `{other}`; expected ttft, tpot or e2el"),
                ));
            }
        };
        let limit = value
            .parse::<f64>()
            .ok()
            .filter(|v| *v > 0.0)
            .and_then(|ms| Duration::try_from_secs_f64(ms / 1000.0).ok())
            .ok_or_else(|| {
                f.invalid(
                    ctx,
                    format!("`{value}` is not a positive number of milliseconds"),
                )
            })?;
        out.push(GoodputConstraint { metric, limit });
    }
    Ok(out)
}

/// Python's `float()` spellings of +infinity.
fn is_inf(t: &str) -> bool {
    matches!(
        t.trim().to_ascii_lowercase().as_str(),
        "inf" | "+inf" | "infinity" | "+infinity" | ".inf"
    )
}

/// A flag's value as the tool sees it: text. (The aiperf dialect's flag maps read values the same way.)
pub(super) fn text(ctx: &Ctx, f: &At<'_>) -> Result<String, WorkloadError> {
    f.node
        .scalar_text()
        .ok_or_else(|| ctx.wrong_type(&f.path, f.node, "a single value"))
}

/// A bare flag: `none`, empty or `true` set it; `false` leaves it unset.
pub(super) fn flag(ctx: &Ctx, f: &At<'_>) -> Result<bool, WorkloadError> {
    match &f.node.value {
        Value::Null | Value::Bool(true) => Ok(true),
        Value::Bool(false) => Ok(false),
        Value::Str(s) if s == "none" || s.is_empty() || s.eq_ignore_ascii_case("true") => Ok(true),
        Value::Str(s) if s.eq_ignore_ascii_case("false") => Ok(false),
        _ => Err(ctx.wrong_type(&f.path, f.node, "`none` (a bare flag)")),
    }
}

pub(super) fn number(ctx: &Ctx, f: &At<'_>) -> Result<f64, WorkloadError> {
    match &f.node.value {
        Value::Int(i) => Ok(*i as f64),
        Value::Float(v) => Ok(*v),
        Value::Str(s) => s
            .trim()
            .parse::<f64>()
            .map_err(|_| ctx.wrong_type(&f.path, f.node, "a number")),
        _ => Err(ctx.wrong_type(&f.path, f.node, "a number")),
    }
}

fn integer(ctx: &Ctx, f: &At<'_>) -> Result<i64, WorkloadError> {
    match &f.node.value {
        Value::Int(i) => Ok(*i),
        Value::Str(s) => s
            .trim()
            .parse::<i64>()
            .map_err(|_| ctx.wrong_type(&f.path, f.node, "a whole number")),
        _ => Err(ctx.wrong_type(&f.path, f.node, "a whole number")),
    }
}

fn non_negative_u64(ctx: &Ctx, f: &At<'_>) -> Result<u64, WorkloadError> {
    let v = integer(ctx, f)?;
    u64::try_from(v).map_err(|_| f.invalid(ctx, format!("must not be negative, found {v}")))
}

fn positive_u64(ctx: &Ctx, f: &At<'_>) -> Result<u64, WorkloadError> {
    match non_negative_u64(ctx, f)? {
        0 => Err(f.invalid(ctx, "must be greater than 0, found 0")),
        v => Ok(v),
    }
}
