//! Mooncake trace replay, built before the clock starts: the trace read and checked
//! ([`llmbench_workload::workload::mooncake`]), its prompts synthesized so that equal `hash_ids` are equal text, and its
//! sessions timed into the engine's [`Replay`].
//!
//! Prompts follow AIPerf's `PromptGenerator._generate_cached_prompt` (`aiperf/dataset/generator/prompt.py`): a
//! hash id is one block of `block_size` tokens, the record's last block `input_length − (n − 1)·block_size`; the
//! first time a hash id is seen its block is generated and cached, and every later record naming it gets that same
//! text (the cached block, even where its length there would differ, as AIPerf reuses it). A record without
//! `hash_ids` gets a fresh prompt of `input_length` tokens; `text_input` is sent verbatim. `output_length` is the
//! request's `max_tokens` (AIPerf `max_completion_tokens` for chat); none sends none.
//!
//! Blocks are random plain words of the run's tokenizer (AIPerf cuts them from its Shakespeare corpus); AIPerf
//! starts each block with a BOS token where the tokenizer has one, so blocks never merge, which llmbench gets from
//! joining them with a space instead. Token counts are exact under the `builtin` tokenizer; under a BPE tokenizer
//! the joins can move a token or two, which is why reports prefer the server's `usage`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use crate::engine::trace::{ReplaySession, ReplayTurn};
use crate::engine::{self, Replay};
use llmbench_data::{
    DataError, LengthDistribution, Prompt, Synthesizer, SyntheticSpec, synthetic_prompts,
};
use llmbench_text::tokenizer::{Tokenizer, TokenizerError};
use llmbench_workload::prompts::{self, PromptError};
use llmbench_workload::request::BodySettings;
use llmbench_workload::workload::azure_trace::{self, AzureRow, AzureTraceError};
use llmbench_workload::workload::mooncake::{
    self, FixedSchedule, TraceError, TraceRecord, TurnTiming,
};
use llmbench_workload::workload::{Arrival, DataSpec, Workload};

/// More records than this are refused: their prompts are all built before the run.
pub(crate) const MAX_RECORDS: usize = 1_000_000;

/// Why a trace could not become a replay.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("cannot read the trace {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Trace(#[from] TraceError),
    #[error(
        "{path}: {records} records; at most {MAX_RECORDS} are replayed (every prompt is built before the run)"
    )]
    TooLarge { path: PathBuf, records: usize },
    #[error("cannot synthesize the trace's prompts: {0}")]
    Data(#[from] DataError),
    #[error("{file}:{line}: cannot count the tokens of `text_input`: {source}")]
    Count {
        file: String,
        line: u32,
        source: TokenizerError,
    },
    #[error("the workload is not a mooncake trace replay")]
    NotATrace,
    #[error(transparent)]
    Azure(#[from] AzureTraceError),
    #[error(
        "{data}: {rows} rows of lengths but {timing} holds only {times} send times; inference-perf's \
         `run_stage` runs out of trace times there (StopIteration)"
    )]
    TooFewTimes {
        data: String,
        rows: usize,
        timing: String,
        times: usize,
    },
    #[error(
        "{file}:{line}: `ContextTokens` is 0; llmbench does not send an empty prompt (inference-perf would send \
         an empty string)"
    )]
    EmptyPrompt { file: String, line: u32 },
    #[error("{file}: {source}")]
    ChatTemplate {
        file: String,
        source: Box<PromptError>,
    },
}

fn read(path: &str) -> Result<String, ReplayError> {
    std::fs::read_to_string(path).map_err(|source| ReplayError::Read {
        path: PathBuf::from(path),
        source,
    })
}

/// The replay of an inference-perf `trace_replay` workload (`load.trace` times, `data.trace` lengths), as the
/// engine's only stage, with at most `in_flight_cap` requests in flight (inference-perf's workers × their
/// `worker_max_concurrency`).
pub fn azure_replay_plan(
    workload: &Workload,
    tokenizer: &Tokenizer,
    settings: BodySettings,
    in_flight_cap: usize,
) -> Result<engine::Stage, ReplayError> {
    let (DataSpec::AzureTrace(data), Some(Arrival::InferencePerfTrace { file })) =
        (&workload.data, workload.stages.first().map(|s| &s.arrival))
    else {
        return Err(ReplayError::NotATrace);
    };
    let times = azure_trace::parse(file, &read(file)?)?;
    let lengths = if data.path == *file {
        times.clone()
    } else {
        azure_trace::parse(&data.path, &read(&data.path)?)?
    };
    let mut replay = build_azure_replay(
        (file, &times),
        (&data.path, &lengths),
        tokenizer,
        settings,
        workload.seed,
        workload.api.use_chat_template == Some(true),
    )?;
    replay.in_flight_cap = Some(in_flight_cap);
    Ok(engine::Stage {
        plan: engine::StagePlan::Trace(Arc::new(replay)),
        requested_rate: None,
        errors: engine::ErrorLimits::default(),
    })
}

/// Pairs the rows of the timing trace with those of the data trace, as inference-perf's `run_stage` does: it
/// sends `get_request_count()` requests (the data trace's rows, `random_datagen.py`), the i-th at the i-th time of
/// `TraceReplayLoadTimer`, with a prompt of the i-th `ContextTokens` random tokens and `max_tokens` of the i-th
/// `GeneratedTokens` (`load_lazy_data`). Each request is a one-turn session; sessions go out in time order (each
/// upstream request sleeps to its own time, so rows out of order still go out at their times). Pure but for the
/// tokenizer. With `use_chat_template` each prompt is then wrapped as `RandomDataGenerator` wraps it (one user turn
/// of the tokenizer's chat template, converged to the row's length; see `prompts::chat_templated`), and a row no
/// longer than the template alone is refused, as upstream refuses the trace's shortest.
pub(crate) fn build_azure_replay(
    (timing_file, times): (&str, &[AzureRow]),
    (data_file, lengths): (&str, &[AzureRow]),
    tokenizer: &Tokenizer,
    settings: BodySettings,
    seed: u64,
    use_chat_template: bool,
) -> Result<Replay, ReplayError> {
    if lengths.len() > MAX_RECORDS {
        return Err(ReplayError::TooLarge {
            path: PathBuf::from(data_file),
            records: lengths.len(),
        });
    }
    if lengths.len() > times.len() {
        return Err(ReplayError::TooFewTimes {
            data: data_file.to_owned(),
            rows: lengths.len(),
            timing: timing_file.to_owned(),
            times: times.len(),
        });
    }
    if let Some(row) = lengths.iter().find(|r| r.context_tokens == 0) {
        return Err(ReplayError::EmptyPrompt {
            file: data_file.to_owned(),
            line: row.line,
        });
    }
    // A fresh prompt per row: a record without `hash_ids` is synthesized alone at its length.
    let records: Vec<TraceRecord> = lengths
        .iter()
        .map(|row| TraceRecord {
            line: row.line,
            input_length: Some(row.context_tokens),
            text_input: None,
            output_length: Some(row.generated_tokens),
            hash_ids: Vec::new(),
            timestamp_ms: None,
            delay_ms: None,
            session_id: None,
        })
        .collect();
    let mut prompts = synthesize(data_file, &records, 1, tokenizer, seed)?;
    if use_chat_template {
        let plain: Vec<Prompt> = prompts
            .iter()
            .map(|p| Prompt::text(p.blocks.join(" "), p.tokens, None))
            .collect();
        let templated = prompts::chat_templated(plain, tokenizer, seed).map_err(|source| {
            ReplayError::ChatTemplate {
                file: data_file.to_owned(),
                source: Box::new(source),
            }
        })?;
        for (prompt, wrapped) in prompts.iter_mut().zip(templated) {
            prompt.blocks = vec![Arc::from(wrapped.text)];
            prompt.tokens = wrapped.input_tokens;
        }
    }
    let mut sessions: Vec<ReplaySession> = prompts
        .into_iter()
        .zip(lengths.iter().zip(times))
        .enumerate()
        .map(|(id, (prompt, (row, time)))| ReplaySession {
            id: u32::try_from(id).unwrap_or(u32::MAX),
            turns: vec![ReplayTurn {
                blocks: prompt.blocks,
                tokens: prompt.tokens,
                max_tokens: Some(row.generated_tokens),
                timing: TurnTiming::At(time.offset),
            }],
        })
        .collect();
    // Stable: rows due at the same time keep their order.
    sessions.sort_by_key(|s| match s.turns.first().map(|t| t.timing) {
        Some(TurnTiming::At(at)) => at,
        _ => std::time::Duration::ZERO,
    });
    Ok(Replay {
        sessions,
        settings,
        concurrency: None,
        in_flight_cap: None,
    })
}

/// The replay of `workload`'s trace (read from its `input-file`), as the engine's only stage.
pub fn replay_plan(
    workload: &Workload,
    tokenizer: &Tokenizer,
    settings: BodySettings,
) -> Result<engine::Stage, ReplayError> {
    let (
        DataSpec::MooncakeTrace(data),
        Some(Arrival::MooncakeTrace {
            schedule,
            concurrency,
        }),
    ) = (&workload.data, workload.stages.first().map(|s| &s.arrival))
    else {
        return Err(ReplayError::NotATrace);
    };
    let path = PathBuf::from(&data.path);
    // AIPerf reads a gzipped trace as its text (`open_text_maybe_gzip`).
    let text = llmbench_data::text_file::read_text_maybe_gzip(&path).map_err(|source| {
        ReplayError::Read {
            path: path.clone(),
            source,
        }
    })?;
    let replay = build_replay(
        &data.path,
        &text,
        data.block_size,
        schedule,
        *concurrency,
        tokenizer,
        settings,
        workload.seed,
    )?;
    Ok(engine::Stage {
        plan: engine::StagePlan::Trace(Arc::new(replay)),
        requested_rate: None,
        // AIPerf's `--failed-request-threshold` counts a trace's records as any profiling phase's.
        errors: engine::ErrorLimits {
            failed_request_threshold: workload
                .stages
                .first()
                .and_then(|s| s.limit.failed_request_threshold),
            ..engine::ErrorLimits::default()
        },
    })
}

/// Builds the replay of the trace `text` (named `file` in messages). Pure but for the tokenizer.
#[allow(clippy::too_many_arguments)]
pub(crate) fn build_replay(
    file: &str,
    text: &str,
    block_size: u32,
    schedule: &FixedSchedule,
    concurrency: u32,
    tokenizer: &Tokenizer,
    settings: BodySettings,
    seed: u64,
) -> Result<Replay, ReplayError> {
    let records = mooncake::parse_trace(file, text)?;
    if records.len() > MAX_RECORDS {
        return Err(ReplayError::TooLarge {
            path: PathBuf::from(file),
            records: records.len(),
        });
    }
    let sessions = mooncake::sessions(file, &records, schedule)?;
    if sessions.skipped > 0 {
        tracing::info!(
            skipped = sessions.skipped,
            "trace records outside the fixed-schedule offsets were skipped, as AIPerf skips them"
        );
    }
    let prompts = synthesize(file, &records, block_size, tokenizer, seed)?;
    let sessions: Vec<ReplaySession> = sessions
        .sessions
        .iter()
        .enumerate()
        .map(|(id, session)| ReplaySession {
            id: u32::try_from(id).unwrap_or(u32::MAX),
            turns: session
                .turns
                .iter()
                .map(|(index, timing)| {
                    let TracePrompt { blocks, tokens } = prompts[*index].clone();
                    ReplayTurn {
                        blocks,
                        tokens,
                        max_tokens: records[*index].output_length,
                        timing: *timing,
                    }
                })
                .collect(),
        })
        .collect();
    let fixed = sessions
        .first()
        .is_some_and(|s| matches!(s.turns.first().map(|t| t.timing), Some(TurnTiming::At(_))));
    Ok(Replay {
        sessions,
        settings,
        concurrency: (!fixed).then_some(concurrency.max(1) as usize),
        in_flight_cap: None,
    })
}

/// One record's prompt: its blocks (shared between records naming the same hash id) and its length in tokens.
#[derive(Debug, Clone)]
pub(crate) struct TracePrompt {
    pub blocks: Vec<Arc<str>>,
    pub tokens: u32,
}

/// One prompt per record, in record order.
pub(crate) fn synthesize(
    file: &str,
    records: &[TraceRecord],
    block_size: u32,
    tokenizer: &Tokenizer,
    seed: u64,
) -> Result<Vec<TracePrompt>, ReplayError> {
    /// What a record's prompt is made of, before the text exists.
    enum Plan {
        Verbatim(Arc<str>, u32),
        Blocks(Vec<u64>),
        Fresh(usize),
    }
    // Each hash id's block length where first seen, and the fresh prompts' lengths, grouped by length so each
    // length is one batch of the synthesizer.
    let mut first_seen: HashMap<u64, u32> = HashMap::new();
    let mut by_length: HashMap<u32, Vec<Slot>> = HashMap::new();
    let mut fresh_count = 0usize;
    let mut plans = Vec::with_capacity(records.len());
    for record in records {
        let plan = if let Some(text) = &record.text_input {
            let tokens = tokenizer.count(text).map_err(|source| ReplayError::Count {
                file: file.to_owned(),
                line: record.line,
                source,
            })?;
            Plan::Verbatim(Arc::from(text.as_str()), tokens)
        } else if record.hash_ids.is_empty() {
            let len = record.input_length.unwrap_or(1);
            by_length
                .entry(len)
                .or_default()
                .push(Slot::Fresh(fresh_count));
            fresh_count += 1;
            Plan::Fresh(fresh_count - 1)
        } else {
            let lengths = mooncake::block_lengths(file, record, block_size)?;
            for (id, len) in record.hash_ids.iter().zip(lengths) {
                if !first_seen.contains_key(id) {
                    first_seen.insert(*id, len);
                    by_length.entry(len).or_default().push(Slot::Hash(*id));
                }
            }
            Plan::Blocks(record.hash_ids.clone())
        };
        plans.push(plan);
    }
    let synth = Synthesizer::new(tokenizer)?;
    let mut blocks: HashMap<u64, (Arc<str>, u32)> = HashMap::with_capacity(first_seen.len());
    let mut fresh: Vec<(Arc<str>, u32)> = vec![(Arc::from(""), 0); fresh_count];
    let mut lengths: Vec<u32> = by_length.keys().copied().collect();
    // A fixed order, so a seed gives the same text whatever the hash map's order.
    lengths.sort_unstable();
    for len in lengths {
        let slots = &by_length[&len];
        let texts = synthetic_prompts(
            &synth,
            &SyntheticSpec {
                num_prompts: slots.len(),
                prompt_tokens: LengthDistribution::Fixed(len),
                output_tokens: None,
                prefix_buckets: Vec::new(),
                specials_in_each_length: 0,
                seed: seed ^ u64::from(len).wrapping_mul(0x9E37_79B9_7F4A_7C15),
            },
        )?
        .into_inner();
        for (slot, prompt) in slots.iter().zip(texts) {
            let piece = (Arc::from(prompt.text), prompt.input_tokens);
            match slot {
                Slot::Hash(id) => {
                    blocks.insert(*id, piece);
                }
                Slot::Fresh(i) => fresh[*i] = piece,
            }
        }
    }
    Ok(plans
        .into_iter()
        .map(|plan| match plan {
            Plan::Verbatim(text, tokens) => TracePrompt {
                blocks: vec![text],
                tokens,
            },
            Plan::Fresh(i) => {
                let (text, tokens) = fresh[i].clone();
                TracePrompt {
                    blocks: vec![text],
                    tokens,
                }
            }
            Plan::Blocks(ids) => {
                let mut tokens = 0u32;
                let parts = ids
                    .iter()
                    .filter_map(|id| blocks.get(id))
                    .map(|(text, n)| {
                        tokens = tokens.saturating_add(*n);
                        Arc::clone(text)
                    })
                    .collect();
                TracePrompt {
                    blocks: parts,
                    tokens,
                }
            }
        })
        .collect())
}

/// Where one synthesized text goes.
enum Slot {
    Hash(u64),
    Fresh(usize),
}

#[cfg(test)]
mod tests {
    use super::*;
    use llmbench_workload::request::BodyStyle;
    use llmbench_workload::workload::Api;
    use std::time::Duration;

    fn joined(prompt: &TracePrompt) -> String {
        let parts: Vec<&str> = prompt.blocks.iter().map(|b| &**b).collect();
        llmbench_workload::conversations::join(&parts)
    }

    #[test]
    fn records_sharing_hash_ids_share_exactly_those_blocks_of_text() {
        // Block size 4: [1, 2, 3] and [1, 2, 4] of 12 tokens share blocks 1 and 2 (8 tokens) and differ after.
        let text = "{\"input_length\": 12, \"hash_ids\": [1, 2, 3]}\n{\"input_length\": 10, \"hash_ids\": [1, 2, 4]}\n";
        let records = mooncake::parse_trace("t.jsonl", text).expect("parses");
        let prompts =
            synthesize("t.jsonl", &records, 4, &Tokenizer::builtin(), 7).expect("prompts");
        let a = joined(&prompts[0]);
        let b = joined(&prompts[1]);
        let (wa, wb): (Vec<&str>, Vec<&str>) = (
            a.split_whitespace().collect(),
            b.split_whitespace().collect(),
        );
        // The builtin tokenizer counts whitespace words: 12 and 4 + 4 + 2 = 10 tokens.
        assert_eq!((wa.len(), wb.len()), (12, 10));
        assert_eq!((prompts[0].tokens, prompts[1].tokens), (12, 10));
        assert_eq!(wa[..8], wb[..8], "the first two blocks are the same text");
        assert_ne!(wa[8..10], wb[8..10], "block 3 and block 4 differ");
        // The shared blocks are the same allocation: memory holds each block once.
        assert!(Arc::ptr_eq(&prompts[0].blocks[0], &prompts[1].blocks[0]));
    }

    #[test]
    fn verbatim_and_fresh_prompts_keep_their_lengths() {
        let text =
            "{\"text_input\": \"one two three\", \"output_length\": 5}\n{\"input_length\": 6}\n";
        let records = mooncake::parse_trace("t.jsonl", text).expect("parses");
        let prompts =
            synthesize("t.jsonl", &records, 512, &Tokenizer::builtin(), 1).expect("prompts");
        assert_eq!(joined(&prompts[0]), "one two three");
        assert_eq!(prompts[0].tokens, 3);
        assert_eq!(prompts[1].tokens, 6);
    }

    #[test]
    fn a_replay_carries_max_tokens_timing_and_no_concurrency_on_the_fixed_schedule() {
        let text = "{\"timestamp\": 0, \"input_length\": 4, \"output_length\": 3, \"hash_ids\": [1]}\n\
                    {\"timestamp\": 100, \"input_length\": 4, \"hash_ids\": [1]}\n";
        let settings = BodySettings::new(&Api::default(), "m".to_owned(), BodyStyle::Aiperf);
        let replay = build_replay(
            "t.jsonl",
            text,
            4,
            &FixedSchedule::default(),
            16,
            &Tokenizer::builtin(),
            settings,
            0,
        )
        .expect("replay");
        assert_eq!(replay.concurrency, None);
        assert_eq!(replay.requests(), 2);
        let turns: Vec<(Option<u32>, TurnTiming)> = replay
            .sessions
            .iter()
            .map(|s| (s.turns[0].max_tokens, s.turns[0].timing))
            .collect();
        assert_eq!(
            turns,
            [
                (Some(3), TurnTiming::At(Duration::ZERO)),
                (None, TurnTiming::At(Duration::from_millis(100)))
            ]
        );
        // Without timestamps the profile's concurrency applies.
        let untimed = "{\"input_length\": 4}\n";
        let settings = BodySettings::new(&Api::default(), "m".to_owned(), BodyStyle::Aiperf);
        let replay = build_replay(
            "t.jsonl",
            untimed,
            4,
            &FixedSchedule::default(),
            16,
            &Tokenizer::builtin(),
            settings,
            0,
        )
        .expect("replay");
        assert_eq!(replay.concurrency, Some(16));
    }

    /// Rows at .000, .250 and 1.000 s go out at 0, 250 and 1000 ms (hand-worked: offsets from the first row, in
    /// whole centiseconds), each a one-turn session whose prompt has `ContextTokens` tokens and whose
    /// `max_tokens` is `GeneratedTokens`. A separate timing file pairs row by row; a row out of order is sent in
    /// time order.
    #[test]
    fn azure_rows_become_one_turn_sessions_at_their_times() {
        let settings = || {
            BodySettings::new(
                &Api::default(),
                "m".to_owned(),
                BodyStyle::of(llmbench_workload::workload::Harness::InferencePerf),
            )
        };
        let csv = "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:00.000,12,5\n\
                   2023-11-16 18:15:00.250,30,7\n2023-11-16 18:15:01.000,8,1\n";
        let rows = azure_trace::parse("a.csv", csv).expect("rows");
        let replay = build_azure_replay(
            ("a.csv", &rows),
            ("a.csv", &rows),
            &Tokenizer::builtin(),
            settings(),
            3,
            false,
        )
        .expect("replay");
        assert_eq!(replay.concurrency, None);
        let got: Vec<(u32, u32, Option<u32>, TurnTiming)> = replay
            .sessions
            .iter()
            .map(|s| {
                let t = &s.turns[0];
                (s.id, t.tokens, t.max_tokens, t.timing)
            })
            .collect();
        let at = |ms| TurnTiming::At(Duration::from_millis(ms));
        assert_eq!(
            got,
            [
                (0, 12, Some(5), at(0)),
                (1, 30, Some(7), at(250)),
                (2, 8, Some(1), at(1000))
            ]
        );
        // use_chat_template needs the tokenizer's chat template; the built-in one has none.
        let err = build_azure_replay(
            ("a.csv", &rows),
            ("a.csv", &rows),
            &Tokenizer::builtin(),
            settings(),
            3,
            true,
        )
        .expect_err("no template");
        assert!(
            err.to_string()
                .starts_with("a.csv: data: inference-perf's `use_chat_template: true`"),
            "{err}"
        );
        // Times from another file whose second row is due last: that request goes out last.
        let times = azure_trace::parse(
            "t.csv",
            "2023-11-16 18:15:00.00,1,1\n2023-11-16 18:15:02.00,1,1\n2023-11-16 18:15:00.50,1,1\n\
             2023-11-16 18:15:03.00,1,1\n",
        )
        .expect("times");
        let replay = build_azure_replay(
            ("t.csv", &times),
            ("a.csv", &rows),
            &Tokenizer::builtin(),
            settings(),
            3,
            false,
        )
        .expect("replay");
        let order: Vec<(u32, TurnTiming)> = replay
            .sessions
            .iter()
            .map(|s| (s.id, s.turns[0].timing))
            .collect();
        assert_eq!(order, [(0, at(0)), (2, at(500)), (1, at(2000))]);
        // More rows of lengths than times: upstream's timer runs out.
        let err = build_azure_replay(
            ("a.csv", &rows[..2]),
            ("a.csv", &rows),
            &Tokenizer::builtin(),
            settings(),
            3,
            false,
        )
        .expect_err("too few times");
        assert!(matches!(
            err,
            ReplayError::TooFewTimes {
                rows: 3,
                times: 2,
                ..
            }
        ));
    }
}
