//! guidellm's trace replay (vllm-project/guidellm ee7a774): the `replay` profile (`benchmark/profiles/replay.py`,
//! `TraceReplayStrategy` in `scheduler/strategies.py`) over trace data (`data/deserializers/trace_common.py`,
//! `trace_minimal.py`).
//!
//! - **Data** `kind: trace_synthetic`: a local `.json`, `.jsonl` or `.csv` file whose rows carry a timestamp, a
//!   prompt token count and an output token count (columns `timestamp`, `input_length`, `output_length`, renamed
//!   by `timestamp_column`, `prompt_tokens_column`, `output_tokens_column`); every other column is ignored. Rows
//!   are sorted by timestamp (stably), `data_loader.samples` keeps the first N of them, and each row's offset is
//!   its timestamp minus the first row's. Each row becomes one synthetic prompt of exactly its prompt tokens
//!   (guidellm's `generate_token_ids` keeps the first N ids of the encoded text, a leading BOS among them) asking
//!   for its output tokens.
//! - **Profile** `kind: replay`: row i is sent at `time_scale × offset_i` after the stage starts (`time_scale`,
//!   default 1, > 0; before guidellm 0.8 `rate` was its alias). The replay ends when the trace is used up
//!   (guidellm's `requests_exhausted`) or at a `max_requests` / `max_duration` constraint, whichever comes first.
//!   The base profile's `rampup_duration` is accepted and, as in guidellm, does nothing.

use super::error::{WarningKind, WorkloadError};
use super::model::StageLimit;
use super::reader::{At, Ctx, MapReader};
use std::time::Duration;

/// A guidellm trace file (`kind: trace_synthetic`).
#[derive(Debug, Clone, PartialEq)]
pub struct GuidellmTrace {
    pub path: String,
    pub timestamp_column: String,
    pub prompt_tokens_column: String,
    pub output_tokens_column: String,
    /// `data_loader.samples` / `data_samples`: the first N rows after sorting (fewer is an error).
    pub samples: Option<u64>,
    /// `kind: mooncake`: each row's prompt is made of shared token blocks named by its hash ids.
    pub hash_blocks: Option<HashBlocks>,
}

/// guidellm's Mooncake format (`trace_mooncake.py`): `hash_ids_column` (`hash_ids`) lists each row's blocks of
/// `hash_id_block_size` (512) tokens, the last one holding the rest of its prompt tokens; a hash id seen again is
/// the same block.
#[derive(Debug, Clone, PartialEq)]
pub struct HashBlocks {
    pub column: String,
    pub block_size: u32,
}

/// `TraceDataArgs` of a `trace_synthetic` or (`mooncake`) `MooncakeTraceFormatArgs` data item (its `kind` already
/// read); the formats llmbench does not build are refused by the caller.
pub(crate) fn trace_data(
    ctx: &mut Ctx,
    m: &mut MapReader<'_>,
    mooncake: bool,
) -> Result<GuidellmTrace, WorkloadError> {
    let path_field = m.require(ctx, "path", "a trace names its `path`")?;
    let path = path_field.str(ctx)?.to_owned();
    let suffix = std::path::Path::new(&path)
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .unwrap_or_default();
    match suffix.as_str() {
        "json" | "jsonl" | "csv" | "parquet" => {}
        _ => {
            return Err(path_field.invalid(
                ctx,
                format!(
                    "`{path}` is no trace file guidellm loads (`load_dataset_from_file` takes .json, .jsonl, .csv \
                     and .parquet)"
                ),
            ));
        }
    }
    let mut column = |key: &str, default: &str| -> Result<String, WorkloadError> {
        match m.get(key) {
            Some(f) => Ok(f.str(ctx)?.to_owned()),
            None => Ok(default.to_owned()),
        }
    };
    let timestamp_column = column("timestamp_column", "timestamp")?;
    let prompt_tokens_column = column("prompt_tokens_column", "input_length")?;
    let output_tokens_column = column("output_tokens_column", "output_length")?;
    if let Some(f) = m.get("conversation_id_column").filter(|f| !f.is_null()) {
        return Err(f.unsupported(
            ctx,
            "`conversation_id_column` on a trace (guidellm then restarts the offsets at each conversation; llmbench \
             replays one timeline)",
        ));
    }
    if let Some(f) = m.get("load_kwargs")
        && !f.is_null()
        && !f.node.entries().is_some_and(<[_]>::is_empty)
    {
        return Err(f.unsupported(ctx, "Hugging Face loading arguments (`load_kwargs`)"));
    }
    let hash_blocks = if mooncake {
        let column = match m.get("hash_ids_column") {
            Some(f) => f.str(ctx)?.to_owned(),
            None => "hash_ids".to_owned(),
        };
        let block_size = match m.get("hash_id_block_size") {
            Some(f) => {
                let n = f.positive_u64(ctx)?;
                u32::try_from(n).map_err(|_| f.invalid(ctx, format!("{n} is too large")))?
            }
            None => 512,
        };
        Some(HashBlocks { column, block_size })
    } else {
        None
    };
    Ok(GuidellmTrace {
        path,
        timestamp_column,
        prompt_tokens_column,
        output_tokens_column,
        samples: None,
        hash_blocks,
    })
}

/// `ReplayProfileArgs.time_scale` (its alias `rate` before guidellm 0.8, a scalar or a one-item list): > 0.
pub(crate) fn time_scale(ctx: &mut Ctx, pm: &mut MapReader<'_>) -> Result<f64, WorkloadError> {
    let Some(f) = pm.get_any(&["time_scale", "rate"]) else {
        return Ok(1.0);
    };
    let one = match f.node.value {
        super::yaml::Value::Seq(_) => match f.stage_list(ctx)?.as_slice() {
            [one] => At::new(one.node, one.path.clone(), one.line),
            _ => return Err(f.invalid(ctx, "a replay has one time scale, not a list of them")),
        },
        _ => At::new(f.node, f.path.clone(), f.line),
    };
    one.positive_f64(ctx)
}

/// The replay profile's `rampup_duration`: guidellm accepts it on every profile and the trace strategy ignores it.
pub(crate) fn warn_rampup(ctx: &mut Ctx, pm: &MapReader<'_>, rampup: Duration, line: u32) {
    if !rampup.is_zero() {
        ctx.warn(
            &super::reader::join(&pm.path, "rampup_duration"),
            line,
            WarningKind::Ignored,
            "guidellm's trace replay sends each row at its own time; the ramp-up changes nothing",
        );
    }
}

/// The send times of a replay: row i at `time_scale × offsets[i]` (seconds), cut where guidellm's constraints
/// stop queuing — after `max_requests` requests, or once `max_duration` has passed (no request starts at or
/// after it).
pub fn send_times(offsets: &[f64], time_scale: f64, limit: &StageLimit) -> Vec<Duration> {
    let until = limit.duration.map_or(f64::INFINITY, |d| d.as_secs_f64());
    let most = limit.requests.map_or(usize::MAX, |n| n as usize);
    offsets
        .iter()
        .map(|offset| time_scale * offset)
        .take(most)
        .take_while(|at| *at < until)
        .map(Duration::from_secs_f64)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn send_times_scale_the_offsets_and_stop_at_the_first_limit() {
        let offsets = [0.0, 0.5, 1.25, 4.0];
        let secs = |v: Vec<Duration>| v.iter().map(Duration::as_secs_f64).collect::<Vec<_>>();
        assert_eq!(
            secs(send_times(&offsets, 2.0, &StageLimit::default())),
            vec![0.0, 1.0, 2.5, 8.0]
        );
        assert_eq!(
            secs(send_times(&offsets, 0.5, &StageLimit::requests(2))),
            vec![0.0, 0.25]
        );
        // 2.5 s is before 3 s; 8 s is not.
        assert_eq!(
            secs(send_times(
                &offsets,
                2.0,
                &StageLimit::duration(Duration::from_secs(3))
            )),
            vec![0.0, 1.0, 2.5]
        );
    }
}
