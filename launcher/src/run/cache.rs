//! The run's side of the server's prefix cache: the engine reset `--reset-prefix-cache` makes before the clock
//! starts, and the fresh prompts each stage of a run draws for itself.
//!
//! # The reset
//!
//! Each engine resets its cache its own way, and none says which it is on the endpoint the run uses, so the
//! endpoints are tried in a fixed order and the first that answers is the engine (run.json records every call):
//!
//! 1. `POST /reset_prefix_cache` — vLLM (`vllm/entrypoints/serve/dev`, mounted only with `VLLM_SERVER_DEV_MODE=1`)
//!    and the embedded simulator;
//! 2. `POST /flush_cache` — SGLang (`http_server.py`; 400 while requests are running);
//! 3. `GET /slots`, then `POST /slots/{id}?action=erase` for every slot — llama.cpp's server
//!    (`tools/server`: slot actions answer 501 unless the server runs with `--slot-save-path`, and `/slots`
//!    answers 501 with `--no-slots`). Erasing a slot empties its KV cells, but not llama.cpp's host-memory prompt
//!    cache (`--cache-ram`, 8 GiB by default), which keeps copies of idle slots and has no endpoint to clear it:
//!    the record says so.
//!
//! An endpoint that answers 404 or 405 is not that engine's; any other answer from the engine found fails the run
//! before anything is timed, saying what to change. No endpoint at all is refused by name.

use std::sync::Arc;
use std::time::Duration;

use llmbench_engine::engine::{
    PlannerError, PreparedRequest, Requests, Stage, StagePlan, StageRequests,
};
use llmbench_report::report::{CacheReset, ResetCall};
use llmbench_text::tokenizer::Tokenizer;
use llmbench_workload::prompts::{build_prompts, stage_prompt_seed};
use llmbench_workload::request::{BodySettings, prepare_all};
use llmbench_workload::workload::{Api, Workload};

/// How long one reset call may take: llama.cpp defers a slot's erase until the slot is idle.
const RESET_TIMEOUT: Duration = Duration::from_secs(60);

/// What llama.cpp's slot erase leaves behind.
const LLAMA_CPP_RAM_CACHE: &str = "llama.cpp keeps copies of idle slots in its host-memory prompt cache \
     (--cache-ram, on by default), which a slot erase does not clear and no endpoint clears: start llama-server \
     with --cache-ram 0 for a reset that leaves nothing cached";

/// Why the server's prefix cache could not be reset: the run stops before anything is timed.
#[derive(Debug, thiserror::Error)]
pub enum CacheResetError {
    #[error(
        "--reset-prefix-cache: {endpoint} has no prefix-cache reset llmbench knows ({tried})\n  help: vLLM mounts \
         POST /reset_prefix_cache only when started with VLLM_SERVER_DEV_MODE=1; SGLang answers POST /flush_cache; \
         llama.cpp's server erases its slots when started with --slot-save-path DIR. Without any, drop \
         --reset-prefix-cache: the run's prompts are still new to the server unless the profile pins them"
    )]
    NoEndpoint { endpoint: String, tried: String },
    #[error("--reset-prefix-cache: {engine} answered {call}{body}\n  help: {help}")]
    Refused {
        engine: &'static str,
        call: ResetCall,
        body: String,
        help: &'static str,
    },
    #[error("--reset-prefix-cache: {method} {url}: {source}")]
    Request {
        method: &'static str,
        url: String,
        source: reqwest::Error,
    },
    #[error(
        "--reset-prefix-cache: {url} answered 200 but not with llama.cpp's list of slots ({problem}); the server \
         is no engine llmbench can reset"
    )]
    Slots { url: String, problem: String },
    #[error("--reset-prefix-cache: cannot build the HTTP client: {0}")]
    Client(reqwest::Error),
}

/// Resets the prefix cache of the engine at `endpoint`, with `api`'s key and headers.
pub(crate) async fn reset_prefix_cache(
    endpoint: &str,
    api: &Api,
) -> Result<CacheReset, CacheResetError> {
    let reset = Resetter::new(endpoint, api)?;
    reset.run().await
}

/// One reset in progress: the client, and every call made so far.
struct Resetter {
    client: reqwest::Client,
    base: String,
    calls: std::sync::Mutex<Vec<ResetCall>>,
}

/// A call's answer: its status and body.
struct Answer {
    call: ResetCall,
    body: String,
}

impl Answer {
    fn success(&self) -> bool {
        (200..300).contains(&self.call.status)
    }

    /// 404 or 405: not this engine's endpoint.
    fn absent(&self) -> bool {
        matches!(self.call.status, 404 | 405)
    }

    fn refused(self, engine: &'static str, help: &'static str) -> CacheResetError {
        let body = self.body.trim();
        CacheResetError::Refused {
            engine,
            body: if body.is_empty() {
                String::new()
            } else {
                format!(": {}", body.chars().take(300).collect::<String>())
            },
            call: self.call,
            help,
        }
    }
}

impl Resetter {
    fn new(endpoint: &str, api: &Api) -> Result<Self, CacheResetError> {
        let mut headers = reqwest::header::HeaderMap::new();
        let mut add = |name: &str, value: &str| {
            if let (Ok(name), Ok(value)) = (
                reqwest::header::HeaderName::from_bytes(name.as_bytes()),
                reqwest::header::HeaderValue::from_str(value),
            ) {
                headers.insert(name, value);
            }
        };
        for (name, value) in &api.headers {
            add(name, value);
        }
        if let Some(key) = &api.api_key {
            add("authorization", &format!("Bearer {key}"));
        }
        let client = reqwest::Client::builder()
            .default_headers(headers)
            .timeout(RESET_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(CacheResetError::Client)?;
        Ok(Resetter {
            client,
            base: endpoint.trim_end_matches('/').to_owned(),
            calls: std::sync::Mutex::default(),
        })
    }

    async fn call(&self, method: &'static str, path: &str) -> Result<Answer, CacheResetError> {
        let url = format!("{}{path}", self.base);
        let request = match method {
            "GET" => self.client.get(&url),
            _ => self.client.post(&url),
        };
        let response = request
            .send()
            .await
            .map_err(|source| CacheResetError::Request {
                method,
                url: url.clone(),
                source,
            })?;
        let status = response.status().as_u16();
        let body = response.text().await.unwrap_or_default();
        let call = ResetCall {
            method: method.to_owned(),
            path: path.to_owned(),
            status,
        };
        tracing::debug!(%call, "prefix-cache reset");
        self.calls
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(call.clone());
        Ok(Answer { call, body })
    }

    fn done(&self, engine: &str, note: Option<&str>) -> CacheReset {
        CacheReset {
            engine: engine.to_owned(),
            calls: std::mem::take(
                &mut *self
                    .calls
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner),
            ),
            note: note.map(str::to_owned),
        }
    }

    async fn run(&self) -> Result<CacheReset, CacheResetError> {
        let vllm = self.call("POST", "/reset_prefix_cache").await?;
        if vllm.success() {
            return Ok(self.done("vllm", None));
        }
        if !vllm.absent() {
            return Err(vllm.refused(
                "vLLM",
                "check the server's log; a reset that fails leaves the cache as it was",
            ));
        }
        let sglang = self.call("POST", "/flush_cache").await?;
        if sglang.success() {
            return Ok(self.done("sglang", None));
        }
        if !sglang.absent() {
            return Err(sglang.refused(
                "SGLang",
                "SGLang flushes its cache only while no request is running: let the server go idle first",
            ));
        }
        let slots = self.call("GET", "/slots").await?;
        if slots.success() {
            let ids = slot_ids(&slots.body).map_err(|problem| CacheResetError::Slots {
                url: format!("{}/slots", self.base),
                problem,
            })?;
            for id in ids {
                let erase = self
                    .call("POST", &format!("/slots/{id}?action=erase"))
                    .await?;
                if !erase.success() {
                    let help = if erase.call.status == 501 {
                        "llama.cpp allows slot actions, erase included, only when started with --slot-save-path \
                         DIR; restart llama-server with it"
                    } else {
                        "check llama-server's log"
                    };
                    return Err(erase.refused("llama.cpp", help));
                }
            }
            return Ok(self.done("llama.cpp", Some(LLAMA_CPP_RAM_CACHE)));
        }
        if slots.call.status == 501 {
            return Err(slots.refused(
                "llama.cpp",
                "llama.cpp lists its slots only with the slots endpoint on (--slots, the default; not --no-slots)",
            ));
        }
        let tried = self
            .calls
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ");
        Err(CacheResetError::NoEndpoint {
            endpoint: self.base.clone(),
            tried,
        })
    }
}

/// The slot ids of llama.cpp's `GET /slots` answer: a JSON array of objects with an integer `id`.
fn slot_ids(body: &str) -> Result<Vec<u64>, String> {
    let value: serde_json::Value = serde_json::from_str(body).map_err(|e| e.to_string())?;
    let slots = value
        .as_array()
        .ok_or_else(|| "not a JSON array".to_owned())?;
    slots
        .iter()
        .map(|slot| {
            slot.get("id")
                .and_then(serde_json::Value::as_u64)
                .ok_or_else(|| "a slot without an integer `id`".to_owned())
        })
        .collect()
}

/// Each stage's own fresh prompts: stage `n` of a run (probes counted) draws its prompts with
/// [`stage_prompt_seed`]`(seed, n)`, sized for the stage as the run's first list is sized for the run, so no stage
/// re-sends the prompts of another. The first stage sends the run's own list, built before the clock.
pub(crate) struct FreshStagePrompts {
    /// The workload, its seed replaced by each stage's.
    pub(crate) workload: Workload,
    pub(crate) tokenizer: Tokenizer,
    pub(crate) settings: BodySettings,
    /// The run's fresh seed.
    pub(crate) seed: u64,
}

impl StageRequests for FreshStagePrompts {
    fn requests(&mut self, nth: u32, stage: &Stage) -> Result<Option<Requests>, PlannerError> {
        if nth == 0 {
            return Ok(None);
        }
        let expected = match &stage.plan {
            StagePlan::Open { send_at, .. } => Some(send_at.len() as u64),
            StagePlan::Closed { total, .. } => *total,
            StagePlan::Paced(paced) => paced.total,
            // Traces, sessions and the rest bring their own requests.
            _ => return Ok(None),
        };
        self.workload.seed = stage_prompt_seed(self.seed, nth);
        let prompts = build_prompts(
            &self.workload,
            &self.tokenizer,
            self.workload.api.prompts_for(expected),
        )?;
        let bodies: Arc<[PreparedRequest]> = prepare_all(&prompts, &self.settings).into();
        tracing::debug!(
            stage = nth,
            prompts = bodies.len(),
            "fresh prompts for the stage"
        );
        Ok(Some(Requests::Fixed(bodies)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llama_cpp_slot_ids_are_read_from_its_slot_list() {
        let body = r#"[{"id":0,"n_ctx":1024,"is_processing":false},{"id":3,"n_ctx":1024}]"#;
        assert_eq!(slot_ids(body), Ok(vec![0, 3]));
        assert!(slot_ids(r#"{"id":0}"#).is_err());
        assert!(slot_ids(r#"[{"name":"x"}]"#).is_err());
    }
}
