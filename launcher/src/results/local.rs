//! The local side of a fetch: `DIR/<run>/` appears whole or not at all. The copy is unpacked into
//! `DIR/<run>.partial/` (a leftover of an interrupted fetch is cleared first: the name is ours) and renamed into
//! place at the end. An existing `DIR/<run>/` is kept unless the caller forces its replacement, which happens only
//! once the new copy is complete.

use std::path::{Component, Path, PathBuf};

use super::ResultsError;

/// Where one run's directory goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Destination {
    /// `DIR/<run>`: the finished copy.
    pub(crate) dir: PathBuf,
    /// `DIR/<run>.partial`: the copy being written.
    pub(crate) partial: PathBuf,
    /// `DIR/<run>.replaced`: an earlier copy on its way out, while --force swaps the new one in.
    replaced: PathBuf,
}

impl Destination {
    /// The destination of run `run` under `to`. The run's name becomes a directory name, so it must be one plain
    /// path segment (Kubernetes names are; this is checked before anything is created).
    pub(crate) fn new(to: &Path, run: &str) -> Result<Self, ResultsError> {
        let mut components = Path::new(run).components();
        let single = matches!(
            (components.next(), components.next()),
            (Some(Component::Normal(name)), None) if name == run
        );
        if !single {
            return Err(ResultsError::BadRunName {
                run: run.to_owned(),
            });
        }
        Ok(Self {
            dir: to.join(run),
            partial: to.join(format!("{run}.partial")),
            replaced: to.join(format!("{run}.replaced")),
        })
    }

    /// Refuses to go on when the run's directory exists and may not be replaced: checked before any pod is
    /// started, and again when the copy is renamed into place.
    pub(crate) fn check(&self, force: bool) -> Result<(), ResultsError> {
        if !force && std::fs::symlink_metadata(&self.dir).is_ok() {
            return Err(ResultsError::DestinationExists {
                path: self.dir.clone(),
            });
        }
        Ok(())
    }

    /// Creates an empty `DIR/<run>.partial/` (and DIR), clearing what an interrupted fetch left there.
    pub(crate) fn prepare(&self) -> Result<(), ResultsError> {
        if let Some(parent) = self.partial.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|source| ResultsError::Local {
                action: "create",
                path: parent.to_owned(),
                source,
            })?;
        }
        remove_if_present(&self.partial)?;
        std::fs::create_dir(&self.partial).map_err(|source| ResultsError::Local {
            action: "create",
            path: self.partial.clone(),
            source,
        })
    }

    /// Moves the finished copy into place and returns its absolute path. With `force` an existing copy is
    /// swapped out first (there is a moment between the two renames when neither is at `DIR/<run>`; rename(2)
    /// cannot replace a non-empty directory in one step) and then removed.
    pub(crate) fn commit(&self, force: bool) -> Result<PathBuf, ResultsError> {
        self.check(force)?;
        let swapped = if std::fs::symlink_metadata(&self.dir).is_ok() {
            remove_if_present(&self.replaced)?;
            std::fs::rename(&self.dir, &self.replaced).map_err(|source| ResultsError::Local {
                action: "move aside",
                path: self.dir.clone(),
                source,
            })?;
            true
        } else {
            false
        };
        if let Err(source) = std::fs::rename(&self.partial, &self.dir) {
            if swapped {
                // Put the earlier copy back: a failed fetch must not lose it.
                let _ = std::fs::rename(&self.replaced, &self.dir);
            }
            return Err(ResultsError::Local {
                action: "rename into place",
                path: self.partial.clone(),
                source,
            });
        }
        if swapped && let Err(e) = std::fs::remove_dir_all(&self.replaced) {
            tracing::warn!(
                path = %self.replaced.display(),
                error = %e,
                "could not remove the replaced copy; delete it by hand"
            );
        }
        std::path::absolute(&self.dir).map_err(|source| ResultsError::Local {
            action: "resolve",
            path: self.dir.clone(),
            source,
        })
    }

    /// Removes the copy being written, after a failure or an interruption (best effort: it is only a leftover).
    pub(crate) fn discard(&self) {
        if let Err(e) = remove_if_present(&self.partial) {
            tracing::warn!(error = %e, "could not remove the partial copy");
        }
    }
}

fn remove_if_present(path: &Path) -> Result<(), ResultsError> {
    let Ok(metadata) = std::fs::symlink_metadata(path) else {
        return Ok(());
    };
    let removed = if metadata.is_dir() {
        make_writable(path);
        std::fs::remove_dir_all(path)
    } else {
        std::fs::remove_file(path)
    };
    removed.map_err(|source| ResultsError::Local {
        action: "remove",
        path: path.to_owned(),
        source,
    })
}

/// Directories unpacked with their archived modes may lack write permission, which `remove_dir_all` needs.
fn make_writable(dir: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let Ok(metadata) = std::fs::symlink_metadata(dir) else {
            return;
        };
        if !metadata.is_dir() {
            return;
        }
        let mode = metadata.permissions().mode();
        if mode & 0o700 != 0o700 {
            let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode | 0o700));
        }
        if let Ok(entries) = std::fs::read_dir(dir) {
            for entry in entries.flatten() {
                make_writable(&entry.path());
            }
        }
    }
    #[cfg(not(unix))]
    let _ = dir;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_name_that_is_not_one_path_segment_is_refused() {
        let to = Path::new("out");
        for bad in ["", ".", "..", "a/b", "/abs", "../x"] {
            assert!(
                matches!(
                    Destination::new(to, bad),
                    Err(ResultsError::BadRunName { .. })
                ),
                "{bad:?}"
            );
        }
        let destination = Destination::new(to, "bench-1.v2").expect("a name");
        assert_eq!(destination.dir, Path::new("out/bench-1.v2"));
        assert_eq!(destination.partial, Path::new("out/bench-1.v2.partial"));
    }

    #[test]
    fn the_copy_appears_only_when_committed() {
        let to = tempfile::tempdir().expect("tempdir");
        let destination = Destination::new(&to.path().join("new/sub"), "bench-1").expect("name");
        destination.check(false).expect("nothing there");
        destination.prepare().expect("prepare");
        std::fs::write(destination.partial.join("run.json"), "{}").expect("write");
        assert!(!destination.dir.exists());
        let path = destination.commit(false).expect("commit");
        assert!(path.is_absolute());
        assert_eq!(path, to.path().join("new/sub/bench-1"));
        assert!(path.join("run.json").is_file());
        assert!(!destination.partial.exists());
    }

    #[test]
    fn an_existing_copy_is_kept_without_force_and_replaced_with_it() {
        let to = tempfile::tempdir().expect("tempdir");
        let destination = Destination::new(to.path(), "bench-1").expect("name");
        std::fs::create_dir(&destination.dir).expect("old copy");
        std::fs::write(destination.dir.join("old.txt"), "old").expect("write");
        let error = destination.check(false).expect_err("exists");
        assert!(error.to_string().contains("pass --force"), "{error}");

        destination.prepare().expect("prepare");
        std::fs::write(destination.partial.join("new.txt"), "new").expect("write");
        assert!(matches!(
            destination.commit(false),
            Err(ResultsError::DestinationExists { .. })
        ));
        assert!(destination.dir.join("old.txt").is_file(), "kept");
        destination.commit(true).expect("replaced");
        assert!(destination.dir.join("new.txt").is_file());
        assert!(!destination.dir.join("old.txt").exists());
        assert!(!to.path().join("bench-1.replaced").exists());
    }

    #[test]
    fn a_leftover_partial_copy_is_cleared_and_a_discarded_one_removed() {
        let to = tempfile::tempdir().expect("tempdir");
        let destination = Destination::new(to.path(), "bench-1").expect("name");
        std::fs::create_dir_all(destination.partial.join("stale")).expect("leftover");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            // As an archive can leave a directory: without write permission.
            std::fs::set_permissions(
                destination.partial.join("stale"),
                std::fs::Permissions::from_mode(0o555),
            )
            .expect("chmod");
        }
        destination.prepare().expect("prepare");
        assert_eq!(
            std::fs::read_dir(&destination.partial)
                .expect("read")
                .count(),
            0
        );
        destination.discard();
        assert!(!destination.partial.exists());
    }
}
