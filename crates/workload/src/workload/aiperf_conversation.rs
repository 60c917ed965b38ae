//! AIPerf's conversation and prefix-prompt flags, read as its `ConversationConfig` and `PrefixPromptConfig`
//! read them (`ai-dynamo/aiperf` db4f6397, `aiperf/common/config/conversation_config.py`, `prompt_config.py`,
//! defaults in `config_defaults.py`).
//!
//! - `--conversation-turn-mean` (`--session-turns-mean`, an int ≥ 1, default 1) and `--conversation-turn-stddev`
//!   (`--session-turns-stddev`, an int ≥ 0, default 0): the turns of each synthetic conversation, drawn once per
//!   conversation by `sample_positive_normal_integer`.
//! - `--conversation-turn-delay-mean`/`-stddev`/`-ratio` (`--session-turn-delay-*`, `--session-delay-ratio`;
//!   floats ≥ 0, defaults 0, 0, 1): AIPerf 0.13's synthetic composer draws a delay for every turn but the first
//!   when the mean is above 0 (`synthetic.py` `_create_turn`: `sample_positive_normal_integer(int(mean),
//!   int(stddev)) * ratio` ms), and its rate loop waits it after the previous turn returned before it queues
//!   the turn (`timing/strategies/request_rate.py` `handle_credit_return`). A stddev without a mean draws nothing.
//! - `--prompt-prefix-pool-size` (`--prefix-prompt-pool-size`, `--num-prefix-prompts`) and
//!   `--prompt-prefix-length` (`--prefix-prompt-length`), ints ≥ 0: a pool of that many prompts of that many
//!   tokens; the first turn of every synthetic conversation starts with one picked at random
//!   (`composer/synthetic.py` `_generate_text_payloads`, `generator/prompt.py`). A length without a pool makes
//!   AIPerf fail on its first prompt (`get_random_prefix_prompt` raises on an empty pool), so it is refused; a
//!   pool of empty prefixes (length 0) is never used.

use super::aiperf::{lengths, non_negative, positive};
use super::error::{WarningKind, WorkloadError};
use super::limits::{self, Limit};
use super::model::{AiperfPrefixPool, AiperfTurnDelay, TokenLengths};
use super::reader::{At, Ctx, MapReader};
use super::vllm_bench::number;

/// The conversation and prefix flags of one profile.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct ConversationFlags {
    /// Turns per conversation (AIPerf's positive normal, or a fixed count).
    pub turns: TokenLengths,
    /// Whether a conversation can have more than one turn.
    pub multi_turn: bool,
    /// `--conversation-turn-mean` as given (1 without it): AIPerf's user-centric phase checks it.
    pub turn_mean: u64,
    pub prefix_pool: Option<AiperfPrefixPool>,
    /// `--conversation-turn-delay-*`, when the mean is above 0.
    pub turn_delay: Option<AiperfTurnDelay>,
    /// The first of these flags the profile set that changes a synthetic dataset, with its line: a trace's
    /// records decide their own turns and prompts, so these are ignored for one (with a warning naming it).
    pub first: Option<(String, u32)>,
}

impl ConversationFlags {
    /// Whether AIPerf's synthetic data is more than single prompts: several turns, or a prefix on each first turn.
    pub fn needs_conversations(&self) -> bool {
        self.multi_turn || self.prefix_pool.is_some()
    }
}

pub(super) fn read(
    ctx: &mut Ctx,
    m: &mut MapReader<'_>,
) -> Result<ConversationFlags, WorkloadError> {
    let mut first: Option<(String, u32)> = None;
    let mut note = |f: &At<'_>| {
        if first.is_none() {
            first = Some((f.path.clone(), f.line));
        }
    };
    let mean = match m.get_any(&["conversation-turn-mean", "session-turns-mean"]) {
        Some(f) => {
            note(&f);
            positive(ctx, &f)?
        }
        None => 1,
    };
    let stddev = match m.get_any(&["conversation-turn-stddev", "session-turns-stddev"]) {
        Some(f) => {
            note(&f);
            non_negative(ctx, &f)?
        }
        None => 0,
    };
    let mut delay = [0.0, 0.0, 1.0];
    for (i, keys) in [
        &["conversation-turn-delay-mean", "session-turn-delay-mean"][..],
        &[
            "conversation-turn-delay-stddev",
            "session-turn-delay-stddev",
        ][..],
        &["conversation-turn-delay-ratio", "session-delay-ratio"][..],
    ]
    .into_iter()
    .enumerate()
    {
        if let Some(f) = m.get_any(keys) {
            let v = number(ctx, &f)?;
            if !(v.is_finite() && v >= 0.0) {
                return Err(f.invalid(ctx, format!("must be at least 0, found {v}")));
            }
            if i < 2 {
                note(&f);
            }
            delay[i] = v;
        }
    }
    let [mean_ms, stddev_ms, ratio] = delay;
    // `_create_turn` draws a delay only when `int(mean)` … `self._turn_delay_mean > 0` (the float mean).
    let turn_delay = (mean_ms > 0.0).then_some(AiperfTurnDelay {
        mean_ms,
        stddev_ms,
        ratio,
    });
    let pool_field = m.get_any(&[
        "prompt-prefix-pool-size",
        "prefix-prompt-pool-size",
        "num-prefix-prompts",
    ]);
    let pool_size = match &pool_field {
        Some(f) => {
            let n = non_negative(ctx, f)?;
            limits::check(ctx, f, Limit::Samples, n as f64)?;
            n
        }
        None => 0,
    };
    let length_field = m.get_any(&["prompt-prefix-length", "prefix-prompt-length"]);
    let prefix_tokens = match &length_field {
        Some(f) => {
            let n = non_negative(ctx, f)?;
            limits::check(ctx, f, Limit::Tokens, n as f64)?;
            n
        }
        None => 0,
    };
    let prefix_pool = match (&pool_field, &length_field) {
        (Some(pool), Some(_)) if pool_size > 0 && prefix_tokens > 0 => {
            note(pool);
            Some(AiperfPrefixPool {
                size: pool_size,
                tokens: prefix_tokens,
            })
        }
        (_, Some(length)) if prefix_tokens > 0 => {
            return Err(length.invalid(
                ctx,
                "needs --prompt-prefix-pool-size of at least 1 (AIPerf fails on its first prompt: its prefix pool \
                 is empty)",
            ));
        }
        (Some(pool), _) if pool_size > 0 => {
            ctx.warn(
                &pool.path,
                pool.line,
                WarningKind::Ignored,
                "a prefix pool without --prompt-prefix-length holds empty prefixes, which AIPerf never adds",
            );
            None
        }
        _ => None,
    };
    Ok(ConversationFlags {
        turns: lengths(mean, Some(stddev as f64)),
        multi_turn: mean > 1 || stddev > 0,
        turn_mean: mean,
        prefix_pool,
        turn_delay,
        first,
    })
}

#[cfg(test)]
mod tests {

    use crate::workload::{
        AiperfConversations, AiperfPace, AiperfPrefixPool, AiperfSamplingStrategy, AiperfTurnDelay,
        Arrival, DataSpec, Harness, LengthShape, ParseOptions, StageLimit, TokenLengths, Workload,
        WorkloadError, parse_profile,
    };

    fn parse(text: &str) -> Result<(Workload, Vec<String>), WorkloadError> {
        parse_profile(Harness::Aiperf, "p.yaml", text, &ParseOptions::default()).map(|p| {
            let warnings = p
                .warnings
                .iter()
                .map(|w| format!("{}: {}", w.key, w.message))
                .collect();
            (p.workload, warnings)
        })
    }

    #[test]
    fn turn_flags_make_conversations_whose_turns_and_lengths_are_drawn_as_aiperf_draws_them() {
        let (w, warnings) = parse(
            "model: m\nnum-sessions: 4\nsession-turns-mean: 3\nconversation-turn-stddev: 1\nisl: 20\n\
             isl-stddev: 2\nosl: 5\nrequest-count: 7\n",
        )
        .expect("parses");
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(
            w.data,
            DataSpec::AiperfConversations(AiperfConversations {
                conversations: 4,
                turns: TokenLengths {
                    shape: LengthShape::PositiveNormal {
                        mean: 3.0,
                        std_dev: 1.0
                    },
                    total_count: None,
                },
                prompt: TokenLengths {
                    shape: LengthShape::PositiveNormal {
                        mean: 20.0,
                        std_dev: 2.0
                    },
                    total_count: None,
                },
                output: Some(TokenLengths::fixed(5)),
                prefix_pool: None,
                turn_delay: None,
                sampling: AiperfSamplingStrategy::Sequential,
            })
        );
        // AIPerf 0.13: the request count counts turns, and `--num-sessions` is the session count; both bound the
        // profiling phase of AIPerf's rate loop (a burst of `--concurrency` 1 session slots).
        assert_eq!(w.stages[0].limit, StageLimit::requests(7));
        assert_eq!(
            w.stages[0].arrival,
            Arrival::AiperfRate {
                pace: AiperfPace::Burst,
                concurrency: Some(1),
                grace: None,
                warmup_requests: 0,
                sessions: Some(4),
                credits: crate::workload::AiperfCredits::default(),
            }
        );
    }

    #[test]
    fn turn_delays_are_read_as_aiperf_0_13_reads_them() {
        let delay = |text: &str| match parse(text).expect(text).0.data {
            DataSpec::AiperfConversations(a) => a.turn_delay,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            delay(
                "model: m\nconversation-turn-mean: 2\nsession-turn-delay-mean: 250\n\
                 conversation-turn-delay-stddev: 20\nconversation-turn-delay-ratio: 2\n"
            ),
            Some(AiperfTurnDelay {
                mean_ms: 250.0,
                stddev_ms: 20.0,
                ratio: 2.0
            })
        );
        // A spread without a mean draws no delay: a real AIPerf 0.13 run with `--conversation-turn-delay-stddev
        // 500` alone sent each session's turns ~10 ms apart against `llmbench sim`.
        assert_eq!(
            delay("model: m\nconversation-turn-mean: 2\nconversation-turn-delay-stddev: 500\n"),
            None
        );
    }

    #[test]
    fn one_turn_without_a_prefix_pool_stays_single_prompts() {
        let (w, _) = parse("model: m\nconversation-turn-mean: 1\nconversation-turn-stddev: 0\n")
            .expect("parses");
        assert!(matches!(w.data, DataSpec::SyntheticText(_)), "{:?}", w.data);
    }

    #[test]
    fn a_prefix_pool_alone_makes_single_turn_conversations_with_a_prefix() {
        let (w, _) =
            parse("model: m\nnum-prefix-prompts: 3\nprefix-prompt-length: 7\n").expect("parses");
        let DataSpec::AiperfConversations(a) = &w.data else {
            panic!("{:?}", w.data);
        };
        assert_eq!(a.turns, TokenLengths::fixed(1));
        assert_eq!(a.prefix_pool, Some(AiperfPrefixPool { size: 3, tokens: 7 }));
        assert_eq!(a.conversations, 100, "AIPerf's default --conversation-num");
    }

    #[test]
    fn prefix_and_turn_flags_are_checked_as_aiperf_checks_them() {
        for (text, says) in [
            (
                "model: m\nprompt-prefix-length: 5\n",
                "p.yaml:2: `prompt-prefix-length`: needs --prompt-prefix-pool-size",
            ),
            (
                "model: m\nprompt-prefix-pool-size: 0\nprompt-prefix-length: 5\n",
                "p.yaml:3: `prompt-prefix-length`",
            ),
            (
                "model: m\nconversation-turn-mean: 0\n",
                "p.yaml:2: `conversation-turn-mean`",
            ),
            (
                "model: m\nconversation-turn-stddev: 1.5\n",
                "p.yaml:2: `conversation-turn-stddev`",
            ),
            (
                "model: m\nconversation-turn-delay-ratio: -1\n",
                "p.yaml:2: `conversation-turn-delay-ratio`",
            ),
        ] {
            let err = parse(text).expect_err(text).to_string();
            assert!(err.contains(says), "{text}: {err}");
        }
    }

    #[test]
    fn flags_that_change_nothing_in_aiperf_are_warned_about() {
        // A pool of empty prefixes: AIPerf adds none.
        let (w, warnings) = parse("model: m\nprompt-prefix-pool-size: 4\n").expect("parses");
        assert!(matches!(w.data, DataSpec::SyntheticText(_)));
        assert!(
            warnings
                .iter()
                .any(|w| w.starts_with("prompt-prefix-pool-size")),
            "{warnings:?}"
        );
        // A zero mean delay draws nothing (`_create_turn` draws only when the mean is above 0): no warning.
        let (_, warnings) =
            parse("model: m\nconversation-turn-mean: 2\nconversation-turn-delay-stddev: 0\n")
                .expect("parses");
        assert!(warnings.is_empty(), "{warnings:?}");
        // A trace decides its own turns and prompts.
        let (_, warnings) = parse(
            "model: m\ninput-file: t.jsonl\ncustom-dataset-type: mooncake_trace\nconversation-turn-mean: 3\n",
        )
        .expect("parses");
        assert!(
            warnings
                .iter()
                .any(|w| w.starts_with("conversation-turn-mean") && w.contains("mooncake")),
            "{warnings:?}"
        );
    }
}
