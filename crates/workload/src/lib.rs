//! llmbench-workload: what a run is asked to do. Profile templates rendered ([`profile`]), each tool's dialect
//! read into one workload model with its parse-time limits ([`workload`]), and what the run sends built from it:
//! prompts ([`prompts`]), multi-turn
//! conversations ([`conversations`], [`lmbench`]), request bodies ([`request`]) and the run's memory estimate
//! ([`limits`]). Pure of the network but for tokenizer downloads; it imports no other launcher crate.
#![forbid(unsafe_code)]

pub mod conversations;
pub mod limits;
pub mod lmbench;
pub mod profile;
pub mod prompts;
pub mod request;
pub mod workload;
