//! The `llmbench` command line.
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand};
use llmbench::profile::{Template, TemplateSource, Values, render};

/// llmbench: benchmark LLM serving stacks (llm-d, vLLM, any OpenAI-compatible endpoint) with llm-d-benchmark,
/// inference-perf, guidellm and vllm-benchmark workload profiles.
#[derive(Parser, Debug)]
#[command(name = "llmbench", version, about, long_about = None, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Render a workload profile template: REPLACE_ENV_* placeholders and key=value overrides, exactly as the
    /// operator renders a BenchmarkRun's profile.
    Render(RenderArgs),
}

#[derive(Args, Debug)]
#[command(group = clap::ArgGroup::new("source").required(true).args(["profile", "template"]))]
struct RenderArgs {
    /// The profile dialect: inference-perf, guidellm, vllm-benchmark, inferencemax or nop.
    #[arg(long)]
    harness: llmbench_api::v1alpha1::Harness,
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
    /// every key of that name (total_count=200); values are typed like YAML scalars, quote to keep a string.
    #[arg(long = "override", value_name = "KEY=VALUE")]
    overrides: Vec<String>,
    /// Write the rendered profile here instead of standard output.
    #[arg(long, short, value_name = "FILE")]
    output: Option<PathBuf>,
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
    let rendered = render(&template, &values, &args.overrides)?;
    match args.output {
        Some(path) => std::fs::write(&path, rendered)
            .with_context(|| format!("cannot write {}", path.display()))?,
        None => print!("{rendered}"),
    }
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Render(args) => render_command(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("llmbench: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
