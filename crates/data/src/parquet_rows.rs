//! Rows of a Parquet file as JSON objects, columns in the file's schema order: what `datasets.load_dataset(
//! "parquet", data_files=path)` gives guidellm and vLLM, read without arrow arrays. Nested columns (lists,
//! structs, maps) become JSON arrays and objects, dates and timestamps the strings `parquet`'s JSON view gives.

use std::path::Path;

use parquet::file::reader::{FileReader, SerializedFileReader};
use serde_json::{Map, Value};

use crate::DataError;

/// Every row of the Parquet file at `path`, in order.
pub fn parquet_rows(path: &Path) -> Result<Vec<Map<String, Value>>, DataError> {
    let parquet_error = |source| DataError::Parquet {
        path: path.to_owned(),
        source,
    };
    let file = std::fs::File::open(path).map_err(|source| DataError::Read {
        path: path.to_owned(),
        source,
    })?;
    let reader = SerializedFileReader::new(file).map_err(parquet_error)?;
    let mut rows = Vec::with_capacity(
        usize::try_from(reader.metadata().file_metadata().num_rows()).unwrap_or(0),
    );
    for row in reader.get_row_iter(None).map_err(parquet_error)? {
        match row.map_err(parquet_error)?.to_json_value() {
            Value::Object(values) => rows.push(values),
            // A row is always an object of its columns; anything else would be a reader bug, kept visible.
            other => {
                let mut values = Map::new();
                values.insert("value".to_owned(), other);
                rows.push(values);
            }
        }
    }
    Ok(rows)
}

/// The leaf columns of the Parquet file at `path` that hold bytes (BYTE_ARRAY without a string annotation, which
/// `datasets` hands out as Python `bytes` where a string column gives `str`), each as its dotted path
/// (`images.list.element.bytes`); `parquet_rows` gives both as JSON strings, bytes in base64.
pub fn parquet_binary_columns(path: &Path) -> Result<Vec<String>, DataError> {
    use parquet::basic::{ConvertedType, LogicalType, Type as PhysicalType};
    let reader = open(path)?;
    let schema = reader.metadata().file_metadata().schema_descr_ptr();
    Ok(schema
        .columns()
        .iter()
        .filter(|column| {
            column.physical_type() == PhysicalType::BYTE_ARRAY
                && !matches!(
                    column.logical_type_ref(),
                    Some(&LogicalType::String | &LogicalType::Json | &LogicalType::Enum)
                )
                && !matches!(
                    column.converted_type(),
                    ConvertedType::UTF8 | ConvertedType::JSON | ConvertedType::ENUM
                )
        })
        .map(|column| column.path().string())
        .collect())
}

/// The value of the Parquet file's key-value metadata entry `key` (such as `huggingface`, where `datasets` keeps
/// the features it wrote the file with), if it has one.
pub fn parquet_metadata(path: &Path, key: &str) -> Result<Option<String>, DataError> {
    let reader = open(path)?;
    Ok(reader
        .metadata()
        .file_metadata()
        .key_value_metadata()
        .and_then(|entries| entries.iter().find(|kv| kv.key == key))
        .and_then(|kv| kv.value.clone()))
}

fn open(path: &Path) -> Result<SerializedFileReader<std::fs::File>, DataError> {
    let file = std::fs::File::open(path).map_err(|source| DataError::Read {
        path: path.to_owned(),
        source,
    })?;
    SerializedFileReader::new(file).map_err(|source| DataError::Parquet {
        path: path.to_owned(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `tests/fixtures/parquet/prompts.parquet`, written by pyarrow 26 (see `make-prompts-parquet.py` beside it):
    /// three rows of a string, an int64 and a list column, snappy-compressed as pyarrow writes by default.
    #[test]
    fn a_pyarrow_file_reads_as_its_rows_in_schema_order() {
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/parquet/prompts.parquet");
        let rows = parquet_rows(&path).expect("reads");
        assert_eq!(rows.len(), 3);
        assert_eq!(
            Value::Object(rows[0].clone()).to_string(),
            r#"{"prompt":"Write a haiku about the sea.","output_tokens_count":12,"tags":["poem","short"]}"#
        );
        assert_eq!(rows[2]["prompt"], "Translate \"bonjour\" to English.");
        assert_eq!(rows[2]["tags"], serde_json::json!([]));
    }

    #[test]
    fn zstd_and_gzip_files_read_alike() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/parquet");
        let snappy = parquet_rows(&dir.join("prompts.parquet")).expect("snappy");
        for codec in ["zstd", "gzip"] {
            let rows = parquet_rows(&dir.join(format!("prompts.{codec}.parquet"))).expect(codec);
            assert_eq!(rows, snappy, "{codec}");
        }
    }

    #[test]
    fn a_file_that_is_not_parquet_is_named_in_the_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("x.parquet");
        std::fs::write(&path, "PAR1 not really").expect("write");
        let err = parquet_rows(&path).expect_err("not parquet").to_string();
        assert!(
            err.starts_with(&format!("cannot read {} as Parquet", path.display())),
            "{err}"
        );
    }
}
