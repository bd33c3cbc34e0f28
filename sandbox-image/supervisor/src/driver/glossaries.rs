//! What `makeglossaries` does, from the aux file: for each glossary the document declares
//! (`\@newglossary{name}{log}{out}{in}`), makeindex with the style glossaries wrote
//! (`\@istfilename`).
//!
//! Not xindy (the package's `xindy` option, an `.xdy` style): xindy's styles are Lisp that
//! the document writes, and clisp's foreign function interface and `ext:execute` turn them
//! into native code and commands. A per-program Landlock layer cannot stop that (the dynamic
//! loader runs any readable binary), so the driver does not hand a document an interpreter.

use super::indexes::makeindex;
use super::names::is_safe_name;
use super::steps::Steps;
use std::fs;
use std::path::Path;
use texfleet_sandbox::JOB_NAME;

/// Runs makeindex for every glossary whose input changed; true when an output
/// changed.
pub fn run(steps: &mut Steps) -> bool {
    let Ok(aux) = fs::read(Path::new(JOB_NAME).with_extension("aux")) else {
        return false;
    };
    let aux = String::from_utf8_lossy(&aux);
    let Some(style) = argument(&aux, "\\@istfilename") else {
        return false;
    };
    if style.ends_with(".xdy") {
        steps.skip(
            "xindy for glossaries: xindy's styles are Lisp programs the document writes; \
             use makeindex (glossaries' default)"
                .to_string(),
        );
        return false;
    }
    if !is_safe_name(style) {
        steps.skip(format!(
            "glossaries: the style {style:?} is not a safe name"
        ));
        return false;
    }
    let letter_order = argument(&aux, "\\@glsorder") == Some("letter");
    let mut changed = false;
    for line in aux.lines().filter(|l| l.starts_with("\\@newglossary{")) {
        let fields: Vec<&str> = line
            .trim_start_matches("\\@newglossary")
            .split(['{', '}'])
            .filter(|f| !f.is_empty())
            .collect();
        let [_, log, out, input] = fields[..] else {
            continue;
        };
        if ![log, out, input].iter().all(|e| is_extension(e)) {
            steps.skip(format!("the glossary {line:?}: not safe extensions"));
            continue;
        }
        let mut args = vec!["-s".to_string(), style.to_string()];
        if letter_order {
            args.push("-l".into());
        }
        args.extend([
            "-t".to_string(),
            format!("{JOB_NAME}.{log}"),
            "-o".to_string(),
            format!("{JOB_NAME}.{out}"),
            format!("{JOB_NAME}.{input}"),
        ]);
        let input = Path::new(JOB_NAME).with_extension(input);
        changed |= makeindex(steps, &args, &input, &input.with_extension(out), log);
    }
    changed
}

/// The first argument of `command` in `text`: `\@istfilename{output.ist}` gives `output.ist`.
fn argument<'a>(text: &'a str, command: &str) -> Option<&'a str> {
    let start = text.find(&format!("{command}{{"))? + command.len() + 1;
    let rest = &text[start..];
    Some(&rest[..rest.find('}')?])
}

/// Extensions of files the driver, the engine or the scheduler rely on: a glossary whose
/// makeindex output or transcript went there would overwrite the PDF, the log or what the
/// next pass reads.
const RESERVED_EXTENSIONS: &[&str] = &[
    "pdf", "log", "xdv", "fls", "synctex", "gz", "aux", "bcf", "bbl", "tex",
];

/// A glossary's file extension: letters, digits and inner hyphens (glossaries-extra's
/// abbreviations use `glo-abr`, `gls-abr`, `glg-abr`), never one of the reserved.
fn is_extension(extension: &str) -> bool {
    (1..=10).contains(&extension.len())
        && extension
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        && extension
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric())
        && !RESERVED_EXTENSIONS.contains(&extension.to_ascii_lowercase().as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aux_arguments_and_extensions() {
        let aux = "\\relax\n\\@newglossary{main}{glg}{gls}{glo}\n\\@istfilename{output.ist}\n";
        assert_eq!(argument(aux, "\\@istfilename"), Some("output.ist"));
        assert_eq!(argument(aux, "\\@glsorder"), None);
        assert!(is_extension("glo") && !is_extension("g/o") && !is_extension(""));
        assert!(is_extension("glo-abr") && !is_extension("-glo") && !is_extension("g o"));
        assert!(!is_extension("log") && !is_extension("PDF"));
    }
}
