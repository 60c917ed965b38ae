//! The SLO capacity search as users declare it — in a profile (`capacity_search:`), on `llmbench run`, in a
//! BenchmarkRun or a BenchmarkExperiment — and the objectives it judges each load point by. The search itself runs
//! in the launcher (`llmbench::capacity`); this crate only knows what a valid request for one looks like, so the
//! operator can refuse a bad one before any run starts.

use std::fmt;
use std::str::FromStr;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Find the highest load that meets every objective: a coarse ramp brackets the knee, bisection narrows it, and
/// confirmation runs check the answer (and the load just above it).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
/// On the command line the profile's snake_case keys (`min_duration`) are accepted too.
pub struct CapacitySearchSpec {
    /// What is varied: `rate` (requests per second, open loop) or `concurrency` (requests in flight, closed loop).
    pub load: LoadAxis,
    /// Objectives every point is judged by, e.g. `ttft_p99<=500ms`, `itl_p99<=50ms`, `failure_rate<=1%`,
    /// `goodput>=95%`, `output_tokens_per_s>=1000`. A point passes when all hold.
    #[schemars(length(min = 1, max = 16), inner(length(max = 64)))]
    pub slo: Vec<String>,
    /// The first load of the ramp. Default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0))]
    pub start: Option<f64>,
    /// The highest load tried. Default 1024.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0))]
    pub max: Option<f64>,
    /// The ramp's factor from one point to the next (> 1). Default 2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1.0))]
    pub growth: Option<f64>,
    /// Bisection stops once the bracket is this narrow relative to its lower end (rate), or one apart
    /// (concurrency). Default 0.05.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub tolerance: Option<f64>,
    /// Each point runs at least this long (a duration such as 30s). Default 30s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    #[serde(alias = "min_duration")]
    pub min_duration: Option<String>,
    /// Each point sends at least this many requests. Default 200.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    #[serde(alias = "min_requests")]
    pub min_requests: Option<u64>,
    /// The most points the search may run, confirmations included. Default 20.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 2))]
    #[serde(alias = "max_points")]
    pub max_points: Option<u32>,
}

/// The load a capacity search varies.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum LoadAxis {
    /// Requests per second, sent open loop.
    Rate,
    /// Requests kept in flight, closed loop.
    Concurrency,
}

impl LoadAxis {
    pub fn as_str(self) -> &'static str {
        match self {
            LoadAxis::Rate => "rate",
            LoadAxis::Concurrency => "concurrency",
        }
    }
}

impl FromStr for LoadAxis {
    type Err = ObjectiveError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "rate" => Ok(LoadAxis::Rate),
            "concurrency" => Ok(LoadAxis::Concurrency),
            other => Err(ObjectiveError::UnknownLoad(other.to_owned())),
        }
    }
}

/// A summary figure an objective can bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Metric {
    /// A latency statistic in milliseconds.
    Latency(LatencyMetric, Statistic),
    /// Failed / total, as a fraction.
    FailureRate,
    /// Good / judged successful requests, in percent (needs goodput objectives in the profile, or counts every
    /// success as good when the profile sets none — see the launcher).
    Goodput,
    RequestsPerS,
    OutputTokensPerS,
    InputTokensPerS,
    TotalTokensPerS,
}

/// The latencies of `summary.json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum LatencyMetric {
    Ttft,
    Tpot,
    Itl,
    Ntpot,
    E2e,
    TtftFromScheduled,
    E2eFromScheduled,
    ScheduleDelay,
}

impl LatencyMetric {
    const ALL: [(&'static str, LatencyMetric); 8] = [
        ("ttft_from_scheduled", LatencyMetric::TtftFromScheduled),
        ("e2e_from_scheduled", LatencyMetric::E2eFromScheduled),
        ("schedule_delay", LatencyMetric::ScheduleDelay),
        ("ttft", LatencyMetric::Ttft),
        ("tpot", LatencyMetric::Tpot),
        ("itl", LatencyMetric::Itl),
        ("ntpot", LatencyMetric::Ntpot),
        ("e2e", LatencyMetric::E2e),
    ];

    pub fn as_str(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, m)| *m == self)
            .map_or("?", |(name, _)| name)
    }
}

/// A statistic of a latency distribution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Statistic {
    Mean,
    P50,
    P90,
    P95,
    P99,
    P999,
    Max,
}

impl Statistic {
    const ALL: [(&'static str, Statistic); 8] = [
        ("mean", Statistic::Mean),
        ("median", Statistic::P50),
        ("p50", Statistic::P50),
        ("p90", Statistic::P90),
        ("p95", Statistic::P95),
        ("p99", Statistic::P99),
        ("p999", Statistic::P999),
        ("max", Statistic::Max),
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Statistic::Mean => "mean",
            Statistic::P50 => "p50",
            Statistic::P90 => "p90",
            Statistic::P95 => "p95",
            Statistic::P99 => "p99",
            Statistic::P999 => "p999",
            Statistic::Max => "max",
        }
    }
}

/// Which side of the bound a value must be on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Comparison {
    AtMost,
    AtLeast,
}

/// One objective: `metric <= bound` or `metric >= bound`, the bound in the metric's unit (milliseconds for
/// latencies, a fraction for the failure rate, percent for goodput, per second for throughputs).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Objective {
    pub metric: Metric,
    pub comparison: Comparison,
    pub bound: f64,
}

/// Why an objective or a search spec is not valid.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ObjectiveError {
    #[error("objective `{0}` has no `<=` or `>=`; write e.g. ttft_p99<=500ms or goodput>=95%")]
    NoComparison(String),
    #[error(
        "objective `{objective}` names no metric llmbench reports: `{metric}` (latencies: ttft, tpot, itl, ntpot, e2e, \
         ttft_from_scheduled, e2e_from_scheduled, schedule_delay, each with _mean, _p50, _p90, _p95, _p99, _p999 or \
         _max; failure_rate (or error_rate), goodput, requests_per_s, input_tokens_per_s, output_tokens_per_s, \
         total_tokens_per_s)"
    )]
    UnknownMetric { objective: String, metric: String },
    #[error("objective `{objective}`: cannot read the bound `{bound}` ({why})")]
    BadBound {
        objective: String,
        bound: String,
        why: &'static str,
    },
    #[error(
        "objective `{objective}`: a {metric} objective must be `{expected}` (a higher {metric} is {better})"
    )]
    WrongDirection {
        objective: String,
        metric: &'static str,
        expected: &'static str,
        better: &'static str,
    },
    #[error("unknown load `{0}`: expected rate or concurrency")]
    UnknownLoad(String),
    #[error("capacity search: {0}")]
    Spec(String),
}

impl FromStr for Objective {
    type Err = ObjectiveError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let objective = text.trim();
        let (name, comparison, bound) = if let Some((l, r)) = objective.split_once("<=") {
            (l, Comparison::AtMost, r)
        } else if let Some((l, r)) = objective.split_once(">=") {
            (l, Comparison::AtLeast, r)
        } else {
            return Err(ObjectiveError::NoComparison(objective.to_owned()));
        };
        let name = name.trim().to_ascii_lowercase();
        let bound_text = bound.trim();
        let metric = parse_metric(&name).ok_or_else(|| ObjectiveError::UnknownMetric {
            objective: objective.to_owned(),
            metric: name.clone(),
        })?;
        let bad = |why| ObjectiveError::BadBound {
            objective: objective.to_owned(),
            bound: bound_text.to_owned(),
            why,
        };
        let bound = match metric {
            Metric::Latency(..) => parse_millis(bound_text).map_err(bad)?,
            Metric::FailureRate => parse_fraction(bound_text).map_err(bad)?,
            Metric::Goodput => parse_percent(bound_text).map_err(bad)?,
            _ => parse_number(bound_text).map_err(bad)?,
        };
        let wrong = |metric, expected, better| ObjectiveError::WrongDirection {
            objective: objective.to_owned(),
            metric,
            expected,
            better,
        };
        match (metric, comparison) {
            (Metric::Latency(..), Comparison::AtLeast) => {
                return Err(wrong("latency", "<=", "worse"));
            }
            (Metric::FailureRate, Comparison::AtLeast) => {
                return Err(wrong("failure rate", "<=", "worse"));
            }
            (
                Metric::Goodput
                | Metric::RequestsPerS
                | Metric::InputTokensPerS
                | Metric::OutputTokensPerS
                | Metric::TotalTokensPerS,
                Comparison::AtMost,
            ) => return Err(wrong("throughput or goodput", ">=", "better")),
            _ => {}
        }
        Ok(Objective {
            metric,
            comparison,
            bound,
        })
    }
}

impl fmt::Display for Objective {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = match self.comparison {
            Comparison::AtMost => "<=",
            Comparison::AtLeast => ">=",
        };
        match self.metric {
            Metric::Latency(m, s) => write!(f, "{}_{}{op}{}ms", m.as_str(), s.as_str(), self.bound),
            Metric::FailureRate => write!(f, "failure_rate{op}{}%", self.bound * 100.0),
            Metric::Goodput => write!(f, "goodput{op}{}%", self.bound),
            other => write!(f, "{}{op}{}", metric_name(other), self.bound),
        }
    }
}

impl Objective {
    /// The objective's metric as it is written (`ttft_p99`, `failure_rate`, …).
    pub fn metric_name(&self) -> String {
        match self.metric {
            Metric::Latency(m, s) => format!("{}_{}", m.as_str(), s.as_str()),
            other => metric_name(other).to_owned(),
        }
    }

    /// Whether `value` meets the objective.
    pub fn met_by(&self, value: f64) -> bool {
        match self.comparison {
            Comparison::AtMost => value <= self.bound,
            Comparison::AtLeast => value >= self.bound,
        }
    }
}

fn metric_name(metric: Metric) -> &'static str {
    match metric {
        Metric::Latency(..) => "latency",
        Metric::FailureRate => "failure_rate",
        Metric::Goodput => "goodput",
        Metric::RequestsPerS => "requests_per_s",
        Metric::OutputTokensPerS => "output_tokens_per_s",
        Metric::InputTokensPerS => "input_tokens_per_s",
        Metric::TotalTokensPerS => "total_tokens_per_s",
    }
}

fn parse_metric(name: &str) -> Option<Metric> {
    match name {
        "failure_rate" | "error_rate" => return Some(Metric::FailureRate),
        "goodput" => return Some(Metric::Goodput),
        "requests_per_s" | "request_throughput" => return Some(Metric::RequestsPerS),
        "output_tokens_per_s" | "output_throughput" => return Some(Metric::OutputTokensPerS),
        "input_tokens_per_s" => return Some(Metric::InputTokensPerS),
        "total_tokens_per_s" => return Some(Metric::TotalTokensPerS),
        _ => {}
    }
    LatencyMetric::ALL.iter().find_map(|(prefix, latency)| {
        let stat = name.strip_prefix(prefix)?.strip_prefix('_')?;
        Statistic::ALL
            .iter()
            .find(|(s, _)| *s == stat)
            .map(|(_, s)| Metric::Latency(*latency, *s))
    })
}

fn parse_number(text: &str) -> Result<f64, &'static str> {
    let value: f64 = text.parse().map_err(|_| "not a number")?;
    if !value.is_finite() || value < 0.0 {
        return Err("must be a finite number ≥ 0");
    }
    Ok(value)
}

/// A latency bound: `500ms`, `0.5s`, `250us`; a bare number is milliseconds.
fn parse_millis(text: &str) -> Result<f64, &'static str> {
    let (number, scale) = if let Some(n) = text.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = text.strip_suffix("us") {
        (n, 1e-3)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1e3)
    } else {
        (text, 1.0)
    };
    Ok(parse_number(number.trim())? * scale)
}

/// A fraction: `1%` or `0.01`.
fn parse_fraction(text: &str) -> Result<f64, &'static str> {
    let value = match text.strip_suffix('%') {
        Some(p) => parse_number(p.trim())? / 100.0,
        None => parse_number(text)?,
    };
    if value > 1.0 {
        return Err("a rate is at most 100%");
    }
    Ok(value)
}

/// A percentage: `95%` or `95`.
fn parse_percent(text: &str) -> Result<f64, &'static str> {
    let value = parse_number(text.strip_suffix('%').unwrap_or(text).trim())?;
    if value > 100.0 {
        return Err("a percentage is at most 100");
    }
    Ok(value)
}

/// A duration such as `30s`, `2m`, `1m30s`, `500ms`: Go's syntax, as the CRD's other durations.
pub fn parse_duration(text: &str) -> Result<std::time::Duration, ObjectiveError> {
    crate::go_duration::parse(text.trim()).ok_or_else(|| {
        ObjectiveError::Spec(format!(
            "`{text}` is not a duration such as 30s, 2m or 500ms"
        ))
    })
}

/// A search spec with its defaults filled in and every objective parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct CapacitySearch {
    pub load: LoadAxis,
    pub objectives: Vec<Objective>,
    pub start: f64,
    pub max: f64,
    pub growth: f64,
    pub tolerance: f64,
    pub min_duration: std::time::Duration,
    pub min_requests: u64,
    pub max_points: u32,
}

impl CapacitySearch {
    pub(crate) const DEFAULT_START: f64 = 1.0;
    pub(crate) const DEFAULT_MAX: f64 = 1024.0;
    pub(crate) const DEFAULT_GROWTH: f64 = 2.0;
    pub(crate) const DEFAULT_TOLERANCE: f64 = 0.05;
    pub(crate) const DEFAULT_MIN_DURATION: std::time::Duration = std::time::Duration::from_secs(30);
    pub(crate) const DEFAULT_MIN_REQUESTS: u64 = 200;
    pub(crate) const DEFAULT_MAX_POINTS: u32 = 20;
}

impl TryFrom<&CapacitySearchSpec> for CapacitySearch {
    type Error = ObjectiveError;

    fn try_from(spec: &CapacitySearchSpec) -> Result<Self, Self::Error> {
        if spec.slo.is_empty() {
            return Err(ObjectiveError::Spec(
                "no objectives: give at least one in `slo`, e.g. ttft_p99<=500ms".to_owned(),
            ));
        }
        let objectives = spec
            .slo
            .iter()
            .map(|s| s.parse())
            .collect::<Result<Vec<Objective>, _>>()?;
        let search = CapacitySearch {
            load: spec.load,
            objectives,
            start: spec.start.unwrap_or(Self::DEFAULT_START),
            max: spec.max.unwrap_or(Self::DEFAULT_MAX),
            growth: spec.growth.unwrap_or(Self::DEFAULT_GROWTH),
            tolerance: spec.tolerance.unwrap_or(Self::DEFAULT_TOLERANCE),
            min_duration: match &spec.min_duration {
                Some(d) => parse_duration(d)?,
                None => Self::DEFAULT_MIN_DURATION,
            },
            min_requests: spec.min_requests.unwrap_or(Self::DEFAULT_MIN_REQUESTS),
            max_points: spec.max_points.unwrap_or(Self::DEFAULT_MAX_POINTS),
        };
        let spec_error = |m: String| Err(ObjectiveError::Spec(m));
        if !(search.start.is_finite() && search.start > 0.0) {
            return spec_error(format!("start must be > 0, not {}", search.start));
        }
        if search.load == LoadAxis::Concurrency && search.start.fract() != 0.0 {
            return spec_error(format!(
                "a concurrency search starts at a whole number of requests, not {}",
                search.start
            ));
        }
        if !(search.max.is_finite() && search.max >= search.start) {
            return spec_error(format!(
                "max ({}) must be at least start ({})",
                search.max, search.start
            ));
        }
        if !(search.growth.is_finite() && search.growth > 1.0) {
            return spec_error(format!("growth must be > 1, not {}", search.growth));
        }
        if !(search.tolerance > 0.0 && search.tolerance < 1.0) {
            return spec_error(format!(
                "tolerance must be between 0 and 1 (exclusive), not {}",
                search.tolerance
            ));
        }
        if search.min_duration.is_zero() {
            return spec_error("minDuration must be positive".to_owned());
        }
        if search.min_duration > MAX_POINT_DURATION {
            return spec_error(format!(
                "minDuration {} s is above the {} s (30 days) a point may run, the longest stage a profile may \
                 ask for; longer soak tests are a sequence of runs",
                search.min_duration.as_secs(),
                MAX_POINT_DURATION.as_secs()
            ));
        }
        if search.min_requests == 0 {
            return spec_error("minRequests must be at least 1".to_owned());
        }
        if search.max_points < 2 {
            return spec_error("maxPoints must be at least 2".to_owned());
        }
        Ok(search)
    }
}

/// The longest one point of a search may run: 30 days, the profiles' limit on a stage's duration
/// (`llmbench_workload::workload::limits::MAX_DURATION` is this one).
pub const MAX_POINT_DURATION: std::time::Duration = std::time::Duration::from_secs(30 * 24 * 3600);

/// The compact form of a capacity search's outcome, as the launcher's compact summary and a run's status carry
/// it (the full outcome, with every point, is `capacity` in the run's summary.json).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CapacityAnswer {
    /// What was varied: rate (requests per second) or concurrency (requests in flight).
    pub load: LoadAxis,
    /// How the search ended, as the launcher words it (e.g. found, all_passed, none_passed, budget_exhausted).
    #[schemars(length(max = 64))]
    pub status: String,
    /// The highest load that met every objective, when the search found one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<f64>,
    /// The final bracket's passing end: the highest load seen to pass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub passing: Option<f64>,
    /// The final bracket's failing end: the lowest load seen to fail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failing: Option<f64>,
    /// How many load points the search ran, confirmations included.
    pub points: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objectives_parse_with_their_units() {
        let o: Objective = "ttft_p99<=500ms".parse().unwrap();
        assert_eq!(
            o.metric,
            Metric::Latency(LatencyMetric::Ttft, Statistic::P99)
        );
        assert_eq!((o.comparison, o.bound), (Comparison::AtMost, 500.0));
        let o: Objective = "e2e_from_scheduled_p50 <= 1.5s".parse().unwrap();
        assert_eq!(
            o.metric,
            Metric::Latency(LatencyMetric::E2eFromScheduled, Statistic::P50)
        );
        assert_eq!(o.bound, 1500.0);
        let o: Objective = "error_rate<=1%".parse().unwrap();
        assert_eq!((o.metric, o.bound), (Metric::FailureRate, 0.01));
        let o: Objective = "goodput>=95%".parse().unwrap();
        assert_eq!((o.metric, o.bound), (Metric::Goodput, 95.0));
        let o: Objective = "output_tokens_per_s>=1000".parse().unwrap();
        assert_eq!((o.metric, o.bound), (Metric::OutputTokensPerS, 1000.0));
        assert_eq!(
            "itl_median<=50".parse::<Objective>().unwrap().to_string(),
            "itl_p50<=50ms"
        );
    }

    #[test]
    fn bad_objectives_say_what_is_wrong() {
        let err = |s: &str| s.parse::<Objective>().unwrap_err().to_string();
        assert!(
            err("ttft_p98<=5ms").contains("names no metric"),
            "{}",
            err("ttft_p98<=5ms")
        );
        assert!(err("latency<=5ms").contains("`latency`"));
        assert!(err("ttft_p99<500ms").contains("no `<=` or `>=`"));
        assert!(err("ttft_p99>=500ms").contains("must be `<=`"));
        assert!(err("goodput<=95%").contains("must be `>=`"));
        assert!(err("ttft_p99<=fast").contains("not a number"));
        assert!(err("failure_rate<=150%").contains("at most 100%"));
    }

    #[test]
    fn a_spec_fills_defaults_and_refuses_nonsense() {
        let spec = CapacitySearchSpec {
            load: LoadAxis::Rate,
            slo: vec!["ttft_p99<=500ms".into()],
            start: None,
            max: None,
            growth: None,
            tolerance: None,
            min_duration: Some("1m30s".into()),
            min_requests: None,
            max_points: None,
        };
        let search = CapacitySearch::try_from(&spec).unwrap();
        assert_eq!(search.min_duration, std::time::Duration::from_secs(90));
        assert_eq!(
            (search.start, search.growth, search.max_points),
            (1.0, 2.0, 20)
        );
        let bad = |f: fn(&mut CapacitySearchSpec)| {
            let mut s = spec.clone();
            f(&mut s);
            CapacitySearch::try_from(&s).unwrap_err().to_string()
        };
        assert!(bad(|s| s.slo.clear()).contains("no objectives"));
        // 744 hours is 31 days: above the 30 a point (like a stage) may run.
        assert!(
            bad(|s| s.min_duration = Some("744h".into()))
                .contains("minDuration 2678400 s is above")
        );
        assert!(bad(|s| s.growth = Some(1.0)).contains("growth"));
        assert!(bad(|s| s.max = Some(0.5)).contains("at least start"));
        assert!(
            bad(|s| {
                s.load = LoadAxis::Concurrency;
                s.start = Some(1.5)
            })
            .contains("whole number")
        );
        assert!(bad(|s| s.min_duration = Some("soon".into())).contains("not a duration"));
    }
}
