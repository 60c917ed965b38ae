//! A capacity search's answer in words: the highest load that met every objective, how sure it is (the bracket,
//! the reruns) and where and why the load above it failed; then every point in load order with its verdict and
//! figures. Read from `summary.json`'s `capacity` block ([`CapacityOutcome`]), for the terminal and `report.html`.

use llmbench_core::capacity::{LoadAxis, Metric, Objective};

use llmbench_metrics::metrics::capacity::{
    CapacityOutcome, ObjectiveResult, Phase, PointReport, Status,
};

use super::table::{Align, Table, Tone, num, percent};

/// The answer's lines (label, text) and the table of points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapacityReport {
    pub lines: Vec<(&'static str, String)>,
    pub points: Table,
}

impl CapacityReport {
    /// A title line, the labelled lines, then the points' table; ends with a newline.
    pub fn to_text(&self) -> String {
        let width = self.lines.iter().map(|(l, _)| l.len()).max().unwrap_or(0);
        let mut out = String::from("capacity search\n");
        for (label, text) in &self.lines {
            out.push_str(&format!("  {label:<width$}  {text}\n"));
        }
        out.push_str(&self.points.to_text());
        out
    }
}

/// What a load is counted in.
fn unit(axis: LoadAxis) -> &'static str {
    match axis {
        LoadAxis::Rate => "req/s",
        LoadAxis::Concurrency => "in flight",
    }
}

/// A load as its axis counts it: a rate with [`num`]'s decimals, a concurrency as the whole number it is.
fn load(axis: LoadAxis, value: f64) -> String {
    match axis {
        LoadAxis::Rate => num(value),
        LoadAxis::Concurrency => format!("{value:.0}"),
    }
}

/// The answer in one clause for the headline's verdict, and how it reads.
pub fn capacity_verdict(outcome: &CapacityOutcome) -> (Tone, String) {
    let unit = unit(outcome.load);
    let at = |value: f64| load(outcome.load, value);
    let answer = outcome.answer.map(at).unwrap_or_default();
    match outcome.status {
        Status::Found => {
            let failing = outcome
                .bracket
                .failing
                .map(|f| format!(", {} fails", at(f)))
                .unwrap_or_default();
            if outcome.confirmed {
                (
                    Tone::Good,
                    format!("capacity {answer} {unit} (confirmed by reruns{failing})"),
                )
            } else {
                (
                    Tone::Warn,
                    format!("capacity {answer} {unit} (not confirmed by reruns{failing})"),
                )
            }
        }
        Status::AboveMax => (
            Tone::Warn,
            format!("capacity at least {answer} {unit}: the search's max passed"),
        ),
        Status::Incomplete if outcome.answer.is_some() => (
            Tone::Warn,
            format!("capacity at least {answer} {unit}: the search ended before a load failed"),
        ),
        Status::Incomplete => (Tone::Bad, "no capacity: the search ran no point".to_owned()),
        Status::BelowStart => (
            Tone::Bad,
            format!(
                "no capacity: the first load{} already failed",
                outcome
                    .bracket
                    .failing
                    .map(|f| format!(", {} {unit},", at(f)))
                    .unwrap_or_default()
            ),
        ),
        Status::Unstable => (
            Tone::Bad,
            "no capacity: the answer failed its rerun and no lower load held".to_owned(),
        ),
    }
}

/// The search's answer, confidence, failing point and knee in words, and its points in load order.
pub fn capacity_report(outcome: &CapacityOutcome) -> CapacityReport {
    let unit = unit(outcome.load);
    let at = |value: f64| load(outcome.load, value);
    let mut lines = vec![(
        "objectives",
        format!(
            "{} (load: {}); {} points",
            outcome.objectives.join(", "),
            outcome.load.as_str(),
            outcome.points.len()
        ),
    )];
    let (lo, hi) = (outcome.bracket.passing, outcome.bracket.failing);
    let answer = match (outcome.status, outcome.answer) {
        (Status::Found, Some(a)) => {
            format!(
                "{} {unit}, the highest load that met every objective",
                at(a)
            )
        }
        (Status::AboveMax, Some(a)) => format!(
            "at least {} {unit}: the search's max met every objective; raise max to find the limit",
            at(a)
        ),
        (Status::Incomplete, Some(a)) => format!(
            "at least {} {unit}: the points (max_points) ran out before any load failed",
            at(a)
        ),
        (Status::BelowStart, _) => format!(
            "none: the first load{} already failed; lower start",
            hi.map(|h| format!(", {} {unit},", at(h)))
                .unwrap_or_default()
        ),
        (Status::Unstable, _) => format!(
            "none: {} failed its rerun and no lower load passed twice; the server's latency is not steady \
             at this load (longer points, min_duration, may settle it)",
            hi.map(|h| format!("{} {unit}", at(h)))
                .unwrap_or_else(|| "the answer".to_owned())
        ),
        _ => "none: no point was run".to_owned(),
    };
    lines.push(("answer", answer));
    if let (Some(lo), Some(hi)) = (lo, hi) {
        let width = outcome
            .uncertainty
            .map(|u| format!(" ({}% apart)", num(u.relative * 100.0)))
            .unwrap_or_default();
        let confidence = if outcome.confirmed {
            format!(
                "confirmed: {} passed again and {} failed again on a rerun; the capacity lies between them{width}",
                at(lo),
                at(hi)
            )
        } else {
            format!(
                "not confirmed by reruns: {} passed and {} failed once each{width}",
                at(lo),
                at(hi)
            )
        };
        lines.push(("confidence", confidence));
    }
    if let Some(point) = hi.and_then(|h| latest_at(&outcome.points, h)) {
        lines.push((
            "fails at",
            format!("{} {unit}: {}", at(point.load), unmet(point)),
        ));
    }
    if let Some(knee) = &outcome.knee {
        lines.push((
            "knee",
            format!(
                "{} {unit}, serving {} req/s: beyond it, added load buys less than half as much throughput",
                at(knee.load),
                num(knee.requests_per_s)
            ),
        ));
    }
    CapacityReport {
        lines,
        points: points_table(outcome),
    }
}

/// The latest run at `load` (a load run twice, to confirm it, counts by its rerun).
fn latest_at(points: &[PointReport], load: f64) -> Option<&PointReport> {
    points
        .iter()
        .filter(|p| p.load == load)
        .max_by_key(|p| p.index)
}

/// The objectives a point missed, with what it measured: `ttft_p99 128 ms (limit 100 ms)`.
fn unmet(point: &PointReport) -> String {
    let missed: Vec<String> = point
        .objectives
        .iter()
        .filter(|o| !o.met)
        .map(|o| match o.objective.parse::<Objective>() {
            Ok(objective) => format!(
                "{} {} (limit {})",
                objective.metric_name(),
                o.value
                    .map_or_else(|| "not measured".to_owned(), |v| figure(&objective, v)),
                figure(&objective, objective.bound)
            ),
            Err(_) => o.objective.clone(),
        })
        .collect();
    if missed.is_empty() {
        "every objective met".to_owned()
    } else {
        missed.join(", ")
    }
}

/// A value of an objective's metric in its unit: `128 ms`, `2.50%`, `95.0%`, `1200`.
fn figure(objective: &Objective, value: f64) -> String {
    match objective.metric {
        Metric::Latency(..) => format!("{} ms", num(value)),
        Metric::FailureRate => percent(value),
        Metric::Goodput => format!("{}%", num(value)),
        _ => num(value),
    }
}

/// An objective's cell: its figure, marked `✗` when it was missed.
fn objective_cell(result: &ObjectiveResult) -> String {
    let value = match (result.objective.parse::<Objective>(), result.value) {
        (Ok(objective), Some(v)) => figure(&objective, v),
        (Err(_), Some(v)) => num(v),
        (_, None) => "-".to_owned(),
    };
    if result.met {
        value
    } else {
        format!("{value} ✗")
    }
}

fn phase_name(phase: Phase) -> &'static str {
    match phase {
        Phase::Ramp => "ramp",
        Phase::Bisect => "bisect",
        Phase::Confirm => "confirm",
        Phase::ConfirmAbove => "confirm_above",
    }
}

/// Every point in load order (a rerun after the run it repeats): load, phase, pass or fail, what it served, its
/// failures, and each objective's figure.
fn points_table(outcome: &CapacityOutcome) -> Table {
    let load_header = format!("load ({})", unit(outcome.load));
    let mut columns: Vec<(&str, Align)> = vec![
        (&load_header, Align::Right),
        ("phase", Align::Left),
        ("result", Align::Left),
        ("req/s", Align::Right),
        ("failed", Align::Right),
    ];
    columns.extend(
        outcome
            .objectives
            .iter()
            .map(|o| (o.as_str(), Align::Right)),
    );
    let mut table = Table::new(&columns);
    let mut points: Vec<&PointReport> = outcome.points.iter().collect();
    points.sort_by(|a, b| a.load.total_cmp(&b.load).then(a.index.cmp(&b.index)));
    for point in points {
        let mut cells = vec![
            load(outcome.load, point.load),
            phase_name(point.phase).to_owned(),
            if point.passed { "pass" } else { "FAIL" }.to_owned(),
            num(point.requests_per_s),
            percent(point.failure_rate),
        ];
        // The objectives in the search's order; a point judged without one shows `-`.
        cells.extend(outcome.objectives.iter().map(|name| {
            point
                .objectives
                .iter()
                .find(|o| &o.objective == name)
                .map_or_else(|| "-".to_owned(), objective_cell)
        }));
        table.push(if point.passed { Tone::Good } else { Tone::Bad }, cells);
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;
    use llmbench_metrics::metrics::capacity::{Bracket, Knee, Percentiles, Uncertainty};

    fn point(index: u32, load: f64, phase: Phase, ttft_p99: f64, failure_rate: f64) -> PointReport {
        let objectives = vec![
            ObjectiveResult {
                objective: "ttft_p99<=100ms".into(),
                value: Some(ttft_p99),
                met: ttft_p99 <= 100.0,
            },
            ObjectiveResult {
                objective: "failure_rate<=1%".into(),
                value: Some(failure_rate),
                met: failure_rate <= 0.01,
            },
        ];
        PointReport {
            index,
            stage: Some(index),
            load,
            phase,
            duration_s: 3.0,
            requests: 60,
            succeeded: 60,
            failed: 0,
            failure_rate,
            requests_per_s: load.min(20.0),
            output_tokens_per_s: load.min(20.0) * 16.0,
            ttft_ms: Some(Percentiles {
                p50: 50.0,
                p99: ttft_p99,
            }),
            tpot_ms: None,
            itl_ms: None,
            e2e_ms: None,
            goodput_percentage: None,
            passed: objectives.iter().all(|o| o.met),
            objectives,
        }
    }

    /// A rate search that ramped 10 → 20 → 40, bisected to 28.3 (fails) and 23.8 (passes), then reran both.
    fn found() -> CapacityOutcome {
        CapacityOutcome {
            load: LoadAxis::Rate,
            objectives: vec!["ttft_p99<=100ms".into(), "failure_rate<=1%".into()],
            status: Status::Found,
            answer: Some(23.8),
            bracket: Bracket {
                passing: Some(23.8),
                failing: Some(28.3),
            },
            uncertainty: Some(Uncertainty {
                absolute: 4.5,
                relative: 4.5 / 23.8,
            }),
            confirmed: true,
            knee: Some(Knee {
                load: 20.0,
                requests_per_s: 20.0,
            }),
            points: vec![
                point(0, 10.0, Phase::Ramp, 51.0, 0.0),
                point(1, 20.0, Phase::Ramp, 60.0, 0.0),
                point(2, 40.0, Phase::Ramp, 900.0, 0.025),
                point(3, 28.3, Phase::Bisect, 180.0, 0.0),
                point(4, 23.8, Phase::Bisect, 95.0, 0.0),
                point(5, 23.8, Phase::Confirm, 97.0, 0.0),
                point(6, 28.3, Phase::ConfirmAbove, 128.0, 0.0),
            ],
            rule: String::new(),
        }
    }

    #[test]
    fn a_found_capacity_gives_the_answer_its_confidence_and_why_the_load_above_fails() {
        let report = capacity_report(&found());
        let line = |label: &str| {
            report
                .lines
                .iter()
                .find(|(l, _)| *l == label)
                .map(|(_, t)| t.clone())
                .unwrap()
        };
        assert_eq!(
            line("objectives"),
            "ttft_p99<=100ms, failure_rate<=1% (load: rate); 7 points"
        );
        assert_eq!(
            line("answer"),
            "23.8 req/s, the highest load that met every objective"
        );
        // (28.3 − 23.8) / 23.8 = 18.9 %.
        assert_eq!(
            line("confidence"),
            "confirmed: 23.8 passed again and 28.3 failed again on a rerun; the capacity lies between them \
             (18.9% apart)"
        );
        // The failing end's latest run is the rerun at 128 ms.
        assert_eq!(
            line("fails at"),
            "28.3 req/s: ttft_p99 128 ms (limit 100 ms)"
        );
        assert!(line("knee").starts_with("20.0 req/s, serving 20.0 req/s"));
        assert_eq!(
            capacity_verdict(&found()),
            (
                Tone::Good,
                "capacity 23.8 req/s (confirmed by reruns, 28.3 fails)".to_owned()
            )
        );
    }

    #[test]
    fn points_are_listed_in_load_order_with_each_objective_marked() {
        let table = capacity_report(&found()).points;
        assert_eq!(
            table.header,
            [
                "load (req/s)",
                "phase",
                "result",
                "req/s",
                "failed",
                "ttft_p99<=100ms",
                "failure_rate<=1%"
            ]
        );
        let rows: Vec<(Tone, String)> = table
            .rows
            .iter()
            .map(|(tone, cells)| (*tone, cells.join(" | ")))
            .collect();
        assert_eq!(
            rows,
            [
                (
                    Tone::Good,
                    "10.0 | ramp | pass | 10.0 | 0% | 51.0 ms | 0%".to_owned()
                ),
                (
                    Tone::Good,
                    "20.0 | ramp | pass | 20.0 | 0% | 60.0 ms | 0%".to_owned()
                ),
                (
                    Tone::Good,
                    "23.8 | bisect | pass | 20.0 | 0% | 95.0 ms | 0%".to_owned()
                ),
                (
                    Tone::Good,
                    "23.8 | confirm | pass | 20.0 | 0% | 97.0 ms | 0%".to_owned()
                ),
                (
                    Tone::Bad,
                    "28.3 | bisect | FAIL | 20.0 | 0% | 180 ms ✗ | 0%".to_owned()
                ),
                (
                    Tone::Bad,
                    "28.3 | confirm_above | FAIL | 20.0 | 0% | 128 ms ✗ | 0%".to_owned()
                ),
                (
                    Tone::Bad,
                    "40.0 | ramp | FAIL | 20.0 | 2.50% | 900 ms ✗ | 2.50% ✗".to_owned()
                ),
            ]
        );
    }

    #[test]
    fn a_search_without_an_answer_says_which_load_failed_first() {
        let mut below = found();
        below.status = Status::BelowStart;
        below.answer = None;
        below.bracket = Bracket {
            passing: None,
            failing: Some(10.0),
        };
        below.uncertainty = None;
        below.confirmed = false;
        below.knee = None;
        below.points = vec![point(0, 10.0, Phase::Ramp, 300.0, 0.0)];
        let report = capacity_report(&below);
        assert_eq!(
            report.lines[1],
            (
                "answer",
                "none: the first load, 10.0 req/s, already failed; lower start".to_owned()
            )
        );
        assert_eq!(
            report.lines[2],
            (
                "fails at",
                "10.0 req/s: ttft_p99 300 ms (limit 100 ms)".to_owned()
            )
        );
        assert_eq!(
            capacity_verdict(&below),
            (
                Tone::Bad,
                "no capacity: the first load, 10.0 req/s, already failed".to_owned()
            )
        );
        let mut above = found();
        above.status = Status::AboveMax;
        above.load = LoadAxis::Concurrency;
        above.answer = Some(64.0);
        assert_eq!(
            capacity_verdict(&above).1,
            "capacity at least 64 in flight: the search's max passed"
        );
    }
}
