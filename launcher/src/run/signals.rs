//! SIGTERM and SIGINT during a run: stop issuing, give the requests in flight a grace period, then cancel them.

use std::time::Duration;

use llmbench_engine::engine::{Control, Signal, StopReason};

use super::RunError;

/// Turns SIGTERM and SIGINT into a stop: the first stops issuing and gives requests in flight `grace`, a second
/// cancels them at once. The handlers live until the returned task is aborted.
pub(super) fn watch_signals(
    control: &Control,
    grace: Duration,
) -> Result<tokio::task::JoinHandle<()>, RunError> {
    use tokio::signal::unix::{SignalKind, signal};
    let listen = |kind: SignalKind, name: Signal| {
        signal(kind).map_err(|source| RunError::Signals {
            signal: name,
            source,
        })
    };
    let mut term = listen(SignalKind::terminate(), Signal::Sigterm)?;
    let mut int = listen(SignalKind::interrupt(), Signal::Sigint)?;
    let control = control.clone();
    Ok(tokio::spawn(async move {
        let mut first = true;
        loop {
            let signal = tokio::select! {
                Some(()) = term.recv() => Signal::Sigterm,
                Some(()) = int.recv() => Signal::Sigint,
                else => return,
            };
            let reason = StopReason::Interrupted { signal };
            if first {
                tracing::warn!(
                    %signal,
                    grace = %humantime::format_duration(grace),
                    "stopping: no new requests; requests in flight may finish within the grace period"
                );
                control.stop_after(reason, grace);
                first = false;
            } else {
                tracing::warn!(%signal, "stopping now: cancelling the requests in flight");
                control.stop_now(reason);
            }
        }
    }))
}
