//! Multi-turn conversations on the wire: which conversation and turn a request slot sends, the request body with
//! the conversation's history (the model's actual answers included), and what a finished turn does to its
//! conversation. The two tools' rules are in [`llmbench_workload::conversations::Style`].
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
use llmbench_data::{ChatMessage, Prompt};
use llmbench_model::record::{ErrorClass, RequestError, RequestRecord, TurnOf};
use llmbench_text::numpy_generator::NumpyGenerator;
use llmbench_text::py_random::PyRandom;
use llmbench_workload::conversations::{
    AiperfSampling, ConversationSet, Piece, ReplayPlan, ReplayStage, ReplayText, ReplayTurn,
    Script, Style, join,
};
use llmbench_workload::request::{AdapterBodies, BodySettings, prepare};
use llmbench_workload::workload::ApiKind;

/// A run's conversations in progress.
#[derive(Debug)]
pub struct Conversations {
    scripts: Vec<Script>,
    settings: BodySettings,
    state: State,
    /// Whether records say their conversation and turn: not for a run of single-turn "conversations" (guidellm
    /// chat with a prefix), which have no turns to tell apart.
    tags_turns: bool,
    /// AIPerf's several `--model-names`: each turn's model, chosen in the composer's order (every turn of the
    /// first conversation, then the next's), and where each conversation's turns start in that order.
    models: Option<(AdapterBodies, Vec<usize>)>,
}

#[derive(Debug)]
enum State {
    /// inference-perf: one session per script, each behind a lock held from its round's body to its answer.
    Sessions(Vec<Arc<tokio::sync::Mutex<Session>>>),
    /// guidellm: conversations waiting for their next turn, oldest first, and the next new conversation.
    Turns(Mutex<TurnQueue>),
    /// inference-perf `conversation_replay`.
    Replay(Replay),
    /// AIPerf: the dataset sampler, which gives each new session its conversation, and the sessions so far.
    Aiperf(Mutex<AiperfSampler>, String),
}

/// AIPerf 0.13's dataset sampler (`dataset/dataset_samplers.py`), shared by the run's phases as AIPerf's phase
/// orchestrator shares its one sampler.
#[derive(Debug)]
struct AiperfSampler {
    /// The conversations in the order they are handed out (shuffled again each time they are used up).
    order: Vec<usize>,
    next: usize,
    shuffle: Option<NumpyGenerator>,
    /// `RandomSampler`: each new session's conversation is `random.choice` of them all.
    random: Option<PyRandom>,
    sessions: u32,
}

impl AiperfSampler {
    fn new(conversations: usize, sampling: AiperfSampling) -> AiperfSampler {
        let mut order: Vec<usize> = (0..conversations).collect();
        let random = match sampling {
            AiperfSampling::Random { seed } => Some(PyRandom::seed(seed)),
            _ => None,
        };
        let shuffle = match sampling {
            AiperfSampling::Sequential | AiperfSampling::Random { .. } => None,
            AiperfSampling::Shuffle { seed } => {
                // `ShuffleSampler.__init__` shuffles once up front.
                let mut rng = NumpyGenerator::seed(seed);
                rng.shuffle(&mut order);
                Some(rng)
            }
        };
        AiperfSampler {
            order,
            next: 0,
            shuffle,
            random,
            sessions: 0,
        }
    }

    /// `next_conversation_id`: the next conversation, wrapping (and reshuffling) once all were used.
    fn next(&mut self) -> usize {
        if let Some(rng) = self.random.as_mut() {
            return rng.choice_index(self.order.len()).unwrap_or(0);
        }
        if self.next >= self.order.len() {
            if let Some(rng) = self.shuffle.as_mut() {
                rng.shuffle(&mut self.order);
            }
            self.next = 0;
        }
        let conversation = self.order.get(self.next).copied().unwrap_or(0);
        self.next += 1;
        conversation
    }
}

/// One AIPerf session (`workers/session_manager.py` `UserSession`): a run of one conversation, its history as
/// AIPerf's `DELTAS_WITHOUT_RESPONSES` keeps it (every user turn sent, each followed by the live answer when it
/// had text), and what it holds while it lasts.
#[derive(Debug)]
pub struct AiperfSession {
    id: u32,
    script: usize,
    /// The turns sent so far, each with its answer's text and output tokens (empty when it failed).
    answers: Vec<(String, u32)>,
    /// `X-Correlation-ID` and the session's id (`uuid4`), on every turn: AIPerf's sticky-routing key.
    correlation: Arc<(String, String)>,
    /// The session's concurrency slot, held from its first turn until its last returned.
    pub slot: Option<tokio::sync::OwnedSemaphorePermit>,
    /// AIPerf's `num_turns` for a user-centric user already part-way through its session at the start
    /// (`build_first_turn(max_turns)`): only its first this many turns are sent.
    turn_limit: Option<usize>,
}

impl AiperfSession {
    /// Sends only the first `turns` turns of this session's conversation (AIPerf's `max_turns`).
    pub fn limit_turns(&mut self, turns: usize) {
        self.turn_limit = Some(turns);
    }

    /// How many of its turns returned so far.
    pub fn sent_turns(&self) -> usize {
        self.answers.len()
    }

    /// Replaces the session's correlation id (a user-centric user's is its user id).
    pub fn set_correlation_id(&mut self, id: String) {
        self.correlation = Arc::new((self.correlation.0.clone(), id));
    }
}

/// inference-perf `conversation_replay` in progress (`conversation_replay_datagen.py`, `apis/user_session.py`,
/// `loadgen/load_generator.py`).
///
/// - Request `i` of a stage (counted from 0 in every stage: each stage starts a new `get_data()` generator) is
///   turn `(i div C) mod T_c` of conversation `c = i mod C` (`load_lazy_data`), C conversations, T_c turns in c.
///   `num_requests` ends a stage wherever that leaves the conversations, mid-conversation included.
/// - A turn waits, holding its request slot, until the previous turn of its session has ended (the session
///   lock, `LocalUserSession.get_context`), then sends the session's context: system prompt, history, then this
///   turn's prompt, joined by spaces; the history is every earlier turn's prompt and actual answer.
/// - After a successful answer the turn sleeps its tool-call latency, still holding the session and its slot,
///   and only then adds the exchange to the history and lets the next turn go (`_ConversationReplayAPIData.
///   process_response`). Upstream takes a request's end time after that sleep (`openai_client.py`: `end_time`
///   after `process_response`), so its request latency includes the tool-call latency; so does the record's
///   `end_ns` here. A failed turn sleeps nothing and leaves the history as it was.
/// - When a conversation has run all its turns, its slot starts it again from turn 0 as a new session (same
///   prompts, fresh history), without waiting for the old session's last turn (`turn_idx == 0 and round_num >
///   0`).
/// - Stages: upstream's workers clear every session when a stage ends (`LocalUserSession.clear_instances()`),
///   and the first turn of a conversation in a later stage re-primes its session with a new shared system prompt
///   (one per stage) but without `system_prompt=` (`load_lazy_data`), so until the conversation restarts at turn
///   0 that session sends each turn's prompt alone — no system prompt, no history — and keeps no history. This
///   is what upstream does (with its workers forked, the default), and it is reproduced.
/// - Truncation (`UserSessionCompletionAPIData.to_request_body`, `LocalUserSession.update_context`): a prompt
///   over `max_model_len − max_tokens − 200` tokens drops the oldest history entries; with none left, the system
///   prompt keeps its first tokens (for good), or, when the turn's prompt alone is too long, the system prompt is
///   dropped and the prompt cut. After an answer, history beyond `max_model_len` is dropped oldest first.
///   Token counts are the pieces' exact counts (plain words, one token each) plus each answer's output tokens,
///   never a tokenizer call.
///
/// Workers (`load_generator.py::run_stage`, `Worker.loop`, `_set_worker_concurrency`): the data asks for
/// preferred workers, so each of the `num_workers` workers has its own FIFO queue, and request `i` goes to worker
/// `(i mod C) mod A`, `A = min(num_workers, concurrency_level)`; worker `w` runs at most `N div W` requests at
/// once (one more for the first `N mod W` workers), a request holding its place from the moment the worker takes
/// it — waiting for its session included — until its tool-call sleep ends. Here a free request slot takes the
/// next request of a worker with room (the lowest such index), or waits, holding the slot, until one has room.
#[derive(Debug)]
struct Replay {
    plan: Arc<ReplayPlan>,
    shared: Arc<ReplayShared>,
    slots: Vec<Mutex<Slot>>,
}

#[derive(Debug, Default)]
struct ReplayShared {
    cursor: Mutex<Cursor>,
    /// Signalled when a worker's place frees.
    freed: tokio::sync::Notify,
}

#[derive(Debug, Default)]
struct Cursor {
    stage: Option<u32>,
    /// How many stage changes the run has seen: upstream's sessions live for one stage.
    epoch: u32,
    /// The next request index when the stage has no worker queues (or they are used up).
    next: u64,
    queues: Option<WorkerQueues>,
}

/// A stage's worker queues.
#[derive(Debug)]
struct WorkerQueues {
    conversations: u64,
    requests: u64,
    /// Per active worker: how many requests it runs at once, how many it runs now, and its next request index
    /// (`requests` when its queue is used up).
    capacity: Vec<u32>,
    in_flight: Vec<u32>,
    next: Vec<u64>,
}

impl WorkerQueues {
    fn new(conversations: u64, workers: u32, stage: ReplayStage) -> WorkerQueues {
        let workers = u64::from(workers.max(1));
        let level = u64::from(stage.concurrency.max(1));
        let active = workers.min(level);
        let capacity: Vec<u32> = (0..active)
            .map(|w| (level / workers + u64::from(w < level % workers)) as u32)
            .collect();
        let mut queues = WorkerQueues {
            conversations,
            requests: stage.requests,
            in_flight: vec![0; active as usize],
            next: vec![stage.requests; active as usize],
            capacity,
        };
        for w in 0..active {
            queues.next[w as usize] = queues.first_from(0, w);
        }
        queues
    }

    /// The first index from `start` on that goes to worker `w` (`requests` if none).
    fn first_from(&self, start: u64, w: u64) -> u64 {
        let active = self.capacity.len() as u64;
        if w >= self.conversations.min(active) {
            return self.requests;
        }
        let mut i = start;
        // Every run of `conversations` consecutive indices holds one of worker w's conversations.
        while i < self.requests && (i % self.conversations) % active != w {
            i += 1;
        }
        i.min(self.requests)
    }

    /// The next request for a worker with room: its index and worker.
    fn take(&mut self) -> Take {
        let mut best: Option<usize> = None;
        for w in 0..self.capacity.len() {
            if self.in_flight[w] < self.capacity[w]
                && self.next[w] < self.requests
                && best.is_none_or(|b| self.next[w] < self.next[b])
            {
                best = Some(w);
            }
        }
        match best {
            Some(w) => {
                let index = self.next[w];
                self.next[w] = self.first_from(index + 1, w as u64);
                self.in_flight[w] += 1;
                Take::Index(index, w)
            }
            None if self.next.iter().all(|&n| n >= self.requests) => Take::UsedUp,
            None => Take::Wait,
        }
    }
}

enum Take {
    Index(u64, usize),
    /// Every queue is used up (a stage issuing more than its `num_requests`).
    UsedUp,
    Wait,
}

/// A request's place in its worker, given back when the turn ends (after its tool-call sleep).
#[derive(Debug)]
struct WorkerPlace {
    shared: Arc<ReplayShared>,
    epoch: u32,
    worker: usize,
}

impl Drop for WorkerPlace {
    fn drop(&mut self) {
        {
            let mut cursor = self
                .shared
                .cursor
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if cursor.epoch == self.epoch
                && let Some(queues) = cursor.queues.as_mut()
            {
                queues.in_flight[self.worker] = queues.in_flight[self.worker].saturating_sub(1);
            }
        }
        self.shared.freed.notify_waiters();
    }
}

/// A conversation's slot (upstream's `user_sessions[conv_idx]`).
#[derive(Debug)]
struct Slot {
    session: Arc<tokio::sync::Mutex<ReplaySession>>,
    /// The epoch the session was made in.
    epoch: u32,
    /// The epoch of the shared prompt in the blueprint's system prompt (upstream rewrites `bp.system_prompt`
    /// when it re-primes).
    system_epoch: u32,
    /// `api.session_id_header_key` with the session's id (`user_session_id`): `conv_{c}` for the slot's first
    /// conversation, `slot_{c}_convo_{n}` from its n-th restart on. A re-primed session keeps its id. Made when the
    /// id changes, so a turn only clones it.
    header: Option<Arc<(String, String)>>,
}

/// `key: session`, or nothing without a key.
fn session_header(key: Option<&String>, session: String) -> Option<Arc<(String, String)>> {
    key.map(|key| Arc::new((key.clone(), session)))
}

#[derive(Debug)]
struct ReplaySession {
    /// `None`: a session re-primed without a system prompt, or whose system prompt was cut to nothing.
    system: Option<SystemPrompt>,
    history: VecDeque<Piece>,
    history_tokens: u64,
}

/// A session's system prompt: the first `tokens` tokens of the shared prompt of `epoch` and the conversation's
/// dynamic prompt, its text made on first use and again when truncation shortens it.
#[derive(Debug)]
struct SystemPrompt {
    epoch: u32,
    conversation: u32,
    tokens: u32,
    text: Option<String>,
}

impl ReplaySession {
    fn new(system: Option<SystemPrompt>) -> ReplaySession {
        ReplaySession {
            system,
            history: VecDeque::new(),
            history_tokens: 0,
        }
    }
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
    /// When its next turn may go: its think time after the last answer (`delay`); `None`: at once.
    ready_at: Option<std::time::Instant>,
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
    Replay {
        guard: OwnedMutexGuard<ReplaySession>,
        /// This turn's prompt as sent (after any truncation).
        prompt: Piece,
        think_s: u32,
        /// Held until the turn ends; dropped after the session's update (declared after `guard`).
        _place: Option<WorkerPlace>,
    },
}

impl Conversations {
    pub fn new(set: ConversationSet, settings: BodySettings) -> Conversations {
        let state = match &set.style {
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
            Style::AiperfConversations {
                sampling,
                session_header,
            } => State::Aiperf(
                Mutex::new(AiperfSampler::new(set.scripts.len(), *sampling)),
                // AIPerf's `--session-header` renames the one correlation header.
                session_header
                    .clone()
                    .unwrap_or_else(|| "X-Correlation-ID".to_owned()),
            ),
            Style::InferencePerfReplay(plan) => {
                let slots = (0..plan.conversations.len() as u32)
                    .map(|c| {
                        Mutex::new(Slot {
                            session: Arc::new(tokio::sync::Mutex::new(ReplaySession::new(Some(
                                system_prompt(plan.as_ref(), 0, c),
                            )))),
                            epoch: 0,
                            system_epoch: 0,
                            header: session_header(
                                plan.session_header.as_ref(),
                                format!("conv_{c}"),
                            ),
                        })
                    })
                    .collect();
                State::Replay(Replay {
                    plan: Arc::clone(plan),
                    shared: Arc::new(ReplayShared::default()),
                    slots,
                })
            }
        };
        let tags_turns = matches!(
            state,
            State::Sessions(_) | State::Replay(_) | State::Aiperf(..)
        ) || set.scripts.iter().any(|s| s.turns.len() > 1);
        Conversations {
            models: match set.style {
                Style::AiperfConversations { .. } => {
                    let starts: Vec<usize> = set
                        .scripts
                        .iter()
                        .scan(0, |start, script| {
                            let this = *start;
                            *start += script.turns.len();
                            Some(this)
                        })
                        .collect();
                    let turns = set.scripts.iter().map(|s| s.turns.len()).sum();
                    AdapterBodies::new(&settings, turns).map(|bodies| (bodies, starts))
                }
                _ => None,
            },
            scripts: set.scripts,
            settings,
            state,
            tags_turns,
        }
    }

    /// Whether each turn names a model of its own (AIPerf's several `--model-names`).
    pub fn has_models(&self) -> bool {
        self.models.is_some()
    }

    /// Whether a conversation has more than one turn.
    pub fn multi_turn(&self) -> bool {
        self.scripts.iter().any(|s| s.turns.len() > 1)
    }

    /// Whether these are AIPerf's sessions, which its own rate loop sends (`engine::aiperf_sessions`).
    pub fn is_aiperf(&self) -> bool {
        matches!(self.state, State::Aiperf(..))
    }

    /// AIPerf: a new session of the sampler's next conversation (`ConversationSource.next`), with a new
    /// correlation id; `None` for the other tools.
    pub fn aiperf_session(&self) -> Option<AiperfSession> {
        let State::Aiperf(sampler, header) = &self.state else {
            return None;
        };
        let (id, script) = {
            let mut sampler = sampler.lock().unwrap_or_else(PoisonError::into_inner);
            let id = sampler.sessions;
            sampler.sessions = sampler.sessions.wrapping_add(1);
            (id, sampler.next())
        };
        Some(AiperfSession {
            id,
            script,
            answers: Vec::new(),
            correlation: Arc::new((header.clone(), uuid4())),
            slot: None,
            turn_limit: None,
        })
    }

    /// How many turns `session` sends: its conversation's, or fewer when limited.
    pub fn aiperf_turns(&self, session: &AiperfSession) -> usize {
        let turns = self
            .scripts
            .get(session.script)
            .map_or(0, |s| s.turns.len());
        session.turn_limit.map_or(turns, |limit| limit.min(turns))
    }

    /// The dataset's mean turns per conversation (`DatasetMetadata.average_turn_count`), 0 for none.
    pub fn aiperf_average_turns(&self) -> f64 {
        if self.scripts.is_empty() {
            return 0.0;
        }
        let total: usize = self.scripts.iter().map(|s| s.turns.len()).sum();
        total as f64 / self.scripts.len() as f64
    }

    /// The think time before `session`'s next turn may be queued (that turn's `delay`), or `None` when its last
    /// turn was sent.
    pub fn aiperf_next_delay(
        &self,
        session: &AiperfSession,
    ) -> Option<Option<std::time::Duration>> {
        if session.answers.len() >= self.aiperf_turns(session) {
            return None;
        }
        let turn = self
            .scripts
            .get(session.script)?
            .turns
            .get(session.answers.len())?;
        Some(turn.delay)
    }

    /// `session`'s next turn (the worker's `advance_turn` and the chat endpoint's `build_messages`): every earlier
    /// user turn, each followed by its answer as an assistant message when it had text, then this turn; tagged
    /// with the session and the turn's index, and carrying the session's correlation header.
    pub fn aiperf_request(&self, session: &AiperfSession) -> (PreparedRequest, TurnOf) {
        let script = &self.scripts[session.script];
        let current = session
            .answers
            .len()
            .min(script.turns.len().saturating_sub(1));
        let turn = &script.turns[current];
        let mut tokens = 0u32;
        let body = match self.settings.api {
            // AIPerf's completions endpoint takes one turn only ("Completions endpoint only supports one
            // turn"): the dialect refuses later turns, so a completion is the turn alone.
            ApiKind::Completion => Body::CompletionText(turn.text.text.clone(), turn.text.tokens),
            // AIPerf has no Responses or Messages endpoint type; a message list is what each would carry.
            // `build_conversations` refuses the pooling APIs, whose requests have one turn.
            ApiKind::Chat
            | ApiKind::Responses
            | ApiKind::Messages
            | ApiKind::Embeddings
            | ApiKind::Rerank => {
                let mut messages = Vec::with_capacity(2 * current + 1);
                for (t, (answer, answer_tokens)) in session.answers.iter().enumerate() {
                    messages.push(message("user", &script.turns[t].text.text));
                    tokens = tokens.saturating_add(script.turns[t].text.tokens);
                    if !answer.is_empty() {
                        messages.push(message("assistant", answer));
                        tokens = tokens.saturating_add(*answer_tokens);
                    }
                }
                messages.push(message("user", &turn.text.text));
                tokens = tokens.saturating_add(turn.text.tokens);
                Body::Chat(messages, tokens)
            }
        };
        let mut request = match &self.models {
            // `_select_model_name`, once per turn as the composer builds it.
            Some((models, starts)) => {
                let place = starts.get(session.script).copied().unwrap_or(0) + current;
                models.prepare(place, |settings| {
                    prepare(&Self::prompt(body, turn.max_tokens), settings)
                })
            }
            None => self.body(body, turn.max_tokens),
        };
        request.header = Some(Arc::clone(&session.correlation));
        (
            request,
            TurnOf {
                id: session.id,
                turn: current as u32,
            },
        )
    }

    /// Ends `session`'s current turn with its record: the record says its session and turn, and the answer's
    /// text (taken out of the record) joins the history — nothing when it failed or had no text
    /// (`build_assistant_turn` returns `None`).
    pub fn aiperf_answered(
        &self,
        session: &mut AiperfSession,
        of: TurnOf,
        record: &mut RequestRecord,
    ) {
        record.conversation = Some(of);
        let text = record.text.take().map(|text| *text).unwrap_or_default();
        let answer = if record.succeeded() {
            text
        } else {
            String::new()
        };
        let tokens = if answer.is_empty() {
            0
        } else {
            record.output_tokens()
        };
        session.answers.push((answer, tokens));
    }

    /// The turn that request `id` (run-wide, in issue order) of stage `stage` sends; `None` when `cancel` fires
    /// first (an inference-perf round waiting for its session's previous round).
    pub async fn begin(&self, id: u64, stage: u32, cancel: &Flag) -> Option<Turn> {
        match &self.state {
            // Sent by AIPerf's own loop (`engine::aiperf_sessions`), turn by turn.
            State::Aiperf(..) => None,
            State::Replay(replay) => self.replay_turn(replay, stage, cancel).await,
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
                    // guidellm's worker (`_get_next_ready_node`): the oldest conversation whose think time is
                    // over, else a new one.
                    let now = std::time::Instant::now();
                    let ready = queue
                        .waiting
                        .iter()
                        .position(|live| live.ready_at.is_none_or(|at| at <= now));
                    match ready.and_then(|i| queue.waiting.remove(i)) {
                        Some(live) => live,
                        None => {
                            let id = queue.next_conversation;
                            queue.next_conversation = queue.next_conversation.wrapping_add(1);
                            Live {
                                id,
                                script: id as usize % self.scripts.len(),
                                answers: Vec::new(),
                                ready_at: None,
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
            Pending::Replay {
                mut guard,
                prompt,
                think_s: _,
                _place: place,
            } => {
                // `update_context`: only a session with a system prompt keeps a history.
                if succeeded && let Some(system) = &guard.system {
                    let limit = u64::from(self.replay_plan().map_or(0, |p| p.max_model_len));
                    let system_tokens = u64::from(system.tokens);
                    let entry = Piece {
                        text: join(&[&prompt.text, answer.trim()]),
                        tokens: prompt.tokens.saturating_add(answer_tokens),
                    };
                    guard.history_tokens += u64::from(entry.tokens);
                    guard.history.push_back(entry);
                    while system_tokens + guard.history_tokens > limit {
                        let Some(old) = guard.history.pop_front() else {
                            break;
                        };
                        guard.history_tokens -= u64::from(old.tokens);
                    }
                }
                // The session lets its next turn go, then the worker its place (upstream's `update_context`,
                // then the semaphore release in `schedule_client`'s `finally`).
                drop(guard);
                drop(place);
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
                    // `DAGExecutionState.mark_completed`: the next turn unlocks its think time after now.
                    live.ready_at = self.scripts[live.script]
                        .think
                        .map(|think| std::time::Instant::now() + think);
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

    /// How long `turn` holds its session (and its request slot) after `record` before the next turn may go:
    /// inference-perf `conversation_replay`'s tool-call latency, slept after a successful answer only.
    pub fn think_time(&self, turn: &Turn, record: &RequestRecord) -> Option<std::time::Duration> {
        match &turn.pending {
            Pending::Replay { think_s, .. } if *think_s > 0 && record.succeeded() => {
                Some(std::time::Duration::from_secs(u64::from(*think_s)))
            }
            _ => None,
        }
    }

    fn replay_plan(&self) -> Option<&ReplayPlan> {
        match &self.state {
            State::Replay(replay) => Some(&replay.plan),
            _ => None,
        }
    }

    /// `load_lazy_data` and `to_request_body` for the next request of `stage`.
    async fn replay_turn(&self, replay: &Replay, stage: u32, cancel: &Flag) -> Option<Turn> {
        let plan = &replay.plan;
        // The request's place in its stage is taken before any wait, so turns queue for their session in
        // issue order, as upstream's requests reach the session lock in queue order.
        let count = plan.conversations.len() as u64;
        let (index, epoch, place) = loop {
            let freed = replay.shared.freed.notified();
            tokio::pin!(freed);
            // Registered before the queues are looked at, so a place freed in between is not missed.
            freed.as_mut().enable();
            {
                let mut cursor = replay
                    .shared
                    .cursor
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                if cursor.stage != Some(stage) {
                    if cursor.stage.is_some() {
                        cursor.epoch += 1;
                    }
                    cursor.stage = Some(stage);
                    cursor.next = 0;
                    cursor.queues = plan
                        .stages
                        .get(stage as usize)
                        .copied()
                        .flatten()
                        .map(|s| WorkerQueues::new(count, plan.workers, s));
                }
                let epoch = cursor.epoch;
                let take = match cursor.queues.as_mut() {
                    Some(queues) => queues.take(),
                    None => Take::UsedUp,
                };
                match take {
                    Take::Index(index, worker) => {
                        let place = WorkerPlace {
                            shared: Arc::clone(&replay.shared),
                            epoch,
                            worker,
                        };
                        break (index, epoch, Some(place));
                    }
                    Take::UsedUp => {
                        let requests = cursor.queues.as_ref().map_or(0, |q| q.requests);
                        let index = cursor.next.max(requests);
                        cursor.next = index + 1;
                        break (index, epoch, None);
                    }
                    Take::Wait => {}
                }
            }
            tokio::select! {
                () = freed => {}
                () = cancel.raised() => return None,
            }
        };
        let c = (index % count) as usize;
        let round = index / count;
        let blueprint = &plan.conversations[c];
        let turn_idx = (round % blueprint.turns.len() as u64) as u32;
        let session = {
            let mut slot = replay.slots[c]
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if slot.epoch != epoch {
                // Cleared at the end of the last stage: re-primed without a system prompt.
                slot.epoch = epoch;
                slot.system_epoch = epoch;
                slot.session = Arc::new(tokio::sync::Mutex::new(ReplaySession::new(None)));
            }
            if turn_idx == 0 && round > 0 {
                slot.session = Arc::new(tokio::sync::Mutex::new(ReplaySession::new(Some(
                    system_prompt(plan, slot.system_epoch, c as u32),
                ))));
                let convo = round / blueprint.turns.len() as u64;
                slot.header = session_header(
                    plan.session_header.as_ref(),
                    format!("slot_{c}_convo_{convo}"),
                );
            }
            (Arc::clone(&slot.session), slot.header.clone())
        };
        let (session, header) = session;
        let mut guard = tokio::select! {
            guard = session.lock_owned() => guard,
            () = cancel.raised() => return None,
        };
        let turn = blueprint.turns[turn_idx as usize];
        let (text, tokens, prompt) = replay_prompt(plan, &mut guard, c as u32, turn_idx, turn);
        let mut request = self.body(Body::CompletionText(text, tokens), Some(turn.max_tokens));
        request.header = header;
        Some(Turn {
            request,
            of: TurnOf {
                id: c as u32,
                turn: turn_idx,
            },
            pending: Pending::Replay {
                guard,
                prompt,
                think_s: turn.think_s,
                _place: place,
            },
        })
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
            inputs: 0,
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
            ignore_eos: false,
            finish_reason: None,
            request_id: None,
            traceparent: None,
            adapter: None,
            images: None,
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
            // The turns as messages; `prepare` writes them in the API's shape. (`build_conversations` refuses
            // the pooling APIs, whose requests have one turn.)
            ApiKind::Chat
            | ApiKind::Responses
            | ApiKind::Messages
            | ApiKind::Embeddings
            | ApiKind::Rerank => {
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
        prepare(&Self::prompt(body, max_tokens), &self.settings)
    }

    fn prompt(body: Body<'_>, max_tokens: Option<u32>) -> Prompt {
        match body {
            Body::Completion(piece) => Prompt::text(piece.text.clone(), piece.tokens, max_tokens),
            Body::CompletionText(text, tokens) => Prompt::text(text, tokens, max_tokens),
            Body::Chat(messages, tokens) => {
                let mut prompt = Prompt::text(String::new(), tokens, max_tokens);
                prompt.messages = Some(messages);
                prompt
            }
        }
    }
}

/// The system prompt a new session of conversation `c` starts with: the shared prompt of `epoch` and the
/// conversation's dynamic prompt (`_build_system_prompt`).
fn system_prompt(plan: &ReplayPlan, epoch: u32, c: u32) -> SystemPrompt {
    SystemPrompt {
        epoch,
        conversation: c,
        tokens: plan
            .shared_tokens
            .saturating_add(plan.conversations[c as usize].dynamic_tokens),
        text: None,
    }
}

/// The first `system.tokens` tokens of the system prompt: the shared prompt's, then the dynamic prompt's.
fn system_text(plan: &ReplayPlan, system: &SystemPrompt) -> String {
    let shared = system.tokens.min(plan.shared_tokens);
    let dynamic = system.tokens - shared;
    join(&[
        &plan.text(
            ReplayText::Shared {
                epoch: system.epoch,
            },
            shared,
        ),
        &plan.text(
            ReplayText::Dynamic {
                conversation: system.conversation,
            },
            dynamic,
        ),
    ])
}

/// `UserSessionCompletionAPIData.to_request_body` for turn `t` of conversation `c`: the prompt text and its
/// tokens, and the turn's own prompt as sent. Truncates the session as upstream does (see [`Replay`]).
fn replay_prompt(
    plan: &ReplayPlan,
    session: &mut ReplaySession,
    c: u32,
    t: u32,
    turn: ReplayTurn,
) -> (String, u32, Piece) {
    let target = i64::from(plan.max_model_len) - i64::from(turn.max_tokens) - 200;
    let mut current = turn.input_tokens;
    let total = |s: &ReplaySession, current: u32| {
        s.system.as_ref().map_or(0, |p| i64::from(p.tokens))
            + s.history_tokens as i64
            + i64::from(current)
    };
    if total(session, current) > target {
        while total(session, current) > target {
            let Some(old) = session.history.pop_front() else {
                break;
            };
            session.history_tokens -= u64::from(old.tokens);
        }
        if total(session, current) > target {
            let available = target - i64::from(current);
            match session.system.as_mut() {
                Some(system) if available > 0 => {
                    // `system_ids[:available_for_system]`, kept as the session's system prompt.
                    system.tokens = available as u32;
                    system.text = None;
                }
                _ => {
                    // No room for a system prompt: it is dropped for good and the prompt cut to the target.
                    session.system = None;
                    current = target.max(0) as u32;
                }
            }
        }
    }
    let prompt = Piece {
        text: plan.text(
            ReplayText::Turn {
                conversation: c,
                turn: t,
            },
            current,
        ),
        tokens: current,
    };
    let mut tokens = prompt.tokens;
    let system = match session.system.as_mut() {
        Some(system) => {
            tokens = tokens.saturating_add(system.tokens);
            if system.text.is_none() {
                system.text = Some(system_text(plan, system));
            }
            system.text.as_deref()
        }
        None => None,
    };
    let mut parts: Vec<&str> = Vec::with_capacity(session.history.len() + 2);
    parts.extend(system);
    for entry in &session.history {
        parts.push(&entry.text);
        tokens = tokens.saturating_add(entry.tokens);
    }
    parts.push(&prompt.text);
    (join(&parts), tokens, prompt)
}

enum Body<'a> {
    Completion(&'a Piece),
    CompletionText(String, u32),
    Chat(Vec<ChatMessage>, u32),
}

/// A random version-4 UUID, as AIPerf's `str(uuid.uuid4())` makes each session's correlation id.
fn uuid4() -> String {
    let bits: u128 = rand::random();
    let bits = (bits & !(0xf << 76) & !(0x3 << 62)) | (0x4 << 76) | (0x2 << 62);
    let hex = format!("{bits:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
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

    use llmbench_workload::conversations::UserTurn;
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
                    delay: None,
                })
                .collect(),
            think: None,
        }
    }

    fn settings(api: ApiKind) -> BodySettings {
        BodySettings {
            model: "m".to_owned(),
            api,
            streaming: true,
            ignore_eos: true,
            default_max_tokens: None,
            style: llmbench_workload::request::BodyStyle::InferencePerf,
            extra_body: Default::default(),
            logprobs: None,
            inputs_per_request: 1,
            lora: None,
            rankings: None,
        }
    }

    fn body(turn: &Turn) -> Value {
        serde_json::from_slice(&turn.request.body).expect("json")
    }

    /// A finished record for `turn` whose answer was `answer` (or a failure).
    pub(super) fn answered(turn: &Turn, answer: Option<&str>) -> RequestRecord {
        let mut record = RequestRecord::builder(0)
            .end(10)
            .input_tokens(turn.request.input_tokens)
            .status(if answer.is_some() { 200 } else { 500 });
        if let Some(max_tokens) = turn.request.max_tokens {
            record = record.max_tokens(max_tokens);
        }
        if let Some(a) = answer {
            record = record
                .usage(
                    turn.request.input_tokens,
                    a.split_whitespace().count() as u32,
                )
                .text(a);
        }
        record.build()
    }

    #[test]
    fn an_aiperf_session_carries_every_earlier_user_turn_and_the_answers_that_had_text() {
        let set = ConversationSet {
            style: Style::AiperfConversations {
                sampling: AiperfSampling::Sequential,
                session_header: None,
            },
            scripts: vec![
                script(None, &["zero one", "zero two", "zero three"]),
                script(None, &["one one"]),
            ],
        };
        let conversations = Conversations::new(set, settings(ApiKind::Chat));
        let mut session = conversations.aiperf_session().expect("an AIPerf session");
        assert_eq!(conversations.aiperf_turns(&session), 3);
        let (first, of) = conversations.aiperf_request(&session);
        assert_eq!(of, TurnOf { id: 0, turn: 0 });
        let header = first.header.clone().expect("a correlation header");
        assert_eq!(header.0, "X-Correlation-ID");
        assert_eq!(header.1.len(), 36);
        let turn = |request: &PreparedRequest| -> Value {
            serde_json::from_slice(&request.body).expect("json")
        };
        assert_eq!(
            turn(&first)["messages"],
            json!([{"role": "user", "content": "zero one"}])
        );
        let mut record = RequestRecord::builder(0)
            .end(10)
            .status(200)
            .usage(2, 3)
            .text("an answer here")
            .build();
        conversations.aiperf_answered(&mut session, of, &mut record);
        assert_eq!(record.conversation, Some(of));
        assert!(record.text.is_none(), "the answer moves into the session");
        let (second, of) = conversations.aiperf_request(&session);
        assert_eq!(of, TurnOf { id: 0, turn: 1 });
        assert_eq!(
            second.header, first.header,
            "one correlation id per session"
        );
        assert_eq!(second.input_tokens, 2 + 3 + 2);
        // A failed turn stays in the history without an answer.
        let mut failed = RequestRecord::builder(0).end(10).status(500).build();
        conversations.aiperf_answered(&mut session, of, &mut failed);
        let (third, _) = conversations.aiperf_request(&session);
        assert_eq!(
            turn(&third)["messages"],
            json!([
                {"role": "user", "content": "zero one"},
                {"role": "assistant", "content": "an answer here"},
                {"role": "user", "content": "zero two"},
                {"role": "user", "content": "zero three"},
            ])
        );
        assert_eq!(conversations.aiperf_next_delay(&session), Some(None));
        // The sequential sampler: the next session takes the next conversation, then wraps.
        let next = conversations.aiperf_session().expect("a session");
        assert_eq!(conversations.aiperf_turns(&next), 1);
        assert_ne!(next.correlation, session.correlation);
        let wrapped = conversations.aiperf_session().expect("a session");
        assert_eq!(conversations.aiperf_turns(&wrapped), 3);
    }

    #[tokio::test]
    async fn guidellm_chat_turns_carry_the_prefix_the_user_turns_and_the_actual_answers() {
        let set = ConversationSet {
            style: Style::GuidellmTurns,
            scripts: vec![script(Some("be brief"), &["hello there", "and then"])],
        };
        let conversations = Conversations::new(set, settings(ApiKind::Chat));
        let cancel = Flag::default();
        let first = conversations.begin(0, 0, &cancel).await.expect("turn");
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

        let second = conversations.begin(1, 0, &cancel).await.expect("turn");
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
        let third = conversations.begin(2, 0, &cancel).await.expect("turn");
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
        let first = conversations.begin(0, 0, &cancel).await.expect("turn");
        assert_eq!(body(&first)["prompt"], "sys a b");
        let mut record = answered(&first, Some("x y z"));
        conversations.finish(first, &mut record, false, 0);
        let second = conversations.begin(1, 0, &cancel).await.expect("turn");
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
        let first = conversations.begin(0, 0, &cancel).await.expect("turn");
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
        let next = conversations.begin(1, 0, &cancel).await.expect("turn");
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
        let r0 = conversations.begin(0, 0, &cancel).await.expect("turn");
        assert_eq!(body(&r0)["prompt"], "p q p q question one");
        assert_eq!(r0.of, TurnOf { id: 0, turn: 0 });
        assert_eq!(r0.request.input_tokens, 6);
        let mut rec = answered(&r0, Some("fine thanks"));
        conversations.finish(r0, &mut rec, false, 0);
        // Request 1 is user 1's first round.
        let r1 = conversations.begin(1, 0, &cancel).await.expect("turn");
        assert_eq!(r1.of, TurnOf { id: 1, turn: 0 });
        let mut rec = answered(&r1, None);
        conversations.finish(r1, &mut rec, false, 0);
        // Request 2: user 0's second round carries the first round and its answer.
        let r2 = conversations.begin(2, 0, &cancel).await.expect("turn");
        assert_eq!(
            body(&r2)["prompt"],
            "p q p q question one fine thanks p q question one"
        );
        assert_eq!(r2.request.input_tokens, 6 + 2 + 4);
        // Request 3: user 1's failed round left its context as it was.
        let mut rec = answered(&r2, Some("ok"));
        conversations.finish(r2, &mut rec, false, 0);
        let r3 = conversations.begin(3, 0, &cancel).await.expect("turn");
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
            .begin(0, 0, control.in_flight())
            .await
            .expect("turn");
        let waiting = {
            let conversations = Arc::clone(&conversations);
            let control = control.clone();
            tokio::spawn(async move {
                conversations
                    .begin(1, 0, control.in_flight())
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
            .begin(2, 0, control.in_flight())
            .await
            .expect("turn");
        let blocked = {
            let conversations = Arc::clone(&conversations);
            let control = control.clone();
            tokio::spawn(async move {
                conversations
                    .begin(3, 0, control.in_flight())
                    .await
                    .is_none()
            })
        };
        control.stop_now(crate::engine::StopReason::RecordsUnwritable);
        assert!(blocked.await.expect("joins"));
    }
}

/// inference-perf `conversation_replay` sessions, worked by hand on tiny plans.
#[cfg(test)]
mod replay_tests {
    use super::*;

    use llmbench_workload::conversations::{Blueprint, WordBank};
    use serde_json::Value;

    /// Two conversations of three turns: conversation 0 has a 1-token dynamic prompt and turns of 3, 1 and 2
    /// tokens; conversation 1 a 2-token one and turns of 2, 2 and 1. The shared prompt is 2 tokens.
    fn plan(max_model_len: u32, think_s: u32) -> Arc<ReplayPlan> {
        let turn = |input_tokens| ReplayTurn {
            input_tokens,
            max_tokens: 4,
            think_s,
        };
        let words = [
            "alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta",
        ]
        .iter()
        .map(|w| (Box::from(*w), Box::from(format!(" {w}"))))
        .collect();
        Arc::new(ReplayPlan {
            words: WordBank::new(words),
            seed: 7,
            shared_tokens: 2,
            max_model_len,
            conversations: vec![
                Blueprint {
                    dynamic_tokens: 1,
                    turns: vec![turn(3), turn(1), turn(2)],
                },
                Blueprint {
                    dynamic_tokens: 2,
                    turns: vec![turn(2), turn(2), turn(1)],
                },
            ],
            workers: 1,
            stages: Vec::new(),
            session_header: None,
        })
    }

    fn conversations(plan: &Arc<ReplayPlan>) -> Conversations {
        Conversations::new(
            ConversationSet {
                style: Style::InferencePerfReplay(Arc::clone(plan)),
                scripts: Vec::new(),
            },
            BodySettings {
                model: "m".to_owned(),
                api: ApiKind::Completion,
                streaming: true,
                ignore_eos: true,
                default_max_tokens: None,
                style: llmbench_workload::request::BodyStyle::InferencePerf,
                extra_body: Default::default(),
                logprobs: None,
                inputs_per_request: 1,
                lora: None,
                rankings: None,
            },
        )
    }

    fn shared(plan: &ReplayPlan, epoch: u32, n: u32) -> String {
        plan.text(ReplayText::Shared { epoch }, n)
    }
    fn dynamic(plan: &ReplayPlan, c: u32) -> String {
        let n = plan.conversations[c as usize].dynamic_tokens;
        plan.text(ReplayText::Dynamic { conversation: c }, n)
    }
    fn user(plan: &ReplayPlan, c: u32, t: u32) -> String {
        let n = plan.conversations[c as usize].turns[t as usize].input_tokens;
        plan.text(
            ReplayText::Turn {
                conversation: c,
                turn: t,
            },
            n,
        )
    }

    fn prompt(turn: &Turn) -> String {
        let body: Value = serde_json::from_slice(&turn.request.body).expect("json");
        body["prompt"]
            .as_str()
            .expect("a completion prompt")
            .to_owned()
    }

    use super::tests::answered as answer;

    /// Sends the next request of `stage`, answers it with `text` (a failure when `None`) and returns what was
    /// sent: its conversation and turn, its prompt and its token count.
    async fn step(
        c: &Conversations,
        stage: u32,
        text: Option<&str>,
    ) -> (TurnOf, String, u32, Option<std::time::Duration>) {
        let turn = c.begin(0, stage, &Flag::default()).await.expect("turn");
        let sent = (turn.of, prompt(&turn), turn.request.input_tokens);
        assert_eq!(turn.request.max_tokens, Some(4));
        let mut record = answer(&turn, text);
        let think = c.think_time(&turn, &record);
        assert!(c.finish(turn, &mut record, false, 0).is_empty());
        (sent.0, sent.1, sent.2, think)
    }

    fn of(id: u32, turn: u32) -> TurnOf {
        TurnOf { id, turn }
    }

    #[tokio::test]
    async fn turns_interleave_the_conversations_and_carry_the_actual_answers() {
        let p = plan(1_000_000, 0);
        let c = conversations(&p);
        let system0 = join(&[&shared(&p, 0, 2), &dynamic(&p, 0)]);
        let system1 = join(&[&shared(&p, 0, 2), &dynamic(&p, 1)]);
        // Request i of the stage is turn (i div 2) mod 3 of conversation i mod 2.
        let r0 = step(&c, 0, Some("one two")).await;
        assert_eq!(r0.0, of(0, 0));
        assert_eq!(r0.1, join(&[&system0, &user(&p, 0, 0)]));
        assert_eq!(r0.2, 2 + 1 + 3);
        let r1 = step(&c, 0, Some("three")).await;
        assert_eq!(r1.0, of(1, 0));
        assert_eq!(r1.1, join(&[&system1, &user(&p, 1, 0)]));
        assert_eq!(r1.2, 2 + 2 + 2);
        // Conversation 0's second turn: system prompt, turn 0 and its answer, turn 1.
        let r2 = step(&c, 0, Some("four five six")).await;
        assert_eq!(r2.0, of(0, 1));
        assert_eq!(
            r2.1,
            join(&[&system0, &user(&p, 0, 0), "one two", &user(&p, 0, 1)])
        );
        assert_eq!(r2.2, 6 + 2 + 1);
        // Conversation 1's second turn fails: its history stays as it was for the third.
        let r3 = step(&c, 0, None).await;
        assert_eq!(r3.0, of(1, 1));
        assert_eq!(
            r3.1,
            join(&[&system1, &user(&p, 1, 0), "three", &user(&p, 1, 1)])
        );
        let r4 = step(&c, 0, Some("x")).await;
        assert_eq!(r4.0, of(0, 2));
        assert_eq!(
            r4.1,
            join(&[
                &system0,
                &user(&p, 0, 0),
                "one two",
                &user(&p, 0, 1),
                "four five six",
                &user(&p, 0, 2)
            ])
        );
        assert_eq!(r4.2, 9 + 3 + 2);
        let r5 = step(&c, 0, Some("y")).await;
        assert_eq!(r5.0, of(1, 2));
        assert_eq!(
            r5.1,
            join(&[&system1, &user(&p, 1, 0), "three", &user(&p, 1, 2)])
        );
        // Request 6: conversation 0 has run its three turns and starts again, fresh, with the same prompts.
        let r6 = step(&c, 0, Some("z")).await;
        assert_eq!(r6.0, of(0, 0));
        assert_eq!(r6.1, r0.1);
    }

    #[tokio::test]
    async fn a_later_stage_restarts_the_count_and_its_reprimed_sessions_send_the_turn_alone() {
        let p = plan(1_000_000, 0);
        let c = conversations(&p);
        // Stage 0 stops after 3 requests, in the middle of both conversations.
        for _ in 0..3 {
            step(&c, 0, Some("a b")).await;
        }
        // Stage 1 counts from 0 again: conversation 0, turn 0, in a session re-primed without a system prompt
        // (upstream `load_lazy_data` after `clear_instances`): the turn's prompt alone, no history kept.
        let r0 = step(&c, 1, Some("kept nowhere")).await;
        assert_eq!(
            (r0.0, r0.1.as_str(), r0.2),
            (of(0, 0), user(&p, 0, 0).as_str(), 3)
        );
        let r1 = step(&c, 1, Some("b")).await;
        assert_eq!((r1.0, r1.1.as_str()), (of(1, 0), user(&p, 1, 0).as_str()));
        let r2 = step(&c, 1, Some("c")).await;
        assert_eq!(
            (r2.0, r2.1.as_str(), r2.2),
            (of(0, 1), user(&p, 0, 1).as_str(), 1)
        );
        for _ in 0..3 {
            step(&c, 1, Some("d")).await;
        }
        // Request 6 restarts conversation 0 as a new session, whose system prompt has stage 1's shared prompt.
        let r6 = step(&c, 1, Some("e")).await;
        assert_eq!(r6.0, of(0, 0));
        assert_eq!(
            r6.1,
            join(&[&shared(&p, 1, 2), &dynamic(&p, 0), &user(&p, 0, 0)])
        );
        assert_ne!(
            shared(&p, 1, 2),
            shared(&p, 0, 2),
            "a new shared prompt per stage"
        );
    }

    /// `user_session_id` as conversation_replay_datagen.py names it: `conv_{c}` for a slot's first conversation,
    /// `slot_{c}_convo_{n}` when it restarts for the n-th time; a later stage's re-primed session keeps its id.
    #[tokio::test]
    async fn session_ids_follow_upstreams_naming_through_restarts_and_stages() {
        let mut with_header = Arc::try_unwrap(plan(1_000_000, 0)).expect("a fresh plan");
        with_header.session_header = Some("x-session-id".to_owned());
        let p = Arc::new(with_header);
        let c = conversations(&p);
        let next = async |stage: u32| {
            let turn = c.begin(0, stage, &Flag::default()).await.expect("turn");
            let header = turn.request.header.clone().expect("a session header");
            assert_eq!(header.0, "x-session-id");
            let mut record = answer(&turn, Some("a"));
            assert!(c.finish(turn, &mut record, false, 0).is_empty());
            header.1.clone()
        };
        // 2 conversations of 3 turns: requests 0-5 are the first conversations, 6-11 the second, 12 the third.
        let mut ids = Vec::new();
        for _ in 0..13 {
            ids.push(next(0).await);
        }
        assert_eq!(
            ids,
            [
                "conv_0",
                "conv_1",
                "conv_0",
                "conv_1",
                "conv_0",
                "conv_1",
                "slot_0_convo_1",
                "slot_1_convo_1",
                "slot_0_convo_1",
                "slot_1_convo_1",
                "slot_0_convo_1",
                "slot_1_convo_1",
                "slot_0_convo_2",
            ]
        );
        // Stage 1 counts from 0: round 0 keeps each slot's last id (upstream re-primes `expected_session_id`).
        assert_eq!(next(1).await, "slot_0_convo_2");
        assert_eq!(next(1).await, "slot_1_convo_1");
        let plain = conversations(&plan(1_000_000, 0));
        let turn = plain.begin(0, 0, &Flag::default()).await.expect("turn");
        assert!(turn.request.header.is_none(), "no key, no header");
    }

    #[tokio::test]
    async fn think_time_follows_a_successful_answer_only() {
        let p = plan(1_000_000, 3);
        let c = conversations(&p);
        assert_eq!(
            step(&c, 0, Some("ok")).await.3,
            Some(std::time::Duration::from_secs(3))
        );
        assert_eq!(step(&c, 0, None).await.3, None);
        let none = plan(1_000_000, 0);
        assert_eq!(step(&conversations(&none), 0, Some("ok")).await.3, None);
    }

    #[tokio::test]
    async fn the_next_turn_of_a_conversation_waits_for_the_previous_one() {
        let p = plan(1_000_000, 0);
        let c = Arc::new(conversations(&p));
        let cancel = Flag::default();
        let first = c.begin(0, 0, &cancel).await.expect("turn");
        // Request 1 (conversation 1) does not wait; request 2 (conversation 0, turn 1) does.
        let other = c.begin(1, 0, &cancel).await.expect("turn");
        assert_eq!(other.of, of(1, 0));
        let waiting = {
            let c = Arc::clone(&c);
            tokio::spawn(async move {
                c.begin(2, 0, &Flag::default())
                    .await
                    .map(|t| (t.of, prompt(&t)))
            })
        };
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert!(!waiting.is_finished(), "turn 1 waits for turn 0's answer");
        let mut record = answer(&first, Some("late answer"));
        c.finish(first, &mut record, false, 0);
        let (turn, text) = waiting.await.expect("joins").expect("turn");
        assert_eq!(turn, of(0, 1));
        assert!(text.contains(" late answer "), "{text}");
    }

    /// `max_model_len` 214 and `max_tokens` 4 leave 214 − 4 − 200 = 10 tokens for a prompt.
    #[tokio::test]
    async fn an_overlong_prompt_drops_the_oldest_history_then_cuts_the_system_prompt() {
        let p = plan(214, 0);
        let c = conversations(&p);
        let system0 = join(&[&shared(&p, 0, 2), &dynamic(&p, 0)]);
        // Conversation 0, turn 0: 3 + 3 = 6 tokens; its answer makes a 5-token history entry.
        assert_eq!(step(&c, 0, Some("a b")).await.2, 6);
        step(&c, 0, Some("q")).await;
        // Turn 1: 3 + 5 + 1 = 9 ≤ 10; its 3-token answer makes a 4-token entry.
        assert_eq!(step(&c, 0, Some("c d e")).await.2, 9);
        step(&c, 0, Some("q")).await;
        // Turn 2: 3 + 5 + 4 + 2 = 14 > 10: the oldest entry goes, leaving 3 + 4 + 2 = 9.
        let r = step(&c, 0, Some("f")).await;
        assert_eq!(r.0, of(0, 2));
        assert_eq!(
            r.1,
            join(&[&system0, &user(&p, 0, 1), "c d e", &user(&p, 0, 2)])
        );
        assert_eq!(r.2, 9);

        // One turn of `input` tokens after a 3-token system prompt.
        let single = |input_tokens| {
            Arc::new(ReplayPlan {
                words: WordBank::new(vec![("w".into(), " w".into()), ("v".into(), " v".into())]),
                seed: 7,
                shared_tokens: 2,
                max_model_len: 214,
                conversations: vec![Blueprint {
                    dynamic_tokens: 1,
                    turns: vec![ReplayTurn {
                        input_tokens,
                        max_tokens: 4,
                        think_s: 0,
                    }],
                }],
                workers: 1,
                stages: Vec::new(),
                session_header: None,
            })
        };
        // 9 tokens, no history to drop: the system prompt keeps its first 10 − 9 = 1 token, for good.
        let nine = single(9);
        let c = conversations(&nine);
        let r = step(&c, 0, Some("a")).await;
        assert_eq!(r.1, join(&[&shared(&nine, 0, 1), &user(&nine, 0, 0)]));
        assert_eq!(r.2, 10);
        // The conversation restarts as a new session, with its whole system prompt again (then cut again).
        let r = step(&c, 0, Some("a")).await;
        assert_eq!(r.2, 10);
        // 12 tokens: no room for a system prompt at all; it is dropped and the turn cut to its first 10 tokens.
        let twelve = single(12);
        let r = step(&conversations(&twelve), 0, Some("a")).await;
        let cut = twelve.text(
            ReplayText::Turn {
                conversation: 0,
                turn: 0,
            },
            10,
        );
        assert!(user(&twelve, 0, 0).starts_with(&cut));
        assert_eq!((r.1, r.2), (cut, 10));
    }

    /// `_set_worker_concurrency`: `N div W` each, one more for the first `N mod W`; only `min(W, N)` workers
    /// get requests.
    #[test]
    fn worker_shares_follow_upstreams_split() {
        let caps = |n, w| {
            WorkerQueues::new(
                40,
                w,
                ReplayStage {
                    requests: 100,
                    concurrency: n,
                },
            )
            .capacity
        };
        assert_eq!(caps(10, 8), vec![2, 2, 1, 1, 1, 1, 1, 1]);
        assert_eq!(caps(5, 8), vec![1; 5]);
        assert_eq!(caps(32, 6), vec![6, 6, 5, 5, 5, 5]);
        // 40 conversations over 5 workers: worker 0 has conversations 0, 5, …, 35, in index order.
        let mut q = WorkerQueues::new(
            40,
            8,
            ReplayStage {
                requests: 100,
                concurrency: 5,
            },
        );
        assert_eq!(q.next, vec![0, 1, 2, 3, 4]);
        assert_eq!(q.first_from(1, 0), 5);
        assert_eq!(q.first_from(36, 0), 40);
        assert_eq!(q.first_from(96, 0), 100, "used up at num_requests");
        for expected in [0, 1, 2, 3, 4] {
            assert!(
                matches!(q.take(), Take::Index(i, w) if i == expected && w == expected as usize)
            );
        }
        assert!(matches!(q.take(), Take::Wait), "every worker is full");
    }

    /// Four conversations on two workers, one request each at a time: worker 0 has conversations 0 and 2,
    /// worker 1 has 1 and 3. When conversation 1's turn ends, worker 1's next request is index 3 (conversation
    /// 3), not index 2, which waits for worker 0.
    #[tokio::test]
    async fn a_freed_place_takes_the_next_request_of_its_own_worker() {
        let base = plan(1_000_000, 0);
        let p = Arc::new(ReplayPlan {
            words: WordBank::new(vec![("w".into(), " w".into())]),
            seed: 1,
            shared_tokens: 1,
            max_model_len: 1_000_000,
            conversations: vec![base.conversations[0].clone(); 4],
            workers: 2,
            stages: vec![Some(ReplayStage {
                requests: 8,
                concurrency: 2,
            })],
            session_header: None,
        });
        let c = Arc::new(conversations(&p));
        let cancel = Flag::default();
        let a = c.begin(0, 0, &cancel).await.expect("turn");
        let b = c.begin(1, 0, &cancel).await.expect("turn");
        assert_eq!((a.of, b.of), (of(0, 0), of(1, 0)));
        let third = {
            let c = Arc::clone(&c);
            tokio::spawn(async move { c.begin(2, 0, &Flag::default()).await.map(|t| t.of) })
        };
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert!(!third.is_finished(), "both workers are full");
        let mut record = answer(&b, Some("x"));
        c.finish(b, &mut record, false, 0);
        assert_eq!(third.await.expect("joins"), Some(of(3, 0)));
        let mut record = answer(&a, Some("x"));
        c.finish(a, &mut record, false, 0);
        let fourth = c.begin(3, 0, &cancel).await.expect("turn");
        assert_eq!(fourth.of, of(2, 0));
    }
}
