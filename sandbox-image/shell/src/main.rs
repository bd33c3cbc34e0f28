//! `texfleet-sh`, the sandbox image's `/bin/sh`. It is not a shell: it accepts exactly
//! `sh -c CMD` and `sh -c -- CMD` (what libc's `system` and `popen` run) where CMD is a command
//! line of TeX's restricted shell escape, and executes it by argument vector when
//! `texfleet_sandbox::shell_escape::check` allows it. Everything else (a script, another
//! option, a command that did not come from kpathsea, a program off the list, arguments of
//! another shape) is refused with exit 127 and one line on stderr. Every command, run or
//! refused, is one line in the record the driver opened for the engine at `RECORD_FD`, which it
//! copies into the job's log.
//!
//! It replaces itself with the program (no fork), so that the exit status, the pipe of
//! `popen` and signals are the program's, after a Landlock layer that lets the program
//! execute only itself and what it needs (`Allowed::may_start`).

use nix::unistd::execve;
use std::ffi::{CString, OsString};
use std::os::unix::ffi::OsStringExt;
use texfleet_sandbox::execution::restrict_execution;
use texfleet_sandbox::shell_escape::{check, RAN, RECORD_FD, REFUSAL};

/// What a shell answers for a command it cannot run.
const NOT_RUN: i32 = 127;
/// The most of a refused command that is repeated in the log.
const MAX_SHOWN: usize = 200;

fn main() {
    let arguments: Vec<OsString> = std::env::args_os().collect();
    let line = match arguments.as_slice() {
        [_, c, line] if c == "-c" => line,
        [_, c, dashes, line] if c == "-c" && dashes == "--" => line,
        _ => refuse("not a command of TeX's shell escape", b""),
    };
    let line = line.as_encoded_bytes();
    let allowed = match check(line) {
        Ok(allowed) => allowed,
        Err(why) => refuse(&why, line),
    };
    record(&format!("{RAN} {}\n", shown(line)));
    if let Err(error) = restrict_execution(&allowed.path, &allowed.may_start) {
        refuse(&format!("could not confine it: {error}"), line);
    }
    let to_c = |text: &str| CString::new(text).expect("checked: no NUL");
    let path = to_c(&allowed.path);
    let argv: Vec<CString> = allowed.argv.iter().map(|a| to_c(a)).collect();
    let environment: Vec<CString> = std::env::vars_os()
        .filter_map(|(key, value)| {
            let mut entry = key.into_vec();
            entry.push(b'=');
            entry.extend(value.into_vec());
            CString::new(entry).ok()
        })
        .collect();
    let error = execve(&path, &argv, &environment).unwrap_err();
    refuse(&format!("could not run {}: {error}", allowed.path), line);
}

fn refuse(why: &str, line: &[u8]) -> ! {
    // The reason may repeat the command's arguments: cut too, so that one refusal cannot fill
    // the record and push the lines after it out of the log.
    let why: String = why.chars().take(MAX_SHOWN).collect();
    let refusal = format!("{REFUSAL} {}: {why}\n", shown(line));
    eprint!("{refusal}");
    record(&refusal);
    std::process::exit(NOT_RUN);
}

/// The command line as the log shows it: cut, quoted, its newlines escaped.
fn shown(line: &[u8]) -> String {
    let text = String::from_utf8_lossy(&line[..line.len().min(MAX_SHOWN)]).replace('\n', "\\n");
    format!("{text:?}")
}

/// Appends `text` to the record the driver copies into the log: only when it is a regular
/// file (never blocking on a pipe), and closed for the program the shell becomes.
fn record(text: &str) {
    use nix::fcntl::{fcntl, FcntlArg, FdFlag};
    let regular = nix::sys::stat::fstat(RECORD_FD)
        .is_ok_and(|stat| stat.st_mode & nix::libc::S_IFMT == nix::libc::S_IFREG);
    if regular {
        // SAFETY: the descriptor is borrowed for this write and left open.
        let record = unsafe { std::os::fd::BorrowedFd::borrow_raw(RECORD_FD) };
        let _ = nix::unistd::write(record, text.as_bytes());
    }
    // A number that is not open fails harmlessly.
    let _ = fcntl(RECORD_FD, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC));
}
