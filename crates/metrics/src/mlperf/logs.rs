//! LoadGen's log set beside `mlperf_log_summary.txt`: `mlperf_log_detail.txt` (one `:::MLLOG {json}` line per
//! logged key) and `mlperf_log_accuracy.json` (every accuracy-mode response as hex of its token ids).
//!
//! Both are written after the run from the records and the verdict: nothing is formatted on the request path.
//!
//! **Detail lines** follow `loadgen/logging.h` `AsyncLog::LogDetail`:
//! `:::MLLOG {"key": K, "value": V, "time_ms": MS.NNNNNN, "namespace": "mlperf::logging", "event_type":
//! "POINT_IN_TIME", "metadata": {"is_error": B, "is_warning": B, "file": F, "line_no": N, "pid": P, "tid": T}}`.
//! Values are formatted as LoadGen's `ArgValueTransform` does: integers plain, booleans `true`/`false`, doubles as
//! `ostream << double` (`%g`, 6 significant digits: the header declares no double overload, so the generic
//! template streams them), strings quoted, the loaded set as `[a,b,…]`. `time_ms` is whole ms, a dot and the
//! sub-ms remainder in ns padded to 6 digits. The keys and their order are LoadGen's: the version lines
//! (`version.cc`), the test header (`loadgen.cc` `StartTest`), `LogRequestedTestSettings` and
//! `LogEffectiveSettings` (`test_settings_internal.cc`), the loaded set and generated queries (`loadgen.cc`),
//! then, for a performance run, `PerformanceSummary::LogDetail` (`results.cc`) and `num_errors`.
//!
//! What differs, on purpose: the build keys (`version.cc`) carry llmbench's truthful values (`build_lines`);
//! `file` names the LoadGen source that logs the key but `line_no` is 0, since no LoadGen line ran; `pid` and
//! `tid` are this process's id; strings are JSON-escaped (LoadGen writes them raw, which only matters for quotes
//! and newlines, which its own keys avoid); LoadGen's logger statistics and `get_sut_name_duration_ns` are not
//! written (no LoadGen logger, no SUT object). `power_begin`/`power_end` are written after every pass as LoadGen
//! writes them, for a power analyser to align with. `generated_query_duration` is not written: llmbench's Server
//! schedule does not keep the timestamp after the last arrival that LoadGen reports.
//!
//! **Accuracy log** follows `logging.cc` `AsyncLog::LogAccuracy` with token latencies on: `[`, then per response
//! `\n{ "seq_id" : S, "qsl_idx" : Q, "data" : "HEX", "token_count" : N }` joined by `,`, then `\n]\n`; an empty
//! `[\n]\n` in performance mode, as LoadGen leaves it. `data` is the response's token ids as little-endian
//! int32, upper-case hex (`Bin2Hex`), what the reference SUTs hand `QuerySampleComplete`
//! (`language/llama3.1-8b/SUT_VLLM.py`: `np.array(token_ids, np.int32).tobytes()`) and what the accuracy scripts
//! read with `--dtype int32` (`run_accuracy.sh` of llama3.1-8b and llama2-70b). `token_count` is the number of ids,
//! which TEST06's `sample_len_check` requires.

use std::fmt::Write as _;
use std::path::Path;

use super::MlperfError;
use super::settings::{MlperfSettings, Mode, Scenario};
use super::verdict::{LatencyStats, Verdict, fixed2, offline_samples_per_query, ostream_double};

/// The detail log's file name.
pub const DETAIL_TXT: &str = "mlperf_log_detail.txt";
/// The accuracy log's file name.
pub const ACCURACY_LOG_JSON: &str = "mlperf_log_accuracy.json";

/// One logged value, formatted as LoadGen's `ArgValueTransform` formats its type.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum LogValue {
    Str(String),
    Int(u64),
    Bool(bool),
    Float(f64),
    List(Vec<usize>),
    /// A `std::map<std::string, std::string>`: `{"k":"v",…}`, no spaces, as LoadGen's JSON writer puts it.
    Map(Vec<(String, String)>),
}

impl LogValue {
    fn render(&self, out: &mut String) {
        match self {
            LogValue::Str(s) => {
                // serde_json's string escaping: a quote or newline in a message cannot break the line's JSON.
                out.push_str(&serde_json::Value::String(s.clone()).to_string());
            }
            LogValue::Int(v) => {
                let _ = write!(out, "{v}");
            }
            LogValue::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            LogValue::Float(f) => out.push_str(&json_double(*f)),
            LogValue::Map(entries) => {
                out.push('{');
                for (i, (k, v)) in entries.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    LogValue::Str(k.clone()).render(out);
                    out.push(':');
                    LogValue::Str(v.clone()).render(out);
                }
                out.push('}');
            }
            LogValue::List(items) => {
                out.push('[');
                let joined: Vec<String> = items.iter().map(ToString::to_string).collect();
                out.push_str(&joined.join(","));
                out.push(']');
            }
        }
    }
}

/// `ostream << double`, except that a non-finite value (a division by a zero duration) becomes `null`: LoadGen
/// would print `inf`/`nan`, which no JSON reader takes, and the checker would then refuse the whole file.
fn json_double(x: f64) -> String {
    if x.is_finite() {
        ostream_double(x)
    } else {
        "null".to_string()
    }
}

/// What the detail log needs besides the settings and the verdict.
#[derive(Debug, Clone)]
pub struct DetailRun<'a> {
    /// `test_datetime`, RFC 3339 in UTC to the second, as LoadGen writes it.
    pub test_datetime: String,
    /// The dataset's size (`qsl_reported_total_count`).
    pub dataset_len: u64,
    /// What the test logged after its settings, in order: each pass, and the lines between passes.
    pub events: Vec<DetailEvent<'a>>,
    /// The process id written as `pid` and `tid`.
    pub pid: u32,
    /// Errors of the run beside its verdict's (an accuracy pass's missing answers), logged after the passes.
    pub errors: &'a [String],
}

/// One step of the test as the detail log shows it.
#[derive(Debug, Clone)]
pub enum DetailEvent<'a> {
    /// A `generic_message` (`Starting performance mode`, a search step's bounds).
    Message(String),
    /// An `error_runtime` line between passes (a peak search whose lower bound failed).
    Error(String),
    /// `LoadSamplesToRam`: the loaded set, in load order.
    Loaded(&'a [usize]),
    /// One `IssueQueries` call.
    Pass(DetailPass),
}

/// One `IssueQueries` call: the queries it generated and when it ran.
#[derive(Debug, Clone)]
pub struct DetailPass {
    pub generated_queries: u64,
    pub samples_per_query: u64,
    /// The pass's start and end on the log's clock (ns from its origin, the run's start).
    pub start_ns: u64,
    pub end_ns: u64,
    /// The wall-clock instant (Unix ns) of `start_ns`: LoadGen's `start_for_power`, taken as issuing begins.
    pub start_unix_ns: u64,
}

/// The `generic_message` a pass of `mode` starts with (`RunAccuracyMode`, `RunPerformanceMode`,
/// `FindPeakPerformanceMode`).
pub fn starting_message(mode: Mode) -> String {
    match mode {
        Mode::AccuracyOnly => "Starting accuracy mode",
        Mode::FindPeakPerformance => "Starting FindPeakPerformance mode",
        Mode::PerformanceOnly | Mode::SubmissionRun => "Starting performance mode",
    }
    .to_owned()
}

/// Builds `mlperf_log_detail.txt`. `verdict` is `None` in accuracy mode, where LoadGen logs no results.
pub fn detail_log(
    settings: &MlperfSettings,
    verdict: Option<&Verdict>,
    run: &DetailRun<'_>,
) -> String {
    let mut log = Detail {
        out: String::new(),
        pid: run.pid,
        time_ns: 0,
    };
    let s = settings;
    for (key, value) in build_lines() {
        log.put(key, value, "version.cc");
    }
    log.put(
        "test_datetime",
        LogValue::Str(run.test_datetime.clone()),
        "loadgen.cc",
    );
    log.put("sut_name", LogValue::Str(s.sut_name.clone()), "loadgen.cc");
    log.put(
        "qsl_name",
        LogValue::Str("llmbench dataset".to_string()),
        "loadgen.cc",
    );
    log.put(
        "qsl_reported_total_count",
        LogValue::Int(run.dataset_len),
        "loadgen.cc",
    );
    // The QSL reports its own size; the override only changes the effective count below.
    log.put(
        "qsl_reported_performance_count",
        LogValue::Int(run.dataset_len),
        "loadgen.cc",
    );
    for (key, value) in requested_settings(s) {
        log.put(&key, value, "test_settings_internal.cc");
    }
    for (key, value) in effective_settings(s, run.dataset_len) {
        log.put(&key, value, "test_settings_internal.cc");
    }
    // Lines before the first pass are stamped with its start.
    log.time_ns = run
        .events
        .iter()
        .find_map(|e| match e {
            DetailEvent::Pass(pass) => Some(pass.start_ns),
            _ => None,
        })
        .unwrap_or(0);
    for event in &run.events {
        match event {
            DetailEvent::Message(message) => log.put(
                "generic_message",
                LogValue::Str(message.clone()),
                "loadgen.cc",
            ),
            DetailEvent::Error(message) => log.put_flagged(
                "error_runtime",
                LogValue::Str(message.clone()),
                "loadgen.cc",
                true,
                false,
            ),
            DetailEvent::Loaded(loaded) => log.put(
                "loaded_qsl_set",
                LogValue::List(loaded.to_vec()),
                "loadgen.cc",
            ),
            DetailEvent::Pass(pass) => {
                log.time_ns = pass.start_ns;
                log.put(
                    "generated_query_count",
                    LogValue::Int(pass.generated_queries),
                    "loadgen.cc",
                );
                log.put(
                    "generated_samples_per_query",
                    LogValue::Int(pass.samples_per_query),
                    "loadgen.cc",
                );
                log.time_ns = pass.end_ns;
                // `IssueQueries`, after every pass: the SUT's active interval on the wall clock, from
                // `start_for_power` for as long as the pass took to its last completion, for the power analyser
                // to align its samples with.
                let end_unix_ns = pass
                    .start_unix_ns
                    .saturating_add(pass.end_ns.saturating_sub(pass.start_ns));
                for (key, unix_ns) in [
                    ("power_begin", pass.start_unix_ns),
                    ("power_end", end_unix_ns),
                ] {
                    log.put(
                        key,
                        LogValue::Str(date_time_for_power(unix_ns)),
                        "loadgen.cc",
                    );
                }
            }
        }
    }
    let verdict_errors: &[String] = verdict.map_or(&[], |v| &v.errors);
    let errors: Vec<&String> = run.errors.iter().chain(verdict_errors).collect();
    for error in &errors {
        log.put_flagged(
            "error_runtime",
            LogValue::Str((*error).clone()),
            "loadgen.cc",
            true,
            false,
        );
    }
    if let Some(v) = verdict {
        for message in &v.warnings {
            log.put_flagged(
                "warning_generic_message",
                LogValue::Str(message.clone()),
                "loadgen.cc",
                false,
                true,
            );
        }
        for (key, value) in result_lines(v) {
            log.put(&key, value, "results.cc");
        }
        log.put(
            "num_errors",
            // LoadGen's logger counts every error line, those between passes too.
            LogValue::Int(
                (errors.len()
                    + run
                        .events
                        .iter()
                        .filter(|e| matches!(e, DetailEvent::Error(_)))
                        .count()) as u64,
            ),
            "results.cc",
        );
    }
    log.out
}

/// `LogLoadgenVersion`'s keys with llmbench's truthful values. `loadgen_version` is LoadGen's `VERSION @ REV`
/// shape naming llmbench, its version and the LoadGen release whose rules it follows. llmbench is built without a
/// build script, so it knows no build date or git state of its own: those keys say `NA`, the value LoadGen's
/// `version_generator.py` writes when it is built outside git (and a `loadgen_git_status_message` of `NA` is, for
/// LoadGen and the submission checker, not an uncommitted-changes error). `loadgen_file_sha1` lists, as LoadGen
/// lists its sources, the SHA-1 of each source file of llmbench's LoadGen core as compiled into this binary.
fn build_lines() -> Vec<(&'static str, LogValue)> {
    let na = || LogValue::Str("NA".to_owned());
    vec![
        (
            "loadgen_version",
            LogValue::Str(format!(
                "llmbench {} (LoadGen {LOADGEN_VERSION} rules; not LoadGen) @ NA",
                env!("CARGO_PKG_VERSION")
            )),
        ),
        ("loadgen_build_date_local", na()),
        ("loadgen_build_date_utc", na()),
        ("loadgen_git_commit_date", na()),
        ("loadgen_git_log_message", na()),
        ("loadgen_git_status_message", na()),
        ("loadgen_file_sha1", LogValue::Map(source_sha1s())),
    ]
}

/// The LoadGen release whose rules llmbench follows (`loadgen/VERSION.txt`).
pub const LOADGEN_VERSION: &str = "6.0.17";

/// The LoadGen core's sources as this binary holds them, by path from the repository root.
const SOURCES: [(&str, &str); 10] = [
    (
        "/crates/metrics/src/mlperf/early_stopping.rs",
        include_str!("early_stopping.rs"),
    ),
    (
        "/crates/metrics/src/mlperf/logs.rs",
        include_str!("logs.rs"),
    ),
    ("/crates/metrics/src/mlperf/mod.rs", include_str!("mod.rs")),
    (
        "/crates/metrics/src/mlperf/peak.rs",
        include_str!("peak.rs"),
    ),
    ("/crates/metrics/src/mlperf/rng.rs", include_str!("rng.rs")),
    (
        "/crates/metrics/src/mlperf/rouge.rs",
        include_str!("rouge.rs"),
    ),
    (
        "/crates/metrics/src/mlperf/schedule.rs",
        include_str!("schedule.rs"),
    ),
    (
        "/crates/metrics/src/mlperf/settings.rs",
        include_str!("settings.rs"),
    ),
    (
        "/crates/metrics/src/mlperf/trace.rs",
        include_str!("trace.rs"),
    ),
    (
        "/crates/metrics/src/mlperf/verdict.rs",
        include_str!("verdict.rs"),
    ),
];

/// `path → sha1 hex` of [`SOURCES`], sorted by path as LoadGen's `std::map` is.
fn source_sha1s() -> Vec<(String, String)> {
    use sha1::Digest as _;
    let mut files: Vec<(String, String)> = SOURCES
        .iter()
        .map(|(path, text)| {
            let digest = sha1::Sha1::digest(text.as_bytes());
            let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
            ((*path).to_owned(), hex)
        })
        .collect();
    files.sort();
    files
}

/// LoadGen's `DateTimeStringForPower`: `%m-%d-%Y %T` in UTC, a dot and the whole milliseconds in 3 digits.
fn date_time_for_power(unix_ns: u64) -> String {
    let secs = unix_ns / 1_000_000_000;
    let ms = (unix_ns % 1_000_000_000) / 1_000_000;
    let ((year, month, day), (hour, minute, second)) =
        llmbench_core::calendar::civil_from_unix(i64::try_from(secs).unwrap_or(i64::MAX));
    format!("{month:02}-{day:02}-{year:04} {hour:02}:{minute:02}:{second:02}.{ms:03}")
}

/// Writes [`detail_log`] to `path`.
pub fn write_detail_log(
    path: &Path,
    settings: &MlperfSettings,
    verdict: Option<&Verdict>,
    run: &DetailRun<'_>,
) -> Result<(), MlperfError> {
    std::fs::write(path, detail_log(settings, verdict, run)).map_err(|source| MlperfError::Write {
        path: path.display().to_string(),
        source,
    })
}

struct Detail {
    out: String,
    pid: u32,
    time_ns: u64,
}

impl Detail {
    fn put(&mut self, key: &str, value: LogValue, file: &str) {
        self.put_flagged(key, value, file, false, false);
    }

    fn put_flagged(&mut self, key: &str, value: LogValue, file: &str, error: bool, warning: bool) {
        let out = &mut self.out;
        out.push_str(":::MLLOG {\"key\": ");
        LogValue::Str(key.to_string()).render(out);
        out.push_str(", \"value\": ");
        value.render(out);
        let _ = writeln!(
            out,
            ", \"time_ms\": {}.{:06}, \"namespace\": \"mlperf::logging\", \"event_type\": \"POINT_IN_TIME\", \
             \"metadata\": {{\"is_error\": {error}, \"is_warning\": {warning}, \"file\": \"{file}\", \
             \"line_no\": 0, \"pid\": {pid}, \"tid\": {pid}}}}}",
            self.time_ns / 1_000_000,
            self.time_ns % 1_000_000,
            pid = self.pid,
        );
    }
}

fn effective_performance_sample_count(s: &MlperfSettings, dataset_len: u64) -> u64 {
    match s.performance_sample_count {
        0 => dataset_len,
        n => n,
    }
}

/// `LogRequestedTestSettings`: the TestSettings after the conf files, before LoadGen derives anything.
fn requested_settings(s: &MlperfSettings) -> Vec<(String, LogValue)> {
    use LogValue::{Bool, Float, Int, Str};
    let mut v: Vec<(&str, LogValue)> = vec![
        ("requested_scenario", Str(s.scenario.as_str().to_string())),
        ("requested_test_mode", Str(s.mode.as_str().to_string())),
    ];
    match s.scenario {
        Scenario::SingleStream => {
            v.push((
                "requested_single_stream_expected_latency_ns",
                Int(s.single_stream_expected_latency_ns),
            ));
            v.push((
                "requested_single_stream_target_latency_percentile",
                Float(s.target_latency_percentile),
            ));
        }
        Scenario::MultiStream => {
            v.push((
                "requested_multi_stream_expected_latency_ns",
                Int(s.multi_stream_expected_latency_ns),
            ));
            v.push((
                "requested_multi_stream_target_latency_percentile",
                Float(s.target_latency_percentile),
            ));
            v.push((
                "requested_multi_stream_samples_per_query",
                Int(s.multi_stream_samples_per_query),
            ));
        }
        Scenario::Server => {
            v.push(("requested_server_target_qps", Float(s.target_qps)));
            // llmbench judges Server runs by TTFT/TPOT only; mlperf.conf sets target_latency = 0 for every LLM.
            v.push(("requested_server_target_latency_ns", Int(0)));
            v.push((
                "requested_server_target_latency_percentile",
                Float(s.target_latency_percentile),
            ));
            v.push(("requested_server_coalesce_queries", Bool(false)));
            v.push((
                "requested_server_find_peak_qps_decimals_of_precision",
                Int(1),
            ));
            v.push(("requested_server_find_peak_qps_boundary_step_size", Int(1)));
            v.push(("requested_server_max_async_queries", Int(0)));
            v.push(("requested_server_num_issue_query_threads", Int(0)));
        }
        Scenario::Offline => v.push(("requested_offline_expected_qps", Float(s.target_qps))),
    }
    v.extend([
        ("requested_min_duration_ms", Int(s.min_duration_ms)),
        ("requested_max_duration_ms", Int(s.max_duration_ms)),
        ("requested_min_query_count", Int(s.min_query_count)),
        ("requested_max_query_count", Int(s.max_query_count)),
        ("requested_qsl_rng_seed", Int(s.qsl_rng_seed)),
        (
            "requested_sample_index_rng_seed",
            Int(s.sample_index_rng_seed),
        ),
        ("requested_schedule_rng_seed", Int(s.schedule_rng_seed)),
        ("requested_accuracy_log_rng_seed", Int(0)),
        ("requested_accuracy_log_probability", Int(0)),
        ("requested_accuracy_log_sampling_target", Int(0)),
        ("requested_print_timestamps", Bool(false)),
        ("requested_performance_issue_unique", Bool(false)),
        ("requested_performance_issue_same", Bool(false)),
        ("requested_performance_issue_same_index", Int(0)),
        (
            "requested_performance_sample_count_override",
            Int(s.performance_sample_count),
        ),
        ("requested_accuracy_sample_count_override", Int(0)),
        // llmbench draws samples without LoadGen's equal-issue mode, whatever mlperf.conf asks.
        (
            "requested_sample_concatenate_permutation",
            Bool(s.sample_concatenate_permutation),
        ),
        ("requested_use_token_latencies", Bool(true)),
    ]);
    if s.scenario != Scenario::Offline {
        v.push(("requested_server_ttft_latency", Int(s.ttft_latency_ns)));
        v.push(("requested_server_tpot_latency", Int(s.tpot_latency_ns)));
    }
    v.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

/// `LogEffectiveSettings`: what `TestSettingsInternal` derives (Offline coalesces into one query of every
/// sample, `min_query_count` 1 and no target duration; the stream scenarios' target QPS is 1/expected latency).
fn effective_settings(s: &MlperfSettings, dataset_len: u64) -> Vec<(String, LogValue)> {
    use LogValue::{Bool, Float, Int, Str};
    let samples_per_query = match s.scenario {
        Scenario::Offline => offline_samples_per_query(s),
        Scenario::MultiStream => s.multi_stream_samples_per_query,
        Scenario::Server | Scenario::SingleStream => 1,
    };
    let target_qps = match s.scenario {
        Scenario::SingleStream => 1e9 / s.single_stream_expected_latency_ns.max(1) as f64,
        Scenario::MultiStream => 1e9 / s.multi_stream_expected_latency_ns.max(1) as f64,
        Scenario::Server | Scenario::Offline => s.target_qps,
    };
    let percentile = match s.scenario {
        Scenario::Offline => 0.99,
        _ => s.target_latency_percentile,
    };
    let max_async_queries = match s.scenario {
        Scenario::Server => 0,
        _ => 1,
    };
    let (min_query_count, target_duration_ms) = match s.scenario {
        Scenario::Offline => (1, 0),
        _ => (s.min_query_count, s.min_duration_ms),
    };
    let v: Vec<(&str, LogValue)> = vec![
        ("effective_scenario", Str(s.scenario.as_str().to_string())),
        ("effective_test_mode", Str(s.mode.as_str().to_string())),
        ("effective_samples_per_query", Int(samples_per_query)),
        ("effective_target_qps", Float(target_qps)),
        ("effective_target_latency_ns", Int(0)),
        ("effective_target_latency_percentile", Float(percentile)),
        ("effective_max_async_queries", Int(max_async_queries)),
        ("effective_target_duration_ms", Int(target_duration_ms)),
        ("effective_min_duration_ms", Int(s.min_duration_ms)),
        ("effective_max_duration_ms", Int(s.max_duration_ms)),
        ("effective_min_query_count", Int(min_query_count)),
        ("effective_max_query_count", Int(s.max_query_count)),
        (
            "effective_min_sample_count",
            Int(min_query_count.saturating_mul(samples_per_query)),
        ),
        ("effective_qsl_rng_seed", Int(s.qsl_rng_seed)),
        (
            "effective_sample_index_rng_seed",
            Int(s.sample_index_rng_seed),
        ),
        ("effective_schedule_rng_seed", Int(s.schedule_rng_seed)),
        ("effective_accuracy_log_rng_seed", Int(0)),
        ("effective_accuracy_log_probability", Int(0)),
        ("effective_accuracy_log_sampling_target", Int(0)),
        ("effective_print_timestamps", Bool(false)),
        ("effective_performance_issue_unique", Bool(false)),
        ("effective_performance_issue_same", Bool(false)),
        ("effective_performance_issue_same_index", Int(0)),
        (
            "effective_performance_sample_count",
            Int(effective_performance_sample_count(s, dataset_len)),
        ),
        ("effective_accuracy_sample_count", Int(dataset_len)),
        (
            "effective_sample_concatenate_permutation",
            Bool(s.sample_concatenate_permutation),
        ),
    ];
    v.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

/// LoadGen's `DoubleToString(p · 100)`: `50.00`, `99.90`.
fn pct(p: f64) -> String {
    fixed2(p * 100.0)
}

/// `PerformanceSummary::LogDetail` with `use_token_latencies` on, in its order.
fn result_lines(v: &Verdict) -> Vec<(String, LogValue)> {
    use LogValue::{Bool, Float, Int, Str};
    let s = &v.settings;
    let mut out: Vec<(String, LogValue)> = Vec::new();
    let mut put = |key: &str, value: LogValue| out.push((key.to_string(), value));
    put(
        "result_validity",
        Str(if v.valid { "VALID" } else { "INVALID" }.to_string()),
    );
    if let Some(met) = v.checks.performance_constraints {
        put("result_perf_constraints_met", Bool(met));
    }
    put("result_min_duration_met", Bool(v.checks.min_duration));
    put("result_min_queries_met", Bool(v.checks.min_queries));
    put("early_stopping_met", Bool(v.checks.early_stopping));
    // A failed request is llmbench's own reason (LoadGen cannot have one): it shows as an error line instead.
    if !v.loadgen_valid() {
        // LoadGen joins the recommendations with a space each and turns newlines into spaces.
        let mut reason = String::new();
        for r in &v.recommendations {
            if r.starts_with("The test exited early") {
                reason.push_str("The test exited early, before enough queries were issued.");
            } else {
                reason.push_str(r);
                reason.push(' ');
            }
        }
        put("result_invalid_reason", Str(reason.replace('\n', " ")));
    }
    if s.scenario != Scenario::Offline {
        let message = |e: &Option<super::EarlyStopping>| {
            e.as_ref()
                .map_or(String::new(), |e| e.message.replace('\n', " "))
        };
        put(
            "early_stopping_ttft_result",
            Str(message(&v.ttft_early_stopping)),
        );
        put(
            "early_stopping_tpot_result",
            Str(message(&v.tpot_early_stopping)),
        );
    } else {
        put("early_stopping_ttft_result", Str(String::new()));
        put("early_stopping_tpot_result", Str(String::new()));
    }
    put("result_query_count", Int(v.queries_issued));
    let latency = v.latency.clone().unwrap_or_else(empty_stats);
    if s.scenario == Scenario::Server {
        // Latencies over `target_latency + 1` ns; LLM runs have target_latency 0, so every completed sample.
        put(
            "result_overlatency_query_count",
            Int(v.latency.as_ref().map_or(0, |l| l.count)),
        );
    }
    let samples = v.sample_count as f64;
    match s.scenario {
        Scenario::SingleStream => {
            put(
                "result_qps_with_loadgen_overhead",
                Float((samples - 1.0) / v.final_query_issued_time),
            );
            put(
                "result_qps_without_loadgen_overhead",
                Float(1.0 / (latency.mean as f64 / 1e9)),
            );
            put(
                "early_stopping_latency_ss",
                Int(v.early_stopping_latency_ss.unwrap_or(0)),
            );
            put(
                "early_stopping_latency_ms",
                Int(v.early_stopping_latency_ms.unwrap_or(0)),
            );
        }
        Scenario::MultiStream => {
            let q = v.query_latency.clone().unwrap_or_else(empty_stats);
            put("result_min_query_latency_ns", Int(q.min));
            put("result_max_query_latency_ns", Int(q.max));
            put("result_mean_query_latency_ns", Int(q.mean));
            for (p, value) in &q.percentiles {
                put(
                    &format!("result_{}_percentile_per_query_latency_ns", pct(*p)),
                    Int(*value),
                );
            }
            put(
                "early_stopping_latency_ms",
                Int(v.early_stopping_latency_ms.unwrap_or(0)),
            );
        }
        Scenario::Server => {
            put(
                "result_scheduled_samples_per_sec",
                Float(v.scheduled_samples_per_second.unwrap_or(0.0)),
            );
            put(
                "result_completed_samples_per_sec",
                Float(v.completed_samples_per_second.unwrap_or(0.0)),
            );
        }
        Scenario::Offline => put(
            "result_samples_per_second",
            Float(v.samples_per_second.unwrap_or(0.0)),
        ),
    }
    put("result_min_latency_ns", Int(latency.min));
    put("result_max_latency_ns", Int(latency.max));
    put("result_mean_latency_ns", Int(latency.mean));
    for (p, value) in &latency.percentiles {
        put(
            &format!("result_{}_percentile_latency_ns", pct(*p)),
            Int(*value),
        );
    }
    let tokens = v.token_count as f64;
    if s.scenario == Scenario::Offline {
        put("result_tokens_per_second", Float(tokens / v.max_latency));
    } else {
        let ttft = v.first_token_latency.clone().unwrap_or_else(empty_stats);
        put("result_first_token_min_latency_ns", Int(ttft.min));
        put("result_first_token_max_latency_ns", Int(ttft.max));
        put("result_first_token_mean_latency_ns", Int(ttft.mean));
        for (p, value) in &ttft.percentiles {
            put(
                &format!("result_first_token_{}_percentile_latency_ns", pct(*p)),
                Int(*value),
            );
        }
        put(
            "result_token_throughput_with_loadgen_overhead",
            Float(tokens / v.final_query_issued_time),
        );
        // LoadGen divides by the mean latency in ns, not s (`results.cc`: `sample_latency_mean * sample_count`),
        // so its "token throughput" is 10⁹ times too small; written as LoadGen writes it.
        put(
            "result_token_throughput",
            Float(tokens / (latency.mean as f64 * samples)),
        );
        let tpot = v.time_per_output_token.clone().unwrap_or_else(empty_stats);
        for (p, value) in &tpot.percentiles {
            put(
                &format!("result_time_per_output_token_{}_percentile_ns", pct(*p)),
                Int(*value),
            );
        }
        put("result_time_to_output_token_min", Int(tpot.min));
        put("result_time_to_output_token_max", Int(tpot.max));
        put("result_time_to_output_token_mean", Int(tpot.mean));
        put(
            "result_completed_tokens_per_second",
            Float(tokens / v.final_query_all_samples_done_time),
        );
    }
    out
}

fn empty_stats() -> LatencyStats {
    LatencyStats {
        count: 0,
        min: 0,
        max: 0,
        mean: 0,
        percentiles: [0.50, 0.90, 0.95, 0.97, 0.99, 0.999]
            .iter()
            .map(|p| (*p, 0))
            .collect(),
        target: 0,
    }
}

/// One response of an accuracy run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccuracyEntry {
    /// The request's sequence id (LoadGen's `seq_id`: issue order across the run).
    pub seq_id: u64,
    /// The dataset index it carried.
    pub qsl_idx: usize,
    /// The generated text's token ids.
    pub token_ids: Vec<u32>,
}

/// `mlperf_log_accuracy.json`: `entries` in the order given (LoadGen writes them as responses complete).
pub(crate) fn accuracy_log(entries: &[AccuracyEntry]) -> String {
    let mut out = String::from("[");
    for (i, entry) in entries.iter().enumerate() {
        out.push_str(if i == 0 { "\n{ " } else { ",\n{ " });
        let _ = write!(
            out,
            "\"seq_id\" : {}, \"qsl_idx\" : {}, \"data\" : \"",
            entry.seq_id, entry.qsl_idx
        );
        for id in &entry.token_ids {
            // int32 little-endian: token ids fit (vocabularies stay far below 2³¹).
            for byte in (*id as i32).to_le_bytes() {
                let _ = write!(out, "{byte:02X}");
            }
        }
        let _ = write!(out, "\", \"token_count\" : {} }}", entry.token_ids.len());
    }
    out.push_str("\n]\n");
    out
}

/// Writes [`accuracy_log`] to `path`.
pub fn write_accuracy_log(path: &Path, entries: &[AccuracyEntry]) -> Result<(), MlperfError> {
    std::fs::write(path, accuracy_log(entries)).map_err(|source| MlperfError::Write {
        path: path.display().to_string(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mlperf::settings::parse_settings;
    use crate::mlperf::{RunTimes, evaluate};
    use llmbench_model::record::RequestRecord;
    use llmbench_workload::workload::ParseOptions;

    const MS: u64 = 1_000_000;

    fn settings(yaml: &str) -> MlperfSettings {
        parse_settings("p.yaml", yaml, None, &ParseOptions::default())
            .unwrap()
            .settings
    }

    /// A streamed request of stage 0 scheduled and sent at `at_ms`, first token `ttft_ms` later, ending `e2e_ms`
    /// after it: the verdict tests' query.
    fn query(id: u64, at_ms: u64, ttft_ms: u64, e2e_ms: u64, tokens: u32) -> RequestRecord {
        crate::mlperf::verdict::tests::query(id, 0, at_ms, ttft_ms, e2e_ms, tokens)
    }

    fn run_of<'a>(loaded: &'a [usize], samples_per_query: u64, queries: u64) -> DetailRun<'a> {
        DetailRun {
            test_datetime: "2026-11-25T02:41:26Z".to_string(),
            dataset_len: 5,
            events: vec![
                DetailEvent::Message(starting_message(Mode::PerformanceOnly)),
                DetailEvent::Loaded(loaded),
                DetailEvent::Pass(DetailPass {
                    generated_queries: queries,
                    samples_per_query,
                    start_ns: 7_090,
                    end_ns: 920_503_448_925,
                    // 2026-11-25T02:41:26.123456789Z.
                    start_unix_ns: 1_795_574_486_123_456_789,
                }),
            ],
            pid: 42,
            errors: &[],
        }
    }

    /// `tools/submission/log_parser.py` `MLPerfLog.__init__`, ported: the first line must start with the
    /// `:::MLLOG` marker; every line that starts with it (after `rstrip`) is `json.loads` of the rest, and a line
    /// that does not parse is an error (strict mode, the checker's default). `get` is `__getitem__`: the first
    /// message with the key.
    struct MlperfLog {
        messages: Vec<serde_json::Value>,
    }

    impl MlperfLog {
        fn parse(text: &str) -> Result<Self, String> {
            const MARKER: &str = ":::MLLOG";
            let mut messages = Vec::new();
            for (i, line) in text.lines().enumerate() {
                let line = line.trim_end();
                if i == 0 && !line.starts_with(MARKER) {
                    return Err(format!("Marker not found in first line: {line}"));
                }
                if let Some(json) = line.strip_prefix(MARKER) {
                    messages.push(
                        serde_json::from_str(json)
                            .map_err(|_| format!("Encountered invalid line: {line}"))?,
                    );
                }
            }
            Ok(MlperfLog { messages })
        }

        fn get(&self, key: &str) -> Option<&serde_json::Value> {
            self.messages
                .iter()
                .find(|m| m["key"] == key)
                .map(|m| &m["value"])
        }

        /// `num_errors()`: the `num_errors` key when present, else the messages flagged `is_error`.
        fn num_errors(&self) -> u64 {
            self.get("num_errors")
                .and_then(|v| v.as_u64())
                .unwrap_or_else(|| {
                    self.messages
                        .iter()
                        .filter(|m| m["metadata"]["is_error"] == true)
                        .count() as u64
                })
        }
    }

    /// `(key, value as written)` of every line, in order.
    fn raw_pairs(text: &str) -> Vec<(String, String)> {
        text.lines()
            .map(|line| {
                let key_start = line.find("\"key\": \"").unwrap() + 8;
                let key_end = key_start + line[key_start..].find('"').unwrap();
                let value_start = line.find("\"value\": ").unwrap() + 9;
                let value_end = line.find(", \"time_ms\": ").unwrap();
                (
                    line[key_start..key_end].to_string(),
                    line[value_start..value_end].to_string(),
                )
            })
            .collect()
    }

    #[test]
    fn a_detail_line_is_formatted_as_loadgen_writes_it() {
        // The time as LoadGen prints it: 920503448925 ns → 920503 ms "." 448925; 7090 ns → 0.007090. A double
        // goes through `ostream <<` (6 significant digits): 83.900612 → 83.9006.
        let mut d = Detail {
            out: String::new(),
            pid: 42,
            time_ns: 920_503_448_925,
        };
        d.put(
            "result_scheduled_samples_per_sec",
            LogValue::Float(83.900_612),
            "results.cc",
        );
        d.time_ns = 7_090;
        d.put_flagged(
            "error_runtime",
            LogValue::Str("a \"b\"".into()),
            "loadgen.cc",
            true,
            false,
        );
        d.put(
            "loaded_qsl_set",
            LogValue::List(vec![3, 1, 2]),
            "loadgen.cc",
        );
        d.put(
            "requested_print_timestamps",
            LogValue::Bool(false),
            "test_settings_internal.cc",
        );
        assert_eq!(
            d.out,
            ":::MLLOG {\"key\": \"result_scheduled_samples_per_sec\", \"value\": 83.9006, \"time_ms\": \
             920503.448925, \"namespace\": \"mlperf::logging\", \"event_type\": \"POINT_IN_TIME\", \"metadata\": \
             {\"is_error\": false, \"is_warning\": false, \"file\": \"results.cc\", \"line_no\": 0, \"pid\": 42, \
             \"tid\": 42}}\n\
             :::MLLOG {\"key\": \"error_runtime\", \"value\": \"a \\\"b\\\"\", \"time_ms\": 0.007090, \"namespace\": \
             \"mlperf::logging\", \"event_type\": \"POINT_IN_TIME\", \"metadata\": {\"is_error\": true, \
             \"is_warning\": false, \"file\": \"loadgen.cc\", \"line_no\": 0, \"pid\": 42, \"tid\": 42}}\n\
             :::MLLOG {\"key\": \"loaded_qsl_set\", \"value\": [3,1,2], \"time_ms\": 0.007090, \"namespace\": \
             \"mlperf::logging\", \"event_type\": \"POINT_IN_TIME\", \"metadata\": {\"is_error\": false, \
             \"is_warning\": false, \"file\": \"loadgen.cc\", \"line_no\": 0, \"pid\": 42, \"tid\": 42}}\n\
             :::MLLOG {\"key\": \"requested_print_timestamps\", \"value\": false, \"time_ms\": 0.007090, \
             \"namespace\": \"mlperf::logging\", \"event_type\": \"POINT_IN_TIME\", \"metadata\": {\"is_error\": \
             false, \"is_warning\": false, \"file\": \"test_settings_internal.cc\", \"line_no\": 0, \"pid\": 42, \
             \"tid\": 42}}\n"
        );
    }

    #[test]
    fn a_small_server_run_logs_loadgen_result_keys_with_hand_worked_values() {
        // 3 queries scheduled (and sent) at 0, 1, 2 s; each first token after 100 ms, done after 600 ms, 11 tokens:
        // latency 600 ms, TTFT 100 ms, TPOT (600 − 100)/10 = 50 ms, 33 tokens.
        // Scheduled samples/s (3 − 1)/2 s = 1; completed (3 − 1)/2.6 s = 0.769231 (6 digits); tokens/s as completed
        // 33/2.6 = 12.6923; with loadgen overhead 33/2 s (last issue) = 16.5; LoadGen's "token throughput"
        // 33/(600000000 ns · 3) = 1.83333e-08. Early stopping, TPOT: 0 over the limit, h(0) = 459 > 3 queries, so
        // it fails with 459 − 3 = 456 more needed; TTFT never runs (empty). Only early stopping failed: the reason
        // is empty.
        let s =
            settings("model: llama3_1-8b\nscenario: Server\nmin_duration: 0\nmin_query_count: 3\n");
        let records: Vec<_> = (0..3).map(|i| query(i, i * 1000, 100, 600, 11)).collect();
        let run = RunTimes {
            measured_stage: 0,
            start_ns: 0,
            end_ns: 2_600 * MS,
        };
        let verdict = evaluate(&s, &records, &run);
        let text = detail_log(&s, Some(&verdict), &run_of(&[4, 0, 2, 1, 3], 1, 3));
        let pairs = raw_pairs(&text);
        let results: Vec<(&str, &str)> = pairs
            .iter()
            .skip_while(|(k, _)| k != "result_validity")
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let x = |k: &'static str, v: &'static str| (k, v);
        assert_eq!(
            results,
            [
                x("result_validity", "\"INVALID\""),
                x("result_perf_constraints_met", "true"),
                x("result_min_duration_met", "true"),
                x("result_min_queries_met", "true"),
                x("early_stopping_met", "false"),
                x("result_invalid_reason", "\"\""),
                x("early_stopping_ttft_result", "\"\""),
                x(
                    "early_stopping_tpot_result",
                    "\" * Run unsuccessful.  * Processed 3 queries.  * Would need to run at least 456 more \
                     queries,  with the run being successful if every additional  query were under latency.\""
                ),
                x("result_query_count", "3"),
                x("result_overlatency_query_count", "3"),
                x("result_scheduled_samples_per_sec", "1"),
                x("result_completed_samples_per_sec", "0.769231"),
                x("result_min_latency_ns", "600000000"),
                x("result_max_latency_ns", "600000000"),
                x("result_mean_latency_ns", "600000000"),
                x("result_50.00_percentile_latency_ns", "600000000"),
                x("result_90.00_percentile_latency_ns", "600000000"),
                x("result_95.00_percentile_latency_ns", "600000000"),
                x("result_97.00_percentile_latency_ns", "600000000"),
                x("result_99.00_percentile_latency_ns", "600000000"),
                x("result_99.90_percentile_latency_ns", "600000000"),
                x("result_first_token_min_latency_ns", "100000000"),
                x("result_first_token_max_latency_ns", "100000000"),
                x("result_first_token_mean_latency_ns", "100000000"),
                x(
                    "result_first_token_50.00_percentile_latency_ns",
                    "100000000"
                ),
                x(
                    "result_first_token_90.00_percentile_latency_ns",
                    "100000000"
                ),
                x(
                    "result_first_token_95.00_percentile_latency_ns",
                    "100000000"
                ),
                x(
                    "result_first_token_97.00_percentile_latency_ns",
                    "100000000"
                ),
                x(
                    "result_first_token_99.00_percentile_latency_ns",
                    "100000000"
                ),
                x(
                    "result_first_token_99.90_percentile_latency_ns",
                    "100000000"
                ),
                x("result_token_throughput_with_loadgen_overhead", "16.5"),
                x("result_token_throughput", "1.83333e-08"),
                x(
                    "result_time_per_output_token_50.00_percentile_ns",
                    "50000000"
                ),
                x(
                    "result_time_per_output_token_90.00_percentile_ns",
                    "50000000"
                ),
                x(
                    "result_time_per_output_token_95.00_percentile_ns",
                    "50000000"
                ),
                x(
                    "result_time_per_output_token_97.00_percentile_ns",
                    "50000000"
                ),
                x(
                    "result_time_per_output_token_99.00_percentile_ns",
                    "50000000"
                ),
                x(
                    "result_time_per_output_token_99.90_percentile_ns",
                    "50000000"
                ),
                x("result_time_to_output_token_min", "50000000"),
                x("result_time_to_output_token_max", "50000000"),
                x("result_time_to_output_token_mean", "50000000"),
                x("result_completed_tokens_per_second", "12.6923"),
                x("num_errors", "0"),
            ]
        );
        // The header and settings, in LoadGen's order, before the results.
        let keys: Vec<&str> = pairs.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys[..14],
            [
                "loadgen_version",
                "loadgen_build_date_local",
                "loadgen_build_date_utc",
                "loadgen_git_commit_date",
                "loadgen_git_log_message",
                "loadgen_git_status_message",
                "loadgen_file_sha1",
                "test_datetime",
                "sut_name",
                "qsl_name",
                "qsl_reported_total_count",
                "qsl_reported_performance_count",
                "requested_scenario",
                "requested_test_mode"
            ]
        );
        assert!(pairs.contains(&("loaded_qsl_set".to_string(), "[4,0,2,1,3]".to_string())));
        assert!(pairs[0].1.contains("not LoadGen"));
        // `DateTimeStringForPower` of start_for_power and of it plus the run to its last completion
        // (920.503441835 s later): UTC, milliseconds cut, not rounded.
        let at = |key: &str| keys.iter().position(|k| *k == key).expect(key);
        assert!(pairs.contains(&(
            "power_begin".to_string(),
            "\"11-25-2026 02:41:26.123\"".to_string()
        )));
        assert!(pairs.contains(&(
            "power_end".to_string(),
            "\"11-25-2026 02:56:46.626\"".to_string()
        )));
        assert!(at("generated_samples_per_query") < at("power_begin"));
        assert_eq!(at("power_begin") + 1, at("power_end"));
        assert!(at("power_end") < at("result_validity"));
    }

    #[test]
    fn the_submission_checkers_parser_reads_what_an_llm_performance_check_needs() {
        let s = settings(
            "model: llama3_1-8b\nscenario: Server\nmin_duration: 0\nmin_query_count: 3\nsut_name: my-sut\n",
        );
        let records: Vec<_> = (0..3).map(|i| query(i, i * 1000, 100, 600, 11)).collect();
        let run = RunTimes {
            measured_stage: 0,
            start_ns: 0,
            end_ns: 2_600 * MS,
        };
        let verdict = evaluate(&s, &records, &run);
        let text = detail_log(&s, Some(&verdict), &run_of(&[0, 1, 2, 3, 4], 1, 3));
        let log = MlperfLog::parse(&text).unwrap();
        // performance_check.py: the keys it reads for a Server LLM result, and their types.
        for key in [
            "effective_scenario",
            "effective_sample_concatenate_permutation",
            "effective_performance_sample_count",
            "effective_qsl_rng_seed",
            "effective_sample_index_rng_seed",
            "effective_schedule_rng_seed",
            "early_stopping_met",
            "effective_target_latency_ns",
            "result_99.00_percentile_latency_ns",
            "effective_min_query_count",
            "effective_samples_per_query",
            "effective_min_duration_ms",
            "sut_name",
            "requested_use_token_latencies",
            "result_first_token_99.00_percentile_latency_ns",
            "result_time_per_output_token_99.00_percentile_ns",
            "result_validity",
            "result_completed_samples_per_sec",
            "result_completed_tokens_per_second",
            "result_mean_latency_ns",
            "result_query_count",
        ] {
            assert!(log.get(key).is_some(), "{key} missing");
        }
        assert_eq!(log.get("effective_scenario").unwrap(), "Server");
        assert_eq!(log.get("sut_name").unwrap(), "my-sut");
        assert_eq!(log.get("requested_use_token_latencies").unwrap(), true);
        assert_eq!(log.get("early_stopping_met").unwrap(), false);
        assert_eq!(
            log.get("result_first_token_99.00_percentile_latency_ns")
                .unwrap(),
            100_000_000
        );
        assert_eq!(
            log.get("result_time_per_output_token_99.00_percentile_ns")
                .unwrap(),
            50_000_000
        );
        // The seeds above 2⁶³ survive as JSON integers (Python reads them exactly).
        assert_eq!(
            log.get("effective_sample_index_rng_seed").unwrap().as_u64(),
            Some(s.sample_index_rng_seed)
        );
        assert_eq!(log.num_errors(), 0);
        assert!(
            log.messages
                .iter()
                .all(|m| m["namespace"] == "mlperf::logging"
                    && m["event_type"] == "POINT_IN_TIME"
                    && m["metadata"]["is_warning"].is_boolean())
        );
        // A file without the marker on its first line is refused, as the checker refuses it.
        assert!(MlperfLog::parse(&format!("hello\n{text}")).is_err());
    }

    #[test]
    fn a_multistream_detail_log_carries_its_per_query_result_keys() {
        // 2 queries of 2 samples: latencies 100/300 (query 300) and 200/250 (query 250) ms.
        // Sorted query latencies [250, 300]: mean 275 ms, p50 = sorted[1] = 300, p99 = sorted[⌊1.98⌋ = 1] = 300.
        let s = settings(
            "model: llama3_1-8b\nscenario: MultiStream\nsamples_per_query: 2\nmin_duration: 0\nmin_query_count: 2\n",
        );
        let records = vec![
            query(0, 0, 50, 100, 11),
            query(1, 0, 50, 300, 11),
            query(2, 300, 50, 200, 11),
            query(3, 300, 50, 250, 11),
        ];
        let run = RunTimes {
            measured_stage: 0,
            start_ns: 0,
            end_ns: 550 * MS,
        };
        let verdict = evaluate(&s, &records, &run);
        let text = detail_log(&s, Some(&verdict), &run_of(&[0, 1, 2, 3, 4, 0], 2, 2));
        let log = MlperfLog::parse(&text).unwrap();
        assert_eq!(log.get("effective_scenario").unwrap(), "MultiStream");
        assert_eq!(log.get("effective_samples_per_query").unwrap(), 2);
        assert_eq!(log.get("effective_min_sample_count").unwrap(), 4);
        assert_eq!(
            log.get("requested_multi_stream_samples_per_query").unwrap(),
            2
        );
        assert_eq!(log.get("effective_target_qps").unwrap(), 125);
        assert_eq!(log.get("result_query_count").unwrap(), 2);
        assert_eq!(
            log.get("result_mean_query_latency_ns").unwrap(),
            275_000_000
        );
        assert_eq!(
            log.get("result_99.00_percentile_per_query_latency_ns")
                .unwrap(),
            300_000_000
        );
        // Early stopping needs 662 queries: not met, and its estimate stays 0 as LoadGen's member does.
        assert_eq!(log.get("early_stopping_latency_ms").unwrap(), 0);
        assert_eq!(log.get("early_stopping_met").unwrap(), false);
        assert!(log.get("result_overlatency_query_count").is_none());
    }

    #[test]
    fn the_build_keys_name_llmbench_say_na_for_what_it_does_not_know_and_hash_its_loadgen_core() {
        let s = settings("model: llama3_1-8b\nscenario: Offline\n");
        let text = detail_log(&s, None, &run_of(&[0, 1, 2, 3, 4], 5, 1));
        let log = MlperfLog::parse(&text).unwrap();
        let version = log.get("loadgen_version").unwrap();
        let version = version.as_str().unwrap();
        assert!(version.starts_with("llmbench "), "{version}");
        assert!(
            version.ends_with("(LoadGen 6.0.17 rules; not LoadGen) @ NA"),
            "{version}"
        );
        for key in [
            "loadgen_build_date_local",
            "loadgen_build_date_utc",
            "loadgen_git_commit_date",
            "loadgen_git_log_message",
            "loadgen_git_status_message",
        ] {
            assert_eq!(log.get(key).unwrap(), "NA", "{key}");
        }
        // A git status of NA is no uncommitted-changes error, for LoadGen and the checker alike.
        assert_eq!(log.num_errors(), 0);
        let files = log.get("loadgen_file_sha1").unwrap();
        let files = files.as_object().unwrap();
        assert_eq!(files.len(), SOURCES.len());
        // The hash of this very file as compiled: sha1 of its text, 40 lower-case hex digits.
        let logs = files["/crates/metrics/src/mlperf/logs.rs"]
            .as_str()
            .unwrap();
        assert_eq!(logs.len(), 40);
        assert!(
            logs.chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
        // LoadGen's map: no spaces, keys sorted.
        let line = text
            .lines()
            .find(|l| l.contains("loadgen_file_sha1"))
            .unwrap();
        assert!(
            line.contains("\"value\": {\"/crates/metrics/src/mlperf/early_stopping.rs\":\""),
            "{line}"
        );
    }

    #[test]
    fn sha1_of_a_known_text_is_the_standard_digest() {
        use sha1::Digest as _;
        // FIPS 180 test vector: SHA-1("abc").
        let digest = sha1::Sha1::digest(b"abc");
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, "a9993e364706816aba3e25717850c26c9cd0d89d");
    }

    #[test]
    fn an_accuracy_run_logs_settings_but_no_results() {
        let s = settings("model: llama3_1-8b\nscenario: Offline\nmode: AccuracyOnly\n");
        let errors = ["request 3 failed".to_string()];
        let mut run = run_of(&[0, 1, 2, 3, 4], 5, 1);
        run.events[0] = DetailEvent::Message(starting_message(Mode::AccuracyOnly));
        run.errors = &errors;
        let text = detail_log(&s, None, &run);
        let log = MlperfLog::parse(&text).unwrap();
        assert_eq!(log.get("effective_test_mode").unwrap(), "AccuracyOnly");
        assert_eq!(
            log.get("generic_message").unwrap(),
            "Starting accuracy mode"
        );
        assert!(log.get("result_validity").is_none());
        // `IssueQueries` logs the power interval after every pass, accuracy passes too (LoadGen 6.0.17 does).
        assert!(log.get("power_begin").is_some());
        // No num_errors line: the parser counts the flagged messages.
        assert_eq!(log.num_errors(), 1);
    }

    #[test]
    fn the_accuracy_log_is_hex_of_little_endian_int32_token_ids() {
        // Token 1 → 01 00 00 00; 128000 = 0x0001F400 → 00 F4 01 00; 2 → 02 00 00 00.
        let entries = [
            AccuracyEntry {
                seq_id: 7,
                qsl_idx: 11271,
                token_ids: vec![1, 128_000],
            },
            AccuracyEntry {
                seq_id: 9,
                qsl_idx: 0,
                token_ids: vec![2],
            },
        ];
        let text = accuracy_log(&entries);
        assert_eq!(
            text,
            "[\n{ \"seq_id\" : 7, \"qsl_idx\" : 11271, \"data\" : \"0100000000F40100\", \"token_count\" : 2 },\n\
             { \"seq_id\" : 9, \"qsl_idx\" : 0, \"data\" : \"02000000\", \"token_count\" : 1 }\n]\n"
        );
        // As the accuracy scripts read it: json.load, bytes.fromhex(data), np.frombuffer(…, np.int32).
        let parsed: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap();
        let decoded: Vec<(u64, Vec<i32>)> = parsed
            .iter()
            .map(|p| {
                let hex = p["data"].as_str().unwrap();
                let bytes: Vec<u8> = (0..hex.len())
                    .step_by(2)
                    .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
                    .collect();
                let ids = bytes
                    .chunks_exact(4)
                    .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect::<Vec<_>>();
                assert_eq!(p["token_count"].as_u64(), Some(ids.len() as u64));
                (p["qsl_idx"].as_u64().unwrap(), ids)
            })
            .collect();
        assert_eq!(decoded, [(11271, vec![1, 128_000]), (0, vec![2])]);
        // Performance mode leaves it empty, as LoadGen does.
        assert_eq!(accuracy_log(&[]), "[\n]\n");
        assert!(
            serde_json::from_str::<Vec<serde_json::Value>>("[\n]\n")
                .unwrap()
                .is_empty()
        );
    }
}
