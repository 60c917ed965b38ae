//! Runs side by side (`llmbench plot DIR…`): each run directory is one series, each experiment directory one
//! series per treatment (pooling its succeeded runs); the same pictures hold them all, one colour per series.

use std::collections::BTreeMap;

use super::figure::{Axis, Colour, Figure, Panel, Series, colour};
use super::math::cdf_points;
use super::run::{Distributions, StagePoint, pareto, stage_points, throughput_vs_latency};
use crate::report::RunMeta;
use llmbench_metrics::metrics::RunSummary;

/// One run as a comparison needs it.
#[derive(Debug, Clone)]
pub struct ComparedRun {
    /// Its directory, as given or as the experiment names it.
    pub dir: String,
    pub meta: RunMeta,
    pub summary: RunSummary,
    pub distributions: Distributions,
}

impl ComparedRun {
    /// The points it contributes to throughput-vs-latency and Pareto pictures: each stage of a run of several,
    /// else the whole run (labelled by `single`).
    pub fn points(&self, single: &str) -> Vec<StagePoint> {
        if self.summary.stages.len() > 1 {
            stage_points(&self.summary.stages)
        } else {
            vec![StagePoint::of(single.to_owned(), &self.summary.overall)]
        }
    }
}

/// A compared series: a run, or an experiment's treatment.
#[derive(Debug, Clone)]
pub struct Entry {
    pub label: String,
    /// An experiment treatment's factor levels (factor or override key → level); empty for a run.
    pub levels: BTreeMap<String, String>,
    pub runs: Vec<ComparedRun>,
}

impl Entry {
    pub fn points(&self) -> Vec<StagePoint> {
        self.runs.iter().flat_map(|r| r.points("")).collect()
    }
}

/// The subtitle naming what is compared.
pub fn subtitle(entries: &[Entry]) -> String {
    let names: Vec<&str> = entries.iter().map(|e| e.label.as_str()).collect();
    format!("comparing {}", names.join(", "))
}

/// The comparison pictures: latency CDFs, throughput vs latency, and the Pareto view.
pub(crate) fn compare_figures(entries: &[Entry]) -> Vec<Figure> {
    let subtitle = subtitle(entries);
    let mut figures = vec![latency_cdfs(entries, &subtitle)];
    let groups: Vec<(String, Colour, Vec<StagePoint>)> = entries
        .iter()
        .enumerate()
        .map(|(i, e)| (e.label.clone(), colour(i), e.points()))
        .collect();
    figures.push(throughput_vs_latency(
        &groups,
        &subtitle,
        "throughput_vs_latency",
        "Throughput vs latency (each point a stage of a sweep, or a whole run)",
    ));
    if let Some(mut figure) = pareto(&groups, &subtitle, "pareto") {
        figure.panels[0].title = "Each point a stage of a sweep, or a whole run".into();
        figures.push(figure);
    }
    figures
}

/// The CDF of TTFT, TPOT, ITL and E2E, one line per entry (its runs' samples pooled).
fn latency_cdfs(entries: &[Entry], subtitle: &str) -> Figure {
    type Pick = fn(&Distributions) -> &super::math::Reservoir;
    let metrics: [(&str, &str, Pick); 4] = [
        ("TTFT", "requests", |d| &d.ttft),
        ("TPOT", "requests", |d| &d.tpot),
        ("ITL", "gaps", |d| &d.itl),
        ("E2E", "requests", |d| &d.e2e),
    ];
    let panels = metrics
        .iter()
        .map(|(name, what, pick)| {
            let series = entries
                .iter()
                .enumerate()
                .filter_map(|(i, e)| {
                    let mut values: Vec<f64> = e
                        .runs
                        .iter()
                        .flat_map(|r| pick(&r.distributions).values().iter().copied())
                        .collect();
                    values.sort_by(f64::total_cmp);
                    (!values.is_empty()).then(|| {
                        Series::line(e.label.clone(), colour(i), cdf_points(&values, 1000))
                    })
                })
                .collect();
            Panel {
                title: format!("{name} CDF"),
                note: None,
                x: Axis::new(format!("{name} (ms)")),
                y: Axis::new(format!("{what} ≤ x (%)")).range(0.0, 100.0),
                series,
                rules: Vec::new(),
            }
        })
        .collect();
    Figure {
        name: "latency_cdf".into(),
        title: "Latency distributions (successful requests)".into(),
        subtitle: subtitle.to_owned(),
        columns: 2,
        panel_size: (760, 480),
        panels,
    }
}

/// Unique labels: a label that repeats gets `#2`, `#3`, … so the legend tells them apart.
pub(crate) fn unique_labels(labels: &mut [String]) {
    let original = labels.to_vec();
    for (i, label) in labels.iter_mut().enumerate() {
        let repeats = original[..i].iter().filter(|l| **l == original[i]).count();
        if repeats > 0 {
            *label = format!("{} #{}", original[i], repeats + 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_labels_are_numbered() {
        let mut labels = vec![
            "a".to_owned(),
            "b".to_owned(),
            "a".to_owned(),
            "a".to_owned(),
        ];
        unique_labels(&mut labels);
        assert_eq!(labels, ["a", "b", "a #2", "a #3"]);
    }
}
