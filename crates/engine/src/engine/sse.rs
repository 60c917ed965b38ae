//! Incremental Server-Sent Events parsing for OpenAI-style streams: bytes in as they arrive, whole `data:`
//! payloads out. Network reads split events anywhere; this keeps the partial tail and never re-scans bytes.
//!
//! A line is held until its end arrives, so a server that never ends one would grow the buffer without bound:
//! a line longer than [`MAX_LINE`] is an error instead.

/// The longest SSE line (an event's `data:` payload and its prefix) accepted. An OpenAI chunk is a few hundred
/// bytes; even a whole long answer with logprobs in one event stays far below this. Anything longer is a server
/// that never ends its line, and holding it would let one stream take the launcher's memory.
pub(crate) const MAX_LINE: usize = 16 * 1024 * 1024;

/// What one complete SSE event carried.
#[derive(Debug, PartialEq, Eq)]
pub enum SseEvent<'a> {
    /// A `data:` payload (without the prefix), to be parsed as a JSON chunk.
    Data(&'a [u8]),
    /// `data: [DONE]`, the end of an OpenAI stream.
    Done,
}

/// Why the stream cannot be parsed further.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    #[error("an SSE line is longer than the {limit}-byte limit")]
    LineTooLong { limit: usize },
}

/// Splits a byte stream into SSE events. Lines other than `data:` (comments, `event:`, `id:`) are skipped, as
/// OpenAI-compatible servers send only `data:` lines.
#[derive(Debug)]
pub struct SseParser {
    buffer: Vec<u8>,
    /// Bytes of `buffer` already consumed as whole events.
    consumed: usize,
    /// Bytes of `buffer` known to hold no line end: a line arriving over many reads is scanned once, not once
    /// per read (which made a 16 MiB line cost gigabytes of scanning).
    scanned: usize,
    /// The longest line accepted, [`MAX_LINE`] outside tests.
    line_limit: usize,
}

impl Default for SseParser {
    fn default() -> Self {
        Self::with_line_limit(MAX_LINE)
    }
}

impl SseParser {
    /// A parser refusing lines longer than `line_limit` bytes (the end-of-line bytes not counted).
    pub(crate) fn with_line_limit(line_limit: usize) -> Self {
        Self {
            buffer: Vec::new(),
            consumed: 0,
            scanned: 0,
            line_limit,
        }
    }

    /// Appends a network read.
    pub fn push(&mut self, bytes: &[u8]) {
        if self.consumed > 0 && self.consumed == self.buffer.len() {
            self.buffer.clear();
            self.consumed = 0;
            self.scanned = 0;
        }
        self.buffer.extend_from_slice(bytes);
    }

    /// The next complete event, if the buffered bytes hold one; an error once a line is over the limit, whether
    /// it has ended or is still arriving (so the verdict does not depend on how reads split it).
    pub fn next_event(&mut self) -> Result<Option<SseEvent<'_>>, SseError> {
        let too_long = SseError::LineTooLong {
            limit: self.line_limit,
        };
        loop {
            let from = self.scanned.max(self.consumed);
            // memchr's vectorised search: this scan was the client's largest single cost at the ceiling.
            let Some(found) = memchr::memchr(b'\n', &self.buffer[from..]) else {
                self.scanned = self.buffer.len();
                // A partial line over the limit will only get longer.
                return if line_length(&self.buffer[self.consumed..]) > self.line_limit {
                    Err(too_long)
                } else {
                    Ok(None)
                };
            };
            let line_start = self.consumed;
            let line_end = from + found - line_start;
            let mut line = &self.buffer[line_start..line_start + line_end];
            if line_length(line) > self.line_limit {
                return Err(too_long);
            }
            self.consumed += line_end + 1;
            if let Some(stripped) = line.strip_suffix(b"\r") {
                line = stripped;
            }
            let Some(payload) = line.strip_prefix(b"data:") else {
                continue;
            };
            let payload = payload.strip_prefix(b" ").unwrap_or(payload);
            if payload == b"[DONE]" {
                return Ok(Some(SseEvent::Done));
            }
            if payload.is_empty() {
                continue;
            }
            return Ok(Some(SseEvent::Data(payload)));
        }
    }

    /// Whether bytes of an unfinished line remain (a stream that ends here was cut mid-event).
    pub(crate) fn has_partial(&self) -> bool {
        self.buffer[self.consumed..]
            .iter()
            .any(|b| !b.is_ascii_whitespace())
    }

    /// Drops consumed bytes so the buffer does not grow over a long stream.
    pub fn compact(&mut self) {
        if self.consumed > 0 {
            self.buffer.drain(..self.consumed);
            self.scanned = self.scanned.saturating_sub(self.consumed);
            self.consumed = 0;
        }
    }
}

/// A line's length for the limit: its bytes without the CR of a CRLF ending, so a line ending split between
/// two reads counts the same as one arriving whole.
fn line_length(line: &[u8]) -> usize {
    line.strip_suffix(b"\r").unwrap_or(line).len()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// What the parser made of its input: each event as owned text, then the error that stopped it, if any.
    #[derive(Debug, PartialEq, Eq, Default)]
    struct Parsed {
        events: Vec<Vec<u8>>,
        error: Option<SseError>,
    }

    impl Parsed {
        /// Drains every complete event; false once the parser failed.
        fn drain(&mut self, parser: &mut SseParser) -> bool {
            loop {
                match parser.next_event() {
                    Ok(Some(SseEvent::Data(data))) => self.events.push(data.to_vec()),
                    Ok(Some(SseEvent::Done)) => self.events.push(b"[DONE]".to_vec()),
                    Ok(None) => {
                        parser.compact();
                        return true;
                    }
                    Err(error) => {
                        self.error = Some(error);
                        return false;
                    }
                }
            }
        }
    }

    /// Feeds `input` in pieces ending at each of `cuts` (sorted, deduplicated) and then the rest.
    fn parse_split(input: &[u8], cuts: &[usize], line_limit: usize) -> Parsed {
        let mut parser = SseParser::with_line_limit(line_limit);
        let mut parsed = Parsed::default();
        let mut from = 0;
        for &cut in cuts.iter().chain(std::iter::once(&input.len())) {
            let cut = cut.clamp(from, input.len());
            parser.push(&input[from..cut]);
            from = cut;
            if !parsed.drain(&mut parser) {
                break;
            }
        }
        parsed
    }

    fn events(parser: &mut SseParser) -> Vec<String> {
        let mut parsed = Parsed::default();
        assert!(parsed.drain(parser), "{:?}", parsed.error);
        parsed
            .events
            .iter()
            .map(|e| String::from_utf8_lossy(e).into_owned())
            .collect()
    }

    #[test]
    fn events_split_across_reads_are_reassembled() {
        let mut parser = SseParser::default();
        parser.push(b"data: {\"a\"");
        assert_eq!(events(&mut parser), Vec::<String>::new());
        assert!(parser.has_partial());
        parser.push(b":1}\n\ndata: {\"b\":2}\n\nda");
        assert_eq!(events(&mut parser), vec!["{\"a\":1}", "{\"b\":2}"]);
        parser.push(b"ta: [DONE]\n\n");
        assert_eq!(events(&mut parser), vec!["[DONE]"]);
        assert!(!parser.has_partial());
    }

    #[test]
    fn crlf_comments_and_other_fields_are_tolerated() {
        let mut parser = SseParser::default();
        parser.push(b": keep-alive\r\nevent: message\r\ndata:{\"x\":1}\r\n\r\n");
        assert_eq!(events(&mut parser), vec!["{\"x\":1}"]);
    }

    #[test]
    fn a_line_over_the_limit_is_refused_before_it_ends() {
        let mut parser = SseParser::with_line_limit(8);
        parser.push(b"data: 1\n");
        assert_eq!(parser.next_event(), Ok(Some(SseEvent::Data(b"1"))));
        parser.push(b"data: 123");
        assert_eq!(
            parser.next_event(),
            Err(SseError::LineTooLong { limit: 8 }),
            "a partial line already past the limit fails without waiting for its end"
        );
    }

    #[test]
    fn a_line_arriving_over_many_reads_is_scanned_once() {
        let mut parser = SseParser::default();
        parser.push(b"data: {\"choices\":");
        assert_eq!(parser.next_event(), Ok(None));
        assert_eq!(
            parser.scanned,
            parser.buffer.len(),
            "the partial line is known to have no end"
        );
        parser.push(b"[]}\n");
        assert_eq!(
            parser.next_event(),
            Ok(Some(SseEvent::Data(b"{\"choices\":[]}")))
        );
    }

    #[test]
    fn the_line_limit_error_names_the_limit() {
        let message = SseError::LineTooLong { limit: MAX_LINE }.to_string();
        assert!(message.contains("16777216"), "{message}");
    }

    /// An SSE stream as a server might send it: data lines (JSON-ish, `[DONE]`, empty), comments, other fields,
    /// LF or CRLF endings, and sometimes an unfinished last line.
    fn sse_stream() -> impl Strategy<Value = Vec<u8>> {
        let line = prop_oneof![
            "[ -~]{0,40}".prop_map(|text| format!("data: {text}")),
            "[ -~]{0,40}".prop_map(|text| format!("data:{text}")),
            Just("data: [DONE]".to_owned()),
            "[ -~]{0,20}".prop_map(|text| format!(": {text}")),
            "[a-z]{1,8}".prop_map(|name| format!("event: {name}")),
            Just(String::new()),
        ];
        (
            prop::collection::vec((line, any::<bool>()), 0..24),
            "[ -~]{0,12}",
        )
            .prop_map(|(lines, tail)| {
                let mut out = Vec::new();
                for (line, crlf) in lines {
                    out.extend_from_slice(line.as_bytes());
                    out.extend_from_slice(if crlf { b"\r\n" } else { b"\n" });
                }
                out.extend_from_slice(tail.as_bytes());
                out
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn the_same_events_come_out_however_reads_split_the_stream(
            stream in sse_stream(),
            mut cuts in prop::collection::vec(0..512_usize, 0..12),
            line_limit in prop_oneof![Just(MAX_LINE), 4..48_usize],
        ) {
            cuts.sort_unstable();
            let whole = parse_split(&stream, &[], line_limit);
            let split = parse_split(&stream, &cuts, line_limit);
            prop_assert_eq!(whole, split);
        }

        #[test]
        fn byte_by_byte_reads_give_the_same_events_as_one_read(
            stream in sse_stream(),
            line_limit in prop_oneof![Just(MAX_LINE), 4..48_usize],
        ) {
            let every_byte: Vec<usize> = (1..stream.len()).collect();
            prop_assert_eq!(
                parse_split(&stream, &[], line_limit),
                parse_split(&stream, &every_byte, line_limit)
            );
        }

        #[test]
        fn arbitrary_bytes_never_panic_and_never_exceed_the_line_limit(
            bytes in prop::collection::vec(any::<u8>(), 0..2048),
            mut cuts in prop::collection::vec(0..2048_usize, 0..8),
            line_limit in 1..64_usize,
        ) {
            cuts.sort_unstable();
            let parsed = parse_split(&bytes, &cuts, line_limit);
            for event in &parsed.events {
                prop_assert!(event.len() <= line_limit);
            }
        }
    }
}
