//! inference-perf's `trace_session_replay` on the wire (`loadgen/load_generator.py` `run_session_stage`,
//! `datagen/replay/replay_graph_session_datagen.py` `SessionChatCompletionAPIData`).
//!
//! - Sessions start in corpus order, at most `concurrent_sessions` at once (0: no limit) and at most
//!   `session_rate` a second (`next_dispatch = max(next_dispatch + 1/rate, now)` after each start). A session
//!   leaves the pool when all its calls have answered, or at its first failure (upstream's worker reports a
//!   failed session at once; the calls still running finish in the background).
//! - A started session's calls are all queued at once, each holding one of the `in_flight_cap` places (the
//!   workers' `worker_max_concurrency` semaphores) from then until it ends, waiting for its predecessors
//!   included.
//! - A root call is sent at the session's start. A later call is due `min(wait_ms, max_wait_ms)` after its last
//!   predecessor answered (`wait_for_predecessors_and_substitute`: wait for all, then sleep `wait_ms`); its
//!   latency counts from that due time. A call whose predecessor failed (or did not answer within
//!   `predecessor_wait_timeout`) is not sent, and is not recorded, as upstream skips it.
//! - Bodies are built when a call's predecessors have answered: the `shared` prefix is the source call's *sent*
//!   messages, an `output` message is the source call's live answer (`_build_messages_with_substitution`).
//! - The stage's `timeout` stops it: nothing more is sent, and what is in flight is cancelled.
//!
//! A session's graph is built from its file (a WEKA session's from its trace, `weka_session`) when it starts and
//! dropped when its last call ends, so memory follows the sessions in flight.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::task::JoinSet;

use super::{StageContext, StopReason};
use llmbench_data::{ChatMessage, Prompt};
use llmbench_model::record::{ErrorClass, SessionRecord, TurnOf};
use llmbench_workload::request::{BodySettings, prepare};
use llmbench_workload::workload::otel_trace::{self, Build, Event, Graph, Message, SegmentKind};

use super::weka_session::WekaSession;

/// One stage of a trace session replay.
#[derive(Debug, Clone)]
pub struct SessionReplay {
    /// This stage's share of the corpus, in the order sessions start.
    pub sessions: Vec<SessionSource>,
    /// 0: every session at once.
    pub concurrent_sessions: u32,
    pub session_rate: Option<f64>,
    pub timeout: Option<Duration>,
    /// inference-perf's workers × `worker_max_concurrency`: calls queued or in flight at most.
    pub in_flight_cap: Option<usize>,
    pub settings: BodySettings,
    pub options: SessionOptions,
}

/// The data keys that act while a session runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SessionOptions {
    pub include_errors: bool,
    pub max_wait: Duration,
    /// `None`: wait for predecessors forever.
    pub predecessor_wait_timeout: Option<Duration>,
    pub disable_output_substitution: bool,
    /// `inject_random_session_id`: each session's unique messages start with `[SESS:<16 hex>] `, a string of
    /// its own, so no session finds another's prompts in the server's prefix cache.
    pub inject_random_session_id: bool,
}

/// A session of the corpus: a trace file, read again when the session starts.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionSource {
    /// Its slot in the shuffled corpus; records carry it as their conversation.
    pub id: u32,
    /// `trace{slot}_{session_id}`, as upstream names it.
    pub name: String,
    pub path: PathBuf,
    /// How many calls its graph has (0: upstream skips the session).
    pub calls: usize,
    /// `api.session_id_header_key` with this session's name, sent on each of its calls.
    pub header: Option<Arc<(String, String)>>,
    /// A WEKA trace's session: its graph is compiled from the trace (`path` is where it was read).
    pub weka: Option<Arc<WekaSession>>,
}

impl SessionReplay {
    /// How many requests the stage sends if every call is sent.
    pub fn requests(&self) -> u64 {
        self.sessions.iter().map(|s| s.calls as u64).sum()
    }

    /// Launcher `index` of `count`'s share: every `count`-th session, the session limit and in-flight cap split as
    /// a closed loop's concurrency is, and the session rate divided.
    pub fn shard(&self, index: u32, count: u32) -> SessionReplay {
        let count_u = count.max(1) as usize;
        let index_u = index as usize;
        let part = |c: usize| (c / count_u + usize::from(index_u < c % count_u)).max(1);
        SessionReplay {
            sessions: self
                .sessions
                .iter()
                .skip(index_u)
                .step_by(count_u)
                .cloned()
                .collect(),
            concurrent_sessions: if self.concurrent_sessions == 0 {
                0
            } else {
                part(self.concurrent_sessions as usize) as u32
            },
            session_rate: self.session_rate.map(|r| r / f64::from(count.max(1))),
            in_flight_cap: self.in_flight_cap.map(part),
            ..self.clone()
        }
    }
}

/// How a call ended, as its successors see it.
#[derive(Debug, Clone)]
enum Outcome {
    Answered {
        /// The live answer, substituted where a successor carries this call's output.
        answer: Arc<str>,
        /// The messages this call sent, substituted where a successor shares their prefix.
        sent: Arc<[ChatMessage]>,
        at: Instant,
    },
    Failed,
}

/// One running session.
struct Session {
    graph: Graph,
    outcomes: Vec<watch::Sender<Option<Outcome>>>,
    start: Instant,
    /// The pool place, given back when the session completes or first fails.
    place: Mutex<Option<OwnedSemaphorePermit>>,
    answered: Mutex<usize>,
    /// Set once, when the session answered its last call or first failed: what its record reports.
    ended: Mutex<Option<Ended>>,
    /// What `inject_random_session_id` prepends to its unique messages (`[SESS:<hex>] `), drawn per session as
    /// upstream draws `uuid.uuid4().hex[:16]`.
    marker: Option<String>,
}

/// How and when a session ended (`completion_data` of upstream's `process_failure` / `_fail_and_notify`, or
/// its last completion).
#[derive(Debug, Clone, PartialEq)]
struct Ended {
    at: Instant,
    completed: usize,
    cancelled: usize,
    failure: Option<String>,
}

impl Session {
    /// The session's first failure: the calls that answered so far count as completed, the failing one as
    /// neither, the rest as cancelled (`cancelled = total_events_in_session − completed_so_far − 1`).
    /// `failure` is the reason when the failing call was not sent. Later failures change nothing, as upstream
    /// notifies only `if not was_already_failed`.
    fn first_failure(&self, failure: Option<String>) {
        let completed = *self.answered.lock().unwrap_or_else(PoisonError::into_inner);
        let mut ended = self.ended.lock().unwrap_or_else(PoisonError::into_inner);
        if ended.is_none() {
            *ended = Some(failed(
                Instant::now(),
                self.graph.events.len(),
                completed,
                failure,
            ));
        }
    }

    fn leave_pool(&self) {
        drop(
            self.place
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
        );
    }
}

/// Runs `replay` as a stage that started at `start`; returns the records of its sessions that ended, in the
/// order they ended.
pub(super) async fn run_sessions(
    context: StageContext,
    start: Instant,
    replay: Arc<SessionReplay>,
) -> Vec<SessionRecord> {
    let mut finished = Vec::new();
    let timeout = replay.timeout.map(|after| {
        let control = context.control.clone();
        tokio::spawn(async move {
            tokio::time::sleep_until((start + after).into()).await;
            // `run_session_stage`: "timeout after …s", in-flight tasks cancelled.
            tracing::warn!(
                timeout_s = after.as_secs_f64(),
                "trace session replay stage timed out"
            );
            control.stop_now(StopReason::Deadline);
        })
    });
    let pool = (replay.concurrent_sessions > 0)
        .then(|| Arc::new(Semaphore::new(replay.concurrent_sessions as usize)));
    // Tokio's semaphore is fair: calls take places in the order their sessions queued them.
    let cap = replay
        .in_flight_cap
        .map(|n| Arc::new(Semaphore::new(n.max(1))));
    let mut next_start = start;
    let mut running = JoinSet::new();
    for source in &replay.sessions {
        if source.calls == 0 {
            // `dispatch_session`: a session without a graph counts as complete and is not reported.
            continue;
        }
        let place = match &pool {
            Some(pool) => tokio::select! {
                biased;
                () = context.control.issuing_ended() => break,
                place = Arc::clone(pool).acquire_owned() => place.ok(),
            },
            None => None,
        };
        if replay.session_rate.is_some() {
            tokio::select! {
                biased;
                () = context.control.issuing_ended() => break,
                () = llmbench_model::timer::sleep_until(next_start) => {}
            }
        }
        let started = Instant::now();
        if let Some(rate) = replay.session_rate {
            next_start = (next_start + Duration::from_secs_f64(1.0 / rate)).max(started);
        }
        let context = context.clone();
        let replay = Arc::clone(&replay);
        let source = source.clone();
        let cap = cap.clone();
        running.spawn(async move { run_session(context, replay, source, place, cap).await });
        while let Some(done) = running.try_join_next() {
            finished.extend(done.ok().flatten());
        }
    }
    while let Some(done) = running.join_next().await {
        finished.extend(done.ok().flatten());
    }
    if let Some(timeout) = timeout {
        timeout.abort();
    }
    // A session's record is made when its task ends, which for a failed session is after its calls still
    // running finished: order by end so the file reads as upstream's, which records at the failure.
    finished.sort_by_key(|s| s.end_ns);
    finished
}

/// Reads and builds one session's graph; `None` (logged) when it yields none now.
async fn load(source: &SessionSource, include_errors: bool) -> Option<Graph> {
    let path = source.path.clone();
    let weka = source.weka.clone();
    let built = tokio::task::spawn_blocking(move || -> Result<Build, String> {
        if let Some(weka) = weka {
            return weka.graph().map(Build::Graph).map_err(|e| e.to_string());
        }
        let text = std::fs::read_to_string(&path).map_err(|e| e.to_string())?;
        let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
        otel_trace::build(&value, include_errors).map_err(|e| e.to_string())
    })
    .await;
    match built {
        Ok(Ok(Build::Graph(graph))) => Some(graph),
        Ok(Ok(Build::Skipped(why))) | Ok(Err(why)) => {
            tracing::warn!(session = %source.name, path = %source.path.display(), %why, "session skipped");
            None
        }
        Err(e) => {
            tracing::warn!(session = %source.name, error = %e, "session skipped");
            None
        }
    }
}

async fn run_session(
    context: StageContext,
    replay: Arc<SessionReplay>,
    source: SessionSource,
    place: Option<OwnedSemaphorePermit>,
    cap: Option<Arc<Semaphore>>,
) -> Option<SessionRecord> {
    let graph = load(&source, replay.options.include_errors).await?;
    // The session starts once its graph is built, as upstream stamps its dispatch time after building it
    // (`dispatch_session`: `is_session_buildable`, then `activate_session`): its roots are due now.
    let start = Instant::now();
    let outcomes = (0..graph.events.len())
        .map(|_| watch::channel(None).0)
        .collect();
    let session = Arc::new(Session {
        graph,
        outcomes,
        start,
        place: Mutex::new(place),
        answered: Mutex::new(0),
        ended: Mutex::new(None),
        marker: replay
            .options
            .inject_random_session_id
            .then(|| format!("[SESS:{:016x}] ", rand::random::<u64>())),
    });
    let mut calls = JoinSet::new();
    for index in 0..session.graph.events.len() {
        let slot = match &cap {
            Some(cap) => tokio::select! {
                biased;
                () = context.control.issuing_ended() => break,
                slot = Arc::clone(cap).acquire_owned() => slot.ok(),
            },
            None => None,
        };
        let context = context.clone();
        let replay = Arc::clone(&replay);
        let session = Arc::clone(&session);
        let id = source.id;
        let header = source.header.clone();
        calls.spawn(async move {
            let _slot = slot;
            run_call(&context, &replay, &session, id, index, header).await;
        });
    }
    while calls.join_next().await.is_some() {}
    session.leave_pool();
    let ended = session
        .ended
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()?;
    let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    Some(SessionRecord {
        id: source.id,
        name: source.name,
        file: source.path.display().to_string(),
        stage: context.stage,
        start_ns: context.clock.ns_of(session.start),
        end_ns: context.clock.ns_of(ended.at),
        num_events: count(session.graph.events.len()),
        completed: count(ended.completed),
        cancelled: count(ended.cancelled),
        failure: ended.failure,
    })
}

/// A session of `events` calls that first failed at `at`, `completed` of them answered: the failing call is
/// neither completed nor cancelled (upstream's `cancelled = total − completed_so_far − 1`). Pure.
fn failed(at: Instant, events: usize, completed: usize, failure: Option<String>) -> Ended {
    Ended {
        at,
        completed,
        cancelled: events.saturating_sub(completed + 1),
        failure,
    }
}

async fn run_call(
    context: &StageContext,
    replay: &SessionReplay,
    session: &Session,
    id: u32,
    index: usize,
    header: Option<Arc<(String, String)>>,
) {
    let event = &session.graph.events[index];
    let fail = |failure: Option<String>| {
        session.first_failure(failure);
        session.outcomes[index].send_replace(Some(Outcome::Failed));
        session.leave_pool();
    };
    // Wait for every predecessor; the last answer sets the due time.
    let mut last = session.start;
    let mut answered: Vec<Option<Outcome>> = vec![None; session.graph.events.len()];
    for &p in &event.predecessors {
        let mut rx = session.outcomes[p].subscribe();
        let wait = rx.wait_for(Option::is_some);
        let outcome = tokio::select! {
            biased;
            () = context.control.issuing_ended() => return,
            got = async {
                match replay.options.predecessor_wait_timeout {
                    Some(limit) => tokio::time::timeout(limit, wait).await.ok(),
                    None => Some(wait.await),
                }
            } => got.and_then(|r| r.ok().and_then(|o| o.clone())),
        };
        match outcome {
            Some(Outcome::Answered { at, .. }) => last = last.max(at),
            // A failed predecessor: skipped, and so are this call's successors. The session already failed.
            Some(Outcome::Failed) => return fail(None),
            // A silent one (`predecessor_wait_timeout`): upstream's `_fail_and_notify` reason, with
            // `asyncio.wait_for`'s exception name.
            None => return fail(Some("predecessor wait failed: TimeoutError".to_owned())),
        }
        answered[p] = outcome;
    }
    // Sources of substituted segments are ancestors, answered by now.
    for segment in &event.segments {
        if let Some(s) = segment.source
            && answered[s].is_none()
        {
            answered[s] = session.outcomes[s].borrow().clone();
        }
    }
    let due = next_due(last, event, replay.options.max_wait);
    let messages = substitute(
        event,
        &answered,
        replay.options.disable_output_substitution,
        session.marker.as_deref(),
    );
    let sent: Arc<[ChatMessage]> = messages.into();
    let prompt = Prompt {
        messages: Some(sent.to_vec()),
        ..Prompt::text(String::new(), event.input_tokens, Some(event.max_tokens))
    };
    let mut request = prepare(&prompt, &replay.settings);
    request.header = header;
    tokio::select! {
        biased;
        () = context.control.issuing_ended() => return,
        () = llmbench_model::timer::sleep_until(due) => {}
    }
    let mut record = context
        .send(&request, context.clock.ns_of(due), false)
        .await;
    let at = Instant::now();
    let answer = record.text.take().map(|t| *t).unwrap_or_default();
    record.conversation = Some(TurnOf {
        id,
        turn: u32::try_from(index).unwrap_or(u32::MAX),
    });
    let ok = record.succeeded();
    let stopped = record.error_class() == Some(ErrorClass::Cancelled);
    context.record(record);
    if stopped {
        // Cancelled by the stage's stop: upstream's main loop left at the timeout before it could see the
        // session end, so a session still running then is not reported.
        session.outcomes[index].send_replace(Some(Outcome::Failed));
        session.leave_pool();
        return;
    }
    if !ok {
        return fail(None);
    }
    session.outcomes[index].send_replace(Some(Outcome::Answered {
        answer: answer.into(),
        sent,
        at,
    }));
    let mut done = session
        .answered
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    *done += 1;
    if *done == session.graph.events.len() {
        let mut ended = session.ended.lock().unwrap_or_else(PoisonError::into_inner);
        if ended.is_none() {
            *ended = Some(Ended {
                at,
                completed: *done,
                cancelled: 0,
                failure: None,
            });
        }
        drop(ended);
        session.leave_pool();
    }
}

/// When a call is due: at the session's start for a root, else its recorded wait (capped at `max_wait_ms`) after
/// its last predecessor answered (`last`). Pure, so the rule is tested alone.
fn next_due(last: Instant, event: &Event, max_wait: Duration) -> Instant {
    if event.predecessors.is_empty() {
        return last;
    }
    last + Duration::from_millis(event.wait_ms).min(max_wait)
}

fn chat(m: &Message) -> ChatMessage {
    ChatMessage {
        role: m.role.clone(),
        content: m.content.clone(),
    }
}

/// The messages a call sends (`_build_messages_with_substitution`): a `shared` segment is the first messages its
/// source sent (the recorded ones if it sent fewer), an `output` segment the source's live answer as an
/// assistant message, the rest as recorded. Without substitution, or without shared and output segments, the
/// recorded messages. With a session `marker` (`inject_random_session_id`), each message of a `unique` segment starts
/// with it. `answered[s]` is source `s`'s outcome. Pure.
fn substitute(
    event: &Event,
    answered: &[Option<Outcome>],
    disabled: bool,
    marker: Option<&str>,
) -> Vec<ChatMessage> {
    let substitutes = !disabled
        && event
            .segments
            .iter()
            .any(|s| matches!(s.kind, SegmentKind::Shared | SegmentKind::Output));
    let injects = marker.is_some() && event.segments.iter().any(|s| s.kind == SegmentKind::Unique);
    if !substitutes && !injects {
        return event.messages.iter().map(chat).collect();
    }
    let mut out = Vec::with_capacity(event.messages.len());
    let mut cursor = 0;
    for segment in &event.segments {
        let end = (cursor + segment.messages).min(event.messages.len());
        let recorded = &event.messages[cursor..end];
        let source = segment.source.and_then(|s| answered.get(s)?.as_ref());
        match (segment.kind, source) {
            (SegmentKind::Output, Some(Outcome::Answered { answer, .. }))
                if segment.messages == 1 =>
            {
                out.push(ChatMessage {
                    role: "assistant".to_owned(),
                    content: answer.to_string(),
                });
            }
            (SegmentKind::Shared, Some(Outcome::Answered { sent, .. }))
                if sent.len() >= segment.messages =>
            {
                out.extend(sent[..segment.messages].iter().cloned());
            }
            (SegmentKind::Unique, _) if marker.is_some() => {
                let marker = marker.unwrap_or_default();
                out.extend(recorded.iter().map(|m| ChatMessage {
                    role: m.role.clone(),
                    content: format!("{marker}{}", m.content),
                }));
            }
            _ => out.extend(recorded.iter().map(chat)),
        }
        cursor = end;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use llmbench_workload::workload::otel_trace::Segment;

    fn m(role: &str, content: &str) -> Message {
        Message {
            role: role.to_owned(),
            content: content.to_owned(),
        }
    }

    fn event(messages: Vec<Message>, segments: Vec<Segment>, predecessors: Vec<usize>) -> Event {
        Event {
            span_id: "s".to_owned(),
            messages,
            segments,
            predecessors,
            wait_ms: 500,
            t_start_ms: 0,
            t_end_ms: 0,
            max_tokens: 1,
            input_tokens: 1,
        }
    }

    fn answered(answer: &str, sent: &[(&str, &str)]) -> Option<Outcome> {
        Some(Outcome::Answered {
            answer: answer.into(),
            sent: sent
                .iter()
                .map(|(r, c)| ChatMessage {
                    role: (*r).to_owned(),
                    content: (*c).to_owned(),
                })
                .collect(),
            at: Instant::now(),
        })
    }

    #[test]
    fn a_failed_session_cancels_what_neither_answered_nor_failed() {
        let t = Instant::now();
        // 5 calls, 2 answered before the third failed: 5 − 2 − 1 = 2 cancelled (`process_failure`).
        let e = failed(t, 5, 2, None);
        assert_eq!((e.completed, e.cancelled), (2, 2));
        // The last call failing after all others answered: none cancelled.
        assert_eq!(failed(t, 5, 4, None).cancelled, 0);
        // A skip's reason is kept for the session's error.
        let why = Some("predecessor wait failed: TimeoutError".to_owned());
        assert_eq!(failed(t, 1, 0, why.clone()).failure, why);
    }

    #[test]
    fn a_root_goes_at_the_session_start_and_a_successor_its_capped_wait_after_the_last_answer() {
        let t = Instant::now();
        let root = event(vec![m("user", "q")], vec![], vec![]);
        assert_eq!(next_due(t, &root, Duration::from_secs(15)), t);
        let later = event(vec![m("user", "q")], vec![], vec![0]);
        // wait_ms 500 under a 15 s cap: 500 ms; under a 200 ms cap: 200 ms.
        assert_eq!(
            next_due(t, &later, Duration::from_secs(15)),
            t + Duration::from_millis(500)
        );
        assert_eq!(
            next_due(t, &later, Duration::from_millis(200)),
            t + Duration::from_millis(200)
        );
    }

    #[test]
    fn shared_and_output_segments_carry_what_the_source_really_sent_and_answered() {
        // Recorded: [Q1, A1(recorded), Q2]; segments: 1 shared from 0, 1 output from 0, 1 unique.
        let e = event(
            vec![
                m("user", "Q1"),
                m("assistant", "A1 recorded"),
                m("user", "Q2"),
            ],
            vec![
                Segment {
                    kind: SegmentKind::Shared,
                    messages: 1,
                    source: Some(0),
                },
                Segment {
                    kind: SegmentKind::Output,
                    messages: 1,
                    source: Some(0),
                },
                Segment {
                    kind: SegmentKind::Unique,
                    messages: 1,
                    source: None,
                },
            ],
            vec![0],
        );
        let outcomes = vec![answered("live A1", &[("user", "Q1 as sent")])];
        let sent = substitute(&e, &outcomes, false, None);
        let pairs: Vec<(&str, &str)> = sent
            .iter()
            .map(|c| (c.role.as_str(), c.content.as_str()))
            .collect();
        assert_eq!(
            pairs,
            [
                ("user", "Q1 as sent"),
                ("assistant", "live A1"),
                ("user", "Q2")
            ]
        );
        // Substitution off: the recorded messages.
        let recorded = substitute(&e, &outcomes, true, None);
        assert_eq!(recorded[1].content, "A1 recorded");
        // A source that sent fewer messages than the shared prefix: the recorded prefix.
        let short = vec![answered("live A1", &[])];
        assert_eq!(substitute(&e, &short, false, None)[0].content, "Q1");
    }
}
