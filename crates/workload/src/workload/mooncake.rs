//! Mooncake traces as AIPerf reads them (`--custom-dataset-type mooncake_trace`): the JSONL records, their
//! grouping into sessions, and the times AIPerf's fixed schedule sends them at. Pure: the caller hands in the file
//! name (for messages) and its text.
//!
//! Upstream (`ai-dynamo/aiperf`):
//! - `aiperf/dataset/loader/models.py` `MooncakeTrace`: the record. Either `input_length` or `text_input`;
//!   `hash_ids` only with `input_length`; `timestamp` and `delay` in milliseconds; unknown fields are allowed
//!   (`AIPerfBaseModel` has `extra="allow"`) and ignored.
//! - `aiperf/dataset/loader/mooncake_trace.py` `load_dataset`: blank lines skipped; a record whose timestamp
//!   lies outside `[--fixed-schedule-start-offset, --fixed-schedule-end-offset]` (both inclusive) is dropped;
//!   records are grouped by `session_id` in order of first appearance, a record without one being a session of
//!   its own.
//! - `aiperf/common/config/user_config.py` `_should_use_fixed_schedule_for_mooncake_trace`: the fixed schedule
//!   is switched on when the file's first non-blank record has a timestamp, whatever `--concurrency` says;
//!   `get_effective_request_count`: a mooncake trace sends every record, whatever `--request-count` says.
//! - `aiperf/timing/fixed_schedule_strategy.py`: a session's first turn goes out at
//!   `(timestamp − zero) / speedup` after the phase starts, where zero is the earliest first-turn timestamp with
//!   `--fixed-schedule-auto-offset`, else `--fixed-schedule-start-offset`, else 0; a later turn goes out when the
//!   previous one has returned — at its own timestamp if it has one, else `delay / speedup` later, else at once
//!   (`_dispatch_by_timing`).

use std::collections::HashMap;
use std::time::Duration;

use serde_json::{Map, Value};

/// One record of a Mooncake trace, as AIPerf's `MooncakeTrace` model holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceRecord {
    /// The 1-based line of the file it came from.
    pub line: u32,
    /// Prompt length in tokens (with `hash_ids`: the blocks' total).
    pub input_length: Option<u32>,
    /// The prompt itself, sent verbatim instead of a synthesized one.
    pub text_input: Option<String>,
    /// `max_tokens` of the request; none sends none.
    pub output_length: Option<u32>,
    /// One id per block of the prompt; equal ids are equal text.
    pub hash_ids: Vec<u64>,
    /// When to send it, in milliseconds on the trace's clock.
    pub timestamp_ms: Option<u64>,
    /// Milliseconds to wait after the previous turn of its session returned.
    pub delay_ms: Option<u64>,
    pub session_id: Option<String>,
}

/// Why a trace file could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TraceError {
    #[error("{file}:{line}: not a JSON object: {message}")]
    Json {
        file: String,
        line: u32,
        message: String,
    },
    #[error("{file}:{line}: `{field}`: {problem}")]
    Field {
        file: String,
        line: u32,
        field: &'static str,
        problem: String,
    },
    #[error("{file}: no records{}", if *.skipped > 0 { format!(" within the fixed-schedule offsets ({} skipped)", .skipped) } else { String::new() })]
    Empty { file: String, skipped: u64 },
    #[error(
        "{file}:{line}: the first turn of session `{session}` has no `timestamp`; AIPerf's fixed schedule needs one \
         on every session's first turn"
    )]
    FirstTurnWithoutTimestamp {
        file: String,
        line: u32,
        session: String,
    },
    #[error(
        "{file}:{line}: `input_length` {input_length} with {blocks} hash_ids of block size {block_size}: the last \
         block would have {last} tokens, AIPerf needs 1..={block_size}"
    )]
    Blocks {
        file: String,
        line: u32,
        input_length: u32,
        blocks: usize,
        block_size: u32,
        last: i64,
    },
}

/// Parses a Mooncake trace (JSONL). Blank lines are skipped, as AIPerf skips them.
pub fn parse_trace(file: &str, text: &str) -> Result<Vec<TraceRecord>, TraceError> {
    let mut records = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let line = u32::try_from(index + 1).unwrap_or(u32::MAX);
        let raw = raw.trim();
        if raw.is_empty() {
            continue;
        }
        let value: Value = serde_json::from_str(raw).map_err(|e| TraceError::Json {
            file: file.to_owned(),
            line,
            message: e.to_string(),
        })?;
        let Value::Object(map) = value else {
            return Err(TraceError::Json {
                file: file.to_owned(),
                line,
                message: "a JSON value that is not an object".to_owned(),
            });
        };
        records.push(record(file, line, &map)?);
    }
    Ok(records)
}

fn record(file: &str, line: u32, map: &Map<String, Value>) -> Result<TraceRecord, TraceError> {
    let bad = |field: &'static str, problem: String| TraceError::Field {
        file: file.to_owned(),
        line,
        field,
        problem,
    };
    // `type` is a Literal in AIPerf's model: present, it must name this format.
    if let Some(kind) = present(map, "type")
        && kind.as_str() != Some("mooncake_trace")
    {
        return Err(bad(
            "type",
            format!("must be \"mooncake_trace\", found {kind}"),
        ));
    }
    let int = |field: &'static str| -> Result<Option<u64>, TraceError> {
        present(map, field)
            .map(|v| {
                whole_number(v).ok_or_else(|| {
                    bad(field, format!("expected a non-negative integer, found {v}"))
                })
            })
            .transpose()
    };
    let u32_of = |field: &'static str| -> Result<Option<u32>, TraceError> {
        int(field)?
            .map(|n| {
                if n > super::limits::MAX_TOKENS {
                    return Err(bad(
                        field,
                        super::limits::exceeded(super::limits::Limit::Tokens, n as f64),
                    ));
                }
                u32::try_from(n)
                    .map_err(|_| bad(field, format!("{n} does not fit in a 32-bit token count")))
            })
            .transpose()
    };
    let string = |field: &'static str| -> Result<Option<String>, TraceError> {
        present(map, field)
            .map(|v| {
                v.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| bad(field, format!("expected a string, found {v}")))
            })
            .transpose()
    };
    let input_length = u32_of("input_length")?;
    let text_input = string("text_input")?;
    let hash_ids = match present(map, "hash_ids") {
        None => None,
        Some(Value::Array(ids)) => Some(
            ids.iter()
                .enumerate()
                .map(|(i, id)| {
                    whole_number(id).ok_or_else(|| {
                        bad(
                            "hash_ids",
                            format!("element {i}: expected a non-negative integer, found {id}"),
                        )
                    })
                })
                .collect::<Result<Vec<u64>, _>>()?,
        ),
        Some(other) => {
            return Err(bad(
                "hash_ids",
                format!("expected a list of integers, found {other}"),
            ));
        }
    };
    if input_length.is_none() && text_input.is_none() {
        return Err(bad(
            "input_length",
            "either `input_length` or `text_input` must be given".to_owned(),
        ));
    }
    if input_length.is_none() && hash_ids.is_some() {
        return Err(bad(
            "input_length",
            "must be given when `hash_ids` is".to_owned(),
        ));
    }
    if text_input.is_none() && input_length == Some(0) {
        return Err(bad("input_length", "must be at least 1 token".to_owned()));
    }
    Ok(TraceRecord {
        line,
        input_length,
        text_input,
        output_length: u32_of("output_length")?,
        hash_ids: hash_ids.unwrap_or_default(),
        timestamp_ms: int("timestamp")?,
        delay_ms: int("delay")?,
        session_id: string("session_id")?,
    })
}

/// A field that is there and not `null` (pydantic treats an explicit null as absent for these optional fields).
fn present<'m>(map: &'m Map<String, Value>, field: &str) -> Option<&'m Value> {
    map.get(field).filter(|v| !v.is_null())
}

/// A non-negative integer, or a float with no fractional part (pydantic's lax int).
fn whole_number(v: &Value) -> Option<u64> {
    v.as_u64().or_else(|| {
        v.as_f64()
            .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f <= u64::MAX as f64)
            .map(|f| f as u64)
    })
}

/// The lengths of a record's prompt blocks: `block_size` each, the last `input_length − (n − 1)·block_size`, which
/// must lie in `1..=block_size` (AIPerf `PromptGenerator._generate_cached_prompt`).
pub fn block_lengths(
    file: &str,
    record: &TraceRecord,
    block_size: u32,
) -> Result<Vec<u32>, TraceError> {
    let n = record.hash_ids.len();
    let input_length = record.input_length.unwrap_or(0);
    if n == 0 {
        return Ok(Vec::new());
    }
    let last = i64::from(input_length) - (n as i64 - 1) * i64::from(block_size);
    if last <= 0 || last > i64::from(block_size) {
        return Err(TraceError::Blocks {
            file: file.to_owned(),
            line: record.line,
            input_length,
            blocks: n,
            block_size,
            last,
        });
    }
    let mut lengths = vec![block_size; n];
    lengths[n - 1] = last as u32;
    Ok(lengths)
}

/// AIPerf's fixed-schedule options (`--fixed-schedule-*`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FixedSchedule {
    /// `--fixed-schedule-speedup`: the trace's times are divided by it (2 replays twice as fast).
    pub speedup: f64,
    /// `--fixed-schedule-auto-offset`: the earliest first-turn timestamp is time 0.
    pub auto_offset: bool,
    /// `--fixed-schedule-start-offset` (ms): earlier records are dropped, and it is time 0.
    pub start_offset_ms: Option<u64>,
    /// `--fixed-schedule-end-offset` (ms): later records are dropped.
    pub end_offset_ms: Option<u64>,
}

impl Default for FixedSchedule {
    fn default() -> Self {
        FixedSchedule {
            speedup: 1.0,
            auto_offset: false,
            start_offset_ms: None,
            end_offset_ms: None,
        }
    }
}

/// When a turn goes out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnTiming {
    /// At this offset from the replay's start (already divided by the speed-up); a later turn whose time has
    /// passed when the previous one returns goes at once.
    At(Duration),
    /// This long after the previous turn of its session returned (divided by the speed-up).
    After(Duration),
    /// As soon as the previous turn of its session returned (or, for a first turn without a schedule, as soon
    /// as a concurrency slot is free).
    Immediately,
}

/// A session: the records of one `session_id` (or one record without), in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceSession {
    pub id: String,
    /// Indexes into the records handed to [`sessions`], with their timing.
    pub turns: Vec<(usize, TurnTiming)>,
}

/// The trace's sessions in order of first appearance, and how many records the offsets dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sessions {
    pub sessions: Vec<TraceSession>,
    /// Whether the fixed schedule is on (the first record has a timestamp).
    pub fixed_schedule: bool,
    pub skipped: u64,
}

/// Groups `records` into sessions and times their turns as AIPerf does (see the module docs). Without a fixed
/// schedule (the first record has no timestamp), first turns are sent as concurrency allows and later turns by
/// their delay.
pub fn sessions(
    file: &str,
    records: &[TraceRecord],
    schedule: &FixedSchedule,
) -> Result<Sessions, TraceError> {
    let fixed_schedule = records.first().is_some_and(|r| r.timestamp_ms.is_some());
    let within = |ts: u64| {
        schedule.start_offset_ms.is_none_or(|s| ts >= s)
            && schedule.end_offset_ms.is_none_or(|e| ts <= e)
    };
    let mut order: Vec<TraceSession> = Vec::new();
    let mut by_id: HashMap<&str, usize> = HashMap::new();
    let mut skipped = 0u64;
    for (index, record) in records.iter().enumerate() {
        if record.timestamp_ms.is_some_and(|ts| !within(ts)) {
            skipped += 1;
            continue;
        }
        let slot = match record.session_id.as_deref() {
            Some(id) => *by_id.entry(id).or_insert_with(|| {
                order.push(TraceSession {
                    id: id.to_owned(),
                    turns: Vec::new(),
                });
                order.len() - 1
            }),
            None => {
                // AIPerf gives such a record a fresh uuid; its line names it here.
                order.push(TraceSession {
                    id: format!("line-{}", record.line),
                    turns: Vec::new(),
                });
                order.len() - 1
            }
        };
        order[slot].turns.push((index, TurnTiming::Immediately));
    }
    if order.is_empty() {
        return Err(TraceError::Empty {
            file: file.to_owned(),
            skipped,
        });
    }
    let speedup = if schedule.speedup > 0.0 {
        schedule.speedup
    } else {
        1.0
    };
    let scaled = |ms: f64| {
        Duration::try_from_secs_f64((ms / speedup / 1000.0).max(0.0)).unwrap_or(Duration::MAX)
    };
    let zero_ms = if !fixed_schedule {
        0.0
    } else if schedule.auto_offset {
        order
            .iter()
            .filter_map(|s| records[s.turns[0].0].timestamp_ms)
            .min()
            .unwrap_or(0) as f64
    } else {
        schedule.start_offset_ms.unwrap_or(0) as f64
    };
    // Every time the schedule holds, after the speed-up, within the profiles' limit on durations: a timestamp of
    // 10^15 ms, or a speed-up of 1e-9, would otherwise schedule a request for years from now.
    let too_late = |line: u32, field: &'static str, ms: f64| -> Result<(), TraceError> {
        let seconds = ms / speedup / 1000.0;
        if seconds > super::limits::MAX_DURATION.as_secs_f64() {
            return Err(TraceError::Field {
                file: file.to_owned(),
                line,
                field,
                problem: format!(
                    "{ms} ms at speed-up {speedup} is {seconds:.0} s into the replay: {}",
                    super::limits::exceeded(super::limits::Limit::Duration, seconds)
                ),
            });
        }
        Ok(())
    };
    for session in &mut order {
        for (position, (index, timing)) in session.turns.iter_mut().enumerate() {
            let record = &records[*index];
            if fixed_schedule && let Some(ts) = record.timestamp_ms {
                too_late(record.line, "timestamp", ts as f64 - zero_ms)?;
            }
            if let Some(delay) = record.delay_ms {
                too_late(record.line, "delay", delay as f64)?;
            }
            *timing = match (record.timestamp_ms, record.delay_ms) {
                (Some(ts), _) if fixed_schedule => TurnTiming::At(scaled(ts as f64 - zero_ms)),
                _ if position == 0 && fixed_schedule => {
                    return Err(TraceError::FirstTurnWithoutTimestamp {
                        file: file.to_owned(),
                        line: record.line,
                        session: session.id.clone(),
                    });
                }
                (_, Some(delay)) if position > 0 => TurnTiming::After(scaled(delay as f64)),
                _ => TurnTiming::Immediately,
            };
        }
    }
    // The fixed schedule sends first turns in time order (a stable sort keeps file order within one time).
    if fixed_schedule {
        order.sort_by_key(|s| match s.turns[0].1 {
            TurnTiming::At(at) => at,
            _ => Duration::ZERO,
        });
    }
    Ok(Sessions {
        sessions: order,
        fixed_schedule,
        skipped,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "trace.jsonl";

    #[test]
    fn good_records_parse_with_their_lines_and_optional_fields() {
        let text = r#"{"timestamp": 1000, "input_length": 300, "output_length": 40, "hash_ids": [123, 456]}

{"session_id": "abc", "delay": 2, "text_input": "hello there", "extra": {"anything": 1}}
{"input_length": 10.0, "output_length": null, "type": "mooncake_trace"}
"#;
        let records = parse_trace(FILE, text).expect("parses");
        assert_eq!(records.len(), 3);
        assert_eq!(
            records[0],
            TraceRecord {
                line: 1,
                input_length: Some(300),
                text_input: None,
                output_length: Some(40),
                hash_ids: vec![123, 456],
                timestamp_ms: Some(1000),
                delay_ms: None,
                session_id: None,
            }
        );
        // The blank line 2 is skipped but counted.
        assert_eq!(records[1].line, 3);
        assert_eq!(records[1].text_input.as_deref(), Some("hello there"));
        assert_eq!(
            (records[1].delay_ms, records[1].session_id.as_deref()),
            (Some(2), Some("abc"))
        );
        // pydantic's lax int takes 10.0; an explicit null is absent.
        assert_eq!(
            (
                records[2].line,
                records[2].input_length,
                records[2].output_length
            ),
            (4, Some(10), None)
        );
    }

    fn error_of(line: &str) -> String {
        let text = format!("{{\"input_length\": 5}}\n{line}\n");
        parse_trace(FILE, &text).expect_err("refused").to_string()
    }

    #[test]
    fn each_bad_field_is_named_with_its_line() {
        assert_eq!(
            error_of(r#"{"input_length": -3}"#),
            "trace.jsonl:2: `input_length`: expected a non-negative integer, found -3"
        );
        assert_eq!(
            error_of(r#"{"input_length": 5, "output_length": "40"}"#),
            "trace.jsonl:2: `output_length`: expected a non-negative integer, found \"40\""
        );
        assert_eq!(
            error_of(r#"{"input_length": 5, "timestamp": 1.5}"#),
            "trace.jsonl:2: `timestamp`: expected a non-negative integer, found 1.5"
        );
        assert_eq!(
            error_of(r#"{"input_length": 5, "delay": true}"#),
            "trace.jsonl:2: `delay`: expected a non-negative integer, found true"
        );
        assert_eq!(
            error_of(r#"{"input_length": 5, "hash_ids": [1, "x"]}"#),
            "trace.jsonl:2: `hash_ids`: element 1: expected a non-negative integer, found \"x\""
        );
        assert_eq!(
            error_of(r#"{"input_length": 5, "hash_ids": 7}"#),
            "trace.jsonl:2: `hash_ids`: expected a list of integers, found 7"
        );
        assert_eq!(
            error_of(r#"{"input_length": 5, "session_id": 7}"#),
            "trace.jsonl:2: `session_id`: expected a string, found 7"
        );
        assert_eq!(
            error_of(r#"{"text_input": ["a"]}"#),
            "trace.jsonl:2: `text_input`: expected a string, found [\"a\"]"
        );
        assert_eq!(
            error_of(r#"{"output_length": 4}"#),
            "trace.jsonl:2: `input_length`: either `input_length` or `text_input` must be given"
        );
        assert_eq!(
            error_of(r#"{"text_input": "x", "hash_ids": [1]}"#),
            "trace.jsonl:2: `input_length`: must be given when `hash_ids` is"
        );
        assert_eq!(
            error_of(r#"{"input_length": 5, "type": "single_turn"}"#),
            "trace.jsonl:2: `type`: must be \"mooncake_trace\", found \"single_turn\""
        );
        assert!(error_of("[1, 2]").starts_with("trace.jsonl:2: not a JSON object"));
        assert!(error_of("{\"input_length\": 5").starts_with("trace.jsonl:2: not a JSON object"));
    }

    fn rec(line: u32, input_length: u32, hash_ids: &[u64]) -> TraceRecord {
        TraceRecord {
            line,
            input_length: Some(input_length),
            text_input: None,
            output_length: None,
            hash_ids: hash_ids.to_vec(),
            timestamp_ms: None,
            delay_ms: None,
            session_id: None,
        }
    }

    #[test]
    fn blocks_are_full_but_the_last_which_takes_the_remainder() {
        // 10 tokens over 3 blocks of 4: 4, 4, 10 − 2·4 = 2.
        assert_eq!(
            block_lengths(FILE, &rec(1, 10, &[1, 2, 3]), 4),
            Ok(vec![4, 4, 2])
        );
        assert_eq!(
            block_lengths(FILE, &rec(1, 12, &[1, 2, 3]), 4),
            Ok(vec![4, 4, 4])
        );
        // 13 tokens need a 4th block (last would be 5 > 4); 8 tokens leave the 3rd empty.
        for (len, last) in [(13, 5), (8, 0)] {
            assert_eq!(
                block_lengths(FILE, &rec(7, len, &[1, 2, 3]), 4),
                Err(TraceError::Blocks {
                    file: FILE.to_owned(),
                    line: 7,
                    input_length: len,
                    blocks: 3,
                    block_size: 4,
                    last,
                })
            );
        }
    }

    fn timed(line: u32, ts: Option<u64>, session: Option<&str>, delay: Option<u64>) -> TraceRecord {
        TraceRecord {
            timestamp_ms: ts,
            session_id: session.map(str::to_owned),
            delay_ms: delay,
            ..rec(line, 4, &[])
        }
    }

    fn first_offsets(s: &Sessions) -> Vec<Duration> {
        s.sessions
            .iter()
            .map(|s| match s.turns[0].1 {
                TurnTiming::At(at) => at,
                other => panic!("not scheduled: {other:?}"),
            })
            .collect()
    }

    #[test]
    fn a_fixed_schedule_divides_the_trace_times_by_the_speedup() {
        // 0, 100, 250 ms at speed-up 2: 0, 50, 125 ms.
        let records = [
            timed(1, Some(0), None, None),
            timed(2, Some(100), None, None),
            timed(3, Some(250), None, None),
        ];
        let schedule = FixedSchedule {
            speedup: 2.0,
            ..FixedSchedule::default()
        };
        let s = sessions(FILE, &records, &schedule).expect("sessions");
        assert!(s.fixed_schedule);
        assert_eq!(
            first_offsets(&s),
            [
                Duration::ZERO,
                Duration::from_millis(50),
                Duration::from_millis(125)
            ]
        );
    }

    #[test]
    fn the_schedule_zero_is_0_the_start_offset_or_with_auto_offset_the_first_timestamp() {
        let records = [
            timed(1, Some(1000), None, None),
            timed(2, Some(1500), None, None),
            timed(3, Some(3000), None, None),
        ];
        // Without an offset the trace's own zero counts: the first request waits 1 s.
        let plain = sessions(FILE, &records, &FixedSchedule::default()).expect("sessions");
        assert_eq!(first_offsets(&plain)[0], Duration::from_millis(1000));
        let auto = sessions(
            FILE,
            &records,
            &FixedSchedule {
                auto_offset: true,
                ..FixedSchedule::default()
            },
        )
        .expect("sessions");
        assert_eq!(
            first_offsets(&auto),
            [
                Duration::ZERO,
                Duration::from_millis(500),
                Duration::from_millis(2000)
            ]
        );
        // Start 1500 and end 1500 (both inclusive) keep line 2 alone, at time 0.
        let window = sessions(
            FILE,
            &records,
            &FixedSchedule {
                start_offset_ms: Some(1500),
                end_offset_ms: Some(1500),
                ..FixedSchedule::default()
            },
        )
        .expect("sessions");
        assert_eq!(
            (window.skipped, first_offsets(&window)),
            (2, vec![Duration::ZERO])
        );
    }

    #[test]
    fn sessions_group_by_id_in_first_appearance_and_time_later_turns() {
        let records = [
            timed(1, Some(200), Some("b"), None),
            timed(2, Some(100), Some("a"), None),
            timed(3, None, Some("b"), Some(40)),
            timed(4, Some(900), Some("a"), None),
            timed(5, None, Some("a"), None),
        ];
        let s = sessions(FILE, &records, &FixedSchedule::default()).expect("sessions");
        // Sorted by first-turn time: a (100 ms) before b (200 ms).
        assert_eq!(s.sessions[0].id, "a");
        assert_eq!(
            s.sessions[0].turns,
            [
                (1, TurnTiming::At(Duration::from_millis(100))),
                (3, TurnTiming::At(Duration::from_millis(900))),
                (4, TurnTiming::Immediately)
            ]
        );
        assert_eq!(
            s.sessions[1].turns,
            [
                (0, TurnTiming::At(Duration::from_millis(200))),
                (2, TurnTiming::After(Duration::from_millis(40)))
            ]
        );
        // A first turn without a timestamp cannot be scheduled.
        let broken = [
            timed(1, Some(0), None, None),
            timed(2, None, Some("x"), Some(5)),
        ];
        assert_eq!(
            sessions(FILE, &broken, &FixedSchedule::default()),
            Err(TraceError::FirstTurnWithoutTimestamp {
                file: FILE.to_owned(),
                line: 2,
                session: "x".to_owned()
            })
        );
    }

    #[test]
    fn without_timestamps_first_turns_wait_for_concurrency_and_delays_still_count() {
        let records = [
            timed(1, None, Some("s"), Some(7)),
            timed(2, None, Some("s"), Some(30)),
        ];
        let s = sessions(
            FILE,
            &records,
            &FixedSchedule {
                speedup: 3.0,
                ..FixedSchedule::default()
            },
        )
        .expect("sessions");
        assert!(!s.fixed_schedule);
        // The first turn's delay has no previous turn to count from; the second's is divided by the speed-up.
        assert_eq!(
            s.sessions[0].turns,
            [
                (0, TurnTiming::Immediately),
                (1, TurnTiming::After(Duration::from_millis(10)))
            ]
        );
    }

    #[test]
    fn times_and_lengths_beyond_the_profiles_limits_are_refused_with_their_line() {
        // 10^15 ms is 31 700 years; a speed-up of 1e-9 makes 1 s a billion.
        for (records, schedule, needle) in [
            (
                vec![
                    timed(1, Some(0), None, None),
                    timed(2, Some(1_000_000_000_000_000), None, None),
                ],
                FixedSchedule::default(),
                "trace.jsonl:2: `timestamp`:",
            ),
            (
                vec![timed(1, Some(1000), None, None)],
                FixedSchedule {
                    speedup: 1e-9,
                    ..FixedSchedule::default()
                },
                "trace.jsonl:1: `timestamp`: 1000 ms at speed-up 0.000000001",
            ),
            (
                vec![
                    timed(1, None, Some("s"), None),
                    timed(2, None, Some("s"), Some(40 * 86_400_000)),
                ],
                FixedSchedule::default(),
                "trace.jsonl:2: `delay`:",
            ),
        ] {
            let e = sessions(FILE, &records, &schedule)
                .expect_err("refused")
                .to_string();
            assert!(e.starts_with(needle) && e.contains("30 days"), "{e}");
        }
        let e = error_of(r#"{"input_length": 1000000000}"#);
        assert!(
            e.starts_with("trace.jsonl:2: `input_length`:") && e.contains("tokens per prompt"),
            "{e}"
        );
    }
}
