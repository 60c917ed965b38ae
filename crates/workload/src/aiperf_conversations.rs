//! AIPerf's synthetic conversations, built before the clock starts (a child of `conversations`).
//!
//! Upstream (`ai-dynamo/aiperf` db4f6397, `aiperf/dataset/composer/synthetic.py` `create_dataset`/`_create_turn`,
//! `aiperf/dataset/generator/prompt.py`): `--conversation-num` conversations; each draws its number of turns once
//! with `sample_positive_normal_integer(turn_mean, turn_stddev)`; each turn draws its own prompt length
//! (`PromptGenerator.generate(mean=isl, stddev=isl_stddev)`) and, when `--osl` is given, its own `max_tokens`
//! (`_set_max_tokens`). With a prefix pool (`--prompt-prefix-pool-size` prompts of `--prompt-prefix-length`
//! tokens, made once), the first turn of every conversation is `f"{prefix} {content}"` with the prefix picked at
//! random from the pool; later turns have none.
//!
//! What is sent is in `engine::aiperf_sessions` and `engine::conversation`: AIPerf 0.13's sessions, every turn a
//! credit of the rate loop, each carrying the earlier turns and the live answers.
//!
//! The turn counts and turn delays are AIPerf 0.13's own draws (`rng.derive("composer.conversation.turn_count")`,
//! `"composer.conversation.turn_delay"`, CPython's `gauss`); the prompt lengths and prefix picks use llmbench's
//! seeded generator (AIPerf draws them from generators interleaved with its corpus sampling, which cannot be
//! reproduced; the distributions are the same).

use std::sync::Arc;
use std::time::Duration;

use rand::SeedableRng as _;
use rand::rngs::Xoshiro256PlusPlus;

use super::{ConversationError, Piece, Script, UserTurn, join, pieces};
use crate::prompts::{MAX_PROMPTS, distribution, to_u32};
use crate::workload::{AiperfConversations, LengthShape};
use llmbench_data::{LengthDistribution, Synthesizer, SyntheticSpec, synthetic_prompts};
use llmbench_text::py_random::{PyRandom, aiperf_derived_seed};

/// Every conversation's user turns, in AIPerf's order of creation.
pub(super) fn aiperf_conversations(
    synth: &Synthesizer<'_>,
    spec: &AiperfConversations,
    seed: u64,
) -> Result<Vec<Script>, ConversationError> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    // AIPerf 0.13's own generators, `rng.derive(...)` of `--random-seed`: the turn counts and delays are what
    // AIPerf draws for the same seed.
    let mut turn_rng = PyRandom::seed(aiperf_derived_seed(
        seed,
        "composer.conversation.turn_count",
    ));
    let mut delay_rng = PyRandom::seed(aiperf_derived_seed(
        seed,
        "composer.conversation.turn_delay",
    ));
    let (turn_mean, turn_stddev) = match spec.turns.shape {
        LengthShape::PositiveNormal { mean, std_dev } => (mean, std_dev),
        LengthShape::Fixed(n) => (n as f64, 0.0),
        _ => (1.0, 0.0),
    };
    let mut counts = Vec::with_capacity(spec.conversations.min(MAX_PROMPTS) as usize);
    let mut total: u64 = 0;
    for _ in 0..spec.conversations {
        let turns = turn_rng.aiperf_positive_normal_integer(turn_mean, turn_stddev);
        total += turns;
        if total > MAX_PROMPTS {
            return Err(ConversationError::TooMany {
                what: "the turns of all conversations (--conversation-num × turns)",
                value: total,
                max: MAX_PROMPTS,
            });
        }
        // `_create_turn` draws each later turn's delay as the conversation is made, turn by turn.
        let delays: Vec<Option<Duration>> = (0..turns)
            .map(|t| match spec.turn_delay {
                Some(delay) if t > 0 && delay.mean_ms > 0.0 => {
                    let ms = delay_rng.aiperf_positive_normal_integer(
                        delay.mean_ms.trunc(),
                        delay.stddev_ms.trunc(),
                    );
                    Some(Duration::from_secs_f64(ms as f64 * delay.ratio / 1000.0))
                }
                _ => None,
            })
            .collect();
        counts.push(delays);
    }
    // One prompt per turn, each with its own length and `max_tokens` drawn, as AIPerf draws them per turn.
    let mut prompts = synthetic_prompts(
        synth,
        &SyntheticSpec {
            num_prompts: total as usize,
            prompt_tokens: distribution("isl", &spec.prompt)?,
            output_tokens: spec
                .output
                .as_ref()
                .map(|o| distribution("osl", o))
                .transpose()?,
            prefix_buckets: Vec::new(),
            specials_in_each_length: 0,
            seed,
        },
    )?
    .into_inner()
    .into_iter();
    let pool: Vec<Arc<Piece>> = match spec.prefix_pool {
        Some(pool) if pool.tokens > 0 => pieces(
            synth,
            to_u32("prompt-prefix-pool-size", pool.size)? as usize,
            LengthDistribution::Fixed(to_u32("prompt-prefix-length", pool.tokens)?),
            seed.wrapping_add(1_000),
        )?,
        _ => Vec::new(),
    };
    let mut scripts = Vec::with_capacity(counts.len());
    for delays in counts {
        let mut user_turns = Vec::with_capacity(delays.len());
        for (t, delay) in delays.into_iter().enumerate() {
            let Some(prompt) = prompts.next() else {
                break;
            };
            let mut text = Piece {
                text: prompt.text,
                tokens: prompt.input_tokens,
            };
            if t == 0 && !pool.is_empty() {
                // `get_random_prefix_prompt`: `random.choice` over the pool.
                let prefix = &pool[rand::RngExt::random_range(&mut rng, 0..pool.len())];
                text = Piece {
                    text: join(&[&prefix.text, &text.text]),
                    tokens: prefix.tokens.saturating_add(text.tokens),
                };
            }
            user_turns.push(UserTurn {
                text,
                max_tokens: prompt.max_tokens,
                delay,
            });
        }
        scripts.push(Script {
            system: None,
            turns: user_turns,
            think: None,
        });
    }
    Ok(scripts)
}

#[cfg(test)]
mod tests {
    use crate::conversations::{Style, build_conversations};
    use crate::workload::{Harness, ParseOptions, parse_profile};
    use llmbench_text::tokenizer::Tokenizer;

    fn words(text: &str) -> u32 {
        text.split_whitespace().count() as u32
    }

    fn conversations(flags: &str) -> crate::conversations::ConversationSet {
        let w = parse_profile(
            Harness::Aiperf,
            "p.yaml",
            &format!("model: m\nrandom-seed: 9\n{flags}"),
            &ParseOptions::default(),
        )
        .expect("parses")
        .workload;
        build_conversations(&w, &Tokenizer::builtin(), None)
            .expect("builds")
            .expect("conversations")
    }

    #[test]
    fn each_conversation_has_its_drawn_turns_and_only_its_first_turn_a_prefix_from_the_pool() {
        let set = conversations(
            "conversation-num: 5\nconversation-turn-mean: 3\nisl: 6\nosl: 4\nprompt-prefix-pool-size: 2\n\
             prompt-prefix-length: 3\n",
        );
        // AIPerf 0.13's synthetic data goes to its sessions in order (`SequentialSampler`).
        assert_eq!(
            set.style,
            Style::AiperfConversations {
                sampling: crate::conversations::AiperfSampling::Sequential,
                session_header: None,
            }
        );
        assert_eq!(set.scripts.len(), 5);
        let mut prefixes = Vec::new();
        for script in &set.scripts {
            assert!(script.system.is_none() && script.think.is_none());
            // A stddev of 0 draws the mean itself: 3 turns each.
            assert_eq!(script.turns.len(), 3);
            // `f"{prefix} {content}"`: 3 + 6 tokens on the first turn, 6 on the others.
            assert_eq!(script.turns[0].text.tokens, 9);
            assert_eq!(words(&script.turns[0].text.text), 9);
            for turn in &script.turns[1..] {
                assert_eq!(turn.text.tokens, 6);
                assert_eq!(words(&turn.text.text), 6);
            }
            assert!(script.turns.iter().all(|t| t.max_tokens == Some(4)));
            let prefix: Vec<&str> = script.turns[0]
                .text
                .text
                .split_whitespace()
                .take(3)
                .collect();
            prefixes.push(prefix.join(" "));
        }
        prefixes.sort();
        prefixes.dedup();
        assert!(prefixes.len() <= 2, "a pool of two: {prefixes:?}");
        // Every turn has its own prompt.
        let mut texts: Vec<&str> = set
            .scripts
            .iter()
            .flat_map(|s| s.turns[1..].iter().map(|t| t.text.text.as_str()))
            .collect();
        texts.sort();
        texts.dedup();
        assert_eq!(texts.len(), 10);
    }

    #[test]
    fn a_turn_stddev_draws_each_conversations_turns_from_aiperfs_positive_normal() {
        let set = conversations(
            "conversation-num: 200\nconversation-turn-mean: 4\nconversation-turn-stddev: 2\nisl: 2\n",
        );
        let counts: Vec<usize> = set.scripts.iter().map(|s| s.turns.len()).collect();
        // `ceil` of a normal redrawn below 0: never 0 turns, and both sides of the mean occur.
        assert!(counts.iter().all(|&n| n >= 1));
        assert!(
            counts.iter().any(|&n| n < 4) && counts.iter().any(|&n| n > 4),
            "{counts:?}"
        );
        let mean = counts.iter().sum::<usize>() as f64 / counts.len() as f64;
        // E[ceil(X)] for X ~ N(4, 2) truncated at 0 is about 4.5.
        assert!((3.9..5.1).contains(&mean), "{mean}");
        // No `--osl`: no `max_tokens`.
        assert!(
            set.scripts
                .iter()
                .all(|s| s.turns.iter().all(|t| t.max_tokens.is_none()))
        );
    }
}
