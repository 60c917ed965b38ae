//! AIPerf's `--input-file` with `--custom-dataset-type single_turn`, `multi_turn` or `random_pool`
//! (`ai-dynamo/aiperf` db4f6397: `aiperf/dataset/composer/custom.py`, `dataset_manager.py`,
//! `common/config/user_config.py`). The file itself is read when the run starts (`conversations::aiperf_dataset`).
//!
//! - These files run AIPerf's request-rate loop like synthetic data (a fixed schedule is automatic only for a
//!   `mooncake_trace` with timestamps), so `--request-count` (default 10), `--concurrency`, `--request-rate`,
//!   `--benchmark-duration` and `--warmup-request-count` apply, counting credits: each credit sends one conversation
//!   picked with `random.Random(--random-seed).choice`.
//! - `--osl`/`--osl-stddev` set every turn's `max_tokens` (`CustomDatasetComposer._finalize_turn`).
//! - `--conversation-num` is `random_pool`'s number of conversations; the other layouts have one per line or
//!   session.
//! - Ignored by AIPerf for these files, with a warning: `--isl` (the file's texts are the prompts), the turn and
//!   prefix-pool flags (only the synthetic composer reads them), `--conversation-num` for `single_turn` and
//!   `multi_turn`.
//! - Refused: `--fixed-schedule` and its options (a fixed schedule over these files' timestamps is not built).

use super::aiperf::lengths;
use super::aiperf_conversation::ConversationFlags;
use super::error::{WarningKind, WorkloadError};
use super::model::{AiperfFile, AiperfFileKind, AiperfSamplingStrategy, DataSpec, Workload};
use super::reader::{At, Ctx};
use super::vllm_bench::text;

/// The custom layout `kind` names, `None` for `mooncake_trace`; an unknown name is refused by the caller.
pub(super) fn file_kind(ctx: &Ctx, kind: &At<'_>) -> Result<Option<AiperfFileKind>, WorkloadError> {
    Ok(match text(ctx, kind)?.as_str() {
        "single_turn" => Some(AiperfFileKind::SingleTurn),
        "multi_turn" => Some(AiperfFileKind::MultiTurn),
        "random_pool" => Some(AiperfFileKind::RandomPool),
        _ => None,
    })
}

/// What the custom dataset path reads of the profile.
pub(super) struct Flags<'a, 'n> {
    pub file: &'a At<'n>,
    pub kind: &'a At<'n>,
    pub isl: Option<&'a At<'n>>,
    pub osl: Option<u64>,
    pub osl_stddev: Option<f64>,
    /// `--dataset-sampling-strategy`, when given.
    pub sampling: Option<AiperfSamplingStrategy>,
    pub entries: u64,
    pub entries_field: Option<&'a At<'n>>,
    pub conversation: &'a ConversationFlags,
    pub schedule_flag: Option<(String, u32)>,
}

/// Sets `w.data` to the custom dataset `flags` describe (the caller sets the stage, as for synthetic data).
pub(super) fn custom_dataset(
    ctx: &mut Ctx,
    w: &mut Workload,
    flags: Flags<'_, '_>,
) -> Result<(), WorkloadError> {
    let Some(kind) = file_kind(ctx, flags.kind)? else {
        return Err(flags
            .kind
            .invalid(ctx, "not a single_turn, multi_turn or random_pool dataset"));
    };
    let kind_name = text(ctx, flags.kind)?;
    if let Some((key, line)) = flags.schedule_flag {
        return Err(ctx.unsupported(
            &key,
            line,
            format!(
                "a fixed schedule over a {kind_name} file's timestamps (not implemented; without it AIPerf runs the \
                 file with its request-rate loop, as llmbench does)"
            ),
        ));
    }
    if let Some(f) = flags.isl {
        ctx.warn(
            &f.path,
            f.line,
            WarningKind::Ignored,
            format!(
                "the {kind_name} file's texts are the prompts (AIPerf does not use --isl for them)"
            ),
        );
    }
    if let Some((key, line)) = &flags.conversation.first {
        ctx.warn(
            key,
            *line,
            WarningKind::Ignored,
            format!("AIPerf's turn and prefix-pool flags apply to synthetic data only, not to a {kind_name} file"),
        );
    }
    if kind != AiperfFileKind::RandomPool
        && let Some(f) = flags.entries_field
    {
        ctx.warn(
            &f.path,
            f.line,
            WarningKind::Ignored,
            format!("a {kind_name} file has one conversation per line or session (only random_pool samples this many)"),
        );
    }
    w.data = DataSpec::AiperfFile(AiperfFile {
        path: text(ctx, flags.file)?,
        kind,
        conversations: flags.entries,
        output: flags.osl.map(|mean| lengths(mean, flags.osl_stddev)),
        // `_resolve_sampling`: the loader's preference (shuffle for random_pool) unless another than sequential
        // was asked for.
        sampling: match (flags.sampling, kind) {
            (None | Some(AiperfSamplingStrategy::Sequential), AiperfFileKind::RandomPool) => {
                AiperfSamplingStrategy::Shuffle
            }
            (Some(asked), _) => asked,
            (None, _) => AiperfSamplingStrategy::Sequential,
        },
    });
    Ok(())
}

#[cfg(test)]
mod tests {

    use crate::workload::{
        AiperfFile, AiperfFileKind, AiperfPace, AiperfSamplingStrategy, Arrival, DataSpec, Harness,
        ParseOptions, StageLimit, TokenLengths, parse_profile,
    };

    #[test]
    fn a_custom_file_runs_aiperfs_rate_loop_with_its_osl_and_pool_size() {
        let parsed = parse_profile(
            Harness::Aiperf,
            "p.yaml",
            "model: m\ninput-file: pool.jsonl\ncustom-dataset-type: random_pool\nnum-prompts: 12\nosl: 9\n\
             isl: 100\nrequest-rate: 4\nrequest-count: 30\nconversation-turn-mean: 3\n",
            &ParseOptions::default(),
        )
        .expect("parses");
        let w = parsed.workload;
        assert_eq!(
            w.data,
            DataSpec::AiperfFile(AiperfFile {
                path: "pool.jsonl".to_owned(),
                kind: AiperfFileKind::RandomPool,
                conversations: 12,
                output: Some(TokenLengths::fixed(9)),
                // `random_pool` prefers the shuffle sampler.
                sampling: AiperfSamplingStrategy::Shuffle,
            })
        );
        // Unlike a trace, such a file takes AIPerf's rate loop and request count.
        assert_eq!(w.stages[0].limit, StageLimit::requests(30));
        assert!(matches!(
            w.stages[0].arrival,
            Arrival::AiperfRate {
                pace: AiperfPace::Poisson { rate, .. },
                ..
            } if rate == 4.0
        ));
        // `--isl` and the synthetic-only flags are not used for a file, and said so.
        let ignored: Vec<&str> = parsed.warnings.iter().map(|w| w.key.as_str()).collect();
        assert_eq!(ignored, ["isl", "conversation-turn-mean"]);
    }

    #[test]
    fn a_single_turn_file_warns_that_num_dataset_entries_does_not_apply_and_refuses_a_fixed_schedule()
     {
        let parsed = parse_profile(
            Harness::Aiperf,
            "p.yaml",
            "model: m\ninput-file: s.jsonl\ncustom-dataset-type: single_turn\nnum-dataset-entries: 7\n\
             conversation-num: 5\nconcurrency: 2\n",
            &ParseOptions::default(),
        )
        .expect("parses");
        assert!(
            parsed
                .warnings
                .iter()
                .any(|w| w.key == "num-dataset-entries")
        );
        // `--conversation-num` is AIPerf 0.13's session count, for files too; without `--request-count` there is
        // no request bound.
        assert!(!parsed.warnings.iter().any(|w| w.key == "conversation-num"));
        assert_eq!(parsed.workload.stages[0].limit.requests, None);
        assert_eq!(
            parsed.workload.stages[0].arrival,
            Arrival::AiperfRate {
                pace: crate::workload::AiperfPace::Burst,
                concurrency: Some(2),
                grace: None,
                warmup_requests: 0,
                sessions: Some(5),
                credits: crate::workload::AiperfCredits::default(),
            }
        );
        let err = parse_profile(
            Harness::Aiperf,
            "p.yaml",
            "model: m\ninput-file: s.jsonl\ncustom-dataset-type: multi_turn\nfixed-schedule-auto-offset: true\n",
            &ParseOptions::default(),
        )
        .expect_err("refused")
        .to_string();
        assert!(
            err.starts_with("p.yaml:4: `fixed-schedule-auto-offset`"),
            "{err}"
        );
    }
}
