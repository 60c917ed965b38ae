//! Incremental Server-Sent Events parsing for OpenAI-style streams: bytes in as they arrive, whole `data:`
//! payloads out. Network reads split events anywhere; this keeps the partial tail and never re-scans bytes.

/// What one complete SSE event carried.
#[derive(Debug, PartialEq, Eq)]
pub enum SseEvent<'a> {
    /// A `data:` payload (without the prefix), to be parsed as a JSON chunk.
    Data(&'a [u8]),
    /// `data: [DONE]`, the end of an OpenAI stream.
    Done,
}

/// Splits a byte stream into SSE events. Lines other than `data:` (comments, `event:`, `id:`) are skipped, as
/// OpenAI-compatible servers send only `data:` lines.
#[derive(Debug, Default)]
pub struct SseParser {
    buffer: Vec<u8>,
    /// Bytes of `buffer` already consumed as whole events.
    consumed: usize,
}

impl SseParser {
    /// Appends a network read.
    pub fn push(&mut self, bytes: &[u8]) {
        if self.consumed > 0 && self.consumed == self.buffer.len() {
            self.buffer.clear();
            self.consumed = 0;
        }
        self.buffer.extend_from_slice(bytes);
    }

    /// The next complete event, if the buffered bytes hold one.
    pub fn next_event(&mut self) -> Option<SseEvent<'_>> {
        loop {
            let rest = &self.buffer[self.consumed..];
            // memchr's vectorised search: this scan was the client's largest single cost at the ceiling.
            let line_end = memchr::memchr(b'\n', rest)?;
            let line_start = self.consumed;
            self.consumed += line_end + 1;
            let mut line = &self.buffer[line_start..line_start + line_end];
            if let Some(stripped) = line.strip_suffix(b"\r") {
                line = stripped;
            }
            let Some(payload) = line.strip_prefix(b"data:") else {
                continue;
            };
            let payload = payload.strip_prefix(b" ").unwrap_or(payload);
            if payload == b"[DONE]" {
                return Some(SseEvent::Done);
            }
            if payload.is_empty() {
                continue;
            }
            return Some(SseEvent::Data(payload));
        }
    }

    /// Whether bytes of an unfinished line remain (a stream that ends here was cut mid-event).
    pub fn has_partial(&self) -> bool {
        self.buffer[self.consumed..]
            .iter()
            .any(|b| !b.is_ascii_whitespace())
    }

    /// Drops consumed bytes so the buffer does not grow over a long stream.
    pub fn compact(&mut self) {
        if self.consumed > 0 {
            self.buffer.drain(..self.consumed);
            self.consumed = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(parser: &mut SseParser) -> Vec<String> {
        let mut out = Vec::new();
        while let Some(event) = parser.next_event() {
            out.push(match event {
                SseEvent::Data(d) => String::from_utf8_lossy(d).into_owned(),
                SseEvent::Done => "[DONE]".to_owned(),
            });
        }
        parser.compact();
        out
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
}
