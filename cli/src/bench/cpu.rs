//! The machine's busy CPU time, from `/proc/stat`: what a load costs in all (the stack,
//! dockerd, containerd, the shims, the fuse-overlayfs mounts, Postgres, Garage, the
//! compiles), so that a throughput on cores everything shares reads as CPU time per job.

use std::time::Duration;

/// Busy CPU time of every core since boot (all but idle and iowait).
pub fn busy() -> Duration {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let ticks: Vec<u64> = stat
        .lines()
        .next()
        .and_then(|line| line.strip_prefix("cpu "))
        .map(|fields| {
            fields
                .split_whitespace()
                .filter_map(|field| field.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    // user nice system idle iowait irq softirq steal ...: guest time is within user already.
    let busy: u64 = ticks
        .iter()
        .take(8)
        .enumerate()
        .filter(|(field, _)| *field != 3 && *field != 4)
        .map(|(_, ticks)| ticks)
        .sum();
    // /proc/stat counts in USER_HZ, 100 per second on every architecture Linux runs Docker on.
    Duration::from_millis(busy * 10)
}

/// Milliseconds of busy CPU per job since `since` (a reading of [`busy`]).
pub fn ms_per_job(since: Duration, jobs: usize) -> f64 {
    busy().saturating_sub(since).as_secs_f64() * 1000.0 / jobs.max(1) as f64
}
