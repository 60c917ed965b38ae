//! The sent log (`sent.bin` in a run directory): one fixed-size entry per request, written as it goes out, so a
//! run whose launcher is SIGKILLed still says which requests it sent. Records are written only when a request
//! ends; a request in flight at the kill has no record, and its sent entry is all that is left of it
//! (`lost_in_flight` in the report of the killed run).
//!
//! The format is binary and fixed-size, not a line of text: an entry costs [`ENTRY_BYTES`] bytes and no formatting
//! on the writer's thread, and a write cut short by the kill is found by length alone (the file's size past the
//! header is not a multiple of the entry size), with nothing to parse. The file starts with [`MAGIC`]; each entry
//! is little-endian:
//!
//! | bytes | field |
//! | --- | --- |
//! | 0..8 | `id` (u64) |
//! | 8..16 | `scheduled_ns` (u64, on the run clock) |
//! | 16..24 | `sent_ns` (u64, on the run clock) |
//! | 24..28 | `stage` (u32) |
//! | 28..32 | `input_tokens` (u32) |
//! | 32..36 | `max_tokens` (u32; meaningful only with [`FLAG_MAX_TOKENS`]) |
//! | 36..40 | flags (u32): [`FLAG_WARMUP`], [`FLAG_MAX_TOKENS`] |

use std::io::{self, Read, Write};

/// The sent log inside a run directory.
pub const SENT_FILE: &str = "sent.bin";

/// The file's first bytes: the format's name and version.
pub const MAGIC: [u8; 8] = *b"LLMBSNT1";

/// The size of one entry.
pub const ENTRY_BYTES: usize = 40;

/// The request is a warm-up (left out of every figure, as its record would be).
pub const FLAG_WARMUP: u32 = 1;
/// The request asked for `max_tokens`.
pub const FLAG_MAX_TOKENS: u32 = 1 << 1;

/// One request as it went out: what is known of it before any answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SentEntry {
    pub id: u64,
    pub stage: u32,
    /// When the schedule wanted it sent.
    pub scheduled_ns: u64,
    /// When the engine handed it to the HTTP client: a few microseconds before its record's `sent_ns`, which is
    /// stamped once its headers are built.
    pub sent_ns: u64,
    pub input_tokens: u32,
    pub max_tokens: Option<u32>,
    pub warmup: bool,
}

impl SentEntry {
    /// The entry's bytes.
    pub fn encode(&self) -> [u8; ENTRY_BYTES] {
        let mut out = [0u8; ENTRY_BYTES];
        out[0..8].copy_from_slice(&self.id.to_le_bytes());
        out[8..16].copy_from_slice(&self.scheduled_ns.to_le_bytes());
        out[16..24].copy_from_slice(&self.sent_ns.to_le_bytes());
        out[24..28].copy_from_slice(&self.stage.to_le_bytes());
        out[28..32].copy_from_slice(&self.input_tokens.to_le_bytes());
        out[32..36].copy_from_slice(&self.max_tokens.unwrap_or(0).to_le_bytes());
        let mut flags = 0u32;
        if self.warmup {
            flags |= FLAG_WARMUP;
        }
        if self.max_tokens.is_some() {
            flags |= FLAG_MAX_TOKENS;
        }
        out[36..40].copy_from_slice(&flags.to_le_bytes());
        out
    }

    /// An entry from its bytes.
    pub fn decode(bytes: &[u8; ENTRY_BYTES]) -> SentEntry {
        let u64_at = |at: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&bytes[at..at + 8]);
            u64::from_le_bytes(b)
        };
        let u32_at = |at: usize| {
            let mut b = [0u8; 4];
            b.copy_from_slice(&bytes[at..at + 4]);
            u32::from_le_bytes(b)
        };
        let flags = u32_at(36);
        SentEntry {
            id: u64_at(0),
            scheduled_ns: u64_at(8),
            sent_ns: u64_at(16),
            stage: u32_at(24),
            input_tokens: u32_at(28),
            max_tokens: (flags & FLAG_MAX_TOKENS != 0).then(|| u32_at(32)),
            warmup: flags & FLAG_WARMUP != 0,
        }
    }

    /// Appends the entry to `out` (a buffered writer: the caller flushes once per batch).
    pub fn write_to(&self, out: &mut impl Write) -> io::Result<()> {
        out.write_all(&self.encode())
    }
}

/// Writes the file's header to a new sent log.
pub fn write_header(out: &mut impl Write) -> io::Result<()> {
    out.write_all(&MAGIC)
}

/// Reading a sent log failed.
#[derive(Debug, thiserror::Error)]
pub enum ReadSentError {
    #[error("failed to read the sent log")]
    Io(#[from] io::Error),
    #[error(
        "the sent log does not start with {expected:?}: it is not an llmbench sent log, or one of another version"
    )]
    NotASentLog { expected: String },
}

/// What a sent log held besides its entries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SentLogEnd {
    /// Entries read.
    pub entries: u64,
    /// A last entry cut short (the launcher was killed while writing it): skipped, and counted here (0 or 1).
    pub torn: u64,
}

/// Reads a sent log one entry at a time, handing each to `f`: memory is one read buffer, however long the run. An
/// empty file (the launcher was killed before it wrote the header) holds no entry; a last entry cut short is
/// skipped and counted.
pub fn for_each_sent(
    reader: impl Read,
    mut f: impl FnMut(SentEntry),
) -> Result<SentLogEnd, ReadSentError> {
    let mut reader = io::BufReader::with_capacity(1 << 16, reader);
    let mut header = [0u8; MAGIC.len()];
    let got = read_full(&mut reader, &mut header)?;
    if got == 0 {
        return Ok(SentLogEnd::default());
    }
    if got < header.len() || header != MAGIC {
        return Err(ReadSentError::NotASentLog {
            expected: String::from_utf8_lossy(&MAGIC).into_owned(),
        });
    }
    let mut end = SentLogEnd::default();
    let mut entry = [0u8; ENTRY_BYTES];
    loop {
        match read_full(&mut reader, &mut entry)? {
            0 => return Ok(end),
            ENTRY_BYTES => {
                end.entries += 1;
                f(SentEntry::decode(&entry));
            }
            _ => {
                end.torn = 1;
                return Ok(end);
            }
        }
    }
}

/// Reads until `buf` is full or the input ends; returns how many bytes were read.
pub(crate) fn read_full(reader: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: u64) -> SentEntry {
        SentEntry {
            id,
            stage: 2,
            scheduled_ns: 1_000 + id,
            sent_ns: 1_500 + id,
            input_tokens: 128,
            max_tokens: Some(64),
            warmup: false,
        }
    }

    fn log(entries: &[SentEntry]) -> Vec<u8> {
        let mut out = Vec::new();
        write_header(&mut out).unwrap();
        for e in entries {
            e.write_to(&mut out).unwrap();
        }
        out
    }

    fn read(bytes: &[u8]) -> (Vec<SentEntry>, SentLogEnd) {
        let mut read = Vec::new();
        let end = for_each_sent(bytes, |e| read.push(e)).unwrap();
        (read, end)
    }

    #[test]
    fn every_field_reads_back_as_written() {
        let entries = [
            entry(0),
            SentEntry {
                max_tokens: None,
                warmup: true,
                id: u64::MAX,
                sent_ns: u64::MAX,
                ..entry(1)
            },
            SentEntry {
                max_tokens: Some(0),
                stage: u32::MAX,
                ..entry(7)
            },
        ];
        let bytes = log(&entries);
        assert_eq!(bytes.len(), MAGIC.len() + 3 * ENTRY_BYTES);
        let (read, end) = read(&bytes);
        assert_eq!(read, entries);
        assert_eq!(
            end,
            SentLogEnd {
                entries: 3,
                torn: 0
            }
        );
    }

    #[test]
    fn a_torn_last_entry_is_skipped_and_counted() {
        let mut bytes = log(&[entry(0), entry(1), entry(2)]);
        // Killed 17 bytes into the third entry.
        bytes.truncate(MAGIC.len() + 2 * ENTRY_BYTES + 17);
        let (read, end) = read(&bytes);
        assert_eq!(read, vec![entry(0), entry(1)]);
        assert_eq!(
            end,
            SentLogEnd {
                entries: 2,
                torn: 1
            }
        );
    }

    #[test]
    fn a_log_killed_before_its_first_entry_holds_none() {
        assert_eq!(read(&[]), (Vec::new(), SentLogEnd::default()));
        assert_eq!(read(&MAGIC), (Vec::new(), SentLogEnd::default()));
    }

    #[test]
    fn a_file_that_is_not_a_sent_log_is_refused() {
        let err = for_each_sent(&b"{\"id\":0}\n{\"id\":1}\n"[..], |_| {}).unwrap_err();
        assert!(err.to_string().contains("LLMBSNT1"), "{err}");
        // A torn header is no sent log either: the header is written before the first request.
        assert!(for_each_sent(&MAGIC[..5], |_| {}).is_err());
    }
}
