//! The llmbench operator: a BenchmarkRun becomes a rendered ConfigMap, a workload PVC and launcher pods, and their
//! results come back into its status. Pure builders here make every desired object from a run; the reconciler
//! only reads, calls them and applies.
#![forbid(unsafe_code)]

pub mod builders;
pub mod leader;
pub mod metrics;
pub mod rbac;
pub mod reconcile;
pub mod resolve;
pub mod server;
pub mod status;
pub mod summary;
