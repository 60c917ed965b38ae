//! The `mlperf` profile dialect: a YAML document of LoadGen test settings plus server and dataset fields, and
//! LoadGen's `user.conf` grammar (`model.scenario.key = value`), whose keys override the same settings.
//!
//! Settings are layered as LoadGen layers them: LoadGen's `TestSettings` defaults, then the built-in
//! `mlperf.conf` facts for the model and scenario ([`MLPERF_CONF`]), then the profile's keys, then `user.conf`.
//! Within one conf file the most specific pattern wins (`model.Scenario` over `*.Scenario` over `model.*` over
//! `*.*`, LoadGen's `lookupkv` order) and, for the same pattern, the later line.

use llmbench_workload::workload::yaml::{Node, Value, parse_document};
use llmbench_workload::workload::{
    Api, ApiKind, ParseOptions, Warning, WarningKind, WorkloadError,
};

use super::MlperfError;

/// A LoadGen scenario llmbench runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Scenario {
    /// Every sample in one query at t = 0.
    Offline,
    /// Poisson arrivals at `target_qps`.
    Server,
    /// Closed loop, one query in flight.
    SingleStream,
    /// Closed loop of queries of `samples_per_query` samples sent together, the next once all have returned.
    MultiStream,
}

impl Scenario {
    /// LoadGen's name, as in `user.conf` and the summary.
    pub fn as_str(self) -> &'static str {
        match self {
            Scenario::Offline => "Offline",
            Scenario::Server => "Server",
            Scenario::SingleStream => "SingleStream",
            Scenario::MultiStream => "MultiStream",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        [
            Scenario::Offline,
            Scenario::Server,
            Scenario::SingleStream,
            Scenario::MultiStream,
        ]
        .into_iter()
        .find(|s| s.as_str().eq_ignore_ascii_case(text))
    }
}

/// LoadGen's test mode (`TestMode`, `test_settings.h`), by its `mode` integer in a conf file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Mode {
    /// 0: an accuracy pass over the whole dataset, then a performance pass, in one test and one log set.
    SubmissionRun,
    /// 1: every sample once, answers logged.
    AccuracyOnly,
    /// 2: the scenario's timed run and its verdict.
    PerformanceOnly,
    /// 3: Server only: a search over `target_qps` for the highest rate that meets the latency constraints.
    FindPeakPerformance,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::SubmissionRun => "SubmissionRun",
            Mode::AccuracyOnly => "AccuracyOnly",
            Mode::PerformanceOnly => "PerformanceOnly",
            Mode::FindPeakPerformance => "FindPeakPerformance",
        }
    }

    /// Whether the test has an accuracy pass (whose answers are logged and scored).
    pub fn has_accuracy_pass(self) -> bool {
        matches!(self, Mode::SubmissionRun | Mode::AccuracyOnly)
    }

    /// Whether the test ends with a performance verdict.
    pub fn has_performance_pass(self) -> bool {
        !matches!(self, Mode::AccuracyOnly)
    }

    const EXPECTED: &'static str =
        "SubmissionRun (0), AccuracyOnly (1), PerformanceOnly (2) or FindPeakPerformance (3)";

    /// A name, or LoadGen's `mode` integer (`TestSettings::FromConfig`: 0 to 3).
    fn parse(text: &str) -> Option<Self> {
        let text = text.trim();
        let all = [
            Mode::SubmissionRun,
            Mode::AccuracyOnly,
            Mode::PerformanceOnly,
            Mode::FindPeakPerformance,
        ];
        match text.parse::<usize>() {
            Ok(n) => all.get(n).copied(),
            Err(_) => all
                .into_iter()
                .find(|m| m.as_str().eq_ignore_ascii_case(text)),
        }
    }
}

/// The LLM benchmarks whose limits are built in (`mlperf.conf`, submission checker `LLM_LATENCY_LIMITS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LlmModel {
    Llama3_1_8b,
    Llama3_1_8bInteractive,
    Llama2_70b,
    Llama2_70bInteractive,
}

impl LlmModel {
    pub const ALL: [LlmModel; 4] = [
        LlmModel::Llama3_1_8b,
        LlmModel::Llama3_1_8bInteractive,
        LlmModel::Llama2_70b,
        LlmModel::Llama2_70bInteractive,
    ];

    /// The conf name, e.g. `llama3_1-8b`.
    pub(crate) fn conf_name(self) -> &'static str {
        match self {
            LlmModel::Llama3_1_8b => "llama3_1-8b",
            LlmModel::Llama3_1_8bInteractive => "llama3_1-8b-interactive",
            LlmModel::Llama2_70b => "llama2-70b",
            LlmModel::Llama2_70bInteractive => "llama2-70b-interactive",
        }
    }

    pub(crate) fn from_conf_name(name: &str) -> Option<Self> {
        // `llama3.1-8b` is the benchmark's display name; accept it for the conf name.
        let name = name.replace("llama3.1", "llama3_1");
        Self::ALL.into_iter().find(|m| m.conf_name() == name)
    }

    /// The accuracy reference scores (ROUGE-1, ROUGE-2, ROUGE-L, on LoadGen's 0–100 scale) that the accuracy
    /// target is a fraction of (submission checker; FP32/BF16 references).
    pub fn rouge_reference(self) -> [f64; 3] {
        match self {
            LlmModel::Llama3_1_8b | LlmModel::Llama3_1_8bInteractive => [38.7792, 15.9075, 24.4957],
            LlmModel::Llama2_70b | LlmModel::Llama2_70bInteractive => [44.4312, 22.0352, 28.6162],
        }
    }

    /// `max_tokens` of the reference implementation.
    pub fn max_tokens(self) -> u32 {
        match self {
            LlmModel::Llama3_1_8b | LlmModel::Llama3_1_8bInteractive => 128,
            LlmModel::Llama2_70b | LlmModel::Llama2_70bInteractive => 1024,
        }
    }
}

/// The `mlperf.conf` facts llmbench builds in (mlcommons/inference `loadgen/mlperf.conf`; FORMATS.md §4.5),
/// parsed with the same grammar as `user.conf`: the lines for the models llmbench knows, as LoadGen 6.0.17 (the
/// PyPI `mlcommons-loadgen` wheel, `loadgen/mlperf.conf` at mlcommons/inference `b66003e1`) carries them. The seeds
/// are LoadGen's to set: a `user.conf` cannot change them (see [`USER_CONF_UNREAD`]).
pub const MLPERF_CONF: &str = "\
llama2-70b.*.performance_sample_count_override = 24576
llama2-70b-interactive.*.performance_sample_count_override = 24576
llama3_1-8b.*.performance_sample_count_override = 13368
llama3_1-8b-interactive.*.performance_sample_count_override = 13368
*.*.qsl_rng_seed = 2085463073848966840
*.*.sample_index_rng_seed = 2747215439041700203
*.*.schedule_rng_seed = 16159082839903944936
llama2-70b.*.sample_concatenate_permutation = 1
llama2-70b-interactive.*.sample_concatenate_permutation = 1
llama3_1-8b.*.sample_concatenate_permutation = 1
llama3_1-8b-interactive.*.sample_concatenate_permutation = 1
*.SingleStream.target_latency_percentile = 90
*.SingleStream.min_duration = 600000
*.MultiStream.target_latency_percentile = 99
*.MultiStream.samples_per_query = 8
*.MultiStream.min_duration = 600000
*.MultiStream.min_query_count = 662
*.Server.target_latency_percentile = 99
*.Server.min_duration = 600000
*.Offline.target_latency_percentile = 90
*.Offline.min_duration = 600000
llama2-70b.Server.ttft_latency = 2000
llama2-70b.Server.tpot_latency = 200
llama2-70b-interactive.Server.ttft_latency = 450
llama2-70b-interactive.Server.tpot_latency = 40
llama3_1-8b.Server.ttft_latency = 2000
llama3_1-8b.Server.tpot_latency = 100
llama3_1-8b-interactive.Server.ttft_latency = 500
llama3_1-8b-interactive.Server.tpot_latency = 30
llama2-70b.Offline.min_query_count = 24576
llama3_1-8b.Offline.min_query_count = 13368
*.SingleStream.target_latency = 10
*.Server.target_qps = 1.0
*.Offline.target_qps = 1.0
";

/// Every setting of an MLPerf run. Times are in LoadGen's units (ms for durations, ns for token limits).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct MlperfSettings {
    /// The conf model name (`llama3_1-8b`, or any name with explicit limits).
    pub model: String,
    pub scenario: Scenario,
    pub mode: Mode,
    /// Server TTFT p99 limit.
    pub ttft_latency_ns: u64,
    /// Server TPOT p99 limit.
    pub tpot_latency_ns: u64,
    /// The percentile the limits and early stopping apply to, as a fraction (0.99).
    pub target_latency_percentile: f64,
    /// Server: arrival rate; Offline: expected samples/s (sizes the single query).
    pub target_qps: f64,
    /// SingleStream: expected latency (`*.SingleStream.target_latency`), sizes the query count.
    pub single_stream_expected_latency_ns: u64,
    /// MultiStream: expected query latency (`*.MultiStream.target_latency`); LoadGen's target QPS is its inverse.
    pub multi_stream_expected_latency_ns: u64,
    /// MultiStream: samples per query (`*.MultiStream.samples_per_query`, 8 in `mlperf.conf`).
    pub multi_stream_samples_per_query: u64,
    pub min_duration_ms: u64,
    /// 0 = unbounded.
    pub max_duration_ms: u64,
    pub min_query_count: u64,
    /// 0 = unbounded.
    pub max_query_count: u64,
    /// Samples loaded for the performance run; 0 = the whole dataset.
    pub performance_sample_count: u64,
    pub qsl_rng_seed: u64,
    pub sample_index_rng_seed: u64,
    pub schedule_rng_seed: u64,
    /// LoadGen's equal-issue mode: the samples are issued as whole shuffles of the loaded set and the query count
    /// is rounded up to whole sets (on for the LLMs in `mlperf.conf`).
    pub sample_concatenate_permutation: bool,
    /// Output tokens asked for per query.
    pub max_tokens: u32,
    /// Queries sent before the measured run, excluded from every metric.
    pub warmup_queries: u64,
    /// Accuracy mode passes when each ROUGE score reaches this fraction of the reference.
    pub accuracy_target: f64,
    /// Reference ROUGE-1, ROUGE-2, ROUGE-L (0–100 scale), when the model has one or the profile gives one.
    pub rouge_reference: Option<[f64; 3]>,
    /// Printed as `SUT name : …`.
    pub sut_name: String,
    #[serde(skip)]
    pub server: Api,
    /// Dataset file (JSON, JSONL, CSV or a pickled pandas DataFrame with `input`/`tok_input`/`output`).
    pub dataset_path: Option<String>,
    /// A `user.conf` path named by the profile; the caller reads it and passes its text to [`parse_settings`].
    pub user_conf_path: Option<String>,
}

/// A `user.conf` (or `mlperf.conf`) text and the name its messages use.
#[derive(Debug, Clone, Copy)]
pub struct UserConf<'a> {
    pub file: &'a str,
    pub text: &'a str,
}

/// Parsed settings and what was noticed along the way.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedSettings {
    pub settings: MlperfSettings,
    pub warnings: Vec<Warning>,
}

/// One `model.scenario.key = value` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfLine {
    pub model: String,
    pub scenario: String,
    pub key: String,
    pub value: String,
    pub line: u32,
}

/// Parses conf text into its lines; `#` starts a comment, blank lines are skipped.
pub fn parse_user_conf(file: &str, text: &str) -> Result<Vec<ConfLine>, MlperfError> {
    let mut lines = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let line = u32::try_from(index + 1).unwrap_or(u32::MAX);
        let content = raw.split('#').next().unwrap_or("").trim();
        if content.is_empty() {
            continue;
        }
        let syntax = |problem: &str| MlperfError::ConfSyntax {
            file: file.to_string(),
            line,
            text: content.to_string(),
            problem: problem.to_string(),
        };
        let (lhs, value) = content
            .split_once('=')
            .ok_or_else(|| syntax("expected `model.scenario.key = value`"))?;
        let parts: Vec<&str> = lhs.trim().splitn(3, '.').collect();
        let [model, scenario, key] = parts[..] else {
            return Err(syntax(
                "the key must have three dot-separated parts: model.scenario.key",
            ));
        };
        if model.is_empty() || scenario.is_empty() || key.is_empty() || value.trim().is_empty() {
            return Err(syntax("model, scenario, key and value must all be given"));
        }
        lines.push(ConfLine {
            model: model.to_string(),
            scenario: scenario.to_string(),
            key: key.to_string(),
            value: value.trim().to_string(),
            line,
        });
    }
    Ok(lines)
}

/// How specific a conf line's pattern is for a model and scenario (`None` if it does not apply), in LoadGen's
/// `lookupkv` order: exact, `*.Scenario`, `model.*`, `*.*`.
fn specificity(line: &ConfLine, model: &str, scenario: Scenario) -> Option<u8> {
    let model_matches = line.model == model;
    let scenario_matches = line.scenario == scenario.as_str();
    match (line.model.as_str(), line.scenario.as_str()) {
        _ if model_matches && scenario_matches => Some(3),
        ("*", _) if scenario_matches => Some(2),
        (_, "*") if model_matches => Some(1),
        ("*", "*") => Some(0),
        _ => None,
    }
}

/// Conf keys llmbench acts on.
const CONF_KEYS: &[&str] = &[
    "mode",
    "qsl_rng_seed",
    "sample_index_rng_seed",
    "schedule_rng_seed",
    "ttft_latency",
    "tpot_latency",
    "target_latency_percentile",
    "target_latency",
    "target_qps",
    "min_duration",
    "max_duration",
    "min_query_count",
    "max_query_count",
    "performance_sample_count_override",
    "use_token_latencies",
    "samples_per_query",
    "sample_concatenate_permutation",
];

/// Keys LoadGen reads from its own `mlperf.conf` only (`TestSettings::FromConfig` looks them up when
/// `conf_type == 0`): in a `user.conf` it skips them without a word, so llmbench skips them too and says so.
const USER_CONF_UNREAD: &[&str] = &[
    "qsl_rng_seed",
    "sample_index_rng_seed",
    "schedule_rng_seed",
    "accuracy_log_probability",
    "test05",
    "test05_qsl_rng_seed",
    "test05_sample_index_rng_seed",
    "test05_schedule_rng_seed",
];

/// Conf keys LoadGen reads that do not change what llmbench does (logged as `Ignored`).
const CONF_IGNORED: &[&str] = &[
    "accuracy_log_rng_seed",
    "accuracy_log_probability",
    "accuracy_log_sampling_target",
    "test05",
    "test05_qsl_rng_seed",
    "test05_sample_index_rng_seed",
    "test05_schedule_rng_seed",
    "token_latency_scaling_factor",
    "performance_issue_same_index",
    "target_duration",
    "accuracy_sample_count_override",
    "print_timestamps",
    "server_num_issue_query_threads",
];

/// LoadGen settings that change what is issued or how latencies are reported, which llmbench does not implement:
/// a conf line that turns one on (as LoadGen reads the value) is refused; off, it changes nothing and is accepted.
/// Each with how `FromConfig` reads it and what it does in LoadGen 6.0.17 (`loadgen/test_settings_internal.cc`).
const CONF_REFUSED_WHEN_ON: &[(&str, OnWhen, &str)] = &[
    (
        "performance_issue_unique",
        OnWhen::NotZero,
        "compliance TEST04's mode: each query issues samples never issued before",
    ),
    (
        "performance_issue_same",
        OnWhen::NotZero,
        "compliance TEST04's mode: every query issues the sample performance_issue_same_index",
    ),
    (
        "coalesce_queries",
        OnWhen::NotZero,
        "Server queries that fall due together are issued as one query",
    ),
    (
        "max_async_queries",
        OnWhen::NotZero,
        "caps the Server queries in flight; llmbench issues every query when it falls due, as LoadGen's default 0",
    ),
    (
        "infer_token_latencies",
        OnWhen::One,
        "token latencies inferred from a non-streamed answer's length; llmbench measures them from the stream",
    ),
];

/// How LoadGen turns a conf value into a switch: `strtoull(value, nullptr, 0)`, then `!= 0` or `== 1`.
#[derive(Debug, Clone, Copy)]
enum OnWhen {
    NotZero,
    One,
}

impl OnWhen {
    fn is_on(self, value: &str) -> bool {
        let n = strtoull(value);
        match self {
            OnWhen::NotZero => n != 0,
            OnWhen::One => n == 1,
        }
    }
}

/// C's `strtoull(text, nullptr, 0)`: leading white space, an optional sign, then `0x` hex, `0` octal or decimal
/// digits as far as they go (none: 0); a minus sign negates modulo 2^64, and a value past 2^64 - 1 saturates.
fn strtoull(text: &str) -> u64 {
    let t = text.trim_start();
    let (negative, t) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let (radix, digits) = if let Some(hex) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        if hex.starts_with(|c: char| c.is_ascii_hexdigit()) {
            (16, hex)
        } else {
            (8, &t[..1])
        }
    } else if t.starts_with('0') {
        (8, t)
    } else {
        (10, t)
    };
    let mut n: u64 = 0;
    for c in digits.chars() {
        let Some(d) = c.to_digit(radix) else { break };
        n = match n
            .checked_mul(u64::from(radix))
            .and_then(|n| n.checked_add(u64::from(d)))
        {
            Some(n) => n,
            None => return u64::MAX,
        };
    }
    if negative { n.wrapping_neg() } else { n }
}

/// Which conf a text is, for LoadGen's `FromConfig(…, conf_type)`: its own `mlperf.conf` (0) or a `user.conf` (1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ConfKind {
    Mlperf,
    User,
}

/// Applies the lines of one conf file that match the settings' model and scenario: for each key, the most
/// specific matching pattern, and the later line among equals.
fn apply_conf(
    settings: &mut MlperfSettings,
    file: &str,
    kind: ConfKind,
    lines: &[ConfLine],
    warnings: &mut Vec<Warning>,
) -> Result<(), MlperfError> {
    let mut chosen: Vec<(&ConfLine, u8)> = Vec::new();
    for line in lines {
        if kind == ConfKind::User && USER_CONF_UNREAD.contains(&line.key.as_str()) {
            warnings.push(Warning {
                file: file.to_string(),
                key: format!("{}.{}.{}", line.model, line.scenario, line.key),
                line: Some(line.line),
                kind: WarningKind::Ignored,
                message: "LoadGen reads this key from its own mlperf.conf only and skips it in a user.conf; \
                          ignored (set it in the profile to run off the official value)"
                    .to_string(),
            });
            continue;
        }
        let known = CONF_KEYS.contains(&line.key.as_str())
            || CONF_REFUSED_WHEN_ON.iter().any(|(k, _, _)| *k == line.key);
        if !known {
            let ignored = CONF_IGNORED.contains(&line.key.as_str());
            let key = format!("{}.{}.{}", line.model, line.scenario, line.key);
            warnings.push(if ignored {
                Warning {
                    file: file.to_string(),
                    key,
                    line: Some(line.line),
                    kind: WarningKind::Ignored,
                    message: "a LoadGen key llmbench does not act on; ignored".to_string(),
                }
            } else {
                unknown_key(
                    file,
                    key,
                    &line.key,
                    line.line,
                    "not a LoadGen setting",
                    CONF_KEYS,
                )
            });
            continue;
        }
        let Some(rank) = specificity(line, &settings.model, settings.scenario) else {
            continue;
        };
        match chosen.iter_mut().find(|(c, _)| c.key == line.key) {
            Some(slot) if rank >= slot.1 => *slot = (line, rank),
            Some(_) => {}
            None => chosen.push((line, rank)),
        }
    }
    for (line, _) in chosen {
        apply_conf_key(settings, file, line, warnings)?;
    }
    Ok(())
}

fn apply_conf_key(
    s: &mut MlperfSettings,
    file: &str,
    line: &ConfLine,
    warnings: &mut Vec<Warning>,
) -> Result<(), MlperfError> {
    let invalid = |problem: String| MlperfError::Invalid {
        file: file.to_string(),
        line: Some(line.line),
        key: format!("{}.{}.{}", line.model, line.scenario, line.key),
        problem,
    };
    let v = line.value.as_str();
    let uint = || {
        v.parse::<u64>()
            .map_err(|_| invalid(format!("expected a non-negative integer, found `{v}`")))
    };
    let float = || {
        v.parse::<f64>()
            .ok()
            .filter(|f| f.is_finite() && *f >= 0.0)
            .ok_or_else(|| invalid(format!("expected a non-negative number, found `{v}`")))
    };
    if let Some((_, on_when, what)) = CONF_REFUSED_WHEN_ON.iter().find(|(k, _, _)| *k == line.key) {
        if on_when.is_on(v) {
            return Err(invalid(format!(
                "`{v}` turns on a LoadGen setting llmbench does not implement ({what}); remove the line or \
                 set it to 0"
            )));
        }
        return Ok(());
    }
    match line.key.as_str() {
        "mode" => {
            s.mode = Mode::parse(v)
                .ok_or_else(|| invalid(format!("expected {}, found `{v}`", Mode::EXPECTED)))?
        }
        "qsl_rng_seed" => s.qsl_rng_seed = uint()?,
        "sample_index_rng_seed" => s.sample_index_rng_seed = uint()?,
        "schedule_rng_seed" => s.schedule_rng_seed = uint()?,
        "ttft_latency" => s.ttft_latency_ns = ms_to_ns(float()?),
        "tpot_latency" => s.tpot_latency_ns = ms_to_ns(float()?),
        "target_latency_percentile" => s.target_latency_percentile = percentile(float()?),
        // SingleStream's expected latency; the Server target latency is 0 for the token-latency LLMs.
        "target_latency" if s.scenario == Scenario::SingleStream => {
            s.single_stream_expected_latency_ns = ms_to_ns(float()?);
        }
        // LoadGen reads it as `multi_stream_expected_latency_ns` (`FromConfig`, ms × 10⁶).
        "target_latency" if s.scenario == Scenario::MultiStream => {
            s.multi_stream_expected_latency_ns = ms_to_ns(float()?).max(1);
        }
        // `lookupkv(model, "MultiStream", "samples_per_query", …)`: only MultiStream lines reach it.
        "samples_per_query" if s.scenario == Scenario::MultiStream => {
            s.multi_stream_samples_per_query = uint()?;
            if s.multi_stream_samples_per_query == 0 {
                return Err(invalid("must be at least 1".to_string()));
            }
        }
        "target_qps" => s.target_qps = positive(float()?, &invalid)?,
        "min_duration" => s.min_duration_ms = uint()?,
        "max_duration" => s.max_duration_ms = uint()?,
        "min_query_count" => s.min_query_count = uint()?,
        "max_query_count" => s.max_query_count = uint()?,
        "performance_sample_count_override" => s.performance_sample_count = uint()?,
        // `sample_concatenate_permutation = (val == 1)`.
        "sample_concatenate_permutation" => s.sample_concatenate_permutation = uint()? == 1,
        "use_token_latencies" if uint()? == 0 => {
            warnings.push(Warning {
                file: file.to_string(),
                key: line.key.clone(),
                line: Some(line.line),
                kind: WarningKind::Ignored,
                message: "llmbench always judges LLM runs by token latencies (TTFT and TPOT)"
                    .to_string(),
            });
        }
        _ => {}
    }
    Ok(())
}

fn ms_to_ns(ms: f64) -> u64 {
    (ms * 1e6).round() as u64
}

/// LoadGen writes percentiles in conf files as percent (`99`) and stores fractions.
fn percentile(value: f64) -> f64 {
    if value > 1.0 { value / 100.0 } else { value }
}

fn positive(value: f64, invalid: &dyn Fn(String) -> MlperfError) -> Result<f64, MlperfError> {
    if value > 0.0 {
        Ok(value)
    } else {
        Err(invalid(format!("must be greater than 0, found {value}")))
    }
}

/// LoadGen's `TestSettings` defaults for a model and scenario, before any conf file.
fn loadgen_defaults(model: &str, scenario: Scenario) -> MlperfSettings {
    let llm = LlmModel::from_conf_name(model);
    MlperfSettings {
        model: model.to_string(),
        scenario,
        mode: Mode::PerformanceOnly,
        ttft_latency_ns: 100_000_000,
        tpot_latency_ns: 100_000_000,
        target_latency_percentile: 0.99,
        target_qps: 1.0,
        single_stream_expected_latency_ns: 1_000_000,
        // `test_settings.h` defaults.
        multi_stream_expected_latency_ns: 8_000_000,
        multi_stream_samples_per_query: 8,
        min_duration_ms: 10_000,
        max_duration_ms: 0,
        min_query_count: 100,
        max_query_count: 0,
        performance_sample_count: 0,
        qsl_rng_seed: 0,
        sample_index_rng_seed: 0,
        schedule_rng_seed: 0,
        sample_concatenate_permutation: false,
        max_tokens: llm.map_or(128, LlmModel::max_tokens),
        warmup_queries: 0,
        accuracy_target: 0.99,
        rouge_reference: llm.map(LlmModel::rouge_reference),
        sut_name: "llmbench".to_string(),
        server: Api {
            streaming: true,
            ..Api::default()
        },
        dataset_path: None,
        user_conf_path: None,
    }
}

/// The keys of the `server` section.
const SERVER_KEYS: &[&str] = &[
    "base_url",
    "model_name",
    "model",
    "endpoint",
    "api",
    "streaming",
    "ignore_eos",
];

/// An unknown key: a near miss (an error unless --lenient) when one edit from a key in `known`, as the other
/// dialects judge them (`target_qsp` for `target_qps`), else a warning.
fn unknown_key(
    file: &str,
    path: String,
    name: &str,
    line: u32,
    what: &str,
    known: &[&str],
) -> Warning {
    let near = llmbench_workload::workload::reader::nearest_key(name, known.iter().copied());
    Warning {
        file: file.to_string(),
        key: path,
        line: Some(line),
        kind: if near.is_some() {
            WarningKind::NearMiss
        } else {
            WarningKind::UnknownKey
        },
        message: match near {
            Some(k) => format!("{what}; ignored; did you mean `{k}`?"),
            None => format!("{what}; ignored"),
        },
    }
}

/// Profile keys, with what they set.
const PROFILE_KEYS: &[&str] = &[
    "model",
    "scenario",
    "mode",
    "ttft_latency",
    "tpot_latency",
    "target_latency_percentile",
    "target_qps",
    "expected_latency",
    "samples_per_query",
    "min_duration",
    "max_duration",
    "min_query_count",
    "max_query_count",
    "performance_sample_count",
    "qsl_rng_seed",
    "sample_index_rng_seed",
    "schedule_rng_seed",
    "sample_concatenate_permutation",
    "max_tokens",
    "warmup_queries",
    "accuracy_target",
    "rouge_reference",
    "sut_name",
    "server",
    "dataset",
    "user_conf",
];

/// Parses an `mlperf` profile and, when given, a `user.conf` whose matching keys override it.
///
/// `model` and `scenario` are required (they select the built-in limits and the conf lines); everything else has
/// LoadGen's default for that model and scenario. Durations are milliseconds (LoadGen's unit) or humantime
/// strings (`10m`); `ttft_latency`/`tpot_latency` are milliseconds or humantime strings.
pub fn parse_settings(
    file: &str,
    yaml: &str,
    user_conf: Option<UserConf<'_>>,
    options: &ParseOptions,
) -> Result<ParsedSettings, MlperfError> {
    let doc = parse_document(file, yaml)?;
    let mut warnings = Vec::new();
    let p = Profile {
        file,
        text: yaml,
        doc: &doc,
    };
    let entries = doc.entries().ok_or_else(|| MlperfError::Invalid {
        file: file.to_string(),
        line: Some(doc.line).filter(|l| *l > 0),
        key: "(document)".to_string(),
        problem: format!(
            "an mlperf profile is a map of settings, found {}",
            doc.value.describe()
        ),
    })?;
    let model = p.required_str("model")?;
    let scenario_text = p.required_str("scenario")?;
    let scenario = Scenario::parse(&scenario_text).ok_or_else(|| {
        p.invalid(
            "scenario",
            format!(
                "expected Offline, Server, SingleStream or MultiStream, found `{scenario_text}`"
            ),
        )
    })?;
    let model = model.replace("llama3.1", "llama3_1");
    let mut s = loadgen_defaults(&model, scenario);
    let builtin = parse_user_conf("mlperf.conf (built in)", MLPERF_CONF)?;
    apply_conf(
        &mut s,
        "mlperf.conf (built in)",
        ConfKind::Mlperf,
        &builtin,
        &mut warnings,
    )?;
    let explicit_limits = p.node("ttft_latency").is_some() && p.node("tpot_latency").is_some();
    if LlmModel::from_conf_name(&model).is_none()
        && scenario == Scenario::Server
        && !explicit_limits
    {
        return Err(p.invalid(
            "model",
            format!(
                "`{model}` has no built-in TTFT/TPOT limits (known: {}); give `ttft_latency` and `tpot_latency`",
                LlmModel::ALL.map(LlmModel::conf_name).join(", ")
            ),
        ));
    }

    for (key, _) in entries {
        if !PROFILE_KEYS.contains(&key.name.as_str()) {
            warnings.push(unknown_key(
                file,
                key.name.clone(),
                &key.name,
                key.line,
                "not an mlperf setting",
                PROFILE_KEYS,
            ));
        }
    }
    if let Some(mode) = p.opt_str("mode")? {
        s.mode = Mode::parse(&mode).ok_or_else(|| {
            p.invalid(
                "mode",
                format!("expected {}, found `{mode}`", Mode::EXPECTED),
            )
        })?;
    }
    if let Some(v) = p.opt_duration_ns("ttft_latency")? {
        s.ttft_latency_ns = v;
    }
    if let Some(v) = p.opt_duration_ns("tpot_latency")? {
        s.tpot_latency_ns = v;
    }
    if let Some(v) = p.opt_f64("target_latency_percentile")? {
        s.target_latency_percentile = percentile(v);
    }
    if let Some(v) = p.opt_f64("target_qps")? {
        s.target_qps = positive(v, &|problem| p.invalid("target_qps", problem))?;
    }
    if let Some(v) = p.opt_duration_ns("expected_latency")? {
        match scenario {
            Scenario::MultiStream => s.multi_stream_expected_latency_ns = v.max(1),
            _ => s.single_stream_expected_latency_ns = v.max(1),
        }
    }
    if let Some(v) = p.opt_u64("samples_per_query")? {
        if scenario != Scenario::MultiStream {
            // Offline sizes its one query from min_query_count and target_qps; Server and SingleStream send one
            // sample per query. Taking the key anyway would say a query size llmbench does not send.
            return Err(p.invalid(
                "samples_per_query",
                format!(
                    "only MultiStream takes samples_per_query; {} queries have a fixed size",
                    scenario.as_str()
                ),
            ));
        }
        if v == 0 {
            return Err(p.invalid("samples_per_query", "must be at least 1".to_string()));
        }
        s.multi_stream_samples_per_query = v;
    }
    if let Some(v) = p.opt_duration_ns("min_duration")? {
        s.min_duration_ms = v / 1_000_000;
    }
    if let Some(v) = p.opt_duration_ns("max_duration")? {
        s.max_duration_ms = v / 1_000_000;
    }
    for (key, slot) in [
        ("min_query_count", &mut s.min_query_count),
        ("max_query_count", &mut s.max_query_count),
        ("performance_sample_count", &mut s.performance_sample_count),
        ("qsl_rng_seed", &mut s.qsl_rng_seed),
        ("sample_index_rng_seed", &mut s.sample_index_rng_seed),
        ("schedule_rng_seed", &mut s.schedule_rng_seed),
        ("warmup_queries", &mut s.warmup_queries),
    ] {
        if let Some(v) = p.opt_u64(key)? {
            *slot = v;
        }
    }
    if let Some(v) = p.opt_bool("sample_concatenate_permutation")? {
        s.sample_concatenate_permutation = v;
    }
    if let Some(v) = p.opt_u64("max_tokens")? {
        s.max_tokens = u32::try_from(v)
            .ok()
            .filter(|v| *v > 0)
            .ok_or_else(|| p.invalid("max_tokens", format!("must be 1..=2^32-1, found {v}")))?;
    }
    if let Some(v) = p.opt_f64("accuracy_target")? {
        if !(v > 0.0 && v <= 1.0) {
            return Err(p.invalid(
                "accuracy_target",
                format!("a fraction in (0, 1] such as 0.99, found {v}"),
            ));
        }
        s.accuracy_target = v;
    }
    if let Some(node) = p.node("rouge_reference") {
        s.rouge_reference = Some(p.rouge_reference(node)?);
    }
    if let Some(v) = p.opt_str("sut_name")? {
        s.sut_name = v;
    }
    if let Some(v) = p.opt_str("user_conf")? {
        s.user_conf_path = Some(v);
    }
    if let Some(node) = p.node("dataset") {
        s.dataset_path = Some(
            p.sub_str(node, "dataset", "path", &mut warnings)?
                .ok_or_else(|| MlperfError::Invalid {
                    file: file.to_string(),
                    line: Some(node.line),
                    key: "dataset.path".to_string(),
                    problem: "is required when `dataset` is given".to_string(),
                })?,
        );
    }
    if let Some(node) = p.node("server") {
        p.server(node, &mut s.server, &mut warnings)?;
    }

    if let Some(conf) = user_conf {
        let lines = parse_user_conf(conf.file, conf.text)?;
        apply_conf(&mut s, conf.file, ConfKind::User, &lines, &mut warnings)?;
    }

    if options.strict {
        let keys: Vec<String> = warnings
            .iter()
            .filter(|w| matches!(w.kind, WarningKind::UnknownKey | WarningKind::NearMiss))
            .map(|w| match w.line {
                Some(line) => format!("`{}` ({}:{line})", w.key, w.file),
                None => format!("`{}` ({})", w.key, w.file),
            })
            .collect();
        if !keys.is_empty() {
            return Err(MlperfError::UnknownKeys {
                file: file.to_string(),
                keys,
            });
        }
    }
    let near: Vec<Warning> = warnings
        .iter()
        .filter(|w| w.kind == WarningKind::NearMiss)
        .cloned()
        .collect();
    if !options.lenient && !near.is_empty() {
        return Err(MlperfError::Yaml(WorkloadError::NearMisses {
            file: file.to_string(),
            dialect: "mlperf".to_string(),
            keys: near,
        }));
    }
    for w in &warnings {
        tracing::debug!(warning = %w, "mlperf settings warning");
    }
    Ok(ParsedSettings {
        settings: s,
        warnings,
    })
}

/// The profile document being read, for typed lookups with file/line/key errors.
struct Profile<'a> {
    file: &'a str,
    text: &'a str,
    doc: &'a Node,
}

impl Profile<'_> {
    fn node(&self, key: &str) -> Option<&Node> {
        self.doc.get(key).filter(|n| !n.is_null())
    }

    fn line_of(&self, key: &str) -> Option<u32> {
        self.doc
            .entries()
            .and_then(|e| e.iter().find(|(k, _)| k.name == key))
            .map(|(k, _)| k.line)
            .filter(|l| *l > 0)
    }

    fn invalid(&self, key: &str, problem: String) -> MlperfError {
        MlperfError::Invalid {
            file: self.file.to_string(),
            line: self.line_of(key),
            key: key.to_string(),
            problem,
        }
    }

    fn wrong_type(&self, key: &str, expected: &str, node: &Node) -> MlperfError {
        self.invalid(
            key,
            format!("expected {expected}, found {}", node.value.describe()),
        )
    }

    fn required_str(&self, key: &str) -> Result<String, MlperfError> {
        self.opt_str(key)?.ok_or_else(|| MlperfError::Invalid {
            file: self.file.to_string(),
            line: None,
            key: key.to_string(),
            problem: "is required".to_string(),
        })
    }

    fn opt_str(&self, key: &str) -> Result<Option<String>, MlperfError> {
        match self.node(key) {
            None => Ok(None),
            Some(n) => match &n.value {
                Value::Str(s) => Ok(Some(s.clone())),
                _ => Err(self.wrong_type(key, "a string", n)),
            },
        }
    }

    fn opt_bool(&self, key: &str) -> Result<Option<bool>, MlperfError> {
        match self.node(key) {
            None => Ok(None),
            Some(n) => match n.value {
                Value::Bool(b) => Ok(Some(b)),
                _ => Err(self.wrong_type(key, "true or false", n)),
            },
        }
    }

    fn opt_f64(&self, key: &str) -> Result<Option<f64>, MlperfError> {
        match self.node(key) {
            None => Ok(None),
            Some(n) => match n.value {
                Value::Int(i) => Ok(Some(i as f64)),
                Value::Float(f) if f.is_finite() => Ok(Some(f)),
                _ => Err(self.wrong_type(key, "a number", n)),
            },
        }
    }

    /// A non-negative integer. Seeds above `i64::MAX` (LoadGen's official ones are) reach us as lossy floats,
    /// so those are re-read from the line's text.
    fn opt_u64(&self, key: &str) -> Result<Option<u64>, MlperfError> {
        let Some(n) = self.node(key) else {
            return Ok(None);
        };
        match &n.value {
            Value::Int(i) => u64::try_from(*i)
                .map(Some)
                .map_err(|_| self.invalid(key, format!("must not be negative, found {i}"))),
            Value::Str(s) => s
                .trim()
                .parse::<u64>()
                .map(Some)
                .map_err(|_| self.wrong_type(key, "a non-negative integer", n)),
            Value::Float(_) => self
                .raw_scalar(key)
                .and_then(|raw| raw.parse::<u64>().ok())
                .map(Some)
                .ok_or_else(|| self.wrong_type(key, "a non-negative integer", n)),
            _ => Err(self.wrong_type(key, "a non-negative integer", n)),
        }
    }

    /// The scalar text after `key:` on the key's line.
    fn raw_scalar(&self, key: &str) -> Option<String> {
        let line = self.line_of(key)? as usize;
        let text = self.text.lines().nth(line.checked_sub(1)?)?;
        let (_, rest) = text.split_once(':')?;
        let rest = rest.split('#').next()?.trim().trim_matches(['"', '\'']);
        Some(rest.to_string())
    }

    /// A duration: a number of milliseconds (LoadGen's unit) or a humantime string (`10m`, `250ms`). In ns.
    fn opt_duration_ns(&self, key: &str) -> Result<Option<u64>, MlperfError> {
        let Some(n) = self.node(key) else {
            return Ok(None);
        };
        match &n.value {
            Value::Int(ms) if *ms >= 0 => Ok(Some((*ms as u64).saturating_mul(1_000_000))),
            Value::Float(ms) if ms.is_finite() && *ms >= 0.0 => Ok(Some(ms_to_ns(*ms))),
            Value::Str(s) => humantime::parse_duration(s.trim())
                .map(|d| Some(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)))
                .map_err(|e| self.invalid(key, format!("not a duration (`{s}`): {e}"))),
            _ => Err(self.wrong_type(key, "milliseconds or a duration such as `10m`", n)),
        }
    }

    fn rouge_reference(&self, node: &Node) -> Result<[f64; 3], MlperfError> {
        let mut out = [0.0; 3];
        for (slot, name) in out.iter_mut().zip(["rouge1", "rouge2", "rougeL"]) {
            let value = node.get(name).ok_or_else(|| {
                self.invalid(
                    "rouge_reference",
                    format!(
                        "needs `rouge1`, `rouge2` and `rougeL` (0–100 scale); `{name}` is missing"
                    ),
                )
            })?;
            *slot = match value.value {
                Value::Int(i) => i as f64,
                Value::Float(f) => f,
                _ => return Err(self.wrong_type("rouge_reference", "numbers", value)),
            };
        }
        Ok(out)
    }

    /// A string field of a sub-map; unknown fields of the sub-map warn.
    fn sub_str(
        &self,
        node: &Node,
        section: &str,
        field: &str,
        warnings: &mut Vec<Warning>,
    ) -> Result<Option<String>, MlperfError> {
        let entries = node
            .entries()
            .ok_or_else(|| self.wrong_type(section, "a map", node))?;
        for (key, _) in entries {
            if key.name != field {
                warnings.push(self.unknown(section, &key.name, key.line, &[field]));
            }
        }
        match node.get(field) {
            None => Ok(None),
            Some(n) => match &n.value {
                Value::Str(s) => Ok(Some(s.clone())),
                _ => Err(self.wrong_type(&format!("{section}.{field}"), "a string", n)),
            },
        }
    }

    fn unknown(&self, section: &str, key: &str, line: u32, known: &[&str]) -> Warning {
        unknown_key(
            self.file,
            format!("{section}.{key}"),
            key,
            line,
            "not an mlperf setting",
            known,
        )
    }

    fn server(
        &self,
        node: &Node,
        api: &mut Api,
        warnings: &mut Vec<Warning>,
    ) -> Result<(), MlperfError> {
        let entries = node
            .entries()
            .ok_or_else(|| self.wrong_type("server", "a map", node))?;
        for (key, value) in entries {
            let path = format!("server.{}", key.name);
            let text = || match &value.value {
                Value::Str(s) => Ok(s.clone()),
                _ => Err(self.wrong_type(&path, "a string", value)),
            };
            match key.name.as_str() {
                "base_url" => api.base_url = Some(text()?),
                "model_name" | "model" => api.model = Some(text()?),
                "endpoint" => api.endpoint = Some(text()?),
                "api" => {
                    api.kind = match text()?.as_str() {
                        "completion" | "completions" => ApiKind::Completion,
                        "chat" => ApiKind::Chat,
                        other => {
                            return Err(self.invalid(
                                &path,
                                format!("expected `completion` or `chat`, found `{other}`"),
                            ));
                        }
                    }
                }
                "streaming" => {
                    api.streaming = match value.value {
                        Value::Bool(b) => b,
                        _ => return Err(self.wrong_type(&path, "a boolean", value)),
                    }
                }
                "ignore_eos" => {
                    api.ignore_eos = match value.value {
                        Value::Bool(b) => b,
                        _ => return Err(self.wrong_type(&path, "a boolean", value)),
                    }
                }
                _ => warnings.push(self.unknown("server", &key.name, key.line, SERVER_KEYS)),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(yaml: &str, conf: Option<&str>) -> ParsedSettings {
        parse_settings(
            "p.yaml",
            yaml,
            conf.map(|text| UserConf {
                file: "user.conf",
                text,
            }),
            &ParseOptions::default(),
        )
        .unwrap()
    }

    fn parse_err(yaml: &str, conf: &str) -> String {
        let conf = UserConf {
            file: "user.conf",
            text: conf,
        };
        match parse_settings("p.yaml", yaml, Some(conf), &ParseOptions::default()) {
            Ok(_) => panic!("accepted: {conf:?}", conf = conf.text),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn every_loadgen_mode_is_read_by_its_integer_or_name_and_a_fifth_is_refused() {
        const SERVER: &str = "model: llama3_1-8b\nscenario: Server\n";
        // `TestSettings::FromConfig`: 0 SubmissionRun, 1 AccuracyOnly, 2 PerformanceOnly, 3 FindPeakPerformance.
        for (value, mode) in [
            ("0", Mode::SubmissionRun),
            ("1", Mode::AccuracyOnly),
            ("2", Mode::PerformanceOnly),
            ("3", Mode::FindPeakPerformance),
        ] {
            let conf = format!("*.Server.mode = {value}\n");
            assert_eq!(parse(SERVER, Some(&conf)).settings.mode, mode, "{value}");
            let yaml = format!("{SERVER}mode: {}\n", mode.as_str());
            assert_eq!(parse(&yaml, None).settings.mode, mode);
        }
        let e = parse_err(SERVER, "*.Server.mode = 4\n");
        assert!(e.starts_with("user.conf:1: `*.Server.mode`"), "{e}");
        assert!(e.contains("FindPeakPerformance (3)"), "{e}");
    }

    #[test]
    fn loadgen_settings_llmbench_does_not_implement_are_refused_when_on_naming_file_line_and_key() {
        const SERVER: &str = "model: llama3_1-8b\nscenario: Server\n";
        let e = parse_err(SERVER, "# TEST04\n*.Server.performance_issue_unique = 1\n");
        assert!(
            e.starts_with("user.conf:2: `*.Server.performance_issue_unique`: `1` turns on"),
            "{e}"
        );
        assert!(e.contains("TEST04"), "{e}");
        // strtoull(…, 0): hex and a negative number are on too, as LoadGen reads them.
        let e = parse_err(SERVER, "llama3_1-8b.*.performance_issue_same = 0x10\n");
        assert!(
            e.contains("`llama3_1-8b.*.performance_issue_same`: `0x10` turns on"),
            "{e}"
        );
        let e = parse_err(SERVER, "*.Server.coalesce_queries = -1\n");
        assert!(e.contains("coalesce_queries"), "{e}");
        let e = parse_err(SERVER, "*.Server.max_async_queries = 4\n");
        assert!(e.contains("max_async_queries"), "{e}");
        // `infer_token_latencies = (val == 1)`.
        let e = parse_err(SERVER, "*.*.infer_token_latencies = 1\n");
        assert!(e.contains("infer_token_latencies"), "{e}");
    }

    #[test]
    fn loadgen_settings_llmbench_does_not_implement_are_accepted_when_loadgen_reads_them_as_off() {
        // 0, `true` (strtoull reads no digit: 0), 2 for a `== 1` switch, a later more specific line turning it
        // off, and lines for another scenario or model, which LoadGen's lookup never reaches.
        let conf = "\
*.*.performance_issue_unique = 1
llama3_1-8b.Server.performance_issue_unique = 0
*.*.performance_issue_same = true
*.*.infer_token_latencies = 2
*.Offline.coalesce_queries = 1
other-model.*.max_async_queries = 8
*.*.performance_issue_same_index = 3
";
        let parsed = parse("model: llama3_1-8b\nscenario: Server\n", Some(conf));
        assert_eq!(parsed.settings.scenario, Scenario::Server);
    }

    #[test]
    fn strtoull_reads_a_conf_value_as_c_does_with_base_0() {
        assert_eq!(strtoull("12"), 12);
        assert_eq!(strtoull("  7 # x"), 7);
        assert_eq!(strtoull("0x1F"), 31);
        assert_eq!(strtoull("010"), 8);
        assert_eq!(strtoull("09"), 0);
        assert_eq!(strtoull("0x"), 0);
        assert_eq!(strtoull("true"), 0);
        assert_eq!(strtoull("-1"), u64::MAX);
        assert_eq!(strtoull("+3"), 3);
        assert_eq!(strtoull("99999999999999999999999"), u64::MAX);
    }

    #[test]
    fn builtin_model_limits_and_loadgen_defaults_apply() {
        let s = parse("model: llama3_1-8b\nscenario: Server\n", None).settings;
        assert_eq!(s.ttft_latency_ns, 2_000_000_000);
        assert_eq!(s.tpot_latency_ns, 100_000_000);
        assert_eq!(s.min_duration_ms, 600_000);
        assert_eq!(s.min_query_count, 100);
        assert_eq!(s.target_latency_percentile, 0.99);
        assert_eq!(s.performance_sample_count, 13368);
        // LoadGen 6.0.17's mlperf.conf.
        assert_eq!(
            (s.qsl_rng_seed, s.sample_index_rng_seed, s.schedule_rng_seed),
            (
                2085463073848966840,
                2747215439041700203,
                16159082839903944936
            )
        );
        assert!(s.sample_concatenate_permutation);
        assert_eq!(s.max_tokens, 128);
        let i = parse("model: llama2-70b-interactive\nscenario: Server\n", None).settings;
        assert_eq!(
            (i.ttft_latency_ns, i.tpot_latency_ns),
            (450_000_000, 40_000_000)
        );
        let o = parse("model: llama2-70b\nscenario: Offline\n", None).settings;
        assert_eq!(o.min_query_count, 24576);
        assert_eq!(o.max_tokens, 1024);
    }

    #[test]
    fn profile_keys_override_builtins_and_seeds_above_i64_survive() {
        let s = parse(
            "model: llama3_1-8b\nscenario: Server\ntarget_qps: 2.5\nmin_duration: 2m\n\
             ttft_latency: 500\ntpot_latency: 30ms\nschedule_rng_seed: 18209322760996052031\n\
             server: {base_url: 'http://x:8000', model_name: m, api: chat}\ndataset: {path: /d.json}\n",
            None,
        )
        .settings;
        assert_eq!(s.target_qps, 2.5);
        assert_eq!(s.min_duration_ms, 120_000);
        assert_eq!(s.ttft_latency_ns, 500_000_000);
        assert_eq!(s.tpot_latency_ns, 30_000_000);
        assert_eq!(s.schedule_rng_seed, 18209322760996052031);
        assert_eq!(s.server.base_url.as_deref(), Some("http://x:8000"));
        assert_eq!(s.server.kind, ApiKind::Chat);
        assert!(s.server.streaming);
        assert_eq!(s.dataset_path.as_deref(), Some("/d.json"));
    }

    #[test]
    fn user_conf_most_specific_line_wins_then_the_later_line() {
        let conf = "\
# comments and blank lines are skipped

*.*.target_qps = 9
llama3_1-8b.Server.target_qps = 3   # exact beats every wildcard, wherever it stands
*.Server.target_qps = 5
*.Server.min_duration = 1000
*.Server.min_duration = 2000
llama3_1-8b.*.min_query_count = 7
*.*.min_query_count = 8
llama2-70b.Server.max_query_count = 99
*.Offline.max_query_count = 98
";
        let s = parse(
            "model: llama3_1-8b\nscenario: Server\ntarget_qps: 1\nmin_duration: 5\n",
            Some(conf),
        )
        .settings;
        assert_eq!(s.target_qps, 3.0);
        // Same pattern twice: the later line.
        assert_eq!(s.min_duration_ms, 2000);
        // `model.*` beats `*.*`.
        assert_eq!(s.min_query_count, 7);
        // Lines for another model or scenario do not apply.
        assert_eq!(s.max_query_count, 0);
    }

    #[test]
    fn user_conf_cannot_set_the_seeds_loadgen_reads_from_mlperf_conf_only() {
        let conf = "\
*.*.qsl_rng_seed = 1
*.*.schedule_rng_seed = 2
llama3_1-8b.*.sample_concatenate_permutation = 0
*.*.test05 = 1
";
        let parsed = parse("model: llama3_1-8b\nscenario: Server\n", Some(conf));
        let s = parsed.settings;
        assert_eq!(s.qsl_rng_seed, 2085463073848966840);
        assert_eq!(s.schedule_rng_seed, 16159082839903944936);
        // Equal-issue mode is a key user.conf may set (open division).
        assert!(!s.sample_concatenate_permutation);
        let ignored: Vec<(&str, Option<u32>)> = parsed
            .warnings
            .iter()
            .filter(|w| w.kind == WarningKind::Ignored)
            .map(|w| (w.key.as_str(), w.line))
            .collect();
        assert_eq!(
            ignored,
            [
                ("*.*.qsl_rng_seed", Some(1)),
                ("*.*.schedule_rng_seed", Some(2)),
                ("*.*.test05", Some(4))
            ]
        );
        assert!(parsed.warnings[0].message.contains("mlperf.conf only"));
        // The profile (LoadGen's TestSettings fields, set by the harness) still may.
        let p = parse(
            "model: llama3_1-8b\nscenario: Server\nqsl_rng_seed: 1\nsample_concatenate_permutation: false\n",
            None,
        )
        .settings;
        assert_eq!(p.qsl_rng_seed, 1);
        assert!(!p.sample_concatenate_permutation);
    }

    #[test]
    fn multi_stream_takes_mlperf_conf_defaults_and_user_conf_overrides() {
        // mlperf.conf: `*.MultiStream.{target_latency_percentile = 99, samples_per_query = 8,
        // min_duration = 600000, min_query_count = 662}`; test_settings.h: expected latency 8 ms.
        let s = parse("model: llama3_1-8b\nscenario: MultiStream\n", None).settings;
        assert_eq!(s.scenario, Scenario::MultiStream);
        assert_eq!(s.multi_stream_samples_per_query, 8);
        assert_eq!(s.min_query_count, 662);
        assert_eq!(s.min_duration_ms, 600_000);
        assert_eq!(s.target_latency_percentile, 0.99);
        assert_eq!(s.multi_stream_expected_latency_ns, 8_000_000);
        // `MultiStream.target_latency` (ms) is the expected latency; samples_per_query only from MultiStream lines.
        let conf = "*.MultiStream.target_latency = 2000\n*.MultiStream.samples_per_query = 4\n\
                    *.Server.samples_per_query = 99\n";
        let s = parse("model: llama3_1-8b\nscenario: MultiStream\n", Some(conf)).settings;
        assert_eq!(s.multi_stream_expected_latency_ns, 2_000_000_000);
        assert_eq!(s.multi_stream_samples_per_query, 4);
        // Only the MultiStream expected latency moved (LoadGen's default 1 ms stays for SingleStream).
        assert_eq!(s.single_stream_expected_latency_ns, 1_000_000);
        // The profile's `samples_per_query` is refused where queries have a fixed size.
        let err = parse_settings(
            "p.yaml",
            "model: llama3_1-8b\nscenario: Server\nsamples_per_query: 4\n",
            None,
            &ParseOptions::default(),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "p.yaml:3: `samples_per_query`: only MultiStream takes samples_per_query; Server queries have a \
             fixed size"
        );
        let err = parse_settings(
            "p.yaml",
            "model: llama3_1-8b\nscenario: MultiStream\n",
            Some(UserConf {
                file: "user.conf",
                text: "*.MultiStream.samples_per_query = 0\n",
            }),
            &ParseOptions::default(),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "user.conf:1: `*.MultiStream.samples_per_query`: must be at least 1"
        );
    }

    #[test]
    fn user_conf_errors_name_file_line_and_key() {
        let err = parse_settings(
            "p.yaml",
            "model: llama3_1-8b\nscenario: Server\n",
            Some(UserConf {
                file: "user.conf",
                text: "\n*.Server.target_qps = fast\n",
            }),
            &ParseOptions::default(),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "user.conf:2: `*.Server.target_qps`: expected a non-negative number, found `fast`"
        );
        let err = parse_user_conf("user.conf", "a.b = 1\n").unwrap_err();
        assert!(
            err.to_string().starts_with("user.conf:1: `a.b = 1`"),
            "{err}"
        );
    }

    #[test]
    fn unknown_keys_warn_near_misses_fail_unless_lenient_and_strict_rejects_them_all() {
        let yaml = "model: llama3_1-8b\nscenario: Server\ntarget_qsp: 3\nsut_label: x\n";
        let conf = "*.*.bogus_key = 1\n*.*.print_timestamps = 1\n";
        let err = parse_settings(
            "p.yaml",
            yaml,
            Some(UserConf {
                file: "user.conf",
                text: conf,
            }),
            &ParseOptions::default(),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "p.yaml: 1 key(s) the mlperf dialect does not know, each one edit from a key that changes the run: \
             `target_qsp` (line 3): did you mean `target_qps`?; a misspelt key would be ignored and the run would \
             take the default — fix the spelling, or pass --lenient to run with it ignored"
        );
        let lenient = ParseOptions {
            lenient: true,
            ..ParseOptions::default()
        };
        let parsed = parse_settings(
            "p.yaml",
            yaml,
            Some(UserConf {
                file: "user.conf",
                text: conf,
            }),
            &lenient,
        )
        .unwrap();
        let unknown: Vec<_> = parsed
            .warnings
            .iter()
            .filter(|w| w.kind != WarningKind::Ignored)
            .map(|w| (w.key.as_str(), w.line, w.kind))
            .collect();
        assert_eq!(
            unknown,
            vec![
                ("target_qsp", Some(3), WarningKind::NearMiss),
                ("sut_label", Some(4), WarningKind::UnknownKey),
                ("*.*.bogus_key", Some(1), WarningKind::UnknownKey)
            ]
        );
        let err = parse_settings(
            "p.yaml",
            yaml,
            None,
            &ParseOptions {
                strict: true,
                ..ParseOptions::default()
            },
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "p.yaml: strict mode rejects 2 unknown key(s): `target_qsp` (p.yaml:3), `sut_label` (p.yaml:4)"
        );
    }

    #[test]
    fn an_unknown_model_needs_explicit_limits() {
        let err = parse_settings(
            "p.yaml",
            "model: mymodel\nscenario: Server\n",
            None,
            &ParseOptions::default(),
        )
        .unwrap_err();
        assert!(err.to_string().starts_with("p.yaml:1: `model`"), "{err}");
        let s = parse(
            "model: mymodel\nscenario: Server\nttft_latency: 1000\ntpot_latency: 50\n",
            None,
        )
        .settings;
        assert_eq!(s.tpot_latency_ns, 50_000_000);
        let err = parse_settings(
            "p.yaml",
            "model: llama3_1-8b\nscenario: Batch\n",
            None,
            &ParseOptions::default(),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "p.yaml:2: `scenario`: expected Offline, Server, SingleStream or MultiStream, found `Batch`"
        );
    }
}
