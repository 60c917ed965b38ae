//! vLLM's `hf` dataset from a local copy of a Hugging Face dataset, as `get_samples` and the text-only
//! `HuggingFaceDataset` subclasses build their requests (`vllm/benchmarks/datasets.py`, vllm-project/vllm at
//! 0056b87; the loading and shuffling as `datasets` 5.2.0 does them):
//!
//! - **Files** (`load_dataset(dataset_path, split=...)` on a directory): every file below it except hidden ones
//!   (a name starting with `.`), those under a `__` directory and the dataset card; split by `datasets`' default
//!   patterns, the first that matches anything winning: `data/{split}-NNNNN-of-NNNNN*`, then a directory named by
//!   a split keyword, then a file name holding one (`train`/`training`, `validation`/`valid`/`dev`/`val`,
//!   `test`/`testing`/`eval`/`evaluation`, as a word between `-._ 0-9` characters), else all of them are `train`.
//!   The split's files in path order; JSON Lines (`.jsonl`, or `.json` holding lines), a `.json` array of
//!   records, or Parquet (`.parquet`, each row a record), one kind per split. Other formats (csv, arrow) are
//!   refused: llmbench has no reader for them.
//! - **Order** (`HuggingFaceDataset.load_data`, unless `disable-shuffle`): `Dataset.shuffle(seed)` takes
//!   `np.random.default_rng(seed).permutation(n)` of the rows; a streamed dataset (vLLM's default, off with
//!   `no-stream`) first shuffles its files with a fresh `default_rng(seed)`, then passes the rows through a buffer
//!   of 1000: each time it holds 1000 rows, it permutes them with its own `default_rng(seed)` and yields all but
//!   the last 500 of that order, keeping those; at the end it yields a permutation of what is left.
//! - **Requests** (`sample`): rows in that order until `num-prompts` requests are made; too few are topped up by
//!   `maybe_oversample_requests` (`random.seed(seed)`, then `random.choice` of them). A prompt's length is
//!   `len(tokenizer(prompt).input_ids)`: its tokens and the tokenizer's own special tokens.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::{PromptError, chat_template_of};
use crate::workload::{HfDatasetKind, VllmHf};
use llmbench_data::{DataError, Prompt};
use llmbench_text::chat_template::ChatTemplate;
use llmbench_text::numpy_generator::NumpyGenerator;
use llmbench_text::py_random::PyRandom;
use llmbench_text::tokenizer::Tokenizer;

/// `datasets`' streaming shuffle buffer (`IterableDataset.shuffle(buffer_size=1000)`).
const STREAM_BUFFER: usize = 1000;
/// The words that name a split in a directory or file name (`datasets.data_files.SPLIT_KEYWORDS`).
const SPLIT_KEYWORDS: [(&str, &[&str]); 3] = [
    ("train", &["train", "training"]),
    ("validation", &["validation", "valid", "dev", "val"]),
    ("test", &["test", "testing", "eval", "evaluation"]),
];
/// Files `datasets` never reads as data (`FILES_TO_IGNORE`).
const FILES_TO_IGNORE: [&str; 6] = [
    "README.md",
    "config.json",
    "dataset_info.json",
    "dataset_infos.json",
    "dummy_data.zip",
    "dataset_dict.json",
];

/// One row of the dataset, with where it came from for messages.
#[derive(Debug, Clone)]
pub(super) struct Row {
    pub(super) file: usize,
    pub(super) line: usize,
    pub(super) record: Map<String, Value>,
}

/// The profile keys that name the dataset's directory and its split, for messages.
#[derive(Debug, Clone, Copy)]
pub(super) struct HfKeys {
    pub(super) path: &'static str,
    pub(super) split: &'static str,
}

/// vLLM's `dataset-path` and `hf-split`.
const VLLM_KEYS: HfKeys = HfKeys {
    path: "dataset-path",
    split: "hf-split",
};

/// `num_prompts` requests of the local dataset `hf`, shuffled with `seed` (vLLM's `--seed`).
pub(super) fn vllm_hf_prompts(
    hf: &VllmHf,
    tokenizer: &Tokenizer,
    seed: u64,
    num_prompts: usize,
) -> Result<Vec<Prompt>, PromptError> {
    let files = split_files(Path::new(&hf.path), &hf.split, VLLM_KEYS)?;
    let mut shards = Vec::with_capacity(files.len());
    for (i, file) in files.iter().enumerate() {
        shards.push(read_rows(file, i)?);
    }
    let rows = ordered(shards, hf, seed);
    let template = if hf.chat_template {
        Some(chat_template_of(tokenizer, kind_name(hf.kind))?)
    } else {
        None
    };
    let specials = tokenizer
        .added_special_tokens()
        .map_err(DataError::from)?
        .total;
    let mut prompts: Vec<Prompt> = Vec::new();
    for row in rows {
        if prompts.len() >= num_prompts {
            break;
        }
        let path = &files[row.file];
        // `len(tokenizer(text).input_ids)`: the text's tokens and the special tokens the tokenizer adds.
        let tokens = |text: &str| -> Result<u32, DataError> {
            let n = tokenizer
                .count(text)
                .map_err(|source| DataError::Tokenize {
                    path: path.clone(),
                    row: format!("line {}", row.line),
                    source,
                })?;
            Ok(n.saturating_add(specials))
        };
        let field = |name: &str| text_field(&row, path, name);
        let templated = |prompt: String| -> Result<String, PromptError> {
            Ok(match &template {
                Some(template) => render(template, &prompt)?,
                None => prompt,
            })
        };
        let prompt = match hf.kind {
            HfDatasetKind::InstructCoder => {
                let prompt = format!(
                    "{}\n\n{} Just output the code, do not include any explanation.",
                    field("input")?,
                    field("instruction")?
                );
                let prompt = templated(prompt)?;
                let n = tokens(&prompt)?;
                Prompt::text(prompt, n, Some(fixed_or(hf.output_len, 200)?))
            }
            HfDatasetKind::MtBench => {
                let first = match row.record.get("turns") {
                    Some(Value::Array(turns)) => turns.first().and_then(Value::as_str),
                    _ => None,
                };
                let Some(first) = first else {
                    return Err(field_error(
                        &row,
                        path,
                        "turns",
                        "MTBenchDataset reads each row's first `turns` entry (text) as its prompt",
                    )
                    .into());
                };
                let prompt = templated(first.to_owned())?;
                let n = tokens(&prompt)?;
                Prompt::text(prompt, n, Some(fixed_or(hf.output_len, 256)?))
            }
            HfDatasetKind::Aimo => {
                let prompt = field("problem")?.to_owned();
                let solution = field("solution")?;
                // `is_valid_sequence(..., max_prompt_len=2048, max_total_len=32000)`, only when the answer's own
                // length is the request's.
                let answer = Answer {
                    text: solution,
                    column: "solution",
                    max_prompt_len: 2048,
                    max_total_len: 32_000,
                };
                match answer_length(hf, &prompt, &answer, &tokens, &row, path)? {
                    Some((n, max_tokens)) => Prompt::text(prompt, n, Some(max_tokens)),
                    None => continue,
                }
            }
            HfDatasetKind::VisionArena { bench } => {
                // `SUPPORTED_DATASET_PATHS[hf_name](item)`: the first message of the first turn.
                let column = if bench { "turns" } else { "conversation" };
                let prompt = row
                    .record
                    .get(column)
                    .and_then(|turns| turns.get(0))
                    .and_then(|turn| turn.get(0))
                    .and_then(|message| message.get("content"))
                    .and_then(Value::as_str)
                    .ok_or_else(|| {
                        field_error(
                            &row,
                            path,
                            column,
                            &format!(
                                "VisionArenaDataset reads each row's `{column}[0][0][\"content\"]` (text) as its \
                                 prompt"
                            ),
                        )
                    })?
                    .to_owned();
                // `process_image(item["images"][0])`: the image `datasets` decodes from the stored bytes.
                let stored = row
                    .record
                    .get("images")
                    .and_then(|images| images.get(0))
                    .and_then(|image| image.get("bytes"))
                    .and_then(Value::as_str);
                let Some(image) = stored.and_then(llmbench_data::image::stored_image) else {
                    return Err(field_error(
                        &row,
                        path,
                        "images",
                        "VisionArenaDataset sends each row's first image: `images[0].bytes` must hold a PNG or \
                         JPEG (an image stored by path only is not read)",
                    )
                    .into());
                };
                // `prompt_len = len(tokenizer(prompt).input_ids)`: the text alone.
                let n = tokens(&prompt)?;
                let mut p = Prompt::text(prompt, n, Some(fixed_or(hf.output_len, 128)?));
                p.images = vec![image];
                p
            }
            HfDatasetKind::Conversation => {
                if row.record.contains_key("image") {
                    return Err(field_error(
                        &row,
                        path,
                        "image",
                        "ConversationDataset sends a row's `image` as a multimodal input, which llmbench does not \
                         send (issue 32)",
                    )
                    .into());
                }
                let turns = match row.record.get("conversations") {
                    Some(Value::Array(turns)) => turns,
                    _ => {
                        return Err(field_error(
                            &row,
                            path,
                            "conversations",
                            "ConversationDataset reads each row's `conversations` list",
                        )
                        .into());
                    }
                };
                // `self.data.filter(lambda x: len(x["conversations"]) >= 2)`.
                if turns.len() < 2 {
                    continue;
                }
                let value = |i: usize| {
                    turns[i]
                        .get("value")
                        .and_then(Value::as_str)
                        .ok_or_else(|| {
                            field_error(
                                &row,
                                path,
                                "conversations",
                                &format!("turn {i} has no text `value`"),
                            )
                        })
                };
                let prompt = value(0)?.to_owned();
                let answer = Answer {
                    text: value(1)?,
                    column: "conversations",
                    max_prompt_len: 1024,
                    max_total_len: 2048,
                };
                match answer_length(hf, &prompt, &answer, &tokens, &row, path)? {
                    Some((n, max_tokens)) => Prompt::text(prompt, n, Some(max_tokens)),
                    None => continue,
                }
            }
        };
        prompts.push(prompt);
    }
    oversample(prompts, num_prompts, seed, &hf.path)
}

fn kind_name(kind: HfDatasetKind) -> &'static str {
    match kind {
        HfDatasetKind::InstructCoder => "vLLM's InstructCoder dataset",
        HfDatasetKind::MtBench => "vLLM's MT-Bench dataset",
        HfDatasetKind::Aimo => "vLLM's AIMO dataset",
        HfDatasetKind::Conversation => "vLLM's ShareGPT_Vicuna conversation dataset",
        HfDatasetKind::VisionArena { .. } => "vLLM's VisionArena dataset",
    }
}

fn render(template: &ChatTemplate, prompt: &str) -> Result<String, PromptError> {
    Ok(template.render_user(prompt, &Map::new())?)
}

/// `hf-output-len`, else the class's default.
fn fixed_or(output_len: Option<u64>, default: u32) -> Result<u32, PromptError> {
    match output_len {
        None => Ok(default),
        Some(n) => u32::try_from(n).map_err(|_| PromptError::TooLarge {
            what: "hf-output-len",
            value: n,
        }),
    }
}

/// A row's reference answer, with the bounds of the class's `is_valid_sequence` call.
struct Answer<'a> {
    text: &'a str,
    /// Where the answer is, for messages.
    column: &'static str,
    max_prompt_len: u32,
    max_total_len: u32,
}

/// The prompt's length and the request's `max_tokens` for the classes whose answer is a reference text: the
/// answer's length (`len(tokenizer(answer).input_ids)`) unless `hf-output-len` fixes it, and then the row is kept
/// only if `is_valid_sequence(prompt_len, answer_len, min_len=4, max_prompt_len, max_total_len)` holds; None for a
/// row vLLM skips.
fn answer_length(
    hf: &VllmHf,
    prompt: &str,
    answer: &Answer<'_>,
    tokens: &dyn Fn(&str) -> Result<u32, DataError>,
    row: &Row,
    path: &Path,
) -> Result<Option<(u32, u32)>, PromptError> {
    let prompt_len = tokens(prompt)?;
    let answer_len = tokens(answer.text)?;
    if let Some(n) = hf.output_len {
        return Ok(Some((prompt_len, fixed_or(Some(n), 0)?)));
    }
    if answer_len == 0 {
        // `assert isinstance(output_len, int) and output_len > 0` stops vLLM here.
        return Err(field_error(
            row,
            path,
            answer.column,
            "the reference answer has no token, on which vLLM's assert stops the run",
        )
        .into());
    }
    let valid = prompt_len >= 4
        && answer_len >= 4
        && prompt_len <= answer.max_prompt_len
        && u64::from(prompt_len) + u64::from(answer_len) <= u64::from(answer.max_total_len);
    Ok(valid.then_some((prompt_len, answer_len)))
}

/// `maybe_oversample_requests`: too few requests for `num-prompts` are topped up with `random.choice` of them,
/// Python's generator seeded with the dataset's seed.
pub(super) fn oversample(
    mut prompts: Vec<Prompt>,
    num_prompts: usize,
    seed: u64,
    path: &str,
) -> Result<Vec<Prompt>, PromptError> {
    let have = prompts.len();
    if have >= num_prompts {
        return Ok(prompts);
    }
    if have == 0 {
        return Err(DataError::NoPrompts {
            path: PathBuf::from(path),
            reason: "no row of the split makes a request (vLLM's `random.choice` fails on none)"
                .to_owned(),
        }
        .into());
    }
    let mut rng = PyRandom::seed(seed);
    for _ in have..num_prompts {
        let Some(i) = rng.choice_index(have) else {
            break;
        };
        prompts.push(prompts[i].clone());
    }
    Ok(prompts)
}

/// The rows in the order vLLM reads them (see the module's comment).
fn ordered(mut shards: Vec<Vec<Row>>, hf: &VllmHf, seed: u64) -> Vec<Row> {
    if !hf.shuffle {
        return shards.into_iter().flatten().collect();
    }
    if !hf.streaming {
        let rows: Vec<Row> = shards.into_iter().flatten().collect();
        let order = NumpyGenerator::seed(seed).permutation(rows.len());
        let mut slots: Vec<Option<Row>> = rows.into_iter().map(Some).collect();
        return order.into_iter().filter_map(|i| slots[i].take()).collect();
    }
    // `_shuffle_gen_kwargs`: the files' order, shuffled by a copy of the generator.
    NumpyGenerator::seed(seed).shuffle(&mut shards);
    let mut rng = NumpyGenerator::seed(seed);
    let mut out = Vec::new();
    let mut buffer: Vec<Row> = Vec::new();
    let keep = STREAM_BUFFER / 2;
    let permuted = |buffer: Vec<Row>, rng: &mut NumpyGenerator| -> Vec<Row> {
        let order = rng.permutation(buffer.len());
        let mut slots: Vec<Option<Row>> = buffer.into_iter().map(Some).collect();
        order.into_iter().filter_map(|i| slots[i].take()).collect()
    };
    for row in shards.into_iter().flatten() {
        buffer.push(row);
        if buffer.len() >= STREAM_BUFFER {
            let mut shuffled = permuted(std::mem::take(&mut buffer), &mut rng);
            buffer = shuffled.split_off(shuffled.len() - keep);
            out.extend(shuffled);
        }
    }
    if !buffer.is_empty() {
        out.extend(permuted(buffer, &mut rng));
    }
    out
}

/// A text field of a row (`item[name]`), or an error naming it.
fn text_field<'r>(row: &'r Row, path: &Path, name: &str) -> Result<&'r str, DataError> {
    match row.record.get(name) {
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(field_error(
            row,
            path,
            name,
            &format!("expected text, found {}", llmbench_data::json_kind(other)),
        )),
        None => Err(field_error(row, path, name, "missing")),
    }
}

pub(super) fn field_error(row: &Row, path: &Path, column: &str, message: &str) -> DataError {
    DataError::Field {
        path: path.to_owned(),
        row: format!("line {}", row.line),
        column: column.to_owned(),
        message: message.to_owned(),
    }
}

/// The rows of one JSON file: JSON Lines, or (a `.json` file whose whole text is one array) its records.
pub(super) fn read_rows(path: &Path, file: usize) -> Result<Vec<Row>, DataError> {
    if is_parquet(path) {
        // Numbered from 1 as rows of the file, where JSON rows are numbered by line.
        return Ok(llmbench_data::parquet_rows(path)?
            .into_iter()
            .enumerate()
            .map(|(i, record)| Row {
                file,
                line: i + 1,
                record,
            })
            .collect());
    }
    let bytes = std::fs::read(path).map_err(|source| DataError::Read {
        path: path.to_owned(),
        source,
    })?;
    let shape = |message: String| DataError::Shape {
        path: path.to_owned(),
        message,
    };
    let text = String::from_utf8(bytes).map_err(|e| shape(format!("not UTF-8 text ({e})")))?;
    let record = |value: Value, line: usize| match value {
        Value::Object(record) => Ok(Row { file, line, record }),
        other => Err(shape(format!(
            "line {line}: expected a record (a JSON object), found {}",
            llmbench_data::json_kind(&other)
        ))),
    };
    if path.extension().is_some_and(|e| e == "json")
        && let Ok(Value::Array(items)) = serde_json::from_str::<Value>(&text)
    {
        // A JSON array of records: one row each (their line is the file's first, for messages).
        return items.into_iter().map(|item| record(item, 1)).collect();
    }
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let value: Value = serde_json::from_str(line).map_err(|e| DataError::Json {
            path: path.to_owned(),
            line: i + 1,
            column: e.column(),
            message: e.to_string(),
        })?;
        rows.push(record(value, i + 1)?);
    }
    Ok(rows)
}

/// The data files of `split` under `root` (see the module's comment), in path order.
pub(super) fn split_files(
    root: &Path,
    split: &str,
    keys: HfKeys,
) -> Result<Vec<PathBuf>, DataError> {
    let shape = |message: String| DataError::Shape {
        path: root.to_owned(),
        message,
    };
    if !root.exists() {
        // vLLM would look the path up on the Hugging Face Hub; llmbench reads local copies only.
        return Err(shape(format!(
            "no such file or directory: llmbench reads Hugging Face datasets from a local copy only (vLLM would \
             download it): download it (e.g. `huggingface-cli download --repo-type dataset <id> --local-dir DIR`), \
             then set `{}: DIR`{}",
            keys.path,
            if keys.path == VLLM_KEYS.path {
                " and `hf-name: <id>`"
            } else {
                ""
            }
        )));
    }
    let relative: Vec<String> = if root.is_file() {
        // One file stands for a directory holding only it: all of it is `train`.
        vec![String::new()]
    } else {
        let mut found = Vec::new();
        walk(root, String::new(), &mut found)?;
        found.sort();
        if let Some(card) = found.iter().find(|f| f.as_str() == "README.md") {
            let text = std::fs::read_to_string(root.join(card)).unwrap_or_default();
            if card_has_configs(&text) {
                return Err(shape(format!(
                    "its README.md declares `configs:` (the dataset card's own data files and subsets), which \
                     llmbench does not read; point {} at the directory of the split's files (such as its `data`)",
                    keys.path
                )));
            }
        }
        // By base name, wherever they sit (`xbasename(filepath) not in FILES_TO_IGNORE`).
        found.retain(|f| {
            let name = f.rsplit('/').next().unwrap_or(f);
            !FILES_TO_IGNORE.contains(&name)
        });
        found
    };
    if relative.is_empty() {
        return Err(shape("the directory holds no data file".to_owned()));
    }
    let splits = splits_of(&relative);
    let Some((_, files)) = splits.iter().find(|(name, _)| name == split) else {
        let names: Vec<String> = splits.iter().map(|(name, _)| format!("'{name}'")).collect();
        return Err(shape(format!(
            "Unknown split \"{split}\" ({}). Should be one of [{}], as `load_dataset` says",
            keys.split,
            names.join(", ")
        )));
    };
    let files: Vec<PathBuf> = files
        .iter()
        .map(|f| {
            if f.is_empty() {
                root.to_owned()
            } else {
                root.join(f)
            }
        })
        .collect();
    // `datasets` reads a split with one builder, the one its files' extensions name.
    let parquet = files.first().is_some_and(|f| is_parquet(f));
    for file in &files {
        let json = file
            .extension()
            .is_some_and(|e| e == "jsonl" || e == "json");
        if parquet != is_parquet(file) || !(json || parquet) {
            return Err(DataError::Shape {
                path: file.clone(),
                message: "llmbench reads Hugging Face datasets from JSON or Parquet files, one kind per split: \
                          convert it to JSON lines (`.jsonl`, e.g. `Dataset.from_csv(path).to_json(out)`)"
                    .to_owned(),
            });
        }
    }
    Ok(files)
}

pub(super) fn is_parquet(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "parquet")
}

/// Every file below `dir`, as paths relative to the root, leaving out hidden names and `__` directories.
fn walk(dir: &Path, prefix: String, found: &mut Vec<String>) -> Result<(), DataError> {
    let entries = std::fs::read_dir(dir).map_err(|source| DataError::Read {
        path: dir.to_owned(),
        source,
    })?;
    for entry in entries {
        let entry = entry.map_err(|source| DataError::Read {
            path: dir.to_owned(),
            source,
        })?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let relative = format!("{prefix}{name}");
        let path = entry.path();
        if path.is_dir() {
            if !name.starts_with("__") {
                walk(&path, format!("{relative}/"), found)?;
            }
        } else {
            found.push(relative);
        }
    }
    Ok(())
}

/// Whether a dataset card's YAML header has a `configs:` key.
fn card_has_configs(card: &str) -> bool {
    let mut lines = card.lines();
    if lines.next().map(str::trim_end) != Some("---") {
        return false;
    }
    lines
        .take_while(|l| l.trim_end() != "---")
        .any(|l| l.starts_with("configs:"))
}

/// The splits and their files, as `datasets`' `_get_data_files_patterns` finds them: the sharded pattern, then
/// split keywords in directory names, then in file names, else everything is `train`.
fn splits_of(files: &[String]) -> Vec<(String, Vec<String>)> {
    let mut sharded: Vec<(String, Vec<String>)> = Vec::new();
    for file in files {
        if let Some(split) = sharded_split(file) {
            match sharded.iter_mut().find(|(name, _)| *name == split) {
                Some((_, list)) => list.push(file.clone()),
                None => sharded.push((split, vec![file.clone()])),
            }
        }
    }
    if !sharded.is_empty() {
        // train, validation, test first, then the others by name.
        sharded.sort_by_key(|(name, _)| {
            let rank = SPLIT_KEYWORDS
                .iter()
                .position(|(split, _)| split == name)
                .unwrap_or(SPLIT_KEYWORDS.len());
            (rank, name.clone())
        });
        return sharded;
    }
    for in_dir in [true, false] {
        let found: Vec<(String, Vec<String>)> = SPLIT_KEYWORDS
            .iter()
            .map(|(split, keywords)| {
                let matching: Vec<String> = files
                    .iter()
                    .filter(|f| keywords.iter().any(|k| names_split(f, k, in_dir)))
                    .cloned()
                    .collect();
                (split.to_string(), matching)
            })
            .filter(|(_, matching)| !matching.is_empty())
            .collect();
        if !found.is_empty() {
            return found;
        }
    }
    vec![("train".to_owned(), files.to_vec())]
}

/// `data/{split}-00000-of-00001*.*`: the split of a sharded file name.
fn sharded_split(file: &str) -> Option<String> {
    let name = file.strip_prefix("data/")?;
    if name.contains('/') {
        return None;
    }
    let (stem, _) = name.rsplit_once('.')?;
    // `{split}-NNNNN-of-NNNNN` then anything.
    let bytes = stem.as_bytes();
    (0..bytes.len()).find_map(|i| {
        let tail = stem.get(i..)?;
        let shard = tail.strip_prefix('-')?;
        let digits = |s: &str| s.len() >= 5 && s[..5].bytes().all(|b| b.is_ascii_digit());
        let after = shard.get(5..)?;
        (digits(shard) && after.starts_with("-of-") && digits(&after[4..]) && i > 0)
            .then(|| stem[..i].to_owned())
    })
}

/// Whether `file` names the split keyword `k` as `datasets`' patterns do: in a directory (`**/{k}/**`,
/// `**/{k}[sep]*/**`, `**/*[sep]{k}/**`, `**/*[sep]{k}[sep]*/**`) or in the file name (`**/{k}[sep]*`,
/// `**/*[sep]{k}[sep]*`), `sep` being `-._ 0-9`.
fn names_split(file: &str, k: &str, in_dir: bool) -> bool {
    let sep = |c: char| matches!(c, '-' | '.' | '_' | ' ') || c.is_ascii_digit();
    let parts: Vec<&str> = file.split('/').collect();
    let Some((name, dirs)) = parts.split_last() else {
        return false;
    };
    // An occurrence of `k` with the name's edge or a separator before it, and a separator after it (or, in a
    // directory name, its end).
    let has_word = |part: &str, end_ok: bool| {
        part.match_indices(k).any(|(i, _)| {
            let before_ok = part[..i].chars().next_back().is_none_or(sep);
            let after_ok = part[i + k.len()..].chars().next().map_or(end_ok, sep);
            before_ok && after_ok
        })
    };
    if in_dir {
        dirs.iter().any(|d| has_word(d, true))
    } else {
        has_word(name, false)
    }
}

#[cfg(test)]
mod tests;
