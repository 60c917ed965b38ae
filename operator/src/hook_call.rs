//! One hook call and how it went: the record an experiment keeps of each HTTP call it made on the stack before a
//! run, typed once in core with experiment.json (`llmbench_core::experiment::v1`).

pub use llmbench_core::experiment::v1::HookCall;
