//! What llm-d-benchmark's nop harness takes from each line of a vLLM log before reading it: the timestamp, the
//! process that wrote it, the numbers after a marker, and its "regular expressions" (upstream's category
//! patterns use only `|` and `.`, so they are matched here without a regex engine).
//!
//! Upstream: `workload/harnesses/nop_functions.py` of llm-d/llm-d-benchmark — `DATE_PATTERN`,
//! `extract_datetime`, `PROCESS_PATTERN`, `BenchmarkProcess.process_from_line`, `get_log_list`,
//! `find_floats_in_line` and `extract_floats`.

use serde::{Deserialize, Serialize};

use crate::calendar::{days_from_civil, days_in_month};

/// A line's timestamp: vLLM logs `MM-DD HH:MM:SS` (with `.mmm` in some versions) and no year, so the year is the
/// reader's (upstream prepends `datetime.now().year`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Stamp {
    /// Milliseconds since the Unix epoch, the wall time read as UTC. Upstream reads it in the harness pod's local
    /// time zone, which is UTC in its container; durations do not depend on it.
    pub unix_ms: i64,
    pub month: u8,
    pub day: u8,
    pub hour: u8,
    pub minute: u8,
    pub second: u8,
    pub millis: u16,
}

impl Stamp {
    /// Seconds since the epoch, as upstream's `timestamp()`.
    pub fn seconds(self) -> f64 {
        self.unix_ms as f64 / 1000.0
    }

    /// `%m-%d %H:%M:%S.%f` cut to milliseconds, as upstream's `categories.log` prints a date.
    pub(crate) fn month_day_time(self) -> String {
        format!(
            "{:02}-{:02} {:02}:{:02}:{:02}.{:03}",
            self.month, self.day, self.hour, self.minute, self.second, self.millis
        )
    }
}

/// The process a line came from: vLLM prefixes a worker's lines with `(EngineCore_DP0 pid=191)`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Process {
    pub name: String,
    pub pid: i64,
}

impl Process {
    /// `name pid=N`, or nothing for an empty process (upstream's `BenchmarkProcess.desc`).
    pub(crate) fn desc(&self) -> String {
        if self.name.is_empty() && self.pid == 0 {
            String::new()
        } else {
            format!("{} pid={}", self.name, self.pid)
        }
    }
}

/// One line of the log and what upstream's `get_log_list` reads from it.
#[derive(Debug, Clone, PartialEq)]
pub struct LogLine {
    /// 1-based.
    pub line_number: usize,
    pub line: String,
    pub timestamp: Option<Stamp>,
    pub process: Option<Process>,
}

/// Every line of `log` (split as Python's `str.splitlines`, close enough for logs: `\n`, `\r\n`, `\r`).
pub fn log_lines(log: &str, year: i32) -> Vec<LogLine> {
    split_lines(log)
        .enumerate()
        .map(|(i, line)| LogLine {
            line_number: i + 1,
            line: line.to_owned(),
            timestamp: extract_datetime(line, year),
            process: process_from_line(line),
        })
        .collect()
}

fn split_lines(text: &str) -> impl Iterator<Item = &str> {
    // `lines()` splits on `\n` and drops a `\r` before it; a lone `\r` (progress bars) also ends a line upstream.
    text.lines().flat_map(|l| l.split('\r'))
}

/// The first `\d{2}-\d{2}\s\d{2}:\d{2}:\d{2}(?:\.\d{3})?` in `line` with `year` in front, or `None` when there
/// is none or it is no date (upstream's `strptime` refuses month 13 or 25 o'clock and the line has no date).
pub fn extract_datetime(line: &str, year: i32) -> Option<Stamp> {
    let b = line.as_bytes();
    let digit = |i: usize| b.get(i).is_some_and(u8::is_ascii_digit);
    let is = |i: usize, c: u8| b.get(i) == Some(&c);
    // Python's `\s`: ASCII space, \t, \n, \r, \f and \v (the log is split into lines already).
    let space = |i: usize| {
        b.get(i)
            .is_some_and(|c| c.is_ascii_whitespace() || *c == 0x0b)
    };
    let two = |i: usize| u32::from(b[i] - b'0') * 10 + u32::from(b[i + 1] - b'0');
    for i in 0..b.len() {
        let matched = digit(i)
            && digit(i + 1)
            && is(i + 2, b'-')
            && digit(i + 3)
            && digit(i + 4)
            && space(i + 5)
            && digit(i + 6)
            && digit(i + 7)
            && is(i + 8, b':')
            && digit(i + 9)
            && digit(i + 10)
            && is(i + 11, b':')
            && digit(i + 12)
            && digit(i + 13);
        if !matched {
            continue;
        }
        let millis = (is(i + 14, b'.') && digit(i + 15) && digit(i + 16) && digit(i + 17))
            .then(|| u32::from(b[i + 15] - b'0') * 100 + two(i + 16));
        // The regex's first match is the value, valid or not: strptime's failure gives no date at all.
        return stamp(
            year,
            two(i),
            two(i + 3),
            two(i + 6),
            two(i + 9),
            two(i + 12),
            millis.unwrap_or(0),
        );
    }
    None
}

fn stamp(
    year: i32,
    month: u32,
    day: u32,
    hour: u32,
    minute: u32,
    second: u32,
    millis: u32,
) -> Option<Stamp> {
    if !(1..=12).contains(&month)
        || day == 0
        || Some(day) > days_in_month(i64::from(year), month)
        || hour > 23
        || minute > 59
        || second > 59
    {
        return None;
    }
    let days = days_from_civil(i64::from(year), month, day);
    let unix_ms = ((days * 24 + i64::from(hour)) * 60 + i64::from(minute)) * 60_000
        + i64::from(second) * 1000
        + i64::from(millis);
    Some(Stamp {
        unix_ms,
        month: month as u8,
        day: day as u8,
        hour: hour as u8,
        minute: minute as u8,
        second: second as u8,
        millis: millis as u16,
    })
}

/// The last `(…pid=N…)` group of the line (upstream: the matches of `\(.*?\)` from the last, the first holding
/// `pid=`; the name is what precedes `pid=` without `(` and spaces; a pid that is no integer is 0).
pub(crate) fn process_from_line(line: &str) -> Option<Process> {
    let mut groups = Vec::new();
    let mut rest = 0;
    while let Some(open) = line[rest..].find('(') {
        let open = rest + open;
        let Some(close) = line[open + 1..].find(')') else {
            break;
        };
        let close = open + 1 + close;
        groups.push(&line[open..=close]);
        rest = close + 1;
    }
    groups.iter().rev().find_map(|group| {
        let start = group.find("pid=")?;
        let name = group[..start].trim_matches(|c| c == '(' || c == ' ');
        let digits_from = start + "pid=".len();
        let pid = group[digits_from..]
            .find(')')
            .map(|end| &group[digits_from..digits_from + end])
            .and_then(|text| python_int(text.trim()))
            .unwrap_or(0);
        Some(Process {
            name: name.to_owned(),
            pid,
        })
    })
}

/// Python's `int(text)` for what a pid can look like: an optional sign, digits, single underscores between them.
fn python_int(text: &str) -> Option<i64> {
    let digits = text.strip_prefix('+').unwrap_or(text);
    if digits.starts_with('_') || digits.ends_with('_') || digits.contains("__") {
        return None;
    }
    digits.replace('_', "").parse().ok()
}

/// The numbers from the first `key` to the end of the line (upstream's `find_floats_in_line`); none when the line
/// has no `key`.
pub(crate) fn floats_after(key: &str, line: &str) -> Vec<f64> {
    match line.find(key) {
        Some(at) => extract_floats(&line[at..]),
        None => Vec::new(),
    }
}

/// Every match of `[-+]?\d*\.\d+|\d+` in `text`, as numbers: a sign is kept only on a decimal number, `1.2.3`
/// reads as 1.2 and .3, and a shape such as `(1, 2048)` gives its numbers too.
pub fn extract_floats(text: &str) -> Vec<f64> {
    let b = text.as_bytes();
    let digits_from = |mut i: usize| {
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        i
    };
    let mut found = Vec::new();
    let mut i = 0;
    while i < b.len() {
        // First alternative: [-+]?\d*\.\d+ (backtracking into \d* never helps: it only gives back digits).
        let after_sign = if matches!(b[i], b'-' | b'+') {
            i + 1
        } else {
            i
        };
        let point = digits_from(after_sign);
        if b.get(point) == Some(&b'.') {
            let end = digits_from(point + 1);
            if end > point + 1 {
                if let Ok(value) = text[i..end].parse() {
                    found.push(value);
                }
                i = end;
                continue;
            }
        }
        // Second alternative: \d+.
        let end = digits_from(i);
        if end > i {
            if let Ok(value) = text[i..end].parse() {
                found.push(value);
            }
            i = end;
            continue;
        }
        i += 1;
    }
    found
}

/// One of upstream's category patterns: alternatives split on `|`, each a literal in which `.` is any character.
/// [`Pattern::new`] refuses any other regular-expression syntax, so a pattern that needs a real regex engine is
/// caught by the tests rather than silently matched as text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pattern(pub &'static str);

impl Pattern {
    /// The characters that would make the pattern more than alternatives of literals with `.`.
    #[cfg(test)]
    pub(crate) const UNSUPPORTED: &'static [char] =
        &['\\', '(', ')', '[', ']', '{', '}', '*', '+', '?', '^', '$'];

    /// Whether the pattern is one this matcher reads as Python's `re` would.
    #[cfg(test)]
    pub(crate) fn is_supported(self) -> bool {
        !self.0.contains(Self::UNSUPPORTED)
    }

    /// `re.search(pattern, line) is not None`.
    pub fn matches(self, line: &str) -> bool {
        self.0.split('|').any(|alternative| {
            if !alternative.contains('.') {
                return line.contains(alternative);
            }
            let want: Vec<char> = alternative.chars().collect();
            let have: Vec<char> = line.chars().collect();
            have.len() >= want.len()
                && (0..=have.len() - want.len()).any(|at| {
                    want.iter()
                        .zip(&have[at..])
                        .all(|(w, h)| *w == '.' && *h != '\n' || w == h)
                })
        })
    }
}
