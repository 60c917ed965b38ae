//! Why reconciling a BenchmarkRun failed, naming the action and the object, and the short reason that conditions,
//! events and metrics use.

use kube::runtime::finalizer::{self};

use crate::builders::BuildError;
use crate::reconcile::{Reason, own_error};

/// Why reconciling a BenchmarkRun failed; each names the action and the object.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("BenchmarkRun {run} has no namespace")]
    MissingNamespace { run: String },
    #[error("failed to read BenchmarkRun {run}: {source}")]
    GetRun { run: String, source: kube::Error },
    #[error("failed to list the launcher pods of BenchmarkRun {run}: {source}")]
    ListPods { run: String, source: kube::Error },
    #[error("failed to read WorkloadProfile {name} for BenchmarkRun {run}: {source}")]
    GetProfile {
        run: String,
        name: String,
        source: kube::Error,
    },
    #[error("failed to apply profile ConfigMap {name} for BenchmarkRun {run}: {source}")]
    ApplyConfigMap {
        run: String,
        name: String,
        source: kube::Error,
    },
    #[error(
        "ConfigMap {namespace}/{name} exists and is not owned by BenchmarkRun {run}; delete or rename it, or \
         rename the run"
    )]
    ConfigMapNotOwned {
        run: String,
        namespace: String,
        name: String,
    },
    #[error("failed to ensure workload PVC {name} for BenchmarkRun {run}: {source}")]
    EnsurePvc {
        run: String,
        name: String,
        source: kube::Error,
    },
    #[error("failed to create launcher pod {name} for BenchmarkRun {run}: {source}")]
    CreatePod {
        run: String,
        name: String,
        source: kube::Error,
    },
    #[error(
        "pod {namespace}/{name} exists and is not owned by BenchmarkRun {run}; delete it (an earlier run's pod \
         may still be terminating), or rename the run"
    )]
    PodNotOwned {
        run: String,
        namespace: String,
        name: String,
    },
    #[error("failed to delete launcher pod {name} of BenchmarkRun {run}: {source}")]
    DeletePod {
        run: String,
        name: String,
        source: kube::Error,
    },
    #[error("failed to delete profile ConfigMap {name} of BenchmarkRun {run}: {source}")]
    DeleteConfigMap {
        run: String,
        name: String,
        source: kube::Error,
    },
    /// `object` is the kind and the name, e.g. `Deployment bench-1-stack`.
    #[error("failed to ensure the standalone stack's {object} for BenchmarkRun {run}: {source}")]
    EnsureStack {
        run: String,
        object: String,
        source: kube::Error,
    },
    #[error(
        "{kind} {namespace}/{name} exists and is not owned by BenchmarkRun {run}; delete or rename it, or rename \
         the run"
    )]
    StackNotOwned {
        run: String,
        kind: &'static str,
        namespace: String,
        name: String,
    },
    #[error("failed to read the standalone stack of BenchmarkRun {run}: {source}")]
    ReadStack { run: String, source: kube::Error },
    #[error("failed to delete the standalone stack's {object} of BenchmarkRun {run}: {source}")]
    DeleteStack {
        run: String,
        object: String,
        source: kube::Error,
    },
    #[error("failed to write the status of BenchmarkRun {run}: {source}")]
    PatchStatus { run: String, source: kube::Error },
    #[error("failed to delete BenchmarkRun {run} after its ttlSecondsAfterFinished: {source}")]
    DeleteRun { run: String, source: kube::Error },
    #[error("cannot build the objects of BenchmarkRun: {0}")]
    Build(#[from] BuildError),
    #[error("BenchmarkRun finalizer: {0}")]
    Finalizer(#[source] Box<finalizer::Error<Error>>),
}

impl Error {
    /// The error itself, out of the finalizer's wrapping: what a condition or an event should say.
    pub fn cause(&self) -> &Error {
        match self {
            Error::Finalizer(inner) => own_error(inner).map_or(self, Error::cause),
            other => other,
        }
    }
}

impl Reason for Error {
    fn reason(&self) -> &'static str {
        match self {
            Error::MissingNamespace { .. } => "MissingNamespace",
            Error::GetRun { .. } => "GetRunFailed",
            Error::ListPods { .. } => "ListPodsFailed",
            Error::GetProfile { .. } => "GetProfileFailed",
            Error::ApplyConfigMap { .. } => "ApplyConfigMapFailed",
            Error::ConfigMapNotOwned { .. } => "ConfigMapNotOwned",
            Error::EnsurePvc { .. } => "EnsurePvcFailed",
            Error::CreatePod { .. } => "CreatePodFailed",
            Error::PodNotOwned { .. } => "PodNotOwned",
            Error::DeletePod { .. } => "DeletePodFailed",
            Error::DeleteConfigMap { .. } => "DeleteConfigMapFailed",
            Error::EnsureStack { .. } => "EnsureStackFailed",
            Error::StackNotOwned { .. } => "StackNotOwned",
            Error::ReadStack { .. } => "ReadStackFailed",
            Error::DeleteStack { .. } => "DeleteStackFailed",
            Error::PatchStatus { .. } => "PatchStatusFailed",
            Error::DeleteRun { .. } => "DeleteRunFailed",
            Error::Build(_) => "BuildFailed",
            Error::Finalizer(inner) => own_error(inner).map_or("FinalizerFailed", Reason::reason),
        }
    }
}
