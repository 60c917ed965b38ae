//! An LMBenchmark stage on the wire (fmperf profiles): the invocations of `multi-round-qa.py` one QPS value of
//! `run_benchmarks.sh` makes, each run as upstream's `main` does. The user-session rules are the pure
//! [`llmbench_workload::lmbench::Manager`]; this module only turns its decisions into requests and its clock into steps.
//!
//! Each session phase starts with `warmup_engine` (10 requests at once, then every answer awaited), then calls
//! `step` every 0.1 s (upstream: `step`, then `time.sleep(0.1)`) until more than `--time` seconds have passed
//! since the first step, then waits for every request in flight (`AsyncLoopWrapper.StopLoop` waits for its tasks)
//! and keeps the summary. The warm-up invocation's requests, and every `warmup_engine` request, are recorded with
//! `warmup` set, so only the measured invocation's requests make the stage's figures.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::{Value, json};
use tokio::task::JoinSet;

use super::StageContext;
use llmbench_model::record::{RequestRecord, TurnOf};
use llmbench_workload::lmbench::{
    Answered, ENGINE_WARMUP_MAX_TOKENS, ENGINE_WARMUP_REQUESTS, Launch, Manager, Message,
    STEP_INTERVAL, SessionConfig, SummaryRow, completion_prompt, engine_warmup_message,
};
use llmbench_workload::request::PreparedRequest;
use llmbench_workload::workload::ApiKind;

/// One QPS value of an LMBenchmark scenario.
#[derive(Debug)]
pub struct LmBenchStage {
    /// The warm-up invocation (`warmup()` in the scenario script), then the measured one.
    pub warmup: SessionConfig,
    pub run: SessionConfig,
    pub api: ApiKind,
    pub model: String,
    /// The measured invocation's summary rows (times in seconds on the run clock), once the stage has run.
    pub summary: Mutex<Option<Vec<SummaryRow>>>,
}

/// Runs `stage`; returns when the measured invocation's first step ran, on the run clock (the stage's start for
/// its figures: the warm-ups before it are not part of it).
pub(super) async fn run_lmbench(context: StageContext, stage: Arc<LmBenchStage>) -> Option<u64> {
    engine_warmup(&context, &stage).await;
    sessions(&context, &stage, &stage.warmup, false).await;
    engine_warmup(&context, &stage).await;
    let (start_ns, rows) = sessions(&context, &stage, &stage.run, true).await;
    *stage.summary.lock().unwrap_or_else(PoisonError::into_inner) = Some(rows);
    start_ns
}

/// `warmup_engine`: 10 single-message requests of `max_tokens` 100 at once, every answer awaited.
async fn engine_warmup(context: &StageContext, stage: &LmBenchStage) {
    let mut in_flight = JoinSet::new();
    for i in 0..ENGINE_WARMUP_REQUESTS {
        if context.control.issuing_stopped() {
            break;
        }
        let request = body(
            stage.api,
            &stage.model,
            &[engine_warmup_message(i)],
            ENGINE_WARMUP_MAX_TOKENS,
        );
        let context = context.clone();
        in_flight.spawn(async move {
            let mut record = context.send(&request, context.clock.now_ns(), true).await;
            record.text = None;
            record.warmup = true;
            context.record(record);
        });
    }
    while in_flight.join_next().await.is_some() {}
}

/// One `multi-round-qa.py` main loop. Returns its first step's time and its summary rows.
async fn sessions(
    context: &StageContext,
    stage: &LmBenchStage,
    config: &SessionConfig,
    measured: bool,
) -> (Option<u64>, Vec<SummaryRow>) {
    let manager = Arc::new(Mutex::new(Manager::new(config.clone())));
    let clock = context.clock;
    let seconds = |ns: u64| ns as f64 / 1e9;
    let start = Instant::now();
    let limit = Duration::from_secs(config.time);
    let mut in_flight = JoinSet::new();
    let mut first_step_ns = None;
    loop {
        if context.control.issuing_stopped() {
            break;
        }
        let now_ns = clock.now_ns();
        first_step_ns.get_or_insert(now_ns);
        let launches = manager
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .step(seconds(now_ns));
        for launch in launches {
            let mut request = body(stage.api, &stage.model, &launch.messages, launch.max_tokens);
            request.header = Some(user_header(launch.user_id));
            let context = context.clone();
            let manager = Arc::clone(&manager);
            in_flight.spawn(async move {
                let record = context.send(&request, now_ns, !measured).await;
                finish(&context, &manager, &launch, record, measured);
            });
        }
        while in_flight.try_join_next().is_some() {}
        // `time.sleep(0.1)` after the step, then the `--time` check.
        tokio::select! {
            () = tokio::time::sleep(Duration::from_secs_f64(STEP_INTERVAL)) => {}
            () = context.control.issuing_ended() => break,
        }
        if start.elapsed() > limit {
            break;
        }
    }
    while in_flight.join_next().await.is_some() {}
    let rows = manager
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .summary_rows(seconds(clock.now_ns()));
    (first_step_ns, rows)
}

/// A session request's end: on success its answer joins the user's history (`_on_request_finished`); a failure
/// leaves the user waiting for ever, as upstream's lost callback does.
fn finish(
    context: &StageContext,
    manager: &Mutex<Manager>,
    launch: &Launch,
    mut record: RequestRecord,
    measured: bool,
) {
    let answer = record.text.take().map(|t| *t).unwrap_or_default();
    if record.succeeded() {
        let ttft = record.ttft_ns().map_or(0.0, |ns| ns as f64 / 1e9);
        let generation_time = record.ttft_ns().map_or(0.0, |ttft| {
            record.e2e_ns().saturating_sub(ttft) as f64 / 1e9
        });
        let usage = record.usage;
        manager
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .answered(
                launch.user_id,
                answer,
                Answered {
                    prompt_tokens: usage.map_or(0, |u| u64::from(u.prompt_tokens)),
                    generation_tokens: usage.map_or(0, |u| u64::from(u.completion_tokens)),
                    ttft,
                    generation_time,
                    launch_time: record.sent_ns as f64 / 1e9,
                    finish_time: record.end_ns as f64 / 1e9,
                },
            );
    } else {
        tracing::warn!(
            user = launch.user_id,
            question = launch.question,
            "an LMBenchmark request failed: as upstream, its user never asks again"
        );
    }
    record.conversation = Some(TurnOf {
        id: u32::try_from(launch.user_id).unwrap_or(u32::MAX),
        turn: launch.question.saturating_sub(1),
    });
    record.warmup = !measured;
    context.record(record);
}

/// `extra_headers={"x-user-id": str(user_id)}`, which `UserSession._launch_new_request` puts on every question
/// (the engine warm-up goes without it), so a router keyed on the header (the stack's `sessionKey`) keeps a user
/// on one replica.
pub(crate) fn user_header(user_id: u64) -> std::sync::Arc<(String, String)> {
    std::sync::Arc::new(("x-user-id".to_owned(), user_id.to_string()))
}

/// The body the OpenAI client sends for `RequestExecutor._async_launch_request`: streaming with usage,
/// `temperature` 0, `max_tokens`; the chat history as messages, or as one `ROLE: content` prompt for completions.
/// The input length is the prompt's whitespace words (what the built-in tokenizer and the simulator count;
/// reports prefer the server's `usage.prompt_tokens`).
pub fn body(api: ApiKind, model: &str, messages: &[Message], max_tokens: u32) -> PreparedRequest {
    let (field, value, words) = match api {
        ApiKind::Completion => {
            let prompt = completion_prompt(messages);
            let words = prompt.split_whitespace().count();
            ("prompt", Value::String(prompt), words)
        }
        // LMBench's client speaks OpenAI's two APIs only; its dialect sets no other.
        ApiKind::Chat
        | ApiKind::Responses
        | ApiKind::Messages
        | ApiKind::Embeddings
        | ApiKind::Rerank => {
            let words = messages
                .iter()
                .map(|m| m.content.split_whitespace().count())
                .sum();
            let list: Vec<Value> = messages
                .iter()
                .map(|m| json!({"role": m.role.as_str(), "content": m.content}))
                .collect();
            ("messages", Value::Array(list), words)
        }
    };
    let body = json!({
        "model": model,
        field: value,
        "max_tokens": max_tokens,
        "temperature": 0.0,
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    PreparedRequest {
        body: Bytes::from(body.to_string()),
        input_tokens: u32::try_from(words).unwrap_or(u32::MAX),
        max_tokens: Some(max_tokens),
        ignore_eos: false,
        header: None,
        inputs: None,
        adapter: None,
        images: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use llmbench_workload::lmbench::Role;

    #[test]
    fn bodies_are_what_the_openai_client_sends() {
        let messages = [Message {
            role: Role::User,
            content: "hi there".to_owned(),
        }];
        let completion = body(ApiKind::Completion, "m", &messages, 32);
        let value: Value = serde_json::from_slice(&completion.body).unwrap();
        assert_eq!(
            value,
            json!({"model": "m", "prompt": "USER: hi there\nASSISTANT:", "max_tokens": 32, "temperature": 0.0,
                   "stream": true, "stream_options": {"include_usage": true}})
        );
        // "USER:", "hi", "there", "ASSISTANT:"
        assert_eq!(completion.input_tokens, 4);
        let chat = body(ApiKind::Chat, "m", &messages, 32);
        let value: Value = serde_json::from_slice(&chat.body).unwrap();
        assert_eq!(
            value["messages"],
            json!([{"role": "user", "content": "hi there"}])
        );
        assert_eq!(chat.input_tokens, 2);
        assert!(
            chat.header.is_none(),
            "the warm-up's requests carry no user"
        );
        assert_eq!(*user_header(7), ("x-user-id".to_owned(), "7".to_owned()));
    }
}
