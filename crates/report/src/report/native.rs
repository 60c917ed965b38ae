//! The native reports made of per-stage statistics — inference-perf's lifecycle metrics, vllm bench serve's
//! result JSON, the llm-d report — gathered request by request into per-stage buckets ([`Native::add`]) and
//! written from them ([`Native::write`]). The same buckets serve a run summarised in memory and one streamed back
//! from disk (their samples in a [`FloatStore`] of either kind), so both write the same files. The per-request
//! entries (inference-perf's per-request file, vllm's `--save-detailed` arrays) are built from the records at hand
//! ([`InMemory`]) or, streamed from disk, spilled as the records go by ([`EntryLists`]) and written back element by
//! element. guidellm's report, which sorts every request's events, comes from the caller ([`Native::write`]'s
//! `guidellm`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use super::aiperf::{AIPERF_CSV_FILE, AIPERF_JSON_FILE, Aiperf, aiperf_csv};
use super::entries::{EntryLists, ListId, WithArrays, write_json_streamed};
use super::guidellm::{GUIDELLM_REPORT_FILE, guidellm_report};
use super::inference_perf::{
    Lifecycle, PER_REQUEST_LIFECYCLE_FILE, SUMMARY_LIFECYCLE_FILE, per_request,
    per_request_lifecycle, stage_lifecycle_file,
};
use super::llmd::{llmd_report_v02_file, llmd_report_v02_of};
use super::meta::{RunMeta, StageMeta};
use super::sample::FloatStore;
use super::sessions::{SessionTally, has_sessions, session_reports};
use super::vllm::{DETAILED_ARRAYS, Vllm, detailed_entries, keeps_detailed, vllm_result_file};
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
    /// inference-perf's buckets per LoRA adapter, and per adapter and stage (`per_adapter`, `per_adapter_stage`).
    adapters: BTreeMap<Arc<String>, Lifecycle>,
    adapter_stages: BTreeMap<(Arc<String>, u32), Lifecycle>,
    vllm: BTreeMap<u32, Vllm>,
    /// inference-perf's per-session totals of a trace session replay (one small entry per session).
    sessions: SessionTally,
    aiperf: Option<Aiperf>,
    /// The per-request entries, spilled, for a run streamed from disk.
    entries: Option<Entries>,
}

/// The per-request entries of a run streamed from disk: each stage's lists.
struct Entries {
    lists: EntryLists,
    /// inference-perf's per-request file, by stage.
    per_request: BTreeMap<u32, ListId>,
    /// vllm's [`DETAILED_ARRAYS`], by stage.
    detailed: BTreeMap<u32, [ListId; 5]>,
}

/// What only a run held in memory has: its measured records, whole and by stage, and each stage's vLLM peak
/// second (worked out from the records).
pub(crate) struct InMemory<'a> {
    pub records: &'a [&'a RequestRecord],
    pub stages: &'a [(u32, Vec<&'a RequestRecord>)],
}

impl Native {
    /// Buckets for a run whose records are at hand when the files are written.
    pub(crate) fn new(formats: Formats, store: &mut FloatStore) -> Native {
        Native {
            formats,
            lifecycle: BTreeMap::new(),
            adapters: BTreeMap::new(),
            adapter_stages: BTreeMap::new(),
            vllm: BTreeMap::new(),
            sessions: SessionTally::default(),
            aiperf: formats.aiperf.then(|| Aiperf::new(store)),
            entries: None,
        }
    }

    /// Buckets for a run streamed from disk: the per-request entries are spilled into `dir`, buffering at most
    /// `buffer_bytes`.
    pub(crate) fn spilled(
        formats: Formats,
        store: &mut FloatStore,
        dir: &Path,
        buffer_bytes: usize,
    ) -> Native {
        Native {
            entries: Some(Entries {
                lists: EntryLists::new(dir, buffer_bytes),
                per_request: BTreeMap::new(),
                detailed: BTreeMap::new(),
            }),
            ..Native::new(formats, store)
        }
    }

    /// The first write of a spilled entry that failed, if any did.
    pub(crate) fn check(&mut self) -> std::io::Result<()> {
        self.entries
            .as_mut()
            .map_or(Ok(()), |entries| entries.lists.check())
    }

    /// Counts a request of AIPerf's warm-up phase (left out of every other figure): its `warmup_metrics`.
    pub(crate) fn add_warmup(&mut self, r: &RequestRecord, meta: &RunMeta, store: &mut FloatStore) {
        if let Some(aiperf) = &mut self.aiperf {
            aiperf.add_warmup(r, &meta.report.goodput, store);
        }
    }

    /// Counts a measured request in its stage's buckets.
    pub(crate) fn add(&mut self, r: &RequestRecord, meta: &RunMeta, store: &mut FloatStore) {
        if let Some(aiperf) = &mut self.aiperf {
            aiperf.add(r, &meta.report.goodput, store);
        }
        if let Some(entries) = &mut self.entries {
            if self.formats.inference_perf && meta.report.inference_perf_per_request {
                let lists = &mut entries.lists;
                let list = *entries
                    .per_request
                    .entry(r.stage)
                    .or_insert_with(|| lists.list());
                lists.push(list, &per_request(r));
            }
            if self.formats.vllm && meta.report.vllm_save_detailed {
                let lists = &mut entries.lists;
                let ids = *entries
                    .detailed
                    .entry(r.stage)
                    .or_insert_with(|| std::array::from_fn(|_| lists.list()));
                for (list, entry) in ids.into_iter().zip(detailed_entries(r)) {
                    lists.push(list, &entry);
                }
            }
        }
        if self.formats.inference_perf || self.formats.llmd_v02 {
            self.lifecycle
                .entry(r.stage)
                .or_insert_with(|| Lifecycle::new(store, &meta.report.goodput))
                .add(r, store);
        }
        if let (true, Some(adapter)) = (self.formats.inference_perf, &r.adapter) {
            if meta.report.inference_perf_per_adapter {
                self.adapters
                    .entry(Arc::clone(adapter))
                    .or_insert_with(|| Lifecycle::new(store, &meta.report.goodput))
                    .add(r, store);
            }
            if meta.report.inference_perf_per_adapter_stage {
                self.adapter_stages
                    .entry((Arc::clone(adapter), r.stage))
                    .or_insert_with(|| Lifecycle::new(store, &meta.report.goodput))
                    .add(r, store);
            }
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
    /// stage's vLLM peak second; `records`, when the run is held in memory, are what its per-request entries are
    /// built from (else the spilled entries are); `guidellm` is guidellm's report of a run streamed from disk
    /// (one held in memory is reported from `records`).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn write(
        &self,
        dir: &Path,
        meta: &RunMeta,
        summary: &RunSummary,
        store: &mut FloatStore,
        peaks: &BTreeMap<u32, (f64, u64)>,
        records: Option<InMemory<'_>>,
        guidellm: Option<Value>,
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
            // `generate_report`'s per-adapter files: each adapter's requests summarised as the run's are; per
            // adapter and stage with the stage's rate and no concurrency, as upstream passes them.
            for (adapter, bucket) in &self.adapters {
                let path = dir.join(format!(
                    "adapter_{}_lifecycle_metrics.json",
                    file_safe(adapter)
                ));
                let value = bucket
                    .metrics(store, percentiles, None)
                    .map_err(|e| read_error(&path, e))?;
                write_json(&path, "inference-perf adapter metrics", &mark(value))?;
                written.push(path);
            }
            for ((adapter, stage), bucket) in &self.adapter_stages {
                let path = dir.join(format!(
                    "adapter_{}_stage_{stage}_lifecycle_metrics.json",
                    file_safe(adapter)
                ));
                let load = StageMeta {
                    concurrency: None,
                    ..meta
                        .stages
                        .get(*stage as usize)
                        .copied()
                        .unwrap_or_default()
                };
                let value = bucket
                    .metrics(store, percentiles, Some(load))
                    .map_err(|e| read_error(&path, e))?;
                write_json(&path, "inference-perf adapter stage metrics", &mark(value))?;
                written.push(path);
            }
            if meta.report.inference_perf_per_request {
                let path = dir.join(PER_REQUEST_LIFECYCLE_FILE);
                let what = "inference-perf per-request metrics";
                match (&records, &self.entries) {
                    (Some(in_memory), _) => {
                        write_json(&path, what, &per_request_lifecycle(in_memory.records))?
                    }
                    (None, Some(entries)) => {
                        // Stage by stage, as the measured records are listed in memory.
                        let lists: Vec<ListId> = entries.per_request.values().copied().collect();
                        write_json_streamed(&path, what, &entries.lists.array(&lists))?
                    }
                    (None, None) => {}
                }
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
                let detailed = match &records {
                    Some(in_memory) => in_memory
                        .stages
                        .iter()
                        .find(|(s, _)| s == stage)
                        .map(|(_, bucket)| bucket.as_slice()),
                    // Empty arrays in their places, streamed in from the spilled entries below.
                    None => Some(&[][..]),
                };
                let peak = peaks.get(stage).copied().unwrap_or((0.0, 0));
                let value = mark(
                    bucket
                        .result(meta, *stage, store, peak, detailed)
                        .map_err(|e| read_error(&path, e))?,
                );
                let spilled = self
                    .entries
                    .as_ref()
                    .filter(|_| records.is_none() && meta.report.vllm_save_detailed);
                match spilled {
                    Some(entries) => {
                        let lists = entries.detailed.get(stage).copied();
                        let arrays = DETAILED_ARRAYS
                            .iter()
                            .enumerate()
                            .filter(|(_, name)| keeps_detailed(meta, name))
                            .map(|(i, name)| {
                                let list: Vec<ListId> = lists.iter().map(|l| l[i]).collect();
                                (*name, entries.lists.array(&list))
                            })
                            .collect();
                        write_json_streamed(
                            &path,
                            "vllm result",
                            &WithArrays {
                                value: &value,
                                arrays,
                            },
                        )?
                    }
                    None => write_json(&path, "vllm result", &value)?,
                }
                written.push(path);
            }
        }
        let guidellm = match (&records, guidellm) {
            (Some(in_memory), _) if formats.guidellm => {
                Some(guidellm_report(meta, in_memory.stages))
            }
            (_, report) => report.filter(|_| formats.guidellm),
        };
        if let Some(report) = guidellm {
            let path = dir.join(GUIDELLM_REPORT_FILE);
            write_json(&path, "guidellm report", &mark(report))?;
            written.push(path);
        }
        if let Some(aiperf) = &self.aiperf {
            let path = dir.join(AIPERF_JSON_FILE);
            let export = aiperf
                .export(meta, store)
                .map_err(|e| read_error(&path, e))?;
            let csv_path = dir.join(AIPERF_CSV_FILE);
            write_text(&csv_path, &aiperf_csv(&export))?;
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

/// An adapter's name as part of a file name: a Hugging Face style `org/name` would make a directory that does
/// not exist (upstream's write fails on it), so its slashes become underscores.
fn file_safe(name: &str) -> String {
    name.replace(['/', '\\'], "_")
}
