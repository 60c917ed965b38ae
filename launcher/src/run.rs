//! `llmbench run`: profile in, results out. Render the profile with the shared renderer, parse its dialect into
//! the workload model, build every prompt and request body before the clock starts, run the engine, then derive
//! the summary and every report from the raw records.
//!
//! With no `--endpoint`, the embedded simulator is started on loopback, so the main job runs on a fresh machine
//! with no cluster and no network.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use llmbench_api::v1alpha1::Harness;

use crate::data::{DataError, Prompt};
use crate::engine::{self, Clock, EngineError, Progress, RunPlan, Target, Transport};
use crate::metrics::{
    RunInfo, RunSummary, WriteSummaryError, write_compact_summary, write_summary_json,
};
use crate::plan::{PlanError, Shard, engine_stages, expected_size};
use crate::profile::{ProfileError, Template, TemplateSource, Values, render};
use crate::prompts::{PromptError, build_prompts};
use crate::record::RequestRecord;
use crate::report::{
    self, Formats, LLMBENCH_VERSION, RUN_META_SCHEMA, ReportError, ReportOptions, RunMeta,
    ShardMeta, StageMeta,
};
use crate::request::{BodySettings, prepare};
use crate::sim::{self, SimConfig, SimError};
use crate::tokenizer::{HubOptions, Tokenizer, TokenizerError, load_tokenizer};
use crate::workload::{Api, ApiKind, ParseOptions, Workload, WorkloadError, parse_profile};
use crate::{progress, wallclock};

/// The model name the embedded simulator serves.
pub const SIM_MODEL: &str = "llmbench-sim";

/// Flags of `llmbench run`.
#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// The profile dialect: inference-perf, guidellm, vllm-benchmark, inferencemax, mlperf or nop.
    #[arg(long)]
    pub harness: Harness,
    /// A bundled profile name (e.g. sanity_random) or a profile file (yaml or yaml.in).
    #[arg(long, value_name = "NAME|FILE")]
    pub profile: String,
    /// The stack's OpenAI-compatible base URL. Without it, the embedded simulator is started on loopback.
    #[arg(long, value_name = "URL")]
    pub endpoint: Option<String>,
    /// The served model name (fills REPLACE_ENV_LLMDBENCH_DEPLOY_CURRENT_MODEL). Default with the embedded
    /// simulator: llmbench-sim.
    #[arg(long)]
    pub model: Option<String>,
    /// The tokenizer used to build exact-length prompts: a tokenizer.json, a directory holding one, a Hugging Face
    /// model id (HF_TOKEN, HF_ENDPOINT and the hub cache are honoured), or `builtin`. Default: the profile's
    /// tokenizer, else the model; `builtin` with the embedded simulator.
    #[arg(long, value_name = "SPEC")]
    pub tokenizer: Option<String>,
    /// The model's context length (fills REPLACE_ENV_LLMDBENCH_DEPLOY_CURRENT_MAX_MODEL_LEN).
    #[arg(long, value_name = "TOKENS")]
    pub max_model_len: Option<u32>,
    /// A placeholder value, NAME=VALUE (NAME with or without the REPLACE_ENV_ prefix).
    #[arg(long = "set", value_name = "NAME=VALUE")]
    pub set: Vec<String>,
    /// A profile override, KEY=VALUE (see `llmbench render --help`).
    #[arg(long = "override", value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,
    /// Results go to OUTPUT/RUN_ID/.
    #[arg(long, short, default_value = "results", value_name = "DIR")]
    pub output: PathBuf,
    /// The run's id and results directory name. Default: <harness>-<profile>-<UTC time>.
    #[arg(long, value_name = "ID")]
    pub run_id: Option<String>,
    /// Also write a compact JSON summary (at most 4096 bytes) here, e.g. /dev/termination-log in a pod.
    #[arg(long, value_name = "PATH")]
    pub summary_file: Option<PathBuf>,
    /// Reject profile keys the dialect does not know, instead of warning.
    #[arg(long)]
    pub strict: bool,
    /// Seed for arrivals and prompts when the profile sets none.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Run only this launcher's share, INDEX/COUNT, of a run spread over COUNT launchers.
    #[arg(long, value_name = "INDEX/COUNT", value_parser = Shard::parse, default_value = "0/1")]
    pub shard: Shard,
    /// Embedded simulator: time to first token.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "50ms", value_name = "DURATION")]
    pub sim_ttft: Duration,
    /// Embedded simulator: time between tokens.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "10ms", value_name = "DURATION")]
    pub sim_itl: Duration,
}

/// Why a run could not be carried out (a failing request never is: it is recorded).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Profile(#[from] ProfileError),
    #[error(transparent)]
    Workload(#[from] WorkloadError),
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error("cannot start the embedded simulator: {0}")]
    Sim(#[from] SimError),
    #[error("tokenizer: {0}")]
    Tokenizer(#[from] TokenizerError),
    #[error(transparent)]
    Prompts(#[from] PromptError),
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error("no model to send: the profile names none; pass --model")]
    NoModel,
    #[error("cannot create the results directory {path}: {source}")]
    CreateOutput {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write {path}: {source}")]
    WriteOutput {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Summary(#[from] WriteSummaryError),
    #[error("cannot build the HTTP client: {0}")]
    Client(reqwest::Error),
    #[error("cannot use the endpoint: {0}")]
    Endpoint(#[from] engine::http1::Http1Error),
    #[error(transparent)]
    Report(#[from] ReportError),
    #[error("mlperf: {0}")]
    Mlperf(#[from] crate::mlperf::MlperfError),
    #[error("cannot read {what} {path}: {source}")]
    ReadInput {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("not supported: {0}")]
    Unsupported(String),
}

impl From<DataError> for RunError {
    fn from(e: DataError) -> Self {
        RunError::Prompts(PromptError::Data(e))
    }
}

/// What a finished run leaves behind.
#[derive(Debug)]
pub struct RunOutcome {
    pub dir: PathBuf,
    pub summary: RunSummary,
    /// LoadGen's verdict, for the mlperf harness in performance mode.
    pub mlperf: Option<crate::mlperf::Verdict>,
    /// ROUGE scores, for the mlperf harness in accuracy mode.
    pub accuracy: Option<crate::mlperf::RougeScores>,
}

/// Carries out one run.
pub async fn run(args: RunArgs) -> Result<RunOutcome, RunError> {
    let (endpoint, embedded) = match &args.endpoint {
        Some(url) => (url.trim_end_matches('/').to_owned(), None),
        None => {
            let sim = sim::start(SimConfig {
                port: 0,
                model: args.model.clone().unwrap_or_else(|| SIM_MODEL.to_owned()),
                ttft: args.sim_ttft,
                itl: args.sim_itl,
                seed: args.seed,
                ..SimConfig::default()
            })
            .await?;
            (sim.base_url(), Some(sim))
        }
    };
    let model = args
        .model
        .clone()
        .or_else(|| embedded.as_ref().map(|_| SIM_MODEL.to_owned()));
    let outcome = run_against(&args, &endpoint, model, embedded.is_some()).await;
    if let Some(sim) = embedded
        && let Err(e) = sim.shutdown().await
    {
        tracing::warn!(error = %e, "the embedded simulator did not shut down cleanly");
    }
    outcome
}

async fn run_against(
    args: &RunArgs,
    endpoint: &str,
    model: Option<String>,
    embedded: bool,
) -> Result<RunOutcome, RunError> {
    let harness = args.harness;
    let source = template_source(&args.profile);
    let template = Template::load(harness.as_str(), &source)?;
    let values = Values {
        model: model.clone(),
        tokenizer: args.tokenizer.clone(),
        endpoint: Some(endpoint.to_owned()),
        max_model_len: args.max_model_len,
        set: args.set.clone(),
    };
    let rendered = render(&template, &values, &args.overrides)?;
    let options = ParseOptions {
        strict: args.strict,
        default_seed: args.seed,
    };
    let context = RunContext {
        args,
        endpoint,
        model,
        embedded,
        template_name: &template.name,
        rendered: &rendered,
    };
    if harness == Harness::Mlperf {
        return crate::mlperf::run::run(&context, &options).await;
    }
    let parsed = parse_profile(harness, &template.name, &rendered, &options)?;
    for warning in &parsed.warnings {
        tracing::warn!("{warning}");
    }
    let workload = parsed.workload;
    if harness == Harness::Nop {
        // llm-d-benchmark's nop sends nothing (upstream it reads model load times from the stack's logs, which a
        // launcher pod cannot see); the run records that it ran, with an empty summary.
        let executed = context
            .execute(Execution {
                api: &workload.api,
                request_model: context
                    .request_model(workload.api.model.clone())
                    .unwrap_or_default(),
                tokenizer_spec: String::new(),
                stages: context.shard(Vec::new()),
                interval: workload.stage_interval,
                requests: Arc::from([]),
                request_timeout: None,
                max_concurrency: None,
                report: report_options(&workload),
                keep_text: false,
            })
            .await?;
        return context.finish(executed);
    }
    let stages = context.shard(engine_stages(&workload)?);
    let (expected_requests, _) = expected_size(&stages.mine, workload.stage_interval);

    let tokenizer_spec =
        context.tokenizer_spec(workload.tokenizer.as_ref().map(|t| t.name_or_path.clone()))?;
    let tokenizer: Tokenizer = load_tokenizer(&tokenizer_spec, &HubOptions::from_env()).await?;
    let prompts: Vec<Prompt> = build_prompts(&workload, &tokenizer, expected_requests)?;
    let request_model = context.request_model(workload.api.model.clone())?;
    let settings = BodySettings::new(&workload.api, request_model.clone());
    let requests: Arc<[engine::PreparedRequest]> =
        prompts.iter().map(|p| prepare(p, &settings)).collect();

    let executed = context
        .execute(Execution {
            api: &workload.api,
            request_model,
            tokenizer_spec,
            stages,
            interval: workload.stage_interval,
            requests,
            request_timeout: workload.request_timeout,
            max_concurrency: workload.workers.worker_max_concurrency,
            report: report_options(&workload),
            keep_text: false,
        })
        .await?;
    context.finish(executed)
}

/// What every run shares, whatever its dialect: the flags, the endpoint and the rendered profile.
pub(crate) struct RunContext<'a> {
    pub args: &'a RunArgs,
    pub endpoint: &'a str,
    /// The model from `--model` (or the embedded simulator's).
    pub model: Option<String>,
    pub embedded: bool,
    pub template_name: &'a str,
    pub rendered: &'a str,
}

/// A run's stages: what the whole run asks (for run.json) and this launcher's share of it (what it sends).
pub(crate) struct ShardStages {
    pub whole_run: Vec<StageMeta>,
    pub mine: Vec<engine::Stage>,
}

/// A run ready to go: every request body built, the stages sharded.
pub(crate) struct Execution<'a> {
    pub api: &'a Api,
    pub request_model: String,
    pub tokenizer_spec: String,
    pub stages: ShardStages,
    pub interval: Duration,
    pub requests: Arc<[engine::PreparedRequest]>,
    pub request_timeout: Option<Duration>,
    pub max_concurrency: Option<u32>,
    pub report: ReportOptions,
    /// Keep each response's text in its record (MLPerf accuracy mode).
    pub keep_text: bool,
}

/// A finished execution, before its summary and reports are written: a harness may add its verdict first.
pub(crate) struct Executed {
    pub dir: PathBuf,
    pub meta: RunMeta,
    pub records: Vec<RequestRecord>,
    pub stage_times: Vec<engine::StageTimes>,
    pub summary: RunSummary,
}

impl RunContext<'_> {
    /// `--tokenizer`, else the built-in one for the embedded simulator, else the profile's, else the model.
    pub fn tokenizer_spec(&self, from_profile: Option<String>) -> Result<String, RunError> {
        self.args
            .tokenizer
            .clone()
            .or_else(|| self.embedded.then(|| crate::tokenizer::BUILTIN.to_owned()))
            .or(from_profile)
            .or_else(|| self.model.clone())
            .ok_or(RunError::NoModel)
    }

    /// The model name sent in each request: the profile's, else `--model`.
    pub fn request_model(&self, from_profile: Option<String>) -> Result<String, RunError> {
        from_profile
            .or_else(|| self.model.clone())
            .ok_or(RunError::NoModel)
    }

    /// `whole_run` as run.json records it, and this launcher's share of it (`--shard`).
    pub fn shard(&self, whole_run: Vec<engine::Stage>) -> ShardStages {
        ShardStages {
            whole_run: whole_run.iter().map(stage_meta).collect(),
            mine: self.args.shard.apply(whole_run),
        }
    }

    /// Runs `execution`, writing profile.yaml, run.json (before the first request) and requests.jsonl (as
    /// requests finish); the summary is derived but written by [`RunContext::finish`].
    pub async fn execute(&self, execution: Execution<'_>) -> Result<Executed, RunError> {
        let args = self.args;
        let harness = args.harness;
        let ShardStages {
            whole_run: stage_meta,
            mine: stages,
        } = execution.stages;
        let (expected_requests, expected_duration) = expected_size(&stages, execution.interval);

        let run_id = args.run_id.clone().unwrap_or_else(|| {
            format!(
                "{harness}-{}-{}",
                profile_stem(self.template_name),
                wallclock::compact_utc_now()
            )
        });
        let mut dir = args.output.join(&run_id);
        if args.shard.count > 1 {
            dir = dir.join(format!("shard-{}", args.shard.index));
        }
        std::fs::create_dir_all(&dir).map_err(|source| RunError::CreateOutput {
            path: dir.clone(),
            source,
        })?;
        write_file(&dir.join("profile.yaml"), self.rendered.as_bytes())?;

        let api = execution.api;
        let url = format!("{}{}", self.endpoint, api.path());
        let target = Arc::new(Target {
            transport: transport(
                &url,
                api.api_key.as_deref(),
                &api.headers,
                execution.max_concurrency,
            )?,
            url,
            api_key: api.api_key.clone(),
            headers: api.headers.clone(),
            request_timeout: execution.request_timeout,
            streaming: api.streaming,
            keep_text: execution.keep_text,
        });
        let requested_rates: Vec<Option<f64>> = stages.iter().map(|s| s.requested_rate).collect();
        let prompt_count = execution.requests.len();
        let plan = RunPlan {
            stages,
            interval: execution.interval,
            requests: execution.requests,
        };
        let records_path = dir.join(report::REQUESTS_FILE);
        let records_file =
            std::fs::File::create(&records_path).map_err(|source| RunError::WriteOutput {
                path: records_path.clone(),
                source,
            })?;
        let progress_counters = Arc::new(Progress::default());
        let (sink, writer) = engine::record_writer(
            Box::new(records_file),
            records_path.display().to_string(),
            Arc::clone(&progress_counters),
        );
        tracing::info!(
            run_id,
            endpoint = self.endpoint,
            model = execution.request_model,
            prompts = prompt_count,
            requests = expected_requests,
            "starting run"
        );
        let display = progress::spawn(
            progress_counters,
            progress::Expectation {
                requests: expected_requests,
                duration: expected_duration,
                stages: requested_rates.len(),
            },
        );
        let clock = Clock::start();
        let t0_unix_ns = wallclock::unix_ns_now();
        let meta = RunMeta {
            schema: RUN_META_SCHEMA.to_owned(),
            run_id: run_id.clone(),
            harness,
            profile: self.template_name.to_owned(),
            model: execution.request_model.clone(),
            endpoint: self.endpoint.to_owned(),
            tokenizer: Some(execution.tokenizer_spec),
            started_at: wallclock::rfc3339_millis(t0_unix_ns),
            t0_unix_ns,
            api: match api.kind {
                ApiKind::Completion => report::ApiKind::Completion,
                ApiKind::Chat => report::ApiKind::Chat,
            },
            stages: stage_meta,
            shard: ShardMeta {
                index: args.shard.index,
                count: args.shard.count,
            },
            llmbench_version: LLMBENCH_VERSION.to_owned(),
            report: execution.report,
        };
        // Written before the first request, so a killed run can still be reported from requests.jsonl.
        meta.write(&dir)?;
        let ran = if plan.stages.is_empty() {
            // Nothing to send (the nop harness): the run still leaves its files behind.
            drop(sink);
            Ok(Vec::new())
        } else {
            engine::run(target, plan, clock, sink).await
        };
        display.abort();
        progress::finish();
        let records: Vec<RequestRecord> = match writer.await {
            Ok(written) => written?,
            Err(join) => {
                return Err(RunError::WriteOutput {
                    path: records_path,
                    source: std::io::Error::other(join.to_string()),
                });
            }
        };
        let stage_times = ran?;

        let info = RunInfo {
            run_id,
            harness: harness.to_string(),
            model: execution.request_model,
            endpoint: self.endpoint.to_owned(),
        };
        let summary = RunSummary::from_records(info, &records, &requested_rates);
        Ok(Executed {
            dir,
            meta,
            records,
            stage_times,
            summary,
        })
    }

    /// Writes what every run leaves besides its records: summary.json, the compact summary (`--summary-file`),
    /// the harness's own result files and the llm-d report.
    pub fn finish(&self, executed: Executed) -> Result<RunOutcome, RunError> {
        let Executed {
            dir,
            meta,
            records,
            summary,
            ..
        } = executed;
        write_summary_json(&dir.join(report::SUMMARY_FILE), &summary)?;
        if let Some(path) = &self.args.summary_file {
            write_compact_summary(path, &summary)?;
        }
        report::write_all(
            &dir,
            &meta,
            &records,
            &summary,
            Formats::for_harness(self.args.harness),
        )?;
        Ok(RunOutcome {
            dir,
            summary,
            mlperf: None,
            accuracy: None,
        })
    }
}

/// What run.json records of a stage: the rate or concurrency the profile asked of the whole run.
fn stage_meta(stage: &engine::Stage) -> StageMeta {
    let concurrency = match &stage.plan {
        engine::StagePlan::Open {
            max_concurrency, ..
        } => *max_concurrency,
        engine::StagePlan::Closed { concurrency, .. } => Some(*concurrency),
    };
    StageMeta {
        rate: stage.requested_rate,
        concurrency: concurrency.and_then(|c| u32::try_from(c).ok()),
    }
}

/// The profile's report settings in the terms of the result files that use them.
fn report_options(workload: &Workload) -> ReportOptions {
    let mut options = ReportOptions::default();
    match workload.harness {
        Harness::VllmBenchmark | Harness::Inferencemax => {
            options.vllm_metric_percentiles = workload.report.percentiles.clone();
            if !workload.report.percentile_metrics.is_empty() {
                options.vllm_percentile_metrics = workload.report.percentile_metrics.clone();
            }
            options.vllm_save_detailed = workload.report.per_request;
        }
        _ => options.percentiles = workload.report.percentiles.clone(),
    }
    options
}

/// A name with a path separator or a YAML suffix, or one that exists on disk, is a file; anything else names a
/// bundled profile.
fn template_source(profile: &str) -> TemplateSource {
    let path = Path::new(profile);
    if path.exists()
        || profile.contains('/')
        || profile.ends_with(".yaml")
        || profile.ends_with(".in")
    {
        TemplateSource::File(path.to_owned())
    } else {
        TemplateSource::Builtin(profile.to_owned())
    }
}

fn profile_stem(template_name: &str) -> &str {
    let file = template_name.rsplit('/').next().unwrap_or(template_name);
    file.trim_end_matches(".in").trim_end_matches(".yaml")
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), RunError> {
    std::fs::write(path, bytes).map_err(|source| RunError::WriteOutput {
        path: path.to_owned(),
        source,
    })
}

/// The run's HTTP client. Plain `http://` goes through the engine's own HTTP/1.1 client unless a proxy is
/// configured; TLS and proxies through reqwest. Either way one pool for the run, sized so a run with thousands of
/// concurrent streams never queues inside the client, with Nagle off so small requests go out at once.
fn transport(
    url: &str,
    api_key: Option<&str>,
    headers: &[(String, String)],
    max_concurrency: Option<u32>,
) -> Result<Transport, RunError> {
    let idle = max_concurrency.map_or(1024, |c| c as usize).max(64);
    if url.starts_with("http://") && !proxy_configured() {
        let mut headers = headers.to_vec();
        if let Some(key) = api_key {
            headers.push(("Authorization".to_owned(), format!("Bearer {key}")));
        }
        let endpoint = engine::http1::Http1Endpoint::new(url, &headers, idle)?;
        return Ok(Transport::Http1(endpoint));
    }
    reqwest::Client::builder()
        .pool_max_idle_per_host(idle)
        .tcp_nodelay(true)
        .http1_only()
        .build()
        .map(Transport::Reqwest)
        .map_err(RunError::Client)
}

/// Whether the environment names an HTTP proxy, which reqwest honours (with NO_PROXY) and our client does not.
fn proxy_configured() -> bool {
    ["http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"]
        .iter()
        .any(|name| std::env::var_os(name).is_some_and(|value| !value.is_empty()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profile_names_and_files_are_told_apart() {
        assert!(matches!(
            template_source("sanity_random"),
            TemplateSource::Builtin(_)
        ));
        assert!(matches!(
            template_source("./mine.yaml"),
            TemplateSource::File(_)
        ));
        assert!(matches!(
            template_source("mine.yaml.in"),
            TemplateSource::File(_)
        ));
    }

    #[test]
    fn the_default_run_id_uses_the_profile_stem() {
        assert_eq!(
            profile_stem("inference-perf/sanity_random.yaml.in"),
            "sanity_random"
        );
        assert_eq!(profile_stem("/tmp/x/mine.yaml"), "mine");
    }
}
