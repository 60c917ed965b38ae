//! Whole-profile tests: every upstream llm-d-benchmark profile of the four traffic harnesses,
//! and one test per error class with its message.

use std::time::Duration;

use super::*;

const PROFILES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../shared/reference/llm-d-benchmark/profiles"
);

/// The values the renderer would substitute, fixed for the tests.
fn render(text: &str) -> String {
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

fn upstream(harness: &str, file: &str) -> Result<Parsed, WorkloadError> {
    let path = format!("{PROFILES}/{harness}/{file}");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let h: Harness = harness.parse().unwrap();
    parse_profile(h, file, &render(&text), &ParseOptions::default())
}

fn ok(harness: &str, file: &str) -> Parsed {
    upstream(harness, file).unwrap_or_else(|e| panic!("{harness}/{file}: {e}"))
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// What each upstream file must do. A file missing here fails `every_upstream_profile...`.
enum Expect {
    Parses,
    Unsupported(&'static str, &'static str),
    Misplaced(&'static str),
}

fn expectation(harness: &str, file: &str) -> Option<Expect> {
    use Expect::*;
    let e = match (harness, file) {
        ("inference-perf", "agent_llm_traces_v2.yaml.in")
        | ("inference-perf", "otel_traces.yaml.in")
        | ("inference-perf", "weka_traces.yaml.in") => {
            Unsupported("load.type", "trace_session_replay")
        }
        ("inference-perf", "agentic_code_generation.yaml.in")
        | ("inference-perf", "interactive-chat.yaml.in")
        | ("inference-perf", "guide_p2p-kv-cache-sharing_1.yaml.in") => {
            Unsupported("data.type", "conversation_replay")
        }
        ("inference-perf", "guide_multimodal-serving_1.yaml") => {
            Unsupported("data.shared_prefix.multimodal", "multimodal")
        }
        ("inference-perf", "guide_predicted-latency-routing_1.yaml") => Misplaced("tokenizer.data"),
        ("inference-perf", _) | ("guidellm", _) | ("vllm-benchmark", _) | ("inferencemax", _) => {
            Parses
        }
        _ => return None,
    };
    Some(e)
}

#[test]
fn every_upstream_profile_parses_or_fails_with_its_documented_error() {
    let mut seen = 0;
    for harness in [
        "inference-perf",
        "guidellm",
        "vllm-benchmark",
        "inferencemax",
    ] {
        let dir = format!("{PROFILES}/{harness}");
        let mut files: Vec<String> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{dir}: {e}"))
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        files.sort();
        for file in files {
            seen += 1;
            let result = upstream(harness, &file);
            match (expectation(harness, &file), result) {
                (Some(Expect::Parses), Ok(parsed)) => {
                    let w = &parsed.workload;
                    assert_eq!(w.harness.as_str(), harness);
                    assert!(!w.stages.is_empty(), "{harness}/{file}: no stages");
                    assert_eq!(
                        w.api.model.as_deref(),
                        Some("meta-llama/Llama-3.1-8B"),
                        "{file}"
                    );
                    assert_eq!(
                        w.api.base_url.as_deref(),
                        Some("http://127.0.0.1:8000"),
                        "{file}"
                    );
                    for (i, stage) in w.stages.iter().enumerate() {
                        // Every stage can be scheduled.
                        let _ = schedule(stage, stage_seed(w.seed, i));
                    }
                }
                (Some(Expect::Unsupported(key, feature)), Err(err)) => {
                    let WorkloadError::Unsupported {
                        file: f,
                        key: k,
                        feature: what,
                        line,
                    } = &err
                    else {
                        panic!("{harness}/{file}: expected Unsupported, got {err:?}");
                    };
                    assert_eq!(f, &file);
                    assert_eq!(k, key, "{file}");
                    assert!(what.contains(feature), "{file}: {what}");
                    assert!(line.is_some(), "{file}: no line in {err}");
                    assert!(
                        err.to_string().contains("not supported by llmbench yet"),
                        "{err}"
                    );
                }
                (Some(Expect::Misplaced(key)), Err(err)) => {
                    assert!(
                        matches!(&err, WorkloadError::Misplaced { key: k, .. } if k == key),
                        "{harness}/{file}: {err:?}"
                    );
                }
                (None, _) => panic!("{harness}/{file}: no expectation recorded"),
                (Some(_), Ok(_)) => panic!("{harness}/{file}: parsed, but an error was expected"),
                (Some(_), Err(err)) => panic!("{harness}/{file}: unexpected error: {err}"),
            }
        }
    }
    // 27 inference-perf + 6 guidellm + 5 vllm-benchmark + 1 inferencemax.
    assert_eq!(seen, 39);
}

#[test]
fn upstream_profiles_parse_without_unknown_keys_except_the_documented_std_quirk() {
    for (harness, file) in [
        ("inference-perf", "sanity_random.yaml.in"),
        ("inference-perf", "guide_optimized-baseline_1.yaml.in"),
        ("inference-perf", "guide_kimi-k3-h100_1.yaml.in"),
        ("inference-perf", "guide_pd-disaggregation_1.yaml.in"),
        ("guidellm", "multi-turn.yaml.in"),
        ("guidellm", "summarization_synthetic.yaml.in"),
        ("vllm-benchmark", "sonnet_concurrent.yaml.in"),
        ("inferencemax", "random_concurrent.yaml.in"),
    ] {
        let parsed = ok(harness, file);
        let unknown: Vec<_> = parsed
            .warnings
            .iter()
            .filter(|w| w.kind == WarningKind::UnknownKey)
            .collect();
        assert!(unknown.is_empty(), "{file}: {unknown:?}");
    }
}

#[test]
fn inference_perf_sanity_random_figures() {
    let w = ok("inference-perf", "sanity_random.yaml.in").workload;
    assert_eq!(w.dialect, Dialect::InferencePerf);
    assert_eq!(w.stages.len(), 1);
    assert_eq!(
        w.stages[0].arrival,
        Arrival::InferencePerfConstant {
            rate: 1.0,
            duration: secs(30)
        }
    );
    assert_eq!(w.stages[0].limit.duration, Some(secs(30)));
    assert_eq!(w.request_timeout, Some(secs(30)));
    assert_eq!(w.workers.num_workers, Some(1));
    assert_eq!(w.stage_interval, secs(1));
    assert!(w.api.streaming && w.api.ignore_eos);
    assert_eq!(w.api.kind, ApiKind::Completion);
    assert_eq!(w.seed_origin, SeedOrigin::ToolDefault);
    assert!(w.report.per_request && w.report.per_stage && w.report.summary);
    assert_eq!(w.report.output_path.as_deref(), Some("/workspace"));
    assert_eq!(
        w.tokenizer.as_ref().map(|t| t.name_or_path.as_str()),
        Some("meta-llama/Llama-3.1-8B")
    );
    let DataSpec::Random(r) = &w.data else {
        panic!("{:?}", w.data)
    };
    assert_eq!(r.text, PromptText::RandomTokens);
    assert_eq!(
        r.input,
        TokenLengths {
            shape: LengthShape::Normal {
                mean: 384.0,
                spread: Spread::StdDev(10.0),
                min: 256,
                max: 512
            },
            total_count: Some(100)
        }
    );
    assert_eq!(
        r.output.shape,
        LengthShape::Normal {
            mean: 50.0,
            spread: Spread::StdDev(10.0),
            min: 10,
            max: 100
        }
    );
    // 30 requests, the last at 30 s.
    match schedule(&w.stages[0], 1) {
        Schedule::Open {
            send_at,
            max_in_flight,
        } => {
            assert_eq!(send_at.len(), 30);
            assert_eq!(send_at.last(), Some(&secs(30)));
            assert_eq!(max_in_flight, None);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn inference_perf_poisson_ladder_keeps_rates_durations_and_interval() {
    let w = ok("inference-perf", "guide_optimized-baseline_1.yaml.in").workload;
    assert_eq!(w.stages.len(), 17);
    assert_eq!(w.stage_interval, secs(30));
    assert_eq!(w.request_timeout, Some(secs(300)));
    let ladder: Vec<(f64, u64)> = w
        .stages
        .iter()
        .map(|s| match s.arrival {
            Arrival::InferencePerfPoisson { rate, duration } => (rate, duration.as_secs()),
            ref other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(ladder[0], (15.0, 50));
    assert_eq!(ladder[4], (20.0, 38));
    assert_eq!(ladder[16], (60.0, 25));
    let DataSpec::SharedPrefix(sp) = &w.data else {
        panic!("{:?}", w.data)
    };
    assert_eq!((sp.num_groups, sp.num_prompts_per_group), (150, 5));
    assert_eq!(sp.system_prompt_len, TokenLengths::fixed(6000));
    assert_eq!(sp.question_len, TokenLengths::fixed(1200));
    assert_eq!(sp.output_len, TokenLengths::fixed(1000));
    assert!(!sp.multi_turn);
}

#[test]
fn inference_perf_concurrent_stages_become_closed_loops() {
    let w = ok("inference-perf", "guide_kimi-k3-h100_1.yaml.in").workload;
    let stages: Vec<(u32, Option<u64>)> = w
        .stages
        .iter()
        .map(|s| match s.arrival {
            Arrival::Closed { concurrency, .. } => (concurrency, s.limit.requests),
            ref other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        stages,
        vec![
            (1, Some(20)),
            (3, Some(60)),
            (5, Some(100)),
            (10, Some(200)),
            (20, Some(200))
        ]
    );
    assert!(w.tokenizer.as_ref().is_some_and(|t| t.trust_remote_code));
    let DataSpec::Random(r) = &w.data else {
        panic!()
    };
    assert_eq!(
        r.input.shape,
        LengthShape::Normal {
            mean: 4000.0,
            spread: Spread::StdDev(0.0),
            min: 4000,
            max: 4000
        }
    );
    assert_eq!(
        schedule(&w.stages[2], 0),
        Schedule::Closed {
            concurrency: 5,
            total: Some(100),
            duration: None,
            rampup: Duration::ZERO
        }
    );
}

#[test]
fn inference_perf_explicit_null_concurrent_keys_on_rate_stages_are_accepted() {
    let w = ok("inference-perf", "guide_pd-disaggregation_1.yaml.in").workload;
    assert_eq!(
        w.stages[0].arrival,
        Arrival::InferencePerfConstant {
            rate: 45.0,
            duration: secs(120)
        }
    );
    assert_eq!(w.workers.num_workers, Some(45));
    assert_eq!(w.workers.worker_max_concurrency, Some(100));
}

#[test]
fn inference_perf_std_quirk_is_a_warning_with_a_hint_and_strict_rejects_it() {
    let parsed = ok("inference-perf", "random_concurrent.yaml.in");
    let keys: Vec<&str> = parsed.warnings.iter().map(|w| w.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            "data.input_distribution.std",
            "data.output_distribution.std"
        ]
    );
    let w0 = &parsed.warnings[0];
    assert_eq!(w0.line, Some(32));
    assert!(w0.to_string().contains("did you mean `std_dev`"), "{w0}");
    // The default std_dev applies, as in lenient inference-perf.
    let DataSpec::Random(r) = &parsed.workload.data else {
        panic!()
    };
    assert_eq!(
        r.input.shape,
        LengthShape::Normal {
            mean: 10000.0,
            spread: Spread::StdDev(200.0),
            min: 5000,
            max: 10000
        }
    );

    let path = format!("{PROFILES}/inference-perf/random_concurrent.yaml.in");
    let text = render(&std::fs::read_to_string(path).unwrap());
    let strict = ParseOptions {
        strict: true,
        ..ParseOptions::default()
    };
    let err = parse_profile(
        Harness::InferencePerf,
        "random_concurrent.yaml",
        &text,
        &strict,
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "random_concurrent.yaml: strict mode rejects 2 unknown key(s): \
         `data.input_distribution.std`:32, `data.output_distribution.std`:37"
    );
}

#[test]
fn inference_perf_shared_prefix_multi_turn_and_share_gpt() {
    let w = ok("inference-perf", "shared_prefix_multi_turn_chat.yaml.in").workload;
    let DataSpec::SharedPrefix(sp) = &w.data else {
        panic!()
    };
    assert!(sp.multi_turn);
    assert_eq!((sp.num_groups, sp.num_prompts_per_group), (1, 20));
    assert_eq!(w.workers.worker_max_concurrency, Some(10));

    let w = ok("inference-perf", "chatbot_sharegpt.yaml.in").workload;
    let DataSpec::ShareGpt(sg) = &w.data else {
        panic!()
    };
    assert_eq!(sg.path, None);
    let filter = sg.input_filter.as_ref().unwrap();
    assert!(matches!(
        filter.shape,
        LengthShape::Normal {
            min: 10,
            max: 1024,
            ..
        }
    ));

    let w = ok("inference-perf", "shared_prefix_synthetic_heavy.yaml.in").workload;
    assert_eq!(
        w.stages[0].arrival,
        Arrival::InferencePerfConstant {
            rate: 0.5,
            duration: secs(120)
        }
    );
}

#[test]
fn inference_perf_misplaced_data_names_the_documented_defect() {
    let err = upstream("inference-perf", "guide_predicted-latency-routing_1.yaml").unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.starts_with("guide_predicted-latency-routing_1.yaml:18: `tokenizer.data` is misplaced"),
        "{msg}"
    );
    assert!(msg.contains("default `mock data`"), "{msg}");
}

#[test]
fn guidellm_benchmarks_become_one_stage_each() {
    let w = ok("guidellm", "concurrent-1k-1k.yaml.in").workload;
    assert_eq!(w.dialect, Dialect::GuidellmScenario);
    assert_eq!(w.api.kind, ApiKind::Chat);
    assert_eq!(w.api.path(), "/v1/chat/completions");
    assert!(w.api.streaming && w.api.ignore_eos);
    assert_eq!((w.seed, w.seed_origin), (42, SeedOrigin::ToolDefault));
    let streams: Vec<u32> = w
        .stages
        .iter()
        .map(|s| match s.arrival {
            Arrival::Closed { concurrency, .. } => concurrency,
            ref other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(streams, [300, 200, 100, 50, 1]);
    assert!(w.stages.iter().all(|s| s.limit.duration == Some(secs(600))));
    let DataSpec::SyntheticText(d) = &w.data else {
        panic!()
    };
    assert_eq!(d.prompt, TokenLengths::fixed(1000));
    assert_eq!(d.output, Some(TokenLengths::fixed(1000)));
}

#[test]
fn guidellm_multi_turn_counts_come_from_each_benchmark() {
    let w = ok("guidellm", "multi-turn.yaml.in").workload;
    let stages: Vec<(u32, Option<u64>)> = w
        .stages
        .iter()
        .map(|s| match s.arrival {
            Arrival::Closed { concurrency, .. } => (concurrency, s.limit.requests),
            ref other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        stages,
        [
            (32, Some(320)),
            (64, Some(640)),
            (128, Some(1280)),
            (256, Some(2560)),
            (512, Some(5120))
        ]
    );
    let DataSpec::SyntheticText(d) = &w.data else {
        panic!()
    };
    assert_eq!(d.turns, 5);
    assert_eq!(
        d.prefix_buckets,
        [PrefixBucket {
            prefix_tokens: 10000,
            prefix_count: 1024,
            bucket_weight: 100
        }]
    );
}

#[test]
fn guidellm_rate_list_becomes_one_constant_stage_per_rate() {
    let w = ok("guidellm", "summarization_synthetic.yaml.in").workload;
    let rates: Vec<f64> = w
        .stages
        .iter()
        .map(|s| match s.arrival {
            Arrival::GuidellmConstant { rate, .. } => rate,
            ref other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(rates, [1.0, 2.0, 4.0, 8.0]);
    assert_eq!(w.api.kind, ApiKind::Completion);
    let DataSpec::SyntheticText(d) = &w.data else {
        panic!()
    };
    assert_eq!(d.samples, 1000);
    assert_eq!(
        d.prompt.shape,
        LengthShape::Normal {
            mean: 2048.0,
            spread: Spread::StdDev(1024.0),
            min: 10,
            max: 4096
        }
    );
    // 120 s at 1/s: requests at 1..119 s.
    match schedule(&w.stages[0], 0) {
        Schedule::Open { send_at, .. } => {
            assert_eq!(send_at.len(), 119);
            assert_eq!(send_at[0], secs(1));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn guidellm_heterogeneous_lengths_keep_their_bounds() {
    let w = ok("guidellm", "concurrent-heavy-heterogeneous.yaml.in").workload;
    let DataSpec::SyntheticText(d) = &w.data else {
        panic!()
    };
    assert_eq!(
        d.output.as_ref().unwrap().shape,
        LengthShape::Normal {
            mean: 800.0,
            spread: Spread::StdDev(1500.0),
            min: 20,
            max: 8000
        }
    );
}

#[test]
fn vllm_profiles_figures() {
    let w = ok("vllm-benchmark", "sharegpt.yaml.in").workload;
    assert_eq!(w.dialect, Dialect::VllmFlags);
    assert_eq!(
        w.stages[0].arrival,
        Arrival::VllmGamma {
            rate: Rate::PerSecond(8.0),
            burstiness: 1.0,
            count: 2000
        }
    );
    assert_eq!(w.stages[0].max_concurrency, Some(512));
    assert_eq!(w.stages[0].limit.requests, Some(2000));
    assert!(w.api.ignore_eos);
    assert_eq!(
        w.report.percentiles,
        [0.1, 1.0, 5.0, 10.0, 25.0, 75.0, 90.0, 95.0, 99.0, 99.9]
    );
    assert_eq!(w.report.percentile_metrics, ["ttft", "tpot", "itl", "e2el"]);
    let DataSpec::ShareGpt(sg) = &w.data else {
        panic!()
    };
    assert_eq!(sg.path.as_deref(), Some("/requests/datasets/data.json"));
    assert_eq!(sg.output, Some(TokenLengths::fixed(1024)));

    let w = ok("vllm-benchmark", "sonnet_concurrent.yaml.in").workload;
    assert_eq!(w.api.kind, ApiKind::Chat);
    assert_eq!(w.api.path(), "/v1/chat/completions");
    assert_eq!(
        w.data,
        DataSpec::Sonnet(Sonnet {
            path: "/workspace/vllm/benchmarks/sonnet.txt".into(),
            input_len: 8192,
            output_len: 512,
            prefix_len: 6144
        })
    );

    let w = ok("vllm-benchmark", "fixed_dataset.yaml.in").workload;
    assert_eq!(
        w.data,
        DataSpec::File(DatasetFile {
            path: "/requests/datasets/data.json".into(),
            output_len: None
        })
    );
    assert_eq!(w.report.percentiles, [99.0, 100.0]);

    // No lengths and no ignore-eos: the tool's defaults, ignore_eos forced for random data.
    let w = ok("vllm-benchmark", "sanity_random.yaml.in").workload;
    let DataSpec::Random(r) = &w.data else {
        panic!()
    };
    assert_eq!(
        (r.input.clone(), r.output.clone()),
        (TokenLengths::fixed(1024), TokenLengths::fixed(128))
    );
    assert!(w.api.ignore_eos);
    assert_eq!(w.stages[0].limit.requests, Some(20));
}

#[test]
fn inferencemax_infinite_rate_with_max_concurrency_one() {
    let w = ok("inferencemax", "random_concurrent.yaml.in").workload;
    assert_eq!(w.harness, Harness::Inferencemax);
    assert_eq!(w.stages[0].load, LoadKind::Concurrent);
    assert_eq!(
        w.stages[0].arrival,
        Arrival::VllmGamma {
            rate: Rate::Infinite,
            burstiness: 1.0,
            count: 32
        }
    );
    assert_eq!(w.report.file_name.as_deref(), Some("result.json"));
    let DataSpec::Random(r) = &w.data else {
        panic!()
    };
    assert_eq!(r.input, TokenLengths::fixed(10000));
    match schedule(&w.stages[0], 0) {
        Schedule::Open {
            send_at,
            max_in_flight,
        } => {
            assert_eq!(send_at, vec![Duration::ZERO; 32]);
            assert_eq!(max_in_flight, Some(1));
        }
        other => panic!("{other:?}"),
    }
}

// ---- error classes, one inline profile each ----

fn parse(harness: Harness, yaml: &str) -> Result<Parsed, WorkloadError> {
    parse_profile(harness, "p.yaml", yaml, &ParseOptions::default())
}

fn err(harness: Harness, yaml: &str) -> String {
    match parse(harness, yaml) {
        Ok(p) => panic!("expected an error, parsed {:?}", p.workload),
        Err(e) => e.to_string(),
    }
}

const IP_HEAD: &str = "server:\n  base_url: http://x\n";

#[test]
fn harness_names_parse_and_unknown_names_list_the_valid_ones() {
    for h in Harness::ALL {
        assert_eq!(h.as_str().parse::<Harness>().unwrap(), h);
    }
    assert_eq!(
        "aiperf".parse::<Harness>().unwrap_err().to_string(),
        "unknown harness `aiperf`; expected one of inference-perf, guidellm, vllm-benchmark, inferencemax, nop, mlperf — did you mean `mlperf`?"
    );
}

#[test]
fn nop_is_a_workload_without_stages() {
    let path = format!("{PROFILES}/nop/nop.yaml.in");
    let text = render(&std::fs::read_to_string(path).unwrap());
    let parsed = parse_profile(Harness::Nop, "nop.yaml", &text, &ParseOptions::default()).unwrap();
    assert!(parsed.workload.stages.is_empty());
    assert!(parsed.warnings.is_empty());
    assert!(parse(Harness::Nop, "").unwrap().workload.stages.is_empty());
}

#[test]
fn broken_yaml_names_file_and_line() {
    let msg = err(
        Harness::InferencePerf,
        "load:\n  type: constant\n  stages: [\n",
    );
    assert!(msg.starts_with("p.yaml"), "{msg}");
    assert!(msg.contains("not valid YAML"), "{msg}");
}

#[test]
fn wrong_type_names_key_line_expected_and_found() {
    let msg = err(
        Harness::InferencePerf,
        "load:\n  stages:\n  - rate: fast\n    duration: 10\n",
    );
    assert_eq!(
        msg,
        "p.yaml:3: `load.stages[0].rate`: expected a number, found string `fast`"
    );
    let msg = err(Harness::InferencePerf, "load:\n  stages: 5\n");
    assert_eq!(
        msg,
        "p.yaml:2: `load.stages`: expected a list, found integer `5`"
    );
    let msg = err(Harness::InferencePerf, "- a\n- b\n");
    assert!(msg.contains("`(document root)`: expected a map"), "{msg}");
}

#[test]
fn zero_and_negative_rates_are_rejected_with_their_key() {
    let msg = err(
        Harness::InferencePerf,
        &format!(
            "{IP_HEAD}load:\n  stages:\n  - rate: 1\n    duration: 10\n  - rate: -2\n    duration: 10\n"
        ),
    );
    assert_eq!(
        msg,
        "p.yaml:7: `load.stages[1].rate`: must be greater than 0, found -2"
    );
    let msg = err(
        Harness::InferencePerf,
        &format!("{IP_HEAD}load:\n  stages:\n  - rate: 1\n    duration: 0\n"),
    );
    assert_eq!(
        msg,
        "p.yaml:6: `load.stages[0].duration`: must be greater than 0, found 0"
    );
    let msg = err(
        Harness::Guidellm,
        "spec:\n  backend: {target: http://x}\n  profile: {kind: constant, rate: 0}\n  \
         constraints: [{kind: max_duration, seconds: 5}]\n  data: [{kind: synthetic_text, prompt_tokens: 5}]\n",
    );
    assert!(
        msg.contains("`spec.profile.rate`: must be greater than 0, found 0"),
        "{msg}"
    );
    let msg = err(Harness::VllmBenchmark, "request-rate: -1\n");
    assert_eq!(
        msg,
        "p.yaml:1: `request-rate`: must be greater than 0 (or `inf`), found -1"
    );
    let msg = err(Harness::VllmBenchmark, "num-prompts: 0\n");
    assert_eq!(
        msg,
        "p.yaml:1: `num-prompts`: must be greater than 0, found 0"
    );
}

#[test]
fn missing_required_keys_are_named() {
    let msg = err(Harness::InferencePerf, "api:\n  type: chat\n");
    assert_eq!(
        msg,
        "p.yaml: `load` is required: an inference-perf profile needs `load.stages`"
    );
    let msg = err(
        Harness::InferencePerf,
        &format!("{IP_HEAD}load:\n  type: concurrent\n  stages:\n  - concurrency_level: 4\n"),
    );
    assert_eq!(
        msg,
        "p.yaml:6: `load.stages[0].num_requests` is required: a `concurrent` stage has \
         `num_requests` and `concurrency_level`"
    );
    let msg = err(
        Harness::InferencePerf,
        "load:\n  stages: [{rate: 1, duration: 1}]\nserver:\n  model_name: m\n",
    );
    assert!(msg.contains("`server.base_url` is required"), "{msg}");
    let msg = err(
        Harness::Guidellm,
        "spec:\n  backend: {target: http://x}\n  profile: {kind: concurrent}\n  \
         constraints: [{kind: max_duration, seconds: 5}]\n  data: [{kind: synthetic_text, prompt_tokens: 5}]\n",
    );
    assert!(msg.contains("`spec.profile.streams` is required"), "{msg}");
}

#[test]
fn guidellm_benchmark_errors_name_the_entry() {
    let msg = err(
        Harness::Guidellm,
        "spec:\n  backend: {target: http://x}\n  profile: {kind: concurrent}\n  \
         constraints: [{kind: max_requests}]\n  data: [{kind: synthetic_text, prompt_tokens: 5}]\n\
         benchmarks:\n- profile.streams: 2\n  constraints[0].count: 20\n- profile.streams: 4\n",
    );
    assert!(
        msg.starts_with("p.yaml:4: `benchmarks[1]: spec.constraints[0].count` is required"),
        "{msg}"
    );
    let msg = err(
        Harness::Guidellm,
        "spec:\n  backend: {target: http://x}\n  profile: {kind: concurrent}\n  \
         constraints: [{kind: max_requests}]\n  data: [{kind: synthetic_text, prompt_tokens: 5}]\n\
         benchmarks:\n- constraints[3].count: 20\n",
    );
    assert!(msg.contains("index 3 is out of range"), "{msg}");
}

#[test]
fn unsupported_features_are_errors_not_fallbacks() {
    let msg = err(
        Harness::InferencePerf,
        &format!(
            "{IP_HEAD}load:\n  stages: [{{rate: 1, duration: 1}}]\n  lora_traffic_split:\n  - name: a\n    split: 1\n"
        ),
    );
    assert_eq!(
        msg,
        "p.yaml:5: `load.lora_traffic_split`: LoRA traffic split is not supported by llmbench yet"
    );
    let msg = err(Harness::VllmBenchmark, "dataset-name: random-mm\n");
    assert_eq!(
        msg,
        "p.yaml:1: `dataset-name`: the `random-mm` dataset is not supported by llmbench yet"
    );
    let msg = err(
        Harness::InferencePerf,
        &format!("{IP_HEAD}load:\n  type: trace_replay\n"),
    );
    assert!(msg.contains("`load.type`: `trace_replay` load"), "{msg}");
    let msg = err(
        Harness::Guidellm,
        "target: http://x\nprofile: sweep\nmax_seconds: 5\ndata: my/hf-dataset\n",
    );
    assert!(msg.contains("`data`: dataset `my/hf-dataset`"), "{msg}");
}

#[test]
fn unknown_values_list_the_valid_ones() {
    let msg = err(
        Harness::InferencePerf,
        &format!("{IP_HEAD}load:\n  type: burst\n"),
    );
    assert_eq!(
        msg,
        "p.yaml:4: `load.type`: unknown load type `burst`; expected constant, poisson, \
         concurrent, trace_replay or trace_session_replay"
    );
    let msg = err(Harness::VllmBenchmark, "dataset-name: nosuch\n");
    assert!(msg.contains("unknown dataset `nosuch`"), "{msg}");
}

#[test]
fn rate_stage_with_concurrent_keys_is_rejected_as_upstream_does() {
    let msg = err(
        Harness::InferencePerf,
        &format!("{IP_HEAD}load:\n  stages:\n  - rate: 1\n    duration: 10\n    num_requests: 5\n"),
    );
    assert_eq!(
        msg,
        "p.yaml:7: `load.stages[0].num_requests`: a `constant` stage takes `rate` and \
         `duration`; `num_requests` belongs to `concurrent` stages"
    );
}

#[test]
fn unknown_keys_warn_leniently_and_fail_strictly_listing_all() {
    let yaml =
        format!("{IP_HEAD}load:\n  stages: [{{rate: 1, duration: 1}}]\n  burst: 3\nextra: 1\n");
    let parsed = parse(Harness::InferencePerf, &yaml).unwrap();
    let rendered: Vec<String> = parsed.warnings.iter().map(ToString::to_string).collect();
    assert_eq!(
        rendered,
        [
            "p.yaml:5: `load.burst`: unknown key, ignored",
            "p.yaml:6: `extra`: unknown key, ignored"
        ]
    );
    let strict = ParseOptions {
        strict: true,
        ..ParseOptions::default()
    };
    let e = parse_profile(Harness::InferencePerf, "p.yaml", &yaml, &strict).unwrap_err();
    assert_eq!(
        e.to_string(),
        "p.yaml: strict mode rejects 2 unknown key(s): `load.burst`:5, `extra`:6"
    );
    let vllm = parse(Harness::VllmBenchmark, "num-prompts: 5\nfrobnicate: none\n").unwrap();
    assert_eq!(vllm.warnings[0].key, "frobnicate");
}

#[test]
fn keys_of_another_dataset_are_ignored_not_unknown_and_pass_strict_mode() {
    let strict = ParseOptions {
        strict: true,
        ..ParseOptions::default()
    };
    let parsed = parse_profile(
        Harness::VllmBenchmark,
        "p.yaml",
        "dataset-name: random\ndataset-path: /d.json\nsonnet-input-len: 5\n",
        &strict,
    )
    .unwrap();
    let kinds: Vec<(&str, WarningKind)> = parsed
        .warnings
        .iter()
        .map(|w| (w.key.as_str(), w.kind))
        .collect();
    assert_eq!(
        kinds,
        [
            ("dataset-path", WarningKind::Ignored),
            ("sonnet-input-len", WarningKind::Ignored)
        ]
    );
    assert_eq!(
        parsed.warnings[0].to_string(),
        "p.yaml:2: `dataset-path`: not used by the `random` dataset"
    );
    let parsed = parse_profile(
        Harness::InferencePerf,
        "p.yaml",
        &format!(
            "{IP_HEAD}load:\n  stages: [{{rate: 1, duration: 1}}]\ndata:\n  type: mock\n  path: /x\n"
        ),
        &strict,
    )
    .unwrap();
    assert_eq!(parsed.warnings[0].key, "data.path");
    assert_eq!(parsed.warnings[0].kind, WarningKind::Ignored);
}

#[test]
fn seeds_come_from_the_profile_then_the_caller_then_the_tool() {
    let yaml = format!("{IP_HEAD}load:\n  stages: [{{rate: 1, duration: 1}}]\n");
    let w = parse(Harness::InferencePerf, &format!("{yaml}  base_seed: 7\n"))
        .unwrap()
        .workload;
    assert_eq!((w.seed, w.seed_origin), (7, SeedOrigin::Profile));
    let caller = ParseOptions {
        default_seed: Some(99),
        ..ParseOptions::default()
    };
    let w = parse_profile(Harness::InferencePerf, "p", &yaml, &caller)
        .unwrap()
        .workload;
    assert_eq!((w.seed, w.seed_origin), (99, SeedOrigin::Caller));
    let w = parse(Harness::VllmBenchmark, "seed: 5\n").unwrap().workload;
    assert_eq!((w.seed, w.seed_origin), (5, SeedOrigin::Profile));
}

#[test]
fn guidellm_flat_dialect_a_with_a_key_value_data_string() {
    let w = parse(
        Harness::Guidellm,
        "target: http://x\nrate-type: concurrent\nrate: 2\nmax-seconds: 50\n\
         data: prompt_tokens=256,output_tokens=128,prefix_tokens=2048\n",
    )
    .unwrap()
    .workload;
    assert_eq!(w.dialect, Dialect::GuidellmFlat);
    assert_eq!(w.stages.len(), 1);
    assert!(matches!(
        w.stages[0].arrival,
        Arrival::Closed { concurrency: 2, .. }
    ));
    assert_eq!(w.stages[0].limit.duration, Some(secs(50)));
    let DataSpec::SyntheticText(d) = &w.data else {
        panic!()
    };
    assert_eq!(d.prompt, TokenLengths::fixed(256));
    assert_eq!(d.prefix_buckets[0].prefix_tokens, 2048);
}

#[test]
fn guidellm_flat_dialect_b_rate_list_and_data_map() {
    let w = parse(
        Harness::Guidellm,
        "target: http://x\nmodel: m\nrequest_type: text_completions\nprofile: constant\n\
         rate: [4, 8, 16, 24]\nmax_seconds: 30\nrandom_seed: 3\n\
         data:\n  prompt_tokens: 100\n  prompt_tokens_min: 50\n  prompt_tokens_max: 150\n  output_tokens: 10\n",
    )
    .unwrap()
    .workload;
    assert_eq!(w.stages.len(), 4);
    assert_eq!(w.seed, 3);
    assert!(matches!(w.stages[3].arrival, Arrival::GuidellmConstant { rate, .. } if rate == 24.0));
    let DataSpec::SyntheticText(d) = &w.data else {
        panic!()
    };
    // No stdev: uniform between the bounds.
    assert_eq!(d.prompt.shape, LengthShape::Uniform { min: 50, max: 150 });
}

#[test]
fn guidellm_length_defaults_follow_integer_range_sampler() {
    let data = |extra: &str| {
        let w = parse(
            Harness::Guidellm,
            &format!(
                "spec:\n  backend: {{target: http://x}}\n  profile: {{kind: synchronous}}\n  \
                 constraints: [{{kind: max_requests, count: 3}}]\n  data:\n  - kind: synthetic_text\n{extra}"
            ),
        )
        .unwrap()
        .workload;
        match w.data {
            DataSpec::SyntheticText(d) => d.prompt.shape,
            other => panic!("{other:?}"),
        }
    };
    // With a stdev: min max(1, avg − 5·stdev), max avg + 5·stdev.
    assert_eq!(
        data("    prompt_tokens: 100\n    prompt_tokens_stdev: 10\n"),
        LengthShape::Normal {
            mean: 100.0,
            spread: Spread::StdDev(10.0),
            min: 50,
            max: 150
        }
    );
    assert_eq!(
        data("    prompt_tokens: 100\n    prompt_tokens_stdev: 40\n"),
        LengthShape::Normal {
            mean: 100.0,
            spread: Spread::StdDev(40.0),
            min: 1,
            max: 300
        }
    );
    assert_eq!(data("    prompt_tokens: 100\n"), LengthShape::Fixed(100));
    assert_eq!(
        data("    prompt_tokens: 100\n    prompt_tokens_max: 120\n"),
        LengthShape::Uniform { min: 100, max: 120 }
    );
}

#[test]
fn guidellm_poisson_sweep_and_throughput_kinds() {
    let base = "spec:\n  backend: {target: http://x}\n  constraints: [{kind: max_duration, seconds: 10}]\n  \
                data: [{kind: synthetic_text, prompt_tokens: 5}]\n";
    let w = parse(
        Harness::Guidellm,
        &format!("{base}  profile: {{kind: poisson, rate: 3}}\n"),
    )
    .unwrap()
    .workload;
    assert_eq!(w.stages[0].arrival, Arrival::GuidellmPoisson { rate: 3.0 });
    let w = parse(
        Harness::Guidellm,
        &format!("{base}  profile: {{kind: throughput, max_concurrency: 64}}\n"),
    )
    .unwrap()
    .workload;
    assert!(matches!(
        w.stages[0].arrival,
        Arrival::Closed {
            concurrency: 64,
            ..
        }
    ));
    let w = parse(
        Harness::Guidellm,
        &format!("{base}  profile: {{kind: sweep, sweep_size: 5}}\n"),
    )
    .unwrap()
    .workload;
    let loads: Vec<LoadKind> = w.stages.iter().map(|s| s.load).collect();
    assert_eq!(
        loads,
        [LoadKind::Synchronous, LoadKind::Throughput, LoadKind::Sweep]
    );
    let Schedule::Sweep(sweep) = schedule(&w.stages[2], 0) else {
        panic!()
    };
    let rates: Vec<f64> = sweep
        .stages(&SweepMeasurements {
            saturation_rate: 0.0,
            synchronous_rate: 1.0,
            throughput_rate: 9.0,
        })
        .iter()
        .map(|s| match s.arrival {
            Arrival::GuidellmConstant { rate, .. } => rate,
            ref other => panic!("{other:?}"),
        })
        .collect();
    // linspace(1, 9, 4)[1:]
    assert_eq!(rates.len(), 3);
    assert!(
        (rates[0] - 11.0 / 3.0).abs() < 1e-12 && rates[2] == 9.0,
        "{rates:?}"
    );
}

#[test]
fn inference_perf_sweep_expands_from_the_saturation_rate() {
    let w = parse(
        Harness::InferencePerf,
        &format!(
            "{IP_HEAD}load:\n  type: poisson\n  sweep:\n    type: linear\n    num_stages: 3\n    \
             stage_duration: 20\n"
        ),
    )
    .unwrap()
    .workload;
    let Schedule::Sweep(sweep) = schedule(&w.stages[0], 0) else {
        panic!()
    };
    let m = SweepMeasurements {
        saturation_rate: 11.0,
        synchronous_rate: 0.0,
        throughput_rate: 0.0,
    };
    let stages = sweep.stages(&m);
    assert_eq!(
        stages.iter().map(|s| s.arrival.clone()).collect::<Vec<_>>(),
        [1.0, 6.0, 11.0]
            .map(|rate| Arrival::InferencePerfPoisson {
                rate,
                duration: secs(20)
            })
            .to_vec()
    );
}

#[test]
fn vllm_flags_goodput_burstiness_and_underscore_spelling() {
    let w = parse(
        Harness::VllmBenchmark,
        "base_url: http://x\nrequest-rate: \"4\"\nburstiness: 0.5\nnum-prompts: 10\n\
         goodput: \"ttft:500 e2el:2000\"\nrandom-input-len: 100\nrandom-range-ratio: 0.25\n",
    )
    .unwrap();
    assert!(w.warnings.is_empty(), "{:?}", w.warnings);
    let w = w.workload;
    assert_eq!(w.api.base_url.as_deref(), Some("http://x"));
    assert_eq!(w.stages[0].load, LoadKind::Gamma);
    assert_eq!(
        w.goodput,
        [
            GoodputConstraint {
                metric: SloMetric::Ttft,
                limit: Duration::from_millis(500)
            },
            GoodputConstraint {
                metric: SloMetric::E2e,
                limit: secs(2)
            }
        ]
    );
    let DataSpec::Random(r) = &w.data else {
        panic!()
    };
    assert_eq!(
        r.input.shape,
        LengthShape::RangeRatio {
            len: 100,
            ratio: 0.25
        }
    );
    let msg = err(Harness::VllmBenchmark, "goodput: \"ttft=5\"\n");
    assert_eq!(
        msg,
        "p.yaml:1: `goodput`: `ttft=5` is not `metric:milliseconds`"
    );
}

#[test]
fn distribution_errors_name_the_distribution() {
    let msg = err(
        Harness::InferencePerf,
        &format!(
            "{IP_HEAD}load:\n  stages: [{{rate: 1, duration: 1}}]\ndata:\n  type: random\n  \
             input_distribution: {{min: 10, max: 5}}\n  output_distribution: {{}}\n"
        ),
    );
    assert_eq!(
        msg,
        "p.yaml:7: `data.input_distribution`: `min` (10) is greater than `max` (5)"
    );
    let msg = err(
        Harness::InferencePerf,
        &format!(
            "{IP_HEAD}load:\n  stages: [{{rate: 1, duration: 1}}]\ndata:\n  type: random\n  \
             input_distribution: {{std_dev: 3, variance: 9}}\n  output_distribution: {{}}\n"
        ),
    );
    assert!(
        msg.contains("`data.input_distribution.variance`: `variance` and `std_dev` are exclusive"),
        "{msg}"
    );
    let msg = err(
        Harness::InferencePerf,
        &format!("{IP_HEAD}load:\n  stages: [{{rate: 1, duration: 1}}]\ndata:\n  type: random\n"),
    );
    assert!(
        msg.contains("`data.input_distribution` is required"),
        "{msg}"
    );
}

#[test]
fn no_input_panics() {
    // A few hostile shapes: every one is an error or a workload, never a panic.
    for yaml in [
        "",
        "~",
        "[]",
        "42",
        "load: []",
        "load: {stages: [[]]}",
        "load: {stages: [{rate: .nan, duration: 1}]}",
        "load: {stages: [{rate: .inf, duration: 1e300}]}",
        "load: {stages: [{rate: 1e308, duration: 99999999999}]}",
        "spec: []",
        "spec: {benchmarks: 3}",
        "benchmarks: [{a.b: 1}]\nspec: {}",
        "data: \"{\\\"prompt_tokens\\\": [1]}\"",
        "request-rate: [1]",
        "? [a, b]\n: c",
    ] {
        for h in Harness::ALL {
            let _ = parse(h, yaml);
        }
    }
}

#[test]
fn mlperf_profiles_are_pointed_to_their_own_parser() {
    let err = parse_profile(
        Harness::Mlperf,
        "m.yaml",
        "model: llama3_1-8b\n",
        &ParseOptions::default(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("mlperf::parse_settings"), "{err}");
}

const GUIDELLM_SPEC: &str = "spec:\n  backend: {kind: openai_http, target: http://x}\n  data: [{kind: synthetic_text, prompt_tokens: 8, output_tokens: 4}]\n";

#[test]
fn guidellm_warmup_and_cooldown_become_transient_phases_of_every_stage() {
    let w = parse(
        Harness::Guidellm,
        &format!(
            "{GUIDELLM_SPEC}  constraints: [{{kind: max_requests, count: 100}}]\n  profile: {{kind: constant, rate: [1, 2], \
             warmup: 0.1, cooldown: {{value: 5, mode: requests}}}}\n"
        ),
    )
    .expect("parses")
    .workload;
    assert_eq!(w.stages.len(), 2);
    for stage in &w.stages {
        assert_eq!(
            stage.warmup,
            Some(Transient::GuidellmPhase(TransientPhase {
                percent: Some(0.1),
                value: None,
                mode: TransientMode::PreferDuration
            }))
        );
        assert_eq!(
            stage.cooldown,
            Some(Transient::GuidellmPhase(TransientPhase {
                percent: None,
                value: Some(5.0),
                mode: TransientMode::Requests
            }))
        );
    }
    // A bare number of at least 1 is an absolute value; zero is no phase at all.
    let w = parse(
        Harness::Guidellm,
        "target: http://x\nprofile: synchronous\nmax_requests: 10\nwarmup: 2\ncooldown: 0\n\
         data: prompt_tokens=8,output_tokens=4\n",
    )
    .expect("parses")
    .workload;
    assert_eq!(
        w.stages[0].warmup,
        Some(Transient::GuidellmPhase(TransientPhase {
            percent: None,
            value: Some(2.0),
            mode: TransientMode::PreferDuration
        }))
    );
    assert_eq!(w.stages[0].cooldown, None);
    // guidellm ≤ v0.3 spelling.
    let w = parse(
        Harness::Guidellm,
        "target: http://x\nrate-type: synchronous\nmax-requests: 10\nwarmup-percent: 0.2\n\
         data: prompt_tokens=8,output_tokens=4\n",
    )
    .expect("parses")
    .workload;
    assert_eq!(w.stages[0].warmup, Some(Transient::GuidellmFraction(0.2)));
}

#[test]
fn guidellm_transient_percent_of_one_or_more_is_refused_with_its_key() {
    let msg = err(
        Harness::Guidellm,
        &format!(
            "{GUIDELLM_SPEC}  constraints: [{{kind: max_requests, count: 10}}]\n  profile: {{kind: synchronous, \
             warmup: {{percent: 1.5}}}}\n"
        ),
    );
    assert!(msg.contains("spec.profile.warmup.percent"), "{msg}");
    assert!(msg.contains("[0, 1)"), "{msg}");
}

#[test]
fn guidellm_error_constraints_keep_window_minimum_and_scope() {
    let w = parse(
        Harness::Guidellm,
        &format!(
            "{GUIDELLM_SPEC}  constraints:\n  - {{kind: max_requests, count: 100}}\n  - {{kind: max_errors, count: 3, \
             stopping_scope: all}}\n  - {{kind: max_error_rate, rate: 0.5, window: 10}}\n  - {{kind: \
             max_global_error_rate, rate: 0.2}}\n  profile: {{kind: synchronous}}\n"
        ),
    )
    .expect("parses")
    .workload;
    let limit = &w.stages[0].limit;
    assert_eq!(
        limit.max_errors,
        Some(ErrorLimit {
            limit: 3,
            scope: StopScope::Run
        })
    );
    assert_eq!(
        limit.max_error_rate,
        Some(ErrorLimit {
            limit: WindowedErrorRate {
                rate: 0.5,
                window: 10
            },
            scope: StopScope::Stage
        })
    );
    assert_eq!(
        limit.max_global_error_rate,
        Some(ErrorLimit {
            limit: GlobalErrorRate {
                rate: 0.2,
                minimum: GUIDELLM_ERROR_MIN_PROCESSED
            },
            scope: StopScope::Stage
        })
    );
    // guidellm validates error rates as 0 < rate < 1.
    let msg = err(
        Harness::Guidellm,
        &format!(
            "{GUIDELLM_SPEC}  constraints: [{{kind: max_requests, count: 10}}, {{kind: max_error_rate, rate: 1}}]\n  \
             profile: {{kind: synchronous}}\n"
        ),
    );
    assert!(msg.contains("(0, 1)"), "{msg}");
}

#[test]
fn vllm_num_warmups_is_kept() {
    let w = parse(Harness::VllmBenchmark, "num-warmups: 3\nnum-prompts: 5\n")
        .expect("parses")
        .workload;
    assert_eq!(w.warmup_requests, 3);
}
