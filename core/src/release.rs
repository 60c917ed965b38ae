//! The release protocol between the operator and the launchers of a sharded run: one start instant for all shards.
//!
//! Each launcher of a run with `parallelism > 1` prepares everything it can before its clock starts (profile,
//! prompts, schedule, results directory), then serves `GET /ready` on its release port and waits. The operator polls
//! every shard's `/ready`; once all of them answer `waiting`, it POSTs the same [`ReleaseRequest`] — an instant on
//! the wall clock a short lead in the future — to every shard, and each starts its clock at that instant. This is
//! k6-operator's starter pattern (runners start paused and are released together over their REST API), chosen over
//! writing a start time into the apiserver because launchers then need no API credentials (their pods carry none),
//! and a release reaches every shard in one round trip rather than after a watch or a kubelet volume refresh.
//!
//! The release is idempotent: the first instant a launcher accepts is the one it keeps and reports, so an operator
//! that restarts between its POSTs reads the instant back from any released shard and sends that one to the rest.

use serde::{Deserialize, Serialize};

/// The launcher's release port: next to its live metrics port (9464).
pub const RELEASE_PORT: u16 = 9465;
/// The name of the release container port.
pub const RELEASE_PORT_NAME: &str = "release";
/// `GET`: the launcher's [`ReadyAnswer`].
pub const READY_PATH: &str = "/ready";
/// `POST` a [`ReleaseRequest`]: start at that instant.
pub const RELEASE_PATH: &str = "/release";

/// Where a launcher is on its way to the start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "state")]
pub enum ReadyAnswer {
    /// Still building prompts or the schedule: not ready to be released.
    Preparing,
    /// Ready; waits for its release.
    Waiting,
    /// Released: it starts (or started) its clock at `at_unix_ns`.
    Released { at_unix_ns: u64 },
}

/// The instant every shard starts at, in nanoseconds since the Unix epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReleaseRequest {
    pub at_unix_ns: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_and_requests_have_a_flat_json_shape() {
        let released = ReadyAnswer::Released { at_unix_ns: 7 };
        assert_eq!(
            serde_json::to_string(&released).unwrap(),
            r#"{"state":"released","at_unix_ns":7}"#
        );
        assert_eq!(
            serde_json::to_string(&ReadyAnswer::Waiting).unwrap(),
            r#"{"state":"waiting"}"#
        );
        let request: ReleaseRequest = serde_json::from_str(r#"{"at_unix_ns":12}"#).unwrap();
        assert_eq!(request.at_unix_ns, 12);
    }
}
