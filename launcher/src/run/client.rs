//! The run's HTTP client: llmbench's own HTTP/1.1 client for plain `http://`, reqwest for TLS and proxies.

use llmbench_engine::engine::client::key_headers;
use llmbench_engine::engine::{Transport, http1::Http1Endpoint};
use llmbench_workload::workload::ApiKind;

use super::RunError;

/// The run's HTTP client. Plain `http://` goes through the engine's own HTTP/1.1 client unless a proxy is
/// configured; TLS and proxies through reqwest. Either way one pool for the run, sized so a run with thousands of
/// concurrent streams never queues inside the client, with Nagle off so small requests go out at once. Neither
/// follows redirects: a 3xx is the server's answer, recorded as a failed request, as our own client records it.
pub(super) fn transport(
    url: &str,
    api: ApiKind,
    api_key: Option<&str>,
    headers: &[(String, String)],
    max_concurrency: Option<u32>,
) -> Result<Transport, RunError> {
    let idle = max_concurrency.map_or(1024, |c| c as usize).max(64);
    if url.starts_with("http://") && !proxy_configured() {
        let mut headers = headers.to_vec();
        if let Some(key) = api_key {
            headers.extend(key_headers(api, key));
        }
        let endpoint = Http1Endpoint::new(url, &headers, idle)?;
        return Ok(Transport::Http1(endpoint));
    }
    reqwest::Client::builder()
        .pool_max_idle_per_host(idle)
        .tcp_nodelay(true)
        .http1_only()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map(Transport::Reqwest)
        .map_err(RunError::Client)
}

/// Whether the environment names an HTTP proxy, which reqwest honours (with NO_PROXY) and our client does not.
fn proxy_configured() -> bool {
    ["http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"]
        .iter()
        .any(|name| std::env::var_os(name).is_some_and(|value| !value.is_empty()))
}
