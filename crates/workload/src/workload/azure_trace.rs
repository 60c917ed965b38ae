//! inference-perf's Azure Public Dataset trace (`load.type: trace_replay`, `load.trace` and `data.trace` with
//! `format: AzurePublicDataset`), read as `inference_perf/utils/trace_reader.py` `AzurePublicDatasetReader` reads
//! it:
//!
//! - CSV lines `TIMESTAMP,ContextTokens,GeneratedTokens` split on `,` (later columns unused); blank lines skipped;
//!   an optional header line (upstream asks `csv.Sniffer.has_header`; here the first line is the header when its
//!   token columns are not integers, which is what the sniffer decides on the dataset's header).
//! - `parse_timestamp`: quotes stripped, `T` read as a space, a trailing `Z` dropped, the fractional seconds cut
//!   (not rounded) to two digits, then `%Y-%m-%d %H:%M:%S.%f` in UTC: times are in whole centiseconds.
//! - `load_traces`: each row's time is relative to the first data line's.
//!
//! Upstream logs and skips a line it cannot parse; llmbench refuses the file instead, naming the line and column,
//! because a skipped row silently changes what is sent.

use std::time::Duration;

use llmbench_core::calendar::{days_from_civil, days_in_month};

/// One row of the trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AzureRow {
    /// The 1-based line of the file it came from.
    pub line: u32,
    /// Its time after the first row's, in whole centiseconds as upstream parses it.
    pub offset: Duration,
    /// `ContextTokens`: the prompt's length in tokens.
    pub context_tokens: u32,
    /// `GeneratedTokens`: the request's `max_tokens`.
    pub generated_tokens: u32,
}

/// Why an Azure trace could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AzureTraceError {
    #[error("{file}:{line}: column {column} (`{name}`): {problem}")]
    Field {
        file: String,
        line: u32,
        column: u32,
        name: &'static str,
        problem: String,
    },
    #[error(
        "{file}:{line}: the first data line is blank; inference-perf then times every row from the Unix epoch \
         (`load_traces` takes the origin from that line only), which llmbench does not reproduce — remove the line"
    )]
    BlankFirstRow { file: String, line: u32 },
    #[error("{file}: no rows")]
    Empty { file: String },
}

const COLUMNS: [&str; 3] = ["TIMESTAMP", "ContextTokens", "GeneratedTokens"];

/// Parses the trace `text` (named `file` in messages). Pure.
pub fn parse(file: &str, text: &str) -> Result<Vec<AzureRow>, AzureTraceError> {
    let lines: Vec<&str> = text.lines().collect();
    let header = lines.first().is_some_and(|first| is_header(first));
    let start = usize::from(header);
    let mut rows = Vec::new();
    let mut origin: Option<i64> = None;
    for (index, raw) in lines.iter().enumerate().skip(start) {
        let line = u32::try_from(index + 1).unwrap_or(u32::MAX);
        if raw.trim().is_empty() {
            if index == start {
                return Err(AzureTraceError::BlankFirstRow {
                    file: file.to_owned(),
                    line,
                });
            }
            continue;
        }
        let bad = |column: usize, problem: String| AzureTraceError::Field {
            file: file.to_owned(),
            line,
            column: column as u32 + 1,
            name: COLUMNS[column],
            problem,
        };
        let fields: Vec<&str> = raw.split(',').collect();
        let field = |column: usize| {
            fields
                .get(column)
                .copied()
                .ok_or_else(|| bad(column, "missing".to_owned()))
        };
        let centis = parse_timestamp(field(0)?).map_err(|problem| bad(0, problem))?;
        let tokens = |column: usize| -> Result<u32, AzureTraceError> {
            let value = field(column)?.trim();
            let n = value
                .parse::<u32>()
                .map_err(|_| bad(column, format!("`{value}` is not a token count")))?;
            if u64::from(n) > super::limits::MAX_TOKENS {
                return Err(bad(
                    column,
                    super::limits::exceeded(super::limits::Limit::Tokens, f64::from(n)),
                ));
            }
            Ok(n)
        };
        let context_tokens = tokens(1)?;
        let generated_tokens = tokens(2)?;
        let origin = *origin.get_or_insert(centis);
        // Rows earlier than the first are due at once (upstream sleeps only for a positive wait).
        let offset_centis = u64::try_from(centis.saturating_sub(origin)).unwrap_or(0);
        if offset_centis as f64 / 100.0 > super::limits::MAX_DURATION.as_secs_f64() {
            return Err(bad(
                0,
                format!(
                    "{} s after the first row: {}",
                    offset_centis / 100,
                    super::limits::exceeded(
                        super::limits::Limit::Duration,
                        offset_centis as f64 / 100.0
                    )
                ),
            ));
        }
        rows.push(AzureRow {
            line,
            offset: Duration::from_millis(offset_centis * 10),
            context_tokens,
            generated_tokens,
        });
    }
    if rows.is_empty() {
        return Err(AzureTraceError::Empty {
            file: file.to_owned(),
        });
    }
    Ok(rows)
}

/// A first line whose token columns are not integers is the header (`TIMESTAMP,ContextTokens,GeneratedTokens`).
fn is_header(line: &str) -> bool {
    let fields: Vec<&str> = line.split(',').collect();
    fields.len() >= 3
        && fields[1..3]
            .iter()
            .any(|f| f.trim().parse::<i64>().is_err())
}

/// `AzurePublicDatasetReader.parse_timestamp`: centiseconds since the Unix epoch (UTC).
pub(crate) fn parse_timestamp(raw: &str) -> Result<i64, String> {
    let ts = raw.trim().trim_matches('"').replace('T', " ");
    let ts = ts.trim_end_matches('Z').trim();
    let (head, centis) = match ts.split_once('.') {
        Some((head, frac)) => {
            // Only the digits, the first two of them, padded: ".5" is 50 cs, ".129" is 12 cs.
            let digits: String = frac.chars().filter(char::is_ascii_digit).take(2).collect();
            let padded = format!("{digits:0<2}");
            (head, padded.parse::<i64>().unwrap_or(0))
        }
        None => (ts, 0),
    };
    let problem = || format!("`{}` is not a `%Y-%m-%d %H:%M:%S.%f` time", raw.trim());
    let (date, time) = head.split_once(' ').ok_or_else(problem)?;
    let number = |s: &str, max_digits: usize| -> Result<i64, String> {
        if s.is_empty() || s.len() > max_digits || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(problem());
        }
        s.parse::<i64>().map_err(|_| problem())
    };
    let date: Vec<&str> = date.split('-').collect();
    let time: Vec<&str> = time.split(':').collect();
    let ([y, mo, d], [h, mi, s]) = (date.as_slice(), time.as_slice()) else {
        return Err(problem());
    };
    if y.len() != 4 {
        return Err(problem());
    }
    let (year, month, day) = (number(y, 4)?, number(mo, 2)?, number(d, 2)?);
    let (hour, minute, second) = (number(h, 2)?, number(mi, 2)?, number(s, 2)?);
    // Two digits each: a month and a day fit in u32.
    let (month, day) = (month as u32, day as u32);
    let month_days = days_in_month(year, month).ok_or_else(problem)?;
    if day < 1 || day > month_days || hour > 23 || minute > 59 || second > 59 {
        return Err(problem());
    }
    let seconds = days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second;
    Ok(seconds * 100 + centis)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn rows_are_timed_from_the_first_with_or_without_a_header() {
        // .000, .250, 1.000 s after 18:15:00 → 0, 250, 1000 ms (".250" is cut to 25 cs = 250 ms).
        let body = "2023-11-16 18:15:00.000,100,50\n2023-11-16 18:15:00.250,200,75\n\n2023-11-16 18:15:01.000,150,60\n";
        let with = format!("TIMESTAMP,ContextTokens,GeneratedTokens\n{body}");
        for (text, first_line) in [(body.to_owned(), 1), (with, 2)] {
            let rows = parse("t.csv", &text).expect("parses");
            let got: Vec<(u32, Duration, u32, u32)> = rows
                .iter()
                .map(|r| (r.line, r.offset, r.context_tokens, r.generated_tokens))
                .collect();
            assert_eq!(
                got,
                vec![
                    (first_line, ms(0), 100, 50),
                    (first_line + 1, ms(250), 200, 75),
                    // The blank line is skipped but still counted.
                    (first_line + 3, ms(1000), 150, 60),
                ]
            );
        }
    }

    #[test]
    fn fractions_are_cut_to_centiseconds_and_iso_forms_are_read() {
        // 1970-01-01 00:00:01.129 → 1 s + 12 cs = 112 cs; "T" and "Z" and quotes as upstream strips them.
        assert_eq!(parse_timestamp("1970-01-01 00:00:01.129"), Ok(112));
        assert_eq!(parse_timestamp("\"1970-01-01T00:00:01.5Z\""), Ok(150));
        assert_eq!(parse_timestamp("1970-01-02 00:00:00"), Ok(86_400 * 100));
        // 2000-03-01 is day 11017 since the epoch (30 years, 7 leap days 1972..1996, plus Jan 31 + Feb 29 of 2000:
        // 30·365 + 7 + 60 = 11017).
        assert_eq!(
            parse_timestamp("2000-03-01 00:00:00.00"),
            Ok(11_017 * 86_400 * 100)
        );
        assert!(parse_timestamp("2023-02-29 00:00:00").is_err());
        assert!(parse_timestamp("18:15:00.0").is_err());
    }

    #[test]
    fn a_later_row_earlier_than_the_first_is_due_at_once() {
        let rows = parse(
            "t.csv",
            "2023-11-16 18:15:01.00,1,1\n2023-11-16 18:15:00.00,2,2\n",
        )
        .expect("parses");
        assert_eq!(rows[1].offset, Duration::ZERO);
    }

    #[test]
    fn bad_fields_name_the_line_and_column() {
        let text = "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:00.00,100,50\n2023-11-16 25:15:00.00,1,1\n";
        assert_eq!(
            parse("t.csv", text).map_err(|e| e.to_string()),
            Err("t.csv:3: column 1 (`TIMESTAMP`): `2023-11-16 25:15:00.00` is not a `%Y-%m-%d %H:%M:%S.%f` time"
                .to_owned())
        );
        let text = "2023-11-16 18:15:00.00,100,50\n2023-11-16 18:15:00.00,100,x\n";
        assert_eq!(
            parse("t.csv", text).map_err(|e| e.to_string()),
            Err("t.csv:2: column 3 (`GeneratedTokens`): `x` is not a token count".to_owned())
        );
        let text = "2023-11-16 18:15:00.00,100,50\n2023-11-16 18:15:00.00,-1,5\n";
        assert!(matches!(
            parse("t.csv", text),
            Err(AzureTraceError::Field {
                line: 2,
                column: 2,
                ..
            })
        ));
        assert!(matches!(
            parse("t.csv", "2023-11-16 18:15:00.00,100\n"),
            Err(AzureTraceError::Field {
                line: 1,
                column: 3,
                ..
            })
        ));
        assert!(matches!(
            parse(
                "t.csv",
                "TIMESTAMP,ContextTokens,GeneratedTokens\n\n2023-11-16 18:15:00.00,1,1\n"
            ),
            Err(AzureTraceError::BlankFirstRow { line: 2, .. })
        ));
        assert!(matches!(
            parse("t.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n"),
            Err(AzureTraceError::Empty { .. })
        ));
    }

    #[test]
    fn rows_beyond_the_profiles_limits_are_refused_with_their_line() {
        let late = "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:00.00,1,1\n2023-12-26 18:15:00.00,1,1\n";
        let e = parse("t.csv", late).expect_err("40 days").to_string();
        assert!(
            e.starts_with("t.csv:3: column 1 (`TIMESTAMP`): 3456000 s after the first row")
                && e.contains("30 days"),
            "{e}"
        );
        let long = "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:00.00,1000000000,1\n";
        let e = parse("t.csv", long)
            .expect_err("a billion tokens")
            .to_string();
        assert!(e.starts_with("t.csv:2: column 2 (`ContextTokens`)"), "{e}");
    }
}
