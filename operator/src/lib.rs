//! The llmbench operator: a BenchmarkRun becomes a rendered ConfigMap, a workload PVC and launcher pods, and their
//! results come back into its status; a BenchmarkExperiment becomes one owned BenchmarkRun per treatment and
//! repeat, a comparison table in its status and comparison files on the volume. Pure builders here make every
//! desired object; the reconcilers only read, call them and apply.
#![forbid(unsafe_code)]

mod builders;
mod duration;
mod experiment;
mod hook_call;
mod leader;
mod metrics;
#[cfg(test)]
mod rbac;
mod reconcile;
mod resolve;
mod server;
mod stack;
mod status;
mod summary;

// What the operator binary wires together; everything else is the crate's own.
pub use builders::{FIELD_MANAGER, LAUNCHER_DEFAULTS_ENV, LauncherDefaults, LauncherSettings};
pub use duration::parse_duration;
pub use experiment::hooks::HOOK_TIMEOUT;
pub use leader::{LeaderElector, LeaseConfig, Timing, Work, lead};
pub use metrics::{DEFAULT_RUN_RESULTS_PER_NAMESPACE, Metrics};
pub use reconcile::retry::Retries;
pub use reconcile::{Context, DEFAULT_CONCURRENCY, run_controllers};
pub use server::{Health, router, serve};
