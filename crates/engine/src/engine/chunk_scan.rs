//! A completions or chat completions stream chunk read by scanning its bytes once, without a JSON tree and
//! without allocating (unless the text is kept): the per-token path of a run. The fields it reads are kept as
//! slices of the event and filled in place (large values returned through layers of `Option` were copied
//! around more than the bytes were scanned); escapes are checked as they are met and decoded only for text that
//! is kept and a finish reason.
//!
//! The reference is `client::parse_openai_chunk` (serde_json into borrowed structs). This scanner reads only
//! events it can prove it reads exactly as the reference does, and answers `None` for every other one, which the
//! caller then hands to the reference — so an unusual event costs a serde_json parse, never a guess. It proves:
//!
//! - the event is one JSON object, with JSON whitespace around it, and every byte of it is JSON as serde_json
//!   judges it: strings without raw control characters and with valid escapes (a `\u` surrogate must be paired
//!   anywhere, which the reference requires only of the strings it reads: a lone one in another string falls
//!   back), numbers in JSON's grammar, `true`, `false`, `null`, no trailing commas, nesting at most
//!   [`MAX_DEPTH`] deep (serde_json stops at 128);
//! - keys come in any order, but carry no escape (an escaped key could spell a field the reference reads);
//! - no field the reference reads appears twice in one object (serde refuses duplicates), and there is no
//!   `error` key (the reference turns it into the request's error);
//! - `choices` is absent or an array of at most one object (several choices are rare and read by the
//!   reference); in it `text` and `finish_reason` are strings or `null`, `delta` and `message` objects or
//!   `null`, and their `content`, `reasoning_content` and `reasoning` strings or `null`;
//! - `usage` is absent, `null` or an object whose `prompt_tokens` and `completion_tokens` are plain integers
//!   that fit `u32` (no sign, fraction, exponent or leading zero), whose `prompt_tokens_details` and
//!   `completion_tokens_details` are `null` or objects, and their `cached_tokens` and `reasoning_tokens` such an
//!   integer or `null`.
//!
//! What it then reports is computed as the reference computes it: the kind (content wins over reasoning, a
//! choice with neither is `Empty`, no choice is `UsageOnly` only beside usage), the first finish reason, the
//! usage, and the kept text (`text` then `content`). A string is empty exactly when it has no bytes between its
//! quotes, since every escape stands for at least one character.

use std::borrow::Cow;

use llmbench_model::record::{ChunkKind, FinishReason};

use super::client::{ParsedChunk, UsageSeen};

/// Objects and arrays nested deeper than this fall back to serde_json (whose limit is 128): a chunk nests three
/// or four deep, logprobs five.
const MAX_DEPTH: usize = 32;

/// The chunk `text` says, or `None` when the reference parser must read it.
pub(super) fn scan_openai_chunk(text: &str, keep_text: bool) -> Option<ParsedChunk> {
    scan_whole(text, keep_text, None)
}

/// [`scan_openai_chunk`], also making `template` of the chunk when a stream's next chunks can be read from it.
pub(super) fn scan_openai_chunk_learning(
    text: &str,
    keep_text: bool,
    template: &mut ChunkTemplate,
) -> Option<ParsedChunk> {
    scan_whole(text, keep_text, Some(template))
}

fn scan_whole(
    text: &str,
    keep_text: bool,
    template: Option<&mut ChunkTemplate>,
) -> Option<ParsedChunk> {
    let mut scanner = Scanner { text, at: 0 };
    let mut chunk = Chunk::default();
    scanner.whitespace();
    scanner.chunk(&mut chunk)?;
    scanner.whitespace();
    if scanner.at != text.len() {
        return None;
    }
    if let Some(template) = template {
        template.learn(text, &chunk);
    }
    chunk.parsed(keep_text)
}

/// The last chunk of a stream the scanner read, with the place of its one text value: the next chunk of the same
/// stream is usually the same bytes around another text (vLLM's and llama.cpp's chunks repeat the id, model,
/// index and nulls each time), and is then read by comparing those bytes and scanning only the new text.
///
/// Why that is exact: the scanner reads left to right and never looks back, so on identical bytes before the
/// value it reaches the value in the same state, a string value leaves it in the same state whatever the
/// string holds, and identical bytes after it then read as they did. A chunk that differs anywhere else, or whose
/// middle is not exactly one valid JSON string, is scanned whole (and may become the template).
#[derive(Debug, Default)]
pub(super) struct ChunkTemplate {
    /// The chunk's bytes; empty while there is no template.
    event: Vec<u8>,
    /// Where its text value is, quotes included.
    value: std::ops::Range<usize>,
    /// What the rest of the chunk said.
    usage: Option<UsageSeen>,
    finish_reason: Option<FinishReason>,
    /// The message beside the value had reasoning (the value is then content).
    reasoning: bool,
}

impl ChunkTemplate {
    /// Makes `chunk` (just scanned from `text`) the template when exactly one text value is read from it.
    fn learn(&mut self, text: &str, chunk: &Chunk<'_>) {
        self.event.clear();
        let Some(choice) = &chunk.choice else {
            return;
        };
        let message = choice.delta.as_ref().or(choice.message.as_ref());
        let content = message.and_then(|m| m.content);
        let value = match (choice.text, content) {
            (Some(value), None) | (None, Some(value)) => value,
            _ => return,
        };
        let finish_reason = match choice.finish_reason {
            None => None,
            Some(reason) => match reason.decoded() {
                Some(reason) => Some(FinishReason::from_server(&reason)),
                None => return,
            },
        };
        // The value's characters are a slice of `text`, just inside its quotes.
        let start = value.raw.as_ptr() as usize - text.as_ptr() as usize - 1;
        self.value = start..start + value.raw.len() + 2;
        self.usage = chunk.usage;
        self.finish_reason = finish_reason;
        self.reasoning = message.is_some_and(|m| m.reasoning);
        self.event.extend_from_slice(text.as_bytes());
    }

    /// The chunk `event` says, when it is the template's bytes around another JSON string; `None` otherwise.
    pub(super) fn reread(&self, event: &[u8], keep_text: bool) -> Option<ParsedChunk> {
        if self.event.is_empty() {
            return None;
        }
        let before = &self.event[..self.value.start];
        let after = &self.event[self.value.end..];
        if event.len() < before.len() + after.len()
            || !event.starts_with(before)
            || !event.ends_with(after)
        {
            return None;
        }
        // The bytes around it were valid UTF-8 and end and start beside an ASCII quote: only the middle is new.
        let middle = std::str::from_utf8(&event[before.len()..event.len() - after.len()]).ok()?;
        let mut scanner = Scanner {
            text: middle,
            at: 0,
        };
        let value = scanner.string()?;
        if scanner.at != middle.len() {
            return None;
        }
        let kind = if value.has_text() {
            ChunkKind::Content { tokens: 1 }
        } else if self.reasoning {
            ChunkKind::Reasoning { tokens: 1 }
        } else {
            ChunkKind::Empty
        };
        let text = if keep_text {
            Some(value.decoded()?.into_owned())
        } else {
            None
        };
        Some(ParsedChunk {
            kind: Some(kind),
            usage: self.usage,
            finish_reason: self.finish_reason.clone(),
            text,
            error: None,
        })
    }
}

/// What the chunk's fields said, as slices of the event.
#[derive(Default)]
struct Chunk<'a> {
    choice: Option<Choice<'a>>,
    usage: Option<UsageSeen>,
}

#[derive(Default)]
struct Choice<'a> {
    /// A completion's `text`.
    text: Option<Str<'a>>,
    delta: Option<Message<'a>>,
    message: Option<Message<'a>>,
    finish_reason: Option<Str<'a>>,
}

#[derive(Default)]
struct Message<'a> {
    content: Option<Str<'a>>,
    /// `reasoning_content` or `reasoning` had a character (reasoning is never kept).
    reasoning: bool,
}

/// A string as it stands between its quotes, already checked: valid escapes, no raw control character.
#[derive(Clone, Copy)]
struct Str<'a> {
    raw: &'a str,
    escaped: bool,
}

impl<'a> Str<'a> {
    /// Every escape stands for at least one character, so a string is empty exactly when it has no bytes.
    fn has_text(self) -> bool {
        !self.raw.is_empty()
    }

    /// The string's characters; `None` only for an escape the scan would have refused.
    fn decoded(self) -> Option<Cow<'a, str>> {
        if !self.escaped {
            return Some(Cow::Borrowed(self.raw));
        }
        let mut scanner = Scanner {
            text: self.raw,
            at: 0,
        };
        let mut out = String::with_capacity(self.raw.len());
        let mut run = 0;
        while let Some(found) = memchr::memchr(b'\\', &self.raw.as_bytes()[scanner.at..]) {
            let stop = scanner.at + found;
            out.push_str(&self.raw[run..stop]);
            scanner.at = stop + 1;
            out.push(scanner.escape()?);
            run = scanner.at;
        }
        out.push_str(&self.raw[run..]);
        Some(Cow::Owned(out))
    }
}

fn has_text(field: Option<Str<'_>>) -> bool {
    field.is_some_and(Str::has_text)
}

impl Chunk<'_> {
    fn parsed(self, keep_text: bool) -> Option<ParsedChunk> {
        let Some(choice) = self.choice else {
            return Some(ParsedChunk {
                kind: self.usage.map(|_| ChunkKind::UsageOnly),
                usage: self.usage,
                finish_reason: None,
                text: keep_text.then(String::new),
                error: None,
            });
        };
        // A chat chunk's `delta`, or a whole chat answer's `message`, as the reference reads them.
        let message = choice.delta.as_ref().or(choice.message.as_ref());
        let content = message.and_then(|m| m.content);
        let kind = if has_text(choice.text) || has_text(content) {
            ChunkKind::Content { tokens: 1 }
        } else if message.is_some_and(|m| m.reasoning) {
            ChunkKind::Reasoning { tokens: 1 }
        } else {
            ChunkKind::Empty
        };
        let text = if keep_text {
            let mut kept = String::new();
            for part in [choice.text, content].into_iter().flatten() {
                kept.push_str(&part.decoded()?);
            }
            Some(kept)
        } else {
            None
        };
        let finish_reason = match choice.finish_reason {
            Some(reason) => Some(FinishReason::from_server(&reason.decoded()?)),
            None => None,
        };
        Some(ParsedChunk {
            kind: Some(kind),
            usage: self.usage,
            finish_reason,
            text,
            error: None,
        })
    }
}

/// Marks field `bit` of an object read; `None` (fall back) when the object names it twice, which serde refuses.
fn first_time(seen: &mut u8, bit: u8) -> Option<()> {
    let first = *seen & bit == 0;
    *seen |= bit;
    first.then_some(())
}

/// Bytes that end a run of plain string characters: the quote, the backslash and the control characters.
static SPECIAL: [bool; 256] = {
    let mut table = [false; 256];
    let mut byte = 0;
    while byte < 0x20 {
        table[byte] = true;
        byte += 1;
    }
    table[b'"' as usize] = true;
    table[b'\\' as usize] = true;
    table
};

struct Scanner<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Scanner<'a> {
    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.at).copied()
    }

    /// Consumes `byte` if it is next.
    fn eat(&mut self, byte: u8) -> bool {
        let next = self.peek() == Some(byte);
        self.at += usize::from(next);
        next
    }

    fn expect(&mut self, byte: u8) -> Option<()> {
        self.eat(byte).then_some(())
    }

    /// JSON's whitespace: space, tab, LF, CR (serde_json's set).
    fn whitespace(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    /// The members of an object whose `{` is next: `member` reads each value (the scanner on its first byte)
    /// for its key. Whitespace and commas as JSON has them; a key with an escape falls back.
    fn object(&mut self, mut member: impl FnMut(&mut Self, &'a [u8]) -> Option<()>) -> Option<()> {
        self.expect(b'{')?;
        self.whitespace();
        if self.eat(b'}') {
            return Some(());
        }
        loop {
            let key = self.key()?;
            self.whitespace();
            self.expect(b':')?;
            self.whitespace();
            member(self, key)?;
            self.whitespace();
            if self.eat(b',') {
                self.whitespace();
                continue;
            }
            return self.expect(b'}');
        }
    }

    /// Advances over plain string bytes to the next quote, backslash or control character, and returns it.
    fn plain_run(&mut self) -> Option<u8> {
        let bytes = self.text.as_bytes();
        while let Some(&byte) = bytes.get(self.at) {
            if SPECIAL[usize::from(byte)] {
                return Some(byte);
            }
            self.at += 1;
        }
        None
    }

    /// A key without escapes, as raw bytes.
    fn key(&mut self) -> Option<&'a [u8]> {
        self.expect(b'"')?;
        let start = self.at;
        if self.plain_run()? != b'"' {
            return None;
        }
        let key = &self.text.as_bytes()[start..self.at];
        self.at += 1;
        Some(key)
    }

    /// `null`, consumed, or something else, left for the caller.
    fn null(&mut self) -> Option<bool> {
        if self.peek() != Some(b'n') {
            return Some(false);
        }
        self.literal(b"null")?;
        Some(true)
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        let end = self.at + word.len();
        (self.text.as_bytes().get(self.at..end)? == word).then(|| self.at = end)
    }

    /// The top-level object.
    fn chunk(&mut self, chunk: &mut Chunk<'a>) -> Option<()> {
        let mut seen = 0;
        self.object(|s, key| match key {
            b"choices" => {
                first_time(&mut seen, 1)?;
                s.choices(&mut chunk.choice)
            }
            b"usage" => {
                first_time(&mut seen, 2)?;
                if !s.null()? {
                    chunk.usage = Some(s.usage()?);
                }
                Some(())
            }
            // The server failed the request: the reference words its error.
            b"error" => None,
            _ => s.skip_value(1),
        })
    }

    /// `choices`: no choice, or exactly one.
    fn choices(&mut self, into: &mut Option<Choice<'a>>) -> Option<()> {
        self.expect(b'[')?;
        self.whitespace();
        if self.eat(b']') {
            return Some(());
        }
        self.choice(into.insert(Choice::default()))?;
        self.whitespace();
        // A second choice (`,`) falls back here.
        self.expect(b']')
    }

    fn choice(&mut self, choice: &mut Choice<'a>) -> Option<()> {
        let mut seen = 0;
        self.object(|s, key| match key {
            b"text" => {
                first_time(&mut seen, 1)?;
                s.nullable_string(&mut choice.text)
            }
            b"delta" => {
                first_time(&mut seen, 2)?;
                s.nullable_message(&mut choice.delta)
            }
            b"message" => {
                first_time(&mut seen, 4)?;
                s.nullable_message(&mut choice.message)
            }
            b"finish_reason" => {
                first_time(&mut seen, 8)?;
                s.nullable_string(&mut choice.finish_reason)
            }
            _ => s.skip_value(2),
        })
    }

    fn nullable_message(&mut self, into: &mut Option<Message<'a>>) -> Option<()> {
        if self.null()? {
            return Some(());
        }
        let message = into.insert(Message::default());
        let mut seen = 0;
        self.object(|s, key| {
            let bit = match key {
                b"content" => 1,
                b"reasoning_content" => 2,
                b"reasoning" => 4,
                _ => return s.skip_value(3),
            };
            first_time(&mut seen, bit)?;
            let mut value = None;
            s.nullable_string(&mut value)?;
            if bit == 1 {
                message.content = value;
            } else {
                message.reasoning |= has_text(value);
            }
            Some(())
        })
    }

    fn usage(&mut self) -> Option<UsageSeen> {
        // The reference's counts default to 0 when absent; the details' counts stay absent.
        let mut usage = UsageSeen {
            prompt_tokens: Some(0),
            completion_tokens: Some(0),
            cached_tokens: None,
            reasoning_tokens: None,
        };
        let mut seen = 0;
        self.object(|s, key| match key {
            b"prompt_tokens" => {
                first_time(&mut seen, 1)?;
                usage.prompt_tokens = Some(s.count()?);
                Some(())
            }
            b"completion_tokens" => {
                first_time(&mut seen, 2)?;
                usage.completion_tokens = Some(s.count()?);
                Some(())
            }
            b"prompt_tokens_details" => {
                first_time(&mut seen, 4)?;
                usage.cached_tokens = s.nullable_details(b"cached_tokens")?;
                Some(())
            }
            b"completion_tokens_details" => {
                first_time(&mut seen, 8)?;
                usage.reasoning_tokens = s.nullable_details(b"reasoning_tokens")?;
                Some(())
            }
            _ => s.skip_value(2),
        })?;
        Some(usage)
    }

    /// A `*_tokens_details` object (or `null`) and its one count the reference reads, `name`.
    fn nullable_details(&mut self, name: &[u8]) -> Option<Option<u32>> {
        if self.null()? {
            return Some(None);
        }
        let mut count = None;
        let mut seen = 0;
        self.object(|s, key| {
            if key != name {
                return s.skip_value(3);
            }
            first_time(&mut seen, 1)?;
            if !s.null()? {
                count = Some(s.count()?);
            }
            Some(())
        })?;
        Some(count)
    }

    /// A token count: digits without a leading zero (or `0`), fitting `u32`.
    fn count(&mut self) -> Option<u32> {
        let bytes = self.text.as_bytes();
        let start = self.at;
        let digits = bytes[start..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        let number = &self.text[start..start + digits];
        if digits == 0 || (digits > 1 && number.starts_with('0')) {
            return None;
        }
        // A fraction or an exponent is a float to serde, which a u32 refuses.
        if matches!(bytes.get(start + digits), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        self.at = start + digits;
        number.parse().ok()
    }

    /// A string or `null`, into `field`.
    fn nullable_string(&mut self, field: &mut Option<Str<'a>>) -> Option<()> {
        if !self.null()? {
            *field = Some(self.string()?);
        }
        Some(())
    }

    /// A string whose `"` is next, valid as serde_json reads a string into `str`: no raw control character,
    /// known escapes, paired surrogates.
    fn string(&mut self) -> Option<Str<'a>> {
        self.expect(b'"')?;
        let start = self.at;
        let mut escaped = false;
        loop {
            match self.plain_run()? {
                b'"' => {
                    // `start` is after a quote and `self.at` at one: both are character boundaries.
                    let raw = &self.text[start..self.at];
                    self.at += 1;
                    return Some(Str { raw, escaped });
                }
                b'\\' => {
                    self.at += 1;
                    self.escape()?;
                    escaped = true;
                }
                _ => return None,
            }
        }
    }

    /// The character of the escape after a `\`.
    fn escape(&mut self) -> Option<char> {
        let byte = self.peek()?;
        self.at += 1;
        Some(match byte {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let unit = self.hex4()?;
                match unit {
                    0xD800..=0xDBFF => {
                        self.literal(b"\\u")?;
                        let low = self.hex4()?;
                        if !(0xDC00..=0xDFFF).contains(&low) {
                            return None;
                        }
                        let code = 0x1_0000
                            + ((u32::from(unit) - 0xD800) << 10)
                            + (u32::from(low) - 0xDC00);
                        char::from_u32(code)?
                    }
                    // A trailing surrogate first is refused by serde_json too.
                    0xDC00..=0xDFFF => return None,
                    _ => char::from_u32(u32::from(unit))?,
                }
            }
            _ => return None,
        })
    }

    fn hex4(&mut self) -> Option<u16> {
        let digits = self.text.get(self.at..self.at + 4)?;
        if !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        self.at += 4;
        u16::from_str_radix(digits, 16).ok()
    }

    /// Skips any JSON value, checking it is valid; `depth` is the nesting it sits in.
    fn skip_value(&mut self, depth: usize) -> Option<()> {
        match self.peek()? {
            b'"' => self.string().map(drop),
            b'{' if depth < MAX_DEPTH => self.object(|s, _| s.skip_value(depth + 1)),
            b'[' if depth < MAX_DEPTH => {
                self.at += 1;
                self.whitespace();
                if self.eat(b']') {
                    return Some(());
                }
                loop {
                    self.skip_value(depth + 1)?;
                    self.whitespace();
                    if self.eat(b',') {
                        self.whitespace();
                        continue;
                    }
                    return self.expect(b']');
                }
            }
            b'n' => self.literal(b"null"),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    /// A number in JSON's grammar: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
    fn number(&mut self) -> Option<()> {
        self.eat(b'-');
        match self.peek()? {
            b'0' => self.at += 1,
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        if self.eat(b'.') {
            self.at_least_one_digit()?;
        }
        if self.eat(b'e') || self.eat(b'E') {
            if !self.eat(b'+') {
                self.eat(b'-');
            }
            self.at_least_one_digit()?;
        }
        Some(())
    }

    fn digits(&mut self) {
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.at += 1;
        }
    }

    fn at_least_one_digit(&mut self) -> Option<()> {
        let start = self.at;
        self.digits();
        (self.at > start).then_some(())
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::super::client::parse_openai_chunk;
    use super::super::sse::{SseEvent, SseParser};
    use super::*;

    /// Every recorded stream and whole answer (see `tests/fixtures/streams/SOURCES.md`).
    const RECORDED: &[(&str, &str)] = &[
        (
            "llama-completions.sse",
            include_str!("../../tests/fixtures/streams/llama-completions.sse"),
        ),
        (
            "llama-chat.sse",
            include_str!("../../tests/fixtures/streams/llama-chat.sse"),
        ),
        (
            "llama-completions-logprobs.sse",
            include_str!("../../tests/fixtures/streams/llama-completions-logprobs.sse"),
        ),
        (
            "llama-chat-logprobs.sse",
            include_str!("../../tests/fixtures/streams/llama-chat-logprobs.sse"),
        ),
        (
            "llmd-sim-completions.sse",
            include_str!("../../tests/fixtures/streams/llmd-sim-completions.sse"),
        ),
        (
            "llmd-sim-chat.sse",
            include_str!("../../tests/fixtures/streams/llmd-sim-chat.sse"),
        ),
        (
            "llmbench-sim-completions.sse",
            include_str!("../../tests/fixtures/streams/llmbench-sim-completions.sse"),
        ),
        (
            "llmbench-sim-chat.sse",
            include_str!("../../tests/fixtures/streams/llmbench-sim-chat.sse"),
        ),
        (
            "handwritten.sse",
            include_str!("../../tests/fixtures/streams/handwritten.sse"),
        ),
        (
            "llama-chat-whole.json",
            include_str!("../../tests/fixtures/streams/llama-chat-whole.json"),
        ),
        (
            "llama-completions-whole.json",
            include_str!("../../tests/fixtures/streams/llama-completions-whole.json"),
        ),
        (
            "llmbench-sim-chat-whole.json",
            include_str!("../../tests/fixtures/streams/llmbench-sim-chat-whole.json"),
        ),
        (
            "llmbench-sim-completions-whole.json",
            include_str!("../../tests/fixtures/streams/llmbench-sim-completions-whole.json"),
        ),
    ];

    /// The `data:` payloads of a recorded stream, or a whole answer as one payload.
    fn payloads(name: &str, body: &str) -> Vec<String> {
        if name.ends_with(".json") {
            return vec![body.to_owned()];
        }
        let mut parser = SseParser::default();
        parser.push(body.as_bytes());
        let mut out = Vec::new();
        while let Some(event) = parser.next_event().expect("a recorded stream splits") {
            if let SseEvent::Data(data) = event {
                out.push(String::from_utf8(data.to_vec()).expect("UTF-8"));
            }
        }
        out
    }

    /// The scanner agrees with the reference wherever it answers; `Some` when it answered.
    fn agrees(payload: &str, keep_text: bool) -> Result<bool, TestCaseError> {
        let scanned = scan_openai_chunk(payload, keep_text);
        let reference = parse_openai_chunk(payload, keep_text);
        match (&scanned, reference) {
            (None, _) => {}
            (Some(scanned), Ok(reference)) => prop_assert_eq!(scanned, &reference, "{}", payload),
            (Some(scanned), Err(error)) => {
                prop_assert!(
                    false,
                    "scanned {scanned:?} where serde_json refused ({error}): {payload}"
                )
            }
        }
        Ok(scanned.is_some())
    }

    #[test]
    fn every_recorded_chunk_reads_the_same_both_ways_and_only_the_unusual_fall_back() {
        let mut fell_back = Vec::new();
        let mut scanned = 0;
        for (name, body) in RECORDED {
            for payload in payloads(name, body) {
                for keep_text in [false, true] {
                    match agrees(&payload, keep_text) {
                        Ok(true) => scanned += 1,
                        Ok(false) => fell_back.push(payload.clone()),
                        Err(failure) => panic!("{name}: {failure}"),
                    }
                }
            }
        }
        // Each of the three unusual events of `handwritten.sse`, read with and without the text.
        assert_eq!(
            fell_back,
            [
                r#"{"id":"cmpl-n2","object":"text_completion","created":1732000000,"model":"m","choices":[{"index":0,"text":"a","finish_reason":null},{"index":1,"text":"b","finish_reason":"length"}]}"#,
                r#"{"choices":[],"error":null}"#,
                r#"{"choices":[{"text":"a"}],"choices":[]}"#,
            ]
            .iter()
            .flat_map(|p| [p.to_string(), p.to_string()])
            .collect::<Vec<_>>()
        );
        assert_eq!(scanned, 2 * 59, "every other recorded event is scanned");
    }

    /// What one chunk costs each reader: `cargo test --release -p llmbench-engine --lib per_chunk_cost --
    /// --ignored --nocapture`. Prints, asserts nothing about time (the machine is shared).
    #[test]
    #[ignore = "a measurement, not a check: run it by name in release"]
    fn per_chunk_cost_of_the_scanner_and_of_serde_json() {
        let chunks: Vec<String> = [
            "llmbench-sim-completions.sse",
            "llmbench-sim-chat.sse",
            "llama-chat.sse",
        ]
        .iter()
        .flat_map(|name| {
            let body = RECORDED
                .iter()
                .find(|(n, _)| n == name)
                .expect("recorded")
                .1;
            payloads(name, body)
        })
        .collect();
        let rounds = 20_000;
        let time = |read: &dyn Fn(&str) -> Option<ChunkKind>| {
            let started = std::time::Instant::now();
            let mut kinds = 0_usize;
            for _ in 0..rounds {
                for chunk in &chunks {
                    kinds += usize::from(std::hint::black_box(read(chunk)).is_some());
                }
            }
            (
                started.elapsed().as_nanos() as f64 / (rounds * chunks.len()) as f64,
                kinds,
            )
        };
        let (scan_ns, scanned) = time(&|c| scan_openai_chunk(c, false).and_then(|p| p.kind));
        let (serde_ns, parsed) = time(&|c| parse_openai_chunk(c, false).ok().and_then(|p| p.kind));
        assert_eq!(scanned, parsed, "both readers found the same chunks");
        println!(
            "{} chunks: scanner {scan_ns:.0} ns/chunk, serde_json {serde_ns:.0} ns/chunk ({:.1}x)",
            chunks.len(),
            serde_ns / scan_ns
        );
    }

    #[test]
    fn escapes_are_decoded_exactly_and_surrogates_must_pair() {
        let text = |payload: &str| {
            scan_openai_chunk(payload, true).map(|c| (c.kind, c.text.unwrap_or_default()))
        };
        assert_eq!(
            text(
                r#"{"choices":[{"delta":{"content":"a\"b\\c\/d\b\f\n\r\t\u00e9\u4E2D\ud83d\ude00"}}]}"#
            ),
            Some((
                Some(ChunkKind::Content { tokens: 1 }),
                "a\"b\\c/d\u{8}\u{c}\n\r\té中😀".to_owned()
            ))
        );
        // One escape is one character: a lone `\n` token is content, not empty.
        assert_eq!(
            text(r#"{"choices":[{"text":"\n"}]}"#),
            Some((Some(ChunkKind::Content { tokens: 1 }), "\n".to_owned()))
        );
        for unpaired in [
            r#"\ud83d"#,
            r#"\ud83dx"#,
            r#"\ude00"#,
            r#"\ud83d\u0041"#,
            r#"\u12"#,
            r#"\x"#,
        ] {
            let payload = format!(r#"{{"choices":[{{"text":"{unpaired}"}}]}}"#);
            assert_eq!(scan_openai_chunk(&payload, false), None, "{unpaired}");
            assert!(
                parse_openai_chunk(&payload, false).is_err(),
                "serde_json refuses {unpaired} too"
            );
        }
    }

    #[test]
    fn what_serde_json_refuses_the_scanner_leaves_to_it() {
        for payload in [
            r#"{"choices":[{"text":"a"}],}"#,
            r#"{"choices":[{"text":"a"},]}"#,
            r#"{"choices":[{"text":"a"}]} x"#,
            r#"{"choices":null}"#,
            r#"{"choices":[null]}"#,
            r#"{"choices":[{"text":5}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":1.0}}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":-1}}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":4294967296}}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":null}}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":01}}"#,
            r#"{"choices":[],"id":01}"#,
            r#"{"choices":[],"id":1.}"#,
            r#"{"choices":[],"id":-}"#,
            r#"{"choices":[],"id":tru}"#,
            "{\"choices\":[],\"id\":\"a\tb\"}",
            r#"{"choices":[{"delta":{"content":"a","content":"b"}}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":1,"prompt_tokens":2}}"#,
            r#"["choices"]"#,
            r#"{"choices":[{"text":"a"}]"#,
        ] {
            assert_eq!(scan_openai_chunk(payload, true), None, "{payload}");
            assert!(
                parse_openai_chunk(payload, true).is_err(),
                "serde_json refuses {payload}"
            );
        }
    }

    /// A JSON string's body: plain text, multi-byte characters and every kind of escape.
    fn json_string() -> BoxedStrategy<String> {
        let piece = prop_oneof![
            4 => "[a-zA-Z0-9 .,!?']{1,6}",
            1 => Just("é".to_owned()),
            1 => Just("中文".to_owned()),
            1 => Just("😀".to_owned()),
            1 => prop::sample::select(vec![
                r#"\""#, r#"\\"#, r#"\/"#, r#"\b"#, r#"\f"#, r#"\n"#, r#"\r"#, r#"\t"#, r#"\u0000"#, r#"\u00e9"#,
                r#"\u4E2D"#, r#"\ud83d\ude00"#, r#"\uD834\uDD1E"#,
            ])
            .prop_map(str::to_owned),
        ];
        prop::collection::vec(piece, 0..4)
            .prop_map(|pieces| pieces.concat())
            .boxed()
    }

    /// JSON whitespace, usually none.
    fn ws() -> impl Strategy<Value = &'static str> {
        prop_oneof![6 => Just(""), 1 => Just(" "), 1 => Just("\n  "), 1 => Just("\t\r\n")]
    }

    /// A value the reference does not read: any JSON, nested.
    fn other_value() -> BoxedStrategy<String> {
        let leaf = prop_oneof![
            Just("null".to_owned()),
            Just("true".to_owned()),
            Just("false".to_owned()),
            Just("0".to_owned()),
            Just("-12.5e+3".to_owned()),
            Just("1732000000".to_owned()),
            json_string().prop_map(|s| format!("\"{s}\"")),
        ];
        leaf.prop_recursive(3, 12, 3, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..3)
                    .prop_map(|v| format!("[{}]", v.join(","))),
                prop::collection::vec(("[a-z_]{1,8}", inner), 0..3).prop_map(|members| {
                    let members: Vec<String> = members
                        .into_iter()
                        .map(|(k, v)| format!("\"{k}\":{v}"))
                        .collect();
                    format!("{{{}}}", members.join(","))
                }),
            ]
        })
        .boxed()
    }

    /// A string field's value: absent, `null` or a string.
    fn string_field(name: &'static str) -> BoxedStrategy<Option<String>> {
        prop_oneof![
            1 => Just(None),
            1 => Just(Some(format!("\"{name}\":null"))),
            1 => Just(Some(format!("\"{name}\":\"\""))),
            3 => json_string().prop_map(move |s| Some(format!("\"{name}\":\"{s}\""))),
        ]
        .boxed()
    }

    /// An object of `members` (absent ones left out) plus unread ones, in an order shuffled by a seed, with
    /// whitespace. (Boxed, as the others: their value trees nested inline overflow a debug test thread's stack.)
    fn object(
        members: impl Strategy<Value = Vec<Option<String>>> + 'static,
    ) -> BoxedStrategy<String> {
        let extra = prop::collection::vec(
            (
                prop::sample::select(vec!["index", "role", "logprobs", "id", "x"]),
                other_value(),
            ),
            0..3,
        );
        (members, extra, ws(), ws(), ws(), any::<u64>())
            .prop_map(|(members, extra, before, after, between, mut seed)| {
                let mut all: Vec<String> = members.into_iter().flatten().collect();
                // Unread keys may repeat (serde ignores them), but not a read key's name.
                all.extend(
                    extra
                        .into_iter()
                        .map(|(k, v)| format!("\"{k}\"{before}:{after}{v}")),
                );
                for i in (1..all.len()).rev() {
                    seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                    all.swap(i, (seed >> 33) as usize % (i + 1));
                }
                format!(
                    "{{{between}{}{between}}}",
                    all.join(&format!("{between},{between}"))
                )
            })
            .boxed()
    }

    fn message(name: &'static str) -> BoxedStrategy<Option<String>> {
        let fields = (
            string_field("content"),
            string_field("reasoning_content"),
            string_field("reasoning"),
        );
        prop_oneof![
            1 => Just(None),
            1 => Just(Some(format!("\"{name}\":null"))),
            4 => object(fields.prop_map(|(a, b, c)| vec![a, b, c]))
                .prop_map(move |o| Some(format!("\"{name}\":{o}"))),
        ]
        .boxed()
    }

    fn choice() -> BoxedStrategy<String> {
        let finish = prop_oneof![
            Just(None),
            Just(Some("\"finish_reason\":null".to_owned())),
            prop::sample::select(vec!["stop", "length", "eos_token", "abort", "\\u0073top"])
                .prop_map(|r| Some(format!("\"finish_reason\":\"{r}\""))),
        ];
        object(
            (
                string_field("text"),
                message("delta"),
                message("message"),
                finish,
            )
                .prop_map(|(t, d, m, f)| vec![t, d, m, f]),
        )
        .boxed()
    }

    fn count(name: &'static str, nullable: bool) -> impl Strategy<Value = Option<String>> {
        let value = prop_oneof![
            Just("0".to_owned()),
            (1..=u32::MAX).prop_map(|n| n.to_string()),
            Just(if nullable { "null" } else { "7" }.to_owned()),
        ];
        prop::option::of(value.prop_map(move |v| format!("\"{name}\":{v}")))
    }

    fn details(name: &'static str, count_name: &'static str) -> BoxedStrategy<Option<String>> {
        prop_oneof![
            Just(None),
            Just(Some(format!("\"{name}\":null"))),
            object(count(count_name, true).prop_map(|c| vec![c]))
                .prop_map(move |o| Some(format!("\"{name}\":{o}"))),
        ]
        .boxed()
    }

    fn usage() -> BoxedStrategy<Option<String>> {
        let fields = (
            count("prompt_tokens", false),
            count("completion_tokens", false),
            details("prompt_tokens_details", "cached_tokens"),
            details("completion_tokens_details", "reasoning_tokens"),
        );
        prop_oneof![
            1 => Just(None),
            1 => Just(Some("\"usage\":null".to_owned())),
            2 => object(fields.prop_map(|(a, b, c, d)| vec![a, b, c, d]))
                .prop_map(|o| Some(format!("\"usage\":{o}"))),
        ]
        .boxed()
    }

    /// A chunk the scanner must read itself: any order, whitespace, escapes, unread fields, no choice or one.
    fn chunk() -> BoxedStrategy<String> {
        let choices = prop_oneof![
            1 => Just(None),
            1 => Just(Some("\"choices\":[]".to_owned())),
            4 => choice().prop_map(|c| Some(format!("\"choices\":[{c}]"))),
        ];
        (
            object((choices, usage()).prop_map(|(c, u)| vec![c, u])),
            ws(),
            ws(),
        )
            .prop_map(|(o, before, after)| format!("{before}{o}{after}"))
            .boxed()
    }

    /// Reads a stream's payloads one after the other as a stream does (each through the last scanned chunk's
    /// template where it can), checking every result against the reference; returns how many were reread.
    fn read_as_a_stream(payloads: &[String], keep_text: bool) -> Result<usize, TestCaseError> {
        let mut template = ChunkTemplate::default();
        let mut reread = 0;
        for payload in payloads {
            let reference = parse_openai_chunk(payload, keep_text);
            match template.reread(payload.as_bytes(), keep_text) {
                Some(parsed) => {
                    reread += 1;
                    match reference {
                        Ok(reference) => prop_assert_eq!(&parsed, &reference, "{}", payload),
                        Err(error) => prop_assert!(
                            false,
                            "reread {parsed:?} where serde_json refused ({error}): {payload}"
                        ),
                    }
                }
                None => {
                    if let Some(parsed) =
                        scan_openai_chunk_learning(payload, keep_text, &mut template)
                    {
                        prop_assert_eq!(
                            &parsed,
                            &reference.ok().unwrap_or_default(),
                            "{}",
                            payload
                        );
                    }
                }
            }
        }
        Ok(reread)
    }

    #[test]
    fn a_recorded_streams_later_chunks_are_read_from_its_template_as_serde_json_reads_them() {
        let reread = |name: &str| {
            let body = RECORDED
                .iter()
                .find(|(n, _)| *n == name)
                .expect("recorded")
                .1;
            let payloads = payloads(name, body);
            let counts = [false, true].map(|keep_text| {
                read_as_a_stream(&payloads, keep_text).unwrap_or_else(|e| panic!("{name}: {e}"))
            });
            assert_eq!(
                counts[0], counts[1],
                "{name}: the kept text does not change what is reread"
            );
            (counts[0], payloads.len())
        };
        // (payloads reread, payloads): every token chunk after a stream's first is its bytes around another text,
        // and is reread; the first learns the template; a role-only opening (no text value), the one carrying the
        // finish reason and the usage-only one differ around the text and are scanned whole.
        // llama.cpp completions: 5 texts (4 reread), then the last with its finish reason, usage and timings.
        assert_eq!(reread("llama-completions.sse"), (4, 6));
        // llama.cpp chat: the role (content null), 6 contents (5 reread), the finish, the usage.
        assert_eq!(reread("llama-chat.sse"), (5, 9));
        // llm-d's simulator: 4 texts (3 reread), the finish, the usage; chat: the role, 5 contents (4 reread),
        // the finish, the usage.
        assert_eq!(reread("llmd-sim-completions.sse"), (3, 6));
        assert_eq!(reread("llmd-sim-chat.sse"), (4, 8));
        // Each logprobs chunk carries the token again in its logprobs, after the text: never reread.
        assert_eq!(reread("llama-completions-logprobs.sse"), (0, 4));
        assert_eq!(reread("llama-chat-logprobs.sse"), (0, 5));
        // One-token streams and whole answers have no second token chunk.
        for name in [
            "llmbench-sim-completions.sse",
            "llmbench-sim-chat.sse",
            "handwritten.sse",
        ] {
            assert_eq!(reread(name).0, 0, "{name}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]

        #[test]
        fn a_chunk_with_another_text_is_reread_from_its_template_as_serde_json_reads_it(
            payload in chunk(),
            text in json_string(),
            keep_text in any::<bool>(),
        ) {
            let mut template = ChunkTemplate::default();
            let scanned = scan_openai_chunk_learning(&payload, keep_text, &mut template);
            prop_assert!(scanned.is_some(), "generated chunks are scanned");
            if !template.event.is_empty() {
                let next = format!(
                    "{}\"{text}\"{}",
                    &payload[..template.value.start],
                    &payload[template.value.end..]
                );
                prop_assert!(template.reread(next.as_bytes(), keep_text).is_some(), "not reread: {}", next);
                prop_assert_eq!(read_as_a_stream(&[payload, next], keep_text)?, 1);
            }
        }

        #[test]
        fn a_damaged_next_chunk_is_refused_or_reread_as_serde_json_reads_it(
            payload in chunk(),
            text in json_string(),
            cut in any::<prop::sample::Index>(),
            byte in prop::sample::select(b"\"\\{}[],: 0u\x01\xc3".to_vec()),
            replace in any::<bool>(),
            keep_text in any::<bool>(),
        ) {
            let mut template = ChunkTemplate::default();
            scan_openai_chunk_learning(&payload, keep_text, &mut template);
            let (start, end) = if template.event.is_empty() {
                (0, 0)
            } else {
                (template.value.start, template.value.end)
            };
            let mut bytes = format!("{}\"{text}\"{}", &payload[..start], &payload[end..]).into_bytes();
            let at = cut.index(bytes.len() + 1);
            if replace && at < bytes.len() {
                bytes[at] = byte;
            } else {
                bytes.insert(at, byte);
            }
            let damaged = String::from_utf8_lossy(&bytes).into_owned();
            read_as_a_stream(&[payload, damaged], keep_text)?;
        }

        #[test]
        fn generated_chunks_are_scanned_and_read_as_serde_json_reads_them(
            payload in chunk(),
            keep_text in any::<bool>(),
        ) {
            prop_assert!(agrees(&payload, keep_text)?, "the scanner fell back on {}", payload);
        }

        #[test]
        fn damaged_chunks_are_refused_or_read_as_serde_json_reads_them(
            payload in chunk(),
            cut in any::<prop::sample::Index>(),
            byte in prop::sample::select(b"\"\\{}[],: 0u\x01\xc3".to_vec()),
            replace in any::<bool>(),
            keep_text in any::<bool>(),
        ) {
            // One byte changed or inserted anywhere; lossy, so the event stays the `str` parse_chunk hands on.
            let mut bytes = payload.into_bytes();
            let at = cut.index(bytes.len() + 1);
            if replace && at < bytes.len() {
                bytes[at] = byte;
            } else {
                bytes.insert(at, byte);
            }
            let damaged = String::from_utf8_lossy(&bytes);
            agrees(&damaged, keep_text)?;
        }
    }
}
