//! inference-perf's circuit breakers (`inference_perf/circuit_breaker/`, `config/circuit_breaker/config.py`, at
//! kubernetes-sigs/inference-perf 7de5ef2): each finished request's lifecycle metric is fed to every breaker; a
//! breaker whose `metrics.matches` (JMESPath, any true) selects it counts a hit when any of its `metrics.rules`
//! holds (every selected request is a hit when there are no rules); its triggers — `consecutive` hits, or a
//! `rate_over_window` of hits among the samples of the last `window_sec` once `min_samples` are in — open it, and
//! it stays open. The load generator checks the breakers named in `load.circuit_breakers` and leaves the running
//! stage when one is open; as none ever closes, every later stage is left at once too, so the run stops.
//!
//! The expressions are a subset of JMESPath evaluated as `bool(expression.search(metric))` over the metric's
//! `model_dump(mode="json", exclude_unset=True, exclude_none=True)`: field paths, raw strings `'…'`, JSON literals
//! `` `…` ``, comparisons, `&&`, `||`, `!`, parentheses, and the functions `contains`, `starts_with`,
//! `ends_with` and `length`. The fields are read straight off the request's record, so feeding a breaker builds no
//! JSON: `stage_id`, `session_id`, `scheduled_time`, `start_time`, `end_time` (seconds on the run's clock), `error`
//! (present only for a failure), `error.error_type` and `error.error_msg` (inference-perf's exception names, e.g.
//! `TimeoutError`, `HTTP Error 503`), `info.input_tokens`, `info.request_metrics.text.input_tokens` and
//! `info.response_metrics.output_tokens`. A path naming anything else (the request and response bodies llmbench
//! does not keep) is refused when the profile is read.

use std::collections::VecDeque;
use std::time::Duration;

use llmbench_model::inference_perf;
use llmbench_model::record::RequestRecord;

use super::error::WorkloadError;
use super::reader::{At, Ctx, MapReader};

/// One configured breaker (`circuit_breakers[]`), enabled by `load.circuit_breakers`.
#[derive(Debug, Clone, PartialEq)]
pub struct CircuitBreaker {
    pub name: String,
    /// `metrics.matches`: a request is watched when any holds.
    pub matches: Vec<Expr>,
    /// `metrics.rules`: a watched request is a hit when any holds (all are hits when there are none).
    pub rules: Vec<Expr>,
    pub triggers: Vec<Trigger>,
}

/// What opens a breaker (any of its triggers).
#[derive(Debug, Clone, PartialEq)]
pub enum Trigger {
    /// `consecutive`: `threshold` hits in a row.
    Consecutive { threshold: u64 },
    /// `rate_over_window`: among the samples of the last `window`, hits / samples ≥ `threshold`, once there are
    /// at least `min_samples`.
    RateOverWindow {
        window: Duration,
        threshold: f64,
        min_samples: u64,
    },
}

/// A compiled expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Field(Field),
    Literal(Json),
    Not(Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    Compare(Box<Expr>, Comparator, Box<Expr>),
    Call(Function, Vec<Expr>),
}

/// The metric fields an expression can read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    StageId,
    SessionId,
    ScheduledTime,
    StartTime,
    EndTime,
    Error,
    ErrorType,
    ErrorMsg,
    InputTokens,
    OutputTokens,
}

/// The paths of inference-perf's metric that name each field.
const FIELDS: &[(&str, Field)] = &[
    ("stage_id", Field::StageId),
    ("session_id", Field::SessionId),
    ("scheduled_time", Field::ScheduledTime),
    ("start_time", Field::StartTime),
    ("end_time", Field::EndTime),
    ("error", Field::Error),
    ("error.error_type", Field::ErrorType),
    ("error.error_msg", Field::ErrorMsg),
    ("info.input_tokens", Field::InputTokens),
    ("info.request_metrics.text.input_tokens", Field::InputTokens),
    ("info.response_metrics.output_tokens", Field::OutputTokens),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Comparator {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Function {
    Contains,
    StartsWith,
    EndsWith,
    Length,
}

/// A JMESPath value.
#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    Number(f64),
    String(String),
    /// A present object (`error`): only its truthiness and `length` matter here.
    Object(usize),
    Array(Vec<Json>),
}

impl Json {
    /// JMESPath's truthiness (inside `&&`, `||`, `!`): false, null and empty strings, arrays and objects are
    /// false; every number is true.
    fn truthy(&self) -> bool {
        match self {
            Json::Null | Json::Bool(false) => false,
            Json::String(s) => !s.is_empty(),
            Json::Array(a) => !a.is_empty(),
            Json::Object(n) => *n > 0,
            Json::Bool(true) | Json::Number(_) => true,
        }
    }

    /// Python's `bool()` of the search result, as the breaker takes it: JMESPath's truthiness, but 0 is false.
    fn python_truthy(&self) -> bool {
        match self {
            Json::Number(n) => *n != 0.0,
            other => other.truthy(),
        }
    }

    fn from_serde(value: &serde_json::Value) -> Json {
        match value {
            serde_json::Value::Null => Json::Null,
            serde_json::Value::Bool(b) => Json::Bool(*b),
            serde_json::Value::Number(n) => Json::Number(n.as_f64().unwrap_or(f64::NAN)),
            serde_json::Value::String(s) => Json::String(s.clone()),
            serde_json::Value::Array(a) => Json::Array(a.iter().map(Json::from_serde).collect()),
            serde_json::Value::Object(o) => Json::Object(o.len()),
        }
    }
}

impl Expr {
    /// `bool(expression.search(metric))` for the metric of `record`.
    pub fn holds(&self, record: &RequestRecord) -> bool {
        self.eval(record).python_truthy()
    }

    fn eval(&self, r: &RequestRecord) -> Json {
        match self {
            Expr::Field(field) => field_value(*field, r),
            Expr::Literal(value) => value.clone(),
            Expr::Not(inner) => Json::Bool(!inner.eval(r).truthy()),
            Expr::And(a, b) => {
                let left = a.eval(r);
                if left.truthy() { b.eval(r) } else { left }
            }
            Expr::Or(a, b) => {
                let left = a.eval(r);
                if left.truthy() { left } else { b.eval(r) }
            }
            Expr::Compare(a, op, b) => compare(&a.eval(r), *op, &b.eval(r)),
            Expr::Call(function, args) => {
                let args: Vec<Json> = args.iter().map(|a| a.eval(r)).collect();
                call(*function, &args)
            }
        }
    }
}

fn field_value(field: Field, r: &RequestRecord) -> Json {
    let secs = |ns: u64| Json::Number(ns as f64 / 1e9);
    match field {
        Field::StageId => Json::Number(f64::from(r.stage)),
        Field::SessionId => r
            .conversation
            .map_or(Json::Null, |c| Json::String(c.id.to_string())),
        Field::ScheduledTime => secs(r.scheduled_ns),
        Field::StartTime => secs(r.sent_ns),
        Field::EndTime => secs(r.end_ns),
        Field::Error => match inference_perf::failure(r) {
            Some(_) => Json::Object(2),
            None => Json::Null,
        },
        Field::ErrorType => {
            inference_perf::failure(r).map_or(Json::Null, |(kind, _)| Json::String(kind))
        }
        Field::ErrorMsg => {
            inference_perf::failure(r).map_or(Json::Null, |(_, message)| Json::String(message))
        }
        Field::InputTokens => Json::Number(f64::from(r.input_tokens)),
        Field::OutputTokens => Json::Number(f64::from(r.output_tokens())),
    }
}

/// JMESPath comparisons: `==`/`!=` on any values; the ordering ones on numbers only (null otherwise).
fn compare(a: &Json, op: Comparator, b: &Json) -> Json {
    match op {
        Comparator::Eq => Json::Bool(a == b),
        Comparator::Ne => Json::Bool(a != b),
        _ => match (a, b) {
            (Json::Number(x), Json::Number(y)) => Json::Bool(match op {
                Comparator::Lt => x < y,
                Comparator::Le => x <= y,
                Comparator::Gt => x > y,
                _ => x >= y,
            }),
            _ => Json::Null,
        },
    }
}

fn call(function: Function, args: &[Json]) -> Json {
    match (function, args) {
        (Function::Contains, [Json::String(s), Json::String(needle)]) => {
            Json::Bool(s.contains(needle.as_str()))
        }
        (Function::Contains, [Json::Array(items), needle]) => Json::Bool(items.contains(needle)),
        (Function::StartsWith, [Json::String(s), Json::String(prefix)]) => {
            Json::Bool(s.starts_with(prefix.as_str()))
        }
        (Function::EndsWith, [Json::String(s), Json::String(suffix)]) => {
            Json::Bool(s.ends_with(suffix.as_str()))
        }
        (Function::Length, [Json::String(s)]) => Json::Number(s.chars().count() as f64),
        (Function::Length, [Json::Array(a)]) => Json::Number(a.len() as f64),
        (Function::Length, [Json::Object(n)]) => Json::Number(*n as f64),
        // A type error in jmespath.py raises; the breaker's `_search` catches it and counts it as false.
        _ => Json::Null,
    }
}

/// Compiles `text`, or says what is wrong with it.
pub fn compile(text: &str) -> Result<Expr, String> {
    let tokens = lex(text)?;
    let mut parser = Parser { tokens, at: 0 };
    let expr = parser.or()?;
    if let Some(token) = parser.tokens.get(parser.at) {
        return Err(format!("unexpected {token:?} after a complete expression"));
    }
    Ok(expr)
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Ident(String),
    Raw(String),
    Literal(Json),
    Dot,
    Comma,
    Open,
    Close,
    Not,
    And,
    Or,
    Cmp(Comparator),
}

fn lex(text: &str) -> Result<Vec<Token>, String> {
    let chars: Vec<char> = text.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        match c {
            ' ' | '\t' | '\n' | '\r' => i += 1,
            '.' => {
                tokens.push(Token::Dot);
                i += 1;
            }
            ',' => {
                tokens.push(Token::Comma);
                i += 1;
            }
            '(' => {
                tokens.push(Token::Open);
                i += 1;
            }
            ')' => {
                tokens.push(Token::Close);
                i += 1;
            }
            '&' if next == Some('&') => {
                tokens.push(Token::And);
                i += 2;
            }
            '|' if next == Some('|') => {
                tokens.push(Token::Or);
                i += 2;
            }
            '!' if next == Some('=') => {
                tokens.push(Token::Cmp(Comparator::Ne));
                i += 2;
            }
            '!' => {
                tokens.push(Token::Not);
                i += 1;
            }
            '=' if next == Some('=') => {
                tokens.push(Token::Cmp(Comparator::Eq));
                i += 2;
            }
            '<' | '>' => {
                let eq = next == Some('=');
                tokens.push(Token::Cmp(match (c, eq) {
                    ('<', true) => Comparator::Le,
                    ('<', false) => Comparator::Lt,
                    (_, true) => Comparator::Ge,
                    _ => Comparator::Gt,
                }));
                i += 1 + usize::from(eq);
            }
            '\'' => {
                let mut s = String::new();
                i += 1;
                loop {
                    match chars.get(i) {
                        None => return Err("a raw string '…' is not closed".to_owned()),
                        Some('\\') if chars.get(i + 1) == Some(&'\'') => {
                            s.push('\'');
                            i += 2;
                        }
                        Some('\'') => {
                            i += 1;
                            break;
                        }
                        Some(&ch) => {
                            s.push(ch);
                            i += 1;
                        }
                    }
                }
                tokens.push(Token::Raw(s));
            }
            '`' => {
                let start = i + 1;
                let end = chars[start..]
                    .iter()
                    .position(|ch| *ch == '`')
                    .map(|p| start + p)
                    .ok_or("a JSON literal `…` is not closed")?;
                let body: String = chars[start..end].iter().collect();
                let value: serde_json::Value = serde_json::from_str(body.trim())
                    .map_err(|e| format!("`{body}` is not a JSON literal: {e}"))?;
                tokens.push(Token::Literal(Json::from_serde(&value)));
                i = end + 1;
            }
            c if c.is_ascii_alphabetic() || c == '_' => {
                let start = i;
                while chars
                    .get(i)
                    .is_some_and(|ch| ch.is_ascii_alphanumeric() || *ch == '_')
                {
                    i += 1;
                }
                tokens.push(Token::Ident(chars[start..i].iter().collect()));
            }
            other => {
                return Err(format!(
                    "`{other}` is not part of the JMESPath llmbench evaluates (field paths, 'raw strings', \
                     `literals`, comparisons, &&, ||, !, parentheses, contains/starts_with/ends_with/length)"
                ));
            }
        }
    }
    Ok(tokens)
}

struct Parser {
    tokens: Vec<Token>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn take(&mut self) -> Option<Token> {
        let token = self.tokens.get(self.at).cloned();
        self.at += 1;
        token
    }

    fn or(&mut self) -> Result<Expr, String> {
        let mut left = self.and()?;
        while self.peek() == Some(&Token::Or) {
            self.at += 1;
            left = Expr::Or(Box::new(left), Box::new(self.and()?));
        }
        Ok(left)
    }

    fn and(&mut self) -> Result<Expr, String> {
        let mut left = self.not()?;
        while self.peek() == Some(&Token::And) {
            self.at += 1;
            left = Expr::And(Box::new(left), Box::new(self.not()?));
        }
        Ok(left)
    }

    fn not(&mut self) -> Result<Expr, String> {
        if self.peek() == Some(&Token::Not) {
            self.at += 1;
            return Ok(Expr::Not(Box::new(self.not()?)));
        }
        self.comparison()
    }

    fn comparison(&mut self) -> Result<Expr, String> {
        let left = self.primary()?;
        if let Some(Token::Cmp(op)) = self.peek().cloned() {
            self.at += 1;
            let right = self.primary()?;
            return Ok(Expr::Compare(Box::new(left), op, Box::new(right)));
        }
        Ok(left)
    }

    fn primary(&mut self) -> Result<Expr, String> {
        match self.take() {
            Some(Token::Open) => {
                let inner = self.or()?;
                match self.take() {
                    Some(Token::Close) => Ok(inner),
                    _ => Err("a `(` is not closed".to_owned()),
                }
            }
            Some(Token::Raw(s)) => Ok(Expr::Literal(Json::String(s))),
            Some(Token::Literal(value)) => Ok(Expr::Literal(value)),
            Some(Token::Not) => Ok(Expr::Not(Box::new(self.primary()?))),
            Some(Token::Ident(name)) if self.peek() == Some(&Token::Open) => {
                self.at += 1;
                let function = match name.as_str() {
                    "contains" => Function::Contains,
                    "starts_with" => Function::StartsWith,
                    "ends_with" => Function::EndsWith,
                    "length" => Function::Length,
                    other => {
                        return Err(format!(
                            "the function `{other}` (llmbench evaluates contains, starts_with, ends_with and length)"
                        ));
                    }
                };
                let mut args = Vec::new();
                if self.peek() != Some(&Token::Close) {
                    loop {
                        args.push(self.or()?);
                        match self.take() {
                            Some(Token::Comma) => {}
                            Some(Token::Close) => break,
                            _ => return Err(format!("the call of `{name}` is not closed")),
                        }
                    }
                } else {
                    self.at += 1;
                }
                let arity = if function == Function::Length { 1 } else { 2 };
                if args.len() != arity {
                    return Err(format!(
                        "`{name}` takes {arity} argument(s), found {}",
                        args.len()
                    ));
                }
                Ok(Expr::Call(function, args))
            }
            Some(Token::Ident(first)) => {
                let mut path = first;
                while self.peek() == Some(&Token::Dot) {
                    self.at += 1;
                    match self.take() {
                        Some(Token::Ident(part)) => {
                            path.push('.');
                            path.push_str(&part);
                        }
                        _ => return Err(format!("`{path}.` needs a field name after the dot")),
                    }
                }
                field(&path).map(Expr::Field)
            }
            Some(other) => Err(format!("unexpected {other:?}")),
            None => Err("the expression ends too early".to_owned()),
        }
    }
}

/// The field a path names, or why it names none.
fn field(path: &str) -> Result<Field, String> {
    if let Some((_, field)) = FIELDS.iter().find(|(p, _)| *p == path) {
        return Ok(*field);
    }
    let known: Vec<&str> = FIELDS.iter().map(|(p, _)| *p).collect();
    let hint = super::reader::nearest_key(path, known.iter().copied())
        .map(|k| format!(" — did you mean `{k}`?"))
        .unwrap_or_default();
    Err(format!(
        "`{path}` is no field of a request's metric that llmbench reads (known: {}){hint}",
        known.join(", ")
    ))
}

/// The top-level `circuit_breakers` list, each checked as upstream's pydantic models check it.
pub(crate) fn parse_configs(
    ctx: &mut Ctx,
    f: &At<'_>,
) -> Result<Vec<CircuitBreaker>, WorkloadError> {
    let mut breakers: Vec<CircuitBreaker> = Vec::new();
    for item in f.seq(ctx)? {
        let mut m = item.map(ctx)?;
        let name = m
            .require(
                ctx,
                "name",
                "a circuit breaker has a `name`, which load.circuit_breakers lists",
            )?
            .str(ctx)?
            .to_owned();
        let metrics_field = m.require(
            ctx,
            "metrics",
            "a circuit breaker watches `metrics: {matches, rules}`",
        )?;
        let mut metrics = metrics_field.map(ctx)?;
        let expressions = |ctx: &mut Ctx,
                           metrics: &mut MapReader<'_>,
                           key: &str|
         -> Result<Vec<Expr>, WorkloadError> {
            let Some(list) = metrics.get(key) else {
                return Ok(Vec::new());
            };
            let mut exprs = Vec::new();
            for e in list.seq(ctx)? {
                let text = e.str(ctx)?;
                exprs.push(compile(text).map_err(|why| {
                    e.invalid(
                        ctx,
                        format!("`{text}` is not an expression llmbench can evaluate: {why}"),
                    )
                })?);
            }
            Ok(exprs)
        };
        let matches = expressions(ctx, &mut metrics, "matches")?;
        if matches.is_empty() {
            return Err(metrics_field.invalid(ctx, "`matches` needs at least one expression"));
        }
        let rules = expressions(ctx, &mut metrics, "rules")?;
        metrics.finish(ctx, &[]);
        let mut triggers = Vec::new();
        let triggers_field = m.require(ctx, "triggers", "a circuit breaker has `triggers`")?;
        for t in triggers_field.seq(ctx)? {
            let mut tm = t.map(ctx)?;
            let kind_field = tm.require(
                ctx,
                "type",
                "a trigger has a `type`: consecutive or rate_over_window",
            )?;
            let trigger = match kind_field.str(ctx)? {
                "consecutive" => {
                    let threshold = tm
                        .require(
                            ctx,
                            "threshold",
                            "a consecutive trigger has a `threshold` (≥ 1)",
                        )?
                        .positive_u64(ctx)?;
                    Trigger::Consecutive { threshold }
                }
                "rate_over_window" => {
                    let window_field = tm.require(
                        ctx,
                        "window_sec",
                        "a rate_over_window trigger has `window_sec` (> 0)",
                    )?;
                    let window_s = window_field.f64(ctx)?;
                    if !(window_s.is_finite() && window_s > 0.0) {
                        return Err(window_field
                            .invalid(ctx, format!("must be greater than 0, found {window_s}")));
                    }
                    let threshold_field = tm.require(
                        ctx,
                        "threshold",
                        "a rate_over_window trigger has a `threshold` hit rate in [0, 1]",
                    )?;
                    let threshold = threshold_field.f64(ctx)?;
                    if !(0.0..=1.0).contains(&threshold) {
                        return Err(threshold_field
                            .invalid(ctx, format!("must be within [0, 1], found {threshold}")));
                    }
                    let min_samples = match tm.get("min_samples") {
                        Some(f) => f.u64(ctx)?,
                        None => 0,
                    };
                    Trigger::RateOverWindow {
                        window: Duration::from_secs_f64(window_s),
                        threshold,
                        min_samples,
                    }
                }
                other => {
                    return Err(kind_field.invalid(
                        ctx,
                        format!("unknown trigger type `{other}` (inference-perf has consecutive and rate_over_window)"),
                    ));
                }
            };
            tm.finish(ctx, &[]);
            triggers.push(trigger);
        }
        m.finish(ctx, &[]);
        if breakers.iter().any(|b| b.name == name) {
            return Err(item.invalid(ctx, format!("a second circuit breaker named `{name}`")));
        }
        breakers.push(CircuitBreaker {
            name,
            matches,
            rules,
            triggers,
        });
    }
    Ok(breakers)
}

/// The breakers `load.circuit_breakers` names, in its order; a name that no breaker has is an error, as upstream's
/// `get_circuit_breaker` raises "Unknown circuit breaker".
pub(crate) fn enabled(
    ctx: &Ctx,
    configured: Vec<CircuitBreaker>,
    names: &[(String, String, u32)],
) -> Result<Vec<CircuitBreaker>, WorkloadError> {
    let mut enabled = Vec::with_capacity(names.len());
    for (name, path, line) in names {
        let Some(breaker) = configured.iter().find(|b| &b.name == name) else {
            let hint = super::reader::nearest_key(name, configured.iter().map(|b| b.name.as_str()))
                .map(|k| format!(" — did you mean `{k}`?"))
                .unwrap_or_default();
            return Err(ctx.invalid(
                path,
                *line,
                format!("Unknown circuit breaker: {name} (the top-level `circuit_breakers` defines none by that name){hint}"),
            ));
        };
        enabled.push(breaker.clone());
    }
    Ok(enabled)
}

/// The state of the run's breakers, fed one finished request at a time.
#[derive(Debug)]
pub struct Breakers {
    breakers: Vec<Running>,
}

#[derive(Debug)]
struct Running {
    config: CircuitBreaker,
    consecutive: Vec<u64>,
    /// Per `rate_over_window` trigger: (end time ns, hit) of the samples in its window.
    windows: Vec<VecDeque<(u64, bool)>>,
    open: bool,
}

impl Breakers {
    pub fn new(configs: &[CircuitBreaker]) -> Self {
        Breakers {
            breakers: configs
                .iter()
                .map(|config| Running {
                    consecutive: vec![0; config.triggers.len()],
                    windows: vec![VecDeque::new(); config.triggers.len()],
                    config: config.clone(),
                    open: false,
                })
                .collect(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.breakers.is_empty()
    }

    /// Feeds one finished request (its sample time is its end); returns the name of the first open breaker, in
    /// `load.circuit_breakers` order, if any is open now.
    pub fn feed(&mut self, record: &RequestRecord) -> Option<&str> {
        for breaker in &mut self.breakers {
            let config = &breaker.config;
            if !config.matches.iter().any(|m| m.holds(record)) {
                continue;
            }
            let hit = config.rules.is_empty() || config.rules.iter().any(|r| r.holds(record));
            for (i, trigger) in config.triggers.iter().enumerate() {
                let fired = match trigger {
                    Trigger::Consecutive { threshold } => {
                        let run = &mut breaker.consecutive[i];
                        *run = if hit { *run + 1 } else { 0 };
                        *run >= *threshold
                    }
                    Trigger::RateOverWindow {
                        window,
                        threshold,
                        min_samples,
                    } => {
                        let samples = &mut breaker.windows[i];
                        let now = record.end_ns;
                        samples.push_back((now, hit));
                        let cutoff = now.saturating_sub(window.as_nanos() as u64);
                        while samples.front().is_some_and(|(t, _)| *t < cutoff) {
                            samples.pop_front();
                        }
                        let total = samples.len() as u64;
                        let hits = samples.iter().filter(|(_, h)| *h).count() as f64;
                        total >= *min_samples && total > 0 && hits / total as f64 >= *threshold
                    }
                };
                breaker.open |= fired;
            }
        }
        self.breakers
            .iter()
            .find(|b| b.open)
            .map(|b| b.config.name.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use llmbench_model::record::ErrorClass;

    fn timeout(end_ns: u64) -> RequestRecord {
        RequestRecord::builder(1)
            .end(end_ns)
            .error(ErrorClass::Timeout, "timed out")
            .build()
    }

    fn ok(end_ns: u64) -> RequestRecord {
        RequestRecord::builder(2).end(end_ns).ok().build()
    }

    #[test]
    fn expressions_read_the_record_as_inference_perfs_metric() {
        let expr = compile("error.error_type == 'TimeoutError'").expect("compiles");
        assert!(expr.holds(&timeout(1)));
        assert!(!expr.holds(&ok(1)));
        // `error` is absent for a success (exclude_none), so a bare `error` selects failures.
        assert!(compile("error").expect("compiles").holds(&timeout(1)));
        assert!(!compile("error").expect("compiles").holds(&ok(1)));
        let expr = compile("!(error) || contains(error.error_msg, 'timed')").expect("compiles");
        assert!(expr.holds(&ok(1)) && expr.holds(&timeout(1)));
        // Ordering comparisons on numbers; a JSON literal is a number.
        let expr = compile("stage_id >= `0` && info.input_tokens < `5`").expect("compiles");
        assert!(expr.holds(&ok(1)));
        // Python's bool() of the result: 0 is false.
        assert!(!compile("stage_id").expect("compiles").holds(&ok(1)));
    }

    #[test]
    fn unknown_fields_and_syntax_are_refused_with_a_hint() {
        let e = compile("error.error_typ == 'x'").expect_err("refused");
        assert!(e.contains("did you mean `error.error_type`?"), "{e}");
        let e = compile("request_data == 'x'").expect_err("refused");
        assert!(e.contains("no field"), "{e}");
        assert!(compile("stage_id > 5").is_err());
        assert!(compile("'open").is_err());
        assert!(compile("foo(stage_id)").is_err());
    }

    #[test]
    fn triggers_open_as_inference_perfs_do_and_stay_open() {
        let breaker = CircuitBreaker {
            name: "timeouts".to_owned(),
            matches: vec![compile("error.error_type == 'TimeoutError'").expect("compiles")],
            rules: Vec::new(),
            triggers: vec![Trigger::Consecutive { threshold: 3 }],
        };
        let mut breakers = Breakers::new(std::slice::from_ref(&breaker));
        // Successes are not watched: they neither count nor break the run of hits.
        assert_eq!(breakers.feed(&timeout(1)), None);
        assert_eq!(breakers.feed(&ok(2)), None);
        assert_eq!(breakers.feed(&timeout(3)), None);
        assert_eq!(breakers.feed(&timeout(4)), Some("timeouts"));
        assert_eq!(breakers.feed(&ok(5)), Some("timeouts"));
        // 80 % of the last 2.5 s, at least 2 samples: hits at 0 s and 1 s, a miss at 3 s, then 2 hits of 2 at
        // 3.5 s … once the samples before 1 s have left the window.
        let selective = CircuitBreaker {
            name: "rate".to_owned(),
            matches: vec![compile("`true`").expect("compiles")],
            rules: vec![compile("error").expect("compiles")],
            triggers: vec![Trigger::RateOverWindow {
                window: Duration::from_millis(2500),
                threshold: 0.8,
                min_samples: 2,
            }],
        };
        let s = 1_000_000_000;
        let mut breakers = Breakers::new(&[selective]);
        assert_eq!(breakers.feed(&timeout(0)), None, "1 sample < min_samples");
        assert_eq!(breakers.feed(&ok(s)), None, "1 of 2");
        assert_eq!(breakers.feed(&timeout(3 * s)), None, "1 of 2 (0 s left)");
        assert_eq!(breakers.feed(&timeout(3 * s + s / 2)), None, "2 of 3");
        assert_eq!(
            breakers.feed(&timeout(4 * s)),
            Some("rate"),
            "3 of 3 (1 s left)"
        );
    }
}
