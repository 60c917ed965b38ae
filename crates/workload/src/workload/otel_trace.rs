//! inference-perf's OTel trace → replay graph (`inference_perf/datagen/replay/otel_trace_to_replay_graph.py`):
//! one trace file is one session; its LLM spans become calls, each with its input messages, recorded output and
//! recorded start/end; calls depend on earlier calls whose output they carry as an assistant message (causal
//! edges) or, failing that, on the closest earlier call that had ended before they started (a temporal edge);
//! each call's input is cut into segments (`shared` prefix of an ancestor's input, a predecessor's `output`,
//! `unique` rest) that replay substitutes with live text; and each call waits `wait_ms` after its last
//! predecessor ends, as recorded.
//!
//! Pure: the caller hands in the parsed JSON. What llmbench does not replay is refused with the span named:
//! tool calls and tool results, structured (list) content, and several output messages — upstream replays them
//! with tool definitions, forced `tool_choice` and live tool-call ids (about a thousand more lines), none of which
//! is built here. Malformed traces (bad JSON in an attribute, a message without `role`) yield [`Build::Skipped`],
//! as upstream logs them and skips the session (`_process_trace_data` catches every build error).

use std::collections::{HashMap, HashSet};

use llmbench_core::calendar::days_from_civil;
use llmbench_data::weka_trace::WekaCall;
use serde_json::{Map, Value};

/// Why a trace cannot be replayed by llmbench although upstream would replay it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("span `{span}`: {what}")]
pub struct Unsupported {
    pub span: String,
    pub what: String,
}

/// One chat message of a recorded call (plain text content only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub role: String,
    pub content: String,
}

/// A part of a call's input (`InputSegment`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SegmentKind {
    /// Leading messages equal to an ancestor's input: replayed as that ancestor's *sent* messages.
    Shared,
    /// One assistant message that is a predecessor's output: replayed as its live answer.
    Output,
    /// Sent as recorded.
    Unique,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    pub kind: SegmentKind,
    pub messages: usize,
    /// The event (index into [`Graph::events`]) a shared or output segment comes from.
    pub source: Option<usize>,
}

/// One LLM call of the graph (`GraphEvent` with its `GraphCall`).
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub span_id: String,
    pub messages: Vec<Message>,
    pub segments: Vec<Segment>,
    /// Direct predecessors, causal ones first (latest first), then the temporal one.
    pub predecessors: Vec<usize>,
    /// Recorded gap between the last predecessor's end and this call's start (0 for a root), uncapped.
    pub wait_ms: u64,
    pub t_start_ms: i64,
    pub t_end_ms: i64,
    /// `expected_output_tokens`: the recorded completion tokens, else `max(1, chars // 4)` of the output; it is
    /// the request's `max_tokens` (`load_lazy_data`).
    pub max_tokens: u32,
    /// `total_input_tokens`: recorded prompt tokens, else the per-message estimate.
    pub input_tokens: u32,
}

/// One session's calls in start order (`event_{i:03}_{span_id}` upstream).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Graph {
    pub events: Vec<Event>,
}

/// What a trace file became.
#[derive(Debug, Clone, PartialEq)]
pub enum Build {
    Graph(Graph),
    /// Upstream would skip the session (it logs why and leaves it out of the run and its session metrics).
    Skipped(String),
}

/// A call of a built graph that asks for more than a profile may: a wait past [`super::limits::MAX_DURATION`] or
/// a `max_tokens` past [`super::limits::MAX_TOKENS`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("span `{span}`, {field}: {problem}")]
pub struct OverLimit {
    pub span: String,
    pub field: &'static str,
    pub problem: String,
}

/// Holds a graph's calls to the limits on profiles, so a trace whose recorded gap is 40 days, or whose completion
/// tokens are a billion, is refused before the replay instead of waiting weeks or asking for them.
pub fn check_limits(graph: &Graph) -> Result<(), OverLimit> {
    use super::limits::{Limit, MAX_DURATION, MAX_TOKENS, exceeded};
    for event in &graph.events {
        let wait_s = event.wait_ms as f64 / 1000.0;
        if wait_s > MAX_DURATION.as_secs_f64() {
            return Err(OverLimit {
                span: event.span_id.clone(),
                field: "`start_time`",
                problem: format!(
                    "it starts {wait_s} s after its predecessor ended, which the replay would wait: {}",
                    exceeded(Limit::Duration, wait_s)
                ),
            });
        }
        if u64::from(event.max_tokens) > MAX_TOKENS {
            return Err(OverLimit {
                span: event.span_id.clone(),
                field: "`gen_ai.usage.completion_tokens` (else the output's length), sent as `max_tokens`",
                problem: exceeded(Limit::Tokens, f64::from(event.max_tokens)),
            });
        }
    }
    Ok(())
}

/// A recorded call before the graph (`RawCall`).
#[derive(Debug, Clone)]
struct RawCall {
    span_id: String,
    t_start_ms: i64,
    t_end_ms: i64,
    messages: Vec<Message>,
    output: Option<String>,
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
}

/// Upstream raises while building (the session is skipped) or llmbench refuses.
enum Fault {
    Skip(String),
    Refuse(Unsupported),
}

/// `_normalize_file_trace`'s `session_id`: the trace's own, else its `trace_id`, else the file's stem.
pub fn session_name(trace: &Value, file_stem: &str) -> String {
    let text = |key: &str| match trace.get(key) {
        Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
        Some(Value::Null) | None => None,
        Some(Value::String(_)) => None,
        Some(other) => Some(python_str(other)),
    };
    if let Some(id) = trace.get("session_id") {
        // Present (even empty) wins, as `"session_id" not in normalized` only checks presence.
        return match id {
            Value::String(s) => s.clone(),
            other => python_str(other),
        };
    }
    text("trace_id").unwrap_or_else(|| file_stem.to_owned())
}

fn python_str(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Bool(true) => "True".to_owned(),
        Value::Bool(false) => "False".to_owned(),
        Value::Null => "None".to_owned(),
        other => other.to_string(),
    }
}

/// The replay graph of a WEKA trace's calls (`llmbench_data::weka_trace::compile`, in its start-then-id order):
/// inference-perf hands them to the same `build_graph`, each with its recorded answer and token counts.
pub fn weka_graph(calls: Vec<WekaCall>) -> Graph {
    let calls: Vec<RawCall> = calls
        .into_iter()
        .map(|call| RawCall {
            span_id: call.id,
            t_start_ms: call.t_start_ms,
            t_end_ms: call.t_end_ms,
            messages: call
                .messages
                .into_iter()
                .map(|m| Message {
                    role: m.role,
                    content: m.content,
                })
                .collect(),
            output: Some(call.output),
            prompt_tokens: Some(call.prompt_tokens.max(0).unsigned_abs()),
            completion_tokens: Some(call.completion_tokens.max(0).unsigned_abs()),
        })
        .collect();
    graph(&calls)
}

/// Builds the replay graph of one trace (`build_raw_calls` then `build_graph`).
pub fn build(trace: &Value, include_errors: bool) -> Result<Build, Unsupported> {
    let spans = match trace.get("spans") {
        Some(Value::Array(spans)) if !spans.is_empty() => spans,
        _ => return Ok(Build::Skipped("no spans".to_owned())),
    };
    let calls = match raw_calls(spans, include_errors) {
        Ok(calls) => calls,
        Err(Fault::Skip(why)) => return Ok(Build::Skipped(why)),
        Err(Fault::Refuse(refused)) => return Err(refused),
    };
    if calls.is_empty() {
        return Ok(Build::Skipped("no LLM calls".to_owned()));
    }
    Ok(Build::Graph(graph(&calls)))
}

/// `filter_duplicate_spans`: spans sorted by `span_id`, the first of those with equal start, end and attributes
/// kept.
fn unique_spans(spans: &[Value]) -> Vec<&Value> {
    let mut sorted: Vec<&Value> = spans.iter().collect();
    sorted.sort_by(|a, b| span_id(a).cmp(span_id(b)));
    let mut seen: HashMap<(String, String), Vec<Option<&Value>>> = HashMap::new();
    let mut kept = Vec::new();
    for span in sorted {
        let key = (
            python_str(
                span.get("start_time")
                    .unwrap_or(&Value::String(String::new())),
            ),
            python_str(
                span.get("end_time")
                    .unwrap_or(&Value::String(String::new())),
            ),
        );
        let attributes = span.get("attributes");
        let bucket = seen.entry(key).or_default();
        // serde_json's maps compare regardless of key order, as `json.dumps(sort_keys=True)` does; a span
        // without attributes has `{}` (`span.get("attributes", {})`).
        if bucket.iter().any(|a| same_attributes(*a, attributes)) {
            continue;
        }
        bucket.push(attributes);
        kept.push(span);
    }
    kept
}

fn same_attributes(a: Option<&Value>, b: Option<&Value>) -> bool {
    let empty = |v: Option<&Value>| v.is_none_or(|v| v.as_object().is_some_and(Map::is_empty));
    match (a, b) {
        (Some(a), Some(b)) => a == b,
        _ => empty(a) && empty(b),
    }
}

fn span_id(span: &Value) -> &str {
    span.get("span_id").and_then(Value::as_str).unwrap_or("")
}

fn attributes(span: &Value) -> Option<&Map<String, Value>> {
    span.get("attributes").and_then(Value::as_object)
}

/// Python truthiness of an attribute value.
fn truthy(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Array(a)) => !a.is_empty(),
        Some(Value::Object(o)) => !o.is_empty(),
        Some(Value::Number(n)) => n.as_f64().is_some_and(|x| x != 0.0),
    }
}

/// `is_llm_span`: `gen_ai.operation.name == "chat"` or a name starting `chat `, with input messages; an error span
/// (`status.code == 2`) only with `include_errors`.
fn is_llm_span(span: &Value, include_errors: bool) -> bool {
    let name = span.get("name").and_then(Value::as_str).unwrap_or("");
    let attrs = attributes(span);
    let op = attrs.and_then(|a| a.get("gen_ai.operation.name"));
    let is_llm = (op == Some(&Value::String("chat".to_owned())) || name.starts_with("chat "))
        && truthy(attrs.and_then(|a| a.get("gen_ai.input.messages")));
    if !is_llm {
        return false;
    }
    if !include_errors {
        let code = span.get("status").and_then(|s| s.get("code"));
        if code.and_then(Value::as_i64) == Some(2) {
            return false;
        }
    }
    true
}

fn raw_calls(spans: &[Value], include_errors: bool) -> Result<Vec<RawCall>, Fault> {
    let mut llm: Vec<(f64, &Value)> = Vec::new();
    for span in unique_spans(spans) {
        if !is_llm_span(span, include_errors) {
            continue;
        }
        let start = span
            .get("start_time")
            .and_then(Value::as_str)
            .ok_or_else(|| Fault::Skip(format!("span `{}` has no start_time", span_id(span))))?;
        let start = parse_iso(start).map_err(Fault::Skip)?;
        llm.push((start, span));
    }
    if llm.is_empty() {
        return Ok(Vec::new());
    }
    let t0 = llm.iter().map(|(t, _)| *t).fold(f64::INFINITY, f64::min);
    // `sort(key=(start, span_id))`: stable, and start times compare as the floats they are.
    llm.sort_by(|(ta, a), (tb, b)| ta.total_cmp(tb).then_with(|| span_id(a).cmp(span_id(b))));
    let mut calls = Vec::with_capacity(llm.len());
    for (start, span) in llm {
        let id = span_id(span).to_owned();
        let empty = Map::new();
        let attrs = attributes(span).unwrap_or(&empty);
        let messages = input_messages(&id, attrs.get("gen_ai.input.messages"))?;
        let output = output_text(&id, attrs)?;
        let t_start_ms = ms_round((start - t0) * 1000.0);
        let t_end_ms = match span.get("end_time") {
            Some(Value::String(end)) if !end.is_empty() => {
                ms_round((parse_iso(end).map_err(Fault::Skip)? - t0) * 1000.0)
            }
            _ => t_start_ms,
        };
        let tokens = |a: &str, b: &str| -> Result<Option<u64>, Fault> {
            match attrs
                .get(a)
                .filter(|v| !v.is_null())
                .or_else(|| attrs.get(b))
            {
                None | Some(Value::Null) => Ok(None),
                Some(v) => python_int(v).map(Some).ok_or_else(|| {
                    Fault::Skip(format!("span `{id}`: token count {v} is not an int"))
                }),
            }
        };
        calls.push(RawCall {
            prompt_tokens: tokens("gen_ai.usage.prompt_tokens", "gen_ai.usage.input_tokens")?,
            completion_tokens: tokens(
                "gen_ai.usage.completion_tokens",
                "gen_ai.usage.output_tokens",
            )?,
            span_id: id,
            t_start_ms,
            t_end_ms,
            messages,
            output,
        });
    }
    Ok(calls)
}

/// Python's `int(v)` of a JSON number or numeric string, non-negative.
fn python_int(v: &Value) -> Option<u64> {
    match v {
        Value::Number(n) => n
            .as_u64()
            .or_else(|| n.as_f64().filter(|x| *x >= 0.0).map(|x| x.trunc() as u64)),
        Value::String(s) => s.trim().parse().ok(),
        Value::Bool(b) => Some(u64::from(*b)),
        _ => None,
    }
}

/// Python's `int(round(x))`: halves to even.
fn ms_round(x: f64) -> i64 {
    x.round_ties_even() as i64
}

fn parse_json_attr(span: &str, what: &str, v: &Value) -> Result<Value, Fault> {
    match v {
        Value::String(s) => serde_json::from_str(s)
            .map_err(|e| Fault::Skip(format!("span `{span}`: {what} is not JSON: {e}"))),
        other => Ok(other.clone()),
    }
}

fn refuse(span: &str, what: impl Into<String>) -> Fault {
    Fault::Refuse(Unsupported {
        span: span.to_owned(),
        what: what.into(),
    })
}

/// `extract_messages`, for messages with plain string content; `developer` becomes `system`.
fn input_messages(span: &str, raw: Option<&Value>) -> Result<Vec<Message>, Fault> {
    let Some(raw) = raw else {
        return Ok(Vec::new());
    };
    let parsed = parse_json_attr(span, "gen_ai.input.messages", raw)?;
    let Value::Array(items) = parsed else {
        return Err(refuse(
            span,
            "gen_ai.input.messages is not a list, which upstream replays as a call without messages that its \
             successors wait on forever",
        ));
    };
    let mut messages = Vec::with_capacity(items.len());
    for item in items {
        let Some(role) = item.get("role") else {
            return Err(Fault::Skip(format!("span `{span}`: a message has no role")));
        };
        let Some(role) = role.as_str() else {
            return Err(refuse(
                span,
                format!("a message's role {role} is not a string"),
            ));
        };
        let role = if role == "developer" { "system" } else { role };
        if item.get("tool_calls").is_some_and(|t| !t.is_null())
            || item.get("tool_call_id").is_some_and(|t| !t.is_null())
        {
            return Err(refuse(
                span,
                "tool calls or tool results in the input (llmbench replays plain text messages only; upstream \
                 re-sends them with live tool-call ids)",
            ));
        }
        match item.get("content") {
            Some(Value::String(content)) => messages.push(Message {
                role: role.to_owned(),
                content: content.clone(),
            }),
            _ => {
                return Err(refuse(
                    span,
                    "a message whose content is not a string (content parts, or none; llmbench replays plain text \
                     messages only)",
                ));
            }
        }
    }
    Ok(messages)
}

/// `extract_output_message`: `gen_ai.output.text` / `gen_ai.completion` / `gen_ai.output` as text, else one
/// `gen_ai.output.messages` message with string content.
fn output_text(span: &str, attrs: &Map<String, Value>) -> Result<Option<String>, Fault> {
    for key in ["gen_ai.output.text", "gen_ai.completion", "gen_ai.output"] {
        if let Some(Value::String(text)) = attrs.get(key) {
            return Ok(Some(text.clone()));
        }
    }
    let Some(out) = attrs.get("gen_ai.output.messages") else {
        return Ok(None);
    };
    let out = parse_json_attr(span, "gen_ai.output.messages", out)?;
    let Value::Array(items) = out else {
        return Ok(None);
    };
    let Some(first) = items.first() else {
        return Err(Fault::Skip(format!(
            "span `{span}`: gen_ai.output.messages is empty"
        )));
    };
    if !first.is_object() {
        return Ok(None);
    }
    if items.len() > 1 {
        return Err(Fault::Skip(format!(
            "span `{span}`: expected a single output message, got {}",
            items.len()
        )));
    }
    let has_tools = first.get("tool_calls").is_some_and(|t| !t.is_null());
    match (first.get("content"), first.get("parts"), has_tools) {
        (Some(Value::String(text)), None, false) => Ok(Some(text.clone())),
        _ => Err(refuse(
            span,
            "an output message with tool calls or content parts (llmbench replays plain text outputs only)",
        )),
    }
}

/// Python `len(text)`: code points.
fn chars(text: &str) -> usize {
    text.chars().count()
}

/// `estimate_tokens`: `max(1, len(text) // 4)`.
fn estimate_tokens(text: &str) -> u64 {
    (chars(text) / 4).max(1) as u64
}

/// `output_matches_message(out, msg, allow_partial_match)`.
fn output_matches(output: &str, message: &Message, partial: bool) -> bool {
    message.role == "assistant"
        && (message.content == output || (partial && message.content.contains(output)))
}

/// `build_graph` over calls in start order.
fn graph(calls: &[RawCall]) -> Graph {
    let n = calls.len();
    // Predecessors of each call in upstream's dict order, with whether the edge is causal.
    let mut preds: Vec<Vec<(usize, bool)>> = vec![Vec::new(); n];
    // `output_matches_for_substitutions`: (pred span, call span) → index of the exactly matching message.
    let mut exact: HashMap<(&str, &str), Vec<usize>> = HashMap::new();
    for i in 1..n {
        let mut causal: Vec<usize> = Vec::new();
        let mut transitive: HashSet<usize> = HashSet::new();
        for j in (0..i).rev() {
            if transitive.contains(&j) {
                continue;
            }
            // `get_causal_dep`: the first assistant message containing j's output (the empty output is in every
            // one); an exact match is remembered for the decomposition.
            let Some(output) = &calls[j].output else {
                continue;
            };
            let found = calls[i]
                .messages
                .iter()
                .position(|m| output_matches(output, m, true));
            if let Some(at) = found {
                if output_matches(output, &calls[i].messages[at], false) {
                    exact
                        .entry((calls[j].span_id.as_str(), calls[i].span_id.as_str()))
                        .or_default()
                        .push(at);
                }
                causal.push(j);
                transitive.extend(causal_ancestors(&preds, j));
            }
        }
        preds[i].extend(causal.iter().map(|&j| (j, true)));
        // The temporal fallback: the latest earlier call that had ended when this one started.
        let temporal = (0..i)
            .rev()
            .find(|&j| calls[i].t_start_ms >= calls[j].t_end_ms);
        if let Some(j) = temporal
            && !causal.contains(&j)
        {
            preds[i].push((j, false));
        }
    }
    let events = (0..n)
        .map(|i| {
            let call = &calls[i];
            let ancestors = all_ancestors(&preds, i);
            let segments = decompose(call, calls, &ancestors, &exact);
            let wait_ms = preds[i]
                .iter()
                .map(|&(j, _)| calls[j].t_end_ms)
                .max()
                .map_or(0, |last| (call.t_start_ms - last).max(0) as u64);
            let input_tokens = call.prompt_tokens.unwrap_or_else(|| {
                call.messages
                    .iter()
                    .map(|m| estimate_tokens(&m.content))
                    .sum()
            });
            let max_tokens = call
                .completion_tokens
                .unwrap_or_else(|| estimate_tokens(call.output.as_deref().unwrap_or("")));
            Event {
                span_id: call.span_id.clone(),
                messages: call.messages.clone(),
                segments,
                predecessors: preds[i].iter().map(|&(j, _)| j).collect(),
                wait_ms,
                t_start_ms: call.t_start_ms,
                t_end_ms: call.t_end_ms,
                max_tokens: u32::try_from(max_tokens).unwrap_or(u32::MAX),
                input_tokens: u32::try_from(input_tokens).unwrap_or(u32::MAX),
            }
        })
        .collect();
    Graph { events }
}

fn causal_ancestors(preds: &[Vec<(usize, bool)>], node: usize) -> HashSet<usize> {
    let mut seen = HashSet::new();
    let mut stack: Vec<usize> = preds[node].iter().filter(|p| p.1).map(|p| p.0).collect();
    while let Some(a) = stack.pop() {
        if seen.insert(a) {
            stack.extend(preds[a].iter().filter(|p| p.1).map(|p| p.0));
        }
    }
    seen
}

/// Every ancestor, ascending: upstream iterates a Python `set` of small ints, which yields them in ascending order
/// while they are below the set's table size (the ties this order breaks are rare).
fn all_ancestors(preds: &[Vec<(usize, bool)>], node: usize) -> Vec<usize> {
    let mut seen = HashSet::new();
    let mut stack: Vec<usize> = preds[node].iter().map(|p| p.0).collect();
    while let Some(a) = stack.pop() {
        if seen.insert(a) {
            stack.extend(preds[a].iter().map(|p| p.0));
        }
    }
    let mut all: Vec<usize> = seen.into_iter().collect();
    all.sort_unstable();
    all
}

/// `decompose_input`: the longest shared message prefix with an ancestor, then the earliest message that is an
/// ancestor's output (repeatedly), the rest unique.
fn decompose(
    call: &RawCall,
    calls: &[RawCall],
    ancestors: &[usize],
    exact: &HashMap<(&str, &str), Vec<usize>>,
) -> Vec<Segment> {
    let total = call.messages.len();
    let unique = |messages| Segment {
        kind: SegmentKind::Unique,
        messages,
        source: None,
    };
    if total == 0 {
        return vec![unique(0)];
    }
    if ancestors.is_empty() {
        return vec![unique(total)];
    }
    let mut best: Option<usize> = None;
    let mut best_len = 0;
    for &a in ancestors {
        let len = call
            .messages
            .iter()
            .zip(&calls[a].messages)
            .take_while(|(x, y)| x == y)
            .count();
        if len > best_len {
            best_len = len;
            best = Some(a);
        }
    }
    let mut segments = Vec::new();
    let mut cursor = 0;
    if let Some(source) = best {
        segments.push(Segment {
            kind: SegmentKind::Shared,
            messages: best_len,
            source: Some(source),
        });
        cursor = best_len;
    }
    while cursor < total {
        let mut found: Option<(usize, usize)> = None; // (message index, ancestor)
        for &a in ancestors {
            let Some(output) = &calls[a].output else {
                continue;
            };
            let key = (calls[a].span_id.as_str(), call.span_id.as_str());
            let hit = match exact.get(&key) {
                Some(indices) => indices.iter().copied().find(|&k| cursor <= k && k < total),
                None => (cursor..total).find(|&k| output_matches(output, &call.messages[k], false)),
            };
            if let Some(k) = hit
                && found.is_none_or(|(best, _)| k < best)
            {
                found = Some((k, a));
            }
        }
        let Some((at, source)) = found else {
            segments.push(unique(total - cursor));
            break;
        };
        if at > cursor {
            segments.push(unique(at - cursor));
        }
        segments.push(Segment {
            kind: SegmentKind::Output,
            messages: 1,
            source: Some(source),
        });
        cursor = at + 1;
    }
    if segments.is_empty() {
        segments.push(unique(total));
    }
    segments
}

/// `parse_iso` (`datetime.fromisoformat`, `Z` as UTC, naive as UTC) → seconds since the epoch, as CPython's
/// `timestamp()` computes it: whole microseconds divided by 10⁶, correctly rounded.
pub(crate) fn parse_iso(text: &str) -> Result<f64, String> {
    let bad = || format!("`{text}` is not an ISO-8601 time");
    let b = text.as_bytes();
    let num = |range: std::ops::Range<usize>| -> Result<i64, String> {
        let s = text.get(range).ok_or_else(bad)?;
        if s.is_empty() || !s.bytes().all(|c| c.is_ascii_digit()) {
            return Err(bad());
        }
        s.parse().map_err(|_| bad())
    };
    if b.len() < 10 || b[4] != b'-' || b[7] != b'-' {
        return Err(bad());
    }
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (mut hour, mut minute, mut second, mut micros) = (0, 0, 0, 0i64);
    let mut rest = &text[10..];
    if let Some(time) = rest.strip_prefix(['T', ' ']) {
        let t = time.as_bytes();
        if t.len() < 5 || t[2] != b':' {
            return Err(bad());
        }
        let two = |s: &str| -> Result<i64, String> {
            if s.len() == 2 && s.bytes().all(|c| c.is_ascii_digit()) {
                s.parse().map_err(|_| bad())
            } else {
                Err(bad())
            }
        };
        // `get`: a multi-byte character where a digit belongs is an error, not a panic.
        hour = two(time.get(0..2).ok_or_else(bad)?)?;
        minute = two(time.get(3..5).ok_or_else(bad)?)?;
        rest = time.get(5..).ok_or_else(bad)?;
        if let Some(s) = rest.strip_prefix(':') {
            second = two(s.get(0..2).ok_or_else(bad)?)?;
            rest = &s[2..];
            if let Some(frac) = rest.strip_prefix(['.', ',']) {
                let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
                if digits == 0 {
                    return Err(bad());
                }
                // Python keeps microseconds; further digits are dropped.
                let kept = &frac[..digits.min(6)];
                micros = kept.parse::<i64>().map_err(|_| bad())? * 10i64.pow(6 - kept.len() as u32);
                rest = &frac[digits..];
            }
        }
    }
    let offset_s = match rest {
        "" | "Z" => 0,
        _ => {
            let sign = match rest.as_bytes()[0] {
                b'+' => 1,
                b'-' => -1,
                _ => return Err(bad()),
            };
            let o = rest[1..].replace(':', "");
            if o.len() < 4 || !o.bytes().all(|c| c.is_ascii_digit()) {
                return Err(bad());
            }
            let h: i64 = o[0..2].parse().map_err(|_| bad())?;
            let m: i64 = o[2..4].parse().map_err(|_| bad())?;
            let s: i64 = if o.len() >= 6 {
                o[4..6].parse().map_err(|_| bad())?
            } else {
                0
            };
            sign * (h * 3600 + m * 60 + s)
        }
    };
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 59
    {
        return Err(bad());
    }
    // Checked above: a month of 1..=12 and a day of 1..=31 fit in u32.
    let days = days_from_civil(year, month as u32, day as u32);
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset_s;
    Ok((seconds * 1_000_000 + micros) as f64 / 1e6)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn span(id: &str, start: &str, end: &str, messages: Value, output: &str) -> Value {
        json!({
            "span_id": id,
            "name": "chat m",
            "start_time": start,
            "end_time": end,
            "attributes": {
                "gen_ai.operation.name": "chat",
                "gen_ai.input.messages": messages.to_string(),
                "gen_ai.output.text": output,
            },
            "status": {"code": 1}
        })
    }

    fn msg(role: &str, content: &str) -> Value {
        json!({"role": role, "content": content})
    }

    fn graph_of(trace: &Value) -> Graph {
        match build(trace, true) {
            Ok(Build::Graph(g)) => g,
            other => panic!("no graph: {other:?}"),
        }
    }

    #[test]
    fn a_recorded_gap_or_answer_past_the_profile_limits_is_refused_by_span() {
        let q1 = msg("user", "Q1");
        // b carries a's answer, so it waits from a's end (2026-02-25 10:00:01) to its start: exactly 30 days
        // passes, 40 days is refused.
        let gap = |b_start: &str| {
            json!({"trace_id": "t", "spans": [
                span("a", "2026-02-25T10:00:00", "2026-02-25T10:00:01", json!([q1]), "A1"),
                span("b", b_start, b_start, json!([q1, msg("assistant", "A1"), msg("user", "Q2")]), "A2"),
            ]})
        };
        let thirty_days = graph_of(&gap("2026-03-27T10:00:01"));
        assert_eq!(thirty_days.events[1].wait_ms, 2_592_000_000);
        check_limits(&thirty_days).expect("30 days is the limit itself");
        let e = check_limits(&graph_of(&gap("2026-04-06T10:00:01"))).expect_err("40 days");
        assert_eq!(e.span, "b");
        assert_eq!(e.field, "`start_time`");
        assert!(
            e.problem.contains("3456000 s after its predecessor ended"),
            "{e}"
        );
        let mut many = span(
            "a",
            "2026-02-25T10:00:00",
            "2026-02-25T10:00:01",
            json!([q1]),
            "A1",
        );
        many["attributes"]["gen_ai.usage.completion_tokens"] = json!(1_000_000_000u64);
        let e = check_limits(&graph_of(&json!({"spans": [many]}))).expect_err("a billion tokens");
        assert!(
            e.to_string()
                .starts_with("span `a`, `gen_ai.usage.completion_tokens`"),
            "{e}"
        );
        assert!(e.problem.contains("limit of 10000000 tokens"), "{e}");
    }

    #[test]
    fn iso_times_are_seconds_since_the_epoch() {
        // 2026-02-25 is 20509 days after 1970-01-01 (56 years with 14 leap days, plus 31 + 24 days).
        assert_eq!(
            parse_iso("2026-02-25T10:00:02.500000").unwrap(),
            (20_509.0 * 86_400.0) + 36_002.5
        );
        assert_eq!(
            parse_iso("2026-02-25T10:00:02.5Z").unwrap(),
            parse_iso("2026-02-25T11:00:02.500+01:00").unwrap()
        );
        assert!(parse_iso("yesterday").is_err());
        assert!(parse_iso("2026-02-25T10:0é").is_err());
    }

    /// Upstream's `simple_chain.json` (examples/otel/test_traces/simple): three calls, each carrying the previous
    /// answers. Worked by hand: call 1 holds call 0's output as message 1 (causal), call 2 holds call 1's output
    /// as message 3 and call 0's as message 1, but call 0 is a causal ancestor of call 1 so only call 1 is a
    /// direct predecessor. Waits: 3000 − 2500 = 500 ms and 6000 − 5000 = 1000 ms.
    #[test]
    fn a_chain_depends_on_the_previous_answer_and_waits_the_recorded_gap() {
        let q1 = msg("user", "Q1");
        let a1 = "A1 long answer";
        let q2 = msg("user", "Q2");
        let a2 = "A2 answer";
        let trace = json!({"trace_id": "t", "spans": [
            span("c", "2026-02-25T10:00:06", "2026-02-25T10:00:08",
                 json!([q1, msg("assistant", a1), q2, msg("assistant", a2), msg("user", "Q3")]), "A3"),
            span("a", "2026-02-25T10:00:00", "2026-02-25T10:00:02.5", json!([q1]), a1),
            span("b", "2026-02-25T10:00:03", "2026-02-25T10:00:05", json!([q1, msg("assistant", a1), q2]), a2),
        ]});
        let g = graph_of(&trace);
        let ids: Vec<&str> = g.events.iter().map(|e| e.span_id.as_str()).collect();
        assert_eq!(ids, ["a", "b", "c"]);
        assert_eq!(g.events[0].predecessors, Vec::<usize>::new());
        assert_eq!(g.events[1].predecessors, [0]);
        assert_eq!(g.events[2].predecessors, [1]);
        assert_eq!(
            g.events.iter().map(|e| e.wait_ms).collect::<Vec<_>>(),
            [0, 500, 1000]
        );
        assert_eq!(
            g.events.iter().map(|e| e.t_start_ms).collect::<Vec<_>>(),
            [0, 3000, 6000]
        );
        // b: [Q1] shared with a (1 message), then a's output, then Q2 unique.
        assert_eq!(
            g.events[1].segments,
            [
                Segment {
                    kind: SegmentKind::Shared,
                    messages: 1,
                    source: Some(0)
                },
                Segment {
                    kind: SegmentKind::Output,
                    messages: 1,
                    source: Some(0)
                },
                Segment {
                    kind: SegmentKind::Unique,
                    messages: 1,
                    source: None
                },
            ]
        );
        // c: the first 3 messages shared with b (its longest common prefix), b's output, then Q3.
        assert_eq!(
            g.events[2].segments,
            [
                Segment {
                    kind: SegmentKind::Shared,
                    messages: 3,
                    source: Some(1)
                },
                Segment {
                    kind: SegmentKind::Output,
                    messages: 1,
                    source: Some(1)
                },
                Segment {
                    kind: SegmentKind::Unique,
                    messages: 1,
                    source: None
                },
            ]
        );
        // max_tokens: the recorded output's max(1, chars // 4): "A1 long answer" is 14 chars → 3.
        assert_eq!(g.events[0].max_tokens, 3);
        assert_eq!(g.events[2].max_tokens, 1);
    }

    /// Two calls overlapping the first have no non-overlapping earlier call: both are roots, sent at the session
    /// start (upstream gives a root no wait, whatever its recorded start). A call after both waits on the latest
    /// that had ended (temporal edge) and its recorded gap.
    #[test]
    fn overlapping_calls_are_roots_and_a_later_one_follows_the_latest_ended() {
        let trace = json!({"spans": [
            span("a", "2026-01-01T00:00:00", "2026-01-01T00:00:02", json!([msg("user", "x")]), "ox"),
            span("b", "2026-01-01T00:00:00.500", "2026-01-01T00:00:01", json!([msg("user", "y")]), "oy"),
            span("c", "2026-01-01T00:00:01.200", "2026-01-01T00:00:03", json!([msg("user", "z")]), "oz"),
        ]});
        let g = graph_of(&trace);
        assert_eq!(g.events[0].predecessors, Vec::<usize>::new());
        assert_eq!(g.events[1].predecessors, Vec::<usize>::new());
        // c (1200 ms): a ends at 2000 (overlaps), b ends at 1000 → temporal on b, wait 200 ms.
        assert_eq!(g.events[2].predecessors, [1]);
        assert_eq!(g.events[2].wait_ms, 200);
        assert_eq!(
            g.events[2].segments,
            [Segment {
                kind: SegmentKind::Unique,
                messages: 1,
                source: None
            }]
        );
    }

    #[test]
    fn a_fan_in_waits_for_both_branches() {
        // a, b run in parallel; c carries both outputs: two causal predecessors (latest first), no temporal one
        // added since b (the latest ended) is already among them. Wait: 5000 − max(2000, 3000) = 2000.
        let trace = json!({"spans": [
            span("a", "2026-01-01T00:00:00", "2026-01-01T00:00:02", json!([msg("user", "x")]), "ox"),
            span("b", "2026-01-01T00:00:00", "2026-01-01T00:00:03", json!([msg("user", "y")]), "oy"),
            span("c", "2026-01-01T00:00:05", "2026-01-01T00:00:06",
                 json!([msg("user", "x"), msg("assistant", "ox"), msg("assistant", "oy"), msg("user", "go")]), "oz"),
        ]});
        let g = graph_of(&trace);
        assert_eq!(g.events[2].predecessors, [1, 0]);
        assert_eq!(g.events[2].wait_ms, 2000);
        assert_eq!(
            g.events[2].segments,
            [
                Segment {
                    kind: SegmentKind::Shared,
                    messages: 1,
                    source: Some(0)
                },
                Segment {
                    kind: SegmentKind::Output,
                    messages: 1,
                    source: Some(0)
                },
                Segment {
                    kind: SegmentKind::Output,
                    messages: 1,
                    source: Some(1)
                },
                Segment {
                    kind: SegmentKind::Unique,
                    messages: 1,
                    source: None
                },
            ]
        );
    }

    #[test]
    fn duplicate_and_error_spans_are_dropped_as_upstream_drops_them() {
        let a = span(
            "a",
            "2026-01-01T00:00:00",
            "2026-01-01T00:00:01",
            json!([msg("user", "x")]),
            "o",
        );
        let mut dup = a.clone();
        dup["span_id"] = json!("z");
        let mut err = span(
            "e",
            "2026-01-01T00:00:02",
            "2026-01-01T00:00:03",
            json!([msg("user", "q")]),
            "o2",
        );
        err["status"] = json!({"code": 2});
        let mut tool = span(
            "t",
            "2026-01-01T00:00:00",
            "2026-01-01T00:00:01",
            json!([msg("user", "x")]),
            "o",
        );
        tool["attributes"]["gen_ai.operation.name"] = json!("execute_tool");
        tool["name"] = json!("tool run");
        let trace = json!({"spans": [dup, a, err, tool]});
        let with_errors = graph_of(&trace);
        assert_eq!(
            with_errors
                .events
                .iter()
                .map(|e| e.span_id.as_str())
                .collect::<Vec<_>>(),
            ["a", "e"]
        );
        let Ok(Build::Graph(without)) = build(&trace, false) else {
            panic!("no graph");
        };
        assert_eq!(without.events.len(), 1);
    }

    #[test]
    fn tool_calls_are_refused_naming_the_span_and_malformed_traces_skipped() {
        let tool = json!({"spans": [span("s1", "2026-01-01T00:00:00", "2026-01-01T00:00:01",
            json!([{"role": "tool", "tool_call_id": "c1", "content": "42"}]), "o")]});
        let refused = build(&tool, true).unwrap_err();
        assert_eq!(refused.span, "s1");
        assert!(refused.what.contains("tool calls"), "{refused}");
        let mut bad = span(
            "s2",
            "2026-01-01T00:00:00",
            "2026-01-01T00:00:01",
            json!([]),
            "o",
        );
        bad["attributes"]["gen_ai.input.messages"] = json!("[not json");
        assert!(matches!(
            build(&json!({"spans": [bad]}), true),
            Ok(Build::Skipped(_))
        ));
        assert!(matches!(
            build(&json!({"spans": []}), true),
            Ok(Build::Skipped(_))
        ));
    }

    #[test]
    fn session_names_follow_normalize_file_trace() {
        assert_eq!(
            session_name(&json!({"session_id": "s", "trace_id": "t"}), "f"),
            "s"
        );
        assert_eq!(session_name(&json!({"trace_id": "t"}), "f"), "t");
        assert_eq!(session_name(&json!({"trace_id": ""}), "f"), "f");
        assert_eq!(session_name(&json!({}), "f"), "f");
    }

    /// inference-perf 7de5ef2's own `_reconstruct_raw_calls` and `build_graph` on `agent_trace.json` (corpus
    /// `[0, …, 39]`, ids joined by commas, cap 1 s, seed 42; `tests/fixtures/inference-perf/weka/oracle.py`):
    /// events, predecessors, waits and segments as upstream prints them.
    #[test]
    fn weka_agent_trace_builds_upstreams_graph() {
        use llmbench_data::weka_trace::{Compile, compile, parse_trace};
        let text = include_str!("../../../../tests/fixtures/inference-perf/weka/agent_trace.json");
        let trace = parse_trace(text).expect("trace");
        let corpus: Vec<u32> = (0..40).collect();
        let settings = Compile {
            base_seed: 42,
            default_block_size: 64,
            idle_gap_cap_seconds: 1.0,
        };
        let mut decode = |ids: &[u32]| -> Result<String, std::convert::Infallible> {
            Ok(ids.iter().map(u32::to_string).collect::<Vec<_>>().join(","))
        };
        let graph = weka_graph(compile(&trace, &settings, &corpus, &mut decode).expect("compiles"));
        /// (call, predecessors, wait ms, start ms, end ms, input tokens, max tokens).
        type Row<'a> = (&'a str, Vec<usize>, u64, i64, i64, u32, u32);
        let got: Vec<Row<'_>> = graph
            .events
            .iter()
            .map(|e| {
                (
                    e.span_id.as_str(),
                    e.predecessors.clone(),
                    e.wait_ms,
                    e.t_start_ms,
                    e.t_end_ms,
                    e.input_tokens,
                    e.max_tokens,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("parent_turn_0", vec![], 0, 0, 1500, 14, 5),
                ("sa_explore_s0_turn_0", vec![], 0, 1000, 2000, 9, 3),
                // Temporal: the parent's first turn had ended (1500) when it started.
                ("sa_explore_s1_turn_0", vec![0], 0, 1500, 1900, 4, 2),
                // Causal on its stream's first turn, temporal on the other stream.
                ("sa_explore_s0_turn_1", vec![1, 2], 100, 2100, 2600, 16, 2),
                ("parent_turn_1", vec![0, 3], 500, 3100, 3600, 23, 4),
                ("parent_turn_2", vec![4], 499, 4099, 4599, 20, 3),
            ]
        );
        let segments = |i: usize| -> Vec<(SegmentKind, usize, Option<usize>)> {
            graph.events[i]
                .segments
                .iter()
                .map(|s| (s.kind, s.messages, s.source))
                .collect()
        };
        use SegmentKind::{Output, Shared, Unique};
        assert_eq!(segments(0), [(Unique, 2, None)]);
        assert_eq!(segments(2), [(Unique, 2, None)]);
        assert_eq!(
            segments(3),
            [
                (Shared, 1, Some(1)),
                (Unique, 1, None),
                (Output, 1, Some(1)),
                (Unique, 1, None)
            ]
        );
        assert_eq!(
            segments(4),
            [
                (Shared, 1, Some(0)),
                (Unique, 1, None),
                (Output, 1, Some(0)),
                (Unique, 1, None)
            ]
        );
        assert_eq!(
            segments(5),
            [(Unique, 1, None), (Output, 1, Some(4)), (Unique, 1, None)]
        );
    }
}
