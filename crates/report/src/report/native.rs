//! The native reports made of per-stage statistics — inference-perf's lifecycle metrics, vllm bench serve's
//! result JSON, the llm-d report — gathered request by request into per-stage buckets ([`Native::add`]) and
//! written from them ([`Native::write`]). The same buckets serve a run summarised in memory and one streamed back
//! from disk (their samples in a [`FloatStore`] of either kind), so both write the same files. The files that need
//! every record at hand (inference-perf's per-request file, guidellm's report, vllm's `--save-detailed` arrays)
//! are written only when the records are ([`InMemory`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::aiperf::{AIPERF_CSV_FILE, AIPERF_JSON_FILE, aiperf_csv, aiperf_export};
use super::guidellm::{GUIDELLM_REPORT_FILE, guidellm_report};
use super::inference_perf::{
    Lifecycle, PER_REQUEST_LIFECYCLE_FILE, SUMMARY_LIFECYCLE_FILE, per_request_lifecycle,
    stage_lifecycle_file,
};
use super::llmd::{llmd_report_v02_file, llmd_report_v02_of};
use super::meta::RunMeta;
use super::sample::FloatStore;
use super::sessions::{SessionTally, has_sessions, session_reports};
use super::vllm::{Vllm, vllm_result_file};
use super::{
    Formats, ReportError, SUMMARY_PROMETHEUS_FILE, server_series, stage_prometheus_file,
    write_json, write_text,
};
use llmbench_metrics::metrics::RunSummary;
use llmbench_model::record::RequestRecord;

/// Each stage's buckets for the chosen formats.
pub(crate) struct Native {
    formats: Formats,
    lifecycle: BTreeMap<u32, Lifecycle>,
    vllm: BTreeMap<u32, Vllm>,
    /// inference-perf's per-session totals of a trace session replay (one small entry per session).
    sessions: SessionTally,
}

/// What only a run held in memory has: its measured records, whole and by stage, and each stage's vLLM peak
/// second (worked out from the records).
pub(crate) struct InMemory<'a> {
    pub records: &'a [&'a RequestRecord],
    pub stages: &'a [(u32, Vec<&'a RequestRecord>)],
}

impl Native {
    pub(crate) fn new(formats: Formats) -> Native {
        Native {
            formats,
            lifecycle: BTreeMap::new(),
            vllm: BTreeMap::new(),
            sessions: SessionTally::default(),
        }
    }

    /// Counts a measured request in its stage's buckets.
    pub(crate) fn add(&mut self, r: &RequestRecord, meta: &RunMeta, store: &mut FloatStore) {
        if self.formats.inference_perf || self.formats.llmd_v02 {
            self.lifecycle
                .entry(r.stage)
                .or_insert_with(|| Lifecycle::new(store, &meta.report.goodput))
                .add(r, store);
        }
        if self.formats.inference_perf && r.conversation.is_some() && has_sessions(meta) {
            self.sessions.add(r);
        }
        if self.formats.vllm {
            self.vllm
                .entry(r.stage)
                .or_insert_with(|| Vllm::new(store, meta))
                .add(r, store);
        }
    }

    /// Writes the chosen tools' files into `dir`; returns their paths in the order written. `peaks` are each
    /// stage's vLLM peak second; `records`, when the run is held in memory, lets the per-request files be written
    /// too.
    pub(crate) fn write(
        &self,
        dir: &Path,
        meta: &RunMeta,
        summary: &RunSummary,
        store: &mut FloatStore,
        peaks: &BTreeMap<u32, (f64, u64)>,
        records: Option<InMemory<'_>>,
    ) -> Result<Vec<PathBuf>, ReportError> {
        let formats = self.formats;
        let mut written = Vec::new();
        let percentiles = &meta.report.percentiles;
        let mark = |mut value: Value| {
            if let (Some(run), Some(object)) = (&summary.run, value.as_object_mut()) {
                object.insert(
                    "llmbench_run".into(),
                    serde_json::to_value(run).unwrap_or_default(),
                );
            }
            value
        };
        let read_error = |path: &Path, source: std::io::Error| ReportError::Read {
            path: path.to_owned(),
            source,
        };

        if formats.inference_perf {
            let mut stages = self.lifecycle.values();
            if meta.report.inference_perf_summary
                && let Some(first) = stages.next()
            {
                // The whole run's bucket: the stages' merged, in stage order.
                let mut overall = first.clone();
                stages.for_each(|stage| overall.merge(stage));
                let path = dir.join(SUMMARY_LIFECYCLE_FILE);
                let value = overall
                    .metrics(store, percentiles, None)
                    .map_err(|e| read_error(&path, e))?;
                write_json(&path, "inference-perf summary", &mark(value))?;
                written.push(path);
            }
            for (stage, bucket) in self
                .lifecycle
                .iter()
                .filter(|_| meta.report.inference_perf_per_stage)
            {
                let path = dir.join(stage_lifecycle_file(*stage));
                let load = meta
                    .stages
                    .get(*stage as usize)
                    .copied()
                    .unwrap_or_default();
                let value = bucket
                    .metrics(store, percentiles, Some(load))
                    .map_err(|e| read_error(&path, e))?;
                write_json(&path, "inference-perf stage metrics", &mark(value))?;
                written.push(path);
            }
            if let (true, Some(in_memory)) = (meta.report.inference_perf_per_request, &records) {
                let path = dir.join(PER_REQUEST_LIFECYCLE_FILE);
                write_json(
                    &path,
                    "inference-perf per-request metrics",
                    &per_request_lifecycle(in_memory.records),
                )?;
                written.push(path);
            }
            // `generate_session_reports`, after the request lifecycle (and Prometheus) reports upstream; their
            // order among the files does not matter, so they go with the other lifecycle files.
            for (name, value) in session_reports(meta, &self.sessions) {
                let path = dir.join(name);
                write_json(&path, "inference-perf session metrics", &value)?;
                written.push(path);
            }
        }
        if formats.inference_perf
            && let Some(server) = &summary.server_metrics
        {
            if meta.report.prometheus_summary {
                let path = dir.join(SUMMARY_PROMETHEUS_FILE);
                write_json(
                    &path,
                    "inference-perf server metrics summary",
                    &mark(
                        llmbench_metrics::server_metrics::inference_perf_prometheus_metrics(
                            &server.overall,
                        ),
                    ),
                )?;
                written.push(path);
            }
            for window in server
                .stages
                .iter()
                .filter(|_| meta.report.prometheus_per_stage)
            {
                let Some(stage) = window.stage else { continue };
                let path = dir.join(stage_prometheus_file(stage as u32));
                write_json(
                    &path,
                    "inference-perf stage server metrics",
                    &mark(
                        llmbench_metrics::server_metrics::inference_perf_prometheus_metrics(window),
                    ),
                )?;
                written.push(path);
            }
        }
        if formats.vllm {
            let several = self.vllm.len() > 1;
            for (stage, bucket) in &self.vllm {
                let path = dir.join(vllm_result_file(meta, *stage, several));
                let detailed = records.as_ref().and_then(|in_memory| {
                    in_memory
                        .stages
                        .iter()
                        .find(|(s, _)| s == stage)
                        .map(|(_, bucket)| bucket.as_slice())
                });
                let peak = peaks.get(stage).copied().unwrap_or((0.0, 0));
                let value = bucket
                    .result(meta, *stage, store, peak, detailed)
                    .map_err(|e| read_error(&path, e))?;
                write_json(&path, "vllm result", &mark(value))?;
                written.push(path);
            }
        }
        if let (true, Some(in_memory)) = (formats.guidellm, &records) {
            let path = dir.join(GUIDELLM_REPORT_FILE);
            write_json(
                &path,
                "guidellm report",
                &mark(guidellm_report(meta, in_memory.stages)),
            )?;
            written.push(path);
        }
        if let (true, Some(in_memory)) = (formats.aiperf, &records) {
            let export = aiperf_export(in_memory.records, &meta.report.goodput);
            let csv_path = dir.join(AIPERF_CSV_FILE);
            write_text(&csv_path, &aiperf_csv(&export))?;
            let path = dir.join(AIPERF_JSON_FILE);
            write_json(&path, "aiperf export", &mark(export))?;
            written.push(path);
            written.push(csv_path);
        }
        if formats.llmd_v02 {
            // The server's series, read once for every stage's report (each clips them to its stage).
            let series = summary
                .server_metrics
                .as_ref()
                .map(|_| server_series(dir))
                .unwrap_or_default();
            for (stage, bucket) in &self.lifecycle {
                let Some(stage_summary) = summary.stages.iter().find(|s| s.stage == *stage) else {
                    continue;
                };
                let path = dir.join(llmd_report_v02_file(*stage));
                let mut report =
                    llmd_report_v02_of(meta, *stage, bucket, store, &stage_summary.summary)
                        .map_err(|e| read_error(&path, e))?;
                let window = summary.server_metrics.as_ref().and_then(|server| {
                    server
                        .stages
                        .iter()
                        .find(|w| w.stage == Some(*stage as usize))
                });
                if let (Some(window), Some(results)) = (
                    window,
                    report.get_mut("results").and_then(|r| r.as_object_mut()),
                ) {
                    let mut observability = llmbench_metrics::server_metrics::llmd_observability(
                        window,
                        &series,
                        meta.t0_unix_ns,
                    );
                    // Keep what the report already put there (the client-reported prefix-cache hits).
                    if let (Some(Value::Object(ours)), Some(theirs)) = (
                        results.remove("observability"),
                        observability.as_object_mut(),
                    ) {
                        theirs.extend(ours);
                    }
                    results.insert("observability".into(), observability);
                }
                let text =
                    serde_saphyr::to_string(&report).map_err(|e| ReportError::Serialize {
                        path: path.clone(),
                        what: "llm-d benchmark report",
                        message: e.to_string(),
                    })?;
                write_text(&path, &text)?;
                written.push(path);
            }
        }
        Ok(written)
    }
}
