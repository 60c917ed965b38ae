//! The response shapes of the APIs beside OpenAI's completions and chat: OpenAI's Responses API, Anthropic's
//! Messages API, and the pooling APIs (embeddings, rerank). Each event is read into borrowed structs of only the fields that decide its kind, as the chat
//! chunk parser does, so a token event costs no allocation and no JSON tree.
//!
//! - Responses (`/v1/responses`): `response.output_text.delta` carries text in `delta` (a string);
//!   `response.reasoning_text.delta` and `response.reasoning_summary_text.delta` carry reasoning; the terminal
//!   `response.completed` / `response.incomplete` / `response.failed` carries the whole response, with
//!   `usage {input_tokens, output_tokens}`, `status` and `incomplete_details.reason`. guidellm reads the same
//!   events (`ResponsesRequestHandler.add_streaming_line`, vllm-project/guidellm ee7a774).
//! - Messages (`/v1/messages`): `message_start` carries `message.usage.input_tokens`; `content_block_delta`
//!   carries `delta.text` (`text_delta`) or `delta.thinking` (`thinking_delta`); `message_delta` carries
//!   `delta.stop_reason` and `usage.output_tokens`; `message_stop` ends it; `error` fails it. inference-perf
//!   reads text from `content_block_delta` (`_build_anthropic_stream_handlers`) and merges every `usage` it sees.
//!
//! Neither stream ends with `[DONE]`: the terminal event's finish reason is what lets the stream end cleanly.
//!
//! - Pooling (`/v1/embeddings`, `/v1/rerank`): one whole JSON answer whose vectors or scores are skipped unread;
//!   only `usage` is read, `prompt_tokens` as vLLM's bench reads it (`_run_pooling_request`: the request's input
//!   length is the server's count), else `total_tokens` (vLLM's rerank answered only that before it added
//!   `prompt_tokens`; a pooling request generates nothing, so the two are the same count).

use std::borrow::Cow;

use serde::Deserialize;

use super::client::{ParsedChunk, UsageSeen};
use llmbench_model::record::{ChunkKind, ErrorClass, FinishReason, RequestError};

/// One Responses API event, or a whole (non-streamed) response.
#[derive(Deserialize)]
struct ResponsesEventJson<'a> {
    #[serde(default, borrow, rename = "type")]
    kind: Option<Cow<'a, str>>,
    /// A delta event's text.
    #[serde(default, borrow)]
    delta: Option<Cow<'a, str>>,
    /// The terminal events' response.
    #[serde(default, borrow)]
    response: Option<ResponseJson<'a>>,
    /// A whole response's own fields (non-streamed).
    #[serde(default, borrow)]
    status: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    output: Vec<OutputItemJson<'a>>,
    #[serde(default)]
    usage: Option<ResponsesUsageJson>,
    #[serde(default)]
    incomplete_details: Option<IncompleteJson>,
    /// `error` events carry `message`; a failed response carries `error {message}`.
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    error: Option<ErrorMessageJson>,
}

#[derive(Deserialize)]
struct ResponseJson<'a> {
    #[serde(default, borrow)]
    status: Option<Cow<'a, str>>,
    #[serde(default)]
    usage: Option<ResponsesUsageJson>,
    #[serde(default)]
    incomplete_details: Option<IncompleteJson>,
    #[serde(default)]
    error: Option<ErrorMessageJson>,
}

#[derive(Deserialize)]
struct OutputItemJson<'a> {
    #[serde(default, borrow, rename = "type")]
    kind: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    content: Vec<OutputContentJson<'a>>,
}

#[derive(Deserialize)]
struct OutputContentJson<'a> {
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct ResponsesUsageJson {
    #[serde(default)]
    input_tokens: Option<u32>,
    #[serde(default)]
    output_tokens: Option<u32>,
    #[serde(default)]
    input_tokens_details: Option<InputDetailsJson>,
    #[serde(default)]
    output_tokens_details: Option<OutputDetailsJson>,
}

#[derive(Deserialize)]
struct InputDetailsJson {
    #[serde(default)]
    cached_tokens: Option<u32>,
}

#[derive(Deserialize)]
struct OutputDetailsJson {
    #[serde(default)]
    reasoning_tokens: Option<u32>,
}

#[derive(Deserialize)]
struct IncompleteJson {
    #[serde(default)]
    reason: Option<String>,
}

#[derive(Deserialize)]
struct ErrorMessageJson {
    #[serde(default)]
    message: Option<String>,
    #[serde(default, rename = "type")]
    kind: Option<String>,
}

impl ResponsesUsageJson {
    fn seen(self) -> UsageSeen {
        UsageSeen {
            prompt_tokens: self.input_tokens,
            completion_tokens: self.output_tokens,
            cached_tokens: self.input_tokens_details.and_then(|d| d.cached_tokens),
            reasoning_tokens: self.output_tokens_details.and_then(|d| d.reasoning_tokens),
        }
    }
}

/// How a response ended, from its `status` and `incomplete_details.reason`: vLLM marks a response cut by
/// `max_output_tokens` `incomplete` with that reason, which is `length` in chat's words.
fn responses_finish(status: &str, incomplete: Option<IncompleteJson>) -> FinishReason {
    match (status, incomplete.and_then(|i| i.reason).as_deref()) {
        ("completed", _) => FinishReason::Stop,
        ("incomplete", Some("max_output_tokens")) => FinishReason::Length,
        ("incomplete", Some("content_filter")) => FinishReason::ContentFilter,
        (other, reason) => FinishReason::from_server(reason.unwrap_or(other)),
    }
}

fn server_error(described: String) -> RequestError {
    RequestError {
        class: ErrorClass::Other,
        message: format!("server reported an error in the response: {described}"),
    }
}

fn describe(error: ErrorMessageJson) -> String {
    let mut described = error.message.unwrap_or_else(|| "(no message)".to_owned());
    if let Some(kind) = error.kind {
        described.push_str(&format!(" ({kind})"));
    }
    described
}

/// One event of a streamed Responses API answer, or (`kind` absent) a whole response.
pub(super) fn parse_responses(
    text: &str,
    keep_text: bool,
) -> Result<ParsedChunk, serde_json::Error> {
    let event: ResponsesEventJson<'_> = serde_json::from_str(text)?;
    let mut parsed = ParsedChunk::default();
    match event.kind.as_deref() {
        Some("response.output_text.delta") => {
            let delta = event.delta.unwrap_or_default();
            if !delta.is_empty() {
                parsed.kind = Some(ChunkKind::Content { tokens: 1 });
            }
            if keep_text {
                parsed.text = Some(delta.into_owned());
            }
        }
        Some("response.reasoning_text.delta" | "response.reasoning_summary_text.delta") => {
            if event.delta.is_some_and(|d| !d.is_empty()) {
                parsed.kind = Some(ChunkKind::Reasoning { tokens: 1 });
            }
        }
        Some("response.completed" | "response.incomplete" | "response.failed") => {
            let Some(response) = event.response else {
                return Ok(parsed);
            };
            let status = response.status.as_deref().unwrap_or("completed");
            if status == "failed" {
                let described = response
                    .error
                    .map_or_else(|| "the response failed".to_owned(), describe);
                parsed.error = Some(server_error(described));
                return Ok(parsed);
            }
            parsed.finish_reason = Some(responses_finish(status, response.incomplete_details));
            if let Some(usage) = response.usage {
                parsed.usage = Some(usage.seen());
                parsed.kind = Some(ChunkKind::UsageOnly);
            }
        }
        Some("error") => {
            let described = event
                .message
                .or_else(|| event.error.and_then(|e| e.message))
                .unwrap_or_else(|| "(no message)".to_owned());
            parsed.error = Some(server_error(described));
        }
        Some(_) => {}
        // A whole response: its text is every `output_text` part of its `message` items.
        None => {
            if let Some(error) = event.error {
                parsed.error = Some(server_error(describe(error)));
                return Ok(parsed);
            }
            let mut has_text = false;
            let mut kept = String::new();
            for item in event
                .output
                .iter()
                .filter(|i| i.kind.as_deref() == Some("message"))
            {
                for part in &item.content {
                    let part = part.text.as_deref().unwrap_or_default();
                    has_text |= !part.is_empty();
                    if keep_text {
                        kept.push_str(part);
                    }
                }
            }
            parsed.kind = Some(if has_text {
                ChunkKind::Content { tokens: 1 }
            } else {
                ChunkKind::Empty
            });
            parsed.text = keep_text.then_some(kept);
            parsed.finish_reason = event
                .status
                .as_deref()
                .map(|s| responses_finish(s, event.incomplete_details));
            parsed.usage = event.usage.map(ResponsesUsageJson::seen);
        }
    }
    Ok(parsed)
}

/// One Messages API event, or a whole message.
#[derive(Deserialize)]
struct MessagesEventJson<'a> {
    #[serde(default, borrow, rename = "type")]
    kind: Option<Cow<'a, str>>,
    /// `content_block_delta`'s `{type, text | thinking}`; `message_delta`'s `{stop_reason}`.
    #[serde(default, borrow)]
    delta: Option<MessagesDeltaJson<'a>>,
    /// `message_start`'s message.
    #[serde(default)]
    message: Option<MessageStartJson>,
    /// `message_delta`'s usage, or a whole message's.
    #[serde(default)]
    usage: Option<MessagesUsageJson>,
    /// A whole message's content blocks and stop reason.
    #[serde(default, borrow)]
    content: Vec<MessagesBlockJson<'a>>,
    #[serde(default, borrow)]
    stop_reason: Option<Cow<'a, str>>,
    #[serde(default)]
    error: Option<ErrorMessageJson>,
}

#[derive(Deserialize)]
struct MessagesDeltaJson<'a> {
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    thinking: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    stop_reason: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct MessageStartJson {
    #[serde(default)]
    usage: Option<MessagesUsageJson>,
}

#[derive(Deserialize)]
struct MessagesBlockJson<'a> {
    #[serde(default, borrow, rename = "type")]
    kind: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct MessagesUsageJson {
    #[serde(default)]
    input_tokens: Option<u32>,
    #[serde(default)]
    output_tokens: Option<u32>,
    #[serde(default)]
    cache_read_input_tokens: Option<u32>,
}

impl MessagesUsageJson {
    fn seen(self) -> UsageSeen {
        UsageSeen {
            prompt_tokens: self.input_tokens,
            completion_tokens: self.output_tokens,
            cached_tokens: self.cache_read_input_tokens,
            reasoning_tokens: None,
        }
    }
}

/// Anthropic's `stop_reason` in chat's words: `max_tokens` is `length`, `end_turn` and `stop_sequence` are
/// `stop`, `tool_use` is `tool_calls`.
fn messages_finish(reason: &str) -> FinishReason {
    match reason {
        "end_turn" | "stop_sequence" => FinishReason::Stop,
        "max_tokens" => FinishReason::Length,
        "tool_use" => FinishReason::ToolCalls,
        other => FinishReason::from_server(other),
    }
}

/// One event of a streamed Messages API answer, or (`type: message`) a whole message.
pub(super) fn parse_messages(
    text: &str,
    keep_text: bool,
) -> Result<ParsedChunk, serde_json::Error> {
    let event: MessagesEventJson<'_> = serde_json::from_str(text)?;
    let mut parsed = ParsedChunk::default();
    if let Some(error) = event.error {
        parsed.error = Some(server_error(describe(error)));
        return Ok(parsed);
    }
    match event.kind.as_deref() {
        Some("message_start") => {
            parsed.usage = event
                .message
                .and_then(|m| m.usage)
                .map(MessagesUsageJson::seen);
        }
        Some("content_block_delta") => {
            let Some(delta) = event.delta else {
                return Ok(parsed);
            };
            if delta.text.as_deref().is_some_and(|t| !t.is_empty()) {
                parsed.kind = Some(ChunkKind::Content { tokens: 1 });
            } else if delta.thinking.as_deref().is_some_and(|t| !t.is_empty()) {
                parsed.kind = Some(ChunkKind::Reasoning { tokens: 1 });
            }
            if keep_text {
                parsed.text = Some(delta.text.unwrap_or_default().into_owned());
            }
        }
        Some("message_delta") => {
            parsed.finish_reason = event
                .delta
                .and_then(|d| d.stop_reason)
                .map(|r| messages_finish(&r));
            if let Some(usage) = event.usage {
                parsed.usage = Some(usage.seen());
                parsed.kind = Some(ChunkKind::UsageOnly);
            }
        }
        Some("message") => {
            let mut has_text = false;
            let mut kept = String::new();
            for block in event
                .content
                .iter()
                .filter(|b| b.kind.as_deref() == Some("text"))
            {
                let block = block.text.as_deref().unwrap_or_default();
                has_text |= !block.is_empty();
                if keep_text {
                    kept.push_str(block);
                }
            }
            parsed.kind = Some(if has_text {
                ChunkKind::Content { tokens: 1 }
            } else {
                ChunkKind::Empty
            });
            parsed.text = keep_text.then_some(kept);
            parsed.finish_reason = event.stop_reason.as_deref().map(messages_finish);
            parsed.usage = event.usage.map(MessagesUsageJson::seen);
        }
        // content_block_start / _stop, message_stop, ping: nothing to record.
        _ => {}
    }
    Ok(parsed)
}

/// A pooling API's whole answer: only its usage and error are read.
#[derive(Deserialize)]
struct PoolingAnswerJson {
    #[serde(default)]
    usage: Option<PoolingUsageJson>,
    /// OpenAI's and vLLM's `{"error": {"message", "type"}}`.
    #[serde(default)]
    error: Option<ErrorMessageJson>,
}

#[derive(Deserialize)]
struct PoolingUsageJson {
    #[serde(default)]
    prompt_tokens: Option<u32>,
    #[serde(default)]
    total_tokens: Option<u32>,
}

/// A pooling answer: an object, or a bare list (Hugging Face TEI's `/rerank` answers `[{index, score}]`, which
/// AIPerf's `hf_tei_rankings` reads as is). The list is tried first: serde reads a struct from a sequence too,
/// positionally, which would take a TEI answer's first item for `usage`.
#[derive(Deserialize)]
#[serde(untagged)]
enum PoolingAnswer {
    /// Its items are skipped unread (the list's shape is all that is checked).
    List(#[allow(dead_code)] Vec<serde::de::IgnoredAny>),
    Object(PoolingAnswerJson),
}

/// A whole embeddings, rerank or ranking answer: its input tokens, and no output.
pub(super) fn parse_pooling(text: &str) -> Result<ParsedChunk, serde_json::Error> {
    let answer = match serde_json::from_str(text)? {
        PoolingAnswer::Object(answer) => answer,
        PoolingAnswer::List(_) => return Ok(ParsedChunk::default()),
    };
    let mut parsed = ParsedChunk::default();
    if let Some(error) = answer.error {
        parsed.error = Some(server_error(describe(error)));
        return Ok(parsed);
    }
    parsed.usage = answer.usage.map(|u| UsageSeen {
        prompt_tokens: u.prompt_tokens.or(u.total_tokens),
        completion_tokens: Some(0),
        cached_tokens: None,
        reasoning_tokens: None,
    });
    parsed.kind = parsed.usage.map(|_| ChunkKind::UsageOnly);
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_responses_text_delta_is_a_content_chunk_and_other_events_are_nothing() {
        let delta = parse_responses(
            r#"{"type":"response.output_text.delta","item_id":"m","output_index":0,"content_index":0,"delta":" hi","sequence_number":4}"#,
            true,
        )
        .expect("parses");
        assert_eq!(delta.kind, Some(ChunkKind::Content { tokens: 1 }));
        assert_eq!(delta.text.as_deref(), Some(" hi"));
        for other in [
            r#"{"type":"response.created","response":{"id":"r","status":"in_progress","usage":null}}"#,
            r#"{"type":"response.content_part.added","part":{"type":"output_text","text":""}}"#,
            r#"{"type":"response.output_text.done","text":" hi"}"#,
        ] {
            let parsed = parse_responses(other, false).expect("parses");
            assert!(
                parsed.kind.is_none() && parsed.usage.is_none() && parsed.finish_reason.is_none(),
                "{other}"
            );
        }
    }

    #[test]
    fn a_completed_response_carries_usage_and_a_cut_one_ended_by_length() {
        let done = parse_responses(
            r#"{"type":"response.completed","response":{"status":"completed","incomplete_details":null,"usage":{"input_tokens":7,"input_tokens_details":{"cached_tokens":0},"output_tokens":3,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":10}}}"#,
            false,
        )
        .expect("parses");
        assert_eq!(done.finish_reason, Some(FinishReason::Stop));
        assert_eq!(done.kind, Some(ChunkKind::UsageOnly));
        let usage = done.usage.expect("usage");
        assert_eq!(
            (usage.prompt_tokens, usage.completion_tokens),
            (Some(7), Some(3))
        );
        let cut = parse_responses(
            r#"{"type":"response.incomplete","response":{"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"usage":{"input_tokens":7,"output_tokens":4}}}"#,
            false,
        )
        .expect("parses");
        assert_eq!(cut.finish_reason, Some(FinishReason::Length));
    }

    #[test]
    fn a_failed_response_and_an_error_event_fail_the_request() {
        let failed = parse_responses(
            r#"{"type":"response.failed","response":{"status":"failed","error":{"code":"server_error","message":"boom"}}}"#,
            false,
        )
        .expect("parses");
        assert!(failed.error.expect("an error").message.contains("boom"));
        let error = parse_responses(r#"{"type":"error","code":"x","message":"bad"}"#, false)
            .expect("parses");
        assert!(error.error.expect("an error").message.contains("bad"));
    }

    #[test]
    fn a_whole_response_reads_its_message_text_status_and_usage() {
        let whole = parse_responses(
            r#"{"id":"r","object":"response","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"output":[{"type":"reasoning","summary":[]},{"type":"message","role":"assistant","content":[{"type":"output_text","text":" a b"}]}],"usage":{"input_tokens":5,"output_tokens":2}}"#,
            true,
        )
        .expect("parses");
        assert_eq!(whole.kind, Some(ChunkKind::Content { tokens: 1 }));
        assert_eq!(whole.text.as_deref(), Some(" a b"));
        assert_eq!(whole.finish_reason, Some(FinishReason::Length));
        assert_eq!(whole.usage.expect("usage").completion_tokens, Some(2));
    }

    #[test]
    fn messages_events_split_usage_between_start_and_delta() {
        let start = parse_messages(
            r#"{"type":"message_start","message":{"id":"m","type":"message","role":"assistant","content":[],"stop_reason":null,"usage":{"input_tokens":9,"output_tokens":0}}}"#,
            false,
        )
        .expect("parses");
        assert!(start.kind.is_none(), "no chunk: the answer has not begun");
        assert_eq!(start.usage.expect("usage").prompt_tokens, Some(9));
        let text = parse_messages(
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" hi"}}"#,
            true,
        )
        .expect("parses");
        assert_eq!(text.kind, Some(ChunkKind::Content { tokens: 1 }));
        assert_eq!(text.text.as_deref(), Some(" hi"));
        let thinking = parse_messages(
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hm"}}"#,
            false,
        )
        .expect("parses");
        assert_eq!(thinking.kind, Some(ChunkKind::Reasoning { tokens: 1 }));
        let end = parse_messages(
            r#"{"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":{"output_tokens":4}}"#,
            false,
        )
        .expect("parses");
        assert_eq!(end.finish_reason, Some(FinishReason::Length));
        let usage = end.usage.expect("usage");
        assert_eq!(
            (usage.prompt_tokens, usage.completion_tokens),
            (None, Some(4))
        );
        for quiet in [
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
            r#"{"type":"ping"}"#,
            r#"{"type":"message_stop"}"#,
        ] {
            let parsed = parse_messages(quiet, false).expect("parses");
            assert!(
                parsed.kind.is_none() && parsed.finish_reason.is_none(),
                "{quiet}"
            );
        }
    }

    #[test]
    fn a_whole_message_and_an_error_event() {
        let whole = parse_messages(
            r#"{"id":"m","type":"message","role":"assistant","content":[{"type":"text","text":" a"}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":1}}"#,
            false,
        )
        .expect("parses");
        assert_eq!(whole.kind, Some(ChunkKind::Content { tokens: 1 }));
        assert_eq!(whole.finish_reason, Some(FinishReason::Stop));
        let usage = whole.usage.expect("usage");
        assert_eq!(
            (usage.prompt_tokens, usage.completion_tokens),
            (Some(3), Some(1))
        );
        let error = parse_messages(
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
            false,
        )
        .expect("parses");
        assert!(
            error
                .error
                .expect("an error")
                .message
                .contains("Overloaded (overloaded_error)")
        );
    }

    #[test]
    fn a_pooling_answer_gives_its_prompt_tokens_and_no_output() {
        let embeddings = parse_pooling(
            r#"{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1,-0.2]}],"model":"m","usage":{"prompt_tokens":7,"total_tokens":7}}"#,
        )
        .expect("parses");
        assert_eq!(
            embeddings
                .usage
                .map(|u| (u.prompt_tokens, u.completion_tokens)),
            Some((Some(7), Some(0)))
        );
        assert_eq!(embeddings.kind, Some(ChunkKind::UsageOnly));
        // TEI's bare list, of one item or several: no usage, no error.
        for list in [
            r#"[{"index": 0, "score": 0.9}]"#,
            r#"[{"index": 1, "score": 0.9}, {"index": 0, "score": 0.1}, {"index": 2, "score": 0.0}]"#,
        ] {
            let tei = parse_pooling(list).expect("a list");
            assert!(tei.usage.is_none() && tei.error.is_none() && tei.kind.is_none());
        }
        // vLLM's older rerank usage: `total_tokens` alone.
        let rerank = parse_pooling(
            r#"{"id":"r","model":"m","usage":{"total_tokens":12},"results":[{"index":0,"document":{"text":"a"},"relevance_score":0.5}]}"#,
        )
        .expect("parses");
        assert_eq!(rerank.usage.and_then(|u| u.prompt_tokens), Some(12));
        let failed = parse_pooling(r#"{"error":{"message":"too long","type":"BadRequestError"}}"#)
            .expect("parses");
        assert!(
            failed
                .error
                .is_some_and(|e| e.message.contains("too long (BadRequestError)"))
        );
    }
}
