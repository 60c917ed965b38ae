//! End-to-end test support for llmbench: a real etcd + kube-apiserver control plane on loopback ports, and a test
//! kubelet that runs the pods scheduled on it.
#![forbid(unsafe_code)]

pub mod control_plane;
pub mod kubelet;

pub use control_plane::{BUILD_HINT, ControlPlane, HarnessError, Tool, Tools, e2e_disabled};
pub use kubelet::{KubeletConfig, KubeletError, TestKubelet};
