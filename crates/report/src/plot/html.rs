//! `report.html` and `compare.html`: one self-contained page each — inline CSS, the plots as inline SVG,
//! tables, the rendered profile — with no script and nothing loaded from anywhere, so it opens from a PVC copy,
//! an email attachment or a CI artifact alike. Everything that comes from a file is HTML-escaped.

use std::fmt::Write as _;

use serde_json::Value;

use crate::report::{Align, Headline, ProfileNote, RunMeta, Table, Tone};
use llmbench_metrics::metrics::{RunSummary, Stats, Summary};

use super::figure::Colour;
use super::run::short_number;

/// `&`, `<`, `>`, `"` and `'` as entities: safe in text and in quoted attributes.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = "
body { font-family: 'DejaVu Sans', system-ui, sans-serif; margin: 24px auto; max-width: 1500px; padding: 0 16px;
       color: #212121; background: #fff; }
h1 { font-size: 1.6em; margin-bottom: 4px; }
h2 { font-size: 1.25em; margin-top: 36px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
p.meta { color: #555; margin-top: 0; }
table { border-collapse: collapse; font-size: 0.9em; margin: 8px 0; }
th, td { border: 1px solid #ddd; padding: 4px 8px; text-align: right; white-space: nowrap; }
th { background: #f4f4f4; }
th[colspan] { text-align: center; }
td.text, th.text { text-align: left; }
tr.all td { font-weight: bold; background: #fafafa; }
tr.best td { font-weight: bold; background: #eaf5e9; }
p.best { font-weight: bold; }
figure { margin: 18px 0; }
figure svg { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { color: #555; font-size: 0.9em; }
pre { background: #f7f7f7; border: 1px solid #e4e4e4; padding: 12px; overflow-x: auto; font-size: 0.85em; }
ul.warnings li { margin: 4px 0; }
span.swatch { display: inline-block; width: 14px; height: 14px; vertical-align: middle; margin-right: 6px; }
.scroll { overflow-x: auto; max-width: 100%; }
td.wrap { text-align: left; white-space: normal; overflow-wrap: anywhere; min-width: 24ch; max-width: 80ch; }
tr.good td:first-child { box-shadow: inset 4px 0 #2e7d32; }
tr.bad td { background: #fdecea; }
table.headline { font-size: 1em; border: 1px solid #ccc; }
table.headline th { text-align: left; vertical-align: top; }
table.headline td { text-align: left; white-space: normal; overflow-wrap: anywhere; }
table.headline tr.good td { background: #e8f5e9; }
table.headline tr.warn td { background: #fff8e1; }
table.headline tr.bad td { background: #fdecea; font-weight: bold; }
dl.answer { display: grid; grid-template-columns: max-content auto; gap: 4px 16px; }
dl.answer dt { font-weight: bold; }
dl.answer dd { margin: 0; }
";

/// The CSS class of a row's tone, as ` class="…"` (empty for a plain row).
fn tone_class(tone: Tone) -> &'static str {
    match tone {
        Tone::Plain => "",
        Tone::Good => " class=\"good\"",
        Tone::Warn => " class=\"warn\"",
        Tone::Bad => " class=\"bad\"",
        Tone::Total => " class=\"all\"",
    }
}

/// A [`Table`] of the reports as HTML, in a container that scrolls sideways should it ever be wider than the
/// page; free text (error messages) wraps instead.
pub(crate) fn table_html(table: &Table) -> String {
    let class = |c: usize| match table.align.get(c) {
        Some(Align::Right) => "",
        Some(Align::Text) => " class=\"wrap\"",
        _ => " class=\"text\"",
    };
    let mut out = String::from("<div class=\"scroll\"><table>\n<tr>");
    for (c, name) in table.header.iter().enumerate() {
        let class = match table.align.get(c) {
            Some(Align::Right) => "",
            _ => " class=\"text\"",
        };
        let _ = write!(out, "<th{class}>{}</th>", escape(name));
    }
    out.push_str("</tr>\n");
    for (tone, cells) in &table.rows {
        let _ = write!(out, "<tr{}>", tone_class(*tone));
        for (c, cell) in cells.iter().enumerate() {
            let _ = write!(out, "<td{}>{}</td>", class(c), escape(cell));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table></div>\n");
    out
}

/// The headline as a two-column table, the verdict's row coloured by its tone.
pub(crate) fn headline_html(headline: &Headline) -> String {
    let mut out = String::from("<table class=\"headline\">\n");
    for line in &headline.lines {
        let _ = writeln!(
            out,
            "<tr{}><th>{}</th><td>{}</td></tr>",
            tone_class(line.tone),
            escape(line.label),
            escape(&line.text)
        );
    }
    out.push_str("</table>\n");
    out
}

/// Labelled lines as a definition list.
fn answer_html(lines: &[(&str, String)]) -> String {
    let mut out = String::from("<dl class=\"answer\">\n");
    for (label, text) in lines {
        let _ = writeln!(out, "<dt>{}</dt><dd>{}</dd>", escape(label), escape(text));
    }
    out.push_str("</dl>\n");
    out
}

/// A whole page around `body`.
pub fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>{}</title>\n\
         <style>{STYLE}</style>\n</head>\n<body>\n{body}</body>\n</html>\n",
        escape(title)
    )
}

/// A drawn figure for a page: its SVG and the names of its files beside the page.
pub(crate) struct PageFigure<'a> {
    pub title: &'a str,
    pub svg: &'a str,
    /// Relative paths of its PNG and SVG files.
    pub files: Vec<String>,
}

fn figures_html(out: &mut String, figures: &[PageFigure<'_>]) {
    for f in figures {
        let links: Vec<String> = f
            .files
            .iter()
            .map(|p| format!("<a href=\"{0}\">{0}</a>", escape(p)))
            .collect();
        let _ = write!(
            out,
            "<figure>\n{}\n<figcaption>{} — {}</figcaption>\n</figure>\n",
            // The SVG comes from our renderer, which escapes every text it writes.
            f.svg.trim(),
            escape(f.title),
            links.join(", ")
        );
    }
}

/// Everything `report.html` shows.
pub(crate) struct RunPage<'a> {
    pub meta: &'a RunMeta,
    pub summary: &'a RunSummary,
    pub figures: Vec<PageFigure<'a>>,
    /// `profile.yaml`, as rendered.
    pub profile: Option<&'a str>,
    /// `summary.json`'s `server_metrics`, when it has one.
    pub server_metrics: Option<&'a Value>,
    /// Problems with the run's files, and how the run ended when not as planned.
    pub warnings: Vec<String>,
}

/// `report.html` of one run.
pub(crate) fn run_page(p: &RunPage<'_>) -> String {
    let m = p.meta;
    let mut b = String::new();
    let _ = writeln!(b, "<h1>llmbench run {}</h1>", escape(&m.run_id));
    let _ = writeln!(
        b,
        "<p class=\"meta\">harness {} · profile {} · model {} · endpoint {} · started {} · llmbench {}</p>",
        escape(&m.harness.to_string()),
        escape(&m.profile),
        escape(&m.model),
        escape(&m.endpoint),
        escape(&m.started_at),
        escape(&m.llmbench_version),
    );

    // The answer first: the headline, then why requests failed, what a capacity search found, how turns fared.
    b.push_str(&headline_html(&crate::report::headline(m, p.summary)));
    if let Some(errors) = crate::report::error_table(&p.summary.overall) {
        b.push_str("<h2>Failures</h2>\n");
        b.push_str(&table_html(&errors));
    }
    if let Some(capacity) = &p.summary.capacity {
        let report = crate::report::capacity_report(capacity);
        b.push_str("<h2>Capacity search</h2>\n");
        b.push_str(&answer_html(&report.lines));
        b.push_str(&table_html(&report.points));
    }
    if let Some(conversations) = &p.summary.conversations {
        b.push_str("<h2>Turns</h2>\n");
        let _ = writeln!(
            b,
            "<p>{}.</p>",
            escape(&crate::report::conversations_line(conversations))
        );
        b.push_str(&table_html(&crate::report::turn_table(conversations)));
    }
    if !p.summary.adapters.is_empty() {
        b.push_str("<h2>Per adapter</h2>\n");
        b.push_str(&table_html(&crate::report::adapter_table(
            &p.summary.adapters,
        )));
    }

    b.push_str("<h2>Summary</h2>\n");
    b.push_str(&summary_table(p.summary, Some(m)));
    let excluded = &p.summary.excluded;
    if !excluded.is_empty() {
        let _ = writeln!(
            b,
            "<p>Left out of every figure: {} warm-up requests (vllm --num-warmups), {} in stage warm-up, {} in stage \
             cool-down.</p>",
            excluded.warmup_requests, excluded.warmup, excluded.cooldown
        );
    }
    if let Some(verdict) = &p.summary.verdict {
        let _ = writeln!(
            b,
            "<p>Verdict ({}): <b>{}</b>{}</p>",
            escape(&verdict.by),
            escape(&verdict.result),
            if verdict.failed_checks.is_empty() {
                String::new()
            } else {
                format!(
                    "; failed checks: {}",
                    escape(&verdict.failed_checks.join(", "))
                )
            }
        );
    }

    let notes = notes_html(&m.profile_notes, &p.summary.ignored_keys, &p.warnings);
    if !notes.is_empty() {
        b.push_str("<h2>Warnings and ignored keys</h2>\n");
        b.push_str(&notes);
    }

    if !p.figures.is_empty() {
        b.push_str("<h2>Plots</h2>\n");
        figures_html(&mut b, &p.figures);
    }

    if let Some(server) = p.server_metrics {
        let table = server_metrics_table(server);
        if !table.is_empty() {
            b.push_str("<h2>Server metrics</h2>\n");
            b.push_str(&table);
        }
    }

    if let Some(profile) = p.profile {
        b.push_str("<h2>Profile (as rendered)</h2>\n");
        let _ = writeln!(b, "<pre>{}</pre>", escape(profile));
    }
    page(&format!("llmbench run {}", m.run_id), &b)
}

/// The warnings list: the profile's notes (from run.json, with their kind and line), else the summary's
/// ignored keys, then the page's own warnings.
fn notes_html(notes: &[ProfileNote], ignored: &[String], warnings: &[String]) -> String {
    let mut items: Vec<String> = warnings.iter().map(|w| escape(w)).collect();
    if notes.is_empty() {
        items.extend(ignored.iter().map(|k| format!("ignored: {}", escape(k))));
    } else {
        items.extend(notes.iter().map(|n| {
            let line = n.line.map(|l| format!(" (line {l})")).unwrap_or_default();
            format!(
                "{} key <code>{}</code>{}: {}",
                escape(&n.kind),
                escape(&n.key),
                line,
                escape(&n.message)
            )
        }));
    }
    if items.is_empty() {
        return String::new();
    }
    let mut out = String::from("<ul class=\"warnings\">\n");
    for item in items {
        let _ = writeln!(out, "<li>{item}</li>");
    }
    out.push_str("</ul>\n");
    out
}

fn stats_cells(out: &mut String, stats: &Option<Stats>) {
    match stats {
        Some(s) => {
            for v in [s.p50, s.p90, s.p99] {
                let _ = write!(out, "<td>{}</td>", short_number(v));
            }
        }
        None => out.push_str("<td>–</td><td>–</td><td>–</td>"),
    }
}

fn summary_row(out: &mut String, stage: &str, load: &str, s: &Summary, class: &str) {
    let _ = write!(
        out,
        "<tr{class}><td class=\"text\">{}</td><td class=\"text\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>",
        escape(stage),
        escape(load),
        s.requests.succeeded,
        s.requests.failed,
        short_number(s.throughput.requests_per_s),
        short_number(s.throughput.output_tokens_per_s),
    );
    let l = &s.latency_ms;
    for stats in [&l.ttft, &l.tpot, &l.itl, &l.e2e] {
        stats_cells(out, stats);
    }
    out.push_str("</tr>\n");
}

/// A stage's load as the profile asked for it: `constant 142 req/s`, `concurrent 4`.
pub(crate) fn load_text(meta: Option<&RunMeta>, stage: u32) -> String {
    let Some(s) = meta.and_then(|m| m.stages.get(stage as usize)) else {
        return String::new();
    };
    let mut parts = Vec::new();
    if let Some(load) = s.load {
        parts.push(load.name().to_owned());
    }
    if let Some(rate) = s.rate {
        parts.push(format!("{} req/s", short_number(rate)));
    } else if let Some(c) = s.concurrency {
        parts.push(format!("{c} in flight"));
    }
    parts.join(" ")
}

/// The run table: per stage and overall, requests ok and failed, req/s, output tok/s, TTFT/TPOT/ITL/E2E
/// p50/p90/p99 in ms.
pub(crate) fn summary_table(summary: &RunSummary, meta: Option<&RunMeta>) -> String {
    let mut out = String::from(
        "<div class=\"scroll\"><table>\n<tr><th class=\"text\" rowspan=\"2\">stage</th>\
         <th class=\"text\" rowspan=\"2\">load</th><th rowspan=\"2\">ok</th><th rowspan=\"2\">failed</th>\
         <th rowspan=\"2\">req/s</th><th rowspan=\"2\">out tok/s</th><th colspan=\"3\">TTFT ms</th>\
         <th colspan=\"3\">TPOT ms</th><th colspan=\"3\">ITL ms</th><th colspan=\"3\">E2E ms</th></tr>\n<tr>",
    );
    for _ in 0..4 {
        out.push_str("<th>p50</th><th>p90</th><th>p99</th>");
    }
    out.push_str("</tr>\n");
    for stage in &summary.stages {
        summary_row(
            &mut out,
            &stage.stage.to_string(),
            &load_text(meta, stage.stage),
            &stage.summary,
            "",
        );
    }
    summary_row(&mut out, "all", "", &summary.overall, " class=\"all\"");
    out.push_str("</table></div>\n");
    out
}

type Row<'a> = (String, String, &'a serde_json::Map<String, Value>);

/// A row per object of the `entries` array, labelled with its stage and list.
fn push_rows<'a>(rows: &mut Vec<Row<'a>>, stage: &str, list: &str, entries: &'a Value) {
    if let Value::Array(entries) = entries {
        for entry in entries.iter().filter_map(Value::as_object) {
            rows.push((stage.to_owned(), list.to_owned(), entry));
        }
    }
}

/// `summary.json`'s `server_metrics`, read generically (its shape belongs to the server-metrics module): per
/// stage (an array of stages, or an object with `stages`, then its `overall` as `all`), one row per entry of the
/// stage's `metrics` and `aggregate` lists — and of each target's `metrics` when there are several targets, or no
/// aggregate. To stay readable on a laptop screen, the rows are grouped by their `kind` (gauge, counter,
/// histogram…) into one table each, with only the numeric fields that kind has, and each metric's stages follow
/// one another; the `of` column (which list or target) shows only when it tells rows apart. Text fields come
/// first, then one column per numeric field present. Empty when nothing has that shape.
pub(crate) fn server_metrics_table(value: &Value) -> String {
    let mut stages: Vec<(Option<String>, &Value)> = match value {
        Value::Array(items) => items.iter().map(|v| (None, v)).collect(),
        Value::Object(map) => match map.get("stages") {
            Some(Value::Array(items)) => items.iter().map(|v| (None, v)).collect(),
            _ => vec![(None, value)],
        },
        _ => Vec::new(),
    };
    if let Some(overall) = value.get("overall") {
        stages.push((Some("all".to_owned()), overall));
    }
    let mut rows: Vec<Row<'_>> = Vec::new();
    for (i, (name, stage)) in stages.iter().enumerate() {
        let Some(object) = stage.as_object() else {
            continue;
        };
        let label = name.clone().unwrap_or_else(|| {
            match object.get("stage").or_else(|| object.get("name")) {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Number(n)) => n.to_string(),
                _ => i.to_string(),
            }
        });
        for list in ["metrics", "aggregate"] {
            if let Some(entries) = object.get(list) {
                push_rows(&mut rows, &label, list, entries);
            }
        }
        // Per target only where the aggregate does not already say it all (one target).
        if let Some(Value::Array(targets)) = object.get("targets")
            && (targets.len() > 1 || object.get("aggregate").is_none())
        {
            for (t, target) in targets.iter().enumerate() {
                let name = match target.get("url").or_else(|| target.get("target")) {
                    Some(Value::String(url)) => url.clone(),
                    _ => format!("target {t}"),
                };
                if let Some(entries) = target.get("metrics") {
                    push_rows(&mut rows, &label, &name, entries);
                }
            }
        }
    }
    if rows.is_empty() {
        return String::new();
    }
    // Each metric's rows together, metrics in order of first appearance, stages in their order.
    let identity = |entry: &serde_json::Map<String, Value>| -> String {
        ["name", "metric", "key"]
            .iter()
            .find_map(|k| entry.get(*k).and_then(Value::as_str))
            .unwrap_or("")
            .to_owned()
    };
    let mut first_seen: Vec<String> = Vec::new();
    for (_, _, entry) in &rows {
        let id = identity(entry);
        if !first_seen.contains(&id) {
            first_seen.push(id);
        }
    }
    rows.sort_by_key(|(_, _, entry)| {
        let id = identity(entry);
        first_seen.iter().position(|seen| *seen == id)
    });
    let show_of = rows
        .iter()
        .any(|(_, list, _)| list.as_str() != rows[0].1.as_str());
    // One table per kind, kinds in order of first appearance.
    let kind_of = |entry: &serde_json::Map<String, Value>| -> String {
        entry
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let mut kinds: Vec<String> = Vec::new();
    for (_, _, entry) in &rows {
        let kind = kind_of(entry);
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    let mut out = String::new();
    for kind in &kinds {
        let group: Vec<&Row<'_>> = rows
            .iter()
            .filter(|(_, _, e)| kind_of(e) == *kind)
            .collect();
        if kinds.len() > 1 && !kind.is_empty() {
            let _ = writeln!(out, "<h3>{}</h3>", escape(&format!("{kind}s")));
        }
        out.push_str(&server_kind_table(&group, show_of));
    }
    out
}

/// One kind's rows of the server metrics as a table: stage, (of), text fields but `kind`, numeric fields.
fn server_kind_table(rows: &[&Row<'_>], show_of: bool) -> String {
    // Columns in order of first appearance, texts before numbers.
    let mut texts: Vec<&str> = Vec::new();
    let mut numbers: Vec<&str> = Vec::new();
    for (_, _, entry) in rows {
        for (key, v) in entry.iter() {
            let list = match v {
                Value::String(_) if key != "kind" => &mut texts,
                Value::Number(_) => &mut numbers,
                _ => continue,
            };
            if !list.contains(&key.as_str()) {
                list.push(key);
            }
        }
    }
    let mut out = String::from("<div class=\"scroll\"><table>\n<tr><th class=\"text\">stage</th>");
    if show_of {
        out.push_str("<th class=\"text\">of</th>");
    }
    for t in &texts {
        let _ = write!(out, "<th class=\"text\">{}</th>", escape(t));
    }
    for n in &numbers {
        let _ = write!(out, "<th>{}</th>", escape(n));
    }
    out.push_str("</tr>\n");
    for (stage, list, entry) in rows {
        let _ = write!(out, "<tr><td class=\"text\">{}</td>", escape(stage));
        if show_of {
            let _ = write!(out, "<td class=\"text\">{}</td>", escape(list));
        }
        for t in &texts {
            let text = entry.get(*t).and_then(Value::as_str).unwrap_or("");
            let _ = write!(out, "<td class=\"text\">{}</td>", escape(text));
        }
        for n in &numbers {
            let text = entry
                .get(*n)
                .and_then(Value::as_f64)
                .map(|v| {
                    if v.fract() == 0.0 && v.abs() < 1e15 {
                        format!("{v:.0}")
                    } else {
                        short_number(v)
                    }
                })
                .unwrap_or_default();
            let _ = write!(out, "<td>{text}</td>");
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table></div>\n");
    out
}

/// An experiment's treatment table, for the top of `compare.html`: the table the terminal prints at the end of
/// the experiment, as the experiment's own comparison words it (built there, so the page and the terminal agree).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TreatmentTable {
    /// What it is of: `experiment local-streams (id local)`.
    pub title: String,
    /// The column names.
    pub header: Vec<String>,
    /// The columns that hold text (left-aligned), by index; the others hold numbers.
    pub text_columns: Vec<usize>,
    /// One row per treatment, in plan order.
    pub rows: Vec<Vec<String>>,
    /// The SLO the runs were judged by and how the treatments fared, in words; `None` without an SLO.
    pub verdict: Option<String>,
    /// The best treatment's row, and the sentence naming it and why (or why there is none).
    pub best_row: Option<usize>,
    pub best: String,
}

/// A treatment table as HTML: the best row highlighted, then the verdict and the best in words.
fn treatment_table_html(table: &TreatmentTable) -> String {
    let mut out = format!(
        "<h2>Treatments: {}</h2>\n<div class=\"scroll\"><table class=\"treatments\">\n<tr>",
        escape(&table.title)
    );
    for (i, name) in table.header.iter().enumerate() {
        let class = if table.text_columns.contains(&i) {
            " class=\"text\""
        } else {
            ""
        };
        let _ = write!(out, "<th{class}>{}</th>", escape(name));
    }
    out.push_str("</tr>\n");
    for (r, row) in table.rows.iter().enumerate() {
        let class = if table.best_row == Some(r) {
            " class=\"best\""
        } else {
            ""
        };
        let _ = write!(out, "<tr{class}>");
        for (i, cell) in row.iter().enumerate() {
            let class = if table.text_columns.contains(&i) {
                " class=\"text\""
            } else {
                ""
            };
            let _ = write!(out, "<td{class}>{}</td>", escape(cell));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table></div>\n");
    if let Some(verdict) = &table.verdict {
        let _ = writeln!(out, "<p>{}</p>", escape(verdict));
    }
    let _ = writeln!(out, "<p class=\"best\">{}</p>", escape(&table.best));
    out
}

/// One compared series (a run, or an experiment's treatment) for `compare.html`.
pub(crate) struct CompareEntry<'a> {
    pub label: &'a str,
    pub colour: Colour,
    /// The directories its figures come from, and their summaries.
    pub runs: Vec<(String, &'a RunSummary, Option<&'a RunMeta>)>,
}

/// `compare.html`: what was compared, each experiment's treatment table with its verdict and best, the
/// comparison plots, and each entry's runs.
pub(crate) fn compare_page(
    tables: &[TreatmentTable],
    entries: &[CompareEntry<'_>],
    figures: &[PageFigure<'_>],
    warnings: &[String],
) -> String {
    let mut b = String::from("<h1>llmbench comparison</h1>\n");
    let _ = writeln!(
        b,
        "<p class=\"meta\">{} series: {}</p>",
        entries.len(),
        entries
            .iter()
            .map(|e| escape(e.label))
            .collect::<Vec<_>>()
            .join(", ")
    );
    for table in tables {
        b.push_str(&treatment_table_html(table));
    }
    if !warnings.is_empty() {
        b.push_str("<h2>Warnings</h2>\n");
        b.push_str(&notes_html(&[], &[], warnings));
    }
    if !figures.is_empty() {
        b.push_str("<h2>Plots</h2>\n");
        figures_html(&mut b, figures);
    }
    b.push_str("<h2>Runs</h2>\n");
    for e in entries {
        let Colour(r, g, bl) = e.colour;
        let _ = writeln!(
            b,
            "<h3><span class=\"swatch\" style=\"background: rgb({r},{g},{bl})\"></span>{}</h3>",
            escape(e.label)
        );
        for (dir, summary, meta) in &e.runs {
            let profile = meta.map(|m| m.profile.as_str()).unwrap_or("");
            let _ = writeln!(
                b,
                "<p class=\"meta\">run {} · {} · {} · {}</p>",
                escape(&summary.run_id),
                escape(&summary.harness),
                escape(profile),
                escape(dir)
            );
            b.push_str(&summary_table(summary, *meta));
        }
    }
    page("llmbench comparison", &b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_makes_markup_text() {
        assert_eq!(
            escape("<script>alert('x') & \"y\"</script>"),
            "&lt;script&gt;alert(&#39;x&#39;) &amp; &quot;y&quot;&lt;/script&gt;"
        );
    }

    #[test]
    fn server_metrics_table_has_a_row_per_entry_and_a_column_per_numeric_field() {
        let value = serde_json::json!({"stages": [
            {"stage": 0, "metrics": [
                {"metric": "vllm:num_requests_running", "unit": "requests", "mean": 3.5, "max": 7},
                {"metric": "kv <cache>", "unit": "fraction", "mean": 0.25, "p99": 0.5}
            ], "aggregate": [{"name": "prefix cache hit rate", "value": 0.125}]},
            {"stage": 1, "metrics": []}
        ]});
        let html = server_metrics_table(&value);
        // Three rows; columns metric, unit, name (texts) then mean, max, p99, value (numbers).
        assert_eq!(html.matches("<tr>").count(), 4);
        assert!(html.contains("<th class=\"text\">metric</th><th class=\"text\">unit</th><th class=\"text\">name</th><th>mean</th><th>max</th><th>p99</th><th>value</th>"));
        assert!(html.contains("<td>3.50</td><td>7</td><td></td><td></td>"));
        assert!(html.contains("kv &lt;cache&gt;"));
        assert!(html.contains("<td class=\"text\">aggregate</td>"));
        // The shape the scraper writes: per stage an aggregate and per-target metrics, and an overall. One target:
        // the aggregate alone; two: each target's rows too.
        let entry = serde_json::json!({"name": "m", "unit": "requests", "mean": 2.0});
        let one = serde_json::json!({"stages": [{"stage": 0,
            "targets": [{"url": "http://a/metrics", "metrics": [entry]}], "aggregate": [entry]}],
            "overall": {"targets": [{"url": "http://a/metrics", "metrics": [entry]}], "aggregate": [entry]}});
        let html = server_metrics_table(&one);
        // Every row is of the aggregate: the `of` column would say nothing.
        assert!(
            !html.contains(">of<") && !html.contains(">aggregate<"),
            "{html}"
        );
        assert_eq!(html.matches("<tr>").count(), 3);
        assert!(!html.contains("http://a/metrics"));
        assert!(html.contains("<td class=\"text\">all</td>"));
        let two = serde_json::json!({"stages": [{"stage": 0, "targets": [
            {"url": "http://a/metrics", "metrics": [entry]}, {"url": "http://b/metrics", "metrics": [entry]}
        ], "aggregate": [entry]}]});
        let html = server_metrics_table(&two);
        assert!(html.contains("http://a/metrics") && html.contains("http://b/metrics"));
        assert_eq!(html.matches("<tr>").count(), 4);
        // A stage list at the top level works too; anything else gives no table.
        let top = serde_json::json!([{"stage": "s", "metrics": [{"metric": "m", "v": 1.5}]}]);
        assert!(server_metrics_table(&top).contains("<td>1.50</td>"));
        assert_eq!(server_metrics_table(&serde_json::json!(3)), "");
        assert_eq!(server_metrics_table(&serde_json::json!({"x": 1})), "");
    }

    #[test]
    fn server_metrics_get_a_narrow_table_per_kind_with_each_metrics_stages_together() {
        // As the scraper writes them: a gauge with seven figures, a histogram with six, over two stages and all.
        let gauge = |mean: f64| {
            serde_json::json!({"name": "vllm:num_requests_running", "key": "running", "unit": "requests",
                "kind": "gauge", "mean": mean, "min": 0.0, "max": 2.0, "p50": 0.0, "p90": 2.0, "p99": 2.0,
                "samples": 31})
        };
        let histogram = serde_json::json!({"name": "vllm:e2e_request_latency_seconds", "key": "e2e",
            "unit": "s", "kind": "histogram", "count": 30.0, "per_second": 0.98, "mean": 0.52, "p50": 0.55,
            "p90": 0.75, "p99": 0.795});
        let window = |mean: f64| serde_json::json!({"aggregate": [gauge(mean), histogram.clone()]});
        let value = serde_json::json!({"stages": [
            {"stage": 0, "aggregate": window(0.5)["aggregate"]},
            {"stage": 1, "aggregate": window(1.5)["aggregate"]}
        ], "overall": window(1.0)});
        let html = server_metrics_table(&value);
        let tables: Vec<&str> = html.split("<table>").skip(1).collect();
        assert_eq!(tables.len(), 2, "{html}");
        assert!(html.contains("<h3>gauges</h3>") && html.contains("<h3>histograms</h3>"));
        // The gauge table: stage, name, key, unit, then its seven figures; no `kind`, no `of`, no histogram
        // fields.
        assert!(tables[0].contains(
            "<tr><th class=\"text\">stage</th><th class=\"text\">name</th><th class=\"text\">key</th>\
             <th class=\"text\">unit</th><th>mean</th><th>min</th><th>max</th><th>p50</th><th>p90</th><th>p99</th>\
             <th>samples</th></tr>"
        ), "{}", tables[0]);
        assert!(!tables[0].contains("per_second"));
        // Its rows: stage 0, 1, all of the one gauge, in that order.
        let stages: Vec<&str> = tables[0]
            .split("<tr><td class=\"text\">")
            .skip(1)
            .map(|row| row.split('<').next().unwrap())
            .collect();
        assert_eq!(stages, ["0", "1", "all"]);
        assert!(tables[1].contains("<th>count</th><th>per_second</th><th>mean</th>"));
        assert!(!tables[1].contains("<th>samples</th>"));
    }

    #[test]
    fn notes_prefer_run_json_and_escape_everything() {
        let notes = [ProfileNote {
            key: "api.<x>".into(),
            line: Some(4),
            kind: "unknown".into(),
            message: "did you mean `y`?".into(),
        }];
        let html = notes_html(&notes, &["ignored too".into()], &["run <stopped>".into()]);
        assert!(html.contains("<li>run &lt;stopped&gt;</li>"));
        assert!(
            html.contains("unknown key <code>api.&lt;x&gt;</code> (line 4): did you mean `y`?")
        );
        assert!(!html.contains("ignored too"));
        assert!(notes_html(&[], &["a: b".into()], &[]).contains("ignored: a: b"));
        assert_eq!(notes_html(&[], &[], &[]), "");
    }

    #[test]
    fn a_page_has_no_script_and_nothing_from_the_network() {
        let html = page("t <1>", "<p>x</p>");
        assert!(html.starts_with("<!DOCTYPE html>"));
        assert!(html.contains("<title>t &lt;1&gt;</title>"));
        assert!(!html.contains("<script") && !html.contains("<link") && !html.contains("http"));
    }
}
