//! `texfleet-supervisor check`: the sandbox examined from inside, one named property at a
//! time, so that `texfleet sandbox check` (and the tests) can prove each layer is in force on
//! a given Docker engine rather than trusting that the engine applied what we asked.

use nix::errno::Errno;
use nix::sys::socket::{socket, AddressFamily, SockFlag, SockType};
use std::fs;
use texfleet_sandbox::{Check, CheckSpec};

pub fn run(spec: &CheckSpec) -> Vec<Check> {
    let status = fs::read_to_string("/proc/self/status").unwrap_or_default();
    let status_field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(':').map(str::trim))
            .unwrap_or("missing")
            .to_string()
    };
    let mut checks = Vec::new();
    let mut check = |name: &str, ok: bool, detail: String| {
        checks.push(Check {
            name: name.to_string(),
            ok,
            detail,
        });
    };

    let uid = nix::unistd::getuid().as_raw();
    check(
        "non_root_user",
        uid == spec.uid && uid != 0,
        format!("uid {uid}"),
    );
    let (effective, permitted) = (status_field("CapEff"), status_field("CapPrm"));
    check(
        "no_capabilities",
        is_zero_mask(&effective) && is_zero_mask(&permitted),
        format!("CapEff {effective}, CapPrm {permitted}"),
    );
    let no_new_privs = status_field("NoNewPrivs");
    check(
        "no_new_privileges",
        no_new_privs == "1",
        format!("NoNewPrivs {no_new_privs}"),
    );
    let seccomp = status_field("Seccomp");
    check(
        "seccomp_filter",
        seccomp == "2",
        format!("Seccomp {seccomp}"),
    );

    let refused = |result: Result<(), Errno>| match result {
        Ok(()) => (false, "allowed".to_string()),
        Err(errno) => (errno == Errno::EPERM, format!("{errno}")),
    };
    let (ok, detail) = refused(
        socket(
            AddressFamily::Unix,
            SockType::Stream,
            SockFlag::empty(),
            None,
        )
        .map(drop),
    );
    check("seccomp_refuses_sockets", ok, detail);
    let (ok, detail) = refused(nix::sys::ptrace::traceme());
    check("seccomp_refuses_ptrace", ok, detail);
    let (ok, detail) = refused(nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWUSER));
    check("no_new_namespaces", ok, detail);
    let target = "/work/.mount-probe";
    let _ = fs::create_dir(target);
    let mounted = nix::mount::mount(
        Some("none"),
        target,
        Some("tmpfs"),
        nix::mount::MsFlags::empty(),
        None::<&str>,
    );
    let (ok, detail) = refused(mounted);
    check("no_mount", ok, detail);
    let _ = fs::remove_dir(target);

    let root_write = fs::write("/usr/local/.write-probe", b"x");
    check(
        "read_only_root",
        root_write
            .as_ref()
            .is_err_and(|e| e.raw_os_error() == Some(Errno::EROFS as i32)),
        format!("{root_write:?}"),
    );
    let mounts = fs::read_to_string("/proc/mounts").unwrap_or_default();
    for (name, mount_point, size) in [
        ("work_tmpfs", "/work", Some(spec.work_tmpfs_bytes)),
        ("tmp_tmpfs", "/tmp", None),
    ] {
        let line = mounts
            .lines()
            .find(|l| l.split_whitespace().nth(1) == Some(mount_point))
            .unwrap_or("");
        let fields: Vec<&str> = line.split_whitespace().collect();
        let options: Vec<&str> = fields
            .get(3)
            .map(|o| o.split(',').collect())
            .unwrap_or_default();
        let size_ok =
            size.is_none_or(|bytes| options.contains(&format!("size={}k", bytes / 1024).as_str()));
        let ok = fields.get(2) == Some(&"tmpfs")
            && ["rw", "nosuid", "nodev", "noexec"]
                .iter()
                .all(|o| options.contains(o))
            && size_ok;
        check(name, ok, line.to_string());
    }

    let interfaces: Vec<String> = fs::read_dir("/sys/class/net")
        .map(|dir| {
            dir.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    check(
        "no_network",
        interfaces == ["lo"],
        format!("interfaces {interfaces:?}"),
    );

    let memory = cgroup_value(&["memory/memory.limit_in_bytes", "memory.max"]);
    check(
        "memory_limit",
        memory == Some(spec.memory_bytes),
        format!("{memory:?}"),
    );
    // memory == memory+swap: cgroup v1 shows memsw (when swap accounting is on), v2 a zero swap.max.
    let swap_ok = match (
        cgroup_value(&["memory/memory.memsw.limit_in_bytes"]),
        cgroup_value(&["memory.swap.max"]),
    ) {
        (Some(memsw), _) => memsw == spec.memory_bytes,
        (None, Some(swap)) => swap == 0,
        (None, None) => true,
    };
    check(
        "no_swap_beyond_memory",
        swap_ok,
        "memory+swap equals memory".to_string(),
    );
    let pids = cgroup_value(&["pids/pids.max", "pids.max"]);
    check(
        "pids_limit",
        pids == Some(spec.pids_limit),
        format!("{pids:?}"),
    );
    let cpus = cpu_limit();
    check(
        "cpu_limit",
        cpus.is_some_and(|c| (c - spec.cpus).abs() < 0.01),
        format!("{cpus:?}"),
    );

    let init = fs::read_to_string("/proc/1/comm").unwrap_or_default();
    check(
        "init_process",
        init.trim() == "docker-init" || init.trim() == "tini",
        format!("pid 1 is {:?}", init.trim()),
    );
    let home = std::env::var("HOME").unwrap_or_default();
    check("home_in_tmpfs", home == "/work", format!("HOME={home}"));
    checks
}

fn is_zero_mask(mask: &str) -> bool {
    !mask.is_empty() && mask.chars().all(|c| c == '0')
}

fn cgroup_value(candidates: &[&str]) -> Option<i64> {
    candidates.iter().find_map(|path| {
        fs::read_to_string(format!("/sys/fs/cgroup/{path}"))
            .ok()?
            .trim()
            .parse()
            .ok()
    })
}

/// CPU limit in cores from the CFS quota (cgroup v1) or cpu.max (v2).
fn cpu_limit() -> Option<f64> {
    let v1 = || {
        let quota = cgroup_value(&["cpu/cpu.cfs_quota_us", "cpu,cpuacct/cpu.cfs_quota_us"])?;
        let period = cgroup_value(&["cpu/cpu.cfs_period_us", "cpu,cpuacct/cpu.cfs_period_us"])?;
        (quota > 0).then(|| quota as f64 / period as f64)
    };
    let v2 = || {
        let text = fs::read_to_string("/sys/fs/cgroup/cpu.max").ok()?;
        let (quota, period) = text.trim().split_once(' ')?;
        Some(quota.parse::<f64>().ok()? / period.parse::<f64>().ok()?)
    };
    v1().or_else(v2)
}
