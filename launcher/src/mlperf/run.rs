//! `llmbench run --harness mlperf`: LoadGen's settings and schedule on our engine, then LoadGen's verdict beside
//! the usual results (`mlperf_log_summary.txt`, `mlperf_verdict.json`).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::data::{DataError, DatasetOptions, load_dataset};
use crate::engine::PreparedRequest;
use crate::metrics::{RunVerdict, write_compact_summary, write_summary_json};
use crate::mlperf::{
    MlperfError, Mode, RunTimes, UserConf, Verdict, build_schedule, evaluate, parse_settings,
};
use crate::report::ReportOptions;
use crate::request::{BodySettings, prepare};
use crate::run::{Execution, RunContext, RunError, RunOutcome};
use crate::tokenizer::{HubOptions, load_tokenizer};
use crate::workload::ParseOptions;

/// The verdict files, beside summary.json.
pub const SUMMARY_TXT: &str = "mlperf_log_summary.txt";
pub const VERDICT_JSON: &str = "mlperf_verdict.json";

pub(crate) async fn run(
    context: &RunContext<'_>,
    options: &ParseOptions,
) -> Result<RunOutcome, RunError> {
    let parsed = parse_settings(context.template_name, context.rendered, None, options)?;
    let parsed = match &parsed.settings.user_conf_path {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|source| RunError::ReadInput {
                what: "the user.conf the profile names",
                path: path.into(),
                source,
            })?;
            let conf = UserConf {
                file: path,
                text: &text,
            };
            parse_settings(context.template_name, context.rendered, Some(conf), options)?
        }
        None => parsed,
    };
    for warning in &parsed.warnings {
        tracing::warn!("{warning}");
    }
    let settings = parsed.settings;
    if settings.mode == Mode::AccuracyOnly {
        return Err(RunError::Unsupported(
            "mlperf mode AccuracyOnly: llmbench does not keep generated texts yet, so ROUGE cannot be scored in a \
             run; use PerformanceOnly"
                .to_owned(),
        ));
    }
    let dataset = settings.dataset_path.clone().ok_or_else(|| MlperfError::Invalid {
        file: context.template_name.to_owned(),
        line: None,
        key: "dataset_path".to_owned(),
        problem: "an MLPerf run needs a dataset (JSON, JSONL or CSV with `input` or `tok_input`, and `output`)"
            .to_owned(),
    })?;

    let tokenizer_spec = context.tokenizer_spec(None)?;
    let tokenizer = load_tokenizer(&tokenizer_spec, &HubOptions::from_env()).await?;
    let samples = load_dataset(
        Path::new(&dataset),
        &tokenizer,
        &DatasetOptions {
            output_tokens: Some(settings.max_tokens),
            ..DatasetOptions::default()
        },
    )
    .map_err(|e: DataError| RunError::from(e))?
    .into_inner();
    let schedule = build_schedule(&settings, samples.len())?;

    let request_model = context.request_model(settings.server.model.clone())?;
    let body = BodySettings::new(&settings.server, request_model.clone());
    let prepared: Vec<PreparedRequest> = samples.iter().map(|p| prepare(p, &body)).collect();
    let requests: Arc<[PreparedRequest]> = schedule
        .samples
        .iter()
        .map(|&i| prepared[i].clone())
        .collect();

    let executed = context
        .execute(Execution {
            api: &settings.server,
            request_model,
            tokenizer_spec,
            stages: schedule.stages.clone(),
            interval: Duration::ZERO,
            requests,
            request_timeout: None,
            max_concurrency: None,
            report: ReportOptions::default(),
        })
        .await?;

    let measured = schedule.measured_stage as usize;
    let times = executed.stage_times.get(measured).ok_or_else(|| {
        RunError::Unsupported(format!(
            "the engine reported no times for the measured stage {measured}"
        ))
    })?;
    let verdict: Verdict = evaluate(
        &settings,
        &executed.records,
        &RunTimes {
            measured_stage: schedule.measured_stage,
            start_ns: times.start_ns,
            end_ns: times.end_ns,
        },
    );
    let mut outcome = executed.outcome;
    verdict.write_summary_txt(&outcome.dir.join(SUMMARY_TXT))?;
    verdict.write_json(&outcome.dir.join(VERDICT_JSON))?;
    // The verdict joins the summary (and the operator's SLOMet condition through the compact summary).
    outcome.summary.verdict = Some(run_verdict(&verdict));
    write_summary_json(&outcome.dir.join("summary.json"), &outcome.summary)?;
    if let Some(path) = &context.args.summary_file {
        write_compact_summary(path, &outcome.summary)?;
    }
    outcome.mlperf = Some(verdict);
    Ok(outcome)
}

fn run_verdict(verdict: &Verdict) -> RunVerdict {
    let checks = &verdict.checks;
    let failed_checks = [
        (
            "performance_constraints",
            checks.performance_constraints.unwrap_or(true),
        ),
        ("min_duration", checks.min_duration),
        ("min_queries", checks.min_queries),
        ("early_stopping", checks.early_stopping),
    ]
    .into_iter()
    .filter(|(_, passed)| !passed)
    .map(|(name, _)| name.to_owned())
    .collect();
    RunVerdict {
        by: "mlperf".to_owned(),
        passed: verdict.valid,
        result: if verdict.valid { "VALID" } else { "INVALID" }.to_owned(),
        failed_checks,
    }
}
