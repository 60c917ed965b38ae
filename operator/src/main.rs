//! The llmbench operator binary.
#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand};
use kube::Client;
use kube::runtime::events::{Recorder, Reporter};
use llmbench_operator::{
    Context, DEFAULT_CONCURRENCY, FIELD_MANAGER, HOOK_TIMEOUT, Health, LAUNCHER_DEFAULTS_ENV,
    LauncherDefaults, LauncherSettings, LeaderElector, LeaseConfig, Metrics, Retries, Timing, Work,
    parse_duration, router, run_controllers, serve,
};
use prometheus_client::registry::Registry;
use tokio::sync::watch;

/// The llmbench operator: reconciles BenchmarkRuns, BenchmarkExperiments and WorkloadProfiles. Without a
/// subcommand it runs the controllers (as `run` does).
#[derive(Parser, Debug)]
#[command(
    name = "llmbench-operator",
    version,
    about,
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the controllers (the default).
    Run(Box<RunArgs>),
    /// Print the CustomResourceDefinitions this operator serves, as YAML (for `kubectl apply -f -`).
    Crds,
}

const DEFAULT_IMAGE: &str = concat!("ghcr.io/llmbench/llmbench:", env!("CARGO_PKG_VERSION"));

#[derive(Args, Debug, Clone)]
struct RunArgs {
    /// Watch only this namespace (namespaced RBAC); all namespaces when unset.
    #[arg(long, env = "LLMBENCH_WATCH_NAMESPACE", value_name = "NAMESPACE")]
    namespace: Option<String>,
    /// The default launcher image, for runs that do not set spec.launcher.image.
    #[arg(long, env = "LLMBENCH_LAUNCHER_IMAGE", default_value = DEFAULT_IMAGE)]
    launcher_image: String,
    /// The launcher pods' imagePullPolicy (the cluster's default when unset).
    #[arg(
        long,
        env = "LLMBENCH_LAUNCHER_IMAGE_PULL_POLICY",
        value_name = "POLICY"
    )]
    launcher_image_pull_policy: Option<String>,
    /// What runs leave unset, as JSON: `resources`, `nodeSelector`, `tolerations`, `imagePullSecrets`,
    /// `serviceAccountName`, `hfTokenSecretRef` ({name, key}) and `storageClassName` (of the workload PVC the
    /// operator creates). The chart renders its `launcher.defaults` here. A run's own field wins, whole.
    #[arg(
        long,
        env = LAUNCHER_DEFAULTS_ENV,
        value_name = "JSON",
        value_parser = parse_launcher_defaults,
        default_value = ""
    )]
    launcher_defaults: LauncherDefaults,
    /// Where /metrics, /healthz and /readyz are served.
    #[arg(long, env = "LLMBENCH_METRICS_BIND", default_value = "0.0.0.0:8080")]
    metrics_bind: SocketAddr,
    /// Elect a leader on a Lease, so several replicas are safe; only the leader reconciles.
    #[arg(long, env = "LLMBENCH_LEADER_ELECT")]
    leader_elect: bool,
    /// The Lease's name.
    #[arg(long, env = "LLMBENCH_LEASE_NAME", default_value = "llmbench-operator")]
    lease_name: String,
    /// The Lease's namespace; default: POD_NAMESPACE, else the watched namespace, else `default`.
    #[arg(long, env = "LLMBENCH_LEASE_NAMESPACE")]
    lease_namespace: Option<String>,
    /// This replica's identity in the Lease and in events; default: POD_NAME, else hostname and pid.
    #[arg(long, env = "LLMBENCH_IDENTITY")]
    identity: Option<String>,
    /// How long a Lease is valid without renewal.
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    lease_duration: Duration,
    /// How long the leader keeps reconciling while it cannot renew, before it stops the controllers at once (and
    /// exits). Counted from its last successful renewal, whether renewals fail or hang; must be shorter than the
    /// lease duration. Each Lease API call is bounded by half of it.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    renew_deadline: Duration,
    /// How many objects each controller reconciles at once (0: no bound).
    #[arg(long, env = "LLMBENCH_CONCURRENCY", default_value_t = DEFAULT_CONCURRENCY)]
    concurrency: u16,
    /// How many finished runs per namespace keep their result gauges (llmbench_run_*) on /metrics; older runs'
    /// series are removed as newer ones finish, and a run's when it is deleted. 0 exports none.
    #[arg(
        long,
        env = "LLMBENCH_RUN_RESULTS_PER_NAMESPACE",
        default_value_t = llmbench_operator::DEFAULT_RUN_RESULTS_PER_NAMESPACE
    )]
    run_results_per_namespace: usize,
    /// Delete finished BenchmarkRuns and BenchmarkExperiments this many seconds after they finished when their
    /// spec sets no ttlSecondsAfterFinished (their pods and objects go with them; results on the PVC stay).
    /// Unset: keep them until deleted.
    #[arg(
        long,
        env = "LLMBENCH_TTL_SECONDS_AFTER_FINISHED",
        value_name = "SECONDS"
    )]
    ttl_seconds_after_finished: Option<u64>,
    /// How often the Lease is renewed or retried.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    retry_period: Duration,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let args = match cli.command {
        Some(Command::Crds) => return print_crds(),
        Some(Command::Run(args)) => *args,
        None => cli.run,
    };
    init_logging();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("llmbench-operator: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = format!("{e:#}"), "llmbench-operator stopped");
            ExitCode::FAILURE
        }
    }
}

/// `--launcher-defaults`: the chart's `launcher.defaults` as JSON, refused whole (with the key) when not valid.
fn parse_launcher_defaults(text: &str) -> Result<LauncherDefaults, String> {
    LauncherDefaults::from_json(text).map_err(|e| e.to_string())
}

fn print_crds() -> ExitCode {
    for (file, yaml) in llmbench_api::crd_manifests() {
        match yaml {
            Ok(yaml) => print!("---\n{yaml}"),
            Err(e) => {
                eprintln!("llmbench-operator: cannot serialize {file}: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}

/// Logs go to stderr: JSON when LLMBENCH_LOG_FORMAT=json (as the chart sets it, and as the launcher does), plain
/// text otherwise, coloured only on a terminal and never with NO_COLOR set (no-color.org); the level comes from
/// RUST_LOG (default info).
fn init_logging() {
    use std::io::IsTerminal as _;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let colour = std::io::stderr().is_terminal()
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(colour);
    if std::env::var("LLMBENCH_LOG_FORMAT").is_ok_and(|f| f.eq_ignore_ascii_case("json")) {
        builder.json().init();
    } else {
        builder.init();
    }
}

fn identity(args: &RunArgs) -> String {
    args.identity
        .clone()
        .or_else(|| std::env::var("POD_NAME").ok())
        .unwrap_or_else(|| {
            let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "llmbench-operator".to_owned());
            format!("{host}-{}", std::process::id())
        })
}

/// Resolves on SIGTERM or SIGINT.
async fn termination() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGTERM; only SIGINT stops the operator");
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// How long the controllers get to finish the reconciles under way when the operator shuts down.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(20);

/// Starts the controllers as work that can be stopped gracefully or fenced.
fn start_controllers(
    ctx: Arc<Context>,
    namespace: Option<String>,
    concurrency: u16,
    health: Arc<Health>,
) -> Work {
    let work = Work::spawn(move |shutdown| async move {
        let synced_health = health.clone();
        run_controllers(
            ctx,
            namespace.as_deref(),
            concurrency,
            shutdown,
            move || {
                tracing::info!("caches synced");
                synced_health.set_synced();
            },
            |stores| health.set_stores(stores),
        )
        .await;
    });
    tracing::info!(concurrency, "controllers started");
    work
}

async fn run(args: RunArgs) -> anyhow::Result<()> {
    let client = Client::try_default()
        .await
        .context("cannot configure a Kubernetes client (in-cluster or KUBECONFIG)")?;
    let identity = identity(&args);
    let mut registry = Registry::default();
    let metrics = Metrics::register_keeping(&mut registry, args.run_results_per_namespace);
    let health = Arc::new(Health::new(args.leader_elect));

    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::spawn(async move {
        termination().await;
        tracing::info!("termination signal received; shutting down");
        let _ = stop_tx.send(true);
    });
    let server_stop = {
        let mut rx = stop_rx.clone();
        async move {
            let _ = rx.wait_for(|stop| *stop).await;
        }
    };
    let server = tokio::spawn(serve(
        args.metrics_bind,
        router(Arc::new(registry), metrics.clone(), health.clone()),
        server_stop,
    ));

    let ctx = Arc::new(Context {
        client: client.clone(),
        recorder: Recorder::new(
            client.clone(),
            Reporter {
                controller: FIELD_MANAGER.to_owned(),
                instance: Some(identity.clone()),
            },
        ),
        metrics,
        launcher: LauncherSettings {
            image: args.launcher_image.clone(),
            image_pull_policy: args.launcher_image_pull_policy.clone(),
            defaults: args.launcher_defaults.clone(),
        },
        http: reqwest::Client::builder()
            .timeout(HOOK_TIMEOUT)
            .build()
            .context("cannot build the HTTP client for experiment hooks")?,
        retries: Retries::default(),
        ttl_after_finished: args.ttl_seconds_after_finished.map(Duration::from_secs),
    });
    tracing::info!(
        identity,
        namespace = args.namespace.as_deref().unwrap_or("<all>"),
        launcher_image = args.launcher_image,
        leader_elect = args.leader_elect,
        "llmbench-operator starting"
    );

    let outcome = if args.leader_elect {
        lead(&args, client, identity, ctx, health, stop_rx).await
    } else {
        let controllers = start_controllers(ctx, args.namespace.clone(), args.concurrency, health);
        let mut rx = stop_rx;
        let _ = rx.wait_for(|stop| *stop).await;
        controllers.stop(SHUTDOWN_GRACE).await;
        Ok(())
    };
    server.abort();
    outcome
}

/// Campaigns for the Lease; runs the controllers while leading. Losing the Lease (or going a renew deadline
/// without renewing it) stops the controllers at once and the process with an error, so the orchestrator restarts
/// it as a clean candidate (client-go does the same).
async fn lead(
    args: &RunArgs,
    client: Client,
    identity: String,
    ctx: Arc<Context>,
    health: Arc<Health>,
    stop: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let lease_namespace = args
        .lease_namespace
        .clone()
        .or_else(|| std::env::var("POD_NAMESPACE").ok())
        .or_else(|| args.namespace.clone())
        .unwrap_or_else(|| "default".to_owned());
    if args.renew_deadline >= args.lease_duration {
        anyhow::bail!(
            "--renew-deadline ({:?}) must be shorter than --lease-duration ({:?}), or a successor could lead \
             while this replica still reconciles",
            args.renew_deadline,
            args.lease_duration
        );
    }
    let timing = Timing {
        retry_period: args.retry_period,
        renew_deadline: args.renew_deadline,
    };
    let mut elector = LeaderElector::new(
        client,
        LeaseConfig {
            name: args.lease_name.clone(),
            namespace: lease_namespace,
            identity,
            lease_duration: args.lease_duration,
            call_timeout: timing.call_timeout(),
        },
    );
    let lease_health = health.clone();
    llmbench_operator::lead(
        &mut elector,
        timing,
        stop,
        SHUTDOWN_GRACE,
        move |held| lease_health.set_lease(held),
        || {
            start_controllers(
                ctx.clone(),
                args.namespace.clone(),
                args.concurrency,
                health.clone(),
            )
        },
    )
    .await?;
    Ok(())
}
