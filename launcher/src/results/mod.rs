//! `llmbench results`: a BenchmarkRun's results directory brought from its PVC to this machine through the
//! Kubernetes API with the user's own kubeconfig, as `kubectl cp` does, and a table of a namespace's runs.
//!
//! `fetch` reads the run to learn its claim and directory (`status.resultsPath`, else the spec as the operator
//! resolves it), starts a short-lived reader pod that mounts the claim read-only and sleeps, runs `du -sk` and then
//! `tar cf - -C /requests <dir>` in it through the exec subresource, and unpacks the stream into `DIR/<run>.partial/`,
//! renamed to `DIR/<run>/` once complete. The reader pod is deleted when done, on error and on Ctrl-C; its
//! `activeDeadlineSeconds` ends it should this process die first.
//!
//! The pure parts (where the results are, the reader pod, safe unpacking, progress lines, the local directory) are
//! unit-tested; `cluster` is the thin shell that talks to the API server. Everything that links a Kubernetes client
//! sits behind the `cluster` cargo feature (on by default); without it `llmbench results` says so.

// Pure Rust, so built and unit-tested without `cluster` too; only `cluster` calls them.
#[cfg_attr(not(feature = "cluster"), allow(dead_code))]
pub(crate) mod local;
/// `llmbench run --results-to-log`'s archive, and its way back for `results fetch`.
pub mod pack;
#[cfg_attr(not(feature = "cluster"), allow(dead_code))]
pub(crate) mod progress;
#[cfg_attr(not(feature = "cluster"), allow(dead_code))]
pub(crate) mod unpack;

#[cfg(feature = "cluster")]
mod cluster;
#[cfg(all(test, feature = "cluster"))]
mod fake_cluster;
#[cfg(feature = "cluster")]
pub(crate) mod source;

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};

/// The exit code of a fetch refused because the run has not finished (retry later, or pass --allow-partial).
pub(crate) const EXIT_RUN_NOT_FINISHED: u8 = 3;
/// The exit code of a fetch stopped by Ctrl-C or SIGTERM: the reader pod is deleted and nothing is left locally.
pub(crate) const EXIT_INTERRUPTED: u8 = 4;

/// `llmbench results …`.
#[derive(Args, Debug)]
pub struct ResultsCommand {
    #[command(subcommand)]
    pub action: ResultsAction,
}

#[derive(Subcommand, Debug)]
pub enum ResultsAction {
    /// Copy a BenchmarkRun's whole results directory from its PVC to DIR/RUN/, as `kubectl cp` does: a short-lived
    /// reader pod (the launcher image, non-root, the claim mounted read-only) streams `tar` through the pods/exec
    /// API, with your kubeconfig. The copy is written to DIR/RUN.partial/ and renamed to DIR/RUN/ only once
    /// complete, so an interrupted fetch leaves no half directory and a re-run starts afresh (nothing is resumed);
    /// an existing DIR/RUN/ is replaced only with --force. Files keep their modification times. Progress goes to
    /// stderr; the last line on stdout is the absolute path of DIR/RUN/. Needs: get benchmarkruns.llmbench.dev,
    /// get persistentvolumeclaims, get and create and delete pods, create pods/exec. Exit codes: 0 fetched, 1 an
    /// error, 2 a usage error, 3 the run has not finished (wait, or --allow-partial), 4 interrupted.
    Fetch(FetchArgs),
    /// List the BenchmarkRuns of a namespace (or all, -A): phase, storage (PVC or emptyDir), results directory,
    /// creation time, and requests and throughput from status.summary.
    List(ListArgs),
}

/// Which cluster, as kubectl chooses it: $KUBECONFIG (or ~/.kube/config, or the in-cluster account) and its
/// current context, unless told otherwise.
#[derive(Args, Debug, Clone, Default)]
pub struct KubeArgs {
    /// The kubeconfig context to use instead of the current one.
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// The kubeconfig file to use instead of $KUBECONFIG or ~/.kube/config.
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
}

#[derive(Args, Debug, Clone)]
pub struct FetchArgs {
    /// The BenchmarkRun's name.
    #[arg(value_name = "RUN")]
    pub run: String,
    /// The run's namespace; default: the kubeconfig context's namespace, else `default`.
    #[arg(long, short = 'n', value_name = "NS")]
    pub namespace: Option<String>,
    /// The directory the run's directory DIR/RUN/ is written into (created if absent).
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub to: PathBuf,
    /// Replace an existing DIR/RUN/ once the new copy is complete.
    #[arg(long)]
    pub force: bool,
    /// Fetch a run that is still Pending, Running or Collecting: whatever its launchers have written so far.
    /// Without it such a run is refused (exit code 3).
    #[arg(long, conflicts_with = "claim")]
    pub allow_partial: bool,
    /// Fetch straight from the PVC CLAIM, without reading the BenchmarkRun: for a run that is gone (deleted by its
    /// ttlSecondsAfterFinished, or by hand), whose results stay on its claim. The run's directory there is --dir,
    /// else the one directory named `RUN-<first 8 of its uid>` at the claim's root.
    #[arg(long, value_name = "CLAIM")]
    pub claim: Option<String>,
    /// With --claim: the run's results directory on the claim, relative to its root (its `resultsDir`, or
    /// `<run>-<first 8 of its uid>`, as its Expired event and the dashboard name it).
    #[arg(long, value_name = "DIR", requires = "claim")]
    pub dir: Option<String>,
    /// The reader pod's image; it needs `sleep`, `du` and `tar` on its PATH (the llmbench image has busybox's).
    /// Default: the run's spec.launcher.image, else its launcher pods' image, else the image of this llmbench's
    /// version, as the operator defaults it.
    #[arg(long, value_name = "IMAGE", env = "LLMBENCH_RESULTS_IMAGE")]
    pub image: Option<String>,
    /// How long the reader pod may take to start (scheduling, image pull) before the fetch gives up.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "5m", value_name = "DURATION")]
    pub pod_timeout: Duration,
    /// The reader pod's lifetime (activeDeadlineSeconds and its sleep): it ends by itself after this even if
    /// this command is killed before deleting it. The copy must finish within it.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "1h", value_name = "DURATION")]
    pub deadline: Duration,
    #[command(flatten)]
    pub kube: KubeArgs,
}

#[derive(Args, Debug, Clone)]
pub struct ListArgs {
    /// The namespace; default: the kubeconfig context's namespace, else `default`.
    #[arg(
        long,
        short = 'n',
        value_name = "NS",
        conflicts_with = "all_namespaces"
    )]
    pub namespace: Option<String>,
    /// Every namespace.
    #[arg(long, short = 'A')]
    pub all_namespaces: bool,
    #[command(flatten)]
    pub kube: KubeArgs,
}

/// What a `results` command produced, for standard output.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// The fetched run's local directory (absolute).
    Fetched(PathBuf),
    /// The table of runs (empty when there are none; a note then went to stderr).
    Table(String),
}

/// Runs a `results` command.
pub async fn execute(command: ResultsCommand) -> Result<Output, ResultsError> {
    #[cfg(feature = "cluster")]
    {
        match command.action {
            ResultsAction::Fetch(args) => cluster::fetch(&args).await.map(Output::Fetched),
            ResultsAction::List(args) => cluster::list(&args).await.map(Output::Table),
        }
    }
    #[cfg(not(feature = "cluster"))]
    {
        let _ = command;
        Err(ResultsError::NoClusterSupport)
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Why a `results` command failed. Each names the run, object or path it is about, in words a user can act on.
#[derive(Debug, thiserror::Error)]
pub enum ResultsError {
    #[error(
        "this llmbench was built without cluster support (cargo feature `cluster`), so it cannot reach a cluster; \
         build it with default features for `llmbench results`"
    )]
    NoClusterSupport,
    #[error("cannot load a kubeconfig{}: {source}", context.as_ref().map(|c| format!(" (context {c})")).unwrap_or_default())]
    Kubeconfig {
        context: Option<String>,
        #[source]
        source: BoxError,
    },
    #[error(
        "no BenchmarkRun {run} in namespace {namespace}; if it finished and was deleted (its \
         ttlSecondsAfterFinished, or by hand), its results stay on its claim: `llmbench results fetch {run} -n \
         {namespace} --claim CLAIM` (the claim is workload-pvc unless the run named another)"
    )]
    RunNotFound { run: String, namespace: String },
    #[error(
        "claim {claim} has no results directory of a run named {run} at its root (looked for {run}-<8 hex digits>); \
         name it with --dir (the run's resultsDir, as its Expired event says)"
    )]
    NoRunDirOnClaim { run: String, claim: String },
    #[error(
        "claim {claim} holds the results of several runs named {run}: {}; name one with --dir",
        found.join(", ")
    )]
    SeveralRunDirsOnClaim {
        run: String,
        claim: String,
        found: Vec<String>,
    },
    #[error(
        "forbidden: you may not {verb} {resource} in namespace {namespace} (the API server said: {message}); ask \
         your cluster admin for a Role that grants it"
    )]
    Forbidden {
        verb: &'static str,
        resource: &'static str,
        namespace: String,
        message: String,
    },
    #[error(
        "the API server refused your credentials while trying to {action} ({message}); log in again or check your \
         kubeconfig"
    )]
    Unauthorized { action: String, message: String },
    #[error("cannot {action}: {source}")]
    Api {
        action: String,
        #[source]
        source: BoxError,
    },
    #[error(
        "BenchmarkRun {run} kept its results in an emptyDir, which went away with its launcher pod, and has no kept \
         copy (status.resultsKept: the operator keeps one once the launcher ended; see the run's ResultsNotKept \
         event): only the summary in its status survives (kubectl get benchmarkrun {run} -n {namespace} -o \
         jsonpath='{{.status.summary}}')"
    )]
    EmptyDirRun { run: String, namespace: String },
    #[error(
        "BenchmarkRun {run}'s kept results are incomplete: ConfigMap {config_map} has no part; its results cannot be \
         fetched whole"
    )]
    KeptPartMissing { run: String, config_map: String },
    #[error(
        "BenchmarkRun {run}'s kept results are {got} bytes where its status says {want}: a part is missing or changed"
    )]
    KeptSizeMismatch { run: String, got: u64, want: u64 },
    #[error(
        "BenchmarkRun {run} in namespace {namespace} is {phase}: its results are not complete yet; wait for it to \
         finish (kubectl wait benchmarkrun/{run} -n {namespace} --for=condition=Completed) or pass --allow-partial"
    )]
    NotFinished {
        run: String,
        namespace: String,
        phase: String,
    },
    #[error("BenchmarkRun {run} has no {field}: it must be read from the API server")]
    MissingMetadata { run: String, field: &'static str },
    #[error("BenchmarkRun {run} names its results directory {path:?}, which {reason}")]
    BadResultsPath {
        run: String,
        path: String,
        reason: &'static str,
    },
    #[error("{run:?} is not a BenchmarkRun name (a name is one path segment, not `.` or `..`)")]
    BadRunName { run: String },
    #[error(
        "the PVC {claim} that holds BenchmarkRun {run}'s results is not in namespace {namespace}: it was deleted, \
         and the results with it"
    )]
    ClaimMissing {
        claim: String,
        run: String,
        namespace: String,
    },
    #[error(
        "the PVC {claim} in namespace {namespace} is being deleted: no new pod may mount it, so its results can no \
         longer be read"
    )]
    ClaimTerminating { claim: String, namespace: String },
    #[error(
        "this cluster does not serve BenchmarkRuns (llmbench.dev/v1alpha1): the llmbench CRDs are not installed \
         (helm install llmbench charts/llmbench, or llmbench-operator crds | kubectl apply -f -)"
    )]
    NoBenchmarkRunApi,
    #[error(
        "{} already exists; pass --force to replace it, or --to another directory",
        path.display()
    )]
    DestinationExists { path: PathBuf },
    #[error("cannot {action} {}: {source}", path.display())]
    Local {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "the reader pod {pod} in namespace {namespace} did not start within {} ({reason}); see kubectl describe pod \
         {pod} -n {namespace}, or raise --pod-timeout",
        humantime::format_duration(*waited)
    )]
    PodNotReady {
        pod: String,
        namespace: String,
        waited: Duration,
        reason: String,
    },
    #[error("the reader pod {pod} in namespace {namespace} cannot run: {reason}")]
    PodFailed {
        pod: String,
        namespace: String,
        reason: String,
    },
    #[error(
        "the PVC {claim} has no {path}: BenchmarkRun {run} wrote nothing there (a debug run, or one that failed \
         before its launcher started)"
    )]
    ResultsDirMissing {
        run: String,
        claim: String,
        path: String,
    },
    #[error("`{command}` in the reader pod {pod} failed{}: {stderr}", code.map(|c| format!(" with exit code {c}")).unwrap_or_default())]
    Exec {
        pod: String,
        command: String,
        code: Option<i32>,
        stderr: String,
    },
    #[error("the stream of BenchmarkRun {run}'s results from the reader pod {pod} broke: {source}")]
    Stream {
        run: String,
        pod: String,
        #[source]
        source: BoxError,
    },
    #[error("cannot unpack BenchmarkRun {run}'s results into {}: {source}", dir.display())]
    Unpack {
        run: String,
        dir: PathBuf,
        #[source]
        source: unpack::UnpackError,
    },
    #[error(
        "interrupted: the fetch of BenchmarkRun {run} was stopped; its reader pod is deleted and nothing was kept"
    )]
    Interrupted { run: String },
}

impl ResultsError {
    /// The process exit code for this error, when it is not the generic 1.
    pub fn exit_code(&self) -> Option<u8> {
        match self {
            Self::NotFinished { .. } => Some(EXIT_RUN_NOT_FINISHED),
            Self::Interrupted { .. } => Some(EXIT_INTERRUPTED),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(subcommand)]
        action: ResultsAction,
    }

    #[test]
    fn fetch_defaults_to_the_current_directory_and_safe_choices() {
        let cli = Cli::try_parse_from(["results", "fetch", "bench-1"]).expect("parses");
        let ResultsAction::Fetch(args) = cli.action else {
            panic!("fetch");
        };
        assert_eq!(args.run, "bench-1");
        assert_eq!(args.namespace, None);
        assert_eq!(args.to, PathBuf::from("."));
        assert!(!args.force && !args.allow_partial);
        assert_eq!(args.pod_timeout, Duration::from_secs(300));
        assert_eq!(args.deadline, Duration::from_secs(3600));
    }

    #[test]
    fn fetch_takes_kubectl_style_namespace_and_context_flags() {
        let cli = Cli::try_parse_from([
            "results",
            "fetch",
            "bench-1",
            "-n",
            "bench",
            "--to",
            "out",
            "--context",
            "kind-a",
            "--kubeconfig",
            "/tmp/kc",
            "--pod-timeout",
            "90s",
        ])
        .expect("parses");
        let ResultsAction::Fetch(args) = cli.action else {
            panic!("fetch");
        };
        assert_eq!(args.namespace.as_deref(), Some("bench"));
        assert_eq!(args.to, PathBuf::from("out"));
        assert_eq!(args.kube.context.as_deref(), Some("kind-a"));
        assert_eq!(args.kube.kubeconfig, Some(PathBuf::from("/tmp/kc")));
        assert_eq!(args.pod_timeout, Duration::from_secs(90));
    }

    #[test]
    fn list_refuses_a_namespace_together_with_all_namespaces() {
        assert!(Cli::try_parse_from(["results", "list", "-n", "a", "-A"]).is_err());
        let cli = Cli::try_parse_from(["results", "list", "-A"]).expect("parses");
        assert!(matches!(
            cli.action,
            ResultsAction::List(ListArgs {
                all_namespaces: true,
                ..
            })
        ));
    }

    #[test]
    fn a_run_that_has_not_finished_and_an_interruption_have_their_own_exit_codes() {
        let not_finished = ResultsError::NotFinished {
            run: "r".to_owned(),
            namespace: "n".to_owned(),
            phase: "Running".to_owned(),
        };
        assert_eq!(not_finished.exit_code(), Some(3));
        assert_eq!(
            ResultsError::Interrupted {
                run: "r".to_owned()
            }
            .exit_code(),
            Some(4)
        );
        assert_eq!(ResultsError::NoClusterSupport.exit_code(), None);
    }

    #[test]
    fn an_empty_dir_run_says_where_its_summary_survives() {
        let error = ResultsError::EmptyDirRun {
            run: "bench-1".to_owned(),
            namespace: "bench".to_owned(),
        };
        assert!(
            error.to_string().contains(
                "kubectl get benchmarkrun bench-1 -n bench -o jsonpath='{.status.summary}'"
            ),
            "{error}"
        );
    }

    #[cfg(not(feature = "cluster"))]
    #[test]
    fn without_cluster_support_results_says_so() {
        let cli = Cli::try_parse_from(["results", "list"]).expect("parses");
        let result = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime")
            .block_on(execute(ResultsCommand { action: cli.action }));
        assert!(matches!(result, Err(ResultsError::NoClusterSupport)));
    }
}
