//! Errors and warnings parsed from a TeX log.
//!
//! Files are named by their path in the project, whatever folder the compile ran in: TeX names
//! a file relative to the main document's folder, or by its full path in the sandbox when it
//! found it at the project's top level.
//!
//! The supervisor runs TeX with `-file-line-error` and a very wide `max_print_line`, so an
//! error is one line `./file.tex:12: message` and a warning one line (plus `(package)`
//! continuation lines). Errors without a location (`! message`) take the line from the `l.N`
//! context line TeX prints after them.

use texfleet_core::model::{Diagnostic, DiagnosticSource, Severity};
use texfleet_sandbox::{Finding, WORK_DIR};

/// Diagnostics beyond this many are dropped: a flood of warnings says nothing more.
pub const MAX_DIAGNOSTICS: usize = 100;
const MAX_MESSAGE_CHARS: usize = 500;
const MAX_FILE_CHARS: usize = 200;

/// The diagnostics of `log`, of a compile whose main document is `main` (a project path).
pub fn parse(log: &str, main: &str) -> Vec<Diagnostic> {
    let folder = main.rsplit_once('/').map_or("", |(folder, _)| folder);
    let mut diagnostics = parse_log(log);
    for diagnostic in &mut diagnostics {
        if let Some(file) = &diagnostic.file {
            diagnostic.file = Some(project_path(file, folder));
        }
    }
    diagnostics
}

/// `file` as TeX named it, as a path in the project; a file outside it (a package's) keeps its
/// full path.
fn project_path(file: &str, folder: &str) -> String {
    if let Some(path) = file
        .strip_prefix(WORK_DIR)
        .and_then(|p| p.strip_prefix('/'))
    {
        return path.to_string();
    }
    if file.starts_with('/') || folder.is_empty() {
        return file.to_string();
    }
    let mut parts: Vec<&str> = folder.split('/').collect();
    for component in file.split('/') {
        match component {
            "." | "" => {}
            ".." => {
                parts.pop();
            }
            other => parts.push(other),
        }
    }
    parts.join("/")
}

fn parse_log(log: &str) -> Vec<Diagnostic> {
    let lines: Vec<&str> = log.lines().collect();
    let mut diagnostics: Vec<Diagnostic> = Vec::new();
    let mut index = 0;
    while index < lines.len() && diagnostics.len() < MAX_DIAGNOSTICS {
        let line = lines[index];
        index += 1;
        let error = match file_line_error(line) {
            Some((file, number, message)) => Some((Some(file), Some(number), message)),
            None => line.strip_prefix("! ").map(|message| (None, None, message)),
        };
        if let Some((file, number, message)) = error {
            if is_stop(message) {
                if let Some(previous) = diagnostics
                    .last_mut()
                    .filter(|d| d.severity == Severity::Error)
                {
                    if !previous.message.ends_with(STOPPED) {
                        previous.message.push_str(STOPPED);
                    }
                    continue;
                }
            }
            let context = context_line(&lines[index..]);
            let number = number.or_else(|| context.and_then(context_line_number));
            let mut error = diagnostic(Severity::Error, file, number, message);
            error.context = context.map(|c| clean(c.trim_end(), MAX_MESSAGE_CHARS));
            diagnostics.push(error);
        } else if let Some(message) = warning(line) {
            let mut message = message.to_string();
            // Package warnings continue on lines that start with "(package-name)".
            while index < lines.len()
                && lines[index].starts_with('(')
                && lines[index].contains(") ")
            {
                let (_, rest) = lines[index].split_once(") ").unwrap_or_default();
                message.push(' ');
                message.push_str(rest.trim());
                index += 1;
            }
            let number = input_line_number(&message);
            diagnostics.push(diagnostic(Severity::Warning, None, number, &message));
        }
    }
    diagnostics
}

/// What an error that stopped TeX says of it.
const STOPPED: &str = " (TeX stopped here)";

/// TeX's last words after an error ("Emergency stop.", "==> Fatal error occurred, no output
/// PDF file produced!"): part of the error before them, not an error of their own.
fn is_stop(message: &str) -> bool {
    let message = message.trim();
    message == "Emergency stop." || message.starts_with("==> Fatal error occurred")
}

/// The `l.N ...` line TeX prints after an error, among the lines that follow it up to the next
/// error.
fn context_line<'a>(following: &[&'a str]) -> Option<&'a str> {
    following
        .iter()
        .take(20)
        .take_while(|line| !line.starts_with("! ") && file_line_error(line).is_none())
        .find(|line| context_line_number(line).is_some())
        .copied()
}

fn diagnostic(
    severity: Severity,
    file: Option<&str>,
    line: Option<u32>,
    message: &str,
) -> Diagnostic {
    Diagnostic {
        severity,
        file: file.map(|f| clean(f.strip_prefix("./").unwrap_or(f), MAX_FILE_CHARS)),
        line,
        column: None,
        source: DiagnosticSource::Tex,
        message: clean(message.trim(), MAX_MESSAGE_CHARS),
        context: None,
    }
}

/// chktex's findings of a compile whose main document is `main`, as diagnostics: chktex names
/// files as TeX does, relative to the main document's folder. Each is the document's to shape,
/// and cleaned as the log's text is.
pub fn from_findings(findings: &[Finding], main: &str) -> Vec<Diagnostic> {
    let folder = main.rsplit_once('/').map_or("", |(folder, _)| folder);
    findings
        .iter()
        .take(MAX_DIAGNOSTICS)
        .map(|finding| {
            let (severity, kind) = match finding.error {
                true => (Severity::Error, "Error"),
                false => (Severity::Warning, "Warning"),
            };
            let file = project_path(&finding.file, folder);
            // Numbered as chktex numbers it, so that a `% chktex 26` comment can silence it.
            let message = format!("{kind} {}: {}", finding.number, finding.message);
            Diagnostic {
                column: Some(finding.column),
                source: DiagnosticSource::Chktex,
                ..diagnostic(severity, Some(&file), Some(finding.line), &message)
            }
        })
        .collect()
}

/// Text from the log, which the document writes: without control characters (a NUL would
/// make the outcome unrecordable, since Postgres's jsonb refuses it) and cut to `max` chars.
fn clean(text: &str, max: usize) -> String {
    text.chars().filter(|c| !c.is_control()).take(max).collect()
}

/// `./main.tex:12: Undefined control sequence.`
fn file_line_error(line: &str) -> Option<(&str, u32, &str)> {
    let mut search_from = 0;
    while let Some(offset) = line[search_from..].find(':') {
        let colon = search_from + offset;
        let rest = &line[colon + 1..];
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 && rest[digits..].starts_with(": ") {
            let file = &line[..colon];
            if !file.is_empty() && !file.contains(' ') {
                return Some((file, rest[..digits].parse().ok()?, &rest[digits + 2..]));
            }
        }
        search_from = colon + 1;
    }
    None
}

/// `l.12 \foo` after an error.
fn context_line_number(line: &str) -> Option<u32> {
    let rest = line.strip_prefix("l.")?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

fn warning(line: &str) -> Option<&str> {
    let (head, message) = line.split_once("Warning: ")?;
    let is_tex_warning = head.starts_with("LaTeX")
        || head.starts_with("Package ")
        || head.starts_with("Class ")
        || head.starts_with("pdfTeX")
        || head.is_empty();
    is_tex_warning.then_some(message)
}

/// `... on input line 12.`
fn input_line_number(message: &str) -> Option<u32> {
    let (_, rest) = message.rsplit_once("input line ")?;
    rest.trim_end_matches('.').trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = r"This is pdfTeX, Version 3.141592653-2.6-1.40.27 (TeX Live 2025/Debian)
(./main.tex
LaTeX2e <2024-11-01>
./main.tex:5: Undefined control sequence.
l.5 \foo
        
LaTeX Warning: Reference `sec:x' on page 1 undefined on input line 7.

Package hyperref Warning: Token not allowed in a PDF string (Unicode):
(hyperref)                removing `math shift' on input line 9.

! Emergency stop.
<*> main.tex
         
l.12 \end{document}
";

    #[test]
    fn parses_errors_and_warnings() {
        let diagnostics = parse(LOG, "main.tex");
        assert_eq!(diagnostics.len(), 4, "{diagnostics:#?}");
        assert_eq!(
            diagnostics[0],
            Diagnostic {
                severity: Severity::Error,
                file: Some("main.tex".into()),
                line: Some(5),
                column: None,
                source: DiagnosticSource::Tex,
                message: "Undefined control sequence.".into(),
                context: Some("l.5 \\foo".into()),
            }
        );
        assert_eq!(diagnostics[1].severity, Severity::Warning);
        assert_eq!(diagnostics[1].line, Some(7));
        assert_eq!(
            diagnostics[2].message,
            "Token not allowed in a PDF string (Unicode): removing `math shift' on input line 9."
        );
        assert_eq!(diagnostics[2].line, Some(9));
        // An emergency stop with no error before it stands alone.
        assert_eq!(diagnostics[3].message, "Emergency stop.");
        assert_eq!(diagnostics[3].line, Some(12));
        assert_eq!(
            diagnostics[3].context.as_deref(),
            Some("l.12 \\end{document}")
        );
    }

    #[test]
    fn tex_s_last_words_are_folded_into_the_error_before_them() {
        let log = r"./ch/one.tex:2: Undefined control sequence.
l.2 Here is \undefinedmacro
                           {} more.
./ch/one.tex:2:  ==> Fatal error occurred, no output PDF file produced!
./ch/one.tex:2: Emergency stop.
! LaTeX Error: File `nosuch.sty' not found.

Type X to quit or <RETURN> to proceed,
enter file name with default extension:
./main.tex:3: Emergency stop.
<read *>
";
        let diagnostics = parse(log, "main.tex");
        assert_eq!(diagnostics.len(), 2, "{diagnostics:#?}");
        assert_eq!(
            diagnostics[0].message,
            "Undefined control sequence. (TeX stopped here)"
        );
        assert_eq!(diagnostics[0].file.as_deref(), Some("ch/one.tex"));
        assert_eq!(
            diagnostics[0].context.as_deref(),
            Some("l.2 Here is \\undefinedmacro")
        );
        assert_eq!(
            diagnostics[1].message,
            "LaTeX Error: File `nosuch.sty' not found. (TeX stopped here)"
        );
        assert_eq!(diagnostics[1].context, None);
    }

    #[test]
    fn control_characters_never_reach_a_diagnostic() {
        let log = format!(
            "./{}\u{0}x.tex:3: Bad\u{0}\u{1b}[31m thing\n! Undefined\u{7f} control\n",
            "d".repeat(5000)
        );
        let diagnostics = parse(&log, "main.tex");
        assert_eq!(diagnostics.len(), 2);
        assert_eq!(diagnostics[0].message, "Bad[31m thing");
        let file = diagnostics[0].file.as_deref().unwrap();
        assert_eq!(file.chars().count(), MAX_FILE_CHARS);
        assert!(!file.contains('\u{0}'));
        assert_eq!(diagnostics[1].message, "Undefined control");
    }

    #[test]
    fn files_are_named_by_their_path_in_the_project() {
        let log = "./ch/one.tex:2: Bad.\n/work/macros.tex:3: Worse.\n/usr/share/texmf/x.sty:4: Theirs.\n../shared.tex:5: Up.\n";
        let files: Vec<_> = parse(log, "paper/main.tex")
            .into_iter()
            .map(|d| d.file.unwrap())
            .collect();
        assert_eq!(
            files,
            [
                "paper/ch/one.tex",
                "macros.tex",
                "/usr/share/texmf/x.sty",
                "shared.tex"
            ]
        );
    }

    #[test]
    fn floods_are_capped() {
        let log = "./main.tex:1: Undefined control sequence.\n".repeat(10 * MAX_DIAGNOSTICS);
        assert_eq!(parse(&log, "main.tex").len(), MAX_DIAGNOSTICS);
    }

    #[test]
    fn chktex_findings_are_diagnostics_of_the_project_s_files_cleaned() {
        let finding = |file: &str, error: bool, message: &str| Finding {
            file: file.into(),
            line: 3,
            column: 6,
            error,
            number: 26,
            message: message.into(),
        };
        let findings = [
            finding("ch/one.tex", false, "Spaces\u{0} before punctuation."),
            finding("main.tex", true, "Unmatched"),
        ];
        let diagnostics = from_findings(&findings, "paper/main.tex");
        assert_eq!(
            diagnostics[0],
            Diagnostic {
                severity: Severity::Warning,
                file: Some("paper/ch/one.tex".into()),
                line: Some(3),
                column: Some(6),
                source: DiagnosticSource::Chktex,
                message: "Warning 26: Spaces before punctuation.".into(),
                context: None,
            }
        );
        assert_eq!(diagnostics[1].severity, Severity::Error);
        let many = vec![finding("main.tex", false, "x"); MAX_DIAGNOSTICS + 5];
        assert_eq!(from_findings(&many, "main.tex").len(), MAX_DIAGNOSTICS);
    }
}
