//! How an emptyDir run's results outlive its pod — the contract between the launcher, the operator and `llmbench
//! results fetch`. A launcher whose results directory is an emptyDir (`--results-to-log`) ends by writing the
//! directory, as a gzipped tar, to its standard output between two marker lines, base64 in lines of
//! [`LINE_CHARS`] characters:
//!
//! ```text
//! llmbench-results-begin v1 <archive bytes>
//! H4sIAAAAAAAA…
//! llmbench-results-end
//! ```
//!
//! The container's log outlives the container (until the pod is deleted), so the operator reads it once the
//! launcher ended ([`extract`]) and keeps the archive in ConfigMaps owned by the run, `<run>-results-<i>`, each
//! holding up to [`PART_BYTES`] of it under [`PART_KEY`]; `results fetch` joins them and unpacks the archive. The
//! archive is capped ([`DEFAULT_CAP_BYTES`]): what did not fit is named in the archive's `NOT_KEPT.txt`.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

/// The first line of the block: the marker, the format version and the archive's length in bytes.
pub const BEGIN: &str = "llmbench-results-begin v1";
/// The last line of the block.
pub const END: &str = "llmbench-results-end";
/// Base64 characters per line (MIME's), well under every container runtime's line split.
pub const LINE_CHARS: usize = 76;
/// The archive's size limit by default: its base64 stays well inside a kubelet's default container log (10 MiB
/// before rotation) and a handful of ConfigMaps.
pub const DEFAULT_CAP_BYTES: u64 = 4 << 20;
/// The archive bytes one ConfigMap holds (under the API's 1 MiB object limit with room for metadata).
pub const PART_BYTES: usize = 900 * 1024;
/// The `binaryData` key of each part.
pub const PART_KEY: &str = "part";
/// The file in the archive that names what was left out, and why.
pub const NOT_KEPT_FILE: &str = "NOT_KEPT.txt";

/// Why a log's results block could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResultsLogError {
    #[error("the results block has no end line `{END}` (the log was cut)")]
    Unterminated,
    #[error("the results block's first line is malformed: {line:?}")]
    BadHeader { line: String },
    #[error("the results block is not base64: {reason}")]
    NotBase64 { reason: String },
    #[error("the results block holds {got} bytes where its header says {want}")]
    WrongLength { got: usize, want: usize },
}

/// The block for `archive`, ending in a newline.
pub fn frame(archive: &[u8]) -> String {
    let encoded = STANDARD.encode(archive);
    let mut out = String::with_capacity(encoded.len() + encoded.len() / LINE_CHARS + 64);
    out.push_str(&format!("{BEGIN} {}\n", archive.len()));
    // Base64 is ASCII, so every chunk boundary is a char boundary.
    for line in encoded.as_bytes().chunks(LINE_CHARS) {
        out.push_str(std::str::from_utf8(line).unwrap_or_default());
        out.push('\n');
    }
    out.push_str(END);
    out.push('\n');
    out
}

/// The archive of the last results block in `log`; `None` when the log has none.
pub fn extract(log: &str) -> Result<Option<Vec<u8>>, ResultsLogError> {
    let Some(start) = log.rfind(BEGIN) else {
        return Ok(None);
    };
    let mut lines = log[start..].lines();
    let header = lines.next().unwrap_or_default();
    let want: usize = header
        .strip_prefix(BEGIN)
        .and_then(|rest| rest.trim().parse().ok())
        .ok_or_else(|| ResultsLogError::BadHeader {
            line: header.to_owned(),
        })?;
    let mut encoded = String::new();
    let mut ended = false;
    for line in lines {
        let line = line.trim_end_matches('\r');
        if line == END {
            ended = true;
            break;
        }
        encoded.push_str(line);
    }
    if !ended {
        return Err(ResultsLogError::Unterminated);
    }
    let archive = STANDARD
        .decode(encoded.as_bytes())
        .map_err(|e| ResultsLogError::NotBase64 {
            reason: e.to_string(),
        })?;
    if archive.len() != want {
        return Err(ResultsLogError::WrongLength {
            got: archive.len(),
            want,
        });
    }
    Ok(Some(archive))
}

/// The name of part `index` of run `run`'s kept results.
pub fn part_name(run: &str, index: usize) -> String {
    format!("{run}-results-{index}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_framed_archive_is_extracted_from_the_log_around_it() {
        let archive: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        let log = format!("INFO run finished\n{}", frame(&archive) + "INFO exiting\n");
        // 1000 bytes are 1336 base64 characters: 17 full lines of 76 and one of 44.
        let block = frame(&archive);
        assert_eq!(block.lines().count(), 1 + 18 + 1);
        assert!(block.lines().skip(1).take(17).all(|l| l.len() == 76));
        assert_eq!(extract(&log), Ok(Some(archive)));
        assert_eq!(extract("no block here\n"), Ok(None));
    }

    #[test]
    fn a_cut_or_altered_block_is_an_error_not_a_short_archive() {
        let block = frame(b"abcdef");
        let cut = block.replace(&format!("{END}\n"), "");
        assert_eq!(extract(&cut), Err(ResultsLogError::Unterminated));
        let lying = block.replace(&format!("{BEGIN} 6"), &format!("{BEGIN} 7"));
        assert_eq!(
            extract(&lying),
            Err(ResultsLogError::WrongLength { got: 6, want: 7 })
        );
        let garbled = block.replace("YWJjZGVm", "YWJj*GVm");
        assert!(matches!(
            extract(&garbled),
            Err(ResultsLogError::NotBase64 { .. })
        ));
    }
}
