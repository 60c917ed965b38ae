//! llmbench: the load generator behind `llmbench run`, the profile renderer front end, and the embedded
//! vLLM-compatible simulator behind `llmbench sim`.
#![forbid(unsafe_code)]

pub mod engine;
pub mod metrics;
pub mod plan;
pub mod profile;
pub mod progress;
pub mod record;
pub mod sim;
pub mod sizing;
pub mod timer;
pub mod workload;
