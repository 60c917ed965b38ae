//! Which server a run drives: `--endpoint`, else the server the profile names, else the embedded simulator.
//!
//! A profile names its server in its own key (inference-perf `server.base_url`, guidellm `target`, vllm
//! `base-url`/`host`/`port`, MLPerf `server.base_url`). A bundled profile leaves it to the endpoint placeholder
//! `REPLACE_ENV_LLMDBENCH_HARNESS_STACK_ENDPOINT_URL`; left unset, that placeholder counts as "no server", so the
//! README's main command runs against the embedded simulator on a machine with no network. To tell the two apart
//! the profile is first rendered with [`UNSET_ENDPOINT`] in that placeholder: a server key that still holds it
//! (or no server key at all) means no server was named.

use std::fmt;

/// What the endpoint placeholder is rendered to while finding out whether the profile names a server. `.invalid`
/// is reserved (RFC 2606): it never resolves, so it can never be mistaken for a real server.
pub(crate) const UNSET_ENDPOINT: &str = "http://endpoint-unset.llmbench.invalid";

/// Where the run's server came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Server {
    /// `--endpoint`.
    Flag(String),
    /// The profile's own server key.
    Profile(String),
    /// The stack `--serve` starts: `--endpoint`, else the address its command names.
    Served(String),
    /// No endpoint anywhere: the embedded simulator (its URL is known once it listens).
    Embedded,
}

/// Why an endpoint cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum EndpointError {
    #[error("the endpoint {url:?} ({from}) is not a valid URL: {reason}")]
    Invalid {
        url: String,
        from: String,
        reason: String,
    },
    #[error(
        "the endpoint {url:?} ({from}) must be http:// or https://, found `{scheme}://`; give the server's base URL, \
         e.g. http://vllm:8000"
    )]
    Scheme {
        url: String,
        from: String,
        scheme: String,
    },
    #[error(
        "the endpoint {url:?} ({from}) names no host; give the server's base URL, e.g. http://vllm:8000"
    )]
    NoHost { url: String, from: String },
}

/// Chooses the run's server from `--endpoint` and the base URL the profile names, as parsed from the profile
/// rendered with [`UNSET_ENDPOINT`] when no `--endpoint` was given.
pub(crate) fn choose(flag: Option<&str>, profile_base_url: Option<&str>) -> Server {
    match (flag, profile_base_url) {
        (Some(url), _) => Server::Flag(url.to_owned()),
        (None, Some(url)) if !url.starts_with(UNSET_ENDPOINT) && !url.trim().is_empty() => {
            Server::Profile(url.to_owned())
        }
        (None, _) => Server::Embedded,
    }
}

/// Checks an endpoint before anything is built: a parseable http(s) URL with a host. Returns it without a trailing
/// slash, as request paths are appended to it.
pub(crate) fn validate(url: &str, from: &str) -> Result<String, EndpointError> {
    let parsed = reqwest::Url::parse(url.trim()).map_err(|e| EndpointError::Invalid {
        url: url.to_owned(),
        from: from.to_owned(),
        reason: e.to_string(),
    })?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(EndpointError::Scheme {
            url: url.to_owned(),
            from: from.to_owned(),
            scheme: parsed.scheme().to_owned(),
        });
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(EndpointError::NoHost {
            url: url.to_owned(),
            from: from.to_owned(),
        });
    }
    Ok(url.trim().trim_end_matches('/').to_owned())
}

impl fmt::Display for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Server::Flag(url) => write!(f, "{url} (--endpoint)"),
            Server::Served(url) => write!(f, "{url} (the stack --serve starts)"),
            Server::Profile(url) => write!(f, "{url} (the server the profile names)"),
            Server::Embedded => f.write_str("the embedded simulator (no endpoint given)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_wins_then_the_profile_then_the_simulator() {
        assert_eq!(
            choose(Some("http://a:1"), Some("http://b:2")),
            Server::Flag("http://a:1".into())
        );
        assert_eq!(
            choose(None, Some("http://b:2")),
            Server::Profile("http://b:2".into())
        );
        assert_eq!(choose(None, None), Server::Embedded);
    }

    #[test]
    fn an_unset_endpoint_placeholder_counts_as_no_server() {
        assert_eq!(choose(None, Some(UNSET_ENDPOINT)), Server::Embedded);
        // A profile that appends a path to the placeholder still names no server.
        assert_eq!(
            choose(None, Some(&format!("{UNSET_ENDPOINT}/v1"))),
            Server::Embedded
        );
    }

    #[test]
    fn endpoints_are_checked_for_scheme_and_host() {
        assert_eq!(
            validate("http://vllm:8000/", "--endpoint").expect("valid"),
            "http://vllm:8000"
        );
        validate("https://x.example/v1", "--endpoint").expect("https");
        let err = validate("vllm:8000", "--endpoint").expect_err("no scheme");
        assert!(err.to_string().contains("http:// or https://"), "{err}");
        let err = validate("localhost", "--endpoint").expect_err("relative");
        assert!(err.to_string().contains("not a valid URL"), "{err}");
        let err = validate("ftp://x", "server.base_url").expect_err("ftp");
        assert!(err.to_string().contains("server.base_url"), "{err}");
        let err = validate("http://", "--endpoint").expect_err("no host");
        assert!(err.to_string().contains("--endpoint"), "{err}");
    }
}
