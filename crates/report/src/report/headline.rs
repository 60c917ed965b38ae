//! The headline: the few lines that open what a run prints at its end and its `report.html` — what ran, the token
//! lengths asked and measured, the load offered and achieved, the errors, and the verdict — so the answer is read
//! before any table.

use llmbench_core::harness::Harness;

use llmbench_metrics::metrics::{Completion, LengthStats, RunState, RunSummary, Summary};
use llmbench_workload::workload::LoadKind;

use super::capacity_answer::capacity_verdict;
use super::errors::error_parts;
use super::table::{Tone, num};
use super::{RunMeta, StageMeta};

/// One line of the headline: a short label, its text, and how it reads (the verdict is good or bad news).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeadlineLine {
    pub label: &'static str,
    pub text: String,
    pub tone: Tone,
}

/// The headline's lines, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Headline {
    pub lines: Vec<HeadlineLine>,
}

impl Headline {
    /// The lines as `label  text`, the labels padded to one width; ends with a newline.
    pub fn to_text(&self) -> String {
        let width = self.lines.iter().map(|l| l.label.len()).max().unwrap_or(0);
        self.lines
            .iter()
            .map(|l| format!("{:<width$}  {}\n", l.label, l.text))
            .collect()
    }

    /// The verdict line's tone.
    #[cfg(test)]
    fn tone(&self) -> Tone {
        self.lines
            .iter()
            .find(|l| l.label == VERDICT)
            .map_or(Tone::Plain, |l| l.tone)
    }
}

const VERDICT: &str = "verdict";

/// The headline of a run from its metadata and summary.
pub fn headline(meta: &RunMeta, summary: &RunSummary) -> Headline {
    let line = |label, text| HeadlineLine {
        label,
        text,
        tone: Tone::Plain,
    };
    let overall = &summary.overall;
    let mut lines = vec![line("run", what_ran(meta))];
    if meta.harness == Harness::Nop {
        // No requests: the run measures how the server started (the model load below the tables).
        lines.push(HeadlineLine {
            label: VERDICT,
            text:
                "completed: the nop harness sends no requests; its figures are the model load below"
                    .to_owned(),
            tone: Tone::Plain,
        });
        return Headline { lines };
    }
    let lengths = &overall.lengths;
    if lengths.input_asked.is_some() {
        lines.push(line(
            "input",
            input_text(lengths.input_asked, lengths.input),
        ));
        lines.push(line(
            "output",
            output_text(lengths.output_asked, lengths.output),
        ));
    }
    lines.push(line("load", load_text(meta, summary)));
    lines.push(line("errors", errors_text(overall)));
    if let Some(text) = truncation_text(overall) {
        lines.push(HeadlineLine {
            label: "cut short",
            text,
            tone: Tone::Warn,
        });
    }
    if let Some(text) = super::cache::cache_line(meta, summary) {
        lines.push(HeadlineLine {
            label: "cache",
            text,
            tone: if summary.prefix_cache_warm.is_some() {
                Tone::Warn
            } else {
                Tone::Plain
            },
        });
    }
    let (tone, text) = verdict(meta, summary);
    lines.push(HeadlineLine {
        label: VERDICT,
        text,
        tone,
    });
    Headline { lines }
}

/// `inference-perf sanity_random · model m · http://host:8000`, then what the server said it is (`· llama.cpp
/// b6123`) and, when the model that answered is not the one asked for (a server that ignores the request's
/// model field), which one did: `model m (served: /models/tiny.gguf)`.
fn what_ran(meta: &RunMeta) -> String {
    // What the test request's answer named; a list's first entry says nothing of which model answered.
    let served = meta
        .preflight
        .as_ref()
        .and_then(|p| p.server_model.as_deref())
        .filter(|&served| served != meta.model)
        .map(|served| format!(" (served: {served})"))
        .unwrap_or_default();
    let mut text = format!(
        "{} {} · model {}{served} · {}",
        meta.harness, meta.profile, meta.model, meta.endpoint
    );
    if let Some(engine) = meta.server.as_ref().and_then(|s| s.engine.as_deref()) {
        text.push_str(&format!(" · {engine}"));
        if let Some(version) = meta.server.as_ref().and_then(|s| s.version.as_deref()) {
            text.push_str(&format!(" {version}"));
        }
    }
    if meta.shard.count > 1 {
        text.push_str(&format!(" · {} shards", meta.shard.count));
    }
    text
}

/// `384 tokens` for one length, else `mean 384 (p50 385, p99 410)`.
fn lengths_text(stats: &LengthStats) -> String {
    if stats.min == stats.max {
        format!("{} tokens", stats.min)
    } else {
        format!(
            "mean {} (p50 {}, p99 {})",
            num(stats.mean),
            num(stats.p50),
            num(stats.p99)
        )
    }
}

fn measured_text(measured: Option<LengthStats>) -> String {
    measured.map_or_else(
        || "measured: none (no request succeeded)".to_owned(),
        |m| format!("measured {}", lengths_text(&m)),
    )
}

/// Prompt tokens as built against what the server counted.
fn input_text(asked: Option<LengthStats>, measured: Option<LengthStats>) -> String {
    let asked = asked.map_or_else(|| "-".to_owned(), |a| lengths_text(&a));
    format!("asked {asked} · {}", measured_text(measured))
}

/// `max_tokens` as sent against the tokens that came back.
fn output_text(asked: Option<LengthStats>, measured: Option<LengthStats>) -> String {
    let asked = asked.map_or_else(
        || "no max_tokens (the server decides)".to_owned(),
        |a| format!("max_tokens {}", lengths_text(&a)),
    );
    format!("asked {asked} · {}", measured_text(measured))
}

/// A stage's load as the profile asked for it: `1.00 req/s constant`, `4 in flight`, `all at once (throughput)`.
pub fn stage_load(stage: &StageMeta) -> String {
    let kind = stage.load.map(|l| l.name());
    match (stage.rate, stage.concurrency) {
        (Some(rate), _) => match kind {
            Some(kind) => format!("{} req/s {kind}", num(rate)),
            None => format!("{} req/s", num(rate)),
        },
        (None, Some(c)) => format!("{c} in flight"),
        (None, None) => match stage.load {
            Some(LoadKind::Synchronous) => "one at a time (synchronous)".to_owned(),
            Some(LoadKind::Throughput) => "all at once (throughput)".to_owned(),
            Some(LoadKind::Trace) => "the trace's timing".to_owned(),
            Some(kind) => kind.name().to_owned(),
            None => "as planned".to_owned(),
        },
    }
}

/// `4.00 req/s`, or `4.00 to 32.0 req/s`.
fn range(values: &[f64], unit: &str, format: impl Fn(f64) -> String) -> String {
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if min == max {
        format!("{} {unit}", format(min))
    } else {
        format!("{} to {} {unit}", format(min), format(max))
    }
}

/// Offered against achieved: one stage as `asked → sent → served`; several as the range asked (rates or
/// concurrencies, lowest to highest, as a sweep or a capacity search visits them in any order) and the most any
/// stage served.
fn load_text(meta: &RunMeta, summary: &RunSummary) -> String {
    let overall = &summary.overall;
    let served = if overall.requests.succeeded == 0 {
        "served nothing".to_owned()
    } else {
        format!(
            "served {} req/s, {} output tok/s",
            num(overall.throughput.requests_per_s),
            num(overall.throughput.output_tokens_per_s)
        )
    };
    match summary.stages.as_slice() {
        [] | [_] => {
            let asked = meta
                .stages
                .first()
                .map_or_else(|| "-".to_owned(), stage_load);
            let sent = overall
                .schedule
                .achieved_rate
                .map_or_else(|| "-".to_owned(), |r| format!("{} req/s", num(r)));
            format!("asked {asked} → sent {sent} → {served}")
        }
        stages => {
            let metas: Vec<&StageMeta> = stages
                .iter()
                .filter_map(|s| meta.stages.get(s.stage as usize))
                .collect();
            let rates: Vec<f64> = metas.iter().filter_map(|m| m.rate).collect();
            let concurrencies: Vec<f64> = metas
                .iter()
                .filter_map(|m| m.concurrency.map(f64::from))
                .collect();
            let asked = if rates.len() == stages.len() {
                range(&rates, "req/s", num)
            } else if concurrencies.len() == stages.len() {
                range(&concurrencies, "in flight", |c| format!("{c:.0}"))
            } else {
                let load = |i: usize| {
                    metas
                        .get(i)
                        .map_or_else(|| "-".to_owned(), |m| stage_load(m))
                };
                format!("{} … {}", load(0), load(metas.len().saturating_sub(1)))
            };
            let peak = stages.iter().max_by(|a, b| {
                a.summary
                    .throughput
                    .requests_per_s
                    .total_cmp(&b.summary.throughput.requests_per_s)
            });
            let peak = peak.map_or_else(String::new, |p| {
                format!(
                    "; served up to {} req/s (stage {})",
                    num(p.summary.throughput.requests_per_s),
                    p.stage
                )
            });
            format!("{} stages, asked {asked}{peak}", stages.len())
        }
    }
}

/// `none`, or `3 of 200 requests failed (1.50%): http_429 2, timeout 1`.
fn errors_text(overall: &Summary) -> String {
    let counts = &overall.requests;
    if counts.failed == 0 {
        return "none".to_owned();
    }
    let parts = error_parts(overall);
    const SHOWN: usize = 3;
    let mut classes: Vec<String> = parts
        .iter()
        .take(SHOWN)
        .map(|(key, count)| format!("{key} {count}"))
        .collect();
    if parts.len() > SHOWN {
        classes.push(format!("{} more", parts.len() - SHOWN));
    }
    format!(
        "{} of {} requests failed ({}%): {}",
        counts.failed,
        counts.total,
        num(overall.failure_rate * 100.0),
        classes.join(", ")
    )
}

/// A range of token counts: `124` when all agree, else `19–1424`.
pub fn tokens_range(stats: &LengthStats) -> String {
    if stats.min == stats.max {
        format!("{}", stats.min)
    } else {
        format!("{}–{}", stats.min, stats.max)
    }
}

/// `7 of 11 answers were cut short`, `1 of 11 answers was cut short`.
fn cut_short_count(truncated: u64, total: u64) -> String {
    let verb = if truncated == 1 { "was" } else { "were" };
    format!("{truncated} of {total} answers {verb} cut short")
}

/// What the finish reasons of the answers cut short say, the commonest first.
fn truncation_causes(reasons: &std::collections::BTreeMap<String, u64>) -> String {
    let mut reasons: Vec<(&String, &u64)> = reasons.iter().collect();
    reasons.sort_by(|a, b| b.1.cmp(a.1).then_with(|| a.0.cmp(b.0)));
    reasons
        .iter()
        .map(|(reason, _)| match reason.as_str() {
            "length" => {
                "length: the server stopped before max_tokens at a limit of its own, likely its context window \
                 (prompt + max_tokens is larger: raise vLLM's --max-model-len or llama.cpp's -c per slot, or ask \
                 for fewer tokens)"
            }
            "stop" => "stop: the server ignored ignore_eos",
            "abort" | "error" => "abort or error: the server gave up on the answer",
            "none" => "no finish_reason: the server did not say why",
            _ => "an unusual finish_reason: see requests.jsonl",
        })
        .fold(Vec::<&str>::new(), |mut kept, cause| {
            if !kept.contains(&cause) {
                kept.push(cause);
            }
            kept
        })
        .join("; ")
}

/// `7 of 11 answers were cut short: 19–1424 of the 800–1835 tokens asked (finish_reason length 6, stop 1) — …`;
/// `None` when no answer was.
fn truncation_text(overall: &Summary) -> Option<String> {
    let cut = overall.truncation.as_ref()?;
    let mut reasons: Vec<(&String, &u64)> = cut.finish_reasons.iter().collect();
    reasons.sort_by(|a, b| b.1.cmp(a.1).then_with(|| a.0.cmp(b.0)));
    let reasons: Vec<String> = reasons
        .iter()
        .map(|(reason, count)| format!("{reason} {count}"))
        .collect();
    Some(format!(
        "{}: {} of the {} tokens asked (finish_reason {}). {}. Not counted as successes, nor in the latency \
         figures",
        cut_short_count(cut.requests, overall.requests.total),
        tokens_range(&cut.output_tokens),
        tokens_range(&cut.max_tokens),
        reasons.join(", "),
        truncation_causes(&cut.finish_reasons),
    ))
}

/// What a killed run's summary says of it: `incomplete: the launcher was killed (or crashed) before the run
/// ended; 40 requests recorded of 52 sent (100 planned); 12 requests were in flight when the run was killed; their
/// answers are lost`. The terminal, report.html and `llmbench report` all say it in these words.
pub fn killed_run(run: &Completion, lost_in_flight: u64) -> String {
    let mut text = format!(
        "incomplete: the launcher was killed (or crashed) before the run ended; {} requests recorded",
        run.finished
    );
    if let Some(sent) = run.sent {
        text.push_str(&format!(" of {sent} sent"));
    }
    if let Some(planned) = run.planned {
        text.push_str(&format!(" ({planned} planned)"));
    }
    match (lost_in_flight, run.sent) {
        (0, Some(_)) => text.push_str("; none was in flight when the run was killed"),
        (0, None) => text.push_str(
            "; how many were in flight is unknown (the run has no sent log), and the figures cover only what was \
             recorded",
        ),
        (1, _) => text.push_str(
            "; 1 request was in flight when the run was killed; its answer is lost (lost_in_flight.jsonl)",
        ),
        (n, _) => text.push_str(&format!(
            "; {n} requests were in flight when the run was killed; their answers are lost (lost_in_flight.jsonl)"
        )),
    }
    text
}

/// What a run that ended says of the requests it sent and has no record of: those whose records the disk refused
/// (a run that ended counts none otherwise). Empty when there are none.
pub fn unrecorded(lost: u64) -> String {
    match lost {
        0 => String::new(),
        1 => "; 1 request sent has no record: the records file refused it (lost_in_flight.jsonl)"
            .to_owned(),
        n => format!(
            "; {n} requests sent have no record: the records file refused them (lost_in_flight.jsonl)"
        ),
    }
}

/// How the run ended and what it answers, good or bad news first.
fn verdict(meta: &RunMeta, summary: &RunSummary) -> (Tone, String) {
    let overall = &summary.overall;
    let counts = &overall.requests;
    let (mut tone, mut text) = match &summary.run {
        Some(run) if run.state == RunState::Incomplete => {
            (Tone::Bad, killed_run(run, counts.lost_in_flight))
        }
        Some(run) => {
            let why = run
                .stopped
                .map(|r| r.to_string())
                .or_else(|| meta.end.as_ref().and_then(|e| e.failed.clone()))
                .unwrap_or_else(|| "no reason recorded".to_owned());
            let sent = run.sent.map_or_else(|| "?".to_owned(), |s| s.to_string());
            let planned = run
                .planned
                .map(|p| format!(" of {p} planned"))
                .unwrap_or_default();
            (
                Tone::Bad,
                format!(
                    "stopped early ({why}): {sent} requests sent{planned}{}",
                    unrecorded(counts.lost_in_flight)
                ),
            )
        }
        None if counts.total == 0 => (Tone::Bad, "no request was sent".to_owned()),
        None if counts.failed == 0 && counts.truncated == 0 => (
            Tone::Good,
            format!("completed: all {} requests succeeded", counts.total),
        ),
        None if counts.failed == 0 => (
            Tone::Warn,
            format!(
                "completed: {}",
                cut_short_count(counts.truncated, counts.total)
            ),
        ),
        None => {
            let mut text = format!(
                "completed: {} of {} requests failed",
                counts.failed, counts.total
            );
            if counts.truncated > 0 {
                text.push_str(&format!(", {} cut short", counts.truncated));
            }
            (Tone::Warn, text)
        }
    };
    if counts.total > 0 && counts.succeeded == 0 {
        tone = Tone::Bad;
        let why = top_error(overall).or_else(|| {
            overall.truncation.as_ref().map(|cut| {
                format!(
                    "{} ({} of the {} tokens asked)",
                    cut_short_count(cut.requests, counts.total),
                    tokens_range(&cut.output_tokens),
                    tokens_range(&cut.max_tokens)
                )
            })
        });
        text = format!(
            "failed: none of the {} requests succeeded{}",
            counts.total,
            why.map(|e| format!(" — {e}")).unwrap_or_default()
        );
        if let Some(run) = &summary.run {
            text.push_str(&format!(
                "; the run {}",
                match run.state {
                    RunState::Incomplete => "is incomplete".to_owned(),
                    _ => format!(
                        "stopped early ({})",
                        run.stopped
                            .map_or_else(|| "-".to_owned(), |r| r.to_string())
                    ),
                }
            ));
        }
    }
    if let Some(capacity) = &summary.capacity {
        let (capacity_tone, capacity_text) = capacity_verdict(capacity);
        text.push_str("; ");
        text.push_str(&capacity_text);
        tone = tone.worst(capacity_tone);
    }
    if let Some(v) = &summary.verdict {
        text.push_str(&format!("; {} {}", v.by, v.result));
        if !v.failed_checks.is_empty() {
            text.push_str(&format!(" (failed: {})", v.failed_checks.join(", ")));
        }
        tone = tone.worst(if v.passed { Tone::Good } else { Tone::Bad });
    }
    if let Some(g) = &overall.goodput {
        text.push_str(&format!(
            "; goodput {}% ({} of {} successful requests met every objective)",
            num(g.percentage),
            g.good,
            g.judged
        ));
    }
    (tone, text)
}

/// The most frequent error with its sample message: `connect: cannot connect to …`.
fn top_error(overall: &Summary) -> Option<String> {
    let (key, _) = error_parts(overall).into_iter().next()?;
    Some(match overall.error_samples.get(&key) {
        Some(sample) => format!("{key}: {sample}"),
        None => key,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::RUN_META_SCHEMA;
    use llmbench_metrics::metrics::{Completion, Goodput, RunInfo, RunSummary};
    use llmbench_model::record::{ErrorClass, RequestError, RequestRecord};

    const MS: u64 = 1_000_000;

    fn meta(stages: Vec<StageMeta>) -> RunMeta {
        serde_json::from_value(serde_json::json!({
            "schema": RUN_META_SCHEMA,
            "run_id": "r",
            "harness": "inference-perf",
            "profile": "sanity_random",
            "model": "m",
            "endpoint": "http://127.0.0.1:9",
            "started_at": "2026-11-27T00:00:00Z",
            "t0_unix_ns": 0,
            "stages": [],
            "llmbench_version": "0",
        }))
        .map(|mut m: RunMeta| {
            m.stages = stages;
            m
        })
        .unwrap()
    }

    fn rate_stage(rate: f64) -> StageMeta {
        StageMeta {
            load: Some(LoadKind::Constant),
            rate: Some(rate),
            ..StageMeta::default()
        }
    }

    /// A request sent at `sent` ms that took 100 ms, built with `input` prompt tokens and `max_tokens` 50; the
    /// server counts `input + 7` prompt tokens and `output` completion tokens.
    fn ok(stage: u32, sent: u64, input: u32, output: u32) -> RequestRecord {
        RequestRecord::builder(sent)
            .stage(stage)
            .sent(sent * MS)
            .end((sent + 100) * MS)
            .input_tokens(input)
            .max_tokens(50)
            .ok()
            .usage(input + 7, output)
            .content_at((sent + 50) * MS, output)
            .build()
    }

    fn refused(stage: u32, sent: u64) -> RequestRecord {
        let mut r = ok(stage, sent, 100, 0);
        r.http_status = None;
        r.usage = None;
        r.chunks.clear();
        r.error = Some(Box::new(RequestError {
            class: ErrorClass::Connect,
            message: "cannot connect to 127.0.0.1:9: Connection refused (os error 111)".into(),
        }));
        r
    }

    fn summary(records: &[RequestRecord], rates: &[Option<f64>]) -> RunSummary {
        RunSummary::from_records(RunInfo::default(), records, rates)
    }

    fn text_of(headline: &Headline, label: &str) -> String {
        headline
            .lines
            .iter()
            .find(|l| l.label == label)
            .map(|l| l.text.clone())
            .unwrap_or_else(|| panic!("no {label} line in {headline:?}"))
    }

    #[test]
    fn the_run_line_names_the_engine_and_the_model_that_answered_when_it_is_not_the_one_asked() {
        let records = [ok(0, 0, 100, 30)];
        let mut meta = meta(vec![rate_stage(1.0)]);
        meta.server = serde_json::from_value(serde_json::json!({
            "engine": "llama.cpp",
            "version": "b6123-abc",
            "models": [{"id": "/models/tiny.gguf"}],
            "probes": [],
        }))
        .expect("a server record");
        meta.preflight = Some(crate::report::PreflightMeta {
            model: Some("m".to_owned()),
            server_model: Some("/models/tiny.gguf".to_owned()),
            ..Default::default()
        });
        let h = headline(&meta, &summary(&records, &[Some(1.0)]));
        assert_eq!(
            text_of(&h, "run"),
            "inference-perf sanity_random · model m (served: /models/tiny.gguf) · http://127.0.0.1:9 · llama.cpp \
             b6123-abc"
        );
        // The model asked is the one that answered: nothing more is said of it; no engine known, none named.
        meta.preflight = Some(crate::report::PreflightMeta {
            server_model: Some("m".to_owned()),
            ..Default::default()
        });
        meta.server = None;
        let h = headline(&meta, &summary(&records, &[Some(1.0)]));
        assert_eq!(
            text_of(&h, "run"),
            "inference-perf sanity_random · model m · http://127.0.0.1:9"
        );
    }

    #[test]
    fn a_clean_run_says_what_ran_its_lengths_its_load_and_that_it_completed() {
        // Four requests 1 s apart (sent over 3 s: 4/3 = 1.33 req/s), each done in 100 ms; the window is
        // 0 → 3.1 s, so 4/3.1 = 1.29 req/s served and (30+40+50+50)/3.1 = 54.8 output tok/s.
        let records = [
            ok(0, 0, 100, 30),
            ok(0, 1000, 100, 40),
            ok(0, 2000, 100, 50),
            ok(0, 3000, 100, 50),
        ];
        let meta = meta(vec![rate_stage(1.0)]);
        let h = headline(&meta, &summary(&records, &[Some(1.0)]));
        assert_eq!(
            text_of(&h, "run"),
            "inference-perf sanity_random · model m · http://127.0.0.1:9"
        );
        // One asked length; the server counts 7 more (a chat template's).
        assert_eq!(
            text_of(&h, "input"),
            "asked 100 tokens · measured 107 tokens"
        );
        // Outputs 30, 40, 50, 50: mean 42.5, p50 45, p99 at index 2.97 → 50.
        assert_eq!(
            text_of(&h, "output"),
            "asked max_tokens 50 tokens · measured mean 42.5 (p50 45.0, p99 50.0)"
        );
        assert_eq!(
            text_of(&h, "load"),
            "asked 1.00 req/s constant → sent 1.33 req/s → served 1.29 req/s, 54.8 output tok/s"
        );
        assert_eq!(text_of(&h, "errors"), "none");
        assert_eq!(
            text_of(&h, "verdict"),
            "completed: all 4 requests succeeded"
        );
        assert_eq!(h.tone(), Tone::Good);
        // As text: labels padded to the longest ("verdict"), two spaces, the text.
        let text = h.to_text();
        assert!(text.starts_with("run      inference-perf"), "{text}");
        assert!(
            text.ends_with("verdict  completed: all 4 requests succeeded\n"),
            "{text}"
        );
    }

    #[test]
    fn a_run_where_everything_failed_says_why_with_the_first_message() {
        let records = [refused(0, 0), refused(0, 1000), refused(0, 2000)];
        let h = headline(
            &meta(vec![rate_stage(1.0)]),
            &summary(&records, &[Some(1.0)]),
        );
        assert_eq!(
            text_of(&h, "errors"),
            "3 of 3 requests failed (100%): connect 3"
        );
        assert_eq!(
            text_of(&h, "verdict"),
            "failed: none of the 3 requests succeeded — connect: cannot connect to 127.0.0.1:9: Connection \
             refused (os error 111)"
        );
        assert_eq!(h.tone(), Tone::Bad);
        assert_eq!(
            text_of(&h, "input"),
            "asked 100 tokens · measured: none (no request succeeded)"
        );
        // Sent 3 over 2 s.
        assert_eq!(
            text_of(&h, "load"),
            "asked 1.00 req/s constant → sent 1.50 req/s → served nothing"
        );
    }

    /// `ok`, asking exactly 50 tokens (`ignore_eos`) and ending as the server said.
    fn exact(sent: u64, output: u32, finish: &str) -> RequestRecord {
        let mut r = ok(0, sent, 100, output);
        r.ignore_eos = true;
        r.finish_reason = Some(llmbench_model::record::FinishReason::from_server(finish));
        r
    }

    #[test]
    fn answers_cut_short_get_a_line_of_their_own_and_temper_the_verdict() {
        let records = [
            exact(0, 50, "length"),
            exact(1000, 19, "length"),
            exact(2000, 42, "length"),
            exact(3000, 7, "stop"),
        ];
        let h = headline(
            &meta(vec![rate_stage(1.0)]),
            &summary(&records, &[Some(1.0)]),
        );
        assert_eq!(text_of(&h, "errors"), "none");
        assert_eq!(
            text_of(&h, "cut short"),
            "3 of 4 answers were cut short: 7–42 of the 50 tokens asked (finish_reason length 2, stop 1). \
             length: the server stopped before max_tokens at a limit of its own, likely its context window \
             (prompt + max_tokens is larger: raise vLLM's --max-model-len or llama.cpp's -c per slot, or ask for \
             fewer tokens); stop: the server ignored ignore_eos. Not counted as successes, nor in the latency \
             figures"
        );
        assert_eq!(
            text_of(&h, "verdict"),
            "completed: 3 of 4 answers were cut short"
        );
        assert_eq!(h.tone(), Tone::Warn);
        // Only answers cut short: nothing succeeded, and the verdict says why.
        let h = headline(
            &meta(vec![rate_stage(1.0)]),
            &summary(&records[1..3], &[Some(1.0)]),
        );
        assert_eq!(
            text_of(&h, "verdict"),
            "failed: none of the 2 requests succeeded — 2 of 2 answers were cut short (19–42 of the 50 tokens \
             asked)"
        );
        assert_eq!(h.tone(), Tone::Bad);
        // With failures too, both are counted.
        let h = headline(
            &meta(vec![rate_stage(1.0)]),
            &summary(
                &[records[0].clone(), records[1].clone(), refused(0, 4000)],
                &[Some(1.0)],
            ),
        );
        assert_eq!(
            text_of(&h, "verdict"),
            "completed: 1 of 3 requests failed, 1 cut short"
        );
    }

    #[test]
    fn errors_list_the_three_commonest_classes_and_count_the_rest() {
        let mut records = vec![ok(0, 0, 100, 10)];
        let mut fail = |class: ErrorClass, status: Option<u16>, n: u64| {
            for i in 0..n {
                let mut r = refused(0, 10 + i);
                r.error.as_mut().unwrap().class = class;
                r.http_status = status;
                records.push(r);
            }
        };
        fail(ErrorClass::HttpStatus, Some(429), 3);
        fail(ErrorClass::Timeout, None, 1);
        fail(ErrorClass::HttpStatus, Some(500), 2);
        fail(ErrorClass::StreamCut, Some(200), 1);
        let h = headline(&meta(vec![rate_stage(1.0)]), &summary(&records, &[]));
        // 7 of 8 failed; by count, ties by name: http_429 3, http_500 2, stream_cut 1, timeout 1.
        assert_eq!(
            text_of(&h, "errors"),
            "7 of 8 requests failed (87.5%): http_429 3, http_500 2, stream_cut 1, 1 more"
        );
        assert_eq!(text_of(&h, "verdict"), "completed: 7 of 8 requests failed");
        assert_eq!(h.tone(), Tone::Warn);
    }

    #[test]
    fn several_stages_show_the_range_asked_and_the_most_served() {
        // Stage 0 at 1 req/s: two requests 1 s apart; stage 1 at 4 req/s: five requests 250 ms apart.
        let mut records = vec![ok(0, 0, 100, 10), ok(0, 1000, 100, 10)];
        records.extend((0..5).map(|i| ok(1, 5000 + i * 250, 100, 10)));
        let meta = meta(vec![rate_stage(1.0), rate_stage(4.0)]);
        let s = summary(&records, &[Some(1.0), Some(4.0)]);
        // Stage 1 serves 5 in 5000 → 6100 ms: 5 / 1.1 s = 4.55 req/s.
        assert_eq!(
            text_of(&headline(&meta, &s), "load"),
            "2 stages, asked 1.00 to 4.00 req/s; served up to 4.55 req/s (stage 1)"
        );
        // Stages of different kinds (a guidellm sweep) are named first and last.
        let sweep = self::meta(vec![
            StageMeta {
                load: Some(LoadKind::Synchronous),
                ..StageMeta::default()
            },
            rate_stage(4.0),
        ]);
        assert!(
            text_of(&headline(&sweep, &s), "load")
                .starts_with("2 stages, asked one at a time (synchronous) … 4.00 req/s constant;")
        );
    }

    #[test]
    fn a_stopped_run_says_why_and_goodput_is_part_of_the_verdict() {
        let records = [ok(0, 0, 100, 10), ok(0, 1000, 100, 10)];
        let mut s = summary(&records, &[Some(1.0)]);
        s.run = Some(Completion {
            state: RunState::Interrupted,
            stopped: Some(llmbench_engine::engine::StopReason::Interrupted {
                signal: llmbench_core::summary::v1::Signal::Sigterm,
            }),
            planned: Some(30),
            sent: Some(2),
            finished: 2,
        });
        s.overall.goodput = Some(Goodput {
            good: 1,
            judged: 2,
            percentage: 50.0,
            requests_per_s: 0.9,
            attainment_percentage: Default::default(),
        });
        let h = headline(&meta(vec![rate_stage(1.0)]), &s);
        assert_eq!(
            text_of(&h, "verdict"),
            "stopped early (interrupted by SIGTERM): 2 requests sent of 30 planned; goodput 50.0% (1 of 2 \
             successful requests met every objective)"
        );
        assert_eq!(h.tone(), Tone::Bad);
    }

    #[test]
    fn a_concurrency_stage_is_asked_as_requests_in_flight() {
        let stage = StageMeta {
            load: Some(LoadKind::Concurrent),
            concurrency: Some(8),
            ..StageMeta::default()
        };
        assert_eq!(stage_load(&stage), "8 in flight");
        let throughput = StageMeta {
            load: Some(LoadKind::Throughput),
            ..StageMeta::default()
        };
        assert_eq!(stage_load(&throughput), "all at once (throughput)");
    }

    #[test]
    fn a_nop_run_says_it_sent_no_requests_without_calling_it_a_failure() {
        let mut meta = meta(Vec::new());
        meta.harness = Harness::Nop;
        let h = headline(&meta, &summary(&[], &[]));
        assert_eq!(h.lines.len(), 2);
        assert_eq!(h.tone(), Tone::Plain);
        assert!(text_of(&h, "verdict").starts_with("completed: the nop harness sends no requests"));
    }
}
