//! `texfleet-supervisor check`: the sandbox examined from inside, one named property at a
//! time, so that `texfleet sandbox check` (and the scheduler at start) can prove each layer is
//! in force on a given Docker engine rather than trusting that the engine applied what we
//! asked. The supervisor checks its own side here, then starts the compile side
//! ([`compile_side`]) exactly as it starts a compile, and adds what that found.

mod compile_side;

use compile_side::COMPILE_SIDE_TIMEOUT;
pub use compile_side::{run as run_compile_side, COMPILE_SIDE_ARG};

use crate::confine;
use crate::privileges;
use crate::process::{self, Exit, Program};
use nix::errno::Errno;
use nix::sys::socket::{socket, AddressFamily, SockFlag, SockType};
use std::fs;
use std::io::{self, Read};
use texfleet_sandbox::{Check, CheckSpec, Engine, JobSpec, SUPERVISOR_UID};

/// Collects named checks.
#[derive(Default)]
pub struct Checks(pub Vec<Check>);

impl Checks {
    pub fn add(&mut self, name: &str, ok: bool, detail: impl Into<String>) {
        self.0.push(Check {
            name: name.to_string(),
            ok,
            detail: detail.into(),
        });
    }

    /// A call that the sandbox must refuse with EPERM (seccomp) or EACCES (Landlock, uids).
    pub fn refused(&mut self, name: &str, result: Result<(), Errno>, expected: &[Errno]) {
        let (ok, detail) = match result {
            Ok(()) => (false, "allowed".to_string()),
            Err(errno) => (expected.contains(&errno), errno.to_string()),
        };
        self.add(name, ok, detail);
    }
}

/// A field of `/proc/self/status`.
pub fn status_field(name: &str) -> String {
    let status = fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(':').map(str::trim))
        .unwrap_or("missing")
        .to_string()
}

pub fn is_zero_mask(mask: &str) -> bool {
    !mask.is_empty() && mask.chars().all(|c| c == '0')
}

pub fn run() -> io::Result<()> {
    let became = privileges::become_supervisor();
    let spec: CheckSpec = crate::read_stdin_json()?;
    let mut checks = Checks::default();
    checks.add(
        "supervisor_user",
        became.is_ok() && nix::unistd::getuid().as_raw() == SUPERVISOR_UID,
        format!("{became:?}, uid {}", nix::unistd::getuid()),
    );
    // SETUID, SETGID and KILL: bits 7, 6 and 5.
    let effective = status_field("CapEff");
    checks.add(
        "supervisor_capabilities",
        effective == "00000000000000e0" && is_zero_mask(&status_field("CapInh")),
        format!("CapEff {effective}"),
    );
    let dumpable = nix::sys::prctl::get_dumpable();
    checks.add(
        "supervisor_not_dumpable",
        dumpable == Ok(false),
        format!("{dumpable:?}"),
    );
    supervisor_side(&mut checks, &spec);
    match compile_side_checks(&spec) {
        Ok(compile) => checks.0.extend(compile),
        Err(error) => checks.add("compile_side", false, error.to_string()),
    }
    serde_json::to_writer(io::stdout().lock(), &checks.0).map_err(io::Error::other)
}

/// Starts the compile side as the supervisor starts a compile, and reads its findings.
fn compile_side_checks(spec: &CheckSpec) -> io::Result<Vec<Check>> {
    let job = JobSpec {
        nonce: String::new(),
        engine: Engine::default(),
        halt_on_error: false,
        draft: false,
        wordcount: false,
        check: None,
        thumbnail_width: None,
        preview_page: None,
        timeout_seconds: COMPILE_SIDE_TIMEOUT,
        max_pdf_bytes: 1 << 20,
        max_log_bytes: 1 << 20,
        max_synctex_bytes: 1 << 20,
        main: String::new(),
        source_date_epoch: 0,
        files: Vec::new(),
        preamble: Default::default(),
        previous: Default::default(),
    };
    let (reader, writer) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(io::Error::other)?;
    let environment = confine::environment(&job, std::path::Path::new(""));
    let mut args = vec![COMPILE_SIDE_ARG.to_string()];
    args.push(serde_json::to_string(spec).map_err(io::Error::other)?);
    let arg_refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let program = Program::new(crate::supervise::SELF, &arg_refs, &environment);
    let writer = fs::File::from(writer);
    let child = process::spawn(&program, None, Some(&writer), || {
        privileges::become_compile()?;
        confine::prefer_for_oom_kill()?;
        confine::set_limits(&job)
    })?;
    drop(writer);
    let mut output = String::new();
    fs::File::from(reader).read_to_string(&mut output)?;
    process::wait(child)?;
    serde_json::from_str(&output).map_err(|e| {
        io::Error::other(format!(
            "the compile side printed no report ({e}): {output}"
        ))
    })
}

fn supervisor_side(checks: &mut Checks, spec: &CheckSpec) {
    let no_new_privs = nix::sys::prctl::get_no_new_privs();
    checks.add(
        "no_new_privileges",
        no_new_privs == Ok(true),
        format!("{no_new_privs:?}"),
    );
    let seccomp = status_field("Seccomp");
    checks.add(
        "seccomp_filter",
        seccomp == "2",
        format!("Seccomp {seccomp}"),
    );
    let unix_socket = socket(
        AddressFamily::Unix,
        SockType::Stream,
        SockFlag::empty(),
        None,
    );
    checks.refused(
        "seccomp_refuses_sockets",
        unix_socket.map(drop),
        &[Errno::EPERM],
    );
    checks.refused(
        "seccomp_refuses_ptrace",
        nix::sys::ptrace::traceme(),
        &[Errno::EPERM],
    );
    let namespace = nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWUSER);
    checks.refused("no_new_namespaces", namespace, &[Errno::EPERM]);
    let mounted = nix::mount::mount(
        Some("none"),
        "/tmp",
        Some("tmpfs"),
        nix::mount::MsFlags::empty(),
        None::<&str>,
    );
    checks.refused("no_mount", mounted, &[Errno::EPERM]);

    let mounts = fs::read_to_string("/proc/mounts").unwrap_or_default();
    // The flag as statvfs reports it (Linux), or the root's mount options (gVisor).
    let root = nix::sys::statvfs::statvfs("/").map(|stats| stats.flags());
    let root_mount = mounts
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some("/"))
        .unwrap_or("");
    let root_options = root_mount.split_whitespace().nth(3).unwrap_or("");
    checks.add(
        "read_only_root",
        root.is_ok_and(|flags| flags.contains(nix::sys::statvfs::FsFlags::ST_RDONLY))
            || root_options.split(',').any(|o| o == "ro"),
        format!("{root:?}, {root_mount}"),
    );
    let shells: Vec<&str> = ["/bin/bash", "/bin/dash", "/usr/bin/bash", "/usr/bin/dash"]
        .into_iter()
        .filter(|shell| fs::symlink_metadata(shell).is_ok())
        .collect();
    // /bin/sh is the restricted shell: a shell would run `exit 0`; it refuses it.
    let sh = Program::new(
        texfleet_sandbox::shell_escape::SHELL,
        &["-c", "exit 0"],
        &[],
    );
    let sh_answer = process::run(&sh, None, &[]);
    checks.add(
        "no_shell",
        shells.is_empty() && matches!(sh_answer, Ok(Exit::Code(127))),
        format!("present: {shells:?}; sh -c 'exit 0': {sh_answer:?}"),
    );

    // gVisor shows only the options its own tmpfs has (it knows no devices or setuid files,
    // and counts no inodes); Linux shows all.
    let (flags, inodes): (&[&str], &str) = if !spec.gvisor {
        (&["nosuid", "nodev", "noexec"], "nr_inodes=")
    } else {
        (&["noexec"], "size=")
    };
    for (name, mount_point, size) in [
        ("work_tmpfs", "/work", Some(spec.work_tmpfs_bytes)),
        ("tmp_tmpfs", "/tmp", None),
        ("shm_tmpfs", "/dev/shm", None),
    ] {
        let sizes = [
            format!("size={}k", size.unwrap_or(0) / 1024),
            format!("size={}m", size.unwrap_or(0) / 1024 / 1024),
        ];
        let line = mounts
            .lines()
            .find(|l| l.split_whitespace().nth(1) == Some(mount_point))
            .unwrap_or("");
        let fields: Vec<&str> = line.split_whitespace().collect();
        let options: Vec<&str> = fields
            .get(3)
            .map(|o| o.split(',').collect())
            .unwrap_or_default();
        let sized = match size {
            Some(_) => sizes.iter().any(|s| options.contains(&s.as_str())),
            None => options.iter().any(|o| o.starts_with("size=")),
        };
        let ok = fields.get(2) == Some(&"tmpfs")
            && flags.iter().all(|o| options.contains(o))
            && options.iter().any(|o| o.starts_with(inodes))
            && sized;
        checks.add(name, ok, line);
    }
    let interfaces: Vec<String> = fs::read_dir("/sys/class/net")
        .map(|dir| {
            dir.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    checks.add(
        "no_network",
        interfaces == ["lo"],
        format!("interfaces {interfaces:?}"),
    );
    cgroup_limits(checks, spec);
    let init = fs::read_to_string("/proc/1/comm").unwrap_or_default();
    checks.add(
        "init_process",
        init.trim() == "docker-init" || init.trim() == "tini",
        format!("pid 1 is {:?}", init.trim()),
    );
}

/// Limits the kernel enforces on the container's cgroup. Under gVisor they are enforced
/// outside its kernel and cannot be seen from inside; the scheduler then checks them in the
/// engine's record of the container instead.
fn cgroup_limits(checks: &mut Checks, spec: &CheckSpec) {
    if spec.gvisor {
        return;
    }
    let memory = cgroup_value(&["memory/memory.limit_in_bytes", "memory.max"]);
    checks.add(
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
    checks.add(
        "no_swap_beyond_memory",
        swap_ok,
        "memory+swap equals memory",
    );
    let pids = cgroup_value(&["pids/pids.max", "pids.max"]);
    checks.add(
        "pids_limit",
        pids == Some(spec.pids_limit),
        format!("{pids:?}"),
    );
    let cpus = cpu_limit();
    checks.add(
        "cpu_limit",
        cpus.is_some_and(|c| (c - spec.cpus).abs() < 0.01),
        format!("{cpus:?}"),
    );
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
