//! `llmbench run`: profile in, results out. Render the profile with the shared renderer, parse its dialect into
//! the workload model, build every prompt and request body before the clock starts, run the engine, then derive
//! the summary and every report from the raw records.
//!
//! The server is `--endpoint`, else the one the profile names, else the embedded simulator on loopback (so the
//! main job runs on a fresh machine with no cluster and no network). The command line beats the profile for the
//! model and the tokenizer too; the run's first line says where the server, the model and the tokenizer came from.
//!
//! A run never hangs and never loses what it measured: every request ends at its timeout at the latest; SIGTERM
//! and SIGINT stop issuing, give the requests in flight a grace period, record the rest as cancelled and still
//! write every report, marked interrupted; records are flushed as they finish, so a SIGKILL loses at most the last
//! few milliseconds of them; a results directory is never reused by accident.

mod api_key;
mod args;
mod cache;
mod capacity;
mod client;
mod context;
mod error;
mod execute;
mod fmperf;
mod guidellm_replay;
mod mlperf;
pub mod nop;
mod output;
pub(crate) mod preflight;
mod profile;
mod replay;
mod runner;
mod server;
mod signals;
mod target;

use std::path::Path;
use std::sync::Arc;

use llmbench_core::harness::Harness;
use llmbench_engine::stack::serve::{ServeOptions, Served, serve_endpoint};
use llmbench_engine::stack::{self, StackSource, StackSpec};
use llmbench_report::report::{PreflightMeta, ProfileNote};
use llmbench_sim::sim::{self, SimConfig};
use llmbench_workload::profile::{Edits, Template, TemplateSource, Values, render_edited};
use llmbench_workload::workload::load_flags::{self, LoadFlagsRecord};
use llmbench_workload::workload::{Api, DataSpec, ParseOptions, parse_profile};

pub(crate) use api_key::ApiKey;
pub use args::RunArgs;
pub(crate) use cache::CacheResetError;
pub use error::{KeptReports, RunError};
pub use output::{LOCK_FILE, OutputError, in_use, validate_run_id};
pub use preflight::describe_passed as describe_passed_preflight;
pub use runner::RunOutcome;
pub(crate) use target::{EndpointError, Server, UNSET_ENDPOINT};

use context::{Adaptive, Executed, Execution, RunContext, RunStages, report_options};
use fmperf::FmperfRun;
use guidellm_replay::GuidellmReplay;
use mlperf::MlperfRun;
use nop::NopRun;
use profile::ProfileRun;
use replay::{SessionReplay, TraceReplay};
use runner::Runner;

/// The model name the embedded simulator serves.
pub(crate) const SIM_MODEL: &str = "llmbench-sim";

/// Carries out one run.
pub async fn run(args: RunArgs) -> Result<RunOutcome, RunError> {
    if args.vllm_log.is_some() && args.harness != Harness::Nop {
        return Err(RunError::VllmLogNeedsNop {
            harness: args.harness,
        });
    }
    if let Some(id) = &args.run_id {
        validate_run_id(id)?;
    }
    output::check_before_building(
        &args.output,
        args.run_id
            .as_deref()
            .map(|id| execute::run_dir_path(&args, id))
            .as_deref(),
        args.overwrite,
    )?;
    // Read before anything starts, so a bad record fails the run at once.
    let stack = args
        .stack_info
        .as_deref()
        .map(stack::read_stack_info)
        .transpose()?
        .map(|info| StackSpec::new(StackSource::StackInfo, info));
    let flag = args
        .endpoint
        .as_deref()
        .map(|url| target::validate(url, "--endpoint"))
        .transpose()?;
    let template = Template::load(args.harness.as_str(), &template_source(&args.profile))?;
    let server = match flag {
        // A served stack is where the run goes: --endpoint, else the port its command names.
        Some(url) if args.serve => Server::Served(url),
        None if args.serve => Server::Served(target::validate(
            &serve_endpoint(&args.serve_command),
            "the --serve command's --host and --port",
        )?),
        Some(url) => Server::Flag(url),
        None => Server::Embedded,
    };
    // What the profile itself names, to choose the server, the model and the tokenizer; the command line wins.
    let facts = profile_facts(&args, &template, &server)?;
    let server = match server {
        Server::Embedded => match target::choose(None, facts.base_url.as_deref()) {
            Server::Profile(url) => Server::Profile(target::validate(
                &url,
                &format!("the server {} names", template.name),
            )?),
            other => other,
        },
        other => other,
    };
    let embedded_server = server == Server::Embedded;
    let model = choose_model(&args, &facts, &server)?;
    // The first line a user sees says what is being measured, and where each part of it came from.
    println!(
        "llmbench: {} {} against {server}{}",
        args.harness,
        template.name,
        sources(&args, &facts, &model, embedded_server)
    );
    let (endpoint, embedded) = match &server {
        Server::Flag(url) | Server::Profile(url) | Server::Served(url) => (url.clone(), None),
        Server::Embedded => {
            // The simulator serves the model (and the LoRA adapters) the requests will name.
            let sim = sim::start(SimConfig {
                port: 0,
                model: model.name.clone().unwrap_or_else(|| SIM_MODEL.to_owned()),
                lora_modules: facts.lora_adapters.clone(),
                ttft: args.sim_ttft,
                itl: args.sim_itl,
                seed: args.seed,
                ..SimConfig::default()
            })
            .await?;
            (sim.base_url(), Some(sim))
        }
    };
    let mut model = model.name;
    let served = if args.serve {
        let served = Served::start(ServeOptions {
            command: args.serve_command.clone(),
            base_url: endpoint.clone(),
            ready_path: args.serve_ready_path.clone(),
            ready_timeout: args.serve_timeout,
            health_failures: args.serve_health_failures,
            keep: args.serve_keep,
            log_dir: args.output.clone(),
        })
        .await?;
        Some(served)
    } else {
        None
    };
    if let Some(served) = &served
        && model.is_none()
    {
        // The model the stack serves, as the embedded simulator's is: requests name what is there.
        model = served.served_model().await;
    }
    let stack = served.as_ref().map(|s| s.spec()).or(stack);
    let outcome = run_against(
        &args,
        &template,
        &endpoint,
        model,
        embedded.is_some(),
        stack,
        served.clone(),
    )
    .await;
    // Stopped on every way out of the run, failed or not.
    if let Some(served) = &served {
        served.stop().await;
    }
    if let Some(sim) = embedded
        && let Err(e) = sim.shutdown().await
    {
        tracing::warn!(error = %e, "the embedded simulator did not shut down cleanly");
    }
    outcome
}

/// Stands in for the model placeholder while finding out what the profile names itself: a model key that still
/// holds it names no model of its own.
const UNSET_MODEL: &str = "llmbench-model-unset.invalid";

/// What a profile names itself: its server, its model and its tokenizer (each `None` when it names none, or only
/// through a placeholder the command line fills).
#[derive(Debug, Default)]
struct ProfileFacts {
    base_url: Option<String>,
    model: Option<String>,
    tokenizer: Option<String>,
    /// The profile's model is the model placeholder.
    model_is_placeholder: bool,
    /// The LoRA adapters the profile sends to, which the embedded simulator then serves.
    lora_adapters: Vec<String>,
}

/// Renders and parses the profile to learn what it names itself. The endpoint placeholder holds the chosen server
/// (or [`UNSET_ENDPOINT`] while none is chosen, so a bundled profile whose server is only that placeholder names
/// none); the model placeholder holds `--model`, else [`UNSET_MODEL`].
fn profile_facts(
    args: &RunArgs,
    template: &Template,
    server: &Server,
) -> Result<ProfileFacts, RunError> {
    let endpoint = match server {
        Server::Flag(url) | Server::Profile(url) | Server::Served(url) => url.clone(),
        Server::Embedded => UNSET_ENDPOINT.to_owned(),
    };
    let values = Values {
        model: Some(args.model.clone().unwrap_or_else(|| UNSET_MODEL.to_owned())),
        tokenizer: args.tokenizer.clone(),
        endpoint: Some(endpoint),
        max_model_len: args.max_model_len,
        set: args.set.clone(),
    };
    let rendered = render_edited(template, &values, &edits(args), args.harness)?.text;
    // Applied here too, so a refused flag stops the run before a simulator starts.
    let rendered = load_flags::apply(args.harness, &template.name, &rendered, &args.load)?.profile;
    let (api, tokenizer) = profile_api(args, &template.name, &rendered)?;
    // A profile that spreads its requests over several URLs runs against those; one server named on the command
    // line would silently take only part of them.
    if !api.more_urls.is_empty() && matches!(server, Server::Flag(_) | Server::Served(_)) {
        return Err(RunError::Unsupported(format!(
            "--endpoint (or --serve) with a profile that spreads its requests over {} URLs: run without \
             --endpoint to send to the profile's URLs, or give the profile one URL",
            1 + api.more_urls.len()
        )));
    }
    let unset = |name: &Option<String>| name.as_deref().is_some_and(|n| n.contains(UNSET_MODEL));
    let model_is_placeholder = unset(&api.model);
    // AIPerf's several `--model-names` count the model among them; the simulator serves it already.
    let lora_adapters = api
        .lora
        .map(|l| l.adapters)
        .unwrap_or_default()
        .into_iter()
        .filter(|a| Some(a) != api.model.as_ref())
        .collect();
    Ok(ProfileFacts {
        base_url: api.base_url,
        model: api.model.filter(|_| !model_is_placeholder),
        tokenizer: tokenizer.filter(|t| !unset(&Some(t.clone()))),
        model_is_placeholder,
        lora_adapters,
    })
}

/// The API a rendered profile sends to (base URL, path, model, streaming, headers, key) and the tokenizer it
/// names, read as the harness's runner reads them.
fn profile_api(
    args: &RunArgs,
    template_name: &str,
    rendered: &str,
) -> Result<(Api, Option<String>), RunError> {
    let options = parse_options(args);
    Ok(match args.harness {
        Harness::Mlperf => (
            llmbench_metrics::mlperf::parse_settings(template_name, rendered, None, &options)?
                .settings
                .server,
            None,
        ),
        Harness::Fmperf => (
            llmbench_workload::workload::parse_fmperf(template_name, rendered)?
                .0
                .api,
            None,
        ),
        harness => {
            let workload = parse_profile(harness, template_name, rendered, &options)?.workload;
            (workload.api, workload.tokenizer.map(|t| t.name_or_path))
        }
    })
}

/// `llmbench run --preflight-only`: the run's pre-flight against its server, exactly as the run would do it
/// (the same profile, rendering, flags, API, key and model), and nothing else: no prompt is built, nothing is
/// timed and no results directory is made. The operator runs it in a pod on the launchers' network before it
/// creates them. Returns what the checks found; a server that fails them is [`RunError::Preflight`].
pub async fn preflight_only(args: &RunArgs) -> Result<PreflightMeta, RunError> {
    if args.harness == Harness::Nop {
        return Err(RunError::PreflightOnly(
            "the nop harness sends no request, so it has no pre-flight".to_owned(),
        ));
    }
    let flag = args
        .endpoint
        .as_deref()
        .map(|url| target::validate(url, "--endpoint"))
        .transpose()?;
    let template = Template::load(args.harness.as_str(), &template_source(&args.profile))?;
    let server = flag.clone().map_or(Server::Embedded, Server::Flag);
    let facts = profile_facts(args, &template, &server)?;
    let endpoint = match target::choose(flag.as_deref(), facts.base_url.as_deref()) {
        Server::Flag(url) => url,
        Server::Profile(url) => {
            target::validate(&url, &format!("the server {} names", template.name))?
        }
        _ => {
            return Err(RunError::PreflightOnly(
                "there is no server to check: pass --endpoint URL (the profile names none)"
                    .to_owned(),
            ));
        }
    };
    let chosen = choose_model(args, &facts, &Server::Flag(endpoint.clone()))?;
    let values = Values {
        model: chosen.name.clone(),
        tokenizer: args.tokenizer.clone(),
        endpoint: Some(endpoint.clone()),
        max_model_len: args.max_model_len,
        set: args.set.clone(),
    };
    let rendered = render_edited(&template, &values, &edits(args), args.harness)?.text;
    let rendered = load_flags::apply(args.harness, &template.name, &rendered, &args.load)?.profile;
    let (api, _) = profile_api(args, &template.name, &rendered)?;
    // As `RunContext::request_model`: --model, else the profile's, else the one chosen.
    let model = args
        .model
        .clone()
        .or_else(|| api.model.clone())
        .or(chosen.name)
        .ok_or_else(|| RunError::NoModel("pass --model NAME".to_owned()))?;
    context::check_server(args, &endpoint, &api, &model).await
}

/// The model a run names, and where it came from.
#[derive(Debug)]
struct ModelChoice {
    /// `None` until a `--serve` stack says what it serves, and for the nop harness, which sends nothing.
    name: Option<String>,
    from: ModelFrom,
}

#[derive(Debug, PartialEq)]
enum ModelFrom {
    Flag,
    Profile,
    Simulator,
    ServedStack,
    Nothing,
}

/// `--model`, else the model the profile names, else the embedded simulator's, else what a `--serve` stack serves.
/// A run against a server with none of them fails before anything starts, saying to pass `--model`.
fn choose_model(
    args: &RunArgs,
    facts: &ProfileFacts,
    server: &Server,
) -> Result<ModelChoice, RunError> {
    let (name, from) = match (&args.model, &facts.model, server) {
        (Some(m), _, _) => (Some(m.clone()), ModelFrom::Flag),
        (None, Some(m), _) => (Some(m.clone()), ModelFrom::Profile),
        (None, None, Server::Embedded) => (Some(SIM_MODEL.to_owned()), ModelFrom::Simulator),
        (None, None, Server::Served(_)) => (None, ModelFrom::ServedStack),
        (None, None, _) if args.harness == Harness::Nop => (None, ModelFrom::Nothing),
        (None, None, _) => {
            return Err(RunError::NoModel(if facts.model_is_placeholder {
                format!(
                    "pass --model NAME (the profile's model is the placeholder {}{})",
                    llmbench_core::render::TOKEN_PREFIX,
                    llmbench_core::render::well_known::MODEL
                )
            } else {
                "the profile names none; pass --model NAME".to_owned()
            }));
        }
    };
    Ok(ModelChoice { name, from })
}

/// `, model m (--model, the profile's x overridden), tokenizer builtin (embedded simulator)`: the run's model and
/// tokenizer, each with where it came from.
fn sources(args: &RunArgs, facts: &ProfileFacts, model: &ModelChoice, embedded: bool) -> String {
    if model.from == ModelFrom::Nothing || args.harness == Harness::Nop {
        return String::new();
    }
    let Some(name) = model.name.as_deref() else {
        // A --serve stack names its model once it is up.
        return match &args.tokenizer {
            Some(t) => format!(", the model the --serve stack serves, tokenizer {t} (--tokenizer)"),
            None => ", the model the --serve stack serves and its tokenizer".to_owned(),
        };
    };
    let model_from = match (&model.from, &facts.model) {
        (ModelFrom::Flag, Some(own)) if own != name => {
            format!("--model, the profile's {own} overridden")
        }
        (ModelFrom::Flag, _) => "--model".to_owned(),
        (ModelFrom::Profile, _) => "the profile's".to_owned(),
        (ModelFrom::Simulator, _) => "the embedded simulator's".to_owned(),
        (ModelFrom::ServedStack | ModelFrom::Nothing, _) => "the stack's".to_owned(),
    };
    let (tokenizer, tokenizer_from) = match (&args.tokenizer, &facts.tokenizer) {
        (Some(t), Some(own)) if own != t && own != name => (
            t.clone(),
            format!("--tokenizer, the profile's {own} overridden"),
        ),
        (Some(t), _) => (t.clone(), "--tokenizer".to_owned()),
        (None, _) if embedded => (
            llmbench_text::tokenizer::BUILTIN.to_owned(),
            "embedded simulator".to_owned(),
        ),
        (None, Some(own)) if own != name => (own.clone(), "the profile's".to_owned()),
        (None, _) => (name.to_owned(), "the model's".to_owned()),
    };
    format!(", model {name} ({model_from}), tokenizer {tokenizer} ({tokenizer_from})")
}

/// The command line's edits to the profile.
fn edits(args: &RunArgs) -> Edits {
    Edits {
        overrides: args.overrides.clone(),
        add: args.override_add.clone(),
        lenient: args.lenient,
    }
}

fn parse_options(args: &RunArgs) -> ParseOptions {
    ParseOptions {
        strict: args.strict,
        lenient: args.lenient,
        default_seed: args.seed,
    }
}

async fn run_against(
    args: &RunArgs,
    template: &Template,
    endpoint: &str,
    model: Option<String>,
    embedded: bool,
    stack: Option<StackSpec>,
    served: Option<Arc<Served>>,
) -> Result<RunOutcome, RunError> {
    let harness = args.harness;
    let values = Values {
        model: model.clone(),
        tokenizer: args.tokenizer.clone(),
        endpoint: Some(endpoint.to_owned()),
        max_model_len: args.max_model_len,
        set: args.set.clone(),
    };
    let rendered = render_edited(template, &values, &edits(args), harness)?;
    let created = rendered.warnings();
    let rendered = rendered.text;
    if args.capacity_search.is_some()
        && let Some(flag) = args.load.stage_flag()
    {
        return Err(RunError::LoadFlagWithCapacitySearch { flag });
    }
    let applied = load_flags::apply(harness, &template.name, &rendered, &args.load)?;
    if !applied.edits.is_empty() {
        tracing::info!("load flags: {}", load_flags::describe(&applied.edits));
    }
    let rendered = applied.profile;
    let options = parse_options(args);
    let mut context = RunContext {
        args,
        endpoint,
        model,
        embedded,
        template_name: &template.name,
        rendered: &rendered,
        load_flags: LoadFlagsRecord::new(&args.load, &applied.edits),
        notes: Vec::new(),
        capacity_search: None,
        prometheus: None,
        profile_no_server_metrics: false,
        stack,
        served,
        prompts: None,
    };
    for warning in created {
        tracing::warn!("{warning}");
        context.notes.push(ProfileNote {
            key: "--override".to_owned(),
            line: None,
            kind: "created".to_owned(),
            message: warning,
        });
    }
    if args.capacity_search.is_some()
        && matches!(harness, Harness::Mlperf | Harness::Nop | Harness::Fmperf)
    {
        return Err(RunError::CapacitySearch(format!(
            "the {harness} harness has no load to vary; a capacity search runs with inference-perf, guidellm, \
             vllm-benchmark or inferencemax profiles"
        )));
    }
    // The harnesses that read their own profile format.
    match harness {
        Harness::Mlperf => return MlperfRun { options }.run(&mut context).await,
        Harness::Fmperf => return FmperfRun.run(&mut context).await,
        _ => {}
    }
    let parsed = parse_profile(harness, &template.name, &rendered, &options)?;
    context.note_warnings(&parsed.warnings);
    context.capacity_search = match &args.capacity_search {
        Some(text) => Some(capacity_search_flag(text)?),
        None => parsed.capacity,
    };
    let workload = parsed.workload;
    context.prometheus = workload.server_metrics.clone();
    context.profile_no_server_metrics = workload.no_server_metrics;
    if workload.api.lora.is_some()
        && matches!(
            workload.data,
            DataSpec::OtelTrace(_)
                | DataSpec::MooncakeTrace(_)
                | DataSpec::AzureTrace(_)
                | DataSpec::GuidellmTrace(_)
        )
    {
        return Err(RunError::Unsupported(
            "LoRA traffic with a trace or session replay: llmbench spreads adapters over a run's list of prompts, \
             and a replay builds each request as it goes"
                .to_owned(),
        ));
    }
    match workload.data {
        _ if harness == Harness::Nop => NopRun { workload }.run(&mut context).await,
        DataSpec::OtelTrace(_) => SessionReplay { workload }.run(&mut context).await,
        DataSpec::MooncakeTrace(_) | DataSpec::AzureTrace(_) => {
            TraceReplay { workload }.run(&mut context).await
        }
        DataSpec::GuidellmTrace(_) => GuidellmReplay { workload }.run(&mut context).await,
        _ => ProfileRun { workload }.run(&mut context).await,
    }
}

/// `--capacity-search`: the spec as JSON or YAML (JSON is YAML), checked as a profile's would be.
fn capacity_search_flag(
    text: &str,
) -> Result<llmbench_core::capacity::CapacitySearchSpec, RunError> {
    let spec: llmbench_core::capacity::CapacitySearchSpec = serde_saphyr::from_str(text)
        .map_err(|e| RunError::CapacitySearch(format!("--capacity-search: {e}")))?;
    llmbench_core::capacity::CapacitySearch::try_from(&spec)
        .map_err(|e| RunError::CapacitySearch(format!("--capacity-search: {e}")))?;
    Ok(spec)
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
}
