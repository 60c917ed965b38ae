//! Prompts from dataset files: ShareGPT conversations, and tables of prompts as JSON (an array of records, or
//! an object of columns), JSONL or CSV.
//!
//! Table columns: `input` (alias `prompt`, vLLM `custom`'s name) is the prompt text; `tok_input` is the prompt as
//! token ids (sent as a token-id prompt; a list, or in CSV a JSON list in a cell); `output` is the reference
//! answer, whose token count becomes `max_tokens` unless a fixed output length is given. Errors name the file, the
//! line or row, and the column.

use std::path::Path;

use serde_json::{Map, Value};

use super::{DataError, DatasetOptions, Prompt, Prompts};
use llmbench_text::py_random::PyRandom;
use llmbench_text::tokenizer::Tokenizer;

const INPUT_COLUMNS: [&str; 2] = ["input", "prompt"];
const TOKENS_COLUMN: &str = "tok_input";
const OUTPUT_COLUMN: &str = "output";

/// ShareGPT conversations (vLLM `sharegpt`, inference-perf `shareGPT`): as both tools read them, an entry needs two
/// turns or more; turn 0 is the prompt and turn 1 the reference output, whatever their roles, and the reference's
/// length is `max_tokens` unless `options.output_tokens` is set. Entries are filtered as vLLM does (see
/// [`DatasetOptions`]). Each prompt also carries every turn of its entry as chat messages (`human` → user, `gpt`
/// → assistant, any other role user), which inference-perf's chat API sends.
pub fn load_sharegpt(
    path: &Path,
    tokenizer: &Tokenizer,
    options: &DatasetOptions,
) -> Result<Prompts, DataError> {
    let bytes = read(path)?;
    let mut entries: Vec<(String, Value)> = if extension(path) == "jsonl" {
        jsonl_values(path, &bytes)?
    } else {
        match parse_json(path, &bytes)? {
            Value::Array(items) => items
                .into_iter()
                .enumerate()
                .map(|(i, v)| (format!("entry {}", i + 1), v))
                .collect(),
            _ => {
                return Err(DataError::Shape {
                    path: path.to_owned(),
                    message:
                        "a ShareGPT file is a JSON array of {\"conversations\": [...]} entries"
                            .to_owned(),
                });
            }
        }
    };
    let total = entries.len();
    if options.vllm_entries {
        // `ShareGPTDataset.load_data`: the entries whose `conversations` hold two turns or more, shuffled or not;
        // the shuffle must see exactly vLLM's list to give its order.
        entries.retain(|(_, entry)| {
            entry
                .get("conversations")
                .and_then(Value::as_array)
                .is_some_and(|turns| turns.len() >= 2)
        });
    }
    if let Some(seed) = options.shuffle_seed {
        // `random.seed(seed); random.shuffle(data)`.
        PyRandom::seed(seed).shuffle(&mut entries);
    }
    let turns: Vec<(String, Exchange)> = entries
        .into_iter()
        .filter_map(|(location, entry)| first_exchange(&entry).map(|e| (location, e)))
        .collect();
    let mut skipped = total - turns.len();
    let limit = options.limit.unwrap_or(usize::MAX);
    let mut prompts = Vec::new();
    for (location, exchange) in turns {
        let Exchange {
            prompt,
            completion,
            messages,
            image,
            video,
        } = exchange;
        if prompts.len() >= limit {
            break;
        }
        let count = |text: &str| {
            tokenizer.count(text).map_err(|source| DataError::Tokenize {
                path: path.to_owned(),
                row: location.clone(),
                source,
            })
        };
        let prompt_len = count(&prompt)?;
        let output_len = match options.output_tokens {
            Some(n) => n,
            None => count(&completion)?,
        };
        let too_short = prompt_len < options.min_tokens
            || (options.output_tokens.is_none() && output_len < options.min_tokens);
        let too_long = options
            .max_prompt_tokens
            .is_some_and(|max| prompt_len > max)
            || options
                .max_total_tokens
                .is_some_and(|max| u64::from(prompt_len) + u64::from(output_len) > u64::from(max));
        if too_short || too_long {
            skipped += 1;
            continue;
        }
        let mut p = Prompt::text(prompt, prompt_len, Some(output_len));
        p.output = Some(completion);
        p.messages = Some(messages);
        if options.images {
            let shape = |message: String| DataError::Shape {
                path: path.to_owned(),
                message: format!("{location}: {message}"),
            };
            match (image, video) {
                (Some(Value::String(image)), _) => {
                    p.images = vec![crate::image::ImageInput::named(&image)]
                }
                (Some(other), _) => {
                    return Err(shape(format!(
                        "`image` must be a path or URL (vLLM's process_image takes a string), found {other}"
                    )));
                }
                (None, true) => {
                    return Err(shape(
                        "a `video`, which vLLM sends as a video_url part; llmbench sends no video"
                            .to_owned(),
                    ));
                }
                (None, false) => {}
            }
        }
        prompts.push(p);
    }
    if prompts.is_empty() {
        let bound = |b: Option<u32>| b.map_or_else(|| "any".to_owned(), |n| n.to_string());
        return Err(DataError::NoPrompts {
            path: path.to_owned(),
            reason: format!(
                "{total} entries, {skipped} with fewer than two turns or outside the length limits (prompt ≥ {}, \
                 prompt ≤ {}, prompt + output ≤ {} tokens)",
                options.min_tokens,
                bound(options.max_prompt_tokens),
                bound(options.max_total_tokens)
            ),
        });
    }
    Ok(Prompts::new(prompts, skipped))
}

/// An entry's first two turns, and every turn as a chat message.
struct Exchange {
    prompt: String,
    completion: String,
    messages: Vec<super::ChatMessage>,
    /// The entry's `image` and `video` (ShareGPT4V), as vLLM reads them: present when not empty.
    image: Option<Value>,
    video: bool,
}

/// Turns 0 and 1 of an entry's `conversations` (vLLM's and inference-perf's rule: positions, not roles). A turn
/// written as a JSON object inside a string is read as that object (inference-perf issue #429).
fn first_exchange(entry: &Value) -> Option<Exchange> {
    let turns = entry
        .get("conversations")
        .or_else(|| entry.get("conversation"))
        .and_then(Value::as_array)?;
    if turns.len() < 2 {
        return None;
    }
    let turn = |t: &Value| -> Option<Value> {
        match t {
            Value::String(s) => serde_json::from_str::<Value>(s)
                .ok()
                .filter(Value::is_object),
            Value::Object(_) => Some(t.clone()),
            _ => None,
        }
    };
    let text = |t: &Value| {
        t.get("value")
            .or_else(|| t.get("content"))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let role = |t: &Value| match t
        .get("from")
        .or_else(|| t.get("role"))
        .and_then(Value::as_str)
    {
        Some("gpt" | "assistant") => "assistant",
        _ => "user",
    };
    let mut messages = Vec::with_capacity(turns.len().min(1024));
    for t in turns {
        let t = turn(t)?;
        messages.push(super::ChatMessage {
            role: role(&t).to_owned(),
            content: text(&t)?,
        });
    }
    // Python's truthiness: `if image_path := entry.get("image")`.
    let truthy = |v: &&Value| {
        !matches!(v, Value::Null | Value::Bool(false)) && *v != "" && *v != &Value::Array(vec![])
    };
    Some(Exchange {
        prompt: messages[0].content.clone(),
        completion: messages[1].content.clone(),
        messages,
        image: entry.get("image").filter(truthy).cloned(),
        video: entry.get("video").filter(truthy).is_some(),
    })
}

/// A table of prompts: `.json`, `.jsonl`, `.csv` or `.parquet` (see the module docs for the columns).
pub fn load_dataset(
    path: &Path,
    tokenizer: &Tokenizer,
    options: &DatasetOptions,
) -> Result<Prompts, DataError> {
    let bytes = read_raw(path)?;
    let mut rows = match extension(path).as_str() {
        _ if is_pickle(path, &bytes) => llmbench_text::pickle::read_dataframe(&bytes)
            .map_err(|source| DataError::PickledFrame {
                path: path.to_owned(),
                source,
            })?
            .into_iter()
            .enumerate()
            .map(|(i, row)| record(path, format!("row {}", i + 1), Value::Object(row)))
            .collect::<Result<Vec<_>, _>>()?,
        "jsonl" | "ndjson" => jsonl_values(path, &bytes)?
            .into_iter()
            .map(|(location, value)| record(path, location, value))
            .collect::<Result<Vec<_>, _>>()?,
        "json" => json_rows(path, &bytes)?,
        "csv" => csv_rows(path, &bytes)?,
        "parquet" => crate::parquet_rows(path)?
            .into_iter()
            .enumerate()
            .map(|(i, row)| record(path, format!("row {}", i + 1), Value::Object(row)))
            .collect::<Result<Vec<_>, _>>()?,
        _ => {
            return Err(DataError::UnsupportedFormat {
                path: path.to_owned(),
            });
        }
    };
    if rows.is_empty() {
        return Err(DataError::NoPrompts {
            path: path.to_owned(),
            reason: "the file has no rows".to_owned(),
        });
    }
    rows.truncate(options.limit.unwrap_or(usize::MAX));
    let prompts = rows
        .into_iter()
        .map(|row| row.into_prompt(path, tokenizer, options))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Prompts::new(prompts, 0))
}

/// One table row, its columns read but not yet tokenised.
#[derive(Debug)]
struct Row {
    location: String,
    input: Option<String>,
    tok_input: Option<Vec<u32>>,
    output: Option<String>,
}

impl Row {
    fn into_prompt(
        self,
        path: &Path,
        tokenizer: &Tokenizer,
        options: &DatasetOptions,
    ) -> Result<Prompt, DataError> {
        let tokenize_error = |source| DataError::Tokenize {
            path: path.to_owned(),
            row: self.location.clone(),
            source,
        };
        let field_error = |column: &str, message: &str| DataError::Field {
            path: path.to_owned(),
            row: self.location.clone(),
            column: column.to_owned(),
            message: message.to_owned(),
        };
        let mut prompt = match (self.input, self.tok_input) {
            (_, Some(ids)) if ids.is_empty() => {
                return Err(field_error(TOKENS_COLUMN, "empty token list"));
            }
            (input, Some(ids)) => {
                let text = match input {
                    Some(text) => text,
                    None => tokenizer.decode(&ids).map_err(tokenize_error)?,
                };
                let mut p = Prompt::text(text, u32::try_from(ids.len()).unwrap_or(u32::MAX), None);
                p.token_ids = Some(ids);
                p
            }
            (Some(text), None) if text.trim().is_empty() => {
                return Err(field_error("input", "empty prompt"));
            }
            (Some(text), None) => {
                let n = tokenizer.count(&text).map_err(tokenize_error)?;
                Prompt::text(text, n, None)
            }
            (None, None) => {
                return Err(field_error(
                    "input",
                    "missing: each row needs the prompt as `input` (or `prompt`) or as token ids in `tok_input`",
                ));
            }
        };
        prompt.max_tokens = match (options.output_tokens, &self.output) {
            (Some(n), _) => Some(n),
            (None, Some(output)) => Some(tokenizer.count(output).map_err(tokenize_error)?.max(1)),
            (None, None) => None,
        };
        prompt.output = self.output;
        Ok(prompt)
    }
}

/// A file that is not a pickle (ShareGPT and the other JSON readers; a dataset table takes pickles).
fn read(path: &Path) -> Result<Vec<u8>, DataError> {
    if matches!(extension(path).as_str(), "pkl" | "pickle") {
        return Err(DataError::Pickle {
            path: path.to_owned(),
        });
    }
    let bytes = read_raw(path)?;
    if is_pickle(path, &bytes) {
        return Err(DataError::Pickle {
            path: path.to_owned(),
        });
    }
    Ok(bytes)
}

fn read_raw(path: &Path) -> Result<Vec<u8>, DataError> {
    std::fs::read(path).map_err(|source| DataError::Read {
        path: path.to_owned(),
        source,
    })
}

/// By name, or by content: pickle protocol 2+ starts with 0x80, which no JSON or CSV text does.
fn is_pickle(path: &Path, bytes: &[u8]) -> bool {
    matches!(extension(path).as_str(), "pkl" | "pickle") || bytes.first() == Some(&0x80)
}

fn extension(path: &Path) -> String {
    path.extension()
        .and_then(|e| e.to_str())
        .unwrap_or_default()
        .to_ascii_lowercase()
}

fn json_error(path: &Path, line_offset: usize, e: &serde_json::Error) -> DataError {
    DataError::Json {
        path: path.to_owned(),
        line: e.line() + line_offset,
        column: e.column(),
        message: e.to_string(),
    }
}

fn parse_json(path: &Path, bytes: &[u8]) -> Result<Value, DataError> {
    serde_json::from_slice(bytes).map_err(|e| json_error(path, 0, &e))
}

/// Each non-blank line of a JSONL file, with its location.
fn jsonl_values(path: &Path, bytes: &[u8]) -> Result<Vec<(String, Value)>, DataError> {
    let text = std::str::from_utf8(bytes).map_err(|e| DataError::Shape {
        path: path.to_owned(),
        message: format!("not UTF-8 text: {e}"),
    })?;
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(i, line)| {
            serde_json::from_str(line)
                .map(|v| (format!("line {}", i + 1), v))
                .map_err(|e| json_error(path, i, &e))
        })
        .collect()
}

/// A JSON file: an array of records, an object of column arrays, or pandas' default `to_json` (an object of
/// columns, each an object keyed by row index).
fn json_rows(path: &Path, bytes: &[u8]) -> Result<Vec<Row>, DataError> {
    match parse_json(path, bytes)? {
        Value::Array(items) => items
            .into_iter()
            .enumerate()
            .map(|(i, v)| record(path, format!("row {}", i + 1), v))
            .collect(),
        Value::Object(columns) => {
            let mut table: Vec<(String, Vec<(String, Value)>)> = Vec::with_capacity(columns.len());
            for (name, column) in columns {
                let cells: Vec<(String, Value)> = match column {
                    Value::Array(items) => items
                        .into_iter()
                        .enumerate()
                        .map(|(i, v)| (format!("row {}", i + 1), v))
                        .collect(),
                    Value::Object(by_index) => {
                        let mut cells: Vec<(String, Value)> = by_index.into_iter().collect();
                        cells.sort_by_key(|(k, _)| k.parse::<u64>().unwrap_or(u64::MAX));
                        cells
                            .into_iter()
                            .map(|(k, v)| (format!("row index {k}"), v))
                            .collect()
                    }
                    _ => {
                        return Err(DataError::Shape {
                            path: path.to_owned(),
                            message: format!(
                                "column `{name}` is neither a list nor an object; a JSON dataset is an array of \
                                 records or an object of columns"
                            ),
                        });
                    }
                };
                table.push((name, cells));
            }
            let rows = table.first().map_or(0, |(_, cells)| cells.len());
            if let Some((name, cells)) = table.iter().find(|(_, cells)| cells.len() != rows) {
                return Err(DataError::Shape {
                    path: path.to_owned(),
                    message: format!(
                        "column `{name}` has {} rows, others have {rows}",
                        cells.len()
                    ),
                });
            }
            let mut columns: Vec<(String, std::vec::IntoIter<(String, Value)>)> = table
                .into_iter()
                .map(|(name, cells)| (name, cells.into_iter()))
                .collect();
            (0..rows)
                .map(|_| {
                    let mut object = Map::new();
                    let mut location = String::new();
                    for (name, cells) in &mut columns {
                        if let Some((loc, value)) = cells.next() {
                            location = loc;
                            object.insert(name.clone(), value);
                        }
                    }
                    record(path, location, Value::Object(object))
                })
                .collect()
        }
        _ => Err(DataError::Shape {
            path: path.to_owned(),
            message: "a JSON dataset is an array of records or an object of columns".to_owned(),
        }),
    }
}

/// A record (JSON object) as a row.
fn record(path: &Path, location: String, value: Value) -> Result<Row, DataError> {
    let Value::Object(object) = value else {
        return Err(DataError::Field {
            path: path.to_owned(),
            row: location,
            column: "input".to_owned(),
            message: format!(
                "expected a record (a JSON object), found {}",
                json_kind(&value)
            ),
        });
    };
    let field_error = |column: &str, message: String| DataError::Field {
        path: path.to_owned(),
        row: location.clone(),
        column: column.to_owned(),
        message,
    };
    let text = |column: &str| -> Result<Option<String>, DataError> {
        match object.get(column) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(field_error(
                column,
                format!("expected text, found {}", json_kind(other)),
            )),
        }
    };
    let mut input = None;
    for column in INPUT_COLUMNS {
        if let Some(found) = text(column)? {
            input = Some(found);
            break;
        }
    }
    let tok_input = match object.get(TOKENS_COLUMN) {
        None | Some(Value::Null) => None,
        Some(Value::String(cell)) => {
            Some(token_list_cell(cell).map_err(|m| field_error(TOKENS_COLUMN, m))?)
        }
        Some(value) => Some(token_list(value).map_err(|m| field_error(TOKENS_COLUMN, m))?),
    };
    Ok(Row {
        input,
        tok_input,
        output: text(OUTPUT_COLUMN)?,
        location,
    })
}

/// How an error message names a JSON value's type.
pub fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "text",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// A list of token ids.
fn token_list(value: &Value) -> Result<Vec<u32>, String> {
    let Value::Array(items) = value else {
        return Err(format!(
            "expected a list of token ids, found {}",
            json_kind(value)
        ));
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            item.as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| {
                    format!(
                        "item {i} is {item}, not a token id (an integer from 0 to {})",
                        u32::MAX
                    )
                })
        })
        .collect()
}

/// A list of token ids written in one text cell: `[1, 2, 3]` (JSON, or numpy's `[1 2 3]`).
fn token_list_cell(cell: &str) -> Result<Vec<u32>, String> {
    let trimmed = cell.trim();
    if let Ok(value) = serde_json::from_str::<Value>(trimmed) {
        return token_list(&value);
    }
    let inner = trimmed
        .strip_prefix('[')
        .and_then(|s| s.strip_suffix(']'))
        .ok_or_else(|| format!("expected a list of token ids like [1, 2, 3], found {cell:?}"))?;
    inner
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<u32>()
                .map_err(|_| format!("{s:?} is not a token id"))
        })
        .collect()
}

fn csv_rows(path: &Path, bytes: &[u8]) -> Result<Vec<Row>, DataError> {
    let csv_error = |e: csv::Error| DataError::Csv {
        path: path.to_owned(),
        line: e.position().map_or(0, csv::Position::line),
        message: e.to_string(),
    };
    let mut reader = csv::ReaderBuilder::new().flexible(false).from_reader(bytes);
    let headers: Vec<String> = reader
        .headers()
        .map_err(csv_error)?
        .iter()
        .map(|h| h.trim().to_owned())
        .collect();
    let known = |name: &str| INPUT_COLUMNS.contains(&name) || name == TOKENS_COLUMN;
    if !headers.iter().any(|h| known(h)) {
        return Err(DataError::Shape {
            path: path.to_owned(),
            message: format!(
                "the header row ({}) names no prompt column: use `input` (or `prompt`) or `tok_input`",
                headers.join(", ")
            ),
        });
    }
    let mut rows = Vec::new();
    for result in reader.records() {
        let record = result.map_err(csv_error)?;
        let line = record.position().map_or(0, csv::Position::line);
        let mut object = Map::new();
        for (name, cell) in headers.iter().zip(record.iter()) {
            // An empty cell is a missing value, as pandas reads it.
            if !cell.is_empty() {
                object.insert(name.clone(), Value::String(cell.to_owned()));
            }
        }
        rows.push(self::record(
            path,
            format!("line {line}"),
            Value::Object(object),
        )?);
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use serde_json::json;

    use super::*;

    fn write(dir: &tempfile::TempDir, name: &str, content: &str) -> PathBuf {
        let path = dir.path().join(name);
        std::fs::write(&path, content).expect("write");
        path
    }

    fn words(n: usize) -> String {
        vec!["word"; n].join(" ")
    }

    fn sharegpt_entry(prompt: &str, answer: &str) -> Value {
        json!({"id": "x", "conversations": [
            {"from": "human", "value": prompt},
            {"from": "gpt", "value": answer},
            {"from": "human", "value": "follow-up"},
        ]})
    }

    #[test]
    fn sharegpt_turns_are_taken_by_position_not_role_and_all_become_messages() {
        // vLLM and inference-perf both read conversations[0] and [1]: a leading system turn is the prompt.
        let dir = tempfile::tempdir().expect("tempdir");
        let entries = json!([
            {"conversations": [
                {"from": "system", "value": "you are a poet"},
                {"from": "human", "value": "write four words now"},
                {"from": "gpt", "value": "ok"},
            ]},
            // A turn serialised as a JSON string (inference-perf #429) is read as the object.
            {"conversations": [
                "{\"from\": \"human\", \"value\": \"one two three four\"}",
                {"from": "gpt", "value": "five six seven eight nine"},
            ]},
        ]);
        let path = write(&dir, "sg.json", &entries.to_string());
        let options = DatasetOptions {
            min_tokens: 0,
            max_prompt_tokens: None,
            max_total_tokens: None,
            ..DatasetOptions::default()
        };
        let prompts = load_sharegpt(&path, &Tokenizer::builtin(), &options)
            .expect("load")
            .into_inner();
        assert_eq!(prompts.len(), 2);
        assert_eq!(prompts[0].text, "you are a poet");
        // "you are a poet" and "write four words now": four words each.
        assert_eq!(
            (prompts[0].input_tokens, prompts[0].max_tokens),
            (4, Some(4))
        );
        let roles: Vec<&str> = prompts[0]
            .messages
            .as_ref()
            .expect("messages")
            .iter()
            .map(|m| m.role.as_str())
            .collect();
        assert_eq!(roles, ["user", "user", "assistant"]);
        assert_eq!(prompts[1].text, "one two three four");
        assert_eq!(prompts[1].max_tokens, Some(5));
    }

    #[test]
    fn sharegpt4v_images_go_with_their_prompts_only_when_asked_and_videos_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut with_image = sharegpt_entry(&words(5), &words(5));
        with_image["image"] = json!("coco/1.jpg");
        let mut empty_image = sharegpt_entry(&words(6), &words(5));
        empty_image["image"] = json!("");
        let path = write(
            &dir,
            "sg4v.json",
            &json!([with_image, empty_image]).to_string(),
        );
        let tokenizer = Tokenizer::builtin();
        let with_images = DatasetOptions {
            images: true,
            ..DatasetOptions::default()
        };
        let images: Vec<Vec<String>> = load_sharegpt(&path, &tokenizer, &with_images)
            .expect("load")
            .into_inner()
            .iter()
            .map(|p| p.images.iter().map(|i| i.url.clone()).collect())
            .collect();
        assert_eq!(images, vec![vec!["file://coco/1.jpg".to_owned()], vec![]]);
        let text_only = load_sharegpt(&path, &tokenizer, &DatasetOptions::default()).expect("load");
        assert!(text_only.as_slice().iter().all(|p| p.images.is_empty()));

        let mut with_video = sharegpt_entry(&words(5), &words(5));
        with_video["video"] = json!("v.mp4");
        let path = write(&dir, "video.json", &json!([with_video]).to_string());
        let options = DatasetOptions {
            images: true,
            ..DatasetOptions::default()
        };
        let err = load_sharegpt(&path, &tokenizer, &options)
            .expect_err("refused")
            .to_string();
        assert!(err.contains("entry 1: a `video`"), "{err}");
    }

    #[test]
    fn sharegpt_takes_the_first_exchange_and_filters_like_vllm() {
        let dir = tempfile::tempdir().expect("tempdir");
        let entries = json!([
            sharegpt_entry(&words(10), &words(20)),
            sharegpt_entry(&words(2), &words(20)),  // prompt too short
            sharegpt_entry(&words(10), &words(3)),  // output too short
            sharegpt_entry(&words(1100), &words(5)), // prompt too long
            sharegpt_entry(&words(1000), &words(1100)), // total too long
            {"id": "no turns", "conversations": [{"from": "human", "value": "alone here"}]},
            {"unrelated": true},
        ]);
        let path = write(&dir, "sharegpt.json", &entries.to_string());
        let tokenizer = Tokenizer::builtin();
        let prompts = load_sharegpt(&path, &tokenizer, &DatasetOptions::default()).expect("load");
        assert_eq!(prompts.skipped, 6);
        let only = &prompts.as_slice()[0];
        assert_eq!((only.input_tokens, only.max_tokens), (10, Some(20)));
        assert_eq!(only.output.as_deref(), Some(words(20).as_str()));

        // A fixed output length replaces the reference's and lifts the output minimum.
        let fixed = DatasetOptions {
            output_tokens: Some(100),
            ..DatasetOptions::default()
        };
        let prompts = load_sharegpt(&path, &tokenizer, &fixed).expect("load");
        assert_eq!(
            prompts.len(),
            3,
            "the short output and the 1000 + 1100 entries now fit"
        );
        assert!(prompts.as_slice().iter().all(|p| p.max_tokens == Some(100)));
    }

    #[test]
    fn sharegpt_shuffles_as_python_s_random_seeded_with_the_seed_and_stops_at_the_limit() {
        let dir = tempfile::tempdir().expect("tempdir");
        let entries: Vec<Value> = (0..50)
            .map(|i| sharegpt_entry(&words(5 + i), &words(8)))
            .collect();
        let path = write(&dir, "sg.json", &Value::Array(entries).to_string());
        let options = DatasetOptions {
            limit: Some(10),
            shuffle_seed: Some(1),
            ..DatasetOptions::default()
        };
        let lengths: Vec<u32> = load_sharegpt(&path, &Tokenizer::builtin(), &options)
            .expect("load")
            .into_inner()
            .iter()
            .map(|p| p.input_tokens)
            .collect();
        // `d = list(range(50)); random.seed(1); random.shuffle(d)` starts 2, 15, 47, 9, 21, 29, 48, 5, 46, 14
        // (CPython 3); entry i's prompt is 5 + i words.
        assert_eq!(lengths, [7, 20, 52, 14, 26, 34, 53, 10, 51, 19]);
    }

    #[test]
    fn sharegpt_shuffles_only_the_entries_vllm_keeps() {
        let dir = tempfile::tempdir().expect("tempdir");
        let one_turn = json!({"conversations": [{"from": "human", "value": words(30)}]});
        let other_key = json!({"conversation": [
            {"from": "human", "value": words(40)},
            {"from": "gpt", "value": words(8)},
        ]});
        let entries = json!([
            sharegpt_entry(&words(5), &words(8)),
            one_turn,
            sharegpt_entry(&words(6), &words(8)),
            other_key,
            sharegpt_entry(&words(7), &words(8)),
            sharegpt_entry(&words(8), &words(8)),
        ]);
        let path = write(&dir, "sg.json", &entries.to_string());
        let options = DatasetOptions {
            shuffle_seed: Some(0),
            vllm_entries: true,
            ..DatasetOptions::default()
        };
        let prompts = load_sharegpt(&path, &Tokenizer::builtin(), &options).expect("load");
        let lengths: Vec<u32> = prompts.as_slice().iter().map(|p| p.input_tokens).collect();
        // vLLM keeps A, B, C, D (5, 6, 7, 8 words: `"conversations" in entry and len(...) >= 2`); then
        // `random.seed(0); random.shuffle(["A", "B", "C", "D"])` gives C, A, B, D.
        assert_eq!(lengths, [7, 5, 6, 8]);
        // With `--disable-shuffle` vLLM still reads only those entries, in file order.
        let unshuffled = DatasetOptions {
            shuffle_seed: None,
            ..options
        };
        let prompts = load_sharegpt(&path, &Tokenizer::builtin(), &unshuffled).expect("load");
        let lengths: Vec<u32> = prompts.as_slice().iter().map(|p| p.input_tokens).collect();
        assert_eq!(lengths, [5, 6, 7, 8]);
    }

    #[test]
    fn sharegpt_with_nothing_usable_says_why() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = write(
            &dir,
            "sg.json",
            &json!([sharegpt_entry("hi", "yo")]).to_string(),
        );
        let err =
            load_sharegpt(&path, &Tokenizer::builtin(), &DatasetOptions::default()).unwrap_err();
        assert!(matches!(err, DataError::NoPrompts { .. }), "{err}");
        assert!(err.to_string().contains("sg.json"), "{err}");
    }

    #[test]
    fn json_records_columns_and_pandas_layouts_all_load() {
        let dir = tempfile::tempdir().expect("tempdir");
        let tokenizer = Tokenizer::builtin();
        let records = json!([
            {"input": "one two three", "output": "a b"},
            {"tok_input": [5, 6, 7, 8], "output": "x"},
            {"prompt": "vllm custom style"},
        ]);
        let columns = json!({"input": ["one two three", null, "vllm custom style"], "tok_input": [null, [5, 6, 7, 8], null],
                             "output": ["a b", "x", null]});
        let pandas = json!({"input": {"0": "one two three", "1": null, "2": "vllm custom style"},
                            "tok_input": {"0": null, "1": [5, 6, 7, 8], "2": null},
                            "output": {"0": "a b", "1": "x", "2": null}});
        for (name, value) in [
            ("records.json", records),
            ("columns.json", columns),
            ("pandas.json", pandas),
        ] {
            let path = write(&dir, name, &value.to_string());
            let prompts = load_dataset(&path, &tokenizer, &DatasetOptions::default())
                .expect(name)
                .into_inner();
            assert_eq!(prompts.len(), 3, "{name}");
            assert_eq!(
                (prompts[0].input_tokens, prompts[0].max_tokens),
                (3, Some(2)),
                "{name}"
            );
            assert_eq!(
                prompts[1].token_ids.as_deref(),
                Some(&[5, 6, 7, 8][..]),
                "{name}"
            );
            assert_eq!(
                (prompts[1].input_tokens, prompts[1].max_tokens),
                (4, Some(1)),
                "{name}"
            );
            assert!(
                !prompts[1].text.is_empty(),
                "{name}: token prompts get their decoded text for chat"
            );
            assert_eq!(
                (prompts[2].input_tokens, prompts[2].max_tokens),
                (3, None),
                "{name}"
            );
        }
    }

    #[test]
    fn jsonl_and_csv_load_with_limit_and_fixed_output() {
        let dir = tempfile::tempdir().expect("tempdir");
        let tokenizer = Tokenizer::builtin();
        let jsonl = write(
            &dir,
            "d.jsonl",
            "{\"input\": \"a b c\", \"output\": \"d e\"}\n\n{\"tok_input\": [1, 2]}\n{\"input\": \"z\"}\n",
        );
        let csv = write(
            &dir,
            "d.csv",
            "input,tok_input,output\n\"a b c\",,d e\n,\"[1, 2]\",\nz,,\n",
        );
        let options = DatasetOptions {
            output_tokens: Some(7),
            limit: Some(2),
            ..DatasetOptions::default()
        };
        for path in [jsonl, csv] {
            let prompts = load_dataset(&path, &tokenizer, &options)
                .expect("load")
                .into_inner();
            assert_eq!(prompts.len(), 2, "{}", path.display());
            assert_eq!(prompts[0].input_tokens, 3);
            assert_eq!(prompts[0].output.as_deref(), Some("d e"));
            assert_eq!(prompts[1].token_ids, Some(vec![1, 2]));
            assert!(prompts.iter().all(|p| p.max_tokens == Some(7)));
        }
    }

    #[test]
    fn errors_name_the_file_the_line_and_the_column() {
        let dir = tempfile::tempdir().expect("tempdir");
        let tokenizer = Tokenizer::builtin();
        let options = DatasetOptions::default();
        let cases = [
            (
                "bad.jsonl",
                "{\"input\": \"ok\"}\n{\"input\": \"ok\", oops}\n",
                vec!["bad.jsonl:2:", "invalid JSON"],
            ),
            (
                "ids.jsonl",
                "{\"input\": \"ok\"}\n{\"tok_input\": [1, -2]}\n",
                vec!["ids.jsonl", "line 2", "`tok_input`", "item 1"],
            ),
            (
                "type.json",
                "[{\"input\": 5}]",
                vec!["type.json", "row 1", "`input`", "expected text"],
            ),
            (
                "missing.json",
                "[{\"output\": \"x\"}]",
                vec!["missing.json", "row 1", "`input`", "missing"],
            ),
            (
                "cells.csv",
                "input,tok_input\nok,\n,[1 x]\n",
                vec!["cells.csv", "line 3", "`tok_input`"],
            ),
            (
                "ragged.csv",
                "input,output\na,b\nc\n",
                vec!["ragged.csv", "line 3"],
            ),
            (
                "nocol.csv",
                "text,output\na,b\n",
                vec!["nocol.csv", "input"],
            ),
            ("data.arrow", "", vec!["data.arrow", ".parquet"]),
            ("data.parquet", "PAR1", vec!["data.parquet", "as Parquet"]),
        ];
        for (name, content, needles) in cases {
            let path = write(&dir, name, content);
            let err = load_dataset(&path, &tokenizer, &options)
                .unwrap_err()
                .to_string();
            for needle in needles {
                assert!(err.contains(needle), "{name}: {err:?} lacks {needle:?}");
            }
        }
        let err = load_dataset(&dir.path().join("absent.json"), &tokenizer, &options).unwrap_err();
        assert!(
            matches!(&err, DataError::Read { path, .. } if path.ends_with("absent.json")),
            "{err}"
        );
    }

    #[test]
    fn pickles_that_are_not_dataframes_are_refused_and_sharegpt_refuses_any() {
        let dir = tempfile::tempdir().expect("tempdir");
        let tokenizer = Tokenizer::builtin();
        let by_name = write(&dir, "data.pkl", "whatever");
        let path = dir.path().join("data.json");
        std::fs::write(&path, [0x80, 0x04, 0x95]).expect("write");
        for p in [by_name, path] {
            // A dataset table reads DataFrame pickles: these two are not one, and say so.
            let err = load_dataset(&p, &tokenizer, &DatasetOptions::default()).unwrap_err();
            assert!(matches!(err, DataError::PickledFrame { .. }), "{err}");
            assert!(
                err.to_string()
                    .contains("cannot read the pickled DataFrame"),
                "{err}"
            );
            // ShareGPT never comes pickled: refused with the conversion hint.
            let err = load_sharegpt(&p, &tokenizer, &DatasetOptions::default()).unwrap_err();
            assert!(matches!(err, DataError::Pickle { .. }), "{err}");
            assert!(
                err.to_string().contains("llmbench dataset convert")
                    && err.to_string().contains("orient"),
                "{err}"
            );
        }
    }

    #[test]
    fn a_pickled_mlperf_dataframe_is_a_dataset_table() {
        // The fixture's rows (make_fixtures.py): tok_input [1, 15043, 3186], [1, 2, 3, 4], [1, 29871]; outputs
        // "Hi!", "ok" and None.
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../launcher/tests/fixtures/mlperf-pickles/orca_pandas3_p5.pkl");
        let prompts = load_dataset(&path, &Tokenizer::builtin(), &DatasetOptions::default())
            .expect("the pickle reads")
            .into_inner();
        assert_eq!(prompts.len(), 3);
        assert_eq!(prompts[0].token_ids.as_deref(), Some(&[1, 15043, 3186][..]));
        assert_eq!(prompts[1].token_ids.as_deref(), Some(&[1, 2, 3, 4][..]));
        assert_eq!(prompts[0].output.as_deref(), Some("Hi!"));
        assert_eq!(prompts[2].output, None);
    }

    #[test]
    fn dataset_prompts_are_counted_under_a_real_tokenizer() {
        use llmbench_text::tokenizer::testing::{Style, bpe};
        let dir = tempfile::tempdir().expect("tempdir");
        let tokenizer = bpe(Style::ByteLevel);
        let text = "The quick brown fox jumps over the lazy dog.";
        let path = write(
            &dir,
            "d.json",
            &json!([{"input": text, "output": "benchmarks measure tokens"}]).to_string(),
        );
        let prompt = &load_dataset(&path, &tokenizer, &DatasetOptions::default())
            .expect("load")
            .into_inner()[0];
        assert_eq!(
            prompt.input_tokens as usize,
            tokenizer.encode(text).expect("encode").len()
        );
        assert_eq!(
            prompt.max_tokens,
            Some(tokenizer.count("benchmarks measure tokens").expect("count"))
        );
    }
}
