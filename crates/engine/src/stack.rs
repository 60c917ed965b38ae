//! The stack under test: how it was started (`--stack-info`, written by the operator, or `--serve`, which starts it
//! here), and what the server says it is before the run ([`identity`]: engine, version, models, settings, asked of
//! every server). The records go into run.json's `stack` and `server`, the llm-d report's `scenario.stack` and, in
//! brief ([`EngineInfo`]), the compact summary and a BenchmarkRun's status.
//!
//! Nothing here is fatal to a run once it has started: a probe that fails is recorded with its error, because a
//! stack behind a gateway or an engine without `/version` is still worth measuring.

pub mod identity;
pub mod profiler;
pub mod serve;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub use llmbench_core::stack_info::{StackInfo, StackInfoError};
pub use llmbench_core::summary::v1::EngineInfo;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How long each probe of the stack may take before it is recorded as failed: long enough for a loaded server's
/// event loop, short enough not to delay a run whose stack does not answer at all.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// What an env value whose name looks like a secret is recorded as.
pub(crate) const REDACTED: &str = "<redacted>";

/// The parts of an environment variable's name that mark its value as a secret (compared upper-case): HF_TOKEN,
/// OPENAI_API_KEY, AWS_SECRET_ACCESS_KEY, …; results directories are shared, credentials must not travel with them.
const SECRET_NAME_PARTS: [&str; 6] = ["TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL"];

/// Why the stack's record could not be read.
#[derive(Debug, thiserror::Error)]
pub enum StackError {
    #[error("cannot read the stack info {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Parse {
        path: PathBuf,
        source: StackInfoError,
    },
}

/// Reads and checks `--stack-info FILE`.
pub fn read_stack_info(path: &Path) -> Result<StackInfo, StackError> {
    let text = std::fs::read_to_string(path).map_err(|source| StackError::Read {
        path: path.to_owned(),
        source,
    })?;
    parse_stack_info(path, &text)
}

/// Parses a stack-info record; `path` names it in the error (serde_json's error carries the line and column).
pub(crate) fn parse_stack_info(path: &Path, text: &str) -> Result<StackInfo, StackError> {
    StackInfo::parse(text).map_err(|source| StackError::Parse {
        path: path.to_owned(),
        source,
    })
}

/// Whether an environment variable's name marks its value as a secret.
pub(crate) fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_NAME_PARTS.iter().any(|part| upper.contains(part))
}

/// `env` as run.json records it: every name, and the value of each one that does not look like a secret.
pub(crate) fn redact_env(env: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    env.iter()
        .map(|(name, value)| {
            let value = if is_secret_name(name) {
                REDACTED.to_owned()
            } else {
                value.clone()
            };
            (name.clone(), value)
        })
        .collect()
}

/// Where the stack's record came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StackSource {
    /// `--stack-info`: whoever started the stack (the operator) described it.
    StackInfo,
    /// `--serve`: this launcher started the stack itself.
    Serve,
}

/// One probe of the stack before the run: what it answered, or why it did not.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Probe {
    pub url: String,
    /// The HTTP status, when the stack answered at all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// The answer as JSON, when it was JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<Value>,
    /// Why the probe failed: no answer, an error status, not JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub latency_ms: f64,
}

/// How a stack this launcher started and watched (`--serve`) failed during the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StackFailure {
    /// What happened, e.g. `the stack exited (exit status: 1)` or `3 consecutive health checks failed`.
    pub reason: String,
    /// The process's exit status, when it exited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_status: Option<String>,
    /// The last lines the stack wrote (stdout and stderr interleaved; stack.log has them all).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub log_tail: Vec<String>,
}

/// run.json's `stack`: how the stack under test was started, what it answered before the run, and, for a stack
/// this launcher watched, how it failed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StackMeta {
    pub source: StackSource,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    #[serde(default)]
    pub command: Vec<String>,
    #[serde(default)]
    pub args: Vec<String>,
    /// The environment as given, secret-looking values replaced by [`REDACTED`].
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// `GET /v1/models`, its answer kept raw.
    pub models: Probe,
    /// The engine's version from `GET /version` (`{"version": "…"}`), when it answered one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    pub version_probe: Probe,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<StackFailure>,
}

/// The stack as the launcher was told it, before it is probed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StackSpec {
    pub source: StackSource,
    /// With its env already redacted.
    pub info: StackInfo,
}

impl StackSpec {
    /// A spec whose env is redacted, whatever `info` carried.
    pub fn new(source: StackSource, mut info: StackInfo) -> StackSpec {
        info.env = redact_env(&info.env);
        StackSpec { source, info }
    }

    /// The record run.json carries, with the probes' outcomes.
    pub fn meta(&self, models: Probe, version_probe: Probe) -> StackMeta {
        StackMeta {
            source: self.source,
            image: self.info.image.clone(),
            command: self.info.command.clone(),
            args: self.info.args.clone(),
            env: self.info.env.clone(),
            version: version_of(&version_probe),
            models,
            version_probe,
            failure: None,
        }
    }
}

impl StackMeta {
    /// The first model id of the `/v1/models` answer (`{"data": [{"id": …}, …]}`, OpenAI's list form).
    pub fn model(&self) -> Option<String> {
        first_model_id(self.models.body.as_ref()?)
    }
}

/// The first `data[].id` of an OpenAI model list.
pub(crate) fn first_model_id(models: &Value) -> Option<String> {
    models
        .get("data")?
        .as_array()?
        .first()?
        .get("id")?
        .as_str()
        .map(str::to_owned)
}

/// The version a `/version` answer carries: vLLM's `{"version": "0.11.0"}`.
fn version_of(probe: &Probe) -> Option<String> {
    if probe.error.is_some() {
        return None;
    }
    probe
        .body
        .as_ref()?
        .get("version")?
        .as_str()
        .map(str::to_owned)
}

/// `base` joined with an absolute `path`, without doubling the slash between them.
pub fn join_url(base: &str, path: &str) -> String {
    format!(
        "{}/{}",
        base.trim_end_matches('/'),
        path.trim_start_matches('/')
    )
}

/// A small client for the probes and hooks: its own timeout, the requests' credentials and headers (a stack behind
/// authentication answers `/v1/models` only with them), no redirects followed.
pub fn client(
    timeout: Duration,
    api_key: Option<&str>,
    headers: &[(String, String)],
) -> Result<reqwest::Client, reqwest::Error> {
    let mut map = reqwest::header::HeaderMap::new();
    let pairs = api_key
        .map(|key| ("Authorization".to_owned(), format!("Bearer {key}")))
        .into_iter()
        .chain(headers.iter().cloned());
    for (name, value) in pairs {
        // A header the profile names that HTTP cannot carry is left to the request path, which reports it.
        if let (Ok(name), Ok(value)) = (
            reqwest::header::HeaderName::try_from(name.as_str()),
            reqwest::header::HeaderValue::try_from(value.as_str()),
        ) {
            map.insert(name, value);
        }
    }
    reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(timeout)
        .default_headers(map)
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("llmbench/", env!("CARGO_PKG_VERSION")))
        .build()
}

/// How many times [`probe`] tries to connect.
pub(crate) const PROBE_ATTEMPTS: u32 = 3;

/// `GET url`, recorded whatever happens: an error status or a body that is not JSON is an error, with the body
/// kept when it parsed.
///
/// A connection that fails before any answer is tried again, up to [`PROBE_ATTEMPTS`] times a second apart: a
/// Service's endpoints can lag its pod's readiness by a moment, and the record should say what the stack serves,
/// not that the first connection came too early.
pub async fn probe(client: &reqwest::Client, url: &str) -> Probe {
    let started = Instant::now();
    let mut attempt = 1;
    let answer = loop {
        let answer = async {
            let response = client.get(url).send().await?;
            let status = response.status();
            let bytes = response.bytes().await?;
            Ok::<_, reqwest::Error>((status, bytes))
        }
        .await;
        match answer {
            Err(e) if e.is_connect() && attempt < PROBE_ATTEMPTS => {
                attempt += 1;
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            }
            answer => break answer,
        }
    };
    let latency_ms = started.elapsed().as_secs_f64() * 1e3;
    match answer {
        Ok((status, bytes)) => {
            let body = serde_json::from_slice::<Value>(&bytes);
            let error = if !status.is_success() {
                Some(format!("HTTP {}", status.as_u16()))
            } else {
                body.as_ref().err().map(|e| format!("not JSON: {e}"))
            };
            Probe {
                url: url.to_owned(),
                status: Some(status.as_u16()),
                body: body.ok(),
                error,
                latency_ms,
            }
        }
        Err(e) => Probe {
            url: url.to_owned(),
            status: None,
            body: None,
            error: Some(error_chain(&e)),
            latency_ms,
        },
    }
}

/// An error with its causes, as one line (reqwest's own message leaves out the connection error below it).
pub fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Service whose endpoints lag its pod: nothing listens at the first attempt, the server comes up a
    /// moment later, and the probe records its answer rather than the early refusal.
    #[tokio::test]
    async fn a_probe_tries_again_when_the_first_connection_is_refused() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        drop(listener);
        let server = tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(600)).await;
            let listener = tokio::net::TcpListener::bind(addr).await.expect("rebind");
            let (mut socket, _) = listener.accept().await.expect("accept");
            let mut buf = [0u8; 1024];
            let _ = tokio::io::AsyncReadExt::read(&mut socket, &mut buf).await;
            let body = r#"{"data":[{"id":"m"}]}"#;
            let answer = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            tokio::io::AsyncWriteExt::write_all(&mut socket, answer.as_bytes())
                .await
                .expect("answer");
        });
        let client = reqwest::Client::new();
        let probe = probe(&client, &format!("http://{addr}/v1/models")).await;
        assert_eq!(probe.status, Some(200), "{probe:?}");
        assert_eq!(probe.error, None);
        server.await.expect("server");
        // Nothing ever listening: every attempt refused, the error recorded.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let closed = listener.local_addr().expect("addr");
        drop(listener);
        let probe = super::probe(&client, &format!("http://{closed}/v1/models")).await;
        assert_eq!(probe.status, None);
        assert!(probe.error.is_some());
    }

    #[test]
    fn a_stack_info_record_parses_with_every_field_optional() {
        let path = Path::new("/etc/llmbench/profile/stack-info.json");
        let full = parse_stack_info(
            path,
            r#"{"image": "vllm/vllm-openai:v0.11.0", "command": ["vllm", "serve"], "args": ["m", "--max-model-len", "4096"], "env": {"VLLM_LOGGING_LEVEL": "DEBUG"}}"#,
        )
        .expect("parses");
        assert_eq!(full.image.as_deref(), Some("vllm/vllm-openai:v0.11.0"));
        assert_eq!(full.args, ["m", "--max-model-len", "4096"]);
        assert_eq!(full.env["VLLM_LOGGING_LEVEL"], "DEBUG");
        assert_eq!(
            parse_stack_info(path, "{}").expect("parses"),
            StackInfo::default()
        );
    }

    #[test]
    fn a_bad_stack_info_record_is_refused_naming_the_file_the_key_and_the_line() {
        let path = Path::new("/tmp/stack-info.json");
        let err = parse_stack_info(path, "{\n  \"image\": \"x\",\n  \"cmd\": [\"vllm\"]\n}")
            .expect_err("unknown key");
        let text = err.to_string();
        assert!(text.starts_with("/tmp/stack-info.json: "), "{text}");
        assert!(text.contains("`cmd`") && text.contains("line 3"), "{text}");
        let err = parse_stack_info(path, r#"{"command": "vllm serve"}"#).expect_err("a string");
        assert!(err.to_string().contains("expected a sequence"), "{err}");
        let err = read_stack_info(Path::new("/nonexistent/stack-info.json")).expect_err("missing");
        assert!(
            err.to_string()
                .starts_with("cannot read the stack info /nonexistent/stack-info.json"),
            "{err}"
        );
    }

    #[test]
    fn secret_looking_env_values_are_never_recorded() {
        let env: BTreeMap<String, String> = [
            ("HF_TOKEN", "hf_abc"),
            ("OPENAI_API_KEY", "sk-1"),
            ("aws_secret_access_key", "s"),
            ("DB_PASSWORD", "p"),
            ("GOOGLE_APPLICATION_CREDENTIALS", "/k.json"),
            ("VLLM_LOGGING_LEVEL", "DEBUG"),
            ("CUDA_VISIBLE_DEVICES", "0,1"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let redacted = redact_env(&env);
        assert_eq!(redacted.len(), env.len(), "every name stays");
        for secret in [
            "HF_TOKEN",
            "OPENAI_API_KEY",
            "aws_secret_access_key",
            "DB_PASSWORD",
            "GOOGLE_APPLICATION_CREDENTIALS",
        ] {
            assert_eq!(redacted[secret], REDACTED, "{secret}");
        }
        assert_eq!(redacted["VLLM_LOGGING_LEVEL"], "DEBUG");
        assert_eq!(redacted["CUDA_VISIBLE_DEVICES"], "0,1");
        // A spec redacts whatever it is given.
        let spec = StackSpec::new(
            StackSource::StackInfo,
            StackInfo {
                env,
                ..StackInfo::default()
            },
        );
        assert_eq!(spec.info.env["HF_TOKEN"], REDACTED);
    }

    fn answered(url: &str, body: Value) -> Probe {
        Probe {
            url: url.to_owned(),
            status: Some(200),
            body: Some(body),
            error: None,
            latency_ms: 1.0,
        }
    }

    #[test]
    fn the_engine_in_brief_takes_the_first_model_and_the_whole_command_line() {
        let spec = StackSpec::new(
            StackSource::Serve,
            StackInfo {
                schema: None,
                image: None,
                command: vec!["vllm".to_owned()],
                args: vec!["serve".to_owned(), "Qwen/Qwen3-0.6B".to_owned()],
                env: BTreeMap::new(),
            },
        );
        let meta = spec.meta(
            answered(
                "http://s/v1/models",
                serde_json::json!({"object": "list", "data": [{"id": "Qwen/Qwen3-0.6B"}, {"id": "lora-1"}]}),
            ),
            answered("http://s/version", serde_json::json!({"version": "0.11.0"})),
        );
        assert_eq!(
            identity::engine_in_brief(None, Some(&meta), None),
            Some(EngineInfo {
                name: None,
                image: None,
                command: vec!["vllm".into(), "serve".into(), "Qwen/Qwen3-0.6B".into()],
                model: Some("Qwen/Qwen3-0.6B".to_owned()),
                version: Some("0.11.0".to_owned()),
            })
        );
    }

    #[test]
    fn a_version_is_read_only_from_a_successful_json_answer() {
        let spec = StackSpec::new(StackSource::StackInfo, StackInfo::default());
        let mut not_found = answered(
            "http://s/version",
            serde_json::json!({"detail": "Not Found"}),
        );
        not_found.status = Some(404);
        not_found.error = Some("HTTP 404".to_owned());
        let meta = spec.meta(not_found.clone(), not_found);
        assert_eq!((meta.version.clone(), meta.model()), (None, None));
        let meta = spec.meta(
            answered("http://s/v1/models", serde_json::json!({"data": []})),
            answered("http://s/version", serde_json::json!({"version": 3})),
        );
        assert_eq!((meta.version.clone(), meta.model()), (None, None));
    }

    #[test]
    fn urls_are_joined_with_one_slash() {
        assert_eq!(
            join_url("http://h:8000", "/version"),
            "http://h:8000/version"
        );
        assert_eq!(
            join_url("http://h:8000/", "/v1/models"),
            "http://h:8000/v1/models"
        );
        assert_eq!(
            join_url("http://g/ns/m", "start_profile"),
            "http://g/ns/m/start_profile"
        );
    }
}
