//! The `llmbench` command line.
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand};
use llmbench_core::launcher_command::RunExit;
use llmbench_workload::profile::{Edits, Template, TemplateSource, Values, render_edited};

/// llmbench: benchmark LLM serving stacks (llm-d, vLLM, any OpenAI-compatible endpoint) with llm-d-benchmark,
/// inference-perf, guidellm and vllm-benchmark workload profiles.
#[derive(Parser, Debug)]
#[command(name = "llmbench", version, about, long_about = None, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// How logs are written to standard error: `text` (coloured only on a terminal, and never when NO_COLOR is
    /// set) or `json` (one JSON object a line, as a launcher pod writes them). The level comes from RUST_LOG
    /// (default info).
    #[arg(
        long,
        global = true,
        value_enum,
        ignore_case = true,
        env = "LLMBENCH_LOG_FORMAT",
        default_value_t = LogFormat::Text,
        value_name = "FORMAT"
    )]
    log_format: LogFormat,
}

/// `--log-format`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a benchmark: render the profile, build every prompt, drive the endpoint (--endpoint, else the server the
    /// profile names, else the embedded simulator), scrape the stack's Prometheus metrics meanwhile, and write
    /// requests.bin (every request's record; `llmbench export` turns it into requests.jsonl or requests.parquet), server_metrics.jsonl,
    /// summary.json, the harness's own result files, an llm-d benchmark
    /// report, plots/ and report.html to OUTPUT/RUN_ID/. Before the clock starts, a pre-flight checks the server
    /// (see --no-preflight). Exit codes: 1 an error (a records file that stopped taking records, on a full disk,
    /// included: every report is written from the records it holds, those it refused listed as lost, where the
    /// disk still takes them), 3 not a single request succeeded, 4 interrupted by
    /// SIGTERM/SIGINT (everything measured is written, marked interrupted), 5 the stack --serve started failed
    /// mid-run, 6 the pre-flight failed (the server cannot be used: nothing was timed or written), 7 the server
    /// stopped answering mid-run (--max-connect-failures; everything measured is written, marked stopped), 9
    /// an AIPerf profile's --failed-request-threshold stopped the run (everything measured is written, marked
    /// stopped).
    Run(Box<llmbench::run::RunArgs>),
    /// Run an experiment: a BenchmarkExperiment manifest or an llm-d-benchmark experiment file, one run per
    /// treatment and repeat (every treatment checked before the first starts), then a comparison in OUTPUT/ID/:
    /// experiment.json, comparison.json, treatment_comparison.csv, experiment-summary.yaml (and benchmarks.json for
    /// guidellm). Without an endpoint one embedded simulator serves every run. Each server is checked once, by the
    /// first run against it (see `llmbench run --help`, --no-preflight). `experiment report DIR` rewrites the
    /// comparison (and its pictures in plots/) from the files, and says which runs were killed mid-run (their
    /// reports rebuilt from what they recorded, as `llmbench report` does). Exit codes: 1 an error (nothing ran),
    /// 3 some run failed, 4 interrupted, 6 a server failed its pre-flight (the runs against it were skipped), 8
    /// (`experiment report`) some run was killed.
    #[cfg(feature = "experiment")]
    Experiment(Box<llmbench::experiment::ExperimentCommand>),
    /// Rebuild summary.json, every report and the pictures of a run directory from its run.json, requests.bin
    /// and server_metrics.jsonl (also for a run that was killed part way: a torn last record is skipped, the
    /// requests its sent log lists and no record holds are counted as lost in flight and listed in
    /// lost_in_flight.jsonl, and the summary says the run is incomplete). Exit codes: 1 an error, 8 the run was
    /// killed (its reports were rebuilt from what it recorded).
    Report(ReportArgs),
    /// Render a workload profile template: REPLACE_ENV_* placeholders and key=value overrides, exactly as the
    /// operator renders a BenchmarkRun's profile.
    Render(RenderArgs),
    /// The bundled profile library: `profiles list [--harness H]` (what each profile measures and the flags its
    /// placeholders need), `profiles show NAME [--harness H]` (its template, headed by those).
    #[command(subcommand)]
    Profiles(llmbench::profiles::ProfilesCommand),
    /// Serve the embedded vLLM-compatible OpenAI simulator (completions, chat, Responses, Messages, embeddings,
    /// rerank, score and pooling, models, health, vLLM metrics),
    /// with injectable latency and faults.
    Sim(llmbench_sim::sim::SimArgs),
    /// Draw pictures. For one run directory: its plots/ (PNG and SVG: latency distributions, token lengths,
    /// TTFT vs input length, latency, throughput and schedule delay over time, server metrics; a sweep's figures
    /// against each stage's offered rate or concurrency and per stage; a capacity search's points against their
    /// load with the SLO) and a self-contained report.html, written into it (for a sharded run's root, of its
    /// shards merged). For several directories, or an experiment directory (with experiment.json, one series per
    /// treatment): a comparison in --output — each factor's figures against its levels (error bars over
    /// repeats), latency CDFs, throughput vs latency, Pareto, and compare.html opening with the treatment table,
    /// the SLO verdict and the best treatment.
    Plot(PlotArgs),
    /// Bring a BenchmarkRun's results directory from its PVC to this machine (`results fetch RUN`), as `kubectl
    /// cp` does, or list a namespace's runs and where their results are (`results list`): through the Kubernetes
    /// API with your kubeconfig.
    Results(llmbench::results::ResultsCommand),
    /// Serve a web page over a results directory: every run and experiment in it (harness, profile, model, when,
    /// req/s, TTFT/TPOT p50/p99, failures, SLO verdict, capacity answer; live runs with their progress), filters
    /// and sorting, each run's report.html and pictures, and the side-by-side comparison of any runs picked (what
    /// `llmbench plot` draws). It works offline (no external assets) and only reads DIR; new runs appear without a
    /// restart. JSON API: GET /api/runs (every run and experiment), GET /api/runs/ID (one, by its directory
    /// relative to DIR), GET /api/compare?runs=ID,ID (draws the comparison; its page is at the address returned),
    /// GET /files/ID/FILE (a run's files, read-only; paths that lead out of DIR are refused), GET /healthz. See
    /// docs/dashboard.md.
    Dashboard(llmbench::dashboard::DashboardArgs),
    /// Build synthetic prompts of an exact token length, as a run does before its clock starts, and print how long
    /// it took as JSON (`make bench` compares it with the peers' prompt generators).
    Synth(SynthArgs),
    /// Write a run's records (requests.bin, compact and binary) as requests.jsonl (--format jsonl, the default): one
    /// JSON object per request, every raw timestamp (ns on the run's clock) and what the server said, as earlier
    /// versions wrote it, for jq; or as requests.parquet (--format parquet): one row per request under the same
    /// names, chunks as list columns, for pandas, polars or DuckDB. Into the run directory (each shard's, for a
    /// sharded run's root) unless --output says where (`-`: standard output). A killed run's torn last record is
    /// left out, with a warning. See docs/running.md, "Exporting the records".
    Export(ExportArgs),
    /// Dataset files: `dataset convert IN.pkl OUT.jsonl` turns a pickled pandas DataFrame (MLPerf's
    /// `open_orca_gpt4_tokenized_llama.sampled_24576.pkl` and the like) into JSONL records, one per row, every
    /// column kept (str, numbers, lists of token ids). Runs read such pickles directly; this shows what they read.
    #[command(subcommand)]
    Dataset(DatasetCommand),
}

#[derive(Subcommand, Debug)]
enum DatasetCommand {
    /// Convert a pickled pandas DataFrame into JSONL records.
    Convert {
        /// The `.pkl` file (pandas `to_pickle`, protocol 2-5).
        input: PathBuf,
        /// Where to write the JSONL (overwritten).
        output: PathBuf,
    },
}

/// Reads the whole frame, then writes one JSON object per row; prints how many rows went out.
fn dataset_command(command: DatasetCommand) -> anyhow::Result<()> {
    use std::io::Write as _;
    let DatasetCommand::Convert { input, output } = command;
    let bytes =
        std::fs::read(&input).with_context(|| format!("cannot read {}", input.display()))?;
    let rows = llmbench_text::pickle::read_dataframe(&bytes)
        .with_context(|| format!("{}: cannot read the pickled DataFrame", input.display()))?;
    let file = std::fs::File::create(&output)
        .with_context(|| format!("cannot create {}", output.display()))?;
    let mut out = std::io::BufWriter::new(file);
    for row in &rows {
        serde_json::to_writer(&mut out, row)
            .with_context(|| format!("cannot write {}", output.display()))?;
        out.write_all(b"\n")
            .with_context(|| format!("cannot write {}", output.display()))?;
    }
    out.flush()
        .with_context(|| format!("cannot write {}", output.display()))?;
    eprintln!(
        "llmbench: {} rows from {} written to {}",
        rows.len(),
        input.display(),
        output.display()
    );
    Ok(())
}

#[derive(Args, Debug)]
struct ExportArgs {
    /// A run's results directory, OUTPUT/RUN_ID (a sharded run's root, or one shard's directory in it).
    #[arg(value_name = "DIR")]
    dir: PathBuf,
    /// Where to write (overwritten); `-` for standard output (Parquet only when it is not a terminal). Default:
    /// requests.jsonl (requests.parquet) in the run directory.
    #[arg(long, short, value_name = "PATH")]
    output: Option<PathBuf>,
    /// What to write: `jsonl` (one JSON object per request) or `parquet` (one row per request, zstd-compressed,
    /// the JSON's field names; `usage`, `error` and `conversation` flattened to columns, chunks and images as
    /// list columns).
    #[arg(long, value_enum, default_value = "jsonl")]
    format: ExportFormatArg,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum ExportFormatArg {
    Jsonl,
    Parquet,
}

fn export_command(args: ExportArgs) -> anyhow::Result<()> {
    use llmbench_report::export::{ExportFormat, ExportTo, export_run};
    let format = match args.format {
        ExportFormatArg::Jsonl => ExportFormat::Jsonl,
        ExportFormatArg::Parquet => ExportFormat::Parquet,
    };
    let to = match args.output {
        None => ExportTo::RunDir,
        Some(path) if path.as_os_str() == "-" => ExportTo::Stdout,
        Some(path) => ExportTo::File(path),
    };
    {
        use std::io::IsTerminal;
        if binary_to_terminal(format, &to, std::io::stdout().is_terminal()) {
            anyhow::bail!(
                "llmbench export --format parquet --output -: standard output is a terminal, and Parquet is binary; \
                 redirect it (`> requests.parquet`, `| duckdb`) or give --output FILE"
            );
        }
    }
    for done in export_run(&args.dir, format, &to)? {
        if done.torn > 0 {
            tracing::warn!(
                records = %done.from.display(),
                "the records end in a torn record (the run was killed while writing it); it was left out"
            );
        }
        eprintln!(
            "llmbench: {} records from {} written to {}",
            done.records,
            done.from.display(),
            done.to.display()
        );
    }
    Ok(())
}

/// Whether an export would write binary Parquet onto a terminal (refused, as `gzip` and `zstd` refuse).
fn binary_to_terminal(
    format: llmbench_report::export::ExportFormat,
    to: &llmbench_report::export::ExportTo,
    stdout_is_terminal: bool,
) -> bool {
    use llmbench_report::export::{ExportFormat, ExportTo};
    matches!((format, to), (ExportFormat::Parquet, ExportTo::Stdout)) && stdout_is_terminal
}

#[derive(Args, Debug)]
struct SynthArgs {
    /// The tokenizer: a tokenizer.json, a directory holding one, a Hugging Face model id, or `builtin`.
    #[arg(long, default_value = "builtin", value_name = "SPEC")]
    tokenizer: String,
    /// How many prompts to build.
    #[arg(long, default_value_t = 10_000)]
    count: usize,
    /// The exact length of every prompt, in tokens.
    #[arg(long, default_value_t = 1_000)]
    prompt_tokens: u32,
    #[arg(long, default_value_t = 42)]
    seed: u64,
}

/// Times prompt synthesis alone (the tokenizer is loaded first, outside the timing), then checks every prompt's
/// length by re-encoding it.
fn synth_command(args: SynthArgs) -> anyhow::Result<()> {
    use llmbench_data::{LengthDistribution, Synthesizer, SyntheticSpec, synthetic_prompts};
    let tokenizer = runtime()?.block_on(llmbench_text::tokenizer::load_tokenizer(
        &args.tokenizer,
        &llmbench_text::tokenizer::HubOptions::from_env(),
    ))?;
    let started = std::time::Instant::now();
    let synth = Synthesizer::new(&tokenizer)?;
    let spec = SyntheticSpec {
        num_prompts: args.count,
        prompt_tokens: LengthDistribution::Fixed(args.prompt_tokens),
        output_tokens: None,
        prefix_buckets: Vec::new(),
        specials_in_each_length: 0,
        seed: args.seed,
    };
    let prompts = synthetic_prompts(&synth, &spec)?.into_inner();
    let seconds = started.elapsed().as_secs_f64();
    let mut exact = 0usize;
    for prompt in &prompts {
        if tokenizer.count(&prompt.text)? == args.prompt_tokens {
            exact += 1;
        }
    }
    println!(
        "{}",
        serde_json::json!({
            "prompts": prompts.len(),
            "tokens": args.prompt_tokens,
            "seconds": seconds,
            "exact": exact,
        })
    );
    Ok(())
}

#[derive(Args, Debug)]
#[command(group = clap::ArgGroup::new("source").required(true).args(["profile", "template"]))]
struct RenderArgs {
    /// The profile dialect: inference-perf, guidellm, vllm-benchmark, inferencemax, aiperf, mlperf, fmperf or nop.
    #[arg(long)]
    harness: llmbench_core::harness::Harness,
    /// A profile of the bundled library, e.g. sanity_random (see workload/profiles/<harness>/).
    #[arg(long, value_name = "NAME")]
    profile: Option<String>,
    /// A yaml.in template file.
    #[arg(long, value_name = "FILE")]
    template: Option<PathBuf>,
    /// The model: fills REPLACE_ENV_LLMDBENCH_DEPLOY_CURRENT_MODEL (and the tokenizer, unless --tokenizer is given).
    #[arg(long)]
    model: Option<String>,
    /// The tokenizer: fills REPLACE_ENV_LLMDBENCH_DEPLOY_CURRENT_TOKENIZER.
    #[arg(long)]
    tokenizer: Option<String>,
    /// The stack's base URL: fills REPLACE_ENV_LLMDBENCH_HARNESS_STACK_ENDPOINT_URL.
    #[arg(long, value_name = "URL")]
    endpoint: Option<String>,
    /// The model's context length: fills REPLACE_ENV_LLMDBENCH_DEPLOY_CURRENT_MAX_MODEL_LEN.
    #[arg(long, value_name = "TOKENS")]
    max_model_len: Option<u32>,
    /// A placeholder value, NAME=VALUE (NAME with or without the REPLACE_ENV_ prefix); beats the flags above.
    #[arg(long = "set", value_name = "NAME=VALUE")]
    set: Vec<String>,
    /// A profile override, KEY=VALUE: a dotted KEY is a path from the root (load.stages.0.rate=5), a bare KEY sets
    /// every key of that name (total_count=200); values are typed like YAML scalars, quote to keep a string. A KEY
    /// that matches nothing is an error, the last key of a dotted path too (a typo would otherwise add a key the
    /// harness ignores); it names the nearest key, or this dialect's path for another dialect's (rate, concurrency,
    /// duration, request count, input and output lengths).
    #[arg(long = "override", value_name = "KEY=VALUE")]
    overrides: Vec<String>,
    /// Create a key, KEY=VALUE: KEY is a path from the root whose last key is created under a mapping that exists
    /// (set when it exists); a missing parent or an index past a list's end is still an error. Applied before
    /// --override, so an --override may set what it created. A BenchmarkRun's spec.overrideAdd.
    #[arg(long = "override-add", value_name = "KEY=VALUE")]
    override_add: Vec<String>,
    /// An --override whose last key is missing creates it, with a warning (llm-d-benchmark's rule).
    #[arg(long)]
    lenient: bool,
    /// Write the rendered profile here instead of standard output.
    #[arg(long, short, value_name = "FILE")]
    output: Option<PathBuf>,
    /// The load flags, written into the profile's own keys as `llmbench run` writes them.
    #[command(flatten)]
    load: llmbench_workload::workload::load_flags::LoadFlags,
}

#[derive(Args, Debug)]
struct ReportArgs {
    /// A run's results directory, OUTPUT/RUN_ID (or one shard's directory in it).
    #[arg(value_name = "DIR")]
    dir: PathBuf,
    /// Also write the compact JSON summary (at most 4096 bytes) here.
    #[arg(long, value_name = "PATH")]
    summary_file: Option<PathBuf>,
    /// Records files (a sharded run's shards together) larger than this are summarised from disk in bounded
    /// memory, with the same numbers and every report file; the pictures keep 80 bytes per request, and past
    /// half the budget in those they place a uniform sample of the requests (and say so).
    #[arg(long, value_parser = llmbench_workload::limits::parse_bytes, default_value = "256MiB", value_name = "BYTES")]
    records_memory: u64,
}

#[derive(Args, Debug)]
struct PlotArgs {
    /// Run directories (OUTPUT/RUN_ID, with run.json) and experiment directories (with experiment.json).
    #[arg(value_name = "DIR", required = true)]
    dirs: Vec<PathBuf>,
    /// Where a comparison is written (a single run directory gets its pictures in DIR/plots/ instead).
    #[arg(long, short, value_name = "DIR", default_value = "plots-compare")]
    output: PathBuf,
}

/// One run directory: its own pictures and report.html, rewritten in place. Anything else: a comparison.
fn plot_command(args: PlotArgs) -> anyhow::Result<ExitCode> {
    let files = match args.dirs.as_slice() {
        [dir] if dir.join(llmbench_report::report::RUN_META_FILE).is_file() => {
            if llmbench::run::in_use(dir) {
                anyhow::bail!(
                    "a run is still writing {} (it holds {}); plot it once it has ended",
                    dir.display(),
                    llmbench::run::LOCK_FILE
                );
            }
            llmbench_report::plot::write_run_plots(
                dir,
                &llmbench_report::report::server_series(dir),
            )?
        }
        // A sharded run's root: its shards merged onto one timeline, as `llmbench report` merges them.
        [dir] if !llmbench_report::report::merge::shard_dirs(dir).is_empty() => {
            let Some(merged) = llmbench_report::report::merge::read_sharded(dir)? else {
                anyhow::bail!("{} has no shard with results", dir.display());
            };
            let summary = llmbench_report::report::summarize_run(&merged.meta, &merged.records);
            llmbench_report::plot::write_run_plots_of(
                dir,
                &merged.meta,
                &merged.records,
                &summary,
                &llmbench_report::report::server_series(dir),
            )?
        }
        dirs => llmbench::comparison::compare(dirs, &args.output)?,
    };
    for file in &files {
        println!("wrote {}", file.display());
    }
    Ok(ExitCode::SUCCESS)
}

// The run's exit codes are a contract with the operator, typed once in core.
const EXIT_NO_REQUEST_SUCCEEDED: u8 = RunExit::NoRequestSucceeded.code();
const EXIT_INTERRUPTED: u8 = RunExit::Interrupted.code();
const EXIT_STACK_FAILED: u8 = RunExit::StackFailed.code();
const EXIT_PREFLIGHT_FAILED: u8 = RunExit::PreflightFailed.code();
const EXIT_SERVER_STOPPED_ANSWERING: u8 = RunExit::ServerStoppedAnswering.code();
const EXIT_RUN_KILLED: u8 = RunExit::Killed.code();
const EXIT_FAILED_REQUEST_THRESHOLD: u8 = RunExit::FailedRequestThreshold.code();

fn run_command(args: llmbench::run::RunArgs) -> anyhow::Result<ExitCode> {
    if args.preflight_only {
        return preflight_command(&args);
    }
    // An emptyDir run's results go into the log once the run ended, however it ended (clap requires --run-id).
    let keep = args
        .results_to_log
        .zip(args.run_id.clone())
        .map(|(cap, id)| (args.output.join(&id), id, cap));
    let code = run_and_report(args);
    if let Some((dir, id, cap)) = keep {
        match llmbench::results::pack::results_block(&dir, &id, cap) {
            Ok(block) => {
                use std::io::Write as _;
                let mut out = std::io::stdout().lock();
                if let Err(e) = out.write_all(block.as_bytes()).and_then(|()| out.flush()) {
                    eprintln!("llmbench: warning: cannot write the results block: {e}");
                }
            }
            Err(e) => eprintln!(
                "llmbench: warning: cannot pack {} for the log: {e}",
                dir.display()
            ),
        }
    }
    code
}

/// `llmbench run --preflight-only`: the verdict on stdout (passed) or stderr (failed), and in --summary-file
/// either way, since a pod's termination message is where the operator reads it; exit code 0 or 6 (1 for a run
/// that cannot even be checked: a profile that does not parse, no model).
fn preflight_command(args: &llmbench::run::RunArgs) -> anyhow::Result<ExitCode> {
    let (text, code) = match runtime()?.block_on(llmbench::run::preflight_only(args)) {
        Ok(meta) => {
            let text = llmbench::run::describe_passed_preflight(&meta);
            println!("llmbench: {text}");
            (text, ExitCode::SUCCESS)
        }
        // The check's own words, without the run's note on --no-preflight: here the check is all there is.
        Err(llmbench::run::RunError::Preflight(e)) => {
            let text = format!("pre-flight: {e}");
            eprintln!("llmbench: error: {text}");
            (text, ExitCode::from(EXIT_PREFLIGHT_FAILED))
        }
        Err(e) => {
            let text = e.to_string();
            eprintln!("llmbench: error: {text}");
            (text, ExitCode::FAILURE)
        }
    };
    if let Some(path) = &args.summary_file
        && let Err(e) = std::fs::write(path, &text)
    {
        eprintln!("llmbench: warning: cannot write {}: {e}", path.display());
    }
    Ok(code)
}

fn run_and_report(args: llmbench::run::RunArgs) -> anyhow::Result<ExitCode> {
    let outcome = match runtime()?.block_on(llmbench::run::run(args)) {
        Ok(outcome) => outcome,
        Err(
            e @ (llmbench::run::RunError::Preflight(_) | llmbench::run::RunError::RequestsUnfit(_)),
        ) => {
            eprintln!("llmbench: error: {e}");
            return Ok(ExitCode::from(EXIT_PREFLIGHT_FAILED));
        }
        Err(e) => return Err(e.into()),
    };
    print!(
        "{}",
        llmbench_report::report::print_run(&outcome.meta, &outcome.summary)
    );
    if let Some(verdict) = &outcome.mlperf {
        print!("{}", verdict.summary_txt());
    }
    println!("results: {}", outcome.dir.display());
    if let Some(run) = &outcome.summary.run {
        eprintln!(
            "llmbench: {}",
            describe_completion(run, &outcome.summary.overall.requests)
        );
        if matches!(
            run.stopped,
            Some(llmbench_engine::engine::StopReason::Interrupted { .. })
        ) {
            return Ok(ExitCode::from(EXIT_INTERRUPTED));
        }
        if run.stopped == Some(llmbench_engine::engine::StopReason::StackFailed) {
            return Ok(ExitCode::from(EXIT_STACK_FAILED));
        }
        if matches!(
            run.stopped,
            Some(llmbench_engine::engine::StopReason::ServerStoppedAnswering { .. })
        ) {
            return Ok(ExitCode::from(EXIT_SERVER_STOPPED_ANSWERING));
        }
        // AIPerf's abort exits non-zero.
        if run.stopped == Some(llmbench_engine::engine::StopReason::FailedRequestThreshold) {
            return Ok(ExitCode::from(EXIT_FAILED_REQUEST_THRESHOLD));
        }
    }
    let overall = &outcome.summary.overall;
    let counts = &overall.requests;
    if counts.succeeded == 0 && counts.total > 0 {
        eprintln!(
            "llmbench: error: none of the {} requests succeeded{}; see the failures above and {}",
            counts.total,
            commonest_error(overall),
            outcome
                .dir
                .join(llmbench_report::report::REQUESTS_FILE)
                .display()
        );
        return Ok(ExitCode::from(EXIT_NO_REQUEST_SUCCEEDED));
    }
    Ok(ExitCode::SUCCESS)
}

/// ` (connect: cannot connect to …)`: the commonest error class with its first message; ` (every answer was cut
/// short: …)` when nothing failed; or nothing.
fn commonest_error(overall: &llmbench_metrics::metrics::Summary) -> String {
    let Some((key, _)) = overall
        .errors
        .iter()
        .max_by(|a, b| a.1.cmp(b.1).then_with(|| b.0.cmp(a.0)))
    else {
        return overall.truncation.as_ref().map_or_else(String::new, |cut| {
            format!(
                " (every answer was cut short: {} of the {} tokens asked, finish_reason {})",
                llmbench_report::report::tokens_range(&cut.output_tokens),
                llmbench_report::report::tokens_range(&cut.max_tokens),
                cut.finish_reasons
                    .keys()
                    .map(String::as_str)
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        });
    };
    match overall.error_samples.get(key) {
        Some(sample) => format!(" ({key}: {sample})"),
        None => format!(" ({key})"),
    }
}

#[cfg(feature = "experiment")]
fn experiment_command(
    command: llmbench::experiment::ExperimentCommand,
) -> anyhow::Result<ExitCode> {
    use llmbench::experiment::{self, ExperimentAction};
    if let Some(ExperimentAction::Report(args)) = command.action {
        let (_, written) = experiment::report(&args)?;
        for warning in &written.warnings {
            tracing::warn!("{warning}");
        }
        print!("{}", experiment::print_table(&written.comparison));
        for file in &written.files {
            println!("wrote {}", file.display());
        }
        for killed in &written.killed {
            eprintln!("llmbench: run {} was killed: {}", killed.dir, killed.what);
        }
        if !written.killed.is_empty() {
            return Ok(ExitCode::from(EXIT_RUN_KILLED));
        }
        return Ok(ExitCode::SUCCESS);
    }
    let outcome = runtime()?.block_on(experiment::run(&command.run))?;
    for warning in &outcome.written.warnings {
        tracing::warn!("{warning}");
    }
    print!("{}", experiment::print_table(&outcome.written.comparison));
    println!("results: {}", outcome.dir.display());
    if outcome.interrupted {
        eprintln!(
            "llmbench: the experiment was interrupted; the runs it did not start are marked skipped"
        );
        return Ok(ExitCode::from(experiment::EXIT_INTERRUPTED));
    }
    if let Some(failed) = &outcome.preflight_failed {
        eprintln!(
            "llmbench: error: a server failed its pre-flight, and the runs against it were skipped: {failed}"
        );
        return Ok(ExitCode::from(experiment::EXIT_PREFLIGHT_FAILED));
    }
    let failed = outcome.failed_runs();
    if failed > 0 {
        eprintln!(
            "llmbench: {failed} of {} runs failed; see {}",
            outcome.plan.runs.len(),
            outcome
                .dir
                .join(experiment::plan::EXPERIMENT_FILE)
                .display()
        );
        return Ok(ExitCode::from(experiment::EXIT_RUN_FAILED));
    }
    Ok(ExitCode::SUCCESS)
}

fn report_command(args: ReportArgs) -> anyhow::Result<ExitCode> {
    // A sharded run is merged from its shards: every one of them must have ended.
    let shards = llmbench_report::report::merge::shard_dirs(&args.dir);
    for dir in std::iter::once(&args.dir).chain(&shards) {
        if llmbench::run::in_use(dir) {
            anyhow::bail!(
                "a run is still writing {} (it holds {}); report it once it has ended",
                dir.display(),
                llmbench::run::LOCK_FILE
            );
        }
    }
    let outcome = llmbench_report::report::report_dir_within(
        &args.dir,
        args.summary_file.as_deref(),
        args.records_memory,
        llmbench::run::nop::model_load_of_run(&args.dir),
        &llmbench_report::plot::RunPictures,
    )?;
    if outcome.truncated_lines > 0 {
        tracing::warn!(
            lines = outcome.truncated_lines,
            "the records file ends in a torn record (the run was killed); it was skipped"
        );
    }
    print!(
        "{}",
        llmbench_report::report::print_run(&outcome.meta, &outcome.summary)
    );
    for file in &outcome.files {
        println!("wrote {}", file.display());
    }
    if let Some(run) = &outcome.summary.run {
        eprintln!(
            "llmbench: {}",
            describe_completion(run, &outcome.summary.overall.requests)
        );
        if run.state == llmbench_metrics::metrics::RunState::Incomplete {
            return Ok(ExitCode::from(EXIT_RUN_KILLED));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// One line on how a run ended when it did not end as planned.
fn describe_completion(
    run: &llmbench_metrics::metrics::Completion,
    recorded: &llmbench_metrics::metrics::RequestCounts,
) -> String {
    use llmbench_metrics::metrics::RunState;
    let planned = run
        .planned
        .map_or_else(|| "an open number of".to_owned(), |n| n.to_string());
    let sent = run
        .sent
        .map_or_else(|| "an unknown number".to_owned(), |n| n.to_string());
    match run.state {
        RunState::Complete => "the run completed".to_owned(),
        RunState::Interrupted | RunState::Stopped => format!(
            "the run stopped early ({}): {planned} requests planned, {sent} sent, {} recorded{}; every report is \
             marked so (`llmbench_run`)",
            run.stopped
                .map_or_else(|| "no reason recorded".to_owned(), |r| r.to_string()),
            recorded.total,
            llmbench_report::report::unrecorded(recorded.lost_in_flight)
        ),
        RunState::Incomplete => format!(
            "{}; these figures cover only what was recorded",
            llmbench_report::report::killed_run(run, recorded.lost_in_flight)
        ),
    }
}

fn render_command(args: RenderArgs) -> anyhow::Result<()> {
    let source = match (args.profile, args.template) {
        (Some(name), _) => TemplateSource::Builtin(name),
        (None, Some(path)) => TemplateSource::File(path),
        (None, None) => anyhow::bail!("give --profile NAME or --template FILE"),
    };
    let template = Template::load(args.harness.as_str(), &source)?;
    let values = Values {
        model: args.model,
        tokenizer: args.tokenizer,
        endpoint: args.endpoint,
        max_model_len: args.max_model_len,
        set: args.set,
    };
    let edits = Edits {
        overrides: args.overrides,
        add: args.override_add,
        lenient: args.lenient,
    };
    let rendered = render_edited(&template, &values, &edits, args.harness)?;
    for warning in rendered.warnings() {
        tracing::warn!("{warning}");
    }
    let applied = llmbench_workload::workload::load_flags::apply(
        args.harness,
        &template.name,
        &rendered.text,
        &args.load,
    )?;
    if !applied.edits.is_empty() {
        tracing::info!(
            "load flags: {}",
            llmbench_workload::workload::load_flags::describe(&applied.edits)
        );
    }
    let rendered = applied.profile;
    match args.output {
        Some(path) => std::fs::write(&path, rendered)
            .with_context(|| format!("cannot write {}", path.display()))?,
        None => print!("{rendered}"),
    }
    Ok(())
}

/// The fetched directory is the last line on stdout, for scripts; progress and notes go to stderr.
fn results_command(command: llmbench::results::ResultsCommand) -> anyhow::Result<ExitCode> {
    use llmbench::results::Output;
    match runtime()?.block_on(llmbench::results::execute(command)) {
        Ok(Output::Fetched(dir)) => println!("{}", dir.display()),
        Ok(Output::Table(table)) => print!("{table}"),
        Err(e) => {
            let Some(code) = e.exit_code() else {
                return Err(e.into());
            };
            eprintln!("llmbench: error: {e}");
            return Ok(ExitCode::from(code));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Logs go to stderr: JSON with `--log-format json` (or LLMBENCH_LOG_FORMAT=json, as in a launcher pod), plain text
/// otherwise, coloured only where [`log_colour`] says; the level comes from RUST_LOG (default info).
fn init_logging(format: LogFormat) {
    use std::io::IsTerminal as _;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let colour = log_colour(
        std::io::stderr().is_terminal(),
        std::env::var_os("NO_COLOR").as_deref(),
    );
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Json => builder.with_ansi(false).json().init(),
        LogFormat::Text => builder.with_ansi(colour).init(),
    }
}

/// Whether text logs carry ANSI colours: only on a terminal (a file, a pipe or a pod's log gets plain text), and
/// never when NO_COLOR is set to anything but the empty string (no-color.org: "when present and not an empty
/// string, regardless of its value").
fn log_colour(stderr_is_terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    stderr_is_terminal && no_color.is_none_or(|v| v.is_empty())
}

/// A multi-threaded runtime with one worker per CPU the cgroup allows.
fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(llmbench::sizing::available_cpus())
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// The error and its causes, each cause once: most of our errors already carry their source in their message.
fn describe(error: &anyhow::Error) -> String {
    let mut text = error.to_string();
    for cause in error.chain().skip(1) {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.log_format);
    let result = match cli.command {
        Command::Run(args) => run_command(*args),
        #[cfg(feature = "experiment")]
        Command::Experiment(command) => experiment_command(*command),
        Command::Report(args) => report_command(args),
        Command::Plot(args) => plot_command(args),
        Command::Render(args) => render_command(args).map(|()| ExitCode::SUCCESS),
        Command::Profiles(command) => llmbench::profiles::execute(&command)
            .map(|text| {
                print!("{text}");
                ExitCode::SUCCESS
            })
            .map_err(anyhow::Error::from),
        Command::Synth(args) => synth_command(args).map(|()| ExitCode::SUCCESS),
        Command::Dataset(command) => dataset_command(command).map(|()| ExitCode::SUCCESS),
        Command::Export(args) => export_command(args).map(|()| ExitCode::SUCCESS),
        Command::Results(command) => results_command(command),
        Command::Dashboard(args) => runtime().and_then(|rt| {
            rt.block_on(llmbench::dashboard::run_until_signal(args))
                .map(|()| ExitCode::SUCCESS)
                .map_err(anyhow::Error::from)
        }),
        Command::Sim(args) => runtime().and_then(|rt| {
            rt.block_on(llmbench_sim::sim::run_until_ctrl_c(args))
                .map(|()| ExitCode::SUCCESS)
                .map_err(anyhow::Error::from)
        }),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("llmbench: error: {}", describe(&e));
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::OsStr;

    use super::*;

    #[test]
    fn logs_are_coloured_only_on_a_terminal_without_no_color() {
        assert!(log_colour(true, None));
        assert!(!log_colour(false, None));
        assert!(!log_colour(true, Some(OsStr::new("1"))));
        assert!(!log_colour(true, Some(OsStr::new("false"))));
        // An empty NO_COLOR is not set, as no-color.org says.
        assert!(log_colour(true, Some(OsStr::new(""))));
    }

    #[test]
    fn parquet_is_refused_only_onto_a_terminal() {
        use llmbench_report::export::{ExportFormat, ExportTo};
        let file = ExportTo::File("runs.parquet".into());
        assert!(binary_to_terminal(
            ExportFormat::Parquet,
            &ExportTo::Stdout,
            true
        ));
        assert!(!binary_to_terminal(
            ExportFormat::Parquet,
            &ExportTo::Stdout,
            false
        ));
        assert!(!binary_to_terminal(ExportFormat::Parquet, &file, true));
        assert!(!binary_to_terminal(
            ExportFormat::Jsonl,
            &ExportTo::Stdout,
            true
        ));
        assert!(!binary_to_terminal(
            ExportFormat::Parquet,
            &ExportTo::RunDir,
            true
        ));
    }

    #[test]
    fn log_format_is_a_global_flag_of_every_command() {
        let cli = Cli::try_parse_from([
            "llmbench",
            "render",
            "--log-format",
            "json",
            "--harness",
            "nop",
            "--profile",
            "nop",
        ])
        .unwrap();
        assert_eq!(cli.log_format, LogFormat::Json);
        let cli = Cli::try_parse_from(["llmbench", "--log-format", "JSON", "sim"]).unwrap();
        assert_eq!(cli.log_format, LogFormat::Json);
        assert!(Cli::try_parse_from(["llmbench", "--log-format", "yaml", "sim"]).is_err());
    }

    /// The operator renders the launcher's command line with `llmbench_core::launcher_command`; every flag it can
    /// set must parse here, into the field it means. A flag renamed on either side fails this test.
    #[test]
    fn the_operators_command_line_parses_with_every_flag_into_its_field() {
        use std::time::Duration;

        use llmbench_core::capacity::CapacitySearchSpec;
        use llmbench_core::launcher_command::{
            DEFAULT_INTERRUPT_GRACE, Release, RunCommand, experiment_report_argv, report_argv,
        };
        let search: CapacitySearchSpec = serde_json::from_value(serde_json::json!(
            {"load": "rate", "slo": ["ttft_p99<=100ms"], "start": 1, "max": 8}
        ))
        .unwrap();
        let mut launch = RunCommand::new(
            llmbench_core::harness::Harness::InferencePerf,
            "/etc/llmbench/profile/profile.yaml",
            "meta-llama/Llama-3.1-8B-Instruct",
            "/requests/team",
            "bench-1",
            "/dev/termination-log",
        );
        launch.shard = (2, 4);
        launch.interrupt_grace = Duration::from_millis(2500);
        launch.metrics_listen = Some("10.0.0.7:9464".into());
        launch.release = Some(Release {
            address: "10.0.0.7:9465".into(),
            timeout: Duration::from_secs(960),
        });
        launch.endpoint = Some("http://bench-1-stack.team.svc:8000".into());
        launch.tokenizer = Some("meta-llama/Llama-3.1-8B-Instruct".into());
        launch.metrics_endpoints = vec![
            "http://a:8000/metrics".into(),
            "http://b:8000/metrics".into(),
        ];
        launch.stack_info = Some("/etc/llmbench/profile/stack-info.json".into());
        launch.profiler_start = Some("/start_profile".into());
        launch.profiler_stop = Some("/stop_profile".into());
        launch.reset_prefix_cache = true;
        launch.warm_prefix_cache = true;
        launch.capacity_search = Some(search.clone());
        let Command::Run(run) = Cli::try_parse_from(launch.argv().unwrap()).unwrap().command else {
            panic!("not `llmbench run`");
        };
        assert_eq!(run.harness, llmbench_core::harness::Harness::InferencePerf);
        assert_eq!(run.profile, "/etc/llmbench/profile/profile.yaml");
        assert_eq!(
            run.model.as_deref(),
            Some("meta-llama/Llama-3.1-8B-Instruct")
        );
        assert_eq!(run.output, PathBuf::from("/requests/team"));
        assert_eq!(run.run_id.as_deref(), Some("bench-1"));
        assert_eq!(
            run.summary_file,
            Some(PathBuf::from("/dev/termination-log"))
        );
        assert_eq!((run.shard.index, run.shard.count), (2, 4));
        assert_eq!(run.interrupt_grace, Duration::from_millis(2500));
        assert_eq!(run.metrics_listen, Some("10.0.0.7:9464".parse().unwrap()));
        assert_eq!(run.wait_for_release, Some("10.0.0.7:9465".parse().unwrap()));
        assert_eq!(run.release_timeout, Duration::from_secs(960));
        assert_eq!(
            run.endpoint.as_deref(),
            Some("http://bench-1-stack.team.svc:8000")
        );
        assert_eq!(
            run.tokenizer.as_deref(),
            Some("meta-llama/Llama-3.1-8B-Instruct")
        );
        assert_eq!(
            run.metrics_endpoints,
            ["http://a:8000/metrics", "http://b:8000/metrics"]
        );
        assert_eq!(
            run.stack_info,
            Some(PathBuf::from("/etc/llmbench/profile/stack-info.json"))
        );
        assert_eq!(run.profiler_start.as_deref(), Some("/start_profile"));
        assert_eq!(run.profiler_stop.as_deref(), Some("/stop_profile"));
        assert!(run.reset_prefix_cache && run.warm_prefix_cache);
        let parsed: CapacitySearchSpec =
            serde_json::from_str(run.capacity_search.as_deref().unwrap()).unwrap();
        assert_eq!(parsed, search);

        // The run's pre-flight alone: the same server, model and profile, none of the run's own flags (which
        // the launcher refuses beside --preflight-only).
        let Command::Run(check) = Cli::try_parse_from(launch.preflight_only().argv().unwrap())
            .unwrap()
            .command
        else {
            panic!("not `llmbench run`");
        };
        assert!(check.preflight_only);
        assert_eq!(check.profile, run.profile);
        assert_eq!(check.model, run.model);
        assert_eq!(check.endpoint, run.endpoint);
        assert_eq!(check.tokenizer, run.tokenizer);
        assert_eq!(check.summary_file, run.summary_file);
        assert_eq!((check.shard.index, check.shard.count), (0, 1));
        assert_eq!(check.wait_for_release, None);
        assert_eq!(check.metrics_listen, None);
        assert!(check.metrics_endpoints.is_empty() && check.stack_info.is_none());
        assert!(check.capacity_search.is_none() && !check.reset_prefix_cache);

        // `--vllm-profiler` conflicts with the hooks, so it goes alone; the defaults are the builder's.
        let mut vllm = RunCommand::new(
            llmbench_core::harness::Harness::Nop,
            "nop",
            "m",
            "/requests",
            "r",
            "/dev/termination-log",
        );
        vllm.vllm_profiler = true;
        let Command::Run(run) = Cli::try_parse_from(vllm.argv().unwrap()).unwrap().command else {
            panic!("not `llmbench run`");
        };
        assert!(run.vllm_profiler);
        assert_eq!((run.shard.index, run.shard.count), (0, 1));
        assert_eq!(run.interrupt_grace, DEFAULT_INTERRUPT_GRACE);
        assert_eq!(run.metrics_listen, None);

        // Without the flag, clap's default is the same grace.
        let Command::Run(run) =
            Cli::try_parse_from(["llmbench", "run", "--harness", "nop", "--profile", "nop"])
                .unwrap()
                .command
        else {
            panic!("not `llmbench run`");
        };
        assert_eq!(run.interrupt_grace, DEFAULT_INTERRUPT_GRACE);

        let Command::Report(report) =
            Cli::try_parse_from(report_argv("/requests/bench-1", "/dev/termination-log"))
                .unwrap()
                .command
        else {
            panic!("not `llmbench report`");
        };
        assert_eq!(report.dir, PathBuf::from("/requests/bench-1"));
        assert_eq!(
            report.summary_file,
            Some(PathBuf::from("/dev/termination-log"))
        );

        let argv = experiment_report_argv("/requests/sweep", "/etc/llmbench/experiment.json");
        let Command::Experiment(command) = Cli::try_parse_from(argv).unwrap().command else {
            panic!("not `llmbench experiment`");
        };
        let Some(llmbench::experiment::ExperimentAction::Report(report)) = command.action else {
            panic!("not `llmbench experiment report`");
        };
        assert_eq!(report.dir, PathBuf::from("/requests/sweep"));
        assert_eq!(
            report.plan,
            Some(PathBuf::from("/etc/llmbench/experiment.json"))
        );
    }
}
