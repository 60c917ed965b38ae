//! An emptyDir run's results, packed for its log (`llmbench run --results-to-log`, the block of
//! `llmbench_core::results_log`): the run directory as a gzipped tar under `<run id>/`, at most `cap` bytes. What
//! does not fit goes largest first — the request records before the reports, which are what a user fetches a run
//! for — and `NOT_KEPT.txt` in the archive names each file left out with its size. [`unpack_kept`] is the way
//! back, for `results fetch`.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use llmbench_core::results_log::NOT_KEPT_FILE;

use super::unpack::{UnpackError, Unpacked, unpack};

/// Raw bytes tried at first per byte of the cap: results text compresses about this well, so a directory much
/// larger than this needs no compression to know that its largest files must go.
const COMPRESSION_HOPE: u64 = 8;

/// The results block of run directory `dir` (run id `prefix`) for the log: its archive of at most `cap` bytes,
/// framed (`llmbench_core::results_log::frame`).
pub fn results_block(dir: &Path, prefix: &str, cap: u64) -> io::Result<String> {
    pack(dir, prefix, cap).map(|archive| llmbench_core::results_log::frame(&archive))
}

/// The directory `dir`, as a gzipped tar of `prefix/…` of at most `cap` bytes.
fn pack(dir: &Path, prefix: &str, cap: u64) -> io::Result<Vec<u8>> {
    let mut files = Vec::new();
    walk(dir, Path::new(""), &mut files)?;
    // Smallest first: the ones kept longest are at the front, and the largest go first from the back.
    files.sort_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    let mut left_out: Vec<(PathBuf, u64)> = Vec::new();
    while files.iter().map(|f| f.1).sum::<u64>() > cap.saturating_mul(COMPRESSION_HOPE) {
        let Some(largest) = files.pop() else { break };
        left_out.push(largest);
    }
    loop {
        let archive = archive(dir, prefix, &files, &left_out)?;
        if archive.len() as u64 <= cap {
            return Ok(archive);
        }
        match files.pop() {
            Some(largest) => left_out.push(largest),
            // Not even the list of what was left out fits: an empty archive says nothing, so say it is too small.
            None => {
                return Err(io::Error::other(format!(
                    "{cap} bytes cannot hold even the list of the files left out"
                )));
            }
        }
    }
}

/// Every regular file under `root/relative`, with its size, as paths relative to `root`.
fn walk(root: &Path, relative: &Path, out: &mut Vec<(PathBuf, u64)>) -> io::Result<()> {
    for entry in std::fs::read_dir(root.join(relative))? {
        let entry = entry?;
        let path = relative.join(entry.file_name());
        // Not followed: a link could lead out of the run's directory.
        let kind = entry.file_type()?;
        if kind.is_dir() {
            walk(root, &path, out)?;
        } else if kind.is_file() {
            out.push((path, entry.metadata()?.len()));
        }
    }
    Ok(())
}

fn archive(
    dir: &Path,
    prefix: &str,
    files: &[(PathBuf, u64)],
    left_out: &[(PathBuf, u64)],
) -> io::Result<Vec<u8>> {
    let mut tar = tar::Builder::new(GzEncoder::new(Vec::new(), Compression::best()));
    tar.mode(tar::HeaderMode::Deterministic);
    for (path, _) in files {
        tar.append_path_with_name(dir.join(path), Path::new(prefix).join(path))?;
    }
    if !left_out.is_empty() {
        let mut note = String::from(
            "Left out of this emptyDir run's kept results (the container log holds a few MiB), largest first:\n",
        );
        for (path, size) in left_out {
            note.push_str(&format!("{} ({size} bytes)\n", path.display()));
        }
        let mut header = tar::Header::new_gnu();
        header.set_size(note.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        tar.append_data(
            &mut header,
            Path::new(prefix).join(NOT_KEPT_FILE),
            note.as_bytes(),
        )?;
    }
    let mut gz = tar.into_inner()?;
    gz.flush()?;
    gz.finish()
}

/// Unpacks a kept archive (`prefix/…`) into `root`.
#[cfg_attr(not(feature = "cluster"), allow(dead_code))]
pub(crate) fn unpack_kept(
    archive: &[u8],
    root: &Path,
    prefix: &str,
) -> Result<Unpacked, UnpackError> {
    unpack(GzDecoder::new(archive), prefix, root)
}

/// Reads all of `reader` (tests).
#[cfg(test)]
fn read_all(mut reader: impl std::io::Read) -> Vec<u8> {
    let mut out = Vec::new();
    reader.read_to_end(&mut out).expect("reads");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_dir() -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("summary.json"), "{\"requests\": 3}\n").expect("write");
        std::fs::create_dir(dir.path().join("plots")).expect("mkdir");
        std::fs::write(dir.path().join("plots/ttft.svg"), "<svg/>".repeat(100)).expect("write");
        // Incompressible, so it cannot fit a small cap.
        let noise: Vec<u8> = (0..200_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        std::fs::write(dir.path().join("requests.jsonl"), noise).expect("write");
        dir
    }

    #[test]
    fn a_directory_that_fits_comes_back_whole() {
        let dir = run_dir();
        let archive = pack(dir.path(), "bench-1", 1 << 20).expect("packs");
        let back = tempfile::tempdir().expect("temp dir");
        let unpacked = unpack_kept(&archive, back.path(), "bench-1").expect("unpacks");
        assert_eq!(unpacked.files, 3);
        for file in ["summary.json", "plots/ttft.svg", "requests.jsonl"] {
            assert_eq!(
                std::fs::read(back.path().join(file)).expect("read"),
                std::fs::read(dir.path().join(file)).expect("read"),
                "{file}"
            );
        }
        assert!(!back.path().join(NOT_KEPT_FILE).exists());
    }

    #[test]
    fn past_the_cap_the_largest_files_go_and_are_named() {
        let dir = run_dir();
        let archive = pack(dir.path(), "bench-1", 20_000).expect("packs");
        assert!(archive.len() <= 20_000, "{}", archive.len());
        let back = tempfile::tempdir().expect("temp dir");
        unpack_kept(&archive, back.path(), "bench-1").expect("unpacks");
        assert!(back.path().join("summary.json").exists());
        assert!(back.path().join("plots/ttft.svg").exists());
        assert!(!back.path().join("requests.jsonl").exists());
        let note = std::fs::read_to_string(back.path().join(NOT_KEPT_FILE)).expect("the note");
        assert!(note.contains("requests.jsonl (200000 bytes)"), "{note}");
        // The same directory packs to the same bytes: nothing of the packing moment goes in.
        assert_eq!(pack(dir.path(), "bench-1", 20_000).expect("packs"), archive);
        assert!(read_all(GzDecoder::new(archive.as_slice())).len() > archive.len());
    }
}
