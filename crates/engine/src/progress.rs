//! What a person sees while a run goes on: a live line on a terminal, periodic plain lines in a pod's log.

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::engine::Progress;

/// The run's shape, for the "elapsed / expected" part of the line.
#[derive(Debug, Clone, Copy)]
pub struct Expectation {
    pub requests: Option<u64>,
    pub duration: Option<Duration>,
    pub stages: usize,
}

/// Starts the display; it stops when the returned handle is aborted.
pub fn spawn(progress: Arc<Progress>, expected: Expectation) -> tokio::task::JoinHandle<()> {
    let live = live_line();
    let period = if live {
        Duration::from_millis(500)
    } else {
        Duration::from_secs(10)
    };
    let started = Instant::now();
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(period);
        ticker.tick().await;
        let mut last = (Instant::now(), 0u64);
        loop {
            ticker.tick().await;
            let now = Instant::now();
            let finished = progress.finished.load(Ordering::Relaxed);
            let rate =
                (finished - last.1) as f64 / now.duration_since(last.0).as_secs_f64().max(1e-9);
            last = (now, finished);
            let line = progress_line(&progress, expected, started.elapsed(), rate);
            let mut err = std::io::stderr().lock();
            // A failed write to the terminal is not worth stopping a run for.
            let _ = if live {
                write!(err, "\r\x1b[2K{line}")
            } else {
                writeln!(err, "{line}")
            };
            let _ = err.flush();
        }
    })
}

/// Whether the progress is one line redrawn in place (`\r` and an erase-line code): on a terminal that
/// understands the code. Anywhere else — a file, a pipe, a pod's log, `TERM=dumb` — it is a plain line every 10 s,
/// with no control code.
fn live_line() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("TERM").is_none_or(|t| t != "dumb")
}

/// Clears the live line before the final table is printed.
pub fn finish() {
    if live_line() {
        let _ = write!(std::io::stderr(), "\r\x1b[2K");
    }
}

fn progress_line(
    progress: &Progress,
    expected: Expectation,
    elapsed: Duration,
    rate: f64,
) -> String {
    let finished = progress.finished.load(Ordering::Relaxed);
    let issued = progress.issued.load(Ordering::Relaxed);
    let failed = progress.failed.load(Ordering::Relaxed);
    let stage = progress.stage.load(Ordering::Relaxed) + 1;
    let total = expected
        .requests
        .map(|t| format!("/{t}"))
        .unwrap_or_default();
    let duration = expected
        .duration
        .map(|d| format!(" / ~{}s", d.as_secs()))
        .unwrap_or_default();
    format!(
        "stage {stage}/{stages}  done {finished}{total}  in flight {in_flight}  {rate:.1} req/s  errors {failed}  \
         elapsed {elapsed}s{duration}",
        stages = expected.stages.max(1),
        in_flight = issued.saturating_sub(finished),
        elapsed = elapsed.as_secs(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_shows_done_rate_errors_and_expected_time() {
        let progress = Progress::default();
        progress.issued.store(12, Ordering::Relaxed);
        progress.finished.store(10, Ordering::Relaxed);
        progress.failed.store(1, Ordering::Relaxed);
        let expected = Expectation {
            requests: Some(30),
            duration: Some(Duration::from_secs(30)),
            stages: 1,
        };
        let line = progress_line(&progress, expected, Duration::from_secs(10), 1.04);
        assert_eq!(
            line,
            "stage 1/1  done 10/30  in flight 2  1.0 req/s  errors 1  elapsed 10s / ~30s"
        );
    }
}
