//! TeX's restricted shell escape without a shell. The engines run with `shell_escape = p` and
//! `shell_escape_commands` set to [`PROGRAMS`]' names (`texmf-hardening.cnf`); kpathsea
//! refuses any other command itself and hands an allowed one to `/bin/sh -c`. The image's
//! `/bin/sh` is not a shell but `texfleet-sh` (sandbox-image/shell), which reads the command
//! back ([`command::split`]), allows it only when [`check`] finds the program on our list and
//! its arguments of the shapes the packages that call it write, and then executes the program
//! by its fixed path and argument vector, under the compile's Landlock, seccomp and limits and
//! a Landlock layer of its own ([`Allowed::may_start`]).
//!
//! The list, a subset of TeX Live's default (SECURITY.md says why each is in or out):
//! - `latexminted`: minted's highlighter (Python, Pygments), `SUB --timestamp TS MD5` only;
//! - `kpsewhich`: file lookups and a few settings, nothing that reads the environment at large
//!   or makes files;
//! - `l3sys-query`: LaTeX's `pwd` and `ls` of the work directory.

pub mod command;

/// Where the image has the restricted shell.
pub const SHELL: &str = "/usr/bin/sh";
/// The prefixes of the lines the shell writes about each command: run, or refused.
pub const RAN: &str = "texfleet-sh: ran";
pub const REFUSAL: &str = "texfleet-sh: refused";
/// Where the driver keeps those lines (a refusal goes to stderr too, which TeX sends nowhere
/// the driver reads); it copies them into the job's log after each pass. TeX's own
/// `runsystem` lines are not copied: the document can write such lines into its log. The
/// engine may not reach the file's folder (`confine::ENGINE_WRITABLE`), so the driver opens it
/// for each pass at [`RECORD_FD`], where the shell, which the engine starts, appends.
pub const RECORD_FILE: &str = "/tmp/texfleet-shell-escape";
pub const RECORD_FD: i32 = 3;

const PYTHON: &str = "/usr/bin/python3";
const KPSEWHICH: &str = "/usr/bin/kpsewhich";
const TEXLUA: &str = "/usr/bin/texlua";
const LATEXMINTED: &str = "/usr/share/texlive/texmf-dist/scripts/minted/latexminted.py";
const L3SYS_QUERY: &str = "/usr/share/texlive/texmf-dist/scripts/l3sys-query/l3sys-query.lua";

/// A program TeX may run through the restricted shell escape.
pub struct Program {
    pub name: &'static str,
    /// What runs: an executable, or an interpreter (with its options) and its script.
    executable: &'static str,
    script: Option<(&'static [&'static str], &'static str)>,
    /// What the program itself starts (latexminted asks kpsewhich for TeX's settings).
    starts: &'static [&'static str],
    arguments: fn(&[String]) -> Result<(), String>,
}

pub const PROGRAMS: &[Program] = &[
    Program {
        name: "latexminted",
        executable: PYTHON,
        // Isolated: no PYTHON* variable, no user site, not even the script's folder on the path.
        script: Some((&["-I"], LATEXMINTED)),
        starts: &[KPSEWHICH],
        arguments: latexminted_arguments,
    },
    Program {
        name: "kpsewhich",
        executable: KPSEWHICH,
        script: None,
        starts: &[],
        arguments: kpsewhich_arguments,
    },
    Program {
        name: "l3sys-query",
        executable: TEXLUA,
        script: Some((&[], L3SYS_QUERY)),
        starts: &[],
        arguments: l3sys_query_arguments,
    },
];

/// Every executable the engines may start for the shell escape: the shell, and what it runs.
pub fn executables() -> Vec<String> {
    let mut all = vec![SHELL.to_string()];
    for program in PROGRAMS {
        for path in std::iter::once(program.executable).chain(program.starts.iter().copied()) {
            if !all.iter().any(|known| known == path) {
                all.push(path.to_string());
            }
        }
    }
    all
}

/// The value of `shell_escape_commands` that goes with [`PROGRAMS`].
pub fn commands_setting() -> String {
    PROGRAMS
        .iter()
        .map(|program| program.name)
        .collect::<Vec<_>>()
        .join(",")
}

/// A command that may run: what to execute, with which argument vector, and what it may start.
#[derive(Debug, PartialEq, Eq)]
pub struct Allowed {
    pub path: String,
    pub argv: Vec<String>,
    pub may_start: Vec<String>,
}

/// Whether the command line `line` may run, and how.
pub fn check(line: &[u8]) -> Result<Allowed, String> {
    let (name, arguments) = command::split(line).map_err(|why| why.to_string())?;
    let program = PROGRAMS
        .iter()
        .find(|program| program.name.as_bytes() == name.as_slice())
        .ok_or_else(|| {
            format!(
                "{} is not a program of the shell escape",
                String::from_utf8_lossy(&name)
            )
        })?;
    let arguments = arguments
        .into_iter()
        .map(|argument| {
            String::from_utf8(argument).map_err(|_| "an argument that is not UTF-8".to_string())
        })
        .collect::<Result<Vec<_>, _>>()?;
    (program.arguments)(&arguments).map_err(|why| format!("{}: {why}", program.name))?;
    // An interpreter is named as itself: texlua finds its own folder by its name.
    let head: Vec<&str> = match program.script {
        Some((options, script)) => {
            let interpreter = program.executable.rsplit('/').next().unwrap_or("");
            std::iter::once(interpreter)
                .chain(options.iter().copied())
                .chain([script])
                .collect()
        }
        None => vec![program.name],
    };
    let argv = head
        .into_iter()
        .map(str::to_string)
        .chain(arguments)
        .collect();
    Ok(Allowed {
        path: program.executable.to_string(),
        argv,
        may_start: program.starts.iter().map(|path| path.to_string()).collect(),
    })
}

/// minted writes `latexminted SUB --timestamp TS [--debug] MD5`: a subcommand, the PDF's date
/// (12 or 14 digits and maybe a `Z`) and the MD5 of the job name; the real input is the data
/// file TeX wrote.
fn latexminted_arguments(arguments: &[String]) -> Result<(), String> {
    const SUBCOMMANDS: &[&str] = &[
        "batch",
        "config",
        "styledef",
        "highlight",
        "clean",
        "cleanconfig",
        "cleantemp",
    ];
    let timestamp = |text: &str| {
        let digits = text.strip_suffix('Z').unwrap_or(text);
        matches!(digits.len(), 12 | 14) && digits.bytes().all(|b| b.is_ascii_digit())
    };
    let md5 = |text: &str| {
        text.len() == 32
            && text
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'A'..=b'F').contains(&b))
    };
    let words: Vec<&str> = arguments.iter().map(String::as_str).collect();
    let fits = match words.as_slice() {
        [sub, "--timestamp", ts, hash] => SUBCOMMANDS.contains(sub) && timestamp(ts) && md5(hash),
        [sub, "--timestamp", ts, "--debug", hash] => {
            SUBCOMMANDS.contains(sub) && timestamp(ts) && md5(hash)
        }
        _ => false,
    };
    fits.then_some(())
        .ok_or_else(|| "only SUBCOMMAND --timestamp TIMESTAMP [--debug] MD5".into())
}

/// kpsewhich finds files in TeX's trees. Allowed: file names (relative, no `..`), the format,
/// program or engine they are searched for, `-all`, and the values of a few settings packages
/// ask for. Not allowed: `-var-value` of anything else (kpathsea answers from the environment
/// first), `-expand-*`, `-path`, `-cnf-line`, `-mktex*`, `-interactive`, and the rest.
fn kpsewhich_arguments(arguments: &[String]) -> Result<(), String> {
    const SETTINGS: &[&str] = &[
        "TEXMFHOME",
        "TEXMFOUTPUT",
        "TEXMF_OUTPUT_DIRECTORY",
        "openin_any",
        "openout_any",
        "shell_escape",
        "shell_escape_commands",
    ];
    for argument in arguments {
        // kpathsea expands $VARIABLES, {braces} and !! in names: $SELFAUTOPARENT is /.
        if argument.contains(['$', '{', '}', '!']) {
            return Err(format!("{argument:?} asks kpathsea to expand it"));
        }
        let option = argument.trim_start_matches('-');
        if option.len() == argument.len() {
            if !is_plain_relative(argument) {
                return Err(format!("{argument:?} is not a file name in the job"));
            }
            continue;
        }
        let (key, value) = option.split_once('=').unwrap_or((option, ""));
        let allowed = match key {
            "all" => !option.contains('='),
            "progname" | "format" | "engine" => is_plain_word(value),
            "var-value" => SETTINGS.contains(&value),
            _ => false,
        };
        if !allowed {
            return Err(format!("the option {argument:?} is not allowed"));
        }
    }
    Ok(())
}

/// l3sys-query answers `pwd`, and `ls` of the work directory with its own options and one
/// pattern (it refuses `..` and absolute patterns itself; so does this).
fn l3sys_query_arguments(arguments: &[String]) -> Result<(), String> {
    const LS_OPTIONS: &[&str] = &[
        "--recursive",
        "-r",
        "--reverse",
        "--ignore-case",
        "-i",
        "--pattern",
        "-p",
        "--type=d",
        "--type=f",
        "--sort=name",
        "--sort=date",
    ];
    match arguments.split_first() {
        Some((query, rest)) if query == "pwd" && rest.is_empty() => Ok(()),
        Some((query, rest)) if query == "ls" => {
            let mut patterns = 0;
            for argument in rest {
                if argument.starts_with('-') {
                    let known = LS_OPTIONS.contains(&argument.as_str())
                        || argument
                            .strip_prefix("--exclude=")
                            .is_some_and(is_plain_relative);
                    if !known {
                        return Err(format!("the option {argument:?} is not allowed"));
                    }
                } else if is_plain_relative(argument) {
                    patterns += 1;
                } else {
                    return Err(format!("{argument:?} is not a pattern in the job"));
                }
            }
            (patterns <= 1)
                .then_some(())
                .ok_or_else(|| "more than one pattern".into())
        }
        _ => Err("only pwd, or ls".into()),
    }
}

/// A path inside the current folder: not empty, not absolute, no `..`, no backslash, no
/// control character, and no leading `-` (which a program would read as an option).
fn is_plain_relative(path: &str) -> bool {
    !path.is_empty()
        && !path.starts_with('/')
        && !path.starts_with('-')
        && !path.starts_with('~')
        && !path.contains('\\')
        && !path.chars().any(char::is_control)
        && path.split('/').all(|part| part != "..")
}

/// A name such as `tex`, `othertext`, `other text files` or `pdftex`.
fn is_plain_word(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= 64
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, ' ' | '-' | '_' | '.'))
}

#[cfg(test)]
mod tests;
