//! [`RunContext::execute`], the run every harness runner hands its requests to, as named phases: **ready the
//! server** (profiler hooks, prefix-cache reset, what the server is) → **claim the output** (the results directory,
//! profile.yaml) → **start recording** (requests.jsonl, live metrics) → **start the clock and write run.json** →
//! **drive the stages** → **stop recording** (the writer, the server-metrics scraper) → **derive the summary**;
//! [`RunContext::finish`] then **writes the reports**.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use llmbench_core::harness::Harness;
use llmbench_engine::engine::{
    self, Clock, Control, EngineError, EnginePlan, FinishedStage, PlannedStage, PlannerError,
    Progress, Requests, StagePlanner, Stages, StopReason, Target,
};
use llmbench_engine::progress;
use llmbench_engine::stack::StackMeta;
use llmbench_engine::stack::identity;
use llmbench_engine::stack::profiler::{self, ProfilerHooks};
use llmbench_metrics::metrics::{write_compact_summary, write_summary_json};
use llmbench_metrics::server_metrics::{ScrapeOutcome, Scraper};
use llmbench_model::wallclock;
use llmbench_report::report::{
    self, CacheMeta, Formats, LLMBENCH_VERSION, RUN_META_SCHEMA, RunEnd, RunMeta,
    ServerMetricsMeta, ShardMeta, StageMeta,
};
use llmbench_workload::workload::{Api, ApiKind};

use super::client::transport;
use super::context::{Executed, Execution, RunContext, RunStages};
use super::runner::RunOutcome;
use super::signals::watch_signals;
use super::{RunError, api_key, cache, output, preflight, server};

impl RunContext<'_> {
    /// Runs `execution` in phases: the server readied, the results directory claimed with profile.yaml, the
    /// records' writer started, the clock started and run.json written (before the first request), the stages
    /// driven with requests.jsonl written as requests finish, the recording stopped, and the summary derived;
    /// [`RunContext::finish`] writes it with every report.
    pub(crate) async fn execute(&self, mut execution: Execution<'_>) -> Result<Executed, RunError> {
        // The key the requests carry (and the probes and hooks): --api-key, the profile's, else OPENAI_API_KEY.
        let (api, api_key_source) = self.api_with_key(execution.api);
        let (ready, profiling) = self.ready_server(&api, &execution, api_key_source).await?;
        let (run_id, run_dir) = self.claim_output()?;
        let dir = run_dir.path.clone();
        let target = Arc::new(self.target(&api, &execution, &run_id)?);
        let scraping = self.scrape_targets().await?;
        let expectation = expectation(&execution);
        let mut meta = self.run_meta(&run_id, &mut execution, api.kind, ready, scraping.as_ref());
        let (mut recording, sink) = self.start_recording(&dir, &run_id, expectation).await?;
        tracing::info!(
            run_id,
            endpoint = self.endpoint,
            model = meta.model,
            requests = meta.planned_requests,
            "starting run"
        );
        let (_release_server, clock) = self.start_clock(&mut meta, &dir).await?;
        // Started just before the first request: its first scrape is the base the first stage's counters grow from.
        let scraper = match &scraping {
            Some(plan) => Some(llmbench_metrics::server_metrics::spawn(
                plan.targets.clone(),
                plan.interval,
                clock.t0(),
                dir.join(report::SERVER_METRICS_FILE),
            )?),
            None => None,
        };
        let engine = EngineRun {
            execution,
            target,
            sink,
            clock,
        };
        let driven = self
            .drive_stages(engine, &recording, &profiling, &dir, &mut meta)
            .await?;
        let stopped = stop_recording(&mut recording, scraper, scraping, &mut meta).await;
        driven.signals.abort();
        self.derive_summary(meta, run_dir, driven, &recording, stopped)
    }

    /// Readies the server before anything is written or timed, right before the clock (after the prompts are
    /// built and the pre-flight's test request is answered): the profiler hooks named (a mistyped hook fails the
    /// run before it starts), the prefix cache reset when asked (a server that cannot be reset fails the run with
    /// nothing timed), the server asked what it is (a request longer than its context fails the run here), so the
    /// questions never overlap the measured requests.
    async fn ready_server(
        &self,
        api: &Api,
        execution: &Execution<'_>,
        api_key_source: Option<api_key::KeySource>,
    ) -> Result<(ServerReady, Profiling), RunError> {
        let args = self.args;
        let hooks = ProfilerHooks::resolve(
            args.profiler_start.as_deref(),
            args.profiler_stop.as_deref(),
            args.vllm_profiler,
            self.endpoint,
        )?;
        let client = if hooks.is_empty() {
            None
        } else {
            Some(profiler::client(api.api_key.as_deref(), &api.headers)?)
        };
        let reset = if args.reset_prefix_cache {
            let reset = cache::reset_prefix_cache(self.endpoint, api).await?;
            tracing::info!(
                engine = reset.engine,
                calls = reset.calls.len(),
                "prefix cache reset before the run"
            );
            if let Some(note) = &reset.note {
                tracing::warn!("{note}");
            }
            Some(reset)
        } else {
            None
        };
        let cache = CacheMeta {
            prompts: self.prompts.clone(),
            reset,
            primed_prompts: execution.prime.as_ref().map(|p| p.len() as u64),
        };
        // Not under --no-preflight (nothing is sent before the clock) unless the stack was described to us.
        let answers = if args.no_preflight && self.stack.is_none() {
            None
        } else {
            Some(identity::ask(self.endpoint, api.api_key.as_deref(), &api.headers).await)
        };
        let server = answers.as_ref().map(identity::identify);
        // Requests longer than the server's context, found before the clock starts.
        if let (Some(server), Requests::Fixed(requests)) = (&server, &execution.requests) {
            let limit = server
                .models
                .iter()
                .find(|m| m.id == execution.request_model)
                .and_then(|m| m.max_model_len);
            preflight::check_context(
                &execution.request_model,
                limit,
                requests.iter().map(|r| (r.input_tokens, r.max_tokens)),
            )
            .map_err(RunError::RequestsUnfit)?;
        }
        if let Some(server) = &server {
            tracing::info!(
                engine = server.engine.as_deref().unwrap_or("unknown"),
                version = server.version.as_deref().unwrap_or_default(),
                models = server.models.len(),
                "server under test"
            );
            for failed in server.probes.iter().filter(|p| p.error.is_some()) {
                tracing::debug!(url = failed.url, error = failed.error, "not answered");
            }
        }
        let stack = self
            .stack
            .as_ref()
            .zip(answers.as_ref())
            .map(|(spec, answers)| spec.meta(answers.models.clone(), answers.version.clone()));
        let ready = ServerReady {
            cache,
            server,
            stack,
            api_key_source,
        };
        Ok((ready, Profiling { hooks, client }))
    }

    /// Where the requests go: the run's HTTP client and the ids each request carries.
    fn target(
        &self,
        api: &Api,
        execution: &Execution<'_>,
        run_id: &str,
    ) -> Result<Target, RunError> {
        let args = self.args;
        let url = format!("{}{}", self.endpoint, api.target());
        if !api.more_urls.is_empty() {
            tracing::warn!(
                urls = 1 + api.more_urls.len(),
                "the requests go to every URL in turn; server metrics and the stack's identity are read from the \
                 first one only"
            );
        }
        Ok(Target {
            transport: transport(
                &url,
                api.kind,
                api.api_key.as_deref(),
                &api.headers,
                execution.max_concurrency,
            )?,
            url,
            api_key: api.api_key.clone(),
            headers: api.headers.clone(),
            request_timeout: execution.request_timeout,
            streaming: api.streaming,
            api: api.kind,
            keep_text: execution.keep_text,
            request_ids: engine::RequestIds::for_run(
                run_id,
                args.shard.index,
                args.shard.count,
                &api.headers,
                api.session_id_header.as_deref(),
                api.request_id_prefix.as_deref(),
            ),
            spread: api
                .more_urls
                .iter()
                .map(|base| {
                    let url = format!("{base}{}", api.target());
                    let client = transport(
                        &url,
                        api.kind,
                        api.api_key.as_deref(),
                        &api.headers,
                        execution.max_concurrency,
                    )?;
                    Ok((client, url))
                })
                .collect::<Result<_, RunError>>()?,
        })
    }

    /// run.json as the run starts, but for the instant it starts ([`RunContext::start_clock`] sets it): an adaptive
    /// run lists its stages as they are decided.
    fn run_meta(
        &self,
        run_id: &str,
        execution: &mut Execution<'_>,
        api_kind: ApiKind,
        ready: ServerReady,
        scraping: Option<&server::ScrapePlan>,
    ) -> RunMeta {
        let args = self.args;
        let stages = match &mut execution.stages {
            RunStages::Fixed { whole_run, .. } => std::mem::take(whole_run),
            RunStages::Adaptive(_) => Vec::new(),
        };
        RunMeta {
            launcher_cpus: Some(crate::sizing::available_cpus()),
            schema: RUN_META_SCHEMA.to_owned(),
            run_id: run_id.to_owned(),
            harness: args.harness,
            profile: self.template_name.to_owned(),
            model: execution.request_model.clone(),
            endpoint: self.endpoint.to_owned(),
            tokenizer: Some(std::mem::take(&mut execution.tokenizer_spec)),
            started_at: String::new(),
            t0_unix_ns: 0,
            api: match api_kind {
                ApiKind::Completion => report::ApiKind::Completion,
                ApiKind::Chat => report::ApiKind::Chat,
                ApiKind::Responses => report::ApiKind::Responses,
                ApiKind::Messages => report::ApiKind::Messages,
                ApiKind::Embeddings => report::ApiKind::Embeddings,
                ApiKind::Rerank => report::ApiKind::Rerank,
            },
            stages,
            shard: ShardMeta {
                index: args.shard.index,
                count: args.shard.count,
            },
            llmbench_version: LLMBENCH_VERSION.to_owned(),
            report: std::mem::take(&mut execution.report),
            planned_requests: planned_requests(execution),
            profile_notes: self.notes.clone(),
            end: None,
            capacity_search: self.capacity_search.clone(),
            server_metrics: scraping.map(ServerMetricsMeta::planned),
            release: None,
            stack: ready.stack,
            server: ready.server,
            profiling: None,
            preflight: execution.preflight.take(),
            load_flags: self.load_flags.clone(),
            api_key_source: ready.api_key_source.map(|s| s.as_str().to_owned()),
            cache: (ready.cache != CacheMeta::default()).then_some(ready.cache),
        }
    }

    /// Starts keeping the records: requests.jsonl opened, the writer that appends each finished record to it (and
    /// keeps records in memory while they fit), and `--metrics-listen`'s live metrics.
    async fn start_recording(
        &self,
        dir: &Path,
        run_id: &str,
        expectation: progress::Expectation,
    ) -> Result<(Recording, engine::RecordSink), RunError> {
        let args = self.args;
        let records_path = dir.join(report::REQUESTS_FILE);
        let records_file =
            std::fs::File::create(&records_path).map_err(|source| RunError::WriteOutput {
                path: records_path.clone(),
                source,
            })?;
        let sent_path = dir.join(llmbench_model::sent::SENT_FILE);
        let sent_log = open_sent_log(&sent_path)?;
        let control = Control::default();
        let progress = Arc::new(Progress::default());
        progress.planned.store(
            expectation.requests.unwrap_or(0),
            std::sync::atomic::Ordering::Relaxed,
        );
        // Served until the run is summarised; dropping the server stops it, on every path out.
        let live = match args.metrics_listen {
            Some(addr) => {
                llmbench_engine::live::LiveServer::start_or_warn(
                    addr,
                    run_id,
                    args.harness.as_str(),
                    Arc::clone(&progress),
                )
                .await
            }
            None => None,
        };
        // MLPerf's verdict reads every record; any other run keeps its records only while they fit.
        let past = match args.harness {
            Harness::Mlperf => engine::PastBudget::Keep,
            _ => engine::PastBudget::Spill,
        };
        let (sink, writer) = engine::record_writer_budgeted(
            Box::new(records_file),
            records_path.display().to_string(),
            Arc::clone(&progress),
            control.clone(),
            live.as_ref()
                .map(llmbench_engine::live::LiveServer::observer),
            engine::RecordsBudget {
                bytes: args.records_memory,
                past,
            },
            Some(sent_log),
        );
        let recording = Recording {
            records_path,
            sent_path,
            control,
            progress,
            writer,
            expectation,
            _live: live,
        };
        Ok((recording, sink))
    }

    /// Starts the clock and writes run.json before the first request, so a killed run can still be reported from
    /// requests.jsonl (an adaptive run rewrites it as each stage is decided). A shard waits first, with everything
    /// prepared, until the operator releases every shard at one instant; the returned server answers it until the
    /// run ends.
    async fn start_clock(
        &self,
        meta: &mut RunMeta,
        dir: &Path,
    ) -> Result<(Option<crate::release::ReleaseServer>, Clock), RunError> {
        let args = self.args;
        let (release_server, release) = match args.wait_for_release {
            Some(addr) => {
                let (server, release) =
                    crate::release::wait_for_release(addr, args.release_timeout).await?;
                (Some(server), Some(release))
            }
            None => (None, None),
        };
        let clock = Clock::start();
        let t0_unix_ns = wallclock::unix_ns_now();
        meta.t0_unix_ns = t0_unix_ns;
        meta.started_at = wallclock::rfc3339_millis(t0_unix_ns);
        meta.release = release;
        meta.write(dir)?;
        Ok((release_server, clock))
    }

    /// Drives the stages: the engine sends every request (a run with nothing to send sends nothing and still leaves
    /// its files), inside the profiler's window, with SIGTERM and SIGINT, or a `--serve` stack's death, stopping
    /// it. What the hooks and the stack's heartbeat found goes into `meta`.
    async fn drive_stages(
        &self,
        engine: EngineRun<'_>,
        recording: &Recording,
        profiling: &Profiling,
        dir: &Path,
        meta: &mut RunMeta,
    ) -> Result<Driven, RunError> {
        let args = self.args;
        let EngineRun {
            execution,
            target,
            sink,
            clock,
        } = engine;
        let control = &recording.control;
        let (stages, decided) = match execution.stages {
            RunStages::Fixed { mine, .. } => (Stages::Fixed(mine), None),
            RunStages::Adaptive(adaptive) => {
                let recorder = RecordDecisions::new((adaptive.planner)(meta), meta, dir);
                let decided = Arc::clone(&recorder.decided);
                (Stages::Adaptive(Box::new(recorder)), Some(decided))
            }
        };
        let nothing_to_send = matches!(&stages, Stages::Fixed(s) if s.is_empty());
        // The window's start, called by the engine once the warm-up is over; its outcome lands here.
        let profiling_start: Arc<Mutex<Option<profiler::HookCall>>> = Arc::default();
        let before_measured = match (&profiling.client, &profiling.hooks.start) {
            (Some(client), Some(url)) => {
                let (client, url, slot) =
                    (client.clone(), url.clone(), Arc::clone(&profiling_start));
                let call: futures_util::future::BoxFuture<'static, ()> = Box::pin(async move {
                    let call = profiler::call(&client, &url, clock, "start").await;
                    *slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(call);
                });
                Some(call)
            }
            _ => None,
        };
        let plan = EnginePlan {
            stages,
            interval: execution.interval,
            requests: execution.requests,
            warmup: execution.warmup,
            before_measured,
            max_connect_failures: args.max_connect_failures,
            stage_requests: execution.stage_requests,
            prime: execution.prime,
        };
        let signals = watch_signals(control, args.interrupt_grace)?;
        if let Some(served) = &self.served {
            served.hand_signals_to_the_run();
        }
        // A stack that dies mid-run stops it as an interrupt does.
        let heartbeat = self
            .served
            .as_ref()
            .map(|served| served.watch(control.clone(), args.interrupt_grace));
        let display = progress::spawn(Arc::clone(&recording.progress), recording.expectation);
        let ran = if nothing_to_send {
            drop(sink);
            if let Some(hook) = plan.before_measured {
                hook.await;
            }
            Ok(Vec::new())
        } else {
            engine::run(target, plan, clock, sink, control.clone()).await
        };
        if let Some(heartbeat) = heartbeat
            && let Some(failure) = heartbeat.finish()
            && let Some(stack) = &mut meta.stack
        {
            stack.failure = Some(failure);
        }
        // Closed as soon as the measured phase is over, before anything else is waited for.
        if let Some(client) = &profiling.client {
            let stop = match &profiling.hooks.stop {
                Some(url) => Some(profiler::call(client, url, clock, "stop").await),
                None => None,
            };
            let start = profiling_start
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
            meta.profiling = Some(profiler::ProfilingMeta { start, stop });
        }
        display.abort();
        progress::finish();
        Ok(Driven {
            ran,
            decided,
            signals,
        })
    }

    /// Derives the summary from what was recorded: the run's end in run.json (written even when records were
    /// lost, so `llmbench report` can say what happened), the records from memory or, past the budget, from
    /// requests.jsonl in bounded memory, and the server's metrics.
    fn derive_summary(
        &self,
        mut meta: RunMeta,
        run_dir: output::RunDir,
        driven: Driven,
        recording: &Recording,
        stopped: Stopped,
    ) -> Result<Executed, RunError> {
        let harness = self.args.harness;
        let dir = run_dir.path.clone();
        let (stage_times, failure) = match driven.ran {
            Ok(times) => (times, None),
            Err(EngineError::Planner { ran, source }) => (ran, Some(source)),
            Err(e) => return Err(e.into()),
        };
        if let Some(decided) = driven.decided {
            // The stages that ran, as they were decided (not one the run stopped before).
            meta.stages =
                std::mem::take(&mut *decided.lock().unwrap_or_else(PoisonError::into_inner));
            meta.stages.truncate(stage_times.len());
        }
        let stopped_by = recording.control.reason();
        let mut end = RunEnd::new(
            stopped_by,
            meta.planned_requests,
            &recording.progress,
            &stage_times,
        );
        if let Some(failure) = &failure {
            tracing::error!(%failure, "the run could not decide its next stage");
            end = end.failed(failure.to_string());
        }
        meta.end = Some(end);
        let rewritten = meta.write(&dir);
        let written = match stopped.written? {
            Ok(written) => written,
            Err(EngineError::WriteRecords {
                path,
                written,
                source,
            }) => {
                // The records that reached the file are the run's: report them as `llmbench report` would,
                // where the disk still takes the reports (a quota or a file-size limit stops the records long
                // before a report), and say how to get them later where it does not.
                let reports = rewritten
                    .map_err(|e| e.to_string())
                    .and_then(|_| self.reports_of_what_was_kept(&dir));
                return Err(RunError::RecordsUnwritable {
                    path,
                    written,
                    source,
                    dir,
                    reports,
                });
            }
            Err(e) => return Err(e.into()),
        };
        rewritten?;
        // Every request sent is recorded now, and run.json has the end: the sent log only mattered had the
        // launcher been killed before this point (`llmbench report` reads it for a run with no end).
        if let Err(e) = std::fs::remove_file(&recording.sent_path) {
            tracing::warn!(path = %recording.sent_path.display(), error = %e, "cannot remove the sent log of a run that ended");
        }
        if let Some(reason) = stopped_by {
            tracing::warn!(%reason, "the run stopped before its plan was done");
        }
        let (records, spilled) = if written.spilled {
            let formats = Formats::for_harness(harness);
            let spilled = report::summarize_spilled(
                &dir,
                &meta,
                &report::RecordsFile::of(&dir),
                formats,
                self.args.records_memory,
            )?;
            (Vec::new(), Some(spilled))
        } else {
            (written.records, None)
        };
        let mut summary = match &spilled {
            Some(spilled) => spilled.summary().clone(),
            None => report::summarize_run(&meta, &records),
        };
        report::add_server_metrics(&dir, &meta, stopped.scraped.as_ref(), &mut summary);
        if let Some(warm) = &summary.prefix_cache_warm {
            tracing::warn!("{}", warm.message);
        }
        Ok(Executed {
            dir,
            meta,
            records,
            stage_times,
            summary,
            spilled,
            failure,
            _lock: run_dir,
        })
    }

    /// Every report of a run whose records could not all be written, from those that were (`llmbench report`'s
    /// rebuild): how many requests they hold, or why the reports could not be written either.
    fn reports_of_what_was_kept(&self, dir: &Path) -> Result<super::KeptReports, String> {
        let outcome = llmbench_report::report::report_dir_within(
            dir,
            None,
            self.args.records_memory,
            super::nop::model_load_of_run(dir),
            &llmbench_report::plot::RunPictures,
        )
        .map_err(|e| e.to_string())?;
        let requests = &outcome.summary.overall.requests;
        Ok(super::KeptReports {
            recorded: requests.total,
            lost: requests.lost_in_flight,
        })
    }

    /// What this launcher scrapes: see [`server::plan`]. The endpoint's own `/metrics` is probed first and left
    /// out quietly when it does not answer with Prometheus text (a gateway, an OpenAI-compatible service without
    /// metrics). Only shard 0 of a sharded run scrapes, for the whole run.
    async fn scrape_targets(&self) -> Result<Option<server::ScrapePlan>, RunError> {
        let args = self.args;
        if args.shard.index > 0 {
            return Ok(None);
        }
        let Some(mut plan) = server::plan(
            &args.metrics_endpoints,
            args.no_server_metrics || self.profile_no_server_metrics,
            args.metrics_interval,
            self.endpoint,
            self.prometheus.as_ref(),
        )?
        else {
            return Ok(None);
        };
        if let Some(url) = plan.default_target.take() {
            if llmbench_metrics::server_metrics::probe(&url).await {
                plan.targets.push(url);
            } else {
                tracing::info!(
                    url,
                    "no server metrics: the endpoint's /metrics does not answer with Prometheus text (give \
                     --metrics-endpoint URL to scrape the serving pods)"
                );
            }
        }
        Ok((!plan.targets.is_empty()).then_some(plan))
    }

    /// Claims the results directory (a `--serve` stack's log goes there from now on) and writes the rendered
    /// profile into it.
    fn claim_output(&self) -> Result<(String, output::RunDir), RunError> {
        let (run_id, run_dir) = self.claim_run_dir()?;
        if let Some(served) = &self.served {
            served.attach(&run_dir.path);
        }
        write_file(
            &run_dir.path.join(report::PROFILE_FILE),
            self.rendered.as_bytes(),
        )?;
        Ok((run_id, run_dir))
    }

    /// The run's directory: `--run-id` exactly (refused if it exists, unless `--overwrite`), or a fresh default
    /// id; a shard writes into its own `shard-N` below it.
    fn claim_run_dir(&self) -> Result<(String, output::RunDir), RunError> {
        let args = self.args;
        Ok(match &args.run_id {
            Some(id) => (
                id.clone(),
                output::claim(&run_dir_path(args, id), args.overwrite)?,
            ),
            None if args.shard.count > 1 => {
                let id = self.default_run_id();
                let dir = output::claim(&run_dir_path(args, &id), args.overwrite)?;
                (id, dir)
            }
            None => output::claim_fresh(&args.output, &self.default_run_id())?,
        })
    }

    fn default_run_id(&self) -> String {
        format!(
            "{}-{}-{}",
            self.args.harness,
            profile_stem(self.template_name),
            wallclock::compact_utc_now()
        )
    }

    /// Writes what every run leaves besides its records: summary.json, the compact summary (`--summary-file`),
    /// the harness's own result files and the llm-d report.
    pub(crate) fn finish(&self, executed: Executed) -> Result<RunOutcome, RunError> {
        let Executed {
            dir,
            meta,
            records,
            summary,
            spilled,
            failure,
            ..
        } = executed;
        write_summary_json(&dir.join(report::SUMMARY_FILE), &summary)?;
        if let Some(path) = &self.args.summary_file {
            write_compact_summary(path, &summary)?;
        }
        match spilled {
            // Every report and the pictures (of a sample of the requests past the budget), from the records
            // streamed back from disk.
            Some(spilled) => {
                spilled.write_reports(&dir, &meta, &summary)?;
                llmbench_report::plot::write_pictures_streamed(
                    &dir,
                    &meta,
                    &report::RecordsFile::of(&dir),
                    &summary,
                    self.args.records_memory,
                );
            }
            None => {
                report::write_all(
                    &dir,
                    &meta,
                    &records,
                    &summary,
                    Formats::for_harness(self.args.harness),
                )?;
                llmbench_report::plot::write_pictures(&dir, &meta, &records, &summary);
            }
        }
        if let Some(source) = failure {
            return Err(RunError::Adaptive { source, dir });
        }
        Ok(RunOutcome {
            dir,
            summary,
            mlperf: None,
            accuracy: None,
            stopped: meta.end.as_ref().and_then(|end| end.stopped),
            meta,
        })
    }
}

/// What the server told before anything was written, for run.json.
struct ServerReady {
    cache: CacheMeta,
    server: Option<identity::ServerIdentity>,
    stack: Option<StackMeta>,
    api_key_source: Option<api_key::KeySource>,
}

/// The profiler hooks that open and close the measured window, and the client that calls them.
struct Profiling {
    hooks: ProfilerHooks,
    client: Option<reqwest::Client>,
}

/// The records being kept: requests.jsonl's writer, the counters the progress line and the run's end read, the
/// control that stops the run, and the live metrics served while it goes.
struct Recording {
    records_path: PathBuf,
    /// The sent log: read only should the launcher be killed before the run ends.
    sent_path: PathBuf,
    control: Control,
    progress: Arc<Progress>,
    writer: engine::BudgetedWriterHandle,
    expectation: progress::Expectation,
    _live: Option<llmbench_engine::live::LiveServer>,
}

/// What the engine drives: the requests and stages, where they go, where their records go, and the clock.
struct EngineRun<'e> {
    execution: Execution<'e>,
    target: Arc<Target>,
    sink: engine::RecordSink,
    clock: Clock,
}

/// The stages driven: their times (or why the run could not decide its next stage), an adaptive run's decided
/// stages, and the signal handlers, kept until the recording stops.
struct Driven {
    ran: Result<Vec<engine::StageTimes>, EngineError>,
    decided: Option<Arc<Mutex<Vec<StageMeta>>>>,
    signals: tokio::task::JoinHandle<()>,
}

/// The recording stopped: every record written (or why not), and what the scraper collected.
struct Stopped {
    written: Result<Result<engine::Written, EngineError>, RunError>,
    scraped: Option<ScrapeOutcome>,
}

/// How many requests this launcher plans to send, warm-up and cache priming included, when the plan says.
fn planned_requests(execution: &Execution<'_>) -> Option<u64> {
    let (expected_requests, _) = execution.stages.expected_size(execution.interval);
    expected_requests.map(|n| {
        n + execution.warmup.as_ref().map_or(0, |w| w.count)
            + execution.prime.as_ref().map_or(0, |p| p.len() as u64)
    })
}

/// What the progress line expects: requests, duration and stages, as far as the plan says.
fn expectation(execution: &Execution<'_>) -> progress::Expectation {
    let (_, duration) = execution.stages.expected_size(execution.interval);
    progress::Expectation {
        requests: planned_requests(execution),
        duration,
        stages: match &execution.stages {
            RunStages::Fixed { mine, .. } => mine.len(),
            RunStages::Adaptive(adaptive) => adaptive.stages,
        },
    }
}

/// Stops the recording once the stages are driven: stops the scraper first, so its final scrape comes right after
/// the last answer (through a Prometheus server the last requests show up only after its next scrape, which
/// inference-perf waits for too; an interrupted run does not wait), with what it scraped in `meta`; then waits for
/// the writer's last records, which meanwhile went on being written.
async fn stop_recording(
    recording: &mut Recording,
    scraper: Option<Scraper>,
    scraping: Option<server::ScrapePlan>,
    meta: &mut RunMeta,
) -> Stopped {
    let scraped = match (scraper, scraping) {
        (Some(scraper), Some(plan)) => {
            let interrupted = matches!(
                recording.control.reason(),
                Some(StopReason::Interrupted { .. })
            );
            if !plan.tail.is_zero() && !interrupted {
                tracing::info!(
                    wait = %humantime::format_duration(plan.tail),
                    "waiting for the Prometheus server's samples of the last requests"
                );
                tokio::time::sleep(plan.tail).await;
            }
            let outcome = scraper.stop().await;
            meta.server_metrics = Some(ServerMetricsMeta::new(&plan, &outcome));
            Some(outcome)
        }
        _ => None,
    };
    let written = (&mut recording.writer)
        .await
        .map_err(|join| RunError::WriteOutput {
            path: recording.records_path.clone(),
            source: std::io::Error::other(join.to_string()),
        });
    Stopped { written, scraped }
}

/// An adaptive run's planner, with every stage it decides added to run.json before the stage starts, so a killed
/// run can still be reported with the stages it ran. Probes are not stages and are not listed.
struct RecordDecisions {
    inner: Box<dyn StagePlanner>,
    meta: RunMeta,
    dir: PathBuf,
    /// The stages decided so far, for the run's end.
    decided: Arc<Mutex<Vec<StageMeta>>>,
}

impl RecordDecisions {
    fn new(inner: Box<dyn StagePlanner>, meta: &RunMeta, dir: &Path) -> Self {
        RecordDecisions {
            inner,
            meta: meta.clone(),
            dir: dir.to_owned(),
            decided: Arc::default(),
        }
    }
}

impl StagePlanner for RecordDecisions {
    fn next_stage(
        &mut self,
        finished: Option<FinishedStage>,
    ) -> Result<Option<PlannedStage>, PlannerError> {
        let next = self.inner.next_stage(finished)?;
        if let Some(planned) = next.as_ref().filter(|p| !p.probe) {
            self.meta.stages.push(planned.meta);
            self.decided
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(planned.meta);
            self.meta.write(&self.dir)?;
        }
        Ok(next)
    }
}

fn profile_stem(template_name: &str) -> &str {
    let file = template_name.rsplit('/').next().unwrap_or(template_name);
    file.trim_end_matches(".in").trim_end_matches(".yaml")
}

/// Creates the run's sent log with its header written, before the first request: what a killed run's report
/// reads to find the requests that were in flight ([`llmbench_model::sent`]).
fn open_sent_log(path: &Path) -> Result<engine::SentLog, RunError> {
    let failed = |source| RunError::WriteOutput {
        path: path.to_owned(),
        source,
    };
    let mut file = std::fs::File::create(path).map_err(failed)?;
    llmbench_model::sent::write_header(&mut file).map_err(failed)?;
    Ok(engine::SentLog {
        out: Box::new(file),
        path: path.display().to_string(),
    })
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), RunError> {
    std::fs::write(path, bytes).map_err(|source| RunError::WriteOutput {
        path: path.to_owned(),
        source,
    })
}

/// Where a run with `id` writes: `--output`/`id`, or its `shard-N` below that for a shard of a sharded run.
pub(super) fn run_dir_path(args: &super::RunArgs, id: &str) -> PathBuf {
    let run = args.output.join(id);
    if args.shard.count > 1 {
        run.join(format!("shard-{}", args.shard.index))
    } else {
        run
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_run_id_uses_the_profile_stem() {
        assert_eq!(
            profile_stem("inference-perf/sanity_random.yaml.in"),
            "sanity_random"
        );
        assert_eq!(profile_stem("/tmp/x/mine.yaml"), "mine");
    }
}
