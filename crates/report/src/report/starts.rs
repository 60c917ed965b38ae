//! When the shards of a sharded run started: the release instant they were given and each one's actual start
//! (its run.json's `t0_unix_ns`), for the merged summary. The spread says how far apart the shards' clocks began;
//! each shard's lateness after the release says how well the release worked.

use super::meta::RunMeta;

pub use llmbench_metrics::metrics::ShardStarts;

/// The starts of `shards` (any order); `None` without shards. The release instant is the one the shards agree
/// on: shards released at different instants (launched by hand, or released twice) are measured from the
/// earliest start instead, and `released_at` is left out.
pub fn shard_starts(shards: &[RunMeta]) -> Option<ShardStarts> {
    let mut shards: Vec<&RunMeta> = shards.iter().collect();
    shards.sort_by_key(|meta| meta.shard.index);
    let earliest = shards.iter().map(|meta| meta.t0_unix_ns).min()?;
    let latest = shards.iter().map(|meta| meta.t0_unix_ns).max()?;
    let instants: Vec<Option<u64>> = shards
        .iter()
        .map(|meta| meta.release.map(|r| r.at_unix_ns))
        .collect();
    let common = match instants.first() {
        Some(Some(first)) if instants.iter().all(|i| *i == Some(*first)) => Some(*first),
        _ => None,
    };
    let base = common.unwrap_or(earliest);
    let ms = |ns: i128| ns as f64 / 1e6;
    Some(ShardStarts {
        released_at: common.map(llmbench_model::wallclock::rfc3339_millis),
        late_ms: shards
            .iter()
            .map(|meta| ms(i128::from(meta.t0_unix_ns) - i128::from(base)))
            .collect(),
        skew_ms: ms(i128::from(latest - earliest)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{ReleaseMeta, ShardMeta};

    fn shard(index: u32, t0: u64, at: Option<u64>) -> RunMeta {
        let mut meta = super::super::tests::meta();
        meta.shard = ShardMeta { index, count: 3 };
        meta.t0_unix_ns = t0;
        meta.release = at.map(|at_unix_ns| ReleaseMeta {
            ready_unix_ns: 0,
            at_unix_ns,
        });
        meta
    }

    #[test]
    fn released_shards_are_measured_from_the_release_instant() {
        // Released at 10 s; shards started 0.25 ms, 1.5 ms and 0.1 ms after it: skew 1.5 − 0.1 = 1.4 ms.
        let at = 10_000_000_000;
        let starts = shard_starts(&[
            shard(2, at + 100_000, Some(at)),
            shard(0, at + 250_000, Some(at)),
            shard(1, at + 1_500_000, Some(at)),
        ])
        .unwrap();
        assert_eq!(
            starts.released_at.as_deref(),
            Some("1970-01-01T00:00:10.000Z")
        );
        assert_eq!(starts.late_ms, vec![0.25, 1.5, 0.1]);
        assert!((starts.skew_ms - 1.4).abs() < 1e-9, "{}", starts.skew_ms);
    }

    #[test]
    fn shards_not_released_together_are_measured_from_the_earliest_start() {
        let starts = shard_starts(&[
            shard(0, 5_000_000, None),
            shard(1, 2_000_000, Some(1_000_000)),
        ])
        .unwrap();
        assert_eq!(starts.released_at, None);
        assert_eq!(starts.late_ms, vec![3.0, 0.0]);
        assert_eq!(starts.skew_ms, 3.0);
        assert_eq!(shard_starts(&[]), None);
    }
}
