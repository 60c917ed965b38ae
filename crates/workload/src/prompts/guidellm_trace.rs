//! A guidellm `trace_synthetic` trace made into its replay's requests (`data/deserializers/trace_common.py` and
//! `trace_minimal.py`, vllm-project/guidellm ee7a774), before the clock starts:
//!
//! - The file is read as guidellm's other data files are (`.json` records or an array, `.jsonl`, `.csv`); the
//!   timestamp, prompt token and output token columns must exist (`Trace row missing required columns`) and hold
//!   a value in every row (`Missing column values in …`); token counts are whole and not negative.
//! - Rows are sorted by timestamp, stably (`Dataset.sort`); `samples` keeps the first N (fewer rows is an error,
//!   as the pytorch loader's `Requested N samples, but only M available`); each row's offset is its timestamp
//!   minus the first sorted row's.
//! - llmbench's limits on profiles hold for every row, checked before any prompt is built: its token counts at
//!   most [`MAX_TOKENS`] each, and its send time (`time_scale ×` its offset) at most [`MAX_DURATION`] into the
//!   replay, so a timestamp of 10^15 or 2^64 neither schedules a request for centuries nor overflows a clock.
//! - Each row is a synthetic prompt of exactly its prompt tokens, counted as guidellm's `generate_token_ids`
//!   counts them (a leading BOS among them), with `max_tokens` its output tokens. The words are llmbench's own
//!   synthetic text (guidellm's are Faker's lorem), so the lengths, not the text, match.
//!
//! - A `mooncake` trace (`trace_mooncake.py`) also lists each row's hash ids: `ceil(prompt tokens / block size)`
//!   of them, none negative. The first time a hash id is seen (in replay order) its block is synthesized: the
//!   block size, or the rest of the row's prompt tokens when it is the row's last id and the size does not divide
//!   them; later rows naming it send that same block. A row's prompt is its blocks in order, each block's length
//!   counted as guidellm counts a prompt's (a leading BOS among them), so equal hash ids are equal text and the
//!   server's prefix cache sees what the trace recorded. guidellm concatenates the blocks' token ids and decodes
//!   them; llmbench joins the blocks' text with a space, so under a BPE tokenizer a join can move a token.
//!
//! llmbench refuses what guidellm would send as an empty prompt or without an output length (a zero count):
//! the run sends `ignore_eos` with every request, as guidellm does for rows with an output count.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::guidellm_file::{Row, read_rows};
use super::{PromptError, SpecialTokens};
use crate::workload::guidellm_replay::GuidellmTrace;
use crate::workload::limits::{self, Limit, MAX_DURATION, MAX_TOKENS};
use crate::workload::{GuidellmFileFormat, Harness};
use llmbench_data::{DataError, LengthDistribution, Prompt, Synthesizer, SyntheticSpec};
use llmbench_text::tokenizer::Tokenizer;

/// One row of the trace, in replay order.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceRow {
    /// Seconds after the first row.
    pub offset: f64,
    pub prompt_tokens: u32,
    pub output_tokens: u32,
    /// A Mooncake row's hash ids, each with the length its block has when this row is the first to name it.
    pub blocks: Vec<(u64, u32)>,
}

/// The trace's requests in replay order: each row's offset (seconds after the first row) and its prompt.
/// `time_scale` is the replay profile's, by which each offset is multiplied to give the row's send time.
pub fn guidellm_trace_requests(
    trace: &GuidellmTrace,
    time_scale: f64,
    tokenizer: &Tokenizer,
    seed: u64,
) -> Result<Vec<(f64, Prompt)>, PromptError> {
    let path = PathBuf::from(&trace.path);
    let format = match path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("csv") => GuidellmFileFormat::Csv,
        Some("parquet") => GuidellmFileFormat::Parquet,
        _ => GuidellmFileFormat::Json,
    };
    let (columns, rows) = read_rows(&path, format)?;
    let rows = trace_rows(&path, &columns, &rows, trace, time_scale)?;
    let specials = tokenizer.added_special_tokens().map_err(DataError::from)?;
    let leading = SpecialTokens::of(Harness::Guidellm).in_each_length(specials);
    // What each prompt is made of: its own text (a trace_synthetic row), or blocks shared by hash id. Every text
    // is synthesized once, in batches of one length, in a fixed order, so a seed gives the same text every time.
    enum Piece {
        Row(usize),
        Block(u64),
    }
    let mut by_length: BTreeMap<u32, Vec<Piece>> = BTreeMap::new();
    let mut first_seen: HashSet<u64> = HashSet::new();
    for (index, row) in rows.iter().enumerate() {
        if trace.hash_blocks.is_none() {
            by_length
                .entry(row.prompt_tokens)
                .or_default()
                .push(Piece::Row(index));
            continue;
        }
        for (id, length) in &row.blocks {
            if first_seen.insert(*id) {
                by_length
                    .entry(*length)
                    .or_default()
                    .push(Piece::Block(*id));
            }
        }
    }
    let synth = Synthesizer::new(tokenizer)?;
    let mut own: HashMap<usize, Prompt> = HashMap::new();
    let mut blocks: HashMap<u64, (String, u32)> = HashMap::new();
    for (length, pieces) in by_length {
        let texts = llmbench_data::synthetic_prompts(
            &synth,
            &SyntheticSpec {
                num_prompts: pieces.len(),
                prompt_tokens: LengthDistribution::Fixed(length),
                output_tokens: None,
                prefix_buckets: Vec::new(),
                specials_in_each_length: leading,
                seed: seed ^ u64::from(length).wrapping_mul(0x9E37_79B9_7F4A_7C15),
            },
        )?
        .into_inner();
        for (piece, prompt) in pieces.into_iter().zip(texts) {
            match piece {
                Piece::Row(index) => {
                    own.insert(index, prompt);
                }
                Piece::Block(id) => {
                    blocks.insert(id, (prompt.text, prompt.input_tokens));
                }
            }
        }
    }
    let mut requests = Vec::with_capacity(rows.len());
    for (index, row) in rows.iter().enumerate() {
        let mut prompt = match own.remove(&index) {
            Some(prompt) => prompt,
            None => {
                let mut text = String::new();
                let mut tokens = 0u32;
                for (id, _) in &row.blocks {
                    if let Some((block, n)) = blocks.get(id) {
                        if !text.is_empty() {
                            text.push(' ');
                        }
                        text.push_str(block);
                        tokens = tokens.saturating_add(*n);
                    }
                }
                Prompt::text(text, tokens, None)
            }
        };
        // What the server counts: the text's own tokens and the special tokens it adds.
        prompt.input_tokens = prompt.input_tokens.saturating_add(specials.total);
        prompt.max_tokens = Some(row.output_tokens);
        requests.push((row.offset, prompt));
    }
    Ok(requests)
}

/// The rows of a trace file in replay order, checked as guidellm checks them. Pure.
fn trace_rows(
    path: &Path,
    columns: &[String],
    rows: &[Row],
    trace: &GuidellmTrace,
    time_scale: f64,
) -> Result<Vec<TraceRow>, DataError> {
    // An empty file has no columns either: it is said to have no rows, not to lack every column.
    if rows.is_empty() {
        return Err(DataError::Shape {
            path: path.to_owned(),
            message: "the trace has no rows".to_owned(),
        });
    }
    let mut required = vec![
        &trace.timestamp_column,
        &trace.prompt_tokens_column,
        &trace.output_tokens_column,
    ];
    if let Some(hash) = &trace.hash_blocks {
        required.push(&hash.column);
    }
    let missing: Vec<&str> = required
        .iter()
        .filter(|c| !columns.contains(c))
        .map(|c| c.as_str())
        .collect();
    if !missing.is_empty() {
        return Err(DataError::Shape {
            path: path.to_owned(),
            message: format!(
                "trace rows lack the required columns {} (guidellm: `Trace row missing required columns`); the \
                 columns are {} — name them with `timestamp_column`, `prompt_tokens_column`, \
                 `output_tokens_column`",
                missing.join(", "),
                columns.join(", ")
            ),
        });
    }
    let field = |row: &Row, column: &str, message: String| DataError::Field {
        path: path.to_owned(),
        row: row.location.clone(),
        column: column.to_owned(),
        message,
    };
    let mut parsed = Vec::with_capacity(rows.len());
    for row in rows {
        let value = |column: &str| match row.values.get(column) {
            None | Some(Value::Null) => Err(field(
                row,
                column,
                format!("no value (guidellm: `Missing column values in {column}`)"),
            )),
            Some(v) => Ok(v),
        };
        let timestamp = match value(&trace.timestamp_column)? {
            Value::Number(n) => n.as_f64(),
            Value::String(s) => s.trim().parse::<f64>().ok(),
            _ => None,
        }
        .filter(|t| t.is_finite())
        .ok_or_else(|| {
            field(
                row,
                &trace.timestamp_column,
                "a timestamp is a number".to_owned(),
            )
        })?;
        let count = |column: &str, what: &str| -> Result<u32, DataError> {
            let n = match value(column)? {
                Value::Number(n) => n
                    .as_i64()
                    .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64)),
                Value::String(s) => s.trim().parse::<i64>().ok(),
                _ => None,
            }
            .ok_or_else(|| field(row, column, format!("{what} is a whole number of tokens")))?;
            if n < 0 {
                return Err(field(
                    row,
                    column,
                    format!(
                        "{n}: trace token counts must be non-negative, as guidellm checks them"
                    ),
                ));
            }
            if n == 0 {
                return Err(field(
                    row,
                    column,
                    format!(
                        "0 tokens: guidellm would send {}; llmbench refuses the row",
                        if what == "the prompt length" {
                            "an empty prompt"
                        } else {
                            "this row without `max_tokens` while the others ask for theirs"
                        }
                    ),
                ));
            }
            if n.unsigned_abs() > MAX_TOKENS {
                return Err(field(
                    row,
                    column,
                    limits::exceeded(Limit::Tokens, n as f64),
                ));
            }
            u32::try_from(n)
                .map_err(|_| field(row, column, format!("{n} does not fit in a token count")))
        };
        let prompt_tokens = count(&trace.prompt_tokens_column, "the prompt length")?;
        let output_tokens = count(&trace.output_tokens_column, "the output length")?;
        let ids = match &trace.hash_blocks {
            Some(hash) => hash_ids(row, &hash.column, prompt_tokens, hash.block_size)
                .map_err(|message| field(row, &hash.column, message))?,
            None => Vec::new(),
        };
        parsed.push((timestamp, prompt_tokens, output_tokens, ids, row));
    }
    // Stable, as Arrow's sort is: rows at one time keep their file order.
    parsed.sort_by(|a, b| a.0.total_cmp(&b.0));
    if let Some(n) = trace.samples {
        let wanted = usize::try_from(n).unwrap_or(usize::MAX);
        if parsed.len() < wanted {
            return Err(DataError::Shape {
                path: path.to_owned(),
                message: format!(
                    "{n} samples asked (`samples`), but the trace has only {} rows, which guidellm refuses",
                    parsed.len()
                ),
            });
        }
        parsed.truncate(wanted);
    }
    let first = parsed.first().map_or(0.0, |p| p.0);
    // In replay order, so the first row sent past the limit is the one named.
    for (timestamp, _, _, _, row) in &parsed {
        let offset = timestamp - first;
        let at = offset * time_scale;
        if at > MAX_DURATION.as_secs_f64() {
            return Err(field(
                row,
                &trace.timestamp_column,
                format!(
                    "{timestamp}: {offset} s after the first row × time_scale {time_scale} = {at} s into the \
                     replay: {}",
                    limits::exceeded(Limit::Duration, at)
                ),
            ));
        }
    }
    Ok(parsed
        .into_iter()
        .map(|(timestamp, prompt_tokens, output_tokens, ids, _)| {
            // `_calculate_required_prompt_tokens`: the rest of the prompt for the row's last id (compared by value,
            // as guidellm compares it) when the block size does not divide the prompt, else a whole block.
            let block_size = trace.hash_blocks.as_ref().map_or(0, |h| h.block_size);
            let rest = if block_size == 0 {
                0
            } else {
                prompt_tokens % block_size
            };
            let last = ids.last().copied();
            let blocks = ids
                .iter()
                .map(|id| {
                    let length = if Some(*id) == last && rest != 0 {
                        rest
                    } else {
                        block_size
                    };
                    (*id, length)
                })
                .collect();
            TraceRow {
                offset: timestamp - first,
                prompt_tokens,
                output_tokens,
                blocks,
            }
        })
        .collect())
}

/// A Mooncake row's hash ids, checked as `MooncakeTraceFormat.validate_row` checks them: whole, not negative, and
/// `ceil(prompt tokens / block size)` of them.
fn hash_ids(
    row: &Row,
    column: &str,
    prompt_tokens: u32,
    block_size: u32,
) -> Result<Vec<u64>, String> {
    let parsed;
    let value = match row.values.get(column) {
        // A CSV cell holds the list as JSON text.
        Some(Value::String(s)) => {
            parsed = serde_json::from_str::<Value>(s)
                .map_err(|_| format!("`{s}` is not a list of hash ids"))?;
            &parsed
        }
        Some(v) => v,
        None => return Err("no value (guidellm: `Missing column values`)".to_owned()),
    };
    let Value::Array(items) = value else {
        return Err("expected a list of hash ids".to_owned());
    };
    let ids = items
        .iter()
        .map(|v| match v.as_i64() {
            Some(id) if id >= 0 => Ok(id as u64),
            Some(id) => Err(format!("Hash ID must be non-negative, got {id}")),
            None => Err(format!("`{v}` is not a hash id")),
        })
        .collect::<Result<Vec<u64>, String>>()?;
    let expected = prompt_tokens.div_ceil(block_size) as usize;
    if ids.len() != expected {
        return Err(format!(
            "Input token count of {prompt_tokens} split into blocks of size {block_size} does not match given {} \
             blocks (guidellm's check: {expected} expected)",
            ids.len()
        ));
    }
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace(samples: Option<u64>) -> GuidellmTrace {
        GuidellmTrace {
            path: "t.jsonl".to_owned(),
            timestamp_column: "timestamp".to_owned(),
            prompt_tokens_column: "input_length".to_owned(),
            output_tokens_column: "output_length".to_owned(),
            samples,
            hash_blocks: None,
        }
    }

    fn rows(values: &[Value]) -> (Vec<String>, Vec<Row>) {
        let rows: Vec<Row> = values
            .iter()
            .enumerate()
            .map(|(i, v)| Row {
                location: format!("line {}", i + 1),
                values: v.as_object().expect("an object").clone(),
            })
            .collect();
        let mut columns = Vec::new();
        for row in &rows {
            for key in row.values.keys() {
                if !columns.contains(key) {
                    columns.push(key.clone());
                }
            }
        }
        (columns, rows)
    }

    #[test]
    fn rows_are_sorted_stably_by_time_and_timed_from_the_first() {
        // guidellm's docs: absolute timestamps 1234500.0 and 1234500.5 are sent 0.5 s apart. Out of order in the
        // file, the two rows at 1234501.0 keep their file order.
        let (columns, rows) = rows(&[
            serde_json::json!({"timestamp": 1234501.0, "input_length": 30, "output_length": 3}),
            serde_json::json!({"timestamp": 1234500.5, "input_length": 512, "output_length": 64}),
            serde_json::json!({"timestamp": 1234501.0, "input_length": 40, "output_length": 4}),
            serde_json::json!({"timestamp": 1234500.0, "input_length": 256, "output_length": 128, "id": "x"}),
        ]);
        let got =
            trace_rows(Path::new("t.jsonl"), &columns, &rows, &trace(None), 1.0).expect("reads");
        let row = |offset, prompt_tokens, output_tokens| TraceRow {
            offset,
            prompt_tokens,
            output_tokens,
            blocks: Vec::new(),
        };
        assert_eq!(
            got,
            vec![
                row(0.0, 256, 128),
                row(0.5, 512, 64),
                row(1.0, 30, 3),
                row(1.0, 40, 4),
            ]
        );
        // `samples` keeps the first rows in time order; more than there are is refused.
        let two =
            trace_rows(Path::new("t.jsonl"), &columns, &rows, &trace(Some(2)), 1.0).expect("reads");
        assert_eq!(two, got[..2].to_vec());
        let e = trace_rows(Path::new("t.jsonl"), &columns, &rows, &trace(Some(5)), 1.0)
            .expect_err("too few");
        assert!(e.to_string().contains("5 samples asked"), "{e}");
    }

    #[test]
    fn csv_cells_are_numbers_and_a_missing_column_or_value_is_refused() {
        let (columns, rows) = rows(&[
            serde_json::json!({"timestamp": "10", "input_length": "8", "output_length": "2"}),
            serde_json::json!({"timestamp": "12.5", "input_length": "9", "output_length": "3"}),
        ]);
        let got =
            trace_rows(Path::new("t.csv"), &columns, &rows, &trace(None), 1.0).expect("reads");
        assert_eq!(got[1].offset, 2.5);
        let (columns, rows) = self::rows(&[serde_json::json!({"ts": 1, "input_length": 8})]);
        let e = trace_rows(Path::new("t.jsonl"), &columns, &rows, &trace(None), 1.0)
            .expect_err("missing");
        assert!(
            e.to_string()
                .contains("lack the required columns timestamp, output_length"),
            "{e}"
        );
        let (columns, rows) = self::rows(&[
            serde_json::json!({"timestamp": 1, "input_length": 8, "output_length": 2}),
            serde_json::json!({"timestamp": null, "input_length": 8, "output_length": 2}),
        ]);
        let e =
            trace_rows(Path::new("t.jsonl"), &columns, &rows, &trace(None), 1.0).expect_err("null");
        assert!(e.to_string().contains("line 2, column `timestamp`"), "{e}");
        let (columns, rows) = self::rows(&[
            serde_json::json!({"timestamp": 1, "input_length": -1, "output_length": 2}),
        ]);
        let e = trace_rows(Path::new("t.jsonl"), &columns, &rows, &trace(None), 1.0)
            .expect_err("negative");
        assert!(e.to_string().contains("must be non-negative"), "{e}");
    }

    #[test]
    fn send_times_and_token_counts_past_the_profile_limits_are_refused_by_row_and_column() {
        let refused = |rows: &[Value], time_scale: f64| {
            let (columns, rows) = self::rows(rows);
            trace_rows(
                Path::new("t.jsonl"),
                &columns,
                &rows,
                &trace(None),
                time_scale,
            )
            .expect_err("refused")
            .to_string()
        };
        let row = |ts: Value, input: u64, output: u64| serde_json::json!({"timestamp": ts, "input_length": input, "output_length": output});
        // 40 days after the first row; 2^64 (serde_json reads it as the float 1.8446744073709552e19).
        for late in [
            serde_json::json!(40 * 24 * 3600),
            serde_json::json!(1e15),
            serde_json::from_str::<Value>("18446744073709551616").expect("a number"),
        ] {
            let e = refused(&[row(serde_json::json!(0), 8, 2), row(late, 8, 2)], 1.0);
            assert!(e.contains("line 2, column `timestamp`"), "{e}");
            assert!(e.contains("limit of 2592000 seconds (30 days)"), "{e}");
        }
        // One second apart is 10^9 s at time_scale 1e9; the last second within 30 days passes.
        let e = refused(
            &[
                row(serde_json::json!(0), 8, 2),
                row(serde_json::json!(1), 8, 2),
            ],
            1e9,
        );
        assert!(e.contains("= 1000000000 s into the replay"), "{e}");
        let (columns, rows) = self::rows(&[
            row(serde_json::json!(0), 8, 2),
            row(serde_json::json!(2_592_000), 8, 2),
        ]);
        trace_rows(Path::new("t.jsonl"), &columns, &rows, &trace(None), 1.0)
            .expect("30 days exactly");
        // A billion tokens is refused before any text is made of it.
        let e = refused(&[row(serde_json::json!(0), 1_000_000_000, 2)], 1.0);
        assert!(e.contains("line 1, column `input_length`: 1000000000 is above llmbench's limit of 10000000 tokens"), "{e}");
        let e = refused(&[row(serde_json::json!(0), 8, 1_000_000_000)], 1.0);
        assert!(e.contains("column `output_length`"), "{e}");
    }

    fn mooncake(block_size: u32) -> GuidellmTrace {
        GuidellmTrace {
            hash_blocks: Some(crate::workload::guidellm_replay::HashBlocks {
                column: "hash_ids".to_owned(),
                block_size,
            }),
            ..trace(None)
        }
    }

    #[test]
    fn mooncake_blocks_are_whole_but_the_last_which_holds_the_rest() {
        // Blocks of 4: 10 tokens are 4 + 4 + 2, 8 are 4 + 4, 6 are 4 + 2 (`_calculate_required_prompt_tokens`).
        let (columns, rows) = rows(&[
            serde_json::json!({"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [1, 2, 3]}),
            serde_json::json!({"timestamp": 1, "input_length": 8, "output_length": 1, "hash_ids": [1, 2]}),
            serde_json::json!({"timestamp": 2, "input_length": 6, "output_length": 1, "hash_ids": [1, 5]}),
        ]);
        let got =
            trace_rows(Path::new("t.jsonl"), &columns, &rows, &mooncake(4), 1.0).expect("reads");
        let blocks: Vec<Vec<(u64, u32)>> = got.iter().map(|r| r.blocks.clone()).collect();
        assert_eq!(
            blocks,
            vec![
                vec![(1, 4), (2, 4), (3, 2)],
                vec![(1, 4), (2, 4)],
                vec![(1, 4), (5, 2)]
            ]
        );
        // guidellm's checks: ceil(10 / 4) = 3 ids, none negative.
        for (ids, needle) in [
            (serde_json::json!([1, 2]), "does not match given 2 blocks"),
            (
                serde_json::json!([1, -2, 3]),
                "Hash ID must be non-negative, got -2",
            ),
        ] {
            let (columns, rows) = self::rows(&[serde_json::json!(
                {"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": ids}
            )]);
            let e = trace_rows(Path::new("t.jsonl"), &columns, &rows, &mooncake(4), 1.0)
                .expect_err("refused");
            assert!(e.to_string().contains(needle), "{e}");
        }
    }

    #[test]
    fn rows_naming_the_same_hash_ids_send_the_same_blocks() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("t.jsonl");
        std::fs::write(
            &path,
            "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 3, \"hash_ids\": [1, 2, 3]}\n\
             {\"timestamp\": 1, \"input_length\": 8, \"output_length\": 2, \"hash_ids\": [1, 2]}\n\
             {\"timestamp\": 2, \"input_length\": 6, \"output_length\": 1, \"hash_ids\": [7, 5]}\n",
        )
        .expect("writes");
        let trace = GuidellmTrace {
            path: path.to_str().expect("utf-8").to_owned(),
            ..mooncake(4)
        };
        let got = guidellm_trace_requests(&trace, 1.0, &Tokenizer::builtin(), 7).expect("builds");
        let [(_, a), (_, b), (_, c)] = got.as_slice() else {
            panic!("three requests: {got:?}");
        };
        // The builtin tokenizer adds no special token: lengths are the blocks' own.
        assert_eq!((a.input_tokens, b.input_tokens, c.input_tokens), (10, 8, 6));
        assert_eq!(
            (a.max_tokens, b.max_tokens, c.max_tokens),
            (Some(3), Some(2), Some(1))
        );
        // Blocks 1 and 2 are the same text in both rows; block 7 is not block 1.
        assert!(a.text.starts_with(&format!("{} ", b.text)), "{a:?}\n{b:?}");
        fn opening(text: &str) -> Vec<&str> {
            text.split(' ').take(4).collect()
        }
        assert_ne!(opening(&c.text), opening(&b.text), "{c:?}");
    }
}
