//! The HTTP calls an experiment makes on the stack right before each run (vLLM's `POST /reset_prefix_cache`, as
//! llm-d-benchmark's reset_caches does). A hook that fails is recorded, never fatal: the run starts anyway.

use std::time::Duration;

use llmbench_api::v1alpha1::Hook;
use reqwest::Url;

/// How long one hook may take.
pub const HOOK_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest error kept in a record (the whole error goes to the Warning event).
const MAX_ERROR_CHARS: usize = 120;

pub use llmbench_core::experiment::v1::HookCall;

/// The URL a hook calls: a full http(s) URL as it is, anything else resolved against the stack's endpoint the
/// way a browser resolves a link (`/reset_prefix_cache` from the endpoint's root).
pub fn hook_url(url: &str, endpoint: Option<&str>) -> Result<Url, String> {
    if url.starts_with("http://") || url.starts_with("https://") {
        return Url::parse(url).map_err(|e| format!("`{url}` is not a URL: {e}"));
    }
    let endpoint = endpoint.ok_or_else(|| {
        format!(
            "`{url}` is relative, but the template's stack has no endpoint to resolve it against"
        )
    })?;
    let base = Url::parse(endpoint).map_err(|e| format!("the stack endpoint `{endpoint}`: {e}"))?;
    base.join(url)
        .map_err(|e| format!("`{url}` against `{endpoint}`: {e}"))
}

fn shorten(text: &str) -> String {
    match text.char_indices().nth(MAX_ERROR_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// Calls each hook in order, each bounded by [`HOOK_TIMEOUT`]; returns how each went and, for the ones that
/// failed, the whole error for an event.
pub async fn call_hooks(
    client: &reqwest::Client,
    hooks: &[Hook],
    endpoint: Option<&str>,
) -> Vec<(HookCall, Option<String>)> {
    let mut calls = Vec::with_capacity(hooks.len());
    for hook in hooks {
        let mut call = HookCall {
            name: hook.name.clone(),
            method: hook.method.clone(),
            url: hook.url.clone(),
            status: None,
            error: None,
        };
        let outcome = async {
            let url = hook_url(&hook.url, endpoint)?;
            call.url = url.to_string();
            let method = reqwest::Method::from_bytes(hook.method.as_bytes())
                .map_err(|_| format!("`{}` is not an HTTP method", hook.method))?;
            let response = client
                .request(method, url)
                .timeout(HOOK_TIMEOUT)
                .send()
                .await
                .map_err(|e| {
                    if e.is_timeout() {
                        format!("no answer within {}s", HOOK_TIMEOUT.as_secs())
                    } else {
                        format!("{e}")
                    }
                })?;
            Ok::<u16, String>(response.status().as_u16())
        }
        .await;
        let full_error = match outcome {
            Ok(status) => {
                call.status = Some(status);
                (!call.succeeded())
                    .then(|| format!("{} {} answered {status}", call.method, call.url))
            }
            Err(error) => {
                call.error = Some(shorten(&error));
                Some(format!("{} {}: {error}", call.method, call.url))
            }
        };
        calls.push((call, full_error));
    }
    calls
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_resolves_against_the_endpoint_root_and_a_full_url_stays() {
        let endpoint = Some("http://vllm.llm-d.svc:8000");
        assert_eq!(
            hook_url("/reset_prefix_cache", endpoint)
                .expect("url")
                .as_str(),
            "http://vllm.llm-d.svc:8000/reset_prefix_cache"
        );
        assert_eq!(
            hook_url("/reset_prefix_cache", Some("http://gw:80/v1"))
                .expect("url")
                .as_str(),
            "http://gw/reset_prefix_cache"
        );
        assert_eq!(
            hook_url("https://admin.example/flush", endpoint)
                .expect("url")
                .as_str(),
            "https://admin.example/flush"
        );
        let err = hook_url("/reset", None).expect_err("nothing to resolve against");
        assert!(err.contains("no endpoint"), "{err}");
    }

    #[test]
    fn a_record_says_the_status_or_the_error() {
        let mut call = HookCall {
            name: "reset-prefix-cache".into(),
            method: "POST".into(),
            url: "http://a/reset".into(),
            status: Some(200),
            error: None,
        };
        assert_eq!(call.record(), "reset-prefix-cache: 200");
        assert!(call.succeeded());
        call.status = None;
        call.error = Some("connection refused".into());
        assert_eq!(
            call.record(),
            "reset-prefix-cache: error: connection refused"
        );
        assert!(!call.succeeded());
        assert!(shorten(&"x".repeat(500)).chars().count() <= MAX_ERROR_CHARS + 1);
    }

    #[tokio::test]
    async fn a_hook_calls_the_stack_and_a_dead_one_is_recorded_not_fatal() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let server = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.expect("accept");
            let mut buf = vec![0u8; 4096];
            let n = socket.read(&mut buf).await.expect("read");
            let request = String::from_utf8_lossy(&buf[..n]).into_owned();
            socket
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                .await
                .expect("write");
            request
        });
        let dead = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            l.local_addr().expect("addr").port()
        };
        let hooks = vec![
            Hook {
                name: "reset".into(),
                method: "POST".into(),
                url: "/reset_prefix_cache".into(),
            },
            Hook {
                name: "dead".into(),
                method: "GET".into(),
                url: format!("http://127.0.0.1:{dead}/x"),
            },
        ];
        let client = reqwest::Client::new();
        let endpoint = format!("http://127.0.0.1:{port}");
        let calls = call_hooks(&client, &hooks, Some(&endpoint)).await;
        let request = server.await.expect("server");
        assert!(
            request.starts_with("POST /reset_prefix_cache HTTP/1.1"),
            "{request}"
        );
        assert_eq!(calls[0].0.status, Some(200));
        assert_eq!(calls[0].1, None);
        assert_eq!(calls[1].0.status, None);
        assert!(calls[1].0.error.is_some() && calls[1].1.is_some());
        assert!(calls[1].0.record().starts_with("dead: error: "));
    }
}
