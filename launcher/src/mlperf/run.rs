//! `llmbench run --harness mlperf`: LoadGen's settings and schedule on our engine, then LoadGen's verdict beside
//! the usual results (`mlperf_log_summary.txt`, `mlperf_verdict.json`) — or, in accuracy mode, every sample's
//! generated text scored with ROUGE (`mlperf_accuracy.json`).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::data::{DataError, DatasetOptions, Prompt, load_dataset};
use crate::engine::PreparedRequest;
use crate::metrics::RunVerdict;
use crate::mlperf::{
    MlperfError, MlperfSettings, Mode, RunTimes, UserConf, Verdict, build_schedule, evaluate,
    parse_settings, rouge,
};
use crate::report::ReportOptions;
use crate::request::{BodySettings, prepare};
use crate::run::{Executed, Execution, RunContext, RunError, RunOutcome};
use crate::tokenizer::{HubOptions, load_tokenizer};
use crate::workload::ParseOptions;

/// The verdict files, beside summary.json.
pub const SUMMARY_TXT: &str = "mlperf_log_summary.txt";
pub const VERDICT_JSON: &str = "mlperf_verdict.json";
/// Accuracy mode's ROUGE scores and target check.
pub const ACCURACY_JSON: &str = "mlperf_accuracy.json";

pub(crate) async fn run(
    context: &mut RunContext<'_>,
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
    context.note_warnings(&parsed.warnings);
    let settings = parsed.settings;
    if context.args.shard.count > 1 {
        // LoadGen's schedule and its sample order belong to one issuer; each shard would be judged alone.
        return Err(RunError::Unsupported(
            "mlperf runs on one launcher: --shard (parallelism) must be 0/1".to_owned(),
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
    let body = BodySettings::new(
        &settings.server,
        request_model.clone(),
        crate::request::BodyStyle::InferencePerf,
    );
    let prepared: Vec<PreparedRequest> = samples.iter().map(|p| prepare(p, &body)).collect();
    let requests: Arc<[PreparedRequest]> = schedule
        .samples
        .iter()
        .map(|&i| prepared[i].clone())
        .collect();

    let mut executed = context
        .execute(Execution {
            api: &settings.server,
            request_model,
            tokenizer_spec,
            stages: context.shard(schedule.stages, &[])?,
            interval: Duration::ZERO,
            requests: crate::engine::Requests::Fixed(requests),
            warmup: None,
            request_timeout: None,
            max_concurrency: None,
            report: ReportOptions::default(),
            keep_text: settings.mode == Mode::AccuracyOnly,
        })
        .await?;
    if settings.mode == Mode::AccuracyOnly {
        return accuracy(
            context,
            &settings,
            &samples,
            &schedule.samples,
            schedule.measured_stage,
            executed,
        );
    }

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
    // The verdict joins the summary (and the operator's SLOMet condition through the compact summary).
    executed.summary.verdict = Some(run_verdict(&verdict));
    let mut outcome = context.finish(executed)?;
    verdict.write_summary_txt(&outcome.dir.join(SUMMARY_TXT))?;
    verdict.write_json(&outcome.dir.join(VERDICT_JSON))?;
    outcome.mlperf = Some(verdict);
    Ok(outcome)
}

/// Accuracy mode: every sample's generated text scored with ROUGE against its reference `output`, and checked
/// against the accuracy target (a fraction of the model's reference scores).
fn accuracy(
    context: &RunContext<'_>,
    settings: &MlperfSettings,
    samples: &[Prompt],
    issued: &[usize],
    measured_stage: u32,
    mut executed: Executed,
) -> Result<RunOutcome, RunError> {
    let mut predictions = Vec::with_capacity(executed.records.len());
    let mut references = Vec::with_capacity(executed.records.len());
    let mut unscored = 0usize;
    // Warm-up answers are not scored.
    for record in executed
        .records
        .iter()
        .filter(|r| r.stage == measured_stage)
    {
        let reference = usize::try_from(record.id)
            .ok()
            .and_then(|id| issued.get(id))
            .and_then(|&sample| samples.get(sample))
            .and_then(|s| s.output.clone());
        match (record.error.is_none(), reference) {
            (true, Some(reference)) => {
                predictions.push(record.text.as_deref().cloned().unwrap_or_default());
                references.push(reference);
            }
            _ => unscored += 1,
        }
    }
    let scores = rouge::score(&predictions, &references);
    let check = settings
        .rouge_reference
        .map(|reference| scores.check(reference, settings.accuracy_target));
    let report = serde_json::json!({
        "model": settings.model,
        "mode": "AccuracyOnly",
        "scores": scores,
        "unscored_samples": unscored,
        "target": check,
    });
    let mut failed_checks = Vec::new();
    if check.is_some_and(|c| !c.passed) {
        failed_checks.push("rouge".to_owned());
    }
    if unscored > 0 {
        failed_checks.push("unscored_samples".to_owned());
    }
    let passed = failed_checks.is_empty();
    executed.summary.verdict = Some(RunVerdict {
        by: "mlperf-accuracy".to_owned(),
        passed,
        result: format!(
            "{} (ROUGE-1 {:.4}, ROUGE-2 {:.4}, ROUGE-L {:.4})",
            if passed { "PASS" } else { "FAIL" },
            scores.rouge1,
            scores.rouge2,
            scores.rouge_l
        ),
        failed_checks,
    });
    let mut outcome = context.finish(executed)?;
    let path = outcome.dir.join(ACCURACY_JSON);
    std::fs::write(&path, format!("{report:#}\n")).map_err(|source| RunError::WriteOutput {
        path: path.clone(),
        source,
    })?;
    outcome.accuracy = Some(scores);
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
        ("failed_queries", verdict.failed_queries == 0),
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
