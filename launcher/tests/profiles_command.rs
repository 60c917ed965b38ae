//! `llmbench profiles list` and `llmbench profiles show` through the binary: the library is discoverable, a
//! shown profile runs as a file, and a name that is ambiguous or unknown gets the fix.

mod common;

use common::*;

fn profiles(args: &[&str]) -> std::process::Output {
    llmbench()
        .arg("profiles")
        .args(args)
        .output()
        .expect("runs")
}

#[test]
fn list_shows_each_profiles_purpose_and_the_flags_its_placeholders_need() {
    let output = profiles(&["list"]);
    succeeded(&output);
    let table = stdout(&output);
    let header = table.lines().next().unwrap_or_default();
    assert!(
        header.starts_with("HARNESS") && header.contains("NAME") && header.contains("PURPOSE"),
        "{table}"
    );
    let row = table
        .lines()
        .find(|l| l.starts_with("inference-perf") && l.contains(" sanity_random "))
        .expect("inference-perf sanity_random is listed");
    assert!(row.contains("30-second smoke test at 1 req/s"), "{row}");
    assert!(row.ends_with("--model --tokenizer --endpoint"), "{row}");
    let dataset = table
        .lines()
        .find(|l| l.starts_with("vllm-benchmark") && l.contains(" sharegpt "))
        .expect("vllm-benchmark sharegpt is listed");
    assert!(
        dataset.contains("--set LLMDBENCH_RUN_DATASET_DIR"),
        "{dataset}"
    );

    let output = profiles(&["list", "--harness", "aiperf"]);
    succeeded(&output);
    let rows: Vec<String> = stdout(&output)
        .lines()
        .skip(1)
        .take_while(|l| !l.is_empty())
        .map(str::to_owned)
        .collect();
    assert_eq!(rows.len(), 7, "{rows:?}");
    assert!(rows.iter().all(|r| r.starts_with("aiperf ")), "{rows:?}");
}

#[test]
fn a_shown_profile_runs_as_a_profile_file() {
    let output = profiles(&["show", "sanity_random", "--harness", "vllm-benchmark"]);
    succeeded(&output);
    let text = stdout(&output);
    assert!(
        text.starts_with("# vllm-benchmark/sanity_random.yaml.in: 20-prompt smoke test"),
        "{text}"
    );
    assert!(
        text.contains("#   REPLACE_ENV_LLMDBENCH_DEPLOY_CURRENT_MODEL        --model"),
        "{text}"
    );
    assert!(
        text.contains("# Run it: llmbench run --harness vllm-benchmark --profile sanity_random"),
        "{text}"
    );
    let dir = tempfile::tempdir().expect("tmp");
    let file = write(dir.path(), "mine.yaml.in", &text);
    let ran = run_profile(
        dir.path(),
        "vllm-benchmark",
        &file,
        "r",
        &[
            "--requests",
            "2",
            "--input-tokens",
            "8",
            "--output-tokens",
            "2",
        ],
    );
    succeeded(&ran);
    let records = common::requests_jsonl(&dir.path().join("r/requests.jsonl")).expect("records");
    assert_eq!(records.lines().count(), 2);
}

#[test]
fn an_ambiguous_or_unknown_name_says_how_to_fix_it() {
    let output = profiles(&["show", "random_concurrent"]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        stderr(&output),
        "llmbench: error: `random_concurrent` is a profile of inference-perf, inferencemax, vllm-benchmark; pick \
         one with --harness\n  help: llmbench profiles show random_concurrent --harness inference-perf\n"
    );
    let output = profiles(&["show", "sanity_randm"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).starts_with(
            "llmbench: error: no bundled profile `sanity_randm` — did you mean `sanity_random` (guidellm, \
             inference-perf, vllm-benchmark)?\n  help: `llmbench profiles list` lists them"
        ),
        "{}",
        stderr(&output)
    );
    let output = profiles(&["show", "multi-turn", "--harness", "inference-perf"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains(
            "help: `multi-turn` is a profile of guidellm: llmbench profiles show multi-turn --harness guidellm"
        ),
        "{}",
        stderr(&output)
    );
}
