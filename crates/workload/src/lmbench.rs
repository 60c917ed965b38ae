//! LMCache's LMBenchmark multi-round QA (`synthetic-multi-round-qa/multi-round-qa.py` at LMCache/LMBenchmark
//! a306df2, the `lmcache/lmcache-benchmark` image fmperf's `LMBenchmarkWorkload` ran until llm-d-benchmark dropped
//! fmperf), as a pure state machine: which user asks which question at each step, and the summary CSV it writes.
//!
//! Upstream's main loop calls `UserSessionManager.step(time.time())` and then sleeps 0.1 s, until `--time` seconds
//! have passed; [`Manager::step`] is that step, taking seconds since the phase began and returning the requests to
//! launch. The rules, all from `multi-round-qa.py`:
//!
//! - each user asks a question every `gap = num_users / qps` seconds (strictly more than `gap` after its previous
//!   launch, and only once the previous answer is in), for `num_rounds` questions;
//! - users join `gap_between_users = gap · (num_rounds − 1) / num_users` apart while fewer than `num_users` are
//!   active; at the first step, `num_users` users are created "mid-session" (`_ramp_up`): user i pretends to be
//!   `ramp_up_time − i · gap_between_users` seconds into its session, so it has already "asked"
//!   `⌊offset/gap⌋ + 1` questions and asks its next one `gap` after its last pretended one;
//! - a user's first request carries the system prompt (`system_prompt_len` × "hi", shared by every user) and
//!   its own context (`user_info_len` × "hi" after "For user {id}"), then every request carries the whole chat
//!   history with the server's actual answers;
//! - a request that fails never calls back, so its user keeps an unfinished request and never asks again
//!   (`_on_request_finished` runs only on success); it also never leaves the active set.
//!
//! Upstream also sends `x-user-id: {id}` on every question; so does llmbench (the engine's `lmbench` module).

use std::fmt::Write as _;

/// One `multi-round-qa.py` invocation's workload (`WorkloadConfig` plus `--time` and `--init-user-id`).
#[derive(Debug, Clone, PartialEq)]
pub struct SessionConfig {
    pub num_users: u32,
    pub num_rounds: u32,
    /// `--qps`, requests per second over all users.
    pub qps: f64,
    /// `--shared-system-prompt`: words of "hi" in the prompt every user shares.
    pub system_prompt_len: u32,
    /// `--user-history-prompt`: words of "hi" in each user's own context.
    pub user_info_len: u32,
    /// `--answer-len`: `max_tokens` of every request.
    pub answer_len: u32,
    /// `--init-user-id`: the first user created gets this plus one.
    pub init_user_id: u64,
    /// `--time`: seconds the step loop runs.
    pub time: u64,
}

/// A chat message of a user's history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub role: Role,
    pub content: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    User,
    Assistant,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

/// A request the step decided to send: user `user_id`'s history, ending with its new question.
#[derive(Debug, Clone, PartialEq)]
pub struct Launch {
    pub user_id: u64,
    /// The question's number (`question_id` after the increment), for logs.
    pub question: u32,
    pub messages: Vec<Message>,
    pub max_tokens: u32,
}

/// One answered request, as `UserSession._update_result` keeps it (times in seconds on the caller's clock).
#[derive(Debug, Clone, PartialEq)]
pub struct Answered {
    pub prompt_tokens: u64,
    pub generation_tokens: u64,
    pub ttft: f64,
    pub generation_time: f64,
    pub launch_time: f64,
    pub finish_time: f64,
}

#[derive(Debug)]
struct User {
    id: u64,
    question_id: u32,
    last_request_time: Option<f64>,
    unfinished: bool,
    finished: bool,
    history: Vec<Message>,
    results: Vec<Answered>,
}

/// `UserSessionManager` with its users.
#[derive(Debug)]
pub struct Manager {
    config: SessionConfig,
    gap_per_user: f64,
    gap_between_users: f64,
    ramp_up_time: f64,
    user_id: u64,
    /// Upstream starts at 0 on the epoch clock, so the first step always passes the join check; −∞ here.
    last_user_join: f64,
    users: Vec<User>,
    need_ramp_up: bool,
    start_time: Option<f64>,
    /// Summaries of removed users, in removal order (`session_summaries`).
    done: Vec<(u64, Vec<Answered>)>,
}

impl Manager {
    /// `UserSessionManager.__init__`, with the float arithmetic in upstream's order so the ramp-up's
    /// `int(offset / gap)` lands where Python's does.
    pub fn new(config: SessionConfig) -> Manager {
        let gap_per_user = f64::from(config.num_users) / config.qps;
        let session_alive_time = gap_per_user * f64::from(config.num_rounds.saturating_sub(1));
        let gap_between_users = session_alive_time / f64::from(config.num_users);
        let ramp_up_time = f64::from(config.num_users) * gap_between_users;
        Manager {
            user_id: config.init_user_id,
            config,
            gap_per_user,
            gap_between_users,
            ramp_up_time,
            last_user_join: f64::NEG_INFINITY,
            users: Vec::new(),
            need_ramp_up: true,
            start_time: None,
            done: Vec::new(),
        }
    }

    /// `UserSessionManager.step(now)`: the requests to launch now, in user order.
    pub fn step(&mut self, now: f64) -> Vec<Launch> {
        if self.need_ramp_up {
            self.ramp_up(now);
        }
        if self.start_time.is_none() {
            self.start_time = Some(now);
        }
        if now - self.last_user_join > self.gap_between_users
            && self.users.len() < self.config.num_users as usize
        {
            self.create_user();
            self.last_user_join = now;
        }
        let mut launches = Vec::new();
        for index in 0..self.users.len() {
            if let Some(launch) = self.step_user(index, now) {
                launches.push(launch);
            }
        }
        // `_remove_finished_sessions`: their results move to the summaries, in list order.
        let (finished, active): (Vec<User>, Vec<User>) = std::mem::take(&mut self.users)
            .into_iter()
            .partition(|u| u.finished);
        self.users = active;
        self.done
            .extend(finished.into_iter().map(|u| (u.id, u.results)));
        launches
    }

    fn ramp_up(&mut self, now: f64) {
        for i in 0..self.config.num_users {
            let index = self.create_user();
            let offset = self.ramp_up_time - f64::from(i) * self.gap_between_users;
            if offset < 0.0 {
                break;
            }
            // `set_internal_state(offset, timestamp)`.
            let passed = (offset / self.gap_per_user).trunc() + 1.0;
            let passed_time = (passed - 1.0) * self.gap_per_user;
            let user = &mut self.users[index];
            user.last_request_time = Some(now - offset + passed_time);
            user.question_id = passed as u32;
        }
        self.need_ramp_up = false;
    }

    fn create_user(&mut self) -> usize {
        self.user_id += 1;
        self.users.push(User {
            id: self.user_id,
            question_id: 0,
            last_request_time: None,
            unfinished: false,
            finished: false,
            history: Vec::new(),
            results: Vec::new(),
        });
        self.users.len() - 1
    }

    /// `UserSession.step`.
    fn step_user(&mut self, index: usize, now: f64) -> Option<Launch> {
        let rounds = self.config.num_rounds;
        let gap = self.gap_per_user;
        let user = &mut self.users[index];
        if user.question_id >= rounds && !user.unfinished {
            user.finished = true;
            return None;
        }
        let due = match user.last_request_time {
            None => true,
            Some(last) => now - last > gap && !user.unfinished,
        };
        if !due {
            return None;
        }
        // `_launch_new_request`.
        user.question_id += 1;
        let mut prompt = question(user.question_id);
        if user.history.is_empty() {
            prompt = system_prompt(
                self.config.system_prompt_len,
                self.config.user_info_len,
                user.id,
            ) + &prompt;
        }
        user.history.push(Message {
            role: Role::User,
            content: prompt,
        });
        user.unfinished = true;
        user.last_request_time = Some(now);
        Some(Launch {
            user_id: user.id,
            question: user.question_id,
            messages: user.history.clone(),
            max_tokens: self.config.answer_len,
        })
    }

    /// `_on_request_finished`: the answer joins the user's history and its figures its results. A user that is
    /// gone (it cannot be: a user with a request in flight is never finished) is ignored.
    pub fn answered(&mut self, user_id: u64, body: String, result: Answered) {
        if let Some(user) = self.users.iter_mut().find(|u| u.id == user_id) {
            user.history.push(Message {
                role: Role::Assistant,
                content: body,
            });
            user.unfinished = false;
            user.results.push(result);
        }
    }

    /// Users currently in the active set.
    #[cfg(test)]
    fn active_users(&self) -> usize {
        self.users.len()
    }

    /// When the first step ran (`start_time`).
    pub fn start_time(&self) -> Option<f64> {
        self.start_time
    }

    /// `summary(0, now)` as `main` writes it: removed users in removal order, then active ones, each user's
    /// answers in order with `question_id` counting them from 1 (`range(1, len + 1)`, not the question asked);
    /// rows that finished outside `[start_time, min(now, last finish)]` dropped (`ProcessSummary`).
    pub fn summary_rows(&self, now: f64) -> Vec<SummaryRow> {
        let users = self
            .done
            .iter()
            .map(|(id, results)| (*id, results.as_slice()))
            .chain(self.users.iter().map(|u| (u.id, u.results.as_slice())));
        let mut rows = Vec::new();
        for (user_id, results) in users {
            for (i, answered) in results.iter().enumerate() {
                rows.push(SummaryRow {
                    answered: answered.clone(),
                    user_id,
                    question_id: i as u64 + 1,
                });
            }
        }
        let start = self.start_time.unwrap_or(0.0).max(0.0);
        let last = rows
            .iter()
            .map(|r| r.answered.finish_time)
            .fold(f64::NAN, f64::max);
        // Python's `min(now, nan)` is `now`.
        let end = if last.is_nan() { now } else { now.min(last) };
        rows.retain(|r| start <= r.answered.finish_time && r.answered.finish_time <= end);
        rows
    }
}

/// One row of upstream's summary CSV.
#[derive(Debug, Clone, PartialEq)]
pub struct SummaryRow {
    pub answered: Answered,
    pub user_id: u64,
    pub question_id: u64,
}

/// `UserSession._build_system_prompt`.
pub fn system_prompt(system_prompt_len: u32, user_info_len: u32, user_id: u64) -> String {
    format!(
        "Hi, here's some system prompt: {}.For user {user_id}, here are some other context: {}.",
        hi(system_prompt_len),
        hi(user_info_len)
    )
}

fn hi(n: u32) -> String {
    vec!["hi"; n as usize].join(" ")
}

/// `UserSession._build_new_question`.
pub fn question(n: u32) -> String {
    format!("Here's question #{n}: can you tell me a new long story with a happy ending?")
}

/// `warmup_engine`'s request `i` (of 10, `max_tokens` 100), a single user message.
pub fn engine_warmup_message(i: u32) -> Message {
    Message {
        role: Role::User,
        content: format!(
            "WARMUP: Hi, I'm user {i}. Here are some text: {}.",
            "hi ".repeat(100)
        ),
    }
}

/// How many requests `warmup_engine` sends (all at once, then waits for every answer) at the start of every
/// `multi-round-qa.py` invocation, and their `max_tokens`.
pub const ENGINE_WARMUP_REQUESTS: u32 = 10;
pub const ENGINE_WARMUP_MAX_TOKENS: u32 = 100;

/// The step loop's sleep after each step.
pub const STEP_INTERVAL: f64 = 0.1;

/// The completions prompt `RequestExecutor` builds from a chat history: `"{ROLE}: {content}"` lines, then
/// `"\nASSISTANT:"`.
pub fn completion_prompt(messages: &[Message]) -> String {
    let mut prompt = String::new();
    for (i, m) in messages.iter().enumerate() {
        if i > 0 {
            prompt.push('\n');
        }
        prompt.push_str(&m.role.as_str().to_uppercase());
        prompt.push_str(": ");
        prompt.push_str(&m.content);
    }
    prompt.push_str("\nASSISTANT:");
    prompt
}

/// The columns of `summary.to_csv(output, index=False)`.
pub(crate) const CSV_HEADER: &str = "prompt_tokens,generation_tokens,ttft,generation_time,user_id,question_id,launch_time,finish_time";

/// The summary CSV, as pandas writes it (floats as Python's `repr`).
pub fn summary_csv(rows: &[SummaryRow]) -> String {
    let mut out = String::with_capacity(64 * (rows.len() + 1));
    out.push_str(CSV_HEADER);
    out.push('\n');
    for r in rows {
        let a = &r.answered;
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{}",
            a.prompt_tokens,
            a.generation_tokens,
            py_float(a.ttft),
            py_float(a.generation_time),
            r.user_id,
            r.question_id,
            py_float(a.launch_time),
            py_float(a.finish_time)
        );
    }
    out
}

/// Python's `repr(float)`: the shortest digits that round-trip, in scientific notation when the decimal
/// exponent is below −4 or at least 16, always with a `.0` or an exponent so it reads back as a float.
pub fn py_float(x: f64) -> String {
    if x.is_nan() {
        return "nan".to_owned();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.to_owned();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0.0" } else { "0.0" }.to_owned();
    }
    // Rust's `{:e}` gives the same shortest round-trip digits: `d.ddde±x`.
    let sci = format!("{x:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if !(-4..16).contains(&exp) {
        let mantissa = mantissa.to_owned();
        return format!(
            "{mantissa}e{}{:02}",
            if exp < 0 { '-' } else { '+' },
            exp.abs()
        );
    }
    let plain = format!("{x}");
    if plain.contains('.') {
        plain
    } else {
        plain + ".0"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(num_users: u32, num_rounds: u32, qps: f64) -> SessionConfig {
        SessionConfig {
            num_users,
            num_rounds,
            qps,
            system_prompt_len: 2,
            user_info_len: 3,
            answer_len: 7,
            init_user_id: 10,
            time: 100,
        }
    }

    fn answer(manager: &mut Manager, launch: &Launch, at: f64) {
        manager.answered(
            launch.user_id,
            format!("answer {}", launch.question),
            Answered {
                prompt_tokens: 5,
                generation_tokens: 7,
                ttft: 0.01,
                generation_time: 0.02,
                launch_time: at - 0.03,
                finish_time: at,
            },
        );
    }

    /// Worked by hand from `multi-round-qa.py` for 3 users, 5 rounds, qps 0.1 (the medium/large fmperf profiles'
    /// first stage): gap = 3/0.1 = 30 s, session 30·4 = 120 s, users join 40 s apart, ramp-up 120 s.
    /// Ramp-up user 11 (offset 120) has passed ⌊120/30⌋+1 = 5 questions: done at once, never sends. User 12 (offset
    /// 80) passed ⌊80/30⌋+1 = 3, last at t − 80 + 60 = −20, so asks #4 once t > 10. User 13 (offset 40) passed 2,
    /// last at −10, asks #3 once t > 20. At t = 0 the join check passes (the first one always does) but user 11
    /// still counts, so nobody joins; it is removed at the end of that step, and at 0.1 user 14 joins and asks #1.
    #[test]
    fn the_ramp_up_places_users_mid_session_as_upstream_does() {
        let mut m = Manager::new(config(3, 5, 0.1));
        assert!(m.step(0.0).is_empty());
        assert_eq!(m.active_users(), 2);
        let joined = m.step(0.1);
        assert_eq!(joined.len(), 1);
        assert_eq!((joined[0].user_id, joined[0].question), (14, 1));
        assert_eq!(m.active_users(), 3);
        assert!(m.step(10.0).is_empty(), "due strictly after the gap");
        let launches = m.step(10.05);
        assert_eq!(launches.len(), 1);
        assert_eq!((launches[0].user_id, launches[0].question), (12, 4));
        // The first request of a user carries the system prompt and its context, then its question.
        assert_eq!(
            launches[0].messages,
            vec![Message {
                role: Role::User,
                content: "Hi, here's some system prompt: hi hi.For user 12, here are some other context: hi hi \
                          hi.Here's question #4: can you tell me a new long story with a happy ending?"
                    .to_owned(),
            }]
        );
        assert_eq!(launches[0].max_tokens, 7);
        assert!(m.step(20.0).is_empty());
        let third = m.step(20.05);
        assert_eq!((third[0].user_id, third[0].question), (13, 3));
    }

    /// A joined user asks at once, then `gap` later only if answered; the history carries the actual answer.
    /// 1 user, 2 rounds, qps 2 (the warm-up invocation): gap 0.5 s, session 0.5 s, users 0.5 s apart, ramp-up
    /// 0.5 s. Ramp-up user 11: offset 0.5, ⌊0.5/0.5⌋+1 = 2 questions passed = num_rounds, so it ends at once. At
    /// t = 0 it still counts as active, so nobody joins; at 0.1 user 12 joins and asks #1.
    #[test]
    fn users_ask_on_their_gap_only_once_answered_and_carry_the_answers() {
        let mut m = Manager::new(config(1, 2, 2.0));
        assert!(m.step(0.0).is_empty());
        let first = m.step(0.1);
        assert_eq!(first.len(), 1);
        assert_eq!((first[0].user_id, first[0].question), (12, 1));
        // Not answered yet at 0.7 (> 0.1 + 0.5): upstream waits for the answer.
        assert!(m.step(0.7).is_empty());
        answer(&mut m, &first[0], 0.75);
        let second = m.step(0.8);
        assert_eq!(second.len(), 1);
        assert_eq!(second[0].question, 2);
        assert_eq!(second[0].messages.len(), 3);
        assert_eq!(second[0].messages[1].content, "answer 1");
        assert_eq!(
            second[0].messages[2].content,
            "Here's question #2: can you tell me a new long story with a happy ending?"
        );
        // The user stays until its last answer is in, then leaves; the next joins only 0.5 s after the last join
        // (0.1), i.e. from 0.6 on, and only when a place is free.
        assert!(m.step(0.9).is_empty());
        answer(&mut m, &second[0], 0.95);
        assert!(
            m.step(1.0).is_empty(),
            "user 12 finishes and leaves in this step"
        );
        assert_eq!(m.active_users(), 0);
        let next = m.step(1.1);
        assert_eq!((next[0].user_id, next[0].question), (13, 1));
        // Summary: user 12's two answers, numbered 1 and 2, then user 13 (no answers yet).
        let rows = m.summary_rows(2.0);
        assert_eq!(rows.len(), 2);
        assert_eq!((rows[0].user_id, rows[0].question_id), (12, 1));
        assert_eq!((rows[1].user_id, rows[1].question_id), (12, 2));
    }

    /// One round (the sanity profiles): the session lasts 0 s, so users join with no gap and ramp-up users have
    /// "passed" their only question; the load is one request per active user at a time, whatever the qps.
    #[test]
    fn one_round_is_a_closed_loop_of_num_users() {
        let mut m = Manager::new(config(1, 1, 0.5));
        assert!(
            m.step(0.0).is_empty(),
            "the ramp-up user has no question left"
        );
        let a = m.step(0.1);
        assert_eq!((a[0].user_id, a[0].question), (12, 1));
        assert!(m.step(0.2).is_empty(), "one user at a time");
        answer(&mut m, &a[0], 0.25);
        assert!(m.step(0.3).is_empty(), "user 12 leaves");
        let b = m.step(0.4);
        assert_eq!((b[0].user_id, b[0].question), (13, 1));
    }

    #[test]
    fn the_completion_prompt_joins_roles_as_upstream() {
        let messages = vec![
            Message {
                role: Role::User,
                content: "q1".to_owned(),
            },
            Message {
                role: Role::Assistant,
                content: "a1".to_owned(),
            },
            Message {
                role: Role::User,
                content: "q2".to_owned(),
            },
        ];
        assert_eq!(
            completion_prompt(&messages),
            "USER: q1\nASSISTANT: a1\nUSER: q2\nASSISTANT:"
        );
        assert_eq!(
            engine_warmup_message(3).content,
            format!(
                "WARMUP: Hi, I'm user 3. Here are some text: {}.",
                "hi ".repeat(100)
            )
        );
    }

    /// Python: repr(1.0) '1.0', repr(0.5) '0.5', repr(5e-05) '5e-05', repr(1e16) '1e+16', repr(123.25) '123.25',
    /// repr(1732492800.123) '1732492800.123'.
    #[test]
    fn floats_are_written_as_python_writes_them() {
        assert_eq!(py_float(1.0), "1.0");
        assert_eq!(py_float(0.5), "0.5");
        assert_eq!(py_float(5e-05), "5e-05");
        assert_eq!(py_float(1e16), "1e+16");
        assert_eq!(py_float(123.25), "123.25");
        assert_eq!(py_float(1_732_492_800.123), "1732492800.123");
        assert_eq!(py_float(0.0001), "0.0001");
    }

    #[test]
    fn the_csv_has_upstreams_columns() {
        let rows = vec![SummaryRow {
            answered: Answered {
                prompt_tokens: 12,
                generation_tokens: 3,
                ttft: 0.25,
                generation_time: 1.0,
                launch_time: 100.0,
                finish_time: 101.25,
            },
            user_id: 2,
            question_id: 1,
        }];
        assert_eq!(
            summary_csv(&rows),
            "prompt_tokens,generation_tokens,ttft,generation_time,user_id,question_id,launch_time,finish_time\n\
             12,3,0.25,1.0,2,1,100.0,101.25\n"
        );
    }
}
