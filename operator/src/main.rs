//! The llmbench operator binary.
#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// The llmbench operator: reconciles BenchmarkRuns and WorkloadProfiles.
#[derive(Parser, Debug)]
#[command(name = "llmbench-operator", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Print the CustomResourceDefinitions this operator serves, as YAML (for `kubectl apply -f -`).
    Crds,
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Crds => {
            for (file, yaml) in llmbench_api::crd_manifests() {
                match yaml {
                    Ok(yaml) => print!("---\n{yaml}"),
                    Err(e) => {
                        eprintln!("llmbench-operator: cannot serialize {file}: {e}");
                        return ExitCode::FAILURE;
                    }
                }
            }
            ExitCode::SUCCESS
        }
    }
}
