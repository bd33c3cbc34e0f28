//! The compile driver: what latexmk did, without a shell and without Perl. It runs as the
//! compile's user inside Landlock (`texfleet-supervisor drive`, started by the supervisor),
//! writes the sources, converts EPS figures, runs the engine, runs bibtex, biber, makeindex,
//! bib2gls and the like when their input changed, and runs the engine again until nothing it reads
//! changes, at most [`MAX_PASSES`] times. Every program is started by a fixed argument
//! vector; every name on it that comes from the document is checked first ([`names`]).
//!
//! A pass is followed by another when a generated file it read changed during it, when a
//! file it looked for and missed now exists, when the log asks for it, or when a tool changed
//! what the next pass reads ([`files`]). What ran, and what was skipped and why, is appended
//! to the job's log.

mod bcf;
mod bib2gls;
mod bibliography;
mod engine;
pub mod eps;
mod files;
mod glossaries;
mod indexes;
mod names;
mod tools;

use crate::confine;
use crate::process::{self, Exit};
use engine::Engine;
use landlock::RulesetStatus;
use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
use std::collections::BTreeMap;
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use texfleet_sandbox::{JobSpec, JOB_NAME, LOG_FILE, PDF_FILE, WORK_DIR};
use tools::Tools;

/// latexmk's default limit of runs.
const MAX_PASSES: usize = 5;

/// Set when the supervisor's deadline asks the compile to stop (SIGINT).
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_interrupt(_signal: nix::libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// The driver's exit status when an engine pass or the step after the last one failed: the
/// verdict under `halt_on_error` rests on it, not on the log, which the document can rewrite.
const ENGINE_FAILED: i32 = 1;

pub fn run() -> io::Result<()> {
    // The compile runs as our user: without this, it could write into our memory through
    // /proc/<pid>/mem and change the exit status. Children are dumpable again after exec.
    nix::sys::prctl::set_dumpable(false).map_err(io::Error::other)?;
    let spec: JobSpec = crate::read_stdin_json()?;
    nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o022));
    let action = SigAction::new(
        SigHandler::Handler(on_interrupt),
        SaFlags::empty(),
        SigSet::empty(),
    );
    // SAFETY: the handler only stores to an atomic.
    unsafe { sigaction(Signal::SIGINT, &action) }.map_err(io::Error::other)?;
    let landlock = confine::restrict_files()?;
    let work = Path::new(WORK_DIR);
    files::write_sources(work, &spec.files)?;
    // The API checked the path; a spec that did not come through it must not move the compile.
    if !names::is_safe_path(&spec.main) || !spec.files.iter().any(|f| f.path == spec.main) {
        return Err(io::Error::other(format!(
            "unsafe main document {:?}",
            spec.main
        )));
    }
    let main = Path::new(&spec.main);
    let folder = work.join(main.parent().unwrap_or(Path::new("")));
    std::env::set_current_dir(&folder)?;
    let main_name = main
        .file_name()
        .and_then(|name| name.to_str())
        .ok_or_else(|| io::Error::other(format!("unsafe main document {:?}", spec.main)))?;
    let engine = Engine::parse(&spec.engine)
        .ok_or_else(|| io::Error::other(format!("unknown engine {:?}", spec.engine)))?;
    // The supervisor gave this process exactly the compile's environment.
    let environment = process::inherited_environment();
    let mut tools = Tools::new(environment.clone());
    tools
        .trace
        .push(format!("texfleet: Landlock {:?}", landlock.ruleset));
    tools.files_confined = landlock.ruleset == RulesetStatus::FullyEnforced;

    if engine == Engine::Lualatex {
        copy_font_names();
    }
    eps::convert_all(&mut tools, &spec.files, work, spec.timeout_seconds);
    let mut succeeded = compile(&mut tools, engine, main_name, &folder, spec.halt_on_error);
    if let Some(finish) = engine.finish(&environment) {
        // Only the finishing step writes this engine's PDF: a file of that name the document
        // wrote (with no page typeset, there is no .xdv) goes first.
        if fs::remove_file(PDF_FILE).is_ok() {
            tools.trace.push(format!(
                "texfleet: removed {PDF_FILE}, not the engine's: written before {} ran",
                finish.args[0]
            ));
        }
        if Path::new(&engine.pass_output()).exists() {
            succeeded &= tools.run(&finish).is_some_and(Exit::success);
        }
    }
    append_to_log(&tools.trace)?;
    if !succeeded {
        std::process::exit(ENGINE_FAILED);
    }
    Ok(())
}

/// luaotfload looks for its font name database only where it may write (the job's cache),
/// so the one built into the image is copied there (a few kilobytes); otherwise every job
/// would rebuild it, which takes seconds. Its font caches it reads from the image directly.
fn copy_font_names() {
    const NAMES: &str = "luatex-cache/generic/names";
    let (from, to) = (
        Path::new("/var/lib/texmf").join(NAMES),
        Path::new(confine::TEXMF_VAR).join(NAMES),
    );
    let _ = fs::create_dir_all(&to);
    for entry in fs::read_dir(from).into_iter().flatten().flatten() {
        let _ = fs::copy(entry.path(), to.join(entry.file_name()));
    }
}

/// Runs passes and tools until nothing read changes. True when the last pass ended well.
fn compile(
    tools: &mut Tools,
    engine: Engine,
    main: &str,
    folder: &Path,
    halt_on_error: bool,
) -> bool {
    let environment = tools.environment.clone();
    // Every file a pass wrote, so that the next pass can tell whether it changed.
    let mut generated: Vec<PathBuf> = Vec::new();
    let mut ended_well = false;
    for pass in 1..=MAX_PASSES {
        if STOP.load(Ordering::SeqCst) {
            return false;
        }
        let before = files::fingerprints(&generated);
        // A pass that writes no output must not leave the last one's behind.
        let _ = fs::remove_file(engine.pass_output());
        let ran = process::run(&engine.pass(main, halt_on_error, &environment), None, &[]);
        process::end_strays();
        let exit = match ran {
            Ok(exit) => exit,
            Err(error) => {
                tools.trace.push(format!("texfleet: pass {pass}: {error}"));
                return false;
            }
        };
        tools.trace.push(format!(
            "texfleet: {} pass {pass} ({})",
            engine.name(),
            tools::describe(exit)
        ));
        let recorded = files::read_recorder(&Path::new(JOB_NAME).with_extension("fls"), folder);
        let log = fs::read(LOG_FILE).unwrap_or_default();
        let log = String::from_utf8_lossy(&log);
        ended_well = exit.success() && !STOP.load(Ordering::SeqCst);
        let failed = halt_on_error && !exit.success();
        if STOP.load(Ordering::SeqCst) || failed || !Path::new(&engine.pass_output()).exists() {
            return ended_well;
        }
        let tools_changed = bibliography::run(tools, &recorded)
            | indexes::run(tools, &recorded, &log)
            | bib2gls::run(tools);
        let read_changed = changed_during_pass(&recorded.inputs, &before);
        let appeared = files::missing_then_present(&log)
            .iter()
            .any(|path| !is_trivial_aux(path));
        if !(tools_changed || read_changed || appeared || files::log_asks_for_rerun(&log)) {
            return ended_well;
        }
        for output in recorded.outputs {
            if !generated.contains(&output) {
                generated.push(output);
            }
        }
    }
    tools
        .trace
        .push(format!("texfleet: stopped after {MAX_PASSES} passes"));
    ended_well
}

/// Whether a file the pass read was different before it.
fn changed_during_pass(inputs: &[PathBuf], before: &BTreeMap<PathBuf, Option<u64>>) -> bool {
    inputs.iter().any(|input| {
        before
            .get(input)
            .is_some_and(|fingerprint| *fingerprint != files::fingerprint(input))
    })
}

/// An aux file that a pass read as missing and that holds nothing a later pass would use:
/// only `\relax` and the page count. A document without labels, citations or contents then
/// takes one pass, not two.
fn is_trivial_aux(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "aux")
        && fs::read_to_string(path).is_ok_and(|text| {
            text.lines().all(|line| {
                let line = line.trim();
                line.is_empty() || line == "\\relax" || line.starts_with("\\gdef \\@abspage@last{")
            })
        })
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
