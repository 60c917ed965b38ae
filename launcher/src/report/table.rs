//! The table printed at the end of `llmbench run`: one row per stage and one for the whole run.

use crate::metrics::{RunSummary, Stats, Summary};
use crate::server_metrics::{Figures, ServerMetricsSummary, WindowSummary};

const HEADER: [&str; 10] = [
    "stage",
    "ok",
    "failed",
    "req/s",
    "sent/s (asked)",
    "out tok/s",
    "TTFT ms p50/p90/p99",
    "TPOT ms p50/p90/p99",
    "ITL ms p50/p90/p99",
    "E2E ms p50/p90/p99",
];
const DELAY_HEADER: &str = "delay p99 ms";

/// A number with fewer decimals as it grows: 0.123, 1.23, 12.3, 123.
fn num(x: f64) -> String {
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

fn triple(stats: &Option<Stats>) -> String {
    stats.as_ref().map_or_else(
        || "-".to_owned(),
        |s| format!("{}/{}/{}", num(s.p50), num(s.p90), num(s.p99)),
    )
}

fn row(label: String, s: &Summary) -> Vec<String> {
    let sched = &s.schedule;
    let sent = sched.achieved_rate.map_or_else(|| "-".to_owned(), num);
    let asked = sched.requested_rate.map_or_else(|| "-".to_owned(), num);
    let l = &s.latency_ms;
    vec![
        label,
        s.requests.succeeded.to_string(),
        s.requests.failed.to_string(),
        num(s.throughput.requests_per_s),
        format!("{sent} ({asked})"),
        num(s.throughput.output_tokens_per_s),
        triple(&l.ttft),
        triple(&l.tpot),
        triple(&l.itl),
        triple(&l.e2e),
        sched
            .delay_ms
            .map_or_else(|| "-".to_owned(), |d| num(d.p99)),
    ]
}

/// The run's table: aligned columns, stages first, then `all`; ends with a newline.
pub fn print_table(summary: &RunSummary) -> String {
    let mut rows: Vec<Vec<String>> = vec![
        HEADER
            .iter()
            .chain(std::iter::once(&DELAY_HEADER))
            .map(|h| (*h).to_owned())
            .collect(),
    ];
    for stage in &summary.stages {
        rows.push(row(stage.stage.to_string(), &stage.summary));
    }
    rows.push(row("all".to_owned(), &summary.overall));

    let mut out = aligned(&rows);
    if let Some(server) = &summary.server_metrics {
        out.push_str(&server_table(server));
    }
    if let Some(model_load) = &summary.model_load {
        out.push_str(&crate::nop::print_model_load(model_load));
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
            "KV cache % mean/max",
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
            .map(|(c, cell)| {
                if c == 0 {
                    format!("{cell:<width$}", width = widths[c])
                } else {
                    format!("{cell:>width$}", width = widths[c])
                }
            })
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// The lines under the table: what changes how the figures read (stages stopped early, requests left out,
/// goodput, prefix-cache hits the server reported, conversations, profile keys not acted on).
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
    if let Some(c) = &summary.conversations {
        out.push_str(&format!(
            "conversations: {} ({} with every turn successful), {} turn index(es)\n",
            c.conversations,
            c.all_turns_succeeded,
            c.turns.len()
        ));
    }
    for key in &summary.ignored_keys {
        out.push_str(&format!("not acted on: {key}\n"));
    }
    out
}
