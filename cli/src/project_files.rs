//! Which local files `texfleet compile --files <dir>` sends: the project's sources, not what
//! an earlier compile left beside them. Hidden files (always), links (never followed) and what
//! `.gitignore`, `.ignore` and the user's global git excludes leave out are skipped, as git
//! would (with the `ignore` crate, ripgrep's walker, so the rules are git's own, in nested
//! folders too); so are TeX's auxiliary files and the outputs of a
//! compile: the main document's PDF, and `output.*` beside it, which the server reserves.

use crate::exit::Failure;
use std::path::{Path, PathBuf};

/// Extensions of files that TeX, its tools and editors write during a compile: sending them
/// would at best waste bytes and at worst feed a stale state into the compile.
const AUXILIARY: &[&str] = &[
    "aux",
    "log",
    "toc",
    "lof",
    "lot",
    "out",
    "bbl",
    "blg",
    "bcf",
    "run.xml",
    "fls",
    "fdb_latexmk",
    "synctex.gz",
    "synctex",
    "xdv",
    "dvi",
    "idx",
    "ind",
    "ilg",
    "glo",
    "gls",
    "glg",
    "acn",
    "acr",
    "alg",
    "nlo",
    "nls",
    "nav",
    "snm",
    "vrb",
];

/// A file to send: its path in the project (relative to the folder, `/`-separated) and where
/// it is on this machine.
pub struct ProjectFile {
    pub path: String,
    pub local: PathBuf,
}

/// The files below `dir` to send with the main document `main`, the main document included
/// (at its path within `dir`); `skip` are local files never to send (the PDF being written).
pub fn collect(dir: &Path, main: &Path, skip: &[PathBuf]) -> anyhow::Result<Vec<ProjectFile>> {
    if !dir.is_dir() {
        return Err(Failure::usage(format!(
            "--files {}: not a folder",
            dir.display()
        )));
    }
    let main = canonical(main)?;
    let main_folder = main.parent().map(Path::to_path_buf).unwrap_or_default();
    let main_stem = main.file_stem().unwrap_or_default().to_os_string();
    let skip: Vec<PathBuf> = skip.iter().filter_map(|p| p.canonicalize().ok()).collect();
    let root = canonical(dir)?;
    let mut files = Vec::new();
    for entry in ignore::WalkBuilder::new(&root)
        .require_git(false)
        .sort_by_file_name(|a, b| a.cmp(b))
        .build()
    {
        let entry = entry?;
        // Links are not followed (the walker's default) nor sent.
        if !entry.file_type().is_some_and(|kind| kind.is_file()) {
            continue;
        }
        let local = entry.into_path();
        // Hidden files stay, whatever a `!` rule in an ignore file says (`.env`, `.git/`).
        let hidden = local
            .strip_prefix(&root)
            .into_iter()
            .flat_map(Path::components)
            .any(|part| part.as_os_str().to_string_lossy().starts_with('.'));
        if hidden {
            continue;
        }
        let name = local.file_name().unwrap_or_default().to_string_lossy();
        let beside_main = local.parent() == Some(main_folder.as_path());
        let is_output = beside_main
            && (name.starts_with("output.")
                || (local.file_stem() == Some(main_stem.as_os_str())
                    && local.extension().is_some_and(|e| e == "pdf")));
        if is_output || is_auxiliary(&name) || skip.contains(&local) {
            continue;
        }
        let relative = local.strip_prefix(&root)?;
        let path = relative
            .to_str()
            .ok_or_else(|| {
                Failure::usage(format!(
                    "{}: the name is not UTF-8; rename it",
                    local.display()
                ))
            })?
            .replace(std::path::MAIN_SEPARATOR, "/");
        files.push(ProjectFile { path, local });
    }
    if !files.iter().any(|f| f.local == main) {
        return Err(Failure::usage(format!(
            "the main document {} is not among the files of --files {} (or is ignored there)",
            main.display(),
            dir.display()
        )));
    }
    Ok(files)
}

fn is_auxiliary(name: &str) -> bool {
    AUXILIARY.iter().any(|extension| {
        name.strip_suffix(extension)
            .is_some_and(|stem| stem.ends_with('.'))
    })
}

fn canonical(path: &Path) -> anyhow::Result<PathBuf> {
    path.canonicalize()
        .map_err(|e| Failure::usage(format!("{}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_go_and_what_a_compile_left_stays() {
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path();
        let write = |path: &str| {
            let path = dir.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, "x").unwrap();
        };
        for path in [
            "paper.tex",
            "paper.pdf",
            "paper.aux",
            "paper.synctex.gz",
            "output.pdf",
            "refs.bib",
            "figures/plot.pdf",
            "figures/my figure.png",
            "build/paper.log",
            "build/notes.tex",
            ".hidden.tex",
            "secret.key",
            "chapters/one.tex",
            "chapters/output.tex",
            "chapters/draft.tex",
            "final/paper-v2.pdf",
        ] {
            write(path);
        }
        std::fs::write(dir.join(".gitignore"), "build/\n*.key\n!.env\n").unwrap();
        std::fs::write(dir.join(".env"), "SECRET=1").unwrap();
        std::os::unix::fs::symlink("/etc/hostname", dir.join("linked.tex")).unwrap();
        std::fs::write(dir.join("chapters/.gitignore"), "draft.tex\n").unwrap();
        // `texfleet compile -o final/paper-v2.pdf`: the PDF it writes is never sent back.
        let written = dir.join("final/paper-v2.pdf");
        let sent: Vec<String> = collect(dir, &dir.join("paper.tex"), &[written])
            .unwrap()
            .into_iter()
            .map(|f| f.path)
            .collect();
        assert_eq!(
            sent,
            [
                "chapters/one.tex",
                "chapters/output.tex",
                "figures/my figure.png",
                "figures/plot.pdf",
                "paper.tex",
                "refs.bib"
            ]
        );
        let error = collect(dir, &dir.join("build/notes.tex"), &[])
            .err()
            .unwrap();
        assert!(error.to_string().contains("is ignored"), "{error}");
    }
}
