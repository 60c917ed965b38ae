//! Every template of the upstream llm-d-benchmark library (`tests/fixtures/llm-d-benchmark/profiles/`) and
//! every file of our own bundled library renders with a standard value set, or fails with the specific error of its
//! documented upstream defect (`tests/fixtures/llm-d-benchmark/SOURCE.md`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use llmbench_core::library::builtin_profiles;
use llmbench_core::render::{RenderError, render_profile, well_known};

fn standard_values() -> BTreeMap<String, String> {
    [
        (well_known::MODEL, "meta-llama/Llama-3.1-8B-Instruct"),
        (well_known::TOKENIZER, "meta-llama/Llama-3.1-8B-Instruct"),
        (well_known::MAX_MODEL_LEN, "16384"),
        (
            well_known::ENDPOINT_URL,
            "http://llm-d-inference-gateway.llm-d.svc:80",
        ),
        (well_known::DATASET_DIR, "/requests/datasets"),
        (well_known::DATASET_FILE, "dataset.json"),
        (well_known::PVC_NAME, "workload-pvc"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

fn upstream_profiles_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/llm-d-benchmark/profiles")
}

fn upstream_templates() -> Vec<(String, String)> {
    let mut files = Vec::new();
    let root = upstream_profiles_dir();
    let harnesses = std::fs::read_dir(&root).unwrap_or_else(|e| panic!("{}: {e}", root.display()));
    for harness in harnesses.flatten() {
        for file in std::fs::read_dir(harness.path())
            .expect("harness dir is readable")
            .flatten()
        {
            let path = file.path();
            let name = format!(
                "{}/{}",
                harness.file_name().to_string_lossy(),
                file.file_name().to_string_lossy()
            );
            if name.ends_with(".yaml.in") || name.ends_with(".yaml") {
                files.push((
                    name,
                    std::fs::read_to_string(&path).expect("template is UTF-8"),
                ));
            }
        }
    }
    files.sort();
    files
}

fn assert_rendered(name: &str, rendered: &str) {
    assert!(
        !rendered.contains("REPLACE_ENV_"),
        "{name}: a placeholder is left in:\n{rendered}"
    );
    let parsed: Result<serde_json::Value, _> = serde_saphyr::from_str(rendered);
    assert!(
        parsed.is_ok(),
        "{name}: rendered YAML does not parse: {parsed:?}"
    );
}

#[test]
fn every_upstream_template_renders_or_fails_with_its_documented_defect() {
    let values = standard_values();
    let templates = upstream_templates();
    assert_eq!(
        templates.len(),
        46,
        "SOURCE.md lists 44 .yaml.in and 2 .yaml files"
    );
    let mut rendered = 0;
    for (name, text) in &templates {
        match (name.as_str(), render_profile(name, text, &values, &[])) {
            // SOURCE.md: shell-style `${CONCURRENCY}` placeholders that no renderer substitutes.
            (
                "inference-perf/guide_predicted-latency-routing_1.yaml",
                Err(RenderError::UnresolvedPlaceholders { placeholders, .. }),
            ) => {
                assert_eq!(placeholders.len(), 1, "{placeholders:?}");
                assert_eq!(placeholders[0].name, "CONCURRENCY");
                assert!(placeholders[0].shell_style);
                assert_eq!(
                    placeholders[0].lines.len(),
                    2,
                    "both uses are listed: {:?}",
                    placeholders[0].lines
                );
            }
            (_, Ok(out)) => {
                assert_rendered(name, &out);
                rendered += 1;
            }
            (_, Err(e)) => panic!("{name}: unexpected render error: {e}"),
        }
    }
    assert_eq!(rendered, 45);
}

#[test]
fn the_predicted_latency_template_renders_once_its_shell_placeholder_is_given() {
    let (name, text) = upstream_templates()
        .into_iter()
        .find(|(n, _)| n.ends_with("guide_predicted-latency-routing_1.yaml"))
        .expect("upstream file is present");
    let mut values = standard_values();
    values.insert("CONCURRENCY".to_owned(), "8".to_owned());
    let out = render_profile(&name, &text, &values, &[]).expect("renders");
    assert_rendered(&name, &out);
}

#[test]
fn every_bundled_profile_renders_with_the_standard_values() {
    let values = standard_values();
    let profiles = builtin_profiles();
    for harness in [
        "inference-perf",
        "guidellm",
        "vllm-benchmark",
        "inferencemax",
        "nop",
        "fmperf",
    ] {
        assert!(
            profiles.iter().any(|p| p.harness == harness),
            "the library has {harness} profiles"
        );
    }
    for profile in profiles {
        let out = render_profile(&profile.file_name(), profile.template, &values, &[])
            .unwrap_or_else(|e| panic!("{}: {e}", profile.file_name()));
        assert_rendered(&profile.file_name(), &out);
    }
}

#[test]
fn the_bundled_library_has_every_upstream_profile_of_the_supported_harnesses() {
    for (name, _) in upstream_templates() {
        let (harness, file) = name.split_once('/').expect("harness/file");
        if ![
            "inference-perf",
            "guidellm",
            "vllm-benchmark",
            "inferencemax",
            "nop",
        ]
        .contains(&harness)
        {
            continue;
        }
        let stem = file.trim_end_matches(".in").trim_end_matches(".yaml");
        assert!(
            llmbench_core::library::builtin_profile(harness, stem).is_ok(),
            "the bundled library lacks {harness}/{stem}"
        );
    }
}

#[test]
fn unknown_builtin_names_suggest_the_nearest_profile() {
    let err = llmbench_core::library::builtin_profile("inference-perf", "sanity_randon")
        .expect_err("unknown");
    assert!(
        err.to_string().contains("did you mean `sanity_random`?"),
        "{err}"
    );
    let err = llmbench_core::library::builtin_profile("guidelm", "x").expect_err("unknown harness");
    assert!(
        err.to_string().contains("did you mean `guidellm`?"),
        "{err}"
    );
}
