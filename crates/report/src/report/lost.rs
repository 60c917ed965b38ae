//! The requests a killed run sent and never recorded: `llmbench report` of a run whose run.json has no end reads
//! its sent log ([`llmbench_model::sent`]) beside its records, and every request the log lists and no record holds
//! was in flight at the kill. They are counted apart (`requests.lost_in_flight`, never a success or a failure of the
//! server), the run's `sent` is the log's count, and `lost_in_flight.jsonl` lists them with what was known of each
//! when it went out.
//!
//! Memory is a bit per request id (ids are one counter per run), not a record: the sent log and the records are
//! each streamed once more.

use std::path::{Path, PathBuf};

use llmbench_engine::engine::StopReason;
use llmbench_metrics::metrics::{RunState, RunSummary};
use llmbench_model::record_file::RunRecords;
use llmbench_model::sent::{SENT_FILE, SentEntry, for_each_sent};
use serde::Serialize;

use super::{ReportError, RunMeta};

/// The list of a killed run's lost requests, in its directory.
pub const LOST_IN_FLIGHT_FILE: &str = "lost_in_flight.jsonl";

/// The most request ids a sent log may span per entry it holds, beyond a fixed allowance: ids are one counter per
/// run, so the span only outgrows the entries by the few ids taken and never sent (a turn stopped while it waited).
/// A log past it is damaged, and its bitmap would be too large to hold.
const MAX_ID_SPAN_PER_ENTRY: u64 = 64;
const ID_SPAN_ALLOWANCE: u64 = 1 << 20;

/// What one directory's sent log says of its run.
#[derive(Debug, Default)]
pub struct LostInFlight {
    /// Requests the log lists.
    pub sent: u64,
    /// Those no record holds, in the order they went out.
    pub lost: Vec<SentEntry>,
    /// A last entry cut short by the kill, skipped (0 or 1).
    pub torn: u64,
}

/// The requests in `dir`'s sent log that no record of its `requests.jsonl` holds; `None` when the directory has
/// no sent log (the run ended, or was written by an llmbench without one).
pub fn find(dir: &Path) -> Result<Option<LostInFlight>, ReportError> {
    let sent_path = dir.join(SENT_FILE);
    if !sent_path.is_file() {
        return Ok(None);
    }
    let sent_log = |path: &Path| {
        std::fs::File::open(path).map_err(|source| ReportError::Read {
            path: path.to_owned(),
            source,
        })
    };
    let bad_log = |source| ReportError::SentLog {
        path: sent_path.clone(),
        source,
    };
    // First pass: how far the ids reach, for the bitmap.
    let mut max_id = None::<u64>;
    let end = for_each_sent(sent_log(&sent_path)?, |entry| {
        max_id = Some(max_id.map_or(entry.id, |m| m.max(entry.id)));
    })
    .map_err(bad_log)?;
    let Some(max_id) = max_id else {
        return Ok(Some(LostInFlight {
            torn: end.torn,
            ..LostInFlight::default()
        }));
    };
    let span = end
        .entries
        .saturating_mul(MAX_ID_SPAN_PER_ENTRY)
        .saturating_add(ID_SPAN_ALLOWANCE);
    if max_id >= span {
        return Err(ReportError::SentLogDamaged {
            path: sent_path,
            max_id,
            entries: end.entries,
        });
    }
    // `max_id < span`, which fits in memory as bits: at most 8 bytes per entry plus 128 KiB.
    let mut recorded = vec![0u64; (max_id / 64 + 1) as usize];
    let records_file = RunRecords::in_dir(dir);
    if records_file.path.is_file() {
        records_file
            .for_each(|record| {
                if record.id <= max_id {
                    recorded[(record.id / 64) as usize] |= 1 << (record.id % 64);
                }
                Ok(())
            })
            .map_err(|source| ReportError::Records {
                path: records_file.path.clone(),
                source,
            })?;
    }
    let mut lost = Vec::new();
    let end = for_each_sent(sent_log(&sent_path)?, |entry| {
        if recorded[(entry.id / 64) as usize] & (1 << (entry.id % 64)) == 0 {
            lost.push(entry);
        }
    })
    .map_err(bad_log)?;
    Ok(Some(LostInFlight {
        sent: end.entries,
        lost,
        torn: end.torn,
    }))
}

/// One line of `lost_in_flight.jsonl`.
#[derive(Serialize)]
struct LostLine<'a> {
    /// The shard that sent it, for a sharded run (its id is the shard's own).
    #[serde(skip_serializing_if = "Option::is_none")]
    shard: Option<u32>,
    id: u64,
    stage: u32,
    scheduled_ns: u64,
    sent_ns: u64,
    input_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    warmup: bool,
    /// Always `lost_in_flight`, so a line says what it is wherever it is read.
    outcome: &'a str,
}

/// For a killed run — one with no end in run.json, or a sharded run with a killed shard — finds the requests
/// each killed directory of `record_dirs` (the run's own, or its shards when `sharded`) sent and never recorded,
/// counts them into `summary` (`requests.lost_in_flight` overall and per stage, warm-ups left out as their
/// records would be; the run's `sent`), and lists them in [`LOST_IN_FLIGHT_FILE`] in `dir`. Returns the list's
/// path when one was written. A run that ended is left as it is, unless its records file stopped taking records
/// (a full disk): the requests whose records never reached it are lost the same way, and counted the same way.
pub fn note_lost_in_flight(
    dir: &Path,
    record_dirs: &[PathBuf],
    sharded: bool,
    summary: &mut RunSummary,
) -> Result<Option<PathBuf>, ReportError> {
    let list = dir.join(LOST_IN_FLIGHT_FILE);
    let unrecorded = |stopped: Option<StopReason>| stopped == Some(StopReason::RecordsUnwritable);
    if !summary
        .run
        .is_some_and(|run| run.state == RunState::Incomplete || unrecorded(run.stopped))
    {
        return Ok(None);
    }
    let mut lines = String::new();
    // The run's sent count, known while every directory says it: a killed one by its sent log, an ended one by
    // its run.json.
    let mut sent = Some(0u64);
    let mut lost_count = 0u64;
    let mut torn = 0u64;
    for record_dir in record_dirs {
        let meta = RunMeta::read(record_dir)?;
        let shard = sharded.then_some(meta.shard.index);
        let found = match &meta.end {
            Some(end) => {
                sent = sent.map(|s| s + end.sent);
                if !unrecorded(end.stopped) {
                    continue;
                }
                // Its sent log is kept for this: every request it lists went out, whatever reached the records.
                let Some(found) = find(record_dir)? else {
                    continue;
                };
                found
            }
            None => {
                let Some(found) = find(record_dir)? else {
                    sent = None;
                    continue;
                };
                sent = sent.map(|s| s + found.sent);
                found
            }
        };
        torn += found.torn;
        for entry in &found.lost {
            lost_count += 1;
            if !entry.warmup {
                summary.overall.requests.lost_in_flight += 1;
                if let Some(stage) = summary.stages.iter_mut().find(|s| s.stage == entry.stage) {
                    stage.summary.requests.lost_in_flight += 1;
                }
            }
            let line = LostLine {
                shard,
                id: entry.id,
                stage: entry.stage,
                scheduled_ns: entry.scheduled_ns,
                sent_ns: entry.sent_ns,
                input_tokens: entry.input_tokens,
                max_tokens: entry.max_tokens,
                warmup: entry.warmup,
                outcome: "lost_in_flight",
            };
            let text = serde_json::to_string(&line).map_err(|e| ReportError::Serialize {
                path: list.clone(),
                what: "lost requests",
                message: e.to_string(),
            })?;
            lines.push_str(&text);
            lines.push('\n');
        }
    }
    if torn > 0 {
        tracing::warn!(
            entries = torn,
            "the sent log ends in a torn entry (the run was killed while writing it); it was skipped"
        );
    }
    if let Some(run) = summary.run.as_mut() {
        run.sent = sent;
    }
    if lost_count == 0 {
        // A list from an earlier report of the same files would say the same; none is left to contradict it.
        let _ = std::fs::remove_file(&list);
        return Ok(None);
    }
    super::write_text(&list, &lines)?;
    Ok(Some(list))
}

#[cfg(test)]
mod tests {
    use super::*;
    use llmbench_model::record::RequestRecord;
    use llmbench_model::sent::write_header;

    fn entry(id: u64, stage: u32) -> SentEntry {
        SentEntry {
            id,
            stage,
            scheduled_ns: 1_000 * id,
            sent_ns: 1_000 * id + 7,
            input_tokens: 10,
            max_tokens: Some(20),
            warmup: false,
        }
    }

    fn write_run(dir: &Path, sent: &[SentEntry], recorded: &[u64], torn_tail: bool) {
        let mut log = Vec::new();
        write_header(&mut log).unwrap();
        for e in sent {
            e.write_to(&mut log).unwrap();
        }
        if torn_tail {
            log.extend_from_slice(&entry(99, 0).encode()[..13]);
        }
        std::fs::write(dir.join(SENT_FILE), log).unwrap();
        let records: Vec<_> = recorded
            .iter()
            .map(|id| RequestRecord::builder(*id).build())
            .collect();
        std::fs::write(
            dir.join(llmbench_model::record_file::RECORDS_FILE),
            llmbench_model::record_file::file_bytes(&records),
        )
        .unwrap();
    }

    #[test]
    fn the_requests_sent_and_never_recorded_are_lost_in_the_order_they_went_out() {
        let dir = tempfile::tempdir().unwrap();
        let sent: Vec<SentEntry> = (0..6).map(|id| entry(id, 0)).collect();
        // 0, 2, 3 came back (in finishing order); 1, 4 and 5 were in flight at the kill.
        write_run(dir.path(), &sent, &[2, 0, 3], true);
        let found = find(dir.path()).unwrap().expect("a sent log");
        assert_eq!(found.sent, 6);
        assert_eq!(
            found.lost.iter().map(|e| e.id).collect::<Vec<_>>(),
            [1, 4, 5]
        );
        assert_eq!(found.lost[1], entry(4, 0));
        // The entry torn by the kill is skipped and counted, not read as a request.
        assert_eq!(found.torn, 1);
    }

    #[test]
    fn a_directory_without_a_sent_log_has_nothing_to_say() {
        let dir = tempfile::tempdir().unwrap();
        assert!(find(dir.path()).unwrap().is_none());
    }

    #[test]
    fn a_sent_log_whose_ids_outrun_its_entries_is_damaged_not_allocated() {
        let dir = tempfile::tempdir().unwrap();
        let far = SentEntry {
            id: u64::MAX / 2,
            ..entry(1, 0)
        };
        write_run(dir.path(), &[entry(0, 0), far], &[], false);
        let err = find(dir.path()).unwrap_err().to_string();
        assert!(err.contains("damaged"), "{err}");
    }
}
