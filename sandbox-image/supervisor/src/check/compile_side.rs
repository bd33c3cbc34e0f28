//! The compile's side of the self-check (`texfleet-supervisor check-compile <spec>`): run as
//! the compile's user, confined as the driver confines itself, it tries what a hostile
//! document would try against the supervisor and the container, and prints what happened.

use super::Checks;
use crate::confine;
use nix::errno::Errno;
use nix::fcntl::{open, OFlag};
use nix::sys::resource::{getrlimit, Resource};
use nix::sys::signal::kill;
use nix::sys::stat::Mode;
use nix::sys::wait::{waitpid, WaitStatus};
use nix::unistd::{getpid, getppid, ForkResult};
use std::io;
use std::os::fd::AsRawFd;
use texfleet_sandbox::{CheckSpec, COMPILE_UID};

pub const COMPILE_SIDE_ARG: &str = "check-compile";
/// The timeout of the job the compile side is confined for.
pub const COMPILE_SIDE_TIMEOUT: u32 = 10;
/// `FIGETBSZ`: a file's block size. It works on any regular file, so only the filter can
/// refuse it (with ENOTTY, as for every request a compile has no use for).
const FIGETBSZ: nix::libc::c_ulong = 0x2;

fn open_for(path: &str, flags: OFlag) -> Result<(), Errno> {
    let fd = open(path, flags | OFlag::O_CLOEXEC, Mode::empty())?;
    let _ = nix::unistd::close(fd);
    Ok(())
}

pub fn run() -> io::Result<()> {
    let spec: CheckSpec = std::env::args()
        .nth(2)
        .and_then(|json| serde_json::from_str(&json).ok())
        .ok_or_else(|| io::Error::other("no check spec"))?;
    let mut checks = Checks::default();
    // Before Landlock, which keeps /proc out where it exists. gVisor lets a process of the
    // same user in even so (SECURITY.md says what that leaves open).
    let reached = reach_descriptor_of_undumpable_parent();
    checks.add(
        "cannot_reach_driver_descriptors",
        matches!(reached, Err(Errno::EACCES | Errno::EPERM)) || spec.gvisor,
        format!("{reached:?}"),
    );
    let landlock = confine::restrict_files(confine::WRITABLE);
    let uid = nix::unistd::getuid().as_raw();
    checks.add("compile_user", uid == COMPILE_UID, format!("uid {uid}"));
    // capget, not /proc/self/status: Landlock keeps the compile out of /proc.
    let held: Vec<String> = [
        caps::CapSet::Effective,
        caps::CapSet::Permitted,
        caps::CapSet::Inheritable,
        caps::CapSet::Ambient,
    ]
    .into_iter()
    .map(|set| format!("{set:?} {:?}", caps::read(None, set)))
    .collect();
    // gVisor has no ambient set: reading it fails there, and it holds nothing.
    checks.add(
        "compile_has_no_capabilities",
        held.iter()
            .all(|line| line.ends_with("Ok({})") || line.starts_with("Ambient Err")),
        held.join(", "),
    );
    let enforced = landlock
        .as_ref()
        .is_ok_and(|status| status.ruleset == landlock::RulesetStatus::FullyEnforced);
    checks.add("landlock", enforced || spec.gvisor, format!("{landlock:?}"));
    if enforced {
        for (name, path) in [
            ("reads_no_image_files", "/etc/passwd"),
            ("reads_no_proc", "/proc/self/mountinfo"),
        ] {
            checks.refused(name, open_for(path, OFlag::O_RDONLY), &[Errno::EACCES]);
        }
        let texmf = open_for(
            "/usr/share/texlive/texmf-dist/tex/latex/base/article.cls",
            OFlag::O_RDONLY,
        );
        checks.add("reads_tex_trees", texmf.is_ok(), format!("{texmf:?}"));
    }
    // Where no Landlock keeps reads to the trees (gVisor), TeX's own check must, names that
    // kpathsea expands included: in TeX Live 2022 and 2026 only the library the image preloads
    // keeps it (kpathsea-guard.c).
    let answers = ["/etc/passwd", "$SELFAUTOPARENT/etc/passwd"].map(|name| {
        let name_argument = format!("-safe-in-name={name}");
        let kpsewhich = crate::process::Program::new(
            "/usr/bin/kpsewhich",
            &["-progname=pdflatex", &name_argument],
            &[
                "PATH=/usr/bin".to_string(),
                "LANG=C.UTF-8".to_string(),
                format!("HOME={}", confine::HOME),
            ],
        );
        let answer = crate::process::spawn(&kpsewhich, None, None, || Ok(()))
            .map_err(|e| e.to_string())
            .and_then(|child| waitpid(child, None).map_err(|e| e.to_string()));
        (name, answer)
    });
    let all_refused = answers
        .iter()
        .all(|(_, answer)| matches!(answer, Ok(WaitStatus::Exited(_, code)) if *code != 0));
    checks.add(
        "tex_refuses_absolute_reads",
        enforced || all_refused,
        format!("kpsewhich -safe-in-name: {answers:?}"),
    );
    let work = std::fs::write("/work/.check-probe", b"x");
    checks.add("writes_work_directory", work.is_ok(), format!("{work:?}"));
    let _ = std::fs::remove_file("/work/.check-probe");

    let supervisor = getppid();
    checks.refused(
        "cannot_signal_supervisor",
        kill(supervisor, None),
        &[Errno::EPERM],
    );
    let fd = format!("/proc/{supervisor}/fd/1");
    checks.refused(
        "cannot_write_supervisor_output",
        open_for(&fd, OFlag::O_WRONLY),
        &[Errno::EACCES, Errno::EPERM],
    );
    let lowered = prlimit_other(supervisor.as_raw());
    checks.refused("cannot_lower_supervisor_limits", lowered, &[Errno::EPERM]);
    // gVisor's terminals are its own kernel's, not the host's: there a pseudo-terminal is
    // no road to the host kernel, and it cannot be masked.
    if !spec.gvisor {
        checks.refused(
            "no_ptmx",
            open_for("/dev/ptmx", OFlag::O_RDWR),
            &[Errno::EACCES, Errno::ENOENT, Errno::EPERM],
        );
    }
    checks.refused(
        "mqueue_not_writable",
        open_for("/dev/mqueue/probe", OFlag::O_CREAT | OFlag::O_WRONLY),
        &[Errno::EACCES, Errno::EROFS, Errno::ENOENT],
    );
    // FIGETBSZ on a regular file succeeds unless filtered: EPERM is the profile's answer
    // (and gVisor's); ENOTTY a profile's that answers refused ioctls as "not a terminal".
    checks.refused(
        "ioctl_filtered",
        block_size(),
        &[Errno::ENOTTY, Errno::EPERM],
    );
    let limits: Vec<(Resource, Option<u64>)> = [
        Resource::RLIMIT_NOFILE,
        Resource::RLIMIT_CORE,
        Resource::RLIMIT_CPU,
    ]
    .into_iter()
    .map(|resource| (resource, getrlimit(resource).ok().map(|(soft, _)| soft)))
    .collect();
    checks.add(
        "compile_limits",
        limits.iter().map(|(_, limit)| *limit).collect::<Vec<_>>()
            == [
                Some(256),
                Some(0),
                Some(u64::from(COMPILE_SIDE_TIMEOUT) + 1),
            ],
        format!("{limits:?}"),
    );
    // Under gVisor the limit counts the host threads of its kernel, not the sandbox's
    // processes; forking to it there would take the kernel down, not show the limit.
    if !spec.gvisor {
        let (started, stopped_by) = fork_until_refused(spec.pids_limit);
        checks.add(
            "pids_limit_holds",
            started < spec.pids_limit as usize && stopped_by == Some(Errno::EAGAIN),
            format!("{started} processes started, then {stopped_by:?}"),
        );
    }
    let home = std::env::var("HOME").unwrap_or_default();
    checks.add(
        "no_home",
        home == crate::confine::HOME && !std::path::Path::new(&home).exists(),
        format!("HOME={home}"),
    );
    serde_json::to_writer(io::stdout().lock(), &checks.0).map_err(io::Error::other)
}

/// From a child, opens a descriptor of this process through `/proc`, as a program of the
/// compile would try the driver's handover pipe: the driver is not dumpable, so the kernel
/// must refuse even its own user.
fn reach_descriptor_of_undumpable_parent() -> Result<(), Errno> {
    nix::sys::prctl::set_dumpable(false)?;
    let (_reader, writer) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
    let path = format!("/proc/{}/fd/{}", getpid(), writer.as_raw_fd());
    // SAFETY: single-threaded; the child only opens a path and exits.
    let reached = match unsafe { nix::unistd::fork() }? {
        ForkResult::Child => {
            let code = open_for(&path, OFlag::O_WRONLY)
                .err()
                .map_or(0, |errno| errno as i32);
            // SAFETY: ends the child without running this process's exit handlers.
            unsafe { nix::libc::_exit(code) }
        }
        ForkResult::Parent { child } => match waitpid(child, None)? {
            WaitStatus::Exited(_, 0) => Ok(()),
            WaitStatus::Exited(_, code) => Err(Errno::from_raw(code)),
            _ => Err(Errno::UnknownErrno),
        },
    };
    nix::sys::prctl::set_dumpable(true)?;
    reached
}

/// `FIGETBSZ` on this program's own file.
fn block_size() -> Result<(), Errno> {
    let fd = open(
        crate::supervise::SELF,
        OFlag::O_RDONLY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?;
    let mut size: nix::libc::c_int = 0;
    // SAFETY: an ioctl on our own descriptor; the argument points at a valid int.
    let result = Errno::result(unsafe { nix::libc::ioctl(fd, FIGETBSZ, &mut size) });
    let _ = nix::unistd::close(fd);
    result.map(drop)
}

/// Forks children that wait, until the kernel refuses (or `limit` of them run), then ends
/// them. Returns how many started and why the next was refused.
fn fork_until_refused(limit: i64) -> (usize, Option<Errno>) {
    let mut children = Vec::new();
    let mut refusal = None;
    while children.len() <= limit as usize {
        // SAFETY: single-threaded; the child only waits for its signal.
        match unsafe { nix::unistd::fork() } {
            Ok(nix::unistd::ForkResult::Child) => loop {
                nix::unistd::pause();
            },
            Ok(nix::unistd::ForkResult::Parent { child }) => children.push(child),
            Err(errno) => {
                refusal = Some(errno);
                break;
            }
        }
    }
    for child in &children {
        let _ = kill(*child, nix::sys::signal::Signal::SIGKILL);
        let _ = nix::sys::wait::waitpid(*child, None);
    }
    (children.len(), refusal)
}

/// `prlimit` on another process, lowering its open-files limit.
fn prlimit_other(pid: i32) -> Result<(), Errno> {
    let limit = nix::libc::rlimit {
        rlim_cur: 1,
        rlim_max: 1,
    };
    // SAFETY: valid pointers to a local limit; the old limit is not asked for.
    let result =
        unsafe { nix::libc::prlimit(pid, nix::libc::RLIMIT_NOFILE, &limit, std::ptr::null_mut()) };
    Errno::result(result).map(drop)
}
