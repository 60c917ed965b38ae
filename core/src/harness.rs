//! The harnesses: which load generator's configuration format a workload profile is written in. The names are
//! those of profiles, result directories, the CLI and the CRDs' `harness` field.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A profile dialect: which load generator's configuration format the workload profile is written in.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[serde(rename_all = "kebab-case")]
pub enum Harness {
    /// kubernetes-sigs/inference-perf configuration files.
    InferencePerf,
    /// vllm-project/guidellm scenarios (the v0.7 `spec:` format and the older flat formats).
    Guidellm,
    /// `vllm bench serve` flag maps.
    VllmBenchmark,
    /// InferenceMAX `bench_serving` flag maps.
    Inferencemax,
    /// llm-d-benchmark's `aiperf` flag maps (`aiperf profile --key=value`): synthetic prompts or Mooncake traces.
    Aiperf,
    /// No traffic: the launcher only collects (llm-d-benchmark's `nop`).
    Nop,
    /// MLPerf Inference LoadGen settings (Offline, Server, SingleStream scenarios; `user.conf` keys), judged
    /// VALID or INVALID by LoadGen's rules.
    Mlperf,
    /// llm-d-benchmark's fmperf profiles: fmperf's `LMBenchmarkWorkload`, LMCache's multi-round QA benchmark.
    Fmperf,
}

impl Harness {
    /// Every harness, in the order `--help` lists them.
    pub const ALL: [Harness; 8] = [
        Harness::InferencePerf,
        Harness::Guidellm,
        Harness::VllmBenchmark,
        Harness::Inferencemax,
        Harness::Aiperf,
        Harness::Nop,
        Harness::Mlperf,
        Harness::Fmperf,
    ];

    /// The name used in profiles, directories and the CLI, e.g. `inference-perf`.
    pub fn as_str(self) -> &'static str {
        match self {
            Harness::InferencePerf => "inference-perf",
            Harness::Guidellm => "guidellm",
            Harness::VllmBenchmark => "vllm-benchmark",
            Harness::Inferencemax => "inferencemax",
            Harness::Aiperf => "aiperf",
            Harness::Nop => "nop",
            Harness::Mlperf => "mlperf",
            Harness::Fmperf => "fmperf",
        }
    }
}

impl std::fmt::Display for Harness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Harness {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Harness::ALL
            .into_iter()
            .find(|h| h.as_str() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Harness::ALL.iter().map(|h| h.as_str()).collect();
                let hint = crate::render::nearest(s, names.iter().copied())
                    .map(|n| format!(" — did you mean `{n}`?"))
                    .unwrap_or_default();
                format!(
                    "unknown harness `{s}`; expected one of {}{hint}",
                    names.join(", ")
                )
            })
    }
}
