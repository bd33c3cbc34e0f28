//! EPS figures without shell escape: before the first pass, every uploaded `.eps` becomes the
//! PDF that graphicx and epstopdf look for, `<name>-eps-converted-to.pdf`, made by Ghostscript
//! under `-dSAFER` (no file access beyond its input and output, no `%pipe%`), started by
//! argument vector as the compile's user, under the same uid, Landlock rules, limits and
//! deadline as every other program of the compile. The metadata Ghostscript would date is
//! left out, so the figure is the same bytes every time.

use super::names::is_safe_path;
use super::tools::Tools;
use crate::process::Program;
use nix::sys::resource::Resource;
use std::path::Path;
use texfleet_sandbox::FileSpec;

const GHOSTSCRIPT: &str = "/usr/bin/gs";
/// Ghostscript's own caps, well inside the compile's: a looping or ballooning figure fails
/// its conversion and the compile goes on without it.
const MEMORY_BYTES: u64 = 512 * 1024 * 1024;

/// Converts each `.eps` among `files` (paths relative to the work directory, which is
/// `work`), each with a quarter of the compile's timeout in CPU time; records each run or
/// skip in the trace.
pub fn convert_all(tools: &mut Tools, files: &[FileSpec], work: &Path, timeout_seconds: u32) {
    let cpu_seconds = u64::from(timeout_seconds / 4).max(1);
    for file in files.iter().filter(|f| f.path.ends_with(".eps")) {
        if !is_safe_path(&file.path) {
            tools.skip(format!("converting {:?}: not a safe name", file.path));
            continue;
        }
        if !Path::new(GHOSTSCRIPT).exists() {
            tools.skip("EPS conversion: Ghostscript is not installed".to_string());
            return;
        }
        let input = work.join(&file.path);
        let stem = file.path.trim_end_matches(".eps");
        let output = work.join(format!("{stem}-eps-converted-to.pdf"));
        let output_option = format!("-sOutputFile={}", output.display());
        let program = Program::new(
            GHOSTSCRIPT,
            &[
                "-q",
                "-dSAFER",
                "-dBATCH",
                "-dNOPAUSE",
                "-dEPSCrop",
                "-sDEVICE=pdfwrite",
                "-dAutoRotatePages=/None",
                "-dOmitInfoDate",
                "-dOmitID",
                "-dOmitXMP",
                &output_option,
                &input.to_string_lossy(),
            ],
            &tools.environment,
        );
        let limits = [
            (Resource::RLIMIT_CPU, cpu_seconds),
            (Resource::RLIMIT_AS, MEMORY_BYTES),
        ];
        if !tools
            .run_limited(&program, &limits)
            .is_some_and(|exit| exit.success())
        {
            // A half-written PDF would fail the engine; without one, graphicx reports the
            // missing figure and the compile goes on.
            let _ = std::fs::remove_file(&output);
        }
    }
}
