//! The tables printed at the end of `llmbench run`: the load and the latencies, one row per stage and one for the
//! whole run; and [`Table`], the plain rows of text that the terminal prints aligned and `report.html` renders as
//! HTML, so both show the same figures.

use std::fmt::Write as _;

use llmbench_core::vllm_log::{self, ModelLoadSummary};
use llmbench_metrics::metrics::{RunSummary, Stats, Summary};
use llmbench_metrics::server_metrics::{Figures, ServerMetricsSummary, WindowSummary};

use super::RunMeta;
use super::capacity_answer::capacity_report;
use super::errors::error_table;
use super::headline::headline;
use super::turns::{adapter_table, conversations_line, turn_table};

/// The widest a table printed to the terminal should be: a laptop's terminal, or half a wide screen.
pub const TERMINAL_COLUMNS: usize = 100;

/// How a column's cells line up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    /// Labels and names.
    Left,
    /// Figures.
    Right,
    /// Free text such as an error message: left, and `report.html` may wrap it.
    Text,
}

/// How a row or a verdict reads beside the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Tone {
    #[default]
    Plain,
    /// What met what was asked: a capacity point that passed, a run that completed.
    Good,
    /// Done, with something to look at: some requests failed, an answer not confirmed.
    Warn,
    /// What did not: a capacity point that failed, a run where nothing succeeded.
    Bad,
    /// The total under the others.
    Total,
}

impl Tone {
    /// The worse of two verdicts: bad over warn over good over plain.
    pub fn worst(self, other: Tone) -> Tone {
        let rank = |t: Tone| match t {
            Tone::Plain | Tone::Total => 0,
            Tone::Good => 1,
            Tone::Warn => 2,
            Tone::Bad => 3,
        };
        if rank(other) > rank(self) {
            other
        } else {
            self
        }
    }
}

/// A table as text cells: a header and rows of the same width.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    pub header: Vec<String>,
    pub align: Vec<Align>,
    pub rows: Vec<(Tone, Vec<String>)>,
}

impl Table {
    /// A table of these columns, without rows.
    pub fn new(columns: &[(&str, Align)]) -> Table {
        Table {
            header: columns.iter().map(|(name, _)| (*name).to_owned()).collect(),
            align: columns.iter().map(|(_, align)| *align).collect(),
            rows: Vec::new(),
        }
    }

    pub fn push(&mut self, tone: Tone, cells: Vec<String>) {
        self.rows.push((tone, cells));
    }

    /// Aligned columns two spaces apart, the header first; each line ends with a newline.
    pub fn to_text(&self) -> String {
        let mut rows = vec![self.header.clone()];
        rows.extend(self.rows.iter().map(|(_, cells)| cells.clone()));
        aligned_as(&rows, &self.align)
    }

    /// [`to_text`](Table::to_text) within `columns` characters a line, where cutting its free-text columns
    /// ([`Align::Text`], e.g. error messages, cut with `…`) makes it fit; never narrower than 24 characters a
    /// text column.
    pub(crate) fn to_text_within(&self, columns: usize) -> String {
        const MIN_TEXT: usize = 24;
        let width = |c: usize| {
            std::iter::once(&self.header)
                .chain(self.rows.iter().map(|(_, cells)| cells))
                .map(|r| r.get(c).map_or(0, |cell| cell.chars().count()))
                .max()
                .unwrap_or(0)
        };
        let text: Vec<usize> = (0..self.header.len())
            .filter(|c| self.align.get(*c) == Some(&Align::Text))
            .collect();
        if text.is_empty() {
            return self.to_text();
        }
        let fixed: usize = (0..self.header.len())
            .filter(|c| !text.contains(c))
            .map(width)
            .sum::<usize>()
            + 2 * self.header.len().saturating_sub(1);
        let room = (columns.saturating_sub(fixed) / text.len()).max(MIN_TEXT);
        let mut cut = self.clone();
        for (_, cells) in &mut cut.rows {
            for &c in &text {
                if let Some(cell) = cells.get_mut(c) {
                    *cell = shorten(cell, room);
                }
            }
        }
        cut.to_text()
    }
}

/// `text` cut to `chars` characters, its last one `…` when it was cut.
pub fn shorten(text: &str, chars: usize) -> String {
    if text.chars().count() <= chars {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(chars.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// Load figures of each stage, then latency figures: two tables, each within [`TERMINAL_COLUMNS`].
const LOAD_HEADER: [&str; 7] = [
    "stage",
    "ok",
    "failed",
    "req/s",
    "sent/s (asked)",
    "out tok/s",
    "delay p99 ms",
];
const LATENCY_HEADER: [&str; 5] = [
    "stage",
    "TTFT ms p50/p90/p99",
    "TPOT ms p50/p90/p99",
    "ITL ms p50/p90/p99",
    "E2E ms p50/p90/p99",
];

/// A number with fewer decimals as it grows: 0.123, 1.23, 12.3, 123.
pub fn num(x: f64) -> String {
    let a = x.abs();
    if !x.is_finite() {
        "-".to_owned()
    } else if a >= 100.0 {
        format!("{x:.0}")
    } else if a >= 10.0 {
        format!("{x:.1}")
    } else if a >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

/// A fraction as a percentage: `0%`, `2.50%`, `100%`.
pub fn percent(fraction: f64) -> String {
    if fraction == 0.0 {
        "0%".to_owned()
    } else {
        format!("{}%", num(fraction * 100.0))
    }
}

fn triple(stats: &Option<Stats>) -> String {
    stats.as_ref().map_or_else(
        || "-".to_owned(),
        |s| format!("{}/{}/{}", num(s.p50), num(s.p90), num(s.p99)),
    )
}

/// A load row; a pooling run's (`pooling`) has its inputs per second where a generation run's has output tokens.
fn load_row(label: String, s: &Summary, pooling: bool) -> Vec<String> {
    let sched = &s.schedule;
    let sent = sched.achieved_rate.map_or_else(|| "-".to_owned(), num);
    let asked = sched.requested_rate.map_or_else(|| "-".to_owned(), num);
    vec![
        label,
        s.requests.succeeded.to_string(),
        s.requests.failed.to_string(),
        num(s.throughput.requests_per_s),
        format!("{sent} ({asked})"),
        if pooling {
            num(s.throughput.inputs_per_s.unwrap_or(0.0))
        } else {
            num(s.throughput.output_tokens_per_s)
        },
        sched
            .delay_ms
            .map_or_else(|| "-".to_owned(), |d| num(d.p99)),
    ]
}

fn latency_row(label: String, s: &Summary) -> Vec<String> {
    let l = &s.latency_ms;
    vec![
        label,
        triple(&l.ttft),
        triple(&l.tpot),
        triple(&l.itl),
        triple(&l.e2e),
    ]
}

/// Everything printed at the end of a run: the headline, the load and latency tables (with the server's figures
/// and the notes), then the failures, the turns of a multi-turn run and a capacity search's answer, each only when
/// the run has them. Ends with a newline.
pub fn print_run(meta: &RunMeta, summary: &RunSummary) -> String {
    let mut out = headline(meta, summary).to_text();
    out.push('\n');
    out.push_str(&print_table(summary));
    if let Some(errors) = error_table(&summary.overall) {
        out.push_str("\nfailures\n");
        out.push_str(&errors.to_text_within(TERMINAL_COLUMNS));
    }
    if let Some(conversations) = &summary.conversations {
        out.push_str(&format!("\nturns: {}\n", conversations_line(conversations)));
        out.push_str(&turn_table(conversations).to_text());
    }
    if !summary.adapters.is_empty() {
        out.push_str("\nper adapter\n");
        out.push_str(&adapter_table(&summary.adapters).to_text());
    }
    if let Some(capacity) = &summary.capacity {
        out.push('\n');
        out.push_str(&capacity_report(capacity).to_text());
    }
    out
}

/// The run's tables: aligned columns, stages first, then `all`; the load (requests, rates, schedule delay), then
/// the latencies; then the server's figures and the notes. Ends with a newline.
pub fn print_table(summary: &RunSummary) -> String {
    let header = |names: &[&str]| names.iter().map(|h| (*h).to_owned()).collect::<Vec<_>>();
    // A pooling run generates nothing: its load is counted in inputs (embedding inputs, rerank documents).
    let pooling = summary.overall.throughput.inputs_per_s.is_some();
    let mut load_header = header(&LOAD_HEADER);
    if pooling {
        load_header[5] = "inputs/s".to_owned();
    }
    let mut load = vec![load_header];
    let mut latency = vec![header(&LATENCY_HEADER)];
    for stage in &summary.stages {
        load.push(load_row(stage.stage.to_string(), &stage.summary, pooling));
        latency.push(latency_row(stage.stage.to_string(), &stage.summary));
    }
    load.push(load_row("all".to_owned(), &summary.overall, pooling));
    latency.push(latency_row("all".to_owned(), &summary.overall));

    let mut out = aligned(&load);
    out.push('\n');
    out.push_str(&aligned(&latency));
    if let Some(server) = &summary.server_metrics {
        out.push('\n');
        out.push_str(&server_table(server));
    }
    if let Some(model_load) = &summary.model_load {
        out.push_str(&print_model_load(model_load));
    }
    out.push_str(&notes(summary));
    out
}

/// What the stack saw, per stage and overall: the gauges that say why it saturates, its token rate and its own
/// TTFT (which includes its queue, unlike the client's send-to-first-token only in what it leaves out), then how
/// the scrape went.
fn server_table(server: &ServerMetricsSummary) -> String {
    let mut rows: Vec<Vec<String>> = vec![
        [
            "server",
            "running mean/max",
            "waiting mean/max",
            "KV % mean/max",
            "prefix hit %",
            "gen tok/s",
            "TTFT ms p50/p99",
        ]
        .map(str::to_owned)
        .to_vec(),
    ];
    let row = |label: String, window: &WindowSummary| -> Vec<String> {
        let gauge = |key: &str, scale: f64| match window.aggregate_metric(key).map(|m| &m.figures) {
            Some(Figures::Gauge { mean, max, .. }) => {
                format!("{}/{}", num(mean * scale), num(max * scale))
            }
            _ => "-".to_owned(),
        };
        let ratio = match window
            .aggregate_metric("prefix_cache_hit_rate")
            .map(|m| &m.figures)
        {
            Some(Figures::Ratio { percent }) => num(*percent),
            _ => "-".to_owned(),
        };
        let rate = match window
            .aggregate_metric("generation_tokens")
            .map(|m| &m.figures)
        {
            Some(Figures::Counter { per_second, .. }) => num(*per_second),
            _ => "-".to_owned(),
        };
        let ttft = match window.aggregate_metric("ttft").map(|m| &m.figures) {
            Some(Figures::Histogram {
                p50: Some(p50),
                p99: Some(p99),
                ..
            }) => format!("{}/{}", num(p50 * 1e3), num(p99 * 1e3)),
            _ => "-".to_owned(),
        };
        vec![
            label,
            gauge("running", 1.0),
            gauge("waiting", 1.0),
            gauge("kv_cache_usage", 100.0),
            ratio,
            rate,
            ttft,
        ]
    };
    for window in &server.stages {
        let label = window
            .stage
            .map_or_else(|| "-".to_owned(), |s| s.to_string());
        rows.push(row(label, window));
    }
    rows.push(row("all".to_owned(), &server.overall));
    let mut out = aligned(&rows);
    for target in &server.targets {
        out.push_str(&format!(
            "server metrics: {} scrape(s) of {}{}, {} failed{}\n",
            target.scrapes,
            target.url,
            target
                .engine
                .as_ref()
                .map(|engine| format!(" ({engine})"))
                .unwrap_or_default(),
            target.failed,
            target
                .warnings
                .first()
                .map(|w| format!(" ({w})"))
                .unwrap_or_default()
        ));
    }
    for warning in &server.warnings {
        out.push_str(&format!("server metrics: {warning}\n"));
    }
    out.push_str(&not_reported(server));
    out
}

/// The server table's columns the servers' engines do not report at all, so a "-" there is not read as no activity:
/// `not reported by llama.cpp: KV cache %, TTFT`. Empty when every column has figures, or no engine was recognised.
fn not_reported(server: &ServerMetricsSummary) -> String {
    let mut engines: Vec<&str> = Vec::new();
    for engine in server.targets.iter().filter_map(|t| t.engine.as_deref()) {
        if !engines.contains(&engine) {
            engines.push(engine);
        }
    }
    if engines.is_empty() {
        return String::new();
    }
    let columns = [
        ("running", "running"),
        ("waiting", "waiting"),
        ("KV cache %", "kv_cache_usage"),
        ("prefix hit %", "prefix_cache_hit_rate"),
        ("gen tok/s", "generation_tokens"),
        ("TTFT", "ttft"),
    ];
    let missing: Vec<&str> = columns
        .iter()
        .filter(|(_, key)| server.overall.aggregate_metric(key).is_none())
        .map(|(column, _)| *column)
        .collect();
    if missing.is_empty() {
        return String::new();
    }
    format!(
        "not reported by {}: {}\n",
        engines.join(", "),
        missing.join(", ")
    )
}

/// Rows as aligned columns: the first left-aligned, the others right-aligned.
fn aligned(rows: &[Vec<String>]) -> String {
    let columns = rows.first().map_or(0, Vec::len);
    let align: Vec<Align> = (0..columns)
        .map(|c| if c == 0 { Align::Left } else { Align::Right })
        .collect();
    aligned_as(rows, &align)
}

/// Rows as columns two spaces apart, each aligned as `align` says (left where it does not say).
fn aligned_as(rows: &[Vec<String>], align: &[Align]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .map(|r| r.get(c).map_or(0, |cell| cell.chars().count()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in rows {
        let cells: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(c, cell)| match align.get(c) {
                Some(Align::Right) => format!("{cell:>width$}", width = widths[c]),
                _ => format!("{cell:<width$}", width = widths[c]),
            })
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// The lines under the table: what changes how the figures read (stages stopped early, requests left out,
/// goodput, prefix-cache hits the server reported, profile keys not acted on).
fn notes(summary: &RunSummary) -> String {
    let mut out = String::new();
    for stage in &summary.stages {
        if let Some(reason) = stage.stopped {
            out.push_str(&format!("stage {} stopped early: {reason}\n", stage.stage));
        }
    }
    let ex = &summary.excluded;
    if !ex.is_empty() {
        out.push_str(&format!(
            "left out of the figures: {} warm-up request(s), {} in warm-up phases, {} in cool-down phases\n",
            ex.warmup_requests, ex.warmup, ex.cooldown
        ));
    }
    if let Some(g) = &summary.overall.goodput {
        out.push_str(&format!(
            "goodput: {} of {} successful requests met every objective ({}%), {} req/s\n",
            g.good,
            g.judged,
            num(g.percentage),
            num(g.requests_per_s)
        ));
    }
    if let Some(p) = &summary.overall.prefix_cache {
        let stages: Vec<String> = summary
            .stages
            .iter()
            .map(|s| {
                let rate = s.summary.prefix_cache.map_or_else(
                    || "-".to_owned(),
                    |p| format!("{}%", num(p.hit_rate * 100.0)),
                );
                format!("stage {} {rate}", s.stage)
            })
            .collect();
        out.push_str(&format!(
            "prefix cache hits reported by the server: {}% of {} prompt tokens ({} of {} requests with usage \
             reported cached_tokens); {}\n",
            num(p.hit_rate * 100.0),
            p.prompt_tokens,
            p.requests_reporting,
            p.requests_with_usage,
            stages.join(", ")
        ));
    }
    if let Some(starts) = &summary.shard_starts {
        let latest = starts.late_ms.iter().copied().fold(0.0, f64::max);
        let since = match &starts.released_at {
            Some(at) => format!(
                "released together at {at}, the latest {} ms after it",
                num(latest)
            ),
            None => "not released together".to_owned(),
        };
        out.push_str(&format!(
            "shards: {} merged, {since}; start skew {} ms\n",
            starts.late_ms.len(),
            num(starts.skew_ms)
        ));
    }
    for key in &summary.ignored_keys {
        out.push_str(&format!("not acted on: {key}\n"));
    }
    out
}

/// The model-load figures as a table for the terminal: the headline figures, the phases, what the log lacked.
fn print_model_load(m: &ModelLoadSummary) -> String {
    let mut out = String::new();
    let figure = |v: f64, unit: &str| {
        if v == 0.0 {
            "-".to_owned()
        } else {
            format!("{v:.3} {unit}")
        }
    };
    let mut rows: Vec<(&str, String)> = vec![
        ("model loading", figure(m.load_s, "s")),
        ("weights", figure(m.load_gib, "GiB")),
        ("load rate", figure(m.load_gib_per_s, "GiB/s")),
        (
            "dynamo bytecode transform",
            figure(m.dynamo_bytecode_transform_s, "s"),
        ),
    ];
    if let Some(v) = m.load_cached_compiled_graph_s {
        rows.push(("compiled graph from cache", figure(v, "s")));
    }
    if let Some(v) = m.compile_graph_s {
        rows.push(("graph compilation", figure(v, "s")));
    }
    rows.extend([
        ("torch.compile in total", figure(m.torch_compile_s, "s")),
        ("memory profiling", figure(m.memory_profiling_s, "s")),
        ("free GPU memory before", figure(m.initial_free_gib, "GiB")),
        ("free GPU memory after", figure(m.after_free_gib, "GiB")),
        ("server start to ready", figure(m.vllm_start_s, "s")),
    ]);
    let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    // Writing to a String cannot fail.
    let _ = writeln!(out, "\nmodel load ({}), from the vLLM log:", m.name);
    for (key, value) in rows {
        let _ = writeln!(out, "  {key:<width$}  {value}");
    }
    let dump: Vec<vllm_log::CategoryDump> = m.categories.iter().map(category_dump).collect();
    if !dump.is_empty() {
        let _ = writeln!(out);
        out.push_str(&vllm_log::category_table_text(&dump));
    }
    if !m.missing.is_empty() {
        let _ = writeln!(
            out,
            "  not in the log (their figures are 0, as upstream): {}",
            m.missing.join("; ")
        );
    }
    out
}

fn category_dump(c: &vllm_log::ModelLoadCategory) -> vllm_log::CategoryDump {
    vllm_log::CategoryDump {
        title: c.title.clone(),
        process: None,
        elapsed: c.elapsed_s,
        categories: (!c.categories.is_empty())
            .then(|| c.categories.iter().map(category_dump).collect()),
    }
}
