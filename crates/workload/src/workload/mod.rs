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

mod aiperf;
mod aiperf_config;
mod aiperf_conversation;
mod aiperf_custom;
pub mod azure_trace;
pub mod capacity;
pub mod circuit_breaker;
mod error;
pub mod fmperf;
mod guidellm;
pub mod guidellm_replay;
mod inference_perf;
pub mod limits;
pub mod load_flags;
mod model;
pub mod mooncake;
pub mod otel_trace;
pub mod over_saturation;
pub mod reader;
mod schedule;
pub mod stage_meta;
mod vllm_bench;
pub mod yaml;

#[cfg(any(test, feature = "testing"))]
pub mod testing;
#[cfg(test)]
mod tests;

pub use error::{Warning, WarningKind, WorkloadError};
pub use model::*;
pub use schedule::{MAX_ARRIVALS, Schedule, schedule, stage_seed};

use reader::{Ctx, MapReader};

/// How to parse.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParseOptions {
    /// Reject the profile when it has unknown keys (`--strict`), listing all of them.
    pub strict: bool,
    /// Only warn about near misses (`--lenient`): an unknown key one edit from a key that changes the run is
    /// otherwise an error ([`WorkloadError::NearMisses`]).
    pub lenient: bool,
    /// Seed to use when the profile sets none (e.g. `--seed`, or the wall clock as the upstream
    /// wrappers do). Without it the tool's fixed default applies (see `SeedOrigin`).
    pub default_seed: Option<u64>,
}

/// A parsed profile and what was noticed along the way.
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed {
    pub workload: Workload,
    /// Unknown keys (and known keys llmbench does not act on), in document order.
    pub warnings: Vec<Warning>,
    /// llmbench's SLO capacity search (`capacity_search:` at the root of any dialect's profile).
    pub capacity: Option<llmbench_core::capacity::CapacitySearchSpec>,
}

/// Parses a rendered profile of `harness`. `file_name` only labels messages.
pub fn parse_profile(
    harness: Harness,
    file_name: &str,
    yaml: &str,
    options: &ParseOptions,
) -> Result<Parsed, WorkloadError> {
    let mut doc = yaml::parse_document(file_name, yaml)?;
    let mut ctx = Ctx::new(file_name);
    let capacity = capacity::take(&mut ctx, &mut doc)?;
    if capacity.is_some() && harness == Harness::Nop {
        return Err(WorkloadError::Invalid {
            file: file_name.to_string(),
            key: capacity::KEY.to_string(),
            line: None,
            problem: "the nop harness sends no load, so there is no capacity to search".to_string(),
        });
    }
    let workload = match harness {
        Harness::InferencePerf => inference_perf::parse(&mut ctx, &doc, options)?,
        Harness::Guidellm => guidellm::parse(&mut ctx, &doc, options)?,
        Harness::VllmBenchmark | Harness::Inferencemax => {
            vllm_bench::parse(&mut ctx, harness, &doc, options)?
        }
        Harness::Aiperf => aiperf::parse(&mut ctx, &doc, options)?,
        Harness::Nop => parse_nop(&mut ctx, &doc)?,
        Harness::Fmperf => {
            return Err(WorkloadError::Unsupported {
                file: file_name.to_string(),
                key: "harness".to_string(),
                line: None,
                feature: "the fmperf dialect through the common workload model (use `workload::parse_fmperf`: \
                          LMBenchmark's user sessions run on their own step loop)"
                    .to_string(),
            });
        }
        // LoadGen settings carry rules (seeds, query counts, validity) the common model has no place for;
        // they have their own parser and scheduler.
        Harness::Mlperf => {
            return Err(WorkloadError::Unsupported {
                file: file_name.to_string(),
                key: "harness".to_string(),
                line: None,
                feature: "the mlperf dialect through the common workload model (use `mlperf::parse_settings` \
                          and `mlperf::build_schedule`)"
                    .to_string(),
            });
        }
    };
    check_unknown_keys(harness, file_name, &ctx.warnings, options)?;
    for w in &ctx.warnings {
        tracing::debug!(warning = %w, "profile warning");
    }
    Ok(Parsed {
        workload,
        warnings: ctx.warnings,
        capacity,
    })
}

/// The rule for keys a dialect does not know: with `--strict` every one is an error; else a near miss of a key
/// that changes the run is an error unless `--lenient`; the rest are warnings.
pub(crate) fn check_unknown_keys(
    harness: Harness,
    file_name: &str,
    warnings: &[Warning],
    options: &ParseOptions,
) -> Result<(), WorkloadError> {
    let of_kind = |kinds: &[WarningKind]| -> Vec<Warning> {
        warnings
            .iter()
            .filter(|w| kinds.contains(&w.kind))
            .cloned()
            .collect()
    };
    if options.strict {
        let unknown = of_kind(&[WarningKind::UnknownKey, WarningKind::NearMiss]);
        if !unknown.is_empty() {
            return Err(WorkloadError::UnknownKeys {
                file: file_name.to_string(),
                keys: unknown,
            });
        }
    }
    if !options.lenient {
        let near = of_kind(&[WarningKind::NearMiss]);
        if !near.is_empty() {
            return Err(WorkloadError::NearMisses {
                file: file_name.to_string(),
                dialect: harness.as_str().to_string(),
                keys: near,
            });
        }
    }
    Ok(())
}

/// Parses an fmperf profile (`LMBenchmarkWorkload` keyword arguments); see [`fmperf`]. Every key is known or
/// refused, so the warnings only say what upstream itself ignores.
pub fn parse_fmperf(
    file_name: &str,
    yaml: &str,
) -> Result<(fmperf::FmperfWorkload, Vec<Warning>), WorkloadError> {
    let doc = yaml::parse_document(file_name, yaml)?;
    let mut ctx = Ctx::new(file_name);
    let workload = fmperf::parse(&mut ctx, &doc)?;
    Ok((workload, ctx.warnings))
}

/// `nop`: no traffic; `model_name` and `pvc_name` are descriptive.
fn parse_nop(ctx: &mut Ctx, doc: &yaml::Node) -> Result<Workload, WorkloadError> {
    let mut workload = Workload::empty(Harness::Nop, Dialect::Nop);
    if doc.is_null() {
        return Ok(workload);
    }
    let mut root = MapReader::root(ctx, doc)?;
    if let Some(f) = root.get("model_name") {
        workload.api.model = Some(f.str(ctx)?.to_string());
    }
    root.skip("pvc_name");
    root.finish(ctx, &[]);
    Ok(workload)
}
