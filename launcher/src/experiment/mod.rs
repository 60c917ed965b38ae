//! `llmbench experiment`: many runs as one experiment, on one machine — a BenchmarkExperiment manifest or an
//! llm-d-benchmark experiment file in, one `llmbench run` per treatment × repeat, and a comparison of them out.
//! The expansion (treatments × repeats, repeat-major), the table and the best treatment are llmbench-api's
//! `experiment` module, shared with the operator; this module reads files ([`source`]), applies the command line
//! and checks every treatment before any run starts ([`resolve`]), runs ([`runner`]) and writes the comparison
//! ([`compare`]) from the files alone, which `llmbench experiment report DIR` repeats.
//!
//! # Layout
//!
//! `<output>/<id>/experiment.json`, `comparison.json`, `treatment_comparison.csv`, `experiment-summary.yaml`,
//! `benchmarks.json` (guidellm runs only), and one directory per run, `<treatment>-r<repeat>/`, as `llmbench run`
//! writes it. A retried run's failed attempts are kept beside it as `<treatment>-r<repeat>.attempt<N>/`.
//!
//! # `experiment.json` (schema `llmbench.experiment/v1`, [`ExperimentPlan`])
//!
//! Written before the first run, rewritten after each. The operator writes the same shape for
//! `llmbench experiment report DIR --plan FILE`; fields marked *optional* may be left out.
//!
//! ```text
//! schema            "llmbench.experiment/v1"
//! name              string                     the experiment's name
//! id                string, optional           its directory name
//! harness           string                     e.g. "vllm-benchmark"
//! profile           string                     bundled profile name or file every treatment runs by default
//! source            string, optional           the file it was read from
//! source_format     string, optional           "BenchmarkExperiment" | "llm-d-benchmark"
//! endpoint          string, optional           absent: the embedded simulator
//! model             string, optional
//! overrides         [string], optional         key=value applied to every run before its treatment's
//! repeats           integer
//! capacity_search   object, optional           BenchmarkExperiment.spec.capacitySearch (camelCase keys)
//! slo               object, optional           BenchmarkRun.spec.slo: ttftP99Ms, tpotP99Ms, itlP99Ms, e2eP99Ms,
//!                                              maxFailureRate
//! max_attempts      integer, optional (1)      attempts per run
//! validate_failures bool, optional (false)     a run with failed requests counts as failed
//! stop_on_failure   bool, optional (false)
//! cooldown          string, optional           e.g. "30s"
//! hooks             [{name, method, url}], optional
//! cache_reset       bool, optional (false)     every run resets the engine's prefix cache first (cacheReset,
//!                                              template.prefixCache.reset, llm-d-benchmark's reset_caches)
//! cache_warm        bool, optional (false)     every run primes the cache with its prompts first
//!                                              (template.prefixCache.warm)
//! setup_treatments  [{name, overrides: [string], endpoint}], optional   llm-d-benchmark setup treatments
//! treatments        [{name, overrides: [string], levels: {string: string}, profile?, setup?, endpoint?,
//!                     model?, cache?}]   model: the model of `models` (--models) it runs, named in every
//!                                        request; cache: "cold" | "warm" (cacheStates), beating cache_warm
//! runs              [{dir, treatment, repeat, status, attempts?, hooks?: [{name, method, url, status?, error?}],
//!                     error?, started_at?, finished_at?, duration_s?}]
//!                   status: "pending" | "succeeded" | "failed" | "skipped"; dir is relative to the experiment
//!                   directory and may be missing for a failed run
//! started_at, finished_at  string (RFC 3339), optional
//! duration_s        number, optional
//! interrupted       bool, optional (false)
//! ```
//!
//! # Exit codes
//!
//! 0 every run succeeded; 1 the experiment could not start (a bad file, flag or treatment: nothing ran); 3 some
//! run failed; 4 SIGINT or SIGTERM stopped it (what ran is compared); 6 a server failed its pre-flight (the runs
//! against it were skipped).

pub mod compare;
pub(crate) mod figures;
pub mod plan;
pub mod plotted;
pub(crate) mod resolve;
pub(crate) mod runner;
pub(crate) mod source;

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, Subcommand};
use llmbench_api::v1alpha1::Harness;

pub use compare::{Comparison, Written, print_table};
pub(crate) use plan::ExperimentPlan;
pub(crate) use runner::ExperimentOutcome;

use llmbench_workload::profile::ProfileError;

/// The exit code when some run of the experiment failed.
pub const EXIT_RUN_FAILED: u8 = 3;
/// The exit code when SIGINT or SIGTERM stopped the experiment.
pub const EXIT_INTERRUPTED: u8 = llmbench_core::launcher_command::RunExit::Interrupted.code();
/// The exit code when a server failed its pre-flight: the runs against it were skipped.
pub const EXIT_PREFLIGHT_FAILED: u8 =
    llmbench_core::launcher_command::RunExit::PreflightFailed.code();

/// Why an experiment could not be read, checked, run or compared. Each names the file, flag or treatment.
#[derive(Debug, thiserror::Error)]
pub enum ExperimentError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}{}: {message}", at(*.line))]
    Invalid {
        path: PathBuf,
        line: Option<u32>,
        message: String,
    },
    #[error("{path}: {} unknown top-level key(s) (refused with --strict): {}", .keys.len(), .keys.join(", "))]
    UnknownKeys { path: PathBuf, keys: Vec<String> },
    #[error(
        "{path}: {} key(s) one edit from a key llm-d-benchmark reads: {}; a misspelt key would be ignored — fix the \
         spelling, or pass --lenient to run with {} ignored",
        .keys.len(),
        .keys.join("; "),
        if .keys.len() == 1 { "it" } else { "them" }
    )]
    NearMisses { path: PathBuf, keys: Vec<String> },
    #[error(
        "{path}: line {line}: `setup` has {count} setup treatment(s), each a re-deployment of the stack, which \
         llmbench does not do; give each an already deployed stack with --setup-endpoint NAME=URL (missing: {}), \
         or remove `setup` to run the treatments against one stack",
        .missing.join(", ")
    )]
    SetupNeedsEndpoints {
        path: PathBuf,
        line: u32,
        count: usize,
        missing: Vec<String>,
    },
    #[error("{path}: {source}")]
    Plan {
        path: PathBuf,
        source: llmbench_api::experiment::ExperimentError,
    },
    #[error("{flag}: {message}")]
    Flag { flag: &'static str, message: String },
    #[error("capacity search: {0}")]
    CapacitySearch(llmbench_api::capacity::ObjectiveError),
    #[error("not supported: {0}")]
    Unsupported(String),
    #[error("profile: {0}")]
    Profile(String),
    #[error(
        "{path}: the overrides every run applies (template, constants, --override-add, --override): {source}"
    )]
    BaseOverrides { path: PathBuf, source: ProfileError },
    /// A treatment's overrides (a factor's key, a level) do not fit its profile. `place` is the file and line.
    #[error("{place}: treatment `{treatment}`: {source}")]
    Treatment {
        place: String,
        treatment: String,
        source: Box<ProfileError>,
    },
    #[error("{place}: treatment `{treatment}`: {message}")]
    TreatmentProfile {
        place: String,
        treatment: String,
        message: String,
    },
    #[error(
        "{place}: treatments `{first}` and `{second}` run the same workload: what tells them apart changes nothing \
         llmbench sends or measures, so comparing them would compare noise — check the factor's key and levels \
         (--lenient runs them anyway)"
    )]
    SameWorkload {
        place: String,
        first: String,
        second: String,
    },
    #[error(
        "the experiment directory {path} already exists and is not empty; choose another --id or --output"
    )]
    DirExists { path: PathBuf },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot start the embedded simulator: {0}")]
    Sim(#[from] llmbench_sim::sim::SimError),
    #[error("{path}: not an experiment plan: {message}")]
    BadPlan { path: PathBuf, message: String },
    #[error("cannot handle {signal}: {source}")]
    Signals {
        signal: &'static str,
        source: std::io::Error,
    },
    #[error("cannot build the HTTP client for hooks: {0}")]
    Client(reqwest::Error),
}

fn at(line: Option<u32>) -> String {
    line.map(|l| format!(": line {l}")).unwrap_or_default()
}

/// `llmbench experiment FILE` and `llmbench experiment report DIR`.
#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct ExperimentCommand {
    #[command(subcommand)]
    pub action: Option<ExperimentAction>,
    #[command(flatten)]
    pub run: ExperimentArgs,
}

#[derive(Subcommand, Debug)]
pub enum ExperimentAction {
    /// Rewrite comparison.json, treatment_comparison.csv, experiment-summary.yaml and benchmarks.json of an
    /// experiment directory from its experiment.json (or --plan FILE, copied into DIR) and each run's summary.json.
    Report(ExperimentReportArgs),
}

/// Flags of `llmbench experiment report`.
#[derive(Args, Debug, Clone)]
pub struct ExperimentReportArgs {
    /// The experiment directory, OUTPUT/ID.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// The plan to report (an experiment.json as the operator writes it); copied into DIR as experiment.json.
    #[arg(long, value_name = "FILE")]
    pub plan: Option<PathBuf>,
}

/// Flags of `llmbench experiment FILE`.
#[derive(Args, Debug, Clone)]
pub struct ExperimentArgs {
    /// A BenchmarkExperiment manifest (llmbench.dev/v1alpha1), or an llm-d-benchmark experiment file
    /// (`treatments`, `constants`, `setup`, `reset_caches`, `treatment_max_attempts`, ...).
    #[arg(value_name = "FILE", required = true)]
    pub file: Option<PathBuf>,
    /// The profile dialect; beats the file's (template.harness, experiment.harness).
    #[arg(long)]
    pub harness: Option<Harness>,
    /// A bundled profile name (random_concurrent, or llm-d-benchmark's random_concurrent.yaml) or a profile file;
    /// beats the file's.
    #[arg(long, value_name = "NAME|FILE")]
    pub profile: Option<String>,
    /// The stack's base URL; beats template.stack.endpoint. Without any, one embedded simulator serves every run.
    #[arg(long, value_name = "URL")]
    pub endpoint: Option<String>,
    /// The served model name; beats template.stack.model.
    #[arg(long, conflicts_with = "models")]
    pub model: Option<String>,
    /// A model list, comma-separated: every treatment runs once per model, as llm-d-benchmark's
    /// LLMDBENCH_DEPLOY_MODEL_LIST runs the harness once per model, and the table gets a `model` column; beats
    /// spec.models. Without --endpoint, each model gets its own embedded simulator.
    #[arg(long, value_delimiter = ',', value_name = "MODEL,...")]
    pub models: Vec<String>,
    /// The tokenizer prompts are built with (see `llmbench run --help`).
    #[arg(long, value_name = "SPEC")]
    pub tokenizer: Option<String>,
    /// The model's context length (fills REPLACE_ENV_LLMDBENCH_DEPLOY_CURRENT_MAX_MODEL_LEN); beats
    /// template.stack.maxModelLen.
    #[arg(long, value_name = "TOKENS")]
    pub max_model_len: Option<u32>,
    /// A placeholder value for every run, NAME=VALUE; beats template.env.
    #[arg(long = "set", value_name = "NAME=VALUE")]
    pub set: Vec<String>,
    /// A profile override for every run, KEY=VALUE, applied after the template's overrides and the file's
    /// constants, before each treatment's own (a treatment setting the same key wins, as in llm-d-benchmark).
    #[arg(long = "override", value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,
    /// Create a profile key for every run, KEY=VALUE (see `llmbench run --help`), after template.overrideAdd and
    /// before every override, so a treatment or factor may set a key created here.
    #[arg(long = "override-add", value_name = "KEY=VALUE")]
    pub override_add: Vec<String>,
    /// The experiment goes to OUTPUT/ID/.
    #[arg(long, short, default_value = "experiments", value_name = "DIR")]
    pub output: PathBuf,
    /// The experiment's directory name. Default: <name>-<UTC time>.
    #[arg(long, value_name = "ID")]
    pub id: Option<String>,
    /// Runs per treatment; beats spec.repeats.
    #[arg(long, value_name = "N")]
    pub repeats: Option<u32>,
    /// An SLO capacity search in every run, JSON or YAML (see `llmbench run --help`); beats spec.capacitySearch.
    #[arg(long, value_name = "SPEC")]
    pub capacity_search: Option<String>,
    /// A pause between runs, e.g. 30s; beats spec.ordering.cooldown.
    #[arg(long, value_name = "DURATION")]
    pub cooldown: Option<String>,
    /// Start no run after one has failed.
    #[arg(long)]
    pub stop_on_failure: bool,
    /// An llm-d-benchmark setup treatment's stack, NAME=URL, one per setup treatment: every run treatment runs
    /// against each, named <setup>-<treatment>.
    #[arg(long = "setup-endpoint", value_name = "NAME=URL")]
    pub setup_endpoints: Vec<String>,
    /// Refuse every unknown key: of an llm-d-benchmark file, and of each treatment's profile. Without it, keys one
    /// edit from a known key (`reset_cache`, `api.streamming`), factors and treatment overrides that match no key of
    /// the profile, and treatments that run the same workload are errors, checked for every treatment before the
    /// first run starts; other unknown keys are warnings.
    #[arg(long, conflicts_with = "lenient")]
    pub strict: bool,
    /// Turn those errors into warnings (each is printed): near-miss keys are ignored, an override whose last key is
    /// missing creates it, and treatments that run the same workload run anyway.
    #[arg(long)]
    pub lenient: bool,
    /// Seed for arrivals and prompts when the profile sets none.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Embedded simulator: time to first token.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "50ms", value_name = "DURATION")]
    pub sim_ttft: Duration,
    /// Embedded simulator: time between tokens.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "10ms", value_name = "DURATION")]
    pub sim_itl: Duration,
    /// Skip the pre-flight (see `llmbench run --help`). Without it, the first run against each server (an
    /// endpoint and model) checks it before its clock starts, and the later runs against it do not; a server that
    /// fails the check has the runs against it skipped.
    #[arg(long)]
    pub no_preflight: bool,
}

/// Reads, checks and runs the experiment in `args.file`. Nothing is created before every check has passed.
pub async fn run(args: &ExperimentArgs) -> Result<ExperimentOutcome, ExperimentError> {
    let file = args.file.as_deref().ok_or_else(|| ExperimentError::Flag {
        flag: "FILE",
        message: "give the experiment file".to_owned(),
    })?;
    let resolved = load(file, args)?;
    for warning in &resolved.warnings {
        tracing::warn!("{warning}");
    }
    runner::execute(resolved, args).await
}

/// Reads and checks the experiment in `file` with the command line applied: the plan every run would follow.
pub(crate) fn load(
    file: &Path,
    args: &ExperimentArgs,
) -> Result<resolve::Resolved, ExperimentError> {
    let rule = source::KeyRule {
        strict: args.strict,
        lenient: args.lenient,
    };
    let source = source::read(file, rule)?;
    let mut resolved = resolve::resolve(source, args)?;
    let warnings = resolve::check(&resolved, rule)?;
    resolved.warnings.extend(warnings);
    Ok(resolved)
}

/// `llmbench experiment report DIR [--plan FILE]`.
pub fn report(args: &ExperimentReportArgs) -> Result<(ExperimentPlan, Written), ExperimentError> {
    let target = args.dir.join(plan::EXPERIMENT_FILE);
    let plan = match &args.plan {
        Some(file) => {
            let plan = plan::read(file)?;
            std::fs::create_dir_all(&args.dir).map_err(|source| ExperimentError::Write {
                path: args.dir.clone(),
                source,
            })?;
            let same = std::fs::canonicalize(file).ok() == std::fs::canonicalize(&target).ok();
            if !same {
                std::fs::copy(file, &target).map_err(|source| ExperimentError::Write {
                    path: target.clone(),
                    source,
                })?;
            }
            plan
        }
        None => plan::read(&target)?,
    };
    let written = compare::write_all(&args.dir, &plan)?;
    Ok((plan, written))
}
