//! The CRDs on a real kube-apiserver: they are accepted and Established (their CEL rules within the apiserver's cost
//! budget), and the apiserver itself — not a client-side evaluator — enforces their schema and CEL rules, including
//! the transition rules that freeze the spec of a started run or experiment. `kubectl explain` shows our
//! descriptions and `kubectl get br` / `kubectl get bx` resolve the short names.
//!
//! One control plane serves every test in this file; each test works in its own namespace.

use std::process::Output;

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use llmbench_api::v1alpha1::{BenchmarkExperiment, BenchmarkRun};
use llmbench_e2e::cluster::create_namespace;
use llmbench_e2e::{ControlPlane, e2e_disabled};
use serde_json::{Value, json};
use tokio::sync::OnceCell;

static CONTROL_PLANE: OnceCell<ControlPlane> = OnceCell::const_new();

/// The shared control plane with our CRDs applied and Established.
async fn control_plane() -> &'static ControlPlane {
    CONTROL_PLANE
        .get_or_init(|| async {
            let cp = ControlPlane::start()
                .await
                .unwrap_or_else(|e| panic!("starting the control plane: {e}"));
            let client = cp.admin_client().await.expect("admin client");
            llmbench_e2e::cluster::apply_crds(&client).await;
            cp
        })
        .await
}

/// A fresh namespace for one test.
fn runs(client: &Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, &ApiResource::erase::<BenchmarkRun>(&()))
}

/// The valid spec of crds/tests/crd_schema.rs.
fn valid_spec() -> Value {
    json!({
        "harness": "inference-perf",
        "workload": {"builtin": "sanity_random"},
        "stack": {"endpoint": "http://vllm.llm-d.svc:8000", "model": "meta-llama/Llama-3.1-8B-Instruct"},
        "overrides": ["load.stages.0.rate=5", "total_count=200", "model_name=\"123\""],
        "launcher": {"parallelism": 2},
        "timeout": "90m",
    })
}

fn run(name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "llmbench.dev/v1alpha1",
        "kind": "BenchmarkRun",
        "metadata": {"name": name},
        "spec": spec,
    }))
    .expect("a BenchmarkRun object")
}

fn experiments(client: &Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        ns,
        &ApiResource::erase::<BenchmarkExperiment>(&()),
    )
}

/// An experiment of the valid run spec: a 2 × 2 matrix, two repeats, a capacity search and a hook — every part
/// of the schema with a CEL rule or a bound.
fn valid_experiment_spec() -> Value {
    json!({
        "template": valid_spec(),
        "factors": [
            {"name": "rate", "key": "load.stages.0.rate", "levels": ["1", "2"]},
            {"name": "len", "key": "data.input_distribution.mean", "levels": ["128", "256"]},
        ],
        "repeats": 2,
        "capacitySearch": {"load": "rate", "slo": ["ttft_p99<=500ms", "goodput>=95%"]},
        "ordering": {"parallelism": 1, "cooldown": "10s", "stopOnFailure": true},
        "hooks": [{"name": "reset-prefix-cache", "url": "/reset_prefix_cache"}],
    })
}

fn experiment(name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "llmbench.dev/v1alpha1",
        "kind": "BenchmarkExperiment",
        "metadata": {"name": name},
        "spec": spec,
    }))
    .expect("a BenchmarkExperiment object")
}

fn with(mut spec: Value, pointer: &str, value: Value) -> Value {
    *spec
        .pointer_mut(pointer)
        .expect("pointer in the valid spec") = value;
    spec
}

/// `spec` with `storage` set.
fn storage(mut spec: Value, storage: Value) -> Value {
    spec["storage"] = storage;
    spec
}

/// The apiserver's message for a rejected request (panics if it was accepted or failed otherwise).
fn rejection<T: std::fmt::Debug>(result: Result<T, kube::Error>, what: &str) -> String {
    match result {
        Err(kube::Error::Api(status)) => {
            assert_eq!(
                status.code, 422,
                "{what}: expected 422 Invalid, got {status:?}"
            );
            status.message
        }
        Err(e) => panic!("{what}: expected a validation error, got {e}"),
        Ok(obj) => panic!("{what}: the apiserver accepted it: {obj:?}"),
    }
}

fn kubectl(cp: &ControlPlane, args: &[&str]) -> Output {
    let output = cp
        .kubectl()
        .expect("kubectl is built")
        .args(args)
        .output()
        .expect("kubectl runs");
    assert!(
        output.status.success(),
        "kubectl {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

#[tokio::test]
async fn the_crds_are_established_and_kubectl_knows_them() {
    if e2e_disabled("the_crds_are_established_and_kubectl_knows_them") {
        return;
    }
    let cp = control_plane().await;
    let client = cp.admin_client().await.expect("admin client");
    let ns = "kubectl-names";
    create_namespace(&client, ns).await;
    runs(&client, ns)
        .create(&PostParams::default(), &run("listed", valid_spec()))
        .await
        .expect("a valid run is created");

    let explain = kubectl(cp, &["explain", "benchmarkrun.spec.workload"]);
    let explain = String::from_utf8_lossy(&explain.stdout);
    assert!(
        explain.contains("The workload profile: exactly one of profileRef, builtin or template."),
        "kubectl explain does not show our description:\n{explain}"
    );
    for field in ["builtin", "profileRef", "template"] {
        assert!(explain.contains(field), "{field} missing:\n{explain}");
    }

    let get = kubectl(cp, &["get", "br", "-n", ns]);
    let get = String::from_utf8_lossy(&get.stdout);
    assert!(get.contains("listed"), "kubectl get br:\n{get}");
    let header = get.lines().next().unwrap_or_default();
    for column in [
        "PHASE",
        "REASON",
        "REQ/S",
        "TTFT P99 MS",
        "FAILED %",
        "SLO",
        "CAPACITY",
        "AGE",
    ] {
        assert!(
            header.contains(column),
            "no {column} column in kubectl get br:\n{get}"
        );
    }
    let get = kubectl(cp, &["get", "wp", "-n", ns]);
    assert!(get.status.success());
    experiments(&client, ns)
        .create(
            &PostParams::default(),
            &experiment("compared", valid_experiment_spec()),
        )
        .await
        .expect("a valid experiment is created");
    let get = kubectl(cp, &["get", "bx", "-n", ns]);
    let get = String::from_utf8_lossy(&get.stdout);
    assert!(
        get.contains("compared") && get.contains("PROGRESS") && get.contains("BEST"),
        "kubectl get bx:\n{get}"
    );
    let all = kubectl(cp, &["get", "llmbench", "-n", ns, "-o", "name"]);
    let all = String::from_utf8_lossy(&all.stdout);
    assert!(
        all.contains("benchmarkrun.llmbench.dev/listed")
            && all.contains("benchmarkexperiment.llmbench.dev/compared"),
        "the llmbench category lists runs and experiments:\n{all}"
    );
}

#[tokio::test]
async fn the_apiserver_accepts_a_valid_run_and_rejects_broken_specs_with_the_rule_message() {
    if e2e_disabled(
        "the_apiserver_accepts_a_valid_run_and_rejects_broken_specs_with_the_rule_message",
    ) {
        return;
    }
    let cp = control_plane().await;
    let client = cp.admin_client().await.expect("admin client");
    let ns = "validation";
    create_namespace(&client, ns).await;
    let api = runs(&client, ns);
    let pp = PostParams::default();

    let created = api
        .create(&pp, &run("valid", valid_spec()))
        .await
        .expect("a valid run is created");
    assert_eq!(created.data["spec"]["launcher"]["parallelism"], json!(2));
    assert_eq!(
        created.data["spec"]["launcher"]["startTimeout"],
        json!("10m")
    );
    // One launcher may use a scratch emptyDir (only its summary survives the pod).
    let single_on_empty_dir = storage(
        with(valid_spec(), "/launcher/parallelism", json!(1)),
        json!({"emptyDir": {}}),
    );
    api.create(&pp, &run("single-empty-dir", single_on_empty_dir))
        .await
        .expect("one launcher on an emptyDir is accepted");
    // One collector, and one MLPerf launcher, are what the launchers can run.
    let mut single_collector = with(valid_spec(), "/launcher/parallelism", json!(1));
    single_collector["skipRun"] = json!(true);
    single_collector["resultsDir"] = json!("earlier-run");
    api.create(&pp, &run("single-collector", single_collector))
        .await
        .expect("skipRun with one collector is accepted");
    let single_mlperf = with(
        with(valid_spec(), "/launcher/parallelism", json!(1)),
        "/harness",
        json!("mlperf"),
    );
    api.create(&pp, &run("single-mlperf", single_mlperf))
        .await
        .expect("mlperf with one launcher is accepted");

    // The nop harness reads a user-deployed stack's serving pods' logs from the pods it names.
    let mut nop_on_named_pods = with(valid_spec(), "/harness", json!("nop"));
    nop_on_named_pods["stack"]["pods"] = json!({"selector": {"app": "vllm"}, "container": "vllm"});
    api.create(&pp, &run("nop-named-pods", nop_on_named_pods))
        .await
        .expect("nop with stack.pods is accepted");

    let cases = [
        (
            "stack.pods for a harness that reads no log",
            with(
                valid_spec(),
                "/stack",
                json!({"endpoint": "http://vllm:8000", "model": "m", "pods": {"selector": {"app": "vllm"}}}),
            ),
            "stack.pods is read by the nop harness only",
        ),
        (
            "stack.pods without a selector beside an endpoint",
            with(
                with(valid_spec(), "/harness", json!("nop")),
                "/stack",
                json!({"endpoint": "http://vllm:8000", "model": "m", "pods": {"container": "vllm"}}),
            ),
            "stack.pods.selector is needed beside stack.endpoint",
        ),
        (
            "stack.pods beside a standalone stack",
            with(
                with(
                    with(valid_spec(), "/harness", json!("nop")),
                    "/stack",
                    json!({"model": "m", "standalone": {}, "pods": {"selector": {"app": "vllm"}}}),
                ),
                "/launcher/parallelism",
                json!(1),
            ),
            "a standalone stack's pod is its own",
        ),
        (
            "two workload sources",
            with(
                valid_spec(),
                "/workload",
                json!({"builtin": "sanity_random", "template": "a: 1"}),
            ),
            "exactly one of workload.profileRef, workload.builtin or workload.template must be set",
        ),
        (
            "no workload source",
            with(valid_spec(), "/workload", json!({})),
            "exactly one of workload.profileRef, workload.builtin or workload.template must be set",
        ),
        (
            "parallelism 0",
            with(valid_spec(), "/launcher/parallelism", json!(0)),
            // The schema's minimum, not a CEL rule.
            "spec.launcher.parallelism in body should be greater than or equal to 1",
        ),
        (
            "a malformed override",
            with(valid_spec(), "/overrides", json!(["a..b=1"])),
            "each override must be key=value, with a key of non-empty dot-separated segments",
        ),
        (
            "an override without a value",
            with(valid_spec(), "/overrides", json!(["novalue"])),
            "each override must be key=value",
        ),
        (
            "a zero timeout",
            with(valid_spec(), "/timeout", json!("0s")),
            "timeout must be a positive duration such as 3600s or 1h",
        ),
        (
            "endpoint and serviceRef together",
            with(
                valid_spec(),
                "/stack",
                json!({"endpoint": "http://a:1", "serviceRef": {"name": "vllm", "port": 8000}, "model": "m"}),
            ),
            "exactly one of stack.endpoint, stack.serviceRef or stack.standalone must be set",
        ),
        (
            "shards on emptyDirs",
            storage(valid_spec(), json!({"emptyDir": {}})),
            "launcher.parallelism > 1 needs a PVC",
        ),
        (
            "shards on a ReadWriteOncePod claim",
            storage(
                valid_spec(),
                json!({"pvc": {"name": "w", "accessModes": ["ReadWriteOncePod"]}}),
            ),
            "a ReadWriteOncePod claim admits one pod",
        ),
        (
            "a read-only claim",
            storage(
                valid_spec(),
                json!({"pvc": {"name": "w", "accessModes": ["ReadOnlyMany"]}}),
            ),
            "accessModes may be ReadWriteOnce, ReadWriteMany or ReadWriteOncePod",
        ),
        (
            "a zero start timeout",
            {
                let mut spec = valid_spec();
                spec["launcher"]["startTimeout"] = json!("0s");
                spec
            },
            "startTimeout must be a positive duration",
        ),
        (
            "a sharded collector",
            {
                let mut spec = valid_spec();
                spec["skipRun"] = json!(true);
                spec["resultsDir"] = json!("earlier-run");
                spec
            },
            "skipRun runs one collector pod: launcher.parallelism must be 1",
        ),
        (
            "a sharded mlperf run",
            with(valid_spec(), "/harness", json!("mlperf")),
            "the mlperf harness runs one LoadGen, which cannot be sharded: launcher.parallelism must be 1",
        ),
    ];
    for (i, (what, spec, expected)) in cases.into_iter().enumerate() {
        let message = rejection(api.create(&pp, &run(&format!("bad-{i}"), spec)).await, what);
        println!("{what}: {message}");
        assert!(
            message.contains(expected),
            "{what}: the apiserver's message lacks {expected:?}: {message}"
        );
    }
}

#[tokio::test]
async fn the_spec_of_a_started_run_is_immutable_but_a_pending_run_may_change() {
    if e2e_disabled("the_spec_of_a_started_run_is_immutable_but_a_pending_run_may_change") {
        return;
    }
    let cp = control_plane().await;
    let client = cp.admin_client().await.expect("admin client");
    let ns = "immutability";
    create_namespace(&client, ns).await;
    let api = runs(&client, ns);
    let pp = PostParams::default();
    let parallelism = |n: i64| Patch::Merge(json!({"spec": {"launcher": {"parallelism": n}}}));

    api.create(&pp, &run("pending", valid_spec()))
        .await
        .expect("created");
    let edited = api
        .patch("pending", &PatchParams::default(), &parallelism(3))
        .await
        .expect("a run that has not started may be edited");
    assert_eq!(edited.data["spec"]["launcher"]["parallelism"], json!(3));

    api.create(&pp, &run("started", valid_spec()))
        .await
        .expect("created");
    let status = Patch::Merge(json!({
        "status": {"phase": "Running", "startTime": "2026-11-22T04:00:00Z"}
    }));
    let started = api
        .patch_status("started", &PatchParams::default(), &status)
        .await
        .expect("the status subresource takes a start time");
    assert_eq!(
        started.data["status"]["startTime"],
        json!("2026-11-22T04:00:00Z")
    );
    let message = rejection(
        api.patch("started", &PatchParams::default(), &parallelism(3))
            .await,
        "editing a started run",
    );
    println!("editing a started run: {message}");
    assert!(
        message.contains("spec is immutable once the run has started"),
        "{message}"
    );
    // Metadata and status stay writable: the operator must still be able to finish the run.
    api.patch(
        "started",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"checked": "yes"}}})),
    )
    .await
    .expect("labels of a started run may change");
    api.patch_status(
        "started",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Succeeded"}})),
    )
    .await
    .expect("the status of a started run may change");
}

#[tokio::test]
async fn the_apiserver_accepts_a_valid_experiment_and_rejects_broken_or_edited_ones() {
    if e2e_disabled("the_apiserver_accepts_a_valid_experiment_and_rejects_broken_or_edited_ones") {
        return;
    }
    let cp = control_plane().await;
    let client = cp.admin_client().await.expect("admin client");
    let ns = "experiments";
    create_namespace(&client, ns).await;
    let api = experiments(&client, ns);
    let pp = PostParams::default();

    let created = api
        .create(&pp, &experiment("valid", valid_experiment_spec()))
        .await
        .expect("a valid experiment is created");
    assert_eq!(created.data["spec"]["repeats"], json!(2));
    assert_eq!(
        created.data["spec"]["hooks"][0]["method"],
        json!("POST"),
        "the schema's default"
    );

    let mut both = valid_experiment_spec();
    both["treatments"] = json!([{"name": "a", "overrides": ["total_count=5"]}]);
    let cases = [
        (
            "both treatments and factors",
            both,
            "set at most one of treatments (a list) or factors (a matrix)",
        ),
        (
            "repeats 0",
            with(valid_experiment_spec(), "/repeats", json!(0)),
            "spec.repeats in body should be greater than or equal to 1",
        ),
        (
            "a cooldown that is no duration",
            with(
                valid_experiment_spec(),
                "/ordering/cooldown",
                json!("later"),
            ),
            "cooldown must be a duration such as 30s or 2m",
        ),
        (
            "a TTL on the template, which would delete runs the experiment's table is built from",
            {
                let mut spec = valid_experiment_spec();
                spec["template"]["ttlSecondsAfterFinished"] = json!(60);
                spec
            },
            "set ttlSecondsAfterFinished on the experiment, not on its template",
        ),
        (
            "a template with a sharded collector",
            {
                let mut spec = valid_experiment_spec();
                spec["template"]["skipRun"] = json!(true);
                spec["template"]["resultsDir"] = json!("earlier-run");
                spec
            },
            "skipRun runs one collector pod: launcher.parallelism must be 1",
        ),
        (
            "a template with two workload sources",
            with(
                valid_experiment_spec(),
                "/template/workload",
                json!({"builtin": "sanity_random", "template": "a: 1"}),
            ),
            "exactly one of workload.profileRef, workload.builtin or workload.template must be set",
        ),
    ];
    for (i, (what, spec, expected)) in cases.into_iter().enumerate() {
        let message = rejection(
            api.create(&pp, &experiment(&format!("bad-{i}"), spec))
                .await,
            what,
        );
        println!("{what}: {message}");
        assert!(
            message.contains(expected),
            "{what}: the apiserver's message lacks {expected:?}: {message}"
        );
    }

    // Before the first run the spec may change; after, it is frozen, while status and metadata stay writable.
    let repeats = |n: i64| Patch::Merge(json!({"spec": {"repeats": n}}));
    api.patch("valid", &PatchParams::default(), &repeats(3))
        .await
        .expect("an experiment that has not started may be edited");
    api.patch_status(
        "valid",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Running", "startTime": "2026-11-22T04:00:00Z", "progress": "1/8"}})),
    )
    .await
    .expect("the status subresource takes a start time");
    let message = rejection(
        api.patch("valid", &PatchParams::default(), &repeats(4))
            .await,
        "editing a started experiment",
    );
    println!("editing a started experiment: {message}");
    assert!(
        message.contains("spec is immutable once the experiment has started"),
        "{message}"
    );
    api.patch(
        "valid",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"checked": "yes"}}})),
    )
    .await
    .expect("labels of a started experiment may change");
}

#[tokio::test]
async fn conditions_are_a_map_keyed_by_type_so_a_type_appears_once() {
    if e2e_disabled("conditions_are_a_map_keyed_by_type_so_a_type_appears_once") {
        return;
    }
    let cp = control_plane().await;
    let client = cp.admin_client().await.expect("admin client");
    let ns = "condition-map";
    create_namespace(&client, ns).await;
    let condition = |type_: &str, status: &str, reason: &str| {
        json!({"type": type_, "status": status, "reason": reason, "message": "",
               "lastTransitionTime": "2026-11-22T04:00:00Z"})
    };
    let twice = json!({"status": {"conditions": [
        condition("Completed", "False", "Running"),
        condition("Completed", "True", "Succeeded"),
    ]}});
    let once_each = json!({"status": {"conditions": [
        condition("Completed", "False", "Running"),
        condition("Reconciled", "False", "CreatePodFailed"),
    ]}});

    let runs = runs(&client, ns);
    runs.create(&PostParams::default(), &run("conditions", valid_spec()))
        .await
        .expect("created");
    let message = rejection(
        runs.patch_status("conditions", &PatchParams::default(), &Patch::Merge(&twice))
            .await,
        "a run's condition type twice",
    );
    assert!(message.contains("Duplicate value"), "{message}");
    runs.patch_status(
        "conditions",
        &PatchParams::default(),
        &Patch::Merge(&once_each),
    )
    .await
    .expect("one condition of each type is accepted");
    // A second field manager applying one condition merges it by type; the other manager's stays.
    let apply = json!({
        "apiVersion": "llmbench.dev/v1alpha1", "kind": "BenchmarkRun",
        "status": {"conditions": [condition("SLOMet", "True", "WithinSLO")]},
    });
    let merged = runs
        .patch_status(
            "conditions",
            &PatchParams::apply("another-manager").force(),
            &Patch::Apply(&apply),
        )
        .await
        .expect("an apply of one condition");
    let types: Vec<&str> = merged.data["status"]["conditions"]
        .as_array()
        .expect("conditions")
        .iter()
        .filter_map(|c| c["type"].as_str())
        .collect();
    assert_eq!(types, ["Completed", "Reconciled", "SLOMet"], "{merged:?}");

    let experiments = experiments(&client, ns);
    experiments
        .create(
            &PostParams::default(),
            &experiment("conditions", valid_experiment_spec()),
        )
        .await
        .expect("created");
    let message = rejection(
        experiments
            .patch_status("conditions", &PatchParams::default(), &Patch::Merge(&twice))
            .await,
        "an experiment's condition type twice",
    );
    assert!(message.contains("Duplicate value"), "{message}");
}

/// Every file under `examples/` is what a newcomer `kubectl apply`s first, so each must pass the CRDs' schema and
/// CEL rules on a real apiserver: a server-side dry run validates and admits each object and stores nothing.
#[tokio::test]
async fn every_bundled_example_passes_the_crds_schema_and_rules() {
    if e2e_disabled("every_bundled_example_passes_the_crds_schema_and_rules") {
        return;
    }
    let cp = control_plane().await;
    let client = cp.admin_client().await.expect("admin client");
    let ns = "examples";
    create_namespace(&client, ns).await;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let mut examples: Vec<_> = std::fs::read_dir(&dir)
        .expect("examples/ is read")
        .map(|entry| entry.expect("an examples/ entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "yaml"))
        .collect();
    examples.sort();
    assert!(
        examples.len() >= 5,
        "examples/ lost its files: {examples:?}"
    );
    for example in &examples {
        let path = example.to_str().expect("a UTF-8 path");
        let applied = kubectl(cp, &["apply", "--dry-run=server", "-n", ns, "-f", path]);
        let applied = String::from_utf8_lossy(&applied.stdout);
        assert!(
            applied.contains("(server dry run)"),
            "{path} was not applied as a server dry run:\n{applied}"
        );
    }
}
