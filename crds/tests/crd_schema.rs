//! The generated CRDs: current on disk, described for `kubectl explain`, and rejecting bad specs by their schema
//! (structural rules through a JSON Schema validator, CEL rules through kube's client-side CEL evaluator).

use kube::core::cel::{ErrorKind, Validator};
use serde_json::{Value, json};

fn crd_schema(file: &str) -> Value {
    let (_, yaml) = llmbench_api::crd_manifests()
        .into_iter()
        .find(|(f, _)| *f == file)
        .expect("manifest exists");
    let crd: Value = serde_saphyr::from_str(&yaml.expect("serializes")).expect("parses");
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone()
}

fn run(spec: Value) -> Value {
    json!({
        "apiVersion": "llmbench.dev/v1alpha1",
        "kind": "BenchmarkRun",
        "metadata": {"name": "r1", "namespace": "default"},
        "spec": spec,
    })
}

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

/// Messages of every structural and CEL rule the object breaks (empty when it is accepted).
fn rejections(object: &Value, old: Option<&Value>) -> Vec<String> {
    rejections_by("benchmarkruns.yaml", object, old)
}

/// As [`rejections`], against the CRD in `file`.
fn rejections_by(file: &str, object: &Value, old: Option<&Value>) -> Vec<String> {
    let schema = crd_schema(file);
    let mut messages: Vec<String> = Vec::new();
    let structural = jsonschema::draft4::new(&schema).expect("schema compiles");
    messages.extend(
        structural
            .iter_errors(object)
            .map(|e| format!("{}: {e}", e.instance_path())),
    );
    if let Err(errors) = Validator::new().validate(&schema, object, old) {
        for e in errors.as_slice() {
            assert_eq!(
                e.kind,
                ErrorKind::ValidationFailure,
                "rule {} did not evaluate: {}",
                e.rule,
                e.message
            );
            messages.push(e.message.clone());
        }
    }
    messages
}

fn with(mut spec: Value, pointer: &str, value: Value) -> Value {
    *spec
        .pointer_mut(pointer)
        .expect("pointer exists in the valid spec") = value;
    spec
}

#[test]
fn generated_crd_yaml_is_current() {
    for (file, yaml) in llmbench_api::crd_manifests() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
        let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            on_disk == yaml.expect("serializes"),
            "crds/{file} is stale: run `make crds` and commit the result"
        );
    }
}

#[test]
fn the_chart_carries_the_generated_crds_unchanged() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    for (file, yaml) in llmbench_api::crd_manifests() {
        let in_chart = root.join("../charts/llmbench/crds").join(file);
        let text = std::fs::read_to_string(&in_chart).unwrap_or_default();
        assert!(
            text == yaml.expect("serializes"),
            "charts/llmbench/crds/{file} differs from crds/{file}: run `make crds` and commit the result"
        );
    }
}

#[test]
fn skip_run_needs_a_results_dir_and_results_dir_stays_inside_the_volume() {
    let mut spec = valid_spec();
    spec["skipRun"] = json!(true);
    let messages = rejections(&run(spec.clone()), None);
    assert!(
        messages.iter().any(|m| m.contains("set resultsDir")),
        "{messages:?}"
    );
    let mut ok = spec;
    ok["resultsDir"] = json!("bench-1-0f3c9a2e");
    // One collector: a collector cannot be sharded.
    ok["launcher"]["parallelism"] = json!(1);
    assert_eq!(rejections(&run(ok), None), Vec::<String>::new());
    for bad in ["../etc", "a/../b", "/abs", "a//b", "."] {
        let mut spec = valid_spec();
        spec["resultsDir"] = json!(bad);
        assert!(
            !rejections(&run(spec), None).is_empty(),
            "{bad} is rejected"
        );
    }
}

#[test]
fn a_collector_and_an_mlperf_run_cannot_be_sharded() {
    let mut collector = valid_spec();
    collector["skipRun"] = json!(true);
    collector["resultsDir"] = json!("bench-1-0f3c9a2e");
    let messages = rejections(&run(collector), None);
    assert!(
        messages
            .iter()
            .any(|m| m.contains("skipRun runs one collector pod: launcher.parallelism must be 1")),
        "{messages:?}"
    );
    let mlperf = with(valid_spec(), "/harness", json!("mlperf"));
    let messages = rejections(&run(mlperf.clone()), None);
    assert!(
        messages
            .iter()
            .any(|m| m.contains("the mlperf harness runs one LoadGen")),
        "{messages:?}"
    );
    let single = with(mlperf, "/launcher/parallelism", json!(1));
    assert_eq!(rejections(&run(single), None), Vec::<String>::new());
}

#[test]
fn a_valid_run_is_accepted() {
    assert_eq!(rejections(&run(valid_spec()), None), Vec::<String>::new());
}

#[test]
fn two_workload_sources_are_rejected() {
    let spec = with(
        valid_spec(),
        "/workload",
        json!({"builtin": "sanity_random", "template": "a: 1"}),
    );
    let messages = rejections(&run(spec), None);
    assert!(
        messages
            .iter()
            .any(|m| m.contains("exactly one of workload.profileRef")),
        "{messages:?}"
    );
    let spec = with(valid_spec(), "/workload", json!({}));
    assert!(
        !rejections(&run(spec), None).is_empty(),
        "no source at all is rejected too"
    );
}

#[test]
fn parallelism_zero_is_rejected() {
    let spec = with(valid_spec(), "/launcher/parallelism", json!(0));
    let messages = rejections(&run(spec), None);
    assert!(
        messages
            .iter()
            .any(|m| m.contains("/spec/launcher/parallelism")),
        "{messages:?}"
    );
}

#[test]
fn malformed_overrides_are_rejected() {
    for bad in ["novalue", "=5", "a..b=1", "a b=1"] {
        let spec = with(valid_spec(), "/overrides", json!([bad]));
        let messages = rejections(&run(spec), None);
        assert!(
            messages
                .iter()
                .any(|m| m.contains("each override must be key=value")),
            "{bad}: {messages:?}"
        );
    }
}

#[test]
fn a_non_positive_or_malformed_timeout_is_rejected() {
    let messages = rejections(&run(with(valid_spec(), "/timeout", json!("0s"))), None);
    assert!(
        messages
            .iter()
            .any(|m| m.contains("timeout must be a positive duration")),
        "{messages:?}"
    );
    let messages = rejections(&run(with(valid_spec(), "/timeout", json!("soon"))), None);
    assert!(
        messages.iter().any(|m| m.contains("/spec/timeout")),
        "{messages:?}"
    );
}

#[test]
fn endpoint_and_service_ref_together_are_rejected() {
    let spec = with(
        valid_spec(),
        "/stack",
        json!({"endpoint": "http://a:1", "serviceRef": {"name": "vllm", "port": 8000}, "model": "m"}),
    );
    let messages = rejections(&run(spec), None);
    assert!(
        messages
            .iter()
            .any(|m| m
                .contains("exactly one of stack.endpoint, stack.serviceRef or stack.standalone")),
        "{messages:?}"
    );
}

#[test]
fn a_standalone_stack_stands_alone_and_its_profiling_hooks_are_vllms_or_named() {
    let standalone =
        json!({"model": "m", "standalone": {"image": "llmbench:dev", "args": ["sim"]}});
    let spec = with(valid_spec(), "/stack", standalone.clone());
    assert_eq!(rejections(&run(spec), None), Vec::<String>::new());
    let mut both = standalone.clone();
    both["endpoint"] = json!("http://a:1");
    let messages = rejections(&run(with(valid_spec(), "/stack", both)), None);
    assert!(
        messages
            .iter()
            .any(|m| m
                .contains("exactly one of stack.endpoint, stack.serviceRef or stack.standalone")),
        "{messages:?}"
    );
    let mut collect = with(valid_spec(), "/stack", standalone.clone());
    collect["skipRun"] = json!(true);
    collect["resultsDir"] = json!("earlier");
    let messages = rejections(&run(collect), None);
    assert!(
        messages
            .iter()
            .any(|m| m.contains("a standalone stack would be started for nothing")),
        "{messages:?}"
    );
    let mut profiled = standalone;
    profiled["profiling"] = json!({"vllm": true, "start": "/start"});
    let messages = rejections(&run(with(valid_spec(), "/stack", profiled)), None);
    assert!(
        messages
            .iter()
            .any(|m| m.contains("set profiling.vllm or profiling.start/stop, not both")),
        "{messages:?}"
    );
}

#[test]
fn an_unknown_harness_is_rejected() {
    let messages = rejections(&run(with(valid_spec(), "/harness", json!("locust"))), None);
    assert!(
        messages.iter().any(|m| m.contains("/spec/harness")),
        "{messages:?}"
    );
}

#[test]
fn the_spec_is_immutable_once_the_run_has_started() {
    let mut started = run(valid_spec());
    started["status"] = json!({"phase": "Running", "startTime": "2026-11-22T04:00:00Z"});
    let mut edited = started.clone();
    edited["spec"]["launcher"]["parallelism"] = json!(3);
    let messages = rejections(&edited, Some(&started));
    assert!(
        messages
            .iter()
            .any(|m| m.contains("spec is immutable once the run has started")),
        "{messages:?}"
    );

    let pending = run(valid_spec());
    let mut edited_before_start = pending.clone();
    edited_before_start["spec"]["launcher"]["parallelism"] = json!(3);
    assert_eq!(
        rejections(&edited_before_start, Some(&pending)),
        Vec::<String>::new()
    );
}

fn undescribed_fields(schema: &Value, path: &str, out: &mut Vec<String>) {
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        for (name, field) in properties {
            let field_path = format!("{path}.{name}");
            if field
                .get("description")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                out.push(field_path.clone());
            }
            undescribed_fields(field, &field_path, out);
        }
    }
    if let Some(items) = schema.get("items") {
        undescribed_fields(items, &format!("{path}[]"), out);
    }
}

#[test]
fn every_spec_and_status_field_has_a_description_for_kubectl_explain() {
    for file in [
        "benchmarkruns.yaml",
        "workloadprofiles.yaml",
        "benchmarkexperiments.yaml",
    ] {
        let schema = crd_schema(file);
        let mut missing = Vec::new();
        for part in ["spec", "status"] {
            undescribed_fields(&schema["properties"][part], part, &mut missing);
        }
        // Kubernetes' own types (Toleration, ResourceRequirements, Condition) carry their upstream descriptions;
        // a few of their leaves have none upstream either.
        missing.retain(|p| {
            !p.contains(".tolerations[]")
                && !p.contains(".resources.")
                && !p.contains(".conditions[]")
        });
        assert_eq!(
            missing,
            Vec::<String>::new(),
            "{file}: fields without a description"
        );
    }
}

#[test]
fn the_crds_carry_short_names_a_category_and_printer_columns() {
    for (file, short) in [
        ("benchmarkruns.yaml", "br"),
        ("workloadprofiles.yaml", "wp"),
        ("benchmarkexperiments.yaml", "bx"),
    ] {
        let (_, yaml) = llmbench_api::crd_manifests()
            .into_iter()
            .find(|(f, _)| *f == file)
            .expect("exists");
        let crd: Value = serde_saphyr::from_str(&yaml.expect("serializes")).expect("parses");
        assert_eq!(crd["spec"]["names"]["shortNames"], json!([short]));
        assert_eq!(crd["spec"]["names"]["categories"], json!(["llmbench"]));
        assert_eq!(crd["spec"]["scope"], "Namespaced");
        assert!(
            crd["spec"]["versions"][0]["additionalPrinterColumns"]
                .as_array()
                .is_some_and(|c| c.len() >= 3)
        );
    }
}

fn experiment(spec: Value) -> Value {
    json!({
        "apiVersion": "llmbench.dev/v1alpha1",
        "kind": "BenchmarkExperiment",
        "metadata": {"name": "x1", "namespace": "default"},
        "spec": spec,
    })
}

fn valid_experiment_spec() -> Value {
    json!({
        "template": valid_spec(),
        "factors": [{"name": "rate", "key": "load.stages.0.rate", "levels": ["1", "2"]}],
        "repeats": 2,
        "ordering": {"parallelism": 1, "cooldown": "5s"},
        "capacitySearch": {"load": "rate", "slo": ["ttft_p99<=500ms"]},
        "hooks": [{"name": "reset-prefix-cache", "method": "POST", "url": "/reset_prefix_cache"}],
    })
}

#[test]
fn a_valid_experiment_is_accepted() {
    assert_eq!(
        rejections_by(
            "benchmarkexperiments.yaml",
            &experiment(valid_experiment_spec()),
            None
        ),
        Vec::<String>::new()
    );
}

#[test]
fn an_experiment_with_both_forms_no_repeats_or_a_bad_cooldown_is_rejected() {
    let mut both = valid_experiment_spec();
    both["treatments"] = json!([{"name": "a", "overrides": ["x=1"]}]);
    let messages = rejections_by("benchmarkexperiments.yaml", &experiment(both), None);
    assert!(
        messages
            .iter()
            .any(|m| m.contains("set at most one of treatments (a list) or factors (a matrix)")),
        "{messages:?}"
    );
    let mut neither = valid_experiment_spec();
    neither.as_object_mut().expect("object").remove("factors");
    assert!(
        !rejections_by(
            "benchmarkexperiments.yaml",
            &experiment(neither.clone()),
            None
        )
        .is_empty()
    );
    // A model list alone is a valid experiment: one treatment per model.
    let mut models_only = neither;
    models_only["models"] = json!(["org/a", "org/b"]);
    assert_eq!(
        rejections_by("benchmarkexperiments.yaml", &experiment(models_only), None),
        Vec::<String>::new()
    );
    let mut zero = valid_experiment_spec();
    zero["repeats"] = json!(0);
    let messages = rejections_by("benchmarkexperiments.yaml", &experiment(zero), None);
    assert!(
        messages.iter().any(|m| m.contains("/spec/repeats")),
        "{messages:?}"
    );
    let mut cooldown = valid_experiment_spec();
    cooldown["ordering"]["cooldown"] = json!("soon");
    let messages = rejections_by("benchmarkexperiments.yaml", &experiment(cooldown), None);
    assert!(
        messages
            .iter()
            .any(|m| m.contains("cooldown must be a duration")),
        "{messages:?}"
    );
    // The template carries the run's own rules.
    let mut template = valid_experiment_spec();
    template["template"]["workload"] = json!({});
    let messages = rejections_by("benchmarkexperiments.yaml", &experiment(template), None);
    assert!(
        messages
            .iter()
            .any(|m| m.contains("exactly one of workload.profileRef")),
        "{messages:?}"
    );
}

#[test]
fn the_experiment_spec_is_immutable_once_it_has_started() {
    let mut started = experiment(valid_experiment_spec());
    started["status"] = json!({"phase": "Running", "startTime": "2026-11-22T04:00:00Z"});
    let mut edited = started.clone();
    edited["spec"]["repeats"] = json!(3);
    let messages = rejections_by("benchmarkexperiments.yaml", &edited, Some(&started));
    assert!(
        messages
            .iter()
            .any(|m| m.contains("spec is immutable once the experiment has started")),
        "{messages:?}"
    );
    let pending = experiment(valid_experiment_spec());
    let mut edited_before_start = pending.clone();
    edited_before_start["spec"]["repeats"] = json!(3);
    assert_eq!(
        rejections_by(
            "benchmarkexperiments.yaml",
            &edited_before_start,
            Some(&pending)
        ),
        Vec::<String>::new()
    );
}

#[test]
fn a_run_takes_a_capacity_search_and_its_summary_carries_goodput_and_capacity() {
    let mut spec = valid_spec();
    spec["capacitySearch"] =
        json!({"load": "concurrency", "slo": ["goodput>=95%"], "maxPoints": 10});
    assert_eq!(rejections(&run(spec.clone()), None), Vec::<String>::new());
    spec["capacitySearch"]["load"] = json!("qps");
    assert!(
        !rejections(&run(spec), None).is_empty(),
        "an unknown load axis"
    );
    let summary = &crd_schema("benchmarkruns.yaml")["properties"]["status"]["properties"]["summary"]
        ["properties"];
    assert_eq!(summary["goodputPercent"]["type"], "number");
    let capacity = &summary["capacity"]["properties"];
    for field in ["load", "status", "answer", "passing", "failing", "points"] {
        assert!(
            capacity.get(field).is_some(),
            "capacity.{field}: {capacity}"
        );
    }
}
