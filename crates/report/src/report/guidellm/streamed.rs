//! guidellm's report of a run streamed from disk. guidellm sorts every request's values and events
//! (`guidellm/schemas/statistics.py`: `DistributionSummary.from_values`, `rate_distribution_from_timings`,
//! `concurrency_distribution_from_timings` sort with `np.argsort`, then sum in that order): here each stage's
//! values and events are spilled as the records go by, each key `[value, status, order, weight]` — the order
//! being the one the in-memory report lists them in, so ties fall as they fall there — then sorted through files
//! ([`Spill::for_each_sorted`]) and summarised by the same state machines the in-memory report drives
//! (`llmbench_metrics::metrics::weighted`): the same bits, in memory bounded by the records budget.
//!
//! A rate takes two sorts: its events by time, then the rates those give (one per merged time) by value. A
//! distribution's merged pdf is read three times (its total, then mean and percentiles, then the variance), so
//! it goes to a file of its own, removed once read.

use std::collections::BTreeMap;
use std::io;
use std::path::Path;

use serde_json::Value;

use super::{
    ByStatus, Figures, REQUEST_METRICS, Status, benchmark, completion_time, output_events,
    prompt_event, report, request_metric, status,
};
use crate::report::meta::RunMeta;
use crate::report::secs;
use llmbench_metrics::metrics::GuidellmDistribution;
use llmbench_metrics::metrics::spill::{Slot, Spill, f64_key, f64_of_key};
use llmbench_metrics::metrics::weighted::{CloseTimes, ConcurrencyLevels, PdfMerge, RateSteps};
use llmbench_model::record::RequestRecord;

/// The spilled values and events of every stage.
pub(crate) struct GuidellmStreamed {
    /// `[value or time, status, order, weight bits]`.
    spill: Spill<4>,
    /// The token events, `[time, weight bits]`, a prompt event's marked [`PROMPT_EVENT`]: one per streamed chunk,
    /// the bulk of what is spilled, so without the words only ties would read.
    events: Spill<2>,
    stages: BTreeMap<u32, StageSpill>,
    /// The first write that failed.
    error: Option<io::Error>,
}

/// One stage: what is counted as the records go by, and the slots of its values and events, per status.
struct StageSpill {
    records: u64,
    counts: [u64; 3],
    min_sent_ns: u64,
    max_end_ns: u64,
    min_scheduled_ns: u64,
    /// Σ schedule delay in seconds, in record order (as the in-memory report sums it).
    delay_sum: f64,
    /// The counted requests in the order the in-memory report lists them within a status.
    order: u64,
    metrics: [[Slot; 3]; REQUEST_METRICS.len()],
    completions: [Slot; 3],
    /// Each request's output events, then its prompt event (marked [`PROMPT_EVENT`]): in the order the requests
    /// ended, so nearly in time order.
    tokens: [Slot; 3],
    /// +1 at each send, −1 at each end.
    changes: [Slot; 3],
}

const ALL: [usize; 3] = [0, 1, 2];

/// Marks a prompt event's weight word, so that one sorted pass over a request's token events tells them apart
/// (`Sorter::token_rates`). Token events are keyed by time and weight only, so events of the same time sort by
/// weight, whatever their status and order: no rate depends on it, since equal times merge and their weights are
/// whole token counts, whose sum is the same in any order.
const PROMPT_EVENT: u64 = 1 << 63;

impl GuidellmStreamed {
    pub(crate) fn new(dir: &Path, buffer_bytes: usize) -> GuidellmStreamed {
        GuidellmStreamed {
            spill: Spill::new(dir, "guidellm", buffer_bytes / 2),
            events: Spill::new(dir, "guidellm-events", buffer_bytes / 2),
            stages: BTreeMap::new(),
            error: None,
        }
    }

    /// Counts a measured request.
    pub(crate) fn add(&mut self, meta: &RunMeta, r: &RequestRecord) {
        let (spill, events) = (&mut self.spill, &mut self.events);
        let stage = self.stages.entry(r.stage).or_insert_with(|| {
            let mut slots = || [spill.slot(), spill.slot(), spill.slot()];
            let tokens = [events.slot(), events.slot(), events.slot()];
            StageSpill {
                records: 0,
                counts: [0; 3],
                min_sent_ns: u64::MAX,
                max_end_ns: 0,
                min_scheduled_ns: u64::MAX,
                delay_sum: -0.0,
                order: 0,
                metrics: std::array::from_fn(|_| slots()),
                completions: slots(),
                tokens,
                changes: slots(),
            }
        });
        stage.records += 1;
        stage.min_sent_ns = stage.min_sent_ns.min(r.sent_ns);
        stage.max_end_ns = stage.max_end_ns.max(r.end_ns);
        stage.min_scheduled_ns = stage.min_scheduled_ns.min(r.scheduled_ns);
        stage.delay_sum += secs(r.schedule_delay_ns());
        let Some(status) = status(r) else { return };
        let s = status as usize;
        stage.counts[s] += 1;
        let order = stage.order;
        stage.order += 1;
        let error = &mut self.error;
        let mut fail = |result: io::Result<()>| {
            if let Err(e) = result
                && error.is_none()
            {
                *error = Some(e);
            }
        };
        let mut push = |slot: Slot, at: f64, order: u64, weight: f64| {
            fail(spill.push(slot, [f64_key(at), s as u64, order, weight.to_bits()]));
        };
        for (metric, slots) in stage.metrics.iter().enumerate() {
            if let Some((value, weight)) = request_metric(metric, r) {
                push(slots[s], value, order, weight);
            }
        }
        push(
            stage.completions[s],
            completion_time(meta.t0_unix_ns, r),
            order,
            1.0,
        );
        push(stage.changes[s], meta.unix_s(r.sent_ns), 2 * order, 1.0);
        push(stage.changes[s], meta.unix_s(r.end_ns), 2 * order + 1, -1.0);
        // A token count's bits never have the sign bit set: the prompt's mark goes there.
        let tokens = stage.tokens[s];
        let mut event = |at: f64, weight: f64, mark: u64| {
            fail(events.push(tokens, [f64_key(at), weight.to_bits() | mark]));
        };
        output_events(meta, r, &mut |at, weight| event(at, weight, 0));
        let (at, weight) = prompt_event(meta, r);
        event(at, weight, PROMPT_EVENT);
    }

    /// The first write that failed, if any did.
    pub(crate) fn check(&mut self) -> io::Result<()> {
        self.error.take().map_or(Ok(()), Err)
    }

    /// The report, every stage's distributions sorted from the files holding at most `max_in_memory` keys.
    pub(crate) fn report(&mut self, meta: &RunMeta, max_in_memory: usize) -> io::Result<Value> {
        let mut benchmarks = Vec::with_capacity(self.stages.len());
        for (&stage, s) in &self.stages {
            let mut sorter = Sorter {
                spill: &self.spill,
                events: &self.events,
                scratch: Spill::new(
                    self.spill.dir(),
                    &format!("guidellm-sorted-{stage}"),
                    1 << 16,
                ),
                max_in_memory,
            };
            let figures = s.figures(meta, &mut sorter)?;
            benchmarks.push(benchmark(meta, stage, &figures));
        }
        Ok(report(meta, benchmarks))
    }
}

impl StageSpill {
    fn figures(&self, meta: &RunMeta, sorter: &mut Sorter<'_>) -> io::Result<Figures> {
        let (start_ns, end_ns) = if self.records == 0 {
            (0, 0)
        } else {
            (self.min_sent_ns, self.max_end_ns)
        };
        let at = |ns: u64| (meta.t0_unix_ns as f64 + ns as f64) / 1e9;
        let window = (at(start_ns), at(end_ns));
        // Without errored or incomplete requests the total is the successful requests' distribution: the same keys.
        let only_successful = self.counts[1] == 0 && self.counts[2] == 0;
        let by_status =
            |slots: &[[Slot; 3]],
             f: &mut dyn FnMut(&[Slot]) -> io::Result<GuidellmDistribution>| {
                let pick = |statuses: &[usize]| -> Vec<Slot> {
                    slots
                        .iter()
                        .flat_map(|per| statuses.iter().map(|&s| per[s]))
                        .collect()
                };
                let successful = f(&pick(&[Status::Successful as usize]))?;
                io::Result::Ok(ByStatus {
                    errored: f(&pick(&[Status::Errored as usize]))?,
                    incomplete: f(&pick(&[Status::Incomplete as usize]))?,
                    total: if only_successful {
                        successful.clone()
                    } else {
                        f(&pick(&ALL))?
                    },
                    successful,
                })
            };
        let request_concurrency =
            by_status(&[self.changes], &mut |slots| sorter.concurrency(slots))?;
        let [
            prompt_tokens_per_second,
            output_tokens_per_second,
            tokens_per_second,
        ] = self.token_rates(sorter, only_successful)?;
        Ok(Figures {
            counts: self.counts,
            first_scheduled_ns: if self.records == 0 {
                0
            } else {
                self.min_scheduled_ns
            },
            start_ns,
            end_ns,
            delay_avg: if self.records == 0 {
                -1.0
            } else {
                self.delay_sum / self.records as f64
            },
            requests_per_second: by_status(&[self.completions], &mut |slots| {
                sorter.rate(slots, window)
            })?,
            request_concurrency,
            request_metrics: self
                .metrics
                .iter()
                .map(|slots| by_status(&[*slots], &mut |slots| sorter.values(slots)))
                .collect::<io::Result<_>>()?,
            prompt_tokens_per_second,
            output_tokens_per_second,
            tokens_per_second,
        })
    }

    /// `prompt_tokens_per_second`, `output_tokens_per_second` and `tokens_per_second` per status, from one sorted
    /// pass over each status's token events (the largest sorts of a run: one event per streamed chunk).
    fn token_rates(
        &self,
        sorter: &mut Sorter<'_>,
        only_successful: bool,
    ) -> io::Result<[ByStatus; 3]> {
        let mut of = |statuses: &[usize]| {
            let slots: Vec<Slot> = statuses.iter().map(|&s| self.tokens[s]).collect();
            sorter.token_rates(&slots)
        };
        let successful = of(&[Status::Successful as usize])?;
        let errored = of(&[Status::Errored as usize])?;
        let incomplete = of(&[Status::Incomplete as usize])?;
        let total = if only_successful {
            successful.clone()
        } else {
            of(&ALL)?
        };
        Ok(std::array::from_fn(|rate| ByStatus {
            successful: successful[rate].clone(),
            errored: errored[rate].clone(),
            incomplete: incomplete[rate].clone(),
            total: total[rate].clone(),
        }))
    }
}

/// One `rate_distribution_from_timings` as its sorted events go by: merged times to rates, spilled to a scratch
/// slot in time order for the sort by rate.
struct RateBuilder {
    rates: Slot,
    index: u64,
    steps: RateSteps,
    close: CloseTimes,
}

impl RateBuilder {
    fn new(scratch: &mut Spill<3>) -> RateBuilder {
        RateBuilder {
            rates: scratch.slot(),
            index: 0,
            steps: RateSteps::default(),
            close: CloseTimes::default(),
        }
    }

    fn push(&mut self, t: f64, w: f64, scratch: &mut Spill<3>, failure: &mut Option<io::Error>) {
        let (rates, index, steps) = (self.rates, &mut self.index, &mut self.steps);
        self.close.push(t, w, &mut |t, w| {
            steps.push(t, w, &mut |rate, duration| {
                spill_rate(scratch, rates, index, rate, duration, failure)
            })
        });
    }

    /// The rates' slot and their count (`None` without any rate).
    fn finish(
        self,
        scratch: &mut Spill<3>,
        failure: &mut Option<io::Error>,
    ) -> (Slot, Option<u64>) {
        let RateBuilder {
            rates,
            mut index,
            mut steps,
            close,
        } = self;
        let mut out = |rate: f64, duration: f64| {
            spill_rate(scratch, rates, &mut index, rate, duration, failure)
        };
        close.finish(&mut |t, w| steps.push(t, w, &mut out));
        (rates, steps.finish(&mut out))
    }
}

fn spill_rate(
    scratch: &mut Spill<3>,
    rates: Slot,
    index: &mut u64,
    rate: f64,
    duration: f64,
    failure: &mut Option<io::Error>,
) {
    if let Err(e) = scratch.push(rates, [f64_key(rate), *index, duration.to_bits()]) {
        failure.get_or_insert(e);
    }
    *index += 1;
}

/// Sorts spilled keys and summarises them; its scratch files hold the intermediate sorts and pdfs.
struct Sorter<'a> {
    spill: &'a Spill<4>,
    events: &'a Spill<2>,
    /// `[value, order, weight bits]`: a rate's rates, then a pdf (`[value, 0, weight bits]`).
    scratch: Spill<3>,
    max_in_memory: usize,
}

impl Sorter<'_> {
    /// `DistributionSummary.from_values` of the `(value, weight)` keys of `slots`.
    fn values(&mut self, slots: &[Slot]) -> io::Result<GuidellmDistribution> {
        if slots.iter().all(|&s| self.spill.len(s) == 0) {
            return Ok(GuidellmDistribution::empty(0));
        }
        let pdf = self.scratch.slot();
        let mut merge = PdfMerge::default();
        let mut weights = -0.0;
        let scratch = &mut self.scratch;
        let mut failure = None;
        let mut out = |v: f64, w: f64| {
            if let Err(e) = scratch.push(pdf, [f64_key(v), 0, w.to_bits()]) {
                failure.get_or_insert(e);
            }
        };
        self.spill.for_each_sorted(slots, self.max_in_memory, |k| {
            let weight = f64::from_bits(k[3]);
            // Whole numbers (see `request_metric`): their sum is the same in any order.
            weights += weight;
            merge.push(f64_of_key(k[0]), weight, &mut out);
        })?;
        merge.finish(&mut out);
        failure.map_or(Ok(()), Err)?;
        let count = weights.round() as u64;
        self.summarise(pdf, count)
    }

    /// `rate_distribution_from_timings` of the `(time, weight)` events of `slots`, clipped to `window`.
    fn rate(&mut self, slots: &[Slot], window: (f64, f64)) -> io::Result<GuidellmDistribution> {
        let scratch = &mut self.scratch;
        let mut builder = RateBuilder::new(scratch);
        let mut failure = None;
        // The window's ends join the events (weight 0) where they sort, after the events of the same time.
        let (start, end) = window;
        let mut bounds = vec![end, start];
        self.spill.for_each_sorted(slots, self.max_in_memory, |k| {
            let t = f64_of_key(k[0]);
            while bounds.last().is_some_and(|&b| f64_key(b) < k[0]) {
                if let Some(b) = bounds.pop() {
                    builder.push(b, 0.0, scratch, &mut failure);
                }
            }
            if t >= start && t <= end {
                builder.push(t, f64::from_bits(k[3]), scratch, &mut failure);
            }
        })?;
        while let Some(b) = bounds.pop() {
            builder.push(b, 0.0, scratch, &mut failure);
        }
        let rates = builder.finish(scratch, &mut failure);
        failure.map_or(Ok(()), Err)?;
        self.rate_summary(rates)
    }

    /// The rate distributions of the prompt events, of the output events and of both, of `slots` (prompt
    /// events carry [`PROMPT_EVENT`]), from one sorted pass. The events were stored as their requests ended,
    /// nearly in time order, so they are read without sorted runs where they can be
    /// ([`Spill::for_each_nearly_sorted`]), and through them otherwise.
    fn token_rates(&mut self, slots: &[Slot]) -> io::Result<[GuidellmDistribution; 3]> {
        type Pass = (bool, [RateBuilder; 3], Option<io::Error>);
        let pass = |nearly: bool, scratch: &mut Spill<3>| -> io::Result<Pass> {
            let mut failure = None;
            let mut builders = [(); 3].map(|()| RateBuilder::new(scratch));
            let mut push = |k: &[u64; 2]| {
                let (t, w) = (f64_of_key(k[0]), f64::from_bits(k[1] & !PROMPT_EVENT));
                let [prompt, output, all] = &mut builders;
                if k[1] & PROMPT_EVENT == 0 {
                    output.push(t, w, scratch, &mut failure);
                } else {
                    prompt.push(t, w, scratch, &mut failure);
                }
                all.push(t, w, scratch, &mut failure);
            };
            let in_order = if nearly {
                self.events
                    .for_each_nearly_sorted(slots, self.max_in_memory, &mut push)?
            } else {
                self.events
                    .for_each_sorted(slots, self.max_in_memory, &mut push)?;
                true
            };
            Ok((in_order, builders, failure))
        };
        let (mut in_order, mut builders, mut failure) = pass(true, &mut self.scratch)?;
        if !in_order {
            for builder in builders {
                self.scratch.discard(builder.rates);
            }
            (in_order, builders, failure) = pass(false, &mut self.scratch)?;
        }
        debug_assert!(in_order);
        let scratch = &mut self.scratch;
        let rates = builders.map(|builder| builder.finish(scratch, &mut failure));
        failure.map_or(Ok(()), Err)?;
        let [prompt, output, all] = rates;
        Ok([
            self.rate_summary(prompt)?,
            self.rate_summary(output)?,
            self.rate_summary(all)?,
        ])
    }

    /// The distribution of the rates `rates` holds (with their count), which is removed.
    fn rate_summary(
        &mut self,
        (rates, count): (Slot, Option<u64>),
    ) -> io::Result<GuidellmDistribution> {
        let Some(count) = count else {
            self.scratch.discard(rates);
            // guidellm's `from_values([], count=…)` returns before it reads `count`: the summary counts 0.
            return Ok(GuidellmDistribution::empty(0));
        };
        // `from_values(rates, weights=durations, count)`: by rate, equal rates' durations summed in time order.
        // The merged pdf goes to a spill of its own: the scratch spill is being read.
        let mut merge = PdfMerge::default();
        let mut pdf_failure = None;
        let mut pdf_spill: Spill<3> = Spill::new(self.spill.dir(), "guidellm-pdf", 1 << 16);
        let pdf_slot = pdf_spill.slot();
        self.scratch
            .for_each_sorted(&[rates], self.max_in_memory, |k| {
                merge.push(f64_of_key(k[0]), f64::from_bits(k[2]), &mut |v, w| {
                    if let Err(e) = pdf_spill.push(pdf_slot, [f64_key(v), 0, w.to_bits()]) {
                        pdf_failure.get_or_insert(e);
                    }
                });
            })?;
        merge.finish(&mut |v, w| {
            if let Err(e) = pdf_spill.push(pdf_slot, [f64_key(v), 0, w.to_bits()]) {
                pdf_failure.get_or_insert(e);
            }
        });
        pdf_failure.map_or(Ok(()), Err)?;
        self.scratch.discard(rates);
        let summary = summarise_pdf(&pdf_spill, pdf_slot, count);
        pdf_spill.discard(pdf_slot);
        summary
    }

    /// `concurrency_distribution_from_timings` of the `(time, ±1)` changes of `slots`: two per request.
    fn concurrency(&mut self, slots: &[Slot]) -> io::Result<GuidellmDistribution> {
        let intervals = slots.iter().map(|&s| self.spill.len(s)).sum::<u64>() / 2;
        let mut levels = ConcurrencyLevels::default();
        let mut close = CloseTimes::default();
        self.spill.for_each_sorted(slots, self.max_in_memory, |k| {
            close.push(f64_of_key(k[0]), f64::from_bits(k[3]), &mut |t, w| {
                levels.push(t, w)
            });
        })?;
        close.finish(&mut |t, w| levels.push(t, w));
        Ok(levels.finish(intervals))
    }

    /// The distribution of the merged pdf in scratch slot `pdf`, which is removed.
    fn summarise(&mut self, pdf: Slot, count: u64) -> io::Result<GuidellmDistribution> {
        let summary = summarise_pdf(&self.scratch, pdf, count);
        self.scratch.discard(pdf);
        summary
    }
}

/// [`GuidellmDistribution::from_merged_pdf`] of the `[value, _, weight bits]` keys of `slot`.
fn summarise_pdf(spill: &Spill<3>, slot: Slot, count: u64) -> io::Result<GuidellmDistribution> {
    GuidellmDistribution::from_merged_pdf(count, |f| {
        spill.for_each(&[slot], |k| f(f64_of_key(k[0]), f64::from_bits(k[2])))
    })
}
