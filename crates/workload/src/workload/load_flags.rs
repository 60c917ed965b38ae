//! The common load flags (`--rate`, `--concurrency`, `--duration`, `--requests`, `--input-tokens`,
//! `--output-tokens`), written into a rendered profile in its own dialect's keys, so the run is exactly what that
//! tool would do with the edited file, and the profile.yaml in the results shows the values used.
//!
//! The rules, the same for every dialect:
//! - `--rate` and `--concurrency` replace the profile's load level and make the run one stage at that level (a
//!   ladder, a sweep or a list of benchmarks becomes that one stage). `--rate` keeps the profile's arrival process
//!   (Poisson stays Poisson) and a cap on requests in flight that the profile puts on a rate; on a concurrency
//!   profile it switches to a rate, where the dialect can say so. `--concurrency` alone makes a closed loop of N.
//!   Both together are a rate with at most N in flight, where the dialect has that (guidellm, vllm), else refused.
//! - `--duration` and `--requests` set when every stage ends. Where a stage can have both limits (guidellm), the
//!   flags given replace both: `--requests 10` alone sends 10 requests, whatever duration the profile had.
//! - `--input-tokens` and `--output-tokens` make every prompt and answer exactly that long (the dialect's fixed
//!   length: mean = min = max, no spread). A shared prefix the profile keeps comes on top of the input tokens, as
//!   each tool counts its question length. Data whose lengths come from a dataset or a trace is refused.
//! - A flag a dialect has no notion for is refused with the reason and what to use instead, never ignored.
//!
//! Pure: YAML text in, YAML text and the list of edits out.

use std::fmt;
use std::time::Duration;

use llmbench_core::harness::Harness;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// The load flags of `llmbench run` and `llmbench render`.
#[derive(clap::Args, Debug, Clone, Default, PartialEq)]
#[command(next_help_heading = "Load (written into the profile in its dialect's own keys)")]
pub struct LoadFlags {
    /// Requests per second: the run becomes one stage at this rate (inference-perf `load.stages`, guidellm
    /// `profile.rate`, vllm `request-rate`, mlperf Server `target_qps`, fmperf `qps_values`), keeping the profile's
    /// arrival process.
    #[arg(long, value_name = "REQ/S", value_parser = parse_rate)]
    pub rate: Option<f64>,
    /// Requests in flight: alone, a closed loop of N (inference-perf `concurrent`, guidellm `concurrent` streams,
    /// vllm `max-concurrency` at an unlimited rate, aiperf `concurrency`); with --rate, at most N in flight.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub concurrency: Option<u32>,
    /// How long every stage runs, e.g. 30s, 2m (a bare number is seconds). Refused where the tool has no duration
    /// (vllm bench serve: use --requests).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// How many requests every stage sends (inference-perf `num_requests`, guidellm `max_requests`, vllm
    /// `num-prompts`, aiperf `request-count`).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub requests: Option<u64>,
    /// Every prompt exactly this many tokens (after any shared prefix the profile keeps). Refused for data whose
    /// lengths come from a dataset or a trace.
    #[arg(long, value_name = "TOKENS", value_parser = clap::value_parser!(u64).range(1..))]
    pub input_tokens: Option<u64>,
    /// Every answer asked for exactly this many tokens.
    #[arg(long, value_name = "TOKENS", value_parser = clap::value_parser!(u64).range(1..))]
    pub output_tokens: Option<u64>,
}

/// `--rate`: a finite number of requests per second above 0.
fn parse_rate(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(rate) if rate.is_finite() && rate > 0.0 => Ok(rate),
        _ => Err(format!(
            "`{text}` is not a rate: give requests per second above 0, e.g. 5 or 0.5"
        )),
    }
}

/// `--duration`: `30s`, `2m`, `1m30s`, `500ms`, or a bare number of seconds; above 0.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let parsed = match text.trim().parse::<f64>() {
        Ok(seconds) => Duration::try_from_secs_f64(seconds).map_err(|e| e.to_string()),
        Err(_) => humantime::parse_duration(text.trim()).map_err(|e| e.to_string()),
    };
    match parsed {
        Ok(d) if !d.is_zero() => Ok(d),
        Ok(_) => Err("a duration must be above 0".to_owned()),
        Err(e) => Err(format!("`{text}` is not a duration (30s, 2m, 1m30s): {e}")),
    }
}

/// One of the load flags, for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flag {
    Rate,
    Concurrency,
    Duration,
    Requests,
    InputTokens,
    OutputTokens,
}

impl LoadFlags {
    /// Whether no load flag was given (the profile is then left exactly as rendered, comments and all).
    pub fn is_empty(&self) -> bool {
        self == &LoadFlags::default()
    }

    /// `--rate 5`, `--duration 30s`: the flag as a user would write it.
    fn label(&self, flag: Flag) -> String {
        let value = match flag {
            Flag::Rate => self.rate.map(format_number),
            Flag::Concurrency => self.concurrency.map(|n| n.to_string()),
            // `1.5s` as written, rather than humantime's `1s 500ms`.
            Flag::Duration => self.duration.map(|d| match d.subsec_nanos() {
                0 => humantime::format_duration(d).to_string(),
                _ => format!("{}s", format_number(d.as_secs_f64())),
            }),
            Flag::Requests => self.requests.map(|n| n.to_string()),
            Flag::InputTokens => self.input_tokens.map(|n| n.to_string()),
            Flag::OutputTokens => self.output_tokens.map(|n| n.to_string()),
        };
        let name = match flag {
            Flag::Rate => "--rate",
            Flag::Concurrency => "--concurrency",
            Flag::Duration => "--duration",
            Flag::Requests => "--requests",
            Flag::InputTokens => "--input-tokens",
            Flag::OutputTokens => "--output-tokens",
        };
        match value {
            Some(value) => format!("{name} {value}"),
            None => name.to_owned(),
        }
    }

    fn given(&self, flag: Flag) -> bool {
        match flag {
            Flag::Rate => self.rate.is_some(),
            Flag::Concurrency => self.concurrency.is_some(),
            Flag::Duration => self.duration.is_some(),
            Flag::Requests => self.requests.is_some(),
            Flag::InputTokens => self.input_tokens.is_some(),
            Flag::OutputTokens => self.output_tokens.is_some(),
        }
    }

    /// The first of `flags` that was given, if any.
    fn first_of(&self, flags: &[Flag]) -> Option<Flag> {
        flags.iter().copied().find(|f| self.given(*f))
    }

    /// The first of `--rate`, `--concurrency`, `--duration`, `--requests` given: the flags that shape the stages,
    /// which a capacity search decides itself.
    pub fn stage_flag(&self) -> Option<&'static str> {
        [
            (self.rate.is_some(), "--rate"),
            (self.concurrency.is_some(), "--concurrency"),
            (self.duration.is_some(), "--duration"),
            (self.requests.is_some(), "--requests"),
        ]
        .into_iter()
        .find_map(|(given, name)| given.then_some(name))
    }

    fn sets_load(&self) -> bool {
        self.rate.is_some() || self.concurrency.is_some()
    }

    fn sets_limit(&self) -> bool {
        self.duration.is_some() || self.requests.is_some()
    }

    fn sets_lengths(&self) -> bool {
        self.input_tokens.is_some() || self.output_tokens.is_some()
    }
}

/// Why the load flags could not be applied to a profile.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum LoadFlagError {
    #[error("{flag} cannot be applied to this {harness} profile: {reason}\n  help: {help}")]
    Refused {
        flag: String,
        harness: Harness,
        reason: String,
        help: String,
    },
    #[error(
        "{file}: cannot apply the load flags: the rendered profile is not valid YAML: {message}"
    )]
    Parse { file: String, message: String },
    #[error("{file}: cannot apply {flag}: `{key}` is {found}, where the dialect has {expected}")]
    Shape {
        file: String,
        flag: String,
        key: String,
        found: String,
        expected: &'static str,
    },
    #[error("{file}: cannot write the profile with the load flags: {message}")]
    Emit { file: String, message: String },
}

/// The profile with the flags written in, and what each flag changed.
#[derive(Debug, Clone, PartialEq)]
pub struct Applied {
    pub profile: String,
    pub edits: Vec<Edit>,
}

/// One change a flag made to the profile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Edit {
    /// The flag as given, e.g. `--rate 5`.
    pub flag: String,
    /// The key path in the profile, e.g. `load.stages[0].rate`.
    pub key: String,
    /// What happened to it: `5 (was 1)`, `removed (was 30)`, `2 (added)`.
    pub change: String,
}

impl fmt::Display for Edit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} → {} {}", self.flag, self.key, self.change)
    }
}

/// What run.json records of the load flags: the values given and every edit they made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadFlagsRecord {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    pub edits: Vec<Edit>,
}

impl LoadFlagsRecord {
    /// The record of `flags` and their `edits`; `None` when no flag was given.
    pub fn new(flags: &LoadFlags, edits: &[Edit]) -> Option<Self> {
        (!flags.is_empty()).then(|| LoadFlagsRecord {
            rate: flags.rate,
            concurrency: flags.concurrency,
            duration_s: flags.duration.map(|d| d.as_secs_f64()),
            requests: flags.requests,
            input_tokens: flags.input_tokens,
            output_tokens: flags.output_tokens,
            edits: edits.to_vec(),
        })
    }
}

/// Every edit on one line, for the run's log.
pub fn describe(edits: &[Edit]) -> String {
    let mut line = String::new();
    let mut flag: Option<&str> = None;
    for edit in edits {
        if flag == Some(edit.flag.as_str()) {
            line.push_str(", ");
        } else {
            if flag.is_some() {
                line.push_str("; ");
            }
            line.push_str(&edit.flag);
            line.push_str(" → ");
            flag = Some(&edit.flag);
        }
        line.push_str(&edit.key);
        line.push(' ');
        line.push_str(&edit.change);
    }
    line
}

/// Writes `flags` into `rendered`, a rendered profile of `harness` (`file` names it in messages). Without flags
/// the text comes back unchanged; with flags the document is re-emitted as the renderer emits overridden
/// profiles (block style, comments dropped).
pub fn apply(
    harness: Harness,
    file: &str,
    rendered: &str,
    flags: &LoadFlags,
) -> Result<Applied, LoadFlagError> {
    if flags.is_empty() {
        return Ok(Applied {
            profile: rendered.to_owned(),
            edits: Vec::new(),
        });
    }
    let mut document: Value =
        serde_saphyr::from_str(rendered).map_err(|e| LoadFlagError::Parse {
            file: file.to_owned(),
            message: e.to_string(),
        })?;
    let mut edit = Editor {
        file,
        harness,
        flags,
        edits: Vec::new(),
    };
    let Some(root) = document.as_object_mut() else {
        return Err(edit.shape(
            first_flag(flags),
            "(document root)",
            &document,
            "a map of settings",
        ));
    };
    if root.contains_key("capacity_search")
        && let Some(flag) = flags.first_of(&[
            Flag::Rate,
            Flag::Concurrency,
            Flag::Duration,
            Flag::Requests,
        ])
    {
        return Err(edit.refuse(
            flag,
            "the profile's `capacity_search` varies the load itself and sizes each point (its `min_duration` and \
             `min_requests`)",
            "set them in `capacity_search`, or remove it from the profile to run at one load",
        ));
    }
    match harness {
        Harness::InferencePerf => inference_perf(root, &mut edit)?,
        Harness::Guidellm if root.contains_key("spec") => guidellm_scenario(root, &mut edit)?,
        Harness::Guidellm => guidellm_flat(root, &mut edit)?,
        Harness::VllmBenchmark | Harness::Inferencemax => vllm_bench(root, &mut edit)?,
        Harness::Aiperf => aiperf(root, &mut edit)?,
        Harness::Mlperf => mlperf(root, &mut edit)?,
        Harness::Fmperf => fmperf(root, &mut edit)?,
        Harness::Nop => {
            return Err(edit.refuse(
                first_flag(flags),
                "the nop harness sends no requests",
                "run a harness that sends load, e.g. --harness inference-perf --profile sanity_random",
            ));
        }
    }
    let profile = serde_saphyr::to_string(&document).map_err(|e| LoadFlagError::Emit {
        file: file.to_owned(),
        message: e.to_string(),
    })?;
    Ok(Applied {
        profile,
        edits: edit.edits,
    })
}

fn first_flag(flags: &LoadFlags) -> Flag {
    flags
        .first_of(&[
            Flag::Rate,
            Flag::Concurrency,
            Flag::Duration,
            Flag::Requests,
            Flag::InputTokens,
            Flag::OutputTokens,
        ])
        .unwrap_or(Flag::Rate)
}

/// Makes the edits and records them.
struct Editor<'a> {
    file: &'a str,
    harness: Harness,
    flags: &'a LoadFlags,
    edits: Vec<Edit>,
}

impl Editor<'_> {
    /// Sets `map[key]` (at `path`) to `now`, recording the change when there is one.
    fn set(&mut self, flag: Flag, path: &str, map: &mut Map<String, Value>, key: &str, now: Value) {
        let was = map.insert(key.to_owned(), now.clone());
        let change = match was {
            Some(was) if was == now => return,
            Some(was) => format!("= {} (was {})", show(&now), show(&was)),
            None => format!("= {} (added)", show(&now)),
        };
        self.record(flag, path, change);
    }

    /// Removes `map[key]` (at `path`), recording what it was.
    fn remove(&mut self, flag: Flag, path: &str, map: &mut Map<String, Value>, key: &str) {
        if let Some(was) = map.shift_remove(key) {
            self.record(flag, path, format!("removed (was {})", show(&was)));
        }
    }

    fn record(&mut self, flag: Flag, path: &str, change: String) {
        self.edits.push(Edit {
            flag: self.flags.label(flag),
            key: path.to_owned(),
            change,
        });
    }

    fn refuse(
        &self,
        flag: Flag,
        reason: impl Into<String>,
        help: impl Into<String>,
    ) -> LoadFlagError {
        LoadFlagError::Refused {
            flag: self.flags.label(flag),
            harness: self.harness,
            reason: reason.into(),
            help: help.into(),
        }
    }

    fn shape(&self, flag: Flag, key: &str, found: &Value, expected: &'static str) -> LoadFlagError {
        LoadFlagError::Shape {
            file: self.file.to_owned(),
            flag: self.flags.label(flag),
            key: key.to_owned(),
            found: kind_of(found),
            expected,
        }
    }

    /// `map[key]` as a map (created empty when absent), or a shape error naming `path`.
    fn child<'m>(
        &self,
        flag: Flag,
        map: &'m mut Map<String, Value>,
        key: &str,
        path: &str,
    ) -> Result<&'m mut Map<String, Value>, LoadFlagError> {
        let value = map
            .entry(key.to_owned())
            .or_insert_with(|| Value::Object(Map::new()));
        if value.is_null() {
            *value = Value::Object(Map::new());
        }
        let found = value.clone();
        value
            .as_object_mut()
            .ok_or_else(|| self.shape(flag, path, &found, "a map"))
    }
}

/// A value for a log line: scalars as YAML writes them, small lists and maps as compact JSON.
fn show(value: &Value) -> String {
    let text = match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    if text.chars().count() <= 80 {
        return text;
    }
    match value {
        Value::Array(items) => format!("a list of {}", items.len()),
        Value::Object(map) => format!("a map of {} keys", map.len()),
        _ => format!("{}…", text.chars().take(77).collect::<String>()),
    }
}

fn kind_of(value: &Value) -> String {
    match value {
        Value::Null => "empty".to_owned(),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(s) => format!("the string {s:?}"),
        Value::Array(_) => "a list".to_owned(),
        Value::Object(_) => "a map".to_owned(),
    }
}

/// A whole number as an integer (`5`, not `5.0`), anything else as it is.
fn number(value: f64) -> Value {
    if value.fract() == 0.0 && value.abs() < 9.0e15 {
        json!(value as i64)
    } else {
        json!(value)
    }
}

fn format_number(value: f64) -> String {
    number(value).to_string()
}

/// A duration as a whole number of seconds, for the dialects whose stage durations are integers.
fn whole_seconds(edit: &Editor<'_>, duration: Duration, what: &str) -> Result<u64, LoadFlagError> {
    if duration.subsec_nanos() != 0 || duration.as_secs() == 0 {
        return Err(edit.refuse(
            Flag::Duration,
            format!("{what} are whole seconds"),
            format!(
                "give a whole number of seconds, e.g. --duration {}s",
                duration.as_secs().max(1)
            ),
        ));
    }
    Ok(duration.as_secs())
}

/// The key of `map` that is `name` with `-` and `_` taken as the same (the flag-map and flat dialects).
fn find_key(map: &Map<String, Value>, name: &str) -> Option<String> {
    let wanted = name.replace('_', "-");
    map.keys().find(|k| k.replace('_', "-") == wanted).cloned()
}

/// The first of `names` present in `map` (exact spelling).
fn first_key(map: &Map<String, Value>, names: &[&str]) -> Option<String> {
    names
        .iter()
        .find(|n| map.contains_key(**n))
        .map(|n| (*n).to_owned())
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

// ---------------------------------------------------------------------------------------------------------------
// inference-perf: `load.type`, `load.stages[]` ({rate, duration} or {num_requests, concurrency_level}),
// `load.sweep.stage_duration`, and the data generator's length settings.

fn inference_perf(
    root: &mut Map<String, Value>,
    edit: &mut Editor<'_>,
) -> Result<(), LoadFlagError> {
    let flags = edit.flags.clone();
    if flags.sets_load() || flags.sets_limit() {
        let flag = first_flag(&flags);
        let load = edit.child(flag, root, "load", "load")?;
        let kind = load
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("constant")
            .to_owned();
        match kind.as_str() {
            "trace_replay" | "trace_session_replay" => {
                let flag = flags
                    .first_of(&[
                        Flag::Rate,
                        Flag::Concurrency,
                        Flag::Duration,
                        Flag::Requests,
                    ])
                    .unwrap_or(flag);
                let help = if kind == "trace_session_replay" {
                    "set the sessions' own figures with --override load.stages.0.concurrent_sessions=N (or \
                     session_rate, num_sessions, timeout)"
                } else {
                    "run a `constant` or `poisson` load to set the rate"
                };
                return Err(edit.refuse(
                    flag,
                    format!("a `{kind}` load takes its times and requests from the trace"),
                    help,
                ));
            }
            "constant" | "poisson" | "concurrent" => {}
            // The parser names the problem.
            _ => return Ok(()),
        }
        inference_perf_load(load, &kind, edit)?;
    }
    if flags.sets_lengths() {
        inference_perf_data(root, edit)?;
    }
    Ok(())
}

fn inference_perf_load(
    load: &mut Map<String, Value>,
    kind: &str,
    edit: &mut Editor<'_>,
) -> Result<(), LoadFlagError> {
    let flags = edit.flags.clone();
    let rate_kind = kind != "concurrent";
    let sweep = load.contains_key("sweep");
    let first_stage = load
        .get("stages")
        .and_then(Value::as_array)
        .and_then(|s| s.first())
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    match (flags.rate, flags.concurrency) {
        (Some(_), Some(_)) => Err(edit.refuse(
            Flag::Concurrency,
            "an inference-perf load is either a rate (`constant`, `poisson`) or a closed loop (`concurrent`), \
             never a rate with a cap on requests in flight",
            "give --rate R (with --duration) or --concurrency N (with --requests), not both",
        )),
        (Some(rate), None) => {
            if flags.requests.is_some() {
                return Err(edit.refuse(
                    Flag::Requests,
                    "an inference-perf rate stage sends rate × duration requests; it has no request count",
                    "give --duration D with --rate (or --concurrency N --requests M for a closed loop)",
                ));
            }
            let duration = match flags.duration {
                Some(d) => number(whole_seconds(edit, d, "inference-perf stage durations")? as f64),
                None if sweep => load
                    .get("sweep")
                    .and_then(|s| s.get("stage_duration"))
                    .cloned()
                    .unwrap_or(json!(180)),
                None if rate_kind => first_stage
                    .get("duration")
                    .cloned()
                    .ok_or_else(|| edit.refuse(
                        Flag::Rate,
                        "the profile's first stage has no `duration` to keep",
                        "add --duration D",
                    ))?,
                None => {
                    return Err(edit.refuse(
                        Flag::Rate,
                        "--rate turns this `concurrent` profile into a rate stage, and an inference-perf rate \
                         stage needs a duration (it sends rate × duration requests)",
                        "add --duration D",
                    ));
                }
            };
            let new_kind = if kind == "poisson" { "poisson" } else { "constant" };
            if kind != new_kind {
                edit.set(Flag::Rate, "load.type", load, "type", json!(new_kind));
            }
            edit.remove(Flag::Rate, "load.sweep", load, "sweep");
            edit.set(
                Flag::Rate,
                "load.stages",
                load,
                "stages",
                json!([{"rate": number(rate), "duration": duration}]),
            );
            Ok(())
        }
        (None, Some(concurrency)) => {
            if flags.duration.is_some() {
                return Err(edit.refuse(
                    Flag::Duration,
                    "an inference-perf `concurrent` stage ends after its `num_requests`; it has no duration",
                    "give --requests N with --concurrency",
                ));
            }
            let num_requests = match flags.requests {
                Some(n) => json!(n),
                None if !rate_kind => first_stage.get("num_requests").cloned().ok_or_else(|| {
                    edit.refuse(
                        Flag::Concurrency,
                        "the profile's first stage has no `num_requests` to keep",
                        "add --requests N",
                    )
                })?,
                None => {
                    return Err(edit.refuse(
                        Flag::Concurrency,
                        "--concurrency turns this rate profile into an inference-perf `concurrent` stage, which \
                         ends after a number of requests",
                        "add --requests N",
                    ));
                }
            };
            if kind != "concurrent" {
                edit.set(Flag::Concurrency, "load.type", load, "type", json!("concurrent"));
            }
            edit.remove(Flag::Concurrency, "load.sweep", load, "sweep");
            edit.set(
                Flag::Concurrency,
                "load.stages",
                load,
                "stages",
                json!([{"num_requests": num_requests, "concurrency_level": concurrency}]),
            );
            Ok(())
        }
        (None, None) => {
            if let Some(duration) = flags.duration {
                if !rate_kind {
                    return Err(edit.refuse(
                        Flag::Duration,
                        "an inference-perf `concurrent` stage ends after its `num_requests`; it has no duration",
                        "use --requests N",
                    ));
                }
                let seconds = json!(whole_seconds(edit, duration, "inference-perf stage durations")?);
                if sweep {
                    let sweep = edit.child(Flag::Duration, load, "sweep", "load.sweep")?;
                    edit.set(
                        Flag::Duration,
                        "load.sweep.stage_duration",
                        sweep,
                        "stage_duration",
                        seconds,
                    );
                } else {
                    for_each_stage(load, edit, Flag::Duration, |edit, path, stage| {
                        edit.set(Flag::Duration, &join(path, "duration"), stage, "duration", seconds.clone());
                    })?;
                }
            }
            if let Some(requests) = flags.requests {
                if rate_kind {
                    return Err(edit.refuse(
                        Flag::Requests,
                        format!(
                            "an inference-perf `{kind}` stage sends rate × duration requests; it has no request \
                             count"
                        ),
                        "use --duration D (or --concurrency N --requests M for a closed loop)",
                    ));
                }
                for_each_stage(load, edit, Flag::Requests, |edit, path, stage| {
                    edit.set(Flag::Requests, &join(path, "num_requests"), stage, "num_requests", json!(requests));
                })?;
            }
            Ok(())
        }
    }
}

/// Calls `each` on every stage map of `load.stages`.
fn for_each_stage(
    load: &mut Map<String, Value>,
    edit: &mut Editor<'_>,
    flag: Flag,
    mut each: impl FnMut(&mut Editor<'_>, &str, &mut Map<String, Value>),
) -> Result<(), LoadFlagError> {
    let stages = match load.get_mut("stages") {
        Some(Value::Array(stages)) => stages,
        other => {
            let found = other.map_or(Value::Null, |v| v.clone());
            return Err(edit.shape(flag, "load.stages", &found, "a list of stages"));
        }
    };
    for (i, stage) in stages.iter_mut().enumerate() {
        let path = format!("load.stages[{i}]");
        let found = stage.clone();
        let stage = stage
            .as_object_mut()
            .ok_or_else(|| edit.shape(flag, &path, &found, "a stage map"))?;
        each(edit, &path, stage);
    }
    Ok(())
}

/// An inference-perf distribution of exactly `n` tokens: mean = min = max, no spread (every inference-perf
/// version reads it so); a `total_count` the old one had is kept.
fn fixed_distribution(n: u64, old: Option<&Value>) -> Value {
    let mut map = Map::new();
    map.insert("min".to_owned(), json!(n));
    map.insert("max".to_owned(), json!(n));
    map.insert("mean".to_owned(), json!(n));
    map.insert("std_dev".to_owned(), json!(0));
    if let Some(count) = old.and_then(|o| o.get("total_count")) {
        map.insert("total_count".to_owned(), count.clone());
    }
    Value::Object(map)
}

fn inference_perf_data(
    root: &mut Map<String, Value>,
    edit: &mut Editor<'_>,
) -> Result<(), LoadFlagError> {
    let flags = edit.flags.clone();
    let flag = flags
        .first_of(&[Flag::InputTokens, Flag::OutputTokens])
        .unwrap_or(Flag::InputTokens);
    let has_trace = root.get("data").and_then(|d| d.get("trace")).is_some();
    let kind = root
        .get("data")
        .and_then(|d| d.get("type"))
        .and_then(Value::as_str)
        .unwrap_or("mock")
        .to_owned();
    let lengths = [
        (Flag::InputTokens, flags.input_tokens),
        (Flag::OutputTokens, flags.output_tokens),
    ];
    match kind.as_str() {
        "random" | "synthetic" if !has_trace => {
            let data = edit.child(flag, root, "data", "data")?;
            for ((flag, n), key) in lengths.into_iter().zip(["input_distribution", "output_distribution"]) {
                if let Some(n) = n {
                    let now = fixed_distribution(n, data.get(key));
                    edit.set(flag, &join("data", key), data, key, now);
                }
            }
            Ok(())
        }
        "shared_prefix" => {
            let data = edit.child(flag, root, "data", "data")?;
            let shared = edit.child(flag, data, "shared_prefix", "data.shared_prefix")?;
            for ((flag, n), (key, legacy)) in lengths
                .into_iter()
                .zip([("question_len", "question_distribution"), ("output_len", "output_distribution")])
            {
                if let Some(n) = n {
                    edit.remove(flag, &join("data.shared_prefix", legacy), shared, legacy);
                    edit.set(flag, &join("data.shared_prefix", key), shared, key, json!(n));
                }
            }
            Ok(())
        }
        "conversation_replay" => {
            let data = edit.child(flag, root, "data", "data")?;
            let replay = edit.child(flag, data, "conversation_replay", "data.conversation_replay")?;
            for ((flag, n), key) in lengths
                .into_iter()
                .zip(["input_tokens_per_turn", "output_tokens_per_turn"])
            {
                if let Some(n) = n {
                    let now = fixed_distribution(n, replay.get(key));
                    edit.set(flag, &join("data.conversation_replay", key), replay, key, now);
                }
            }
            Ok(())
        }
        "mock" => Err(edit.refuse(
            flag,
            "inference-perf's `mock` data has no lengths to set",
            "use `data.type: random` (or synthetic, shared_prefix) in the profile",
        )),
        "random" => Err(edit.refuse(
            flag,
            "with `data.trace` the lengths come from the trace's rows",
            "remove `data.trace` to draw random lengths",
        )),
        other => Err(edit.refuse(
            flag,
            format!("`{other}` data takes its lengths from the dataset or traces it replays"),
            "use `data.type: random`, synthetic, shared_prefix or conversation_replay to set lengths",
        )),
    }
}

// ---------------------------------------------------------------------------------------------------------------
// guidellm v0.7 scenarios: `spec.profile`, `spec.constraints[]`, `spec.data[]`, and the `benchmarks[]` overlays.

/// The profile kinds that take a rate.
const GUIDELLM_RATE_KINDS: [&str; 3] = ["constant", "async", "poisson"];

fn guidellm_scenario(
    root: &mut Map<String, Value>,
    edit: &mut Editor<'_>,
) -> Result<(), LoadFlagError> {
    let flags = edit.flags.clone();
    if flags.sets_load() {
        keep_first_benchmark(root, edit)?;
        let flag = flags
            .first_of(&[Flag::Rate, Flag::Concurrency])
            .unwrap_or(Flag::Rate);
        let spec = edit.child(flag, root, "spec", "spec")?;
        let profile = edit.child(flag, spec, "profile", "spec.profile")?;
        guidellm_load(profile, "spec.profile", &GuidellmKeys::SCENARIO, edit);
    }
    if flags.sets_limit() {
        guidellm_constraints(root, edit)?;
    }
    if flags.sets_lengths() {
        let flag = flags
            .first_of(&[Flag::InputTokens, Flag::OutputTokens])
            .unwrap_or(Flag::InputTokens);
        let spec = edit.child(flag, root, "spec", "spec")?;
        let (path, item) = match spec.get_mut("data") {
            Some(Value::Array(items)) if items.len() == 1 => ("spec.data[0]", &mut items[0]),
            Some(item @ (Value::Object(_) | Value::String(_))) => ("spec.data", item),
            // None, or several sources: the parser names the problem.
            _ => return Ok(()),
        };
        match item {
            Value::Object(data) => guidellm_synthetic(data, path, false, edit),
            _ => Err(edit.refuse(
                flag,
                "the scenario's data is a dataset, whose prompts and answers have their own lengths",
                "use `kind: synthetic_text` data to set lengths",
            )),
        }?;
    }
    Ok(())
}

/// The run becomes one benchmark: the first `benchmarks[]` entry, without its `profile.*` keys, which the flag
/// replaces (its other keys, e.g. a constraint's figure, stay).
fn keep_first_benchmark(
    root: &mut Map<String, Value>,
    edit: &mut Editor<'_>,
) -> Result<(), LoadFlagError> {
    let flag = edit
        .flags
        .first_of(&[Flag::Rate, Flag::Concurrency])
        .unwrap_or(Flag::Rate);
    let Some(Value::Array(entries)) = root.get_mut("benchmarks") else {
        return Ok(());
    };
    let is_load_key =
        |k: &String| k == "profile" || k.starts_with("profile.") || k.starts_with("profile[");
    let first_keeps_something = match entries.first() {
        Some(Value::Object(first)) => first.keys().any(|k| !is_load_key(k)),
        _ => true,
    };
    if !first_keeps_something {
        // Every entry only set the load, which the flag now sets: the run is the `spec` alone.
        edit.remove(flag, "benchmarks", root, "benchmarks");
        return Ok(());
    }
    if entries.len() > 1 {
        let dropped = entries.len() - 1;
        entries.truncate(1);
        edit.record(
            flag,
            "benchmarks",
            format!("kept the first entry, removed the other {dropped} (the run is one benchmark)"),
        );
    }
    if let Some(Value::Object(first)) = entries.first_mut() {
        let load_keys: Vec<String> = first.keys().filter(|k| is_load_key(k)).cloned().collect();
        for key in load_keys {
            edit.remove(flag, &format!("benchmarks[0].\"{key}\""), first, &key);
        }
    }
    Ok(())
}

/// Where a guidellm dialect keeps its load settings.
struct GuidellmKeys {
    /// The profile kind: `kind` (v0.7) or `profile` / `rate_type` (flat).
    kind: &'static [&'static str],
    /// The stream count of `concurrent`: `streams` (v0.7), `rate` (flat).
    streams: &'static str,
    /// Keys only a sweep reads.
    sweep: &'static [&'static str],
    /// `-` and `_` are the same in key names (flat).
    loose: bool,
}

impl GuidellmKeys {
    const SCENARIO: GuidellmKeys = GuidellmKeys {
        kind: &["kind"],
        streams: "streams",
        sweep: &["sweep_size", "strategy_type", "strategy"],
        loose: false,
    };
    const FLAT: GuidellmKeys = GuidellmKeys {
        kind: &["profile", "rate_type"],
        streams: "rate",
        sweep: &["sweep_size", "strategy_type", "strategy"],
        loose: true,
    };

    /// The key `name` has in `map`, or the one to add.
    fn key(&self, map: &Map<String, Value>, name: &str) -> String {
        let found = if self.loose {
            find_key(map, name)
        } else {
            map.contains_key(name).then(|| name.to_owned())
        };
        found.unwrap_or_else(|| {
            // A flat file written with hyphens gets hyphens.
            if self.loose && map.keys().any(|k| k.contains('-')) {
                name.replace('_', "-")
            } else {
                name.to_owned()
            }
        })
    }
}

/// `--rate` / `--concurrency` on a guidellm profile map `pm` (at `path`).
fn guidellm_load(
    pm: &mut Map<String, Value>,
    path: &str,
    keys: &GuidellmKeys,
    edit: &mut Editor<'_>,
) {
    let flags = edit.flags.clone();
    let kind_key = keys
        .kind
        .iter()
        .map(|k| keys.key(pm, k))
        .find(|k| pm.contains_key(k))
        .unwrap_or_else(|| keys.key(pm, keys.kind[0]));
    let kind = pm
        .get(&kind_key)
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let was_rate = GUIDELLM_RATE_KINDS.contains(&kind.as_str());
    let max_key = keys.key(pm, "max_concurrency");
    let rate_key = keys.key(pm, "rate");
    let streams_key = keys.key(pm, keys.streams);
    let at = |key: &str| join(path, key);
    let flag = flags
        .first_of(&[Flag::Rate, Flag::Concurrency])
        .unwrap_or(Flag::Rate);
    for key in keys.sweep {
        let key = keys.key(pm, key);
        edit.remove(flag, &at(&key), pm, &key);
    }
    match (flags.rate, flags.concurrency) {
        (Some(rate), concurrency) => {
            let new_kind = if was_rate { kind.as_str() } else { "constant" };
            edit.set(Flag::Rate, &at(&kind_key), pm, &kind_key, json!(new_kind));
            if streams_key != rate_key {
                edit.remove(Flag::Rate, &at(&streams_key), pm, &streams_key);
            }
            edit.set(Flag::Rate, &at(&rate_key), pm, &rate_key, number(rate));
            match concurrency {
                Some(n) => edit.set(Flag::Concurrency, &at(&max_key), pm, &max_key, json!(n)),
                // The stream count of `synchronous`, `throughput` or `concurrent` is not a cap on a rate.
                None if !(was_rate || kind == "sweep") => {
                    edit.remove(Flag::Rate, &at(&max_key), pm, &max_key)
                }
                None => {}
            }
        }
        (None, Some(concurrency)) => {
            edit.set(
                Flag::Concurrency,
                &at(&kind_key),
                pm,
                &kind_key,
                json!("concurrent"),
            );
            if streams_key != rate_key {
                edit.remove(Flag::Concurrency, &at(&rate_key), pm, &rate_key);
            }
            edit.set(
                Flag::Concurrency,
                &at(&streams_key),
                pm,
                &streams_key,
                json!(concurrency),
            );
            edit.remove(Flag::Concurrency, &at(&max_key), pm, &max_key);
        }
        (None, None) => {}
    }
}

/// `--duration` / `--requests` on a v0.7 scenario: the `max_duration` and `max_requests` constraints become the
/// flags' (set in place, added, or removed when only the other flag is given), and `benchmarks[]` keys that set
/// their figures are dropped; keys about the other constraints follow them to their new index.
fn guidellm_constraints(
    root: &mut Map<String, Value>,
    edit: &mut Editor<'_>,
) -> Result<(), LoadFlagError> {
    let flags = edit.flags.clone();
    let flag = flags
        .first_of(&[Flag::Duration, Flag::Requests])
        .unwrap_or(Flag::Duration);
    let spec = edit.child(flag, root, "spec", "spec")?;
    let mut list = match spec.get("constraints") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items.clone(),
        Some(item @ Value::Object(_)) => vec![item.clone()],
        Some(other) => {
            return Err(edit.shape(flag, "spec.constraints", other, "a list of constraints"));
        }
    };
    // The figure each limit flag sets, and the constraint kind that carries it.
    let figure_of = |kind: &str| match kind {
        "max_duration" => Some((
            Flag::Duration,
            "seconds",
            flags.duration.map(|d| number(d.as_secs_f64())),
        )),
        "max_requests" => Some((Flag::Requests, "count", flags.requests.map(|n| json!(n)))),
        _ => None,
    };
    // old index → new index, or None when the constraint is gone.
    let mut moved: Vec<Option<usize>> = Vec::with_capacity(list.len());
    // Old indexes whose figure a flag now sets: `benchmarks[]` keys for them are dropped.
    let mut set_by_flag: Vec<usize> = Vec::new();
    let mut placed: Vec<Flag> = Vec::new();
    let mut kept: Vec<Value> = Vec::new();
    for (i, mut item) in list.drain(..).enumerate() {
        let kind = item
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let path = format!("spec.constraints[{i}]");
        let Some((by, field, value)) = figure_of(&kind) else {
            moved.push(Some(kept.len()));
            kept.push(item);
            continue;
        };
        match (value, item.as_object_mut()) {
            (Some(now), Some(map)) if !placed.contains(&by) => {
                edit.set(by, &join(&path, field), map, field, now);
                placed.push(by);
                set_by_flag.push(i);
                moved.push(Some(kept.len()));
                kept.push(item);
            }
            _ => {
                // A stop the flags replace: `--requests 10` alone sends 10 requests, whatever the duration was.
                edit.record(flag, &path, format!("removed (was {})", show(&item)));
                moved.push(None);
            }
        }
    }
    let done = (
        placed.contains(&Flag::Duration),
        placed.contains(&Flag::Requests),
    );
    if let (Some(d), false) = (flags.duration, done.0) {
        let item = json!({"kind": "max_duration", "seconds": number(d.as_secs_f64())});
        edit.record(
            Flag::Duration,
            &format!("spec.constraints[{}]", kept.len()),
            format!("= {} (added)", show(&item)),
        );
        kept.push(item);
    }
    if let (Some(n), false) = (flags.requests, done.1) {
        let item = json!({"kind": "max_requests", "count": n});
        edit.record(
            Flag::Requests,
            &format!("spec.constraints[{}]", kept.len()),
            format!("= {} (added)", show(&item)),
        );
        kept.push(item);
    }
    spec.insert("constraints".to_owned(), Value::Array(kept));
    let Some(Value::Array(entries)) = root.get_mut("benchmarks") else {
        return Ok(());
    };
    for (e, entry) in entries.iter_mut().enumerate() {
        let Value::Object(map) = entry else { continue };
        let mut rebuilt = Map::new();
        for (key, value) in std::mem::take(map) {
            let Some((index, rest)) = constraint_ref(&key) else {
                rebuilt.insert(key, value);
                continue;
            };
            let Some(index) = index.filter(|_| !rest.is_empty()) else {
                return Err(edit.refuse(
                    flag,
                    format!("benchmarks[{e}] replaces `{key}` whole, so the flag's constraint cannot be placed"),
                    "write the constraints in `spec.constraints` and set their figures per benchmark",
                ));
            };
            match moved.get(index).copied().flatten() {
                Some(_) if set_by_flag.contains(&index) => {
                    edit.record(
                        flag,
                        &format!("benchmarks[{e}].\"{key}\""),
                        format!("removed (was {})", show(&value)),
                    );
                }
                Some(new) => {
                    rebuilt.insert(format!("constraints[{new}]{rest}"), value);
                }
                None => {
                    edit.record(
                        flag,
                        &format!("benchmarks[{e}].\"{key}\""),
                        format!("removed (was {})", show(&value)),
                    );
                }
            }
        }
        *map = rebuilt;
    }
    Ok(())
}

/// `constraints[3].count` / `constraints.3.count` → (Some(3), ".count"); `constraints` → (None, "").
fn constraint_ref(key: &str) -> Option<(Option<usize>, String)> {
    let rest = key.strip_prefix("constraints")?;
    if rest.is_empty() {
        return Some((None, String::new()));
    }
    let (digits, tail) = if let Some(inner) = rest.strip_prefix('[') {
        let end = inner.find(']')?;
        (&inner[..end], &inner[end + 1..])
    } else if let Some(inner) = rest.strip_prefix('.') {
        let end = inner.find(['.', '[']).unwrap_or(inner.len());
        (&inner[..end], &inner[end..])
    } else {
        return None;
    };
    let index = digits.trim().parse::<usize>().ok()?;
    Some((Some(index), tail.to_owned()))
}

/// The synthetic data's lengths: `prompt_tokens` / `output_tokens` exactly N (guidellm draws a fixed length when
/// there is no stdev and min = max = the average, so those keys go).
fn guidellm_synthetic(
    data: &mut Map<String, Value>,
    path: &str,
    loose: bool,
    edit: &mut Editor<'_>,
) -> Result<(), LoadFlagError> {
    let flags = edit.flags.clone();
    if let Some(kind) = data
        .get("kind")
        .or_else(|| data.get("type"))
        .and_then(Value::as_str)
        && kind != "synthetic_text"
    {
        let flag = flags
            .first_of(&[Flag::InputTokens, Flag::OutputTokens])
            .unwrap_or(Flag::InputTokens);
        return Err(edit.refuse(
            flag,
            format!("`{kind}` data has its own lengths"),
            "use `kind: synthetic_text` data to set lengths",
        ));
    }
    for (flag, n, name) in [
        (Flag::InputTokens, flags.input_tokens, "prompt_tokens"),
        (Flag::OutputTokens, flags.output_tokens, "output_tokens"),
    ] {
        let Some(n) = n else { continue };
        let key_of = |data: &Map<String, Value>, name: &str| {
            if loose {
                find_key(data, name).unwrap_or_else(|| name.to_owned())
            } else {
                name.to_owned()
            }
        };
        for suffix in ["_stdev", "_min", "_max"] {
            let key = key_of(data, &format!("{name}{suffix}"));
            edit.remove(flag, &join(path, &key), data, &key);
        }
        let key = key_of(data, name);
        edit.set(flag, &join(path, &key), data, &key, json!(n));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------------------------
// guidellm ≤ v0.6 flat scenarios: `profile`/`rate_type`, `rate`, `max_seconds`, `max_requests`, `max_concurrency`,
// `data` (a map, a JSON string or `key=value,...`); `-` and `_` interchangeable in keys.

fn guidellm_flat(
    root: &mut Map<String, Value>,
    edit: &mut Editor<'_>,
) -> Result<(), LoadFlagError> {
    let flags = edit.flags.clone();
    if flags.sets_load() {
        guidellm_load(root, "", &GuidellmKeys::FLAT, edit);
    }
    if flags.sets_limit() {
        for (flag, name, value) in [
            (
                Flag::Duration,
                "max_seconds",
                flags.duration.map(|d| number(d.as_secs_f64())),
            ),
            (
                Flag::Requests,
                "max_requests",
                flags.requests.map(|n| json!(n)),
            ),
        ] {
            let key = GuidellmKeys::FLAT.key(root, name);
            match value {
                Some(value) => edit.set(flag, &key, root, &key, value),
                // The other stop goes: the flag given decides when the benchmark ends.
                None => {
                    let by = flags
                        .first_of(&[Flag::Duration, Flag::Requests])
                        .unwrap_or(flag);
                    edit.remove(by, &key, root, &key);
                }
            }
        }
    }
    if flags.sets_lengths() {
        let flag = flags
            .first_of(&[Flag::InputTokens, Flag::OutputTokens])
            .unwrap_or(Flag::InputTokens);
        let Some(key) = find_key(root, "data") else {
            return Ok(());
        };
        match root.get_mut(&key) {
            Some(Value::Object(data)) => guidellm_synthetic(data, &key, true, edit)?,
            Some(Value::String(text)) if text.trim_start().starts_with('{') => {
                let parsed: Option<Map<String, Value>> = serde_json::from_str(text.trim()).ok();
                let Some(mut data) = parsed else {
                    return Ok(());
                };
                guidellm_synthetic(&mut data, &key, true, edit)?;
                *text = Value::Object(data).to_string();
            }
            Some(Value::String(text)) if text.contains('=') => {
                // `prompt_tokens=256,output_tokens=128`: edited as pairs, written back in the same form.
                let mut data = Map::new();
                for part in text.split(',').filter(|p| !p.trim().is_empty()) {
                    let (k, v) = part.split_once('=').unwrap_or((part, ""));
                    data.insert(k.trim().to_owned(), Value::String(v.trim().to_owned()));
                }
                guidellm_synthetic(&mut data, &key, true, edit)?;
                *text = data
                    .iter()
                    .map(|(k, v)| match v {
                        Value::String(s) => format!("{k}={s}"),
                        other => format!("{k}={other}"),
                    })
                    .collect::<Vec<_>>()
                    .join(",");
            }
            Some(_) => {
                return Err(edit.refuse(
                    flag,
                    "the scenario's `data` names a dataset, whose prompts and answers have their own lengths",
                    "use synthetic data (`prompt_tokens=N,output_tokens=M`) to set lengths",
                ));
            }
            None => {}
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------------------------
// vllm bench serve / InferenceMAX flag maps: `request-rate`, `max-concurrency`, `num-prompts`, and the chosen
// dataset's length flags.

fn vllm_bench(root: &mut Map<String, Value>, edit: &mut Editor<'_>) -> Result<(), LoadFlagError> {
    let flags = edit.flags.clone();
    let key = |root: &Map<String, Value>, name: &str| {
        find_key(root, name).unwrap_or_else(|| name.to_owned())
    };
    if flags.duration.is_some() {
        return Err(edit.refuse(
            Flag::Duration,
            "vllm bench serve has no duration: it sends `num-prompts` requests",
            "use --requests N (at --rate R they take about N / R seconds)",
        ));
    }
    if flags.sets_load() {
        let rate_key = key(root, "request-rate");
        let max_key = key(root, "max-concurrency");
        // No rate (or `inf`) sends everything at once, so `max-concurrency` is the load level, not a cap.
        let closed_loop = match root.get(&rate_key) {
            None | Some(Value::Null) => true,
            Some(Value::String(s)) => s
                .trim()
                .trim_start_matches('+')
                .to_ascii_lowercase()
                .starts_with("inf"),
            Some(Value::Number(n)) => n.as_f64().is_none_or(f64::is_infinite),
            Some(_) => false,
        };
        match (flags.rate, flags.concurrency) {
            (Some(rate), concurrency) => {
                edit.set(Flag::Rate, &rate_key, root, &rate_key, number(rate));
                match concurrency {
                    Some(n) => edit.set(Flag::Concurrency, &max_key, root, &max_key, json!(n)),
                    None if closed_loop => edit.remove(Flag::Rate, &max_key, root, &max_key),
                    None => {}
                }
            }
            (None, Some(n)) => {
                if !closed_loop {
                    edit.set(Flag::Concurrency, &rate_key, root, &rate_key, json!("inf"));
                }
                edit.set(Flag::Concurrency, &max_key, root, &max_key, json!(n));
            }
            (None, None) => {}
        }
    }
    if let Some(n) = flags.requests {
        let k = key(root, "num-prompts");
        edit.set(Flag::Requests, &k, root, &k, json!(n));
    }
    if flags.sets_lengths() {
        let dataset = find_key(root, "dataset-name")
            .and_then(|k| root.get(&k))
            .and_then(Value::as_str)
            .unwrap_or("random")
            .to_owned();
        // The general `input-len` / `output-len` of recent vLLM win over the dataset's own flags when present.
        let general = |root: &Map<String, Value>, name: &str| find_key(root, name);
        let (input, output) = match dataset.as_str() {
            "random" => ("random-input-len", "random-output-len"),
            "sonnet" => ("sonnet-input-len", "sonnet-output-len"),
            "sharegpt" => ("", "sharegpt-output-len"),
            "custom" => ("", "custom-output-len"),
            _ => ("", ""),
        };
        for (flag, n, own, general_name) in [
            (Flag::InputTokens, flags.input_tokens, input, "input-len"),
            (
                Flag::OutputTokens,
                flags.output_tokens,
                output,
                "output-len",
            ),
        ] {
            let Some(n) = n else { continue };
            if own.is_empty() {
                let what = if flag == Flag::InputTokens {
                    "prompts"
                } else {
                    "answers"
                };
                return Err(edit.refuse(
                    flag,
                    format!("the `{dataset}` dataset's {what} have the lengths of its records"),
                    "use `dataset-name: random` to set lengths",
                ));
            }
            let general_applies =
                dataset == "random" || (flag == Flag::OutputTokens && dataset != "sonnet");
            let k = general(root, general_name)
                .filter(|_| general_applies)
                .unwrap_or_else(|| key(root, own));
            edit.set(flag, &k, root, &k, json!(n));
        }
        if dataset == "random" {
            exact_range_ratio(root, edit)?;
        }
    }
    Ok(())
}

/// `random-range-ratio` draws lengths in [len × (1 − r), len × (1 + r)]: the side a flag fixes gets 0.
fn exact_range_ratio(
    root: &mut Map<String, Value>,
    edit: &mut Editor<'_>,
) -> Result<(), LoadFlagError> {
    let flags = edit.flags.clone();
    let Some(key) = find_key(root, "random-range-ratio") else {
        return Ok(());
    };
    let flag = flags
        .first_of(&[Flag::InputTokens, Flag::OutputTokens])
        .unwrap_or(Flag::InputTokens);
    let ratios = match root.get(&key) {
        Some(Value::Object(map)) => Some((
            map.get("input").and_then(Value::as_f64).unwrap_or(0.0),
            map.get("output").and_then(Value::as_f64).unwrap_or(0.0),
        )),
        Some(Value::String(s)) if s.trim_start().starts_with('{') => {
            serde_json::from_str::<Map<String, Value>>(s)
                .ok()
                .map(|map| {
                    (
                        map.get("input").and_then(Value::as_f64).unwrap_or(0.0),
                        map.get("output").and_then(Value::as_f64).unwrap_or(0.0),
                    )
                })
        }
        Some(Value::String(s)) => s.trim().parse::<f64>().ok().map(|r| (r, r)),
        Some(Value::Number(n)) => n.as_f64().map(|r| (r, r)),
        _ => None,
    };
    // Left to the parser, which says what is wrong with it.
    let Some((input, output)) = ratios else {
        return Ok(());
    };
    let input = if flags.input_tokens.is_some() {
        0.0
    } else {
        input
    };
    let output = if flags.output_tokens.is_some() {
        0.0
    } else {
        output
    };
    if input == 0.0 && output == 0.0 {
        edit.remove(flag, &key, root, &key);
    } else {
        // vLLM takes a JSON object for separate input and output ratios.
        let now = json!(json!({"input": number(input), "output": number(output)}).to_string());
        edit.set(flag, &key, root, &key, now);
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------------------------
// aiperf flag maps: `concurrency`, `request-count`, `synthetic-input-tokens-mean` (`isl`), `output-tokens-mean`
// (`osl`).

fn aiperf(root: &mut Map<String, Value>, edit: &mut Editor<'_>) -> Result<(), LoadFlagError> {
    let flags = edit.flags.clone();
    if flags.rate.is_some() {
        return Err(edit.refuse(
            Flag::Rate,
            "llmbench's aiperf dialect does not run AIPerf's request-rate mode (it refuses `request-rate`)",
            "use --concurrency N for AIPerf's concurrency burst, or run the profile with another harness",
        ));
    }
    if flags.duration.is_some() {
        return Err(edit.refuse(
            Flag::Duration,
            "llmbench's aiperf dialect does not run AIPerf's `benchmark-duration` (it refuses the key)",
            "use --requests N (AIPerf's `request-count`)",
        ));
    }
    if root.contains_key("input-file") {
        let flag = flags
            .first_of(&[
                Flag::Concurrency,
                Flag::Requests,
                Flag::InputTokens,
                Flag::OutputTokens,
            ])
            .unwrap_or(Flag::Concurrency);
        return Err(edit.refuse(
            flag,
            "the profile replays a trace (`input-file`), which sets every request, its lengths and when it is sent",
            "use the `synthetic` aiperf profile to set the load and lengths",
        ));
    }
    if let Some(n) = flags.concurrency {
        edit.set(
            Flag::Concurrency,
            "concurrency",
            root,
            "concurrency",
            json!(n),
        );
    }
    if let Some(n) = flags.requests {
        edit.set(
            Flag::Requests,
            "request-count",
            root,
            "request-count",
            json!(n),
        );
    }
    for (flag, n, means, stddevs) in [
        (
            Flag::InputTokens,
            flags.input_tokens,
            [
                "synthetic-input-tokens-mean",
                "isl",
                "prompt-input-tokens-mean",
            ],
            [
                "synthetic-input-tokens-stddev",
                "isl-stddev",
                "prompt-input-tokens-stddev",
            ],
        ),
        (
            Flag::OutputTokens,
            flags.output_tokens,
            ["output-tokens-mean", "osl", "prompt-output-tokens-mean"],
            [
                "output-tokens-stddev",
                "osl-stddev",
                "prompt-output-tokens-stddev",
            ],
        ),
    ] {
        let Some(n) = n else { continue };
        let mean = first_key(root, &means).unwrap_or_else(|| means[0].to_owned());
        edit.set(flag, &mean, root, &mean, json!(n));
        if let Some(stddev) = first_key(root, &stddevs) {
            edit.set(flag, &stddev, root, &stddev, json!(0));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------------------------
// mlperf (LoadGen settings): only the Server scenario's `target_qps` is a rate; LoadGen's run length is made of
// minimums that decide whether a result is VALID, so they are left to explicit overrides.

fn mlperf(root: &mut Map<String, Value>, edit: &mut Editor<'_>) -> Result<(), LoadFlagError> {
    let flags = edit.flags.clone();
    if let Some(flag) = flags.first_of(&[Flag::Concurrency]) {
        return Err(edit.refuse(
            flag,
            "LoadGen's scenarios fix how queries are issued (Server: Poisson at target_qps; Offline: all at once; \
             SingleStream: one at a time)",
            "pick the scenario with `scenario:` in the profile",
        ));
    }
    if let Some(flag) = flags.first_of(&[Flag::Duration, Flag::Requests]) {
        return Err(edit.refuse(
            flag,
            "LoadGen's run length is `min_duration` and `min_query_count`, minimums that decide whether the result \
             is VALID",
            "set them with --override min_duration=MILLISECONDS / --override min_query_count=N",
        ));
    }
    if let Some(flag) = flags.first_of(&[Flag::InputTokens, Flag::OutputTokens]) {
        return Err(edit.refuse(
            flag,
            "MLPerf prompts come from the dataset, and answers end where the model stops (`max_tokens` caps them)",
            "set the cap with --override max_tokens=N",
        ));
    }
    if let Some(rate) = flags.rate {
        let scenario = root
            .get("scenario")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        if scenario != "Server" {
            return Err(edit.refuse(
                Flag::Rate,
                format!(
                    "the {scenario} scenario has no arrival rate (`target_qps` is a rate only in Server; Offline \
                     uses it to size its one query)"
                ),
                "use `scenario: Server` for a rate, or --override target_qps=N to size an Offline run",
            ));
        }
        if root.contains_key("user_conf") {
            return Err(edit.refuse(
                Flag::Rate,
                "the profile's `user_conf` is applied after its keys and may set target_qps",
                "set `*.Server.target_qps` in that user.conf",
            ));
        }
        edit.set(Flag::Rate, "target_qps", root, "target_qps", number(rate));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------------------------
// fmperf (LMBenchmark): `qps_values`, and for the long-input scenario `test_duration` and `answer_len`.

fn fmperf(root: &mut Map<String, Value>, edit: &mut Editor<'_>) -> Result<(), LoadFlagError> {
    let flags = edit.flags.clone();
    if let Some(flag) = flags.first_of(&[Flag::Concurrency, Flag::Requests]) {
        return Err(edit.refuse(
            flag,
            "LMBenchmark's users each send their next question at the QPS the run is given; it has no cap on \
             requests in flight and no request count",
            "use --rate (qps_values) and --duration (test_duration)",
        ));
    }
    if flags.input_tokens.is_some() {
        return Err(edit.refuse(
            Flag::InputTokens,
            "LMBenchmark's prompt sizes (`system_prompt`, `chat_history`) are words, and a chat's context grows \
             with every round",
            "set them with --override system_prompt=WORDS / chat_history=WORDS",
        ));
    }
    let scenario = root
        .get("scenarios")
        .and_then(Value::as_str)
        .unwrap_or("sharegpt")
        .to_owned();
    if let Some(flag) = flags.first_of(&[Flag::Duration, Flag::OutputTokens])
        && scenario != "long-input"
    {
        return Err(edit.refuse(
            flag,
            format!("the `{scenario}` scenario's script sets its own run time and answer length"),
            "use `scenarios: long-input` to set them",
        ));
    }
    if let Some(rate) = flags.rate {
        edit.set(
            Flag::Rate,
            "qps_values",
            root,
            "qps_values",
            json!(format_number(rate)),
        );
    }
    if let Some(duration) = flags.duration {
        let seconds = whole_seconds(edit, duration, "LMBenchmark run times (`--time`)")?;
        edit.set(
            Flag::Duration,
            "test_duration",
            root,
            "test_duration",
            json!(seconds),
        );
    }
    if let Some(n) = flags.output_tokens {
        edit.set(
            Flag::OutputTokens,
            "answer_len",
            root,
            "answer_len",
            json!(n),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests;
