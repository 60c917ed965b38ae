//! HTTP routes: request validation with vLLM's status codes and error bodies, then hand-off to the
//! engine for timing.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::DefaultBodyLimit;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tokio::time::Instant;

use super::FailureKind;
use super::api_shapes::{MessagesRequest, ResponsesRequest};
use super::engine::{self, Completed, Engine, Job, RequestShape};
use super::openai::{
    ChatRequest, CommonParams, CompletionRequest, Endpoint, ErrorBody, ErrorDetail, ModelCard,
    ModelList, chat_hash_blocks, chat_image_tokens, chat_prompt_tokens,
};
use super::pooling::{
    EmbeddingsRequest, PoolingInputs, PoolingRoute, RankingRequest, RerankRequest, ScoreRequest,
};
use super::prefix_cache::BlockHasher;
use super::stamped::RequestArrival;

const JSON: &str = "application/json";
const EVENT_STREAM: &str = "text/event-stream; charset=utf-8";
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

pub(crate) fn router(engine: Arc<Engine>) -> Router {
    Router::new()
        .route("/v1/completions", post(completions))
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/responses", post(responses))
        .route("/v1/messages", post(messages))
        .route("/v1/embeddings", post(embeddings))
        .route("/pooling", post(pooling))
        .route("/v1/rerank", post(rerank))
        .route("/rerank", post(rerank))
        .route("/v2/rerank", post(rerank))
        .route("/v1/ranking", post(ranking))
        .route("/v1/score", post(score))
        .route("/v1/models", get(models))
        .route("/health", get(health))
        .route("/version", get(version))
        .route("/start_profile", post(start_profile))
        .route("/stop_profile", post(stop_profile))
        .route("/reset_prefix_cache", post(reset_prefix_cache))
        .route("/metrics", get(metrics))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(engine)
}

/// The largest request body taken: axum's default of 2 MiB is a few images (a 1280×720 JPEG is about 0.7 MB as
/// base64); vLLM's server sets no limit of its own.
const MAX_BODY_BYTES: usize = 256 << 20;

/// An error answered with vLLM's status and body.
#[derive(Debug)]
struct ApiError {
    status: StatusCode,
    kind: &'static str,
    param: Option<&'static str>,
    message: String,
}

impl ApiError {
    fn bad_request(message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            kind: "BadRequestError",
            param: None,
            message: message.into(),
        }
    }

    fn with_param(mut self, param: &'static str) -> Self {
        self.param = Some(param);
        self
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::to_vec(&ErrorBody {
            error: ErrorDetail {
                message: &self.message,
                kind: self.kind,
                param: self.param,
                code: self.status.as_u16(),
            },
        })
        .unwrap_or_default();
        with_content_type(self.status, Body::from(body), JSON)
    }
}

fn with_content_type(status: StatusCode, body: Body, content_type: &'static str) -> Response {
    let mut response = Response::new(body);
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

async fn completions(
    State(engine): State<Arc<Engine>>,
    ConnectInfo(arrival): ConnectInfo<RequestArrival>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let arrival = arrival.instant();
    let result = async {
        let request: CompletionRequest = parse_body(&body)?;
        check_model(&engine, request.model.as_deref())?;
        let prompt_tokens = request
            .prompt
            .token_count()
            .map_err(|message| ApiError::bad_request(message).with_param("prompt"))?;
        let shape = request_shape(
            &engine,
            Endpoint::Completions,
            prompt_tokens,
            request.common.max_tokens,
            &request.common,
        )?;
        let blocks = prefix_blocks(&engine, |hasher| request.prompt.hash_blocks(hasher));
        Ok::<_, ApiError>((shape, blocks))
    }
    .await;
    answer(engine, result, arrival, &headers).await
}

async fn chat_completions(
    State(engine): State<Arc<Engine>>,
    ConnectInfo(arrival): ConnectInfo<RequestArrival>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let arrival = arrival.instant();
    let result = async {
        let request: ChatRequest = parse_body(&body)?;
        check_model(&engine, request.model.as_deref())?;
        let image_tokens = chat_image_tokens(&request.messages)
            .map_err(|message| ApiError::bad_request(message).with_param("messages"))?;
        let prompt_tokens = chat_prompt_tokens(&request.messages).saturating_add(image_tokens);
        let shape = request_shape(
            &engine,
            Endpoint::Chat,
            prompt_tokens,
            request.max_completion_tokens.or(request.common.max_tokens),
            &request.common,
        )?;
        let blocks = prefix_blocks(&engine, |hasher| {
            chat_hash_blocks(&request.messages, hasher)
        });
        Ok::<_, ApiError>((shape, blocks))
    }
    .await;
    answer(engine, result, arrival, &headers).await
}

/// OpenAI's Responses API: `input` and `instructions` counted as chat counts messages, `max_output_tokens` as
/// the output length; served with chat's latency model and faults, streamed as Responses events.
async fn responses(
    State(engine): State<Arc<Engine>>,
    ConnectInfo(arrival): ConnectInfo<RequestArrival>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let arrival = arrival.instant();
    let result = async {
        let request: ResponsesRequest = parse_body(&body)?;
        check_model(&engine, request.model.as_deref())?;
        let shape = request_shape(
            &engine,
            Endpoint::Responses,
            request.prompt_tokens(),
            request.max_output_tokens.or(request.common.max_tokens),
            &request.common,
        )?;
        let blocks = prefix_blocks(&engine, |hasher| request.hash_blocks(hasher));
        Ok::<_, ApiError>((shape, blocks))
    }
    .await;
    answer(engine, result, arrival, &headers).await
}

/// Anthropic's Messages API: `messages` and `system` counted as chat counts messages; `max_tokens` required,
/// as Anthropic's API and vLLM's require it.
async fn messages(
    State(engine): State<Arc<Engine>>,
    ConnectInfo(arrival): ConnectInfo<RequestArrival>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let arrival = arrival.instant();
    let result = async {
        let request: MessagesRequest = parse_body(&body)?;
        check_model(&engine, request.model.as_deref())?;
        if request.common.max_tokens.is_none() {
            return Err(
                ApiError::bad_request("max_tokens: Field required").with_param("max_tokens")
            );
        }
        let shape = request_shape(
            &engine,
            Endpoint::Messages,
            request.prompt_tokens(),
            request.common.max_tokens,
            &request.common,
        )?;
        let blocks = prefix_blocks(&engine, |hasher| request.hash_blocks(hasher));
        Ok::<_, ApiError>((shape, blocks))
    }
    .await;
    answer(engine, result, arrival, &headers).await
}

/// The model and inputs of an embeddings-shaped body (`/v1/embeddings` and `/pooling` take the same `input`).
fn embeddings_inputs(body: &Bytes) -> Result<(Option<String>, PoolingInputs), ApiError> {
    let request = parse_body::<EmbeddingsRequest>(body)?;
    Ok((
        request.model.clone(),
        request.inputs().map_err(input_error("input"))?,
    ))
}

async fn embeddings(
    State(engine): State<Arc<Engine>>,
    ConnectInfo(arrival): ConnectInfo<RequestArrival>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    pooled(
        engine,
        PoolingRoute::Embeddings,
        embeddings_inputs(&body),
        arrival.instant(),
        &headers,
    )
    .await
}

async fn pooling(
    State(engine): State<Arc<Engine>>,
    ConnectInfo(arrival): ConnectInfo<RequestArrival>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    pooled(
        engine,
        PoolingRoute::Pooling,
        embeddings_inputs(&body),
        arrival.instant(),
        &headers,
    )
    .await
}

async fn rerank(
    State(engine): State<Arc<Engine>>,
    ConnectInfo(arrival): ConnectInfo<RequestArrival>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let read = parse_body::<RerankRequest>(&body).and_then(|r| {
        Ok((
            r.model.clone(),
            r.inputs().map_err(input_error("documents"))?,
        ))
    });
    pooled(
        engine,
        PoolingRoute::Rerank,
        read,
        arrival.instant(),
        &headers,
    )
    .await
}

/// NIM's `/v1/ranking` (AIPerf's `nim_rankings`).
async fn ranking(
    State(engine): State<Arc<Engine>>,
    ConnectInfo(arrival): ConnectInfo<RequestArrival>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let read = parse_body::<RankingRequest>(&body).and_then(|r| {
        Ok((
            r.model.clone(),
            r.inputs().map_err(input_error("passages"))?,
        ))
    });
    pooled(
        engine,
        PoolingRoute::Ranking,
        read,
        arrival.instant(),
        &headers,
    )
    .await
}

async fn score(
    State(engine): State<Arc<Engine>>,
    ConnectInfo(arrival): ConnectInfo<RequestArrival>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let read = parse_body::<ScoreRequest>(&body)
        .and_then(|r| Ok((r.model.clone(), r.inputs().map_err(input_error("text_2"))?)));
    pooled(
        engine,
        PoolingRoute::Score,
        read,
        arrival.instant(),
        &headers,
    )
    .await
}

fn input_error(param: &'static str) -> impl Fn(String) -> ApiError {
    move |message| ApiError::bad_request(message).with_param(param)
}

/// A pooling request served as prefill alone: planned as a request for exactly one token, so it takes the time to
/// first token and meets the same queue and faults, and answered with the route's vectors or scores. Each input
/// must fit the context on its own; `usage.prompt_tokens` is all of them.
async fn pooled(
    engine: Arc<Engine>,
    route: PoolingRoute,
    read: Result<(Option<String>, PoolingInputs), ApiError>,
    arrival: Instant,
    headers: &HeaderMap,
) -> Response {
    let prepared = read.and_then(|(model, inputs)| {
        check_model(&engine, model.as_deref())?;
        let endpoint = Endpoint::Pooling {
            route,
            inputs: u32::try_from(inputs.answered).unwrap_or(u32::MAX),
        };
        let mut shape = request_shape(
            &engine,
            endpoint,
            inputs.longest(),
            Some(1),
            &CommonParams::default(),
        )?;
        shape.prompt_tokens = inputs.total();
        shape.ignore_eos = true;
        Ok((shape, Vec::new()))
    });
    answer(engine, prepared, arrival, headers).await
}

/// The prompt's full-block hashes, fed by `feed`; nothing (and no hashing) with the prefix cache off.
fn prefix_blocks(engine: &Engine, feed: impl FnOnce(&mut BlockHasher)) -> Vec<u64> {
    if !engine.prefix_cache.enabled() {
        return Vec::new();
    }
    let mut hasher = engine.prefix_cache.hasher();
    feed(&mut hasher);
    hasher.finish()
}

fn parse_body<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body)
        .map_err(|err| ApiError::bad_request(format!("invalid request body: {err}")))
}

fn check_model(engine: &Engine, requested: Option<&str>) -> Result<(), ApiError> {
    match requested {
        Some(model)
            if model != engine.config.model
                && !engine.config.lora_modules.iter().any(|m| m == model) =>
        {
            Err(ApiError {
                status: StatusCode::NOT_FOUND,
                kind: "NotFoundError",
                param: Some("model"),
                message: format!("The model `{model}` does not exist."),
            })
        }
        _ => Ok(()),
    }
}

/// Validates the sampling fields against the context window, with vLLM's messages.
fn request_shape(
    engine: &Engine,
    endpoint: Endpoint,
    prompt_tokens: u32,
    max_tokens: Option<i64>,
    common: &CommonParams,
) -> Result<RequestShape, ApiError> {
    if let Some(n) = common.n.filter(|n| *n != 1) {
        return Err(ApiError::bad_request(format!(
            "n={n} is not supported by the simulator: it returns exactly one choice"
        ))
        .with_param("n"));
    }
    let stream = common.stream.unwrap_or(false);
    if common.stream_options.is_some() && !stream {
        return Err(ApiError::bad_request(
            "Stream options can only be defined when `stream=True`.",
        )
        .with_param("stream_options"));
    }
    let include_usage = stream
        && common
            .stream_options
            .as_ref()
            .and_then(|options| options.include_usage)
            .unwrap_or(false);

    let max_model_len = engine.config.max_model_len;
    if prompt_tokens >= max_model_len {
        return Err(ApiError::bad_request(format!(
            "This model's maximum context length is {max_model_len} tokens. However, your request \
             has {prompt_tokens} input tokens. Please reduce the length of the input messages."
        )));
    }
    let room = max_model_len - prompt_tokens;
    let max_tokens = match max_tokens {
        None => engine.config.default_output_tokens.min(room),
        Some(requested) if requested < 1 => {
            return Err(ApiError::bad_request(format!(
                "max_tokens must be at least 1, got {requested}."
            ))
            .with_param("max_tokens"));
        }
        Some(requested) => match u32::try_from(requested).ok().filter(|m| *m <= room) {
            Some(max_tokens) => max_tokens,
            // llama.cpp's way: generate to the end of the context, then stop with `length`.
            None if engine.config.stop_at_context_end => room,
            None => {
                return Err(ApiError::bad_request(format!(
                    "'max_tokens' or 'max_completion_tokens' is too large: {requested}. This \
                     model's maximum context length is {max_model_len} tokens and your request \
                     has {prompt_tokens} input tokens ({requested} > {max_model_len} - \
                     {prompt_tokens})."
                ))
                .with_param("max_tokens"));
            }
        },
    };
    // vLLM's `SamplingParams._verify_args`, against the max_tokens in effect.
    let min_tokens = match common.min_tokens {
        None => 0,
        Some(min) if min < 0 => {
            return Err(ApiError::bad_request(format!(
                "min_tokens must be greater than or equal to 0, got {min}."
            ))
            .with_param("min_tokens"));
        }
        Some(min) => match u32::try_from(min).ok().filter(|m| *m <= max_tokens) {
            Some(min) => min,
            None => {
                return Err(ApiError::bad_request(format!(
                    "min_tokens must be less than or equal to max_tokens={max_tokens}, got {min}."
                ))
                .with_param("min_tokens"));
            }
        },
    };
    Ok(RequestShape {
        endpoint,
        stream,
        include_usage,
        prompt_tokens,
        max_tokens,
        min_tokens,
        ignore_eos: common.ignore_eos.unwrap_or(false),
        reasoning_tokens: match endpoint {
            Endpoint::Chat => engine.config.reasoning_tokens,
            Endpoint::Completions
            | Endpoint::Responses
            | Endpoint::Messages
            | Endpoint::Pooling { .. } => 0,
        },
    })
}

/// `x-request-id` back on the response, as vLLM answers with `--enable-request-id-headers`.
fn echo_request_id(request: &HeaderMap, mut response: Response) -> Response {
    if let Some(id) = request.get(REQUEST_ID) {
        response.headers_mut().insert(REQUEST_ID, id.clone());
    }
    response
}

const REQUEST_ID: &str = "x-request-id";

/// A generation route's answer: the request served when it was valid, else its error; its `x-request-id` echoed
/// either way.
async fn answer(
    engine: Arc<Engine>,
    prepared: Result<(RequestShape, Vec<u64>), ApiError>,
    arrival: Instant,
    headers: &HeaderMap,
) -> Response {
    let response = match prepared {
        Ok((shape, blocks)) => serve(engine, shape, blocks, arrival, headers).await,
        Err(error) => error.into_response(),
    };
    echo_request_id(headers, response)
}

async fn serve(
    engine: Arc<Engine>,
    shape: RequestShape,
    blocks: Vec<u64>,
    arrival: Instant,
    headers: &HeaderMap,
) -> Response {
    let plan = engine.plan(shape);
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    // What a client's ids are checked against: the sim's own id beside the ones the request carried.
    tracing::debug!(
        id = plan.id,
        x_request_id = text(REQUEST_ID),
        traceparent = text("traceparent"),
        "request"
    );
    match plan.fault {
        Some(FailureKind::Http429) => {
            return ApiError {
                status: StatusCode::TOO_MANY_REQUESTS,
                kind: "RateLimitError",
                param: None,
                message: format!(
                    "Injected rate limit (llmbench sim) for request {}.",
                    plan.id
                ),
            }
            .into_response();
        }
        Some(FailureKind::Http500) => {
            return ApiError {
                status: StatusCode::INTERNAL_SERVER_ERROR,
                kind: "InternalServerError",
                param: None,
                message: format!(
                    "Injected server error (llmbench sim) for request {}.",
                    plan.id
                ),
            }
            .into_response();
        }
        _ => {}
    }

    let job = Job::new(engine, plan, blocks, arrival);
    if shape.stream {
        // Headers go out now; admission, TTFT and tokens follow in the body, as with vLLM.
        return with_content_type(
            StatusCode::OK,
            Body::from_stream(engine::sse_stream(job)),
            EVENT_STREAM,
        );
    }
    match engine::complete(job).await {
        Completed::Body(body) | Completed::Malformed(body) => {
            with_content_type(StatusCode::OK, Body::from(body), JSON)
        }
        Completed::Cutoff(cutoff) => {
            // A body that fails at once makes hyper close the connection mid-response.
            let failing = futures_util::stream::once(async move { Err::<Bytes, _>(cutoff) });
            with_content_type(StatusCode::OK, Body::from_stream(failing), JSON)
        }
        Completed::ShuttingDown => ApiError {
            status: StatusCode::SERVICE_UNAVAILABLE,
            kind: "ServiceUnavailableError",
            param: None,
            message: "The simulator is shutting down.".to_owned(),
        }
        .into_response(),
    }
}

async fn models(State(engine): State<Arc<Engine>>) -> Response {
    let model = engine.config.model.as_str();
    let created = unix_seconds();
    // vLLM lists the base model, then each adapter with the base model as its parent.
    let data: Vec<ModelCard<'_>> = std::iter::once(ModelCard {
        id: model,
        object: "model",
        created,
        owned_by: "vllm",
        root: model,
        parent: None,
        max_model_len: engine.config.max_model_len,
    })
    .chain(engine.config.lora_modules.iter().map(|name| ModelCard {
        id: name,
        object: "model",
        created,
        owned_by: "vllm",
        root: name,
        parent: Some(model),
        max_model_len: engine.config.max_model_len,
    }))
    .collect();
    let body = serde_json::to_vec(&ModelList {
        object: "list",
        data,
    })
    .unwrap_or_default();
    with_content_type(StatusCode::OK, Body::from(body), JSON)
}

async fn health() -> StatusCode {
    StatusCode::OK
}

/// The version vLLM answers at `GET /version` (`vllm/entrypoints/openai/api_server.py`, `show_version`:
/// `{"version": VLLM_VERSION}`); ours names the simulator, so a record never passes it off as a vLLM release.
pub(crate) fn sim_version() -> String {
    format!("{}{}", env!("CARGO_PKG_VERSION"), super::VERSION_SUFFIX)
}

async fn version() -> Response {
    let body = serde_json::json!({ "version": sim_version() }).to_string();
    with_content_type(StatusCode::OK, Body::from(body), JSON)
}

/// vLLM's `POST /start_profile` (`vllm/entrypoints/serve/profile/api_router.py`): 200 with an empty body, mounted
/// there only when a profiler is configured (`VLLM_TORCH_PROFILER_DIR`); the simulator has no profiler to start and
/// always answers, logging as vLLM does and counting the call so tests can see when a run's window opened.
async fn start_profile(State(engine): State<Arc<Engine>>) -> StatusCode {
    profiler_call(&engine, super::ProfilerHook::Start);
    tracing::info!("Profiler started.");
    StatusCode::OK
}

/// vLLM's `POST /stop_profile`: as [`start_profile`].
async fn stop_profile(State(engine): State<Arc<Engine>>) -> StatusCode {
    profiler_call(&engine, super::ProfilerHook::Stop);
    tracing::info!("Profiler stopped.");
    StatusCode::OK
}

/// vLLM's `POST /reset_prefix_cache` (`vllm/entrypoints/serve/dev`, mounted with `VLLM_SERVER_DEV_MODE=1`): 200
/// with an empty body once the cache is empty. The simulator always mounts it, so `--reset-prefix-cache` and an
/// experiment's `cacheReset` work against it.
async fn reset_prefix_cache(State(engine): State<Arc<Engine>>) -> StatusCode {
    let blocks = engine.prefix_cache.reset();
    tracing::info!(blocks, "Resetting prefix cache...");
    StatusCode::OK
}

fn profiler_call(engine: &Engine, hook: super::ProfilerHook) {
    let call = super::ProfilerCall {
        hook,
        requests_before: engine.arrived(),
    };
    engine
        .profiler
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push(call);
}

async fn metrics(State(engine): State<Arc<Engine>>) -> Response {
    let mut text = String::with_capacity(16 * 1024);
    match prometheus_client::encoding::text::encode(&mut text, &engine.registry) {
        Ok(()) => with_content_type(StatusCode::OK, Body::from(text), OPENMETRICS),
        Err(_) => ApiError {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            kind: "InternalServerError",
            param: None,
            message: "failed to encode metrics".to_owned(),
        }
        .into_response(),
    }
}

fn unix_seconds() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs())
}
