//! The isolation every sandbox container gets, in one file that a security reviewer can read
//! whole. Docker's defaults are not enough for hostile input; SECURITY.md lists each layer
//! with the test that proves it, and `texfleet sandbox check` verifies each from inside a
//! container configured exactly like a job's.

use bollard::models::{HostConfig, HostConfigLogConfig};
use std::collections::HashMap;
use texfleet_core::Config;
use texfleet_sandbox::COMPILE_UID;

/// The container starts its supervisor as root, whose bounding set holds only what the
/// supervisor keeps after it drops to its own uid at once: switching the compile to the
/// compile's uid, and killing what the compile leaves (sandbox-image/supervisor, privileges.rs).
/// The compile itself runs with no capability at all.
pub const CONTAINER_USER: &str = "0:0";
const CAPABILITIES: [&str; 3] = ["SETUID", "SETGID", "KILL"];
/// Our syscall allowlist (see the file for what it refuses and why).
const SECCOMP_PROFILE: &str = include_str!("../../sandbox-image/seccomp.json");
/// Files and directories a job may create in its work directory.
const WORK_INODES: u32 = 20_000;
/// Docker's default masked paths (which setting the field replaces), plus `/dev/pts`, which
/// holds `ptmx` (no pseudo-terminals), and `/dev/mqueue` (no POSIX message queues).
const MASKED_PATHS: &[&str] = &[
    "/proc/asound",
    "/proc/acpi",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/sys/firmware",
    "/sys/devices/virtual/powercap",
    "/dev/pts",
    "/dev/mqueue",
    "/dev/ptmx",
];
/// Docker's default read-only paths (which setting the field replaces).
const READONLY_PATHS: &[&str] = &[
    "/proc/bus",
    "/proc/fs",
    "/proc/irq",
    "/proc/sys",
    "/proc/sysrq-trigger",
];

/// The isolation every sandbox gets. Docker's defaults are not enough for hostile input:
/// no network, only the three capabilities the supervisor needs, no privilege gain, our own
/// seccomp allowlist, a read-only root, memory with no extra swap, bounded pids and CPU, small
/// tmpfs mounts (size and inodes capped) that cannot hold devices, setuid files or
/// executables, no IPC namespace objects, no pseudo-terminals, no logs kept by the engine, and
/// an init process that reaps zombies. `texfleet sandbox check` verifies each of these from
/// inside a container.
pub fn host_config(config: &Config) -> HostConfig {
    let memory = config.sandbox_memory_mb * 1024 * 1024;
    let owner = format!("uid={COMPILE_UID},gid={COMPILE_UID}");
    let tmpfs = HashMap::from([
        (
            "/work".to_string(),
            format!(
                "rw,nosuid,nodev,noexec,size={}m,nr_inodes={WORK_INODES},{owner},mode=0755",
                config.sandbox_tmpfs_mb
            ),
        ),
        (
            "/tmp".to_string(),
            format!("rw,nosuid,nodev,noexec,size=64m,nr_inodes=4096,{owner},mode=0700"),
        ),
        (
            "/dev/shm".to_string(),
            "rw,nosuid,nodev,noexec,size=1m,nr_inodes=16,mode=0755".to_string(),
        ),
    ]);
    let strings = |items: &[&str]| items.iter().map(|item| item.to_string()).collect();
    HostConfig {
        memory: Some(memory),
        memory_swap: Some(memory),
        pids_limit: Some(config.sandbox_pids_limit),
        nano_cpus: Some((config.sandbox_cpus * 1e9) as i64),
        readonly_rootfs: Some(true),
        tmpfs: Some(tmpfs),
        network_mode: Some("none".to_string()),
        ipc_mode: Some("none".to_string()),
        cap_drop: Some(vec!["ALL".to_string()]),
        cap_add: Some(strings(&CAPABILITIES)),
        security_opt: Some(vec![
            "no-new-privileges:true".to_string(),
            format!("seccomp={SECCOMP_PROFILE}"),
        ]),
        masked_paths: Some(strings(MASKED_PATHS)),
        readonly_paths: Some(strings(READONLY_PATHS)),
        log_config: Some(HostConfigLogConfig {
            typ: Some("none".to_string()),
            config: None,
        }),
        init: Some(true),
        runtime: (!config.sandbox_runtime.is_empty()).then(|| config.sandbox_runtime.clone()),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_sandbox_is_locked_down() {
        let config = Config {
            sandbox_memory_mb: 512,
            sandbox_runtime: "runsc".into(),
            ..Config::default()
        };
        let host = host_config(&config);
        assert_eq!(host.log_config.unwrap().typ.as_deref(), Some("none"));
        assert_eq!(host.network_mode.as_deref(), Some("none"));
        assert_eq!(host.init, Some(true));
        assert_eq!(host.readonly_rootfs, Some(true));
        assert_eq!(host.memory, host.memory_swap);
        assert_eq!(host.cap_drop, Some(vec!["ALL".to_string()]));
        assert_eq!(
            host.cap_add,
            Some(vec!["SETUID".into(), "SETGID".into(), "KILL".into()])
        );
        assert_eq!(host.ipc_mode.as_deref(), Some("none"));
        let masked = host.masked_paths.unwrap();
        assert!(
            masked.contains(&"/dev/pts".to_string()) && masked.contains(&"/proc/kcore".to_string())
        );
        assert_eq!(host.runtime.as_deref(), Some("runsc"));
        let security = host.security_opt.unwrap();
        assert!(security.contains(&"no-new-privileges:true".to_string()));
        let seccomp = security
            .iter()
            .find_map(|o| o.strip_prefix("seccomp="))
            .expect("a seccomp profile");
        let profile: serde_json::Value = serde_json::from_str(seccomp).unwrap();
        assert_eq!(profile["defaultAction"], "SCMP_ACT_ERRNO");
        let allowed: Vec<&str> = profile["syscalls"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|rule| rule["action"] == "SCMP_ACT_ALLOW")
            .flat_map(|rule| {
                rule["names"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|n| n.as_str().unwrap())
            })
            .collect();
        for refused in [
            "socket",
            "socketpair",
            "connect",
            "mount",
            "ptrace",
            "unshare",
            "setns",
            "bpf",
            "keyctl",
            "symlink",
            "link",
        ] {
            assert!(!allowed.contains(&refused), "{refused} is allowed");
        }
        assert!(host_config(&Config::default()).runtime.is_none());
    }
}
