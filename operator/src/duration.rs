//! Durations as the CRDs and the operator's flags write them, Go style (`3600s`, `90m`, `1h30m`).

use std::time::Duration;

/// Parses a Go-style duration as the CRD admits it: `3600s`, `90m`, `1h30m`, `1.5h`, `250ms`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let err = || format!("`{text}` is not a duration such as 3600s, 90m or 1h30m");
    let mut rest = text.trim();
    if rest.is_empty() {
        return Err(err());
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(err)?;
        let number: f64 = rest[..number_len].parse().map_err(|_| err())?;
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(err()),
        };
        total += number * seconds;
        rest = &rest[unit_len..];
    }
    Duration::try_from_secs_f64(total).map_err(|_| err())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_like_the_crd_admits_them() {
        assert_eq!(parse_duration("3600s"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("1.5h"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        for bad in ["", "10", "5d", "h", "1..2s"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
