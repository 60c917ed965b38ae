//! `server_metrics.jsonl`: one line per target per scrape, written as the run goes and read back as a stream.
//!
//! The line format is a contract other tools read:
//! `{"t_s": 1.234567, "target": "http://h:p/metrics", "ok": true, "scrape_ms": 2.1, "types": {family: kind},
//! "samples": [{"n": name, "l": {labels}, "v": value}], "truncated": {"bytes": N, "dropped_series": M}}`
//! (`truncated` only when the page was cut), or `{"t_s": …, "target": …, "ok": false, "error": "…"}` for a failed
//! scrape. Non-finite values are the strings `"NaN"`, `"+Inf"`, `"-Inf"`. `t_s` is seconds since the run's t0 on the
//! monotonic clock, taken when the response arrived; it is negative for a scrape just before t0.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read as _};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::ServerMetricsError;
use super::parse::{MetricKind, Sample};

/// The longest line the reader accepts. A page is capped at 4 MiB and 20,000 series, so a line written by the
/// scraper stays well below this; a longer one is damage, skipped as an error.
pub(crate) const MAX_LINE_BYTES: u64 = 64 * 1024 * 1024;

/// How a page was cut short.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Truncated {
    /// Bytes read before the byte cap stopped the read (0 when only the series cap struck).
    pub bytes: u64,
    /// Sample lines beyond the series cap.
    pub dropped_series: u64,
}

/// One line of `server_metrics.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Scrape {
    pub t_s: f64,
    pub target: String,
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scrape_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default)]
    pub types: BTreeMap<String, MetricKind>,
    #[serde(default)]
    pub samples: Vec<Sample>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncated: Option<Truncated>,
}

/// A line as the scraper writes it, borrowing the page instead of copying it. The field order is the contract's.
#[derive(Serialize)]
pub(crate) struct ScrapeLine<'a> {
    pub t_s: f64,
    pub target: &'a str,
    pub ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scrape_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub types: Option<&'a BTreeMap<String, MetricKind>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub samples: Option<&'a [Sample]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub truncated: Option<Truncated>,
}

/// Rounds to `decimals` places so lines stay short (microseconds for times).
pub(crate) fn round_to(value: f64, decimals: i32) -> f64 {
    let scale = 10f64.powi(decimals);
    (value * scale).round() / scale
}

/// Streams the scrapes of a `server_metrics.jsonl`, one line in memory at a time. A torn last line (a run killed
/// mid-write) ends the stream quietly; a damaged line elsewhere is an `Err` item and the stream goes on.
pub fn read_jsonl(path: &Path) -> Result<ScrapeReader, ServerMetricsError> {
    let file = File::open(path).map_err(|source| ServerMetricsError::OpenFile {
        path: path.to_owned(),
        source,
    })?;
    Ok(ScrapeReader {
        path: path.to_owned(),
        reader: BufReader::with_capacity(256 * 1024, file),
        line: 0,
        buf: Vec::new(),
        done: false,
    })
}

/// The iterator [`read_jsonl`] returns.
#[derive(Debug)]
pub struct ScrapeReader {
    path: PathBuf,
    reader: BufReader<File>,
    line: u64,
    buf: Vec<u8>,
    done: bool,
}

impl ScrapeReader {
    /// Skips to the end of an over-long line.
    fn skip_rest_of_line(&mut self) -> std::io::Result<()> {
        loop {
            let available = self.reader.fill_buf()?;
            if available.is_empty() {
                return Ok(());
            }
            if let Some(i) = memchr::memchr(b'\n', available) {
                self.reader.consume(i + 1);
                return Ok(());
            }
            let n = available.len();
            self.reader.consume(n);
        }
    }
}

impl Iterator for ScrapeReader {
    type Item = Result<Scrape, ServerMetricsError>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.done {
            self.buf.clear();
            self.line += 1;
            let line = self.line;
            let read = (&mut self.reader)
                .take(MAX_LINE_BYTES)
                .read_until(b'\n', &mut self.buf);
            match read {
                Err(source) => {
                    self.done = true;
                    return Some(Err(ServerMetricsError::ReadLine {
                        path: self.path.clone(),
                        line,
                        source,
                    }));
                }
                Ok(0) => self.done = true,
                Ok(_) => {
                    let complete = self.buf.last() == Some(&b'\n');
                    if !complete && self.buf.len() as u64 >= MAX_LINE_BYTES {
                        if let Err(source) = self.skip_rest_of_line() {
                            self.done = true;
                            return Some(Err(ServerMetricsError::ReadLine {
                                path: self.path.clone(),
                                line,
                                source,
                            }));
                        }
                        return Some(Err(ServerMetricsError::LineTooLong {
                            path: self.path.clone(),
                            line,
                            cap: MAX_LINE_BYTES,
                        }));
                    }
                    if self.buf.iter().all(u8::is_ascii_whitespace) {
                        continue;
                    }
                    match serde_json::from_slice::<Scrape>(&self.buf) {
                        Ok(scrape) => return Some(Ok(scrape)),
                        // No newline means this is the file's last line: a write cut short by a kill, not damage.
                        Err(_) if !complete => {
                            tracing::warn!(
                                path = %self.path.display(),
                                line,
                                "ignoring the torn last line of the server metrics file"
                            );
                            self.done = true;
                        }
                        Err(source) => {
                            return Some(Err(ServerMetricsError::ParseLine {
                                path: self.path.clone(),
                                line,
                                source,
                            }));
                        }
                    }
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server_metrics::parse::Labels;

    fn ok_line() -> Scrape {
        Scrape {
            t_s: -0.012,
            target: "http://h:1/metrics".to_owned(),
            ok: true,
            scrape_ms: Some(2.1),
            error: None,
            types: BTreeMap::from([("g".to_owned(), MetricKind::Gauge)]),
            samples: vec![Sample {
                name: "g".to_owned(),
                labels: Labels::new(vec![("model_name".to_owned(), "m".to_owned())]),
                value: f64::NAN,
            }],
            truncated: Some(Truncated {
                bytes: 4,
                dropped_series: 1,
            }),
        }
    }

    #[test]
    fn written_lines_match_the_contract_field_for_field() {
        let s = ok_line();
        let line = ScrapeLine {
            t_s: s.t_s,
            target: &s.target,
            ok: true,
            scrape_ms: s.scrape_ms,
            error: None,
            types: Some(&s.types),
            samples: Some(&s.samples),
            truncated: s.truncated,
        };
        assert_eq!(
            serde_json::to_string(&line).unwrap(),
            r#"{"t_s":-0.012,"target":"http://h:1/metrics","ok":true,"scrape_ms":2.1,"types":{"g":"gauge"},"samples":[{"n":"g","l":{"model_name":"m"},"v":"NaN"}],"truncated":{"bytes":4,"dropped_series":1}}"#
        );
        let failed = ScrapeLine {
            t_s: 1.5,
            target: "t",
            ok: false,
            scrape_ms: None,
            error: Some("connection refused"),
            types: None,
            samples: None,
            truncated: None,
        };
        assert_eq!(
            serde_json::to_string(&failed).unwrap(),
            r#"{"t_s":1.5,"target":"t","ok":false,"error":"connection refused"}"#
        );
    }

    #[test]
    fn reader_streams_lines_skips_damage_and_ignores_a_torn_last_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("server_metrics.jsonl");
        let good = serde_json::to_string(&ok_line()).unwrap();
        let text = format!(
            "{good}\n\nnot json\n{{\"t_s\":2,\"target\":\"t\",\"ok\":false,\"error\":\"e\"}}\n{{\"t_s\":3,\"tar"
        );
        std::fs::write(&path, text).unwrap();
        let items: Vec<_> = read_jsonl(&path).unwrap().collect();
        assert_eq!(items.len(), 3, "{items:?}");
        let first = items[0].as_ref().unwrap();
        assert_eq!(first.samples.len(), 1);
        assert!(first.samples[0].value.is_nan());
        assert_eq!(first.truncated, ok_line().truncated);
        assert!(matches!(
            items[1],
            Err(ServerMetricsError::ParseLine { line: 3, .. })
        ));
        let failed = items[2].as_ref().unwrap();
        assert!(!failed.ok);
        assert_eq!(failed.error.as_deref(), Some("e"));
        assert!(failed.samples.is_empty());
    }

    #[test]
    fn a_missing_file_is_an_error_naming_it() {
        let err = read_jsonl(Path::new("/nonexistent/server_metrics.jsonl")).unwrap_err();
        assert!(
            err.to_string()
                .contains("/nonexistent/server_metrics.jsonl")
        );
    }
}
