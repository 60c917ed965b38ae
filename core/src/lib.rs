//! llmbench's core, with no Kubernetes dependency: the profile renderer that the operator and `llmbench render`
//! share, the bundled profile library, the harness names, the SLO capacity search's spec and answer, the shard
//! release protocol, the vLLM startup-log reader of the nop harness (`vllm_log`), and the summary contract (`llmbench.summary/v1`) that the launcher writes and the operator
//! reads. `llmbench-api` re-exports all of it at its old paths and embeds the summary types in the CRDs.
#![forbid(unsafe_code)]

pub mod calendar;
pub mod capacity;
pub mod experiment;
pub mod fnv;
pub mod go_duration;
pub mod harness;
pub mod launcher_command;
pub mod library;
pub mod percentile;
pub mod release;
pub mod render;
pub mod results_log;
pub mod slo;
pub mod stack_info;
pub mod summary;
pub mod vllm_log;

pub use harness::Harness;
pub use library::{BuiltinProfile, LibraryError};
pub use render::{Override, RenderError, render_profile};
