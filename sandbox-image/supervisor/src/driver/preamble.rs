//! The preamble format cache, inside the sandbox: dumping a document's preamble into a format
//! after a compile ([`dump`]), and installing a format the scheduler brings back for a later
//! compile of the same project's document ([`install`]).
//!
//! A format is kept only when it is the preamble and nothing else: the dump ended well, wrote
//! no file but the format, its log and the PDF, and read nothing outside TeX's own trees but the job's
//! own source files. The scheduler keys it by those files' contents; a preamble that read a
//! file the compile wrote (an `.aux`, a `.bbl`) would depend on the compile, so it is refused.
//! The dump runs after the passes, with their generated files present, so that such a read is
//! seen rather than missed. Then one pass runs with the new format, and its PDF must render
//! the same pages as the compile's ([`same_pages`]), or the format is not kept. Some preambles
//! set up state that a format does not carry (babel's Hebrew turns on TeX--XeT's right-to-left
//! typesetting, which a format leaves off): this is what keeps a hit the same document as a
//! compile without the cache. (The bytes need not match: a format's colour stack starts with
//! one operator fewer, and fonts the preamble loaded have other numbers. So when the format
//! is kept, the PDF of its pass is the compile's: byte for byte what a later compile that
//! loads it writes.)

use super::dump_reads::{judge, refused};
use super::engine::{Engine, EnginePrograms as _};
use super::eps;
use super::files;
use super::finish;
use super::opened;
use super::read_back;
use super::recorder::RECORDER_FILE;
use super::steps::Steps;
use crate::process::Exit;
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use std::fs;
use std::io::Read;
use std::path::Path;
use texfleet_sandbox::{
    preamble_end, Dump, FileSpec, BEGIN_DOCUMENT, FORMAT_FILE, LOG_FILE, MAX_FORMAT_BYTES,
    PDF_FILE, SYNCTEX_FILE, WORK_DIR,
};

/// Where [`same_pages`] renders the two PDFs.
const RENDERED: [&str; 2] = ["/tmp/texfleet-pages-1.pgm", "/tmp/texfleet-pages-2.pgm"];
const RENDER_CPU_SECONDS: u64 = 20;

/// The compile's results, kept aside while the dump and its check run under the same job name.
const KEPT: [&str; 5] = [
    PDF_FILE,
    LOG_FILE,
    SYNCTEX_FILE,
    RECORDER_FILE,
    "output.xdv",
];

/// Dumps the preamble of `main` (in the current folder, `folder` below the work directory)
/// and checks it: returns the format's bytes, or says why it cannot be kept (with no bytes;
/// the caller says it in the trace, knowing whether it ran out of time), or, as an error, why
/// there is no verdict: what the dump opens cannot be followed (inotify's instances, 128 per
/// user, can all be taken on a busy host), which is not the preamble's doing.
/// `files` are the job's sources as sent, by path relative to the work directory.
pub fn dump(
    steps: &mut Steps,
    engine: Engine,
    main: &str,
    folder: &Path,
    files: &[FileSpec],
    halt_on_error: bool,
) -> Result<(Dump, Vec<u8>), String> {
    let Some(program) = engine.dump(main, &steps.environment) else {
        return Ok((
            refused("LuaTeX formats cannot hold fonts loaded through Lua"),
            Vec::new(),
        ));
    };
    // The scheduler keys the format by the sources as sent: a dump must read those (a body
    // that rewrites main.tex with `\openout` would put code no source holds into the format).
    if let Some(rewritten) = read_back::first_rewritten(Path::new(WORK_DIR), files) {
        let judged = refused(&format!("the compile rewrote {rewritten}"));
        return Ok((judged, Vec::new()));
    }
    let sources: Vec<String> = files.iter().map(|file| file.path.clone()).collect();
    let main_path = folder.join(main);
    let Some(sent) = files
        .iter()
        .find(|file| Path::new(&file.path) == main_path && file.streamed.is_none())
        .and_then(|file| BASE64.decode(&file.content_base64).ok())
    else {
        return Ok((
            refused("the main file is not among the sources sent in the spec"),
            Vec::new(),
        ));
    };
    // The dump reads the main file cut where the scheduler's key ends, so the format holds
    // nothing the key leaves out, however the preamble reads on (a preamble can take the
    // body in a delimited macro argument, and the format would print it in the next document).
    let mut cut = sent[..preamble_end(&sent)].to_vec();
    cut.extend_from_slice(BEGIN_DOCUMENT);
    cut.push(b'\n');
    if let Err(error) = files::replace(Path::new(main), &cut) {
        return Ok((
            refused(&format!("the main file cannot be cut: {error}")),
            Vec::new(),
        ));
    }
    let aside = |name: &str| format!(".texfleet-kept-{name}");
    for name in KEPT {
        let _ = fs::rename(name, aside(name));
    }
    let judged = match opened::Watch::start(Path::new(WORK_DIR)) {
        Ok(watch) => {
            let exit = steps.run(&program);
            steps.note_shell_escapes();
            Ok(judge(exit, folder, &sources, watch.opened()))
        }
        Err(error) => Err(format!("what it opens cannot be followed: {error}")),
    };
    // The check pass compiles the whole document again.
    let checked = files::replace(Path::new(main), &sent)
        .map_err(|error| format!("the main file cannot be put back: {error}"))
        .and_then(|()| match &judged {
            Ok(Dump::Built { .. }) => {
                check(steps, engine, main, folder, halt_on_error, &aside(PDF_FILE))
            }
            Ok(Dump::Refused { why }) | Err(why) => Err(why.clone()),
        });
    // A kept format's pass gives the PDF: the same pages as the compile's, and the same bytes
    // as every later compile that loads the format, so that the same request gives the same
    // PDF whether or not the format was there yet.
    let from_the_pass = |name: &str| checked.is_ok() && name == PDF_FILE;
    for name in KEPT {
        if from_the_pass(name) {
            let _ = fs::remove_file(aside(name));
        } else {
            let _ = fs::remove_file(name);
            let _ = fs::rename(aside(name), name);
        }
    }
    let _ = fs::remove_file(FORMAT_FILE);
    let judged = judged?;
    Ok(match checked {
        Ok(dumped) => (judged, dumped),
        Err(why) => (Dump::Refused { why }, Vec::new()),
    })
}

/// Checks the format a dump wrote in `folder`: returns its bytes, read before the check pass
/// runs the document again (which may write the format's file), if a pass that loads it ends
/// well and renders the same pages as the compile's PDF, set aside at `compiled`.
fn check(
    steps: &mut Steps,
    engine: Engine,
    main: &str,
    folder: &Path,
    halt_on_error: bool,
    compiled: &str,
) -> Result<Vec<u8>, String> {
    let mut dumped = Vec::new();
    read_back::open_regular(Path::new(FORMAT_FILE))
        .and_then(|file| file.take(MAX_FORMAT_BYTES + 1).read_to_end(&mut dumped))
        .map_err(|_| "the dump's format cannot be read".to_string())?;
    if dumped.len() as u64 > MAX_FORMAT_BYTES {
        return Err(format!(
            "the format is larger than {MAX_FORMAT_BYTES} bytes"
        ));
    }
    let format = Path::new(WORK_DIR).join(folder).join(FORMAT_FILE);
    // The pass checks the file: it must be what is kept.
    if !holds(&format, &dumped) {
        return Err("the format changed after the dump".into());
    }
    // Drafts keep no format: this compile is not one.
    let pass = engine.pass(
        main,
        halt_on_error,
        false,
        format.to_str(),
        &steps.environment,
    );
    let _ = fs::remove_file(engine.pass_output());
    let _ = fs::remove_file(PDF_FILE);
    // The compile ended well, so must the pass (a preamble on the line of `\begin{document}`
    // is read again after the format and fails). Its PDF may become the compile's: it is made
    // as the compile's is.
    let ran = steps.run(&pass);
    // Before xdvipdfmx, which could read the record into the PDF.
    steps.note_shell_escapes();
    if !ran.is_some_and(Exit::success) {
        return Err("a pass with the format fails".into());
    }
    if !finish::finish(steps, engine) {
        return Err("a pass with the format cannot be finished".into());
    }
    if !same_pages(steps, Path::new(PDF_FILE), Path::new(compiled)) {
        return Err("a pass with the format renders other pages than the compile".into());
    }
    Ok(dumped)
}

/// Whether two PDFs are the same bytes or, failing that, render the same pages in grey at
/// 36 dpi with Ghostscript (under `-dSAFER`, with the caps of a figure's conversion).
fn same_pages(steps: &mut Steps, one: &Path, other: &Path) -> bool {
    let (Ok(one_bytes), Ok(other_bytes)) = (fs::read(one), fs::read(other)) else {
        return false;
    };
    if one_bytes == other_bytes {
        return true;
    }
    let mut rendered = Vec::new();
    for (pdf, pages) in [(one, RENDERED[0]), (other, RENDERED[1])] {
        let output = format!("-sOutputFile={pages}");
        let program = eps::ghostscript(
            &["-sDEVICE=pgmraw", "-r36", &output, &pdf.to_string_lossy()],
            &steps.environment,
        );
        let _ = fs::remove_file(pages);
        let ended = steps.run_limited(&program, &eps::limits(RENDER_CPU_SECONDS));
        rendered.push(
            ended
                .is_some_and(Exit::success)
                .then(|| fs::read(pages).ok())
                .flatten(),
        );
    }
    rendered[0].is_some() && rendered[0] == rendered[1]
}

/// Writes the scheduler's format into the current folder as [`FORMAT_FILE`] and returns its
/// full path for `-fmt`, or None (with the reason in the trace) when it cannot be written: a
/// source of that name is the document's, not ours.
pub fn install(steps: &mut Steps, format: &[u8], folder: &Path) -> Option<String> {
    match files::write_new(Path::new(FORMAT_FILE), format) {
        Ok(()) => Some(
            Path::new(WORK_DIR)
                .join(folder)
                .join(FORMAT_FILE)
                .to_string_lossy()
                .into_owned(),
        ),
        Err(error) => {
            steps.skip(format!("the project's preamble format: {error}"));
            None
        }
    }
}

/// Whether the file at `path` holds exactly `content`. A pass may write any file in its folder,
/// the format's name included: the next pass must load the format, not what the document wrote.
pub fn holds(path: &Path, content: &[u8]) -> bool {
    let Ok(mut file) = read_back::open_regular(path) else {
        return false;
    };
    let mut rest = content;
    let mut buffer = vec![0; 1 << 16];
    loop {
        match file.read(&mut buffer) {
            Ok(0) => return rest.is_empty(),
            Ok(n) if n <= rest.len() && buffer[..n] == rest[..n] => rest = &rest[n..],
            _ => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_format_is_held_only_by_a_file_of_exactly_its_bytes() {
        let scratch = tempfile::tempdir().unwrap();
        let folder = scratch.path();
        let (format, link, fifo) = (folder.join("f"), folder.join("l"), folder.join("p"));
        let content = vec![7u8; 200_000];
        fs::write(&format, &content).unwrap();
        std::os::unix::fs::symlink(&format, &link).unwrap();
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert!(holds(&format, &content));
        assert!(!holds(&format, &content[1..]));
        assert!(!holds(&format, &[content.as_slice(), b"x"].concat()));
        let mut changed = content.clone();
        changed[150_000] = 8;
        assert!(!holds(&format, &changed));
        assert!(!holds(&link, &content), "a link is not the format");
        assert!(
            !holds(&fifo, b""),
            "a FIFO is not the format, and does not block"
        );
    }
}
