//! Scripted API server tests of the BenchmarkRun reconciler: each pass's requests in order, and what it writes.
//!
//! In the style of kube-rs's controller-rs: test objects come from builders ([`stored_run`], [`launcher`],
//! [`stack_pod`], [`ready_stack`]), and [`RunApi`] scripts the API server one step of a pass at a time, so a test
//! states only what its case is about; [`reconcile_with`] runs a pass against it through the one preamble,
//! [`scripted`].

use std::ops::{Deref, DerefMut};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::runtime::finalizer;
use llmbench_api::v1alpha1::StackStatus;
use serde_json::{Value, json};

use super::*;
use crate::builders::fixtures;
use crate::builders::stack::{stack_deployment, stack_service};
use crate::reconcile::fixtures::{ApiServer, context, list, scripted};
use crate::reconcile::retry::FIRST_RETRY;

const RUN_PATH: &str = "/apis/llmbench.dev/v1alpha1/namespaces/team-a/benchmarkruns/bench-1";
const STATUS_PATH: &str =
    "/apis/llmbench.dev/v1alpha1/namespaces/team-a/benchmarkruns/bench-1/status";
const PODS_PATH: &str = "/api/v1/namespaces/team-a/pods";
const CM_PATH: &str = "/api/v1/namespaces/team-a/configmaps";
const PVC_PATH: &str = "/api/v1/namespaces/team-a/persistentvolumeclaims";
const EVENTS_PATH: &str = "/apis/events.k8s.io/v1/namespaces/team-a/events";
const DEPLOY_PATH: &str = "/apis/apps/v1/namespaces/team-a/deployments";
const SVC_PATH: &str = "/api/v1/namespaces/team-a/services";
const UID: &str = "0f3c9a2e-5b7d-4c1e-9a8b-1234567890ab";

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

/// `run` before its launchers, its stack already through the pre-flight: what the steps after it start from.
fn checked(mut run: BenchmarkRun) -> BenchmarkRun {
    let mut status = BenchmarkRunStatus {
        phase: Some(Phase::Pending),
        ..BenchmarkRunStatus::default()
    };
    crate::status::set_condition(
        &mut status.conditions,
        crate::status::PREFLIGHT_PASSED,
        true,
        "Passed",
        "pre-flight passed for `m`",
        Some(1),
        Timestamp::now(),
    );
    run.status = Some(status);
    run
}

/// The run's pre-flight pod as the API server has it, its container in `state`.
fn preflight_pod(state: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": "bench-1-preflight", "namespace": "team-a", "uid": "preflight-uid",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"llmbench.dev/run-uid": UID, "app.kubernetes.io/component": "preflight"},
            "ownerReferences": [{"apiVersion": "llmbench.dev/v1alpha1", "kind": "BenchmarkRun",
                                 "name": "bench-1", "uid": UID, "controller": true}],
        },
        "status": {"phase": if state.get("terminated").is_some_and(|t| t["exitCode"] == 0) { "Succeeded" }
                            else if state.get("terminated").is_some() { "Failed" } else { "Running" },
            "containerStatuses": [{"name": "preflight", "image": "i", "imageID": "", "ready": false,
                "restartCount": 0, "state": state}]},
    })
}

/// `run` under way since now: in `phase`, with its standalone stack's status where it has one.
fn started(mut run: BenchmarkRun, phase: Phase, stack: Option<StackStatus>) -> BenchmarkRun {
    run.status = Some(BenchmarkRunStatus {
        phase: Some(phase),
        start_time: Some(Time(Timestamp::now())),
        stack,
        ..BenchmarkRunStatus::default()
    });
    run
}

/// The status of a standalone stack whose pod `bench-1-stack-7d9f` is ready, serving `image`.
fn ready_stack(image: &str) -> StackStatus {
    StackStatus {
        deployment: "bench-1-stack".to_owned(),
        service: "bench-1-stack".to_owned(),
        url: "http://bench-1-stack.team-a.svc:8000".to_owned(),
        image: image.to_owned(),
        ready: true,
        pod: Some("bench-1-stack-7d9f".to_owned()),
        restarts: Some(0),
        deleted: false,
    }
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

/// `object` as the run's controller owner reference makes it.
fn owned(mut object: Value) -> Value {
    object["metadata"]["uid"] = json!("stack-uid");
    object["metadata"]["ownerReferences"] = json!([{"apiVersion": "llmbench.dev/v1alpha1",
        "kind": "BenchmarkRun", "name": "bench-1", "uid": UID, "controller": true}]);
    object
}

fn condition_of<'v>(status: &'v Value, type_: &str) -> &'v Value {
    status["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == type_))
        .unwrap_or_else(|| panic!("no {type_} condition in {status:#}"))
}

/// Launcher pod `index` of the run as the API server has it: owned, labelled, running.
fn launcher(index: u32) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": format!("bench-1-launcher-{index}"), "namespace": "team-a", "uid": format!("pod-uid-{index}"),
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"llmbench.dev/run-uid": UID, "llmbench.dev/launcher-index": index.to_string()},
            "ownerReferences": [{"apiVersion": "llmbench.dev/v1alpha1", "kind": "BenchmarkRun",
                                 "name": "bench-1", "uid": UID, "controller": true}],
        },
        "status": {"phase": "Running", "containerStatuses": [{"name": "launcher", "image": "i",
            "imageID": "", "ready": true, "restartCount": 0, "state": {"running": {}}}]},
    })
}

/// `pod` exited 0 with the termination `message`.
fn succeeded(mut pod: Value, message: &str) -> Value {
    pod["status"] = json!({"phase": "Succeeded", "containerStatuses": [{"name": "launcher", "image": "i",
        "imageID": "", "ready": false, "restartCount": 0,
        "state": {"terminated": {"exitCode": 0, "message": message}}}]});
    pod
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

/// The stack's Service as stored.
fn stack_service_stored(run: &BenchmarkRun) -> Value {
    let stack = run.spec.stack.standalone.as_ref().expect("standalone");
    owned(json_of(&stack_service(run, stack).expect("builds")))
}

/// A claim named `workload-pvc` that exists already.
fn existing_claim() -> Value {
    json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
           "metadata": {"name": "workload-pvc", "namespace": "team-a"}})
}

/// The scripted API server of run `bench-1`, in the style of controller-rs's `ApiServerVerifier`: each method
/// expects the request(s) one step of a pass makes, checks what every such request must carry, and answers as
/// the API server would. It keeps the run as the API server has it, so a status written is what the next read
/// returns. Through `Deref` it is the plain [`ApiServer`], for the steps a test checks by hand.
struct RunApi {
    api: ApiServer,
    stored: Value,
}

impl Deref for RunApi {
    type Target = ApiServer;
    fn deref(&self) -> &ApiServer {
        &self.api
    }
}

impl DerefMut for RunApi {
    fn deref_mut(&mut self) -> &mut ApiServer {
        &mut self.api
    }
}

impl RunApi {
    /// Every pass's preamble: the run read fresh (the cache may lag the status writes), then its pods listed by
    /// its uid label.
    async fn begins_pass(&mut self, pods: Vec<Value>) {
        self.reads_run().await;
        let listed = self.api.expect("GET", PODS_PATH).await;
        assert!(
            listed.query.contains("llmbench.dev%2Frun-uid%3D0f3c9a2e"),
            "{}",
            listed.query
        );
        listed.ok(&list("PodList", pods));
    }

    /// The pre-flight step reads the run's pre-flight pod (by its uid and component labels): `pods` answer.
    async fn reads_preflight(&mut self, pods: Vec<Value>) {
        let listed = self.api.expect("GET", PODS_PATH).await;
        assert!(
            listed.query.contains("llmbench.dev%2Frun-uid%3D0f3c9a2e")
                && listed
                    .query
                    .contains("app.kubernetes.io%2Fcomponent%3Dpreflight"),
            "{}",
            listed.query
        );
        listed.ok(&list("PodList", pods));
    }

    /// Prepare on a run whose ConfigMap a previous pass made: read, then applied again; the claim exists.
    async fn prepares_again(&mut self) {
        let made = as_created(
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "bench-1-profile", "namespace": "team-a",
                                "ownerReferences": [{"apiVersion": "llmbench.dev/v1alpha1",
                                    "kind": "BenchmarkRun", "name": "bench-1", "uid": UID, "controller": true}]},
                   "data": {"profile.yaml": "x"}}),
            "cm-uid",
        );
        self.api
            .expect("GET", &format!("{CM_PATH}/bench-1-profile"))
            .await
            .ok(&made);
        self.api
            .expect("PATCH", &format!("{CM_PATH}/bench-1-profile"))
            .await
            .ok(&made);
        self.api
            .expect("GET", &format!("{PVC_PATH}/workload-pvc"))
            .await
            .ok(&existing_claim());
    }

    async fn reads_run(&mut self) {
        self.api.expect("GET", RUN_PATH).await.ok(&self.stored);
    }

    /// Prepare on a run with no ConfigMap yet: the profile's ConfigMap made (owned by the run, holding the
    /// profile), then the claim — `claim` when it exists, else made. Returns the ConfigMap as made.
    async fn prepares(&mut self, claim: Option<Value>) -> Value {
        self.api
            .expect("GET", &format!("{CM_PATH}/bench-1-profile"))
            .await
            .not_found("configmaps \"bench-1-profile\"");
        let cm = self.api.expect("POST", CM_PATH).await;
        assert_eq!(cm.body["metadata"]["ownerReferences"][0]["uid"], UID);
        assert!(cm.body["data"]["profile.yaml"].is_string());
        let made = as_created(cm.body.clone(), "cm-uid");
        cm.reply(201, &made);
        let claim_path = format!("{PVC_PATH}/workload-pvc");
        match claim {
            Some(claim) => self.api.expect("GET", &claim_path).await.ok(&claim),
            None => {
                self.api
                    .expect("GET", &claim_path)
                    .await
                    .not_found("persistentvolumeclaims \"workload-pvc\"");
                self.api.expect("POST", PVC_PATH).await.created();
            }
        }
        made
    }

    /// The pass's status write, server-side applied under the operator's field manager. Returns the status.
    async fn writes_status(&mut self) -> Value {
        let patch = self.api.expect("PATCH", STATUS_PATH).await;
        assert!(
            patch.query.contains("fieldManager=llmbench-operator"),
            "{}",
            patch.query
        );
        let status = patch.body["status"].clone();
        self.stored["status"] = status.clone();
        patch.ok(&self.stored);
        status
    }

    /// An event about the run with `reason`. Returns its body.
    async fn publishes(&mut self, reason: &str) -> Value {
        let event = self.api.expect("POST", EVENTS_PATH).await;
        assert_eq!(event.body["reason"], reason, "{:#}", event.body);
        let body = event.body.clone();
        event.created();
        body
    }

    /// A failed pass told on the run: read again, `Reconciled=False` with `reason` written, then a Warning event
    /// with the same reason. Returns the condition.
    async fn tells_error(&mut self, reason: &str) -> Value {
        self.reads_run().await;
        let reconciled = condition_of(&self.writes_status().await, "Reconciled").clone();
        assert_eq!(reconciled["status"], "False");
        assert_eq!(reconciled["reason"], reason);
        assert_eq!(self.publishes(reason).await["type"], "Warning");
        reconciled
    }

    /// Launcher pod `index` deleted as the very pod that was read.
    async fn deletes_launcher(&mut self, index: u32) {
        let delete = self
            .api
            .expect("DELETE", &format!("{PODS_PATH}/bench-1-launcher-{index}"))
            .await;
        assert_eq!(
            delete.body["preconditions"]["uid"],
            format!("pod-uid-{index}")
        );
        delete.ok(&launcher(index));
    }

    /// The stack's Deployment and Service deleted after the run, each as the very object that was read.
    async fn tears_down_stack(&mut self, deployment: Value, service: Value) {
        for (path, object) in [(DEPLOY_PATH, deployment), (SVC_PATH, service)] {
            let name = format!("{path}/bench-1-stack");
            self.api.expect("GET", &name).await.ok(&object);
            let delete = self.api.expect("DELETE", &name).await;
            assert_eq!(delete.body["preconditions"]["uid"], "stack-uid");
            delete.ok(&object);
        }
    }
}

/// Runs one pass against the scripted `scenario` (see [`scripted`]).
async fn reconcile_with<F, Fut>(
    run: &BenchmarkRun,
    scenario: F,
) -> (Result<Action, Error>, Option<Action>)
where
    F: FnOnce(RunApi) -> Fut,
    Fut: std::future::Future<Output = RunApi> + Send + 'static,
{
    let stored = json_of(run);
    scripted(
        move |api| {
            let script = scenario(RunApi { api, stored });
            async move { script.await.api }
        },
        |ctx| async move { one_pass(run, &ctx).await },
    )
    .await
}

/// One pass on `ctx`, answered by `scenario`, which hands the API server back for the next pass.
async fn reconcile_on<Fut>(
    run: &BenchmarkRun,
    ctx: &Ctx,
    scenario: Fut,
) -> (Result<Action, Error>, Option<Action>, RunApi)
where
    Fut: std::future::Future<Output = RunApi> + Send + 'static,
{
    let scenario = tokio::spawn(scenario);
    let (result, policy) = one_pass(run, ctx).await;
    let api = tokio::time::timeout(Duration::from_secs(5), scenario)
        .await
        .expect("the scenario finished: every expected request came")
        .expect("the scenario's assertions held");
    (result, policy, api)
}

/// `reconcile`, and `error_policy` when it fails, as the controller calls them.
async fn one_pass(run: &BenchmarkRun, ctx: &Ctx) -> (Result<Action, Error>, Option<Action>) {
    let result = reconcile(Arc::new(run.clone()), ctx.clone()).await;
    let policy = result
        .as_ref()
        .err()
        .map(|e| error_policy(Arc::new(run.clone()), e, ctx.clone()));
    (result, policy)
}

#[tokio::test]
async fn a_checked_run_makes_its_config_map_claim_and_pod_in_order_then_writes_its_status() {
    let run = checked(stored_run(fixtures::BASIC, 5));
    let (result, _) = reconcile_with(&run, |mut api| async move {
        api.begins_pass(vec![]).await;
        // Prepare: the rendered profile's ConfigMap (made only where none is), then the claim.
        api.prepares(None).await;
        // Start: the launcher, then the event saying so.
        let pod = api.expect("POST", PODS_PATH).await;
        assert_eq!(pod.body["metadata"]["name"], "bench-1-launcher-0");
        let created_pod = as_created(pod.body.clone(), "pod-uid-0");
        pod.reply(201, &created_pod);
        api.publishes("LaunchersCreated").await;
        api.expect("GET", PODS_PATH)
            .await
            .ok(&list("PodList", vec![created_pod]));
        // Observe and finish: Pending, started, written once.
        let status = api.writes_status().await;
        assert_eq!(status["phase"], "Pending");
        assert!(status["startTime"].is_string(), "{status:#}");
        assert_eq!(condition_of(&status, "ProfileRendered")["status"], "True");
        assert_eq!(
            condition_of(&status, "LauncherStarted")["reason"],
            "LaunchersCreated"
        );
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
async fn a_fresh_run_checks_its_stack_with_a_preflight_pod_before_any_launcher() {
    let run = stored_run(fixtures::BASIC, 5);
    let (result, _) = reconcile_with(&run, |mut api| async move {
        api.begins_pass(vec![]).await;
        api.prepares(None).await;
        api.reads_preflight(vec![]).await;
        // The pre-flight pod, and no launcher.
        let pod = api.expect("POST", PODS_PATH).await;
        assert_eq!(pod.body["metadata"]["name"], "bench-1-preflight");
        assert_eq!(
            pod.body["metadata"]["labels"]["app.kubernetes.io/component"],
            "preflight"
        );
        let command = pod.body["spec"]["containers"][0]["command"]
            .as_array()
            .expect("command")
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(" ");
        assert!(
            command.starts_with("llmbench run --harness inference-perf")
                && command.ends_with(
                    "--endpoint http://vllm.llm-d.svc:8000 --tokenizer \
                                      meta-llama/Llama-3.1-8B-Instruct --preflight-only"
                ),
            "{command}"
        );
        let created = as_created(pod.body.clone(), "preflight-uid");
        pod.reply(201, &created);
        let status = api.writes_status().await;
        assert_eq!(status["phase"], "Pending");
        assert_eq!(condition_of(&status, "Completed")["reason"], "Preflight");
        assert!(status["startTime"].is_null(), "{status:#}");
        assert!(
            status["conditions"]
                .as_array()
                .is_some_and(|cs| !cs.iter().any(|c| c["type"] == "LauncherStarted")),
            "{status:#}"
        );
        api
    })
    .await;
    assert_ne!(result.expect("the pass succeeds"), Action::await_change());
}

#[tokio::test]
async fn a_passed_preflight_is_recorded_and_its_pod_deleted_before_the_launchers_are_made() {
    let mut run = stored_run(fixtures::BASIC, 5);
    run.status = Some(BenchmarkRunStatus {
        phase: Some(Phase::Pending),
        ..BenchmarkRunStatus::default()
    });
    let verdict = "pre-flight passed for `m`: GET http://vllm.llm-d.svc:8000/v1/models lists m";
    let (result, _) = reconcile_with(&run, move |mut api| async move {
        api.begins_pass(vec![]).await;
        api.prepares_again().await;
        api.reads_preflight(vec![preflight_pod(
            json!({"terminated": {"exitCode": 0, "message": verdict}}),
        )])
        .await;
        assert_eq!(
            api.publishes("PreflightPassed").await["note"],
            verdict,
            "the verdict, in the event too"
        );
        let delete = api
            .expect("DELETE", &format!("{PODS_PATH}/bench-1-preflight"))
            .await;
        assert_eq!(delete.body["preconditions"]["uid"], "preflight-uid");
        delete.ok(&preflight_pod(json!({"terminated": {"exitCode": 0}})));
        let pod = api.expect("POST", PODS_PATH).await;
        assert_eq!(pod.body["metadata"]["name"], "bench-1-launcher-0");
        let created = as_created(pod.body.clone(), "pod-uid-0");
        pod.reply(201, &created);
        api.publishes("LaunchersCreated").await;
        api.expect("GET", PODS_PATH)
            .await
            .ok(&list("PodList", vec![created]));
        let status = api.writes_status().await;
        let passed = condition_of(&status, "PreflightPassed");
        assert_eq!(
            (&passed["status"], &passed["reason"], &passed["message"]),
            (&json!("True"), &json!("Passed"), &json!(verdict))
        );
        assert_eq!(
            condition_of(&status, "LauncherStarted")["reason"],
            "LaunchersCreated"
        );
        api
    })
    .await;
    result.expect("the pass succeeds");
}

#[tokio::test]
async fn a_failed_preflight_fails_the_run_in_its_own_words_and_makes_no_launcher() {
    let mut run = stored_run(fixtures::BASIC, 5);
    run.status = Some(BenchmarkRunStatus {
        phase: Some(Phase::Pending),
        ..BenchmarkRunStatus::default()
    });
    let verdict = "pre-flight: the server does not serve the model `meta-llama/Llama-3.1-8B-Instruct`: GET \
                   http://vllm.llm-d.svc:8000/v1/models lists other\n  help: pass --model other";
    let (result, _) = reconcile_with(&run, move |mut api| async move {
        api.begins_pass(vec![]).await;
        api.prepares_again().await;
        api.reads_preflight(vec![preflight_pod(json!({"terminated": {
            "exitCode": 6, "reason": "Error", "message": verdict}}))])
        .await;
        // No launcher is made and no log is read: the status, then the Warning event.
        let status = api.writes_status().await;
        assert_eq!(status["phase"], "Failed");
        let failed = condition_of(&status, "Failed");
        assert_eq!(failed["reason"], "PreflightFailed");
        let message = failed["message"].as_str().expect("message");
        assert!(
            message.starts_with(
                "the pre-flight pod bench-1-preflight found the stack unusable from the launchers' network \
                 (exit code 6): no launcher was created"
            ) && message.ends_with(verdict),
            "{message}"
        );
        let check = condition_of(&status, "PreflightPassed");
        assert_eq!(
            (&check["status"], &check["reason"], &check["message"]),
            (&json!("False"), &json!("PreflightFailed"), &json!(verdict))
        );
        assert_eq!(
            api.publishes("PreflightFailed").await["type"],
            "Warning"
        );
        api
    })
    .await;
    assert_eq!(result.expect("the pass succeeds"), Action::await_change());
}

#[tokio::test]
async fn a_refused_pod_becomes_a_reconciled_false_condition_one_event_and_a_growing_backoff() {
    let run = checked(stored_run(fixtures::BASIC, 5));
    let quota = "pods \"bench-1-launcher-0\" is forbidden: exceeded quota: team-a-quota, requested: \
                 cpu=1, used: cpu=8, limited: cpu=8";
    let (ctx, api) = context();
    let api = RunApi {
        api,
        stored: json_of(&run),
    };
    let first = async move {
        let mut api = api;
        api.begins_pass(vec![]).await;
        let made_cm = api.prepares(Some(existing_claim())).await;
        api.expect("POST", PODS_PATH)
            .await
            .fail(403, "Forbidden", quota);
        // The error, told on the run (read again first) and in a Warning event.
        let reconciled = api.tells_error("CreatePodFailed").await;
        let message = reconciled["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("launcher pod bench-1-launcher-0 for BenchmarkRun bench-1")
                && message.contains("exceeded quota"),
            "{message}"
        );
        (api, made_cm)
    };
    let scenario = tokio::spawn(first);
    let result = reconcile(Arc::new(run.clone()), ctx.clone()).await;
    let error = result.expect_err("the pass fails");
    assert_eq!(error.reason(), "CreatePodFailed");
    assert_eq!(
        error_policy(Arc::new(run.clone()), &error, ctx.clone()),
        Action::requeue(Duration::from_secs(5))
    );
    let (api, made_cm) = scenario.await.expect("first scenario");

    // The same refusal again: the condition is already there (no write) and the event is not repeated.
    let second = async move {
        let mut api = api;
        api.begins_pass(vec![]).await;
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
            .ok(&existing_claim());
        api.expect("POST", PODS_PATH)
            .await
            .fail(403, "Forbidden", quota);
        api.reads_run().await;
        api
    };
    let (result, policy, api) = reconcile_on(&run, &ctx, second).await;
    assert!(result.is_err());
    assert_eq!(policy, Some(Action::requeue(Duration::from_secs(10))));
    drop(ctx);
    tokio::time::timeout(Duration::from_secs(5), api.api.done())
        .await
        .expect("no event the second time");
}

#[tokio::test]
async fn a_config_map_of_the_profile_name_that_the_run_does_not_own_is_refused_not_taken_over() {
    let run = stored_run(fixtures::BASIC, 5);
    let (result, policy) = reconcile_with(&run, |mut api| async move {
        api.begins_pass(vec![]).await;
        api.expect("GET", &format!("{CM_PATH}/bench-1-profile"))
            .await
            .ok(&json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": "bench-1-profile", "namespace": "team-a", "uid": "users"},
                        "data": {"mine": "keep me"}}));
        // No write to the ConfigMap: the refusal goes on the run.
        let reconciled = api.tells_error("ConfigMapNotOwned").await;
        assert_eq!(
            reconciled["message"],
            "ConfigMap team-a/bench-1-profile exists and is not owned by BenchmarkRun bench-1; delete or \
             rename it, or rename the run"
        );
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
    let run = checked(stored_run(fixtures::BASIC, 5));
    let (result, _) = reconcile_with(&run, |mut api| async move {
        api.begins_pass(vec![]).await;
        api.prepares(Some(existing_claim())).await;
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
        api.tells_error("PodNotOwned").await;
        api
    })
    .await;
    assert!(result.is_err());
}

#[tokio::test]
async fn a_standalone_run_makes_its_stack_first_and_starts_no_launcher_until_it_is_ready() {
    let run = stored_run(STANDALONE, 5);
    let (result, _) = reconcile_with(&run, |mut api| async move {
        api.begins_pass(vec![]).await;
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
        assert_eq!(
            container["args"],
            json!(["sim", "--host", "0.0.0.0", "--port", "8000"])
        );
        let created = as_created(deployment.body.clone(), "stack-uid");
        deployment.reply(201, &created);
        api.publishes("StackCreated").await;
        let pods = api.expect("GET", PODS_PATH).await;
        assert!(
            pods.query.contains("llmbench.dev%2Fstack-of%3D0f3c9a2e"),
            "{}",
            pods.query
        );
        pods.ok(&list("PodList", vec![stack_pod(false, 0, "Pending")]));
        // No ConfigMap, claim or launcher yet: the run waits for its stack.
        let status = api.writes_status().await;
        assert_eq!(status["phase"], "Pending");
        assert!(status.get("startTime").is_none(), "{status:#}");
        let ready = condition_of(&status, "StackReady");
        assert_eq!(
            (&ready["status"], &ready["reason"]),
            (&json!("False"), &json!("StackStarting"))
        );
        assert_eq!(ready["message"], "stack pod bench-1-stack-7d9f: Pending");
        assert_eq!(
            status["stack"],
            json!({"deployment": "bench-1-stack", "service": "bench-1-stack",
                   "url": "http://bench-1-stack.team-a.svc:8000", "image": "llmbench:dev", "ready": false})
        );
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
    let deployment = stack_deployment_stored(&run, 16 * 60, 0);
    let service = stack_service_stored(&run);
    let (result, _) = reconcile_with(&run, |mut api| async move {
        api.begins_pass(vec![]).await;
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
        let status = api.writes_status().await;
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
        assert_eq!(
            condition_of(&status, "StackReady")["reason"],
            "StackNotReady"
        );
        assert_eq!(status["stack"]["deleted"], true);
        api.publishes("StackNotReady").await;
        api.tears_down_stack(deployment, service).await;
        api
    })
    .await;
    assert_eq!(result.expect("the pass succeeds"), Action::await_change());
}

#[tokio::test]
async fn a_stack_that_dies_mid_run_fails_it_with_its_reason_and_log_and_stops_the_launchers() {
    let run = started(
        stored_run(STANDALONE, 60),
        Phase::Running,
        Some(ready_stack("llmbench:dev")),
    );
    let deployment = stack_deployment_stored(&run, 50, 0);
    let service = stack_service_stored(&run);
    let (result, _) = reconcile_with(&run, |mut api| async move {
        api.begins_pass(vec![launcher(0)]).await;
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
        let status = api.writes_status().await;
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
        // The status first, then the launcher stopped (SIGTERM: it keeps what it measured).
        api.deletes_launcher(0).await;
        api.publishes("StackFailed").await;
        api.tears_down_stack(deployment, service).await;
        api
    })
    .await;
    assert_eq!(result.expect("the pass succeeds"), Action::await_change());
}

#[tokio::test]
async fn a_sharded_runs_merge_does_not_watch_the_stack_it_no_longer_needs() {
    let run = started(
        stored_run(&format!("{STANDALONE}launcher:\n  parallelism: 2\n"), 60),
        Phase::Collecting,
        Some(ready_stack("llmbench:dev")),
    );
    let mut merge = launcher(0);
    merge["metadata"]["name"] = json!("bench-1-merge");
    merge["metadata"]["labels"] = json!({"llmbench.dev/run-uid": UID});
    let (result, _) = reconcile_with(&run, |mut api| async move {
        api.begins_pass(vec![
            succeeded(launcher(0), "{}"),
            succeeded(launcher(1), "{}"),
            merge,
        ])
        .await;
        // No look at the stack's Deployment or pods: the next request is the status.
        let status = api.writes_status().await;
        assert_eq!(condition_of(&status, "Completed")["reason"], "Merging");
        api
    })
    .await;
    assert!(result.is_ok(), "{result:?}");
}

#[tokio::test]
async fn a_nop_run_on_a_standalone_stack_reports_the_model_load_from_the_stack_pods_log() {
    let run = started(
        stored_run(
            "harness: nop\nworkload:\n  builtin: nop\nstack:\n  model: Qwen/Qwen3-0.6B\n  standalone: {}\n",
            60,
        ),
        Phase::Running,
        Some(ready_stack(
            llmbench_api::v1alpha1::DEFAULT_STANDALONE_IMAGE,
        )),
    );
    // The nop launcher's compact summary: no requests.
    let summary = json!({"schema": "llmbench.summary/v1", "run_id": "bench-1-0f3c9a2e", "harness": "nop",
        "requests": {"total": 0, "succeeded": 0, "failed": 0}, "duration_s": 0.5,
        "throughput": {"requests_per_s": 0.0, "input_tokens_per_s": 0.0, "output_tokens_per_s": 0.0},
        "latency_ms": {"ttft": null, "tpot": null, "itl": null, "ntpot": null, "e2e": null}});
    let done = succeeded(launcher(0), &summary.to_string());
    let (result, _) = reconcile_with(&run, |mut api| async move {
        api.begins_pass(vec![done]).await;
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
        let status = api.writes_status().await;
        assert_eq!(status["phase"], "Succeeded");
        let load = &status["summary"]["modelLoad"];
        // The recorded vLLM 0.11 log's figures (worked out in crate::stack's tests).
        assert_eq!(load["name"], "bench-1-stack-7d9f stack");
        assert_eq!(load["loadSeconds"], 20.442057);
        assert_eq!(load["vllmStartSeconds"], 123.0);
        assert_eq!(status["stack"]["deleted"], true);
        api.publishes("RunSucceeded").await;
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

#[tokio::test]
async fn a_nop_run_on_a_service_reads_the_model_load_from_the_pods_behind_it() {
    let run = started(
        stored_run(
            "harness: nop\nworkload:\n  builtin: nop\nstack:\n  model: Qwen/Qwen3-0.6B\n  serviceRef: {name: vllm, port: 8000}\n",
            60,
        ),
        Phase::Running,
        None,
    );
    let summary = json!({"schema": "llmbench.summary/v1", "run_id": "bench-1-0f3c9a2e", "harness": "nop",
        "requests": {"total": 0, "succeeded": 0, "failed": 0}, "duration_s": 0.5,
        "throughput": {"requests_per_s": 0.0, "input_tokens_per_s": 0.0, "output_tokens_per_s": 0.0},
        "latency_ms": {"ttft": null, "tpot": null, "itl": null, "ntpot": null, "e2e": null}});
    let done = succeeded(launcher(0), &summary.to_string());
    let serving = |name: &str| {
        json!({"metadata": {"name": name, "namespace": "team-a", "labels": {"app": "vllm"}},
               "spec": {"containers": [{"name": "vllm", "image": "vllm/vllm-openai"}, {"name": "sidecar"}]}})
    };
    let (result, _) = reconcile_with(&run, |mut api| async move {
        api.begins_pass(vec![done]).await;
        // The Service's selector picks the serving pods.
        api.expect("GET", &format!("{SVC_PATH}/vllm"))
            .await
            .ok(&json!({"metadata": {"name": "vllm", "namespace": "team-a"},
                        "spec": {"selector": {"app": "vllm"}, "ports": [{"port": 8000}]}}));
        let listed = api.expect("GET", PODS_PATH).await;
        assert!(
            listed.query.contains("labelSelector=app%3Dvllm"),
            "{}",
            listed.query
        );
        listed.ok(&list("PodList", vec![serving("vllm-b"), serving("vllm-a")]));
        // Each pod's first container's log, in name order.
        for (pod, log) in [
            ("vllm-a", crate::stack::tests::V1_LOG),
            ("vllm-b", "not a vLLM log\n"),
        ] {
            let read = api.expect("GET", &format!("{PODS_PATH}/{pod}/log")).await;
            assert!(read.query.contains("container=vllm"), "{}", read.query);
            read.text(log);
        }
        // Every pod read is named in an event, the one that did not parse with why.
        let read = api.publishes("ModelLoadRead").await;
        let note = read["note"].as_str().expect("a note");
        assert!(
            note.starts_with("vllm-a vllm loaded the model in 20.4 s; ") && note.contains("vllm-b"),
            "{note}"
        );
        let status = api.writes_status().await;
        assert_eq!(status["phase"], "Succeeded");
        let load = &status["summary"]["modelLoad"];
        assert_eq!(load["name"], "vllm-a vllm");
        assert_eq!(load["loadSeconds"], 20.442057);
        api.publishes("RunSucceeded").await;
        api
    })
    .await;
    assert_eq!(result.expect("the pass succeeds"), Action::await_change());
}

#[tokio::test]
async fn an_empty_dir_runs_results_are_kept_from_the_launchers_log_in_config_maps() {
    let run = started(
        stored_run(
            &format!("{}storage:\n  emptyDir: {{}}\n", fixtures::BASIC),
            60,
        ),
        Phase::Running,
        None,
    );
    let summary = json!({"schema": "llmbench.summary/v1", "run_id": "bench-1-0f3c9a2e", "harness": "inference-perf",
        "requests": {"total": 4, "succeeded": 4, "failed": 0}, "duration_s": 1.0,
        "throughput": {"requests_per_s": 4.0, "input_tokens_per_s": 0.0, "output_tokens_per_s": 0.0},
        "latency_ms": {"ttft": null, "tpot": null, "itl": null, "ntpot": null, "e2e": null}});
    let done = succeeded(launcher(0), &summary.to_string());
    // Two ConfigMaps' worth: a part is PART_BYTES.
    let archive: Vec<u8> = (0..llmbench_api::results_log::PART_BYTES + 10)
        .map(|i| (i % 251) as u8)
        .collect();
    let log = format!(
        "INFO the run ended\n{}",
        llmbench_api::results_log::frame(&archive)
    );
    let (result, _) = reconcile_with(&run, |mut api| async move {
        api.begins_pass(vec![done]).await;
        let read = api
            .expect("GET", &format!("{PODS_PATH}/bench-1-launcher-0/log"))
            .await;
        assert!(
            read.query.contains("container=launcher") && read.query.contains("tailLines="),
            "{}",
            read.query
        );
        read.text(&log);
        let mut joined = Vec::new();
        for index in 0..2 {
            let made = api.expect("POST", CM_PATH).await;
            assert_eq!(
                made.body["metadata"]["name"],
                format!("bench-1-results-{index}")
            );
            assert_eq!(made.body["metadata"]["ownerReferences"][0]["uid"], UID);
            let part: k8s_openapi::ByteString =
                serde_json::from_value(made.body["binaryData"]["part"].clone()).expect("base64");
            joined.extend(part.0);
            made.created();
        }
        assert_eq!(joined, archive);
        let status = api.writes_status().await;
        assert_eq!(status["phase"], "Succeeded");
        assert_eq!(
            status["resultsKept"],
            json!({"configMaps": ["bench-1-results-0", "bench-1-results-1"],
                   "bytes": llmbench_api::results_log::PART_BYTES + 10, "dir": "bench-1-0f3c9a2e"})
        );
        api.publishes("RunSucceeded").await;
        api
    })
    .await;
    assert!(result.is_ok(), "{result:?}");
}

/// A Running run created two hours ago with a 90 s timeout.
fn running_past_its_timeout() -> BenchmarkRun {
    started(
        stored_run(&format!("{}timeout: 90s\n", fixtures::BASIC), 7200),
        Phase::Running,
        None,
    )
}

#[tokio::test]
async fn a_timed_out_run_writes_its_failed_status_before_it_deletes_its_pods() {
    let run = running_past_its_timeout();
    let (result, _) = reconcile_with(&run, |mut api| async move {
        api.begins_pass(vec![launcher(0)]).await;
        let status = api.writes_status().await;
        assert_eq!(status["phase"], "Failed");
        assert_eq!(condition_of(&status, "Failed")["reason"], "Timeout");
        // Only then the pod, and only the very pod that was read.
        api.deletes_launcher(0).await;
        api.publishes("Timeout").await;
        api
    })
    .await;
    assert_eq!(result.expect("the pass succeeds"), Action::await_change());
}

#[tokio::test]
async fn a_timed_out_run_whose_status_write_fails_keeps_its_pods() {
    let run = running_past_its_timeout();
    let (result, _) = reconcile_with(&run, |mut api| async move {
        api.begins_pass(vec![launcher(0)]).await;
        api.expect("PATCH", STATUS_PATH).await.fail(
            500,
            "InternalError",
            "etcdserver: request timed out",
        );
        // No DELETE: the error is told, and the next pass times the run out again.
        api.reads_run().await;
        api.expect("PATCH", STATUS_PATH).await.fail(
            500,
            "InternalError",
            "etcdserver: request timed out",
        );
        api.publishes("PatchStatusFailed").await;
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
    let (result, _) = reconcile_with(&run, |mut api| async move {
        api.begins_pass(vec![]).await;
        let failed = condition_of(&api.writes_status().await, "Failed").clone();
        assert_eq!(failed["reason"], "Timeout");
        assert!(
            failed["message"]
                .as_str()
                .is_some_and(|m| m.contains("did not start within spec.timeout (90s)")),
            "{failed}"
        );
        api.publishes("Timeout").await;
        api
    })
    .await;
    assert_eq!(result.expect("the pass succeeds"), Action::await_change());
}

#[tokio::test]
async fn deleting_a_run_removes_only_the_pods_and_config_map_it_controls() {
    let mut run = stored_run(fixtures::BASIC, 5);
    run.metadata.deletion_timestamp = Some(Time(Timestamp::now()));
    let mut foreign = launcher(0);
    foreign["metadata"]["name"] = json!("impostor");
    foreign["metadata"]["ownerReferences"] = json!([]);
    let (result, _) = reconcile_with(&run, |mut api| async move {
        api.begins_pass(vec![launcher(0), foreign]).await;
        api.deletes_launcher(0).await;
        // A user's ConfigMap under the profile's name stays.
        api.expect("GET", &format!("{CM_PATH}/bench-1-profile"))
            .await
            .ok(&json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": "bench-1-profile", "namespace": "team-a", "uid": "users"}}));
        // The finalizer goes: a JSON patch on the run.
        let finalizer = api.expect("PATCH", RUN_PATH).await;
        assert!(finalizer.body.to_string().contains("/metadata/finalizers"));
        let stored = api.stored.clone();
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
