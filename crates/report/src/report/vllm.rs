//! vllm bench serve's result JSON (`--save-result`; `vllm/benchmarks/serve.py` `calculate_metrics`), in ms.
//!
//! vLLM's own definitions (v0.32): TTFT ends at the first chunk carrying `choices` (even empty or role-only); ITL
//! is the gap between consecutive `choices` chunks, pooled; E2EL ends at the last `choices` chunk (not the usage
//! chunk); TPOT = (E2EL − TTFT)/(n − 1) for n > 1; a stream without a `choices` chunk failed; input tokens are
//! the server's `usage.prompt_tokens` when it reports them, else the prompt lengths as built. Statistics are
//! numpy's: mean, median, population std and linear percentiles, 0 for an empty sample. `duration` spans the
//! first scheduled send to the last response.

use std::io;

use serde_json::{Map, Value, json};

use super::goodput::{Definition, GoodputTally};
use super::meta::{ApiKind, RunMeta};
use super::sample::{FloatStore, SampleId, SampleView};
use super::secs;
use llmbench_model::record::RequestRecord;
use llmbench_model::wallclock;

/// The `backend` / `endpoint_type` vLLM names for the API we used; vLLM's bench has no backend for the Responses
/// and Messages APIs, so those say which API it was in llmbench's words.
fn backend(meta: &RunMeta) -> &'static str {
    match meta.api {
        ApiKind::Chat => "openai-chat",
        ApiKind::Completion => "vllm",
        ApiKind::Responses => "openai-responses",
        ApiKind::Messages => "anthropic-messages",
        ApiKind::Embeddings => "openai-embeddings",
        ApiKind::Rerank => "vllm-rerank",
    }
}

/// Python's `str(float)`: `10.0`, `2.5`, `inf`.
fn py_float(x: f64) -> String {
    if x.is_infinite() && x > 0.0 {
        "inf".to_owned()
    } else {
        format!("{x:?}")
    }
}

/// `{label or backend}-{request_rate}qps[-concurrency{N}]-{model basename}-{YYYYmmdd-HHMMSS}.json`, as
/// `vllm bench serve --save-result` names it. A run of several stages writes one file per stage, told apart
/// by `-stage{N}` before the stamp.
pub fn vllm_result_file(meta: &RunMeta, stage: u32, several_stages: bool) -> String {
    if let Some(name) = result_filename(meta) {
        // `--result-filename` replaces the generated name; a run of several stages keeps them apart.
        return if several_stages {
            let (stem, ext) = name.rsplit_once('.').unwrap_or((&name, "json"));
            format!("{stem}-stage{stage}.{ext}")
        } else {
            name
        };
    }
    let stage_meta = meta.stages.get(stage as usize).copied().unwrap_or_default();
    let label = meta
        .report
        .vllm_label
        .clone()
        .unwrap_or_else(|| backend(meta).to_owned());
    let rate = py_float(stage_meta.rate.unwrap_or(f64::INFINITY));
    let concurrency = stage_meta
        .concurrency
        .map(|c| format!("-concurrency{c}"))
        .unwrap_or_default();
    let model = meta.model.rsplit('/').next().unwrap_or(&meta.model);
    let stage_part = if several_stages {
        format!("-stage{stage}")
    } else {
        String::new()
    };
    let stamp = wallclock::compact_utc((meta.t0_unix_ns / 1_000_000_000) as i64);
    format!("{label}-{rate}qps{concurrency}-{model}{stage_part}-{stamp}.json")
}

/// Success as vLLM counts it: a stream that never carried a `choices` chunk failed ("Never received a valid chunk
/// to calculate TTFT"), even when the server ended it properly.
pub(super) fn succeeded(r: &RequestRecord) -> bool {
    r.succeeded() && (!r.streaming || r.chunks.iter().any(|c| c.kind.has_choices()))
}

/// `--result-filename`, as a file name inside the results directory: vLLM joins it to `--result-dir`, which
/// llmbench replaces with its own directory, so only its last component is used.
fn result_filename(meta: &RunMeta) -> Option<String> {
    let name = meta.report.vllm_result_filename.as_deref()?;
    let last = name.rsplit(['/', '\\']).next().unwrap_or(name);
    (!last.is_empty() && last != "." && last != "..").then(|| last.to_owned())
}

/// A metric's mean, median and std, and its (percentile, value) pairs, in ms.
type MsStats = (f64, f64, f64, Vec<(f64, f64)>);

/// numpy's mean, median, population std and linear percentiles, in ms, of values in seconds; 0 when empty.
fn stats_ms(sample: &mut SampleView<'_>, percentiles: &[f64]) -> io::Result<MsStats> {
    let Some(mean) = sample.mean() else {
        return Ok((
            0.0,
            0.0,
            0.0,
            percentiles.iter().map(|&p| (p, 0.0)).collect(),
        ));
    };
    let n = sample.len() as f64;
    let std = (sample.squared_deviations(mean)? / n).sqrt();
    let fractions: Vec<f64> = std::iter::once(0.5)
        .chain(percentiles.iter().map(|p| p / 100.0))
        .collect();
    let values = sample.percentiles(&fractions)?;
    let at = |v: Option<f64>| v.unwrap_or(0.0) * 1000.0;
    let ps = percentiles
        .iter()
        .zip(&values[1..])
        .map(|(&p, &v)| (p, at(v)))
        .collect();
    Ok((mean * 1000.0, at(values[0]), std * 1000.0, ps))
}

/// The vLLM definition's `E2EL` of `r`: its last `choices` chunk, else its end.
fn e2el_ns(r: &RequestRecord) -> u64 {
    r.e2e_vllm_ns().unwrap_or_else(|| r.e2e_ns())
}

/// What vllm bench serve's result JSON needs of one stage, gathered request by request: counts, extremes and
/// token sums here, each latency sample in a [`FloatStore`]. `max_output_tokens_per_s` and
/// `max_concurrent_requests` need the stage's first send before any request can be placed, so they are worked
/// out apart ([`peak_second_of`]).
#[derive(Debug, Clone)]
pub(crate) struct Vllm {
    count: u64,
    ok: u64,
    start_ns: u64,
    end_ns: u64,
    total_input: u64,
    total_output: u64,
    /// A pooling run's inputs (embedding inputs, rerank documents) of the successful requests.
    total_inputs: u64,
    /// A pooling run's prompts, every request's: vLLM's `num_prompts`, which its batches are cut from.
    prompts: u64,
    /// Whether the run's API is a pooling one, and a rerank.
    pooling: bool,
    rerank: bool,
    goodput: GoodputTally,
    ttft: SampleId,
    tpot: SampleId,
    itl: SampleId,
    e2el: SampleId,
}

impl Vllm {
    pub(crate) fn new(store: &mut FloatStore, meta: &RunMeta) -> Vllm {
        Vllm {
            count: 0,
            ok: 0,
            start_ns: u64::MAX,
            end_ns: 0,
            total_input: 0,
            total_output: 0,
            total_inputs: 0,
            prompts: 0,
            pooling: meta.api.is_pooling(),
            rerank: meta.api == ApiKind::Rerank,
            goodput: GoodputTally::new(&meta.report.goodput, Definition::Vllm),
            ttft: store.sample(),
            tpot: store.sample(),
            itl: store.sample(),
            e2el: store.sample(),
        }
    }

    /// Counts `r`.
    pub(crate) fn add(&mut self, r: &RequestRecord, store: &mut FloatStore) {
        self.count += 1;
        self.start_ns = self.start_ns.min(r.scheduled_ns.min(r.sent_ns));
        self.end_ns = self.end_ns.max(r.end_ns);
        self.goodput.add(r);
        // A rerank batch's first prompt is its query (`async_request_vllm_rerank`), the rest its documents.
        let inputs = u64::from(r.inputs().unwrap_or(1));
        self.prompts += inputs + u64::from(r.inputs().is_some() && self.rerank);
        if !succeeded(r) {
            return;
        }
        self.ok += 1;
        self.total_inputs += inputs;
        // vLLM takes the server's `usage.prompt_tokens` over its own count when the stream reports one.
        self.total_input += u64::from(r.prompt_tokens());
        self.total_output += u64::from(r.output_tokens());
        if let Some(ns) = r.ttft_vllm_ns() {
            store.push(self.ttft, secs(ns));
        }
        if let Some(ns) = r.tpot_vllm_ns() {
            store.push(self.tpot, secs(ns));
        }
        for gap in r.itl_vllm_gaps_ns() {
            store.push(self.itl, secs(gap));
        }
        store.push(self.e2el, secs(e2el_ns(r)));
    }

    /// The result JSON; `peak` is [`peak_second_of`] the stage's successes, `detailed` its records when the
    /// profile asks for the per-request arrays (`--save-detailed`) and they are at hand (none: the arrays are
    /// empty, for a writer that streams them in from disk).
    pub(crate) fn result(
        &self,
        meta: &RunMeta,
        stage: u32,
        store: &mut FloatStore,
        peak: (f64, u64),
        detailed: Option<&[&RequestRecord]>,
    ) -> io::Result<Value> {
        let stage_meta = meta.stages.get(stage as usize).copied().unwrap_or_default();
        let (start, end) = if self.count == 0 {
            (0, 0)
        } else {
            (self.start_ns, self.end_ns)
        };
        let duration = secs(end.saturating_sub(start));
        let per_s = |amount: f64| {
            if duration > 0.0 {
                amount / duration
            } else {
                0.0
            }
        };
        let (total_input, total_output) = (self.total_input, self.total_output);
        let (max_tokens_per_s, max_concurrent) = peak;

        let mut out = Map::new();
        out.insert(
            "date".into(),
            json!(wallclock::compact_utc(
                (meta.t0_unix_ns / 1_000_000_000) as i64
            )),
        );
        out.insert("endpoint_type".into(), json!(backend(meta)));
        out.insert("backend".into(), json!(backend(meta)));
        out.insert("label".into(), json!(meta.report.vllm_label));
        out.insert("model_id".into(), json!(meta.model));
        out.insert(
            "tokenizer_id".into(),
            json!(meta.tokenizer.as_deref().unwrap_or(&meta.model)),
        );
        out.insert(
            "num_prompts".into(),
            json!(if self.pooling {
                self.prompts
            } else {
                self.count
            }),
        );
        out.insert(
            "request_rate".into(),
            stage_meta.rate.map_or_else(|| json!("inf"), |r| json!(r)),
        );
        out.insert(
            "burstiness".into(),
            json!(
                stage_meta
                    .burstiness
                    .unwrap_or(super::meta::Burstiness::Factor(1.0))
            ),
        );
        out.insert("max_concurrency".into(), json!(stage_meta.concurrency));
        out.insert("duration".into(), json!(duration));
        if self.pooling {
            // `calculate_metrics_for_embeddings` and its result (serve.py at vllm-project/vllm 009e6d4): no
            // failed count, no output fields, no token timing; inputs per second beside requests and tokens.
            out.insert("completed".into(), json!(self.ok));
            out.insert("total_input_tokens".into(), json!(total_input));
            out.insert("total_input_sequences".into(), json!(self.total_inputs));
            out.insert("request_throughput".into(), json!(per_s(self.ok as f64)));
            out.insert(
                "input_sequence_throughput".into(),
                json!(per_s(self.total_inputs as f64)),
            );
            out.insert(
                "total_token_throughput".into(),
                json!(per_s(total_input as f64)),
            );
            self.insert_percentiles(meta, store, &mut out, &[("e2el", self.e2el)])?;
            if let Some(records) = detailed.filter(|_| meta.report.vllm_save_detailed) {
                insert_detailed(&mut out, records);
                out.retain(|key, _| {
                    !DETAILED_ARRAYS.contains(&key.as_str()) || keeps_detailed(meta, key)
                });
            }
            return Ok(Value::Object(out));
        }
        out.insert("completed".into(), json!(self.ok));
        out.insert("failed".into(), json!(self.count - self.ok));
        out.insert("total_input_tokens".into(), json!(total_input));
        out.insert("total_output_tokens".into(), json!(total_output));
        out.insert("request_throughput".into(), json!(per_s(self.ok as f64)));
        // vLLM writes null without `--goodput`, else good requests per second of the run's duration.
        out.insert(
            "request_goodput".into(),
            self.goodput
                .goodput(duration)
                .map_or(Value::Null, |g| json!(g.requests_per_s)),
        );
        out.insert(
            "output_throughput".into(),
            json!(per_s(total_output as f64)),
        );
        out.insert(
            "total_token_throughput".into(),
            json!(per_s((total_input + total_output) as f64)),
        );
        out.insert("max_output_tokens_per_s".into(), json!(max_tokens_per_s));
        out.insert("max_concurrent_requests".into(), json!(max_concurrent));

        let metrics = [
            ("ttft", self.ttft),
            ("tpot", self.tpot),
            ("itl", self.itl),
            ("e2el", self.e2el),
        ];
        self.insert_percentiles(meta, store, &mut out, &metrics)?;

        if let Some(records) = detailed.filter(|_| meta.report.vllm_save_detailed) {
            insert_detailed(&mut out, records);
        }
        Ok(Value::Object(out))
    }

    /// `process_one_metric` for each of `metrics` the profile's `--percentile-metrics` names.
    fn insert_percentiles(
        &self,
        meta: &RunMeta,
        store: &mut FloatStore,
        out: &mut Map<String, Value>,
        metrics: &[(&str, SampleId)],
    ) -> io::Result<()> {
        let percentiles = &meta.report.vllm_metric_percentiles;
        for &(name, sample) in metrics {
            if !meta
                .report
                .vllm_percentile_metrics
                .iter()
                .any(|m| m == name)
            {
                continue;
            }
            let (mean, median, std, ps) = stats_ms(&mut store.view(&[sample]), percentiles)?;
            out.insert(format!("mean_{name}_ms"), json!(mean));
            out.insert(format!("median_{name}_ms"), json!(median));
            out.insert(format!("std_{name}_ms"), json!(std));
            for (p, v) in ps {
                out.insert(
                    format!("p{}_{name}_ms", super::percentile_word(p)),
                    json!(v),
                );
            }
        }
        Ok(())
    }
}

/// The result JSON of one stage's requests.
pub fn vllm_result(meta: &RunMeta, stage: u32, records: &[&RequestRecord]) -> Value {
    let mut store = FloatStore::memory();
    let mut bucket = Vllm::new(&mut store, meta);
    records.iter().for_each(|r| bucket.add(r, &mut store));
    // Samples in memory cannot fail to be read.
    bucket
        .result(meta, stage, &mut store, stage_peak(records), Some(records))
        .unwrap_or(Value::Null)
}

/// `max_output_tokens_per_s` and `max_concurrent_requests` of a stage's records held in memory.
pub(crate) fn stage_peak(records: &[&RequestRecord]) -> (f64, u64) {
    let ok: Vec<&RequestRecord> = records.iter().copied().filter(|r| succeeded(r)).collect();
    peak_second(&ok)
}

/// The `--save-detailed` arrays, in the order the result JSON holds them.
pub(crate) const DETAILED_ARRAYS: [&str; 5] =
    ["input_lens", "output_lens", "ttfts", "itls", "errors"];

/// Whether a run's `--save-detailed` result has the [`DETAILED_ARRAYS`] array `name`: a pooling run's has the
/// input lengths and errors only (serve.py at def9ce8: its pooling result holds no output, TTFT or ITL lists).
pub(crate) fn keeps_detailed(meta: &RunMeta, name: &str) -> bool {
    !meta.api.is_pooling() || matches!(name, "input_lens" | "errors")
}

/// One request's entry of each [`DETAILED_ARRAYS`] array: failures included with zeros, as vLLM lists its
/// outputs; generated texts are not kept.
pub(crate) fn detailed_entries(r: &RequestRecord) -> [Value; 5] {
    let ok_or = |v: Value| if succeeded(r) { v } else { json!(0) };
    [
        json!(r.prompt_tokens()),
        ok_or(json!(r.output_tokens())),
        ok_or(json!(r.ttft_vllm_ns().map_or(0.0, secs))),
        json!(r.itl_vllm_gaps_ns().map(secs).collect::<Vec<f64>>()),
        json!(r.error.as_ref().map_or("", |e| e.message.as_str())),
    ]
}

/// Per request, the [`DETAILED_ARRAYS`].
fn insert_detailed(out: &mut Map<String, Value>, records: &[&RequestRecord]) {
    let mut arrays: [Vec<Value>; 5] = Default::default();
    for r in records {
        for (array, entry) in arrays.iter_mut().zip(detailed_entries(r)) {
            array.push(entry);
        }
    }
    for (name, array) in DETAILED_ARRAYS.iter().zip(arrays) {
        out.insert((*name).into(), Value::Array(array));
    }
}

/// What [`peak_second_of`] counts of one successful request: its send, when it ended by vLLM's reckoning, and
/// the arrival of each of its `choices` chunks.
pub(crate) fn peak_events(r: &RequestRecord) -> (u64, u64, impl Iterator<Item = u64> + '_) {
    let end_of = r.sent_ns + e2el_ns(r);
    let chunks = r
        .chunks
        .iter()
        .filter(|c| r.streaming && c.kind.has_choices())
        .map(|c| c.at_ns);
    (r.sent_ns, end_of, chunks)
}

/// vLLM's `max_output_tokens_per_s` and `max_concurrent_requests`: 1-second buckets from the earliest send,
/// each `choices` chunk of a successful request counted as a token in the bucket it arrived in, each request
/// counted in every bucket from its send to its last chunk.
fn peak_second(ok: &[&RequestRecord]) -> (f64, u64) {
    let Some(min_start) = ok.iter().map(|r| r.sent_ns).min() else {
        return (0.0, 0);
    };
    let max_end = ok
        .iter()
        .map(|r| peak_events(r).1)
        .max()
        .unwrap_or(min_start);
    peak_second_of(min_start, max_end, |count| {
        for r in ok {
            let (sent, end_of, chunks) = peak_events(r);
            count(Event::Request { sent, end_of });
            chunks.for_each(|at| count(Event::Token { at }));
        }
        Ok(())
    })
    .unwrap_or((0.0, 0))
}

/// One thing [`peak_second_of`] counts.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Event {
    /// A successful request, in flight from `sent` to `end_of`.
    Request { sent: u64, end_of: u64 },
    /// A `choices` chunk that arrived at `at`.
    Token { at: u64 },
}

/// `max_output_tokens_per_s` and `max_concurrent_requests` of successes whose first send is `min_start` and
/// whose last end (by vLLM's reckoning) is `max_end`; `events` hands every request and token to the counter it
/// is given, wherever they are kept.
pub(crate) fn peak_second_of(
    min_start: u64,
    max_end: u64,
    events: impl FnOnce(&mut dyn FnMut(Event)) -> io::Result<()>,
) -> io::Result<(f64, u64)> {
    let buckets = (secs(max_end.saturating_sub(min_start)).ceil() as usize) + 1;
    let mut tokens = vec![0u64; buckets];
    let mut concurrent = vec![0u64; buckets];
    let bucket = |ns: u64| ((ns.saturating_sub(min_start)) / 1_000_000_000) as usize;
    events(&mut |event| match event {
        Event::Token { at } => {
            if let Some(slot) = tokens.get_mut(bucket(at)) {
                *slot += 1;
            }
        }
        Event::Request { sent, end_of } => {
            let seconds = bucket(sent)..=bucket(end_of).min(buckets - 1);
            for slot in concurrent.get_mut(seconds).unwrap_or_default() {
                *slot += 1;
            }
        }
    })?;
    Ok((
        tokens.into_iter().max().unwrap_or(0) as f64,
        concurrent.into_iter().max().unwrap_or(0),
    ))
}
