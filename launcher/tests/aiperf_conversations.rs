//! AIPerf's synthetic multi-turn conversations and prompt prefix pool through the binary, read off the wire by a
//! bare server and run against the embedded simulator. What is expected comes from ai-dynamo/aiperf db4f6397:
//! `dataset/composer/synthetic.py` (turns per conversation, the prefix on the first turn only),
//! `workers/worker.py` `_execute_single_credit_internal` (a credit is a whole conversation, its turns sent one
//! after the other, each formatted from the turn alone), `dataset/dataset_manager.py` `_return_any_conversation`
//! (`random.Random(--random-seed).choice` picks each credit's conversation), and the timing strategies (the
//! request count and the concurrency count credits).

mod common;

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use common::*;

/// A non-streamed chat answer of two tokens.
fn chat_answer(_: &WireRequest) -> String {
    let answer = json!({"id": "c", "model": "m", "choices": [{"index": 0,
        "message": {"role": "assistant", "content": "a b"}, "finish_reason": "length"}],
        "usage": {"prompt_tokens": 8, "completion_tokens": 2, "total_tokens": 10}});
    ok_response("application/json", &answer.to_string())
}

fn bodies(seen: &Arc<Mutex<Vec<WireRequest>>>) -> Vec<Value> {
    seen.lock()
        .expect("lock")
        .iter()
        .map(|r| serde_json::from_slice(&r.body).expect("a JSON body"))
        .collect()
}

/// The one message a body carries: AIPerf sends a turn alone.
fn only_message(body: &Value) -> String {
    let messages = body["messages"].as_array().expect("messages");
    assert_eq!(messages.len(), 1, "one message, no history: {body}");
    assert_eq!(messages[0]["role"], "user");
    messages[0]["content"].as_str().expect("text").to_owned()
}

#[test]
fn each_credit_sends_a_seeded_pick_of_conversation_turn_by_turn_each_turn_alone() {
    let (url, seen) = capturing_server(chat_answer);
    let dir = tempfile::tempdir().expect("tempdir");
    // 3 conversations of exactly 2 turns (stddev 0), 6-token prompts, prefixes of 4 tokens from a pool of 2 on
    // each first turn; 4 credits at concurrency 1 (AIPerf's burst), so the picks go in order.
    let profile = write(
        dir.path(),
        "conversations.yaml",
        "model: m\nendpoint-type: chat\nconversation-num: 3\nconversation-turn-mean: 2\nisl: 6\nosl: 2\n\
         prompt-prefix-pool-size: 2\nprompt-prefix-length: 4\nrandom-seed: 42\nrequest-count: 4\n",
    );
    let output = run_against("aiperf", &profile, &url, "builtin", dir.path(), "r");
    succeeded(&output);
    let bodies = bodies(&seen);
    // The request count counts credits: 4 conversations of 2 turns are 8 requests.
    assert_eq!(bodies.len(), 8);
    let texts: Vec<String> = bodies.iter().map(only_message).collect();
    for body in &bodies {
        assert_eq!(body["max_completion_tokens"], 2);
    }
    let words = |t: &str| t.split_whitespace().count();
    for credit in texts.chunks(2) {
        // The first turn is `f"{prefix} {content}"`: 4 + 6 words; the second has no prefix.
        assert_eq!(words(&credit[0]), 10, "{credit:?}");
        assert_eq!(words(&credit[1]), 6, "{credit:?}");
    }
    // CPython: r = random.Random(42); [r.choice([0, 1, 2]) for _ in range(4)] → [2, 0, 0, 2]: credits 0 and 3
    // send conversation 2, credits 1 and 2 conversation 0.
    assert_eq!(texts[0..2], texts[6..8]);
    assert_eq!(texts[2..4], texts[4..6]);
    assert_ne!(texts[0..2], texts[2..4]);
    // The prefixes come from a pool of 2: at most 2 different first four words.
    let mut prefixes: Vec<String> = texts
        .iter()
        .step_by(2)
        .map(|t| t.split_whitespace().take(4).collect::<Vec<_>>().join(" "))
        .collect();
    prefixes.dedup();
    prefixes.sort();
    prefixes.dedup();
    assert!(prefixes.len() <= 2, "{prefixes:?}");

    let records = std::fs::read_to_string(dir.path().join("r/requests.jsonl")).expect("records");
    let turns: Vec<(u64, u64)> = records
        .lines()
        .map(|l| {
            let r: Value = serde_json::from_str(l).expect("a record");
            (
                r["conversation"]["id"].as_u64().expect("id"),
                r["conversation"]["turn"].as_u64().expect("turn"),
            )
        })
        .collect();
    let mut sorted = turns.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        [
            (0, 0),
            (0, 1),
            (1, 0),
            (1, 1),
            (2, 0),
            (2, 1),
            (3, 0),
            (3, 1)
        ]
    );
}

#[test]
fn a_concurrency_counts_conversations_in_flight_and_a_turn_delay_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let conversations = "model: m\nendpoint-type: completions\nconversation-num: 5\nconversation-turn-mean: 3\n\
         conversation-turn-stddev: 1\nisl: 8\nosl: 2\nconcurrency: 2\nrequest-count: 6\n";
    // A think time: AIPerf 0.13 waits it, db4f6397 never does, so it is refused before anything is sent.
    let delayed = write(
        dir.path(),
        "delayed.yaml",
        &format!("{conversations}conversation-turn-delay-mean: 10000\n"),
    );
    let output = run_profile(dir.path(), "aiperf", &delayed, "d", &[]);
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("delayed.yaml:10: `conversation-turn-delay-mean`")
            && stderr(&output).contains("AIPerf 0.13 waits it"),
        "{}",
        stderr(&output)
    );
    let profile = write(dir.path(), "concurrent.yaml", conversations);
    let output = run_profile(
        dir.path(),
        "aiperf",
        &profile,
        "c",
        &["--sim-ttft", "2ms", "--sim-itl", "1ms"],
    );
    succeeded(&output);
    let records = std::fs::read_to_string(dir.path().join("c/requests.jsonl")).expect("records");
    let records: Vec<Value> = records
        .lines()
        .map(|l| serde_json::from_str(l).expect("a record"))
        .collect();
    // Six credits, each a whole conversation of at least one turn, every turn a record tagged with its credit.
    let mut credits: Vec<u64> = records
        .iter()
        .map(|r| r["conversation"]["id"].as_u64().expect("id"))
        .collect();
    credits.sort();
    credits.dedup();
    assert_eq!(credits, [0, 1, 2, 3, 4, 5]);
    assert!(records.iter().all(|r| r["http_status"] == 200));
    // Within a credit the turns go one after the other: each is sent after the previous one ended.
    for credit in 0..6 {
        let mut turns: Vec<&Value> = records
            .iter()
            .filter(|r| r["conversation"]["id"] == credit)
            .collect();
        turns.sort_by_key(|r| r["conversation"]["turn"].as_u64());
        for pair in turns.windows(2) {
            assert!(pair[1]["sent_ns"].as_u64() >= pair[0]["end_ns"].as_u64());
        }
    }
    // At most two credits in flight: at any turn's send, fewer than two other credits have a turn in flight.
    for record in &records {
        let at = record["sent_ns"].as_u64().expect("sent");
        let mut busy: Vec<&Value> = records
            .iter()
            .filter(|r| {
                r["conversation"]["id"] != record["conversation"]["id"]
                    && r["sent_ns"].as_u64().expect("sent") <= at
                    && r["end_ns"].as_u64().expect("end") > at
            })
            .map(|r| &r["conversation"]["id"])
            .collect();
        busy.dedup();
        assert!(busy.len() <= 1, "{record}");
    }
}

/// Runs an AIPerf profile over `file` of `kind` against a capturing server and returns each body's one text.
fn custom_dataset_texts(kind: &str, file: &str, flags: &str) -> Vec<String> {
    let (url, seen) = capturing_server(chat_answer);
    let dir = tempfile::tempdir().expect("tempdir");
    let data = write(dir.path(), "data.jsonl", file);
    let profile = write(
        dir.path(),
        "custom.yaml",
        &format!(
            "model: m\nendpoint-type: chat\ninput-file: {}\ncustom-dataset-type: {kind}\nosl: 2\n\
             random-seed: 7\n{flags}",
            data.display()
        ),
    );
    let output = run_against("aiperf", &profile, &url, "builtin", dir.path(), "r");
    succeeded(&output);
    let bodies = bodies(&seen);
    assert!(bodies.iter().all(|b| b["max_completion_tokens"] == 2));
    bodies.iter().map(only_message).collect()
}

#[test]
fn a_single_turn_file_sends_one_line_per_credit_picked_as_aiperfs_dataset_manager_picks() {
    let texts = custom_dataset_texts(
        "single_turn",
        "{\"text\": \"what is deep learning\"}\n\n{\"texts\": [\"who are you\"]}\n\
         {\"texts\": [{\"name\": \"q\", \"contents\": [\"tell me a story\"]}], \"extra\": 1}\n",
        "request-count: 5\n",
    );
    // CPython: r = random.Random(7); [r.choice([0, 1, 2]) for _ in range(5)] → [1, 0, 1, 2, 0].
    assert_eq!(
        texts,
        [
            "who are you",
            "what is deep learning",
            "who are you",
            "tell me a story",
            "what is deep learning"
        ]
    );
}

#[test]
fn a_multi_turn_file_groups_lines_by_session_and_sends_a_credits_turns_in_order() {
    let texts = custom_dataset_texts(
        "multi_turn",
        "{\"session_id\": \"a\", \"turns\": [{\"text\": \"a one\"}, {\"text\": \"a two\", \"delay\": 0}]}\n\
         {\"turns\": [{\"text\": \"solo\"}]}\n{\"session_id\": \"a\", \"turns\": [{\"text\": \"a three\"}]}\n",
        "request-count: 3\n",
    );
    // Conversation 0 is session a (its two lines, in order), 1 the line without a session. CPython:
    // r = random.Random(7); [r.choice([0, 1]) for _ in range(3)] → [1, 0, 1].
    assert_eq!(texts, ["solo", "a one", "a two", "a three", "solo"]);
}

#[test]
fn a_random_pool_samples_conversation_num_entries_with_cpythons_choices() {
    let texts = custom_dataset_texts(
        "random_pool",
        "{\"text\": \"first\"}\n{\"text\": \"second\"}\n{\"text\": \"third\"}\n",
        "conversation-num: 4\nrequest-count: 5\n",
    );
    // The pool's conversations: random.Random(7).choices([0, 1, 2], k=4) → [0, 0, 1, 0]; then the credits'
    // picks: r = random.Random(7); [r.choice(range(4)) for _ in range(5)] → [2, 1, 3, 0, 0].
    assert_eq!(texts, ["second", "first", "first", "first", "first"]);
}

/// A good first line of a `kind` file.
fn fine(kind: &str) -> &'static str {
    match kind {
        "multi_turn" => "{\"turns\": [{\"text\": \"fine\"}]}",
        _ => "{\"text\": \"fine\"}",
    }
}

#[test]
fn custom_dataset_fields_llmbench_does_not_send_are_refused_with_file_and_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (kind, line, says) in [
        (
            "single_turn",
            "{\"text\": \"look\", \"image\": \"cat.png\"}",
            "data.jsonl:2: `image`: images and audio are not sent yet (issue 32)",
        ),
        (
            "single_turn",
            "{\"texts\": [\"a\", \"b\"]}",
            "data.jsonl:2: `texts`: 2 texts in one turn",
        ),
        (
            "multi_turn",
            "{\"turns\": [{\"text\": \"a\"}, {\"audio\": \"wav,AAAA\"}]}",
            "data.jsonl:2: `turns[1].audio`",
        ),
        (
            "single_turn",
            "{\"text\": \"a\", \"timestamp\": 5, \"delay\": 3}",
            "timestamp and delay cannot be set together",
        ),
        // AIPerf 0.13 runs timestamps on its fixed schedule and waits delays; db4f6397 does neither.
        (
            "single_turn",
            "{\"text\": \"a\", \"timestamp\": 5}",
            "data.jsonl:2: `timestamp`: AIPerf 0.13 sends a file whose records carry timestamps",
        ),
        (
            "multi_turn",
            "{\"turns\": [{\"text\": \"a\"}, {\"text\": \"b\", \"delay\": 100}]}",
            "data.jsonl:2: `turns[1].delay`: AIPerf 0.13 waits a turn's delay",
        ),
    ] {
        let data = write(
            dir.path(),
            "data.jsonl",
            &format!("{}\n{line}\n", fine(kind)),
        );
        let profile = write(
            dir.path(),
            "p.yaml",
            &format!(
                "model: m\ninput-file: {}\ncustom-dataset-type: {kind}\n",
                data.display()
            ),
        );
        let output = run_profile(dir.path(), "aiperf", &profile, "bad", &[]);
        assert!(!output.status.success(), "{line}");
        assert!(
            stderr(&output).contains(says),
            "{line}: {}",
            stderr(&output)
        );
    }
    // A fixed schedule over such a file is not built, and said so at its line.
    let data = write(dir.path(), "data.jsonl", "{\"text\": \"fine\"}\n");
    let profile = write(
        dir.path(),
        "p.yaml",
        &format!(
            "model: m\ninput-file: {}\ncustom-dataset-type: single_turn\nfixed-schedule: true\n",
            data.display()
        ),
    );
    let output = run_profile(dir.path(), "aiperf", &profile, "fixed", &[]);
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("p.yaml:4: `fixed-schedule`"),
        "{}",
        stderr(&output)
    );
}
