//! Limits on what a profile may ask for.
//!
//! Every figure a profile sets is checked at parse time against a limit chosen generously above any real
//! workload, so an absurd value — a rate of 1e12, a two-billion-token prompt, a duration of `u64::MAX` seconds —
//! is refused with an error naming the key, the value and the limit, instead of aborting the process on an
//! allocation sized from it, or running for centuries. The run's memory estimate, made from the parsed
//! workload, is the top-level `limits` module's.

use std::time::Duration;

use super::WorkloadError;

/// Requests per second. No single OpenAI-compatible endpoint takes a million requests a second; a larger figure
/// is a typo (an extra zero group, milliseconds for seconds), and it would ask for more send times than a
/// schedule can hold.
pub const MAX_RATE: f64 = 1_000_000.0;
/// Requests of one closed-loop stage (`num_requests`, guidellm `max_requests`). A billion requests at a thousand a
/// second is eleven days of traffic; the per-request records of such a stage alone would need hundreds of GB.
pub const MAX_REQUESTS: u64 = 1_000_000_000;
/// Send times of one open-loop stage, all computed before the stage starts (16 bytes each): the schedule's own cap,
/// [`super::MAX_ARRIVALS`], which a profile must stay under rather than be silently cut to.
pub const MAX_ARRIVALS: u64 = super::MAX_ARRIVALS;
/// Tokens of one prompt or one answer. The longest context windows of 2026 are a few million tokens; ten million
/// bounds a prompt's text at about 80 MB.
pub const MAX_TOKENS: u64 = 10_000_000;
/// One stage's (or one pause's) duration: 30 days. Longer soak tests are a sequence of runs.
pub const MAX_DURATION: Duration = llmbench_core::capacity::MAX_POINT_DURATION;
/// Requests in flight at once. Each costs a task and a connection (about 5 KiB); a million is 5 GB and far more
/// sockets than one launcher pod can open.
pub const MAX_CONCURRENCY: u64 = 1_000_000;
/// Stages of one run (inference-perf `stages[]`, guidellm rate lists and `benchmarks[]`, sweep sizes).
pub const MAX_STAGES: u64 = 10_000;
/// Distinct shared prefixes (guidellm `prefix_count`, inference-perf `num_groups`): each is synthesised and kept
/// for the whole run.
pub const MAX_PREFIXES: u64 = 1_000_000;
/// Prompts a profile asks to pre-generate (guidellm `samples`, inference-perf `total_count`, shared-prefix
/// groups × prompts per group). llmbench builds at most `prompts::MAX_PROMPTS` and cycles through them, except for shared
/// prefixes, whose every prompt is built.
pub const MAX_SAMPLES: u64 = 10_000_000;
/// Turns of one synthetic conversation.
pub const MAX_TURNS: u64 = 10_000;

/// One of the parse-time limits, with what it bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Limit {
    Rate,
    Requests,
    Arrivals,
    Tokens,
    Duration,
    Concurrency,
    Stages,
    Prefixes,
    Samples,
    Turns,
}

impl Limit {
    fn max(self) -> f64 {
        match self {
            Limit::Rate => MAX_RATE,
            Limit::Requests => MAX_REQUESTS as f64,
            Limit::Arrivals => MAX_ARRIVALS as f64,
            Limit::Tokens => MAX_TOKENS as f64,
            Limit::Duration => MAX_DURATION.as_secs_f64(),
            Limit::Concurrency => MAX_CONCURRENCY as f64,
            Limit::Stages => MAX_STAGES as f64,
            Limit::Prefixes => MAX_PREFIXES as f64,
            Limit::Samples => MAX_SAMPLES as f64,
            Limit::Turns => MAX_TURNS as f64,
        }
    }

    fn what(self) -> &'static str {
        match self {
            Limit::Rate => "requests/s",
            Limit::Requests => "requests per stage",
            Limit::Arrivals => "send times per stage (computed before the stage starts)",
            Limit::Tokens => "tokens per prompt or answer",
            Limit::Duration => "seconds (30 days)",
            Limit::Concurrency => "requests in flight",
            Limit::Stages => "stages per run",
            Limit::Prefixes => "distinct shared prefixes",
            Limit::Samples => "pre-generated prompts",
            Limit::Turns => "turns per conversation",
        }
    }
}

/// Why `value` of the key at `at` is refused, or `Ok` when it is within `limit`.
pub(crate) fn check(
    ctx: &super::reader::Ctx,
    at: &super::reader::At<'_>,
    limit: Limit,
    value: f64,
) -> Result<(), WorkloadError> {
    if value <= limit.max() {
        return Ok(());
    }
    Err(at.invalid(ctx, exceeded(limit, value)))
}

/// The message of a refused figure.
pub(crate) fn exceeded(limit: Limit, value: f64) -> String {
    format!(
        "{} is above llmbench's limit of {} {}; no real workload needs more, so this is taken for a mistake",
        figure(value),
        figure(limit.max()),
        limit.what()
    )
}

/// A figure as a person writes it: whole numbers without a fraction, huge ones in exponent form.
fn figure(v: f64) -> String {
    if v.abs() >= 1e15 {
        format!("{v:e}")
    } else if v.fract() == 0.0 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_name_the_value_and_the_limit() {
        assert_eq!(
            exceeded(Limit::Rate, 1e12),
            "1000000000000 is above llmbench's limit of 1000000 requests/s; no real workload needs more, so this \
             is taken for a mistake"
        );
        assert!(exceeded(Limit::Tokens, 2.5e9).contains("limit of 10000000 tokens"));
        assert!(exceeded(Limit::Duration, 1.8e19).contains("1.8e19"));
    }
}
