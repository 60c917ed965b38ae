//! The operator's HTTP endpoints: `/metrics` (Prometheus text), `/healthz` (the process serves) and `/readyz`
//! (caches synced on the leader; with leader election, a standby is ready once it has read the lease).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use kube::runtime::reflector::Store;
use llmbench_api::v1alpha1::{BenchmarkExperiment, BenchmarkRun};
use prometheus_client::registry::Registry;

use crate::metrics::Metrics;
use crate::reconcile::Stores;

/// What `/readyz` reports, updated by the process as it goes.
#[derive(Debug, Default)]
pub struct Health {
    leader_election: bool,
    lease_known: AtomicBool,
    leading: AtomicBool,
    synced: AtomicBool,
    runs: OnceLock<Store<BenchmarkRun>>,
    experiments: OnceLock<Store<BenchmarkExperiment>>,
}

impl Health {
    pub fn new(leader_election: bool) -> Self {
        Health {
            leader_election,
            ..Health::default()
        }
    }

    /// A lease round completed: we lead or we know who does.
    pub fn set_lease(&self, leading: bool) {
        self.leading.store(leading, Ordering::SeqCst);
        self.lease_known.store(true, Ordering::SeqCst);
    }

    pub fn set_synced(&self) {
        self.synced.store(true, Ordering::SeqCst);
    }

    /// The controllers' caches, for counting runs and experiments by phase.
    pub fn set_stores(&self, stores: Stores) {
        let _ = self.runs.set(stores.runs);
        let _ = self.experiments.set(stores.experiments);
    }

    pub fn ready(&self) -> bool {
        let synced = self.synced.load(Ordering::SeqCst);
        if !self.leader_election {
            return synced;
        }
        self.lease_known.load(Ordering::SeqCst) && (!self.leading.load(Ordering::SeqCst) || synced)
    }
}

#[derive(Clone)]
struct AppState {
    registry: Arc<Registry>,
    metrics: Metrics,
    health: Arc<Health>,
}

/// Why the HTTP server stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("the HTTP server on {addr} failed: {source}")]
    Serve {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

pub fn router(registry: Arc<Registry>, metrics: Metrics, health: Arc<Health>) -> Router {
    Router::new()
        .route("/metrics", get(metrics_handler))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .with_state(AppState {
            registry,
            metrics,
            health,
        })
}

/// Serves until `shutdown` resolves.
pub async fn serve(
    addr: SocketAddr,
    router: Router,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), ServerError> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| ServerError::Bind { addr, source })?;
    let local = listener.local_addr().unwrap_or(addr);
    tracing::info!(addr = %local, "serving /metrics, /healthz and /readyz");
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(|source| ServerError::Serve { addr, source })
}

async fn readyz(State(state): State<AppState>) -> impl IntoResponse {
    if state.health.ready() {
        (StatusCode::OK, "ready")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready")
    }
}

async fn metrics_handler(State(state): State<AppState>) -> impl IntoResponse {
    if let Some(store) = state.health.runs.get() {
        state.metrics.set_runs_by_phase(
            store
                .state()
                .iter()
                .map(|r| r.status.as_ref().and_then(|s| s.phase)),
        );
    }
    if let Some(store) = state.health.experiments.get() {
        state.metrics.set_experiments_by_phase(
            store
                .state()
                .iter()
                .map(|e| e.status.as_ref().and_then(|s| s.phase)),
        );
    }
    let mut body = String::new();
    match prometheus_client::encoding::text::encode(&mut body, &state.registry) {
        Ok(()) => (
            StatusCode::OK,
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            body,
        ),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            format!("cannot encode metrics: {e}"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_leader_election_ready_means_caches_synced() {
        let health = Health::new(false);
        assert!(!health.ready());
        health.set_synced();
        assert!(health.ready());
    }

    #[test]
    fn a_standby_is_ready_once_it_knows_the_leader_and_a_leader_once_synced() {
        let health = Health::new(true);
        assert!(!health.ready(), "no lease round yet");
        health.set_lease(false);
        assert!(health.ready(), "standing by correctly");
        health.set_lease(true);
        assert!(!health.ready(), "leading but caches not synced");
        health.set_synced();
        assert!(health.ready());
    }
}
