//! The passes of one run: the engine, then the tools whose input changed, again until nothing
//! a pass reads changes, at most [`MAX_PASSES`] times. A pass is followed by another when a
//! generated file it read changed during it, when a file it looked for and missed now exists,
//! when the log asks for it, or when a tool changed what the next pass reads ([`files`]).

use super::engine::{Engine, EnginePrograms as _};
use super::steps::{self, Steps};
use super::tex_live::TexLive;
use super::{
    bib2gls, bibliography, fingerprints, glossaries, indexes, preamble, recorder, reruns, STOP,
};
use crate::process;
use nix::sys::resource::Resource;
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use texfleet_sandbox::LOG_FILE;

/// latexmk's default limit of runs.
pub const MAX_PASSES: usize = 5;

/// Runs passes and tools until nothing read changes. True when the last pass ended well.
/// `format` is the preamble format to load; a pass that fails with it runs again without it,
/// and the rest of the compile goes on without it. `restored` are the auxiliary files of the
/// last compile, watched like those a pass writes.
pub fn compile(
    steps: &mut Steps,
    engine: Engine,
    main: &str,
    folder: &Path,
    format: &mut Format,
    run: Run,
) -> bool {
    let Run {
        halt_on_error,
        draft,
        restored,
        cpu_seconds,
    } = run;
    let shared = Shared {
        engine,
        main,
        folder,
        halt_on_error,
        draft,
        budget: Budget {
            cpu_seconds,
            from_restored: !restored.is_empty(),
            started: std::time::Instant::now(),
        },
    };
    // Every file a pass wrote, so that the next pass can tell whether it changed.
    let mut generated: Vec<PathBuf> = restored;
    let mut ended_well = false;
    let mut tex_live = TexLive::for_engine(engine);
    for pass in 1..=MAX_PASSES {
        let mut without_format = false;
        // A pass that failed for want of the complete TeX Live, or with the format, is tried
        // again at once, and counts once.
        let done = loop {
            let Some(done) = try_pass(steps, &shared, format, &generated, tex_live, pass) else {
                return false;
            };
            if !done.exit.success() && tex_live == TexLive::Common && TexLive::lacked(&done.log) {
                steps.trace.push(format!(
                    "texfleet: pass {pass} needed the complete TeX Live; again with it"
                ));
                tex_live = TexLive::Complete;
            } else if format.path.is_some() && !done.exit.success() {
                steps.trace.push(format!(
                    "texfleet: pass {pass} failed with the project's preamble format; again without it"
                ));
                format.path = None;
                without_format = true;
            } else {
                break done;
            }
        };
        // Failing with the format and not without it, the format is at fault.
        format.blamed |= without_format && done.exit.success();
        ended_well = done.exit.success() && !STOP.load(Ordering::SeqCst);
        let failed = halt_on_error && !done.exit.success();
        if STOP.load(Ordering::SeqCst) || failed || !Path::new(&engine.pass_output()).exists() {
            return ended_well;
        }
        let recorded = done.recorded;
        let tools_changed = bibliography::run(steps, &recorded)
            | indexes::run(steps, &recorded, &done.log)
            | glossaries::run(steps)
            | bib2gls::run(steps);
        let read_changed = changed_during_pass(&recorded.inputs, &done.before);
        let appeared = reruns::missing_then_present(&done.log)
            .iter()
            .any(|path| !is_trivial_aux(path));
        if !(tools_changed || read_changed || appeared || reruns::log_asks_for_rerun(&done.log)) {
            return ended_well;
        }
        for output in recorded.outputs {
            if !generated.contains(&output) {
                generated.push(output);
            }
        }
    }
    steps
        .trace
        .push(format!("texfleet: stopped after {MAX_PASSES} passes"));
    ended_well
}

/// What every pass of a run shares.
struct Shared<'a> {
    engine: Engine,
    main: &'a str,
    folder: &'a Path,
    halt_on_error: bool,
    draft: bool,
    budget: Budget,
}

/// The CPU seconds the passes of a run from the last compile's files or format may take
/// together.
struct Budget {
    cpu_seconds: Option<u64>,
    from_restored: bool,
    started: std::time::Instant,
}

impl Budget {
    /// How it bounds the next pass, `with_format` or not, in CPU and wall seconds. Spent, a run
    /// from the last compile's files stops (to run again from nothing); a run with only the
    /// format goes on without it: the format is the document's own preamble, which the job's
    /// deadline bounds.
    fn bound(&self, with_format: bool) -> Bound {
        let Some(total) = self
            .cpu_seconds
            .filter(|_| self.from_restored || with_format)
        else {
            return Bound::Unbounded;
        };
        match total.saturating_sub(self.started.elapsed().as_secs()) {
            0 if self.from_restored => Bound::Spent,
            0 => Bound::WithoutFormat,
            left => Bound::CpuSeconds(left),
        }
    }
}

/// How a run's budget bounds its next pass.
#[derive(Debug, PartialEq)]
enum Bound {
    Unbounded,
    CpuSeconds(u64),
    WithoutFormat,
    Spent,
}

/// A pass that ran to its end, and what it read and wrote.
struct Done {
    exit: process::Exit,
    recorded: recorder::Recorded,
    log: String,
    /// The fingerprints of the generated files before it.
    before: BTreeMap<PathBuf, Option<u64>>,
}

/// Runs pass `pass` once; `None` when the compile must stop (stopped, out of its budget, or
/// the engine could not run).
fn try_pass(
    steps: &mut Steps,
    shared: &Shared,
    format: &mut Format,
    generated: &[PathBuf],
    tex_live: TexLive,
    pass: usize,
) -> Option<Done> {
    let engine = shared.engine;
    if STOP.load(Ordering::SeqCst) {
        return None;
    }
    if format
        .path
        .as_ref()
        .is_some_and(|path| !preamble::holds(Path::new(path), &format.content))
    {
        steps.trace.push(
            "texfleet: the compile rewrote the project's preamble format; the passes go on without it"
                .into(),
        );
        format.path = None;
    }
    // What is left of the run's budget bounds this pass.
    let left = match shared.budget.bound(format.path.is_some()) {
        Bound::Unbounded => None,
        Bound::CpuSeconds(left) => Some(left),
        // Blamed: a format can make only its own passes slow (a hook that waits when a file of
        // the compile is missing), and a document slow without it loses only the format.
        Bound::WithoutFormat => {
            steps.trace.push(
                "texfleet: the passes with the project's preamble format ran out of their time; the passes go on without it"
                    .into(),
            );
            format.path = None;
            format.blamed = true;
            None
        }
        Bound::Spent => {
            steps.trace.push(
                "texfleet: the passes from the last compile's files ran out of their time".into(),
            );
            return None;
        }
    };
    let before = fingerprints::fingerprints(generated);
    // A pass that writes no output must not leave the last one's behind.
    let _ = fs::remove_file(engine.pass_output());
    let environment = tex_live.environment(&steps.environment);
    let program = engine.pass(
        shared.main,
        shared.halt_on_error,
        shared.draft,
        format.path.as_deref(),
        &environment,
    );
    let started = std::time::Instant::now();
    let limits: Vec<_> = left
        .map(|left| (Resource::RLIMIT_CPU, left))
        .into_iter()
        .collect();
    // The budget bounds the pass in time too, not only in its own CPU: waiting on what it
    // starts (the restricted shell escape) costs TeX no CPU. The alarm ends the pass and what
    // it started (see `super::on_alarm`); it then failed, and runs again without the format or
    // from nothing.
    let alarm = left.map(|left| u32::try_from(left).unwrap_or(u32::MAX));
    let ran = process::run_within(&program, None, &limits, alarm);
    let took = started.elapsed().as_millis();
    process::end_strays();
    let exit = match ran {
        Ok(exit) => exit,
        Err(error) => {
            steps.trace.push(format!("texfleet: pass {pass}: {error}"));
            return None;
        }
    };
    steps.trace.push(format!(
        "texfleet: {} pass {pass} ({}, {took} ms)",
        engine.name(),
        steps::describe(exit)
    ));
    // Ended by the alarm (SIGKILL) or its CPU limit (SIGXCPU): with the format, the format is
    // at fault whatever the next pass does (from the last compile's files, none follows).
    let out_of_time = left.is_some()
        && matches!(exit, process::Exit::Signal(signal)
            if signal == nix::libc::SIGKILL || signal == nix::libc::SIGXCPU);
    if out_of_time && format.path.is_some() {
        format.blamed = true;
        steps.trace.push(
            "texfleet: a pass with the project's preamble format ran out of its time; the format is dropped"
                .into(),
        );
    }
    let recorded = recorder::read_recorder(Path::new(recorder::RECORDER_FILE), shared.folder);
    let log = fs::read(LOG_FILE).unwrap_or_default();
    let log = String::from_utf8_lossy(&log).into_owned();
    steps.note_shell_escapes();
    Some(Done {
        exit,
        recorded,
        log,
        before,
    })
}

/// The preamble format a compile loads, and what became of it.
#[derive(Default)]
pub struct Format {
    /// Its full path, while the passes load it.
    pub path: Option<String>,
    /// What the scheduler gave, which the file must still hold when a pass loads it.
    pub content: Vec<u8>,
    /// A pass failed with it and succeeded without it: the format is not to be used again.
    pub blamed: bool,
}

/// How the passes of one run go.
pub struct Run {
    pub halt_on_error: bool,
    pub draft: bool,
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn spent(from_restored: bool) -> Budget {
        Budget {
            cpu_seconds: Some(10),
            from_restored,
            started: Instant::now() - Duration::from_secs(11),
        }
    }

    #[test]
    fn a_run_with_only_the_format_goes_on_without_it_once_its_budget_is_spent() {
        assert_eq!(spent(false).bound(true), Bound::WithoutFormat);
        assert_eq!(spent(false).bound(false), Bound::Unbounded);
        assert_eq!(spent(true).bound(true), Bound::Spent);
        let fresh = Budget {
            started: Instant::now(),
            ..spent(true)
        };
        assert_eq!(fresh.bound(false), Bound::CpuSeconds(10));
    }
}
