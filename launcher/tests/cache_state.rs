//! The server's prefix cache under control, through the binary: every run (and every stage) sends prompts no
//! earlier one sent unless the profile pins them, a run that meets a warm cache says so, `--reset-prefix-cache`
//! empties the engine's cache first (or is refused by name), `--warm-prefix-cache` primes it, and an experiment
//! compares cold and warm. Against `llmbench sim` (whose prefix cache imitates vLLM's and reports hits in
//! `usage.prompt_tokens_details.cached_tokens`), and, when `LLMBENCH_LLAMA_*` are set, a real llama-server.

mod common;

use std::io::{BufReader, Write};
use std::path::Path;

use serde_json::Value;

use common::*;

/// inference-perf's sanity_random, 3 requests one second apart (the load flags shorten it).
const SHORT: [&str; 4] = ["--rate", "3", "--duration", "1s"];

/// `llmbench run` of sanity_random against `endpoint`, with `extra` flags.
fn sanity(dir: &Path, endpoint: &str, tokenizer: &str, run_id: &str, extra: &[&str]) -> Value {
    let mut args = vec![
        "--endpoint",
        endpoint,
        "--model",
        "m",
        "--allow-model-mismatch",
        "--tokenizer",
        tokenizer,
    ];
    args.extend(SHORT);
    args.extend(extra);
    let output = run_profile(dir, "inference-perf", "sanity_random", run_id, &args);
    succeeded(&output);
    json(&dir.join(run_id).join("summary.json"))
}

/// Every record of a run, in the order they were sent.
fn records(run: &Path) -> Vec<Value> {
    let mut records: Vec<Value> = common::requests_jsonl(&run.join("requests.jsonl"))
        .expect("requests.jsonl")
        .lines()
        .map(|line| serde_json::from_str(line).expect("a record"))
        .collect();
    records.sort_by_key(|r| r["sent_ns"].as_u64());
    records
}

fn cached(record: &Value) -> u64 {
    record["usage"]["cached_tokens"].as_u64().unwrap_or(0)
}

/// The first stage's prefix-cache hit rate from the responses; 0 when none reported a hit (the simulator, as
/// vLLM, leaves `cached_tokens` out when nothing hit).
fn first_stage_hit_rate(summary: &Value) -> f64 {
    summary["stages"][0]["prefix_cache"]["hit_rate"]
        .as_f64()
        .unwrap_or(0.0)
}

#[test]
fn two_runs_of_a_profile_send_different_prompts_so_the_second_finds_nothing_cached() {
    let sim = SimProcess::start(&["--model", "m"]);
    let dir = tempfile::tempdir().expect("tempdir");
    let first = sanity(dir.path(), &sim.url, "builtin", "first", &[]);
    let second = sanity(dir.path(), &sim.url, "builtin", "second", &[]);
    for summary in [&first, &second] {
        assert_eq!(first_stage_hit_rate(summary), 0.0, "{summary:#}");
        assert!(summary.get("prefix_cache_warm").is_none(), "{summary:#}");
    }
    // Each run drew its prompts with a seed of its own, and says so.
    let prompts =
        |id: &str| json(&dir.path().join(id).join("run.json"))["cache"]["prompts"].clone();
    assert_eq!(prompts("first")["origin"], "fresh");
    assert_eq!(prompts("second")["origin"], "fresh");
    assert_ne!(prompts("first")["seed"], prompts("second")["seed"]);
}

#[test]
fn a_pinned_seed_reproduces_the_prompts_and_the_second_run_is_told_the_cache_is_warm() {
    let sim = SimProcess::start(&["--model", "m"]);
    let dir = tempfile::tempdir().expect("tempdir");
    let first = sanity(dir.path(), &sim.url, "builtin", "first", &["--seed", "7"]);
    assert!(first.get("prefix_cache_warm").is_none(), "{first:#}");
    let output = run_profile(dir.path(), "inference-perf", "sanity_random", "second", &{
        let mut args = vec![
            "--endpoint",
            &sim.url,
            "--model",
            "m",
            "--tokenizer",
            "builtin",
        ];
        args.extend(SHORT);
        args.extend(["--seed", "7"]);
        args
    });
    succeeded(&output);
    // The same prompts: the same lengths asked, request by request.
    let lengths = |id: &str| -> Vec<(u64, u64)> {
        records(&dir.path().join(id))
            .iter()
            .map(|r| {
                (
                    r["input_tokens"].as_u64().expect("input tokens"),
                    r["max_tokens"].as_u64().unwrap_or(0),
                )
            })
            .collect()
    };
    assert_eq!(lengths("first"), lengths("second"));
    // The second run's very first request found its prompt cached: warm from the first run, and said so on
    // screen, in the log and in summary.json.
    let second = records(&dir.path().join("second"));
    assert!(cached(&second[0]) > 0, "{:#}", second[0]);
    let summary = json(&dir.path().join("second/summary.json"));
    let warm = &summary["prefix_cache_warm"];
    assert_eq!(warm["source"], "usage", "{summary:#}");
    assert!(warm["first_stage_hit_rate"].as_f64().expect("rate") > 0.5);
    let message = warm["message"].as_str().expect("message");
    assert!(
        message.starts_with("the server's prefix cache is warm from an earlier run: ")
            && message.contains("the prompts are pinned by the seed given, --seed 7"),
        "{message}"
    );
    let printed = stdout(&output);
    assert!(
        printed.contains("cache    WARM from an earlier run: ")
            && printed.contains("prompts pinned by the seed given, --seed 7"),
        "{printed}"
    );
    let meta = json(&dir.path().join("second/run.json"));
    assert_eq!(meta["cache"]["prompts"]["origin"], "pinned");
    assert_eq!(
        meta["cache"]["prompts"]["pinned_by"],
        "the seed given, --seed 7"
    );
    // report.html's headline carries it too.
    let html = std::fs::read_to_string(dir.path().join("second/report.html")).expect("report.html");
    assert!(
        html.contains("WARM from an earlier run"),
        "no warning in report.html"
    );
}

#[test]
fn a_server_that_reports_no_cached_tokens_is_found_warm_from_its_prefix_cache_metrics() {
    // vLLM's default: no `cached_tokens` in the responses, only the prefix-cache counters on /metrics.
    let sim = SimProcess::start(&["--model", "m", "--enable-prompt-tokens-details", "false"]);
    let dir = tempfile::tempdir().expect("tempdir");
    let first = sanity(dir.path(), &sim.url, "builtin", "first", &["--seed", "7"]);
    assert!(first.get("prefix_cache_warm").is_none(), "{first:#}");
    let second = sanity(dir.path(), &sim.url, "builtin", "second", &["--seed", "7"]);
    assert!(
        records(&dir.path().join("second"))
            .iter()
            .all(|r| cached(r) == 0)
    );
    let warm = &second["prefix_cache_warm"];
    assert_eq!(warm["source"], "server_metrics", "{second:#}");
    assert!(
        warm["first_stage_hit_rate"].as_f64().expect("rate") > 0.5,
        "{second:#}"
    );
}

#[test]
fn reset_prefix_cache_empties_the_simulators_cache_so_a_pinned_run_starts_cold() {
    let sim = SimProcess::start(&["--model", "m"]);
    let dir = tempfile::tempdir().expect("tempdir");
    sanity(dir.path(), &sim.url, "builtin", "warmer", &["--seed", "7"]);
    let reset = sanity(
        dir.path(),
        &sim.url,
        "builtin",
        "reset",
        &["--seed", "7", "--reset-prefix-cache"],
    );
    assert_eq!(first_stage_hit_rate(&reset), 0.0, "{reset:#}");
    assert!(reset.get("prefix_cache_warm").is_none(), "{reset:#}");
    let meta = json(&dir.path().join("reset/run.json"));
    assert_eq!(
        meta["cache"]["reset"],
        serde_json::json!({"engine": "vllm", "calls": [
            {"method": "POST", "path": "/reset_prefix_cache", "status": 200}]}),
        "{meta:#}"
    );
}

/// A server that answers 404 to everything: no engine llmbench can reset. Serves until the test ends.
fn server_without_a_reset() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream);
                while read_request(&mut reader).is_some() {
                    let answer = "HTTP/1.1 404 Not Found\r\ncontent-length: 9\r\n\r\nnot found";
                    if reader.get_mut().write_all(answer.as_bytes()).is_err() {
                        break;
                    }
                }
            });
        }
    });
    url
}

#[test]
fn a_server_without_a_reset_is_refused_by_name_before_anything_is_written() {
    let url = server_without_a_reset();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut args = vec![
        "--endpoint",
        &url,
        "--model",
        "m",
        "--tokenizer",
        "builtin",
        "--no-preflight",
        "--reset-prefix-cache",
    ];
    args.extend(SHORT);
    let output = run_profile(
        dir.path(),
        "inference-perf",
        "sanity_random",
        "refused",
        &args,
    );
    assert!(!output.status.success());
    let error = stderr(&output);
    assert!(
        error.contains(&format!(
            "--reset-prefix-cache: {url} has no prefix-cache reset llmbench knows (POST /reset_prefix_cache → 404, \
             POST /flush_cache → 404, GET /slots → 404)"
        )) && error.contains("VLLM_SERVER_DEV_MODE=1")
            && error.contains("--slot-save-path")
            && error.contains("nothing was timed and no results were written"),
        "{error}"
    );
    assert!(!dir.path().join("refused").exists());
}

/// An inference-perf profile of two stages of 4 requests each, one at a time, drawn from a pool of 4 prompts.
fn two_stages(dir: &Path) -> std::path::PathBuf {
    write(
        dir,
        "two.yaml",
        "server: {type: vllm, base_url: REPLACE_ENV_LLMDBENCH_HARNESS_STACK_ENDPOINT_URL, model_name: \
         REPLACE_ENV_LLMDBENCH_DEPLOY_CURRENT_MODEL, ignore_eos: true}\napi: {type: completion, streaming: true}\n\
         data:\n  type: random\n  input_distribution: {min: 40, max: 40, mean: 40, std_dev: 0, total_count: 4}\n  \
         output_distribution: {min: 2, max: 2, mean: 2, std_dev: 0, total_count: 4}\nload:\n  type: concurrent\n  \
         interval: 0\n  stages: [{num_requests: 4, concurrency_level: 1}, {num_requests: 4, concurrency_level: 1}]\n",
    )
}

#[test]
fn each_stage_of_a_fresh_run_sends_prompts_no_other_stage_sent_and_a_pinned_run_resends_its_pool() {
    let sim = SimProcess::start(&["--model", "m"]);
    let dir = tempfile::tempdir().expect("tempdir");
    let profile = two_stages(dir.path());
    let run = |id: &str, extra: &[&str]| {
        let mut args = vec![
            "--endpoint",
            &sim.url,
            "--model",
            "m",
            "--tokenizer",
            "builtin",
        ];
        args.extend(extra);
        succeeded(&run_profile(
            dir.path(),
            "inference-perf",
            &profile,
            id,
            &args,
        ));
        json(&dir.path().join(id).join("summary.json"))
    };
    // Fresh: the second stage draws 4 prompts of its own, so nothing of either stage hits.
    let fresh = run("fresh", &[]);
    for stage in 0..2 {
        assert_eq!(
            fresh["stages"][stage]["prefix_cache"]["hit_rate"]
                .as_f64()
                .unwrap_or(0.0),
            0.0,
            "stage {stage}: {fresh:#}"
        );
    }
    let meta = json(&dir.path().join("fresh/run.json"));
    assert_eq!(meta["cache"]["prompts"]["per_stage"], true, "{meta:#}");
    // Pinned: the pool of 4 is the whole run's, so the second stage re-sends the first stage's prompts (upstream's
    // behaviour, kept for a reproducible run) and every one of them hits.
    let pinned = run("pinned", &["--seed", "3"]);
    assert_eq!(
        pinned["stages"][0]["prefix_cache"]["hit_rate"]
            .as_f64()
            .unwrap_or(0.0),
        0.0
    );
    assert_eq!(
        pinned["stages"][1]["prefix_cache"]["requests_reporting"], 4,
        "{pinned:#}"
    );
    // Not warm from before the run: its first request found nothing.
    assert!(pinned.get("prefix_cache_warm").is_none(), "{pinned:#}");
}

#[test]
fn every_point_of_a_capacity_search_sends_prompts_of_its_own() {
    let sim = SimProcess::start(&["--model", "m"]);
    let dir = tempfile::tempdir().expect("tempdir");
    // A guidellm profile of 5 synthetic samples of 32 tokens; each point is a closed loop of 1 or 2 streams for
    // 300 ms, so each sends more requests than there are samples and re-sends its own within the point.
    let profile = write(
        dir.path(),
        "search.yaml",
        "spec:\n  backend:\n    kind: openai_http\n    target: REPLACE_ENV_LLMDBENCH_HARNESS_STACK_ENDPOINT_URL\n    \
         model: REPLACE_ENV_LLMDBENCH_DEPLOY_CURRENT_MODEL\n    request_format: /v1/completions\n  data:\n    - kind: \
         synthetic_text\n      prompt_tokens: 32\n      output_tokens: 2\n  data_loader:\n    samples: 5\n  \
         profile:\n    kind: concurrent\n    streams: 1\n  constraints:\n    - kind: max_duration\n      seconds: 1\n\
         capacity_search:\n  load: concurrency\n  slo: [\"ttft_p99<=10s\"]\n  start: 1\n  max: 2\n  \
         min_duration: 300ms\n  min_requests: 1\n  max_points: 3\n",
    );
    let args = [
        "--endpoint",
        &sim.url,
        "--model",
        "m",
        "--tokenizer",
        "builtin",
    ];
    succeeded(&run_profile(
        dir.path(),
        "guidellm",
        &profile,
        "search",
        &args,
    ));
    let records = records(&dir.path().join("search"));
    let stages: std::collections::BTreeSet<u64> = records
        .iter()
        .filter(|r| r["warmup"] != true)
        .map(|r| r["stage"].as_u64().expect("stage"))
        .collect();
    assert!(stages.len() >= 2, "{stages:?}");
    // The first request of every point finds nothing cached: no point meets another's prompts.
    for stage in &stages {
        let first = records
            .iter()
            .find(|r| r["stage"].as_u64() == Some(*stage) && r["warmup"] != true)
            .expect("a request");
        assert_eq!(cached(first), 0, "stage {stage}: {first:#}");
    }
}

#[test]
fn warm_prefix_cache_primes_the_cache_so_the_measured_requests_hit_without_a_warning() {
    let sim = SimProcess::start(&["--model", "m"]);
    let dir = tempfile::tempdir().expect("tempdir");
    let summary = sanity(
        dir.path(),
        &sim.url,
        "builtin",
        "warm",
        &["--warm-prefix-cache"],
    );
    assert!(first_stage_hit_rate(&summary) > 0.5, "{summary:#}");
    // Warm on purpose: no warning.
    assert!(summary.get("prefix_cache_warm").is_none(), "{summary:#}");
    let meta = json(&dir.path().join("warm/run.json"));
    assert_eq!(meta["cache"]["primed_prompts"], 3, "{meta:#}");
    // The priming requests are recorded, asked for one token each, and left out of the figures.
    let records = records(&dir.path().join("warm"));
    let primed: Vec<&Value> = records.iter().filter(|r| r["warmup"] == true).collect();
    assert_eq!(primed.len(), 3);
    assert!(primed.iter().all(|r| r["max_tokens"] == 1), "{primed:#?}");
    assert_eq!(summary["requests"]["total"], 3);
}

#[test]
fn an_experiment_compares_a_cold_and_a_warm_cache_with_their_hit_rates() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = write(
        dir.path(),
        "cold-warm.yaml",
        "apiVersion: llmbench.dev/v1alpha1\nkind: BenchmarkExperiment\nmetadata: {name: cold-warm}\nspec:\n  \
         template:\n    harness: inference-perf\n    workload: {builtin: sanity_random}\n    stack: {model: \
         llmbench-sim}\n    overrides: [load.stages.0.rate=3, load.stages.0.duration=1]\n  cacheStates: [cold, warm]\n",
    );
    let out = dir.path().join("out");
    let output = llmbench()
        .args(["experiment"])
        .arg(&file)
        .args(["--id", "cw", "--output"])
        .arg(&out)
        .output()
        .expect("runs");
    succeeded(&output);
    let exp = out.join("cw");
    let comparison = json(&exp.join("comparison.json"));
    let rows = comparison["rows"].as_array().expect("rows");
    let names: Vec<&str> = rows
        .iter()
        .map(|r| r["treatment"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["cold", "warm"]);
    assert_eq!(rows[0]["levels"]["cache"], "cold");
    let hit = |row: &Value| {
        row["prefixCacheHitPercent"]["mean"]
            .as_f64()
            .unwrap_or_else(|| panic!("no hit rate in {row:#}"))
    };
    assert!(hit(&rows[0]) < 5.0, "{:#}", rows[0]);
    assert!(hit(&rows[1]) > 50.0, "{:#}", rows[1]);
    // The cold run reset the cache; the warm one primed it.
    let meta = |dir: &str| json(&exp.join(dir).join("run.json"));
    assert_eq!(meta("cold-r1")["cache"]["reset"]["engine"], "vllm");
    assert!(meta("cold-r1")["cache"].get("primed_prompts").is_none());
    assert_eq!(meta("warm-r1")["cache"]["primed_prompts"], 3);
    // The table on screen and in compare.html shows the hit rates beside the cache level.
    let printed = stdout(&output);
    assert!(printed.contains("prefix hit %"), "{printed}");
    let html = std::fs::read_to_string(exp.join("plots/compare.html")).expect("compare.html");
    assert!(
        html.contains("prefix hit %"),
        "no hit rate column in compare.html"
    );
}

// ---- Against the real llama-server ----

/// The tests' llama-server with four slots, a 4096-token context and its metrics, plus `extra`.
fn start_llama(extra: &[&str]) -> Option<LlamaServer> {
    let mut args = vec!["-c", "4096", "-np", "4", "--metrics"];
    args.extend(extra);
    LlamaServer::start(&args)
}

/// The first stage's hit rate and whether the run was told the cache was warm.
fn llama_run(server: &LlamaServer, dir: &Path, id: &str, extra: &[&str]) -> (f64, Value) {
    let tokenizer = server.tokenizer.to_string_lossy().into_owned();
    let summary = sanity(dir, &server.url, &tokenizer, id, extra);
    (
        first_stage_hit_rate(&summary),
        summary["prefix_cache_warm"].clone(),
    )
}

#[test]
fn llama_server_meets_a_cold_cache_in_a_second_run_and_a_warm_one_when_the_seed_is_pinned() {
    let Some(server) = start_llama(&[]) else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    // Two runs of the same profile: the second's prompts are new to the server. llama.cpp caches token by
    // token, so the BOS every prompt starts with hits: 1 of about 384 tokens.
    llama_run(&server, dir.path(), "first", &[]);
    let (rate, warm) = llama_run(&server, dir.path(), "second", &[]);
    assert!(rate < 0.05, "second run's first stage hit {rate}");
    assert!(warm.is_null(), "{warm:#}");
    // Pinned prompts sent twice: the second run meets them cached (the finding) and is told.
    llama_run(&server, dir.path(), "pinned-1", &["--seed", "11"]);
    let (rate, warm) = llama_run(&server, dir.path(), "pinned-2", &["--seed", "11"]);
    assert!(rate > 0.5, "pinned second run hit {rate}");
    assert_eq!(warm["source"], "usage", "{warm:#}");
}

#[test]
fn llama_server_slots_are_erased_by_reset_prefix_cache_so_a_pinned_run_starts_cold() {
    let slots = tempfile::tempdir().expect("tempdir");
    let slot_path = slots.path().to_string_lossy().into_owned();
    // Slot actions need --slot-save-path; --cache-ram 0 keeps no copy of erased slots in host memory.
    let Some(server) = start_llama(&["--slot-save-path", &slot_path, "--cache-ram", "0"]) else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    llama_run(&server, dir.path(), "warmer", &["--seed", "5"]);
    let (rate, warm) = llama_run(
        &server,
        dir.path(),
        "reset",
        &["--seed", "5", "--reset-prefix-cache"],
    );
    assert!(rate < 0.05, "the reset run's first stage hit {rate}");
    assert!(warm.is_null(), "{warm:#}");
    let reset = json(&dir.path().join("reset/run.json"))["cache"]["reset"].clone();
    assert_eq!(reset["engine"], "llama.cpp", "{reset:#}");
    let calls: Vec<String> = reset["calls"]
        .as_array()
        .expect("calls")
        .iter()
        .map(|c| format!("{} {} {}", c["method"], c["path"], c["status"]).replace('"', ""))
        .collect();
    assert_eq!(
        calls,
        [
            "POST /reset_prefix_cache 404",
            "POST /flush_cache 404",
            "GET /slots 200",
            "POST /slots/0?action=erase 200",
            "POST /slots/1?action=erase 200",
            "POST /slots/2?action=erase 200",
            "POST /slots/3?action=erase 200",
        ]
    );
}

#[test]
fn llama_server_without_slot_save_path_refuses_the_reset_naming_the_flag() {
    let Some(server) = start_llama(&[]) else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let tokenizer = server.tokenizer.to_string_lossy().into_owned();
    let mut args = vec![
        "--endpoint",
        &server.url,
        "--model",
        "m",
        "--allow-model-mismatch",
        "--tokenizer",
        &tokenizer,
        "--reset-prefix-cache",
    ];
    args.extend(SHORT);
    let output = run_profile(
        dir.path(),
        "inference-perf",
        "sanity_random",
        "refused",
        &args,
    );
    assert!(!output.status.success());
    let error = stderr(&output);
    assert!(
        error.contains("--reset-prefix-cache: llama.cpp answered POST /slots/0?action=erase → 501")
            && error.contains("--slot-save-path DIR"),
        "{error}"
    );
    assert!(!dir.path().join("refused").exists());
}

#[test]
fn llama_server_warmed_by_warm_prefix_cache_serves_the_measured_prompts_from_its_cache() {
    let Some(server) = start_llama(&[]) else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let (rate, warm) = llama_run(&server, dir.path(), "warm", &["--warm-prefix-cache"]);
    assert!(rate > 0.5, "the warmed run's first stage hit {rate}");
    assert!(warm.is_null(), "{warm:#}");
}
