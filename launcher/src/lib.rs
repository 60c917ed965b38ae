//! llmbench: the load generator behind `llmbench run`, its reports (`llmbench report`), the profile renderer
//! front end, the results dashboard (`llmbench dashboard`), and the embedded vLLM-compatible simulator behind
//! `llmbench sim`.
#![forbid(unsafe_code)]

pub mod comparison;
pub mod dashboard;
#[cfg(feature = "experiment")]
pub mod experiment;
mod plan;
pub mod profiles;
mod release;
pub mod results;
pub mod run;
pub mod sizing;
