//! Bibliographies: bibtex for every aux file that names databases (`\bibdata`, also those of
//! chapterbib, multibib and bibunits), biber for biblatex's control file. The names on their
//! command lines come from the recorder's list of files the pass wrote, and each is checked;
//! biber's data sources, read from the control file, are checked too, so that a document
//! cannot make biber read a file by an absolute or parent path.

use super::bcf;
use super::fingerprints::contents_of_kinds;
use super::names::is_safe_path;
use super::recorder::Recorded;
use super::steps::{signature_of, Steps};
use crate::process::Program;
use std::fs;
use std::path::Path;
use texfleet_sandbox::JOB_NAME;

const BIBTEX: &str = "/usr/bin/bibtex";
const BIBER: &str = "/usr/bin/biber";
const PERL: &str = "/usr/bin/perl";
pub const KPSEWHICH: &str = "/usr/bin/kpsewhich";

/// Runs bibtex and biber where their input changed; true when a `.bbl` changed.
pub fn run(steps: &mut Steps, recorded: &Recorded) -> bool {
    let mut changed = false;
    for aux in recorded.outputs.iter().filter(|p| has_extension(p, "aux")) {
        changed |= bibtex(steps, aux);
    }
    let control = Path::new(JOB_NAME).with_extension("bcf");
    if recorded.outputs.contains(&control) {
        changed |= biber(steps, &control);
    }
    changed
}

fn bibtex(steps: &mut Steps, aux: &Path) -> bool {
    let Ok(text) = fs::read(aux) else {
        return false;
    };
    let text = String::from_utf8_lossy(&text);
    let cited: String = text
        .lines()
        .filter(|line| {
            ["\\citation{", "\\bibdata{", "\\bibstyle{"]
                .iter()
                .any(|command| line.starts_with(command))
        })
        .collect();
    if !cited.contains("\\bibdata{") {
        return false;
    }
    let stem = aux.with_extension("");
    let stem = stem.to_string_lossy();
    if !is_safe_path(&stem) {
        steps.skip(format!("bibtex on {stem:?}: not a safe name"));
        return false;
    }
    let program = Program::new(BIBTEX, &[&stem], &steps.environment).starting_only(&[]);
    let databases = contents_of_kinds(&["bib", "bst"]);
    steps.run_if_changed(
        program,
        signature_of(&format!("{cited}{databases}")),
        &aux.with_extension("bbl"),
        &aux.with_extension("blg"),
    )
}

fn biber(steps: &mut Steps, control: &Path) -> bool {
    let Ok(text) = fs::read(control) else {
        return false;
    };
    let Ok(text) = std::str::from_utf8(&text) else {
        steps.skip("biber: the control file is not UTF-8".into());
        return false;
    };
    let sources = match bcf::data_sources(text) {
        Ok(sources) => sources,
        Err(bcf::Refused(why)) => {
            steps.skip(format!("biber: the control file holds {why}"));
            return false;
        }
    };
    if let Some(source) = sources.iter().find(|source| !is_safe_path(source)) {
        steps.skip(format!(
            "biber: the data source {source:?} is not a safe name"
        ));
        return false;
    }
    let stem = control.with_extension("");
    // Options the control file may not change: no configuration file (it could map any
    // field through a sourcemap), and the output is a .bbl.
    let program = Program::new(
        BIBER,
        &["--noconf", "--output-format=bbl", &stem.to_string_lossy()],
        &steps.environment,
    )
    // biber is a Perl script, which finds files with kpsewhich.
    .starting_only(&[PERL, KPSEWHICH]);
    let databases = contents_of_kinds(&["bib"]);
    steps.run_if_changed(
        program,
        signature_of(&format!("{text}{databases}")),
        &control.with_extension("bbl"),
        &control.with_extension("blg"),
    )
}

fn has_extension(path: &Path, extension: &str) -> bool {
    path.extension().is_some_and(|e| e == extension)
}
