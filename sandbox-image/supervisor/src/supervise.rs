//! The supervisor's side of a job (uid [`SUPERVISOR_UID`]): start the compile driver as
//! [`COMPILE_UID`], hold the deadline, kill whatever the compile leaves, take the outputs out
//! without trusting them, and write the report and the outputs to stdout as a tar archive.
//!
//! The job's nonce stays here: the driver gets the spec without it, and the report carries it
//! back. Nothing of the compile can reach this process (see [`crate::privileges`]), so the
//! only verdict the scheduler reads is this one.

use crate::confine;
use crate::handover::{self, Handover};
use crate::outputs::{append, disk_limit_reached, take_output};
use crate::privileges;
use crate::process::{self, Exit, Program};
use nix::fcntl::OFlag;
use nix::sys::resource::{getrusage, UsageWho};
use nix::sys::signal::{kill, sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
use nix::sys::wait::waitpid;
use nix::unistd::{pipe2, Pid};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Instant;
use texfleet_sandbox::{
    job_input, read_job, DriverState, JobSpec, Limit, Preamble, Report, DRIVER_STATE_FILE,
    FORMAT_FILE, LOG_FILE, MAX_THUMBNAIL_BYTES, PDF_FILE, REPORT_FILE, SYNCTEX_FILE,
    THUMBNAIL_FILE, WORK_DIR,
};

/// This program, executed again as the compile driver.
pub const SELF: &str = "/usr/local/bin/texfleet-supervisor";
pub const DRIVE_ARG: &str = "drive";
/// Seconds between asking the compile to stop (SIGINT: TeX closes its log) and killing it.
const STOP_GRACE_SECONDS: u32 = 1;

pub fn run() -> io::Result<()> {
    privileges::become_supervisor()?;
    let mut stdin = io::stdin().lock();
    let (mut spec, format) = read_job(&mut stdin, crate::MAX_SPEC_BYTES)?;
    let nonce = std::mem::take(&mut spec.nonce);
    // Orphans of the compile are re-parented to us, so we can reap every one of them. Best
    // effort: gVisor lacks it, and there Docker's init reaps them (kill(-1) still kills them).
    let subreaper = nix::sys::prctl::set_child_subreaper(true);
    let started = Instant::now();
    let (exit, handover) = compile(&spec, &format, &mut stdin)?;
    let usage = getrusage(UsageWho::RUSAGE_CHILDREN).map_err(io::Error::other)?;
    let cpu = usage.user_time() + usage.system_time();
    let mut report = Report {
        nonce,
        exit_code: match exit {
            Exit::Code(code) => Some(code),
            Exit::Signal(_) => None,
        },
        signal: match exit {
            Exit::Signal(signal) => Some(signal),
            Exit::Code(_) => None,
        },
        limit: None,
        duration_ms: started.elapsed().as_millis() as u64,
        cpu_ms: (cpu.tv_sec() as u64) * 1000 + (cpu.tv_usec() as u64) / 1000,
        max_rss_kb: usage.max_rss() as u64,
        notes: Vec::new(),
    };
    if let Err(error) = subreaper {
        report
            .notes
            .push(format!("not a subreaper ({error}); init reaps orphans"));
    }
    report.limit = if DEADLINE_STAGE.load(Ordering::SeqCst) > 0 {
        Some(Limit::Timeout)
    } else if exit == Exit::Signal(Signal::SIGXCPU as i32) {
        Some(Limit::CpuTime)
    } else if let Some(note) =
        disk_limit_reached(Path::new(WORK_DIR), confine::largest_file(&spec) + 1)
    {
        report.notes.push(note);
        Some(Limit::Output)
    } else {
        None
    };

    let root = Path::new(WORK_DIR);
    let directory = main_directory(&spec);
    let outputs = [
        (PDF_FILE, spec.max_pdf_bytes),
        (LOG_FILE, spec.max_log_bytes),
        (SYNCTEX_FILE, spec.max_synctex_bytes),
    ]
    .map(|(name, cap)| (name, take_output(root, directory, name, cap, &mut report)));
    // For later compiles of the project's document. The driver hands them over last, before
    // it exits by itself: after a kill or a limit, what came may be cut short or spoiled.
    let handover = match handover {
        Ok(handover) => handover.filter(|_| ended_by_itself(exit, report.limit)),
        Err(error) => {
            report.notes.push(format!("nothing handed on: {error}"));
            None
        }
    };
    let (state, format) = match handover {
        Some(Handover { state, format }) => {
            let dumped = spec.preamble == Preamble::Dump && !format.is_empty();
            (Some(state), dumped.then_some(format))
        }
        None => (None, None),
    };
    // A thumbnail only when Ghostscript rendered one: otherwise a file of that name is the
    // document's.
    let rendered = state.as_ref().is_some_and(|state| {
        serde_json::from_slice::<DriverState>(state).is_ok_and(|state| state.thumbnail)
    });
    let thumbnail = (spec.thumbnail_width.is_some() && rendered).then(|| {
        let cap = MAX_THUMBNAIL_BYTES;
        let taken = take_output(root, directory, THUMBNAIL_FILE, cap, &mut report);
        (THUMBNAIL_FILE, taken)
    });

    let mut archive = tar::Builder::new(io::stdout().lock());
    append(
        &mut archive,
        REPORT_FILE,
        &serde_json::to_vec(&report).map_err(io::Error::other)?,
    )?;
    let kept = [(DRIVER_STATE_FILE, state), (FORMAT_FILE, format)];
    for (name, content) in outputs.into_iter().chain(thumbnail).chain(kept) {
        if let Some(content) = content {
            append(&mut archive, name, &content)?;
        }
    }
    archive.into_inner()?.flush()
}

/// Whether the driver ended its compile itself, within every limit.
fn ended_by_itself(exit: Exit, limit: Option<Limit>) -> bool {
    matches!(exit, Exit::Code(_)) && limit.is_none()
}

/// The main document's folder, relative to the work directory.
pub fn main_directory(spec: &JobSpec) -> &Path {
    Path::new(&spec.main).parent().unwrap_or(Path::new(""))
}

/// Runs the compile driver as the compile's user until it ends or the deadline passes, then
/// kills and reaps everything the compile started. The driver reads the job and then the
/// streamed files, passed on from `streamed`. Returns how the driver ended and what it handed
/// on.
fn compile(
    spec: &JobSpec,
    format: &[u8],
    streamed: &mut impl Read,
) -> io::Result<(Exit, io::Result<Option<Handover>>)> {
    // Close-on-exec: only the spec's reader, made the driver's stdin, and the handover's
    // writer, made its stdout, reach the driver; nothing of the compile inherits the others.
    let (spec_reader, spec_writer) = pipe2(OFlag::O_CLOEXEC).map_err(io::Error::other)?;
    let (handover_reader, handover_writer) = pipe2(OFlag::O_CLOEXEC).map_err(io::Error::other)?;
    let environment = confine::environment(spec, main_directory(spec));
    let driver = Program::new(SELF, &[DRIVE_ARG], &environment);
    let handover_writer = File::from(handover_writer);
    let child = process::spawn(
        &driver,
        Some(spec_reader.as_raw_fd()),
        Some(&handover_writer),
        || {
            privileges::become_compile()?;
            confine::prefer_for_oom_kill()?;
            confine::set_limits(spec)
        },
    )?;
    drop((spec_reader, handover_writer));
    // The driver reads the whole spec before it starts anything; it may die first (EPIPE).
    let mut writer = File::from(spec_writer);
    let streamed_bytes = spec.streamed_bytes().unwrap_or(0);
    let _ = writer.write_all(&job_input(spec, format));
    pass_on(streamed, &mut writer, streamed_bytes);
    drop(writer);

    arm_deadline(spec.timeout_seconds)?;
    // The handover ends when the driver does: the deadline kills it, and nothing else holds
    // the pipe's writer.
    let handover = handover::read(File::from(handover_reader));
    let exit = process::wait(child);
    nix::unistd::alarm::cancel();
    // Nothing of the compile may outlive it. With CAP_KILL, kill(-1) reaches every process
    // but init and ourselves.
    let _ = kill(Pid::from_raw(-1), Signal::SIGKILL);
    while waitpid(Pid::from_raw(-1), None).is_ok() {}
    Ok((exit?, handover))
}

/// Copies `bytes` from `input` to the driver, and reads them all even when the driver stops
/// taking them: the scheduler writes the whole job before it reads our archive.
fn pass_on(input: &mut impl Read, driver: &mut impl Write, bytes: u64) {
    let mut input = input.take(bytes);
    let _ = io::copy(&mut input, driver);
    let _ = io::copy(&mut input, &mut io::sink());
}

/// 0: running; 1: asked to stop; 2: killed.
static DEADLINE_STAGE: AtomicU8 = AtomicU8::new(0);

extern "C" fn on_deadline(_signal: nix::libc::c_int) {
    // Only async-signal-safe calls: atomics, kill and alarm; errno as the interrupted code
    // left it.
    let errno = nix::errno::Errno::last_raw();
    if DEADLINE_STAGE.fetch_add(1, Ordering::SeqCst) == 0 {
        let _ = kill(Pid::from_raw(-1), Signal::SIGINT);
        nix::unistd::alarm::set(STOP_GRACE_SECONDS);
    } else {
        let _ = kill(Pid::from_raw(-1), Signal::SIGKILL);
    }
    nix::errno::Errno::set_raw(errno);
}

/// The deadline is an alarm, not a thread (gVisor refuses ours under the seccomp profile):
/// SIGINT to the compile, which makes TeX stop and close its log, then SIGKILL.
fn arm_deadline(seconds: u32) -> io::Result<()> {
    let action = SigAction::new(
        SigHandler::Handler(on_deadline),
        SaFlags::empty(),
        SigSet::empty(),
    );
    // SAFETY: the handler only touches an atomic and calls kill and alarm.
    unsafe { sigaction(Signal::SIGALRM, &action) }.map_err(io::Error::other)?;
    nix::unistd::alarm::set(seconds.max(1));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streamed_files_are_read_to_their_end_when_the_driver_stops_taking_them() {
        let streamed = vec![7u8; 100_000];
        let all = [streamed.as_slice(), b"next"].concat();
        let mut input = all.as_slice();
        let mut driver = [0u8; 4];
        pass_on(
            &mut input,
            &mut driver.as_mut_slice(),
            streamed.len() as u64,
        );
        assert_eq!(driver, [7; 4]);
        assert_eq!(input, b"next");
    }

    #[test]
    fn only_a_driver_that_ended_by_itself_within_its_limits_hands_on_state() {
        assert!(ended_by_itself(Exit::Code(0), None));
        assert!(ended_by_itself(Exit::Code(1), None));
        assert!(!ended_by_itself(Exit::Signal(9), None));
        assert!(!ended_by_itself(Exit::Code(1), Some(Limit::Timeout)));
        assert!(!ended_by_itself(Exit::Code(0), Some(Limit::Output)));
    }
}
