//! The records file (`requests.bin` in a run directory): every [`RequestRecord`] of a run, in a compact binary
//! form, appended by the engine's writer as requests end. `llmbench export` turns it into `requests.jsonl`, one
//! JSON line per record, byte for byte what earlier versions wrote; every reader here also still reads an older
//! run's `requests.jsonl` ([`RunRecords`]).
//!
//! Why binary: a streamed answer is one timestamp per chunk, and as JSON each costs a key, a tag and up to twenty
//! digits (about 6.7 kB per 128-token request, 67 GB for ten million). Here a chunk is one varint of how much its
//! gap to the previous chunk differs from the gap before (a stream's jitter, tens to hundreds of microseconds: 2
//! or 3 bytes), with its kind in the same word, and a request id is written as what it adds to the previous
//! record's, so a 128-token request takes about 400 to 550 bytes with its ids. Writing it is a few shifts per
//! chunk, no formatting.
//!
//! Layout: the file starts with [`MAGIC`]; then one frame per record: its payload's length (LEB128 varint) and
//! the payload. A frame cut short at the end of the file is the record a killed launcher was writing: it is
//! skipped and counted, as a torn last line of `requests.jsonl` was. The payload is a sequence of LEB128 varints
//! (strings as a length and UTF-8 bytes), in this order, the optional parts only when their flag is set:
//!
//! | field | encoding |
//! | --- | --- |
//! | flags | varint, the `F_*` bits below |
//! | `id`, `stage`, `scheduled_ns` | varints |
//! | `sent_ns`, `end_ns` | zigzag of the wrapping difference to `scheduled_ns`, then to `sent_ns` |
//! | `input_tokens` | varint |
//! | `max_tokens`, `inputs`, `http_status` | varints, if flagged |
//! | `usage` | prompt and completion tokens; cached and reasoning tokens if flagged |
//! | `finish_reason` | a code (0 stop, 1 length, 2 abort, 3 tool_calls, 4 content_filter, 5 error, 6 other + string) |
//! | `error` | its class's code ([`ErrorClass`] in declaration order) and message |
//! | `chunks` | a count, then per chunk `zigzag(d) << 2 \| tag`, where `d` is the chunk's gap to the one before (the first's to `sent_ns`) for the first two chunks and that gap minus the previous gap after them; tag 0 content of one token, 1 content or reasoning with `tokens << 1 \| reasoning` after it, 2 empty, 3 usage only |
//! | `text`, `conversation` (id, turn) | if flagged |
//! | `request_id` | if flagged: how many leading bytes it shares with the previous record's request id, then the rest as a string |
//! | `traceparent` (24 raw bytes), `adapter`, `images` (count, then width, height, bytes each) | if flagged |
//!
//! Every value round-trips exactly, whatever its size: the differences wrap, and a chunk word is a 128-bit varint.
//! The file is read front to back (a request id needs the one before it); nothing needs more.

use std::io::{self, BufRead, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::record::{
    ChunkEvent, ChunkKind, ErrorClass, FinishReason, ReadRecordsError, RequestError, RequestRecord,
    SentImage, TraceParent, TurnOf, Usage, for_each_jsonl,
};
use crate::sent::read_full;

/// The records file inside a run directory.
pub const RECORDS_FILE: &str = "requests.bin";

/// The records as JSON lines: what `llmbench export` writes, and what runs of earlier versions hold instead of
/// [`RECORDS_FILE`].
pub const RECORDS_JSONL_FILE: &str = "requests.jsonl";

/// The file's first bytes: the format's name and version.
pub const MAGIC: [u8; 8] = *b"LLMBREC1";

/// How much memory a record read from the binary file takes per byte of it, at most, about: a chunk is 16 bytes
/// in memory and 2 to 4 on disk, the record's fixed part 192 bytes against some 20. Sizes the choice between
/// holding a run's records and summarising them from disk.
const MEMORY_PER_FILE_BYTE: u64 = 8;

const F_MAX_TOKENS: u64 = 1;
const F_IGNORE_EOS: u64 = 1 << 1;
const F_STREAMING: u64 = 1 << 2;
const F_INPUTS: u64 = 1 << 3;
const F_HTTP_STATUS: u64 = 1 << 4;
const F_USAGE: u64 = 1 << 5;
const F_CACHED: u64 = 1 << 6;
const F_REASONING: u64 = 1 << 7;
const F_FINISH: u64 = 1 << 8;
const F_ERROR: u64 = 1 << 9;
const F_TEXT: u64 = 1 << 10;
const F_CONVERSATION: u64 = 1 << 11;
const F_WARMUP: u64 = 1 << 12;
const F_REQUEST_ID: u64 = 1 << 13;
const F_TRACEPARENT: u64 = 1 << 14;
const F_ADAPTER: u64 = 1 << 15;
const F_IMAGES: u64 = 1 << 16;
const F_KNOWN: u64 = (1 << 17) - 1;

const TAG_CONTENT_ONE: u128 = 0;
const TAG_COUNTED: u128 = 1;
const TAG_EMPTY: u128 = 2;
const TAG_USAGE_ONLY: u128 = 3;

/// An error class is written as its place in this list: a class added later goes at its end.
const ERROR_CLASSES: [ErrorClass; 9] = ErrorClass::ALL;

/// Writes the file's header to a new records file.
pub fn write_header(out: &mut impl Write) -> io::Result<()> {
    out.write_all(&MAGIC)
}

/// Appends records to a records file (after its header, [`write_header`]). It remembers the last request id it
/// wrote, which the next record's shares most of (`llmbench-<run id>-<n>`), and reuses one buffer, so encoding
/// allocates nothing once that buffer has grown to the largest record.
#[derive(Debug, Default)]
pub struct RecordWriter {
    scratch: Vec<u8>,
    last_request_id: Vec<u8>,
}

impl RecordWriter {
    /// Appends one record's frame to `out`.
    pub fn write(&mut self, out: &mut impl Write, record: &RequestRecord) -> io::Result<()> {
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        self.encode(record, &mut scratch);
        let mut len = [0u8; 10];
        let n = put_varint_into(&mut len, scratch.len() as u64);
        let written = out
            .write_all(&len[..n])
            .and_then(|()| out.write_all(&scratch));
        self.scratch = scratch;
        written
    }

    fn encode(&mut self, r: &RequestRecord, out: &mut Vec<u8>) {
        let mut flags = 0;
        let mut set = |on: bool, bit: u64| {
            if on {
                flags |= bit;
            }
        };
        set(r.max_tokens.is_some(), F_MAX_TOKENS);
        set(r.ignore_eos, F_IGNORE_EOS);
        set(r.streaming, F_STREAMING);
        set(r.inputs != 0, F_INPUTS);
        set(r.http_status.is_some(), F_HTTP_STATUS);
        set(r.usage.is_some(), F_USAGE);
        set(r.usage.is_some_and(|u| u.cached_tokens.is_some()), F_CACHED);
        set(
            r.usage.is_some_and(|u| u.reasoning_tokens.is_some()),
            F_REASONING,
        );
        set(r.finish_reason.is_some(), F_FINISH);
        set(r.error.is_some(), F_ERROR);
        set(r.text.is_some(), F_TEXT);
        set(r.conversation.is_some(), F_CONVERSATION);
        set(r.warmup, F_WARMUP);
        set(r.request_id.is_some(), F_REQUEST_ID);
        set(r.traceparent.is_some(), F_TRACEPARENT);
        set(r.adapter.is_some(), F_ADAPTER);
        set(r.images.is_some(), F_IMAGES);
        put_varint(out, flags);
        put_varint(out, r.id);
        put_varint(out, u64::from(r.stage));
        put_varint(out, r.scheduled_ns);
        put_varint(out, zigzag(r.sent_ns.wrapping_sub(r.scheduled_ns)));
        put_varint(out, zigzag(r.end_ns.wrapping_sub(r.sent_ns)));
        put_varint(out, u64::from(r.input_tokens));
        if let Some(max_tokens) = r.max_tokens {
            put_varint(out, u64::from(max_tokens));
        }
        if r.inputs != 0 {
            put_varint(out, u64::from(r.inputs));
        }
        if let Some(status) = r.http_status {
            put_varint(out, u64::from(status));
        }
        if let Some(usage) = r.usage {
            put_varint(out, u64::from(usage.prompt_tokens));
            put_varint(out, u64::from(usage.completion_tokens));
            if let Some(cached) = usage.cached_tokens {
                put_varint(out, u64::from(cached));
            }
            if let Some(reasoning) = usage.reasoning_tokens {
                put_varint(out, u64::from(reasoning));
            }
        }
        if let Some(reason) = &r.finish_reason {
            match reason {
                FinishReason::Stop => put_varint(out, 0),
                FinishReason::Length => put_varint(out, 1),
                FinishReason::Abort => put_varint(out, 2),
                FinishReason::ToolCalls => put_varint(out, 3),
                FinishReason::ContentFilter => put_varint(out, 4),
                FinishReason::Error => put_varint(out, 5),
                FinishReason::Other(other) => {
                    put_varint(out, 6);
                    put_str(out, other);
                }
            }
        }
        if let Some(error) = &r.error {
            let code = ERROR_CLASSES
                .iter()
                .position(|c| *c == error.class)
                .unwrap_or(ERROR_CLASSES.len() - 1);
            put_varint(out, code as u64);
            put_str(out, &error.message);
        }
        put_varint(out, r.chunks.len() as u64);
        let mut at = r.sent_ns;
        let mut last_gap = 0u64;
        for (index, chunk) in r.chunks.iter().enumerate() {
            let gap = chunk.at_ns.wrapping_sub(at);
            at = chunk.at_ns;
            // Past the second chunk, the change from the previous gap: a steady stream's gaps differ by its jitter.
            let change = if index < 2 {
                gap
            } else {
                gap.wrapping_sub(last_gap)
            };
            last_gap = gap;
            let gap = u128::from(zigzag(change)) << 2;
            match chunk.kind {
                ChunkKind::Content { tokens: 1 } => put_varint128(out, gap | TAG_CONTENT_ONE),
                ChunkKind::Content { tokens } => {
                    put_varint128(out, gap | TAG_COUNTED);
                    put_varint(out, u64::from(tokens) << 1);
                }
                ChunkKind::Reasoning { tokens } => {
                    put_varint128(out, gap | TAG_COUNTED);
                    put_varint(out, (u64::from(tokens) << 1) | 1);
                }
                ChunkKind::Empty => put_varint128(out, gap | TAG_EMPTY),
                ChunkKind::UsageOnly => put_varint128(out, gap | TAG_USAGE_ONLY),
            }
        }
        if let Some(text) = &r.text {
            put_str(out, text);
        }
        if let Some(turn) = r.conversation {
            put_varint(out, u64::from(turn.id));
            put_varint(out, u64::from(turn.turn));
        }
        if let Some(id) = &r.request_id {
            let shared = id
                .bytes()
                .zip(&self.last_request_id)
                .take_while(|(a, b)| a == *b)
                .count();
            put_varint(out, shared as u64);
            put_varint(out, (id.len() - shared) as u64);
            out.extend_from_slice(&id.as_bytes()[shared..]);
            self.last_request_id.clear();
            self.last_request_id.extend_from_slice(id.as_bytes());
        }
        if let Some(parent) = &r.traceparent {
            out.extend_from_slice(&parent.trace_id);
            out.extend_from_slice(&parent.span_id);
        }
        if let Some(adapter) = &r.adapter {
            put_str(out, adapter);
        }
        if let Some(images) = &r.images {
            put_varint(out, images.len() as u64);
            for image in images.iter() {
                put_varint(out, u64::from(image.width));
                put_varint(out, u64::from(image.height));
                put_varint(out, u64::from(image.bytes));
            }
        }
    }
}

fn zigzag(wrapped_difference: u64) -> u64 {
    let signed = wrapped_difference as i64;
    ((signed << 1) ^ (signed >> 63)) as u64
}

fn unzigzag(word: u64) -> u64 {
    ((word >> 1) as i64 ^ -((word & 1) as i64)) as u64
}

fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn put_varint_into(out: &mut [u8; 10], mut value: u64) -> usize {
    let mut n = 0;
    while value >= 0x80 {
        out[n] = (value as u8) | 0x80;
        value >>= 7;
        n += 1;
    }
    out[n] = value as u8;
    n + 1
}

fn put_varint128(out: &mut Vec<u8>, mut value: u128) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn put_str(out: &mut Vec<u8>, text: &str) {
    put_varint(out, text.len() as u64);
    out.extend_from_slice(text.as_bytes());
}

/// Why a frame's payload could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Malformed(&'static str);

/// A cursor over one frame's payload.
struct Payload<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Payload<'a> {
    fn varint(&mut self) -> Result<u64, Malformed> {
        let word = self.varint128()?;
        u64::try_from(word).map_err(|_| Malformed("a value past 64 bits"))
    }

    fn varint128(&mut self) -> Result<u128, Malformed> {
        let mut value = 0u128;
        let mut shift = 0;
        loop {
            let byte = *self
                .bytes
                .get(self.at)
                .ok_or(Malformed("the record ends inside a value"))?;
            self.at += 1;
            if shift >= 128 {
                return Err(Malformed("a value past 128 bits"));
            }
            value |= u128::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
            shift += 7;
        }
    }

    fn u32(&mut self) -> Result<u32, Malformed> {
        u32::try_from(self.varint()?).map_err(|_| Malformed("a count past 32 bits"))
    }

    fn u16(&mut self) -> Result<u16, Malformed> {
        u16::try_from(self.varint()?).map_err(|_| Malformed("an HTTP status past 16 bits"))
    }

    fn raw(&mut self, len: usize) -> Result<&'a [u8], Malformed> {
        let end = self
            .at
            .checked_add(len)
            .filter(|end| *end <= self.bytes.len())
            .ok_or(Malformed("the record ends inside a string"))?;
        let raw = &self.bytes[self.at..end];
        self.at = end;
        Ok(raw)
    }

    fn string(&mut self) -> Result<String, Malformed> {
        let len = usize::try_from(self.varint()?).map_err(|_| Malformed("a string too long"))?;
        let raw = self.raw(len)?;
        String::from_utf8(raw.to_vec()).map_err(|_| Malformed("a string that is not UTF-8"))
    }
}

/// Decodes one frame's payload; `last_request_id` is the previous record's, and becomes this one's.
fn decode(bytes: &[u8], last_request_id: &mut Vec<u8>) -> Result<RequestRecord, Malformed> {
    let mut p = Payload { bytes, at: 0 };
    let flags = p.varint()?;
    if flags & !F_KNOWN != 0 {
        return Err(Malformed("flags this version does not know"));
    }
    let has = |bit: u64| flags & bit != 0;
    let id = p.varint()?;
    let stage = p.u32()?;
    let scheduled_ns = p.varint()?;
    let sent_ns = scheduled_ns.wrapping_add(unzigzag(p.varint()?));
    let end_ns = sent_ns.wrapping_add(unzigzag(p.varint()?));
    let input_tokens = p.u32()?;
    let max_tokens = if has(F_MAX_TOKENS) {
        Some(p.u32()?)
    } else {
        None
    };
    let inputs = if has(F_INPUTS) { p.u32()? } else { 0 };
    let http_status = if has(F_HTTP_STATUS) {
        Some(p.u16()?)
    } else {
        None
    };
    let usage = if has(F_USAGE) {
        let prompt_tokens = p.u32()?;
        let completion_tokens = p.u32()?;
        let cached_tokens = if has(F_CACHED) { Some(p.u32()?) } else { None };
        let reasoning_tokens = if has(F_REASONING) {
            Some(p.u32()?)
        } else {
            None
        };
        Some(Usage {
            prompt_tokens,
            completion_tokens,
            cached_tokens,
            reasoning_tokens,
        })
    } else {
        None
    };
    let finish_reason = if has(F_FINISH) {
        Some(match p.varint()? {
            0 => FinishReason::Stop,
            1 => FinishReason::Length,
            2 => FinishReason::Abort,
            3 => FinishReason::ToolCalls,
            4 => FinishReason::ContentFilter,
            5 => FinishReason::Error,
            6 => FinishReason::Other(Box::new(p.string()?)),
            _ => return Err(Malformed("an unknown finish reason code")),
        })
    } else {
        None
    };
    let error = if has(F_ERROR) {
        let class = usize::try_from(p.varint()?)
            .ok()
            .and_then(|code| ERROR_CLASSES.get(code).copied())
            .ok_or(Malformed("an unknown error class code"))?;
        Some(Box::new(RequestError {
            class,
            message: p.string()?,
        }))
    } else {
        None
    };
    let count = p.varint()?;
    // Every chunk takes at least a byte: a count past what is left is a broken record, not an allocation.
    if count > (bytes.len() - p.at) as u64 {
        return Err(Malformed("more chunks than the record has bytes"));
    }
    let mut chunks = Vec::with_capacity(count as usize);
    let mut at = sent_ns;
    let mut last_gap = 0u64;
    for index in 0..count {
        let word = p.varint128()?;
        let change = u64::try_from(word >> 2).map_err(|_| Malformed("a chunk gap past 64 bits"))?;
        let change = unzigzag(change);
        let gap = if index < 2 {
            change
        } else {
            last_gap.wrapping_add(change)
        };
        last_gap = gap;
        at = at.wrapping_add(gap);
        let kind = match word & 3 {
            TAG_CONTENT_ONE => ChunkKind::Content { tokens: 1 },
            TAG_COUNTED => {
                let counted = p.varint()?;
                let tokens = u32::try_from(counted >> 1)
                    .map_err(|_| Malformed("a token count past 32 bits"))?;
                if counted & 1 == 1 {
                    ChunkKind::Reasoning { tokens }
                } else {
                    ChunkKind::Content { tokens }
                }
            }
            TAG_EMPTY => ChunkKind::Empty,
            _ => ChunkKind::UsageOnly,
        };
        chunks.push(ChunkEvent { at_ns: at, kind });
    }
    let text = if has(F_TEXT) {
        Some(Box::new(p.string()?))
    } else {
        None
    };
    let conversation = if has(F_CONVERSATION) {
        Some(TurnOf {
            id: p.u32()?,
            turn: p.u32()?,
        })
    } else {
        None
    };
    let request_id = if has(F_REQUEST_ID) {
        let shared = usize::try_from(p.varint()?).map_err(|_| Malformed("a string too long"))?;
        let len = usize::try_from(p.varint()?).map_err(|_| Malformed("a string too long"))?;
        if shared > last_request_id.len() {
            return Err(Malformed(
                "a request id sharing more than the previous one has",
            ));
        }
        last_request_id.truncate(shared);
        last_request_id.extend_from_slice(p.raw(len)?);
        let id = std::str::from_utf8(last_request_id)
            .map_err(|_| Malformed("a request id that is not UTF-8"))?;
        Some(Box::new(id.to_owned()))
    } else {
        None
    };
    let traceparent = if has(F_TRACEPARENT) {
        let raw = p.raw(24)?;
        let mut trace_id = [0u8; 16];
        let mut span_id = [0u8; 8];
        trace_id.copy_from_slice(&raw[..16]);
        span_id.copy_from_slice(&raw[16..]);
        Some(Box::new(TraceParent { trace_id, span_id }))
    } else {
        None
    };
    let adapter = if has(F_ADAPTER) {
        Some(Arc::new(p.string()?))
    } else {
        None
    };
    let images = if has(F_IMAGES) {
        let count = p.varint()?;
        if count > (bytes.len() - p.at) as u64 {
            return Err(Malformed("more images than the record has bytes"));
        }
        let mut images = Vec::with_capacity(count as usize);
        for _ in 0..count {
            images.push(SentImage {
                width: p.u32()?,
                height: p.u32()?,
                bytes: p.u32()?,
            });
        }
        Some(Arc::new(images))
    } else {
        None
    };
    if p.at != bytes.len() {
        return Err(Malformed("bytes past the record's last field"));
    }
    Ok(RequestRecord {
        id,
        stage,
        scheduled_ns,
        sent_ns,
        end_ns,
        input_tokens,
        max_tokens,
        ignore_eos: has(F_IGNORE_EOS),
        streaming: has(F_STREAMING),
        inputs,
        http_status,
        usage,
        finish_reason,
        error,
        chunks,
        text,
        conversation,
        warmup: has(F_WARMUP),
        request_id,
        traceparent,
        adapter,
        images,
    })
}

/// Reads a records file one record at a time, handing each to `f` and keeping none: memory is one record,
/// however long the run. An empty file (the launcher was killed before it wrote the header) holds no record; a
/// last frame cut short is the record a killed launcher was writing, skipped with a warning. Returns how many
/// frames were skipped so (0 or 1). An error `f` returns stops the read.
pub fn for_each_record(
    reader: impl Read,
    mut f: impl FnMut(RequestRecord) -> Result<(), ReadRecordsError>,
) -> Result<usize, ReadRecordsError> {
    let mut reader = io::BufReader::with_capacity(1 << 20, reader);
    let mut header = [0u8; MAGIC.len()];
    let got = read_full(&mut reader, &mut header)?;
    if got == 0 {
        return Ok(0);
    }
    if got < header.len() {
        // Killed while the header was on its way: a header cut short, and nothing after it.
        return if MAGIC.starts_with(&header[..got]) {
            Ok(1)
        } else {
            Err(ReadRecordsError::NotARecordsFile)
        };
    }
    if header != MAGIC {
        return Err(ReadRecordsError::NotARecordsFile);
    }
    let mut payload = Vec::new();
    let mut last_request_id = Vec::new();
    let mut index = 0u64;
    loop {
        let len = match read_frame_len(&mut reader)? {
            FrameLen::End => return Ok(0),
            FrameLen::Torn => return Ok(torn(index)),
            FrameLen::Len(len) => len,
        };
        index += 1;
        let len = usize::try_from(len).map_err(|_| ReadRecordsError::Decode {
            record: index,
            message: "a record longer than memory",
        })?;
        payload.clear();
        let got = (&mut reader).take(len as u64).read_to_end(&mut payload)?;
        if got < len {
            return Ok(torn(index - 1));
        }
        let record = decode(&payload, &mut last_request_id).map_err(|Malformed(message)| {
            ReadRecordsError::Decode {
                record: index,
                message,
            }
        })?;
        f(record)?;
    }
}

fn torn(whole: u64) -> usize {
    tracing::warn!(
        records = whole,
        "skipping the last record of the records file: it was cut short (the launcher was killed, or the disk refused the rest, while writing it)"
    );
    1
}

enum FrameLen {
    End,
    Torn,
    Len(u64),
}

fn read_frame_len(reader: &mut impl BufRead) -> io::Result<FrameLen> {
    read_frame_len_counting(reader, &mut 0)
}

/// Reads a frame's length, adding the bytes it took to `taken`.
fn read_frame_len_counting(reader: &mut impl BufRead, taken: &mut u64) -> io::Result<FrameLen> {
    let mut value = 0u64;
    let mut shift = 0;
    let mut first = true;
    loop {
        let mut byte = [0u8; 1];
        if read_full(reader, &mut byte)? == 0 {
            return Ok(if first { FrameLen::End } else { FrameLen::Torn });
        }
        *taken += 1;
        first = false;
        if shift >= 64 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "a record length past 64 bits",
            ));
        }
        value |= u64::from(byte[0] & 0x7f) << shift;
        if byte[0] & 0x80 == 0 {
            return Ok(FrameLen::Len(value));
        }
        shift += 7;
    }
}

/// Counts the whole records of a records file past byte `offset` (0, or an offset an earlier call returned),
/// for a live count of a run still being written: returns the offset just past the last whole record and how many
/// whole records lie between. A record still being written is left for the next call.
pub fn count_records_from(path: &Path, offset: u64) -> io::Result<(u64, u64)> {
    let mut reader = io::BufReader::with_capacity(1 << 16, std::fs::File::open(path)?);
    let mut at = offset;
    if at < MAGIC.len() as u64 {
        let mut header = [0u8; MAGIC.len()];
        if read_full(&mut reader, &mut header)? < header.len() {
            return Ok((0, 0));
        }
        at = MAGIC.len() as u64;
    } else {
        io::Seek::seek(&mut reader, io::SeekFrom::Start(at))?;
    }
    let mut whole = 0;
    loop {
        let mut len_bytes = 0u64;
        let len = match read_frame_len_counting(&mut reader, &mut len_bytes)? {
            FrameLen::End | FrameLen::Torn => return Ok((at, whole)),
            FrameLen::Len(len) => len,
        };
        let skipped = io::copy(&mut (&mut reader).take(len), &mut io::sink())?;
        if skipped < len {
            return Ok((at, whole));
        }
        at += len_bytes + len;
        whole += 1;
    }
}

/// Which form a run's records are in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordsFormat {
    /// [`RECORDS_FILE`], as this version writes.
    Binary,
    /// [`RECORDS_JSONL_FILE`], as earlier versions wrote (and `llmbench export`).
    Jsonl,
}

/// The records of one run directory: its `requests.bin`, or an earlier version's `requests.jsonl`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRecords {
    pub path: PathBuf,
    pub format: RecordsFormat,
}

impl RunRecords {
    /// The records in `dir`: `requests.bin` when it is there, else `requests.jsonl` when that is, else
    /// `requests.bin` (whose absence the first read reports).
    pub fn in_dir(dir: &Path) -> RunRecords {
        let binary = dir.join(RECORDS_FILE);
        if !binary.exists() {
            let jsonl = dir.join(RECORDS_JSONL_FILE);
            if jsonl.exists() {
                return RunRecords {
                    path: jsonl,
                    format: RecordsFormat::Jsonl,
                };
            }
        }
        RunRecords {
            path: binary,
            format: RecordsFormat::Binary,
        }
    }

    /// Whether `dir` holds records in either form.
    pub fn exist_in(dir: &Path) -> bool {
        dir.join(RECORDS_FILE).is_file() || dir.join(RECORDS_JSONL_FILE).is_file()
    }

    /// Reads every record, one at a time (see [`for_each_record`] and [`for_each_jsonl`]); returns how many
    /// torn last records were skipped (0 or 1).
    pub fn for_each(
        &self,
        f: impl FnMut(RequestRecord) -> Result<(), ReadRecordsError>,
    ) -> Result<usize, ReadRecordsError> {
        let file = std::fs::File::open(&self.path)?;
        match self.format {
            RecordsFormat::Binary => for_each_record(file, f),
            RecordsFormat::Jsonl => for_each_jsonl(io::BufReader::with_capacity(1 << 20, file), f),
        }
    }

    /// Every record in memory, and how many torn last records were skipped.
    pub fn read_all(&self) -> Result<(Vec<RequestRecord>, usize), ReadRecordsError> {
        let mut records = Vec::new();
        let skipped = self.for_each(|record| {
            records.push(record);
            Ok(())
        })?;
        Ok((records, skipped))
    }

    /// About how much memory the records would take once read (0 when there is no file): what decides between
    /// holding them and summarising them from disk. A JSON line is larger than its record in memory, so its
    /// size stands for itself.
    pub fn memory_estimate(&self) -> u64 {
        let len = std::fs::metadata(&self.path).map_or(0, |m| m.len());
        match self.format {
            RecordsFormat::Binary => len.saturating_mul(MEMORY_PER_FILE_BYTE),
            RecordsFormat::Jsonl => len,
        }
    }
}

/// A whole records file holding `records`, header included: for tests and tools that make run directories.
pub fn file_bytes<'a>(records: impl IntoIterator<Item = &'a RequestRecord>) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    let mut writer = RecordWriter::default();
    for record in records {
        // Writing into a Vec cannot fail.
        let _ = writer.write(&mut out, record);
    }
    out
}

/// Writes one record as a `requests.jsonl` line: one compact JSON object, as earlier versions wrote the records
/// file (`llmbench export`).
pub fn write_jsonl_line(out: &mut impl Write, record: &RequestRecord) -> io::Result<()> {
    serde_json::to_writer(&mut *out, record).map_err(io::Error::from)?;
    out.write_all(b"\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file_of(records: &[RequestRecord]) -> Vec<u8> {
        file_bytes(records)
    }

    fn read_back(bytes: &[u8]) -> (Vec<RequestRecord>, usize) {
        let mut records = Vec::new();
        let skipped = for_each_record(bytes, |r| {
            records.push(r);
            Ok(())
        })
        .unwrap();
        (records, skipped)
    }

    /// A record with every optional part set, and values at the edges of their types.
    fn everything() -> RequestRecord {
        let mut r = RequestRecord::builder(u64::MAX)
            .stage(u32::MAX)
            .scheduled(5_000)
            .sent(4_000) // sent before scheduled: the difference is negative
            .end(u64::MAX)
            .input_tokens(u32::MAX)
            .max_tokens(0)
            .ignore_eos()
            .streaming(true)
            .inputs(7)
            .status(599)
            .usage_of(Usage {
                prompt_tokens: 1,
                completion_tokens: 2,
                cached_tokens: Some(0),
                reasoning_tokens: Some(u32::MAX),
            })
            .finish_reason(FinishReason::Other(Box::new("eos_token ☃".to_owned())))
            .error(
                ErrorClass::ClientCancelled,
                "Request cancelled 0.050s after being sent",
            )
            .chunk(3_000, ChunkKind::Empty)
            .chunk(u64::MAX, ChunkKind::Content { tokens: 1 })
            .chunk(0, ChunkKind::Reasoning { tokens: 0 })
            .chunk(9, ChunkKind::Content { tokens: u32::MAX })
            .chunk(9, ChunkKind::UsageOnly)
            .text("héllo\nworld")
            .turn(3, 4)
            .warmup()
            .request_id("req-1")
            .build();
        r.traceparent = Some(Box::new(TraceParent {
            trace_id: [0xab; 16],
            span_id: [1, 2, 3, 4, 5, 6, 7, 8],
        }));
        r.adapter = Some(Arc::new("lora-a".to_owned()));
        r.images = Some(Arc::new(vec![
            SentImage {
                width: 640,
                height: 480,
                bytes: 1234,
            },
            SentImage {
                width: 0,
                height: u32::MAX,
                bytes: 0,
            },
        ]));
        r
    }

    /// A successful request of `tokens` streamed tokens asked with `ignore_eos`, sent at `sent_ns(id)`, its chunks
    /// still to add.
    fn answered(id: u64, tokens: u32) -> crate::record::RequestRecordBuilder {
        let sent = sent_ns(id);
        RequestRecord::builder(id)
            .scheduled(sent - 2_000)
            .sent(sent)
            .input_tokens(100)
            .max_tokens(tokens)
            .ignore_eos()
            .streaming(true)
            .ok()
            .finish_reason(FinishReason::Length)
            .usage(100, tokens)
    }

    fn sent_ns(id: u64) -> u64 {
        1_000_000_000 + id * 1_000_000
    }

    fn streamed(id: u64, tokens: u32, itl_ns: u64) -> RequestRecord {
        let sent = sent_ns(id);
        let mut b = answered(id, tokens).chunk(sent + 40_000, ChunkKind::Empty);
        let mut at = sent + 50_000;
        for _ in 0..tokens {
            b = b.content_at(at, 1);
            at += itl_ns;
        }
        b.chunk(at, ChunkKind::UsageOnly).end(at + 1_000).build()
    }

    #[test]
    fn every_field_round_trips_exactly_at_the_edges_of_its_type() {
        let records = vec![
            everything(),
            RequestRecord::builder(0).build(),
            streamed(1, 128, 10_000_000),
        ];
        let (back, skipped) = read_back(&file_of(&records));
        assert_eq!(back, records);
        assert_eq!(skipped, 0);
    }

    #[test]
    fn the_json_export_of_a_record_read_back_is_the_line_it_had() {
        let record = everything();
        let mut line = Vec::new();
        write_jsonl_line(&mut line, &record).unwrap();
        let (back, _) = read_back(&file_of(std::slice::from_ref(&record)));
        let mut again = Vec::new();
        write_jsonl_line(&mut again, &back[0]).unwrap();
        assert_eq!(
            String::from_utf8(again).unwrap(),
            String::from_utf8(line).unwrap()
        );
    }

    /// A streamed answer whose gaps wander as a real engine's do: `itl_ns` plus up to `jitter_ns` either way.
    fn jittered(id: u64, tokens: u32, itl_ns: u64, jitter_ns: u64) -> RequestRecord {
        let sent = sent_ns(id);
        let mut b = answered(id, tokens).request_id(&format!(
            "llmbench-vllm-benchmark-sanity_random-20261129-073712-{id}"
        ));
        let mut at = sent + 50_000_000;
        let mut state = id.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        for _ in 0..tokens {
            b = b.content_at(at, 1);
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            at += itl_ns - jitter_ns + state % (2 * jitter_ns + 1);
        }
        let mut r = b.chunk(at, ChunkKind::UsageOnly).end(at + 1_000).build();
        r.traceparent = Some(Box::new(TraceParent {
            trace_id: [0x5a; 16],
            span_id: [0xa5; 8],
        }));
        r
    }

    #[test]
    fn a_128_token_stream_takes_under_600_bytes_with_its_ids() {
        // Gaps of 10 ms ± 150 µs: each is written as its change from the previous gap, at most 300 µs either way,
        // which zigzag doubles and the tag shifts twice more (2.4·10⁶ < 2²² : three varint bytes, some two). A
        // request id after the first costs its last digits, the traceparent 24 bytes, the rest some 30.
        let records: Vec<_> = (1..=20)
            .map(|id| jittered(id, 128, 10_000_000, 150_000))
            .collect();
        let bytes = file_bytes(&records);
        let per_request = (bytes.len() - MAGIC.len()) / records.len();
        assert!(per_request <= 600, "{per_request} bytes a request");
        assert_eq!(read_back(&bytes), (records, 0));
        // A perfectly steady stream costs a byte a chunk.
        let mut steady = Vec::new();
        RecordWriter::default()
            .write(&mut steady, &streamed(7, 128, 10_000_000))
            .unwrap();
        assert!(steady.len() <= 128 + 60, "{} bytes", steady.len());
    }

    #[test]
    fn error_class_codes_stay_what_files_already_hold() {
        // Written files keep these codes: a new class goes at the end of `ErrorClass::ALL`, never between.
        let names: Vec<&str> = ERROR_CLASSES.iter().map(|c| c.as_str()).collect();
        assert_eq!(
            names,
            [
                "http_status",
                "timeout",
                "connection_reset",
                "connect",
                "stream_cut",
                "malformed_event",
                "cancelled",
                "client_cancelled",
                "other"
            ]
        );
    }

    #[test]
    fn request_ids_round_trip_whatever_they_share_with_the_one_before() {
        let ids = [
            Some("llmbench-run-9"),
            Some("llmbench-run-10"),
            None,
            Some("llmbench-run-100"),
            Some("x"),
            Some("llmbench-run-1☃"),
            Some("llmbench-run-1☄"),
            Some(""),
        ];
        let records: Vec<_> = ids
            .iter()
            .enumerate()
            .map(|(n, id)| {
                let b = RequestRecord::builder(n as u64).end(3);
                match id {
                    Some(id) => b.request_id(id).build(),
                    None => b.build(),
                }
            })
            .collect();
        assert_eq!(read_back(&file_bytes(&records)), (records, 0));
    }

    #[test]
    fn a_frame_cut_short_at_the_end_is_skipped_and_counted() {
        let records = vec![streamed(1, 4, 1_000), streamed(2, 4, 1_000)];
        let whole = file_of(&records);
        let first_end = file_of(&records[..1]).len();
        for cut in first_end + 1..whole.len() {
            let (back, skipped) = read_back(&whole[..cut]);
            assert_eq!(back, records[..1], "cut at {cut}");
            assert_eq!(skipped, 1, "cut at {cut}");
        }
        assert_eq!(read_back(&whole[..first_end]), (records[..1].to_vec(), 0));
    }

    #[test]
    fn a_live_count_takes_whole_records_only_and_resumes_where_it_stopped() {
        let dir = std::env::temp_dir().join(format!("llmbench-reccount-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(RECORDS_FILE);
        let records: Vec<_> = (1..=3).map(|id| streamed(id, 3, 1_000)).collect();
        let whole = file_of(&records);
        let two = file_of(&records[..2]).len();
        std::fs::write(&path, &whole[..4]).unwrap();
        assert_eq!(count_records_from(&path, 0).unwrap(), (0, 0));
        std::fs::write(&path, &whole[..two + 5]).unwrap();
        assert_eq!(count_records_from(&path, 0).unwrap(), (two as u64, 2));
        std::fs::write(&path, &whole).unwrap();
        assert_eq!(
            count_records_from(&path, two as u64).unwrap(),
            (whole.len() as u64, 1)
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_empty_or_half_written_header_holds_no_record() {
        assert_eq!(read_back(b""), (Vec::new(), 0));
        assert_eq!(read_back(&MAGIC[..3]), (Vec::new(), 1));
        assert_eq!(read_back(&MAGIC), (Vec::new(), 0));
    }

    #[test]
    fn another_file_is_refused_not_read_as_records() {
        let err = for_each_record(&b"{\"id\":1}\n"[..], |_| Ok(())).unwrap_err();
        assert!(matches!(err, ReadRecordsError::NotARecordsFile), "{err}");
        // The message names the magic the reader looked for.
        assert!(
            err.to_string()
                .contains(&String::from_utf8_lossy(&MAGIC).into_owned()),
            "{err}"
        );
    }

    #[test]
    fn a_damaged_record_in_the_middle_is_an_error_naming_it() {
        let records = vec![streamed(1, 2, 1_000), streamed(2, 2, 1_000)];
        let mut bytes = file_of(&records);
        // The first frame's flags byte (after the magic and a one-byte length) gets a bit no version sets.
        bytes[MAGIC.len() + 1] = 0xff;
        let err = for_each_record(&bytes[..], |_| Ok(())).unwrap_err();
        match err {
            ReadRecordsError::Decode { record, .. } => assert_eq!(record, 1),
            other => panic!("{other}"),
        }
    }

    #[test]
    fn a_run_directory_reads_requests_bin_or_else_an_older_requests_jsonl() {
        let dir = std::env::temp_dir().join(format!("llmbench-recfile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let records = vec![streamed(1, 3, 1_000), everything()];
        let mut jsonl = Vec::new();
        for r in &records {
            write_jsonl_line(&mut jsonl, r).unwrap();
        }
        std::fs::write(dir.join(RECORDS_JSONL_FILE), jsonl).unwrap();
        let older = RunRecords::in_dir(&dir);
        assert_eq!(older.format, RecordsFormat::Jsonl);
        assert_eq!(older.read_all().unwrap(), (records.clone(), 0));
        std::fs::write(dir.join(RECORDS_FILE), file_of(&records[..1])).unwrap();
        let current = RunRecords::in_dir(&dir);
        assert_eq!(current.format, RecordsFormat::Binary);
        assert_eq!(current.read_all().unwrap(), (records[..1].to_vec(), 0));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
