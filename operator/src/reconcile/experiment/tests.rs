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
    const BASE: &str = "/apis/llmbench.dev/v1alpha1/namespaces/team-a";
    let scenario = |mut api: ApiServer| async move {
        api.expect("GET", &format!("{BASE}/benchmarkexperiments/sweep"))
            .await
            .ok(&stored);
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
