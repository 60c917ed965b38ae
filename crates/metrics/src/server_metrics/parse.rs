//! A streaming, bounded parser of the Prometheus text exposition format (0.0.4), which also reads the OpenMetrics
//! text that `prometheus-client` (our own simulator) writes.
//!
//! Why our own parser and not a crate: `prometheus-parse` (Apache-2.0) and `openmetrics-parser` (LGPL-3.0, a pest
//! grammar) both parse a whole document into memory — every sample, every label map — before the caller sees any of
//! it, and neither can stop at a series cap, so a 10 MB page or a million series would be held in full; the latter also
//! rejects a whole page for one bad line, and its licence does not fit the project's. A scraper needs the opposite:
//! bytes fed as they arrive, at most `max_series` samples ever allocated, extra lines counted without being parsed,
//! and a malformed line skipped rather than fatal. The format is line-oriented and small; this file is that parser.
//!
//! What it accepts: `# TYPE` (counter, gauge, histogram, summary, untyped; OpenMetrics' `unknown`, `info`,
//! `stateset` and `gaugehistogram` map to the nearest of those), `# HELP`/`# UNIT`/other comments (ignored), `# EOF`
//! (ends the page), samples `name{label="value",…} value [timestamp] [# exemplar]` with the escapes `\\`, `\"`,
//! `\n` in label values, values `NaN`, `+Inf`, `-Inf` and anything Rust's float parser reads, optional timestamps and
//! exemplars (ignored), and the UTF-8 quoted-name form `{"my.metric", label="v"} 1` of Prometheus 3.
//! `_created` samples of counters, histograms and summaries are dropped: they are timestamps, not measurements.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::de::{self, MapAccess, Visitor};
use serde::ser::{SerializeMap, SerializeStruct};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The most bytes of one page the scraper reads; the rest of a larger page is not fetched.
pub(crate) const MAX_PAGE_BYTES: usize = 4 * 1024 * 1024;
/// The most series (sample lines) one scrape of one target keeps; the rest are counted as dropped.
pub(crate) const MAX_SERIES: usize = 20_000;

/// A metric family's declared type (`# TYPE`). Families without a TYPE line are `untyped`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MetricKind {
    Counter,
    Gauge,
    Histogram,
    Summary,
    /// Also what an unknown type name read back from a file becomes.
    #[serde(other)]
    Untyped,
}

impl MetricKind {
    /// The kind a `# TYPE` word declares; OpenMetrics-only kinds map to the nearest 0.0.4 kind.
    fn from_type_word(word: &str) -> Self {
        match word {
            "counter" => Self::Counter,
            "gauge" | "info" | "stateset" => Self::Gauge,
            "histogram" => Self::Histogram,
            "summary" => Self::Summary,
            // `gaugehistogram` has `_gcount`/`_gsum`, not counters: its samples are read as plain values.
            _ => Self::Untyped,
        }
    }
}

/// Label pairs of one sample, sorted by name (so equal label sets compare equal whatever order the page used), each
/// name at most once. Written to JSON as an object.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Labels(pub Vec<(String, String)>);

impl Labels {
    /// Sorts by name and keeps the first of duplicate names.
    pub fn new(mut pairs: Vec<(String, String)>) -> Self {
        pairs.sort_by(|a, b| a.0.cmp(&b.0));
        pairs.dedup_by(|later, earlier| later.0 == earlier.0);
        Self(pairs)
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .binary_search_by(|(n, _)| n.as_str().cmp(name))
            .ok()
            .map(|i| self.0[i].1.as_str())
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `{a="x",b="y"}` (empty when there are none), leaving out `skip`: a stable identity for a series.
    pub(crate) fn render_without(&self, skip: &str) -> String {
        let mut out = String::new();
        for (name, value) in self.0.iter().filter(|(name, _)| name != skip) {
            out.push(if out.is_empty() { '{' } else { ',' });
            out.push_str(name);
            out.push_str("=\"");
            for c in value.chars() {
                match c {
                    '\\' => out.push_str("\\\\"),
                    '"' => out.push_str("\\\""),
                    '\n' => out.push_str("\\n"),
                    c => out.push(c),
                }
            }
            out.push('"');
        }
        if !out.is_empty() {
            out.push('}');
        }
        out
    }
}

impl Serialize for Labels {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (name, value) in &self.0 {
            map.serialize_entry(name, value)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Labels {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct LabelsVisitor;
        impl<'de> Visitor<'de> for LabelsVisitor {
            type Value = Labels;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object of label names to string values")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Labels, A::Error> {
                let mut pairs = Vec::with_capacity(map.size_hint().unwrap_or(0));
                while let Some((name, value)) = map.next_entry::<String, String>()? {
                    pairs.push((name, value));
                }
                Ok(Labels::new(pairs))
            }
        }
        deserializer.deserialize_map(LabelsVisitor)
    }
}

/// One sample line: `{"n": name, "l": {labels}, "v": value}` in `server_metrics.jsonl`, non-finite values as the
/// strings `"NaN"`, `"+Inf"`, `"-Inf"` (JSON has no such numbers).
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: Labels,
    pub value: f64,
}

/// A sample value as JSON allows it.
struct JsonValue(f64);

impl Serialize for JsonValue {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let v = self.0;
        if v.is_nan() {
            serializer.serialize_str("NaN")
        } else if v == f64::INFINITY {
            serializer.serialize_str("+Inf")
        } else if v == f64::NEG_INFINITY {
            serializer.serialize_str("-Inf")
        } else {
            serializer.serialize_f64(v)
        }
    }
}

impl<'de> Deserialize<'de> for JsonValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ValueVisitor;
        impl Visitor<'_> for ValueVisitor {
            type Value = JsonValue;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a number or one of \"NaN\", \"+Inf\", \"-Inf\"")
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<JsonValue, E> {
                Ok(JsonValue(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<JsonValue, E> {
                Ok(JsonValue(v as f64))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<JsonValue, E> {
                Ok(JsonValue(v as f64))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<JsonValue, E> {
                parse_value(v)
                    .map(JsonValue)
                    .ok_or_else(|| E::invalid_value(de::Unexpected::Str(v), &self))
            }
        }
        deserializer.deserialize_any(ValueVisitor)
    }
}

impl Serialize for Sample {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("Sample", 3)?;
        s.serialize_field("n", &self.name)?;
        s.serialize_field("l", &self.labels)?;
        s.serialize_field("v", &JsonValue(self.value))?;
        s.end()
    }
}

impl<'de> Deserialize<'de> for Sample {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Raw {
            n: String,
            #[serde(default)]
            l: Labels,
            v: JsonValue,
        }
        let raw = Raw::deserialize(deserializer)?;
        Ok(Sample {
            name: raw.n,
            labels: raw.l,
            value: raw.v.0,
        })
    }
}

/// What one sample is to its family: the family's own value, or a part of a histogram or summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A gauge, counter, untyped value, or a summary's quantile.
    Value,
    /// A histogram's cumulative `_bucket{le=…}`.
    Bucket,
    /// A histogram's or summary's `_sum`.
    Sum,
    /// A histogram's or summary's `_count`.
    Count,
    /// A counter's, histogram's or summary's `_created` timestamp.
    Created,
}

/// The family a sample name belongs to under `types`, its kind, and the sample's role in it. A counter declared the
/// OpenMetrics way (`# TYPE x counter`, sample `x_total`) and the 0.0.4 way (`# TYPE x_total counter`) both resolve.
pub fn resolve<'a>(
    name: &'a str,
    types: &BTreeMap<String, MetricKind>,
) -> (&'a str, MetricKind, Role) {
    if let Some(&kind) = types.get(name) {
        return (name, kind, Role::Value);
    }
    const SUFFIXES: [(&str, Role); 6] = [
        ("_bucket", Role::Bucket),
        ("_sum", Role::Sum),
        ("_count", Role::Count),
        ("_total", Role::Value),
        ("_created", Role::Created),
        ("_info", Role::Value),
    ];
    for (suffix, role) in SUFFIXES {
        let Some(family) = name.strip_suffix(suffix) else {
            continue;
        };
        let Some(&kind) = types.get(family) else {
            continue;
        };
        let fits = match role {
            Role::Bucket => kind == MetricKind::Histogram,
            Role::Sum | Role::Count => {
                matches!(kind, MetricKind::Histogram | MetricKind::Summary)
            }
            Role::Value if suffix == "_total" => kind == MetricKind::Counter,
            Role::Value => kind == MetricKind::Gauge,
            Role::Created => matches!(
                kind,
                MetricKind::Counter | MetricKind::Histogram | MetricKind::Summary
            ),
        };
        if fits {
            return (family, kind, role);
        }
    }
    (name, MetricKind::Untyped, Role::Value)
}

/// One page as parsed: the families declared (only those with kept samples), the kept samples in page order, and
/// what was wrong with it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Page {
    pub types: BTreeMap<String, MetricKind>,
    pub samples: Vec<Sample>,
    /// Sample lines beyond the series cap, counted but not parsed.
    pub dropped_series: u64,
    /// Lines that were neither comments nor valid samples.
    pub malformed_lines: u64,
    /// The first malformed line's number and why, for the warning.
    pub first_malformed: Option<String>,
    /// The body is not Prometheus text (HTML, JSON, …): no samples were kept.
    pub not_prometheus: bool,
}

impl Page {
    /// A warning about malformed lines or a non-Prometheus body, if there is one to give.
    pub fn warning(&self) -> Option<String> {
        if self.not_prometheus {
            return Some(match &self.first_malformed {
                Some(first) => format!("not Prometheus text ({first})"),
                None => "not Prometheus text".to_owned(),
            });
        }
        (self.malformed_lines > 0).then(|| {
            format!(
                "{} malformed line(s) skipped, first: {}",
                self.malformed_lines,
                self.first_malformed.as_deref().unwrap_or("?")
            )
        })
    }
}

/// Where the parser is in the page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Nothing but blank lines yet.
    Start,
    Body,
    /// `# EOF` seen, or the body was rejected: later bytes are ignored.
    Done,
}

/// Feeds a page in chunks as they arrive; at most `max_series` samples are ever held.
#[derive(Debug)]
pub(crate) struct PageParser {
    max_series: usize,
    /// The unfinished last line of the chunks fed so far.
    partial: Vec<u8>,
    page: Page,
    state: State,
    line: u64,
    valid_lines: u64,
}

impl PageParser {
    pub fn new(max_series: usize) -> Self {
        Self {
            max_series,
            partial: Vec::new(),
            page: Page::default(),
            state: State::Start,
            line: 0,
            valid_lines: 0,
        }
    }

    /// Parses every complete line of `chunk` (plus the unfinished line carried from the previous chunk).
    pub fn feed(&mut self, mut chunk: &[u8]) {
        while self.state != State::Done {
            let Some(end) = memchr::memchr(b'\n', chunk) else {
                self.partial.extend_from_slice(chunk);
                return;
            };
            if self.partial.is_empty() {
                self.line_bytes(&chunk[..end]);
            } else {
                let mut line = std::mem::take(&mut self.partial);
                line.extend_from_slice(&chunk[..end]);
                self.line_bytes(&line);
                line.clear();
                // Keeps the allocation for the next line that spans chunks.
                self.partial = line;
            }
            chunk = &chunk[end + 1..];
        }
    }

    /// Ends the page. A page `truncated` by the byte cap loses its unfinished last line (it is cut, not short);
    /// otherwise a last line without a newline is parsed.
    pub fn finish(mut self, truncated: bool) -> Page {
        if !truncated && !self.partial.is_empty() && self.state != State::Done {
            let line = std::mem::take(&mut self.partial);
            self.line_bytes(&line);
        }
        if self.valid_lines == 0 && self.page.malformed_lines > 0 {
            self.reject();
        }
        // Only families that kept a sample are worth writing down.
        let used: BTreeSet<&str> = self
            .page
            .samples
            .iter()
            .map(|s| resolve(&s.name, &self.page.types).0)
            .collect();
        let types = std::mem::take(&mut self.page.types);
        self.page.types = types
            .into_iter()
            .filter(|(family, _)| used.contains(family.as_str()))
            .collect();
        self.page
    }

    fn reject(&mut self) {
        self.page.not_prometheus = true;
        self.page.samples = Vec::new();
        self.page.types.clear();
        self.page.dropped_series = 0;
        self.state = State::Done;
    }

    fn malformed(&mut self, why: &str) {
        self.page.malformed_lines += 1;
        if self.page.first_malformed.is_none() {
            self.page.first_malformed = Some(format!("line {}: {why}", self.line));
        }
    }

    fn line_bytes(&mut self, bytes: &[u8]) {
        self.line += 1;
        let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
        let Ok(text) = std::str::from_utf8(bytes) else {
            if self.state == State::Start {
                self.reject();
                self.page.first_malformed = Some(format!("line {}: not UTF-8", self.line));
            } else {
                self.malformed("not UTF-8");
            }
            return;
        };
        let text = text.trim_start_matches([' ', '\t']);
        if text.trim_end().is_empty() {
            return;
        }
        if self.state == State::Start {
            self.state = State::Body;
            // A markup page (an HTML error page, an XML document) never starts like exposition text.
            if text.starts_with('<') {
                self.page.first_malformed = Some("the body is markup".to_owned());
                self.reject();
                return;
            }
        }
        if let Some(comment) = text.strip_prefix('#') {
            self.comment(comment);
            return;
        }
        if self.page.samples.len() >= self.max_series {
            // Counted, never parsed nor allocated: a page of a million series costs a scan, not a million samples.
            self.page.dropped_series += 1;
            return;
        }
        match parse_sample(text) {
            Ok(sample) => {
                self.valid_lines += 1;
                let role = resolve(&sample.name, &self.page.types).2;
                if role != Role::Created {
                    self.page.samples.push(sample);
                }
            }
            Err(why) => self.malformed(why),
        }
    }

    fn comment(&mut self, comment: &str) {
        let mut words = comment.trim().splitn(3, [' ', '\t']);
        match words.next() {
            Some("TYPE") => {
                let (Some(name), Some(kind)) = (words.next(), words.next()) else {
                    self.malformed("TYPE without a name and a type");
                    return;
                };
                let name = name.trim_matches('"');
                self.valid_lines += 1;
                // The first declaration of a family wins, as in Prometheus.
                self.page
                    .types
                    .entry(name.to_owned())
                    .or_insert_with(|| MetricKind::from_type_word(kind.trim()));
            }
            Some("EOF") => self.state = State::Done,
            Some("HELP" | "UNIT") => self.valid_lines += 1,
            _ => {}
        }
    }
}

/// Parses a whole page held in memory (tests, `probe`).
pub fn parse_page(text: &str, max_series: usize) -> Page {
    let mut parser = PageParser::new(max_series);
    parser.feed(text.as_bytes());
    parser.finish(false)
}

/// A sample value: `NaN`, `+Inf`, `-Inf`, `Inf` and decimal or exponent notation.
pub(crate) fn parse_value(text: &str) -> Option<f64> {
    match text {
        "+Inf" | "Inf" | "+inf" | "inf" => Some(f64::INFINITY),
        "-Inf" | "-inf" => Some(f64::NEG_INFINITY),
        "NaN" | "nan" => Some(f64::NAN),
        _ => text.parse::<f64>().ok(),
    }
}

fn is_name_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_' || c == b':'
}

fn is_name_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b':'
}

/// A cursor over one sample line.
struct Cursor<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.pos).copied()
    }

    fn skip_blanks(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.pos += 1;
        }
    }

    fn name(&mut self) -> Option<&'a str> {
        let start = self.pos;
        if !self.peek().is_some_and(is_name_start) {
            return None;
        }
        while self.peek().is_some_and(is_name_char) {
            self.pos += 1;
        }
        Some(&self.text[start..self.pos])
    }

    /// A double-quoted string with the exposition escapes; the cursor is on the opening quote.
    fn quoted(&mut self) -> Result<String, &'static str> {
        self.pos += 1;
        let mut out = String::new();
        let mut run = self.pos;
        loop {
            let rest = &self.text.as_bytes()[self.pos..];
            let Some(i) = memchr::memchr2(b'"', b'\\', rest) else {
                return Err("unterminated quoted string");
            };
            self.pos += i;
            out.push_str(&self.text[run..self.pos]);
            if rest[i] == b'"' {
                self.pos += 1;
                return Ok(out);
            }
            match self.text.as_bytes().get(self.pos + 1) {
                Some(b'\\') => out.push('\\'),
                Some(b'"') => out.push('"'),
                Some(b'n') => out.push('\n'),
                // Not one of the three escapes: kept as written rather than rejecting the line.
                Some(_) => {
                    let next = self.text[self.pos + 1..].chars().next().unwrap_or('\\');
                    out.push('\\');
                    out.push(next);
                    self.pos += next.len_utf8() - 1;
                }
                None => return Err("unterminated quoted string"),
            }
            self.pos += 2;
            run = self.pos;
        }
    }
}

/// Parses `name{labels} value [timestamp] [# exemplar]`.
fn parse_sample(text: &str) -> Result<Sample, &'static str> {
    let mut cur = Cursor { text, pos: 0 };
    let mut name = cur.name().map(str::to_owned);
    let after_name = cur.pos;
    cur.skip_blanks();
    let mut separated = cur.pos > after_name;
    let mut pairs = Vec::new();
    if cur.peek() == Some(b'{') {
        cur.pos += 1;
        loop {
            cur.skip_blanks();
            match cur.peek() {
                Some(b'}') => {
                    cur.pos += 1;
                    break;
                }
                None => return Err("unterminated label set"),
                _ => {}
            }
            let (label, quoted) = if cur.peek() == Some(b'"') {
                (cur.quoted()?, true)
            } else {
                (cur.name().ok_or("invalid label name")?.to_owned(), false)
            };
            cur.skip_blanks();
            if quoted && name.is_none() && matches!(cur.peek(), Some(b',' | b'}')) {
                // Prometheus 3's UTF-8 form: the metric name is the first, bare string in the braces.
                name = Some(label);
            } else {
                if cur.peek() != Some(b'=') {
                    return Err("expected '=' after a label name");
                }
                cur.pos += 1;
                cur.skip_blanks();
                if cur.peek() != Some(b'"') {
                    return Err("expected a quoted label value");
                }
                let value = cur.quoted()?;
                pairs.push((label, value));
            }
            cur.skip_blanks();
            match cur.peek() {
                Some(b',') => cur.pos += 1,
                Some(b'}') => {}
                _ => return Err("expected ',' or '}' in a label set"),
            }
        }
        // The closing brace separates the value well enough (`x{a="b"}1` is read).
        cur.skip_blanks();
        separated = true;
    }
    let name = name.ok_or("no metric name")?;
    if cur.peek().is_none() {
        return Err("no value");
    }
    if !separated {
        return Err("expected whitespace before the value");
    }
    let rest = &text[cur.pos..];
    let value_text = rest.split([' ', '\t']).next().unwrap_or("");
    if value_text.is_empty() {
        return Err("no value");
    }
    let value = parse_value(value_text).ok_or("invalid value")?;
    // A timestamp and an exemplar may follow; neither is used.
    Ok(Sample {
        name,
        labels: Labels::new(pairs),
        value,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        Labels::new(
            pairs
                .iter()
                .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
                .collect(),
        )
    }

    const VLLM_PAGE: &str = "\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 3.0
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine=\"0\",model_name=\"m\"} 1234.0
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{le=\"0.1\",model_name=\"m\"} 2.0
vllm:time_to_first_token_seconds_bucket{le=\"0.5\",model_name=\"m\"} 6.0
vllm:time_to_first_token_seconds_bucket{le=\"+Inf\",model_name=\"m\"} 10.0
vllm:time_to_first_token_seconds_sum{model_name=\"m\"} 3.5
vllm:time_to_first_token_seconds_count{model_name=\"m\"} 10.0
vllm:time_to_first_token_seconds_created{model_name=\"m\"} 1.7e9
";

    #[test]
    fn vllm_page_parses_into_typed_families_with_histogram_parts_grouped() {
        let page = parse_page(VLLM_PAGE, MAX_SERIES);
        assert_eq!(page.warning(), None);
        assert_eq!(
            page.types,
            BTreeMap::from([
                ("vllm:num_requests_running".to_owned(), MetricKind::Gauge),
                ("vllm:prompt_tokens_total".to_owned(), MetricKind::Counter),
                (
                    "vllm:time_to_first_token_seconds".to_owned(),
                    MetricKind::Histogram
                ),
            ])
        );
        // The `_created` sample is dropped; the other 7 are kept in page order.
        assert_eq!(page.samples.len(), 7);
        assert_eq!(
            page.samples[0],
            Sample {
                name: "vllm:num_requests_running".to_owned(),
                labels: labels(&[("engine", "0"), ("model_name", "m")]),
                value: 3.0
            }
        );
        let bucket = &page.samples[2];
        assert_eq!(bucket.labels.get("le"), Some("0.1"));
        assert_eq!(
            resolve(&bucket.name, &page.types),
            (
                "vllm:time_to_first_token_seconds",
                MetricKind::Histogram,
                Role::Bucket
            )
        );
        assert_eq!(
            resolve("vllm:time_to_first_token_seconds_sum", &page.types).2,
            Role::Sum
        );
        assert_eq!(
            resolve("vllm:time_to_first_token_seconds_count", &page.types).2,
            Role::Count
        );
        assert_eq!(page.samples[4].value, 10.0);
    }

    #[test]
    fn openmetrics_counters_resolve_to_their_family_and_eof_ends_the_page() {
        let page = parse_page(
            "# TYPE vllm:prompt_tokens counter\n\
             # HELP vllm:prompt_tokens Number of prefill tokens processed.\n\
             vllm:prompt_tokens_total{model_name=\"m\",engine=\"0\"} 3\n\
             vllm:prompt_tokens_created{model_name=\"m\",engine=\"0\"} 1700000000.5\n\
             # TYPE x info\n\
             x_info{version=\"1\"} 1\n\
             # EOF\n\
             after_eof 1\n",
            MAX_SERIES,
        );
        assert_eq!(page.warning(), None);
        let names: Vec<&str> = page.samples.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["vllm:prompt_tokens_total", "x_info"]);
        assert_eq!(
            resolve("vllm:prompt_tokens_total", &page.types),
            ("vllm:prompt_tokens", MetricKind::Counter, Role::Value)
        );
        assert_eq!(page.types.get("x"), Some(&MetricKind::Gauge));
    }

    #[test]
    fn label_escapes_odd_spacing_and_trailing_commas_are_read() {
        let page = parse_page(
            "m{path=\"C:\\\\dir\",quote=\"say \\\"hi\\\"\",nl=\"a\\nb\",odd=\"\\t\",} 1 1700000000000\n\
             \tspaced { a = \"1\" }   2\n\
             bare 3 # {trace_id=\"x\"} 1.0\n",
            MAX_SERIES,
        );
        assert_eq!(page.warning(), None, "{page:?}");
        assert_eq!(page.samples.len(), 3);
        let l = &page.samples[0].labels;
        assert_eq!(l.get("path"), Some("C:\\dir"));
        assert_eq!(l.get("quote"), Some("say \"hi\""));
        assert_eq!(l.get("nl"), Some("a\nb"));
        assert_eq!(l.get("odd"), Some("\\t"));
        assert_eq!(page.samples[1].labels, labels(&[("a", "1")]));
        assert_eq!(page.samples[1].value, 2.0);
        assert_eq!(page.samples[2].value, 3.0);
        // Rendering escapes again, so the identity of a series with odd values is unambiguous.
        assert_eq!(
            labels(&[("b", "x\"y"), ("le", "1")]).render_without("le"),
            "{b=\"x\\\"y\"}"
        );
    }

    #[test]
    fn non_finite_values_parse() {
        let page = parse_page("a NaN\nb +Inf\nc -Inf\nd 1.5e-3\ne Inf\n", MAX_SERIES);
        let values: Vec<f64> = page.samples.iter().map(|s| s.value).collect();
        assert!(values[0].is_nan());
        assert_eq!(
            values[1..],
            [f64::INFINITY, f64::NEG_INFINITY, 0.0015, f64::INFINITY]
        );
    }

    #[test]
    fn utf8_quoted_metric_names_are_read() {
        let page = parse_page(
            "# TYPE \"my.metric\" gauge\n{\"my.metric\", \"some.label\"=\"v\"} 7\n",
            MAX_SERIES,
        );
        assert_eq!(page.samples[0].name, "my.metric");
        assert_eq!(page.samples[0].labels.get("some.label"), Some("v"));
        assert_eq!(page.types.get("my.metric"), Some(&MetricKind::Gauge));
    }

    #[test]
    fn malformed_lines_are_skipped_and_counted() {
        let page = parse_page(
            "good 1\nbad{ 2\nno_value\nalso_good{a=\"b\"} 3\n",
            MAX_SERIES,
        );
        assert_eq!(page.samples.len(), 2);
        assert_eq!(page.malformed_lines, 2);
        assert!(!page.not_prometheus);
        assert_eq!(
            page.warning().as_deref(),
            Some("2 malformed line(s) skipped, first: line 2: invalid label name")
        );
    }

    #[test]
    fn html_and_json_bodies_are_not_prometheus_text() {
        let html = parse_page(
            "<!DOCTYPE html>\n<html><body>metric 1</body></html>\n",
            MAX_SERIES,
        );
        assert!(html.not_prometheus);
        assert!(html.samples.is_empty());
        assert_eq!(
            html.warning().as_deref(),
            Some("not Prometheus text (the body is markup)")
        );
        let json = parse_page("{\"status\": \"ok\", \"items\": [1, 2]}\n", MAX_SERIES);
        assert!(json.not_prometheus, "{json:?}");
        assert!(json.samples.is_empty());
        assert!(
            json.warning()
                .is_some_and(|w| w.starts_with("not Prometheus text"))
        );
        let pretty = parse_page("{\n  \"a\": 1\n}\n", MAX_SERIES);
        assert!(pretty.not_prometheus);
        let binary = parse_page("\u{0}\u{1}\u{2}", MAX_SERIES);
        assert!(binary.not_prometheus || binary.samples.is_empty());
    }

    #[test]
    fn lines_split_across_chunks_parse_as_if_whole() {
        let mut parser = PageParser::new(MAX_SERIES);
        for chunk in VLLM_PAGE.as_bytes().chunks(7) {
            parser.feed(chunk);
        }
        assert_eq!(parser.finish(false), parse_page(VLLM_PAGE, MAX_SERIES));
    }

    #[test]
    fn a_truncated_page_loses_only_its_cut_last_line() {
        let mut parser = PageParser::new(MAX_SERIES);
        parser.feed(b"a 1\nb 2\nc 3");
        let page = parser.finish(true);
        assert_eq!(page.samples.len(), 2);
        let mut parser = PageParser::new(MAX_SERIES);
        parser.feed(b"a 1\nb 2\nc 3");
        assert_eq!(parser.finish(false).samples.len(), 3);
    }

    #[test]
    fn a_million_series_keep_the_cap_and_count_the_rest() {
        let cap = 20_000;
        let mut parser = PageParser::new(cap);
        let mut chunk = String::new();
        for i in 0..1_000_000u32 {
            chunk.push_str("series_total{id=\"");
            chunk.push_str(&i.to_string());
            chunk.push_str("\"} 1\n");
            if chunk.len() > 64 * 1024 {
                parser.feed(chunk.as_bytes());
                chunk.clear();
            }
        }
        parser.feed(chunk.as_bytes());
        let page = parser.finish(false);
        assert_eq!(page.samples.len(), cap);
        assert_eq!(page.dropped_series, 1_000_000 - cap as u64);
        // Only the kept ones were allocated.
        assert!(page.samples.capacity() < 2 * cap);
    }

    #[test]
    fn sample_json_writes_non_finite_values_as_strings_and_reads_them_back() {
        let samples = vec![
            Sample {
                name: "a".to_owned(),
                labels: labels(&[("le", "+Inf")]),
                value: f64::INFINITY,
            },
            Sample {
                name: "b".to_owned(),
                labels: Labels::default(),
                value: 2.5,
            },
            Sample {
                name: "c".to_owned(),
                labels: Labels::default(),
                value: f64::NEG_INFINITY,
            },
        ];
        let text = serde_json::to_string(&samples).unwrap();
        assert_eq!(
            text,
            r#"[{"n":"a","l":{"le":"+Inf"},"v":"+Inf"},{"n":"b","l":{},"v":2.5},{"n":"c","l":{},"v":"-Inf"}]"#
        );
        let back: Vec<Sample> = serde_json::from_str(&text).unwrap();
        assert_eq!(back, samples);
        let nan: Sample = serde_json::from_str(r#"{"n":"x","v":"NaN"}"#).unwrap();
        assert!(nan.value.is_nan());
        let int: Sample = serde_json::from_str(r#"{"n":"x","l":{"b":"2","a":"1"},"v":0}"#).unwrap();
        assert_eq!(int.value, 0.0);
        assert_eq!(int.labels, labels(&[("a", "1"), ("b", "2")]));
    }
}
