//! Multi-turn conversations on the wire: which conversation and turn a request slot sends, the request body with
//! the conversation's history (the model's actual answers included), and what a finished turn does to its
//! conversation. The two tools' rules are in [`crate::conversations::Style`].
//!
//! A body is built when its turn goes out, because it carries answers that arrived moments ago; building it is
//! JSON serialisation of text already in memory, never tokenisation. Memory follows the conversations in
//! progress: guidellm's are dropped when their last turn ends, inference-perf's sessions keep their context.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::OwnedMutexGuard;

use super::PreparedRequest;
#[cfg(test)]
use super::control::Control;
use super::control::Flag;
use crate::conversations::{ConversationSet, Piece, Script, Style, join};
use crate::data::{ChatMessage, Prompt};
use crate::record::{ErrorClass, RequestError, RequestRecord, TurnOf};
use crate::request::{BodySettings, prepare};
use crate::workload::ApiKind;

/// A run's conversations in progress.
#[derive(Debug)]
pub struct Conversations {
    scripts: Vec<Script>,
    settings: BodySettings,
    state: State,
    /// Whether records say their conversation and turn: not for a run of single-turn "conversations" (guidellm
    /// chat with a prefix), which have no turns to tell apart.
    tags_turns: bool,
}

#[derive(Debug)]
enum State {
    /// inference-perf: one session per script, each behind a lock held from its round's body to its answer.
    Sessions(Vec<Arc<tokio::sync::Mutex<Session>>>),
    /// guidellm: conversations waiting for their next turn, oldest first, and the next new conversation.
    Turns(Mutex<TurnQueue>),
}

/// An inference-perf user session.
#[derive(Debug)]
struct Session {
    context: Piece,
    rounds: u32,
}

#[derive(Debug, Default)]
struct TurnQueue {
    waiting: VecDeque<Live>,
    next_conversation: u32,
}

/// A guidellm conversation between turns.
#[derive(Debug)]
struct Live {
    id: u32,
    script: usize,
    /// The answer to each turn sent so far, with its output tokens.
    answers: Vec<(String, u32)>,
}

/// A turn on its way: the request to send and what to do with its answer.
#[derive(Debug)]
pub struct Turn {
    pub request: PreparedRequest,
    pub of: TurnOf,
    pending: Pending,
}

#[derive(Debug)]
enum Pending {
    Session {
        guard: OwnedMutexGuard<Session>,
        sent: Piece,
    },
    Conversation(Live),
}

impl Conversations {
    pub fn new(set: ConversationSet, settings: BodySettings) -> Conversations {
        let state = match set.style {
            Style::InferencePerfSessions => State::Sessions(
                set.scripts
                    .iter()
                    .map(|script| {
                        let context = script.system.as_deref().cloned().unwrap_or_else(|| Piece {
                            text: String::new(),
                            tokens: 0,
                        });
                        Arc::new(tokio::sync::Mutex::new(Session { context, rounds: 0 }))
                    })
                    .collect(),
            ),
            Style::GuidellmTurns => State::Turns(Mutex::new(TurnQueue::default())),
        };
        let tags_turns =
            matches!(state, State::Sessions(_)) || set.scripts.iter().any(|s| s.turns.len() > 1);
        Conversations {
            scripts: set.scripts,
            settings,
            state,
            tags_turns,
        }
    }

    /// The turn that request `id` (run-wide, in issue order) sends; `None` when `cancel` fires first (an
    /// inference-perf round waiting for its session's previous round).
    pub async fn begin(&self, id: u64, cancel: &Flag) -> Option<Turn> {
        match &self.state {
            State::Sessions(sessions) => {
                let user = (id % sessions.len() as u64) as usize;
                let lock = Arc::clone(&sessions[user]).lock_owned();
                let mut guard = tokio::select! {
                    guard = lock => guard,
                    () = cancel.raised() => return None,
                };
                let prompt = &self.scripts[user].turns[0];
                let sent = Piece {
                    text: join(&[&guard.context.text, &prompt.text.text]),
                    tokens: guard.context.tokens.saturating_add(prompt.text.tokens),
                };
                let round = guard.rounds;
                guard.rounds += 1;
                let request = self.body(Body::Completion(&sent), prompt.max_tokens);
                Some(Turn {
                    request,
                    of: TurnOf {
                        id: user as u32,
                        turn: round,
                    },
                    pending: Pending::Session { guard, sent },
                })
            }
            State::Turns(queue) => {
                let live = {
                    let mut queue = queue.lock().unwrap_or_else(PoisonError::into_inner);
                    match queue.waiting.pop_front() {
                        Some(live) => live,
                        None => {
                            let id = queue.next_conversation;
                            queue.next_conversation = queue.next_conversation.wrapping_add(1);
                            Live {
                                id,
                                script: id as usize % self.scripts.len(),
                                answers: Vec::new(),
                            }
                        }
                    }
                };
                let request = self.guidellm_body(&live);
                Some(Turn {
                    request,
                    of: TurnOf {
                        id: live.id,
                        turn: live.answers.len() as u32,
                    },
                    pending: Pending::Conversation(live),
                })
            }
        }
    }

    /// Ends `turn` with its record: its answer joins the conversation's history, and — guidellm — a failed turn
    /// cancels the turns its conversation had left, returned as records to keep. The answer's text is taken out
    /// of the record unless `keep_text`.
    pub fn finish(
        &self,
        turn: Turn,
        record: &mut RequestRecord,
        keep_text: bool,
        now_ns: u64,
    ) -> Vec<RequestRecord> {
        if self.tags_turns {
            record.conversation = Some(turn.of);
        }
        let answer = if keep_text {
            record.text.as_deref().cloned()
        } else {
            record.text.take().map(|text| *text)
        };
        let answer = answer.unwrap_or_default();
        let succeeded = record.succeeded();
        let answer_tokens = record.output_tokens();
        match turn.pending {
            Pending::Session { mut guard, sent } => {
                if succeeded {
                    guard.context = Piece {
                        text: join(&[&sent.text, &answer]),
                        tokens: sent.tokens.saturating_add(answer_tokens),
                    };
                }
                Vec::new()
            }
            Pending::Conversation(mut live) => {
                let total = self.scripts[live.script].turns.len() as u32;
                let next = turn.of.turn + 1;
                if !succeeded {
                    return (next..total)
                        .map(|t| self.cancelled_turn(&live, t, record, now_ns))
                        .collect();
                }
                if next < total {
                    live.answers.push((answer, answer_tokens));
                    if let State::Turns(queue) = &self.state {
                        queue
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .waiting
                            .push_back(live);
                    }
                }
                Vec::new()
            }
        }
    }

    /// guidellm: a later turn of a conversation whose earlier turn failed, never sent.
    fn cancelled_turn(
        &self,
        live: &Live,
        turn: u32,
        failed: &RequestRecord,
        now_ns: u64,
    ) -> RequestRecord {
        let script = &self.scripts[live.script];
        RequestRecord {
            id: failed.id,
            stage: failed.stage,
            scheduled_ns: now_ns,
            sent_ns: now_ns,
            end_ns: now_ns,
            input_tokens: script.turns[turn as usize].text.tokens,
            max_tokens: script.turns[turn as usize].max_tokens,
            streaming: failed.streaming,
            http_status: None,
            usage: None,
            error: Some(Box::new(RequestError {
                class: ErrorClass::Cancelled,
                message: format!(
                    "not sent: turn {} of conversation {} failed, so guidellm cancels the rest of it",
                    turn - 1,
                    live.id
                ),
            })),
            chunks: Vec::new(),
            text: None,
            conversation: Some(TurnOf { id: live.id, turn }),
            warmup: false,
        }
    }

    /// guidellm's body for the next turn of `live`: every earlier turn (system prefix on the first, the user's
    /// message, the actual answer when it is not empty), then this turn (with the prefix if it is the first).
    fn guidellm_body(&self, live: &Live) -> PreparedRequest {
        let script = &self.scripts[live.script];
        let current = live.answers.len();
        let turn = &script.turns[current];
        let system = |t: usize| script.system.as_deref().filter(|_| t == 0);
        let mut tokens = 0u32;
        let body = match self.settings.api {
            ApiKind::Completion => {
                let mut parts: Vec<&str> = Vec::with_capacity(3 * (current + 1));
                for (t, (answer, answer_tokens)) in live.answers.iter().enumerate() {
                    if let Some(prefix) = system(t) {
                        parts.push(&prefix.text);
                        tokens = tokens.saturating_add(prefix.tokens);
                    }
                    parts.push(&script.turns[t].text.text);
                    tokens = tokens.saturating_add(script.turns[t].text.tokens);
                    if !answer.is_empty() {
                        parts.push(answer);
                        tokens = tokens.saturating_add(*answer_tokens);
                    }
                }
                if let Some(prefix) = system(current) {
                    parts.push(&prefix.text);
                    tokens = tokens.saturating_add(prefix.tokens);
                }
                parts.push(&turn.text.text);
                tokens = tokens.saturating_add(turn.text.tokens);
                Body::CompletionText(join(&parts), tokens)
            }
            ApiKind::Chat => {
                let mut messages = Vec::with_capacity(3 * (current + 1));
                let user_turn = |t: usize, messages: &mut Vec<ChatMessage>, tokens: &mut u32| {
                    if let Some(prefix) = system(t) {
                        messages.push(message("system", &prefix.text));
                        *tokens = tokens.saturating_add(prefix.tokens);
                    }
                    messages.push(message("user", &script.turns[t].text.text));
                    *tokens = tokens.saturating_add(script.turns[t].text.tokens);
                };
                for (t, (answer, answer_tokens)) in live.answers.iter().enumerate() {
                    user_turn(t, &mut messages, &mut tokens);
                    messages.push(message("assistant", answer));
                    tokens = tokens.saturating_add(*answer_tokens);
                }
                user_turn(current, &mut messages, &mut tokens);
                Body::Chat(messages, tokens)
            }
        };
        self.body(body, turn.max_tokens)
    }

    fn body(&self, body: Body<'_>, max_tokens: Option<u32>) -> PreparedRequest {
        let prompt = match body {
            Body::Completion(piece) => Prompt::text(piece.text.clone(), piece.tokens, max_tokens),
            Body::CompletionText(text, tokens) => Prompt::text(text, tokens, max_tokens),
            Body::Chat(messages, tokens) => {
                let mut prompt = Prompt::text(String::new(), tokens, max_tokens);
                prompt.messages = Some(messages);
                prompt
            }
        };
        prepare(&prompt, &self.settings)
    }
}

enum Body<'a> {
    Completion(&'a Piece),
    CompletionText(String, u32),
    Chat(Vec<ChatMessage>, u32),
}

fn message(role: &str, content: &str) -> ChatMessage {
    ChatMessage {
        role: role.to_owned(),
        content: content.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversations::UserTurn;
    use crate::record::Usage;
    use serde_json::{Value, json};

    fn piece(text: &str) -> Piece {
        Piece {
            text: text.to_owned(),
            tokens: text.split_whitespace().count() as u32,
        }
    }

    fn script(system: Option<&str>, turns: &[&str]) -> Script {
        Script {
            system: system.map(|s| Arc::new(piece(s))),
            turns: turns
                .iter()
                .map(|t| UserTurn {
                    text: piece(t),
                    max_tokens: Some(2),
                })
                .collect(),
        }
    }

    fn settings(api: ApiKind) -> BodySettings {
        BodySettings {
            model: "m".to_owned(),
            api,
            streaming: true,
            ignore_eos: true,
            default_max_tokens: None,
            style: crate::request::BodyStyle::InferencePerf,
        }
    }

    fn body(turn: &Turn) -> Value {
        serde_json::from_slice(&turn.request.body).expect("json")
    }

    /// A finished record for `turn` whose answer was `answer` (or a failure).
    fn answered(turn: &Turn, answer: Option<&str>) -> RequestRecord {
        RequestRecord {
            id: 0,
            stage: 0,
            scheduled_ns: 0,
            sent_ns: 0,
            end_ns: 10,
            input_tokens: turn.request.input_tokens,
            max_tokens: turn.request.max_tokens,
            streaming: true,
            http_status: Some(if answer.is_some() { 200 } else { 500 }),
            usage: answer.map(|a| Usage {
                prompt_tokens: turn.request.input_tokens,
                completion_tokens: a.split_whitespace().count() as u32,
                cached_tokens: None,
            }),
            error: None,
            chunks: Vec::new(),
            text: answer.map(|a| Box::new(a.to_owned())),
            conversation: None,
            warmup: false,
        }
    }

    #[tokio::test]
    async fn guidellm_chat_turns_carry_the_prefix_the_user_turns_and_the_actual_answers() {
        let set = ConversationSet {
            style: Style::GuidellmTurns,
            scripts: vec![script(Some("be brief"), &["hello there", "and then"])],
        };
        let conversations = Conversations::new(set, settings(ApiKind::Chat));
        let cancel = Flag::default();
        let first = conversations.begin(0, &cancel).await.expect("turn");
        assert_eq!(first.of, TurnOf { id: 0, turn: 0 });
        assert_eq!(
            body(&first)["messages"],
            json!([{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello there"}])
        );
        assert_eq!(first.request.input_tokens, 4);
        let mut record = answered(&first, Some("hi you two"));
        assert!(
            conversations
                .finish(first, &mut record, false, 10)
                .is_empty()
        );
        assert_eq!(record.text, None, "the answer is not kept in the record");
        assert_eq!(record.conversation, Some(TurnOf { id: 0, turn: 0 }));

        let second = conversations.begin(1, &cancel).await.expect("turn");
        assert_eq!(second.of, TurnOf { id: 0, turn: 1 });
        assert_eq!(
            body(&second)["messages"],
            json!([
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "hello there"},
                {"role": "assistant", "content": "hi you two"},
                {"role": "user", "content": "and then"},
            ])
        );
        // 2 (system) + 2 (user) + 3 (answer) + 2 (user)
        assert_eq!(second.request.input_tokens, 9);
        let mut record = answered(&second, Some("ok"));
        conversations.finish(second, &mut record, false, 20);
        // The conversation is over: the next slot starts conversation 1, on the script again.
        let third = conversations.begin(2, &cancel).await.expect("turn");
        assert_eq!(third.of, TurnOf { id: 1, turn: 0 });
    }

    #[tokio::test]
    async fn guidellm_completion_turns_join_history_with_spaces() {
        let set = ConversationSet {
            style: Style::GuidellmTurns,
            scripts: vec![script(Some("sys"), &["a b", "c d"])],
        };
        let conversations = Conversations::new(set, settings(ApiKind::Completion));
        let cancel = Flag::default();
        let first = conversations.begin(0, &cancel).await.expect("turn");
        assert_eq!(body(&first)["prompt"], "sys a b");
        let mut record = answered(&first, Some("x y z"));
        conversations.finish(first, &mut record, false, 0);
        let second = conversations.begin(1, &cancel).await.expect("turn");
        assert_eq!(body(&second)["prompt"], "sys a b x y z c d");
        assert_eq!(second.request.input_tokens, 8);
    }

    #[tokio::test]
    async fn a_failed_guidellm_turn_cancels_the_rest_of_its_conversation() {
        let set = ConversationSet {
            style: Style::GuidellmTurns,
            scripts: vec![script(None, &["one", "two", "three"])],
        };
        let conversations = Conversations::new(set, settings(ApiKind::Chat));
        let cancel = Flag::default();
        let first = conversations.begin(0, &cancel).await.expect("turn");
        let mut record = answered(&first, None);
        let cancelled = conversations.finish(first, &mut record, false, 42);
        let turns: Vec<u32> = cancelled
            .iter()
            .map(|r| r.conversation.expect("turn").turn)
            .collect();
        assert_eq!(turns, vec![1, 2]);
        for r in &cancelled {
            assert_eq!(r.error_class(), Some(ErrorClass::Cancelled));
            assert_eq!((r.sent_ns, r.end_ns), (42, 42));
        }
        // Nothing of conversation 0 is waiting: the next slot starts conversation 1.
        let next = conversations.begin(1, &cancel).await.expect("turn");
        assert_eq!(next.of, TurnOf { id: 1, turn: 0 });
    }

    #[tokio::test]
    async fn inference_perf_rounds_grow_the_session_context_with_each_answer() {
        let set = ConversationSet {
            style: Style::InferencePerfSessions,
            scripts: vec![
                script(Some("p q"), &["p q question one"]),
                script(Some("r s"), &["r s question two"]),
            ],
        };
        let conversations = Conversations::new(set, settings(ApiKind::Completion));
        let cancel = Flag::default();
        // Request 0 is user 0's first round: the prefix, then the prompt (which starts with the prefix again).
        let r0 = conversations.begin(0, &cancel).await.expect("turn");
        assert_eq!(body(&r0)["prompt"], "p q p q question one");
        assert_eq!(r0.of, TurnOf { id: 0, turn: 0 });
        assert_eq!(r0.request.input_tokens, 6);
        let mut rec = answered(&r0, Some("fine thanks"));
        conversations.finish(r0, &mut rec, false, 0);
        // Request 1 is user 1's first round.
        let r1 = conversations.begin(1, &cancel).await.expect("turn");
        assert_eq!(r1.of, TurnOf { id: 1, turn: 0 });
        let mut rec = answered(&r1, None);
        conversations.finish(r1, &mut rec, false, 0);
        // Request 2: user 0's second round carries the first round and its answer.
        let r2 = conversations.begin(2, &cancel).await.expect("turn");
        assert_eq!(
            body(&r2)["prompt"],
            "p q p q question one fine thanks p q question one"
        );
        assert_eq!(r2.request.input_tokens, 6 + 2 + 4);
        // Request 3: user 1's failed round left its context as it was.
        let mut rec = answered(&r2, Some("ok"));
        conversations.finish(r2, &mut rec, false, 0);
        let r3 = conversations.begin(3, &cancel).await.expect("turn");
        assert_eq!(body(&r3)["prompt"], "r s r s question two");
        assert_eq!(r3.of, TurnOf { id: 1, turn: 1 });
    }

    #[tokio::test]
    async fn an_inference_perf_round_waits_for_the_previous_round_of_its_session() {
        let set = ConversationSet {
            style: Style::InferencePerfSessions,
            scripts: vec![script(None, &["q"])],
        };
        let conversations = Arc::new(Conversations::new(set, settings(ApiKind::Completion)));
        let control = Control::default();
        let first = conversations
            .begin(0, control.in_flight())
            .await
            .expect("turn");
        let waiting = {
            let conversations = Arc::clone(&conversations);
            let control = control.clone();
            tokio::spawn(async move {
                conversations
                    .begin(1, control.in_flight())
                    .await
                    .map(|t| t.of)
            })
        };
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert!(!waiting.is_finished(), "round 1 waits for round 0");
        let mut rec = answered(&first, Some("a"));
        conversations.finish(first, &mut rec, false, 0);
        assert_eq!(
            waiting.await.expect("joins"),
            Some(TurnOf { id: 0, turn: 1 })
        );
        // A round still waiting when the run stops gives up.
        let _held = conversations
            .begin(2, control.in_flight())
            .await
            .expect("turn");
        let blocked = {
            let conversations = Arc::clone(&conversations);
            let control = control.clone();
            tokio::spawn(async move { conversations.begin(3, control.in_flight()).await.is_none() })
        };
        control.stop_now(crate::engine::StopReason::RecordsUnwritable);
        assert!(blocked.await.expect("joins"));
    }
}
