//! The TeX engines, each started by a fixed argument vector: restricted shell escape (only
//! the commands of [`texfleet_sandbox::shell_escape`], through the image's `/bin/sh`, which is
//! not a shell), no Lua sockets, the recorder on (the driver reads what each pass read and
//! wrote), SyncTeX on, the job name fixed. XeTeX writes an `.xdv` on every pass and the driver makes the PDF once at the end
//! with `xdvipdfmx`: XeTeX would otherwise start `xdvipdfmx` itself through `popen`, that is
//! through a shell, and the image has none.

use super::eps::{GHOSTSCRIPT, XDVIPDFMX_COMMAND};
use crate::confine;
use crate::process::Program;
use crate::supervise::SELF;
use std::fs;
use std::path::Path;
use texfleet_sandbox::{shell_escape, JOB_NAME};

/// Confines Lua's file access and code loading (see the file, which `sandbox-image/build.sh`
/// puts into the image). LuaTeX runs it as its startup
/// script, before the format and every package; the job's first line then calls
/// `texfleet_sandbox_finish`, which removes again what LuaTeX re-installs after the startup
/// script, before a line of the document.
const LUA_SANDBOX: &str = "/usr/share/texfleet/luatex-sandbox.lua";
const XDVIPDFMX: &str = "/usr/bin/xdvipdfmx";

pub use texfleet_sandbox::Engine;

/// The programs of an engine's compile: its passes, its preamble's dump and XeTeX's last
/// step.
pub trait EnginePrograms {
    fn pass(
        self,
        main: &str,
        halt_on_error: bool,
        draft: bool,
        format: Option<&str>,
        environment: &[String],
    ) -> Program;
    fn dump(self, main: &str, environment: &[String]) -> Option<Program>;
    fn pass_output(self) -> String;
    fn finish(self, environment: &[String]) -> Option<Program>;
}

/// What a draft's first line does before the main file: graphicx, if the document loads it,
/// draws every graphic as a box with its file name.
const DRAFT: &str =
    r"\AtBeginDocument{\ifcsname ver@graphicx.sty\endcsname\setkeys{Gin}{draft}\fi}";

impl EnginePrograms for Engine {
    /// One pass over `main` (a checked file name in the current folder), with the preamble
    /// format at the absolute path `format` when there is one; in `draft`, graphics are
    /// boxes with their file names (graphicx's own draft mode, set as the document begins,
    /// over the options the document gave graphicx; a format's preamble scan would swallow
    /// the hook, so drafts load none).
    fn pass(
        self,
        main: &str,
        halt_on_error: bool,
        draft: bool,
        format: Option<&str>,
        environment: &[String],
    ) -> Program {
        let lua_sandbox = format!("--lua={LUA_SANDBOX}");
        let (path, extra): (&str, &[&str]) = match self {
            Engine::Pdflatex => ("/usr/bin/pdflatex", &[]),
            Engine::Xelatex => ("/usr/bin/xelatex", &["-no-pdf"]),
            Engine::Lualatex => ("/usr/bin/lualatex", &["--nosocket", &lua_sandbox]),
        };
        // `main` is a checked name: no character of it is special to TeX but `_`, which
        // LaTeX's \input takes in a file name.
        let draft = match draft {
            true => DRAFT,
            false => "",
        };
        let first_line = match self {
            Engine::Lualatex => {
                format!("\\directlua{{texfleet_sandbox_finish()}}{draft}\\input{{{main}}}")
            }
            _ if draft.is_empty() => main.to_string(),
            _ => format!("{draft}\\input{{{main}}}"),
        };
        let job_name = format!("-jobname={JOB_NAME}");
        let mut args = vec![
            "-interaction=nonstopmode",
            "-file-line-error",
            "-shell-restricted",
            "-recorder",
            "-synctex=1",
            &job_name,
        ];
        args.extend_from_slice(extra);
        if halt_on_error {
            args.push("-halt-on-error");
        }
        // kpathsea takes formats from TeX's trees only; this one is named by its full path.
        let format = format.map(|path| format!("-fmt={path}"));
        args.extend(format.as_deref());
        args.push(&first_line);
        // Every mktex* program is deleted: an engine starts the restricted shell and what that
        // runs, nothing else.
        let shell_escape = shell_escape::executables();
        let starts: Vec<&str> = shell_escape.iter().map(String::as_str).collect();
        Program::new(path, &args, environment)
            .starting_only(&starts)
            .writing_only(confine::ENGINE_WRITABLE)
            .recording_shell_escapes()
    }

    /// Dumps the preamble of `main` into `output.fmt` with mylatexformat, under the job's own
    /// name so that `\jobname` in the preamble means what it means in a pass. None for
    /// LuaTeX, whose formats cannot hold what luaotfload loads through Lua.
    fn dump(self, main: &str, environment: &[String]) -> Option<Program> {
        let (path, format) = match self {
            Engine::Pdflatex => ("/usr/bin/pdflatex", "&pdflatex"),
            Engine::Xelatex => ("/usr/bin/xelatex", "&xelatex"),
            Engine::Lualatex => return None,
        };
        let job_name = format!("-jobname={JOB_NAME}");
        let args = [
            "-ini",
            "-interaction=nonstopmode",
            "-halt-on-error",
            "-no-shell-escape",
            "-recorder",
            &job_name,
            format,
            "mylatexformat.ltx",
            main,
        ];
        Some(
            Program::new(path, &args, environment)
                .starting_only(&[])
                .writing_only(confine::ENGINE_WRITABLE),
        )
    }

    /// What a pass writes: the PDF, or for XeTeX the `.xdv` that [`Engine::finish`] converts.
    fn pass_output(self) -> String {
        match self {
            Engine::Xelatex => format!("{JOB_NAME}.xdv"),
            _ => format!("{JOB_NAME}.pdf"),
        }
    }

    /// The step after the last pass, if the engine needs one.
    fn finish(self, environment: &[String]) -> Option<Program> {
        let xdv = format!("{JOB_NAME}.xdv");
        let pdf = format!("{JOB_NAME}.pdf");
        (self == Engine::Xelatex).then(|| {
            Program::new(
                XDVIPDFMX,
                &["-q", "-D", XDVIPDFMX_COMMAND, "-o", &pdf, &xdv],
                environment,
            )
            // Its only command converts PostScript figures: the supervisor, which runs gs.
            .starting_only(&[SELF, GHOSTSCRIPT])
        })
    }
}

/// luaotfload looks for its font name database only where it may write (the job's cache),
/// so the one built into the image is copied there (a few kilobytes); otherwise every job
/// would rebuild it, which takes seconds. Its font caches it reads from the image directly.
pub fn copy_font_names() {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::Files;

    #[test]
    fn every_engine_runs_with_restricted_shell_escape_under_its_fixed_job_name() {
        for engine in [Engine::Pdflatex, Engine::Xelatex, Engine::Lualatex] {
            let program = engine.pass("main.tex", true, false, None, &[]);
            assert_eq!(program.may_start, Some(shell_escape::executables()));
            assert_eq!(program.files, Files::Writing(confine::ENGINE_WRITABLE));
            assert!(program.records_shell_escapes);
            for expected in [
                "-shell-restricted",
                "-jobname=output",
                "-recorder",
                "-halt-on-error",
                "-interaction=nonstopmode",
            ] {
                assert!(
                    program.args.iter().any(|a| a == expected),
                    "{engine:?}: {expected}"
                );
            }
            assert!(program.args.last().unwrap().contains("main.tex"));
            assert!(program.path.starts_with("/usr/bin/"));
        }
        let lua = Engine::Lualatex.pass("main.tex", false, false, None, &[]);
        assert!(lua.args.iter().any(|a| a == "--nosocket"));
        assert!(lua
            .args
            .iter()
            .any(|a| a == &format!("--lua={LUA_SANDBOX}")));
        assert_eq!(
            lua.args.last().unwrap(),
            "\\directlua{texfleet_sandbox_finish()}\\input{main.tex}"
        );
        assert!(!lua.args.iter().any(|a| a == "-halt-on-error"));
        let xe = Engine::Xelatex.pass("main.tex", false, false, None, &[]);
        assert!(xe.args.iter().any(|a| a == "-no-pdf"));
        let finish = Engine::Xelatex.finish(&[]).unwrap();
        assert_eq!(finish.path, XDVIPDFMX);
        assert!(finish
            .args
            .windows(2)
            .any(|w| w == ["-D", XDVIPDFMX_COMMAND]));
        assert!(Engine::Pdflatex.finish(&[]).is_none());
        let with_format =
            Engine::Pdflatex.pass("main.tex", false, false, Some("/work/output.fmt"), &[]);
        assert!(with_format
            .args
            .iter()
            .any(|a| a == "-fmt=/work/output.fmt"));
        for engine in [Engine::Pdflatex, Engine::Lualatex] {
            let draft = engine.pass("main.tex", false, true, None, &[]);
            let first_line = draft.args.last().unwrap();
            assert!(
                first_line.contains(DRAFT) && first_line.ends_with("\\input{main.tex}"),
                "{first_line}"
            );
        }
        let dump = Engine::Pdflatex.dump("main.tex", &[]).unwrap();
        assert!(dump
            .args
            .windows(3)
            .any(|w| w == ["&pdflatex", "mylatexformat.ltx", "main.tex"]));
        assert!(dump.args.iter().any(|a| a == "-no-shell-escape"));
        assert_eq!(dump.files, Files::Writing(confine::ENGINE_WRITABLE));
        assert!(!dump.records_shell_escapes);
        assert!(Engine::Lualatex.dump("main.tex", &[]).is_none());
    }
}
