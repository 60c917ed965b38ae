//! The one error type of the dialect parsers, and the warnings returned beside a parsed workload.
//!
//! Every variant names the file and the key path (`load.stages[1].rate`), and the line where the
//! YAML gives one, so the same text can go to a terminal, a status condition or an Event.

use std::fmt;

/// Why a profile could not become a workload.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WorkloadError {
    /// The text is not YAML at all.
    #[error("{file}{}: not valid YAML: {message}", at(*line))]
    Yaml {
        file: String,
        line: Option<u32>,
        message: String,
    },
    /// A value of the wrong YAML type.
    #[error("{file}{}: `{key}`: expected {expected}, found {found}", at(*line))]
    WrongType {
        file: String,
        key: String,
        line: Option<u32>,
        expected: String,
        found: String,
    },
    /// A value of the right type that the tool would reject (zero or negative rate, bad name...).
    #[error("{file}{}: `{key}`: {problem}", at(*line))]
    Invalid {
        file: String,
        key: String,
        line: Option<u32>,
        problem: String,
    },
    /// A key the tool requires is absent.
    #[error("{file}{}: `{key}` is required: {why}", at(*line))]
    Missing {
        file: String,
        key: String,
        line: Option<u32>,
        why: String,
    },
    /// A section nested where the tool never reads it (e.g. `data:` under `tokenizer:`).
    #[error("{file}{}: `{key}` is misplaced: {problem}", at(*line))]
    Misplaced {
        file: String,
        key: String,
        line: Option<u32>,
        problem: String,
    },
    /// A feature of the tool that llmbench does not run yet. Never silently replaced.
    #[error("{file}{}: `{key}`: {feature} is not supported by llmbench yet", at(*line))]
    Unsupported {
        file: String,
        key: String,
        line: Option<u32>,
        feature: String,
    },
    /// Strict mode: every key the dialect does not know, in document order.
    #[error("{file}: strict mode rejects {} unknown key(s): {}", keys.len(), list(keys))]
    UnknownKeys { file: String, keys: Vec<Warning> },
    /// Keys one edit from a key that changes the run: misspellings that would otherwise be ignored, leaving the
    /// run at the key's default.
    #[error(
        "{file}: {} key(s) the {dialect} dialect does not know, each one edit from a key that changes the run: {}; a \
         misspelt key would be ignored and the run would take the default — fix the spelling, or pass --lenient to \
         run with {} ignored",
        keys.len(),
        near_misses(keys),
        if keys.len() == 1 { "it" } else { "them" }
    )]
    NearMisses {
        file: String,
        dialect: String,
        keys: Vec<Warning>,
    },
}

impl WorkloadError {
    /// The key path the error is about, when it is about one key.
    pub fn key(&self) -> Option<&str> {
        match self {
            WorkloadError::WrongType { key, .. }
            | WorkloadError::Invalid { key, .. }
            | WorkloadError::Missing { key, .. }
            | WorkloadError::Misplaced { key, .. }
            | WorkloadError::Unsupported { key, .. } => Some(key),
            WorkloadError::Yaml { .. }
            | WorkloadError::UnknownKeys { .. }
            | WorkloadError::NearMisses { .. } => None,
        }
    }

    /// Prefixes the key path, e.g. with the guidellm `benchmarks[2]` entry that produced it.
    pub(crate) fn in_context(mut self, context: &str) -> Self {
        match &mut self {
            WorkloadError::WrongType { key, .. }
            | WorkloadError::Invalid { key, .. }
            | WorkloadError::Missing { key, .. }
            | WorkloadError::Misplaced { key, .. }
            | WorkloadError::Unsupported { key, .. } => *key = format!("{context}: {key}"),
            WorkloadError::Yaml { .. }
            | WorkloadError::UnknownKeys { .. }
            | WorkloadError::NearMisses { .. } => {}
        }
        self
    }
}

fn at(line: Option<u32>) -> String {
    match line {
        Some(l) if l > 0 => format!(":{l}"),
        _ => String::new(),
    }
}

fn list(keys: &[Warning]) -> String {
    keys.iter()
        .map(|w| format!("`{}`{}", w.key, at(w.line)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `` `api.streamming` (line 13): did you mean `streaming`? `` for each key.
fn near_misses(keys: &[Warning]) -> String {
    keys.iter()
        .map(|w| {
            // The suggestion is a sibling key: show it as a whole path, as the key is shown.
            let parent = w.key.rfind('.').map_or("", |i| &w.key[..=i]);
            let suggestion = w
                .message
                .split_once("did you mean `")
                .map_or(String::new(), |(_, s)| {
                    format!(": did you mean `{parent}{s}")
                });
            match w.line {
                Some(l) if l > 0 => format!("`{}` (line {l}){suggestion}", w.key),
                _ => format!("`{}`{suggestion}", w.key),
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// What a warning is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WarningKind {
    /// The dialect has no such key; the tool would ignore it (or, strictly, reject it).
    UnknownKey,
    /// An unknown key one edit from a key that changes the run (`streamming` for `streaming`): an error unless
    /// `--lenient`, then ignored with this warning.
    NearMiss,
    /// A known key that llmbench reads but does not act on (e.g. storage locations).
    Ignored,
}

/// A non-fatal finding about a profile.
#[derive(Debug, Clone, PartialEq)]
pub struct Warning {
    pub file: String,
    /// Key path, e.g. `data.input_distribution.std`.
    pub key: String,
    pub line: Option<u32>,
    pub kind: WarningKind,
    /// What happens instead, and a hint where one helps.
    pub message: String,
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}{}: `{}`: {}",
            self.file,
            at(self.line),
            self.key,
            self.message
        )
    }
}
