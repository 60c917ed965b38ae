//! A run's results directory: a run id that cannot escape `--output`, a directory that is never silently reused,
//! and a lock that keeps a second run with the same id out while the first one writes.
//!
//! The directory is created with `create_dir` (not `create_dir_all`) on its last component, so of two runs racing
//! for one id exactly one gets it; the other is refused. `--overwrite` replaces an earlier run's directory, but
//! only after taking its lock, so a run that is still writing is never wiped.

use std::fs::{File, OpenOptions, TryLockError};
use std::io;
use std::path::{Path, PathBuf};

/// The lock file inside a run directory, held (flock) for as long as a run writes there.
pub const LOCK_FILE: &str = ".llmbench.lock";

/// The longest run id accepted: a directory name, and a label in Kubernetes objects.
const MAX_RUN_ID_LEN: usize = 200;

/// Why a results directory could not be claimed.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error(
        "--run-id {id:?} is not a valid run id: {problem}; use letters, digits, `.`, `_` and `-` (at most {MAX_RUN_ID_LEN})"
    )]
    InvalidRunId { id: String, problem: &'static str },
    #[error(
        "the results directory {path} already exists (an earlier run with this id); choose another --run-id, or \
         pass --overwrite to replace it"
    )]
    Exists { path: PathBuf },
    #[error(
        "the results directory {path} is in use by another llmbench run with the same id; wait for it to end or \
         choose another --run-id"
    )]
    Locked { path: PathBuf },
    #[error("cannot create the results directory {path}: {source}")]
    Create { path: PathBuf, source: io::Error },
    #[error(
        "--output {path} is a file, not a directory; give the directory results go to (it is created if missing)"
    )]
    NotADirectory { path: PathBuf },
    #[error("cannot lock {path}: {source}")]
    Lock { path: PathBuf, source: io::Error },
    #[error("cannot clear the earlier run in {path} for --overwrite: {source}")]
    Clear { path: PathBuf, source: io::Error },
}

/// Checks a run id given with `--run-id`: one path component, no traversal, nothing a shell or a Kubernetes
/// label would choke on.
pub fn validate_run_id(id: &str) -> Result<(), OutputError> {
    let problem = if id.is_empty() {
        Some("it is empty")
    } else if id.len() > MAX_RUN_ID_LEN {
        Some("it is too long")
    } else if id == "." || id == ".." || id.contains("..") {
        Some("it contains `..`")
    } else if id.contains('/') || id.contains('\\') {
        Some("it contains a path separator")
    } else if id.starts_with('-') || id.starts_with('.') {
        Some("it starts with `-` or `.`")
    } else if !id
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
    {
        Some("it contains a character other than a letter, a digit, `.`, `_` or `-`")
    } else {
        None
    };
    match problem {
        Some(problem) => Err(OutputError::InvalidRunId {
            id: id.to_owned(),
            problem,
        }),
        None => Ok(()),
    }
}

/// A claimed results directory; its lock is released when this is dropped (or the process ends, however).
#[derive(Debug)]
pub(crate) struct RunDir {
    pub(crate) path: PathBuf,
    _lock: File,
}

/// Claims `path` for a new run: creates it (its parents as needed) and locks it. An existing directory is refused,
/// unless `overwrite`, which empties it once its lock is free.
pub(crate) fn claim(path: &Path, overwrite: bool) -> Result<RunDir, OutputError> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|source| OutputError::Create {
            path: parent.to_owned(),
            source,
        })?;
    }
    match std::fs::create_dir(path) {
        Ok(()) => lock(path),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            let held = lock(path)?;
            if !overwrite {
                return Err(OutputError::Exists {
                    path: path.to_owned(),
                });
            }
            clear_except_lock(path)?;
            Ok(held)
        }
        Err(source) => Err(OutputError::Create {
            path: path.to_owned(),
            source,
        }),
    }
}

/// Refuses, before anything is built, what [`claim`] would refuse once the prompts are ready: an `--output` that
/// cannot be a directory, and a `--run-id` directory an earlier run left (unless `--overwrite`), so a long prompt
/// build never ends in that refusal. `claim` still decides at the run's start, a race between two runs included.
pub(crate) fn check_before_building(
    output: &Path,
    run_dir: Option<&Path>,
    overwrite: bool,
) -> Result<(), OutputError> {
    if output.exists() && !output.is_dir() {
        return Err(OutputError::NotADirectory {
            path: output.to_owned(),
        });
    }
    std::fs::create_dir_all(output).map_err(|source| OutputError::Create {
        path: output.to_owned(),
        source,
    })?;
    match run_dir {
        Some(path) if !overwrite && path.exists() => Err(OutputError::Exists {
            path: path.to_owned(),
        }),
        _ => Ok(()),
    }
}

/// Claims the first free directory of `base`, `base-2`, `base-3`, …: for a default run id, which names the
/// second it started in, so two runs started in the same second do not collide.
pub(crate) fn claim_fresh(output: &Path, base: &str) -> Result<(String, RunDir), OutputError> {
    let mut attempt = 1u32;
    loop {
        let id = match attempt {
            1 => base.to_owned(),
            n => format!("{base}-{n}"),
        };
        match claim(&output.join(&id), false) {
            Ok(dir) => return Ok((id, dir)),
            Err(OutputError::Exists { .. } | OutputError::Locked { .. }) if attempt < 1000 => {
                attempt += 1;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Whether a run is writing `dir` right now (it holds the directory's lock).
pub fn in_use(dir: &Path) -> bool {
    let Ok(file) = File::open(dir.join(LOCK_FILE)) else {
        return false;
    };
    matches!(file.try_lock(), Err(TryLockError::WouldBlock))
}

fn lock(dir: &Path) -> Result<RunDir, OutputError> {
    let path = dir.join(LOCK_FILE);
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|source| OutputError::Lock {
            path: path.clone(),
            source,
        })?;
    match file.try_lock() {
        Ok(()) => Ok(RunDir {
            path: dir.to_owned(),
            _lock: file,
        }),
        Err(TryLockError::WouldBlock) => Err(OutputError::Locked {
            path: dir.to_owned(),
        }),
        Err(TryLockError::Error(source)) => Err(OutputError::Lock { path, source }),
    }
}

fn clear_except_lock(dir: &Path) -> Result<(), OutputError> {
    let clear = |source| OutputError::Clear {
        path: dir.to_owned(),
        source,
    };
    for entry in std::fs::read_dir(dir).map_err(clear)? {
        let entry = entry.map_err(clear)?;
        if entry.file_name() == LOCK_FILE {
            continue;
        }
        let path = entry.path();
        let removed = if entry.file_type().map_err(clear)?.is_dir() {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
        removed.map_err(clear)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids_that_could_leave_the_output_directory_are_refused() {
        for bad in [
            "", "..", ".", "a/b", "../x", "a\\b", "x..y", "-rf", ".hidden", "sp ace", "é",
        ] {
            let err = validate_run_id(bad).expect_err(bad);
            assert!(err.to_string().contains("not a valid run id"), "{err}");
        }
        for good in [
            "run-1",
            "inference-perf-sanity_random-20261124-101500",
            "a.b_c",
        ] {
            validate_run_id(good).expect(good);
        }
        assert!(validate_run_id(&"x".repeat(201)).is_err());
    }

    #[test]
    fn an_existing_run_directory_is_refused_and_kept() {
        let tmp = tempfile::tempdir().expect("tmp");
        let path = tmp.path().join("r");
        let first = claim(&path, false).expect("first claim");
        std::fs::write(path.join("requests.jsonl"), "kept\n").expect("write");
        drop(first);
        let err = claim(&path, false).expect_err("exists");
        assert!(matches!(err, OutputError::Exists { .. }), "{err}");
        assert!(err.to_string().contains("--overwrite"), "{err}");
        assert_eq!(
            std::fs::read_to_string(path.join("requests.jsonl")).expect("kept"),
            "kept\n"
        );
    }

    #[test]
    fn a_directory_in_use_is_refused_even_with_overwrite() {
        let tmp = tempfile::tempdir().expect("tmp");
        let path = tmp.path().join("r");
        let _held = claim(&path, false).expect("first claim");
        let err = claim(&path, true).expect_err("locked");
        assert!(matches!(err, OutputError::Locked { .. }), "{err}");
    }

    #[test]
    fn a_directory_is_in_use_while_its_run_holds_it() {
        let tmp = tempfile::tempdir().expect("tmp");
        let path = tmp.path().join("r");
        assert!(!in_use(&path));
        let held = claim(&path, false).expect("claim");
        assert!(in_use(&path));
        drop(held);
        assert!(!in_use(&path));
    }

    #[test]
    fn overwrite_empties_a_finished_run() {
        let tmp = tempfile::tempdir().expect("tmp");
        let path = tmp.path().join("r");
        drop(claim(&path, false).expect("first claim"));
        std::fs::write(path.join("requests.jsonl"), "old\n").expect("write");
        std::fs::create_dir(path.join("shard-0")).expect("mkdir");
        let _dir = claim(&path, true).expect("overwrite");
        let left: Vec<_> = std::fs::read_dir(&path)
            .expect("read")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(left, vec![std::ffi::OsString::from(LOCK_FILE)]);
    }

    #[test]
    fn default_ids_get_a_suffix_instead_of_colliding() {
        let tmp = tempfile::tempdir().expect("tmp");
        let (first, _a) = claim_fresh(tmp.path(), "run").expect("first");
        let (second, _b) = claim_fresh(tmp.path(), "run").expect("second");
        assert_eq!((first.as_str(), second.as_str()), ("run", "run-2"));
    }

    #[test]
    fn a_file_as_output_and_an_earlier_runs_directory_are_refused_before_anything_is_built() {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join("results");
        std::fs::write(&file, "").expect("file");
        let err = check_before_building(&file, None, false).expect_err("a file");
        assert!(matches!(err, OutputError::NotADirectory { .. }), "{err}");
        let output = dir.path().join("new/results");
        check_before_building(&output, Some(&output.join("run")), false).expect("made");
        assert!(output.is_dir());
        std::fs::create_dir(output.join("run")).expect("an earlier run");
        let err =
            check_before_building(&output, Some(&output.join("run")), false).expect_err("exists");
        assert!(matches!(err, OutputError::Exists { .. }), "{err}");
        check_before_building(&output, Some(&output.join("run")), true).expect("--overwrite");
    }
}
