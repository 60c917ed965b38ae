//! Go's `time.ParseDuration`, the duration syntax of Kubernetes manifests (`timeout: 1h30m`, `cooldown: 30s`):
//! the one parser behind the CRDs' durations and the operator's flags.
//!
//! Ported from Go's `time/format.go` (`ParseDuration`, `leadingInt`, `leadingFraction`): a sequence of decimal
//! numbers, each with an optional fraction and a unit (`ns`, `us`, `µs`, `μs`, `ms`, `s`, `m`, `h`); a number may
//! start or end with its point (`.5h`, `1.h`); a unit ends where the next digit or point starts, so `1h.5m` is
//! 90 minutes; a lone `0` needs no unit; nanoseconds are counted as integers, with Go's truncation of a fraction.
//! A negative duration has no [`Duration`], so a leading `-` is refused (save `-0`), as is anything past Go's
//! 2⁶³−1 ns.

use std::time::Duration;

const NANOS_LIMIT: u64 = 1 << 63;

/// The duration `text` spells in Go's syntax, or `None` where Go's `time.ParseDuration` refuses it (or gives a
/// negative duration). Callers say what a good value looks like; no surrounding space is skipped.
pub fn parse(text: &str) -> Option<Duration> {
    let (negative, mut rest) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if rest == "0" {
        return Some(Duration::ZERO);
    }
    if rest.is_empty() {
        return None;
    }
    let mut total: u64 = 0;
    while !rest.is_empty() {
        let first = rest.as_bytes()[0];
        if !(first == b'.' || first.is_ascii_digit()) {
            return None;
        }
        let (whole, after_whole) = leading_int(rest)?;
        let had_whole = after_whole.len() != rest.len();
        rest = after_whole;
        let (mut fraction, mut scale, mut had_fraction) = (0, 1.0, false);
        if let Some(after_point) = rest.strip_prefix('.') {
            let (f, s, after_fraction) = leading_fraction(after_point);
            had_fraction = after_fraction.len() != after_point.len();
            (fraction, scale, rest) = (f, s, after_fraction);
        }
        if !had_whole && !had_fraction {
            return None;
        }
        let unit_len = rest
            .find(|c: char| c == '.' || c.is_ascii_digit())
            .unwrap_or(rest.len());
        let unit: u64 = match &rest[..unit_len] {
            "ns" => 1,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return None,
        };
        rest = &rest[unit_len..];
        if whole > NANOS_LIMIT / unit {
            return None;
        }
        let mut nanos = whole * unit;
        if fraction > 0 {
            // Go's float64 step, truncated: nanosecond-exact for fractions of an hour.
            nanos += (fraction as f64 * (unit as f64 / scale)) as u64;
            if nanos > NANOS_LIMIT {
                return None;
            }
        }
        total += nanos;
        if total > NANOS_LIMIT {
            return None;
        }
    }
    match (negative, total) {
        (_, 0) => Some(Duration::ZERO),
        (true, _) => None,
        (false, n) if n >= NANOS_LIMIT => None,
        (false, n) => Some(Duration::from_nanos(n)),
    }
}

/// Go's `leadingInt`: the digits at the start of `text` and what follows; `None` on overflow.
fn leading_int(text: &str) -> Option<(u64, &str)> {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let mut value: u64 = 0;
    for byte in text[..digits].bytes() {
        if value > NANOS_LIMIT / 10 {
            return None;
        }
        value = value * 10 + u64::from(byte - b'0');
        if value > NANOS_LIMIT {
            return None;
        }
    }
    Some((value, &text[digits..]))
}

/// Go's `leadingFraction`: the digits at the start of `text` as `value / scale`, and what follows; digits past
/// what a u64 holds are read and dropped.
fn leading_fraction(text: &str) -> (u64, f64, &str) {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let (mut value, mut scale, mut overflow) = (0u64, 1.0, false);
    for byte in text[..digits].bytes() {
        if overflow {
            continue;
        }
        if value > (NANOS_LIMIT - 1) / 10 {
            overflow = true;
            continue;
        }
        let next = value * 10 + u64::from(byte - b'0');
        if next > NANOS_LIMIT {
            overflow = true;
            continue;
        }
        value = next;
        scale *= 10.0;
    }
    (value, scale, &text[digits..])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: u64) -> Option<Duration> {
        Some(Duration::from_secs(s))
    }

    /// The cases of Go's `parseDurationTests` (time/time_test.go) that are not negative.
    #[test]
    fn go_durations_parse_as_time_parse_duration_does() {
        assert_eq!(parse("0"), Some(Duration::ZERO));
        assert_eq!(parse("5s"), secs(5));
        assert_eq!(parse("30s"), secs(30));
        assert_eq!(parse("1478s"), secs(1478));
        assert_eq!(parse("+5s"), secs(5));
        assert_eq!(parse("-0"), Some(Duration::ZERO));
        assert_eq!(parse("5.0s"), secs(5));
        assert_eq!(parse("5.6s"), Some(Duration::from_millis(5600)));
        assert_eq!(parse("5.s"), secs(5));
        assert_eq!(parse(".5s"), Some(Duration::from_millis(500)));
        assert_eq!(parse("1.0s"), secs(1));
        assert_eq!(parse("1.00s"), secs(1));
        assert_eq!(parse("1.004s"), Some(Duration::from_millis(1004)));
        assert_eq!(parse("100.00100s"), Some(Duration::from_millis(100_001)));
        assert_eq!(parse("10ns"), Some(Duration::from_nanos(10)));
        assert_eq!(parse("11us"), Some(Duration::from_micros(11)));
        assert_eq!(parse("12µs"), Some(Duration::from_micros(12)));
        assert_eq!(parse("12μs"), Some(Duration::from_micros(12)));
        assert_eq!(parse("13ms"), Some(Duration::from_millis(13)));
        assert_eq!(parse("14s"), secs(14));
        assert_eq!(parse("15m"), secs(15 * 60));
        assert_eq!(parse("16h"), secs(16 * 3600));
        assert_eq!(parse("3h30m"), secs(3 * 3600 + 30 * 60));
        assert_eq!(
            parse("10.5s4m"),
            Some(Duration::from_millis(4 * 60_000 + 10_500))
        );
        assert_eq!(
            parse("1h2m3s4ms5us6ns"),
            Some(Duration::new(3723, 4_005_006))
        );
        assert_eq!(
            parse("39h9m14.425s"),
            Some(Duration::from_millis(140_954_425))
        );
        assert_eq!(
            parse("52763797000ns"),
            Some(Duration::from_nanos(52_763_797_000))
        );
        assert_eq!(parse("0.3333333333333333333h"), secs(20 * 60));
        assert_eq!(
            parse("9007199254740993ns"),
            Some(Duration::from_nanos(9_007_199_254_740_993))
        );
        assert_eq!(
            parse("9223372036854775807ns"),
            Some(Duration::from_nanos((1 << 63) - 1))
        );
        assert_eq!(
            parse("9223372036854775.807us"),
            Some(Duration::from_nanos((1 << 63) - 1))
        );
        assert_eq!(parse("0.100000000000000000000h"), secs(6 * 60));
        assert_eq!(
            parse("0.830103483285477580700h"),
            Some(Duration::from_nanos(2_988_372_539_827))
        );
    }

    #[test]
    fn a_unit_ends_where_the_next_number_starts_even_at_its_point() {
        assert_eq!(parse("1h.5m"), secs(3600 + 30));
        assert_eq!(parse("1.5h"), secs(5400));
        assert_eq!(parse("1h30m"), secs(5400));
    }

    /// Go's `parseDurationErrorTests`, and a negative duration, which a `Duration` cannot hold.
    #[test]
    fn what_go_refuses_is_refused() {
        for bad in [
            "",
            "3",
            "-",
            "s",
            ".",
            "-.",
            ".s",
            "+.s",
            "1d",
            "\u{85}\u{85}",
            "\u{ffff}",
            "3000000h",
            "9223372036854775808ns",
            "9223372036854775.808us",
            "9223372036854ms775us808ns",
            "-1s",
            "1h-5m",
            " 5s",
            "5s ",
            "5 s",
        ] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
    }
}
