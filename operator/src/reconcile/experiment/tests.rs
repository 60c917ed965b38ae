//! Tests of the BenchmarkExperiment reconciler: matching runs to the plan, what is final, and a scripted cleanup.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use llmbench_api::v1alpha1::BenchmarkRun;
use llmbench_api::v1alpha1::{BenchmarkRunStatus, ExperimentRun, Phase};
use serde_json::json;

use super::finish::{MAX_MESSAGE_BYTES, bounded};
use super::runs::observe_runs;
use super::*;
use crate::builders::experiment::experiment_run;
use crate::builders::experiment::fixtures::{TWO_BY_TWO, experiment};
use crate::experiment::validate::{Plan, validate};
use crate::reconcile::fixtures::{ApiServer, list, scripted};

fn owned(plan: &Plan, index: usize, phase: Phase) -> BenchmarkRun {
    let exp = experiment(TWO_BY_TWO);
    let mut run = experiment_run(&exp, &plan.treatments, &plan.runs[index], &[]).expect("builds");
    run.status = Some(BenchmarkRunStatus {
        phase: Some(phase),
        ..BenchmarkRunStatus::default()
    });
    run
}

#[test]
fn runs_are_matched_to_the_plan_by_name_and_a_vanished_one_is_lost_not_rerun() {
    let plan = validate(&experiment(TWO_BY_TWO), None).expect("valid");
    // Run 0 is gone while run 1 exists: it was created before it, so it is lost.
    let seen = observe_runs(&plan, &[owned(&plan, 1, Phase::Running)], None);
    let phases: Vec<Option<&str>> = seen.iter().map(|o| o.phase.as_deref()).collect();
    assert_eq!(phases, [Some("Lost"), Some("Running"), None, None]);
    // The last created run vanished: only the earlier status knows it existed.
    let old = BenchmarkExperimentStatus {
        runs: vec![ExperimentRun {
            name: plan.names[0].clone(),
            treatment: "rate-5".into(),
            repeat: 1,
            phase: Some("Running".into()),
            hooks: Vec::new(),
        }],
        ..BenchmarkExperimentStatus::default()
    };
    let seen = observe_runs(&plan, &[], Some(&old));
    assert_eq!(seen[0].phase.as_deref(), Some("Lost"));
    assert_eq!(seen[1].state, RunState::NotCreated);
    let fresh = observe_runs(&plan, &[], None);
    assert!(fresh.iter().all(|o| o.state == RunState::NotCreated));
}

#[test]
fn only_an_experiment_that_started_and_ended_is_final() {
    let ended = |phase, started: bool| BenchmarkExperimentStatus {
        phase: Some(phase),
        start_time: started.then(|| Time(Timestamp::now())),
        ..BenchmarkExperimentStatus::default()
    };
    assert!(is_finished(Some(&ended(ExperimentPhase::Succeeded, true))));
    assert!(is_finished(Some(&ended(ExperimentPhase::Failed, true))));
    assert!(
        !is_finished(Some(&ended(ExperimentPhase::Failed, false))),
        "an invalid experiment is looked at again when its spec changes"
    );
    assert!(!is_finished(Some(&ended(ExperimentPhase::Running, true))));
    assert!(!is_finished(None));
}

#[test]
fn long_messages_are_bounded_on_a_char_boundary() {
    let message = "é".repeat(MAX_MESSAGE_BYTES);
    let short = bounded(&message);
    assert!(short.len() <= MAX_MESSAGE_BYTES + '…'.len_utf8());
    assert_eq!(bounded("fine"), "fine");
}

#[tokio::test]
async fn deleting_an_experiment_removes_only_the_runs_and_objects_it_controls() {
    let mut exp = experiment(TWO_BY_TWO);
    exp.metadata.finalizers = Some(vec![FINALIZER.to_owned()]);
    exp.metadata.deletion_timestamp = Some(Time(Timestamp::now()));
    let stored = serde_json::to_value(&exp).expect("json");
    let plan = validate(&exp, None).expect("valid");
    let mut ours = serde_json::to_value(owned(&plan, 0, Phase::Running)).expect("json");
    ours["metadata"]["uid"] = json!("run-uid-0");
    // A run that carries the experiment's label but no owner reference to it: someone else's.
    let mut stray = ours.clone();
    stray["metadata"]["name"] = json!("stray");
    stray["metadata"]["ownerReferences"] = json!([]);
    let run_name = ours["metadata"]["name"].as_str().expect("name").to_owned();
    let scenario = |mut api: ApiServer| async move {
        reads_experiment(&mut api, &stored).await;
        api.expect("GET", &format!("{BASE}/benchmarkruns"))
            .await
            .ok(&list("BenchmarkRunList", vec![ours.clone(), stray]));
        let delete = api
            .expect("DELETE", &format!("{BASE}/benchmarkruns/{run_name}"))
            .await;
        assert_eq!(delete.body["preconditions"]["uid"], "run-uid-0");
        delete.ok(&ours);
        api.expect("GET", "/api/v1/namespaces/team-a/pods/sweep-collector")
            .await
            .not_found("pods \"sweep-collector\"");
        // A user's ConfigMap under the plan's name stays.
        api.expect("GET", "/api/v1/namespaces/team-a/configmaps/sweep-plan")
            .await
            .ok(&json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": "sweep-plan", "namespace": "team-a", "uid": "users"}}));
        api.expect("PATCH", &format!("{BASE}/benchmarkexperiments/sweep"))
            .await
            .ok(&stored);
        api
    };
    let result = scripted(scenario, |ctx| reconcile(Arc::new(exp), ctx)).await;
    assert_eq!(result.expect("cleaned up"), Action::await_change());
}

const BASE: &str = "/apis/llmbench.dev/v1alpha1/namespaces/team-a";
const EVENTS_PATH: &str = "/apis/events.k8s.io/v1/namespaces/team-a/events";

/// The experiment as the API server has it: finalized, at generation 1.
fn stored_experiment() -> BenchmarkExperiment {
    let mut exp = experiment(TWO_BY_TWO);
    exp.metadata.finalizers = Some(vec![FINALIZER.to_owned()]);
    exp.metadata.generation = Some(1);
    exp
}

/// The experiment read fresh at the start of a pass.
async fn reads_experiment(api: &mut ApiServer, stored: &serde_json::Value) {
    api.expect("GET", &format!("{BASE}/benchmarkexperiments/sweep"))
        .await
        .ok(stored);
}

/// The pass's status write, server-side applied under the operator's field manager and answered with the stored
/// experiment carrying it. Returns the status.
async fn writes_status(api: &mut ApiServer, stored: &serde_json::Value) -> serde_json::Value {
    let patch = api
        .expect(
            "PATCH",
            &format!("{BASE}/benchmarkexperiments/sweep/status"),
        )
        .await;
    assert!(
        patch.query.contains("fieldManager=llmbench-operator"),
        "{}",
        patch.query
    );
    let status = patch.body["status"].clone();
    let mut answered = stored.clone();
    answered["status"] = status.clone();
    patch.ok(&answered);
    status
}

fn condition<'v>(status: &'v serde_json::Value, type_: &str) -> &'v serde_json::Value {
    status["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == type_))
        .unwrap_or_else(|| panic!("no {type_} condition in {status:#}"))
}

#[tokio::test]
async fn a_fresh_experiment_is_validated_starts_its_first_run_and_says_it_is_running() {
    let exp = stored_experiment();
    let stored = serde_json::to_value(&exp).expect("json");
    let scenario = |mut api: ApiServer| async move {
        reads_experiment(&mut api, &stored).await;
        // Observe: its runs, by its uid label; none yet.
        let runs = api.expect("GET", &format!("{BASE}/benchmarkruns")).await;
        assert!(
            runs.query
                .contains("llmbench.dev%2Fexperiment-uid%3D7d1e2f30"),
            "{}",
            runs.query
        );
        runs.ok(&list("BenchmarkRunList", vec![]));
        // Start: the first run of the plan, owned by the experiment, then the event saying so.
        let run = api.expect("POST", &format!("{BASE}/benchmarkruns")).await;
        assert!(
            run.query.contains("fieldManager=llmbench-operator"),
            "{}",
            run.query
        );
        assert_eq!(
            run.body["metadata"]["ownerReferences"][0]["uid"],
            "7d1e2f30-aaaa-bbbb-cccc-1234567890ab"
        );
        let name = run.body["metadata"]["name"].clone();
        run.created();
        let event = api.expect("POST", EVENTS_PATH).await;
        assert_eq!(event.body["reason"], "RunCreated");
        let note = event.body["note"].as_str().unwrap_or_default().to_owned();
        assert!(
            note.starts_with(&format!(
                "created BenchmarkRun {}",
                name.as_str().unwrap_or("?")
            )) && note.ends_with("run 1 of 4)"),
            "{note}"
        );
        event.created();
        // Write: Running, valid, started, four runs planned.
        let status = writes_status(&mut api, &stored).await;
        assert_eq!(status["phase"], "Running");
        assert!(status["startTime"].is_string(), "{status:#}");
        assert_eq!(status["runs"].as_array().map(Vec::len), Some(4));
        let valid = condition(&status, "Valid");
        assert_eq!(
            (&valid["status"], &valid["reason"]),
            (&json!("True"), &json!("Valid"))
        );
        let completed = condition(&status, "Completed");
        assert_eq!(completed["reason"], "Running");
        assert_eq!(completed["message"], "0 of 4 run(s) finished (0 failed)");
        api
    };
    let action = scripted(scenario, |ctx| reconcile(Arc::new(exp), ctx))
        .await
        .expect("the pass succeeds");
    assert_eq!(action, Action::requeue(RESYNC));
}

#[tokio::test]
async fn an_experiment_whose_runs_all_finished_writes_its_plan_and_starts_the_collector() {
    let mut exp = stored_experiment();
    exp.status = Some(BenchmarkExperimentStatus {
        phase: Some(ExperimentPhase::Running),
        start_time: Some(Time(Timestamp::now())),
        ..BenchmarkExperimentStatus::default()
    });
    let stored = serde_json::to_value(&exp).expect("json");
    let plan = validate(&exp, None).expect("valid");
    let runs: Vec<serde_json::Value> = (0..plan.runs.len())
        .map(|i| serde_json::to_value(owned(&plan, i, Phase::Succeeded)).expect("json"))
        .collect();
    let scenario = |mut api: ApiServer| async move {
        reads_experiment(&mut api, &stored).await;
        api.expect("GET", &format!("{BASE}/benchmarkruns"))
            .await
            .ok(&list("BenchmarkRunList", runs));
        // Conclude: no collector yet, so the plan file first (made where absent), then the collector.
        api.expect("GET", "/api/v1/namespaces/team-a/pods/sweep-collector")
            .await
            .not_found("pods \"sweep-collector\"");
        api.expect("GET", "/api/v1/namespaces/team-a/configmaps/sweep-plan")
            .await
            .not_found("configmaps \"sweep-plan\"");
        let plan_cm = api
            .expect("POST", "/api/v1/namespaces/team-a/configmaps")
            .await;
        assert_eq!(
            plan_cm.body["metadata"]["ownerReferences"][0]["uid"],
            "7d1e2f30-aaaa-bbbb-cccc-1234567890ab"
        );
        plan_cm.created();
        let collector = api.expect("POST", "/api/v1/namespaces/team-a/pods").await;
        assert_eq!(collector.body["metadata"]["name"], "sweep-collector");
        collector.created();
        // The phase changed: an event, then the status.
        let event = api.expect("POST", EVENTS_PATH).await;
        assert_eq!(event.body["reason"], "Collecting");
        event.created();
        let status = writes_status(&mut api, &stored).await;
        assert_eq!(status["phase"], "Collecting");
        let completed = condition(&status, "Completed");
        assert_eq!(completed["reason"], "Collecting");
        assert!(
            completed["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("every run finished (")
                    && m.ends_with("collector pod sweep-collector is writing the comparison")),
            "{completed}"
        );
        api
    };
    let action = scripted(scenario, |ctx| reconcile(Arc::new(exp), ctx))
        .await
        .expect("the pass succeeds");
    assert_eq!(action, Action::requeue(RESYNC));
}
