//! guidellm's `replay` profile over a `trace_synthetic` trace ([`llmbench_workload::workload::guidellm_replay`]):
//! the trace is read, sorted and made into prompts before the clock starts, and its one stage sends row i at
//! `time_scale ×` its offset, open loop, under the stage's constraints (`max_requests`, `max_duration`, the error
//! limits, `over_saturation`).

use std::sync::Arc;

use llmbench_engine::engine::{self, Requests};
use llmbench_text::tokenizer::{HubOptions, load_tokenizer};
use llmbench_workload::prompts::guidellm_trace::guidellm_trace_requests;
use llmbench_workload::prompts::prompt_origin;
use llmbench_workload::request::{BodySettings, BodyStyle, prepare};
use llmbench_workload::workload::guidellm_replay::send_times;
use llmbench_workload::workload::{Arrival, DataSpec, Workload};

use super::profile::run_nonce;
use super::runner::{RunOutcome, Runner};
use super::{Execution, RunContext, RunError, report_options};

/// A guidellm trace replay.
pub(crate) struct GuidellmReplay {
    pub(crate) workload: Workload,
}

impl Runner for GuidellmReplay {
    async fn run(self, context: &mut RunContext<'_>) -> Result<RunOutcome, RunError> {
        let workload = &self.workload;
        let (DataSpec::GuidellmTrace(trace), Some(stage)) =
            (&workload.data, workload.stages.first())
        else {
            return Err(RunError::Unsupported(
                "a guidellm trace is replayed by the `replay` profile only".to_owned(),
            ));
        };
        let Arrival::GuidellmReplay { time_scale } = stage.arrival else {
            return Err(RunError::Unsupported(
                "a guidellm trace is replayed by the `replay` profile only".to_owned(),
            ));
        };
        if context.args.warm_prefix_cache {
            return Err(RunError::Unsupported(
                "--warm-prefix-cache with a trace replay: the trace sets what is sent and when; replay it twice to \
                 measure it warm"
                    .to_owned(),
            ));
        }
        if context.capacity_search.is_some() {
            return Err(RunError::Unsupported(
                "a capacity search over a trace replay: the trace sets the load".to_owned(),
            ));
        }
        let tokenizer_spec =
            context.tokenizer_spec(workload.tokenizer.as_ref().map(|t| t.name_or_path.clone()))?;
        let request_model = context.request_model(workload.api.model.clone())?;
        let preflight = context.preflight(&workload.api, &request_model).await?;
        let tokenizer = load_tokenizer(&tokenizer_spec, &HubOptions::from_env()).await?;
        let mut settings = BodySettings::new(
            &workload.api,
            request_model.clone(),
            BodyStyle::of(workload.harness),
        );
        settings.ignore_eos = workload.api.ignore_eos;
        // Synthetic text of the trace's lengths: new to the server unless a seed pins it.
        let origin = prompt_origin(workload, run_nonce(context.args.shard));
        let requests =
            guidellm_trace_requests(trace, time_scale, &tokenizer, origin.seed(workload))?;
        let offsets: Vec<f64> = requests.iter().map(|(offset, _)| *offset).collect();
        let send_at = send_times(&offsets, time_scale, &stage.limit);
        let bodies: Arc<[engine::PreparedRequest]> = requests
            .iter()
            .take(send_at.len())
            .map(|(_, prompt)| prepare(prompt, &settings))
            .collect();
        context.note_prompts(&origin, false, false, Some(bodies.len() as u64));
        let planned = engine::Stage {
            plan: engine::StagePlan::Open {
                send_at,
                max_concurrency: None,
            },
            requested_rate: None,
            errors: engine::ErrorLimits {
                max_errors: stage.limit.max_errors,
                max_error_rate: stage.limit.max_error_rate,
                max_global_error_rate: stage.limit.max_global_error_rate,
                breakers: None,
                over_saturation: stage.limit.over_saturation,
                failed_request_threshold: None,
            },
        };
        let stages = context.shard(vec![planned], &workload.stages)?;
        let executed = context
            .execute(Execution {
                api: &workload.api,
                request_model,
                tokenizer_spec,
                stages,
                interval: workload.stage_interval,
                requests: Requests::Fixed(bodies),
                warmup: None,
                request_timeout: workload.request_timeout,
                max_concurrency: workload.workers.worker_max_concurrency,
                report: report_options(workload),
                keep_text: false,
                preflight: Some(preflight),
                stage_requests: None,
                prime: None,
            })
            .await?;
        context.finish(executed)
    }
}
