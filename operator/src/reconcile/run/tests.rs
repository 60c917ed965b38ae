//! Scripted API server tests of the BenchmarkRun reconciler: each pass's requests in order, and what it writes.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::runtime::finalizer;
use serde_json::{Value, json};

use super::*;
use crate::builders::fixtures;
use crate::builders::stack::{stack_deployment, stack_service};
use crate::reconcile::fixtures::{ApiServer, context, list};
use crate::reconcile::retry::FIRST_RETRY;

const RUN_PATH: &str = "/apis/llmbench.dev/v1alpha1/namespaces/team-a/benchmarkruns/bench-1";
const STATUS_PATH: &str =
    "/apis/llmbench.dev/v1alpha1/namespaces/team-a/benchmarkruns/bench-1/status";
const PODS_PATH: &str = "/api/v1/namespaces/team-a/pods";
const CM_PATH: &str = "/api/v1/namespaces/team-a/configmaps";
const PVC_PATH: &str = "/api/v1/namespaces/team-a/persistentvolumeclaims";
const EVENTS_PATH: &str = "/apis/events.k8s.io/v1/namespaces/team-a/events";
const UID: &str = "0f3c9a2e-5b7d-4c1e-9a8b-1234567890ab";

/// The basic run as the API server has it: finalized, created `age_s` seconds ago.
fn stored_run(spec: &str, age_s: i64) -> BenchmarkRun {
    let mut run = fixtures::run(spec);
    run.metadata.finalizers = Some(vec![FINALIZER.to_owned()]);
    run.metadata.generation = Some(1);
    run.metadata.resource_version = Some("7".to_owned());
    let created = Timestamp::now() - k8s_openapi::jiff::SignedDuration::from_secs(age_s);
    run.metadata.creation_timestamp = Some(Time(created));
    run
}

fn json_of(value: &impl serde::Serialize) -> Value {
    serde_json::to_value(value).expect("serializes")
}

/// `object` as created: with a uid and a creation time.
fn as_created(mut object: Value, uid: &str) -> Value {
    object["metadata"]["uid"] = json!(uid);
    object["metadata"]["creationTimestamp"] = json!(Timestamp::now().to_string());
    object
}

fn condition_of<'v>(status: &'v Value, type_: &str) -> &'v Value {
    status["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == type_))
        .unwrap_or_else(|| panic!("no {type_} condition in {status:#}"))
}

/// Runs `reconcile` (and, on error, `error_policy`) against the scripted `scenario`, then checks the scenario
/// saw every request it expected and no other.
async fn reconcile_with<F, Fut>(
    run: &BenchmarkRun,
    scenario: F,
) -> (Result<Action, Error>, Option<Action>)
where
    F: FnOnce(ApiServer) -> Fut,
    Fut: std::future::Future<Output = ApiServer> + Send + 'static,
{
    let (ctx, server) = context();
    let (result, policy, server) = reconcile_on(run, &ctx, scenario(server)).await;
    drop(ctx);
    tokio::time::timeout(Duration::from_secs(5), server.done())
        .await
        .expect("the client is gone");
    (result, policy)
}

/// One pass on `ctx`, answered by `scenario`, which hands the API server back for the next pass.
async fn reconcile_on<Fut>(
    run: &BenchmarkRun,
    ctx: &Ctx,
    scenario: Fut,
) -> (Result<Action, Error>, Option<Action>, ApiServer)
where
    Fut: std::future::Future<Output = ApiServer> + Send + 'static,
{
    let scenario = tokio::spawn(scenario);
    let result = reconcile(Arc::new(run.clone()), ctx.clone()).await;
    let policy = result
        .as_ref()
        .err()
        .map(|e| error_policy(Arc::new(run.clone()), e, ctx.clone()));
    let server = tokio::time::timeout(Duration::from_secs(5), scenario)
        .await
        .expect("the scenario finished: every expected request came")
        .expect("the scenario's assertions held");
    (result, policy, server)
}

#[tokio::test]
async fn a_fresh_run_makes_its_config_map_claim_and_pod_in_order_then_writes_its_status() {
    let run = stored_run(fixtures::BASIC, 5);
    let stored = json_of(&run);
    let (result, _) = reconcile_with(&run, |mut api| async move {
        api.expect("GET", RUN_PATH).await.ok(&stored);
        let pods = api.expect("GET", PODS_PATH).await;
        assert!(
            pods.query.contains("llmbench.dev%2Frun-uid%3D0f3c9a2e"),
            "{}",
            pods.query
        );
        pods.ok(&list("PodList", vec![]));
        // Prepare: the rendered profile's ConfigMap (made only where none is), then the claim.
        api.expect("GET", &format!("{CM_PATH}/bench-1-profile"))
            .await
            .not_found("configmaps \"bench-1-profile\"");
        let cm = api.expect("POST", CM_PATH).await;
        assert_eq!(cm.body["metadata"]["ownerReferences"][0]["uid"], UID);
        assert!(cm.body["data"]["profile.yaml"].is_string());
        cm.created();
        api.expect("GET", &format!("{PVC_PATH}/workload-pvc"))
            .await
            .not_found("persistentvolumeclaims \"workload-pvc\"");
        api.expect("POST", PVC_PATH).await.created();
        // Start: the launcher, then the event saying so.
        let pod = api.expect("POST", PODS_PATH).await;
        assert_eq!(pod.body["metadata"]["name"], "bench-1-launcher-0");
        let created_pod = as_created(pod.body.clone(), "pod-uid-0");
        pod.reply(201, &created_pod);
        let event = api.expect("POST", EVENTS_PATH).await;
        assert_eq!(event.body["reason"], "LaunchersCreated");
        event.created();
        api.expect("GET", PODS_PATH)
            .await
            .ok(&list("PodList", vec![created_pod]));
        // Observe and finish: Pending, started, written once.
        let patch = api.expect("PATCH", STATUS_PATH).await;
        assert!(
            patch.query.contains("fieldManager=llmbench-operator"),
            "{}",
            patch.query
        );
        let status = &patch.body["status"];
        assert_eq!(status["phase"], "Pending");
        assert!(status["startTime"].is_string(), "{status:#}");
        assert_eq!(condition_of(status, "ProfileRendered")["status"], "True");
        assert_eq!(
            condition_of(status, "LauncherStarted")["reason"],
            "LaunchersCreated"
        );
        let mut answered = stored.clone();
        answered["status"] = status.clone();
        patch.ok(&answered);
        api
    })
    .await;
    let action = result.expect("the pass succeeds");
    assert!(
        action != Action::await_change(),
        "a running run is looked at again"
    );
}

#[tokio::test]
async fn a_refused_pod_becomes_a_reconciled_false_condition_one_event_and_a_growing_backoff() {
    let run = stored_run(fixtures::BASIC, 5);
    let stored = json_of(&run);
    let quota = "pods \"bench-1-launcher-0\" is forbidden: exceeded quota: team-a-quota, requested: \
                 cpu=1, used: cpu=8, limited: cpu=8";
    let profile_cm = |body: Value| as_created(body, "cm-uid");
    let (ctx, server) = context();
    let first = {
        let stored = stored.clone();
        async move {
            let mut api = server;
            api.expect("GET", RUN_PATH).await.ok(&stored);
            api.expect("GET", PODS_PATH)
                .await
                .ok(&list("PodList", vec![]));
            api.expect("GET", &format!("{CM_PATH}/bench-1-profile"))
                .await
                .not_found("configmaps \"bench-1-profile\"");
            let cm = api.expect("POST", CM_PATH).await;
            let made = profile_cm(cm.body.clone());
            cm.reply(201, &made);
            api.expect("GET", &format!("{PVC_PATH}/workload-pvc"))
                .await
                .ok(&json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                            "metadata": {"name": "workload-pvc", "namespace": "team-a"}}));
            api.expect("POST", PODS_PATH)
                .await
                .fail(403, "Forbidden", quota);
            // The error, told on the run (read again first) and in a Warning event.
            api.expect("GET", RUN_PATH).await.ok(&stored);
            let patch = api.expect("PATCH", STATUS_PATH).await;
            let reconciled = condition_of(&patch.body["status"], "Reconciled").clone();
            assert_eq!(reconciled["status"], "False");
            assert_eq!(reconciled["reason"], "CreatePodFailed");
            let message = reconciled["message"].as_str().unwrap_or_default();
            assert!(
                message.contains("launcher pod bench-1-launcher-0 for BenchmarkRun bench-1")
                    && message.contains("exceeded quota"),
                "{message}"
            );
            let mut answered = stored.clone();
            answered["status"] = patch.body["status"].clone();
            patch.ok(&answered);
            let event = api.expect("POST", EVENTS_PATH).await;
            assert_eq!(
                (&event.body["type"], &event.body["reason"]),
                (&json!("Warning"), &json!("CreatePodFailed"))
            );
            event.created();
            (api, answered, made)
        }
    };
    let scenario = tokio::spawn(first);
    let result = reconcile(Arc::new(run.clone()), ctx.clone()).await;
    let error = result.expect_err("the pass fails");
    assert_eq!(error.reason(), "CreatePodFailed");
    assert_eq!(
        error_policy(Arc::new(run.clone()), &error, ctx.clone()),
        Action::requeue(Duration::from_secs(5))
    );
    let (server, failed_run, made_cm) = scenario.await.expect("first scenario");

    // The same refusal again: the condition is already there (no write) and the event is not repeated.
    let second = async move {
        let mut api = server;
        api.expect("GET", RUN_PATH).await.ok(&failed_run);
        api.expect("GET", PODS_PATH)
            .await
            .ok(&list("PodList", vec![]));
        // The run's own ConfigMap, from the first pass: updated in place.
        api.expect("GET", &format!("{CM_PATH}/bench-1-profile"))
            .await
            .ok(&made_cm);
        let apply = api
            .expect("PATCH", &format!("{CM_PATH}/bench-1-profile"))
            .await;
        assert!(apply.query.contains("force=true"), "{}", apply.query);
        apply.ok(&made_cm);
        api.expect("GET", &format!("{PVC_PATH}/workload-pvc"))
            .await
            .ok(&json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                        "metadata": {"name": "workload-pvc", "namespace": "team-a"}}));
        api.expect("POST", PODS_PATH)
            .await
            .fail(403, "Forbidden", quota);
        api.expect("GET", RUN_PATH).await.ok(&failed_run);
        api
    };
    let (result, policy, server) = reconcile_on(&run, &ctx, second).await;
    assert!(result.is_err());
    assert_eq!(policy, Some(Action::requeue(Duration::from_secs(10))));
    drop(ctx);
    tokio::time::timeout(Duration::from_secs(5), server.done())
        .await
        .expect("no event the second time");
}

#[tokio::test]
async fn a_config_map_of_the_profile_name_that_the_run_does_not_own_is_refused_not_taken_over() {
    let run = stored_run(fixtures::BASIC, 5);
    let stored = json_of(&run);
    let (result, policy) = reconcile_with(&run, |mut api| async move {
        api.expect("GET", RUN_PATH).await.ok(&stored);
        api.expect("GET", PODS_PATH).await.ok(&list("PodList", vec![]));
        api.expect("GET", &format!("{CM_PATH}/bench-1-profile"))
            .await
            .ok(&json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": "bench-1-profile", "namespace": "team-a", "uid": "users"},
                        "data": {"mine": "keep me"}}));
        // No write to the ConfigMap: the refusal goes on the run.
        api.expect("GET", RUN_PATH).await.ok(&stored);
        let patch = api.expect("PATCH", STATUS_PATH).await;
        let reconciled = condition_of(&patch.body["status"], "Reconciled").clone();
        assert_eq!(reconciled["reason"], "ConfigMapNotOwned");
        assert_eq!(
            reconciled["message"],
            "ConfigMap team-a/bench-1-profile exists and is not owned by BenchmarkRun bench-1; delete or \
             rename it, or rename the run"
        );
        patch.ok(&stored);
        let event = api.expect("POST", EVENTS_PATH).await;
        assert_eq!(event.body["reason"], "ConfigMapNotOwned");
        event.created();
        api
    })
    .await;
    assert!(matches!(
        result,
        Err(Error::Finalizer(ref inner))
            if matches!(inner.as_ref(), finalizer::Error::ApplyFailed(Error::ConfigMapNotOwned { .. }))
    ));
    assert_eq!(policy, Some(Action::requeue(Duration::from_secs(5))));
}

#[tokio::test]
async fn a_pod_of_the_launchers_name_that_the_run_does_not_own_is_refused() {
    let run = stored_run(fixtures::BASIC, 5);
    let stored = json_of(&run);
    let (result, _) = reconcile_with(&run, |mut api| async move {
        api.expect("GET", RUN_PATH).await.ok(&stored);
        api.expect("GET", PODS_PATH).await.ok(&list("PodList", vec![]));
        api.expect("GET", &format!("{CM_PATH}/bench-1-profile"))
            .await
            .not_found("configmaps \"bench-1-profile\"");
        api.expect("POST", CM_PATH).await.created();
        api.expect("GET", &format!("{PVC_PATH}/workload-pvc"))
            .await
            .ok(&json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                        "metadata": {"name": "workload-pvc", "namespace": "team-a"}}));
        api.expect("POST", PODS_PATH).await.fail(
            409,
            "AlreadyExists",
            "pods \"bench-1-launcher-0\" already exists",
        );
        // An earlier namesake run's pod, still terminating: not ours.
        api.expect("GET", &format!("{PODS_PATH}/bench-1-launcher-0"))
            .await
            .ok(&json!({"apiVersion": "v1", "kind": "Pod",
                        "metadata": {"name": "bench-1-launcher-0", "namespace": "team-a", "uid": "old",
                                     "ownerReferences": [{"apiVersion": "llmbench.dev/v1alpha1",
                                         "kind": "BenchmarkRun", "name": "bench-1", "uid": "an-older-run",
                                         "controller": true}]}}));
        api.expect("GET", RUN_PATH).await.ok(&stored);
        let patch = api.expect("PATCH", STATUS_PATH).await;
        assert_eq!(
            condition_of(&patch.body["status"], "Reconciled")["reason"],
            "PodNotOwned"
        );
        patch.ok(&stored);
        api.expect("POST", EVENTS_PATH).await.created();
        api
    })
    .await;
    assert!(result.is_err());
}

fn running_pod() -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": "bench-1-launcher-0", "namespace": "team-a", "uid": "pod-uid-0",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"llmbench.dev/run-uid": UID, "llmbench.dev/launcher-index": "0"},
            "ownerReferences": [{"apiVersion": "llmbench.dev/v1alpha1", "kind": "BenchmarkRun",
                                 "name": "bench-1", "uid": UID, "controller": true}],
        },
        "status": {"phase": "Running", "containerStatuses": [{"name": "launcher", "image": "i",
            "imageID": "", "ready": true, "restartCount": 0, "state": {"running": {}}}]},
    })
}

const DEPLOY_PATH: &str = "/apis/apps/v1/namespaces/team-a/deployments";
const SVC_PATH: &str = "/api/v1/namespaces/team-a/services";
const STANDALONE: &str = "
harness: inference-perf
workload:
  builtin: sanity_random
stack:
  model: m
  standalone:
    image: llmbench:dev
    args: [sim, --host, 0.0.0.0, --port, '8000']
";

/// `object` as the run's controller owner reference makes it.
fn owned(mut object: Value) -> Value {
    object["metadata"]["uid"] = json!("stack-uid");
    object["metadata"]["ownerReferences"] = json!([{"apiVersion": "llmbench.dev/v1alpha1",
        "kind": "BenchmarkRun", "name": "bench-1", "uid": UID, "controller": true}]);
    object
}

/// The stack's pod: `ready` or not, its container restarted `restarts` times (the last one OOMKilled).
fn stack_pod(ready: bool, restarts: i32, phase: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "bench-1-stack-7d9f", "namespace": "team-a", "uid": "stack-pod-uid",
                     "labels": {"llmbench.dev/stack-of": UID}},
        "status": {"phase": phase,
            "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}],
            "containerStatuses": [{"name": "stack", "image": "i", "imageID": "", "ready": ready,
                "restartCount": restarts, "state": {"running": {}},
                "lastState": if restarts > 0 {
                    json!({"terminated": {"exitCode": 137, "reason": "OOMKilled"}})
                } else { json!({}) }}]},
    })
}

/// The stack's Deployment as stored: created `age_s` seconds ago, with `available` replicas.
fn stack_deployment_stored(run: &BenchmarkRun, age_s: i64, available: i32) -> Value {
    let stack = run.spec.stack.standalone.as_ref().expect("standalone");
    let mut deployment = owned(json_of(&stack_deployment(run, stack).expect("builds")));
    let created = Timestamp::now() - k8s_openapi::jiff::SignedDuration::from_secs(age_s);
    deployment["metadata"]["creationTimestamp"] = json!(created.to_string());
    deployment["status"] = json!({"availableReplicas": available});
    deployment
}

/// The stack's Deployment and Service deleted after the run, each as the very object that was read.
async fn expect_teardown(api: &mut ApiServer, deployment: Value, service: Value) {
    for (path, object) in [(DEPLOY_PATH, deployment), (SVC_PATH, service)] {
        let name = format!("{path}/bench-1-stack");
        api.expect("GET", &name).await.ok(&object);
        let delete = api.expect("DELETE", &name).await;
        assert_eq!(delete.body["preconditions"]["uid"], "stack-uid");
        delete.ok(&object);
    }
}

#[tokio::test]
async fn a_standalone_run_makes_its_stack_first_and_starts_no_launcher_until_it_is_ready() {
    let run = stored_run(STANDALONE, 5);
    let stored = json_of(&run);
    let (result, _) = reconcile_with(&run, |mut api| async move {
        api.expect("GET", RUN_PATH).await.ok(&stored);
        api.expect("GET", PODS_PATH)
            .await
            .ok(&list("PodList", vec![]));
        api.expect("GET", &format!("{SVC_PATH}/bench-1-stack"))
            .await
            .not_found("services \"bench-1-stack\"");
        let service = api.expect("POST", SVC_PATH).await;
        assert_eq!(service.body["metadata"]["ownerReferences"][0]["uid"], UID);
        assert_eq!(service.body["spec"]["ports"][0]["port"], 8000);
        service.created();
        api.expect("GET", &format!("{DEPLOY_PATH}/bench-1-stack"))
            .await
            .not_found("deployments.apps \"bench-1-stack\"");
        let deployment = api.expect("POST", DEPLOY_PATH).await;
        let container = &deployment.body["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(container["image"], "llmbench:dev");
        assert_eq!(container["args"], json!(["sim", "--host", "0.0.0.0", "--port", "8000"]));
        let created = as_created(deployment.body.clone(), "stack-uid");
        deployment.reply(201, &created);
        let event = api.expect("POST", EVENTS_PATH).await;
        assert_eq!(event.body["reason"], "StackCreated");
        event.created();
        let pods = api.expect("GET", PODS_PATH).await;
        assert!(
            pods.query.contains("llmbench.dev%2Fstack-of%3D0f3c9a2e"),
            "{}",
            pods.query
        );
        pods.ok(&list("PodList", vec![stack_pod(false, 0, "Pending")]));
        // No ConfigMap, claim or launcher yet: the run waits for its stack.
        let patch = api.expect("PATCH", STATUS_PATH).await;
        let status = patch.body["status"].clone();
        assert_eq!(status["phase"], "Pending");
        assert!(status.get("startTime").is_none(), "{status:#}");
        let ready = condition_of(&status, "StackReady");
        assert_eq!((&ready["status"], &ready["reason"]), (&json!("False"), &json!("StackStarting")));
        assert_eq!(ready["message"], "stack pod bench-1-stack-7d9f: Pending");
        assert_eq!(
            status["stack"],
            json!({"deployment": "bench-1-stack", "service": "bench-1-stack",
                   "url": "http://bench-1-stack.team-a.svc:8000", "image": "llmbench:dev", "ready": false})
        );
        let mut answered = stored.clone();
        answered["status"] = status;
        patch.ok(&answered);
        api
    })
    .await;
    let action = result.expect("the pass succeeds");
    assert!(
        action != Action::await_change(),
        "a starting stack is looked at again"
    );
}

#[tokio::test]
async fn a_stack_not_ready_within_its_timeout_fails_the_run_naming_the_timeout_and_goes() {
    let run = stored_run(
        &format!("{STANDALONE}    readiness: {{timeout: 15m}}\n"),
        20 * 60,
    );
    let stored = json_of(&run);
    let deployment = stack_deployment_stored(&run, 16 * 60, 0);
    let stack = run.spec.stack.standalone.as_ref().expect("standalone");
    let service = owned(json_of(&stack_service(&run, stack).expect("builds")));
    let (result, _) = reconcile_with(&run, |mut api| async move {
        api.expect("GET", RUN_PATH).await.ok(&stored);
        api.expect("GET", PODS_PATH)
            .await
            .ok(&list("PodList", vec![]));
        api.expect("GET", &format!("{SVC_PATH}/bench-1-stack"))
            .await
            .ok(&service);
        api.expect("GET", &format!("{DEPLOY_PATH}/bench-1-stack"))
            .await
            .ok(&deployment);
        api.expect("GET", PODS_PATH)
            .await
            .ok(&list("PodList", vec![stack_pod(false, 0, "Running")]));
        let log = api
            .expect("GET", &format!("{PODS_PATH}/bench-1-stack-7d9f/log"))
            .await;
        assert!(log.query.contains("container=stack"), "{}", log.query);
        log.text("Loading safetensors checkpoint shards: 40% Completed\n");
        let patch = api.expect("PATCH", STATUS_PATH).await;
        let status = patch.body["status"].clone();
        assert_eq!(status["phase"], "Failed");
        let failed = condition_of(&status, "Failed");
        assert_eq!(failed["reason"], "StackNotReady");
        // By hand from not_ready_message: the timeout, where the pod was, the log tail.
        assert_eq!(
            failed["message"],
            "the standalone stack did not become ready within spec.stack.standalone.readiness.timeout \
             (15m); stack pod bench-1-stack-7d9f: Running, not ready yet (readiness probe)\nstack log \
             tail:\nLoading safetensors checkpoint shards: 40% Completed"
        );
        assert_eq!(condition_of(&status, "StackReady")["reason"], "StackNotReady");
        assert_eq!(status["stack"]["deleted"], true);
        let mut answered = stored.clone();
        answered["status"] = status;
        patch.ok(&answered);
        let event = api.expect("POST", EVENTS_PATH).await;
        assert_eq!(event.body["reason"], "StackNotReady");
        event.created();
        expect_teardown(&mut api, deployment, service).await;
        api
    })
    .await;
    assert_eq!(result.expect("the pass succeeds"), Action::await_change());
}

#[tokio::test]
async fn a_stack_that_dies_mid_run_fails_it_with_its_reason_and_log_and_stops_the_launchers() {
    let mut run = stored_run(STANDALONE, 60);
    run.status = Some(BenchmarkRunStatus {
        phase: Some(Phase::Running),
        start_time: Some(Time(Timestamp::now())),
        stack: Some(llmbench_api::v1alpha1::StackStatus {
            deployment: "bench-1-stack".to_owned(),
            service: "bench-1-stack".to_owned(),
            url: "http://bench-1-stack.team-a.svc:8000".to_owned(),
            image: "llmbench:dev".to_owned(),
            ready: true,
            pod: Some("bench-1-stack-7d9f".to_owned()),
            restarts: Some(0),
            deleted: false,
        }),
        ..BenchmarkRunStatus::default()
    });
    let stored = json_of(&run);
    let deployment = stack_deployment_stored(&run, 50, 0);
    let stack = run.spec.stack.standalone.as_ref().expect("standalone");
    let service = owned(json_of(&stack_service(&run, stack).expect("builds")));
    let (result, _) = reconcile_with(&run, |mut api| async move {
        api.expect("GET", RUN_PATH).await.ok(&stored);
        api.expect("GET", PODS_PATH)
            .await
            .ok(&list("PodList", vec![running_pod()]));
        // The heartbeat: the Deployment, then the stack pod, restarted once since the launchers started.
        api.expect("GET", &format!("{DEPLOY_PATH}/bench-1-stack"))
            .await
            .ok(&deployment);
        api.expect("GET", PODS_PATH)
            .await
            .ok(&list("PodList", vec![stack_pod(false, 1, "Running")]));
        // The log of the instance that died.
        let log = api
            .expect("GET", &format!("{PODS_PATH}/bench-1-stack-7d9f/log"))
            .await;
        assert!(log.query.contains("previous=true"), "{}", log.query);
        log.text("CUDA out of memory\n");
        let patch = api.expect("PATCH", STATUS_PATH).await;
        let status = patch.body["status"].clone();
        assert_eq!(status["phase"], "Failed");
        let failed = condition_of(&status, "Failed");
        assert_eq!(failed["reason"], "StackFailed");
        assert_eq!(
            failed["message"],
            "the stack's server in pod bench-1-stack-7d9f terminated (OOMKilled, exit code 137) and was \
             restarted 1 time(s) during the run; the launchers were stopped, and what they measured until \
             then is on the workload volume, marked interrupted\nstack log tail:\nCUDA out of memory"
        );
        assert_eq!(status["stack"]["ready"], false);
        let mut answered = stored.clone();
        answered["status"] = status;
        patch.ok(&answered);
        // The status first, then the launcher stopped (SIGTERM: it keeps what it measured).
        let delete = api
            .expect("DELETE", &format!("{PODS_PATH}/bench-1-launcher-0"))
            .await;
        assert_eq!(delete.body["preconditions"]["uid"], "pod-uid-0");
        delete.ok(&running_pod());
        let event = api.expect("POST", EVENTS_PATH).await;
        assert_eq!(event.body["reason"], "StackFailed");
        event.created();
        expect_teardown(&mut api, deployment, service).await;
        api
    })
    .await;
    assert_eq!(result.expect("the pass succeeds"), Action::await_change());
}

#[tokio::test]
async fn a_sharded_runs_merge_does_not_watch_the_stack_it_no_longer_needs() {
    let mut run = stored_run(&format!("{STANDALONE}launcher:\n  parallelism: 2\n"), 60);
    run.status = Some(BenchmarkRunStatus {
        phase: Some(Phase::Collecting),
        start_time: Some(Time(Timestamp::now())),
        stack: Some(llmbench_api::v1alpha1::StackStatus {
            deployment: "bench-1-stack".to_owned(),
            service: "bench-1-stack".to_owned(),
            url: "http://bench-1-stack.team-a.svc:8000".to_owned(),
            image: "llmbench:dev".to_owned(),
            ready: true,
            pod: Some("bench-1-stack-7d9f".to_owned()),
            restarts: Some(0),
            deleted: false,
        }),
        ..BenchmarkRunStatus::default()
    });
    let stored = json_of(&run);
    let launcher = |index: u32| {
        let mut pod = running_pod();
        pod["metadata"]["name"] = json!(format!("bench-1-launcher-{index}"));
        pod["metadata"]["labels"]["llmbench.dev/launcher-index"] = json!(index.to_string());
        pod["status"] = json!({"phase": "Succeeded", "containerStatuses": [{"name": "launcher",
            "image": "i", "imageID": "", "ready": false, "restartCount": 0,
            "state": {"terminated": {"exitCode": 0, "message": "{}"}}}]});
        pod
    };
    let mut merge = running_pod();
    merge["metadata"]["name"] = json!("bench-1-merge");
    merge["metadata"]["labels"] = json!({"llmbench.dev/run-uid": UID});
    let (result, _) = reconcile_with(&run, |mut api| async move {
        api.expect("GET", RUN_PATH).await.ok(&stored);
        api.expect("GET", PODS_PATH)
            .await
            .ok(&list("PodList", vec![launcher(0), launcher(1), merge]));
        // No look at the stack's Deployment or pods: the next request is the status.
        let patch = api.expect("PATCH", STATUS_PATH).await;
        assert_eq!(
            condition_of(&patch.body["status"], "Completed")["reason"],
            "Merging"
        );
        let mut answered = stored.clone();
        answered["status"] = patch.body["status"].clone();
        patch.ok(&answered);
        api
    })
    .await;
    assert!(result.is_ok(), "{result:?}");
}

#[tokio::test]
async fn a_nop_run_on_a_standalone_stack_reports_the_model_load_from_the_stack_pods_log() {
    let mut run = stored_run(
        "harness: nop\nworkload:\n  builtin: nop\nstack:\n  model: Qwen/Qwen3-0.6B\n  standalone: {}\n",
        60,
    );
    run.status = Some(BenchmarkRunStatus {
        phase: Some(Phase::Running),
        start_time: Some(Time(Timestamp::now())),
        stack: Some(llmbench_api::v1alpha1::StackStatus {
            deployment: "bench-1-stack".to_owned(),
            service: "bench-1-stack".to_owned(),
            url: "http://bench-1-stack.team-a.svc:8000".to_owned(),
            image: llmbench_api::v1alpha1::DEFAULT_STANDALONE_IMAGE.to_owned(),
            ready: true,
            pod: Some("bench-1-stack-7d9f".to_owned()),
            restarts: Some(0),
            deleted: false,
        }),
        ..BenchmarkRunStatus::default()
    });
    let stored = json_of(&run);
    // The nop launcher's compact summary: no requests.
    let summary = json!({"schema": "llmbench.summary/v1", "run_id": "bench-1-0f3c9a2e", "harness": "nop",
        "requests": {"total": 0, "succeeded": 0, "failed": 0}, "duration_s": 0.5,
        "throughput": {"requests_per_s": 0.0, "input_tokens_per_s": 0.0, "output_tokens_per_s": 0.0},
        "latency_ms": {"ttft": null, "tpot": null, "itl": null, "ntpot": null, "e2e": null}});
    let mut done = running_pod();
    done["status"] = json!({"phase": "Succeeded", "containerStatuses": [{"name": "launcher", "image": "i",
        "imageID": "", "ready": false, "restartCount": 0,
        "state": {"terminated": {"exitCode": 0, "message": summary.to_string()}}}]});
    let (result, _) = reconcile_with(&run, |mut api| async move {
        api.expect("GET", RUN_PATH).await.ok(&stored);
        api.expect("GET", PODS_PATH)
            .await
            .ok(&list("PodList", vec![done]));
        let log = api
            .expect("GET", &format!("{PODS_PATH}/bench-1-stack-7d9f/log"))
            .await;
        assert!(log.query.contains("container=stack"), "{}", log.query);
        assert!(
            !log.query.contains("tailLines"),
            "the whole log: {}",
            log.query
        );
        log.text(crate::stack::tests::V1_LOG);
        let patch = api.expect("PATCH", STATUS_PATH).await;
        let status = patch.body["status"].clone();
        assert_eq!(status["phase"], "Succeeded");
        let load = &status["summary"]["modelLoad"];
        // The recorded vLLM 0.11 log's figures (worked out in crate::stack's tests).
        assert_eq!(load["name"], "bench-1-stack-7d9f stack");
        assert_eq!(load["loadSeconds"], 20.442057);
        assert_eq!(load["vllmStartSeconds"], 123.0);
        assert_eq!(status["stack"]["deleted"], true);
        let mut answered = stored.clone();
        answered["status"] = status;
        patch.ok(&answered);
        api.expect("POST", EVENTS_PATH).await.created();
        for path in [DEPLOY_PATH, SVC_PATH] {
            api.expect("GET", &format!("{path}/bench-1-stack"))
                .await
                .not_found("bench-1-stack");
        }
        api
    })
    .await;
    assert_eq!(result.expect("the pass succeeds"), Action::await_change());
}

/// A Running run created two hours ago with a 90 s timeout.
fn running_past_its_timeout() -> BenchmarkRun {
    let mut run = stored_run(&format!("{}timeout: 90s\n", fixtures::BASIC), 7200);
    run.status = Some(BenchmarkRunStatus {
        phase: Some(Phase::Running),
        start_time: Some(Time(Timestamp::now())),
        ..BenchmarkRunStatus::default()
    });
    run
}

#[tokio::test]
async fn a_timed_out_run_writes_its_failed_status_before_it_deletes_its_pods() {
    let run = running_past_its_timeout();
    let stored = json_of(&run);
    let (result, _) = reconcile_with(&run, |mut api| async move {
        api.expect("GET", RUN_PATH).await.ok(&stored);
        api.expect("GET", PODS_PATH)
            .await
            .ok(&list("PodList", vec![running_pod()]));
        let patch = api.expect("PATCH", STATUS_PATH).await;
        let status = patch.body["status"].clone();
        assert_eq!(status["phase"], "Failed");
        assert_eq!(condition_of(&status, "Failed")["reason"], "Timeout");
        let mut answered = stored.clone();
        answered["status"] = status;
        patch.ok(&answered);
        // Only then the pod, and only the very pod that was read.
        let delete = api
            .expect("DELETE", &format!("{PODS_PATH}/bench-1-launcher-0"))
            .await;
        assert_eq!(delete.body["preconditions"]["uid"], "pod-uid-0");
        delete.ok(&running_pod());
        let event = api.expect("POST", EVENTS_PATH).await;
        assert_eq!(event.body["reason"], "Timeout");
        event.created();
        api
    })
    .await;
    assert_eq!(result.expect("the pass succeeds"), Action::await_change());
}

#[tokio::test]
async fn a_timed_out_run_whose_status_write_fails_keeps_its_pods() {
    let run = running_past_its_timeout();
    let stored = json_of(&run);
    let (result, _) = reconcile_with(&run, |mut api| async move {
        api.expect("GET", RUN_PATH).await.ok(&stored);
        api.expect("GET", PODS_PATH)
            .await
            .ok(&list("PodList", vec![running_pod()]));
        api.expect("PATCH", STATUS_PATH).await.fail(
            500,
            "InternalError",
            "etcdserver: request timed out",
        );
        // No DELETE: the error is told, and the next pass times the run out again.
        api.expect("GET", RUN_PATH).await.ok(&stored);
        api.expect("PATCH", STATUS_PATH).await.fail(
            500,
            "InternalError",
            "etcdserver: request timed out",
        );
        api.expect("POST", EVENTS_PATH).await.created();
        api
    })
    .await;
    assert_eq!(
        result.map_err(|e| e.reason()).expect_err("fails"),
        "PatchStatusFailed"
    );
}

#[tokio::test]
async fn a_run_that_never_started_fails_with_timeout_counted_from_its_creation() {
    let run = stored_run(&format!("{}timeout: 90s\n", fixtures::BASIC), 120);
    let stored = json_of(&run);
    let (result, _) = reconcile_with(&run, |mut api| async move {
        api.expect("GET", RUN_PATH).await.ok(&stored);
        api.expect("GET", PODS_PATH)
            .await
            .ok(&list("PodList", vec![]));
        let patch = api.expect("PATCH", STATUS_PATH).await;
        let failed = condition_of(&patch.body["status"], "Failed").clone();
        assert_eq!(failed["reason"], "Timeout");
        assert!(
            failed["message"]
                .as_str()
                .is_some_and(|m| m.contains("did not start within spec.timeout (90s)")),
            "{failed}"
        );
        patch.ok(&stored);
        api.expect("POST", EVENTS_PATH).await.created();
        api
    })
    .await;
    assert_eq!(result.expect("the pass succeeds"), Action::await_change());
}

#[tokio::test]
async fn deleting_a_run_removes_only_the_pods_and_config_map_it_controls() {
    let mut run = stored_run(fixtures::BASIC, 5);
    run.metadata.deletion_timestamp = Some(Time(Timestamp::now()));
    let stored = json_of(&run);
    let mut foreign = running_pod();
    foreign["metadata"]["name"] = json!("impostor");
    foreign["metadata"]["ownerReferences"] = json!([]);
    let (result, _) = reconcile_with(&run, |mut api| async move {
        api.expect("GET", RUN_PATH).await.ok(&stored);
        api.expect("GET", PODS_PATH)
            .await
            .ok(&list("PodList", vec![running_pod(), foreign]));
        let delete = api
            .expect("DELETE", &format!("{PODS_PATH}/bench-1-launcher-0"))
            .await;
        assert_eq!(delete.body["preconditions"]["uid"], "pod-uid-0");
        delete.ok(&running_pod());
        // A user's ConfigMap under the profile's name stays.
        api.expect("GET", &format!("{CM_PATH}/bench-1-profile"))
            .await
            .ok(&json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": "bench-1-profile", "namespace": "team-a", "uid": "users"}}));
        // The finalizer goes: a JSON patch on the run.
        let finalizer = api.expect("PATCH", RUN_PATH).await;
        assert!(finalizer.body.to_string().contains("/metadata/finalizers"));
        finalizer.ok(&stored);
        api
    })
    .await;
    assert_eq!(result.expect("cleaned up"), Action::await_change());
}

#[test]
fn the_results_path_names_the_volume_and_the_run_directory() {
    let run = fixtures::run(fixtures::BASIC);
    assert_eq!(
        results_path(&run).expect("path"),
        "workload-pvc:/requests/bench-1-0f3c9a2e"
    );
    let scratch = fixtures::run(&format!("{}storage:\n  emptyDir: {{}}\n", fixtures::BASIC));
    assert_eq!(
        results_path(&scratch).expect("path"),
        "emptyDir:/requests/bench-1-0f3c9a2e"
    );
}

#[test]
fn the_deadline_runs_from_the_creation_and_debug_runs_have_none() {
    let mut run = fixtures::run(&format!("{}timeout: 90s\n", fixtures::BASIC));
    let at = |s| Timestamp::from_second(s).expect("time");
    run.metadata.creation_timestamp = Some(Time(at(1_000)));
    // The pods came much later; the deadline does not move with them.
    run.status = Some(BenchmarkRunStatus {
        start_time: Some(Time(at(1_080))),
        ..BenchmarkRunStatus::default()
    });
    assert_eq!(remaining(&run, at(1_030)), Some(Duration::from_secs(60)));
    assert_eq!(remaining(&run, at(1_090)), Some(Duration::ZERO));
    assert_eq!(remaining(&run, at(1_200)), Some(Duration::ZERO));
    let mut debug = fixtures::run(&format!("{}launcher:\n  debug: true\n", fixtures::BASIC));
    debug.metadata.creation_timestamp = Some(Time(at(1_000)));
    assert_eq!(remaining(&debug, at(99_999)), None);
}

#[test]
fn a_retry_never_sleeps_past_the_deadline_but_keeps_its_backoff_once_it_has_passed() {
    let backoff = Duration::from_secs(300);
    assert_eq!(
        retry_wait(backoff, Some(Duration::from_secs(20))),
        Duration::from_secs(20) + DEADLINE_SLACK
    );
    assert_eq!(retry_wait(backoff, Some(Duration::from_secs(900))), backoff);
    assert_eq!(retry_wait(backoff, Some(Duration::ZERO)), backoff);
    assert_eq!(retry_wait(backoff, None), backoff);
    assert_eq!(FIRST_RETRY, Duration::from_secs(5));
}
