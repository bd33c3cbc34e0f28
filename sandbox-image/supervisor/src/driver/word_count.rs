//! The word count a job can ask for (`"wordcount": true`): TeX Live's texcount on the main
//! document and the files it includes, after the compile and after the files for the next
//! compile are chosen, run as a [`reading_tool`](super::reading_tool): texcount opens the files
//! a document names with Perl's two-argument `open`, which runs a name ending in `|` as a
//! command (`%TC:insert \input{cmd|}`, a line TeX ignores). What it prints is the document's
//! to shape (a `%TC:` comment changes texcount's output), so only a first line of exactly seven
//! numbers counts.

use super::reading_tool::{self, Tool};
use super::steps::Steps;
use std::time::Instant;
use texfleet_sandbox::{WordCount, WORK_DIR};

/// texcount, where Debian's texlive-extra-utils puts it, run by Perl: it reads the job's files.
const TEXCOUNT: Tool = Tool {
    what: "the word count",
    file: "/usr/bin/texcount",
    program: "/usr/bin/perl",
    readable: &[WORK_DIR],
};
/// The numbers of [`WordCount`], in its order.
const TEMPLATE: &str = "-template={1} {2} {3} {4} {5} {6} {7}\\n";
/// The most of texcount's output read: one line of numbers.
const MAX_OUTPUT: u64 = 4096;

/// Counts the words of `main` (in the current folder), ending by `deadline` at the latest.
pub fn count(steps: &mut Steps, main: &str, deadline: Instant) -> Option<WordCount> {
    let args = [TEXCOUNT.file, "-merge", "-utf8", "-q", TEMPLATE, main];
    let exit = reading_tool::run(steps, &TEXCOUNT, &args, deadline, &[]);
    let counted = exit
        .filter(|exit| exit.success())
        .and_then(|_| parse(&steps.last_output(MAX_OUTPUT)));
    if counted.is_none() {
        steps
            .trace
            .push("texfleet: texcount gave no word count".into());
    }
    counted
}

/// The seven numbers of [`TEMPLATE`] on the first line, and nothing else on it.
fn parse(output: &[u8]) -> Option<WordCount> {
    let line = std::str::from_utf8(output).ok()?.lines().next()?;
    let numbers: Vec<u32> = line
        .split_ascii_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    numbers.try_into().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_first_line_of_seven_numbers_is_a_count() {
        let count = parse(b"15 1 3 1 1 1 2\n").unwrap();
        assert_eq!(count, [15, 1, 3, 1, 1, 1, 2]);
        assert_eq!(parse(b"15 1 3 1 1 1 2\nmore\n"), Some(count));
        for forged in [
            &b"15 1 3 1 1 1\n"[..],
            b"15 1 3 1 1 1 2 8\n",
            b"15 1 3 1 1 1 -2\n",
            b"15 1 3 1 1 1 99999999999\n",
            b"words: 15 1 3 1 1 1 2\n",
            b"\n15 1 3 1 1 1 2\n",
            b"",
            b"\xff",
        ] {
            assert_eq!(parse(forged), None, "{forged:?}");
        }
    }
}
