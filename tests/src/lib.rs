//! End-to-end test support for llmbench: a real etcd + kube-apiserver control plane on loopback ports, a test
//! kubelet that runs the pods scheduled on it, our binaries, and llm-d-inference-sim as the stack.
#![forbid(unsafe_code)]

pub mod browser;
pub mod cluster;
pub mod control_plane;
pub mod kubelet;
pub mod node;
pub mod processes;

pub use control_plane::{BUILD_HINT, ControlPlane, HarnessError, Tool, Tools, e2e_disabled};
pub use kubelet::{KubeletConfig, KubeletError, TestKubelet};
pub use processes::{InferenceSim, LlmbenchSim, ProcessError, free_port, workspace_binary};
