//! Running a tool that only reports on the sources (chktex, texcount): it reads what the
//! document names and may be led by the document into more than reading (texcount's Perl
//! `open` runs a name ending in `|`; a `.chktexrc` sets chktex's options). So it may start no
//! process at all (`RLIMIT_NPROC` of 1, below the driver and itself), read only the job's files
//! and TeX Live's, write nothing, and runs only where Landlock holds all of that, within a
//! time of its own inside the job's.

use super::steps::Steps;
use crate::process::{Exit, Program};
use nix::sys::resource::Resource;
use std::time::{Duration, Instant};

/// What such a tool may take: each reads a thesis in well under a second.
pub const TIME: Duration = Duration::from_secs(5);

/// What such a tool is, and what it may read besides TeX Live's files.
pub struct Tool {
    /// The step, as the log names it.
    pub what: &'static str,
    /// The tool's file: without it in the image, the step is skipped.
    pub file: &'static str,
    /// What is started: the tool's file, or its interpreter.
    pub program: &'static str,
    pub readable: &'static [&'static str],
}

/// Runs `tool` with `args`, ending by `deadline` at the latest, under `limits` besides the
/// common ones. How it ended, or None when it did not run (the log says why).
pub fn run(
    steps: &mut Steps,
    tool: &Tool,
    args: &[&str],
    deadline: Instant,
    limits: &[(Resource, u64)],
) -> Option<Exit> {
    let what = tool.what;
    if !steps.files_confined {
        steps.skip(format!("{what}: Landlock does not confine this sandbox"));
        return None;
    }
    if std::fs::metadata(tool.file).is_err() {
        let name = tool.file.rsplit('/').next().unwrap_or(tool.file);
        steps.skip(format!("{what}: this TeX Live's image has no {name}"));
        return None;
    }
    let program = Program::new(tool.program, args, &steps.environment)
        .starting_only(&[])
        .reading_only(tool.readable);
    let until = deadline.min(Instant::now() + TIME);
    let mut all = vec![
        (Resource::RLIMIT_CPU, TIME.as_secs()),
        (Resource::RLIMIT_NPROC, 1),
    ];
    all.extend_from_slice(limits);
    steps.run_by(&program, &all, until)
}
