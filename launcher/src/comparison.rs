//! Runs and experiments side by side, as `llmbench plot DIR…` draws them: `plot::compare` with each experiment's
//! treatment table and the experiment module's reading of `experiment.json`. One entry point, so the dashboard's
//! comparison is the plot command's, figure for figure.

use std::path::{Path, PathBuf};

use llmbench_report::plot::{self, ExperimentRuns, PlotError, TreatmentTable};

/// Why a comparison could not be drawn.
#[derive(Debug, thiserror::Error)]
pub enum ComparisonError {
    #[cfg(feature = "experiment")]
    #[error("cannot build the treatment table of the experiment in {dir}: {source}")]
    TreatmentTable {
        dir: PathBuf,
        source: Box<crate::experiment::ExperimentError>,
    },
    #[error(transparent)]
    Plot(#[from] PlotError),
}

/// Draws the comparison of `dirs` (run directories and experiment directories) into `out`: the pictures and
/// `compare.html`, which is the last of the files returned.
pub fn compare(dirs: &[PathBuf], out: &Path) -> Result<Vec<PathBuf>, ComparisonError> {
    let tables = treatment_tables(dirs)?;
    Ok(plot::compare(dirs, out, &tables, &read_experiment)?)
}

/// The treatment table of each experiment directory among `dirs`, for the top of compare.html.
#[cfg(feature = "experiment")]
fn treatment_tables(dirs: &[PathBuf]) -> Result<Vec<TreatmentTable>, ComparisonError> {
    dirs.iter()
        .filter(|dir| dir.join(plot::EXPERIMENT_FILE).is_file())
        .map(|dir| {
            crate::experiment::compare::treatment_table_of(dir).map_err(|source| {
                ComparisonError::TreatmentTable {
                    dir: dir.clone(),
                    source: Box::new(source),
                }
            })
        })
        .collect()
}

/// Without the `experiment` feature no experiment directory can be read (`plot::compare` says so).
#[cfg(not(feature = "experiment"))]
fn treatment_tables(_dirs: &[PathBuf]) -> Result<Vec<TreatmentTable>, ComparisonError> {
    Ok(Vec::new())
}

/// An experiment directory's treatments and runs, for the comparison's pictures.
#[cfg(feature = "experiment")]
fn read_experiment(dir: &Path) -> Result<ExperimentRuns, PlotError> {
    crate::experiment::plotted::plotted_runs(dir)
}

/// Without the `experiment` feature no experiment directory can be read: `plot::compare` says so.
#[cfg(not(feature = "experiment"))]
fn read_experiment(dir: &Path) -> Result<ExperimentRuns, PlotError> {
    Err(PlotError::ExperimentUnsupported {
        dir: dir.to_owned(),
    })
}
