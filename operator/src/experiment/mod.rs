//! The BenchmarkExperiment's pure core: validation and naming of its runs, the scheduling decision, the status
//! and plan file derived from its runs, and the HTTP hooks called between runs. The experiment
//! reconciler reads the cluster, calls these and applies.

pub(crate) mod hooks;
pub(crate) mod schedule;
pub(crate) mod status;
pub(crate) mod validate;
