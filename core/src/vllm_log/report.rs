//! What the nop harness writes from an [`Analysis`]: upstream's native `result.yaml` ([`NopResult`], the
//! `BenchmarkResult` dump of `nop_functions.py`), its analyser's text report ([`analysis_text`], after
//! `nop-analyze_results.py`), and llmbench's brief of it for `summary.json` and the compact summary
//! ([`ModelLoadSummary`]).

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::calendar::civil_from_days;

use super::{Analysis, CategoryDump, LogSource, VllmMetrics};

/// Upstream's `result.yaml` (`BenchmarkResult.dump()`), field for field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NopResult {
    /// "0.1".
    pub version: String,
    pub scenario: NopScenario,
    pub vllm_metrics: Vec<VllmMetrics>,
    /// Upstream fills it only in its FMA mode.
    pub extra_metrics: Vec<serde_json::Value>,
    pub time: BenchmarkTime,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NopScenario {
    /// "standalone": upstream reads a server's log in its standalone mode.
    pub deploy_methods: String,
    pub load_format: String,
    pub sleep_mode: bool,
    pub max_instances: u32,
    pub model: ModelName,
    pub platform: Platform,
    pub gpus: Vec<Gpu>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelName {
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Platform {
    pub engines: Vec<Engine>,
}

/// The server. `image` and `version` come from the cluster and the server's `/version` upstream; a log file
/// gives neither, and they stay empty. `args` is the "non-default args:" dict ([`Analysis::engine_args`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Engine {
    pub name: String,
    pub image: String,
    pub version: String,
    pub args: serde_json::Map<String, serde_json::Value>,
}

/// One GPU of the scenario block.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Gpu {
    pub uuid: String,
    pub name: String,
    pub compute_cap: String,
    pub persistence_mode: String,
}

/// When the harness ran, in epoch seconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BenchmarkTime {
    pub start: f64,
    pub stop: f64,
    pub duration: f64,
}

impl NopResult {
    /// The result file of one analysed log, for a harness run from `start` to `stop` (epoch seconds).
    pub fn new(analysis: &Analysis, source: &LogSource, start: f64, stop: f64) -> NopResult {
        NopResult {
            version: "0.1".to_owned(),
            scenario: NopScenario {
                deploy_methods: "standalone".to_owned(),
                load_format: analysis.load_format.clone(),
                sleep_mode: analysis.sleep_mode,
                max_instances: 0,
                model: ModelName {
                    name: source.model.clone(),
                },
                platform: Platform {
                    engines: vec![Engine {
                        name: source.name.clone(),
                        image: String::new(),
                        version: String::new(),
                        args: analysis.engine_args.clone(),
                    }],
                },
                gpus: analysis.gpus.clone(),
            },
            vllm_metrics: vec![analysis.metrics.clone()],
            extra_metrics: Vec::new(),
            time: BenchmarkTime {
                start,
                stop,
                duration: stop - start,
            },
        }
    }
}

/// One startup phase in the brief: seconds, 0 when its start or end line is missing (as upstream).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelLoadCategory {
    pub title: String,
    pub elapsed_s: f64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub categories: Vec<ModelLoadCategory>,
}

/// The model-load figures in brief, for `summary.json`'s and the compact summary's `model_load`: upstream's
/// figures under names with their units. Seconds (`_s`) and GiB.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelLoadSummary {
    pub name: String,
    /// "Model loading took … seconds".
    pub load_s: f64,
    /// "Model loading took … GiB".
    pub load_gib: f64,
    pub load_gib_per_s: f64,
    /// From the server's first line ("non-default args:") to "Available routes are:"; 0 when either is missing
    /// (upstream's "vLLM Start(secs)").
    pub vllm_start_s: f64,
    pub dynamo_bytecode_transform_s: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_cached_compiled_graph_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compile_graph_s: Option<f64>,
    pub torch_compile_s: f64,
    pub memory_profiling_s: f64,
    pub initial_free_gib: f64,
    pub after_free_gib: f64,
    /// The startup phases, as upstream's categories.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub categories: Vec<ModelLoadCategory>,
    /// The log lines upstream reads that the log lacks: their figures are 0.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<String>,
}

impl ModelLoadSummary {
    pub fn new(analysis: &Analysis) -> ModelLoadSummary {
        let m = &analysis.metrics;
        fn brief(dump: &[CategoryDump]) -> Vec<ModelLoadCategory> {
            dump.iter()
                .map(|c| ModelLoadCategory {
                    title: c.title.clone(),
                    elapsed_s: c.elapsed,
                    categories: c.categories.as_deref().map(brief).unwrap_or_default(),
                })
                .collect()
        }
        ModelLoadSummary {
            name: m.name.clone(),
            load_s: m.load.time,
            load_gib: m.load.size,
            load_gib_per_s: m.load.transfer_rate,
            vllm_start_s: vllm_start(m),
            dynamo_bytecode_transform_s: m.dynamo_bytecode_transform,
            load_cached_compiled_graph_s: (m.load_cached_compiled_graph != 0.0)
                .then_some(m.load_cached_compiled_graph),
            compile_graph_s: (m.compile_graph != 0.0).then_some(m.compile_graph),
            torch_compile_s: m.torch_compile,
            memory_profiling_s: m.memory_profiling.time,
            initial_free_gib: m.memory_profiling.initial_free,
            after_free_gib: m.memory_profiling.after_free,
            categories: brief(&analysis.categories.dump()),
            missing: analysis.missing.iter().map(|s| (*s).to_owned()).collect(),
        }
    }
}

/// Upstream's "vLLM Start(secs)": ready minus start when ready is later, else 0.
fn vllm_start(m: &VllmMetrics) -> f64 {
    if m.vllm_ready_timestamp > m.vllm_start_timestamp {
        m.vllm_ready_timestamp - m.vllm_start_timestamp
    } else {
        0.0
    }
}

/// `analysis/result.txt` as `nop-analyze_results.py` writes it (`write_benchmark_reports`,
/// `write_vllm_metrics`). The category table has upstream's rows and columns (each level's phases, then its
/// "Total"; an elapsed of 0 left blank); its spacing is ours, where upstream's is pandas' `to_string`.
pub fn analysis_text(result: &NopResult) -> String {
    let mut out = String::new();
    let s = &result.scenario;
    let py_bool = |b: bool| if b { "True" } else { "False" };
    // Writing to a String cannot fail.
    let _ = writeln!(out, "Scenario");
    let _ = writeln!(out, "  Deploy Methods       : {}", s.deploy_methods);
    let _ = writeln!(out, "  Harness              : nop");
    let _ = writeln!(out, "  Load Format          : {}", s.load_format);
    let _ = writeln!(out, "  Sleep Mode On        : {}", py_bool(s.sleep_mode));
    let _ = writeln!(out, "  Max Instances        : {}", s.max_instances);
    let _ = writeln!(out, "  Model                : {}", s.model.name);
    for engine in &s.platform.engines {
        let _ = writeln!(out, "  Engine");
        let _ = writeln!(out, "    Name               : {}", engine.name);
        let _ = writeln!(out, "    Image              : {}", engine.image);
        let _ = writeln!(out, "    Version            : {}", engine.version);
        let _ = writeln!(
            out,
            "    Args               : {}",
            python_repr(&engine.args)
        );
    }
    for gpu in &s.gpus {
        let _ = writeln!(out, "  GPU");
        let _ = writeln!(out, "    UUID               : {}", gpu.uuid);
        let _ = writeln!(out, "    Name               : {}", gpu.name);
        let _ = writeln!(out, "    Compute capability : {}", gpu.compute_cap);
        let _ = writeln!(out, "    Persistence Mode   : {}", gpu.persistence_mode);
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "Benchmark");
    let _ = writeln!(
        out,
        "  Start                             : {}",
        iso_utc(result.time.start)
    );
    let _ = writeln!(
        out,
        "  Elapsed(secs)                     : {:7.3}",
        result.time.duration
    );
    for m in &result.vllm_metrics {
        write_vllm_metrics(&mut out, m);
    }
    out
}

fn write_vllm_metrics(out: &mut String, m: &VllmMetrics) {
    let _ = writeln!(out, "\n  Name                              : {}", m.name);
    let _ = writeln!(
        out,
        "    Pod  Start(secs)                : {:7.3}",
        m.pod_start
    );
    let _ = writeln!(
        out,
        "    vLLM Start(secs)                : {:7.3}",
        vllm_start(m)
    );
    let _ = writeln!(out, "    Model Load");
    let _ = writeln!(
        out,
        "      Elapsed(secs)                 : {:7.3}",
        m.load.time
    );
    let _ = writeln!(
        out,
        "      Rate(GiB/secs)                : {:7.3}",
        m.load.transfer_rate
    );
    let _ = writeln!(
        out,
        "    Dynamo Bytecode Transform(secs) : {:7.2}",
        m.dynamo_bytecode_transform
    );
    if m.load_cached_compiled_graph != 0.0 || m.compile_graph != 0.0 {
        let _ = writeln!(out, "    Compiled Graph");
        if m.load_cached_compiled_graph != 0.0 {
            let _ = writeln!(
                out,
                "      Load from Cache(secs)         : {:7.3}",
                m.load_cached_compiled_graph
            );
        }
        if m.compile_graph != 0.0 {
            let _ = writeln!(
                out,
                "      Compile(secs)                 : {:7.3}",
                m.compile_graph
            );
        }
    }
    let _ = writeln!(
        out,
        "    Torch Compile(secs)             : {:7.2}",
        m.torch_compile
    );
    let _ = writeln!(out, "    Memory Profiling");
    let _ = writeln!(
        out,
        "      Elapsed(secs)                 : {:7.2}",
        m.memory_profiling.time
    );
    let _ = writeln!(out, "      Free Memory GPU(GiB)");
    let _ = writeln!(
        out,
        "        Initial                     : {:7.2}",
        m.memory_profiling.initial_free
    );
    let _ = writeln!(
        out,
        "        After                       : {:7.2}",
        m.memory_profiling.after_free
    );
    if !m.sleep_wake.is_empty() {
        let _ = writeln!(
            out,
            "\n    After: Time elapsed after the previous vLLM sleep, wake, or ready state"
        );
        let _ = writeln!(
            out,
            "    Elapsed: Time it took to transition to vLLM sleep or wait\n"
        );
        let header = format!(
            "{:<6} {:>13} {:>13} {:>15} {:>15}",
            "Type", "After(secs)", "Elapsed(secs)", "GPU Freed(GiB)", "GPU In Use(GiB)"
        );
        let _ = writeln!(out, "\n    {header}");
        let _ = writeln!(out, "    {}", "-".repeat(header.len()));
        let blank_or = |v: Option<f64>, width: usize, digits: usize| match v {
            Some(v) => format!("{v:width$.digits$}"),
            None => " ".repeat(width),
        };
        let mut previous = m.vllm_ready_timestamp;
        for event in &m.sleep_wake {
            let after = (previous > 0.0).then_some(event.timestamp - previous);
            previous = event.timestamp;
            let kind = match event.kind {
                super::SleepWakeKind::Sleep => "sleep",
                super::SleepWakeKind::Wake => "wake",
            };
            let _ = writeln!(
                out,
                "    {kind:<6} {} {} {} {}",
                blank_or(after, 13, 3),
                blank_or(Some(event.time), 13, 3),
                blank_or(event.gpu_freed, 15, 2),
                blank_or(event.gpu_in_use, 15, 2),
            );
        }
        let _ = writeln!(out);
    }
    let _ = writeln!(out);
    if let Some(categories) = m.categories.as_deref().filter(|c| !c.is_empty()) {
        let mut rows = Vec::new();
        category_rows(categories, 0, &mut rows);
        out.push_str(&category_table(&rows, 4));
    }
}

/// Upstream's `create_categories_dataframe`: each phase (indented by level), its sub-phases, and a "Total" of
/// each level; the process by name; an elapsed of exactly 0 left blank (a total never is).
fn category_rows(categories: &[CategoryDump], level: usize, rows: &mut Vec<[String; 3]>) {
    let pad = "  ".repeat(level);
    let mut total = 0.0;
    for category in categories {
        total += category.elapsed;
        rows.push([
            format!("{pad}{}", category.title),
            category
                .process
                .as_ref()
                .map(|p| p.name.clone())
                .unwrap_or_default(),
            if category.elapsed != 0.0 {
                format!("{:.3}", category.elapsed)
            } else {
                String::new()
            },
        ]);
        if let Some(children) = &category.categories {
            category_rows(children, level + 1, rows);
        }
    }
    rows.push([format!("{pad}Total"), String::new(), format!("{total:.3}")]);
}

/// The rows under a header and a rule, the first two columns left-aligned and the elapsed right-aligned.
pub(crate) fn category_table(rows: &[[String; 3]], left_padding: usize) -> String {
    let headers = ["Category", "Process", "Elapsed(secs)"];
    let width = |col: usize| {
        rows.iter()
            .map(|r| r[col].chars().count())
            .chain([headers[col].len()])
            .max()
            .unwrap_or(0)
    };
    let widths = [width(0), width(1), width(2)];
    let pad = " ".repeat(left_padding);
    let line = |cells: [&str; 3]| {
        format!(
            "{pad}{:<w0$}  {:<w1$}  {:>w2$}",
            cells[0],
            cells[1],
            cells[2],
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2]
        )
    };
    let header = line(headers);
    let mut out = String::new();
    let _ = writeln!(out, "{header}");
    let _ = writeln!(out, "{pad}{}", "-".repeat(header.len() - left_padding));
    for row in rows {
        let _ = writeln!(out, "{}", line([&row[0], &row[1], &row[2]]));
    }
    out
}

/// The rows of the category table of one analysis, for a caller that prints it (the same rows as
/// [`analysis_text`]).
pub fn category_table_text(categories: &[CategoryDump]) -> String {
    let mut rows = Vec::new();
    category_rows(categories, 0, &mut rows);
    category_table(&rows, 2)
}

/// Python's `str()` of a dict of JSON values, enough for an empty or simple args dict.
fn python_repr(map: &serde_json::Map<String, serde_json::Value>) -> String {
    fn value(v: &serde_json::Value) -> String {
        match v {
            serde_json::Value::Null => "None".to_owned(),
            serde_json::Value::Bool(true) => "True".to_owned(),
            serde_json::Value::Bool(false) => "False".to_owned(),
            serde_json::Value::Number(n) => n.to_string(),
            serde_json::Value::String(s) => format!("'{s}'"),
            serde_json::Value::Array(items) => {
                format!(
                    "[{}]",
                    items.iter().map(value).collect::<Vec<_>>().join(", ")
                )
            }
            serde_json::Value::Object(map) => python_repr(map),
        }
    }
    let items: Vec<String> = map
        .iter()
        .map(|(k, v)| format!("'{k}': {}", value(v)))
        .collect();
    format!("{{{}}}", items.join(", "))
}

/// Epoch seconds as ISO 8601 in UTC with microseconds (upstream: `datetime.fromtimestamp(…).astimezone()
/// .isoformat()` in the harness pod's zone, UTC in its container).
fn iso_utc(seconds: f64) -> String {
    let micros = (seconds * 1e6).round() as i64;
    let (days, rem) = (
        micros.div_euclid(86_400_000_000),
        micros.rem_euclid(86_400_000_000),
    );
    let (y, m, d) = civil_from_days(days);
    let secs = rem / 1_000_000;
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:06}+00:00",
        secs / 3600,
        secs / 60 % 60,
        secs % 60,
        rem % 1_000_000
    )
}
