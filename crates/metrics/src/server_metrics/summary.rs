//! Per-window summaries of the scraped metrics, computed as Prometheus computes the queries inference-perf issues,
//! from the raw scrapes streamed back in one pass. Pure: no I/O but the optional file reader at the end.
//!
//! Metrics are summarized by catalogue key (`running`, `ttft`, …) whichever engine's name they came by, in the key's
//! unit ([`catalogue`](super::catalogue)); each target records the engine its names belong to, and a target none of
//! whose names is known gets a warning saying its families were kept raw.
//!
//! Per window (each stage and the whole run) and per target:
//! - **gauges** (and untyped metrics, and a summary's quantile series): `avg_over_time`, min, max, and
//!   `quantile_over_time` p50/p90/p99 (Prometheus' quantile: sort, rank = q·(n−1), linear interpolation) over the
//!   scrapes with `start_s ≤ t_s ≤ end_s`. A target's several series of one gauge (engines, models) are first combined
//!   per scrape: counts summed, fractions averaged ([`Combine`]).
//! - **counters**: the increase over the window, reset-aware as Prometheus' `increase()` (a drop means the counter
//!   restarted: the value after the drop is all increase), summed over series; `per_second` = increase / the window's
//!   duration. Unlike Prometheus, nothing is extrapolated to the window's edges: the increase is between two scrapes.
//! - **histograms**: per-window increases of every `_bucket` series, summed over series by `le`
//!   (`sum(increase(x_bucket[w])) by (le)`), then `histogram_quantile` for p50/p90/p99 (linear interpolation inside
//!   the bucket, the lowest bucket starting at 0 when its bound is positive, a quantile in the `+Inf` bucket answered
//!   with the last finite bound, no observations → no quantile); mean = Δsum/Δcount (0 when Δcount is 0),
//!   count = Δcount, per_second = Δcount / duration.
//! - **derived counters**, for a target without the counter: built from others it has (llama.cpp's prompt tokens
//!   = computed + cached; TGI's from its prompt-length histogram's Δsum), named after what they are built from.
//! - **ratios** (prefix cache hit rate …): Δnumerator / Δdenominator · 100 (0 when the denominator did not move), by
//!   the first formula whose counters the target has; absent when it has none. Never a 0 for a missing metric.
//!
//! Which scrapes bound an increase: the base is the last scrape at or before `start_s` when it is at most
//! `1.5 × interval` before it (else the first scrape inside); the end is the first scrape at or after `end_s` when it
//! is at most `1.5 × interval` after it (else the last scrape inside). One interval is what a scrape schedule
//! guarantees; the extra half absorbs tick jitter and slow responses. The increase therefore covers up to one
//! interval beyond each edge — it never misses an event inside the window, at the price of possibly counting one
//! just outside (inference-perf's own stage queries add a whole scrape interval plus 2 s after each stage for the
//! same reason). Where the run is quiet beyond an edge, the bound may be any scrape in that quiet time, however far:
//! it has seen nothing else of the run, while a scrape inside would miss the events near the edge. The run is quiet
//! after a stage until the next stage begins (`began_s`: its warm-ups and a probe before it included), after the
//! last stage for good (however late a loaded machine takes the scraper's final scrape), and before a stage with no
//! warm-up since the previous stage's end (before the first, since the scraper started).
//!
//! A series that first appears mid-run on a target whose previous scrape was complete counted from 0 (Prometheus
//! would drop its first value; a new label set means new events).
//!
//! **Aggregate** across targets, by key: counters (derived ones included) and histograms summed, ratios as
//! Σnumerators / Σdenominators; count-like gauges summed and fraction-like gauges averaged per scrape round (a round is one tick's scrapes of all targets that answered), then summarized as above.
//!
//! **Bounds**: memory follows the number of series and windows open at once, never the run's length: counters keep
//! one value per series (plus a base per series for each open window), and gauge quantiles keep at most
//! [`MAX_GAUGE_VALUES`] values per window — beyond that a uniform subsample (every 2^k-th scrape), so mean, min and
//! max stay exact and quantiles become approximate only past about 68 minutes of 1 s scrapes in one window. Metrics
//! outside the [`catalogue`](super::catalogue) are summarized raw, at most [`MAX_UNKNOWN_FAMILIES`] per target.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::ServerMetricsError;
use super::catalogue::{self, Combine, Engine, Key, Ratio, Source};
use super::jsonl::{Scrape, read_jsonl};
use super::parse::{MetricKind, Role, Sample, parse_value, resolve};
use super::scrape::{MAX_WARNINGS, ScrapeOutcome, TargetStatus};

/// Gauge values kept per metric per window for quantiles.
pub(crate) const MAX_GAUGE_VALUES: usize = 4096;
/// Metric families outside the catalogue summarized per target; the rest are counted.
pub(crate) const MAX_UNKNOWN_FAMILIES: usize = 200;

/// A span of the run's clock, seconds since t0, both ends included.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Window {
    pub start_s: f64,
    pub end_s: f64,
}

/// One stage's window.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StageWindow {
    pub stage: usize,
    pub start_s: f64,
    pub end_s: f64,
    /// When the stage's first request went out, when earlier than `start_s` (its warm-ups, a probe just before
    /// it): nothing of the run is sent between the previous stage's end and this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub began_s: Option<f64>,
}

/// The server metrics part of `summary.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerMetricsSummary {
    pub interval_s: f64,
    pub targets: Vec<TargetStatus>,
    pub overall: WindowSummary,
    pub stages: Vec<WindowSummary>,
    /// Problems reading the file back (damaged lines), or the scraper's own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// Figures of one window: per target, and across targets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WindowSummary {
    /// The stage index; absent for the whole run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<usize>,
    pub start_s: f64,
    pub end_s: f64,
    pub targets: Vec<TargetMetrics>,
    pub aggregate: Vec<MetricSummary>,
}

/// One target's figures in a window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TargetMetrics {
    pub url: String,
    pub metrics: Vec<MetricSummary>,
    /// Metric families beyond [`MAX_UNKNOWN_FAMILIES`] not summarized.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unknown_families_omitted: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One metric's figures: `{name, key?, unit?, kind, …figures}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricSummary {
    /// The Prometheus name (a histogram's family name, a counter's sample name), or a ratio's description.
    pub name: String,
    /// The catalogue's short key, for well-known metrics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    #[serde(flatten)]
    pub figures: Figures,
}

/// The figures of one kind of metric; `kind` in JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Figures {
    Gauge {
        mean: f64,
        min: f64,
        max: f64,
        p50: f64,
        p90: f64,
        p99: f64,
        /// Scrapes the figures are over.
        samples: u64,
    },
    Counter {
        increase: f64,
        per_second: f64,
    },
    Histogram {
        count: f64,
        per_second: f64,
        mean: f64,
        /// Absent when nothing was observed in the window.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        p50: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        p90: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        p99: Option<f64>,
    },
    Ratio {
        percent: f64,
    },
}

impl WindowSummary {
    /// The aggregate figures of the metric with catalogue key `key` (or name).
    pub fn aggregate_metric(&self, key_or_name: &str) -> Option<&MetricSummary> {
        find(&self.aggregate, key_or_name)
    }
}

/// The metric in `metrics` whose key or name is `key_or_name`.
pub fn find<'a>(metrics: &'a [MetricSummary], key_or_name: &str) -> Option<&'a MetricSummary> {
    metrics
        .iter()
        .find(|m| m.key.as_deref() == Some(key_or_name) || m.name == key_or_name)
}

// ---- Prometheus' arithmetic ----

/// Prometheus' `quantile` over a set of values: rank = q·(n−1), linear interpolation between neighbours.
/// `values` must be sorted ascending and non-empty.
pub(crate) fn quantile_sorted(q: f64, values: &[f64]) -> f64 {
    let n = values.len();
    if n == 0 {
        return f64::NAN;
    }
    let rank = q * (n - 1) as f64;
    let lower = rank.floor().max(0.0) as usize;
    let upper = (lower + 1).min(n - 1);
    let weight = rank - rank.floor();
    values[lower.min(n - 1)] * (1.0 - weight) + values[upper] * weight
}

/// Prometheus' `histogram_quantile` over cumulative buckets `(upper bound, count)` sorted by bound. None when there
/// is nothing to answer from (no `+Inf` bucket, fewer than two buckets, or no observations).
pub(crate) fn histogram_quantile(q: f64, buckets: &[(f64, f64)]) -> Option<f64> {
    let n = buckets.len();
    if n < 2 || buckets[n - 1].0 != f64::INFINITY {
        return None;
    }
    // Cumulative counts can dip when series are scraped mid-update; Prometheus forces them monotonic.
    let mut counts: Vec<f64> = Vec::with_capacity(n);
    for &(_, count) in buckets {
        let previous = counts.last().copied().unwrap_or(0.0);
        counts.push(count.max(previous));
    }
    let observations = counts[n - 1];
    if observations <= 0.0 || observations.is_nan() {
        return None;
    }
    let mut rank = q * observations;
    let b = counts.iter().position(|&c| c >= rank).unwrap_or(n - 1);
    if b == n - 1 {
        return Some(buckets[n - 2].0);
    }
    if b == 0 && buckets[0].0 <= 0.0 {
        return Some(buckets[0].0);
    }
    let (mut start, end, mut count) = (0.0, buckets[b].0, counts[b]);
    if b > 0 {
        start = buckets[b - 1].0;
        count -= counts[b - 1];
        rank -= counts[b - 1];
    }
    if count <= 0.0 {
        return Some(end);
    }
    Some(start + (end - start) * (rank / count))
}

/// Values kept for gauge quantiles: all of them up to a cap, then every 2^k-th.
#[derive(Debug, Clone, Default)]
struct Decimated {
    values: Vec<f64>,
    stride: u64,
    seen: u64,
}

impl Decimated {
    fn push(&mut self, value: f64, cap: usize) {
        if self.stride == 0 {
            self.stride = 1;
        }
        if self.seen.is_multiple_of(self.stride) {
            self.values.push(value);
            if self.values.len() >= cap {
                // Keeping the even positions keeps exactly the scrapes whose index is a multiple of 2·stride.
                let mut i = 0;
                self.values.retain(|_| {
                    i += 1;
                    (i - 1) % 2 == 0
                });
                self.stride *= 2;
            }
        }
        self.seen += 1;
    }
}

/// A gauge over one window.
#[derive(Debug, Clone, Default)]
struct GaugeAcc {
    n: u64,
    sum: f64,
    min: f64,
    max: f64,
    kept: Decimated,
}

impl GaugeAcc {
    fn push(&mut self, value: f64) {
        if value.is_nan() {
            return;
        }
        if self.n == 0 {
            self.min = value;
            self.max = value;
        } else {
            self.min = self.min.min(value);
            self.max = self.max.max(value);
        }
        self.n += 1;
        self.sum += value;
        self.kept.push(value, MAX_GAUGE_VALUES);
    }

    fn figures(&self) -> Option<Figures> {
        if self.n == 0 {
            return None;
        }
        let mut sorted = self.kept.values.clone();
        sorted.sort_by(f64::total_cmp);
        Some(Figures::Gauge {
            mean: self.sum / self.n as f64,
            min: self.min,
            max: self.max,
            p50: quantile_sorted(0.5, &sorted),
            p90: quantile_sorted(0.9, &sorted),
            p99: quantile_sorted(0.99, &sorted),
            samples: self.n,
        })
    }
}

/// A histogram's increase over a window, summed over series.
#[derive(Debug, Clone, Default, PartialEq)]
struct HistDelta {
    /// `le` → increase, unsorted until read.
    buckets: Vec<(f64, f64)>,
    sum: f64,
    count: Option<f64>,
}

impl HistDelta {
    fn add_bucket(&mut self, le: f64, delta: f64) {
        match self.buckets.iter_mut().find(|(bound, _)| *bound == le) {
            Some((_, total)) => *total += delta,
            None => self.buckets.push((le, delta)),
        }
    }

    fn merge(&mut self, other: &HistDelta) {
        for &(le, delta) in &other.buckets {
            self.add_bucket(le, delta);
        }
        self.sum += other.sum;
        if let Some(count) = other.count {
            *self.count.get_or_insert(0.0) += count;
        }
    }

    fn figures(&self, duration: f64) -> Figures {
        let mut buckets = self.buckets.clone();
        buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        let count = self.count.unwrap_or_else(|| {
            buckets
                .last()
                .filter(|(le, _)| *le == f64::INFINITY)
                .map_or(0.0, |(_, c)| *c)
        });
        Figures::Histogram {
            count,
            per_second: per_second(count, duration),
            mean: if count > 0.0 { self.sum / count } else { 0.0 },
            p50: histogram_quantile(0.5, &buckets),
            p90: histogram_quantile(0.9, &buckets),
            p99: histogram_quantile(0.99, &buckets),
        }
    }
}

fn per_second(amount: f64, duration: f64) -> f64 {
    if duration > 0.0 {
        amount / duration
    } else {
        0.0
    }
}

// ---- The one-pass summarizer ----

/// What kind of figures a metric gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SumKind {
    Gauge,
    Counter,
    Histogram,
}

/// A metric of a target: a catalogue key (whichever engine's name it came by), or a family kept raw under its name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum MetricId {
    Known(&'static str),
    Raw(String),
}

impl MetricId {
    /// The id of catalogue key `key`.
    fn of_key(key: &str) -> Option<MetricId> {
        catalogue::key(key).map(|k| MetricId::Known(k.key))
    }
}

/// How a metric is summarized and listed.
#[derive(Debug, Clone, Copy)]
struct MetricInfo {
    kind: SumKind,
    combine: Combine,
}

/// Which part of a metric a cumulative series is.
#[derive(Debug, Clone, Copy)]
enum Part {
    Counter,
    Bucket(f64),
    Sum,
    Count,
}

/// A cumulative series (a counter, or a histogram's bucket, sum or count) with its reset-adjusted value: the raw
/// value plus everything lost at resets, so an increase is a plain difference.
#[derive(Debug, Clone)]
struct Cumulative {
    metric: MetricId,
    part: Part,
    last_raw: f64,
    adjusted: f64,
}

/// A window's state for one target.
#[derive(Debug)]
enum Slot {
    Pending,
    Open(Box<OpenWindow>),
    Closed(Box<ClosedWindow>),
}

#[derive(Debug, Default)]
struct OpenWindow {
    /// Series id → adjusted value at the base scrape.
    base: HashMap<String, f64>,
    gauges: HashMap<MetricId, GaugeAcc>,
}

#[derive(Debug, Default)]
struct ClosedWindow {
    counters: BTreeMap<MetricId, f64>,
    histograms: BTreeMap<MetricId, HistDelta>,
    gauges: BTreeMap<MetricId, Figures>,
}

#[derive(Debug)]
struct TargetState {
    status: TargetStatus,
    warnings: HashSet<String>,
    /// Families outside the catalogue (or shadowed by another name for their key) summarized raw.
    raw: HashMap<String, MetricInfo>,
    /// Raw families beyond [`MAX_UNKNOWN_FAMILIES`].
    omitted: HashSet<String>,
    /// Per key, the catalogue entry this target's figures come from: the first-listed one its first page with the
    /// key showed. Another name for the same key is kept raw, so nothing is counted twice.
    claimed: HashMap<&'static str, usize>,
    /// How each metric is named in this target's summaries: the name on the wire.
    names: HashMap<MetricId, String>,
    series: HashMap<String, Cumulative>,
    /// The previous successful scrape: its time, and whether its page was complete.
    previous: Option<(f64, bool)>,
    slots: Vec<Slot>,
}

impl TargetState {
    /// The engines whose names this target's figures came by, e.g. `vLLM` or `vLLM + llm-d EPP`.
    fn engine(&self) -> Option<String> {
        let engines: BTreeSet<Engine> = self
            .claimed
            .values()
            .map(|&i| catalogue::KNOWN[i].engine)
            .collect();
        (!engines.is_empty()).then(|| {
            engines
                .into_iter()
                .map(Engine::name)
                .collect::<Vec<_>>()
                .join(" + ")
        })
    }
}

/// The aggregate gauges of one scrape round.
#[derive(Debug, Default)]
struct Round {
    t: f64,
    targets: HashSet<usize>,
    /// metric → (sum of per-target values, targets).
    values: HashMap<MetricId, (f64, u32)>,
}

/// A sample as a metric sees it: which metric (the name before any catalogue mapping), which part, and the catalogue
/// entry it may be.
#[derive(Debug)]
struct Resolved {
    metric: String,
    kind: SumKind,
    part: Option<Part>,
    known: Option<usize>,
}

/// What `sample` is to the summaries under `types`; None for what is not summarized (`_created` timestamps, buckets
/// without a bound).
fn resolve_sample(sample: &Sample, types: &BTreeMap<String, MetricKind>) -> Option<Resolved> {
    let (family, kind, role) = resolve(&sample.name, types);
    let (metric, sum_kind, part) = match (kind, role) {
        (_, Role::Created) => return None,
        (MetricKind::Histogram, Role::Bucket) => {
            let le = sample.labels.get("le").and_then(parse_value)?;
            (
                family.to_owned(),
                SumKind::Histogram,
                Some(Part::Bucket(le)),
            )
        }
        (MetricKind::Histogram, Role::Sum) => {
            (family.to_owned(), SumKind::Histogram, Some(Part::Sum))
        }
        (MetricKind::Histogram, Role::Count) => {
            (family.to_owned(), SumKind::Histogram, Some(Part::Count))
        }
        // A summary's `_sum` and `_count` are counters of their own.
        (MetricKind::Summary, Role::Sum | Role::Count) | (MetricKind::Counter, _) => {
            (sample.name.clone(), SumKind::Counter, Some(Part::Counter))
        }
        (MetricKind::Summary, _) => {
            let quantile = sample.labels.get("quantile").unwrap_or("");
            (
                format!("{}{{quantile=\"{quantile}\"}}", sample.name),
                SumKind::Gauge,
                None,
            )
        }
        (MetricKind::Gauge | MetricKind::Untyped | MetricKind::Histogram, _) => {
            (sample.name.clone(), SumKind::Gauge, None)
        }
    };
    let catalogue_kind = match sum_kind {
        SumKind::Histogram => MetricKind::Histogram,
        SumKind::Counter => MetricKind::Counter,
        SumKind::Gauge => kind,
    };
    let known = catalogue::lookup(&metric, &sample.labels, catalogue_kind).map(|(i, _)| i);
    Some(Resolved {
        metric,
        kind: sum_kind,
        part,
        known,
    })
}

/// How far before a window's start and after its end a bounding scrape may lie. Nothing of the run is sent
/// between a stage's end and the next stage's beginning (`began_s`: its warm-ups and a probe before it included),
/// before the first stage's beginning (the scraper starts after the pre-flight), nor after the last stage. A scrape
/// in such a quiet time has seen exactly the events on its side, however late or early a loaded machine took it,
/// while one inside the window would miss those between it and the edge. Elsewhere (a warm-up just before the
/// start) the tolerance holds.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Reach {
    before: f64,
    after: f64,
}

impl Reach {
    /// The reach of `stage`'s window (`None`: the whole run's) among `stages`, at least `tolerance`.
    fn of(stage: Option<usize>, window: &Window, stages: &[StageWindow], tolerance: f64) -> Self {
        let began = |s: &StageWindow| s.began_s.unwrap_or(s.start_s).min(s.start_s);
        let first = match stage {
            Some(stage) => stages.iter().find(|s| s.stage == stage),
            None => stages.iter().min_by_key(|s| s.stage),
        };
        // A warm-up (or a probe) right before the window's first stage may still be answering at its start.
        let warmed_up = first.is_some_and(|s| began(s) < s.start_s);
        let quiet_since = match stage {
            _ if warmed_up => window.start_s,
            None => f64::NEG_INFINITY,
            Some(stage) => stages
                .iter()
                .filter(|s| s.stage < stage)
                .map(|s| s.end_s)
                .fold(f64::NEG_INFINITY, f64::max),
        };
        let quiet_until = match stage {
            None => f64::INFINITY,
            Some(stage) => stages
                .iter()
                .filter(|s| s.stage > stage)
                .map(began)
                .fold(f64::INFINITY, f64::min),
        };
        Self {
            before: tolerance.max(window.start_s - quiet_since),
            after: tolerance.max(quiet_until - window.end_s),
        }
    }
}

/// Streams scrapes in and produces the summary; see the module docs for the arithmetic.
#[derive(Debug)]
pub struct Summarizer {
    interval_s: f64,
    windows: Vec<(Option<usize>, Window)>,
    /// Per window, how far before its start and after its end a bounding scrape may lie (module docs).
    reach: Vec<Reach>,
    targets: Vec<TargetState>,
    by_url: HashMap<String, usize>,
    infos: HashMap<MetricId, MetricInfo>,
    round: Option<Round>,
    aggregate_slots: Vec<Option<HashMap<MetricId, GaugeAcc>>>,
    aggregate_closed: Vec<BTreeMap<MetricId, Figures>>,
    /// The first and last scrape times read: what an open-ended window (a killed run's) spans in the summary.
    scraped: Option<(f64, f64)>,
}

impl Summarizer {
    pub fn new(interval: Duration, run: Window, stages: &[StageWindow]) -> Self {
        let mut windows = vec![(None, run)];
        windows.extend(stages.iter().map(|s| {
            (
                Some(s.stage),
                Window {
                    start_s: s.start_s,
                    end_s: s.end_s,
                },
            )
        }));
        let n = windows.len();
        let interval_s = interval.as_secs_f64();
        let reach = windows
            .iter()
            .map(|(stage, window)| Reach::of(*stage, window, stages, 1.5 * interval_s))
            .collect();
        Self {
            interval_s,
            windows,
            reach,
            targets: Vec::new(),
            by_url: HashMap::new(),
            infos: HashMap::new(),
            round: None,
            aggregate_slots: (0..n).map(|_| None).collect(),
            aggregate_closed: (0..n).map(|_| BTreeMap::new()).collect(),
            scraped: None,
        }
    }

    fn target_index(&mut self, url: &str) -> usize {
        if let Some(&i) = self.by_url.get(url) {
            return i;
        }
        let i = self.targets.len();
        self.targets.push(TargetState {
            status: TargetStatus {
                url: url.to_owned(),
                ..TargetStatus::default()
            },
            warnings: HashSet::new(),
            raw: HashMap::new(),
            omitted: HashSet::new(),
            claimed: HashMap::new(),
            names: HashMap::new(),
            series: HashMap::new(),
            previous: None,
            slots: (0..self.windows.len()).map(|_| Slot::Pending).collect(),
        });
        self.by_url.insert(url.to_owned(), i);
        i
    }

    /// Takes the next scrape; scrapes of one target must come in time order (as the scraper writes them).
    pub fn push(&mut self, scrape: &Scrape) {
        let ti = self.target_index(&scrape.target);
        let target = &mut self.targets[ti];
        if !scrape.ok {
            target.status.failed += 1;
            if let Some(error) = &scrape.error
                && target.status.warnings.len() < MAX_WARNINGS
                && target.warnings.insert(error.clone())
            {
                target.status.warnings.push(error.clone());
            }
            return;
        }
        target.status.scrapes += 1;
        if let Some(truncated) = scrape.truncated {
            target.status.truncated += 1;
            target.status.dropped_series += truncated.dropped_series;
        }
        let t = scrape.t_s;
        let complete = scrape.truncated.is_none();
        let gauges = self.read_scrape(ti, scrape);
        self.advance_windows(ti, t, complete, gauges.0, &gauges.1);
        self.add_to_round(ti, t, &gauges.1);
    }

    /// Resolves every sample, maps it onto its catalogue key or admits it raw, converts known values to their key's
    /// unit, and returns (the cumulative samples, each gauge's combined value).
    #[allow(clippy::type_complexity)]
    fn read_scrape(
        &mut self,
        ti: usize,
        scrape: &Scrape,
    ) -> (Vec<(String, MetricId, Part, f64)>, Vec<(MetricId, f64)>) {
        let resolved: Vec<Option<Resolved>> = scrape
            .samples
            .iter()
            .map(|sample| resolve_sample(sample, &scrape.types))
            .collect();
        let target = &mut self.targets[ti];
        // Keys this target has not shown yet go to the first-listed entry this page has for them.
        let mut shown: HashMap<&'static str, usize> = HashMap::new();
        for i in resolved.iter().flatten().filter_map(|r| r.known) {
            let key = catalogue::KNOWN[i].key.key;
            if !target.claimed.contains_key(key) {
                shown
                    .entry(key)
                    .and_modify(|first| *first = (*first).min(i))
                    .or_insert(i);
            }
        }
        target.claimed.extend(shown);

        let mut cumulative = Vec::new();
        let mut gauge_parts: HashMap<MetricId, (f64, u32, Combine)> = HashMap::new();
        let mut gauge_order: Vec<MetricId> = Vec::new();
        // A page that lists one series twice is malformed. Prometheus keeps the first sample and drops the later
        // ones of the same timestamp (scrape/scrape.go `checkAddError`: `ErrDuplicateSampleForTimestamp` counts in
        // `prometheus_target_scrapes_sample_duplicate_timestamp_total` and the scrape goes on); so here: the first
        // counts, the others are left out and said, never summed.
        let mut series_seen: HashSet<String> = HashSet::with_capacity(scrape.samples.len());
        let mut duplicates: BTreeMap<String, u64> = BTreeMap::new();
        for (sample, resolved) in scrape.samples.iter().zip(resolved) {
            let Some(resolved) = resolved else {
                continue;
            };
            let series = format!("{}{}", sample.name, sample.labels.render_without(""));
            if !series_seen.insert(series.clone()) {
                *duplicates.entry(series).or_default() += 1;
                continue;
            }
            let known = resolved
                .known
                .filter(|&i| target.claimed.get(catalogue::KNOWN[i].key.key) == Some(&i))
                .map(|i| &catalogue::KNOWN[i]);
            let (id, info, scale) = match known {
                Some(known) => {
                    let id = MetricId::Known(known.key.key);
                    let info = MetricInfo {
                        kind: match known.key.kind {
                            MetricKind::Counter => SumKind::Counter,
                            MetricKind::Histogram => SumKind::Histogram,
                            _ => SumKind::Gauge,
                        },
                        combine: known.key.combine,
                    };
                    target
                        .names
                        .entry(id.clone())
                        .or_insert_with(|| match known.label {
                            Some((label, value)) => {
                                format!("{}{{{label}=\"{value}\"}}", resolved.metric)
                            }
                            None => resolved.metric.clone(),
                        });
                    (id, info, known.scale)
                }
                None => {
                    // A family the catalogue picks series out of by a label keeps its other series apart by it.
                    let name = match catalogue::selector_label(&resolved.metric)
                        .and_then(|label| Some((label, sample.labels.get(label)?)))
                    {
                        Some((label, value)) => {
                            format!("{}{{{label}=\"{value}\"}}", resolved.metric)
                        }
                        None => resolved.metric,
                    };
                    let Some(info) = admit_raw(target, &name, resolved.kind) else {
                        continue;
                    };
                    let id = MetricId::Raw(name.clone());
                    target.names.entry(id.clone()).or_insert(name);
                    (id, info, 1.0)
                }
            };
            self.infos.entry(id.clone()).or_insert(info);
            let value = sample.value;
            match info.kind {
                SumKind::Gauge => {
                    let entry = gauge_parts.entry(id.clone()).or_insert_with(|| {
                        gauge_order.push(id.clone());
                        (0.0, 0, info.combine)
                    });
                    if !value.is_nan() {
                        entry.0 += value * scale;
                        entry.1 += 1;
                    }
                }
                SumKind::Counter | SumKind::Histogram => {
                    let (part, value) = match resolved.part.unwrap_or(Part::Counter) {
                        // Counts stay counts; bounds, sums and counters are in the source's unit.
                        Part::Count => (Part::Count, value),
                        Part::Bucket(le) => (Part::Bucket(le * scale), value),
                        part => (part, value * scale),
                    };
                    cumulative.push((series, id, part, value));
                }
            }
        }
        for (series, count) in duplicates {
            let warning = format!(
                "{} lists `{series}` {} times in one scrape; only its first sample is counted, as Prometheus \
                 counts it (it drops the others as duplicate samples for one timestamp)",
                target.status.url,
                count + 1
            );
            // Once per series: the same malformed page comes back every scrape.
            if target.status.warnings.len() < MAX_WARNINGS && target.warnings.insert(series) {
                tracing::warn!("{warning}");
                target.status.warnings.push(warning);
            }
        }
        let gauges = gauge_order
            .into_iter()
            .filter_map(|metric| {
                let (sum, n, combine) = gauge_parts.remove(&metric)?;
                (n > 0).then(|| {
                    let value = match combine {
                        Combine::Sum => sum,
                        Combine::Mean => sum / f64::from(n),
                    };
                    (metric, value)
                })
            })
            .collect();
        (cumulative, gauges)
    }

    fn advance_windows(
        &mut self,
        ti: usize,
        t: f64,
        complete: bool,
        cumulative: Vec<(String, MetricId, Part, f64)>,
        gauges: &[(MetricId, f64)],
    ) {
        let windows = self.windows.clone();
        let target = &mut self.targets[ti];
        let previous = target.previous;

        // Windows whose end passed beyond reach before this scrape, or whose last scrape fell right on the end, end
        // at the state before this scrape.
        let previous_t = previous.map(|(before, _)| before);
        for (wi, (_, window)) in windows.iter().enumerate() {
            if let Slot::Open(_) = &target.slots[wi]
                && t > window.end_s
                && (t - window.end_s > self.reach[wi].after
                    || previous_t.is_some_and(|p| p >= window.end_s))
            {
                close(target, wi, &HashSet::new(), false);
            }
        }
        // Windows starting now whose base is the previous scrape (within reach before their start).
        let mut open_after = Vec::new();
        for (wi, (_, window)) in windows.iter().enumerate() {
            let reach = self.reach[wi];
            if matches!(target.slots[wi], Slot::Pending) && t >= window.start_s {
                let base_before =
                    previous.is_some_and(|(before, _)| window.start_s - before <= reach.before);
                if t > window.end_s && !(base_before && t - window.end_s <= reach.after) {
                    // No scrape inside and no close pair around it: nothing can be said about this window.
                    target.slots[wi] = Slot::Closed(Box::default());
                    continue;
                }
                match previous {
                    // A scrape right on the start is its own base.
                    Some(_) if t > window.start_s && base_before => {
                        target.slots[wi] = Slot::Open(Box::new(OpenWindow {
                            base: snapshot(&target.series),
                            gauges: HashMap::new(),
                        }));
                    }
                    _ => open_after.push(wi),
                }
            }
        }

        // Fold this scrape into the cumulative series.
        let born_from_zero = previous.is_some_and(|(_, complete)| complete);
        let mut born = HashSet::new();
        for (id, metric, part, value) in cumulative {
            if value.is_nan() {
                continue;
            }
            match target.series.get_mut(&id) {
                Some(series) => {
                    // A drop is a restart: everything after it is new increase.
                    series.adjusted += if value < series.last_raw {
                        value
                    } else {
                        value - series.last_raw
                    };
                    series.last_raw = value;
                }
                None => {
                    target.series.insert(
                        id.clone(),
                        Cumulative {
                            metric,
                            part,
                            last_raw: value,
                            adjusted: value,
                        },
                    );
                    born.insert(id);
                }
            }
        }

        // Windows with no usable earlier scrape start from this one.
        for wi in open_after {
            target.slots[wi] = Slot::Open(Box::new(OpenWindow {
                base: snapshot(&target.series),
                gauges: HashMap::new(),
            }));
        }
        for (wi, (_, window)) in windows.iter().enumerate() {
            let Slot::Open(open) = &mut target.slots[wi] else {
                continue;
            };
            if t > window.end_s {
                // The first scrape after the end, close enough to bound the window.
                close(target, wi, &born, born_from_zero);
                continue;
            }
            for id in &born {
                let base = if born_from_zero {
                    0.0
                } else {
                    target.series.get(id).map_or(0.0, |s| s.adjusted)
                };
                open.base.entry(id.clone()).or_insert(base);
            }
            if t >= window.start_s {
                for (metric, value) in gauges {
                    open.gauges.entry(metric.clone()).or_default().push(*value);
                }
            }
        }
        target.previous = Some((t, complete));
    }

    fn add_to_round(&mut self, ti: usize, t: f64, gauges: &[(MetricId, f64)]) {
        self.scraped = Some(self.scraped.map_or((t, t), |(a, b)| (a.min(t), b.max(t))));
        let starts_new = match &self.round {
            None => true,
            Some(round) => {
                round.targets.contains(&ti) || (t - round.t).abs() > self.interval_s / 2.0
            }
        };
        if starts_new {
            self.flush_round();
            self.round = Some(Round {
                t,
                ..Round::default()
            });
        }
        let Some(round) = self.round.as_mut() else {
            return;
        };
        round.targets.insert(ti);
        for (metric, value) in gauges {
            let entry = round.values.entry(metric.clone()).or_insert((0.0, 0));
            entry.0 += value;
            entry.1 += 1;
        }
    }

    fn flush_round(&mut self) {
        let Some(round) = self.round.take() else {
            return;
        };
        for (wi, (_, window)) in self.windows.iter().enumerate() {
            if round.t > window.end_s {
                if let Some(open) = self.aggregate_slots[wi].take() {
                    self.aggregate_closed[wi] = finish_gauges(&open);
                }
                continue;
            }
            if round.t < window.start_s {
                continue;
            }
            let slot = self.aggregate_slots[wi].get_or_insert_with(HashMap::new);
            for (metric, (sum, n)) in &round.values {
                let combine = self.infos.get(metric).map_or(Combine::Mean, |i| i.combine);
                let value = match combine {
                    Combine::Sum => *sum,
                    Combine::Mean => sum / f64::from(*n),
                };
                slot.entry(metric.clone()).or_default().push(value);
            }
        }
    }

    /// Closes every window and lays out the summary.
    pub fn finish(mut self) -> ServerMetricsSummary {
        self.flush_round();
        for wi in 0..self.windows.len() {
            if let Some(open) = self.aggregate_slots[wi].take() {
                self.aggregate_closed[wi] = finish_gauges(&open);
            }
        }
        for target in &mut self.targets {
            for wi in 0..target.slots.len() {
                if matches!(target.slots[wi], Slot::Open(_)) {
                    close(target, wi, &HashSet::new(), false);
                }
            }
        }
        let mut summaries: Vec<WindowSummary> = Vec::with_capacity(self.windows.len());
        for (wi, (stage, window)) in self.windows.iter().enumerate() {
            let duration = window.end_s - window.start_s;
            let mut all = Figured::default();
            let mut targets = Vec::with_capacity(self.targets.len());
            for target in &self.targets {
                let empty = ClosedWindow::default();
                let closed = match &target.slots[wi] {
                    Slot::Closed(closed) => closed.as_ref(),
                    _ => &empty,
                };
                let figured = Figured::of_target(closed, &target.names);
                all.add_target(&figured);
                targets.push(TargetMetrics {
                    url: target.status.url.clone(),
                    metrics: figured.lay_out(duration),
                    unknown_families_omitted: target.omitted.len() as u64,
                });
            }
            all.gauges = self.aggregate_closed[wi].clone();
            // An open-ended window (a killed run has no stage times) is written as the scrapes it spans: JSON has
            // no infinity, and a reader of summary.json must get numbers back.
            let (first, last) = self.scraped.unwrap_or((0.0, 0.0));
            summaries.push(WindowSummary {
                stage: *stage,
                start_s: if window.start_s.is_finite() {
                    window.start_s
                } else {
                    first
                },
                end_s: if window.end_s.is_finite() {
                    window.end_s
                } else {
                    last
                },
                targets,
                aggregate: all.lay_out(duration),
            });
        }
        let mut windows = summaries.into_iter();
        let overall = windows.next().unwrap_or(WindowSummary {
            stage: None,
            start_s: 0.0,
            end_s: 0.0,
            targets: Vec::new(),
            aggregate: Vec::new(),
        });
        let mut warnings = Vec::new();
        let mut statuses = Vec::with_capacity(self.targets.len());
        for target in self.targets {
            let engine = target.engine();
            if engine.is_none() && target.status.scrapes > 0 {
                warnings.push(format!(
                    "no known engine metrics at {}: {} families kept raw",
                    target.status.url,
                    target.raw.len() + target.omitted.len()
                ));
            }
            statuses.push(TargetStatus {
                engine,
                ..target.status
            });
        }
        ServerMetricsSummary {
            interval_s: self.interval_s,
            targets: statuses,
            overall,
            stages: windows.collect(),
            warnings,
        }
    }
}

/// The summary kind of a family the catalogue does not know (or knows by another name on this target), once per
/// family per target; None when the target already has its share of raw families.
fn admit_raw(target: &mut TargetState, metric: &str, kind: SumKind) -> Option<MetricInfo> {
    if let Some(info) = target.raw.get(metric) {
        return Some(*info);
    }
    if target.omitted.contains(metric) {
        return None;
    }
    if target.raw.len() >= MAX_UNKNOWN_FAMILIES {
        // Bounded too: a page of ever-new names cannot grow this set past the series cap's worth.
        if target.omitted.len() < super::parse::MAX_SERIES {
            target.omitted.insert(metric.to_owned());
        }
        return None;
    }
    let info = MetricInfo {
        kind,
        combine: Combine::Mean,
    };
    target.raw.insert(metric.to_owned(), info);
    Some(info)
}

fn snapshot(series: &HashMap<String, Cumulative>) -> HashMap<String, f64> {
    series
        .iter()
        .map(|(id, s)| (id.clone(), s.adjusted))
        .collect()
}

fn finish_gauges(open: &HashMap<MetricId, GaugeAcc>) -> BTreeMap<MetricId, Figures> {
    open.iter()
        .filter_map(|(metric, acc)| Some((metric.clone(), acc.figures()?)))
        .collect()
}

/// Ends a target's window at the current state of its series. Series `born` in the closing scrape have no base:
/// they count from 0 when `born_from_zero`, else not at all.
fn close(target: &mut TargetState, wi: usize, born: &HashSet<String>, born_from_zero: bool) {
    let Slot::Open(open) = std::mem::replace(&mut target.slots[wi], Slot::Pending) else {
        return;
    };
    let mut closed = ClosedWindow {
        gauges: finish_gauges(&open.gauges),
        ..ClosedWindow::default()
    };
    for (id, series) in &target.series {
        let base = match open.base.get(id) {
            Some(base) => *base,
            None if born_from_zero && born.contains(id) => 0.0,
            None => continue,
        };
        let increase = (series.adjusted - base).max(0.0);
        match series.part {
            Part::Counter => *closed.counters.entry(series.metric.clone()).or_default() += increase,
            Part::Bucket(le) => closed
                .histograms
                .entry(series.metric.clone())
                .or_default()
                .add_bucket(le, increase),
            Part::Sum => {
                closed
                    .histograms
                    .entry(series.metric.clone())
                    .or_default()
                    .sum += increase;
            }
            Part::Count => {
                *closed
                    .histograms
                    .entry(series.metric.clone())
                    .or_default()
                    .count
                    .get_or_insert(0.0) += increase;
            }
        }
    }
    target.slots[wi] = Slot::Closed(Box::new(closed));
}

/// One window's figures by metric, named, with the counters and ratios built from them: one target's, or every
/// target's together.
#[derive(Debug, Default)]
struct Figured {
    gauges: BTreeMap<MetricId, Figures>,
    counters: BTreeMap<MetricId, f64>,
    histograms: BTreeMap<MetricId, HistDelta>,
    /// How each metric is named: its name on the wire, what a derived counter is built from, the names of several
    /// targets that differ.
    names: BTreeMap<MetricId, String>,
    /// Ratio key → (Δnumerator, Δdenominator, the formula of the first target that had it).
    ratios: BTreeMap<&'static str, (f64, f64, &'static Ratio)>,
}

impl Figured {
    /// A target's closed window, with the counters it lacks but can build ([`catalogue::DERIVED_COUNTERS`]) and the
    /// parts of every ratio it has the counters for.
    fn of_target(closed: &ClosedWindow, names: &HashMap<MetricId, String>) -> Figured {
        let mut figured = Figured {
            gauges: closed.gauges.clone(),
            counters: closed.counters.clone(),
            histograms: closed.histograms.clone(),
            ..Figured::default()
        };
        let ids: Vec<MetricId> = figured
            .gauges
            .keys()
            .chain(figured.counters.keys())
            .chain(figured.histograms.keys())
            .cloned()
            .collect();
        for id in ids {
            let name = names.get(&id).cloned().unwrap_or_else(|| id_text(&id));
            figured.names.insert(id, name);
        }
        let derived_keys: BTreeSet<&'static str> = catalogue::DERIVED_COUNTERS
            .iter()
            .map(|derived| derived.key.key)
            .collect();
        for key in derived_keys {
            let counter = |key: &str| figured.counters.get(&MetricId::of_key(key)?).copied();
            let histogram_total = |key: &str| {
                figured
                    .histograms
                    .get(&MetricId::of_key(key)?)
                    .map(|h| h.sum)
            };
            let Some((value, Some(derived))) =
                catalogue::counter_increase(key, &counter, &histogram_total)
            else {
                continue;
            };
            let name_of = |key: &Key| {
                MetricId::of_key(key.key)
                    .and_then(|id| figured.names.get(&id).cloned())
                    .unwrap_or_else(|| key.key.to_owned())
            };
            let name = match &derived.from {
                Source::Sum(parts) => parts
                    .iter()
                    .map(|part| name_of(part))
                    .collect::<Vec<_>>()
                    .join(" + "),
                Source::HistogramTotal(histogram) => format!("{}_sum", name_of(histogram)),
            };
            let id = MetricId::Known(derived.key.key);
            figured.counters.insert(id.clone(), value);
            figured.names.insert(id, name);
        }
        for key in catalogue::ratio_keys() {
            let counter = |key: &str| figured.counters.get(&MetricId::of_key(key)?).copied();
            if let Some(parts) = catalogue::ratio_parts(key, &counter) {
                figured.ratios.insert(key, parts);
            }
        }
        figured
    }

    /// Adds a target's counters, histograms and ratio parts (gauges combine per scrape round instead).
    fn add_target(&mut self, target: &Figured) {
        for (id, increase) in &target.counters {
            *self.counters.entry(id.clone()).or_default() += increase;
        }
        for (id, delta) in &target.histograms {
            self.histograms.entry(id.clone()).or_default().merge(delta);
        }
        for (key, (numerator, denominator, ratio)) in &target.ratios {
            let entry = self.ratios.entry(key).or_insert((0.0, 0.0, ratio));
            entry.0 += numerator;
            entry.1 += denominator;
        }
        for (id, name) in &target.names {
            match self.names.get_mut(id) {
                None => {
                    self.names.insert(id.clone(), name.clone());
                }
                Some(names) if !names.split(", ").any(|n| n == name) => {
                    names.push_str(", ");
                    names.push_str(name);
                }
                Some(_) => {}
            }
        }
    }

    /// The metrics in listing order: [`catalogue::KEYS`] order (each ratio after its denominator), then the raw
    /// families by name.
    fn lay_out(&self, duration: f64) -> Vec<MetricSummary> {
        let mut listed: Vec<((usize, usize, String), MetricSummary)> = Vec::new();
        let mut push = |id: &MetricId, figures: Figures| {
            let key = match id {
                MetricId::Known(key) => catalogue::key(key),
                MetricId::Raw(_) => None,
            };
            let name = self.names.get(id).cloned().unwrap_or_else(|| id_text(id));
            listed.push((
                (
                    key.map_or(usize::MAX, |k| catalogue::key_order(k.key)),
                    0,
                    name.clone(),
                ),
                MetricSummary {
                    name,
                    key: key.map(|k| k.key.to_owned()),
                    unit: key.map(|k| k.unit.to_owned()),
                    figures,
                },
            ));
        };
        for (id, figures) in &self.gauges {
            push(id, figures.clone());
        }
        for (id, increase) in &self.counters {
            push(
                id,
                Figures::Counter {
                    increase: *increase,
                    per_second: per_second(*increase, duration),
                },
            );
        }
        for (id, delta) in &self.histograms {
            push(id, delta.figures(duration));
        }
        for (key, (numerator, denominator, ratio)) in &self.ratios {
            listed.push((
                (
                    catalogue::key_order(ratio.denominator.key),
                    1,
                    ratio.name.to_owned(),
                ),
                MetricSummary {
                    name: ratio.name.to_owned(),
                    key: Some((*key).to_owned()),
                    unit: Some("percent".to_owned()),
                    figures: Figures::Ratio {
                        percent: if *denominator > 0.0 {
                            numerator / denominator * 100.0
                        } else {
                            0.0
                        },
                    },
                },
            ));
        }
        listed.sort_by(|a, b| a.0.cmp(&b.0));
        listed.into_iter().map(|(_, m)| m).collect()
    }
}

/// A metric's id as text, for a metric with no recorded name.
fn id_text(id: &MetricId) -> String {
    match id {
        MetricId::Known(key) => (*key).to_owned(),
        MetricId::Raw(name) => name.clone(),
    }
}

/// Summarizes `scrapes` (streamed; see the module docs) over the whole `run` and each stage. Target statuses come
/// from `outcome` when given (it has the scraper's warnings), else from the scrapes themselves.
pub fn summarize<I>(
    scrapes: I,
    interval: Duration,
    run: Window,
    stages: &[StageWindow],
    outcome: Option<&ScrapeOutcome>,
) -> ServerMetricsSummary
where
    I: IntoIterator<Item = Scrape>,
{
    let mut summarizer = Summarizer::new(interval, run, stages);
    for scrape in scrapes {
        summarizer.push(&scrape);
    }
    let mut summary = summarizer.finish();
    if let Some(outcome) = outcome {
        // The scraper's statuses have its warnings; the engine is what the scrapes showed.
        let engines: HashMap<String, Option<String>> = summary
            .targets
            .drain(..)
            .map(|t| (t.url, t.engine))
            .collect();
        summary.targets = outcome
            .targets
            .iter()
            .map(|t| TargetStatus {
                engine: engines.get(&t.url).cloned().flatten(),
                ..t.clone()
            })
            .collect();
        summary.warnings.extend(outcome.warnings.iter().cloned());
    }
    summary
}

/// [`summarize`] reading `server_metrics.jsonl` from `path`. Damaged lines are skipped and counted in the
/// summary's warnings; only a file that cannot be opened is an error.
pub fn summarize_file(
    path: &Path,
    interval: Duration,
    run: Window,
    stages: &[StageWindow],
    outcome: Option<&ScrapeOutcome>,
) -> Result<ServerMetricsSummary, ServerMetricsError> {
    let mut skipped = 0u64;
    let mut first_error = None;
    let scrapes = read_jsonl(path)?.filter_map(|item| match item {
        Ok(scrape) => Some(scrape),
        Err(e) => {
            skipped += 1;
            if first_error.is_none() {
                first_error = Some(e.to_string());
            }
            None
        }
    });
    let mut summary = summarize(scrapes, interval, run, stages, outcome);
    if let Some(first) = first_error {
        summary
            .warnings
            .push(format!("{skipped} damaged line(s) skipped, first: {first}"));
    }
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server_metrics::parse::{MAX_SERIES, parse_page};

    const INTERVAL: Duration = Duration::from_secs(1);

    /// A scrape of `target` at `t` whose page is `text`.
    fn scrape(target: &str, t: f64, text: &str) -> Scrape {
        let page = parse_page(text, MAX_SERIES);
        assert_eq!(page.warning(), None, "{text}");
        Scrape {
            t_s: t,
            target: target.to_owned(),
            ok: true,
            scrape_ms: Some(1.0),
            error: None,
            types: page.types,
            samples: page.samples,
            truncated: None,
        }
    }

    fn counter_page(value: f64) -> String {
        format!(
            "# TYPE vllm:prompt_tokens_total counter\nvllm:prompt_tokens_total{{model_name=\"m\"}} {value}\n"
        )
    }

    fn run(start: f64, end: f64) -> Window {
        Window {
            start_s: start,
            end_s: end,
        }
    }

    /// Stage `stage`'s window from `start_s` to `end_s`, its first request (a warm-up's) at `began_s` if earlier.
    fn stage(stage: usize, start_s: f64, end_s: f64, began_s: Option<f64>) -> StageWindow {
        StageWindow {
            stage,
            start_s,
            end_s,
            began_s,
        }
    }

    fn counter_increase(metrics: &[MetricSummary], key: &str) -> (f64, f64) {
        match find(metrics, key).map(|m| &m.figures) {
            Some(Figures::Counter {
                increase,
                per_second,
            }) => (*increase, *per_second),
            other => panic!("{key}: {other:?}"),
        }
    }

    #[test]
    fn histogram_quantile_interpolates_inside_the_bucket_as_prometheus_does() {
        let buckets = [(0.1, 2.0), (0.5, 6.0), (1.0, 10.0), (f64::INFINITY, 10.0)];
        // rank 5 falls in (0.1, 0.5] holding 4: 0.1 + (5 − 2)/4 · 0.4 = 0.4.
        assert!((histogram_quantile(0.5, &buckets).unwrap() - 0.4).abs() < 1e-12);
        // rank 9 in (0.5, 1] holding 4: 0.5 + (9 − 6)/4 · 0.5 = 0.875.
        assert!((histogram_quantile(0.9, &buckets).unwrap() - 0.875).abs() < 1e-12);
        // rank 9.9: 0.5 + 3.9/4 · 0.5 = 0.9875.
        assert!((histogram_quantile(0.99, &buckets).unwrap() - 0.9875).abs() < 1e-12);
        // The lowest bucket starts at 0: rank 1 of 2 in (0, 0.1] → 0.05.
        assert!((histogram_quantile(0.1, &buckets).unwrap() - 0.05).abs() < 1e-12);
        // In the +Inf bucket: the last finite bound.
        let tail = [(0.1, 1.0), (1.0, 2.0), (f64::INFINITY, 10.0)];
        assert_eq!(histogram_quantile(0.5, &tail), Some(1.0));
        // Nothing observed, or no +Inf bucket: no answer.
        assert_eq!(
            histogram_quantile(0.5, &[(0.1, 0.0), (f64::INFINITY, 0.0)]),
            None
        );
        assert_eq!(histogram_quantile(0.5, &[(0.1, 1.0), (0.2, 2.0)]), None);
        // A non-positive lowest bound is answered with the bound itself.
        assert_eq!(
            histogram_quantile(0.1, &[(-1.0, 5.0), (0.0, 6.0), (f64::INFINITY, 6.0)]),
            Some(-1.0)
        );
    }

    #[test]
    fn gauge_quantiles_follow_prometheus_rank_interpolation() {
        let values = [1.0, 2.0, 3.0, 4.0, 10.0];
        // rank = q·(n−1) = 0.5·4 = 2 → 3.
        assert_eq!(quantile_sorted(0.5, &values), 3.0);
        // rank 3.6 → 4 + 0.6·(10 − 4) = 7.6.
        assert!((quantile_sorted(0.9, &values) - 7.6).abs() < 1e-12);
        // rank 3.96 → 4 + 0.96·6 = 9.76.
        assert!((quantile_sorted(0.99, &values) - 9.76).abs() < 1e-12);
        assert_eq!(quantile_sorted(0.5, &[7.0]), 7.0);
    }

    #[test]
    fn gauges_summarize_the_scrapes_inside_the_window_summing_series_per_scrape() {
        let target = "http://a/metrics";
        let page = |a: f64, b: f64| {
            format!(
                "# TYPE vllm:num_requests_running gauge\n\
                 vllm:num_requests_running{{engine=\"0\"}} {a}\n\
                 vllm:num_requests_running{{engine=\"1\"}} {b}\n\
                 # TYPE vllm:kv_cache_usage_perc gauge\n\
                 vllm:kv_cache_usage_perc{{engine=\"0\"}} {}\n\
                 vllm:kv_cache_usage_perc{{engine=\"1\"}} {}\n",
                a / 10.0,
                b / 10.0
            )
        };
        // Running = 1, 2, 3, 4, 10 inside [1, 5]; the scrape at 0 and at 6 are outside.
        let scrapes = vec![
            scrape(target, 0.0, &page(50.0, 50.0)),
            scrape(target, 1.0, &page(1.0, 0.0)),
            scrape(target, 2.0, &page(1.0, 1.0)),
            scrape(target, 3.0, &page(2.0, 1.0)),
            scrape(target, 4.0, &page(2.0, 2.0)),
            scrape(target, 5.0, &page(5.0, 5.0)),
            scrape(target, 6.0, &page(50.0, 50.0)),
        ];
        let summary = summarize(scrapes, INTERVAL, run(1.0, 5.0), &[], None);
        let metrics = &summary.overall.targets[0].metrics;
        let Figures::Gauge {
            mean,
            min,
            max,
            p50,
            p90,
            p99,
            samples,
        } = find(metrics, "running").unwrap().figures
        else {
            panic!("not a gauge");
        };
        assert_eq!((mean, min, max, p50, samples), (4.0, 1.0, 10.0, 3.0, 5));
        assert!((p90 - 7.6).abs() < 1e-9, "{p90}");
        assert!((p99 - 9.76).abs() < 1e-9, "{p99}");
        // Fractions are averaged over engines: (0.1 + 0)/2 = 0.05 … (0.5 + 0.5)/2 = 0.5.
        match &find(metrics, "kv_cache_usage").unwrap().figures {
            Figures::Gauge { min, max, .. } => {
                assert!((min - 0.05).abs() < 1e-12);
                assert!((max - 0.5).abs() < 1e-12);
            }
            other => panic!("{other:?}"),
        }
        let running = find(metrics, "running").unwrap();
        assert_eq!(running.name, "vllm:num_requests_running");
        assert_eq!(running.unit.as_deref(), Some("requests"));
        // One target: the aggregate is the same.
        assert_eq!(
            find(&summary.overall.aggregate, "running").unwrap(),
            running
        );
    }

    #[test]
    fn a_series_listed_twice_in_a_scrape_counts_once_and_is_said() {
        let target = "http://a/metrics";
        // 10 000 copies of one series, the first at 5 and the rest at 1..=9 999: summing them would read 49 995 005
        // running requests, the last 9 999; Prometheus keeps the first, 5.
        let mut page = String::from("# TYPE vllm:num_requests_running gauge\n");
        page.push_str("vllm:num_requests_running{engine=\"0\"} 5\n");
        for value in 1..10_000 {
            page.push_str(&format!(
                "vllm:num_requests_running{{engine=\"0\"}} {value}\n"
            ));
        }
        page.push_str("# TYPE vllm:prompt_tokens_total counter\n");
        for value in [100.0, 100.0] {
            page.push_str(&format!(
                "vllm:prompt_tokens_total{{model_name=\"m\"}} {value}\n"
            ));
        }
        let scrapes = vec![scrape(target, 1.0, &page), scrape(target, 2.0, &page)];
        let summary = summarize(scrapes, INTERVAL, run(1.0, 2.0), &[], None);
        let metrics = &summary.overall.targets[0].metrics;
        let Figures::Gauge { mean, max, .. } = find(metrics, "running").unwrap().figures else {
            panic!("not a gauge");
        };
        assert_eq!((mean, max), (5.0, 5.0));
        let warnings = &summary.targets[0].warnings;
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(
            warnings[0].contains(
                "lists `vllm:num_requests_running{engine=\"0\"}` 10000 times in one scrape"
            ),
            "{warnings:?}"
        );
    }

    #[test]
    fn counter_resets_count_the_value_after_the_drop() {
        let target = "http://a/metrics";
        // 100 → 150 (+50) → reset to 20 (+20) → 70 (+50) = 120 over [0, 3].
        let scrapes = [100.0, 150.0, 20.0, 70.0]
            .iter()
            .enumerate()
            .map(|(i, v)| scrape(target, i as f64, &counter_page(*v)))
            .collect::<Vec<_>>();
        let summary = summarize(scrapes, INTERVAL, run(0.0, 3.0), &[], None);
        let (increase, per_second) =
            counter_increase(&summary.overall.targets[0].metrics, "prompt_tokens");
        assert_eq!(increase, 120.0);
        assert_eq!(per_second, 40.0);
    }

    #[test]
    fn increases_use_the_scrapes_just_outside_the_window_when_close_enough() {
        let target = "http://a/metrics";
        // Scrapes every second; the counter grows 10 per second.
        let scrapes: Vec<Scrape> = (0..=10)
            .map(|i| scrape(target, f64::from(i), &counter_page(f64::from(i) * 10.0)))
            .collect();
        let stages = [
            // Between scrapes: base at 2 (0.5 before), end at 5 (0.5 after) → 30.
            stage(0, 2.5, 4.5, None),
            // On scrapes: base at 5, end at 7 → 20.
            stage(1, 5.0, 7.0, None),
        ];
        let summary = summarize(scrapes.clone(), INTERVAL, run(0.0, 10.0), &stages, None);
        assert_eq!(
            counter_increase(&summary.stages[0].targets[0].metrics, "prompt_tokens").0,
            30.0
        );
        assert_eq!(
            counter_increase(&summary.stages[1].targets[0].metrics, "prompt_tokens"),
            (20.0, 10.0)
        );
        assert_eq!(
            counter_increase(&summary.overall.targets[0].metrics, "prompt_tokens").0,
            100.0
        );
        assert_eq!(summary.stages[0].stage, Some(0));

        // With scrapes far apart (a gap of failures), the edges fall back to the first and last inside: a stage
        // ran before the start and another begins before the scrape after the end, so those scrapes may have seen
        // their events.
        let sparse: Vec<Scrape> = [0.0, 4.0, 5.0, 6.0, 10.0]
            .iter()
            .map(|&t| scrape(target, t, &counter_page(t * 10.0)))
            .collect();
        let three_stages = [
            stage(0, 0.0, 1.0, None),
            stage(1, 2.0, 7.0, None),
            stage(2, 8.0, 9.0, None),
        ];
        let summary = summarize(sparse, INTERVAL, run(0.0, 10.0), &three_stages, None);
        // Base 40 (first inside, since 0 is 2 s before the start), end 60 (last inside, since 10 is 3 s after).
        assert_eq!(
            counter_increase(&summary.stages[1].targets[0].metrics, "prompt_tokens").0,
            20.0
        );
    }

    #[test]
    fn a_stage_ends_at_a_late_scrape_while_the_run_is_quiet_but_never_past_the_next_stages_warm_up()
    {
        let target = "http://a/metrics";
        // The counter grows 10 per second until stage 0 ends at 3.2, stays until the next stage's warm-up begins
        // at 5.0, then grows 10 per second again (the warm-up, then stage 1 from 6.0).
        let value = |t: f64| 10.0 * t.min(3.2) + 10.0 * (t - 5.0).max(0.0);
        let stages = [stage(0, 0.0, 3.2, None), stage(1, 6.0, 8.0, Some(5.0))];
        let stage_0 = |times: &[f64]| {
            let scrapes: Vec<Scrape> = times
                .iter()
                .map(|&t| scrape(target, t, &counter_page(value(t))))
                .collect();
            let summary = summarize(scrapes, INTERVAL, run(0.0, 8.0), &stages, None);
            counter_increase(&summary.stages[0].targets[0].metrics, "prompt_tokens").0
        };
        // A scrape 1.7 s after the end (past the 1.5 s tolerance) but before the warm-up: all 32.
        assert_eq!(stage_0(&[0.0, 1.0, 2.0, 3.0, 4.9, 6.0, 7.0, 8.0]), 32.0);
        // The first scrape after the end comes once the warm-up ran (5.6): the last inside, never the warm-up's 6.
        assert_eq!(stage_0(&[0.0, 1.0, 2.0, 3.0, 5.6, 6.0, 7.0, 8.0]), 30.0);
    }

    #[test]
    fn a_stage_starts_from_an_early_scrape_while_the_run_is_quiet_but_never_before_its_warm_up() {
        let target = "http://a/metrics";
        // Stage 0 runs to 3.2, stage 1 from 5.5 to 8; the counter grows 10 per second while a stage runs (and
        // from 4.0 while stage 1's warm-up runs, when it has one). Scrapes at 3.5, then none until 6.
        let times = [0.0, 1.0, 2.0, 3.0, 3.5, 6.0, 7.0, 8.0];
        let stage_1 = |began_s: Option<f64>| {
            let from = began_s.unwrap_or(5.5);
            let value = |t: f64| 10.0 * t.min(3.2) + 10.0 * (t.min(8.0) - from).max(0.0);
            let scrapes: Vec<Scrape> = times
                .iter()
                .map(|&t| scrape(target, t, &counter_page(value(t))))
                .collect();
            let stages = [stage(0, 0.0, 3.2, None), stage(1, 5.5, 8.0, began_s)];
            let summary = summarize(scrapes, INTERVAL, run(0.0, 8.0), &stages, None);
            counter_increase(&summary.stages[1].targets[0].metrics, "prompt_tokens").0
        };
        // No warm-up: the scrape at 3.5 (2 s before the start, past the tolerance) saw all of stage 0 and nothing
        // of stage 1, so it is the base: all 25.
        assert_eq!(stage_1(None), 25.0);
        // A warm-up from 4.0: the base is the first scrape inside (6), never 3.5, which would count the warm-up.
        assert_eq!(stage_1(Some(4.0)), 20.0);
    }

    #[test]
    fn the_last_stage_and_the_run_end_at_the_final_scrape_however_late() {
        let target = "http://a/metrics";
        // Scrapes every second until 6, then the final scrape 2.5 s after the last answer (a loaded machine): the
        // counter grew 10 per second while requests ran, and 5 more between the scrape at 6 and the end at 6.5.
        let scrapes: Vec<Scrape> = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 9.0]
            .iter()
            .map(|&t| scrape(target, t, &counter_page(t.min(6.5) * 10.0)))
            .collect();
        let stages = [stage(0, 0.0, 3.2, None), stage(1, 3.5, 6.5, None)];
        let summary = summarize(scrapes, INTERVAL, run(0.0, 6.5), &stages, None);
        let increase = |window: &WindowSummary| {
            counter_increase(&window.targets[0].metrics, "prompt_tokens").0
        };
        // Stage 0 ends within the tolerance at 4; stage 1 (base 3, 0.5 s before its start) and the run reach the
        // final scrape at 9, so the last 5 are counted.
        assert_eq!(increase(&summary.stages[0]), 40.0);
        assert_eq!(increase(&summary.stages[1]), 35.0);
        assert_eq!(increase(&summary.overall), 65.0);

        // A stage after the gap keeps the earlier stage's end within the tolerance: the last scrape inside.
        let scrapes: Vec<Scrape> = [0.0, 1.0, 2.0, 3.0, 6.0, 7.0]
            .iter()
            .map(|&t| scrape(target, t, &counter_page(t * 10.0)))
            .collect();
        let summary = summarize(scrapes, INTERVAL, run(0.0, 7.0), &stages, None);
        assert_eq!(increase(&summary.stages[0]), 30.0);
    }

    #[test]
    fn histograms_sum_series_by_le_over_the_window() {
        let target = "http://a/metrics";
        let page = |scale: f64| {
            let mut text = "# TYPE vllm:time_to_first_token_seconds histogram\n".to_owned();
            // Two engines; the window increase over both is le=0.1:2, 0.5:6, 1:10, +Inf:10.
            for (engine, share) in [("0", 0.5), ("1", 0.5)] {
                for (le, count) in [("0.1", 2.0), ("0.5", 6.0), ("1.0", 10.0), ("+Inf", 10.0)] {
                    text.push_str(&format!(
                        "vllm:time_to_first_token_seconds_bucket{{engine=\"{engine}\",le=\"{le}\"}} {}\n",
                        100.0 + count * share * scale
                    ));
                }
                text.push_str(&format!(
                    "vllm:time_to_first_token_seconds_sum{{engine=\"{engine}\"}} {}\n",
                    50.0 + 4.0 * share * scale
                ));
                text.push_str(&format!(
                    "vllm:time_to_first_token_seconds_count{{engine=\"{engine}\"}} {}\n",
                    100.0 + 10.0 * share * scale
                ));
            }
            text
        };
        let scrapes = vec![
            scrape(target, 0.0, &page(0.0)),
            scrape(target, 1.0, &page(0.4)),
            scrape(target, 2.0, &page(1.0)),
        ];
        let summary = summarize(scrapes, INTERVAL, run(0.0, 2.0), &[], None);
        let ttft = find(&summary.overall.targets[0].metrics, "ttft").unwrap();
        assert_eq!(ttft.name, "vllm:time_to_first_token_seconds");
        let Figures::Histogram {
            count,
            per_second,
            mean,
            p50,
            p90,
            p99,
        } = ttft.figures
        else {
            panic!("{ttft:?}");
        };
        assert_eq!(count, 10.0);
        assert_eq!(per_second, 5.0);
        assert!((mean - 0.4).abs() < 1e-12);
        assert!((p50.unwrap() - 0.4).abs() < 1e-12);
        assert!((p90.unwrap() - 0.875).abs() < 1e-12);
        assert!((p99.unwrap() - 0.9875).abs() < 1e-12);
    }

    #[test]
    fn an_idle_histogram_has_count_zero_mean_zero_and_no_quantiles() {
        let target = "http://a/metrics";
        let page = "# TYPE h histogram\nh_bucket{le=\"1\"} 3\nh_bucket{le=\"+Inf\"} 3\nh_sum 1\nh_count 3\n";
        let scrapes = vec![scrape(target, 0.0, page), scrape(target, 1.0, page)];
        let summary = summarize(scrapes, INTERVAL, run(0.0, 1.0), &[], None);
        assert_eq!(
            find(&summary.overall.targets[0].metrics, "h")
                .unwrap()
                .figures,
            Figures::Histogram {
                count: 0.0,
                per_second: 0.0,
                mean: 0.0,
                p50: None,
                p90: None,
                p99: None
            }
        );
    }

    #[test]
    fn prefix_cache_hit_rate_is_derived_from_counter_increases() {
        let target = "http://a/metrics";
        let page = |queries: f64, hits: f64| {
            format!(
                "# TYPE vllm:prefix_cache_queries counter\nvllm:prefix_cache_queries_total {queries}\n\
                 # TYPE vllm:prefix_cache_hits counter\nvllm:prefix_cache_hits_total {hits}\n"
            )
        };
        let scrapes = vec![
            scrape(target, 0.0, &page(1000.0, 100.0)),
            scrape(target, 1.0, &page(1400.0, 200.0)),
        ];
        let summary = summarize(scrapes, INTERVAL, run(0.0, 1.0), &[], None);
        let metrics = &summary.overall.targets[0].metrics;
        // (200 − 100) / (1400 − 1000) = 25 %.
        assert_eq!(
            find(metrics, "prefix_cache_hit_rate").unwrap().figures,
            Figures::Ratio { percent: 25.0 }
        );
        // Listed right after the queries counter.
        let keys: Vec<_> = metrics.iter().filter_map(|m| m.key.as_deref()).collect();
        assert_eq!(
            keys,
            [
                "prefix_cache_queries",
                "prefix_cache_hit_rate",
                "prefix_cache_hits"
            ]
        );
    }

    #[test]
    fn aggregate_sums_counts_and_counters_and_averages_fractions_across_targets() {
        let page = |running: f64, usage: f64, tokens: f64| {
            format!(
                "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running {running}\n\
                 # TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc {usage}\n{}",
                counter_page(tokens)
            )
        };
        let scrapes = vec![
            scrape("a", 0.0, &page(1.0, 0.2, 0.0)),
            scrape("b", 0.01, &page(3.0, 0.4, 100.0)),
            scrape("a", 1.0, &page(2.0, 0.4, 10.0)),
            scrape("b", 1.02, &page(4.0, 0.6, 130.0)),
        ];
        let summary = summarize(scrapes, INTERVAL, run(0.0, 1.0), &[], None);
        let aggregate = &summary.overall.aggregate;
        // Rounds: running 1+3 = 4 and 2+4 = 6 → mean 5; usage (0.2+0.4)/2 = 0.3 and 0.5 → mean 0.4.
        match &find(aggregate, "running").unwrap().figures {
            Figures::Gauge { mean, samples, .. } => {
                assert_eq!(*mean, 5.0);
                assert_eq!(*samples, 2);
            }
            other => panic!("{other:?}"),
        }
        match &find(aggregate, "kv_cache_usage").unwrap().figures {
            Figures::Gauge { mean, .. } => assert!((mean - 0.4).abs() < 1e-12),
            other => panic!("{other:?}"),
        }
        // 10 + 30.
        assert_eq!(counter_increase(aggregate, "prompt_tokens").0, 40.0);
        assert_eq!(summary.overall.targets.len(), 2);
        assert_eq!(summary.targets.len(), 2);
        assert_eq!(summary.targets[1].scrapes, 2);
    }

    #[test]
    fn a_series_born_mid_run_counts_from_zero() {
        let target = "http://a/metrics";
        let first = "# TYPE vllm:request_success counter\nvllm:request_success_total{finished_reason=\"stop\"} 5\n";
        let later = "# TYPE vllm:request_success counter\n\
                     vllm:request_success_total{finished_reason=\"stop\"} 7\n\
                     vllm:request_success_total{finished_reason=\"length\"} 3\n";
        let scrapes = vec![scrape(target, 0.0, first), scrape(target, 1.0, later)];
        let summary = summarize(scrapes, INTERVAL, run(0.0, 1.0), &[], None);
        // +2 stop, +3 length (born from 0).
        assert_eq!(
            counter_increase(&summary.overall.targets[0].metrics, "requests_finished").0,
            5.0
        );
    }

    #[test]
    fn failed_scrapes_are_counted_and_unknown_families_are_capped() {
        let target = "http://a/metrics";
        let mut page = String::new();
        for i in 0..(MAX_UNKNOWN_FAMILIES + 5) {
            page.push_str(&format!("# TYPE custom_{i:03} gauge\ncustom_{i:03} {i}\n"));
        }
        page.push_str("# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting 2\n");
        let failed = Scrape {
            t_s: 1.0,
            target: target.to_owned(),
            ok: false,
            scrape_ms: None,
            error: Some("connection refused".to_owned()),
            types: BTreeMap::new(),
            samples: Vec::new(),
            truncated: None,
        };
        let scrapes = vec![
            scrape(target, 0.0, &page),
            failed.clone(),
            failed,
            scrape(target, 2.0, &page),
        ];
        let summary = summarize(scrapes, INTERVAL, run(0.0, 2.0), &[], None);
        let status = &summary.targets[0];
        assert_eq!((status.scrapes, status.failed), (2, 2));
        assert_eq!(status.warnings, ["connection refused"]);
        let target_metrics = &summary.overall.targets[0];
        assert_eq!(target_metrics.unknown_families_omitted, 5);
        // 200 unknown gauges plus the known one, which is never crowded out, listed first.
        assert_eq!(target_metrics.metrics.len(), MAX_UNKNOWN_FAMILIES + 1);
        assert_eq!(target_metrics.metrics[0].key.as_deref(), Some("waiting"));
        assert_eq!(target_metrics.metrics[1].name, "custom_000");
        assert_eq!(target_metrics.metrics[1].key, None);
    }

    #[test]
    fn gauge_values_beyond_the_cap_are_subsampled_but_mean_min_max_stay_exact() {
        let mut acc = GaugeAcc::default();
        let n = 3 * MAX_GAUGE_VALUES as u64;
        for i in 0..n {
            acc.push(i as f64);
        }
        assert!(acc.kept.values.len() < MAX_GAUGE_VALUES);
        let Some(Figures::Gauge {
            mean,
            min,
            max,
            p50,
            samples,
            ..
        }) = acc.figures()
        else {
            panic!()
        };
        assert_eq!((min, max, samples), (0.0, (n - 1) as f64, n));
        assert_eq!(mean, (n - 1) as f64 / 2.0);
        // Every 4th value is kept: the median of 0, 4, … is within a stride of the exact one.
        assert!((p50 - (n - 1) as f64 / 2.0).abs() <= 4.0, "{p50}");
    }

    #[test]
    fn summary_json_has_the_documented_shape() {
        let target = "http://a/metrics";
        let scrapes = vec![
            scrape(target, 0.0, &counter_page(0.0)),
            scrape(target, 1.0, &counter_page(5.0)),
        ];
        let summary = summarize(
            scrapes,
            INTERVAL,
            run(0.0, 1.0),
            &[stage(0, 0.0, 1.0, None)],
            None,
        );
        let json = serde_json::to_value(&summary).unwrap();
        assert_eq!(json["interval_s"], 1.0);
        assert_eq!(json["targets"][0]["url"], target);
        assert_eq!(json["overall"].get("stage"), None);
        assert_eq!(json["stages"][0]["stage"], 0);
        let metric = &json["stages"][0]["targets"][0]["metrics"][0];
        assert_eq!(
            metric,
            &serde_json::json!({
                "name": "vllm:prompt_tokens_total", "key": "prompt_tokens", "unit": "tokens",
                "kind": "counter", "increase": 5.0, "per_second": 5.0
            })
        );
        let back: ServerMetricsSummary = serde_json::from_value(json).unwrap();
        assert_eq!(back, summary);
    }
}
