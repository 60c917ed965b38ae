//! The wire shapes of OpenAI's Responses API (`POST /v1/responses`) and Anthropic's Messages API
//! (`POST /v1/messages`), as vLLM serves them: the request fields the simulator reads, and the events and whole
//! bodies it writes. Only what a client reads is written (each event's `type`, text, usage and how it ended);
//! per-event counters such as `sequence_number` are left out so a token event is built once per request.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::openai::{ChatMessage, CommonParams, MessageContent, Usage};
use super::prefix_cache::BlockHasher;
use llmbench_text::tokenizer::word_count;

/// `POST /v1/responses`: `input` is a string or a list of items with `content` (text or `input_text` parts);
/// `instructions` is the system prompt.
#[derive(Debug, Deserialize)]
pub(crate) struct ResponsesRequest {
    #[serde(default)]
    pub model: Option<String>,
    pub input: ResponsesInput,
    #[serde(default)]
    pub instructions: Option<String>,
    #[serde(default)]
    pub max_output_tokens: Option<i64>,
    #[serde(flatten)]
    pub common: CommonParams,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum ResponsesInput {
    Text(String),
    Items(Vec<ChatMessage>),
}

impl ResponsesRequest {
    /// The words of the instructions and of every input item's text, as chat counts its messages.
    pub(crate) fn prompt_tokens(&self) -> u32 {
        let instructions = self.instructions.as_deref().map_or(0, word_count);
        let input = match &self.input {
            ResponsesInput::Text(text) => saturate(word_count(text)),
            ResponsesInput::Items(items) => super::openai::chat_prompt_tokens(items),
        };
        saturate(instructions).saturating_add(input)
    }

    pub(crate) fn hash_blocks(&self, hasher: &mut BlockHasher) {
        if let Some(instructions) = &self.instructions {
            hasher.push_words(instructions);
        }
        match &self.input {
            ResponsesInput::Text(text) => hasher.push_words(text),
            ResponsesInput::Items(items) => super::openai::chat_hash_blocks(items, hasher),
        }
    }
}

/// `POST /v1/messages`: `messages` as chat's (text or `text` blocks), `system` a string or `text` blocks, and
/// `max_tokens`, which Anthropic's API requires (vLLM's `AnthropicMessagesRequest` too).
#[derive(Debug, Deserialize)]
pub(crate) struct MessagesRequest {
    #[serde(default)]
    pub model: Option<String>,
    pub messages: Vec<ChatMessage>,
    #[serde(default)]
    pub system: Option<MessageContent>,
    #[serde(flatten)]
    pub common: CommonParams,
}

impl MessagesRequest {
    pub(crate) fn prompt_tokens(&self) -> u32 {
        let system = self.system_message();
        super::openai::chat_prompt_tokens(&self.messages)
            .saturating_add(super::openai::chat_prompt_tokens(&system))
    }

    pub(crate) fn hash_blocks(&self, hasher: &mut BlockHasher) {
        super::openai::chat_hash_blocks(&self.system_message(), hasher);
        super::openai::chat_hash_blocks(&self.messages, hasher);
    }

    fn system_message(&self) -> Vec<ChatMessage> {
        let content = match &self.system {
            Some(MessageContent::Text(text)) => Some(MessageContent::Text(text.clone())),
            Some(MessageContent::Parts(parts)) => Some(MessageContent::Text(
                parts
                    .iter()
                    .filter_map(|p| p.text.as_deref())
                    .collect::<Vec<_>>()
                    .join(" "),
            )),
            None => None,
        };
        vec![ChatMessage { content }]
    }
}

fn saturate(count: usize) -> u32 {
    u32::try_from(count).unwrap_or(u32::MAX)
}

/// An SSE event with its `event:` line, as both APIs write them.
fn named_event<T: Serialize>(name: &str, payload: &T, into: &mut Vec<u8>) {
    into.extend_from_slice(b"event: ");
    into.extend_from_slice(name.as_bytes());
    into.extend_from_slice(b"\ndata: ");
    // Serialising plain structs into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *into, payload);
    into.extend_from_slice(b"\n\n");
}

fn one_event<T: Serialize>(name: &str, payload: &T) -> Bytes {
    let mut event = Vec::with_capacity(192);
    named_event(name, payload, &mut event);
    Bytes::from(event)
}

/// What both APIs' final events need to know about the answer.
pub(crate) struct Answer<'a> {
    pub id: &'a str,
    pub created: u64,
    pub model: &'a str,
    pub text: &'a str,
    /// `stop` or `length`, as the chat endpoint would say it.
    pub finish_reason: &'static str,
    pub usage: Usage,
}

// --- Responses ---

#[derive(Serialize)]
struct ResponsesTextDelta<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    item_id: &'a str,
    output_index: u32,
    content_index: u32,
    delta: &'a str,
}

#[derive(Serialize)]
struct ResponsesLifecycle<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    response: ResponseObject<'a>,
}

#[derive(Serialize)]
struct ResponseObject<'a> {
    id: &'a str,
    object: &'static str,
    created_at: u64,
    model: &'a str,
    status: &'static str,
    incomplete_details: Option<IncompleteDetails>,
    output: Vec<OutputMessage<'a>>,
    usage: Option<ResponsesUsage>,
}

#[derive(Serialize)]
struct IncompleteDetails {
    reason: &'static str,
}

#[derive(Serialize)]
struct OutputMessage<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    id: &'a str,
    role: &'static str,
    status: &'static str,
    content: [OutputText<'a>; 1],
}

#[derive(Serialize)]
struct OutputText<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    text: &'a str,
    annotations: [(); 0],
}

#[derive(Serialize)]
struct ResponsesUsage {
    input_tokens: u32,
    input_tokens_details: CachedTokens,
    output_tokens: u32,
    output_tokens_details: ReasoningTokens,
    total_tokens: u32,
}

#[derive(Serialize)]
struct CachedTokens {
    cached_tokens: u32,
}

#[derive(Serialize)]
struct ReasoningTokens {
    reasoning_tokens: u32,
}

impl From<Usage> for ResponsesUsage {
    fn from(usage: Usage) -> Self {
        Self {
            input_tokens: usage.prompt_tokens,
            input_tokens_details: CachedTokens {
                cached_tokens: usage.prompt_tokens_details.map_or(0, |d| d.cached_tokens),
            },
            output_tokens: usage.completion_tokens,
            output_tokens_details: ReasoningTokens {
                reasoning_tokens: 0,
            },
            total_tokens: usage.total_tokens,
        }
    }
}

/// vLLM's Responses status: an answer cut at `max_output_tokens` is `incomplete`, with that reason.
fn responses_status(finish_reason: &str) -> (&'static str, Option<IncompleteDetails>) {
    match finish_reason {
        "length" => (
            "incomplete",
            Some(IncompleteDetails {
                reason: "max_output_tokens",
            }),
        ),
        _ => ("completed", None),
    }
}

fn response_object<'a>(answer: &Answer<'a>, done: bool) -> ResponseObject<'a> {
    let (status, incomplete_details) = if done {
        responses_status(answer.finish_reason)
    } else {
        ("in_progress", None)
    };
    ResponseObject {
        id: answer.id,
        object: "response",
        created_at: answer.created,
        model: answer.model,
        status,
        incomplete_details,
        output: if done {
            vec![OutputMessage {
                kind: "message",
                id: answer.id,
                role: "assistant",
                status: "completed",
                content: [OutputText {
                    kind: "output_text",
                    text: answer.text,
                    annotations: [],
                }],
            }]
        } else {
            Vec::new()
        },
        usage: done.then(|| answer.usage.into()),
    }
}

/// `response.created`: the stream's first event, sent with the first token.
pub(crate) fn responses_created(answer: &Answer<'_>) -> Bytes {
    one_event(
        "response.created",
        &ResponsesLifecycle {
            kind: "response.created",
            response: response_object(answer, false),
        },
    )
}

/// `response.output_text.delta` of one token.
pub(crate) fn responses_delta(id: &str, text: &str) -> Bytes {
    one_event(
        "response.output_text.delta",
        &ResponsesTextDelta {
            kind: "response.output_text.delta",
            item_id: id,
            output_index: 0,
            content_index: 0,
            delta: text,
        },
    )
}

/// `response.completed` (or `response.incomplete`), with the whole response and its usage: the last event.
pub(crate) fn responses_completed(answer: &Answer<'_>) -> Bytes {
    let kind = match responses_status(answer.finish_reason).0 {
        "incomplete" => "response.incomplete",
        _ => "response.completed",
    };
    one_event(
        kind,
        &ResponsesLifecycle {
            kind,
            response: response_object(answer, true),
        },
    )
}

/// The whole (non-streamed) response.
pub(crate) fn responses_body(answer: &Answer<'_>) -> Vec<u8> {
    serde_json::to_vec(&response_object(answer, true)).unwrap_or_default()
}

// --- Messages ---

#[derive(Serialize)]
struct MessageStart<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    message: MessageObject<'a>,
}

#[derive(Serialize)]
struct MessageObject<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    role: &'static str,
    content: Vec<TextBlock<'a>>,
    model: &'a str,
    stop_reason: Option<&'static str>,
    stop_sequence: Option<()>,
    usage: MessagesUsage,
}

#[derive(Serialize)]
struct TextBlock<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    text: &'a str,
}

#[derive(Serialize)]
struct MessagesUsage {
    input_tokens: u32,
    output_tokens: u32,
}

#[derive(Serialize)]
struct ContentBlockStart<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    index: u32,
    content_block: TextBlock<'a>,
}

#[derive(Serialize)]
struct ContentBlockDelta<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    index: u32,
    delta: TextDelta<'a>,
}

#[derive(Serialize)]
struct TextDelta<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    text: &'a str,
}

#[derive(Serialize)]
struct Typed {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    index: Option<u32>,
}

#[derive(Serialize)]
struct MessageDelta {
    #[serde(rename = "type")]
    kind: &'static str,
    delta: StopDelta,
    usage: OutputUsage,
}

#[derive(Serialize)]
struct StopDelta {
    stop_reason: &'static str,
    stop_sequence: Option<()>,
}

#[derive(Serialize)]
struct OutputUsage {
    output_tokens: u32,
}

/// Anthropic's `stop_reason` for chat's finish reason.
fn stop_reason(finish_reason: &str) -> &'static str {
    match finish_reason {
        "length" => "max_tokens",
        _ => "end_turn",
    }
}

fn message_object<'a>(answer: &Answer<'a>, done: bool) -> MessageObject<'a> {
    MessageObject {
        id: answer.id,
        kind: "message",
        role: "assistant",
        content: if done {
            vec![TextBlock {
                kind: "text",
                text: answer.text,
            }]
        } else {
            Vec::new()
        },
        model: answer.model,
        stop_reason: done.then(|| stop_reason(answer.finish_reason)),
        stop_sequence: None,
        usage: MessagesUsage {
            input_tokens: answer.usage.prompt_tokens,
            output_tokens: if done {
                answer.usage.completion_tokens
            } else {
                0
            },
        },
    }
}

/// `message_start` (with the input tokens) and the text block's `content_block_start`, sent with the first
/// token.
pub(crate) fn messages_start(answer: &Answer<'_>) -> Bytes {
    let mut events = Vec::with_capacity(512);
    named_event(
        "message_start",
        &MessageStart {
            kind: "message_start",
            message: message_object(answer, false),
        },
        &mut events,
    );
    named_event(
        "content_block_start",
        &ContentBlockStart {
            kind: "content_block_start",
            index: 0,
            content_block: TextBlock {
                kind: "text",
                text: "",
            },
        },
        &mut events,
    );
    Bytes::from(events)
}

/// `content_block_delta` of one token.
pub(crate) fn messages_delta(text: &str) -> Bytes {
    one_event(
        "content_block_delta",
        &ContentBlockDelta {
            kind: "content_block_delta",
            index: 0,
            delta: TextDelta {
                kind: "text_delta",
                text,
            },
        },
    )
}

/// `content_block_stop`, `message_delta` (stop reason, output tokens) and `message_stop`: the stream's end.
pub(crate) fn messages_end(answer: &Answer<'_>) -> Bytes {
    let mut events = Vec::with_capacity(384);
    named_event(
        "content_block_stop",
        &Typed {
            kind: "content_block_stop",
            index: Some(0),
        },
        &mut events,
    );
    named_event(
        "message_delta",
        &MessageDelta {
            kind: "message_delta",
            delta: StopDelta {
                stop_reason: stop_reason(answer.finish_reason),
                stop_sequence: None,
            },
            usage: OutputUsage {
                output_tokens: answer.usage.completion_tokens,
            },
        },
        &mut events,
    );
    named_event(
        "message_stop",
        &Typed {
            kind: "message_stop",
            index: None,
        },
        &mut events,
    );
    Bytes::from(events)
}

/// The whole (non-streamed) message.
pub(crate) fn messages_body(answer: &Answer<'_>) -> Vec<u8> {
    serde_json::to_vec(&message_object(answer, true)).unwrap_or_default()
}
