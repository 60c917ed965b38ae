//! The API key a run sends as `Authorization: Bearer KEY`: `--api-key`, else the profile's own key (inference-perf
//! `server.api_key`, guidellm `backend.api_key`), else `OPENAI_API_KEY`, which `vllm bench serve` reads the same way
//! (`endpoint_request_func.py`: the header only when the variable is set and not empty).
//!
//! The key is a credential: it travels in requests only. run.json records where it came from, never the key, and
//! [`ApiKey`]'s `Debug` does not show it, so no log or file of the results can hold it.

use std::fmt;
use std::str::FromStr;

use llmbench_workload::workload::Api;

/// The environment variable `vllm bench serve` (and the OpenAI clients) read the key from.
pub(crate) const API_KEY_ENV: &str = "OPENAI_API_KEY";

/// A key given with `--api-key`.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// The key itself, for the request header.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

impl FromStr for ApiKey {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if text.is_empty() {
            return Err("the key is empty (leave --api-key out to send none)".to_owned());
        }
        Ok(ApiKey(text.to_owned()))
    }
}

/// Where the key a run sends came from; run.json records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeySource {
    Flag,
    Profile,
    Environment,
}

impl KeySource {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            KeySource::Flag => "--api-key",
            KeySource::Profile => "profile",
            KeySource::Environment => API_KEY_ENV,
        }
    }
}

/// `api` with the key the run sends, and where it came from (`None`: no key at all). `environment` is the value
/// of [`API_KEY_ENV`], passed in so the choice stays testable.
pub(crate) fn with_key(
    api: &Api,
    flag: Option<&ApiKey>,
    environment: Option<String>,
) -> (Api, Option<KeySource>) {
    let mut api = api.clone();
    let source = match (flag, &api.api_key) {
        (Some(key), _) => {
            api.api_key = Some(key.expose().to_owned());
            Some(KeySource::Flag)
        }
        (None, Some(_)) => Some(KeySource::Profile),
        (None, None) => match environment.filter(|key| !key.is_empty()) {
            Some(key) => {
                api.api_key = Some(key);
                Some(KeySource::Environment)
            }
            None => None,
        },
    };
    (api, source)
}

/// [`API_KEY_ENV`] from this process's environment.
pub(crate) fn from_environment() -> Option<String> {
    std::env::var(API_KEY_ENV).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(key: Option<&str>) -> Api {
        Api {
            api_key: key.map(str::to_owned),
            ..Api::default()
        }
    }

    #[test]
    fn the_flag_beats_the_profile_which_beats_the_environment() {
        let flag: ApiKey = "from-flag".parse().expect("a key");
        let env = || Some("from-env".to_owned());
        let (sent, source) = with_key(&api(Some("from-profile")), Some(&flag), env());
        assert_eq!(
            (sent.api_key.as_deref(), source),
            (Some("from-flag"), Some(KeySource::Flag))
        );
        let (sent, source) = with_key(&api(Some("from-profile")), None, env());
        assert_eq!(
            (sent.api_key.as_deref(), source),
            (Some("from-profile"), Some(KeySource::Profile))
        );
        let (sent, source) = with_key(&api(None), None, env());
        assert_eq!(
            (sent.api_key.as_deref(), source),
            (Some("from-env"), Some(KeySource::Environment))
        );
    }

    #[test]
    fn an_empty_environment_variable_sends_no_key_as_vllm_bench_does() {
        let (sent, source) = with_key(&api(None), None, Some(String::new()));
        assert_eq!((sent.api_key, source), (None, None));
    }

    #[test]
    fn the_key_never_shows_in_debug_output() {
        let key: ApiKey = "sk-very-secret".parse().expect("a key");
        assert!(!format!("{key:?}").contains("very-secret"));
        assert!("".parse::<ApiKey>().is_err());
    }
}
