//! Time series of a few server metrics per target, for plots beside the client's own timeline: requests running and
//! waiting, KV-cache usage, the prefix-cache hit rate per scrape interval, prompt and generation tokens per second
//! (reset-aware rates between consecutive scrapes), and the llm-d router's pool gauges when a target exposes them.
//!
//! Streamed in one pass; each series keeps at most [`MAX_POINTS`] points: when full, neighbouring points are averaged
//! in pairs and later points each stand for twice as many scrapes, so a long run keeps its whole shape.

use std::collections::HashMap;
use std::path::Path;

use super::catalogue::{self, Combine};
use super::jsonl::{Scrape, read_jsonl};
use super::parse::{MetricKind, Role, resolve};
use super::{ServerMetricsError, ServerSeries};

/// The most points a plot series keeps.
pub const MAX_POINTS: usize = 2000;
/// [`ServerSeries::metric`] of the derived series.
pub const PREFIX_CACHE_HIT_RATE: &str = "prefix cache hit rate";
pub const GENERATION_TOKENS_PER_S: &str = "generation tokens/s";
pub const PROMPT_TOKENS_PER_S: &str = "prompt tokens/s";

/// Gauges plotted as they are, by their Prometheus name, in plotting order.
const GAUGES: [&str; 8] = [
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc",
    "vllm:gpu_cache_usage_perc",
    "inference_pool_average_kv_cache_utilization",
    "inference_pool_average_queue_size",
    "inference_pool_average_running_requests",
    "inference_pool_ready_pods",
];

/// Counters whose increases between scrapes feed the derived series.
const GENERATION: &str = "vllm:generation_tokens_total";
const PROMPT: &str = "vllm:prompt_tokens_total";
const HITS: &str = "vllm:prefix_cache_hits_total";
const QUERIES: &str = "vllm:prefix_cache_queries_total";
const COUNTERS: [&str; 4] = [GENERATION, PROMPT, HITS, QUERIES];

/// Averages points in pairs whenever it holds `cap`.
#[derive(Debug, Clone)]
struct Downsampler {
    cap: usize,
    /// Raw points per kept point.
    stride: usize,
    pending: (f64, f64, usize),
    points: Vec<(f64, f64)>,
}

impl Downsampler {
    fn new(cap: usize) -> Self {
        Self {
            cap: cap.max(2),
            stride: 1,
            pending: (0.0, 0.0, 0),
            points: Vec::new(),
        }
    }

    fn push(&mut self, t: f64, v: f64) {
        if !v.is_finite() {
            return;
        }
        self.pending.0 += t;
        self.pending.1 += v;
        self.pending.2 += 1;
        if self.pending.2 >= self.stride {
            self.flush_pending();
        }
    }

    fn flush_pending(&mut self) {
        let (t, v, n) = std::mem::replace(&mut self.pending, (0.0, 0.0, 0));
        if n == 0 {
            return;
        }
        self.points.push((t / n as f64, v / n as f64));
        if self.points.len() >= self.cap {
            self.points = self
                .points
                .chunks(2)
                .map(|pair| {
                    let n = pair.len() as f64;
                    (
                        pair.iter().map(|p| p.0).sum::<f64>() / n,
                        pair.iter().map(|p| p.1).sum::<f64>() / n,
                    )
                })
                .collect();
            self.stride *= 2;
        }
    }

    fn finish(mut self) -> Vec<(f64, f64)> {
        self.flush_pending();
        self.points
    }
}

#[derive(Debug)]
struct TargetSeries {
    url: String,
    gauges: Vec<Option<Downsampler>>,
    generation: Option<Downsampler>,
    prompt: Option<Downsampler>,
    hit_rate: Option<Downsampler>,
    /// Counter series id → last raw value.
    last: HashMap<String, f64>,
    /// The previous successful scrape: its time and whether its page was complete.
    previous: Option<(f64, bool)>,
}

/// Per target, the plot series listed in the module docs; series a target never exposed are left out.
pub fn plot_series<I>(scrapes: I) -> Vec<ServerSeries>
where
    I: IntoIterator<Item = Scrape>,
{
    plot_series_capped(scrapes, MAX_POINTS)
}

fn plot_series_capped<I>(scrapes: I, cap: usize) -> Vec<ServerSeries>
where
    I: IntoIterator<Item = Scrape>,
{
    let mut targets: Vec<TargetSeries> = Vec::new();
    let mut by_url: HashMap<String, usize> = HashMap::new();
    for scrape in scrapes {
        if !scrape.ok {
            continue;
        }
        let ti = *by_url.entry(scrape.target.clone()).or_insert_with(|| {
            targets.push(TargetSeries {
                url: scrape.target.clone(),
                gauges: GAUGES.iter().map(|_| None).collect(),
                generation: None,
                prompt: None,
                hit_rate: None,
                last: HashMap::new(),
                previous: None,
            });
            targets.len() - 1
        });
        add_scrape(&mut targets[ti], &scrape, cap);
    }
    let mut out = Vec::new();
    for target in targets {
        let mut push = |metric: &str, unit: &str, series: Option<Downsampler>| {
            if let Some(series) = series {
                out.push(ServerSeries {
                    metric: metric.to_owned(),
                    target: target.url.clone(),
                    unit: unit.to_owned(),
                    points: series.finish(),
                });
            }
        };
        for (name, series) in GAUGES.iter().zip(target.gauges) {
            let unit = catalogue::lookup(name, MetricKind::Gauge).map_or("", |(_, k)| k.unit);
            push(name, unit, series);
        }
        push(PREFIX_CACHE_HIT_RATE, "percent", target.hit_rate);
        push(PROMPT_TOKENS_PER_S, "tokens/s", target.prompt);
        push(GENERATION_TOKENS_PER_S, "tokens/s", target.generation);
    }
    out
}

fn add_scrape(target: &mut TargetSeries, scrape: &Scrape, cap: usize) {
    let t = scrape.t_s;
    let mut gauges: Vec<(f64, u32)> = vec![(0.0, 0); GAUGES.len()];
    let mut increases = [0.0f64; COUNTERS.len()];
    let mut seen = [false; COUNTERS.len()];
    let born_from_zero = target.previous.is_some_and(|(_, complete)| complete);
    for sample in &scrape.samples {
        let (_, kind, role) = resolve(&sample.name, &scrape.types);
        if role != Role::Value || sample.value.is_nan() {
            continue;
        }
        if matches!(kind, MetricKind::Gauge | MetricKind::Untyped)
            && let Some(i) = GAUGES.iter().position(|g| *g == sample.name)
        {
            gauges[i].0 += sample.value;
            gauges[i].1 += 1;
            continue;
        }
        if !matches!(kind, MetricKind::Counter | MetricKind::Untyped) {
            continue;
        }
        let Some((_, known)) = catalogue::lookup(&sample.name, MetricKind::Counter) else {
            continue;
        };
        let Some(ci) = COUNTERS.iter().position(|c| *c == known.name) else {
            continue;
        };
        seen[ci] = true;
        let id = format!("{}{}", sample.name, sample.labels.render_without(""));
        let value = sample.value;
        let increase = match target.last.insert(id, value) {
            // A drop is a restart: the value after it is all increase.
            Some(last) if value < last => value,
            Some(last) => value - last,
            None if born_from_zero => value,
            None => 0.0,
        };
        increases[ci] += increase;
    }
    for (i, (sum, n)) in gauges.into_iter().enumerate() {
        if n == 0 {
            continue;
        }
        let combine = catalogue::lookup(GAUGES[i], MetricKind::Gauge)
            .map_or(Combine::Mean, |(_, k)| k.combine);
        let value = match combine {
            Combine::Sum => sum,
            Combine::Mean => sum / f64::from(n),
        };
        target.gauges[i]
            .get_or_insert_with(|| Downsampler::new(cap))
            .push(t, value);
    }
    if let Some((before, _)) = target.previous {
        let dt = t - before;
        if dt > 0.0 {
            for (ci, slot) in [(0, &mut target.generation), (1, &mut target.prompt)] {
                if seen[ci] {
                    slot.get_or_insert_with(|| Downsampler::new(cap))
                        .push(t, increases[ci] / dt);
                }
            }
        }
        // Only intervals with queries have a hit rate; an idle interval is a gap, not 0 %.
        if seen[3] && increases[3] > 0.0 {
            target
                .hit_rate
                .get_or_insert_with(|| Downsampler::new(cap))
                .push(t, increases[2] / increases[3] * 100.0);
        }
    }
    target.previous = Some((t, scrape.truncated.is_none()));
}

/// [`plot_series`] reading `server_metrics.jsonl`; damaged lines are skipped.
pub fn plot_series_file(path: &Path) -> Result<Vec<ServerSeries>, ServerMetricsError> {
    let scrapes = read_jsonl(path)?.filter_map(|item| match item {
        Ok(scrape) => Some(scrape),
        Err(e) => {
            tracing::warn!("skipping a damaged server metrics line: {e}");
            None
        }
    });
    Ok(plot_series(scrapes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server_metrics::parse::parse_page;

    fn scrape(t: f64, text: &str) -> Scrape {
        let page = parse_page(text, 1000);
        Scrape {
            t_s: t,
            target: "http://a/metrics".to_owned(),
            ok: true,
            scrape_ms: None,
            error: None,
            types: page.types,
            samples: page.samples,
            truncated: None,
        }
    }

    fn page(running: f64, generation: f64, queries: f64, hits: f64) -> String {
        format!(
            "# TYPE vllm:num_requests_running gauge\n\
             vllm:num_requests_running{{engine=\"0\"}} {running}\n\
             vllm:num_requests_running{{engine=\"1\"}} 1\n\
             # TYPE vllm:generation_tokens counter\nvllm:generation_tokens_total {generation}\n\
             # TYPE vllm:prefix_cache_queries counter\nvllm:prefix_cache_queries_total {queries}\n\
             # TYPE vllm:prefix_cache_hits counter\nvllm:prefix_cache_hits_total {hits}\n"
        )
    }

    #[test]
    fn rates_and_hit_rates_come_from_consecutive_scrapes() {
        let scrapes = vec![
            scrape(0.0, &page(2.0, 0.0, 0.0, 0.0)),
            scrape(0.5, &page(3.0, 50.0, 100.0, 25.0)),
            // Restarted: the counter drops to 10, all of it new.
            scrape(1.0, &page(0.0, 10.0, 100.0, 25.0)),
        ];
        let series = plot_series(scrapes);
        let by_name = |name: &str| series.iter().find(|s| s.metric == name).unwrap();
        let running = by_name("vllm:num_requests_running");
        assert_eq!(running.unit, "requests");
        assert_eq!(running.points, [(0.0, 3.0), (0.5, 4.0), (1.0, 1.0)]);
        // 50 tokens in 0.5 s, then 10 in 0.5 s.
        assert_eq!(
            by_name(GENERATION_TOKENS_PER_S).points,
            [(0.5, 100.0), (1.0, 20.0)]
        );
        // 25 of 100; the second interval had no queries: no point.
        assert_eq!(by_name(PREFIX_CACHE_HIT_RATE).points, [(0.5, 25.0)]);
        assert_eq!(by_name(PREFIX_CACHE_HIT_RATE).unit, "percent");
        // Never exposed: left out.
        assert!(
            series
                .iter()
                .all(|s| s.metric != "vllm:kv_cache_usage_perc")
        );
        assert!(series.iter().all(|s| s.metric != PROMPT_TOKENS_PER_S));
    }

    #[test]
    fn long_runs_are_downsampled_by_averaging_pairs() {
        let scrapes = (0..10_000).map(|i| {
            scrape(
                f64::from(i),
                &format!(
                    "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting {}\n",
                    i % 2
                ),
            )
        });
        let series = plot_series_capped(scrapes, 100);
        let waiting = &series[0];
        assert!(waiting.points.len() <= 100, "{}", waiting.points.len());
        assert!(waiting.points.len() >= 50, "{}", waiting.points.len());
        // Alternating 0/1 averages to 0.5 once pairs are merged; times stay in order.
        assert!(waiting.points.iter().all(|p| (p.1 - 0.5).abs() < 1e-9));
        assert!(waiting.points.windows(2).all(|w| w[0].0 < w[1].0));
    }
}
