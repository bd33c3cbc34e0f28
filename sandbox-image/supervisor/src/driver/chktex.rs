//! The check a job can ask for (`"check"`): chktex on the main document and the files it
//! `\input`s, before the compile and before anything of the document has run, as a
//! [`reading_tool`](super::reading_tool): chktex starts no program, but a `.chktexrc` in its
//! folder sets its options (`CmdLine { -o file }` writes its report over a file), and no more
//! than the project's files (never dot files) are there. What it prints is the document's to
//! shape, so only lines in exactly the format asked for count, each bounded.

use super::reading_tool::{self, Tool};
use super::steps::Steps;
use crate::process::Exit;
use nix::sys::resource::Resource;
use nix::sys::signal::Signal;
use std::time::Instant;
use texfleet_sandbox::{Finding, MAX_FINDINGS, WORK_DIR};

/// chktex, which reads the job's files and Debian's configuration of it.
const CHKTEX: Tool = Tool {
    what: "the check",
    file: "/usr/bin/chktex",
    program: "/usr/bin/chktex",
    readable: &[WORK_DIR, "/etc/chktexrc"],
};
/// File, line, column, kind, warning number and message, a finding a line.
const FORMAT: &str = "%f\t%l\t%c\t%k\t%n\t%m\n";
/// The most of chktex's output read: [`MAX_FINDINGS`] findings of ordinary length.
const MAX_OUTPUT: u64 = 256 * 1024;
/// The most chktex may write: a line of a megabyte makes it report for minutes, on the job's
/// tmpfs. Past it chktex ends (`SIGXFSZ`), and what it wrote stands.
const MAX_WRITTEN: u64 = 1024 * 1024;

/// chktex's findings on `main` (in the current folder), ending by `deadline` at the latest;
/// None when chktex could not give them.
pub fn check(steps: &mut Steps, main: &str, deadline: Instant) -> Option<Vec<Finding>> {
    let format = format!("--format={FORMAT}");
    let args = ["-q", "-I1", &format, "--", main];
    let limits = [(Resource::RLIMIT_FSIZE, MAX_WRITTEN)];
    let exit = reading_tool::run(steps, &CHKTEX, &args, deadline, &limits);
    // 0: nothing found; 2 and 3: warnings, errors.
    let ran = exit.is_some_and(|exit| {
        matches!(exit, Exit::Code(0 | 2 | 3)) || exit == Exit::Signal(Signal::SIGXFSZ as i32)
    });
    if !ran {
        steps.trace.push("texfleet: chktex gave no findings".into());
        return None;
    }
    Some(parse(&steps.last_output(MAX_OUTPUT)))
}

/// The findings of `output`: each line of exactly [`FORMAT`]'s six fields, at most
/// [`MAX_FINDINGS`] of them; other lines are passed over.
fn parse(output: &[u8]) -> Vec<Finding> {
    String::from_utf8_lossy(output)
        .lines()
        .filter_map(finding)
        .take(MAX_FINDINGS)
        .collect()
}

fn finding(line: &str) -> Option<Finding> {
    let mut fields = line.splitn(6, '\t');
    let file = fields.next()?.to_string();
    let line_number = fields.next()?.parse().ok()?;
    let column = fields.next()?.parse().ok()?;
    let error = match fields.next()? {
        "Error" => true,
        "Warning" | "Message" => false,
        _ => return None,
    };
    let number = fields.next()?.parse().ok()?;
    let message = fields.next()?.to_string();
    Some(
        Finding {
            file,
            line: line_number,
            column,
            error,
            number,
            message,
        }
        .bounded(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_lines_of_the_format_asked_for_are_findings() {
        let output = b"main.tex\t3\t6\tWarning\t26\tYou ought to remove spaces.\n\
            forged line\n\
            main.tex\tx\t6\tWarning\t26\tnot a line number\n\
            main.tex\t3\t6\tNote\t26\tnot a kind\n\
            sub/a.tex\t9\t1\tError\t13\tA message\twith a tab\n";
        let findings = parse(output);
        assert_eq!(findings.len(), 2, "{findings:?}");
        assert_eq!(
            findings[0],
            Finding {
                file: "main.tex".into(),
                line: 3,
                column: 6,
                error: false,
                number: 26,
                message: "You ought to remove spaces.".into(),
            }
        );
        assert!(findings[1].error);
        assert_eq!(findings[1].message, "A message\twith a tab");
    }

    #[test]
    fn findings_are_bounded_in_number_and_length() {
        let line = format!("main.tex\t1\t1\tWarning\t1\t{}\n", "é".repeat(5000));
        let findings = parse(line.repeat(MAX_FINDINGS + 10).as_bytes());
        assert_eq!(findings.len(), MAX_FINDINGS);
        assert!(findings[0].message.len() <= 4 * texfleet_sandbox::MAX_FINDING_CHARS);
    }
}
