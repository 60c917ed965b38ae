//! `capacity_search:`, the one profile key every dialect shares: llmbench's SLO capacity search, written at the
//! root of any profile (inference-perf, guidellm, vllm-benchmark flag maps, inferencemax). It is taken out of the
//! document before the dialect parser sees it, so no tool's own keys are touched.
//!
//! ```yaml
//! capacity_search:
//!   load: rate              # or concurrency
//!   slo: ["ttft_p99<=500ms", "failure_rate<=1%"]
//!   start: 1                # optional, defaults in llmbench_core::capacity::CapacitySearch
//!   max: 256
//!   growth: 2
//!   tolerance: 0.05
//!   min_duration: 30s
//!   min_requests: 200
//!   max_points: 20
//! ```

use llmbench_core::capacity::{CapacitySearch, CapacitySearchSpec, LoadAxis};

use super::WorkloadError;
use super::reader::{At, Ctx, MapReader};
use super::yaml::{Node, Value};

/// The profile key.
pub const KEY: &str = "capacity_search";

/// Removes `capacity_search` from the root of `doc` and parses it.
/// The spec is returned as written (run.json records it) once `CapacitySearch::try_from` has accepted it.
pub(crate) fn take(
    ctx: &mut Ctx,
    doc: &mut Node,
) -> Result<Option<CapacitySearchSpec>, WorkloadError> {
    let Value::Map(entries) = &mut doc.value else {
        return Ok(None);
    };
    let Some(index) = entries.iter().position(|(k, _)| k.name == KEY) else {
        return Ok(None);
    };
    let (key, node) = entries.remove(index);
    let at = At::new(&node, KEY, key.line);
    let mut map = at.map(ctx)?;
    let spec = read_spec(ctx, &mut map)?;
    map.finish(ctx, &[]);
    CapacitySearch::try_from(&spec)
        .map(|_| Some(spec))
        .map_err(|e| at.invalid(ctx, e.to_string()))
}

fn read_spec(ctx: &Ctx, map: &mut MapReader<'_>) -> Result<CapacitySearchSpec, WorkloadError> {
    let load_at = map.require(ctx, "load", "what the search varies: rate or concurrency")?;
    let load: LoadAxis =
        load_at
            .str(ctx)?
            .parse()
            .map_err(|e: llmbench_core::capacity::ObjectiveError| {
                load_at.invalid(ctx, e.to_string())
            })?;
    let slo_at = map.require(ctx, "slo", "the objectives, e.g. [\"ttft_p99<=500ms\"]")?;
    let slo = match &slo_at.node.value {
        Value::Str(one) => vec![one.clone()],
        _ => slo_at
            .seq(ctx)?
            .iter()
            .map(|item| item.str(ctx).map(str::to_owned))
            .collect::<Result<Vec<_>, _>>()?,
    };
    // Each objective is checked here so its error carries the line of the list.
    for objective in &slo {
        objective
            .parse::<llmbench_core::capacity::Objective>()
            .map_err(|e| slo_at.invalid(ctx, e.to_string()))?;
    }
    let number = |map: &mut MapReader<'_>, key: &str| -> Result<Option<f64>, WorkloadError> {
        map.get(key).map(|at| at.positive_f64(ctx)).transpose()
    };
    let start = number(map, "start")?;
    let max = number(map, "max")?;
    let growth = number(map, "growth")?;
    let tolerance = number(map, "tolerance")?;
    let min_duration = map
        .get("min_duration")
        .map(|at| match &at.node.value {
            Value::Int(_) | Value::Float(_) => at.positive_f64(ctx).map(|s| format!("{s}s")),
            _ => at.str(ctx).map(str::to_owned),
        })
        .transpose()?;
    let min_requests = map
        .get("min_requests")
        .map(|at| at.positive_u64(ctx))
        .transpose()?;
    let max_points = map
        .get("max_points")
        .map(|at| {
            at.positive_u64(ctx).and_then(|n| {
                u32::try_from(n).map_err(|_| at.invalid(ctx, "at most 4294967295 points"))
            })
        })
        .transpose()?;
    Ok(CapacitySearchSpec {
        load,
        slo,
        start,
        max,
        growth,
        tolerance,
        min_duration,
        min_requests,
        max_points,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::yaml::parse_document;

    fn take_from(text: &str) -> (Result<Option<CapacitySearch>, WorkloadError>, Node, Ctx) {
        let mut doc = parse_document("p.yaml", text).unwrap();
        let mut ctx = Ctx::new("p.yaml");
        let result = take(&mut ctx, &mut doc)
            .map(|spec| spec.map(|s| CapacitySearch::try_from(&s).unwrap()));
        (result, doc, ctx)
    }

    #[test]
    fn the_key_is_taken_out_and_parsed_with_defaults() {
        let (search, doc, ctx) = take_from(
            "load: {type: constant}\ncapacity_search:\n  load: concurrency\n  slo: [\"ttft_p99<=500ms\", \"failure_rate<=1%\"]\n  start: 2\n  min_duration: 5\n",
        );
        let search = search.unwrap().unwrap();
        assert_eq!(search.load, LoadAxis::Concurrency);
        assert_eq!(search.objectives.len(), 2);
        assert_eq!((search.start, search.max), (2.0, 1024.0));
        assert_eq!(search.min_duration, std::time::Duration::from_secs(5));
        assert!(doc.get(KEY).is_none() && doc.get("load").is_some());
        assert!(ctx.warnings.is_empty());
    }

    #[test]
    fn a_bad_search_names_the_key_and_line() {
        let (err, _, _) =
            take_from("x: 1\ncapacity_search:\n  load: rate\n  slo: [\"latency<=5ms\"]\n");
        let err = err.unwrap_err().to_string();
        assert!(
            err.contains("p.yaml:4") && err.contains("capacity_search.slo"),
            "{err}"
        );
        assert!(err.contains("names no metric"), "{err}");
        let (err, _, _) = take_from("capacity_search:\n  slo: [\"ttft_p99<=5ms\"]\n");
        assert!(
            err.unwrap_err()
                .to_string()
                .contains("`capacity_search.load` is required")
        );
        let (err, _, _) =
            take_from("capacity_search:\n  load: rate\n  slo: [\"ttft_p99<=5ms\"]\n  growth: 1\n");
        assert!(err.unwrap_err().to_string().contains("growth must be > 1"));
    }

    #[test]
    fn unknown_keys_inside_the_search_are_warned() {
        let (search, _, ctx) =
            take_from("capacity_search:\n  load: rate\n  slo: \"ttft_p99<=5ms\"\n  stepp: 3\n");
        assert!(search.unwrap().is_some());
        assert_eq!(ctx.warnings.len(), 1);
        assert!(ctx.warnings[0].to_string().contains("stepp"));
    }
}
