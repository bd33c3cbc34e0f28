//! bib2gls, which glossaries-extra's `record` option asks for: it reads the resources the aux
//! file lists (`\glsxtr@resource{src=terms,...}{output}`) and the entries the document used
//! (`\glsxtr@record`), and writes each resource's `.glstex`, which the next pass reads. It is
//! run as the bib2gls manual's latexmk rule runs it, `bib2gls --group <job>`.
//!
//! bib2gls is Java: the JVM is started directly (not through the `bib2gls` shell script,
//! there is no shell) with bounds a compile's container can hold: one GC thread, a capped
//! heap, no shared performance file, no attempt to read cgroup files Landlock hides. It may
//! start nothing but `kpsewhich`, through which it reads TeX's file settings and finds
//! databases; bib2gls itself refuses reads and writes that those settings forbid
//! (`openin_any`, `openout_any` = paranoid), and Landlock holds it to the same trees as every
//! program of the compile. Its TeX interpreter (sorting, `interpret-fields`) is the exception:
//! its `\input` reads any path it finds, past `openin_any` (the image's `texmf.cnf`, say),
//! and `--no-interpret` breaks bib2gls 4.4 altogether. So Landlock
//! is its only bound on reads, and bib2gls runs only where Landlock is fully enforced.

use super::bibliography::KPSEWHICH;
use super::steps::{signature_of, Steps};
use crate::confine::HOME;
use crate::process::Program;
use std::fs;
use std::path::Path;
use texfleet_sandbox::JOB_NAME;

const JAVA_HOME: &str = "/usr/lib/jvm/default-java";
const BIB2GLS: &str = "/usr/share/texlive/texmf-dist/scripts/bib2gls/bib2gls.jar";
/// The heap bib2gls may use: a glossary of thousands of entries needs tens of megabytes.
const MAX_HEAP: &str = "-Xmx256m";

/// Runs bib2gls when what it reads of the job's aux file changed; true when a `.glstex`
/// changed.
pub fn run(steps: &mut Steps) -> bool {
    let aux = Path::new(JOB_NAME).with_extension("aux");
    let Ok(text) = fs::read(&aux) else {
        return false;
    };
    let text = String::from_utf8_lossy(&text);
    // Resources, records and settings of glossaries-extra; page numbers of records included,
    // since they are the locations bib2gls lists.
    let read: String = text
        .lines()
        .filter(|line| line.starts_with("\\glsxtr@") || line.starts_with("\\@glsxtr@"))
        .collect();
    if !read.contains("\\glsxtr@resource{") {
        return false;
    }
    if !steps.files_confined {
        steps.skip("bib2gls: Landlock is not enforced here, and bib2gls reads by any path".into());
        return false;
    }
    let before = glstex_fingerprints();
    let java = format!("{JAVA_HOME}/bin/java");
    let spawn_helper = format!("{JAVA_HOME}/lib/jspawnhelper");
    let home = format!("-Duser.home={HOME}");
    let program = Program::new(
        &java,
        &[
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-XX:-UsePerfData",
            "-XX:-UseContainerSupport",
            "-XX:ActiveProcessorCount=1",
            MAX_HEAP,
            "-Djava.io.tmpdir=/tmp",
            &home,
            "-Djava.locale.providers=CLDR,JRE,SPI",
            "-jar",
            BIB2GLS,
            "--group",
            JOB_NAME,
        ],
        &steps.environment,
    )
    // The JVM starts programs through its spawn helper.
    .starting_only(&[&spawn_helper, KPSEWHICH]);
    // Its answer covers `output.glstex` only; every resource's file counts, below.
    let databases = super::fingerprints::contents_of_kinds(&["bib"]);
    steps.run_if_changed(
        program,
        signature_of(&format!("{read}{databases}")),
        &aux.with_extension("glstex"),
        &aux.with_extension("glg"),
    );
    glstex_fingerprints() != before
}

/// Every `.glstex` of the folder, by name and content: a document may load several resources
/// (`output.glstex`, `output-1.glstex`, ...).
fn glstex_fingerprints() -> Vec<(String, Option<u64>)> {
    let mut found: Vec<(String, Option<u64>)> = fs::read_dir(".")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| entry.file_name().into_string().ok())
        .filter(|name| name.ends_with(".glstex"))
        .map(|name| {
            let fingerprint = super::fingerprints::fingerprint(Path::new(&name));
            (name, fingerprint)
        })
        .collect();
    found.sort();
    found
}
