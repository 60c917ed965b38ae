//! llm-d-benchmark's `fmperf` profiles → LMBenchmark's multi-round QA stages.
//!
//! A profile is the keyword arguments of fmperf's `LMBenchmarkWorkload` (`fmperf/WorkloadSpecs.py`, loaded with
//! `cls(**yaml.safe_load(file))`, so an unknown key is a `TypeError` upstream and is refused here). fmperf passes
//! them as environment variables to the `lmcache/lmcache-benchmark` job, which runs LMCache/LMBenchmark's
//! `run_benchmarks.sh MODEL BASE_URL KEY SCENARIOS QPS…` (pinned at a306df2, the image's state when llm-d-benchmark
//! dropped fmperf in 7e754f2). For each QPS value, in profile order, the scenario's script runs:
//!
//! - a warm-up `multi-round-qa.py`: 1 user, 2 rounds, qps 2, `--time num_users_warmup / 2` (bash integer
//!   division), the stage's `--init-user-id`;
//! - the run: `num_users`, `num_rounds`, the QPS value, `--time test_duration`, the same `--init-user-id`;
//! - `sleep 10`, and `init_user_id += num_users_warmup` for the next QPS value.
//!
//! Every `multi-round-qa.py` first sends `warmup_engine`'s 10 requests and waits for them.
//!
//! Scenarios: `long-input` (`long_input_short_output_run.sh`) reads the profile's figures from the environment.
//! `short-input` (`short_input_short_output.sh`) assigns its own: 320 users, 20 rounds, answers of 20 tokens, a
//! system prompt and history of `echo -n 0 | wc -w` = `echo -n 256 | wc -w` = 1 word, `--time 100`, a warm-up of
//! `--time 200`, user ids from 1 stepping by 400; of the profile it reads only `qps_values`, `model_name` and
//! `use_chat_completions` (which `multi-round-qa.py` reads from the environment). llmbench does the same, and
//! says so in a warning naming the keys the script does not read. `sharegpt` runs `sharegpt-qa.py` over the
//! image's `sharegpt/run.json` and `warmup.json`, which llmbench does not have: refused.

use std::time::Duration;

use super::error::{WarningKind, WorkloadError};
use super::model::{Api, ApiKind};
use super::reader::{Ctx, MapReader};
use super::yaml::Node;
use crate::lmbench::SessionConfig;

/// A parsed fmperf profile.
#[derive(Debug, Clone, PartialEq)]
pub struct FmperfWorkload {
    /// Streaming always (`stream=True`); `use_chat_completions` picks the API; `model_name` the model.
    pub api: Api,
    pub scenario: Scenario,
    /// One per `qps_values` entry, in order.
    pub stages: Vec<QpsStage>,
    /// The pause after each QPS value's run (`sleep 10`).
    pub pause: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    ShortInput,
    LongInput,
}

impl Scenario {
    /// The script's output name, `${KEY}_{scenario}…` with KEY = `/requests/<stack>/LMBench`.
    pub fn csv_name(self, qps_text: &str) -> String {
        match self {
            // short_input_short_output.sh: "${KEY}_qps${qps}.csv" with KEY "…_short_input".
            Scenario::ShortInput => format!("LMBench_short_input_qps{qps_text}.csv"),
            // long_input_short_output_run.sh: "${KEY}_output_${qps}.csv" with KEY "…_long_input".
            Scenario::LongInput => format!("LMBench_long_input_output_{qps_text}.csv"),
        }
    }
}

/// One QPS value: the warm-up invocation, then the measured one.
#[derive(Debug, Clone, PartialEq)]
pub struct QpsStage {
    /// The value as the profile wrote it (it names the CSV).
    pub qps_text: String,
    pub warmup: SessionConfig,
    pub run: SessionConfig,
}

/// `LMBenchmarkWorkload.__init__`'s defaults.
const DEFAULT_SCENARIO: &str = "sharegpt";
const DEFAULT_QPS_VALUES: &str = "0.5 0.67 0.84 1 1.17 1.34";
const DEFAULT_NUM_USERS_WARMUP: u64 = 20;
const DEFAULT_NUM_USERS: u64 = 15;
const DEFAULT_NUM_ROUNDS: u64 = 20;
const DEFAULT_SYSTEM_PROMPT: u64 = 1000;
const DEFAULT_CHAT_HISTORY: u64 = 20000;
const DEFAULT_ANSWER_LEN: u64 = 100;
const DEFAULT_INIT_USER_ID: u64 = 1;
const DEFAULT_TEST_DURATION: u64 = 100;

/// The figures `short_input_short_output.sh` assigns itself.
const SHORT_INPUT: Figures = Figures {
    num_users_warmup: 400,
    num_users: 320,
    num_rounds: 20,
    system_prompt: 1,
    chat_history: 1,
    answer_len: 20,
    init_user_id: 1,
    test_duration: 100,
};

/// The keys `short_input_short_output.sh` overrides with its own figures.
const SHORT_INPUT_IGNORES: [&str; 8] = [
    "num_users_warmup",
    "num_users",
    "num_rounds",
    "system_prompt",
    "chat_history",
    "answer_len",
    "init_user_id",
    "test_duration",
];

#[derive(Debug, Clone, Copy)]
struct Figures {
    num_users_warmup: u64,
    num_users: u64,
    num_rounds: u64,
    system_prompt: u64,
    chat_history: u64,
    answer_len: u64,
    init_user_id: u64,
    test_duration: u64,
}

/// Parses an fmperf (`LMBenchmarkWorkload`) profile.
pub(crate) fn parse(ctx: &mut Ctx, doc: &Node) -> Result<FmperfWorkload, WorkloadError> {
    let mut root = MapReader::root(ctx, doc)?;
    let model = root
        .require(
            ctx,
            "model_name",
            "LMBenchmarkWorkload takes the model as its first argument",
        )?
        .str(ctx)?
        .to_owned();
    let base_url = match root.get("base_url") {
        Some(f) => Some(f.str(ctx)?.to_owned()),
        None => None,
    };
    // They pick the benchmark job's image, service account and results volume, which the operator owns for
    // llmbench's own launcher pod; `overwrite` is a WorkloadSpec field LMBenchmark never reads.
    for key in ["image", "service_account", "pvc_name", "overwrite"] {
        root.skip(key);
    }
    root.ignore(
        ctx,
        "chat_template",
        "fmperf passes it as CHAT_TEMPLATE, which LMBenchmark's scripts never read",
    );
    let use_chat = match root.get("use_chat_completions") {
        // fmperf exports `str(value)`; multi-round-qa.py compares its lower case with "true".
        Some(f) => f.bool(ctx)?,
        None => true,
    };
    let scenario_at = root.get("scenarios");
    let scenario_text = match &scenario_at {
        Some(f) => f.str(ctx)?,
        None => DEFAULT_SCENARIO,
    };
    let scenario_line = scenario_at.as_ref().map_or(0, |f| f.line);
    let scenario = match scenario_text {
        "short-input" => Scenario::ShortInput,
        "long-input" => Scenario::LongInput,
        "sharegpt" | "all" => {
            return Err(ctx.unsupported(
                "scenarios",
                scenario_line,
                format!(
                    "`{scenario_text}` runs LMBenchmark's sharegpt-qa.py over the ShareGPT conversations baked into \
                     its image (sharegpt/run.json, warmup.json); that dataset and script are not in llmbench — use \
                     `short-input` or `long-input`"
                ),
            ));
        }
        "long-long" => {
            return Err(ctx.unsupported(
                "scenarios",
                scenario_line,
                "`long-long` (long_input_long_output.sh) — use `short-input` or `long-input`",
            ));
        }
        other => {
            // run_benchmarks.sh would take an unknown word for a QPS value and run every scenario ("all").
            return Err(ctx.invalid(
                "scenarios",
                scenario_line,
                format!(
                    "`{other}` is not one scenario LMBenchmark knows (short-input, long-input, sharegpt, \
                     long-long, all); fmperf passes the value as one argument"
                ),
            ));
        }
    };
    let qps_at = root.get("qps_values");
    let qps_text = match &qps_at {
        Some(f) => f.str(ctx)?,
        None => DEFAULT_QPS_VALUES,
    };
    let qps_line = qps_at.as_ref().map_or(0, |f| f.line);
    let mut qps_values = Vec::new();
    for word in qps_text.split_whitespace() {
        let qps: f64 = word.parse().map_err(|_| {
            ctx.invalid(
                "qps_values",
                qps_line,
                format!("`{word}` is not a number (multi-round-qa.py's --qps is a float)"),
            )
        })?;
        if !(qps.is_finite() && qps > 0.0) {
            return Err(ctx.invalid(
                "qps_values",
                qps_line,
                format!("`{word}`: each QPS must be a finite number above 0 (the user gap is num_users / qps)"),
            ));
        }
        qps_values.push((word.to_owned(), qps));
    }
    if qps_values.is_empty() {
        return Err(ctx.invalid(
            "qps_values",
            qps_line,
            "no QPS value: run_benchmarks.sh would fall back to the script's own default",
        ));
    }
    let mut figure =
        |ctx: &mut Ctx, key: &str, default: u64| -> Result<(u64, u32), WorkloadError> {
            match root.get(key) {
                Some(f) => Ok((f.u64(ctx)?, f.line)),
                None => Ok((default, 0)),
            }
        };
    let (num_users_warmup, _) = figure(ctx, "num_users_warmup", DEFAULT_NUM_USERS_WARMUP)?;
    let (num_users, users_line) = figure(ctx, "num_users", DEFAULT_NUM_USERS)?;
    let (num_rounds, rounds_line) = figure(ctx, "num_rounds", DEFAULT_NUM_ROUNDS)?;
    let (system_prompt, _) = figure(ctx, "system_prompt", DEFAULT_SYSTEM_PROMPT)?;
    let (chat_history, _) = figure(ctx, "chat_history", DEFAULT_CHAT_HISTORY)?;
    let (answer_len, _) = figure(ctx, "answer_len", DEFAULT_ANSWER_LEN)?;
    let (init_user_id, _) = figure(ctx, "init_user_id", DEFAULT_INIT_USER_ID)?;
    let (test_duration, _) = figure(ctx, "test_duration", DEFAULT_TEST_DURATION)?;
    let unknown: Vec<(String, u32)> = root.unread().map(|k| (k.name.clone(), k.line)).collect();
    if let Some((key, line)) = unknown.first() {
        let suggestion = root
            .nearest_known(key)
            .map(|k| format!(" — did you mean `{k}`?"))
            .unwrap_or_default();
        return Err(ctx.invalid(
            key,
            *line,
            format!(
                "not an argument of fmperf's LMBenchmarkWorkload (upstream fails with a TypeError){suggestion}"
            ),
        ));
    }
    let figures = match scenario {
        Scenario::LongInput => {
            for (value, key, line) in [
                (num_users, "num_users", users_line),
                (num_rounds, "num_rounds", rounds_line),
            ] {
                if value == 0 {
                    // num_users 0 divides by zero; num_rounds 0 makes a negative session time upstream.
                    return Err(ctx.invalid(key, line, "must be at least 1"));
                }
            }
            Figures {
                num_users_warmup,
                num_users,
                num_rounds,
                system_prompt,
                chat_history,
                answer_len,
                init_user_id,
                test_duration,
            }
        }
        Scenario::ShortInput => {
            let present: Vec<&str> = SHORT_INPUT_IGNORES
                .iter()
                .copied()
                .filter(|k| doc.get(k).is_some())
                .collect();
            if !present.is_empty() {
                ctx.warn(
                    "scenarios",
                    scenario_line,
                    WarningKind::Ignored,
                    format!(
                        "LMBenchmark's short-input script sets its own figures (320 users, 20 rounds, 1-word \
                         prompts, 20-token answers, 100 s runs after 200 s warm-ups) and does not read {}; \
                         llmbench runs it as upstream does",
                        present.join(", ")
                    ),
                );
            }
            SHORT_INPUT
        }
    };
    let u32_of = |ctx: &Ctx, key: &str, v: u64| {
        u32::try_from(v).map_err(|_| ctx.invalid(key, 0, format!("{v} is too large")))
    };
    let mut stages = Vec::with_capacity(qps_values.len());
    let mut init = figures.init_user_id;
    for (text, qps) in qps_values {
        let system_prompt_len = u32_of(ctx, "system_prompt", figures.system_prompt)?;
        let user_info_len = u32_of(ctx, "chat_history", figures.chat_history)?;
        let answer_len = u32_of(ctx, "answer_len", figures.answer_len)?;
        stages.push(QpsStage {
            qps_text: text,
            warmup: SessionConfig {
                num_users: 1,
                num_rounds: 2,
                qps: 2.0,
                system_prompt_len,
                user_info_len,
                answer_len,
                init_user_id: init,
                time: figures.num_users_warmup / 2,
            },
            run: SessionConfig {
                num_users: u32_of(ctx, "num_users", figures.num_users)?,
                num_rounds: u32_of(ctx, "num_rounds", figures.num_rounds)?,
                qps,
                system_prompt_len,
                user_info_len,
                answer_len,
                init_user_id: init,
                time: figures.test_duration,
            },
        });
        init = init.saturating_add(figures.num_users_warmup);
    }
    Ok(FmperfWorkload {
        api: Api {
            kind: if use_chat {
                ApiKind::Chat
            } else {
                ApiKind::Completion
            },
            streaming: true,
            model: Some(model),
            base_url,
            ..Api::default()
        },
        scenario,
        stages,
        pause: Duration::from_secs(10),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{WorkloadError, parse_fmperf};

    /// A bundled profile rendered with the test model and PVC.
    fn bundled(name: &str) -> String {
        let profile = llmbench_core::library::builtin_profile("fmperf", name)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        profile
            .template
            .replace(
                "REPLACE_ENV_LLMDBENCH_DEPLOY_CURRENT_MODEL",
                "meta-llama/Llama-3.1-8B",
            )
            .replace("REPLACE_ENV_LLMDBENCH_HARNESS_PVC_NAME", "workload-pvc")
    }

    fn parse_bundled(
        name: &str,
    ) -> Result<(FmperfWorkload, Vec<crate::workload::Warning>), WorkloadError> {
        parse_fmperf(&format!("{name}.yaml"), &bundled(name))
    }

    fn session(
        num_users: u32,
        num_rounds: u32,
        qps: f64,
        lengths: (u32, u32, u32),
        init_user_id: u64,
        time: u64,
    ) -> SessionConfig {
        SessionConfig {
            num_users,
            num_rounds,
            qps,
            system_prompt_len: lengths.0,
            user_info_len: lengths.1,
            answer_len: lengths.2,
            init_user_id,
            time,
        }
    }

    /// The warm-up invocation every script makes: 1 user, 2 rounds, qps 2, `--time num_users_warmup / 2`.
    fn warmup(lengths: (u32, u32, u32), init_user_id: u64, time: u64) -> SessionConfig {
        session(1, 2, 2.0, lengths, init_user_id, time)
    }

    #[test]
    fn sanity_long_input_is_one_user_one_round_for_30_seconds() {
        let (w, warnings) = parse_bundled("sanity_long-input").unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(w.scenario, Scenario::LongInput);
        assert_eq!(w.api.kind, ApiKind::Completion);
        assert!(w.api.streaming);
        assert_eq!(w.api.model.as_deref(), Some("meta-llama/Llama-3.1-8B"));
        assert_eq!(w.pause, Duration::from_secs(10));
        let lengths = (256, 1024, 32);
        assert_eq!(
            w.stages,
            vec![QpsStage {
                qps_text: "1.34".to_owned(),
                // num_users_warmup 1: `$((1 / 2))` is 0 s.
                warmup: warmup(lengths, 1, 0),
                run: session(1, 1, 1.34, lengths, 1, 30),
            }]
        );
        assert_eq!(
            w.scenario.csv_name(&w.stages[0].qps_text),
            "LMBench_long_input_output_1.34.csv"
        );
    }

    /// short-input takes only the QPS values from the profile: the script's own figures, user ids from 1 stepping
    /// by its NUM_USERS_WARMUP of 400, and a warning naming the keys it does not read.
    #[test]
    fn sanity_short_input_runs_the_scripts_own_figures_and_says_so() {
        let (w, warnings) = parse_bundled("sanity_short-input").unwrap();
        assert_eq!(w.scenario, Scenario::ShortInput);
        let lengths = (1, 1, 20);
        assert_eq!(
            w.stages,
            vec![QpsStage {
                qps_text: "0.5".to_owned(),
                warmup: warmup(lengths, 1, 200),
                run: session(320, 20, 0.5, lengths, 1, 100),
            }]
        );
        assert_eq!(warnings.len(), 1);
        assert!(
            warnings[0]
                .message
                .contains("num_users_warmup, num_users, num_rounds"),
            "{}",
            warnings[0].message
        );
        assert_eq!(w.scenario.csv_name("0.5"), "LMBench_short_input_qps0.5.csv");
    }

    #[test]
    fn sanity_sharegpt_is_refused_naming_the_dataset_it_needs() {
        let err = parse_bundled("sanity_sharegpt").unwrap_err();
        let text = err.to_string();
        assert!(text.contains("scenarios"), "{text}");
        assert!(text.contains("sharegpt/run.json"), "{text}");
        // The line of `scenarios:` in the bundled file (after the 6-line header and three keys).
        assert_eq!(err.key(), Some("scenarios"));
        assert!(text.contains("sanity_sharegpt.yaml:10"), "{text}");
    }

    #[test]
    fn small_model_long_input_has_one_stage_per_qps_value() {
        let (w, _) = parse_bundled("small_model_long_input").unwrap();
        let lengths = (256, 1024, 32);
        let expected: Vec<QpsStage> = [("0.1", 0.1), ("0.25", 0.25), ("0.5", 0.5)]
            .iter()
            .enumerate()
            .map(|(i, (text, qps))| {
                // init_user_id 1, stepping by num_users_warmup (1) per QPS value.
                let init = 1 + i as u64;
                QpsStage {
                    qps_text: (*text).to_owned(),
                    warmup: warmup(lengths, init, 0),
                    run: session(1, 1, *qps, lengths, init, 60),
                }
            })
            .collect();
        assert_eq!(w.stages, expected);
    }

    #[test]
    fn medium_and_large_models_run_eight_qps_values_of_three_users_in_five_rounds() {
        for (name, lengths) in [
            ("medium_model_long_input", (512, 2048, 64)),
            ("large_model_long_input", (256, 1024, 32)),
        ] {
            let (w, _) = parse_bundled(name).unwrap();
            assert_eq!(w.api.kind, ApiKind::Chat, "{name}");
            let qps = [0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 4.0, 5.0];
            let texts = ["0.1", "0.25", "0.5", "1", "2", "3", "4", "5"];
            assert_eq!(w.stages.len(), 8, "{name}");
            for (i, stage) in w.stages.iter().enumerate() {
                // num_users_warmup 5: warm-ups of `$((5 / 2))` = 2 s; user ids 1, 6, 11, …
                let init = 1 + 5 * i as u64;
                assert_eq!(stage.qps_text, texts[i]);
                assert_eq!(stage.warmup, warmup(lengths, init, 2), "{name} stage {i}");
                assert_eq!(
                    stage.run,
                    session(3, 5, qps[i], lengths, init, 300),
                    "{name} stage {i}"
                );
            }
        }
    }

    #[test]
    fn unknown_keys_are_refused_with_their_line() {
        let text = "model_name: m\nscenarios: long-input\nsample_size: 3\n";
        let err = parse_fmperf("p.yaml", text).unwrap_err();
        assert_eq!(err.key(), Some("sample_size"));
        assert!(err.to_string().contains("p.yaml:3"), "{err}");
    }

    #[test]
    fn bad_values_are_refused() {
        for (text, key) in [
            (
                "model_name: m\nscenarios: long-input\nqps_values: \"0.5 fast\"\n",
                "qps_values",
            ),
            (
                "model_name: m\nscenarios: long-input\nqps_values: \"0\"\n",
                "qps_values",
            ),
            (
                "model_name: m\nscenarios: long-input\nnum_users: 0\n",
                "num_users",
            ),
            (
                "model_name: m\nscenarios: \"short-input long-input\"\n",
                "scenarios",
            ),
            ("model_name: m\nscenarios: long-long\n", "scenarios"),
            ("scenarios: long-input\n", "model_name"),
        ] {
            let err = parse_fmperf("p.yaml", text).unwrap_err();
            assert_eq!(err.key(), Some(key), "{text}: {err}");
        }
    }

    /// Absent keys take `LMBenchmarkWorkload`'s defaults (and its default scenario, sharegpt, is refused).
    #[test]
    fn defaults_are_lmbenchmarkworkloads() {
        let (w, _) = parse_fmperf("p.yaml", "model_name: m\nscenarios: long-input\n").unwrap();
        assert_eq!(w.api.kind, ApiKind::Chat);
        assert_eq!(w.stages.len(), 6);
        assert_eq!(w.stages[1].qps_text, "0.67");
        assert_eq!(
            w.stages[1].run,
            session(15, 20, 0.67, (1000, 20000, 100), 21, 100)
        );
        assert_eq!(w.stages[1].warmup.time, 10);
        assert!(parse_fmperf("p.yaml", "model_name: m\n").is_err());
    }
}
