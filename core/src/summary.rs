//! The summary contract between the launcher (writer) and the operator (reader), by schema version.

pub mod v1;
