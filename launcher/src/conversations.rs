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

use rand::SeedableRng as _;
use rand::rngs::Xoshiro256PlusPlus;
use rand::seq::SliceRandom as _;
use rand_distr::Distribution as _;
use rand_distr::weighted::WeightedIndex;

use crate::data::{DataError, LengthDistribution, Synthesizer, SyntheticSpec, synthetic_prompts};
use crate::prompts::{DEFAULT_PROMPTS, MAX_PROMPTS, PromptError, distribution, fixed, to_u32};
use crate::tokenizer::Tokenizer;
use crate::workload::{ApiKind, DataSpec, SharedPrefix, SyntheticText, Workload};

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
}

/// The user's side of one conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Script {
    /// guidellm: the prefix, sent as the system message of the first turn; inference-perf: the shared prefix, the
    /// session's context before its first round. Shared between the conversations of one prefix group.
    pub system: Option<Arc<Piece>>,
    /// guidellm: the turns, in order. inference-perf: one prompt, sent again in every round.
    pub turns: Vec<UserTurn>,
}

/// How a tool runs its conversations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
                || (workload.api.kind == ApiKind::Chat && !text.prefix_buckets.is_empty()) =>
        {
            let synth = Synthesizer::new(tokenizer)?;
            Ok(Some(ConversationSet {
                style: Style::GuidellmTurns,
                scripts: guidellm_conversations(&synth, text, workload.seed, expected_requests)?,
            }))
        }
        _ => Ok(None),
    }
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
                }],
                system: Some(system),
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

    let mut scripts = Vec::with_capacity(count);
    for c in 0..count {
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
                })
                .collect(),
        });
    }
    Ok(scripts)
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
