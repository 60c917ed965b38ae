//! What every run shares, whatever its harness: the flags, the server, the rendered profile and what the run
//! noted of it ([`RunContext`]), with the services a harness runner calls before it executes (the tokenizer and
//! model to use, the pre-flight, the shard of the stages), and what it hands to [`RunContext::execute`].

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use llmbench_core::harness::Harness;
use llmbench_engine::engine::{self, Requests, StagePlanner, Target};
use llmbench_engine::stack::StackSpec;
use llmbench_metrics::metrics::RunSummary;
use llmbench_model::record::RequestRecord;
use llmbench_report::report::{
    self, PreflightMeta, ProfileNote, PromptsMeta, PromptsOrigin, ReportOptions, RunMeta, StageMeta,
};
use llmbench_workload::prompts::PromptOrigin;
use llmbench_workload::request::BodyStyle;
use llmbench_workload::workload::load_flags::LoadFlagsRecord;
use llmbench_workload::workload::{Api, Warning, Workload};

use super::client::transport;
use super::{RunArgs, RunError, api_key, output, preflight};
use crate::plan::{expected_size, stage_meta};

/// What every run shares, whatever its dialect: the flags, the endpoint and the rendered profile.
pub(crate) struct RunContext<'a> {
    pub(crate) args: &'a RunArgs,
    pub(crate) endpoint: &'a str,
    /// The model the run chose: `--model`, else the profile's, else the embedded simulator's or what a `--serve`
    /// stack serves.
    pub(crate) model: Option<String>,
    pub(crate) embedded: bool,
    pub(crate) template_name: &'a str,
    pub(crate) rendered: &'a str,
    /// The profile's keys that were not acted on, for run.json and the summary.
    pub(crate) notes: Vec<ProfileNote>,
    /// The SLO capacity search the run carries out, for run.json.
    pub(crate) capacity_search: Option<llmbench_core::capacity::CapacitySearchSpec>,
    /// The Prometheus server the profile names for server metrics (inference-perf `metrics:`).
    pub(crate) prometheus: Option<llmbench_workload::workload::PrometheusSource>,
    /// The profile turns server metrics off (AIPerf `no-server-metrics`).
    pub(crate) profile_no_server_metrics: bool,
    /// How the stack under test was started, when the launcher knows (`--stack-info`, `--serve`).
    pub(crate) stack: Option<StackSpec>,
    /// The stack this launcher started (`--serve`): its log moves into the results directory, and it is watched
    /// during the run.
    pub(crate) served: Option<Arc<llmbench_engine::stack::serve::Served>>,
    /// The load flags given and what they changed in the profile, for run.json.
    pub(crate) load_flags: Option<LoadFlagsRecord>,
    /// Where the run's prompts come from, for run.json's `cache` (its reset and priming are added by `execute`).
    pub(crate) prompts: Option<PromptsMeta>,
}

/// A run's stages.
pub(crate) enum RunStages {
    /// Known before the run: what the whole run asks (for run.json) and this launcher's share of it (what it
    /// sends).
    Fixed {
        whole_run: Vec<StageMeta>,
        mine: Vec<engine::Stage>,
    },
    /// Decided as the run goes, from what it measures (sweeps).
    Adaptive(Adaptive),
}

/// An adaptive run's stages.
pub(crate) struct Adaptive {
    /// How many stages the run expects at most, for the progress line.
    pub(crate) stages: usize,
    /// Makes the planner once the run's clock has started and run.json has its anchor.
    pub(crate) planner: MakePlanner,
}

/// Makes an adaptive run's planner from its run.json as it starts.
pub(crate) type MakePlanner = Box<dyn FnOnce(&RunMeta) -> Box<dyn StagePlanner> + Send>;

impl RunStages {
    /// How many requests this launcher plans to send and for how long at least, when the plan says in advance
    /// (an adaptive one does not).
    pub(super) fn expected_size(&self, interval: Duration) -> (Option<u64>, Option<Duration>) {
        match self {
            RunStages::Fixed { mine, .. } => expected_size(mine, interval),
            RunStages::Adaptive(_) => (None, None),
        }
    }
}

/// A run ready to go: every request body built, the stages sharded.
pub(crate) struct Execution<'a> {
    pub(crate) api: &'a Api,
    pub(crate) request_model: String,
    pub(crate) tokenizer_spec: String,
    pub(crate) stages: RunStages,
    pub(crate) interval: Duration,
    pub(crate) requests: Requests,
    pub(crate) warmup: Option<engine::Warmup>,
    pub(crate) request_timeout: Option<Duration>,
    pub(crate) max_concurrency: Option<u32>,
    pub(crate) report: ReportOptions,
    /// Keep each response's text in its record (MLPerf accuracy mode; conversations, which take it out again).
    pub(crate) keep_text: bool,
    /// What the pre-flight found ([`RunContext::preflight`]), for run.json; `None` for a run that sends nothing.
    pub(crate) preflight: Option<PreflightMeta>,
    /// Each stage's own fresh prompts (see [`cache::FreshStagePrompts`]); `None`: every stage sends `requests`.
    pub(crate) stage_requests: Option<Box<dyn engine::StageRequests>>,
    /// `--warm-prefix-cache`: the run's prompts, one output token each, sent once before the first stage.
    pub(crate) prime: Option<Arc<[engine::PreparedRequest]>>,
}

/// A finished execution, before its summary and reports are written: a harness may add its verdict first.
pub(crate) struct Executed {
    pub(crate) dir: PathBuf,
    pub(crate) meta: RunMeta,
    /// Every record, unless they outgrew `--records-memory` (then empty, and `spilled` is set).
    pub(crate) records: Vec<RequestRecord>,
    pub(crate) stage_times: Vec<engine::StageTimes>,
    pub(crate) summary: RunSummary,
    /// The run summarised from requests.jsonl, its records having outgrown `--records-memory`.
    pub(crate) spilled: Option<report::SpilledRun>,
    /// Why an adaptive run could not go on: its reports are written, then the run fails.
    pub(crate) failure: Option<engine::PlannerError>,
    /// Held until the reports are written: a second run with this id is refused meanwhile.
    pub(crate) _lock: output::RunDir,
}

impl RunContext<'_> {
    /// `--tokenizer`, else the built-in one for the embedded simulator, else the profile's, else the model.
    pub(crate) fn tokenizer_spec(&self, from_profile: Option<String>) -> Result<String, RunError> {
        self.args
            .tokenizer
            .clone()
            .or_else(|| {
                self.embedded
                    .then(|| llmbench_text::tokenizer::BUILTIN.to_owned())
            })
            .or(from_profile)
            .or_else(|| self.model.clone())
            .ok_or_else(|| RunError::NoModel("pass --model NAME, or --tokenizer SPEC".to_owned()))
    }

    /// `api` with the key the run sends (`--api-key`, else the profile's, else OPENAI_API_KEY), and where it came
    /// from.
    pub(crate) fn api_with_key(&self, api: &Api) -> (Api, Option<api_key::KeySource>) {
        api_key::with_key(api, self.args.api_key.as_ref(), api_key::from_environment())
    }

    /// The model name sent in each request: `--model`, else the profile's, else the one the run chose (the
    /// embedded simulator's, or what a `--serve` stack serves).
    pub(crate) fn request_model(&self, from_profile: Option<String>) -> Result<String, RunError> {
        self.args
            .model
            .clone()
            .or(from_profile)
            .or_else(|| self.model.clone())
            .ok_or_else(|| RunError::NoModel("pass --model NAME".to_owned()))
    }

    /// Checks the run's server before any prompt is built or timed ([`preflight`]), with the run's own API, client
    /// settings and model; or says why it is not checked (`--no-preflight`, an experiment that checked it before).
    /// Called once per run, whatever its stages (a sweep's or a capacity search's included).
    pub(crate) async fn preflight(
        &self,
        api: &Api,
        model: &str,
    ) -> Result<PreflightMeta, RunError> {
        check_server(self.args, self.endpoint, api, model).await
    }

    /// Says where the run's prompts come from (the log now, run.json later): fresh, and so new to the server, or
    /// pinned, and so possibly cached from an earlier run. `shares` says the prompts share prefixes by design;
    /// `distinct` counts the run's (first stage's) prompts.
    pub(crate) fn note_prompts(
        &mut self,
        origin: &PromptOrigin,
        shares: bool,
        per_stage: bool,
        distinct: Option<u64>,
    ) {
        let meta = match origin {
            PromptOrigin::Fresh { seed } => {
                tracing::info!(
                    seed,
                    per_stage,
                    "prompts: fresh for this run{}, so no earlier run sent them (--seed {seed} draws them again)",
                    if per_stage { " and for each stage" } else { "" }
                );
                PromptsMeta {
                    origin: PromptsOrigin::Fresh,
                    seed: Some(*seed),
                    pinned_by: None,
                    per_stage,
                    shares_prefixes: shares,
                    distinct,
                }
            }
            PromptOrigin::Pinned { by } => {
                tracing::info!(
                    "prompts: pinned by {by}: every run sends the same ones, so the server's prefix cache may hold \
                     them from an earlier run{}",
                    if self.args.reset_prefix_cache {
                        " (--reset-prefix-cache empties it first)"
                    } else {
                        "; --reset-prefix-cache empties it first"
                    }
                );
                PromptsMeta {
                    origin: PromptsOrigin::Pinned,
                    seed: None,
                    pinned_by: Some(by.clone()),
                    per_stage: false,
                    shares_prefixes: shares,
                    distinct,
                }
            }
        };
        self.prompts = Some(meta);
    }

    /// Logs the parser's findings (after the run's first line) and keeps them for run.json and the summary.
    pub(crate) fn note_warnings(&mut self, warnings: &[Warning]) {
        for warning in warnings {
            tracing::warn!("{warning}");
            self.notes.push(ProfileNote::from(warning));
        }
    }

    /// `whole_run` as run.json records it (with each stage's warm-up, cool-down and limits), and this launcher's
    /// share of it (`--shard`).
    pub(crate) fn shard(
        &self,
        whole_run: Vec<engine::Stage>,
        profile_stages: &[llmbench_workload::workload::Stage],
    ) -> Result<RunStages, RunError> {
        Ok(RunStages::Fixed {
            whole_run: whole_run
                .iter()
                .enumerate()
                .map(|(i, stage)| stage_meta(stage, profile_stages.get(i)))
                .collect(),
            mine: self.args.shard.apply(whole_run)?,
        })
    }
}

/// The profile's report settings in the terms of the result files that use them.
pub(super) fn report_options(workload: &Workload) -> ReportOptions {
    let mut options = ReportOptions {
        goodput: workload
            .goodput
            .iter()
            .map(|c| report::Slo {
                metric: c.metric,
                limit_s: c.limit.as_secs_f64(),
            })
            .collect(),
        ..ReportOptions::default()
    };
    match workload.harness {
        Harness::VllmBenchmark | Harness::Inferencemax => {
            options.vllm_metric_percentiles = workload.report.percentiles.clone();
            if !workload.report.percentile_metrics.is_empty() {
                options.vllm_percentile_metrics = workload.report.percentile_metrics.clone();
            }
            options.vllm_save_detailed = workload.report.per_request;
            options.vllm_result_filename = workload.report.file_name.clone();
        }
        _ => {
            options.percentiles = workload.report.percentiles.clone();
            options.inference_perf_summary = workload.report.summary;
            options.inference_perf_per_stage = workload.report.per_stage;
            options.inference_perf_per_request = workload.report.per_request;
            options.inference_perf_per_adapter = workload.report.per_adapter;
            options.inference_perf_per_adapter_stage = workload.report.per_adapter_stage;
            options.inference_perf_use_server_output_tokens =
                workload.report.use_server_output_tokens;
            options.prometheus_summary = workload.report.prometheus_summary;
            options.prometheus_per_stage = workload.report.prometheus_per_stage;
            options.session_summary = workload.report.session_summary;
            options.session_per_stage = workload.report.session_per_stage;
            options.session_per_session = workload.report.session_per_session;
        }
    }
    options.aiperf_phases = workload.report.aiperf_phases.clone();
    options
}

/// The pre-flight of a run with `args` against `endpoint` ([`preflight`]), with its own API, client settings and
/// model; or why it is skipped (`--no-preflight`, an experiment that checked the server before). What
/// [`RunContext::preflight`] runs, and all that `llmbench run --preflight-only` does.
pub(crate) async fn check_server(
    args: &RunArgs,
    endpoint: &str,
    api: &Api,
    model: &str,
) -> Result<PreflightMeta, RunError> {
    let skipped = args
        .preflight_done
        .clone()
        .or_else(|| args.no_preflight.then(|| "--no-preflight".to_owned()));
    if let Some(reason) = skipped {
        tracing::info!(reason, "pre-flight skipped");
        return Ok(PreflightMeta {
            skipped: Some(reason),
            ..PreflightMeta::default()
        });
    }
    // The key the run's requests will carry (--api-key, the profile's, OPENAI_API_KEY): a server behind a key
    // must see it on the test request too.
    let (api, _) = api_key::with_key(api, args.api_key.as_ref(), api_key::from_environment());
    let api = &api;
    let meta = check_endpoint(args, endpoint, api, model).await?;
    // Every URL the requests are spread over passes the same checks; the first one's are the run's record.
    for more in &api.more_urls {
        check_endpoint(args, more, api, model).await?;
    }
    Ok(meta)
}

/// The pre-flight against one endpoint.
async fn check_endpoint(
    args: &RunArgs,
    endpoint: &str,
    api: &Api,
    model: &str,
) -> Result<PreflightMeta, RunError> {
    let url = format!("{endpoint}{}", api.target());
    let target = Target {
        transport: transport(
            &url,
            api.kind,
            api.api_key.as_deref(),
            &api.headers,
            Some(1),
        )?,
        url,
        api_key: api.api_key.clone(),
        headers: api.headers.clone(),
        request_timeout: Some(args.preflight_timeout),
        streaming: api.streaming,
        api: api.kind,
        keep_text: false,
        // Not one of the run's requests: the run has no id yet, and a probe is not looked for in the logs.
        request_ids: engine::RequestIds::NONE,
        spread: Vec::new(),
    };
    let checks = preflight::Checks {
        endpoint,
        api,
        model,
        style: BodyStyle::of(args.harness),
        request_timeout: args.preflight_timeout,
        allow_model_mismatch: args.allow_model_mismatch,
    };
    let meta = preflight::check(&checks, target).await?;
    tracing::info!(
        endpoint,
        model,
        answered_in_ms = meta.request.as_ref().map(|r| r.latency_ms),
        "pre-flight passed: the server answers for the model"
    );
    Ok(meta)
}
