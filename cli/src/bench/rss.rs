//! The resident memory of the stack's `texfleet api` and `texfleet scheduler` processes on
//! this machine (the dev stack the bench runs against), from `/proc`: at idle, and the most
//! seen while a load runs.

use std::collections::BTreeMap;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

pub const ROLES: [&str; 2] = ["api", "scheduler"];

/// MiB resident per role, the largest process of each; roles not running are left out.
pub fn resident_mib() -> BTreeMap<&'static str, f64> {
    let mut found = BTreeMap::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<&[u8]> = cmdline.split(|byte| *byte == 0).collect();
        let is_texfleet = args
            .first()
            .is_some_and(|program| program.ends_with(b"/texfleet"));
        let Some(role) = ROLES
            .iter()
            .find(|role| is_texfleet && args.get(1) == Some(&role.as_bytes()))
        else {
            continue;
        };
        let status = std::fs::read_to_string(entry.path().join("status")).unwrap_or_default();
        let kib: Option<f64> = status
            .lines()
            .find_map(|line| line.strip_prefix("VmRSS:"))
            .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok());
        if let Some(kib) = kib {
            let mib = kib / 1024.0;
            let largest = found.entry(*role).or_insert(0.0_f64);
            *largest = largest.max(mib);
        }
    }
    found
}

/// Samples [`resident_mib`] every 100 ms until `stop`, and returns the peak of each role.
pub async fn peak_while(stop: CancellationToken) -> BTreeMap<&'static str, f64> {
    let mut peak: BTreeMap<&'static str, f64> = BTreeMap::new();
    loop {
        for (role, mib) in resident_mib() {
            let largest = peak.entry(role).or_insert(0.0);
            *largest = largest.max(mib);
        }
        tokio::select! {
            _ = stop.cancelled() => return peak,
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
        }
    }
}

pub fn describe(mib: &BTreeMap<&'static str, f64>) -> String {
    ROLES
        .iter()
        .map(|role| match mib.get(role) {
            Some(mib) => format!("{role} {mib:.1} MiB"),
            None => format!("{role} not found"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}
