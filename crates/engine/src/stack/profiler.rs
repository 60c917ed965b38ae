//! The profiling window: an HTTP hook called just before the measured phase (after any warm-up) and one just after
//! it, e.g. vLLM's `POST /start_profile` and `POST /stop_profile` (`vllm/entrypoints/serve/profile/api_router.py`,
//! mounted when the server runs with `VLLM_TORCH_PROFILER_DIR` or `VLLM_TORCH_CUDA_PROFILE`; each answers 200 with an
//! empty body once the engine's profiler has started or stopped). Each call's outcome goes into run.json's
//! `profiling`; a hook that fails is warned about and recorded, never fatal: the load is what is being measured, the
//! trace is a bonus.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::engine::Clock;

/// vLLM's hooks, for `--vllm-profiler`.
pub(crate) const VLLM_START: &str = "/start_profile";
pub(crate) const VLLM_STOP: &str = "/stop_profile";

/// How long a hook may take. vLLM answers `/stop_profile` only once the torch profiler has written its trace,
/// which takes minutes for a long window; a hook that never answers still must not hang the run.
pub const HOOK_TIMEOUT: Duration = Duration::from_secs(600);

/// Why a hook could not even be named.
#[derive(Debug, thiserror::Error)]
pub enum ProfilerError {
    #[error("{flag} {value:?} is neither an http(s) URL nor a path on the endpoint: {reason}")]
    BadHook {
        flag: &'static str,
        value: String,
        reason: String,
    },
    #[error("cannot build the HTTP client for the profiler hooks: {0}")]
    Client(reqwest::Error),
}

/// The hooks of a run, as URLs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProfilerHooks {
    pub start: Option<String>,
    pub stop: Option<String>,
}

impl ProfilerHooks {
    /// `--profiler-start`, `--profiler-stop` and `--vllm-profiler` (clap keeps the last apart from the other two),
    /// resolved against the endpoint's base URL.
    pub fn resolve(
        start: Option<&str>,
        stop: Option<&str>,
        vllm: bool,
        endpoint: &str,
    ) -> Result<ProfilerHooks, ProfilerError> {
        let (start, stop) = if vllm {
            (Some(VLLM_START), Some(VLLM_STOP))
        } else {
            (start, stop)
        };
        Ok(ProfilerHooks {
            start: start
                .map(|hook| resolve_hook(hook, endpoint, "--profiler-start"))
                .transpose()?,
            stop: stop
                .map(|hook| resolve_hook(hook, endpoint, "--profiler-stop"))
                .transpose()?,
        })
    }

    pub fn is_empty(&self) -> bool {
        self.start.is_none() && self.stop.is_none()
    }
}

/// A hook as a URL: an `http://` or `https://` URL as given; anything else is a path on the endpoint's base URL
/// (`/start_profile` on `http://vllm:8000` is `http://vllm:8000/start_profile`).
pub(crate) fn resolve_hook(
    hook: &str,
    endpoint: &str,
    flag: &'static str,
) -> Result<String, ProfilerError> {
    let bad = |reason: String| ProfilerError::BadHook {
        flag,
        value: hook.to_owned(),
        reason,
    };
    let is_url = hook.starts_with("http://") || hook.starts_with("https://");
    if !is_url && hook.contains("://") {
        return Err(bad("only http and https are called".to_owned()));
    }
    if hook.trim().is_empty() {
        return Err(bad("it is empty".to_owned()));
    }
    let url = if is_url {
        hook.to_owned()
    } else {
        super::join_url(endpoint, hook)
    };
    reqwest::Url::parse(&url).map_err(|e| bad(e.to_string()))?;
    Ok(url)
}

/// One call of a hook, as run.json records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HookCall {
    pub url: String,
    /// When it was sent, in nanoseconds since the run's t0 (the records' clock).
    pub sent_ns: u64,
    pub latency_ms: f64,
    /// The HTTP status, when the hook answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Why the call failed: no answer, or an error status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// run.json's `profiling`: the window's two calls (a hook not given is absent).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProfilingMeta {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<HookCall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<HookCall>,
}

/// A client for the hooks: the requests' credentials (vLLM checks `--api-key` on every route), no redirects.
pub fn client(
    api_key: Option<&str>,
    headers: &[(String, String)],
) -> Result<reqwest::Client, ProfilerError> {
    super::client(HOOK_TIMEOUT, api_key, headers).map_err(ProfilerError::Client)
}

/// `POST url` with an empty body; warned about and recorded when it fails, never an error.
pub async fn call(client: &reqwest::Client, url: &str, clock: Clock, which: &str) -> HookCall {
    let sent = Instant::now();
    let sent_ns = clock.ns_of(sent);
    let answer = client.post(url).body(Vec::new()).send().await;
    let latency_ms = sent.elapsed().as_secs_f64() * 1e3;
    let (status, error) = match answer {
        Ok(response) => {
            let status = response.status();
            let error = (!status.is_success()).then(|| format!("HTTP {}", status.as_u16()));
            (Some(status.as_u16()), error)
        }
        Err(e) => (None, Some(super::error_chain(&e))),
    };
    match &error {
        Some(error) => tracing::warn!(
            url,
            error,
            "the profiler's {which} hook failed; the run goes on (recorded in run.json's profiling)"
        ),
        None => tracing::info!(url, latency_ms, "profiler {which} hook called"),
    }
    HookCall {
        url: url.to_owned(),
        sent_ns,
        latency_ms,
        status,
        error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_is_relative_to_the_endpoint_and_a_url_is_taken_as_given() {
        let endpoint = "http://vllm-0:8000";
        assert_eq!(
            resolve_hook("/start_profile", endpoint, "--profiler-start").expect("path"),
            "http://vllm-0:8000/start_profile"
        );
        assert_eq!(
            resolve_hook("hooks/start", "http://g:80/ns/", "--profiler-start").expect("path"),
            "http://g:80/ns/hooks/start"
        );
        assert_eq!(
            resolve_hook("https://prof:9/go", endpoint, "--profiler-start").expect("url"),
            "https://prof:9/go"
        );
    }

    #[test]
    fn a_hook_that_is_no_http_url_is_refused_naming_the_flag() {
        let err = resolve_hook("ftp://x/y", "http://e", "--profiler-stop").expect_err("ftp");
        let text = err.to_string();
        assert!(text.starts_with("--profiler-stop \"ftp://x/y\""), "{text}");
        assert!(resolve_hook("  ", "http://e", "--profiler-start").is_err());
        assert!(resolve_hook("http://[::1", "http://e", "--profiler-start").is_err());
    }

    #[test]
    fn vllm_profiler_is_start_profile_then_stop_profile_on_the_endpoint() {
        let hooks = ProfilerHooks::resolve(None, None, true, "http://127.0.0.1:8000").expect("ok");
        assert_eq!(
            hooks,
            ProfilerHooks {
                start: Some("http://127.0.0.1:8000/start_profile".to_owned()),
                stop: Some("http://127.0.0.1:8000/stop_profile".to_owned()),
            }
        );
        let only_stop =
            ProfilerHooks::resolve(None, Some("/flush"), false, "http://e:1").expect("ok");
        assert_eq!(only_stop.start, None);
        assert_eq!(only_stop.stop.as_deref(), Some("http://e:1/flush"));
        assert!(
            ProfilerHooks::resolve(None, None, false, "http://e:1")
                .expect("ok")
                .is_empty()
        );
    }

    #[tokio::test]
    async fn a_hook_that_does_not_answer_is_recorded_not_returned() {
        // A port nothing listens on: bind one, learn it, close it.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("port")
            .port();
        let url = format!("http://127.0.0.1:{port}/start_profile");
        let client = client(None, &[]).expect("client");
        let call = call(&client, &url, Clock::start(), "start").await;
        assert_eq!(call.status, None);
        assert!(
            call.error.as_deref().is_some_and(|e| !e.is_empty()),
            "{call:?}"
        );
    }

    #[tokio::test]
    async fn an_error_status_is_recorded_as_a_failure_with_its_status() {
        let sim = llmbench_sim::sim::start(llmbench_sim::sim::SimConfig {
            port: 0,
            ..llmbench_sim::sim::SimConfig::default()
        })
        .await
        .expect("sim");
        let client = client(None, &[]).expect("client");
        // The simulator has no such route: 404, as a vLLM without a profiler configured answers.
        let missing = call(
            &client,
            &format!("{}/nope", sim.base_url()),
            Clock::start(),
            "start",
        )
        .await;
        assert_eq!(missing.status, Some(404));
        assert_eq!(missing.error.as_deref(), Some("HTTP 404"));
        let ok = call(
            &client,
            &format!("{}{VLLM_START}", sim.base_url()),
            Clock::start(),
            "start",
        )
        .await;
        assert_eq!((ok.status, ok.error), (Some(200), None));
        assert_eq!(sim.profiler_calls().len(), 1);
    }
}
