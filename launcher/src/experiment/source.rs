//! Reading an experiment file: a `BenchmarkExperiment` manifest (the object a cluster user applies), or an
//! llm-d-benchmark experiment file run unchanged (FORMATS.md §1.8; `llmdbenchmark/experiment/parser.py` and
//! `run/steps/step_05_render_profiles.py::_resolve_treatments` at llm-d-benchmark `8bc9f1dd`).
//!
//! A file with a top-level `apiVersion` or `kind` is a manifest; anything else is read as an llm-d-benchmark file.
//! Errors name the file and, where there is one, the line.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use llmbench_api::experiment::dns_name;
use llmbench_api::render::type_scalar;
use llmbench_api::v1alpha1::BenchmarkExperimentSpec;
use serde::Deserialize;

use super::ExperimentError;
use llmbench_workload::workload::yaml::{Key, Node, Value, parse_document};

/// The group/version a manifest must carry.
pub(crate) const API_VERSION: &str = "llmbench.dev/v1alpha1";
/// The kind a manifest must carry.
pub(crate) const KIND: &str = "BenchmarkExperiment";

/// The top-level keys of an llm-d-benchmark experiment file (FORMATS.md §1.8), and llmbench's own
/// `cache_states` (the BenchmarkExperiment's `cacheStates`; llm-d-benchmark has no cold/warm comparison).
const LLMD_KEYS: [&str; 11] = [
    "experiment",
    "design",
    "setup",
    "constants",
    "treatments",
    "run",
    "reset_caches",
    "treatment_max_attempts",
    "treatment_stop_on_error",
    "validate_failures",
    "cache_states",
];

/// llm-d-benchmark's `reset_caches`: vLLM's dev-mode cache resets, POSTed to the stack before each treatment. The
/// prefix cache is reset by the run itself (`--reset-prefix-cache`, which finds the engine's own reset); these two,
/// vLLM's alone, are called as hooks (recorded, never fatal).
pub(crate) const RESET_CACHE_PATHS: [(&str, &str); 2] = [
    ("reset-mm-cache", "/reset_mm_cache"),
    ("reset-encoder-cache", "/reset_encoder_cache"),
];

/// How unknown keys of an experiment file are judged (`--strict`, `--lenient`; see `llmbench experiment --help`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct KeyRule {
    /// Every unknown key is an error.
    pub(crate) strict: bool,
    /// A near miss of a known key is a warning, not an error.
    pub(crate) lenient: bool,
}

/// An experiment as read from its file, before the command line is applied.
#[derive(Debug, Clone)]
pub(crate) struct Source {
    pub(crate) path: PathBuf,
    pub(crate) kind: SourceKind,
    /// Things the file holds that llmbench reads but does not act on, worth a warning.
    pub(crate) warnings: Vec<String>,
    /// Each override key (a factor's `key`, a treatment's or the template's `key=value`, an llm-d-benchmark
    /// treatment's or constant's key) and the line it is first given on, so a check that fails can name the line.
    pub(crate) key_lines: BTreeMap<String, u32>,
}

#[derive(Debug, Clone)]
pub(crate) enum SourceKind {
    Manifest {
        name: String,
        spec: Box<BenchmarkExperimentSpec>,
    },
    Llmd(LlmdExperiment),
}

impl SourceKind {
    /// How `experiment.json` names the format.
    pub(crate) fn format(&self) -> &'static str {
        match self {
            SourceKind::Manifest { .. } => KIND,
            SourceKind::Llmd(_) => "llm-d-benchmark",
        }
    }
}

/// What an llm-d-benchmark experiment file says.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct LlmdExperiment {
    /// `experiment.name`, else the file's stem.
    pub(crate) name: String,
    /// `experiment.harness` and the line it is on.
    pub(crate) harness: Option<(String, u32)>,
    /// `experiment.profile` (a file name such as `random_concurrent.yaml`) and its line.
    pub(crate) profile: Option<(String, u32)>,
    /// Top-level `constants`, as overrides applied to every treatment before its own values.
    pub(crate) constants: Vec<String>,
    pub(crate) treatments: Vec<LlmdTreatment>,
    /// The line of `treatments` (or `run`).
    pub(crate) treatments_line: u32,
    pub(crate) reset_caches: bool,
    /// llmbench's `cache_states: [cold, warm]`, as the BenchmarkExperiment's `cacheStates`.
    pub(crate) cache_states: Vec<llmbench_api::v1alpha1::CacheState>,
    /// `treatment_max_attempts`, at least 1.
    pub(crate) max_attempts: u32,
    pub(crate) stop_on_error: bool,
    pub(crate) validate_failures: bool,
    /// `setup.treatments`, each with `setup.constants` merged in first.
    pub(crate) setup: Vec<LlmdSetup>,
    /// The line of `setup`.
    pub(crate) setup_line: u32,
    /// Each treatment's and constant's key with its line, in file order.
    pub(crate) key_lines: Vec<(String, u32)>,
}

/// One run treatment of an llm-d-benchmark file.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LlmdTreatment {
    pub(crate) name: String,
    /// key=value, the values written so that our override parser types them as the file's YAML typed them.
    pub(crate) overrides: Vec<String>,
    /// Its own profile (`profile:`), where it names one.
    pub(crate) profile: Option<String>,
    pub(crate) line: u32,
}

/// One setup treatment: a stack configuration llm-d-benchmark would stand up.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LlmdSetup {
    pub(crate) name: String,
    /// Plan-config keys as key=value (lists and maps as JSON), recorded, never applied by llmbench.
    pub(crate) overrides: Vec<String>,
    pub(crate) line: u32,
}

/// Reads `path`: a manifest or an llm-d-benchmark file. `rule` judges the unknown keys of an llm-d-benchmark file:
/// a near miss of a key it reads (`reset_cache`) is an error unless lenient; any other is a warning unless strict.
pub(crate) fn read(path: &Path, rule: KeyRule) -> Result<Source, ExperimentError> {
    let text = std::fs::read_to_string(path).map_err(|source| ExperimentError::Read {
        path: path.to_owned(),
        source,
    })?;
    parse(path, &text, rule)
}

/// [`read`] on text already in hand.
pub(crate) fn parse(path: &Path, text: &str, rule: KeyRule) -> Result<Source, ExperimentError> {
    let file = path.display().to_string();
    let doc = parse_document(&file, text).map_err(|e| invalid(path, None, e.to_string()))?;
    let Some(entries) = doc.entries() else {
        return Err(invalid(
            path,
            Some(doc.line).filter(|l| *l > 0),
            "an experiment file must be a YAML mapping (a BenchmarkExperiment manifest or an llm-d-benchmark \
             experiment file)"
                .to_owned(),
        ));
    };
    let is_manifest = entries
        .iter()
        .any(|(k, _)| k.name == "apiVersion" || k.name == "kind");
    if is_manifest {
        let mut source = read_manifest(path, text)?;
        source.key_lines = manifest_key_lines(&doc);
        // serde reads past fields it does not know; the apiserver (and so `kubectl apply`) refuses them.
        let top: Vec<&Key> = entries.iter().map(|(k, _)| k).collect();
        let mut unknown = unknown_of("", &top, &MANIFEST_KEYS);
        if let Some(spec) = doc.get("spec") {
            let schema = llmbench_api::experiment_schema();
            unknown_fields(spec, &schema["properties"]["spec"], "spec", &mut unknown);
        }
        judge_unknown_keys(path, unknown, rule, &mut source.warnings)?;
        Ok(source)
    } else {
        read_llmd(path, entries, rule)
    }
}

fn invalid(path: &Path, line: Option<u32>, message: String) -> ExperimentError {
    ExperimentError::Invalid {
        path: path.to_owned(),
        line,
        message,
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Manifest {
    api_version: String,
    kind: String,
    #[serde(default)]
    metadata: Metadata,
    spec: BenchmarkExperimentSpec,
}

#[derive(Deserialize, Default)]
struct Metadata {
    #[serde(default)]
    name: Option<String>,
}

fn read_manifest(path: &Path, text: &str) -> Result<Source, ExperimentError> {
    let manifest: Manifest = serde_saphyr::from_str(text).map_err(|e| {
        let line = e
            .location()
            .and_then(|l| u32::try_from(l.line()).ok())
            .filter(|l| *l > 0);
        let message = e.to_string();
        invalid(
            path,
            line,
            format!(
                "not a valid {KIND}: {}",
                message.lines().next().unwrap_or_default().trim()
            ),
        )
    })?;
    if manifest.kind != KIND || manifest.api_version != API_VERSION {
        return Err(invalid(
            path,
            None,
            format!(
                "this is a {} ({}); `llmbench experiment` reads a {KIND} ({API_VERSION}) or an llm-d-benchmark \
                 experiment file",
                manifest.kind, manifest.api_version
            ),
        ));
    }
    let name = manifest
        .metadata
        .name
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| file_stem(path));
    Ok(Source {
        path: path.to_owned(),
        kind: SourceKind::Manifest {
            name,
            spec: Box::new(manifest.spec),
        },
        warnings: Vec::new(),
        key_lines: BTreeMap::new(),
    })
}

/// Where a manifest gives each override key: `spec.factors[i].key`, and the `key=value` items of
/// `spec.treatments[i].overrides`, `spec.template.overrides` and `spec.template.overrideAdd`.
fn manifest_key_lines(doc: &Node) -> BTreeMap<String, u32> {
    let mut lines = BTreeMap::new();
    let mut note = |key: Option<String>, line: u32| {
        if let Some(key) = key.filter(|_| line > 0) {
            lines.entry(key).or_insert(line);
        }
    };
    let key_of = |n: &Node| {
        n.scalar_text()
            .and_then(|t| t.split_once('=').map(|(k, _)| k.trim().to_owned()))
    };
    let list = |n: Option<&Node>| -> Vec<Node> {
        match n.map(|n| &n.value) {
            Some(Value::Seq(items)) => items.clone(),
            _ => Vec::new(),
        }
    };
    let spec = doc.get("spec");
    for factor in list(spec.and_then(|s| s.get("factors"))) {
        if let Some((k, v)) = factor
            .entries()
            .and_then(|e| e.iter().find(|(k, _)| k.name == "key"))
        {
            note(v.scalar_text(), k.line);
        }
    }
    for treatment in list(spec.and_then(|s| s.get("treatments"))) {
        for item in list(treatment.get("overrides")) {
            note(key_of(&item), item.line);
        }
    }
    let template = spec.and_then(|s| s.get("template"));
    for field in ["overrideAdd", "overrides"] {
        for item in list(template.and_then(|t| t.get(field))) {
            note(key_of(&item), item.line);
        }
    }
    lines
}

fn file_stem(path: &Path) -> String {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = name
        .strip_suffix(".yaml")
        .or_else(|| name.strip_suffix(".yml"))
        .unwrap_or(&name);
    if stem.is_empty() {
        "experiment".to_owned()
    } else {
        stem.to_owned()
    }
}

/// The top-level keys of a manifest.
const MANIFEST_KEYS: [&str; 5] = ["apiVersion", "kind", "metadata", "spec", "status"];

/// The keys of an llm-d-benchmark file's `experiment` section.
const LLMD_EXPERIMENT_KEYS: [&str; 5] = ["name", "description", "harness", "profile", "datasetUrl"];

/// A key an experiment file has and llmbench does not know: its path, line and the known key it is one edit from.
struct UnknownKey {
    path: String,
    line: u32,
    near: Option<String>,
}

/// The keys of one section (`section` is its path prefix, e.g. `experiment.`) not in `known`.
fn unknown_of(section: &str, keys: &[&Key], known: &[&str]) -> Vec<UnknownKey> {
    keys.iter()
        .filter(|k| !known.contains(&k.name.as_str()))
        .map(|k| UnknownKey {
            path: format!("{section}{}", k.name),
            line: k.line,
            near: llmbench_workload::workload::reader::nearest_key(&k.name, known.iter().copied())
                .map(|n| format!("{section}{n}")),
        })
        .collect()
}

/// Judges unknown keys by `rule`: every one is an error when strict; a near miss of a known key is one unless
/// lenient; the rest become warnings.
fn judge_unknown_keys(
    path: &Path,
    keys: Vec<UnknownKey>,
    rule: KeyRule,
    warnings: &mut Vec<String>,
) -> Result<(), ExperimentError> {
    if keys.is_empty() {
        return Ok(());
    }
    if rule.strict {
        return Err(ExperimentError::UnknownKeys {
            path: path.to_owned(),
            keys: keys
                .iter()
                .map(|k| format!("`{}` (line {})", k.path, k.line))
                .collect(),
        });
    }
    let misses: Vec<String> = keys
        .iter()
        .filter_map(|k| {
            let near = k.near.as_ref()?;
            Some(format!(
                "`{}` (line {}): did you mean `{near}`?",
                k.path, k.line
            ))
        })
        .collect();
    if !misses.is_empty() && !rule.lenient {
        return Err(ExperimentError::NearMisses {
            path: path.to_owned(),
            keys: misses,
        });
    }
    for key in keys {
        let hint = key
            .near
            .map(|n| format!("; did you mean `{n}`?"))
            .unwrap_or_default();
        warnings.push(format!(
            "{}: line {}: unknown key `{}`, ignored{hint}",
            path.display(),
            key.line,
            key.path,
        ));
    }
    Ok(())
}

/// The fields of a manifest that its CRD's `schema` does not have, walking maps by `properties` (and
/// `additionalProperties` for maps of free keys) and lists by `items`.
fn unknown_fields(node: &Node, schema: &serde_json::Value, path: &str, out: &mut Vec<UnknownKey>) {
    let join = |key: &str| {
        if path.is_empty() {
            key.to_owned()
        } else {
            format!("{path}.{key}")
        }
    };
    if schema["x-kubernetes-preserve-unknown-fields"] == true {
        return;
    }
    match &node.value {
        Value::Map(entries) => {
            if let Some(properties) = schema["properties"].as_object() {
                for (key, value) in entries {
                    match properties.get(&key.name) {
                        Some(field) => unknown_fields(value, field, &join(&key.name), out),
                        None => out.push(UnknownKey {
                            path: join(&key.name),
                            line: key.line,
                            near: llmbench_workload::workload::reader::nearest_key(
                                &key.name,
                                properties.keys().map(String::as_str),
                            )
                            .map(&join),
                        }),
                    }
                }
            } else if schema["additionalProperties"].is_object() {
                for (key, value) in entries {
                    unknown_fields(
                        value,
                        &schema["additionalProperties"],
                        &join(&key.name),
                        out,
                    );
                }
            }
        }
        Value::Seq(items) => {
            for (i, item) in items.iter().enumerate() {
                unknown_fields(item, &schema["items"], &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

fn read_llmd(
    path: &Path,
    entries: &[(Key, Node)],
    rule: KeyRule,
) -> Result<Source, ExperimentError> {
    let mut warnings = Vec::new();
    let keys: Vec<&Key> = entries.iter().map(|(k, _)| k).collect();
    judge_unknown_keys(path, unknown_of("", &keys, &LLMD_KEYS), rule, &mut warnings)?;
    let get = |name: &str| entries.iter().find(|(k, _)| k.name == name);
    let mut exp = LlmdExperiment {
        name: file_stem(path),
        max_attempts: 1,
        ..LlmdExperiment::default()
    };

    // `experiment {name, description, harness, profile}`: metadata, with harness and profile as defaults.
    if let Some((key, node)) = get("experiment").filter(|(_, n)| !n.is_null()) {
        let meta = node.entries().ok_or_else(|| {
            invalid(
                path,
                Some(key.line),
                "`experiment` must be a mapping".to_owned(),
            )
        })?;
        let keys: Vec<&Key> = meta.iter().map(|(k, _)| k).collect();
        judge_unknown_keys(
            path,
            unknown_of("experiment.", &keys, &LLMD_EXPERIMENT_KEYS),
            rule,
            &mut warnings,
        )?;
        for (k, v) in meta {
            let text = || {
                v.scalar_text().ok_or_else(|| {
                    invalid(
                        path,
                        Some(k.line),
                        format!(
                            "`experiment.{}` must be a string, not {}",
                            k.name,
                            v.value.describe()
                        ),
                    )
                })
            };
            match k.name.as_str() {
                "name" => exp.name = text()?,
                "harness" => exp.harness = Some((text()?, k.line)),
                "profile" => exp.profile = Some((text()?, k.line)),
                "datasetUrl" => warnings.push(format!(
                    "{}: line {}: `experiment.datasetUrl` is not downloaded by llmbench; point the profile at a \
                     local dataset file instead",
                    path.display(),
                    k.line
                )),
                _ => {}
            }
        }
    }

    // Run controls: the same defaults as llm-d-benchmark's RUN_CONTROL_DEFAULTS.
    let flag = |name: &str| -> Result<bool, ExperimentError> {
        match get(name) {
            None => Ok(false),
            Some((_, node)) if node.is_null() => Ok(false),
            Some((key, node)) => match node.value {
                Value::Bool(b) => Ok(b),
                _ => Err(invalid(
                    path,
                    Some(key.line),
                    format!(
                        "`{name}` must be true or false, not {}",
                        node.value.describe()
                    ),
                )),
            },
        }
    };
    exp.reset_caches = flag("reset_caches")?;
    if let Some((key, node)) = get("cache_states").filter(|(_, n)| !n.is_null()) {
        let bad = |what: String| {
            invalid(
                path,
                Some(key.line),
                format!("`cache_states` must be a list of `cold` and `warm`, {what}"),
            )
        };
        let Value::Seq(items) = &node.value else {
            return Err(bad(format!("not {}", node.value.describe())));
        };
        for item in items {
            let state = item
                .scalar_text()
                .and_then(|t| llmbench_api::v1alpha1::CacheState::parse(&t))
                .ok_or_else(|| bad(format!("not {}", item.value.describe())))?;
            exp.cache_states.push(state);
        }
    }
    exp.stop_on_error = flag("treatment_stop_on_error")?;
    exp.validate_failures = flag("validate_failures")?;
    if let Some((key, node)) = get("treatment_max_attempts").filter(|(_, n)| !n.is_null()) {
        exp.max_attempts = match node.value {
            // llm-d-benchmark takes max(1, int(value)).
            Value::Int(n) => u32::try_from(n.max(1)).unwrap_or(u32::MAX),
            _ => {
                return Err(invalid(
                    path,
                    Some(key.line),
                    format!(
                        "`treatment_max_attempts` must be a whole number, not {}",
                        node.value.describe()
                    ),
                ));
            }
        };
    }

    // `constants`: merged into every run treatment before its own values.
    if let Some((key, node)) = get("constants").filter(|(_, n)| !n.is_null()) {
        let map = node.entries().ok_or_else(|| {
            invalid(
                path,
                Some(key.line),
                format!(
                    "`constants` must be a mapping, not {}",
                    node.value.describe()
                ),
            )
        })?;
        for (k, v) in map {
            exp.constants.push(override_text(path, "constants", k, v)?);
            exp.key_lines.push((k.name.clone(), k.line));
        }
    }

    // `treatments`, else `run` (llm-d-benchmark: `exp_data.get("treatments") or exp_data.get("run", [])`).
    let non_empty = |name: &str| {
        get(name).filter(|(_, n)| match &n.value {
            Value::Null => false,
            Value::Seq(items) => !items.is_empty(),
            _ => true,
        })
    };
    if let Some((key, node)) = non_empty("treatments").or_else(|| non_empty("run")) {
        exp.treatments_line = key.line;
        let Value::Seq(items) = &node.value else {
            return Err(invalid(
                path,
                Some(key.line),
                format!(
                    "`{}` is {}; llm-d-benchmark reads only a list of treatments here (a mapping such as the \
                     bash-era `run: {{factors, levels, treatments}}` or `run: {{factors: [...]}}` runs nothing \
                     upstream); write them as a list of `{{name: ..., <key>: <value>}}`",
                    key.name,
                    node.value.describe()
                ),
            ));
        };
        for (i, item) in items.iter().enumerate() {
            exp.treatments
                .push(run_treatment(path, &key.name, i, item, &mut warnings)?);
            for (k, _) in item.entries().unwrap_or_default() {
                if k.name != "name" && k.name != "profile" {
                    exp.key_lines.push((k.name.clone(), k.line));
                }
            }
        }
    } else if let Some((key, _)) = get("treatments").or_else(|| get("run")) {
        // Present but empty: the error names its line.
        exp.treatments_line = key.line;
    }

    // `setup {constants, treatments}`: each setup treatment is a stack llm-d-benchmark would stand up.
    if let Some((key, node)) = get("setup").filter(|(_, n)| !n.is_null()) {
        exp.setup_line = key.line;
        let setup = node
            .entries()
            .ok_or_else(|| invalid(path, Some(key.line), "`setup` must be a mapping".to_owned()))?;
        let mut constants = Vec::new();
        if let Some((k, v)) = setup.iter().find(|(k, _)| k.name == "constants") {
            for (ck, cv) in v.entries().ok_or_else(|| {
                invalid(
                    path,
                    Some(k.line),
                    "`setup.constants` must be a mapping".to_owned(),
                )
            })? {
                constants.push(plan_key_text(ck, cv));
            }
        }
        if let Some((k, v)) = setup.iter().find(|(k, _)| k.name == "treatments") {
            let Value::Seq(items) = &v.value else {
                return Err(invalid(
                    path,
                    Some(k.line),
                    "`setup.treatments` must be a list".to_owned(),
                ));
            };
            for (i, item) in items.iter().enumerate() {
                let map = item.entries().ok_or_else(|| {
                    invalid(
                        path,
                        Some(item.line),
                        format!("setup.treatments[{i}] must be a mapping"),
                    )
                })?;
                let mut overrides = constants.clone();
                let mut name = format!("setup-{i}");
                for (sk, sv) in map {
                    if sk.name == "name" {
                        name = sv.scalar_text().unwrap_or(name);
                    } else {
                        overrides.push(plan_key_text(sk, sv));
                    }
                }
                exp.setup.push(LlmdSetup {
                    name,
                    overrides,
                    line: item.line,
                });
            }
        }
    }
    let mut key_lines = BTreeMap::new();
    for (key, line) in &exp.key_lines {
        key_lines.entry(key.clone()).or_insert(*line);
    }
    Ok(Source {
        path: path.to_owned(),
        kind: SourceKind::Llmd(exp),
        warnings,
        key_lines,
    })
}

fn run_treatment(
    path: &Path,
    list: &str,
    index: usize,
    item: &Node,
    warnings: &mut Vec<String>,
) -> Result<LlmdTreatment, ExperimentError> {
    let map = item.entries().ok_or_else(|| {
        invalid(
            path,
            Some(item.line),
            format!(
                "{list}[{index}] must be a mapping {{name: ..., <key>: <value>}}, not {}",
                item.value.describe()
            ),
        )
    })?;
    // llm-d-benchmark names an unnamed treatment t<i>.
    let mut name = format!("t{index}");
    let mut profile = None;
    let mut overrides = Vec::new();
    for (k, v) in map {
        match k.name.as_str() {
            "name" => {
                name = v.scalar_text().ok_or_else(|| {
                    invalid(
                        path,
                        Some(k.line),
                        format!("{list}[{index}].name must be a string"),
                    )
                })?
            }
            "profile" => profile = v.scalar_text().filter(|p| !p.is_empty()),
            _ => overrides.push(override_text(path, &format!("{list}[{index}]"), k, v)?),
        }
    }
    let safe = dns_name(&name);
    if safe != name {
        warnings.push(format!(
            "{}: line {}: treatment `{name}` is named `{safe}` (run directories and the table take lowercase \
             letters, digits and '-')",
            path.display(),
            item.line
        ));
    }
    Ok(LlmdTreatment {
        name: safe,
        overrides,
        profile,
        line: item.line,
    })
}

/// One `key: value` of a treatment or of `constants` as an override `key=value` whose value our override parser
/// (`Override::parse`, YAML-scalar typing) reads back as the same YAML type: strings that would read as something
/// else are quoted. Lists and maps cannot be written that way (the parser types every value as a scalar), so
/// they are refused, naming the line.
fn override_text(
    path: &Path,
    place: &str,
    key: &Key,
    value: &Node,
) -> Result<String, ExperimentError> {
    let text = match &value.value {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Int(i) => i.to_string(),
        Value::Float(f) if f.is_finite() => {
            // Debug keeps the point (`2.0`, `0.1`, `1e20`), so the value stays a float.
            format!("{f:?}")
        }
        Value::Float(f) => {
            return Err(invalid(
                path,
                Some(key.line),
                format!(
                    "{place}: `{}` is {f}, which a profile override cannot hold; write the string the harness \
                     expects (e.g. `inf`)",
                    key.name
                ),
            ));
        }
        Value::Str(s) => {
            if type_scalar(s.trim()) == Ok(serde_json::Value::String(s.clone())) {
                s.clone()
            } else {
                serde_json::Value::String(s.clone()).to_string()
            }
        }
        Value::Seq(_) | Value::Map(_) => {
            return Err(invalid(
                path,
                Some(key.line),
                format!(
                    "{place}: `{}` is {}; llmbench's profile overrides set scalar values only (numbers, strings, \
                     booleans, null), so it cannot be applied — set the list in a profile file instead",
                    key.name,
                    value.value.describe()
                ),
            ));
        }
    };
    if key.name.is_empty() || key.name.chars().any(char::is_whitespace) {
        return Err(invalid(
            path,
            Some(key.line),
            format!("{place}: `{}` is not a profile key", key.name),
        ));
    }
    Ok(format!("{}={text}", key.name))
}

/// A setup key as text for the record: scalars as they are, lists and maps as JSON.
fn plan_key_text(key: &Key, value: &Node) -> String {
    let text = value
        .scalar_text()
        .unwrap_or_else(|| value.to_json().to_string());
    format!("{}={text}", key.name)
}

/// `levels` of an llm-d treatment for the table: its own keys and values, constants left out.
pub(crate) fn levels_of(overrides: &[String]) -> BTreeMap<String, String> {
    overrides
        .iter()
        .filter_map(|o| o.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const STRICT: KeyRule = KeyRule {
        strict: true,
        lenient: false,
    };

    fn llmd(text: &str) -> LlmdExperiment {
        match parse(Path::new("x.yaml"), text, KeyRule::default())
            .unwrap()
            .kind
        {
            SourceKind::Llmd(e) => e,
            SourceKind::Manifest { .. } => panic!("read as a manifest"),
        }
    }

    #[test]
    fn values_keep_their_yaml_types_through_the_override_parser() {
        let e = llmd(
            "treatments:\n  - name: a\n    rate: 0.10\n    count: 8\n    whole: 2.0\n    flag: true\n    word: yes\n    \
             said: 'yes'\n    quoted: '123'\n    plain: default-plugins.yaml\n    nothing: null\n    rr: inf\n",
        );
        let t = &e.treatments[0];
        assert_eq!(
            t.overrides,
            [
                "rate=0.1",
                "count=8",
                "whole=2.0",
                "flag=true",
                // A plain `yes` is a boolean, as PyYAML (and so llm-d-benchmark) reads it.
                "word=true",
                // A quoted one is a string, which our parser would read as true unless quoted.
                "said=\"yes\"",
                "quoted=\"123\"",
                "plain=default-plugins.yaml",
                "nothing=null",
                "rr=inf",
            ]
        );
        for o in &t.overrides {
            llmbench_api::Override::parse(o).unwrap();
        }
        let typed = |i: usize| {
            llmbench_api::Override::parse(&t.overrides[i])
                .unwrap()
                .value
        };
        assert_eq!(typed(2), serde_json::json!(2.0));
        assert_eq!(typed(5), serde_json::json!("yes"));
        assert_eq!(typed(6), serde_json::json!("123"));
    }

    #[test]
    fn the_run_controls_constants_and_metadata_are_read() {
        let e = llmd(
            "experiment: {name: sweep, harness: vllm-benchmark, profile: random_concurrent.yaml}\ndesign: {x: 1}\n\
             reset_caches: true\ntreatment_max_attempts: 3\ntreatment_stop_on_error: true\nvalidate_failures: true\n\
             constants: {num-prompts: 4}\nrun:\n  - {name: Conc_8, max-concurrency: 8, profile: sanity_random.yaml}\n  - {max-concurrency: 16}\n",
        );
        assert_eq!(e.name, "sweep");
        assert_eq!(
            e.harness.as_ref().map(|h| h.0.as_str()),
            Some("vllm-benchmark")
        );
        assert_eq!(e.profile, Some(("random_concurrent.yaml".into(), 1)));
        assert!(e.reset_caches && e.stop_on_error && e.validate_failures);
        assert_eq!(e.max_attempts, 3);
        assert_eq!(e.constants, ["num-prompts=4"]);
        assert_eq!(e.treatments[0].name, "conc-8");
        assert_eq!(
            e.treatments[0].profile.as_deref(),
            Some("sanity_random.yaml")
        );
        assert_eq!(e.treatments[1].name, "t1");
        assert_eq!(e.treatments[1].overrides, ["max-concurrency=16"]);
    }

    #[test]
    fn a_near_miss_key_is_an_error_unless_lenient_other_unknown_keys_warn_and_strict_refuses_all() {
        let text = "treatments:\n  - {name: a, x: 1}\nreset_cache: true\nnotes: hi\n";
        let err = parse(Path::new("x.yaml"), text, KeyRule::default())
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "x.yaml: 1 key(s) one edit from a key llm-d-benchmark reads: `reset_cache` (line 3): did you mean \
             `reset_caches`?; a misspelt key would be ignored — fix the spelling, or pass --lenient to run with it \
             ignored"
        );
        let lenient = KeyRule {
            lenient: true,
            ..KeyRule::default()
        };
        let source = parse(Path::new("x.yaml"), text, lenient).unwrap();
        assert!(
            source.warnings[0].contains("line 3")
                && source.warnings[0].contains("did you mean `reset_caches`?"),
            "{:?}",
            source.warnings
        );
        let source = parse(
            Path::new("x.yaml"),
            "treatments:\n  - {name: a, x: 1}\nnotes: hi\n",
            KeyRule::default(),
        )
        .unwrap();
        assert!(
            source.warnings[0].contains("unknown key `notes`"),
            "{:?}",
            source.warnings
        );
        let err = parse(Path::new("x.yaml"), text, STRICT)
            .unwrap_err()
            .to_string();
        assert!(err.contains("`reset_cache` (line 3)"), "{err}");
    }

    #[test]
    fn a_manifest_field_the_crd_does_not_have_is_judged_like_any_key() {
        let manifest = "apiVersion: llmbench.dev/v1alpha1\nkind: BenchmarkExperiment\nmetadata: {name: m}\nspec:\n  \
                        template:\n    harness: guidellm\n    workload: {builtin: sanity_concurrent}\n    stack: {model: \
                        m}\n    overides: [spec.profile.streams=2]\n  factors:\n    - {name: s, key: spec.profile.streams, \
                        levels: [\"1\"], note: x}\n  repeat: 2\n";
        let err = parse(Path::new("bx.yaml"), manifest, KeyRule::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(
                "`spec.template.overides` (line 9): did you mean `spec.template.overrides`?"
            ) && err.contains("`spec.repeat` (line 12): did you mean `spec.repeats`?"),
            "{err}"
        );
        let lenient = KeyRule {
            lenient: true,
            ..KeyRule::default()
        };
        let source = parse(Path::new("bx.yaml"), manifest, lenient).unwrap();
        assert_eq!(source.warnings.len(), 3, "{:?}", source.warnings);
        assert!(
            source.warnings[1].contains("unknown key `spec.factors[0].note`, ignored"),
            "{:?}",
            source.warnings
        );
    }

    #[test]
    fn a_near_miss_in_the_experiment_section_names_the_key() {
        let err = parse(
            Path::new("x.yaml"),
            "experiment: {name: e, harnes: guidellm}\ntreatments:\n  - {name: a, x: 1}\n",
            KeyRule::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("`experiment.harnes` (line 1): did you mean `experiment.harness`?"),
            "{err}"
        );
    }

    #[test]
    fn lists_maps_and_the_factorial_run_form_are_refused_with_their_line() {
        let err = parse(
            Path::new("x.yaml"),
            "treatments:\n  - name: a\n    stages: [1, 2]\n",
            KeyRule::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("x.yaml: line 3") && err.contains("`stages` is a list"),
            "{err}"
        );
        let err = parse(
            Path::new("x.yaml"),
            "run:\n  factors: [a]\n",
            KeyRule::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("line 1") && err.contains("only a list"),
            "{err}"
        );
    }

    #[test]
    fn setup_treatments_carry_their_constants_and_lines() {
        let e = llmd(
            "setup:\n  constants: {decode.replicas: 2}\n  treatments:\n    - name: a\n      router.epp.pluginsConfigFile: x.yaml\n\
             treatments:\n  - {name: r, n: 1}\n",
        );
        assert_eq!(e.setup_line, 1);
        assert_eq!(
            e.setup[0].overrides,
            ["decode.replicas=2", "router.epp.pluginsConfigFile=x.yaml"]
        );
        assert_eq!(e.setup[0].line, 4);
    }

    #[test]
    fn a_manifest_is_read_into_the_crd_type_and_its_errors_name_the_line() {
        let text = "apiVersion: llmbench.dev/v1alpha1\nkind: BenchmarkExperiment\nmetadata: {name: bx}\nspec:\n  \
                    template:\n    harness: vllm-benchmark\n    workload: {builtin: sanity_random}\n    stack: {model: m}\n  \
                    treatments: [{name: a, overrides: [num-prompts=2]}]\n  repeats: 2\n";
        let source = parse(Path::new("bx.yaml"), text, KeyRule::default()).unwrap();
        let SourceKind::Manifest { name, spec } = source.kind else {
            panic!("not a manifest")
        };
        assert_eq!((name.as_str(), spec.repeats), ("bx", 2));
        let err = parse(
            Path::new("bx.yaml"),
            &text.replace("repeats: 2", "repeats: two"),
            KeyRule::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("bx.yaml: line 10"), "{err}");
        let err = parse(
            Path::new("bx.yaml"),
            &text.replace("kind: BenchmarkExperiment", "kind: BenchmarkRun"),
            KeyRule::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("this is a BenchmarkRun"), "{err}");
    }
}
