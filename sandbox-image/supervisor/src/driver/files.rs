//! The files of a compile: writing the sources, and knowing which generated files changed.
//!
//! The engine runs with `-recorder`, so after each pass its `.fls` lists what it read and
//! wrote. A pass must be followed by another when a file it read changed during it (an
//! `.aux` rewritten with new labels), when a file it looked for and missed now exists (a
//! `.toc` written at the end: "No file output.toc."), or when the log asks for a rerun. File
//! names from the `.fls` and the log are only compared with files on disk, never passed to a
//! program.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, HashSet};
use std::fs::{self, File, OpenOptions};
use std::hash::{Hash, Hasher};
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};
use texfleet_sandbox::{is_plain_relative, FileSpec, WORK_DIR};

/// Files larger than this are compared by size only: generated files read back are small.
const MAX_HASHED_BYTES: u64 = 16 * 1024 * 1024;

/// Writes each source below `root`, refusing to follow or replace anything. (The API has
/// already refused unsafe paths; this is a second line, not the first.)
pub fn write_sources(root: &Path, files: &[FileSpec]) -> io::Result<()> {
    for file in files {
        let path = Path::new(&file.path);
        if !is_plain_relative(path) {
            return Err(io::Error::other(format!("unsafe path {:?}", file.path)));
        }
        let path = root.join(path);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent)?;
        }
        let content = BASE64
            .decode(&file.content_base64)
            .map_err(io::Error::other)?;
        write_new(&path, &content)?;
    }
    Ok(())
}

/// Writes a file that must not exist yet, never through a link.
pub fn write_new(path: &Path, bytes: &[u8]) -> io::Result<()> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)?
        .write_all(bytes)
}

/// Replaces the file at `path` (the compile's, in a folder of the compile) with `bytes`.
pub fn replace(path: &Path, bytes: &[u8]) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(error) if error.kind() != io::ErrorKind::NotFound => return Err(error),
        _ => {}
    }
    write_new(path, bytes)
}

/// The first source below `root` whose content is no longer what was sent: the passes may
/// rewrite sources (`\openout`), and what reads them afterwards must know.
pub fn first_rewritten<'a>(root: &Path, files: &'a [FileSpec]) -> Option<&'a str> {
    let holds_sent = |file: &FileSpec| -> io::Result<bool> {
        let sent = BASE64
            .decode(&file.content_base64)
            .map_err(io::Error::other)?;
        let opened = open_regular(&root.join(&file.path))?;
        let mut now = Vec::with_capacity(sent.len());
        opened.take(sent.len() as u64 + 1).read_to_end(&mut now)?;
        Ok(now == sent)
    };
    files
        .iter()
        .find(|file| !holds_sent(file).unwrap_or(false))
        .map(|file| file.path.as_str())
}

/// The regular file at `path` (not a link, nor a FIFO that would block the read).
pub fn open_regular(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)?;
    match file.metadata()?.is_file() {
        true => Ok(file),
        false => Err(io::Error::other(format!(
            "{} is not a file",
            path.display()
        ))),
    }
}

/// The paths and fingerprints of the files of these kinds (extensions) below the work
/// directory, as one text: the databases and styles a bibliography or index tool reads, whose
/// changes the rest of its input does not show (a restored `.bbl` would be kept while only
/// the `.bib` changed). Bounded in depth and entries, since the document may
/// make folders; past the bound, a text that matches no earlier one.
pub fn contents_of_kinds(kinds: &[&str]) -> String {
    contents_of_kinds_below(Path::new(WORK_DIR), kinds)
}

fn contents_of_kinds_below(root: &Path, kinds: &[&str]) -> String {
    const MAX_DEPTH: usize = 8;
    const MAX_ENTRIES: usize = 5000;
    let mut found = Vec::new();
    let mut folders = vec![(root.to_path_buf(), 0)];
    let mut seen = 0;
    while let Some((folder, depth)) = folders.pop() {
        for entry in fs::read_dir(&folder).into_iter().flatten().flatten() {
            seen += 1;
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if seen > MAX_ENTRIES || (kind.is_dir() && depth == MAX_DEPTH) {
                // Too many to tell: a text no earlier run had, so that the tool runs (an
                // edited .bib among thousands of folders is not missed).
                return format!("past the bounds at {:?}", std::time::Instant::now());
            }
            let path = entry.path();
            if kind.is_dir() {
                folders.push((path, depth + 1));
            } else if kind.is_file()
                && path
                    .extension()
                    .is_some_and(|extension| kinds.iter().any(|kind| extension == *kind))
            {
                found.push((fingerprint(&path), path));
            }
        }
    }
    found.sort_by(|a, b| a.1.cmp(&b.1));
    format!("{found:?}")
}

/// A fingerprint of a file's content, or None when it does not exist.
pub fn fingerprint(path: &Path) -> Option<u64> {
    let metadata = fs::symlink_metadata(path).ok()?;
    if !metadata.is_file() {
        return None;
    }
    let mut hasher = DefaultHasher::new();
    metadata.len().hash(&mut hasher);
    if metadata.len() <= MAX_HASHED_BYTES {
        fs::read(path).ok()?.hash(&mut hasher);
    }
    Some(hasher.finish())
}

/// What a pass read and wrote, from its `.fls`: paths relative to the folder it ran in, only
/// those inside it (TeX's own trees are not ours to watch).
#[derive(Debug, Default)]
pub struct Recorded {
    pub inputs: Vec<PathBuf>,
    pub outputs: Vec<PathBuf>,
}

pub fn read_recorder(fls: &Path, folder: &Path) -> Recorded {
    let mut recorded = Recorded::default();
    // A document may write tens of thousands of files: each is listed once, found in O(1).
    let mut seen: HashSet<(bool, PathBuf)> = HashSet::new();
    let text = fs::read(fls).unwrap_or_default();
    for line in String::from_utf8_lossy(&text).lines() {
        let (is_output, list, name) = match line.split_once(' ') {
            Some(("INPUT", name)) => (false, &mut recorded.inputs, name),
            Some(("OUTPUT", name)) => (true, &mut recorded.outputs, name),
            _ => continue,
        };
        let path = Path::new(name);
        let relative = if path.is_absolute() {
            match path.strip_prefix(folder) {
                Ok(inside) => inside.to_path_buf(),
                Err(_) => continue,
            }
        } else {
            path.components()
                .filter(|c| !matches!(c, Component::CurDir))
                .collect()
        };
        if is_plain_relative(&relative) && seen.insert((is_output, relative.clone())) {
            list.push(relative);
        }
    }
    recorded
}

/// The fingerprints of `paths` (relative to the folder the compile runs in) as they are now.
pub fn fingerprints<'a>(
    paths: impl IntoIterator<Item = &'a PathBuf>,
) -> BTreeMap<PathBuf, Option<u64>> {
    paths
        .into_iter()
        .map(|path| (path.clone(), fingerprint(path)))
        .collect()
}

/// Files the log says TeX looked for and did not find ("No file output.toc."), which exist now.
pub fn missing_then_present(log: &str) -> Vec<PathBuf> {
    log.lines()
        .filter_map(|line| line.strip_prefix("No file ")?.strip_suffix('.'))
        .map(PathBuf::from)
        .filter(|path| is_plain_relative(path) && fingerprint(path).is_some())
        .collect()
}

/// Whether a package asked in the log for another run.
pub fn log_asks_for_rerun(log: &str) -> bool {
    const REQUESTS: &[&str] = &[
        "Rerun to get",
        "Label(s) may have changed",
        "Please rerun LaTeX",
        "Rerun LaTeX",
        "rerun LaTeX",
        "has changed. Rerun",
    ];
    // biblatex's "Please (re)run Biber ... and rerun LaTeX afterwards" is for the tool, which
    // the driver runs when its input changed; repeated while biber is skipped, it would only
    // cost passes.
    log.lines()
        .filter(|line| !line.contains("rerun LaTeX afterwards"))
        .any(|line| REQUESTS.iter().any(|request| line.contains(request)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_database_changes_its_kinds_text_and_too_deep_a_tree_never_repeats() {
        let root = std::env::temp_dir().join(format!("kinds-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        fs::create_dir_all(root.join("bib")).unwrap();
        fs::write(root.join("bib/refs.bib"), "one").unwrap();
        fs::write(root.join("main.tex"), "not a database").unwrap();
        let first = contents_of_kinds_below(&root, &["bib"]);
        assert_eq!(contents_of_kinds_below(&root, &["bib"]), first);
        fs::write(root.join("bib/refs.bib"), "two").unwrap();
        assert_ne!(contents_of_kinds_below(&root, &["bib"]), first);
        fs::write(root.join("main.tex"), "still not").unwrap();
        let second = contents_of_kinds_below(&root, &["bib"]);
        assert_eq!(contents_of_kinds_below(&root, &["bib"]), second);
        // Past the depth it can tell: a text that matches no earlier one.
        fs::create_dir_all(root.join("a/b/c/d/e/f/g/h/i/j")).unwrap();
        let deep = contents_of_kinds_below(&root, &["bib"]);
        assert_ne!(contents_of_kinds_below(&root, &["bib"]), deep);
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn the_recorder_list_keeps_only_files_of_the_compile() {
        let dir = std::env::temp_dir().join(format!("fls-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let fls = dir.join("output.fls");
        fs::write(
            &fls,
            "PWD /work/paper\nINPUT /usr/share/texlive/texmf-dist/tex/latex/base/article.cls\n\
             INPUT ./main.tex\nINPUT /work/paper/output.aux\nINPUT output.aux\n\
             INPUT /work/other/x.tex\nOUTPUT output.log\nOUTPUT ./chapters/one.aux\n\
             OUTPUT ../escape.aux\n",
        )
        .unwrap();
        let recorded = read_recorder(&fls, Path::new("/work/paper"));
        assert_eq!(
            recorded.inputs,
            [PathBuf::from("main.tex"), "output.aux".into()]
        );
        assert_eq!(
            recorded.outputs,
            [PathBuf::from("output.log"), "chapters/one.aux".into()]
        );
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn rerun_requests_are_recognised() {
        assert!(log_asks_for_rerun(
            "LaTeX Warning: Label(s) may have changed. Rerun to get cross-references right."
        ));
        assert!(log_asks_for_rerun(
            "Package rerunfilecheck Warning: File `output.out' has changed. Rerun to get outlines right"
        ));
        assert!(!log_asks_for_rerun(
            "LaTeX Warning: Citation `x' undefined."
        ));
        assert!(!log_asks_for_rerun(
            "Package biblatex Warning: Please (re)run Biber on the file:\n(biblatex)                output\n(biblatex)                and rerun LaTeX afterwards."
        ));
        assert!(log_asks_for_rerun(
            "Package biblatex Warning: Please rerun LaTeX."
        ));
    }
}
