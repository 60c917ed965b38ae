//! A tokenizer's chat template, rendered as Hugging Face's `apply_chat_template(messages,
//! add_generation_prompt=True, tokenize=False)` renders it (`transformers/utils/chat_template_utils.py`): Jinja
//! with `trim_blocks` and `lstrip_blocks`, the loop-controls extension, `raise_exception`, Python's string and
//! dict methods (minijinja-contrib's pycompat), and the tokenizer's special tokens (`bos_token`, `eos_token`, …)
//! beside `messages` and `add_generation_prompt` in the context.
//!
//! The template is the directory's `chat_template.jinja` when there is one (transformers prefers it), else
//! `tokenizer_config.json`'s `chat_template` (a text, or a list of named templates of which `default` is used).
//! Rendered once per prompt before the clock starts.

use std::path::{Path, PathBuf};

use minijinja::{Environment, Error, ErrorKind, Value};
use serde_json::Map;

/// The special tokens of `tokenizer_config.json` that transformers passes to every template
/// (`special_tokens_map`).
const SPECIAL_TOKENS: [&str; 7] = [
    "bos_token",
    "eos_token",
    "unk_token",
    "sep_token",
    "pad_token",
    "cls_token",
    "mask_token",
];

const TEMPLATE_NAME: &str = "chat_template";

#[derive(Debug, thiserror::Error)]
pub enum ChatTemplateError {
    #[error("cannot read the chat template {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Config { path: PathBuf, message: String },
    #[error("the chat template of {origin} does not compile: {message}")]
    Compile { origin: PathBuf, message: String },
    #[error("the chat template of {origin} failed to render a prompt: {message}")]
    Render { origin: PathBuf, message: String },
}

/// A compiled chat template with the special tokens its tokenizer gives it.
pub struct ChatTemplate {
    env: Environment<'static>,
    special_tokens: Map<String, serde_json::Value>,
    origin: PathBuf,
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTemplate")
            .field("origin", &self.origin)
            .finish_non_exhaustive()
    }
}

impl ChatTemplate {
    /// The chat template of the tokenizer in `dir` (beside its `tokenizer.json`); `None` when it has none.
    pub fn beside(dir: &Path) -> Result<Option<ChatTemplate>, ChatTemplateError> {
        let config_path = dir.join("tokenizer_config.json");
        let config: Map<String, serde_json::Value> = match std::fs::read(&config_path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| ChatTemplateError::Config {
                path: config_path.clone(),
                message: format!("not a JSON object: {e}"),
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Map::new(),
            Err(source) => {
                return Err(ChatTemplateError::Read {
                    path: config_path,
                    source,
                });
            }
        };
        let jinja_path = dir.join("chat_template.jinja");
        let (source, origin) = match std::fs::read_to_string(&jinja_path) {
            Ok(source) => (source, jinja_path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                match template_in_config(&config, &config_path)? {
                    Some(source) => (source, config_path),
                    None => return Ok(None),
                }
            }
            Err(source) => {
                return Err(ChatTemplateError::Read {
                    path: jinja_path,
                    source,
                });
            }
        };
        let special_tokens = SPECIAL_TOKENS
            .iter()
            .filter_map(|name| {
                token_text(config.get(*name)?)
                    .map(|text| ((*name).to_owned(), serde_json::Value::String(text)))
            })
            .collect();
        Self::new(source, special_tokens, origin).map(Some)
    }

    /// `source` compiled as transformers compiles it; `origin` names it in messages.
    pub fn new(
        source: String,
        special_tokens: Map<String, serde_json::Value>,
        origin: PathBuf,
    ) -> Result<ChatTemplate, ChatTemplateError> {
        let compile = |e: Error| ChatTemplateError::Compile {
            origin: origin.clone(),
            message: describe(&e),
        };
        let mut env = Environment::new();
        env.set_syntax(
            minijinja::syntax::SyntaxConfig::builder()
                .trim_blocks(true)
                .lstrip_blocks(true)
                .build()
                .map_err(compile)?,
        );
        minijinja_contrib::add_to_environment(&mut env);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function(
            "raise_exception",
            |message: String| -> Result<Value, Error> {
                Err(Error::new(ErrorKind::InvalidOperation, message))
            },
        );
        env.add_template_owned(TEMPLATE_NAME, source)
            .map_err(compile)?;
        Ok(ChatTemplate {
            env,
            special_tokens,
            origin,
        })
    }

    /// One user turn `content` rendered with the generation prompt, `kwargs` (vLLM's `--chat-template-kwargs`)
    /// added to the context over the special tokens.
    pub fn render_user(
        &self,
        content: &str,
        kwargs: &Map<String, serde_json::Value>,
    ) -> Result<String, ChatTemplateError> {
        let mut context = self.special_tokens.clone();
        context.insert(
            "messages".to_owned(),
            serde_json::json!([{"role": "user", "content": content}]),
        );
        context.insert(
            "add_generation_prompt".to_owned(),
            serde_json::Value::Bool(true),
        );
        for (key, value) in kwargs {
            context.insert(key.clone(), value.clone());
        }
        let render = |e: Error| ChatTemplateError::Render {
            origin: self.origin.clone(),
            message: describe(&e),
        };
        self.env
            .get_template(TEMPLATE_NAME)
            .map_err(render)?
            .render(minijinja::value::Serde(&context))
            .map_err(render)
    }
}

/// `chat_template` of a tokenizer config: a text, or a list of `{name, template}` of which transformers renders
/// `default`.
fn template_in_config(
    config: &Map<String, serde_json::Value>,
    path: &Path,
) -> Result<Option<String>, ChatTemplateError> {
    match config.get("chat_template") {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::String(source)) => Ok(Some(source.clone())),
        Some(serde_json::Value::Array(named)) => named
            .iter()
            .find(|t| t.get("name").and_then(serde_json::Value::as_str) == Some("default"))
            .and_then(|t| t.get("template").and_then(serde_json::Value::as_str))
            .map(|source| Some(source.to_owned()))
            .ok_or_else(|| ChatTemplateError::Config {
                path: path.to_owned(),
                message: "`chat_template` lists named templates but none named `default`, which is the one \
                          rendered without a template name"
                    .to_owned(),
            }),
        Some(_) => Err(ChatTemplateError::Config {
            path: path.to_owned(),
            message: "`chat_template` is neither a text nor a list of named templates".to_owned(),
        }),
    }
}

/// A special token as tokenizer configs write it: its text, or an `AddedToken` object with its `content`.
fn token_text(value: &serde_json::Value) -> Option<String> {
    match value {
        serde_json::Value::String(text) => Some(text.clone()),
        serde_json::Value::Object(token) => token
            .get("content")
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned),
        _ => None,
    }
}

/// A template error with the line it points at.
fn describe(e: &Error) -> String {
    match e.line() {
        Some(line) => format!(
            "{} (template line {line})",
            e.detail().unwrap_or(&e.to_string())
        ),
        None => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// meta-llama/Meta-Llama-3-8B-Instruct's `chat_template` (as distilabel's `MAGPIE_TEMPLATES` and TGI's tests
    /// quote it): the BOS token from the context, the `trim` filter, and the generation prompt.
    const LLAMA3: &str = "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = \
        '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + \
        '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}\
        {% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}";

    /// A Qwen2.5-style ChatML template (its tools branch left out): a default system turn, Python's `strip()`,
    /// and `{%-`/`{{-` whitespace control over indented lines.
    const CHATML: &str = "{%- if messages[0]['role'] == 'system' %}\n    {{- '<|im_start|>system\\n' + \
        messages[0]['content'] + '<|im_end|>\\n' }}\n{%- else %}\n    {{- '<|im_start|>system\\nYou are a helpful \
        assistant.<|im_end|>\\n' }}\n{%- endif %}\n{%- for message in messages %}\n    {%- if message.role != \
        'system' %}\n        {{- '<|im_start|>' + message.role + '\\n' + message.content.strip() + '<|im_end|>' + \
        '\\n' }}\n    {%- endif %}\n{%- endfor %}\n{%- if add_generation_prompt %}\n    {{- \
        '<|im_start|>assistant\\n' }}\n{%- endif %}\n";

    fn write_config(dir: &Path, template: &str) {
        let config = serde_json::json!({
            "bos_token": {"__type": "AddedToken", "content": "<|begin_of_text|>"},
            "eos_token": "<|eot_id|>",
            "chat_template": template,
        });
        std::fs::write(dir.join("tokenizer_config.json"), config.to_string()).expect("write");
    }

    #[test]
    fn a_llama3_template_renders_the_bos_token_and_the_generation_prompt() {
        let dir = tempfile::tempdir().expect("tempdir");
        write_config(dir.path(), LLAMA3);
        let template = ChatTemplate::beside(dir.path())
            .expect("reads")
            .expect("has one");
        assert_eq!(
            template
                .render_user("  Hello there ", &Map::new())
                .expect("renders"),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHello there<|eot_id|>\
             <|start_header_id|>assistant<|end_header_id|>\n\n"
        );
    }

    #[test]
    fn a_chatml_template_renders_with_python_string_methods_and_a_default_system_turn() {
        let dir = tempfile::tempdir().expect("tempdir");
        write_config(dir.path(), CHATML);
        let template = ChatTemplate::beside(dir.path())
            .expect("reads")
            .expect("has one");
        assert_eq!(
            template.render_user(" Hi ", &Map::new()).expect("renders"),
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n\
             <|im_start|>assistant\n"
        );
    }

    #[test]
    fn a_chat_template_jinja_file_wins_and_kwargs_reach_the_template() {
        let dir = tempfile::tempdir().expect("tempdir");
        write_config(dir.path(), LLAMA3);
        std::fs::write(
            dir.path().join("chat_template.jinja"),
            "{% if thinking %}T:{% endif %}{{ messages[0].content }}{% if add_generation_prompt %}>{% endif %}",
        )
        .expect("write");
        let template = ChatTemplate::beside(dir.path())
            .expect("reads")
            .expect("has one");
        let kwargs: Map<String, serde_json::Value> =
            serde_json::from_str(r#"{"thinking": true}"#).expect("map");
        assert_eq!(template.render_user("q", &kwargs).expect("renders"), "T:q>");
        assert_eq!(
            template.render_user("q", &Map::new()).expect("renders"),
            "q>"
        );
    }

    #[test]
    fn no_template_is_none_and_a_raised_exception_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(ChatTemplate::beside(dir.path()).expect("reads").is_none());
        std::fs::write(
            dir.path().join("tokenizer_config.json"),
            r#"{"eos_token": "</s>"}"#,
        )
        .expect("write");
        assert!(ChatTemplate::beside(dir.path()).expect("reads").is_none());
        write_config(
            dir.path(),
            "{% if messages[0].role == 'user' %}{{ raise_exception('Conversation roles must alternate') }}{% endif %}",
        );
        let template = ChatTemplate::beside(dir.path())
            .expect("reads")
            .expect("has one");
        let e = template
            .render_user("q", &Map::new())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("tokenizer_config.json") && e.contains("Conversation roles must alternate"),
            "{e}"
        );
    }
}
