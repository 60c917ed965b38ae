//! The bundled profile library: our own `workload/profiles/<harness>/<name>.yaml.in` files, compiled in.

use crate::render::nearest;

/// One template of the bundled library.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuiltinProfile {
    /// The harness directory, e.g. `inference-perf`.
    pub harness: &'static str,
    /// The profile name, the file name without `.yaml.in`, e.g. `sanity_random`.
    pub name: &'static str,
    /// The `yaml.in` template text.
    pub template: &'static str,
}

impl BuiltinProfile {
    /// The template's file name, as errors name it: `inference-perf/sanity_random.yaml.in`.
    pub fn file_name(&self) -> String {
        format!("{}/{}.yaml.in", self.harness, self.name)
    }
}

include!(concat!(env!("OUT_DIR"), "/profiles.rs"));

/// Looking a profile up in the library failed.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum LibraryError {
    #[error("no bundled profiles for harness `{harness}`; harnesses with profiles: {}{}", .known.join(", "), hint(.suggestion))]
    UnknownHarness {
        harness: String,
        known: Vec<&'static str>,
        suggestion: Option<&'static str>,
    },
    #[error("no bundled profile `{name}` for harness `{harness}`; available: {}{}", .available.join(", "), hint(.suggestion))]
    UnknownProfile {
        harness: String,
        name: String,
        available: Vec<&'static str>,
        suggestion: Option<&'static str>,
    },
}

fn hint(suggestion: &Option<&'static str>) -> String {
    suggestion
        .map(|s| format!(" — did you mean `{s}`?"))
        .unwrap_or_default()
}

/// Every bundled profile, sorted by harness and name.
pub fn builtin_profiles() -> &'static [BuiltinProfile] {
    PROFILES
}

/// The harnesses that have bundled profiles.
pub fn harnesses() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = PROFILES.iter().map(|p| p.harness).collect();
    names.dedup();
    names
}

/// Finds `name` (with or without `.yaml.in` / `.yaml`) among the profiles of `harness`.
pub fn builtin_profile(harness: &str, name: &str) -> Result<&'static BuiltinProfile, LibraryError> {
    let name = name.strip_suffix(".in").unwrap_or(name);
    let name = name.strip_suffix(".yaml").unwrap_or(name);
    let of_harness: Vec<&'static BuiltinProfile> =
        PROFILES.iter().filter(|p| p.harness == harness).collect();
    if of_harness.is_empty() {
        let known = harnesses();
        return Err(LibraryError::UnknownHarness {
            harness: harness.to_owned(),
            suggestion: nearest(harness, known.iter().copied()),
            known,
        });
    }
    if let Some(found) = of_harness.iter().find(|p| p.name == name) {
        return Ok(found);
    }
    let available: Vec<&'static str> = of_harness.iter().map(|p| p.name).collect();
    Err(LibraryError::UnknownProfile {
        harness: harness.to_owned(),
        name: name.to_owned(),
        suggestion: nearest(name, available.iter().copied()),
        available,
    })
}
