//! `llmbench run --harness fmperf`: llm-d-benchmark's fmperf profiles (fmperf's `LMBenchmarkWorkload`), run as
//! LMBenchmark's multi-round QA runs them ([`llmbench_workload::workload::fmperf`] for the profile, [`llmbench_workload::lmbench`] for
//! the user sessions, [`llmbench_engine::engine::lmbench`] for the wire), with LMBenchmark's summary CSV per QPS value
//! (`LMBench_long_input_output_{qps}.csv`, `LMBench_short_input_qps{qps}.csv`, the names llm-d-benchmark's
//! `fmperf-analyze_results.py` globs as `LMBench*.csv`) beside the usual results.
//!
//! Every question carries upstream's `x-user-id` header. Not reproduced: the second, non-streaming request upstream sends to learn the token
//! counts when a stream's last chunk carries no `usage` (with `usage` missing, llmbench writes 0 as upstream would
//! before that fallback).

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use super::runner::{RunOutcome, Runner};
use super::{Execution, RunContext, RunError};
use llmbench_engine::engine::lmbench::LmBenchStage;
use llmbench_engine::engine::{self, Requests};
use llmbench_report::report::ReportOptions;
use llmbench_workload::lmbench::{SummaryRow, summary_csv};
use llmbench_workload::workload::parse_fmperf;

/// An fmperf run: LMBenchmark's multi-round QA users, one step loop per QPS value.
pub(crate) struct FmperfRun;

impl Runner for FmperfRun {
    async fn run(self, context: &mut RunContext<'_>) -> Result<RunOutcome, RunError> {
        let (workload, warnings) = parse_fmperf(context.template_name, context.rendered)?;
        context.note_warnings(&warnings);
        if context.args.shard.count > 1 {
            // Every user of a QPS value belongs to one step loop; split, each launcher would run its own users.
            return Err(RunError::Unsupported(
                "fmperf runs on one launcher: --shard (parallelism) must be 0/1".to_owned(),
            ));
        }
        let request_model = context.request_model(workload.api.model.clone())?;
        let preflight = context.preflight(&workload.api, &request_model).await?;
        let stages: Vec<Arc<LmBenchStage>> = workload
            .stages
            .iter()
            .map(|s| {
                Arc::new(LmBenchStage {
                    warmup: s.warmup.clone(),
                    run: s.run.clone(),
                    api: workload.api.kind,
                    model: request_model.clone(),
                    summary: Mutex::new(None),
                })
            })
            .collect();
        let engine_stages = stages
            .iter()
            .zip(&workload.stages)
            .map(|(stage, profile)| engine::Stage {
                plan: engine::StagePlan::LmBench(Arc::clone(stage)),
                requested_rate: Some(profile.run.qps),
                errors: engine::ErrorLimits::default(),
            })
            .collect();
        let tokenizer_spec = context
            .tokenizer_spec(None)
            .unwrap_or_else(|_| llmbench_text::tokenizer::BUILTIN.to_owned());
        let executed = context
            .execute(Execution {
                api: &workload.api,
                request_model,
                tokenizer_spec,
                stages: context.shard(engine_stages, &[])?,
                interval: workload.pause,
                requests: Requests::Fixed(Arc::from([])),
                warmup: None,
                request_timeout: None,
                max_concurrency: None,
                report: ReportOptions::default(),
                // The answers join the users' histories.
                keep_text: true,
                preflight: Some(preflight),
                stage_requests: None,
                prime: None,
            })
            .await?;
        let t0_unix_s = executed.meta.t0_unix_ns as f64 / 1e9;
        let outcome = context.finish(executed)?;
        for (stage, profile) in stages.iter().zip(&workload.stages) {
            let rows = stage
                .summary
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
            // A stage the run stopped before has no summary, as upstream writes none for a killed invocation.
            if let Some(rows) = rows {
                let name = workload.scenario.csv_name(&profile.qps_text);
                write_csv(&outcome.dir.join(name), &on_unix_clock(rows, t0_unix_s))?;
            }
        }
        Ok(outcome)
    }
}

/// Upstream's `launch_time` / `finish_time` are `time.time()`: run-clock seconds plus the run's start.
fn on_unix_clock(mut rows: Vec<SummaryRow>, t0_unix_s: f64) -> Vec<SummaryRow> {
    for row in &mut rows {
        row.answered.launch_time += t0_unix_s;
        row.answered.finish_time += t0_unix_s;
    }
    rows
}

fn write_csv(path: &Path, rows: &[SummaryRow]) -> Result<(), RunError> {
    std::fs::write(path, summary_csv(rows)).map_err(|source| RunError::WriteOutput {
        path: path.to_owned(),
        source,
    })
}
