//! Pictures against what was varied, built from data like every figure: a sweep's figures against each stage's
//! offered rate or concurrency ([`load_sweep_figure`]), an SLO capacity search's points against their load with the
//! SLO drawn and each point marked passed or failed ([`capacity_figure`]), and an experiment's figures against a
//! factor's levels with the spread of the repeats as error bars ([`factor_figures`]).

use std::collections::BTreeMap;

use llmbench_core::capacity::{Comparison, LoadAxis, Metric, Objective};

use crate::report::StageMeta;
use llmbench_metrics::metrics::capacity::{CapacityOutcome, PointReport, Status};
use llmbench_metrics::metrics::{StageSummary, Stats, Summary};
use llmbench_workload::workload::LoadKind;

use super::compare::Entry;
use super::figure::{Axis, Colour, FAILED, Figure, Panel, Rule, Series, Shape, colour};
use super::run::{plain_number, short_number};

/// Passing points: green in every picture, as failures are red.
const PASSED: Colour = Colour(44, 160, 44);

/// An SLO's bound: near-black, apart from every series' palette colour.
const SLO_LINE: Colour = Colour(40, 40, 40);

/// What a stage offered the server.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Offered {
    /// Requests per second, sent open loop.
    Rate(f64),
    /// Requests kept in flight (a closed loop).
    Concurrency(f64),
}

impl Offered {
    /// From `run.json`'s stage: its rate when it has one; else its concurrency when that is the load itself (a
    /// closed loop, guidellm's synchronous one in flight), not the cap of a throughput stage that sends as fast
    /// as it can. `None` for a stage that offered neither.
    pub fn of(stage: &StageMeta) -> Option<Offered> {
        if let Some(rate) = stage.rate.filter(|r| r.is_finite()) {
            return Some(Offered::Rate(rate));
        }
        match stage.load {
            None | Some(LoadKind::Concurrent | LoadKind::Synchronous) => stage
                .concurrency
                .map(|c| Offered::Concurrency(f64::from(c))),
            Some(_) => None,
        }
    }
}

/// The x axis of a load: its name with the unit.
fn load_axis(axis: LoadAxis) -> Axis {
    Axis::new(match axis {
        LoadAxis::Rate => "offered rate (requests/s)",
        LoadAxis::Concurrency => "concurrency (requests in flight)",
    })
    .from_zero()
}

/// A load as a number: a concurrency is whole.
fn load_number(axis: LoadAxis, load: f64) -> String {
    match axis {
        LoadAxis::Concurrency if load.fract() == 0.0 => format!("{load:.0}"),
        _ => short_number(load),
    }
}

/// A load as text with its unit: `19.8 req/s`, `4 in flight`.
fn load_text(axis: LoadAxis, load: f64) -> String {
    match axis {
        LoadAxis::Rate => format!("{} req/s", load_number(axis, load)),
        LoadAxis::Concurrency => format!("{} in flight", load_number(axis, load)),
    }
}

/// A stage's figures against the load it offered, for a run of several stages: successful requests/s (beside
/// the offered rate itself, where the load is a rate) and output tokens/s, then TTFT, TPOT, ITL and E2E p50 and
/// p99, each stage a point, in load order. The axis is the offered rate when any stage has one, else the
/// concurrency; stages without a value on it (guidellm's throughput stage) are named in a note. `None` for
/// fewer than two stages with a load.
pub(crate) fn load_sweep_figure(
    stages: &[StageSummary],
    loads: &[StageMeta],
    subtitle: &str,
) -> Option<Figure> {
    let offered: Vec<Option<Offered>> = stages
        .iter()
        .map(|s| loads.get(s.stage as usize).and_then(Offered::of))
        .collect();
    let axis = if offered.iter().any(|o| matches!(o, Some(Offered::Rate(_)))) {
        LoadAxis::Rate
    } else {
        LoadAxis::Concurrency
    };
    let on_axis = |o: &Option<Offered>| match (axis, o) {
        (LoadAxis::Rate, Some(Offered::Rate(v))) => Some(*v),
        (LoadAxis::Concurrency, Some(Offered::Concurrency(v))) => Some(*v),
        _ => None,
    };
    let mut points: Vec<(f64, &StageSummary)> = stages
        .iter()
        .zip(&offered)
        .filter_map(|(s, o)| on_axis(o).map(|x| (x, s)))
        .collect();
    if points.len() < 2 {
        return None;
    }
    points.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.stage.cmp(&b.1.stage)));
    let left_out: Vec<String> = stages
        .iter()
        .zip(&offered)
        .filter(|(_, o)| on_axis(o).is_none())
        .map(|(s, _)| {
            let kind = loads
                .get(s.stage as usize)
                .and_then(|l| l.load)
                .map(|l| format!(" ({})", l.name()))
                .unwrap_or_default();
            format!("{}{kind}", s.stage)
        })
        .collect();
    let what = match axis {
        LoadAxis::Rate => "offered rate",
        LoadAxis::Concurrency => "concurrency",
    };
    let note = match left_out.len() {
        0 => "each point a stage, labelled with its index".to_owned(),
        1 => format!(
            "each point a stage; stage {} had no {what} and is left out",
            left_out[0]
        ),
        _ => format!(
            "each point a stage; stages {} had no {what} and are left out",
            left_out.join(", ")
        ),
    };
    let xs: Vec<f64> = points.iter().map(|(x, _)| *x).collect();
    let labels: Vec<String> = points.iter().map(|(_, s)| s.stage.to_string()).collect();
    let figure_of = |pick: &dyn Fn(&Summary) -> f64| -> Vec<(f64, f64)> {
        points.iter().map(|(x, s)| (*x, pick(&s.summary))).collect()
    };
    let mut requests = vec![
        Series::line(
            "successful requests/s",
            colour(0),
            figure_of(&|s| s.throughput.requests_per_s),
        )
        .markers()
        .labelled(labels.clone()),
    ];
    if axis == LoadAxis::Rate {
        // Where the server keeps up, the two lines are one.
        requests.push(
            Series::line("offered", colour(9), xs.iter().map(|&x| (x, x)).collect()).dashed(),
        );
    }
    let mut panels = vec![
        Panel {
            title: "Successful requests/s".into(),
            note: Some(note.clone()),
            x: load_axis(axis),
            y: Axis::new("requests/s").from_zero(),
            series: requests,
            rules: Vec::new(),
        },
        Panel {
            title: "Output tokens/s".into(),
            note: Some("output tokens of successful requests, per second of the stage".into()),
            x: load_axis(axis),
            y: Axis::new("output tokens/s").from_zero(),
            series: vec![
                Series::line(
                    "output tokens/s",
                    colour(4),
                    figure_of(&|s| s.throughput.output_tokens_per_s),
                )
                .markers(),
            ],
            rules: Vec::new(),
        },
    ];
    type Pick = fn(&Summary) -> Option<&Stats>;
    let latencies: [(&str, Pick); 4] = [
        ("TTFT", |s| s.latency_ms.ttft.as_ref()),
        ("TPOT", |s| s.latency_ms.tpot.as_ref()),
        ("ITL", |s| s.latency_ms.itl.as_ref()),
        ("E2E", |s| s.latency_ms.e2e.as_ref()),
    ];
    for (name, pick) in latencies {
        let percentile = |p99: bool| -> Vec<(f64, f64)> {
            points
                .iter()
                .filter_map(|(x, s)| {
                    pick(&s.summary).map(|st| (*x, if p99 { st.p99 } else { st.p50 }))
                })
                .collect()
        };
        let (p50, p99) = (percentile(false), percentile(true));
        if p50.is_empty() {
            continue;
        }
        panels.push(Panel {
            title: format!("{name} p50 and p99"),
            note: None,
            x: load_axis(axis),
            y: Axis::new(format!("{name} (ms)")).from_zero(),
            series: vec![
                Series::line("p50", colour(0), p50).markers(),
                Series::line("p99", colour(2), p99).dashed().markers(),
            ],
            rules: Vec::new(),
        });
    }
    Some(Figure {
        name: "latency_vs_load".into(),
        title: format!("Throughput and latency vs {what} (per stage)"),
        subtitle: subtitle.to_owned(),
        columns: 2,
        panel_size: (760, 440),
        panels,
    })
}

/// How an objective's figure is drawn: its unit, and the factor from the objective's unit to the axis's.
fn objective_unit(objective: &Objective) -> (&'static str, f64) {
    match objective.metric {
        Metric::Latency(..) => ("ms", 1.0),
        Metric::FailureRate => ("%", 100.0),
        Metric::Goodput => ("%", 1.0),
        _ => ("/s", 1.0),
    }
}

/// The search's answer in words, for the figure's notes.
fn capacity_answer(outcome: &CapacityOutcome) -> String {
    let load = |v: f64| load_text(outcome.load, v);
    let failing = outcome
        .bracket
        .failing
        .map(|f| format!(", {} fails", load(f)))
        .unwrap_or_default();
    let confirmed = if outcome.confirmed {
        " (both confirmed by a rerun)"
    } else {
        ""
    };
    match (outcome.status, outcome.answer) {
        (Status::Found, Some(a)) => format!("capacity {}{failing}{confirmed}", load(a)),
        (Status::AboveMax, Some(a)) => {
            format!("capacity at least {}: the search's max passed", load(a))
        }
        (Status::Incomplete, Some(a)) => {
            format!(
                "at least {}: the points ran out before a load failed",
                load(a)
            )
        }
        (Status::BelowStart, _) => format!(
            "no capacity: the first load{} failed",
            outcome
                .bracket
                .failing
                .map(|f| format!(", {},", load(f)))
                .unwrap_or_default()
        ),
        (Status::Unstable, _) => {
            "no stable answer: the passing load failed its rerun and no lower load was confirmed"
                .to_owned()
        }
        _ => "no answer: the search ran no point to the end".to_owned(),
    }
}

/// Rules for the answer and the failing load above it, and the knee where asked.
fn capacity_rules(outcome: &CapacityOutcome, knee: bool) -> Vec<Rule> {
    let mut rules = Vec::new();
    if let Some(answer) = outcome.answer {
        rules.push(Rule {
            at: answer,
            label: format!("answer {}", load_number(outcome.load, answer)),
            short: "answer".into(),
            colour: Some(PASSED),
        });
    }
    if let Some(failing) = outcome.bracket.failing {
        rules.push(Rule {
            at: failing,
            label: format!("fails {}", load_number(outcome.load, failing)),
            short: "fails".into(),
            colour: Some(FAILED),
        });
    }
    // A knee at the answer or the failing load is said in the note rather than drawn over their rules.
    if knee
        && let Some(k) = outcome.knee
        && !rules.iter().any(|r| r.at == k.load)
    {
        rules.push(Rule {
            at: k.load,
            label: format!("knee {}", load_number(outcome.load, k.load)),
            short: "knee".into(),
            colour: None,
        });
    }
    rules.sort_by(|a, b| a.at.total_cmp(&b.at));
    rules
}

/// One value per point: the marks of the points that passed and of those that failed, and a line through the
/// latest run of each load in load order (a load run twice, as the confirmations do, is judged by its latest
/// run, as the search judges it).
fn capacity_series(
    points: &[PointReport],
    value: &dyn Fn(&PointReport) -> Option<f64>,
    line_colour: Colour,
) -> Vec<Series> {
    let mut latest: BTreeMap<u64, (u32, f64, f64)> = BTreeMap::new();
    for p in points {
        if let Some(v) = value(p) {
            let entry = latest
                .entry(p.load.to_bits())
                .or_insert((p.index, p.load, v));
            if p.index >= entry.0 {
                *entry = (p.index, p.load, v);
            }
        }
    }
    let mut line: Vec<(f64, f64)> = latest.values().map(|&(_, x, y)| (x, y)).collect();
    line.sort_by(|a, b| a.0.total_cmp(&b.0));
    let marks = |passed: bool| -> Vec<(f64, f64)> {
        points
            .iter()
            .filter(|p| p.passed == passed)
            .filter_map(|p| value(p).map(|v| (p.load, v)))
            .collect()
    };
    let mut series = vec![Series::line("in load order", line_colour, line)];
    // A kind of mark no point has gets no legend entry.
    for (label, colour, shape, passed) in [
        ("passed", PASSED, Shape::Circle, true),
        ("failed", FAILED, Shape::Cross, false),
    ] {
        let points = marks(passed);
        if !points.is_empty() {
            series.push(Series::marks(label, colour, shape, points));
        }
    }
    series
}

/// The SLO capacity search as a picture: for each objective, its figure at every point against the point's
/// load, the objective's bound as a dashed line, each point marked passed (●) or failed (×) by every objective,
/// a line through the loads in load order, and the answer and the failing load above it as rules; then the
/// achieved requests/s against the load, with the knee. `None` when the search ran no point.
pub(crate) fn capacity_figure(outcome: &CapacityOutcome, subtitle: &str) -> Option<Figure> {
    let points = &outcome.points;
    if points.is_empty() {
        return None;
    }
    let top = points.iter().map(|p| p.load).fold(0.0, f64::max) * 1.05;
    let x = || load_axis(outcome.load).range(0.0, top.max(1e-3));
    let answer = capacity_answer(outcome);
    let mut panels = Vec::new();
    for (i, text) in outcome.objectives.iter().enumerate() {
        let Ok(objective) = text.parse::<Objective>() else {
            continue;
        };
        let (unit, scale) = objective_unit(&objective);
        let label = format!("{} ({unit})", objective.metric_name());
        let value = |p: &PointReport| p.objectives.get(i).and_then(|o| o.value).map(|v| v * scale);
        let unmeasured = points.iter().filter(|p| value(p).is_none()).count();
        let mut series = capacity_series(points, &value, colour(0));
        let op = match objective.comparison {
            Comparison::AtMost => "≤",
            Comparison::AtLeast => "≥",
        };
        let bound = objective.bound * scale;
        series.push(
            Series::line(
                format!("SLO {op} {} {unit}", plain_number(bound)),
                SLO_LINE,
                vec![(0.0, bound), (top, bound)],
            )
            .dashed(),
        );
        let mut note = answer.clone();
        if unmeasured > 0 {
            note.push_str(&format!(
                "; {unmeasured} point(s) measured no {} (failed) and are not drawn",
                objective.metric_name()
            ));
        }
        panels.push(Panel {
            title: format!(
                "{} at each load (objective {text})",
                objective.metric_name()
            ),
            note: Some(note),
            x: x(),
            y: Axis::new(label).from_zero(),
            series,
            rules: capacity_rules(outcome, false),
        });
    }
    let mut throughput = capacity_series(points, &|p| Some(p.requests_per_s), colour(0));
    if outcome.load == LoadAxis::Rate {
        throughput.push(Series::line("offered", colour(9), vec![(0.0, 0.0), (top, top)]).dashed());
    }
    panels.push(Panel {
        title: "Achieved throughput at each load".into(),
        note: Some(match outcome.knee {
            Some(k) => format!(
                "knee at {}: beyond it, added load buys less than half the throughput it did at the first point",
                load_text(outcome.load, k.load)
            ),
            None => "no knee: fewer than two loads, or nothing served at the lowest".into(),
        }),
        x: x(),
        y: Axis::new("successful requests/s").from_zero(),
        series: throughput,
        rules: capacity_rules(outcome, true),
    });
    let what = match outcome.load {
        LoadAxis::Rate => "offered rate",
        LoadAxis::Concurrency => "concurrency",
    };
    Some(Figure {
        name: "capacity_search".into(),
        title: format!(
            "SLO capacity search: {} points against the {what} ({})",
            points.len(),
            outcome.objectives.join(", ")
        ),
        subtitle: subtitle.to_owned(),
        columns: 1,
        panel_size: (1400, 500),
        panels,
    })
}

/// The p99 bounds of an experiment's SLO, in milliseconds, drawn on its latency figures.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LatencyBounds {
    pub ttft_p99_ms: Option<f64>,
    pub tpot_p99_ms: Option<f64>,
    pub itl_p99_ms: Option<f64>,
    pub e2e_p99_ms: Option<f64>,
}

/// A figure of each run, and how to read it off its summary.
struct RunMetric {
    title: &'static str,
    axis: String,
    pick: fn(&llmbench_metrics::metrics::RunSummary) -> Option<f64>,
}

/// p50 and p99 of a latency, read off a run's overall summary.
type LatencyPick = fn(&llmbench_metrics::metrics::RunSummary) -> Option<&Stats>;

/// The spread of one figure over a treatment's runs: the mean and, for several runs, the lowest and highest.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    pub mean: f64,
    pub min: f64,
    pub max: f64,
    pub runs: usize,
}

impl Spread {
    /// Over the runs' values; `None` when no run has one.
    pub fn of(values: impl IntoIterator<Item = f64>) -> Option<Spread> {
        let values: Vec<f64> = values.into_iter().filter(|v| v.is_finite()).collect();
        if values.is_empty() {
            return None;
        }
        Some(Spread {
            mean: values.iter().sum::<f64>() / values.len() as f64,
            min: values.iter().copied().fold(f64::INFINITY, f64::min),
            max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            runs: values.len(),
        })
    }
}

/// A factor's levels on an axis: numbers on a numeric axis when every level is one, else names in the order
/// the treatments come, on a categorical axis.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Levels {
    Numeric,
    Categorical(Vec<String>),
}

impl Levels {
    pub fn of<'a>(levels: impl IntoIterator<Item = &'a str> + Clone) -> Levels {
        if levels
            .clone()
            .into_iter()
            .all(|l| l.trim().parse::<f64>().is_ok_and(f64::is_finite))
        {
            return Levels::Numeric;
        }
        let mut names: Vec<String> = Vec::new();
        for level in levels {
            if !names.iter().any(|n| n == level) {
                names.push(level.to_owned());
            }
        }
        Levels::Categorical(names)
    }

    /// Where a level sits on the axis.
    fn position(&self, level: &str) -> Option<f64> {
        match self {
            Levels::Numeric => level.trim().parse().ok(),
            Levels::Categorical(names) => names.iter().position(|n| n == level).map(|i| i as f64),
        }
    }

    /// The axis for these levels: whole-number levels (concurrencies, token counts) get whole-number ticks.
    fn axis(&self, factor: &str, positions: &[f64]) -> Axis {
        match self {
            Levels::Numeric if positions.iter().all(|x| x.fract() == 0.0) => {
                Axis::new(factor).integer()
            }
            Levels::Numeric => Axis::new(factor),
            Levels::Categorical(names) => Axis::new(factor).categories(names.clone()),
        }
    }
}

/// A file-name-safe form of a factor's name.
fn file_stem(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect()
}

/// An experiment's figures against each factor that has more than one level: for each, successful requests/s,
/// output tokens/s, and TTFT, TPOT, ITL and E2E p50 and p99 (and the capacity, where the runs searched for it)
/// against the factor's level, each point a treatment: the mean of its repeats, with an error bar from the
/// lowest to the highest repeat when it has several; the SLO's p99 bounds as lines. The other factors' levels
/// make one series each. `name` prefixes the files when several experiments are compared.
pub(crate) fn factor_figures(
    entries: &[Entry],
    name: Option<&str>,
    subtitle: &str,
    slo: &LatencyBounds,
) -> Vec<Figure> {
    let mut factors: Vec<&str> = Vec::new();
    for entry in entries {
        for factor in entry.levels.keys() {
            if !factors.contains(&factor.as_str()) {
                factors.push(factor);
            }
        }
    }
    let varied: Vec<&str> = factors
        .into_iter()
        .filter(|f| {
            let mut levels: Vec<&str> = entries
                .iter()
                .filter_map(|e| e.levels.get(*f).map(String::as_str))
                .collect();
            levels.sort_unstable();
            levels.dedup();
            levels.len() > 1
        })
        .collect();
    varied
        .iter()
        .map(|factor| factor_figure(entries, factor, &varied, name, subtitle, slo))
        .collect()
}

fn factor_figure(
    entries: &[Entry],
    factor: &str,
    varied: &[&str],
    name: Option<&str>,
    subtitle: &str,
    slo: &LatencyBounds,
) -> Figure {
    let on_axis: Vec<&Entry> = entries
        .iter()
        .filter(|e| e.levels.contains_key(factor))
        .collect();
    let levels = Levels::of(on_axis.iter().map(|e| e.levels[factor].as_str()));
    let positions: Vec<f64> = on_axis
        .iter()
        .filter_map(|e| levels.position(&e.levels[factor]))
        .collect();
    let x_axis = || levels.axis(factor, &positions);
    // One series per combination of the other varied factors' levels, in the order the treatments come.
    let mut groups: Vec<(String, Vec<&Entry>)> = Vec::new();
    for entry in &on_axis {
        let key: Vec<String> = varied
            .iter()
            .filter(|f| **f != factor)
            .filter_map(|f| entry.levels.get(*f).map(|l| format!("{f}={l}")))
            .collect();
        let key = key.join(", ");
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, members)) => members.push(entry),
            None => groups.push((key, vec![entry])),
        }
    }
    let categorical = matches!(levels, Levels::Categorical(_));
    // Side by side within a category, so the groups' error bars do not hide each other.
    let dodge = |g: usize| {
        if categorical && groups.len() > 1 {
            (g as f64 - (groups.len() - 1) as f64 / 2.0) * 0.5 / groups.len() as f64
        } else {
            0.0
        }
    };
    // A p99 is told from its p50 by a dashed line, or by a triangle where levels are not joined by lines.
    let series_of = |label: String,
                     c: Colour,
                     g: usize,
                     members: &[&Entry],
                     value: &dyn Fn(&llmbench_metrics::metrics::RunSummary) -> Option<f64>,
                     p99: bool| {
        let mut points: Vec<((f64, f64), (f64, f64))> = members
            .iter()
            .filter_map(|e| {
                let x = levels.position(&e.levels[factor])? + dodge(g);
                let spread = Spread::of(e.runs.iter().filter_map(|r| value(&r.summary)))?;
                Some(((x, spread.mean), (spread.min, spread.max)))
            })
            .collect();
        points.sort_by(|a, b| a.0.0.total_cmp(&b.0.0));
        let (xy, bars): (Vec<_>, Vec<_>) = points.into_iter().unzip();
        let series = if categorical {
            let shape = if p99 { Shape::Triangle } else { Shape::Circle };
            Series::marks(label, c, shape, xy)
        } else {
            let line = Series::line(label, c, xy).markers();
            if p99 { line.dashed() } else { line }
        };
        series.error_bars(bars)
    };
    let name_of = |group: &str, what: &str| match (group.is_empty(), what.is_empty()) {
        (true, _) => what.to_owned(),
        (false, true) => group.to_owned(),
        (false, false) => format!("{group} {what}"),
    };
    let searched = on_axis
        .iter()
        .flat_map(|e| &e.runs)
        .find_map(|r| r.summary.capacity.as_ref().map(|c| c.load));
    let throughputs = [
        RunMetric {
            title: "Successful requests/s",
            axis: "requests/s".into(),
            pick: |s| Some(s.overall.throughput.requests_per_s),
        },
        RunMetric {
            title: "Output tokens/s",
            axis: "output tokens/s".into(),
            pick: |s| Some(s.overall.throughput.output_tokens_per_s),
        },
        RunMetric {
            title: "Capacity (highest load meeting the SLO)",
            axis: match searched {
                Some(LoadAxis::Concurrency) => "capacity (requests in flight)".into(),
                _ => "capacity (requests/s)".into(),
            },
            pick: |s| s.capacity.as_ref().and_then(|c| c.answer),
        },
    ];
    let mut panels = Vec::new();
    for metric in &throughputs {
        let series: Vec<Series> = groups
            .iter()
            .enumerate()
            .map(|(g, (key, members))| {
                series_of(
                    name_of(key, ""),
                    colour(g),
                    g,
                    members,
                    &|s| (metric.pick)(s),
                    false,
                )
            })
            .filter(|s| !s.points.is_empty())
            .collect();
        if series.is_empty() {
            continue;
        }
        panels.push(Panel {
            title: metric.title.into(),
            note: None,
            x: x_axis(),
            y: Axis::new(metric.axis.clone()).from_zero(),
            series,
            rules: Vec::new(),
        });
    }
    let latencies: [(&str, LatencyPick, Option<f64>); 4] = [
        (
            "TTFT",
            |s| s.overall.latency_ms.ttft.as_ref(),
            slo.ttft_p99_ms,
        ),
        (
            "TPOT",
            |s| s.overall.latency_ms.tpot.as_ref(),
            slo.tpot_p99_ms,
        ),
        ("ITL", |s| s.overall.latency_ms.itl.as_ref(), slo.itl_p99_ms),
        ("E2E", |s| s.overall.latency_ms.e2e.as_ref(), slo.e2e_p99_ms),
    ];
    // Where an SLO line runs: across the categories, or from the lowest level to the highest.
    let span = match &levels {
        Levels::Categorical(names) => (-0.5, names.len() as f64 - 0.5),
        Levels::Numeric => positions
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
                (lo.min(x), hi.max(x))
            }),
    };
    for (metric, pick, bound) in latencies {
        let mut series = Vec::new();
        for (g, (key, members)) in groups.iter().enumerate() {
            // One series: p50 and p99 in two colours; several: one colour per series, p99 dashed.
            let (c50, c99) = if groups.len() == 1 {
                (colour(0), colour(2))
            } else {
                (colour(g), colour(g))
            };
            series.push(series_of(
                name_of(key, "p50"),
                c50,
                g,
                members,
                &|s| pick(s).map(|st| st.p50),
                false,
            ));
            series.push(series_of(
                name_of(key, "p99"),
                c99,
                g,
                members,
                &|s| pick(s).map(|st| st.p99),
                true,
            ));
        }
        series.retain(|s| !s.points.is_empty());
        if series.is_empty() {
            continue;
        }
        if let Some(bound) = bound {
            series.push(
                Series::line(
                    format!("SLO p99 ≤ {} ms", plain_number(bound)),
                    SLO_LINE,
                    vec![(span.0, bound), (span.1, bound)],
                )
                .dashed(),
            );
        }
        panels.push(Panel {
            title: format!("{metric} p50 and p99"),
            note: None,
            x: x_axis(),
            y: Axis::new(format!("{metric} (ms)")).from_zero(),
            series,
            rules: Vec::new(),
        });
    }
    let most = on_axis.iter().map(|e| e.runs.len()).max().unwrap_or(0);
    let note = if most > 1 {
        "each point the mean of a treatment's runs; error bars span its lowest to highest run (min–max)"
    } else {
        "each point a treatment's one run"
    };
    if let Some(first) = panels.first_mut() {
        first.note = Some(note.to_owned());
    }
    let stem = format!("by_{}", file_stem(factor));
    Figure {
        name: match name {
            Some(prefix) => format!("{}_{stem}", file_stem(prefix)),
            None => stem,
        },
        title: format!("Against the factor {factor} (each point a treatment)"),
        subtitle: subtitle.to_owned(),
        columns: 2,
        panel_size: (760, 440),
        panels,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plot::compare::ComparedRun;
    use crate::plot::figure::Style;
    use llmbench_metrics::metrics::RunSummary;
    use llmbench_metrics::metrics::capacity::{Bracket, Knee, ObjectiveResult, Phase};

    fn point(index: u32, load: f64, ttft_p99: f64, passed: bool) -> PointReport {
        PointReport {
            index,
            stage: Some(index),
            load,
            phase: Phase::Ramp,
            duration_s: 1.0,
            requests: 10,
            succeeded: 10,
            failed: 0,
            failure_rate: 0.0,
            // Served up to 20 req/s.
            requests_per_s: load.min(20.0),
            output_tokens_per_s: 0.0,
            ttft_ms: None,
            tpot_ms: None,
            itl_ms: None,
            e2e_ms: None,
            goodput_percentage: None,
            passed,
            objectives: vec![ObjectiveResult {
                objective: "ttft_p99<=100ms".into(),
                value: Some(ttft_p99),
                met: ttft_p99 <= 100.0,
            }],
        }
    }

    /// A rate search that ran 4, 8, 16, 32 (fails), 22.6 (fails), 19 and 20.7 (fails), then reran 19 (passes)
    /// and 20.7 (fails).
    fn outcome() -> CapacityOutcome {
        CapacityOutcome {
            load: LoadAxis::Rate,
            objectives: vec!["ttft_p99<=100ms".into()],
            status: Status::Found,
            answer: Some(19.0),
            bracket: Bracket {
                passing: Some(19.0),
                failing: Some(20.7),
            },
            uncertainty: None,
            confirmed: true,
            knee: Some(Knee {
                load: 16.0,
                requests_per_s: 16.0,
            }),
            points: vec![
                point(0, 4.0, 50.0, true),
                point(1, 8.0, 51.0, true),
                point(2, 16.0, 52.0, true),
                point(3, 32.0, 1200.0, false),
                point(4, 22.6, 300.0, false),
                point(5, 19.0, 55.0, true),
                point(6, 20.7, 120.0, false),
                point(7, 19.0, 60.0, true),
                point(8, 20.7, 130.0, false),
            ],
            rule: String::new(),
        }
    }

    #[test]
    fn the_capacity_chart_joins_the_points_in_load_order_and_marks_each_pass_or_fail() {
        let figure = capacity_figure(&outcome(), "run r").expect("a figure");
        assert_eq!(figure.name, "capacity_search");
        let ttft = &figure.panels[0];
        assert_eq!(ttft.y.label, "ttft_p99 (ms)");
        // The line: one value per load, the latest run of a repeated load (19 → 60, 20.7 → 130), by load.
        assert_eq!(ttft.series[0].label, "in load order");
        assert_eq!(
            ttft.series[0].points,
            [
                (4.0, 50.0),
                (8.0, 51.0),
                (16.0, 52.0),
                (19.0, 60.0),
                (20.7, 130.0),
                (22.6, 300.0),
                (32.0, 1200.0)
            ]
        );
        // Every run marked: five passed (● green), four failed (× red), in run order.
        let (passed, failed) = (&ttft.series[1], &ttft.series[2]);
        assert_eq!(
            (passed.label.as_str(), failed.label.as_str()),
            ("passed", "failed")
        );
        assert_eq!(
            passed.points,
            [
                (4.0, 50.0),
                (8.0, 51.0),
                (16.0, 52.0),
                (19.0, 55.0),
                (19.0, 60.0)
            ]
        );
        assert_eq!(
            failed.points,
            [(32.0, 1200.0), (22.6, 300.0), (20.7, 120.0), (20.7, 130.0)]
        );
        assert_eq!(
            passed.style,
            Style::Marks {
                shape: Shape::Circle,
                size: 6
            }
        );
        assert_eq!(
            failed.style,
            Style::Marks {
                shape: Shape::Cross,
                size: 6
            }
        );
        assert_eq!((passed.colour, failed.colour), (PASSED, FAILED));
        // The SLO's bound, 100 ms, across the whole x range (0 to 5 % past the highest load, 32).
        let slo = &ttft.series[3];
        assert_eq!(slo.label, "SLO ≤ 100 ms");
        assert_eq!(slo.points, [(0.0, 100.0), (32.0 * 1.05, 100.0)]);
        assert_eq!(
            slo.style,
            Style::Line {
                dashed: true,
                markers: false
            }
        );
        assert_eq!(ttft.x.range, Some((0.0, 32.0 * 1.05)));
        // The answer and the failing load above it.
        let rules: Vec<(f64, &str)> = ttft
            .rules
            .iter()
            .map(|r| (r.at, r.label.as_str()))
            .collect();
        assert_eq!(rules, [(19.0, "answer 19.0"), (20.7, "fails 20.7")]);
        assert_eq!(
            ttft.note.as_deref(),
            Some("capacity 19.0 req/s, 20.7 req/s fails (both confirmed by a rerun)")
        );
        // Then the achieved throughput, with the knee among the rules.
        let throughput = &figure.panels[1];
        assert_eq!(throughput.series[0].points[6], (32.0, 20.0));
        assert!(
            throughput
                .rules
                .iter()
                .any(|r| r.at == 16.0 && r.label == "knee 16.0")
        );
        assert!(
            throughput
                .note
                .as_deref()
                .unwrap()
                .starts_with("knee at 16.0 req/s")
        );
    }

    #[test]
    fn a_failure_rate_objective_is_drawn_in_percent_and_a_search_without_points_has_no_chart() {
        let mut o = outcome();
        o.objectives = vec!["failure_rate<=1%".into()];
        for p in &mut o.points {
            p.objectives[0].value = Some(0.005);
        }
        let figure = capacity_figure(&o, "").unwrap();
        let panel = &figure.panels[0];
        assert_eq!(panel.y.label, "failure_rate (%)");
        assert_eq!(panel.series[1].points[0], (4.0, 0.5));
        assert_eq!(panel.series[3].points[0], (0.0, 1.0));
        o.points.clear();
        assert!(capacity_figure(&o, "").is_none());
        // Nothing found: no answer rule, and the note says why.
        let mut below = outcome();
        below.status = Status::BelowStart;
        below.answer = None;
        below.bracket = Bracket {
            passing: None,
            failing: Some(4.0),
        };
        let figure = capacity_figure(&below, "").unwrap();
        assert_eq!(figure.panels[0].rules.len(), 1);
        assert_eq!(
            figure.panels[0].note.as_deref(),
            Some("no capacity: the first load, 4.00 req/s, failed")
        );
    }

    fn stage_meta(load: LoadKind, rate: Option<f64>, concurrency: Option<u32>) -> StageMeta {
        StageMeta {
            load: Some(load),
            rate,
            concurrency,
            ..StageMeta::default()
        }
    }

    #[test]
    fn a_stage_offers_its_rate_or_the_concurrency_of_a_closed_loop() {
        let of = |load, rate, c| Offered::of(&stage_meta(load, rate, c));
        assert_eq!(
            of(LoadKind::Constant, Some(5.0), Some(512)),
            Some(Offered::Rate(5.0))
        );
        assert_eq!(
            of(LoadKind::Concurrent, None, Some(8)),
            Some(Offered::Concurrency(8.0))
        );
        assert_eq!(
            of(LoadKind::Synchronous, None, Some(1)),
            Some(Offered::Concurrency(1.0))
        );
        // guidellm's throughput stage: its concurrency is a cap, not what it offered.
        assert_eq!(of(LoadKind::Throughput, None, Some(512)), None);
    }

    fn summary_json(requests_per_s: f64, ttft: Option<(f64, f64)>) -> serde_json::Value {
        let stats = ttft.map(|(p50, p99)| {
            serde_json::json!({"count": 10, "mean": p50, "stddev": 0.0, "min": p50, "max": p99, "p50": p50,
                "p90": p99, "p95": p99, "p99": p99, "p999": p99})
        });
        serde_json::json!({
            "requests": {"total": 10, "succeeded": 10, "failed": 0}, "failure_rate": 0.0, "duration_s": 1.0,
            "throughput": {"requests_per_s": requests_per_s, "input_tokens_per_s": 0.0,
                "output_tokens_per_s": requests_per_s * 10.0, "total_tokens_per_s": 0.0},
            "latency_ms": {"ttft": stats, "tpot": null, "itl": null, "ntpot": null, "e2e": null,
                "ttft_from_scheduled": null, "e2e_from_scheduled": null},
            "schedule": {"requested_rate": null, "achieved_rate": null, "delay_ms": null},
            "errors": {}
        })
    }

    fn summary(requests_per_s: f64, ttft: Option<(f64, f64)>) -> Summary {
        serde_json::from_value(summary_json(requests_per_s, ttft)).expect("a summary")
    }

    #[test]
    fn a_sweep_plots_each_stage_against_its_offered_rate_in_rate_order() {
        // guidellm's sweep: synchronous, throughput, then constant rates (run here out of order).
        let loads = [
            stage_meta(LoadKind::Synchronous, None, Some(1)),
            stage_meta(LoadKind::Throughput, None, Some(512)),
            stage_meta(LoadKind::Constant, Some(30.0), Some(512)),
            stage_meta(LoadKind::Constant, Some(10.0), Some(512)),
        ];
        let stages: Vec<StageSummary> = [(4.0, 50.0), (40.0, 90.0), (28.0, 70.0), (10.0, 55.0)]
            .into_iter()
            .enumerate()
            .map(|(i, (rps, ttft))| StageSummary {
                stage: i as u32,
                summary: summary(rps, Some((ttft, ttft * 2.0))),
                stopped: None,
            })
            .collect();
        let figure = load_sweep_figure(&stages, &loads, "run r").expect("a figure");
        assert_eq!(figure.name, "latency_vs_load");
        let requests = &figure.panels[0];
        assert_eq!(requests.x.label, "offered rate (requests/s)");
        assert_eq!(requests.series[0].points, [(10.0, 10.0), (30.0, 28.0)]);
        assert_eq!(requests.series[0].point_labels, ["3", "2"]);
        // The offered rate itself, as a reference.
        assert_eq!(requests.series[1].points, [(10.0, 10.0), (30.0, 30.0)]);
        // The stages without a rate are named, not drawn.
        assert_eq!(
            requests.note.as_deref(),
            Some(
                "each point a stage; stages 0 (synchronous), 1 (throughput) had no offered rate and are left out"
            )
        );
        let ttft = figure
            .panels
            .iter()
            .find(|p| p.title == "TTFT p50 and p99")
            .unwrap();
        assert_eq!(ttft.series[0].points, [(10.0, 55.0), (30.0, 70.0)]);
        assert_eq!(ttft.series[1].points, [(10.0, 110.0), (30.0, 140.0)]);
        // Only TTFT was measured: no TPOT, ITL or E2E panels.
        assert_eq!(figure.panels.len(), 3);

        // A concurrency sweep: the axis is the concurrency.
        let loads: Vec<StageMeta> = [1, 4]
            .into_iter()
            .map(|c| stage_meta(LoadKind::Concurrent, None, Some(c)))
            .collect();
        let figure = load_sweep_figure(&stages[..2], &loads, "").unwrap();
        assert_eq!(figure.panels[0].x.label, "concurrency (requests in flight)");
        assert_eq!(figure.panels[0].series.len(), 1);
        // One stage with a load is no sweep.
        assert!(load_sweep_figure(&stages[..2], &loads[..1], "").is_none());
    }

    #[test]
    fn numeric_levels_make_a_numeric_axis_and_any_other_a_categorical_one_in_plan_order() {
        assert_eq!(Levels::of(["8", "16", "2.5"]), Levels::Numeric);
        assert_eq!(
            Levels::of(["fp8", "bf16", "fp8"]),
            Levels::Categorical(vec!["fp8".into(), "bf16".into()])
        );
        // One level that is not a number makes them all names.
        assert_eq!(
            Levels::of(["8", "inf"]),
            Levels::Categorical(vec!["8".into(), "inf".into()])
        );
    }

    fn run_summary(requests_per_s: f64, ttft_p99: f64) -> RunSummary {
        let mut json = summary_json(requests_per_s, Some((ttft_p99 / 2.0, ttft_p99)));
        let run = serde_json::json!({"schema": "llmbench.summary/v1", "run_id": "r", "harness": "vllm-benchmark",
            "model": "m", "endpoint": "http://x", "stages": []});
        if let (Some(json), Some(run)) = (json.as_object_mut(), run.as_object()) {
            json.extend(run.clone());
        }
        serde_json::from_value(json).expect("a run summary")
    }

    fn meta() -> crate::report::RunMeta {
        serde_json::from_value(serde_json::json!({
            "schema": "llmbench.run/v1", "run_id": "r", "harness": "vllm-benchmark", "profile": "p",
            "model": "m", "endpoint": "http://x", "started_at": "2026-01-01T00:00:00Z", "t0_unix_ns": 0,
            "stages": [], "llmbench_version": "0"
        }))
        .expect("a valid run.json")
    }

    fn entry(label: &str, levels: &[(&str, &str)], runs: &[(f64, f64)]) -> Entry {
        Entry {
            label: label.into(),
            levels: levels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            runs: runs
                .iter()
                .map(|&(rps, ttft)| ComparedRun {
                    dir: String::new(),
                    meta: meta(),
                    summary: run_summary(rps, ttft),
                    distributions: Default::default(),
                })
                .collect(),
        }
    }

    #[test]
    fn an_experiment_plots_each_figure_against_the_factors_levels_with_min_max_error_bars() {
        // conc × prompts, conc numeric, twice each but one treatment run once.
        let entries = [
            entry(
                "c2-p4",
                &[("conc", "2"), ("prompts", "4")],
                &[(10.0, 40.0), (12.0, 60.0)],
            ),
            entry(
                "c8-p4",
                &[("conc", "8"), ("prompts", "4")],
                &[(30.0, 80.0), (36.0, 100.0)],
            ),
            entry("c2-p8", &[("conc", "2"), ("prompts", "8")], &[(11.0, 50.0)]),
        ];
        let slo = LatencyBounds {
            ttft_p99_ms: Some(95.0),
            ..LatencyBounds::default()
        };
        let figures = factor_figures(&entries, None, "experiment x", &slo);
        let names: Vec<&str> = figures.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["by_conc", "by_prompts"]);
        let by_conc = &figures[0];
        let requests = &by_conc.panels[0];
        assert!(
            requests.x.categories.is_empty(),
            "numeric levels, numeric axis"
        );
        assert_eq!(requests.x.label, "conc");
        // One series per level of the other factor.
        let labels: Vec<&str> = requests.series.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(labels, ["prompts=4", "prompts=8"]);
        // Means of the repeats, bars from the lowest to the highest run; one run: a bar of no height.
        assert_eq!(requests.series[0].points, [(2.0, 11.0), (8.0, 33.0)]);
        assert_eq!(requests.series[0].error_bars, [(10.0, 12.0), (30.0, 36.0)]);
        assert_eq!(requests.series[1].error_bars, [(11.0, 11.0)]);
        assert_eq!(
            requests.note.as_deref(),
            Some(
                "each point the mean of a treatment's runs; error bars span its lowest to highest run (min–max)"
            )
        );
        let ttft = by_conc
            .panels
            .iter()
            .find(|p| p.title == "TTFT p50 and p99")
            .unwrap();
        let p99 = ttft
            .series
            .iter()
            .find(|s| s.label == "prompts=4 p99")
            .unwrap();
        assert_eq!(p99.points, [(2.0, 50.0), (8.0, 90.0)]);
        assert_eq!(p99.error_bars, [(40.0, 60.0), (80.0, 100.0)]);
        // The SLO's TTFT bound across the levels, 2 to 8; no other latency has one.
        let bound = ttft.series.last().unwrap();
        assert_eq!(bound.label, "SLO p99 ≤ 95 ms");
        assert_eq!(bound.points, [(2.0, 95.0), (8.0, 95.0)]);
        let tpot = by_conc.panels.iter().find(|p| p.title.starts_with("TPOT"));
        assert!(tpot.is_none_or(|p| !p.series.iter().any(|s| s.label.starts_with("SLO"))));
        // No capacity without a search.
        assert!(
            !by_conc
                .panels
                .iter()
                .any(|p| p.title.starts_with("Capacity"))
        );
    }

    #[test]
    fn named_levels_sit_on_a_categorical_axis_and_a_factor_of_one_level_is_not_plotted() {
        let entries = [
            entry("a", &[("dtype", "fp8"), ("tp", "1")], &[(10.0, 40.0)]),
            entry("b", &[("dtype", "bf16"), ("tp", "1")], &[(8.0, 50.0)]),
        ];
        let figures = factor_figures(&entries, Some("exp 1"), "", &LatencyBounds::default());
        assert_eq!(figures.len(), 1, "tp has one level");
        assert_eq!(figures[0].name, "exp_1_by_dtype");
        let panel = &figures[0].panels[0];
        assert_eq!(panel.x.categories, ["fp8", "bf16"]);
        assert_eq!(panel.series[0].points, [(0.0, 10.0), (1.0, 8.0)]);
        assert!(matches!(
            panel.series[0].style,
            Style::Marks {
                shape: Shape::Circle,
                ..
            }
        ));
        // p50 as circles and p99 as triangles, where no line tells them apart.
        let ttft = figures[0]
            .panels
            .iter()
            .find(|p| p.title == "TTFT p50 and p99")
            .unwrap();
        let shapes: Vec<Style> = ttft.series.iter().map(|s| s.style).collect();
        assert_eq!(
            shapes,
            [
                Style::Marks {
                    shape: Shape::Circle,
                    size: 6
                },
                Style::Marks {
                    shape: Shape::Triangle,
                    size: 6
                }
            ]
        );
        assert_eq!(
            panel.note.as_deref(),
            Some("each point a treatment's one run")
        );
    }
}
