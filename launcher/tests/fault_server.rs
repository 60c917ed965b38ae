//! The reliability suite: the real `llmbench` binary against a server that breaks HTTP/1.1 and SSE in every way
//! we know of. Whatever the server does, a run ends in bounded time, writes exactly one record per planned
//! request, classifies each failure by what went wrong, and says what it was in the record's message.

mod fault;

use std::time::Duration;

use bytes::Bytes;
use fault::{
    COMPLETION_JSON, Case, DONE, Expect, Fault, LAST_CHUNK, Plan, REQUEST_TIMEOUT, SSE_HEAD, Step,
    Timing, chat_delta, chunk, good_events, last_token, response, sse_response, token,
};
use llmbench_engine::engine::Control;
use llmbench_engine::engine::client::{self, DEFAULT_REQUEST_TIMEOUT};
use llmbench_engine::engine::http1::Http1Endpoint;
use llmbench_engine::engine::{Clock, Issue, PreparedRequest, Target, Transport};
use llmbench_model::record::ErrorClass::{
    Connect, ConnectionReset, MalformedEvent, Other, StreamCut, Timeout,
};

/// The planned requests of a streamed (vllm-benchmark) case.
const STREAMED: Plan = Plan::streamed(6);
/// The planned requests of a non-streamed (inference-perf) case.
const UNSTREAMED: Plan = Plan::unstreamed(5);
/// How long a server that resets mid-answer waits first, so the client has read what came before the reset
/// even on a loaded machine (a reset may discard unread bytes).
const READ_BEFORE_RESET: Duration = Duration::from_millis(300);
/// The cases that move tens of MiB before failing: the class and the message (the cap's byte limit) say a cap, not
/// the timeout, ended them; how long moving that much takes depends on the machine and its load, so no bound.
const BEFORE_TIMEOUT: Timing = Timing::Any;

async fn assert_cases(cases: Vec<Case>) {
    let count = cases.len();
    let problems = fault::check_all(cases).await;
    assert!(
        problems.is_empty(),
        "{} problem(s) in {count} case(s):\n{}",
        problems.len(),
        problems.join("\n")
    );
}

fn concat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

/// A chunked SSE stream of `events` that the server ends (last chunk) without anything else.
fn stream_of(events: &[&[u8]]) -> Vec<u8> {
    sse_response(&events.iter().map(|e| e.to_vec()).collect::<Vec<_>>())
}

/// The SSE body of a good completion without chunked framing (for close-delimited and HTTP/1.0 answers).
fn raw_events() -> Vec<u8> {
    good_events().concat()
}

/// The same response, from an HTTP/1.0 server.
fn http_1_0(mut response: Vec<u8>) -> Vec<u8> {
    response[..8].copy_from_slice(b"HTTP/1.0");
    response
}

fn runtime_for_processes() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

#[test]
fn every_error_status_is_recorded_at_once_as_http_status_naming_the_code() {
    let statuses: [(u16, &'static str); 12] = [
        (400, "400 Bad Request"),
        (401, "401 Unauthorized"),
        (403, "403 Forbidden"),
        (404, "404 Not Found"),
        (408, "408 Request Timeout"),
        (413, "413 Payload Too Large"),
        (422, "422 Unprocessable Entity"),
        (429, "429 Too Many Requests"),
        (500, "500 Internal Server Error"),
        (502, "502 Bad Gateway"),
        (503, "503 Service Unavailable"),
        (504, "504 Gateway Timeout"),
    ];
    let mut cases = Vec::new();
    for (code, line) in statuses {
        let name: &'static str = format!("status-{code}-empty").leak();
        cases.push(Case::new(
            name,
            Fault::respond(response(line, "", b"")),
            STREAMED,
            Expect::status(code, &[line.split(' ').next().unwrap_or_default()]),
        ));
        let name: &'static str = format!("status-{code}-with-body").leak();
        let body = format!(
            r#"{{"object":"error","message":"fault says {code}","type":"ServerError","code":{code}}}"#
        );
        cases.push(Case::new(
            name,
            Fault::respond(response(
                line,
                "content-type: application/json\r\n",
                body.as_bytes(),
            )),
            STREAMED,
            Expect::status(
                code,
                &["fault says", line.split(' ').next().unwrap_or_default()],
            ),
        ));
    }
    runtime_for_processes().block_on(assert_cases(cases));
}

#[test]
fn complete_answers_without_a_body_are_recorded_at_once() {
    let cases = vec![
        // A 2xx without a stream is a stream that ended before it began.
        Case::new(
            "no-content-204",
            Fault::respond(b"HTTP/1.1 204 No Content\r\n\r\n".to_vec()),
            STREAMED,
            Expect::failure(StreamCut, &["without [DONE]", "0 chunk"]).with_status(204),
        ),
        Case::new(
            "ok-with-content-length-0-streamed",
            Fault::respond(response("200 OK", "", b"")),
            STREAMED,
            Expect::failure(StreamCut, &["without [DONE]"]).with_status(200),
        ),
        Case::new(
            "ok-with-content-length-0-unstreamed",
            Fault::respond(response("200 OK", "", b"")),
            UNSTREAMED,
            Expect::failure(MalformedEvent, &["malformed", "body is empty"]).with_status(200),
        ),
        // Redirects are not followed: the endpoint the profile names is the one measured.
        Case::new(
            "redirect-302-without-body",
            Fault::respond(response("302 Found", "location: /v1/elsewhere\r\n", b"")),
            STREAMED,
            Expect::status(302, &["302"]),
        ),
        Case::new(
            "redirect-307-with-body",
            Fault::respond(response(
                "307 Temporary Redirect",
                "location: /v1/elsewhere\r\n",
                b"moved for now",
            )),
            STREAMED,
            Expect::status(307, &["307", "moved for now"]),
        ),
        Case::new(
            "not-modified-304-claiming-a-length",
            Fault::respond(b"HTTP/1.1 304 Not Modified\r\ncontent-length: 50\r\n\r\n".to_vec()),
            STREAMED,
            Expect::status(304, &["304"]),
        ),
        Case::new(
            "status-503-whose-body-stalls",
            Fault::answer(vec![
                Step::Send(
                    b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 400\r\n\r\nshedding load"
                        .to_vec(),
                ),
                Step::Stall,
            ]),
            STREAMED,
            // The status is the answer; its body is waited for one second at most, never for the timeout.
            Expect::status(503, &["503", "shedding load"])
                .with_timing(Timing::Under(REQUEST_TIMEOUT - Duration::from_millis(500))),
        ),
    ];
    runtime_for_processes().block_on(assert_cases(cases));
}

#[test]
fn events_and_bodies_that_cannot_be_parsed_fail_as_malformed_event() {
    let huge_event_head = concat(&[
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n",
        b"data: {\"choices\":[{\"text\":\"",
    ]);
    let cases = vec![
        Case::new(
            "sse-data-that-is-not-json",
            Fault::respond(stream_of(&[b"data: this is not json\n\n", DONE])),
            STREAMED,
            Expect::failure(MalformedEvent, &["malformed", "this is not json"]),
        ),
        Case::new(
            "sse-data-with-truncated-json",
            Fault::respond(stream_of(&[
                b"data: {\"choices\":[{\"text\":\" on\n\n",
                DONE,
            ])),
            STREAMED,
            Expect::failure(MalformedEvent, &["malformed", "EOF"]),
        ),
        Case::new(
            "sse-data-with-invalid-utf8",
            Fault::respond(stream_of(&[
                b"data: {\"choices\":[{\"text\":\"\xff\xfe\"}]}\n\n",
                DONE,
            ])),
            STREAMED,
            Expect::failure(MalformedEvent, &["malformed", "utf-8"]),
        ),
        Case::new(
            "sse-event-larger-than-the-line-limit",
            Fault::answer(vec![
                Step::Send(huge_event_head),
                Step::Endless(vec![b'a'; 1 << 20]),
            ]),
            Plan::streamed(3),
            Expect::failure(MalformedEvent, &["malformed", "16777216-byte limit"])
                .with_timing(BEFORE_TIMEOUT),
        ),
        Case::new(
            "unstreamed-body-larger-than-the-limit",
            Fault::answer(vec![
                Step::Send(b"HTTP/1.1 200 OK\r\ncontent-length: 999999999999\r\n\r\n".to_vec()),
                Step::Endless(vec![b' '; 1 << 20]),
            ]),
            Plan::unstreamed(2).with_room(),
            Expect::failure(MalformedEvent, &["malformed", "67108864-byte limit"])
                .with_timing(BEFORE_TIMEOUT),
        ),
        Case::new(
            "unstreamed-body-longer-than-its-content-length",
            Fault::respond_and_close(concat(&[
                b"HTTP/1.1 200 OK\r\ncontent-length: 40\r\n\r\n",
                COMPLETION_JSON,
            ])),
            UNSTREAMED,
            Expect::failure(MalformedEvent, &["malformed", "EOF"]),
        ),
        Case::new(
            "unstreamed-body-that-is-not-json",
            Fault::respond(response("200 OK", "", b"<html>gateway says hi</html>")),
            UNSTREAMED,
            Expect::failure(MalformedEvent, &["malformed", "gateway says hi"]),
        ),
    ];
    runtime_for_processes().block_on(assert_cases(cases));
}

#[test]
fn answers_that_bend_the_format_within_the_rules_succeed() {
    let extensions = concat(&[
        SSE_HEAD,
        &good_events()
            .iter()
            .flat_map(|event| {
                let mut wire = format!("{:X};fault=ext;q=\"x\"\r\n", event.len()).into_bytes();
                wire.extend_from_slice(event);
                wire.extend_from_slice(b"\r\n");
                wire
            })
            .collect::<Vec<u8>>(),
        LAST_CHUNK,
    ]);
    let mut trailers = sse_response(&good_events());
    trailers.truncate(trailers.len() - LAST_CHUNK.len());
    trailers.extend_from_slice(b"0\r\nx-checksum: abc\r\nx-served-by: fault\r\n\r\n");
    let no_space = good_events()
        .iter()
        .map(|e| {
            String::from_utf8_lossy(e)
                .replace("data: ", "data:")
                .into_bytes()
        })
        .collect::<Vec<_>>();
    let with_fields = good_events()
        .iter()
        .enumerate()
        .map(|(i, e)| {
            concat(&[
                b": keep-alive\r\n",
                format!("event: message\r\nid: {i}\r\nretry: 10\r\n").as_bytes(),
                e,
            ])
        })
        .collect::<Vec<_>>();
    let chat_events = vec![
        b"data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n"
            .to_vec(),
        // All four tokens asked: an answer shorter than asked would be counted cut short.
        chat_delta(" one", false),
        chat_delta(" two", false),
        chat_delta(" three", false),
        chat_delta(" four", true),
        DONE.to_vec(),
    ];
    let cases = vec![
        Case::new(
            "sse-good-stream",
            Fault::respond(sse_response(&good_events())),
            STREAMED,
            Expect::success(),
        ),
        Case::new(
            "chat-good-stream",
            Fault::respond(sse_response(&chat_events)),
            Plan::chat(6),
            Expect::success(),
        ),
        Case::new(
            "unstreamed-good-completion",
            Fault::respond(response(
                "200 OK",
                "content-type: application/json\r\n",
                COMPLETION_JSON,
            )),
            UNSTREAMED,
            Expect::success(),
        ),
        Case::new(
            "sse-data-without-a-space",
            Fault::respond(sse_response(&no_space)),
            STREAMED,
            Expect::success(),
        ),
        Case::new(
            "sse-with-comments-event-id-and-retry-lines",
            Fault::respond(sse_response(&with_fields)),
            STREAMED,
            Expect::success(),
        ),
        Case::new(
            "chunks-with-extensions",
            Fault::respond(extensions),
            STREAMED,
            Expect::success(),
        ),
        Case::new(
            "chunked-body-with-trailers",
            Fault::respond(trailers),
            STREAMED,
            Expect::success(),
        ),
        Case::new(
            "transfer-encoding-wins-over-content-length",
            Fault::respond(concat(&[
                b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\ntransfer-encoding: chunked\r\n\r\n",
                &sse_response(&good_events())[SSE_HEAD.len()..],
            ])),
            STREAMED,
            Expect::success(),
        ),
        Case::new(
            "close-delimited-stream",
            Fault::respond_and_close(concat(&[
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n",
                &raw_events(),
            ])),
            STREAMED,
            Expect::success(),
        ),
        Case::new(
            "close-delimited-unstreamed-body",
            Fault::respond_and_close(concat(&[b"HTTP/1.1 200 OK\r\n\r\n", COMPLETION_JSON])),
            UNSTREAMED,
            Expect::success(),
        ),
        Case::new(
            "http-1.0-stream",
            Fault::respond_and_close(concat(&[
                b"HTTP/1.0 200 OK\r\ncontent-type: text/event-stream\r\n\r\n",
                &raw_events(),
            ])),
            STREAMED,
            Expect::success(),
        ),
        Case::new(
            "http-1.0-unstreamed-with-content-length",
            Fault::respond_and_close(http_1_0(response("200 OK", "", COMPLETION_JSON))),
            UNSTREAMED,
            Expect::success(),
        ),
        Case::new(
            "stream-with-a-finish-reason-but-no-done",
            Fault::respond(stream_of(&[
                &token(" one"),
                &token(" two"),
                &token(" three"),
                &last_token(" four"),
            ])),
            STREAMED,
            Expect::success(),
        ),
        // Nothing was generated, but nothing broke either: the record says so (no chunks), and an answer of none
        // of the tokens asked under ignore_eos is cut short, so nothing succeeded.
        Case::new(
            "stream-with-done-and-no-content",
            Fault::respond(stream_of(&[DONE])),
            STREAMED,
            Expect::cut_short().with_chunks(0),
        ),
        Case::new(
            "every-byte-in-its-own-write",
            Fault::answer(vec![Step::Trickle(
                sse_response(&good_events()),
                Duration::ZERO,
            )]),
            Plan::streamed(2),
            Expect::success(),
        ),
        Case::new(
            "keep-alive-connection-closed-between-requests",
            Fault::answer(vec![
                Step::Send(sse_response(&good_events())),
                Step::Pause(Duration::from_millis(15)),
                Step::Close,
            ]),
            Plan::streamed(12),
            Expect::success(),
        ),
        Case::new(
            "informational-heads-before-the-answer",
            Fault::respond(concat(&[
                b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: </x>\r\n\r\n",
                &sse_response(&good_events()),
            ])),
            STREAMED,
            Expect::success(),
        ),
    ];
    runtime_for_processes().block_on(assert_cases(cases));
}

#[test]
fn streams_that_end_early_or_break_their_framing_are_stream_cuts() {
    let cases = vec![
        Case::new(
            "comment-only-stream",
            Fault::respond(stream_of(&[b": ping\n\n", b": ping\n\n"])),
            STREAMED,
            Expect::failure(StreamCut, &["without [DONE]", "0 chunk"]),
        ),
        Case::new(
            "stream-without-done-or-finish-reason",
            Fault::respond(stream_of(&[&token(" one"), &token(" two")])),
            STREAMED,
            Expect::failure(StreamCut, &["without [DONE]", "2 chunk"]).with_chunks(2),
        ),
        Case::new(
            "chunked-body-truncated-by-close",
            Fault::respond_and_close(concat(&[SSE_HEAD, &chunk(&token(" one")), b"64\r\ndata: {"])),
            STREAMED,
            Expect::failure(StreamCut, &["stream cut", "chunked body"]).with_chunks(1),
        ),
        Case::new(
            "invalid-chunk-size",
            Fault::respond(concat(&[SSE_HEAD, b"zz\r\n", &token(" one")])),
            STREAMED,
            Expect::failure(StreamCut, &["invalid chunked encoding", "chunk size"]),
        ),
        Case::new(
            "chunk-size-overflow",
            Fault::respond(concat(&[SSE_HEAD, b"fffffffffffffffff\r\n"])),
            STREAMED,
            Expect::failure(StreamCut, &["invalid chunked encoding", "hex digits"]),
        ),
        Case::new(
            "chunk-data-without-its-crlf",
            Fault::respond(concat(&[SSE_HEAD, b"4\r\ndata!!", &token(" one")])),
            STREAMED,
            Expect::failure(StreamCut, &["invalid chunked encoding", "CRLF"]),
        ),
        Case::new(
            "reset-after-the-head",
            Fault::answer(vec![
                Step::Send(SSE_HEAD.to_vec()),
                Step::Pause(READ_BEFORE_RESET),
                Step::Reset,
            ]),
            STREAMED,
            Expect::failure(StreamCut, &["stream cut"]).with_status(200),
        ),
        Case::new(
            "reset-mid-body",
            Fault::answer(vec![
                Step::Send(concat(&[SSE_HEAD, &chunk(&token(" one")), &chunk(&token(" two"))])),
                Step::Pause(READ_BEFORE_RESET),
                Step::Reset,
            ]),
            STREAMED,
            Expect::failure(StreamCut, &["stream cut after 2 chunk"]).with_chunks(2),
        ),
        Case::new(
            "close-mid-body",
            Fault::respond_and_close(concat(&[SSE_HEAD, &chunk(&token(" one")), &chunk(&token(" two"))])),
            STREAMED,
            Expect::failure(StreamCut, &["stream cut after 2 chunk", "chunked body"]).with_chunks(2),
        ),
        Case::new(
            "content-length-longer-than-the-body-then-close",
            Fault::respond_and_close(concat(&[
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: 5000\r\n\r\n",
                &token(" one"),
            ])),
            STREAMED,
            Expect::failure(StreamCut, &["byte(s) of the body still to come"]).with_chunks(1),
        ),
        Case::new(
            "content-length-shorter-than-the-stream",
            Fault::respond_and_close(concat(&[
                format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\r\n",
                    token(" one").len()
                )
                .as_bytes(),
                &raw_events(),
            ])),
            STREAMED,
            Expect::failure(StreamCut, &["without [DONE]"]).with_chunks(1),
        ),
        Case::new(
            "unstreamed-body-cut-by-close",
            Fault::respond_and_close(concat(&[
                b"HTTP/1.1 200 OK\r\ncontent-length: 5000\r\n\r\n",
                COMPLETION_JSON,
            ])),
            UNSTREAMED,
            Expect::failure(StreamCut, &["body cut", "still to come"]),
        ),
    ];
    runtime_for_processes().block_on(assert_cases(cases));
}

#[test]
fn connections_that_fail_before_an_answer_are_classified_by_how() {
    let cases = vec![
        Case::new("connection-refused", Fault::refused(), STREAMED, Expect::failure(Connect, &["cannot connect"])),
        Case::new(
            "reset-before-the-head",
            Fault::answer(vec![Step::Reset]),
            STREAMED,
            Expect::failure(ConnectionReset, &["connection"]),
        ),
        Case::new(
            "closed-before-the-head",
            Fault::answer(vec![Step::Close]),
            STREAMED,
            Expect::failure(ConnectionReset, &["closed before the response head"]),
        ),
        Case::new(
            "accepted-and-closed-at-once",
            Fault::without_reading(vec![Step::Close]),
            STREAMED,
            Expect::failure(ConnectionReset, &["connection"]),
        ),
        Case::new(
            "half-a-head-then-close",
            Fault::respond_and_close(b"HTTP/1.1 200 OK\r\ncontent-ty".to_vec()),
            STREAMED,
            Expect::failure(ConnectionReset, &["27 byte(s) received"]),
        ),
        Case::new(
            "garbage-instead-of-a-head",
            Fault::respond(b"SSH-2.0-OpenSSH_9.6\r\n\r\n".to_vec()),
            STREAMED,
            Expect::failure(Other, &["malformed HTTP response"]),
        ),
        Case::new(
            "conflicting-content-lengths",
            Fault::respond(b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\ncontent-length: 4\r\n\r\nabcd".to_vec()),
            STREAMED,
            Expect::failure(Other, &["conflicting Content-Length"]),
        ),
        Case::new(
            "flood-of-informational-heads",
            Fault::answer(vec![Step::Endless(b"HTTP/1.1 100 Continue\r\n\r\n".to_vec())]),
            STREAMED,
            Expect::failure(Other, &["more than 16 informational"]),
        ),
        Case::new(
            "head-larger-than-64-kib",
            Fault::answer(vec![
                Step::Send(b"HTTP/1.1 200 OK\r\nx-padding: ".to_vec()),
                Step::Endless(vec![b'p'; 8192]),
            ]),
            STREAMED,
            Expect::failure(Other, &["larger than 65536"]),
        ),
        Case::new(
            "error-object-inside-the-stream",
            Fault::respond(stream_of(&[
                &token(" one"),
                concat!(
                    r#"data: {"error":{"object":"error","message":"fault: out of KV cache blocks","#,
                    r#""type":"InternalServerError","code":500}}"#,
                    "\n\n"
                )
                .as_bytes(),
                DONE,
            ])),
            STREAMED,
            Expect::failure(Other, &["server reported an error", "out of KV cache blocks", "500"])
                .with_chunks(1),
        ),
    ];
    runtime_for_processes().block_on(assert_cases(cases));
}

#[test]
fn servers_that_stall_end_each_request_at_its_timeout_keeping_what_arrived() {
    // Twenty good answers' worth of chunks: a trickle of it lasts far longer than the timeout.
    let long_chunked_body = good_events()
        .iter()
        .map(|e| chunk(e))
        .collect::<Vec<_>>()
        .concat()
        .repeat(20);
    let cases = vec![
        Case::new("stall-before-the-head", Fault::answer(vec![Step::Stall]), STREAMED, Expect::timeout()),
        Case::new(
            "never-reads-the-request",
            Fault::without_reading(vec![Step::Stall]),
            STREAMED,
            Expect::timeout(),
        ),
        Case::new(
            "stall-after-the-head",
            Fault::answer(vec![Step::Send(SSE_HEAD.to_vec()), Step::Stall]),
            STREAMED,
            Expect::timeout().with_status(200),
        ),
        Case::new(
            "stall-after-two-events",
            Fault::answer(vec![
                Step::Send(concat(&[SSE_HEAD, &chunk(&token(" one")), &chunk(&token(" two"))])),
                Step::Stall,
            ]),
            STREAMED,
            Expect::timeout().with_chunks(2),
        ),
        Case::new(
            "trickle-one-byte-every-10-ms",
            Fault::answer(vec![
                Step::Send(SSE_HEAD.to_vec()),
                Step::Trickle(long_chunked_body, Duration::from_millis(10)),
            ]),
            STREAMED,
            Expect::timeout().with_chunks(1),
        ),
        Case::new(
            "content-length-longer-than-the-body-then-stall",
            Fault::answer(vec![
                Step::Send(concat(&[
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: 5000\r\n\r\n",
                    &token(" one"),
                ])),
                Step::Stall,
            ]),
            STREAMED,
            Expect::timeout().with_chunks(1),
        ),
        Case::new(
            "unstreamed-stall-after-the-head",
            Fault::answer(vec![Step::Send(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n{".to_vec()), Step::Stall]),
            Plan::unstreamed(3),
            Expect::timeout().with_chunks(0),
        ),
    ];
    runtime_for_processes().block_on(assert_cases(cases));
}

/// reqwest carries TLS and proxied endpoints; the same faults must give the same records through it.
#[test]
fn the_reqwest_transport_records_the_same_faults_the_same_way() {
    let reqwest = STREAMED.through_reqwest();
    let cases = vec![
        Case::new(
            "reqwest-good-stream",
            Fault::respond(sse_response(&good_events())),
            reqwest,
            Expect::success(),
        ),
        Case::new(
            "reqwest-status-429-empty",
            Fault::respond(response("429 Too Many Requests", "", b"")),
            reqwest,
            Expect::status(429, &["429"]),
        ),
        Case::new(
            "reqwest-status-503-with-body",
            Fault::respond(response("503 Service Unavailable", "", b"shedding load")),
            reqwest,
            Expect::status(503, &["503", "shedding load"]),
        ),
        Case::new(
            "reqwest-ok-with-content-length-0",
            Fault::respond(response("200 OK", "", b"")),
            reqwest,
            Expect::failure(StreamCut, &["without [DONE]"]).with_status(200),
        ),
        Case::new(
            "reqwest-no-content-204",
            Fault::respond(b"HTTP/1.1 204 No Content\r\n\r\n".to_vec()),
            reqwest,
            Expect::failure(StreamCut, &["without [DONE]"]).with_status(204),
        ),
        Case::new(
            "reqwest-sse-data-that-is-not-json",
            Fault::respond(stream_of(&[b"data: this is not json\n\n", DONE])),
            reqwest,
            Expect::failure(MalformedEvent, &["malformed", "this is not json"]),
        ),
        Case::new(
            "reqwest-stall-after-two-events",
            Fault::answer(vec![
                Step::Send(concat(&[
                    SSE_HEAD,
                    &chunk(&token(" one")),
                    &chunk(&token(" two")),
                ])),
                Step::Stall,
            ]),
            reqwest,
            Expect::timeout().with_chunks(2),
        ),
        Case::new(
            "reqwest-close-mid-body",
            Fault::respond_and_close(concat(&[
                SSE_HEAD,
                &chunk(&token(" one")),
                &chunk(&token(" two")),
            ])),
            reqwest,
            Expect::failure(StreamCut, &["stream cut after 2 chunk"]).with_chunks(2),
        ),
        Case::new(
            "reqwest-unstreamed-body-larger-than-the-limit",
            Fault::answer(vec![
                Step::Send(b"HTTP/1.1 200 OK\r\ncontent-length: 999999999999\r\n\r\n".to_vec()),
                Step::Endless(vec![b' '; 1 << 20]),
            ]),
            Plan::unstreamed(2).through_reqwest().with_room(),
            Expect::failure(MalformedEvent, &["67108864-byte limit"]).with_timing(BEFORE_TIMEOUT),
        ),
    ];
    runtime_for_processes().block_on(assert_cases(cases));
}

/// A target with no timeout of its own, pointed at `port`.
fn target_without_timeout(port: u16, transport: &str) -> Target {
    let url = format!("http://127.0.0.1:{port}/v1/completions");
    let transport = match transport {
        "http1" => Transport::Http1(Http1Endpoint::new(&url, &[], 8).expect("endpoint")),
        _ => Transport::Reqwest(reqwest::Client::new()),
    };
    Target {
        transport,
        url,
        api_key: None,
        headers: Vec::new(),
        request_timeout: None,
        streaming: true,
        api: llmbench_workload::workload::ApiKind::Completion,
        keep_text: false,
        request_ids: llmbench_engine::engine::RequestIds::NONE,
        spread: Vec::new(),
    }
}

/// One request straight through the client, as the engine issues it, never cancelled.
async fn execute_once(
    target: &Target,
    request: &PreparedRequest,
) -> llmbench_model::record::RequestRecord {
    let issue = Issue {
        id: 0,
        stage: 0,
        scheduled_ns: 0,
        abandon_after: None,
    };
    client::execute(
        target,
        request,
        issue,
        &Clock::start(),
        Control::default().in_flight(),
    )
    .await
}

#[tokio::test(start_paused = true)]
async fn the_default_request_timeout_ends_a_request_whose_target_sets_none() {
    assert_eq!(DEFAULT_REQUEST_TIMEOUT, Duration::from_secs(3600));
    let port = fault::serve(Fault::answer(vec![Step::Stall])).await;
    let request = PreparedRequest {
        body: Bytes::from_static(br#"{"model":"m","prompt":"one","max_tokens":4,"stream":true}"#),
        input_tokens: 1,
        max_tokens: Some(4),
        ignore_eos: false,
        header: None,
        inputs: None,
        adapter: None,
        images: None,
    };
    for transport in ["http1", "reqwest"] {
        let target = target_without_timeout(port, transport);
        let started = tokio::time::Instant::now();
        let record = execute_once(&target, &request).await;
        let error = record
            .error
            .expect("a request that never got an answer failed");
        assert_eq!(error.class, Timeout, "{transport}: {}", error.message);
        assert!(
            error.message.contains("within the 1h request timeout"),
            "{transport}: {}",
            error.message
        );
        let waited = started.elapsed();
        assert!(
            waited >= DEFAULT_REQUEST_TIMEOUT
                && waited < DEFAULT_REQUEST_TIMEOUT + Duration::from_secs(1),
            "{transport}: waited {waited:?}"
        );
    }
}

/// A request body far larger than the socket buffers, sent to a server that never reads it: the write itself
/// blocks, and the request's timeout must still end it.
#[tokio::test]
async fn a_request_the_server_never_reads_ends_at_its_timeout_even_while_still_being_written() {
    let port = fault::serve(Fault::without_reading(vec![Step::Stall])).await;
    let mut prompt = vec![b'a'; 64 * 1024 * 1024];
    prompt[0] = b'"';
    let request = PreparedRequest {
        body: Bytes::from(prompt),
        input_tokens: 1,
        max_tokens: Some(4),
        ignore_eos: false,
        header: None,
        inputs: None,
        adapter: None,
        images: None,
    };
    for transport in ["http1", "reqwest"] {
        let target = Target {
            request_timeout: Some(Duration::from_millis(500)),
            ..target_without_timeout(port, transport)
        };
        let started = std::time::Instant::now();
        let record = execute_once(&target, &request).await;
        let error = record.error.expect("never answered");
        assert_eq!(error.class, Timeout, "{transport}: {}", error.message);
        assert!(
            error.message.contains("within the 500ms request timeout"),
            "{transport}: {}",
            error.message
        );
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{transport}: {:?}",
            started.elapsed()
        );
    }
}
