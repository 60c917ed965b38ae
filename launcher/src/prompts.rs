//! From the workload's data section to the run's prompts, all built before the clock starts: synthetic prompts
//! of exact token lengths, shared-prefix groups, and dataset files.

use std::path::Path;

use crate::data::{
    self, DataError, DatasetOptions, LengthDistribution, Prompt, SharedPrefixSpec, Synthesizer,
    SyntheticSpec,
};
use crate::tokenizer::Tokenizer;
use crate::workload::{DataSpec, LengthShape, TokenLengths, Workload};

/// The most prompts built for one run; longer runs cycle through them, as inference-perf does with its
/// `total_count` pool.
pub const MAX_PROMPTS: u64 = 200_000;
/// Prompts built when neither the profile nor the schedule says how many (closed loops bounded by time).
pub const DEFAULT_PROMPTS: u64 = 1_000;
/// inference-perf's `mock` data: a short fixed prompt; the server client asks for 30 tokens when data sets none.
const MOCK_PROMPT_TOKENS: u32 = 10;
const MOCK_MAX_TOKENS: u32 = 30;

/// Why prompts could not be built.
#[derive(Debug, thiserror::Error)]
pub enum PromptError {
    #[error("{0}")]
    Data(#[from] DataError),
    #[error(
        "data: {what} needs a file path (downloads from dataset hubs are not supported); set it in the profile"
    )]
    MissingPath { what: &'static str },
    #[error("data: {what} must be a fixed token count for this data type, found {found}")]
    NotFixed { what: &'static str, found: String },
    #[error("data: {what}: {value} does not fit in a 32-bit token count")]
    TooLarge { what: &'static str, value: u64 },
}

/// The prompts of `workload`, `expected_requests` being how many requests the plan issues when known.
pub fn build_prompts(
    workload: &Workload,
    tokenizer: &Tokenizer,
    expected_requests: Option<u64>,
) -> Result<Vec<Prompt>, PromptError> {
    let seed = workload.seed;
    let pool = |declared: Option<u64>| -> usize {
        let n = match (declared, expected_requests) {
            (Some(d), Some(e)) => d.min(e),
            (Some(n), None) | (None, Some(n)) => n,
            (None, None) => DEFAULT_PROMPTS,
        };
        n.clamp(1, MAX_PROMPTS) as usize
    };
    let prompts = match &workload.data {
        DataSpec::Mock => synthetic(
            tokenizer,
            &SyntheticSpec {
                num_prompts: pool(None),
                prompt_tokens: LengthDistribution::Fixed(MOCK_PROMPT_TOKENS),
                output_tokens: Some(LengthDistribution::Fixed(MOCK_MAX_TOKENS)),
                prefix_buckets: Vec::new(),
                seed,
            },
        )?,
        DataSpec::Random(random) => {
            let prefix_buckets = if random.prefix_len > 0 {
                vec![data::PrefixBucket {
                    prefix_tokens: to_u32("random prefix length", random.prefix_len)?,
                    prefix_count: 1,
                    weight: 1.0,
                }]
            } else {
                Vec::new()
            };
            synthetic(
                tokenizer,
                &SyntheticSpec {
                    num_prompts: pool(random.input.total_count),
                    prompt_tokens: distribution("input length", &random.input)?,
                    output_tokens: Some(distribution("output length", &random.output)?),
                    prefix_buckets,
                    seed,
                },
            )?
        }
        DataSpec::SyntheticText(text) => synthetic(
            tokenizer,
            &SyntheticSpec {
                num_prompts: pool(Some(text.samples)),
                prompt_tokens: distribution("prompt_tokens", &text.prompt)?,
                output_tokens: text
                    .output
                    .as_ref()
                    .map(|o| distribution("output_tokens", o))
                    .transpose()?,
                prefix_buckets: text
                    .prefix_buckets
                    .iter()
                    .map(|b| {
                        Ok(data::PrefixBucket {
                            prefix_tokens: to_u32("prefix_tokens", b.prefix_tokens)?,
                            prefix_count: to_u32("prefix_count", b.prefix_count)?,
                            weight: b.bucket_weight as f64,
                        })
                    })
                    .collect::<Result<_, PromptError>>()?,
                seed,
            },
        )?,
        DataSpec::SharedPrefix(shared) => {
            let synth = Synthesizer::new(tokenizer)?;
            data::shared_prefix_prompts(
                &synth,
                &SharedPrefixSpec {
                    num_groups: to_u32("num_groups", shared.num_groups)?,
                    prompts_per_group: to_u32(
                        "num_prompts_per_group",
                        shared.num_prompts_per_group,
                    )?,
                    system_prompt_len: fixed("system_prompt_len", &shared.system_prompt_len)?,
                    question_len: distribution("question_len", &shared.question_len)?,
                    output_len: Some(distribution("output_len", &shared.output_len)?),
                    shuffle: true,
                    seed: shared.seed.unwrap_or(seed),
                },
            )?
            .into_inner()
        }
        DataSpec::ShareGpt(sharegpt) => {
            let path = sharegpt.path.as_deref().ok_or(PromptError::MissingPath {
                what: "shareGPT data",
            })?;
            let options = DatasetOptions {
                output_tokens: sharegpt
                    .output
                    .as_ref()
                    .map(|o| fixed("output length", o))
                    .transpose()?,
                limit: Some(pool(None)),
                shuffle_seed: Some(seed),
                ..DatasetOptions::default()
            };
            data::load_sharegpt(Path::new(path), tokenizer, &options)?.into_inner()
        }
        DataSpec::Sonnet(sonnet) => {
            let corpus = std::fs::read_to_string(&sonnet.path).map_err(|source| {
                PromptError::Data(DataError::Read {
                    path: sonnet.path.clone().into(),
                    source,
                })
            })?;
            let synth = Synthesizer::with_corpus(tokenizer, &sonnet.path, &corpus)?;
            let prefix_buckets = if sonnet.prefix_len > 0 {
                vec![data::PrefixBucket {
                    prefix_tokens: to_u32("sonnet-prefix-len", sonnet.prefix_len)?,
                    prefix_count: 1,
                    weight: 1.0,
                }]
            } else {
                Vec::new()
            };
            data::synthetic_prompts(
                &synth,
                &SyntheticSpec {
                    num_prompts: pool(None),
                    prompt_tokens: LengthDistribution::Fixed(to_u32(
                        "sonnet-input-len",
                        sonnet.input_len,
                    )?),
                    output_tokens: Some(LengthDistribution::Fixed(to_u32(
                        "sonnet-output-len",
                        sonnet.output_len,
                    )?)),
                    prefix_buckets,
                    seed,
                },
            )?
            .into_inner()
        }
        DataSpec::File(file) => {
            let options = DatasetOptions {
                output_tokens: file
                    .output_len
                    .map(|n| to_u32("output length", n))
                    .transpose()?,
                limit: Some(pool(None)),
                ..DatasetOptions::default()
            };
            data::load_dataset(Path::new(&file.path), tokenizer, &options)?.into_inner()
        }
    };
    Ok(prompts)
}

fn synthetic(tokenizer: &Tokenizer, spec: &SyntheticSpec) -> Result<Vec<Prompt>, PromptError> {
    let synth = Synthesizer::new(tokenizer)?;
    Ok(data::synthetic_prompts(&synth, spec)?.into_inner())
}

fn to_u32(what: &'static str, value: u64) -> Result<u32, PromptError> {
    u32::try_from(value).map_err(|_| PromptError::TooLarge { what, value })
}

fn fixed(what: &'static str, lengths: &TokenLengths) -> Result<u32, PromptError> {
    match lengths.shape {
        LengthShape::Fixed(n) => to_u32(what, n),
        ref other => Err(PromptError::NotFixed {
            what,
            found: format!("{other:?}"),
        }),
    }
}

/// The workload's length shape as the data module samples it.
fn distribution(
    what: &'static str,
    lengths: &TokenLengths,
) -> Result<LengthDistribution, PromptError> {
    let bound = |v: u64| to_u32(what, v);
    Ok(match lengths.shape {
        LengthShape::Fixed(n) => LengthDistribution::Fixed(bound(n)?),
        LengthShape::Uniform { min, max } => LengthDistribution::Uniform {
            min: bound(min)?,
            max: bound(max)?,
        },
        LengthShape::Normal {
            mean,
            spread,
            min,
            max,
        } => LengthDistribution::Normal {
            mean,
            std_dev: spread.std_dev(),
            min: bound(min)?,
            max: bound(max)?,
        },
        LengthShape::SkewNormal {
            mean,
            spread,
            skew,
            min,
            max,
        } => LengthDistribution::SkewNormal {
            mean,
            std_dev: spread.std_dev(),
            skew,
            min: bound(min)?,
            max: bound(max)?,
        },
        LengthShape::LogNormal {
            mean,
            spread,
            min,
            max,
        } => LengthDistribution::Lognormal {
            mean,
            std_dev: spread.std_dev(),
            min: bound(min)?,
            max: bound(max)?,
        },
        LengthShape::Poisson { mean, min, max } => LengthDistribution::Poisson {
            mean,
            min: bound(min)?,
            max: bound(max)?,
        },
        LengthShape::RangeRatio { len, ratio } => {
            LengthDistribution::vllm_range(bound(len)?, ratio)?
        }
    })
}
