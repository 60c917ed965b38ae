//! Whole-profile tests: every upstream llm-d-benchmark profile of the four traffic harnesses,
//! and one test per error class with its message.

use std::time::Duration;

use super::*;

use super::testing::{PROFILES, render, upstream};

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
    Invalid(&'static str, &'static str),
}

fn expectation(harness: &str, file: &str) -> Option<Expect> {
    use Expect::*;
    let e = match (harness, file) {
        ("inference-perf", "agent_llm_traces_v2.yaml.in") => Unsupported(
            "data.otel_trace_replay.hf_dataset_path",
            "Hugging Face dataset download",
        ),
        // Upstream's own `WekaTraceReplayConfig` (a strict model) has no `bad_tool_call_handling` or `filter`.
        ("inference-perf", "weka_traces.yaml.in") => {
            Invalid("data.weka_trace_replay.filter", "only `otel_trace_replay`")
        }
        // Upstream leaves `image:` empty and puts its keys beside it, which the strict
        // `SyntheticMultimodalDatagenConfig` refuses ("Extra inputs are not permitted").
        ("inference-perf", "guide_multimodal-serving_1.yaml") => Invalid(
            "data.shared_prefix.multimodal.count",
            "Extra inputs are not permitted",
        ),
        ("inference-perf", "guide_predicted-latency-routing_1.yaml") => Misplaced("tokenizer.data"),
        // vLLM's custom dataset reads only `.jsonl`; the test renders the dataset file as `data.json`.
        ("vllm-benchmark", "fixed_dataset.yaml.in") => Invalid("dataset-path", ".jsonl"),
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
                (Some(Expect::Invalid(key, needle)), Err(err)) => {
                    assert!(
                        matches!(&err, WorkloadError::Invalid { key: k, problem, line: Some(_), .. }
                            if k == key && problem.contains(needle)),
                        "{harness}/{file}: {err:?}"
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

    // fixed_dataset with a `.jsonl` file: vLLM renders each prompt through the chat template unless told to
    // skip it; with `skip-chat-template` the records' own output lengths are kept, as written.
    let text = std::fs::read_to_string(format!("{PROFILES}/vllm-benchmark/fixed_dataset.yaml.in"))
        .expect("fixed_dataset")
        .replace("REPLACE_ENV_LLMDBENCH_RUN_DATASET_FILE", "data.jsonl");
    let w = parse(Harness::VllmBenchmark, &render(&text))
        .unwrap()
        .workload;
    assert!(
        matches!(&w.data, DataSpec::File(f) if f.chat_template == Some(serde_json::Map::new())),
        "{:?}",
        w.data
    );
    let w = parse(
        Harness::VllmBenchmark,
        &format!("{}skip-chat-template: none\n", render(&text)),
    )
    .unwrap()
    .workload;
    assert_eq!(
        w.data,
        DataSpec::File(DatasetFile {
            path: "/requests/datasets/data.jsonl".into(),
            output_len: None,
            shuffle: true,
            chat_template: None,
            rows: DatasetRows::Custom,
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
        "mlpref".parse::<Harness>().unwrap_err().to_string(),
        "unknown harness `mlpref`; expected one of inference-perf, guidellm, vllm-benchmark, inferencemax, aiperf, nop, mlperf, fmperf — did you mean `mlperf`?"
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
fn inference_perf_lora_traffic_split_is_read_in_order_with_the_run_s_seed() {
    let w = parse(
        Harness::InferencePerf,
        &format!(
            "{IP_HEAD}load:\n  stages: [{{rate: 1, duration: 1}}]\n  base_seed: 4294967301\n  lora_traffic_split:\n  \
             - name: a\n    split: 0.25\n  - {{name: b, split: 0.75}}\n"
        ),
    )
    .expect("parses")
    .workload;
    assert_eq!(
        w.api.lora,
        Some(LoraTraffic {
            adapters: vec!["a".to_owned(), "b".to_owned()],
            // numpy's legacy seed is 32 bits: 2^32 + 5 wraps to 5.
            pick: LoraPick::Weighted {
                weights: vec![0.25, 0.75],
                seed: 5
            },
        })
    );
    let msg = err(
        Harness::InferencePerf,
        &format!(
            "{IP_HEAD}load:\n  stages: [{{rate: 1, duration: 1}}]\n  lora_traffic_split:\n  - {{name: a, splt: 1}}\n"
        ),
    );
    assert!(msg.contains("splt"), "{msg}");
    let msg = err(
        Harness::InferencePerf,
        &format!(
            "{IP_HEAD}api: {{type: chat}}\nload:\n  stages: [{{rate: 1, duration: 1}}]\n  lora_traffic_split: \
             [{{name: a, split: 1}}]\ndata:\n  type: shared_prefix\n  shared_prefix: {{enable_multi_turn_chat: true}}\n"
        ),
    );
    assert!(
        msg.starts_with(
            "p.yaml:6: `load.lora_traffic_split`: LoRA traffic with multi-turn sessions"
        ),
        "{msg}"
    );
}

#[test]
fn unsupported_features_are_errors_not_fallbacks() {
    let msg = err(Harness::VllmBenchmark, "dataset-name: custom_image\n");
    assert_eq!(
        msg,
        "p.yaml:1: `dataset-name`: the `custom_image` dataset (a newer vLLM's; the release llmbench follows names \
         it `custom_mm`, which runs) is not supported by llmbench yet"
    );
    let msg = err(Harness::VllmBenchmark, "backend: vllm-pooling\n");
    assert!(
        msg.starts_with("p.yaml:1: `backend`: backend `vllm-pooling` (it merges each prompt")
            && msg.contains("cannot merge"),
        "{msg}"
    );
    let msg = err(Harness::VllmBenchmark, "dataset-name: sharegpt4v\n");
    assert!(
        msg.starts_with("p.yaml:1: `dataset-name`: `sharegpt4v` is not a vLLM dataset name"),
        "{msg}"
    );
    let msg = err(
        Harness::InferencePerf,
        &format!(
            "{IP_HEAD}api:\n  type: chat\nload:\n  type: trace_session_replay\n  stages:\n    \
             - concurrent_sessions: 1\ndata:\n  type: otel_trace_replay\n  otel_trace_replay:\n    trace_directory: /t\n    \
             filter: \"lambda x: x['max_tokens'] < 10\"\n"
        ),
    );
    assert!(
        msg.contains("`data.otel_trace_replay.filter`: `filter` (a Python lambda"),
        "{msg}"
    );
    let msg = err(
        Harness::Guidellm,
        "target: http://x\nprofile: sweep\nmax_seconds: 5\ndata: my/hf-dataset\n",
    );
    assert!(msg.contains("`data`: dataset `my/hf-dataset`"), "{msg}");
}

/// inference-perf's `trace_session_replay` with `otel_trace_replay` data: the stage keys and the data keys that
/// change what is sent, with upstream's defaults (`max_wait_ms` 15000, `predecessor_wait_timeout_sec` 3600,
/// `include_errors` true, `skip_invalid_files` false).
#[test]
fn a_trace_session_replay_profile_parses_its_stages_and_trace_source() {
    let yaml = format!(
        "{IP_HEAD}api:\n  type: chat\n  streaming: true\n  session_id_header_key: x-session-id\n\
         data:\n  type: otel_trace_replay\n  otel_trace_replay:\n    \
         trace_directory: /traces\n    use_static_model: true\n    static_model_name: m\n    \
         include_errors: false\n    bad_tool_call_handling: use_recorded\n    max_wait_ms: 250\n\
         load:\n  type: trace_session_replay\n  base_seed: 7\n  worker_max_concurrency: 400\n  stages:\n    \
         - concurrent_sessions: 4\n    - concurrent_sessions: 2\n      num_sessions: 3\n      session_rate: 1.5\n      \
         timeout: 30\n"
    );
    let w = parse(Harness::InferencePerf, &yaml).unwrap().workload;
    assert_eq!(
        w.data,
        DataSpec::OtelTrace(OtelTraceData {
            source: OtelTraceSource::Directory("/traces".into()),
            include_errors: false,
            skip_invalid_files: false,
            max_wait_ms: 250,
            predecessor_wait_timeout: Some(secs(3600)),
            disable_output_substitution: false,
            inject_random_session_id: false,
            format: SessionTraceFormat::Otel,
        })
    );
    assert_eq!(w.seed, 7);
    assert_eq!(w.api.session_id_header.as_deref(), Some("x-session-id"));
    assert_eq!(w.workers.worker_max_concurrency, Some(400));
    assert_eq!(
        w.stages
            .iter()
            .map(|s| s.arrival.clone())
            .collect::<Vec<_>>(),
        [
            Arrival::TraceSessions {
                concurrent_sessions: 4,
                session_rate: None,
                num_sessions: None,
                timeout: None,
            },
            Arrival::TraceSessions {
                concurrent_sessions: 2,
                session_rate: Some(1.5),
                num_sessions: Some(3),
                timeout: Some(secs(30)),
            },
        ]
    );
    // Upstream's validators: a rate above the session limit, a static model without its name, and OTel data
    // under another load.
    let base = |data: &str, stage: &str| {
        format!(
            "{IP_HEAD}api:\n  type: chat\ndata:\n  type: otel_trace_replay\n  otel_trace_replay:\n    \
             trace_directory: /t\n{data}load:\n  type: trace_session_replay\n  stages:\n    - {stage}\n"
        )
    };
    let msg = err(
        Harness::InferencePerf,
        &base("", "concurrent_sessions: 1\n      session_rate: 2"),
    );
    assert!(
        msg.contains("session_rate (2) cannot exceed concurrent_sessions (1)"),
        "{msg}"
    );
    let msg = err(
        Harness::InferencePerf,
        &base("    use_static_model: true\n", "concurrent_sessions: 1"),
    );
    assert!(msg.contains("static_model_name is required"), "{msg}");
    // `inject_random_session_id` is honoured, but not with recorded outputs (`validate_output_substitution`).
    let injecting = base(
        "    inject_random_session_id: true\n",
        "concurrent_sessions: 1",
    );
    let w = parse(Harness::InferencePerf, &injecting).unwrap().workload;
    assert!(matches!(&w.data, DataSpec::OtelTrace(d) if d.inject_random_session_id));
    let msg = err(
        Harness::InferencePerf,
        &base(
            "    inject_random_session_id: true\n    disable_output_substitution: true\n",
            "concurrent_sessions: 1",
        ),
    );
    assert!(
        msg.contains(
            "disable_output_substitution=True cannot be combined with inject_random_session_id"
        ),
        "{msg}"
    );
    let msg = err(
        Harness::InferencePerf,
        &format!(
            "{IP_HEAD}api:\n  type: chat\ndata:\n  type: otel_trace_replay\n  otel_trace_replay:\n    \
             trace_directory: /t\nload:\n  type: constant\n  stages:\n    - rate: 1\n      duration: 1\n"
        ),
    );
    assert!(
        msg.contains("requires load.type 'trace_session_replay'"),
        "{msg}"
    );
    let msg = err(
        Harness::InferencePerf,
        &format!(
            "{IP_HEAD}load:\n  type: trace_session_replay\n  stages:\n    - concurrent_sessions: 1\n"
        ),
    );
    assert!(msg.contains("`load.type`: "), "{msg}");
    assert!(msg.contains("otel_trace_replay"), "{msg}");
}

/// `weka_trace_replay`: its own keys read with `WekaTraceReplayConfig`'s defaults, the keys upstream declares but
/// never reads warned, and what llmbench cannot do (or upstream refuses) refused naming the key and line.
#[test]
fn a_weka_trace_replay_profile_parses_its_keys_and_refuses_what_it_cannot_replay() {
    let profile = |corpus: &str, section: &str| {
        format!(
            "{IP_HEAD}api:\n  type: chat\ndata:\n  type: weka_trace_replay\n{corpus}  weka_trace_replay:\n{section}\
             load:\n  type: trace_session_replay\n  base_seed: 3\n  stages:\n    - concurrent_sessions: 2\n"
        )
    };
    let corpus = "  corpus_file_path: /c.txt\n";
    let parsed = parse(
        Harness::InferencePerf,
        &profile(
            corpus,
            "    trace_files: [/a.json, /b.json]\n    skip_invalid_files: true\n    max_wait_ms: 900\n    \
             trace_idle_gap_cap_seconds: 1.5\n    default_block_size: 16\n    ignore_trace_delays: true\n    \
             num_dataset_entries: 5\n",
        ),
    )
    .unwrap();
    assert_eq!(
        parsed.workload.data,
        DataSpec::OtelTrace(OtelTraceData {
            source: OtelTraceSource::Files(vec!["/a.json".into(), "/b.json".into()]),
            include_errors: true,
            skip_invalid_files: true,
            max_wait_ms: 900,
            predecessor_wait_timeout: Some(secs(3600)),
            disable_output_substitution: false,
            inject_random_session_id: false,
            format: SessionTraceFormat::Weka(WekaTraceOptions {
                corpus_file: "/c.txt".into(),
                default_block_size: 16,
                idle_gap_cap_seconds: 1.5,
                num_dataset_entries: 5,
            }),
        })
    );
    let warned: Vec<String> = parsed.warnings.iter().map(ToString::to_string).collect();
    assert!(
        warned
            .iter()
            .any(|w| w.contains("ignore_trace_delays") && w.contains("never reads it")),
        "{warned:?}"
    );
    let defaults = parse(
        Harness::InferencePerf,
        &profile(corpus, "    trace_directory: /t\n"),
    )
    .unwrap()
    .workload;
    assert!(matches!(
        &defaults.data,
        DataSpec::OtelTrace(OtelTraceData { format: SessionTraceFormat::Weka(o), .. })
            if o.default_block_size == 64 && o.idle_gap_cap_seconds == 60.0
    ));
    let msg = err(
        Harness::InferencePerf,
        &profile("", "    trace_directory: /t\n"),
    );
    assert!(
        msg.contains("`data.weka_trace_replay`") && msg.contains("data.corpus_file_path"),
        "{msg}"
    );
    // A local copy of the dataset is read when the run starts; the mapping form is refused.
    let hf = parse(
        Harness::InferencePerf,
        &profile(corpus, "    hf_dataset_path: /data/weka\n"),
    )
    .unwrap()
    .workload;
    assert!(matches!(
        &hf.data,
        DataSpec::OtelTrace(OtelTraceData { source: OtelTraceSource::HfCopy(p), format: SessionTraceFormat::Weka(o), .. })
            if p == "/data/weka" && o.num_dataset_entries == 100
    ));
    let msg = err(
        Harness::InferencePerf,
        &profile(corpus, "    hf_dataset_path: {path: org/traces}\n"),
    );
    assert!(
        msg.contains("`data.weka_trace_replay.hf_dataset_path`") && msg.contains("as a string"),
        "{msg}"
    );
    let msg = err(
        Harness::InferencePerf,
        &profile(
            corpus,
            "    trace_directory: /t\n    filter: \"lambda x: True\"\n",
        ),
    );
    assert!(
        msg.contains("`data.weka_trace_replay.filter`") && msg.contains("only `otel_trace_replay`"),
        "{msg}"
    );
    let msg = err(
        Harness::InferencePerf,
        &profile(
            corpus,
            "    trace_directory: /t\n    duplicate_sessions_target: 9\n",
        ),
    );
    assert!(msg.contains("duplicate_sessions_target"), "{msg}");
    let msg = err(
        Harness::InferencePerf,
        &profile(
            corpus,
            "    trace_directory: /t\n    default_block_size: 0\n",
        ),
    );
    assert!(
        msg.contains("default_block_size must be a positive"),
        "{msg}"
    );
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
        "dataset-name: sharegpt\ndataset-path: /d.json\nsonnet-input-len: 5\ncustom-output-len: 9\n",
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
            ("sonnet-input-len", WarningKind::Ignored),
            ("custom-output-len", WarningKind::Ignored)
        ]
    );
    assert_eq!(
        parsed.warnings[0].to_string(),
        "p.yaml:3: `sonnet-input-len`: not used by the `sharegpt` dataset"
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
        msg.contains("`data.input_distribution.variance`: inference-perf refuses `variance` while `std_dev` is above 0"),
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
fn guidellm_replay_reads_its_time_scale_and_the_trace_columns() {
    use super::guidellm_replay::GuidellmTrace;
    let spec = |data: &str, profile: &str| {
        format!(
            "spec:\n  backend: {{kind: openai_http, target: http://x}}\n  data: [{data}]\n  profile: {profile}\n"
        )
    };
    let w = parse(
        Harness::Guidellm,
        &spec("{kind: trace_synthetic, path: t.jsonl}", "{kind: replay}"),
    )
    .expect("parses")
    .workload;
    assert_eq!(
        w.data,
        DataSpec::GuidellmTrace(GuidellmTrace {
            path: "t.jsonl".to_owned(),
            timestamp_column: "timestamp".to_owned(),
            prompt_tokens_column: "input_length".to_owned(),
            output_tokens_column: "output_length".to_owned(),
            samples: None,
            hash_blocks: None,
        })
    );
    assert_eq!(w.stages.len(), 1);
    assert_eq!(
        w.stages[0].arrival,
        Arrival::GuidellmReplay { time_scale: 1.0 }
    );
    assert!(w.api.ignore_eos);
    // The command line's form, and `rate`, the time scale's name before guidellm 0.8.
    let w = parse(
        Harness::Guidellm,
        &spec(
            "\"kind=trace_synthetic,path=t.csv,timestamp_column=ts\"",
            "{kind: replay, rate: 0.5}",
        ),
    )
    .expect("parses")
    .workload;
    assert_eq!(
        w.stages[0].arrival,
        Arrival::GuidellmReplay { time_scale: 0.5 }
    );
    assert!(matches!(&w.data, DataSpec::GuidellmTrace(t) if t.timestamp_column == "ts"));
    let e = parse(
        Harness::Guidellm,
        &format!(
            "{}  constraints: [{{kind: max_requests, count: 5}}]\n",
            spec(
                "{kind: trace_synthetic, path: t.jsonl}",
                "{kind: constant, rate: 2}"
            )
        ),
    )
    .expect_err("a trace under another profile");
    assert!(
        e.to_string()
            .contains("a trace under a profile other than `replay`"),
        "{e}"
    );
    let e = parse(
        Harness::Guidellm,
        &spec(
            "{kind: trace_synthetic, path: t.jsonl}",
            "{kind: replay, time_scale: 0}",
        ),
    )
    .expect_err("time_scale > 0");
    assert_eq!(e.key(), Some("spec.profile.time_scale"), "{e}");
}

#[test]
fn guidellm_over_saturation_takes_its_defaults_and_each_argument_given() {
    let stage_limit = |constraint: &str| {
        parse(
            Harness::Guidellm,
            &format!(
                "{GUIDELLM_SPEC}  constraints: [{{kind: max_requests, count: 100}}, {constraint}]\n  profile: \
                 {{kind: constant, rate: [1, 2]}}\n"
            ),
        )
        .expect("parses")
        .workload
        .stages
        .into_iter()
        .map(|s| s.limit.over_saturation)
        .collect::<Vec<_>>()
    };
    use super::over_saturation::OverSaturation;
    // `OverSaturationConstraintArgs`' defaults, on every stage.
    assert_eq!(
        stage_limit("{kind: over_saturation}"),
        vec![Some(OverSaturation::default()); 2]
    );
    assert_eq!(
        OverSaturation::default(),
        OverSaturation {
            enforce: true,
            min_seconds: 30.0,
            max_window_seconds: 120.0,
            moe_threshold: 2.0,
            minimum_ttft: 2.5,
            maximum_window_ratio: 0.75,
            minimum_window_size: 5,
            confidence: 0.95,
            scope: StopScope::Stage,
            ttft_at_completion: false,
        }
    );
    let given = stage_limit(
        "{kind: over_saturation, mode: monitor, min_seconds: 10, max_window_seconds: 60, moe_threshold: 1.5, \
         minimum_ttft: 1, maximum_window_ratio: 0.5, minimum_window_size: 8, confidence: 0.9, stopping_scope: all}",
    );
    assert_eq!(
        given[0],
        Some(OverSaturation {
            enforce: false,
            min_seconds: 10.0,
            max_window_seconds: 60.0,
            moe_threshold: 1.5,
            minimum_ttft: 1.0,
            maximum_window_ratio: 0.5,
            minimum_window_size: 8,
            confidence: 0.9,
            scope: StopScope::Run,
            ttft_at_completion: false,
        })
    );
    // The flat format's dict (guidellm 0.5–0.6): `enabled: false` reports only; that version took TTFTs at
    // completion. The command line passed it as JSON text.
    let flat = parse(
        Harness::Guidellm,
        "target: http://x\nprofile: synchronous\nmax_seconds: 5\ndata: prompt_tokens=8\n\
         over_saturation: '{\"enabled\": false, \"min_seconds\": 5}'\n",
    )
    .expect("parses")
    .workload;
    assert_eq!(
        flat.stages[0].limit.over_saturation,
        Some(OverSaturation {
            enforce: false,
            min_seconds: 5.0,
            ttft_at_completion: true,
            ..OverSaturation::default()
        })
    );
    let e = parse(
        Harness::Guidellm,
        &format!(
            "{GUIDELLM_SPEC}  constraints: [{{kind: max_requests, count: 1}}, {{kind: over_saturation, \
             maximum_window_ratio: 1.5}}]\n  profile: {{kind: synchronous}}\n"
        ),
    )
    .expect_err("a ratio above 1");
    assert_eq!(
        e.key(),
        Some("spec.constraints[1].maximum_window_ratio"),
        "{e}"
    );
}

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
    assert_eq!(
        w.stages[0].warmup,
        Some(Transient::GuidellmFraction { fraction: 0.2 })
    );
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

// ---- trust: every key is honoured or refused ----

fn warnings_of(harness: Harness, yaml: &str) -> Vec<String> {
    parse(harness, yaml)
        .unwrap_or_else(|e| panic!("{e}"))
        .warnings
        .iter()
        .map(ToString::to_string)
        .collect()
}

/// The warnings of `yaml` parsed with `--lenient`, so near misses are warnings too.
fn lenient_warnings_of(harness: Harness, yaml: &str) -> Vec<String> {
    let options = ParseOptions {
        lenient: true,
        ..ParseOptions::default()
    };
    parse_profile(harness, "p.yaml", yaml, &options)
        .unwrap_or_else(|e| panic!("{e}"))
        .warnings
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[test]
fn a_misspelt_key_names_the_known_key_it_is_nearest_to() {
    // One edit (a doubled letter): `streamming` → `streaming`.
    let w = lenient_warnings_of(
        Harness::InferencePerf,
        &format!(
            "{IP_HEAD}api:\n  type: chat\n  streamming: true\nload:\n  stages: [{{rate: 1, duration: 1}}]\n"
        ),
    );
    assert_eq!(
        w,
        ["p.yaml:5: `api.streamming`: unknown key, ignored; did you mean `streaming`?"]
    );
    // A flag map: `_` and `-` are one spelling, and a dropped letter is one edit.
    let w = lenient_warnings_of(Harness::VllmBenchmark, "reqest_rate: 4\nnum-prompts: 5\n");
    assert_eq!(
        w,
        ["p.yaml:1: `reqest-rate`: unknown key, ignored; did you mean `request-rate`?"]
    );
    // Keys the parser only knows (another dataset's flags) are suggested too.
    let w = lenient_warnings_of(Harness::VllmBenchmark, "sonet-input-len: 5\n");
    assert_eq!(
        w,
        ["p.yaml:1: `sonet-input-len`: unknown key, ignored; did you mean `sonnet-input-len`?"]
    );
    // guidellm flat keys are normalised to underscores; a swap of neighbours is one edit.
    let w = lenient_warnings_of(
        Harness::Guidellm,
        "target: http://x\nprofile: synchronous\nmax_seconds: 5\ndata: prompt_tokens=8\nrnadom_seed: 3\n",
    );
    assert_eq!(
        w,
        ["p.yaml:5: `rnadom_seed`: unknown key, ignored; did you mean `random_seed`?"]
    );
    // Nothing near: no suggestion; short names need a single edit.
    let w = lenient_warnings_of(Harness::VllmBenchmark, "frobnicate: none\nsed: 3\n");
    assert_eq!(
        w,
        [
            "p.yaml:1: `frobnicate`: unknown key, ignored",
            "p.yaml:2: `sed`: unknown key, ignored; did you mean `seed`?"
        ]
    );
}

#[test]
fn a_near_miss_of_a_key_that_changes_the_run_is_an_error_in_every_dialect() {
    for (harness, yaml, expected) in [
        (
            Harness::InferencePerf,
            format!("{IP_HEAD}api:\n  type: chat\n  streamming: true\nload:\n  stages: [{{rate: 1, duration: 1}}]\n"),
            "`api.streamming` (line 5): did you mean `api.streaming`?",
        ),
        (
            Harness::Guidellm,
            "spec:\n  backend: {kind: openai_http, target: http://x, model: m}\n  data:\n    - {kind: synthetic_text, \
             prompt_tokens: 8, output_tokens: 8, output_tokens_stddev: 2}\n  profile: {kind: constant, rate: 2}\n  \
             constraints:\n    - {kind: max_requests, count: 4}\n"
                .to_owned(),
            "did you mean `spec.data[0].output_tokens_stdev`?",
        ),
        (
            Harness::VllmBenchmark,
            "reqest-rate: 4\nnum-prompts: 5\n".to_owned(),
            "`reqest-rate` (line 1): did you mean `request-rate`?",
        ),
        (
            Harness::Inferencemax,
            "num-prompts: 5\nmax-concurency: 2\n".to_owned(),
            "`max-concurency` (line 2): did you mean `max-concurrency`?",
        ),
    ] {
        let message = err(harness, &yaml);
        assert!(
            message.starts_with(&format!("p.yaml: 1 key(s) the {harness} dialect does not know")),
            "{harness}: {message}"
        );
        assert!(message.contains(expected), "{harness}: {message}");
        assert!(message.contains("pass --lenient"), "{harness}: {message}");
    }
}

#[test]
fn a_near_miss_of_an_output_location_or_an_ignored_key_stays_a_warning() {
    // inference-perf's storage says where files go; vllm's `save-reslt` is near `save-result`, which changes
    // nothing llmbench sends or measures.
    let w = warnings_of(
        Harness::InferencePerf,
        &format!(
            "{IP_HEAD}load:\n  stages: [{{rate: 1, duration: 1}}]\nstorage:\n  local_storag:\n    path: /x\n"
        ),
    );
    assert_eq!(
        w,
        ["p.yaml:6: `storage.local_storag`: unknown key, ignored; did you mean `local_storage`?"]
    );
    let w = warnings_of(Harness::VllmBenchmark, "num-prompts: 5\nsave-reslt: true\n");
    assert_eq!(
        w,
        ["p.yaml:2: `save-reslt`: unknown key, ignored; did you mean `save-result`?"]
    );
}

#[test]
fn aiperf_and_fmperf_refuse_an_unknown_key_naming_the_nearest() {
    let message = err(Harness::Aiperf, "model: m\nconcurency: 4\n");
    assert!(
        message.contains("p.yaml:2: `concurency`")
            && message.contains("did you mean `concurrency`?"),
        "{message}"
    );
    let message = parse_fmperf(
        "p.yaml",
        "model_name: m\nscenarios: short-input\nnum_user: 4\n",
    )
    .map(|_| ())
    .expect_err("refused")
    .to_string();
    assert!(message.contains("did you mean `num_users`?"), "{message}");
}

#[test]
fn nearest_key_allows_one_edit_up_to_five_characters_and_two_beyond() {
    use super::reader::nearest_key;
    let known = ["rate", "streaming", "request-rate", "min", "max"];
    assert_eq!(nearest_key("rat", known), Some("rate"));
    assert_eq!(nearest_key("raet", known), Some("rate"));
    assert_eq!(nearest_key("rte", known), Some("rate"));
    assert_eq!(nearest_key("size", known), None);
    assert_eq!(nearest_key("STREAMING", known), Some("streaming"));
    assert_eq!(nearest_key("straeming", known), Some("streaming"));
    assert_eq!(nearest_key("strmng", known), None);
    assert_eq!(nearest_key("reqeust-rtae", known), Some("request-rate"));
    // Two-letter names get no suggestion; an exact key is not "near" itself.
    assert_eq!(nearest_key("mn", known), None);
    assert_eq!(nearest_key("rate", known), None);
    // A megabyte-long key is rejected without a quadratic table.
    assert_eq!(nearest_key(&"x".repeat(1 << 20), known), None);
}

#[test]
fn absurd_figures_are_refused_naming_the_key_the_value_and_the_limit() {
    let cases: Vec<(Harness, String, &str, &str)> = vec![
        (
            Harness::InferencePerf,
            format!("{IP_HEAD}load:\n  stages: [{{rate: 1e12, duration: 1}}]\n"),
            "load.stages[0].rate",
            "1000000000000 is above llmbench's limit of 1000000 requests/s",
        ),
        (
            Harness::InferencePerf,
            format!("{IP_HEAD}load:\n  stages: [{{rate: 1000, duration: 20000}}]\n"),
            "load.stages[0].rate",
            "1000 requests/s for 20000 s is 20000000 requests; 20000000 is above llmbench's limit of 10000000",
        ),
        (
            Harness::InferencePerf,
            format!("{IP_HEAD}load:\n  stages: [{{rate: 1, duration: 18446744073709551615}}]\n"),
            "load.stages[0].duration",
            "above llmbench's limit of 2592000 seconds (30 days)",
        ),
        (
            Harness::InferencePerf,
            format!("{IP_HEAD}load:\n  type: concurrent\n  stages: [{{num_requests: 10, concurrency_level: 4000000000}}]\n"),
            "load.stages[0].concurrency_level",
            "4000000000 is above llmbench's limit of 1000000 requests in flight",
        ),
        (
            Harness::InferencePerf,
            format!("{IP_HEAD}load:\n  stages: [{{rate: 1, duration: 1}}]\ndata:\n  type: random\n  input_distribution: {{min: 1, max: 2000000000}}\n  output_distribution: {{}}\n"),
            "data.input_distribution.max",
            "2000000000 is above llmbench's limit of 10000000 tokens per prompt or answer",
        ),
        (
            Harness::InferencePerf,
            format!("{IP_HEAD}load:\n  stages: [{{rate: 1, duration: 1}}]\ndata:\n  type: shared_prefix\n  shared_prefix: {{num_groups: 100000, num_prompts_per_group: 1000}}\n"),
            "data.shared_prefix.num_prompts_per_group",
            "100000 groups × 1000 prompts per group: 100000000 is above llmbench's limit of 10000000",
        ),
        (
            Harness::VllmBenchmark,
            "num-prompts: 1000000000000\n".to_string(),
            "num-prompts",
            "above llmbench's limit of 10000000 send times per stage",
        ),
        // vLLM's `int()` refuses `1e12` itself: it is not a whole number to argparse.
        (
            Harness::VllmBenchmark,
            "num-prompts: 1e12\n".to_string(),
            "num-prompts",
            "expected a whole number, found number `1000000000000`",
        ),
        (
            Harness::VllmBenchmark,
            "random-prefix-len: 10000000000\n".to_string(),
            "random-prefix-len",
            "10000000000 is above llmbench's limit of 10000000 tokens",
        ),
        (
            Harness::VllmBenchmark,
            "request-rate: 1e12\n".to_string(),
            "request-rate",
            "requests/s",
        ),
        (
            Harness::Guidellm,
            "target: http://x\nprofile: constant\nrate: 1000\nmax_seconds: 1000000\ndata: prompt_tokens=8,samples=1000000000000000\n".to_string(),
            "data.samples",
            "1e15 is above llmbench's limit of 10000000 pre-generated prompts",
        ),
        (
            Harness::Guidellm,
            "target: http://x\nprofile: constant\nrate: 1000\nmax_seconds: 1000000\ndata: prompt_tokens=8\n".to_string(),
            "rate",
            "1000 requests/s within the stage's limits is about 1000000000 requests",
        ),
        (
            Harness::Guidellm,
            format!("{GUIDELLM_SPEC}  profile: {{kind: concurrent, streams: 2}}\n  constraints: [{{kind: max_requests, count: 1e15}}]\n"),
            "spec.constraints[0].count",
            "is above llmbench's limit of 1000000000 requests per stage",
        ),
    ];
    for (harness, yaml, key, needle) in cases {
        let e = parse(harness, &yaml).expect_err(&yaml);
        assert_eq!(e.key(), Some(key), "{yaml}: {e}");
        assert!(e.to_string().contains(needle), "{yaml}: {e}");
        assert!(e.to_string().starts_with("p.yaml:"), "{e}");
    }
}

#[test]
fn vllm_custom_minus_one_takes_output_tokens_and_needs_jsonl_and_skip_chat_template() {
    let w = parse(
        Harness::VllmBenchmark,
        "dataset-name: custom\ndataset-path: /d/data.jsonl\ncustom-output-len: -1\nskip-chat-template: none\ndisable-shuffle: none\n",
    )
    .unwrap()
    .workload;
    assert_eq!(
        w.data,
        DataSpec::File(DatasetFile {
            path: "/d/data.jsonl".into(),
            output_len: None,
            shuffle: false,
            chat_template: None,
            rows: DatasetRows::Custom,
        })
    );
    // `output-len` (recent vLLM) sets every dataset's output length.
    let w = parse(
        Harness::VllmBenchmark,
        "dataset-name: custom\ndataset-path: /d/x.jsonl\ncustom_skip_chat_template: none\noutput-len: 9\n",
    )
    .unwrap()
    .workload;
    assert!(matches!(&w.data, DataSpec::File(f) if f.output_len == Some(9) && f.shuffle));
    let e = err(
        Harness::VllmBenchmark,
        "dataset-name: custom\ndataset-path: /d/x.csv\nskip-chat-template: none\n",
    );
    assert_eq!(
        e,
        "p.yaml:2: `dataset-path`: vLLM's custom dataset reads only `.jsonl` files (one JSON record with a \
         `prompt` per line); `/d/x.csv` is not one"
    );
    let e = err(
        Harness::VllmBenchmark,
        "dataset-name: custom\ndataset-path: /d/x.jsonl\ncustom-output-len: 0\nskip-chat-template: none\n",
    );
    assert!(e.contains("`custom-output-len`: must be > 0, or -1"), "{e}");
}

#[test]
fn vllm_flags_that_change_requests_are_honoured_or_refused() {
    // served-model-name is the name sent; the tokenizer stays the model.
    let w = parse(
        Harness::VllmBenchmark,
        "model: org/big\nserved-model-name: big\nheader: x-a=1 x-b=two=2\ntokenizer-mode: hf\n",
    )
    .unwrap()
    .workload;
    assert_eq!(w.api.model.as_deref(), Some("big"));
    assert_eq!(
        w.tokenizer.as_ref().map(|t| t.name_or_path.as_str()),
        Some("org/big")
    );
    assert_eq!(
        w.api.headers,
        [
            ("x-a".to_string(), "1".to_string()),
            ("x-b".to_string(), "two=2".to_string())
        ]
    );
    // A range ratio per length, as a JSON object.
    let w = parse(
        Harness::VllmBenchmark,
        "random-input-len: 100\nrandom-output-len: 10\nrandom-range-ratio: '{\"input\": 0.5}'\ninput-len: 200\n",
    )
    .unwrap()
    .workload;
    let DataSpec::Random(r) = &w.data else {
        panic!()
    };
    assert_eq!(
        r.input.shape,
        LengthShape::RangeRatio {
            len: 200,
            ratio: 0.5
        }
    );
    assert_eq!(r.output.shape, LengthShape::Fixed(10));
    // Flags at llmbench's own behaviour are accepted.
    parse(
        Harness::VllmBenchmark,
        "ready-check-timeout-sec: 0\nprobe-request-rate: 0\nuse-beam-search: false\nrandom-batch-size: 1\n",
    )
    .unwrap();
    for (yaml, key, needle) in [
        ("header: novalue\n", "header", "`novalue` is not KEY=VALUE"),
        (
            "tokenizer-mode: mistral\n",
            "tokenizer-mode",
            "tokenizer mode `mistral`",
        ),
        (
            "ready-check-timeout-sec: 600\n",
            "ready-check-timeout-sec",
            "waiting for the endpoint",
        ),
        (
            "probe-request-rate: 2\n",
            "probe-request-rate",
            "probe requests",
        ),
        (
            "ramp-up-strategy: linear\n",
            "ramp-up-strategy",
            "needs both",
        ),
        (
            "ramp-up-strategy: steps\nramp-up-start-rps: 1\nramp-up-end-rps: 2\n",
            "ramp-up-strategy",
            "expected linear or exponential",
        ),
        (
            "ramp-up-strategy: linear\nramp-up-start-rps: 4\nramp-up-end-rps: 2\n",
            "ramp-up-start-rps",
            "must not be above `ramp-up-end-rps` (2)",
        ),
        (
            "ramp-up-strategy: linear\nramp-up-start-rps: 0\nramp-up-end-rps: 2\n",
            "ramp-up-start-rps",
            "a rate of 0",
        ),
        (
            "ramp-up-strategy: exponential\nramp-up-start-rps: 1\nramp-up-end-rps: 2\nrequest-rate: 5\n",
            "request-rate",
            "refuses a `request-rate` with a ramp-up",
        ),
        ("frequency-penalty: inf\n", "frequency-penalty", "finite"),
        ("top-k: 0.5\n", "top-k", "a whole number"),
        ("extra-body: '[1]'\n", "extra-body", "a JSON object"),
        ("extra-body: '{oops'\n", "extra-body", "not JSON"),
        (
            "extra-body: '{\"stream\": false}'\n",
            "extra-body",
            "replacing the body's `stream`",
        ),
        (
            "extra-body: '{\"max_tokens\": \"many\"}'\n",
            "extra-body",
            "`max_tokens` must be a whole number",
        ),
        ("profile: none\n", "profile", "profiler"),
        ("no-oversample: none\n", "no-oversample", "fewer requests"),
        (
            "random-batch-size: 4\n",
            "random-batch-size",
            "batched prompts",
        ),
        ("self-timed: none\n", "self-timed", "timed_trace"),
        (
            "skip-tokenizer-init: none\n",
            "skip-tokenizer-init",
            "without a tokenizer",
        ),
        (
            "dataset-path: /d.json\n",
            "dataset-path",
            "refuses a `dataset-path` with the `random` dataset",
        ),
        (
            "backend: openai-chat\n",
            "endpoint",
            "must end with `chat/completions`",
        ),
        (
            "endpoint: /v1/chat/completions\n",
            "endpoint",
            "use `backend: openai-chat`",
        ),
        (
            "percentile-metrics: ttft,client_queue_time\n",
            "percentile-metrics",
            "client_queue_time",
        ),
        (
            "base-url: https://x\ninsecure: none\n",
            "insecure",
            "TLS certificate",
        ),
    ] {
        let e = parse(Harness::VllmBenchmark, yaml).expect_err(yaml);
        assert_eq!(e.key(), Some(key), "{yaml}: {e}");
        assert!(e.to_string().contains(needle), "{yaml}: {e}");
    }
    // Output-only flags warn; `insecure` over http does nothing.
    let w = warnings_of(
        Harness::VllmBenchmark,
        "label: x\ninsecure: none\nappend-result: none\n",
    );
    assert_eq!(w.len(), 3, "{w:?}");
    assert!(
        w.iter()
            .any(|w| w.contains("`insecure`") && w.contains("not https")),
        "{w:?}"
    );
}

#[test]
fn vllm_sampling_flags_then_extra_body_are_merged_into_every_body_as_vllm_merges_them() {
    // serve.py: sampling_params in its own order (top_p, top_k, min_p, temperature, frequency_penalty,
    // presence_penalty, repetition_penalty), floats as argparse's `float` makes them, then
    // `{**sampling_params, **extra_body}`: extra-body's `top_k` replaces the flag's in place.
    let w = parse(
        Harness::VllmBenchmark,
        "temperature: 0\nrepetition-penalty: 1.1\ntop-k: 50\ntop-p: '0.9'\nmin-p: 0.05\n\
         frequency-penalty: 1\npresence-penalty: -0.5\nlogprobs: 3\nrequest-id-prefix: bench-1a2b-\n\
         extra-body: '{\"top_k\": 20, \"chat_template_kwargs\": {\"enable_thinking\": false}}'\n",
    )
    .unwrap()
    .workload;
    assert_eq!(
        serde_json::to_string(&w.api.extra_body).unwrap(),
        r#"{"top_p":0.9,"top_k":20,"min_p":0.05,"temperature":0.0,"frequency_penalty":1.0,"presence_penalty":-0.5,"repetition_penalty":1.1,"chat_template_kwargs":{"enable_thinking":false}}"#
    );
    assert_eq!(w.api.logprobs, Some(3));
    assert_eq!(w.api.request_id_prefix.as_deref(), Some("bench-1a2b-"));
    // Nothing given, nothing merged: the server's defaults apply (vLLM no longer sends temperature 0).
    let w = parse(Harness::VllmBenchmark, "num-prompts: 2\n")
        .unwrap()
        .workload;
    assert!(w.api.extra_body.is_empty());
    assert_eq!((w.api.logprobs, w.api.request_id_prefix), (None, None));
    // vLLM's chat body has no logprobs: the flag does nothing there, and says so.
    let w = warnings_of(
        Harness::VllmBenchmark,
        "backend: openai-chat\nendpoint: /v1/chat/completions\nlogprobs: 1\n",
    );
    assert!(
        w.iter()
            .any(|w| w.contains("`logprobs`") && w.contains("chat requests carry no logprobs")),
        "{w:?}"
    );
}

#[test]
fn vllm_ramp_up_sets_each_requests_rate_from_start_to_end() {
    let w = parse(
        Harness::VllmBenchmark,
        "num-prompts: 5\nramp-up-strategy: exponential\nramp-up-start-rps: 2\nramp-up-end-rps: 32\n\
         burstiness: inf\n",
    )
    .unwrap()
    .workload;
    let ramp = RampUp {
        strategy: RampUpStrategy::Exponential,
        start_rps: 2,
        end_rps: 32,
    };
    assert_eq!(
        w.stages[0].arrival,
        Arrival::VllmGamma {
            rate: Rate::RampUp(ramp),
            burstiness: f64::INFINITY,
            count: 5,
        }
    );
    assert_eq!(w.stages[0].load, LoadKind::Constant);
    // progress i/4: 2·16^(i/4) = 2, 4, 8, 16, 32.
    let rates: Vec<f64> = (0..5).map(|i| ramp.rate(i, 5)).collect();
    assert_eq!(rates, [2.0, 4.0, 8.0, 16.0, 32.0]);
    let linear = RampUp {
        strategy: RampUpStrategy::Linear,
        ..ramp
    };
    // 2 + 30·i/4.
    let rates: Vec<f64> = (0..5).map(|i| linear.rate(i, 5)).collect();
    assert_eq!(rates, [2.0, 9.5, 17.0, 24.5, 32.0]);
    // One request goes at the start rate (progress 0/max(0, 1)).
    assert_eq!(linear.rate(0, 1), 2.0);
    // The rates alone are read only with a strategy.
    let w = warnings_of(
        Harness::VllmBenchmark,
        "ramp-up-start-rps: 1\nramp-up-end-rps: 2\n",
    );
    assert_eq!(w.len(), 2, "{w:?}");
    assert!(
        w.iter().all(|w| w.contains("only with `ramp-up-strategy`")),
        "{w:?}"
    );
}

#[test]
fn vllm_sonnet_keeps_the_prefix_inside_the_input_length() {
    let w = parse(
        Harness::VllmBenchmark,
        "backend: openai-chat\nendpoint: /v1/chat/completions\ndataset-name: sonnet\ndataset-path: /s.txt\n\
         sonnet-input-len: 20\nsonnet-prefix-len: 14\n",
    )
    .unwrap()
    .workload;
    assert_eq!(
        w.data,
        DataSpec::Sonnet(Sonnet {
            path: "/s.txt".into(),
            input_len: 20,
            output_len: 150,
            prefix_len: 14
        })
    );
    assert_eq!(w.api.kind, ApiKind::Chat);
}

#[test]
fn vllm_prefix_repetition_makes_whole_groups_of_num_prompts_as_vllm_s_dataset_does() {
    // 25 prompts over 3 prefixes: 8 suffixes each, 24 requests (`num_requests // num_prefixes` per prefix).
    let w = parse(
        Harness::VllmBenchmark,
        "dataset-name: prefix_repetition\nnum-prompts: 25\nprefix-repetition-prefix-len: 40\n\
         prefix-repetition-suffix-len: 12\nprefix-repetition-num-prefixes: 3\nprefix-repetition-output-len: 9\n\
         disable-shuffle: true\n",
    )
    .unwrap()
    .workload;
    assert_eq!(
        w.data,
        DataSpec::SharedPrefix(SharedPrefix {
            num_groups: 3,
            num_prompts_per_group: 8,
            system_prompt_len: TokenLengths::fixed(40),
            question_len: TokenLengths::fixed(12),
            output_len: TokenLengths::fixed(9),
            seed: None,
            multi_turn: false,
            style: SharedPrefixStyle::VllmPrefixRepetition { shuffle: false },
            prefix_images: None,
            question_images: None,
        })
    );
    assert_eq!(w.stages[0].limit.requests, Some(24));
    // Not a random dataset: vLLM leaves ignore_eos off.
    assert!(!w.api.ignore_eos);
    // vLLM's defaults (256 + 256 tokens, 10 prefixes, 128 out), shuffled; `output-len` sets the answer length.
    let w = parse(
        Harness::VllmBenchmark,
        "dataset-name: prefix_repetition\nnum-prompts: 1000\noutput-len: 64\n",
    )
    .unwrap()
    .workload;
    let DataSpec::SharedPrefix(sp) = &w.data else {
        panic!("{:?}", w.data)
    };
    assert_eq!(
        (sp.num_groups, sp.num_prompts_per_group, &sp.output_len),
        (10, 100, &TokenLengths::fixed(64))
    );
    assert_eq!(sp.system_prompt_len, TokenLengths::fixed(256));
    assert_eq!(
        sp.style,
        SharedPrefixStyle::VllmPrefixRepetition { shuffle: true }
    );
    // Fewer prompts than prefixes is vLLM's ValueError.
    let e = err(
        Harness::VllmBenchmark,
        "dataset-name: prefix_repetition\nnum-prompts: 4\nprefix-repetition-num-prefixes: 5\n",
    );
    assert!(
        e.contains("num_requests (4) must be greater than or equal to num_prefixes (5)"),
        "{e}"
    );
}

#[test]
fn vllm_burstgpt_reads_its_csv_and_needs_a_path() {
    let w = parse(
        Harness::VllmBenchmark,
        "dataset-name: burstgpt\ndataset-path: /data/BurstGPT_1.csv\nnum-prompts: 7\n",
    )
    .unwrap()
    .workload;
    assert_eq!(
        w.data,
        DataSpec::BurstGpt(BurstGpt {
            path: "/data/BurstGPT_1.csv".into()
        })
    );
    assert_eq!(w.stages[0].limit.requests, Some(7));
    assert!(!w.api.ignore_eos);
    let e = err(Harness::VllmBenchmark, "dataset-name: burstgpt\n");
    assert!(e.contains("dataset-path"), "{e}");
}

#[test]
fn vllm_hf_picks_the_dataset_class_by_path_or_hf_name_with_its_split() {
    let w = parse(
        Harness::VllmBenchmark,
        "dataset-name: hf\ndataset-path: /data/mt-bench\nhf-name: philschmid/mt-bench\n",
    )
    .unwrap()
    .workload;
    assert_eq!(
        w.data,
        DataSpec::VllmHf(VllmHf {
            path: "/data/mt-bench".into(),
            kind: HfDatasetKind::MtBench,
            split: "train".into(),
            output_len: None,
            streaming: true,
            shuffle: true,
            chat_template: true,
        })
    );
    // By path; the flags each change what is read; the general output-len beats hf-output-len.
    let w = parse(
        Harness::VllmBenchmark,
        "dataset-name: hf\ndataset-path: likaixin/InstructCoder\nhf-split: test\nhf-output-len: 50\n\
         output-len: 64\nno-stream: none\nskip-chat-template: none\ndisable-shuffle: none\nhf-subset: default\n",
    )
    .unwrap()
    .workload;
    assert_eq!(
        w.data,
        DataSpec::VllmHf(VllmHf {
            path: "likaixin/InstructCoder".into(),
            kind: HfDatasetKind::InstructCoder,
            split: "test".into(),
            output_len: Some(64),
            streaming: false,
            shuffle: false,
            chat_template: false,
        })
    );
    // AIMO sends its problem as it is: no template whatever skip-chat-template says.
    let w = parse(
        Harness::VllmBenchmark,
        "dataset-name: hf\ndataset-path: /d\nhf-name: AI-MO/aimo-validation-aime\n",
    )
    .unwrap()
    .workload;
    assert!(
        matches!(&w.data, DataSpec::VllmHf(hf) if hf.kind == HfDatasetKind::Aimo && !hf.chat_template)
    );
}

#[test]
fn vllm_hf_refuses_what_it_does_not_read_naming_the_key_and_reason() {
    let e = err(
        Harness::VllmBenchmark,
        "dataset-name: hf\ndataset-path: /d\nhf-name: Aeala/ShareGPT_Vicuna_unfiltered\n",
    );
    assert!(e.contains("set `hf-split`"), "{e}");
    let e = err(
        Harness::VllmBenchmark,
        "dataset-name: hf\ndataset-path: yale-nlp/MMVU\n",
    );
    assert!(
        e.contains("dataset-path") && e.contains("MMVUDataset") && e.contains("video"),
        "{e}"
    );
    let e = err(
        Harness::VllmBenchmark,
        "dataset-name: hf\ndataset-path: /d\nhf-name: zed-industries/zeta\n",
    );
    assert!(
        e.contains("hf-name") && e.contains("NextEditPredictionDataset"),
        "{e}"
    );
    let e = err(
        Harness::VllmBenchmark,
        "dataset-name: hf\ndataset-path: /data/mine\n",
    );
    assert!(
        e.contains("philschmid/mt-bench") && e.contains("`hf-name`"),
        "{e}"
    );
    let e = err(
        Harness::VllmBenchmark,
        "dataset-name: hf\ndataset-path: /d\nhf-name: philschmid/mt-bench\nhf-subset: en\n",
    );
    assert!(e.contains("BuilderConfig 'en' not found"), "{e}");
    let e = err(
        Harness::VllmBenchmark,
        "dataset-name: instructcoder\ndataset-path: /d\n",
    );
    assert!(
        e.contains("`dataset-name: hf`") && e.contains("hf-name: likaixin/InstructCoder"),
        "{e}"
    );
}

#[test]
fn vllm_spec_bench_reads_first_turns_of_a_category_always_through_the_chat_template() {
    let parsed = parse(
        Harness::VllmBenchmark,
        "dataset-name: spec_bench\ndataset-path: /d/question.jsonl\nspec-bench-category: coding\n\
         skip-chat-template: true\noutput-len: 64\n",
    )
    .unwrap();
    assert_eq!(
        parsed.workload.data,
        DataSpec::File(DatasetFile {
            path: "/d/question.jsonl".into(),
            output_len: Some(64),
            shuffle: true,
            chat_template: Some(serde_json::Map::new()),
            rows: DatasetRows::SpecBench {
                category: Some("coding".into())
            },
        })
    );
    let warning = parsed
        .warnings
        .iter()
        .find(|w| w.key == "skip-chat-template")
        .expect("a warning");
    assert_eq!(warning.line, Some(4));
    // The default output length is spec-bench-output-len's 256.
    let w = parse(
        Harness::VllmBenchmark,
        "dataset-name: spec_bench\ndataset-path: /d/q.jsonl\n",
    )
    .unwrap()
    .workload;
    let DataSpec::File(f) = &w.data else {
        panic!("{:?}", w.data)
    };
    assert_eq!(
        (f.output_len, &f.rows),
        (Some(256), &DatasetRows::SpecBench { category: None })
    );
}

#[test]
fn inference_perf_keys_that_change_requests_are_honoured_or_refused() {
    // Per-request SLO headers become the goodput constraints (ms by default), over report.goodput.
    let w = parse(
        Harness::InferencePerf,
        &format!(
            "{IP_HEAD}api:\n  streaming: true\n  headers: {{x-slo-ttft-ms: 250, X-SLO-TPOT-MS: '20'}}\n\
             load:\n  stages: [{{rate: 1, duration: 1}}]\nreport:\n  goodput: {{constraints: {{ttft: 1, itl: 0.5}}}}\n"
        ),
    )
    .unwrap()
    .workload;
    assert_eq!(
        w.goodput,
        [
            GoodputConstraint {
                metric: SloMetric::Itl,
                limit: Duration::from_millis(500)
            },
            GoodputConstraint {
                metric: SloMetric::Ttft,
                limit: Duration::from_millis(250)
            },
            GoodputConstraint {
                metric: SloMetric::Tpot,
                limit: Duration::from_millis(20)
            },
        ]
    );
    // Custom header names and units; a non-streamed run has no header SLOs.
    let w = parse(
        Harness::InferencePerf,
        &format!(
            "{IP_HEAD}api:\n  streaming: true\n  slo_unit: s\n  slo_ttft_header: my-ttft\n  headers: {{my-ttft: 2}}\n\
             load:\n  stages: [{{rate: 1, duration: 1}}]\n"
        ),
    )
    .unwrap()
    .workload;
    assert_eq!(
        w.goodput,
        [GoodputConstraint {
            metric: SloMetric::Ttft,
            limit: secs(2)
        }]
    );
    let w = parse(
        Harness::InferencePerf,
        &format!("{IP_HEAD}api:\n  headers: {{x-slo-ttft-ms: 250}}\nload:\n  stages: [{{rate: 1, duration: 1}}]\n"),
    )
    .unwrap()
    .workload;
    assert!(w.goodput.is_empty());
    // The legacy question_distribution replaces an int question_len.
    let w = parse(
        Harness::InferencePerf,
        &format!(
            "{IP_HEAD}load:\n  stages: [{{rate: 1, duration: 1}}]\ndata:\n  type: shared_prefix\n  shared_prefix:\n    \
             question_len: 7\n    question_distribution: {{type: uniform, min: 5, max: 9}}\n"
        ),
    )
    .unwrap()
    .workload;
    let DataSpec::SharedPrefix(sp) = &w.data else {
        panic!()
    };
    assert_eq!(
        sp.question_len.shape,
        LengthShape::Uniform { min: 5, max: 9 }
    );
    assert_eq!(sp.output_len, TokenLengths::fixed(50));
    // A sweep takes inference-perf's defaults for everything but its type.
    let w = parse(
        Harness::InferencePerf,
        &format!("{IP_HEAD}load:\n  sweep: {{type: geometric}}\n"),
    )
    .unwrap()
    .workload;
    assert_eq!(
        w.stages[0].arrival,
        Arrival::Sweep(Sweep::InferencePerf {
            process: SweepProcess::Constant,
            progression: SweepProgression::Geometric,
            num_stages: 5,
            stage_duration: secs(180),
            num_requests: Some(2000),
            timeout: Some(secs(60)),
            saturation_percentile: Some(95.0),
        })
    );
    let stages = "load:\n  stages: [{rate: 1, duration: 1}]\n";
    for (yaml, key, needle) in [
        (
            format!(
                "{IP_HEAD}load:\n  worker_max_tcp_connections: 50\n  stages: [{{rate: 1, duration: 1}}]\n"
            ),
            "load.worker_max_tcp_connections",
            "below the worker's in-flight cap (`worker_max_concurrency`, 100)",
        ),
        (
            format!(
                "{IP_HEAD}load:\n  circuit_breakers: [errors]\n  stages: [{{rate: 1, duration: 1}}]\n"
            ),
            "load.circuit_breakers[0]",
            "Unknown circuit breaker: errors",
        ),
        (
            format!("{IP_HEAD}{stages}data:\n  type: mock\n  use_chat_template: true\n"),
            "data.use_chat_template",
            "only with `type: random`",
        ),
        (
            format!("{IP_HEAD}api:\n  session_id_header_key: x-s\n{stages}"),
            "api.session_id_header_key",
            "a session-id header on data other than trace_session_replay and conversation_replay",
        ),
        (
            format!("{IP_HEAD}api:\n  session_token_header_key: x-session-token\n{stages}"),
            "api.session_token_header_key",
            "llmbench does not read response headers yet",
        ),
        (
            format!(
                "{IP_HEAD}api:\n  streaming: true\n  headers: {{x-slo-ttft-ms: fast}}\n{stages}"
            ),
            "api.headers.x-slo-ttft-ms",
            "`fast` is not a number of ms",
        ),
        (
            format!("{IP_HEAD}load:\n  sweep: {{num_stages: 3}}\n"),
            "load.sweep.type",
            "is required",
        ),
        (
            format!(
                "{IP_HEAD}{stages}data:\n  type: shared_prefix\n  shared_prefix:\n    question_len: {{mean: 5}}\n    question_distribution: {{mean: 6}}\n"
            ),
            "data.shared_prefix.question_distribution",
            "refuses `question_distribution` beside it",
        ),
    ] {
        let e = parse(Harness::InferencePerf, &yaml).expect_err(&yaml);
        assert_eq!(e.key(), Some(key), "{yaml}: {e}");
        assert!(e.to_string().contains(needle), "{yaml}: {e}");
    }
    // A connection cap at the in-flight cap never binds.
    parse(
        Harness::InferencePerf,
        &format!("{IP_HEAD}load:\n  worker_max_concurrency: 10\n  worker_max_tcp_connections: 10\n  stages: [{{rate: 1, duration: 1}}]\n"),
    )
    .unwrap();
}

#[test]
fn inference_perf_share_gpt_distributions_are_filters_not_dumps() {
    let w = parse(
        Harness::InferencePerf,
        &format!(
            "{IP_HEAD}load:\n  stages: [{{rate: 1, duration: 1}}]\ndata:\n  type: shareGPT\n  path: /d/sg.json\n  \
             input_distribution: {{min: 3, max: 10}}\n  output_distribution: {{mean: 5, std_dev: 2, min: 1, max: 3}}\n"
        ),
    )
    .unwrap()
    .workload;
    let DataSpec::ShareGpt(sg) = &w.data else {
        panic!()
    };
    assert_eq!(sg.output, None);
    assert!(!sg.shuffle);
    assert!(matches!(
        sg.output_filter.as_ref().map(|o| &o.shape),
        Some(LengthShape::Normal { min: 1, max: 3, .. })
    ));
}

#[test]
fn guidellm_request_format_spellings_choose_the_endpoint() {
    let flat = |extra: &str| {
        parse(
            Harness::Guidellm,
            &format!("target: http://x/v1/\nprofile: synchronous\nmax_seconds: 5\ndata: prompt_tokens=8\n{extra}"),
        )
        .unwrap()
        .workload
    };
    // v0.4–v0.6 default to chat completions; the target's trailing `/v1` is dropped, as guidellm does.
    let w = flat("");
    assert_eq!(
        (w.api.kind, w.api.path()),
        (ApiKind::Chat, "/v1/chat/completions")
    );
    assert_eq!(w.api.base_url.as_deref(), Some("http://x"));
    for spelling in [
        "data_request_formatter: text_completions\n",
        "data-request-formatter: text_completions\n",
        "request_type: text_completions\n",
        "request-type: text_completions\n",
        "request_format: /v1/completions\n",
        "data_request_formatter: {request_type: text_completions}\n",
    ] {
        assert_eq!(flat(spelling).api.kind, ApiKind::Completion, "{spelling}");
    }
    for spelling in [
        "data_request_formatter: chat_completions\n",
        "request_type: chat_completions\n",
        "request-format: /v1/chat/completions\n",
    ] {
        assert_eq!(flat(spelling).api.kind, ApiKind::Chat, "{spelling}");
    }
    // The formatter's own arguments: stream and a max_tokens for data without output lengths (no ignore_eos).
    let w = flat(
        "data_request_formatter: {request_type: chat_completions, stream: false, max_tokens: 77}\n",
    );
    assert!(!w.api.streaming);
    assert!(!w.api.ignore_eos);
    let DataSpec::SyntheticText(s) = &w.data else {
        panic!()
    };
    assert_eq!(s.output, Some(TokenLengths::fixed(77)));
    // A v0.3 file (underscored keys, `rate_type`) sent text completions.
    let w = parse(
        Harness::Guidellm,
        "target: http://x\nrate_type: synchronous\nmax_seconds: 5\ndata: prompt_tokens=8\n",
    )
    .unwrap()
    .workload;
    assert_eq!(w.api.kind, ApiKind::Completion);
    let e = err(
        Harness::Guidellm,
        "target: http://x\nprofile: synchronous\nmax_seconds: 5\ndata: prompt_tokens=8\nrequest_type: audio_transcriptions\n",
    );
    assert!(
        e.contains(
            "request format `audio_transcriptions` (llmbench sends no audio) is not supported"
        ),
        "{e}"
    );
    let e = err(
        Harness::Guidellm,
        "target: http://x\nprofile: synchronous\nmax_seconds: 5\ndata: prompt_tokens=8\nrequest_type: chat\n",
    );
    assert!(e.contains("unknown request format `chat`"), "{e}");
}

#[test]
fn guidellm_constraint_lists_apply_by_stage_index_and_the_last_repeats() {
    let w = parse(
        Harness::Guidellm,
        &format!(
            "{GUIDELLM_SPEC}  profile: {{kind: constant, rate: [1, 2, 4]}}\n  constraints:\n  - {{kind: max_requests, count: [10, 20]}}\n  - {{kind: max_duration, seconds: 30}}\n"
        ),
    )
    .unwrap()
    .workload;
    let limits: Vec<(Option<u64>, Option<Duration>)> = w
        .stages
        .iter()
        .map(|s| (s.limit.requests, s.limit.duration))
        .collect();
    assert_eq!(
        limits,
        [
            (Some(10), Some(secs(30))),
            (Some(20), Some(secs(30))),
            (Some(20), Some(secs(30)))
        ]
    );
    // A sweep's measured rates share one limit: more than three figures are refused.
    let e = err(
        Harness::Guidellm,
        &format!(
            "{GUIDELLM_SPEC}  profile: {{kind: sweep}}\n  constraints: [{{kind: max_requests, count: [1, 2, 3, 4]}}]\n"
        ),
    );
    assert!(
        e.contains("constraint lists with a different figure for each rate of a sweep"),
        "{e}"
    );
}

#[test]
fn guidellm_pipeline_and_metric_keys_are_honoured_or_refused() {
    // Defaults are accepted in every spelling.
    parse(
        Harness::Guidellm,
        &format!(
            "{GUIDELLM_SPEC}  profile: {{kind: synchronous}}\n  constraints: [{{kind: max_requests, count: 5}}]\n  \
             data_column_mapper: {{kind: generative_column_mapper}}\n  data_preprocessors: [encode_media]\n  \
             data_finalizer: generative\n  metrics: {{kind: generative, prefer_response_metrics: true, sample_size: 10}}\n  \
             tokenizer: {{kind: hf_auto, model: org/tok}}\n"
        ),
    )
    .unwrap();
    let head = "target: http://x\nprofile: synchronous\nmax_seconds: 5\n";
    for (yaml, key, needle) in [
        (
            format!("{head}data: prompt_tokens=8\ndata_column_mapper: {{text_column: question}}\n"),
            "data_column_mapper",
            "column mappings for synthetic data",
        ),
        (
            format!("{head}data: prompt_tokens=8\ndata_preprocessors: [turn_pivot]\n"),
            "data_preprocessors",
            "other than guidellm's default",
        ),
        (
            format!("{head}data: prompt_tokens=8\nprefer_response_metrics: false\n"),
            "prefer_response_metrics",
            "counting tokens locally",
        ),
        (
            format!("{head}data: prompt_tokens=8\ndata_samples: 100\n"),
            "data_samples",
            "capping the number of synthetic samples",
        ),
        (
            format!(
                "{head}data: prompt_tokens=8\nover_saturation: {{enabled: true, confidence: 2}}\n"
            ),
            "over_saturation.confidence",
            "a fraction in [0, 1]",
        ),
        (
            format!("{head}data: prompt_tokens=8,turns=2,delay=1.5,delay_min=2,delay_max=1\n"),
            "data.delay",
            "the think time's bounds are crossed",
        ),
        (
            format!("{head}data: prompt_tokens=8\nbackend_kwargs: {{extras: {{method: PUT}}}}\n"),
            "backend_kwargs.extras.method",
            "extra request arguments",
        ),
    ] {
        let e = parse(Harness::Guidellm, &yaml).expect_err(&yaml);
        assert_eq!(e.key(), Some(key), "{yaml}: {e}");
        assert!(e.to_string().contains(needle), "{yaml}: {e}");
    }
    // Think time: `delay` alone is that many seconds; with a stdev the bounds default to ±5 stdev, min at 0.
    let w = parse(
        Harness::Guidellm,
        &format!("{head}data: prompt_tokens=8,turns=2,delay=1.5,delay_stdev=0.5\n"),
    )
    .unwrap()
    .workload;
    let DataSpec::SyntheticText(text) = &w.data else {
        panic!("synthetic: {:?}", w.data);
    };
    let think = text.think_time.expect("a think time");
    assert_eq!((think.mean, think.stdev), (1.5, Some(0.5)));
    assert_eq!(think.bounds(), (0.0, 4.0));
    // Backend arguments: the key, extra headers and the timeout are honoured.
    let w = parse(
        Harness::Guidellm,
        &format!(
            "{head}data: prompt_tokens=8\nsample_requests: 20\nbackend_kwargs: {{api_key: k, timeout: 9, \
             extras: {{headers: {{x-a: b}}}}}}\n"
        ),
    )
    .unwrap();
    assert_eq!(
        parsed_api_key(parsed_first(parsed_warnings(&parsed_ok(w)))),
        Some("k".to_string())
    );
}

fn parsed_ok(p: Parsed) -> Parsed {
    p
}
fn parsed_warnings(p: &Parsed) -> &Parsed {
    assert!(
        p.warnings.iter().all(|w| w.kind == WarningKind::Ignored),
        "{:?}",
        p.warnings
    );
    p
}
fn parsed_first(p: &Parsed) -> &Workload {
    assert_eq!(
        p.workload.api.headers,
        [("x-a".to_string(), "b".to_string())]
    );
    assert_eq!(p.workload.request_timeout, Some(secs(9)));
    &p.workload
}
fn parsed_api_key(w: &Workload) -> Option<String> {
    w.api.api_key.clone()
}

/// Property tests: no document makes a dialect parser panic or hang.
mod properties {
    use std::sync::mpsc;

    use proptest::prelude::*;
    use serde_json::Value as Json;

    use super::*;

    /// Real key names of every dialect, so generated documents reach deep into the parsers.
    const KEYS: &[&str] = &[
        // inference-perf
        "load",
        "type",
        "stages",
        "rate",
        "duration",
        "num_requests",
        "concurrency_level",
        "sweep",
        "num_stages",
        "stage_duration",
        "interval",
        "worker_max_concurrency",
        "worker_max_tcp_connections",
        "api",
        "streaming",
        "headers",
        "slo_unit",
        "server",
        "base_url",
        "data",
        "input_distribution",
        "output_distribution",
        "min",
        "max",
        "mean",
        "std_dev",
        "variance",
        "total_count",
        "shared_prefix",
        "num_groups",
        "num_prompts_per_group",
        "system_prompt_len",
        "question_len",
        "output_len",
        "question_distribution",
        "report",
        "goodput",
        "constraints",
        "ttft",
        "request_lifecycle",
        "percentiles",
        "path",
        "tokenizer",
        "circuit_breakers",
        // guidellm
        "spec",
        "benchmarks",
        "backend",
        "kind",
        "target",
        "model",
        "request_format",
        "profile",
        "streams",
        "sweep_size",
        "seconds",
        "count",
        "window",
        "stopping_scope",
        "prompt_tokens",
        "prompt_tokens_stdev",
        "prompt_tokens_max",
        "output_tokens",
        "turns",
        "prefix_buckets",
        "prefix_tokens",
        "prefix_count",
        "samples",
        "data_loader",
        "warmup",
        "cooldown",
        "percent",
        "value",
        "mode",
        "seed",
        "rampup",
        "max_seconds",
        "max_requests",
        "data_request_formatter",
        "request_type",
        "backend_kwargs",
        "extras",
        "metrics",
        "data_column_mapper",
        "profile.streams",
        "constraints[0].count",
        // vllm flags
        "dataset-name",
        "dataset-path",
        "num-prompts",
        "request-rate",
        "burstiness",
        "max-concurrency",
        "random-input-len",
        "random-range-ratio",
        "sonnet-input-len",
        "custom-output-len",
        "skip-chat-template",
        "header",
        "endpoint",
        "percentile-metrics",
        "metric-percentiles",
        "goodput-",
        "num-warmups",
        "served-model-name",
        "input-len",
        "output-len",
        // nop
        "model_name",
        "pvc_name",
    ];

    /// Values that mean something to some parser.
    const WORDS: &[&str] = &[
        "constant",
        "poisson",
        "concurrent",
        "synchronous",
        "throughput",
        "sweep",
        "async",
        "random",
        "shareGPT",
        "shared_prefix",
        "synthetic_text",
        "max_duration",
        "max_requests",
        "max_error_rate",
        "custom",
        "sonnet",
        "sharegpt",
        "openai-chat",
        "openai_http",
        "/v1/completions",
        "/v1/chat/completions",
        "chat_completions",
        "inf",
        "none",
        "-1",
        "1e12",
        "prompt_tokens=8,output_tokens=4",
        "{\"input\": 0.5}",
        "x=1",
        "ttft:5",
        "normal",
        "uniform",
        "fixed",
        "static",
        "all",
        "geometric",
        "",
    ];

    fn scalar() -> impl Strategy<Value = Json> {
        prop_oneof![
            Just(Json::Null),
            any::<bool>().prop_map(Json::Bool),
            any::<i64>().prop_map(Json::from),
            (-5i64..2000).prop_map(Json::from),
            any::<f64>()
                .prop_filter("JSON numbers are finite", |f| f.is_finite())
                .prop_map(Json::from),
            prop::sample::select(WORDS).prop_map(|w| Json::String(w.to_owned())),
            "[ -~]{0,12}".prop_map(Json::String),
        ]
    }

    fn key() -> impl Strategy<Value = String> {
        prop_oneof![
            4 => prop::sample::select(KEYS).prop_map(str::to_owned),
            1 => "[a-z_-]{1,10}",
        ]
    }

    fn document() -> impl Strategy<Value = Json> {
        scalar().prop_recursive(5, 64, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Json::Array),
                prop::collection::btree_map(key(), inner, 0..6)
                    .prop_map(|m| Json::Object(m.into_iter().collect())),
            ]
        })
    }

    /// Every harness with a dialect parser behind `parse_profile`.
    const HARNESSES: [Harness; 5] = [
        Harness::InferencePerf,
        Harness::Guidellm,
        Harness::VllmBenchmark,
        Harness::Inferencemax,
        Harness::Nop,
    ];

    /// Runs `body` on another thread and fails if it does not finish in time: a hang is a failure too.
    fn within(seconds: u64, body: impl FnOnce() + Send + 'static) {
        let (tx, rx) = mpsc::channel();
        let worker = std::thread::spawn(move || {
            body();
            let _ = tx.send(());
        });
        match rx.recv_timeout(Duration::from_secs(seconds)) {
            Ok(()) => worker.join().expect("property test thread"),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                if let Err(panic) = worker.join() {
                    std::panic::resume_unwind(panic);
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                panic!("a parser did not finish within {seconds} s")
            }
        }
    }

    fn parse_all(text: &str) {
        for harness in HARNESSES {
            for (strict, lenient) in [(false, false), (true, false), (false, true)] {
                let options = ParseOptions {
                    strict,
                    lenient,
                    default_seed: Some(7),
                };
                let _ = parse_profile(harness, "p.yaml", text, &options);
            }
        }
    }

    #[test]
    fn no_generated_document_panics_or_hangs_a_parser() {
        within(300, || {
            proptest!(ProptestConfig::with_cases(256), |(doc in document())| {
                // JSON text is YAML; the block form reaches the same parsers through another syntax.
                parse_all(&doc.to_string());
                if let Ok(block) = serde_saphyr::to_string(&doc) {
                    parse_all(&block);
                }
            });
        });
    }

    #[test]
    fn no_profile_shaped_document_panics_or_hangs_a_parser() {
        // Documents with each dialect's top-level sections, so the generator reaches the stage and data parsers.
        within(300, || {
            let shaped = (document(), document(), document()).prop_map(|(a, b, c)| {
                serde_json::json!({
                    "load": {"type": a.clone(), "stages": [b.clone()], "sweep": c.clone()},
                    "data": {"type": "random", "input_distribution": a.clone(), "output_distribution": b.clone(), "shared_prefix": c.clone()},
                    "api": a.clone(),
                    "spec": {"backend": {"target": "http://x"}, "data": [b.clone()], "profile": a.clone(), "constraints": [c.clone()]},
                    "benchmarks": [c.clone()],
                    "dataset-name": "custom",
                    "num-prompts": a,
                    "random-range-ratio": b,
                    "header": c,
                })
            });
            proptest!(ProptestConfig::with_cases(256), |(doc in shaped)| {
                parse_all(&doc.to_string());
            });
        });
    }

    #[test]
    fn no_text_panics_or_hangs_a_parser() {
        within(300, || {
            let text = prop_oneof![
                any::<String>(),
                prop::collection::vec(
                    prop_oneof![
                        prop::sample::select(KEYS).prop_map(|k| format!("{k}: ")),
                        prop::sample::select(WORDS).prop_map(str::to_owned),
                        Just("\n".to_owned()),
                        Just("  ".to_owned()),
                        Just("- ".to_owned()),
                        Just("&a ".to_owned()),
                        Just("*a".to_owned()),
                        Just("[{".to_owned()),
                        Just("]}".to_owned()),
                        "[ -~]{0,6}",
                    ],
                    0..40,
                )
                .prop_map(|parts| parts.concat()),
            ];
            proptest!(ProptestConfig::with_cases(256), |(t in text)| {
                parse_all(&t);
            });
        });
    }
}

// ---- inference-perf server metrics: `metrics:` and `report.prometheus:` ----

const IP_LOAD: &str = "server:\n  base_url: http://x\nload:\n  type: constant\n  interval: 2\n  stages:\n    - {rate: 1, duration: 5}\n";

#[test]
fn inference_perf_prometheus_metrics_client_becomes_a_federated_source() {
    let yaml = format!(
        "{IP_LOAD}metrics:\n  type: prometheus\n  prometheus:\n    url: http://prometheus:9090/\n    scrape_interval: 10\n    \
         filters: ['namespace=\"llm-d\"', 'pod=~\"vllm-.*\"']\n"
    );
    let w = parse(Harness::InferencePerf, &yaml).unwrap().workload;
    let source = w.server_metrics.expect("a Prometheus source");
    assert_eq!(source.url, "http://prometheus:9090");
    assert_eq!(source.scrape_interval, secs(10));
    assert_eq!(source.filters, ["namespace=\"llm-d\"", "pod=~\"vllm-.*\""]);
    // Without per-stage Prometheus reports the pause between stages is the profile's own.
    assert_eq!(w.stage_interval, secs(2));
    assert!(w.report.prometheus_summary && !w.report.prometheus_per_stage);
}

#[test]
fn inference_perf_per_stage_prometheus_reports_stretch_the_stage_interval_to_the_scrape_interval() {
    let yaml = format!(
        "{IP_LOAD}metrics:\n  type: prometheus\n  prometheus: {{url: 'http://p:9090'}}\nreport:\n  prometheus:\n    \
         summary: false\n    per_stage: true\n"
    );
    let w = parse(Harness::InferencePerf, &yaml).unwrap().workload;
    // scrape_interval defaults to 15 s; load.interval 2 s becomes max(2, 15).
    assert_eq!(w.stage_interval, secs(15));
    assert!(!w.report.prometheus_summary && w.report.prometheus_per_stage);
}

#[test]
fn inference_perf_session_lifecycle_switches_are_honoured_with_upstreams_defaults() {
    // `SessionLifecycleReportConfig`: summary and per_stage on, per_session off.
    let w = parse(Harness::InferencePerf, IP_LOAD).unwrap().workload;
    assert!(
        w.report.session_summary && w.report.session_per_stage && !w.report.session_per_session
    );
    let yaml = format!(
        "{IP_LOAD}report:\n  session_lifecycle:\n    summary: false\n    per_stage: false\n    per_session: true\n"
    );
    let w = parse(Harness::InferencePerf, &yaml).unwrap().workload;
    assert!(
        !w.report.session_summary && !w.report.session_per_stage && w.report.session_per_session
    );
    // Not Optional upstream: `null` is no mapping; an unknown switch is named (as every unknown key is).
    let e = err(
        Harness::InferencePerf,
        &format!("{IP_LOAD}report:\n  session_lifecycle: null\n"),
    );
    assert!(e.contains("report.session_lifecycle"), "{e}");
    let parsed = parse(
        Harness::InferencePerf,
        &format!("{IP_LOAD}report:\n  session_lifecycle:\n    per_turn: true\n"),
    )
    .unwrap();
    assert!(
        parsed
            .warnings
            .iter()
            .any(|w| w.key == "report.session_lifecycle.per_turn"),
        "{:?}",
        parsed.warnings
    );
}

#[test]
fn inference_perf_default_metrics_client_and_null_prometheus_report() {
    let yaml = format!("{IP_LOAD}metrics:\n  type: default\nreport:\n  prometheus: null\n");
    let w = parse(Harness::InferencePerf, &yaml).unwrap().workload;
    assert_eq!(w.server_metrics, None);
    assert!(!w.report.prometheus_summary && !w.report.prometheus_per_stage);
}

#[test]
fn inference_perf_metrics_errors_name_the_key() {
    let e = err(
        Harness::InferencePerf,
        &format!(
            "{IP_LOAD}metrics:\n  type: prometheus\n  prometheus:\n    google_managed: true\n"
        ),
    );
    assert!(
        e.contains("metrics.prometheus.google_managed") && e.contains("--metrics-endpoint"),
        "{e}"
    );
    let e = err(
        Harness::InferencePerf,
        &format!("{IP_LOAD}metrics:\n  type: prometheus\n  prometheus:\n    scrape_interval: 5\n"),
    );
    assert!(e.contains("metrics.prometheus.url"), "{e}");
    let e = err(
        Harness::InferencePerf,
        &format!(
            "{IP_LOAD}metrics:\n  type: prometheus\n  prometheus:\n    url: http://p\n    filters: [namespace]\n"
        ),
    );
    assert!(
        e.contains("metrics.prometheus.filters") && e.contains("label matcher"),
        "{e}"
    );
    let e = err(
        Harness::InferencePerf,
        &format!("{IP_LOAD}metrics:\n  type: datadog\n"),
    );
    assert!(e.contains("metrics.type") && e.contains("datadog"), "{e}");
}

/// llmbench's own bundled `conversation_replay` profiles, rendered as the upstream ones are above.
fn bundled_inference_perf(name: &str) -> Workload {
    let profile = llmbench_core::library::builtin_profile("inference-perf", name)
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    parse_profile(
        Harness::InferencePerf,
        &profile.file_name(),
        &render(profile.template),
        &ParseOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{name}: {e}"))
    .workload
}

fn replay(w: &Workload) -> &ConversationReplay {
    match &w.data {
        DataSpec::ConversationReplay(r) => r,
        other => panic!("{other:?}"),
    }
}

fn lognormal(mean: f64, std_dev: f64, min: u64, max: u64) -> Option<TokenLengths> {
    Some(TokenLengths {
        shape: LengthShape::LogNormal {
            mean,
            spread: Spread::StdDev(std_dev),
            min,
            max,
        },
        total_count: None,
    })
}

/// Each stage's `num_requests` and `concurrency_level`.
fn concurrent_stages(w: &Workload) -> Vec<(u64, u32)> {
    w.stages
        .iter()
        .map(|s| match s.arrival {
            Arrival::Closed { concurrency, .. } => (s.limit.requests.unwrap_or(0), concurrency),
            ref other => panic!("{other:?}"),
        })
        .collect()
}

#[test]
fn the_bundled_conversation_replay_profiles_parse_with_every_key() {
    let w = bundled_inference_perf("agentic_code_generation");
    let r = replay(&w);
    assert_eq!(
        (
            r.seed,
            r.num_conversations,
            r.max_model_len,
            r.shared_system_prompt_len
        ),
        (42, 40, Some(262144), 3000)
    );
    assert_eq!(
        r.dynamic_system_prompt_len,
        lognormal(160000.0, 233600.0, 10000, 990000)
    );
    assert_eq!(r.turns_per_conversation, lognormal(540.0, 48600.0, 1, 3000));
    assert_eq!(
        r.input_tokens_per_turn,
        lognormal(1500.0, 1200.0, 100, 10000)
    );
    assert_eq!(r.output_tokens_per_turn, lognormal(425.0, 825.0, 50, 10000));
    assert_eq!(r.tool_call_latency_sec, lognormal(15.0, 55.0, 1, 100));
    assert_eq!(w.api.kind, ApiKind::Completion);
    assert_eq!(
        concurrent_stages(&w),
        vec![(100, 5), (200, 10), (400, 20), (600, 30), (800, 40)]
    );

    let w = bundled_inference_perf("interactive-chat");
    let r = replay(&w);
    assert_eq!(
        (
            r.num_conversations,
            r.max_model_len,
            r.shared_system_prompt_len
        ),
        (50, None, 1000)
    );
    assert_eq!(r.turns_per_conversation, lognormal(4.0, 2.5, 1, 15));
    assert_eq!(r.tool_call_latency_sec, lognormal(45.0, 40.0, 5, 300));
    assert_eq!(concurrent_stages(&w).len(), 5);

    let w = bundled_inference_perf("guide_p2p-kv-cache-sharing_1");
    let r = replay(&w);
    assert_eq!(
        (r.seed, r.num_conversations, r.max_model_len),
        (37, 192, Some(65536))
    );
    assert_eq!(
        r.dynamic_system_prompt_len,
        lognormal(49152.0, 1.0, 49152, 49152)
    );
    assert_eq!(concurrent_stages(&w), vec![(1152, 128)]);

    // The session-affinity header rides on conversation_replay's sessions too (`openai_client.py` reads
    // `user_session_id`).
    let profile =
        llmbench_core::library::builtin_profile("inference-perf", "guide_p2p-kv-cache-sharing_1")
            .expect("bundled");
    let text = render(profile.template).replacen(
        "api:\n",
        "api:\n  session_id_header_key: x-session-id\n",
        1,
    );
    let with_header = parse_profile(
        Harness::InferencePerf,
        "p2p.yaml",
        &text,
        &ParseOptions::default(),
    )
    .expect("a session header on conversation_replay");
    assert_eq!(
        with_header.workload.api.session_id_header.as_deref(),
        Some("x-session-id")
    );

    let w = bundled_inference_perf("guide_predicted-latency-routing_1");
    let r = replay(&w);
    assert_eq!((r.seed, r.num_conversations), (32, 32));
    assert_eq!(
        r.dynamic_system_prompt_len.as_ref().map(|d| &d.shape),
        Some(&LengthShape::Uniform {
            min: 15000,
            max: 100000
        })
    );
    assert_eq!(
        r.tool_call_latency_sec.as_ref().map(|d| &d.shape),
        Some(&LengthShape::Normal {
            mean: 0.0,
            spread: Spread::StdDev(0.0),
            min: 0,
            max: 0
        })
    );
    assert_eq!(concurrent_stages(&w), vec![(192, 32)]);
}

#[test]
fn the_bundled_conversation_replay_profiles_build_their_plans() {
    use crate::conversations::{Style, build_conversations};
    let plan = |name: &str| {
        let w = bundled_inference_perf(name);
        let set = build_conversations(&w, &llmbench_text::tokenizer::Tokenizer::builtin(), None)
            .unwrap_or_else(|e| panic!("{name}: {e}"))
            .expect("multi-turn");
        match set.style {
            Style::InferencePerfReplay(plan) => plan,
            other => panic!("{other:?}"),
        }
    };
    // Every distribution of the P2P guide is pinned, and its 1–2 s latency rounds to 1 or 2.
    let p = plan("guide_p2p-kv-cache-sharing_1");
    assert_eq!(
        (p.conversations.len(), p.shared_tokens, p.max_model_len),
        (192, 256, 65536)
    );
    for c in &p.conversations {
        assert_eq!((c.dynamic_tokens, c.turns.len()), (49152, 6));
        for t in &c.turns {
            assert_eq!((t.input_tokens, t.max_tokens), (256, 256));
            assert!((1..=2).contains(&t.think_s));
        }
    }
    let p = plan("guide_predicted-latency-routing_1");
    assert_eq!(
        p.max_model_len,
        crate::conversations::REPLAY_DEFAULT_MAX_MODEL_LEN
    );
    for c in &p.conversations {
        assert!((15000..=100000).contains(&c.dynamic_tokens));
        assert!((2..=20).contains(&c.turns.len()));
        assert!(c.turns.iter().all(|t| t.think_s == 0));
    }
    // The agentic profile's plan is numbers only (its texts are made as turns go out).
    let p = plan("agentic_code_generation");
    let turns: usize = p.conversations.iter().map(|c| c.turns.len()).sum();
    assert!(turns <= 40 * 3000);
    for c in &p.conversations {
        assert!((10000..=990000).contains(&c.dynamic_tokens));
        assert!(c.turns.iter().all(|t| (1..=100).contains(&t.think_s)));
    }
    let p = plan("interactive-chat");
    assert!(
        p.conversations
            .iter()
            .all(|c| (1..=15).contains(&c.turns.len()))
    );
}

/// inference-perf `trace_replay`: `load.trace` times the one stage, `data.trace` (random data) sizes its prompts;
/// the stage's rate and duration are checked but unused, and the distributions are ignored as upstream ignores
/// them.
#[test]
fn inference_perf_trace_replay_parses_and_refuses_what_upstream_cannot_run() {
    let body = "load:\n  type: trace_replay\n  trace:\n    file: times.csv\n    format: AzurePublicDataset\n  \
                stages: [{rate: 1, duration: 5}]\ndata:\n  type: random\n  trace: {file: lengths.csv}\n  \
                input_distribution: {min: 1, max: 2, mean: 1, std_dev: 0}\n";
    let parsed = parse(Harness::InferencePerf, &format!("{IP_HEAD}{body}")).expect("parses");
    let w = parsed.workload;
    assert_eq!(w.stages.len(), 1);
    assert_eq!(w.stages[0].load, LoadKind::Trace);
    assert_eq!(
        w.stages[0].arrival,
        Arrival::InferencePerfTrace {
            file: "times.csv".to_owned()
        }
    );
    // No duration cut: `run_stage` waits for every row's request.
    assert_eq!(w.stages[0].limit, StageLimit::default());
    assert_eq!(
        w.data,
        DataSpec::AzureTrace(AzureTraceData {
            path: "lengths.csv".to_owned()
        })
    );
    assert!(
        parsed
            .warnings
            .iter()
            .any(|w| w.key.contains("input_distribution")),
        "{:?}",
        parsed.warnings
    );

    // Prompts from other data at the trace's times: upstream sends int(rate × duration) of them.
    let msg = err(
        Harness::InferencePerf,
        &format!(
            "{IP_HEAD}load:\n  type: trace_replay\n  trace: {{file: t.csv}}\n  stages: [{{rate: 1, duration: 5}}]\n"
        ),
    );
    assert!(
        msg.starts_with("p.yaml:4: `load.type`: `trace_replay` with prompts"),
        "{msg}"
    );
    // A second stage runs past the data's rows upstream.
    let two = body.replace(
        "[{rate: 1, duration: 5}]",
        "[{rate: 1, duration: 5}, {rate: 2, duration: 5}]",
    );
    let msg = err(Harness::InferencePerf, &format!("{IP_HEAD}{two}"));
    assert!(msg.contains("a second `trace_replay` stage"), "{msg}");
    // `data.trace` under a rate load.
    let constant = body.replace(
        "type: trace_replay\n  trace:\n    file: times.csv\n    format: AzurePublicDataset\n",
        "type: constant\n",
    );
    let msg = err(Harness::InferencePerf, &format!("{IP_HEAD}{constant}"));
    assert!(msg.contains("`data.trace`"), "{msg}");
    let msg = err(
        Harness::InferencePerf,
        &format!(
            "{IP_HEAD}{}",
            body.replace("AzurePublicDataset", "Mooncake")
        ),
    );
    assert!(msg.contains("unknown trace format `Mooncake`"), "{msg}");
}

/// inference-perf's `examples/vllm/config-circuitbreaker.yml` (7de5ef2): the breaker it defines, enabled by
/// `load.circuit_breakers`, with its two triggers.
#[test]
fn inference_perf_circuit_breakers_are_read_as_upstreams_example_writes_them() {
    use crate::workload::circuit_breaker::Trigger;
    let yaml = format!(
        "{IP_HEAD}circuit_breakers:\n  - name: request_timeout_breaker\n    metrics:\n      matches:\n        \
         - error.error_type == 'TimeoutError'\n    triggers:\n      - type: consecutive\n        threshold: 10\n      \
         - type: rate_over_window\n        window_sec: 2.5\n        threshold: 0.8\n        min_samples: 2\n\
         load:\n  type: constant\n  stages:\n  - rate: 1\n    duration: 30\n  circuit_breakers:\n    \
         - request_timeout_breaker\n"
    );
    let w = parse(Harness::InferencePerf, &yaml).unwrap().workload;
    assert_eq!(w.circuit_breakers.len(), 1);
    let breaker = &w.circuit_breakers[0];
    assert_eq!(breaker.name, "request_timeout_breaker");
    assert_eq!(breaker.matches.len(), 1);
    assert!(breaker.rules.is_empty());
    assert_eq!(
        breaker.triggers,
        [
            Trigger::Consecutive { threshold: 10 },
            Trigger::RateOverWindow {
                window: Duration::from_millis(2500),
                threshold: 0.8,
                min_samples: 2
            }
        ]
    );
    // A misspelt breaker name in the load, and an expression over a field llmbench does not read.
    let msg = err(
        Harness::InferencePerf,
        &yaml.replace(
            "    - request_timeout_breaker",
            "    - request_timeout_braker",
        ),
    );
    assert!(
        msg.contains("Unknown circuit breaker: request_timeout_braker")
            && msg.contains("did you mean `request_timeout_breaker`?"),
        "{msg}"
    );
    let msg = err(
        Harness::InferencePerf,
        &yaml.replace("error.error_type ==", "response_data =="),
    );
    assert!(msg.contains("`response_data` is no field"), "{msg}");
}

/// inference-perf `api.response_format` (`ResponseFormat.to_api_format`, `openai_client.py`): added to every
/// OpenAI body — the schema whole, `name` defaulting to `structured_output`, a missing schema sent as `null` —
/// and left out of Anthropic Messages bodies, with a warning that says so.
#[test]
fn inference_perf_response_format_is_sent_as_its_api_format_and_not_to_anthropic_messages() {
    let load = "load:\n  type: constant\n  stages:\n    - {rate: 1, duration: 1}\n";
    let sent = |api: &str| {
        let parsed = parse(
            Harness::InferencePerf,
            &format!("{IP_HEAD}api:\n{api}{load}"),
        )
        .unwrap();
        let body = parsed
            .workload
            .api
            .extra_body
            .get("response_format")
            .cloned();
        (body.map(|b| b.to_string()), parsed.warnings)
    };
    let (schema, _) = sent(
        "  type: chat\n  response_format:\n    json_schema:\n      type: object\n      \
         properties: {a: {enum: [x, z]}}\n      required: [a]\n",
    );
    assert_eq!(
        schema.as_deref(),
        Some(
            r#"{"type":"json_schema","json_schema":{"name":"structured_output","schema":{"type":"object","properties":{"a":{"enum":["x","z"]}},"required":["a"]}}}"#
        )
    );
    let (named, _) = sent("  response_format: {type: json_schema, name: answer}\n");
    assert_eq!(
        named.as_deref(),
        Some(r#"{"type":"json_schema","json_schema":{"name":"answer","schema":null}}"#)
    );
    let (object, _) = sent("  response_format: {type: json_object, name: ignored}\n");
    assert_eq!(object.as_deref(), Some(r#"{"type":"json_object"}"#));
    let (anthropic, warnings) =
        sent("  type: anthropic_messages\n  response_format: {type: json_object}\n");
    assert_eq!(anthropic, None);
    assert!(
        warnings
            .iter()
            .any(|w| w.key == "api.response_format" && w.message.contains("OpenAI APIs only")),
        "{warnings:?}"
    );
    let error = parse(
        Harness::InferencePerf,
        &format!("{IP_HEAD}api:\n  response_format: {{type: xml}}\n{load}"),
    )
    .unwrap_err()
    .to_string();
    assert!(
        error.contains("api.response_format.type")
            && error.contains("expected json_schema or json_object"),
        "{error}"
    );
}

const MM_HEAD: &str =
    "backend: openai-chat\nendpoint: /v1/chat/completions\ndataset-name: random-mm\n";

fn mm_images(yaml: &str) -> llmbench_data::image::RandomImages {
    let w = parse(Harness::VllmBenchmark, &format!("{MM_HEAD}{yaml}"))
        .unwrap()
        .workload;
    match w.data {
        DataSpec::Random(RandomData {
            images: Some(images),
            ..
        }) => images,
        other => panic!("{other:?}"),
    }
}

#[test]
fn random_mm_defaults_to_one_image_of_vllms_two_sizes() {
    let images = mm_images("");
    assert_eq!((images.min_items, images.max_items), (1, 1));
    // The default's video bucket has weight 0 and is dropped, as vLLM drops it.
    assert_eq!(
        images.buckets,
        vec![
            llmbench_data::image::ImageBucket {
                height: 256,
                width: 256,
                weight: 0.5
            },
            llmbench_data::image::ImageBucket {
                height: 720,
                width: 1280,
                weight: 0.5
            },
        ]
    );
}

#[test]
fn random_mm_counts_range_around_the_base_and_stop_at_the_image_limit() {
    // base 3, ratio 0.5: [floor(1.5), ceil(4.5)] = [1, 5], clamped to the limit 4.
    let images = mm_images(
        "random-mm-base-items-per-request: 3\nrandom-mm-num-mm-items-range-ratio: 0.5\n\
         random-mm-limit-mm-per-prompt: '{\"image\": 4, \"video\": 0}'\n\
         random-mm-bucket-config: '{(64, 32, 1): 0.25, \"(8, 8, 1)\": 0.75, (720, 1280, 16): 0.0}'\n",
    );
    assert_eq!((images.min_items, images.max_items), (1, 4));
    assert_eq!(
        images
            .buckets
            .iter()
            .map(|b| (b.height, b.width, b.weight))
            .collect::<Vec<_>>(),
        vec![(64, 32, 0.25), (8, 8, 0.75)]
    );
    // A YAML map is the same limit.
    let images = mm_images(
        "random-mm-limit-mm-per-prompt: {image: 0}\nrandom-mm-num-mm-items-range-ratio: 1\n",
    );
    assert_eq!((images.min_items, images.max_items), (0, 0));
}

#[test]
fn random_mm_refuses_what_vllm_refuses_and_videos_by_name() {
    for (yaml, key, says) in [
        (
            "backend: openai\ndataset-name: random-mm\n",
            "dataset-name",
            "backend `openai` does not send",
        ),
        (
            &format!("{MM_HEAD}random-mm-num-mm-items-range-ratio: 1.5\n"),
            "random-mm-num-mm-items-range-ratio",
            "must be in [0, 1], found 1.5",
        ),
        (
            &format!("{MM_HEAD}random-mm-bucket-config: '{{(8, 8, 1): 0}}'\n"),
            "random-mm-bucket-config",
            "values must be non-zero",
        ),
        (
            &format!("{MM_HEAD}random-mm-bucket-config: '{{(8, 8, 1): -1, (4, 4, 1): 2}}'\n"),
            "random-mm-bucket-config",
            "must be non-negative",
        ),
        (
            &format!("{MM_HEAD}random-mm-bucket-config: '{{(8, 8): 1}}'\n"),
            "random-mm-bucket-config",
            "Expected tuple (H, W, T)",
        ),
        (
            &format!("{MM_HEAD}random-mm-bucket-config: '{{(8, 8, 16): 1}}'\n"),
            "random-mm-bucket-config",
            "video buckets",
        ),
        (
            &format!("{MM_HEAD}random-mm-limit-mm-per-prompt: '{{\"video\": 1}}'\n"),
            "random-mm-limit-mm-per-prompt",
            "Modality image is not in limit_mm_per_prompt",
        ),
        (
            &format!(
                "{MM_HEAD}random-mm-base-items-per-request: 4\nrandom-mm-limit-mm-per-prompt: '{{\"image\": 2}}'\n"
            ),
            "random-mm-limit-mm-per-prompt",
            "Min num mm items is greater than max mm items: 4 > 2",
        ),
    ] {
        let msg = err(Harness::VllmBenchmark, yaml);
        assert!(msg.contains(&format!("`{key}`")), "{yaml}: {msg}");
        assert!(msg.contains(says), "{yaml}: {msg}");
    }
}

// ---- inference-perf multimodal (shared_prefix images) ----

const IP_MM_LOAD: &str = "load:\n  stages: [{rate: 1, duration: 1}]\n";
const IP_MM_HEAD: &str = "server:\n  base_url: http://x\nload:\n  stages: [{rate: 1, duration: 1}]\napi: {type: chat}\ndata:\n  type: shared_prefix\n";

/// The bundled guide (upstream's keys moved under `image:`): four 720p images per group at the prefix's start.
#[test]
fn the_bundled_multimodal_guide_weaves_four_720p_images_into_each_prefix() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../workload/profiles/inference-perf/guide_multimodal-serving_1.yaml.in"
    );
    let text = render(&std::fs::read_to_string(path).unwrap());
    let parsed = parse_profile(
        Harness::InferencePerf,
        "guide_multimodal-serving_1.yaml",
        &text,
        &ParseOptions::default(),
    )
    .unwrap();
    assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);
    let DataSpec::SharedPrefix(sp) = &parsed.workload.data else {
        panic!("{:?}", parsed.workload.data)
    };
    assert_eq!((sp.num_groups, sp.num_prompts_per_group), (600, 5));
    let images = sp.prefix_images.as_ref().expect("prefix images");
    assert_eq!(images.count.shape, LengthShape::Fixed(4));
    assert_eq!(images.insertion_point, Some(0.0));
    assert_eq!(
        images.resolutions,
        vec![llmbench_data::image::ImageBucket {
            height: 720,
            width: 1280,
            weight: 1.0
        }]
    );
    assert!(images.weighted);
    assert_eq!(sp.question_images, None);
    assert!(
        parsed.workload.api.images,
        "the pre-flight probes image support"
    );
}

/// `data.multimodal` beside shared_prefix is the question's; presets, explicit sizes and the defaults.
#[test]
fn inference_perf_question_images_take_presets_sizes_and_defaults() {
    let parsed = parse(
        Harness::InferencePerf,
        &format!(
            "{IP_MM_HEAD}  shared_prefix:\n    multimodal: {{image: {{count: {{type: uniform, min: 0, max: 2}}}}}}\n  \
             multimodal:\n    image:\n      count: {{type: fixed, mean: 1}}\n      insertion_point: 0.25\n      \
             resolutions: {{width: 30, height: 20}}\n      representation: webp\n"
        ),
    )
    .unwrap();
    let DataSpec::SharedPrefix(sp) = &parsed.workload.data else {
        panic!()
    };
    let prefix = sp.prefix_images.as_ref().unwrap();
    assert_eq!(prefix.count.shape, LengthShape::Uniform { min: 0, max: 2 });
    assert_eq!(
        (prefix.insertion_point, prefix.resolutions.len()),
        (None, 0)
    );
    let question = sp.question_images.as_ref().unwrap();
    assert_eq!(question.insertion_point, Some(0.25));
    assert_eq!(
        (
            question.resolutions[0].width,
            question.resolutions[0].height
        ),
        (30, 20)
    );
    assert!(!question.weighted);
    // An `image` without `count` makes no image (`if img_cfg and img_cfg.count`).
    let parsed = parse(
        Harness::InferencePerf,
        &format!("{IP_MM_HEAD}  shared_prefix:\n    multimodal: {{image: {{resolutions: 4k}}}}\n"),
    )
    .unwrap();
    let DataSpec::SharedPrefix(sp) = &parsed.workload.data else {
        panic!()
    };
    assert_eq!(sp.prefix_images, None);
}

#[test]
fn inference_perf_multimodal_refusals_name_the_key_and_why() {
    let sp = |mm: &str| format!("{IP_MM_HEAD}  shared_prefix:\n    multimodal: {mm}\n");
    for (yaml, key, needle) in [
        (
            sp("{image: null, count: {type: fixed, mean: 4}}"),
            "data.shared_prefix.multimodal.count",
            "Extra inputs are not permitted",
        ),
        (
            sp("{video: {count: {type: fixed, mean: 1}}}"),
            "data.shared_prefix.multimodal.video",
            "encodes no video",
        ),
        (
            sp("{audio: {count: {type: fixed, mean: 1}}}"),
            "data.shared_prefix.multimodal.audio",
            "sends no audio",
        ),
        (
            sp("{image: {count: {type: fixed, mean: 1}, representation: jpeg}}"),
            "data.shared_prefix.multimodal.image.representation",
            "solid-colour JPEG",
        ),
        (
            sp("{image: {count: {type: fixed, mean: 1}, insertion_point: 1.5}}"),
            "data.shared_prefix.multimodal.image.insertion_point",
            "between 0.0 and 1.0",
        ),
        (
            sp("{image: {count: {type: fixed, mean: 1}, insertion_point: {type: fixed, mean: 1}}}"),
            "data.shared_prefix.multimodal.image.insertion_point",
            "give a number",
        ),
        (
            sp("{image: {count: {type: fixed, mean: 1}, resolutions: 8k}}"),
            "data.shared_prefix.multimodal.image.resolutions",
            "4k, 1080p, 720p, 360p",
        ),
        (
            sp(
                "{image: {count: {type: fixed, mean: 1}, resolutions: [{resolution: 720p, weight: -1}]}}",
            ),
            "data.shared_prefix.multimodal.image.resolutions[0].weight",
            "not negative",
        ),
        (
            sp("{image: {count: {type: fixed, mean: 1}, resolutions: {width: 0, height: 5}}}"),
            "data.shared_prefix.multimodal.image.resolutions.width",
            "refuses 0",
        ),
        (
            format!(
                "{IP_MM_HEAD}  shared_prefix:\n    enable_multi_turn_chat: true\n    multimodal: {{image: {{count: \
                 {{type: fixed, mean: 1}}}}}}\n"
            ),
            "data.shared_prefix",
            "Multimodal multi-turn shared prefix is not supported yet.",
        ),
        (
            format!(
                "server:\n  base_url: http://x\n{IP_MM_LOAD}api: {{type: completion}}\ndata:\n  type: shared_prefix\n  \
                 shared_prefix: {{}}\n  multimodal: {{image: {{count: {{type: fixed, mean: 1}}}}}}\n"
            ),
            "data.multimodal",
            "set `api.type: chat`",
        ),
        (
            format!(
                "{IP_HEAD}{IP_MM_LOAD}data:\n  type: synthetic\n  multimodal: {{image: {{count: {{type: fixed, mean: 1}}}}}}\n"
            ),
            "data.multimodal",
            "MultimodalDataGenerator",
        ),
    ] {
        match parse(Harness::InferencePerf, &yaml) {
            Ok(p) => panic!("{yaml}: parsed {:?}", p.workload.data),
            Err(e) => {
                let text = e.to_string();
                assert!(
                    text.contains(&format!("`{key}`")) || text.contains(key),
                    "{yaml}: {text}"
                );
                assert!(text.contains(needle), "{yaml}: {text}");
            }
        }
    }
}

/// Only the shared_prefix and synthetic generators read `data.multimodal`: with `mock` data it is a warning.
#[test]
fn inference_perf_multimodal_beside_other_data_is_ignored_with_a_warning() {
    let parsed = parse(
        Harness::InferencePerf,
        &format!("{IP_HEAD}{IP_MM_LOAD}data:\n  type: mock\n  multimodal: {{image: {{count: {{type: fixed, mean: 1}}}}}}\n"),
    )
    .unwrap();
    let warned: Vec<String> = parsed.warnings.iter().map(ToString::to_string).collect();
    assert!(
        warned
            .iter()
            .any(|w| w.contains("data.multimodal") && w.contains("never reads")),
        "{warned:?}"
    );
}

/// inference-perf's `visionarena` data: `VisionArenaConfig`'s defaults (split `train`, 1000 rows, 1 image, point
/// 0.0), its keys, and what llmbench refuses, each at its key and line.
#[test]
fn inference_perf_visionarena_reads_a_local_directory_and_refuses_the_hub() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().display().to_string();
    let head = "server:\n  base_url: http://x\napi:\n  type: chat\nload:\n  stages: [{rate: 1, duration: 2}]\n";
    let profile = |body: &str| format!("{head}data:\n  type: visionarena\n{body}");
    let data = |body: &str| -> VisionArenaData {
        match parse(Harness::InferencePerf, &profile(body))
            .expect("parses")
            .workload
            .data
        {
            DataSpec::VisionArena(va) => va,
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(
        data(&format!("  visionarena:\n    hf_dataset_name: {root}\n")),
        VisionArenaData {
            path: root.clone(),
            split: "train".to_owned(),
            num_rows: 1000,
            max_images_per_request: 1,
            insertion_point: ArenaPoint::At(0.0),
        }
    );
    assert_eq!(
        data(&format!(
            "  visionarena:\n    hf_dataset_name: {root}\n    hf_split: test\n    num_rows: 3\n    \
             max_images_per_request: 2\n    insertion_point: null\n"
        )),
        VisionArenaData {
            path: root.clone(),
            split: "test".to_owned(),
            num_rows: 3,
            max_images_per_request: 2,
            insertion_point: ArenaPoint::Uniform,
        }
    );
    assert_eq!(
        data(&format!(
            "  visionarena:\n    hf_dataset_name: {root}\n    insertion_point: 1\n"
        ))
        .insertion_point,
        ArenaPoint::At(1.0)
    );

    let refused = |body: &str| err(Harness::InferencePerf, &profile(body));
    // The default name is a Hub id, as is any name that is not a local directory.
    let e = refused("  visionarena: {}\n");
    assert!(
        e.contains("data.visionarena.hf_dataset_name") && e.contains("huggingface-cli download"),
        "{e}"
    );
    let e = refused("  visionarena:\n    hf_dataset_name: lmarena-ai/VisionArena-Chat\n");
    assert!(
        e.contains("p.yaml:10") && e.contains("not a local directory"),
        "{e}"
    );
    let file = dir.path().join("train.parquet");
    std::fs::write(&file, "").expect("write");
    let e = refused(&format!(
        "  visionarena:\n    hf_dataset_name: {}\n",
        file.display()
    ));
    assert!(e.contains("is a file"), "{e}");
    let e = refused("");
    assert!(e.contains("`data.visionarena` is required"), "{e}");
    let e = refused(&format!(
        "  visionarena:\n    hf_dataset_name: {root}\n    hf_data_files: 'data/*.parquet'\n"
    ));
    assert!(
        e.contains("p.yaml:11") && e.contains("`hf_data_files`"),
        "{e}"
    );
    // A distribution: `fixed` is `int(mean)`, `uniform` a draw per image; normal (the default type) is refused.
    let point = |d: &str| {
        data(&format!(
            "  visionarena:\n    hf_dataset_name: {root}\n    insertion_point: {d}\n"
        ))
        .insertion_point
    };
    assert_eq!(point("{type: fixed, mean: 1.9}"), ArenaPoint::At(1.0));
    assert_eq!(
        point("{type: uniform, min: 0, max: 1}"),
        ArenaPoint::UniformInts { min: 0, max: 1 }
    );
    let e = refused(&format!(
        "  visionarena:\n    hf_dataset_name: {root}\n    insertion_point: {{min: 0, max: 1, mean: 0.5}}\n"
    ));
    assert!(
        e.contains("data.visionarena.insertion_point") && e.contains("`normal` distribution"),
        "{e}"
    );
    let e = refused(&format!(
        "  visionarena:\n    hf_dataset_name: {root}\n    insertion_point: {{type: uniform, min: 2, max: 1}}\n"
    ));
    assert!(e.contains("min (2) cannot be greater than max (1)."), "{e}");
    let e = refused(&format!(
        "  visionarena:\n    hf_dataset_name: {root}\n    num_rows: 0\n"
    ));
    assert!(e.contains("num_rows"), "{e}");
    let e = refused(&format!(
        "  output_distribution: {{min: 1, max: 5, mean: 3}}\n  visionarena:\n    hf_dataset_name: {root}\n"
    ));
    assert!(e.contains("IO distribution not supported"), "{e}");
    let completion = format!(
        "{}data:\n  type: visionarena\n  visionarena:\n    hf_dataset_name: {root}\n",
        head.replace("type: chat", "type: completion")
    );
    let e = err(Harness::InferencePerf, &completion);
    assert!(e.contains("api.type: chat"), "{e}");
}
