//! `llmbench dashboard`: a web page and a JSON API over a results directory — every run and experiment in it with
//! its headline figures, each run's own `report.html` and pictures, and side-by-side comparisons of the runs
//! picked (what `llmbench plot` draws). The same server runs in the cluster (the chart's `dashboard`), on the
//! workload PVC mounted read-only.
//!
//! Nothing is loaded at start and nothing is watched: each listing rescans the directory, reading only the files
//! that changed since the last one ([`scan`]), so new runs appear without a restart and memory follows the
//! number of runs, not their size. The results are never written: a comparison is drawn into a directory of the
//! dashboard's own ([`compare`]); files are served read-only from inside the results directory only ([`files`]).
//!
//! Routes:
//! - `GET /`: the page (one self-contained HTML file, no external assets).
//! - `GET /api/runs`: every run and experiment, newest first, and the directories that could not be read.
//! - `GET /api/runs/{id}`: one run (or experiment, with its runs), by its directory relative to DIR.
//! - `GET /api/compare?runs=ID,ID…`: draws the comparison of those runs or experiments and returns their rows
//!   and the comparison page's address.
//! - `GET /files/{id}/{file}`: a file of a run (its `report.html`, `plots/…`, `summary.json`, …).
//! - `GET /compare/{key}/{file}`: a drawn comparison's `compare.html` and pictures.
//! - `GET /healthz`: `ok`, for probes.

mod compare;
mod files;
mod scan;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use axum::Router;
use axum::body::Body;
use axum::extract::{Path as UrlPath, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use clap::Args;
use serde::Deserialize;
use serde_json::json;

use self::compare::{COMPARE_PAGE, Comparisons};
use self::scan::{Listing, Scanner};

/// The page, with its CSS and JavaScript inline.
const PAGE: &str = include_str!("page.html");
/// The most runs or experiments one comparison draws: each one's records are read for its distributions.
const MAX_COMPARED: usize = 8;

/// `llmbench dashboard`.
#[derive(Args, Debug, Clone)]
pub struct DashboardArgs {
    /// The results directory: where `llmbench run --output`, `llmbench experiment --output` and `llmbench results
    /// fetch --to` wrote (run directories with run.json and experiment directories with experiment.json, at any
    /// depth up to 5). It is only read.
    #[arg(long, value_name = "DIR", env = "LLMBENCH_DASHBOARD_RESULTS")]
    pub results: PathBuf,
    /// Where to listen. Loopback by default: the dashboard serves every file of the results without
    /// authentication, so exposing it is a choice (the chart listens on 0.0.0.0 inside its pod and is reached
    /// with `kubectl port-forward`).
    #[arg(
        long,
        value_name = "ADDR",
        default_value = "127.0.0.1:8089",
        env = "LLMBENCH_DASHBOARD_LISTEN"
    )]
    pub listen: SocketAddr,
    /// Where drawn comparisons are kept (in a directory of the dashboard's own, removed when it stops; the 16
    /// latest are kept). Default: the system's temporary directory.
    #[arg(long, value_name = "DIR")]
    pub work_dir: Option<PathBuf>,
}

/// Why the dashboard could not start, or a request could not be answered. Each names what it is about.
#[derive(Debug, thiserror::Error)]
pub enum DashboardError {
    #[error(
        "the results directory {path} cannot be read: {source}; pass the directory your runs were written to \
         (llmbench run --output DIR)"
    )]
    ResultsDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot listen on {addr}: {source}; choose another --listen address")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("cannot use the work directory {path}: {source}; choose another --work-dir")]
    WorkDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the dashboard stopped serving: {source}")]
    Serve { source: std::io::Error },
    #[error("cannot wait for a shutdown signal: {source}")]
    Signal { source: std::io::Error },
    #[error("no run or experiment {id:?} under the results directory; GET /api/runs lists them")]
    UnknownRun { id: String },
    #[error("the path {path:?} is refused: {reason}")]
    PathRefused { path: String, reason: &'static str },
    #[error("no file {path:?}")]
    FileNotFound { path: String },
    #[error(
        "a comparison needs two or more runs, or an experiment: ?runs=ID,ID (ids as GET /api/runs lists them)"
    )]
    TooFewToCompare,
    #[error(
        "a comparison draws at most {MAX_COMPARED} runs or experiments; {given} were asked for"
    )]
    TooManyToCompare { given: usize },
    #[error("run {id} has no summary yet ({state}); compare it once it has finished")]
    NotFinished { id: String, state: String },
    #[error("cannot draw the comparison: {message}")]
    Compare { message: String },
    #[error("the {what} failed: {message}")]
    Task { what: &'static str, message: String },
}

impl DashboardError {
    fn status(&self) -> StatusCode {
        match self {
            DashboardError::UnknownRun { .. } | DashboardError::FileNotFound { .. } => {
                StatusCode::NOT_FOUND
            }
            DashboardError::PathRefused { .. } => StatusCode::FORBIDDEN,
            DashboardError::TooFewToCompare | DashboardError::TooManyToCompare { .. } => {
                StatusCode::BAD_REQUEST
            }
            DashboardError::NotFinished { .. } => StatusCode::CONFLICT,
            DashboardError::ResultsDir { .. } => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl IntoResponse for DashboardError {
    fn into_response(self) -> Response {
        (
            self.status(),
            axum::Json(json!({"error": self.to_string()})),
        )
            .into_response()
    }
}

/// What every request shares.
struct Dashboard {
    /// The results directory, canonical.
    results: PathBuf,
    scanner: Mutex<Scanner>,
    comparisons: Comparisons,
}

impl Dashboard {
    /// A fresh listing (on a blocking thread: it reads files).
    async fn listing(self: &Arc<Self>) -> Result<Listing, DashboardError> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || {
            let mut scanner = this.scanner.lock().unwrap_or_else(PoisonError::into_inner);
            scanner.scan().map_err(|source| DashboardError::ResultsDir {
                path: scanner.root().to_owned(),
                source,
            })
        })
        .await
        .map_err(|e| DashboardError::Task {
            what: "scan of the results directory",
            message: e.to_string(),
        })?
    }
}

/// Serves the dashboard until SIGINT or SIGTERM.
pub async fn run_until_signal(args: DashboardArgs) -> Result<(), DashboardError> {
    let (listener, app) = bind(&args).await?;
    let addr = listener
        .local_addr()
        .map_err(|source| DashboardError::Bind {
            addr: args.listen,
            source,
        })?;
    tracing::info!(
        results = %args.results.display(),
        url = %format!("http://{addr}/"),
        "llmbench dashboard listening"
    );
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            if let Err(error) = shutdown_signal().await {
                tracing::warn!(%error, "stopping");
            }
        })
        .await
        .map_err(|source| DashboardError::Serve { source })
}

/// Checks the results directory, prepares the work directory and binds the address.
async fn bind(args: &DashboardArgs) -> Result<(tokio::net::TcpListener, Router), DashboardError> {
    let results_error = |source| DashboardError::ResultsDir {
        path: args.results.clone(),
        source,
    };
    let results = args.results.canonicalize().map_err(results_error)?;
    std::fs::read_dir(&results).map_err(results_error)?;
    let work = args.work_dir.clone().unwrap_or_else(std::env::temp_dir);
    let dashboard = Arc::new(Dashboard {
        scanner: Mutex::new(Scanner::new(results.clone())),
        results,
        comparisons: Comparisons::new(&work)?,
    });
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|source| DashboardError::Bind {
            addr: args.listen,
            source,
        })?;
    Ok((listener, router(dashboard)))
}

fn router(dashboard: Arc<Dashboard>) -> Router {
    Router::new()
        .route("/", get(|| async { Html(PAGE) }))
        .route("/healthz", get(|| async { "ok" }))
        .route("/api/runs", get(list_runs))
        .route("/api/runs/{*id}", get(one_run))
        .route("/api/compare", get(compare_runs))
        .route("/files/{*path}", get(run_file))
        .route("/compare/{key}/{*path}", get(compare_file))
        .with_state(dashboard)
}

async fn list_runs(State(dashboard): State<Arc<Dashboard>>) -> Result<Response, DashboardError> {
    let listing = dashboard.listing().await?;
    Ok(axum::Json(json!({
        "results": dashboard.results,
        "runs": listing.runs,
        "experiments": listing.experiments,
        "problems": listing.problems,
    }))
    .into_response())
}

async fn one_run(
    State(dashboard): State<Arc<Dashboard>>,
    UrlPath(id): UrlPath<String>,
) -> Result<Response, DashboardError> {
    let listing = dashboard.listing().await?;
    if let Some(run) = listing.runs.iter().find(|r| r.id == id) {
        return Ok(axum::Json(json!({"kind": "run", "run": run})).into_response());
    }
    if let Some(experiment) = listing.experiments.iter().find(|e| e.id == id) {
        let runs: Vec<_> = listing
            .runs
            .iter()
            .filter(|r| r.experiment.as_deref() == Some(id.as_str()))
            .collect();
        return Ok(axum::Json(json!({
            "kind": "experiment",
            "experiment": experiment,
            "runs": runs,
        }))
        .into_response());
    }
    Err(DashboardError::UnknownRun { id })
}

#[derive(Deserialize)]
struct CompareQuery {
    #[serde(default)]
    runs: String,
}

async fn compare_runs(
    State(dashboard): State<Arc<Dashboard>>,
    Query(query): Query<CompareQuery>,
) -> Result<Response, DashboardError> {
    let ids: Vec<&str> = query
        .runs
        .split(',')
        .map(str::trim)
        .filter(|id| !id.is_empty())
        .collect();
    if ids.len() > MAX_COMPARED {
        return Err(DashboardError::TooManyToCompare { given: ids.len() });
    }
    let listing = dashboard.listing().await?;
    let mut dirs = Vec::new();
    let mut rows = Vec::new();
    let mut experiments = 0;
    for id in &ids {
        if let Some(run) = listing.runs.iter().find(|r| r.id == *id) {
            if run.figures.is_none() {
                return Err(DashboardError::NotFinished {
                    id: run.id.clone(),
                    state: run.state.clone(),
                });
            }
            rows.push(json!({"kind": "run", "run": run}));
        } else if let Some(experiment) = listing.experiments.iter().find(|e| e.id == *id) {
            experiments += 1;
            rows.push(json!({"kind": "experiment", "experiment": experiment}));
        } else {
            return Err(DashboardError::UnknownRun {
                id: (*id).to_owned(),
            });
        }
        dirs.push(dashboard.results.join(id));
    }
    if ids.len() < 2 && experiments == 0 {
        return Err(DashboardError::TooFewToCompare);
    }
    let key = dashboard.comparisons.draw(dirs).await?;
    let pictures = pictures(&dashboard.comparisons.dir().join(&key))
        .into_iter()
        .map(|name| format!("/compare/{key}/{name}"))
        .collect::<Vec<_>>();
    Ok(axum::Json(json!({
        "runs": rows,
        "page": format!("/compare/{key}/{COMPARE_PAGE}"),
        "pictures": pictures,
    }))
    .into_response())
}

/// The PNG pictures of a drawn comparison, by name.
fn pictures(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| n.ends_with(".png"))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

async fn run_file(
    State(dashboard): State<Arc<Dashboard>>,
    UrlPath(path): UrlPath<String>,
) -> Result<Response, DashboardError> {
    serve_file(&dashboard.results, &path).await
}

async fn compare_file(
    State(dashboard): State<Arc<Dashboard>>,
    UrlPath((key, path)): UrlPath<(String, String)>,
) -> Result<Response, DashboardError> {
    serve_file(dashboard.comparisons.dir(), &format!("{key}/{path}")).await
}

/// A file inside `root`, streamed (a run's records can be large).
async fn serve_file(root: &Path, requested: &str) -> Result<Response, DashboardError> {
    let path = files::resolve(root, requested)?;
    let file = tokio::fs::File::open(&path)
        .await
        .map_err(|_| DashboardError::FileNotFound {
            path: requested.to_owned(),
        })?;
    let length = file.metadata().await.ok().map(|m| m.len());
    let stream = futures_util::stream::unfold(file, |mut file| async move {
        use tokio::io::AsyncReadExt as _;
        let mut buffer = bytes::BytesMut::with_capacity(64 << 10);
        match file.read_buf(&mut buffer).await {
            Ok(0) => None,
            Ok(_) => Some((Ok::<_, std::io::Error>(buffer.freeze()), file)),
            Err(error) => Some((Err(error), file)),
        }
    });
    let mut response = Response::builder()
        .header(header::CONTENT_TYPE, files::content_type(&path))
        // The results change only by new runs; a page reloaded shows a rewritten report.
        .header(header::CACHE_CONTROL, "no-cache")
        .header("x-content-type-options", "nosniff");
    if let Some(length) = length {
        response = response.header(header::CONTENT_LENGTH, length);
    }
    response
        .body(Body::from_stream(stream))
        .map_err(|e| DashboardError::Task {
            what: "response",
            message: format!("{requested}: {e}"),
        })
}

async fn shutdown_signal() -> Result<(), DashboardError> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term =
            signal(SignalKind::terminate()).map_err(|source| DashboardError::Signal { source })?;
        tokio::select! {
            result = tokio::signal::ctrl_c() => result.map_err(|source| DashboardError::Signal { source }),
            _ = term.recv() => Ok(()),
        }
    }
    #[cfg(not(unix))]
    {
        tokio::signal::ctrl_c()
            .await
            .map_err(|source| DashboardError::Signal { source })
    }
}
