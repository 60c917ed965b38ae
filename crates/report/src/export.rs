//! `llmbench export`: a run's records in a form other tools read. A run keeps its records in the compact
//! `requests.bin` ([`llmbench_model::record_file`]); `requests.jsonl` (one JSON object per request, as earlier
//! versions wrote and `jq` or pandas read) is written from it on demand, one record at a time, so a run of any
//! length exports in the memory of one record; `requests.parquet` (one row per request, for pandas, polars and
//! DuckDB: [`ParquetRecordsWriter`]) in the memory of one row group.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use llmbench_metrics::metrics::partial_path;
use llmbench_model::record::{ReadRecordsError, RequestRecord};
use llmbench_model::record_file::{
    RECORDS_JSONL_FILE, RecordsFormat, RunRecords, write_jsonl_line,
};

use crate::report::merge::shard_dirs;

mod parquet_file;

pub use parquet_file::{
    ParquetExportError, ParquetRecordsWriter, RECORDS_PARQUET_FILE, RowGroupLimits,
};

/// What `llmbench export` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ExportFormat {
    /// One compact JSON object per line: `requests.jsonl`.
    #[default]
    Jsonl,
    /// One Parquet table, a row per request: `requests.parquet` ([`ParquetRecordsWriter`]).
    Parquet,
}

impl ExportFormat {
    /// The file a run directory gets when no output is named.
    pub fn default_file(self) -> &'static str {
        match self {
            ExportFormat::Jsonl => RECORDS_JSONL_FILE,
            ExportFormat::Parquet => RECORDS_PARQUET_FILE,
        }
    }
}

/// Where the export goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExportTo {
    /// Beside the records, in each run directory ([`ExportFormat::default_file`]).
    RunDir,
    /// This file.
    File(PathBuf),
    /// Standard output.
    Stdout,
}

/// An export failed.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error(
        "{dir} holds no records (requests.bin) and no shard-N/ directory with any: give a run directory that \
         `llmbench run` wrote"
    )]
    NoRecords { dir: PathBuf },
    #[error(
        "{dir} holds a run of {shards} shards: its records are exported into each shard's directory; drop \
         --output, or export one shard directory at a time"
    )]
    OneOutputForShards { dir: PathBuf, shards: usize },
    #[error("{} is already JSON lines (an earlier version's records): nothing to convert", path.display())]
    AlreadyJsonl { path: PathBuf },
    #[error("cannot read the records in {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: ReadRecordsError,
    },
    #[error("cannot write {}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot write the Parquet file {}", path.display())]
    WriteParquet {
        path: PathBuf,
        #[source]
        source: ParquetExportError,
    },
}

/// One exported records file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exported {
    /// The records read.
    pub from: PathBuf,
    /// Where they went (`-` for standard output).
    pub to: PathBuf,
    pub records: u64,
    /// A last record cut short by a kill, skipped (0 or 1).
    pub torn: usize,
}

/// Exports the records of the run in `dir`, or of each shard of a sharded run's root.
pub fn export_run(
    dir: &Path,
    format: ExportFormat,
    to: &ExportTo,
) -> Result<Vec<Exported>, ExportError> {
    if RunRecords::exist_in(dir) {
        return Ok(vec![export_one(&RunRecords::in_dir(dir), dir, format, to)?]);
    }
    let shards: Vec<PathBuf> = shard_dirs(dir)
        .into_iter()
        .filter(|shard| RunRecords::exist_in(shard))
        .collect();
    if shards.is_empty() {
        return Err(ExportError::NoRecords {
            dir: dir.to_owned(),
        });
    }
    if *to != ExportTo::RunDir && shards.len() > 1 {
        return Err(ExportError::OneOutputForShards {
            dir: dir.to_owned(),
            shards: shards.len(),
        });
    }
    shards
        .iter()
        .map(|shard| export_one(&RunRecords::in_dir(shard), shard, format, to))
        .collect()
}

fn export_one(
    records: &RunRecords,
    dir: &Path,
    format: ExportFormat,
    to: &ExportTo,
) -> Result<Exported, ExportError> {
    if records.format == RecordsFormat::Jsonl && format == ExportFormat::Jsonl {
        return Err(ExportError::AlreadyJsonl {
            path: records.path.clone(),
        });
    }
    match to {
        ExportTo::Stdout => {
            // Not locked: the Parquet writer wants an output it could send to another thread, which a lock is not;
            // the buffer makes the locks few.
            let mut out = io::BufWriter::with_capacity(1 << 16, io::stdout());
            let (count, torn) = write_records(records, format, &mut out)
                .map_err(|e| e.into_export_error(&records.path, Path::new("-")))?;
            Ok(Exported {
                from: records.path.clone(),
                to: PathBuf::from("-"),
                records: count,
                torn,
            })
        }
        ExportTo::RunDir | ExportTo::File(_) => {
            let path = match to {
                ExportTo::File(path) => path.clone(),
                _ => dir.join(format.default_file()),
            };
            let write_failed = |source| ExportError::Write {
                path: path.clone(),
                source,
            };
            // Written beside its final name and renamed once whole: an interrupted export leaves no half file
            // under the name readers look for.
            let partial = partial_path(&path);
            let file = std::fs::File::create(&partial).map_err(write_failed)?;
            let mut out = io::BufWriter::with_capacity(1 << 20, file);
            let written = write_records(records, format, &mut out);
            let (count, torn) = match written {
                Ok(done) => done,
                Err(e) => {
                    let _ = std::fs::remove_file(&partial);
                    return Err(e.into_export_error(&records.path, &path));
                }
            };
            drop(out);
            std::fs::rename(&partial, &path).map_err(write_failed)?;
            Ok(Exported {
                from: records.path.clone(),
                to: path,
                records: count,
                torn,
            })
        }
    }
}

enum Failed {
    Read(ReadRecordsError),
    Write(io::Error),
    Parquet(ParquetExportError),
}

impl Failed {
    /// The error for reading `from` and writing `to`.
    fn into_export_error(self, from: &Path, to: &Path) -> ExportError {
        match self {
            Failed::Read(source) => ExportError::Read {
                path: from.to_owned(),
                source,
            },
            Failed::Write(source) => ExportError::Write {
                path: to.to_owned(),
                source,
            },
            Failed::Parquet(source) => ExportError::WriteParquet {
                path: to.to_owned(),
                source,
            },
        }
    }
}

/// Writes every record of `records` to `out` and flushes it; returns how many were written and how many torn last
/// records were skipped.
fn write_records<W: Write + Send>(
    records: &RunRecords,
    format: ExportFormat,
    out: &mut W,
) -> Result<(u64, usize), Failed> {
    let (count, torn) = match format {
        ExportFormat::Jsonl => {
            let mut count = 0u64;
            let torn = stream(
                records,
                |record| {
                    write_jsonl_line(out, record)?;
                    count += 1;
                    Ok(())
                },
                Failed::Write,
            )?;
            (count, torn)
        }
        ExportFormat::Parquet => {
            let mut writer = ParquetRecordsWriter::new(&mut *out, RowGroupLimits::default())
                .map_err(Failed::Parquet)?;
            let torn = stream(records, |record| writer.write(record), Failed::Parquet)?;
            let (_, count) = writer.finish().map_err(Failed::Parquet)?;
            (count, torn)
        }
    };
    out.flush().map_err(Failed::Write)?;
    Ok((count, torn))
}

/// Hands every record of `records` to `write`, stopping at its first error (reported through `failed`); returns
/// how many torn last records were skipped.
fn stream<E>(
    records: &RunRecords,
    mut write: impl FnMut(&RequestRecord) -> Result<(), E>,
    failed: fn(E) -> Failed,
) -> Result<usize, Failed> {
    let mut write_error = None;
    let read = records.for_each(|record| match write(&record) {
        Ok(()) => Ok(()),
        Err(e) => {
            // Stops the read: the write's error is what the caller reports.
            write_error = Some(e);
            Err(ReadRecordsError::Io(io::Error::other(
                "the export's output failed",
            )))
        }
    });
    match (read, write_error) {
        (_, Some(e)) => Err(failed(e)),
        (Err(e), None) => Err(Failed::Read(e)),
        (Ok(torn), None) => Ok(torn),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use llmbench_model::record::{ChunkKind, FinishReason, RequestRecord};
    use llmbench_model::record_file::{RECORDS_FILE, file_bytes};

    fn records() -> Vec<RequestRecord> {
        (1..=3)
            .map(|id| {
                RequestRecord::builder(id)
                    .scheduled(id * 1_000)
                    .sent(id * 1_000 + 7)
                    .input_tokens(10)
                    .max_tokens(2)
                    .streaming(true)
                    .ok()
                    .chunk(id * 1_000 + 50, ChunkKind::Empty)
                    .content_at(id * 1_000 + 60, 1)
                    .content_at(id * 1_000 + 75, 1)
                    .finish_reason(FinishReason::Length)
                    .usage(10, 2)
                    .end(id * 1_000 + 80)
                    .build()
            })
            .collect()
    }

    fn jsonl(records: &[RequestRecord]) -> String {
        records
            .iter()
            .map(|r| serde_json::to_string(r).unwrap() + "\n")
            .collect()
    }

    #[test]
    fn a_run_directory_gets_the_json_lines_earlier_versions_wrote() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(RECORDS_FILE), file_bytes(&records())).unwrap();
        let done = export_run(dir.path(), ExportFormat::Jsonl, &ExportTo::RunDir).unwrap();
        assert_eq!(done.len(), 1);
        assert_eq!(done[0].records, 3);
        assert_eq!(done[0].to, dir.path().join(RECORDS_JSONL_FILE));
        let text = std::fs::read_to_string(dir.path().join(RECORDS_JSONL_FILE)).unwrap();
        assert_eq!(text, jsonl(&records()));
        assert!(!dir.path().join("requests.jsonl.partial").exists());
    }

    #[test]
    fn a_sharded_root_exports_each_shard_beside_its_records() {
        let dir = tempfile::tempdir().unwrap();
        let all = records();
        for (index, record) in all.iter().enumerate().take(2) {
            let shard = dir.path().join(format!("shard-{index}"));
            std::fs::create_dir(&shard).unwrap();
            std::fs::write(shard.join("run.json"), "{}").unwrap();
            std::fs::write(shard.join(RECORDS_FILE), file_bytes([record])).unwrap();
        }
        let done = export_run(dir.path(), ExportFormat::Jsonl, &ExportTo::RunDir).unwrap();
        assert_eq!(done.iter().map(|e| e.records).collect::<Vec<_>>(), [1, 1]);
        for (index, record) in all.iter().enumerate().take(2) {
            let text =
                std::fs::read_to_string(dir.path().join(format!("shard-{index}/requests.jsonl")))
                    .unwrap();
            assert_eq!(text, jsonl(std::slice::from_ref(record)));
        }
        let one_file = ExportTo::File(dir.path().join("all.jsonl"));
        let err = export_run(dir.path(), ExportFormat::Jsonl, &one_file).unwrap_err();
        assert!(
            matches!(err, ExportError::OneOutputForShards { shards: 2, .. }),
            "{err}"
        );
    }

    #[test]
    fn a_killed_runs_torn_last_record_is_left_out_and_counted() {
        let dir = tempfile::tempdir().unwrap();
        let mut bytes = file_bytes(&records());
        bytes.truncate(bytes.len() - 3);
        std::fs::write(dir.path().join(RECORDS_FILE), bytes).unwrap();
        let out = dir.path().join("out.jsonl");
        let done = export_run(
            dir.path(),
            ExportFormat::Jsonl,
            &ExportTo::File(out.clone()),
        )
        .unwrap();
        assert_eq!((done[0].records, done[0].torn), (2, 1));
        assert_eq!(
            std::fs::read_to_string(out).unwrap(),
            jsonl(&records()[..2])
        );
    }

    fn parquet_ids_and_chunks(path: &Path) -> Vec<(u64, usize)> {
        use parquet::file::reader::{FileReader, SerializedFileReader};
        use parquet::record::{Field, RowAccessor};
        let reader = SerializedFileReader::new(std::fs::File::open(path).unwrap()).unwrap();
        reader
            .get_row_iter(None)
            .unwrap()
            .map(|row| {
                let row = row.unwrap();
                let chunks = row
                    .get_column_iter()
                    .find_map(|(name, field)| match field {
                        Field::ListInternal(list) if name == "chunk_at_ns" => Some(list.len()),
                        _ => None,
                    })
                    .unwrap();
                (row.get_ulong(0).unwrap(), chunks)
            })
            .collect()
    }

    #[test]
    fn a_run_directory_gets_requests_parquet_and_an_earlier_runs_jsonl_converts_too() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(RECORDS_FILE), file_bytes(&records())).unwrap();
        let done = export_run(dir.path(), ExportFormat::Parquet, &ExportTo::RunDir).unwrap();
        assert_eq!(done[0].records, 3);
        assert_eq!(done[0].to, dir.path().join("requests.parquet"));
        assert!(!dir.path().join("requests.parquet.partial").exists());
        // records() gives ids 1..=3, three chunks each.
        assert_eq!(
            parquet_ids_and_chunks(&done[0].to),
            [(1, 3), (2, 3), (3, 3)]
        );

        let earlier = tempfile::tempdir().unwrap();
        std::fs::write(earlier.path().join(RECORDS_JSONL_FILE), jsonl(&records())).unwrap();
        let out = earlier.path().join("out.parquet");
        let done = export_run(
            earlier.path(),
            ExportFormat::Parquet,
            &ExportTo::File(out.clone()),
        )
        .unwrap();
        assert_eq!(done[0].from, earlier.path().join(RECORDS_JSONL_FILE));
        assert_eq!(parquet_ids_and_chunks(&out), [(1, 3), (2, 3), (3, 3)]);
    }

    #[test]
    fn a_directory_without_records_is_an_error_saying_what_to_give() {
        let dir = tempfile::tempdir().unwrap();
        let err = export_run(dir.path(), ExportFormat::Jsonl, &ExportTo::RunDir).unwrap_err();
        assert!(err.to_string().contains("holds no records"), "{err}");
    }
}
