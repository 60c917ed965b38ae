//! Samples too large to hold, kept on disk: each sample (one metric of one stage, say) is appended to its own
//! temporary file, and exact order statistics are selected from the files in bounded memory. This is what lets a
//! run of millions of requests be summarised after it ended from `requests.jsonl`, with the same numbers as a run
//! summarised in memory.
//!
//! Keys are `W` unsigned words compared lexicographically: a nanosecond duration is one word, a float one word of
//! its order-preserving bits ([`f64_key`]), a request's place in completion order several. Selection
//! ([`Spill::select`]) narrows the wanted ranks the way `stats::select_ranks` does in memory: a pass counts the
//! keys per bucket of the high bits of the current word (4096 buckets, each remembering its smallest and largest
//! key), the next pass looks only at the buckets holding a wanted rank, and a candidate range small enough to hold
//! is gathered and sorted. Every pass streams the files once; memory is the buckets' counters and at most
//! `max_in_memory` gathered keys, whatever the sample's size.
//!
//! The files live in a [`SpillDir`] removed when it is dropped.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The state of [`Spill::for_each_nearly_sorted`].
struct NearlySorted<const W: usize> {
    /// The larger keys of the last merge, sorted, not handed on yet.
    held: Vec<[u64; W]>,
    /// Keys read since.
    chunk: Vec<[u64; W]>,
    merged: Vec<[u64; W]>,
    /// The largest key handed on.
    last: Option<[u64; W]>,
    in_order: bool,
}

impl<const W: usize> NearlySorted<W> {
    /// Sorts the chunk, merges it with the held keys and hands on all but the `hold` largest; a chunk key smaller
    /// than a key already handed on ends the pass out of order.
    fn step(&mut self, hold: usize, f: &mut impl FnMut(&[u64; W])) {
        self.chunk.sort_unstable();
        if let (Some(first), Some(last)) = (self.chunk.first(), self.last)
            && *first < last
        {
            self.in_order = false;
            return;
        }
        self.merged.clear();
        self.merged.reserve(self.held.len() + self.chunk.len());
        let (mut a, mut b) = (self.held.iter().peekable(), self.chunk.iter().peekable());
        loop {
            let next = match (a.peek(), b.peek()) {
                (Some(x), Some(y)) => {
                    if x <= y {
                        a.next()
                    } else {
                        b.next()
                    }
                }
                (Some(_), None) => a.next(),
                (None, _) => b.next(),
            };
            match next {
                Some(key) => self.merged.push(*key),
                None => break,
            }
        }
        let handed = self.merged.len().saturating_sub(hold);
        self.merged[..handed].iter().for_each(&mut *f);
        if handed > 0 {
            self.last = Some(self.merged[handed - 1]);
        }
        self.held.clear();
        self.held.extend_from_slice(&self.merged[handed..]);
        self.chunk.clear();
    }
}

/// A temporary directory for spill files, removed (with everything in it) when dropped.
#[derive(Debug)]
pub struct SpillDir {
    path: PathBuf,
}

/// Tells apart the spill directories one process makes in the same parent.
static NEXT_SPILL_DIR: AtomicU64 = AtomicU64::new(0);

impl SpillDir {
    /// A fresh directory `.llmbench-spill-<pid>-<n>` inside `parent` (the run's directory: on the volume that
    /// already holds requests.jsonl, which the spill files are a fraction of).
    pub fn create_in(parent: &Path) -> io::Result<SpillDir> {
        let n = NEXT_SPILL_DIR.fetch_add(1, Ordering::Relaxed);
        let path = parent.join(format!(".llmbench-spill-{}-{n}", std::process::id()));
        std::fs::create_dir(&path)?;
        Ok(SpillDir { path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for SpillDir {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.path) {
            tracing::warn!(dir = %self.path.display(), error = %e, "cannot remove the temporary spill files");
        }
    }
}

/// The order-preserving `u64` of a float: `a < b` (by `f64::total_cmp`) exactly when `f64_key(a) < f64_key(b)`.
pub fn f64_key(x: f64) -> u64 {
    let bits = x.to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | 1 << 63
    }
}

/// The float of an [`f64_key`].
pub fn f64_of_key(key: u64) -> f64 {
    f64::from_bits(if key >> 63 == 1 {
        key & !(1 << 63)
    } else {
        !key
    })
}

/// Which sample of a [`Spill`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Slot(usize);

/// Keys a slot buffers before appending them to its file: 64 KiB of one-word keys.
const SLOT_BUFFER_KEYS: usize = 8192;
/// Bytes read from a spill file at a time.
const READ_BLOCK: usize = 1 << 20;

/// Samples of `W`-word keys, each appended to a file of its own. Each slot keeps a small write buffer; when all
/// the buffers together hold more than the limit given to [`Spill::new`], every buffer is written out, so many
/// samples (a run of many stages) cost no more memory than one.
#[derive(Debug)]
pub struct Spill<const W: usize> {
    dir: PathBuf,
    prefix: String,
    slots: Vec<SlotFile<W>>,
    buffered: usize,
    max_buffered: usize,
}

#[derive(Debug)]
struct SlotFile<const W: usize> {
    path: PathBuf,
    buffer: Vec<[u64; W]>,
    on_disk: u64,
}

impl<const W: usize> Spill<W> {
    /// Samples whose files go into `dir`, named `<prefix>-<slot>`, buffering at most `max_buffered_bytes` in all.
    pub fn new(dir: &Path, prefix: &str, max_buffered_bytes: usize) -> Spill<W> {
        Spill {
            dir: dir.to_owned(),
            prefix: prefix.to_owned(),
            slots: Vec::new(),
            buffered: 0,
            max_buffered: (max_buffered_bytes / (8 * W)).max(1),
        }
    }

    /// A new, empty sample.
    pub fn slot(&mut self) -> Slot {
        let index = self.slots.len();
        self.slots.push(SlotFile {
            path: self.dir.join(format!("{}-{index}", self.prefix)),
            buffer: Vec::new(),
            on_disk: 0,
        });
        Slot(index)
    }

    /// The directory the files are in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Empties `slot` and removes its file: a sample read for the last time gives its disk back.
    pub fn discard(&mut self, slot: Slot) {
        let file = &mut self.slots[slot.0];
        self.buffered -= file.buffer.len();
        file.buffer = Vec::new();
        if file.on_disk > 0 {
            let _ = std::fs::remove_file(&file.path);
            file.on_disk = 0;
        }
    }

    /// How many keys `slot` holds.
    pub fn len(&self, slot: Slot) -> u64 {
        let file = &self.slots[slot.0];
        file.on_disk + file.buffer.len() as u64
    }

    /// Appends `key` to `slot`.
    pub fn push(&mut self, slot: Slot, key: [u64; W]) -> io::Result<()> {
        let file = &mut self.slots[slot.0];
        file.buffer.push(key);
        self.buffered += 1;
        if file.buffer.len() >= SLOT_BUFFER_KEYS {
            self.buffered -= file.buffer.len();
            file.write_out()?;
        }
        if self.buffered > self.max_buffered {
            for file in &mut self.slots {
                file.write_out()?;
                // Give the memory back: an idle stage's buffer would otherwise keep its capacity.
                file.buffer = Vec::new();
            }
            self.buffered = 0;
        }
        Ok(())
    }

    /// Calls `f` with every key of `slots`, slot by slot, each in the order it was pushed.
    pub fn for_each(&self, slots: &[Slot], mut f: impl FnMut(&[u64; W])) -> io::Result<()> {
        let mut block = vec![0u8; READ_BLOCK - READ_BLOCK % (8 * W)];
        for &slot in slots {
            let file = &self.slots[slot.0];
            if file.on_disk > 0 {
                let mut reader = File::open(&file.path)?;
                loop {
                    let filled = fill(&mut reader, &mut block)?;
                    for bytes in block[..filled - filled % (8 * W)].chunks_exact(8 * W) {
                        f(&decode(bytes));
                    }
                    if filled < block.len() {
                        break;
                    }
                }
            }
            file.buffer.iter().for_each(&mut f);
        }
        Ok(())
    }

    /// The keys at sorted positions `ranks` (each below the slots' total count; any order, repeats allowed) of the
    /// union of `slots`, in the order of `ranks`. `first_word`, when known, bounds the keys' first word (min, max)
    /// and saves a pass. At most `max_in_memory` keys are held at once (plus 4096 counters per wanted range).
    pub fn select(
        &self,
        slots: &[Slot],
        ranks: &[u64],
        first_word: Option<(u64, u64)>,
        max_in_memory: usize,
    ) -> io::Result<Vec<[u64; W]>> {
        let total: u64 = slots.iter().map(|&s| self.len(s)).sum();
        let mut out = vec![[0u64; W]; ranks.len()];
        if ranks.is_empty() {
            return Ok(out);
        }
        let (lo, hi) = first_word.unwrap_or((0, u64::MAX));
        let mut pending = vec![Range {
            prefix: [0; W],
            depth: 0,
            lo,
            hi,
            count: total,
            ranks: ranks.iter().copied().enumerate().collect(),
        }];
        let max_in_memory = max_in_memory.max(1) as u64;
        while !pending.is_empty() {
            // Ranges whose keys are all equal need no pass.
            let mut open = Vec::with_capacity(pending.len());
            for range in pending.drain(..) {
                range.settle(&mut out, &mut open);
            }
            if open.is_empty() {
                break;
            }
            // Gather the smallest ranges while they fit; count the others by bucket.
            let mut order: Vec<usize> = (0..open.len()).collect();
            order.sort_by_key(|&i| open[i].count);
            let mut gathering = vec![false; open.len()];
            let mut held = 0u64;
            for i in order {
                if held + open[i].count <= max_in_memory {
                    held += open[i].count;
                    gathering[i] = true;
                }
            }
            let mut passes: Vec<Pass<W>> = open
                .iter()
                .zip(&gathering)
                .map(|(range, &gather)| {
                    if gather {
                        Pass::Gather(Vec::with_capacity(range.count as usize))
                    } else {
                        Pass::Count(Buckets::new(range.lo, range.hi))
                    }
                })
                .collect();
            self.for_each(slots, |key| {
                if let Some(i) = open.iter().position(|r| r.holds(key)) {
                    match &mut passes[i] {
                        Pass::Gather(keys) => keys.push(*key),
                        Pass::Count(buckets) => buckets.add(key[open[i].depth]),
                    }
                }
            })?;
            for (range, pass) in open.into_iter().zip(passes) {
                match pass {
                    Pass::Gather(mut keys) => {
                        keys.sort_unstable();
                        for (at, rank) in range.ranks {
                            out[at] = keys[rank as usize];
                        }
                    }
                    Pass::Count(buckets) => buckets.narrow(range, &mut pending),
                }
            }
        }
        Ok(out)
    }
}

/// The most sorted runs merged at once by [`Spill::for_each_sorted`]; more are merged in rounds.
const MERGE_FANOUT: usize = 64;
/// The fewest keys a sorted run holds, whatever the budget (a run's read buffer is at least this many).
const MIN_RUN_KEYS: usize = 64;
/// Tells apart the sorted runs' files of one process.
static NEXT_RUN: AtomicU64 = AtomicU64::new(0);

impl<const W: usize> Spill<W> {
    /// Calls `f` with every key of `slots` in ascending order (lexicographic over the words; equal keys are
    /// indistinguishable), holding at most `max_in_memory` keys at once: an external merge sort. Runs of that
    /// many keys are sorted and written beside the slots' files, then merged at most [`MERGE_FANOUT`] at a time,
    /// each run read through a buffer of its share of the budget; the runs' files are removed as they are merged.
    pub fn for_each_sorted(
        &self,
        slots: &[Slot],
        max_in_memory: usize,
        mut f: impl FnMut(&[u64; W]),
    ) -> io::Result<()> {
        let run_keys = max_in_memory.max(MIN_RUN_KEYS);
        let mut runs: Vec<PathBuf> = Vec::new();
        let mut keys: Vec<[u64; W]> = Vec::new();
        let mut failure = None;
        self.for_each(slots, |key| {
            keys.push(*key);
            if keys.len() >= run_keys && failure.is_none() {
                keys.sort_unstable();
                match self.write_run(&keys) {
                    Ok(path) => runs.push(path),
                    Err(e) => failure = Some(e),
                }
                keys.clear();
            }
        })?;
        if let Some(e) = failure {
            remove_runs(&runs);
            return Err(e);
        }
        keys.sort_unstable();
        if runs.is_empty() {
            keys.iter().for_each(&mut f);
            return Ok(());
        }
        if !keys.is_empty() {
            match self.write_run(&keys) {
                Ok(path) => runs.push(path),
                Err(e) => {
                    remove_runs(&runs);
                    return Err(e);
                }
            }
        }
        drop(keys);
        let per_run = |runs: usize| (run_keys / runs.max(1)).max(MIN_RUN_KEYS) * 8 * W;
        while runs.len() > MERGE_FANOUT {
            let mut merged = Vec::with_capacity(runs.len() / MERGE_FANOUT + 1);
            for group in runs.chunks(MERGE_FANOUT) {
                let path = self.run_path();
                let result = (|| -> io::Result<()> {
                    let mut out = io::BufWriter::with_capacity(
                        per_run(group.len() + 1),
                        File::create(&path)?,
                    );
                    let mut failure = None;
                    merge_runs::<W>(group, per_run(group.len() + 1), |key| {
                        if failure.is_none()
                            && let Err(e) =
                                key.iter().try_for_each(|w| out.write_all(&w.to_le_bytes()))
                        {
                            failure = Some(e);
                        }
                    })?;
                    failure.map_or(Ok(()), Err)?;
                    out.flush()
                })();
                remove_runs(group);
                merged.push(path);
                if let Err(e) = result {
                    remove_runs(&merged);
                    remove_runs(&runs);
                    return Err(e);
                }
            }
            runs = merged;
        }
        let result = merge_runs::<W>(&runs, per_run(runs.len()), f);
        remove_runs(&runs);
        result
    }

    /// [`for_each_sorted`](Self::for_each_sorted) for keys stored nearly in order (events written as the
    /// requests that hold them ended), without writing sorted runs: the keys are read in chunks of a quarter of
    /// `max_in_memory`, each chunk sorted and merged with the larger half held back from the chunk before, and
    /// the smaller half handed to `f`. That is the sorted order exactly when no key is stored more than a chunk
    /// after a larger key; `Ok(true)` when every key was handed on so. `Ok(false)` as soon as a key comes too late:
    /// what `f` was given is then not the sorted order, and the caller starts over with `for_each_sorted`.
    pub fn for_each_nearly_sorted(
        &self,
        slots: &[Slot],
        max_in_memory: usize,
        mut f: impl FnMut(&[u64; W]),
    ) -> io::Result<bool> {
        let chunk_keys = (max_in_memory / 4).max(MIN_RUN_KEYS);
        let mut sorter = NearlySorted::<W> {
            held: Vec::new(),
            chunk: Vec::with_capacity(chunk_keys),
            merged: Vec::new(),
            last: None,
            in_order: true,
        };
        self.for_each(slots, |key| {
            if sorter.in_order {
                sorter.chunk.push(*key);
                if sorter.chunk.len() == chunk_keys {
                    sorter.step(chunk_keys, &mut f);
                }
            }
        })?;
        if sorter.in_order {
            sorter.step(0, &mut f);
        }
        Ok(sorter.in_order)
    }

    fn run_path(&self) -> PathBuf {
        let n = NEXT_RUN.fetch_add(1, Ordering::Relaxed);
        self.dir.join(format!("{}-run-{n}", self.prefix))
    }

    /// Writes sorted `keys` to a new run file.
    fn write_run(&self, keys: &[[u64; W]]) -> io::Result<PathBuf> {
        let path = self.run_path();
        let mut bytes = Vec::with_capacity(keys.len() * 8 * W);
        for key in keys {
            for word in key {
                bytes.extend_from_slice(&word.to_le_bytes());
            }
        }
        std::fs::write(&path, bytes)?;
        Ok(path)
    }
}

fn remove_runs(runs: &[PathBuf]) {
    for run in runs {
        let _ = std::fs::remove_file(run);
    }
}

/// Calls `f` with the keys of the sorted `runs` in ascending order, each run read through `buffer_bytes`.
fn merge_runs<const W: usize>(
    runs: &[PathBuf],
    buffer_bytes: usize,
    mut f: impl FnMut(&[u64; W]),
) -> io::Result<()> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    let mut readers = runs
        .iter()
        .map(|path| {
            Ok(io::BufReader::with_capacity(
                buffer_bytes,
                File::open(path)?,
            ))
        })
        .collect::<io::Result<Vec<_>>>()?;
    let mut bytes = vec![0u8; 8 * W];
    let mut next = |reader: &mut io::BufReader<File>| -> io::Result<Option<[u64; W]>> {
        match reader.read_exact(&mut bytes) {
            Ok(()) => Ok(Some(decode(&bytes))),
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(None),
            Err(e) => Err(e),
        }
    };
    let mut heap = BinaryHeap::with_capacity(readers.len());
    for (i, reader) in readers.iter_mut().enumerate() {
        if let Some(key) = next(reader)? {
            heap.push(Reverse((key, i)));
        }
    }
    while let Some(Reverse((key, i))) = heap.pop() {
        f(&key);
        if let Some(key) = next(&mut readers[i])? {
            heap.push(Reverse((key, i)));
        }
    }
    Ok(())
}

impl<const W: usize> SlotFile<W> {
    fn write_out(&mut self) -> io::Result<()> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        let mut bytes = Vec::with_capacity(self.buffer.len() * 8 * W);
        for key in &self.buffer {
            for word in key {
                bytes.extend_from_slice(&word.to_le_bytes());
            }
        }
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)?;
        file.write_all(&bytes)?;
        self.on_disk += self.buffer.len() as u64;
        self.buffer.clear();
        Ok(())
    }
}

/// Reads until `block` is full or the file ends; returns how many bytes it holds.
fn fill(reader: &mut impl Read, block: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < block.len() {
        match reader.read(&mut block[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

fn decode<const W: usize>(bytes: &[u8]) -> [u64; W] {
    let mut key = [0u64; W];
    for (word, chunk) in key.iter_mut().zip(bytes.chunks_exact(8)) {
        let mut le = [0u8; 8];
        le.copy_from_slice(chunk);
        *word = u64::from_le_bytes(le);
    }
    key
}

/// Keys still to narrow down: those whose first `depth` words equal `prefix`'s and whose word `depth` lies in
/// `lo..=hi`; `count` of them, holding the wanted `ranks` (output position, rank within the range).
#[derive(Debug)]
struct Range<const W: usize> {
    prefix: [u64; W],
    depth: usize,
    lo: u64,
    hi: u64,
    count: u64,
    ranks: Vec<(usize, u64)>,
}

impl<const W: usize> Range<W> {
    fn holds(&self, key: &[u64; W]) -> bool {
        key[..self.depth] == self.prefix[..self.depth]
            && (self.lo..=self.hi).contains(&key[self.depth])
    }

    /// A range whose current word has one value moves on to the next word, or, at the last word, is one key
    /// repeated: its ranks are answered. Anything else needs a pass, and goes to `open`.
    fn settle(mut self, out: &mut [[u64; W]], open: &mut Vec<Range<W>>) {
        while self.lo == self.hi {
            self.prefix[self.depth] = self.lo;
            if self.depth + 1 == W {
                for (at, _) in &self.ranks {
                    out[*at] = self.prefix;
                }
                return;
            }
            self.depth += 1;
            self.lo = 0;
            self.hi = u64::MAX;
        }
        open.push(self);
    }
}

/// What one pass does with a range: keep its keys, or count them per bucket.
enum Pass<const W: usize> {
    Gather(Vec<[u64; W]>),
    Count(Buckets),
}

/// Bits of the word's offset from the range's low end each counting pass resolves: 4096 buckets.
const BUCKET_BITS: u32 = 12;

/// Counts of one word's values per bucket of its offset's high bits, with each bucket's smallest and largest.
struct Buckets {
    lo: u64,
    shift: u32,
    counts: Vec<u64>,
    mins: Vec<u64>,
    maxs: Vec<u64>,
}

impl Buckets {
    fn new(lo: u64, hi: u64) -> Buckets {
        let span = hi - lo;
        let shift = (u64::BITS - span.leading_zeros()).saturating_sub(BUCKET_BITS);
        let n = (span >> shift) as usize + 1;
        Buckets {
            lo,
            shift,
            counts: vec![0; n],
            mins: vec![u64::MAX; n],
            maxs: vec![0; n],
        }
    }

    fn add(&mut self, word: u64) {
        let b = ((word - self.lo) >> self.shift) as usize;
        self.counts[b] += 1;
        self.mins[b] = self.mins[b].min(word);
        self.maxs[b] = self.maxs[b].max(word);
    }

    /// The buckets holding `range`'s ranks, each a narrower range to look at next.
    fn narrow<const W: usize>(self, range: Range<W>, next: &mut Vec<Range<W>>) {
        let mut ranks = range.ranks;
        ranks.sort_by_key(|&(_, rank)| rank);
        let (mut bucket, mut below) = (0usize, 0u64);
        let mut current: Option<(usize, Range<W>)> = None;
        for (at, rank) in ranks {
            while below + self.counts[bucket] <= rank {
                below += self.counts[bucket];
                bucket += 1;
            }
            match current.as_mut() {
                Some((b, r)) if *b == bucket => r.ranks.push((at, rank - below)),
                _ => {
                    next.extend(current.take().map(|(_, r)| r));
                    let narrower = Range {
                        prefix: range.prefix,
                        depth: range.depth,
                        lo: self.mins[bucket],
                        hi: self.maxs[bucket],
                        count: self.counts[bucket],
                        ranks: vec![(at, rank - below)],
                    };
                    current = Some((bucket, narrower));
                }
            }
        }
        next.extend(current.map(|(_, r)| r));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn spill_of<const W: usize>(dir: &Path, samples: &[Vec<[u64; W]>]) -> (Spill<W>, Vec<Slot>) {
        // A tiny buffer limit, so the keys go through the files.
        let mut spill = Spill::new(dir, "t", 64);
        let slots: Vec<Slot> = samples.iter().map(|_| spill.slot()).collect();
        for (slot, keys) in slots.iter().zip(samples) {
            for key in keys {
                spill.push(*slot, *key).expect("push");
            }
        }
        (spill, slots)
    }

    fn sorted_union<const W: usize>(samples: &[Vec<[u64; W]>]) -> Vec<[u64; W]> {
        let mut all: Vec<[u64; W]> = samples.iter().flatten().copied().collect();
        all.sort_unstable();
        all
    }

    #[test]
    fn sorting_through_files_gives_every_key_in_order_with_runs_merged_in_rounds() {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut x = 7u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % 1000
        };
        // 9 000 keys in runs of 64: 141 runs, more than one round of 64.
        let samples: Vec<Vec<[u64; 2]>> = (0..3)
            .map(|_| (0..3000).map(|_| [next(), next()]).collect())
            .collect();
        let (spill, slots) = spill_of(dir.path(), &samples);
        for budget in [0, 100, 5000, 100_000] {
            let mut got = Vec::new();
            spill
                .for_each_sorted(&slots, budget, |k| got.push(*k))
                .expect("sorted");
            assert_eq!(got, sorted_union(&samples), "budget {budget}");
        }
        // The runs' files are gone; only the slots' files are left.
        let left = std::fs::read_dir(dir.path()).expect("dir").count();
        assert_eq!(left, slots.len());
    }

    #[test]
    fn nearly_sorted_keys_are_handed_on_in_order_without_runs_and_a_late_key_is_told() {
        let dir = tempfile::tempdir().expect("temp dir");
        // Keys 0..3000, each swapped with a neighbour up to 40 places away, plus duplicates: never more than a
        // chunk (budget 400: chunks of 100 keys) after a larger key.
        let mut keys: Vec<[u64; 2]> = (0..3000u64).map(|i| [i / 2, i % 3]).collect();
        for i in (0..2960).step_by(53) {
            keys.swap(i, i + 40);
        }
        let samples = vec![keys.clone()];
        let (spill, slots) = spill_of(dir.path(), &samples);
        for budget in [400, 1000, 100_000] {
            let mut got = Vec::new();
            let in_order = spill
                .for_each_nearly_sorted(&slots, budget, |k| got.push(*k))
                .expect("read");
            assert!(in_order, "budget {budget}");
            assert!(
                got == sorted_union(&samples),
                "budget {budget}: out of order"
            );
        }
        // No sorted run was written: only the slot's file is there.
        assert_eq!(std::fs::read_dir(dir.path()).expect("dir").count(), 1);

        // One key 250 places late, with chunks of 100: told, whatever was handed on.
        let mut late = keys;
        late.swap(100, 350);
        let dir = tempfile::tempdir().expect("temp dir");
        let (spill, slots) = spill_of(dir.path(), &[late.clone()]);
        let in_order = spill
            .for_each_nearly_sorted(&slots, 400, |_| {})
            .expect("read");
        assert!(!in_order);
        // With one chunk holding every key, it is simply sorted.
        let mut got = Vec::new();
        assert!(
            spill
                .for_each_nearly_sorted(&slots, 100_000, |k| got.push(*k))
                .expect("read")
        );
        assert!(got == sorted_union(&[late]), "out of order");
    }

    proptest! {
        #[test]
        fn nearly_sorted_reading_is_the_sorted_order_or_says_it_is_not(
            keys in prop::collection::vec((0u64..50, 0u64..3), 0..600),
            budget in 0usize..700,
        ) {
            let dir = tempfile::tempdir().expect("temp dir");
            let samples = vec![keys.iter().map(|&(a, b)| [a, b]).collect::<Vec<[u64; 2]>>()];
            let (spill, slots) = spill_of(dir.path(), &samples);
            let mut got = Vec::new();
            let in_order = spill
                .for_each_nearly_sorted(&slots, budget, |k| got.push(*k))
                .expect("read");
            if in_order {
                prop_assert_eq!(got, sorted_union(&samples));
            }
        }
    }

    #[test]
    fn float_keys_keep_the_total_order() {
        let values = [
            f64::NEG_INFINITY,
            -1e300,
            -1.5,
            -0.0,
            0.0,
            1e-300,
            2.5,
            f64::INFINITY,
        ];
        for pair in values.windows(2) {
            assert!(f64_key(pair[0]) < f64_key(pair[1]), "{pair:?}");
        }
        for v in values {
            assert_eq!(f64_of_key(f64_key(v)).to_bits(), v.to_bits());
        }
    }

    #[test]
    fn selection_over_files_equals_sorting_with_little_memory() {
        let dir = SpillDir::create_in(&std::env::temp_dir()).expect("spill dir");
        // Three samples: a tight cluster with a stall, many duplicates, and values spread over all of u64.
        let n = 30_000u64;
        let samples: Vec<Vec<[u64; 1]>> = vec![
            (0..n)
                .map(|i| [10_000_000 + (i * 7919 % 2000) + if i == 77 { 1 << 40 } else { 0 }])
                .collect(),
            (0..n).map(|i| [(i % 5) * 3]).collect(),
            (0..n).map(|i| [u64::MAX >> (i % 64)]).collect(),
        ];
        let (spill, slots) = spill_of(dir.path(), &samples);
        let sorted = sorted_union(&samples);
        let ranks: Vec<u64> = (0..sorted.len() as u64)
            .step_by(997)
            .chain([1, 0])
            .collect();
        for memory in [1, 100, 10_000, 1 << 20] {
            let got = spill.select(&slots, &ranks, None, memory).expect("select");
            let expected: Vec<[u64; 1]> = ranks.iter().map(|&r| sorted[r as usize]).collect();
            assert_eq!(got, expected, "memory {memory}");
        }
        // Each slot alone, with its bounds given.
        for (slot, sample) in slots.iter().zip(&samples) {
            let sorted = sorted_union(std::slice::from_ref(sample));
            let (min, max) = (sorted[0][0], sorted[sorted.len() - 1][0]);
            let ranks = [0, n / 2, n - 1];
            let got = spill
                .select(&[*slot], &ranks, Some((min, max)), 50)
                .expect("select");
            assert_eq!(got, ranks.map(|r| sorted[r as usize]));
        }
    }

    #[test]
    fn multi_word_keys_break_ties_on_the_later_words() {
        let dir = SpillDir::create_in(&std::env::temp_dir()).expect("spill dir");
        // Every first word equal: the order is decided by the second and third words.
        let sample: Vec<[u64; 3]> = (0..5000u64).map(|i| [7, i % 3, 5000 - i]).collect();
        let (spill, slots) = spill_of(dir.path(), std::slice::from_ref(&sample));
        let sorted = sorted_union(std::slice::from_ref(&sample));
        let ranks = [0, 1, 1666, 1667, 2500, 4999];
        assert_eq!(
            spill.select(&slots, &ranks, None, 10).expect("select"),
            ranks.map(|r| sorted[r as usize])
        );
    }

    #[test]
    fn for_each_sees_every_key_in_push_order() {
        let dir = SpillDir::create_in(&std::env::temp_dir()).expect("spill dir");
        let sample: Vec<[u64; 2]> = (0..20_000u64).map(|i| [i * 3, i]).collect();
        let (spill, slots) = spill_of(dir.path(), std::slice::from_ref(&sample));
        let mut seen = Vec::new();
        spill.for_each(&slots, |k| seen.push(*k)).expect("read");
        assert_eq!(seen, sample);
        assert_eq!(spill.len(slots[0]), 20_000);
    }

    #[test]
    fn the_spill_directory_goes_away_when_dropped() {
        let dir = SpillDir::create_in(&std::env::temp_dir()).expect("spill dir");
        let path = dir.path().to_owned();
        std::fs::write(path.join("x"), b"1").expect("write");
        drop(dir);
        assert!(!path.exists());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        #[test]
        fn spilled_selection_reads_the_sorted_positions(
            samples in proptest::collection::vec(
                proptest::collection::vec((0u64..50, 0u64..1_000_000), 0..400), 1..4),
            memory in 1usize..300,
            picks in proptest::collection::vec(any::<prop::sample::Index>(), 1..12),
        ) {
            // Keys from a narrow or a wide span, so both the equal-key and the bucketing paths run.
            let samples: Vec<Vec<[u64; 1]>> = samples
                .iter()
                .map(|s| s.iter().map(|&(a, b)| [if a % 2 == 0 { a } else { b * a }]).collect())
                .collect();
            let sorted = sorted_union(&samples);
            prop_assume!(!sorted.is_empty());
            let dir = SpillDir::create_in(&std::env::temp_dir()).expect("spill dir");
            let (spill, slots) = spill_of(dir.path(), &samples);
            let ranks: Vec<u64> = picks.iter().map(|p| p.index(sorted.len()) as u64).collect();
            let got = spill.select(&slots, &ranks, None, memory).expect("select");
            let expected: Vec<[u64; 1]> = ranks.iter().map(|&r| sorted[r as usize]).collect();
            prop_assert_eq!(got, expected);
        }
    }
}
