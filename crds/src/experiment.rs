//! The experiment core the operator and `llmbench experiment` share: from a [`BenchmarkExperimentSpec`] to the
//! list of runs (treatments × repeats, each a set of overrides on the run template), and from the runs' figures
//! to the comparison table (mean, standard deviation and coefficient of variation over repeats).
//!
//! Order: repeat-major — every treatment once, then every treatment again — so a slow drift of the stack (a
//! warming cache, a neighbour's load) spreads over all treatments instead of biasing the ones that ran last.
//! llm-d-benchmark runs each treatment once, in file order; with one repeat the orders agree.

use std::collections::{BTreeMap, BTreeSet};

use crate::render::Override;
use crate::v1alpha1::{
    Aggregate, BenchmarkExperimentSpec, CacheState, MAX_REPEATS, MAX_TREATMENTS, TreatmentRow,
};

/// Why an experiment cannot run. Every variant names what is wrong and where.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ExperimentError {
    #[error(
        "the experiment has no treatments: give a non-empty `treatments` list or `factors` with levels"
    )]
    NoTreatments,
    #[error("set exactly one of `treatments` (a list) or `factors` (a matrix), not both")]
    BothForms,
    #[error("repeats must be between 1 and {MAX_REPEATS}, not {0}")]
    Repeats(u32),
    #[error("{count} treatments is more than the {MAX_TREATMENTS} an experiment may have{how}")]
    TooManyTreatments { count: usize, how: String },
    #[error("treatment names must be unique: `{0}` appears twice")]
    DuplicateTreatment(String),
    #[error(
        "treatment name `{0}` must be 1–40 lowercase letters, digits or '-', starting and ending with a letter or digit"
    )]
    TreatmentName(String),
    #[error("factor `{0}` has no levels")]
    NoLevels(String),
    #[error("factor names must be unique: `{0}` appears twice")]
    DuplicateFactor(String),
    #[error("models must be unique: `{0}` appears twice")]
    DuplicateModel(String),
    #[error(
        "a factor or override named `model` and `models` would both fill the table's `model` column; rename the factor"
    )]
    ModelColumnTaken,
    #[error("a model in `models` is empty")]
    EmptyModel,
    #[error("cacheStates must be unique: `{0}` appears twice")]
    DuplicateCacheState(&'static str),
    #[error(
        "a factor or override named `cache` and `cacheStates` would both fill the table's `cache` column; rename the \
         factor"
    )]
    CacheColumnTaken,
    #[error("treatment `{treatment}`: override `{text}` is not key=value")]
    Override { treatment: String, text: String },
    #[error("`{text}`: {problem}")]
    Cooldown { text: String, problem: String },
}

/// `ordering.cooldown`, a Go duration, held to the longest a run may last (30 days, the profiles' limit on a
/// stage): a pause of `99999h` between runs is a typo, not an experiment.
pub fn cooldown(text: &str) -> Result<std::time::Duration, ExperimentError> {
    let refused = |problem: String| ExperimentError::Cooldown {
        text: text.to_owned(),
        problem,
    };
    let pause = crate::go_duration::parse(text.trim())
        .ok_or_else(|| refused("not a duration such as 30s, 2m or 1h30m".to_owned()))?;
    let most = crate::capacity::MAX_POINT_DURATION;
    if pause > most {
        return Err(refused(format!(
            "{} s is above llmbench's limit of {} s (30 days), the longest a run may last; a longer pause is a \
             sequence of experiments",
            pause.as_secs(),
            most.as_secs()
        )));
    }
    Ok(pause)
}

/// A treatment with its overrides resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedTreatment {
    pub name: String,
    /// The overrides that make it, key=value, applied after the template's own.
    pub overrides: Vec<String>,
    /// Factor → level (matrix form), or override key → value (list form), for the table.
    pub levels: BTreeMap<String, String>,
    /// The model the run serves and names (`spec.models`), beating the template's stack.model.
    pub model: Option<String>,
    /// The prefix cache the run meets (`spec.cacheStates`).
    pub cache: Option<CacheState>,
}

impl From<&llmbench_core::experiment::v1::PlanTreatment> for ResolvedTreatment {
    /// A treatment as `experiment.json` records it, for the table code.
    fn from(t: &llmbench_core::experiment::v1::PlanTreatment) -> Self {
        ResolvedTreatment {
            name: t.name.clone(),
            overrides: t.overrides.clone(),
            levels: t.levels.clone(),
            model: t.model.clone(),
            cache: t.cache,
        }
    }
}

/// One run of the plan.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedRun {
    /// Index into the treatments.
    pub treatment: usize,
    /// 1-based.
    pub repeat: u32,
}

impl PlannedRun {
    /// The run's directory (and name suffix) below the experiment's: `<treatment>-r<repeat>`.
    pub fn dir_name(&self, treatments: &[ResolvedTreatment]) -> String {
        let name = treatments
            .get(self.treatment)
            .map_or("treatment", |t| t.name.as_str());
        format!("{name}-r{}", self.repeat)
    }
}

/// The treatments of `spec`, validated: list entries as given, or the full factorial of the factors' levels in
/// order (the first factor varies slowest), named `<factor>-<level>` joined by `-`.
pub fn treatments(
    spec: &BenchmarkExperimentSpec,
) -> Result<Vec<ResolvedTreatment>, ExperimentError> {
    let resolved = match (&spec.treatments, &spec.factors) {
        (Some(_), Some(_)) => return Err(ExperimentError::BothForms),
        (None, None) if !spec.models.is_empty() || !spec.cache_states.is_empty() => Vec::new(),
        (None, None) => return Err(ExperimentError::NoTreatments),
        (Some(list), None) => {
            if list.is_empty() {
                return Err(ExperimentError::NoTreatments);
            }
            if list.len() > MAX_TREATMENTS {
                return Err(ExperimentError::TooManyTreatments {
                    count: list.len(),
                    how: String::new(),
                });
            }
            list.iter()
                .map(|t| {
                    let levels = t
                        .overrides
                        .iter()
                        .map(|o| split_override(&t.name, o))
                        .collect::<Result<BTreeMap<_, _>, _>>()?;
                    Ok(ResolvedTreatment {
                        name: t.name.clone(),
                        overrides: t.overrides.clone(),
                        levels,
                        model: None,
                        cache: None,
                    })
                })
                .collect::<Result<Vec<_>, ExperimentError>>()?
        }
        (None, Some(factors)) => {
            if factors.is_empty() {
                return Err(ExperimentError::NoTreatments);
            }
            let mut seen = BTreeSet::new();
            for f in factors {
                if !seen.insert(f.name.as_str()) {
                    return Err(ExperimentError::DuplicateFactor(f.name.clone()));
                }
                if f.levels.is_empty() {
                    return Err(ExperimentError::NoLevels(f.name.clone()));
                }
            }
            let count = factors
                .iter()
                .try_fold(1usize, |n, f| n.checked_mul(f.levels.len()))
                .unwrap_or(usize::MAX);
            if count > MAX_TREATMENTS {
                let sizes: Vec<String> =
                    factors.iter().map(|f| f.levels.len().to_string()).collect();
                return Err(ExperimentError::TooManyTreatments {
                    count,
                    how: format!(" (the factors' levels multiply: {})", sizes.join(" × ")),
                });
            }
            let mut combos: Vec<Vec<usize>> = vec![Vec::new()];
            for f in factors {
                combos = combos
                    .into_iter()
                    .flat_map(|c| {
                        (0..f.levels.len()).map(move |i| {
                            let mut next = c.clone();
                            next.push(i);
                            next
                        })
                    })
                    .collect();
            }
            combos
                .into_iter()
                .map(|combo| {
                    let mut name_parts = Vec::new();
                    let mut overrides = Vec::new();
                    let mut levels = BTreeMap::new();
                    for (f, &i) in factors.iter().zip(&combo) {
                        let level = &f.levels[i];
                        name_parts.push(format!("{}-{}", f.name, level));
                        overrides.push(format!("{}={}", f.key, level));
                        levels.insert(f.name.clone(), level.clone());
                    }
                    ResolvedTreatment {
                        name: dns_name(&name_parts.join("-")),
                        overrides,
                        levels,
                        model: None,
                        cache: None,
                    }
                })
                .collect()
        }
    };
    let resolved = with_models(resolved, &spec.models)?;
    let resolved = with_cache_states(resolved, &spec.cache_states)?;
    let mut names = BTreeSet::new();
    for t in &resolved {
        if !valid_name(&t.name) {
            return Err(ExperimentError::TreatmentName(t.name.clone()));
        }
        if !names.insert(t.name.as_str()) {
            return Err(ExperimentError::DuplicateTreatment(t.name.clone()));
        }
        for o in &t.overrides {
            Override::parse(o).map_err(|_| ExperimentError::Override {
                treatment: t.name.clone(),
                text: o.clone(),
            })?;
        }
    }
    Ok(resolved)
}

/// `treatments` crossed with `models` (the model varies slowest, so a model's runs are neighbours in the plan),
/// each named `<treatment>-<model>` with the model's last path component — the whole model name when two models
/// share it — and carrying the level `model`. No models: `treatments` as they are; no treatments: one per model.
fn with_models(
    treatments: Vec<ResolvedTreatment>,
    models: &[String],
) -> Result<Vec<ResolvedTreatment>, ExperimentError> {
    if models.is_empty() {
        return Ok(treatments);
    }
    let mut seen = BTreeSet::new();
    for model in models {
        if model.trim().is_empty() {
            return Err(ExperimentError::EmptyModel);
        }
        if !seen.insert(model.as_str()) {
            return Err(ExperimentError::DuplicateModel(model.clone()));
        }
    }
    let base = or_one_unnamed(treatments);
    if base.iter().any(|t| t.levels.contains_key(MODEL_FACTOR)) {
        return Err(ExperimentError::ModelColumnTaken);
    }
    check_crossing(base.len(), models.len(), "model(s)")?;
    let short = |m: &str| m.rsplit('/').next().unwrap_or(m).to_owned();
    let shorts: BTreeSet<String> = models.iter().map(|m| short(m)).collect();
    let label = |m: &str| {
        if shorts.len() == models.len() {
            short(m)
        } else {
            m.to_owned()
        }
    };
    Ok(models
        .iter()
        .flat_map(|model| {
            base.iter().map(move |t| {
                let mut levels = t.levels.clone();
                levels.insert(MODEL_FACTOR.to_owned(), model.clone());
                ResolvedTreatment {
                    name: crossed_name(&t.name, &label(model)),
                    overrides: t.overrides.clone(),
                    levels,
                    model: Some(model.clone()),
                    cache: None,
                }
            })
        })
        .collect())
}

/// `treatments` crossed with the cache states (the state varies fastest, so a treatment's cold and warm runs are
/// neighbours in the plan), each named `<treatment>-<state>` and carrying the level `cache`. No states:
/// `treatments` as they are; no treatments: one per state.
fn with_cache_states(
    treatments: Vec<ResolvedTreatment>,
    states: &[CacheState],
) -> Result<Vec<ResolvedTreatment>, ExperimentError> {
    if states.is_empty() {
        return Ok(treatments);
    }
    let mut seen = BTreeSet::new();
    for state in states {
        if !seen.insert(*state) {
            return Err(ExperimentError::DuplicateCacheState(state.as_str()));
        }
    }
    let base = or_one_unnamed(treatments);
    if base.iter().any(|t| t.levels.contains_key(CACHE_FACTOR)) {
        return Err(ExperimentError::CacheColumnTaken);
    }
    check_crossing(base.len(), states.len(), "cache state(s)")?;
    Ok(base
        .iter()
        .flat_map(|t| {
            states.iter().map(move |state| {
                let mut levels = t.levels.clone();
                levels.insert(CACHE_FACTOR.to_owned(), state.as_str().to_owned());
                ResolvedTreatment {
                    name: crossed_name(&t.name, state.as_str()),
                    cache: Some(*state),
                    levels,
                    ..t.clone()
                }
            })
        })
        .collect())
}

/// The treatments a crossing multiplies: those given, or one unnamed treatment when there are none (an experiment of
/// models or cache states alone).
fn or_one_unnamed(treatments: Vec<ResolvedTreatment>) -> Vec<ResolvedTreatment> {
    if !treatments.is_empty() {
        return treatments;
    }
    vec![ResolvedTreatment {
        name: String::new(),
        overrides: Vec::new(),
        levels: BTreeMap::new(),
        model: None,
        cache: None,
    }]
}

/// Refuses a crossing of `treatments` × `levels` (`what`: "model(s)") past [`MAX_TREATMENTS`].
fn check_crossing(treatments: usize, levels: usize, what: &str) -> Result<(), ExperimentError> {
    let count = treatments.saturating_mul(levels);
    if count > MAX_TREATMENTS {
        return Err(ExperimentError::TooManyTreatments {
            count,
            how: format!(" ({treatments} treatment(s) × {levels} {what})"),
        });
    }
    Ok(())
}

/// `<treatment>-<level>` as a DNS name, or the level alone for the unnamed treatment.
fn crossed_name(treatment: &str, level: &str) -> String {
    if treatment.is_empty() {
        dns_name(level)
    } else {
        dns_name(&format!("{treatment}-{level}"))
    }
}

/// The table column (and level name) of `spec.models`.
pub(crate) const MODEL_FACTOR: &str = "model";
/// The table column (and level name) of `spec.cacheStates`.
pub const CACHE_FACTOR: &str = "cache";

/// Every run of the experiment, repeat-major (see the module docs).
pub fn plan(
    spec: &BenchmarkExperimentSpec,
) -> Result<(Vec<ResolvedTreatment>, Vec<PlannedRun>), ExperimentError> {
    if spec.repeats == 0 || spec.repeats > MAX_REPEATS {
        return Err(ExperimentError::Repeats(spec.repeats));
    }
    let treatments = treatments(spec)?;
    let runs = (1..=spec.repeats)
        .flat_map(|repeat| {
            (0..treatments.len()).map(move |treatment| PlannedRun { treatment, repeat })
        })
        .collect();
    Ok((treatments, runs))
}

/// The overrides of one run: the template's, then the treatment's (a treatment's value wins for the same key,
/// because later overrides are applied later).
pub fn run_overrides(template: &[String], treatment: &ResolvedTreatment) -> Vec<String> {
    template
        .iter()
        .chain(&treatment.overrides)
        .cloned()
        .collect()
}

fn split_override(treatment: &str, text: &str) -> Result<(String, String), ExperimentError> {
    match text.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_owned(), v.trim().to_owned())),
        _ => Err(ExperimentError::Override {
            treatment: treatment.to_owned(),
            text: text.to_owned(),
        }),
    }
}

fn valid_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 40
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes.first().is_some_and(|b| *b != b'-')
        && bytes.last().is_some_and(|b| *b != b'-')
}

/// `text` as a treatment name: lowercase, every other character '-', runs of '-' folded, at most 40 characters
/// (a longer name keeps its head and a hash of the whole, so distinct combinations stay distinct).
pub fn dns_name(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        let c = c.to_ascii_lowercase();
        let c = if c.is_ascii_lowercase() || c.is_ascii_digit() {
            c
        } else {
            '-'
        };
        if !(c == '-' && out.ends_with('-')) {
            out.push(c);
        }
    }
    let trimmed = out.trim_matches('-');
    if trimmed.len() <= 40 {
        return if trimmed.is_empty() {
            "t".to_owned()
        } else {
            trimmed.to_owned()
        };
    }
    // FNV-1a: stable across versions and platforms, unlike std's hasher.
    let hash = llmbench_core::fnv::fnv1a_64(text.as_bytes());
    let head = trimmed[..31].trim_end_matches('-');
    format!("{head}-{:08x}", hash as u32)
}

pub use llmbench_core::experiment::v1::RunFigures;

/// How one run of a treatment ended.
#[derive(Debug, Clone, PartialEq)]
pub enum RunResult {
    /// Still to run, or running.
    Pending,
    Succeeded(RunFigures),
    Failed,
}

impl Aggregate {
    /// Mean, sample standard deviation and coefficient of variation of `values`; None when empty.
    pub fn of(values: &[f64]) -> Option<Aggregate> {
        let n = values.len();
        if n == 0 {
            return None;
        }
        let mean = values.iter().sum::<f64>() / n as f64;
        let stddev = if n > 1 {
            (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
        } else {
            0.0
        };
        let cv = if mean == 0.0 {
            0.0
        } else {
            stddev / mean.abs()
        };
        Some(Aggregate {
            mean,
            stddev,
            cv,
            n: u32::try_from(n).unwrap_or(u32::MAX),
        })
    }
}

/// The comparison table: one row per treatment, from `results[i]` = (treatment index, how that run ended).
pub fn table(
    treatments: &[ResolvedTreatment],
    results: &[(usize, RunResult)],
) -> Vec<TreatmentRow> {
    treatments
        .iter()
        .enumerate()
        .map(|(index, treatment)| {
            let mine: Vec<&RunResult> = results
                .iter()
                .filter(|(t, _)| *t == index)
                .map(|(_, r)| r)
                .collect();
            let figures: Vec<&RunFigures> = mine
                .iter()
                .filter_map(|r| match r {
                    RunResult::Succeeded(f) => Some(f),
                    _ => None,
                })
                .collect();
            let failed_runs = mine
                .iter()
                .filter(|r| matches!(r, RunResult::Failed))
                .count();
            let all = |f: fn(&RunFigures) -> f64| -> Option<Aggregate> {
                Aggregate::of(&figures.iter().map(|r| f(r)).collect::<Vec<_>>())
            };
            let some = |f: fn(&RunFigures) -> Option<f64>| -> Option<Aggregate> {
                Aggregate::of(&figures.iter().filter_map(|r| f(r)).collect::<Vec<_>>())
            };
            let verdicts: Vec<bool> = figures.iter().filter_map(|f| f.slo_met).collect();
            let verdict = if figures.is_empty() {
                (failed_runs > 0).then(|| "failed".to_owned())
            } else if verdicts.is_empty() {
                None
            } else if verdicts.len() == figures.len() && verdicts.iter().all(|v| *v) {
                Some("passed".to_owned())
            } else {
                Some("failed".to_owned())
            };
            TreatmentRow {
                treatment: treatment.name.clone(),
                levels: treatment.levels.clone(),
                runs: u32::try_from(figures.len()).unwrap_or(u32::MAX),
                failed_runs: u32::try_from(failed_runs).unwrap_or(u32::MAX),
                failures: figures.iter().map(|f| f.failures).sum(),
                requests_per_second: all(|f| f.requests_per_second),
                output_tokens_per_second: all(|f| f.output_tokens_per_second),
                ttft_p50_ms: some(|f| f.ttft_p50_ms),
                ttft_p99_ms: some(|f| f.ttft_p99_ms),
                tpot_p50_ms: some(|f| f.tpot_p50_ms),
                tpot_p99_ms: some(|f| f.tpot_p99_ms),
                itl_p50_ms: some(|f| f.itl_p50_ms),
                itl_p99_ms: some(|f| f.itl_p99_ms),
                goodput_percent: some(|f| f.goodput_percent),
                capacity: some(|f| f.capacity),
                prefix_cache_hit_percent: some(|f| f.prefix_cache_hit_percent),
                verdict,
            }
        })
        .collect()
}

/// The best treatment: with capacities, the highest mean capacity; otherwise the highest mean output tokens/s
/// among treatments that passed their SLO (every treatment with a finished run when no run had an SLO).
pub fn best(rows: &[TreatmentRow]) -> Option<String> {
    let any_capacity = rows.iter().any(|r| r.capacity.is_some());
    // Only SLO verdicts count: a row without a finished run is "failed" for its runs, not for an SLO.
    let any_verdict = rows.iter().any(|r| r.runs > 0 && r.verdict.is_some());
    rows.iter()
        .filter(|r| r.runs > 0)
        .filter(|r| any_capacity || !any_verdict || r.verdict.as_deref() == Some("passed"))
        .filter_map(|r| {
            let score = if any_capacity {
                r.capacity.map(|a| a.mean)
            } else {
                r.output_tokens_per_second.map(|a| a.mean)
            };
            score.map(|s| (s, r.treatment.clone()))
        })
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, name)| name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::v1alpha1::{Factor, Treatment};

    fn spec(yaml: &str) -> BenchmarkExperimentSpec {
        serde_saphyr::from_str(yaml).unwrap()
    }

    const TEMPLATE: &str = "template:\n  harness: vllm-benchmark\n  workload: {builtin: sanity_random}\n  stack: {endpoint: http://x:8000, model: m}\n";

    #[test]
    fn models_cross_every_treatment_model_slowest_and_set_the_model_level() {
        let s = spec(&format!(
            "{TEMPLATE}treatments:\n  - {{name: low, overrides: [rate=1]}}\n  - {{name: high, overrides: [rate=9]}}\nmodels: [org/Llama-3.1-8B, other/qwen3]\n"
        ));
        let (treatments, runs) = plan(&s).unwrap();
        let names: Vec<&str> = treatments.iter().map(|t| t.name.as_str()).collect();
        // 2 models × 2 treatments, the model outermost; names use the last path component, lowercased.
        assert_eq!(
            names,
            [
                "low-llama-3-1-8b",
                "high-llama-3-1-8b",
                "low-qwen3",
                "high-qwen3"
            ]
        );
        assert_eq!(treatments[2].model.as_deref(), Some("other/qwen3"));
        assert_eq!(treatments[2].overrides, ["rate=1"]);
        assert_eq!(treatments[2].levels["model"], "other/qwen3");
        assert_eq!(treatments[2].levels["rate"], "1");
        assert_eq!(runs.len(), 4);
    }

    #[test]
    fn models_alone_make_one_treatment_each_and_colliding_short_names_use_the_whole_name() {
        let s = spec(&format!("{TEMPLATE}models: [a/m, b/m]\n"));
        let (treatments, _) = plan(&s).unwrap();
        let names: Vec<&str> = treatments.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["a-m", "b-m"]);
        assert!(treatments.iter().all(|t| t.overrides.is_empty()));
        assert_eq!(treatments[1].model.as_deref(), Some("b/m"));
    }

    #[test]
    fn models_are_refused_when_repeated_or_when_a_factor_already_names_the_model_column() {
        let twice = spec(&format!("{TEMPLATE}models: [m1, m1]\n"));
        assert_eq!(
            treatments(&twice),
            Err(ExperimentError::DuplicateModel("m1".to_owned()))
        );
        let clash = spec(&format!(
            "{TEMPLATE}factors:\n  - {{name: model, key: x, levels: ['1']}}\nmodels: [m1]\n"
        ));
        assert_eq!(treatments(&clash), Err(ExperimentError::ModelColumnTaken));
        let neither = spec(TEMPLATE);
        assert_eq!(treatments(&neither), Err(ExperimentError::NoTreatments));
    }

    #[test]
    fn a_matrix_is_the_full_factorial_first_factor_slowest() {
        let s = spec(&format!(
            "{TEMPLATE}factors:\n  - {{name: qlen, key: data.shared_prefix.question_len, levels: ['100', '300']}}\n  - {{name: olen, key: data.shared_prefix.output_len, levels: ['10', '20', '30']}}\nrepeats: 2\n"
        ));
        let (treatments, runs) = plan(&s).unwrap();
        let names: Vec<&str> = treatments.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "qlen-100-olen-10",
                "qlen-100-olen-20",
                "qlen-100-olen-30",
                "qlen-300-olen-10",
                "qlen-300-olen-20",
                "qlen-300-olen-30"
            ]
        );
        assert_eq!(
            treatments[4].overrides,
            [
                "data.shared_prefix.question_len=300",
                "data.shared_prefix.output_len=20"
            ]
        );
        assert_eq!(treatments[4].levels["olen"], "20");
        // Repeat-major: 6 treatments of repeat 1, then 6 of repeat 2.
        assert_eq!(runs.len(), 12);
        assert_eq!((runs[5].treatment, runs[5].repeat), (5, 1));
        assert_eq!((runs[6].treatment, runs[6].repeat), (0, 2));
        assert_eq!(runs[6].dir_name(&treatments), "qlen-100-olen-10-r2");
    }

    #[test]
    fn bad_experiments_are_refused_with_what_is_wrong() {
        let mut s = spec(&format!("{TEMPLATE}treatments: []\n"));
        assert_eq!(plan(&s).unwrap_err(), ExperimentError::NoTreatments);
        s.treatments = Some(vec![
            Treatment {
                name: "a".into(),
                overrides: vec!["x=1".into()],
            },
            Treatment {
                name: "a".into(),
                overrides: vec![],
            },
        ]);
        assert_eq!(
            plan(&s).unwrap_err(),
            ExperimentError::DuplicateTreatment("a".into())
        );
        s.treatments = Some(vec![Treatment {
            name: "a".into(),
            overrides: vec!["novalue".into()],
        }]);
        assert!(matches!(
            plan(&s).unwrap_err(),
            ExperimentError::Override { .. }
        ));
        s.treatments = Some(vec![Treatment {
            name: "Bad_Name".into(),
            overrides: vec![],
        }]);
        assert!(matches!(
            plan(&s).unwrap_err(),
            ExperimentError::TreatmentName(_)
        ));
        s.treatments = Some(vec![Treatment {
            name: "a".into(),
            overrides: vec![],
        }]);
        s.repeats = 0;
        assert_eq!(plan(&s).unwrap_err(), ExperimentError::Repeats(0));
        s.repeats = 1;
        let level = |n: usize| (0..n).map(|i| i.to_string()).collect::<Vec<_>>();
        s.treatments = None;
        s.factors = Some(vec![
            Factor {
                name: "a".into(),
                key: "a".into(),
                levels: level(11),
            },
            Factor {
                name: "b".into(),
                key: "b".into(),
                levels: level(10),
            },
        ]);
        let err = plan(&s).unwrap_err().to_string();
        assert!(
            err.contains("110 treatments") && err.contains("11 × 10"),
            "{err}"
        );
        s.factors = Some(vec![Factor {
            name: "a".into(),
            key: "a".into(),
            levels: vec![],
        }]);
        assert_eq!(plan(&s).unwrap_err(), ExperimentError::NoLevels("a".into()));
        s.treatments = Some(vec![Treatment {
            name: "a".into(),
            overrides: vec![],
        }]);
        assert_eq!(plan(&s).unwrap_err(), ExperimentError::BothForms);
    }

    #[test]
    fn cache_states_cross_every_treatment_fastest_and_set_the_cache_level() {
        let s = spec(&format!(
            "{TEMPLATE}treatments:\n  - {{name: low, overrides: [rate=1]}}\n  - {{name: high, overrides: [rate=9]}}\ncacheStates: [cold, warm]\n"
        ));
        let (treatments, runs) = plan(&s).unwrap();
        let names: Vec<&str> = treatments.iter().map(|t| t.name.as_str()).collect();
        // A treatment's cold and warm runs are neighbours.
        assert_eq!(names, ["low-cold", "low-warm", "high-cold", "high-warm"]);
        assert_eq!(treatments[1].cache, Some(CacheState::Warm));
        assert_eq!(treatments[1].levels[CACHE_FACTOR], "warm");
        assert_eq!(treatments[1].levels["rate"], "1");
        assert_eq!(treatments[1].overrides, ["rate=1"]);
        assert_eq!(runs.len(), 4);
        // Alone, each state is a treatment.
        let alone = spec(&format!("{TEMPLATE}cacheStates: [warm, cold]\n"));
        let names: Vec<String> = plan(&alone)
            .unwrap()
            .0
            .into_iter()
            .map(|t| t.name)
            .collect();
        assert_eq!(names, ["warm", "cold"]);
        let twice = spec(&format!("{TEMPLATE}cacheStates: [cold, cold]\n"));
        assert_eq!(
            plan(&twice).unwrap_err(),
            ExperimentError::DuplicateCacheState("cold")
        );
        let taken = spec(&format!(
            "{TEMPLATE}factors:\n  - {{name: cache, key: x, levels: [a]}}\ncacheStates: [cold]\n"
        ));
        assert_eq!(plan(&taken).unwrap_err(), ExperimentError::CacheColumnTaken);
    }

    #[test]
    fn long_or_odd_names_become_distinct_dns_names() {
        assert_eq!(dns_name("Rate_0.5"), "rate-0-5");
        let a = dns_name("system_prompt_len-8000-num_groups-40-question_len-100");
        let b = dns_name("system_prompt_len-8000-num_groups-40-question_len-300");
        assert!(a.len() <= 40 && b.len() <= 40 && a != b, "{a} {b}");
        assert!(valid_name(&a) && valid_name(&b));
    }

    #[test]
    fn aggregates_are_mean_sample_stddev_and_cv() {
        // 10, 12, 14: mean 12, sample variance (4 + 0 + 4) / 2 = 4, stddev 2, cv 2/12.
        let a = Aggregate::of(&[10.0, 12.0, 14.0]).unwrap();
        assert_eq!((a.mean, a.stddev, a.n), (12.0, 2.0, 3));
        assert!((a.cv - 1.0 / 6.0).abs() < 1e-12);
        assert_eq!(Aggregate::of(&[5.0]).unwrap().stddev, 0.0);
        assert!(Aggregate::of(&[]).is_none());
    }

    #[test]
    fn the_table_aggregates_repeats_and_picks_the_best_passing_treatment() {
        let t = |name: &str| ResolvedTreatment {
            model: None,
            cache: None,
            name: name.into(),
            overrides: vec![],
            levels: BTreeMap::new(),
        };
        let treatments = [t("slow"), t("fast"), t("broken")];
        let figures = |tps: f64, met: bool| {
            RunResult::Succeeded(RunFigures {
                requests_per_second: tps / 10.0,
                output_tokens_per_second: tps,
                ttft_p99_ms: Some(tps),
                prefix_cache_hit_percent: Some(tps / 100.0),
                slo_met: Some(met),
                failures: 1,
                ..RunFigures::default()
            })
        };
        let results = [
            (0, figures(100.0, true)),
            (1, figures(300.0, true)),
            (2, RunResult::Failed),
            (0, figures(200.0, true)),
            (1, figures(500.0, false)),
            (2, RunResult::Pending),
        ];
        let rows = table(&treatments, &results);
        assert_eq!(rows[0].output_tokens_per_second.unwrap().mean, 150.0);
        assert_eq!(rows[0].prefix_cache_hit_percent.unwrap().mean, 1.5);
        assert_eq!(rows[0].verdict.as_deref(), Some("passed"));
        assert_eq!(rows[0].failures, 2);
        // One of fast's two runs missed its SLO: the treatment fails, so the best passing one is slow.
        assert_eq!(rows[1].verdict.as_deref(), Some("failed"));
        assert_eq!((rows[2].runs, rows[2].failed_runs), (0, 1));
        assert_eq!(rows[2].verdict.as_deref(), Some("failed"));
        assert_eq!(best(&rows).as_deref(), Some("slow"));
    }

    #[test]
    fn without_an_slo_the_best_is_the_fastest_finished_treatment() {
        let t = |name: &str| ResolvedTreatment {
            model: None,
            cache: None,
            name: name.into(),
            overrides: vec![],
            levels: BTreeMap::new(),
        };
        let ok = RunResult::Succeeded(RunFigures {
            output_tokens_per_second: 10.0,
            ..RunFigures::default()
        });
        // The broken treatment's "failed" is about its runs, not an SLO: it must not hide the finished one.
        let rows = table(&[t("ok"), t("broken")], &[(0, ok), (1, RunResult::Failed)]);
        assert_eq!(rows[0].verdict, None);
        assert_eq!(best(&rows).as_deref(), Some("ok"));
    }
}
