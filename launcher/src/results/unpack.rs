//! Unpacking the tar stream of a run's directory into a fresh local directory, safely: the stream comes from a pod
//! and a volume we do not control, so no entry may write outside the destination whatever its name or type.
//!
//! Every entry must lie under the run's directory in the archive (`<results-dir>/…`); that prefix is stripped, so
//! the directory's contents land directly in the destination. Names that are absolute or hold a `..` component are
//! refused outright (they are never produced by `tar cf - -C /requests <dir>`, so they mean a broken or hostile
//! stream). Symbolic links are recreated only when they point downwards (relative, no `..`), and only after every
//! file is written, so no write ever goes through one; others are skipped and reported. Hard links must name an
//! entry already unpacked. Devices and FIFOs are skipped. Files and directories keep their modification times.

use std::io::{self, Read};
use std::path::{Component, Path, PathBuf};

use filetime::FileTime;

/// Why an archive could not be unpacked.
#[derive(Debug, thiserror::Error)]
pub enum UnpackError {
    #[error("cannot read the archive stream: {source}")]
    Read {
        #[source]
        source: io::Error,
    },
    #[error(
        "refusing archive entry {entry:?}: an absolute path or a `..` component could write outside {}",
        root.display()
    )]
    UnsafePath { entry: String, root: PathBuf },
    #[error("archive entry {entry:?} is not inside the run's directory {prefix:?}")]
    OutsideRunDir { entry: String, prefix: String },
    #[error(
        "hard link {entry:?} names {target:?}, which is not an earlier file of the run's directory"
    )]
    BadHardLink { entry: String, target: String },
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("the archive holds nothing of the run's directory {prefix:?}")]
    Empty { prefix: String },
}

/// What was unpacked.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Unpacked {
    /// Regular files (and hard links) written.
    pub(crate) files: u64,
    /// Directories created, the root included.
    pub(crate) dirs: u64,
    /// Symbolic links recreated.
    pub(crate) symlinks: u64,
    /// Bytes of file content written.
    pub(crate) bytes: u64,
    /// Entries not recreated, each with why (in-archive name: reason).
    pub(crate) skipped: Vec<String>,
}

/// Unpacks the archive read from `reader` into `root` (which must exist and should be empty), keeping only what
/// lies under `prefix` (the run's directory as named in the archive, e.g. `bench-1-0f3c9a2e` or `team/bench-7`),
/// with that prefix stripped. Reads `reader` to its end, past the archive's end-of-archive blocks, so that the
/// producer of the stream is never left blocked on a full pipe.
pub(crate) fn unpack(
    reader: impl Read,
    prefix: &str,
    root: &Path,
) -> Result<Unpacked, UnpackError> {
    let prefix_path = Path::new(prefix);
    let mut archive = tar::Archive::new(reader);
    let mut unpacked = Unpacked::default();
    // Directory times and modes are applied last: writing into a directory changes its mtime, and a directory
    // archived without write permission must stay writable until its children are in.
    let mut dirs: Vec<(PathBuf, Option<FileTime>, Option<u32>)> = Vec::new();
    let mut symlinks: Vec<(PathBuf, PathBuf, Option<FileTime>)> = Vec::new();
    let mut seen_root = false;

    let entries = archive
        .entries()
        .map_err(|source| UnpackError::Read { source })?;
    for entry in entries {
        let mut entry = entry.map_err(|source| UnpackError::Read { source })?;
        let name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let relative = relative_path(&name, prefix_path, root)?;
        seen_root = true;
        let destination = root.join(&relative);
        let header = entry.header();
        let kind = header.entry_type();
        let mtime = header
            .mtime()
            .ok()
            .map(|t| FileTime::from_unix_time(i64::try_from(t).unwrap_or(i64::MAX), 0));
        let mode = header.mode().ok();

        if kind.is_dir() {
            if relative.as_os_str().is_empty() {
                // The run's directory itself: the root, which exists.
            } else {
                create_dir_all(&destination)?;
            }
            unpacked.dirs += 1;
            dirs.push((destination, mtime, mode));
        } else if kind.is_file() || kind == tar::EntryType::Continuous || kind.is_gnu_sparse() {
            if relative.as_os_str().is_empty() {
                return Err(UnpackError::OutsideRunDir {
                    entry: name,
                    prefix: prefix.to_owned(),
                });
            }
            if let Some(parent) = destination.parent() {
                create_dir_all(parent)?;
            }
            // A sparse entry's stored size is not its length: only a plain file's can be checked.
            let expected = kind.is_file().then(|| entry.size());
            let written = write_file(&mut entry, &name, &destination, expected)?;
            finish_file(&written.file, &destination, mode, mtime)?;
            unpacked.files += 1;
            unpacked.bytes += written.bytes;
        } else if kind.is_hard_link() {
            let target = link_target(&entry)?;
            let target_relative = relative_path(&target, prefix_path, root).map_err(|_| {
                UnpackError::BadHardLink {
                    entry: name.clone(),
                    target: target.clone(),
                }
            })?;
            let source = root.join(&target_relative);
            let is_file = std::fs::symlink_metadata(&source).is_ok_and(|m| m.is_file());
            if target_relative.as_os_str().is_empty() || !is_file {
                return Err(UnpackError::BadHardLink {
                    entry: name,
                    target,
                });
            }
            if let Some(parent) = destination.parent() {
                create_dir_all(parent)?;
            }
            std::fs::hard_link(&source, &destination)
                .or_else(|_| std::fs::copy(&source, &destination).map(|_| ()))
                .map_err(|source| UnpackError::Write {
                    path: destination.clone(),
                    source,
                })?;
            unpacked.files += 1;
        } else if kind.is_symlink() {
            let target = link_target(&entry)?;
            if points_downwards(Path::new(&target)) && !relative.as_os_str().is_empty() {
                symlinks.push((destination, PathBuf::from(target), mtime));
            } else {
                unpacked.skipped.push(format!(
                    "{name}: a symbolic link to {target:?}, which could point outside the run's directory"
                ));
            }
        } else if kind.is_pax_global_extensions()
            || kind.is_pax_local_extensions()
            || kind.is_gnu_longname()
            || kind.is_gnu_longlink()
        {
            // Metadata of the next entry; `entries()` already applied it.
        } else {
            unpacked.skipped.push(format!(
                "{name}: a {kind:?} entry (only files, directories and links are recreated)"
            ));
        }
    }
    // The end-of-archive blocks are followed by the producer's padding: read it all.
    io::copy(&mut archive.into_inner(), &mut io::sink())
        .map_err(|source| UnpackError::Read { source })?;
    if !seen_root {
        return Err(UnpackError::Empty {
            prefix: prefix.to_owned(),
        });
    }

    for (link, target, mtime) in symlinks {
        if let Some(parent) = link.parent() {
            create_dir_all(parent)?;
        }
        make_symlink(&target, &link)?;
        if let Some(mtime) = mtime {
            // A link's own time is cosmetic: failing to set it loses nothing.
            let _ = filetime::set_symlink_file_times(&link, mtime, mtime);
        }
        unpacked.symlinks += 1;
    }
    // Deepest first, so setting a child's time does not disturb its parent's.
    for (dir, mtime, mode) in dirs.into_iter().rev() {
        if let Some(mode) = mode {
            set_dir_mode(&dir, mode)?;
        }
        if let Some(mtime) = mtime {
            filetime::set_file_mtime(&dir, mtime).map_err(|source| UnpackError::Write {
                path: dir.clone(),
                source,
            })?;
        }
    }
    Ok(unpacked)
}

/// `name` (an archive entry) relative to the run's directory `prefix`, checked: only plain components, and under
/// the prefix. The run's directory itself gives an empty path.
fn relative_path(name: &str, prefix: &Path, root: &Path) -> Result<PathBuf, UnpackError> {
    let mut clean = PathBuf::new();
    for component in Path::new(name).components() {
        match component {
            Component::Normal(part) => clean.push(part),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                return Err(UnpackError::UnsafePath {
                    entry: name.to_owned(),
                    root: root.to_owned(),
                });
            }
        }
    }
    clean
        .strip_prefix(prefix)
        .map(Path::to_path_buf)
        .map_err(|_| UnpackError::OutsideRunDir {
            entry: name.to_owned(),
            prefix: prefix.display().to_string(),
        })
}

/// Whether a symbolic link's target stays at or below the link's own directory: relative, and with no `..`. A
/// chain of such links can only go further down, so none can lead out of the run's directory.
fn points_downwards(target: &Path) -> bool {
    !target.as_os_str().is_empty()
        && target
            .components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
}

fn link_target<R: Read>(entry: &tar::Entry<'_, R>) -> Result<String, UnpackError> {
    entry
        .link_name_bytes()
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
        .ok_or_else(|| UnpackError::Read {
            source: io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "link entry {:?} has no target",
                    String::from_utf8_lossy(&entry.path_bytes())
                ),
            ),
        })
}

fn create_dir_all(path: &Path) -> Result<(), UnpackError> {
    std::fs::create_dir_all(path).map_err(|source| UnpackError::Write {
        path: path.to_owned(),
        source,
    })
}

struct Written {
    file: std::fs::File,
    bytes: u64,
}

/// Copies an entry's content into a new file at `path`. Read and write failures stay apart, so that a stream cut
/// short is reported as such and not as a local disk problem.
fn write_file(
    content: &mut impl Read,
    name: &str,
    path: &Path,
    expected: Option<u64>,
) -> Result<Written, UnpackError> {
    let write_error = |source| UnpackError::Write {
        path: path.to_owned(),
        source,
    };
    let open = || {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
    };
    // A later entry of the same name replaces an earlier one, as tar does; never by writing through what is there.
    let mut file = match open() {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            std::fs::remove_file(path).map_err(write_error)?;
            open()
        }
        other => other,
    }
    .map_err(write_error)?;
    let mut buffer = vec![0u8; 64 * 1024];
    let mut bytes = 0u64;
    loop {
        let n = match content.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(source) => return Err(UnpackError::Read { source }),
        };
        io::Write::write_all(&mut file, &buffer[..n]).map_err(write_error)?;
        bytes += n as u64;
    }
    if let Some(expected) = expected.filter(|e| *e != bytes) {
        return Err(UnpackError::Read {
            source: io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("the stream ended {bytes} bytes into {name:?}, which has {expected}"),
            ),
        });
    }
    Ok(Written { file, bytes })
}

/// Files keep their archived modification time and permission bits, but never so few bits that their owner (the
/// user who fetched them) cannot read and rewrite them.
fn finish_file(
    file: &std::fs::File,
    path: &Path,
    mode: Option<u32>,
    mtime: Option<FileTime>,
) -> Result<(), UnpackError> {
    let write_error = |source| UnpackError::Write {
        path: path.to_owned(),
        source,
    };
    if let Some(mtime) = mtime {
        filetime::set_file_handle_times(file, Some(mtime), Some(mtime)).map_err(write_error)?;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = mode.unwrap_or(0o644) & 0o777 | 0o600;
        file.set_permissions(std::fs::Permissions::from_mode(mode))
            .map_err(write_error)?;
    }
    #[cfg(not(unix))]
    let _ = mode;
    Ok(())
}

fn set_dir_mode(dir: &Path, mode: u32) -> Result<(), UnpackError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode & 0o777 | 0o700))
            .map_err(|source| UnpackError::Write {
                path: dir.to_owned(),
                source,
            })?;
    }
    #[cfg(not(unix))]
    let _ = (dir, mode);
    Ok(())
}

fn make_symlink(target: &Path, link: &Path) -> Result<(), UnpackError> {
    #[cfg(unix)]
    let made = std::os::unix::fs::symlink(target, link);
    #[cfg(windows)]
    let made = std::os::windows::fs::symlink_file(target, link);
    #[cfg(not(any(unix, windows)))]
    let made: io::Result<()> = Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "symbolic links are not supported here",
    ));
    made.map_err(|source| UnpackError::Write {
        path: link.to_owned(),
        source,
    })
}

/// A blocking `Read` over chunks sent by async code: the bridge from the exec stream to [`unpack`], which runs on a
/// blocking thread. The stream ends when the sender is dropped; an error sent is returned by the next read.
pub(crate) struct ChunkReader {
    chunks: tokio::sync::mpsc::Receiver<io::Result<bytes::Bytes>>,
    current: bytes::Bytes,
}

impl ChunkReader {
    pub(crate) fn new(chunks: tokio::sync::mpsc::Receiver<io::Result<bytes::Bytes>>) -> Self {
        Self {
            chunks,
            current: bytes::Bytes::new(),
        }
    }
}

impl Read for ChunkReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        while self.current.is_empty() {
            match self.chunks.blocking_recv() {
                Some(chunk) => self.current = chunk?,
                None => return Ok(0),
            }
        }
        let n = buf.len().min(self.current.len());
        buf[..n].copy_from_slice(&self.current[..n]);
        bytes::Buf::advance(&mut self.current, n);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MTIME: u64 = 1_700_000_000;

    /// A ustar archive built entry by entry, with names written raw so that hostile names can be made.
    struct Archive(tar::Builder<Vec<u8>>);

    impl Archive {
        fn new() -> Self {
            Self(tar::Builder::new(Vec::new()))
        }

        fn header(name: &str, kind: tar::EntryType, size: u64, mode: u32) -> tar::Header {
            let mut header = tar::Header::new_ustar();
            header.set_entry_type(kind);
            header.set_size(size);
            header.set_mode(mode);
            header.set_mtime(MTIME);
            // Raw bytes: `set_path` itself refuses `..`, and the point is to feed such names to the reader.
            let bytes = name.as_bytes();
            header.as_old_mut().name[..bytes.len()].copy_from_slice(bytes);
            header.set_cksum();
            header
        }

        fn dir(mut self, name: &str) -> Self {
            let header = Self::header(name, tar::EntryType::Directory, 0, 0o755);
            self.0.append(&header, io::empty()).expect("append");
            self
        }

        fn file(mut self, name: &str, content: &[u8]) -> Self {
            let header = Self::header(name, tar::EntryType::Regular, content.len() as u64, 0o644);
            self.0.append(&header, content).expect("append");
            self
        }

        fn link(mut self, name: &str, kind: tar::EntryType, target: &str) -> Self {
            let mut header = Self::header(name, kind, 0, 0o777);
            header.set_link_name(target).expect("link name");
            header.set_cksum();
            self.0.append(&header, io::empty()).expect("append");
            self
        }

        fn bytes(self) -> Vec<u8> {
            self.0.into_inner().expect("finish")
        }
    }

    fn mtime_of(path: &Path) -> i64 {
        FileTime::from_last_modification_time(&std::fs::metadata(path).expect("metadata"))
            .unix_seconds()
    }

    #[test]
    fn nested_directories_land_under_the_root_with_the_run_dir_stripped() {
        let archive = Archive::new()
            .dir("bench-1/")
            .file("bench-1/run.json", b"{}")
            .dir("bench-1/shard-0/")
            .file("bench-1/shard-0/requests.jsonl", b"one\ntwo\n")
            .dir("bench-1/plots/")
            .file("bench-1/plots/ttft.svg", b"<svg/>")
            .bytes();
        let root = tempfile::tempdir().expect("tempdir");
        let unpacked = unpack(archive.as_slice(), "bench-1", root.path()).expect("unpacks");
        assert_eq!(unpacked.files, 3);
        assert_eq!(unpacked.dirs, 3);
        assert_eq!(unpacked.bytes, 2 + 8 + 6);
        assert!(unpacked.skipped.is_empty(), "{:?}", unpacked.skipped);
        assert_eq!(
            std::fs::read(root.path().join("shard-0/requests.jsonl")).expect("read"),
            b"one\ntwo\n"
        );
        assert!(root.path().join("plots/ttft.svg").is_file());
        assert!(!root.path().join("bench-1").exists());
    }

    #[test]
    fn a_nested_results_dir_is_stripped_whole() {
        let archive = Archive::new()
            .dir("team-a/")
            .dir("team-a/bench-7/")
            .file("team-a/bench-7/summary.json", b"{}")
            .bytes();
        let root = tempfile::tempdir().expect("tempdir");
        // The parent `team-a/` is outside the run's directory: a producer that archives only the run's directory
        // never sends it, so it is refused rather than silently dropped.
        assert!(matches!(
            unpack(archive.as_slice(), "team-a/bench-7", root.path()),
            Err(UnpackError::OutsideRunDir { .. })
        ));
        let archive = Archive::new()
            .dir("team-a/bench-7/")
            .file("team-a/bench-7/summary.json", b"{}")
            .bytes();
        let root = tempfile::tempdir().expect("tempdir");
        unpack(archive.as_slice(), "team-a/bench-7", root.path()).expect("unpacks");
        assert!(root.path().join("summary.json").is_file());
    }

    #[test]
    fn files_and_directories_keep_their_modification_times() {
        let archive = Archive::new()
            .dir("run/")
            .dir("run/plots/")
            .file("run/plots/a.png", b"png")
            .file("run/run.json", b"{}")
            .bytes();
        let root = tempfile::tempdir().expect("tempdir");
        unpack(archive.as_slice(), "run", root.path()).expect("unpacks");
        let expected = i64::try_from(MTIME).expect("fits");
        assert_eq!(mtime_of(&root.path().join("run.json")), expected);
        assert_eq!(mtime_of(&root.path().join("plots/a.png")), expected);
        // Set after their children were written, so writing the children did not move them.
        assert_eq!(mtime_of(&root.path().join("plots")), expected);
        assert_eq!(mtime_of(root.path()), expected);
    }

    #[test]
    fn a_parent_directory_component_is_refused() {
        let outside = tempfile::tempdir().expect("tempdir");
        let root = outside.path().join("root");
        std::fs::create_dir(&root).expect("root");
        let archive = Archive::new()
            .dir("run/")
            .file("run/../escaped.txt", b"gotcha")
            .bytes();
        let error = unpack(archive.as_slice(), "run", &root).expect_err("refused");
        assert!(
            matches!(&error, UnpackError::UnsafePath { entry, .. } if entry == "run/../escaped.txt"),
            "{error}"
        );
        assert!(!outside.path().join("escaped.txt").exists());
    }

    #[test]
    fn an_absolute_path_is_refused() {
        let root = tempfile::tempdir().expect("tempdir");
        let archive = Archive::new().file("/etc/passwd-llmbench", b"x").bytes();
        assert!(matches!(
            unpack(archive.as_slice(), "run", root.path()),
            Err(UnpackError::UnsafePath { .. })
        ));
    }

    #[test]
    fn an_entry_outside_the_run_dir_is_refused() {
        let root = tempfile::tempdir().expect("tempdir");
        let archive = Archive::new()
            .dir("run/")
            .file("other-run/requests.jsonl", b"x")
            .bytes();
        let error = unpack(archive.as_slice(), "run", root.path()).expect_err("refused");
        assert!(
            matches!(error, UnpackError::OutsideRunDir { .. }),
            "{error}"
        );
        // A name that merely starts with the run's name is another directory.
        let archive = Archive::new().file("run-2/x", b"x").bytes();
        assert!(matches!(
            unpack(archive.as_slice(), "run", root.path()),
            Err(UnpackError::OutsideRunDir { .. })
        ));
    }

    #[test]
    fn symlinks_that_could_escape_are_skipped_and_downward_ones_recreated() {
        let outside = tempfile::tempdir().expect("tempdir");
        let root = outside.path().join("root");
        std::fs::create_dir(&root).expect("root");
        let archive = Archive::new()
            .dir("run/")
            .dir("run/data/")
            .file("run/data/a.txt", b"a")
            .link("run/up", tarkind::SYMLINK, "..")
            .link("run/abs", tarkind::SYMLINK, "/etc")
            .link("run/sideways", tarkind::SYMLINK, "data/../../x")
            .link("run/latest", tarkind::SYMLINK, "data/a.txt")
            // Had `up` been created, this would land in `outside`; it is written as a plain file instead.
            .file("run/up2/escaped.txt", b"no")
            .bytes();
        let unpacked = unpack(archive.as_slice(), "run", &root).expect("unpacks");
        assert_eq!(unpacked.symlinks, 1);
        assert_eq!(unpacked.skipped.len(), 3, "{:?}", unpacked.skipped);
        assert!(
            unpacked.skipped[0].starts_with("run/up:"),
            "{:?}",
            unpacked.skipped
        );
        assert!(std::fs::symlink_metadata(root.join("up")).is_err());
        assert!(std::fs::symlink_metadata(root.join("abs")).is_err());
        assert_eq!(
            std::fs::read_link(root.join("latest")).expect("a link"),
            Path::new("data/a.txt")
        );
        assert_eq!(std::fs::read(root.join("latest")).expect("read"), b"a");
        assert!(!outside.path().join("escaped.txt").exists());
    }

    #[test]
    fn a_file_is_never_written_through_a_symlink_of_the_archive() {
        // `link -> data` is downward, but created only after every file: `link/x` becomes a real directory first,
        // and the link then fails to be created over it rather than redirecting the write.
        let root = tempfile::tempdir().expect("tempdir");
        let archive = Archive::new()
            .dir("run/")
            .dir("run/data/")
            .link("run/link", tarkind::SYMLINK, "data")
            .file("run/link/x", b"x")
            .bytes();
        let result = unpack(archive.as_slice(), "run", root.path());
        assert!(
            matches!(result, Err(UnpackError::Write { .. })),
            "{result:?}"
        );
        assert!(!root.path().join("data/x").exists());
        assert!(root.path().join("link/x").is_file());
    }

    #[test]
    fn hard_links_copy_an_earlier_file_and_may_not_point_elsewhere() {
        let root = tempfile::tempdir().expect("tempdir");
        let archive = Archive::new()
            .dir("run/")
            .file("run/a.txt", b"same")
            .link("run/b.txt", tarkind::LINK, "run/a.txt")
            .bytes();
        let unpacked = unpack(archive.as_slice(), "run", root.path()).expect("unpacks");
        assert_eq!(unpacked.files, 2);
        assert_eq!(
            std::fs::read(root.path().join("b.txt")).expect("read"),
            b"same"
        );

        for target in [
            "/etc/passwd",
            "run/../../x",
            "run/missing.txt",
            "other/a.txt",
        ] {
            let root = tempfile::tempdir().expect("tempdir");
            let archive = Archive::new()
                .dir("run/")
                .link("run/b.txt", tarkind::LINK, target)
                .bytes();
            let result = unpack(archive.as_slice(), "run", root.path());
            assert!(
                matches!(result, Err(UnpackError::BadHardLink { .. })),
                "{target}: {result:?}"
            );
        }
    }

    #[test]
    fn devices_and_fifos_are_skipped() {
        let root = tempfile::tempdir().expect("tempdir");
        let mut archive = Archive::new().dir("run/");
        let header = Archive::header("run/pipe", tar::EntryType::Fifo, 0, 0o644);
        archive.0.append(&header, io::empty()).expect("append");
        let bytes = archive.file("run/a", b"a").bytes();
        let unpacked = unpack(bytes.as_slice(), "run", root.path()).expect("unpacks");
        assert_eq!(unpacked.files, 1);
        assert_eq!(unpacked.skipped.len(), 1);
        assert!(!root.path().join("pipe").exists());
    }

    #[test]
    fn an_archive_without_the_run_dir_is_an_error() {
        let root = tempfile::tempdir().expect("tempdir");
        let empty = Archive::new().bytes();
        assert!(matches!(
            unpack(empty.as_slice(), "run", root.path()),
            Err(UnpackError::Empty { .. })
        ));
    }

    #[test]
    fn a_truncated_stream_is_a_read_error() {
        let root = tempfile::tempdir().expect("tempdir");
        let archive = Archive::new()
            .dir("run/")
            .file("run/big", &[7u8; 4096])
            .bytes();
        let cut = &archive[..512 * 2 + 1000];
        let result = unpack(cut, "run", root.path());
        assert!(
            matches!(result, Err(UnpackError::Read { .. })),
            "{result:?}"
        );
    }

    #[test]
    fn padding_after_the_end_of_the_archive_is_consumed() {
        let root = tempfile::tempdir().expect("tempdir");
        let mut archive = Archive::new().dir("run/").file("run/a", b"a").bytes();
        archive.extend(std::iter::repeat_n(0u8, 10_240));
        let mut reader = io::Cursor::new(archive);
        unpack(&mut reader, "run", root.path()).expect("unpacks");
        assert_eq!(reader.position() as usize, reader.get_ref().len());
    }

    #[test]
    fn files_are_left_readable_and_writable_by_their_owner() {
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let root = tempfile::tempdir().expect("tempdir");
            let mut archive = Archive::new().dir("run/");
            let header = Archive::header("run/locked", tar::EntryType::Regular, 1, 0o400);
            archive.0.append(&header, &b"x"[..]).expect("append");
            let bytes = archive.bytes();
            unpack(bytes.as_slice(), "run", root.path()).expect("unpacks");
            let mode = std::fs::metadata(root.path().join("locked"))
                .expect("metadata")
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }

    #[test]
    fn the_chunk_reader_yields_the_chunks_in_order_then_an_error_sent_after_them() {
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        let sender = std::thread::spawn(move || {
            for chunk in [&b"ab"[..], b"", b"cde"] {
                tx.blocking_send(Ok(bytes::Bytes::from_static(chunk)))
                    .expect("send");
            }
            tx.blocking_send(Err(io::Error::other("stream broke")))
                .expect("send");
        });
        let mut reader = ChunkReader::new(rx);
        let mut got = [0u8; 5];
        reader.read_exact(&mut got).expect("five bytes");
        assert_eq!(&got, b"abcde");
        let error = reader.read(&mut got).expect_err("the error");
        assert_eq!(error.to_string(), "stream broke");
        sender.join().expect("sender");
        // Then the end: the sender is gone.
        assert_eq!(reader.read(&mut got).expect("eof"), 0);
    }

    /// The archive a reader pod sends: `tar cf - -C /requests <dir>` by busybox (as in the llmbench image) where
    /// this machine has it, else by the system's tar. Long names (past ustar's 100 bytes) included.
    #[test]
    fn a_real_tar_of_a_run_directory_unpacks_whole() {
        let tar = ["busybox", "tar"].into_iter().find(|tool| {
            std::process::Command::new(tool)
                .arg("--help")
                .output()
                .is_ok()
        });
        let Some(tool) = tar else {
            eprintln!("neither busybox nor tar is installed: nothing to compare with");
            return;
        };
        let volume = tempfile::tempdir().expect("tempdir");
        let dir = format!("{}-0f3c9a2e", "r".repeat(63));
        let deep = volume.path().join(&dir).join("shard-12").join("plots");
        std::fs::create_dir_all(&deep).expect("dirs");
        let long_file = format!("{}.json", "stage_0_lifecycle_metrics".repeat(3));
        std::fs::write(deep.join(&long_file), b"{\"long\": true}").expect("write");
        std::fs::write(volume.path().join(&dir).join("run.json"), b"{}").expect("write");
        let old = FileTime::from_unix_time(1_600_000_000, 0);
        filetime::set_file_mtime(deep.join(&long_file), old).expect("mtime");
        let mut command = std::process::Command::new(tool);
        if tool == "busybox" {
            command.arg("tar");
        }
        let output = command
            .args(["cf", "-", "-C"])
            .arg(volume.path())
            .arg(&dir)
            .output()
            .expect("tar runs");
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let root = tempfile::tempdir().expect("tempdir");
        let unpacked = unpack(output.stdout.as_slice(), &dir, root.path()).expect("unpacks");
        assert_eq!(unpacked.files, 2, "{unpacked:?}");
        let copied = root.path().join("shard-12/plots").join(&long_file);
        assert_eq!(
            std::fs::read(&copied).expect("the long name"),
            b"{\"long\": true}"
        );
        assert_eq!(mtime_of(&copied), 1_600_000_000);
    }

    /// Entry kinds by their short names.
    mod tarkind {
        pub(crate) const SYMLINK: tar::EntryType = tar::EntryType::Symlink;
        pub(crate) const LINK: tar::EntryType = tar::EntryType::Link;
    }
}
