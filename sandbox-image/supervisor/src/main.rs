//! `texfleet-supervisor`: the program every sandbox container runs (under Docker's init).
//!
//! It reads a [`JobSpec`] from stdin, writes the sources into the work directory (the job's
//! tmpfs), runs latexmk in its own process group with resource limits and a scrubbed
//! environment, kills everything at the deadline, and writes a tar of the report, the PDF and
//! the log to stdout (see the protocol in `lib.rs`). The scheduler keeps its own, later deadline
//! as the outer guard and re-checks everything this program says.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use nix::sys::resource::{getrusage, setrlimit, Resource, UsageWho};
use nix::sys::signal::{kill, killpg, Signal};
use nix::sys::wait::waitpid;
use nix::unistd::Pid;
use std::fs::{self, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use texfleet_sandbox::{
    JobSpec, Limit, Report, JOB_NAME, LOG_FILE, MAIN_FILE, PDF_FILE, REPORT_FILE,
};

/// Largest job spec accepted on stdin (sources are base64 inside JSON).
const MAX_SPEC_BYTES: u64 = 128 * 1024 * 1024;
const MAX_OPEN_FILES: u64 = 256;

fn main() {
    if let Err(error) = run() {
        eprintln!("texfleet-supervisor: {error}");
        std::process::exit(2);
    }
}

fn run() -> io::Result<()> {
    let mut input = Vec::new();
    io::stdin().take(MAX_SPEC_BYTES).read_to_end(&mut input)?;
    let spec: JobSpec = serde_json::from_slice(&input).map_err(io::Error::other)?;
    drop(input);
    write_sources(&spec)?;

    // Orphans of the compile are re-parented to us, so we can reap every one of them.
    nix::sys::prctl::set_child_subreaper(true).map_err(io::Error::other)?;
    let mut report = compile(&spec)?;
    let pdf = take_output(PDF_FILE, spec.max_pdf_bytes, &mut report);
    let log = take_output(LOG_FILE, spec.max_log_bytes, &mut report);

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

fn latexmk_command(spec: &JobSpec) -> Command {
    let engine_flag = match spec.engine.as_str() {
        "xelatex" => "-pdfxe",
        "lualatex" => "-pdflua",
        _ => "-pdf",
    };
    let mut command = Command::new("latexmk");
    command
        .args([
            "-norc",
            engine_flag,
            "-interaction=nonstopmode",
            "-file-line-error",
        ])
        .arg(format!("-jobname={JOB_NAME}"))
        // Without halt-on-error latexmk goes on through errors (-f), as users of online editors expect.
        .arg(if spec.halt_on_error {
            "-halt-on-error"
        } else {
            "-f"
        })
        .arg(MAIN_FILE)
        // An allowlisted environment: nothing of the container's or the host's leaks in.
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", "/work")
        .env("LANG", "C.UTF-8")
        .env("TMPDIR", "/tmp")
        // Per-job caches inside the tmpfs: luaotfload executes its cache files.
        .env("TEXMFVAR", "/work/.texmf-var")
        .env("TEXMFCACHE", "/work/.texmf-var")
        // One log line per message, so that diagnostics can be parsed.
        .env("max_print_line", "10000")
        .env("error_line", "254")
        .env("half_error_line", "238")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        // Its own process group, so that the deadline kills latexmk and everything it started.
        .process_group(0);
    command
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
        setrlimit(resource, limit, limit).map_err(io::Error::other)?;
    }
    Ok(())
}

fn compile(spec: &JobSpec) -> io::Result<Report> {
    // Limits are set on ourselves and inherited by latexmk; ours stay harmless (we use little CPU
    // and write no files after this point, only the stdout pipe).
    set_limits(spec)?;
    let started = Instant::now();
    let mut child = latexmk_command(spec).spawn()?;
    let group = Pid::from_raw(child.id() as i32);

    let (done, finished) = mpsc::channel::<()>();
    let timeout = Duration::from_secs(spec.timeout_seconds.into());
    let watchdog = std::thread::spawn(move || {
        let timed_out = finished.recv_timeout(timeout) == Err(mpsc::RecvTimeoutError::Timeout);
        if timed_out {
            let _ = killpg(group, Signal::SIGKILL);
        }
        timed_out
    });
    let status = child.wait()?;
    let _ = done.send(());
    let timed_out = watchdog.join().unwrap_or(true);

    // Nothing of the compile may outlive it: its group, then anything that left the group
    // (kill(-1) reaches every process we may signal except init and ourselves).
    let _ = killpg(group, Signal::SIGKILL);
    let _ = kill(Pid::from_raw(-1), Signal::SIGKILL);
    while waitpid(Pid::from_raw(-1), None).is_ok() {}

    let usage = getrusage(UsageWho::RUSAGE_CHILDREN).map_err(io::Error::other)?;
    let cpu = usage.user_time() + usage.system_time();
    let cpu_ms = (cpu.tv_sec() as u64) * 1000 + (cpu.tv_usec() as u64) / 1000;
    let signal = status.signal();
    let limit = if timed_out {
        Some(Limit::Timeout)
    } else if signal == Some(Signal::SIGXCPU as i32) {
        Some(Limit::CpuTime)
    } else {
        None
    };
    Ok(Report {
        exit_code: status.code(),
        signal,
        limit,
        duration_ms: started.elapsed().as_millis() as u64,
        cpu_ms,
        max_rss_kb: usage.max_rss() as u64,
        notes: Vec::new(),
    })
}

/// Reads an output only if it is a regular file with one link, opened without following a
/// symlink (O_NOFOLLOW) and without blocking on a FIFO (O_NONBLOCK), and only up to its cap.
fn take_output(name: &str, cap: u64, report: &mut Report) -> Option<Vec<u8>> {
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(name)
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
