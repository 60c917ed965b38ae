//! AIPerf's custom dataset files other than Mooncake traces, read before the clock starts into the conversations
//! AIPerf sends (a child of `conversations`; they are sent as `Style::AiperfConversations` sends its own).
//!
//! Upstream (`ai-dynamo/aiperf` db4f6397, `aiperf/dataset/loader/`): JSONL, blank lines skipped, each line a
//! pydantic model (`models.py`) whose unknown fields are allowed and ignored (`AIPerfBaseModel`, `extra="allow"`).
//! - `single_turn` (`SingleTurnDatasetLoader`): each line one conversation of one turn.
//! - `multi_turn` (`MultiTurnDatasetLoader`): each line `{"session_id": …, "turns": [single turns]}`; lines of one
//!   `session_id` are one conversation (in order of first appearance), a line without one a conversation of its own.
//! - `random_pool` (`RandomPoolDatasetLoader`): the lines of one file are a pool; `--conversation-num`
//!   conversations of one turn each are sampled from it with `random.choices(pool, k=N)` — Python's global
//!   generator, seeded by `--random-seed` in `bootstrap.py` and not drawn from before in the dataset process
//!   (without a prefix pool), so the picks are CPython's `floor(random() * len(pool))` and reproduced here.
//! - A turn (`SingleTurn`): `text` or `texts` (strings, or `{"name", "contents"}` objects) — not both, at least one
//!   modality — `timestamp` and `delay` (not both), `role`. `CustomDatasetComposer._finalize_turn` then sets its
//!   `max_tokens` by `--osl`/`--osl-stddev` (AIPerf's positive normal, drawn per turn; without `--osl`, none).
//!
//! What is sent: a turn with one text is that text (`openai_chat.py`: a string `content`; `openai_completions.py`:
//! the prompt). Refused, naming the file, line and field: images, audio and video, a turn's `extra`,
//! `output_length` and single-turn `session_id` (AIPerf 0.13 sends them; llmbench does not), several texts in one turn
//! (AIPerf sends them as one request of several prompts or content parts), an empty text, a `role` other than
//! `user`, a `random_pool` directory (pools merged into one turn of several named texts). `timestamp` and `delay`
//! are read and, as in AIPerf's request-rate loop (the only one for these files without `--fixed-schedule`), not
//! used: a warning says so.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use rand::SeedableRng as _;
use rand::rngs::Xoshiro256PlusPlus;
use serde_json::{Map, Value};

use super::{ConversationError, Piece, Script, UserTurn};
use crate::prompts::{AIPERF_MEDIA_FIELDS, aiperf_field as present, distribution};
use crate::workload::{AiperfFile, AiperfFileKind};
use llmbench_text::py_random::PyRandom;
use llmbench_text::tokenizer::{Tokenizer, TokenizerError};

/// Why an AIPerf dataset file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum AiperfDatasetError {
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
        "{path}: a random_pool directory (AIPerf merges one pick from each file's pool into one turn of several \
         named texts, which llmbench does not send); give one file"
    )]
    Directory { path: String },
    #[error("{path}: {source}")]
    Tokenizer {
        path: String,
        source: TokenizerError,
    },
}

/// One turn read from a file: its text and where it came from.
struct FileTurn {
    text: String,
    line: u32,
    /// The turn's `delay` in ms: AIPerf 0.13 waits it after the previous turn returned before it queues this one.
    delay_ms: Option<u64>,
}

/// The conversations of `spec`, their texts counted with `tokenizer`, their `max_tokens` drawn with `seed`.
pub(super) fn aiperf_file_conversations(
    tokenizer: &Tokenizer,
    spec: &AiperfFile,
    seed: u64,
) -> Result<Vec<Script>, ConversationError> {
    let path = spec.path.as_str();
    if Path::new(path).is_dir() {
        return Err(AiperfDatasetError::Directory {
            path: path.to_owned(),
        }
        .into());
    }
    // AIPerf's loaders read a gzipped file as its text (`open_text_maybe_gzip`).
    let text = llmbench_data::text_file::read_text_maybe_gzip(std::path::Path::new(path)).map_err(
        |source| AiperfDatasetError::Read {
            path: path.to_owned(),
            source,
        },
    )?;
    let conversations = read_conversations(path, &text, spec, seed)?;
    let output = spec
        .output
        .as_ref()
        .map(|o| -> Result<_, ConversationError> { Ok(distribution("osl", o)?.sampler("osl")?) })
        .transpose()?;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut counted: HashMap<u32, u32> = HashMap::new();
    let mut scripts = Vec::with_capacity(conversations.len());
    for turns in conversations {
        let mut user_turns = Vec::with_capacity(turns.len());
        for turn in turns {
            let tokens = match counted.get(&turn.line) {
                Some(&n) if spec.kind == AiperfFileKind::RandomPool => n,
                _ => {
                    let n = tokenizer.count(&turn.text).map_err(|source| {
                        AiperfDatasetError::Tokenizer {
                            path: path.to_owned(),
                            source,
                        }
                    })?;
                    counted.insert(turn.line, n);
                    n
                }
            };
            user_turns.push(UserTurn {
                text: Piece {
                    text: turn.text,
                    tokens,
                },
                max_tokens: output.as_ref().map(|s| s.sample(&mut rng).max(1)),
                delay: (!user_turns.is_empty())
                    .then_some(turn.delay_ms)
                    .flatten()
                    .map(Duration::from_millis),
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

/// Each conversation's turns, in AIPerf's order.
fn read_conversations(
    path: &str,
    text: &str,
    spec: &AiperfFile,
    seed: u64,
) -> Result<Vec<Vec<FileTurn>>, AiperfDatasetError> {
    let mut conversations: Vec<Vec<FileTurn>> = Vec::new();
    let mut sessions: HashMap<String, usize> = HashMap::new();
    for (line, record) in crate::prompts::jsonl_objects(text) {
        let bad = |field: &str, problem: String| AiperfDatasetError::Field {
            path: path.to_owned(),
            line,
            field: field.to_owned(),
            problem,
        };
        let record: Map<String, Value> = record.map_err(|problem| bad("(line)", problem))?;
        match spec.kind {
            AiperfFileKind::SingleTurn => {
                literal_type(&record, "single_turn", "type", &bad)?;
                let turn = single_turn(&record, "", line, &bad)?;
                conversations.push(vec![turn]);
            }
            AiperfFileKind::RandomPool => {
                literal_type(&record, "random_pool", "type", &bad)?;
                conversations.push(vec![pool_entry(&record, line, &bad)?]);
            }
            AiperfFileKind::MultiTurn => {
                literal_type(&record, "multi_turn", "type", &bad)?;
                let session = match present(&record, "session_id") {
                    None => None,
                    Some(Value::String(s)) => Some(s.clone()),
                    Some(other) => {
                        return Err(bad(
                            "session_id",
                            format!("expected a string, found {other}"),
                        ));
                    }
                };
                let turns = match record.get("turns") {
                    Some(Value::Array(turns)) if !turns.is_empty() => turns,
                    Some(Value::Array(_)) => {
                        return Err(bad(
                            "turns",
                            "at least one turn must be provided".to_owned(),
                        ));
                    }
                    Some(other) => {
                        return Err(bad(
                            "turns",
                            format!("expected a list of turns, found {other}"),
                        ));
                    }
                    None => return Err(bad("turns", "required".to_owned())),
                };
                let mut read = Vec::with_capacity(turns.len());
                for (i, turn) in turns.iter().enumerate() {
                    let prefix = format!("turns[{i}].");
                    let Value::Object(turn) = turn else {
                        return Err(bad(
                            &format!("turns[{i}]"),
                            format!("expected an object, found {turn}"),
                        ));
                    };
                    literal_type(turn, "single_turn", &format!("{prefix}type"), &bad)?;
                    read.push(single_turn(turn, &prefix, line, &bad)?);
                }
                let slot = match session {
                    Some(id) => *sessions.entry(id).or_insert_with(|| {
                        conversations.push(Vec::new());
                        conversations.len() - 1
                    }),
                    None => {
                        conversations.push(Vec::new());
                        conversations.len() - 1
                    }
                };
                conversations[slot].extend(read);
            }
        }
    }
    if conversations.is_empty() {
        return Err(AiperfDatasetError::Empty {
            path: path.to_owned(),
        });
    }
    if spec.kind == AiperfFileKind::RandomPool {
        // `random.choices(dataset_pool, k=num_conversations)`: `population[floor(random() * n)]` each.
        let pool: Vec<FileTurn> = conversations.into_iter().flatten().collect();
        let mut rng = PyRandom::seed(seed);
        let n = pool.len() as f64;
        return Ok((0..spec.conversations)
            .map(|_| {
                let pick = &pool[((rng.random() * n) as usize).min(pool.len() - 1)];
                vec![FileTurn {
                    text: pick.text.clone(),
                    line: pick.line,
                    delay_ms: None,
                }]
            })
            .collect());
    }
    Ok(conversations)
}

/// `type` is a `Literal` in AIPerf's models: present, it must name this layout.
fn literal_type(
    map: &Map<String, Value>,
    want: &str,
    field: &str,
    bad: &impl Fn(&str, String) -> AiperfDatasetError,
) -> Result<(), AiperfDatasetError> {
    match present(map, "type") {
        Some(kind) if kind.as_str() != Some(want) => {
            Err(bad(field, format!("must be \"{want}\", found {kind}")))
        }
        _ => Ok(()),
    }
}

/// A `SingleTurn`: its one text, after AIPerf's checks.
fn single_turn(
    map: &Map<String, Value>,
    prefix: &str,
    line: u32,
    bad: &impl Fn(&str, String) -> AiperfDatasetError,
) -> Result<FileTurn, AiperfDatasetError> {
    let field = |name: &str| format!("{prefix}{name}");
    let int = |name: &str| -> Result<Option<i64>, AiperfDatasetError> {
        match present(map, name) {
            None => Ok(None),
            Some(v) => v
                .as_i64()
                .map(Some)
                .ok_or_else(|| bad(&field(name), format!("expected an integer, found {v}"))),
        }
    };
    let timestamp = int("timestamp")?;
    let delay = int("delay")?;
    // `if self.timestamp and self.delay`: both set and non-zero.
    if timestamp.is_some_and(|t| t != 0) && delay.is_some_and(|d| d != 0) {
        return Err(bad(
            &field("delay"),
            "timestamp and delay cannot be set together".to_owned(),
        ));
    }
    // AIPerf 0.13 runs these layouts with its rate loop (they are not trace datasets, so their timestamps are
    // not promoted to a fixed schedule) and reads a turn's timestamp only for a fixed schedule, which llmbench
    // does not build over them.
    if timestamp.is_some() {
        return Err(bad(
            &field("timestamp"),
            "a turn's timestamp is read only by AIPerf's fixed schedule (`--fixed-schedule`), which llmbench does \
             not build over single_turn/multi_turn files; remove the timestamps (AIPerf's rate loop ignores them) \
             or use `delay` for think time"
                .to_owned(),
        ));
    }
    match present(map, "role") {
        None => {}
        Some(Value::String(role)) if role == "user" => {}
        Some(other) => {
            return Err(bad(
                &field("role"),
                format!(
                    "{other}: a turn sent with a role other than user is not built (llmbench sends user turns)"
                ),
            ));
        }
    }
    // AIPerf 0.13's `SingleTurn` fields that change what is sent, or when: refused rather than ignored.
    for (name, why) in [
        (
            "extra",
            "a turn's `extra` (AIPerf 0.13 merges it into that request's body), which llmbench does not send; \
             give body fields to every request with --extra-inputs",
        ),
        (
            "output_length",
            "a turn's `output_length` (AIPerf 0.13 makes it that request's max_tokens), which llmbench does not \
             send; give every request's length with --osl",
        ),
        (
            "session_id",
            "a single turn's `session_id` (AIPerf 0.13 sends the entries sharing one in order, one after another), \
             which llmbench does not build; use a multi_turn file for ordered turns",
        ),
    ] {
        if present(map, name).is_some() {
            return Err(bad(&field(name), why.to_owned()));
        }
    }
    let text = texts(map, prefix, bad)?;
    // A turn's `delay` (`TurnMetadata.delay_ms`) is read for the turn after one that returned
    // (`RequestRateStrategy.handle_credit_return`), so a first turn's is never waited; a negative one is at once.
    Ok(FileTurn {
        text,
        line,
        delay_ms: delay.map(|d| d.max(0) as u64),
    })
}

/// A `RandomPool` entry's one text.
fn pool_entry(
    map: &Map<String, Value>,
    line: u32,
    bad: &impl Fn(&str, String) -> AiperfDatasetError,
) -> Result<FileTurn, AiperfDatasetError> {
    Ok(FileTurn {
        text: texts(map, "", bad)?,
        line,
        delay_ms: None,
    })
}

/// The one text of a turn (`text`, or `texts` of one string or one `Text` of one content), refusing what AIPerf
/// would send another way.
fn texts(
    map: &Map<String, Value>,
    prefix: &str,
    bad: &impl Fn(&str, String) -> AiperfDatasetError,
) -> Result<String, AiperfDatasetError> {
    let field = |name: &str| format!("{prefix}{name}");
    for media in AIPERF_MEDIA_FIELDS {
        if present(map, media).is_some() {
            return Err(bad(
                &field(media),
                "images, audio and video from a dataset file are not sent; only text turns are"
                    .to_owned(),
            ));
        }
    }
    let text = match present(map, "text") {
        None => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => {
            return Err(bad(
                &field("text"),
                format!("expected a string, found {other}"),
            ));
        }
    };
    let mut contents: Vec<String> = Vec::new();
    let listed = match present(map, "texts") {
        None => false,
        Some(Value::Array(items)) => {
            for item in items {
                match item {
                    Value::String(s) => contents.push(s.clone()),
                    Value::Object(t) => match t.get("contents") {
                        Some(Value::Array(cs)) => {
                            for c in cs {
                                let Value::String(c) = c else {
                                    return Err(bad(
                                        &field("texts"),
                                        format!("a content that is not a string: {c}"),
                                    ));
                                };
                                contents.push(c.clone());
                            }
                        }
                        other => {
                            return Err(bad(
                                &field("texts"),
                                format!(
                                    "a Text object needs a `contents` list, found {}",
                                    other.unwrap_or(&Value::Null)
                                ),
                            ));
                        }
                    },
                    other => {
                        return Err(bad(
                            &field("texts"),
                            format!("expected strings or Text objects, found {other}"),
                        ));
                    }
                }
            }
            !items.is_empty()
        }
        Some(other) => {
            return Err(bad(
                &field("texts"),
                format!("expected a list, found {other}"),
            ));
        }
    };
    // pydantic's checks, on truthiness: `if self.text and self.texts`, `if not any([...])`.
    let has_text = text.as_deref().is_some_and(|t| !t.is_empty());
    if has_text && listed {
        return Err(bad(
            &field("texts"),
            "text and texts cannot be set together".to_owned(),
        ));
    }
    if !has_text && !listed {
        return Err(bad(
            &field("text"),
            "at least one modality must be provided".to_owned(),
        ));
    }
    let one = match text.filter(|t| !t.is_empty()) {
        Some(t) => t,
        None if contents.len() == 1 => contents.remove(0),
        None => {
            return Err(bad(
                &field("texts"),
                format!(
                    "{} texts in one turn: AIPerf sends them as one request of several prompts or content parts, \
                     which llmbench does not send; give one text per turn",
                    contents.len()
                ),
            ));
        }
    };
    if one.is_empty() {
        return Err(bad(
            &field("texts"),
            "an empty text (AIPerf would send an empty prompt)".to_owned(),
        ));
    }
    Ok(one)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::AiperfSamplingStrategy;

    fn spec(kind: AiperfFileKind, conversations: u64) -> AiperfFile {
        AiperfFile {
            path: "d.jsonl".to_owned(),
            kind,
            conversations,
            output: None,
            sampling: AiperfSamplingStrategy::Sequential,
        }
    }

    fn read(
        kind: AiperfFileKind,
        conversations: u64,
        text: &str,
    ) -> Result<Vec<Vec<String>>, String> {
        read_conversations("d.jsonl", text, &spec(kind, conversations), 7)
            .map(|c| {
                c.into_iter()
                    .map(|t| t.into_iter().map(|t| t.text).collect())
                    .collect()
            })
            .map_err(|e| e.to_string())
    }

    #[test]
    fn multi_turn_lines_of_one_session_are_one_conversation_in_order_of_first_appearance() {
        let got = read(
            AiperfFileKind::MultiTurn,
            0,
            "{\"session_id\": \"b\", \"turns\": [{\"text\": \"b1\"}]}\n{\"turns\": [{\"texts\": [\"x\"]}]}\n\
             {\"session_id\": \"b\", \"turns\": [{\"text\": \"b2\"}, {\"text\": \"b3\", \"role\": null}]}\n",
        )
        .expect("reads");
        assert_eq!(got, [vec!["b1", "b2", "b3"], vec!["x"]]);
    }

    #[test]
    fn a_random_pool_is_sampled_as_cpythons_random_choices_samples_it() {
        // CPython: random.Random(7).choices(["p0", "p1", "p2", "p3", "p4"], k=6) →
        // ['p1', 'p0', 'p3', 'p0', 'p2', 'p1'] (`floor(random() * 5)` per pick).
        let got = read(
            AiperfFileKind::RandomPool,
            6,
            "{\"text\": \"p0\"}\n{\"text\": \"p1\"}\n{\"text\": \"p2\"}\n{\"text\": \"p3\"}\n{\"text\": \"p4\"}\n",
        )
        .expect("reads");
        let picks: Vec<&str> = got.iter().map(|c| c[0].as_str()).collect();
        assert_eq!(picks, ["p1", "p0", "p3", "p0", "p2", "p1"]);
    }

    #[test]
    fn aiperfs_model_checks_are_kept_with_the_line_and_field() {
        for (kind, text, says) in [
            (
                AiperfFileKind::SingleTurn,
                "{\"text\": \"a\", \"texts\": [\"b\"]}",
                "d.jsonl:1: `texts`: text and texts",
            ),
            (
                AiperfFileKind::SingleTurn,
                "{\"role\": \"user\"}",
                "d.jsonl:1: `text`: at least one modality",
            ),
            (
                AiperfFileKind::SingleTurn,
                "{\"type\": \"multi_turn\", \"text\": \"a\"}",
                "`type`: must be",
            ),
            (
                AiperfFileKind::SingleTurn,
                "{\"text\": \"a\", \"role\": \"system\"}",
                "`role`",
            ),
            (
                AiperfFileKind::MultiTurn,
                "{\"turns\": []}",
                "`turns`: at least one turn",
            ),
            (AiperfFileKind::RandomPool, "", "no records"),
            (AiperfFileKind::SingleTurn, "[1]", "not a JSON object"),
        ] {
            let err = read(kind, 3, text).expect_err(text);
            assert!(err.contains(says), "{text}: {err}");
        }
    }
}
