//! Text files that may be gzipped: AIPerf reads every JSONL dataset and trace through `open_text_maybe_gzip`
//! (`aiperf/common/utils.py`), which sniffs the gzip magic bytes rather than trusting the name, so a
//! `trace.jsonl.gz` (or a gzipped file without the suffix) is read as its text.

use std::io::{self, Read};
use std::path::Path;

/// The gzip magic bytes (RFC 1952).
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// `path`'s text, decompressed when it starts with gzip's magic bytes; UTF-8 either way.
pub fn read_text_maybe_gzip(path: &Path) -> io::Result<String> {
    let bytes = std::fs::read(path)?;
    if !bytes.starts_with(&GZIP_MAGIC) {
        return String::from_utf8(bytes).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e));
    }
    let mut text = String::new();
    flate2::read::MultiGzDecoder::new(bytes.as_slice()).read_to_string(&mut text)?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    #[test]
    fn a_gzipped_file_is_read_as_its_text_whatever_its_name_and_a_plain_one_as_it_is() {
        let dir = tempfile::tempdir().expect("temp dir");
        let text = "{\"text\": \"é\"}\n{\"text\": \"b\"}\n";
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(text.as_bytes()).expect("compress");
        let compressed = gz.finish().expect("finish");
        // No `.gz` suffix: the magic bytes decide, as `open_text_maybe_gzip` sniffs them.
        for name in ["data.jsonl.gz", "data.jsonl"] {
            let path = dir.path().join(name);
            std::fs::write(&path, &compressed).expect("write");
            assert_eq!(read_text_maybe_gzip(&path).expect("read"), text);
        }
        let plain = dir.path().join("plain.jsonl");
        std::fs::write(&plain, text).expect("write");
        assert_eq!(read_text_maybe_gzip(&plain).expect("read"), text);
        // A gzip stream cut short is an error, not a shorter text.
        let cut = dir.path().join("cut.gz");
        std::fs::write(&cut, &compressed[..compressed.len() / 2]).expect("write");
        assert!(read_text_maybe_gzip(&cut).is_err());
    }
}
