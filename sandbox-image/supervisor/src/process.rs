//! Starting programs by argument vector, never through a shell, and waiting for them. We fork
//! and exec ourselves rather than use `std::process`, whose spawn needs a `socketpair` that
//! the seccomp profile refuses. Both the supervisor and the compile driver are single-threaded,
//! so the child may prepare itself freely between fork and exec.

use crate::confine;
use nix::errno::Errno;
use nix::sys::resource::{getrlimit, setrlimit, Resource};
use nix::sys::signal::{signal, SigHandler, Signal};
use nix::sys::wait::{waitpid, WaitStatus};
use nix::unistd::{dup2, execve, fork, ForkResult, Pid};
use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use texfleet_sandbox::shell_escape;

/// How a program ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Code(i32),
    Signal(i32),
}

impl Exit {
    pub fn success(self) -> bool {
        self == Exit::Code(0)
    }
}

/// What of the files a [`Program`] may touch, besides what its parent's layers allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Files {
    /// What its parent may.
    Inherited,
    /// Write only these hierarchies, and of the job's tmpfs mounts read only these
    /// ([`confine::restrict_files`]).
    Writing(&'static [&'static str]),
    /// Write nothing, and of the job's tmpfs mounts read only these
    /// ([`confine::restrict_to_reading`]).
    Reading(&'static [&'static str]),
}

/// A program to start: its absolute path (never searched for), its whole argument vector
/// (`argv[0]` first), its whole environment, and what it may start in turn.
pub struct Program {
    pub path: String,
    pub args: Vec<String>,
    pub environment: Vec<String>,
    /// The programs this one may execute besides itself (see
    /// [`texfleet_sandbox::execution::restrict_execution`]); None leaves it what its parent may execute.
    pub may_start: Option<Vec<String>>,
    /// What of the files it may write and read.
    pub files: Files,
    /// Whether the restricted shell's record is open for it at [`shell_escape::RECORD_FD`].
    pub records_shell_escapes: bool,
}

impl Program {
    pub fn new(path: &str, args: &[&str], environment: &[String]) -> Program {
        let name = path.rsplit('/').next().unwrap_or(path);
        Program {
            path: path.to_string(),
            args: std::iter::once(name)
                .chain(args.iter().copied())
                .map(str::to_string)
                .collect(),
            environment: environment.to_vec(),
            may_start: None,
            files: Files::Inherited,
            records_shell_escapes: false,
        }
    }

    /// Lets the program execute only itself and `others`.
    pub fn starting_only(mut self, others: &[&str]) -> Program {
        self.may_start = Some(others.iter().map(|other| other.to_string()).collect());
        self
    }

    /// Lets the program write only `writable`, and read of the job's tmpfs mounts only that.
    pub fn writing_only(mut self, writable: &'static [&'static str]) -> Program {
        self.files = Files::Writing(writable);
        self
    }

    /// Lets the program write nothing, and read of the job's tmpfs mounts only `readable`.
    pub fn reading_only(mut self, readable: &'static [&'static str]) -> Program {
        self.files = Files::Reading(readable);
        self
    }

    /// Opens the restricted shell's record for the program (and the shell it starts) at
    /// [`shell_escape::RECORD_FD`], before its layers shut it out of the record's folder.
    pub fn recording_shell_escapes(mut self) -> Program {
        self.records_shell_escapes = true;
        self
    }
}

/// This process's environment as a program's: the driver and the conversions run with exactly
/// what the supervisor gave them, and hand it on.
pub fn inherited_environment() -> Vec<String> {
    std::env::vars().map(|(k, v)| format!("{k}={v}")).collect()
}

/// Starts `program` with `stdin` as its standard input and `output` as its standard output
/// and error (each `/dev/null` when None). `prepare` runs in the child before exec: it may
/// change the child's user, limits and confinement.
pub fn spawn(
    program: &Program,
    stdin: Option<RawFd>,
    output: Option<&File>,
    prepare: impl FnOnce() -> io::Result<()>,
) -> io::Result<Pid> {
    let to_c = |s: &str| CString::new(s).map_err(io::Error::other);
    let path = to_c(&program.path)?;
    let args = program
        .args
        .iter()
        .map(|a| to_c(a))
        .collect::<io::Result<Vec<_>>>()?;
    let environment = program
        .environment
        .iter()
        .map(|e| to_c(e))
        .collect::<io::Result<Vec<_>>>()?;
    let null = File::options().read(true).write(true).open("/dev/null")?;
    let stdout = output.map_or(null.as_raw_fd(), AsRawFd::as_raw_fd);
    // SAFETY: the process is single-threaded, so the child may run ordinary code until exec.
    match unsafe { fork() }.map_err(io::Error::other)? {
        ForkResult::Parent { child } => Ok(child),
        ForkResult::Child => {
            let result = (|| {
                dup2(stdin.unwrap_or(null.as_raw_fd()), 0)?;
                dup2(stdout, 1)?;
                dup2(stdout, 2)?;
                // Rust ignores SIGPIPE in its own processes; the program gets the default.
                // SAFETY: restoring a default disposition runs no handler code.
                unsafe { signal(Signal::SIGPIPE, SigHandler::SigDfl) }?;
                Ok::<_, Errno>(())
            })()
            .map_err(io::Error::other)
            .and_then(|()| prepare());
            let failure = match result {
                Ok(()) => execve(&path, &args, &environment)
                    .map_err(io::Error::other)
                    .err(),
                Err(error) => Some(error),
            };
            if let Some(error) = failure {
                // Where the program's errors would have gone: the parent shows them.
                let _ = writeln!(std::io::stderr(), "starting {}: {error}", program.path);
            }
            // SAFETY: _exit skips the parent's atexit handlers and buffered output.
            unsafe { nix::libc::_exit(127) }
        }
    }
}

/// Ends every process this one may signal but itself (`kill(-1)`): what a step of the
/// compile left running (a daemon a tool forked) must not act during the next step, nor
/// write the PDF after the engine did. Called by the driver between its steps, when no
/// process of the compile but itself should exist; processes of other uids (the supervisor)
/// and outside its Landlock domain are out of reach anyway.
pub fn end_strays() {
    let _ = nix::sys::signal::kill(Pid::from_raw(-1), Signal::SIGKILL);
}

/// Waits for `child` to end, through interruptions by signals.
pub fn wait(child: Pid) -> io::Result<Exit> {
    loop {
        match waitpid(child, None) {
            Ok(WaitStatus::Exited(_, code)) => return Ok(Exit::Code(code)),
            Ok(WaitStatus::Signaled(_, signal, _)) => return Ok(Exit::Signal(signal as i32)),
            Ok(_) | Err(Errno::EINTR) => continue,
            Err(errno) => return Err(io::Error::other(errno)),
        }
    }
}

/// Runs `program` to its end under `limits` (besides those it inherits) and its
/// [`Program::may_start`]; see [`spawn`].
pub fn run(
    program: &Program,
    output: Option<&File>,
    limits: &[(Resource, u64)],
) -> io::Result<Exit> {
    run_within(program, output, limits, None)
}

/// [`run`], ended with whatever it started after `seconds` when set: SIGALRM, whose handler
/// the caller installed (the driver's ends every stray). The alarm is armed once the program
/// exists: armed before the fork, it could ring before there is anything to end.
pub fn run_within(
    program: &Program,
    output: Option<&File>,
    limits: &[(Resource, u64)],
    seconds: Option<u32>,
) -> io::Result<Exit> {
    let child = start(program, output, limits)?;
    if let Some(seconds) = seconds {
        nix::unistd::alarm::set(seconds);
    }
    let exit = wait(child);
    if seconds.is_some() {
        nix::unistd::alarm::cancel();
    }
    exit
}

/// Starts `program` as [`run`] does, without waiting for it.
fn start(program: &Program, output: Option<&File>, limits: &[(Resource, u64)]) -> io::Result<Pid> {
    spawn(program, None, output, || {
        for &(resource, limit) in limits {
            // Never above what this process may use: a hard limit cannot be raised.
            let (_, hard) = getrlimit(resource).map_err(io::Error::other)?;
            setrlimit(resource, limit.min(hard), limit.min(hard)).map_err(io::Error::other)?;
        }
        if program.records_shell_escapes {
            let record = OpenOptions::new()
                .append(true)
                .create(true)
                .mode(0o600)
                .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
                .open(shell_escape::RECORD_FILE)?;
            dup2(record.as_raw_fd(), shell_escape::RECORD_FD).map_err(io::Error::other)?;
        }
        match program.files {
            Files::Reading(readable) => _ = confine::restrict_to_reading(readable)?,
            Files::Writing(writable) => _ = confine::restrict_files(writable)?,
            Files::Inherited => {}
        }
        match &program.may_start {
            Some(others) => texfleet_sandbox::execution::restrict_execution(&program.path, others),
            None => Ok(()),
        }
    })
}
