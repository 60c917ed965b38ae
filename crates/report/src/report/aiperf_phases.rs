//! AIPerf 0.13's per-phase exports (`exporters/exporter_manager.py` `_export_phase_metric_artifacts`): when a run
//! had more than one phase (a warm-up and its profiling phase, or an AIPerf config's several profiling phases),
//! AIPerf writes each phase's `profile_export_aiperf.json` and `.csv` under `phases/<name>/` — the same export as
//! the top-level one, over that phase's requests alone — and indexes them in `phase_manifest.json` (`schema_version`
//! 1, `phases` in phase order, keys sorted as `orjson.OPT_SORT_KEYS` writes them): each phase's index, profiling
//! index (`null` for the warm-up), name, kind, start and end (wall-clock ns), request counts, error summary, whether
//! it was cancelled (every profiling phase of a cancelled run, never the finished warm-up) and the two files. The warm-up counts as a phase of its own here, though the top-level export leaves it out.
//!
//! A phase's `start_ns` is its first request's issue (AIPerf's is the phase's start, one interval earlier at a
//! rate); its `end_ns` its last answer. AIPerf's per-phase `gpu_telemetry.json` and `server_metrics.json` are not
//! written (llmbench's server metrics are the run's, in `server_metrics*`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use super::aiperf::{AIPERF_CSV_FILE, AIPERF_JSON_FILE, Aiperf, aiperf_csv};
use super::aiperf_records::aiperf_phase;
use super::meta::RunMeta;
use super::sample::FloatStore;
use super::{ReportError, write_json, write_text};
use llmbench_model::record::RequestRecord;

/// The index AIPerf writes of its phases' exports.
pub(crate) const AIPERF_PHASE_MANIFEST: &str = "phase_manifest.json";

/// Each phase's export being gathered: the warm-up's (`None`) and each stage's profiling phase's.
#[derive(Default)]
pub(crate) struct AiperfPhases {
    phases: BTreeMap<Option<u32>, PhaseBucket>,
}

struct PhaseBucket {
    export: Aiperf,
    first_issue_ns: u64,
    last_end_ns: u64,
}

impl AiperfPhases {
    /// Counts `r` (warm-up or not) in its phase.
    pub(crate) fn add(&mut self, r: &RequestRecord, meta: &RunMeta, store: &mut FloatStore) {
        let key = (!r.warmup).then_some(r.stage);
        let bucket = self.phases.entry(key).or_insert_with(|| PhaseBucket {
            export: Aiperf::new(store),
            first_issue_ns: u64::MAX,
            last_end_ns: 0,
        });
        bucket.export.add(r, &meta.report.goodput, store);
        bucket.first_issue_ns = bucket.first_issue_ns.min(r.scheduled_ns);
        bucket.last_end_ns = bucket.last_end_ns.max(r.end_ns);
    }

    /// Writes `phases/<name>/` and the manifest into `dir` when the run had more than one phase (AIPerf's
    /// `_build_phase_profile_results` returns none for a single one); returns the paths written.
    pub(crate) fn write(
        &self,
        dir: &Path,
        meta: &RunMeta,
        store: &mut FloatStore,
    ) -> Result<Vec<PathBuf>, ReportError> {
        let mut written = Vec::new();
        if self.phases.len() < 2 {
            return Ok(written);
        }
        let had_warmup = self.phases.contains_key(&None);
        let mut entries = Vec::new();
        for (key, bucket) in &self.phases {
            let phase = aiperf_phase(
                key.is_none(),
                key.unwrap_or(0),
                had_warmup,
                &meta.report.aiperf_phases,
            );
            let phase_dir = dir.join("phases").join(&*phase.name);
            std::fs::create_dir_all(&phase_dir).map_err(|source| ReportError::Write {
                path: phase_dir.clone(),
                source,
            })?;
            let json_path = phase_dir.join(AIPERF_JSON_FILE);
            let stages = meta.end.as_ref().map(|end| end.stages.as_slice());
            // A stage's window is its profiling phase's (the engine starts it after the warm-up); the warm-up's
            // runs from its first credit to the profiling phase's start.
            let window = match key {
                Some(stage) => stages
                    .and_then(|s| s.get(*stage as usize))
                    .map(|s| (s.start_ns, s.end_ns)),
                None => stages
                    .and_then(|s| s.first())
                    .map(|s| (bucket.first_issue_ns, s.start_ns))
                    .filter(|(from, to)| to > from),
            };
            let mut export = bucket
                .export
                .export_over(meta, window, store)
                .map_err(|source| ReportError::Read {
                    path: json_path.clone(),
                    source,
                })?;
            // A cancel marks the profiling phases (`mark_phase_cancelled(CreditPhase.PROFILING)` marks every
            // profiling phase's tracker, finished ones too); the warm-up had finished, so it stays uncancelled
            // while its export still says the run is not complete.
            if key.is_none() {
                export["was_cancelled"] = Value::Bool(false);
            }
            let was_cancelled = export["was_cancelled"].as_bool().unwrap_or(false);
            let csv_path = phase_dir.join(AIPERF_CSV_FILE);
            write_text(&csv_path, &aiperf_csv(&export))?;
            write_json(&json_path, "aiperf phase export", &export)?;
            let relative = |file: &str| format!("phases/{}/{file}", phase.name);
            let wall = |ns: u64| meta.t0_unix_ns.saturating_add(ns);
            // The phase's counts and errors as its export has them.
            let count = |tag: &str| export[tag]["avg"].as_f64().map_or(0, |n| n as u64);
            let (successes, errors) = (count("request_count"), count("error_request_count"));
            let summary: Vec<Value> = export["error_summary"]
                .as_array()
                .map(|items| {
                    items
                        .iter()
                        .map(|item| json!({"count": item["count"], "error_details": item["error_details"]}))
                        .collect()
                })
                .unwrap_or_default();
            // In key order, as AIPerf's `orjson.OPT_SORT_KEYS` writes them.
            let mut entry = Map::new();
            entry.insert("end_ns".into(), json!(wall(bucket.last_end_ns)));
            entry.insert("error_request_count".into(), json!(errors));
            entry.insert("error_summary".into(), Value::Array(summary));
            entry.insert("metrics_csv".into(), json!(relative(AIPERF_CSV_FILE)));
            entry.insert("metrics_json".into(), json!(relative(AIPERF_JSON_FILE)));
            entry.insert("phase_index".into(), json!(phase.index));
            entry.insert("phase_kind".into(), json!(phase.kind));
            entry.insert("phase_name".into(), json!(phase.name));
            entry.insert("profiling_index".into(), json!(phase.profiling_index));
            entry.insert("start_ns".into(), json!(wall(bucket.first_issue_ns)));
            entry.insert("successful_request_count".into(), json!(successes));
            entry.insert("total_request_count".into(), json!(successes + errors));
            entry.insert("was_cancelled".into(), json!(was_cancelled));
            entries.push(Value::Object(entry));
            written.push(csv_path);
            written.push(json_path);
        }
        let path = dir.join(AIPERF_PHASE_MANIFEST);
        write_json(
            &path,
            "aiperf phase manifest",
            &json!({"phases": entries, "schema_version": 1}),
        )?;
        written.push(path);
        Ok(written)
    }
}
