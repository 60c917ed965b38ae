//! LoadGen's query schedules as engine stages (`loadgen.cc::GenerateQueries`, `GenerateLoadableSets`).
//!
//! - The loaded sample set: a performance run's first `performance_sample_count` dataset indices, an accuracy
//!   run's all, shuffled with `qsl_rng_seed`.
//! - **Offline**, performance: one query of `max(min_query_count, ⌊1.1 · min_duration · target_qps⌋)` samples,
//!   the loaded set repeated in order, all sent at t = 0.
//! - **Server**, performance: arrivals at t₀ = 0 and then exponential gaps at `target_qps` from
//!   `mt19937(schedule_rng_seed)`, each gap truncated to whole ns; samples drawn uniformly from the loaded set with
//!   `mt19937(sample_index_rng_seed)`, after the draws LoadGen's unused distributions consume from it. Queries
//!   are generated while the previous arrival is before `min_duration`
//!   or fewer than `min_query_count` exist — about `max(min_query_count, target_qps · min_duration + 1)` — then
//!   cut to `max_query_count` and `max_duration` when those are set.
//! - **SingleStream**, performance: a closed loop with one query in flight for
//!   `max(min_query_count, ⌈min_duration / expected_latency⌉)` queries, samples drawn as in Server.
//! - **MultiStream**, performance: queries of `samples_per_query` contiguous samples of the loaded set (padded
//!   with its first `samples_per_query − 1` samples so any start has a full query), each starting at a uniform
//!   draw below the unpadded size, sent together; the next query goes out when the last sample of the previous
//!   one returns ([`Lockstep`]). `max(min_query_count, ⌈2 · min_duration / period⌉ + 1)` queries are generated
//!   (period = `expected_latency`, LoadGen's `ScheduleDistribution` and its 2× generation slack); the issue loop
//!   ends once `min_query_count` are issued and `min_duration` has passed.
//! - Accuracy passes issue every sample once, with the scenario's timing, in LoadGen's accuracy order
//!   (`accuracy_order`; MultiStream: queries starting at every `samples_per_query`-th loaded sample, in an order
//!   shuffled by `mt19937(sample_index_rng_seed)`, `SampleDistribution<AccuracyOnly>`).
//! - A SubmissionRun is an accuracy pass, then a performance pass, two stages; FindPeakPerformance starts with a
//!   performance pass at the requested rate (its runner plans the rest).
//! - Warm-up queries (not a LoadGen notion; MLPerf harnesses warm up outside LoadGen) form a stage of their own
//!   before the measured one, from the head of the loaded set, at `target_qps` spacing (Server), at once
//!   (Offline) or one at a time (SingleStream).

use std::time::Duration;

use llmbench_engine::engine::{ErrorLimits, Lockstep, Stage, StagePlan};

use super::MlperfError;
use super::rng::Mt19937;
use super::settings::{MlperfSettings, Mode, Scenario};
use super::verdict::offline_samples_per_query;

/// A run the engine can execute, and which dataset sample each request carries.
#[derive(Debug, Clone)]
pub struct MlperfSchedule {
    /// The warm-up stage (when asked for), then the measured stage.
    pub stages: Vec<Stage>,
    /// Index of the measured stage; records of other stages are warm-up and excluded from the verdict.
    pub measured_stage: u32,
    /// The dataset index of every request in issue order across all stages. The engine takes request `i` from
    /// `RunPlan.requests[i]`, so the caller builds `requests` as `samples.iter().map(|&s| prepared[s])`.
    pub samples: Vec<usize>,
    /// When the last measured query is scheduled, from the measured stage's start (Server; 0 for Offline).
    pub final_scheduled: Duration,
    /// The QSL's loaded set, in load order (LoadGen logs it as `loaded_qsl_set`).
    pub loaded: Vec<usize>,
    /// The measured queries generated, and the samples each holds (`generated_query_count`,
    /// `generated_samples_per_query`): Offline's one query holds every sample.
    pub generated_queries: u64,
    pub samples_per_query: u64,
    /// SubmissionRun's accuracy pass, the stage before the measured one; `None` in the other modes.
    pub accuracy_pass: Option<AccuracyPass>,
}

/// The accuracy pass of a SubmissionRun (`StartTest` runs `RunAccuracyMode`, then `RunPerformanceMode`, with one
/// `SequenceGen`, so the performance pass's sequence ids follow the accuracy pass's).
#[derive(Debug, Clone)]
pub struct AccuracyPass {
    pub stage: u32,
    /// Every dataset index, shuffled by `qsl_rng_seed` (`accuracy_sample_count` is the whole QSL).
    pub loaded: Vec<usize>,
    pub generated_queries: u64,
    pub samples_per_query: u64,
}

/// The passes a test of `mode` issues, in order (`StartTest`). FindPeakPerformance starts with a performance
/// pass at the requested `target_qps`; the runner plans the search's further passes from its outcome.
fn passes(mode: Mode) -> &'static [Mode] {
    match mode {
        Mode::SubmissionRun => &[Mode::AccuracyOnly, Mode::PerformanceOnly],
        Mode::AccuracyOnly => &[Mode::AccuracyOnly],
        Mode::PerformanceOnly | Mode::FindPeakPerformance => &[Mode::PerformanceOnly],
    }
}

/// Builds the schedule of `settings` over a dataset of `dataset_len` samples.
pub fn build_schedule(
    settings: &MlperfSettings,
    dataset_len: usize,
) -> Result<MlperfSchedule, MlperfError> {
    if dataset_len == 0 {
        return Err(MlperfError::EmptyDataset);
    }
    let passes = passes(settings.mode);
    // Warm-up queries come from the head of the first pass's loaded set.
    let loaded = loaded_samples(settings, passes[0], dataset_len);
    let mut stages = Vec::new();
    let mut samples = Vec::new();
    if settings.warmup_queries > 0 {
        let count = settings.warmup_queries as usize;
        samples.extend((0..count).map(|i| loaded[i % loaded.len()]));
        let plan = match settings.scenario {
            Scenario::Offline => open(vec![Duration::ZERO; count]),
            Scenario::Server => {
                let gap = 1.0 / settings.target_qps;
                open(
                    (0..count)
                        .map(|i| Duration::from_secs_f64(i as f64 * gap))
                        .collect(),
                )
            }
            Scenario::SingleStream => closed(count as u64, None),
            Scenario::MultiStream => {
                // `warmup_queries` whole queries, from the head of the loaded set.
                let group = multi_stream_group(settings);
                samples.truncate(samples.len() - count);
                samples.extend((0..count * group).map(|i| loaded[i % loaded.len()]));
                lockstep(group, count as u64, 0, Duration::ZERO, 0, None)
            }
        };
        stages.push(Stage {
            plan,
            requested_rate: requested_rate(settings),
            errors: ErrorLimits::default(),
        });
    }
    let mut accuracy_pass = None;
    let mut last = None;
    for &mode in passes {
        let pass_settings = MlperfSettings {
            mode,
            ..settings.clone()
        };
        let loaded = loaded_samples(settings, mode, dataset_len);
        let (plan, measured, final_scheduled) = match mode {
            Mode::AccuracyOnly => accuracy(&pass_settings, &loaded),
            _ => performance(&pass_settings, &loaded),
        };
        let measured_samples = measured.len() as u64;
        samples.extend(measured);
        let (generated_queries, samples_per_query) = match (&plan, settings.scenario) {
            (_, Scenario::Offline) => (1, measured_samples),
            (StagePlan::Lockstep(l), _) => (l.queries, l.group as u64),
            _ => (measured_samples, 1),
        };
        if let Some((stage, loaded, generated_queries, samples_per_query, _)) = last.take() {
            accuracy_pass = Some(AccuracyPass {
                stage,
                loaded,
                generated_queries,
                samples_per_query,
            });
        }
        last = Some((
            stages.len() as u32,
            loaded,
            generated_queries,
            samples_per_query,
            final_scheduled,
        ));
        stages.push(Stage {
            plan,
            requested_rate: requested_rate(settings),
            errors: ErrorLimits::default(),
        });
    }
    let (measured_stage, loaded, generated_queries, samples_per_query, final_scheduled) =
        last.ok_or(MlperfError::EmptyDataset)?;
    Ok(MlperfSchedule {
        stages,
        measured_stage,
        samples,
        final_scheduled,
        loaded,
        generated_queries,
        samples_per_query,
        accuracy_pass,
    })
}

fn multi_stream_group(settings: &MlperfSettings) -> usize {
    usize::try_from(settings.multi_stream_samples_per_query.max(1)).unwrap_or(usize::MAX)
}

fn lockstep(
    group: usize,
    queries: u64,
    min_queries: u64,
    min_duration: Duration,
    max_queries: u64,
    max_duration: Option<Duration>,
) -> StagePlan {
    StagePlan::Lockstep(Lockstep {
        group,
        queries,
        min_queries,
        min_duration,
        max_queries,
        max_duration,
    })
}

fn requested_rate(settings: &MlperfSettings) -> Option<f64> {
    (settings.scenario == Scenario::Server).then_some(settings.target_qps)
}

fn open(send_at: Vec<Duration>) -> StagePlan {
    StagePlan::Open {
        send_at,
        max_concurrency: None,
    }
}

fn closed(total: u64, duration: Option<Duration>) -> StagePlan {
    StagePlan::Closed {
        concurrency: 1,
        total: Some(total),
        duration,
        rampup: Duration::ZERO,
    }
}

/// The QSL's loadable set (`loadgen.cc` `GenerateLoadableSets`): the first `performance_sample_count` indices
/// (0 = all) in a performance run, every index in an accuracy run, shuffled by `qsl_rng_seed` — LoadGen shuffles
/// only the indices it is asked to load, so a performance run never touches samples past the count.
fn loaded_samples(settings: &MlperfSettings, mode: Mode, dataset_len: usize) -> Vec<usize> {
    let count = match (mode, settings.performance_sample_count) {
        (Mode::PerformanceOnly, n) if n > 0 => {
            usize::try_from(n).map_or(dataset_len, |n| n.min(dataset_len))
        }
        _ => dataset_len,
    };
    let mut all: Vec<usize> = (0..count).collect();
    Mt19937::new(settings.qsl_rng_seed).shuffle(&mut all);
    all
}

fn max_duration(settings: &MlperfSettings) -> Option<Duration> {
    (settings.max_duration_ms > 0).then(|| Duration::from_millis(settings.max_duration_ms))
}

/// Poisson arrival offsets, LoadGen's generation loop: a query at each timestamp while the previous one is
/// before `min_duration` or fewer than `min_queries` exist (`count`: exactly that many). In equal-issue mode
/// (`equal_issue_sets`: the loaded set's size) `min_queries` is first rounded up to whole sets and grows by a set
/// whenever it is reached before `min_duration`, so the count is a whole number of sets.
fn poisson_arrivals(
    settings: &MlperfSettings,
    min_queries: u64,
    equal_issue_sets: Option<usize>,
    count: Option<usize>,
) -> Vec<u64> {
    let mut rng = Mt19937::new(settings.schedule_rng_seed);
    let min_duration_ns = settings.min_duration_ms.saturating_mul(1_000_000);
    let mut min_queries = match equal_issue_sets {
        Some(set_size) => round_up_to_sets(min_queries, set_size),
        None => min_queries,
    } as usize;
    let mut times = Vec::new();
    let (mut timestamp, mut prev) = (0u64, 0u64);
    loop {
        let more = match count {
            Some(n) => times.len() < n,
            None => prev < min_duration_ns || times.len() < min_queries,
        };
        if !more {
            break;
        }
        times.push(timestamp);
        prev = timestamp;
        // duration<double> → nanoseconds truncates toward zero.
        let gap = rng.exponential(settings.target_qps) * 1e9;
        timestamp = timestamp.saturating_add(gap as u64);
        if let Some(set_size) = equal_issue_sets
            && times.len() >= min_queries
            && prev < min_duration_ns
        {
            min_queries += set_size;
        }
    }
    times
}

/// LoadGen's MultiStream queries: `loadgen.cc` `GenerateLoadableSets` (the padding) and `GenerateQueries` (the
/// count, and each query's first sample). Returns the plan and every request's dataset index, query after query.
fn multi_stream(settings: &MlperfSettings, loaded: &[usize]) -> (StagePlan, Vec<usize>) {
    let group = multi_stream_group(settings);
    let end = loaded.len();
    // `set_padding = samples_per_query − 1` copies of the set's first samples, so a query starting at any index
    // below `end` is whole (the padding cycles when the set is smaller than a query).
    let padded: Vec<usize> = (0..end + group - 1).map(|i| loaded[i % end]).collect();
    let mut rng = Mt19937::new(settings.sample_index_rng_seed);
    let starts: Vec<usize> = match settings.mode {
        Mode::AccuracyOnly => {
            // `SampleDistribution<AccuracyOnly>(end, stride, rng)`: every stride-th index, shuffled; the query
            // count is `padded.len() / samples_per_query`, which is exactly how many there are.
            let mut starts: Vec<usize> = (0..end).step_by(group).collect();
            rng.shuffle(&mut starts);
            starts
        }
        // A pass is accuracy or performance; `build_schedule` splits the other modes into those.
        Mode::PerformanceOnly | Mode::SubmissionRun | Mode::FindPeakPerformance => {
            sample_distributions(&mut rng, settings.min_query_count, end, group, padded.len());
            // `ScheduleDistribution<MultiStream>`: a fixed period of 1/target_qps, target_qps = 10⁹/expected
            // latency, cast to whole ns; queries are generated over twice the target duration.
            let target_qps = 1e9 / settings.multi_stream_expected_latency_ns.max(1) as f64;
            let period_ns = ((1.0 / target_qps) * 1e9) as u64;
            let gen_duration_ns = settings.min_duration_ms.saturating_mul(2_000_000);
            // Equal issue rounds `min_queries` up to whole padded sets and adds a set whenever it is reached
            // before the generation duration; MultiStream still draws its query starts uniformly.
            let equal_issue = settings.sample_concatenate_permutation;
            let mut min_queries = match equal_issue {
                true => round_up_to_sets(settings.min_query_count, padded.len()),
                false => settings.min_query_count,
            };
            let (mut count, mut timestamp, mut prev) = (0u64, 0u64, 0u64);
            while prev < gen_duration_ns || count < min_queries {
                count += 1;
                prev = timestamp;
                timestamp = timestamp.saturating_add(period_ns.max(1));
                if equal_issue && count >= min_queries && prev < gen_duration_ns {
                    min_queries += padded.len() as u64;
                }
            }
            (0..count)
                .map(|_| rng.uniform_below(end as u64) as usize)
                .collect()
        }
    };
    let samples = starts
        .iter()
        .flat_map(|&start| padded[start..start + group].iter().copied())
        .collect();
    let queries = starts.len() as u64;
    let plan = match settings.mode {
        // Accuracy mode never ends early.
        Mode::AccuracyOnly => lockstep(group, queries, queries, Duration::ZERO, 0, None),
        Mode::PerformanceOnly | Mode::SubmissionRun | Mode::FindPeakPerformance => lockstep(
            group,
            queries,
            settings.min_query_count,
            Duration::from_millis(settings.min_duration_ms),
            settings.max_query_count,
            max_duration(settings),
        ),
    };
    (plan, samples)
}

/// Before its first draw, `GenerateQueries` builds its other sample distributions from the same
/// `mt19937(sample_index_rng_seed)`, used or not, and building them consumes the engine: the "unique" one
/// shuffles every `stride`-th index below `end`, the equal-issue one shuffles the loaded set
/// ⌈min_queries / set size⌉ times (`SampleDistribution<AccuracyOnly>`, `SampleDistributionEqualIssue`). Returns
/// the equal-issue order: those shuffles of loaded-set positions, one after another (its draw `i` is entry
/// `i mod len`).
fn sample_distributions(
    rng: &mut Mt19937,
    min_queries: u64,
    end: usize,
    stride: usize,
    set_size: usize,
) -> Vec<usize> {
    let mut unique: Vec<usize> = (0..end).step_by(stride.max(1)).collect();
    rng.shuffle(&mut unique);
    let mut shuffled: Vec<usize> = (0..set_size).collect();
    let mut equal_issue = Vec::new();
    for _ in (0..min_queries).step_by(set_size.max(1)) {
        rng.shuffle(&mut shuffled);
        equal_issue.extend_from_slice(&shuffled);
    }
    equal_issue
}

/// `min_query_count` as `TestSettingsInternal` makes it: Offline's one query makes it 1; equal-issue SingleStream
/// takes at least ⌊2 · min_duration / expected latency⌋ and then adds `performance_sample_count − (count mod
/// performance_sample_count)` (a whole set more when it already is a multiple, as LoadGen does).
fn effective_min_query_count(settings: &MlperfSettings, set_size: usize) -> u64 {
    match settings.scenario {
        Scenario::Offline => 1,
        Scenario::SingleStream if settings.sample_concatenate_permutation => {
            const SLACK: f64 = 2.0;
            let expected_s = settings.single_stream_expected_latency_ns.max(1) as f64 / 1e9;
            let expected_queries =
                (SLACK * settings.min_duration_ms as f64 / 1000.0 / expected_s) as u64;
            let count = settings.min_query_count.max(expected_queries);
            let set = set_size.max(1) as u64;
            count + (set - count % set)
        }
        _ => settings.min_query_count,
    }
}

/// `min_queries` rounded up to whole loaded sets, as `GenerateQueries` pads it in equal-issue mode.
fn round_up_to_sets(min_queries: u64, set_size: usize) -> u64 {
    min_queries.next_multiple_of(set_size.max(1) as u64)
}

fn performance(settings: &MlperfSettings, loaded: &[usize]) -> (StagePlan, Vec<usize>, Duration) {
    let equal_issue = settings.sample_concatenate_permutation;
    let set_size = loaded.len();
    let min_queries = effective_min_query_count(settings, set_size);
    let mut sample_rng = Mt19937::new(settings.sample_index_rng_seed);
    let equal_issue_order =
        sample_distributions(&mut sample_rng, min_queries, set_size, 1, set_size);
    let mut draw = |n: usize| -> Vec<usize> {
        (0..n)
            .map(|i| match equal_issue {
                true => loaded[equal_issue_order[i % equal_issue_order.len()]],
                false => loaded[sample_rng.uniform_below(set_size as u64) as usize],
            })
            .collect()
    };
    let cap = |n: usize| match settings.max_query_count {
        0 => n,
        max => n.min(usize::try_from(max).unwrap_or(usize::MAX)),
    };
    match settings.scenario {
        Scenario::Offline => {
            let mut n = offline_samples_per_query(settings) as usize;
            if !equal_issue {
                let samples = (0..n).map(|i| loaded[i % set_size]).collect();
                return (open(vec![Duration::ZERO; n]), samples, Duration::ZERO);
            }
            // Equal issue: the query padded to whole loaded sets, each one shuffled in turn by the sample rng.
            n = round_up_to_sets(n as u64, set_size) as usize;
            let mut samples = Vec::with_capacity(n);
            for _ in 0..n / set_size {
                let mut set = loaded.to_vec();
                sample_rng.shuffle(&mut set);
                samples.extend(set);
            }
            (open(vec![Duration::ZERO; n]), samples, Duration::ZERO)
        }
        Scenario::Server => {
            let equal_issue_sets = equal_issue.then_some(set_size);
            let mut times = poisson_arrivals(settings, min_queries, equal_issue_sets, None);
            times.truncate(cap(times.len()));
            if settings.max_duration_ms > 0 {
                let max_ns = settings.max_duration_ms.saturating_mul(1_000_000);
                times.retain(|t| *t <= max_ns);
            }
            let samples = draw(times.len());
            let final_scheduled = Duration::from_nanos(times.last().copied().unwrap_or(0));
            let send_at = times.into_iter().map(Duration::from_nanos).collect();
            (open(send_at), samples, final_scheduled)
        }
        Scenario::SingleStream => {
            let expected = settings.single_stream_expected_latency_ns.max(1);
            let by_duration = settings
                .min_duration_ms
                .saturating_mul(1_000_000)
                .div_ceil(expected);
            let n = cap(min_queries.max(by_duration) as usize);
            (
                closed(n as u64, max_duration(settings)),
                draw(n),
                Duration::ZERO,
            )
        }
        Scenario::MultiStream => {
            let (plan, samples) = multi_stream(settings, loaded);
            (plan, samples, Duration::ZERO)
        }
    }
}

fn accuracy(settings: &MlperfSettings, loaded: &[usize]) -> (StagePlan, Vec<usize>, Duration) {
    let n = loaded.len();
    let plan = match settings.scenario {
        Scenario::Offline => open(vec![Duration::ZERO; n]),
        Scenario::Server => open(
            poisson_arrivals(settings, 0, None, Some(n))
                .into_iter()
                .map(Duration::from_nanos)
                .collect(),
        ),
        Scenario::SingleStream => closed(n as u64, None),
        Scenario::MultiStream => {
            let (plan, samples) = multi_stream(settings, loaded);
            return (plan, samples, Duration::ZERO);
        }
    };
    (plan, accuracy_order(settings, loaded), Duration::ZERO)
}

/// The order of an accuracy pass's samples (`GenerateQueries<scenario, AccuracyOnly>`, one query per loaded sample,
/// Offline one query of them all). The sample rng first builds its three distributions: the accuracy one (a
/// shuffle of the loaded-set positions), the unique one (another) and the equal-issue one (a third: `min_queries`
/// is the set's size, so one shuffle). Server and SingleStream draw from the equal-issue one when
/// `sample_concatenate_permutation` is on (accuracy mode skips only its padding), else from the accuracy one;
/// Offline copies the loaded set in order and, with the permutation on, shuffles it once more.
fn accuracy_order(settings: &MlperfSettings, loaded: &[usize]) -> Vec<usize> {
    let n = loaded.len();
    let mut rng = Mt19937::new(settings.sample_index_rng_seed);
    let mut accuracy: Vec<usize> = (0..n).collect();
    rng.shuffle(&mut accuracy);
    let equal_issue = sample_distributions(&mut rng, n as u64, n, 1, n);
    let permuted = settings.sample_concatenate_permutation;
    match settings.scenario {
        Scenario::Offline if permuted => {
            let mut samples = loaded.to_vec();
            rng.shuffle(&mut samples);
            samples
        }
        Scenario::Offline => loaded.to_vec(),
        _ if permuted => equal_issue.iter().map(|&i| loaded[i]).collect(),
        _ => accuracy.iter().map(|&i| loaded[i]).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mlperf::settings::{ParsedSettings, parse_settings};
    use llmbench_workload::workload::ParseOptions;

    fn settings(yaml: &str) -> MlperfSettings {
        let ParsedSettings { settings, .. } =
            parse_settings("p.yaml", yaml, None, &ParseOptions::default()).unwrap();
        settings
    }

    fn send_at(stage: &Stage) -> &[Duration] {
        match &stage.plan {
            StagePlan::Open { send_at, .. } => send_at,
            StagePlan::Closed { .. }
            | StagePlan::Paced(_)
            | StagePlan::Trace(_)
            | StagePlan::Sessions(_)
            | StagePlan::LmBench(_)
            | StagePlan::Lockstep(_) => {
                panic!("expected an open stage")
            }
        }
    }

    #[test]
    fn offline_issues_every_sample_at_once_sized_by_qps_and_duration() {
        // ⌊1.1 · 10 s · 50/s⌋ = 550 > min_query_count 100.
        let s = settings(
            "model: llama3_1-8b\nscenario: Offline\ntarget_qps: 50\nmin_duration: 10000\nmin_query_count: 100\n\
             performance_sample_count: 0\nsample_concatenate_permutation: false\n",
        );
        let schedule = build_schedule(&s, 200).unwrap();
        assert_eq!(schedule.stages.len(), 1);
        let times = send_at(&schedule.stages[0]);
        assert_eq!(times.len(), 550);
        assert!(times.iter().all(|t| t.is_zero()));
        // The loaded set repeated in order: sample i and i + 200 are the same.
        assert_eq!(schedule.samples[0], schedule.samples[200]);
        let mut first: Vec<usize> = schedule.samples[..200].to_vec();
        first.sort();
        assert_eq!(first, (0..200).collect::<Vec<_>>());
    }

    #[test]
    fn server_arrivals_are_seeded_poisson_until_min_duration_and_min_queries() {
        let s = settings(
            "model: llama3_1-8b\nscenario: Server\ntarget_qps: 10\nmin_duration: 60000\nmin_query_count: 100\n\
             sample_concatenate_permutation: false\n",
        );
        let a = build_schedule(&s, 1000).unwrap();
        let b = build_schedule(&s, 1000).unwrap();
        let times = send_at(&a.stages[0]);
        assert_eq!(times, send_at(&b.stages[0]), "same seeds, same schedule");
        assert_eq!(a.samples, b.samples);
        assert_eq!(times[0], Duration::ZERO);
        // The one before the last is under 60 s; the last is at or past it.
        let n = times.len();
        assert!(times[n - 2] < Duration::from_secs(60) && times[n - 1] >= Duration::from_secs(60));
        assert_eq!(a.final_scheduled, times[n - 1]);
        // ~600 arrivals at 10/s over 60 s (Poisson: ±3σ ≈ ±75).
        assert!((525..=675).contains(&n), "{n}");
        // The first gap is −ln(1 − u)/10 for the first canonical draw of mt19937(schedule_rng_seed).
        let mut rng = Mt19937::new(s.schedule_rng_seed);
        let gap = (rng.exponential(10.0) * 1e9) as u64;
        assert_eq!(times[1], Duration::from_nanos(gap));
        // Every sample comes from the loaded set (performance_sample_count 13368 > 1000: all of it).
        assert!(a.samples.iter().all(|s| *s < 1000));
    }

    #[test]
    fn server_query_count_is_capped_by_max_query_count() {
        let s = settings(
            "model: llama3_1-8b\nscenario: Server\ntarget_qps: 10\nmin_duration: 60000\nmax_query_count: 50\n",
        );
        let schedule = build_schedule(&s, 10).unwrap();
        assert_eq!(send_at(&schedule.stages[0]).len(), 50);
        assert_eq!(schedule.samples.len(), 50);
    }

    #[test]
    fn single_stream_is_a_closed_loop_of_one() {
        // ⌈2000 ms / 10 ms⌉ = 200 > 100.
        let s = settings(
            "model: llama3_1-8b\nscenario: SingleStream\nmin_duration: 2000\nexpected_latency: 10\n\
             sample_concatenate_permutation: false\n",
        );
        let schedule = build_schedule(&s, 10).unwrap();
        match &schedule.stages[0].plan {
            StagePlan::Closed {
                concurrency, total, ..
            } => assert_eq!((*concurrency, *total), (1, Some(200))),
            StagePlan::Open { .. }
            | StagePlan::Paced(_)
            | StagePlan::Trace(_)
            | StagePlan::Sessions(_)
            | StagePlan::LmBench(_)
            | StagePlan::Lockstep(_) => {
                panic!("closed loop expected")
            }
        }
        assert_eq!(schedule.samples.len(), 200);
    }

    #[test]
    fn warmup_is_a_stage_of_its_own_before_the_measured_one() {
        let s = settings(
            "model: llama3_1-8b\nscenario: Offline\nwarmup_queries: 3\nmin_query_count: 10\nmin_duration: 0\n",
        );
        let schedule = build_schedule(&s, 5).unwrap();
        assert_eq!(schedule.stages.len(), 2);
        assert_eq!(schedule.measured_stage, 1);
        assert_eq!(send_at(&schedule.stages[0]).len(), 3);
        assert_eq!(schedule.samples.len(), 13);
    }

    fn lockstep_of(stage: &Stage) -> &Lockstep {
        match &stage.plan {
            StagePlan::Lockstep(l) => l,
            _ => panic!("expected a lockstep stage"),
        }
    }

    #[test]
    fn multi_stream_sends_contiguous_queries_of_the_padded_loaded_set() {
        // expected_latency 100 ms → period 100 ms; queries are generated while the previous timestamp is below
        // 2 · 1 s = 2000 ms or fewer than 5 exist: timestamps 0, 100, …, 2000 → 21 queries (the 21st, at 2000 ms,
        // is pushed because the one before it, 1900, was below 2000).
        let s = settings(
            "model: llama3_1-8b\nscenario: MultiStream\nsamples_per_query: 3\nmin_duration: 1000\n\
             min_query_count: 5\nexpected_latency: 100\nperformance_sample_count: 4\n\
             sample_concatenate_permutation: false\n",
        );
        let schedule = build_schedule(&s, 10).unwrap();
        let plan = lockstep_of(&schedule.stages[0]);
        assert_eq!(
            *plan,
            Lockstep {
                group: 3,
                queries: 21,
                min_queries: 5,
                min_duration: Duration::from_secs(1),
                max_queries: 0,
                max_duration: None,
            }
        );
        assert_eq!(schedule.samples.len(), 21 * 3);
        // The loaded set: indices 0..4 (performance_sample_count) shuffled by qsl_rng_seed, padded with its first 2.
        let mut all: Vec<usize> = (0..4).collect();
        Mt19937::new(s.qsl_rng_seed).shuffle(&mut all);
        let padded = [all[0], all[1], all[2], all[3], all[0], all[1]];
        // Each query is 3 consecutive padded samples from a start below 4, drawn after the unique shuffle of
        // [0, 3] and ⌈5/6⌉ = 1 equal-issue shuffle of 6 indices.
        let mut rng = Mt19937::new(s.sample_index_rng_seed);
        rng.shuffle(&mut [0, 3]);
        rng.shuffle(&mut [0, 1, 2, 3, 4, 5]);
        for query in schedule.samples.chunks(3) {
            let start = rng.uniform_below(4) as usize;
            assert_eq!(query, &padded[start..start + 3]);
        }
    }

    /// The sample indices real LoadGen issued for the same settings: the `mlcommons-loadgen` wheel (LoadGen 5.x
    /// from PyPI) driven by a Python SUT (`ConstructQSL(10, 4, …)`, the seeds of our built-in mlperf.conf,
    /// `min_duration_ms` 1000, `min_query_count` 5, expected latency 100 ms, MultiStream 3 samples per query,
    /// Server 10 QPS), printing what `issue_queries` received; its detail log says `loaded_qsl_set` [0,2,1,3,0,2]
    /// and `generated_query_count` 21 for MultiStream.
    #[test]
    fn samples_match_what_loadgen_itself_issues() {
        // That wheel's seeds, and no equal issue: it was driven through TestSettings, not FromConfig.
        let base = "model: llama3_1-8b\nperformance_sample_count: 4\nmin_duration: 1000\nmin_query_count: 5\n\
                    expected_latency: 100\nqsl_rng_seed: 1780908523862526354\n\
                    sample_index_rng_seed: 14771362308971278857\nschedule_rng_seed: 18209322760996052031\n\
                    sample_concatenate_permutation: false\n";
        let ms = settings(&format!(
            "{base}scenario: MultiStream\nsamples_per_query: 3\n"
        ));
        let schedule = build_schedule(&ms, 10).unwrap();
        assert_eq!(schedule.loaded, [0, 2, 1, 3]);
        let loadgen_ms: [[usize; 3]; 21] = [
            [1, 3, 0],
            [0, 2, 1],
            [2, 1, 3],
            [3, 0, 2],
            [1, 3, 0],
            [0, 2, 1],
            [1, 3, 0],
            [0, 2, 1],
            [0, 2, 1],
            [3, 0, 2],
            [1, 3, 0],
            [0, 2, 1],
            [2, 1, 3],
            [3, 0, 2],
            [0, 2, 1],
            [0, 2, 1],
            [0, 2, 1],
            [3, 0, 2],
            [3, 0, 2],
            [3, 0, 2],
            [2, 1, 3],
        ];
        assert_eq!(schedule.generated_queries, 21);
        let queries: Vec<&[usize]> = schedule.samples.chunks(3).collect();
        assert_eq!(
            queries,
            loadgen_ms.iter().map(|q| &q[..]).collect::<Vec<_>>()
        );
        let loadgen_single = [2, 3, 1, 0, 1, 0, 0, 3, 1, 0, 2, 3, 0];
        let ss = settings(&format!("{base}scenario: SingleStream\n"));
        assert_eq!(
            build_schedule(&ss, 10).unwrap().samples[..10],
            loadgen_single[..10]
        );
        let server = settings(&format!("{base}scenario: Server\ntarget_qps: 10\n"));
        assert_eq!(
            build_schedule(&server, 10).unwrap().samples[..13],
            loadgen_single
        );
    }

    /// What LoadGen 6.0.17 (the `mlcommons-loadgen` wheel) issued with its built-in mlperf.conf and a user.conf of
    /// `min_duration = 1000`, `min_query_count = 5`, `Server.target_qps = 20`, `Offline.target_qps = 10`, for
    /// llama3_1-8b over a QSL of 10 samples (`launcher/tests/mlperf_oracle/loadgen_sut.py … 10 4`; mlperf.conf's
    /// performance_sample_count 13368 loads all 10).
    #[test]
    fn equal_issue_samples_and_counts_match_loadgen_6() {
        let base = "model: llama3_1-8b\nmin_duration: 1000\nmin_query_count: 5\n";
        let server = settings(&format!("{base}scenario: Server\ntarget_qps: 20\n"));
        assert!(server.sample_concatenate_permutation);
        let schedule = build_schedule(&server, 10).unwrap();
        // ~20 arrivals in 1 s, rounded up to whole sets of 10: 30. `min_queries` was 5 when the equal-issue
        // distribution was built, so it holds one shuffle, issued three times over.
        let permutation = [7, 2, 1, 0, 5, 6, 3, 4, 8, 9];
        assert_eq!(schedule.generated_queries, 30);
        assert_eq!(schedule.samples, permutation.repeat(3));

        let offline = settings(&format!("{base}scenario: Offline\ntarget_qps: 10\n"));
        let schedule = build_schedule(&offline, 10).unwrap();
        // One query of max(5, ⌊1.1 · 1 s · 10/s⌋ = 11) samples, padded to 20: two shuffles of the loaded set.
        assert_eq!(
            (schedule.generated_queries, schedule.samples_per_query),
            (1, 20)
        );
        assert_eq!(
            schedule.samples,
            [1, 9, 7, 5, 2, 6, 0, 4, 3, 8, 6, 5, 7, 2, 9, 1, 0, 3, 4, 8]
        );
    }

    /// LoadGen 6.0.17, MultiStream, user.conf `min_duration = 1000`, `min_query_count = 5`,
    /// `MultiStream.samples_per_query = 3`, `MultiStream.target_latency = 100`,
    /// `performance_sample_count_override = 4`: 21 queries by duration, `min_queries` 5 rounded up to the padded
    /// set of 6 and grown by 6 while under 2 s → 24 (its detail log: `generated_query_count` 24). Query starts are
    /// still uniform draws.
    #[test]
    fn equal_issue_multi_stream_rounds_the_query_count_to_padded_sets() {
        let s = settings(
            "model: llama3_1-8b\nscenario: MultiStream\nsamples_per_query: 3\nmin_duration: 1000\n\
             min_query_count: 5\nexpected_latency: 100\nperformance_sample_count: 4\n",
        );
        let schedule = build_schedule(&s, 10).unwrap();
        assert_eq!(schedule.generated_queries, 24);
        let loadgen: [usize; 72] = [
            2, 3, 1, 2, 3, 1, 1, 0, 2, 2, 3, 1, 3, 1, 0, 3, 1, 0, 3, 1, 0, 3, 1, 0, 0, 2, 3, 1, 0,
            2, 1, 0, 2, 3, 1, 0, 2, 3, 1, 2, 3, 1, 0, 2, 3, 2, 3, 1, 0, 2, 3, 0, 2, 3, 3, 1, 0, 1,
            0, 2, 3, 1, 0, 0, 2, 3, 2, 3, 1, 0, 2, 3,
        ];
        assert_eq!(schedule.samples, loadgen);
    }

    #[test]
    fn equal_issue_single_stream_rounds_min_query_count_as_test_settings_internal_does() {
        // max(5, ⌊2 · 1 s / 10 ms⌋ = 200) = 200, plus 10 − 200 mod 10 = a whole set more: 210.
        let s = settings(
            "model: llama3_1-8b\nscenario: SingleStream\nmin_duration: 1000\nmin_query_count: 5\n\
             expected_latency: 10\n",
        );
        let schedule = build_schedule(&s, 10).unwrap();
        assert_eq!(schedule.samples.len(), 210);
        // LoadGen 6.0.17's first three sets (same run as above, SingleStream).
        assert_eq!(
            schedule.samples[..30],
            [
                7, 2, 1, 0, 5, 6, 3, 4, 8, 9, 7, 8, 1, 2, 4, 0, 5, 9, 3, 6, 2, 8, 1, 9, 3, 7, 4, 5,
                6, 0
            ]
        );
        // The equal-issue order of 210 queries: 21 shuffles of the set, each a permutation.
        for set in schedule.samples.chunks(10) {
            let mut sorted = set.to_vec();
            sorted.sort();
            assert_eq!(sorted, (0..10).collect::<Vec<_>>());
        }
    }

    #[test]
    fn multi_stream_accuracy_covers_every_sample_in_shuffled_strides() {
        // 7 samples, 3 per query: starts 0, 3, 6 (⌈7/3⌉ = 3 queries), the last one padded with the first two.
        let s = settings(
            "model: llama3_1-8b\nscenario: MultiStream\nmode: AccuracyOnly\nsamples_per_query: 3\n",
        );
        let schedule = build_schedule(&s, 7).unwrap();
        let plan = lockstep_of(&schedule.stages[0]);
        assert_eq!((plan.group, plan.queries, plan.min_queries), (3, 3, 3));
        let mut covered = schedule.samples.clone();
        covered.sort();
        covered.dedup();
        assert_eq!(covered, (0..7).collect::<Vec<_>>());
        let mut starts = vec![0usize, 3, 6];
        Mt19937::new(s.sample_index_rng_seed).shuffle(&mut starts);
        let mut loaded: Vec<usize> = (0..7).collect();
        Mt19937::new(s.qsl_rng_seed).shuffle(&mut loaded);
        let padded: Vec<usize> = loaded.iter().chain(&loaded[..2]).copied().collect();
        for (query, start) in schedule.samples.chunks(3).zip(starts) {
            assert_eq!(query, &padded[start..start + 3]);
        }
    }

    #[test]
    fn accuracy_mode_issues_every_sample_once() {
        let s = settings(
            "model: llama3_1-8b\nscenario: Server\nmode: AccuracyOnly\nperformance_sample_count: 2\n",
        );
        let schedule = build_schedule(&s, 7).unwrap();
        let mut samples = schedule.samples.clone();
        samples.sort();
        assert_eq!(samples, (0..7).collect::<Vec<_>>());
        assert_eq!(send_at(&schedule.stages[0]).len(), 7);
        assert!(build_schedule(&s, 0).is_err());
    }
}
