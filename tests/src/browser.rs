//! A real headless browser for the tests that look at pages: Debian's Chromium, found at `LLMBENCH_CHROMIUM`, else
//! `/usr/bin/chromium`, else `chromium` on the PATH (`tests/tools/node-packages.sh` installs it). Without it a
//! test says so loudly and passes, unless `LLMBENCH_REQUIRE_BROWSER` is set (CI sets it), when it fails.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The Chromium binary, or None (and a loud note) when it is absent and not required.
pub fn chromium() -> Option<PathBuf> {
    let found = std::env::var_os("LLMBENCH_CHROMIUM")
        .map(PathBuf::from)
        .or_else(|| Some(PathBuf::from("/usr/bin/chromium")).filter(|p| p.is_file()))
        .or_else(|| {
            std::env::var_os("PATH").and_then(|paths| {
                std::env::split_paths(&paths)
                    .map(|dir| dir.join("chromium"))
                    .find(|p| p.is_file())
            })
        });
    if found.is_none() {
        let required = std::env::var_os("LLMBENCH_REQUIRE_BROWSER").is_some();
        assert!(
            !required,
            "LLMBENCH_REQUIRE_BROWSER is set and no Chromium was found: install Debian's `chromium` \
             (tests/tools/node-packages.sh) or set LLMBENCH_CHROMIUM"
        );
        eprintln!(
            "\n*** SKIPPING a browser check: no Chromium (LLMBENCH_CHROMIUM, /usr/bin/chromium, PATH). \
             Install Debian's `chromium` (tests/tools/node-packages.sh); set LLMBENCH_REQUIRE_BROWSER=1 to make \
             this a failure. ***\n"
        );
    }
    found
}

/// A child process killed on drop.
pub struct Killed(pub Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A finished command's exit code and output, for an assertion's message.
pub fn explain(output: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// Chromium headless on `url` with `extra` flags, bounded (2 min: a loaded machine, not a timing): its output.
pub fn browse(chromium: &Path, profile: &Path, extra: &[String], url: &str) -> Output {
    let child = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--hide-scrollbars",
            "--window-size=1400,900",
            // Virtual time runs until the page's fetches have answered, so the DOM is read after them.
            "--virtual-time-budget=30000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", chromium.display()));
    let mut child = Killed(child);
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if child.0.try_wait().expect("wait").is_some() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "chromium did not finish on {url}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();
    if let Some(mut out) = child.0.stdout.take() {
        let _ = out.read_to_end(&mut stdout);
    }
    if let Some(mut err) = child.0.stderr.take() {
        let _ = err.read_to_end(&mut stderr);
    }
    Output {
        status: child.0.wait().expect("status"),
        stdout,
        stderr,
    }
}

/// The page's DOM after its JavaScript ran, and a screenshot of it at `png`.
pub fn render(chromium: &Path, profile: &Path, url: &str, png: &Path) -> String {
    let dom = browse(chromium, profile, &["--dump-dom".to_owned()], url);
    assert!(dom.status.success(), "{}", explain(&dom));
    let shot = browse(
        chromium,
        profile,
        &[format!("--screenshot={}", png.display())],
        url,
    );
    assert!(shot.status.success(), "{}", explain(&shot));
    let bytes = std::fs::read(png).unwrap_or_else(|e| panic!("{}: {e}", png.display()));
    assert!(bytes.starts_with(b"\x89PNG"), "{}", png.display());
    String::from_utf8_lossy(&dom.stdout).into_owned()
}
