//! The passes of one run: the engine, then the tools whose input changed, again until nothing
//! a pass reads changes, at most [`MAX_PASSES`] times. A pass is followed by another when a
//! generated file it read changed during it, when a file it looked for and missed now exists,
//! when the log asks for it, or when a tool changed what the next pass reads ([`files`]).

use super::engine::{Engine, EnginePrograms as _};
use super::tex_live::TexLive;
use super::tools::{self, Tools};
use super::{
    bib2gls, bibliography, fingerprints, glossaries, indexes, preamble, recorder, reruns, STOP,
};
use crate::process;
use nix::sys::resource::Resource;
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use texfleet_sandbox::{JOB_NAME, LOG_FILE};

/// latexmk's default limit of runs.
pub const MAX_PASSES: usize = 5;

/// Runs passes and tools until nothing read changes. True when the last pass ended well.
/// `format` is the preamble format to load; a pass that fails with it runs again without it,
/// and the rest of the compile goes on without it. `restored` are the auxiliary files of the
/// last compile, watched like those a pass writes.
pub fn compile(
    tools: &mut Tools,
    engine: Engine,
    main: &str,
    folder: &Path,
    format: &mut Format,
    run: Run,
) -> bool {
    let Run {
        halt_on_error,
        restored,
        cpu_seconds,
    } = run;
    let environment = tools.environment.clone();
    let run_started = std::time::Instant::now();
    let from_restored = !restored.is_empty();
    // Every file a pass wrote, so that the next pass can tell whether it changed.
    let mut generated: Vec<PathBuf> = restored;
    let mut ended_well = false;
    let mut tex_live = TexLive::for_engine(engine);
    let mut pass = 0;
    while pass < MAX_PASSES {
        pass += 1;
        if STOP.load(Ordering::SeqCst) {
            return false;
        }
        if format
            .path
            .as_ref()
            .is_some_and(|path| !preamble::holds(Path::new(path), &format.content))
        {
            tools.trace.push(
                "texfleet: the compile rewrote the project's preamble format; the passes go on without it"
                    .into(),
            );
            format.path = None;
        }
        let before = fingerprints::fingerprints(&generated);
        // A pass that writes no output must not leave the last one's behind.
        let _ = fs::remove_file(engine.pass_output());
        let environment = tex_live.environment(&environment);
        let program = engine.pass(main, halt_on_error, format.path.as_deref(), &environment);
        let started = std::time::Instant::now();
        // What is left of the run's budget bounds this pass.
        let budgeted = cpu_seconds.filter(|_| from_restored || format.path.is_some());
        let left = budgeted.map(|total| total.saturating_sub(run_started.elapsed().as_secs()));
        if left == Some(0) {
            tools.trace.push(
                "texfleet: the passes from the last compile's files or format ran out of their time"
                    .into(),
            );
            return false;
        }
        let limits: Vec<_> = left
            .map(|left| (Resource::RLIMIT_CPU, left))
            .into_iter()
            .collect();
        let ran = process::run(&program, None, &limits);
        let took = started.elapsed().as_millis();
        process::end_strays();
        let exit = match ran {
            Ok(exit) => exit,
            Err(error) => {
                tools.trace.push(format!("texfleet: pass {pass}: {error}"));
                return false;
            }
        };
        tools.trace.push(format!(
            "texfleet: {} pass {pass} ({}, {took} ms)",
            engine.name(),
            tools::describe(exit)
        ));
        let recorded = recorder::read_recorder(&Path::new(JOB_NAME).with_extension("fls"), folder);
        let log = fs::read(LOG_FILE).unwrap_or_default();
        let log = String::from_utf8_lossy(&log);
        tools.note_shell_escapes();
        if !exit.success() && tex_live == TexLive::Common && TexLive::lacked(&log) {
            tools.trace.push(format!(
                "texfleet: pass {pass} needed the complete TeX Live; again with it"
            ));
            tex_live = TexLive::Complete;
            pass -= 1;
            continue;
        }
        if format.path.is_some() && !exit.success() {
            tools.trace.push(format!(
                "texfleet: pass {pass} failed with the project's preamble format; again without it"
            ));
            format.path = None;
            format.retried = true;
            pass -= 1;
            continue;
        }
        // Failing with the format and not without it, the format is at fault.
        format.blamed |= std::mem::take(&mut format.retried) && exit.success();
        ended_well = exit.success() && !STOP.load(Ordering::SeqCst);
        let failed = halt_on_error && !exit.success();
        if STOP.load(Ordering::SeqCst) || failed || !Path::new(&engine.pass_output()).exists() {
            return ended_well;
        }
        let tools_changed = bibliography::run(tools, &recorded)
            | indexes::run(tools, &recorded, &log)
            | glossaries::run(tools)
            | bib2gls::run(tools);
        let read_changed = changed_during_pass(&recorded.inputs, &before);
        let appeared = reruns::missing_then_present(&log)
            .iter()
            .any(|path| !is_trivial_aux(path));
        if !(tools_changed || read_changed || appeared || reruns::log_asks_for_rerun(&log)) {
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

/// The preamble format a compile loads, and what became of it.
#[derive(Default)]
pub struct Format {
    /// Its full path, while the passes load it.
    pub path: Option<String>,
    /// What the scheduler gave, which the file must still hold when a pass loads it.
    pub content: Vec<u8>,
    /// The last pass failed with it and runs again without it.
    pub retried: bool,
    /// A pass failed with it and succeeded without it: the format is not to be used again.
    pub blamed: bool,
}

/// How the passes of one run go.
pub struct Run {
    pub halt_on_error: bool,
    /// The last compile's files written back before the first pass, watched like the files a
    /// pass writes.
    pub restored: Vec<PathBuf>,
    /// The seconds the passes may take together, when the run starts from what the last
    /// compile left (the job's deadline bounds the rest).
    pub cpu_seconds: Option<u64>,
}

/// Whether a file the pass read was different before it.
fn changed_during_pass(inputs: &[PathBuf], before: &BTreeMap<PathBuf, Option<u64>>) -> bool {
    inputs.iter().any(|input| {
        before
            .get(input)
            .is_some_and(|fingerprint| *fingerprint != fingerprints::fingerprint(input))
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
