//! The profile runner: every dialect's load stages (a fixed list, a sweep, or an SLO capacity search), with the
//! prompts or conversations built before the clock starts, sized against the launcher's memory first.

use std::sync::Arc;

use llmbench_core::harness::Harness;
use llmbench_data::Prompt;
use llmbench_engine::engine::{self, Requests};
use llmbench_report::report::RunMeta;
use llmbench_text::tokenizer::{HubOptions, Tokenizer, load_tokenizer};
use llmbench_workload::conversations::build_conversations;
use llmbench_workload::prompts::{
    PromptOrigin, build_prompts, prompt_origin, restarts_each_stage, shares_prefixes,
    stage_prompt_seed,
};
use llmbench_workload::request::{BodySettings, BodyStyle, prepare_all};
use llmbench_workload::workload::Workload;

use super::runner::{RunOutcome, Runner};
use super::{
    Adaptive, Execution, RunContext, RunError, RunStages, cache, capacity, report_options,
};
use crate::plan::{Shard, cap_in_flight, engine_stages, inference_perf_worker_cap, sweep_plan};

/// A profile's load stages, run as its dialect runs them.
pub(crate) struct ProfileRun {
    pub(crate) workload: Workload,
}

impl Runner for ProfileRun {
    async fn run(self, context: &mut RunContext<'_>) -> Result<RunOutcome, RunError> {
        let workload = self.workload;
        let args = context.args;
        let harness = args.harness;
        let capacity_search = context.capacity_search.clone();
        let worker_cap = (harness == Harness::InferencePerf)
            .then(|| inference_perf_worker_cap(&workload.workers, crate::sizing::available_cpus()));
        let stages = match (
            &capacity_search,
            sweep_plan(&workload, args.shard, worker_cap)?,
        ) {
            (Some(spec), sweep) => {
                let search = capacity::check(spec, &workload, args.shard, sweep.is_some())
                    .map_err(RunError::CapacitySearch)?;
                let max_points = search.max_points as usize;
                let template = workload.stages.first().cloned().ok_or_else(|| {
                    RunError::CapacitySearch(
                        "the profile has no load stage to shape the points".to_owned(),
                    )
                })?;
                let shaped = workload.clone();
                RunStages::Adaptive(Adaptive {
                    stages: max_points,
                    planner: Box::new(move |meta: &RunMeta| {
                        Box::new(capacity::CapacityPlanner::new(
                            &shaped, template, search, worker_cap, meta,
                        ))
                    }),
                })
            }
            (None, Some(sweep)) => RunStages::Adaptive(Adaptive {
                stages: sweep.stages(),
                planner: Box::new(move |meta: &RunMeta| sweep.planner(meta.t0_unix_ns)),
            }),
            (None, None) => {
                let mut stages = context.shard(engine_stages(&workload)?, &workload.stages)?;
                if let (Some(cap), RunStages::Fixed { mine, .. }) = (worker_cap, &mut stages) {
                    cap_in_flight(mine, cap);
                }
                stages
            }
        };
        let (expected_requests, _) = stages.expected_size(workload.stage_interval);
        // Refused before a prompt is built: a run that cannot fit would be OOM-killed part way.
        let estimate = llmbench_workload::limits::estimate_run_memory(&workload, expected_requests)
            .with_records_within(args.records_memory);
        if let Some(available) = crate::sizing::available_memory() {
            llmbench_workload::limits::check_fits(&estimate, available)?;
        }
        tracing::debug!(%estimate, "memory the run will hold");

        let tokenizer_spec =
            context.tokenizer_spec(workload.tokenizer.as_ref().map(|t| t.name_or_path.clone()))?;
        let request_model = context.request_model(workload.api.model.clone())?;
        // Before the tokenizer is fetched and any prompt built: a server that cannot be used fails the run in seconds.
        let preflight = context.preflight(&workload.api, &request_model).await?;
        let mut hub = HubOptions::from_env();
        // inference-perf's `tokenizer.token` goes to the hub ahead of HF_TOKEN, as `from_pretrained(token=…)`.
        if let Some(token) = workload.tokenizer.as_ref().and_then(|t| t.token.clone()) {
            hub.token = Some(token);
        }
        let tokenizer: Tokenizer = load_tokenizer(&tokenizer_spec, &hub).await?;
        let mut settings = BodySettings::new(
            &workload.api,
            request_model.clone(),
            BodyStyle::of(workload.harness),
        );
        settings.ignore_eos = llmbench_workload::prompts::asks_exact_lengths(&workload)?;
        // Synthetic prompts are new to the server unless the profile pins them (see `prompts::PromptOrigin`).
        let origin = prompt_origin(&workload, run_nonce(args.shard));
        let data = Workload {
            seed: origin.seed(&workload),
            ..workload.clone()
        };
        let mut stage_requests: Option<Box<dyn engine::StageRequests>> = None;
        let mut prime = None;
        let mut warmup_request = None;
        let (requests, keep_text) = match build_conversations(&data, &tokenizer, expected_requests)?
        {
            Some(set) => {
                let conversations = engine::Conversations::new(set, settings);
                if !workload.api.more_urls.is_empty() && conversations.multi_turn() {
                    return Err(RunError::Unsupported(
                        "several URLs with multi-turn conversations: AIPerf keeps each session on the URL its first \
                         turn went to, while llmbench spreads requests over the URLs one by one"
                            .to_owned(),
                    ));
                }
                if workload.api.lora.is_some() && !conversations.has_models() {
                    return Err(RunError::Unsupported(
                        "LoRA traffic with inference-perf's multi-turn sessions: llmbench spreads adapters over a \
                         run's list of prompts and AIPerf's conversation turns, and each of these sessions' requests \
                         is built as the one before it answers"
                            .to_owned(),
                    ));
                }
                if args.warm_prefix_cache {
                    return Err(RunError::Unsupported(
                        "--warm-prefix-cache with multi-turn conversations: each turn carries the answers before it, \
                         so there is no list of prompts to send ahead"
                            .to_owned(),
                    ));
                }
                context.note_prompts(&origin, shares_prefixes(&workload), false, None);
                (
                    Requests::Conversations(Arc::new(conversations)),
                    // The answers' text is needed for the next turns (and taken out of the records).
                    true,
                )
            }
            None => {
                let prompts: Vec<Prompt> =
                    build_prompts(&data, &tokenizer, data.api.prompts_for(expected_requests))?;
                let bodies: Arc<[engine::PreparedRequest]> =
                    prepare_all(&prompts, &settings).into();
                if settings.lora.is_some() {
                    let base = BodySettings {
                        lora: None,
                        ..settings.clone()
                    };
                    let first = &prompts[..prompts
                        .len()
                        .min(settings.inputs_per_request.max(1) as usize)];
                    warmup_request = prepare_all(first, &base).into_iter().next();
                }
                if args.warm_prefix_cache {
                    // Prefill is what fills the cache: one output token is enough (a pooling request generates
                    // none, so its own bodies prime it).
                    let one_token: Vec<Prompt> = prompts
                        .iter()
                        .map(|p| Prompt {
                            max_tokens: Some(1),
                            ..p.clone()
                        })
                        .collect();
                    prime = Some(prepare_all(&one_token, &settings).into());
                }
                // A fresh run of several stages gives each its own prompts, unless they share prefixes by design or
                // the cache is warmed with the run's one list.
                let several = match &stages {
                    RunStages::Fixed { mine, .. } => mine.len() > 1,
                    RunStages::Adaptive(_) => true,
                };
                let per_stage = matches!(origin, PromptOrigin::Fresh { .. })
                    && several
                    && !shares_prefixes(&workload)
                    && !args.warm_prefix_cache;
                if restarts_each_stage(&workload) {
                    stage_requests = Some(Box::new(engine::FromFirstEachStage));
                }
                if let (true, PromptOrigin::Fresh { seed }) = (per_stage, &origin) {
                    stage_requests = Some(Box::new(cache::FreshStagePrompts {
                        workload: data.clone(),
                        tokenizer: tokenizer.clone(),
                        settings: settings.clone(),
                        seed: *seed,
                    }));
                }
                context.note_prompts(
                    &origin,
                    shares_prefixes(&workload),
                    per_stage,
                    Some(bodies.len() as u64),
                );
                (Requests::Fixed(bodies), false)
            }
        };
        let warmup = (workload.warmup_requests > 0).then(|| engine::Warmup {
            count: workload.warmup_requests,
            request: warmup_request,
            max_concurrency: workload
                .stages
                .first()
                .and_then(|s| s.max_concurrency)
                .map(|c| c as usize),
        });

        let executed = context
            .execute(Execution {
                api: &workload.api,
                request_model,
                tokenizer_spec,
                stages,
                interval: workload.stage_interval,
                requests,
                warmup,
                request_timeout: workload.request_timeout,
                max_concurrency: workload.workers.worker_max_concurrency,
                report: report_options(&workload),
                keep_text,
                preflight: Some(preflight),
                stage_requests,
                prime,
            })
            .await?;
        context.finish(executed)
    }
}

/// A value no earlier run used, for fresh prompts: the wall clock in nanoseconds, mixed with the shard's index so
/// the launchers of one sharded run draw different prompts too.
pub(super) fn run_nonce(shard: Shard) -> u64 {
    stage_prompt_seed(
        llmbench_model::wallclock::unix_ns_now(),
        shard.index.wrapping_add(1),
    )
}
