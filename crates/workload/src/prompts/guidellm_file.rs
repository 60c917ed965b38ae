//! guidellm data from a local file, as guidellm turns it into requests (`vllm-project/guidellm`, commit ee7a774):
//!
//! - **Reading** (`data/deserializers/file.py`): `.json`/`.jsonl` through Hugging Face's JSON loader (records one per
//!   line, or an array of records), `.csv` with a header row, `.txt`/`.text` one row per line (`readlines`, so
//!   each row's `text` keeps its line break). Columns are the records' keys in the order they first appear.
//! - **Columns** (`data/preprocessors/mappers.py`, `GenerativeColumnMapper`): for each column type, the first
//!   column (in the file's order) whose name is one of the candidates — case-insensitive, with an optional plural
//!   `s`/`es` and an optional `-N`/`_N` turn suffix (`^(name)(es|s)?([-_]\d+)?$`). The defaults: `text_column`
//!   (prompt, instruction, question, input, context, content, conversation, turn, text), `prefix_column`
//!   (system_prompt, system, prefix), `prompt_tokens_count_column`, `output_tokens_count_column`, and the media,
//!   tool and timing columns. `column_mappings` replaces the defaults.
//! - **Rows** (pytorch loader): in file order; `samples` takes the first N (fewer rows is an error), otherwise every
//!   row, again from the top once used up.
//! - **Requests** (`backends/openai/request_handlers.py`): completions send `prompt` = prefix and text joined by
//!   spaces; chat sends the prefix as a system message and the text as the user's text part. A row's output token
//!   count (summed over its count columns, zeros left out) becomes `max_tokens` / `max_completion_tokens` with
//!   `stop: null` and `ignore_eos: true`; without one the backend's `max_tokens`, if any, is sent.
//!
//! What llmbench does not send is refused by name: a row of several turns (`prompt_1`, …), media, tools and
//! per-row timing columns. A row guidellm would drop with an error (a missing or non-text prompt) is left out and
//! counted, as guidellm skips it.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::{PromptError, csv_error, csv_reader};
use crate::workload::{GuidellmFile, GuidellmFileFormat};
use llmbench_data::{ChatMessage, DataError, Prompt, Prompts};
use llmbench_text::tokenizer::Tokenizer;

/// guidellm's default candidates per column type (`GenerativeColumnMapper.defaults`), in its order.
const DEFAULT_COLUMNS: &[(&str, &[&str])] = &[
    (
        PROMPT_TOKENS,
        &["prompt_tokens_count", "input_tokens_count"],
    ),
    (
        OUTPUT_TOKENS,
        &["output_tokens_count", "completion_tokens_count"],
    ),
    (PREFIX, &["system_prompt", "system", "prefix"]),
    (
        TEXT,
        &[
            "prompt",
            "instruction",
            "question",
            "input",
            "context",
            "content",
            "conversation",
            "turn",
            "text",
        ],
    ),
    ("image_column", &["image", "picture", "photo", "img"]),
    (
        "video_column",
        &["video", "clip", "movie", "footage", "mp4", "mov", "avi"],
    ),
    (
        "audio_column",
        &["audio", "sound", "voice", "speech", "wav", "mp3"],
    ),
    ("tools_column", &["tools", "functions", "tool_definitions"]),
    (
        "tool_response_column",
        &["tool_response", "tool_result", "tool_output"],
    ),
    ("relative_timestamp_column", &["relative_timestamp"]),
    ("requeue_delay_column", &["requeue_delay"]),
    ("conversation_turns_column", &["conversation_turns"]),
];

const TEXT: &str = "text_column";
const PREFIX: &str = "prefix_column";
const PROMPT_TOKENS: &str = "prompt_tokens_count_column";
const OUTPUT_TOKENS: &str = "output_tokens_count_column";

/// The column types llmbench sends; a file with a column of any other type is refused.
const SENT: &[&str] = &[TEXT, PREFIX, PROMPT_TOKENS, OUTPUT_TOKENS];

/// One row of the file as guidellm's mapper sees it: where it is, and its values by column name.
pub(super) struct Row {
    pub(super) location: String,
    pub(super) values: Map<String, Value>,
}

/// The columns each type maps to, for turn 0, in the order guidellm reads them.
#[derive(Debug, Default, PartialEq)]
struct Mapping {
    text: Option<String>,
    prefix: Option<String>,
    output_tokens: Option<String>,
}

/// The prompts of a guidellm data file: one per row (the first `samples`, or all), bodies as the request handlers
/// build them, input tokens counted with the run's tokenizer.
pub(super) fn guidellm_file_prompts(
    file: &GuidellmFile,
    tokenizer: &Tokenizer,
) -> Result<Prompts, PromptError> {
    let path = PathBuf::from(&file.path);
    let (columns, rows) = read_rows(&path, file.format)?;
    let mapping = map_columns(&path, &columns, file.column_mappings.as_deref())?;
    let Some(text_column) = mapping.text.clone() else {
        return Err(DataError::Shape {
            path,
            message: format!(
                "no column holds the prompt text: guidellm reads it from a column named {} (or set \
                 `data_column_mapper.column_mappings.text_column`); the columns are {}",
                candidates(file.column_mappings.as_deref(), TEXT).join(", "),
                columns.join(", ")
            ),
        }
        .into());
    };
    let rows = match file.samples {
        Some(n) => {
            let wanted = usize::try_from(n).unwrap_or(usize::MAX);
            if rows.len() < wanted {
                return Err(DataError::Shape {
                    path,
                    message: format!(
                        "{n} samples asked (`samples`), but the file has only {} rows, which guidellm refuses",
                        rows.len()
                    ),
                }
                .into());
            }
            &rows[..wanted]
        }
        None => &rows[..],
    };
    let mut prompts = Vec::with_capacity(rows.len());
    let mut skipped = 0;
    let mut with_output = None::<(bool, String)>;
    for row in rows {
        let Some(text) = row.values.get(&text_column).and_then(Value::as_str) else {
            // guidellm's handler cannot join a missing or non-text value: the row errors and is skipped.
            skipped += 1;
            continue;
        };
        let prefix = match &mapping.prefix {
            Some(column) => match row.values.get(column) {
                Some(Value::String(s)) => Some(s.as_str()),
                _ => {
                    skipped += 1;
                    continue;
                }
            },
            None => None,
        };
        let output = match &mapping.output_tokens {
            Some(column) => {
                output_count(row.values.get(column)).map_err(|message| DataError::Field {
                    path: path.clone(),
                    row: row.location.clone(),
                    column: column.clone(),
                    message,
                })?
            }
            None => None,
        };
        let max_tokens = match (output, file.default_max_tokens) {
            (Some(n), _) => Some(n),
            (None, Some(n)) => Some(u32::try_from(n).map_err(|_| PromptError::TooLarge {
                what: "max_tokens",
                value: n,
            })?),
            (None, None) => None,
        };
        // Whether a row asks for its length decides `ignore_eos`, which the run sets for all its requests: rows
        // that differ are refused rather than sent otherwise than guidellm sends them.
        match &with_output {
            None => with_output = Some((output.is_some(), row.location.clone())),
            Some((first, at)) if *first != output.is_some() => {
                return Err(DataError::Field {
                    path,
                    row: row.location.clone(),
                    column: mapping.output_tokens.clone().unwrap_or_default(),
                    message: format!(
                        "{} an output token count, unlike {at}; guidellm sends `ignore_eos` only with one, and \
                         llmbench needs every row alike: give every row a count, or none",
                        if output.is_some() { "has" } else { "lacks" }
                    ),
                }
                .into());
            }
            Some(_) => {}
        }
        let joined = match prefix {
            Some(prefix) => format!("{prefix} {text}"),
            None => text.to_owned(),
        };
        let input_tokens = tokenizer
            .count(&joined)
            .map_err(|source| DataError::Tokenize {
                path: path.clone(),
                row: row.location.clone(),
                source,
            })?;
        let mut prompt = Prompt::text(joined, input_tokens, max_tokens);
        let mut messages = Vec::with_capacity(2);
        if let Some(prefix) = prefix.filter(|p| !p.is_empty()) {
            messages.push(ChatMessage {
                role: "system".to_owned(),
                content: prefix.to_owned(),
            });
        }
        messages.push(ChatMessage {
            role: "user".to_owned(),
            content: text.to_owned(),
        });
        prompt.messages = Some(messages);
        prompts.push(prompt);
    }
    if prompts.is_empty() {
        return Err(DataError::NoPrompts {
            path,
            reason: format!(
                "none of its {} rows has text in `{text_column}`{}",
                rows.len(),
                mapping
                    .prefix
                    .as_ref()
                    .map(|p| format!(" and `{p}`"))
                    .unwrap_or_default()
            ),
        }
        .into());
    }
    Ok(Prompts::new(prompts, skipped))
}

/// Whether guidellm sends `ignore_eos` with the file's requests: with the rows' output token counts (the loader
/// makes every row alike), so whether the file has a column of them.
pub(super) fn asks_exact_lengths(file: &GuidellmFile) -> Result<bool, PromptError> {
    let path = PathBuf::from(&file.path);
    let (columns, _) = read_rows(&path, file.format)?;
    Ok(
        map_columns(&path, &columns, file.column_mappings.as_deref())?
            .output_tokens
            .is_some(),
    )
}

/// A row's output token count as guidellm's finalizer sums it: nonzero counts only; a count of 0 or none is no
/// length at all.
fn output_count(value: Option<&Value>) -> Result<Option<u32>, String> {
    let n: i128 = match value {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Number(n)) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => i128::from(i),
            (None, Some(f)) if f.is_finite() && f.fract() == 0.0 => f as i128,
            _ => return Err(format!("`{n}` is not a whole number of tokens")),
        },
        // A CSV cell: pandas reads a column of integers as integers.
        Some(Value::String(s)) if s.trim().is_empty() => return Ok(None),
        Some(Value::String(s)) => s
            .trim()
            .parse::<i128>()
            .map_err(|_| format!("`{s}` is not a whole number of tokens"))?,
        Some(other) => {
            return Err(format!(
                "expected a token count, found {}",
                llmbench_data::json_kind(other)
            ));
        }
    };
    match n {
        0 => Ok(None),
        n if n < 0 => Err(format!("{n} is not a token count")),
        n => u32::try_from(n)
            .map(Some)
            .map_err(|_| format!("{n} does not fit in a 32-bit token count")),
    }
}

/// The candidates of one column type: the profile's mapping, else guidellm's defaults.
fn candidates(mappings: Option<&[(String, Vec<String>)]>, column_type: &str) -> Vec<String> {
    match mappings {
        Some(mappings) => mappings
            .iter()
            .filter(|(t, _)| t == column_type)
            .flat_map(|(_, names)| names.clone())
            .collect(),
        None => DEFAULT_COLUMNS
            .iter()
            .filter(|(t, _)| *t == column_type)
            .flat_map(|(_, names)| names.iter().map(|n| (*n).to_owned()))
            .collect(),
    }
}

/// guidellm's column resolution for one file: per column type, the first column matching a candidate, and every
/// column of the same base name as its turns.
fn map_columns(
    path: &Path,
    columns: &[String],
    mappings: Option<&[(String, Vec<String>)]>,
) -> Result<Mapping, DataError> {
    let types: Vec<(String, Vec<String>)> = match mappings {
        Some(m) => m.to_vec(),
        None => DEFAULT_COLUMNS
            .iter()
            .map(|(t, names)| {
                (
                    (*t).to_owned(),
                    names.iter().map(|n| (*n).to_owned()).collect(),
                )
            })
            .collect(),
    };
    let mut mapping = Mapping::default();
    for (column_type, names) in &types {
        // `dataset.column` names belong to one dataset of several; this file is guidellm's dataset 0.
        let names: Vec<&str> = names
            .iter()
            .filter_map(|n| match n.split_once('.') {
                Some(("0", column)) => Some(column),
                Some(_) => None,
                None => Some(n.as_str()),
            })
            .collect();
        let Some(base) = columns
            .iter()
            .find_map(|c| names.iter().find_map(|n| base_name(c, n)))
        else {
            continue;
        };
        let turns: Vec<(u64, &String)> = {
            let mut count = 0;
            let mut turns = Vec::new();
            for c in columns {
                if let Some((_, suffix)) = name_match(c, base) {
                    turns.push((suffix.unwrap_or(count), c));
                    count += 1;
                }
            }
            turns.sort();
            turns
        };
        if !SENT.contains(&column_type.as_str()) {
            return Err(DataError::Shape {
                path: path.to_owned(),
                message: format!(
                    "column `{}` is guidellm's `{column_type}`, which llmbench does not send (text, prefix and \
                     token-count columns only); leave it out of the file or map the type to nothing",
                    turns.first().map_or(base, |(_, c)| c.as_str())
                ),
            });
        }
        if turns.len() > 1 || turns.first().is_some_and(|(turn, _)| *turn > 0) {
            let names: Vec<&str> = turns.iter().map(|(_, c)| c.as_str()).collect();
            return Err(DataError::Shape {
                path: path.to_owned(),
                message: format!(
                    "columns {} make each row a conversation of several turns for guidellm's `{column_type}`; \
                     llmbench sends guidellm data files one turn per row",
                    names.join(", ")
                ),
            });
        }
        let column = turns.first().map(|(_, c)| (*c).clone());
        match column_type.as_str() {
            TEXT => mapping.text = column,
            PREFIX => mapping.prefix = column,
            OUTPUT_TOKENS => mapping.output_tokens = column,
            _ => {}
        }
    }
    Ok(mapping)
}

/// The candidate's spelling in `column` when `column` is `name` with guidellm's plural and turn suffixes.
fn base_name<'c>(column: &'c str, name: &str) -> Option<&'c str> {
    name_match(column, name).map(|(base, _)| base)
}

/// `^(name)(es|s)?([-_](\d+))?$`, case-insensitive: the part of `column` that spells `name`, and the turn suffix.
fn name_match<'c>(column: &'c str, name: &str) -> Option<(&'c str, Option<u64>)> {
    let head = column.get(..name.len())?;
    if !head.eq_ignore_ascii_case(name) {
        return None;
    }
    let rest = &column[name.len()..];
    let lower = rest.to_ascii_lowercase();
    // The regex tries `es`, then `s`, then neither, backtracking when the rest does not fit.
    for plural in ["es", "s", ""] {
        let Some(after) = lower.strip_prefix(plural) else {
            continue;
        };
        if after.is_empty() {
            return Some((head, None));
        }
        if let Some(digits) = after.strip_prefix(['-', '_'])
            && !digits.is_empty()
            && digits.bytes().all(|b| b.is_ascii_digit())
        {
            return Some((head, digits.parse().ok()));
        }
    }
    None
}

/// The file's column names (in first-seen order) and rows.
pub(super) fn read_rows(
    path: &Path,
    format: GuidellmFileFormat,
) -> Result<(Vec<String>, Vec<Row>), DataError> {
    if format == GuidellmFileFormat::Parquet {
        let rows: Vec<Row> = llmbench_data::parquet_rows(path)?
            .into_iter()
            .enumerate()
            .map(|(i, values)| Row {
                location: format!("row {}", i + 1),
                values,
            })
            .collect();
        return Ok((columns_of(&rows), rows));
    }
    let bytes = std::fs::read(path).map_err(|source| DataError::Read {
        path: path.to_owned(),
        source,
    })?;
    let text = String::from_utf8(bytes).map_err(|e| DataError::Shape {
        path: path.to_owned(),
        message: format!("not UTF-8 text: {}", e.utf8_error()),
    })?;
    let rows = match format {
        GuidellmFileFormat::Text => text
            .split_inclusive('\n')
            .enumerate()
            .map(|(i, line)| Row {
                location: format!("line {}", i + 1),
                values: Map::from_iter([("text".to_owned(), Value::String(line.to_owned()))]),
            })
            .collect(),
        GuidellmFileFormat::Csv => csv_rows(path, &text)?,
        GuidellmFileFormat::Json => json_rows(path, &text)?,
        GuidellmFileFormat::Parquet => Vec::new(),
    };
    Ok((columns_of(&rows), rows))
}

/// The rows' column names, in first-seen order.
fn columns_of(rows: &[Row]) -> Vec<String> {
    let mut columns: Vec<String> = Vec::new();
    for row in rows {
        for key in row.values.keys() {
            if !columns.contains(key) {
                columns.push(key.clone());
            }
        }
    }
    columns
}

fn csv_rows(path: &Path, text: &str) -> Result<Vec<Row>, DataError> {
    let csv_error = csv_error(path);
    let mut reader = csv_reader(text);
    let headers: Vec<String> = reader
        .headers()
        .map_err(csv_error)?
        .iter()
        .map(str::to_owned)
        .collect();
    let mut rows = Vec::new();
    for record in reader.records() {
        let record = record.map_err(csv_error)?;
        let line = record.position().map_or(0, csv::Position::line);
        let mut values = Map::new();
        for (name, cell) in headers.iter().zip(record.iter()) {
            // An empty cell is a missing value, as pandas reads it.
            let value = if cell.is_empty() {
                Value::Null
            } else {
                Value::String(cell.to_owned())
            };
            values.insert(name.clone(), value);
        }
        rows.push(Row {
            location: format!("line {line}"),
            values,
        });
    }
    Ok(rows)
}

/// Records one per line, or (a `.json` file) one array of records, as Hugging Face's JSON loader reads both.
fn json_rows(path: &Path, text: &str) -> Result<Vec<Row>, DataError> {
    let record = |location: String, value: Value| match value {
        Value::Object(values) => Ok(Row { location, values }),
        other => Err(DataError::Field {
            path: path.to_owned(),
            row: location,
            column: "-".to_owned(),
            message: format!(
                "expected a record (a JSON object), found {}",
                llmbench_data::json_kind(&other)
            ),
        }),
    };
    if text.trim_start().starts_with('[') {
        let value: Value = serde_json::from_str(text).map_err(|e| DataError::Json {
            path: path.to_owned(),
            line: e.line(),
            column: e.column(),
            message: e.to_string(),
        })?;
        let items = match value {
            Value::Array(items) => items,
            other => vec![other],
        };
        return items
            .into_iter()
            .enumerate()
            .map(|(i, v)| record(format!("row {}", i + 1), v))
            .collect();
    }
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(i, line)| {
            let value: Value = serde_json::from_str(line).map_err(|e| DataError::Json {
                path: path.to_owned(),
                line: i + 1,
                column: e.column(),
                message: e.to_string(),
            })?;
            record(format!("line {}", i + 1), value)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn columns(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    #[test]
    fn a_column_matches_its_name_in_any_case_with_a_plural_and_a_turn_suffix() {
        assert_eq!(name_match("prompt", "prompt"), Some(("prompt", None)));
        assert_eq!(name_match("Prompts", "prompt"), Some(("Prompt", None)));
        assert_eq!(
            name_match("questiones", "question"),
            Some(("question", None))
        );
        assert_eq!(name_match("prompt_2", "prompt"), Some(("prompt", Some(2))));
        assert_eq!(
            name_match("prompts-10", "prompt"),
            Some(("prompt", Some(10)))
        );
        // Not the name with something else after it.
        assert_eq!(name_match("prompt_tokens_count", "prompt"), None);
        assert_eq!(name_match("prompt_", "prompt"), None);
        assert_eq!(name_match("prom", "prompt"), None);
    }

    #[test]
    fn the_first_column_in_file_order_wins_not_the_first_candidate() {
        // `question` comes before `prompt` in the file: guidellm's search over the joined column names finds it
        // first, although `prompt` heads the candidate list.
        let path = Path::new("d.jsonl");
        let mapping =
            map_columns(path, &columns(&["id", "question", "prompt"]), None).expect("maps");
        assert_eq!(mapping.text.as_deref(), Some("question"));
        let mapping = map_columns(
            path,
            &columns(&[
                "system",
                "text",
                "output_tokens_count",
                "prompt_tokens_count",
            ]),
            None,
        )
        .expect("maps");
        assert_eq!(
            mapping,
            Mapping {
                text: Some("text".to_owned()),
                prefix: Some("system".to_owned()),
                output_tokens: Some("output_tokens_count".to_owned()),
            }
        );
    }

    #[test]
    fn given_mappings_replace_the_defaults() {
        let path = Path::new("d.jsonl");
        let mappings = vec![("text_column".to_owned(), vec!["body".to_owned()])];
        let mapping =
            map_columns(path, &columns(&["prompt", "body"]), Some(&mappings)).expect("maps");
        assert_eq!(mapping.text.as_deref(), Some("body"));
        assert_eq!(mapping.prefix, None);
    }

    #[test]
    fn turn_media_and_tool_columns_are_refused_by_name() {
        let path = Path::new("d.jsonl");
        let err = map_columns(path, &columns(&["prompt_0", "prompt_1"]), None)
            .expect_err("refused")
            .to_string();
        assert!(
            err.contains("columns prompt_0, prompt_1") && err.contains("one turn per row"),
            "{err}"
        );
        let err = map_columns(path, &columns(&["prompt", "image"]), None)
            .expect_err("refused")
            .to_string();
        assert!(
            err.contains("column `image` is guidellm's `image_column`"),
            "{err}"
        );
    }

    #[test]
    fn output_counts_are_whole_positive_numbers_and_zero_is_none() {
        assert_eq!(output_count(Some(&Value::from(7))), Ok(Some(7)));
        assert_eq!(output_count(Some(&Value::from(7.0))), Ok(Some(7)));
        assert_eq!(output_count(Some(&Value::from("12"))), Ok(Some(12)));
        assert_eq!(output_count(Some(&Value::from(0))), Ok(None));
        assert_eq!(output_count(None), Ok(None));
        assert!(output_count(Some(&Value::from(2.5))).is_err());
        assert!(output_count(Some(&Value::from(-3))).is_err());
    }
}
