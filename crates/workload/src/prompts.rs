//! From the workload's data section to the run's prompts, all built before the clock starts: synthetic prompts
//! of exact token lengths, shared-prefix groups, and dataset files read the way each tool reads them (vLLM's
//! `sharegpt`, `sonnet` and `custom` datasets, inference-perf's `shareGPT`).
//!
//! A synthetic prompt of "N tokens" is as long on the server as the imitated tool's own would be: each tool counts
//! the special tokens its tokenizer adds (a BOS) in its own way (`SpecialTokens`), and the length recorded for
//! the request is what the server counts for a completion — the text's own tokens and those special tokens.

mod aiperf_rankings_file;
mod burstgpt;
mod guidellm_file;
pub mod guidellm_trace;
mod visionarena;
mod vllm_hf;

use std::path::{Path, PathBuf};

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt as _, SeedableRng as _};
use serde_json::Value;

use crate::workload::{
    ApiKind, DataSpec, DatasetFile, DatasetRows, Harness, LengthShape, PromptText, RandomData,
    RandomRerank, SeedOrigin, ShareGpt, SharedPrefixStyle, Sonnet, Spread, TokenLengths, Workload,
};
use llmbench_data::{
    self as data, DataError, DatasetOptions, LengthDistribution, Prompt, SharedPrefixSpec,
    Synthesizer, SyntheticSpec,
};
use llmbench_text::chat_template::{ChatTemplate, ChatTemplateError};
use llmbench_text::py_random::PyRandom;
use llmbench_text::tokenizer::{AddedSpecialTokens, Tokenizer};

pub use aiperf_rankings_file::AiperfRankingsFileError;

/// The most prompts built for one run; longer runs cycle through them, as inference-perf does with its
/// `total_count` pool.
pub(crate) const MAX_PROMPTS: u64 = 200_000;
/// Prompts built when neither the profile nor the schedule says how many (closed loops bounded by time).
pub(crate) const DEFAULT_PROMPTS: u64 = 1_000;
/// inference-perf's `mock` data: a short fixed prompt; the server client asks for 30 tokens when data sets none.
const MOCK_PROMPT_TOKENS: u32 = 10;
const MOCK_MAX_TOKENS: u32 = 30;

/// Why prompts could not be built.
#[derive(Debug, thiserror::Error)]
pub enum PromptError {
    #[error("{0}")]
    Data(#[from] DataError),
    #[error("data: {0}")]
    ChatTemplate(#[from] ChatTemplateError),
    #[error(
        "data: {what} renders every prompt through the tokenizer's chat template, and {tokenizer} has none: pass \
         --tokenizer a directory holding the model's tokenizer.json and tokenizer_config.json, or skip the \
         template (vLLM: `skip-chat-template: none`; inference-perf: `use_chat_template: false`)"
    )]
    NoChatTemplate {
        /// Which tokenizer, and where its template was looked for.
        tokenizer: String,
        what: &'static str,
    },
    #[error(
        "data: {what} needs a file path (downloads from dataset hubs are not supported); set it in the profile"
    )]
    MissingPath { what: &'static str },
    /// A trace's requests are built with their schedule (the `trace` module), not as a pool of prompts.
    #[error(
        "data: a mooncake trace's requests are built from the trace with its schedule, not as a prompt pool"
    )]
    TraceData,
    /// inference-perf refuses an input length its chat template alone fills.
    #[error(
        "data: an input length of {length} tokens does not exceed the chat template's own {overhead}: with \
         `use_chat_template: true` inference-perf's lengths are the templated prompt's, so each must be longer"
    )]
    BelowTemplate { length: u32, overhead: u32 },
    /// The templated prompt never tokenized to its length (inference-perf gives up after the same 20 tries).
    #[error(
        "data: no templated prompt of exactly {length} tokens after {tries} tries (the last had {last}); the \
         tokenizer likely does not match the model's"
    )]
    NeverExact {
        length: u32,
        tries: usize,
        last: u32,
    },
    #[error("data: {what} must be a fixed token count for this data type, found {found}")]
    NotFixed { what: &'static str, found: String },
    #[error("data: {what}: {value} does not fit in a 32-bit token count")]
    TooLarge { what: &'static str, value: u64 },
    /// vLLM's `SonnetDataset` refuses an input length that does not exceed its instruction line.
    #[error(
        "data: sonnet-input-len ({input_len}) must be higher than the base prompt's length ({base} tokens under \
         this tokenizer), as vLLM requires"
    )]
    SonnetTooShort { input_len: u64, base: u32 },
    /// vLLM's sonnet sampler loops until a prompt fits; here it gives up and says why.
    #[error(
        "data: {path}: no sonnet prompt of at most {input_len} tokens after {attempts} attempts (the instruction \
         line and {prefix_lines} prefix line(s) alone take {fixed_tokens} tokens); raise sonnet-input-len or \
         lower sonnet-prefix-len (vLLM would loop for ever)"
    )]
    SonnetNeverFits {
        path: PathBuf,
        input_len: u64,
        prefix_lines: usize,
        fixed_tokens: u32,
        attempts: usize,
    },
    /// vLLM's `RandomDataset` refuses an input length that leaves no token once the special tokens are out.
    #[error(
        "data: random-input-len {input_len} leaves no token of text: the tokenizer adds {specials} special \
         token(s), which vLLM counts in the input length (the text is random-input-len − {specials} tokens{range}); \
         raise random-input-len or random-prefix-len{ratio_help}",
        range = if *range_ratio > 0.0 { format!(", at least {:.0}% of it with random-range-ratio {range_ratio}", (1.0 - range_ratio) * 100.0) } else { String::new() },
        ratio_help = if *range_ratio > 0.0 { ", or lower random-range-ratio" } else { "" }
    )]
    VllmInputTooShort {
        input_len: u64,
        specials: u32,
        range_ratio: f64,
    },
    /// AIPerf's rankings entries would carry more passages than a run builds.
    #[error(
        "data: the rankings entries carry {passages} passages in all, more than the {max} llmbench builds for a \
         run; lower --num-dataset-entries or --rankings-passages-mean"
    )]
    TooManyPassages { passages: u64, max: u64 },
    #[error("data: {0}")]
    AiperfRankingsFile(#[from] AiperfRankingsFileError),
    /// Multi-turn data is built by `conversations::build_conversations`, never as a list of prompts.
    #[error(
        "data: {what} is multi-turn; its requests are built as conversations, not as a list of prompts"
    )]
    Conversational { what: &'static str },
}

/// Whether a run's prompts are new to the server, as far as its prefix cache can tell.
///
/// Every run of a profile used to send the same prompts, so an engine's prefix cache carried hits from one run
/// into the next (0 % and then 99.7 % of prompt tokens on llama.cpp for two runs of one profile). Synthetic data
/// drawn with the tool's default seed is therefore drawn with a seed of the run's own instead; data that the
/// profile pins (its own seed, `--seed`, a dataset file, a trace) is sent as the upstream tool would send it, and
/// the run says that an earlier run may have warmed the cache with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PromptOrigin {
    /// Synthetic, drawn with `seed`, this run's own: no earlier run sent these prompts.
    Fresh { seed: u64 },
    /// The same in every run; `by` says what pins them (`the profile's seed 7`, `the dataset file d.jsonl`).
    Pinned { by: String },
}

impl PromptOrigin {
    /// The seed synthetic data is drawn with: the run's own when fresh, else the workload's.
    pub fn seed(&self, workload: &Workload) -> u64 {
        match self {
            PromptOrigin::Fresh { seed } => *seed,
            PromptOrigin::Pinned { .. } => workload.seed,
        }
    }
}

/// Where `workload`'s prompts come from: fresh ones drawn with `nonce` (a value no earlier run used, e.g. from
/// the wall clock) unless the profile pins them. Only the prompts change: arrivals keep the workload's seed, so
/// two runs of one profile still offer the same schedule.
pub fn prompt_origin(workload: &Workload, nonce: u64) -> PromptOrigin {
    let pinned = |by: String| PromptOrigin::Pinned { by };
    match &workload.data {
        DataSpec::ShareGpt(ShareGpt { path, .. }) => {
            return pinned(dataset("the ShareGPT file", path.as_deref()));
        }
        DataSpec::Sonnet(sonnet) => return pinned(format!("the sonnet file {}", sonnet.path)),
        DataSpec::File(file) => return pinned(format!("the dataset file {}", file.path)),
        DataSpec::GuidellmFile(file) => return pinned(format!("the data file {}", file.path)),
        DataSpec::BurstGpt(file) => return pinned(format!("the BurstGPT file {}", file.path)),
        DataSpec::VllmHf(hf) => return pinned(format!("the dataset {}", hf.path)),
        DataSpec::VisionArena(va) => return pinned(format!("the dataset {}", va.path)),
        DataSpec::AiperfFile(file) => return pinned(format!("the dataset file {}", file.path)),
        DataSpec::AiperfRankingsFile(file) => {
            return pinned(format!("the dataset file {}", file.path));
        }
        DataSpec::MooncakeTrace(_) | DataSpec::AzureTrace(_) | DataSpec::OtelTrace(_) => {
            return pinned("the trace it replays".to_owned());
        }
        // Synthetic text of the trace's lengths: fresh per run unless a seed pins it, as guidellm's own.
        DataSpec::GuidellmTrace(_) => {}
        DataSpec::SharedPrefix(shared) if shared.seed.is_some() => {
            return pinned(format!(
                "the profile's data seed {}",
                shared.seed.unwrap_or_default()
            ));
        }
        DataSpec::Mock
        | DataSpec::Random(_)
        | DataSpec::SharedPrefix(_)
        | DataSpec::SyntheticText(_)
        | DataSpec::AiperfConversations(_)
        | DataSpec::AiperfRankings(_)
        | DataSpec::ConversationReplay(_) => {}
    }
    match workload.seed_origin {
        SeedOrigin::Profile => pinned(format!("the profile's seed {}", workload.seed)),
        SeedOrigin::Caller => pinned(format!("the seed given, --seed {}", workload.seed)),
        SeedOrigin::ToolDefault => PromptOrigin::Fresh { seed: nonce },
    }
}

fn dataset(what: &str, path: Option<&str>) -> String {
    match path {
        Some(path) => format!("{what} {path}"),
        None => what.to_owned(),
    }
}

/// Whether `workload`'s prompts share text by design (a shared prefix, prefix buckets, a random prefix): such a
/// run keeps one set of prompts for all its stages, so what its prompts share stays shared within the run.
pub fn shares_prefixes(workload: &Workload) -> bool {
    match &workload.data {
        DataSpec::SharedPrefix(_) | DataSpec::Sonnet(_) => true,
        DataSpec::Random(random) => random.prefix_len > 0,
        DataSpec::SyntheticText(text) => !text.prefix_buckets.is_empty(),
        DataSpec::AiperfConversations(a) => a.prefix_pool.is_some(),
        _ => false,
    }
}

/// Whether each stage sends `workload`'s requests from the first again, as inference-perf's `visionarena` data does
/// (`get_data` numbers each stage's requests from 0, and request `i` sends pool entry `i % len(pool)`).
pub fn restarts_each_stage(workload: &Workload) -> bool {
    matches!(workload.data, DataSpec::VisionArena(_))
}

/// Whether the requests ask for exactly their `max_tokens` (`ignore_eos`): the profile's setting, except for a
/// guidellm data file, whose rows decide (guidellm sends `ignore_eos` with a row's output token count).
pub fn asks_exact_lengths(workload: &Workload) -> Result<bool, PromptError> {
    match &workload.data {
        DataSpec::GuidellmFile(file) => guidellm_file::asks_exact_lengths(file),
        _ => Ok(workload.api.ignore_eos),
    }
}

/// The seed of stage `stage`'s own prompts, for a run with fresh prompts: the run's seed for its first stage,
/// then a different one per stage (SplitMix64's finaliser of the pair), so no stage re-sends another's prompts.
pub fn stage_prompt_seed(seed: u64, stage: u32) -> u64 {
    if stage == 0 {
        return seed;
    }
    let mut z = seed ^ u64::from(stage).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Set apart the image draws of a seed from its text draws.
const IMAGE_SEED_SALT: u64 = 0x1a6e_5eed;

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
    // Synthetic prompts count the special tokens the tokenizer adds as the imitated tool does, and record the
    // length the server counts for them: their own tokens and those special tokens.
    let specials = tokenizer.added_special_tokens().map_err(DataError::from)?;
    let counting = SpecialTokens::of(workload.harness);
    let in_each_length = counting.in_each_length(specials);
    let as_sent = |prompts: Vec<Prompt>| -> Vec<Prompt> {
        prompts
            .into_iter()
            .map(|mut p| {
                p.input_tokens = p.input_tokens.saturating_add(specials.total);
                p
            })
            .collect()
    };
    let prompts = match &workload.data {
        DataSpec::Mock => as_sent(synthetic(
            tokenizer,
            &SyntheticSpec {
                num_prompts: pool(None),
                prompt_tokens: LengthDistribution::Fixed(MOCK_PROMPT_TOKENS),
                output_tokens: Some(LengthDistribution::Fixed(MOCK_MAX_TOKENS)),
                prefix_buckets: Vec::new(),
                specials_in_each_length: in_each_length,
                seed,
            },
        )?),
        DataSpec::Random(RandomData {
            input,
            rerank: Some(rerank),
            ..
        }) => vllm_rerank_prompts(input, *rerank, tokenizer, specials.total, seed)?,
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
            let input = match counting {
                SpecialTokens::InInputLen => {
                    vllm_real_input_len(&random.input, specials.total, random.prefix_len)?
                }
                _ => random.input.clone(),
            };
            // inference-perf's `use_chat_template`: the length is the templated text's, which carries its own
            // special tokens.
            let wrap = workload.api.use_chat_template == Some(true);
            let spec = SyntheticSpec {
                num_prompts: pool(random.input.total_count),
                prompt_tokens: distribution("input length", &input)?,
                output_tokens: Some(distribution("output length", &random.output)?),
                prefix_buckets,
                specials_in_each_length: if wrap { 0 } else { in_each_length },
                seed,
            };
            let prompts = match &random.text {
                // inference-perf `synthetic` with a corpus file: prompts are cut from its text.
                PromptText::Corpus { path: Some(path) } => {
                    let corpus = read_text(Path::new(path))?;
                    let synth = Synthesizer::with_corpus(tokenizer, path, &corpus)?;
                    data::synthetic_prompts(&synth, &spec)?.into_inner()
                }
                PromptText::Corpus { path: None } | PromptText::RandomTokens => {
                    synthetic(tokenizer, &spec)?
                }
            };
            let mut prompts = if wrap {
                chat_templated(prompts, tokenizer, seed)?
            } else {
                as_sent(prompts)
            };
            if let Some(images) = &random.images {
                // Drawn from their own stream, so the text is the same with or without images.
                let drawn = llmbench_data::image::random_images(
                    images,
                    prompts.len(),
                    seed ^ IMAGE_SEED_SALT,
                );
                attach(&mut prompts, drawn);
            }
            prompts
        }
        DataSpec::SyntheticText(text) => {
            let mut prompts = as_sent(synthetic(
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
                    specials_in_each_length: in_each_length,
                    seed,
                },
            )?);
            if let Some(images) = &text.images {
                let drawn = llmbench_data::image::normal_images(
                    images,
                    prompts.len(),
                    seed ^ IMAGE_SEED_SALT,
                );
                attach(&mut prompts, drawn);
            }
            prompts
        }
        DataSpec::SharedPrefix(shared) => {
            let synth = Synthesizer::new(tokenizer)?;
            let (shuffle, specials_in_each_length, py_shuffle) = match shared.style {
                SharedPrefixStyle::InferencePerf => (true, in_each_length, false),
                // `PrefixRepetitionRandomDataset.sample`: token ids of exactly the asked lengths, decoded
                // without special tokens; the list is shuffled by Python's `random` seeded in `__init__`.
                SharedPrefixStyle::VllmPrefixRepetition { shuffle } => (false, 0, shuffle),
            };
            let mut prompts = data::shared_prefix_prompts(
                &synth,
                &SharedPrefixSpec {
                    num_groups: to_u32("num_groups", shared.num_groups)?,
                    prompts_per_group: to_u32(
                        "num_prompts_per_group",
                        shared.num_prompts_per_group,
                    )?,
                    system_prompt_len: distribution(
                        "system_prompt_len",
                        &shared.system_prompt_len,
                    )?,
                    question_len: distribution("question_len", &shared.question_len)?,
                    output_len: Some(distribution("output_len", &shared.output_len)?),
                    shuffle,
                    specials_in_each_length,
                    seed: shared.seed.unwrap_or(seed),
                    prefix_images: woven_images(
                        "shared_prefix.multimodal.image.count",
                        &shared.prefix_images,
                    )?,
                    question_images: woven_images(
                        "multimodal.image.count",
                        &shared.question_images,
                    )?,
                },
            )?
            .into_inner();
            if py_shuffle {
                PyRandom::seed(shared.seed.unwrap_or(seed)).shuffle(&mut prompts);
            }
            as_sent(prompts)
        }
        DataSpec::ShareGpt(sharegpt) => match workload.harness {
            Harness::InferencePerf => {
                inference_perf_sharegpt(sharegpt, tokenizer, workload.api.kind, pool(None))?
            }
            _ => vllm_sharegpt(
                sharegpt,
                tokenizer,
                seed,
                pool(None),
                workload.api.kind == ApiKind::Chat,
            )?,
        },
        DataSpec::Sonnet(sonnet) => vllm_sonnet(
            sonnet,
            tokenizer,
            seed,
            pool(None),
            workload.api.kind == ApiKind::Completion,
        )?,
        DataSpec::File(file) => vllm_custom(file, tokenizer, pool(None))?,
        DataSpec::BurstGpt(file) => burstgpt::burstgpt_prompts(file, tokenizer, seed, pool(None))?,
        DataSpec::VllmHf(hf) => vllm_hf::vllm_hf_prompts(hf, tokenizer, seed, pool(None))?,
        DataSpec::VisionArena(va) => visionarena::visionarena_prompts(va, tokenizer, pool(None))?,
        DataSpec::GuidellmFile(file) => {
            let prompts = guidellm_file::guidellm_file_prompts(file, tokenizer)?;
            if prompts.skipped > 0 {
                tracing::warn!(
                    file = file.path,
                    skipped = prompts.skipped,
                    "rows without text in the prompt (or prefix) column are left out, as guidellm skips them"
                );
            }
            let mut prompts = prompts.into_inner();
            prompts.truncate(pool(None));
            prompts
        }
        DataSpec::AiperfRankings(rankings) => {
            aiperf_rankings_prompts(tokenizer, rankings, pool(Some(rankings.entries)), seed)?
        }
        // One prompt per line, sent in order: a run of N requests reads no further than the N-th.
        DataSpec::AiperfRankingsFile(file) => aiperf_rankings_file::aiperf_rankings_file_prompts(
            file,
            tokenizer,
            pool(Some(MAX_PROMPTS)),
        )?,
        DataSpec::ConversationReplay(_) => {
            return Err(PromptError::Conversational {
                what: "conversation_replay",
            });
        }
        DataSpec::AiperfConversations(_) | DataSpec::AiperfFile(_) => {
            return Err(PromptError::Conversational {
                what: "AIPerf conversations",
            });
        }
        DataSpec::MooncakeTrace(_)
        | DataSpec::AzureTrace(_)
        | DataSpec::OtelTrace(_)
        | DataSpec::GuidellmTrace(_) => {
            return Err(PromptError::TraceData);
        }
    };
    Ok(prompts)
}

fn synthetic(tokenizer: &Tokenizer, spec: &SyntheticSpec) -> Result<Vec<Prompt>, PromptError> {
    let synth = Synthesizer::new(tokenizer)?;
    Ok(data::synthetic_prompts(&synth, spec)?.into_inner())
}

/// How the tool a dialect imitates counts the special tokens its tokenizer adds around a prompt (a BOS, …) in the
/// lengths a profile asks for. The server counts them whatever the tool does, so each tool's prompts are as long
/// on the server as that tool's own would be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SpecialTokens {
    /// A length is the text's own tokens, the special tokens come on top: AIPerf (its tokenizer wrapper encodes
    /// with `add_special_tokens=False`), InferenceMAX's `bench_serving` (re-encodes so, and counts no special
    /// token), and llmbench's own data.
    OnTop,
    /// Each generated text's length counts all of them: inference-perf's `count_tokens` calls the tokenizer with
    /// its default `add_special_tokens=True` until the count is exact (`random`, `synthetic`, `shared_prefix`:
    /// the system prompt and each question alike).
    InEachText,
    /// Each generated text's length counts those in front: guidellm's synthetic text keeps the first N ids of
    /// `encode(text)` (a BOS among them) and decodes them with `skip_special_tokens=True` (the prompt and each
    /// prefix alike).
    LeadingInEachText,
    /// The input length counts all of them, the random prefix none: vLLM's `RandomDataset` draws from
    /// `real_input_len = input_len − num_special_tokens_to_add()` (its range ratio around that), as vLLM's Rust
    /// `vllm-bench` does.
    InInputLen,
}

impl SpecialTokens {
    fn of(harness: Harness) -> Self {
        match harness {
            Harness::VllmBenchmark => SpecialTokens::InInputLen,
            Harness::InferencePerf => SpecialTokens::InEachText,
            Harness::Guidellm => SpecialTokens::LeadingInEachText,
            Harness::Inferencemax
            | Harness::Aiperf
            | Harness::Nop
            | Harness::Mlperf
            | Harness::Fmperf => SpecialTokens::OnTop,
        }
    }

    /// How many tokens of each generated text's length are special tokens rather than text.
    fn in_each_length(self, specials: AddedSpecialTokens) -> u32 {
        match self {
            SpecialTokens::InEachText => specials.total,
            SpecialTokens::LeadingInEachText => specials.leading,
            SpecialTokens::OnTop | SpecialTokens::InInputLen => 0,
        }
    }
}

/// inference-perf's image spec with its count as a distribution to draw from.
fn woven_images(
    what: &'static str,
    spec: &Option<crate::workload::WovenImageSpec>,
) -> Result<Option<llmbench_data::image::WovenImages>, PromptError> {
    spec.as_ref()
        .map(|spec| {
            Ok(llmbench_data::image::WovenImages {
                count: distribution(what, &spec.count)?,
                insertion_point: spec.insertion_point,
                resolutions: spec.resolutions.clone(),
                weighted: spec.weighted,
            })
        })
        .transpose()
}

/// Gives each prompt, in order, its drawn images.
fn attach(prompts: &mut [Prompt], drawn: Vec<Vec<llmbench_data::image::ImageInput>>) {
    for (prompt, images) in prompts.iter_mut().zip(drawn) {
        prompt.images = images;
    }
}

/// vLLM's `random-rerank` (`RandomDatasetForReranking.sample`): one query of `input_len // 2 − 1` tokens (the
/// whole `input_len` with `no-reranker`), documents of what the query leaves (`input_len − query − 1`; again the
/// whole length with `no-reranker`), both with the range ratio around them and the tokenizer's special tokens taken
/// out as `get_sampling_params` takes them; then each request is the query and its batch of documents, laid out
/// in send order for the pooling request builder (its first prompt is the query). The query's length is counted
/// as vLLM counts a batch's `prompt_len`: `(query + 1) × documents` for a reranker (each pair carries the query and
/// a separator), the query once otherwise. The token ids are llmbench's own draw, as for `random`.
fn vllm_rerank_prompts(
    input: &TokenLengths,
    rerank: RandomRerank,
    tokenizer: &Tokenizer,
    specials: u32,
    seed: u64,
) -> Result<Vec<Prompt>, PromptError> {
    let (input_len, ratio) = match input.shape {
        LengthShape::Fixed(len) => (len, 0.0),
        LengthShape::RangeRatio { len, ratio } => (len, ratio),
        ref other => {
            return Err(PromptError::NotFixed {
                what: "random-input-len",
                found: describe_shape(other),
            });
        }
    };
    let separators = u64::from(rerank.is_reranker);
    let lengths = |len: u64, count: u64| TokenLengths {
        shape: if ratio == 0.0 {
            LengthShape::Fixed(len)
        } else {
            LengthShape::RangeRatio { len, ratio }
        },
        total_count: Some(count),
    };
    let draw = |len: u64, count: u64, seed: u64| -> Result<Vec<Prompt>, PromptError> {
        let real = vllm_real_input_len(&lengths(len, count), specials, 0)?;
        synthetic(
            tokenizer,
            &SyntheticSpec {
                num_prompts: count as usize,
                prompt_tokens: distribution("random-rerank length", &real)?,
                output_tokens: None,
                prefix_buckets: Vec::new(),
                specials_in_each_length: 0,
                seed,
            },
        )
    };
    let query_param = if rerank.is_reranker {
        (input_len / 2).saturating_sub(separators)
    } else {
        input_len
    };
    let Some(query) = draw(query_param, 1, seed)?.into_iter().next() else {
        return Ok(Vec::new());
    };
    let query_len = u64::from(query.input_tokens);
    let documents = input.total_count.unwrap_or(1);
    let (documents, per_request, document_param) = if rerank.is_reranker {
        (
            documents,
            rerank.batch_size,
            input_len.saturating_sub(query_len + separators),
        )
    } else {
        (
            documents.saturating_sub(1),
            rerank.batch_size.saturating_sub(1),
            input_len,
        )
    };
    let docs = draw(document_param, documents, seed.wrapping_add(1))?;
    let mut prompts = Vec::with_capacity(docs.len() + docs.len() / per_request.max(1) as usize + 1);
    for batch in docs.chunks(per_request.max(1) as usize) {
        let counted = if rerank.is_reranker {
            (query_len + separators) * batch.len() as u64
        } else {
            query_len
        };
        prompts.push(Prompt {
            input_tokens: u32::try_from(counted).unwrap_or(u32::MAX),
            ..query.clone()
        });
        prompts.extend(batch.iter().cloned());
    }
    Ok(prompts)
}

/// The passage count of each of AIPerf's first `entries` rankings entries in a run seeded with `seed`
/// (`SyntheticRankingsDatasetComposer.create_dataset`, AIPerf 0.13): `sample_positive_normal_integer(mean, stddev)`
/// per entry, in order, on the generator `rng.derive("dataset.rankings.passages")` — AIPerf's own draws.
pub fn aiperf_passage_counts(seed: u64, entries: usize, mean: u64, stddev: u64) -> Vec<u64> {
    let mut rng = PyRandom::seed(llmbench_text::py_random::aiperf_derived_seed(
        seed,
        "dataset.rankings.passages",
    ));
    (0..entries)
        .map(|_| rng.aiperf_positive_normal_integer(mean as f64, stddev as f64))
        .collect()
}

/// Set apart the passages' length draws from the queries'.
const PASSAGE_SEED_SALT: u64 = 0x9a55_a6e5;

/// AIPerf's rankings entries (`synthetic_rankings.py` `_create_turn`): a query of `query` tokens and its passages
/// of `passage` tokens each, their count AIPerf's own draw ([`aiperf_passage_counts`]). The texts and lengths come
/// from llmbench's generator (AIPerf's prompt generator draws them from its corpus, which is not reproduced); each
/// prompt's `input_tokens` counts the query and all its passages.
fn aiperf_rankings_prompts(
    tokenizer: &Tokenizer,
    spec: &crate::workload::AiperfRankings,
    entries: usize,
    seed: u64,
) -> Result<Vec<Prompt>, PromptError> {
    let counts = aiperf_passage_counts(seed, entries, spec.passages_mean, spec.passages_stddev);
    let total: u64 = counts.iter().sum();
    if total > MAX_PROMPTS {
        return Err(PromptError::TooManyPassages {
            passages: total,
            max: MAX_PROMPTS,
        });
    }
    let draw = |what: &'static str, lengths: &TokenLengths, count: usize, seed: u64| {
        synthetic(
            tokenizer,
            &SyntheticSpec {
                num_prompts: count,
                prompt_tokens: distribution(what, lengths)?,
                output_tokens: None,
                prefix_buckets: Vec::new(),
                specials_in_each_length: 0,
                seed,
            },
        )
    };
    let queries = draw("rankings-query-prompt-token", &spec.query, entries, seed)?;
    let mut passages = draw(
        "rankings-passages-prompt-token",
        &spec.passage,
        total as usize,
        seed ^ PASSAGE_SEED_SALT,
    )?
    .into_iter();
    Ok(queries
        .into_iter()
        .zip(counts)
        .map(|(query, count)| {
            let own: Vec<Prompt> = passages.by_ref().take(count as usize).collect();
            let tokens = own.iter().fold(query.input_tokens, |sum, p| {
                sum.saturating_add(p.input_tokens)
            });
            Prompt {
                input_tokens: tokens,
                max_tokens: None,
                passages: own.into_iter().map(|p| p.text).collect(),
                ..query
            }
        })
        .collect())
}

/// vLLM `random`'s input length with the special tokens taken out, as its `RandomDataset` draws it; refused, as
/// vLLM refuses it, when the shortest prompt it can draw (with the random prefix) would have no token.
fn vllm_real_input_len(
    lengths: &TokenLengths,
    specials: u32,
    prefix_len: u64,
) -> Result<TokenLengths, PromptError> {
    let real = |len: u64| len.saturating_sub(u64::from(specials));
    let (shape, input_len, ratio) = match lengths.shape {
        LengthShape::Fixed(len) => (LengthShape::Fixed(real(len)), len, 0.0),
        LengthShape::RangeRatio { len, ratio } => (
            LengthShape::RangeRatio {
                len: real(len),
                ratio,
            },
            len,
            ratio,
        ),
        ref other => {
            return Err(PromptError::NotFixed {
                what: "random-input-len",
                found: describe_shape(other),
            });
        }
    };
    let shortest = (real(input_len) as f64 * (1.0 - ratio)).floor() as u64;
    if prefix_len + shortest < 1 {
        return Err(PromptError::VllmInputTooShort {
            input_len,
            specials,
            range_ratio: ratio,
        });
    }
    Ok(TokenLengths {
        shape,
        total_count: lengths.total_count,
    })
}

/// A text file the profile names (a corpus, a sonnet), with the path in the error.
/// A reader of the CSV `text`, as pandas reads one: a header row, every row as wide as it.
fn csv_reader(text: &str) -> csv::Reader<&[u8]> {
    csv::ReaderBuilder::new()
        .flexible(false)
        .from_reader(text.as_bytes())
}

/// A CSV error of the file at `path`, with its line.
fn csv_error(path: &Path) -> impl Fn(csv::Error) -> DataError + Copy + '_ {
    move |e| DataError::Csv {
        path: path.to_owned(),
        line: e.position().map_or(0, csv::Position::line),
        message: e.to_string(),
    }
}

fn read_text(path: &Path) -> Result<String, DataError> {
    std::fs::read_to_string(path).map_err(|source| DataError::Read {
        path: path.to_owned(),
        source,
    })
}

pub(crate) fn to_u32(what: &'static str, value: u64) -> Result<u32, PromptError> {
    u32::try_from(value).map_err(|_| PromptError::TooLarge { what, value })
}

pub(crate) fn fixed(what: &'static str, lengths: &TokenLengths) -> Result<u32, PromptError> {
    match lengths.shape {
        LengthShape::Fixed(n) => to_u32(what, n),
        ref other => Err(PromptError::NotFixed {
            what,
            found: describe_shape(other),
        }),
    }
}

/// A length distribution as a profile writes it, for messages.
pub(crate) fn describe_shape(shape: &LengthShape) -> String {
    let spread = |s: &Spread| match s {
        Spread::StdDev(v) => format!("std_dev {v}"),
        Spread::Variance(v) => format!("variance {v}"),
    };
    match shape {
        LengthShape::Fixed(n) => format!("a fixed {n} tokens"),
        LengthShape::Uniform { min, max } => {
            format!("a uniform distribution (min {min}, max {max})")
        }
        LengthShape::Normal {
            mean,
            spread: s,
            min,
            max,
        } => format!(
            "a normal distribution (mean {mean}, {}, min {min}, max {max})",
            spread(s)
        ),
        LengthShape::SkewNormal {
            mean,
            spread: s,
            skew,
            min,
            max,
        } => format!(
            "a skew-normal distribution (mean {mean}, {}, skew {skew}, min {min}, max {max})",
            spread(s)
        ),
        LengthShape::LogNormal {
            mean,
            spread: s,
            min,
            max,
        } => format!(
            "a lognormal distribution (mean {mean}, {}, min {min}, max {max})",
            spread(s)
        ),
        LengthShape::Poisson { mean, min, max } => {
            format!("a poisson distribution (mean {mean}, min {min}, max {max})")
        }
        LengthShape::RangeRatio { len, ratio } => {
            format!("{len} tokens with a range ratio of {ratio}")
        }
        LengthShape::PositiveNormal { mean, std_dev } => {
            format!("AIPerf's positive normal (mean {mean}, stddev {std_dev})")
        }
    }
}

/// The workload's length shape as the data module samples it.
pub(crate) fn distribution(
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
        LengthShape::PositiveNormal { mean, std_dev } => {
            LengthDistribution::PositiveNormal { mean, std_dev }
        }
    })
}

/// inference-perf's client asks for this many tokens when the data gives none (`max_completion_tokens`).
const INFERENCE_PERF_DEFAULT_MAX_TOKENS: u32 = 30;

/// vLLM's `sharegpt` (`ShareGPTDataset`): entries with two turns or more, shuffled with the seed unless
/// `--disable-shuffle`; turn 0 is the prompt and turn 1 the reference answer, whose length is `max_tokens` unless
/// `--sharegpt-output-len` fixes it; vLLM's length filter (prompt ≥ 4 and ≤ 1024 tokens, answer ≥ 4 unless fixed,
/// both ≤ 2048), too few entries for `num-prompts` topped up as vLLM's `maybe_oversample_requests` does. The
/// prompt is sent alone, also to the chat endpoint. With the chat backend an entry's `image`
/// (ShareGPT4V's layout) goes with it as an `image_url` part (`process_image`: a path as `file://` and the path),
/// and a `video` is refused; the completions backend sends neither (`async_request_openai_completions` reads no
/// multimodal content).
fn vllm_sharegpt(
    sharegpt: &ShareGpt,
    tokenizer: &Tokenizer,
    seed: u64,
    pool: usize,
    chat: bool,
) -> Result<Vec<Prompt>, PromptError> {
    let path = sharegpt.path.as_deref().ok_or(PromptError::MissingPath {
        what: "shareGPT data",
    })?;
    let options = DatasetOptions {
        output_tokens: sharegpt
            .output
            .as_ref()
            .map(|o| fixed("sharegpt-output-len", o))
            .transpose()?,
        limit: Some(pool),
        shuffle_seed: sharegpt.shuffle.then_some(seed),
        vllm_entries: true,
        images: chat,
        ..DatasetOptions::default()
    };
    let mut prompts = data::load_sharegpt(Path::new(path), tokenizer, &options)?.into_inner();
    for p in &mut prompts {
        p.messages = None;
    }
    // `ShareGPTDataset.sample` ends with `maybe_oversample_requests`: too few entries for `num-prompts` are
    // topped up by `random.choice`, Python's generator seeded again with `--seed`.
    vllm_hf::oversample(prompts, pool, seed, path)
}

/// inference-perf's `shareGPT` (`HFShareGPTDataGenerator`): a `.json` file (or a directory of them) read in
/// order and cycled. Completions: turn 0 is the prompt (skipped when empty) and turn 1 the answer; an entry is
/// skipped when the prompt's token count is outside `input_distribution`'s `[min, max]` or the answer's outside
/// `output_distribution`'s, and the answer's length is `max_tokens` (none counts as the client's default, 30).
/// Chat: every turn of an entry becomes a message (`human` → user, `gpt` → assistant, anything else user), with
/// no length filter and the default `max_tokens`.
fn inference_perf_sharegpt(
    sharegpt: &ShareGpt,
    tokenizer: &Tokenizer,
    kind: ApiKind,
    pool: usize,
) -> Result<Vec<Prompt>, PromptError> {
    let path = sharegpt.path.as_deref().ok_or(PromptError::MissingPath {
        what: "shareGPT data",
    })?;
    let path = Path::new(path);
    let files: Vec<PathBuf> = if path.is_dir() {
        let mut files: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(|source| DataError::Read {
                path: path.to_owned(),
                source,
            })?
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "json") && p.is_file())
            .collect();
        files.sort();
        if files.is_empty() {
            return Err(DataError::NoPrompts {
                path: path.to_owned(),
                reason: "the directory holds no .json file".to_owned(),
            }
            .into());
        }
        files
    } else {
        vec![path.to_owned()]
    };
    // Every entry with two turns, unfiltered: inference-perf's own bounds are applied below.
    let everything = DatasetOptions {
        output_tokens: None,
        limit: None,
        shuffle_seed: None,
        vllm_entries: false,
        min_tokens: 0,
        max_prompt_tokens: None,
        max_total_tokens: None,
        images: false,
    };
    let bounds = |lengths: &Option<TokenLengths>| {
        lengths.as_ref().map(|l| match l.shape {
            LengthShape::Fixed(n) => (n, n),
            LengthShape::Uniform { min, max }
            | LengthShape::Normal { min, max, .. }
            | LengthShape::SkewNormal { min, max, .. }
            | LengthShape::LogNormal { min, max, .. }
            | LengthShape::Poisson { min, max, .. } => (min, max),
            LengthShape::RangeRatio { len, .. } => (len, len),
            LengthShape::PositiveNormal { .. } => (0, u64::MAX),
        })
    };
    let input = bounds(&sharegpt.input_filter);
    let output = bounds(&sharegpt.output_filter);
    let within = |n: u32, b: Option<(u64, u64)>| {
        b.is_none_or(|(min, max)| (min..=max).contains(&u64::from(n)))
    };
    let mut prompts = Vec::new();
    let mut seen = 0usize;
    for file in &files {
        let loaded = data::load_sharegpt(file, tokenizer, &everything)?.into_inner();
        seen += loaded.len();
        for mut p in loaded {
            if prompts.len() >= pool {
                break;
            }
            match kind {
                // `get_anthropic_messages_data` yields the chat data as Anthropic messages.
                ApiKind::Chat | ApiKind::Messages | ApiKind::Responses => {
                    p.max_tokens = Some(INFERENCE_PERF_DEFAULT_MAX_TOKENS);
                }
                // inference-perf has no pooling API: its dialect never asks for one.
                ApiKind::Embeddings | ApiKind::Rerank => {}
                ApiKind::Completion => {
                    let answer = p.max_tokens.unwrap_or(0);
                    if p.text.is_empty()
                        || !within(p.input_tokens, input)
                        || !within(answer, output)
                    {
                        continue;
                    }
                    p.messages = None;
                    p.max_tokens = Some(if answer == 0 {
                        INFERENCE_PERF_DEFAULT_MAX_TOKENS
                    } else {
                        answer
                    });
                }
            }
            prompts.push(p);
        }
    }
    if prompts.is_empty() {
        let show = |b: Option<(u64, u64)>| {
            b.map_or("any".to_owned(), |(min, max)| format!("[{min}, {max}]"))
        };
        return Err(DataError::NoPrompts {
            path: path.to_owned(),
            reason: format!(
                "{seen} entries with two turns, none with a non-empty prompt of {} tokens and an answer of {} \
                 tokens (input_distribution and output_distribution bound them)",
                show(input),
                show(output)
            ),
        }
        .into());
    }
    Ok(prompts)
}

/// The instruction line every vLLM sonnet prompt starts with.
const SONNET_BASE_PROMPT: &str = "Pick as many lines as you can from these poem lines:\n";
/// Draws of lines per prompt before the sonnet sampler gives up.
const SONNET_ATTEMPTS_PER_PROMPT: usize = 100;

/// vLLM's `sonnet` (`SonnetDataset`): the file's lines (with their line ends) and their mean token count; each
/// prompt is the instruction line, then the file's first `round((prefix_len − base) / mean)` lines (shared by
/// every prompt), then `round((input_len − base) / mean)` minus those lines drawn at random with replacement; a
/// draw longer than `input_len` tokens is thrown away and drawn again. `max_tokens` is `sonnet-output-len`.
///
/// vLLM counts every length as `len(tokenizer(text).input_ids)` on the text rendered through the tokenizer's chat
/// template as one user turn with the generation prompt: a line's (unrendered), the instruction line's, each
/// prompt's. With a completions backend it sends the rendered prompt (`return_prompt_formatted=True`) and needs a
/// template; with the chat backend it sends the prompt unrendered, and when the tokenizer has no template llmbench
/// counts that prompt as it is sent, without special tokens (vLLM would fail without one).
fn vllm_sonnet(
    sonnet: &Sonnet,
    tokenizer: &Tokenizer,
    seed: u64,
    pool: usize,
    send_rendered: bool,
) -> Result<Vec<Prompt>, PromptError> {
    let template = match chat_template_of(
        tokenizer,
        "vLLM's sonnet dataset with a completions backend",
    ) {
        Ok(template) => Some(template),
        Err(PromptError::NoChatTemplate { .. }) if !send_rendered => None,
        Err(e) => return Err(e),
    };
    let specials = match template {
        Some(_) => {
            tokenizer
                .added_special_tokens()
                .map_err(DataError::from)?
                .total
        }
        None => 0,
    };
    let no_kwargs = serde_json::Map::new();
    let render = |prompt: &str| -> Result<String, PromptError> {
        Ok(match &template {
            Some(template) => template.render_user(prompt, &no_kwargs)?,
            None => prompt.to_owned(),
        })
    };
    let path = PathBuf::from(&sonnet.path);
    let text = read_text(&path)?;
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    if lines.is_empty() {
        return Err(DataError::EmptyCorpus {
            name: sonnet.path.clone(),
        }
        .into());
    }
    let count = |t: &str, row: String| {
        tokenizer
            .count(t)
            .map(|n| n.saturating_add(specials))
            .map_err(|source| DataError::Tokenize {
                path: path.clone(),
                row,
                source,
            })
    };
    let mut total = 0u64;
    for (i, line) in lines.iter().enumerate() {
        total += u64::from(count(line, format!("line {}", i + 1))?);
    }
    // vLLM divides by the mean line length; a file without a token in it has none (ZeroDivisionError there).
    if total == 0 {
        return Err(DataError::EmptyCorpus {
            name: sonnet.path.clone(),
        }
        .into());
    }
    let mean = total as f64 / lines.len() as f64;
    let base = count(
        &render(SONNET_BASE_PROMPT)?,
        "the instruction line".to_owned(),
    )?;
    if sonnet.input_len <= u64::from(base) {
        return Err(PromptError::SonnetTooShort {
            input_len: sonnet.input_len,
            base,
        });
    }
    // Python's round() rounds halves to even.
    let lines_for = |tokens: u64| -> i64 {
        if mean > 0.0 {
            ((tokens as f64 - f64::from(base)) / mean).round_ties_even() as i64
        } else {
            0
        }
    };
    let input_lines = lines_for(sonnet.input_len);
    let prefix_lines = lines_for(sonnet.prefix_len).max(0) as usize;
    let prefix: String = lines[..prefix_lines.min(lines.len())].concat();
    let extra = usize::try_from(input_lines - prefix_lines as i64).unwrap_or(0);
    let max_tokens = to_u32("sonnet-output-len", sonnet.output_len)?;
    let head = format!("{SONNET_BASE_PROMPT}{prefix}");
    let fixed_tokens = count(
        &render(&head)?,
        "the instruction line and prefix".to_owned(),
    )?;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut prompts = Vec::with_capacity(pool.min(PREALLOCATED_PROMPTS));
    let attempts = pool.saturating_mul(SONNET_ATTEMPTS_PER_PROMPT);
    for _ in 0..attempts {
        if prompts.len() >= pool {
            break;
        }
        let mut prompt = head.clone();
        for _ in 0..extra {
            prompt.push_str(lines[rng.random_range(0..lines.len())]);
        }
        let rendered = render(&prompt)?;
        let n = count(&rendered, format!("prompt {}", prompts.len() + 1))?;
        if u64::from(n) <= sonnet.input_len {
            let sent = if send_rendered { rendered } else { prompt };
            let mut p = Prompt::text(sent, n, Some(max_tokens));
            p.prefix_group = Some(0);
            prompts.push(p);
        }
    }
    if prompts.len() < pool {
        return Err(PromptError::SonnetNeverFits {
            path,
            input_len: sonnet.input_len,
            prefix_lines: prefix_lines.min(lines.len()),
            fixed_tokens,
            attempts,
        });
    }
    Ok(prompts)
}

/// Prompts reserved up front; more grow the vector as they are built, so a huge pool never asks for one huge
/// allocation before its first prompt exists.
const PREALLOCATED_PROMPTS: usize = 65_536;

/// vLLM's `custom` dataset (`CustomDataset`): a `.jsonl` file of records whose `prompt` is sent rendered as one
/// user turn through the tokenizer's chat template (as is with `skip-chat-template`), shuffled with the seed unless
/// `--disable-shuffle`. With
/// `--custom-output-len -1` each record's `output_tokens` (an integer) is its `max_tokens`, and vLLM refuses a
/// record without one; otherwise every request asks for the fixed length.
/// inference-perf's `use_chat_template` (`converge_to_exact_length_text` with the template as `wrap_fn`): each
/// prompt becomes one user turn of the tokenizer's chat template, its content trimmed or extended until the
/// rendered text counts exactly the prompt's length without special tokens — what the server counts, since the
/// request asks it to add none. As upstream: at most 20 tries, and every length must exceed the template's own.
pub fn chat_templated(
    prompts: Vec<Prompt>,
    tokenizer: &Tokenizer,
    seed: u64,
) -> Result<Vec<Prompt>, PromptError> {
    const TRIES: usize = 20;
    let template = chat_template_of(tokenizer, "inference-perf's `use_chat_template: true`")?;
    let kwargs = serde_json::Map::new();
    let count = |text: &str| tokenizer.count(text).map_err(DataError::from);
    let overhead = count(&template.render_user("", &kwargs)?)?;
    let words = tokenizer.plain_words();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    prompts
        .into_iter()
        .map(|mut prompt| {
            let target = prompt.input_tokens;
            if target <= overhead {
                return Err(PromptError::BelowTemplate {
                    length: target,
                    overhead,
                });
            }
            let mut ids = tokenizer.encode(&prompt.text).map_err(DataError::from)?;
            let mut last = 0;
            for _ in 0..TRIES {
                let content = tokenizer.decode(&ids).map_err(DataError::from)?;
                let text = template.render_user(&content, &kwargs)?;
                let n = count(&text)?;
                if n == target {
                    prompt.text = text;
                    return Ok(prompt);
                }
                last = n;
                if n < target && !words.is_empty() {
                    ids.extend((n..target).map(|_| words[rng.random_range(0..words.len())]));
                } else {
                    let extra = (n - target.min(n)) as usize;
                    ids.truncate(ids.len().saturating_sub(extra));
                }
            }
            Err(PromptError::NeverExact {
                length: target,
                tries: TRIES,
                last,
            })
        })
        .collect()
}

/// `BenchmarkDataset.DEFAULT_SEED`: the seed of a vLLM dataset built without `random_seed`.
const VLLM_DATASET_DEFAULT_SEED: u64 = 0;

fn vllm_custom(
    file: &DatasetFile,
    tokenizer: &Tokenizer,
    pool: usize,
) -> Result<Vec<Prompt>, PromptError> {
    let path = PathBuf::from(&file.path);
    let bytes = std::fs::read(&path).map_err(|source| DataError::Read {
        path: path.clone(),
        source,
    })?;
    let text = std::str::from_utf8(&bytes).map_err(|e| {
        let line = bytes[..e.valid_up_to()]
            .iter()
            .filter(|b| **b == b'\n')
            .count()
            + 1;
        DataError::Shape {
            path: path.clone(),
            message: format!("line {line}: not UTF-8 text ({e})"),
        }
    })?;
    let fixed_output = file
        .output_len
        .map(|n| to_u32("custom-output-len", n))
        .transpose()?;
    // (line, prompt, max_tokens, image)
    let mut records: Vec<(usize, String, u32, Option<String>)> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let number = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        let field = |column: &str, message: String| DataError::Field {
            path: path.clone(),
            row: format!("line {number}"),
            column: column.to_owned(),
            message,
        };
        let value: Value = serde_json::from_str(line).map_err(|e| DataError::Json {
            path: path.clone(),
            line: number,
            column: e.column(),
            message: e.to_string(),
        })?;
        let Value::Object(record) = value else {
            return Err(field("prompt", "expected a record (a JSON object)".to_owned()).into());
        };
        if let DatasetRows::SpecBench { category } = &file.rows {
            // `SpecBench.load_data`: `row["turns"][0]` of each row, of one category when given.
            if let Some(category) = category
                && record.get("category").and_then(Value::as_str) != Some(category.as_str())
            {
                continue;
            }
            let first_turn = match record.get("turns") {
                Some(Value::Array(turns)) => turns.first(),
                _ => None,
            };
            let Some(Value::String(prompt)) = first_turn else {
                return Err(field(
                    "turns",
                    "vLLM's spec_bench dataset reads each record's first `turns` entry as its prompt text"
                        .to_owned(),
                )
                .into());
            };
            // spec_bench always sets its output length (`spec-bench-output-len`, 256 by default).
            records.push((number, prompt.clone(), fixed_output.unwrap_or(256), None));
            continue;
        }
        let prompt = match record.get("prompt") {
            Some(Value::String(s)) => s.clone(),
            Some(other) => {
                return Err(field(
                    "prompt",
                    format!("expected text, found {}", llmbench_data::json_kind(other)),
                )
                .into());
            }
            None => {
                return Err(field(
                    "prompt",
                    "missing: vLLM's custom dataset reads each record's `prompt`".to_owned(),
                )
                .into());
            }
        };
        let max_tokens = match fixed_output {
            Some(n) => n,
            None => {
                output_tokens(record.get("output_tokens")).map_err(|m| field("output_tokens", m))?
            }
        };
        // `CustomMMDataset.sample`: `process_image(item["image_files"][0])`, the rest left out with a warning.
        let image = match (&file.rows, record.get("image_files")) {
            (DatasetRows::CustomMm, Some(Value::Array(files))) => match files.first() {
                Some(Value::String(first)) => Some(first.clone()),
                Some(other) => {
                    return Err(field(
                        "image_files",
                        format!(
                            "expected image paths or URLs (text), found {}",
                            llmbench_data::json_kind(other)
                        ),
                    )
                    .into());
                }
                None => {
                    return Err(field(
                        "image_files",
                        "empty: vLLM's custom_mm dataset sends each record's first image file"
                            .to_owned(),
                    )
                    .into());
                }
            },
            (DatasetRows::CustomMm, _) => {
                return Err(field(
                    "image_files",
                    "missing or not a list: vLLM's custom_mm dataset reads each record's `image_files` list"
                        .to_owned(),
                )
                .into());
            }
            _ => None,
        };
        records.push((number, prompt, max_tokens, image));
    }
    if records.is_empty() {
        let reason = match &file.rows {
            DatasetRows::SpecBench {
                category: Some(category),
            } => format!("no record of the category `{category}` (spec-bench-category)"),
            _ => "the file has no records".to_owned(),
        };
        return Err(DataError::NoPrompts { path, reason }.into());
    }
    // `CustomDataset.load_data`: `random.seed(self.random_seed); random.shuffle(self.data)`. get_samples builds
    // the dataset without `random_seed`, so the seed is `BenchmarkDataset.DEFAULT_SEED`, 0, whatever `--seed` says.
    if file.shuffle {
        PyRandom::seed(VLLM_DATASET_DEFAULT_SEED).shuffle(&mut records);
    }
    records.truncate(pool);
    // `maybe_oversample_requests`: too few records for `num-prompts` are topped up with `random.choice` of them,
    // Python's generator seeded again with the dataset's seed.
    if records.len() < pool {
        let mut rng = PyRandom::seed(VLLM_DATASET_DEFAULT_SEED);
        let have = records.len();
        for _ in have..pool {
            let Some(i) = rng.choice_index(have) else {
                break;
            };
            records.push(records[i].clone());
        }
    }
    // `CustomDataset.sample`: unless told to skip it, each prompt is one user turn rendered through the chat
    // template with the generation prompt, and its length is counted after the template.
    let template = match &file.chat_template {
        Some(kwargs) => Some((
            chat_template_of(
                tokenizer,
                match file.rows {
                    DatasetRows::Custom | DatasetRows::CustomMm => "vLLM's custom dataset",
                    DatasetRows::SpecBench { .. } => "vLLM's spec_bench dataset",
                },
            )?,
            kwargs,
        )),
        None => None,
    };
    records
        .into_iter()
        .map(|(number, prompt, max_tokens, image)| {
            let prompt = match &template {
                Some((template, kwargs)) => template.render_user(&prompt, kwargs)?,
                None => prompt,
            };
            let n = tokenizer
                .count(&prompt)
                .map_err(|source| DataError::Tokenize {
                    path: path.clone(),
                    row: format!("line {number}"),
                    source,
                })?;
            let mut p = Prompt::text(prompt, n, Some(max_tokens));
            if let Some(image) = image {
                p.images = vec![llmbench_data::image::ImageInput::named(&image)];
            }
            Ok(p)
        })
        .collect()
}

/// The chat template of `tokenizer`, which `what` renders every prompt through; an error saying what to pass when
/// it has none.
pub(crate) fn chat_template_of(
    tokenizer: &Tokenizer,
    what: &'static str,
) -> Result<ChatTemplate, PromptError> {
    let template = match tokenizer.directory() {
        Some(dir) => ChatTemplate::beside(dir)?,
        None => None,
    };
    template.ok_or_else(|| PromptError::NoChatTemplate {
        tokenizer: if tokenizer.is_builtin() {
            "the built-in word tokenizer".to_owned()
        } else {
            format!(
                "the tokenizer {} (no `chat_template` in a tokenizer_config.json, nor a chat_template.jinja, \
                 beside its tokenizer.json)",
                tokenizer.name()
            )
        },
        what,
    })
}

/// A record's `output_tokens` as vLLM reads it (`int(item["output_tokens"])`): an integer, a number (its whole
/// part) or a decimal integer in text; the request's `max_tokens`, so it must be at least 1.
fn output_tokens(value: Option<&Value>) -> Result<u32, String> {
    let missing = || {
        "missing: with `custom-output-len: -1` vLLM takes each record's output length from `output_tokens` and \
         refuses a record without one"
            .to_owned()
    };
    let n: i128 = match value {
        None | Some(Value::Null) => return Err(missing()),
        Some(Value::Number(n)) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => i128::from(i),
            (None, Some(f)) if f.is_finite() => f.trunc() as i128,
            _ => return Err(format!("`{n}` is not an integer")),
        },
        Some(Value::String(s)) => s
            .trim()
            .parse::<i128>()
            .map_err(|_| format!("`{s}` is not an integer"))?,
        Some(other) => {
            return Err(format!(
                "expected an integer, found {}",
                llmbench_data::json_kind(other)
            ));
        }
    };
    if n < 1 {
        return Err(format!("{n} is not a usable max_tokens (at least 1)"));
    }
    u32::try_from(n).map_err(|_| format!("{n} does not fit in a 32-bit token count"))
}

/// The media fields of AIPerf 0.13's `SingleTurn` (`dataset/loader/models.py`), none of which a file's turns send.
pub(crate) const AIPERF_MEDIA_FIELDS: [&str; 7] = [
    "image",
    "images",
    "image_uuids",
    "audio",
    "audios",
    "video",
    "videos",
];

/// A field of an AIPerf dataset line that is there and not `null` (pydantic's optional fields read an explicit
/// null as unset).
pub(crate) fn aiperf_field<'m>(
    map: &'m serde_json::Map<String, Value>,
    field: &str,
) -> Option<&'m Value> {
    map.get(field).filter(|v| !v.is_null())
}

/// Each non-blank line of a JSONL file's `text` with its number (from 1), read as a JSON object — or why it is not
/// one — as AIPerf's custom dataset loaders read their lines.
pub(crate) fn jsonl_objects(
    text: &str,
) -> impl Iterator<Item = (u32, Result<serde_json::Map<String, Value>, String>)> + '_ {
    text.lines().enumerate().filter_map(|(index, raw)| {
        let raw = raw.trim();
        if raw.is_empty() {
            return None;
        }
        let line = u32::try_from(index + 1).unwrap_or(u32::MAX);
        let object = match serde_json::from_str(raw) {
            Ok(Value::Object(map)) => Ok(map),
            Ok(other) => Err(format!("not a JSON object: {other}")),
            Err(e) => Err(format!("not JSON: {e}")),
        };
        Some((line, object))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{Api, Dialect, SharedPrefix, SharedPrefixStyle};

    /// AIPerf 0.13's passage counts, worked by hand: `rng.derive("dataset.rankings.passages")` of seed 7 seeds
    /// CPython's `random.Random` with SHA-256("7:dataset.rankings.passages")[:8]; its `gauss(3, 2)` draws 1.410,
    /// 5.169, 3.609, 5.638, 4.182 — each at least 0, rounded up. Of seed 42, `gauss(5, 4)` draws 7.775, −3.100
    /// (below 0: drawn again), 10.911, −3.007 (again), 3.248, 0.318, 5.989: 8, 11, 4, 1, 6. Without a spread,
    /// `max(1, round(mean))`. (Checked against AIPerf 0.13's own `random_generator` module.)
    #[test]
    fn aiperf_passage_counts_are_aiperfs_own_draws() {
        assert_eq!(aiperf_passage_counts(7, 5, 3, 2), [2, 6, 4, 6, 5]);
        assert_eq!(aiperf_passage_counts(42, 5, 5, 4), [8, 11, 4, 1, 6]);
        assert_eq!(aiperf_passage_counts(7, 3, 10, 0), [10, 10, 10]);
    }

    #[test]
    fn aiperf_rankings_prompts_carry_their_passages_and_count_every_token() {
        let tokenizer = Tokenizer::builtin();
        let mut w = workload(
            Harness::Aiperf,
            DataSpec::AiperfRankings(crate::workload::AiperfRankings {
                entries: 3,
                passages_mean: 3,
                passages_stddev: 2,
                query: TokenLengths::fixed(4),
                passage: TokenLengths::fixed(6),
            }),
            ApiKind::Rerank,
        );
        w.seed = 7;
        let prompts = build_prompts(&w, &tokenizer, Some(10)).expect("prompts");
        let shape: Vec<(usize, u32)> = prompts
            .iter()
            .map(|p| (p.passages.len(), p.input_tokens))
            .collect();
        // 2, 6, 4 passages of 6 tokens beside a query of 4; no max_tokens.
        assert_eq!(shape, [(2, 16), (6, 40), (4, 28)]);
        assert!(prompts.iter().all(|p| p.max_tokens.is_none()));
        // Each entry's passages are its own texts, not the query's.
        assert!(
            prompts
                .iter()
                .all(|p| p.passages.iter().all(|t| *t != p.text))
        );
    }

    fn write(dir: &tempfile::TempDir, name: &str, content: &str) -> String {
        let path = dir.path().join(name);
        std::fs::write(&path, content).expect("write");
        path.to_string_lossy().into_owned()
    }

    fn workload(harness: Harness, data: DataSpec, kind: ApiKind) -> Workload {
        let mut w = Workload::empty(harness, Dialect::VllmFlags);
        w.api = Api {
            kind,
            ..Api::default()
        };
        w.data = data;
        w
    }

    fn build(w: &Workload, n: u64) -> Result<Vec<Prompt>, PromptError> {
        build_prompts(w, &Tokenizer::builtin(), Some(n))
    }

    fn sonnet(path: String, input_len: u64, prefix_len: u64) -> DataSpec {
        DataSpec::Sonnet(Sonnet {
            path,
            input_len,
            output_len: 7,
            prefix_len,
        })
    }

    #[test]
    fn sonnet_prompts_hold_the_prefix_lines_inside_the_input_length() {
        // Four 3-word lines: mean 3 tokens. The instruction line is 11 words. input 20 → round(9 / 3) = 3 lines;
        // prefix 14 → round(3 / 3) = 1 line, the file's first; so 2 random lines: 11 + 3 + 6 = 20 tokens.
        let dir = tempfile::tempdir().expect("tempdir");
        let path = write(&dir, "s.txt", "a b c\nd e f\ng h i\nj k l\n");
        let w = workload(Harness::VllmBenchmark, sonnet(path, 20, 14), ApiKind::Chat);
        let prompts = build(&w, 12).expect("prompts");
        assert_eq!(prompts.len(), 12);
        let head = format!("{SONNET_BASE_PROMPT}a b c\n");
        for p in &prompts {
            assert!(p.text.starts_with(&head), "{:?}", p.text);
            assert_eq!(p.input_tokens, 20);
            assert_eq!(p.max_tokens, Some(7));
            assert_eq!(p.text.lines().count(), 4, "{:?}", p.text);
        }
    }

    #[test]
    fn sonnet_line_counts_round_half_to_even_as_python_does() {
        // Two 2-word lines: mean 2. input 16 → (16 − 11) / 2 = 2.5 → 2 lines (round half up would take 3 and
        // give 17 tokens, over the input length, for every draw); prefix 0 → round(−5.5) = −6 → none.
        let dir = tempfile::tempdir().expect("tempdir");
        let path = write(&dir, "s.txt", "a b\nc d\n");
        let w = workload(Harness::VllmBenchmark, sonnet(path, 16, 0), ApiKind::Chat);
        let prompts = build(&w, 5).expect("prompts");
        assert!(prompts.iter().all(|p| p.input_tokens == 15), "{prompts:?}");
    }

    #[test]
    fn sonnet_refuses_lengths_vllm_refuses_or_loops_on() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = write(&dir, "s.txt", "a b c\nd e f\ng h i\nj k l\n");
        // The instruction line alone is 11 tokens.
        let w = workload(
            Harness::VllmBenchmark,
            sonnet(path.clone(), 11, 0),
            ApiKind::Chat,
        );
        let e = build(&w, 3).unwrap_err().to_string();
        assert_eq!(
            e,
            "data: sonnet-input-len (11) must be higher than the base prompt's length (11 tokens under this \
             tokenizer), as vLLM requires"
        );
        // A prefix of the whole file (4 lines, 12 tokens) with the instruction line is 23 > 20 tokens.
        let w = workload(Harness::VllmBenchmark, sonnet(path, 20, 200), ApiKind::Chat);
        let e = build(&w, 3).unwrap_err().to_string();
        assert!(
            e.contains("s.txt: no sonnet prompt of at most 20 tokens after 300 attempts"),
            "{e}"
        );
        assert!(e.contains("4 prefix line(s) alone take 23 tokens"), "{e}");
    }

    #[test]
    fn sonnet_with_a_completions_backend_needs_the_tokenizers_chat_template() {
        // vLLM sends the rendered prompt to a completions endpoint and asserts the tokenizer has a template; the
        // chat backend's prompts go unrendered, so without a template they are counted as sent.
        let dir = tempfile::tempdir().expect("tempdir");
        let path = write(&dir, "s.txt", "a b c\nd e f\n");
        let w = workload(
            Harness::VllmBenchmark,
            sonnet(path.clone(), 20, 14),
            ApiKind::Completion,
        );
        let e = build(&w, 2).unwrap_err().to_string();
        assert!(
            e.contains(
                "vLLM's sonnet dataset with a completions backend renders every prompt through the \
                        tokenizer's chat template, and the built-in word tokenizer has none"
            ),
            "{e}"
        );
        let w = workload(Harness::VllmBenchmark, sonnet(path, 20, 14), ApiKind::Chat);
        assert_eq!(build(&w, 2).expect("prompts").len(), 2);
    }

    fn custom(path: String, output_len: Option<u64>) -> DataSpec {
        DataSpec::File(DatasetFile {
            path,
            output_len,
            shuffle: false,
            chat_template: None,
            rows: DatasetRows::Custom,
        })
    }

    #[test]
    fn vllm_custom_takes_max_tokens_from_output_tokens_or_the_fixed_length() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = write(
            &dir,
            "d.jsonl",
            "{\"prompt\": \"one two three\", \"output_tokens\": 7}\n\n\
             {\"prompt\": \"four five\", \"output_tokens\": \"12\"}\n\
             {\"prompt\": \"six\", \"output_tokens\": 3.9}\n",
        );
        let w = workload(
            Harness::VllmBenchmark,
            custom(path.clone(), None),
            ApiKind::Completion,
        );
        let got: Vec<(u32, Option<u32>)> = build(&w, 3)
            .expect("prompts")
            .iter()
            .map(|p| (p.input_tokens, p.max_tokens))
            .collect();
        // int(3.9) is 3, as vLLM's int() truncates.
        assert_eq!(got, [(3, Some(7)), (2, Some(12)), (1, Some(3))]);
        let w = workload(
            Harness::VllmBenchmark,
            custom(path, Some(5)),
            ApiKind::Completion,
        );
        assert!(
            build(&w, 2)
                .expect("prompts")
                .iter()
                .all(|p| p.max_tokens == Some(5))
        );
    }

    #[test]
    fn vllm_custom_shuffles_and_oversamples_with_python_s_random_seeded_0_as_vllm_does() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = write(
            &dir,
            "d.jsonl",
            "{\"prompt\": \"a\"}\n{\"prompt\": \"b\"}\n{\"prompt\": \"c\"}\n{\"prompt\": \"d\"}\n",
        );
        let texts = |shuffle: bool, n: u64| -> Vec<String> {
            let mut spec = custom(path.clone(), Some(5));
            if let DataSpec::File(f) = &mut spec {
                f.shuffle = shuffle;
            }
            let mut w = workload(Harness::VllmBenchmark, spec, ApiKind::Completion);
            // vLLM builds CustomDataset without `random_seed`: the run's seed does not change the order.
            w.seed = 99;
            build(&w, n)
                .expect("prompts")
                .into_iter()
                .map(|p| p.text)
                .collect()
        };
        // random.seed(0); random.shuffle(list(range(4))) gives [2, 0, 1, 3] (CPython 3).
        assert_eq!(texts(true, 4), ["c", "a", "b", "d"]);
        assert_eq!(texts(false, 4), ["a", "b", "c", "d"]);
        // Six prompts from four records (`maybe_oversample_requests`): the four, then `random.choice(requests)`
        // twice after random.seed(0) again, which picks index 3 and 3.
        assert_eq!(texts(true, 6), ["c", "a", "b", "d", "d", "d"]);
        assert_eq!(texts(false, 6), ["a", "b", "c", "d", "d", "d"]);
    }

    #[test]
    fn vllm_custom_refuses_records_vllm_refuses_naming_file_line_and_field() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cases: [(&str, &str, &[&str]); 6] = [
            (
                "missing.jsonl",
                "{\"prompt\": \"a\", \"output_tokens\": 2}\n{\"prompt\": \"b\"}\n",
                &[
                    "missing.jsonl: line 2, column `output_tokens`",
                    "refuses a record without one",
                ],
            ),
            (
                "input.jsonl",
                "{\"input\": \"a\", \"output_tokens\": 2}\n",
                &[
                    "input.jsonl: line 1, column `prompt`",
                    "reads each record's `prompt`",
                ],
            ),
            (
                "zero.jsonl",
                "{\"prompt\": \"a\", \"output_tokens\": 0}\n",
                &[
                    "zero.jsonl: line 1, column `output_tokens`",
                    "0 is not a usable max_tokens",
                ],
            ),
            (
                "bad.jsonl",
                "{\"prompt\": \"a\", \"output_tokens\": 1}\n{oops\n",
                &["bad.jsonl:2:", "invalid JSON"],
            ),
            (
                "empty.jsonl",
                "\n\n",
                &["empty.jsonl: no usable prompts (the file has no records)"],
            ),
            (
                "text.jsonl",
                "{\"prompt\": \"a\", \"output_tokens\": \"many\"}\n",
                &["text.jsonl: line 1", "`many` is not an integer"],
            ),
        ];
        for (name, content, needles) in cases {
            let path = write(&dir, name, content);
            let w = workload(
                Harness::VllmBenchmark,
                custom(path, None),
                ApiKind::Completion,
            );
            let e = build(&w, 5).unwrap_err().to_string();
            for needle in needles {
                assert!(e.contains(needle), "{name}: {e:?} lacks {needle:?}");
            }
        }
        let path = dir.path().join("latin1.jsonl");
        std::fs::write(
            &path,
            b"{\"prompt\": \"a\", \"output_tokens\": 1}\n{\"prompt\": \"\xe9\"}\n",
        )
        .expect("write");
        let w = workload(
            Harness::VllmBenchmark,
            custom(path.to_string_lossy().into_owned(), None),
            ApiKind::Completion,
        );
        let e = build(&w, 5).unwrap_err().to_string();
        assert!(e.contains("latin1.jsonl: line 2: not UTF-8 text"), "{e}");
    }

    fn sharegpt_file(dir: &tempfile::TempDir) -> String {
        let entry = |p: &str, c: &str| serde_json::json!({"conversations": [{"from": "human", "value": p}, {"from": "gpt", "value": c}]});
        let entries = serde_json::json!([
            entry("a b c d e", "f g h"),
            entry("", "x y"),
            entry("a b", "c d e f"),
            {"conversations": [{"from": "human", "value": "only one turn"}]},
            entry("p q r", ""),
        ]);
        write(dir, "sg.json", &entries.to_string())
    }

    fn ip_sharegpt(
        path: String,
        input: Option<(u64, u64)>,
        output: Option<(u64, u64)>,
    ) -> DataSpec {
        let filter = |b: Option<(u64, u64)>| {
            b.map(|(min, max)| TokenLengths {
                shape: LengthShape::Normal {
                    mean: 512.0,
                    spread: Spread::StdDev(200.0),
                    min,
                    max,
                },
                total_count: None,
            })
        };
        DataSpec::ShareGpt(ShareGpt {
            path: Some(path),
            input_filter: filter(input),
            output: None,
            output_filter: filter(output),
            shuffle: false,
        })
    }

    #[test]
    fn inference_perf_sharegpt_filters_by_the_distributions_bounds_in_file_order() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = sharegpt_file(&dir);
        // Prompts of 3..=10 tokens: entry 1 (5 tokens, answer 3) and entry 5 (3 tokens, no answer: the
        // client's default 30); entry 2 is empty, entry 3 too short, entry 4 has one turn.
        let w = workload(
            Harness::InferencePerf,
            ip_sharegpt(path.clone(), Some((3, 10)), None),
            ApiKind::Completion,
        );
        let got: Vec<(u32, Option<u32>)> = build(&w, 10)
            .expect("prompts")
            .iter()
            .map(|p| (p.input_tokens, p.max_tokens))
            .collect();
        assert_eq!(got, [(5, Some(3)), (3, Some(30))]);
        // Answers of 1..=3 tokens leave entry 1 alone.
        let w = workload(
            Harness::InferencePerf,
            ip_sharegpt(path.clone(), Some((3, 10)), Some((1, 3))),
            ApiKind::Completion,
        );
        let prompts = build(&w, 10).expect("prompts");
        assert_eq!(prompts.len(), 1);
        assert!(prompts[0].messages.is_none());
        // Chat: every entry with two turns, all turns as messages, no filter, the default max_tokens.
        let w = workload(
            Harness::InferencePerf,
            ip_sharegpt(path.clone(), Some((3, 10)), Some((1, 3))),
            ApiKind::Chat,
        );
        let prompts = build(&w, 10).expect("prompts");
        assert_eq!(prompts.len(), 4);
        assert!(
            prompts
                .iter()
                .all(|p| p.max_tokens == Some(30)
                    && p.messages.as_ref().is_some_and(|m| m.len() == 2))
        );
        // Nothing left: the error names the bounds, never a debug dump of the distribution.
        let w = workload(
            Harness::InferencePerf,
            ip_sharegpt(path, Some((100, 200)), None),
            ApiKind::Completion,
        );
        let e = build(&w, 10).unwrap_err().to_string();
        assert!(e.contains("sg.json: no usable prompts"), "{e}");
        assert!(
            e.contains("of [100, 200] tokens and an answer of any tokens"),
            "{e}"
        );
        assert!(!e.contains("Normal {"), "{e}");
    }

    #[test]
    fn vllm_sharegpt_sends_the_prompt_alone() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = sharegpt_file(&dir);
        let data = DataSpec::ShareGpt(ShareGpt {
            path: Some(path),
            input_filter: None,
            output: None,
            output_filter: None,
            shuffle: false,
        });
        let w = workload(Harness::VllmBenchmark, data, ApiKind::Chat);
        // vLLM's filter, prompt ≥ 4 and answer ≥ 4 tokens: entry 1's answer is 3, entry 2's prompt is empty,
        // entry 3's prompt is 2 and entry 5's answer is empty (entry 4 has one turn): nothing passes.
        let e = build(&w, 10).unwrap_err().to_string();
        assert!(
            e.contains("prompt ≥ 4, prompt ≤ 1024, prompt + output ≤ 2048 tokens"),
            "{e}"
        );
        let data = DataSpec::ShareGpt(ShareGpt {
            path: Some(write(
                &dir,
                "ok.json",
                &serde_json::json!([{"conversations": [{"value": "a b c d"}, {"value": "e f g h"}]}]).to_string(),
            )),
            input_filter: None,
            output: None,
            output_filter: None,
            shuffle: true,
        });
        let w = workload(Harness::VllmBenchmark, data, ApiKind::Chat);
        let prompts = build(&w, 3).expect("prompts");
        assert_eq!(
            (prompts[0].input_tokens, prompts[0].max_tokens),
            (4, Some(4))
        );
        assert!(prompts[0].messages.is_none());
    }

    #[test]
    fn shared_prefix_system_prompts_draw_one_length_per_group() {
        let data = DataSpec::SharedPrefix(SharedPrefix {
            num_groups: 6,
            num_prompts_per_group: 3,
            system_prompt_len: TokenLengths {
                shape: LengthShape::Uniform { min: 5, max: 9 },
                total_count: None,
            },
            question_len: TokenLengths::fixed(2),
            output_len: TokenLengths::fixed(4),
            seed: Some(3),
            multi_turn: false,
            style: SharedPrefixStyle::InferencePerf,
            prefix_images: None,
            question_images: None,
        });
        let w = workload(Harness::InferencePerf, data, ApiKind::Completion);
        let prompts = build(&w, 18).expect("prompts");
        assert_eq!(prompts.len(), 18);
        let mut by_group: std::collections::BTreeMap<u32, Vec<u32>> = Default::default();
        for p in &prompts {
            by_group
                .entry(p.prefix_group.expect("group"))
                .or_default()
                .push(p.input_tokens);
        }
        for lengths in by_group.values() {
            // Same system prompt within a group: the same length, 5..=9 + 2.
            assert!(lengths.windows(2).all(|w| w[0] == w[1]), "{lengths:?}");
            assert!((7..=11).contains(&lengths[0]), "{lengths:?}");
        }
    }

    #[test]
    fn a_distribution_where_a_fixed_length_is_needed_is_described_not_dumped() {
        let lengths = TokenLengths {
            shape: LengthShape::Normal {
                mean: 5.0,
                spread: Spread::StdDev(2.0),
                min: 1,
                max: 9,
            },
            total_count: None,
        };
        assert_eq!(
            fixed("output length", &lengths).unwrap_err().to_string(),
            "data: output length must be a fixed token count for this data type, found a normal distribution \
             (mean 5, std_dev 2, min 1, max 9)"
        );
    }

    // ---- Special tokens: each dialect counts the BOS as its tool does ----

    fn random(input: TokenLengths, prefix_len: u64) -> DataSpec {
        DataSpec::Random(crate::workload::RandomData {
            input,
            output: TokenLengths::fixed(5),
            prefix_len,
            text: PromptText::RandomTokens,
            rerank: None,
            images: None,
        })
    }

    fn synthetic_text(prompt: u64, prefix: u64) -> DataSpec {
        DataSpec::SyntheticText(crate::workload::SyntheticText {
            prompt: TokenLengths::fixed(prompt),
            output: Some(TokenLengths::fixed(5)),
            turns: 1,
            prefix_buckets: (prefix > 0)
                .then_some(crate::workload::PrefixBucket {
                    prefix_tokens: prefix,
                    prefix_count: 1,
                    bucket_weight: 100,
                })
                .into_iter()
                .collect(),
            samples: 8,
            think_time: None,
            images: None,
        })
    }

    /// Each prompt's own tokens (re-encoded without special tokens) and the length it records, over `n` prompts
    /// of `w` under the BOS-adding fixture tokenizer; every prompt of these fixed-length specs is alike.
    fn own_and_recorded(w: &Workload, n: u64) -> (u32, u32) {
        let tokenizer = llmbench_text::tokenizer::testing::bos_bpe();
        let prompts = build_prompts(w, &tokenizer, Some(n)).expect("prompts");
        assert_eq!(prompts.len() as u64, n);
        let pairs: std::collections::BTreeSet<(u32, u32)> = prompts
            .iter()
            .map(|p| (tokenizer.count(&p.text).expect("count"), p.input_tokens))
            .collect();
        assert_eq!(pairs.len(), 1, "{:?}: {pairs:?}", w.harness);
        pairs.into_iter().next().expect("one")
    }

    #[test]
    fn vllm_random_prompts_leave_room_for_the_bos_in_the_input_length_but_not_in_the_prefix() {
        // vLLM: real_input_len = 100 − 1; the server counts 99 + its BOS = 100, as asked.
        let w = workload(
            Harness::VllmBenchmark,
            random(TokenLengths::fixed(100), 0),
            ApiKind::Completion,
        );
        assert_eq!(own_and_recorded(&w, 8), (99, 100));
        // The random prefix is not reduced: 10 + 99 of text.
        let w = workload(
            Harness::VllmBenchmark,
            random(TokenLengths::fixed(100), 10),
            ApiKind::Completion,
        );
        assert_eq!(own_and_recorded(&w, 8), (109, 110));
        // InferenceMAX's bench_serving counts no special token: 100 of text, 101 on the server.
        let w = workload(
            Harness::Inferencemax,
            random(TokenLengths::fixed(100), 0),
            ApiKind::Completion,
        );
        assert_eq!(own_and_recorded(&w, 8), (100, 101));
        // The range ratio is taken around the reduced length, as vLLM's bounds are: [floor(99·0.5), ceil(99·1.5)].
        let ranged = TokenLengths {
            shape: LengthShape::RangeRatio {
                len: 100,
                ratio: 0.5,
            },
            total_count: None,
        };
        let real = vllm_real_input_len(&ranged, 1, 0).expect("valid");
        assert_eq!(
            distribution("input length", &real).expect("valid"),
            LengthDistribution::Uniform { min: 49, max: 149 }
        );
    }

    #[test]
    fn vllm_refuses_an_input_length_its_special_tokens_use_up_unless_a_prefix_is_left() {
        let w = workload(
            Harness::VllmBenchmark,
            random(TokenLengths::fixed(1), 0),
            ApiKind::Completion,
        );
        let e = build_prompts(&w, &llmbench_text::tokenizer::testing::bos_bpe(), Some(2))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "data: random-input-len 1 leaves no token of text: the tokenizer adds 1 special token(s), which vLLM \
             counts in the input length (the text is random-input-len − 1 tokens); raise random-input-len or \
             random-prefix-len"
        );
        let ranged = TokenLengths {
            shape: LengthShape::RangeRatio { len: 2, ratio: 0.5 },
            total_count: None,
        };
        let e = vllm_real_input_len(&ranged, 1, 0).unwrap_err().to_string();
        assert!(
            e.contains("at least 50% of it with random-range-ratio 0.5")
                && e.ends_with("or lower random-range-ratio"),
            "{e}"
        );
        // With a prefix the prompt is the prefix alone, as vLLM sends it.
        let w = workload(
            Harness::VllmBenchmark,
            random(TokenLengths::fixed(1), 5),
            ApiKind::Completion,
        );
        assert_eq!(own_and_recorded(&w, 2), (5, 6));
        // Without special tokens nothing changes.
        let w = workload(
            Harness::VllmBenchmark,
            random(TokenLengths::fixed(1), 0),
            ApiKind::Completion,
        );
        let prompts = build(&w, 2).expect("prompts");
        assert!(prompts.iter().all(|p| p.input_tokens == 1), "{prompts:?}");
    }

    #[test]
    fn inference_perf_counts_the_bos_in_every_text_it_generates() {
        // count_tokens adds the BOS: 99 tokens of text make "100 tokens".
        let w = workload(
            Harness::InferencePerf,
            random(TokenLengths::fixed(100), 0),
            ApiKind::Completion,
        );
        assert_eq!(own_and_recorded(&w, 8), (99, 100));
        // shared_prefix: the system prompt (20 → 19) and the question (30 → 29) are each generated to a count
        // with the BOS, so the server sees 19 + 29 + 1.
        let w = workload(
            Harness::InferencePerf,
            DataSpec::SharedPrefix(SharedPrefix {
                num_groups: 2,
                num_prompts_per_group: 3,
                system_prompt_len: TokenLengths::fixed(20),
                question_len: TokenLengths::fixed(30),
                output_len: TokenLengths::fixed(5),
                seed: None,
                multi_turn: false,
                style: SharedPrefixStyle::InferencePerf,
                prefix_images: None,
                question_images: None,
            }),
            ApiKind::Completion,
        );
        assert_eq!(own_and_recorded(&w, 6), (48, 49));
    }

    fn prefix_repetition(shuffle: bool) -> DataSpec {
        DataSpec::SharedPrefix(SharedPrefix {
            num_groups: 2,
            num_prompts_per_group: 3,
            system_prompt_len: TokenLengths::fixed(20),
            question_len: TokenLengths::fixed(30),
            output_len: TokenLengths::fixed(5),
            seed: None,
            multi_turn: false,
            style: SharedPrefixStyle::VllmPrefixRepetition { shuffle },
            prefix_images: None,
            question_images: None,
        })
    }

    #[test]
    fn vllm_prefix_repetition_sends_exactly_prefix_plus_suffix_tokens_in_python_s_shuffled_order() {
        // `PrefixRepetitionRandomDataset` decodes exactly 20 + 30 ids without special tokens: the server adds
        // its BOS on top (unlike vLLM's random dataset, which counts it in the asked length).
        let mut w = workload(
            Harness::VllmBenchmark,
            prefix_repetition(false),
            ApiKind::Completion,
        );
        w.seed = 0;
        assert_eq!(own_and_recorded(&w, 6), (50, 51));
        let grouped = build(&w, 6).expect("prompts");
        let groups: Vec<_> = grouped.iter().map(|p| p.prefix_group).collect();
        assert_eq!(groups, [0, 0, 0, 1, 1, 1].map(Some));
        assert!(grouped.iter().all(|p| p.max_tokens == Some(5)));
        // Each group's prompts share the 20-token prefix and differ after it.
        let prefix =
            |p: &Prompt| Tokenizer::builtin().encode(&p.text).expect("encode")[..20].to_vec();
        assert_eq!(prefix(&grouped[0]), prefix(&grouped[2]));
        assert_ne!(prefix(&grouped[0]), prefix(&grouped[3]));
        assert_ne!(grouped[0].text, grouped[1].text);
        // Shuffled as `random.seed(0); random.shuffle(requests)` orders a list of 6: [4, 2, 1, 0, 5, 3]
        // (CPython 3), i.e. groups 1, 0, 0, 0, 1, 1 — and the same prompts as the grouped build.
        let mut w = workload(
            Harness::VllmBenchmark,
            prefix_repetition(true),
            ApiKind::Completion,
        );
        w.seed = 0;
        let shuffled = build(&w, 6).expect("prompts");
        let order = [4, 2, 1, 0, 5, 3];
        let expected: Vec<&str> = order.iter().map(|&i| grouped[i].text.as_str()).collect();
        let got: Vec<&str> = shuffled.iter().map(|p| p.text.as_str()).collect();
        assert_eq!(got, expected);
    }

    #[test]
    fn guidellm_counts_the_leading_bos_in_the_prompt_and_each_prefix_and_aiperf_counts_none() {
        // guidellm keeps the first 100 ids of encode(text), the BOS among them: 99 of text; its prefix likewise.
        let w = workload(
            Harness::Guidellm,
            synthetic_text(100, 20),
            ApiKind::Completion,
        );
        assert_eq!(own_and_recorded(&w, 8), (19 + 99, 119));
        // AIPerf encodes with add_special_tokens=False: 100 of text, 101 on the server.
        let w = workload(Harness::Aiperf, synthetic_text(100, 0), ApiKind::Completion);
        assert_eq!(own_and_recorded(&w, 8), (100, 101));
    }
}
