//! Writes the CRD YAML of every llmbench resource into a directory (`make crds` → `crds/`).

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let dir = PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| "crds".to_owned()));
    for (file, yaml) in llmbench_api::crd_manifests() {
        let yaml = match yaml {
            Ok(yaml) => yaml,
            Err(e) => {
                eprintln!("crdgen: cannot serialize {file}: {e}");
                return ExitCode::FAILURE;
            }
        };
        let path = dir.join(file);
        if let Err(e) = std::fs::write(&path, yaml) {
            eprintln!("crdgen: cannot write {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
        println!("wrote {}", path.display());
    }
    ExitCode::SUCCESS
}
