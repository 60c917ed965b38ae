//! `llmbench experiment` through the real binary: an llm-d-benchmark experiment file run unchanged and a
//! BenchmarkExperiment manifest against the embedded simulator, with every output file; bad experiments refused
//! before anything runs; failing runs reported (and stopping the experiment with stopOnFailure); hooks recorded;
//! SIGINT stopping the experiment after the current run; and `experiment report` rebuilding the comparison from the
//! files, as the operator's collector runs it.

mod common;

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

fn llmbench() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_llmbench"));
    command.env("RUST_LOG", "warn").env_remove("HTTP_PROXY");
    command
}

/// `llmbench experiment FILE --output OUT --id ID EXTRA…`, run to its end.
fn experiment(file: &Path, out: &Path, id: &str, extra: &[&str]) -> Output {
    llmbench()
        .arg("experiment")
        .arg(file)
        .arg("--output")
        .arg(out)
        .args(["--id", id])
        .args(extra)
        .output()
        .expect("runs")
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples")
        .join(name)
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write fixture");
    path
}

fn json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn yaml(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn csv_rows(path: &Path) -> Vec<csv::StringRecord> {
    csv::Reader::from_path(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .records()
        .map(|r| r.expect("a CSV row"))
        .collect()
}

/// The outputs every experiment writes, besides its runs.
const OUTPUTS: [&str; 4] = [
    "experiment.json",
    "comparison.json",
    "treatment_comparison.csv",
    "experiment-summary.yaml",
];

/// Flags that make a vllm-benchmark random_concurrent run take milliseconds against the embedded simulator.
const SHORT_VLLM: [&str; 10] = [
    "--override",
    "num-prompts=16",
    "--override",
    "random-input-len=32",
    "--override",
    "random-output-len=8",
    "--sim-ttft",
    "1ms",
    "--sim-itl",
    "1ms",
];

#[test]
fn the_llm_d_max_concurrency_sweep_runs_unchanged_against_the_simulator() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The upstream file, byte for byte, beside nothing else: harness and profile come from the command line, as
    // its own usage comment passes them (`--harness vllm-benchmark --workload random_concurrent.yaml`).
    let file = dir.path().join("max-concurrency-sweep.yaml");
    std::fs::copy(fixture("llm-d-benchmark/max-concurrency-sweep.yaml"), &file).expect("copy");
    let out = dir.path().join("experiments");
    let mut extra = vec![
        "--harness",
        "vllm-benchmark",
        "--profile",
        "random_concurrent.yaml",
    ];
    extra.extend(SHORT_VLLM);
    let output = experiment(&file, &out, "sweep", &extra);
    assert!(
        output.status.success(),
        "{}\n{}",
        stdout(&output),
        stderr(&output)
    );
    let exp = out.join("sweep");
    for file in OUTPUTS {
        assert!(exp.join(file).is_file(), "{file} is missing");
    }
    let plan = json(&exp.join("experiment.json"));
    assert_eq!(plan["schema"], "llmbench.experiment/v1");
    assert_eq!(plan["source_format"], "llm-d-benchmark");
    assert_eq!(plan["name"], "max-concurrency-sweep");
    assert_eq!(plan["profile"], "random_concurrent");
    let runs = plan["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 4);
    for (run, concurrency) in runs.iter().zip([8, 16, 24, 32]) {
        let name = format!("conc{concurrency}-r1");
        assert_eq!(run["dir"], name.as_str());
        assert_eq!(run["status"], "succeeded", "{run}");
        let run_dir = exp.join(&name);
        let meta = json(&run_dir.join("run.json"));
        assert_eq!(meta["stages"][0]["concurrency"], concurrency, "{name}");
        let profile = std::fs::read_to_string(run_dir.join("profile.yaml")).expect("profile.yaml");
        assert!(
            profile.contains(&format!("max-concurrency: {concurrency}\n")),
            "{profile}"
        );
        let summary = json(&run_dir.join("summary.json"));
        assert_eq!(summary["requests"]["succeeded"], 16);
    }
    let comparison = json(&exp.join("comparison.json"));
    let rows = comparison["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 4);
    assert_eq!(rows[0]["levels"]["max-concurrency"], "8");
    let csv = csv_rows(&exp.join("treatment_comparison.csv"));
    let dirs: Vec<&str> = csv.iter().map(|r| &r[0]).collect();
    assert_eq!(dirs, ["conc8-r1", "conc16-r1", "conc24-r1", "conc32-r1"]);
    assert_eq!(&csv[0][1], "benchmark_report_v0.2,_stage_0.yaml");
    let summary = yaml(&exp.join("experiment-summary.yaml"));
    assert_eq!(summary["experiment"], "max-concurrency-sweep");
    assert_eq!(summary["total_run_treatments"], 4);
    assert_eq!(summary["treatments"][0]["status"], "success");
    assert_eq!(summary["treatments"][0]["run_treatments"], "4/4");
    let text = stdout(&output);
    assert!(
        text.contains("conc32") && text.contains("req/s (mean±sd)"),
        "{text}"
    );
    // The table ends with the verdict and the best treatment, then where the results are.
    assert!(
        text.contains(&format!(
            "\nverdict: 4 treatments compared, no SLO to judge them by\nbest: {} (the highest output tok/s)\nresults: {}",
            comparison["best"].as_str().expect("a best treatment"),
            exp.display()
        )),
        "{text}"
    );
}

/// A 2 × 2 matrix of vllm-benchmark keys, twice.
const MATRIX: &str = "apiVersion: llmbench.dev/v1alpha1
kind: BenchmarkExperiment
metadata:
  name: matrix
spec:
  template:
    harness: vllm-benchmark
    workload: {builtin: random_concurrent}
    stack: {model: llmbench-sim}
    overrides: [random-input-len=32, random-output-len=8]
    slo: {ttftP99Ms: 5000, maxFailureRate: 0.0}
  factors:
    - {name: conc, key: max-concurrency, levels: ['2', '4']}
    - {name: prompts, key: num-prompts, levels: ['4', '8']}
  repeats: 2
";

#[test]
fn a_manifest_matrix_with_repeats_runs_every_point_and_aggregates_the_repeats() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = write(dir.path(), "matrix.yaml", MATRIX);
    let out = dir.path().join("out");
    let output = experiment(&file, &out, "m", &["--sim-ttft", "1ms", "--sim-itl", "1ms"]);
    assert!(
        output.status.success(),
        "{}\n{}",
        stdout(&output),
        stderr(&output)
    );
    let exp = out.join("m");
    let plan = json(&exp.join("experiment.json"));
    let dirs: Vec<&str> = plan["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .map(|r| r["dir"].as_str().expect("dir"))
        .collect();
    // Repeat-major: every treatment once, then again.
    assert_eq!(
        dirs,
        [
            "conc-2-prompts-4-r1",
            "conc-2-prompts-8-r1",
            "conc-4-prompts-4-r1",
            "conc-4-prompts-8-r1",
            "conc-2-prompts-4-r2",
            "conc-2-prompts-8-r2",
            "conc-4-prompts-4-r2",
            "conc-4-prompts-8-r2",
        ]
    );
    for d in &dirs {
        assert!(exp.join(d).join("summary.json").is_file(), "{d}");
    }
    let comparison = json(&exp.join("comparison.json"));
    let rows = comparison["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 4);
    for row in rows {
        assert_eq!(row["runs"], 2, "{row}");
        assert_eq!(row["requestsPerSecond"]["n"], 2, "{row}");
        assert_eq!(row["verdict"], "passed", "{row}");
    }
    assert_eq!(rows[3]["levels"]["conc"], "4");
    assert_eq!(rows[3]["levels"]["prompts"], "8");
    assert!(comparison["best"].is_string());
    assert_eq!(comparison["runs"].as_array().map(Vec::len), Some(8));
    assert_eq!(comparison["runs"][0]["figures"]["slo_met"], true);
    assert_eq!(csv_rows(&exp.join("treatment_comparison.csv")).len(), 8);
    let summary = yaml(&exp.join("experiment-summary.yaml"));
    assert_eq!(summary["total_matrix"], 4);
    assert_eq!(summary["succeeded"], 1);
    assert_eq!(summary["treatments"][0]["setup_treatment"], "default");
    assert!(
        !exp.join("benchmarks.json").exists(),
        "not a guidellm experiment"
    );

    // The collector's command: the same comparison from the files alone.
    let before = json(&exp.join("comparison.json"));
    std::fs::remove_file(exp.join("comparison.json")).expect("rm");
    let output = llmbench()
        .args(["experiment", "report"])
        .arg(&exp)
        .output()
        .expect("report runs");
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(json(&exp.join("comparison.json")), before);

    // compare.html opens with the table the terminal printed, the SLO verdict and the best, before any picture;
    // each factor gets its figures against its levels, the repeats' spread as error bars.
    let check_page = |page: &Path| {
        let html =
            std::fs::read_to_string(page).unwrap_or_else(|e| panic!("{}: {e}", page.display()));
        let table = html
            .find("<table class=\"treatments\">")
            .expect("the treatment table");
        assert!(
            table < html.find("<svg").expect("a picture"),
            "the table comes first"
        );
        for text in [
            "<th class=\"text\">conc</th><th class=\"text\">prompts</th><th>runs ok</th>",
            "<td class=\"text\">conc-4-prompts-8</td><td class=\"text\">4</td><td class=\"text\">8</td><td>2/2</td>",
            "SLO (TTFT p99 ≤ 5000 ms, failure rate ≤ 0): 4 of 4 treatment(s) with a finished run met it in every run.",
            "<p class=\"best\">Best: ",
            "error bars span its lowest to highest run (min–max)",
        ] {
            assert!(html.contains(text), "{} lacks `{text}`", page.display());
        }
        let best = comparison["best"].as_str().expect("a best");
        assert!(
            html.contains(&format!(
                "<tr class=\"best\"><td class=\"text\">{best}</td>"
            )),
            "the best row is not marked"
        );
    };
    let plots = exp.join("plots");
    check_page(&plots.join("compare.html"));
    for figure in ["by_conc", "by_prompts"] {
        assert!(
            plots.join(format!("{figure}.png")).is_file(),
            "{figure}.png"
        );
        let svg = std::fs::read_to_string(plots.join(format!("{figure}.svg"))).expect("svg");
        roxmltree::Document::parse(&svg).expect("well-formed SVG");
    }
    for png in std::fs::read_dir(&plots)
        .expect("plots/")
        .map(|e| e.expect("entry").path())
    {
        if png.extension().is_some_and(|e| e == "png") {
            let bytes = std::fs::metadata(&png).expect("stat").len();
            assert!(
                bytes <= 200 * 1024,
                "{} weighs {bytes} bytes",
                png.display()
            );
        }
    }
    // `llmbench plot DIR` of the experiment writes the same page.
    let replotted = dir.path().join("replotted");
    let output = llmbench()
        .arg("plot")
        .arg(&exp)
        .arg("--output")
        .arg(&replotted)
        .output()
        .expect("plot runs");
    assert!(output.status.success(), "{}", stderr(&output));
    check_page(&replotted.join("compare.html"));

    // A plan as the operator mounts it: the last run failed and left no directory.
    let mut plan = json(&exp.join("experiment.json"));
    plan["runs"][7]["status"] = "failed".into();
    plan["runs"][7]["error"] = "the launcher pod failed".into();
    std::fs::remove_dir_all(exp.join("conc-4-prompts-8-r2")).expect("rm run");
    let plan_file = write(dir.path(), "plan.json", &plan.to_string());
    let output = llmbench()
        .args(["experiment", "report"])
        .arg(&exp)
        .arg("--plan")
        .arg(&plan_file)
        .output()
        .expect("report runs");
    assert!(output.status.success(), "{}", stderr(&output));
    let rows = json(&exp.join("comparison.json"))["rows"].clone();
    assert_eq!(
        (rows[3]["runs"].clone(), rows[3]["failedRuns"].clone()),
        (1.into(), 1.into())
    );
    assert_eq!(
        json(&exp.join("experiment.json"))["runs"][7]["status"],
        "failed"
    );
    let summary = yaml(&exp.join("experiment-summary.yaml"));
    assert_eq!(summary["treatments"][0]["status"], "failed_run");
    assert_eq!(summary["treatments"][0]["run_treatments"], "3/4");
    assert_eq!(csv_rows(&exp.join("treatment_comparison.csv")).len(), 7);
}

/// llm-d-benchmark's model list: every treatment once per model, each model on its own embedded simulator (its
/// own stack), the model named in every request and shown as the table's `model` column.
#[test]
fn a_model_list_runs_every_treatment_once_per_model_each_on_its_own_stack() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = write(
        dir.path(),
        "models.yaml",
        "apiVersion: llmbench.dev/v1alpha1
kind: BenchmarkExperiment
metadata: {name: models}
spec:
  template:
    harness: vllm-benchmark
    workload: {builtin: random_concurrent}
    stack: {model: llmbench-sim}
    overrides: [random-input-len=16, random-output-len=4, num-prompts=3, max-concurrency=1]
  treatments:
    - {name: base}
",
    );
    let out = dir.path().join("out");
    let output = experiment(
        &file,
        &out,
        "m",
        &[
            "--models",
            "org/alpha,org/beta",
            "--sim-ttft",
            "1ms",
            "--sim-itl",
            "1ms",
        ],
    );
    assert!(
        output.status.success(),
        "{}\n{}",
        stdout(&output),
        stderr(&output)
    );
    assert!(
        stdout(&output).contains("2 embedded simulators, one per model"),
        "{}",
        stdout(&output)
    );
    let exp = out.join("m");
    let plan = json(&exp.join("experiment.json"));
    let treatments: Vec<(String, String)> = plan["treatments"]
        .as_array()
        .expect("treatments")
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap_or("").to_owned(),
                t["model"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    assert_eq!(
        treatments,
        [
            ("base-alpha".to_owned(), "org/alpha".to_owned()),
            ("base-beta".to_owned(), "org/beta".to_owned())
        ]
    );
    for (dir_name, model) in [("base-alpha-r1", "org/alpha"), ("base-beta-r1", "org/beta")] {
        let summary = json(&exp.join(dir_name).join("summary.json"));
        assert_eq!(summary["model"], model, "{dir_name}");
        // A simulator serving another model would have answered 404 to every request.
        assert_eq!(summary["requests"]["succeeded"], 3, "{dir_name}: {summary}");
    }
    let comparison = json(&exp.join("comparison.json"));
    let rows = comparison["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["levels"]["model"], "org/alpha");
    assert_eq!(rows[1]["levels"]["model"], "org/beta");
}

/// Runs a bad experiment and checks it is refused with `needle` in the message, exit 1, and nothing written.
fn refused(dir: &Path, file: &Path, extra: &[&str], needle: &str) {
    let out = dir.join("out");
    let output = experiment(file, &out, "bad", extra);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{needle}: {err}");
    assert!(err.contains(needle), "expected `{needle}` in: {err}");
    assert!(!out.exists(), "{needle}: {} was created", out.display());
}

#[test]
fn bad_experiments_are_refused_before_any_run_with_what_is_wrong() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    // A level of a key the profile does not have: named with its treatment and a suggestion.
    let typo = write(
        d,
        "typo.yaml",
        &MATRIX.replace("key: max-concurrency", "key: max-concurency"),
    );
    refused(d, &typo, &[], "treatment `conc-2-prompts-4`");
    refused(d, &typo, &[], "`max-concurency`");
    // The same in an llm-d file.
    let llmd_typo = write(
        d,
        "llmd-typo.yaml",
        "treatments:\n  - name: a\n    max-concurency: 8\n",
    );
    refused(
        d,
        &llmd_typo,
        &[
            "--harness",
            "vllm-benchmark",
            "--profile",
            "random_concurrent",
        ],
        "did you mean `max-concurrency`",
    );
    let empty = write(
        d,
        "empty.yaml",
        &MATRIX.replace(
            "  factors:\n    - {name: conc, key: max-concurrency, levels: ['2', '4']}\n    - {name: prompts, key: num-prompts, levels: ['4', '8']}\n",
            "  treatments: []\n",
        ),
    );
    refused(d, &empty, &[], "no treatments");
    let llmd_empty = write(
        d,
        "llmd-empty.yaml",
        "experiment: {harness: vllm-benchmark, profile: random_concurrent.yaml}\ntreatments: []\n",
    );
    refused(
        d,
        &llmd_empty,
        &[],
        "llmd-empty.yaml: line 2: the experiment has no treatments",
    );
    let zero = write(d, "zero.yaml", &MATRIX.replace("repeats: 2", "repeats: 0"));
    refused(d, &zero, &[], "repeats must be between 1 and 10, not 0");
    refused(
        d,
        &typo.with_file_name("matrix-ok.yaml"),
        &[],
        "cannot read",
    );
    let ok = write(d, "ok.yaml", MATRIX);
    refused(
        d,
        &ok,
        &["--repeats", "0"],
        "repeats must be between 1 and 10, not 0",
    );
    // A pause between runs longer than a run may last (744h, 31 days) is a typo, refused before the first run.
    refused(
        d,
        &ok,
        &["--cooldown", "744h"],
        "ordering.cooldown: `744h`: 2678400 s is above llmbench's limit of 2592000 s (30 days)",
    );
    // Setup treatments re-deploy the stack: refused unless each names a stack that is already up.
    let setup = write(
        d,
        "setup.yaml",
        "experiment: {harness: vllm-benchmark, profile: random_concurrent.yaml}\nsetup:\n  treatments:\n    \
         - {name: tp2, decode.parallelism.tensor: 2}\n    - {name: tp4, decode.parallelism.tensor: 4}\n\
         treatments:\n  - {name: c1, max-concurrency: 1}\n",
    );
    refused(
        d,
        &setup,
        &[],
        "setup.yaml: line 2: `setup` has 2 setup treatment(s)",
    );
    refused(
        d,
        &setup,
        &["--setup-endpoint", "tp2=http://127.0.0.1:9"],
        "missing: tp4",
    );
    refused(
        d,
        &setup,
        &[
            "--setup-endpoint",
            "tp2=http://127.0.0.1:9",
            "--setup-endpoint",
            "tp4=http://127.0.0.1:9",
            "--setup-endpoint",
            "tp8=http://127.0.0.1:9",
        ],
        "`tp8` is not a setup treatment",
    );
    // A capacity search whose objective names no metric, on the command line and in the manifest.
    refused(
        d,
        &ok,
        &["--capacity-search", "{load: rate, slo: [\"latency<=5ms\"]}"],
        "names no metric",
    );
    let search = write(
        d,
        "search.yaml",
        &format!("{MATRIX}  capacitySearch: {{load: concurrency, slo: [\"ttft_p98<=5ms\"]}}\n"),
    );
    refused(d, &search, &[], "`ttft_p98<=5ms` names no metric");
    // An unknown top-level key of an llm-d file: a warning, refused with --strict.
    let unknown = write(
        d,
        "unknown.yaml",
        "reset_cache: true\ntreatments:\n  - {name: a, max-concurrency: 2}\n",
    );
    refused(
        d,
        &unknown,
        &[
            "--strict",
            "--harness",
            "vllm-benchmark",
            "--profile",
            "random_concurrent",
        ],
        "`reset_cache` (line 1)",
    );
    // A list value cannot be an override.
    let list = write(
        d,
        "list.yaml",
        "treatments:\n  - {name: a, max-concurrency: [1, 2]}\n",
    );
    refused(
        d,
        &list,
        &[
            "--harness",
            "vllm-benchmark",
            "--profile",
            "random_concurrent",
        ],
        "list.yaml: line 2: treatments[0]: `max-concurrency` is a list",
    );
    // Running runs side by side is refused rather than half done.
    let parallel = write(
        d,
        "parallel.yaml",
        &format!("{MATRIX}  ordering: {{parallelism: 2}}\n"),
    );
    refused(d, &parallel, &[], "ordering.parallelism is 2");
}

/// Two treatments, the first of which cannot run: its prompts are longer than the simulator's context (32768
/// tokens), which the run's pre-flight finds before its clock starts; the server is still fine for the second.
const FAILING: &str =
    "experiment: {name: failing, harness: vllm-benchmark, profile: random_concurrent.yaml}
constants: {num-prompts: 2, random-output-len: 4}
treatments:
  - {name: too-long, random-input-len: 40000}
  - {name: fine, random-input-len: 16}
";

#[test]
fn a_failing_run_is_reported_and_the_experiment_goes_on_unless_told_to_stop() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sim = ["--sim-ttft", "1ms", "--sim-itl", "1ms"];
    let file = write(dir.path(), "failing.yaml", FAILING);
    let out = dir.path().join("out");
    let output = experiment(&file, &out, "go-on", &sim);
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    let plan = json(&out.join("go-on/experiment.json"));
    assert_eq!(plan["runs"][0]["status"], "failed");
    let error = plan["runs"][0]["error"].as_str().expect("error");
    assert!(
        error.contains("asks for more tokens than the server's context of 32768"),
        "{error}"
    );
    assert_eq!(plan["runs"][1]["status"], "succeeded");
    let comparison = json(&out.join("go-on/comparison.json"));
    assert_eq!(comparison["rows"][0]["failedRuns"], 1);
    assert_eq!(comparison["rows"][0]["verdict"], "failed");
    assert_ne!(comparison["best"], "too-long");
    assert!(stderr(&output).contains("1 of 2 runs failed"));

    // treatment_stop_on_error stops it; treatment_max_attempts retries in a fresh directory each time. Without the
    // pre-flight the too-long run starts and every request is answered 400, so each attempt leaves a directory.
    let sim = ["--sim-ttft", "1ms", "--sim-itl", "1ms", "--no-preflight"];
    let stopping = write(
        dir.path(),
        "stopping.yaml",
        &format!("treatment_stop_on_error: true\ntreatment_max_attempts: 2\n{FAILING}"),
    );
    let output = experiment(&stopping, &out, "stop", &sim);
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    let exp = out.join("stop");
    let plan = json(&exp.join("experiment.json"));
    assert_eq!(plan["runs"][0]["status"], "failed");
    let error = plan["runs"][0]["error"].as_str().expect("error");
    assert!(
        error.contains("none of the 2 requests succeeded") && error.contains("http_400"),
        "{error}"
    );
    assert_eq!(plan["runs"][0]["attempts"], 2);
    assert!(
        exp.join("too-long-r1.attempt1/run.json").is_file(),
        "the first attempt is kept aside"
    );
    assert!(
        exp.join("too-long-r1/run.json").is_file(),
        "the last attempt is the run's directory"
    );
    assert_eq!(plan["runs"][1]["status"], "skipped");
    assert!(!exp.join("fine-r1").exists());
    let summary = yaml(&exp.join("experiment-summary.yaml"));
    assert_eq!(summary["treatments"][0]["status"], "failed_run");

    // validate_failures: a run with any failed request counts as failed, so a run that partly fails does too.
    let validating = write(
        dir.path(),
        "validating.yaml",
        &format!("validate_failures: true\n{FAILING}"),
    );
    let output = experiment(&validating, &out, "validate", &sim);
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
}

#[test]
fn the_example_runs_with_its_hooks_recorded_and_one_guidellm_report_for_all_runs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out");
    let output = experiment(&example("local/experiment.yaml"), &out, "local", &[]);
    assert!(
        output.status.success(),
        "{}\n{}",
        stdout(&output),
        stderr(&output)
    );
    let exp = out.join("local");
    let plan = json(&exp.join("experiment.json"));
    assert_eq!(plan["runs"].as_array().map(Vec::len), Some(4));
    // Every run called the hook, and reset the simulator's prefix cache (cacheReset) before its clock started.
    for run in plan["runs"].as_array().expect("runs") {
        assert_eq!(run["status"], "succeeded", "{run}");
        let hook = &run["hooks"][0];
        assert_eq!(hook["name"], "health");
        assert_eq!(hook["status"], 200, "{hook}");
        assert!(
            hook["url"].as_str().is_some_and(|u| u.ends_with("/health")),
            "{hook}"
        );
        let meta = json(&exp.join(run["dir"].as_str().expect("dir")).join("run.json"));
        assert_eq!(meta["cache"]["reset"]["engine"], "vllm", "{meta:#}");
        assert_eq!(
            meta["cache"]["reset"]["calls"][0],
            serde_json::json!({"method": "POST", "path": "/reset_prefix_cache", "status": 200})
        );
    }
    // One server for the whole experiment: every run drove the same endpoint the hooks called.
    let endpoints: Vec<String> = ["streams-1-r1", "streams-4-r2"]
        .iter()
        .map(|d| {
            json(&exp.join(d).join("run.json"))["endpoint"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    assert_eq!(endpoints[0], endpoints[1]);
    assert!(
        plan["runs"][0]["hooks"][0]["url"]
            .as_str()
            .is_some_and(|u| u.starts_with(&endpoints[0]))
    );
    let merged = json(&exp.join("benchmarks.json"));
    let benchmarks = merged["benchmarks"].as_array().expect("benchmarks");
    assert_eq!(benchmarks.len(), 4);
    let first = json(&exp.join("streams-1-r1/benchmarks.json"));
    assert_eq!(benchmarks[0], first["benchmarks"][0]);
    let comparison = json(&exp.join("comparison.json"));
    assert_eq!(comparison["best"], "streams-4");
    assert_eq!(comparison["rows"][0]["verdict"], "passed");
}

#[test]
fn reset_caches_in_an_llm_d_file_resets_the_engines_prefix_cache_and_calls_vllms_other_resets() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = write(
        dir.path(),
        "reset.yaml",
        "reset_caches: true\ntreatments:\n  - {name: a, max-concurrency: 2}\n",
    );
    let out = dir.path().join("out");
    let mut extra = vec![
        "--harness",
        "vllm-benchmark",
        "--profile",
        "random_concurrent",
    ];
    extra.extend(SHORT_VLLM);
    let output = experiment(&file, &out, "reset", &extra);
    assert!(output.status.success(), "{}", stderr(&output));
    let plan = json(&out.join("reset/experiment.json"));
    let urls: Vec<&str> = plan["runs"][0]["hooks"]
        .as_array()
        .expect("hooks")
        .iter()
        .map(|h| {
            h["url"]
                .as_str()
                .unwrap_or_default()
                .rsplit('/')
                .next()
                .unwrap_or_default()
        })
        .collect();
    // The prefix cache is the run's own reset, found by its engine; vLLM's two other caches stay hooks.
    assert_eq!(urls, ["reset_mm_cache", "reset_encoder_cache"]);
    let dir = plan["runs"][0]["dir"].as_str().expect("dir");
    let meta = json(&out.join("reset").join(dir).join("run.json"));
    assert_eq!(meta["cache"]["reset"]["engine"], "vllm", "{meta:#}");
}

#[test]
fn setup_treatments_run_against_the_stacks_given_for_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Two "setups", one a stack that refuses connections: its run fails, the other's succeeds.
    let file = write(
        dir.path(),
        "setup.yaml",
        "experiment: {harness: vllm-benchmark, profile: random_concurrent.yaml}\nsetup:\n  treatments:\n    \
         - {name: down, decode.replicas: 1}\n    - {name: up, decode.replicas: 2}\ntreatments:\n  - {name: c2, max-concurrency: 2}\n",
    );
    let free_port = || {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("addr").port()
    };
    let closed = free_port();
    let port = free_port();
    let mut server = llmbench()
        .args([
            "sim",
            "--port",
            &port.to_string(),
            "--ttft",
            "1ms",
            "--itl",
            "1ms",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("sim starts");
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "the simulator did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    let url = format!("http://127.0.0.1:{port}");
    let out = dir.path().join("out");
    let mut extra = vec![
        "--setup-endpoint".to_owned(),
        format!("down=http://127.0.0.1:{closed}"),
        "--setup-endpoint".to_owned(),
        format!("up={url}"),
        "--model".to_owned(),
        "llmbench-sim".to_owned(),
        "--tokenizer".to_owned(),
        "builtin".to_owned(),
    ];
    extra.extend(SHORT_VLLM[..6].iter().map(|s| (*s).to_owned()));
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let output = experiment(&file, &out, "setups", &extra);
    let _ = server.kill();
    let _ = server.wait();
    // The stack that refuses connections fails its pre-flight: exit 6, not a run that failed under load.
    assert_eq!(
        output.status.code(),
        Some(6),
        "{}\n{}",
        stdout(&output),
        stderr(&output)
    );
    let plan = json(&out.join("setups/experiment.json"));
    let error = plan["runs"][0]["error"].as_str().expect("error");
    assert!(
        error.contains("pre-flight") && error.contains("connection refused"),
        "{error}"
    );
    assert_eq!(plan["setup_treatments"][1]["endpoint"], url.as_str());
    assert_eq!(
        plan["setup_treatments"][1]["overrides"][0],
        "decode.replicas=2"
    );
    assert_eq!(plan["treatments"][0]["name"], "down-c2");
    assert_eq!(plan["treatments"][1]["levels"]["setup"], "up");
    assert_eq!(plan["runs"][0]["status"], "failed");
    assert_eq!(plan["runs"][1]["status"], "succeeded");
    let summary = yaml(&out.join("setups/experiment-summary.yaml"));
    assert_eq!(summary["total_setup_treatments"], 2);
    assert_eq!(summary["total_matrix"], 2);
    assert_eq!(summary["treatments"][0]["setup_treatment"], "down");
    assert_eq!(summary["treatments"][0]["status"], "failed_run");
    assert_eq!(summary["treatments"][1]["status"], "success");
}

#[test]
fn sigint_stops_the_experiment_after_the_current_run_and_still_compares_what_ran() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out");
    let mut child = llmbench()
        .arg("experiment")
        .arg(example("local/experiment.yaml"))
        .arg("--output")
        .arg(&out)
        .args(["--id", "stopped"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starts");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    // Wait for the first run to end, then interrupt the second.
    let mut seen = String::new();
    for line in lines.by_ref() {
        let line = line.expect("line");
        seen.push_str(&line);
        seen.push('\n');
        if line.contains("[1/4]") {
            break;
        }
    }
    std::thread::sleep(Duration::from_millis(300));
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
    for line in lines {
        seen.push_str(&line.expect("line"));
        seen.push('\n');
    }
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        // A hang guard, not a timing: the interrupt grace is 5 s.
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the experiment did not stop"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(4), "{seen}");
    let exp = out.join("stopped");
    let plan = json(&exp.join("experiment.json"));
    assert_eq!(plan["interrupted"], true);
    assert_eq!(plan["runs"][0]["status"], "succeeded");
    assert_eq!(plan["runs"][2]["status"], "skipped");
    assert_eq!(plan["runs"][3]["status"], "skipped");
    assert!(!exp.join("streams-1-r2").exists());
    let comparison = json(&exp.join("comparison.json"));
    assert_eq!(comparison["rows"][0]["runs"], 1);
    assert!(seen.contains("results:"), "{seen}");
}

#[test]
fn experiment_report_says_which_run_was_killed_and_reports_what_it_recorded() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = write(
        dir.path(),
        "sweep.yaml",
        "treatments:\n  - name: conc4\n    max-concurrency: 4\n  - name: conc8\n    max-concurrency: 8\n",
    );
    let out = dir.path().join("out");
    // A second per request, four at a time: the first run keeps four requests in flight for a minute.
    let mut child = llmbench()
        .arg("experiment")
        .arg(&file)
        .arg("--output")
        .arg(&out)
        .args(["--id", "killed", "--harness", "vllm-benchmark"])
        .args(["--profile", "random_concurrent.yaml"])
        .args(["--override", "num-prompts=200"])
        .args(["--override", "random-input-len=32"])
        .args(["--override", "random-output-len=50"])
        .args(["--sim-ttft", "1ms", "--sim-itl", "20ms"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starts");
    let exp = out.join("killed");
    let records = exp.join("conc4-r1/requests.jsonl");
    let start = Instant::now();
    while common::recorded(&records) < 3 {
        // A hang guard, not a timing.
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the first run never recorded a request"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().expect("SIGKILL");
    child.wait().expect("reaped");
    let recorded = common::recorded(&records);

    let output = llmbench()
        .args(["experiment", "report"])
        .arg(&exp)
        .output()
        .expect("report runs");
    // 8: a run was killed.
    assert_eq!(
        output.status.code(),
        Some(8),
        "{}\n{}",
        stdout(&output),
        stderr(&output)
    );
    assert!(
        stderr(&output).contains("run conc4-r1 was killed"),
        "{}",
        stderr(&output)
    );
    let comparison = json(&exp.join("comparison.json"));
    let killed = &comparison["runs"][0];
    assert_eq!(killed["dir"], "conc4-r1");
    assert_eq!(killed["status"], "killed");
    // Its partial records are reported: figures for the run, kept out of the treatment's row.
    assert!(
        killed["figures"]["requests_per_second"].as_f64() > Some(0.0),
        "{killed:#}"
    );
    assert!(
        killed["error"]
            .as_str()
            .is_some_and(|e| e.contains("were in flight when the run was killed")),
        "{killed:#}"
    );
    assert_eq!(comparison["runs"][1]["status"], "pending");
    // Its own summary, rebuilt as `llmbench report` rebuilds it: every request it sent, recorded or lost.
    let summary = json(&exp.join("conc4-r1/summary.json"));
    assert_eq!(summary["run"]["state"], "incomplete");
    let finished = summary["run"]["finished"].as_u64().expect("finished");
    let lost = summary["requests"]["lost_in_flight"]
        .as_u64()
        .expect("lost_in_flight");
    assert_eq!(finished, recorded);
    assert!(lost > 0, "{summary:#}");
    assert_eq!(summary["run"]["sent"].as_u64(), Some(finished + lost));
    assert!(exp.join("conc4-r1/lost_in_flight.jsonl").is_file());
    let doe = yaml(&exp.join("experiment-summary.yaml"));
    assert_eq!(doe["failed"], 1, "{doe:#?}");
}
