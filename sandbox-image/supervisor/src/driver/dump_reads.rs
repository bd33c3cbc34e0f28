//! What a preamble's dump read and wrote, and so whether its format can be kept: keyed by the
//! job's sources it read, or refused when it wrote a file but its own, read one the compile
//! wrote, or read outside TeX's trees. What it read comes from TeX's recorder and from what the
//! kernel saw it open ([`super::opened`]): the recorder is the document's to overwrite.

use super::recorder::RECORDER_FILE;
use crate::process::Exit;
use std::collections::BTreeSet;
use std::fs;
use std::path::{Component, Path, PathBuf};
use texfleet_sandbox::{
    is_plain_relative, Dump, FORMAT_FILE, LOG_FILE, PDF_FILE, STATE_A_FORMAT_DROPS, WORK_DIR,
};

/// Where TeX's own files are: a dump may read anything there (the image is in the key).
const TEX_TREES: &[&str] = &[
    "/usr/share/texlive/",
    "/usr/share/texmf/",
    "/usr/share/fonts/",
    "/etc/texmf/",
    "/var/lib/texmf/",
];

/// What the dump in `folder` (below the work directory) read and wrote, from its exit, its
/// recorder and the files of the work directory it `opened`: a format keyed by the sources it
/// read, or why it cannot be one.
pub(super) fn judge(
    exit: Option<Exit>,
    folder: &Path,
    sources: &[String],
    opened: Result<BTreeSet<PathBuf>, String>,
) -> Dump {
    if !exit.is_some_and(Exit::success) {
        let log = fs::read(LOG_FILE).unwrap_or_default();
        let log = String::from_utf8_lossy(&log);
        let error = log
            .lines()
            .find(|line| line.starts_with("! "))
            .unwrap_or("");
        return refused(format!("the dump failed {error}").trim_end());
    }
    if !Path::new(FORMAT_FILE).is_file() {
        return refused("the dump wrote no format");
    }
    let fls = fs::read(RECORDER_FILE).unwrap_or_default();
    let cwd = Path::new(WORK_DIR).join(folder);
    let mut reads = Vec::new();
    for line in String::from_utf8_lossy(&fls).lines() {
        let (kind, name) = match line.split_once(' ') {
            Some((kind @ ("INPUT" | "OUTPUT"), name)) => (kind, name),
            _ => continue,
        };
        let path = normalized(&cwd.join(name));
        let in_work = path
            .strip_prefix(WORK_DIR)
            .ok()
            .filter(|relative| is_plain_relative(relative))
            .map(|relative| relative.to_string_lossy().into_owned());
        match (kind, in_work) {
            // pdfTeX opens the PDF when a preamble sets PDF objects (beamer, hyperref); each
            // pass writes it anew, and the check below sees what the format does to it.
            ("OUTPUT", Some(written))
                if [FORMAT_FILE, LOG_FILE, PDF_FILE]
                    .iter()
                    .any(|own| folder.join(own) == Path::new(&written)) => {}
            ("OUTPUT", _) => return refused(&format!("the preamble writes {}", path.display())),
            (_, Some(read)) if sources.contains(&read) => {
                if !reads.contains(&read) {
                    reads.push(read);
                }
            }
            (_, Some(read)) => {
                return refused(&format!(
                    "the preamble reads {read}, which the compile wrote"
                ))
            }
            (_, None) if TEX_TREES.iter().any(|tree| path.starts_with(tree)) => {
                let name = path.file_name().unwrap_or_default().to_string_lossy();
                if STATE_A_FORMAT_DROPS
                    .iter()
                    .any(|drops| name.starts_with(drops))
                {
                    return refused(&format!(
                        "the preamble reads {name}, whose settings a format does not keep"
                    ));
                }
            }
            (_, None) => {
                return refused(&format!(
                    "the preamble reads {} outside TeX's trees",
                    path.display()
                ))
            }
        }
    }
    // The recorder is the document's to overwrite (`\openout` of output.fls in the preamble):
    // what the kernel saw the dump open in the work directory counts as read too.
    let opened = match opened {
        Ok(opened) => opened,
        Err(why) => return refused(&format!("the dump: {why}")),
    };
    let own = [FORMAT_FILE, LOG_FILE, PDF_FILE, RECORDER_FILE].map(|own| folder.join(own));
    // A file opened and gone is the engine's recorder under its first name (`pdflatex<pid>.fls`,
    // renamed once the job name is known): TeX can make and overwrite files, not remove them.
    let gone = |path: &PathBuf| fs::symlink_metadata(Path::new(WORK_DIR).join(path)).is_err();
    for path in opened
        .iter()
        .filter(|path| !own.contains(path) && !gone(path))
    {
        let read = path.to_string_lossy().into_owned();
        if !sources.contains(&read) {
            return refused(&format!(
                "the preamble reads {read}, which the compile wrote"
            ));
        }
        if !reads.contains(&read) {
            reads.push(read);
        }
    }
    Dump::Built { reads }
}

pub(super) fn refused(why: &str) -> Dump {
    Dump::Refused {
        why: why.to_string(),
    }
}

/// `path` with `.` and `..` resolved by their names (the recorder writes what TeX opened).
fn normalized(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_resolved_without_the_file_system() {
        assert_eq!(
            normalized(Path::new("/work/paper/./../x.tex")),
            Path::new("/work/x.tex")
        );
        assert_eq!(
            normalized(Path::new("/work/../../etc/passwd")),
            Path::new("/etc/passwd")
        );
    }
}
