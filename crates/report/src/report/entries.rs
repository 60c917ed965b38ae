//! The per-request entries of the native files — inference-perf's `per_request_lifecycle_metrics.json`, vllm's
//! `--save-detailed` arrays — for a run summarised from disk. As the records go by, each entry is appended as one
//! line of compact JSON to the spill file of its list (one list per stage and array); the report is then written
//! element by element from the files ([`EntryLists::array`]) through serde_json's pretty printer, over the same
//! values the in-memory path builds (floats round-trip exactly), so the bytes are the same and memory is one entry.
//!
//! Like [`Spill`](llmbench_metrics::metrics::spill::Spill), each list buffers a little and every buffer is written
//! out when all of them together pass the limit; a write opens the file to append and closes it again, so a run
//! of many stages holds no file open.

use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use serde::ser::{Error as _, SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};
use serde_json::Value;

use super::ReportError;

/// Which list of an [`EntryLists`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ListId(usize);

/// Lists of JSON values spilled to files in a directory.
#[derive(Debug)]
pub(crate) struct EntryLists {
    dir: PathBuf,
    lists: Vec<List>,
    buffered: usize,
    max_buffered: usize,
    /// The first write that failed; reported by [`EntryLists::check`], so adding an entry never fails.
    error: Option<io::Error>,
}

#[derive(Debug)]
struct List {
    path: PathBuf,
    /// Whole lines not yet written out.
    buffer: Vec<u8>,
    on_disk: bool,
}

impl EntryLists {
    /// Lists whose files go into `dir`, buffering at most `max_buffered_bytes` in all.
    pub(crate) fn new(dir: &Path, max_buffered_bytes: usize) -> EntryLists {
        EntryLists {
            dir: dir.to_owned(),
            lists: Vec::new(),
            buffered: 0,
            max_buffered: max_buffered_bytes.max(1),
            error: None,
        }
    }

    /// A new, empty list.
    pub(crate) fn list(&mut self) -> ListId {
        let index = self.lists.len();
        self.lists.push(List {
            path: self.dir.join(format!("entries-{index}")),
            buffer: Vec::new(),
            on_disk: false,
        });
        ListId(index)
    }

    /// Appends `value` to `list`.
    pub(crate) fn push(&mut self, list: ListId, value: &Value) {
        let buffer = &mut self.lists[list.0].buffer;
        let before = buffer.len();
        // Writing a `Value` into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut *buffer, value);
        buffer.push(b'\n');
        self.buffered += buffer.len() - before;
        if self.buffered > self.max_buffered {
            for list in &mut self.lists {
                if let Err(e) = list.write_out()
                    && self.error.is_none()
                {
                    self.error = Some(e);
                }
            }
            self.buffered = 0;
        }
    }

    /// The first write that failed, if any did.
    pub(crate) fn check(&mut self) -> io::Result<()> {
        self.error.take().map_or(Ok(()), Err)
    }

    /// The entries of `lists`, one list after the other, each in the order pushed, as one JSON array.
    pub(crate) fn array(&self, lists: &[ListId]) -> StreamedArray<'_> {
        StreamedArray {
            entries: self,
            lists: lists.to_vec(),
        }
    }

    /// Calls `f` with every entry of `list`, in the order pushed.
    fn for_each(&self, list: ListId, mut f: impl FnMut(Value) -> io::Result<()>) -> io::Result<()> {
        let list = &self.lists[list.0];
        let mut line = Vec::new();
        let mut each = |bytes: &[u8]| -> io::Result<()> {
            let value = serde_json::from_slice(bytes).map_err(io::Error::other)?;
            f(value)
        };
        if list.on_disk {
            let mut reader = BufReader::with_capacity(1 << 16, File::open(&list.path)?);
            loop {
                line.clear();
                if reader.read_until(b'\n', &mut line)? == 0 {
                    break;
                }
                each(&line)?;
            }
        }
        for bytes in list.buffer.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            each(bytes)?;
        }
        Ok(())
    }
}

impl List {
    fn write_out(&mut self) -> io::Result<()> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)?;
        file.write_all(&self.buffer)?;
        self.on_disk = true;
        // Give the memory back: an idle stage's buffer would otherwise keep its capacity.
        self.buffer = Vec::new();
        Ok(())
    }
}

/// Some lists of an [`EntryLists`] serialized as one JSON array, read from disk as it is written.
pub(crate) struct StreamedArray<'a> {
    entries: &'a EntryLists,
    lists: Vec<ListId>,
}

impl Serialize for StreamedArray<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(None)?;
        let mut failed: Option<S::Error> = None;
        for &list in &self.lists {
            self.entries
                .for_each(list, |value| {
                    seq.serialize_element(&value).map_err(|e| {
                        failed = Some(e);
                        io::Error::other("serializing an entry failed")
                    })
                })
                .map_err(|e| {
                    failed.take().unwrap_or_else(|| {
                        S::Error::custom(format!("cannot read spilled entries: {e}"))
                    })
                })?;
        }
        seq.end()
    }
}

/// A JSON object whose members named in `arrays` are replaced, in place, by arrays streamed from disk.
pub(crate) struct WithArrays<'a> {
    pub(crate) value: &'a Value,
    pub(crate) arrays: Vec<(&'static str, StreamedArray<'a>)>,
}

impl Serialize for WithArrays<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let Value::Object(members) = self.value else {
            return self.value.serialize(serializer);
        };
        let mut map = serializer.serialize_map(Some(members.len()))?;
        for (key, value) in members {
            match self.arrays.iter().find(|(name, _)| name == key) {
                Some((_, array)) => map.serialize_entry(key, array)?,
                None => map.serialize_entry(key, value)?,
            }
        }
        map.end()
    }
}

/// Writes `value` to `path` as serde_json's pretty printer does (the bytes `write_json` writes for the same
/// value), streaming it to the file.
pub(crate) fn write_json_streamed(
    path: &Path,
    what: &'static str,
    value: &impl Serialize,
) -> Result<(), ReportError> {
    let write_error = |source: io::Error| ReportError::Write {
        path: path.to_owned(),
        source,
    };
    let file = File::create(path).map_err(write_error)?;
    let mut out = BufWriter::with_capacity(1 << 16, file);
    serde_json::to_writer_pretty(&mut out, value).map_err(|e| {
        if e.is_io() {
            write_error(e.into())
        } else {
            ReportError::Serialize {
                path: path.to_owned(),
                what,
                message: e.to_string(),
            }
        }
    })?;
    out.flush().map_err(write_error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_streamed_array_prints_as_the_array_in_memory_through_every_flush() {
        let dir = tempfile::tempdir().expect("temp dir");
        let values: Vec<Value> = (0..50)
            .map(|i| json!({"i": i, "x": f64::from(i) / 7.0, "s": format!("line\n{i}"), "a": [i, [0.1]]}))
            .collect();
        // A 64-byte budget: nearly every entry goes through the files.
        let mut entries = EntryLists::new(dir.path(), 64);
        let (odd, even) = (entries.list(), entries.list());
        for (i, v) in values.iter().enumerate() {
            entries.push(if i % 2 == 1 { odd } else { even }, v);
        }
        entries.check().expect("written");
        let expected: Vec<&Value> = values
            .iter()
            .skip(1)
            .step_by(2)
            .chain(values.iter().step_by(2))
            .collect();
        let object = json!({"first": 1, "list": [], "last": {"k": []}});
        let path = dir.path().join("out.json");
        write_json_streamed(
            &path,
            "test",
            &WithArrays {
                value: &object,
                arrays: vec![("list", entries.array(&[odd, even]))],
            },
        )
        .expect("written");
        let mut in_memory = object.clone();
        in_memory["list"] = json!(expected);
        assert_eq!(
            std::fs::read_to_string(&path).expect("read"),
            serde_json::to_string_pretty(&in_memory).expect("json")
        );
        // An empty array prints as `[]`.
        let none = EntryLists::new(dir.path(), 64);
        assert_eq!(
            serde_json::to_string_pretty(&none.array(&[])).expect("json"),
            "[]"
        );
    }
}
