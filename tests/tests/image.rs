//! The offline image (`image/build.sh`, `make image`) and the Dockerfile describe one image: same user, entrypoint,
//! command, working directory, environment and binary paths. This reads the Dockerfile's final stage, adds what its
//! base image brings, and compares with the OCI config and layer `image/build.sh` wrote to target/image/oci.
//! `make test` builds that layout first (`make node-images`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// What the Dockerfile's final stage declares.
#[derive(Debug, Default)]
struct FinalStage {
    base: String,
    user: Option<String>,
    entrypoint: Option<Vec<String>>,
    cmd: Option<Vec<String>>,
    /// Destination directory → file names copied there.
    copies: BTreeMap<String, Vec<String>>,
}

fn exec_form(text: &str) -> Vec<String> {
    serde_json::from_str(text.trim())
        .unwrap_or_else(|e| panic!("exec-form JSON array expected, got {text}: {e}"))
}

fn final_stage(dockerfile: &str) -> FinalStage {
    let mut stage = FinalStage::default();
    for line in dockerfile.lines().map(str::trim) {
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let (instruction, rest) = line.split_once(' ').unwrap_or((line, ""));
        match instruction.to_ascii_uppercase().as_str() {
            "FROM" => {
                stage = FinalStage {
                    base: rest
                        .split_whitespace()
                        .next()
                        .unwrap_or_default()
                        .to_owned(),
                    ..FinalStage::default()
                }
            }
            "USER" => stage.user = Some(rest.trim().to_owned()),
            "ENTRYPOINT" => stage.entrypoint = Some(exec_form(rest)),
            "CMD" => stage.cmd = Some(exec_form(rest)),
            "COPY" => {
                let parts: Vec<&str> = rest
                    .split_whitespace()
                    .filter(|p| !p.starts_with("--"))
                    .collect();
                if let Some((dest, sources)) = parts.split_last() {
                    let names = sources
                        .iter()
                        .filter_map(|s| s.rsplit('/').next())
                        .map(str::to_owned)
                        .collect();
                    stage
                        .copies
                        .insert(dest.trim_end_matches('/').to_owned(), names);
                }
            }
            _ => {}
        }
    }
    stage
}

/// The config of the base images the Dockerfile may use (from their published image configs), so the comparison
/// covers what the final image inherits. A new base must be added here, which is the point.
fn base_config(base: &str) -> (Vec<String>, &'static str) {
    match base {
        "gcr.io/distroless/cc-debian12:debug-nonroot" => (
            vec![
                "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/busybox"
                    .to_owned(),
                "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt".to_owned(),
            ],
            "/home/nonroot",
        ),
        other => panic!(
            "the Dockerfile's base {other} is unknown to this test: add its Env and WorkingDir"
        ),
    }
}

fn blob(layout: &Path, digest: &str) -> PathBuf {
    let (algorithm, hex) = digest.split_once(':').expect("a digest");
    layout.join("blobs").join(algorithm).join(hex)
}

fn json_file(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run `make node-images` or `make image`)",
            path.display()
        )
    });
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn strings(value: Option<&Value>) -> Vec<String> {
    value
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn the_offline_image_is_the_image_the_dockerfile_describes() {
    if llmbench_e2e::e2e_disabled("the_offline_image_is_the_image_the_dockerfile_describes") {
        return;
    }
    let root = repo_root();
    let dockerfile = std::fs::read_to_string(root.join("Dockerfile")).expect("the Dockerfile");
    let stage = final_stage(&dockerfile);
    let (base_env, base_workdir) = base_config(&stage.base);

    let layout = root.join("target/image/oci");
    let index = json_file(&layout.join("index.json"));
    let manifest_digest = index
        .pointer("/manifests/0/digest")
        .and_then(Value::as_str)
        .expect("index.json names a manifest");
    let manifest = json_file(&blob(&layout, manifest_digest));
    let config_digest = manifest
        .pointer("/config/digest")
        .and_then(Value::as_str)
        .expect("the manifest names a config");
    let config = json_file(&blob(&layout, config_digest));
    let c = config.get("config").expect("an image config");

    assert_eq!(
        c.get("User").and_then(Value::as_str),
        stage.user.as_deref(),
        "USER"
    );
    assert_eq!(
        strings(c.get("Entrypoint")),
        stage.entrypoint.clone().unwrap_or_default(),
        "ENTRYPOINT"
    );
    assert_eq!(Some(strings(c.get("Cmd"))), stage.cmd, "CMD");
    assert_eq!(
        c.get("WorkingDir").and_then(Value::as_str),
        Some(base_workdir),
        "WorkingDir"
    );
    let mut env = strings(c.get("Env"));
    env.sort();
    let mut want_env = base_env;
    want_env.sort();
    assert_eq!(env, want_env, "Env");

    // Every file the Dockerfile copies is in the layer at the same path, with busybox's tar and sh for exec.
    let layers = manifest
        .get("layers")
        .and_then(Value::as_array)
        .expect("layers");
    let mut listing = String::new();
    for layer in layers {
        let digest = layer.get("digest").and_then(Value::as_str).expect("digest");
        let out = Command::new("tar")
            .arg("tzf")
            .arg(blob(&layout, digest))
            .output()
            .expect("tar runs");
        assert!(out.status.success(), "listing layer {digest}");
        listing.push_str(&String::from_utf8_lossy(&out.stdout));
    }
    let paths: Vec<&str> = listing
        .lines()
        .map(|l| l.trim_start_matches("./").trim_start_matches('/'))
        .collect();
    assert!(
        !stage.copies.is_empty(),
        "the final stage copies the binaries"
    );
    for (dest, names) in &stage.copies {
        for name in names {
            let want = format!("{}/{name}", dest.trim_start_matches('/'));
            assert!(paths.contains(&want.as_str()), "{want} is not in the image");
        }
    }
    for tool in [
        "busybox/tar",
        "busybox/sh",
        "busybox/sleep",
        "etc/ssl/certs/ca-certificates.crt",
    ] {
        assert!(paths.contains(&tool), "{tool} is not in the image");
    }
}

#[test]
fn the_final_stage_parser_reads_exec_forms_and_copies() {
    let stage = final_stage(
        "FROM a AS b\nUSER 1\nFROM base:tag\nCOPY --from=b /out/x /out/y /usr/bin/\nUSER 2:3\nENTRYPOINT []\nCMD [\"x\", \"run\"]\n",
    );
    assert_eq!(stage.base, "base:tag");
    assert_eq!(stage.user.as_deref(), Some("2:3"));
    assert_eq!(stage.entrypoint, Some(Vec::new()));
    assert_eq!(stage.cmd, Some(vec!["x".to_owned(), "run".to_owned()]));
    assert_eq!(
        stage.copies["/usr/bin"],
        vec!["x".to_owned(), "y".to_owned()]
    );
}
