//! The step after the passes for engines whose passes write no PDF (XeLaTeX's xdvipdfmx):
//! only that step may write the PDF, so a file of that name the document wrote goes first, and
//! without the passes' output there is no PDF.

use super::engine::{Engine, EnginePrograms as _};
use super::steps::Steps;
use crate::process::Exit;
use std::fs;
use std::path::Path;
use texfleet_sandbox::PDF_FILE;

/// Runs `engine`'s finishing step, if it has one and the passes left it something to finish:
/// false when it failed.
pub fn finish(steps: &mut Steps, engine: Engine) -> bool {
    let Some(finish) = engine.finish(&steps.environment) else {
        return true;
    };
    // With no page typeset, there is no .xdv, and any PDF was written by the document.
    if fs::remove_file(PDF_FILE).is_ok() {
        steps.trace.push(format!(
            "texfleet: removed {PDF_FILE}, not the engine's: written before {} ran",
            finish.args[0]
        ));
    }
    !Path::new(&engine.pass_output()).exists() || steps.run(&finish).is_some_and(Exit::success)
}
