//! Typed, path-aware access to a YAML tree: every getter knows its key path and line, so every
//! error it returns says where; every map remembers which keys were read, so the rest become
//! "unknown key" findings: a near miss of a key that changes the run ([`WarningKind::NearMiss`], an error unless
//! `--lenient`), or a warning.

use std::time::Duration;

use super::error::{Warning, WarningKind, WorkloadError};
use super::limits::{self, Limit};
use super::yaml::{Key, Node, Value};

/// Per-document state: the file name for messages and the warnings found so far.
pub(crate) struct Ctx {
    pub file: String,
    pub warnings: Vec<Warning>,
}

impl Ctx {
    pub fn new(file: &str) -> Self {
        Ctx {
            file: file.to_string(),
            warnings: Vec::new(),
        }
    }

    pub fn warn(&mut self, key: &str, line: u32, kind: WarningKind, message: impl Into<String>) {
        let warning = Warning {
            file: self.file.clone(),
            key: key.to_string(),
            line: (line > 0).then_some(line),
            kind,
            message: message.into(),
        };
        // guidellm benchmarks re-read the same spec keys; report each finding once.
        if !self.warnings.contains(&warning) {
            self.warnings.push(warning);
        }
    }

    fn line(line: u32) -> Option<u32> {
        (line > 0).then_some(line)
    }

    pub fn invalid(&self, key: &str, line: u32, problem: impl Into<String>) -> WorkloadError {
        WorkloadError::Invalid {
            file: self.file.clone(),
            key: key.to_string(),
            line: Self::line(line),
            problem: problem.into(),
        }
    }

    pub fn missing(&self, key: &str, line: u32, why: impl Into<String>) -> WorkloadError {
        WorkloadError::Missing {
            file: self.file.clone(),
            key: key.to_string(),
            line: Self::line(line),
            why: why.into(),
        }
    }

    pub(crate) fn unsupported(
        &self,
        key: &str,
        line: u32,
        feature: impl Into<String>,
    ) -> WorkloadError {
        WorkloadError::Unsupported {
            file: self.file.clone(),
            key: key.to_string(),
            line: Self::line(line),
            feature: feature.into(),
        }
    }

    pub fn misplaced(&self, key: &str, line: u32, problem: impl Into<String>) -> WorkloadError {
        WorkloadError::Misplaced {
            file: self.file.clone(),
            key: key.to_string(),
            line: Self::line(line),
            problem: problem.into(),
        }
    }

    pub fn wrong_type(&self, key: &str, node: &Node, expected: &str) -> WorkloadError {
        WorkloadError::WrongType {
            file: self.file.clone(),
            key: key.to_string(),
            line: Self::line(node.line),
            expected: expected.to_string(),
            found: node.value.describe(),
        }
    }
}

/// Joins a key path: `join("load", "stages")` is `load.stages`.
pub(crate) fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// One value, the key path that leads to it, and the line of its key (or of the value).
pub(crate) struct At<'n> {
    pub node: &'n Node,
    pub path: String,
    pub line: u32,
}

impl<'n> At<'n> {
    pub fn new(node: &'n Node, path: impl Into<String>, line: u32) -> Self {
        At {
            node,
            path: path.into(),
            line: if line > 0 { line } else { node.line },
        }
    }

    fn wrong(&self, ctx: &Ctx, expected: &str) -> WorkloadError {
        let mut err = ctx.wrong_type(&self.path, self.node, expected);
        if let WorkloadError::WrongType { line, .. } = &mut err {
            *line = (self.line > 0).then_some(self.line);
        }
        err
    }

    pub fn invalid(&self, ctx: &Ctx, problem: impl Into<String>) -> WorkloadError {
        ctx.invalid(&self.path, self.line, problem)
    }

    pub(crate) fn unsupported(&self, ctx: &Ctx, feature: impl Into<String>) -> WorkloadError {
        ctx.unsupported(&self.path, self.line, feature)
    }

    pub fn is_null(&self) -> bool {
        self.node.is_null()
    }

    /// Any number (integer or float).
    pub fn f64(&self, ctx: &Ctx) -> Result<f64, WorkloadError> {
        match self.node.value {
            Value::Int(i) => Ok(i as f64),
            Value::Float(f) if f.is_finite() => Ok(f),
            Value::Float(_) => Err(self.invalid(ctx, "must be a finite number")),
            _ => Err(self.wrong(ctx, "a number")),
        }
    }

    /// A number > 0 (rates, durations that must not be empty).
    pub(crate) fn positive_f64(&self, ctx: &Ctx) -> Result<f64, WorkloadError> {
        let v = self.f64(ctx)?;
        if v > 0.0 {
            Ok(v)
        } else {
            Err(self.invalid(ctx, format!("must be greater than 0, found {v}")))
        }
    }

    /// A number ≥ 0.
    pub(crate) fn non_negative_f64(&self, ctx: &Ctx) -> Result<f64, WorkloadError> {
        let v = self.f64(ctx)?;
        if v >= 0.0 {
            Ok(v)
        } else {
            Err(self.invalid(ctx, format!("must not be negative, found {v}")))
        }
    }

    /// A whole number ≥ 0. A float with no fraction is accepted, as pydantic's lax mode does.
    pub fn u64(&self, ctx: &Ctx) -> Result<u64, WorkloadError> {
        match self.node.value {
            Value::Int(i) if i >= 0 => Ok(i as u64),
            Value::Int(i) => Err(self.invalid(ctx, format!("must not be negative, found {i}"))),
            Value::Float(f)
                if f.is_finite() && f.fract() == 0.0 && f >= 0.0 && f < 2f64.powi(63) =>
            {
                Ok(f as u64)
            }
            Value::Float(f) if f < 0.0 => {
                Err(self.invalid(ctx, format!("must not be negative, found {f}")))
            }
            Value::Float(f) if f.is_finite() && f.fract() == 0.0 => {
                Err(self.invalid(ctx, format!("{f:e} is too large for a whole number")))
            }
            Value::Float(f) if f.is_nan() => {
                Err(self.invalid(ctx, "must be a whole number, found NaN"))
            }
            Value::Float(f) => Err(self.invalid(ctx, format!("must be a whole number, found {f}"))),
            _ => Err(self.wrong(ctx, "a whole number")),
        }
    }

    /// A whole number > 0.
    pub(crate) fn positive_u64(&self, ctx: &Ctx) -> Result<u64, WorkloadError> {
        let v = self.u64(ctx)?;
        if v > 0 {
            Ok(v)
        } else {
            Err(self.invalid(ctx, "must be greater than 0, found 0"))
        }
    }

    pub fn bool(&self, ctx: &Ctx) -> Result<bool, WorkloadError> {
        match &self.node.value {
            Value::Bool(b) => Ok(*b),
            // pydantic and argparse-style tools accept these spellings too.
            Value::Str(s) if s.eq_ignore_ascii_case("true") => Ok(true),
            Value::Str(s) if s.eq_ignore_ascii_case("false") => Ok(false),
            _ => Err(self.wrong(ctx, "true or false")),
        }
    }

    pub fn str(&self, ctx: &Ctx) -> Result<&'n str, WorkloadError> {
        match &self.node.value {
            Value::Str(s) => Ok(s),
            _ => Err(self.wrong(ctx, "a string")),
        }
    }

    /// A non-negative number of seconds, at most [`super::limits::MAX_DURATION`].
    pub fn seconds(&self, ctx: &Ctx) -> Result<Duration, WorkloadError> {
        let v = self.non_negative_f64(ctx)?;
        limits::check(ctx, self, Limit::Duration, v)?;
        Duration::try_from_secs_f64(v)
            .map_err(|_| self.invalid(ctx, format!("{v} s is out of range")))
    }

    /// A number of seconds > 0, at most [`super::limits::MAX_DURATION`].
    pub(crate) fn positive_seconds(&self, ctx: &Ctx) -> Result<Duration, WorkloadError> {
        self.positive_f64(ctx)?;
        self.seconds(ctx)
    }

    /// A request rate > 0, at most [`super::limits::MAX_RATE`].
    pub fn rate(&self, ctx: &Ctx) -> Result<f64, WorkloadError> {
        let v = self.positive_f64(ctx)?;
        limits::check(ctx, self, Limit::Rate, v)?;
        Ok(v)
    }

    /// A whole number ≥ 0 within `limit`.
    pub(crate) fn u64_within(&self, ctx: &Ctx, limit: Limit) -> Result<u64, WorkloadError> {
        let v = self.u64(ctx)?;
        limits::check(ctx, self, limit, v as f64)?;
        Ok(v)
    }

    /// A whole number > 0 within `limit`.
    pub(crate) fn positive_within(&self, ctx: &Ctx, limit: Limit) -> Result<u64, WorkloadError> {
        let v = self.positive_u64(ctx)?;
        limits::check(ctx, self, limit, v as f64)?;
        Ok(v)
    }

    /// A token count ≥ 0, at most [`super::limits::MAX_TOKENS`].
    pub fn tokens(&self, ctx: &Ctx) -> Result<u64, WorkloadError> {
        self.u64_within(ctx, Limit::Tokens)
    }

    /// A concurrency > 0, at most [`super::limits::MAX_CONCURRENCY`].
    pub fn concurrency(&self, ctx: &Ctx) -> Result<u32, WorkloadError> {
        let v = self.positive_within(ctx, Limit::Concurrency)?;
        u32::try_from(v).map_err(|_| self.invalid(ctx, format!("{v} is too large")))
    }

    /// A request count > 0, at most [`super::limits::MAX_REQUESTS`].
    pub fn requests(&self, ctx: &Ctx) -> Result<u64, WorkloadError> {
        self.positive_within(ctx, Limit::Requests)
    }

    /// A map, read key by key. A null section (`data:` with nothing under it) is an empty map.
    pub fn map(&self, ctx: &Ctx) -> Result<MapReader<'n>, WorkloadError> {
        static EMPTY: &[(Key, Node)] = &[];
        match &self.node.value {
            Value::Map(entries) => Ok(MapReader::new(entries, &self.path, self.line)),
            Value::Null => Ok(MapReader::new(EMPTY, &self.path, self.line)),
            _ => Err(self.wrong(ctx, "a map")),
        }
    }

    /// A list of stages (or of per-stage figures), at most [`super::limits::MAX_STAGES`] long.
    pub(crate) fn stage_list(&self, ctx: &Ctx) -> Result<Vec<At<'n>>, WorkloadError> {
        let items = self.seq(ctx)?;
        limits::check(ctx, self, Limit::Stages, items.len() as f64)?;
        Ok(items)
    }

    /// A list; items get `path[i]`.
    pub fn seq(&self, ctx: &Ctx) -> Result<Vec<At<'n>>, WorkloadError> {
        match &self.node.value {
            Value::Seq(items) => Ok(items
                .iter()
                .enumerate()
                .map(|(i, n)| At::new(n, format!("{}[{i}]", self.path), n.line))
                .collect()),
            _ => Err(self.wrong(ctx, "a list")),
        }
    }
}

/// Reads a map's keys, tracking which were used and which the parser knows.
pub(crate) struct MapReader<'n> {
    pub path: String,
    pub line: u32,
    entries: &'n [(Key, Node)],
    used: Vec<bool>,
    /// Every key name the parser asked for, present or not: the map's known keys, from which an unknown key's
    /// likely intended spelling is suggested (`streamming` → `streaming`).
    known: Vec<String>,
    /// The known keys that change what is sent, when, or what is measured: all but those only ever passed over
    /// with [`MapReader::skip`] or [`MapReader::ignore`] (storage locations, report switches, labels). A near miss
    /// of one of these is an error by default; of the others, a warning.
    acted_on: Vec<String>,
    /// Every key of this map only says where output goes ([`MapReader::output_only`]): its near misses warn.
    output_only: bool,
}

impl<'n> MapReader<'n> {
    pub fn new(entries: &'n [(Key, Node)], path: &str, line: u32) -> Self {
        MapReader {
            path: path.to_string(),
            line,
            entries,
            used: vec![false; entries.len()],
            known: Vec::new(),
            acted_on: Vec::new(),
            output_only: false,
        }
    }

    /// Marks this map as one that only says where output goes (inference-perf `storage`): a misspelt key in it
    /// changes nothing sent or measured, so it is a warning, never an error.
    pub(crate) fn output_only(mut self) -> Self {
        self.output_only = true;
        self
    }

    /// Notes `key` as a known key of this map (one the run acts on) without reading it.
    fn note(&mut self, key: &str) {
        self.note_known(key);
        if !self.acted_on.iter().any(|k| k == key) {
            self.acted_on.push(key.to_string());
        }
    }

    /// Notes `key` as known, without saying that the run acts on it.
    fn note_known(&mut self, key: &str) {
        if !self.known.iter().any(|k| k == key) {
            self.known.push(key.to_string());
        }
    }

    /// Declares keys the dialect knows but this parse does not read (another dataset's flags, say), so a
    /// misspelling of one of them still gets a suggestion.
    pub fn known(&mut self, keys: &[&str]) {
        for key in keys {
            self.note(key);
        }
    }

    /// The whole document as a map.
    pub fn root(ctx: &Ctx, doc: &'n Node) -> Result<Self, WorkloadError> {
        At::new(doc, "", doc.line)
            .map(ctx)
            .map_err(|_| ctx.wrong_type("(document root)", doc, "a map of settings"))
    }

    fn find(&self, key: &str) -> Option<usize> {
        self.entries.iter().position(|(k, _)| k.name == key)
    }

    /// Whether `key` is absent or was already read.
    pub(crate) fn is_read(&mut self, key: &str) -> bool {
        self.note(key);
        self.find(key).is_none_or(|i| self.used[i])
    }

    /// The value under `key`, null included, marking it read.
    pub fn take(&mut self, key: &str) -> Option<At<'n>> {
        self.note(key);
        self.take_known(key)
    }

    /// [`MapReader::take`] for a key the run does not act on.
    fn take_known(&mut self, key: &str) -> Option<At<'n>> {
        self.note_known(key);
        let i = self.find(key)?;
        self.used[i] = true;
        let (k, v) = &self.entries[i];
        Some(At::new(v, join(&self.path, &k.name), k.line))
    }

    /// The value under `key` unless it is absent or null (an explicit null means "default").
    pub fn get(&mut self, key: &str) -> Option<At<'n>> {
        self.take(key).filter(|f| !f.is_null())
    }

    /// [`MapReader::get`] for a key that only says where output goes (a misspelling of it warns).
    pub(crate) fn get_output(&mut self, key: &str) -> Option<At<'n>> {
        self.take_known(key).filter(|f| !f.is_null())
    }

    /// The first of several alias spellings that is set; all are marked read.
    pub(crate) fn get_any(&mut self, keys: &[&str]) -> Option<At<'n>> {
        let mut found = None;
        for key in keys {
            if let Some(f) = self.get(key) {
                found.get_or_insert(f);
            }
        }
        found
    }

    /// A required, non-null value. When it is missing but an unread key is one edit from it, the error says so:
    /// `rat: 2` is why `rate` is missing.
    pub(crate) fn require(
        &mut self,
        ctx: &Ctx,
        key: &str,
        why: &str,
    ) -> Result<At<'n>, WorkloadError> {
        if let Some(found) = self.get(key) {
            return Ok(found);
        }
        let near = self
            .unread()
            .find(|k| nearest_key(&k.name, [key]).is_some())
            .map(|k| {
                format!(
                    " (`{}` on line {} is one edit away: did you mean `{key}`?)",
                    k.name, k.line
                )
            })
            .unwrap_or_default();
        Err(ctx.missing(&join(&self.path, key), self.line, format!("{why}{near}")))
    }

    /// Marks a key read and notes that llmbench does not act on it.
    pub fn ignore(&mut self, ctx: &mut Ctx, key: &str, why: &str) {
        if let Some(f) = self.take_known(key).filter(|f| !f.is_null()) {
            ctx.warn(&f.path, f.line, WarningKind::Ignored, why);
        }
    }

    /// Marks a key read without comment (known, and meaningless for llmbench).
    pub fn skip(&mut self, key: &str) {
        let _ = self.take_known(key);
    }

    /// The known key of this map that `name` most likely misspells ([`nearest_key`]).
    pub(crate) fn nearest_known(&self, name: &str) -> Option<&str> {
        nearest_key(name, self.known.iter().map(String::as_str))
    }

    /// Unread keys in document order, with their lines.
    pub fn unread(&self) -> impl Iterator<Item = &'n Key> + '_ {
        self.entries
            .iter()
            .zip(&self.used)
            .filter(|(_, used)| !**used)
            .map(|((k, _), _)| k)
    }

    /// Every unread key becomes an "unknown key" finding; `hints` maps a key to a suggestion (upstream's own
    /// quirks, which its tools ignore: a warning). Without a hint, a key within an edit or two of a known key of
    /// this map names it, and is a [`WarningKind::NearMiss`] when the run acts on that key: a misspelt key would
    /// otherwise be dropped and the run would quietly take the default (`streamming: true` runs without
    /// streaming).
    pub fn finish(self, ctx: &mut Ctx, hints: &[(&str, &str)]) {
        let unread: Vec<&Key> = self.unread().collect();
        for key in unread {
            let (kind, message) = match hints.iter().find(|(k, _)| *k == key.name) {
                Some((_, hint)) => (
                    WarningKind::UnknownKey,
                    format!("unknown key, ignored; {hint}"),
                ),
                None => match nearest_key(&key.name, self.known.iter().map(String::as_str)) {
                    Some(known) => (
                        if !self.output_only && self.acted_on.iter().any(|k| k == known) {
                            WarningKind::NearMiss
                        } else {
                            WarningKind::UnknownKey
                        },
                        format!("unknown key, ignored; did you mean `{known}`?"),
                    ),
                    None => (WarningKind::UnknownKey, "unknown key, ignored".to_string()),
                },
            };
            ctx.warn(&join(&self.path, &key.name), key.line, kind, message);
        }
    }
}

/// The known key `name` most likely misspells: at most one edit away for names of up to five characters, two
/// for longer ones (insertions, deletions, substitutions and swaps of neighbours, ignoring case), so `rate`
/// suggests nothing for `size` but `reqest-rate` suggests `request-rate`. Ties go to the first known key.
pub fn nearest_key<'k>(name: &str, known: impl IntoIterator<Item = &'k str>) -> Option<&'k str> {
    let len = name.chars().count();
    let max_edits = match len {
        0..=2 => return None,
        3..=5 => 1,
        _ => 2,
    };
    let lowered = name.to_lowercase();
    known
        .into_iter()
        .filter(|k| *k != name)
        .filter_map(|k| {
            let d = llmbench_core::render::edit_distance_within(
                &lowered,
                &k.to_lowercase(),
                max_edits,
            )?;
            Some((d, k))
        })
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}
