//! A scripted API server for reconcile tests, in the style of kube-rs's controller-rs: the client under test talks
//! to a `tower_test` mock, and a scenario task expects each request in order (method and path), checks what it
//! must, and answers it as the API server would.

use std::sync::Arc;
use std::time::Duration;

use http::{Request, Response};
use kube::Client;
use kube::client::Body;
use kube::runtime::events::{Recorder, Reporter};
use prometheus_client::registry::Registry;
use serde::Serialize;
use serde_json::{Value, json};

use super::{Context, Ctx, retry::Retries};
use crate::builders::{FIELD_MANAGER, LauncherSettings};
use crate::metrics::Metrics;

type Handle = tower_test::mock::Handle<Request<Body>, Response<Body>>;
type Responder = tower_test::mock::SendResponse<Response<Body>>;

/// A client whose every request goes to the returned [`ApiServer`].
pub fn client() -> (Client, ApiServer) {
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    (Client::new(service, "default"), ApiServer(handle))
}

/// A reconcile context on a scripted API server.
pub fn context() -> (Ctx, ApiServer) {
    let (client, server) = client();
    let ctx = Context {
        recorder: Recorder::new(
            client.clone(),
            Reporter {
                controller: FIELD_MANAGER.to_owned(),
                instance: Some("test".to_owned()),
            },
        ),
        client,
        metrics: Metrics::register(&mut Registry::default()),
        launcher: LauncherSettings {
            image: "ghcr.io/llmbench/llmbench:0.1.0".to_owned(),
            image_pull_policy: None,
            defaults: crate::builders::LauncherDefaults::default(),
        },
        http: reqwest::Client::new(),
        ttl_after_finished: None,
        retries: Retries::default(),
    };
    (Arc::new(ctx), server)
}

/// The one preamble of a scripted test: runs `pass` on a fresh context while `scenario` answers its requests, then
/// checks the scenario saw every request it expected (within 5 s) and, once `pass` dropped the context, no other.
pub async fn scripted<S, P, T>(
    scenario: impl FnOnce(ApiServer) -> S,
    pass: impl FnOnce(Ctx) -> P,
) -> T
where
    S: Future<Output = ApiServer> + Send + 'static,
    P: Future<Output = T>,
{
    let (ctx, api) = context();
    let scenario = tokio::spawn(scenario(api));
    let outcome = pass(ctx).await;
    let api = tokio::time::timeout(Duration::from_secs(5), scenario)
        .await
        .expect("the scenario finished: every expected request came")
        .expect("the scenario's assertions held");
    tokio::time::timeout(Duration::from_secs(5), api.done())
        .await
        .expect("no other request once the pass is over");
    outcome
}

/// The API server's side of the mock.
pub struct ApiServer(Handle);

/// One request received: its query and JSON body, and the way to answer it (dropping it unanswered leaves the
/// caller waiting, as a hung API server does).
pub struct Exchange {
    pub query: String,
    pub body: Value,
    send: Responder,
}

impl ApiServer {
    /// Waits for the next request and asserts it is `method path` (the path without the query).
    pub async fn expect(&mut self, method: &str, path: &str) -> Exchange {
        self.next(method, path)
            .await
            .unwrap_or_else(|| panic!("expected {method} {path}, but the client is gone"))
    }

    /// As [`ApiServer::expect`], but `None` once the client is gone.
    pub async fn next(&mut self, method: &str, path: &str) -> Option<Exchange> {
        let (request, send) = self.0.next_request().await?;
        assert_eq!(
            (request.method().as_str(), request.uri().path()),
            (method, path),
            "unexpected request {} {}",
            request.method(),
            request.uri()
        );
        let query = request.uri().query().unwrap_or_default().to_owned();
        let bytes = request
            .into_body()
            .collect_bytes()
            .await
            .expect("a request body");
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).expect("a JSON request body")
        };
        Some(Exchange { query, body, send })
    }

    /// Asserts that the client makes no further request (once every clone of it has been dropped).
    pub async fn done(mut self) {
        if let Some((request, _)) = self.0.next_request().await {
            panic!("unexpected request {} {}", request.method(), request.uri());
        }
    }
}

impl Exchange {
    /// Answers `code` with `body` as JSON.
    pub fn reply(self, code: u16, body: &impl Serialize) {
        let bytes = serde_json::to_vec(body).expect("a JSON answer");
        let response = Response::builder()
            .status(code)
            .header("content-type", "application/json")
            .body(Body::from(bytes))
            .expect("a response");
        self.send.send_response(response);
    }

    /// Answers 200 with plain text, as the pods/log subresource does.
    pub fn text(self, body: &str) {
        let response = Response::builder()
            .status(200)
            .header("content-type", "text/plain")
            .body(Body::from(body.as_bytes().to_vec()))
            .expect("a response");
        self.send.send_response(response);
    }

    /// Answers 200 with `body`.
    pub fn ok(self, body: &impl Serialize) {
        self.reply(200, body);
    }

    /// Answers 201 with what was sent, as a create does.
    pub fn created(self) {
        let body = self.body.clone();
        self.reply(201, &body);
    }

    /// Answers with a `metav1.Status` failure.
    pub fn fail(self, code: u16, reason: &str, message: &str) {
        self.reply(
            code,
            &json!({
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": message,
                "reason": reason,
                "code": code,
            }),
        );
    }

    /// Answers 404 NotFound for `what` (e.g. `configmaps "x"`).
    pub fn not_found(self, what: &str) {
        self.fail(404, "NotFound", &format!("{what} not found"));
    }
}

/// A list of `items` as the API server returns it.
pub fn list(kind: &str, items: Vec<Value>) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": kind,
        "metadata": {"resourceVersion": "1"},
        "items": items,
    })
}
