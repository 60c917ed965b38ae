//! What the dashboard lists: every run directory (with `run.json`) and experiment directory (with
//! `experiment.json`) under the results directory, as `llmbench run --output DIR`, `llmbench experiment` and
//! `llmbench results fetch --to DIR` lay them out, each as one row of headline figures.
//!
//! Only the small files are read: `run.json`, `summary.json`, `experiment.json` and `comparison.json`, never the
//! request records. A row is kept until its files change (their length and modification time), so a rescan on
//! every request reads only what is new. A run that is still going (its lock held, or no `summary.json` yet and its
//! records growing) shows how many requests it has recorded so far: the newlines appended to `requests.jsonl`
//! since the last scan are counted, so each byte of the records is read once.

use std::collections::{BTreeMap, HashMap};
use std::io::{Read as _, Seek as _, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use llmbench_core::capacity::CapacityAnswer;
use llmbench_core::experiment::v1::{ExperimentPlan, RunStatus};
use llmbench_core::summary::v1::{CompactSummary, LatencyStats};
use llmbench_metrics::metrics::RunSummary;
use llmbench_model::record_file::{RecordsFormat, RunRecords, count_records_from};
use llmbench_report::plot::{EXPERIMENT_FILE, PLOTS_DIR};
use llmbench_report::report::merge::shard_dirs;
use llmbench_report::report::{RUN_META_FILE, SUMMARY_FILE};

/// How deep below the results directory runs are looked for: an experiment's runs sit two levels down, a sharded
/// run's shards one more, and a directory of fetched runs one more above them all.
const MAX_DEPTH: usize = 5;
/// `comparison.json`, the experiment's per-run SLO verdicts (written by `llmbench experiment`).
const COMPARISON_FILE: &str = "comparison.json";
/// The small files read whole; anything larger is reported as a problem rather than read.
const MAX_SMALL_FILE: u64 = 32 << 20;
/// A run without a summary whose records changed this recently counts as running even where its lock cannot be
/// seen (a launcher on another node writing to shared storage).
const RECENT_WRITE: Duration = Duration::from_secs(60);

/// Everything found under the results directory.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Listing {
    pub(crate) runs: Vec<RunRow>,
    pub(crate) experiments: Vec<ExperimentRow>,
    /// Directories that look like results and could not be read, with the reason.
    pub(crate) problems: Vec<String>,
}

/// One run: where it is, what it ran, and its headline figures (absent until its summary is written).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct RunRow {
    /// Its directory relative to the results directory, `/`-separated: the id the API and the page use.
    pub(crate) id: String,
    /// The experiment it belongs to (that directory's id), if any, and its treatment there.
    pub(crate) experiment: Option<String>,
    pub(crate) treatment: Option<String>,
    pub(crate) run_id: String,
    pub(crate) harness: String,
    pub(crate) profile: String,
    pub(crate) model: String,
    pub(crate) endpoint: String,
    /// When its clock started (RFC 3339 UTC).
    pub(crate) started_at: String,
    /// `complete`, `interrupted`, `stopped` (as run.json's end says), `incomplete` (killed: no end, no lock),
    /// `running`, or `summarizing` (ended, summary not written yet).
    pub(crate) state: String,
    /// The figures of its summary.json, once written.
    pub(crate) figures: Option<Figures>,
    /// While it runs: what it has recorded so far.
    pub(crate) progress: Option<Progress>,
    /// Its `report.html`, relative to its directory, when written.
    pub(crate) report: Option<String>,
    /// Its pictures (`plots/*.png`), relative to its directory.
    pub(crate) plots: Vec<String>,
}

/// A finished run's headline figures, from its summary.json (through the compact summary the operator reads).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Figures {
    pub(crate) requests: u64,
    pub(crate) succeeded: u64,
    pub(crate) failed: u64,
    /// Failed requests in percent of those recorded.
    pub(crate) failure_percent: f64,
    pub(crate) duration_s: f64,
    pub(crate) requests_per_s: f64,
    pub(crate) output_tokens_per_s: f64,
    pub(crate) ttft_p50_ms: Option<f64>,
    pub(crate) ttft_p99_ms: Option<f64>,
    pub(crate) tpot_p50_ms: Option<f64>,
    pub(crate) tpot_p99_ms: Option<f64>,
    pub(crate) e2e_p99_ms: Option<f64>,
    pub(crate) goodput_percent: Option<f64>,
    /// The run's verdict: its harness's (MLPerf's VALID/INVALID), else its experiment's SLO.
    pub(crate) slo: Option<Verdict>,
    /// Its capacity search's answer in brief.
    pub(crate) capacity: Option<CapacityAnswer>,
}

/// A pass/fail judgement and who made it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Verdict {
    /// `mlperf`, or `experiment SLO`.
    pub(crate) by: String,
    pub(crate) passed: bool,
    /// The words of the verdict (`VALID`, `met`, or why not).
    pub(crate) result: String,
}

/// A running run's progress.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Progress {
    /// Requests recorded so far (lines of requests.jsonl).
    pub(crate) recorded: u64,
    /// Requests its plan sends, when known in advance.
    pub(crate) planned: Option<u64>,
    /// Seconds since its clock started.
    pub(crate) elapsed_s: f64,
    pub(crate) stages: usize,
}

/// One experiment: its plan, how far its runs got, and its best treatment.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ExperimentRow {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) harness: String,
    pub(crate) profile: String,
    pub(crate) model: Option<String>,
    pub(crate) started_at: Option<String>,
    pub(crate) finished_at: Option<String>,
    /// `finished`, `interrupted` or `running`.
    pub(crate) state: String,
    pub(crate) treatments: usize,
    /// Run status (`succeeded`, `failed`, `pending`, …) → how many.
    pub(crate) runs: BTreeMap<String, usize>,
    /// The best treatment, as comparison.json names it.
    pub(crate) best: Option<String>,
    /// How many of its runs met the SLO, of those judged: `[met, judged]`.
    pub(crate) slo_met: Option<[usize; 2]>,
    /// The highest capacity any of its runs found.
    pub(crate) capacity: Option<f64>,
}

/// What run.json says that the listing shows; every other key is left unread.
#[derive(Debug, Deserialize)]
struct RunHead {
    #[serde(default)]
    run_id: String,
    #[serde(default)]
    harness: String,
    #[serde(default)]
    profile: String,
    #[serde(default)]
    model: String,
    #[serde(default)]
    endpoint: String,
    #[serde(default)]
    started_at: String,
    #[serde(default)]
    t0_unix_ns: u64,
    #[serde(default)]
    stages: Vec<Value>,
    #[serde(default)]
    planned_requests: Option<u64>,
    #[serde(default)]
    end: Option<RunEndHead>,
}

#[derive(Debug, Deserialize)]
struct RunEndHead {
    #[serde(default)]
    state: Option<String>,
}

/// A file's identity for the cache: its length and modification time (absent: the file is not there).
type Stamp = Option<(u64, SystemTime)>;

fn stamp(path: &Path) -> Stamp {
    let metadata = std::fs::metadata(path).ok()?;
    Some((metadata.len(), metadata.modified().ok()?))
}

/// A run as last read, kept while its files are unchanged.
struct CachedRun {
    stamps: [Stamp; 2],
    head: std::sync::Arc<RunHead>,
    figures: Option<Figures>,
}

/// Where the newline count of a growing `requests.jsonl` stopped.
#[derive(Debug, Clone, Copy, Default)]
struct LineCount {
    offset: u64,
    lines: u64,
}

/// Lists the results directory, remembering what it read between scans.
pub(crate) struct Scanner {
    root: PathBuf,
    runs: HashMap<PathBuf, CachedRun>,
    lines: HashMap<PathBuf, LineCount>,
}

/// A run directory's place in the walk.
struct Found {
    dir: PathBuf,
    /// The run.json read for it: its own, or for a merged sharded run's root, its first shard's.
    meta: PathBuf,
    id: String,
    experiment: Option<String>,
}

impl Scanner {
    pub(crate) fn new(root: PathBuf) -> Self {
        Self {
            root,
            runs: HashMap::new(),
            lines: HashMap::new(),
        }
    }

    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// Walks the results directory and returns every run and experiment in it, newest first. Fails only when the
    /// directory itself cannot be read.
    pub(crate) fn scan(&mut self) -> std::io::Result<Listing> {
        std::fs::read_dir(&self.root)?;
        let mut found = Vec::new();
        let mut experiment_dirs = Vec::new();
        walk(&self.root, "", 0, None, &mut found, &mut experiment_dirs);

        let mut problems = Vec::new();
        let mut experiments = Vec::new();
        // Per experiment: each run directory's treatment and SLO verdict.
        let mut run_notes: HashMap<String, (Option<String>, Option<Verdict>)> = HashMap::new();
        for (dir, id) in &experiment_dirs {
            match read_experiment(dir, id) {
                Ok((row, notes)) => {
                    experiments.push(row);
                    for (run_dir, note) in notes {
                        run_notes.insert(format!("{id}/{run_dir}"), note);
                    }
                }
                Err(problem) => problems.push(format!("{id}: {problem}")),
            }
        }

        let mut runs = Vec::new();
        let mut seen = Vec::new();
        for found in found {
            match self.run_row(&found) {
                Ok(mut row) => {
                    if let Some((treatment, verdict)) = run_notes.remove(&found.id) {
                        row.treatment = treatment;
                        if let Some(figures) = row.figures.as_mut()
                            && figures.slo.is_none()
                        {
                            figures.slo = verdict;
                        }
                    }
                    runs.push(row);
                }
                Err(problem) => problems.push(format!("{}: {problem}", found.id)),
            }
            seen.push(found.dir);
        }
        // Forget runs that are gone, so memory follows what is on disk.
        let seen: std::collections::HashSet<PathBuf> = seen.into_iter().collect();
        self.runs.retain(|dir, _| seen.contains(dir));
        self.lines.retain(|dir, _| seen.contains(dir));

        runs.sort_by(|a, b| b.started_at.cmp(&a.started_at).then(a.id.cmp(&b.id)));
        experiments.sort_by(|a, b| b.started_at.cmp(&a.started_at).then(a.id.cmp(&b.id)));
        Ok(Listing {
            runs,
            experiments,
            problems,
        })
    }

    /// One run's row: from the cache while its run.json and summary.json are unchanged, with its progress
    /// counted afresh while it runs.
    fn run_row(&mut self, found: &Found) -> Result<RunRow, String> {
        let run_json = &found.meta;
        let summary_json = found.dir.join(SUMMARY_FILE);
        let stamps = [stamp(run_json), stamp(&summary_json)];
        let cached = match self.runs.get(&found.dir) {
            Some(cached) if cached.stamps == stamps => cached,
            _ => {
                let head: RunHead = serde_json::from_slice(&read_small(run_json)?)
                    .map_err(|e| format!("cannot parse {RUN_META_FILE}: {e}"))?;
                let figures = match stamps[1] {
                    Some(_) => Some(read_figures(&summary_json)?),
                    None => None,
                };
                self.runs.insert(
                    found.dir.clone(),
                    CachedRun {
                        stamps,
                        head: std::sync::Arc::new(head),
                        figures,
                    },
                );
                &self.runs[&found.dir]
            }
        };
        let head = cached.head.clone();
        let figures = cached.figures.clone();

        let requests = RunRecords::in_dir(&found.dir);
        let locked = crate::run::in_use(&found.dir);
        let recently_written = std::fs::metadata(&requests.path)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|modified| SystemTime::now().duration_since(modified).ok())
            .is_some_and(|age| age < RECENT_WRITE);
        let ended = head.end.as_ref();
        let state = match (&figures, ended) {
            _ if locked && figures.is_none() && ended.is_none() => "running".to_owned(),
            (Some(_), Some(end)) => end.state.clone().unwrap_or_else(|| "complete".into()),
            // A summary without an end in run.json: rebuilt by `llmbench report` after a kill.
            (Some(_), None) => "incomplete".to_owned(),
            (None, Some(_)) if locked => "summarizing".to_owned(),
            (None, Some(end)) => end.state.clone().unwrap_or_else(|| "complete".into()),
            (None, None) if recently_written => "running".to_owned(),
            (None, None) => "incomplete".to_owned(),
        };
        let progress = (figures.is_none()).then(|| Progress {
            recorded: self.count_recorded(&found.dir, &requests),
            planned: head.planned_requests,
            elapsed_s: elapsed_since(head.t0_unix_ns),
            stages: head.stages.len(),
        });
        let report = found
            .dir
            .join("report.html")
            .is_file()
            .then(|| "report.html".to_owned());
        Ok(RunRow {
            id: found.id.clone(),
            experiment: found.experiment.clone(),
            treatment: None,
            run_id: head.run_id.clone(),
            harness: head.harness.clone(),
            profile: head.profile.clone(),
            model: head.model.clone(),
            endpoint: head.endpoint.clone(),
            started_at: head.started_at.clone(),
            state,
            figures,
            progress,
            report,
            plots: plots(&found.dir),
        })
    }

    /// The records a run holds so far, counting only what was appended since the last call.
    fn count_recorded(&mut self, dir: &Path, records: &RunRecords) -> u64 {
        match records.format {
            RecordsFormat::Jsonl => self.count_lines(dir, &records.path),
            RecordsFormat::Binary => {
                let count = self.lines.entry(dir.to_owned()).or_default();
                let length = std::fs::metadata(&records.path).map_or(0, |m| m.len());
                if length < count.offset {
                    // Replaced (a run id reused with --overwrite): count afresh.
                    *count = LineCount::default();
                }
                if let Ok((offset, whole)) = count_records_from(&records.path, count.offset) {
                    count.offset = offset;
                    count.lines += whole;
                }
                count.lines
            }
        }
    }

    /// The newlines in an earlier version's `requests.jsonl`, counting only what was appended since the last call.
    fn count_lines(&mut self, dir: &Path, requests: &Path) -> u64 {
        let count = self.lines.entry(dir.to_owned()).or_default();
        let Ok(mut file) = std::fs::File::open(requests) else {
            return count.lines;
        };
        let length = file.metadata().map(|m| m.len()).unwrap_or(0);
        if length < count.offset {
            // Replaced (a run id reused with --overwrite): count afresh.
            *count = LineCount::default();
        }
        if file.seek(SeekFrom::Start(count.offset)).is_err() {
            return count.lines;
        }
        let mut buffer = vec![0u8; 64 << 10];
        loop {
            match file.read(&mut buffer) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    count.offset += n as u64;
                    count.lines += buffer[..n].iter().filter(|b| **b == b'\n').count() as u64;
                }
            }
        }
        count.lines
    }
}

/// Collects run directories and experiment directories below `dir`. Symbolic links are not followed (nothing
/// outside the results directory is listed), nor hidden directories, a fetch's `.partial`/`.replaced` copies, or a
/// run's `plots/`.
fn walk(
    dir: &Path,
    prefix: &str,
    depth: usize,
    experiment: Option<&str>,
    found: &mut Vec<Found>,
    experiments: &mut Vec<(PathBuf, String)>,
) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut children: Vec<(String, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter(|entry| entry.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let listed = !name.starts_with('.')
                && !name.ends_with(".partial")
                && !name.ends_with(".replaced")
                && name != PLOTS_DIR;
            listed.then(|| (name, entry.path()))
        })
        .collect();
    children.sort();
    for (name, path) in children {
        let id = if prefix.is_empty() {
            name
        } else {
            format!("{prefix}/{name}")
        };
        let shards = shard_dirs(&path);
        if path.join(RUN_META_FILE).is_file() {
            found.push(Found {
                meta: path.join(RUN_META_FILE),
                dir: path,
                id,
                experiment: experiment.map(str::to_owned),
            });
        } else if let Some(first) = shards.first()
            && path.join(SUMMARY_FILE).is_file()
        {
            // A sharded run merged by `llmbench report` (the operator's merge pod): one run, its shards' figures
            // together; before the merge its shards are listed one by one, each with its progress.
            found.push(Found {
                meta: first.join(RUN_META_FILE),
                dir: path,
                id,
                experiment: experiment.map(str::to_owned),
            });
        } else if path.join(EXPERIMENT_FILE).is_file() {
            experiments.push((path.clone(), id.clone()));
            if depth < MAX_DEPTH {
                walk(&path, &id, depth + 1, Some(&id), found, experiments);
            }
        } else if depth < MAX_DEPTH {
            walk(&path, &id, depth + 1, experiment, found, experiments);
        }
    }
}

/// A small file read whole, refused past [`MAX_SMALL_FILE`].
fn read_small(path: &Path) -> Result<Vec<u8>, String> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let length = std::fs::metadata(path)
        .map_err(|e| format!("cannot read {name}: {e}"))?
        .len();
    if length > MAX_SMALL_FILE {
        return Err(format!(
            "{name} is {length} bytes, more than the {MAX_SMALL_FILE} a listing reads"
        ));
    }
    std::fs::read(path).map_err(|e| format!("cannot read {name}: {e}"))
}

/// The headline figures of a summary.json, through the compact summary (what the operator puts in a run's status).
fn read_figures(path: &Path) -> Result<Figures, String> {
    let summary: RunSummary = serde_json::from_slice(&read_small(path)?)
        .map_err(|e| format!("cannot parse {SUMMARY_FILE}: {e}"))?;
    let compact = CompactSummary::from(&summary);
    let body = &compact.overall;
    let latency = &body.latency_ms;
    let p50 = |s: &Option<LatencyStats>| s.as_ref().map(|s| s.p50);
    let p99 = |s: &Option<LatencyStats>| s.as_ref().map(|s| s.p99);
    let recorded = body.requests.total;
    Ok(Figures {
        requests: recorded,
        succeeded: body.requests.succeeded,
        failed: body.requests.failed,
        failure_percent: if recorded == 0 {
            0.0
        } else {
            body.requests.failed as f64 / recorded as f64 * 100.0
        },
        duration_s: body.duration_s,
        requests_per_s: body.throughput.requests_per_s,
        output_tokens_per_s: body.throughput.output_tokens_per_s,
        ttft_p50_ms: p50(&latency.ttft),
        ttft_p99_ms: p99(&latency.ttft),
        tpot_p50_ms: p50(&latency.tpot),
        tpot_p99_ms: p99(&latency.tpot),
        e2e_p99_ms: p99(&latency.e2e),
        goodput_percent: compact.goodput_percent,
        slo: compact.verdict.map(|v| Verdict {
            by: v.by,
            passed: v.passed,
            result: v.result,
        }),
        capacity: compact.capacity,
    })
}

/// An experiment's row, and for each of its run directories (relative to it) the treatment and SLO verdict.
#[allow(clippy::type_complexity)]
fn read_experiment(
    dir: &Path,
    id: &str,
) -> Result<
    (
        ExperimentRow,
        Vec<(String, (Option<String>, Option<Verdict>))>,
    ),
    String,
> {
    let plan: ExperimentPlan = serde_json::from_slice(&read_small(&dir.join(EXPERIMENT_FILE))?)
        .map_err(|e| format!("cannot parse {EXPERIMENT_FILE}: {e}"))?;
    // comparison.json is written once the runs are done; before that there is no verdict to show.
    let comparison: Option<Value> = read_small(&dir.join(COMPARISON_FILE))
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok());
    let compared_runs: Vec<&Value> = comparison
        .as_ref()
        .and_then(|c| c.get("runs"))
        .and_then(Value::as_array)
        .map(|runs| runs.iter().collect())
        .unwrap_or_default();
    let verdict_of = |run_dir: &str| -> Option<Verdict> {
        let run = compared_runs
            .iter()
            .find(|r| r.get("dir").and_then(Value::as_str) == Some(run_dir))?;
        let met = run.get("figures")?.get("slo_met")?.as_bool()?;
        let words = run
            .get("slo")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .unwrap_or_else(|| if met { "met" } else { "missed" }.to_owned());
        Some(Verdict {
            by: "experiment SLO".into(),
            passed: met,
            result: words,
        })
    };
    let capacity = compared_runs
        .iter()
        .filter_map(|r| r.get("figures")?.get("capacity")?.as_f64())
        .fold(None, |best: Option<f64>, c| {
            Some(best.map_or(c, |b| b.max(c)))
        });

    let mut runs = BTreeMap::new();
    let mut notes = Vec::new();
    let mut judged = [0usize; 2];
    for run in &plan.runs {
        *runs.entry(run.status.as_str().to_owned()).or_insert(0) += 1;
        let verdict = verdict_of(&run.dir);
        if let Some(v) = &verdict {
            judged[1] += 1;
            judged[0] += usize::from(v.passed);
        }
        notes.push((run.dir.clone(), (Some(run.treatment.clone()), verdict)));
    }
    let unfinished = plan.runs.iter().any(|r| r.status == RunStatus::Pending);
    let state = if plan.interrupted {
        "interrupted"
    } else if plan.finished_at.is_some() || !unfinished {
        "finished"
    } else {
        "running"
    };
    Ok((
        ExperimentRow {
            id: id.to_owned(),
            name: plan.name,
            harness: plan.harness,
            profile: plan.profile,
            model: plan.model,
            started_at: plan.started_at,
            finished_at: plan.finished_at,
            state: state.to_owned(),
            treatments: plan.treatments.len(),
            runs,
            best: comparison
                .as_ref()
                .and_then(|c| c.get("best"))
                .and_then(Value::as_str)
                .map(str::to_owned),
            slo_met: (judged[1] > 0).then_some(judged),
            capacity,
        },
        notes,
    ))
}

/// A run's PNG pictures, relative to its directory, by name.
fn plots(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir.join(PLOTS_DIR)) else {
        return Vec::new();
    };
    let mut plots: Vec<String> = entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|name| name.ends_with(".png"))
        .map(|name| format!("{PLOTS_DIR}/{name}"))
        .collect();
    plots.sort();
    plots
}

/// Seconds from `t0_unix_ns` to now (0 when unknown or in the future).
fn elapsed_since(t0_unix_ns: u64) -> f64 {
    if t0_unix_ns == 0 {
        return 0.0;
    }
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    (now.saturating_sub(u128::from(t0_unix_ns)) as f64) / 1e9
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mkrun(dir: &Path) {
        std::fs::create_dir_all(dir).expect("mkdir");
        std::fs::write(dir.join(RUN_META_FILE), "{}").expect("run.json");
    }

    #[test]
    fn the_walk_finds_runs_and_experiments_and_skips_hidden_partial_and_linked_directories() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("results");
        mkrun(&root.join("a"));
        mkrun(&root.join("fetched/b"));
        mkrun(&root.join("c.partial"));
        mkrun(&root.join(".hidden"));
        mkrun(&root.join("a/plots/inner"));
        mkrun(&root.join("1/2/3/4/5/6/too-deep"));
        std::fs::create_dir_all(root.join("exp")).expect("mkdir");
        std::fs::write(root.join("exp").join(EXPERIMENT_FILE), "{}").expect("plan");
        mkrun(&root.join("exp/t1-r1"));
        mkrun(&dir.path().join("outside/run"));
        // A sharded run: merged (a summary at its root) it is one run; before, its shards are.
        mkrun(&root.join("merged/shard-0"));
        mkrun(&root.join("merged/shard-1"));
        std::fs::write(root.join("merged").join(SUMMARY_FILE), "{}").expect("summary");
        mkrun(&root.join("unmerged/shard-0"));
        mkrun(&root.join("unmerged/shard-1"));
        #[cfg(unix)]
        std::os::unix::fs::symlink(dir.path().join("outside"), root.join("linked")).expect("link");

        let (mut found, mut experiments) = (Vec::new(), Vec::new());
        walk(&root, "", 0, None, &mut found, &mut experiments);
        let ids: Vec<(&str, Option<&str>)> = found
            .iter()
            .map(|f| (f.id.as_str(), f.experiment.as_deref()))
            .collect();
        assert_eq!(
            ids,
            [
                ("a", None),
                ("exp/t1-r1", Some("exp")),
                ("fetched/b", None),
                ("merged", None),
                ("unmerged/shard-0", None),
                ("unmerged/shard-1", None)
            ]
        );
        let merged = found.iter().find(|f| f.id == "merged").expect("merged");
        assert_eq!(merged.meta, root.join("merged/shard-0").join(RUN_META_FILE));
        assert_eq!(experiments, [(root.join("exp"), "exp".to_owned())]);
    }

    #[test]
    fn recorded_requests_are_counted_from_what_was_appended_since_the_last_scan() {
        let dir = tempfile::tempdir().expect("tempdir");
        let run = dir.path().join("run");
        std::fs::create_dir(&run).expect("mkdir");
        let records = run.join(llmbench_report::report::REQUESTS_JSONL_FILE);
        let mut scanner = Scanner::new(dir.path().to_owned());
        assert_eq!(scanner.count_lines(&run, &records), 0, "no records yet");
        std::fs::write(&records, "{}\n{}\n{\"torn").expect("write");
        assert_eq!(scanner.count_lines(&run, &records), 2);
        {
            use std::io::Write as _;
            let mut file = std::fs::OpenOptions::new()
                .append(true)
                .open(&records)
                .expect("open");
            file.write_all(b"\"}\n{}\n").expect("append");
        }
        assert_eq!(scanner.count_lines(&run, &records), 4);
        assert_eq!(scanner.lines[&run].offset, 18, "each byte read once");
        // A shorter file is a new one (a run id reused with --overwrite): counted afresh.
        std::fs::write(&records, "{}\n").expect("rewrite");
        assert_eq!(scanner.count_lines(&run, &records), 1);
    }

    #[test]
    fn binary_records_are_counted_whole_as_they_are_appended() {
        use llmbench_model::record::RequestRecord;
        use llmbench_model::record_file::{RECORDS_FILE, file_bytes};
        let dir = tempfile::tempdir().expect("tempdir");
        let run = dir.path().join("run");
        std::fs::create_dir(&run).expect("mkdir");
        let all: Vec<_> = (0..3)
            .map(|id| RequestRecord::builder(id).end(5).build())
            .collect();
        let bytes = file_bytes(&all);
        let two = file_bytes(&all[..2]).len();
        let mut scanner = Scanner::new(dir.path().to_owned());
        std::fs::write(run.join(RECORDS_FILE), &bytes[..two + 1]).expect("write");
        let records = RunRecords::in_dir(&run);
        assert_eq!(
            scanner.count_recorded(&run, &records),
            2,
            "the third is still being written"
        );
        std::fs::write(run.join(RECORDS_FILE), &bytes).expect("write");
        assert_eq!(scanner.count_recorded(&run, &records), 3);
        std::fs::write(run.join(RECORDS_FILE), &bytes[..two]).expect("rewrite");
        assert_eq!(
            scanner.count_recorded(&run, &records),
            2,
            "a shorter file is counted afresh"
        );
    }
}
