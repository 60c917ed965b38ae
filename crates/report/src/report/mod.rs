//! The result files each ecosystem tool reads, derived after the run from the raw records (FORMATS.md §4):
//! inference-perf's lifecycle metrics, vllm bench serve's result JSON, guidellm's benchmarks report and the
//! llm-d benchmark report v0.2, each with that tool's own field names, units, percentile method and metric
//! definitions; plus `run.json` ([`RunMeta`]), which lets `llmbench report DIR` rebuild all of them from
//! `requests.jsonl`, and what a person reads at the end of a run ([`print_run`]): the [`headline`], the stage
//! tables, the [`error_table`], a capacity search's answer ([`capacity_report`]) and a multi-turn run's
//! [`turn_table`] — each built as text or [`Table`] rows here and rendered by the terminal and `report.html`
//! alike.
//!
//! Every builder is a pure function from records to a JSON value; writing files is the only fallible step. The
//! reports made of per-stage statistics are built from buckets filled request by request ([`native`]), so a run too
//! long to hold in memory is summarised and reported from its records on disk with the same numbers
//! ([`spilled`]).

mod aiperf;
mod aiperf_phases;
mod aiperf_records;
mod cache;
mod capacity_answer;
mod entries;
mod errors;
mod goodput;
mod guidellm;
mod headline;
mod inference_perf;
mod llmd;
pub mod lost;
pub mod merge;
mod meta;
mod native;
mod sample;
mod sessions;
mod spilled;
mod starts;
mod table;
mod turns;
mod vllm;

use std::path::{Path, PathBuf};

use llmbench_core::harness::Harness;
use llmbench_core::vllm_log::ModelLoadSummary;
use serde::Serialize;

use llmbench_metrics::metrics::transient;
use llmbench_metrics::metrics::{
    AdapterSummary, Completion, ConversationSummary, Excluded, RunInfo, RunSummary, TurnSummary,
    WriteSummaryError, write_compact_summary, write_summary_json,
};
use llmbench_model::record::{ReadRecordsError, RequestRecord};
use llmbench_model::record_file::RunRecords;

pub use cache::{CacheMeta, CacheReset, PromptsMeta, PromptsOrigin, ResetCall, WARM_SHARE};
pub use capacity_answer::{CapacityReport, capacity_report, capacity_verdict};
pub use errors::error_table;
pub use goodput::{Definition, GoodputTally, goodput, inference_perf_goodput_metrics};
pub use guidellm::{GUIDELLM_REPORT_FILE, guidellm_report, guidellm_successful_rate};
pub use headline::{
    Headline, HeadlineLine, headline, killed_run, stage_load, tokens_range, unrecorded,
};
pub use inference_perf::{
    PER_REQUEST_LIFECYCLE_FILE, SUMMARY_LIFECYCLE_FILE, lifecycle_metrics, per_request_lifecycle,
    stage_lifecycle_file,
};
pub use llmd::{
    LLMD_REPORT_PREFIX, PREFIX_CACHE_KEY as LLMD_PREFIX_CACHE_KEY, llmd_report_v02,
    llmd_report_v02_file,
};
pub use lost::LOST_IN_FLIGHT_FILE;
pub use meta::{
    ApiKind, Burstiness, INFERENCE_PERF_PERCENTILES, LLMBENCH_VERSION, PreflightCall,
    PreflightMeta, ProfileNote, RUN_META_FILE, RUN_META_SCHEMA, ReleaseMeta, ReportOptions, RunEnd,
    RunMeta, RunState, ServerMetricsMeta, ShardMeta, Slo, StageEnd, StageMeta,
};
pub use spilled::{
    DEFAULT_RECORDS_MEMORY, PICTURE_BYTES_PER_REQUEST, Passed, RecordPasses, RecordsFile,
    SpilledRun, for_each_measured, picture_points, summarize_spilled,
};
pub use starts::{ShardStarts, shard_starts};
pub use table::{Align, TERMINAL_COLUMNS, Table, Tone, print_run, print_table};
pub use turns::{adapter_table, conversations_line, turn_table};
pub use vllm::{vllm_result, vllm_result_file};

/// The raw records' file inside a run directory (an earlier version's run has [`REQUESTS_JSONL_FILE`] instead,
/// which every reader here still reads).
pub const REQUESTS_FILE: &str = llmbench_model::record_file::RECORDS_FILE;
/// The raw records as JSON lines: what `llmbench export` writes, and what earlier versions wrote.
pub const REQUESTS_JSONL_FILE: &str = llmbench_model::record_file::RECORDS_JSONL_FILE;
/// Our own summary's file inside a run directory.
pub const SUMMARY_FILE: &str = "summary.json";
/// The profile as rendered, inside a run directory.
pub const PROFILE_FILE: &str = "profile.yaml";
/// The raw server metrics scraped during the run, one line per scrape per target.
pub const SERVER_METRICS_FILE: &str = "server_metrics.jsonl";
/// inference-perf's server-side summaries (`report.prometheus`).
pub(crate) const SUMMARY_PROMETHEUS_FILE: &str = "summary_prometheus_metrics.json";

/// inference-perf's per-stage server-side summary file.
pub(crate) fn stage_prometheus_file(stage: u32) -> String {
    format!("stage_{stage}_prometheus_metrics.json")
}

/// Writing or re-reading a run's reports failed.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot parse the run metadata {path}: {source}")]
    ParseMeta {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("cannot read the request records {path}: {source}")]
    Records {
        path: PathBuf,
        source: ReadRecordsError,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot serialize the {what} for {path}: {message}")]
    Serialize {
        path: PathBuf,
        what: &'static str,
        message: String,
    },
    #[error("cannot read the sent log {path}: {source}")]
    SentLog {
        path: PathBuf,
        source: llmbench_model::sent::ReadSentError,
    },
    #[error(
        "the sent log {path} is damaged: it names request id {max_id} among only {entries} entries (ids count up \
         from 0 in a run); move it aside to report the run from its records alone"
    )]
    SentLogDamaged {
        path: PathBuf,
        max_id: u64,
        entries: u64,
    },
    #[error("cannot merge the shards of {dir}: {message}")]
    Merge { dir: PathBuf, message: String },
    #[error("cannot write the summary {path}: {source}")]
    Summary {
        path: PathBuf,
        source: WriteSummaryError,
    },
}

/// Which tools' files to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Formats {
    /// `summary_lifecycle_metrics.json` and `stage_N_lifecycle_metrics.json`.
    pub inference_perf: bool,
    /// `<label>-<rate>qps[-concurrency<N>]-<model>-<stamp>.json`.
    pub vllm: bool,
    /// `benchmarks.json`.
    pub guidellm: bool,
    /// `benchmark_report_v0.2,_stage_N.yaml`, one per stage.
    pub llmd_v02: bool,
    /// AIPerf's `profile_export_aiperf.json` and `profile_export_aiperf.csv`, and its per-request `profile_export.jsonl`.
    pub aiperf: bool,
}

impl Formats {
    /// Every format.
    pub const ALL: Formats = Formats {
        inference_perf: true,
        vllm: true,
        guidellm: true,
        llmd_v02: true,
        aiperf: true,
    };

    /// The harness's own format, and always the llm-d report. InferenceMAX's `bench_serving` writes vLLM's
    /// result JSON; `nop` has no native file, and MLPerf's `mlperf_log_summary.txt` comes with its verdict.
    pub fn for_harness(harness: Harness) -> Formats {
        let mut formats = Formats {
            llmd_v02: true,
            ..Formats::default()
        };
        match harness {
            Harness::InferencePerf => formats.inference_perf = true,
            Harness::Guidellm => formats.guidellm = true,
            Harness::VllmBenchmark | Harness::Inferencemax => formats.vllm = true,
            Harness::Aiperf => formats.aiperf = true,
            // fmperf's summary CSVs come from its own run (the fmperf runner).
            Harness::Nop | Harness::Mlperf | Harness::Fmperf => {}
        }
        formats
    }
}

/// The records a run's figures are made of: every recorded request but vllm's warm-up requests and the requests
/// of each stage's guidellm warm-up and cool-down, in record order.
pub struct Measured<'a> {
    pub records: Vec<&'a RequestRecord>,
    pub excluded: Excluded,
}

/// Sorts `records` into measured and left out, by `meta`'s stages.
pub fn measured<'a>(meta: &RunMeta, records: &'a [RequestRecord]) -> Measured<'a> {
    let mut excluded = Excluded::default();
    let mut by_stage: std::collections::BTreeMap<u32, Vec<&RequestRecord>> = Default::default();
    for record in records {
        if record.warmup {
            excluded.warmup_requests += 1;
        } else {
            by_stage.entry(record.stage).or_default().push(record);
        }
    }
    let mut kept: Vec<&RequestRecord> = Vec::with_capacity(records.len());
    for (stage, bucket) in by_stage {
        let bounds = meta.stage_bounds(stage);
        let (keep, out) = transient::measured(&bucket, &bounds);
        excluded.warmup += out.warmup;
        excluded.cooldown += out.cooldown;
        kept.extend(
            bucket
                .into_iter()
                .zip(keep)
                .filter(|(_, k)| *k)
                .map(|(r, _)| r),
        );
    }
    Measured {
        records: kept,
        excluded,
    }
}

/// Whose goodput definition a harness's profiles mean.
fn goodput_definition(harness: Harness) -> Definition {
    match harness {
        Harness::VllmBenchmark | Harness::Inferencemax => Definition::Vllm,
        Harness::Aiperf => Definition::Aiperf,
        _ => Definition::InferencePerf,
    }
}

/// The run's `summary.json` from its metadata and records: the measured requests' figures per stage and overall,
/// their goodput, conversations, what was left out, how the run ended and the profile keys it did not act on.
pub fn summarize_run(meta: &RunMeta, records: &[RequestRecord]) -> RunSummary {
    let measured = measured(meta, records);
    let mut summary = RunSummary::from_records(
        run_info(meta),
        &measured.records,
        &meta.shard_requested_rates(),
    );
    let mut tally = Tally::new(meta);
    measured.records.iter().for_each(|r| tally.add(r));
    tally.finish(meta, &mut summary, measured.excluded, records.len() as u64);
    summary.adapters = adapter_summaries(&measured.records);
    summary
}

/// Each LoRA adapter's measured requests, summarised as the run's are, in name order; none without LoRA traffic.
fn adapter_summaries(records: &[&RequestRecord]) -> Vec<AdapterSummary> {
    let mut by_adapter: std::collections::BTreeMap<&str, Vec<&RequestRecord>> = Default::default();
    for r in records {
        if let Some(adapter) = &r.adapter {
            by_adapter.entry(adapter.as_str()).or_default().push(r);
        }
    }
    by_adapter
        .into_iter()
        .map(|(adapter, records)| AdapterSummary {
            adapter: adapter.to_owned(),
            summary: llmbench_metrics::metrics::summarize(&records, None),
        })
        .collect()
}

fn run_info(meta: &RunMeta) -> RunInfo {
    RunInfo {
        run_id: meta.run_id.clone(),
        harness: meta.harness.to_string(),
        model: meta.model.clone(),
        endpoint: meta.endpoint.clone(),
    }
}

/// What a summary needs of the measured requests besides their per-stage figures, counted request by request
/// (so a run streamed back from disk counts as one held in memory): each stage's goodput, and the conversations.
struct Tally {
    goodput: std::collections::BTreeMap<u32, GoodputTally>,
    first: cache::FirstRequest,
    slos: Vec<Slo>,
    definition: Definition,
    conversations: ConversationTally,
}

impl Tally {
    fn new(meta: &RunMeta) -> Tally {
        Tally {
            goodput: Default::default(),
            first: cache::FirstRequest::default(),
            slos: meta.report.goodput.clone(),
            definition: goodput_definition(meta.harness),
            conversations: ConversationTally::default(),
        }
    }

    fn add(&mut self, r: &RequestRecord) {
        if !self.slos.is_empty() {
            self.goodput
                .entry(r.stage)
                .or_insert_with(|| GoodputTally::new(&self.slos, self.definition))
                .add(r);
        }
        self.conversations.add(r);
        self.first.add(r);
    }

    /// Completes `summary` (its per-stage figures in): goodput, how each stage and the run ended, the capacity
    /// search's answer, what was left out, the conversations and the profile keys not acted on. `recorded`
    /// counts every record, left out or not.
    fn finish(self, meta: &RunMeta, summary: &mut RunSummary, excluded: Excluded, recorded: u64) {
        if !self.slos.is_empty() {
            let mut overall = GoodputTally::new(&self.slos, self.definition);
            self.goodput.values().for_each(|t| overall.merge(t));
            summary.overall.goodput = overall.goodput(summary.overall.duration_s);
            for stage in &mut summary.stages {
                let tally = self
                    .goodput
                    .get(&stage.stage)
                    .cloned()
                    .unwrap_or_else(|| GoodputTally::new(&self.slos, self.definition));
                stage.summary.goodput = tally.goodput(stage.summary.duration_s);
            }
        }
        if let Some(end) = &meta.end {
            for stage in &mut summary.stages {
                stage.stopped = end.stages.get(stage.stage as usize).and_then(|s| s.stopped);
            }
        }
        summary.capacity = meta
            .capacity_search
            .as_ref()
            .and_then(|spec| llmbench_core::capacity::CapacitySearch::try_from(spec).ok())
            .map(|search| {
                let points: Vec<(u32, &llmbench_metrics::metrics::Summary)> = summary
                    .stages
                    .iter()
                    .map(|s| (s.stage, &s.summary))
                    .collect();
                llmbench_metrics::metrics::capacity::replay(search, &points)
            });
        summary.excluded = excluded;
        summary.engine = llmbench_engine::stack::identity::engine_in_brief(
            meta.server.as_ref(),
            meta.stack.as_ref(),
            served_model(meta),
        );
        summary.conversations = self.conversations.finish();
        summary.prefix_cache_warm = self.first.warm(meta, summary);
        summary.run = completion(meta, recorded);
        summary.ignored_keys = meta
            .profile_notes
            .iter()
            .map(|note| match note.line {
                Some(line) => format!("{} (line {line}): {}", note.key, note.message),
                None => format!("{}: {}", note.key, note.message),
            })
            .collect();
    }
}

/// The model that answered the run: the one the pre-flight's test answer named (a server that ignores the
/// request's model field names its own), else the listed model the requests name, else the first listed.
pub fn served_model(meta: &RunMeta) -> Option<String> {
    meta.preflight
        .as_ref()
        .and_then(|p| p.server_model.clone())
        .or_else(|| {
            meta.server
                .as_ref()?
                .model_for(&meta.model)
                .map(|m| m.id.clone())
        })
}

/// How the run ended, for the summary: nothing for a run that did all it planned, its state otherwise, and
/// `incomplete` for one whose run.json has no end (the launcher was killed or crashed).
fn completion(meta: &RunMeta, recorded: u64) -> Option<Completion> {
    match &meta.end {
        Some(end) if end.state == RunState::Complete => None,
        Some(end) => Some(Completion {
            state: end.state,
            stopped: end.stopped,
            planned: end.planned,
            sent: Some(end.sent),
            finished: end.finished,
        }),
        None => Some(Completion {
            state: RunState::Incomplete,
            stopped: None,
            planned: meta.planned_requests,
            sent: None,
            finished: recorded,
        }),
    }
}

/// Per turn index of the measured conversation turns, counted request by request. Means come from exact integer
/// sums, so they do not depend on the order requests are counted in.
#[derive(Debug, Default)]
struct ConversationTally {
    turns: std::collections::BTreeMap<u32, TurnTally>,
    /// Per conversation, whether every measured turn succeeded: a bit per conversation, the only figure here that
    /// grows with the run (conversation runs keep far more per conversation while they go).
    conversations: std::collections::BTreeMap<u32, bool>,
}

#[derive(Debug, Default)]
struct TurnTally {
    requests: u64,
    succeeded: u64,
    input_tokens: u64,
    ttft_ns: u128,
    ttfts: u64,
    e2e_ns: u128,
}

impl ConversationTally {
    fn add(&mut self, r: &RequestRecord) {
        let Some(of) = r.conversation else { return };
        // As the summary counts: an answer cut short is not a success.
        let ok = r.outcome() == llmbench_model::record::Outcome::Succeeded;
        *self.conversations.entry(of.id).or_insert(true) &= ok;
        let turn = self.turns.entry(of.turn).or_default();
        turn.requests += 1;
        if !ok {
            return;
        }
        turn.succeeded += 1;
        turn.input_tokens += u64::from(r.prompt_tokens());
        if let Some(ns) = r.ttft_ns() {
            turn.ttft_ns += u128::from(ns);
            turn.ttfts += 1;
        }
        turn.e2e_ns += u128::from(r.e2e_ns());
    }

    /// `None` when the run had no conversations.
    fn finish(self) -> Option<ConversationSummary> {
        if self.turns.is_empty() {
            return None;
        }
        let mean = |sum: f64, n: u64| (n > 0).then(|| sum / n as f64);
        Some(ConversationSummary {
            conversations: self.conversations.len() as u64,
            all_turns_succeeded: self.conversations.values().filter(|ok| **ok).count() as u64,
            turns: self
                .turns
                .into_iter()
                .map(|(turn, t)| TurnSummary {
                    turn,
                    requests: t.requests,
                    succeeded: t.succeeded,
                    input_tokens_mean: mean(t.input_tokens as f64, t.succeeded),
                    ttft_ms_mean: mean(t.ttft_ns as f64, t.ttfts).map(|ns| ns / 1e6),
                    e2e_ms_mean: mean(t.e2e_ns as f64, t.succeeded).map(|ns| ns / 1e6),
                })
                .collect(),
        })
    }
}

/// Completes `summary` with what the server's metrics say: their summary ([`server_metrics_summary`]), and the
/// warm-cache warning where only they can give it (see `cache`).
pub fn add_server_metrics(
    dir: &Path,
    meta: &RunMeta,
    outcome: Option<&llmbench_metrics::server_metrics::ScrapeOutcome>,
    summary: &mut RunSummary,
) {
    summary.server_metrics = server_metrics_summary(dir, meta, outcome);
    if summary.prefix_cache_warm.is_none() {
        summary.prefix_cache_warm = cache::warm_from_server_metrics(meta, summary);
    }
}

/// The server-side summary of a run that scraped server metrics (run.json says so), from `server_metrics.jsonl`:
/// the whole run and each stage, each window reaching the scrape's lag past its end (a Prometheus server's samples
/// lag its scrapes). A file that cannot be read is a warning, never fatal: the client-side figures stand alone.
pub(crate) fn server_metrics_summary(
    dir: &Path,
    meta: &RunMeta,
    outcome: Option<&llmbench_metrics::server_metrics::ScrapeOutcome>,
) -> Option<llmbench_metrics::server_metrics::ServerMetricsSummary> {
    use llmbench_metrics::server_metrics::{StageWindow, Window, summarize_file};
    let scraped = meta.server_metrics.as_ref()?;
    let lag = scraped.lag_s;
    let stages: Vec<StageWindow> = meta
        .end
        .as_ref()
        .map(|end| {
            end.stages
                .iter()
                .enumerate()
                .map(|(stage, times)| StageWindow {
                    stage,
                    start_s: secs(times.start_ns),
                    end_s: secs(times.end_ns) + lag,
                    began_s: times.began_ns.map(secs),
                })
                .collect()
        })
        .unwrap_or_default();
    // A killed run has no stage times: its window is all that was scraped.
    let run = match (stages.first(), stages.last()) {
        (Some(first), Some(last)) => Window {
            start_s: first.start_s,
            end_s: last.end_s,
        },
        _ => Window {
            start_s: f64::NEG_INFINITY,
            end_s: f64::INFINITY,
        },
    };
    let interval = std::time::Duration::from_secs_f64(scraped.interval_s.max(0.1));
    let path = dir.join(SERVER_METRICS_FILE);
    match summarize_file(&path, interval, run, &stages, outcome) {
        Ok(mut summary) => {
            if outcome.is_none() {
                summary.warnings.extend(scraped.warnings.iter().cloned());
            }
            // The metrics' names are a second witness of the engine: say where they disagree with the server.
            if let Some(server) = &meta.server {
                summary
                    .warnings
                    .extend(llmbench_engine::stack::identity::metrics_disagree(
                        server,
                        summary
                            .targets
                            .iter()
                            .map(|t| (t.url.as_str(), t.engine.as_deref())),
                    ));
            }
            Some(summary)
        }
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "cannot summarize the server metrics");
            None
        }
    }
}

/// Writes the chosen tools' files into `dir`; returns their paths in the order written. `summary` is the
/// run's [`RunSummary`] from the same records (the llm-d report reads its throughput from it). Every file is
/// made of the measured requests only (see [`measured`]); a run that did not end as planned is marked so in
/// each file (`llmbench_run` at the top level).
pub fn write_all(
    dir: &Path,
    meta: &RunMeta,
    records: &[RequestRecord],
    summary: &RunSummary,
    formats: Formats,
) -> Result<Vec<PathBuf>, ReportError> {
    let measured = measured(meta, records);
    let stages = stage_buckets(&measured.records);
    let mut store = sample::FloatStore::memory();
    let mut native = native::Native::new(formats, &mut store);
    for r in records.iter().filter(|r| r.warmup) {
        native.add_warmup(r, meta, &mut store);
    }
    for r in &measured.records {
        native.add(r, meta, &mut store);
    }
    let peaks = if formats.vllm {
        stages
            .iter()
            .map(|(stage, bucket)| (*stage, vllm::stage_peak(bucket)))
            .collect()
    } else {
        Default::default()
    };
    let mut written = native.write(
        dir,
        meta,
        summary,
        &mut store,
        &peaks,
        Some(native::InMemory {
            records: &measured.records,
            stages: &stages,
        }),
        None,
    )?;
    if formats.aiperf {
        let mut per_request = aiperf_records::AiperfRecords::create(dir, meta)
            .map_err(|source| aiperf_records_error(dir, source))?;
        let mut phases = aiperf_phases::AiperfPhases::default();
        for r in records {
            per_request.add(r);
            phases.add(r, meta, &mut store);
        }
        let path = per_request
            .finish()
            .map_err(|source| aiperf_records_error(dir, source))?;
        written.push(path);
        written.extend(phases.write(dir, meta, &mut store)?);
    }
    Ok(written)
}

/// A failure to write AIPerf's `profile_export.jsonl` in `dir`.
fn aiperf_records_error(dir: &Path, source: std::io::Error) -> ReportError {
    ReportError::Write {
        path: dir.join(aiperf_records::AIPERF_RECORDS_FILE),
        source,
    }
}

/// What `llmbench report DIR` rebuilt.
#[derive(Debug)]
pub struct ReportOutcome {
    /// run.json (a sharded run's shards' merged).
    pub meta: RunMeta,
    pub summary: RunSummary,
    /// `summary.json` first, then every tool's file.
    pub files: Vec<PathBuf>,
    /// Truncated last lines of `requests.jsonl` skipped (a launcher killed mid-write leaves one).
    pub truncated_lines: usize,
}

/// Re-reads `run.json` and `requests.jsonl` in `dir`, rebuilds the summary and rewrites `summary.json`, the
/// harness's native files and the llm-d report; with `summary_file`, also the compact summary there. A run whose
/// launcher was killed has no end in run.json and may end in a torn record: the torn line is skipped and the
/// summary says the run is incomplete, with what it planned and what it recorded. Records files larger than
/// [`DEFAULT_RECORDS_MEMORY`] are summarised from disk (see [`report_dir_within`]). `model_load` is a nop run's
/// model-load figures, which its caller reads again from the files the nop harness wrote (none for other runs).
pub fn report_dir(
    dir: &Path,
    summary_file: Option<&Path>,
    model_load: Option<ModelLoadSummary>,
    draw: DrawPictures<'_>,
) -> Result<ReportOutcome, ReportError> {
    report_dir_within(dir, summary_file, DEFAULT_RECORDS_MEMORY, model_load, draw)
}

/// Every record of a run directory's records file in memory, and how many torn last records were skipped.
fn read_records(records: &RunRecords) -> Result<(Vec<RequestRecord>, usize), ReportError> {
    records.read_all().map_err(|source| ReportError::Records {
        path: records.path.clone(),
        source,
    })
}

/// [`report_dir`] with a memory budget: a run (or a sharded run's shards together) whose records files are
/// larger than `memory_bytes` is summarised from disk in bounded memory ([`summarize_spilled`]: the same
/// summary and the same files), its pictures drawn from the records streamed again when they fit the budget (else
/// named in a warning and in `summary.json`).
pub fn report_dir_within(
    dir: &Path,
    summary_file: Option<&Path>,
    memory_bytes: u64,
    model_load: Option<ModelLoadSummary>,
    draw: DrawPictures<'_>,
) -> Result<ReportOutcome, ReportError> {
    if let Some(sharded) = merge::read_sharded_metas(dir)? {
        if sharded.records_bytes > memory_bytes {
            return report_merged_spilled(dir, sharded, summary_file, memory_bytes, draw);
        }
        if let Some(merged) = merge::read_sharded(dir)? {
            return report_merged(dir, merged, summary_file, draw);
        }
    }
    let meta = RunMeta::read(dir)?;
    let records_file = RunRecords::in_dir(dir);
    if records_file.memory_estimate() > memory_bytes {
        let run = summarize_spilled(
            dir,
            &meta,
            &RecordsFile::of(dir),
            Formats::for_harness(meta.harness),
            memory_bytes,
        )?;
        let mut summary = run.summary().clone();
        add_server_metrics(dir, &meta, None, &mut summary);
        summary.model_load = model_load;
        let lost = lost::note_lost_in_flight(dir, &[dir.to_owned()], false, &mut summary)?;
        let mut outcome = write_rebuilt_spilled(
            dir,
            &meta,
            run,
            summary,
            summary_file,
            (&RecordsFile::of(dir), memory_bytes, draw),
        )?;
        outcome.files.extend(lost);
        return Ok(outcome);
    }
    let (records, truncated_lines) = read_records(&records_file)?;

    let mut summary = summarize_run(&meta, &records);
    add_server_metrics(dir, &meta, None, &mut summary);
    summary.model_load = model_load;
    let lost = lost::note_lost_in_flight(dir, &[dir.to_owned()], false, &mut summary)?;
    let mut outcome = write_rebuilt(
        dir,
        &meta,
        &records,
        summary,
        summary_file,
        truncated_lines,
        draw,
    )?;
    outcome.files.extend(lost);
    Ok(outcome)
}

/// What draws a run's pictures and `report.html` (`plot::RunPictures` for `llmbench report`): this module writes
/// the numbers and leaves drawing to its caller.
pub trait Pictures {
    /// From the run's records in memory.
    fn draw(&self, dir: &Path, meta: &RunMeta, records: &[RequestRecord], summary: &RunSummary);

    /// From its records streamed from `source`, within `memory_bytes` (a run summarised from disk).
    fn draw_streamed(
        &self,
        dir: &Path,
        meta: &RunMeta,
        source: &dyn RecordPasses,
        summary: &RunSummary,
        memory_bytes: u64,
    );
}

/// See [`Pictures`].
pub type DrawPictures<'a> = &'a dyn Pictures;

/// The server metrics' time series of a run directory, for the llm-d report and the plots; none when the run
/// scraped nothing or the file cannot be read (a warning).
pub fn server_series(dir: &Path) -> Vec<llmbench_metrics::server_metrics::ServerSeries> {
    let path = dir.join(SERVER_METRICS_FILE);
    if !path.exists() {
        return Vec::new();
    }
    llmbench_metrics::server_metrics::plot_series_file(&path).unwrap_or_else(|e| {
        tracing::warn!(path = %path.display(), error = %e, "cannot read the server metrics' series");
        Vec::new()
    })
}

/// `llmbench report` of a sharded run: the shards merged onto one timeline (see [`merge`]), then one exact
/// summary, every native report, the server metrics (shard 0's, moved onto the merged clock) and the pictures at
/// the run's root. Each shard's own files stay as they are, as diagnostics; no merged `run.json` or
/// `requests.jsonl` is written, so the shards stay the one source of the records.
fn report_merged(
    dir: &Path,
    merged: merge::Merged,
    summary_file: Option<&Path>,
    draw: DrawPictures<'_>,
) -> Result<ReportOutcome, ReportError> {
    let merge::Merged {
        meta,
        records,
        shards,
        offsets_ns,
        truncated_lines,
        warnings,
    } = merged;
    prepare_merged_root(dir, &meta, &shards, &offsets_ns, &warnings)?;
    let mut summary = summarize_run(&meta, &records);
    complete_merged_summary(dir, &meta, &shards, &warnings, &mut summary);
    let lost = lost::note_lost_in_flight(dir, &shards, true, &mut summary)?;
    let mut outcome = write_rebuilt(
        dir,
        &meta,
        &records,
        summary,
        summary_file,
        truncated_lines,
        draw,
    )?;
    outcome.files.extend(lost);
    Ok(outcome)
}

/// [`report_merged`] of shards whose records together outgrow `memory_bytes`: streamed from the shards' files onto
/// the merged timeline and summarised from disk ([`summarize_spilled`]), the same summary in bounded memory.
fn report_merged_spilled(
    dir: &Path,
    sharded: merge::Sharded,
    summary_file: Option<&Path>,
    memory_bytes: u64,
    draw: DrawPictures<'_>,
) -> Result<ReportOutcome, ReportError> {
    let merge::Sharded {
        merged,
        shards,
        records,
        ..
    } = sharded;
    let merge::MergedMeta {
        meta,
        offsets_ns,
        warnings,
    } = merged;
    prepare_merged_root(dir, &meta, &shards, &offsets_ns, &warnings)?;
    let run = summarize_spilled(
        dir,
        &meta,
        &records,
        Formats::for_harness(meta.harness),
        memory_bytes,
    )?;
    let mut summary = run.summary().clone();
    complete_merged_summary(dir, &meta, &shards, &warnings, &mut summary);
    let lost = lost::note_lost_in_flight(dir, &shards, true, &mut summary)?;
    let mut outcome = write_rebuilt_spilled(
        dir,
        &meta,
        run,
        summary,
        summary_file,
        (&records, memory_bytes, draw),
    )?;
    outcome.files.extend(lost);
    Ok(outcome)
}

/// What a merged run's root needs besides its records: the merge's warnings logged, shard 0's server metrics
/// moved onto the merged clock, and the profile as rendered (for report.html).
fn prepare_merged_root(
    dir: &Path,
    meta: &RunMeta,
    shards: &[PathBuf],
    offsets_ns: &[u64],
    warnings: &[String],
) -> Result<(), ReportError> {
    for warning in warnings {
        tracing::warn!("{warning}");
    }
    let server_file = dir.join(SERVER_METRICS_FILE);
    let shard0 = shards.first().filter(|_| meta.server_metrics.is_some());
    if let Some(shard0) = shard0 {
        let from = shard0.join(SERVER_METRICS_FILE);
        if from.is_file() {
            merge::shift_server_metrics(
                &from,
                &server_file,
                offsets_ns.first().copied().unwrap_or(0),
            )?;
        }
    }
    if let Some(first) = shards.first() {
        // The profile as rendered, for report.html: every shard ran the same one.
        let profile = first.join(PROFILE_FILE);
        if profile.is_file() {
            let _ = std::fs::copy(&profile, dir.join(PROFILE_FILE));
        }
    }
    Ok(())
}

/// A merged run's summary completed: the server metrics, the shards' starts and the merge's warnings.
fn complete_merged_summary(
    dir: &Path,
    meta: &RunMeta,
    shards: &[PathBuf],
    warnings: &[String],
    summary: &mut RunSummary,
) {
    add_server_metrics(dir, meta, None, &mut *summary);
    let shard_metas: Vec<RunMeta> = shards
        .iter()
        .filter_map(|shard| RunMeta::read(shard).ok())
        .collect();
    summary.shard_starts = shard_starts(&shard_metas);
    summary
        .ignored_keys
        .extend(warnings.iter().map(|w| format!("merge: {w}")));
}

/// Writes what `llmbench report` rebuilt from disk: `summary.json` (and the compact summary to `summary_file`),
/// the native reports, and the pictures when they fit the budget, drawn from the records streamed again from
/// `pictures`' source.
fn write_rebuilt_spilled(
    dir: &Path,
    meta: &RunMeta,
    run: SpilledRun,
    summary: RunSummary,
    summary_file: Option<&Path>,
    pictures: (&dyn RecordPasses, u64, DrawPictures<'_>),
) -> Result<ReportOutcome, ReportError> {
    let files = write_summaries(dir, &summary, summary_file)?;
    let truncated_lines = run.truncated_lines();
    let mut files = vec![files];
    files.extend(run.write_reports(dir, meta, &summary)?);
    let (source, memory_bytes, draw) = pictures;
    draw.draw_streamed(dir, meta, source, &summary, memory_bytes);
    Ok(ReportOutcome {
        meta: meta.clone(),
        summary,
        files,
        truncated_lines,
    })
}

/// Writes `summary.json` (and the compact summary to `summary_file`); returns summary.json's path.
fn write_summaries(
    dir: &Path,
    summary: &RunSummary,
    summary_file: Option<&Path>,
) -> Result<PathBuf, ReportError> {
    let summary_path = dir.join(SUMMARY_FILE);
    write_summary_json(&summary_path, summary).map_err(|source| ReportError::Summary {
        path: summary_path.clone(),
        source,
    })?;
    if let Some(path) = summary_file {
        write_compact_summary(path, summary).map_err(|source| ReportError::Summary {
            path: path.to_owned(),
            source,
        })?;
    }
    Ok(summary_path)
}

/// Writes what `llmbench report` rebuilt: `summary.json` (and the compact summary to `summary_file`), the
/// harness's native files, the llm-d report and the pictures.
fn write_rebuilt(
    dir: &Path,
    meta: &RunMeta,
    records: &[RequestRecord],
    summary: RunSummary,
    summary_file: Option<&Path>,
    truncated_lines: usize,
    draw: DrawPictures<'_>,
) -> Result<ReportOutcome, ReportError> {
    let mut files = vec![write_summaries(dir, &summary, summary_file)?];
    files.extend(write_all(
        dir,
        meta,
        records,
        &summary,
        Formats::for_harness(meta.harness),
    )?);
    draw.draw(dir, meta, records, &summary);
    Ok(ReportOutcome {
        meta: meta.clone(),
        summary,
        files,
        truncated_lines,
    })
}

/// The records of each stage, by ascending stage index, in record order.
fn stage_buckets<'a>(records: &[&'a RequestRecord]) -> Vec<(u32, Vec<&'a RequestRecord>)> {
    let mut stages: std::collections::BTreeMap<u32, Vec<&RequestRecord>> = Default::default();
    for record in records {
        stages.entry(record.stage).or_default().push(record);
    }
    stages.into_iter().collect()
}

fn write_json(path: &Path, what: &'static str, value: &impl Serialize) -> Result<(), ReportError> {
    let text = serde_json::to_string_pretty(value).map_err(|e| ReportError::Serialize {
        path: path.to_owned(),
        what,
        message: e.to_string(),
    })?;
    write_text(path, &text)
}

/// Writes `text` to `path` whole or not at all ([`write_whole`](llmbench_metrics::metrics::write_whole)).
pub(crate) fn write_text(path: &Path, text: &str) -> Result<(), ReportError> {
    llmbench_metrics::metrics::write_whole(path, text.as_bytes()).map_err(|source| {
        ReportError::Write {
            path: path.to_owned(),
            source,
        }
    })
}

/// Nanoseconds as seconds.
fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// A percentile as the Python tools spell it in their keys (`f"{p:g}"`): `1`, `99`, `0.1`, `99.9`.
fn percentile_word(p: f64) -> String {
    if p.fract() == 0.0 && p.abs() < 1e15 {
        format!("{}", p as i64)
    } else {
        format!("{p}")
    }
}

#[cfg(test)]
mod tests;
