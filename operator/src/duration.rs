//! Durations as the CRDs and the operator's flags write them, Go style (`3600s`, `90m`, `1h30m`).

use std::time::Duration;

/// Parses a Go duration (`time.ParseDuration`, one copy in core) as the CRD admits it: `3600s`, `90m`, `1h30m`,
/// `1.5h`, `250ms`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    llmbench_api::go_duration::parse(text.trim())
        .ok_or_else(|| format!("`{text}` is not a duration such as 3600s, 90m or 1h30m"))
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
