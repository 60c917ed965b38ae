//! `llmbench run --results-to-log`: an emptyDir run's results, written into the launcher's log once the run ended
//! (the block of `llmbench_core::results_log`), come back whole from that log — what the BenchmarkRun operator keeps
//! in ConfigMaps and `llmbench results fetch` unpacks.

mod common;

use common::{SimProcess, run_profile, succeeded, write};
use llmbench_core::results_log;

#[test]
fn a_runs_results_directory_comes_back_whole_from_its_log() {
    let dir = tempfile::tempdir().expect("temp dir");
    let sim = SimProcess::start(&["--model", "m", "--ttft", "1ms", "--itl", "1ms"]);
    let profile = write(
        dir.path(),
        "p.yaml",
        "model: m\nendpoint-type: completions\nisl: 8\nosl: 2\nrequest-count: 3\n",
    );
    let output = run_profile(
        dir.path(),
        "aiperf",
        &profile,
        "kept",
        &[
            "--endpoint",
            &sim.url,
            "--tokenizer",
            "builtin",
            "--no-preflight",
            "--no-server-metrics",
            "--results-to-log",
            "1MiB",
        ],
    );
    succeeded(&output);
    let stdout = String::from_utf8_lossy(&output.stdout);
    // The block comes last, after the run's own report.
    assert!(stdout.contains("results: ") && stdout.trim_end().ends_with(results_log::END));
    let archive = results_log::extract(&stdout)
        .expect("a well-formed block")
        .expect("a block");
    let back = dir.path().join("back");
    std::fs::create_dir(&back).expect("mkdir");
    let unpacked = std::process::Command::new("tar")
        .args(["xzf", "-", "-C"])
        .arg(&back)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut tar| {
            use std::io::Write as _;
            tar.stdin.take().expect("stdin").write_all(&archive)?;
            tar.wait()
        })
        .expect("tar runs");
    assert!(unpacked.success());
    for file in [
        "summary.json",
        "run.json",
        "requests.bin",
        "profile_export_aiperf.json",
    ] {
        assert_eq!(
            std::fs::read(back.join("kept").join(file)).expect(file),
            std::fs::read(dir.path().join("kept").join(file)).expect(file),
            "{file}"
        );
    }
    assert!(!back.join("kept").join(results_log::NOT_KEPT_FILE).exists());
}
