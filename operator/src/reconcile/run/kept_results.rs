//! An emptyDir run's results, kept after its pod goes: the launcher ended by writing its results directory into
//! its log (`llmbench run --results-to-log`, the block of `llmbench_api::results_log`), which outlives the container
//! until the pod is deleted. Once the launcher ended, before its pod is deleted, the operator reads that block and
//! keeps the archive in ConfigMaps owned by the run (`status.resultsKept`), which `llmbench results fetch` reads.
//! The part of the log before the block is the launcher's own, for a failed run's message.

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, LogParams, PostParams};
use llmbench_api::results_log::{self, ResultsLogError};
use llmbench_api::v1alpha1::{BenchmarkRun, ResultsKept};

use super::LOG_TAIL_LINES;
use crate::builders::results_config_maps;

/// Lines read from the end of the log: the largest block (`DEFAULT_CAP_BYTES` as base64 in lines of 76) and the
/// launcher's last lines before it.
const BLOCK_TAIL_LINES: i64 = (results_log::DEFAULT_CAP_BYTES as i64 * 4 / 3) / 76 + 200;

/// A finished emptyDir launcher's log: its last lines before the results block, and the block's archive.
pub(super) struct LauncherLog {
    pub tail: String,
    pub archive: Result<Option<Vec<u8>>, ResultsLogError>,
}

/// Reads `pod`'s launcher log; `None` when it cannot be read (told in the log: the run's status says the rest).
pub(super) async fn read(api: &Api<Pod>, pod: &str) -> Option<LauncherLog> {
    let params = LogParams {
        container: Some("launcher".to_owned()),
        tail_lines: Some(BLOCK_TAIL_LINES),
        ..LogParams::default()
    };
    match api.logs(pod, &params).await {
        Ok(text) => Some(split(&text)),
        Err(e) => {
            tracing::info!(pod, error = %e, "cannot read the launcher's log for its kept results");
            None
        }
    }
}

/// The log's last [`LOG_TAIL_LINES`] lines before the results block, and the block's archive.
pub(super) fn split(log: &str) -> LauncherLog {
    let before = log
        .rfind(results_log::BEGIN)
        .map_or(log, |start| &log[..start]);
    let lines: Vec<&str> = before.lines().collect();
    let from = lines.len().saturating_sub(LOG_TAIL_LINES as usize);
    LauncherLog {
        tail: lines[from..].join("\n"),
        archive: results_log::extract(log),
    }
}

/// Keeps `archive` in ConfigMaps owned by `run`; one already there (a pass that is retried) is taken as kept.
pub(super) async fn keep(
    run: &BenchmarkRun,
    archive: &[u8],
    client: &kube::Client,
) -> Result<ResultsKept, String> {
    let maps = results_config_maps(run, archive).map_err(|e| e.to_string())?;
    let namespace = maps
        .first()
        .and_then(|m| m.metadata.namespace.clone())
        .unwrap_or_default();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace);
    let mut names = Vec::with_capacity(maps.len());
    for map in &maps {
        let name = map.metadata.name.clone().unwrap_or_default();
        match api.create(&PostParams::default(), map).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(e) => return Err(format!("cannot create ConfigMap {name}: {e}")),
        }
        names.push(name);
    }
    Ok(ResultsKept {
        config_maps: names,
        bytes: archive.len() as u64,
        dir: crate::builders::run_id(run).map_err(|e| e.to_string())?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_block_is_split_from_the_launchers_own_lines() {
        let mut log: String = (0..50).map(|i| format!("line {i}\n")).collect();
        log.push_str(&results_log::frame(b"the archive"));
        let split = split(&log);
        assert_eq!(split.archive, Ok(Some(b"the archive".to_vec())));
        // The last 40 of the launcher's own lines, none of the block.
        assert!(split.tail.starts_with("line 10\n") && split.tail.ends_with("line 49"));
        let plain = split_plain();
        assert_eq!(plain.archive, Ok(None));
        assert_eq!(plain.tail, "only a log");
    }

    fn split_plain() -> LauncherLog {
        split("only a log\n")
    }
}
