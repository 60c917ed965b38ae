//! What `llmbench results fetch` tells a person while a run's directory streams in: its size first (from `du -sk`
//! in the reader pod), then bytes so far, the share of that size and the rate, and a closing line.

use std::time::Duration;

use super::unpack::Unpacked;

/// `bytes` in binary units, with one decimal from KiB up: `512 B`, `1.5 KiB`, `40.0 MiB`.
pub(crate) fn format_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// The size in bytes from `du -sk DIR`'s output (`<KiB>\t<DIR>`), or `None` when it is not that.
pub(crate) fn parse_du_kib(output: &str) -> Option<u64> {
    output
        .split_whitespace()
        .next()?
        .parse::<u64>()
        .ok()?
        .checked_mul(1024)
}

/// The rate of `bytes` over `elapsed`, per second (0 before any time has passed).
fn rate(bytes: u64, elapsed: Duration) -> u64 {
    let seconds = elapsed.as_secs_f64();
    if seconds <= 0.0 {
        0
    } else {
        (bytes as f64 / seconds) as u64
    }
}

/// One progress line: `bench-1: 12.0 MiB of ~40.0 MiB (30%), 5.0 MiB/s`. The total is the directory's disk usage,
/// an estimate of the stream (which adds headers and leaves out holes), so the share stops at 99% until the end.
pub(crate) fn progress_line(
    run: &str,
    streamed: u64,
    total: Option<u64>,
    elapsed: Duration,
) -> String {
    let rate = format_bytes(rate(streamed, elapsed));
    match total.filter(|t| *t > 0) {
        Some(total) => {
            let percent = (streamed as f64 / total as f64 * 100.0).floor().min(99.0) as u32;
            format!(
                "{run}: {} of ~{} ({percent}%), {rate}/s",
                format_bytes(streamed),
                format_bytes(total)
            )
        }
        None => format!("{run}: {}, {rate}/s", format_bytes(streamed)),
    }
}

/// The closing line: `bench-1: 3 files in 2 directories, 40.0 MiB in 7.9 s (5.1 MiB/s)`, and what was skipped.
pub(crate) fn final_line(
    run: &str,
    unpacked: &Unpacked,
    streamed: u64,
    elapsed: Duration,
) -> String {
    let mut line = format!(
        "{run}: {} files in {} directories, {} in {:.1} s ({}/s)",
        unpacked.files,
        unpacked.dirs,
        format_bytes(unpacked.bytes),
        elapsed.as_secs_f64(),
        format_bytes(rate(streamed, elapsed)),
    );
    if unpacked.symlinks > 0 {
        line.push_str(&format!(", {} symbolic links", unpacked.symlinks));
    }
    if !unpacked.skipped.is_empty() {
        line.push_str(&format!(", {} entries skipped", unpacked.skipped.len()));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_are_shown_in_binary_units_with_one_decimal() {
        assert_eq!(format_bytes(0), "0 B");
        assert_eq!(format_bytes(1023), "1023 B");
        assert_eq!(format_bytes(1024), "1.0 KiB");
        assert_eq!(format_bytes(1536), "1.5 KiB");
        assert_eq!(format_bytes(40 * 1024 * 1024), "40.0 MiB");
        assert_eq!(format_bytes(3 * 1024 * 1024 * 1024 / 2), "1.5 GiB");
        // The largest unit carries on rather than overflowing into a wrong one.
        assert_eq!(format_bytes(u64::MAX), "16384.0 PiB");
    }

    #[test]
    fn du_output_gives_bytes_and_anything_else_gives_none() {
        assert_eq!(parse_du_kib("1234\t/requests/bench-1\n"), Some(1234 * 1024));
        assert_eq!(parse_du_kib("0 /requests/x"), Some(0));
        assert_eq!(parse_du_kib(""), None);
        assert_eq!(
            parse_du_kib("du: /requests/x: No such file or directory"),
            None
        );
        assert_eq!(parse_du_kib("99999999999999999999 x"), None);
    }

    #[test]
    fn a_progress_line_shows_the_share_of_the_estimate_but_never_100_before_the_end() {
        let mib = 1024 * 1024;
        assert_eq!(
            progress_line("bench-1", 12 * mib, Some(40 * mib), Duration::from_secs(2)),
            "bench-1: 12.0 MiB of ~40.0 MiB (30%), 6.0 MiB/s"
        );
        // Tar headers can take the stream past the directory's disk usage.
        assert_eq!(
            progress_line("bench-1", 41 * mib, Some(40 * mib), Duration::from_secs(1)),
            "bench-1: 41.0 MiB of ~40.0 MiB (99%), 41.0 MiB/s"
        );
        assert_eq!(
            progress_line("bench-1", 2048, None, Duration::ZERO),
            "bench-1: 2.0 KiB, 0 B/s"
        );
    }

    #[test]
    fn the_final_line_counts_files_bytes_rate_and_skipped_entries() {
        let unpacked = Unpacked {
            files: 3,
            dirs: 2,
            symlinks: 0,
            bytes: 4 * 1024 * 1024,
            skipped: vec!["run/up: a symbolic link".to_owned()],
        };
        assert_eq!(
            final_line(
                "bench-1",
                &unpacked,
                4 * 1024 * 1024 + 4096,
                Duration::from_secs(2)
            ),
            "bench-1: 3 files in 2 directories, 4.0 MiB in 2.0 s (2.0 MiB/s), 1 entries skipped"
        );
    }
}
