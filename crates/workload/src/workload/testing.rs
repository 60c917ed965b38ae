//! Test helpers for whole-profile tests, here and in the layers above (feature `testing`): the upstream
//! llm-d-benchmark profile library as the renderer would fill it, parsed.

use super::{Harness, ParseOptions, Parsed, WorkloadError, parse_profile};

/// The upstream profile library, by harness.
pub const PROFILES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tests/fixtures/llm-d-benchmark/profiles"
);

/// The values the renderer would substitute, fixed for the tests.
pub fn render(text: &str) -> String {
    let mut out = text.to_string();
    for (token, value) in [
        // Longer names first: a token that prefixes another must not eat it.
        (
            "REPLACE_ENV_LLMDBENCH_DEPLOY_CURRENT_MAX_MODEL_LEN",
            "16384",
        ),
        (
            "REPLACE_ENV_LLMDBENCH_DEPLOY_CURRENT_TOKENIZER",
            "meta-llama/Llama-3.1-8B",
        ),
        (
            "REPLACE_ENV_LLMDBENCH_DEPLOY_CURRENT_MODEL",
            "meta-llama/Llama-3.1-8B",
        ),
        (
            "REPLACE_ENV_LLMDBENCH_HARNESS_STACK_ENDPOINT_URL",
            "http://127.0.0.1:8000",
        ),
        (
            "REPLACE_ENV_LLMDBENCH_RUN_DATASET_DIR",
            "/requests/datasets",
        ),
        ("REPLACE_ENV_LLMDBENCH_RUN_DATASET_FILE", "data.json"),
    ] {
        out = out.replace(token, value);
    }
    out
}

pub fn upstream(harness: &str, file: &str) -> Result<Parsed, WorkloadError> {
    let path = format!("{PROFILES}/{harness}/{file}");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let h: Harness = harness.parse().unwrap();
    parse_profile(h, file, &render(&text), &ParseOptions::default())
}
