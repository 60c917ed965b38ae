//! OpenAI/vLLM wire shapes: the request fields the simulator reads, and the response, chunk and
//! error bodies it writes, field for field as vLLM serialises them.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::api_shapes;
use super::pooling::PoolingRoute;
use super::prefix_cache::BlockHasher;
use llmbench_text::tokenizer::word_count;

/// The text of every output token. Real BPE tokenizers also encode `" token"` as one token, so a
/// client that re-tokenises the output counts what `usage` reports.
pub(crate) const TOKEN_TEXT: &str = " token";

pub(crate) const DONE_EVENT: &[u8] = b"data: [DONE]\n\n";

/// The `malformed` fault: a `data:` event whose payload is not JSON.
pub(crate) const MALFORMED_EVENT: &[u8] = b"data: {\"id\": llmbench-sim malformed event\n\n";

/// `POST /v1/completions`; unknown fields are ignored, as vLLM does.
#[derive(Debug, Deserialize)]
pub(crate) struct CompletionRequest {
    #[serde(default)]
    pub model: Option<String>,
    pub prompt: Prompt,
    #[serde(flatten)]
    pub common: CommonParams,
}

/// `POST /v1/chat/completions`.
#[derive(Debug, Deserialize)]
pub(crate) struct ChatRequest {
    #[serde(default)]
    pub model: Option<String>,
    pub messages: Vec<ChatMessage>,
    /// OpenAI's newer name for `max_tokens`; wins over it, as in vLLM.
    #[serde(default)]
    pub max_completion_tokens: Option<i64>,
    #[serde(flatten)]
    pub common: CommonParams,
}

/// Sampling and streaming fields shared by both endpoints.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct CommonParams {
    #[serde(default)]
    pub stream: Option<bool>,
    #[serde(default)]
    pub stream_options: Option<StreamOptions>,
    #[serde(default)]
    pub max_tokens: Option<i64>,
    #[serde(default)]
    pub ignore_eos: Option<bool>,
    /// vLLM's extension: no end of sequence before this many tokens (`SamplingParams.min_tokens`).
    #[serde(default)]
    pub min_tokens: Option<i64>,
    #[serde(default)]
    pub n: Option<i64>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct StreamOptions {
    #[serde(default)]
    pub include_usage: Option<bool>,
}

/// Every prompt form vLLM accepts; only single prompts are served.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum Prompt {
    Text(String),
    TokenIds(Vec<u32>),
    Texts(Vec<String>),
    TokenIdBatches(Vec<Vec<u32>>),
}

impl Prompt {
    /// The simulator's token estimate: words of a text prompt, ids of a token-id prompt. A batch
    /// of more than one prompt is refused (it would need one choice per prompt).
    pub fn token_count(&self) -> Result<u32, String> {
        let count = match self {
            Prompt::Text(text) => word_count(text),
            Prompt::TokenIds(ids) => ids.len(),
            Prompt::Texts(texts) => match texts.as_slice() {
                [text] => word_count(text),
                _ => return Err(batch_error(texts.len())),
            },
            Prompt::TokenIdBatches(batches) => match batches.as_slice() {
                [ids] => ids.len(),
                _ => return Err(batch_error(batches.len())),
            },
        };
        Ok(saturate(count))
    }
}

impl Prompt {
    /// Feeds the prompt's tokens, as [`Prompt::token_count`] counts them, to the prefix cache's hasher. A batch
    /// was refused by the count already, so only single prompts reach here.
    pub(crate) fn hash_blocks(&self, hasher: &mut BlockHasher) {
        match self {
            Prompt::Text(text) => hasher.push_words(text),
            Prompt::TokenIds(ids) => ids.iter().for_each(|id| hasher.push(id)),
            Prompt::Texts(texts) => texts.iter().for_each(|text| hasher.push_words(text)),
            Prompt::TokenIdBatches(batches) => {
                batches.iter().flatten().for_each(|id| hasher.push(id))
            }
        }
    }
}

fn batch_error(len: usize) -> String {
    format!(
        "the simulator serves one prompt per request, got a batch of {len}; \
         send a string or a token-id array"
    )
}

#[derive(Debug, Deserialize)]
pub(crate) struct ChatMessage {
    #[serde(default)]
    pub content: Option<MessageContent>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum MessageContent {
    Text(String),
    Parts(Vec<ContentPart>),
}

/// A multi-part content item: text parts carry words, `image_url` parts an image (see [`image_tokens`]).
#[derive(Debug, Deserialize)]
pub(crate) struct ContentPart {
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub image_url: Option<ImageUrl>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct ImageUrl {
    pub url: String,
}

/// Pixels on a side of the square one image token covers: a vision transformer's 14-pixel patches merged 2×2,
/// as Qwen2-VL merges them.
const IMAGE_TOKEN_SIDE: u32 = 28;

/// The simulator's token count for an image of `width` × `height`: one per 28×28 tile begun,
/// `ceil(w/28)·ceil(h/28)` (256×256 → 100, 1280×720 → 1 196). Qwen2-VL's count without its resize to its pixel
/// bounds and its vision start/end tokens: a stated rule, not one model's exact count.
pub fn image_tokens(width: u32, height: u32) -> u32 {
    width
        .div_ceil(IMAGE_TOKEN_SIDE)
        .saturating_mul(height.div_ceil(IMAGE_TOKEN_SIDE))
}

/// The size of an `image_url` part's image, read from its header (the image itself is never decoded): in a data
/// URL, or in a local file a `file://` URL names (as vLLM reads one under `--allowed-local-media-path`).
fn image_size(url: &str) -> Result<(u32, u32), String> {
    let size = if url.starts_with("file://") {
        llmbench_data::image::file_url_image_size(url)
    } else {
        llmbench_data::image::data_url_image_size(url)
    };
    size.ok_or_else(|| {
        let shown: String = url.chars().take(60).collect();
        format!(
            "cannot read the image at `{shown}…`: the simulator takes JPEG, PNG or WEBP images as base64 data URLs \
             (data:image/jpeg;base64,…) or as file:// URLs of local files"
        )
    })
}

/// The tokens of every image in a chat's messages ([`image_tokens`] each); an error names an image whose size
/// cannot be read, as a vision server refuses an image it cannot load.
pub(crate) fn chat_image_tokens(messages: &[ChatMessage]) -> Result<u32, String> {
    let mut tokens = 0u32;
    for part in chat_parts(messages) {
        if let Some(image) = &part.image_url {
            let (width, height) = image_size(&image.url)?;
            tokens = tokens.saturating_add(image_tokens(width, height));
        }
    }
    Ok(tokens)
}

fn chat_parts(messages: &[ChatMessage]) -> impl Iterator<Item = &ContentPart> {
    messages
        .iter()
        .filter_map(|message| match &message.content {
            Some(MessageContent::Parts(parts)) => Some(parts.iter()),
            _ => None,
        })
        .flatten()
}

/// The chat token estimate: the words of every message's text (no chat-template overhead).
pub(crate) fn chat_prompt_tokens(messages: &[ChatMessage]) -> u32 {
    let words: usize = messages
        .iter()
        .filter_map(|message| message.content.as_ref())
        .map(|content| match content {
            MessageContent::Text(text) => word_count(text),
            MessageContent::Parts(parts) => parts
                .iter()
                .filter_map(|part| part.text.as_deref())
                .map(word_count)
                .sum(),
        })
        .sum();
    saturate(words)
}

/// Feeds a chat's tokens, as [`chat_prompt_tokens`] and [`chat_image_tokens`] count them, to the prefix cache's
/// hasher: every message's text words and image tokens, in order. An image's tokens hash its URL and their
/// place in it, so only the same image shares blocks (vLLM keys a block by its images' hashes too).
pub(crate) fn chat_hash_blocks(messages: &[ChatMessage], hasher: &mut BlockHasher) {
    for content in messages.iter().filter_map(|m| m.content.as_ref()) {
        match content {
            MessageContent::Text(text) => hasher.push_words(text),
            MessageContent::Parts(parts) => {
                for part in parts {
                    if let Some(text) = part.text.as_deref() {
                        hasher.push_words(text);
                    }
                    if let Some(image) = &part.image_url {
                        let Ok((width, height)) = image_size(&image.url) else {
                            continue;
                        };
                        let digest = {
                            use std::hash::{Hash as _, Hasher as _};
                            let mut h = std::collections::hash_map::DefaultHasher::new();
                            image.url.hash(&mut h);
                            h.finish()
                        };
                        (0..image_tokens(width, height)).for_each(|i| hasher.push(&(digest, i)));
                    }
                }
            }
        }
    }
}

fn saturate(count: usize) -> u32 {
    u32::try_from(count).unwrap_or(u32::MAX)
}

/// Which endpoint a response is for; decides object names and chunk layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Endpoint {
    Completions,
    Chat,
    /// OpenAI's Responses API (`/v1/responses`).
    Responses,
    /// Anthropic's Messages API (`/v1/messages`).
    Messages,
    /// A pooling route (embeddings, rerank, score, pooling) and the results its answer holds: one whole answer,
    /// never streamed.
    Pooling {
        route: PoolingRoute,
        inputs: u32,
    },
}

impl Endpoint {
    pub(crate) fn id_prefix(self) -> &'static str {
        match self {
            Endpoint::Pooling { route, .. } => route.id_prefix(),
            Endpoint::Completions => "cmpl-",
            Endpoint::Chat => "chatcmpl-",
            Endpoint::Responses => "resp_",
            Endpoint::Messages => "msg_",
        }
    }

    /// Whether the stream opens with an event before the first token's (chat's role delta, the Responses
    /// `response.created`, Anthropic's `message_start`).
    pub(crate) fn opens_stream(self) -> bool {
        !matches!(self, Endpoint::Completions)
    }

    /// Whether the stream ends with its own events (usage included, whatever `stream_options` says) rather than
    /// an `include_usage` chunk and `[DONE]`.
    pub(crate) fn has_own_stream_end(self) -> bool {
        matches!(self, Endpoint::Responses | Endpoint::Messages)
    }
}

/// vLLM's `UsageInfo` as its usage chunks write it (`exclude_none`): `prompt_tokens_details` only when set.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct Usage {
    pub prompt_tokens: u32,
    pub total_tokens: u32,
    pub completion_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_tokens_details: Option<PromptTokensDetails>,
}

/// vLLM's `PromptTokenUsageInfo`: the prompt tokens served from the prefix cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) struct PromptTokensDetails {
    pub cached_tokens: u32,
}

impl Usage {
    pub fn new(prompt_tokens: u32, completion_tokens: u32) -> Self {
        Self {
            prompt_tokens,
            total_tokens: prompt_tokens.saturating_add(completion_tokens),
            completion_tokens,
            prompt_tokens_details: None,
        }
    }

    /// The same usage, reporting `cached_tokens` prompt tokens as served from the prefix cache.
    pub(crate) fn with_cached_tokens(mut self, cached_tokens: u32) -> Self {
        self.prompt_tokens_details = Some(PromptTokensDetails { cached_tokens });
        self
    }
}

/// The per-request constants every chunk repeats.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ChunkHeader<'a> {
    pub endpoint: Endpoint,
    pub id: &'a str,
    pub created: u64,
    pub model: &'a str,
}

#[derive(Serialize)]
struct CompletionChunk<'a> {
    id: &'a str,
    object: &'static str,
    created: u64,
    model: &'a str,
    choices: &'a [CompletionStreamChoice<'a>],
    /// vLLM serialises completion chunks with every field, so `usage` is `null` until the usage
    /// chunk, where (with `exclude_none`) it is an object.
    usage: Option<Usage>,
}

#[derive(Serialize)]
struct CompletionStreamChoice<'a> {
    index: u32,
    text: &'a str,
    logprobs: Option<()>,
    finish_reason: Option<&'static str>,
    stop_reason: Option<()>,
}

#[derive(Serialize)]
struct ChatChunk<'a> {
    id: &'a str,
    object: &'static str,
    created: u64,
    model: &'a str,
    choices: &'a [ChatStreamChoice<'a>],
    /// vLLM serialises chat chunks with `exclude_unset`, so `usage` appears only in the usage chunk.
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<Usage>,
}

#[derive(Serialize)]
struct ChatStreamChoice<'a> {
    index: u32,
    delta: Delta<'a>,
    logprobs: Option<()>,
    finish_reason: Option<&'static str>,
    /// Set (to `null`) only on the finishing chunk, like vLLM.
    #[serde(skip_serializing_if = "Option::is_none")]
    stop_reason: Option<Option<()>>,
}

/// vLLM's `DeltaMessage`, written with `exclude_unset`: a reasoning token carries `reasoning_content` and no
/// `content`.
#[derive(Serialize)]
struct Delta<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    role: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    content: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_content: Option<&'a str>,
}

impl ChunkHeader<'_> {
    /// The chat stream's opening chunk: the role-only delta vLLM sends with the first token.
    pub(crate) fn role_event(&self) -> Bytes {
        self.chat_event(
            &[ChatStreamChoice {
                index: 0,
                delta: Delta {
                    role: Some("assistant"),
                    content: Some(""),
                    reasoning_content: None,
                },
                logprobs: None,
                finish_reason: None,
                stop_reason: None,
            }],
            None,
        )
    }

    /// One output token; `finish_reason` is set on the last one.
    pub(crate) fn token_event(&self, finish_reason: Option<&'static str>) -> Bytes {
        self.output_event(finish_reason, false)
    }

    /// One reasoning token of a chat answer (a completion has none: it gets an output token).
    pub(crate) fn reasoning_event(&self, finish_reason: Option<&'static str>) -> Bytes {
        self.output_event(finish_reason, true)
    }

    fn output_event(&self, finish_reason: Option<&'static str>, reasoning: bool) -> Bytes {
        match self.endpoint {
            // Their finish reason rides on the end events ([`ChunkHeader::end_events`]).
            Endpoint::Responses => api_shapes::responses_delta(self.id, TOKEN_TEXT),
            Endpoint::Messages => api_shapes::messages_delta(TOKEN_TEXT),
            // A pooling request is never streamed (its routes read no `stream`); completions' shape stands in.
            Endpoint::Completions | Endpoint::Pooling { .. } => self.completion_event(
                &[CompletionStreamChoice {
                    index: 0,
                    text: TOKEN_TEXT,
                    logprobs: None,
                    finish_reason,
                    stop_reason: None,
                }],
                None,
            ),
            Endpoint::Chat => self.chat_event(
                &[ChatStreamChoice {
                    index: 0,
                    delta: if reasoning {
                        Delta {
                            role: None,
                            content: None,
                            reasoning_content: Some(TOKEN_TEXT),
                        }
                    } else {
                        Delta {
                            role: None,
                            content: Some(TOKEN_TEXT),
                            reasoning_content: None,
                        }
                    },
                    logprobs: None,
                    finish_reason,
                    stop_reason: finish_reason.map(|_| None),
                }],
                None,
            ),
        }
    }

    /// The `stream_options.include_usage` chunk: empty `choices`, then `usage`; for the Responses and Messages
    /// APIs, their end events, which carry the usage.
    pub(crate) fn usage_event(
        &self,
        usage: Usage,
        text: &str,
        finish_reason: &'static str,
    ) -> Bytes {
        match self.endpoint {
            Endpoint::Completions | Endpoint::Pooling { .. } => {
                self.completion_event(&[], Some(usage))
            }
            Endpoint::Chat => self.chat_event(&[], Some(usage)),
            Endpoint::Responses => {
                api_shapes::responses_completed(&self.answer(text, finish_reason, usage))
            }
            Endpoint::Messages => {
                api_shapes::messages_end(&self.answer(text, finish_reason, usage))
            }
        }
    }

    /// The stream's opening event: chat's role-only delta, the Responses API's `response.created`, Anthropic's
    /// `message_start` (with the input tokens).
    pub(crate) fn open_event(&self, usage: Usage) -> Bytes {
        match self.endpoint {
            Endpoint::Responses => api_shapes::responses_created(&self.answer("", "stop", usage)),
            Endpoint::Messages => api_shapes::messages_start(&self.answer("", "stop", usage)),
            Endpoint::Completions | Endpoint::Chat | Endpoint::Pooling { .. } => self.role_event(),
        }
    }

    fn answer<'a>(
        &'a self,
        text: &'a str,
        finish_reason: &'static str,
        usage: Usage,
    ) -> api_shapes::Answer<'a> {
        api_shapes::Answer {
            id: self.id,
            created: self.created,
            model: self.model,
            text,
            finish_reason,
            usage,
        }
    }

    fn completion_event(
        &self,
        choices: &[CompletionStreamChoice<'_>],
        usage: Option<Usage>,
    ) -> Bytes {
        sse_event(&CompletionChunk {
            id: self.id,
            object: "text_completion",
            created: self.created,
            model: self.model,
            choices,
            usage,
        })
    }

    fn chat_event(&self, choices: &[ChatStreamChoice<'_>], usage: Option<Usage>) -> Bytes {
        sse_event(&ChatChunk {
            id: self.id,
            object: "chat.completion.chunk",
            created: self.created,
            model: self.model,
            choices,
            usage,
        })
    }

    /// The whole non-streaming response body; `reasoning` is a chat answer's reasoning text, if any.
    pub(crate) fn response_body(
        &self,
        text: &str,
        reasoning: Option<&str>,
        finish_reason: &'static str,
        usage: Usage,
    ) -> Vec<u8> {
        let result = match self.endpoint {
            Endpoint::Pooling { route, inputs } => {
                return super::pooling::answer_body(
                    route,
                    self,
                    usage.prompt_tokens,
                    inputs as usize,
                );
            }
            Endpoint::Completions => serde_json::to_vec(&CompletionResponse {
                id: self.id,
                object: "text_completion",
                created: self.created,
                model: self.model,
                choices: [CompletionChoice {
                    index: 0,
                    text,
                    logprobs: None,
                    finish_reason,
                    stop_reason: None,
                    prompt_logprobs: None,
                }],
                usage: FullUsage::from(usage),
            }),
            Endpoint::Chat => serde_json::to_vec(&ChatResponse {
                id: self.id,
                object: "chat.completion",
                created: self.created,
                model: self.model,
                choices: [ChatChoice {
                    index: 0,
                    message: ChatResponseMessage {
                        role: "assistant",
                        content: text,
                        reasoning_content: reasoning,
                        tool_calls: [],
                    },
                    logprobs: None,
                    finish_reason,
                    stop_reason: None,
                }],
                usage: FullUsage::from(usage),
                prompt_logprobs: None,
            }),
            Endpoint::Responses => {
                return api_shapes::responses_body(&self.answer(text, finish_reason, usage));
            }
            Endpoint::Messages => {
                return api_shapes::messages_body(&self.answer(text, finish_reason, usage));
            }
        };
        // Serialising these plain structs into a Vec cannot fail.
        result.unwrap_or_default()
    }
}

fn sse_event<T: Serialize>(payload: &T) -> Bytes {
    let mut event = Vec::with_capacity(256);
    event.extend_from_slice(b"data: ");
    // Serialising plain structs into a Vec cannot fail; an empty payload would still be a valid
    // (if useless) event, so there is nothing to recover from.
    let _ = serde_json::to_writer(&mut event, payload);
    event.extend_from_slice(b"\n\n");
    Bytes::from(event)
}

/// `UsageInfo` in a whole (non-streaming) response, which vLLM serialises with every field: no cached tokens
/// reads `"prompt_tokens_details": null`.
#[derive(Serialize)]
struct FullUsage {
    prompt_tokens: u32,
    total_tokens: u32,
    completion_tokens: u32,
    prompt_tokens_details: Option<PromptTokensDetails>,
}

impl From<Usage> for FullUsage {
    fn from(usage: Usage) -> Self {
        Self {
            prompt_tokens: usage.prompt_tokens,
            total_tokens: usage.total_tokens,
            completion_tokens: usage.completion_tokens,
            prompt_tokens_details: usage.prompt_tokens_details,
        }
    }
}

#[derive(Serialize)]
struct CompletionResponse<'a> {
    id: &'a str,
    object: &'static str,
    created: u64,
    model: &'a str,
    choices: [CompletionChoice<'a>; 1],
    usage: FullUsage,
}

#[derive(Serialize)]
struct CompletionChoice<'a> {
    index: u32,
    text: &'a str,
    logprobs: Option<()>,
    finish_reason: &'static str,
    stop_reason: Option<()>,
    prompt_logprobs: Option<()>,
}

#[derive(Serialize)]
struct ChatResponse<'a> {
    id: &'a str,
    object: &'static str,
    created: u64,
    model: &'a str,
    choices: [ChatChoice<'a>; 1],
    usage: FullUsage,
    prompt_logprobs: Option<()>,
}

#[derive(Serialize)]
struct ChatChoice<'a> {
    index: u32,
    message: ChatResponseMessage<'a>,
    logprobs: Option<()>,
    finish_reason: &'static str,
    stop_reason: Option<()>,
}

#[derive(Serialize)]
struct ChatResponseMessage<'a> {
    role: &'static str,
    content: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_content: Option<&'a str>,
    tool_calls: [(); 0],
}

/// `GET /v1/models`.
#[derive(Serialize)]
pub(crate) struct ModelList<'a> {
    pub object: &'static str,
    pub data: Vec<ModelCard<'a>>,
}

#[derive(Serialize)]
pub(crate) struct ModelCard<'a> {
    pub id: &'a str,
    pub object: &'static str,
    pub created: u64,
    pub owned_by: &'static str,
    pub root: &'a str,
    pub parent: Option<&'a str>,
    pub max_model_len: u32,
}

/// vLLM's error body: `{"error": {"message", "type", "param", "code"}}`.
#[derive(Serialize)]
pub(crate) struct ErrorBody<'a> {
    pub error: ErrorDetail<'a>,
}

#[derive(Serialize)]
pub(crate) struct ErrorDetail<'a> {
    pub message: &'a str,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub param: Option<&'static str>,
    pub code: u16,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(endpoint: Endpoint) -> ChunkHeader<'static> {
        ChunkHeader {
            endpoint,
            id: "x-1",
            created: 7,
            model: "m",
        }
    }

    fn json_of(event: &Bytes) -> serde_json::Value {
        let text = std::str::from_utf8(event).expect("utf-8");
        let payload = text
            .strip_prefix("data: ")
            .and_then(|rest| rest.strip_suffix("\n\n"))
            .expect("one SSE event");
        serde_json::from_str(payload).expect("JSON payload")
    }

    #[test]
    fn text_prompts_count_words_and_token_arrays_count_ids() {
        let parse = |json: &str| serde_json::from_str::<Prompt>(json).expect("prompt");
        assert_eq!(parse(r#""one two  three\nfour""#).token_count(), Ok(4));
        assert_eq!(parse("[1, 2, 3]").token_count(), Ok(3));
        assert_eq!(parse(r#"["a b"]"#).token_count(), Ok(2));
        assert_eq!(parse("[[5, 6]]").token_count(), Ok(2));
        assert!(parse(r#"["a", "b"]"#).token_count().is_err());
    }

    #[test]
    fn chat_prompts_count_words_of_every_text_part() {
        let messages: Vec<ChatMessage> = serde_json::from_str(
            r#"[{"role":"system","content":"be brief"},
                {"role":"user","content":[{"type":"text","text":"hi there you"},{"type":"image_url"}]},
                {"role":"assistant"}]"#,
        )
        .expect("messages");
        assert_eq!(chat_prompt_tokens(&messages), 5);
    }

    #[test]
    fn chat_role_chunk_matches_vllm() {
        let chunk = json_of(&header(Endpoint::Chat).role_event());
        assert_eq!(
            chunk,
            serde_json::json!({"id":"x-1","object":"chat.completion.chunk","created":7,"model":"m",
                "choices":[{"index":0,"delta":{"role":"assistant","content":""},
                            "logprobs":null,"finish_reason":null}]})
        );
    }

    #[test]
    fn last_token_chunks_carry_the_finish_reason() {
        let chat = json_of(&header(Endpoint::Chat).token_event(Some("length")));
        assert_eq!(
            chat["choices"][0],
            serde_json::json!({"index":0,"delta":{"content":" token"},"logprobs":null,
                               "finish_reason":"length","stop_reason":null})
        );
        let completion = json_of(&header(Endpoint::Completions).token_event(None));
        assert_eq!(
            completion,
            serde_json::json!({"id":"x-1","object":"text_completion","created":7,"model":"m",
                "choices":[{"index":0,"text":" token","logprobs":null,"finish_reason":null,
                            "stop_reason":null}],
                "usage":null})
        );
    }

    #[test]
    fn usage_chunks_have_empty_choices() {
        for endpoint in [Endpoint::Chat, Endpoint::Completions] {
            let chunk = json_of(&header(endpoint).usage_event(Usage::new(3, 4), "", "stop"));
            assert_eq!(chunk["choices"], serde_json::json!([]));
            assert_eq!(
                chunk["usage"],
                serde_json::json!({"prompt_tokens":3,"total_tokens":7,"completion_tokens":4})
            );
            let cached = json_of(&header(endpoint).usage_event(
                Usage::new(3, 4).with_cached_tokens(2),
                "",
                "stop",
            ));
            assert_eq!(
                cached["usage"],
                serde_json::json!({"prompt_tokens":3,"total_tokens":7,"completion_tokens":4,
                                   "prompt_tokens_details":{"cached_tokens":2}})
            );
        }
    }

    #[test]
    fn whole_responses_write_prompt_tokens_details_null_unless_tokens_were_cached() {
        for endpoint in [Endpoint::Chat, Endpoint::Completions] {
            let body = |usage| -> serde_json::Value {
                serde_json::from_slice(
                    &header(endpoint).response_body(" token", None, "length", usage),
                )
                .expect("JSON body")
            };
            assert_eq!(
                body(Usage::new(3, 1))["usage"]["prompt_tokens_details"],
                serde_json::Value::Null
            );
            assert!(
                body(Usage::new(3, 1))["usage"]
                    .as_object()
                    .is_some_and(|u| u.contains_key("prompt_tokens_details"))
            );
            assert_eq!(
                body(Usage::new(3, 1).with_cached_tokens(2))["usage"]["prompt_tokens_details"],
                serde_json::json!({"cached_tokens": 2})
            );
        }
    }
}
