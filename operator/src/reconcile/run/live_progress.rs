//! The Progress column: while the launchers run, each reconcile reads every running launcher's live metrics
//! (`llmbench run --metrics-listen`, port [`LAUNCHER_METRICS_PORT`]: `llmbench_requests_finished_total` and, when
//! its plan says, `llmbench_requests_planned`) and writes `status.progress`, e.g. `42% (420/1000)`. Reading is
//! best-effort: a launcher that does not answer leaves the column at what answered, and says so; a finished run
//! clears it (its phase says it is done). [`parse`] and [`render`] are pure; [`read`] is the thin HTTP shell.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;

use crate::builders::LAUNCHER_METRICS_PORT;

/// How long one read of a launcher's metrics may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(2);
/// How often a running run's progress is read again (the run is reconciled this often while it runs).
pub(super) const POLL: Duration = Duration::from_secs(10);

const FINISHED: &str = "llmbench_requests_finished_total";
const PLANNED: &str = "llmbench_requests_planned";

/// One launcher's counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct LauncherProgress {
    pub finished: u64,
    pub planned: Option<u64>,
}

/// The counts in one scrape of a launcher's `/metrics`; `None` without the finished counter.
pub(super) fn parse(text: &str) -> Option<LauncherProgress> {
    let value = |name: &str| {
        text.lines().find_map(|line| {
            let rest = line.strip_prefix(name)?.strip_prefix(' ')?;
            rest.split_whitespace().next()?.parse::<u64>().ok()
        })
    };
    Some(LauncherProgress {
        finished: value(FINISHED)?,
        planned: value(PLANNED),
    })
}

/// The column's text for the launchers that answered, of `expected`: `42% (420/1000)` when every one that
/// answered knows its plan, else `420 finished`; ` from 3/4 launchers` when not all answered. `None` when none
/// did.
pub(super) fn render(answered: &[LauncherProgress], expected: u32) -> Option<String> {
    if answered.is_empty() {
        return None;
    }
    let finished: u64 = answered.iter().map(|p| p.finished).sum();
    let planned: Option<u64> = answered.iter().map(|p| p.planned).sum();
    let mut text = match planned {
        Some(planned) if planned > 0 => {
            // Floored, so 100% means every planned request finished.
            let percent = (finished.min(planned) * 100) / planned;
            format!("{percent}% ({finished}/{planned})")
        }
        _ => format!("{finished} finished"),
    };
    if (answered.len() as u32) < expected {
        text.push_str(&format!(" from {}/{expected} launchers", answered.len()));
    }
    Some(text)
}

/// Reads every running launcher pod's counts, all at once.
pub(super) async fn read(http: &reqwest::Client, pods: &[Pod]) -> Vec<LauncherProgress> {
    let calls = pods.iter().filter_map(|pod| {
        let status = pod.status.as_ref()?;
        if status.phase.as_deref() != Some("Running") {
            return None;
        }
        let ip = status.pod_ip.as_deref()?;
        let host = if ip.contains(':') {
            format!("[{ip}]")
        } else {
            ip.to_owned()
        };
        let url = format!("http://{host}:{LAUNCHER_METRICS_PORT}/metrics");
        Some(async move {
            let text = http
                .get(&url)
                .timeout(CALL_TIMEOUT)
                .send()
                .await
                .ok()?
                .text()
                .await
                .ok()?;
            parse(&text)
        })
    });
    futures_util::future::join_all(calls)
        .await
        .into_iter()
        .flatten()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    // What `llmbench run --metrics-listen` serves (crates/engine/src/live.rs), trimmed.
    const SCRAPE: &str = "# HELP llmbench_requests_issued Requests sent (warm-ups included).\n\
        # TYPE llmbench_requests_issued counter\n\
        llmbench_requests_issued_total 430\n\
        # TYPE llmbench_requests_finished counter\n\
        llmbench_requests_finished_total 420\n\
        # TYPE llmbench_requests_planned gauge\n\
        llmbench_requests_planned 1000\n\
        # EOF\n";

    #[test]
    fn a_scrape_gives_the_finished_and_planned_counts() {
        assert_eq!(
            parse(SCRAPE),
            Some(LauncherProgress {
                finished: 420,
                planned: Some(1000)
            })
        );
        let by_time = SCRAPE.replace("llmbench_requests_planned 1000\n", "");
        assert_eq!(
            parse(&by_time),
            Some(LauncherProgress {
                finished: 420,
                planned: None
            })
        );
        assert_eq!(parse("# EOF\n"), None);
    }

    #[test]
    fn the_column_sums_the_launchers_and_says_when_some_did_not_answer() {
        let of = |finished, planned| LauncherProgress { finished, planned };
        assert_eq!(
            render(&[of(420, Some(1000))], 1).as_deref(),
            Some("42% (420/1000)")
        );
        // Two shards of 500: 250 + 499 of 1000 is 74% (floored).
        assert_eq!(
            render(&[of(250, Some(500)), of(499, Some(500))], 2).as_deref(),
            Some("74% (749/1000)")
        );
        // One shard bounded by time: no share, only the count.
        assert_eq!(
            render(&[of(250, Some(500)), of(30, None)], 2).as_deref(),
            Some("280 finished")
        );
        assert_eq!(
            render(&[of(250, Some(500))], 4).as_deref(),
            Some("50% (250/500) from 1/4 launchers")
        );
        assert_eq!(render(&[], 2), None);
    }
}
