//! The compile driver: what latexmk did, without a shell and without Perl. It runs as the
//! compile's user inside Landlock (`texfleet-supervisor drive`, started by the supervisor),
//! writes the sources, converts EPS figures, runs the engine, runs bibtex, biber, makeindex,
//! bib2gls and the like when their input changed, and runs the engine again until nothing it
//! reads changes ([`passes`]). Every program is started by a fixed argument vector; every name
//! on it that comes from the document is checked first ([`names`]). What ran, and what was
//! skipped and why, is appended to the job's log.

mod bcf;
mod bib2gls;
mod bibliography;
mod chktex;
mod clear;
mod dump_reads;
mod engine;
pub mod eps;
mod files;
mod fingerprints;
mod finish;
mod glossaries;
mod indexes;
mod lay_out;
mod names;
mod opened;
mod passes;
mod preamble;
mod read_back;
mod reading_tool;
mod recorder;
mod reruns;
mod set_aside;
mod state;
mod steps;
mod tex_live;
mod thumbnail;
mod word_count;

use crate::confine;
use crate::handover;
use crate::process;
use engine::Engine;
use files::StreamedFrom;
use landlock::RulesetStatus;
use lay_out::{again_from_nothing, lay_out};
use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
use passes::{compile, Format, Run};
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use steps::Steps;
use texfleet_sandbox::{
    read_job, CheckMode, DriverState, Dump, JobSpec, Preamble, LOG_FILE, PDF_FILE, WORK_DIR,
};

/// Set when the supervisor's deadline asks the compile to stop (SIGINT).
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_interrupt(_signal: nix::libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// Ends every process of the compile but this one (SIGALRM, set by [`Steps::until`]).
extern "C" fn on_alarm(_signal: nix::libc::c_int) {
    // kill may set errno, which the interrupted code may be about to read.
    let errno = nix::errno::Errno::last_raw();
    process::end_strays();
    nix::errno::Errno::set_raw(errno);
}

/// The driver's exit status when an engine pass or the step after the last one failed: the
/// verdict under `halt_on_error` rests on it, not on the log, which the document can rewrite.
const ENGINE_FAILED: i32 = 1;

/// What a step that only adds to the compile (a check, the word count) leaves of the timeout,
/// for the handover and the supervisor's taking of the outputs.
const MARGIN: std::time::Duration = std::time::Duration::from_secs(1);

pub fn run() -> io::Result<()> {
    // The compile runs as our user: without this, it could write into our memory through
    // /proc/<pid>/mem and change the exit status. Children are dumpable again after exec.
    nix::sys::prctl::set_dumpable(false).map_err(io::Error::other)?;
    let channel = handover::take_channel()?;
    let (mut spec, format_bytes) = read_job(&mut io::stdin().lock(), crate::MAX_SPEC_BYTES)?;
    nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o022));
    let action = SigAction::new(
        SigHandler::Handler(on_interrupt),
        SaFlags::empty(),
        SigSet::empty(),
    );
    // SAFETY: the handler only stores to an atomic.
    unsafe { sigaction(Signal::SIGINT, &action) }.map_err(io::Error::other)?;
    let alarm = SigAction::new(
        SigHandler::Handler(on_alarm),
        SaFlags::empty(),
        SigSet::empty(),
    );
    // SAFETY: the handler only calls kill.
    unsafe { sigaction(Signal::SIGALRM, &alarm) }.map_err(io::Error::other)?;
    let landlock = confine::restrict_files(confine::WRITABLE)?;
    // The API checked the path; a spec that did not come through it must not move the compile.
    if !names::is_safe_path(&spec.main) || !spec.files.iter().any(|f| f.path == spec.main) {
        return Err(io::Error::other(format!(
            "unsafe main document {:?}",
            spec.main
        )));
    }
    let work = Path::new(WORK_DIR);
    let main = Path::new(&spec.main);
    let main_folder = main.parent().unwrap_or(Path::new(""));
    let folder = work.join(main_folder);
    let main_name = main
        .file_name()
        .and_then(|name| name.to_str())
        .ok_or_else(|| io::Error::other(format!("unsafe main document {:?}", spec.main)))?;
    let engine = spec.engine;
    // The supervisor gave this process exactly the compile's environment.
    let environment = process::inherited_environment();
    let mut steps = Steps::new(environment.clone());
    steps
        .trace
        .push(format!("texfleet: Landlock {:?}", landlock.ruleset));
    steps.files_confined = landlock.ruleset == RulesetStatus::FullyEnforced;

    let stdin = &mut io::stdin().lock();
    let started = lay_out(
        &mut steps,
        &spec,
        engine,
        &folder,
        StreamedFrom::Bytes(stdin),
    )?;
    let timeout = std::time::Duration::from_secs(spec.timeout_seconds.into());
    if let Some(page) = spec.preview_page {
        return thumbnail::preview(channel, steps, &spec, page, started + timeout);
    }
    let tools_deadline = started + timeout.saturating_sub(MARGIN);
    let findings = spec
        .check
        .and_then(|_| chktex::check(&mut steps, main_name, tools_deadline));
    if spec.check == Some(CheckMode::Error) && findings.as_ref().is_none_or(|f| !f.is_empty()) {
        steps.trace.push(match &findings {
            Some(found) => format!(
                "texfleet: the document was not compiled: chktex found {} problems and the check is \"error\"",
                found.len()
            ),
            None => "texfleet: the document was not compiled: chktex did not check it and the check is \"error\"".into(),
        });
        let driver_state = DriverState {
            findings,
            ..DriverState::default()
        };
        hand_over(channel, &mut steps, &driver_state.bounded(), &[]);
        append_to_log(&steps.trace)?;
        std::process::exit(ENGINE_FAILED);
    }
    let restored = state::restore(&mut steps, std::mem::take(&mut spec.previous));
    let mut format = Format {
        path: match &spec.preamble {
            Preamble::Load { .. } => preamble::install(&mut steps, &format_bytes, main_folder),
            _ => None,
        },
        content: format_bytes,
        ..Format::default()
    };
    let format_given = format.path.is_some();
    let from_state = !restored.is_empty();
    let halt_on_error = spec.halt_on_error;
    let draft = spec.draft;
    let passes = |steps: &mut Steps, format: &mut Format, restored, cpu_seconds| {
        let run = Run {
            halt_on_error,
            draft,
            restored,
            cpu_seconds,
        };
        compile(steps, engine, main_name, &folder, format, run)
    };
    // The passes from the last compile's files or format get half the timeout: passes they
    // make loop forever (a planted .aux would hang every later compile of the document)
    // then fail in time to compile again from nothing.
    let from_state_cpu =
        (from_state || format_given).then_some(u64::from(spec.timeout_seconds / 2).max(1));
    let passes_started = std::time::Instant::now();
    let mut succeeded = passes(&mut steps, &mut format, restored, from_state_cpu);
    // The last compile's files may be what failed (a .bbl of another bibliography package, say):
    // the result must be the document's own, so it is compiled again from nothing.
    let restarted = from_state && !succeeded && !STOP.load(Ordering::SeqCst);
    let mut again_in_a_new_sandbox = false;
    if restarted {
        steps.trace.push(
            "texfleet: the compile from the last compile's auxiliary files did not end well; again from nothing"
                .into(),
        );
        format.path = None;
        let again = again_from_nothing(&mut steps, &spec, engine, &folder, |steps| {
            passes(steps, &mut format, Vec::new(), None)
        })?;
        again_in_a_new_sandbox = again.is_none();
        succeeded = again.unwrap_or(false);
    }
    succeeded &= finish::finish(&mut steps, engine);
    // With the step after the passes: xdvipdfmx converts the figures a kept file can name.
    let took = passes_started.elapsed();
    let dumped = match spec.preamble == Preamble::Dump && succeeded {
        true => dump_in_time(&mut steps, &spec, engine, main_name, started),
        false => Dumped::default(),
    };
    // A file the last compile handed on that waits short of the passes' budget (and again in
    // the dump's check) would cost every later compile that time, and can write itself anew:
    // a slow compile from it, or a dump out of time, hands on nothing, and the next compile
    // starts from the sources.
    let slow = from_state && !restarted && took > timeout / 4;
    let hand_on = succeeded && !slow && !dumped.out_of_time;
    if succeeded && !hand_on {
        steps.trace.push(match slow {
            true => format!(
                "texfleet: nothing handed on to the next compile: the compile from the last compile's files took {} s, more than a quarter of the timeout",
                took.as_secs()
            ),
            false => "texfleet: nothing handed on to the next compile: keeping the preamble as a format ran out of time".into(),
        });
    }
    let sources_here: Vec<PathBuf> = spec
        .files
        .iter()
        .filter_map(|file| Path::new(&file.path).strip_prefix(main_folder).ok())
        .map(Path::to_path_buf)
        .collect();
    // Only a compile that ended well hands its files on: the next starts from nothing. They
    // are read before the word count, which could not change them anyway.
    let next = match hand_on {
        true => state::next(&steps, &folder, &sources_here),
        false => Default::default(),
    };
    let word_count = match spec.wordcount {
        true => word_count::count(&mut steps, main_name, tools_deadline),
        false => None,
    };
    // Whenever a PDF is left: a document with errors still gives one, and a job its verdict.
    let thumbnail = (spec.thumbnail_width).is_some_and(|w| {
        thumbnail::render(
            &mut steps,
            PDF_FILE,
            1,
            (w, thumbnail::TIME),
            tools_deadline,
        )
        .image
    });
    let driver_state = DriverState {
        next,
        dump: dumped.dump,
        format_refused: format.blamed,
        restarted,
        again_in_a_new_sandbox,
        word_count,
        findings,
        thumbnail,
        ..DriverState::default()
    }
    .bounded();
    let dumped_format = match driver_state.dump {
        Some(Dump::Built { .. }) => dumped.format,
        _ => Vec::new(),
    };
    hand_over(channel, &mut steps, &driver_state, &dumped_format);
    append_to_log(&steps.trace)?;
    if !succeeded {
        std::process::exit(ENGINE_FAILED);
    }
    Ok(())
}

/// Hands `state` and `format` over to the supervisor: what speeds up the next compile, and a
/// check's findings and a word count. This compile's verdict and log stand without it.
fn hand_over(channel: fs::File, steps: &mut Steps, state: &DriverState, format: &[u8]) {
    if let Err(error) = handover::write(channel, state, format) {
        steps.trace.push(format!(
            "texfleet: nothing handed on (to the next compile, nor a check's findings or a word count): {error}"
        ));
    }
}

/// What keeping the preamble as a format gave: a verdict (None when there is none: not tried,
/// out of time, or what the dump opened could not be followed) and the format's bytes.
#[derive(Default)]
struct Dumped {
    dump: Option<Dump>,
    format: Vec<u8>,
    out_of_time: bool,
}

/// Keeps the preamble as a format, unless half of the timeout is spent: the dump and its check
/// take about two passes, and would risk the compile's timeout for what only speeds up the
/// next one; they get what is left of the timeout but a quarter.
fn dump_in_time(
    steps: &mut Steps,
    spec: &JobSpec,
    engine: Engine,
    main_name: &str,
    started: std::time::Instant,
) -> Dumped {
    if started.elapsed().as_secs() * 2 >= u64::from(spec.timeout_seconds) {
        steps.skip("keeping the preamble as a format: half of the timeout is spent".into());
        return Dumped::default();
    }
    let main_folder = Path::new(&spec.main).parent().unwrap_or(Path::new(""));
    // The dump and its check end before the compile's deadline, with time to hand on.
    let timeout = std::time::Duration::from_secs(spec.timeout_seconds.into());
    let margin = (timeout / 4).max(std::time::Duration::from_secs(1));
    steps.until = Some(started + timeout.saturating_sub(margin));
    let dump = preamble::dump(
        steps,
        engine,
        main_name,
        main_folder,
        &spec.files,
        spec.halt_on_error,
    );
    // Within a second of it: the alarm and what is left for a program count whole seconds.
    let out_of_time = steps.until.is_some_and(|until| {
        std::time::Instant::now() + std::time::Duration::from_secs(1) >= until
    });
    steps.until = None;
    match dump {
        // Not the preamble's fault: a later compile may keep it.
        Ok((Dump::Refused { .. }, _)) if out_of_time => {
            steps.skip("keeping the preamble as a format: it ran out of time".into());
            Dumped {
                out_of_time,
                ..Dumped::default()
            }
        }
        Err(why) => {
            steps.skip(format!("keeping the preamble as a format: {why}"));
            Dumped::default()
        }
        Ok((Dump::Refused { why }, format)) => {
            steps.skip(format!("keeping the preamble as a format: {why}"));
            Dumped {
                dump: Some(Dump::Refused { why }),
                format,
                out_of_time,
            }
        }
        Ok((dump, format)) => Dumped {
            dump: Some(dump),
            format,
            out_of_time,
        },
    }
}

/// The trace goes at the end of the job's log, where users look.
fn append_to_log(trace: &[String]) -> io::Result<()> {
    let mut log = OpenOptions::new()
        .append(true)
        .create(true)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(LOG_FILE)?;
    writeln!(log)?;
    for line in trace {
        writeln!(log, "{line}")?;
    }
    Ok(())
}
