//! Wall-clock time for names and reports (run ids, `started_at`); every measurement uses the monotonic clock.

use std::time::{SystemTime, UNIX_EPOCH};

/// `YYYYMMDD-HHMMSS` in UTC, as inference-perf stamps its result directories.
pub fn compact_utc_now() -> String {
    compact_utc(now_secs())
}

/// `YYYYMMDD-HHMMSS` in UTC for seconds since the Unix epoch (vllm bench serve's `date` and file-name stamp).
pub fn compact_utc(secs: i64) -> String {
    let (date, time) = civil(secs);
    format!(
        "{:04}{:02}{:02}-{:02}{:02}{:02}",
        date.0, date.1, date.2, time.0, time.1, time.2
    )
}

/// RFC 3339 in UTC with milliseconds for nanoseconds since the Unix epoch, e.g. `2026-11-22T04:35:12.345Z`.
pub fn rfc3339_millis(unix_ns: u64) -> String {
    let secs = i64::try_from(unix_ns / 1_000_000_000).unwrap_or(i64::MAX);
    let millis = unix_ns / 1_000_000 % 1000;
    let (date, time) = civil(secs);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        date.0, date.1, date.2, time.0, time.1, time.2
    )
}

/// RFC 3339 in UTC for seconds since the Unix epoch.
pub fn rfc3339(secs: i64) -> String {
    let (date, time) = civil(secs);
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

/// (year, month, day), (hour, minute, second) for seconds since the epoch (Howard Hinnant's days-to-civil).
fn civil(secs: i64) -> ((i64, u32, u32), (u32, u32, u32)) {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    let time = (
        (rem / 3600) as u32,
        (rem % 3600 / 60) as u32,
        (rem % 60) as u32,
    );
    ((year, month, day), time)
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
