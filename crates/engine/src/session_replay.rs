//! inference-perf `trace_session_replay` over `otel_trace_replay` data, planned before the clock starts: the
//! corpus listed and checked, put in upstream's order, and cut into the stages' shares
//! (`otel_trace_replay_datagen.py` `OTelTraceReplayDataGenerator.__init__`, `load_generator.py`
//! `run_session_stage`).
//!
//! - `trace_directory`: its `*.json` files sorted by name (`sorted(trace_dir.glob("*.json"))`); `trace_files`: the
//!   files listed, and what their glob patterns match (`glob.glob(pattern, recursive=True)`, files only; upstream
//!   keeps them in a set, in an order each Python process draws anew, so here they are sorted by path). A file that is not JSON fails the run, or is left out with `skip_invalid_files`.
//! - Each file is one session, named `trace{slot}_{session_id}` after its slot in the order
//!   `random.seed(base_seed); random.shuffle(order)` gives ([`llmbench_text::py_random`]).
//! - Stage k runs the next `num_sessions` sessions (all remaining when unset; none when the corpus is used up).
//! - Every file's graph is built once here, so what llmbench cannot replay (tool calls, structured content) is
//!   refused before anything is sent, naming the file and span; the graphs are dropped again and rebuilt one
//!   session at a time while the run goes on, so memory holds the sessions in flight only.

mod glob;
pub mod weka;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::engine::sessions::{SessionOptions, SessionReplay, SessionSource};
use crate::engine::{self, StagePlan};
use llmbench_text::py_random::PyRandom;
use llmbench_text::tokenizer::Tokenizer;
use llmbench_workload::request::BodySettings;
use llmbench_workload::workload::otel_trace::{self, Build, OverLimit, Unsupported};
use llmbench_workload::workload::{
    Arrival, DataSpec, OtelTraceData, OtelTraceSource, SessionTraceFormat, Workload,
};

/// Why the corpus could not be planned.
#[derive(Debug, thiserror::Error)]
pub enum SessionReplayError {
    #[error(
        "`{section}.trace_directory`: Trace directory does not exist or cannot be listed: {path}: {source}"
    )]
    ListDirectory {
        section: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("`{section}.trace_directory`: No JSON files found in {path}")]
    NoFiles {
        section: &'static str,
        path: PathBuf,
    },
    #[error("`{section}.trace_files`: Trace file does not exist: {path}")]
    MissingFile {
        section: &'static str,
        path: PathBuf,
    },
    #[error("`data.otel_trace_replay.trace_files`: Trace file must be a JSON file: {0}")]
    NotJsonName(PathBuf),
    #[error("`data.otel_trace_replay.trace_files`: No trace files resolved from {0}")]
    NoMatch(String),
    #[error("cannot read the trace {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "the trace {path} is not a JSON object: {why} (set `skip_invalid_files: true` to leave it out)"
    )]
    Invalid { path: PathBuf, why: String },
    #[error(
        "{path}: {source} — llmbench does not replay it yet; inference-perf would (remove the file from the corpus \
         to replay the rest)"
    )]
    Unsupported { path: PathBuf, source: Unsupported },
    #[error("{path}: {source}")]
    OverLimit { path: PathBuf, source: OverLimit },
    #[error("No valid trace records found after filtering")]
    Empty,
    #[error(
        "none of the {0} trace files yields a replay graph (each was skipped: see the warnings above), so the \
         replay would send nothing"
    )]
    NoGraph(usize),
    #[error("`data.corpus_file_path`: Prompt corpus file cannot be read: {path}: {source}")]
    Corpus {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("`data.corpus_file_path`: the prompt corpus cannot be tokenized: {0}")]
    CorpusTokens(String),
    #[error(
        "`data.weka_trace_replay.hf_dataset_path`: `{0}` is not a local copy of the dataset (a directory holding its \
         `traces.jsonl`, or that file); llmbench does not download datasets: run `huggingface-cli download \
         --repo-type dataset {0} traces.jsonl --local-dir DIR` and set `hf_dataset_path` to DIR"
    )]
    HfNotLocal(String),
    #[error(
        "the WEKA trace {path} cannot be replayed: {why} (set `skip_invalid_files: true` to leave it out)"
    )]
    InvalidWeka { path: PathBuf, why: String },
    #[error("`data.weka_trace_replay`: Duplicate trace ID found: {0}")]
    DuplicateTraceId(String),
    #[error("session id `{0}` cannot be sent in a header (it holds control characters)")]
    BadSessionId(String),
    #[error("the workload is not a trace session replay")]
    NotASessionReplay,
}

/// One file of the corpus, in listing order.
#[derive(Debug, Clone, PartialEq)]
struct Row {
    path: PathBuf,
    session_id: String,
    calls: usize,
}

/// `sorted(trace_dir.glob("*.json"))`: names ending `.json`, hidden ones left out; none is an error.
fn list_directory(dir: &Path, section: &'static str) -> Result<Vec<PathBuf>, SessionReplayError> {
    let entries = std::fs::read_dir(dir).map_err(|source| SessionReplayError::ListDirectory {
        section,
        path: dir.to_owned(),
        source,
    })?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with(".json") && !n.starts_with('.'))
        })
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(SessionReplayError::NoFiles {
            section,
            path: dir.to_owned(),
        });
    }
    Ok(files)
}

const OTEL: &str = "data.otel_trace_replay";

/// The files of the corpus (`trace_directory` or `trace_files`), in upstream's listing order.
fn list(source: &OtelTraceSource) -> Result<Vec<PathBuf>, SessionReplayError> {
    match source {
        OtelTraceSource::Directory(dir) => list_directory(Path::new(dir), OTEL),
        // The OTel reader refuses `hf_dataset_path` when it reads the profile.
        OtelTraceSource::HfCopy(_) => Err(SessionReplayError::NotASessionReplay),
        OtelTraceSource::Files(paths) => {
            let mut files = Vec::with_capacity(paths.len());
            let mut patterns = false;
            for p in paths {
                if glob::is_pattern(p) {
                    // `glob.glob(pattern, recursive=True)`, files only.
                    patterns = true;
                    for path in glob::expand(p) {
                        if path.is_file() && !files.contains(&path) {
                            files.push(path);
                        }
                    }
                    continue;
                }
                let path = PathBuf::from(p);
                if !path.is_file() {
                    return Err(SessionReplayError::MissingFile {
                        section: OTEL,
                        path,
                    });
                }
                if path.extension().and_then(|e| e.to_str()) != Some("json") {
                    return Err(SessionReplayError::NotJsonName(path));
                }
                if !files.contains(&path) {
                    files.push(path);
                }
            }
            if patterns {
                // Upstream collects the files in a set, whose order Python's per-process string hashing changes
                // from run to run; sorted, the corpus is the same in every run.
                files.sort();
                if files.is_empty() {
                    return Err(SessionReplayError::NoMatch(paths.join(", ")));
                }
            }
            if files.is_empty() {
                return Err(SessionReplayError::Empty);
            }
            Ok(files)
        }
    }
}

/// Reads one file: `None` when it is not a JSON object and `skip_invalid_files` leaves it out.
fn row(path: &Path, data: &OtelTraceData) -> Result<Option<Row>, SessionReplayError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(source) if !data.skip_invalid_files => {
            return Err(SessionReplayError::Read {
                path: path.to_owned(),
                source,
            });
        }
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "trace file left out (skip_invalid_files)");
            return Ok(None);
        }
    };
    let value = match serde_json::from_str::<serde_json::Value>(&text) {
        Ok(v) if v.is_object() => v,
        other => {
            let why = match other {
                Err(e) => e.to_string(),
                Ok(_) => "not an object".to_owned(),
            };
            if data.skip_invalid_files {
                tracing::warn!(path = %path.display(), %why, "trace file left out (skip_invalid_files)");
                return Ok(None);
            }
            return Err(SessionReplayError::Invalid {
                path: path.to_owned(),
                why,
            });
        }
    };
    drop(text);
    let stem = path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or_default();
    let session_id = otel_trace::session_name(&value, stem);
    let calls = match otel_trace::build(&value, data.include_errors) {
        Ok(Build::Graph(graph)) => {
            otel_trace::check_limits(&graph).map_err(|source| SessionReplayError::OverLimit {
                path: path.to_owned(),
                source,
            })?;
            graph.events.len()
        }
        Ok(Build::Skipped(why)) => {
            // Upstream builds the graph when the session is dispatched, logs why it has none and skips it.
            tracing::warn!(path = %path.display(), %why, "session will be skipped: no replay graph");
            0
        }
        Err(source) => {
            return Err(SessionReplayError::Unsupported {
                path: path.to_owned(),
                source,
            });
        }
    };
    Ok(Some(Row {
        path: path.to_owned(),
        session_id,
        calls,
    }))
}

/// The corpus in the order its sessions are replayed, named as upstream names them.
pub fn corpus(data: &OtelTraceData, seed: u64) -> Result<Vec<SessionSource>, SessionReplayError> {
    let mut rows = Vec::new();
    for path in list(&data.source)? {
        if let Some(row) = row(&path, data)? {
            rows.push(row);
        }
    }
    if rows.is_empty() {
        return Err(SessionReplayError::Empty);
    }
    // Upstream skips a session without a replay graph and, with none left, ends having sent nothing: refused
    // here before the clock starts instead of a run that exits 0 empty.
    if rows.iter().all(|r| r.calls == 0) {
        return Err(SessionReplayError::NoGraph(rows.len()));
    }
    Ok(order(rows, seed))
}

/// `random.seed(base_seed); random.shuffle(order)` over the rows, slot `i` named `trace{i}_{session_id}` (or
/// `trace{i}_session_{i}` for an empty id). Pure.
fn order(rows: Vec<Row>, seed: u64) -> Vec<SessionSource> {
    let mut order: Vec<usize> = (0..rows.len()).collect();
    PyRandom::seed(seed).shuffle(&mut order);
    order
        .into_iter()
        .enumerate()
        .map(|(slot, row)| {
            let row = &rows[row];
            let id = if row.session_id.is_empty() {
                format!("session_{slot}")
            } else {
                row.session_id.clone()
            };
            SessionSource {
                id: u32::try_from(slot).unwrap_or(u32::MAX),
                name: format!("trace{slot}_{id}"),
                path: row.path.clone(),
                calls: row.calls,
                header: None,
                weka: None,
            }
        })
        .collect()
}

/// The engine's stages for `workload` (a `trace_session_replay` of `otel_trace_replay` or `weka_trace_replay`
/// data), with at most `in_flight_cap` calls queued or in flight; `tokenizer` cuts WEKA prompts.
pub fn session_plans(
    workload: &Workload,
    settings: BodySettings,
    in_flight_cap: usize,
    tokenizer: &Tokenizer,
) -> Result<Vec<engine::Stage>, SessionReplayError> {
    let DataSpec::OtelTrace(data) = &workload.data else {
        return Err(SessionReplayError::NotASessionReplay);
    };
    let mut sessions = match &data.format {
        SessionTraceFormat::Otel => corpus(data, workload.seed)?,
        SessionTraceFormat::Weka(options) => weka::corpus(data, options, workload.seed, tokenizer)?,
    };
    if let Some(name) = &workload.api.session_id_header {
        for session in &mut sessions {
            // `openai_client.py`: `headers[session_id_header_key] = session_id`, the loadgen's session id.
            if session
                .name
                .bytes()
                .any(|b| b.is_ascii_control() && b != b'\t')
            {
                return Err(SessionReplayError::BadSessionId(session.name.clone()));
            }
            session.header = Some(Arc::new((name.clone(), session.name.clone())));
        }
    }
    let options = SessionOptions {
        include_errors: data.include_errors,
        max_wait: Duration::from_millis(data.max_wait_ms),
        predecessor_wait_timeout: data.predecessor_wait_timeout,
        disable_output_substitution: data.disable_output_substitution,
        inject_random_session_id: data.inject_random_session_id,
    };
    let mut cursor = 0usize;
    let mut stages = Vec::with_capacity(workload.stages.len());
    for (index, stage) in workload.stages.iter().enumerate() {
        let Arrival::TraceSessions {
            concurrent_sessions,
            session_rate,
            num_sessions,
            timeout,
        } = stage.arrival
        else {
            return Err(SessionReplayError::NotASessionReplay);
        };
        let share = slice(sessions.len(), cursor, num_sessions);
        if share.is_empty() {
            tracing::warn!(
                stage = index,
                "no sessions remaining in trace files, skipping"
            );
        }
        cursor = share.end;
        stages.push(engine::Stage {
            plan: StagePlan::Sessions(Arc::new(SessionReplay {
                sessions: sessions[share].to_vec(),
                concurrent_sessions,
                session_rate,
                timeout,
                in_flight_cap: Some(in_flight_cap),
                settings: settings.clone(),
                options,
            })),
            requested_rate: None,
            errors: engine::ErrorLimits::default(),
        });
    }
    Ok(stages)
}

/// A stage's share of a corpus of `total` sessions from `cursor`: `num_sessions` of them, or all remaining.
fn slice(total: usize, cursor: usize, num_sessions: Option<u64>) -> std::ops::Range<usize> {
    let available = total.saturating_sub(cursor);
    let n = num_sessions.map_or(available, |n| {
        usize::try_from(n).unwrap_or(usize::MAX).min(available)
    });
    cursor..cursor + n
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, id: &str) -> Row {
        Row {
            path: PathBuf::from(name),
            session_id: id.to_owned(),
            calls: 1,
        }
    }

    #[test]
    fn sessions_take_cpythons_shuffled_order_and_upstreams_names() {
        // random.seed(7) shuffles [0, 1, 2] to [2, 0, 1] (CPython; see py_random's tests).
        let sessions = order(
            vec![row("a.json", "x"), row("b.json", ""), row("c.json", "z")],
            7,
        );
        let names: Vec<&str> = sessions.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["trace0_z", "trace1_x", "trace2_session_2"]);
        assert_eq!(sessions[2].path, PathBuf::from("b.json"));
        assert_eq!(sessions.iter().map(|s| s.id).collect::<Vec<_>>(), [0, 1, 2]);
    }

    #[test]
    fn stages_draw_the_next_sessions_of_the_corpus() {
        // 5 sessions: a stage of 2, one of all remaining (3), then nothing left.
        assert_eq!(slice(5, 0, Some(2)), 0..2);
        assert_eq!(slice(5, 2, None), 2..5);
        assert_eq!(slice(5, 5, Some(4)), 5..5);
        assert_eq!(slice(5, 3, Some(4)), 3..5);
    }

    #[test]
    fn a_directory_lists_its_json_files_by_name_and_invalid_ones_are_refused_or_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let trace = |id: &str| {
            serde_json::json!({"trace_id": id, "spans": [{
                "span_id": "s", "name": "chat m", "start_time": "2026-01-01T00:00:00",
                "end_time": "2026-01-01T00:00:01",
                "attributes": {"gen_ai.operation.name": "chat",
                               "gen_ai.input.messages": "[{\"role\": \"user\", \"content\": \"hi\"}]",
                               "gen_ai.output.text": "hello"}}]})
            .to_string()
        };
        std::fs::write(dir.path().join("b.json"), trace("tb")).unwrap();
        std::fs::write(dir.path().join("a.json"), trace("ta")).unwrap();
        std::fs::write(dir.path().join("notes.txt"), "x").unwrap();
        std::fs::write(dir.path().join("c.json"), "{not json").unwrap();
        let mut data = OtelTraceData {
            source: OtelTraceSource::Directory(dir.path().display().to_string()),
            include_errors: true,
            skip_invalid_files: false,
            max_wait_ms: 15_000,
            predecessor_wait_timeout: None,
            disable_output_substitution: false,
            inject_random_session_id: false,
            format: SessionTraceFormat::Otel,
        };
        let err = corpus(&data, 42).unwrap_err();
        assert!(
            matches!(err, SessionReplayError::Invalid { ref path, .. } if path.ends_with("c.json")),
            "{err}"
        );
        data.skip_invalid_files = true;
        let sessions = corpus(&data, 42).unwrap();
        // random.seed(42) shuffles [0, 1] to [1, 0] (CPython 3: `random.seed(42); o=[0,1]; random.shuffle(o)`).
        let names: Vec<&str> = sessions.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["trace0_tb", "trace1_ta"]);
        assert!(sessions.iter().all(|s| s.calls == 1));

        // `api.session_id_header_key`: each session's calls carry its name in that header.
        let mut workload = llmbench_workload::workload::Workload::empty(
            llmbench_workload::workload::Harness::InferencePerf,
            llmbench_workload::workload::Dialect::InferencePerf,
        );
        workload.seed = 42;
        workload.api.session_id_header = Some("x-session-id".to_owned());
        workload.data = DataSpec::OtelTrace(data);
        workload.stages = vec![llmbench_workload::workload::Stage {
            load: llmbench_workload::workload::LoadKind::Trace,
            arrival: Arrival::TraceSessions {
                concurrent_sessions: 1,
                session_rate: None,
                num_sessions: Some(1),
                timeout: None,
            },
            limit: llmbench_workload::workload::StageLimit::default(),
            max_concurrency: None,
            warmup: None,
            cooldown: None,
        }];
        let settings = BodySettings::new(
            &workload.api,
            "m".to_owned(),
            llmbench_workload::request::BodyStyle::InferencePerf,
        );
        let stages = session_plans(&workload, settings, 100, &Tokenizer::builtin()).unwrap();
        let StagePlan::Sessions(replay) = &stages[0].plan else {
            panic!("a session stage");
        };
        assert_eq!(replay.sessions.len(), 1, "num_sessions: 1");
        assert_eq!(
            replay.sessions[0].header.as_deref(),
            Some(&("x-session-id".to_owned(), "trace0_tb".to_owned()))
        );
    }

    /// `_load_weka_traces`: `trace_files` are paths (a pattern is a missing file), a file that is not a trace is
    /// left out under `skip_invalid_files`, and two traces with one id fail the run whatever it says.
    #[test]
    fn weka_trace_files_are_paths_and_duplicate_ids_are_refused() {
        use llmbench_workload::workload::WekaTraceOptions;
        let dir = tempfile::tempdir().unwrap();
        let trace = r#"{"id": "t", "models": ["m"], "block_size": 2, "requests": [
            {"t": 0, "type": "n", "model": "m", "in": 4, "out": 2, "hash_ids": [1, 2]}]}"#;
        std::fs::write(dir.path().join("a.json"), trace).unwrap();
        std::fs::write(dir.path().join("b.json"), trace).unwrap();
        std::fs::write(dir.path().join("c.json"), r#"{"id": "c"}"#).unwrap();
        std::fs::write(dir.path().join("corpus.txt"), "one two three four five six").unwrap();
        let options = WekaTraceOptions {
            corpus_file: dir.path().join("corpus.txt").display().to_string(),
            default_block_size: 64,
            idle_gap_cap_seconds: 60.0,
            num_dataset_entries: 100,
        };
        let files = |names: &[&str]| {
            OtelTraceSource::Files(
                names
                    .iter()
                    .map(|n| dir.path().join(n).display().to_string())
                    .collect(),
            )
        };
        let mut data = OtelTraceData {
            source: files(&["*.json"]),
            include_errors: true,
            skip_invalid_files: true,
            max_wait_ms: 15_000,
            predecessor_wait_timeout: None,
            disable_output_substitution: false,
            inject_random_session_id: false,
            format: SessionTraceFormat::Weka(options.clone()),
        };
        let tokenizer = Tokenizer::builtin();
        let err = weka::corpus(&data, &options, 42, &tokenizer).unwrap_err();
        assert!(
            matches!(err, SessionReplayError::MissingFile { ref path, .. } if path.ends_with("*.json")),
            "{err}"
        );
        data.source = files(&["a.json", "c.json"]);
        let sessions = weka::corpus(&data, &options, 42, &tokenizer).unwrap();
        let names: Vec<&str> = sessions.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["wekatrace0_t"]);
        assert_eq!(sessions[0].calls, 1);
        data.skip_invalid_files = false;
        let err = weka::corpus(&data, &options, 42, &tokenizer).unwrap_err();
        assert!(
            matches!(err, SessionReplayError::InvalidWeka { ref path, .. } if path.ends_with("c.json")),
            "{err}"
        );
        data.source = OtelTraceSource::Directory(dir.path().display().to_string());
        data.skip_invalid_files = true;
        let err = weka::corpus(&data, &options, 42, &tokenizer).unwrap_err();
        assert!(
            matches!(err, SessionReplayError::DuplicateTraceId(ref id) if id == "t"),
            "{err}"
        );

        // `hf_dataset_path`: a local copy's `traces.jsonl`, its first `num_dataset_entries` lines (blank ones
        // counted, then skipped), each a trace.
        let other = |id: &str| {
            trace
                .replace(r#""id": "t""#, &format!(r#""id": "{id}""#))
                .replace('\n', " ")
        };
        std::fs::write(
            dir.path().join("traces.jsonl"),
            format!("{}\n\n{}\n{}\n", other("h0"), other("h1"), other("h2")),
        )
        .unwrap();
        data.source = OtelTraceSource::HfCopy(dir.path().display().to_string());
        let mut three = options.clone();
        three.num_dataset_entries = 3;
        let sessions = weka::corpus(&data, &three, 42, &tokenizer).unwrap();
        let mut names: Vec<&str> = sessions.iter().map(|s| s.name.as_str()).collect();
        names.sort_unstable();
        assert_eq!(names, ["wekatrace0_h0", "wekatrace1_h1"]);
        data.source = OtelTraceSource::HfCopy("org/not-here".to_owned());
        let err = weka::corpus(&data, &three, 42, &tokenizer).unwrap_err();
        assert!(
            matches!(err, SessionReplayError::HfNotLocal(_))
                && err.to_string().contains("huggingface-cli download"),
            "{err}"
        );
    }

    #[test]
    fn a_corpus_whose_files_all_lack_a_graph_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.json"), r#"{"spans": []}"#).unwrap();
        std::fs::write(dir.path().join("b.json"), r#"{"spans": []}"#).unwrap();
        let data = OtelTraceData {
            source: OtelTraceSource::Directory(dir.path().display().to_string()),
            include_errors: true,
            skip_invalid_files: false,
            max_wait_ms: 15_000,
            predecessor_wait_timeout: None,
            disable_output_substitution: false,
            inject_random_session_id: false,
            format: SessionTraceFormat::Otel,
        };
        let err = corpus(&data, 42).unwrap_err();
        assert!(matches!(err, SessionReplayError::NoGraph(2)), "{err}");
    }
}
