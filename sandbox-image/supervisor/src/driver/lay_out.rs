//! Making the job's files in the work directory: the first time from the spec and stdin, and
//! again after the passes from the last compile's files failed, from the sources as sent.

use super::engine::{self, Engine, EnginePrograms as _};
use super::files::{self, StreamedFrom};
use super::set_aside::SetAside;
use super::steps::Steps;
use super::{eps, state};
use crate::confine;
use std::fs;
use std::io;
use std::path::Path;
use std::time::Instant;
use texfleet_sandbox::{JobSpec, PDF_FILE, WORK_DIR};

/// Clears what the passes from the last compile's files made and runs `passes` again from the
/// sources as sent: whether they end well, or None when the compile cannot start again here.
/// The passes may have rewritten sources, converted figures, caches and the format: all are
/// made again (without the format, which may be what failed: the scheduler then drops it). A
/// source streamed in that the passes rewrote, or what cannot be cleared, ends the compile:
/// the scheduler runs the job again in a new sandbox, where the sources arrive as sent.
pub fn again_from_nothing(
    steps: &mut Steps,
    spec: &JobSpec,
    engine: Engine,
    folder: &Path,
    passes: impl FnOnce(&mut Steps) -> bool,
) -> io::Result<Option<bool>> {
    let work = Path::new(WORK_DIR);
    let again = SetAside::take(work, &spec.files).and_then(|aside| {
        state::forget(steps, aside.folder_name())?;
        lay_out(steps, spec, engine, folder, StreamedFrom::SetAside(&aside))?;
        aside.finish()
    });
    match again {
        Ok(()) => Ok(Some(passes(steps))),
        Err(error) => {
            steps.trace.push(format!(
                "texfleet: the compile left what cannot be cleared ({error}); it runs again in a new sandbox"
            ));
            // The first run's outputs go before anything can fail (xdvipdfmx would make a PDF
            // of its .xdv); the supervisor takes the log from the main document's folder.
            let _ = fs::remove_file(folder.join(PDF_FILE));
            let _ = fs::remove_file(folder.join(engine.pass_output()));
            fs::create_dir_all(folder)?;
            std::env::set_current_dir(folder)?;
            Ok(None)
        }
    }
}

/// Makes the job's files as the client sent them in the work directory (the streamed ones
/// from `streamed`), with the converted figures, and enters the main document's `folder`.
/// Returns when the sources were in: the supervisor's deadline runs from about then, once it
/// has passed every streamed byte on.
pub fn lay_out(
    steps: &mut Steps,
    spec: &JobSpec,
    engine: Engine,
    folder: &Path,
    streamed: StreamedFrom,
) -> io::Result<Instant> {
    let work = Path::new(WORK_DIR);
    files::write_sources(work, &spec.files, streamed)?;
    let sources_in = Instant::now();
    // The only folder of /tmp an engine reaches: it must exist when its layer is made.
    fs::create_dir_all(confine::TEXMF_VAR)?;
    std::env::set_current_dir(folder)?;
    if engine == Engine::Lualatex {
        engine::copy_font_names();
    }
    eps::convert_all(steps, &spec.files, work, spec.timeout_seconds);
    Ok(sources_in)
}
