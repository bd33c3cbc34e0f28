//! `texfleet-supervisor`: the program every sandbox container runs (under Docker's init).
//!
//! It reads a [`JobSpec`] from stdin, writes the sources into the work directory (the job's
//! tmpfs), runs latexmk in its own process group with resource limits and a scrubbed
//! environment, kills everything at the deadline, and writes a tar of the report, the PDF and
//! the log to stdout (see the protocol in `lib.rs`). The scheduler keeps its own, later deadline
//! as the outer guard and re-checks everything this program says.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use nix::errno::Errno;
use nix::sys::resource::{getrusage, setrlimit, Resource, UsageWho};
use nix::sys::signal::{kill, killpg, Signal};
use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet};
use nix::sys::wait::waitpid;
use nix::sys::wait::WaitStatus;
use nix::unistd::Pid;
use nix::unistd::{dup2, execve, fork, setpgid, ForkResult};
use std::ffi::CString;
use std::fs::File;
use std::fs::{self, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::Instant;
use texfleet_sandbox::{
    CheckSpec, JobSpec, Limit, Report, JOB_NAME, LOG_FILE, MAIN_FILE, PDF_FILE, REPORT_FILE,
};

/// Largest job spec accepted on stdin (sources are base64 inside JSON).
const MAX_SPEC_BYTES: u64 = 128 * 1024 * 1024;
const MAX_OPEN_FILES: u64 = 256;
const LATEXMK: &str = "/usr/bin/latexmk";

mod check;

fn main() {
    let mode = std::env::args().nth(1);
    let result = match mode.as_deref() {
        Some(texfleet_sandbox::CHECK_ARG) => run_check(),
        _ => run(),
    };
    if let Err(error) = result {
        eprintln!("texfleet-supervisor: {error}");
        std::process::exit(2);
    }
}

fn run_check() -> io::Result<()> {
    let spec: CheckSpec = read_stdin_json()?;
    serde_json::to_writer(io::stdout().lock(), &check::run(&spec)).map_err(io::Error::other)
}

/// One JSON value from stdin; it is read as a stream so that no EOF is needed after it.
fn read_stdin_json<T: serde::de::DeserializeOwned>() -> io::Result<T> {
    let stdin = io::stdin().lock().take(MAX_SPEC_BYTES);
    let mut values = serde_json::Deserializer::from_reader(stdin).into_iter::<T>();
    match values.next() {
        Some(value) => value.map_err(io::Error::other),
        None => Err(io::Error::other("no job spec on stdin")),
    }
}

fn run() -> io::Result<()> {
    let spec: JobSpec = read_stdin_json()?;
    write_sources(&spec)?;

    // Orphans of the compile are re-parented to us, so we can reap every one of them. Best
    // effort: gVisor lacks it, and there Docker's init reaps them (kill(-1) still kills them).
    let subreaper = nix::sys::prctl::set_child_subreaper(true);
    let mut report = compile(&spec)?;
    if let Err(error) = subreaper {
        report
            .notes
            .push(format!("not a subreaper ({error}); init reaps orphans"));
    }
    let work = Path::new(".");
    let pdf = take_output(work, PDF_FILE, spec.max_pdf_bytes, &mut report);
    let log = take_output(work, LOG_FILE, spec.max_log_bytes, &mut report);

    let mut archive = tar::Builder::new(io::stdout().lock());
    append(
        &mut archive,
        REPORT_FILE,
        &serde_json::to_vec(&report).map_err(io::Error::other)?,
    )?;
    for (name, content) in [(PDF_FILE, pdf), (LOG_FILE, log)] {
        if let Some(content) = content {
            append(&mut archive, name, &content)?;
        }
    }
    archive.into_inner()?.flush()
}

/// Writes each source below the work directory, refusing to follow or replace anything.
/// (The API has already refused unsafe paths; this is a second line, not the first.)
fn write_sources(spec: &JobSpec) -> io::Result<()> {
    for file in &spec.files {
        let path = Path::new(&file.path);
        if path.is_absolute()
            || path
                .components()
                .any(|c| !matches!(c, std::path::Component::Normal(_)))
        {
            return Err(io::Error::other(format!("unsafe path {:?}", file.path)));
        }
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent)?;
        }
        let content = BASE64
            .decode(&file.content_base64)
            .map_err(io::Error::other)?;
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(path)?
            .write_all(&content)?;
    }
    Ok(())
}

/// latexmk's argument vector for this job.
fn latexmk_args(spec: &JobSpec) -> Vec<String> {
    let engine_flag = match spec.engine.as_str() {
        "xelatex" => "-pdfxe",
        "lualatex" => "-pdflua",
        _ => "-pdf",
    };
    [
        LATEXMK,
        "-norc",
        engine_flag,
        "-interaction=nonstopmode",
        "-file-line-error",
        // The engines spelled out: no shell escape even if texmf.cnf were changed, and no Lua
        // socket library (seccomp refuses sockets as well).
        "-pdflatex=pdflatex -no-shell-escape %O %S",
        "-xelatex=xelatex -no-shell-escape %O %S",
        "-lualatex=lualatex -no-shell-escape --nosocket %O %S",
        &format!("-jobname={JOB_NAME}"),
        // Without halt-on-error latexmk goes on through errors (-f), as online editors do.
        if spec.halt_on_error {
            "-halt-on-error"
        } else {
            "-f"
        },
        MAIN_FILE,
    ]
    .iter()
    .map(|arg| arg.to_string())
    .collect()
}

/// The whole environment of the compile: an allowlist, so nothing of the container's or the
/// host's environment leaks in.
const ENVIRONMENT: &[&str] = &[
    "PATH=/usr/bin:/bin",
    "HOME=/work",
    "LANG=C.UTF-8",
    "TMPDIR=/tmp",
    // Per-job caches inside the tmpfs: luaotfload executes its cache files.
    "TEXMFVAR=/work/.texmf-var",
    "TEXMFCACHE=/work/.texmf-var",
    // One log line per message, so that diagnostics can be parsed.
    "max_print_line=10000",
    "error_line=254",
    "half_error_line=238",
];

/// Starts latexmk in a process group of its own, with stdin, stdout and stderr on /dev/null
/// (stdout is our channel to the scheduler). We fork and exec ourselves rather than use
/// std::process, whose spawn needs a socketpair that our seccomp profile refuses.
fn spawn_latexmk(spec: &JobSpec) -> io::Result<Pid> {
    let to_c = |s: &str| CString::new(s).map_err(io::Error::other);
    let program = to_c(LATEXMK)?;
    let args = latexmk_args(spec)
        .iter()
        .map(|a| to_c(a))
        .collect::<io::Result<Vec<_>>>()?;
    let environment = ENVIRONMENT
        .iter()
        .map(|e| to_c(e))
        .collect::<io::Result<Vec<_>>>()?;
    let null = File::options().read(true).write(true).open("/dev/null")?;
    // SAFETY: we are single-threaded here (the watchdog starts after), and the child only
    // makes system calls before execve or _exit.
    match unsafe { fork() }.map_err(io::Error::other)? {
        ForkResult::Parent { child } => Ok(child),
        ForkResult::Child => {
            let _ = setpgid(Pid::from_raw(0), Pid::from_raw(0));
            for fd in 0..=2 {
                let _ = dup2(null.as_raw_fd(), fd);
            }
            let _ = execve(&program, &args, &environment);
            // SAFETY: _exit is async-signal-safe and skips the parent's atexit handlers.
            unsafe { nix::libc::_exit(127) }
        }
    }
}

fn set_limits(spec: &JobSpec) -> io::Result<()> {
    let cpu_seconds = u64::from(spec.timeout_seconds) + 1;
    let largest_file = spec.max_pdf_bytes.max(spec.max_log_bytes) + 1;
    let limits = [
        (Resource::RLIMIT_CPU, cpu_seconds),
        (Resource::RLIMIT_FSIZE, largest_file),
        (Resource::RLIMIT_NOFILE, MAX_OPEN_FILES),
        (Resource::RLIMIT_CORE, 0),
    ];
    for (resource, limit) in limits {
        setrlimit(resource, limit, limit)
            .map_err(|e| io::Error::other(format!("setting {resource:?} to {limit}: {e}")))?;
    }
    Ok(())
}

fn compile(spec: &JobSpec) -> io::Result<Report> {
    // Limits are set on ourselves and inherited by latexmk; ours stay harmless (we use little CPU
    // and write no files after this point, only the stdout pipe).
    set_limits(spec)?;
    let started = Instant::now();
    let child = spawn_latexmk(spec)?;
    let group = child;

    // The deadline is an alarm whose handler kills the whole group: no thread (gVisor refuses
    // ours under the seccomp profile) and no polling.
    arm_deadline(group, spec.timeout_seconds)?;
    let status = wait_for(child)?;
    nix::unistd::alarm::cancel();
    let timed_out = TIMED_OUT.load(Ordering::SeqCst);

    // Nothing of the compile may outlive it: its group, then anything that left the group
    // (kill(-1) reaches every process we may signal except init and ourselves).
    let _ = killpg(group, Signal::SIGKILL);
    let _ = kill(Pid::from_raw(-1), Signal::SIGKILL);
    while waitpid(Pid::from_raw(-1), None).is_ok() {}

    let usage = getrusage(UsageWho::RUSAGE_CHILDREN).map_err(io::Error::other)?;
    let cpu = usage.user_time() + usage.system_time();
    let cpu_ms = (cpu.tv_sec() as u64) * 1000 + (cpu.tv_usec() as u64) / 1000;
    let (exit_code, signal) = status;
    let largest_file = spec.max_pdf_bytes.max(spec.max_log_bytes) + 1;
    let mut notes = Vec::new();
    let limit = if timed_out {
        Some(Limit::Timeout)
    } else if signal == Some(Signal::SIGXCPU as i32) {
        Some(Limit::CpuTime)
    } else if let Some(note) = disk_limit_reached(Path::new("."), largest_file) {
        notes.push(note);
        Some(Limit::Output)
    } else {
        None
    };
    Ok(Report {
        exit_code,
        signal,
        limit,
        duration_ms: started.elapsed().as_millis() as u64,
        cpu_ms,
        max_rss_kb: usage.max_rss() as u64,
        notes,
    })
}

/// The process group the alarm handler kills, and whether it did.
static DEADLINE_GROUP: AtomicI32 = AtomicI32::new(0);
static TIMED_OUT: AtomicBool = AtomicBool::new(false);

extern "C" fn on_deadline(_signal: nix::libc::c_int) {
    TIMED_OUT.store(true, Ordering::SeqCst);
    let group = DEADLINE_GROUP.load(Ordering::SeqCst);
    if group > 0 {
        // killpg is async-signal-safe; so are the atomics above.
        let _ = killpg(Pid::from_raw(group), Signal::SIGKILL);
    }
}

fn arm_deadline(group: Pid, seconds: u32) -> io::Result<()> {
    DEADLINE_GROUP.store(group.as_raw(), Ordering::SeqCst);
    let action = SigAction::new(
        SigHandler::Handler(on_deadline),
        SaFlags::empty(),
        SigSet::empty(),
    );
    // SAFETY: the handler only touches atomics and calls killpg.
    unsafe { sigaction(Signal::SIGALRM, &action) }.map_err(io::Error::other)?;
    nix::unistd::alarm::set(seconds.max(1));
    Ok(())
}

/// Waits for `child` and returns its exit code or the signal that ended it.
fn wait_for(child: Pid) -> io::Result<(Option<i32>, Option<i32>)> {
    loop {
        match waitpid(child, None) {
            Ok(WaitStatus::Exited(_, code)) => return Ok((Some(code), None)),
            Ok(WaitStatus::Signaled(_, signal, _)) => return Ok((None, Some(signal as i32))),
            Ok(_) | Err(Errno::EINTR) => continue,
            Err(errno) => return Err(io::Error::other(errno)),
        }
    }
}

/// Whether the compile filled its tmpfs (space or inodes) or grew a file to the file-size
/// limit, which TeX reports only as a failed write or a SIGXFSZ death.
fn disk_limit_reached(work: &Path, largest_file: u64) -> Option<String> {
    if let Ok(stats) = nix::sys::statvfs::statvfs(work) {
        // A file system that reports no totals (gVisor's tmpfs) says nothing about fullness.
        let no_space = stats.blocks() > 0 && stats.blocks_available() == 0;
        let no_inodes = stats.files() > 0 && stats.files_available() == 0;
        if no_space || no_inodes {
            return Some("the work directory is full".to_string());
        }
    }
    let mut pending = vec![work.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in fs::read_dir(&dir).into_iter().flatten().flatten() {
            // symlink_metadata: a link is never followed out of the work directory.
            let Ok(metadata) = entry.path().symlink_metadata() else {
                continue;
            };
            if metadata.is_dir() {
                pending.push(entry.path());
            } else if metadata.is_file() && metadata.len() + 1 >= largest_file {
                return Some(format!(
                    "{} reached the file size limit",
                    entry.path().display()
                ));
            }
        }
    }
    None
}

/// Reads an output only if it is a regular file with one link, opened without following a
/// symlink (O_NOFOLLOW) and without blocking on a FIFO (O_NONBLOCK), and only up to its cap.
fn take_output(dir: &Path, name: &str, cap: u64, report: &mut Report) -> Option<Vec<u8>> {
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(dir.join(name))
    {
        Ok(file) => file,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return None,
        Err(error) => {
            report.notes.push(format!("{name}: not opened: {error}"));
            return None;
        }
    };
    let metadata = file.metadata().ok()?;
    if !metadata.file_type().is_file() || metadata.nlink() != 1 {
        report
            .notes
            .push(format!("{name}: not a regular file with one link; ignored"));
        return None;
    }
    let mut content = Vec::new();
    if let Err(error) = (&file).take(cap + 1).read_to_end(&mut content) {
        report.notes.push(format!("{name}: read failed: {error}"));
        return None;
    }
    if content.len() as u64 > cap {
        content.truncate(cap as usize);
        report.limit.get_or_insert(Limit::Output);
        report
            .notes
            .push(format!("{name}: larger than {cap} bytes; truncated"));
    }
    Some(content)
}

fn append<W: Write>(archive: &mut tar::Builder<W>, name: &str, content: &[u8]) -> io::Result<()> {
    let mut header = tar::Header::new_gnu();
    header.set_size(content.len() as u64);
    header.set_mode(0o644);
    header.set_entry_type(tar::EntryType::Regular);
    header.set_cksum();
    archive.append_data(&mut header, name, content)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch() -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "supervisor-test-{}-{:?}",
            std::process::id(),
            Instant::now()
        ));
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn takes_a_regular_output_up_to_its_cap() {
        let dir = scratch();
        fs::write(dir.join("output.log"), b"0123456789").unwrap();
        let mut report = Report::default();
        assert_eq!(
            take_output(&dir, "output.log", 100, &mut report).unwrap(),
            b"0123456789"
        );
        assert_eq!(report.limit, None);
        assert_eq!(
            take_output(&dir, "output.log", 4, &mut report).unwrap(),
            b"0123"
        );
        assert_eq!(report.limit, Some(Limit::Output));
        assert!(take_output(&dir, "missing.pdf", 100, &mut report).is_none());
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn refuses_symlinks_hard_links_fifos_and_directories() {
        let dir = scratch();
        fs::write(dir.join("secret"), b"secret").unwrap();
        std::os::unix::fs::symlink(dir.join("secret"), dir.join("symlinked.pdf")).unwrap();
        fs::hard_link(dir.join("secret"), dir.join("linked.pdf")).unwrap();
        nix::unistd::mkfifo(&dir.join("fifo.pdf"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        fs::create_dir(dir.join("dir.pdf")).unwrap();
        let mut report = Report::default();
        for name in ["symlinked.pdf", "linked.pdf", "fifo.pdf", "dir.pdf"] {
            assert!(
                take_output(&dir, name, 100, &mut report).is_none(),
                "{name} was taken"
            );
        }
        assert_eq!(report.notes.len(), 4, "{:?}", report.notes);
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_full_or_capped_work_directory_is_an_output_limit() {
        let dir = scratch();
        fs::create_dir(dir.join("sub")).unwrap();
        fs::write(dir.join("sub/small.txt"), b"abc").unwrap();
        assert_eq!(disk_limit_reached(&dir, 100), None);
        fs::write(dir.join("sub/big.txt"), vec![b'x'; 99]).unwrap();
        assert!(disk_limit_reached(&dir, 100).is_some());
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn latexmk_runs_without_rc_files_or_shell_escape() {
        let spec = JobSpec {
            engine: "lualatex".into(),
            halt_on_error: true,
            timeout_seconds: 5,
            max_pdf_bytes: 1,
            max_log_bytes: 1,
            files: Vec::new(),
        };
        let args = latexmk_args(&spec);
        for expected in [
            "-norc",
            "-pdflua",
            "-halt-on-error",
            "-jobname=output",
            "main.tex",
        ] {
            assert!(
                args.iter().any(|a| a == expected),
                "{expected} missing from {args:?}"
            );
        }
        assert!(args.iter().any(|a| a.starts_with("-lualatex=")
            && a.contains("--nosocket")
            && a.contains("-no-shell-escape")));
        assert!(ENVIRONMENT
            .iter()
            .all(|e| !e.contains("SECRET") && !e.contains("TOKEN")));
    }
}
