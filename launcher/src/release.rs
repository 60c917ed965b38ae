//! `llmbench run --wait-for-release ADDR`: a shard of a sharded run starts its clock when every shard is ready, at
//! one instant the operator names (the protocol: `llmbench_core::release`).
//!
//! The launcher prepares everything before its clock starts (profile, prompts, schedule, results directory), then
//! answers `waiting` on `GET /ready` and waits for a `POST /release` naming a wall-clock instant. It sleeps until
//! that instant on its monotonic clock with the engine's precise timer, so its t0 lands within the timer's
//! wake-up of the instant; run.json records the instant and the actual start, and the merge reports each shard's
//! lateness and the spread between shards. An instant already past starts the clock at once — the lateness shows it.
//!
//! The server keeps answering until the run ends, so an operator that lost track reads the instant back.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use llmbench_core::release::{READY_PATH, RELEASE_PATH, ReadyAnswer, ReleaseRequest};
use tokio::sync::watch;

/// Why a launcher did not get released.
#[derive(Debug, thiserror::Error)]
pub enum ReleaseError {
    #[error("--wait-for-release: cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(
        "--wait-for-release: no release within {waited:?} (--release-timeout) on {addr}: the operator releases the \
         shards once every one of them answers `waiting` on {READY_PATH}"
    )]
    Timeout { addr: SocketAddr, waited: Duration },
    #[error("--wait-for-release: {signal} while waiting for the release; nothing was sent")]
    Interrupted { signal: &'static str },
    #[error("--wait-for-release: cannot handle signals: {0}")]
    Signals(std::io::Error),
}

/// What a `POST /release` did to the gate's state.
fn accept(current: ReadyAnswer, request: ReleaseRequest) -> (ReadyAnswer, bool) {
    match current {
        // The first instant wins: a repeated or late release cannot move a start already decided.
        ReadyAnswer::Released { .. } => (current, false),
        ReadyAnswer::Preparing | ReadyAnswer::Waiting => (
            ReadyAnswer::Released {
                at_unix_ns: request.at_unix_ns,
            },
            true,
        ),
    }
}

/// The release server of one launcher. Dropping it stops serving.
#[derive(Debug)]
pub(crate) struct ReleaseServer {
    addr: SocketAddr,
    state: watch::Sender<ReadyAnswer>,
    _serving: llmbench_engine::live::Serving,
}

impl ReleaseServer {
    /// Listens on `addr` (port 0 picks a free one) and answers `preparing` until [`ReleaseServer::ready`].
    pub(crate) async fn start(addr: SocketAddr) -> Result<ReleaseServer, ReleaseError> {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| ReleaseError::Bind { addr, source })?;
        let bound = listener.local_addr().unwrap_or(addr);
        let (state, _) = watch::channel(ReadyAnswer::Preparing);
        let router = Router::new()
            .route(READY_PATH, get(ready_handler))
            .route(RELEASE_PATH, post(release_handler))
            .with_state(state.clone());
        let serving =
            llmbench_engine::live::serve_until_dropped(listener, router, "the release server");
        tracing::info!("waiting for release: http://{bound}{READY_PATH}");
        Ok(ReleaseServer {
            addr: bound,
            state,
            _serving: serving,
        })
    }

    /// The address it listens on.
    #[cfg(test)]
    fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Everything is prepared: answer `waiting` (unless a release already came).
    pub(crate) fn ready(&self) {
        self.state.send_if_modified(|state| {
            let preparing = *state == ReadyAnswer::Preparing;
            if preparing {
                *state = ReadyAnswer::Waiting;
            }
            preparing
        });
    }

    /// Waits up to `timeout` for the release; the instant it names, in ns since the Unix epoch.
    pub(crate) async fn released(&self, timeout: Duration) -> Result<u64, ReleaseError> {
        let mut state = self.state.subscribe();
        let waited = tokio::time::timeout(
            timeout,
            state.wait_for(|s| matches!(s, ReadyAnswer::Released { .. })),
        )
        .await;
        let timed_out = ReleaseError::Timeout {
            addr: self.addr,
            waited: timeout,
        };
        // The sender lives in `self`, so the channel cannot close while this waits; only a timeout is left.
        match waited.map(|answer| answer.map(|a| *a)) {
            Ok(Ok(ReadyAnswer::Released { at_unix_ns })) => Ok(at_unix_ns),
            _ => Err(timed_out),
        }
    }
}

async fn ready_handler(State(state): State<watch::Sender<ReadyAnswer>>) -> impl IntoResponse {
    let answer = *state.borrow();
    let status = match answer {
        ReadyAnswer::Preparing => StatusCode::SERVICE_UNAVAILABLE,
        ReadyAnswer::Waiting | ReadyAnswer::Released { .. } => StatusCode::OK,
    };
    (status, Json(answer))
}

async fn release_handler(
    State(state): State<watch::Sender<ReadyAnswer>>,
    Json(request): Json<ReleaseRequest>,
) -> impl IntoResponse {
    let mut accepted = false;
    state.send_if_modified(|current| {
        let (next, changed) = accept(*current, request);
        *current = next;
        accepted = changed;
        changed
    });
    if accepted {
        tracing::info!(at_unix_ns = request.at_unix_ns, "released");
    }
    let status = if accepted {
        StatusCode::ACCEPTED
    } else {
        StatusCode::OK
    };
    (status, Json(*state.borrow()))
}

/// Prepared: serves `waiting` on `addr` until released (or `timeout`, or SIGTERM / SIGINT), then sleeps until the
/// released instant. Returns the server (keep it until the run ends, so the instant can be read back) and the
/// release as run.json records it.
pub(crate) async fn wait_for_release(
    addr: SocketAddr,
    timeout: Duration,
) -> Result<(ReleaseServer, llmbench_report::report::ReleaseMeta), ReleaseError> {
    use tokio::signal::unix::{SignalKind, signal};
    let server = ReleaseServer::start(addr).await?;
    let mut term = signal(SignalKind::terminate()).map_err(ReleaseError::Signals)?;
    let mut int = signal(SignalKind::interrupt()).map_err(ReleaseError::Signals)?;
    server.ready();
    let ready_unix_ns = llmbench_model::wallclock::unix_ns_now();
    let at_unix_ns = tokio::select! {
        at = server.released(timeout) => at?,
        _ = term.recv() => return Err(ReleaseError::Interrupted { signal: "SIGTERM" }),
        _ = int.recv() => return Err(ReleaseError::Interrupted { signal: "SIGINT" }),
    };
    sleep_until_unix(at_unix_ns).await;
    Ok((
        server,
        llmbench_report::report::ReleaseMeta {
            ready_unix_ns,
            at_unix_ns,
        },
    ))
}

/// Sleeps until the wall-clock instant `at_unix_ns` on the monotonic clock, with the engine's precise timer. The
/// wall clock is read once, here, so a clock step during the wait does not move the start.
pub(crate) async fn sleep_until_unix(at_unix_ns: u64) {
    let now_unix = llmbench_model::wallclock::unix_ns_now();
    let ahead = Duration::from_nanos(at_unix_ns.saturating_sub(now_unix));
    llmbench_model::timer::sleep_until(Instant::now() + ahead).await;
}

/// A listen address `HOST:PORT` where HOST may be an IPv6 address without brackets, as Kubernetes substitutes a
/// pod's IP into `$(POD_IP):9465`.
pub(crate) fn parse_listen_addr(text: &str) -> Result<SocketAddr, String> {
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Ok(addr);
    }
    let bad =
        || format!("{text:?} is not an address HOST:PORT (e.g. 0.0.0.0:9465 or fd00::5:9465)");
    let (host, port) = text.rsplit_once(':').ok_or_else(bad)?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let ip: std::net::IpAddr = host.parse().map_err(|_| bad())?;
    let port: u16 = port.parse().map_err(|_| bad())?;
    Ok(SocketAddr::new(ip, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_release_wins_and_later_ones_change_nothing() {
        let first = ReleaseRequest { at_unix_ns: 10 };
        let (state, changed) = accept(ReadyAnswer::Waiting, first);
        assert_eq!(state, ReadyAnswer::Released { at_unix_ns: 10 });
        assert!(changed);
        let (state, changed) = accept(state, ReleaseRequest { at_unix_ns: 99 });
        assert_eq!(state, ReadyAnswer::Released { at_unix_ns: 10 });
        assert!(!changed);
        // A release before the launcher is ready is kept: it starts at the instant once prepared, or at once.
        let (state, _) = accept(ReadyAnswer::Preparing, first);
        assert_eq!(state, ReadyAnswer::Released { at_unix_ns: 10 });
    }

    #[test]
    fn listen_addresses_take_bare_ipv6_hosts_as_kubernetes_substitutes_them() {
        assert_eq!(
            parse_listen_addr("127.0.1.7:9465").unwrap(),
            "127.0.1.7:9465".parse::<SocketAddr>().unwrap()
        );
        assert_eq!(
            parse_listen_addr("fd00::5:9465").unwrap(),
            "[fd00::5]:9465".parse::<SocketAddr>().unwrap()
        );
        assert_eq!(
            parse_listen_addr("[::]:0").unwrap(),
            "[::]:0".parse::<SocketAddr>().unwrap()
        );
        for bad in ["9465", "localhost:9465", "1.2.3.4:port", ""] {
            assert!(parse_listen_addr(bad).is_err(), "{bad}");
        }
    }

    #[tokio::test]
    async fn a_launcher_is_preparing_then_waiting_then_released_at_the_posted_instant() {
        let server = ReleaseServer::start("127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        let base = format!("http://{}", server.local_addr());
        let client = reqwest::Client::new();
        let ready = client
            .get(format!("{base}{READY_PATH}"))
            .send()
            .await
            .unwrap();
        assert_eq!(ready.status(), 503);
        assert_eq!(
            ready.json::<ReadyAnswer>().await.unwrap(),
            ReadyAnswer::Preparing
        );
        server.ready();
        let ready = client
            .get(format!("{base}{READY_PATH}"))
            .send()
            .await
            .unwrap();
        assert_eq!(ready.status(), 200);
        assert_eq!(
            ready.json::<ReadyAnswer>().await.unwrap(),
            ReadyAnswer::Waiting
        );
        let waiting = server.released(Duration::from_secs(10));
        let post = async {
            let answer = client
                .post(format!("{base}{RELEASE_PATH}"))
                .json(&ReleaseRequest { at_unix_ns: 42 })
                .send()
                .await
                .unwrap();
            assert_eq!(answer.status(), 202);
            // A second release (an operator that restarted) gets the first instant back.
            let again = client
                .post(format!("{base}{RELEASE_PATH}"))
                .json(&ReleaseRequest { at_unix_ns: 43 })
                .send()
                .await
                .unwrap();
            assert_eq!(again.status(), 200);
            again.json::<ReadyAnswer>().await.unwrap()
        };
        let (at, answer) = tokio::join!(waiting, post);
        assert_eq!(at.unwrap(), 42);
        assert_eq!(answer, ReadyAnswer::Released { at_unix_ns: 42 });
    }

    #[tokio::test]
    async fn no_release_within_the_timeout_is_an_error_naming_the_address() {
        let server = ReleaseServer::start("127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        server.ready();
        let error = server
            .released(Duration::from_millis(50))
            .await
            .unwrap_err();
        let message = error.to_string();
        assert!(
            message.contains(&server.local_addr().to_string()),
            "{message}"
        );
        assert!(message.contains("--release-timeout"), "{message}");
    }

    #[tokio::test]
    async fn sleeping_until_an_instant_past_returns_at_once() {
        // An instant in 1970: no wait at all (a wrong sign would sleep for decades and trip the bound).
        let slept = tokio::time::timeout(Duration::from_secs(60), sleep_until_unix(1)).await;
        assert!(slept.is_ok());
    }
}
