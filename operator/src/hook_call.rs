//! One hook call and how it went: the record an experiment keeps of each HTTP call it made on the stack before a
//! run (the experiment's hooks), written into the run's annotation by the builders and read back into the
//! experiment's status and plan file.

use serde::{Deserialize, Serialize};

/// One hook call and how it went: an HTTP status, or the error that kept it from getting one. The same shape as
/// `experiment.json`'s `runs[].hooks[]`, so the collector's comparison carries it too.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct HookCall {
    pub name: String,
    pub method: String,
    pub url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl HookCall {
    /// Whether the call got a 2xx answer.
    pub fn succeeded(&self) -> bool {
        self.status.is_some_and(|s| (200..300).contains(&s))
    }

    /// The line in `status.runs[].hooks`: `reset-prefix-cache: 200`, `warm: error: connection refused`.
    pub fn record(&self) -> String {
        match (&self.status, &self.error) {
            (Some(status), _) => format!("{}: {status}", self.name),
            (None, Some(error)) => format!("{}: error: {error}", self.name),
            (None, None) => format!("{}: no answer", self.name),
        }
    }
}
