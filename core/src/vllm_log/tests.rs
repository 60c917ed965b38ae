//! The nop harness's log reading, pinned on recorded vLLM log text. The fixtures are written from vLLM's own
//! format strings (cited on the constants in `mod.rs` and on `DEFINED_CATEGORIES`) in the shape of a vLLM 0.11
//! `vllm serve` startup (process prefixes, `[file.py:line]`, an undated torch warning and progress bar); each
//! expected figure is worked out by hand in the comment above it.

use super::*;

const YEAR: i32 = 2025;

/// A vLLM 0.11 (V1 engine) startup with sleep mode, as `kubectl logs` shows it. Line numbers in the comments of
/// the tests are 1-based.
const V1_LOG: &str = include_str!("fixtures/vllm-0.11-startup.log");

fn source() -> LogSource {
    LogSource {
        name: "vllm-0 vllm".to_owned(),
        model: "Qwen/Qwen3-0.6B".to_owned(),
        year: YEAR,
    }
}

fn category<'a>(dump: &'a [CategoryDump], title: &str) -> &'a CategoryDump {
    dump.iter()
        .find(|c| c.title == title)
        .unwrap_or_else(|| panic!("no category {title} in {dump:?}"))
}

fn engine_core() -> Option<Process> {
    Some(Process {
        name: "EngineCore_DP0".to_owned(),
        pid: 164,
    })
}

#[test]
fn the_figures_come_from_the_first_line_that_has_them() {
    let analysis = analyze(V1_LOG, &source()).unwrap();
    let m = &analysis.metrics;
    assert_eq!(m.name, "vllm-0 vllm");
    // "non-default args:" at 2025-01-23 15:48:29 UTC: 20111 days × 86400 + 56909 s = 1737647309.
    assert_eq!(m.vllm_start_timestamp, 1_737_647_309.0);
    // "Available routes are:" at 15:50:32: 123 s later.
    assert_eq!(m.vllm_ready_timestamp, 1_737_647_432.0);
    // "Model loading took 3.8844 GiB and 20.442057 seconds": the size, then the time.
    assert_eq!((m.load.size, m.load.time), (3.8844, 20.442057));
    assert_eq!(m.load.transfer_rate, 3.8844 / 20.442057);
    assert_eq!(m.dynamo_bytecode_transform, 3.29);
    // "Compiling a graph for dynamic shape takes 10.00 s"; no graph came from the cache.
    assert_eq!((m.compile_graph, m.load_cached_compiled_graph), (10.0, 0.0));
    assert_eq!(m.torch_compile, 13.29);
    // The debug lines' first numbers; no "Memory profiling takes" line in a V1 log.
    assert_eq!(m.memory_profiling.initial_free, 78.5);
    assert_eq!(m.memory_profiling.after_free, 72.1);
    assert_eq!(m.memory_profiling.time, 0.0);
    assert_eq!(m.pod_start, 0.0);
    assert_eq!(analysis.load_format, "auto");
    assert!(analysis.sleep_mode);
    assert_eq!(
        analysis.non_default_args.as_deref(),
        Some(
            "{'model_tag': 'Qwen/Qwen3-0.6B', 'model': 'Qwen/Qwen3-0.6B', 'enable_sleep_mode': True}"
        )
    );
    assert_eq!(analysis.missing, [CACHED_COMPILED_GRAPH, MEMORY_PROFILING]);
    assert_eq!(
        serde_json::Value::Object(analysis.engine_args.clone()),
        serde_json::json!({"model_tag": "Qwen/Qwen3-0.6B", "model": "Qwen/Qwen3-0.6B", "enable_sleep_mode": true})
    );
}

#[test]
fn a_sleep_carries_the_memory_freed_before_it_and_a_wake_does_not() {
    let analysis = analyze(V1_LOG, &source()).unwrap();
    assert_eq!(
        analysis.metrics.sleep_wake,
        [
            // 15:52:00 is 1737647520; "Sleep mode freed 60.50 GiB memory, 1.25 GiB memory is still in use."
            SleepWake {
                timestamp: 1_737_647_520.0,
                kind: SleepWakeKind::Sleep,
                time: 0.812345,
                gpu_freed: Some(60.5),
                gpu_in_use: Some(1.25),
            },
            SleepWake {
                timestamp: 1_737_647_530.0,
                kind: SleepWakeKind::Wake,
                time: 0.25,
                gpu_freed: None,
                gpu_in_use: None,
            },
        ]
    );
}

#[test]
fn each_phase_is_timed_from_its_start_line_to_its_end_line_within_one_process() {
    let analysis = analyze(V1_LOG, &source()).unwrap();
    let dump = analysis.categories.dump();
    let titles: Vec<&str> = dump.iter().map(|c| c.title.as_str()).collect();
    assert_eq!(
        titles,
        [
            "Detect Platform",
            "LLM Imports",
            "Get Model Info",
            "Worker Initialization",
            "Model Loading",
            "Pytorch Compilation",
            "CUDA Graph Capture",
            "API Server Starts"
        ]
    );
    // "No plugins for group" is a debug line: no start, so 0 and no process, though line 1 ended it.
    let detect = category(&dump, "Detect Platform");
    assert_eq!((detect.elapsed, &detect.process), (0.0, &None));
    // Started on line 1; "Available plugins for group" never came.
    assert_eq!(category(&dump, "LLM Imports").elapsed, 0.0);
    // API server: "vLLM API server version" 15:48:29 → "Using max model len" 15:48:33.
    let info = category(&dump, "Get Model Info");
    assert_eq!(info.elapsed, 4.0);
    assert_eq!(
        info.process,
        Some(Process {
            name: "APIServer".to_owned(),
            pid: 1
        })
    );
    // Engine core: "Waiting for init message" 15:48:36 → "Starting to load model" 15:48:47.
    let worker = category(&dump, "Worker Initialization");
    assert_eq!((worker.elapsed, &worker.process), (11.0, &engine_core()));
    // "Starting to load model" 15:48:47 → "Model loading took" 15:49:08.
    assert_eq!(category(&dump, "Model Loading").elapsed, 21.0);
    // The torch/_dynamo warning has no date, so the phase starts at the next dated line of the engine core
    // ("Dynamo bytecode transform", 15:49:11) and ends at "torch.compile takes" (15:49:41): 30 s. That next line
    // was taken by the parent, so Dynamo never finds its start: 0; Inductor starts there too: 30 s.
    let compile = category(&dump, "Pytorch Compilation");
    assert_eq!(compile.elapsed, 30.0);
    let children = compile.categories.as_deref().unwrap_or_default();
    assert_eq!(category(children, "Dynamo").elapsed, 0.0);
    assert_eq!(category(children, "Inductor").elapsed, 30.0);
    // "torch.compile takes" 15:49:41 → "init engine" 15:50:29.
    assert_eq!(category(&dump, "CUDA Graph Capture").elapsed, 48.0);
    // "Starting vLLM API server" 15:50:32 → "Route: /metrics" 15:50:33.
    assert_eq!(category(&dump, "API Server Starts").elapsed, 1.0);
}

#[test]
fn gaps_between_phases_are_uncategorized_in_the_log_but_not_in_the_result() {
    let analysis = analyze(V1_LOG, &source()).unwrap();
    let all = analysis.categories.all();
    let fillers: Vec<f64> = all
        .iter()
        .filter(|(_, c)| !c.defined)
        .map(|(_, c)| c.elapsed().unwrap_or(-1.0))
        .collect();
    // 15:48:33 → 15:48:36 (model info → worker), 15:49:08 → 15:49:11 (loading → compilation), 15:50:29 →
    // 15:50:32 (engine → API server).
    assert_eq!(fillers, [3.0, 3.0, 3.0]);
    assert!(
        all.iter()
            .all(|(_, c)| c.defined || c.title == UNCATEGORIZED)
    );
    assert!(
        analysis
            .categories
            .dump()
            .iter()
            .all(|c| c.title != UNCATEGORIZED)
    );
    let text = analysis.categories.log_text();
    assert!(text.contains("Log category   : 'Uncategorized'"), "{text}");
    assert!(
        text.contains(
            "  Log category   : 'Inductor'\n    Process      : 'EngineCore_DP0 pid=164'\n    Start date   : \
             '01-23 15:49:11.000'\n    End date     : '01-23 15:49:41.000'\n    Elapsed      : 30.000\n"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "  End line     : 4 '(APIServer pid=1) INFO 01-23 15:48:33 [model.py:1510] Using max model len 32768'"
        ),
        "{text}"
    );
}

/// The same server killed by the OOM killer while compiling: everything after "Dynamo bytecode transform" is
/// missing.
const CUT_SHORT: &str = "\
(APIServer pid=1) INFO 01-23 15:48:29 [api_server.py:1842] vLLM API server version 0.11.0
(APIServer pid=1) INFO 01-23 15:48:29 [utils.py:233] non-default args: {'model': 'Qwen/Qwen3-0.6B'}
(EngineCore_DP0 pid=164) INFO 01-23 15:48:47 [gpu_model_runner.py:2602] Starting to load model Qwen/Qwen3-0.6B...
(EngineCore_DP0 pid=164) INFO 01-23 15:49:08 [gpu_model_runner.py:2653] Model loading took 3.8844 GiB and 20.442057 seconds
(EngineCore_DP0 pid=164) INFO 01-23 15:49:11 [backends.py:559] Dynamo bytecode transform time: 3.29 s
";

#[test]
fn missing_phases_are_zero_and_named_as_upstream_reports_partial_logs() {
    let analysis = analyze(CUT_SHORT, &source()).unwrap();
    let m = &analysis.metrics;
    assert_eq!(
        (m.load.time, m.dynamo_bytecode_transform),
        (20.442057, 3.29)
    );
    assert_eq!((m.torch_compile, m.compile_graph), (0.0, 0.0));
    // Never ready: no ready time, and the brief's start-to-ready is 0 as upstream's "vLLM Start(secs)".
    assert_eq!(m.vllm_ready_timestamp, 0.0);
    assert_eq!(ModelLoadSummary::new(&analysis).vllm_start_s, 0.0);
    assert_eq!(analysis.load_format, UNKNOWN_LOAD_FORMAT);
    assert!(!analysis.sleep_mode);
    assert_eq!(
        analysis.missing,
        [
            AVAILABLE_ROUTES,
            CACHED_COMPILED_GRAPH,
            COMPILED_GRAPH,
            TORCH_COMPILE,
            INITIAL_FREE_MEMORY,
            FREE_MEMORY_AFTER_PROFILING,
            MEMORY_PROFILING
        ]
    );
    let dump = analysis.categories.dump();
    assert_eq!(category(&dump, "Model Loading").elapsed, 21.0);
    assert_eq!(category(&dump, "Pytorch Compilation").elapsed, 0.0);
    assert_eq!(category(&dump, "CUDA Graph Capture").elapsed, 0.0);
}

/// A vLLM 0.6 (V0 engine) startup: no `[` before the file name, "GB" and a worker process, "Memory profiling
/// takes" at info level, no "init engine". And a newer compile line naming a compile range.
const V0_LOG: &str = "\
INFO 07-23 20:47:10 api_server.py:495] vLLM API server version 0.6.1
INFO 07-23 20:47:10 api_server.py:496] args: Namespace(model='meta-llama/Llama-3.1-8B', load_format='auto')
INFO 07-23 20:47:15 llm_engine.py:232] Initializing an LLM engine (v0.6.1) with config: model='meta-llama/Llama-3.1-8B', load_format=LoadFormat.AUTO, tensor_parallel_size=2
(VllmWorkerProcess pid=532) INFO 07-23 20:47:21 model_runner.py:997] Starting to load model meta-llama/Llama-3.1-8B...
(VllmWorkerProcess pid=532) INFO 07-23 20:47:40 model_runner.py:1008] Model loading took 7.5122 GB and 18.250000 seconds
(VllmWorkerProcess pid=532) INFO 07-23 20:49:31 worker.py:241] Memory profiling takes 129.95 seconds
(VllmWorkerProcess pid=532) INFO 07-23 20:49:40 backends.py:278] Compiling a graph for compile range (1, 2048) takes 15.02 s
INFO 07-23 20:50:02 api_server.py:540] Available routes are:
";

#[test]
fn an_older_vllm_is_read_by_the_same_markers() {
    let analysis = analyze(V0_LOG, &source()).unwrap();
    let m = &analysis.metrics;
    assert_eq!((m.load.size, m.load.time), (7.5122, 18.25));
    assert_eq!(m.memory_profiling.time, 129.95);
    // No "non-default args:" line (vLLM before 0.24 had none either): no start, so the ready time is not taken.
    assert_eq!((m.vllm_start_timestamp, m.vllm_ready_timestamp), (0.0, 0.0));
    // "compile range (1, 2048) takes 15.02 s": the seconds are the last number (upstream's first is the 1).
    assert_eq!(m.compile_graph, 15.02);
    // "load_format=LoadFormat.AUTO," is no value upstream knows.
    assert_eq!(analysis.load_format, UNKNOWN_LOAD_FORMAT);
    let dump = analysis.categories.dump();
    // The worker process: "Starting to load model" 20:47:21 → "Model loading took" 20:47:40.
    assert_eq!(category(&dump, "Model Loading").elapsed, 19.0);
    // The API server's version line starts it at 20:47:10, but this vLLM logs no "Using max model len": 0.
    assert_eq!(category(&dump, "Get Model Info").elapsed, 0.0);
}

#[test]
fn a_graph_loaded_from_the_cache_is_timed_by_its_last_number() {
    let log = "(EngineCore_DP0 pid=7) INFO 03-18 13:41:26 [backends.py:267] Directly load the compiled graph(s) \
               for compile range (1, 8192) from the cache, took 1.234 s\n\
               (EngineCore_DP0 pid=7) INFO 03-18 13:41:27 [backends.py:278] Compiling a graph for compile range \
               (1, 8192) takes 9.50 s\n";
    let analysis = analyze(log, &source()).unwrap();
    // The first of the two wins; the other is not read once one is set (upstream's `continue` and guard).
    assert_eq!(analysis.metrics.load_cached_compiled_graph, 1.234);
    assert_eq!(analysis.metrics.compile_graph, 0.0);
}

#[test]
fn a_log_with_none_of_the_lines_is_an_error_naming_it() {
    let err = analyze("hello\nworld\n", &source()).unwrap_err();
    let text = err.to_string();
    assert!(
        text.starts_with("vllm-0 vllm: none of the vLLM startup lines"),
        "{text}"
    );
    assert!(
        text.contains("Model loading took") && text.contains("torch.compile takes"),
        "{text}"
    );
}

#[test]
fn the_lines_after_a_launcher_or_tensorizer_marker_are_the_ones_categorized() {
    // A launcher's own uvicorn comes first; the figures still read every line, the phases only what follows.
    let log = "\
(EngineCore_DP0 pid=1) INFO 01-23 10:00:00 [core.py:644] Waiting for init message from front-end.
INFO:     Uvicorn running on http://0.0.0.0:8001 (Press CTRL+C to quit)
(EngineCore_DP0 pid=2) INFO 01-23 10:01:00 [core.py:644] Waiting for init message from front-end.
(EngineCore_DP0 pid=2) INFO 01-23 10:01:05 [gpu_model_runner.py:2602] Starting to load model m...
";
    let dump = analyze(log, &source()).unwrap().categories.dump();
    // 10:01:00 → 10:01:05, not from 10:00:00.
    assert_eq!(category(&dump, "Worker Initialization").elapsed, 5.0);
    let tensorizer = "\
(EngineCore_DP0 pid=1) INFO 01-23 10:00:00 [core.py:644] Waiting for init message from front-end.
INFO 01-23 10:00:30 End model Qwen/Qwen3-0.6B serialization
(EngineCore_DP0 pid=2) INFO 01-23 10:01:00 [core.py:644] Waiting for init message from front-end.
(EngineCore_DP0 pid=2) INFO 01-23 10:01:07 [gpu_model_runner.py:2602] Starting to load model m...
";
    let dump = analyze(tensorizer, &source()).unwrap().categories.dump();
    assert_eq!(category(&dump, "Worker Initialization").elapsed, 7.0);
}

#[test]
fn the_gpu_block_lists_one_gpu_per_line() {
    let log = "\
--- gpu scenario start name: vllm
gpu_uuid='GPU-1234' gpu_name='NVIDIA H100 80GB HBM3' compute_cap='9.0' persistence_mode='Enabled'
--- gpu scenario end name: vllm
(APIServer pid=1) INFO 01-23 15:48:29 [utils.py:233] non-default args: {}
";
    let gpus = analyze(log, &source()).unwrap().gpus;
    assert_eq!(
        gpus,
        [Gpu {
            uuid: "GPU-1234".to_owned(),
            name: "NVIDIA H100 80GB HBM3".to_owned(),
            compute_cap: "9.0".to_owned(),
            persistence_mode: "Enabled".to_owned(),
        }]
    );
}

#[test]
fn dates_are_month_day_time_with_optional_milliseconds_in_the_given_year() {
    let stamp = extract_datetime(
        "(APIServer pid=1) INFO 01-23 15:48:29 [api_server.py:1842] x",
        2025,
    )
    .unwrap();
    assert_eq!(stamp.unix_ms, 1_737_647_309_000);
    let with_ms = extract_datetime("INFO 01-23 15:48:29.250 [x.py:1] y", 2025).unwrap();
    assert_eq!(with_ms.unix_ms, 1_737_647_309_250);
    assert_eq!(with_ms.month_day_time(), "01-23 15:48:29.250");
    // strptime refuses these, and the line then has no date.
    assert_eq!(extract_datetime("INFO 13-23 15:48:29 x", 2025), None);
    assert_eq!(extract_datetime("INFO 02-29 00:00:00 x", 2025), None);
    assert!(extract_datetime("INFO 02-29 00:00:00 x", 2024).is_some());
    assert_eq!(
        extract_datetime("Loading safetensors checkpoint shards: 100%", 2025),
        None
    );
}

#[test]
fn numbers_are_read_as_upstreams_float_regex_reads_them() {
    assert_eq!(
        extract_floats("took 15.2209 GB and 12.221976 seconds"),
        [15.2209, 12.221976]
    );
    assert_eq!(
        extract_floats("range (1, 2048) takes 15.02 s"),
        [1.0, 2048.0, 15.02]
    );
    // A sign only on a decimal; "1.2.3" is 1.2 then .3.
    assert_eq!(
        extract_floats("-5 and +0.5 and 1.2.3"),
        [5.0, 0.5, 1.2, 0.3]
    );
}

#[test]
fn the_process_is_the_last_parenthesis_with_a_pid() {
    let line = "(EngineCore_DP0 pid=191) INFO 03-18 13:32:40 [cuda.py:351] Using FLASHINFER attention backend out \
                of potential backends: ('FLASHINFER', 'TRITON_ATTN')";
    assert_eq!(
        lines::process_from_line(line),
        Some(Process {
            name: "EngineCore_DP0".to_owned(),
            pid: 191
        })
    );
    assert_eq!(
        lines::process_from_line("(VllmWorkerProcess pid=x1) INFO"),
        Some(Process {
            name: "VllmWorkerProcess".to_owned(),
            pid: 0
        })
    );
    assert_eq!(lines::process_from_line("INFO 01-23 (v0.11.0)"), None);
}

#[test]
fn upstreams_patterns_need_only_alternation_and_any_character() {
    fn all(defs: &[categories::CategoryDef], out: &mut Vec<Pattern>) {
        for def in defs {
            out.extend([def.start, def.end]);
            all(def.children, out);
        }
    }
    let mut patterns = Vec::new();
    all(DEFINED_CATEGORIES, &mut patterns);
    assert!(patterns.iter().all(|p| p.is_supported()), "{patterns:?}");
    // `.` is any character, as in Python's re; `|` separates alternatives.
    assert!(Pattern("torch.compile takes").matches("torch_compile takes"));
    assert!(Pattern("vLLM API server version| version ").matches("Initializing engine version 2"));
    assert!(!Pattern("vLLM API server version| version ").matches("v0.11.0"));
}

#[test]
fn the_analysis_text_has_upstreams_labels_and_widths() {
    let analysis = analyze(V1_LOG, &source()).unwrap();
    let result = NopResult::new(&analysis, &source(), 1_737_647_000.0, 1_737_647_010.5);
    let text = analysis_text(&result);
    for expected in [
        "  Sleep Mode On        : True\n",
        // Python's str() of the args dict, in the logged order.
        "    Args               : {'model_tag': 'Qwen/Qwen3-0.6B', 'model': 'Qwen/Qwen3-0.6B', 'enable_sleep_mode': True}\n",
        "  Start                             : 2025-01-23T15:43:20.000000+00:00\n",
        "  Elapsed(secs)                     :  10.500\n",
        // 1737647432 − 1737647309.
        "    vLLM Start(secs)                : 123.000\n",
        "      Elapsed(secs)                 :  20.442\n",
        // 3.8844 / 20.442057 = 0.19002.
        "      Rate(GiB/secs)                :   0.190\n",
        "    Compiled Graph\n      Compile(secs)                 :  10.000\n",
        "    Torch Compile(secs)             :   13.29\n",
        "        Initial                     :   78.50\n",
        // The wake 10 s after the sleep; a wake frees nothing.
        "    wake          10.000         0.250                                \n",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in\n{text}");
    }
    // The sleep is 88 s after ready (15:50:32 → 15:52:00).
    assert!(
        text.contains("    sleep         88.000         0.812           60.50            1.25\n"),
        "{text}"
    );
    // Categories, then the compilation's children and their total, then the total of the top level:
    // 0 + 0 + 4 + 11 + 21 + 30 + 48 + 1 = 115.
    let rows: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.contains("Category"))
        .collect();
    assert!(rows[2].starts_with("    Detect Platform"), "{rows:?}");
    assert!(rows[8].starts_with("      Dynamo"), "{rows:?}");
    assert!(
        rows[10].starts_with("      Total") && rows[10].ends_with("30.000"),
        "{rows:?}"
    );
    assert!(
        rows.last()
            .is_some_and(|l| l.starts_with("    Total") && l.ends_with("115.000")),
        "{rows:?}"
    );
}

#[test]
fn the_result_file_has_upstreams_fields_in_order() {
    let analysis = analyze(V1_LOG, &source()).unwrap();
    let result = NopResult::new(&analysis, &source(), 1.0, 2.0);
    let json = serde_json::to_value(&result).unwrap();
    let keys = |v: &serde_json::Value| -> Vec<String> {
        let mut keys: Vec<String> = v
            .as_object()
            .map(|o| o.keys().cloned().collect())
            .unwrap_or_default();
        keys.sort();
        keys
    };
    let metrics = &json["vllm_metrics"][0];
    // `load_cached_compiled_graph` is 0 and left out, as upstream's dump does.
    assert_eq!(
        keys(metrics),
        [
            "categories",
            "compile_graph",
            "dynamo_bytecode_transform",
            "load",
            "memory_profiling",
            "name",
            "pod_start",
            "size",
            "sleep_wake",
            "torch_compile",
            "vllm_ready_timestamp",
            "vllm_start_timestamp"
        ]
    );
    assert_eq!(json["version"], "0.1");
    assert_eq!(json["scenario"]["load_format"], "auto");
    assert_eq!(json["time"]["duration"], 1.0);
    assert_eq!(metrics["sleep_wake"][0]["type"], "sleep");
    assert_eq!(metrics["categories"][1]["title"], "LLM Imports");
    assert!(metrics["categories"][1].get("process").is_none());
    // The YAML keeps the declaration order.
    let yaml = serde_saphyr::to_string(&result).unwrap();
    let order: Vec<usize> = [
        "name:",
        "pod_start:",
        "vllm_start_timestamp:",
        "load:",
        "torch_compile:",
    ]
    .iter()
    .map(|k| yaml.find(k).unwrap_or(usize::MAX))
    .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{yaml}");
}
