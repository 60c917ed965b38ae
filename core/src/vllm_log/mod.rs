//! A vLLM server's startup log read as llm-d-benchmark's `nop` harness reads it: how long loading the weights,
//! compiling, capturing CUDA graphs and each other startup phase took, and how much memory the model and the
//! profiling run left. A pure function of the log text, so `llmbench run --harness nop --vllm-log FILE` and the
//! operator (which reads a stack pod's log through the Kubernetes API) share it.
//!
//! Upstream (llm-d/llm-d-benchmark): `workload/harnesses/nop_functions.py` — `parse_logs` (the figures),
//! `parse_gpu_logs`, the categories (see [`categories`]) and the `BenchmarkResult` dump that
//! `workload/harnesses/nop-llm-d-benchmark.py` writes as `result.yaml`; `llmdbenchmark/analysis/scripts/
//! nop-analyze_results.py` (`write_vllm_metrics`, `create_categories_dataframe`) for the text report
//! `analysis/result.txt`. A figure whose line is not in the log stays 0, as upstream; [`Analysis::missing`] names
//! those lines, and a log with none of them at all is an error ([`VllmLogError::NothingFound`]).

pub mod categories;
pub mod lines;
mod pyliteral;
mod report;

#[cfg(test)]
mod tests;

pub use categories::{Categories, Category, CategoryDump, DEFINED_CATEGORIES, UNCATEGORIZED};
pub use lines::{LogLine, Pattern, Process, Stamp, extract_datetime, extract_floats, log_lines};
pub use report::{
    BenchmarkTime, Engine, Gpu, ModelLoadCategory, ModelLoadSummary, NopResult, NopScenario,
    analysis_text, category_table_text,
};

use serde::{Deserialize, Serialize};

/// What the caller knows that the log does not say.
#[derive(Debug, Clone, PartialEq)]
pub struct LogSource {
    /// The server's name in the report (upstream: `<pod> <container>`); its result directory is this name with
    /// spaces as `_`.
    pub name: String,
    /// The served model (upstream asks `/v1/models`), for the tensorizer marker "End model <model> serialization"
    /// and the scenario; empty when unknown.
    pub model: String,
    /// The year the log's `MM-DD` dates are in (upstream: the current year).
    pub year: i32,
}

/// Why a log could not be read as a vLLM startup log.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum VllmLogError {
    #[error(
        "{source_name}: none of the vLLM startup lines llm-d-benchmark's nop reads is in the log ({}), and no \
         startup phase starts or ends in it",
        MARKERS.join(", ")
    )]
    NothingFound { source_name: String },
}

/// The lines upstream's `parse_logs` takes figures from, in its order.
pub const MARKERS: &[&str] = &[
    VLLM_START_MARKER,
    AVAILABLE_ROUTES,
    MODEL_LOADING_TOOK,
    DYNAMO_BYTECODE_TRANSFORM,
    CACHED_COMPILED_GRAPH,
    COMPILED_GRAPH,
    TORCH_COMPILE,
    INITIAL_FREE_MEMORY,
    FREE_MEMORY_AFTER_PROFILING,
    MEMORY_PROFILING,
];

/// The earliest API-server line since vLLM 0.24 ("non-default args: %s", `vllm/entrypoints/utils.py`
/// `log_non_default_args`): the server process's start.
pub(crate) const VLLM_START_MARKER: &str = "non-default args:";
/// "Available routes are:" (`vllm/entrypoints/openai/api_server.py`): the server is ready.
pub(crate) const AVAILABLE_ROUTES: &str = "Available routes are:";
/// "Model loading took %.4f GiB and %.6f seconds" (`vllm/v1/worker/gpu_model_runner.py`; "GB" in vLLM v0,
/// "GiB memory and" in later v1): the weights' size and load time.
pub(crate) const MODEL_LOADING_TOOK: &str = "Model loading took";
/// "Dynamo bytecode transform time: %.2f s" (`vllm/compilation/backends.py`).
pub(crate) const DYNAMO_BYTECODE_TRANSFORM: &str = "Dynamo bytecode transform time";
/// "Directly load the compiled graph(s) for {dynamic shape | shape %s | compile range %s} from the cache, took
/// %.3f s" (`vllm/compilation/backends.py`).
pub(crate) const CACHED_COMPILED_GRAPH: &str = "Directly load the compiled graph(s) for ";
/// "Compiling a graph for {dynamic shape | shape %s | compile range %s} takes %.2f s"
/// (`vllm/compilation/backends.py`).
pub(crate) const COMPILED_GRAPH: &str = "Compiling a graph for ";
/// "torch.compile takes %.2f s in total" (`vllm/compilation/monitor.py`).
pub(crate) const TORCH_COMPILE: &str = "torch.compile takes";
/// "Initial free memory: %.2f GiB; Requested memory: …" (`vllm/v1/worker/gpu_worker.py`, debug level).
pub(crate) const INITIAL_FREE_MEMORY: &str = "Initial free memory:";
/// "Free memory after profiling: %.2f GiB (total), …" (`vllm/v1/worker/gpu_worker.py`, debug level).
pub(crate) const FREE_MEMORY_AFTER_PROFILING: &str = "Free memory after profiling:";
/// "Memory profiling takes %.2f seconds" (`vllm/worker/worker.py` of vLLM v0; a debug line of v1's worker).
pub(crate) const MEMORY_PROFILING: &str = "Memory profiling takes";

const SERVER_NON_DEFAULT_ARGS: &str = "non-default args:";
const MODEL_SLEEP_MODE: &str = "'enable_sleep_mode':";
const MODEL_LOAD_FORMAT: &str = "load_format=";
/// "It took %.6f seconds to fall asleep." / "… to wake up." (`vllm/v1/executor/abstract.py`).
const MODEL_SLEEP: &str = " seconds to fall asleep";
const MODEL_WAKE: &str = " seconds to wake up";
const MODEL_TOOK: &str = " It took ";
/// "Sleep mode freed %.2f GiB memory, %.2f GiB memory is still in use." (`vllm/v1/worker/gpu_worker.py`).
const MODEL_GPU_FREED: &str = "Sleep mode freed";

/// vLLM's `--load-format` values upstream knows (`LoadFormat`); anything else is `unknown`.
const LOAD_FORMATS: &[&str] = &[
    "auto",
    "pt",
    "safetensors",
    "npcache",
    "dummy",
    "tensorizer",
    "sharded_state",
    "gguf",
    "bitsandbytes",
    "mistral",
    "runai_streamer",
    "runai_streamer_sharded",
    "fastsafetensors",
];

/// The load format when the log names none of [`LOAD_FORMATS`].
pub(crate) const UNKNOWN_LOAD_FORMAT: &str = "unknown";

/// Upstream's `BenchmarkVllmMetrics`, field for field in its dump order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct VllmMetrics {
    pub name: String,
    /// Seconds from the pod's start to Ready; a log file does not say (0, as upstream when it cannot ask).
    pub pod_start: f64,
    /// Epoch seconds of the first "non-default args:" line; 0 when absent.
    pub vllm_start_timestamp: f64,
    /// Epoch seconds of the last "Available routes are:" line after the start; 0 when absent.
    pub vllm_ready_timestamp: f64,
    pub load: MetricsLoad,
    /// Always 0: upstream declares it and never sets it.
    pub size: f64,
    /// Seconds.
    pub dynamo_bytecode_transform: f64,
    /// Seconds; left out of the file when 0, as upstream.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub load_cached_compiled_graph: f64,
    /// Seconds; left out of the file when 0, as upstream.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub compile_graph: f64,
    /// Seconds.
    pub torch_compile: f64,
    pub memory_profiling: MemoryProfiling,
    pub sleep_wake: Vec<SleepWake>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub categories: Option<Vec<CategoryDump>>,
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

/// Loading the weights: seconds, GiB (the first number of "Model loading took"), and GiB/s.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct MetricsLoad {
    pub time: f64,
    pub size: f64,
    /// size / time, 0 when time is 0.
    pub transfer_rate: f64,
}

/// The profiling run: free GPU memory before and after (GiB) and how long it took (seconds).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct MemoryProfiling {
    pub initial_free: f64,
    pub after_free: f64,
    pub time: f64,
}

/// A sleep or a wake-up of a server in sleep mode.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SleepWake {
    /// Epoch seconds of its line.
    pub timestamp: f64,
    #[serde(rename = "type")]
    pub kind: SleepWakeKind,
    /// Seconds it took.
    pub time: f64,
    /// GiB freed by a sleep (the "Sleep mode freed" line before it, else 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_freed: Option<f64>,
    /// GiB still in use after a sleep.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_in_use: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SleepWakeKind {
    Sleep,
    Wake,
}

/// Everything read from one log.
#[derive(Debug, Clone, PartialEq)]
pub struct Analysis {
    pub metrics: VllmMetrics,
    /// vLLM's `--load-format`, from the engine's "load_format=…," config line.
    pub load_format: String,
    /// `'enable_sleep_mode': True` among the non-default args.
    pub sleep_mode: bool,
    /// The text after "non-default args:" (a Python dict literal), as logged.
    pub non_default_args: Option<String>,
    /// That dict as upstream's `convert_objects_to_dict` reads it; empty where it cannot (as upstream's).
    pub engine_args: serde_json::Map<String, serde_json::Value>,
    /// The GPUs listed between "--- gpu scenario start name:" and "--- gpu scenario end name:" (llm-d-benchmark's
    /// standalone preprocess prints them).
    pub gpus: Vec<Gpu>,
    pub categories: Categories,
    /// The markers of [`MARKERS`] found nowhere in the log: their figures are 0.
    pub missing: Vec<&'static str>,
}

/// Reads a vLLM log as upstream's nop harness does. Fails only when the log has none of the lines upstream reads
/// (a wrong file); a log that lacks some of them gives 0 for those figures, as upstream, and names them in
/// [`Analysis::missing`].
pub fn analyze(log: &str, source: &LogSource) -> Result<Analysis, VllmLogError> {
    let lines = log_lines(log, source.year);
    let mut analysis = parse_logs(&lines);
    analysis.metrics.name = source.name.clone();
    analysis.gpus = parse_gpu_logs(&lines);
    analysis.categories = Categories::find(&lines, &source.model);
    analysis.metrics.categories = Some(analysis.categories.dump());
    analysis.missing = MARKERS
        .iter()
        .copied()
        .filter(|marker| !lines.iter().any(|l| l.line.contains(marker)))
        .collect();
    if analysis.missing.len() == MARKERS.len() && !analysis.categories.any_found() {
        return Err(VllmLogError::NothingFound {
            source_name: source.name.clone(),
        });
    }
    Ok(analysis)
}

/// Upstream's `parse_logs`: one pass over every line, each figure taken from the first line that has it (the
/// ready time from the last), a line that gave a figure read no further.
///
/// Where this differs, and why: upstream takes the first number after "Directly load the compiled graph(s) for "
/// and "Compiling a graph for ", which is the shape or compile range (`(1, 2048)` gives 1) whenever vLLM names
/// one; the seconds are the last number of those lines, so that is what is taken. A "non-default args:" or
/// sleep/wake line without a date (upstream fails on it and loses the whole log) gives no time.
fn parse_logs(lines: &[LogLine]) -> Analysis {
    let mut metrics = VllmMetrics::default();
    let mut load_format: Option<&'static str> = None;
    let mut sleep_mode: Option<bool> = None;
    let mut args: Option<String> = None;
    let (mut gpu_freed, mut gpu_in_use) = (0.0, 0.0);
    for log in lines {
        let line = log.line.trim();
        let seconds = log.timestamp.map(Stamp::seconds);

        if metrics.vllm_start_timestamp == 0.0
            && line.contains(VLLM_START_MARKER)
            && let Some(at) = seconds
        {
            metrics.vllm_start_timestamp = at;
        }
        if line.contains(AVAILABLE_ROUTES)
            && metrics.vllm_start_timestamp > 0.0
            && let Some(at) = seconds
        {
            metrics.vllm_ready_timestamp = at;
        }
        if args.is_none()
            && let Some(at) = line.find(SERVER_NON_DEFAULT_ARGS)
        {
            args = Some(line[at + SERVER_NON_DEFAULT_ARGS.len()..].trim().to_owned());
        }
        if sleep_mode.is_none()
            && let Some(at) = line.find(MODEL_SLEEP_MODE)
        {
            let from = at + MODEL_SLEEP_MODE.len();
            let end = line[from..]
                .find(',')
                .or_else(|| line[from..].find('}'))
                .map(|e| from + e);
            if let Some(end) = end {
                sleep_mode = Some(line[from..end].trim().eq_ignore_ascii_case("true"));
            }
        }
        if load_format.is_none()
            && let Some(at) = line.find(MODEL_LOAD_FORMAT)
        {
            let from = at + MODEL_LOAD_FORMAT.len();
            if let Some(end) = line[from..].find(',') {
                let value = line[from..from + end].trim();
                load_format = LOAD_FORMATS.iter().copied().find(|f| *f == value);
            }
        }

        if metrics.load.time == 0.0 {
            let floats = lines::floats_after(MODEL_LOADING_TOOK, line);
            if floats.len() > 1 {
                metrics.load.size = floats[0];
                metrics.load.time = floats[1];
                continue;
            }
        }
        if metrics.dynamo_bytecode_transform == 0.0
            && let Some(&value) = lines::floats_after(DYNAMO_BYTECODE_TRANSFORM, line).first()
        {
            metrics.dynamo_bytecode_transform = value;
            continue;
        }
        if metrics.load_cached_compiled_graph == 0.0 && metrics.compile_graph == 0.0 {
            if let Some(&value) = lines::floats_after(CACHED_COMPILED_GRAPH, line).last() {
                metrics.load_cached_compiled_graph = value;
                continue;
            }
            if let Some(&value) = lines::floats_after(COMPILED_GRAPH, line).last() {
                metrics.compile_graph = value;
                continue;
            }
        }
        if metrics.torch_compile == 0.0
            && let Some(&value) = lines::floats_after(TORCH_COMPILE, line).first()
        {
            metrics.torch_compile = value;
            continue;
        }
        if metrics.memory_profiling.initial_free == 0.0
            && let Some(&value) = lines::floats_after(INITIAL_FREE_MEMORY, line).first()
        {
            metrics.memory_profiling.initial_free = value;
            continue;
        }
        if metrics.memory_profiling.after_free == 0.0
            && let Some(&value) = lines::floats_after(FREE_MEMORY_AFTER_PROFILING, line).first()
        {
            metrics.memory_profiling.after_free = value;
            continue;
        }
        if metrics.memory_profiling.time == 0.0
            && let Some(&value) = lines::floats_after(MEMORY_PROFILING, line).first()
        {
            metrics.memory_profiling.time = value;
            continue;
        }
        let freed = lines::floats_after(MODEL_GPU_FREED, line);
        if freed.len() > 1 {
            (gpu_freed, gpu_in_use) = (freed[0], freed[1]);
            continue;
        }
        let sleeping = line.contains(MODEL_SLEEP);
        if sleeping || line.contains(MODEL_WAKE) {
            // Upstream searches " It took " in the stripped line, so a message at its very start is not found.
            if let Some(&time) = lines::floats_after(MODEL_TOOK, line).first() {
                if let Some(timestamp) = seconds {
                    metrics.sleep_wake.push(if sleeping {
                        SleepWake {
                            timestamp,
                            kind: SleepWakeKind::Sleep,
                            time,
                            gpu_freed: Some(gpu_freed),
                            gpu_in_use: Some(gpu_in_use),
                        }
                    } else {
                        SleepWake {
                            timestamp,
                            kind: SleepWakeKind::Wake,
                            time,
                            gpu_freed: None,
                            gpu_in_use: None,
                        }
                    });
                }
                if sleeping {
                    (gpu_freed, gpu_in_use) = (0.0, 0.0);
                }
                continue;
            }
        }
    }
    if metrics.load.time != 0.0 {
        metrics.load.transfer_rate = metrics.load.size / metrics.load.time;
    }
    Analysis {
        metrics,
        load_format: load_format.unwrap_or(UNKNOWN_LOAD_FORMAT).to_owned(),
        sleep_mode: sleep_mode.unwrap_or(false),
        engine_args: args
            .as_deref()
            .and_then(pyliteral::convert_objects_to_dict)
            .unwrap_or_default(),
        non_default_args: args,
        gpus: Vec::new(),
        categories: Categories::find(&[], ""),
        missing: Vec::new(),
    }
}

/// Upstream's `parse_gpu_logs`: every line between the start and end markers is one GPU, its `key='value'`
/// fields read where present.
fn parse_gpu_logs(lines: &[LogLine]) -> Vec<Gpu> {
    const START: &str = "--- gpu scenario start name:";
    const END: &str = "--- gpu scenario end name:";
    let field = |line: &str, key: &str| {
        line.find(key)
            .and_then(|at| {
                let from = at + key.len();
                line[from..]
                    .find('\'')
                    .map(|end| line[from..from + end].trim().to_owned())
            })
            .unwrap_or_default()
    };
    let mut found = false;
    let mut gpus = Vec::new();
    for log in lines {
        let line = log.line.trim();
        if line.contains(START) {
            found = true;
            continue;
        }
        if line.contains(END) {
            break;
        }
        if !found {
            continue;
        }
        gpus.push(Gpu {
            uuid: field(line, "gpu_uuid='"),
            name: field(line, "gpu_name='"),
            compute_cap: field(line, "compute_cap='"),
            persistence_mode: field(line, "persistence_mode='"),
        });
    }
    gpus
}
