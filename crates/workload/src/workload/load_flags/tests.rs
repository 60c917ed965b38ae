//! Each flag on each dialect, checked through the dialect's own parser: the edited profile must mean what the
//! flag says, and a refusal must say why and what to use instead.

use std::collections::BTreeMap;
use std::time::Duration;

use llmbench_core::render::{render_profile, well_known};

use super::*;
use crate::workload::{
    Arrival, DataSpec, LengthShape, ParseOptions, Rate, Spread, StageLimit, TokenLengths, Workload,
    parse_profile,
};

/// A bundled profile rendered as a run renders it.
fn bundled(harness: Harness, name: &str) -> String {
    let profile = llmbench_core::library::builtin_profile(harness.as_str(), name).expect("bundled");
    let values: BTreeMap<String, String> = [
        (well_known::MODEL, "m"),
        (well_known::TOKENIZER, "m"),
        (well_known::ENDPOINT_URL, "http://stack:8000"),
        (well_known::MAX_MODEL_LEN, "4096"),
        (well_known::DATASET_DIR, "/data"),
        (well_known::DATASET_FILE, "set.json"),
        (well_known::PVC_NAME, "pvc"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    render_profile(&profile.file_name(), profile.template, &values, &[]).expect("renders")
}

fn apply_to(harness: Harness, text: &str, flags: &LoadFlags) -> Applied {
    apply(harness, "p.yaml", text, flags).unwrap_or_else(|e| panic!("{e}"))
}

/// The flags applied to the bundled profile, then parsed by the dialect.
fn run_shape(harness: Harness, name: &str, flags: &LoadFlags) -> (Workload, Vec<Edit>) {
    let applied = apply_to(harness, &bundled(harness, name), flags);
    let parsed = parse_profile(
        harness,
        "p.yaml",
        &applied.profile,
        &ParseOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{e}\n{}", applied.profile));
    (parsed.workload, applied.edits)
}

fn refusal(harness: Harness, text: &str, flags: &LoadFlags) -> String {
    apply(harness, "p.yaml", text, flags)
        .expect_err("refused")
        .to_string()
}

fn secs(s: u64) -> Option<Duration> {
    Some(Duration::from_secs(s))
}

fn exactly(n: u64, lengths: &TokenLengths) -> bool {
    match &lengths.shape {
        LengthShape::Fixed(v) => *v == n,
        LengthShape::Normal {
            mean,
            spread,
            min,
            max,
        } => *min == n && *max == n && *mean == n as f64 && *spread == Spread::StdDev(0.0),
        _ => false,
    }
}

#[test]
fn without_flags_the_rendered_text_is_kept_with_its_comments() {
    let text = bundled(Harness::InferencePerf, "sanity_random");
    let applied = apply_to(Harness::InferencePerf, &text, &LoadFlags::default());
    assert_eq!(applied.profile, text);
    assert!(applied.edits.is_empty());
}

#[test]
fn inference_perf_rate_makes_one_stage_at_that_rate_keeping_the_first_duration() {
    let flags = LoadFlags {
        rate: Some(5.0),
        ..LoadFlags::default()
    };
    let (w, edits) = run_shape(Harness::InferencePerf, "summarization_synthetic", &flags);
    assert_eq!(w.stages.len(), 1);
    assert_eq!(
        w.stages[0].arrival,
        Arrival::InferencePerfConstant {
            rate: 5.0,
            duration: Duration::from_secs(120)
        }
    );
    let line = describe(&edits);
    assert!(line.starts_with("--rate 5 → load.stages = "), "{line}");
    assert!(line.contains("(was a list of 4)"), "{line}");
}

#[test]
fn inference_perf_rate_keeps_poisson_arrivals() {
    let flags = LoadFlags {
        rate: Some(2.5),
        duration: secs(3),
        ..LoadFlags::default()
    };
    let (w, _) = run_shape(Harness::InferencePerf, "guide_optimized-baseline_2", &flags);
    assert_eq!(
        w.stages
            .iter()
            .map(|s| s.arrival.clone())
            .collect::<Vec<_>>(),
        [Arrival::InferencePerfPoisson {
            rate: 2.5,
            duration: Duration::from_secs(3)
        }]
    );
}

#[test]
fn inference_perf_duration_sets_every_stage_of_a_ladder() {
    let flags = LoadFlags {
        duration: secs(2),
        ..LoadFlags::default()
    };
    let (w, edits) = run_shape(Harness::InferencePerf, "summarization_synthetic", &flags);
    assert_eq!(w.stages.len(), 4);
    assert!(w.stages.iter().all(|s| s.limit.duration == secs(2)));
    assert_eq!(
        edits[0].to_string(),
        "--duration 2s → load.stages[0].duration = 2 (was 120)"
    );
}

#[test]
fn inference_perf_concurrency_and_requests_make_a_closed_loop() {
    // From a rate profile, --concurrency needs a request count.
    let text = bundled(Harness::InferencePerf, "sanity_random");
    let only = LoadFlags {
        concurrency: Some(3),
        ..LoadFlags::default()
    };
    let message = refusal(Harness::InferencePerf, &text, &only);
    assert!(message.contains("help: add --requests N"), "{message}");
    let flags = LoadFlags {
        concurrency: Some(3),
        requests: Some(9),
        ..LoadFlags::default()
    };
    let (w, _) = run_shape(Harness::InferencePerf, "sanity_random", &flags);
    assert_eq!(w.stages.len(), 1);
    assert_eq!(
        w.stages[0].arrival,
        Arrival::Closed {
            concurrency: 3,
            rampup: Duration::ZERO
        }
    );
    assert_eq!(w.stages[0].limit, StageLimit::requests(9));
    // A concurrent profile keeps its first stage's request count.
    let (w, _) = run_shape(Harness::InferencePerf, "random_concurrent", &only);
    assert_eq!(w.stages.len(), 1);
    assert_eq!(w.stages[0].limit, StageLimit::requests(32));
    // --requests alone sets every concurrent stage.
    let requests = LoadFlags {
        requests: Some(7),
        ..LoadFlags::default()
    };
    let (w, _) = run_shape(Harness::InferencePerf, "random_concurrent", &requests);
    assert_eq!(w.stages.len(), 4);
    assert!(w.stages.iter().all(|s| s.limit.requests == Some(7)));
}

#[test]
fn inference_perf_refuses_what_its_stages_cannot_say() {
    let rate_profile = bundled(Harness::InferencePerf, "sanity_random");
    let closed = bundled(Harness::InferencePerf, "random_concurrent");
    for (text, flags, expected) in [
        (
            &rate_profile,
            LoadFlags {
                rate: Some(1.0),
                concurrency: Some(2),
                ..LoadFlags::default()
            },
            "--concurrency 2 cannot be applied to this inference-perf profile: an inference-perf load is either",
        ),
        (
            &rate_profile,
            LoadFlags {
                requests: Some(5),
                ..LoadFlags::default()
            },
            "it has no request count\n  help: use --duration D",
        ),
        (
            &closed,
            LoadFlags {
                duration: secs(5),
                ..LoadFlags::default()
            },
            "it has no duration\n  help: use --requests N",
        ),
        (
            &rate_profile,
            LoadFlags {
                duration: Some(Duration::from_millis(1500)),
                ..LoadFlags::default()
            },
            "--duration 1.5s cannot be applied to this inference-perf profile: inference-perf stage durations are \
             whole seconds",
        ),
        (
            &bundled(Harness::InferencePerf, "otel_traces"),
            LoadFlags {
                rate: Some(1.0),
                ..LoadFlags::default()
            },
            "a `trace_session_replay` load takes its times and requests from the trace",
        ),
        (
            &bundled(Harness::InferencePerf, "chatbot_sharegpt"),
            LoadFlags {
                input_tokens: Some(10),
                ..LoadFlags::default()
            },
            "`shareGPT` data takes its lengths from the dataset",
        ),
    ] {
        let message = refusal(Harness::InferencePerf, text, &flags);
        assert!(message.contains(expected), "{message}");
    }
}

#[test]
fn inference_perf_sweep_becomes_one_stage_or_gets_its_stage_duration() {
    let rate = LoadFlags {
        rate: Some(2.0),
        ..LoadFlags::default()
    };
    let (w, _) = run_shape(Harness::InferencePerf, "sweep_random", &rate);
    assert!(matches!(
        w.stages[..],
        [ref s] if matches!(s.arrival, Arrival::InferencePerfConstant { rate, .. } if rate == 2.0)
    ));
    let duration = LoadFlags {
        duration: secs(4),
        ..LoadFlags::default()
    };
    let (w, _) = run_shape(Harness::InferencePerf, "sweep_random", &duration);
    assert!(matches!(
        &w.stages[0].arrival,
        Arrival::Sweep(crate::workload::Sweep::InferencePerf { stage_duration, .. })
            if *stage_duration == Duration::from_secs(4)
    ));
}

#[test]
fn inference_perf_lengths_are_exact_for_random_shared_prefix_and_conversations() {
    let flags = LoadFlags {
        input_tokens: Some(100),
        output_tokens: Some(20),
        ..LoadFlags::default()
    };
    let (w, _) = run_shape(Harness::InferencePerf, "sanity_random", &flags);
    let DataSpec::Random(data) = &w.data else {
        panic!("{:?}", w.data)
    };
    assert!(
        exactly(100, &data.input) && exactly(20, &data.output),
        "{data:?}"
    );
    let (w, edits) = run_shape(
        Harness::InferencePerf,
        "shared_prefix_synthetic_short",
        &flags,
    );
    let DataSpec::SharedPrefix(shared) = &w.data else {
        panic!("{:?}", w.data)
    };
    assert_eq!(shared.question_len, TokenLengths::fixed(100));
    assert_eq!(shared.output_len, TokenLengths::fixed(20));
    assert_eq!(
        shared.system_prompt_len,
        TokenLengths::fixed(2048),
        "the prefix stays"
    );
    assert!(
        edits.iter().any(|e| e.to_string()
            == "--input-tokens 100 → data.shared_prefix.question_len = 100 (was 256)")
    );
    let (w, _) = run_shape(Harness::InferencePerf, "agentic_code_generation", &flags);
    let DataSpec::ConversationReplay(replay) = &w.data else {
        panic!("{:?}", w.data)
    };
    assert!(
        replay
            .input_tokens_per_turn
            .as_ref()
            .is_some_and(|l| exactly(100, l))
    );
    assert!(
        replay
            .output_tokens_per_turn
            .as_ref()
            .is_some_and(|l| exactly(20, l))
    );
}

#[test]
fn guidellm_rate_and_concurrency_set_the_profile_kind() {
    let rate = LoadFlags {
        rate: Some(3.0),
        ..LoadFlags::default()
    };
    let (w, _) = run_shape(Harness::Guidellm, "sanity_concurrent", &rate);
    assert!(matches!(w.stages[0].arrival, Arrival::GuidellmConstant { rate, .. } if rate == 3.0));
    let streams = LoadFlags {
        concurrency: Some(2),
        ..LoadFlags::default()
    };
    let (w, _) = run_shape(Harness::Guidellm, "sanity_random", &streams);
    assert!(matches!(
        w.stages[0].arrival,
        Arrival::Closed { concurrency: 2, .. }
    ));
    let both = LoadFlags {
        rate: Some(4.0),
        concurrency: Some(2),
        ..LoadFlags::default()
    };
    let (w, _) = run_shape(Harness::Guidellm, "sanity_concurrent", &both);
    assert!(matches!(w.stages[0].arrival, Arrival::GuidellmConstant { rate, .. } if rate == 4.0));
    assert_eq!(w.stages[0].max_concurrency, Some(2));
    // A ladder of rates becomes one rate; a sweep becomes a rate.
    let (w, _) = run_shape(Harness::Guidellm, "summarization_synthetic", &rate);
    assert_eq!(w.stages.len(), 1);
    let (w, _) = run_shape(Harness::Guidellm, "sweep_random", &rate);
    assert_eq!(w.stages.len(), 1);
    assert!(matches!(
        w.stages[0].arrival,
        Arrival::GuidellmConstant { .. }
    ));
}

#[test]
fn guidellm_benchmarks_become_one_benchmark_under_a_load_flag() {
    let rate = LoadFlags {
        rate: Some(2.0),
        ..LoadFlags::default()
    };
    let (w, edits) = run_shape(Harness::Guidellm, "concurrent-1k-1k", &rate);
    assert_eq!(w.stages.len(), 1);
    assert!(matches!(w.stages[0].arrival, Arrival::GuidellmConstant { rate, .. } if rate == 2.0));
    assert_eq!(w.stages[0].limit.duration, secs(600));
    assert_eq!(
        describe(&edits),
        "--rate 2 → benchmarks removed (was a list of 5), spec.profile.kind = constant (was concurrent), \
         spec.profile.rate = 2 (added)"
    );
    // multi-turn's first benchmark keeps its request count.
    let streams = LoadFlags {
        concurrency: Some(4),
        ..LoadFlags::default()
    };
    let (w, edits) = run_shape(Harness::Guidellm, "multi-turn", &streams);
    assert_eq!(w.stages.len(), 1);
    assert!(matches!(
        w.stages[0].arrival,
        Arrival::Closed { concurrency: 4, .. }
    ));
    assert_eq!(w.stages[0].limit.requests, Some(320));
    let line = describe(&edits);
    assert!(
        line.contains("benchmarks kept the first entry, removed the other 4"),
        "{line}"
    );
}

#[test]
fn guidellm_limit_flags_replace_both_stops_of_every_benchmark() {
    let requests = LoadFlags {
        requests: Some(5),
        ..LoadFlags::default()
    };
    let (w, _) = run_shape(Harness::Guidellm, "sanity_random", &requests);
    assert_eq!(w.stages[0].limit.requests, Some(5));
    assert_eq!(
        w.stages[0].limit.duration, None,
        "--requests alone decides the end"
    );
    let (w, _) = run_shape(Harness::Guidellm, "multi-turn", &requests);
    assert_eq!(w.stages.len(), 5);
    assert!(w.stages.iter().all(|s| s.limit.requests == Some(5)));
    let duration = LoadFlags {
        duration: secs(3),
        ..LoadFlags::default()
    };
    let (w, edits) = run_shape(Harness::Guidellm, "multi-turn", &duration);
    assert_eq!(w.stages.len(), 5);
    assert!(
        w.stages
            .iter()
            .all(|s| s.limit.duration == secs(3) && s.limit.requests.is_none())
    );
    assert!(
        edits
            .iter()
            .any(|e| e.key == "benchmarks[0].\"constraints[0].count\""
                && e.change == "removed (was 320)"),
        "{edits:?}"
    );
}

#[test]
fn guidellm_lengths_drop_the_spread() {
    let flags = LoadFlags {
        input_tokens: Some(100),
        output_tokens: Some(7),
        ..LoadFlags::default()
    };
    let (w, _) = run_shape(Harness::Guidellm, "summarization_synthetic", &flags);
    let DataSpec::SyntheticText(data) = &w.data else {
        panic!("{:?}", w.data)
    };
    assert_eq!(data.prompt, TokenLengths::fixed(100));
    assert_eq!(data.output, Some(TokenLengths::fixed(7)));
}

#[test]
fn guidellm_flat_scenarios_keep_their_spelling_and_data_form() {
    let text = "target: http://stack:8000\nrate-type: concurrent\nrate: 4\nmax-seconds: 50\n\
                data: prompt_tokens=256,output_tokens=128,prefix_tokens=32\n";
    let flags = LoadFlags {
        rate: Some(2.0),
        requests: Some(6),
        input_tokens: Some(10),
        ..LoadFlags::default()
    };
    let applied = apply_to(Harness::Guidellm, text, &flags);
    assert!(
        applied.profile.contains("rate-type: constant"),
        "{}",
        applied.profile
    );
    assert!(
        applied.profile.contains("max-requests: 6"),
        "{}",
        applied.profile
    );
    assert!(
        !applied.profile.contains("max-seconds"),
        "{}",
        applied.profile
    );
    assert!(
        applied
            .profile
            .contains("prompt_tokens=10,output_tokens=128,prefix_tokens=32"),
        "{}",
        applied.profile
    );
    let w = parse_profile(
        Harness::Guidellm,
        "p.yaml",
        &applied.profile,
        &ParseOptions::default(),
    )
    .expect("parses")
    .workload;
    assert!(matches!(w.stages[0].arrival, Arrival::GuidellmConstant { rate, .. } if rate == 2.0));
    assert_eq!(w.stages[0].limit, StageLimit::requests(6));
}

#[test]
fn vllm_flags_map_onto_request_rate_max_concurrency_and_num_prompts() {
    // sanity_random is a closed loop of 1 (no rate): a rate replaces it.
    let flags = LoadFlags {
        rate: Some(4.0),
        requests: Some(9),
        ..LoadFlags::default()
    };
    let (w, _) = run_shape(Harness::VllmBenchmark, "sanity_random", &flags);
    assert_eq!(w.stages[0].max_concurrency, None);
    assert_eq!(
        w.stages[0].arrival,
        Arrival::VllmGamma {
            rate: Rate::PerSecond(4.0),
            burstiness: 1.0,
            count: 9
        }
    );
    // sharegpt is 8 req/s capped at 512: --concurrency alone makes it a closed loop.
    let flags = LoadFlags {
        concurrency: Some(4),
        output_tokens: Some(16),
        ..LoadFlags::default()
    };
    let (w, edits) = run_shape(Harness::VllmBenchmark, "sharegpt", &flags);
    assert!(matches!(
        w.stages[0].arrival,
        Arrival::VllmGamma {
            rate: Rate::Infinite,
            ..
        }
    ));
    assert_eq!(w.stages[0].max_concurrency, Some(4));
    assert!(matches!(&w.data, DataSpec::ShareGpt(s) if s.output == Some(TokenLengths::fixed(16))));
    assert!(
        edits
            .iter()
            .any(|e| e.to_string() == "--concurrency 4 → request-rate = inf (was 8)"),
        "{edits:?}"
    );
    // With a rate, the profile's cap stays.
    let rate = LoadFlags {
        rate: Some(2.0),
        ..LoadFlags::default()
    };
    let (w, _) = run_shape(Harness::VllmBenchmark, "sharegpt", &rate);
    assert_eq!(w.stages[0].max_concurrency, Some(512));
}

#[test]
fn vllm_lengths_are_exact_and_duration_is_refused() {
    let text = "model: m\nbase_url: http://stack:8000\ndataset_name: random\nrandom_input_len: 50\n\
                random_range_ratio: 0.5\n";
    let flags = LoadFlags {
        input_tokens: Some(12),
        ..LoadFlags::default()
    };
    let applied = apply_to(Harness::VllmBenchmark, text, &flags);
    let w = parse_profile(
        Harness::VllmBenchmark,
        "p.yaml",
        &applied.profile,
        &ParseOptions::default(),
    )
    .expect("parses")
    .workload;
    let DataSpec::Random(data) = &w.data else {
        panic!("{:?}", w.data)
    };
    assert_eq!(data.input, TokenLengths::fixed(12));
    assert!(matches!(data.output.shape, LengthShape::RangeRatio { ratio, .. } if ratio == 0.5));
    assert!(
        applied.profile.contains("random_input_len: 12"),
        "the file's spelling: {}",
        applied.profile
    );
    let message = refusal(
        Harness::VllmBenchmark,
        text,
        &LoadFlags {
            duration: secs(10),
            ..LoadFlags::default()
        },
    );
    assert_eq!(
        message,
        "--duration 10s cannot be applied to this vllm-benchmark profile: vllm bench serve has no duration: it \
         sends `num-prompts` requests\n  help: use --requests N (at --rate R they take about N / R seconds)"
    );
}

#[test]
fn aiperf_maps_concurrency_count_and_lengths_and_refuses_rate_and_duration() {
    let flags = LoadFlags {
        concurrency: Some(3),
        requests: Some(7),
        input_tokens: Some(20),
        output_tokens: Some(5),
        ..LoadFlags::default()
    };
    let (w, _) = run_shape(Harness::Aiperf, "synthetic", &flags);
    assert!(matches!(
        w.stages[0].arrival,
        Arrival::Closed { concurrency: 3, .. }
    ));
    assert_eq!(w.stages[0].limit, StageLimit::requests(7));
    let DataSpec::SyntheticText(data) = &w.data else {
        panic!("{:?}", w.data)
    };
    assert_eq!(
        (&data.prompt, &data.output),
        (&TokenLengths::fixed(20), &Some(TokenLengths::fixed(5)))
    );
    let text = bundled(Harness::Aiperf, "synthetic");
    for (flags, expected) in [
        (
            LoadFlags {
                rate: Some(1.0),
                ..LoadFlags::default()
            },
            "does not run AIPerf's request-rate mode",
        ),
        (
            LoadFlags {
                duration: secs(1),
                ..LoadFlags::default()
            },
            "does not run AIPerf's `benchmark-duration`",
        ),
    ] {
        let message = refusal(Harness::Aiperf, &text, &flags);
        assert!(message.contains(expected), "{message}");
    }
    let message = refusal(
        Harness::Aiperf,
        &bundled(Harness::Aiperf, "dataset"),
        &LoadFlags {
            requests: Some(4),
            ..LoadFlags::default()
        },
    );
    assert!(message.contains("replays a trace"), "{message}");
}

#[test]
fn mlperf_rate_is_the_server_scenarios_target_qps_only() {
    let flags = LoadFlags {
        rate: Some(3.0),
        ..LoadFlags::default()
    };
    let applied = apply_to(
        Harness::Mlperf,
        &bundled(Harness::Mlperf, "llama3_1-8b_server"),
        &flags,
    );
    assert!(
        applied.profile.contains("target_qps: 3\n"),
        "{}",
        applied.profile
    );
    let message = refusal(
        Harness::Mlperf,
        &bundled(Harness::Mlperf, "llama3_1-8b_offline"),
        &flags,
    );
    assert!(
        message.contains("the Offline scenario has no arrival rate"),
        "{message}"
    );
    let message = refusal(
        Harness::Mlperf,
        &bundled(Harness::Mlperf, "llama3_1-8b_server"),
        &LoadFlags {
            duration: secs(60),
            ..LoadFlags::default()
        },
    );
    assert!(
        message.contains("--override min_duration=MILLISECONDS"),
        "{message}"
    );
}

#[test]
fn fmperf_long_input_maps_rate_duration_and_answer_length() {
    let flags = LoadFlags {
        rate: Some(2.0),
        duration: secs(5),
        output_tokens: Some(8),
        ..LoadFlags::default()
    };
    let applied = apply_to(
        Harness::Fmperf,
        &bundled(Harness::Fmperf, "sanity_long-input"),
        &flags,
    );
    let (w, _) = crate::workload::parse_fmperf("p.yaml", &applied.profile).expect("parses");
    assert_eq!(w.stages.len(), 1);
    assert_eq!(w.stages[0].run.qps, 2.0);
    assert_eq!(w.stages[0].run.time, 5);
    assert_eq!(w.stages[0].run.answer_len, 8);
    let message = refusal(
        Harness::Fmperf,
        &bundled(Harness::Fmperf, "sanity_short-input"),
        &LoadFlags {
            duration: secs(5),
            ..LoadFlags::default()
        },
    );
    assert!(
        message.contains("the `short-input` scenario's script sets its own run time"),
        "{message}"
    );
}

#[test]
fn nop_and_capacity_searches_refuse_load_flags() {
    let flags = LoadFlags {
        rate: Some(1.0),
        ..LoadFlags::default()
    };
    let message = refusal(Harness::Nop, &bundled(Harness::Nop, "nop"), &flags);
    assert!(
        message.contains("the nop harness sends no requests"),
        "{message}"
    );
    let text = format!(
        "{}capacity_search: {{load: rate, slo: [\"ttft_p99<=1s\"]}}\n",
        bundled(Harness::InferencePerf, "sanity_random")
    );
    let message = refusal(Harness::InferencePerf, &text, &flags);
    assert!(
        message.contains("`capacity_search` varies the load itself"),
        "{message}"
    );
}

#[test]
fn flag_values_parse_as_a_user_writes_them() {
    assert_eq!(parse_duration("30"), Ok(Duration::from_secs(30)));
    assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
    assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
    assert!(parse_duration("0s").is_err());
    assert!(parse_duration("soon").is_err());
    assert_eq!(parse_rate("0.5"), Ok(0.5));
    assert!(parse_rate("0").is_err() && parse_rate("inf").is_err() && parse_rate("-1").is_err());
}

#[test]
fn the_record_keeps_the_values_and_edits_for_run_json() {
    let flags = LoadFlags {
        duration: Some(Duration::from_millis(1500)),
        ..LoadFlags::default()
    };
    assert_eq!(LoadFlagsRecord::new(&LoadFlags::default(), &[]), None);
    let record = LoadFlagsRecord::new(&flags, &[]).expect("a record");
    assert_eq!(
        serde_json::to_value(&record).expect("json"),
        json!({"duration_s": 1.5, "edits": []})
    );
}

#[test]
fn guidellm_underscored_flat_scenarios_with_a_map_or_json_data_are_edited_in_place() {
    let text = "target: http://stack:8000\nprofile: constant\nrate: [4, 8]\nmax_seconds: 50\nmax_requests: 100\n\
                data:\n  prompt_tokens: 256\n  prompt_tokens_stdev: 20\n  output_tokens: 128\n";
    let flags = LoadFlags {
        concurrency: Some(2),
        duration: secs(2),
        input_tokens: Some(10),
        ..LoadFlags::default()
    };
    let applied = apply_to(Harness::Guidellm, text, &flags);
    let w = parse_profile(
        Harness::Guidellm,
        "p.yaml",
        &applied.profile,
        &ParseOptions::default(),
    )
    .expect("parses")
    .workload;
    assert_eq!(w.stages.len(), 1);
    assert!(matches!(
        w.stages[0].arrival,
        Arrival::Closed { concurrency: 2, .. }
    ));
    assert_eq!(w.stages[0].limit.duration, secs(2));
    assert_eq!(w.stages[0].limit.requests, None);
    let DataSpec::SyntheticText(data) = &w.data else {
        panic!("{:?}", w.data)
    };
    assert_eq!(data.prompt, TokenLengths::fixed(10));
    assert!(
        applied.profile.contains("profile: concurrent\nrate: 2\n"),
        "{}",
        applied.profile
    );

    let json_data = "target: http://stack:8000\nprofile: synchronous\nmax_seconds: 5\n\
                     data: '{\"prompt_tokens\": 64, \"output_tokens\": 8}'\n";
    let applied = apply_to(
        Harness::Guidellm,
        json_data,
        &LoadFlags {
            output_tokens: Some(3),
            ..LoadFlags::default()
        },
    );
    assert!(
        applied
            .profile
            .contains(r#"data: "{\"prompt_tokens\":64,\"output_tokens\":3}""#),
        "still a JSON string: {}",
        applied.profile
    );
    let w = parse_profile(
        Harness::Guidellm,
        "p.yaml",
        &applied.profile,
        &ParseOptions::default(),
    )
    .expect("parses")
    .workload;
    assert!(
        matches!(&w.data, DataSpec::SyntheticText(d) if d.output == Some(TokenLengths::fixed(3))),
        "{:?}",
        w.data
    );
}

#[test]
fn vllm_dataset_length_flags_follow_the_chosen_dataset() {
    let sonnet = "model: m\nbase-url: http://stack:8000\nbackend: openai-chat\nendpoint: /v1/chat/completions\n\
                  dataset-name: sonnet\ndataset-path: s.txt\nsonnet-prefix-len: 50\n";
    let flags = LoadFlags {
        input_tokens: Some(300),
        output_tokens: Some(9),
        ..LoadFlags::default()
    };
    let applied = apply_to(Harness::VllmBenchmark, sonnet, &flags);
    let w = parse_profile(
        Harness::VllmBenchmark,
        "p.yaml",
        &applied.profile,
        &ParseOptions::default(),
    )
    .expect("parses")
    .workload;
    assert!(
        matches!(&w.data, DataSpec::Sonnet(s) if s.input_len == 300 && s.output_len == 9 && s.prefix_len == 50),
        "{:?}",
        w.data
    );
    let custom = "model: m\nbase-url: http://stack:8000\ndataset-name: custom\ndataset-path: p.jsonl\n\
                  skip-chat-template: none\noutput-len: 64\n";
    let applied = apply_to(
        Harness::VllmBenchmark,
        custom,
        &LoadFlags {
            output_tokens: Some(5),
            ..LoadFlags::default()
        },
    );
    // The general `output-len` wins over `custom-output-len` in vLLM, so it is the one set.
    assert!(
        applied.profile.contains("output-len: 5\n")
            && !applied.profile.contains("custom-output-len"),
        "{}",
        applied.profile
    );
    let message = refusal(
        Harness::VllmBenchmark,
        custom,
        &LoadFlags {
            input_tokens: Some(5),
            ..LoadFlags::default()
        },
    );
    assert!(
        message.contains("the `custom` dataset's prompts have the lengths of its records"),
        "{message}"
    );
}
