//! `llmbench run --harness mlperf`: LoadGen's settings and schedule on our engine, then LoadGen's verdict beside
//! the usual results (`mlperf_log_summary.txt`, `mlperf_log_detail.txt`, an empty `mlperf_log_accuracy.json`,
//! `mlperf_verdict.json`) — or, in accuracy mode, every sample's generated text scored with ROUGE
//! (`mlperf_accuracy.json`) and logged as token ids for the MLCommons accuracy scripts
//! (`mlperf_log_accuracy.json`, with `mlperf_log_detail.txt`).
//!
//! Token ids for the accuracy log: llmbench receives text, not ids, and does not tokenize on the request path.
//! After the run, each answer is encoded with the run's tokenizer (the model's `tokenizer.json`); the scripts
//! decode those ids with the same tokenizer and `skip_special_tokens`, which gives the answer's text back for
//! the byte-level BPE tokenizers of the MLPerf LLMs. The ids can differ from the ones the server sampled where a
//! text has several encodings; the decoded text, which is all the scripts score, does not.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

mod peak;

use super::runner::{RunOutcome, Runner};
use super::{Adaptive, Executed, Execution, RunContext, RunError, RunStages};
use llmbench_data::{DataError, DatasetOptions, Prompt, load_dataset};
use llmbench_engine::engine::{PreparedRequest, StageTimes};
use llmbench_metrics::metrics::RunVerdict;
use llmbench_metrics::mlperf::logs::{
    ACCURACY_LOG_JSON, AccuracyEntry, DETAIL_TXT, DetailEvent, DetailPass, DetailRun,
    starting_message, write_accuracy_log, write_detail_log,
};
use llmbench_metrics::mlperf::peak::{PeakLine, PeakSearch, qps_field};
use llmbench_metrics::mlperf::trace::{TRACE_JSON, TracePass, TraceWriter};
use llmbench_metrics::mlperf::{
    MlperfError, MlperfSchedule, MlperfSettings, Mode, RunTimes, Scenario, UserConf, Verdict,
    build_schedule, evaluate, parse_settings, rouge,
};
use llmbench_model::record::RequestRecord;
use llmbench_report::report::ReportOptions;
use llmbench_text::tokenizer::Tokenizer;
use llmbench_text::tokenizer::{HubOptions, load_tokenizer};
use llmbench_workload::request::{BodySettings, prepare};
use llmbench_workload::workload::ParseOptions;

/// The verdict files, beside summary.json.
pub(crate) const SUMMARY_TXT: &str = "mlperf_log_summary.txt";
pub(crate) const VERDICT_JSON: &str = "mlperf_verdict.json";
/// Accuracy mode's ROUGE scores and target check.
pub(crate) const ACCURACY_JSON: &str = "mlperf_accuracy.json";

/// An MLPerf run: LoadGen's settings and schedule, then its verdict (or, in accuracy mode, the ROUGE scores).
pub(crate) struct MlperfRun {
    pub(crate) options: ParseOptions,
}

impl Runner for MlperfRun {
    async fn run(self, context: &mut RunContext<'_>) -> Result<RunOutcome, RunError> {
        let options = &self.options;
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
        if settings.mode == Mode::FindPeakPerformance && settings.scenario != Scenario::Server {
            // `FindPeakPerformanceMode` logs this and issues nothing for the other scenarios.
            return Err(MlperfError::Invalid {
                file: context.template_name.to_owned(),
                line: None,
                key: "mode".to_owned(),
                problem: format!(
                    "FindPeakPerformance in the {} scenario: LoadGen says \"Finding peak performance is only \
                     supported in Server scenarios.\" and issues no query; run PerformanceOnly",
                    settings.scenario.as_str()
                ),
            }
            .into());
        }
        let dataset = settings.dataset_path.clone().ok_or_else(|| MlperfError::Invalid {
            file: context.template_name.to_owned(),
            line: None,
            key: "dataset_path".to_owned(),
            problem: "an MLPerf run needs a dataset (JSON, JSONL, CSV or a pickled pandas DataFrame with `input` or \
                 `tok_input`, and `output`)"
                .to_owned(),
        })?;

        let tokenizer_spec = context.tokenizer_spec(None)?;
        let request_model = context.request_model(settings.server.model.clone())?;
        // Before the tokenizer is fetched and the dataset read: a server that cannot be used fails the run at once.
        let preflight = context.preflight(&settings.server, &request_model).await?;
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
        let mut schedule = build_schedule(&settings, samples.len())?;
        context.note_prompts(
            &llmbench_workload::prompts::PromptOrigin::Pinned {
                by: format!("the MLPerf dataset {dataset}"),
            },
            false,
            false,
            Some(samples.len() as u64),
        );

        let body = BodySettings::new(
            &settings.server,
            request_model.clone(),
            llmbench_workload::request::BodyStyle::InferencePerf,
        );
        let prepared: Vec<PreparedRequest> = samples.iter().map(|p| prepare(p, &body)).collect();
        if settings.mode == Mode::FindPeakPerformance {
            let execution = Execution {
                api: &settings.server,
                request_model,
                tokenizer_spec,
                // Replaced by the search's stages.
                stages: RunStages::Fixed {
                    whole_run: Vec::new(),
                    mine: Vec::new(),
                },
                interval: Duration::ZERO,
                requests: llmbench_engine::engine::Requests::Fixed(prepared.clone().into()),
                warmup: None,
                request_timeout: None,
                max_concurrency: None,
                report: ReportOptions::default(),
                keep_text: false,
                preflight: Some(preflight),
                stage_requests: None,
                prime: None,
            };
            return find_peak(context, &settings, &schedule, prepared, execution).await;
        }
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
                stages: context.shard(std::mem::take(&mut schedule.stages), &[])?,
                interval: Duration::ZERO,
                requests: llmbench_engine::engine::Requests::Fixed(requests),
                warmup: None,
                request_timeout: None,
                max_concurrency: None,
                report: ReportOptions::default(),
                // The accuracy pass's answers are scored (and, in a SubmissionRun, the performance pass's kept
                // alongside: one run, one setting).
                keep_text: settings.mode.has_accuracy_pass(),
                preflight: Some(preflight),
                stage_requests: None,
                prime: None,
            })
            .await?;

        let accuracy = match settings.mode.has_accuracy_pass() {
            true => {
                let stage = schedule
                    .accuracy_pass
                    .as_ref()
                    .map_or(schedule.measured_stage, |pass| pass.stage);
                Some(score_accuracy(
                    &settings,
                    &samples,
                    &schedule.samples,
                    stage,
                    &tokenizer,
                    &executed.records,
                )?)
            }
            false => None,
        };
        let verdict = match settings.mode.has_performance_pass() {
            true => {
                let measured = schedule.measured_stage as usize;
                let times = executed.stage_times.get(measured).ok_or_else(|| {
                    RunError::Unsupported(format!(
                        "the engine reported no times for the measured stage {measured}"
                    ))
                })?;
                let mut verdict = evaluate(
                    &settings,
                    &executed.records,
                    &RunTimes {
                        measured_stage: schedule.measured_stage,
                        start_ns: times.start_ns,
                        end_ns: times.end_ns,
                    },
                );
                verdict.dataset_len = Some(samples.len() as u64);
                Some(verdict)
            }
            false => None,
        };
        // The verdict joins the summary (and the operator's SLOMet condition through the compact summary).
        executed.summary.verdict = Some(run_verdict(verdict.as_ref(), accuracy.as_ref()));
        let errors = accuracy.as_ref().map_or(Vec::new(), |a| a.errors.clone());
        let events = schedule_events(&executed, settings.mode, &schedule);
        let detail = detail_run(&executed, samples.len(), events, &errors);
        let passes: Vec<(u32, u64)> = schedule
            .accuracy_pass
            .iter()
            .map(|pass| (pass.stage, pass.samples_per_query))
            .chain([(schedule.measured_stage, schedule.samples_per_query)])
            .collect();
        write_trace(&executed, settings.scenario, &passes, |record| {
            usize::try_from(record.id)
                .ok()
                .and_then(|id| schedule.samples.get(id))
                .copied()
        })?;
        let mut outcome = context.finish(executed)?;
        if let Some(verdict) = &verdict {
            verdict.write_summary_txt(&outcome.dir.join(SUMMARY_TXT))?;
        }
        write_detail_log(
            &outcome.dir.join(DETAIL_TXT),
            &settings,
            verdict.as_ref(),
            &detail,
        )?;
        match &accuracy {
            Some(accuracy) => accuracy.write(&outcome.dir)?,
            // LoadGen leaves the accuracy log empty in performance mode; the submission tree expects the file.
            None => write_accuracy_log(&outcome.dir.join(ACCURACY_LOG_JSON), &[])?,
        }
        if let Some(verdict) = &verdict {
            verdict.write_json(&outcome.dir.join(VERDICT_JSON))?;
        }
        outcome.accuracy = accuracy.map(|a| a.scores);
        outcome.mlperf = verdict;
        Ok(outcome)
    }
}

/// FindPeakPerformance: LoadGen's search over `target_qps`, every pass a stage of one adaptive run
/// ([`peak::PeakPlanner`]); the result files are the peak pass's, the detail log every pass's.
async fn find_peak(
    context: &RunContext<'_>,
    settings: &MlperfSettings,
    base: &MlperfSchedule,
    prepared: Vec<PreparedRequest>,
    mut execution: Execution<'_>,
) -> Result<RunOutcome, RunError> {
    let dataset_len = prepared.len();
    let shared = peak::Shared::default();
    // The base schedule is the warm-up stage (when asked for) and the first pass.
    let warmup = (base.measured_stage > 0)
        .then(|| base.stages.first().cloned())
        .flatten()
        .map(|stage| {
            let count = usize::try_from(settings.warmup_queries).unwrap_or(usize::MAX);
            (
                stage,
                base.samples[..count.min(base.samples.len())].to_vec(),
            )
        });
    let planner = peak::PeakPlanner {
        shared: Arc::clone(&shared),
        settings: settings.clone(),
        dataset_len,
        warmup,
        search: PeakSearch::new(settings.target_qps),
        running: None,
    };
    execution.stages = RunStages::Adaptive(Adaptive {
        // For the progress line: a search at one decimal rarely needs more.
        stages: 16,
        planner: Box::new(move |_| Box::new(planner)),
    });
    execution.stage_requests = Some(Box::new(peak::PeakRequests {
        shared: Arc::clone(&shared),
        prepared: prepared.into(),
    }));
    let mut executed = context.execute(execution).await?;

    let (passes, outcome) = {
        let mut shared = shared
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        (std::mem::take(&mut shared.passes), shared.outcome.take())
    };
    let t0_unix_ns = executed.meta.t0_unix_ns;
    let line_event = |line: &PeakLine| match line {
        PeakLine::Message(message) => DetailEvent::Message(message.clone()),
        PeakLine::LoadSet => DetailEvent::Loaded(&base.loaded),
    };
    let mut events = vec![DetailEvent::Message(starting_message(
        Mode::FindPeakPerformance,
    ))];
    for pass in &passes {
        events.extend(pass.lines.iter().map(line_event));
        events.push(DetailEvent::Pass(detail_pass(
            t0_unix_ns,
            Some(&pass.times),
            pass.generated_queries,
            1,
        )));
    }
    let mut verdict = None;
    if let Some(outcome) = &outcome {
        events.extend(outcome.error.iter().cloned().map(DetailEvent::Error));
        events.extend(outcome.lines.iter().map(line_event));
        verdict = passes.get(outcome.pass).map(|pass| {
            let mut verdict = pass.verdict.clone();
            verdict.dataset_len = Some(dataset_len as u64);
            (pass.target_qps, verdict)
        });
    }
    if let Some((target_qps, verdict)) = &verdict {
        let mut run = run_verdict(Some(verdict), None);
        run.result = match outcome.as_ref().and_then(|o| o.error.as_ref()) {
            Some(_) => format!(
                "{}; the lower bound target_qps {} does not meet the performance constraints",
                run.result,
                qps_field(*target_qps)
            ),
            None => format!("{}; peak target_qps {}", run.result, qps_field(*target_qps)),
        };
        executed.summary.verdict = Some(run);
    }
    let detail = detail_run(&executed, dataset_len, events, &[]);
    let traced: Vec<(u32, u64)> = passes.iter().map(|pass| (pass.stage, 1)).collect();
    write_trace(&executed, settings.scenario, &traced, |record| {
        let pass = passes.iter().find(|p| p.stage == record.stage)?;
        let at = usize::try_from(record.id.checked_sub(pass.first_id)?).ok()?;
        pass.samples.get(at).copied()
    })?;
    let mut outcome = context.finish(executed)?;
    let verdict = verdict.map(|(_, verdict)| verdict);
    // A search stopped before its end (an interrupt) leaves its passes in the detail log and no result.
    if let Some(verdict) = &verdict {
        verdict.write_summary_txt(&outcome.dir.join(SUMMARY_TXT))?;
        verdict.write_json(&outcome.dir.join(VERDICT_JSON))?;
    }
    write_detail_log(
        &outcome.dir.join(DETAIL_TXT),
        settings,
        verdict.as_ref(),
        &detail,
    )?;
    write_accuracy_log(&outcome.dir.join(ACCURACY_LOG_JSON), &[])?;
    outcome.mlperf = verdict;
    Ok(outcome)
}

/// An accuracy pass's answers, scored with ROUGE against each sample's reference `output` and checked against the
/// accuracy target (a fraction of the model's reference scores), with the accuracy log's entries.
struct ScoredAccuracy {
    scores: rouge::RougeScores,
    report: serde_json::Value,
    passed: bool,
    failed_checks: Vec<String>,
    /// `None` when the run's tokenizer is the built-in one, whose ids the accuracy scripts cannot decode.
    logged: Option<Vec<AccuracyEntry>>,
    errors: Vec<String>,
}

impl ScoredAccuracy {
    fn write(&self, dir: &Path) -> Result<(), RunError> {
        if let Some(logged) = &self.logged {
            write_accuracy_log(&dir.join(ACCURACY_LOG_JSON), logged)?;
        }
        let path = dir.join(ACCURACY_JSON);
        std::fs::write(&path, format!("{:#}\n", self.report))
            .map_err(|source| RunError::WriteOutput { path, source })
    }

    fn result(&self) -> String {
        format!(
            "{} (ROUGE-1 {:.4}, ROUGE-2 {:.4}, ROUGE-L {:.4})",
            if self.passed { "PASS" } else { "FAIL" },
            self.scores.rouge1,
            self.scores.rouge2,
            self.scores.rouge_l
        )
    }
}

/// Scores the accuracy pass, the records of `stage`; `issued` is the dataset index of every request id.
fn score_accuracy(
    settings: &MlperfSettings,
    samples: &[Prompt],
    issued: &[usize],
    stage: u32,
    tokenizer: &Tokenizer,
    records: &[llmbench_model::record::RequestRecord],
) -> Result<ScoredAccuracy, RunError> {
    let log_ids = !tokenizer.is_builtin();
    let mut predictions = Vec::new();
    let mut references = Vec::new();
    let mut logged = Vec::new();
    let mut errors = Vec::new();
    let mut unscored = 0usize;
    // Warm-up answers, and a SubmissionRun's performance pass, are not scored.
    for record in records.iter().filter(|r| r.stage == stage) {
        let sample = usize::try_from(record.id)
            .ok()
            .and_then(|id| issued.get(id))
            .copied();
        let reference = sample
            .and_then(|sample| samples.get(sample))
            .and_then(|s| s.output.clone());
        if record.error.is_none()
            && let Some(qsl_idx) = sample
        {
            if log_ids {
                // Off the request path: the run is over.
                let text = record.text.as_deref().map_or("", |t| t.as_str());
                logged.push(AccuracyEntry {
                    seq_id: record.id,
                    qsl_idx,
                    token_ids: tokenizer.encode(text)?,
                });
            }
        } else {
            errors.push(format!(
                "request {} failed; its sample is missing from the accuracy log",
                record.id
            ));
        }
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
        "mode": settings.mode.as_str(),
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
    if !log_ids {
        // The accuracy scripts decode ids with the model's tokenizer; the built-in word tokenizer's ids would
        // decode to other text there, so no accuracy log is better than a wrong one.
        let why = "mlperf_log_accuracy.json not written: the run's tokenizer is llmbench's built-in one, whose \
                   token ids the MLCommons accuracy scripts cannot decode; give the model's tokenizer (--tokenizer \
                   or the profile's model) to get it";
        tracing::warn!("{why}");
        errors.push(why.to_owned());
    }
    Ok(ScoredAccuracy {
        scores,
        report,
        passed: failed_checks.is_empty(),
        failed_checks,
        logged: log_ids.then_some(logged),
        errors,
    })
}

/// The detail log's events of a fixed schedule: a SubmissionRun's accuracy pass, then the measured pass.
fn schedule_events<'a>(
    executed: &Executed,
    mode: Mode,
    schedule: &'a MlperfSchedule,
) -> Vec<DetailEvent<'a>> {
    let measured_mode = match mode {
        Mode::AccuracyOnly => Mode::AccuracyOnly,
        _ => Mode::PerformanceOnly,
    };
    let accuracy = schedule.accuracy_pass.as_ref().map(|pass| {
        (
            Mode::AccuracyOnly,
            pass.loaded.as_slice(),
            pass.stage,
            pass.generated_queries,
            pass.samples_per_query,
        )
    });
    let measured = (
        measured_mode,
        schedule.loaded.as_slice(),
        schedule.measured_stage,
        schedule.generated_queries,
        schedule.samples_per_query,
    );
    accuracy
        .into_iter()
        .chain([measured])
        .flat_map(
            |(mode, loaded, stage, generated_queries, samples_per_query)| {
                let times = executed.stage_times.get(stage as usize);
                [
                    DetailEvent::Message(starting_message(mode)),
                    DetailEvent::Loaded(loaded),
                    DetailEvent::Pass(detail_pass(
                        executed.meta.t0_unix_ns,
                        times,
                        generated_queries,
                        samples_per_query,
                    )),
                ]
            },
        )
        .collect()
}

/// A pass as the detail log shows it, from its stage's times.
fn detail_pass(
    t0_unix_ns: u64,
    times: Option<&StageTimes>,
    generated_queries: u64,
    samples_per_query: u64,
) -> DetailPass {
    let (start_ns, end_ns) = times.map_or((0, 0), |t| (t.start_ns, t.end_ns));
    DetailPass {
        generated_queries,
        samples_per_query,
        start_ns,
        end_ns,
        start_unix_ns: t0_unix_ns.saturating_add(start_ns),
    }
}

/// Writes `mlperf_log_trace.json` (LoadGen's `enable_trace` default: on) from the run's records, before they go to
/// the reports. `passes`: each pass's stage and samples per query, in run order; `sample_of`: the dataset index a
/// request carried. Warm-up requests are no LoadGen queries and are not traced.
fn write_trace(
    executed: &Executed,
    scenario: Scenario,
    passes: &[(u32, u64)],
    sample_of: impl Fn(&RequestRecord) -> Option<usize>,
) -> Result<(), RunError> {
    let mut traced = Vec::with_capacity(passes.len());
    let mut next_query = 0u64;
    for &(stage, samples_per_query) in passes {
        let ids = || {
            executed
                .records
                .iter()
                .filter(|r| r.stage == stage)
                .map(|r| r.id)
        };
        let issued = ids().count() as u64;
        traced.push(TracePass {
            stage,
            first_id: ids().min().unwrap_or(0),
            samples_per_query,
            first_query: next_query,
        });
        next_query += issued.div_ceil(samples_per_query.max(1));
    }
    let mut writer = TraceWriter::create(
        &executed.dir.join(TRACE_JSON),
        std::process::id(),
        scenario,
        executed.meta.t0_unix_ns,
    )?;
    for record in &executed.records {
        let pass = traced.iter().find(|p| p.stage == record.stage);
        if let (Some(pass), Some(sample)) = (pass, sample_of(record)) {
            writer.record(record, pass, sample)?;
        }
    }
    writer.finish()?;
    Ok(())
}

/// What the detail log takes from the run beside the settings and the verdict.
fn detail_run<'a>(
    executed: &Executed,
    dataset_len: usize,
    events: Vec<DetailEvent<'a>>,
    errors: &'a [String],
) -> DetailRun<'a> {
    DetailRun {
        test_datetime: llmbench_model::wallclock::rfc3339(
            i64::try_from(executed.meta.t0_unix_ns / 1_000_000_000).unwrap_or(i64::MAX),
        ),
        dataset_len: dataset_len as u64,
        events,
        pid: std::process::id(),
        errors,
    }
}

/// The run's verdict for summary.json: the performance pass's (LoadGen's `Result is`), the accuracy pass's ROUGE
/// check, or, for a SubmissionRun, both, passing when both pass.
fn run_verdict(verdict: Option<&Verdict>, accuracy: Option<&ScoredAccuracy>) -> RunVerdict {
    let mut failed_checks: Vec<String> = Vec::new();
    if let Some(verdict) = verdict {
        let checks = &verdict.checks;
        failed_checks.extend(
            [
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
            .map(|(name, _)| name.to_owned()),
        );
    }
    if let Some(accuracy) = accuracy {
        failed_checks.extend(accuracy.failed_checks.iter().cloned());
    }
    let performance = verdict.map(|v| if v.valid { "VALID" } else { "INVALID" });
    let (by, result) = match (performance, accuracy) {
        (Some(performance), None) => ("mlperf", performance.to_owned()),
        (None, Some(accuracy)) => ("mlperf-accuracy", accuracy.result()),
        (Some(performance), Some(accuracy)) => (
            "mlperf",
            format!("{performance}; accuracy {}", accuracy.result()),
        ),
        (None, None) => ("mlperf", "no pass ran".to_owned()),
    };
    RunVerdict {
        by: by.to_owned(),
        passed: verdict.is_none_or(|v| v.valid) && accuracy.is_none_or(|a| a.passed),
        result,
        failed_checks,
    }
}
