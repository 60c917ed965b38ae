//! AIPerf 0.13's rankings endpoint types over a `single_turn` `--input-file`, read before the clock starts into
//! one prompt per line: its query and its passages (aiperf-0.13.0 wheel).
//!
//! - **Which composer**: a file dataset takes `CustomDatasetComposer` whatever the endpoint type
//!   (`dataset_manager.py`: only synthetic data checks `_is_rankings_endpoint`), so each line is a `SingleTurn`
//!   (`dataset/loader/models.py`) made a conversation of one turn (`single_turn.py` `convert_to_conversations`),
//!   sent in file order, wrapping (`SequentialSampler`, `single_turn`'s preferred sampler).
//! - **Texts** (`loader/mixins.py` `_convert_to_media_objects`): `text` becomes one `Text` named `""`, and when it is
//!   set (even `""`) `texts` is not read; `texts` of strings becomes one `Text` named `""` of them all; `texts` of
//!   `{"name", "contents"}` objects (`Text`: `name` default `""`, `contents` default `[]`) is kept as written.
//! - **The request** (`endpoints/base_rankings_endpoint.py` `format_payload`): the contents of the texts named
//!   `query` or `queries` are the queries, of those named `passages` the passages, in order; any other name
//!   (`""` included) is ignored with a warning. No query: AIPerf raises while it writes `inputs.json`, before the
//!   run — refused here with the line. Several: the first is sent (a warning). No passages: sent with an empty
//!   list (a warning). The body (`build_payload` of the type), then `--extra-inputs`, then the line's `extra`.
//!   `output_length` (like `--osl`) sets `max_tokens`, which rankings bodies never carry (a warning).
//! - **Checks kept from the `SingleTurn` model**, refused with the file, line and field: `type` other than
//!   `single_turn`, `text` with `texts` (both non-empty), no text at all, `timestamp` with `delay` (both non-zero),
//!   `output_length` not above 0, `extra` not an object, fields of the wrong type.
//! - **Refused, though AIPerf reads them**: images, audio and video (AIPerf loads and encodes them, then sends
//!   none in a rankings body: drop them from the file); a `timestamp` (read only by AIPerf's fixed schedule, not
//!   built over these files); lines sharing a `session_id` (one AIPerf session, its requests sent one after
//!   another, which llmbench's rankings requests are not). `delay` and `role` are read and unused: a rankings
//!   line is the one turn of its conversation, whose delay is never waited, and the body has no role.

use std::collections::HashSet;
use std::path::Path;

use serde_json::{Map, Value};

use super::{AIPERF_MEDIA_FIELDS, aiperf_field as present};
use crate::workload::AiperfRankingsFile;
use llmbench_data::Prompt;
use llmbench_text::tokenizer::{Tokenizer, TokenizerError};

/// Why a rankings dataset file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum AiperfRankingsFileError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}:{line}: `{field}`: {problem}")]
    Field {
        path: String,
        line: u32,
        field: String,
        problem: String,
    },
    #[error("{path}: no records (AIPerf refuses an empty dataset)")]
    Empty { path: String },
    #[error(
        "{path}: a directory (AIPerf reads a directory only as random_pool pools, not as a single_turn file); \
         give one file"
    )]
    Directory { path: String },
    #[error("{path}: {source}")]
    Tokenizer {
        path: String,
        source: TokenizerError,
    },
}

/// One line's request.
#[derive(Debug, Clone, PartialEq)]
struct Entry {
    query: String,
    passages: Vec<String>,
    extra: Option<Map<String, Value>>,
}

/// What AIPerf warns about while it formats the requests: how many lines, and the first of them.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Note {
    lines: usize,
    first: u32,
}

impl Note {
    fn add(&mut self, line: u32) {
        if self.lines == 0 {
            self.first = line;
        }
        self.lines += 1;
    }
}

#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct Notes {
    /// Texts named other than `query`, `queries` or `passages` (an unnamed one included), ignored.
    ignored_names: Note,
    /// Several query texts: the first is sent.
    several_queries: Note,
    /// A query without passages: sent with an empty list.
    no_passages: Note,
    /// An `output_length`: a `max_tokens` rankings bodies do not carry.
    output_length: Note,
}

/// The prompts of `file`, each line one (its `text` the query, its passages, its `extra`), at most `max` of them
/// (the run's requests never reach further: they take the lines in order).
pub(crate) fn aiperf_rankings_file_prompts(
    file: &AiperfRankingsFile,
    tokenizer: &Tokenizer,
    max: usize,
) -> Result<Vec<Prompt>, AiperfRankingsFileError> {
    let path = file.path.as_str();
    if Path::new(path).is_dir() {
        return Err(AiperfRankingsFileError::Directory {
            path: path.to_owned(),
        });
    }
    // AIPerf's loaders read a gzipped file as its text (`open_text_maybe_gzip`).
    let text =
        llmbench_data::text_file::read_text_maybe_gzip(Path::new(path)).map_err(|source| {
            AiperfRankingsFileError::Read {
                path: path.to_owned(),
                source,
            }
        })?;
    let (entries, notes) = read_entries(path, &text)?;
    warn(path, &notes);
    let count = |text: &str| {
        tokenizer
            .count(text)
            .map_err(|source| AiperfRankingsFileError::Tokenizer {
                path: path.to_owned(),
                source,
            })
    };
    entries
        .into_iter()
        .take(max.max(1))
        .map(|entry| {
            let mut tokens = count(&entry.query)?;
            for passage in &entry.passages {
                tokens = tokens.saturating_add(count(passage)?);
            }
            Ok(Prompt {
                passages: entry.passages,
                extra_body: entry.extra,
                ..Prompt::text(entry.query, tokens, None)
            })
        })
        .collect()
}

/// AIPerf's warnings, once per kind for the file rather than once per request.
fn warn(path: &str, notes: &Notes) {
    let say = |note: &Note, what: &str| {
        if note.lines > 0 {
            tracing::warn!(
                file = path,
                first_line = note.first,
                lines = note.lines,
                "{what}"
            );
        }
    };
    say(
        &notes.ignored_names,
        "texts named other than query, queries or passages are ignored, as AIPerf's rankings endpoints ignore them",
    );
    say(
        &notes.several_queries,
        "several query texts in a line: the first is sent, as AIPerf sends it",
    );
    say(
        &notes.no_passages,
        "a query without passages is sent with an empty passage list, as AIPerf sends it",
    );
    say(
        &notes.output_length,
        "output_length sets a max_tokens that AIPerf's rankings bodies do not carry; not sent",
    );
}

/// Every line's entry, in file order, and what AIPerf would warn about.
fn read_entries(path: &str, text: &str) -> Result<(Vec<Entry>, Notes), AiperfRankingsFileError> {
    let mut entries = Vec::new();
    let mut notes = Notes::default();
    let mut sessions: HashSet<String> = HashSet::new();
    for (line, record) in super::jsonl_objects(text) {
        let bad = |field: &str, problem: String| AiperfRankingsFileError::Field {
            path: path.to_owned(),
            line,
            field: field.to_owned(),
            problem,
        };
        let record: Map<String, Value> = record.map_err(|problem| bad("(line)", problem))?;
        let entry = read_line(&record, line, &mut notes, &mut sessions, &bad)?;
        entries.push(entry);
    }
    if entries.is_empty() {
        return Err(AiperfRankingsFileError::Empty {
            path: path.to_owned(),
        });
    }
    Ok((entries, notes))
}

/// One `SingleTurn` line made a rankings request.
fn read_line(
    map: &Map<String, Value>,
    line: u32,
    notes: &mut Notes,
    sessions: &mut HashSet<String>,
    bad: &impl Fn(&str, String) -> AiperfRankingsFileError,
) -> Result<Entry, AiperfRankingsFileError> {
    if let Some(kind) = present(map, "type")
        && kind.as_str() != Some("single_turn")
    {
        return Err(bad(
            "type",
            format!("must be \"single_turn\", found {kind}"),
        ));
    }
    for media in AIPERF_MEDIA_FIELDS {
        if present(map, media).is_some() {
            return Err(bad(
                media,
                "a rankings request carries a query and passages of text only: AIPerf loads this media and \
                 sends none of it; remove it from the file"
                    .to_owned(),
            ));
        }
    }
    let string = |field: &str| -> Result<Option<&str>, AiperfRankingsFileError> {
        match present(map, field) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(bad(field, format!("expected a string, found {other}"))),
        }
    };
    let number = |field: &str| -> Result<Option<f64>, AiperfRankingsFileError> {
        match present(map, field) {
            None => Ok(None),
            Some(v) => v
                .as_f64()
                .map(Some)
                .ok_or_else(|| bad(field, format!("expected a number, found {v}"))),
        }
    };
    let text = string("text")?;
    let texts = named_texts(map, bad)?;
    // pydantic's checks, on truthiness: `if self.text and self.texts`, `if not _has_any_modality(self)`.
    let has_text = text.is_some_and(|t| !t.is_empty());
    let has_texts = texts.as_ref().is_some_and(|t| !t.is_empty());
    if has_text && has_texts {
        return Err(bad(
            "texts",
            "text and texts cannot be set together".to_owned(),
        ));
    }
    if !has_text && !has_texts {
        return Err(bad(
            "text",
            "at least one modality must be provided".to_owned(),
        ));
    }
    let timestamp = number("timestamp")?;
    let delay = number("delay")?;
    if timestamp.is_some_and(|t| t != 0.0) && delay.is_some_and(|d| d != 0.0) {
        return Err(bad(
            "delay",
            "timestamp and delay cannot be set together".to_owned(),
        ));
    }
    if timestamp.is_some() {
        return Err(bad(
            "timestamp",
            "a line's timestamp is read only by AIPerf's fixed schedule (`--fixed-schedule`), which llmbench does \
             not build over single_turn files; remove the timestamps (AIPerf's rate loop ignores them)"
                .to_owned(),
        ));
    }
    string("role")?;
    if let Some(session) = string("session_id")?
        && !sessions.insert(session.to_owned())
    {
        return Err(bad(
            "session_id",
            format!(
                "\"{session}\" is an earlier line's too: AIPerf makes lines sharing a session_id one session, \
                 its requests sent one after another, which llmbench does not build for rankings (each line is \
                 one request of its own); give each line its own session_id or none"
            ),
        ));
    }
    match present(map, "output_length") {
        None => {}
        // pydantic's `int` takes a float without a fraction too.
        Some(v)
            if v.as_i64().is_some_and(|n| n > 0)
                || v.as_f64().is_some_and(|f| f >= 1.0 && f.fract() == 0.0) =>
        {
            notes.output_length.add(line)
        }
        Some(v) => {
            return Err(bad(
                "output_length",
                format!("expected an integer greater than 0, found {v}"),
            ));
        }
    }
    let extra = match present(map, "extra") {
        None => None,
        Some(Value::Object(extra)) => Some(extra.clone()),
        Some(other) => {
            return Err(bad("extra", format!("expected an object, found {other}")));
        }
    };
    // `_convert_to_media_objects` reads `text` first, when it is not None, and then not `texts`: one text named
    // "", which `format_payload` ignores.
    let (field, texts) = match text {
        Some(t) => ("text", vec![(String::new(), vec![t.to_owned()])]),
        None => ("texts", texts.unwrap_or_default()),
    };
    let mut queries: Vec<String> = Vec::new();
    let mut passages: Vec<String> = Vec::new();
    let mut ignored = false;
    for (name, contents) in texts {
        match name.as_str() {
            "passages" => passages.extend(contents),
            "query" | "queries" => queries.extend(contents),
            _ => ignored = true,
        }
    }
    if ignored {
        notes.ignored_names.add(line);
    }
    if queries.is_empty() {
        return Err(bad(
            field,
            "no query: AIPerf's rankings endpoints read the texts named `query` or `queries` and `passages` \
             (`\"texts\": [{\"name\": \"query\", \"contents\": [...]}, {\"name\": \"passages\", \"contents\": \
             [...]}]`), ignore any other (an unnamed `text` or list of strings too), and fail without a query \
             (\"Rankings request requires a text with name 'query' or 'queries'\")"
                .to_owned(),
        ));
    }
    if queries.len() > 1 {
        notes.several_queries.add(line);
    }
    if passages.is_empty() {
        notes.no_passages.add(line);
    }
    Ok(Entry {
        query: queries.swap_remove(0),
        passages,
        extra,
    })
}

/// `texts` as AIPerf's `list[str] | list[Text]` reads it: each text's name and contents (a list of strings is one
/// text named ""); `None` when absent.
type NamedTexts = Vec<(String, Vec<String>)>;

fn named_texts(
    map: &Map<String, Value>,
    bad: &impl Fn(&str, String) -> AiperfRankingsFileError,
) -> Result<Option<NamedTexts>, AiperfRankingsFileError> {
    let items = match present(map, "texts") {
        None => return Ok(None),
        Some(Value::Array(items)) => items,
        Some(other) => return Err(bad("texts", format!("expected a list, found {other}"))),
    };
    if items.is_empty() {
        return Ok(Some(Vec::new()));
    }
    if items.iter().all(Value::is_string) {
        let contents = items
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect();
        return Ok(Some(vec![(String::new(), contents)]));
    }
    let mut texts = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let field = format!("texts[{i}]");
        let Value::Object(t) = item else {
            return Err(bad(
                &field,
                format!(
                    "expected all strings or all Text objects ({{\"name\", \"contents\"}}), found {item} among them"
                ),
            ));
        };
        let name = match t.get("name") {
            None => String::new(),
            Some(Value::String(name)) => name.clone(),
            Some(other) => {
                return Err(bad(
                    &format!("{field}.name"),
                    format!("expected a string, found {other}"),
                ));
            }
        };
        let contents = match t.get("contents") {
            None => Vec::new(),
            Some(Value::Array(cs)) => {
                let mut contents = Vec::with_capacity(cs.len());
                for c in cs {
                    let Value::String(c) = c else {
                        return Err(bad(
                            &format!("{field}.contents"),
                            format!("expected strings, found {c}"),
                        ));
                    };
                    contents.push(c.clone());
                }
                contents
            }
            Some(other) => {
                return Err(bad(
                    &format!("{field}.contents"),
                    format!("expected a list of strings, found {other}"),
                ));
            }
        };
        texts.push((name, contents));
    }
    Ok(Some(texts))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn read(text: &str) -> Result<(Vec<Entry>, Notes), String> {
        read_entries("r.jsonl", text).map_err(|e| e.to_string())
    }

    fn entry(query: &str, passages: &[&str]) -> Entry {
        Entry {
            query: query.to_owned(),
            passages: passages.iter().map(|p| (*p).to_owned()).collect(),
            extra: None,
        }
    }

    /// Worked by hand from `format_payload` (aiperf 0.13.0): the contents of every text named `query`/`queries`
    /// are queries and the first is sent; every `passages` text's contents are extended in order, wherever it
    /// stands; other names are ignored; a line without passages is sent with none.
    #[test]
    fn each_line_is_its_first_query_and_all_its_passages_in_order() {
        let text = "{\"texts\": [{\"name\": \"query\", \"contents\": [\"what is a cat\"]}, \
                    {\"name\": \"passages\", \"contents\": [\"a cat is an animal\", \"dogs bark\"]}], \
                    \"extra\": {\"top_n\": 1}}\n\
                    \n\
                    {\"texts\": [{\"name\": \"queries\", \"contents\": [\"q1\", \"q2\"]}, \
                    {\"name\": \"passages\", \"contents\": [\"p1\"]}, {\"name\": \"notes\", \"contents\": [\"x\"]}, \
                    {\"name\": \"passages\", \"contents\": [\"p2\"]}]}\n\
                    {\"type\": \"single_turn\", \"texts\": [{\"name\": \"query\", \"contents\": [\"lonely\"]}], \
                    \"output_length\": 5, \"role\": \"user\", \"delay\": 100, \"session_id\": \"s1\"}\n\
                    {\"texts\": [{\"name\": \"passages\", \"contents\": [\"p\"]}, {\"contents\": [\"unnamed\"]}, \
                    {\"name\": \"query\", \"contents\": [\"after\"]}], \"session_id\": \"s2\", \"extra\": null}\n";
        let (entries, notes) = read(text).expect("reads");
        let mut first = entry("what is a cat", &["a cat is an animal", "dogs bark"]);
        first.extra = json!({"top_n": 1}).as_object().cloned();
        assert_eq!(
            entries,
            [
                first,
                entry("q1", &["p1", "p2"]),
                entry("lonely", &[]),
                entry("after", &["p"]),
            ]
        );
        // The lines AIPerf warns about, by the file's line numbers (the blank line 2 is skipped, not counted).
        assert_eq!(
            notes,
            Notes {
                ignored_names: Note { lines: 2, first: 3 },
                several_queries: Note { lines: 1, first: 3 },
                no_passages: Note { lines: 1, first: 4 },
                output_length: Note { lines: 1, first: 4 },
            }
        );
    }

    #[test]
    fn a_line_aiperf_would_fail_or_not_send_is_refused_with_its_line_and_field() {
        let query = "{\"name\": \"query\", \"contents\": [\"q\"]}";
        let cases = [
            // `text` is one text named "": no query, as for a list of strings.
            (
                "{\"text\": \"plain\"}".to_owned(),
                "r.jsonl:1: `text`: no query",
            ),
            (
                "{\"texts\": [\"a\", \"b\"]}".to_owned(),
                "r.jsonl:1: `texts`: no query",
            ),
            // `text` is read first whenever it is not None, even empty: the named texts are then not read.
            (
                format!("{{\"text\": \"\", \"texts\": [{query}]}}"),
                "`text`: no query",
            ),
            (
                "{\"texts\": [{\"name\": \"passages\", \"contents\": [\"p\"]}]}".to_owned(),
                "`texts`: no query",
            ),
            // `contents` defaults to an empty list: a query text without contents gives no query.
            (
                "{\"texts\": [{\"name\": \"query\"}]}".to_owned(),
                "`texts`: no query",
            ),
            (
                format!("{{\"text\": \"a\", \"texts\": [{query}]}}"),
                "`texts`: text and texts cannot be set together",
            ),
            (
                "{\"texts\": []}".to_owned(),
                "`text`: at least one modality",
            ),
            (
                format!("{{\"texts\": [\"a\", {query}]}}"),
                "`texts[0]`: expected all strings or all Text objects",
            ),
            (
                "{\"texts\": [{\"name\": \"query\", \"contents\": [1]}]}".to_owned(),
                "`texts[0].contents`: expected strings",
            ),
            (
                "{\"texts\": [{\"name\": 3, \"contents\": [\"q\"]}]}".to_owned(),
                "`texts[0].name`: expected a string",
            ),
            (
                format!("{{\"texts\": [{query}], \"images\": [\"x.png\"]}}"),
                "`images`: a rankings request carries",
            ),
            (
                format!("{{\"texts\": [{query}], \"timestamp\": 5}}"),
                "`timestamp`: a line's timestamp is read only by AIPerf's fixed schedule",
            ),
            (
                format!("{{\"texts\": [{query}], \"timestamp\": 5, \"delay\": 3}}"),
                "`delay`: timestamp and delay cannot be set together",
            ),
            (
                format!("{{\"texts\": [{query}], \"output_length\": 0}}"),
                "`output_length`: expected an integer greater than 0",
            ),
            (
                format!("{{\"texts\": [{query}], \"extra\": [1]}}"),
                "`extra`: expected an object",
            ),
            (
                format!("{{\"type\": \"multi_turn\", \"texts\": [{query}]}}"),
                "`type`: must be \"single_turn\"",
            ),
            (
                format!(
                    "{{\"texts\": [{query}], \"session_id\": \"s\"}}\n{{\"texts\": [{query}], \"session_id\": \"s\"}}"
                ),
                "r.jsonl:2: `session_id`: \"s\" is an earlier line's too",
            ),
            ("[1]".to_owned(), "r.jsonl:1: `(line)`: not a JSON object"),
            ("\n\n".to_owned(), "r.jsonl: no records"),
        ];
        for (text, says) in cases {
            let err = read(&text).expect_err(&text);
            assert!(err.contains(says), "{text}: {err}");
        }
    }

    #[test]
    fn the_prompts_count_the_query_and_every_passage_and_stop_at_the_requests() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("r.jsonl");
        std::fs::write(
            &path,
            "{\"texts\": [{\"name\": \"query\", \"contents\": [\"one two\"]}, \
             {\"name\": \"passages\", \"contents\": [\"three four five\", \"six\"]}]}\n\
             {\"texts\": [{\"name\": \"query\", \"contents\": [\"again\"]}]}\n",
        )
        .expect("write");
        let file = AiperfRankingsFile {
            path: path.to_string_lossy().into_owned(),
        };
        let tokenizer = Tokenizer::builtin();
        let count = |t: &str| tokenizer.count(t).expect("count");
        let prompts = aiperf_rankings_file_prompts(&file, &tokenizer, 5).expect("reads");
        assert_eq!(prompts.len(), 2);
        assert_eq!(prompts[0].text, "one two");
        assert_eq!(prompts[0].passages, ["three four five", "six"]);
        assert_eq!(
            prompts[0].input_tokens,
            count("one two") + count("three four five") + count("six")
        );
        assert_eq!(prompts[0].max_tokens, None);
        assert_eq!(prompts[1].input_tokens, count("again"));
        assert!(prompts[1].passages.is_empty());
        // A run of one request reads the first line only.
        let one = aiperf_rankings_file_prompts(&file, &tokenizer, 1).expect("reads");
        assert_eq!(one.len(), 1);
    }
}
