//! Comparisons drawn for the dashboard: `llmbench plot`'s comparison of the runs picked
//! ([`crate::comparison::compare`]), drawn once into a directory of its own under the work directory and kept
//! while the runs' summaries are unchanged. At most [`KEPT`] comparisons are kept (the oldest is removed), and one
//! is drawn at a time, so a burst of clicks costs one drawing's memory.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use llmbench_core::fnv::Fnv1a64;
use llmbench_report::plot::EXPERIMENT_FILE;
use llmbench_report::report::{RUN_META_FILE, SUMMARY_FILE};

use super::DashboardError;

/// How many drawn comparisons are kept on disk.
const KEPT: usize = 16;
/// The page of a drawn comparison, as `plot::compare` names it.
pub(crate) const COMPARE_PAGE: &str = "compare.html";

/// The comparisons drawn so far, oldest first.
pub(crate) struct Comparisons {
    /// Removed, with every comparison in it, when the dashboard stops.
    _owned: tempfile::TempDir,
    dir: PathBuf,
    kept: Mutex<VecDeque<String>>,
    /// Held while one comparison is drawn.
    drawing: tokio::sync::Mutex<()>,
}

impl Comparisons {
    /// Comparisons in a new directory of this dashboard's own under `parent` (nothing else there is touched).
    pub(crate) fn new(parent: &Path) -> Result<Self, DashboardError> {
        let create = |source| DashboardError::WorkDir {
            path: parent.to_owned(),
            source,
        };
        std::fs::create_dir_all(parent).map_err(create)?;
        let owned = tempfile::Builder::new()
            .prefix("llmbench-dashboard-")
            .tempdir_in(parent)
            .map_err(create)?;
        let dir = owned.path().canonicalize().map_err(create)?;
        Ok(Self {
            _owned: owned,
            dir,
            kept: Mutex::new(VecDeque::new()),
            drawing: tokio::sync::Mutex::new(()),
        })
    }

    /// Where the drawn comparisons are (canonical): files are served from here.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// The key of the comparison of `dirs`, drawn now unless it already is; the pictures and `compare.html` are
    /// in `dir()/key/`.
    pub(crate) async fn draw(&self, dirs: Vec<PathBuf>) -> Result<String, DashboardError> {
        let key = key_of(&dirs);
        let _drawing = self.drawing.lock().await;
        let out = self.dir.join(&key);
        if out.join(COMPARE_PAGE).is_file() {
            return Ok(key);
        }
        let partial = self.dir.join(format!("{key}.partial"));
        let drawn = {
            let partial = partial.clone();
            tokio::task::spawn_blocking(move || {
                let _ = std::fs::remove_dir_all(&partial);
                crate::comparison::compare(&dirs, &partial)
            })
            .await
            .map_err(|e| DashboardError::Task {
                what: "drawing of the comparison",
                message: e.to_string(),
            })?
        };
        if let Err(error) = drawn {
            let _ = std::fs::remove_dir_all(&partial);
            return Err(DashboardError::Compare {
                message: error.to_string(),
            });
        }
        std::fs::rename(&partial, &out).map_err(|source| DashboardError::WorkDir {
            path: out.clone(),
            source,
        })?;
        let evicted = {
            let mut kept = self
                .kept
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            kept.push_back(key.clone());
            let excess = kept.len().saturating_sub(KEPT);
            kept.drain(..excess).collect::<Vec<_>>()
        };
        for old in evicted {
            let _ = std::fs::remove_dir_all(self.dir.join(old));
        }
        Ok(key)
    }
}

/// A key naming the directories compared and the state of their summaries: a rewritten summary (`llmbench
/// report`, `experiment report`) draws afresh.
fn key_of(dirs: &[PathBuf]) -> String {
    let mut hash = Fnv1a64::new();
    for dir in dirs {
        hash.write(dir.as_os_str().as_encoded_bytes());
        hash.write(b"\0");
        for file in [
            RUN_META_FILE,
            SUMMARY_FILE,
            EXPERIMENT_FILE,
            "comparison.json",
        ] {
            if let Ok(metadata) = std::fs::metadata(dir.join(file)) {
                hash.write(&metadata.len().to_le_bytes());
                let modified = metadata
                    .modified()
                    .ok()
                    .and_then(|m| m.duration_since(std::time::UNIX_EPOCH).ok())
                    .map(|d| d.as_nanos())
                    .unwrap_or(0);
                hash.write(&modified.to_le_bytes());
            }
        }
    }
    format!("{:016x}", hash.finish())
}
