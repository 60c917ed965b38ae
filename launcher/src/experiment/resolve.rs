//! From what the file says and the command line to a checked plan: the harness and profile, where the stack is,
//! every treatment and run, and the checks that must pass before any run starts — each treatment's profile
//! renders with its overrides (an override that matches no key is refused, naming the treatment and the key) and
//! parses in its dialect, the capacity search's objectives name metrics, repeats are at least 1.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use llmbench_api::capacity::{CapacitySearch, CapacitySearchSpec};
use llmbench_api::experiment::{self as core, dns_name};
use llmbench_api::library::builtin_profile;
use llmbench_api::v1alpha1::{
    BenchmarkExperimentSpec, BenchmarkRunSpec, Harness, Hook, Ordering, Treatment,
};

use super::plan::{EXPERIMENT_SCHEMA, ExperimentPlan, PlanRun, PlanSetup, PlanTreatment};
use super::source::{KeyRule, LlmdExperiment, RESET_CACHE_PATHS, Source, SourceKind, levels_of};
use super::{ExperimentArgs, ExperimentError};
use crate::run::SIM_MODEL;
use llmbench_api::render::RenderError;
use llmbench_workload::profile::{
    Edits, ProfileError, Template, TemplateSource, Values, render, render_edited,
};
use llmbench_workload::workload::{ParseOptions, WarningKind, parse_profile};

/// Where a profile comes from, for the runs (`llmbench run --profile`) and for the checks.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ProfileChoice {
    /// A bundled profile of the harness, by name.
    Builtin(String),
    File(PathBuf),
    /// A manifest's inline `workload.template`; written into the experiment directory before the first run.
    Inline(String),
}

impl ProfileChoice {
    /// How experiment.json and `llmbench run --profile` name it.
    pub(crate) fn label(&self) -> String {
        match self {
            ProfileChoice::Builtin(name) => name.clone(),
            ProfileChoice::File(path) => path.display().to_string(),
            ProfileChoice::Inline(_) => INLINE_TEMPLATE_FILE.to_owned(),
        }
    }
}

/// The file a manifest's inline template is written to, in the experiment directory.
pub(crate) const INLINE_TEMPLATE_FILE: &str = "template.yaml.in";

/// An experiment ready to run: its plan, and what each run needs besides its treatment.
#[derive(Debug, Clone)]
pub(crate) struct Resolved {
    /// The plan, every run pending.
    pub(crate) plan: ExperimentPlan,
    pub(crate) harness: Harness,
    pub(crate) profile: ProfileChoice,
    /// Per treatment with its own profile (llm-d-benchmark `profile:` on a treatment).
    pub(crate) treatment_profiles: BTreeMap<String, ProfileChoice>,
    /// The stack's endpoint; `None` (and no setup endpoints) means the embedded simulator.
    pub(crate) endpoint: Option<String>,
    /// The model every request names; with the embedded simulator also the model it serves.
    pub(crate) model: Option<String>,
    pub(crate) tokenizer: Option<String>,
    pub(crate) max_model_len: Option<u32>,
    /// Prometheus endpoints every run scrapes (`template.stack.metricsEndpoints`).
    pub(crate) metrics_endpoints: Vec<String>,
    /// Placeholder values, NAME=VALUE: the template's `env`, then `--set`.
    pub(crate) set: Vec<String>,
    pub(crate) warnings: Vec<String>,
    /// The experiment file, and the line each override key is first given on in it, for the checks' messages.
    pub(crate) path: PathBuf,
    pub(crate) key_lines: BTreeMap<String, u32>,
}

impl Resolved {
    /// Whether the runs drive the embedded simulator (one for the whole experiment).
    pub(crate) fn embedded(&self) -> bool {
        self.endpoint.is_none() && self.plan.setup_treatments.is_empty()
    }

    /// The profile of treatment `name`.
    pub(crate) fn profile_of(&self, name: &str) -> &ProfileChoice {
        self.treatment_profiles.get(name).unwrap_or(&self.profile)
    }
}

/// Applies the command line to what the file says.
pub(crate) fn resolve(source: Source, args: &ExperimentArgs) -> Result<Resolved, ExperimentError> {
    let mut warnings = source.warnings.clone();
    let path = source.path.clone();
    let key_lines = source.key_lines.clone();
    let format = source.kind.format();
    let base_dir = path.parent().map(Path::to_owned);
    let capacity_flag = args
        .capacity_search
        .as_deref()
        .map(parse_capacity_flag)
        .transpose()?;
    let mut parts = match source.kind {
        SourceKind::Manifest { name, spec } => from_manifest(name, *spec, args, &mut warnings)?,
        SourceKind::Llmd(exp) => from_llmd(&path, exp, args, base_dir.as_deref(), &mut warnings)?,
    };
    if let Some(repeats) = args.repeats {
        parts.spec.repeats = repeats;
    }
    if !args.models.is_empty() {
        parts.spec.models = args.models.clone();
    }
    if let Some(spec) = capacity_flag {
        parts.spec.capacity_search = Some(spec);
    }
    if let Some(spec) = &parts.spec.capacity_search {
        CapacitySearch::try_from(spec).map_err(ExperimentError::CapacitySearch)?;
    }
    let ordering = &parts.spec.ordering;
    if ordering.parallelism > 1 {
        return Err(ExperimentError::Unsupported(format!(
            "ordering.parallelism is {}: `llmbench experiment` runs one run at a time (runs on one machine \
             would share its CPUs, its terminal and its signal handling, and measure each other); set it to 1, \
             or let the operator run the BenchmarkExperiment",
            ordering.parallelism
        )));
    }
    if let Some(cooldown) = &ordering.cooldown {
        core::cooldown(cooldown).map_err(|e| ExperimentError::Flag {
            flag: "ordering.cooldown",
            message: e.to_string(),
        })?;
    }
    let located = |e: core::ExperimentError| match e {
        core::ExperimentError::Repeats(_) if args.repeats.is_some() => ExperimentError::Flag {
            flag: "--repeats",
            message: e.to_string(),
        },
        e => ExperimentError::Plan {
            path: path.clone(),
            source: e,
        },
    };
    let (mut treatments, runs) = core::plan(&parts.spec).map_err(located)?;
    for t in &mut treatments {
        if let Some(levels) = parts.levels.get(base_name(t)) {
            let cache = t.levels.get(core::CACHE_FACTOR).cloned();
            t.levels = levels.clone();
            if let Some(cache) = cache {
                t.levels.insert(core::CACHE_FACTOR.to_owned(), cache);
            }
        }
    }
    let plan_treatments: Vec<PlanTreatment> = treatments
        .iter()
        .map(|t| {
            let setup = parts.setup_of.get(base_name(t)).cloned();
            PlanTreatment {
                name: t.name.clone(),
                overrides: t.overrides.clone(),
                levels: t.levels.clone(),
                profile: parts
                    .treatment_profiles
                    .get(base_name(t))
                    .map(ProfileChoice::label),
                endpoint: setup
                    .as_ref()
                    .and_then(|s| parts.setups.iter().find(|p| &p.name == s))
                    .map(|s| s.endpoint.clone()),
                setup,
                model: t.model.clone(),
                cache: t.cache,
            }
        })
        .collect();
    let plan_runs = runs
        .iter()
        .map(|r| PlanRun {
            dir: r.dir_name(&treatments),
            treatment: treatments[r.treatment].name.clone(),
            repeat: r.repeat,
            status: Default::default(),
            attempts: 0,
            hooks: Vec::new(),
            error: None,
            started_at: None,
            finished_at: None,
            duration_s: None,
        })
        .collect();
    let id = match &args.id {
        Some(id) => id.clone(),
        None => format!(
            "{}-{}",
            dns_name(&parts.name),
            llmbench_model::wallclock::compact_utc_now()
        ),
    };
    crate::run::validate_run_id(&id).map_err(|e| ExperimentError::Flag {
        flag: "--id",
        message: e.to_string(),
    })?;
    let spec = &parts.spec;
    let plan = ExperimentPlan {
        schema: EXPERIMENT_SCHEMA.to_owned(),
        name: parts.name.clone(),
        id,
        harness: parts.harness.as_str().to_owned(),
        profile: parts.profile.label(),
        source: Some(path.display().to_string()),
        source_format: Some(format.to_owned()),
        endpoint: parts.endpoint.clone(),
        model: parts.model.clone(),
        overrides: spec.template.overrides.clone(),
        override_add: spec.template.override_add.clone(),
        repeats: spec.repeats,
        capacity_search: spec.capacity_search.clone(),
        slo: spec.template.slo.clone(),
        max_attempts: parts.max_attempts.max(1),
        validate_failures: parts.validate_failures,
        stop_on_failure: spec.ordering.stop_on_failure,
        cooldown: spec.ordering.cooldown.clone(),
        hooks: spec.hooks.clone(),
        cache_reset: spec.cache_reset || spec.template.prefix_cache.reset,
        cache_warm: spec.template.prefix_cache.warm,
        setup_treatments: parts.setups.clone(),
        treatments: plan_treatments,
        runs: plan_runs,
        started_at: None,
        finished_at: None,
        duration_s: None,
        interrupted: false,
    };
    Ok(Resolved {
        plan,
        harness: parts.harness,
        profile: parts.profile,
        treatment_profiles: parts.treatment_profiles,
        endpoint: parts.endpoint,
        model: parts.model,
        tokenizer: parts.tokenizer,
        max_model_len: parts.max_model_len,
        metrics_endpoints: parts.metrics_endpoints,
        set: parts.set,
        warnings,
        path,
        key_lines,
    })
}

/// The name a treatment has in its file: without the `-cold`/`-warm` that `cacheStates` adds.
fn base_name(t: &core::ResolvedTreatment) -> &str {
    t.cache
        .and_then(|state| t.name.strip_suffix(state.as_str()))
        .and_then(|name| name.strip_suffix('-'))
        .unwrap_or(&t.name)
}

/// The pieces both forms produce.
struct Parts {
    name: String,
    spec: BenchmarkExperimentSpec,
    harness: Harness,
    profile: ProfileChoice,
    treatment_profiles: BTreeMap<String, ProfileChoice>,
    /// Table levels that differ from what the shared code derives (llm-d: a setup column).
    levels: BTreeMap<String, BTreeMap<String, String>>,
    setups: Vec<PlanSetup>,
    /// Treatment → its setup treatment.
    setup_of: BTreeMap<String, String>,
    endpoint: Option<String>,
    model: Option<String>,
    tokenizer: Option<String>,
    max_model_len: Option<u32>,
    metrics_endpoints: Vec<String>,
    set: Vec<String>,
    max_attempts: u32,
    validate_failures: bool,
}

fn from_manifest(
    name: String,
    mut spec: BenchmarkExperimentSpec,
    args: &ExperimentArgs,
    warnings: &mut Vec<String>,
) -> Result<Parts, ExperimentError> {
    if !args.setup_endpoints.is_empty() {
        return Err(ExperimentError::Flag {
            flag: "--setup-endpoint",
            message: "only an llm-d-benchmark experiment file has setup treatments".to_owned(),
        });
    }
    let template = &mut spec.template;
    let harness = args.harness.unwrap_or(template.harness);
    template.harness = harness;
    if template.skip_run {
        return Err(ExperimentError::Unsupported(
            "template.skipRun collects results already on a cluster volume; there is nothing to run locally"
                .to_owned(),
        ));
    }
    let profile = match (&args.profile, &template.workload) {
        (Some(p), _) => choose_profile(harness, p, None)?,
        (None, w) if w.builtin.is_some() => {
            ProfileChoice::Builtin(w.builtin.clone().unwrap_or_default())
        }
        (None, w) if w.template.is_some() => {
            ProfileChoice::Inline(w.template.clone().unwrap_or_default())
        }
        (None, w) => {
            let name = w.profile_ref.as_ref().map_or("?", |r| r.name.as_str());
            return Err(ExperimentError::Unsupported(format!(
                "template.workload.profileRef names the WorkloadProfile `{name}`, which lives in a cluster; pass \
                 --profile NAME|FILE to run the experiment locally"
            )));
        }
    };
    let stack = &template.stack;
    let endpoint = args.endpoint.clone().or_else(|| stack.endpoint.clone());
    if endpoint.is_none()
        && let Some(service) = &stack.service_ref
    {
        return Err(ExperimentError::Unsupported(format!(
            "template.stack.serviceRef names the Service `{}:{}`, which is reachable only in its cluster; pass \
             --endpoint URL (e.g. through `kubectl port-forward`), or remove it to use the embedded simulator",
            service.name, service.port
        )));
    }
    let model = args.model.clone().or_else(|| Some(stack.model.clone()));
    // With the embedded simulator a tokenizer the stack names would be downloaded for nothing: the builtin one
    // fits the simulator, as `llmbench run` does it.
    let tokenizer = args
        .tokenizer
        .clone()
        .or_else(|| endpoint.as_ref().and_then(|_| stack.tokenizer.clone()));
    let max_model_len = args.max_model_len.or(stack.max_model_len);
    let mut set: Vec<String> = template
        .env
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    set.extend(args.set.iter().cloned());
    template.overrides.extend(args.overrides.iter().cloned());
    template
        .override_add
        .extend(args.override_add.iter().cloned());
    let metrics_endpoints = stack.metrics_endpoints.clone();
    if template.launcher.parallelism > 1 {
        warnings.push(format!(
            "template.launcher.parallelism is {}: locally each run is one launcher",
            template.launcher.parallelism
        ));
    }
    if spec.capacity_search.is_none() {
        // A search the run template asks for applies to every run, as the operator reads it.
        spec.capacity_search = spec.template.capacity_search.clone();
    }
    if let Some(cooldown) = &args.cooldown {
        spec.ordering.cooldown = Some(cooldown.clone());
    }
    if args.stop_on_failure {
        spec.ordering.stop_on_failure = true;
    }
    Ok(Parts {
        name,
        harness,
        profile,
        treatment_profiles: BTreeMap::new(),
        levels: BTreeMap::new(),
        setups: Vec::new(),
        setup_of: BTreeMap::new(),
        endpoint,
        model,
        tokenizer,
        max_model_len,
        metrics_endpoints,
        set,
        max_attempts: 1,
        validate_failures: false,
        spec,
    })
}

fn from_llmd(
    path: &Path,
    exp: LlmdExperiment,
    args: &ExperimentArgs,
    base_dir: Option<&Path>,
    warnings: &mut Vec<String>,
) -> Result<Parts, ExperimentError> {
    let harness = match (&args.harness, &exp.harness) {
        (Some(h), _) => *h,
        (None, Some((name, line))) => {
            name.parse::<Harness>()
                .map_err(|e| ExperimentError::Invalid {
                    path: path.to_owned(),
                    line: Some(*line),
                    message: format!("experiment.harness: {e}"),
                })?
        }
        (None, None) => {
            return Err(ExperimentError::Invalid {
                path: path.to_owned(),
                line: None,
                message: "the file names no harness (`experiment.harness`); pass --harness"
                    .to_owned(),
            });
        }
    };
    let profile = match (&args.profile, &exp.profile) {
        (Some(p), _) => choose_profile(harness, p, None)?,
        (None, Some((name, line))) => {
            choose_profile(harness, name, base_dir).map_err(|e| ExperimentError::Invalid {
                path: path.to_owned(),
                line: Some(*line),
                message: format!("experiment.profile: {e}"),
            })?
        }
        (None, None) => {
            return Err(ExperimentError::Invalid {
                path: path.to_owned(),
                line: None,
                message: format!(
                    "the file names no profile (`experiment.profile`); pass --profile NAME|FILE (bundled for \
                     {harness}: {})",
                    bundled(harness).join(", ")
                ),
            });
        }
    };
    if exp.treatments.is_empty() {
        return Err(ExperimentError::Invalid {
            path: path.to_owned(),
            line: Some(exp.treatments_line).filter(|l| *l > 0),
            message: "the experiment has no treatments: give a non-empty `treatments` list"
                .to_owned(),
        });
    }
    // Setup treatments re-deploy the stack; llmbench deploys nothing, so each must name a stack already up.
    let mut given: BTreeMap<String, String> = BTreeMap::new();
    for item in &args.setup_endpoints {
        let (name, url) = item
            .split_once('=')
            .filter(|(n, u)| !n.is_empty() && !u.is_empty())
            .ok_or_else(|| ExperimentError::Flag {
                flag: "--setup-endpoint",
                message: format!("`{item}` is not NAME=URL"),
            })?;
        given.insert(name.to_owned(), url.to_owned());
    }
    let mut setups = Vec::new();
    if !exp.setup.is_empty() {
        let missing: Vec<String> = exp
            .setup
            .iter()
            .filter(|s| !given.contains_key(&s.name))
            .map(|s| s.name.clone())
            .collect();
        if !missing.is_empty() {
            return Err(ExperimentError::SetupNeedsEndpoints {
                path: path.to_owned(),
                line: exp.setup_line,
                count: exp.setup.len(),
                missing,
            });
        }
        if args.endpoint.is_some() {
            return Err(ExperimentError::Flag {
                flag: "--endpoint",
                message: "the file has setup treatments: give each its stack with --setup-endpoint NAME=URL \
                          instead"
                    .to_owned(),
            });
        }
        for s in &exp.setup {
            setups.push(PlanSetup {
                name: s.name.clone(),
                overrides: s.overrides.clone(),
                endpoint: given[&s.name].clone(),
            });
        }
    }
    if let Some(unknown) = given
        .keys()
        .find(|n| !exp.setup.iter().any(|s| &s.name == *n))
    {
        let known: Vec<&str> = exp.setup.iter().map(|s| s.name.as_str()).collect();
        return Err(ExperimentError::Flag {
            flag: "--setup-endpoint",
            message: format!(
                "`{unknown}` is not a setup treatment of {} (setup treatments: {})",
                path.display(),
                if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                }
            ),
        });
    }

    // Treatments: with setups, every run treatment under every setup treatment, setup-major.
    let mut treatments = Vec::new();
    let mut treatment_profiles = BTreeMap::new();
    let mut levels = BTreeMap::new();
    let mut setup_of = BTreeMap::new();
    let setup_names: Vec<Option<&str>> = if setups.is_empty() {
        vec![None]
    } else {
        setups.iter().map(|s| Some(s.name.as_str())).collect()
    };
    for setup in setup_names {
        for t in &exp.treatments {
            let name = match setup {
                Some(s) => dns_name(&format!("{s}-{}", t.name)),
                None => t.name.clone(),
            };
            let mut table = levels_of(&t.overrides);
            if let Some(s) = setup {
                table.insert("setup".to_owned(), s.to_owned());
                setup_of.insert(name.clone(), s.to_owned());
            }
            levels.insert(name.clone(), table);
            if let Some(p) = &t.profile {
                let choice =
                    choose_profile(harness, p, base_dir).map_err(|e| ExperimentError::Invalid {
                        path: path.to_owned(),
                        line: Some(t.line),
                        message: format!("treatment `{}`: profile: {e}", t.name),
                    })?;
                treatment_profiles.insert(name.clone(), choice);
            }
            treatments.push(Treatment {
                name,
                overrides: t.overrides.clone(),
            });
        }
    }
    let mut overrides = exp.constants.clone();
    overrides.extend(args.overrides.iter().cloned());
    let hooks = if exp.reset_caches {
        RESET_CACHE_PATHS
            .iter()
            .map(|(name, url)| Hook {
                name: (*name).to_owned(),
                method: "POST".to_owned(),
                url: (*url).to_owned(),
            })
            .collect()
    } else {
        Vec::new()
    };
    let template = run_template(harness, SIM_MODEL, overrides, &args.override_add)?;
    let spec = BenchmarkExperimentSpec {
        template,
        treatments: Some(treatments),
        factors: None,
        models: Vec::new(),
        repeats: 1,
        capacity_search: None,
        ordering: Ordering {
            parallelism: 1,
            cooldown: args.cooldown.clone(),
            stop_on_failure: exp.stop_on_error || args.stop_on_failure,
        },
        hooks,
        // llm-d-benchmark resets vLLM's prefix cache before each treatment; llmbench resets whichever engine's.
        cache_reset: exp.reset_caches,
        cache_states: exp.cache_states.clone(),
        ttl_seconds_after_finished: None,
    };
    let endpoint = args.endpoint.clone();
    let model = args
        .model
        .clone()
        .or_else(|| (endpoint.is_none() && setups.is_empty()).then(|| SIM_MODEL.to_owned()));
    if exp.validate_failures && harness != Harness::InferencePerf {
        warnings.push(
            "validate_failures: upstream applies it to inference-perf's otel_traces workload only; llmbench \
             applies it to every run (a run with failed requests counts as failed)"
                .to_owned(),
        );
    }
    Ok(Parts {
        name: exp.name,
        spec,
        harness,
        profile,
        treatment_profiles,
        levels,
        setups,
        setup_of,
        endpoint,
        model,
        tokenizer: args.tokenizer.clone(),
        max_model_len: args.max_model_len,
        metrics_endpoints: Vec::new(),
        set: args.set.clone(),
        max_attempts: exp.max_attempts,
        validate_failures: exp.validate_failures,
    })
}

/// A run template for an llm-d file, built from JSON so fields with defaults keep them.
fn run_template(
    harness: Harness,
    model: &str,
    overrides: Vec<String>,
    override_add: &[String],
) -> Result<BenchmarkRunSpec, ExperimentError> {
    serde_json::from_value(serde_json::json!({
        "harness": harness.as_str(),
        "workload": {"builtin": "experiment"},
        "stack": {"model": model},
        "overrides": overrides,
        "overrideAdd": override_add,
    }))
    .map_err(|e| ExperimentError::Unsupported(format!("cannot build the run template: {e}")))
}

fn parse_capacity_flag(text: &str) -> Result<CapacitySearchSpec, ExperimentError> {
    serde_saphyr::from_str(text).map_err(|e| ExperimentError::Flag {
        flag: "--capacity-search",
        message: e.to_string().lines().next().unwrap_or_default().to_owned(),
    })
}

fn bundled(harness: Harness) -> Vec<&'static str> {
    llmbench_api::library::builtin_profiles()
        .iter()
        .filter(|p| p.harness == harness.as_str())
        .map(|p| p.name)
        .collect()
}

/// A profile as llm-d-benchmark names it (`random_concurrent.yaml`, a file under `workload/profiles/<harness>/`)
/// or as `llmbench run --profile` takes it: an existing file (also relative to the experiment file), a path, else
/// the bundled profile of that name with or without `.yaml` / `.yaml.in`.
pub(crate) fn choose_profile(
    harness: Harness,
    text: &str,
    base_dir: Option<&Path>,
) -> Result<ProfileChoice, ExperimentError> {
    let path = Path::new(text);
    if path.is_file() {
        return Ok(ProfileChoice::File(path.to_owned()));
    }
    if let Some(base) = base_dir.filter(|_| path.is_relative()) {
        let near = base.join(path);
        if near.is_file() {
            return Ok(ProfileChoice::File(near));
        }
    }
    if text.contains('/') {
        return Ok(ProfileChoice::File(path.to_owned()));
    }
    builtin_profile(harness.as_str(), text)
        .map(|p| ProfileChoice::Builtin(p.name.to_owned()))
        .map_err(|e| ExperimentError::Profile(e.to_string()))
}

/// The checks before any run: the profile renders with the overrides every run applies, then with each
/// treatment's, and parses in its dialect; no two treatments run the same workload. Refuses naming the file, the
/// line, the treatment and the key. `rule.lenient` turns near misses, overrides that create a key and treatments
/// that run the same workload into the warnings returned.
pub(crate) fn check(resolved: &Resolved, rule: KeyRule) -> Result<Vec<String>, ExperimentError> {
    let harness = resolved.harness;
    let plan = &resolved.plan;
    let mut warnings = Vec::new();
    let mut templates: BTreeMap<String, Template> = BTreeMap::new();
    let mut load = |choice: &ProfileChoice| -> Result<Template, ExperimentError> {
        let key = match choice {
            ProfileChoice::Inline(text) => format!("inline:{text}"),
            other => other.label(),
        };
        if let Some(t) = templates.get(&key) {
            return Ok(t.clone());
        }
        let template = match choice {
            ProfileChoice::Builtin(name) => {
                Template::load(harness.as_str(), &TemplateSource::Builtin(name.clone()))
            }
            ProfileChoice::File(path) => {
                Template::load(harness.as_str(), &TemplateSource::File(path.clone()))
            }
            ProfileChoice::Inline(text) => Ok(Template {
                name: format!("template.workload.template ({INLINE_TEMPLATE_FILE})"),
                text: text.clone(),
            }),
        }
        .map_err(|e| ExperimentError::Profile(e.to_string()))?;
        templates.insert(key, template.clone());
        Ok(template)
    };
    let values = |endpoint: Option<&str>, model: Option<&str>| Values {
        model: model
            .map(str::to_owned)
            .or_else(|| resolved.model.clone())
            .or_else(|| resolved.embedded().then(|| SIM_MODEL.to_owned())),
        tokenizer: resolved.tokenizer.clone(),
        // The embedded simulator's address is known only once it runs; any URL renders the same.
        endpoint: Some(
            endpoint
                .or(resolved.endpoint.as_deref())
                .unwrap_or("http://127.0.0.1:8000")
                .to_owned(),
        ),
        max_model_len: resolved.max_model_len,
        set: resolved.set.clone(),
    };
    let options = ParseOptions {
        strict: rule.strict,
        lenient: rule.lenient,
        default_seed: None,
    };
    let base = load(&resolved.profile)?;
    // Placeholders first, so a missing model or `--set` is not blamed on the overrides.
    render(&base, &values(None, None), &[]).map_err(|e| ExperimentError::Profile(e.to_string()))?;
    let base_edits = Edits {
        overrides: plan.overrides.clone(),
        add: plan.override_add.clone(),
        lenient: rule.lenient,
    };
    render_edited(&base, &values(None, None), &base_edits, harness).map_err(|source| {
        ExperimentError::BaseOverrides {
            path: resolved.path.clone(),
            source,
        }
    })?;
    // What each treatment runs, to find two that run the same.
    let mut runs: Vec<(&str, String, RunIdentity)> = Vec::new();
    for t in &plan.treatments {
        let template = load(resolved.profile_of(&t.name))?;
        let place = resolved.place_of(&t.overrides, None);
        let edits = Edits {
            overrides: core::run_overrides(
                &plan.overrides,
                &llmbench_api::experiment::ResolvedTreatment::from(t),
            ),
            ..base_edits.clone()
        };
        let model = t.model.as_deref();
        let rendered = render_edited(
            &template,
            &values(t.endpoint.as_deref(), model),
            &edits,
            harness,
        )
        .map_err(|source| ExperimentError::Treatment {
            place: resolved.place_of(&t.overrides, Some(&source)),
            treatment: t.name.clone(),
            source: Box::new(source),
        })?;
        warnings.extend(
            rendered
                .warnings()
                .into_iter()
                .map(|w| format!("{place}: treatment `{}`: {w}", t.name)),
        );
        let treatment_error = |message: String| ExperimentError::TreatmentProfile {
            place: place.clone(),
            treatment: t.name.clone(),
            message,
        };
        let identity = match harness {
            Harness::Mlperf => {
                llmbench_metrics::mlperf::parse_settings(
                    &template.name,
                    &rendered.text,
                    None,
                    &options,
                )
                .map_err(|e| treatment_error(e.to_string()))?;
                RunIdentity::Text(rendered.text)
            }
            Harness::Fmperf => {
                llmbench_workload::workload::parse_fmperf(&template.name, &rendered.text)
                    .map_err(|e| treatment_error(e.to_string()))?;
                RunIdentity::Text(rendered.text)
            }
            _ => {
                let parsed = parse_profile(harness, &template.name, &rendered.text, &options)
                    .map_err(|e| treatment_error(e.to_string()))?;
                warnings.extend(
                    parsed
                        .warnings
                        .iter()
                        .filter(|w| w.kind == WarningKind::NearMiss)
                        .map(|w| format!("treatment `{}`: --lenient: {w}", t.name)),
                );
                RunIdentity::Workload(Box::new((parsed.workload, parsed.capacity)))
            }
        };
        // A cold and a warm run of one workload differ in the cache they meet.
        let who = format!(
            "{}|{}|{}|{}",
            resolved.profile_of(&t.name).label(),
            t.endpoint.as_deref().unwrap_or_default(),
            model.or(resolved.model.as_deref()).unwrap_or_default(),
            t.cache.map_or("", |c| c.as_str())
        );
        if let Some((first, _, _)) = runs
            .iter()
            .find(|(_, other_who, other)| *other_who == who && *other == identity)
        {
            let error = ExperimentError::SameWorkload {
                place: resolved.place_of(&t.overrides, None),
                first: (*first).to_owned(),
                second: t.name.clone(),
            };
            if !rule.lenient {
                return Err(error);
            }
            warnings.push(format!("--lenient: {error}"));
        }
        runs.push((&t.name, who, identity));
    }
    Ok(warnings)
}

/// What a treatment's run does, as far as two treatments can be compared: the parsed workload (with its capacity
/// search), or the rendered text for the dialects with their own models (mlperf, fmperf).
#[derive(Debug, PartialEq)]
enum RunIdentity {
    Workload(
        Box<(
            llmbench_workload::workload::Workload,
            Option<CapacitySearchSpec>,
        )>,
    ),
    Text(String),
}

impl Resolved {
    /// `FILE:LINE` of the first of `overrides` the file gives a line for, preferring a key `error` says matched
    /// nothing; `FILE` alone when none has one.
    fn place_of(&self, overrides: &[String], error: Option<&ProfileError>) -> String {
        let missed: Vec<&str> = match error {
            Some(ProfileError::Render(RenderError::UnmatchedOverrides { misses, .. })) => {
                misses.iter().map(|m| m.key.as_str()).collect()
            }
            _ => Vec::new(),
        };
        let keys = overrides
            .iter()
            .filter_map(|o| o.split_once('=').map(|(k, _)| k.trim()));
        let line = missed
            .iter()
            .copied()
            .chain(keys)
            .find_map(|k| self.key_lines.get(k));
        match line {
            Some(line) => format!("{}:{line}", self.path.display()),
            None => self.path.display().to_string(),
        }
    }
}
