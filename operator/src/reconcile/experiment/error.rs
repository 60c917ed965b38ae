//! Why reconciling a BenchmarkExperiment failed, naming the action and the object, and the short reason that
//! events and metrics use.

use kube::runtime::finalizer::{self};

use crate::builders::BuildError;
use crate::reconcile::{Reason, own_error};

/// Why reconciling a BenchmarkExperiment failed; each names the action and the object.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("BenchmarkExperiment {experiment} has no namespace")]
    MissingNamespace { experiment: String },
    #[error("failed to read BenchmarkExperiment {experiment}: {source}")]
    GetExperiment {
        experiment: String,
        source: kube::Error,
    },
    #[error("failed to list the BenchmarkRuns of BenchmarkExperiment {experiment}: {source}")]
    ListRuns {
        experiment: String,
        source: kube::Error,
    },
    #[error("failed to read WorkloadProfile {name} for BenchmarkExperiment {experiment}: {source}")]
    GetProfile {
        experiment: String,
        name: String,
        source: kube::Error,
    },
    #[error("failed to create BenchmarkRun {run} of BenchmarkExperiment {experiment}: {source}")]
    CreateRun {
        experiment: String,
        run: String,
        source: kube::Error,
    },
    #[error(
        "BenchmarkRun {run} exists and does not belong to BenchmarkExperiment {experiment}; delete it or rename \
         the experiment"
    )]
    RunNameTaken { experiment: String, run: String },
    #[error(
        "{what} {namespace}/{name} exists and is not owned by BenchmarkExperiment {experiment}; delete or rename \
         it, or rename the experiment"
    )]
    NotOwned {
        experiment: String,
        what: &'static str,
        namespace: String,
        name: String,
    },
    #[error("failed to apply plan ConfigMap {name} of BenchmarkExperiment {experiment}: {source}")]
    ApplyPlan {
        experiment: String,
        name: String,
        source: kube::Error,
    },
    #[error(
        "failed to read or create collector pod {name} of BenchmarkExperiment {experiment}: {source}"
    )]
    Collector {
        experiment: String,
        name: String,
        source: kube::Error,
    },
    #[error("failed to delete {what} {name} of BenchmarkExperiment {experiment}: {source}")]
    Delete {
        experiment: String,
        what: &'static str,
        name: String,
        source: kube::Error,
    },
    #[error("failed to write the status of BenchmarkExperiment {experiment}: {source}")]
    PatchStatus {
        experiment: String,
        source: kube::Error,
    },
    #[error(
        "failed to delete BenchmarkExperiment {experiment} after its ttlSecondsAfterFinished: {source}"
    )]
    DeleteExperiment {
        experiment: String,
        source: kube::Error,
    },
    #[error("cannot build the objects of BenchmarkExperiment: {0}")]
    Build(#[from] BuildError),
    #[error("BenchmarkExperiment finalizer: {0}")]
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
            Error::GetExperiment { .. } => "GetExperimentFailed",
            Error::ListRuns { .. } => "ListRunsFailed",
            Error::GetProfile { .. } => "GetProfileFailed",
            Error::CreateRun { .. } => "CreateRunFailed",
            Error::RunNameTaken { .. } => "RunNameTaken",
            Error::NotOwned { .. } => "ObjectNotOwned",
            Error::ApplyPlan { .. } => "ApplyPlanFailed",
            Error::Collector { .. } => "CollectorFailed",
            Error::Delete { .. } => "DeleteFailed",
            Error::PatchStatus { .. } => "PatchStatusFailed",
            Error::DeleteExperiment { .. } => "DeleteExperimentFailed",
            Error::Build(_) => "BuildFailed",
            Error::Finalizer(inner) => own_error(inner).map_or("FinalizerFailed", Reason::reason),
        }
    }
}
