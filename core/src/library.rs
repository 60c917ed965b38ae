//! The bundled profile library: our own `workload/profiles/<harness>/<name>.yaml.in` files, compiled in.

use crate::render::nearest;

/// One template of the bundled library.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuiltinProfile {
    /// The harness directory, e.g. `inference-perf`.
    pub harness: &'static str,
    /// The profile name, the file name without `.yaml.in`, e.g. `sanity_random`.
    pub name: &'static str,
    /// The `yaml.in` template text.
    pub template: &'static str,
}

impl BuiltinProfile {
    /// The template's file name, as errors name it: `inference-perf/sanity_random.yaml.in`.
    pub fn file_name(&self) -> String {
        format!("{}/{}.yaml.in", self.harness, self.name)
    }

    /// What the profile measures, in one line (`llmbench profiles list`). The templates open with a paragraph of
    /// comments, too long for a table; these lines say the same in short, and a test keeps one for every profile.
    pub fn purpose(&self) -> &'static str {
        PURPOSES
            .iter()
            .find(|(harness, name, _)| *harness == self.harness && *name == self.name)
            .map_or("", |(_, _, purpose)| purpose)
    }
}

/// One line per bundled profile: harness, name, what it measures.
const PURPOSES: &[(&str, &str, &str)] = &[
    (
        "aiperf",
        "config_latency",
        "AIPerf's YAML config: its latency test, Poisson 20 req/s for 120 s",
    ),
    (
        "aiperf",
        "dataset",
        "Mooncake trace replay: at its timestamps, or 16 sessions at a time",
    ),
    (
        "aiperf",
        "embeddings",
        "Embeddings of 128-token texts, 100 requests, 4 at a time",
    ),
    (
        "aiperf",
        "images",
        "Chat with 2 noise images a request (PNG or JPEG, about 512 px), 40 requests, 4 at a time",
    ),
    (
        "aiperf",
        "rankings",
        "Rankings on /v2/rerank: a 32-token query, about 10 passages, 200 requests, 4 at a time",
    ),
    (
        "aiperf",
        "quickstart",
        "AIPerf's vLLM quick start: streamed chat, Poisson 32 req/s, 64 requests",
    ),
    (
        "aiperf",
        "synthetic",
        "1000/200-token chat, 500 requests, 16 at a time",
    ),
    (
        "fmperf",
        "large_model_long_input",
        "3 users, 5-round chats over 256 + 1024 words, 0.1 to 5 QPS, 300 s each",
    ),
    (
        "fmperf",
        "medium_model_long_input",
        "3 users, 5-round chats over 512 + 2048 words, 0.1 to 5 QPS, 300 s each",
    ),
    (
        "fmperf",
        "sanity_long-input",
        "LMBenchmark long-input smoke test: one user, 30 s at 1.34 QPS",
    ),
    (
        "fmperf",
        "sanity_sharegpt",
        "LMBenchmark ShareGPT at 1.34 QPS (refused: needs the files of LMBenchmark's image)",
    ),
    (
        "fmperf",
        "sanity_short-input",
        "LMBenchmark short-input at 0.5 QPS: 320 users in 20-round chats",
    ),
    (
        "fmperf",
        "small_model_long_input",
        "Long-input multi-round QA, one user, 0.1 to 0.5 QPS, 60 s each",
    ),
    (
        "guidellm",
        "concurrent-1k-1k",
        "1000/1000-token chat at 300, 200, 100, 50, 1 streams",
    ),
    (
        "guidellm",
        "concurrent-heavy-heterogeneous",
        "Widely spread chat sizes (up to 30k in, 8k out) at 300 to 1 streams",
    ),
    (
        "guidellm",
        "multi-turn",
        "Five-turn chats over 10000-token shared prefixes, 32 to 512 streams",
    ),
    (
        "guidellm",
        "quickstart",
        "guidellm's Quick Start: a 30-second sweep, 256/128-token chat",
    ),
    (
        "guidellm",
        "sanity_concurrent",
        "30-second smoke test, 2 streams",
    ),
    (
        "guidellm",
        "sanity_embeddings",
        "30-second smoke test of the embeddings API at 1 req/s",
    ),
    (
        "guidellm",
        "sanity_random",
        "30-second smoke test at 1 req/s",
    ),
    (
        "guidellm",
        "sanity_responses",
        "30-second smoke test of OpenAI's Responses API at 1 req/s",
    ),
    (
        "guidellm",
        "summarization_synthetic",
        "Synthetic summarization (~2k in, ~128 out) at 1, 2, 4, 8 req/s",
    ),
    (
        "guidellm",
        "sweep_random",
        "Rate sweep: synchronous, throughput, then 8 rates between them, 30 s each",
    ),
    (
        "inference-perf",
        "agent_llm_traces_v2",
        "Replay of recorded agent sessions (agent-llm-traces-v2), 64 at once",
    ),
    (
        "inference-perf",
        "agentic_code_generation",
        "Synthetic coding-agent conversations, huge contexts, 5 to 40 concurrent",
    ),
    (
        "inference-perf",
        "chatbot_sharegpt",
        "ShareGPT chat at 1, 2, 4, 8 req/s",
    ),
    (
        "inference-perf",
        "chatbot_synthetic",
        "Synthetic chat (~4k in, ~1k out) at 1, 2, 4, 8 req/s",
    ),
    (
        "inference-perf",
        "code_completion_synthetic",
        "Synthetic code completion (~2k in, ~128 out) at 1, 2, 4, 8 req/s",
    ),
    (
        "inference-perf",
        "guide_kimi-k3-h100_1",
        "Kimi K3 on TP8 x PP4: 4000/1000 tokens, concurrency 1 to 20",
    ),
    (
        "inference-perf",
        "guide_multimodal-serving_1",
        "Chat with four 720p images per request, 5 to 35 req/s after a warm-up",
    ),
    (
        "inference-perf",
        "guide_optimized-baseline_1",
        "150 shared 6000-token prefixes, Poisson 3 to 60 req/s (prefix-cache routing)",
    ),
    (
        "inference-perf",
        "guide_optimized-baseline_2",
        "150 shared 2000-token prefixes, Poisson 1 to 15 req/s",
    ),
    (
        "inference-perf",
        "guide_p2p-kv-cache-sharing_1",
        "192 conversations with private ~48k-token prefixes, 128 in flight",
    ),
    (
        "inference-perf",
        "guide_pd-disaggregation_1",
        "Prefill-heavy 5000/250 tokens at 45 req/s (P/D disaggregation)",
    ),
    (
        "inference-perf",
        "guide_pd-disaggregation_2",
        "Balanced 1024/1024 tokens at 1 req/s (P/D disaggregation)",
    ),
    (
        "inference-perf",
        "guide_precise-prefix-cache-routing_1",
        "Same traffic as optimized-baseline_1, for precise prefix-cache routing",
    ),
    (
        "inference-perf",
        "guide_precise-prefix-cache-routing_2",
        "150 shared 2000-token prefixes, Poisson 3 to 30 req/s",
    ),
    (
        "inference-perf",
        "guide_predicted-latency-routing_1",
        "32 agent-style conversations of uneven size, 32 at a time",
    ),
    (
        "inference-perf",
        "guide_tiered-prefix-cache_1",
        "250 shared 16000-token prefixes (more than GPU memory), Poisson 5 to 40 req/s",
    ),
    (
        "inference-perf",
        "guide_wide-ep-lws_1",
        "2048 concurrent 2000/2000-token requests: peak throughput of wide EP",
    ),
    (
        "inference-perf",
        "interactive-chat",
        "Multi-turn chat sessions with think time, 10 to 50 concurrent users",
    ),
    (
        "inference-perf",
        "otel_traces",
        "Replay of your own OpenTelemetry traces from the dataset directory",
    ),
    (
        "inference-perf",
        "random_concurrent",
        "Long prompts (5k-10k tokens), 1, 2, 4, 8 concurrent users",
    ),
    (
        "inference-perf",
        "sanity_anthropic_messages",
        "30-second smoke test of Anthropic's Messages API at 1 req/s",
    ),
    (
        "inference-perf",
        "sanity_lora",
        "30-second smoke test of LoRA traffic split 1:3 over two adapters, 2 req/s",
    ),
    (
        "inference-perf",
        "sanity_random",
        "30-second smoke test at 1 req/s",
    ),
    (
        "inference-perf",
        "sanity_structured_output",
        "30-second smoke test of structured output (a JSON schema in response_format) at 1 req/s",
    ),
    (
        "inference-perf",
        "shared_prefix_multi_turn_chat",
        "20 users in growing sessions over one shared prefix, 2 to 5 req/s",
    ),
    (
        "inference-perf",
        "shared_prefix_synthetic",
        "32 x 32 shared-prefix prompts, 2 to 20 req/s",
    ),
    (
        "inference-perf",
        "shared_prefix_synthetic_heavy",
        "Autoscaling check: a light stage, then a load that needs a second replica",
    ),
    (
        "inference-perf",
        "shared_prefix_synthetic_short",
        "One minute of the shared-prefix workload at 1 req/s",
    ),
    (
        "inference-perf",
        "summarization_synthetic",
        "Synthetic summarization (~2k in, ~256 out) at 1, 2, 4, 8 req/s",
    ),
    (
        "inference-perf",
        "sweep_random",
        "Rate sweep: a saturation probe, then 5 stages of 60 s up to it",
    ),
    (
        "inference-perf",
        "weka_traces",
        "Replay of coding-agent sessions (WEKA traces), 64 at once",
    ),
    (
        "inferencemax",
        "random_concurrent",
        "32 single-stream 10000/1000-token requests, no rate limit",
    ),
    (
        "mlperf",
        "llama3_1-8b_offline",
        "MLPerf Llama-3.1-8B Offline: every sample at once, 128 output tokens",
    ),
    (
        "mlperf",
        "llama3_1-8b_server",
        "MLPerf Llama-3.1-8B Server: 10 QPS for 10 min, TTFT 2 s / TPOT 100 ms p99",
    ),
    (
        "nop",
        "nop",
        "No traffic: model load time read from the vLLM logs",
    ),
    (
        "vllm-benchmark",
        "fixed_dataset",
        "Custom prompt file, 2000 prompts, 4 at a time",
    ),
    (
        "vllm-benchmark",
        "random_concurrent",
        "32 single-stream 10000/1000-token requests",
    ),
    (
        "vllm-benchmark",
        "sanity_embeddings",
        "Embeddings smoke test: 40 prompts, 4 per request, 2 req/s",
    ),
    (
        "vllm-benchmark",
        "sanity_lora",
        "LoRA smoke test: 20 prompts sent in turn to two adapters, 2 at a time",
    ),
    (
        "vllm-benchmark",
        "sanity_random",
        "20-prompt smoke test with the tool's default lengths",
    ),
    (
        "vllm-benchmark",
        "sanity_random_mm",
        "Images smoke test: 20 chat prompts with 1 to 3 JPEG images each, 2 req/s",
    ),
    (
        "vllm-benchmark",
        "sanity_rerank",
        "Rerank smoke test: a query and 4 documents per request, 2 req/s",
    ),
    (
        "vllm-benchmark",
        "sharegpt",
        "ShareGPT dataset, 2000 prompts at 8 req/s",
    ),
    (
        "vllm-benchmark",
        "sonnet_concurrent",
        "Sonnet chat prompts with a 6144-token shared prefix, 20 req/s",
    ),
];

include!(concat!(env!("OUT_DIR"), "/profiles.rs"));

/// Looking a profile up in the library failed.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum LibraryError {
    #[error("no bundled profiles for harness `{harness}`; harnesses with profiles: {}{}", .known.join(", "), hint(.suggestion))]
    UnknownHarness {
        harness: String,
        known: Vec<&'static str>,
        suggestion: Option<&'static str>,
    },
    #[error("no bundled profile `{name}` for harness `{harness}`; available: {}{}", .available.join(", "), hint(.suggestion))]
    UnknownProfile {
        harness: String,
        name: String,
        available: Vec<&'static str>,
        suggestion: Option<&'static str>,
    },
}

fn hint(suggestion: &Option<&'static str>) -> String {
    suggestion
        .map(|s| format!(" — did you mean `{s}`?"))
        .unwrap_or_default()
}

/// Every bundled profile, sorted by harness and name.
pub fn builtin_profiles() -> &'static [BuiltinProfile] {
    PROFILES
}

/// The harnesses that have bundled profiles.
pub fn harnesses() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = PROFILES.iter().map(|p| p.harness).collect();
    names.dedup();
    names
}

/// Finds `name` (with or without `.yaml.in` / `.yaml`) among the profiles of `harness`.
pub fn builtin_profile(harness: &str, name: &str) -> Result<&'static BuiltinProfile, LibraryError> {
    let name = name.strip_suffix(".in").unwrap_or(name);
    let name = name.strip_suffix(".yaml").unwrap_or(name);
    let of_harness: Vec<&'static BuiltinProfile> =
        PROFILES.iter().filter(|p| p.harness == harness).collect();
    if of_harness.is_empty() {
        let known = harnesses();
        return Err(LibraryError::UnknownHarness {
            harness: harness.to_owned(),
            suggestion: nearest(harness, known.iter().copied()),
            known,
        });
    }
    if let Some(found) = of_harness.iter().find(|p| p.name == name) {
        return Ok(found);
    }
    let available: Vec<&'static str> = of_harness.iter().map(|p| p.name).collect();
    Err(LibraryError::UnknownProfile {
        harness: harness.to_owned(),
        name: name.to_owned(),
        suggestion: nearest(name, available.iter().copied()),
        available,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_bundled_profile_has_a_one_line_purpose_and_every_purpose_a_profile() {
        for profile in builtin_profiles() {
            let purpose = profile.purpose();
            assert!(
                !purpose.is_empty(),
                "{} has no purpose in library.rs PURPOSES",
                profile.file_name()
            );
            assert!(
                !purpose.contains('\n') && purpose.len() <= 90,
                "{}: a purpose is one short line",
                profile.file_name()
            );
        }
        for (harness, name, _) in PURPOSES {
            assert!(
                builtin_profile(harness, name).is_ok(),
                "PURPOSES names {harness}/{name}, which is not bundled"
            );
        }
    }
}
