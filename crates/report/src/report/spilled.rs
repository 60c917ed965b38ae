//! A run summarised from its records on disk in bounded memory: for runs too long to hold every record (the
//! launcher's `--records-memory` budget), and for `llmbench report` of such a run. The records are streamed from
//! `requests.jsonl` (or a sharded run's shard files) one at a time, and the summary is exactly
//! [`summarize_run`](super::summarize_run)'s, to the last bit:
//! - counts, token sums, extremes, exact integer moments and goodput and conversation tallies are gathered as the
//!   records go by, as the in-memory summary gathers them;
//! - every latency sample (one value per request and metric, one per chunk gap for ITL) is appended to a spill file
//!   per stage and metric, and the percentiles' order statistics are selected from the files
//!   ([`Spill::select`]), which reads exactly the values a full sort would;
//! - guidellm's warm-up and cool-down need a stage's completion order before any of its requests can be judged:
//!   when a profile sets them, a first pass spills each such stage's (end, id) places and selects the few the
//!   rules read.
//!
//! Memory is the per-stage accumulators, the spill files' write buffers and a selection's working set, all bounded
//! by constants and the budget, not by the run's length; the spill files live in a temporary directory inside
//! the run's, removed when the [`SpilledRun`] is dropped.
//!
//! Every native report is gathered in the same pass and written byte for byte as the in-memory path writes it
//! ([`SpilledRun::write_reports`]): those made of per-stage statistics (inference-perf's lifecycle metrics, vllm's
//! result JSON, AIPerf's export, the llm-d report) from the same kind of spilled samples, the per-request files
//! from spilled entries (`entries`), guidellm's report from spilled and sorted events (`guidellm::streamed`). The
//! pictures are drawn by the caller from a second pass ([`for_each_measured`]): each request's few numbers while
//! they fit half the budget ([`picture_points`]), past that a uniform sample of them, with the rates over time
//! still counted from every request.

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::path::{Path, PathBuf};

use super::aiperf_phases::AiperfPhases;
use super::aiperf_records::{AIPERF_RECORDS_FILE, AiperfRecords};
use super::guidellm::GuidellmStreamed;
use super::native::Native;
use super::sample::FloatStore;
use super::{Formats, INFERENCE_PERF_PERCENTILES, ReportError, RunMeta, Tally};
use llmbench_metrics::metrics::spill::{Slot, Spill, SpillDir};
use llmbench_metrics::metrics::stats::{NsMoments, squared_deviation};
use llmbench_metrics::metrics::summary::{Counts, METRICS, Metric, common_requested_rate};
use llmbench_metrics::metrics::transient::{
    Completed, CompletionOrder, Cuts, Phase, cuts as transient_cuts,
};
use llmbench_metrics::metrics::{
    AdapterSummary, Excluded, RecordsSpilled, RunSummary, StageSummary, Stats, Summary,
};
use llmbench_model::record::RequestRecord;
use llmbench_model::record_file::RunRecords;

/// Records to stream, as many times as the summary needs to read them.
pub trait RecordPasses {
    /// Calls `f` with every record, in the order they are stored, with the key that breaks ties of equal end
    /// times in completion order (see [`Completed::tie`]). Returns how many records were read and how many torn
    /// last lines were skipped.
    fn pass(&self, f: &mut dyn FnMut(&RequestRecord, [u64; 3])) -> Result<Passed, ReportError>;
}

/// What one pass read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Passed {
    pub records: u64,
    pub truncated_lines: usize,
}

/// The default budget for records held in memory (`llmbench run --records-memory`, `llmbench report
/// --records-memory`): 256 MiB, about 100 000 requests of 128 streamed tokens. Past it a run keeps no record in
/// memory and is summarised from disk.
pub const DEFAULT_RECORDS_MEMORY: u64 = 256 << 20;

/// A run directory's records: its `requests.bin`, or an earlier version's `requests.jsonl`.
#[derive(Debug, Clone)]
pub struct RecordsFile {
    pub records: RunRecords,
}

impl RecordsFile {
    /// The records file of the run in `dir`.
    pub fn of(dir: &Path) -> RecordsFile {
        RecordsFile {
            records: RunRecords::in_dir(dir),
        }
    }
}

impl RecordPasses for RecordsFile {
    fn pass(&self, f: &mut dyn FnMut(&RequestRecord, [u64; 3])) -> Result<Passed, ReportError> {
        self.stream(|record| f(&record, [0, 0, record.id]))
    }
}

impl RecordsFile {
    /// Hands every record of the file to `f`, one at a time.
    pub(crate) fn stream(&self, mut f: impl FnMut(RequestRecord)) -> Result<Passed, ReportError> {
        let mut records = 0u64;
        let truncated_lines = self
            .records
            .for_each(|record| {
                records += 1;
                f(record);
                Ok(())
            })
            .map_err(|source| ReportError::Records {
                path: self.records.path.clone(),
                source,
            })?;
        Ok(Passed {
            records,
            truncated_lines,
        })
    }
}

impl<T: RecordPasses + ?Sized> RecordPasses for &T {
    fn pass(&self, f: &mut dyn FnMut(&RequestRecord, [u64; 3])) -> Result<Passed, ReportError> {
        (**self).pass(f)
    }
}

/// Records held in memory, streamed as a file would be (the tests compare both summaries on them).
impl RecordPasses for [RequestRecord] {
    fn pass(&self, f: &mut dyn FnMut(&RequestRecord, [u64; 3])) -> Result<Passed, ReportError> {
        self.iter().for_each(|r| f(r, [0, 0, r.id]));
        Ok(Passed {
            records: self.len() as u64,
            truncated_lines: 0,
        })
    }
}

/// What the pictures keep of each measured request, in bytes (`plot::run::RequestPoint`, 72 bytes, with room).
pub const PICTURE_BYTES_PER_REQUEST: u64 = 80;

/// How many requests the pictures of a run summarised from disk place one by one: as many as fit in half the
/// records budget. A longer run's pictures place a uniform sample of that many, and count its rates over time
/// from every request (`plot::run::Sampled`).
pub fn picture_points(memory_bytes: u64) -> usize {
    usize::try_from(memory_bytes / 2 / PICTURE_BYTES_PER_REQUEST)
        .unwrap_or(usize::MAX)
        .max(1)
}

/// A run summarised from disk: its summary, and what its native reports are written from.
pub struct SpilledRun {
    summary: RunSummary,
    native: Native,
    store: FloatStore,
    peaks: BTreeMap<u32, (f64, u64)>,
    guidellm: Option<GuidellmStreamed>,
    /// AIPerf's `profile_export.jsonl`, written in the spill directory as the records went by.
    aiperf_records: Option<PathBuf>,
    /// AIPerf's per-phase exports, gathered as the records went by (their samples in `store`).
    aiperf_phases: Option<AiperfPhases>,
    memory_bytes: u64,
    truncated_lines: usize,
    /// Dropped last: the spill files go with it.
    _dir: SpillDir,
}

impl SpilledRun {
    /// The run's summary (its `records_spilled` says what was not written and why).
    pub fn summary(&self) -> &RunSummary {
        &self.summary
    }

    /// Torn last lines skipped while reading the records.
    pub fn truncated_lines(&self) -> usize {
        self.truncated_lines
    }

    /// Writes the native reports that are made of per-stage statistics into `dir` (see [`Native::write`]) and
    /// warns of each file not written; `summary` is the run's, completed (server metrics). Removes the spill
    /// files.
    pub fn write_reports(
        mut self,
        dir: &Path,
        meta: &RunMeta,
        summary: &RunSummary,
    ) -> Result<Vec<PathBuf>, ReportError> {
        let guidellm = match self.guidellm.as_mut() {
            Some(guidellm) => Some(
                guidellm
                    .report(meta, max_keys(self.memory_bytes, 32))
                    .map_err(|source| ReportError::Write {
                        path: self._dir.path().to_owned(),
                        source,
                    })?,
            ),
            None => None,
        };
        let written = self.native.write(
            dir,
            meta,
            summary,
            &mut self.store,
            &self.peaks,
            None,
            guidellm,
        )?;
        let mut written = written;
        if let Some(spilled) = &self.aiperf_records {
            let path = dir.join(AIPERF_RECORDS_FILE);
            std::fs::rename(spilled, &path).map_err(|source| ReportError::Write {
                path: path.clone(),
                source,
            })?;
            written.push(path);
        }
        if let Some(phases) = &self.aiperf_phases {
            written.extend(phases.write(dir, meta, &mut self.store)?);
        }
        for skipped in self
            .summary
            .records_spilled
            .iter()
            .flat_map(|note| &note.skipped)
        {
            tracing::warn!(
                file = skipped.file,
                reason = skipped.reason,
                "not written: the run's records outgrew the records memory budget and were summarised from disk"
            );
        }
        Ok(written)
    }
}

/// How many keys of `key_bytes` a selection may gather within `memory_bytes`: half of it (the sort runs in
/// place, and the rest of the summary needs a little too).
fn max_keys(memory_bytes: u64, key_bytes: usize) -> usize {
    usize::try_from(memory_bytes / 2 / key_bytes as u64)
        .unwrap_or(usize::MAX)
        .max(16)
}

/// The spill files' write buffers, all of them together: a sixteenth of the budget, at most 8 MiB.
fn buffer_bytes(memory_bytes: u64) -> usize {
    usize::try_from(memory_bytes / 16)
        .unwrap_or(usize::MAX)
        .min(8 << 20)
}

/// Summarises the run of `meta` from `source` in bounded memory: exactly [`super::summarize_run`]'s summary,
/// with `records_spilled` set; the native reports of `formats` are gathered too, for
/// [`SpilledRun::write_reports`]. The spill files go into a temporary directory inside `dir`.
pub fn summarize_spilled(
    dir: &Path,
    meta: &RunMeta,
    source: &(impl RecordPasses + ?Sized),
    formats: Formats,
    memory_bytes: u64,
) -> Result<SpilledRun, ReportError> {
    let spill_dir = SpillDir::create_in(dir).map_err(|source| ReportError::Write {
        path: dir.to_owned(),
        source,
    })?;
    let spill_error = |source: io::Error| ReportError::Write {
        path: spill_dir.path().to_owned(),
        source,
    };
    let cuts = transient_pass(meta, source, spill_dir.path(), memory_bytes)?;

    let mut ns: Spill<1> = Spill::new(spill_dir.path(), "ns", buffer_bytes(memory_bytes));
    let mut prefetch: Vec<f64> = meta
        .report
        .percentiles
        .iter()
        .chain(&INFERENCE_PERF_PERCENTILES)
        .chain(&meta.report.vllm_metric_percentiles)
        .map(|p| p / 100.0)
        .chain([0.5])
        .chain(super::llmd::STAT_PERCENTILES.map(|(_, p)| p))
        .chain(super::aiperf::AIPERF_PERCENTILES.map(|p| f64::from(p) / 100.0))
        .collect();
    prefetch.sort_by(f64::total_cmp);
    prefetch.dedup();
    let mut store = FloatStore::spilled(
        spill_dir.path(),
        max_keys(memory_bytes, 8),
        buffer_bytes(memory_bytes),
        prefetch,
    );
    let mut native = Native::spilled(
        formats,
        &mut store,
        spill_dir.path(),
        buffer_bytes(memory_bytes),
    );
    let mut peaks = formats
        .vllm
        .then(|| PeakSpill::new(spill_dir.path(), buffer_bytes(memory_bytes)));
    let mut guidellm = formats
        .guidellm
        .then(|| GuidellmStreamed::new(spill_dir.path(), buffer_bytes(memory_bytes)));
    let mut stages: BTreeMap<u32, StageSamples> = BTreeMap::new();
    // Each LoRA adapter's samples, beside its stage's: summary.json's `adapters`.
    let mut adapters: BTreeMap<std::sync::Arc<String>, StageSamples> = BTreeMap::new();
    let mut tally = Tally::new(meta);
    let mut excluded = Excluded::default();
    let mut write_failure: Option<io::Error> = None;
    // Every request, warm-up included, has its line in AIPerf's per-request file.
    let mut aiperf_records = formats
        .aiperf
        .then(|| AiperfRecords::create(spill_dir.path(), meta))
        .transpose()
        .map_err(spill_error)?;

    let mut aiperf_phases = formats.aiperf.then(AiperfPhases::default);
    let passed = source.pass(&mut |r, tie| {
        if let Some(per_request) = aiperf_records.as_mut() {
            per_request.add(r);
        }
        if let Some(phases) = aiperf_phases.as_mut() {
            phases.add(r, meta, &mut store);
        }
        match left_out(r, tie, &cuts) {
            Some(LeftOut::WarmupRequest) => {
                native.add_warmup(r, meta, &mut store);
                return excluded.warmup_requests += 1;
            }
            Some(LeftOut::Phase(Phase::Warmup)) => return excluded.warmup += 1,
            Some(LeftOut::Phase(Phase::Cooldown)) => return excluded.cooldown += 1,
            None => {}
        }
        let stage = stages
            .entry(r.stage)
            .or_insert_with(|| StageSamples::new(&mut ns));
        let slots = stage.slots;
        stage.counts.add(r, |metric, value| {
            if let Err(e) = ns.push(slots[metric as usize], [value])
                && write_failure.is_none()
            {
                write_failure = Some(e);
            }
        });
        if let Some(adapter) = &r.adapter {
            let samples = adapters
                .entry(std::sync::Arc::clone(adapter))
                .or_insert_with(|| StageSamples::new(&mut ns));
            let slots = samples.slots;
            samples.counts.add(r, |metric, value| {
                if let Err(e) = ns.push(slots[metric as usize], [value])
                    && write_failure.is_none()
                {
                    write_failure = Some(e);
                }
            });
        }
        tally.add(r);
        native.add(r, meta, &mut store);
        if let Some(guidellm) = guidellm.as_mut() {
            guidellm.add(meta, r);
        }
        if let Some(peaks) = peaks.as_mut()
            && let Err(e) = peaks.add(r)
            && write_failure.is_none()
        {
            write_failure = Some(e);
        }
    })?;
    if let Some(e) = write_failure {
        return Err(spill_error(e));
    }
    store.check().map_err(spill_error)?;
    native.check().map_err(spill_error)?;
    let aiperf_records = aiperf_records
        .map(AiperfRecords::finish)
        .transpose()
        .map_err(spill_error)?;
    if let Some(guidellm) = guidellm.as_mut() {
        guidellm.check().map_err(spill_error)?;
    }

    let max_in_memory = max_keys(memory_bytes, 8);
    let mut stats = StatsCache::default();
    let rates = meta.shard_requested_rates();
    let mut overall = Counts::default();
    let mut summaries = Vec::with_capacity(stages.len());
    for (stage, samples) in &stages {
        let summary = stage_summary(
            &samples.counts,
            rates.get(*stage as usize).copied().flatten(),
            |metric| vec![samples.slots[metric as usize]],
            &ns,
            &mut stats,
            max_in_memory,
        )
        .map_err(spill_error)?;
        summaries.push(StageSummary {
            stage: *stage,
            summary,
            stopped: None,
        });
        overall.absorb(&samples.counts);
    }
    let overall = stage_summary(
        &overall,
        common_requested_rate(&summaries),
        |metric| stages.values().map(|s| s.slots[metric as usize]).collect(),
        &ns,
        &mut stats,
        max_in_memory,
    )
    .map_err(spill_error)?;
    let mut summary = RunSummary::new(super::run_info(meta), overall, summaries);
    for (adapter, samples) in &adapters {
        let adapter_summary = stage_summary(
            &samples.counts,
            None,
            |metric| vec![samples.slots[metric as usize]],
            &ns,
            &mut stats,
            max_in_memory,
        )
        .map_err(spill_error)?;
        summary.adapters.push(AdapterSummary {
            adapter: adapter.to_string(),
            summary: adapter_summary,
        });
    }
    tally.finish(meta, &mut summary, excluded, passed.records);
    summary.records_spilled = Some(RecordsSpilled {
        memory_bytes,
        // Every file is written, at any length.
        skipped: Vec::new(),
    });
    let peaks = match peaks {
        Some(peaks) => peaks.finish().map_err(spill_error)?,
        None => BTreeMap::new(),
    };
    Ok(SpilledRun {
        summary,
        native,
        store,
        peaks,
        guidellm,
        aiperf_records,
        aiperf_phases,
        memory_bytes,
        truncated_lines: passed.truncated_lines,
        _dir: spill_dir,
    })
}

/// Why a record is not measured.
enum LeftOut {
    /// vllm's `--num-warmups` and the like: sent before the first stage.
    WarmupRequest,
    /// In its stage's guidellm warm-up or cool-down.
    Phase(Phase),
}

/// Whether the summary leaves `r` (with completion-order tie key `tie`) out, given each stage's `cuts`.
fn left_out(r: &RequestRecord, tie: [u64; 3], cuts: &BTreeMap<u32, Cuts>) -> Option<LeftOut> {
    if r.warmup {
        return Some(LeftOut::WarmupRequest);
    }
    let place = Completed {
        end_ns: r.end_ns,
        tie,
        sent_ns: r.sent_ns,
    };
    cuts.get(&r.stage)?
        .leaves_out(r, &place)
        .map(LeftOut::Phase)
}

/// Calls `f` with every measured record of `source`, in the order stored, leaving out what the summary leaves
/// out (see [`summarize_spilled`]); a profile's guidellm warm-up and cool-down are worked out first, in bounded
/// memory, with spill files in a temporary directory inside `dir`. What the pictures of a long run are drawn from.
pub fn for_each_measured(
    dir: &Path,
    meta: &RunMeta,
    source: &(impl RecordPasses + ?Sized),
    memory_bytes: u64,
    mut f: impl FnMut(&RequestRecord),
) -> Result<Passed, ReportError> {
    let spill_dir = SpillDir::create_in(dir).map_err(|source| ReportError::Write {
        path: dir.to_owned(),
        source,
    })?;
    let cuts = transient_pass(meta, source, spill_dir.path(), memory_bytes)?;
    source.pass(&mut |r, tie| {
        if left_out(r, tie, &cuts).is_none() {
            f(r)
        }
    })
}

/// One stage's counts and the spill slots of its samples, one per [`Metric`].
struct StageSamples {
    counts: Counts,
    slots: [Slot; METRICS],
}

impl StageSamples {
    fn new(ns: &mut Spill<1>) -> StageSamples {
        StageSamples {
            counts: Counts::default(),
            slots: Metric::ALL.map(|_| ns.slot()),
        }
    }
}

/// Statistics already selected, by the slots they are of: a run of one stage has the same samples overall.
#[derive(Default)]
struct StatsCache(HashMap<Vec<Slot>, Option<Stats>>);

/// The summary of `counts`, each metric's statistics selected from the spill `slots(metric)`.
fn stage_summary(
    counts: &Counts,
    requested_rate: Option<f64>,
    slots: impl Fn(Metric) -> Vec<Slot>,
    ns: &Spill<1>,
    cache: &mut StatsCache,
    max_in_memory: usize,
) -> io::Result<Summary> {
    let mut failure = None;
    let summary = counts.summary_with(requested_rate, |metric, moments| {
        let slots = slots(metric);
        if let Some(known) = cache.0.get(&slots) {
            return *known;
        }
        match spilled_stats(ns, &slots, moments, max_in_memory) {
            Ok(stats) => {
                cache.0.insert(slots, stats);
                stats
            }
            Err(e) => {
                failure.get_or_insert(e);
                None
            }
        }
    });
    failure.map_or(Ok(summary), Err)
}

/// [`Stats`] of nanosecond samples in spill `slots`, whose moments are `moments`.
fn spilled_stats(
    ns: &Spill<1>,
    slots: &[Slot],
    moments: &NsMoments,
    max_in_memory: usize,
) -> io::Result<Option<Stats>> {
    let mut select_failure = None;
    let mut read_failure = None;
    let stats = Stats::from_ns_moments(
        moments,
        |ranks| {
            let wanted: Vec<u64> = ranks.iter().map(|&r| r as u64).collect();
            match ns.select(
                slots,
                &wanted,
                Some((moments.min(), moments.max())),
                max_in_memory,
            ) {
                Ok(keys) => keys.into_iter().map(|k| k[0]).collect(),
                Err(e) => {
                    select_failure = Some(e);
                    vec![0; ranks.len()]
                }
            }
        },
        |mean| {
            // The same terms as in memory, into one exact sum: equal whatever order they come in.
            let mut sum = llmbench_metrics::metrics::fsum::Fsum::new();
            if let Err(e) = ns.for_each(slots, |k| sum.add(squared_deviation(k[0], mean))) {
                read_failure = Some(e);
            }
            sum.value()
        },
    );
    select_failure.or(read_failure).map_or(Ok(stats), Err)
}

/// Each transient stage's completion order, spilled: `[end, tie…, sent]` per record.
struct SpilledOrder<'a> {
    spill: &'a Spill<5>,
    slot: Slot,
    len: u64,
    min_sent_ns: u64,
    min_scheduled_ns: u64,
    max_in_memory: usize,
    failure: Option<io::Error>,
}

impl CompletionOrder for SpilledOrder<'_> {
    fn count(&self) -> u64 {
        self.len
    }

    fn min_sent_ns(&self) -> u64 {
        self.min_sent_ns
    }

    fn min_scheduled_ns(&self) -> u64 {
        self.min_scheduled_ns
    }

    fn at(&mut self, position: u64) -> Option<Completed> {
        if position >= self.len {
            return None;
        }
        match self
            .spill
            .select(&[self.slot], &[position], None, self.max_in_memory)
        {
            Ok(keys) => keys.first().map(|k| Completed {
                end_ns: k[0],
                tie: [k[1], k[2], k[3]],
                sent_ns: k[4],
            }),
            Err(e) => {
                self.failure.get_or_insert(e);
                None
            }
        }
    }
}

/// The first pass, for a run whose profile sets guidellm warm-up or cool-down: each such stage's cuts.
fn transient_pass(
    meta: &RunMeta,
    source: &(impl RecordPasses + ?Sized),
    spill_dir: &Path,
    memory_bytes: u64,
) -> Result<BTreeMap<u32, Cuts>, ReportError> {
    let transient = |stage: u32| {
        let bounds = meta.stage_bounds(stage);
        bounds.warmup.is_some() || bounds.cooldown.is_some()
    };
    if !(0..meta.stages.len() as u32).any(transient) {
        return Ok(BTreeMap::new());
    }
    let spill_error = |source: io::Error| ReportError::Write {
        path: spill_dir.to_owned(),
        source,
    };
    struct Seen {
        slot: Slot,
        len: u64,
        min_sent_ns: u64,
        min_scheduled_ns: u64,
    }
    let mut spill: Spill<5> = Spill::new(spill_dir, "order", buffer_bytes(memory_bytes));
    let mut seen: BTreeMap<u32, Seen> = BTreeMap::new();
    let mut failure = None;
    source.pass(&mut |r, tie| {
        if r.warmup || !transient(r.stage) {
            return;
        }
        let stage = seen.entry(r.stage).or_insert_with(|| Seen {
            slot: spill.slot(),
            len: 0,
            min_sent_ns: u64::MAX,
            min_scheduled_ns: u64::MAX,
        });
        stage.len += 1;
        stage.min_sent_ns = stage.min_sent_ns.min(r.sent_ns);
        stage.min_scheduled_ns = stage.min_scheduled_ns.min(r.scheduled_ns);
        if let Err(e) = spill.push(stage.slot, [r.end_ns, tie[0], tie[1], tie[2], r.sent_ns])
            && failure.is_none()
        {
            failure = Some(e);
        }
    })?;
    if let Some(e) = failure {
        return Err(spill_error(e));
    }
    let mut cuts = BTreeMap::new();
    for (stage, s) in seen {
        let mut order = SpilledOrder {
            spill: &spill,
            slot: s.slot,
            len: s.len,
            min_sent_ns: s.min_sent_ns,
            min_scheduled_ns: s.min_scheduled_ns,
            max_in_memory: max_keys(memory_bytes, 40),
            failure: None,
        };
        let stage_cuts = transient_cuts(&meta.stage_bounds(stage), &mut order);
        if let Some(e) = order.failure {
            return Err(spill_error(e));
        }
        cuts.insert(stage, stage_cuts);
    }
    Ok(cuts)
}

/// vllm's peak second per stage: its successes' sends, ends and `choices` chunks spilled as they go by, counted
/// once the stage's first send is known.
struct PeakSpill {
    spill: Spill<2>,
    stages: BTreeMap<u32, PeakStage>,
}

struct PeakStage {
    /// `[at, 0]` per `choices` chunk.
    tokens: Slot,
    /// `[sent, end]` per request.
    requests: Slot,
    min_start_ns: u64,
    max_end_ns: u64,
}

impl PeakSpill {
    fn new(dir: &Path, buffer_bytes: usize) -> PeakSpill {
        PeakSpill {
            spill: Spill::new(dir, "peak", buffer_bytes),
            stages: BTreeMap::new(),
        }
    }

    fn add(&mut self, r: &RequestRecord) -> io::Result<()> {
        if !super::vllm::succeeded(r) {
            return Ok(());
        }
        let spill = &mut self.spill;
        let stage = self.stages.entry(r.stage).or_insert_with(|| PeakStage {
            tokens: spill.slot(),
            requests: spill.slot(),
            min_start_ns: u64::MAX,
            max_end_ns: 0,
        });
        let (sent, end_of, chunks) = super::vllm::peak_events(r);
        stage.min_start_ns = stage.min_start_ns.min(sent);
        stage.max_end_ns = stage.max_end_ns.max(end_of);
        spill.push(stage.requests, [sent, end_of])?;
        for at in chunks {
            spill.push(stage.tokens, [at, 0])?;
        }
        Ok(())
    }

    fn finish(self) -> io::Result<BTreeMap<u32, (f64, u64)>> {
        use super::vllm::{Event, peak_second_of};
        let mut peaks = BTreeMap::new();
        for (stage, s) in &self.stages {
            let peak = peak_second_of(s.min_start_ns, s.max_end_ns, |count| {
                self.spill.for_each(&[s.requests], |k| {
                    count(Event::Request {
                        sent: k[0],
                        end_of: k[1],
                    })
                })?;
                self.spill
                    .for_each(&[s.tokens], |k| count(Event::Token { at: k[0] }))
            })?;
            peaks.insert(*stage, peak);
        }
        Ok(peaks)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{RunEnd, RunState, Slo, StageEnd, StageMeta, summarize_run, write_all};
    use llmbench_core::harness::Harness;
    use llmbench_model::record::{ChunkEvent, ChunkKind, ErrorClass, RequestError};
    use llmbench_workload::workload::{SloMetric, Transient, TransientMode, TransientPhase};
    use proptest::prelude::*;

    const MS: u64 = 1_000_000;
    /// A budget of 1 KiB: selections gather at most 64 keys and the write buffers hold 8, so every sample goes
    /// through its file and every percentile through several counting passes.
    const TINY: u64 = 1024;

    /// xorshift64*: a fixed pseudo-random sequence.
    fn pseudo_random(seed: u64) -> impl FnMut(u64) -> u64 {
        let mut x = seed | 1;
        move |bound| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            x.wrapping_mul(0x2545_F491_4F6C_DD1D) % bound.max(1)
        }
    }

    /// `n` records of three stages with everything a summary tells apart: vllm warm-ups, failures of every kind
    /// (cancelled before and after the send, HTTP statuses with and without an error), non-streaming requests,
    /// role-only and usage-only chunks, multi-token chunks, conversations, equal end times (completion-order
    /// ties), a few minutes-long stalls, and stage 0's stragglers finishing among stage 1's records.
    fn varied(seed: u64, n: u64) -> Vec<RequestRecord> {
        let mut next = pseudo_random(seed);
        let mut records: Vec<RequestRecord> = (0..n)
            .map(|id| {
                let stage = (id * 3 / n.max(1)) as u32;
                let scheduled = stage as u64 * 10_000 * MS + id * 7 * MS + next(3) * MS;
                let sent = scheduled + next(4) * 250_000;
                let streaming = next(5) != 0;
                let mut at = sent + next(80) * MS;
                let mut chunks = Vec::new();
                if next(2) == 0 {
                    chunks.push(ChunkEvent {
                        at_ns: at,
                        kind: ChunkKind::Empty,
                    });
                }
                for _ in 0..next(12) {
                    // Rounded gaps, so samples hold many equal values.
                    at += next(6) * 500_000 + if next(200) == 0 { 90_000 * MS } else { 0 };
                    chunks.push(ChunkEvent {
                        at_ns: at,
                        kind: ChunkKind::Content {
                            tokens: [1, 1, 1, 2, 3, 0][next(6) as usize] as u32,
                        },
                    });
                }
                if next(3) == 0 {
                    at += MS;
                    chunks.push(ChunkEvent {
                        at_ns: at,
                        kind: ChunkKind::UsageOnly,
                    });
                }
                if !streaming {
                    chunks.truncate(1);
                }
                let mut record = RequestRecord::builder(id)
                    .stage(stage)
                    .sent(sent)
                    .scheduled(scheduled)
                    // Ends on a 4 ms grid: several requests end at the same instant.
                    .end((at + MS) / (4 * MS) * (4 * MS) + 4 * MS)
                    .input_tokens(10 + next(50) as u32)
                    .max_tokens(16)
                    .streaming(streaming)
                    .ok();
                if next(2) == 0 {
                    record = record.usage(12 + next(40) as u32, next(20) as u32);
                }
                for chunk in chunks {
                    record = record.chunk(chunk.at_ns, chunk.kind);
                }
                if next(2) == 0 {
                    record = record.turn(next(9) as u32, next(3) as u32);
                }
                if stage == 0 && id < 3 {
                    record = record.warmup();
                }
                let mut r = record.build();
                // Two LoRA adapters and the base model, in turn (no draw, so the records stay as they were).
                r.adapter = [None, Some("sql-lora"), Some("chat/lora")][(id % 3) as usize]
                    .map(|name| std::sync::Arc::new(name.to_owned()));
                match next(14) {
                    0 => {
                        r.error = Some(Box::new(RequestError {
                            class: ErrorClass::Timeout,
                            message: "timed out".into(),
                        }))
                    }
                    1 => {
                        r.http_status = Some([429, 503][next(2) as usize]);
                        r.error = Some(Box::new(RequestError {
                            class: ErrorClass::HttpStatus,
                            message: format!("status {}", next(3)),
                        }));
                    }
                    2 => r.http_status = Some(500),
                    3 => {
                        // Cancelled before it was sent.
                        r.sent_ns = r.end_ns;
                        r.http_status = None;
                        r.chunks.clear();
                        r.error = Some(Box::new(RequestError {
                            class: ErrorClass::Cancelled,
                            message: String::new(),
                        }));
                    }
                    4 => {
                        r.error = Some(Box::new(RequestError {
                            class: ErrorClass::StreamCut,
                            message: "ended before [DONE]".into(),
                        }))
                    }
                    _ => {}
                }
                r
            })
            .collect();
        // Finishing order, as requests.jsonl holds them: by end, so stage 0's slowest land among stage 1's.
        records.sort_by_key(|r| r.end_ns);
        records
    }

    fn phase(percent: Option<f64>, value: Option<f64>, mode: TransientMode) -> Option<Transient> {
        Some(Transient::GuidellmPhase(TransientPhase {
            percent,
            value,
            mode,
        }))
    }

    /// Run metadata for `varied` records: stage 0 with guidellm v0.3 fractions, stage 1 with v0.4 phases by count
    /// and by time, stage 2 with neither; goodput objectives of `harness`'s definition.
    fn meta_for(harness: Harness, n: u64, transient: u8) -> RunMeta {
        let mut meta = crate::report::tests::meta();
        meta.harness = harness;
        let third = (n / 3).max(1);
        let fraction = |f| Some(Transient::GuidellmFraction { fraction: f });
        let (w0, c0, w1, c1) = match transient % 4 {
            0 => (None, None, None, None),
            1 => (
                fraction(0.1),
                fraction(0.2),
                phase(None, Some(3.0), TransientMode::Requests),
                phase(Some(0.1), None, TransientMode::Both),
            ),
            2 => (
                fraction(0.3),
                None,
                phase(Some(0.25), None, TransientMode::PreferDuration),
                phase(None, Some(2.0), TransientMode::Requests),
            ),
            _ => (
                None,
                fraction(0.05),
                phase(None, Some(0.05), TransientMode::Duration),
                phase(Some(0.3), None, TransientMode::PreferRequests),
            ),
        };
        meta.stages = vec![
            StageMeta {
                rate: Some(5.0),
                max_requests: Some(third),
                max_duration_s: Some(third as f64 * 0.007 + 0.05),
                warmup: w0,
                cooldown: c0,
                ..StageMeta::default()
            },
            StageMeta {
                concurrency: Some(4),
                max_requests: Some(third),
                max_duration_s: Some(third as f64 * 0.007 + 0.05),
                warmup: w1,
                cooldown: c1,
                ..StageMeta::default()
            },
            StageMeta {
                rate: Some(5.0),
                ..StageMeta::default()
            },
        ];
        meta.end = Some(RunEnd {
            state: RunState::Complete,
            stopped: None,
            planned: Some(n),
            sent: n,
            finished: n,
            // Each stage starts where `varied` schedules its first request.
            stages: (0..3)
                .map(|s| StageEnd {
                    began_ns: None,
                    start_ns: s * 10_000 * MS + s * n / 3 * 7 * MS,
                    end_ns: s * 10_000 * MS + 9_000 * MS,
                    stopped: None,
                    sessions: Vec::new(),
                })
                .collect(),
            failed: None,
        });
        meta.report.goodput = match harness {
            Harness::VllmBenchmark => vec![
                Slo {
                    metric: SloMetric::Ttft,
                    limit_s: 0.05,
                },
                Slo {
                    metric: SloMetric::Tpot,
                    limit_s: 0.002,
                },
            ],
            _ => vec![
                Slo {
                    metric: SloMetric::Ttft,
                    limit_s: 0.04,
                },
                Slo {
                    metric: SloMetric::Itl,
                    limit_s: 0.002,
                },
                Slo {
                    metric: SloMetric::E2e,
                    limit_s: 0.07,
                },
            ],
        };
        meta.report.inference_perf_per_adapter_stage = true;
        meta.report.vllm_metric_percentiles = vec![25.0, 50.0, 99.0, 99.9];
        meta.report.vllm_percentile_metrics =
            ["ttft", "tpot", "itl", "e2el"].map(String::from).to_vec();
        meta
    }

    /// The summary from disk, without the note saying it was.
    fn from_disk(meta: &RunMeta, records: &[RequestRecord], memory: u64) -> RunSummary {
        let dir = tempfile::tempdir().expect("temp dir");
        let run =
            summarize_spilled(dir.path(), meta, records, Formats::ALL, memory).expect("spilled");
        let mut summary = run.summary().clone();
        assert!(summary.records_spilled.take().is_some());
        summary
    }

    /// The same summary, compared as values and as the JSON summary.json holds, bit for bit.
    fn assert_same(got: &RunSummary, expected: &RunSummary) {
        assert_eq!(got, expected);
        assert_eq!(got.to_json_pretty(), expected.to_json_pretty());
    }

    #[test]
    fn the_summary_from_disk_is_the_summary_in_memory_bit_for_bit() {
        for (seed, harness, transient) in [
            (1, Harness::InferencePerf, 0),
            (2, Harness::Guidellm, 1),
            (3, Harness::VllmBenchmark, 2),
            (4, Harness::Guidellm, 3),
        ] {
            let records = varied(seed, 600);
            let meta = meta_for(harness, 600, transient);
            let expected = summarize_run(&meta, &records);
            assert!(
                expected.stages.len() == 3 && expected.conversations.is_some(),
                "{:?} {:?}",
                expected
                    .stages
                    .iter()
                    .map(|s| (s.stage, s.summary.requests))
                    .collect::<Vec<_>>(),
                records.iter().filter(|r| r.stage == 1).count()
            );
            assert!(expected.overall.requests.failed > 0 && expected.overall.goodput.is_some());
            assert_eq!(expected.adapters.len(), 2);
            if transient > 0 {
                assert!(expected.excluded.warmup + expected.excluded.cooldown > 0);
            }
            for memory in [TINY, 64 << 10, DEFAULT_RECORDS_MEMORY] {
                assert_same(&from_disk(&meta, &records, memory), &expected);
            }
        }
    }

    /// Every file under `dir` (spill files aside), by path relative to it, with its bytes.
    fn files_under(dir: &Path) -> BTreeMap<String, Vec<u8>> {
        fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
            for entry in std::fs::read_dir(dir).expect("dir").filter_map(Result::ok) {
                let path = entry.path();
                if path.is_dir() {
                    walk(root, &path, out);
                } else {
                    let name = path
                        .strip_prefix(root)
                        .expect("under the root")
                        .to_string_lossy()
                        .into_owned();
                    out.insert(name, std::fs::read(&path).expect("read"));
                }
            }
        }
        let mut out = BTreeMap::new();
        walk(dir, dir, &mut out);
        out
    }

    #[test]
    fn every_report_written_from_disk_is_the_one_written_from_memory() {
        for (seed, harness, transient, memory) in [
            (5, Harness::InferencePerf, 1, TINY),
            (6, Harness::VllmBenchmark, 2, TINY),
            (7, Harness::Guidellm, 3, TINY),
            (8, Harness::Guidellm, 1, 64 << 10),
            (9, Harness::InferencePerf, 0, DEFAULT_RECORDS_MEMORY),
        ] {
            let records = varied(seed, 450);
            let mut meta = meta_for(harness, 450, transient);
            meta.report.inference_perf_per_request = true;
            meta.report.vllm_save_detailed = true;
            let summary = summarize_run(&meta, &records);
            let in_memory = tempfile::tempdir().expect("temp dir");
            let written = write_all(in_memory.path(), &meta, &records, &summary, Formats::ALL)
                .expect("in memory");
            crate::plot::write_pictures(in_memory.path(), &meta, &records, &summary);
            let disk = tempfile::tempdir().expect("temp dir");
            let run =
                summarize_spilled(disk.path(), &meta, records.as_slice(), Formats::ALL, memory)
                    .expect("spilled");
            let from_disk = run
                .write_reports(disk.path(), &meta, &summary)
                .expect("reports");
            crate::plot::write_pictures_streamed(
                disk.path(),
                &meta,
                &records.as_slice(),
                &summary,
                memory,
            );
            // The same files, written in the same order: every tool's (guidellm's, AIPerf's, the per-request
            // ones included), the pictures and report.html.
            let name = |p: &PathBuf| p.file_name().map(|n| n.to_string_lossy().into_owned());
            assert_eq!(
                from_disk.iter().map(name).collect::<Vec<_>>(),
                written.iter().map(name).collect::<Vec<_>>()
            );
            assert!(from_disk.len() >= 12, "{from_disk:?}");
            let (got, expected) = (files_under(disk.path()), files_under(in_memory.path()));
            assert_eq!(
                got.keys().collect::<Vec<_>>(),
                expected.keys().collect::<Vec<_>>()
            );
            assert!(
                expected.contains_key("report.html")
                    && expected.keys().filter(|k| k.starts_with("plots/")).count() >= 10,
                "{:?}",
                expected.keys()
            );
            // Byte for byte, the pictures (SVG and PNG) too while every request's point fits the budget; past it
            // the pictures place a sample, and every other file is still the same.
            let whole_pictures = picture_points(memory) >= records.len();
            for (file, bytes) in &expected {
                let picture = file.starts_with("plots/") || file == "report.html";
                assert!(
                    got[file] == *bytes || (picture && !whole_pictures),
                    "{file} differs (seed {seed}, budget {memory})"
                );
            }
            // Nothing of the spill files is left.
            assert!(
                got.keys().all(|k| !k.starts_with(".llmbench-spill")),
                "{:?}",
                got.keys()
            );
        }
    }

    #[test]
    fn a_small_case_worked_by_hand() {
        // Two streamed requests of stage 0, sent at 0 and 100 ms: content chunks at +10, +20, +40 ms and +10,
        // +50, +110 ms, ending 10 ms after their last chunk. ITL pools 10, 20, 40, 60 ms; TTFT 10, 10; E2E 50, 120.
        let record = |id: u64, sent_ms: u64, chunks_ms: &[u64]| {
            let mut record = RequestRecord::builder(id)
                .sent(sent_ms * MS)
                .end((sent_ms + chunks_ms[chunks_ms.len() - 1] + 10) * MS)
                .input_tokens(10)
                .ok();
            for &c in chunks_ms {
                record = record.content_at((sent_ms + c) * MS, 1);
            }
            record.build()
        };
        let records = [record(0, 0, &[10, 20, 40]), record(1, 100, &[10, 50, 110])];
        let meta = crate::report::tests::meta();
        let s = from_disk(&meta, &records, TINY);
        let itl = s.overall.latency_ms.itl.expect("itl");
        // [10, 20, 40, 60]: mean 32.5; p50 at index 1.5 → 30; p90 at index 2.7 → 40 + 0.7·20 = 54.
        assert_eq!(
            (itl.count, itl.mean, itl.min, itl.max),
            (4, 32.5, 10.0, 60.0)
        );
        assert_eq!(itl.p50, 30.0);
        assert!((itl.p90 - 54.0).abs() < 1e-9);
        let e2e = s.overall.latency_ms.e2e.expect("e2e");
        // E2E 50 and 120 ms: p50 85.
        assert_eq!((e2e.mean, e2e.p50), (85.0, 85.0));
        // TPOT (40 − 10)/2 = 15 and (110 − 10)/2 = 50.
        assert_eq!(s.overall.latency_ms.tpot.expect("tpot").mean, 32.5);
        // The window: first send 0 to last end 220 ms; 6 output tokens.
        assert_eq!(s.overall.duration_s, 0.22);
        assert!((s.overall.throughput.output_tokens_per_s - 6.0 / 0.22).abs() < 1e-9);
        assert_same(&s, &summarize_run(&meta, &records));
    }

    #[test]
    fn a_sharded_run_streamed_from_its_shards_equals_the_merge_in_memory() {
        let root = tempfile::tempdir().expect("temp dir");
        let records = varied(9, 300);
        let mut shards = Vec::new();
        for index in 0..3u32 {
            let mut meta = meta_for(Harness::Guidellm, 300, 1);
            meta.shard = crate::report::ShardMeta { index, count: 3 };
            meta.t0_unix_ns += u64::from(index) * 7 * MS;
            let mine: Vec<RequestRecord> = records
                .iter()
                .filter(|r| r.id % 3 == u64::from(index))
                .cloned()
                .collect();
            let dir = root.path().join(format!("shard-{index}"));
            std::fs::create_dir(&dir).expect("shard dir");
            meta.write(&dir).expect("run.json");
            let lines: String = mine
                .iter()
                .map(|r| serde_json::to_string(r).expect("json") + "\n")
                .collect();
            // An earlier version's records, as JSON lines: still read.
            std::fs::write(dir.join(crate::report::REQUESTS_JSONL_FILE), lines).expect("records");
            shards.push((meta, mine));
        }
        let merged = crate::report::merge::merge(shards).expect("merge");
        let expected = summarize_run(&merged.meta, &merged.records);
        let sharded = crate::report::merge::read_sharded_metas(root.path())
            .expect("read")
            .expect("sharded");
        let run = summarize_spilled(
            root.path(),
            &sharded.merged.meta,
            &sharded.records,
            Formats::ALL,
            TINY,
        )
        .expect("spilled");
        let mut got = run.summary().clone();
        got.records_spilled = None;
        assert_same(&got, &expected);
    }

    #[test]
    fn report_dir_within_a_small_budget_rebuilds_the_same_summary() {
        let dir = tempfile::tempdir().expect("temp dir");
        let records = varied(11, 200);
        let meta = meta_for(Harness::InferencePerf, 200, 0);
        meta.write(dir.path()).expect("run.json");
        std::fs::write(
            dir.path().join(crate::report::REQUESTS_FILE),
            llmbench_model::record_file::file_bytes(&records),
        )
        .expect("records");
        let in_memory =
            crate::report::report_dir(dir.path(), None, None, &crate::plot::RunPictures)
                .expect("in memory");
        assert!(in_memory.summary.records_spilled.is_none());
        let spilled = crate::report::report_dir_within(
            dir.path(),
            None,
            TINY,
            None,
            &crate::plot::RunPictures,
        )
        .expect("from disk");
        let mut summary = spilled.summary.clone();
        let note = summary.records_spilled.take().expect("said so");
        assert!(note.skipped.is_empty(), "{:?}", note.skipped);
        assert_same(&summary, &in_memory.summary);
        // summary.json says the run was summarised from disk.
        let text = std::fs::read_to_string(dir.path().join(crate::report::SUMMARY_FILE))
            .expect("summary.json");
        assert!(text.contains("records_spilled"), "{text}");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(40))]
        /// Any records, any transient rules, any budget: the summary from disk is the one in memory.
        #[test]
        fn summaries_from_disk_and_memory_agree(
            seed in any::<u64>(),
            n in 1u64..160,
            transient in 0u8..4,
            harness in prop::sample::select(vec![Harness::InferencePerf, Harness::Guidellm, Harness::VllmBenchmark]),
            memory in 200u64..4096,
        ) {
            let records = varied(seed, n);
            let meta = meta_for(harness, n, transient);
            let expected = summarize_run(&meta, &records);
            let got = from_disk(&meta, &records, memory);
            prop_assert_eq!(&got, &expected);
            prop_assert_eq!(got.to_json_pretty(), expected.to_json_pretty());
        }
    }
}
