//! Pictures of a run and comparisons of runs: PNG and SVG plots and a self-contained `report.html`.
//!
//! - [`write_run_plots`]: reads a run directory and writes `plots/<name>.{png,svg}` and `report.html` into it.
//! - [`compare()`]: several run or experiment directories side by side, into one output directory with
//!   `compare.html` (what `llmbench plot DIR…` does).
//!
//! Underneath, the pictures are data ([`figure::Figure`]) built by pure functions from a run's records and
//! summary ([`run`], [`compare`](mod@compare)), drawn by one renderer ([`figure::render_svg`],
//! [`figure::render_png`], whose PNG text `text` draws with the embedded font); [`math`] holds the binning, CDF
//! and sampling arithmetic, [`html`] the pages. Only the two entry points here touch files.
//!
//! Figures per run: `ttft_distribution`, `tpot_distribution`, `itl_distribution`, `e2e_distribution`
//! (histogram and CDF), `latency_over_time`, `throughput_over_time`, `schedule_delay`, `server_metrics` (when
//! server series are given), and for runs of several stages `stages`, `throughput_vs_latency` and `pareto`.
//! Comparison figures: `latency_cdf`, `throughput_vs_latency`, `pareto`.
//!
//! Bounded: each distribution keeps at most [`math::MAX_SAMPLE`] values (a uniform sample beyond), each scatter
//! at most [`math::MAX_SCATTER`] points, each timeline at most [`math::MAX_TIME_BINS`] bins. The records are read
//! whole, as `llmbench report` reads them (the guidellm warm-up and cool-down rules need a stage's records
//! together), then reduced to a few numbers per request and dropped before anything is drawn.

pub mod compare;
pub mod figure;
pub mod html;
pub mod math;
pub mod run;
mod text;
pub mod varied;

use std::path::{Path, PathBuf};

use serde_json::Value;

use std::collections::BTreeMap;

use crate::report::{PROFILE_FILE, RUN_META_FILE, ReportError, RunMeta, SUMMARY_FILE};
use llmbench_metrics::metrics::{RunState, RunSummary};
use llmbench_metrics::server_metrics::ServerSeries;
use llmbench_model::record::{ReadRecordsError, RequestRecord};
use llmbench_model::record_file::RunRecords;

use self::compare::{ComparedRun, Entry, compare_figures, unique_labels};
use self::figure::{Figure, colour, render_png, render_svg};
pub use self::html::TreatmentTable;
use self::html::{CompareEntry, PageFigure, RunPage, compare_page, run_page};
use self::run::{Distributions, RunData, RunLabel, run_figures};

/// The pictures' directory inside a run directory.
pub const PLOTS_DIR: &str = "plots";
/// The run's page, beside its `plots/`.
pub(crate) const REPORT_HTML: &str = "report.html";
/// The comparison's page.
pub(crate) const COMPARE_HTML: &str = "compare.html";
/// The file an experiment directory is recognised by (the experiment module writes and reads it; without the
/// `experiment` feature a directory with it is still recognised, to say why it cannot be read).
pub const EXPERIMENT_FILE: &str = llmbench_core::experiment::v1::FILE;

/// Drawing or writing pictures failed. Each variant names the file or directory it is about.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    #[error("cannot read the run in {dir}: {source}")]
    ReadRun { dir: PathBuf, source: ReportError },
    #[error("cannot read {path}: {source}")]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot read the request records {path}: {source}")]
    Records {
        path: PathBuf,
        source: ReadRecordsError,
    },
    #[error("cannot read the experiment in {dir}: {source}")]
    Experiment {
        dir: PathBuf,
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error(
        "{dir} is an experiment directory, and this llmbench was built without the `experiment` feature"
    )]
    ExperimentUnsupported { dir: PathBuf },
    #[error(
        "{dir} is neither a run directory (with {RUN_META_FILE}) nor an experiment directory (with {EXPERIMENT_FILE})"
    )]
    NotResults { dir: PathBuf },
    #[error("the experiment in {dir} has no succeeded run to plot")]
    NoRuns { dir: PathBuf },
    #[error("nothing to compare: give at least one run or experiment directory")]
    NoInputs,
    #[error("the embedded plot font (DejaVu Sans) could not be loaded")]
    Font,
    #[error("cannot draw the plot {figure}: {message}")]
    Draw { figure: String, message: String },
    #[error("cannot encode the plot {figure} as PNG: {message}")]
    EncodePng { figure: String, message: String },
    #[error("cannot create {path}: {source}")]
    CreateDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// A run directory read for pictures: its metadata, summary, figures' data, and what was odd about its files.
struct LoadedRun {
    meta: RunMeta,
    summary: RunSummary,
    /// `summary.json` as JSON, for the sections other modules add (`server_metrics`).
    summary_json: Option<Value>,
    data: RunData,
    warnings: Vec<String>,
}

/// Reads `run.json`, `requests.jsonl` (a torn last line skipped) and `summary.json` (recomputed from the records
/// when missing or unreadable). Only the measured records count. With `timeline`, keeps every request's times for
/// the over-time pictures; otherwise only the distributions. The records themselves are dropped before returning.
fn load_run(dir: &Path, timeline: bool) -> Result<LoadedRun, PlotError> {
    let meta = RunMeta::read(dir).map_err(|source| PlotError::ReadRun {
        dir: dir.to_owned(),
        source,
    })?;
    let records_file = RunRecords::in_dir(dir);
    let (records, truncated) = records_file.read_all().map_err(|source| match source {
        ReadRecordsError::Io(source) => PlotError::Open {
            path: records_file.path.clone(),
            source,
        },
        source => PlotError::Records {
            path: records_file.path.clone(),
            source,
        },
    })?;
    let mut warnings = Vec::new();
    if truncated > 0 {
        warnings.push(format!(
            "{} ends in a torn record (the launcher was killed while writing it); it was skipped",
            records_file
                .path
                .file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
        ));
    }
    let (summary, summary_json) = match read_summary(dir) {
        Ok((summary, json)) => (summary, Some(json)),
        Err(why) => {
            warnings.push(format!(
                "{why}; the figures were recomputed from the records"
            ));
            (crate::report::summarize_run(&meta, &records), None)
        }
    };
    Ok(loaded(
        dir,
        meta,
        &records,
        summary,
        summary_json,
        timeline,
        warnings,
    ))
}

/// A run's figures from its records in memory (the records are not kept), with the warnings a reader of the
/// pictures needs: how the run ended and what went wrong scraping the server.
fn loaded(
    dir: &Path,
    meta: RunMeta,
    records: &[RequestRecord],
    summary: RunSummary,
    summary_json: Option<Value>,
    timeline: bool,
    warnings: Vec<String>,
) -> LoadedRun {
    let data = {
        let measured = crate::report::measured(&meta, records);
        if timeline {
            RunData::from_records(&meta, &measured.records)
        } else {
            let mut distributions = Distributions::default();
            measured.records.iter().for_each(|r| distributions.add(r));
            RunData {
                distributions,
                ..RunData::default()
            }
        }
    };
    with_warnings(
        dir,
        LoadedRun {
            meta,
            summary,
            summary_json,
            data,
            warnings,
        },
    )
}

/// `run` with the warnings a reader of its pictures needs: how the run ended and what went wrong scraping the
/// server.
fn with_warnings(dir: &Path, run: LoadedRun) -> LoadedRun {
    let LoadedRun {
        meta,
        summary,
        summary_json,
        data,
        mut warnings,
    } = run;
    if let Some(run) = &summary.run {
        warnings.push(match run.state {
            RunState::Incomplete => format!(
                "the run's {RUN_META_FILE} has no end: {}",
                crate::report::killed_run(run, summary.overall.requests.lost_in_flight)
            ),
            state => format!(
                "the run did not end as planned ({}{}): {} requests recorded{}",
                serde_json::to_value(state)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default(),
                run.stopped.map(|s| format!(", {s}")).unwrap_or_default(),
                summary.overall.requests.total,
                crate::report::unrecorded(summary.overall.requests.lost_in_flight)
            ),
        });
    }
    for warning in scrape_warnings(dir, summary_json.as_ref()) {
        if !warnings.contains(&warning) {
            warnings.push(warning);
        }
    }
    LoadedRun {
        meta,
        summary,
        summary_json,
        data,
        warnings,
    }
}

/// `summary.json`, typed and as JSON.
fn read_summary(dir: &Path) -> Result<(RunSummary, Value), String> {
    let path = dir.join(SUMMARY_FILE);
    let text =
        std::fs::read_to_string(&path).map_err(|e| format!("cannot read {SUMMARY_FILE}: {e}"))?;
    let json: Value =
        serde_json::from_str(&text).map_err(|e| format!("cannot parse {SUMMARY_FILE}: {e}"))?;
    let summary = serde_json::from_value(json.clone())
        .map_err(|e| format!("cannot parse {SUMMARY_FILE}: {e}"))?;
    Ok((summary, json))
}

/// The server-metrics scrape's warnings, as `run.json` (`server_metrics.warnings`) and `summary.json`
/// (`server_metrics.targets[].warnings`) record them, read as JSON so this module needs none of the scraper's
/// types. Each once.
fn scrape_warnings(dir: &Path, summary: Option<&Value>) -> Vec<String> {
    let run: Option<Value> = std::fs::read_to_string(dir.join(RUN_META_FILE))
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok());
    let strings = |v: Option<&Value>| -> Vec<String> {
        v.and_then(Value::as_array)
            .map(|items| {
                items
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut out: Vec<String> = Vec::new();
    let mut add = |w: String| {
        let w = format!("server metrics: {w}");
        if !out.contains(&w) {
            out.push(w);
        }
    };
    strings(
        run.as_ref()
            .and_then(|r| r.pointer("/server_metrics/warnings")),
    )
    .into_iter()
    .for_each(&mut add);
    if let Some(Value::Array(targets)) = summary.and_then(|s| s.pointer("/server_metrics/targets"))
    {
        for target in targets {
            let url = target
                .get("url")
                .and_then(Value::as_str)
                .unwrap_or("a target");
            strings(target.get("warnings"))
                .into_iter()
                .for_each(|w| add(format!("{url}: {w}")));
        }
    }
    out
}

/// A figure drawn: its SVG text and the files written.
struct Drawn {
    figure: Figure,
    svg: String,
    files: Vec<PathBuf>,
}

/// Renders each figure as SVG and PNG into `dir`, two figures at a time (the PNG rasterising dominates, and
/// figures are independent).
fn draw_all(figures: Vec<Figure>, dir: &Path) -> Result<Vec<Drawn>, PlotError> {
    let draw = |figure: Figure| -> Result<Drawn, PlotError> {
        let svg = render_svg(&figure)?;
        let png = render_png(&figure)?;
        let svg_path = dir.join(format!("{}.svg", figure.name));
        let png_path = dir.join(format!("{}.png", figure.name));
        write(&svg_path, svg.as_bytes())?;
        write(&png_path, &png)?;
        Ok(Drawn {
            figure,
            svg,
            files: vec![png_path, svg_path],
        })
    };
    let threads = std::thread::available_parallelism()
        .map(usize::from)
        .unwrap_or(1)
        .clamp(1, 4);
    let mut slots: Vec<Option<Result<Drawn, PlotError>>> = Vec::new();
    let mut queue: Vec<(usize, Figure)> = figures.into_iter().enumerate().collect();
    slots.resize_with(queue.len(), || None);
    while !queue.is_empty() {
        let batch: Vec<(usize, Figure)> = queue.drain(..threads.min(queue.len())).collect();
        let results: Vec<(usize, Result<Drawn, PlotError>)> = std::thread::scope(|scope| {
            let handles: Vec<_> = batch
                .into_iter()
                .map(|(i, figure)| (i, scope.spawn(move || draw(figure))))
                .collect();
            handles
                .into_iter()
                .map(|(i, handle)| {
                    let result = handle.join().unwrap_or_else(|_| {
                        Err(PlotError::Draw {
                            figure: format!("#{i}"),
                            message: "the drawing thread panicked".into(),
                        })
                    });
                    (i, result)
                })
                .collect()
        });
        for (i, result) in results {
            slots[i] = Some(result);
        }
    }
    slots.into_iter().flatten().collect()
}

/// A picture or a page, whole or not at all: a browser or the dashboard never shows half of one.
fn write(path: &Path, bytes: &[u8]) -> Result<(), PlotError> {
    llmbench_metrics::metrics::write_whole(path, bytes).map_err(|source| PlotError::Write {
        path: path.to_owned(),
        source,
    })
}

fn create_dir(path: &Path) -> Result<(), PlotError> {
    std::fs::create_dir_all(path).map_err(|source| PlotError::CreateDir {
        path: path.to_owned(),
        source,
    })
}

/// Removes the PNG and SVG files a previous drawing left in `dir` (ours: a figure that no longer applies,
/// e.g. server metrics of a run re-reported without them, must not linger).
fn clear_pictures(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "png" || e == "svg") {
            // A file that cannot be removed is overwritten below or left; neither is worth failing for.
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// Draws a run's pictures from its directory: `plots/<figure>.png` and `.svg` (see the module documentation for
/// the list), and `report.html` beside them. `server` are the server metrics to draw on the run's timeline
/// (empty for none). Returns every file written, `report.html` last.
pub fn write_run_plots(dir: &Path, server: &[ServerSeries]) -> Result<Vec<PathBuf>, PlotError> {
    draw_run(dir, load_run(dir, true)?, server)
}

/// [`write_run_plots`] for a run that has just ended, from the records and summary it holds in memory, so the
/// pictures do not read `requests.jsonl` a second time (and do not double the launcher's memory at its end).
pub fn write_run_plots_of(
    dir: &Path,
    meta: &RunMeta,
    records: &[RequestRecord],
    summary: &RunSummary,
    server: &[ServerSeries],
) -> Result<Vec<PathBuf>, PlotError> {
    let summary_json = serde_json::to_value(summary).ok();
    let run = loaded(
        dir,
        meta.clone(),
        records,
        summary.clone(),
        summary_json,
        true,
        Vec::new(),
    );
    draw_run(dir, run, server)
}

/// The run's pictures and `report.html` (see [`write_run_plots_of`]) from the records and summary in memory, with the
/// server metrics' series when it scraped any. A picture that cannot be drawn is a warning: the numbers are all in
/// the files already written.
pub fn write_pictures(dir: &Path, meta: &RunMeta, records: &[RequestRecord], summary: &RunSummary) {
    let server = crate::report::server_series(dir);
    match write_run_plots_of(dir, meta, records, summary, &server) {
        Ok(files) => tracing::debug!(count = files.len(), "pictures written"),
        Err(e) => {
            tracing::warn!(dir = %dir.display(), error = %e, "cannot draw the run's pictures")
        }
    }
}

/// The run's pictures and `report.html` from its measured records streamed from `source` (a run summarised from
/// disk): the same pictures as [`write_pictures`] draws from the records in memory, made of the few numbers per
/// request the pictures keep ([`run::Gathered`]): while those fit half of `memory_bytes`, each request's, else a
/// uniform sample of them with the rates over time counted from every request (`run::Sampled`), so a run of any
/// length gets its pictures in bounded memory. A picture that cannot be drawn is a warning.
pub fn write_pictures_streamed(
    dir: &Path,
    meta: &RunMeta,
    source: &dyn crate::report::RecordPasses,
    summary: &RunSummary,
    memory_bytes: u64,
) {
    let mut gathered = run::Gathered::bounded(crate::report::picture_points(memory_bytes));
    let drawn =
        crate::report::for_each_measured(dir, meta, source, memory_bytes, |r| gathered.add(r))
            .map_err(|source| PlotError::ReadRun {
                dir: dir.to_owned(),
                source,
            })
            .and_then(|_| {
                let run = LoadedRun {
                    meta: meta.clone(),
                    summary: summary.clone(),
                    summary_json: serde_json::to_value(summary).ok(),
                    data: gathered.finish(meta),
                    warnings: Vec::new(),
                };
                let run = with_warnings(dir, run);
                draw_run(dir, run, &crate::report::server_series(dir))
            });
    match drawn {
        Ok(files) => tracing::debug!(count = files.len(), "pictures written"),
        Err(e) => {
            tracing::warn!(dir = %dir.display(), error = %e, "cannot draw the run's pictures")
        }
    }
}

/// What draws pictures for `llmbench report` and a finished run: [`write_pictures`] and
/// [`write_pictures_streamed`].
pub struct RunPictures;

impl crate::report::Pictures for RunPictures {
    fn draw(&self, dir: &Path, meta: &RunMeta, records: &[RequestRecord], summary: &RunSummary) {
        write_pictures(dir, meta, records, summary)
    }

    fn draw_streamed(
        &self,
        dir: &Path,
        meta: &RunMeta,
        source: &dyn crate::report::RecordPasses,
        summary: &RunSummary,
        memory_bytes: u64,
    ) {
        write_pictures_streamed(dir, meta, source, summary, memory_bytes)
    }
}

/// Draws a loaded run's pictures into `dir/plots/` and writes `dir/report.html`.
fn draw_run(
    dir: &Path,
    run: LoadedRun,
    server: &[ServerSeries],
) -> Result<Vec<PathBuf>, PlotError> {
    let figures = run_figures(&RunLabel::of(&run.meta), &run.data, &run.summary, server);
    let plots = dir.join(PLOTS_DIR);
    create_dir(&plots)?;
    clear_pictures(&plots);
    let drawn = draw_all(figures, &plots)?;
    let profile = std::fs::read(dir.join(PROFILE_FILE))
        .ok()
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned());
    let page_figures = page_figures(&drawn, dir);
    let html = run_page(&RunPage {
        meta: &run.meta,
        summary: &run.summary,
        figures: page_figures,
        profile: profile.as_deref(),
        server_metrics: run
            .summary_json
            .as_ref()
            .and_then(|j| j.get("server_metrics"))
            .filter(|v| !v.is_null()),
        warnings: run.warnings.clone(),
    });
    let report = dir.join(REPORT_HTML);
    write(&report, html.as_bytes())?;
    let mut files: Vec<PathBuf> = drawn.into_iter().flat_map(|d| d.files).collect();
    files.push(report);
    Ok(files)
}

/// The figures as a page shows them, with their files' paths relative to the page's directory.
fn page_figures<'a>(drawn: &'a [Drawn], page_dir: &Path) -> Vec<PageFigure<'a>> {
    drawn
        .iter()
        .map(|d| PageFigure {
            title: &d.figure.title,
            svg: &d.svg,
            files: d
                .files
                .iter()
                .map(|f| {
                    f.strip_prefix(page_dir)
                        .unwrap_or(f)
                        .to_string_lossy()
                        .into_owned()
                })
                .collect(),
        })
        .collect()
}

/// Compares runs side by side: each run directory is one series (legend: its run id), each experiment directory
/// (with `experiment.json`) one series per treatment, from its succeeded runs. Writes, into `out`, an
/// experiment's figures against each factor it varied (`by_<factor>`), then `latency_cdf`,
/// `throughput_vs_latency` and `pareto`, as PNG and SVG, and `compare.html`, which opens with `tables` (each
/// experiment's treatment table, as the experiment's comparison builds it); returns the files, `compare.html`
/// last. `read_experiment` reads an experiment directory's treatments and runs: `experiment.json` is the
/// experiment module's to read, and this one's to draw.
pub fn compare(
    dirs: &[PathBuf],
    out: &Path,
    tables: &[TreatmentTable],
    read_experiment: ReadExperiment<'_>,
) -> Result<Vec<PathBuf>, PlotError> {
    if dirs.is_empty() {
        return Err(PlotError::NoInputs);
    }
    let mut entries = Vec::new();
    let mut warnings = Vec::new();
    // What each experiment varied comes first: its figures against each factor's levels.
    let mut figures = Vec::new();
    for dir in dirs {
        if dir.join(EXPERIMENT_FILE).is_file() {
            let prefix = (dirs.len() > 1).then(|| {
                dir.file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_else(|| dir.display().to_string())
            });
            let experiment = read_experiment(dir)?;
            let experiment = experiment_entries(dir, experiment, prefix.as_deref(), &mut warnings)?;
            figures.extend(varied::factor_figures(
                &experiment.entries,
                prefix.as_deref(),
                &experiment.subtitle,
                &experiment.slo,
            ));
            entries.extend(experiment.entries);
        } else if dir.join(RUN_META_FILE).is_file() {
            let run = compared_run(dir, dir.display().to_string(), &mut warnings)?;
            entries.push(Entry {
                label: run.meta.run_id.clone(),
                levels: Default::default(),
                runs: vec![run],
            });
        } else {
            return Err(PlotError::NotResults { dir: dir.clone() });
        }
    }
    let mut labels: Vec<String> = entries.iter().map(|e| e.label.clone()).collect();
    unique_labels(&mut labels);
    for (entry, label) in entries.iter_mut().zip(labels) {
        entry.label = label;
    }

    create_dir(out)?;
    figures.extend(compare_figures(&entries));
    let drawn = draw_all(figures, out)?;
    let page_entries: Vec<CompareEntry<'_>> = entries
        .iter()
        .enumerate()
        .map(|(i, e)| CompareEntry {
            label: &e.label,
            colour: colour(i),
            runs: e
                .runs
                .iter()
                .map(|r| (r.dir.clone(), &r.summary, Some(&r.meta)))
                .collect(),
        })
        .collect();
    let html = compare_page(tables, &page_entries, &page_figures(&drawn, out), &warnings);
    let page = out.join(COMPARE_HTML);
    write(&page, html.as_bytes())?;
    let mut files: Vec<PathBuf> = drawn.into_iter().flat_map(|d| d.files).collect();
    files.push(page);
    Ok(files)
}

fn compared_run(
    dir: &Path,
    name: String,
    warnings: &mut Vec<String>,
) -> Result<ComparedRun, PlotError> {
    let run = load_run(dir, false)?;
    warnings.extend(run.warnings.iter().map(|w| format!("{name}: {w}")));
    Ok(ComparedRun {
        dir: name,
        meta: run.meta,
        summary: run.summary,
        distributions: run.data.distributions,
    })
}

/// Reads an experiment directory for [`compare`]: what the experiment module knows of its `experiment.json`.
pub(crate) type ReadExperiment<'a> = &'a dyn Fn(&Path) -> Result<ExperimentRuns, PlotError>;

/// An experiment's treatments, in plan order, with their runs, as [`compare`] draws them.
#[derive(Debug, Clone, PartialEq)]
pub struct ExperimentRuns {
    /// Names the experiment on its pictures.
    pub subtitle: String,
    /// Its SLO's latency bounds, drawn on the pictures against each factor.
    pub slo: varied::LatencyBounds,
    pub treatments: Vec<TreatmentRuns>,
}

/// One treatment of an experiment: its factor levels and its runs.
#[derive(Debug, Clone, PartialEq)]
pub struct TreatmentRuns {
    pub name: String,
    /// Factor or override key → level.
    pub levels: BTreeMap<String, String>,
    pub runs: Vec<ExperimentRun>,
}

/// One run of a treatment: its directory inside the experiment's, and its status (`succeeded`, `failed`, ...).
#[derive(Debug, Clone, PartialEq)]
pub struct ExperimentRun {
    pub dir: PathBuf,
    pub succeeded: bool,
    pub status: &'static str,
}

/// An experiment's treatments as compared series.
struct ExperimentEntries {
    entries: Vec<Entry>,
    /// Names the experiment on its pictures.
    subtitle: String,
    slo: varied::LatencyBounds,
}

/// One entry per treatment of the experiment in `dir` (plan order) with its succeeded runs, and the experiment's
/// subtitle and SLO; treatments without a succeeded run are left out with a warning.
fn experiment_entries(
    dir: &Path,
    experiment: ExperimentRuns,
    prefix: Option<&str>,
    warnings: &mut Vec<String>,
) -> Result<ExperimentEntries, PlotError> {
    let mut entries = Vec::new();
    for treatment in experiment.treatments {
        let mut runs = Vec::new();
        for run in &treatment.runs {
            let run_dir = dir.join(&run.dir);
            let name = run_dir.display().to_string();
            if !run.succeeded {
                warnings.push(format!("{name}: {} run left out", run.status));
                continue;
            }
            runs.push(compared_run(&run_dir, name, warnings)?);
        }
        if runs.is_empty() {
            warnings.push(format!(
                "treatment {} of {} has no succeeded run",
                treatment.name,
                dir.display()
            ));
            continue;
        }
        let label = match prefix {
            Some(p) => format!("{p}/{}", treatment.name),
            None => treatment.name.clone(),
        };
        entries.push(Entry {
            label,
            levels: treatment.levels,
            runs,
        });
    }
    if entries.is_empty() {
        return Err(PlotError::NoRuns {
            dir: dir.to_owned(),
        });
    }
    Ok(ExperimentEntries {
        entries,
        subtitle: experiment.subtitle,
        slo: experiment.slo,
    })
}
