//! The simulator's `/metrics`, under vLLM's names, labels, help texts and buckets (vLLM v1,
//! `vllm/v1/metrics/loggers.py`), so dashboards and scrapers written for vLLM work unchanged.
//!
//! prometheus-client writes OpenMetrics text: a counter registered as `vllm:prompt_tokens` is
//! exposed as the sample `vllm:prompt_tokens_total` (what vLLM exposes and what PromQL queries
//! name), under `# TYPE vllm:prompt_tokens counter`. Names with `:` pass through unchanged.
//!
//! What the simulator models of vLLM's cache metrics, and what it does not:
//! - `vllm:kv_cache_usage_perc` is the tokens held by running requests (prompt plus the output
//!   tokens generated so far) over a KV capacity of `max-num-seqs × max-model-len` tokens: room for
//!   every seat to hold a full context, which is what the admission queue already assumes, so the
//!   fraction never exceeds 1. A non-streaming response generates its tokens all at once at the
//!   end, so while it runs it holds only its prompt. It is computed when scraped, from one atomic
//!   counter, so the request path pays one atomic add per token and no lock.
//! - `vllm:prefix_cache_queries` counts every admitted prompt token and `vllm:prefix_cache_hits` the prompt tokens
//!   found in the prefix cache (`prefix_cache`), both when a request is admitted, as vLLM's `PrefixCacheStats.record`
//!   does with `num_tokens` and `num_hits` when the scheduler looks a request up. With the prefix cache off both stay
//!   0: vLLM does not record a request that skipped the lookup (`record_prefix_cache_stats`).
//! - `vllm:num_preemptions` stays 0: the simulator never preempts.
//! - `vllm:iteration_tokens_total` is not exposed: the simulator has no engine steps to count.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use prometheus_client::encoding::{EncodeMetric, MetricEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::Registry;

/// vLLM's `time_to_first_token_seconds` buckets.
const TTFT_BUCKETS: [f64; 22] = [
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
];
/// vLLM's inter-token and time-per-output-token buckets.
const TOKEN_LATENCY_BUCKETS: [f64; 19] = [
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
    40.0, 80.0,
];
/// vLLM's request-phase latency buckets (e2e, queue, inference, prefill, decode).
const REQUEST_LATENCY_BUCKETS: [f64; 21] = [
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
    480.0, 960.0, 1920.0, 7680.0,
];

/// How a finished request ended, as vLLM's `finished_reason` label spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FinishedReason {
    Stop,
    Length,
    Abort,
}

type ReasonLabel = [(&'static str, &'static str); 1];

/// Handles to every simulator metric; the recording methods are lock-free apart from the
/// histograms' own short mutex.
#[derive(Debug, Clone)]
pub struct SimMetrics {
    running: Gauge,
    waiting: Gauge,
    kv_cache: KvCacheUsage,
    prefix_cache_queries: Counter,
    prefix_cache_hits: Counter,
    prompt_tokens: Counter,
    generation_tokens: Counter,
    success_stop: Counter,
    success_length: Counter,
    success_abort: Counter,
    time_to_first_token: Histogram,
    inter_token_latency: Histogram,
    time_per_output_token: Histogram,
    request_time_per_output_token: Histogram,
    e2e_request_latency: Histogram,
    request_queue_time: Histogram,
    request_inference_time: Histogram,
    request_prefill_time: Histogram,
    request_decode_time: Histogram,
    request_prompt_tokens: Histogram,
    request_generation_tokens: Histogram,
    request_params_max_tokens: Histogram,
}

impl SimMetrics {
    /// Registers every metric with the labels vLLM puts on them: `model_name` and `engine="0"`
    /// (plus `finished_reason` on `vllm:request_success`). Token-count histograms use vLLM's
    /// 1-2-5 buckets up to `max_model_len`; KV-cache usage is over `kv_capacity_tokens`.
    pub fn register(
        registry: &mut Registry,
        model_name: &str,
        max_model_len: u32,
        kv_capacity_tokens: u64,
    ) -> Self {
        let registry = registry.sub_registry_with_labels(
            [
                ("model_name".into(), model_name.to_owned().into()),
                ("engine".into(), "0".into()),
            ]
            .into_iter(),
        );

        let running = Gauge::default();
        registry.register(
            "vllm:num_requests_running",
            help_text("Number of requests in model execution batches."),
            running.clone(),
        );
        let waiting = Gauge::default();
        registry.register(
            "vllm:num_requests_waiting",
            help_text("Number of requests waiting to be processed."),
            waiting.clone(),
        );

        let kv_cache = KvCacheUsage {
            held: Arc::new(AtomicU64::new(0)),
            capacity: kv_capacity_tokens.max(1),
        };
        registry.register(
            "vllm:kv_cache_usage_perc",
            help_text("KV-cache usage. 1 means 100 percent usage."),
            kv_cache.clone(),
        );
        let prefix_cache_queries = Counter::default();
        registry.register(
            "vllm:prefix_cache_queries",
            help_text("Prefix cache queries, in terms of number of queried tokens."),
            prefix_cache_queries.clone(),
        );
        let prefix_cache_hits = Counter::default();
        registry.register(
            "vllm:prefix_cache_hits",
            help_text("Prefix cache hits, in terms of number of cached tokens."),
            prefix_cache_hits.clone(),
        );
        // Exposed at 0 so dashboards and summaries see vLLM's full set: nothing ever preempts.
        registry.register(
            "vllm:num_preemptions",
            help_text("Cumulative number of preemption from the engine."),
            Counter::<u64>::default(),
        );

        let prompt_tokens = Counter::default();
        registry.register(
            "vllm:prompt_tokens",
            help_text("Number of prefill tokens processed."),
            prompt_tokens.clone(),
        );
        let generation_tokens = Counter::default();
        registry.register(
            "vllm:generation_tokens",
            help_text("Number of generation tokens processed."),
            generation_tokens.clone(),
        );
        let success = Family::<ReasonLabel, Counter>::default();
        registry.register(
            "vllm:request_success",
            help_text("Count of successfully processed requests."),
            success.clone(),
        );
        // Created up front so every reason is exposed (at 0) from the first scrape, as vLLM does.
        let success_stop = success.get_or_create_owned(&[("finished_reason", "stop")]);
        let success_length = success.get_or_create_owned(&[("finished_reason", "length")]);
        let success_abort = success.get_or_create_owned(&[("finished_reason", "abort")]);

        let mut histogram = |name: &str, help: &str, buckets: &[f64]| {
            let histogram = Histogram::new(buckets.iter().copied());
            registry.register(name, help_text(help), histogram.clone());
            histogram
        };
        let token_buckets = one_two_five_buckets(max_model_len);
        Self {
            running,
            waiting,
            kv_cache,
            prefix_cache_queries,
            prefix_cache_hits,
            prompt_tokens,
            generation_tokens,
            success_stop,
            success_length,
            success_abort,
            request_prompt_tokens: histogram(
                "vllm:request_prompt_tokens",
                "Number of prefill tokens processed.",
                &token_buckets,
            ),
            request_generation_tokens: histogram(
                "vllm:request_generation_tokens",
                "Number of generation tokens processed.",
                &token_buckets,
            ),
            request_params_max_tokens: histogram(
                "vllm:request_params_max_tokens",
                "Histogram of the max_tokens request parameter.",
                &token_buckets,
            ),
            time_to_first_token: histogram(
                "vllm:time_to_first_token_seconds",
                "Histogram of time to first token in seconds.",
                &TTFT_BUCKETS,
            ),
            inter_token_latency: histogram(
                "vllm:inter_token_latency_seconds",
                "Histogram of inter-token latency in seconds.",
                &TOKEN_LATENCY_BUCKETS,
            ),
            time_per_output_token: histogram(
                "vllm:time_per_output_token_seconds",
                "Histogram of time per output token in seconds. \
                 DEPRECATED: Use vllm:inter_token_latency_seconds instead.",
                &TOKEN_LATENCY_BUCKETS,
            ),
            request_time_per_output_token: histogram(
                "vllm:request_time_per_output_token_seconds",
                "Histogram of time_per_output_token_seconds per request.",
                &TOKEN_LATENCY_BUCKETS,
            ),
            e2e_request_latency: histogram(
                "vllm:e2e_request_latency_seconds",
                "Histogram of e2e request latency in seconds.",
                &REQUEST_LATENCY_BUCKETS,
            ),
            request_queue_time: histogram(
                "vllm:request_queue_time_seconds",
                "Histogram of time spent in WAITING phase for request.",
                &REQUEST_LATENCY_BUCKETS,
            ),
            request_inference_time: histogram(
                "vllm:request_inference_time_seconds",
                "Histogram of time spent in RUNNING phase for request.",
                &REQUEST_LATENCY_BUCKETS,
            ),
            request_prefill_time: histogram(
                "vllm:request_prefill_time_seconds",
                "Histogram of time spent in PREFILL phase for request.",
                &REQUEST_LATENCY_BUCKETS,
            ),
            request_decode_time: histogram(
                "vllm:request_decode_time_seconds",
                "Histogram of time spent in DECODE phase for request.",
                &REQUEST_LATENCY_BUCKETS,
            ),
        }
    }

    pub(crate) fn waiting(&self) -> &Gauge {
        &self.waiting
    }

    pub(crate) fn running(&self) -> &Gauge {
        &self.running
    }

    /// A request got a seat: its prompt was looked up in the prefix cache (`cached_tokens` found; `None`
    /// with the cache off) and its KV blocks are taken, held until the returned [`KvHold`] is dropped.
    pub(crate) fn admitted(
        &self,
        queue_time: Duration,
        prompt_tokens: u32,
        cached_tokens: Option<u32>,
    ) -> KvHold {
        self.request_queue_time.observe(queue_time.as_secs_f64());
        if let Some(cached) = cached_tokens {
            self.prefix_cache_queries.inc_by(u64::from(prompt_tokens));
            self.prefix_cache_hits.inc_by(u64::from(cached));
        }
        let held = u64::from(prompt_tokens);
        self.kv_cache.held.fetch_add(held, Ordering::Relaxed);
        KvHold {
            tokens: Arc::clone(&self.kv_cache.held),
            held,
        }
    }

    /// The first output token: prefill is done, so the prompt counts as processed.
    pub(crate) fn first_token(&self, prompt_tokens: u32, time_to_first_token: Duration) {
        self.prompt_tokens.inc_by(u64::from(prompt_tokens));
        self.generation_tokens.inc();
        self.time_to_first_token
            .observe(time_to_first_token.as_secs_f64());
    }

    /// A later output token, `gap` after the previous one.
    pub(crate) fn next_token(&self, gap: Duration) {
        self.generation_tokens.inc();
        self.observe_gaps(gap, 1);
    }

    /// `count` later tokens generated without being sent one by one (non-streaming responses).
    pub(crate) fn next_tokens(&self, gap: Duration, count: u32) {
        self.generation_tokens.inc_by(u64::from(count));
        self.observe_gaps(gap, count);
    }

    fn observe_gaps(&self, gap: Duration, count: u32) {
        let gap = gap.as_secs_f64();
        for _ in 0..count {
            self.inter_token_latency.observe(gap);
            self.time_per_output_token.observe(gap);
        }
    }

    pub(crate) fn finished(&self, reason: FinishedReason, request: &FinishedRequest) {
        self.success(reason).inc();
        self.e2e_request_latency.observe(request.e2e.as_secs_f64());
        self.request_inference_time
            .observe((request.prefill + request.decode).as_secs_f64());
        self.request_prefill_time
            .observe(request.prefill.as_secs_f64());
        self.request_decode_time
            .observe(request.decode.as_secs_f64());
        let per_output_token = match request.generation_tokens {
            0 | 1 => 0.0,
            n => request.decode.as_secs_f64() / f64::from(n - 1),
        };
        self.request_time_per_output_token.observe(per_output_token);
        self.request_prompt_tokens
            .observe(f64::from(request.prompt_tokens));
        self.request_generation_tokens
            .observe(f64::from(request.generation_tokens));
        self.request_params_max_tokens
            .observe(f64::from(request.max_tokens));
    }

    /// A request that ended without finishing (client gone, injected fault, shutdown).
    pub(crate) fn aborted(&self) {
        self.success(FinishedReason::Abort).inc();
    }

    fn success(&self, reason: FinishedReason) -> &Counter {
        match reason {
            FinishedReason::Stop => &self.success_stop,
            FinishedReason::Length => &self.success_length,
            FinishedReason::Abort => &self.success_abort,
        }
    }
}

/// `vllm:kv_cache_usage_perc`, computed when scraped: tokens held over capacity.
#[derive(Debug, Clone)]
struct KvCacheUsage {
    held: Arc<AtomicU64>,
    capacity: u64,
}

impl KvCacheUsage {
    fn fraction(&self) -> f64 {
        // Token counts stay far below 2^53, so the conversions are exact.
        self.held.load(Ordering::Relaxed) as f64 / self.capacity as f64
    }
}

impl TypedMetric for KvCacheUsage {
    const TYPE: MetricType = MetricType::Gauge;
}

impl EncodeMetric for KvCacheUsage {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        encoder.encode_gauge(&self.fraction())
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

/// A running request's share of the KV cache: its prompt plus the tokens generated so far,
/// released when dropped.
#[derive(Debug)]
pub(crate) struct KvHold {
    tokens: Arc<AtomicU64>,
    held: u64,
}

impl KvHold {
    /// One more generated token is cached.
    pub(crate) fn grow(&mut self) {
        self.held += 1;
        self.tokens.fetch_add(1, Ordering::Relaxed);
    }
}

impl Drop for KvHold {
    fn drop(&mut self) {
        self.tokens.fetch_sub(self.held, Ordering::Relaxed);
    }
}

/// What vLLM records about a request when it finishes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FinishedRequest {
    pub e2e: Duration,
    pub prefill: Duration,
    pub decode: Duration,
    pub prompt_tokens: u32,
    pub generation_tokens: u32,
    pub max_tokens: u32,
}

/// vLLM's help text as prometheus-client should write it: the crate appends a full stop to every
/// help text, so vLLM's own (which end in one) lose theirs here rather than gaining a second.
fn help_text(text: &str) -> &str {
    text.strip_suffix('.').unwrap_or(text)
}

/// vLLM's `build_1_2_5_buckets`: 1, 2, 5, 10, 20, 50, … up to `max_value`.
fn one_two_five_buckets(max_value: u32) -> Vec<f64> {
    let max_value = u64::from(max_value);
    let mut buckets = Vec::new();
    let mut power = 1u64;
    loop {
        for mantissa in [1, 2, 5] {
            let value = mantissa * power;
            if value > max_value {
                return buckets;
            }
            // Token counts stay far below 2^53, so the conversion is exact.
            buckets.push(value as f64);
        }
        power *= 10;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_two_five_buckets_stop_at_the_context_length() {
        assert_eq!(
            one_two_five_buckets(100),
            vec![1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0]
        );
        assert_eq!(one_two_five_buckets(1), vec![1.0]);
        assert_eq!(one_two_five_buckets(32768).last(), Some(&20000.0));
    }

    #[test]
    fn counters_are_exposed_under_vllm_sample_names() {
        let mut registry = Registry::default();
        let metrics = SimMetrics::register(&mut registry, "m", 1024, 1000);
        metrics.first_token(3, Duration::from_millis(5));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
        assert!(
            text.contains("vllm:prompt_tokens_total{model_name=\"m\",engine=\"0\"} 3\n"),
            "{text}"
        );
        assert!(text.contains(
            "vllm:request_success_total{model_name=\"m\",engine=\"0\",finished_reason=\"stop\"} 0\n"
        ));
        assert!(
            text.contains(
                "vllm:time_to_first_token_seconds_count{model_name=\"m\",engine=\"0\"} 1\n"
            )
        );
        assert!(text.contains("vllm:num_requests_running{model_name=\"m\",engine=\"0\"} 0\n"));
    }

    fn encode(registry: &Registry) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, registry).expect("encode");
        text
    }

    #[test]
    fn kv_cache_usage_follows_tokens_held_by_running_requests() {
        let mut registry = Registry::default();
        // Capacity 1000 tokens.
        let metrics = SimMetrics::register(&mut registry, "m", 1024, 1000);
        let usage = "vllm:kv_cache_usage_perc{model_name=\"m\",engine=\"0\"}";
        assert!(encode(&registry).contains(&format!("{usage} 0.0\n")));
        // Two requests admitted with 100 and 150 prompt tokens; the first generates 50 tokens.
        // The second found 48 of its tokens in the prefix cache; a third, looked up with the cache off, counts
        // in neither prefix-cache counter.
        let mut first = metrics.admitted(Duration::ZERO, 100, Some(0));
        let second = metrics.admitted(Duration::ZERO, 150, Some(48));
        for _ in 0..50 {
            first.grow();
        }
        // (100 + 50 + 150) / 1000.
        assert!(
            encode(&registry).contains(&format!("{usage} 0.3\n")),
            "{}",
            encode(&registry)
        );
        drop(first);
        assert!(encode(&registry).contains(&format!("{usage} 0.15\n")));
        drop(second);
        let text = encode(&registry);
        assert!(text.contains(&format!("{usage} 0.0\n")));
        assert!(text.contains("# TYPE vllm:kv_cache_usage_perc gauge\n"));
        drop(metrics.admitted(Duration::ZERO, 70, None));
        let text = encode(&registry);
        // Queries count every looked-up prompt token (100 + 150), hits the cached ones; no preemptions.
        assert!(
            text.contains("vllm:prefix_cache_queries_total{model_name=\"m\",engine=\"0\"} 250\n")
        );
        assert!(text.contains("vllm:prefix_cache_hits_total{model_name=\"m\",engine=\"0\"} 48\n"));
        assert!(text.contains("vllm:num_preemptions_total{model_name=\"m\",engine=\"0\"} 0\n"));
        assert!(text.contains(
            "# HELP vllm:prefix_cache_queries Prefix cache queries, in terms of number of queried tokens.\n"
        ));
    }
}
