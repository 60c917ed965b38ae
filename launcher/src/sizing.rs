//! How many CPUs and how much memory the launcher may really use: the cgroup limits (what a pod's
//! `resources.limits` set), not the host's, so a 2-CPU launcher on a 64-core node does not start 64 busy threads
//! and a run that cannot fit its pod's memory is refused before it starts instead of being OOM-killed.

use std::path::Path;

/// The CPUs this process may use: the cgroup quota when one is set, else the CPUs the scheduler allows.
pub fn available_cpus() -> usize {
    let host = std::thread::available_parallelism().map_or(1, usize::from);
    let quota = cgroup_v2_limit(Path::new("/sys/fs/cgroup/cpu.max")).or_else(|| {
        cgroup_v1_limit(
            Path::new("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"),
            Path::new("/sys/fs/cgroup/cpu/cpu.cfs_period_us"),
        )
    });
    quota.map_or(host, |q| q.min(host)).max(1)
}

/// The memory this process may still use, in bytes: the cgroup limit minus what the cgroup uses now, capped by
/// the host's available memory (`MemAvailable`); `None` when neither can be read.
pub(crate) fn available_memory() -> Option<u64> {
    let host = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| mem_available(&text));
    let cgroup = cgroup_memory_room(
        Path::new("/sys/fs/cgroup/memory.max"),
        Path::new("/sys/fs/cgroup/memory.current"),
    )
    .or_else(|| {
        cgroup_memory_room(
            Path::new("/sys/fs/cgroup/memory/memory.limit_in_bytes"),
            Path::new("/sys/fs/cgroup/memory/memory.usage_in_bytes"),
        )
    });
    match (host, cgroup) {
        (Some(h), Some(c)) => Some(h.min(c)),
        (h, c) => h.or(c),
    }
}

/// `MemAvailable:  123456 kB` of `/proc/meminfo`, in bytes.
fn mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// A cgroup's limit minus its usage; `None` without a limit (`max`, or v1's "unlimited" near 2^63).
fn cgroup_memory_room(limit: &Path, usage: &Path) -> Option<u64> {
    let limit = parse_memory_limit(&std::fs::read_to_string(limit).ok()?)?;
    let used: u64 = std::fs::read_to_string(usage)
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(0);
    Some(limit.saturating_sub(used))
}

fn parse_memory_limit(text: &str) -> Option<u64> {
    let text = text.trim();
    if text == "max" {
        return None;
    }
    let limit: u64 = text.parse().ok()?;
    // cgroup v1 writes its "no limit" as the largest page-aligned i64.
    (limit < (1 << 62)).then_some(limit)
}

fn cgroup_v2_limit(cpu_max: &Path) -> Option<usize> {
    parse_cpu_max(&std::fs::read_to_string(cpu_max).ok()?)
}

fn cgroup_v1_limit(quota: &Path, period: &Path) -> Option<usize> {
    let quota: i64 = std::fs::read_to_string(quota).ok()?.trim().parse().ok()?;
    let period: i64 = std::fs::read_to_string(period).ok()?.trim().parse().ok()?;
    cpus_from_quota(quota, period)
}

/// `cpu.max` holds `<quota> <period>` or `max <period>`.
fn parse_cpu_max(text: &str) -> Option<usize> {
    let mut fields = text.split_whitespace();
    let quota = fields.next()?;
    let period: i64 = fields.next()?.parse().ok()?;
    if quota == "max" {
        return None;
    }
    cpus_from_quota(quota.parse().ok()?, period)
}

/// A fractional limit rounds up: 1.5 CPUs can keep two threads partly busy.
fn cpus_from_quota(quota: i64, period: i64) -> Option<usize> {
    if quota <= 0 || period <= 0 {
        return None;
    }
    usize::try_from((quota + period - 1) / period).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_max_quota_is_rounded_up_to_whole_cpus() {
        assert_eq!(parse_cpu_max("200000 100000\n"), Some(2));
        assert_eq!(parse_cpu_max("150000 100000\n"), Some(2));
        assert_eq!(parse_cpu_max("50000 100000\n"), Some(1));
    }

    #[test]
    fn memory_limits_read_both_cgroup_versions_and_meminfo() {
        assert_eq!(parse_memory_limit("max\n"), None);
        assert_eq!(parse_memory_limit("9223372036854771712\n"), None);
        assert_eq!(parse_memory_limit("1073741824\n"), Some(1 << 30));
        assert_eq!(
            mem_available("MemTotal: 100 kB\nMemAvailable:    2048 kB\n"),
            Some(2 * 1024 * 1024)
        );
        assert_eq!(mem_available("MemTotal: 100 kB\n"), None);
        assert!(available_memory().is_some_and(|b| b > 0));
    }

    #[test]
    fn an_unlimited_cgroup_has_no_quota() {
        assert_eq!(parse_cpu_max("max 100000\n"), None);
        assert_eq!(cpus_from_quota(-1, 100_000), None);
        assert_eq!(parse_cpu_max("garbage"), None);
    }

    #[test]
    fn available_cpus_is_at_least_one() {
        assert!(available_cpus() >= 1);
    }
}
