//! The launcher's command line as the operator starts it: one typed builder whose [`argv`](RunCommand::argv) the
//! operator puts into a pod, and which a test in the launcher crate parses with the launcher's own clap `Cli` — so
//! a flag renamed on either side fails a test instead of a pod.

use std::time::Duration;

use crate::capacity::CapacitySearchSpec;
use crate::harness::Harness;

/// How `llmbench run` (and `report` for a killed run) ended, by its exit code: the launcher exits with it, the
/// operator reads it from the launcher container's termination state and names the run's failure by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunExit {
    /// 3: the run worked but no request succeeded: the stack did not.
    NoRequestSucceeded,
    /// 4: SIGTERM or SIGINT stopped the run; what it measured is recorded and reported, marked interrupted.
    Interrupted,
    /// 5: the stack the launcher served (`--serve`) failed mid-run; what was measured is reported, marked stopped.
    StackFailed,
    /// 6: the pre-flight found the server unusable as the run would use it; nothing was timed or written.
    PreflightFailed,
    /// 7: the server stopped answering mid-run (`--max-connect-failures`); what was measured is reported.
    ServerStoppedAnswering,
    /// 8: `llmbench report` rebuilt a run that was killed; the requests in flight at the kill count as lost.
    Killed,
    /// 9: AIPerf's `--failed-request-threshold` stopped the run; what was measured is reported.
    FailedRequestThreshold,
}

impl RunExit {
    /// The process exit code.
    pub const fn code(self) -> u8 {
        match self {
            RunExit::NoRequestSucceeded => 3,
            RunExit::Interrupted => 4,
            RunExit::StackFailed => 5,
            RunExit::PreflightFailed => 6,
            RunExit::ServerStoppedAnswering => 7,
            RunExit::Killed => 8,
            RunExit::FailedRequestThreshold => 9,
        }
    }

    /// The exit a code stands for; `None` for 0, 1 (an error before or outside the run) and anything else.
    pub fn from_code(code: i32) -> Option<RunExit> {
        [
            RunExit::NoRequestSucceeded,
            RunExit::Interrupted,
            RunExit::StackFailed,
            RunExit::PreflightFailed,
            RunExit::ServerStoppedAnswering,
            RunExit::Killed,
            RunExit::FailedRequestThreshold,
        ]
        .into_iter()
        .find(|exit| i32::from(exit.code()) == code)
    }
}

/// How long requests in flight may still finish after SIGTERM or SIGINT before they are recorded as cancelled
/// (`llmbench run --interrupt-grace`; the launcher's default). A launcher pod's `terminationGracePeriodSeconds`
/// leaves room for this and for writing the reports.
pub const DEFAULT_INTERRUPT_GRACE: Duration = Duration::from_secs(5);

/// Why a command line could not be rendered.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error("the capacity search cannot be written as JSON: {0}")]
    CapacitySearch(serde_json::Error),
}

/// `llmbench run`, with the flags the operator sets.
#[derive(Debug, Clone, PartialEq)]
pub struct RunCommand {
    pub harness: Harness,
    /// `--profile`: a bundled profile's name or a file.
    pub profile: String,
    pub model: String,
    /// `--output DIR`: results go to DIR/RUN_ID.
    pub output: String,
    pub run_id: String,
    /// `--summary-file`: where the compact summary goes (a pod's termination log).
    pub summary_file: String,
    /// `--shard INDEX/COUNT`.
    pub shard: (u32, u32),
    pub interrupt_grace: Duration,
    /// `--metrics-listen ADDR` (may hold a `$(VAR)` the kubelet expands).
    pub metrics_listen: Option<String>,
    /// `--wait-for-release ADDR --release-timeout DURATION`: a shard of a sharded run.
    pub release: Option<Release>,
    pub endpoint: Option<String>,
    pub tokenizer: Option<String>,
    /// `--metrics-endpoint URL`, each.
    pub metrics_endpoints: Vec<String>,
    /// `--stack-info FILE`.
    pub stack_info: Option<String>,
    /// `--vllm-profiler`.
    pub vllm_profiler: bool,
    pub profiler_start: Option<String>,
    pub profiler_stop: Option<String>,
    pub reset_prefix_cache: bool,
    pub warm_prefix_cache: bool,
    /// `--capacity-search JSON`: the launcher reads the same type.
    pub capacity_search: Option<CapacitySearchSpec>,
    /// `--results-to-log BYTES`: an emptyDir run's results, capped, into the log ([`crate::results_log`]).
    pub results_to_log: Option<u64>,
    /// `--preflight-only`: check the server as this run would, and stop (see [`RunCommand::preflight_only`]).
    pub preflight_only: bool,
}

/// Where a shard waits for the operator's release, and for how long.
#[derive(Debug, Clone, PartialEq)]
pub struct Release {
    /// `ADDR` (may hold a `$(VAR)` the kubelet expands).
    pub address: String,
    pub timeout: Duration,
}

impl RunCommand {
    /// A run with only the flags every run has: shard 0/1, the default interrupt grace, nothing optional.
    pub fn new(
        harness: Harness,
        profile: impl Into<String>,
        model: impl Into<String>,
        output: impl Into<String>,
        run_id: impl Into<String>,
        summary_file: impl Into<String>,
    ) -> RunCommand {
        RunCommand {
            harness,
            profile: profile.into(),
            model: model.into(),
            output: output.into(),
            run_id: run_id.into(),
            summary_file: summary_file.into(),
            shard: (0, 1),
            interrupt_grace: DEFAULT_INTERRUPT_GRACE,
            metrics_listen: None,
            release: None,
            endpoint: None,
            tokenizer: None,
            metrics_endpoints: Vec::new(),
            stack_info: None,
            vllm_profiler: false,
            profiler_start: None,
            profiler_stop: None,
            reset_prefix_cache: false,
            warm_prefix_cache: false,
            capacity_search: None,
            results_to_log: None,
            preflight_only: false,
        }
    }

    /// The pre-flight of this run alone (`--preflight-only`): the same harness, profile, model, endpoint and
    /// tokenizer, so the server is checked exactly as the run will use it, less every flag of a run that sends
    /// load (its shard, release, live metrics, scrapes, stack record, hooks, capacity search, results in the log),
    /// which the launcher refuses beside `--preflight-only` or which have nothing to act on.
    pub fn preflight_only(&self) -> RunCommand {
        RunCommand {
            endpoint: self.endpoint.clone(),
            tokenizer: self.tokenizer.clone(),
            interrupt_grace: self.interrupt_grace,
            preflight_only: true,
            ..RunCommand::new(
                self.harness,
                self.profile.clone(),
                self.model.clone(),
                self.output.clone(),
                self.run_id.clone(),
                self.summary_file.clone(),
            )
        }
    }

    /// The command line, `llmbench run …`.
    pub fn argv(&self) -> Result<Vec<String>, CommandError> {
        let mut argv = Argv(["llmbench", "run"].map(str::to_owned).to_vec());
        argv.flag("harness", self.harness.to_string());
        argv.flag("profile", &self.profile);
        argv.flag("model", &self.model);
        argv.flag("output", &self.output);
        argv.flag("run-id", &self.run_id);
        argv.flag("summary-file", &self.summary_file);
        argv.flag("shard", format!("{}/{}", self.shard.0, self.shard.1));
        argv.flag("interrupt-grace", duration_arg(self.interrupt_grace));
        argv.optional("metrics-listen", &self.metrics_listen);
        if let Some(release) = &self.release {
            argv.flag("wait-for-release", &release.address);
            argv.flag("release-timeout", duration_arg(release.timeout));
        }
        argv.optional("endpoint", &self.endpoint);
        argv.optional("tokenizer", &self.tokenizer);
        for url in &self.metrics_endpoints {
            argv.flag("metrics-endpoint", url);
        }
        argv.optional("stack-info", &self.stack_info);
        argv.switch("vllm-profiler", self.vllm_profiler);
        argv.optional("profiler-start", &self.profiler_start);
        argv.optional("profiler-stop", &self.profiler_stop);
        argv.switch("reset-prefix-cache", self.reset_prefix_cache);
        argv.switch("warm-prefix-cache", self.warm_prefix_cache);
        if let Some(search) = &self.capacity_search {
            let json = serde_json::to_string(search).map_err(CommandError::CapacitySearch)?;
            argv.flag("capacity-search", json);
        }
        if let Some(cap) = self.results_to_log {
            argv.flag("results-to-log", cap.to_string());
        }
        argv.switch("preflight-only", self.preflight_only);
        Ok(argv.0)
    }
}

/// An argv being built.
struct Argv(Vec<String>);

impl Argv {
    /// `--name value`.
    fn flag(&mut self, name: &str, value: impl Into<String>) {
        self.0.extend([format!("--{name}"), value.into()]);
    }

    /// `--name value` when there is a value.
    fn optional(&mut self, name: &str, value: &Option<String>) {
        if let Some(value) = value {
            self.flag(name, value);
        }
    }

    /// `--name` when `on`.
    fn switch(&mut self, name: &str, on: bool) {
        if on {
            self.0.push(format!("--{name}"));
        }
    }
}

/// `llmbench report DIR --summary-file FILE`: a collector re-analysing an earlier run's directory.
pub fn report_argv(dir: &str, summary_file: &str) -> Vec<String> {
    ["llmbench", "report", dir, "--summary-file", summary_file]
        .map(str::to_owned)
        .to_vec()
}

/// `llmbench experiment report DIR --plan FILE`: an experiment's comparison from its runs' directories.
pub fn experiment_report_argv(dir: &str, plan: &str) -> Vec<String> {
    ["llmbench", "experiment", "report", dir, "--plan", plan]
        .map(str::to_owned)
        .to_vec()
}

/// A duration as the launcher's flags take it: whole seconds as `5s`, else milliseconds or nanoseconds.
fn duration_arg(duration: Duration) -> String {
    match (duration.subsec_nanos(), duration.subsec_millis()) {
        (0, _) => format!("{}s", duration.as_secs()),
        (nanos, millis) if nanos == millis * 1_000_000 => format!("{}ms", duration.as_millis()),
        _ => format!("{}ns", duration.as_nanos()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_run_exit_is_its_own_code_and_reads_back() {
        for code in 0..=255 {
            if let Some(exit) = RunExit::from_code(code) {
                assert_eq!(i32::from(exit.code()), code);
            }
        }
        assert_eq!(RunExit::from_code(6), Some(RunExit::PreflightFailed));
        assert_eq!(RunExit::from_code(9), Some(RunExit::FailedRequestThreshold));
        assert_eq!(RunExit::from_code(0), None);
        assert_eq!(
            RunExit::from_code(1),
            None,
            "an error before or outside the run"
        );
    }

    #[test]
    fn a_plain_run_has_the_flags_every_run_has_in_order() {
        let run = RunCommand::new(
            Harness::Nop,
            "/p/profile.yaml",
            "m",
            "/requests",
            "bench-1",
            "/dev/termination-log",
        );
        assert_eq!(
            run.argv().expect("renders").join(" "),
            "llmbench run --harness nop --profile /p/profile.yaml --model m --output /requests --run-id bench-1 \
             --summary-file /dev/termination-log --shard 0/1 --interrupt-grace 5s"
        );
    }

    #[test]
    fn durations_are_written_in_the_largest_exact_unit() {
        assert_eq!(duration_arg(Duration::from_secs(5)), "5s");
        assert_eq!(duration_arg(Duration::from_secs(960)), "960s");
        assert_eq!(duration_arg(Duration::from_millis(1500)), "1500ms");
        assert_eq!(
            duration_arg(Duration::from_nanos(1_000_000_001)),
            "1000000001ns"
        );
    }

    #[test]
    fn the_collectors_command_lines() {
        assert_eq!(
            report_argv("/requests/bench-1", "/dev/termination-log").join(" "),
            "llmbench report /requests/bench-1 --summary-file /dev/termination-log"
        );
        assert_eq!(
            experiment_report_argv("/requests/x", "/etc/llmbench/experiment.json").join(" "),
            "llmbench experiment report /requests/x --plan /etc/llmbench/experiment.json"
        );
    }
}
