//! Strict where it matters, through the real binary: a typo that would change what is sent, when, or what is
//! measured fails before anything runs — a near-miss profile key in every dialect, an override whose path (its
//! last key too) matches nothing, an experiment factor or level that matches nothing — with the file, line, key and
//! the fix; `--override-add` creates a key on purpose and `--lenient` turns the errors back into warnings. The
//! command line beats the profile (`--model`, `--endpoint`, `--tokenizer`) and the first line says so; the
//! messages for a missing model, an unresolved placeholder, an unreachable tokenizer hub and another dialect's
//! override path say what to do.

mod common;

use std::path::Path;
use std::process::Output;

use common::*;

/// The run's first line on standard output.
fn first_line(output: &Output) -> String {
    stdout(output).lines().next().unwrap_or_default().to_owned()
}

/// Asserts a refused run: exit 1, every `expected` text in the error, and nothing written to `out`.
fn refused(output: &Output, out: &Path, expected: &[&str]) {
    let err = stderr(output);
    assert_eq!(output.status.code(), Some(1), "{err}");
    for text in expected {
        assert!(err.contains(text), "expected {text:?} in:\n{err}");
    }
    let written = std::fs::read_dir(out).map_or(0, |d| d.count());
    assert_eq!(written, 0, "nothing is written before the checks pass");
}

/// Flags that shorten the bundled inference-perf sanity_random profile to a fraction of a second.
const SHORT_IP: [&str; 4] = [
    "--override",
    "load.stages.0.duration=1",
    "--override",
    "load.stages.0.rate=4",
];

#[test]
fn an_override_whose_last_key_is_missing_fails_naming_the_nearest_key_and_override_add() {
    let dir = tempfile::tempdir().expect("tmp");
    let out = dir.path().join("out");
    let output = run_profile(
        &out,
        "inference-perf",
        "sanity_random",
        "typo",
        &["--override", "load.stages.0.rat=5"],
    );
    refused(
        &output,
        &out,
        &[
            "inference-perf/sanity_random.yaml.in: 1 override(s) match nothing: `load.stages.0.rat` (`load.stages.0` \
             has no key `rat`) — did you mean `load.stages.0.rate`?",
            "give it with --override-add",
        ],
    );
}

#[test]
fn override_add_creates_a_key_the_run_uses_and_lenient_lets_an_override_create_it_with_a_warning() {
    let dir = tempfile::tempdir().expect("tmp");
    let out = dir.path().join("out");
    // vllm-benchmark's sanity_random sets no `random-input-len`: an --override of it is refused...
    let base = [
        "--override",
        "num-prompts=3",
        "--override",
        "max-concurrency=3",
    ];
    let output = run_profile(
        &out,
        "vllm-benchmark",
        "sanity_random",
        "refused",
        &[&base[..], &["--override", "random-input-len=7"]].concat(),
    );
    refused(
        &output,
        &out,
        &["`random-input-len` (no key of exactly that name at any depth)"],
    );
    // ...and created by --override-add, and the prompts are then 7 tokens long.
    let output = run_profile(
        &out,
        "vllm-benchmark",
        "sanity_random",
        "added",
        &[&base[..], &["--override-add", "random-input-len=7"]].concat(),
    );
    succeeded(&output);
    let records = common::requests_jsonl(&out.join("added/requests.jsonl")).expect("records");
    let inputs: Vec<u64> = records
        .lines()
        .map(|l| {
            let record: serde_json::Value = serde_json::from_str(l).expect("record");
            record["input_tokens"].as_u64().expect("input_tokens")
        })
        .collect();
    assert_eq!(inputs, [7, 7, 7]);
    // --lenient: a dotted --override whose last key is missing creates it, with a warning kept in run.json.
    let output = run_profile(
        &out,
        "inference-perf",
        "sanity_random",
        "lenient",
        &[
            &SHORT_IP[..],
            &["--lenient", "--override", "load.stages.0.rat=5"],
        ]
        .concat(),
    );
    succeeded(&output);
    assert!(
        stderr(&output).contains(
            "--lenient: --override `load.stages.0.rat` created a key the profile does not have"
        ),
        "{}",
        stderr(&output)
    );
    let meta = json(&out.join("lenient/run.json"));
    let notes = meta["profile_notes"].to_string();
    assert!(
        notes.contains("created") && notes.contains("load.stages.0.rat"),
        "{notes}"
    );
}

/// One profile per dialect with a misspelt key that changes the run, and the text its error must hold.
fn near_misses(dir: &Path) -> Vec<(&'static str, std::path::PathBuf, &'static str)> {
    vec![
        (
            "inference-perf",
            write(
                dir,
                "ip.yaml",
                "api:\n  type: completion\n  streamming: true\ndata:\n  type: random\n  input_distribution: {mean: 8, \
                 min: 4, max: 12, std_dev: 2}\n  output_distribution: {mean: 4, min: 2, max: 6, std_dev: 1}\nload:\n  \
                 stages: [{rate: 1, duration: 1}]\n",
            ),
            "ip.yaml: 1 key(s) the inference-perf dialect does not know, each one edit from a key that changes \
             the run: `api.streamming` (line 3): did you mean `api.streaming`?",
        ),
        (
            "guidellm",
            write(
                dir,
                "gl.yaml",
                "spec:\n  backend: {kind: openai_http, target: REPLACE_ENV_LLMDBENCH_HARNESS_STACK_ENDPOINT_URL}\n  \
                 data:\n    - {kind: synthetic_text, prompt_tokens: 8, output_tokens: 8}\n  profile: {kind: \
                 constant, rate: 1}\n  constraints:\n    - {kind: max_requests, count: 2, stoping_scope: current}\n",
            ),
            "(line 7): did you mean `spec.constraints[0].stopping_scope`?",
        ),
        (
            "vllm-benchmark",
            write(dir, "vb.yaml", "num-prompts: 2\nrequest-rte: 4\n"),
            "`request-rte` (line 2): did you mean `request-rate`?",
        ),
        (
            "inferencemax",
            write(dir, "im.yaml", "num-prompts: 2\nmax-concurency: 2\n"),
            "`max-concurency` (line 2): did you mean `max-concurrency`?",
        ),
        (
            "aiperf",
            write(
                dir,
                "ai.yaml",
                "model: m\nconcurency: 2\nrequest-count: 2\n",
            ),
            "ai.yaml:2: `concurency`: not an aiperf flag (aiperf refuses it) — did you mean `concurrency`?",
        ),
        (
            "mlperf",
            write(
                dir,
                "ml.yaml",
                "model: llama3_1-8b\nscenario: Server\ntarget_qsp: 3\n",
            ),
            "`target_qsp` (line 3): did you mean `target_qps`?",
        ),
        (
            "fmperf",
            write(
                dir,
                "fm.yaml",
                "model_name: m\nscenarios: short-input\nnum_user: 2\n",
            ),
            "fm.yaml:3: `num_user`: not an argument of fmperf's LMBenchmarkWorkload (upstream fails with a \
             TypeError) — did you mean `num_users`?",
        ),
    ]
}

#[test]
fn a_near_miss_profile_key_fails_in_every_dialect_naming_file_line_and_the_key_meant() {
    let dir = tempfile::tempdir().expect("tmp");
    let out = dir.path().join("out");
    for (harness, profile, expected) in near_misses(dir.path()) {
        let output = run_profile(&out, harness, &profile, harness, &[]);
        refused(&output, &out, &[expected]);
    }
}

#[test]
fn lenient_runs_a_near_miss_with_a_warning_and_strict_refuses_every_unknown_key() {
    let dir = tempfile::tempdir().expect("tmp");
    let out = dir.path().join("out");
    let profile = write(
        dir.path(),
        "p.yaml",
        "num-prompts: 2\nrequest-rte: 40\nmy-label: x\n",
    );
    let output = run_profile(&out, "vllm-benchmark", &profile, "lenient", &["--lenient"]);
    succeeded(&output);
    let err = stderr(&output);
    assert!(
        err.contains("p.yaml:2: `request-rte`: unknown key, ignored; did you mean `request-rate`?"),
        "{err}"
    );
    let notes = json(&out.join("lenient/run.json"))["profile_notes"].to_string();
    assert!(notes.contains("near_miss"), "{notes}");
    // A key near nothing is a warning by default, and refused with --strict.
    let far = write(dir.path(), "far.yaml", "num-prompts: 2\nmy-label: x\n");
    let output = run_profile(&out, "vllm-benchmark", &far, "far", &[]);
    succeeded(&output);
    assert!(
        stderr(&output).contains("`my-label`: unknown key, ignored"),
        "{}",
        stderr(&output)
    );
    let strict_out = dir.path().join("strict");
    let output = run_profile(&strict_out, "vllm-benchmark", &far, "strict", &["--strict"]);
    refused(
        &output,
        &strict_out,
        &["far.yaml: strict mode rejects 1 unknown key(s): `my-label`:2"],
    );
}

#[test]
fn an_override_in_another_dialects_path_names_this_dialects_key() {
    let dir = tempfile::tempdir().expect("tmp");
    let out = dir.path().join("out");
    for (harness, key, expected) in [
        (
            "guidellm",
            "load.stages.0.rate=5",
            "`load.stages.0.rate` is inference-perf's request rate; in a guidellm profile it is `spec.profile.rate`",
        ),
        (
            "inference-perf",
            "spec.profile.streams=4",
            "`spec.profile.streams` is guidellm's concurrency; in an inference-perf profile it is \
             `load.stages.0.concurrency_level`",
        ),
        (
            "inference-perf",
            "num-prompts=4",
            "`num-prompts` is vllm-benchmark's request count; in an inference-perf profile it is \
             `load.stages.0.num_requests`",
        ),
        (
            "vllm-benchmark",
            "spec.data.0.output_tokens=9",
            "`spec.data.0.output_tokens` is guidellm's output length; in a vllm-benchmark profile it is \
             `random-output-len`",
        ),
    ] {
        let output = run_profile(&out, harness, "sanity_random", "x", &["--override", key]);
        refused(&output, &out, &[expected]);
    }
}

#[test]
fn the_command_line_beats_the_profiles_endpoint_model_and_tokenizer_and_the_first_line_says_so() {
    // The simulator serves only the --model name: a request naming the profile's model would get a 404.
    let sim = SimProcess::start(&["--model", "cli-model", "--ttft", "5ms", "--itl", "1ms"]);
    let dir = tempfile::tempdir().expect("tmp");
    let out = dir.path().join("out");
    let profile = write(
        dir.path(),
        "own.yaml",
        "server:\n  type: vllm\n  base_url: http://127.0.0.1:9\n  model_name: profile-model\ntokenizer:\n  \
         pretrained_model_name_or_path: /nonexistent/tokenizer.json\napi:\n  type: completion\n  streaming: true\n\
         data:\n  type: random\n  input_distribution: {mean: 8, min: 4, max: 12, std_dev: 2}\n  output_distribution: \
         {mean: 4, min: 2, max: 6, std_dev: 1}\nload:\n  stages: [{rate: 4, duration: 1}]\n",
    );
    let output = run_profile(
        &out,
        "inference-perf",
        &profile,
        "cli",
        &[
            "--endpoint",
            &sim.url,
            "--model",
            "cli-model",
            "--tokenizer",
            "builtin",
        ],
    );
    succeeded(&output);
    assert_eq!(
        first_line(&output),
        format!(
            "llmbench: inference-perf {} against {} (--endpoint), model cli-model (--model, the profile's \
             profile-model overridden), tokenizer builtin (--tokenizer, the profile's /nonexistent/tokenizer.json \
             overridden)",
            profile.display(),
            sim.url
        )
    );
    let summary = json(&out.join("cli/summary.json"));
    let requests = &summary["requests"];
    assert!(requests["total"].as_u64() > Some(0), "{requests}");
    assert_eq!(requests["succeeded"], requests["total"], "{requests}");
    assert_eq!(json(&out.join("cli/run.json"))["model"], "cli-model");
}

#[test]
fn with_no_model_anywhere_the_run_says_pass_model_naming_the_placeholder() {
    let dir = tempfile::tempdir().expect("tmp");
    let out = dir.path().join("out");
    let output = run_profile(
        &out,
        "inference-perf",
        "sanity_random",
        "nomodel",
        &["--endpoint", "http://127.0.0.1:9"],
    );
    refused(
        &output,
        &out,
        &[
            "llmbench: error: no model to send: pass --model NAME (the profile's model is the placeholder \
             REPLACE_ENV_LLMDBENCH_DEPLOY_CURRENT_MODEL)",
        ],
    );
}

#[test]
fn an_unresolved_placeholder_names_the_flag_that_fills_it() {
    let dir = tempfile::tempdir().expect("tmp");
    let template = write(
        dir.path(),
        "t.yaml.in",
        "model: REPLACE_ENV_LLMDBENCH_DEPLOY_CURRENT_MODEL\nmax-model-len: \
         REPLACE_ENV_LLMDBENCH_DEPLOY_CURRENT_MAX_MODEL_LEN\nseed: REPLACE_ENV_MY_SEED\n",
    );
    let output = llmbench()
        .args(["render", "--harness", "vllm-benchmark", "--template"])
        .arg(&template)
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(1));
    let err = stderr(&output);
    assert!(
        err.contains(
            "; pass --model NAME (the profile's model is the placeholder REPLACE_ENV_LLMDBENCH_DEPLOY_CURRENT_MODEL), \
             --max-model-len TOKENS (the profile's context length is the placeholder \
             REPLACE_ENV_LLMDBENCH_DEPLOY_CURRENT_MAX_MODEL_LEN), --set MY_SEED=VALUE"
        ),
        "{err}"
    );
}

#[test]
fn a_tokenizer_hub_that_cannot_be_reached_says_use_builtin_or_a_tokenizer_json() {
    let dir = tempfile::tempdir().expect("tmp");
    let out = dir.path().join("out");
    let output = llmbench()
        .args([
            "run",
            "--harness",
            "inference-perf",
            "--profile",
            "sanity_random",
        ])
        .args(["--endpoint", "http://127.0.0.1:9", "--model", "org/model"])
        // The tokenizer is the subject, not the server (which the pre-flight would find dead first).
        .arg("--no-preflight")
        .args(["--run-id", "hub", "--output"])
        .arg(&out)
        // Nothing listens on port 9: the download fails at once, without the network.
        .env("HF_ENDPOINT", "http://127.0.0.1:9")
        .env("HF_HOME", dir.path().join("hf"))
        .env_remove("HF_HUB_CACHE")
        .env_remove("HF_HUB_OFFLINE")
        .output()
        .expect("runs");
    refused(
        &output,
        &out,
        &[
            "cannot reach the Hugging Face hub to download the tokenizer \
             http://127.0.0.1:9/org/model/resolve/main/tokenizer.json (",
            "use --tokenizer builtin or a tokenizer.json",
        ],
    );
}

/// `llmbench experiment FILE --output OUT --id ID EXTRA…`.
fn experiment(file: &Path, out: &Path, extra: &[&str]) -> Output {
    llmbench()
        .arg("experiment")
        .arg(file)
        .arg("--output")
        .arg(out)
        .args(["--id", "x"])
        .args(extra)
        .output()
        .expect("runs")
}

/// A BenchmarkExperiment on guidellm's sanity_concurrent, one factor of `key` at `levels`.
fn factor_manifest(dir: &Path, key: &str, levels: &str) -> std::path::PathBuf {
    write(
        dir,
        "bx.yaml",
        &format!(
            "apiVersion: llmbench.dev/v1alpha1\nkind: BenchmarkExperiment\nmetadata:\n  name: f\nspec:\n  template:\n    \
             harness: guidellm\n    workload:\n      builtin: sanity_concurrent\n    stack:\n      model: llmbench-sim\n    \
             overrides:\n      - spec.constraints.0.seconds=1\n      - spec.data.0.prompt_tokens=16\n      - \
             spec.data.0.output_tokens=4\n  factors:\n    - name: streams\n      key: {key}\n      levels: {levels}\n"
        ),
    )
}

#[test]
fn a_misspelt_factor_key_or_a_level_that_does_not_fit_fails_before_any_run_with_the_line() {
    let dir = tempfile::tempdir().expect("tmp");
    let out = dir.path().join("out");
    let manifest = factor_manifest(dir.path(), "spec.profile.stream", "[\"1\", \"4\"]");
    let output = experiment(&manifest, &out, &[]);
    refused(
        &output,
        &out,
        &[&format!(
            "{}:18: treatment `streams-1`: guidellm/sanity_concurrent.yaml.in: 1 override(s) match nothing: \
             `spec.profile.stream` (`spec.profile` has no key `stream`) — did you mean `spec.profile.streams`?",
            manifest.display()
        )],
    );
    // A level the profile's key cannot take fails too, before the first run (the first level is fine).
    let manifest = factor_manifest(dir.path(), "spec.profile.streams", "[\"1\", \"many\"]");
    let output = experiment(&manifest, &out, &[]);
    refused(
        &output,
        &out,
        &[
            &format!("{}:18: treatment `streams-many`", manifest.display()),
            "`spec.profile.streams`",
        ],
    );
}

#[test]
fn treatments_that_run_the_same_workload_are_refused_unless_lenient() {
    let dir = tempfile::tempdir().expect("tmp");
    let out = dir.path().join("out");
    // `executable` names upstream's script: nothing llmbench sends or measures depends on it.
    let file = write(
        dir.path(),
        "same.yaml",
        "experiment: {name: same, harness: vllm-benchmark, profile: sanity_random}\nconstants: {num-prompts: 2}\n\
         treatments:\n  - name: a\n    executable: one.py\n  - name: b\n    executable: two.py\n",
    );
    let output = experiment(&file, &out, &[]);
    refused(
        &output,
        &out,
        &[&format!(
            "{}:5: treatments `a` and `b` run the same workload",
            file.display()
        )],
    );
    // A near miss in the file's own keys, and in a treatment's profile key, are refused the same way.
    let file = write(
        dir.path(),
        "near.yaml",
        "experiment: {name: near, harness: vllm-benchmark, profile: sanity_random}\nreset_cache: true\n\
         treatments:\n  - name: a\n    num-prompts: 2\n",
    );
    let output = experiment(&file, &out, &[]);
    refused(
        &output,
        &out,
        &["`reset_cache` (line 2): did you mean `reset_caches`?"],
    );
    let file = write(
        dir.path(),
        "level.yaml",
        "experiment: {name: level, harness: vllm-benchmark, profile: sanity_random}\ntreatments:\n  - name: a\n    \
         max-concurency: 2\n",
    );
    let output = experiment(&file, &out, &[]);
    refused(
        &output,
        &out,
        &[&format!(
            "{}:4: treatment `a`: vllm-benchmark/sanity_random.yaml.in: 1 override(s) match nothing: \
             `max-concurency` (no key of exactly that name at any depth) — did you mean `max-concurrency`?",
            file.display()
        )],
    );
    // --lenient runs the same-workload pair, warning.
    let file = dir.path().join("same.yaml");
    let output = experiment(&file, &out, &["--lenient"]);
    succeeded(&output);
    assert!(
        stderr(&output).contains("--lenient: ")
            && stderr(&output).contains("run the same workload"),
        "{}",
        stderr(&output)
    );
}
