//! How many CPUs the launcher may really use: the cgroup CPU limit (what a pod's `resources.limits.cpu` sets),
//! not the host's core count, so a 2-CPU launcher on a 64-core node does not start 64 busy threads.

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
