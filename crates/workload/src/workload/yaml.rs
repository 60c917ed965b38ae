//! A YAML document as a tree that remembers where each node and key came from.
//!
//! The dialect parsers walk this tree by hand instead of deriving serde structs: every tool's
//! format has aliases, quirks and "unknown key" rules of its own, and every error must name the
//! file, the key path and the line. serde-saphyr's `Spanned` supplies the lines.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde_saphyr::Spanned;

use super::error::WorkloadError;

/// One YAML node and the 1-based line it starts on (0 when unknown).
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub value: Value,
    pub line: u32,
}

/// A map key and the line it was written on.
#[derive(Debug, Clone, PartialEq)]
pub struct Key {
    pub name: String,
    pub line: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Seq(Vec<Node>),
    Map(Vec<(Key, Node)>),
}

impl Value {
    /// The YAML type name used in "expected X, found Y" messages, with the value for scalars.
    pub fn describe(&self) -> String {
        match self {
            Value::Null => "null".to_string(),
            Value::Bool(b) => format!("boolean `{b}`"),
            Value::Int(i) => format!("integer `{i}`"),
            Value::Float(f) => format!("number `{f}`"),
            Value::Str(s) => format!("string `{s}`"),
            Value::Seq(_) => "a list".to_string(),
            Value::Map(_) => "a map".to_string(),
        }
    }
}

impl Node {
    /// The value as JSON, as a tool's pydantic model holds a YAML value it takes whole (a request body's extra
    /// fields, a JSON schema). A float JSON cannot write (NaN, infinities) becomes null.
    pub fn to_json(&self) -> serde_json::Value {
        match &self.value {
            Value::Null => serde_json::Value::Null,
            Value::Bool(b) => serde_json::Value::Bool(*b),
            Value::Int(i) => serde_json::Value::from(*i),
            Value::Float(f) => serde_json::Number::from_f64(*f)
                .map_or(serde_json::Value::Null, serde_json::Value::Number),
            Value::Str(s) => serde_json::Value::String(s.clone()),
            Value::Seq(items) => {
                serde_json::Value::Array(items.iter().map(Node::to_json).collect())
            }
            Value::Map(entries) => serde_json::Value::Object(
                entries
                    .iter()
                    .map(|(k, v)| (k.name.clone(), v.to_json()))
                    .collect(),
            ),
        }
    }

    pub fn new(value: Value, line: u32) -> Self {
        Node { value, line }
    }

    pub fn is_null(&self) -> bool {
        matches!(self.value, Value::Null)
    }

    /// Entries of a map node, `None` for anything else.
    pub fn entries(&self) -> Option<&[(Key, Node)]> {
        match &self.value {
            Value::Map(entries) => Some(entries),
            _ => None,
        }
    }

    /// The value under `key` of a map node.
    pub fn get(&self, key: &str) -> Option<&Node> {
        self.entries()?
            .iter()
            .find(|(k, _)| k.name == key)
            .map(|(_, v)| v)
    }

    /// The scalar as text, for flag maps and `k=v` strings where the tool sees text anyway.
    pub fn scalar_text(&self) -> Option<String> {
        match &self.value {
            Value::Bool(b) => Some(b.to_string()),
            Value::Int(i) => Some(i.to_string()),
            Value::Float(f) => Some(f.to_string()),
            Value::Str(s) => Some(s.clone()),
            Value::Null | Value::Seq(_) | Value::Map(_) => None,
        }
    }
}

fn line_of(span: &serde_saphyr::Location) -> u32 {
    u32::try_from(span.line()).unwrap_or(u32::MAX)
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let spanned = Spanned::<Value>::deserialize(deserializer)?;
        Ok(Node {
            line: line_of(&spanned.referenced),
            value: spanned.value,
        })
    }
}

/// A map key: any scalar, kept as the text the tool would see.
struct KeyText(String);

impl<'de> Deserialize<'de> for KeyText {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match Value::deserialize(deserializer)? {
            Value::Null => Ok(KeyText("null".to_string())),
            Value::Bool(b) => Ok(KeyText(b.to_string())),
            Value::Int(i) => Ok(KeyText(i.to_string())),
            Value::Float(f) => Ok(KeyText(f.to_string())),
            Value::Str(s) => Ok(KeyText(s)),
            Value::Seq(_) | Value::Map(_) => Err(de::Error::custom("a map key must be a scalar")),
        }
    }
}

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        Value::deserialize(d)
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Int(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        // Beyond i64 only a float can hold it; no profile figure is that large.
        Ok(i64::try_from(v).map_or(Value::Float(v as f64), Value::Int))
    }

    fn visit_i128<E>(self, v: i128) -> Result<Value, E> {
        Ok(i64::try_from(v).map_or(Value::Float(v as f64), Value::Int))
    }

    fn visit_u128<E>(self, v: u128) -> Result<Value, E> {
        Ok(i64::try_from(v).map_or(Value::Float(v as f64), Value::Int))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::Float(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::Str(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::Str(v))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Node>()? {
            items.push(item);
        }
        Ok(Value::Seq(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut entries: Vec<(Key, Node)> = Vec::new();
        while let Some(key) = map.next_key::<Spanned<KeyText>>()? {
            let value = map.next_value::<Node>()?;
            let key = Key {
                name: key.value.0,
                line: line_of(&key.referenced),
            };
            // Last one wins, as in PyYAML, which every upstream tool uses.
            entries.retain(|(k, _)| k.name != key.name);
            entries.push((key, value));
        }
        Ok(Value::Map(entries))
    }
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ValueVisitor)
    }
}

/// Parses one YAML document. An empty document is `null`.
pub fn parse_document(file: &str, text: &str) -> Result<Node, WorkloadError> {
    let meaningful = text
        .lines()
        .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#') && l.trim() != "---");
    if !meaningful {
        return Ok(Node::new(Value::Null, 0));
    }
    serde_saphyr::from_str::<Node>(text).map_err(|e| WorkloadError::Yaml {
        file: file.to_string(),
        line: e.location().map(|l| line_of(&l)).filter(|l| *l > 0),
        message: first_line(&e.to_string()),
    })
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or("").trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_and_keys_carry_their_lines() {
        let doc = parse_document(
            "t.yaml",
            "load:\n  type: constant\n  stages:\n  - rate: 1\n    duration: 30\n",
        )
        .unwrap();
        let (load_key, load) = &doc.entries().unwrap()[0];
        assert_eq!(load_key.line, 1);
        let (stages_key, stages) = &load.entries().unwrap()[1];
        assert_eq!(stages_key.line, 3);
        let Value::Seq(items) = &stages.value else {
            panic!("stages is not a list: {stages:?}")
        };
        let (rate_key, rate) = &items[0].entries().unwrap()[0];
        assert_eq!((rate_key.line, rate.line), (4, 4));
        assert_eq!(rate.value, Value::Int(1));
        let (dur_key, _) = &items[0].entries().unwrap()[1];
        assert_eq!(dur_key.line, 5);
    }

    #[test]
    fn scalars_keep_their_yaml_types() {
        let doc = parse_document(
            "t.yaml",
            "a: inf\nb: none\nc: ~\nd: 0.5\ne: \"99,100\"\nf: true\ng: -1\nh:\n",
        )
        .unwrap();
        let get = |k: &str| doc.get(k).unwrap().value.clone();
        assert_eq!(get("a"), Value::Str("inf".into()));
        assert_eq!(get("b"), Value::Str("none".into()));
        assert_eq!(get("c"), Value::Null);
        assert_eq!(get("d"), Value::Float(0.5));
        assert_eq!(get("e"), Value::Str("99,100".into()));
        assert_eq!(get("f"), Value::Bool(true));
        assert_eq!(get("g"), Value::Int(-1));
        assert_eq!(get("h"), Value::Null);
    }

    #[test]
    fn broken_yaml_reports_file_and_line() {
        let err = parse_document("bad.yaml", "a: 1\nb: [1, 2\nc: 3\n").unwrap_err();
        let msg = err.to_string();
        assert!(msg.starts_with("bad.yaml"), "{msg}");
        assert!(matches!(err, WorkloadError::Yaml { .. }), "{err:?}");
    }

    #[test]
    fn empty_document_is_null() {
        assert!(
            parse_document("e.yaml", "# only a comment\n")
                .unwrap()
                .is_null()
        );
    }
}
