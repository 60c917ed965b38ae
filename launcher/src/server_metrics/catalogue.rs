//! Well-known server metrics: vLLM v1 (`vllm/v1/metrics/loggers.py`) and the llm-d router / endpoint picker (EPP,
//! gateway-api-inference-extension), each with a unit and a stable short key that reports and plots use instead of
//! the Prometheus name. Anything else a server exposes is kept raw and summarized by its declared type.
//!
//! Names are matched as they appear on the wire: counters with their `_total` suffix (what both vLLM's Python client
//! and OpenMetrics expose), histograms by family name. A counter is also matched without the suffix, for exporters
//! that expose it bare.

use super::parse::MetricKind;

/// How one target's several series of a gauge (several engines, models, pools), and several targets' values in one
/// scrape round, combine into one value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Combine {
    /// Counts (requests running, waiting): the total is what matters.
    Sum,
    /// Fractions and already-averaged values (cache usage, pool averages): the mean.
    Mean,
}

/// One well-known metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Known {
    /// The name on the wire: a gauge's or counter's sample name, a histogram's family name.
    pub name: &'static str,
    /// A stable short key for reports.
    pub key: &'static str,
    pub kind: MetricKind,
    /// The unit of the values (of a histogram's observations).
    pub unit: &'static str,
    /// How series combine (gauges only; counters and histograms always sum).
    pub combine: Combine,
}

const fn gauge(
    name: &'static str,
    key: &'static str,
    unit: &'static str,
    combine: Combine,
) -> Known {
    Known {
        name,
        key,
        kind: MetricKind::Gauge,
        unit,
        combine,
    }
}

const fn counter(name: &'static str, key: &'static str, unit: &'static str) -> Known {
    Known {
        name,
        key,
        kind: MetricKind::Counter,
        unit,
        combine: Combine::Sum,
    }
}

const fn histogram(name: &'static str, key: &'static str, unit: &'static str) -> Known {
    Known {
        name,
        key,
        kind: MetricKind::Histogram,
        unit,
        combine: Combine::Sum,
    }
}

/// The catalogue, in the order summaries list metrics.
pub const KNOWN: &[Known] = &[
    // vLLM scheduler state.
    gauge(
        "vllm:num_requests_running",
        "running",
        "requests",
        Combine::Sum,
    ),
    gauge(
        "vllm:num_requests_waiting",
        "waiting",
        "requests",
        Combine::Sum,
    ),
    gauge(
        "vllm:num_requests_swapped",
        "swapped",
        "requests",
        Combine::Sum,
    ),
    gauge(
        "vllm:kv_cache_usage_perc",
        "kv_cache_usage",
        "fraction",
        Combine::Mean,
    ),
    // vLLM v0's names for the same, still exposed by some servers and simulators.
    gauge(
        "vllm:gpu_cache_usage_perc",
        "gpu_cache_usage",
        "fraction",
        Combine::Mean,
    ),
    gauge(
        "vllm:cpu_cache_usage_perc",
        "cpu_cache_usage",
        "fraction",
        Combine::Mean,
    ),
    // vLLM counters.
    counter(
        "vllm:prefix_cache_queries_total",
        "prefix_cache_queries",
        "tokens",
    ),
    counter(
        "vllm:prefix_cache_hits_total",
        "prefix_cache_hits",
        "tokens",
    ),
    counter(
        "vllm:external_prefix_cache_queries_total",
        "external_prefix_cache_queries",
        "tokens",
    ),
    counter(
        "vllm:external_prefix_cache_hits_total",
        "external_prefix_cache_hits",
        "tokens",
    ),
    counter("vllm:num_preemptions_total", "preemptions", "requests"),
    counter("vllm:prompt_tokens_total", "prompt_tokens", "tokens"),
    counter(
        "vllm:generation_tokens_total",
        "generation_tokens",
        "tokens",
    ),
    counter(
        "vllm:prompt_tokens_cached_total",
        "prompt_tokens_cached",
        "tokens",
    ),
    counter(
        "vllm:request_success_total",
        "requests_finished",
        "requests",
    ),
    counter(
        "vllm:corrupted_requests_total",
        "corrupted_requests",
        "requests",
    ),
    counter("vllm:mm_cache_queries_total", "mm_cache_queries", "items"),
    counter("vllm:mm_cache_hits_total", "mm_cache_hits", "items"),
    // vLLM per-request histograms.
    histogram("vllm:time_to_first_token_seconds", "ttft", "s"),
    histogram("vllm:inter_token_latency_seconds", "itl", "s"),
    histogram(
        "vllm:time_per_output_token_seconds",
        "time_per_output_token",
        "s",
    ),
    histogram("vllm:request_time_per_output_token_seconds", "tpot", "s"),
    histogram("vllm:e2e_request_latency_seconds", "e2e", "s"),
    histogram("vllm:request_queue_time_seconds", "queue_time", "s"),
    histogram("vllm:request_prefill_time_seconds", "prefill_time", "s"),
    histogram("vllm:request_decode_time_seconds", "decode_time", "s"),
    histogram("vllm:request_inference_time_seconds", "inference_time", "s"),
    histogram(
        "vllm:request_prompt_tokens",
        "request_prompt_tokens",
        "tokens",
    ),
    histogram(
        "vllm:request_generation_tokens",
        "request_generation_tokens",
        "tokens",
    ),
    histogram(
        "vllm:request_params_max_tokens",
        "request_max_tokens",
        "tokens",
    ),
    histogram(
        "vllm:request_max_num_generation_tokens",
        "request_max_generation_tokens",
        "tokens",
    ),
    histogram("vllm:request_params_n", "request_n", "count"),
    histogram("vllm:iteration_tokens_total", "iteration_tokens", "tokens"),
    histogram(
        "vllm:request_prefill_kv_computed_tokens",
        "prefill_kv_computed_tokens",
        "tokens",
    ),
    // Only with `--kv-cache-metrics`.
    histogram(
        "vllm:kv_block_idle_before_evict_seconds",
        "kv_block_idle_before_evict",
        "s",
    ),
    histogram("vllm:kv_block_lifetime_seconds", "kv_block_lifetime", "s"),
    histogram("vllm:kv_block_reuse_gap_seconds", "kv_block_reuse_gap", "s"),
    // llm-d router / endpoint picker: pool gauges are already averages over the pool, so several EPP replicas
    // reporting the same pool are averaged, not added.
    gauge(
        "inference_pool_average_kv_cache_utilization",
        "pool_kv_cache_usage",
        "fraction",
        Combine::Mean,
    ),
    gauge(
        "inference_pool_average_queue_size",
        "pool_queue_size",
        "requests",
        Combine::Mean,
    ),
    gauge(
        "inference_pool_average_running_requests",
        "pool_running",
        "requests",
        Combine::Mean,
    ),
    gauge(
        "inference_pool_ready_pods",
        "pool_ready_pods",
        "pods",
        Combine::Mean,
    ),
    gauge(
        "inference_objective_running_requests",
        "epp_running",
        "requests",
        Combine::Sum,
    ),
    gauge(
        "llm_d_epp_flow_control_pool_saturation",
        "epp_pool_saturation",
        "fraction",
        Combine::Mean,
    ),
    gauge(
        "llm_d_epp_flow_control_queue_size",
        "epp_flow_control_queue_size",
        "requests",
        Combine::Sum,
    ),
    gauge(
        "llm_d_epp_request_running",
        "epp_request_running",
        "requests",
        Combine::Sum,
    ),
    gauge(
        "inference_extension_prefix_indexer_size",
        "epp_prefix_indexer_size",
        "entries",
        Combine::Sum,
    ),
    counter(
        "inference_objective_request_total",
        "epp_requests",
        "requests",
    ),
    counter(
        "inference_objective_request_error_total",
        "epp_request_errors",
        "requests",
    ),
    histogram(
        "inference_objective_request_duration_seconds",
        "epp_request_duration",
        "s",
    ),
    histogram(
        "inference_objective_normalized_time_per_output_token_seconds",
        "epp_ntpot",
        "s",
    ),
    histogram(
        "inference_objective_input_tokens",
        "epp_input_tokens",
        "tokens",
    ),
    histogram(
        "inference_objective_output_tokens",
        "epp_output_tokens",
        "tokens",
    ),
    histogram(
        "inference_extension_scheduler_e2e_duration_seconds",
        "epp_scheduler_e2e",
        "s",
    ),
    histogram(
        "inference_extension_plugin_duration_seconds",
        "epp_plugin_duration",
        "s",
    ),
    histogram(
        "inference_extension_request_ttft_duration_seconds",
        "epp_ttft",
        "s",
    ),
];

/// A derived ratio: `Δnumerator / Δdenominator · 100` over a window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ratio {
    pub name: &'static str,
    pub key: &'static str,
    pub numerator: &'static str,
    pub denominator: &'static str,
}

/// Ratios derived from catalogue counters; each is reported right after its denominator.
pub const RATIOS: &[Ratio] = &[
    Ratio {
        name: "prefix cache hit rate",
        key: "prefix_cache_hit_rate",
        numerator: "vllm:prefix_cache_hits_total",
        denominator: "vllm:prefix_cache_queries_total",
    },
    Ratio {
        name: "external prefix cache hit rate",
        key: "external_prefix_cache_hit_rate",
        numerator: "vllm:external_prefix_cache_hits_total",
        denominator: "vllm:external_prefix_cache_queries_total",
    },
    Ratio {
        name: "multi-modal cache hit rate",
        key: "mm_cache_hit_rate",
        numerator: "vllm:mm_cache_hits_total",
        denominator: "vllm:mm_cache_queries_total",
    },
];

/// The catalogue entry and its index for a metric of `kind` named `name` (a counter with or without `_total`).
pub fn lookup(name: &str, kind: MetricKind) -> Option<(usize, &'static Known)> {
    let found = KNOWN.iter().enumerate().find(|(_, known)| {
        known.name == name
            || (known.kind == MetricKind::Counter
                && known.name.strip_suffix("_total") == Some(name))
    })?;
    // A name declared with another type than we know it by is not what we think it is; summed by its own type.
    let compatible = match (found.1.kind, kind) {
        (a, b) if a == b => true,
        // Untyped pages (no TYPE lines) still get their known gauges and counters recognised.
        (MetricKind::Gauge | MetricKind::Counter, MetricKind::Untyped) => true,
        _ => false,
    };
    compatible.then_some(found)
}

/// The catalogue entry whose key is `key`.
pub fn by_key(key: &str) -> Option<&'static Known> {
    KNOWN.iter().find(|known| known.key == key)
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn keys_and_names_are_unique() {
        let keys: HashSet<&str> = KNOWN
            .iter()
            .map(|k| k.key)
            .chain(RATIOS.iter().map(|r| r.key))
            .collect();
        assert_eq!(keys.len(), KNOWN.len() + RATIOS.len());
        let names: HashSet<&str> = KNOWN.iter().map(|k| k.name).collect();
        assert_eq!(names.len(), KNOWN.len());
    }

    #[test]
    fn counters_match_with_or_without_total_and_types_must_agree() {
        let (_, known) = lookup("vllm:prefix_cache_queries", MetricKind::Counter).unwrap();
        assert_eq!(known.key, "prefix_cache_queries");
        assert_eq!(
            lookup("vllm:prefix_cache_queries_total", MetricKind::Counter).map(|(_, k)| k.key),
            Some("prefix_cache_queries")
        );
        assert_eq!(
            lookup("vllm:num_requests_running", MetricKind::Untyped).map(|(_, k)| k.key),
            Some("running")
        );
        assert_eq!(
            lookup("vllm:num_requests_running", MetricKind::Histogram),
            None
        );
        assert_eq!(lookup("vllm:something_new", MetricKind::Gauge), None);
        assert_eq!(
            by_key("ttft").map(|k| k.name),
            Some("vllm:time_to_first_token_seconds")
        );
    }

    #[test]
    fn ratio_inputs_are_catalogue_counters() {
        for ratio in RATIOS {
            for name in [ratio.numerator, ratio.denominator] {
                assert!(lookup(name, MetricKind::Counter).is_some(), "{name}");
            }
        }
    }
}
