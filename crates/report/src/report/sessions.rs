//! inference-perf's session lifecycle reports for a `trace_session_replay` (`inference_perf/reportgen/base.py`
//! `ReportGenerator.generate_session_reports`, `summarize_sessions`, `_enrich_sessions`):
//! `summary_session_lifecycle_metrics.json` (all sessions), `stage_{id}_session_lifecycle_metrics.json` (a stage's,
//! `stage_metadata` first) and `per_session_lifecycle_metrics.json` (each `SessionLifecycleMetric`).
//!
//! The engine records each session that ended ([`SessionRecord`], kept in run.json's stage ends); its token
//! totals, first error and cache totals come from its calls' request records (`conversation.id`), gathered here
//! request by request so a run read back from disk gives the same files. Tool-call substitution
//! (`bad_tool_call_handling`) is refused by the profile parser, so its fields are written as upstream writes them
//! with handling `none`: `null` per session, 0 sessions and a 0 count in the summaries.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::inference_perf::error_type;
use super::meta::RunMeta;
use super::secs;
use llmbench_metrics::metrics::percentile_linear;
use llmbench_model::record::{RequestRecord, SessionRecord};

/// The whole run's sessions.
pub(crate) const SUMMARY_SESSION_FILE: &str = "summary_session_lifecycle_metrics.json";

/// `report.session_lifecycle.per_session`'s file.
pub(crate) const PER_SESSION_FILE: &str = "per_session_lifecycle_metrics.json";

/// A stage's sessions: `stage_N_session_lifecycle_metrics.json`.
pub(crate) fn stage_session_file(stage: u32) -> String {
    format!("stage_{stage}_session_lifecycle_metrics.json")
}

/// What a session's request records add to it (`_enrich_sessions`).
#[derive(Debug, Clone, Default, PartialEq)]
struct Totals {
    input: u64,
    output: u64,
    /// The first failed call's `(error_type, error_msg)`, in the order the calls finished.
    error: Option<(String, String)>,
    /// `(cached, prompt)` summed over the successful calls whose usage reported cached tokens; `None` when none
    /// did (upstream keeps "never reported" apart from 0).
    cache: Option<(u64, u64)>,
}

/// Each session's [`Totals`], by conversation id (upstream keys them by session id, one to one with it).
#[derive(Debug, Clone, Default)]
pub(crate) struct SessionTally {
    by_session: BTreeMap<u32, Totals>,
}

impl SessionTally {
    /// Counts a measured request of a session. A failed call adds no tokens: upstream's `process_failure`
    /// returns `input_tokens=0` and `output_tokens=0` for it.
    pub(crate) fn add(&mut self, r: &RequestRecord) {
        let Some(of) = r.conversation else { return };
        let totals = self.by_session.entry(of.id).or_default();
        if let Some(class) = r.error_class() {
            if totals.error.is_none() {
                let message = r.error.as_ref().map_or("", |e| e.message.as_str());
                totals.error = Some((error_type(r, class), message.to_owned()));
            }
            return;
        }
        totals.input += u64::from(r.prompt_tokens());
        totals.output += u64::from(r.output_tokens());
        // `extract_cached_prompt_tokens`: both sides from the same usage, cached clamped to [0, prompt], nothing
        // when the prompt count is 0.
        if let Some(usage) = r.usage
            && let Some(cached) = usage.cached_tokens
            && usage.prompt_tokens > 0
        {
            let prompt = u64::from(usage.prompt_tokens);
            let (c, p) = totals.cache.unwrap_or((0, 0));
            totals.cache = Some((c + u64::from(cached).min(prompt), p + prompt));
        }
    }
}

/// A session with what its requests added: upstream's enriched `SessionLifecycleMetric`.
#[derive(Debug, Clone, PartialEq)]
struct Session<'a> {
    record: &'a SessionRecord,
    totals: Totals,
    /// `{error_type, error_msg}`: the first request error, else the reason a skipped call gave.
    error: Option<(String, String)>,
    success: bool,
}

impl Session<'_> {
    fn duration_s(&self) -> f64 {
        secs(self.record.end_ns) - secs(self.record.start_ns)
    }

    /// `SessionLifecycleMetric.model_dump()`, fields in upstream's order.
    fn to_json(&self) -> Value {
        let r = self.record;
        json!({
            "session_id": r.name,
            "stage_id": r.stage,
            "file_path": r.file,
            "start_time": secs(r.start_ns),
            "end_time": secs(r.end_ns),
            "duration_sec": self.duration_s(),
            "num_events": r.num_events,
            "num_events_completed": r.completed,
            "num_events_cancelled": r.cancelled,
            "n_recorded_substitutions": null,
            "recorded_substitution_event_ids": null,
            "success": self.success,
            "error": self.error.as_ref().map(|(t, m)| json!({"error_type": t, "error_msg": m})),
            "total_input_tokens": self.totals.input,
            "total_output_tokens": self.totals.output,
            "total_cached_tokens": self.totals.cache.map(|(c, _)| c),
            "total_cacheable_input_tokens": self.totals.cache.map(|(_, p)| p),
        })
    }
}

/// `_enrich_sessions`: a request error replaces the skip reason; a session succeeded when every call completed
/// and it has no error.
fn enrich<'a>(record: &'a SessionRecord, tally: &SessionTally) -> Session<'a> {
    let totals = tally
        .by_session
        .get(&record.id)
        .cloned()
        .unwrap_or_default();
    let error = totals.error.clone().or_else(|| {
        record
            .failure
            .as_ref()
            .map(|why| ("SessionReplayError".to_owned(), why.clone()))
    });
    let success = record.completed == record.num_events && error.is_none();
    Session {
        record,
        totals,
        error,
        success,
    }
}

/// inference-perf's `summarize` of a plain list: `mean`, `min`, `max`, then each percentile (numpy's linear
/// method) as `median` for 50 and `p{p:g}` otherwise; `null` for an empty list.
fn summarize(mut items: Vec<f64>, percentiles: &[f64]) -> Value {
    items.retain(|v| !v.is_nan());
    if items.is_empty() {
        return Value::Null;
    }
    items.sort_by(f64::total_cmp);
    let mean = items.iter().sum::<f64>() / items.len() as f64;
    let mut out = Map::new();
    out.insert("mean".into(), json!(mean));
    out.insert("min".into(), json!(items[0]));
    out.insert("max".into(), json!(items[items.len() - 1]));
    for &p in percentiles {
        let key = if p == 50.0 {
            "median".to_owned()
        } else {
            format!("p{}", super::percentile_word(p))
        };
        out.insert(key, json!(percentile_linear(&items, p / 100.0)));
    }
    Value::Object(out)
}

/// `summarize_sessions`, keys in upstream's order.
fn summarize_sessions(sessions: &[Session<'_>], percentiles: &[f64]) -> Map<String, Value> {
    let n = sessions.len();
    let sum = |f: fn(&SessionRecord) -> u32| -> u64 {
        sessions.iter().map(|s| u64::from(f(s.record))).sum()
    };
    let sessions_per_second = match (
        sessions.iter().map(|s| s.record.start_ns).min(),
        sessions.iter().map(|s| s.record.end_ns).max(),
    ) {
        (Some(first), Some(last)) if last > first => n as f64 / (secs(last) - secs(first)),
        _ => 0.0,
    };
    let caches: Vec<(u64, u64)> = sessions.iter().filter_map(|s| s.totals.cache).collect();
    let per_session_hit: Vec<f64> = caches
        .iter()
        .filter(|(_, p)| *p > 0)
        .map(|&(c, p)| 100.0 * c as f64 / p as f64)
        .collect();
    let cached_total: u64 = caches.iter().map(|(c, _)| c).sum();
    let prompt_total: u64 = caches.iter().map(|(_, p)| p).sum();
    let of = |f: &dyn Fn(&Session<'_>) -> f64| sessions.iter().map(f).collect::<Vec<f64>>();
    let mut out = Map::new();
    out.insert("num_sessions".into(), json!(n));
    out.insert(
        "num_sessions_succeeded".into(),
        json!(sessions.iter().filter(|s| s.success).count()),
    );
    out.insert(
        "num_sessions_failed".into(),
        json!(sessions.iter().filter(|s| !s.success).count()),
    );
    out.insert("total_events".into(), json!(sum(|r| r.num_events)));
    out.insert("total_events_completed".into(), json!(sum(|r| r.completed)));
    out.insert("total_events_cancelled".into(), json!(sum(|r| r.cancelled)));
    out.insert("sessions_with_recorded_substitution".into(), json!(0));
    out.insert(
        "total_recorded_substitutions".into(),
        json!({"count": 0, "messages": []}),
    );
    out.insert("sessions_per_second".into(), json!(sessions_per_second));
    out.insert(
        "session_duration_sec".into(),
        summarize(of(&|s| s.duration_s()), percentiles),
    );
    out.insert(
        "num_events".into(),
        summarize(of(&|s| f64::from(s.record.num_events)), percentiles),
    );
    out.insert(
        "num_events_cancelled".into(),
        summarize(of(&|s| f64::from(s.record.cancelled)), percentiles),
    );
    out.insert(
        "total_input_tokens".into(),
        summarize(of(&|s| s.totals.input as f64), percentiles),
    );
    out.insert(
        "total_output_tokens".into(),
        summarize(of(&|s| s.totals.output as f64), percentiles),
    );
    out.insert(
        "total_cached_tokens".into(),
        summarize(caches.iter().map(|&(c, _)| c as f64).collect(), percentiles),
    );
    out.insert(
        "total_cacheable_input_tokens".into(),
        summarize(caches.iter().map(|&(_, p)| p as f64).collect(), percentiles),
    );
    out.insert(
        "sessions_with_cache_info".into(),
        json!(per_session_hit.len()),
    );
    out.insert(
        "kv_cache_hit_percent".into(),
        if prompt_total > 0 {
            json!(100.0 * cached_total as f64 / prompt_total as f64)
        } else {
            Value::Null
        },
    );
    out.insert(
        "kv_cache_hit_per_session_percent".into(),
        summarize(per_session_hit, percentiles),
    );
    out
}

/// A stage's `stage_metadata` (`generate_session_reports`): `COMPLETED` when the stage ran to its end, else
/// `TIMED_OUT` when it lasted its `timeout`, else `FAILED`.
fn stage_metadata(meta: &RunMeta, stage: u32) -> Option<Value> {
    let end = meta.end.as_ref()?.stages.get(stage as usize)?;
    let asked = meta.stages.get(stage as usize).copied().unwrap_or_default();
    let actual = secs(end.end_ns) - secs(end.start_ns);
    let status = match (end.stopped, asked.max_duration_s) {
        (None, _) => "COMPLETED",
        (Some(_), Some(timeout)) if actual >= timeout => "TIMED_OUT",
        (Some(_), _) => "FAILED",
    };
    Some(json!({
        "stage_id": stage,
        "status": status,
        "timeout_configured": asked.max_duration_s,
        "actual_duration": actual,
        "concurrent_sessions": asked.concurrency.unwrap_or(0),
        "session_rate": asked.session_rate.filter(|r| *r > 0.0),
    }))
}

/// Whether the run recorded any session (a trace session replay that got one to its end).
pub(crate) fn has_sessions(meta: &RunMeta) -> bool {
    meta.end
        .as_ref()
        .is_some_and(|end| end.stages.iter().any(|s| !s.sessions.is_empty()))
}

/// The session reports `meta.report` asks for, as `(file name, contents)` in upstream's order (summary, each
/// stage, per session); none when no session was recorded (`if not session_metrics: return reports`).
pub(crate) fn session_reports(meta: &RunMeta, tally: &SessionTally) -> Vec<(String, Value)> {
    let Some(end) = &meta.end else {
        return Vec::new();
    };
    let sessions: Vec<Session<'_>> = end
        .stages
        .iter()
        .flat_map(|stage| &stage.sessions)
        .map(|record| enrich(record, tally))
        .collect();
    if sessions.is_empty() {
        return Vec::new();
    }
    let percentiles = &meta.report.percentiles;
    let mut out = Vec::new();
    if meta.report.session_summary {
        out.push((
            SUMMARY_SESSION_FILE.to_owned(),
            Value::Object(summarize_sessions(&sessions, percentiles)),
        ));
    }
    if meta.report.session_per_stage {
        let mut stages: BTreeMap<u32, Vec<Session<'_>>> = BTreeMap::new();
        for s in &sessions {
            stages.entry(s.record.stage).or_default().push(s.clone());
        }
        for (stage, bucket) in &stages {
            let summary = summarize_sessions(bucket, percentiles);
            let value = match stage_metadata(meta, *stage) {
                Some(metadata) => {
                    let mut first = Map::new();
                    first.insert("stage_metadata".into(), metadata);
                    first.extend(summary);
                    first
                }
                None => summary,
            };
            out.push((stage_session_file(*stage), Value::Object(value)));
        }
    }
    if meta.report.session_per_session {
        out.push((
            PER_SESSION_FILE.to_owned(),
            Value::Array(sessions.iter().map(Session::to_json).collect()),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::meta::{RunEnd, RunState, StageEnd, StageMeta};
    use llmbench_model::record::{ErrorClass, RequestError, Usage};

    fn session(id: u32, start_s: u64, end_s: u64, events: u32) -> SessionRecord {
        SessionRecord {
            id,
            name: format!("trace{id}_s{id}"),
            file: format!("/traces/s{id}.json"),
            stage: 0,
            start_ns: start_s * 1_000_000_000,
            end_ns: end_s * 1_000_000_000,
            num_events: events,
            completed: events,
            cancelled: 0,
            failure: None,
        }
    }

    fn call(id: u32, prompt: u32, completion: u32, cached: Option<u32>) -> RequestRecord {
        RequestRecord::builder(0)
            .end(1)
            .input_tokens(prompt)
            .streaming(false)
            .ok()
            .usage_of(Usage {
                prompt_tokens: prompt,
                completion_tokens: completion,
                cached_tokens: cached,
                reasoning_tokens: None,
            })
            .turn(id, 0)
            .build()
    }

    fn http_500(id: u32) -> RequestRecord {
        RequestRecord {
            http_status: Some(500),
            usage: None,
            error: Some(Box::new(RequestError {
                class: ErrorClass::HttpStatus,
                message: "boom".to_owned(),
            })),
            ..call(id, 999, 0, None)
        }
    }

    /// Session 0: 3 calls, 10 s → 12 s, all answered. Session 1: 4 calls, 11 s → 15 s, one answered, then one
    /// failed with HTTP 500 (so 4 − 1 − 1 = 2 cancelled). Stage 0 ran 9 s → 16 s to its end.
    fn run(percentiles: Vec<f64>, per_session: bool) -> (RunMeta, SessionTally) {
        let mut meta = crate::report::tests::meta();
        meta.report.percentiles = percentiles;
        meta.report.session_per_session = per_session;
        meta.stages = vec![StageMeta {
            concurrency: Some(2),
            max_duration_s: Some(60.0),
            ..StageMeta::default()
        }];
        let failed = SessionRecord {
            completed: 1,
            cancelled: 2,
            ..session(1, 11, 15, 4)
        };
        meta.end = Some(RunEnd {
            state: RunState::Complete,
            stopped: None,
            planned: None,
            sent: 5,
            finished: 5,
            stages: vec![StageEnd {
                began_ns: None,
                start_ns: 9_000_000_000,
                end_ns: 16_000_000_000,
                stopped: None,
                sessions: vec![session(0, 10, 12, 3), failed],
            }],
            failed: None,
        });
        let mut tally = SessionTally::default();
        for r in [
            call(0, 100, 10, Some(50)),
            call(0, 200, 20, None),
            call(1, 400, 40, Some(0)),
            http_500(1),
            call(0, 300, 30, Some(100)),
        ] {
            tally.add(&r);
        }
        (meta, tally)
    }

    fn close(v: &Value, path: &str, expected: f64) {
        let got = v.pointer(path).and_then(Value::as_f64);
        assert!(
            got.is_some_and(|g| (g - expected).abs() < 1e-9),
            "{path}: {got:?}, expected {expected}"
        );
    }

    #[test]
    fn the_summary_counts_and_summarises_sessions_as_summarize_sessions_does() {
        let (meta, tally) = run(vec![10.0, 50.0, 90.0], false);
        let files = session_reports(&meta, &tally);
        let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                SUMMARY_SESSION_FILE,
                "stage_0_session_lifecycle_metrics.json"
            ]
        );
        let s = &files[0].1;
        assert_eq!(s["num_sessions"], 2);
        // Session 1 failed (a call failed, and 1 of 4 completed).
        assert_eq!(s["num_sessions_succeeded"], 1);
        assert_eq!(s["num_sessions_failed"], 1);
        assert_eq!(s["total_events"], 7);
        assert_eq!(s["total_events_completed"], 4);
        assert_eq!(s["total_events_cancelled"], 2);
        assert_eq!(s["sessions_with_recorded_substitution"], 0);
        assert_eq!(
            s["total_recorded_substitutions"],
            json!({"count": 0, "messages": []})
        );
        // 2 sessions over first start 10 s → last end 15 s.
        close(s, "/sessions_per_second", 0.4);
        // Durations [2, 4]: mean 3; numpy linear p10 = 2 + 0.1·2 = 2.2, median 3, p90 = 2 + 0.9·2 = 3.8.
        close(s, "/session_duration_sec/mean", 3.0);
        close(s, "/session_duration_sec/min", 2.0);
        close(s, "/session_duration_sec/max", 4.0);
        close(s, "/session_duration_sec/p10", 2.2);
        close(s, "/session_duration_sec/median", 3.0);
        close(s, "/session_duration_sec/p90", 3.8);
        // Events [3, 4]: p90 = 3.9; cancelled [0, 2]: mean 1, p90 1.8.
        close(s, "/num_events/p90", 3.9);
        close(s, "/num_events_cancelled/mean", 1.0);
        close(s, "/num_events_cancelled/p90", 1.8);
        // Inputs: session 0 100+200+300 = 600, session 1 400 (its failed call adds 0) → [400, 600]: p90 580.
        close(s, "/total_input_tokens/mean", 500.0);
        close(s, "/total_input_tokens/p90", 580.0);
        // Outputs: 60 and 40.
        close(s, "/total_output_tokens/mean", 50.0);
        // Cache: session 0 (50+100 of 100+300) = (150, 400), session 1 (0 of 400): both report cache info.
        close(s, "/total_cached_tokens/mean", 75.0);
        close(s, "/total_cacheable_input_tokens/mean", 400.0);
        assert_eq!(s["sessions_with_cache_info"], 2);
        // 150 of 800 = 18.75 %; per session [0, 37.5]: p90 = 0.9·37.5 = 33.75.
        close(s, "/kv_cache_hit_percent", 18.75);
        close(s, "/kv_cache_hit_per_session_percent/max", 37.5);
        close(s, "/kv_cache_hit_per_session_percent/p90", 33.75);
        let keys: Vec<&str> = s
            .as_object()
            .map(|o| o.keys().map(String::as_str).collect())
            .unwrap_or_default();
        assert_eq!(keys[0], "num_sessions");
        assert_eq!(keys[keys.len() - 1], "kv_cache_hit_per_session_percent");
    }

    #[test]
    fn a_stage_report_starts_with_its_metadata() {
        let (meta, tally) = run(vec![50.0], false);
        let files = session_reports(&meta, &tally);
        let stage = &files[1].1;
        let first = stage.as_object().and_then(|o| o.keys().next().cloned());
        assert_eq!(first.as_deref(), Some("stage_metadata"));
        // Ran 9 s → 16 s to its end: COMPLETED, 7 s; no session_rate → null.
        assert_eq!(
            stage["stage_metadata"],
            json!({
                "stage_id": 0,
                "status": "COMPLETED",
                "timeout_configured": 60.0,
                "actual_duration": 7.0,
                "concurrent_sessions": 2,
                "session_rate": null,
            })
        );
        assert_eq!(stage["num_sessions"], 2);
    }

    #[test]
    fn a_stopped_stage_is_timed_out_only_when_it_lasted_its_timeout() {
        let (mut meta, _) = run(vec![50.0], false);
        let end = meta.end.as_mut().map(|e| &mut e.stages[0]);
        if let Some(end) = end {
            end.stopped = Some(llmbench_engine::engine::StopReason::Deadline);
        }
        // 7 s against a 60 s timeout: FAILED; against a 5 s one: TIMED_OUT.
        assert_eq!(
            stage_metadata(&meta, 0).map(|m| m["status"].clone()),
            Some(json!("FAILED"))
        );
        meta.stages[0].max_duration_s = Some(5.0);
        assert_eq!(
            stage_metadata(&meta, 0).map(|m| m["status"].clone()),
            Some(json!("TIMED_OUT"))
        );
    }

    #[test]
    fn the_per_session_file_is_each_enriched_session_metric() {
        let (meta, tally) = run(vec![50.0], true);
        let files = session_reports(&meta, &tally);
        let (name, per) = &files[2];
        assert_eq!(name, PER_SESSION_FILE);
        assert_eq!(
            per[0],
            json!({
                "session_id": "trace0_s0",
                "stage_id": 0,
                "file_path": "/traces/s0.json",
                "start_time": 10.0,
                "end_time": 12.0,
                "duration_sec": 2.0,
                "num_events": 3,
                "num_events_completed": 3,
                "num_events_cancelled": 0,
                "n_recorded_substitutions": null,
                "recorded_substitution_event_ids": null,
                "success": true,
                "error": null,
                "total_input_tokens": 600,
                "total_output_tokens": 60,
                "total_cached_tokens": 150,
                "total_cacheable_input_tokens": 400,
            })
        );
        assert_eq!(per[1]["success"], false);
        assert_eq!(
            per[1]["error"],
            json!({"error_type": "HTTP Error 500", "error_msg": "boom"})
        );
    }

    #[test]
    fn a_skipped_call_s_reason_is_the_error_unless_a_request_failed() {
        let tally = SessionTally::default();
        let record = SessionRecord {
            completed: 1,
            cancelled: 0,
            failure: Some("predecessor wait failed: TimeoutError".to_owned()),
            ..session(7, 0, 1, 2)
        };
        let s = enrich(&record, &tally);
        assert!(!s.success);
        assert_eq!(
            s.error,
            Some((
                "SessionReplayError".to_owned(),
                "predecessor wait failed: TimeoutError".to_owned()
            ))
        );
        // No request reported cache info: `null`, not 0.
        assert_eq!(s.to_json()["total_cached_tokens"], Value::Null);
    }

    #[test]
    fn no_session_no_report() {
        let mut meta = crate::report::tests::meta();
        assert!(session_reports(&meta, &SessionTally::default()).is_empty());
        meta.end = Some(RunEnd {
            state: RunState::Complete,
            stopped: None,
            planned: None,
            sent: 0,
            finished: 0,
            stages: Vec::new(),
            failed: None,
        });
        assert!(!has_sessions(&meta));
        assert!(session_reports(&meta, &SessionTally::default()).is_empty());
    }
}
