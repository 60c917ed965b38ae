//! A BenchmarkExperiment on a real kube-apiserver: 2 × 2 factors × 2 repeats become eight owned BenchmarkRuns,
//! run one at a time with a cool-down and hooks between them against `llmbench sim`, compared in the experiment's
//! status and — by the collector pod running `llmbench experiment report` — in files on the workload PVC. A bad
//! experiment (a factor whose key matches nothing in the profile) is refused before any run, and deleting the
//! experiment deletes its runs (no garbage collector runs here) but never its results.
//!
//! The operator runs as its own binary under the chart's RBAC; the test kubelet runs the launcher and collector
//! pods with the real `llmbench` binary.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::events::v1::Event;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::{Client, ResourceExt};
use llmbench_api::v1alpha1::{
    BenchmarkExperiment, BenchmarkExperimentStatus, BenchmarkRun, ExperimentPhase, Phase,
};
use llmbench_e2e::cluster::{OperatorProcess, eventually, http_get, prepared};
use llmbench_e2e::{KubeletConfig, LlmbenchSim, TestKubelet, e2e_disabled, workspace_binary};
use serde_json::{Value, json};

const NS: &str = "bx";
const MODEL: &str = "e2e-model";
/// Eight runs of about a second each, a second's cool-down between them, and the collector.
const EXPERIMENT_TIMEOUT: Duration = Duration::from_secs(100);

fn benchmark_experiment(name: &str, spec: Value) -> BenchmarkExperiment {
    serde_json::from_value(json!({
        "apiVersion": "llmbench.dev/v1alpha1", "kind": "BenchmarkExperiment",
        "metadata": {"name": name, "namespace": NS}, "spec": spec
    }))
    .unwrap_or_else(|e| panic!("BenchmarkExperiment {name}: {e}"))
}

/// The bundled inference-perf `sanity_random`, one second per run, against `endpoint`; two factors of two
/// levels (request rate and output length), two repeats.
fn two_by_two(endpoint: &str) -> Value {
    json!({
        "template": {
            "harness": "inference-perf",
            "workload": {"builtin": "sanity_random"},
            "stack": {"endpoint": endpoint, "model": MODEL, "tokenizer": "builtin"},
            "overrides": ["load.stages.0.duration=1"],
        },
        "factors": [
            {"name": "rate", "key": "load.stages.0.rate", "levels": ["4", "8"]},
            {"name": "olen", "key": "data.output_distribution.mean", "levels": ["20", "40"]},
        ],
        "repeats": 2,
        "ordering": {"cooldown": "1s"},
        "hooks": [
            // llmbench sim resets its prefix cache as vLLM's dev-mode endpoint does; it is no SGLang, so its
            // flush is a 404, recorded and not fatal.
            {"name": "reset-prefix-cache", "method": "POST", "url": "/reset_prefix_cache"},
            {"name": "flush-cache", "method": "POST", "url": "/flush_cache"},
            {"name": "health", "method": "GET", "url": "/health"},
        ],
    })
}

fn condition<'a>(
    status: &'a BenchmarkExperimentStatus,
    kind: &str,
) -> Option<(&'a str, &'a str, &'a str)> {
    status
        .conditions
        .iter()
        .find(|c| c.type_ == kind)
        .map(|c| (c.status.as_str(), c.reason.as_str(), c.message.as_str()))
}

async fn runs_of(client: &Client, experiment: &BenchmarkExperiment) -> Vec<BenchmarkRun> {
    let uid = experiment.uid().expect("uid");
    let runs: Api<BenchmarkRun> = Api::namespaced(client.clone(), NS);
    runs.list(&ListParams::default().labels(&format!("llmbench.dev/experiment-uid={uid}")))
        .await
        .expect("list runs")
        .items
}

async fn completed(
    api: &Api<BenchmarkExperiment>,
    name: &str,
    operator: &OperatorProcess,
    kubelet: &TestKubelet,
) -> BenchmarkExperimentStatus {
    let deadline = tokio::time::Instant::now() + EXPERIMENT_TIMEOUT;
    loop {
        let status = api.get(name).await.ok().and_then(|e| e.status);
        if let Some(status) = &status
            && condition(status, "Completed").is_some_and(|c| c.0 == "True")
        {
            return status.clone();
        }
        if tokio::time::Instant::now() > deadline {
            panic!(
                "experiment {name} did not complete: {status:#?}\noperator log:\n{}\nkubelet errors: {:?}",
                operator.log_tail(),
                kubelet.errors()
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_experiment_runs_its_runs_one_at_a_time_and_compares_them() {
    if e2e_disabled("an_experiment_runs_its_runs_one_at_a_time_and_compares_them") {
        return;
    }
    let (_control_plane, admin, kubeconfig) = prepared(NS).await;
    let sim = LlmbenchSim::start(MODEL, &["--ttft", "5ms", "--itl", "1ms"])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let work = tempfile::tempdir().expect("work dir");
    let kubelet = TestKubelet::start(
        admin.clone(),
        KubeletConfig {
            node_name: "e2e-node".to_owned(),
            root: work.path().join("node"),
            label_selector: "app.kubernetes.io/name=llmbench".to_owned(),
            binaries: [(
                "llmbench".to_owned(),
                workspace_binary("llmbench").unwrap_or_else(|e| panic!("{e}")),
            )]
            .into(),
        },
    );
    let operator = OperatorProcess::start(&kubeconfig, "experiments", work.path());
    let port = operator.metrics_port();
    eventually(
        "the operator's /readyz",
        Duration::from_secs(30),
        || async {
            http_get(port, "/readyz")?
                .starts_with("HTTP/1.1 200")
                .then_some(())
        },
    )
    .await;

    let experiments: Api<BenchmarkExperiment> = Api::namespaced(admin.clone(), NS);
    let pp = PostParams::default();
    let sweep = experiments
        .create(
            &pp,
            &benchmark_experiment("sweep", two_by_two(sim.base_url())),
        )
        .await
        .expect("creating sweep");
    let mut bad_spec = two_by_two(sim.base_url());
    bad_spec["factors"][1]["key"] = json!("no_such_key");
    let bad = experiments
        .create(&pp, &benchmark_experiment("bad", bad_spec))
        .await
        .expect("creating bad");

    // The bad one: Valid=False naming the treatment and the key, a Warning event, no run at all.
    let (reason, message) = eventually("bad: Valid=False", EXPERIMENT_TIMEOUT, || async {
        let status = experiments.get("bad").await.ok()?.status?;
        let (state, reason, message) = condition(&status, "Valid")?;
        (state == "False").then(|| (reason.to_owned(), message.to_owned()))
    })
    .await;
    assert_eq!(reason, "UnmatchedOverride", "{message}");
    assert!(
        message.contains("treatment `rate-4-olen-20`") && message.contains("no_such_key"),
        "{message}"
    );
    let events: Api<Event> = Api::namespaced(admin.clone(), NS);
    eventually("bad: a Warning event", EXPERIMENT_TIMEOUT, || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        list.items
            .iter()
            .any(|e| {
                e.type_.as_deref() == Some("Warning")
                    && e.reason.as_deref() == Some("UnmatchedOverride")
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("bad")
            })
            .then_some(())
    })
    .await;
    let bad_status = experiments.get("bad").await.expect("get bad").status;
    assert_eq!(
        bad_status.as_ref().and_then(|s| s.phase),
        Some(ExperimentPhase::Failed)
    );
    assert!(runs_of(&admin, &bad).await.is_empty(), "bad has runs");

    // The good one completes.
    let status = completed(&experiments, "sweep", &operator, &kubelet).await;
    assert_eq!(
        condition(&status, "Completed").map(|c| c.1),
        Some("Succeeded"),
        "{status:#?}\noperator log:\n{}",
        operator.log_tail()
    );
    assert_eq!(status.phase, Some(ExperimentPhase::Succeeded));
    assert_eq!(condition(&status, "Valid").map(|c| c.0), Some("True"));
    assert_eq!(status.progress.as_deref(), Some("8/8"));

    // Eight runs, owned by the experiment, every one succeeded.
    let runs = runs_of(&admin, &sweep).await;
    assert_eq!(
        runs.len(),
        8,
        "{:?}",
        runs.iter().map(|r| r.name_any()).collect::<Vec<_>>()
    );
    for run in &runs {
        let owner = run
            .owner_references()
            .iter()
            .find(|o| o.controller == Some(true))
            .unwrap_or_else(|| panic!("{} has no controller", run.name_any()));
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
            (
                "BenchmarkExperiment",
                "sweep",
                sweep.uid().expect("uid").as_str()
            )
        );
        assert_eq!(owner.block_owner_deletion, Some(true));
        let run_status = run.status.as_ref().expect("status");
        assert_eq!(
            run_status.phase,
            Some(Phase::Succeeded),
            "{}: {run_status:#?}",
            run.name_any()
        );
    }
    let names: BTreeSet<String> = runs.iter().map(|r| r.name_any()).collect();
    assert!(names.contains("sweep-rate-8-olen-40-r2"), "{names:?}");

    // Never two at once, and a second's rest between them: each run started no earlier than the one before it
    // finished plus the cool-down (times are whole seconds, so the bound holds after truncation too).
    let mut spans: Vec<(Timestamp, Timestamp, String)> = runs
        .iter()
        .map(|r| {
            let s = r.status.as_ref().expect("status");
            (
                s.start_time.as_ref().expect("startTime").0,
                s.completion_time.as_ref().expect("completionTime").0,
                r.name_any(),
            )
        })
        .collect();
    spans.sort();
    for pair in spans.windows(2) {
        let (_, end, before) = &pair[0];
        let (start, _, after) = &pair[1];
        assert!(
            start.duration_since(*end).as_secs() >= 1,
            "{after} started at {start}, before {before} finished at {end} plus the 1s cool-down"
        );
    }

    // The status lists every run in plan order (repeat-major) with its hooks.
    let first_repeat: Vec<&str> = status.runs[..4].iter().map(|r| r.name.as_str()).collect();
    assert_eq!(
        first_repeat,
        [
            "sweep-rate-4-olen-20-r1",
            "sweep-rate-4-olen-40-r1",
            "sweep-rate-8-olen-20-r1",
            "sweep-rate-8-olen-40-r1"
        ]
    );
    for run in &status.runs {
        assert_eq!(run.phase.as_deref(), Some("Succeeded"), "{run:?}");
        assert_eq!(
            run.hooks,
            ["reset-prefix-cache: 200", "flush-cache: 404", "health: 200"],
            "{run:?}"
        );
    }

    // The table: four treatments, each over its two repeats.
    assert_eq!(status.table.len(), 4, "{:#?}", status.table);
    for row in &status.table {
        assert_eq!((row.runs, row.failed_runs), (2, 0), "{row:?}");
        let rps = row.requests_per_second.expect("requests/s");
        assert_eq!(rps.n, 2, "{row:?}");
        assert!(rps.mean > 0.0, "{row:?}");
        assert_eq!(row.ttft_p99_ms.map(|a| a.n), Some(2), "{row:?}");
        assert_eq!(row.levels.len(), 2, "{row:?}");
    }
    assert!(status.best.is_some(), "{status:#?}");

    // The comparison files, written by the collector next to the runs' directories.
    let path = status.results_path.as_deref().expect("resultsPath");
    let (claim, inside) = path.split_once(':').expect("<pvc>:<path>");
    let dir = kubelet
        .pvc_dir(NS, claim)
        .join(inside.strip_prefix("/requests/").expect("under /requests"));
    for file in [
        "comparison.json",
        "treatment_comparison.csv",
        "experiment-summary.yaml",
    ] {
        assert!(
            dir.join(file).is_file(),
            "{file} missing in {}: {:?}",
            dir.display(),
            std::fs::read_dir(&dir).map(|d| d.flatten().map(|e| e.file_name()).collect::<Vec<_>>())
        );
    }
    let comparison: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("comparison.json")).expect("comparison.json"),
    )
    .expect("comparison.json is JSON");
    let treatments: Vec<&str> = comparison["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .filter_map(|r| r["treatment"].as_str())
        .collect();
    let in_status: Vec<&str> = status.table.iter().map(|r| r.treatment.as_str()).collect();
    assert_eq!(treatments, in_status, "{comparison:#}");
    assert_eq!(
        comparison["best"].as_str(),
        status.best.as_deref(),
        "the collector and the status agree on the best treatment"
    );
    let statuses: BTreeSet<&str> = comparison["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .filter_map(|r| r["status"].as_str())
        .collect();
    assert_eq!(statuses, BTreeSet::from(["succeeded"]), "{comparison:#}");
    for run in &status.runs {
        let run_dir = dir.join(run.name.trim_start_matches("sweep-"));
        assert!(
            run_dir.join("summary.json").is_file(),
            "{}",
            run_dir.display()
        );
    }

    // A hook's 404 was a Warning event, and every run was announced.
    let list = events.list(&ListParams::default()).await.expect("events");
    let about_sweep = |reason: &str| {
        list.items
            .iter()
            .filter(|e| {
                e.reason.as_deref() == Some(reason)
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("sweep")
            })
            .count()
    };
    assert!(about_sweep("HookFailed") >= 1);
    assert!(about_sweep("RunCreated") >= 1);
    assert!(about_sweep("ExperimentSucceeded") >= 1);

    let metrics = http_get(operator.metrics_port(), "/metrics").expect("/metrics answers");
    assert!(
        metrics.contains("llmbench_operator_benchmark_experiments{phase=\"Succeeded\"} 1"),
        "{metrics}"
    );

    // Deleting the experiment deletes its runs (the operator's finalizer: no garbage collector runs here), and
    // the results stay on the volume.
    experiments
        .delete("sweep", &DeleteParams::default())
        .await
        .expect("delete sweep");
    eventually("sweep and its runs gone", EXPERIMENT_TIMEOUT, || async {
        let gone = experiments.get_opt("sweep").await.ok()?.is_none();
        (gone && runs_of(&admin, &sweep).await.is_empty()).then_some(())
    })
    .await;
    assert!(dir.join("comparison.json").is_file());
    assert!(
        kubelet.errors().is_empty(),
        "test kubelet: {:?}",
        kubelet.errors()
    );
}
