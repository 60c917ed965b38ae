//! Wall-clock time for names and reports (run ids, `started_at`); every measurement uses the monotonic clock.

use std::time::{SystemTime, UNIX_EPOCH};

use llmbench_core::calendar::civil_from_unix;

/// `YYYYMMDD-HHMMSS` in UTC, as inference-perf stamps its result directories.
pub fn compact_utc_now() -> String {
    compact_utc(now_secs())
}

/// `YYYYMMDD-HHMMSS` in UTC for seconds since the Unix epoch (vllm bench serve's `date` and file-name stamp).
pub fn compact_utc(secs: i64) -> String {
    let (date, time) = civil_from_unix(secs);
    format!(
        "{:04}{:02}{:02}-{:02}{:02}{:02}",
        date.0, date.1, date.2, time.0, time.1, time.2
    )
}

/// RFC 3339 in UTC with milliseconds for nanoseconds since the Unix epoch, e.g. `2026-11-22T04:35:12.345Z`.
pub fn rfc3339_millis(unix_ns: u64) -> String {
    let secs = i64::try_from(unix_ns / 1_000_000_000).unwrap_or(i64::MAX);
    let millis = unix_ns / 1_000_000 % 1000;
    let (date, time) = civil_from_unix(secs);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        date.0, date.1, date.2, time.0, time.1, time.2
    )
}

/// RFC 3339 in UTC for seconds since the Unix epoch.
pub fn rfc3339(secs: i64) -> String {
    let (date, time) = civil_from_unix(secs);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
        date.0, date.1, date.2, time.0, time.1, time.2
    )
}

/// The wall clock now, in nanoseconds since the Unix epoch (0 if the clock is before 1970). Read it right
/// beside `Clock::start()` to anchor a run's monotonic timestamps.
pub fn unix_ns_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

fn now_secs() -> i64 {
    i64::try_from(unix_ns_now() / 1_000_000_000).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epoch_seconds_format_as_utc_dates() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_795_322_112), "2026-11-22T04:35:12Z");
    }

    #[test]
    fn nanoseconds_format_with_milliseconds_and_compactly() {
        assert_eq!(
            rfc3339_millis(1_795_322_112_345_678_901),
            "2026-11-22T04:35:12.345Z"
        );
        assert_eq!(compact_utc(1_795_322_112), "20261122-043512");
    }
}
