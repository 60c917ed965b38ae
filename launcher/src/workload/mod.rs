//! Workload profiles: each harness's rendered profile (YAML text) parsed into one internal
//! workload model, and each tool's arrival process turned into a schedule.
//!
//! Pure: the caller hands in the file name (for messages) and the text; nothing is read from
//! disk, the environment or the clock.
//!
//! ```text
//! parse_profile(harness, "sanity_random.yaml", text, &options) -> Parsed { workload, warnings }
//! schedule(&workload.stages[i], stage_seed(workload.seed, i))  -> Schedule
//! ```

mod error;
mod model;
mod schedule;
mod yaml;

pub use error::{HARNESS_NAMES, Warning, WarningKind, WorkloadError};
pub use model::*;
pub use schedule::{MAX_ARRIVALS, Schedule, schedule, stage_seed};

