//! `llmbench profiles`: the bundled profile library, listed (harness, name, purpose, the flags its placeholders
//! need) and shown (the template, with each placeholder and the flag that fills it).

use clap::Subcommand;
use llmbench_core::harness::Harness;
use llmbench_core::library::{BuiltinProfile, LibraryError, builtin_profile, builtin_profiles};
use llmbench_core::render::{TOKEN_PREFIX, nearest, placeholders, well_known};

/// `llmbench profiles …`.
#[derive(Subcommand, Debug, Clone)]
pub enum ProfilesCommand {
    /// List the bundled profiles: harness, name, the flags their placeholders need, and what each measures.
    List {
        /// Only this harness's profiles.
        #[arg(long)]
        harness: Option<Harness>,
    },
    /// Print a bundled profile's template, headed by its purpose and the flag that fills each placeholder (as
    /// YAML comments, so the output can be saved and run as a profile file).
    Show {
        /// The profile's name, e.g. sanity_random.
        name: String,
        /// The harness, when several have a profile of that name.
        #[arg(long)]
        harness: Option<Harness>,
    },
}

/// Why a profile cannot be shown.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ProfilesError {
    #[error("no bundled profile `{name}`{hint}\n  help: `llmbench profiles list` lists them")]
    Unknown { name: String, hint: String },
    #[error(
        "`{name}` is a profile of {}; pick one with --harness\n  help: llmbench profiles show {name} --harness {}",
        .harnesses.join(", "), .harnesses[0]
    )]
    Ambiguous {
        name: String,
        harnesses: Vec<&'static str>,
    },
    #[error("{source}{also}")]
    Library { source: LibraryError, also: String },
}

/// Runs the command; what it prints.
pub fn execute(command: &ProfilesCommand) -> Result<String, ProfilesError> {
    match command {
        ProfilesCommand::List { harness } => Ok(list(*harness)),
        ProfilesCommand::Show { name, harness } => show(name, *harness),
    }
}

/// The table of bundled profiles, of one harness or all.
pub(crate) fn list(harness: Option<Harness>) -> String {
    let rows: Vec<[String; 4]> = builtin_profiles()
        .iter()
        .filter(|p| harness.is_none_or(|h| h.as_str() == p.harness))
        .map(|p| {
            let flags: Vec<String> = ordered_placeholders(p.template)
                .iter()
                .map(|name| filled_by(name).short)
                .collect();
            [
                p.harness.to_owned(),
                p.name.to_owned(),
                p.purpose().to_owned(),
                flags.join(" "),
            ]
        })
        .collect();
    let header = ["HARNESS", "NAME", "PURPOSE", "PLACEHOLDERS (FILLED BY)"].map(str::to_owned);
    let mut widths = header.clone().map(|h| h.chars().count());
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in std::iter::once(&header).chain(&rows) {
        let line = row
            .iter()
            .zip(widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect::<Vec<_>>()
            .join("  ");
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out.push_str(
        "\n`--set NAME` is `--set NAME=VALUE`. `llmbench profiles show NAME` prints a profile; `llmbench run \
         --harness HARNESS --profile NAME` runs it (without --endpoint, against the embedded simulator).\n",
    );
    out
}

/// The template of `name`, headed by comments: what it measures, each placeholder and its flag, how to run it.
pub(crate) fn show(name: &str, harness: Option<Harness>) -> Result<String, ProfilesError> {
    let profile = find(name, harness)?;
    let mut out = format!("# {}: {}\n", profile.file_name(), profile.purpose());
    let names = ordered_placeholders(profile.template);
    if names.is_empty() {
        out.push_str("# No placeholders.\n");
    } else {
        out.push_str("# Placeholders and the flags that fill them:\n");
        let width = names
            .iter()
            .map(|n| n.len() + TOKEN_PREFIX.len())
            .max()
            .unwrap_or(0);
        for name in &names {
            let fill = filled_by(name);
            let token = format!("{TOKEN_PREFIX}{name}");
            out.push_str(&format!(
                "#   {token:<width$}  {}{}\n",
                fill.flag, fill.note
            ));
        }
    }
    out.push_str(&format!(
        "# Run it: llmbench run --harness {} --profile {}\n",
        profile.harness, profile.name
    ));
    out.push_str(profile.template);
    if !profile.template.ends_with('\n') {
        out.push('\n');
    }
    Ok(out)
}

/// `name` (with or without `.yaml.in`) among the bundled profiles of `harness`, or of every harness.
fn find(name: &str, harness: Option<Harness>) -> Result<&'static BuiltinProfile, ProfilesError> {
    let name = name.strip_suffix(".in").unwrap_or(name);
    let name = name.strip_suffix(".yaml").unwrap_or(name);
    let named: Vec<&'static BuiltinProfile> = builtin_profiles()
        .iter()
        .filter(|p| p.name == name)
        .collect();
    if let Some(harness) = harness {
        return builtin_profile(harness.as_str(), name).map_err(|source| {
            let elsewhere: Vec<&str> = named.iter().map(|p| p.harness).collect();
            let also = match elsewhere.first() {
                None => String::new(),
                Some(first) => format!(
                    "\n  help: `{name}` is a profile of {}: llmbench profiles show {name} --harness {first}",
                    elsewhere.join(", ")
                ),
            };
            ProfilesError::Library { source, also }
        });
    }
    match named.as_slice() {
        [one] => Ok(one),
        [] => {
            let names: Vec<&'static str> = builtin_profiles().iter().map(|p| p.name).collect();
            let hint = nearest(name, names.iter().copied())
                .map(|near| {
                    let of: Vec<&str> = builtin_profiles()
                        .iter()
                        .filter(|p| p.name == near)
                        .map(|p| p.harness)
                        .collect();
                    format!(" — did you mean `{near}` ({})?", of.join(", "))
                })
                .unwrap_or_default();
            Err(ProfilesError::Unknown {
                name: name.to_owned(),
                hint,
            })
        }
        several => Err(ProfilesError::Ambiguous {
            name: name.to_owned(),
            harnesses: several.iter().map(|p| p.harness).collect(),
        }),
    }
}

/// The template's placeholders, those the stack's flags fill first (in the order `llmbench run --help` lists the
/// flags), then the others as they appear.
fn ordered_placeholders(template: &str) -> Vec<String> {
    let mut names = placeholders(template);
    names.sort_by_key(|name| {
        STACK_ORDER
            .iter()
            .position(|known| known == name)
            .unwrap_or(STACK_ORDER.len())
    });
    names
}

/// The placeholders the stack's flags fill, in the order the list shows them.
const STACK_ORDER: [&str; 4] = [
    well_known::MODEL,
    well_known::TOKENIZER,
    well_known::ENDPOINT_URL,
    well_known::MAX_MODEL_LEN,
];

/// The flag that fills a placeholder, and what it defaults to.
struct Fill {
    flag: String,
    /// The flag for the list: `--set NAME` without its `=VALUE`.
    short: String,
    note: &'static str,
}

fn filled_by(name: &str) -> Fill {
    let (flag, note) = match name {
        well_known::MODEL => (
            "--model",
            " (the embedded simulator's model when there is no endpoint)",
        ),
        well_known::TOKENIZER => ("--tokenizer", " (default: --model)"),
        well_known::ENDPOINT_URL => ("--endpoint", " (without it, the embedded simulator)"),
        well_known::MAX_MODEL_LEN => ("--max-model-len", ""),
        other => {
            return Fill {
                flag: format!("--set {other}=VALUE"),
                short: format!("--set {other}"),
                note: "",
            };
        }
    };
    Fill {
        flag: flag.to_owned(),
        short: flag.to_owned(),
        note,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_has_every_bundled_profile_with_its_purpose_and_flags() {
        let table = list(None);
        for profile in builtin_profiles() {
            assert!(
                table.lines().any(|line| {
                    let cells: Vec<&str> = line.split_whitespace().collect();
                    cells.first() == Some(&profile.harness)
                        && cells.get(1) == Some(&profile.name)
                        && line.contains(profile.purpose())
                }),
                "{} missing:\n{table}",
                profile.file_name()
            );
        }
        let ip = table
            .lines()
            .find(|l| l.starts_with("inference-perf") && l.contains(" sanity_random "))
            .expect("a row");
        assert!(ip.ends_with("--model --tokenizer --endpoint"), "{ip}");
    }

    #[test]
    fn the_list_keeps_to_one_harness_when_asked() {
        let table = list(Some(Harness::Aiperf));
        let rows: Vec<&str> = table
            .lines()
            .skip(1)
            .take_while(|l| !l.is_empty())
            .collect();
        assert_eq!(rows.len(), 7, "{table}");
        assert!(rows.iter().all(|r| r.starts_with("aiperf")), "{table}");
    }

    #[test]
    fn show_heads_the_template_with_its_placeholders_and_flags() {
        let text = show("otel_traces", None).expect("shown");
        assert!(text.starts_with(
            "# inference-perf/otel_traces.yaml.in: Replay of your own OpenTelemetry traces"
        ));
        assert!(
            text.contains("#   REPLACE_ENV_LLMDBENCH_DEPLOY_CURRENT_MODEL"),
            "{text}"
        );
        assert!(
            text.contains("--set LLMDBENCH_RUN_DATASET_DIR=VALUE"),
            "{text}"
        );
        let template = builtin_profile("inference-perf", "otel_traces")
            .expect("bundled")
            .template;
        assert!(text.ends_with(template));
        assert!(show("otel_traces.yaml.in", None).is_ok());
    }

    #[test]
    fn an_ambiguous_name_asks_for_the_harness_and_an_unknown_one_suggests() {
        let err = show("sanity_random", None).expect_err("ambiguous");
        assert_eq!(
            err.to_string(),
            "`sanity_random` is a profile of guidellm, inference-perf, vllm-benchmark; pick one with --harness\n  \
             help: llmbench profiles show sanity_random --harness guidellm"
        );
        assert!(show("sanity_random", Some(Harness::Guidellm)).is_ok());
        let err = show("sanity_randon", None).expect_err("unknown");
        assert!(
            err.to_string().starts_with(
                "no bundled profile `sanity_randon` — did you mean `sanity_random` (guidellm,"
            ),
            "{err}"
        );
        let err = show("otel_traces", Some(Harness::Guidellm)).expect_err("not guidellm's");
        assert!(
            err.to_string().ends_with(
                "help: `otel_traces` is a profile of inference-perf: llmbench profiles show otel_traces --harness \
                 inference-perf"
            ),
            "{err}"
        );
    }
}
