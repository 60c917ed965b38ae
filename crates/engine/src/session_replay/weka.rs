//! A `weka_trace_replay` corpus, planned as `WekaTraceReplayDataGenerator.__init__` plans it (inference-perf
//! 7de5ef2, `datagen/replay/weka_trace_replay_datagen.py`):
//!
//! - The prompt corpus is inference-perf's instruction line and `data.corpus_file_path`'s text, tokenized with the
//!   run's tokenizer as Hugging Face's `encode` does (special tokens added).
//! - `trace_directory`: its `*.json` files sorted by name; `trace_files`: each entry a path (no glob expansion,
//!   unlike `otel_trace_replay`), a missing one failing the run. Each file is one trace; one that does not read or
//!   validate fails the run, or is left out with `skip_invalid_files`.
//! - `hf_dataset_path`: upstream downloads the dataset's `traces.jsonl`; llmbench reads a local copy (that file, or
//!   a directory holding it), its first `num_dataset_entries` lines each a trace (blank ones skipped), a line that
//!   does not validate failing the run or left out with `skip_invalid_files`.
//! - Two traces with one `id` fail the run.
//! - Trace `i` of that order compiles into calls (`llmbench_data::weka_trace`); one without calls is no session,
//!   one that fails to compile fails the run or is left out with `skip_invalid_files`; the others are sessions
//!   named `wekatrace{i}_{id}`, put in the order `random.seed(base_seed); random.shuffle(sessions)` gives.
//!
//! Each trace is compiled here once to check it and count its calls, then again when its session starts, so memory
//! holds the traces and the sessions in flight, not every session's prompts.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use llmbench_data::weka_trace::{self, CORPUS_BASE_PROMPT, Compile, WekaTrace};
use llmbench_text::py_random::PyRandom;
use llmbench_text::tokenizer::Tokenizer;
use llmbench_workload::workload::{OtelTraceData, OtelTraceSource, WekaTraceOptions};

use super::{SessionReplayError, list_directory};
use crate::engine::sessions::SessionSource;
use crate::engine::weka_session::{WekaContext, WekaSession};

const SECTION: &str = "data.weka_trace_replay";

/// The corpus's sessions in the order they are replayed.
pub(super) fn corpus(
    data: &OtelTraceData,
    options: &WekaTraceOptions,
    seed: u64,
    tokenizer: &Tokenizer,
) -> Result<Vec<SessionSource>, SessionReplayError> {
    let text = std::fs::read_to_string(&options.corpus_file).map_err(|source| {
        SessionReplayError::Corpus {
            path: PathBuf::from(&options.corpus_file),
            source,
        }
    })?;
    let corpus = tokenizer
        .encode_with_special_tokens(&format!("{CORPUS_BASE_PROMPT}{text}"))
        .map_err(|e| SessionReplayError::CorpusTokens(e.to_string()))?;
    if corpus.is_empty() {
        return Err(SessionReplayError::CorpusTokens(
            "it has no tokens".to_owned(),
        ));
    }
    let context = Arc::new(WekaContext {
        corpus,
        tokenizer: tokenizer.clone(),
        settings: Compile {
            base_seed: seed,
            default_block_size: options.default_block_size,
            idle_gap_cap_seconds: options.idle_gap_cap_seconds,
        },
    });

    let mut traces: Vec<(PathBuf, WekaTrace)> = Vec::new();
    if let OtelTraceSource::HfCopy(root) = &data.source {
        traces = hf_copy(root, options.num_dataset_entries, data.skip_invalid_files)?;
    }
    for path in files(&data.source)? {
        match read(&path) {
            Ok(trace) => traces.push((path, trace)),
            Err(why) if data.skip_invalid_files => {
                tracing::warn!(path = %path.display(), %why, "trace file left out (skip_invalid_files)");
            }
            Err(why) => return Err(SessionReplayError::InvalidWeka { path, why }),
        }
    }
    // `_load_weka_traces`: "Duplicate trace ID found".
    for (i, (_, trace)) in traces.iter().enumerate() {
        if traces[..i].iter().any(|(_, t)| t.id == trace.id) {
            return Err(SessionReplayError::DuplicateTraceId(trace.id.clone()));
        }
    }
    let loaded = traces.len();
    let mut sessions = Vec::new();
    for (index, (path, trace)) in traces.into_iter().enumerate() {
        let session = WekaSession {
            trace,
            context: Arc::clone(&context),
        };
        let calls = match session.graph() {
            Ok(graph) => graph.events.len(),
            Err(e) if data.skip_invalid_files => {
                tracing::warn!(path = %path.display(), error = %e, "trace left out (skip_invalid_files)");
                continue;
            }
            Err(e) => {
                return Err(SessionReplayError::InvalidWeka {
                    path,
                    why: e.to_string(),
                });
            }
        };
        if calls == 0 {
            // `_build_sessions_from_traces`: a trace without calls is no session.
            continue;
        }
        sessions.push(SessionSource {
            id: 0,
            name: format!("wekatrace{index}_{}", session.trace.id),
            path,
            calls,
            header: None,
            weka: Some(Arc::new(session)),
        });
    }
    if loaded == 0 {
        return Err(SessionReplayError::Empty);
    }
    if sessions.is_empty() {
        return Err(SessionReplayError::NoGraph(loaded));
    }
    // `random.seed(self.base_seed); random.shuffle(sessions)`; a session's slot is its index after.
    PyRandom::seed(seed).shuffle(&mut sessions);
    for (slot, session) in sessions.iter_mut().enumerate() {
        session.id = u32::try_from(slot).unwrap_or(u32::MAX);
    }
    Ok(sessions)
}

/// `trace_directory`'s `*.json` files by name, or `trace_files` as listed.
fn files(source: &OtelTraceSource) -> Result<Vec<PathBuf>, SessionReplayError> {
    match source {
        OtelTraceSource::Directory(dir) => list_directory(Path::new(dir), SECTION),
        OtelTraceSource::HfCopy(_) => Ok(Vec::new()),
        OtelTraceSource::Files(paths) => paths
            .iter()
            .map(|p| {
                let path = PathBuf::from(p);
                if path.is_file() {
                    Ok(path)
                } else {
                    Err(SessionReplayError::MissingFile {
                        section: SECTION,
                        path,
                    })
                }
            })
            .collect(),
    }
}

/// `_load_weka_traces`'s `hf_dataset_path` branch over a local `traces.jsonl`.
fn hf_copy(
    root: &str,
    entries: u64,
    skip_invalid_files: bool,
) -> Result<Vec<(PathBuf, WekaTrace)>, SessionReplayError> {
    use std::io::BufRead as _;
    let root_path = Path::new(root);
    let file = if root_path.is_dir() {
        root_path.join("traces.jsonl")
    } else {
        root_path.to_owned()
    };
    let opened =
        std::fs::File::open(&file).map_err(|_| SessionReplayError::HfNotLocal(root.to_owned()))?;
    let mut traces = Vec::new();
    for (index, line) in std::io::BufReader::new(opened).lines().enumerate() {
        if index as u64 >= entries {
            break;
        }
        let line = line.map_err(|source| SessionReplayError::Read {
            path: file.clone(),
            source,
        })?;
        if line.trim().is_empty() {
            continue;
        }
        match weka_trace::parse_trace(&line) {
            Ok(trace) => traces.push((file.clone(), trace)),
            Err(e) if skip_invalid_files => {
                tracing::warn!(path = %file.display(), row = index, error = %e, "row left out (skip_invalid_files)");
            }
            Err(e) => {
                return Err(SessionReplayError::InvalidWeka {
                    path: file,
                    why: format!("row {index}: {e}"),
                });
            }
        }
    }
    Ok(traces)
}

fn read(path: &Path) -> Result<WekaTrace, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    weka_trace::parse_trace(&text).map_err(|e| e.to_string())
}
