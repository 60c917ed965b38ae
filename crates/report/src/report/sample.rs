//! The samples the native reports summarise (latencies in seconds, token counts, schedule delays): held in memory
//! for a run that fits, appended to spill files for a long one. Either way a report reads the same figures off
//! them — a sum exactly rounded (so independent of the values' order), squared deviations likewise, and order
//! statistics by rank — so a report written from disk equals the one written from memory to the last bit.

use std::collections::HashMap;
use std::io;
use std::path::Path;

use llmbench_metrics::metrics::fsum::Fsum;
use llmbench_metrics::metrics::spill::{Slot, Spill, f64_key, f64_of_key};
use llmbench_metrics::metrics::stats::select_f64_ranks;
use llmbench_metrics::metrics::stats::{linear_at, linear_neighbours};

/// One sample of a [`FloatStore`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct SampleId(usize);

/// Where the reports' samples are kept.
pub(crate) struct FloatStore {
    kind: Kind,
    /// The first write that failed; reported by [`FloatStore::check`], so adding a value never fails.
    error: Option<io::Error>,
}

enum Kind {
    Memory(Vec<Vec<f64>>),
    Spilled(Box<Spilled>),
}

struct Spilled {
    spill: Spill<1>,
    slots: Vec<Slot>,
    sums: Vec<Fsum>,
    /// Each sample's smallest and largest key, which spare the selection its first pass.
    bounds: Vec<(u64, u64)>,
    max_in_memory: usize,
    /// Fractions whose neighbouring ranks are selected along with any asked for: the reports of one sample ask
    /// at different times, and each selection streams the files.
    prefetch: Vec<f64>,
    ranks: HashMap<Vec<SampleId>, HashMap<usize, f64>>,
    squares: HashMap<(Vec<SampleId>, u64), f64>,
}

impl FloatStore {
    /// Samples held in memory.
    pub(crate) fn memory() -> FloatStore {
        FloatStore {
            kind: Kind::Memory(Vec::new()),
            error: None,
        }
    }

    /// Samples spilled to files in `dir` (their write buffers `buffer_bytes` in all), selection holding at most
    /// `max_in_memory` values; `prefetch` are the percentiles (fractions) the reports will ask for.
    pub(crate) fn spilled(
        dir: &Path,
        max_in_memory: usize,
        buffer_bytes: usize,
        prefetch: Vec<f64>,
    ) -> FloatStore {
        FloatStore {
            kind: Kind::Spilled(Box::new(Spilled {
                spill: Spill::new(dir, "report", buffer_bytes),
                slots: Vec::new(),
                sums: Vec::new(),
                bounds: Vec::new(),
                max_in_memory,
                prefetch,
                ranks: HashMap::new(),
                squares: HashMap::new(),
            })),
            error: None,
        }
    }

    /// A new, empty sample.
    pub(crate) fn sample(&mut self) -> SampleId {
        match &mut self.kind {
            Kind::Memory(samples) => {
                samples.push(Vec::new());
                SampleId(samples.len() - 1)
            }
            Kind::Spilled(s) => {
                let slot = s.spill.slot();
                s.slots.push(slot);
                s.sums.push(Fsum::new());
                s.bounds.push((u64::MAX, 0));
                SampleId(s.slots.len() - 1)
            }
        }
    }

    pub(crate) fn push(&mut self, id: SampleId, value: f64) {
        match &mut self.kind {
            Kind::Memory(samples) => samples[id.0].push(value),
            Kind::Spilled(s) => {
                let key = f64_key(value);
                s.sums[id.0].add(value);
                let bounds = &mut s.bounds[id.0];
                *bounds = (bounds.0.min(key), bounds.1.max(key));
                if let Err(e) = s.spill.push(s.slots[id.0], [key])
                    && self.error.is_none()
                {
                    self.error = Some(e);
                }
            }
        }
    }

    /// The first write that failed, if any did.
    pub(crate) fn check(&mut self) -> io::Result<()> {
        self.error.take().map_or(Ok(()), Err)
    }

    /// The union of samples `ids`, to read figures off.
    pub(crate) fn view(&mut self, ids: &[SampleId]) -> SampleView<'_> {
        let joined = match (&self.kind, ids) {
            (Kind::Memory(samples), [_, _, ..]) => Some(
                ids.iter()
                    .flat_map(|id| samples[id.0].iter().copied())
                    .collect(),
            ),
            _ => None,
        };
        SampleView {
            store: self,
            ids: ids.to_vec(),
            joined,
        }
    }
}

/// The union of some samples of a [`FloatStore`].
pub(crate) struct SampleView<'a> {
    store: &'a mut FloatStore,
    ids: Vec<SampleId>,
    /// The values of several samples in memory, together.
    joined: Option<Vec<f64>>,
}

impl SampleView<'_> {
    /// The values, in the order they were added, for samples in memory; `None` for spilled ones. Every figure
    /// read off them is independent of their order: sums exactly rounded, order statistics selected by rank.
    fn memory(&self) -> Option<&[f64]> {
        match (&self.joined, &self.store.kind) {
            (Some(values), _) => Some(values),
            (None, Kind::Memory(samples)) => Some(match self.ids.as_slice() {
                [id] => &samples[id.0],
                _ => &[],
            }),
            (None, Kind::Spilled(_)) => None,
        }
    }

    /// How many values.
    pub(crate) fn len(&self) -> usize {
        if let Some(values) = self.memory() {
            return values.len();
        }
        match &self.store.kind {
            Kind::Spilled(s) => self
                .ids
                .iter()
                .map(|id| s.spill.len(s.slots[id.0]) as usize)
                .sum(),
            Kind::Memory(_) => 0,
        }
    }

    /// The exactly rounded sum.
    pub(crate) fn sum(&self) -> f64 {
        if let Some(values) = self.memory() {
            return llmbench_metrics::metrics::fsum::fsum(values.iter().copied());
        }
        match &self.store.kind {
            Kind::Spilled(s) => {
                let mut sum = Fsum::new();
                self.ids.iter().for_each(|id| sum.merge(&s.sums[id.0]));
                sum.value()
            }
            Kind::Memory(_) => 0.0,
        }
    }

    /// The mean: the exact sum over the count; `None` when empty.
    pub(crate) fn mean(&self) -> Option<f64> {
        let n = self.len();
        (n > 0).then(|| self.sum() / n as f64)
    }

    /// The exactly rounded sum of squared deviations from `mean`.
    pub(crate) fn squared_deviations(&mut self, mean: f64) -> io::Result<f64> {
        let mut sum = Fsum::new();
        if let Some(values) = self.memory() {
            return Ok(llmbench_metrics::metrics::fsum::fsum(
                values.iter().map(|&v| (v - mean).powi(2)),
            ));
        }
        match &mut self.store.kind {
            Kind::Spilled(s) => {
                let key = (self.ids.clone(), mean.to_bits());
                if let Some(&known) = s.squares.get(&key) {
                    return Ok(known);
                }
                let slots: Vec<Slot> = self.ids.iter().map(|id| s.slots[id.0]).collect();
                s.spill.for_each(&slots, |k| {
                    sum.add((f64_of_key(k[0]) - mean).powi(2));
                })?;
                s.squares.insert(key, sum.value());
            }
            Kind::Memory(_) => {}
        }
        Ok(sum.value())
    }

    /// The values at sorted positions `ranks` (each below [`len`](Self::len)), in the order of `ranks`.
    pub(crate) fn at_ranks(&mut self, ranks: &[usize]) -> io::Result<Vec<f64>> {
        let n = self.len();
        if let Some(values) = self.memory() {
            return Ok(select_f64_ranks(values, ranks));
        }
        match &mut self.store.kind {
            Kind::Spilled(s) => {
                let known = s.ranks.entry(self.ids.clone()).or_default();
                let mut missing: Vec<usize> = ranks
                    .iter()
                    .copied()
                    .filter(|r| !known.contains_key(r))
                    .collect();
                if !missing.is_empty() && n > 0 {
                    missing.extend([0, n - 1]);
                    for &p in &s.prefetch {
                        let (lo, hi) = linear_neighbours(n, p);
                        missing.extend([lo, hi]);
                    }
                    missing.sort_unstable();
                    missing.dedup();
                    missing.retain(|r| !known.contains_key(r));
                    let slots: Vec<Slot> = self.ids.iter().map(|id| s.slots[id.0]).collect();
                    let first_word = self
                        .ids
                        .iter()
                        .map(|id| s.bounds[id.0])
                        .fold((u64::MAX, 0), |a, b| (a.0.min(b.0), a.1.max(b.1)));
                    let wanted: Vec<u64> = missing.iter().map(|&r| r as u64).collect();
                    let keys =
                        s.spill
                            .select(&slots, &wanted, Some(first_word), s.max_in_memory)?;
                    for (rank, key) in missing.into_iter().zip(keys) {
                        known.insert(rank, f64_of_key(key[0]));
                    }
                }
                Ok(ranks.iter().map(|r| known[r]).collect())
            }
            Kind::Memory(_) => Ok(Vec::new()),
        }
    }

    /// The smallest and largest values; `None` when empty.
    pub(crate) fn min_max(&mut self) -> io::Result<Option<(f64, f64)>> {
        let n = self.len();
        if n == 0 {
            return Ok(None);
        }
        let v = self.at_ranks(&[0, n - 1])?;
        Ok(Some((v[0], v[1])))
    }

    /// numpy's linear percentiles at fractions `ps`; empty when the sample is.
    pub(crate) fn percentiles(&mut self, ps: &[f64]) -> io::Result<Vec<Option<f64>>> {
        let n = self.len();
        if n == 0 {
            return Ok(ps.iter().map(|_| None).collect());
        }
        let mut ranks: Vec<usize> = ps
            .iter()
            .filter(|p| !p.is_nan())
            .flat_map(|&p| {
                let (lo, hi) = linear_neighbours(n, p);
                [lo, hi]
            })
            .collect();
        ranks.sort_unstable();
        ranks.dedup();
        let values = self.at_ranks(&ranks)?;
        let value = |i: usize| ranks.binary_search(&i).ok().map_or(f64::NAN, |k| values[k]);
        Ok(ps.iter().map(|&p| linear_at(n, p, value)).collect())
    }
}
