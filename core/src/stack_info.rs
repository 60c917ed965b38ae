//! `llmbench.stack-info/v1`, the stack-info record: how the stack under test was started (image, command, args,
//! literal env). The operator writes it into a run's ConfigMap for a standalone stack (`stack-info.json`); the
//! launcher reads it (`llmbench run --stack-info FILE`) into run.json's `stack`. A user may write one by hand.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The schema id the operator writes. A record without one (written by hand) is read as this version.
pub const SCHEMA: &str = "llmbench.stack-info/v1";

/// The stack-info record. Every field may be left out. An unknown field is refused (naming it, with its line), so
/// a writer's typo never drops part of the record silently.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StackInfo {
    /// [`SCHEMA`] when the operator wrote it; a reader refuses another value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    #[serde(default)]
    pub image: Option<String>,
    #[serde(default)]
    pub command: Vec<String>,
    #[serde(default)]
    pub args: Vec<String>,
    /// Literal values only: a value from a Secret or a field is not the writer's to copy.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
}

/// Why a stack-info text is not a record of this version.
#[derive(Debug, thiserror::Error)]
pub enum StackInfoError {
    #[error(
        "not a stack-info record ({{\"image\": string?, \"command\": [string], \"args\": [string], \"env\": \
         {{string: string}}}}): {0}"
    )]
    Json(#[from] serde_json::Error),
    #[error("schema is `{found}`, expected `{SCHEMA}`")]
    Schema { found: String },
}

impl StackInfo {
    /// The record the operator writes: with [`SCHEMA`].
    pub fn new(
        image: Option<String>,
        command: Vec<String>,
        args: Vec<String>,
        env: BTreeMap<String, String>,
    ) -> StackInfo {
        StackInfo {
            schema: Some(SCHEMA.to_owned()),
            image,
            command,
            args,
            env,
        }
    }

    /// Parses and checks a record.
    pub fn parse(text: &str) -> Result<StackInfo, StackInfoError> {
        let info: StackInfo = serde_json::from_str(text)?;
        match &info.schema {
            Some(found) if found != SCHEMA => Err(StackInfoError::Schema {
                found: found.clone(),
            }),
            _ => Ok(info),
        }
    }

    /// The record as JSON.
    pub fn to_json(&self) -> String {
        // Strings, lists of strings and a map with string keys: serde_json cannot fail on them.
        serde_json::to_string(self).expect("a stack-info record serializes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_round_trips_byte_for_byte() {
        let text = r#"{"schema":"llmbench.stack-info/v1","image":"vllm/vllm-openai:v0.11.0","command":["vllm"],"args":["serve","m","--port","8000"],"env":{"HF_HOME":"/cache","VLLM_LOGGING_LEVEL":"DEBUG"}}"#;
        let info = StackInfo::parse(text).expect("parses");
        assert_eq!(info.to_json(), text);
        let written = StackInfo::new(
            info.image.clone(),
            info.command.clone(),
            info.args.clone(),
            info.env.clone(),
        );
        assert_eq!(written, info);
    }

    #[test]
    fn a_hand_written_record_needs_no_schema_nor_any_field() {
        assert_eq!(
            StackInfo::parse("{}").expect("parses"),
            StackInfo::default()
        );
        let info =
            StackInfo::parse(r#"{"command": ["llmbench"], "args": ["sim"]}"#).expect("parses");
        assert_eq!((info.schema, info.image), (None, None));
    }

    #[test]
    fn an_unknown_field_or_another_schema_is_refused() {
        let err = StackInfo::parse(r#"{"imgae": "x"}"#)
            .expect_err("typo")
            .to_string();
        assert!(
            err.contains("unknown field `imgae`") && err.contains("line 1"),
            "{err}"
        );
        let err = StackInfo::parse(r#"{"schema": "llmbench.stack-info/v2"}"#)
            .expect_err("v2")
            .to_string();
        assert_eq!(
            err,
            "schema is `llmbench.stack-info/v2`, expected `llmbench.stack-info/v1`"
        );
    }
}
