//! Time series of a few server metrics per target, for plots beside the client's own timeline: requests running and
//! waiting, KV-cache usage, the prefix-cache hit rate per scrape interval, prompt and generation tokens per second
//! (reset-aware rates between consecutive scrapes), and the llm-d router's pool gauges when a target exposes them.
//! Every engine in the [`catalogue`](super::catalogue) feeds the same series, each line labelled with the engine's
//! own name for it; counters a target lacks are built as the summaries build them (llama.cpp's prompt tokens from
//! computed + cached, its hit rate from cached / prompt tokens).
//!
//! Streamed in one pass; each series keeps at most [`MAX_POINTS`] points: when full, neighbouring points are averaged
//! in pairs and later points each stand for twice as many scrapes, so a long run keeps its whole shape.

use std::collections::HashMap;
use std::path::Path;

use super::catalogue::{self, Combine, Key};
use super::jsonl::{Scrape, read_jsonl};
use super::parse::{MetricKind, Role, resolve};
use super::{ServerMetricsError, ServerSeries};

/// The most points a plot series keeps.
pub(crate) const MAX_POINTS: usize = 2000;
/// [`ServerSeries::metric`] of the derived series.
pub(crate) const PREFIX_CACHE_HIT_RATE: &str = "prefix cache hit rate";
pub(crate) const GENERATION_TOKENS_PER_S: &str = "generation tokens/s";
pub(crate) const PROMPT_TOKENS_PER_S: &str = "prompt tokens/s";

/// Gauges plotted as they are, by key, in plotting order.
const GAUGES: [&Key; 7] = [
    &catalogue::RUNNING,
    &catalogue::WAITING,
    &catalogue::KV_CACHE_USAGE,
    &catalogue::POOL_KV_CACHE_USAGE,
    &catalogue::POOL_QUEUE_SIZE,
    &catalogue::POOL_RUNNING,
    &catalogue::POOL_READY_PODS,
];

/// Counters whose increases between scrapes feed the derived series.
const COUNTERS: [&Key; 6] = [
    &catalogue::GENERATION_TOKENS,
    &catalogue::PROMPT_TOKENS,
    &catalogue::PROMPT_TOKENS_COMPUTED,
    &catalogue::PROMPT_TOKENS_CACHED,
    &catalogue::PREFIX_CACHE_HITS,
    &catalogue::PREFIX_CACHE_QUERIES,
];

/// Histograms whose observations' total stands in for a token counter a target lacks.
const TOTALS: [&Key; 2] = [
    &catalogue::REQUEST_PROMPT_TOKENS,
    &catalogue::REQUEST_GENERATION_TOKENS,
];

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
    /// Per [`GAUGES`] key: its line and the name it is labelled with.
    gauges: Vec<Option<(String, Downsampler)>>,
    generation: Option<Downsampler>,
    prompt: Option<Downsampler>,
    hit_rate: Option<Downsampler>,
    /// Per key, the catalogue entry this target's line comes from (as the summaries choose it).
    claimed: HashMap<&'static str, usize>,
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
                claimed: HashMap::new(),
                last: HashMap::new(),
                previous: None,
            });
            targets.len() - 1
        });
        add_scrape(&mut targets[ti], &scrape, cap);
    }
    let mut out = Vec::new();
    for target in targets {
        let mut push = |metric: String, unit: &str, series: Option<Downsampler>| {
            if let Some(series) = series {
                out.push(ServerSeries {
                    metric,
                    target: target.url.clone(),
                    unit: unit.to_owned(),
                    points: series.finish(),
                });
            }
        };
        for (key, line) in GAUGES.iter().zip(target.gauges) {
            if let Some((name, series)) = line {
                push(name, key.unit, Some(series));
            }
        }
        push(PREFIX_CACHE_HIT_RATE.to_owned(), "percent", target.hit_rate);
        push(PROMPT_TOKENS_PER_S.to_owned(), "tokens/s", target.prompt);
        push(
            GENERATION_TOKENS_PER_S.to_owned(),
            "tokens/s",
            target.generation,
        );
    }
    out
}

/// A sample the series use: which catalogue entry, and whether it is a gauge value, a counter or a histogram's sum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Use {
    Gauge,
    Counter,
    Total,
}

fn add_scrape(target: &mut TargetSeries, scrape: &Scrape, cap: usize) {
    let t = scrape.t_s;
    // Which samples the series read, and the catalogue entry of each.
    let mut used: Vec<(usize, usize, Use)> = Vec::new();
    for (si, sample) in scrape.samples.iter().enumerate() {
        if sample.value.is_nan() {
            continue;
        }
        let (family, kind, role) = resolve(&sample.name, &scrape.types);
        let found = match (kind, role) {
            (MetricKind::Gauge | MetricKind::Untyped, Role::Value) => {
                catalogue::lookup(&sample.name, &sample.labels, kind)
                    .filter(|(_, k)| k.key.kind == MetricKind::Gauge)
                    .map(|(i, _)| (i, Use::Gauge))
            }
            _ => None,
        }
        .or_else(|| match (kind, role) {
            (MetricKind::Counter | MetricKind::Untyped, Role::Value) => {
                catalogue::lookup(&sample.name, &sample.labels, MetricKind::Counter)
                    .map(|(i, _)| (i, Use::Counter))
            }
            (MetricKind::Histogram, Role::Sum) => {
                catalogue::lookup(family, &sample.labels, MetricKind::Histogram)
                    .map(|(i, _)| (i, Use::Total))
            }
            _ => None,
        });
        let Some((i, usage)) = found else {
            continue;
        };
        let key = catalogue::KNOWN[i].key;
        let wanted = match usage {
            Use::Gauge => GAUGES.contains(&key),
            Use::Counter => COUNTERS.contains(&key),
            Use::Total => TOTALS.contains(&key),
        };
        if wanted {
            used.push((si, i, usage));
        }
    }
    // One name per key per target, the summaries' rule: the first-listed entry the target showed.
    let mut shown: HashMap<&'static str, usize> = HashMap::new();
    for &(_, i, _) in &used {
        let key = catalogue::KNOWN[i].key.key;
        if !target.claimed.contains_key(key) {
            shown
                .entry(key)
                .and_modify(|first| *first = (*first).min(i))
                .or_insert(i);
        }
    }
    target.claimed.extend(shown);

    let mut gauges: Vec<Option<(String, f64, u32)>> = vec![None; GAUGES.len()];
    let mut increases: HashMap<&'static str, f64> = HashMap::new();
    let born_from_zero = target.previous.is_some_and(|(_, complete)| complete);
    for (si, i, usage) in used {
        let known = &catalogue::KNOWN[i];
        if target.claimed.get(known.key.key) != Some(&i) {
            continue;
        }
        let sample = &scrape.samples[si];
        let value = sample.value * known.scale;
        if usage == Use::Gauge {
            let Some(gi) = GAUGES.iter().position(|k| *k == known.key) else {
                continue;
            };
            // Labelled as the summaries name it: the name on the wire, and the label it is picked by.
            let entry = gauges[gi].get_or_insert_with(|| {
                let name = match known.label {
                    Some((label, value)) => format!("{}{{{label}=\"{value}\"}}", sample.name),
                    None => sample.name.clone(),
                };
                (name, 0.0, 0)
            });
            entry.1 += value;
            entry.2 += 1;
            continue;
        }
        let id = format!("{}{}", sample.name, sample.labels.render_without(""));
        let increase = match target.last.insert(id, value) {
            // A drop is a restart: the value after it is all increase.
            Some(last) if value < last => value,
            Some(last) => value - last,
            None if born_from_zero => value,
            None => 0.0,
        };
        *increases.entry(known.key.key).or_default() += increase;
    }
    for (gi, part) in gauges.into_iter().enumerate() {
        let Some((name, sum, n)) = part else {
            continue;
        };
        let value = match GAUGES[gi].combine {
            Combine::Sum => sum,
            Combine::Mean => sum / f64::from(n),
        };
        target.gauges[gi]
            .get_or_insert_with(|| (name, Downsampler::new(cap)))
            .1
            .push(t, value);
    }
    if let Some((before, _)) = target.previous {
        let dt = t - before;
        let own = |key: &str| increases.get(key).copied();
        let total = |key: &str| increases.get(key).copied();
        // Counters and histogram totals share `increases`: the keys differ.
        let counter = |key: &str| catalogue::counter_increase(key, &own, &total).map(|(v, _)| v);
        if dt > 0.0 {
            for (key, slot) in [
                ("generation_tokens", &mut target.generation),
                ("prompt_tokens", &mut target.prompt),
            ] {
                if let Some(increase) = counter(key) {
                    slot.get_or_insert_with(|| Downsampler::new(cap))
                        .push(t, increase / dt);
                }
            }
        }
        // Only intervals with queries have a hit rate; an idle interval is a gap, not 0 %.
        if let Some((hits, queries, _)) = catalogue::ratio_parts("prefix_cache_hit_rate", &counter)
            && queries > 0.0
        {
            target
                .hit_rate
                .get_or_insert_with(|| Downsampler::new(cap))
                .push(t, hits / queries * 100.0);
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
