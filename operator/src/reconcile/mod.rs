//! The controllers: thin shells that read the cluster, call the pure builders and status functions, and write
//! back with server-side apply under one field manager. Nothing is remembered between reconciles.

pub mod profile;
pub mod run;

use std::sync::Arc;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, EventType, Recorder};

use crate::builders::LauncherSettings;
use crate::metrics::Metrics;

/// What every reconcile needs, shared as `Arc`.
pub struct Context {
    pub client: Client,
    pub recorder: Recorder,
    pub metrics: Metrics,
    pub launcher: LauncherSettings,
}

impl Context {
    /// Publishes an event about `object`. A failure is logged, never fatal: events are for humans.
    pub async fn publish(
        &self,
        object: &ObjectReference,
        type_: EventType,
        reason: &str,
        action: &str,
        note: &str,
    ) {
        // The events API bounds a note to 1 KiB.
        let mut note = note.to_owned();
        if note.len() > 1000 {
            let mut cut = 1000;
            while !note.is_char_boundary(cut) {
                cut -= 1;
            }
            note.truncate(cut);
            note.push('…');
        }
        let event = Event {
            type_,
            reason: reason.to_owned(),
            note: Some(note),
            action: action.to_owned(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&event, object).await {
            tracing::warn!(
                reason,
                object = object.name.as_deref().unwrap_or_default(),
                error = %e,
                "cannot publish event"
            );
        }
    }
}

/// The shared context type.
pub type Ctx = Arc<Context>;

/// Whether `e` is the API's 404.
pub(crate) fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.is_not_found())
}

/// Whether `e` is the API's 409 AlreadyExists.
pub(crate) fn is_already_exists(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.is_already_exists())
}
