//! Request bodies, built once before the clock starts: each prompt becomes the exact JSON an OpenAI-compatible
//! server receives, so the request path only sends bytes.

use bytes::Bytes;
use serde_json::{Map, Value, json};

use crate::workload::{Api, ApiKind, Harness, LoraTraffic, RankingsWire};
use llmbench_data::Prompt;
use llmbench_data::image::ImageInput;

mod lora;
mod pooling;

/// A request body built before the clock starts, with what the record needs to know about it.
#[derive(Debug, Clone)]
pub struct PreparedRequest {
    pub body: Bytes,
    pub input_tokens: u32,
    pub max_tokens: Option<u32>,
    /// Whether the body asks for exactly `max_tokens` tokens (`ignore_eos: true`).
    pub ignore_eos: bool,
    /// A header of this request alone (inference-perf's `session_id_header_key`: the request's session), shared
    /// by the requests of one session.
    pub header: Option<std::sync::Arc<(String, String)>>,
    /// For a pooling API: the inputs the request carries (embedding inputs, rerank documents); `None` otherwise.
    pub inputs: Option<u32>,
    /// The LoRA adapter the body names as its `model` ([`Api::lora`]), for figures per adapter; `None` for the
    /// base model.
    pub adapter: Option<std::sync::Arc<String>>,
    /// The synthetic images the body carries, for inference-perf's image figures; `None` without any.
    pub images: Option<std::sync::Arc<Vec<llmbench_model::record::SentImage>>>,
}

/// What every body of a run shares.
#[derive(Debug, Clone)]
pub struct BodySettings {
    pub model: String,
    pub api: ApiKind,
    pub streaming: bool,
    pub ignore_eos: bool,
    /// `max_tokens` for prompts that carry none (inference-perf sends 30 when its data sets none).
    pub default_max_tokens: Option<u32>,
    /// Whose request body this is: the tools spell the same request differently.
    pub style: BodyStyle,
    /// Merged last into every body, replacing fields of the same name (vLLM's sampling flags and `--extra-body`).
    pub extra_body: Map<String, Value>,
    /// vLLM `--logprobs`, sent in its completions bodies (`null` when unset).
    pub logprobs: Option<i64>,
    /// Prompts per request of a pooling API ([`Api::inputs_per_request`]).
    pub inputs_per_request: u32,
    /// LoRA adapters [`prepare_all`] spreads the requests over; [`prepare`] always names `model`.
    pub lora: Option<LoraTraffic>,
    /// AIPerf's rankings endpoint type ([`Api::rankings`]): each prompt is a query with its passages.
    pub rankings: Option<RankingsWire>,
}

/// How a tool writes its request bodies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BodyStyle {
    /// inference-perf (`apis/completion.py`, `apis/chat.py`) and MLPerf: `max_tokens`, string content.
    #[default]
    InferencePerf,
    /// vllm bench serve (`lib/endpoint_request_func.py`): chat asks with `max_completion_tokens` and sends the
    /// user's content as a list of text parts.
    Vllm,
    /// guidellm (`backends/openai/request_handlers.py`): chat asks with `max_completion_tokens`, user content as
    /// text parts; a request with an output length also sends `stop: null` and `ignore_eos: true`; streams ask
    /// for `continuous_usage_stats`.
    Guidellm,
    /// AIPerf (`aiperf/clients/openai/openai_chat.py`, `openai_completions.py`): chat asks with
    /// `max_completion_tokens`, string content; `--extra-inputs` merged into the body last ([`BodySettings::extra`]).
    Aiperf,
}

impl BodyStyle {
    pub fn of(harness: Harness) -> BodyStyle {
        match harness {
            Harness::VllmBenchmark | Harness::Inferencemax => BodyStyle::Vllm,
            Harness::Guidellm => BodyStyle::Guidellm,
            Harness::Aiperf => BodyStyle::Aiperf,
            Harness::InferencePerf | Harness::Nop | Harness::Mlperf | Harness::Fmperf => {
                BodyStyle::InferencePerf
            }
        }
    }
}

impl BodySettings {
    pub fn new(api: &Api, model: String, style: BodyStyle) -> Self {
        Self {
            model,
            api: api.kind,
            streaming: api.streaming,
            ignore_eos: api.ignore_eos,
            default_max_tokens: None,
            style,
            extra_body: api.extra_body.clone(),
            logprobs: api.logprobs,
            inputs_per_request: api.inputs_per_request,
            lora: api.lora.clone(),
            rankings: api.rankings,
        }
    }
}

/// The request for `prompt`: a token-id prompt stays token ids, chat turns stay messages.
pub fn prepare(prompt: &Prompt, settings: &BodySettings) -> PreparedRequest {
    match settings.api {
        ApiKind::Completion | ApiKind::Chat => prepare_openai(prompt, settings),
        ApiKind::Responses => prepare_responses(prompt, settings),
        ApiKind::Messages => prepare_messages(prompt, settings),
        ApiKind::Embeddings | ApiKind::Rerank => {
            pooling::prepare_batch(std::slice::from_ref(prompt), settings)
        }
    }
}

/// The run's requests for `prompts`, in send order: one each, or for a pooling API `inputs_per_request` prompts
/// each; with LoRA traffic each names the adapter chosen for its place in that order.
pub fn prepare_all(prompts: &[Prompt], settings: &BodySettings) -> Vec<PreparedRequest> {
    let size = if settings.api.is_pooling() {
        settings.inputs_per_request.max(1) as usize
    } else {
        1
    };
    let one = |batch: &[Prompt], settings: &BodySettings| match batch {
        [prompt] if !settings.api.is_pooling() => prepare(prompt, settings),
        _ => pooling::prepare_batch(batch, settings),
    };
    let batches = prompts.chunks(size);
    match AdapterBodies::new(settings, batches.len()) {
        None => batches.map(|b| one(b, settings)).collect(),
        Some(adapters) => batches
            .enumerate()
            .map(|(i, batch)| adapters.prepare(i, |settings| one(batch, settings)))
            .collect(),
    }
}

/// The bodies' settings for each place in a run's send order under LoRA traffic ([`Api::lora`]): the adapter
/// chosen for each place as its tool chooses it, and one copy of the settings per adapter (only `model` differs).
#[derive(Debug, Clone)]
pub struct AdapterBodies {
    per_adapter: Vec<(BodySettings, std::sync::Arc<String>)>,
    picks: Vec<usize>,
}

impl AdapterBodies {
    /// `None` without LoRA traffic; else the adapters of `count` places.
    pub fn new(settings: &BodySettings, count: usize) -> Option<AdapterBodies> {
        let traffic = settings.lora.as_ref().filter(|t| !t.adapters.is_empty())?;
        let per_adapter = traffic
            .adapters
            .iter()
            .map(|name| {
                let settings = BodySettings {
                    model: name.clone(),
                    lora: None,
                    ..settings.clone()
                };
                (settings, std::sync::Arc::new(name.clone()))
            })
            .collect();
        Some(AdapterBodies {
            per_adapter,
            picks: lora::assign(traffic, count),
        })
    }

    /// The request `build` makes with place `place`'s adapter settings, naming that adapter.
    pub fn prepare(
        &self,
        place: usize,
        build: impl FnOnce(&BodySettings) -> PreparedRequest,
    ) -> PreparedRequest {
        // `new` keeps at least one adapter; a place past those counted takes the first.
        let pick = self.picks.get(place).copied().unwrap_or(0);
        let (settings, name) = &self.per_adapter[pick.min(self.per_adapter.len() - 1)];
        PreparedRequest {
            adapter: Some(std::sync::Arc::clone(name)),
            ..build(settings)
        }
    }
}

fn prepare_openai(prompt: &Prompt, settings: &BodySettings) -> PreparedRequest {
    let max_tokens = prompt.max_tokens.or(settings.default_max_tokens);
    let mut body = Map::new();
    body.insert("model".to_owned(), Value::String(settings.model.clone()));
    match settings.api {
        ApiKind::Completion => {
            let prompt_value = match &prompt.token_ids {
                Some(ids) => json!(ids),
                None => Value::String(prompt.text.clone()),
            };
            body.insert("prompt".to_owned(), prompt_value);
        }
        _ => {
            let mut messages = match &prompt.messages {
                Some(turns) => json!(turns),
                None => json!([{"role": "user", "content": prompt.text}]),
            };
            if !matches!(settings.style, BodyStyle::InferencePerf | BodyStyle::Aiperf) {
                text_parts(&mut messages);
            }
            if prompt.images.iter().any(|image| image.place.is_some()) {
                woven_parts(&mut messages, &prompt.images);
            } else if !prompt.images.is_empty() {
                image_parts(&mut messages, &prompt.images);
            }
            body.insert("messages".to_owned(), messages);
        }
    }
    if settings.style == BodyStyle::Vllm && settings.api == ApiKind::Completion {
        // `async_request_openai_completions` sends both, always (`--logprobs` or null).
        body.insert("repetition_penalty".to_owned(), json!(1.0));
        body.insert("logprobs".to_owned(), json!(settings.logprobs));
    }
    let chat_field = settings.api == ApiKind::Chat && settings.style != BodyStyle::InferencePerf;
    if let Some(max) = max_tokens {
        let field = if chat_field {
            "max_completion_tokens"
        } else {
            "max_tokens"
        };
        body.insert(field.to_owned(), json!(max));
        if settings.style == BodyStyle::Guidellm && settings.ignore_eos {
            body.insert("stop".to_owned(), Value::Null);
        }
    }
    if settings.ignore_eos {
        // vLLM's extension: generate exactly max_tokens, so output lengths are what the profile asked for.
        body.insert("ignore_eos".to_owned(), Value::Bool(true));
    }
    body.insert("stream".to_owned(), Value::Bool(settings.streaming));
    if settings.streaming {
        let options = if settings.style == BodyStyle::Guidellm {
            json!({"include_usage": true, "continuous_usage_stats": true})
        } else {
            json!({"include_usage": true})
        };
        body.insert("stream_options".to_owned(), options);
    }
    let asked = if chat_field {
        &["max_completion_tokens", "max_tokens"][..]
    } else {
        &["max_tokens"][..]
    };
    finish(body, prompt, settings, max_tokens, asked)
}

/// OpenAI's Responses API as guidellm sends it (`ResponsesRequestHandler.format`, request_handlers.py at
/// vllm-project/guidellm ee7a774): `stream` only when streaming (and no `stream_options`: vLLM always reports
/// usage on `response.completed`), an output length as `max_output_tokens` with `stop: null` and
/// `ignore_eos: true`, and the prompt as one user item of `input_text` parts. System turns become `instructions`.
fn prepare_responses(prompt: &Prompt, settings: &BodySettings) -> PreparedRequest {
    let max_tokens = prompt.max_tokens.or(settings.default_max_tokens);
    let mut body = Map::new();
    body.insert("model".to_owned(), Value::String(settings.model.clone()));
    if settings.streaming {
        body.insert("stream".to_owned(), Value::Bool(true));
    }
    if let Some(max) = max_tokens {
        body.insert("max_output_tokens".to_owned(), json!(max));
        if settings.ignore_eos {
            body.insert("stop".to_owned(), Value::Null);
            body.insert("ignore_eos".to_owned(), Value::Bool(true));
        }
    }
    let (system, turns) = split_system(prompt);
    if !system.is_empty() {
        body.insert("instructions".to_owned(), Value::String(system));
    }
    let input: Vec<Value> = turns
        .into_iter()
        .map(|(role, text)| match role.as_str() {
            "user" => json!({"role": role, "content": [{"type": "input_text", "text": text}]}),
            _ => json!({"role": role, "content": text}),
        })
        .collect();
    body.insert("input".to_owned(), Value::Array(input));
    finish(body, prompt, settings, max_tokens, &["max_output_tokens"])
}

/// Anthropic's Messages API as inference-perf sends it (`build_anthropic_request_body`,
/// inference_perf/apis/anthropic_messages.py at kubernetes-sigs/inference-perf 7de5ef2): the non-system turns
/// as `messages`, `max_tokens` (which Anthropic requires), `stream`, and the system turns joined by a blank line
/// as `system`. It sends no `ignore_eos` and no `stream_options`: usage always comes in the stream's events.
fn prepare_messages(prompt: &Prompt, settings: &BodySettings) -> PreparedRequest {
    let max_tokens = prompt.max_tokens.or(settings.default_max_tokens);
    let mut body = Map::new();
    body.insert("model".to_owned(), Value::String(settings.model.clone()));
    let (system, turns) = split_system(prompt);
    let messages: Vec<Value> = turns
        .into_iter()
        .map(|(role, text)| {
            let role = if role == "assistant" {
                "assistant"
            } else {
                "user"
            };
            json!({"role": role, "content": text})
        })
        .collect();
    body.insert("messages".to_owned(), Value::Array(messages));
    if let Some(max) = max_tokens {
        body.insert("max_tokens".to_owned(), json!(max));
    }
    body.insert("stream".to_owned(), Value::Bool(settings.streaming));
    if !system.is_empty() {
        body.insert("system".to_owned(), Value::String(system));
    }
    finish(body, prompt, settings, max_tokens, &["max_tokens"])
}

/// The prompt's system turns joined by a blank line (as inference-perf joins them for Anthropic's `system`),
/// and its other turns in order; a bare prompt is one user turn.
fn split_system(prompt: &Prompt) -> (String, Vec<(String, String)>) {
    match &prompt.messages {
        Some(turns) => {
            let system: Vec<&str> = turns
                .iter()
                .filter(|t| t.role == "system")
                .map(|t| t.content.as_str())
                .collect();
            let rest = turns
                .iter()
                .filter(|t| t.role != "system")
                .map(|t| (t.role.clone(), t.content.clone()))
                .collect();
            (system.join("\n\n"), rest)
        }
        None => (
            String::new(),
            vec![("user".to_owned(), prompt.text.clone())],
        ),
    }
}

/// Merges the extra fields last and makes the request: what the record says was asked is what the body asks,
/// after the merge (`asked` names the output-length fields the server reads, first wins).
fn finish(
    mut body: Map<String, Value>,
    prompt: &Prompt,
    settings: &BodySettings,
    max_tokens: Option<u32>,
    asked: &[&str],
) -> PreparedRequest {
    // vLLM's `_update_payload_common`: `payload.update(extra_body)`, so a field given there replaces the tool's.
    for (key, value) in &settings.extra_body {
        body.insert(key.clone(), value.clone());
    }
    let max_tokens = if settings.extra_body.is_empty() {
        max_tokens
    } else {
        asked_max_tokens(&body, asked).or(max_tokens)
    };
    let ignore_eos = body.get("ignore_eos") == Some(&Value::Bool(true));
    PreparedRequest {
        body: Bytes::from(Value::Object(body).to_string()),
        input_tokens: prompt.input_tokens,
        max_tokens,
        ignore_eos,
        header: None,
        inputs: None,
        adapter: None,
        // Only chat messages carry a prompt's images.
        images: (settings.api == ApiKind::Chat)
            .then(|| sent_images(prompt))
            .flatten(),
    }
}

/// What inference-perf measures of `prompt`'s synthetic images: each one's size and its encoded bytes (the data
/// URL's base64 payload decoded); `None` when it carries none of known size.
fn sent_images(prompt: &Prompt) -> Option<std::sync::Arc<Vec<llmbench_model::record::SentImage>>> {
    let images: Vec<llmbench_model::record::SentImage> = prompt
        .images
        .iter()
        .filter_map(|image| {
            let (width, height) = image.size?;
            let payload = image.url.split_once(";base64,")?.1;
            Some(llmbench_model::record::SentImage {
                width,
                height,
                bytes: u32::try_from(base64_decoded_len(payload)).unwrap_or(u32::MAX),
            })
        })
        .collect();
    (!images.is_empty()).then(|| std::sync::Arc::new(images))
}

/// The bytes a padded base64 text decodes to.
fn base64_decoded_len(text: &str) -> usize {
    let padding = text.bytes().rev().take_while(|b| *b == b'=').count().min(2);
    (text.len() / 4 * 3).saturating_sub(padding)
}

/// The output length a body asks for: the first of `fields` it sets (a chat body's `max_completion_tokens` before
/// its older `max_tokens`, as vLLM's chat server reads them).
fn asked_max_tokens(body: &Map<String, Value>, fields: &[&str]) -> Option<u32> {
    fields
        .iter()
        .find_map(|f| body.get(*f).and_then(Value::as_u64))
        .and_then(|n| u32::try_from(n).ok())
}

/// User messages' string content as a list of one text part, as vLLM and guidellm send it.
fn text_parts(messages: &mut Value) {
    let Some(list) = messages.as_array_mut() else {
        return;
    };
    for message in list {
        if message["role"] == "user"
            && let Some(text) = message["content"].as_str().map(str::to_owned)
        {
            message["content"] = json!([{"type": "text", "text": text}]);
        }
    }
}

/// The prompt's images as `image_url` parts after the last user message's text, as vLLM's `_get_chat_content`
/// puts them (`mm_position="last"`, lib/endpoint_request_func.py at vllm-project/vllm 3aee4a4): the text part
/// first, then each image's `{"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,…"}}`.
fn image_parts(messages: &mut Value, images: &[ImageInput]) {
    let Some(message) = messages
        .as_array_mut()
        .and_then(|list| list.iter_mut().rev().find(|m| m["role"] == "user"))
    else {
        return;
    };
    if let Some(text) = message["content"].as_str().map(str::to_owned) {
        message["content"] = json!([{"type": "text", "text": text}]);
    }
    if let Some(parts) = message["content"].as_array_mut() {
        parts.extend(
            images
                .iter()
                .map(|image| json!({"type": "image_url", "image_url": {"url": image.url}})),
        );
    }
}

/// The first user message's text with the prompt's images woven in, as inference-perf's `_build_user_content`
/// (inference_perf/apis/chat.py at kubernetes-sigs/inference-perf 7de5ef2) builds it: the shared prefix and the
/// question are each cut at their images' insertion points (`assemble_content`), then joined, the prefix's last
/// text part and the question's first merged with a space between them, or a `" "` text part between the two
/// when either side ends in an image there.
fn woven_parts(messages: &mut Value, images: &[ImageInput]) {
    let Some(message) = messages
        .as_array_mut()
        .and_then(|list| list.iter_mut().find(|m| m["role"] == "user"))
    else {
        return;
    };
    let text = message["content"].as_str().unwrap_or_default().to_owned();
    let prefix_chars = images
        .iter()
        .find_map(|image| image.place.and_then(|p| p.prefix_chars));
    // `question_text = prompts[i][len(prefix_text) + 1:]`: the separator after the prefix is dropped.
    let (prefix, question) = match prefix_chars {
        Some(n) => (
            Some(char_slice(&text, 0, n)),
            char_slice(&text, n + 1, usize::MAX),
        ),
        None => (None, text.as_str()),
    };
    let side = |in_prefix: bool| -> Vec<(Value, f64)> {
        images
            .iter()
            .filter(|image| image.place.is_some_and(|p| p.in_prefix == in_prefix))
            .map(|image| {
                (
                    json!({"type": "image_url", "image_url": {"url": image.url}}),
                    image.place.map_or(1.0, |p| p.point),
                )
            })
            .collect()
    };
    let text_part = |t: &str| json!({"type": "text", "text": t});
    let prefix_items = side(true);
    let prefix_content = if !prefix_items.is_empty() {
        assemble_content(prefix.unwrap_or_default(), prefix_items)
    } else {
        prefix
            .filter(|p| !p.is_empty())
            .map(|p| vec![text_part(p)])
            .unwrap_or_default()
    };
    let question_items = side(false);
    let question_content = if !question_items.is_empty() {
        assemble_content(question, question_items)
    } else if question.is_empty() {
        Vec::new()
    } else {
        vec![text_part(question)]
    };
    let content = match (prefix_content.last(), question_content.first()) {
        (Some(last), Some(first)) => {
            let mut joined = prefix_content[..prefix_content.len() - 1].to_vec();
            match (last["text"].as_str(), first["text"].as_str()) {
                (Some(a), Some(b)) if last["type"] == "text" && first["type"] == "text" => {
                    joined.push(text_part(&format!("{a} {b}")));
                    joined.extend(question_content[1..].iter().cloned());
                }
                _ => {
                    joined.push(last.clone());
                    joined.push(text_part(" "));
                    joined.extend(question_content);
                }
            }
            joined
        }
        _ => prefix_content.into_iter().chain(question_content).collect(),
    };
    message["content"] = Value::Array(content);
}

/// inference-perf's `assemble_content`: the media blocks sorted by insertion point (a stable sort), each cutting
/// the text at `int(point · len(text))` characters, the point clamped to [0, 1]; no empty text part is made.
fn assemble_content(text: &str, mut items: Vec<(Value, f64)>) -> Vec<Value> {
    items.sort_by(|a, b| a.1.total_cmp(&b.1));
    let text_len = text.chars().count();
    let mut content = Vec::with_capacity(items.len() * 2 + 1);
    let mut last = 0usize;
    for (block, point) in items {
        let idx = (point.clamp(0.0, 1.0) * text_len as f64) as usize;
        if idx > last {
            content.push(json!({"type": "text", "text": char_slice(text, last, idx)}));
            last = idx;
        }
        content.push(block);
    }
    if last < text_len {
        content.push(json!({"type": "text", "text": char_slice(text, last, usize::MAX)}));
    }
    content
}

/// The characters `start..end` of `text` (Python's `text[start:end]`, clamped to its length).
fn char_slice(text: &str, start: usize, end: usize) -> &str {
    let byte = |n: usize| text.char_indices().nth(n).map_or(text.len(), |(i, _)| i);
    let (from, to) = (byte(start), byte(end.max(start)));
    &text[from..to]
}

#[cfg(test)]
mod tests {
    use super::*;
    use llmbench_data::ChatMessage;

    fn settings(api: ApiKind, streaming: bool) -> BodySettings {
        BodySettings {
            model: "m".to_owned(),
            api,
            streaming,
            ignore_eos: true,
            default_max_tokens: Some(30),
            style: BodyStyle::InferencePerf,
            extra_body: Default::default(),
            logprobs: None,
            inputs_per_request: 1,
            lora: None,
            rankings: None,
        }
    }

    fn body(request: &PreparedRequest) -> Value {
        serde_json::from_slice(&request.body).expect("valid JSON")
    }

    #[test]
    fn a_streamed_completion_asks_for_usage_and_exact_length() {
        let prompt = Prompt::text("hello world".to_owned(), 2, Some(8));
        let request = prepare(&prompt, &settings(ApiKind::Completion, true));
        assert_eq!(
            body(&request),
            json!({"model": "m", "prompt": "hello world", "max_tokens": 8, "ignore_eos": true, "stream": true,
                   "stream_options": {"include_usage": true}})
        );
        assert_eq!((request.input_tokens, request.max_tokens), (2, Some(8)));
    }

    #[test]
    fn extra_fields_are_set_last_and_replace_llmbenchs_own() {
        let mut settings = settings(ApiKind::Completion, false);
        settings.style = BodyStyle::Aiperf;
        settings.extra_body = Map::from_iter([
            ("min_tokens".to_owned(), json!(4)),
            ("ignore_eos".to_owned(), json!(false)),
        ]);
        let prompt = Prompt::text("hi".to_owned(), 1, Some(8));
        assert_eq!(
            body(&prepare(&prompt, &settings)),
            json!({"model": "m", "prompt": "hi", "max_tokens": 8, "ignore_eos": false, "stream": false,
                   "min_tokens": 4})
        );
    }

    #[test]
    fn pre_tokenized_prompts_are_sent_as_token_ids() {
        let mut prompt = Prompt::text(String::new(), 3, None);
        prompt.token_ids = Some(vec![1, 2, 3]);
        let request = prepare(&prompt, &settings(ApiKind::Completion, false));
        let value = body(&request);
        assert_eq!(value["prompt"], json!([1, 2, 3]));
        assert_eq!(
            value["max_tokens"], 30,
            "the default applies when the prompt sets none"
        );
        assert!(value.get("stream_options").is_none());
    }

    /// An image of inference-perf's shared_prefix data named `url`, at `point` of the prefix (or question) of a
    /// text whose prefix is `prefix_chars` characters.
    fn woven(url: &str, point: f64, in_prefix: bool, prefix_chars: Option<usize>) -> ImageInput {
        ImageInput {
            size: Some((1, 1)),
            url: url.to_owned(),
            place: Some(llmbench_data::image::ImagePlace {
                point,
                in_prefix,
                prefix_chars,
            }),
        }
    }

    fn woven_content(text: &str, images: Vec<ImageInput>) -> Value {
        let mut prompt = Prompt::text(text.to_owned(), 1, Some(4));
        prompt.images = images;
        let messages = body(&prepare(&prompt, &settings(ApiKind::Chat, false)))["messages"].clone();
        assert_eq!(messages.as_array().map(Vec::len), Some(1), "{messages}");
        assert_eq!(messages[0]["role"], "user");
        messages[0]["content"].clone()
    }

    fn text(t: &str) -> Value {
        json!({"type": "text", "text": t})
    }

    fn image(url: &str) -> Value {
        json!({"type": "image_url", "image_url": {"url": url}})
    }

    /// By hand, from `_build_user_content` and `assemble_content`: "abcd efghij" with a 4-character prefix is the
    /// prefix "abcd" and the question "efghij" (`[len(prefix) + 1:]`). A prefix image at 0.5 cuts "abcd" at
    /// int(0.5 · 4) = 2, a question image at 0.5 cuts "efghij" at int(0.5 · 6) = 3; the prefix's last text part
    /// and the question's first are merged with a space.
    #[test]
    fn inference_perf_weaves_prefix_and_question_images_at_their_points() {
        let content = woven_content(
            "abcd efghij",
            vec![
                woven("Q", 0.5, false, Some(4)),
                woven("P", 0.5, true, Some(4)),
            ],
        );
        assert_eq!(
            content,
            json!([
                text("ab"),
                image("P"),
                text("cd efg"),
                image("Q"),
                text("hij")
            ])
        );
    }

    /// A prefix ending in an image (point 1.0: int(1.0 · 4) = 4, no text after it) and a question starting with
    /// one (point 0.0) are joined by a lone " " part.
    #[test]
    fn inference_perf_puts_a_space_part_between_images_at_the_seam() {
        let content = woven_content(
            "abcd efghij",
            vec![
                woven("P", 1.0, true, Some(4)),
                woven("Q", 0.0, false, Some(4)),
            ],
        );
        assert_eq!(
            content,
            json!([
                text("abcd"),
                image("P"),
                text(" "),
                image("Q"),
                text("efghij")
            ])
        );
    }

    /// The guide's four prefix images at 0.0 come before the whole text; the question, without images of its
    /// own, is merged into the prefix's one text part.
    #[test]
    fn inference_perf_sends_the_guides_images_before_the_text() {
        let content = woven_content(
            "abcd efghij",
            (0..4).map(|_| woven("P", 0.0, true, Some(4))).collect(),
        );
        assert_eq!(
            content,
            json!([
                image("P"),
                image("P"),
                image("P"),
                image("P"),
                text("abcd efghij")
            ])
        );
    }

    /// Positions count characters (Python's `len` and slices), not bytes; the images are taken in the order of
    /// their points, ties in the order drawn (a stable sort); with no prefix the whole text is the question.
    #[test]
    fn inference_perf_cuts_at_characters_in_the_order_of_the_points() {
        let content = woven_content("héllo wörld", vec![woven("Q", 0.4, false, Some(5))]);
        // "wörld" at int(0.4 · 5) = 2.
        assert_eq!(content, json!([text("héllo wö"), image("Q"), text("rld")]));
        let content = woven_content(
            "wörld",
            vec![
                woven("B", 0.9, false, None),
                woven("A1", 0.2, false, None),
                woven("A2", 0.2, false, None),
            ],
        );
        // int(0.2 · 5) = 1, int(0.9 · 5) = 4.
        assert_eq!(
            content,
            json!([
                text("w"),
                image("A1"),
                image("A2"),
                text("örl"),
                image("B"),
                text("d")
            ])
        );
    }

    #[test]
    fn a_chat_request_keeps_each_synthetic_images_size_and_decoded_bytes() {
        // base64 of 10, 11 and 12 bytes: 16 characters with "==", 16 with "=", 16 with none.
        let image = |width, height, payload: &str| ImageInput {
            size: Some((width, height)),
            url: format!("data:image/png;base64,{payload}"),
            place: None,
        };
        let mut prompt = Prompt::text("hi".to_owned(), 1, Some(4));
        prompt.images = vec![
            image(4, 2, "AAAAAAAAAAAAAA=="),
            image(3, 3, "AAAAAAAAAAAAAAA="),
            image(2, 4, "AAAAAAAAAAAAAAAA"),
            ImageInput::named("/d/1.jpg"),
        ];
        let request = prepare(&prompt, &settings(ApiKind::Chat, true));
        let images = request.images.expect("images");
        let seen: Vec<(u64, u32, f64)> = images
            .iter()
            .map(|i| (i.pixels(), i.bytes, i.aspect_ratio()))
            .collect();
        assert_eq!(seen, [(8, 10, 2.0), (9, 11, 1.0), (8, 12, 0.5)]);
        // A completion body carries no image, nor does a prompt whose images are dataset paths.
        assert!(
            prepare(&prompt, &settings(ApiKind::Completion, true))
                .images
                .is_none()
        );
        prompt.images = vec![ImageInput::named("/d/1.jpg")];
        assert!(
            prepare(&prompt, &settings(ApiKind::Chat, true))
                .images
                .is_none()
        );
    }

    #[test]
    fn vllm_sends_a_prompts_images_as_image_url_parts_after_its_text() {
        let mut settings = settings(ApiKind::Chat, true);
        settings.style = BodyStyle::Vllm;
        let mut prompt = Prompt::text("hi".to_owned(), 1, Some(4));
        prompt.images = vec![
            ImageInput {
                size: Some((2, 1)),
                url: "data:image/jpeg;base64,AAAA".to_owned(),
                place: None,
            },
            ImageInput::named("/d/1.jpg"),
        ];
        let request = prepare(&prompt, &settings);
        assert_eq!(
            body(&request)["messages"],
            json!([{"role": "user", "content": [
                {"type": "text", "text": "hi"},
                {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,AAAA"}},
                {"type": "image_url", "image_url": {"url": "file:///d/1.jpg"}},
            ]}])
        );
        assert_eq!(
            request.input_tokens, 1,
            "the text's tokens, as vLLM's prompt_len"
        );
    }

    #[test]
    fn chat_prompts_become_messages() {
        let prompt = Prompt::text("hi".to_owned(), 1, Some(4));
        assert_eq!(
            body(&prepare(&prompt, &settings(ApiKind::Chat, true)))["messages"],
            json!([{"role": "user", "content": "hi"}])
        );
        let mut turns = Prompt::text(String::new(), 5, Some(4));
        turns.messages = Some(vec![
            ChatMessage {
                role: "system".to_owned(),
                content: "be brief".to_owned(),
            },
            ChatMessage {
                role: "user".to_owned(),
                content: "hi".to_owned(),
            },
        ]);
        assert_eq!(
            body(&prepare(&turns, &settings(ApiKind::Chat, true)))["messages"][0]["role"],
            "system"
        );
    }

    #[test]
    fn each_tool_spells_a_chat_request_its_own_way() {
        let prompt = Prompt::text("hi".to_owned(), 1, Some(4));
        let with = |style| {
            let mut s = settings(ApiKind::Chat, true);
            s.style = style;
            body(&prepare(&prompt, &s))
        };
        let ip = with(BodyStyle::InferencePerf);
        assert_eq!(ip["max_tokens"], 4);
        assert_eq!(ip["messages"][0]["content"], "hi");
        assert_eq!(ip["stream_options"], json!({"include_usage": true}));
        let vllm = with(BodyStyle::Vllm);
        assert_eq!(vllm["max_completion_tokens"], 4);
        assert!(vllm.get("max_tokens").is_none());
        assert_eq!(
            vllm["messages"][0]["content"],
            json!([{"type": "text", "text": "hi"}])
        );
        let guidellm = with(BodyStyle::Guidellm);
        assert_eq!(guidellm["max_completion_tokens"], 4);
        assert_eq!(guidellm["stop"], Value::Null);
        assert_eq!(guidellm["ignore_eos"], true);
        assert_eq!(
            guidellm["stream_options"],
            json!({"include_usage": true, "continuous_usage_stats": true})
        );
        // Completions keep max_tokens for every tool; vLLM's also fix the repetition penalty and ask no logprobs.
        let mut s = settings(ApiKind::Completion, true);
        s.style = BodyStyle::Vllm;
        let vllm = body(&prepare(&prompt, &s));
        assert_eq!(vllm["max_tokens"], 4);
        assert_eq!(vllm["repetition_penalty"], 1.0);
        assert!(vllm.get("logprobs").is_some_and(Value::is_null));
    }

    #[test]
    fn a_responses_body_is_guidellms_with_system_turns_as_instructions() {
        let mut s = settings(ApiKind::Responses, false);
        s.style = BodyStyle::Guidellm;
        let prompt = Prompt::text("hi there".to_owned(), 2, Some(4));
        // Not streamed: no `stream` at all (guidellm sets it only when streaming), no stream_options either way.
        assert_eq!(
            body(&prepare(&prompt, &s)),
            json!({"model": "m", "max_output_tokens": 4, "stop": null, "ignore_eos": true,
                   "input": [{"role": "user", "content": [{"type": "input_text", "text": "hi there"}]}]})
        );
        s.streaming = true;
        let mut turns = Prompt::text(String::new(), 3, Some(4));
        turns.messages = Some(vec![
            ChatMessage {
                role: "system".to_owned(),
                content: "be brief".to_owned(),
            },
            ChatMessage {
                role: "user".to_owned(),
                content: "hi".to_owned(),
            },
        ]);
        let streamed = body(&prepare(&turns, &s));
        assert_eq!(streamed["stream"], true);
        assert!(streamed.get("stream_options").is_none());
        assert_eq!(streamed["instructions"], "be brief");
        assert_eq!(streamed["input"].as_array().map(Vec::len), Some(1));
    }

    #[test]
    fn a_messages_body_is_inference_perfs_without_ignore_eos_and_with_the_system_apart() {
        let s = settings(ApiKind::Messages, true);
        let mut turns = Prompt::text(String::new(), 3, None);
        turns.messages = Some(vec![
            ChatMessage {
                role: "system".to_owned(),
                content: "a".to_owned(),
            },
            ChatMessage {
                role: "system".to_owned(),
                content: "b".to_owned(),
            },
            ChatMessage {
                role: "user".to_owned(),
                content: "hi".to_owned(),
            },
        ]);
        let request = prepare(&turns, &s);
        // `build_anthropic_request_body`: system turns joined by a blank line; the client's 30 as max_tokens.
        assert_eq!(
            body(&request),
            json!({"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 30,
                   "stream": true, "system": "a\n\nb"})
        );
        assert_eq!((request.max_tokens, request.ignore_eos), (Some(30), false));
    }

    #[test]
    fn vllm_extra_body_is_merged_last_and_the_record_asks_what_the_body_asks() {
        let prompt = Prompt::text("hi".to_owned(), 1, Some(4));
        let mut s = settings(ApiKind::Completion, true);
        s.style = BodyStyle::Vllm;
        s.logprobs = Some(2);
        s.extra_body = serde_json::from_str(
            r#"{"temperature": 0.0, "repetition_penalty": 1.2, "max_tokens": 9, "ignore_eos": false}"#,
        )
        .expect("a map");
        let request = prepare(&prompt, &s);
        // `payload.update(extra_body)`: the tool's repetition_penalty 1.0, max_tokens and ignore_eos give way.
        assert_eq!(
            body(&request),
            json!({"model": "m", "prompt": "hi", "repetition_penalty": 1.2, "logprobs": 2, "max_tokens": 9,
                   "ignore_eos": false, "stream": true, "stream_options": {"include_usage": true},
                   "temperature": 0.0})
        );
        assert_eq!((request.max_tokens, request.ignore_eos), (Some(9), false));
        // A chat body asks by max_completion_tokens; an extra max_tokens beside it does not change the ask.
        let mut s = settings(ApiKind::Chat, true);
        s.style = BodyStyle::Vllm;
        s.logprobs = Some(2);
        s.extra_body = serde_json::from_str(r#"{"max_tokens": 9}"#).expect("a map");
        let request = prepare(&prompt, &s);
        assert_eq!(request.max_tokens, Some(4));
        assert!(body(&request).get("logprobs").is_none());
    }
}
