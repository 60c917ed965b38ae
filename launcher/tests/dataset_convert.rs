//! `llmbench dataset convert IN.pkl OUT.jsonl`: a pickled pandas DataFrame (the MLPerf datasets' format) becomes
//! JSONL records, one per row, every column kept; something that is not a DataFrame pickle is refused with the
//! reason and no output.

use std::path::Path;
use std::process::Command;

fn llmbench() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_llmbench"));
    command.env("RUST_LOG", "warn").env_remove("HTTP_PROXY");
    command
}

fn fixture(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/mlperf-pickles")
        .join(name)
}

#[test]
fn a_pickled_dataframe_becomes_jsonl_records() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("orca.jsonl");
    let status = llmbench()
        .args(["dataset", "convert"])
        .arg(fixture("orca_pandas2_p5.pkl"))
        .arg(&out)
        .status()
        .expect("runs");
    assert!(status.success());
    let text = std::fs::read_to_string(&out).expect("the JSONL");
    let rows: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON record per line"))
        .collect();
    // make_fixtures.py's three rows; NaN and None become null.
    assert_eq!(
        rows,
        [
            serde_json::json!({"dataset": "orca", "input": "Hello world", "tok_input": [1, 15043, 3186],
                "output": "Hi!", "tok_input_length": 3, "ratio": 0.5, "small": -7}),
            serde_json::json!({"dataset": "cnn", "input": "Résumé ünïcode ✓", "tok_input": [1, 2, 3, 4],
                "output": "ok", "tok_input_length": 4, "ratio": 1.25, "small": 0}),
            serde_json::json!({"dataset": "gsm8k", "input": "third \"quoted\"\nline", "tok_input": [1, 29871],
                "output": null, "tok_input_length": 2, "ratio": null, "small": 2147483647}),
        ]
    );
    // The JSONL is a dataset table as it stands.
    let prompts = llmbench_data::load_dataset(
        &out,
        &llmbench_text::tokenizer::Tokenizer::builtin(),
        &llmbench_data::DatasetOptions::default(),
    )
    .expect("a dataset")
    .into_inner();
    assert_eq!(prompts.len(), 3);
    assert_eq!(prompts[2].token_ids.as_deref(), Some(&[1, 29871][..]));
}

#[test]
fn what_is_not_a_dataframe_pickle_is_refused_with_the_reason() {
    let dir = tempfile::tempdir().expect("temp dir");
    let input = dir.path().join("list.pkl");
    // pickle.dumps([], protocol=4)
    std::fs::write(&input, [0x80, 4, 0x95, 2, 0, 0, 0, 0, 0, 0, 0, b']', b'.']).expect("write");
    let out = dir.path().join("out.jsonl");
    let output = llmbench()
        .args(["dataset", "convert"])
        .arg(&input)
        .arg(&out)
        .output()
        .expect("runs");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("cannot read the pickled DataFrame")
            && stderr.contains("the pickle holds list"),
        "{stderr}"
    );
    assert!(!out.exists());
}
