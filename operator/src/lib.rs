//! The llmbench operator: a BenchmarkRun becomes a rendered ConfigMap, a workload PVC and launcher pods, and their
//! results come back into its status; a BenchmarkExperiment becomes one owned BenchmarkRun per treatment and
//! repeat, a comparison table in its status and comparison files on the volume. Pure builders here make every
//! desired object; the reconcilers only read, call them and apply.
#![forbid(unsafe_code)]

pub mod builders;
mod duration;
pub mod experiment;
mod hook_call;
pub mod leader;
pub mod metrics;
pub mod rbac;
pub mod reconcile;
pub mod resolve;
pub mod server;
pub mod stack;
pub mod status;
pub mod summary;
