//! The same setting in each dialect, so an override written with another dialect's path (inference-perf's
//! `load.stages.0.rate` on a guidellm profile) is answered with the path this dialect uses.

use llmbench_core::harness::Harness;

/// One dialect's path for a setting: `N` stands for any list index; `shown` is what the hint prints.
struct Path {
    pattern: &'static str,
    shown: &'static str,
}

/// A setting every dialect has under its own name, and where each dialect keeps it (`None`: it has no such key).
struct Setting {
    what: &'static str,
    inference_perf: Option<Path>,
    guidellm: Option<Path>,
    vllm: Option<Path>,
    aiperf: Option<Path>,
    /// What to say when a dialect has no such key.
    absent: &'static str,
}

const fn path(pattern: &'static str, shown: &'static str) -> Option<Path> {
    Some(Path { pattern, shown })
}

const SETTINGS: [Setting; 6] = [
    Setting {
        what: "request rate",
        inference_perf: path("load.stages.N.rate", "`load.stages.0.rate` (one per stage)"),
        guidellm: path("spec.profile.rate", "`spec.profile.rate`"),
        vllm: path("request-rate", "`request-rate`"),
        aiperf: None,
        absent: "has no request rate (llmbench runs its profiles at a fixed `concurrency`)",
    },
    Setting {
        what: "concurrency",
        inference_perf: path(
            "load.stages.N.concurrency_level",
            "`load.stages.0.concurrency_level` (one per stage, with `load.type: concurrent`)",
        ),
        guidellm: path(
            "spec.profile.streams",
            "`spec.profile.streams` (with `spec.profile.kind: concurrent`)",
        ),
        vllm: path("max-concurrency", "`max-concurrency`"),
        aiperf: path("concurrency", "`concurrency`"),
        absent: "has no concurrency",
    },
    Setting {
        what: "duration",
        inference_perf: path(
            "load.stages.N.duration",
            "`load.stages.0.duration` (one per stage)",
        ),
        guidellm: path(
            "spec.constraints.N.seconds",
            "the `seconds` of its `max_duration` constraint (e.g. `spec.constraints.0.seconds`)",
        ),
        vllm: None,
        aiperf: None,
        absent: "has no duration: it sends a number of requests (`num-prompts` in vllm-benchmark, `request-count` in \
                 aiperf)",
    },
    Setting {
        what: "request count",
        inference_perf: path(
            "load.stages.N.num_requests",
            "`load.stages.0.num_requests` (one per stage)",
        ),
        guidellm: path(
            "spec.constraints.N.count",
            "the `count` of its `max_requests` constraint (e.g. `spec.constraints.0.count`)",
        ),
        vllm: path("num-prompts", "`num-prompts`"),
        aiperf: path("request-count", "`request-count`"),
        absent: "has no request count",
    },
    Setting {
        what: "input length",
        inference_perf: path(
            "data.input_distribution.mean",
            "`data.input_distribution.mean` (with `min`, `max` and `std_dev` beside it)",
        ),
        guidellm: path("spec.data.N.prompt_tokens", "`spec.data.0.prompt_tokens`"),
        vllm: path(
            "random-input-len",
            "`random-input-len` (with `dataset-name: random`)",
        ),
        aiperf: path("isl", "`isl`"),
        absent: "has no input length",
    },
    Setting {
        what: "output length",
        inference_perf: path(
            "data.output_distribution.mean",
            "`data.output_distribution.mean` (with `min`, `max` and `std_dev` beside it)",
        ),
        guidellm: path("spec.data.N.output_tokens", "`spec.data.0.output_tokens`"),
        vllm: path(
            "random-output-len",
            "`random-output-len` (with `dataset-name: random`)",
        ),
        aiperf: path("osl", "`osl`"),
        absent: "has no output length",
    },
];

impl Setting {
    /// Each dialect's path, named by the dialect.
    fn paths(&self) -> [(&'static str, Option<&Path>); 4] {
        [
            ("inference-perf", self.inference_perf.as_ref()),
            ("guidellm", self.guidellm.as_ref()),
            ("vllm-benchmark", self.vllm.as_ref()),
            ("aiperf", self.aiperf.as_ref()),
        ]
    }

    fn path_of(&self, harness: Harness) -> Option<Option<&Path>> {
        match harness {
            Harness::InferencePerf => Some(self.inference_perf.as_ref()),
            Harness::Guidellm => Some(self.guidellm.as_ref()),
            Harness::VllmBenchmark | Harness::Inferencemax => Some(self.vllm.as_ref()),
            Harness::Aiperf => Some(self.aiperf.as_ref()),
            Harness::Nop | Harness::Mlperf | Harness::Fmperf => None,
        }
    }
}

/// Whether override `key` names `pattern`: the same segments (`N` matching any index), or a bare key equal to the
/// pattern's last segment (a bare key matches that name at any depth).
fn matches(key: &str, pattern: &str) -> bool {
    let wanted: Vec<&str> = pattern.split('.').collect();
    let given: Vec<&str> = key.split('.').collect();
    if given.len() == 1 {
        return wanted.last() == given.first();
    }
    given.len() == wanted.len()
        && given
            .iter()
            .zip(&wanted)
            .all(|(g, w)| g == w || (*w == "N" && g.trim_start_matches('-').parse::<u64>().is_ok()))
}

/// For an override `key` that matched nothing in a `harness` profile: when it is another dialect's path for a
/// setting, where this dialect keeps that setting.
pub fn hint(harness: Harness, key: &str) -> Option<String> {
    SETTINGS.iter().find_map(|setting| {
        let here = setting.path_of(harness)?;
        if here.is_some_and(|p| matches(key, p.pattern)) {
            return None;
        }
        let (dialect, _) = setting
            .paths()
            .into_iter()
            .find(|(_, p)| p.is_some_and(|p| matches(key, p.pattern)))?;
        let article = if harness.as_str().starts_with(['a', 'e', 'i', 'o', 'u']) {
            "an"
        } else {
            "a"
        };
        Some(match here {
            Some(p) => format!(
                "`{key}` is {dialect}'s {}; in {article} {harness} profile it is {}",
                setting.what, p.shown
            ),
            None => format!(
                "`{key}` is {dialect}'s {}; {article} {harness} profile {}",
                setting.what, setting.absent
            ),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_inference_perf_rate_on_a_guidellm_profile_points_to_the_guidellm_key() {
        assert_eq!(
            hint(Harness::Guidellm, "load.stages.0.rate").as_deref(),
            Some(
                "`load.stages.0.rate` is inference-perf's request rate; in a guidellm profile it is \
                 `spec.profile.rate`"
            )
        );
    }

    #[test]
    fn a_guidellm_path_on_an_inference_perf_profile_points_back() {
        let text = hint(Harness::InferencePerf, "spec.profile.streams").expect("hint");
        assert!(text.contains("`load.stages.0.concurrency_level`"), "{text}");
    }

    #[test]
    fn vllm_flags_map_to_the_other_dialects_and_bare_keys_count() {
        let text = hint(Harness::InferencePerf, "max-concurrency").expect("hint");
        assert!(
            text.starts_with("`max-concurrency` is vllm-benchmark's concurrency"),
            "{text}"
        );
        let text = hint(Harness::VllmBenchmark, "load.stages.0.duration").expect("hint");
        assert!(text.contains("has no duration"), "{text}");
        let text = hint(Harness::Inferencemax, "spec.data.0.prompt_tokens").expect("hint");
        assert!(text.contains("`random-input-len`"), "{text}");
    }

    #[test]
    fn no_hint_for_a_dialects_own_path_or_an_unknown_key() {
        assert_eq!(hint(Harness::InferencePerf, "load.stages.3.rate"), None);
        assert_eq!(hint(Harness::Guidellm, "spec.profile.rat"), None);
        assert_eq!(hint(Harness::Mlperf, "load.stages.0.rate"), None);
    }
}
