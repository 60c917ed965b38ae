//! The server's prefix cache as a run met it: what run.json records of the run's prompts (fresh or pinned), of
//! the reset made before it (`--reset-prefix-cache`) and of its priming pass (`--warm-prefix-cache`); and the
//! warning, derived from the records, that the cache was already warm when the run started.
//!
//! # When the cache was warm
//!
//! Nothing a run sends can hit the cache before the run's own first request has been sent, so the first
//! measured request (the earliest sent) tells: when the server reports cached tokens
//! (`usage.prompt_tokens_details.cached_tokens`) and at least [`WARM_SHARE`] of that request's prompt tokens hit,
//! an earlier run (or another client) left them there. Later requests cannot tell: a shared-prefix workload hits
//! its own prefixes on purpose, and a pool of prompts smaller than the stage is re-sent within it. A few hit tokens
//! are no sign either: every prompt of a BOS-adding tokenizer or a chat template starts with the same tokens, which
//! llama.cpp (caching per token) reports as hits.
//!
//! A server that reports no cached tokens in its responses (vLLM without `--enable-prompt-tokens-details`) is read
//! from its prefix-cache metrics instead, when they were scraped: the first stage's hit rate, where nothing in the
//! stage itself could have hit — its prompts share no prefix by design and it sent no more requests than the run
//! has prompts — and no later stage began within the reach of the scrape that closes the stage's window (a next
//! stage started at once may re-send the pool, and its hits would be read as the first stage's).
//!
//! A run primed on purpose (`--warm-prefix-cache`) is warm by design and never warned about.

use serde::{Deserialize, Serialize};

use llmbench_metrics::metrics::{PrefixCacheWarm, RunSummary};
use llmbench_metrics::server_metrics::summary::WindowSummary;
use llmbench_model::record::RequestRecord;

use super::RunMeta;

/// The share of the first request's prompt tokens (or of the first stage's, from server metrics) that marks the
/// cache as warm from before the run.
pub const WARM_SHARE: f64 = 0.5;

/// run.json's `cache`: what the run did about the server's prefix cache.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct CacheMeta {
    /// Whether the prompts are new to the server or the same as every run's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompts: Option<PromptsMeta>,
    /// `--reset-prefix-cache`: the engine's cache reset made before the clock started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reset: Option<CacheReset>,
    /// `--warm-prefix-cache`: the prompts sent once each before the first stage (one output token each, recorded
    /// as warm-up), so the measured stages meet a cache that holds them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primed_prompts: Option<u64>,
}

/// Where a run's prompts came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PromptsMeta {
    /// `fresh`: drawn with a seed of this run's own, so no earlier run sent them; `pinned`: the same every run.
    pub origin: PromptsOrigin,
    /// The seed fresh prompts were drawn with (`--seed` with it replays them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// What pins them: `the profile's seed 7`, `the dataset file d.jsonl`, `the seed given, --seed 3`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned_by: Option<String>,
    /// Each stage after the first draws prompts of its own (a fresh run of several stages whose prompts share
    /// nothing by design).
    #[serde(default)]
    pub per_stage: bool,
    /// The prompts share prefixes by design (shared prefix, prefix buckets, a random prefix): one set for the
    /// whole run, so what they share stays shared within it.
    #[serde(default)]
    pub shares_prefixes: bool,
    /// How many distinct prompts the run's (first stage's) list holds; absent for multi-turn and trace runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distinct: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PromptsOrigin {
    Fresh,
    Pinned,
}

/// The engine's prefix-cache reset, as `--reset-prefix-cache` made it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CacheReset {
    /// The engine whose endpoint answered: `vllm`, `sglang` or `llama.cpp`.
    pub engine: String,
    /// Every call made, in order, detection included: `POST /reset_prefix_cache → 404`, ….
    pub calls: Vec<ResetCall>,
    /// What the reset could not clear, where llmbench knows of something.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// One HTTP call of a reset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResetCall {
    pub method: String,
    pub path: String,
    pub status: u16,
}

impl std::fmt::Display for ResetCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} → {}", self.method, self.path, self.status)
    }
}

/// The first measured request, as a warm cache shows in it: counted request by request, so a run read back from
/// disk finds the same one as a run held in memory.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct FirstRequest {
    /// (sent_ns, id, cached tokens, prompt tokens) of the earliest sent successful request that carried `usage`.
    first: Option<(u64, u64, u32, u32)>,
}

impl FirstRequest {
    pub(crate) fn add(&mut self, r: &RequestRecord) {
        let Some(usage) = r.usage.filter(|_| r.succeeded()) else {
            return;
        };
        let key = (r.sent_ns, r.id);
        if self.first.is_none_or(|(sent, id, ..)| key < (sent, id)) {
            self.first = Some((
                r.sent_ns,
                r.id,
                usage.cached_tokens.unwrap_or(0),
                usage.prompt_tokens,
            ));
        }
    }

    /// The warning, if the responses report cached tokens and the first request found its prompt cached.
    pub(crate) fn warm(&self, meta: &RunMeta, summary: &RunSummary) -> Option<PrefixCacheWarm> {
        if primed(meta) {
            return None;
        }
        let first_stage = summary.stages.iter().min_by_key(|s| s.stage)?;
        let stage_hits = first_stage.summary.prefix_cache?;
        let (_, _, cached, prompt) = self.first?;
        let share = if prompt == 0 {
            0.0
        } else {
            f64::from(cached) / f64::from(prompt)
        };
        (share >= WARM_SHARE).then(|| {
            PrefixCacheWarm::new(
                stage_hits.hit_rate,
                Some(share),
                "usage",
                prompts_note(meta),
            )
        })
    }
}

/// The warning from the server's prefix-cache metrics, for a server whose responses report no cached tokens:
/// the first stage's hit rate, where nothing in that stage could have hit its own prompts.
pub(crate) fn warm_from_server_metrics(
    meta: &RunMeta,
    summary: &RunSummary,
) -> Option<PrefixCacheWarm> {
    if primed(meta) {
        return None;
    }
    let first_stage = summary.stages.iter().min_by_key(|s| s.stage)?;
    if first_stage.summary.prefix_cache.is_some() {
        // The responses tell, request by request (`FirstRequest`).
        return None;
    }
    let prompts = meta.cache.as_ref()?.prompts.as_ref()?;
    let distinct = prompts.distinct?;
    if prompts.shares_prefixes || first_stage.summary.requests.total > distinct {
        return None;
    }
    let server = summary.server_metrics.as_ref()?;
    let window = server
        .stages
        .iter()
        .find(|w| w.stage == Some(first_stage.stage as usize))?;
    if !isolated(window, &server.stages, server.interval_s) {
        return None;
    }
    let percent = match window.aggregate_metric("prefix_cache_hit_rate")?.figures {
        llmbench_metrics::server_metrics::Figures::Ratio { percent } => percent,
        _ => return None,
    };
    let rate = percent / 100.0;
    (rate >= WARM_SHARE)
        .then(|| PrefixCacheWarm::new(rate, None, "server_metrics", prompts_note(meta)))
}

/// Whether the window's counter increases can hold nothing of another stage: a window is bounded by the first
/// scrape at or after its end, up to 1.5 scrape intervals later (see the server-metrics summary), so a stage that
/// starts within that reach of the window's end may be counted in it — and a next stage that re-sends the first
/// stage's prompts (a pinned pool) hits them, which would read as a cache warm from before the run.
fn isolated(window: &WindowSummary, stages: &[WindowSummary], interval_s: f64) -> bool {
    let reach = window.end_s + 1.5 * interval_s;
    stages
        .iter()
        .filter(|other| other.stage != window.stage && other.start_s >= window.start_s)
        .all(|other| other.start_s > reach)
}

/// The run warmed the cache on purpose (`--warm-prefix-cache`).
fn primed(meta: &RunMeta) -> bool {
    meta.cache
        .as_ref()
        .is_some_and(|c| c.primed_prompts.is_some())
}

/// Why the prompts could have been sent before, for the warning: what pins them.
fn prompts_note(meta: &RunMeta) -> Option<String> {
    let prompts = meta.cache.as_ref()?.prompts.as_ref()?;
    prompts.pinned_by.clone()
}

/// The headline's `cache` line: the prompts' origin, the reset or priming, and the warning when warm.
pub(crate) fn cache_line(meta: &RunMeta, summary: &RunSummary) -> Option<String> {
    let cache = meta.cache.as_ref()?;
    let mut parts = Vec::new();
    if let Some(warm) = &summary.prefix_cache_warm {
        parts.push(format!(
            "WARM from an earlier run: {:.1} % of prompt tokens hit in the first stage",
            warm.first_stage_hit_rate * 100.0
        ));
    }
    match &cache.prompts {
        Some(PromptsMeta {
            origin: PromptsOrigin::Fresh,
            per_stage,
            ..
        }) => parts.push(if *per_stage {
            "fresh prompts, new to the server in every stage".to_owned()
        } else {
            "fresh prompts, new to the server".to_owned()
        }),
        Some(PromptsMeta {
            origin: PromptsOrigin::Pinned,
            pinned_by,
            ..
        }) => parts.push(format!(
            "prompts pinned by {}: the same every run",
            pinned_by.as_deref().unwrap_or("the profile")
        )),
        None => {}
    }
    if let Some(reset) = &cache.reset {
        parts.push(format!(
            "{} prefix cache reset before the run",
            reset.engine
        ));
    }
    if let Some(primed) = cache.primed_prompts {
        parts.push(format!(
            "warm: primed with the run's {primed} prompts before the first stage"
        ));
    }
    if summary.prefix_cache_warm.is_some() && cache.reset.is_none() {
        parts.push("--reset-prefix-cache empties it before the run".to_owned());
    }
    (!parts.is_empty()).then(|| parts.join(" · "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stage(stage: usize, start_s: f64, end_s: f64) -> WindowSummary {
        WindowSummary {
            stage: Some(stage),
            start_s,
            end_s,
            targets: Vec::new(),
            aggregate: Vec::new(),
        }
    }

    #[test]
    fn a_stage_followed_at_once_by_the_next_is_not_isolated_from_it() {
        // Scrapes every 1 s close stage 0's window up to 1.5 s after its end at 2 s: a stage 1 from 2.01 s or
        // 3.5 s is within reach, one from 3.6 s is not.
        let first = stage(0, 0.0, 2.0);
        for (next_start, isolated_expected) in [(2.01, false), (3.5, false), (3.6, true)] {
            let stages = [first.clone(), stage(1, next_start, next_start + 2.0)];
            assert_eq!(
                isolated(&first, &stages, 1.0),
                isolated_expected,
                "next stage at {next_start} s"
            );
        }
    }

    #[test]
    fn a_single_stage_is_isolated() {
        let only = stage(0, 0.0, 2.0);
        assert!(isolated(&only, std::slice::from_ref(&only), 1.0));
    }
}
