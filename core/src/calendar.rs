//! Proleptic Gregorian calendar arithmetic in UTC (Howard Hinnant's `days_from_civil` and `civil_from_days`,
//! <https://howardhinnant.github.io/date_algorithms.html>): the one copy behind every timestamp llmbench reads
//! (trace files, vLLM logs) or writes (run.json, reports). No time zones, no leap seconds, as Unix time has none.

/// Seconds in a day of Unix time.
pub(crate) const SECONDS_PER_DAY: i64 = 86_400;

/// Days from 1970-01-01 to a date (negative before it). `month` is 1..=12 and `day` 1..=31; the caller checks the
/// date first ([`days_in_month`]), as a day past the month's end counts on into the next month.
pub fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (i64::from(month) + 9) % 12;
    let doy = (153 * mp + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date (year, month 1..=12, day 1..=31) of a count of days since 1970-01-01.
pub(crate) fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}

/// ((year, month, day), (hour, minute, second)) in UTC of seconds since the Unix epoch.
pub fn civil_from_unix(secs: i64) -> ((i64, u32, u32), (u32, u32, u32)) {
    let date = civil_from_days(secs.div_euclid(SECONDS_PER_DAY));
    let rem = secs.rem_euclid(SECONDS_PER_DAY);
    let time = (
        (rem / 3600) as u32,
        (rem % 3600 / 60) as u32,
        (rem % 60) as u32,
    );
    (date, time)
}

/// Whether `year` has a 29 February.
pub(crate) fn is_leap_year(year: i64) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

/// How many days `month` (1..=12) of `year` has; `None` for a month outside 1..=12.
pub fn days_in_month(year: i64, month: u32) -> Option<u32> {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => Some(31),
        4 | 6 | 9 | 11 => Some(30),
        2 if is_leap_year(year) => Some(29),
        2 => Some(28),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_epoch_is_day_zero_and_dates_count_from_it() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(1970, 1, 2), 1);
        assert_eq!(days_from_civil(1969, 12, 31), -1);
        // 30 years of 365 days and 7 leap days (1972 … 1996).
        assert_eq!(days_from_civil(2000, 1, 1), 10_957);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        // 2026-11-22 is 1 795 305 600 s / 86 400.
        assert_eq!(days_from_civil(2026, 11, 22), 20_779);
    }

    #[test]
    fn days_and_dates_round_trip_across_leap_days_and_centuries() {
        for days in (-800_000..800_000).step_by(997) {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days, "{y}-{m}-{d}");
        }
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert_eq!(
            civil_from_days(days_from_civil(1900, 3, 1) - 1),
            (1900, 2, 28)
        );
    }

    #[test]
    fn unix_seconds_split_into_a_utc_date_and_time() {
        assert_eq!(civil_from_unix(0), ((1970, 1, 1), (0, 0, 0)));
        assert_eq!(
            civil_from_unix(1_795_322_112),
            ((2026, 11, 22), (4, 35, 12))
        );
        assert_eq!(civil_from_unix(-1), ((1969, 12, 31), (23, 59, 59)));
    }

    #[test]
    fn february_has_29_days_in_leap_years_only() {
        assert_eq!(days_in_month(2024, 2), Some(29));
        assert_eq!(days_in_month(2000, 2), Some(29));
        assert_eq!(days_in_month(1900, 2), Some(28));
        assert_eq!(days_in_month(2026, 2), Some(28));
        assert_eq!(days_in_month(2026, 4), Some(30));
        assert_eq!(days_in_month(2026, 12), Some(31));
        assert_eq!(days_in_month(2026, 0), None);
        assert_eq!(days_in_month(2026, 13), None);
    }
}
