//! A run's files, served read-only: a requested path is resolved inside one directory or refused. Only plain
//! path segments are accepted (no `..`, no absolute path, no hidden name such as `.llmbench.lock`), and the
//! resolved file, symbolic links followed, must still lie inside the directory: a link that leads out is refused.
//! The path arrives percent-decoded, so `%2e%2e` is a `..` here.

use std::path::{Component, Path, PathBuf};

use super::DashboardError;

/// `requested` (a `/`-separated, decoded path) as a file inside `root`, which must be canonical.
pub(crate) fn resolve(root: &Path, requested: &str) -> Result<PathBuf, DashboardError> {
    let refuse = |reason: &'static str| DashboardError::PathRefused {
        path: requested.to_owned(),
        reason,
    };
    if requested.is_empty() {
        return Err(refuse("it is empty"));
    }
    if requested.contains('\0') || requested.contains('\\') {
        return Err(refuse("it contains a NUL or a backslash"));
    }
    let mut relative = PathBuf::new();
    for component in Path::new(requested).components() {
        match component {
            Component::Normal(name) if !name.to_string_lossy().starts_with('.') => {
                relative.push(name)
            }
            Component::Normal(_) => return Err(refuse("it names a hidden file")),
            Component::ParentDir => return Err(refuse("it contains `..`")),
            Component::RootDir | Component::Prefix(_) => {
                return Err(refuse("it is an absolute path"));
            }
            Component::CurDir => return Err(refuse("it contains `.`")),
        }
    }
    let joined = root.join(&relative);
    let resolved = joined
        .canonicalize()
        .map_err(|_| DashboardError::FileNotFound {
            path: requested.to_owned(),
        })?;
    if !resolved.starts_with(root) {
        return Err(refuse("it leads outside the results directory"));
    }
    if !resolved.is_file() {
        return Err(DashboardError::FileNotFound {
            path: requested.to_owned(),
        });
    }
    Ok(resolved)
}

/// The content type of a results file, by its extension; anything unknown is served as plain text or bytes.
pub(crate) fn content_type(path: &Path) -> &'static str {
    match path.extension().and_then(|e| e.to_str()).unwrap_or("") {
        "html" => "text/html; charset=utf-8",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "json" => "application/json",
        "jsonl" => "application/x-ndjson",
        "yaml" | "yml" | "txt" | "log" | "csv" => "text/plain; charset=utf-8",
        "gz" => "application/gzip",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("results");
        std::fs::create_dir_all(root.join("run-1/plots")).expect("mkdir");
        std::fs::write(root.join("run-1/report.html"), "<html>").expect("write");
        std::fs::write(root.join("run-1/.llmbench.lock"), "").expect("write");
        std::fs::write(dir.path().join("secret.txt"), "outside").expect("write");
        let root = root.canonicalize().expect("canonical");
        (dir, root)
    }

    #[test]
    fn a_file_inside_the_directory_is_served() {
        let (_dir, root) = tree();
        assert_eq!(
            resolve(&root, "run-1/report.html").expect("served"),
            root.join("run-1/report.html")
        );
    }

    #[test]
    fn traversal_absolute_hidden_and_missing_paths_are_refused() {
        let (_dir, root) = tree();
        for (path, refused) in [
            ("../secret.txt", true),
            ("run-1/../../secret.txt", true),
            ("/etc/passwd", true),
            ("run-1/.llmbench.lock", true),
            ("./run-1/report.html", true),
            ("", true),
            ("run-1\\..\\x", true),
            ("run-1/nothing.html", false),
            ("run-1/plots", false),
        ] {
            let error = resolve(&root, path).expect_err(path);
            assert_eq!(
                matches!(error, DashboardError::PathRefused { .. }),
                refused,
                "{path}: {error}"
            );
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_symbolic_link_out_of_the_directory_is_refused_and_one_inside_is_followed() {
        let (dir, root) = tree();
        std::os::unix::fs::symlink(dir.path().join("secret.txt"), root.join("run-1/out.txt"))
            .expect("link");
        std::os::unix::fs::symlink(root.join("run-1/report.html"), root.join("run-1/in.html"))
            .expect("link");
        assert!(matches!(
            resolve(&root, "run-1/out.txt"),
            Err(DashboardError::PathRefused { .. })
        ));
        assert_eq!(
            resolve(&root, "run-1/in.html").expect("inside"),
            root.join("run-1/report.html")
        );
    }
}
