//! Which files one compile may hand on to the next compile of its document: only the kinds
//! LaTeX, its packages and its tools write for a next pass. Both sides apply it: the driver
//! when it collects them, the scheduler before it stores them and the driver again before it
//! writes them back, so that a state the compile forged (under gVisor it can reach the
//! driver's handover) still carries nothing else.

use std::path::{Component, Path};

/// The kinds of file LaTeX, its packages and its tools write for the next pass (and biber's
/// `.run.xml`, and the float lists `.lo?` but the log). A file of another kind the compile
/// wrote (a class, a package, a figure, a makeindex style) would be loaded in place of the
/// image's by the next compile at the same main path, whatever its body (`article.cls`,
/// say). A kind missing here costs a later compile a pass, nothing more.
const AUXILIARY_KINDS: [&str; 30] = [
    "aux", "toc", "out", "bbl", "bcf", "idx", "ind", "ilg", "glo", "gls", "glg", "acn", "acr",
    "alg", "glstex", "nav", "snm", "vrb", "thm", "tdo", "brf", "nlo", "nls", "mtc", "maf", "soc",
    "cpt", "ent", "upa", "upb",
];

/// minted's cache, which latexminted writes and the passes read: the highlighted snippets,
/// the styles and the index of both, so that an edit highlights only what changed. Not its
/// per-run files (`.data`, `.config`, `.message`, `.errlog`).
const MINTED_CACHE_KINDS: [&str; 3] = [".highlight.minted", ".style.minted", ".index.minted"];

/// Whether `path` may be handed on: a plain relative path to a file of an auxiliary kind.
pub fn is_handed_on(path: &Path) -> bool {
    let kind = path
        .extension()
        .and_then(|kind| kind.to_str())
        .unwrap_or("");
    let name = path.to_string_lossy();
    let auxiliary = AUXILIARY_KINDS.contains(&kind)
        || (kind.len() == 3 && kind.starts_with("lo") && kind != "log")
        || name.ends_with(".run.xml")
        || MINTED_CACHE_KINDS.iter().any(|cache| name.ends_with(cache));
    auxiliary && is_plain_relative(path)
}

/// A relative path of plain components: no root, no `.` or `..`, not empty.
pub fn is_plain_relative(path: &Path) -> bool {
    path.components().next().is_some()
        && path
            .components()
            .all(|part| matches!(part, Component::Normal(_)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_files_written_for_the_next_pass_are_handed_on() {
        for kept in [
            "output.aux",
            "ch/one.aux",
            "output.toc",
            "output.lof",
            "output.run.xml",
            "_minted/4B2F0E5C1A7D9E3F.highlight.minted",
            "_minted/default.style.minted",
            "_minted/_0CC175B9C0F1B6A831C399E269772661.index.minted",
        ] {
            assert!(is_handed_on(Path::new(kept)), "{kept}");
        }
        for refused in [
            "article.cls",
            "macros.sty",
            "part.tex",
            "fig.pdf",
            "x.xml",
            "flag",
            "output.log",
            "nomencl.ist",
            "../up.aux",
            "/abs.aux",
            "_0CC175B9C0F1B6A831C399E269772661.data.minted",
            "_0CC175B9C0F1B6A831C399E269772661.config.minted",
            "_minted/x.minted",
        ] {
            assert!(!is_handed_on(Path::new(refused)), "{refused}");
        }
    }
}
