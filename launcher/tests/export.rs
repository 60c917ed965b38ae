//! `llmbench export`: a run's records, written by a real run against the embedded simulator, exported as
//! requests.jsonl and as requests.parquet, and the two read back as the same requests.

mod common;

use std::path::Path;

use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::record::{Field, RowAccessor};
use serde_json::Value;

use common::*;

/// `llmbench export DIR ARGS…`, run to its end and required to succeed.
fn export(dir: &Path, args: &[&str]) -> std::process::Output {
    let output = llmbench()
        .arg("export")
        .arg(dir)
        .args(args)
        .output()
        .expect("runs");
    succeeded(&output);
    output
}

/// Every row's id and chunk count (the length of its `chunk_at_ns` list), in file order.
fn parquet_ids_and_chunks(
    file: impl parquet::file::reader::ChunkReader + 'static,
) -> Vec<(u64, usize)> {
    let reader = SerializedFileReader::new(file).expect("a Parquet file");
    reader
        .get_row_iter(None)
        .expect("rows")
        .map(|row| {
            let row = row.expect("a row");
            let chunks = row
                .get_column_iter()
                .find_map(|(name, field)| match field {
                    Field::ListInternal(list) if name == "chunk_at_ns" => Some(list.len()),
                    _ => None,
                })
                .expect("a chunk_at_ns list");
            (row.get_ulong(0).expect("id first, unsigned"), chunks)
        })
        .collect()
}

#[test]
fn a_runs_parquet_export_holds_the_requests_its_jsonl_export_does() {
    let dir = tempfile::tempdir().expect("tmp");
    let profile = write(
        dir.path(),
        "sim.yaml",
        "dataset-name: random\nrandom-input-len: 8\nrandom-output-len: 4\nnum-prompts: 6\nrequest-rate: 100\n",
    );
    succeeded(&run_profile(
        dir.path(),
        "vllm-benchmark",
        &profile,
        "run",
        &[],
    ));
    let run = dir.path().join("run");

    let parquet = export(&run, &["--format", "parquet"]);
    assert!(
        stderr(&parquet).contains("6 records"),
        "{}",
        stderr(&parquet)
    );
    export(&run, &[]);

    let jsonl = std::fs::read_to_string(run.join("requests.jsonl")).expect("requests.jsonl");
    let expected: Vec<(u64, usize)> = jsonl
        .lines()
        .map(|line| {
            let record: Value = serde_json::from_str(line).expect("a JSON line");
            let chunks = record["chunks"].as_array().map_or(0, Vec::len);
            (record["id"].as_u64().expect("an id"), chunks)
        })
        .collect();
    assert_eq!(expected.len(), 6);
    // A streamed answer of 4 tokens arrives in at least 4 chunks.
    assert!(
        expected.iter().all(|&(_, chunks)| chunks >= 4),
        "{expected:?}"
    );

    let file = std::fs::File::open(run.join("requests.parquet")).expect("requests.parquet");
    assert_eq!(parquet_ids_and_chunks(file), expected);

    // To standard output: the same file, byte for byte.
    let to_stdout = export(&run, &["--format", "parquet", "--output", "-"]);
    let written = std::fs::read(run.join("requests.parquet")).expect("requests.parquet");
    assert_eq!(to_stdout.stdout, written);
}
