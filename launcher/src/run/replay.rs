//! The replays: a trace (Mooncake, Azure) or a corpus of trace sessions (OpenTelemetry) sets every send, so there
//! is no warm-up, no prompt list and no capacity search; what is sent is read, checked and planned before the
//! clock starts.

use llmbench_engine::engine::{self, Requests};
use llmbench_engine::{session_replay, trace};
use llmbench_report::report::PreflightMeta;
use llmbench_text::tokenizer::{HubOptions, Tokenizer, load_tokenizer};
use llmbench_workload::prompts::prompt_origin;
use llmbench_workload::request::{BodySettings, BodyStyle};
use llmbench_workload::workload::{DataSpec, SessionTraceFormat, Workload};

use super::runner::{RunOutcome, Runner};
use super::{Execution, RunContext, RunError, report_options};
use crate::plan::inference_perf_worker_cap;

/// A trace session replay (inference-perf's `otel_trace_replay`): each session's calls, later ones carrying
/// earlier answers.
pub(crate) struct SessionReplay {
    pub(crate) workload: Workload,
}

/// A trace replay (`mooncake_trace`, `azure_trace`): every row sent at its time with its lengths.
pub(crate) struct TraceReplay {
    pub(crate) workload: Workload,
}

impl Runner for SessionReplay {
    async fn run(self, context: &mut RunContext<'_>) -> Result<RunOutcome, RunError> {
        let workload = &self.workload;
        let Checked {
            request_model,
            tokenizer_spec,
            preflight,
        } = check(
            context,
            workload,
            "a capacity search over a trace session replay: the traces set the load",
        )
        .await?;
        let settings = BodySettings::new(
            &workload.api,
            request_model.clone(),
            BodyStyle::of(workload.harness),
        );
        // The corpus is listed, checked and ordered before the clock starts; each session's graph is rebuilt
        // from its file when it starts (a WEKA trace's prompts cut from the corpus with the run's tokenizer).
        let tokenizer = match &workload.data {
            DataSpec::OtelTrace(data) if matches!(data.format, SessionTraceFormat::Weka(_)) => {
                load_tokenizer(&tokenizer_spec, &HubOptions::from_env()).await?
            }
            _ => Tokenizer::builtin(),
        };
        let cap = inference_perf_worker_cap(&workload.workers, crate::sizing::available_cpus());
        let planned = session_replay::session_plans(workload, settings, cap, &tokenizer)?;
        context.note_prompts(&prompt_origin(workload, 0), false, false, None);
        // Later calls carry earlier calls' answers (taken out of the records).
        let replay = Replay {
            request_model,
            tokenizer_spec,
            planned,
            keep_text: true,
            preflight,
        };
        replay.run(context, workload).await
    }
}

impl Runner for TraceReplay {
    async fn run(self, context: &mut RunContext<'_>) -> Result<RunOutcome, RunError> {
        let workload = &self.workload;
        let Checked {
            request_model,
            tokenizer_spec,
            preflight,
        } = check(
            context,
            workload,
            "a capacity search over a trace replay: the trace sets the load",
        )
        .await?;
        let tokenizer: Tokenizer = load_tokenizer(&tokenizer_spec, &HubOptions::from_env()).await?;
        let settings = BodySettings::new(
            &workload.api,
            request_model.clone(),
            BodyStyle::of(workload.harness),
        );
        // The trace is read, checked and turned into prompts before the clock starts.
        let stage = if matches!(workload.data, DataSpec::AzureTrace(_)) {
            let cap = inference_perf_worker_cap(&workload.workers, crate::sizing::available_cpus());
            trace::azure_replay_plan(workload, &tokenizer, settings, cap)?
        } else {
            trace::replay_plan(workload, &tokenizer, settings)?
        };
        context.note_prompts(&prompt_origin(workload, 0), false, false, None);
        let replay = Replay {
            request_model,
            tokenizer_spec,
            planned: vec![stage],
            keep_text: false,
            preflight,
        };
        replay.run(context, workload).await
    }
}

/// What a replay knows once it is checked: the model its requests name, its tokenizer, and the pre-flight.
struct Checked {
    request_model: String,
    tokenizer_spec: String,
    preflight: PreflightMeta,
}

/// Refuses what a replay cannot honour (`--warm-prefix-cache` sends the run's prompts ahead, and a replay has no
/// list of them; a capacity search varies the load the recording sets, refused with `no_capacity_search`), then
/// chooses the tokenizer and the model and checks the server.
async fn check(
    context: &RunContext<'_>,
    workload: &Workload,
    no_capacity_search: &str,
) -> Result<Checked, RunError> {
    if context.args.warm_prefix_cache {
        return Err(RunError::Unsupported(
            "--warm-prefix-cache with a trace replay: the trace sets what is sent and when; replay it twice to \
             measure it warm"
                .to_owned(),
        ));
    }
    if context.capacity_search.is_some() {
        return Err(RunError::Unsupported(no_capacity_search.to_owned()));
    }
    let tokenizer_spec =
        context.tokenizer_spec(workload.tokenizer.as_ref().map(|t| t.name_or_path.clone()))?;
    // The run's model, whatever a trace recorded (upstream sends the server's model name).
    let request_model = context.request_model(workload.api.model.clone())?;
    let preflight = context.preflight(&workload.api, &request_model).await?;
    Ok(Checked {
        request_model,
        tokenizer_spec,
        preflight,
    })
}

/// A replay's planned stages, ready to shard and run; `keep_text` keeps answers that later calls carry.
struct Replay {
    request_model: String,
    tokenizer_spec: String,
    planned: Vec<engine::Stage>,
    keep_text: bool,
    preflight: PreflightMeta,
}

impl Replay {
    async fn run(
        self,
        context: &RunContext<'_>,
        workload: &Workload,
    ) -> Result<RunOutcome, RunError> {
        let stages = context.shard(self.planned, &workload.stages)?;
        let executed = context
            .execute(Execution {
                api: &workload.api,
                request_model: self.request_model,
                tokenizer_spec: self.tokenizer_spec,
                stages,
                interval: workload.stage_interval,
                requests: Requests::Trace,
                warmup: None,
                request_timeout: workload.request_timeout,
                max_concurrency: workload.workers.worker_max_concurrency,
                report: report_options(workload),
                keep_text: self.keep_text,
                preflight: Some(self.preflight),
                stage_requests: None,
                prime: None,
            })
            .await?;
        context.finish(executed)
    }
}
