//! Finding a workload template (the bundled library or a file) and rendering it with the shared renderer, so
//! `llmbench render` and `llmbench run` produce exactly what the operator puts in a run's ConfigMap.
//!
//! The renderer's errors get the command line's fix here: an unresolved placeholder names the flag that fills it
//! (`--model` for the model), and an override written with another dialect's path names this dialect's.

mod equivalents;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use llmbench_core::harness::Harness;
use llmbench_core::library::{LibraryError, builtin_profile};
use llmbench_core::render::{
    Override, OverrideError, OverrideMiss, RenderError, RenderOptions, TOKEN_PREFIX,
    UnresolvedPlaceholder, render_profile, render_profile_with, well_known,
};

/// Why a profile could not be loaded or rendered.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("cannot read template {path}: {source}")]
    ReadTemplate {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Library(#[from] LibraryError),
    #[error(transparent)]
    Render(#[from] RenderError),
    /// Placeholders without a value, and the flags that give them one.
    #[error("{source}; {help}")]
    Unresolved { source: RenderError, help: String },
    #[error(transparent)]
    Override(#[from] OverrideError),
    #[error("--override-add: {0}")]
    OverrideAdd(OverrideError),
    #[error(
        "malformed --set {text:?}: expected NAME=VALUE with NAME of letters, digits and underscores"
    )]
    MalformedSet { text: String },
}

/// A template and the name errors call it by.
#[derive(Debug, Clone)]
pub struct Template {
    /// `inference-perf/sanity_random.yaml.in` for a bundled profile, the path for a file.
    pub name: String,
    pub text: String,
}

/// Where a template comes from.
#[derive(Debug, Clone)]
pub enum TemplateSource {
    /// A profile of the bundled library, by name.
    Builtin(String),
    /// A `yaml.in` (or plain YAML) file.
    File(PathBuf),
}

impl Template {
    /// Loads `source` for `harness`.
    pub fn load(harness: &str, source: &TemplateSource) -> Result<Self, ProfileError> {
        match source {
            TemplateSource::Builtin(name) => {
                let profile = builtin_profile(harness, name)?;
                Ok(Self {
                    name: profile.file_name(),
                    text: profile.template.to_owned(),
                })
            }
            TemplateSource::File(path) => Ok(Self {
                name: path.display().to_string(),
                text: read(path)?,
            }),
        }
    }
}

fn read(path: &Path) -> Result<String, ProfileError> {
    std::fs::read_to_string(path).map_err(|source| ProfileError::ReadTemplate {
        path: path.to_owned(),
        source,
    })
}

/// Placeholder values as a laptop user gives them: the stack-like conveniences first, then `--set` on top (the same
/// precedence as a BenchmarkRun's `stack` and `env`).
#[derive(Debug, Clone, Default)]
pub struct Values {
    pub model: Option<String>,
    pub tokenizer: Option<String>,
    pub endpoint: Option<String>,
    pub max_model_len: Option<u32>,
    pub set: Vec<String>,
}

impl Values {
    /// The name → value map for the renderer.
    pub fn resolve(&self) -> Result<BTreeMap<String, String>, ProfileError> {
        let mut values = BTreeMap::new();
        if let Some(model) = &self.model {
            values.insert(well_known::MODEL.to_owned(), model.clone());
        }
        if let Some(tokenizer) = self.tokenizer.as_ref().or(self.model.as_ref()) {
            values.insert(well_known::TOKENIZER.to_owned(), tokenizer.clone());
        }
        if let Some(endpoint) = &self.endpoint {
            values.insert(
                well_known::ENDPOINT_URL.to_owned(),
                endpoint.trim_end_matches('/').to_owned(),
            );
        }
        if let Some(len) = self.max_model_len {
            values.insert(well_known::MAX_MODEL_LEN.to_owned(), len.to_string());
        }
        for item in &self.set {
            let (name, value) = item
                .split_once('=')
                .filter(|(n, _)| {
                    !n.is_empty() && n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                })
                .ok_or_else(|| ProfileError::MalformedSet { text: item.clone() })?;
            let name = name
                .strip_prefix(llmbench_core::render::TOKEN_PREFIX)
                .unwrap_or(name);
            values.insert(name.to_owned(), value.to_owned());
        }
        Ok(values)
    }
}

/// Renders `template` with `values` and `overrides` (`key=value` strings).
pub fn render(
    template: &Template,
    values: &Values,
    overrides: &[String],
) -> Result<String, ProfileError> {
    let overrides = overrides
        .iter()
        .map(|o| Override::parse(o))
        .collect::<Result<Vec<_>, _>>()?;
    render_profile(
        &template.name,
        &template.text,
        &values.resolve()?,
        &overrides,
    )
    .map_err(|e| with_help(e, None))
}

/// What the command line changes in a profile: `--override-add` (applied first, so an `--override` may set a key it
/// created), `--override`, and `--lenient` (a dotted `--override` whose last key is missing creates it, as
/// llm-d-benchmark does, and is reported instead of failing).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Edits {
    pub overrides: Vec<String>,
    pub add: Vec<String>,
    pub lenient: bool,
}

/// A rendered profile and the keys `--lenient` let an `--override` create.
#[derive(Debug, Clone, PartialEq)]
pub struct RenderedProfile {
    pub text: String,
    pub created: Vec<OverrideMiss>,
}

impl RenderedProfile {
    /// One warning per key an override created under `--lenient`.
    pub fn warnings(&self) -> Vec<String> {
        self.created
            .iter()
            .map(|miss| {
                let mut text = format!(
                    "--lenient: --override `{}` created a key the profile does not have ({})",
                    miss.key, miss.reason
                );
                if let Some(s) = &miss.suggestion {
                    text.push_str(&format!("; did you mean `{s}`?"));
                }
                text
            })
            .collect()
    }
}

/// Renders `template` for a `harness` profile with `values` and `edits`. An override that matches nothing and is
/// another dialect's path for a common setting (rate, concurrency, duration, request count, lengths) says where
/// this dialect keeps it.
pub fn render_edited(
    template: &Template,
    values: &Values,
    edits: &Edits,
    harness: Harness,
) -> Result<RenderedProfile, ProfileError> {
    let mut overrides = edits
        .add
        .iter()
        .map(|o| Override::parse_add(o))
        .collect::<Result<Vec<_>, _>>()
        .map_err(ProfileError::OverrideAdd)?;
    for o in &edits.overrides {
        overrides.push(Override::parse(o)?);
    }
    let options = RenderOptions {
        create_missing_leaves: edits.lenient,
    };
    let rendered = render_profile_with(
        &template.name,
        &template.text,
        &values.resolve()?,
        &overrides,
        options,
    )
    .map_err(|e| with_help(e, Some(harness)))?;
    Ok(RenderedProfile {
        text: rendered.text,
        created: rendered.created,
    })
}

/// Adds the command line's fix to a render error: the flag for each unresolved placeholder, and the dialect's own
/// path for an override written in another dialect.
fn with_help(error: RenderError, harness: Option<Harness>) -> ProfileError {
    match error {
        RenderError::UnresolvedPlaceholders {
            template,
            placeholders,
        } => {
            let help = placeholder_help(&placeholders);
            let source = RenderError::UnresolvedPlaceholders {
                template,
                placeholders,
            };
            if help.is_empty() {
                ProfileError::Render(source)
            } else {
                ProfileError::Unresolved { source, help }
            }
        }
        RenderError::UnmatchedOverrides {
            template,
            mut misses,
        } => {
            if let Some(harness) = harness {
                for miss in &mut misses {
                    miss.hint = equivalents::hint(harness, &miss.key);
                }
            }
            ProfileError::Render(RenderError::UnmatchedOverrides { template, misses })
        }
        other => ProfileError::Render(other),
    }
}

/// "pass --model NAME (the profile's model is the placeholder REPLACE_ENV_…), --set NAME=VALUE": the flag that
/// fills each placeholder. Shell-style `${NAME}` placeholders already say so in their own text.
fn placeholder_help(placeholders: &[UnresolvedPlaceholder]) -> String {
    // --model fills the tokenizer too, when --tokenizer is not given.
    let model_missing = placeholders.iter().any(|p| p.name == well_known::MODEL);
    let fixes: Vec<String> = placeholders
        .iter()
        .filter(|p| !p.shell_style)
        .filter(|p| !(model_missing && p.name == well_known::TOKENIZER))
        .map(|p| {
            let token = format!("{TOKEN_PREFIX}{}", p.name);
            let flag = match p.name.as_str() {
                well_known::MODEL => Some(("--model NAME", "model")),
                well_known::TOKENIZER => Some(("--tokenizer SPEC", "tokenizer")),
                well_known::ENDPOINT_URL => Some(("--endpoint URL", "endpoint")),
                well_known::MAX_MODEL_LEN => Some(("--max-model-len TOKENS", "context length")),
                _ => None,
            };
            match flag {
                Some((flag, what)) => {
                    format!("{flag} (the profile's {what} is the placeholder {token})")
                }
                None => format!("--set {}=VALUE", p.name),
            }
        })
        .collect();
    if fixes.is_empty() {
        String::new()
    } else {
        format!("pass {}", fixes.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_takes_precedence_over_the_stack_conveniences_and_accepts_the_token_prefix() {
        let values = Values {
            model: Some("m".into()),
            set: vec![
                "REPLACE_ENV_LLMDBENCH_DEPLOY_CURRENT_MODEL=other".into(),
                "X=a=b".into(),
            ],
            ..Values::default()
        };
        let resolved = values.resolve().expect("resolves");
        assert_eq!(resolved[well_known::MODEL], "other");
        assert_eq!(
            resolved[well_known::TOKENIZER],
            "m",
            "the tokenizer defaults to the model"
        );
        assert_eq!(resolved["X"], "a=b");
    }

    fn template(text: &str) -> Template {
        Template {
            name: "t.yaml.in".into(),
            text: text.into(),
        }
    }

    #[test]
    fn an_unresolved_placeholder_names_the_flag_that_fills_it() {
        let err = render(
            &template("m: REPLACE_ENV_LLMDBENCH_DEPLOY_CURRENT_MODEL\nt: REPLACE_ENV_LLMDBENCH_DEPLOY_CURRENT_TOKENIZER\n\
                       u: REPLACE_ENV_LLMDBENCH_HARNESS_STACK_ENDPOINT_URL\nx: REPLACE_ENV_X\n"),
            &Values::default(),
            &[],
        )
        .expect_err("unresolved");
        let message = err.to_string();
        assert!(
            message.ends_with(
                "; pass --model NAME (the profile's model is the placeholder REPLACE_ENV_LLMDBENCH_DEPLOY_CURRENT_MODEL), \
                 --endpoint URL (the profile's endpoint is the placeholder \
                 REPLACE_ENV_LLMDBENCH_HARNESS_STACK_ENDPOINT_URL), --set X=VALUE"
            ),
            "--model fills the tokenizer too, so --tokenizer is not asked for: {message}"
        );
    }

    #[test]
    fn adds_come_before_overrides_and_lenient_reports_what_an_override_created() {
        let t = template("a:\n  b: 1\n");
        let edits = Edits {
            overrides: vec!["a.c=3".into(), "a.zeta=4".into()],
            add: vec!["a.c=2".into()],
            lenient: true,
        };
        let rendered =
            render_edited(&t, &Values::default(), &edits, Harness::InferencePerf).expect("renders");
        let doc: serde_json::Value = serde_saphyr::from_str(&rendered.text).expect("yaml");
        assert_eq!(doc["a"]["c"], 3);
        assert_eq!(doc["a"]["zeta"], 4);
        assert_eq!(
            rendered.warnings(),
            [
                "--lenient: --override `a.zeta` created a key the profile does not have (`a` has no key `zeta`)"
            ]
        );
    }

    #[test]
    fn a_malformed_add_names_its_flag() {
        let edits = Edits {
            add: vec!["novalue".into()],
            ..Edits::default()
        };
        let err = render_edited(
            &template("a: 1\n"),
            &Values::default(),
            &edits,
            Harness::Guidellm,
        )
        .expect_err("malformed");
        assert!(
            err.to_string()
                .starts_with("--override-add: malformed override"),
            "{err}"
        );
    }

    #[test]
    fn malformed_set_is_an_error() {
        for bad in ["noequals", "=v", "bad-name=1"] {
            let values = Values {
                set: vec![bad.into()],
                ..Values::default()
            };
            assert!(
                matches!(values.resolve(), Err(ProfileError::MalformedSet { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_bundled_profile_loads_by_name_with_or_without_its_suffix() {
        for name in ["sanity_random", "sanity_random.yaml.in"] {
            let template = Template::load("inference-perf", &TemplateSource::Builtin(name.into()))
                .expect("bundled");
            assert_eq!(template.name, "inference-perf/sanity_random.yaml.in");
        }
    }

    #[test]
    fn a_missing_template_file_names_the_path() {
        let err = Template::load(
            "nop",
            &TemplateSource::File("/nonexistent/x.yaml.in".into()),
        )
        .expect_err("missing");
        assert!(err.to_string().contains("/nonexistent/x.yaml.in"), "{err}");
    }
}
