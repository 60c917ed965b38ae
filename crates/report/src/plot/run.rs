//! The pictures of one run, built as [`Figure`]s from its data — never from paths, so they are tested on
//! hand-made records. [`RunData::from_records`] keeps what the pictures need of each measured request (bounded: a
//! few numbers per request, and a [`Reservoir`] per distribution); [`run_figures`] draws them.
//!
//! Every figure uses the summaries' definitions: latencies come from the record's own methods (`ttft_ns`,
//! `tpot_ns`, `itl_gaps_ns`, `e2e_ns`, `schedule_delay_ns`) over successful requests, as `summarize` takes them;
//! percentile lines are the summary's exact [`Stats`]; per-stage figures are the summary's stages.

use crate::report::{RunMeta, StageMeta};
use llmbench_metrics::metrics::{RunSummary, StageSummary, Stats};
use llmbench_metrics::server_metrics::ServerSeries;
use llmbench_model::record::RequestRecord;

use super::figure::{Axis, FAILED, Figure, Panel, Rule, Series, Style, colour};
use super::math::{
    Histogram, MAX_SAMPLE, MAX_SCATTER, Reservoir, binned_percentiles, binned_rates,
    binned_rates_per_slot, broken_at_gaps, cdf_points, decimate, pareto_frontier, step_points,
    time_bin_s,
};
use llmbench_metrics::metrics::percentile_linear;

/// Which run a picture is of, for its subtitle.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RunLabel {
    pub run_id: String,
    pub harness: String,
    pub profile: String,
    pub model: String,
}

impl RunLabel {
    pub fn of(meta: &RunMeta) -> RunLabel {
        RunLabel {
            run_id: meta.run_id.clone(),
            harness: meta.harness.to_string(),
            profile: meta.profile.clone(),
            model: meta.model.clone(),
        }
    }

    /// `run <id> · <harness> · <profile> · model <model>`.
    pub fn subtitle(&self) -> String {
        let mut parts = vec![format!("run {}", self.run_id)];
        parts.extend(
            [&self.harness, &self.profile]
                .into_iter()
                .filter(|s| !s.is_empty())
                .cloned(),
        );
        if !self.model.is_empty() {
            parts.push(format!("model {}", self.model));
        }
        parts.join(" · ")
    }
}

/// What the pictures need of one measured request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RequestPoint {
    pub stage: u32,
    /// Seconds on the run clock.
    pub scheduled_s: f64,
    pub sent_s: f64,
    pub end_s: f64,
    pub succeeded: bool,
    /// Prompt tokens, as the summaries count them (the server's count when it gave one).
    pub input_tokens: u32,
    pub output_tokens: u32,
    /// end − sent, in ms.
    pub e2e_ms: f64,
    pub ttft_ms: Option<f64>,
    /// sent − scheduled, in ms.
    pub delay_ms: f64,
}

/// One stage's span on the run clock, in seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StageSpan {
    pub stage: u32,
    pub start_s: f64,
    pub end_s: f64,
}

/// The distributions of a run's successful requests, in milliseconds, each a bounded uniform sample.
#[derive(Debug, Clone)]
pub struct Distributions {
    pub ttft: Reservoir,
    pub tpot: Reservoir,
    pub itl: Reservoir,
    pub e2e: Reservoir,
}

impl Default for Distributions {
    fn default() -> Self {
        Distributions {
            ttft: Reservoir::new(MAX_SAMPLE),
            tpot: Reservoir::new(MAX_SAMPLE),
            itl: Reservoir::new(MAX_SAMPLE),
            e2e: Reservoir::new(MAX_SAMPLE),
        }
    }
}

impl Distributions {
    /// Adds a request's latencies, as `summarize` takes them: successful requests only (an answer cut short is
    /// not one).
    pub fn add(&mut self, r: &RequestRecord) {
        if r.outcome() != llmbench_model::record::Outcome::Succeeded {
            return;
        }
        self.e2e.push(ms(r.e2e_ns()));
        if let Some(ns) = r.ttft_ns() {
            self.ttft.push(ms(ns));
        }
        if let Some(ns) = r.tpot_ns() {
            self.tpot.push(ms(ns));
        }
        for gap in r.itl_gaps_ns() {
            self.itl.push(ms(gap));
        }
    }
}

/// What the pictures of one run are drawn from.
#[derive(Debug, Clone, Default)]
pub struct RunData {
    /// Every measured request, in record order.
    pub requests: Vec<RequestPoint>,
    pub distributions: Distributions,
    /// Each stage that ran, by stage index.
    pub stages: Vec<StageSpan>,
    /// What each stage was asked to offer, as `run.json` records it (its rate or concurrency), by stage index.
    pub stage_loads: Vec<StageMeta>,
    /// Where the run's timeline ends: the last stage's end or the last request's, whichever is later.
    pub end_s: f64,
    /// For a run with more measured requests than its pictures' budget holds: `requests` is a uniform sample of
    /// them, and the rates over time are counted exactly from every request, per second.
    pub sampled: Option<Sampled>,
}

/// How the requests of a long run were sampled for its pictures, and what was counted of every one of them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sampled {
    /// Requests kept in `RunData::requests`.
    pub kept: u64,
    /// Measured requests.
    pub of: u64,
    /// The width of `slots`, in seconds: 1, then 60 once a request ended past [`PER_SECOND_UNTIL`].
    pub slot_s: u32,
    /// Per slot of the run clock (by each request's end; before 0 in the first): successful requests, failed
    /// requests, and the successful requests' output tokens ([`Counted`]).
    pub slots: Vec<[f64; 3]>,
    /// The same for requests that ended past [`MAX_SLOTS`] slots (a record whose clock is wrong): drawn in the
    /// last bin, as `binned_rates` draws events past the end.
    pub late: [f64; 3],
}

/// What [`Sampled`] counts per slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counted {
    Succeeded = 0,
    Failed = 1,
    Tokens = 2,
}

/// Seconds of the run clock counted one by one: past 20 hours every bin `time_bin_s` picks is a whole number of
/// minutes, so the counts go per minute and stay a few thousand slots for any run the profile limits allow.
pub const PER_SECOND_UNTIL: usize = 72_000;
/// The most slots kept: 50 days of minutes, past the longest duration a profile may ask for.
pub const MAX_SLOTS: usize = 72_000;

impl Sampled {
    fn count(&mut self, point: &RequestPoint) {
        let end_s = point.end_s.max(0.0);
        if self.slot_s == 0 {
            self.slot_s = 1;
        }
        if self.slot_s == 1 && end_s >= PER_SECOND_UNTIL as f64 {
            // Whole seconds sum into whole minutes exactly.
            let mut minutes = vec![[0.0; 3]; self.slots.len().div_ceil(60)];
            for (second, counts) in self.slots.iter().enumerate() {
                for (sum, n) in minutes[second / 60].iter_mut().zip(counts) {
                    *sum += n;
                }
            }
            self.slots = minutes;
            self.slot_s = 60;
        }
        let slot = (end_s / f64::from(self.slot_s)).floor() as usize;
        let counts = if slot < MAX_SLOTS {
            if self.slots.len() <= slot {
                self.slots.resize(slot + 1, [0.0; 3]);
            }
            &mut self.slots[slot]
        } else {
            &mut self.late
        };
        if point.succeeded {
            counts[Counted::Succeeded as usize] += 1.0;
            counts[Counted::Tokens as usize] += f64::from(point.output_tokens);
        } else {
            counts[Counted::Failed as usize] += 1.0;
        }
    }

    /// Per-second rates of `what` in bins of `bin_s` up to `end_s`, as [`binned_rates`] gives them over the
    /// requests themselves.
    fn rates(&self, what: Counted, bin_s: f64, end_s: f64) -> Vec<(f64, f64, f64)> {
        let column: Vec<f64> = self.slots.iter().map(|c| c[what as usize]).collect();
        binned_rates_per_slot(
            &column,
            f64::from(self.slot_s.max(1)),
            self.late[what as usize],
            bin_s,
            end_s,
        )
    }
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

impl RunData {
    /// From the run's measured records (see `report::measured`): the stage spans from `run.json`'s end, or,
    /// for a run killed before writing it, from the records (first send to last end of each stage).
    pub fn from_records(meta: &RunMeta, records: &[&RequestRecord]) -> RunData {
        let mut gathered = Gathered::default();
        gathered.data.requests.reserve_exact(records.len());
        records.iter().for_each(|r| gathered.add(r));
        gathered.finish(meta)
    }
}

/// [`RunData`] gathered one measured record at a time (in memory, or streamed back from disk).
#[derive(Debug, Default)]
pub struct Gathered {
    data: RunData,
    spans: std::collections::BTreeMap<u32, (u64, u64)>,
    /// [`Gathered::bounded`]'s sample of the requests, and what is counted of every one.
    bounded: Option<(Reservoir<RequestPoint>, Sampled)>,
    last_end_s: f64,
}

impl Gathered {
    /// Gathers at most `points` requests (a uniform sample past that, see [`RunData::sampled`]), so a run of any
    /// length is drawn in bounded memory.
    pub fn bounded(points: usize) -> Gathered {
        Gathered {
            bounded: Some((Reservoir::new(points), Sampled::default())),
            ..Gathered::default()
        }
    }

    pub fn add(&mut self, r: &RequestRecord) {
        let data = &mut self.data;
        data.distributions.add(r);
        let point = RequestPoint {
            stage: r.stage,
            scheduled_s: secs(r.scheduled_ns),
            sent_s: secs(r.sent_ns),
            end_s: secs(r.end_ns),
            succeeded: r.outcome() == llmbench_model::record::Outcome::Succeeded,
            input_tokens: r.prompt_tokens(),
            output_tokens: r.output_tokens(),
            e2e_ms: ms(r.e2e_ns()),
            ttft_ms: r.ttft_ns().map(ms),
            delay_ms: ms(r.schedule_delay_ns()),
        };
        self.last_end_s = self.last_end_s.max(point.end_s);
        match self.bounded.as_mut() {
            Some((sample, counted)) => {
                counted.count(&point);
                sample.push(point);
            }
            None => data.requests.push(point),
        }
        let span = self.spans.entry(r.stage).or_insert((u64::MAX, 0));
        span.0 = span.0.min(r.sent_ns);
        span.1 = span.1.max(r.end_ns);
    }

    /// The data, its requests listed stage by stage (as `report::measured` lists the records; a stream from
    /// disk gives them in the order they finished).
    pub fn finish(self, meta: &RunMeta) -> RunData {
        let Gathered {
            mut data,
            spans,
            bounded,
            last_end_s,
        } = self;
        if let Some((sample, mut counted)) = bounded {
            counted.of = sample.seen();
            if sample.sampled() {
                counted.kept = sample.values().len() as u64;
                data.sampled = Some(counted);
            }
            data.requests = sample.into_values();
        }
        data.requests.sort_by_key(|r| r.stage);
        data.stages = match meta.end.as_ref().filter(|end| !end.stages.is_empty()) {
            Some(end) => end
                .stages
                .iter()
                .enumerate()
                .map(|(i, s)| StageSpan {
                    stage: i as u32,
                    start_s: secs(s.start_ns),
                    end_s: secs(s.end_ns),
                })
                .collect(),
            None => spans
                .iter()
                .map(|(&stage, &(start, end))| StageSpan {
                    stage,
                    start_s: secs(start),
                    end_s: secs(end),
                })
                .collect(),
        };
        data.stage_loads = meta.stages.clone();
        let last_stage = data.stages.iter().map(|s| s.end_s).fold(0.0, f64::max);
        data.end_s = last_end_s.max(last_stage);
        data
    }
}

/// Every picture of a run, in the order the report shows them. Figures without data (TTFT of a run that did
/// not stream, per-stage pictures of a one-stage run, server metrics when none were scraped) are left out.
pub fn run_figures(
    label: &RunLabel,
    data: &RunData,
    summary: &RunSummary,
    server: &[ServerSeries],
) -> Vec<Figure> {
    let mut subtitle = label.subtitle();
    if let Some(sampled) = &data.sampled {
        subtitle.push_str(&format!(
            " · per-request points and per-bin percentiles: a uniform sample of {} of {} requests (rates: every \
             request)",
            sampled.kept, sampled.of
        ));
    }
    let subtitle = subtitle;
    let latency = &summary.overall.latency_ms;
    let d = &data.distributions;
    let mut figures = Vec::new();
    // What was varied comes first: it is the answer a search or a sweep was run for.
    if let Some(outcome) = &summary.capacity {
        figures.extend(super::varied::capacity_figure(outcome, &subtitle));
    } else if summary.stages.len() > 1 {
        figures.extend(super::varied::load_sweep_figure(
            &summary.stages,
            &data.stage_loads,
            &subtitle,
        ));
    }
    for (key, name, what, definition, sample, stats) in [
        (
            "ttft",
            "TTFT",
            "requests",
            "time to first token: first content chunk − sent",
            &d.ttft,
            latency.ttft.as_ref(),
        ),
        (
            "tpot",
            "TPOT",
            "requests",
            "time per output token: (last − first content chunk) / (output tokens − 1)",
            &d.tpot,
            latency.tpot.as_ref(),
        ),
        (
            "itl",
            "ITL",
            "gaps",
            "inter-token latency: gaps between consecutive content chunks, pooled",
            &d.itl,
            latency.itl.as_ref(),
        ),
        (
            "e2e",
            "E2E",
            "requests",
            "end-to-end latency: end − sent",
            &d.e2e,
            latency.e2e.as_ref(),
        ),
    ] {
        if let Some(figure) = distribution_figure(
            Metric {
                key,
                name,
                what,
                definition,
            },
            sample,
            stats,
            &subtitle,
        ) {
            figures.push(figure);
        }
    }
    figures.extend(token_lengths(data, &subtitle));
    figures.extend(ttft_vs_input(data, &subtitle));
    let rules = stage_rules(data);
    if !data.requests.is_empty() {
        figures.push(latency_over_time(data, &rules, &subtitle));
        figures.push(throughput_over_time(data, &rules, &subtitle));
        figures.push(schedule_delay_over_time(data, &rules, &subtitle));
    }
    if !server.is_empty() {
        figures.push(server_metrics_figure(data, server, &rules, &subtitle));
    }
    if summary.stages.len() > 1 {
        figures.push(stage_bars(&summary.stages, &subtitle));
        figures.push(throughput_vs_latency(
            &[(String::new(), colour(0), stage_points(&summary.stages))],
            &subtitle,
            "throughput_vs_latency",
            "Throughput vs latency per stage",
        ));
        if let Some(figure) = pareto(
            &[(String::new(), colour(0), stage_points(&summary.stages))],
            &subtitle,
            "pareto",
        ) {
            figures.push(figure);
        }
    }
    figures
}

/// What a distribution figure is of.
#[derive(Debug, Clone, Copy)]
pub struct Metric {
    /// File-name key: `ttft`.
    pub key: &'static str,
    /// Axis name: `TTFT`.
    pub name: &'static str,
    /// What is counted: `requests`, `gaps`.
    pub what: &'static str,
    /// How it is measured, in a person's words.
    pub definition: &'static str,
}

/// The histogram and CDF of one latency, with the summary's p50, p90 and p99 as rules. `None` without values.
pub(crate) fn distribution_figure(
    metric: Metric,
    sample: &Reservoir,
    stats: Option<&Stats>,
    subtitle: &str,
) -> Option<Figure> {
    let sampled = sample.sampled().then(|| {
        format!(
            "drawn from a uniform sample of {} of {} {}",
            sample.values().len(),
            sample.seen(),
            metric.what
        )
    });
    let sorted = sample.clone().into_sorted();
    let histogram = Histogram::of_sorted(&sorted, 60)?;
    let axis = format!("{} (ms)", metric.name);
    let spread = sorted.last().copied().unwrap_or(0.0) - sorted.first().copied().unwrap_or(0.0);
    let value = |v: f64| value_label(v, spread);
    let rules: Vec<Rule> = stats
        .map(|s| {
            [("p50", s.p50), ("p90", s.p90), ("p99", s.p99)]
                .into_iter()
                .map(|(p, v)| Rule {
                    at: v,
                    label: format!("{p} {}", value(v)),
                    short: p.to_owned(),
                    colour: Some(colour(2)),
                })
                .collect()
        })
        .unwrap_or_default();
    let mut hist_note = format!("bins of {} ms", plain_number(histogram.width));
    if let Some(clip) = histogram.clip {
        hist_note.push_str(&format!(
            "; {} {} above {} ms not shown (max {} ms)",
            histogram.above,
            metric.what,
            short_number(clip),
            short_number(sorted.last().copied().unwrap_or(clip)),
        ));
    }
    let hist_range = (
        histogram.lo,
        histogram.lo + histogram.counts.len() as f64 * histogram.width,
    );
    let hist = Panel {
        title: format!("{} histogram", metric.name),
        note: Some(hist_note),
        x: Axis::new(axis.clone()).range(hist_range.0, hist_range.1),
        y: Axis {
            // Counts are whole: no tick at 0.2 requests when every bin holds one or two.
            integer: histogram.counts.iter().max().is_some_and(|&m| m < 10),
            ..Axis::new(format!("{} per bin", metric.what)).from_zero()
        },
        series: vec![Series::bars(
            metric.what,
            colour(0),
            histogram.width * 0.92,
            histogram.bars(),
        )],
        rules: rules
            .iter()
            .filter(|r| r.at >= hist_range.0 && r.at <= hist_range.1)
            .cloned()
            .collect(),
    };
    let cdf = Panel {
        title: format!("{} CDF", metric.name),
        note: Some(sampled.unwrap_or_else(|| metric.definition.to_owned())),
        x: Axis::new(axis),
        y: Axis::new(format!("{} ≤ x (%)", metric.what)).range(0.0, 100.0),
        series: vec![Series::line(
            metric.what,
            colour(0),
            cdf_points(&sorted, 1000),
        )],
        rules,
    };
    Some(Figure {
        name: format!("{}_distribution", metric.key),
        title: format!("{} distribution ({})", metric.name, metric.definition),
        subtitle: subtitle.to_owned(),
        columns: 2,
        panel_size: (760, 500),
        panels: vec![hist, cdf],
    })
}

/// Histograms of the input and output tokens of each successful request (as the summaries count them), with
/// their p50 and p99. `None` when no request succeeded.
fn token_lengths(data: &RunData, subtitle: &str) -> Option<Figure> {
    let ok = || data.requests.iter().filter(|r| r.succeeded);
    let panel = |what: &str, c: usize, mut values: Vec<f64>| -> Option<Panel> {
        values.sort_by(f64::total_cmp);
        let histogram = Histogram::of_sorted_counts(&values, 60)?;
        let spread = values.last().copied().unwrap_or(0.0) - values.first().copied().unwrap_or(0.0);
        let mean = values.iter().sum::<f64>() / values.len() as f64;
        // Token counts are whole; a percentile between two of them keeps its decimals.
        let count = |v: f64| {
            if v.fract() == 0.0 {
                format!("{v:.0}")
            } else {
                value_label(v, spread)
            }
        };
        let rules = [("p50", 0.5), ("p99", 0.99)]
            .into_iter()
            .filter_map(|(p, q)| {
                let v = percentile_linear(&values, q)?;
                Some(Rule {
                    at: v,
                    label: format!("{p} {}", count(v)),
                    short: p.to_owned(),
                    colour: Some(colour(2)),
                })
            })
            .collect();
        // At least ten tokens wide, so one length is one slim bar, not the whole plot; never below 0 tokens.
        let (lo, hi) = match histogram.range() {
            (lo, hi) if hi - lo < 10.0 => {
                let lo = ((lo + hi) / 2.0 - 5.0).max(-0.5);
                (lo, lo + 10.0)
            }
            range => range,
        };
        Some(Panel {
            title: format!("{what} tokens per request"),
            note: Some(format!(
                "{} requests; mean {}, min {}, max {}; bins of {} token{}",
                values.len(),
                short_number(mean),
                count(values[0]),
                count(values[values.len() - 1]),
                plain_number(histogram.width),
                if histogram.width == 1.0 { "" } else { "s" }
            )),
            x: Axis::new(format!("{} tokens", what.to_lowercase()))
                .range(lo, hi)
                .integer(),
            y: Axis {
                integer: histogram.counts.iter().max().is_some_and(|&m| m < 10),
                ..Axis::new("requests per bin").from_zero()
            },
            series: vec![Series::bars(
                "requests",
                colour(c),
                histogram.width * 0.92,
                histogram.bars(),
            )],
            rules,
        })
    };
    let input = panel(
        "Input",
        0,
        ok().map(|r| f64::from(r.input_tokens)).collect(),
    )?;
    let output = panel(
        "Output",
        4,
        ok().map(|r| f64::from(r.output_tokens)).collect(),
    )?;
    Some(Figure {
        name: "token_lengths".into(),
        title: "Token lengths (successful requests; the server's counts where it gave them)".into(),
        subtitle: subtitle.to_owned(),
        columns: 2,
        panel_size: (760, 480),
        panels: vec![input, output],
    })
}

/// Each successful streamed request's TTFT against its input length (a bounded sample), with the p50 and p99
/// of each input-length bin: how prefill time grows with the prompt. `None` without TTFTs.
fn ttft_vs_input(data: &RunData, subtitle: &str) -> Option<Figure> {
    let points: Vec<(f64, f64)> = data
        .requests
        .iter()
        .filter(|r| r.succeeded)
        .filter_map(|r| r.ttft_ms.map(|t| (f64::from(r.input_tokens), t)))
        .collect();
    if points.is_empty() {
        return None;
    }
    let (lo, hi) = points
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), p| {
            (lo.min(p.0), hi.max(p.0))
        });
    // About 20 bins of whole tokens; a line breaks over input lengths no request had.
    let bin = super::math::nice_step((hi - lo) / 20.0).max(1.0).ceil();
    let percentiles = binned_percentiles(&points, bin, &[0.5, 0.99]);
    let line = |i: usize| -> Vec<(f64, f64)> {
        broken_at_gaps(percentiles.iter().map(|(x, qs)| (*x, qs[i])), bin)
    };
    let total = points.len();
    let drawn = decimate(points, MAX_SCATTER);
    let mut series = Vec::new();
    let note = if drawn.highest.is_empty() {
        series.push(Series::points("request", colour(0), drawn.even));
        format!(
            "{total} requests; p50 and p99 per {} input tokens",
            plain_number(bin)
        )
    } else {
        let note = format!(
            "{} of {total} requests drawn: an even sample by input length, and the {} slowest apart; p50 and p99 \
             per {} input tokens",
            drawn.even.len() + drawn.highest.len(),
            drawn.highest.len(),
            plain_number(bin)
        );
        series.push(Series::points(
            "request (even sample)",
            colour(0),
            drawn.even,
        ));
        series.push(Series::points(
            format!("{} slowest", drawn.highest.len()),
            colour(8),
            drawn.highest,
        ));
        note
    };
    // Markers: a bin alone between empty ones has no line to show it.
    series.push(Series::line("p50 per bin", colour(1), line(0)).markers());
    series.push(Series::line("p99 per bin", colour(6), line(1)).markers());
    Some(Figure {
        name: "ttft_vs_input".into(),
        title: "TTFT vs input length (successful requests)".into(),
        subtitle: subtitle.to_owned(),
        columns: 1,
        panel_size: (1400, 560),
        panels: vec![Panel {
            title: "Time to first token by prompt length".into(),
            note: Some(note),
            x: Axis::new("input tokens"),
            y: Axis::new("TTFT (ms)").from_zero(),
            series,
            rules: Vec::new(),
        }],
    })
}

/// A number with three significant digits, as the run table prints them: `0.425`, `50.6`, `1228`.
pub(crate) fn short_number(v: f64) -> String {
    let a = v.abs();
    if !v.is_finite() {
        "–".to_owned()
    } else if a >= 100.0 || a == 0.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        let digits = (2 - a.log10().floor() as i32).clamp(3, 9) as usize;
        format!("{v:.digits$}")
    }
}

/// A percentile's value beside its rule: three significant digits, or as many decimals as the axis ticks over
/// `spread` have if that is more (a narrow distribution's percentiles must read apart: 10.0012, 10.0045).
pub(crate) fn value_label(v: f64, spread: f64) -> String {
    let a = v.abs();
    let significant = if a >= 100.0 || a == 0.0 || !a.is_finite() {
        0
    } else {
        (2 - a.log10().floor() as i32).max(0)
    };
    let step = super::math::nice_step(spread / 8.0);
    let ticks = if spread > 0.0 {
        (-step.log10().floor()) as i32
    } else {
        0
    };
    let decimals = significant.max(ticks).clamp(0, 6) as usize;
    format!("{v:.decimals$}")
}

/// A number without trailing zeros: `0.0001`, `2.5`, `20`.
pub(crate) fn plain_number(v: f64) -> String {
    let text = format!("{v:.9}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    text.to_owned()
}

/// A bin width in seconds as text: whole seconds without decimals.
fn seconds(s: f64) -> String {
    if s.fract() == 0.0 {
        format!("{s:.0}")
    } else {
        short_number(s)
    }
}

/// A rule at each stage's start, for runs of several stages.
fn stage_rules(data: &RunData) -> Vec<Rule> {
    if data.stages.len() < 2 {
        return Vec::new();
    }
    data.stages
        .iter()
        .map(|s| Rule {
            at: s.start_s,
            label: format!("stage {}", s.stage),
            short: s.stage.to_string(),
            colour: None,
        })
        .collect()
}

const TIME_AXIS: &str = "time since the run started (s)";

fn time_axis(data: &RunData) -> Axis {
    Axis::new(TIME_AXIS).range(0.0, data.end_s.max(1e-3))
}

/// Per-request E2E and TTFT against send time, with p50 and p99 per time bin.
fn latency_over_time(data: &RunData, rules: &[Rule], subtitle: &str) -> Figure {
    let bin = time_bin_s(data.end_s);
    let ok = || data.requests.iter().filter(|r| r.succeeded);
    let mut panels = vec![latency_panel(
        "E2E latency by send time",
        "E2E (ms)",
        ok().map(|r| (r.sent_s, r.e2e_ms)).collect(),
        bin,
        data,
        rules,
    )];
    let failed: Vec<(f64, f64)> = data
        .requests
        .iter()
        .filter(|r| !r.succeeded)
        .map(|r| (r.sent_s, r.e2e_ms))
        .collect();
    if !failed.is_empty() {
        panels[0].series.push(Series {
            style: Style::Points { radius: 3 },
            ..Series::points("failed (end − sent)", FAILED, {
                let d = decimate(failed, MAX_SCATTER);
                d.even.into_iter().chain(d.highest).collect()
            })
        });
    }
    let ttft: Vec<(f64, f64)> = ok()
        .filter_map(|r| r.ttft_ms.map(|t| (r.sent_s, t)))
        .collect();
    if !ttft.is_empty() {
        panels.push(latency_panel(
            "TTFT by send time",
            "TTFT (ms)",
            ttft,
            bin,
            data,
            rules,
        ));
    }
    Figure {
        name: "latency_over_time".into(),
        title: "Latency over time (successful requests)".into(),
        subtitle: subtitle.to_owned(),
        columns: 1,
        panel_size: (1400, 420),
        panels,
    }
}

/// One latency against time: the requests as dots, and p50 and p99 of each time bin as lines.
fn latency_panel(
    title: &str,
    y: &str,
    points: Vec<(f64, f64)>,
    bin: f64,
    data: &RunData,
    rules: &[Rule],
) -> Panel {
    let percentiles = binned_percentiles(&points, bin, &[0.5, 0.99]);
    let line = |i: usize| -> Vec<(f64, f64)> {
        broken_at_gaps(percentiles.iter().map(|(t, qs)| (*t, qs[i])), bin)
    };
    let total = points.len();
    let drawn = decimate(points, MAX_SCATTER);
    let mut series = Vec::new();
    let note = if drawn.highest.is_empty() {
        series.push(Series::points("request", colour(0), drawn.even));
        format!("p50 and p99 per {} s bin", seconds(bin))
    } else {
        let note = format!(
            "{} of {} requests drawn: an even sample in time, and the {} highest apart",
            drawn.even.len() + drawn.highest.len(),
            total,
            drawn.highest.len()
        );
        series.push(Series::points(
            "request (even sample)",
            colour(0),
            drawn.even,
        ));
        series.push(Series::points(
            format!("{} highest", drawn.highest.len()),
            colour(8),
            drawn.highest,
        ));
        note
    };
    series.push(Series::line(
        format!("p50 per {} s", seconds(bin)),
        colour(1),
        line(0),
    ));
    series.push(Series::line(
        format!("p99 per {} s", seconds(bin)),
        colour(6),
        line(1),
    ));
    Panel {
        title: title.to_owned(),
        note: Some(note),
        x: time_axis(data),
        y: Axis::new(y).from_zero(),
        series,
        rules: rules.to_vec(),
    }
}

/// Completed requests and output tokens per second, in time bins by end time.
fn throughput_over_time(data: &RunData, rules: &[Rule], subtitle: &str) -> Figure {
    Figure {
        name: "throughput_over_time".into(),
        title: "Throughput over time".into(),
        subtitle: subtitle.to_owned(),
        columns: 1,
        panel_size: (1400, 380),
        panels: vec![
            requests_rate_panel(data, rules),
            tokens_rate_panel(data, rules),
        ],
    }
}

fn requests_rate_panel(data: &RunData, rules: &[Rule]) -> Panel {
    let bin = time_bin_s(data.end_s);
    let rate = |ok: bool| match &data.sampled {
        Some(sampled) => sampled.rates(
            if ok {
                Counted::Succeeded
            } else {
                Counted::Failed
            },
            bin,
            data.end_s,
        ),
        None => binned_rates(
            data.requests
                .iter()
                .filter(|r| r.succeeded == ok)
                .map(|r| (r.end_s, 1.0)),
            bin,
            data.end_s,
        ),
    };
    let mut series = vec![Series::line(
        "succeeded",
        colour(0),
        step_points(&rate(true)),
    )];
    let any_failed = match &data.sampled {
        Some(sampled) => {
            sampled.late[Counted::Failed as usize] > 0.0
                || sampled
                    .slots
                    .iter()
                    .any(|c| c[Counted::Failed as usize] > 0.0)
        }
        None => data.requests.iter().any(|r| !r.succeeded),
    };
    if any_failed {
        series.push(Series::line("failed", FAILED, step_points(&rate(false))));
    }
    Panel {
        title: "Completed requests".into(),
        note: Some(format!(
            "requests by the time they ended, per {} s bin",
            seconds(bin)
        )),
        x: time_axis(data),
        y: Axis::new("requests/s").from_zero(),
        series,
        rules: rules.to_vec(),
    }
}

fn tokens_rate_panel(data: &RunData, rules: &[Rule]) -> Panel {
    let bin = time_bin_s(data.end_s);
    let tokens = match &data.sampled {
        Some(sampled) => sampled.rates(Counted::Tokens, bin, data.end_s),
        None => binned_rates(
            data.requests
                .iter()
                .filter(|r| r.succeeded)
                .map(|r| (r.end_s, f64::from(r.output_tokens))),
            bin,
            data.end_s,
        ),
    };
    Panel {
        title: "Output tokens".into(),
        note: Some(format!(
            "output tokens of successful requests, counted when each ended, per {} s bin",
            seconds(bin)
        )),
        x: time_axis(data),
        y: Axis::new("output tokens/s").from_zero(),
        series: vec![Series::line(
            "output tokens",
            colour(4),
            step_points(&tokens),
        )],
        rules: rules.to_vec(),
    }
}

/// How late each request was sent, against when it was scheduled.
fn schedule_delay_over_time(data: &RunData, rules: &[Rule], subtitle: &str) -> Figure {
    let bin = time_bin_s(data.end_s);
    let points: Vec<(f64, f64)> = data
        .requests
        .iter()
        .map(|r| (r.scheduled_s, r.delay_ms))
        .collect();
    let mut panel = latency_panel(
        "Schedule delay by scheduled send time",
        "sent − scheduled (ms)",
        points,
        bin,
        data,
        rules,
    );
    panel.x =
        Axis::new("scheduled send time since the run started (s)").range(0.0, data.end_s.max(1e-3));
    Figure {
        name: "schedule_delay".into(),
        title: "Schedule delay (every request sent)".into(),
        subtitle: subtitle.to_owned(),
        columns: 1,
        panel_size: (1400, 460),
        panels: vec![panel],
    }
}

/// The server's metrics on the client's timeline: the client's completed requests/s on top, then one panel
/// per unit, every panel on the same x range.
pub(crate) fn server_metrics_figure(
    data: &RunData,
    server: &[ServerSeries],
    rules: &[Rule],
    subtitle: &str,
) -> Figure {
    let mut units: Vec<&str> = Vec::new();
    for s in server {
        if !units.contains(&s.unit.as_str()) {
            units.push(&s.unit);
        }
    }
    let several_targets = server
        .iter()
        .any(|s| server.first().is_some_and(|f| f.target != s.target));
    let (lo, hi) = (0.0, data.end_s.max(1e-3));
    let mut panels = vec![requests_rate_panel(data, rules)];
    panels[0].title = "Client: completed requests".into();
    for unit in units {
        let series: Vec<Series> = server
            .iter()
            .filter(|s| s.unit == unit)
            .enumerate()
            .map(|(i, s)| {
                let label = if several_targets {
                    format!("{} @ {}", s.metric, s.target)
                } else {
                    s.metric.clone()
                };
                let points = s
                    .points
                    .iter()
                    .copied()
                    .filter(|(t, v)| *t >= lo && *t <= hi && v.is_finite())
                    .collect();
                Series::line(label, colour(i), points)
            })
            .collect();
        panels.push(Panel {
            title: format!("Server: {unit}"),
            note: None,
            x: time_axis(data),
            y: Axis::new(unit).from_zero(),
            series,
            rules: rules.to_vec(),
        });
    }
    Figure {
        name: "server_metrics".into(),
        title: "Server metrics over time, on the client's timeline".into(),
        subtitle: subtitle.to_owned(),
        columns: 1,
        panel_size: (1400, 340),
        panels,
    }
}

/// A stage's figures, as the per-stage and comparison pictures plot them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StagePoint {
    /// What to write beside the point: its stage index.
    pub label: String,
    pub requests_per_s: f64,
    pub output_tokens_per_s: f64,
    /// (p50, p99) in ms.
    pub ttft: Option<(f64, f64)>,
    pub tpot: Option<(f64, f64)>,
    pub itl: Option<(f64, f64)>,
    pub e2e: Option<(f64, f64)>,
}

impl StagePoint {
    pub fn of(label: String, s: &llmbench_metrics::metrics::Summary) -> StagePoint {
        let pair = |stats: &Option<Stats>| stats.as_ref().map(|s| (s.p50, s.p99));
        let l = &s.latency_ms;
        StagePoint {
            label,
            requests_per_s: s.throughput.requests_per_s,
            output_tokens_per_s: s.throughput.output_tokens_per_s,
            ttft: pair(&l.ttft),
            tpot: pair(&l.tpot),
            itl: pair(&l.itl),
            e2e: pair(&l.e2e),
        }
    }

    /// Output tokens per second seen by one user: 1000 / TPOT p50 (ms), the rate at which one stream's tokens
    /// arrive once it has started.
    pub(crate) fn tokens_per_s_per_user(&self) -> Option<f64> {
        self.tpot
            .map(|(p50, _)| p50)
            .filter(|p50| *p50 > 0.0)
            .map(|p50| 1000.0 / p50)
    }
}

pub(crate) fn stage_points(stages: &[StageSummary]) -> Vec<StagePoint> {
    stages
        .iter()
        .map(|s| StagePoint::of(s.stage.to_string(), &s.summary))
        .collect()
}

/// Per stage: requests/s, output tokens/s, and TTFT and TPOT p50 and p99, as bars.
fn stage_bars(stages: &[StageSummary], subtitle: &str) -> Figure {
    let x = |s: &StageSummary| f64::from(s.stage);
    let stage_axis = || Axis::new("stage").integer();
    let single = |title: &str, y: &str, c: usize, value: &dyn Fn(&StageSummary) -> f64| Panel {
        title: title.to_owned(),
        note: None,
        x: stage_axis(),
        y: Axis::new(y).from_zero(),
        // No legend entry: the title says what the bars are.
        series: vec![Series::bars(
            "",
            colour(c),
            0.7,
            stages.iter().map(|s| (x(s), value(s))).collect(),
        )],
        rules: Vec::new(),
    };
    let pair = |title: &str, pick: &dyn Fn(&StageSummary) -> Option<&Stats>| {
        let bars = |p99: bool, offset: f64| -> Vec<(f64, f64)> {
            stages
                .iter()
                .filter_map(|s| {
                    pick(s).map(|st| (x(s) + offset, if p99 { st.p99 } else { st.p50 }))
                })
                .collect()
        };
        Panel {
            title: title.to_owned(),
            note: None,
            x: stage_axis(),
            y: Axis::new(format!("{title} (ms)")).from_zero(),
            series: vec![
                Series::bars("p50", colour(0), 0.38, bars(false, -0.2)),
                Series::bars("p99", colour(2), 0.38, bars(true, 0.2)),
            ],
            rules: Vec::new(),
        }
    };
    Figure {
        name: "stages".into(),
        title: "Per stage: throughput and latency".into(),
        subtitle: subtitle.to_owned(),
        columns: 2,
        panel_size: (760, 440),
        panels: vec![
            single("Successful requests/s", "requests/s", 0, &|s| {
                s.summary.throughput.requests_per_s
            }),
            single("Output tokens/s", "output tokens/s", 4, &|s| {
                s.summary.throughput.output_tokens_per_s
            }),
            pair("TTFT", &|s| s.summary.latency_ms.ttft.as_ref()),
            pair("TPOT", &|s| s.summary.latency_ms.tpot.as_ref()),
        ],
    }
}

/// Latency p50 (solid) and p99 (dashed) against requests/s, one colour per named group of points (a run or a
/// treatment), each point labelled; four panels: TTFT, TPOT, ITL, E2E.
pub fn throughput_vs_latency(
    groups: &[(String, super::figure::Colour, Vec<StagePoint>)],
    subtitle: &str,
    name: &str,
    title: &str,
) -> Figure {
    type Pick = fn(&StagePoint) -> Option<(f64, f64)>;
    let metrics: [(&str, Pick); 4] = [
        ("TTFT", |p| p.ttft),
        ("TPOT", |p| p.tpot),
        ("ITL", |p| p.itl),
        ("E2E", |p| p.e2e),
    ];
    let panels = metrics
        .iter()
        .map(|(metric, pick)| {
            let mut series = Vec::new();
            for (label, c, points) in groups {
                // One group: p50 and p99 in two colours; several: one colour per group, p99 dashed.
                let (c50, c99) = if groups.len() == 1 {
                    (colour(0), colour(2))
                } else {
                    (*c, *c)
                };
                let mut chosen: Vec<(f64, (f64, f64), String)> = points
                    .iter()
                    .filter_map(|p| pick(p).map(|v| (p.requests_per_s, v, p.label.clone())))
                    .collect();
                chosen.sort_by(|a, b| a.0.total_cmp(&b.0));
                let name = |p: &str| {
                    if label.is_empty() {
                        p.to_owned()
                    } else {
                        format!("{label} {p}")
                    }
                };
                series.push(
                    Series::line(
                        name("p50"),
                        c50,
                        chosen.iter().map(|(x, v, _)| (*x, v.0)).collect(),
                    )
                    .markers(),
                );
                series.push(
                    Series::line(
                        name("p99"),
                        c99,
                        chosen.iter().map(|(x, v, _)| (*x, v.1)).collect(),
                    )
                    .dashed()
                    .markers()
                    .labelled(chosen.iter().map(|(_, _, l)| l.clone()).collect()),
                );
            }
            Panel {
                title: format!("{metric} p50 and p99"),
                note: None,
                x: Axis::new("successful requests/s").from_zero(),
                y: Axis::new(format!("{metric} (ms)")).from_zero(),
                series,
                rules: Vec::new(),
            }
        })
        .collect();
    Figure {
        name: name.to_owned(),
        title: title.to_owned(),
        subtitle: subtitle.to_owned(),
        columns: 2,
        panel_size: (760, 480),
        panels,
    }
}

/// Output tokens/s against output tokens/s per user (1000 / TPOT p50), the trade-off a sweep explores: one
/// series per group; for a single group, its Pareto frontier too. `None` when no point has a TPOT.
pub fn pareto(
    groups: &[(String, super::figure::Colour, Vec<StagePoint>)],
    subtitle: &str,
    name: &str,
) -> Option<Figure> {
    let mut series = Vec::new();
    for (label, c, points) in groups {
        let mut chosen: Vec<(f64, f64, String)> = points
            .iter()
            .filter_map(|p| {
                p.tokens_per_s_per_user()
                    .map(|x| (x, p.output_tokens_per_s, p.label.clone()))
            })
            .collect();
        if chosen.is_empty() {
            continue;
        }
        chosen.sort_by(|a, b| a.0.total_cmp(&b.0));
        let xy: Vec<(f64, f64)> = chosen.iter().map(|(x, y, _)| (*x, *y)).collect();
        let labels: Vec<String> = chosen.iter().map(|(_, _, l)| l.clone()).collect();
        if groups.len() == 1 {
            series.push(
                Series {
                    style: Style::Points { radius: 6 },
                    ..Series::points("stage", *c, xy.clone())
                }
                .labelled(labels),
            );
            let frontier = pareto_frontier(&xy).into_iter().map(|i| xy[i]).collect();
            series.push(
                Series::line("Pareto frontier", colour(2), frontier)
                    .dashed()
                    .markers(),
            );
        } else {
            series.push(
                Series::line(label.clone(), *c, xy)
                    .markers()
                    .labelled(labels),
            );
        }
    }
    if series.is_empty() {
        return None;
    }
    Some(Figure {
        name: name.to_owned(),
        title: "Output throughput vs per-user speed (Pareto)".into(),
        subtitle: subtitle.to_owned(),
        columns: 1,
        panel_size: (1100, 640),
        panels: vec![Panel {
            title: "Each point a stage, labelled with its index".into(),
            note: Some(
                "tokens/s per user = 1000 / TPOT p50 (ms); up and to the right is better".into(),
            ),
            x: Axis::new("output tokens/s per user (1000 / TPOT p50)").from_zero(),
            y: Axis::new("output tokens/s (all users)").from_zero(),
            series,
            rules: Vec::new(),
        }],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use llmbench_model::record::{ErrorClass, RequestError};

    const MS: u64 = 1_000_000;

    /// A successful streamed request: times in ms, one token per content chunk.
    fn ok(stage: u32, scheduled: u64, sent: u64, tokens_at: &[u64], end: u64) -> RequestRecord {
        let mut record = RequestRecord::builder(0)
            .stage(stage)
            .sent(sent * MS)
            .scheduled(scheduled * MS)
            .end(end * MS)
            .input_tokens(10)
            .ok();
        for &t in tokens_at {
            record = record.content_at(t * MS, 1);
        }
        record.build()
    }

    #[test]
    fn a_sampled_runs_rates_over_time_count_every_request_and_its_points_are_bounded() {
        // 3 000 requests ending every 0.7 ms from 0.1 s (to about 2.2 s), every seventh failed, output tokens
        // 1 to 5: kept whole, and with room for 100 points.
        let records: Vec<RequestRecord> = (0..3_000u64)
            .map(|i| {
                let end = 100 * MS + i * 700_000;
                let b = RequestRecord::builder(i)
                    .stage(u32::from(end >= 1_000 * MS))
                    .scheduled(end - 50 * MS)
                    .sent(end - 40 * MS)
                    .end(end)
                    .input_tokens(10);
                if i % 7 == 0 {
                    b.error(ErrorClass::Timeout, "late").build()
                } else {
                    let mut b = b.ok();
                    for t in 0..=(i % 5) {
                        b = b.content_at(end - 30 * MS + t * MS, 1);
                    }
                    b.build()
                }
            })
            .collect();
        let refs: Vec<&RequestRecord> = records.iter().collect();
        let whole = RunData::from_records(&meta(), &refs);
        let mut bounded = Gathered::bounded(100);
        records.iter().for_each(|r| bounded.add(r));
        let sampled = bounded.finish(&meta());
        assert_eq!(sampled.requests.len(), 100);
        let note = sampled.sampled.as_ref().expect("sampled");
        assert_eq!((note.kept, note.of), (100, 3_000));
        assert_eq!(whole.sampled, None);
        assert_eq!(sampled.end_s, whole.end_s);
        assert_eq!(sampled.stages, whole.stages);
        let rules = stage_rules(&whole);
        for panel in [requests_rate_panel, tokens_rate_panel] {
            let exact = panel(&whole, &rules);
            let counted = panel(&sampled, &rules);
            assert_eq!(counted.series.len(), exact.series.len());
            for (a, b) in counted.series.iter().zip(&exact.series) {
                assert_eq!(a.points, b.points, "{}", a.label);
            }
        }
        // The figures say they were drawn from a sample.
        let summary = crate::report::summarize_run(&meta(), &records);
        let figures = run_figures(&RunLabel::of(&meta()), &sampled, &summary, &[]);
        assert!(
            figures.iter().all(|f| f
                .subtitle
                .contains("a uniform sample of 100 of 3000 requests")),
            "{:?}",
            figures.iter().map(|f| &f.subtitle).collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_sampled_days_long_run_counts_per_minute_and_a_wrong_clock_in_the_last_bin() {
        // Ends at 0.5 s, 30 000.2 s, 80 000.7 s (past 20 h: the counts go per minute), 100 000.1 s, and one record
        // whose end is 10¹⁰ s (a wrong clock): the rates are those over the requests themselves, and the slots
        // stay few.
        let ends_ms = [500, 30_000_200, 80_000_700, 100_000_100, 10_000_000_000_000];
        let records: Vec<RequestRecord> = ends_ms
            .iter()
            .enumerate()
            .map(|(i, &end)| {
                RequestRecord::builder(i as u64)
                    .sent(end * MS - 10 * MS)
                    .scheduled(end * MS - 10 * MS)
                    .end(end * MS)
                    .input_tokens(10)
                    .ok()
                    .content_at(end * MS - MS, 3)
                    .build()
            })
            .collect();
        let meta = meta();
        let refs: Vec<&RequestRecord> = records.iter().collect();
        let whole = RunData::from_records(&meta, &refs);
        let mut bounded = Gathered::bounded(2);
        records.iter().for_each(|r| bounded.add(r));
        let sampled = bounded.finish(&meta);
        let note = sampled.sampled.as_ref().expect("sampled");
        assert_eq!(note.slot_s, 60);
        assert!(note.slots.len() <= MAX_SLOTS);
        assert_eq!(note.late[Counted::Succeeded as usize], 1.0);
        let rules = stage_rules(&whole);
        for panel in [requests_rate_panel, tokens_rate_panel] {
            let (exact, counted) = (panel(&whole, &rules), panel(&sampled, &rules));
            for (a, b) in counted.series.iter().zip(&exact.series) {
                assert_eq!(a.points, b.points, "{}", a.label);
            }
        }
    }

    /// A run.json with two stages, 0–1 s and 1–2.5 s; built from JSON so fields added later default.
    fn meta() -> RunMeta {
        serde_json::from_value(serde_json::json!({
            "schema": "llmbench.run/v1", "run_id": "r1", "harness": "inference-perf", "profile": "p",
            "model": "m", "endpoint": "http://127.0.0.1:1", "started_at": "2026-01-01T00:00:00Z",
            "t0_unix_ns": 0, "stages": [{"rate": 1.0}, {"rate": 2.0}], "llmbench_version": "0",
            "end": {"state": "complete", "sent": 3, "finished": 3, "stages": [
                {"start_ns": 0, "end_ns": 1_000_000_000u64}, {"start_ns": 1_000_000_000u64, "end_ns": 2_500_000_000u64}
            ]}
        }))
        .expect("a valid run.json")
    }

    #[test]
    fn run_data_takes_the_summaries_definitions_from_each_record() {
        // Scheduled 0, sent 10 ms, tokens at 110, 130, 170 ms, end 200 ms: TTFT 100, TPOT (170 − 110)/2 = 30,
        // ITL 20 and 40, E2E 190, delay 10. A failed request enters the timeline but no distribution.
        let a = ok(0, 0, 10, &[110, 130, 170], 200);
        let mut b = ok(1, 1000, 1000, &[1100], 1300);
        b.error = Some(Box::new(RequestError {
            class: ErrorClass::Timeout,
            message: String::new(),
        }));
        let data = RunData::from_records(&meta(), &[&a, &b]);
        let d = &data.distributions;
        assert_eq!(d.ttft.values(), [100.0]);
        assert_eq!(d.tpot.values(), [30.0]);
        assert_eq!(d.itl.values(), [20.0, 40.0]);
        assert_eq!(d.e2e.values(), [190.0]);
        assert_eq!(data.requests.len(), 2);
        let p = data.requests[0];
        assert_eq!(
            (p.sent_s, p.end_s, p.delay_ms, p.output_tokens),
            (0.01, 0.2, 10.0, 3)
        );
        assert!(!data.requests[1].succeeded);
        // Stages from run.json's end; the timeline ends at the later of the last stage's end (2.5 s) and the
        // last request's (1.3 s).
        assert_eq!(data.stages.len(), 2);
        assert_eq!((data.stages[1].start_s, data.stages[1].end_s), (1.0, 2.5));
        assert_eq!(data.end_s, 2.5);
    }

    #[test]
    fn a_run_without_an_end_takes_its_stage_spans_from_the_records() {
        let mut m = meta();
        m.end = None;
        let (a, b) = (ok(0, 0, 5, &[50], 400), ok(0, 100, 100, &[150], 700));
        let data = RunData::from_records(&m, &[&a, &b]);
        // Stage 0 runs from the first send (5 ms) to the last end (700 ms).
        assert_eq!(
            data.stages,
            [StageSpan {
                stage: 0,
                start_s: 0.005,
                end_s: 0.7
            }]
        );
        assert_eq!(data.end_s, 0.7);
    }

    #[test]
    fn token_lengths_count_the_successful_requests_input_and_output_tokens() {
        // Inputs 10, 10, 12 with 1, 2, 2 output tokens; a failed request of 99 input tokens is left out.
        let mut records = vec![
            ok(0, 0, 0, &[10], 20),
            ok(0, 0, 0, &[10, 11], 20),
            ok(0, 0, 0, &[10, 11], 20),
        ];
        records[2].input_tokens = 12;
        let mut failed = ok(0, 0, 0, &[], 20);
        failed.input_tokens = 99;
        failed.error = Some(Box::new(RequestError {
            class: ErrorClass::Timeout,
            message: String::new(),
        }));
        records.push(failed);
        let refs: Vec<&RequestRecord> = records.iter().collect();
        let data = RunData::from_records(&meta(), &refs);
        let figure = token_lengths(&data, "run r1").expect("a figure");
        let (input, output) = (&figure.panels[0], &figure.panels[1]);
        // Bins of one token centred on each length, on an axis at least ten tokens wide and never below 0.
        assert_eq!(input.x.range, Some((6.0, 16.0)));
        assert_eq!(output.x.range, Some((-0.5, 9.5)));
        assert_eq!(
            input.series[0].points,
            [(10.0, 2.0), (11.0, 0.0), (12.0, 1.0)]
        );
        assert_eq!(output.series[0].points, [(1.0, 1.0), (2.0, 2.0)]);
        assert_eq!(
            input.note.as_deref(),
            Some("3 requests; mean 10.7, min 10, max 12; bins of 1 token")
        );
        // p50 of [10, 10, 12] = 10, p99 = 10 + 0.98 · 2 = 11.96.
        let rules: Vec<&str> = input.rules.iter().map(|r| r.label.as_str()).collect();
        assert_eq!(rules, ["p50 10", "p99 12.0"]);
        assert!(token_lengths(&RunData::default(), "").is_none());
    }

    #[test]
    fn ttft_vs_input_plots_each_streamed_requests_ttft_at_its_input_length() {
        // TTFT 100 ms at 10 input tokens, 300 ms at 40.
        let mut records = [ok(0, 0, 0, &[100], 200), ok(0, 0, 0, &[300], 400)];
        records[1].input_tokens = 40;
        let refs: Vec<&RequestRecord> = records.iter().collect();
        let data = RunData::from_records(&meta(), &refs);
        let figure = ttft_vs_input(&data, "run r1").expect("a figure");
        let panel = &figure.panels[0];
        assert_eq!(panel.x.label, "input tokens");
        assert_eq!(panel.series[0].points, [(10.0, 100.0), (40.0, 300.0)]);
        // Bins of nice(30 / 20) = 2 tokens: 10 is in [10, 12) centred 11, 40 in [40, 42) centred 41; the
        // empty bins between break the line.
        let p50 = &panel.series[1];
        assert_eq!(p50.label, "p50 per bin");
        assert_eq!(p50.points[0], (11.0, 100.0));
        assert!(p50.points[1].1.is_nan());
        assert_eq!(p50.points[2], (41.0, 300.0));
        assert_eq!(
            panel.note.as_deref(),
            Some("2 requests; p50 and p99 per 2 input tokens")
        );
        // Not streamed: no TTFT, no figure.
        let mut unstreamed = ok(0, 0, 0, &[100], 200);
        unstreamed.streaming = false;
        let data = RunData::from_records(&meta(), &[&unstreamed]);
        assert!(ttft_vs_input(&data, "").is_none());
    }

    #[test]
    fn tokens_per_user_is_a_thousand_over_tpot_p50() {
        let p = StagePoint {
            tpot: Some((20.0, 50.0)),
            ..StagePoint::default()
        };
        // 1000 / 20 ms = 50 tokens/s for one stream.
        assert_eq!(p.tokens_per_s_per_user(), Some(50.0));
        assert_eq!(StagePoint::default().tokens_per_s_per_user(), None);
    }

    #[test]
    fn percentile_labels_read_apart_on_a_narrow_axis() {
        // Spread 800: ticks every 100; three significant digits win: 617, 50.9.
        assert_eq!(value_label(616.66, 800.0), "617");
        assert_eq!(value_label(50.94, 800.0), "50.9");
        // Spread 0.003: ticks every 0.0005 (4 decimals) beat three significant digits.
        assert_eq!(value_label(10.00452, 0.003), "10.0045");
        assert_eq!(value_label(7.0, 0.0), "7.00");
    }

    #[test]
    fn short_numbers_keep_three_significant_digits() {
        assert_eq!(short_number(1228.4), "1228");
        assert_eq!(short_number(50.63), "50.6");
        assert_eq!(short_number(9.876), "9.88");
        assert_eq!(short_number(0.4251), "0.425");
        assert_eq!(short_number(0.0012345), "0.00123");
        assert_eq!(short_number(0.0), "0");
    }

    #[test]
    fn a_distribution_figure_marks_the_summarys_percentiles() {
        let mut sample = Reservoir::new(10);
        for v in [10.0, 20.0, 30.0, 40.0] {
            sample.push(v);
        }
        let stats = Stats::from_values(&mut [10.0, 20.0, 30.0, 40.0]).unwrap();
        let figure = distribution_figure(
            Metric {
                key: "ttft",
                name: "TTFT",
                what: "requests",
                definition: "d",
            },
            &sample,
            Some(&stats),
            "run r1",
        )
        .unwrap();
        assert_eq!(figure.name, "ttft_distribution");
        let cdf = &figure.panels[1];
        // p50 of [10, 20, 30, 40] = 25, p90 = 37, p99 = 39.7 (linear).
        let at: Vec<f64> = cdf.rules.iter().map(|r| r.at).collect();
        assert_eq!(at[0], 25.0);
        assert!((at[1] - 37.0).abs() < 1e-9 && (at[2] - 39.7).abs() < 1e-9);
        // Three significant digits (ticks over a spread of 30, steps of 5, need fewer).
        assert_eq!(cdf.rules[0].label, "p50 25.0");
        assert_eq!(cdf.rules[2].label, "p99 39.7");
        assert_eq!(cdf.rules[2].short, "p99");
        assert_eq!(figure.panels[0].note.as_deref(), Some("bins of 0.5 ms"));
        assert_eq!(
            cdf.series[0].points,
            [(10.0, 25.0), (20.0, 50.0), (30.0, 75.0), (40.0, 100.0)]
        );
        assert!(
            distribution_figure(
                Metric {
                    key: "x",
                    name: "X",
                    what: "r",
                    definition: "d"
                },
                &Reservoir::new(4),
                None,
                ""
            )
            .is_none()
        );
    }

    #[test]
    fn server_metrics_share_the_client_timeline_one_panel_per_unit() {
        let a = ok(0, 0, 10, &[110, 130, 170], 200);
        let b = ok(1, 1000, 1000, &[1100, 1150], 1300);
        let data = RunData::from_records(&meta(), &[&a, &b]);
        let line = |metric: &str, unit: &str, points: Vec<(f64, f64)>| ServerSeries {
            metric: metric.into(),
            target: "http://127.0.0.1:8000/metrics".into(),
            unit: unit.into(),
            points,
        };
        let server = [
            line(
                "vllm:num_requests_running",
                "requests",
                vec![(0.0, 0.0), (1.0, 3.0), (2.0, 1.0)],
            ),
            line(
                "vllm:num_requests_waiting",
                "requests",
                vec![(0.0, 0.0), (1.5, 2.0)],
            ),
            // A point past the run's end (2.5 s) is left out rather than stretching the shared x axis.
            line(
                "vllm:gpu_cache_usage_perc",
                "fraction",
                vec![(0.5, 0.2), (2.0, 0.4), (9.0, 0.9)],
            ),
        ];
        let figure = server_metrics_figure(&data, &server, &stage_rules(&data), "run r1");
        let titles: Vec<&str> = figure.panels.iter().map(|p| p.title.as_str()).collect();
        assert_eq!(
            titles,
            [
                "Client: completed requests",
                "Server: requests",
                "Server: fraction"
            ]
        );
        assert!(figure.panels.iter().all(|p| p.x.range == Some((0.0, 2.5))));
        assert_eq!(figure.panels[1].series.len(), 2);
        assert_eq!(figure.panels[2].series[0].points, [(0.5, 0.2), (2.0, 0.4)]);
        // Stage boundaries on every panel: stages start at 0 and 1 s.
        assert!(
            figure
                .panels
                .iter()
                .all(|p| p.rules.iter().map(|r| r.at).eq([0.0, 1.0]))
        );
        assert!(
            !super::super::figure::render_png(&figure)
                .unwrap()
                .is_empty()
        );
        assert!(
            super::super::figure::render_svg(&figure)
                .unwrap()
                .contains("Server: fraction")
        );
    }
}
