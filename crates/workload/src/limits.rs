//! Limits on what a profile may ask for, and the run's memory estimate.
//!
//! Every figure a profile sets is checked at parse time against a limit chosen generously above any real
//! workload: the `MAX_*` figures, re-exported here from [`crate::workload::limits`] where the profile readers
//! check them (a refusal's message points the user here). [`estimate_run_memory`] then tells the caller how much
//! memory the prompts and the in-memory records of a run will take, and [`check_fits`] refuses a run that cannot
//! fit in what the launcher has, before the first prompt is built.

use std::fmt;
use std::time::Duration;

use crate::prompts::{DEFAULT_PROMPTS, MAX_PROMPTS};
use crate::workload::{Arrival, DataSpec, LengthShape, Stage, Sweep, TokenLengths, Workload};

pub use crate::workload::limits::{
    MAX_ARRIVALS, MAX_CONCURRENCY, MAX_DURATION, MAX_PREFIXES, MAX_RATE, MAX_REQUESTS, MAX_SAMPLES,
    MAX_STAGES, MAX_TOKENS, MAX_TURNS,
};

/// Bytes one prompt token takes in memory, counted generously: a plain-word token of the built-in tokenizer is
/// six to eight bytes of text with its space, a BPE token of English text about four.
pub(crate) const BYTES_PER_TOKEN: u64 = 8;
/// Copies of each prompt's text held while a run goes: the prompt itself and the request body prepared from it.
pub(crate) const PROMPT_COPIES: u64 = 2;
/// Bytes of one chunk event in a request's record (its arrival time and token count).
pub(crate) const BYTES_PER_CHUNK: u64 = 16;
/// Bytes of one request's record apart from its chunks: timestamps, counts, status, the chunk list's header and
/// the allocator's rounding. The launcher keeps records until the run ends while they fit `--records-memory`.
pub(crate) const RECORD_BYTES: u64 = 256;
/// Tokens assumed for a prompt whose length only the dataset file knows (ShareGPT, custom files): vLLM's
/// ShareGPT filter keeps prompts of at most 1024 tokens.
pub(crate) const NOMINAL_DATASET_PROMPT_TOKENS: u64 = 1024;
/// Answer tokens assumed when the profile leaves `max_tokens` to the server.
pub(crate) const NOMINAL_OUTPUT_TOKENS: u64 = 256;

/// How much memory a run will hold, by part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryEstimate {
    /// Prompts built before the clock starts.
    pub prompts: u64,
    /// Their text, each held twice (the prompt and its prepared request body), plus shared prefixes.
    pub prompt_bytes: u64,
    /// Requests whose records are kept until the run ends; 0 when nothing bounds the run's length.
    pub requests: u64,
    /// Whether `requests` is a bound (false: a duration-limited closed loop, whose request count only the
    /// server's speed decides).
    pub requests_bounded: bool,
    /// Response chunks expected per request (one per token when streaming, one otherwise).
    pub chunks_per_request: u64,
    /// The records: [`RECORD_BYTES`] each plus [`BYTES_PER_CHUNK`] per expected chunk.
    pub record_bytes: u64,
    pub total_bytes: u64,
}

impl fmt::Display for MemoryEstimate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({} prompts: {}; {}{} request records of ~{} chunks: {})",
            bytes(self.total_bytes),
            self.prompts,
            bytes(self.prompt_bytes),
            if self.requests_bounded {
                ""
            } else {
                "at least "
            },
            self.requests,
            self.chunks_per_request,
            bytes(self.record_bytes)
        )
    }
}

/// A byte count in binary units, one decimal.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// Why a run cannot start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LimitError {
    /// The estimate does not fit in the memory the launcher has.
    #[error(
        "the run would need about {estimate} of memory, but only {} is available to the launcher; lower the \
         request count or duration, the prompt lengths or the number of prompts, or give the launcher more memory",
        bytes(*available)
    )]
    OutOfMemory {
        estimate: MemoryEstimate,
        available: u64,
    },
}

/// What the prompts and request records of `workload` will take, `expected_requests` being how many requests
/// the plan issues when the caller knows (as `prompts::build_prompts` takes it). Pure: a function of the
/// workload's figures only (a dataset file's prompts are counted at [`NOMINAL_DATASET_PROMPT_TOKENS`]).
pub fn estimate_run_memory(workload: &Workload, expected_requests: Option<u64>) -> MemoryEstimate {
    let (requests, requests_bounded) = match expected_requests {
        Some(n) => (n, true),
        None => workload_requests(workload),
    };
    // The prompt pool as `build_prompts` sizes it.
    let pool = |declared: Option<u64>| -> u64 {
        let n = match (declared, expected_requests) {
            (Some(d), Some(e)) => d.min(e),
            (Some(n), None) | (None, Some(n)) => n,
            (None, None) => DEFAULT_PROMPTS,
        };
        n.clamp(1, MAX_PROMPTS)
    };
    let (prompts, tokens_per_prompt, shared_tokens, output): (u64, f64, f64, Option<f64>) =
        match &workload.data {
            DataSpec::Mock => (pool(None), 10.0, 0.0, Some(30.0)),
            DataSpec::Random(r) => (
                pool(r.input.total_count),
                mean_tokens(&r.input) + r.prefix_len as f64,
                r.prefix_len as f64,
                Some(mean_tokens(&r.output)),
            ),
            DataSpec::SyntheticText(s) => {
                let weights: f64 = s
                    .prefix_buckets
                    .iter()
                    .map(|b| b.bucket_weight as f64)
                    .sum();
                let mean_prefix = if weights > 0.0 {
                    s.prefix_buckets
                        .iter()
                        .map(|b| b.bucket_weight as f64 * b.prefix_tokens as f64)
                        .sum::<f64>()
                        / weights
                } else {
                    0.0
                };
                let all_prefixes: f64 = s
                    .prefix_buckets
                    .iter()
                    .map(|b| b.prefix_count as f64 * b.prefix_tokens as f64)
                    .sum();
                (
                    pool(Some(s.samples)),
                    mean_tokens(&s.prompt) + mean_prefix,
                    all_prefixes,
                    s.output.as_ref().map(mean_tokens),
                )
            }
            // Read when the run starts, which checks its size then.
            DataSpec::AiperfFile(f) => (
                pool(Some(f.conversations)),
                NOMINAL_DATASET_PROMPT_TOKENS as f64,
                0.0,
                f.output.as_ref().map(mean_tokens),
            ),
            // Read when the run starts: one prompt per line, of lengths only the file knows.
            DataSpec::AiperfRankingsFile(_) => {
                (pool(None), NOMINAL_DATASET_PROMPT_TOKENS as f64, 0.0, None)
            }
            DataSpec::AiperfConversations(a) => {
                // Every turn of every conversation is built; a prefix starts each conversation's first turn.
                let turns = mean_tokens(&a.turns).max(1.0);
                let (pool_tokens, prefix) = a.prefix_pool.map_or((0.0, 0.0), |p| {
                    ((p.size * p.tokens) as f64, p.tokens as f64)
                });
                (
                    saturating(a.conversations as f64 * turns).clamp(1, MAX_PROMPTS),
                    mean_tokens(&a.prompt) + prefix / turns,
                    pool_tokens,
                    a.output.as_ref().map(mean_tokens),
                )
            }
            // The pool of usable rows (at most `num_rows`); their text counted at the nominal dataset size, their
            // images checked when the run reads them.
            DataSpec::VisionArena(v) => (
                v.num_rows.clamp(1, MAX_PROMPTS),
                NOMINAL_DATASET_PROMPT_TOKENS as f64,
                0.0,
                Some(30.0),
            ),
            // Each entry a query and its passages, held as one prompt of them all.
            DataSpec::AiperfRankings(r) => (
                pool(Some(r.entries)),
                mean_tokens(&r.query) + r.passages_mean as f64 * mean_tokens(&r.passage),
                0.0,
                None,
            ),
            DataSpec::SharedPrefix(p) => {
                // Every prompt of every group is built, whatever the pool.
                let n = p.num_groups.saturating_mul(p.num_prompts_per_group);
                let system = mean_tokens(&p.system_prompt_len);
                (
                    n,
                    system + mean_tokens(&p.question_len),
                    p.num_groups as f64 * system,
                    Some(mean_tokens(&p.output_len)),
                )
            }
            DataSpec::ShareGpt(s) => (
                pool(None),
                s.input_filter
                    .as_ref()
                    .map_or(NOMINAL_DATASET_PROMPT_TOKENS as f64, |f| {
                        max_tokens(f).min(NOMINAL_DATASET_PROMPT_TOKENS) as f64
                    }),
                0.0,
                s.output.as_ref().map(mean_tokens),
            ),
            DataSpec::Sonnet(s) => (
                pool(None),
                s.input_len as f64,
                0.0,
                Some(s.output_len as f64),
            ),
            DataSpec::File(f) => (
                pool(None),
                NOMINAL_DATASET_PROMPT_TOKENS as f64,
                0.0,
                f.output_len.map(|n| n as f64),
            ),
            DataSpec::BurstGpt(_) => (pool(None), NOMINAL_DATASET_PROMPT_TOKENS as f64, 0.0, None),
            DataSpec::VllmHf(hf) => (
                pool(None),
                NOMINAL_DATASET_PROMPT_TOKENS as f64,
                0.0,
                hf.output_len.map(|n| n as f64),
            ),
            DataSpec::GuidellmFile(f) => (
                pool(f.samples),
                NOMINAL_DATASET_PROMPT_TOKENS as f64,
                0.0,
                None,
            ),
            DataSpec::ConversationReplay(r) => {
                // What a run holds is one session per conversation (system prompt and history, built as it
                // goes), each within the context window upstream truncates to.
                let mean = |d: &Option<TokenLengths>, fallback: f64| {
                    d.as_ref().map_or(fallback, mean_tokens)
                };
                let output = mean(&r.output_tokens_per_turn, 256.0);
                let whole = r.shared_system_prompt_len as f64
                    + mean(&r.dynamic_system_prompt_len, 0.0)
                    + mean(&r.turns_per_conversation, 10.0)
                        * (mean(&r.input_tokens_per_turn, 512.0) + output);
                let window = r.max_model_len.unwrap_or(u64::from(
                    crate::conversations::REPLAY_DEFAULT_MAX_MODEL_LEN,
                )) as f64;
                (r.num_conversations, whole.min(window), 0.0, Some(output))
            }
            // Built from the file when the run starts, which checks its size then.
            DataSpec::MooncakeTrace(_)
            | DataSpec::AzureTrace(_)
            | DataSpec::OtelTrace(_)
            | DataSpec::GuidellmTrace(_) => {
                (pool(None), NOMINAL_DATASET_PROMPT_TOKENS as f64, 0.0, None)
            }
        };
    let prompt_tokens = prompts as f64 * tokens_per_prompt + shared_tokens;
    let prompt_bytes = saturating(prompt_tokens * (BYTES_PER_TOKEN * PROMPT_COPIES) as f64);
    let chunks_per_request = if workload.api.streaming {
        saturating(output.unwrap_or(NOMINAL_OUTPUT_TOKENS as f64).max(1.0))
    } else {
        1
    };
    let per_request =
        RECORD_BYTES.saturating_add(BYTES_PER_CHUNK.saturating_mul(chunks_per_request));
    let record_bytes = requests.saturating_mul(per_request);
    MemoryEstimate {
        prompts,
        prompt_bytes,
        requests,
        requests_bounded,
        chunks_per_request,
        record_bytes,
        total_bytes: prompt_bytes.saturating_add(record_bytes),
    }
}

impl MemoryEstimate {
    /// The estimate of a run that keeps at most `budget` bytes of records (`--records-memory`): past it, the
    /// records are on disk only.
    pub fn with_records_within(mut self, budget: u64) -> MemoryEstimate {
        self.record_bytes = self.record_bytes.min(budget);
        self.total_bytes = self.prompt_bytes.saturating_add(self.record_bytes);
        self
    }
}

/// A byte count as a person writes it: `268435456`, `256MiB`, `1GiB`, `512M`, `2G` (decimal units K, M, G, T;
/// binary KiB, MiB, GiB, TiB; a trailing `B` allowed).
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let trimmed = text.trim();
    let digits = trimmed
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(digits);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a byte count (e.g. 256MiB, 1GiB, 500000000)"))?;
    let scale: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" => 1_000,
        "m" | "mb" => 1_000_000,
        "g" | "gb" => 1_000_000_000,
        "t" | "tb" => 1_000_000_000_000,
        "ki" | "kib" => 1 << 10,
        "mi" | "mib" => 1 << 20,
        "gi" | "gib" => 1 << 30,
        "ti" | "tib" => 1 << 40,
        other => {
            return Err(format!(
                "unknown unit `{other}` in `{text}`: use B, K, M, G, T or KiB, MiB, GiB, TiB"
            ));
        }
    };
    let bytes = value * scale as f64;
    if !bytes.is_finite() || bytes >= u64::MAX as f64 {
        return Err(format!("`{text}` is too large"));
    }
    Ok(bytes as u64)
}

/// `Ok` when `estimate` fits in `available_bytes`; otherwise an error stating both.
pub fn check_fits(estimate: &MemoryEstimate, available_bytes: u64) -> Result<(), LimitError> {
    if estimate.total_bytes <= available_bytes {
        Ok(())
    } else {
        Err(LimitError::OutOfMemory {
            estimate: *estimate,
            available: available_bytes,
        })
    }
}

/// The requests the workload's own limits bound it to, and whether every stage is bounded.
fn workload_requests(workload: &Workload) -> (u64, bool) {
    let mut total: u64 = workload.warmup_requests;
    let mut bounded = true;
    for stage in &workload.stages {
        match stage_requests(stage) {
            Some(n) => total = total.saturating_add(n),
            None => bounded = false,
        }
    }
    (total, bounded)
}

/// How many requests a stage sends at most, when its figures say.
fn stage_requests(stage: &Stage) -> Option<u64> {
    let by_rate = |rate: f64, d: Duration| saturating((rate * d.as_secs_f64()).floor());
    let from_arrival = match &stage.arrival {
        Arrival::InferencePerfConstant { rate, duration }
        | Arrival::InferencePerfPoisson { rate, duration } => Some(by_rate(*rate, *duration)),
        Arrival::GuidellmConstant { rate, .. } | Arrival::GuidellmPoisson { rate } => {
            stage.limit.duration.map(|d| by_rate(*rate, d))
        }
        Arrival::VllmGamma { count, .. } => Some(*count),
        // guidellm's sweep: its rates are measured during the run, but each of its `size − 2` rate stages keeps
        // the sweep's request limit.
        Arrival::Sweep(Sweep::Guidellm { size, limit, .. }) => {
            return limit
                .requests
                .map(|n| n.saturating_mul(u64::from(size.saturating_sub(2))));
        }
        // inference-perf's sweep: the rates and so the request counts come from the saturation probe.
        // A trace's size is in its file.
        // AIPerf's rate loop: its request count, or as many as its gaps and concurrency allow in the duration.
        Arrival::Closed { .. }
        | Arrival::AiperfRate { .. }
        | Arrival::Sweep(Sweep::InferencePerf { .. })
        | Arrival::MooncakeTrace { .. }
        | Arrival::InferencePerfTrace { .. }
        | Arrival::GuidellmReplay { .. }
        | Arrival::TraceSessions { .. } => None,
    };
    match (from_arrival, stage.limit.requests) {
        (Some(a), Some(r)) => Some(a.min(r)),
        (a, r) => a.or(r),
    }
}

/// The mean of a length distribution as sampled (clipped to its bounds).
fn mean_tokens(lengths: &TokenLengths) -> f64 {
    match lengths.shape {
        LengthShape::Fixed(n) => n as f64,
        LengthShape::Uniform { min, max } => (min as f64 + max as f64) / 2.0,
        LengthShape::Normal { mean, min, max, .. }
        | LengthShape::SkewNormal { mean, min, max, .. }
        | LengthShape::LogNormal { mean, min, max, .. }
        | LengthShape::Poisson { mean, min, max } => mean.clamp(min as f64, max as f64),
        LengthShape::RangeRatio { len, .. } => len as f64,
        // Redrawing below 0 and rounding up lift the mean a little; the mean is close enough for an estimate.
        LengthShape::PositiveNormal { mean, .. } => mean,
    }
}

/// The largest length a distribution can draw.
fn max_tokens(lengths: &TokenLengths) -> u64 {
    match lengths.shape {
        LengthShape::Fixed(n) => n,
        LengthShape::Uniform { max, .. }
        | LengthShape::Normal { max, .. }
        | LengthShape::SkewNormal { max, .. }
        | LengthShape::LogNormal { max, .. }
        | LengthShape::Poisson { max, .. } => max,
        LengthShape::RangeRatio { len, ratio } => saturating((len as f64 * (1.0 + ratio)).ceil()),
        // Unbounded: six standard deviations above the mean, which one draw in a billion passes.
        LengthShape::PositiveNormal { mean, std_dev } => saturating((mean + 6.0 * std_dev).ceil()),
    }
}

fn saturating(v: f64) -> u64 {
    if v.is_nan() || v <= 0.0 {
        0
    } else if v >= u64::MAX as f64 {
        u64::MAX
    } else {
        v as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{
        Api, Dialect, Harness, LoadKind, PromptText, RandomData, SharedPrefix, SharedPrefixStyle,
        StageLimit, SyntheticText,
    };

    fn workload(data: DataSpec, streaming: bool, stages: Vec<Stage>) -> Workload {
        let mut w = Workload::empty(Harness::InferencePerf, Dialect::InferencePerf);
        w.api = Api {
            streaming,
            ..Api::default()
        };
        w.data = data;
        w.stages = stages;
        w
    }

    fn closed(requests: Option<u64>, duration: Option<Duration>) -> Stage {
        Stage {
            load: LoadKind::Concurrent,
            arrival: Arrival::Closed {
                concurrency: 4,
                rampup: Duration::ZERO,
            },
            limit: StageLimit {
                requests,
                duration,
                ..StageLimit::default()
            },
            max_concurrency: None,
            warmup: None,
            cooldown: None,
        }
    }

    fn random(input: u64, output: u64) -> DataSpec {
        DataSpec::Random(RandomData {
            input: TokenLengths::fixed(input),
            output: TokenLengths::fixed(output),
            prefix_len: 0,
            text: PromptText::RandomTokens,
            rerank: None,
            images: None,
        })
    }

    #[test]
    fn streaming_random_run_is_prompts_times_sixteen_bytes_a_token_plus_records() {
        // 1000 requests of 512-token prompts and 128-token streamed answers: the pool is 1000 prompts;
        // prompts 1000 × 512 tokens × 8 B × 2 copies = 8 192 000 B;
        // records 1000 × (256 + 16 × 128) = 1000 × 2304 = 2 304 000 B.
        let w = workload(random(512, 128), true, vec![closed(Some(1000), None)]);
        let e = estimate_run_memory(&w, Some(1000));
        assert_eq!(e.prompts, 1000);
        assert_eq!(e.prompt_bytes, 8_192_000);
        assert_eq!(e.chunks_per_request, 128);
        assert_eq!(e.record_bytes, 2_304_000);
        assert_eq!(e.total_bytes, 10_496_000);
        assert!(e.requests_bounded);
    }

    #[test]
    fn non_streaming_records_hold_one_chunk_and_the_pool_stops_at_max_prompts() {
        // 10 million requests: the pool stops at 200 000 prompts of 100 tokens = 200 000 × 100 × 16 = 320 000 000 B;
        // records 10 000 000 × (256 + 16) = 2 720 000 000 B.
        let w = workload(random(100, 50), false, vec![closed(Some(10_000_000), None)]);
        let e = estimate_run_memory(&w, Some(10_000_000));
        assert_eq!(e.prompts, MAX_PROMPTS);
        assert_eq!(e.prompt_bytes, 320_000_000);
        assert_eq!(e.record_bytes, 2_720_000_000);
        assert_eq!(e.total_bytes, 3_040_000_000);
    }

    #[test]
    fn shared_prefix_builds_every_group_prompt_and_keeps_each_system_prompt() {
        // 10 groups × 20 prompts = 200 prompts of 100 + 50 tokens = 30 000 tokens, plus the 10 system prompts
        // kept while building (1000 tokens): 31 000 × 16 = 496 000 B. No requests known: 0 records, unbounded.
        let data = DataSpec::SharedPrefix(SharedPrefix {
            num_groups: 10,
            num_prompts_per_group: 20,
            system_prompt_len: TokenLengths::fixed(100),
            question_len: TokenLengths::fixed(50),
            output_len: TokenLengths::fixed(10),
            seed: None,
            multi_turn: false,
            style: SharedPrefixStyle::InferencePerf,
            prefix_images: None,
            question_images: None,
        });
        let w = workload(
            data,
            true,
            vec![closed(None, Some(Duration::from_secs(60)))],
        );
        let e = estimate_run_memory(&w, None);
        assert_eq!((e.prompts, e.prompt_bytes), (200, 496_000));
        assert_eq!((e.requests, e.requests_bounded), (0, false));
    }

    #[test]
    fn a_guidellm_sweep_is_bounded_by_its_request_limit_at_every_stage() {
        // sweep_size 5 with max_requests 50: synchronous 50, throughput 50, and 5 − 2 = 3 rate stages of 50 each
        // = 250 requests; an inference-perf sweep's stage rates come from its probe, so it is unbounded.
        let sweep = |arrival: Arrival, limit: StageLimit| Stage {
            load: LoadKind::Sweep,
            arrival,
            limit,
            max_concurrency: None,
            warmup: None,
            cooldown: None,
        };
        let guidellm = sweep(
            Arrival::Sweep(Sweep::Guidellm {
                size: 5,
                process: crate::workload::SweepProcess::Constant,
                limit: StageLimit::requests(50),
                max_concurrency: 512,
            }),
            StageLimit::requests(50),
        );
        let w = workload(
            DataSpec::Mock,
            false,
            vec![closed(Some(50), None), closed(Some(50), None), guidellm],
        );
        let e = estimate_run_memory(&w, None);
        assert_eq!((e.requests, e.requests_bounded), (250, true));
        let inference_perf = sweep(
            Arrival::Sweep(Sweep::InferencePerf {
                process: crate::workload::SweepProcess::Constant,
                progression: crate::workload::SweepProgression::Linear,
                num_stages: 5,
                stage_duration: Duration::from_secs(180),
                num_requests: Some(2000),
                timeout: Some(Duration::from_secs(60)),
                saturation_percentile: Some(95.0),
            }),
            StageLimit::default(),
        );
        let w = workload(DataSpec::Mock, false, vec![inference_perf]);
        assert!(!estimate_run_memory(&w, None).requests_bounded);
    }

    #[test]
    fn without_expected_requests_the_stage_limits_bound_the_records() {
        // A constant inference-perf stage of 2 req/s for 30 s sends 60; a closed stage of 40: 100 requests of
        // mock data (30-token answers, streamed): 100 × (256 + 16 × 30) = 73 600 B.
        let stages = vec![
            Stage {
                load: LoadKind::Constant,
                arrival: Arrival::InferencePerfConstant {
                    rate: 2.0,
                    duration: Duration::from_secs(30),
                },
                limit: StageLimit::duration(Duration::from_secs(30)),
                max_concurrency: None,
                warmup: None,
                cooldown: None,
            },
            closed(Some(40), None),
        ];
        let w = workload(DataSpec::Mock, true, stages);
        let e = estimate_run_memory(&w, None);
        assert_eq!((e.requests, e.requests_bounded), (100, true));
        assert_eq!(e.record_bytes, 73_600);
        // The pool without an expected count is DEFAULT_PROMPTS of 10 tokens: 1000 × 10 × 16.
        assert_eq!(e.prompt_bytes, 160_000);
    }

    #[test]
    fn synthetic_prefix_buckets_add_their_weighted_mean_and_every_prefix() {
        // samples 100, prompts of 200 tokens; buckets (1000 tokens × 2, weight 100) and (0 tokens × 1, weight
        // 300): mean prefix 1000 × 100 / 400 = 250; all prefixes 2000 tokens.
        // (100 × 450 + 2000) × 16 = 752 000 B.
        let data = DataSpec::SyntheticText(SyntheticText {
            prompt: TokenLengths::fixed(200),
            output: None,
            turns: 1,
            prefix_buckets: vec![
                crate::workload::PrefixBucket {
                    prefix_tokens: 1000,
                    prefix_count: 2,
                    bucket_weight: 100,
                },
                crate::workload::PrefixBucket {
                    prefix_tokens: 0,
                    prefix_count: 1,
                    bucket_weight: 300,
                },
            ],
            samples: 100,
            think_time: None,
            images: None,
        });
        let w = workload(data, true, vec![closed(Some(500), None)]);
        let e = estimate_run_memory(&w, Some(500));
        assert_eq!(e.prompts, 100);
        assert_eq!(e.prompt_bytes, 752_000);
        // No output length: the nominal 256 chunks.
        assert_eq!(e.chunks_per_request, NOMINAL_OUTPUT_TOKENS);
    }

    #[test]
    fn check_fits_states_the_estimate_and_the_available_memory() {
        let w = workload(random(512, 128), true, vec![closed(Some(1000), None)]);
        let e = estimate_run_memory(&w, Some(1000));
        assert_eq!(check_fits(&e, 10_496_000), Ok(()));
        let err = check_fits(&e, 10 * 1024 * 1024).unwrap_err();
        let msg = err.to_string();
        // 10 496 000 B = 10.0 MiB (10.009...); available 10 MiB exactly.
        assert!(msg.contains("about 10.0 MiB"), "{msg}");
        assert!(msg.contains("only 10.0 MiB is available"), "{msg}");
        assert!(msg.contains("1000 prompts"), "{msg}");
        let tiny = check_fits(&e, 1000).unwrap_err().to_string();
        assert!(tiny.contains("only 1000 B is available"), "{tiny}");
    }

    #[test]
    fn absurd_figures_saturate_instead_of_overflowing() {
        let data = DataSpec::SharedPrefix(SharedPrefix {
            num_groups: u64::MAX,
            num_prompts_per_group: u64::MAX,
            system_prompt_len: TokenLengths::fixed(u64::MAX),
            question_len: TokenLengths::fixed(u64::MAX),
            output_len: TokenLengths::fixed(u64::MAX),
            seed: None,
            multi_turn: false,
            style: SharedPrefixStyle::InferencePerf,
            prefix_images: None,
            question_images: None,
        });
        let w = workload(data, true, vec![closed(Some(u64::MAX), None)]);
        let e = estimate_run_memory(&w, Some(u64::MAX));
        assert_eq!(e.total_bytes, u64::MAX);
        assert!(check_fits(&e, u64::MAX - 1).is_err());
    }

    #[test]
    fn byte_counts_read_with_decimal_and_binary_units() {
        assert_eq!(parse_bytes("268435456"), Ok(256 << 20));
        assert_eq!(parse_bytes("256MiB"), Ok(256 << 20));
        assert_eq!(parse_bytes("1GiB"), Ok(1 << 30));
        assert_eq!(parse_bytes("1.5 GiB"), Ok(3 << 29));
        assert_eq!(parse_bytes("500M"), Ok(500_000_000));
        assert_eq!(parse_bytes("2kb"), Ok(2000));
        assert!(parse_bytes("lots").is_err());
        assert!(parse_bytes("3 parsecs").is_err());
    }

    #[test]
    fn the_estimate_counts_records_only_up_to_their_budget() {
        let estimate = MemoryEstimate {
            prompts: 1,
            prompt_bytes: 100,
            requests: 1_000_000,
            requests_bounded: true,
            chunks_per_request: 128,
            record_bytes: 2_304_000_000,
            total_bytes: 2_304_000_100,
        };
        let within = estimate.with_records_within(256 << 20);
        assert_eq!(within.record_bytes, 256 << 20);
        assert_eq!(within.total_bytes, (256 << 20) + 100);
    }
}
