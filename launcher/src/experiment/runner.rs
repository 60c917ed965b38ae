//! Carrying out a checked plan: one run at a time through `llmbench run`'s own code, the cool-down between runs,
//! the hooks before each, retries, stopOnFailure, and SIGINT/SIGTERM stopping the experiment after the current
//! run. With no endpoint, one embedded simulator serves the whole experiment, so the hooks and every run hit the
//! same server. `experiment.json` is rewritten after every run, so a killed experiment still says what ran.
//!
//! The pre-flight runs once per server (an endpoint and a model), in the first run against it: the later runs
//! against it skip theirs (their run.json says which run checked), and when it fails the later runs against that
//! server are skipped instead of each failing the same way.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use clap::Parser;
use llmbench_api::experiment::run_overrides;
use llmbench_api::v1alpha1::CacheState;
use tokio::sync::Notify;

use super::compare::{self, Written};
use super::plan::{EXPERIMENT_FILE, ExperimentPlan, HookCall, PlanRun, RunStatus};
use super::resolve::{INLINE_TEMPLATE_FILE, ProfileChoice, Resolved};
use super::{ExperimentArgs, ExperimentError};
use crate::run::{RunArgs, RunError, RunOutcome, SIM_MODEL};
use llmbench_engine::engine::StopReason;
use llmbench_model::wallclock;
use llmbench_sim::sim::{self, SimConfig};

/// How an experiment ended.
#[derive(Debug)]
pub struct ExperimentOutcome {
    /// The experiment directory.
    pub dir: PathBuf,
    pub plan: ExperimentPlan,
    pub written: Written,
    /// SIGINT or SIGTERM stopped it.
    pub interrupted: bool,
    /// The first pre-flight that failed, with its run: the runs against that server were skipped.
    pub preflight_failed: Option<String>,
}

impl ExperimentOutcome {
    /// Runs that failed.
    pub fn failed_runs(&self) -> usize {
        self.plan
            .runs
            .iter()
            .filter(|r| r.status == RunStatus::Failed)
            .count()
    }
}

/// Set by SIGINT/SIGTERM; the experiment starts no run after it.
#[derive(Default)]
struct Stop {
    requested: AtomicBool,
    notify: Notify,
}

impl Stop {
    fn requested(&self) -> bool {
        self.requested.load(AtomicOrdering::SeqCst)
    }
}

/// Runs `resolved` into `<output>/<id>/`.
pub(crate) async fn execute(
    mut resolved: Resolved,
    args: &ExperimentArgs,
) -> Result<ExperimentOutcome, ExperimentError> {
    let dir = args.output.join(&resolved.plan.id);
    claim_dir(&dir)?;
    if let ProfileChoice::Inline(text) = &resolved.profile {
        let path = dir.join(INLINE_TEMPLATE_FILE);
        std::fs::write(&path, text).map_err(|source| ExperimentError::Write {
            path: path.clone(),
            source,
        })?;
        resolved.profile = ProfileChoice::File(path);
    }
    // One simulator per served model, as llm-d-benchmark stands up one stack per model of its model list.
    let mut embedded: BTreeMap<String, sim::RunningSim> = BTreeMap::new();
    if resolved.embedded() {
        let served = resolved
            .model
            .clone()
            .unwrap_or_else(|| SIM_MODEL.to_owned());
        let mut models: Vec<String> = resolved
            .plan
            .treatments
            .iter()
            .map(|t| t.model.clone().unwrap_or_else(|| served.clone()))
            .collect();
        models.sort();
        models.dedup();
        for model in models {
            let sim = sim::start(SimConfig {
                port: 0,
                model: model.clone(),
                ttft: args.sim_ttft,
                itl: args.sim_itl,
                seed: args.seed,
                ..SimConfig::default()
            })
            .await?;
            embedded.insert(model, sim);
        }
        resolved.model = Some(served);
        // The simulator's prompts are built with the builtin tokenizer unless one is asked for.
        resolved.tokenizer = resolved
            .tokenizer
            .clone()
            .or_else(|| Some(llmbench_text::tokenizer::BUILTIN.to_owned()));
    }
    let sim_urls: BTreeMap<String, String> = embedded
        .iter()
        .map(|(model, sim)| (model.clone(), sim.base_url()))
        .collect();
    let endpoint = resolved
        .model
        .as_ref()
        .and_then(|m| sim_urls.get(m))
        .or_else(|| sim_urls.values().next())
        .cloned();

    let stop = Arc::new(Stop::default());
    let watcher = watch_signals(Arc::clone(&stop))?;
    let started = Instant::now();
    let mut plan = resolved.plan.clone();
    plan.started_at = Some(wallclock::rfc3339_millis(wallclock::unix_ns_now()));
    let plan_path = dir.join(EXPERIMENT_FILE);
    super::plan::write(&plan, &plan_path)?;
    println!(
        "llmbench: experiment {} — {} treatment(s) × {} repeat(s) = {} run(s) against {} → {}",
        plan.name,
        plan.treatments.len(),
        plan.repeats,
        plan.runs.len(),
        match (&endpoint, &resolved.endpoint) {
            (Some(_), _) if sim_urls.len() > 1 => format!(
                "{} embedded simulators, one per model ({})",
                sim_urls.len(),
                sim_urls.keys().cloned().collect::<Vec<_>>().join(", ")
            ),
            (Some(url), _) => format!("the embedded simulator ({url})"),
            (None, Some(url)) => url.clone(),
            (None, None) => "each setup treatment's endpoint".to_owned(),
        },
        dir.display()
    );

    let context = RunContext {
        resolved: &resolved,
        args,
        dir: &dir,
        endpoint: endpoint.clone().or_else(|| resolved.endpoint.clone()),
        sim_urls,
        client: hook_client()?,
        stop: &stop,
        checked: Mutex::default(),
    };
    let cooldown = plan
        .cooldown
        .as_deref()
        .map(llmbench_api::experiment::cooldown)
        .transpose()
        .map_err(|e| ExperimentError::Flag {
            flag: "ordering.cooldown",
            message: e.to_string(),
        })?;
    let total = plan.runs.len();
    let mut halted: Option<&'static str> = None;
    for index in 0..total {
        if stop.requested() {
            halted = Some("interrupted");
        }
        if let Some(why) = halted {
            let run = &mut plan.runs[index];
            run.status = RunStatus::Skipped;
            run.error = Some(why.to_owned());
            continue;
        }
        if index > 0
            && let Some(pause) = cooldown.filter(|d| !d.is_zero())
        {
            tracing::info!(cooldown = %humantime::format_duration(pause), "cooling down before the next run");
            tokio::select! {
                () = tokio::time::sleep(pause) => {}
                () = stop.notify.notified() => {}
            }
            if stop.requested() {
                halted = Some("interrupted");
                let run = &mut plan.runs[index];
                run.status = RunStatus::Skipped;
                run.error = Some("interrupted".to_owned());
                continue;
            }
        }
        let mut run = plan.runs[index].clone();
        context.carry_out(&plan, &mut run).await;
        println!(
            "llmbench: [{}/{total}] {}: {}",
            index + 1,
            run.dir,
            match (&run.status, &run.error) {
                (RunStatus::Failed, Some(e)) => format!("failed — {e}"),
                (status, _) => status.as_str().to_owned(),
            }
        );
        let failed = run.status == RunStatus::Failed;
        plan.runs[index] = run;
        super::plan::write(&plan, &plan_path)?;
        if stop.requested() {
            halted = Some("interrupted");
        } else if failed && plan.stop_on_failure {
            tracing::warn!("a run failed and stopOnFailure is set: the remaining runs are skipped");
            halted = Some("skipped: an earlier run failed (stopOnFailure)");
        }
    }
    watcher.abort();
    for (model, sim) in embedded {
        if let Err(e) = sim.shutdown().await {
            tracing::warn!(%model, error = %e, "the embedded simulator did not shut down cleanly");
        }
    }
    plan.interrupted = stop.requested();
    plan.finished_at = Some(wallclock::rfc3339_millis(wallclock::unix_ns_now()));
    plan.duration_s = Some(started.elapsed().as_secs_f64());
    super::plan::write(&plan, &plan_path)?;
    let written = compare::write_all(&dir, &plan)?;
    let preflight_failed = context
        .checked
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .values()
        .find_map(|checked| match checked {
            Checked::Failed { run, error } => Some(format!("run {run}: {error}")),
            Checked::Passed { .. } => None,
        });
    Ok(ExperimentOutcome {
        dir,
        interrupted: plan.interrupted,
        plan,
        written,
        preflight_failed,
    })
}

/// The experiment directory: created, and refused when it already holds something (an earlier experiment's
/// runs are never mixed with this one's).
fn claim_dir(dir: &Path) -> Result<(), ExperimentError> {
    if dir
        .read_dir()
        .is_ok_and(|mut entries| entries.next().is_some())
    {
        return Err(ExperimentError::DirExists {
            path: dir.to_owned(),
        });
    }
    std::fs::create_dir_all(dir).map_err(|source| ExperimentError::Write {
        path: dir.to_owned(),
        source,
    })
}

/// What every run of the experiment shares.
struct RunContext<'a> {
    resolved: &'a Resolved,
    args: &'a ExperimentArgs,
    dir: &'a Path,
    /// The experiment's endpoint (the embedded simulator's, or --endpoint); a setup treatment's overrides it.
    endpoint: Option<String>,
    /// Served model → its embedded simulator's URL; a treatment with a model of `models` runs against its own.
    sim_urls: BTreeMap<String, String>,
    client: reqwest::Client,
    stop: &'a Stop,
    /// Each server's pre-flight, by (endpoint, model), as the first run against it found it.
    checked: Mutex<BTreeMap<ServerKey, Checked>>,
}

/// A server as a run meets it: its endpoint (none: the one the profile names) and the model its requests name.
type ServerKey = (Option<String>, Option<String>);

/// How a server's pre-flight went.
#[derive(Debug, Clone)]
enum Checked {
    /// In this run, which got past it.
    Passed { run: String },
    /// In this run, with this error.
    Failed { run: String, error: String },
}

impl RunContext<'_> {
    /// Carries out one planned run, with its hooks and retries, recording how it went in `run`.
    async fn carry_out(&self, plan: &ExperimentPlan, run: &mut PlanRun) {
        let Some(treatment) = plan.treatments.iter().find(|t| t.name == run.treatment) else {
            run.status = RunStatus::Failed;
            run.error = Some(format!("no treatment `{}` in the plan", run.treatment));
            return;
        };
        let endpoint = treatment
            .endpoint
            .clone()
            .or_else(|| {
                treatment
                    .model
                    .as_ref()
                    .and_then(|m| self.sim_urls.get(m).cloned())
            })
            .or_else(|| self.endpoint.clone());
        let model = treatment
            .model
            .clone()
            .or_else(|| self.resolved.model.clone());
        let server: ServerKey = (endpoint.clone(), model);
        let checked = self
            .checked
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&server)
            .cloned();
        if let Some(Checked::Failed { run: first, .. }) = &checked {
            run.status = RunStatus::Skipped;
            run.error = Some(format!(
                "skipped: its server failed the pre-flight in run {first}"
            ));
            return;
        }
        let started = Instant::now();
        run.started_at = Some(wallclock::rfc3339_millis(wallclock::unix_ns_now()));
        let max_attempts = plan.max_attempts.max(1);
        for attempt in 1..=max_attempts {
            run.attempts = attempt;
            for hook in &plan.hooks {
                run.hooks
                    .push(call_hook(&self.client, hook, endpoint.as_deref()).await);
            }
            let args = self
                .run_args(plan, treatment, run, endpoint.clone())
                .map(|mut args| {
                    if let Some(Checked::Passed { run: first }) = &checked {
                        args.preflight_done = Some(format!(
                            "the experiment checked this server (endpoint and model) in its run {first}"
                        ));
                    }
                    args
                });
            let result = match args {
                Ok(args) => match crate::run::run(args).await {
                    Ok(outcome) => {
                        // It got past the pre-flight: the later runs against this server need not check again.
                        self.checked
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .entry(server.clone())
                            .or_insert_with(|| Checked::Passed {
                                run: run.dir.clone(),
                            });
                        judge(&outcome, plan.validate_failures)
                    }
                    Err(e @ RunError::Preflight(_)) => {
                        let error = e.to_string();
                        if attempt == max_attempts || self.stop.requested() {
                            self.checked
                                .lock()
                                .unwrap_or_else(PoisonError::into_inner)
                                .insert(
                                    server.clone(),
                                    Checked::Failed {
                                        run: run.dir.clone(),
                                        error: error.clone(),
                                    },
                                );
                        }
                        Err(error)
                    }
                    Err(e) => Err(e.to_string()),
                },
                Err(e) => Err(e),
            };
            match result {
                Ok(()) => {
                    run.status = RunStatus::Succeeded;
                    run.error = None;
                    break;
                }
                Err(e) => {
                    run.status = RunStatus::Failed;
                    run.error = Some(e.clone());
                    if attempt < max_attempts && !self.stop.requested() {
                        tracing::warn!(
                            run = run.dir,
                            attempt,
                            error = e,
                            "the run failed; trying again"
                        );
                        self.set_aside(&run.dir, attempt);
                    } else {
                        break;
                    }
                }
            }
        }
        run.finished_at = Some(wallclock::rfc3339_millis(wallclock::unix_ns_now()));
        run.duration_s = Some(started.elapsed().as_secs_f64());
    }

    /// Moves a failed attempt's directory to `<dir>.attempt<N>`, so the next attempt starts in a fresh one and the
    /// run's directory ends up holding its last attempt.
    fn set_aside(&self, dir: &str, attempt: u32) {
        let from = self.dir.join(dir);
        if from.exists() {
            let to = self.dir.join(format!("{dir}.attempt{attempt}"));
            if let Err(e) = std::fs::rename(&from, &to) {
                tracing::warn!(from = %from.display(), error = %e, "cannot set the failed attempt aside");
            }
        }
    }

    /// `llmbench run`'s flags for one run. They are parsed from a command line, so every flag this code does not
    /// set keeps the default `llmbench run` gives it.
    fn run_args(
        &self,
        plan: &ExperimentPlan,
        treatment: &super::plan::PlanTreatment,
        run: &PlanRun,
        endpoint: Option<String>,
    ) -> Result<RunArgs, String> {
        #[derive(Parser)]
        struct Wrapper {
            #[command(flatten)]
            run: RunArgs,
        }
        let resolved = self.resolved;
        let profile = resolved.profile_of(&treatment.name).label();
        let mut args = Wrapper::try_parse_from([
            "llmbench-run",
            "--harness",
            resolved.harness.as_str(),
            "--profile",
            &profile,
        ])
        .map_err(|e| e.to_string())?
        .run;
        args.endpoint = endpoint;
        args.model = treatment.model.clone().or_else(|| resolved.model.clone());
        args.tokenizer = resolved.tokenizer.clone();
        args.max_model_len = resolved.max_model_len;
        args.metrics_endpoints = resolved.metrics_endpoints.clone();
        args.set = resolved.set.clone();
        args.overrides = run_overrides(
            &plan.overrides,
            &llmbench_api::experiment::ResolvedTreatment::from(treatment),
        );
        args.override_add = plan.override_add.clone();
        args.output = self.dir.to_owned();
        args.run_id = Some(run.dir.clone());
        args.strict = self.args.strict;
        args.lenient = self.args.lenient;
        args.seed = self.args.seed;
        args.capacity_search = plan
            .capacity_search
            .as_ref()
            .map(serde_json::to_string)
            .transpose()
            .map_err(|e| e.to_string())?;
        args.sim_ttft = self.args.sim_ttft;
        args.sim_itl = self.args.sim_itl;
        args.no_preflight = self.args.no_preflight;
        // A cold run meets an emptied cache, a warm one a cache primed with its own prompts.
        args.reset_prefix_cache = plan.cache_reset || treatment.cache == Some(CacheState::Cold);
        args.warm_prefix_cache = match treatment.cache {
            Some(CacheState::Warm) => true,
            Some(CacheState::Cold) => false,
            None => plan.cache_warm,
        };
        Ok(args)
    }
}

/// Whether a run that ended counts as succeeded: it was not interrupted, some request succeeded, and (with
/// validate_failures) none failed.
fn judge(outcome: &RunOutcome, validate_failures: bool) -> Result<(), String> {
    if let Some(StopReason::Interrupted { signal }) = outcome.stopped {
        return Err(format!("interrupted by {signal}"));
    }
    // Its figures end where the server died: not a measurement of the treatment.
    if let Some(reason @ StopReason::ServerStoppedAnswering { .. }) = outcome.stopped {
        return Err(reason.to_string());
    }
    let counts = outcome.summary.overall.requests;
    if counts.total > 0 && counts.succeeded == 0 {
        let truncated = (counts.truncated > 0).then(|| format!("cut short: {}", counts.truncated));
        return Err(format!(
            "none of the {} requests succeeded ({})",
            counts.total,
            outcome
                .summary
                .overall
                .errors
                .iter()
                .map(|(class, n)| format!("{class}: {n}"))
                .chain(truncated)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if validate_failures && counts.failed > 0 {
        return Err(format!(
            "{} of {} requests failed (validate_failures)",
            counts.failed, counts.total
        ));
    }
    Ok(())
}

fn hook_client() -> Result<reqwest::Client, ExperimentError> {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .map_err(ExperimentError::Client)
}

/// A hook's URL: a full http(s) URL as it is, a path joined to the stack's endpoint.
pub(crate) fn hook_url(url: &str, endpoint: Option<&str>) -> Option<String> {
    if url.starts_with("http://") || url.starts_with("https://") {
        return Some(url.to_owned());
    }
    let base = endpoint?.trim_end_matches('/');
    Some(format!("{base}/{}", url.trim_start_matches('/')))
}

/// Calls one hook; a failure is recorded, never fatal.
async fn call_hook(
    client: &reqwest::Client,
    hook: &llmbench_api::v1alpha1::Hook,
    endpoint: Option<&str>,
) -> HookCall {
    let mut call = HookCall {
        name: hook.name.clone(),
        method: hook.method.clone(),
        url: hook.url.clone(),
        status: None,
        error: None,
    };
    let Some(url) = hook_url(&hook.url, endpoint) else {
        call.error = Some("a relative hook URL needs the stack's endpoint".to_owned());
        return call;
    };
    call.url = url.clone();
    let method = match reqwest::Method::from_bytes(hook.method.as_bytes()) {
        Ok(m) => m,
        Err(e) => {
            call.error = Some(format!("method `{}`: {e}", hook.method));
            return call;
        }
    };
    match client.request(method, &url).send().await {
        Ok(response) => {
            let status = response.status();
            call.status = Some(status.as_u16());
            if !status.is_success() {
                tracing::warn!(hook = hook.name, url, %status, "hook answered with an error (not fatal)");
            }
        }
        Err(e) => {
            tracing::warn!(hook = hook.name, url, error = %e, "hook failed (not fatal)");
            call.error = Some(e.to_string());
        }
    }
    call
}

/// SIGINT and SIGTERM ask the experiment to stop after the current run (the run itself handles the signal too:
/// it stops issuing and writes what it measured).
fn watch_signals(stop: Arc<Stop>) -> Result<tokio::task::JoinHandle<()>, ExperimentError> {
    use tokio::signal::unix::{SignalKind, signal};
    let listen = |kind: SignalKind, name: &'static str| {
        signal(kind).map_err(|source| ExperimentError::Signals {
            signal: name,
            source,
        })
    };
    let mut term = listen(SignalKind::terminate(), "SIGTERM")?;
    let mut int = listen(SignalKind::interrupt(), "SIGINT")?;
    Ok(tokio::spawn(async move {
        loop {
            let name = tokio::select! {
                Some(()) = term.recv() => "SIGTERM",
                Some(()) = int.recv() => "SIGINT",
                else => return,
            };
            if !stop.requested.swap(true, AtomicOrdering::SeqCst) {
                tracing::warn!(
                    signal = name,
                    "stopping the experiment after the current run; the comparison of what ran is still written"
                );
            }
            stop.notify.notify_waiters();
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hook_paths_join_the_endpoint_and_full_urls_stay() {
        assert_eq!(
            hook_url("/reset_prefix_cache", Some("http://h:8000/")).as_deref(),
            Some("http://h:8000/reset_prefix_cache")
        );
        assert_eq!(
            hook_url("reset", Some("http://h:8000")).as_deref(),
            Some("http://h:8000/reset")
        );
        assert_eq!(
            hook_url("https://other/x", None).as_deref(),
            Some("https://other/x")
        );
        assert_eq!(hook_url("/x", None), None);
    }
}
