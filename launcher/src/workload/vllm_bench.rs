//! `vllm bench serve` / InferenceMAX flag maps → `Workload` (FORMATS 1.4, 3.4, 3.8).
//!
//! Every key is a command-line flag (`--key=value`); `none` (or an empty value) is a bare flag,
//! `executable` names the script and is not a flag. As vLLM's argument parser does, `_` and `-`
//! are interchangeable in flag names. Values reach the tool as text, so quoted numbers are fine.

use std::time::Duration;

use super::ParseOptions;
use super::error::WorkloadError;
use super::inference_perf::set_default_seed;
use super::model::*;
use super::reader::{At, Ctx, MapReader};
use super::yaml::{Key, Node, Value};

// Defaults of `vllm bench serve` (vllm/benchmarks/serve.py, datasets/arg_utils.py).
const DEFAULT_NUM_PROMPTS: u64 = 1000;
const DEFAULT_RANDOM_INPUT_LEN: u64 = 1024;
const DEFAULT_RANDOM_OUTPUT_LEN: u64 = 128;
const DEFAULT_SONNET_INPUT_LEN: u64 = 550;
const DEFAULT_SONNET_OUTPUT_LEN: u64 = 150;
const DEFAULT_SONNET_PREFIX_LEN: u64 = 200;
const DEFAULT_CUSTOM_OUTPUT_LEN: u64 = 256;

/// Flags that belong to one dataset or another: known, whichever dataset is chosen.
const DATASET_KEYS: [&str; 12] = [
    "dataset-path",
    "random-input-len",
    "random-output-len",
    "random-prefix-len",
    "random-range-ratio",
    "sharegpt-output-len",
    "sonnet-input-len",
    "sonnet-output-len",
    "sonnet-prefix-len",
    "custom-output-len",
    "custom-skip-chat-template",
    "hf-split",
];

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
    if let Some(f) = m.get("model") {
        w.api.model = Some(text(ctx, &f)?);
    }
    if let Some(f) = m.get("tokenizer") {
        w.tokenizer = Some(TokenizerSpec {
            name_or_path: text(ctx, &f)?,
            token: None,
            trust_remote_code: false,
        });
    }
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
    let backend = match m.get("backend") {
        Some(f) => text(ctx, &f)?,
        None => "openai".to_string(),
    };
    w.api.kind = match backend.as_str() {
        "openai-chat" => ApiKind::Chat,
        "openai" | "vllm" => ApiKind::Completion,
        other => {
            let f = m.take("backend");
            let line = f.map_or(0, |f| f.line);
            return Err(ctx.unsupported("backend", line, format!("backend `{other}`")));
        }
    };
    if let Some(f) = m.get("endpoint") {
        let path = text(ctx, &f)?;
        if path.contains("chat/completions") {
            w.api.kind = ApiKind::Chat;
        } else if path.ends_with("/completions") {
            w.api.kind = ApiKind::Completion;
        } else {
            return Err(f.unsupported(ctx, format!("endpoint `{path}`")));
        }
        w.api.endpoint = Some(path);
    }
    let ignore_eos = match m.take("ignore-eos") {
        Some(f) => flag(ctx, &f)?,
        None => false,
    };

    let num_prompts = match m.get("num-prompts") {
        Some(f) => positive_u64(ctx, &f)?,
        None => DEFAULT_NUM_PROMPTS,
    };
    let rate = match m.get("request-rate") {
        None => Rate::Infinite,
        Some(f) => {
            let t = text(ctx, &f)?;
            if is_inf(&t) {
                Rate::Infinite
            } else {
                let v = number(ctx, &f)?;
                if v.is_infinite() && v > 0.0 {
                    Rate::Infinite
                } else if v > 0.0 {
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
            u32::try_from(n).map_err(|_| f.invalid(ctx, format!("{n} is too large")))
        })
        .transpose()?;
    for key in ["ramp-up-strategy", "ramp-up-start-rps", "ramp-up-end-rps"] {
        if let Some(f) = m.get(key) {
            return Err(f.unsupported(ctx, "request-rate ramp-up"));
        }
    }
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
    w.data = dataset_spec(ctx, &mut m, &dataset.0, dataset.1)?;
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
    w.api.ignore_eos = ignore_eos || matches!(w.data, DataSpec::Random(_));

    if let Some(f) = m.get("percentile-metrics") {
        let t = text(ctx, &f)?;
        let metrics: Vec<String> = t
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect();
        if let Some(bad) = metrics
            .iter()
            .find(|s| !matches!(s.as_str(), "ttft" | "tpot" | "itl" | "e2el"))
        {
            return Err(f.invalid(
                ctx,
                format!("unknown metric `{bad}`; expected ttft, tpot, itl or e2el"),
            ));
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
        w.warmup_requests = non_negative_u64(ctx, &f)?;
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
        w.request_timeout = Some(
            Duration::try_from_secs_f64(v)
                .map_err(|_| f.invalid(ctx, format!("{v} s is out of range")))?,
        );
    }
    for key in [
        "save-result",
        "disable-tqdm",
        "label",
        "metadata",
        "append-result",
    ] {
        m.skip(key);
    }
    for key in [
        "temperature",
        "top-p",
        "top-k",
        "min-p",
        "logprobs",
        "use-beam-search",
        "lora-modules",
        "extra-body",
    ] {
        if let Some(f) = m.take(key) {
            let feature = if key == "lora-modules" {
                "LoRA modules".to_string()
            } else {
                format!("the sampling option `--{key}`")
            };
            return Err(f.unsupported(ctx, feature));
        }
    }

    w.stages = vec![Stage {
        load: match rate {
            Rate::Infinite if max_concurrency.is_some() => LoadKind::Concurrent,
            Rate::Infinite => LoadKind::Throughput,
            Rate::PerSecond(_) if burstiness == 1.0 => LoadKind::Poisson,
            Rate::PerSecond(_) if burstiness.is_infinite() => LoadKind::Constant,
            Rate::PerSecond(_) => LoadKind::Gamma,
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

fn dataset_spec(
    ctx: &mut Ctx,
    m: &mut MapReader<'_>,
    name: &str,
    line: u32,
) -> Result<DataSpec, WorkloadError> {
    let len = |m: &mut MapReader<'_>, key: &str, default: u64| -> Result<u64, WorkloadError> {
        match m.get(key) {
            Some(f) => non_negative_u64(ctx, &f),
            None => Ok(default),
        }
    };
    let spec = match name {
        "random" => {
            let input = len(m, "random-input-len", DEFAULT_RANDOM_INPUT_LEN)?;
            let output = len(m, "random-output-len", DEFAULT_RANDOM_OUTPUT_LEN)?;
            let prefix_len = len(m, "random-prefix-len", 0)?;
            let ratio = match m.get("random-range-ratio") {
                Some(f) => {
                    let r = number(ctx, &f)?;
                    if !(0.0..1.0).contains(&r) {
                        return Err(f.invalid(ctx, format!("must be in [0, 1), found {r}")));
                    }
                    r
                }
                None => 0.0,
            };
            let shape = |l: u64| TokenLengths {
                shape: if ratio == 0.0 {
                    LengthShape::Fixed(l)
                } else {
                    LengthShape::RangeRatio { len: l, ratio }
                },
                total_count: None,
            };
            DataSpec::Random(RandomData {
                input: shape(input),
                output: shape(output),
                prefix_len,
                text: PromptText::RandomTokens,
            })
        }
        "sharegpt" => {
            let path = m.get("dataset-path").map(|f| text(ctx, &f)).transpose()?;
            let output = m
                .get("sharegpt-output-len")
                .map(|f| non_negative_u64(ctx, &f).map(TokenLengths::fixed))
                .transpose()?;
            DataSpec::ShareGpt(ShareGpt {
                path,
                input_filter: None,
                output,
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
            let input_len = len(m, "sonnet-input-len", DEFAULT_SONNET_INPUT_LEN)?;
            let output_len = len(m, "sonnet-output-len", DEFAULT_SONNET_OUTPUT_LEN)?;
            let prefix_len = len(m, "sonnet-prefix-len", DEFAULT_SONNET_PREFIX_LEN)?;
            DataSpec::Sonnet(Sonnet {
                path,
                input_len,
                output_len,
                prefix_len,
            })
        }
        "custom" => {
            let path = m
                .require(
                    ctx,
                    "dataset-path",
                    "the custom dataset is read from a file",
                )
                .and_then(|f| text(ctx, &f))?;
            let output_len = match m.get("custom-output-len") {
                None => Some(DEFAULT_CUSTOM_OUTPUT_LEN),
                Some(f) => {
                    let v = integer(ctx, &f)?;
                    match v {
                        -1 => None,
                        v if v > 0 => Some(v as u64),
                        v => {
                            return Err(f.invalid(
                                ctx,
                                format!(
                                    "must be > 0, or -1 for the dataset's own lengths; found {v}"
                                ),
                            ));
                        }
                    }
                }
            };
            m.skip("custom-skip-chat-template");
            DataSpec::File(DatasetFile { path, output_len })
        }
        "random-mm" | "random-rerank" | "hf" | "burstgpt" | "prefix_repetition"
        | "prefix-repetition" | "spec_bench" | "spec-bench" | "sharegpt4v" | "visionarena"
        | "instructcoder" | "mtbench" => {
            return Err(ctx.unsupported("dataset-name", line, format!("the `{name}` dataset")));
        }
        other => {
            return Err(ctx.invalid(
                "dataset-name",
                line,
                format!(
                    "unknown dataset `{other}`; llmbench runs random, sharegpt, sonnet and custom"
                ),
            ));
        }
    };
    Ok(spec)
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

/// A flag's value as the tool sees it: text.
fn text(ctx: &Ctx, f: &At<'_>) -> Result<String, WorkloadError> {
    f.node
        .scalar_text()
        .ok_or_else(|| ctx.wrong_type(&f.path, f.node, "a single value"))
}

/// A bare flag: `none`, empty or `true` set it; `false` leaves it unset.
fn flag(ctx: &Ctx, f: &At<'_>) -> Result<bool, WorkloadError> {
    match &f.node.value {
        Value::Null | Value::Bool(true) => Ok(true),
        Value::Bool(false) => Ok(false),
        Value::Str(s) if s == "none" || s.is_empty() || s.eq_ignore_ascii_case("true") => Ok(true),
        Value::Str(s) if s.eq_ignore_ascii_case("false") => Ok(false),
        _ => Err(ctx.wrong_type(&f.path, f.node, "`none` (a bare flag)")),
    }
}

fn number(ctx: &Ctx, f: &At<'_>) -> Result<f64, WorkloadError> {
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
