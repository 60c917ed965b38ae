//! The pre-flight: before any prompt is built or timed, check that the run's server can be used, and stop with
//! the fix when it cannot. Three questions, in this order:
//!
//! 1. **Does anything answer?** `GET /v1/models` with the run's credentials and headers, through reqwest (which
//!    honours proxies and speaks TLS, as the run's own client does for https). A connection that cannot be made
//!    is named by how it failed — refused, DNS, TLS, timeout — with the URL tried. It is tried three times a
//!    second apart: a Kubernetes Service's endpoints can lag its pod's readiness by a moment.
//! 2. **Is the model served?** When the server lists its models, the run's model must be among them; the error
//!    lists what it serves. A server without `/v1/models` (a 404, or an answer that is not OpenAI's list) is not
//!    an error by itself: the test request decides.
//! 3. **Does one request of the run's own kind succeed?** One tiny request (one output token) through the run's
//!    own client, with its API path, streaming, headers and API key, classified exactly as a run's request would
//!    be. Its failure is shown with its HTTP status and the server's error body; a 404 names the path, and says
//!    how to fix a base URL that already ends in the API's path. The model the answer names is compared with the
//!    one sent: a server that ignores the request's model field (llama.cpp, proxies) answers for another. When
//!    the run's requests carry images, so does the test request (one small JPEG), and a refusal says the server
//!    cannot take images.
//!
//! The anchors do the same: `vllm bench serve` sends one test prompt and stops with its error ("Initial test run
//! failed"), and guidellm's `Backend.validate()` lists the models and sends one 1-token completion. Unlike vLLM's
//! test prompt (the workload's first request), ours is not one of the run's prompts, so it warms no prefix cache
//! the run then measures.
//!
//! What the checks found is recorded in run.json's `preflight`, never in the records or the metrics.

use std::time::{Duration, Instant};

use serde_json::Value;

use llmbench_data::Prompt;
use llmbench_engine::engine::client::{self, Probed};
use llmbench_engine::engine::sse::{SseEvent, SseParser};
use llmbench_engine::engine::{Clock, Target};
use llmbench_engine::stack::{error_chain, join_url};
use llmbench_model::record::ErrorClass;
use llmbench_report::report::{PreflightCall, PreflightMeta};
use llmbench_workload::request::{BodySettings, BodyStyle, prepare};
use llmbench_workload::workload::{Api, ApiKind};

/// The side of the one image the test request carries when the run's requests carry images: small, but a whole
/// vision patch.
const PROBE_IMAGE_SIDE: u32 = 28;

/// How long connecting, and the `GET /v1/models` answer, may take.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Attempts to connect before the server counts as unreachable, a second apart.
const CONNECT_ATTEMPTS: u32 = 3;

/// What the pre-flight checks, and how.
#[derive(Debug)]
pub(crate) struct Checks<'a> {
    /// The server's base URL, without a trailing slash.
    pub(crate) endpoint: &'a str,
    pub(crate) api: &'a Api,
    /// The model the run's requests name.
    pub(crate) model: &'a str,
    /// How the run's dialect writes its request bodies.
    pub(crate) style: BodyStyle,
    /// How long the test request may take.
    pub(crate) request_timeout: Duration,
    /// Go on, with a warning, when the server does not list the model or answers for another.
    pub(crate) allow_model_mismatch: bool,
}

/// How a connection could not be made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectFailure {
    Refused,
    Dns,
    Tls,
    Timeout,
    /// Anything else (unreachable network, a reset while connecting through a proxy, …).
    Other,
}

/// Why the run's server cannot be used. Each names the URL it tried and ends with the fix where one is known.
#[derive(Debug, thiserror::Error)]
pub enum PreflightError {
    #[error("{}", connect_message(*kind, url, *attempts, detail))]
    Connect {
        kind: ConnectFailure,
        url: String,
        attempts: u32,
        detail: String,
    },
    #[error(
        "the server does not serve the model `{model}`: GET {url} lists {}\n  help: pass --model {}; if the \
         server serves models it does not list, pass --allow-model-mismatch",
        listing(listed),
        listed.first().map_or("NAME", String::as_str)
    )]
    ModelNotListed {
        model: String,
        url: String,
        listed: Vec<String>,
    },
    #[error(
        "the server does not serve the LoRA adapter{} {}: GET {url} lists {}\n  help: serve them (vLLM: \
         --enable-lora --lora-modules NAME=PATH) or send to adapters it lists (vLLM's `lora-modules`, \
         inference-perf's `load.lora_traffic_split`)",
        if missing.len() == 1 { "" } else { "s" },
        missing.iter().map(|a| format!("`{a}`")).collect::<Vec<_>>().join(", "),
        listing(listed)
    )]
    AdaptersNotListed {
        missing: Vec<String>,
        url: String,
        listed: Vec<String>,
    },
    #[error(
        "the server answered the test request as the model `{answered}`, not `{sent}` (POST {url}): it ignores \
         the request's model field or serves the model under another name\n  help: pass --model {answered} so the \
         results name the model that answered, or --allow-model-mismatch to go on (run.json's preflight records \
         the name the server gave)"
    )]
    ModelMismatch {
        sent: String,
        answered: String,
        url: String,
    },
    #[error("POST {url} answered {answer}: the server has no {path}\n  help: {help}")]
    PathNotFound {
        url: String,
        path: String,
        answer: String,
        help: String,
    },
    #[error(
        "POST {url} answered {answer}: the server does not serve the model `{model}`\n  help: pass --model NAME \
         with a model the server serves{}",
        listed.as_deref().map(|l| format!(" (GET /v1/models lists {})", listing(l))).unwrap_or_default()
    )]
    ModelRefused {
        url: String,
        model: String,
        answer: String,
        listed: Option<Vec<String>>,
    },
    #[error(
        "POST {url} answered {answer}\n  help: the server wants credentials: give the API key it expects (the \
         profile's api_key; it is sent as `Authorization: Bearer`)"
    )]
    Unauthorized { url: String, answer: String },
    #[error(
        "the test request got no complete answer within {} (POST {url})\n  help: a cold engine can take minutes \
         to answer its first request (compilation, warm-up): raise --preflight-timeout",
        humantime::format_duration(*timeout)
    )]
    RequestTimeout { url: String, timeout: Duration },
    #[error(
        "every one of the run's {requests} requests asks for more tokens than the server's context of {limit} \
         (`{model}`'s max_model_len): prompt + max_tokens is {shortest} at least\n  help: ask for fewer tokens \
         (--input-tokens, --output-tokens or the profile's lengths), or serve the model with a longer context \
         (vLLM --max-model-len, llama.cpp -c per slot)"
    )]
    ContextTooShort {
        model: String,
        limit: u64,
        requests: usize,
        shortest: u64,
    },
    #[error(
        "the server refused a test request with one {PROBE_IMAGE_SIDE}×{PROBE_IMAGE_SIDE} image, as the run's \
         requests carry images (POST {url}): {answer}\n  help: serve a model that takes images (a vision model; \
         llama.cpp needs its --mmproj projector), or send text only (vLLM `dataset-name: random`)"
    )]
    ImagesRefused { url: String, answer: String },
    #[error("the test request failed (POST {url}, {class}): {message}\n  help: {help}")]
    Request {
        url: String,
        class: ErrorClass,
        message: String,
        help: &'static str,
    },
    #[error("cannot build the HTTP client for the pre-flight: {0}")]
    Client(reqwest::Error),
}

fn connect_message(kind: ConnectFailure, url: &str, attempts: u32, detail: &str) -> String {
    let parsed = reqwest::Url::parse(url).ok();
    let host = parsed
        .as_ref()
        .and_then(|u| u.host_str().map(str::to_owned))
        .unwrap_or_default();
    let port = parsed
        .as_ref()
        .and_then(reqwest::Url::port_or_known_default)
        .map_or_else(String::new, |p| p.to_string());
    let tries = if attempts > 1 {
        format!(", {attempts} attempts a second apart")
    } else {
        String::new()
    };
    match kind {
        ConnectFailure::Refused => format!(
            "cannot connect to {url}: connection refused, nothing listens at {host}:{port}{tries}\n  help: start \
             the server, or give the address it listens on with --endpoint http://HOST:PORT"
        ),
        ConnectFailure::Dns => format!(
            "cannot connect to {url}: the host name `{host}` does not resolve (DNS){tries}\n  help: check the \
             host in the endpoint; in a cluster a Service is http://NAME.NAMESPACE.svc:PORT"
        ),
        ConnectFailure::Tls => format!(
            "cannot connect to {url}: the TLS handshake with {host}:{port} failed ({detail})\n  help: if the \
             server speaks plain HTTP, use http:// in the endpoint"
        ),
        ConnectFailure::Timeout => format!(
            "cannot connect to {url}: no connection to {host}:{port} within {}{tries} (timeout)\n  help: check \
             the address, and that no firewall or network policy drops the connection",
            humantime::format_duration(CONNECT_TIMEOUT)
        ),
        ConnectFailure::Other => format!("cannot connect to {url}: {detail}{tries}"),
    }
}

fn listing(listed: &[String]) -> String {
    if listed.is_empty() {
        "no model".to_owned()
    } else {
        listed.join(", ")
    }
}

/// Runs the checks; on success, run.json's record of them.
pub(crate) async fn check(
    checks: &Checks<'_>,
    target: Target,
) -> Result<PreflightMeta, PreflightError> {
    let mut meta = PreflightMeta {
        model: Some(checks.model.to_owned()),
        ..PreflightMeta::default()
    };
    let models = list_models(checks).await?;
    if let Some(listed) = &models.listed
        && !listed.iter().any(|id| id == checks.model)
    {
        if !checks.allow_model_mismatch {
            return Err(PreflightError::ModelNotListed {
                model: checks.model.to_owned(),
                url: models.url,
                listed: listed.clone(),
            });
        }
        meta.warnings.push(format!(
            "GET {} does not list the model `{}` (it lists {}); going on as --allow-model-mismatch asks",
            models.url,
            checks.model,
            listing(listed)
        ));
    }
    // inference-perf refuses a run whose adapters the server does not list (`openai_client.py`); vLLM's bench
    // would send them and fail every request of theirs with 404.
    if let (Some(listed), Some(lora)) = (&models.listed, &checks.api.lora) {
        let missing: Vec<String> = lora
            .adapters
            .iter()
            .filter(|a| !listed.contains(a))
            .cloned()
            .collect();
        if !missing.is_empty() {
            if !checks.allow_model_mismatch {
                return Err(PreflightError::AdaptersNotListed {
                    missing,
                    url: models.url,
                    listed: listed.clone(),
                });
            }
            meta.warnings.push(format!(
                "GET {} does not list the LoRA adapters {}; going on as --allow-model-mismatch asks",
                models.url,
                missing.join(", ")
            ));
        }
    }
    let listed = models.listed.clone();
    meta.models = Some(models);
    let (call, answered) = test_request(checks, target, listed).await?;
    meta.request = Some(call);
    if let Some(answered) = &answered
        && answered != checks.model
    {
        let url = join_url(checks.endpoint, &checks.api.target());
        if !checks.allow_model_mismatch {
            return Err(PreflightError::ModelMismatch {
                sent: checks.model.to_owned(),
                answered: answered.clone(),
                url,
            });
        }
        meta.warnings.push(format!(
            "the server answered the test request as the model `{answered}`, not `{}`; going on as \
             --allow-model-mismatch asks",
            checks.model
        ));
    }
    meta.server_model = answered;
    for warning in &meta.warnings {
        tracing::warn!("pre-flight: {warning}");
    }
    Ok(meta)
}

/// What a passed pre-flight found, in one line for a person: the model listing, the test request's answer and any
/// warning (`llmbench run --preflight-only` prints it, and the operator shows it in the run's status).
pub fn describe_passed(meta: &PreflightMeta) -> String {
    let model = meta.model.as_deref().unwrap_or("the run's model");
    let mut parts = Vec::new();
    if let Some(models) = &meta.models {
        parts.push(match (&models.listed, &models.note) {
            (Some(listed), _) => format!("GET {} lists {}", models.url, listing(listed)),
            (None, Some(note)) => format!("GET {}: {note}", models.url),
            (None, None) => format!("GET {} answered", models.url),
        });
    }
    if let Some(request) = &meta.request {
        let status = request
            .status
            .map_or_else(String::new, |s| format!(" HTTP {s}"));
        let answered = meta
            .server_model
            .as_deref()
            .map_or_else(String::new, |m| format!(" as `{m}`"));
        parts.push(format!(
            "a one-token request to POST {} answered{status}{answered} in {:.0} ms",
            request.url, request.latency_ms
        ));
    }
    let mut text = format!("pre-flight passed for `{model}`: {}", parts.join("; "));
    for warning in &meta.warnings {
        text.push_str("\n  warning: ");
        text.push_str(warning);
    }
    text
}

/// `GET /v1/models`: the models listed, when the server answers OpenAI's list; a connection that cannot be made
/// is the pre-flight's first failure.
async fn list_models(checks: &Checks<'_>) -> Result<PreflightCall, PreflightError> {
    let url = join_url(checks.endpoint, "/v1/models");
    let client = llmbench_engine::stack::client(
        CONNECT_TIMEOUT,
        checks.api.api_key.as_deref(),
        &checks.api.headers,
    )
    .map_err(PreflightError::Client)?;
    let started = Instant::now();
    let mut attempt = 1;
    let answer = loop {
        let answer = async {
            let response = client.get(&url).send().await?;
            let status = response.status().as_u16();
            let body = response.bytes().await?;
            Ok::<_, reqwest::Error>((status, body))
        }
        .await;
        match answer {
            Err(e) if e.is_connect() && attempt < CONNECT_ATTEMPTS => {
                attempt += 1;
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            answer => break answer,
        }
    };
    let latency_ms = started.elapsed().as_secs_f64() * 1e3;
    match answer {
        Err(e) if e.is_connect() => Err(PreflightError::Connect {
            kind: connect_failure(&e, &url),
            detail: root_cause(&e),
            url,
            attempts: attempt,
        }),
        // Connected, but no (whole) answer: the test request decides.
        Err(e) => Ok(PreflightCall {
            url,
            status: None,
            latency_ms,
            listed: None,
            note: Some(format!(
                "no answer ({}): the model is checked by the test request alone",
                error_chain(&e)
            )),
        }),
        Ok((status, body)) => {
            let listed = (status == 200).then(|| listed_models(&body)).flatten();
            let note = match (&listed, status) {
                (Some(_), _) => None,
                (None, 200) => Some(
                    "not OpenAI's model list: the model is checked by the test request alone"
                        .to_owned(),
                ),
                (None, status) => Some(format!(
                    "HTTP {status}: the model is checked by the test request alone"
                )),
            };
            Ok(PreflightCall {
                url,
                status: Some(status),
                latency_ms,
                listed,
                note,
            })
        }
    }
}

/// The ids of OpenAI's model list, `{"data": [{"id": …}, …]}`.
fn listed_models(body: &[u8]) -> Option<Vec<String>> {
    let value: Value = serde_json::from_slice(body).ok()?;
    value
        .get("data")?
        .as_array()?
        .iter()
        .map(|model| model.get("id")?.as_str().map(str::to_owned))
        .collect()
}

/// The innermost cause of an error: reqwest's own layers ("error sending request for url …: client error
/// (Connect)") say nothing the URL does not.
fn root_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = error;
    while let Some(source) = cause.source() {
        cause = source;
    }
    cause.to_string()
}

/// How a reqwest connection failed, from its error chain.
fn connect_failure(error: &reqwest::Error, url: &str) -> ConnectFailure {
    if error.is_timeout() {
        return ConnectFailure::Timeout;
    }
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = source {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            match io.kind() {
                std::io::ErrorKind::ConnectionRefused => return ConnectFailure::Refused,
                std::io::ErrorKind::TimedOut => return ConnectFailure::Timeout,
                _ => {}
            }
        }
        source = e.source();
    }
    let chain = error_chain(error).to_ascii_lowercase();
    if chain.contains("dns error") || chain.contains("failed to lookup address") {
        ConnectFailure::Dns
    } else if chain.contains("connection refused") {
        ConnectFailure::Refused
    } else if url.starts_with("https://") {
        // The TCP connection was made (else it would be refused, unresolved or timed out): the handshake failed.
        ConnectFailure::Tls
    } else {
        ConnectFailure::Other
    }
}

/// Sends the test request; returns its record for run.json and the model its answer named.
async fn test_request(
    checks: &Checks<'_>,
    target: Target,
    listed: Option<Vec<String>>,
) -> Result<(PreflightCall, Option<String>), PreflightError> {
    let settings = BodySettings::new(checks.api, checks.model.to_owned(), checks.style);
    let mut prompt = Prompt::text("Hello".to_owned(), 1, Some(1));
    // A rankings probe ranks its query against itself.
    if checks.api.rankings.is_some() {
        prompt.passages = vec![prompt.text.clone()];
    }
    if checks.api.images {
        prompt.images = vec![llmbench_data::image::noise_image(
            PROBE_IMAGE_SIDE,
            PROBE_IMAGE_SIDE,
            0,
        )];
    }
    let request = prepare(&prompt, &settings);
    let url = target.url.clone();
    let Probed { record, body } = client::probe(&target, &request, &Clock::start()).await;
    let call = PreflightCall {
        url: url.clone(),
        status: record.http_status,
        latency_ms: record.end_ns.saturating_sub(record.sent_ns) as f64 / 1e6,
        listed: None,
        note: None,
    };
    let Some(class) = record.error_class() else {
        return Ok((call, answered_model(&body, checks.api.streaming)));
    };
    let message = record
        .error
        .as_ref()
        .map_or_else(String::new, |e| e.message.clone());
    Err(match (class, record.http_status) {
        (ErrorClass::Connect, _) => PreflightError::Connect {
            kind: ConnectFailure::Other,
            url,
            attempts: 1,
            detail: message,
        },
        (ErrorClass::Timeout, _) => PreflightError::RequestTimeout {
            url,
            timeout: checks.request_timeout,
        },
        (ErrorClass::HttpStatus, Some(404)) if message.to_ascii_lowercase().contains("model") => {
            PreflightError::ModelRefused {
                url,
                model: checks.model.to_owned(),
                answer: message,
                listed,
            }
        }
        (ErrorClass::HttpStatus, Some(404)) => PreflightError::PathNotFound {
            help: path_help(checks.endpoint, checks.api),
            path: reqwest::Url::parse(&url)
                .map_or_else(|_| checks.api.path().to_owned(), |u| u.path().to_owned()),
            url,
            answer: message,
        },
        (ErrorClass::HttpStatus, Some(401 | 403)) => PreflightError::Unauthorized {
            url,
            answer: message,
        },
        (ErrorClass::HttpStatus, Some(_)) if checks.api.images => PreflightError::ImagesRefused {
            url,
            answer: message,
        },
        (ErrorClass::HttpStatus, Some(status)) if status >= 500 => PreflightError::Request {
            url,
            class,
            message,
            help: "the server failed a one-token request; a server still loading its model answers 503 until \
                   it is ready — wait for it (see its log), or let llmbench start it with --serve, which waits",
        },
        _ => PreflightError::Request {
            url,
            class,
            message,
            help: "every request of the run would fail this way; fix the server or the profile (--no-preflight \
                   runs anyway, recording each failure)",
        },
    })
}

/// How to fix a 404 on the API path: a base URL that already ends in the API's path is the common cause, since
/// llmbench appends the path itself.
fn path_help(endpoint: &str, api: &Api) -> String {
    let path = api.path();
    let base_path = reqwest::Url::parse(endpoint)
        .map(|u| u.path().trim_end_matches('/').to_owned())
        .unwrap_or_default();
    for suffix in ["/v1/chat/completions", "/v1/completions", "/v1"] {
        if base_path.ends_with(suffix) && path.starts_with("/v1/") {
            let base = endpoint.trim_end_matches('/');
            let stripped = &base[..base.len() - suffix.len()];
            return format!(
                "the endpoint already ends in `{suffix}`, and llmbench appends {path} to it: give the server's \
                 base URL, --endpoint {stripped}"
            );
        }
    }
    if api.endpoint.is_some() {
        return format!(
            "the profile sets the API path {path} (vllm-benchmark `endpoint`, guidellm `request_format` or \
             `api_routes`); give the path the server serves"
        );
    }
    match api.kind {
        ApiKind::Completion => "check that the server serves OpenAI's completions API; a server that serves only \
             chat completions needs a chat profile (inference-perf `api.type: chat`, vllm-benchmark `backend: \
             openai-chat`, guidellm `request_format: /v1/chat/completions`)"
            .to_owned(),
        ApiKind::Chat => "check that the server serves OpenAI's chat completions API; a server without a chat \
             template serves only completions, which a completions profile sends"
            .to_owned(),
        ApiKind::Responses => "check that the server serves OpenAI's Responses API (vLLM does, at /v1/responses); \
             a server without it needs a chat profile (guidellm `request_format: /v1/chat/completions`)"
            .to_owned(),
        ApiKind::Messages => "check that the server serves Anthropic's Messages API (vLLM and llama.cpp do, at \
             /v1/messages); a server without it needs a chat profile (inference-perf `api.type: chat`)"
            .to_owned(),
        ApiKind::Embeddings => "check that the server serves embeddings: vLLM with an embedding model (or \
             `--runner pooling`), llama.cpp's server with `--embeddings`"
            .to_owned(),
        ApiKind::Rerank => "check that the server serves a rerank API: vLLM with a cross-encoder or reranker \
             model, llama.cpp's server with `--reranking` and a model with a rerank head"
            .to_owned(),
    }
}

/// The model an answer names: the first event's `model` for a stream, the body's for a whole answer.
fn answered_model(body: &[u8], streaming: bool) -> Option<String> {
    // OpenAI's chunks and answers name it at the top; the Responses API's events inside `response`, Anthropic's
    // `message_start` inside `message`.
    let model_of = |json: &[u8]| {
        let value = serde_json::from_slice::<Value>(json).ok()?;
        [&value, &value["response"], &value["message"]]
            .into_iter()
            .find_map(|v| v.get("model")?.as_str().filter(|m| !m.is_empty()))
            .map(str::to_owned)
    };
    if !streaming {
        return model_of(body);
    }
    let mut parser = SseParser::default();
    parser.push(body);
    while let Ok(Some(event)) = parser.next_event() {
        match event {
            SseEvent::Data(payload) => {
                if let Some(model) = model_of(payload) {
                    return Some(model);
                }
            }
            SseEvent::Done => break,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_list_is_read_as_openai_writes_it_and_anything_else_is_no_list() {
        assert_eq!(
            listed_models(br#"{"object":"list","data":[{"id":"a","object":"model"},{"id":"b"}]}"#),
            Some(vec!["a".to_owned(), "b".to_owned()])
        );
        assert_eq!(listed_models(br#"{"data":[]}"#), Some(Vec::new()));
        assert_eq!(listed_models(br#"{"models":["a"]}"#), None);
        assert_eq!(listed_models(br#"{"data":[{"name":"a"}]}"#), None);
        assert_eq!(listed_models(b"<html>"), None);
    }

    #[test]
    fn the_answered_model_is_the_first_event_s_or_the_body_s() {
        let stream = b"data: {\"id\":\"x\",\"model\":\"served\",\"choices\":[]}\n\ndata: {\"model\":\"other\"}\n\n\
                       data: [DONE]\n\n";
        assert_eq!(answered_model(stream, true).as_deref(), Some("served"));
        // Events without a model are passed over.
        let stream = b"data: {\"choices\":[]}\n\ndata: {\"model\":\"late\"}\n\ndata: [DONE]\n\n";
        assert_eq!(answered_model(stream, true).as_deref(), Some("late"));
        assert_eq!(
            answered_model(br#"{"model":"m","choices":[]}"#, false).as_deref(),
            Some("m")
        );
        assert_eq!(answered_model(br#"{"choices":[]}"#, false), None);
        assert_eq!(answered_model(br#"{"model":""}"#, false), None);
    }

    fn api(kind: ApiKind, endpoint: Option<&str>) -> Api {
        Api {
            kind,
            endpoint: endpoint.map(str::to_owned),
            ..Api::default()
        }
    }

    #[test]
    fn a_base_url_ending_in_the_api_path_is_told_to_drop_it() {
        let completions = api(ApiKind::Completion, None);
        for endpoint in [
            "http://h:8000/v1",
            "http://h:8000/v1/completions",
            "http://h:8000/v1/chat/completions",
        ] {
            let help = path_help(endpoint, &completions);
            assert!(
                help.contains("--endpoint http://h:8000")
                    && !help.contains("--endpoint http://h:8000/"),
                "{endpoint}: {help}"
            );
            assert!(help.contains("appends /v1/completions"), "{help}");
        }
        // Behind a gateway prefix the prefix stays.
        let help = path_help("https://gw.example/team-a/v1", &api(ApiKind::Chat, None));
        assert!(
            help.contains("--endpoint https://gw.example/team-a ")
                || help.ends_with("--endpoint https://gw.example/team-a"),
            "{help}"
        );
    }

    #[test]
    fn a_404_on_a_plain_base_url_names_the_api_or_the_profile_s_path() {
        let help = path_help("http://h:8000", &api(ApiKind::Completion, None));
        assert!(help.contains("chat profile"), "{help}");
        let help = path_help("http://h:8000", &api(ApiKind::Chat, Some("/openai/chat")));
        assert!(help.contains("/openai/chat"), "{help}");
    }

    #[test]
    fn a_passed_pre_flight_says_what_was_listed_and_what_answered() {
        let meta = PreflightMeta {
            model: Some("m".to_owned()),
            models: Some(PreflightCall {
                url: "http://h:8000/v1/models".to_owned(),
                status: Some(200),
                latency_ms: 3.0,
                listed: Some(vec!["m".to_owned(), "n".to_owned()]),
                note: None,
            }),
            request: Some(PreflightCall {
                url: "http://h:8000/v1/completions".to_owned(),
                status: Some(200),
                latency_ms: 12.4,
                listed: None,
                note: None,
            }),
            server_model: Some("m".to_owned()),
            ..PreflightMeta::default()
        };
        assert_eq!(
            describe_passed(&meta),
            "pre-flight passed for `m`: GET http://h:8000/v1/models lists m, n; a one-token request to POST \
             http://h:8000/v1/completions answered HTTP 200 as `m` in 12 ms"
        );
    }

    #[test]
    fn connection_failures_read_as_what_happened() {
        let refused = connect_message(
            ConnectFailure::Refused,
            "http://127.0.0.1:9/v1/models",
            3,
            "",
        );
        assert!(
            refused.starts_with(
                "cannot connect to http://127.0.0.1:9/v1/models: connection refused, nothing listens at \
                 127.0.0.1:9, 3 attempts a second apart\n  help: "
            ),
            "{refused}"
        );
        let dns = connect_message(ConnectFailure::Dns, "http://vllm.invalid/v1/models", 1, "");
        assert!(
            dns.contains("`vllm.invalid` does not resolve (DNS)"),
            "{dns}"
        );
        let tls = connect_message(ConnectFailure::Tls, "https://h/v1/models", 1, "bad cert");
        assert!(
            tls.contains("h:443 failed (bad cert)") && tls.contains("http://"),
            "{tls}"
        );
    }
}

/// Requests that ask for more than the server's context: the server rejects them (vLLM answers 400) or cuts them
/// short (llama.cpp stops at its context end). All of them is a run that cannot succeed, refused before the clock
/// starts; some is a warning with their count. `asked` holds each prepared request's (prompt tokens, max_tokens).
pub(crate) fn check_context(
    model: &str,
    limit: Option<u64>,
    asked: impl Iterator<Item = (u32, Option<u32>)>,
) -> Result<(), PreflightError> {
    let Some(limit) = limit else {
        return Ok(());
    };
    let (mut total, mut over, mut shortest_over, mut longest) = (0usize, 0usize, u64::MAX, 0u64);
    for (input, max_tokens) in asked {
        total += 1;
        let need = u64::from(input) + u64::from(max_tokens.unwrap_or(0));
        longest = longest.max(need);
        if need > limit {
            over += 1;
            shortest_over = shortest_over.min(need);
        }
    }
    if over == 0 {
        return Ok(());
    }
    if over == total {
        return Err(PreflightError::ContextTooShort {
            model: model.to_owned(),
            limit,
            requests: total,
            shortest: shortest_over,
        });
    }
    tracing::warn!(
        model,
        max_model_len = limit,
        over,
        of = total,
        longest,
        "{over} of the run's {total} prepared requests ask for more tokens than the server's context of {limit} \
         (prompt + max_tokens up to {longest}): the server will reject them or cut them short"
    );
    Ok(())
}

#[cfg(test)]
mod context_tests {
    use super::*;

    #[test]
    fn requests_beyond_the_context_are_refused_when_all_are_and_counted_when_some_are() {
        // A 1024-token context: 1000 + 100 does not fit, 900 + 100 does.
        let all = check_context(
            "m",
            Some(1024),
            [(1000, Some(100)), (1020, Some(10))].into_iter(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            all.starts_with("every one of the run's 2 requests asks for more tokens than the server's context of 1024")
                && all.contains("prompt + max_tokens is 1030 at least"),
            "{all}"
        );
        assert!(
            check_context(
                "m",
                Some(1024),
                [(1000, Some(100)), (900, Some(100))].into_iter()
            )
            .is_ok()
        );
        // No max_tokens: only the prompt counts; no known context: nothing to check.
        assert!(check_context("m", Some(1024), [(1000, None)].into_iter()).is_ok());
        assert!(check_context("m", None, [(5000, Some(5000))].into_iter()).is_ok());
    }
}
