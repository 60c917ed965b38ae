//! Multi-turn conversations, built before the clock starts: inference-perf's `shared_prefix` with
//! `enable_multi_turn_chat: true` (user sessions), and guidellm's `synthetic_text` with `turns: N`.
//!
//! Only the user's side is built here. The model's answers come from the stream during the run, and each turn's
//! request carries the earlier turns with those actual answers (see `engine::conversation`).
//!
//! Token counts: each piece (prefix, user turn) has its exact length under the run's tokenizer; a turn's input
//! length is recorded as the sum of its pieces plus the earlier answers' output tokens. That sum is exact for the
//! `builtin` tokenizer (whitespace words, as the simulators count); under a BPE tokenizer the joins between pieces
//! can merge or split a token or two, which is why every report prefers the server's `usage.prompt_tokens`.

use std::sync::Arc;
use std::time::Duration;

use rand::SeedableRng as _;
use rand::rngs::Xoshiro256PlusPlus;
use rand::seq::SliceRandom as _;
use rand_distr::Distribution as _;
use rand_distr::weighted::WeightedIndex;

use crate::prompts::{DEFAULT_PROMPTS, MAX_PROMPTS, PromptError, distribution, fixed, to_u32};
use crate::workload::{
    AiperfSamplingStrategy, ApiKind, ConversationReplay, DataSpec, LengthShape, SharedPrefix,
    SyntheticText, ThinkTime, TokenLengths, Workload,
};
use llmbench_data::{DataError, LengthDistribution, Synthesizer, SyntheticSpec, synthetic_prompts};
use llmbench_text::tokenizer::Tokenizer;

#[path = "aiperf_conversations.rs"]
mod aiperf;
#[path = "aiperf_dataset.rs"]
mod aiperf_dataset;

pub use aiperf_dataset::AiperfDatasetError;

/// Text and its exact length in tokens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Piece {
    pub text: String,
    pub tokens: u32,
}

/// One user turn: what the user says, and the `max_tokens` asked for the answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserTurn {
    pub text: Piece,
    pub max_tokens: Option<u32>,
    /// AIPerf: the think time waited after the previous turn returned before this turn is queued (a turn's
    /// `delay`); `None` for a first turn and for the other tools.
    pub delay: Option<Duration>,
}

/// The user's side of one conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Script {
    /// guidellm: the prefix, sent as the system message of the first turn; inference-perf: the shared prefix, the
    /// session's context before its first round. Shared between the conversations of one prefix group.
    pub system: Option<Arc<Piece>>,
    /// guidellm: the turns, in order. inference-perf: one prompt, sent again in every round.
    pub turns: Vec<UserTurn>,
    /// guidellm `delay`: how long after a turn's answer its next turn may go (one value per conversation).
    pub think: Option<Duration>,
}

/// How a tool runs its conversations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Style {
    /// inference-perf `enable_multi_turn_chat` (`apis/user_session.py`, `shared_prefix_datagen.py`): request i is
    /// round i div U of user session i mod U; a round waits until the session's previous one has ended; its
    /// completion prompt is the session context, a space and the user's prompt; after a success the context
    /// becomes that prompt, a space and the answer (a failure leaves it as it was).
    InferencePerfSessions,
    /// guidellm `turns: N` (`scheduler/worker.py`, `backends/openai/request_handlers.py`): each request slot
    /// takes a conversation's waiting next turn first, else starts the next conversation; a turn carries every
    /// earlier turn (the system prefix on the first, each user message and the actual answer); a failed turn
    /// cancels the rest of its conversation.
    GuidellmTurns,
    /// inference-perf `conversation_replay` (`datagen/replay/conversation_replay_datagen.py`,
    /// `apis/user_session.py`): the conversations are drawn from distributions (the plan below; its texts are
    /// built as the run goes, see [`ReplayPlan`]), and `scripts` is empty. How requests map to conversations and
    /// turns, and how a turn's prompt is built, is in `engine::conversation`.
    InferencePerfReplay(Arc<ReplayPlan>),
    /// AIPerf 0.13's sessions (`timing/strategies/request_rate.py`, `workers/session_manager.py`): each turn is
    /// a credit of the rate loop; a new session takes the next conversation of `sampling`, and its later turns
    /// are queued when the turn before returned (after the turn's `delay`) and sent ahead of new sessions. A
    /// turn carries every earlier user turn and the actual answers (AIPerf's `DELTAS_WITHOUT_RESPONSES`).
    /// Built by `aiperf::aiperf_conversations` and `aiperf_dataset`; run by `engine::conversation`.
    AiperfConversations {
        sampling: AiperfSampling,
        /// `--session-header`: the header that carries each session's id in place of `X-Correlation-ID`.
        session_header: Option<String>,
    },
}

/// Which conversation each new AIPerf session takes (`dataset/dataset_samplers.py`; AIPerf 0.13's default is its
/// loader's preference: sequential for synthetic data, `single_turn` and `multi_turn`, shuffle for `random_pool`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AiperfSampling {
    /// `SequentialSampler`: in dataset order, wrapping.
    Sequential,
    /// `ShuffleSampler`: numpy's `default_rng(seed).shuffle` of the ids, gone through, shuffled again; `seed` is
    /// `rng.derive("dataset.sampler.shuffle")` of `--random-seed`.
    Shuffle { seed: u64 },
    /// `RandomSampler`: `random.Random(seed).choice` of the ids, with replacement; `seed` is
    /// `rng.derive("dataset.sampler.random")` of `--random-seed`.
    Random { seed: u64 },
}

impl AiperfSampling {
    /// The sampler of `strategy`, its generator seeded as AIPerf derives it from the run's seed.
    pub fn of(strategy: AiperfSamplingStrategy, seed: u64) -> AiperfSampling {
        let derive = |name| llmbench_text::py_random::aiperf_derived_seed(seed, name);
        match strategy {
            AiperfSamplingStrategy::Sequential => AiperfSampling::Sequential,
            AiperfSamplingStrategy::Shuffle => AiperfSampling::Shuffle {
                seed: derive("dataset.sampler.shuffle"),
            },
            AiperfSamplingStrategy::Random => AiperfSampling::Random {
                seed: derive("dataset.sampler.random"),
            },
        }
    }
}

/// A run's conversations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConversationSet {
    pub style: Style,
    pub scripts: Vec<Script>,
}

/// Why conversations could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ConversationError {
    #[error("{key}: {why}")]
    Unsupported {
        key: &'static str,
        why: &'static str,
    },
    #[error(transparent)]
    Prompts(#[from] PromptError),
    #[error(transparent)]
    AiperfDataset(#[from] AiperfDatasetError),
    #[error("data: {what} is {value}, above the {max} llmbench plans for")]
    TooMany {
        what: &'static str,
        value: u64,
        max: u64,
    },
}

impl From<DataError> for ConversationError {
    fn from(e: DataError) -> Self {
        ConversationError::Prompts(PromptError::Data(e))
    }
}

/// The conversations of `workload`, or `None` when it is single-turn. `expected_requests` sizes guidellm's pool
/// of conversations (each request is one turn).
pub fn build_conversations(
    workload: &Workload,
    tokenizer: &Tokenizer,
    expected_requests: Option<u64>,
) -> Result<Option<ConversationSet>, ConversationError> {
    let set = conversations_of(workload, tokenizer, expected_requests)?;
    if set.is_some() && workload.api.kind.is_pooling() {
        return Err(ConversationError::Unsupported {
            key: "multi-turn data over an embeddings or rerank API",
            why: "a pooling request has no answer to carry into a next turn (AIPerf's embeddings endpoint \
                  refuses more than one turn); use single-turn data",
        });
    }
    Ok(set)
}

fn conversations_of(
    workload: &Workload,
    tokenizer: &Tokenizer,
    expected_requests: Option<u64>,
) -> Result<Option<ConversationSet>, ConversationError> {
    match &workload.data {
        DataSpec::SharedPrefix(shared) if shared.multi_turn => {
            if workload.api.kind == ApiKind::Chat {
                return Err(ConversationError::Unsupported {
                    key: "data.shared_prefix.enable_multi_turn_chat with api.type: chat",
                    why: "inference-perf sends its user sessions as completion prompts only (its chat variant is \
                          not implemented upstream); set api.type: completion",
                });
            }
            let synth = Synthesizer::new(tokenizer)?;
            Ok(Some(ConversationSet {
                style: Style::InferencePerfSessions,
                scripts: inference_perf_sessions(&synth, shared, workload.seed)?,
            }))
        }
        // guidellm sends a prefix as the system message of a conversation's first turn, so single-turn chat
        // requests with a prefix take the conversation path too (their records carry no turn).
        DataSpec::SyntheticText(text)
            if text.turns > 1
                || (workload.api.kind != ApiKind::Completion
                    && !text.prefix_buckets.is_empty()) =>
        {
            if workload.api.kind == ApiKind::Responses
                && text.turns > 1
                && !text.prefix_buckets.is_empty()
            {
                return Err(ConversationError::Unsupported {
                    key: "data prefix_tokens with turns > 1 over request_format /v1/responses",
                    why: "guidellm sends a Responses turn's prefix as that request's `instructions` and leaves it \
                          out of the history items, which llmbench's conversations do not model yet; drop the \
                          prefix or the turns",
                });
            }
            let synth = Synthesizer::new(tokenizer)?;
            Ok(Some(ConversationSet {
                style: Style::GuidellmTurns,
                scripts: guidellm_conversations(&synth, text, workload.seed, expected_requests)?,
            }))
        }
        DataSpec::AiperfConversations(spec) => {
            let synth = Synthesizer::new(tokenizer)?;
            Ok(Some(ConversationSet {
                style: Style::AiperfConversations {
                    sampling: AiperfSampling::of(spec.sampling, workload.seed),
                    session_header: workload.api.session_id_header.clone(),
                },
                scripts: aiperf::aiperf_conversations(&synth, spec, workload.seed)?,
            }))
        }
        DataSpec::AiperfFile(spec) => {
            let scripts =
                aiperf_dataset::aiperf_file_conversations(tokenizer, spec, workload.seed)?;
            if workload.api.kind == ApiKind::Completion && scripts.iter().any(|s| s.turns.len() > 1)
            {
                return Err(ConversationError::Unsupported {
                    key: "a multi_turn file's sessions over endpoint-type: completions",
                    why: "AIPerf 0.13 fails on each session's second turn (its completions endpoint takes one \
                          turn); use endpoint-type: chat",
                });
            }
            Ok(Some(ConversationSet {
                style: Style::AiperfConversations {
                    sampling: AiperfSampling::of(spec.sampling, workload.seed),
                    session_header: workload.api.session_id_header.clone(),
                },
                scripts,
            }))
        }
        DataSpec::ConversationReplay(spec) => {
            if workload.api.kind == ApiKind::Chat {
                return Err(ConversationError::Unsupported {
                    key: "data.conversation_replay with api.type: chat",
                    why: "inference-perf replays conversations as completion prompts only \
                          (`get_supported_apis` is [completion]); set api.type: completion",
                });
            }
            let synth = Synthesizer::new(tokenizer)?;
            let words = synth
                .certified_words()
                .ok_or(ConversationError::Unsupported {
                    key: "data.type: conversation_replay",
                    why: "this tokenizer does not encode plain words one token each, so the long prompts of a \
                          conversation replay cannot be built during the run without tokenizing; use a BPE, \
                          SentencePiece or WordPiece tokenizer (or the builtin one)",
                })?;
            if workload.stages.len() > 1 {
                tracing::warn!(
                    stages = workload.stages.len(),
                    "conversation_replay: as inference-perf does, stages after the first re-prime each session \
                     without its system prompt, so until a conversation restarts at turn 0 its turns are sent \
                     alone (no system prompt, no history); run one stage per run for whole contexts"
                );
            }
            let mut plan = replay_plan(spec, WordBank::new(words))?;
            plan.session_header = workload.api.session_id_header.clone();
            // `LoadConfig.num_workers` defaults to the host's CPU count (`max(1, cpu_count())`).
            plan.workers = workload.workers.num_workers.unwrap_or_else(|| {
                std::thread::available_parallelism().map_or(1, |n| n.get() as u32)
            });
            plan.stages = workload
                .stages
                .iter()
                .map(
                    |stage| match (stage.arrival.clone(), stage.limit.requests) {
                        (crate::workload::Arrival::Closed { concurrency, .. }, Some(requests)) => {
                            Some(ReplayStage {
                                requests,
                                concurrency,
                            })
                        }
                        _ => None,
                    },
                )
                .collect();
            Ok(Some(ConversationSet {
                style: Style::InferencePerfReplay(Arc::new(plan)),
                scripts: Vec::new(),
            }))
        }
        _ => Ok(None),
    }
}

/// upstream's context window when `max_model_len` is unset (`ConversationReplayDataGenerator.__init__`:
/// `self.cr_config.max_model_len or 225000`).
pub(crate) const REPLAY_DEFAULT_MAX_MODEL_LEN: u32 = 225_000;

/// inference-perf `conversation_replay`, drawn before the clock starts: per conversation its dynamic system
/// prompt length and its turns' lengths and tool-call latencies (`_build_conversations`). Only numbers are kept:
/// the texts (the shared and dynamic system prompts, every turn's prompt) are made from seeds when a turn goes
/// out, by concatenating plain words (no tokenizer call), because a profile like `agentic_code_generation` (40
/// conversations of up to 3000 turns of up to 10000 tokens, system prompts up to ~1M tokens) would need gigabytes
/// of text built ahead. A text made again from its seed is the same text, so a recycled conversation replays the
/// same prompts, as upstream's blueprints do. What a run holds is each conversation's session (its system prompt
/// and history), which upstream's truncation keeps within `max_model_len` tokens.
///
/// The draws follow upstream's order (turn counts, dynamic lengths, then every turn's input length, output
/// length and latency) and its sampling (`sample_from_distribution`, see [`UpstreamSampler`]) with llmbench's
/// seeded generator; numpy's own streams (PCG64) and the tokenizer-decoded random ids are not reproduced, so the
/// draws and words differ from upstream's while their distributions and token counts match.
#[derive(Debug, PartialEq, Eq)]
pub struct ReplayPlan {
    pub words: WordBank,
    pub seed: u64,
    pub shared_tokens: u32,
    pub max_model_len: u32,
    pub conversations: Vec<Blueprint>,
    /// inference-perf `load.num_workers`: each worker has its own queue of conversations and its share of the
    /// concurrency (see `engine::conversation`).
    pub workers: u32,
    /// Per stage of the run, its `num_requests` and `concurrency_level` (`None`: not a `concurrent` stage with a
    /// request count, whose requests are then taken in order by whichever slot is free).
    pub stages: Vec<Option<ReplayStage>>,
    /// inference-perf `api.session_id_header_key`: every turn carries its session's id in this header.
    pub session_header: Option<String>,
}

/// A `concurrent` stage: `num_requests` requests, `concurrency_level` at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplayStage {
    pub requests: u64,
    pub concurrency: u32,
}

/// One conversation's plan (upstream's `ConversationBlueprint`, without its texts).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blueprint {
    pub dynamic_tokens: u32,
    pub turns: Vec<ReplayTurn>,
}

/// One turn: the user prompt's length, the answer's `max_tokens`, and the tool-call latency slept after its
/// answer (whole seconds: upstream samples it with the integer sampler too).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplayTurn {
    pub input_tokens: u32,
    pub max_tokens: u32,
    pub think_s: u32,
}

/// What a replay text is: the seeds of its words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplayText {
    /// The shared system prompt of the `epoch`-th stage (upstream draws a new one per stage).
    Shared {
        epoch: u32,
    },
    Dynamic {
        conversation: u32,
    },
    Turn {
        conversation: u32,
        turn: u32,
    },
}

impl ReplayPlan {
    /// The first `tokens` words of `what`. A shorter text is a prefix of a longer one of the same seed, which is
    /// how a truncated system prompt keeps its first tokens.
    pub fn text(&self, what: ReplayText, tokens: u32) -> String {
        let (tag, a, b) = match what {
            ReplayText::Shared { epoch } => (1, u64::from(epoch), 0),
            ReplayText::Dynamic { conversation } => (2, u64::from(conversation), 0),
            ReplayText::Turn { conversation, turn } => {
                (3, u64::from(conversation), u64::from(turn))
            }
        };
        self.words.text(mix(&[self.seed, tag, a, b]), tokens)
    }
}

/// SplitMix64 over `parts`: independent seeds for the texts of one plan.
fn mix(parts: &[u64]) -> u64 {
    parts.iter().fold(0x9E37_79B9_7F4A_7C15, |acc, &p| {
        let mut z = (acc ^ p).wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    })
}

/// A certified tokenizer's plain words, owned: `n` of them concatenated are `n` tokens.
#[derive(Debug, PartialEq, Eq)]
pub struct WordBank {
    words: Vec<(Box<str>, Box<str>)>,
}

impl WordBank {
    /// `words` must not be empty (`Synthesizer::new` refuses a vocabulary without plain words).
    pub fn new(words: Vec<(Box<str>, Box<str>)>) -> WordBank {
        WordBank { words }
    }

    /// `n` words drawn with `seed`, concatenated.
    pub fn text(&self, seed: u64, n: u32) -> String {
        if self.words.is_empty() || n == 0 {
            return String::new();
        }
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let mut out = String::with_capacity((n as usize).min(1 << 20) * 6);
        for i in 0..n {
            let (first, next) =
                &self.words[rand::RngExt::random_range(&mut rng, 0..self.words.len())];
            out.push_str(if i == 0 { first } else { next });
        }
        out
    }
}

/// inference-perf's `sample_from_distribution` (`utils/numeric/distribution/utils.py`), which
/// `conversation_replay` samples every length with — not `generate_distribution`, which the other generators
/// use: a lognormal is moment-matched to `mean`/`std_dev` with no shift by `min` (a `std_dev` of 0 gives `mean`
/// itself), a uniform is drawn from `[min, max + 1)`, and every draw is clipped to `[min, max]`, rounded half to
/// even (`np.round`) and clipped again.
#[derive(Debug, Clone)]
pub(crate) struct UpstreamSampler {
    kind: Draw,
    min: f64,
    max: f64,
}

#[derive(Debug, Clone)]
enum Draw {
    Fixed(u64),
    Constant(f64),
    Normal(rand_distr::Normal<f64>),
    SkewNormal(rand_distr::SkewNormal<f64>),
    LogNormal(rand_distr::LogNormal<f64>),
    Uniform(f64, f64),
    Poisson(rand_distr::Poisson<f64>),
}

impl UpstreamSampler {
    /// `what` names the distribution in errors.
    pub fn new(what: &str, lengths: &TokenLengths) -> Result<UpstreamSampler, DataError> {
        let invalid = |reason: String| DataError::InvalidDistribution {
            what: what.to_owned(),
            reason,
        };
        let (kind, min, max) = match lengths.shape {
            // `np.full(count, int(config.mean))`, unclipped.
            LengthShape::Fixed(n) => (Draw::Fixed(n), 0, u64::MAX),
            LengthShape::Normal {
                mean,
                spread,
                min,
                max,
            } => (
                Draw::Normal(
                    rand_distr::Normal::new(mean, spread.std_dev())
                        .map_err(|e| invalid(format!("normal(mean {mean}): {e}")))?,
                ),
                min,
                max,
            ),
            LengthShape::SkewNormal {
                mean,
                spread,
                skew,
                min,
                max,
            } => (
                // Azzalini's skew normal, as `_sample_skew_normal` draws it.
                Draw::SkewNormal(
                    rand_distr::SkewNormal::new(mean, spread.std_dev(), skew)
                        .map_err(|e| invalid(format!("skew normal(mean {mean}): {e}")))?,
                ),
                min,
                max,
            ),
            LengthShape::LogNormal {
                mean,
                spread,
                min,
                max,
            } => {
                if mean <= 0.0 {
                    return Err(invalid(
                        "inference-perf refuses a lognormal with mean ≤ 0 (\"Lognormal distribution requires \
                         mean > 0.\")"
                            .to_owned(),
                    ));
                }
                let s = spread.std_dev();
                let kind = if s <= 0.0 {
                    Draw::Constant(mean)
                } else {
                    let sigma_sq = (1.0 + (s / mean).powi(2)).ln();
                    let mu = mean.ln() - sigma_sq / 2.0;
                    Draw::LogNormal(rand_distr::LogNormal::new(mu, sigma_sq.sqrt()).map_err(
                        |e| invalid(format!("lognormal(mean {mean}, std_dev {s}): {e}")),
                    )?)
                };
                (kind, min, max)
            }
            LengthShape::Uniform { min, max } => {
                (Draw::Uniform(min as f64, max as f64 + 1.0), min, max)
            }
            LengthShape::Poisson { mean, min, max } => (
                Draw::Poisson(
                    rand_distr::Poisson::new(if mean > 0.0 { mean } else { 1.0 })
                        .map_err(|e| invalid(format!("poisson(mean {mean}): {e}")))?,
                ),
                min,
                max,
            ),
            LengthShape::RangeRatio { .. } => {
                return Err(invalid(
                    "a vLLM range ratio is not an inference-perf distribution".to_owned(),
                ));
            }
            LengthShape::PositiveNormal { .. } => {
                return Err(invalid(
                    "AIPerf's positive normal is not an inference-perf distribution".to_owned(),
                ));
            }
        };
        Ok(UpstreamSampler {
            kind,
            min: min as f64,
            max: max as f64,
        })
    }

    pub fn sample<R: rand::Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        let x = match &self.kind {
            Draw::Fixed(n) => return *n,
            Draw::Constant(v) => *v,
            Draw::Normal(d) => d.sample(rng),
            Draw::SkewNormal(d) => d.sample(rng),
            Draw::LogNormal(d) => d.sample(rng),
            Draw::Uniform(low, high) => rand::RngExt::random_range(rng, *low..*high),
            Draw::Poisson(d) => d.sample(rng),
        };
        if x.is_nan() {
            return self.min as u64;
        }
        x.clamp(self.min, self.max)
            .round_ties_even()
            .clamp(self.min, self.max) as u64
    }
}

/// `_build_conversations`: the per-conversation and per-turn draws, in upstream's order, from one generator
/// seeded with `seed`.
fn replay_plan(
    spec: &ConversationReplay,
    words: WordBank,
) -> Result<ReplayPlan, ConversationError> {
    let n = spec.num_conversations;
    if n > MAX_PROMPTS {
        return Err(ConversationError::TooMany {
            what: "conversation_replay.num_conversations",
            value: n,
            max: MAX_PROMPTS,
        });
    }
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(spec.seed);
    let sampler = |what: &'static str, d: &Option<TokenLengths>| {
        d.as_ref()
            .map(|d| UpstreamSampler::new(what, d))
            .transpose()
    };
    let draw =
        |s: &Option<UpstreamSampler>, rng: &mut Xoshiro256PlusPlus, fallback: u64, count: u64| {
            (0..count)
                .map(|_| s.as_ref().map_or(fallback, |s| s.sample(rng)))
                .collect::<Vec<u64>>()
        };
    let turns = sampler("turns_per_conversation", &spec.turns_per_conversation)?;
    let dynamic = sampler("dynamic_system_prompt_len", &spec.dynamic_system_prompt_len)?;
    let input = sampler("input_tokens_per_turn", &spec.input_tokens_per_turn)?;
    let output = sampler("output_tokens_per_turn", &spec.output_tokens_per_turn)?;
    let latency = sampler("tool_call_latency_sec", &spec.tool_call_latency_sec)?;
    let turn_counts = draw(&turns, &mut rng, 10, n);
    if let Some(c) = turn_counts.iter().position(|&t| t == 0) {
        return Err(DataError::InvalidDistribution {
            what: "conversation_replay.turns_per_conversation".to_owned(),
            reason: format!(
                "conversation {c} drew 0 turns, which inference-perf cannot replay (its turn index divides by \
                 the turn count); raise `min` to 1"
            ),
        }
        .into());
    }
    let total: u64 = turn_counts.iter().sum();
    if total > MAX_PROMPTS {
        return Err(ConversationError::TooMany {
            what: "conversation_replay's turns in all (conversations × turns each)",
            value: total,
            max: MAX_PROMPTS,
        });
    }
    let dynamic_lens = draw(&dynamic, &mut rng, 0, n);
    let inputs = draw(&input, &mut rng, 512, total);
    let outputs = draw(&output, &mut rng, 256, total);
    let latencies = draw(&latency, &mut rng, 0, total);
    let mut conversations = Vec::with_capacity(n as usize);
    let mut at = 0usize;
    for (c, &count) in turn_counts.iter().enumerate() {
        let mut turns = Vec::with_capacity(count as usize);
        for t in at..at + count as usize {
            turns.push(ReplayTurn {
                input_tokens: to_u32("input_tokens_per_turn", inputs[t])?,
                max_tokens: to_u32("output_tokens_per_turn", outputs[t])?,
                think_s: to_u32("tool_call_latency_sec", latencies[t])?,
            });
        }
        at += count as usize;
        conversations.push(Blueprint {
            dynamic_tokens: to_u32("dynamic_system_prompt_len", dynamic_lens[c])?,
            turns,
        });
    }
    Ok(ReplayPlan {
        words,
        seed: spec.seed,
        shared_tokens: to_u32("shared_system_prompt_len", spec.shared_system_prompt_len)?,
        max_model_len: spec
            .max_model_len
            .map_or(Ok(REPLAY_DEFAULT_MAX_MODEL_LEN), |m| {
                to_u32("max_model_len", m)
            })?,
        conversations,
        workers: 1,
        stages: Vec::new(),
        session_header: None,
    })
}

/// `num_groups × num_prompts_per_group` sessions: each group's system prompt, and per session a prompt that is
/// that system prompt followed by a question (inference-perf's `prompts[i]`), in a seeded shuffled order.
fn inference_perf_sessions(
    synth: &Synthesizer<'_>,
    spec: &SharedPrefix,
    seed: u64,
) -> Result<Vec<Script>, ConversationError> {
    let seed = spec.seed.unwrap_or(seed);
    let groups = to_u32("num_groups", spec.num_groups)?;
    let per_group = to_u32("num_prompts_per_group", spec.num_prompts_per_group)?;
    let sessions = u64::from(groups) * u64::from(per_group);
    if sessions > MAX_PROMPTS {
        return Err(PromptError::TooLarge {
            what: "num_groups × num_prompts_per_group (user sessions)",
            value: sessions,
        }
        .into());
    }
    let system_len = fixed("system_prompt_len", &spec.system_prompt_len)?;
    let systems = pieces(
        synth,
        groups as usize,
        LengthDistribution::Fixed(system_len),
        seed,
    )?;
    let questions = synthetic_prompts(
        synth,
        &SyntheticSpec {
            num_prompts: sessions as usize,
            prompt_tokens: distribution("question_len", &spec.question_len)?,
            output_tokens: Some(distribution("output_len", &spec.output_len)?),
            prefix_buckets: Vec::new(),
            specials_in_each_length: 0,
            seed: seed.wrapping_add(1),
        },
    )?
    .into_inner();
    let mut scripts: Vec<Script> = questions
        .into_iter()
        .enumerate()
        .map(|(i, question)| {
            let system = Arc::clone(&systems[i / per_group as usize]);
            let text = join(&[&system.text, &question.text]);
            Script {
                turns: vec![UserTurn {
                    text: Piece {
                        text,
                        tokens: system.tokens.saturating_add(question.input_tokens),
                    },
                    max_tokens: question.max_tokens,
                    delay: None,
                }],
                system: Some(system),
                think: None,
            }
        })
        .collect();
    scripts.shuffle(&mut Xoshiro256PlusPlus::seed_from_u64(seed.wrapping_add(2)));
    Ok(scripts)
}

/// guidellm's rows: per conversation one prompt length and one output length (sampled once, as guidellm samples
/// them per row), one prefix from the buckets, and `turns` distinct prompts of that length.
fn guidellm_conversations(
    synth: &Synthesizer<'_>,
    spec: &SyntheticText,
    seed: u64,
    expected_requests: Option<u64>,
) -> Result<Vec<Script>, ConversationError> {
    let turns = u64::from(spec.turns.max(1));
    let wanted = expected_requests.map_or(DEFAULT_PROMPTS, |n| n.div_ceil(turns));
    let count = wanted
        .min(spec.samples)
        .clamp(1, (MAX_PROMPTS / turns).max(1)) as usize;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let prompt_lengths = distribution("prompt_tokens", &spec.prompt)?.sampler("prompt_tokens")?;
    let output_lengths = spec
        .output
        .as_ref()
        .map(|o| -> Result<_, ConversationError> {
            Ok(distribution("output_tokens", o)?.sampler("output_tokens")?)
        })
        .transpose()?;

    let mut buckets: Vec<Vec<Arc<Piece>>> = Vec::with_capacity(spec.prefix_buckets.len());
    for (i, bucket) in spec.prefix_buckets.iter().enumerate() {
        let tokens = to_u32("prefix_tokens", bucket.prefix_tokens)?;
        let prefixes = to_u32("prefix_count", bucket.prefix_count)?;
        buckets.push(if tokens == 0 {
            Vec::new()
        } else {
            pieces(
                synth,
                prefixes as usize,
                LengthDistribution::Fixed(tokens),
                seed.wrapping_add(1_000 + i as u64),
            )?
        });
    }
    let choose_bucket = if buckets.is_empty() {
        None
    } else {
        Some(
            WeightedIndex::new(spec.prefix_buckets.iter().map(|b| b.bucket_weight)).map_err(
                |e| DataError::InvalidDistribution {
                    what: "prefix bucket weights".to_owned(),
                    reason: e.to_string(),
                },
            )?,
        )
    };

    // Think times come from a generator of their own (guidellm seeds its delay sampler apart, `random_seed + 2`),
    // so they leave the lengths drawn as without them.
    let mut think_rng = Xoshiro256PlusPlus::seed_from_u64(seed.wrapping_add(2));
    let mut scripts = Vec::with_capacity(count);
    for c in 0..count {
        let think = spec.think_time.map(|t| draw_think_time(&t, &mut think_rng));
        let length = prompt_lengths.sample(&mut rng).max(1);
        let max_tokens = output_lengths.as_ref().map(|s| s.sample(&mut rng).max(1));
        let system = choose_bucket.as_ref().and_then(|choice| {
            let bucket = &buckets[choice.sample(&mut rng)];
            (!bucket.is_empty())
                .then(|| Arc::clone(&bucket[rand::RngExt::random_range(&mut rng, 0..bucket.len())]))
        });
        let texts = pieces(
            synth,
            turns as usize,
            LengthDistribution::Fixed(length),
            seed.wrapping_add(2_000_000 + c as u64),
        )?;
        scripts.push(Script {
            system,
            turns: texts
                .into_iter()
                .map(|text| UserTurn {
                    text: Arc::unwrap_or_clone(text),
                    max_tokens,
                    delay: None,
                })
                .collect(),
            think,
        });
    }
    Ok(scripts)
}

/// One conversation's think time, as guidellm's `FloatRangeSampler` draws it.
fn draw_think_time(think: &ThinkTime, rng: &mut Xoshiro256PlusPlus) -> Duration {
    let (low, high) = think.bounds();
    let seconds = match think.stdev.filter(|s| *s > 0.0) {
        _ if low == high => low,
        None => rand::RngExt::random_range(rng, low..=high),
        Some(stdev) => {
            let normal =
                rand_distr::Normal::new(think.mean, stdev).map_or(think.mean, |n| n.sample(rng));
            normal.clamp(low, high)
        }
    };
    Duration::try_from_secs_f64(seconds).unwrap_or(Duration::ZERO)
}

/// `n` texts of lengths drawn from `lengths`.
fn pieces(
    synth: &Synthesizer<'_>,
    n: usize,
    lengths: LengthDistribution,
    seed: u64,
) -> Result<Vec<Arc<Piece>>, ConversationError> {
    let prompts = synthetic_prompts(
        synth,
        &SyntheticSpec {
            num_prompts: n,
            prompt_tokens: lengths,
            output_tokens: None,
            prefix_buckets: Vec::new(),
            specials_in_each_length: 0,
            seed,
        },
    )?;
    Ok(prompts
        .into_inner()
        .into_iter()
        .map(|p| {
            Arc::new(Piece {
                text: p.text,
                tokens: p.input_tokens,
            })
        })
        .collect())
}

/// Pieces joined by one space, as both tools join them (`" ".join(...)`).
pub fn join(parts: &[&str]) -> String {
    let mut out = String::with_capacity(parts.iter().map(|p| p.len() + 1).sum());
    for part in parts.iter().filter(|p| !p.is_empty()) {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(part);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{Harness, ParseOptions, TokenLengths, parse_profile};

    fn workload(harness: Harness, yaml: &str) -> Workload {
        parse_profile(harness, "p.yaml", yaml, &ParseOptions::default())
            .expect("parses")
            .workload
    }

    fn words(text: &str) -> u32 {
        text.split_whitespace().count() as u32
    }

    #[test]
    fn inference_perf_sessions_start_from_their_group_prefix_and_count_tokens_exactly() {
        let w = workload(
            Harness::InferencePerf,
            "load: {type: constant, stages: [{rate: 1, duration: 1}]}\nserver: {base_url: http://x}\n\
             data:\n  type: shared_prefix\n  shared_prefix: {num_groups: 2, num_prompts_per_group: 3, \
             system_prompt_len: 7, question_len: 5, output_len: 4, enable_multi_turn_chat: true}\n",
        );
        let tokenizer = Tokenizer::builtin();
        let set = build_conversations(&w, &tokenizer, Some(10))
            .expect("builds")
            .expect("multi-turn");
        assert_eq!(set.style, Style::InferencePerfSessions);
        assert_eq!(set.scripts.len(), 6);
        let mut systems = std::collections::BTreeSet::new();
        for script in &set.scripts {
            let system = script.system.as_ref().expect("a prefix");
            assert_eq!((system.tokens, words(&system.text)), (7, 7));
            let turn = &script.turns[0];
            assert!(turn.text.text.starts_with(&system.text));
            assert_eq!((turn.text.tokens, words(&turn.text.text)), (12, 12));
            assert_eq!(turn.max_tokens, Some(4));
            systems.insert(system.text.clone());
        }
        assert_eq!(systems.len(), 2, "one system prompt per group");
    }

    #[test]
    fn inference_perf_multi_turn_chat_over_the_chat_api_is_refused_naming_the_key() {
        let w = workload(
            Harness::InferencePerf,
            "load: {type: constant, stages: [{rate: 1, duration: 1}]}\nserver: {base_url: http://x}\n\
             api: {type: chat}\ndata:\n  type: shared_prefix\n  shared_prefix: {enable_multi_turn_chat: true}\n",
        );
        let err = build_conversations(&w, &Tokenizer::builtin(), Some(1)).expect_err("refused");
        assert!(err.to_string().contains("enable_multi_turn_chat"), "{err}");
        assert!(err.to_string().contains("api.type: completion"), "{err}");
    }

    #[test]
    fn guidellm_conversations_share_one_length_per_conversation_and_one_prefix() {
        let w = workload(
            Harness::Guidellm,
            "spec:\n  backend: {kind: openai_http, target: http://x}\n  data: [{kind: synthetic_text, \
             prompt_tokens: 10, prompt_tokens_stdev: 3, prompt_tokens_min: 5, prompt_tokens_max: 15, \
             output_tokens: 6, turns: 3, prefix_buckets: [{prefix_tokens: 4, prefix_count: 2}]}]\n  \
             constraints: [{kind: max_requests, count: 12}]\n  profile: {kind: synchronous}\n",
        );
        let set = build_conversations(&w, &Tokenizer::builtin(), Some(12))
            .expect("builds")
            .expect("multi-turn");
        assert_eq!(set.style, Style::GuidellmTurns);
        assert_eq!(set.scripts.len(), 4, "12 requests of 3 turns");
        for script in &set.scripts {
            assert_eq!(script.turns.len(), 3);
            let length = script.turns[0].text.tokens;
            assert!((5..=15).contains(&length));
            for turn in &script.turns {
                assert_eq!(turn.text.tokens, length);
                assert_eq!(words(&turn.text.text), length);
                assert_eq!(turn.max_tokens, Some(6));
            }
            assert_ne!(script.turns[0].text, script.turns[1].text);
            assert_eq!(script.system.as_ref().map(|s| s.tokens), Some(4));
        }
    }

    #[test]
    fn guidellm_single_turn_chat_with_a_prefix_sends_it_as_a_system_message() {
        let profile = |format: &str| {
            workload(
                Harness::Guidellm,
                &format!(
                    "spec:\n  backend: {{kind: openai_http, target: http://x, request_format: {format}}}\n  data: \
                     [{{kind: synthetic_text, prompt_tokens: 6, prefix_buckets: [{{prefix_tokens: 3}}]}}]\n  \
                     constraints: [{{kind: max_requests, count: 4}}]\n  profile: {{kind: synchronous}}\n"
                ),
            )
        };
        let chat = build_conversations(
            &profile("/v1/chat/completions"),
            &Tokenizer::builtin(),
            Some(4),
        )
        .expect("builds")
        .expect("the prefix goes in a system message");
        assert!(chat.scripts.iter().all(|s| s.turns.len() == 1));
        assert!(
            chat.scripts
                .iter()
                .all(|s| s.system.as_ref().map(|p| p.tokens) == Some(3))
        );
        // Completions join the prefix and the prompt with a space, as the single-turn prompts already do.
        assert!(
            build_conversations(&profile("/v1/completions"), &Tokenizer::builtin(), Some(4))
                .expect("builds")
                .is_none()
        );
    }

    #[test]
    fn single_turn_data_builds_no_conversations() {
        let mut w = workload(
            Harness::Guidellm,
            "spec:\n  backend: {kind: openai_http, target: http://x}\n  data: [{kind: synthetic_text, \
             prompt_tokens: 10}]\n  constraints: [{kind: max_requests, count: 2}]\n  profile: {kind: synchronous}\n",
        );
        assert!(
            build_conversations(&w, &Tokenizer::builtin(), None)
                .expect("builds")
                .is_none()
        );
        w.data = DataSpec::Random(crate::workload::RandomData {
            input: TokenLengths::fixed(3),
            output: TokenLengths::fixed(3),
            prefix_len: 0,
            text: crate::workload::PromptText::RandomTokens,
            rerank: None,
            images: None,
        });
        assert!(
            build_conversations(&w, &Tokenizer::builtin(), None)
                .expect("builds")
                .is_none()
        );
    }

    #[test]
    fn pieces_are_joined_by_single_spaces_skipping_empty_ones() {
        assert_eq!(join(&["a b", "", "c"]), "a b c");
        assert_eq!(join(&[]), "");
    }
}

/// inference-perf `conversation_replay`: the plan's draws and the sampler against upstream's formulas.
#[cfg(test)]
mod replay_tests {
    use super::*;
    use crate::workload::{Harness, ParseOptions, Spread, parse_profile};

    fn lengths(shape: LengthShape) -> TokenLengths {
        TokenLengths {
            shape,
            total_count: None,
        }
    }

    fn draws(shape: LengthShape, n: usize) -> Vec<u64> {
        let sampler = UpstreamSampler::new("test", &lengths(shape)).expect("valid");
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(11);
        (0..n).map(|_| sampler.sample(&mut rng)).collect()
    }

    fn share(values: &[u64], f: impl Fn(u64) -> bool) -> f64 {
        values.iter().filter(|v| f(**v)).count() as f64 / values.len() as f64
    }

    /// lognormal(mean 50, std_dev 40), as interactive-chat's input lengths: upstream moment-matches the
    /// lognormal itself (σ² = ln(1 + (40/50)²) = 0.494696, μ = ln 50 − σ²/2 = 3.664675) and clips at min 10, so
    /// P(draw = 10) = P(X < 10.5) = Φ((ln 10.5 − μ)/σ) = Φ(−1.867216) = 0.030936. (inference-perf's other
    /// sampler, `generate_distribution`, shifts by `min` and would give P(X' < 0.5) ≈ 6e−7.) With 200 000 draws
    /// the share's standard error is 0.00039; the bound is 5 of them.
    #[test]
    fn a_lognormal_is_moment_matched_unshifted_and_clipped_at_min() {
        let d = draws(
            LengthShape::LogNormal {
                mean: 50.0,
                spread: Spread::StdDev(40.0),
                min: 10,
                max: 1000,
            },
            200_000,
        );
        let at_min = share(&d, |v| v == 10);
        assert!((at_min - 0.030936).abs() < 0.002, "{at_min}");
        assert!(d.iter().all(|v| (10..=1000).contains(v)));
        // Unclipped, the mean is the lognormal's own: 50 (standard error 40/√200000 = 0.09).
        let wide = draws(
            LengthShape::LogNormal {
                mean: 50.0,
                spread: Spread::StdDev(40.0),
                min: 0,
                max: 1_000_000,
            },
            200_000,
        );
        let mean = wide.iter().sum::<u64>() as f64 / wide.len() as f64;
        assert!((mean - 50.0).abs() < 0.5, "{mean}");
    }

    /// `rng.uniform(min, max + 1)`, clipped to [0, 3] and rounded half to even: 0 takes [0, 0.5), 1 and 2 a
    /// unit each, 3 takes [2.5, 4) — shares 1/8, 1/4, 1/4, 3/8 (standard error ≤ 0.0016 at 100 000 draws).
    #[test]
    fn a_uniform_is_drawn_from_min_to_max_plus_one_then_clipped() {
        let d = draws(LengthShape::Uniform { min: 0, max: 3 }, 100_000);
        for (value, expected) in [(0, 0.125), (1, 0.25), (2, 0.25), (3, 0.375)] {
            let got = share(&d, |v| v == value);
            assert!((got - expected).abs() < 0.008, "{value}: {got}");
        }
    }

    #[test]
    fn degenerate_distributions_give_their_value() {
        // The bundled profiles pin lengths with lognormal(std_dev 1, min = max) and no think time with
        // normal(0, 0, min 0, max 0).
        let pinned = draws(
            LengthShape::LogNormal {
                mean: 49152.0,
                spread: Spread::StdDev(1.0),
                min: 49152,
                max: 49152,
            },
            100,
        );
        assert!(pinned.iter().all(|v| *v == 49152));
        let zero = draws(
            LengthShape::Normal {
                mean: 0.0,
                spread: Spread::StdDev(0.0),
                min: 0,
                max: 0,
            },
            100,
        );
        assert!(zero.iter().all(|v| *v == 0));
        // A lognormal of std_dev 0 is its mean (upstream's degenerate case), here rounded 6.5 → 6 (half to even).
        let constant = draws(
            LengthShape::LogNormal {
                mean: 6.5,
                spread: Spread::StdDev(0.0),
                min: 1,
                max: 100,
            },
            10,
        );
        assert!(constant.iter().all(|v| *v == 6));
        assert_eq!(draws(LengthShape::Fixed(7), 3), vec![7, 7, 7]);
        let err = UpstreamSampler::new(
            "x",
            &lengths(LengthShape::LogNormal {
                mean: 0.0,
                spread: Spread::StdDev(1.0),
                min: 0,
                max: 1,
            }),
        )
        .expect_err("refused");
        assert!(err.to_string().contains("mean > 0"), "{err}");
    }

    fn workload(data: &str) -> Workload {
        parse_profile(
            Harness::InferencePerf,
            "p.yaml",
            &format!(
                "server: {{base_url: http://x}}\napi: {{type: completion}}\nload: {{type: concurrent, stages: \
                 [{{concurrency_level: 1, num_requests: 3}}]}}\ndata:\n  type: conversation_replay\n  \
                 conversation_replay:\n{data}"
            ),
            &ParseOptions::default(),
        )
        .expect("parses")
        .workload
    }

    fn plan_of(w: &Workload) -> Arc<ReplayPlan> {
        let set = build_conversations(w, &Tokenizer::builtin(), None)
            .expect("builds")
            .expect("multi-turn");
        match set.style {
            Style::InferencePerfReplay(plan) => plan,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn unset_distributions_take_upstreams_fallbacks() {
        let p = plan_of(&workload("    num_conversations: 3\n"));
        assert_eq!(p.seed, 42);
        assert_eq!(p.shared_tokens, 8359);
        assert_eq!(p.max_model_len, REPLAY_DEFAULT_MAX_MODEL_LEN);
        assert_eq!(p.conversations.len(), 3);
        for c in &p.conversations {
            assert_eq!(c.dynamic_tokens, 0);
            assert_eq!(c.turns.len(), 10);
            assert!(c.turns.iter().all(|t| *t
                == ReplayTurn {
                    input_tokens: 512,
                    max_tokens: 256,
                    think_s: 0
                }));
        }
    }

    #[test]
    fn the_plan_is_drawn_from_the_seed_and_its_texts_are_exact_and_repeatable() {
        let yaml = "    seed: 5\n    num_conversations: 4\n    shared_system_prompt_len: 6\n    \
                    turns_per_conversation: {type: uniform, min: 1, max: 5}\n    input_tokens_per_turn: {type: \
                    normal, mean: 20, std_dev: 5, min: 10, max: 30}\n    tool_call_latency_sec: {type: fixed, \
                    mean: 2}\n    max_model_len: 4096\n";
        let a = plan_of(&workload(yaml));
        let b = plan_of(&workload(yaml));
        assert_eq!(a, b, "same seed, same plan");
        assert_ne!(a, plan_of(&workload(&yaml.replace("seed: 5", "seed: 6"))));
        assert_eq!(a.max_model_len, 4096);
        for c in &a.conversations {
            assert!((1..=5).contains(&c.turns.len()));
            for t in &c.turns {
                assert!((10..=30).contains(&t.input_tokens));
                assert_eq!(t.think_s, 2);
            }
        }
        let text = a.text(
            ReplayText::Turn {
                conversation: 1,
                turn: 0,
            },
            25,
        );
        assert_eq!(
            Tokenizer::builtin().encode(&text).expect("encodes").len(),
            25
        );
        assert_eq!(
            text,
            b.text(
                ReplayText::Turn {
                    conversation: 1,
                    turn: 0
                },
                25
            )
        );
        assert!(
            text.starts_with(&a.text(
                ReplayText::Turn {
                    conversation: 1,
                    turn: 0
                },
                7
            )),
            "a shorter text is a prefix of a longer one"
        );
    }

    #[test]
    fn a_conversation_of_no_turns_and_the_chat_api_are_refused() {
        let w = workload("    turns_per_conversation: {type: fixed, mean: 0, min: 0}\n");
        let err = build_conversations(&w, &Tokenizer::builtin(), None).expect_err("refused");
        assert!(err.to_string().contains("turns_per_conversation"), "{err}");
        let err = parse_profile(
            Harness::InferencePerf,
            "p.yaml",
            "server: {base_url: http://x}\napi: {type: chat}\nload: {type: concurrent, stages: \
             [{concurrency_level: 1, num_requests: 3}]}\ndata:\n  type: conversation_replay\n  \
             conversation_replay: {}\n",
            &ParseOptions::default(),
        )
        .expect_err("refused");
        assert!(err.to_string().contains("completion"), "{err}");
    }
}
