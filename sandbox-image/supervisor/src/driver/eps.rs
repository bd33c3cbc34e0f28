//! EPS figures without shell escape: before the first pass, every uploaded `.eps` becomes the
//! PDF that graphicx and epstopdf look for, `<name>-eps-converted-to.pdf`, made by Ghostscript
//! under `-dSAFER` (no file access beyond its input and output, no `%pipe%`), started by
//! argument vector as the compile's user, under the same uid, Landlock rules, limits and
//! deadline as every other program of the compile. The metadata Ghostscript would date is
//! left out, so the figure is the same bytes every time.

use super::names::{is_safe_name, is_safe_path};
use super::steps::Steps;
use crate::process::{self, Program};
use nix::sys::resource::Resource;
use std::fs;
use std::io;
use std::path::Path;
use texfleet_sandbox::{FileSpec, WORK_DIR};

pub const GHOSTSCRIPT: &str = "/usr/bin/gs";
/// Ghostscript's own caps, well inside the compile's: a looping or ballooning figure fails
/// its conversion and the compile goes on without it.
const MEMORY_BYTES: u64 = 512 * 1024 * 1024;
/// CPU seconds of one conversion for xdvipdfmx, which does not know the compile's timeout.
const XDVIPDFMX_CPU_SECONDS: u64 = 30;

/// The mode in which the supervisor's binary converts one figure for xdvipdfmx.
pub const CONVERT_ARG: &str = "convert-eps";
/// xdvipdfmx's conversion command (its `-D`), which it splits on spaces after putting in the
/// file names, and starts without a shell. Debian's own runs `rungs` with the names in
/// quotes, which a name holding a quote escapes from: `fig.eps' --permit-file-read=* ...`
/// would lift Ghostscript's SAFER. Here a name that adds or splits an argument, or is not a
/// plain name, is refused by [`convert_for_xdvipdfmx`].
pub const XDVIPDFMX_COMMAND: &str = "/usr/local/bin/texfleet-supervisor convert-eps %o %i";

/// Converts each `.eps` among `files` (paths relative to the work directory, which is
/// `work`), each with a quarter of the compile's timeout in CPU time; records each run or
/// skip in the trace.
pub fn convert_all(steps: &mut Steps, files: &[FileSpec], work: &Path, timeout_seconds: u32) {
    let cpu_seconds = u64::from(timeout_seconds / 4).max(1);
    for file in files.iter().filter(|f| is_eps(&f.path)) {
        if !is_safe_path(&file.path) {
            steps.skip(format!("converting {:?}: not a safe name", file.path));
            continue;
        }
        if !Path::new(GHOSTSCRIPT).exists() {
            steps.skip("EPS conversion: Ghostscript is not installed".to_string());
            return;
        }
        let input = work.join(&file.path);
        // graphicx asks for `<name>-eps-converted-to.pdf` whatever the case of `.eps`.
        let stem = &file.path[..file.path.len() - ".eps".len()];
        let output = work.join(format!("{stem}-eps-converted-to.pdf"));
        let program = eps_to_pdf(&input, &output, &steps.environment);
        if !steps
            .run_limited(&program, &limits(cpu_seconds))
            .is_some_and(|exit| exit.success())
        {
            // A half-written PDF would fail the engine; without one, graphicx reports the
            // missing figure and the compile goes on.
            let _ = std::fs::remove_file(&output);
        }
    }
}

/// An EPS figure by its name: `.eps` in any case (`FIG.EPS` from other systems).
fn is_eps(path: &str) -> bool {
    let bytes = path.as_bytes();
    bytes.len() > 4 && bytes[bytes.len() - 4..].eq_ignore_ascii_case(b".eps")
}

/// Ghostscript, converting `input` into the PDF `output`.
fn eps_to_pdf(input: &Path, output: &Path, environment: &[String]) -> Program {
    let output_option = format!("-sOutputFile={}", output.display());
    ghostscript(
        &[
            "-dEPSCrop",
            "-sDEVICE=pdfwrite",
            "-dAutoRotatePages=/None",
            "-dOmitInfoDate",
            "-dOmitID",
            "-dOmitXMP",
            &output_option,
            &input.to_string_lossy(),
        ],
        environment,
    )
}

/// Ghostscript with `args` under `-dSAFER` (files beyond its arguments and the fonts are
/// refused, and so are `%pipe%` devices), quiet and in batch mode; it starts nothing. SAFER
/// lets it read and write its temporary folder: it gets one of its own, made empty for each
/// run, not the driver's `/tmp`.
pub fn ghostscript(args: &[&str], environment: &[String]) -> Program {
    let mut all = vec!["-q", "-dSAFER", "-P-", "-dBATCH", "-dNOPAUSE"];
    all.extend_from_slice(args);
    let _ = fs::remove_dir_all(GHOSTSCRIPT_TEMPORARY);
    let _ = fs::create_dir(GHOSTSCRIPT_TEMPORARY);
    let mut environment: Vec<String> = environment
        .iter()
        .filter(|variable| !variable.starts_with("TMPDIR=") && !variable.starts_with("TEMP="))
        .cloned()
        .collect();
    environment.push(format!("TMPDIR={GHOSTSCRIPT_TEMPORARY}"));
    Program::new(GHOSTSCRIPT, &all, &environment).starting_only(&[])
}

/// Ghostscript's temporary folder.
const GHOSTSCRIPT_TEMPORARY: &str = "/tmp/texfleet-ghostscript";

pub fn limits(cpu_seconds: u64) -> [(Resource, u64); 2] {
    [
        (Resource::RLIMIT_CPU, cpu_seconds),
        (Resource::RLIMIT_AS, MEMORY_BYTES),
    ]
}

/// `texfleet-supervisor convert-eps OUTPUT INPUT`, as xdvipdfmx starts it for a PostScript
/// figure (see [`XDVIPDFMX_COMMAND`]): exactly two arguments, the output xdvipdfmx's own
/// temporary file (`/tmp/<name>`), the input a plain path in the work directory.
pub fn convert_for_xdvipdfmx() -> io::Result<()> {
    let args: Vec<String> = std::env::args().skip(2).collect();
    let [output, input] = args.as_slice() else {
        return Err(io::Error::other(format!(
            "refused a conversion of {args:?}"
        )));
    };
    let (output, input) = checked_conversion(output, input)
        .ok_or_else(|| io::Error::other(format!("refused a conversion of {args:?}")))?;
    let environment = process::inherited_environment();
    let program = eps_to_pdf(Path::new(&input), Path::new(&output), &environment);
    match process::run(&program, None, &limits(XDVIPDFMX_CPU_SECONDS))? {
        exit if exit.success() => Ok(()),
        exit => Err(io::Error::other(format!("ghostscript ended with {exit:?}"))),
    }
}

/// The output and input of a conversion, when both are names we would write and read.
fn checked_conversion(output: &str, input: &str) -> Option<(String, String)> {
    let output_name = output.strip_prefix("/tmp/")?;
    let relative = input
        .strip_prefix(&format!("{WORK_DIR}/"))
        .or_else(|| input.strip_prefix("./"))
        .unwrap_or(input);
    (is_safe_name(output_name) && is_safe_path(relative))
        .then(|| (output.to_string(), input.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eps_figures_are_found_in_any_case() {
        assert!(is_eps("figs/a.eps") && is_eps("FIG.EPS") && is_eps("b.Eps"));
        assert!(!is_eps(".eps") && !is_eps("a.ps") && !is_eps("a.epsx") && !is_eps("é.pdf"));
    }

    #[test]
    fn only_plain_names_are_converted() {
        assert!(checked_conversion("/tmp/dvipdfmx.Ab12Cd", "./fig.eps").is_some());
        assert!(checked_conversion("/tmp/dvipdfmx.Ab12Cd", "/work/figs/a.eps").is_some());
        for (output, input) in [
            ("/tmp/x", "/etc/passwd"),
            ("/tmp/x", "fig.eps'"),
            ("/tmp/x", "--permit-file-read=*"),
            ("/tmp/x", "@args.txt"),
            ("/tmp/x", "./../x.eps"),
            ("/work/x", "fig.eps"),
            ("/tmp/a/b", "fig.eps"),
        ] {
            assert!(
                checked_conversion(output, input).is_none(),
                "{output} {input}"
            );
        }
    }
}
