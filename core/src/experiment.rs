//! The experiment contracts between the launcher and the operator (`experiment.json`, hook calls, comparison
//! figures), by schema version.

pub mod v1;
