//! AIPerf's multi-turn sessions and prompt prefix pool through the binary, read off the wire by a bare server and
//! run against the embedded simulator. What is expected comes from AIPerf 0.13 (the PyPI release,
//! `timing/strategies/request_rate.py` `execute_phase`/`handle_credit_return`, `credit/issuer.py`,
//! `timing/phase/stop_conditions.py`, `dataset/composer/synthetic.py`, `dataset/dataset_samplers.py`,
//! `workers/session_manager.py`, `transports/base_transports.py`) and was checked against the real `aiperf` 0.13
//! CLI run on `llmbench sim` (numbers in the tests' comments).

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

/// Each request's `X-Correlation-ID`, whatever its case on the wire.
fn correlation_ids(seen: &Arc<Mutex<Vec<WireRequest>>>) -> Vec<String> {
    seen.lock()
        .expect("lock")
        .iter()
        .map(|r| {
            r.headers
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case("x-correlation-id"))
                .map(|(_, v)| v.clone())
                .expect("an X-Correlation-ID on every request")
        })
        .collect()
}

/// A body's last message, the turn's own user message.
fn last_user_message(body: &Value) -> String {
    let messages = body["messages"].as_array().expect("messages");
    let last = messages.last().expect("a message");
    assert_eq!(last["role"], "user");
    last["content"].as_str().expect("text").to_owned()
}

/// The messages a later turn carries: every earlier user turn, each followed by the answer "a b".
fn assert_history(bodies: &[Value]) {
    for (n, body) in bodies.iter().enumerate() {
        let messages = body["messages"].as_array().expect("messages");
        assert_eq!(messages.len(), 2 * n + 1, "turn {n}: {body}");
        for (i, m) in messages.iter().enumerate() {
            let role = if i % 2 == 0 { "user" } else { "assistant" };
            assert_eq!(m["role"], role, "{body}");
            if i % 2 == 1 {
                assert_eq!(m["content"], "a b", "the live answer: {body}");
            } else {
                assert_eq!(
                    m,
                    &bodies[i / 2]["messages"][i],
                    "the same user turn: {body}"
                );
            }
        }
    }
}

// The real AIPerf 0.13 (`--conversation-num 3 --conversation-turn-mean 3 --conversation-turn-stddev 1
// --random-seed 1 --isl 5 --osl 3 --concurrency 2`) against `llmbench sim` made sessions of 1, 4 and 5 turns
// (its inputs.json), sent exactly those 10 requests and stopped; a session's `usage_prompt_tokens` grew 2 → 5 → 8
// → 13 as the answers joined its history, and every turn of a session carried one `x_correlation_id`.
#[test]
fn conversation_num_runs_that_many_sessions_each_turn_carrying_the_earlier_turns_and_answers() {
    let (url, seen) = capturing_server(chat_answer);
    let dir = tempfile::tempdir().expect("tempdir");
    let profile = write(
        dir.path(),
        "conversations.yaml",
        "model: m\nendpoint-type: chat\nconversation-num: 3\nconversation-turn-mean: 3\n\
         conversation-turn-stddev: 1\nisl: 6\nosl: 2\nprompt-prefix-pool-size: 2\nprompt-prefix-length: 4\n\
         random-seed: 1\n",
    );
    let output = run_against("aiperf", &profile, &url, "builtin", dir.path(), "r");
    succeeded(&output);
    let bodies = bodies(&seen);
    // AIPerf's turn counts for seed 1 are 1, 4 and 5; at concurrency 1 the sessions go one after the other, in
    // dataset order (the sequential sampler), and no request count bounds them (not AIPerf's default 10).
    assert_eq!(bodies.len(), 10);
    let ids = correlation_ids(&seen);
    let sessions = [&bodies[0..1], &bodies[1..5], &bodies[5..10]];
    let mut start = 0;
    for session in sessions {
        assert_history(session);
        let id = &ids[start];
        assert!(
            ids[start..start + session.len()].iter().all(|i| i == id),
            "{ids:?}"
        );
        assert_eq!(id.len(), 36, "a uuid4: {id}");
        start += session.len();
        // The first turn is `f"{prefix} {content}"`: 4 + 6 words; later turns have no prefix.
        let words = |b: &Value| last_user_message(b).split_whitespace().count();
        assert_eq!(words(&session[0]), 10);
        assert!(session[1..].iter().all(|b| words(b) == 6));
    }
    assert!(ids[0] != ids[1] && ids[1] != ids[5]);
    assert!(bodies.iter().all(|b| b["max_completion_tokens"] == 2));
    // The records say each turn's session and index.
    let records = common::requests_jsonl(&dir.path().join("r/requests.jsonl")).expect("records");
    let turns: Vec<(u64, u64)> = records
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("a record"))
        .map(|r| {
            let of = &r["conversation"];
            (
                of["id"].as_u64().expect("id"),
                of["turn"].as_u64().expect("turn"),
            )
        })
        .collect();
    let expected: Vec<(u64, u64)> = [(0, 1), (1, 4), (2, 5)]
        .iter()
        .flat_map(|&(s, n)| (0..n).map(move |t| (s, t)))
        .collect();
    assert_eq!(turns, expected);
}

#[test]
fn a_request_count_counts_turns_and_stops_mid_session() {
    let (url, seen) = capturing_server(chat_answer);
    let dir = tempfile::tempdir().expect("tempdir");
    // `--request-count` is `RequestCountStopCondition` over requests sent: 4 turns, the second session cut
    // after its third turn (sessions of 1 and 4 turns for seed 1).
    let profile = write(
        dir.path(),
        "conversations.yaml",
        "model: m\nendpoint-type: chat\nconversation-num: 3\nconversation-turn-mean: 3\n\
         conversation-turn-stddev: 1\nisl: 6\nosl: 2\nrandom-seed: 1\nrequest-count: 4\n",
    );
    let output = run_against("aiperf", &profile, &url, "builtin", dir.path(), "r");
    succeeded(&output);
    let sent = bodies(&seen);
    assert_eq!(sent.len(), 4);
    assert_history(&sent[0..1]);
    assert_history(&sent[1..4]);
    // Without `--conversation-num` the default bound is 10 requests (`prof.setdefault("requests", 10)`).
    let (url, seen) = capturing_server(chat_answer);
    let profile = write(
        dir.path(),
        "default.yaml",
        "model: m\nendpoint-type: chat\nconversation-turn-mean: 3\nisl: 6\nosl: 2\n",
    );
    let output = run_against("aiperf", &profile, &url, "builtin", dir.path(), "d");
    succeeded(&output);
    let bodies = bodies(&seen);
    assert_eq!(bodies.len(), 10);
    for session in bodies.chunks(3) {
        assert_history(session);
    }
}

/// The run's records, by send time.
fn records(dir: &std::path::Path, run: &str) -> Vec<Value> {
    let text = common::requests_jsonl(&dir.join(run).join("requests.jsonl")).expect("records");
    let mut records: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("a record"))
        .collect();
    records.sort_by_key(|r| r["sent_ns"].as_u64());
    records
}

fn of(record: &Value) -> (u64, u64) {
    let of = &record["conversation"];
    (
        of["id"].as_u64().expect("id"),
        of["turn"].as_u64().expect("turn"),
    )
}

#[test]
fn a_turn_delay_is_waited_after_the_previous_turn_before_the_next_is_sent() {
    let dir = tempfile::tempdir().expect("tempdir");
    // `--conversation-turn-delay-mean 300` with no spread: every later turn waits `int(300)` ms × ratio 1
    // (`_create_turn`), from the previous turn's return (`handle_credit_return`). A real AIPerf 0.13 run with a
    // spread alone (`--conversation-turn-delay-stddev 500`) waited nothing: turns ~10 ms apart.
    let profile = write(
        dir.path(),
        "delay.yaml",
        "model: m\nendpoint-type: chat\nconversation-num: 2\nconversation-turn-mean: 3\nisl: 4\nosl: 2\n\
         conversation-turn-delay-mean: 300\n",
    );
    let output = run_profile(
        dir.path(),
        "aiperf",
        &profile,
        "d",
        &["--sim-ttft", "2ms", "--sim-itl", "1ms"],
    );
    succeeded(&output);
    let records = records(dir.path(), "d");
    assert_eq!(records.len(), 6);
    let ns = |r: &Value, k: &str| r[k].as_u64().expect("ns");
    for pair in records.windows(2) {
        let (before, after) = (&pair[0], &pair[1]);
        if of(after).1 > 0 {
            assert_eq!(of(after).0, of(before).0);
            assert!(
                ns(after, "sent_ns") >= ns(before, "end_ns") + 300_000_000,
                "{before}\n{after}"
            );
        }
    }
}

#[test]
fn a_multi_turn_files_turn_delay_is_think_time_before_that_turn() {
    let dir = tempfile::tempdir().expect("tempdir");
    // `delay` is the turn's `delay_ms`, read when the turn before it returns (`handle_credit_return`); the first
    // turn's delay is never read.
    let data = write(
        dir.path(),
        "data.jsonl",
        "{\"turns\": [{\"text\": \"one\", \"delay\": 5000}, {\"text\": \"two\", \"delay\": 400}, \
         {\"text\": \"three\"}]}\n",
    );
    let profile = write(
        dir.path(),
        "file.yaml",
        &format!(
            "model: m\nendpoint-type: chat\ninput-file: {}\ncustom-dataset-type: multi_turn\nosl: 2\n\
             request-count: 3\n",
            data.display()
        ),
    );
    let output = run_profile(
        dir.path(),
        "aiperf",
        &profile,
        "f",
        &["--sim-ttft", "2ms", "--sim-itl", "1ms"],
    );
    succeeded(&output);
    let records = records(dir.path(), "f");
    let ns = |r: &Value, k: &str| r[k].as_u64().expect("ns");
    assert_eq!(
        records.iter().map(of).collect::<Vec<_>>(),
        [(0, 0), (0, 1), (0, 2)]
    );
    assert!(ns(&records[1], "sent_ns") >= ns(&records[0], "end_ns") + 400_000_000);
    // No delay on the third turn, and the first turn's 5 s were never waited.
    assert!(ns(&records[2], "sent_ns") < ns(&records[0], "sent_ns") + 5_000_000_000);
}

#[test]
fn at_a_rate_a_queued_continuation_goes_before_a_new_session() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Constant 5/s, two session slots, sessions of 2 turns: at 200 ms session 0 starts; its second turn is
    // queued when the first returns (a few ms later) and takes the 400 ms interval although a slot is free for
    // a new session; session 1 starts at 600 ms, and so on (`execute_phase`'s priority 1 before priority 2).
    let profile = write(
        dir.path(),
        "rate.yaml",
        "model: m\nendpoint-type: chat\nconversation-num: 3\nconversation-turn-mean: 2\nisl: 4\nosl: 2\n\
         request-rate: 5\nrequest-rate-mode: constant\nconcurrency: 2\n",
    );
    let output = run_profile(
        dir.path(),
        "aiperf",
        &profile,
        "r",
        &["--sim-ttft", "2ms", "--sim-itl", "1ms"],
    );
    succeeded(&output);
    let order: Vec<(u64, u64)> = records(dir.path(), "r").iter().map(of).collect();
    assert_eq!(order, [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1)]);
}

#[test]
fn prefill_slots_hold_new_sessions_and_continuations_until_the_previous_first_token() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Three session slots, one prefill slot (`credit/issuer.py`: a new session takes both with `try_issue_credit`,
    // a continuation waits for its prefill slot in `issue_credit`): no turn goes out before the turn sent before it
    // had its first token (50 ms after its send), while earlier turns still decode (100 tokens, 1 ms apart).
    let profile = write(
        dir.path(),
        "prefill.yaml",
        "model: m\nendpoint-type: chat\nstreaming: true\nconversation-num: 3\nconversation-turn-mean: 2\n\
         isl: 4\nosl: 100\nconcurrency: 3\nprefill-concurrency: 1\n",
    );
    let output = run_profile(
        dir.path(),
        "aiperf",
        &profile,
        "p",
        &["--sim-ttft", "50ms", "--sim-itl", "1ms"],
    );
    succeeded(&output);
    let records = records(dir.path(), "p");
    assert_eq!(records.len(), 6);
    let ns = |r: &Value, k: &str| r[k].as_u64().expect("ns");
    let first_token = |r: &Value| {
        r["chunks"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["kind"] == "content"))
            .and_then(|c| c["at_ns"].as_u64())
            .expect("a first token")
    };
    let mut overlapped = false;
    for pair in records.windows(2) {
        assert!(
            ns(&pair[1], "sent_ns") >= first_token(&pair[0]),
            "{}\n{}",
            pair[0],
            pair[1]
        );
        overlapped |= ns(&pair[1], "sent_ns") < ns(&pair[0], "end_ns");
    }
    assert!(overlapped, "sessions decode together: {records:?}");
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
    bodies.iter().map(last_user_message).collect()
}

#[test]
fn a_single_turn_file_sends_its_lines_in_order_as_aiperfs_sequential_sampler_does() {
    let texts = custom_dataset_texts(
        "single_turn",
        "{\"text\": \"what is deep learning\"}\n\n{\"texts\": [\"who are you\"]}\n\
         {\"texts\": [{\"name\": \"q\", \"contents\": [\"tell me a story\"]}], \"note\": 1}\n",
        "request-count: 5\n",
    );
    // `single_turn` prefers the sequential sampler: the lines in order, wrapping.
    assert_eq!(
        texts,
        [
            "what is deep learning",
            "who are you",
            "tell me a story",
            "what is deep learning",
            "who are you"
        ]
    );
}

#[test]
fn session_header_renames_the_correlation_header_of_every_session() {
    let (url, seen) = capturing_server(chat_answer);
    let dir = tempfile::tempdir().expect("tempdir");
    let profile = write(
        dir.path(),
        "session.yaml",
        "model: m\nendpoint-type: chat\nisl: 6\nosl: 2\nrequest-count: 3\nsession-header: X-Session-ID\n",
    );
    let output = run_against("aiperf", &profile, &url, "builtin", dir.path(), "r");
    succeeded(&output);
    // AIPerf 0.13's `--session-header` replaces `X-Correlation-ID` (`transports/base_transports.py`): each
    // single-turn session sends its own uuid4 under the new name, and no X-Correlation-ID.
    let seen = seen.lock().expect("lock");
    assert_eq!(seen.len(), 3);
    let mut ids: Vec<&str> = seen
        .iter()
        .map(|r| {
            assert!(
                !r.headers
                    .iter()
                    .any(|(n, _)| n.eq_ignore_ascii_case("x-correlation-id"))
            );
            r.headers
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case("x-session-id"))
                .map(|(_, v)| v.as_str())
                .expect("an X-Session-ID on every request")
        })
        .collect();
    assert!(ids.iter().all(|id| id.len() == 36));
    ids.dedup();
    assert_eq!(ids.len(), 3, "one session id per request");
}

#[test]
fn dataset_sampling_strategy_picks_each_session_with_aiperfs_random_and_shuffle_samplers() {
    let lines =
        "{\"text\": \"zero\"}\n{\"text\": \"one\"}\n{\"text\": \"two\"}\n{\"text\": \"three\"}\n";
    let names = |ids: [usize; 10]| ids.map(|i| ["zero", "one", "two", "three"][i]);
    // `RandomSampler`: random.Random(derive(7, "dataset.sampler.random")).choice over the 4 ids, as AIPerf
    // 0.13's own `rng.init(7); RandomSampler(ids)` draws them: 3 0 1 3 3 2 0 3 3 0.
    let texts = custom_dataset_texts(
        "single_turn",
        lines,
        "request-count: 10\ndataset-sampling-strategy: random\n",
    );
    assert_eq!(texts, names([3, 0, 1, 3, 3, 2, 0, 3, 3, 0]));
    // `ShuffleSampler`: numpy's default_rng(derive(7, "dataset.sampler.shuffle")), shuffled again once used up:
    // 2 1 3 0 | 3 0 1 2 | 1 0.
    let texts = custom_dataset_texts(
        "single_turn",
        lines,
        "request-count: 10\ndataset-sampling-strategy: shuffle\n",
    );
    assert_eq!(texts, names([2, 1, 3, 0, 3, 0, 1, 2, 1, 0]));
}

#[test]
fn a_multi_turn_file_groups_lines_by_session_and_sends_its_sessions_in_order() {
    let texts = custom_dataset_texts(
        "multi_turn",
        "{\"session_id\": \"a\", \"turns\": [{\"text\": \"a one\"}, {\"text\": \"a two\", \"delay\": 0}]}\n\
         {\"turns\": [{\"text\": \"solo\"}]}\n{\"session_id\": \"a\", \"turns\": [{\"text\": \"a three\"}]}\n",
        "request-count: 5\n",
    );
    // Conversation 0 is session a (its two lines, in order), 1 the line without a session; `multi_turn`
    // prefers the sequential sampler, and the fifth request starts session a again.
    assert_eq!(texts, ["a one", "a two", "a three", "solo", "a one"]);
}

#[test]
fn a_random_pool_samples_conversation_num_entries_with_cpythons_choices() {
    let texts = custom_dataset_texts(
        "random_pool",
        "{\"text\": \"first\"}\n{\"text\": \"second\"}\n{\"text\": \"third\"}\n",
        "conversation-num: 4\nrequest-count: 5\n",
    );
    // The pool's conversations: random.Random(7).choices([0, 1, 2], k=4) → [0, 0, 1, 0]; `random_pool` prefers
    // the shuffle sampler: numpy's default_rng(derive(7, "dataset.sampler.shuffle")) shuffles [0, 1, 2, 3] to
    // [2, 1, 3, 0]: sessions of conversations 2, 1, 3, 0. `--conversation-num 4` is also the session count,
    // which ends the run after 4 sessions though the request count would allow 5.
    assert_eq!(texts, ["second", "first", "first", "first"]);
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
            "data.jsonl:2: `image`: images, audio and video from a dataset file are not sent",
        ),
        // AIPerf 0.13's per-turn body fields and ordering: refused, not ignored.
        (
            "single_turn",
            "{\"text\": \"a\", \"extra\": {\"temperature\": 0}}",
            "data.jsonl:2: `extra`: a turn's `extra`",
        ),
        (
            "multi_turn",
            "{\"turns\": [{\"text\": \"a\", \"output_length\": 5}]}",
            "data.jsonl:2: `turns[0].output_length`",
        ),
        (
            "single_turn",
            "{\"text\": \"a\", \"session_id\": \"s1\"}",
            "data.jsonl:2: `session_id`: a single turn's `session_id`",
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
        // A timestamp is read only by AIPerf's fixed schedule, not built over these files.
        (
            "single_turn",
            "{\"text\": \"a\", \"timestamp\": 5}",
            "data.jsonl:2: `timestamp`: a turn's timestamp is read only by AIPerf's fixed schedule",
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

// `--user-centric-rate 8 --num-users 4` over 3-turn conversations (`timing/strategies/user_centric_rate.py`):
// stagger 1/8 s = 125 ms, gap 4/8 s = 500 ms; a mean of 3 turns is a lifetime of 2 gaps, and gcd(4, 2) = 2 takes
// the alternate step 3. Worked by hand from `setup_phase`: user 1 is virtually done; users 2 and 3 have 1 turn
// left and fire at 125 and 250 ms, user 4 has 2 and fires at 375 ms, fresh user 5 has all 3 and fires at 0.
// Spawns follow at first turn + turns × gap: 625 (for 2), 750 (3), 1375 (4), 1500 (5). Users 6 and 7 spawned at
// 625 and 750 ms send their turns 500 ms apart; user 8 spawns at 1375. A returned turn's next one is due at
// its previous target + 500 ms (the answers are immediate). The 12th turn is the request count's last.
#[test]
fn user_centric_users_start_staggered_as_in_a_steady_state_and_send_their_turns_a_gap_apart() {
    let (url, seen) = capturing_server(chat_answer);
    let dir = tempfile::tempdir().expect("tempdir");
    let profile = write(
        dir.path(),
        "users.yaml",
        "model: m\nendpoint-type: chat\nuser-centric-rate: 8\nnum-users: 4\nconversation-turn-mean: 3\n\
         isl: 6\nosl: 2\nrequest-count: 12\nrandom-seed: 1\n",
    );
    let output = run_against("aiperf", &profile, &url, "builtin", dir.path(), "r");
    succeeded(&output);
    let records = common::requests_jsonl(&dir.path().join("r/requests.jsonl")).expect("records");
    let mut records: Vec<Value> = records
        .lines()
        .map(|l| serde_json::from_str(l).expect("a record"))
        .collect();
    records.sort_by_key(|r| r["scheduled_ns"].as_u64().expect("scheduled_ns"));
    let origin = records[0]["scheduled_ns"].as_u64().expect("scheduled_ns");
    let offsets_ms: Vec<f64> = records
        .iter()
        .map(|r| (r["scheduled_ns"].as_u64().expect("scheduled_ns") - origin) as f64 / 1e6)
        .collect();
    let want: Vec<f64> = (0..12).map(|i| f64::from(i) * 125.0).collect();
    for (got, want) in offsets_ms.iter().zip(&want) {
        assert!((got - want).abs() < 0.01, "{offsets_ms:?}");
    }
    assert_eq!(offsets_ms.len(), 12);
    // Sessions are numbered in sampling order: user 2 → 0, 3 → 1, 4 → 2, 5 → 3, 6 → 4, 7 → 5, 8 → 6.
    let turns: Vec<(u64, u64)> = records
        .iter()
        .map(|r| {
            let of = &r["conversation"];
            (
                of["id"].as_u64().expect("id"),
                of["turn"].as_u64().expect("turn"),
            )
        })
        .collect();
    assert_eq!(
        turns,
        [
            (3, 0),
            (0, 0),
            (1, 0),
            (2, 0),
            (3, 1),
            (4, 0),
            (5, 0),
            (2, 1),
            (3, 2),
            (4, 1),
            (5, 1),
            (6, 0)
        ]
    );
    // Each user's turns carry its user id as the correlation id.
    assert_eq!(
        correlation_ids(&seen),
        ["5", "2", "3", "4", "5", "6", "7", "4", "5", "6", "7", "8"]
    );
}
