//! A sharded run's shards merged onto one timeline, so its summary and reports are exact: every percentile is
//! taken over the union of all shards' records, and rates over the whole run's span, as one launcher would have
//! measured them.
//!
//! Each shard's launcher has its own monotonic clock; its `run.json` anchors that clock to the wall clock
//! (`t0_unix_ns`). The merge puts every shard on the earliest shard's t0: a shard that started `d` ns later has all
//! its timestamps moved `d` later. How well the shards' wall clocks agree bounds how exact the shared timeline is
//! (NTP keeps the nodes of a cluster within a millisecond or so; one machine's launchers share a clock).
//!
//! Record ids and conversation ids are only unique within a shard, so the merge renumbers records in order of their
//! scheduled send time and gives conversation `c` of shard `i` of `n` the id `c·n + i`.

use std::path::{Path, PathBuf};

use super::ReportError;
use super::meta::{RunEnd, RunMeta, RunState, ShardMeta, StageEnd};
use llmbench_model::record::RequestRecord;
use llmbench_model::record::SessionRecord;
use llmbench_model::record_file::RunRecords;

/// A shard's directory under the run's: `shard-<index>`.
pub(crate) const SHARD_DIR_PREFIX: &str = "shard-";

/// A sharded run read back and merged.
#[derive(Debug)]
pub struct Merged {
    /// The whole run's metadata: the earliest shard's t0, one shard of one, the shards' counts added up.
    pub meta: RunMeta,
    /// Every shard's records on the merged timeline, renumbered.
    pub records: Vec<RequestRecord>,
    /// The shard directories merged, by shard index.
    pub shards: Vec<PathBuf>,
    /// Each shard's start on the merged timeline (ns after the earliest shard's t0), by shard index.
    pub offsets_ns: Vec<u64>,
    /// Torn last lines skipped, over all shards.
    pub truncated_lines: usize,
    /// What makes the merge less than the whole run (a shard missing), for the summary's reader.
    pub warnings: Vec<String>,
}

/// The `shard-N` directories of `dir` that hold a `run.json`, sorted by N; empty for a run that is not sharded.
pub fn shard_dirs(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut shards: Vec<(u32, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name();
            let index = name
                .to_str()?
                .strip_prefix(SHARD_DIR_PREFIX)?
                .parse::<u32>()
                .ok()?;
            let path = entry.path();
            path.join(super::RUN_META_FILE)
                .is_file()
                .then_some((index, path))
        })
        .collect();
    shards.sort();
    shards.into_iter().map(|(_, path)| path).collect()
}

/// Reads every shard of the run in `dir` and merges them; `None` when `dir` has no shard directories.
pub fn read_sharded(dir: &Path) -> Result<Option<Merged>, ReportError> {
    let dirs = shard_dirs(dir);
    if dirs.is_empty() {
        return Ok(None);
    }
    let mut shards = Vec::with_capacity(dirs.len());
    let mut truncated_lines = 0;
    same_profile(dir, &dirs)?;
    for shard_dir in &dirs {
        let meta = RunMeta::read(shard_dir)?;
        let (records, truncated) = super::read_records(&RunRecords::in_dir(shard_dir))?;
        truncated_lines += truncated;
        shards.push((meta, records));
    }
    let mut merged = merge(shards).map_err(|message| ReportError::Merge {
        dir: dir.to_owned(),
        message,
    })?;
    merged.shards = dirs;
    merged.truncated_lines = truncated_lines;
    Ok(Some(merged))
}

/// Refuses shards that ran different profiles (their `profile.yaml`, written before each shard's clock started,
/// with the shard's own endpoint masked: shards of one run may each drive their own replica): shards of two runs
/// left under one run id.
fn same_profile(dir: &Path, dirs: &[PathBuf]) -> Result<(), ReportError> {
    let mut first: Option<(&PathBuf, String)> = None;
    for shard_dir in dirs {
        let Ok(profile) = std::fs::read_to_string(shard_dir.join(super::PROFILE_FILE)) else {
            continue;
        };
        let endpoint = RunMeta::read(shard_dir)?.endpoint;
        let profile = if endpoint.is_empty() {
            profile
        } else {
            profile.replace(&endpoint, "<endpoint>")
        };
        match &first {
            None => first = Some((shard_dir, profile)),
            Some((first_dir, first_profile)) if *first_profile != profile => {
                let name = |d: &Path| {
                    d.file_name()
                        .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
                };
                return Err(ReportError::Merge {
                    dir: dir.to_owned(),
                    message: format!(
                        "{} ran another profile than {} ({} differs): shards of different runs under one run id; \
                         move the stale shard directory away and report again",
                        name(shard_dir),
                        name(first_dir),
                        super::PROFILE_FILE
                    ),
                });
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// Merges shards (each its run.json and records) onto the earliest shard's clock. Pure: the tests feed it shards
/// built in memory. Fails when the shards are not of one run.
pub fn merge(mut shards: Vec<(RunMeta, Vec<RequestRecord>)>) -> Result<Merged, String> {
    shards.sort_by_key(|(meta, _)| meta.shard.index);
    let metas: Vec<RunMeta> = shards.iter().map(|(meta, _)| meta.clone()).collect();
    let MergedMeta {
        meta,
        offsets_ns,
        warnings,
    } = merge_metas(&metas)?;
    let count = meta_count(&metas);

    let total: usize = shards.iter().map(|(_, r)| r.len()).sum();
    let mut records = Vec::with_capacity(total);
    for ((shard_meta, shard_records), offset) in shards.into_iter().zip(&offsets_ns) {
        let index = shard_meta.shard.index;
        for mut record in shard_records {
            onto_merged_timeline(&mut record, *offset, index, count);
            records.push((index, record));
        }
    }
    records.sort_by_key(|(index, r)| (r.scheduled_ns, *index, r.id));
    let records = records
        .into_iter()
        .enumerate()
        .map(|(id, (_, mut record))| {
            record.id = id as u64;
            record
        })
        .collect();
    Ok(Merged {
        meta,
        records,
        shards: Vec::new(),
        offsets_ns,
        truncated_lines: 0,
        warnings,
    })
}

/// The shard count the shards' run.json files declare.
fn meta_count(metas: &[RunMeta]) -> u32 {
    metas.first().map_or(1, |m| m.shard.count.max(1))
}

/// The merged run's metadata, without its records.
#[derive(Debug, Clone)]
pub(crate) struct MergedMeta {
    /// The whole run's metadata: the earliest shard's t0, one shard of one, the shards' counts added up.
    pub meta: RunMeta,
    /// Each shard's start on the merged timeline (ns after the earliest shard's t0), in the order given.
    pub offsets_ns: Vec<u64>,
    /// What makes the merge less than the whole run (a shard missing).
    pub warnings: Vec<String>,
}

/// Merges the shards' run.json files (sorted by shard index) into the whole run's; fails when they are not of
/// one run.
pub(crate) fn merge_metas(metas: &[RunMeta]) -> Result<MergedMeta, String> {
    let Some(first) = metas.first() else {
        return Err("no shard to merge".to_owned());
    };
    let count = meta_count(metas);
    let run_id = first.run_id.clone();
    for meta in metas {
        if meta.run_id != run_id || meta.shard.count != first.shard.count {
            return Err(format!(
                "shard {} is of run `{}` with {} shard(s), shard {} of run `{run_id}` with {}: not one run",
                meta.shard.index,
                meta.run_id,
                meta.shard.count,
                first.shard.index,
                first.shard.count
            ));
        }
        // One run id reused (a rerun into the same directory) leaves shards of two runs side by side: what they
        // ran, and the release that started them together, tell them apart. (The profile's path is each pod's
        // own mount; what it holds is compared in `same_profile`.)
        let differs = if meta.harness != first.harness {
            Some(format!("harness {} vs {}", meta.harness, first.harness))
        } else if meta.model != first.model {
            Some(format!("model `{}` vs `{}`", meta.model, first.model))
        } else {
            match (&meta.release, &first.release) {
                (Some(a), Some(b)) if a.at_unix_ns != b.at_unix_ns => Some(format!(
                    "released at {} vs {}",
                    llmbench_model::wallclock::rfc3339_millis(a.at_unix_ns),
                    llmbench_model::wallclock::rfc3339_millis(b.at_unix_ns)
                )),
                _ => None,
            }
        };
        if let Some(what) = differs {
            return Err(format!(
                "shard {} and shard {} of run `{run_id}` are of different runs ({what}); move the stale shard \
                 directory away and report again",
                meta.shard.index, first.shard.index
            ));
        }
    }
    for pair in metas.windows(2) {
        if pair[0].shard.index == pair[1].shard.index {
            return Err(format!("shard {} appears twice", pair[0].shard.index));
        }
    }
    let mut warnings = Vec::new();
    let present: Vec<u32> = metas.iter().map(|m| m.shard.index).collect();
    let missing: Vec<String> = (0..count)
        .filter(|i| !present.contains(i))
        .map(|i| i.to_string())
        .collect();
    if !missing.is_empty() {
        warnings.push(format!(
            "shard(s) {} of {count} have no results: the merged figures cover {} of {count} launchers",
            missing.join(", "),
            present.len()
        ));
    }

    let base = metas
        .iter()
        .map(|meta| meta.t0_unix_ns)
        .min()
        .unwrap_or_default();
    let offsets_ns: Vec<u64> = metas.iter().map(|meta| meta.t0_unix_ns - base).collect();

    let mut meta = first.clone();
    meta.t0_unix_ns = base;
    meta.started_at = llmbench_model::wallclock::rfc3339_millis(base);
    meta.shard = ShardMeta { index: 0, count: 1 };
    meta.planned_requests = metas
        .iter()
        .map(|m| m.planned_requests)
        .sum::<Option<u64>>();
    meta.end = merge_ends(metas, &offsets_ns, meta.planned_requests);
    // Only shard 0 scrapes the stack; its series move with its clock.
    meta.server_metrics = metas
        .iter()
        .find(|m| m.shard.index == 0)
        .and_then(|m| m.server_metrics.clone());
    Ok(MergedMeta {
        meta,
        offsets_ns,
        warnings,
    })
}

/// Puts a record of shard `index` of `count`, which started `offset` ns after the earliest shard, on the merged
/// timeline, with a conversation id unique across shards. (Its id is renumbered only by a merge in memory.)
fn onto_merged_timeline(record: &mut RequestRecord, offset: u64, index: u32, count: u32) {
    shift(record, offset);
    if let Some(turn) = record.conversation.as_mut() {
        turn.id = turn.id * count + index;
    }
}

/// A sharded run's records streamed from the shards' files, each moved onto the merged timeline as it is read:
/// the merged run summarised from disk ([`super::summarize_spilled`]) without a merged copy of its records.
/// Records come shard by shard; their completion order breaks ties by what the merge in memory renumbers them by
/// (scheduled send, shard, id).
#[derive(Debug, Clone)]
pub(crate) struct ShardRecords {
    /// Each shard's records file, its index and its offset on the merged timeline.
    shards: Vec<(RunRecords, u32, u64)>,
    count: u32,
}

impl super::RecordPasses for ShardRecords {
    fn pass(
        &self,
        f: &mut dyn FnMut(&RequestRecord, [u64; 3]),
    ) -> Result<super::Passed, ReportError> {
        let mut passed = super::Passed::default();
        for (records, index, offset) in &self.shards {
            let one = super::RecordsFile {
                records: records.clone(),
            }
            .stream(|mut r| {
                onto_merged_timeline(&mut r, *offset, *index, self.count);
                f(&r, [r.scheduled_ns, u64::from(*index), r.id]);
            })?;
            passed.records += one.records;
            passed.truncated_lines += one.truncated_lines;
        }
        Ok(passed)
    }
}

/// A sharded run read without its records: its merged metadata, the shard directories, and its records as a
/// stream.
#[derive(Debug)]
pub(crate) struct Sharded {
    pub merged: MergedMeta,
    /// The shard directories, by shard index.
    pub shards: Vec<PathBuf>,
    pub records: ShardRecords,
    /// About how much memory the shards' records would take once read ([`RunRecords::memory_estimate`]).
    pub records_bytes: u64,
}

/// Reads every shard's run.json of the run in `dir` and merges them; `None` when `dir` has no shard directories.
pub(crate) fn read_sharded_metas(dir: &Path) -> Result<Option<Sharded>, ReportError> {
    let dirs = shard_dirs(dir);
    if dirs.is_empty() {
        return Ok(None);
    }
    same_profile(dir, &dirs)?;
    let mut metas = Vec::with_capacity(dirs.len());
    for shard_dir in &dirs {
        metas.push(RunMeta::read(shard_dir)?);
    }
    let mut order: Vec<usize> = (0..metas.len()).collect();
    order.sort_by_key(|&i| metas[i].shard.index);
    let metas: Vec<RunMeta> = order.iter().map(|&i| metas[i].clone()).collect();
    let dirs: Vec<PathBuf> = order.iter().map(|&i| dirs[i].clone()).collect();
    let merged = merge_metas(&metas).map_err(|message| ReportError::Merge {
        dir: dir.to_owned(),
        message,
    })?;
    let records_bytes = dirs
        .iter()
        .map(|d| RunRecords::in_dir(d).memory_estimate())
        .sum();
    let records = ShardRecords {
        shards: dirs
            .iter()
            .zip(&metas)
            .zip(&merged.offsets_ns)
            .map(|((d, m), offset)| (RunRecords::in_dir(d), m.shard.index, *offset))
            .collect(),
        count: meta_count(&metas),
    };
    Ok(Some(Sharded {
        merged,
        shards: dirs,
        records,
        records_bytes,
    }))
}

/// Moves a record `offset` ns later.
fn shift(record: &mut RequestRecord, offset: u64) {
    record.scheduled_ns += offset;
    record.sent_ns += offset;
    record.end_ns += offset;
    for chunk in &mut record.chunks {
        chunk.at_ns += offset;
    }
}

/// The run's end from its shards' ends: counts added up, each stage from the earliest shard's start to the latest
/// shard's end, and the run complete only if every shard is (else the first shard's way of not being complete).
/// `None` while any shard has no end (it was killed): the merged run is incomplete, as such a shard is.
fn merge_ends(metas: &[RunMeta], offsets_ns: &[u64], planned: Option<u64>) -> Option<RunEnd> {
    let ends: Vec<(&RunEnd, u64)> = metas
        .iter()
        .zip(offsets_ns)
        .map(|(meta, offset)| meta.end.as_ref().map(|end| (end, *offset)))
        .collect::<Option<_>>()?;
    let count = meta_count(metas);
    let not_complete = ends
        .iter()
        .map(|(end, _)| *end)
        .find(|end| end.state != RunState::Complete);
    let stage_count = ends.iter().map(|(e, _)| e.stages.len()).max().unwrap_or(0);
    let stages = (0..stage_count)
        .filter_map(|i| {
            let ran: Vec<(&StageEnd, u64, u32)> = ends
                .iter()
                .zip(metas)
                .filter_map(|((end, offset), meta)| {
                    end.stages.get(i).map(|s| (s, *offset, meta.shard.index))
                })
                .collect();
            // Each shard's sessions on the merged timeline, with the conversation ids its records get
            // (`onto_merged_timeline`), in the order they ended.
            let mut sessions: Vec<SessionRecord> = ran
                .iter()
                .flat_map(|(s, offset, index)| {
                    s.sessions.iter().map(move |session| SessionRecord {
                        id: session.id * count + index,
                        start_ns: session.start_ns + offset,
                        end_ns: session.end_ns + offset,
                        ..session.clone()
                    })
                })
                .collect();
            sessions.sort_by_key(|s| s.end_ns);
            let start_ns = ran.iter().map(|(s, o, _)| s.start_ns + o).min()?;
            let began_ns = ran.iter().map(|(s, o, _)| s.began_ns() + o).min()?;
            Some(StageEnd {
                began_ns: Some(began_ns).filter(|&began| began < start_ns),
                start_ns,
                end_ns: ran.iter().map(|(s, o, _)| s.end_ns + o).max()?,
                stopped: ran.iter().find_map(|(s, _, _)| s.stopped),
                sessions,
            })
        })
        .collect();
    Some(RunEnd {
        state: not_complete.map_or(RunState::Complete, |end| end.state),
        stopped: not_complete.and_then(|end| end.stopped),
        planned,
        sent: ends.iter().map(|(e, _)| e.sent).sum(),
        finished: ends.iter().map(|(e, _)| e.finished).sum(),
        stages,
        failed: ends.iter().find_map(|(e, _)| e.failed.clone()),
    })
}

/// Copies shard 0's `server_metrics.jsonl` to `to`, each scrape's time moved onto the merged timeline (`offset_ns`
/// is shard 0's). Lines that cannot be read are dropped, as the summary would skip them.
pub(crate) fn shift_server_metrics(
    from: &Path,
    to: &Path,
    offset_ns: u64,
) -> Result<(), ReportError> {
    use std::io::Write;
    let write_error = |source| ReportError::Write {
        path: to.to_owned(),
        source,
    };
    let scrapes =
        llmbench_metrics::server_metrics::read_jsonl(from).map_err(|e| ReportError::Read {
            path: from.to_owned(),
            source: std::io::Error::other(e.to_string()),
        })?;
    let file = std::fs::File::create(to).map_err(write_error)?;
    let mut out = std::io::BufWriter::new(file);
    let offset_s = offset_ns as f64 / 1e9;
    for mut scrape in scrapes.filter_map(Result::ok) {
        scrape.t_s += offset_s;
        serde_json::to_writer(&mut out, &scrape)
            .map_err(|e| write_error(std::io::Error::other(e)))?;
        out.write_all(b"\n").map_err(write_error)?;
    }
    out.flush().map_err(write_error)
}

#[cfg(test)]
mod tests {
    use super::*;

    use proptest::prelude::*;

    fn meta(index: u32, count: u32, t0: u64, stages: &[(u64, u64)]) -> RunMeta {
        let mut meta = super::super::tests::meta();
        meta.shard = ShardMeta { index, count };
        meta.t0_unix_ns = t0;
        meta.planned_requests = Some(10);
        meta.end = Some(RunEnd {
            state: RunState::Complete,
            stopped: None,
            planned: Some(10),
            sent: 10,
            finished: 10,
            stages: stages
                .iter()
                .map(|(start_ns, end_ns)| StageEnd {
                    began_ns: None,
                    start_ns: *start_ns,
                    end_ns: *end_ns,
                    stopped: None,
                    sessions: Vec::new(),
                })
                .collect(),
            failed: None,
        });
        meta
    }

    /// A streamed request sent at `sent` ms: first token after `ttft` ms, then `tokens − 1` more `itl` ms apart.
    fn record(id: u64, sent_ms: u64, ttft_ms: u64, itl_ms: u64, tokens: u32) -> RequestRecord {
        let ms = 1_000_000;
        let sent = sent_ms * ms;
        let chunks: Vec<u64> = (0..u64::from(tokens))
            .map(|i| sent + ttft_ms * ms + i * itl_ms * ms)
            .collect();
        let mut record = RequestRecord::builder(id)
            .sent(sent)
            .end(chunks.last().copied().unwrap_or(sent))
            .input_tokens(10)
            .max_tokens(tokens)
            .ok()
            .usage(10, tokens);
        for at in chunks {
            record = record.content_at(at, 1);
        }
        record.build()
    }

    #[test]
    fn shards_move_onto_the_earliest_clock_and_counts_add_up() {
        // Shard 1 started 250 ms after shard 0 (wall clock); its request at its own 0 ms is at 250 ms merged.
        let a = (
            meta(0, 2, 1_000_000_000, &[(0, 900_000_000)]),
            vec![record(0, 0, 50, 10, 3), record(1, 500, 50, 10, 3)],
        );
        let b = (
            meta(1, 2, 1_250_000_000, &[(0, 800_000_000)]),
            vec![record(0, 0, 70, 10, 3)],
        );
        let merged = merge(vec![b, a]).unwrap();
        assert_eq!(merged.offsets_ns, [0, 250_000_000]);
        assert_eq!(merged.meta.t0_unix_ns, 1_000_000_000);
        assert_eq!(merged.meta.shard, ShardMeta { index: 0, count: 1 });
        assert_eq!(merged.meta.planned_requests, Some(20));
        let end = merged.meta.end.as_ref().unwrap();
        assert_eq!((end.sent, end.finished), (20, 20));
        // Stage 0 from shard 0's start (0) to shard 1's end (250 + 800 ms).
        assert_eq!(
            (end.stages[0].start_ns, end.stages[0].end_ns),
            (0, 1_050_000_000)
        );
        assert_eq!(end.stages[0].began_ns, None);
        // Renumbered in order of scheduled time: 0 ms (shard 0), 250 ms (shard 1), 500 ms (shard 0).
        let sent: Vec<(u64, u64)> = merged
            .records
            .iter()
            .map(|r| (r.id, r.sent_ns / 1_000_000))
            .collect();
        assert_eq!(sent, [(0, 0), (1, 250), (2, 500)]);
        // Shard 1's first token moved with it: 250 + 70 ms.
        assert_eq!(merged.records[1].chunks[0].at_ns, 320_000_000);
    }

    #[test]
    fn a_merged_stage_began_with_the_earliest_warm_up_of_any_shard() {
        // Shard 0's figures start at 100 ms after warm-ups from 20 ms; shard 1 (250 ms later) had none.
        let mut a = meta(0, 2, 1_000_000_000, &[(100_000_000, 900_000_000)]);
        if let Some(end) = a.end.as_mut() {
            end.stages[0].began_ns = Some(20_000_000);
        }
        let b = meta(1, 2, 1_250_000_000, &[(0, 800_000_000)]);
        let merged = merge(vec![
            (a, vec![record(0, 100, 50, 10, 3)]),
            (b, vec![record(0, 0, 70, 10, 3)]),
        ])
        .unwrap();
        let stage = &merged.meta.end.as_ref().unwrap().stages[0];
        assert_eq!(
            (stage.began_ns, stage.start_ns, stage.began_ns()),
            (Some(20_000_000), 100_000_000, 20_000_000)
        );
    }

    #[test]
    fn shards_of_different_runs_are_refused_and_a_missing_shard_is_said() {
        let a = meta(0, 3, 0, &[]);
        let mut b = meta(1, 3, 0, &[]);
        b.run_id = "other".to_owned();
        let e = merge(vec![(a.clone(), vec![]), (b, vec![])]).unwrap_err();
        assert!(e.contains("not one run"), "{e}");
        let merged = merge(vec![(a, vec![])]).unwrap();
        assert!(
            merged.warnings[0].contains("shard(s) 1, 2 of 3"),
            "{:?}",
            merged.warnings
        );
    }

    #[test]
    fn shards_of_two_runs_under_one_id_are_told_apart_by_what_they_ran_and_their_release() {
        let a = meta(0, 2, 0, &[]);
        let mut b = meta(1, 2, 0, &[]);
        b.model = "other-model".to_owned();
        let e = merge(vec![(a.clone(), vec![]), (b, vec![])]).unwrap_err();
        assert!(e.contains("are of different runs (model"), "{e}");
        let released = |meta: &RunMeta, at: u64| {
            let mut meta = meta.clone();
            meta.release = Some(super::super::meta::ReleaseMeta {
                ready_unix_ns: at - 1,
                at_unix_ns: at,
            });
            meta
        };
        let c = meta(1, 2, 0, &[]);
        let e = merge(vec![
            (released(&a, 1_000_000_000), vec![]),
            (released(&c, 2_000_000_000), vec![]),
        ])
        .unwrap_err();
        assert!(e.contains("released at"), "{e}");
        assert!(
            merge(vec![
                (released(&a, 1_000_000_000), vec![]),
                (released(&c, 1_000_000_000), vec![])
            ])
            .is_ok()
        );
    }

    #[test]
    fn shards_that_ran_different_profiles_are_not_merged() {
        let dir = tempfile::tempdir().expect("tempdir");
        let shards: Vec<PathBuf> = ["shard-0", "shard-1"]
            .iter()
            .map(|name| dir.path().join(name))
            .collect();
        for ((i, shard), profile) in shards.iter().enumerate().zip([
            "load: {rate: 1}\nurl: http://a:1\n",
            "load: {rate: 2}\nurl: http://b:2\n",
        ]) {
            std::fs::create_dir(shard).expect("mkdir");
            std::fs::write(shard.join(super::super::PROFILE_FILE), profile).expect("write");
            let mut meta = meta(i as u32, 2, 0, &[]);
            meta.endpoint = ["http://a:1", "http://b:2"][i].to_owned();
            std::fs::write(
                shard.join(super::super::RUN_META_FILE),
                serde_json::to_string(&meta).expect("json"),
            )
            .expect("write");
        }
        let e = same_profile(dir.path(), &shards).unwrap_err().to_string();
        assert!(
            e.contains("shard-1 ran another profile than shard-0 (profile.yaml differs)"),
            "{e}"
        );
        // The same profile against each shard's own endpoint is one run's.
        std::fs::write(
            shards[1].join(super::super::PROFILE_FILE),
            "load: {rate: 1}\nurl: http://b:2\n",
        )
        .expect("write");
        assert!(same_profile(dir.path(), &shards).is_ok());
    }

    #[test]
    fn a_killed_shard_leaves_the_merged_run_without_an_end() {
        let a = meta(0, 2, 0, &[(0, 10)]);
        let mut b = meta(1, 2, 0, &[(0, 10)]);
        b.end = None;
        let merged = merge(vec![(a, vec![]), (b, vec![])]).unwrap();
        assert_eq!(merged.meta.end, None);
    }

    proptest! {
        /// Splitting a run's records over shards with arbitrary start offsets and merging them back gives exactly
        /// the summary of the unsplit run: every percentile over the union, the rates over the whole span.
        #[test]
        fn merged_figures_equal_the_figures_of_the_union(
            requests in proptest::collection::vec((0u64..5_000, 1u64..400, 1u64..40, 1u32..20, 0u32..4), 1..60),
            starts_ms in proptest::collection::vec(0u64..3_000, 4),
        ) {
            let shards_n = 4u32;
            let base = 5_000_000_000u64;
            // The whole run on one clock: request j (sent at `sent_ms`) belongs to shard `shard`.
            let union: Vec<RequestRecord> = requests
                .iter()
                .enumerate()
                .map(|(j, (sent, ttft, itl, tokens, _))| record(j as u64, *sent + 3_000, *ttft, *itl, *tokens))
                .collect();
            let mut whole = meta(0, 1, base, &[(0, 20_000_000_000)]);
            whole.planned_requests = Some(union.len() as u64);
            let expected = super::super::summarize_run(&whole, &union);

            // Each shard's clock starts `starts_ms` after the base; its records are shifted back onto it.
            let mut shards = Vec::new();
            for shard in 0..shards_n {
                let start_ns = starts_ms[shard as usize] * 1_000_000;
                let mut m = meta(shard, shards_n, base + start_ns, &[(0, 20_000_000_000 - start_ns)]);
                let mine: Vec<RequestRecord> = requests
                    .iter()
                    .zip(&union)
                    .filter(|((.., s), _)| *s == shard)
                    .map(|(_, r)| {
                        let mut r = r.clone();
                        r.scheduled_ns -= start_ns;
                        r.sent_ns -= start_ns;
                        r.end_ns -= start_ns;
                        for c in &mut r.chunks {
                            c.at_ns -= start_ns;
                        }
                        r
                    })
                    .collect();
                m.planned_requests = Some(mine.len() as u64);
                shards.push((m, mine));
            }
            let merged = merge(shards).unwrap();
            let offset = merged.meta.t0_unix_ns - base;
            // Back on the base clock, the merged records are the union.
            let got = super::super::summarize_run(&merged.meta, &merged.records);
            prop_assert_eq!(got.overall.requests, expected.overall.requests);
            prop_assert_eq!(&got.overall.latency_ms, &expected.overall.latency_ms);
            let mut a: Vec<u64> = merged.records.iter().map(|r| r.sent_ns + offset).collect();
            let mut b: Vec<u64> = union.iter().map(|r| r.sent_ns).collect();
            a.sort_unstable();
            b.sort_unstable();
            prop_assert_eq!(a, b);
            prop_assert_eq!(merged.meta.planned_requests, Some(union.len() as u64));
        }
    }
}
