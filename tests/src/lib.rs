//! End-to-end test support for llmbench: a real etcd + kube-apiserver control plane on loopback ports.
#![forbid(unsafe_code)]

pub mod control_plane;

pub use control_plane::{BUILD_HINT, ControlPlane, HarnessError, Tool, Tools, e2e_disabled};
