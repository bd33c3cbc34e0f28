//! Fingerprints of files, to know which generated files a pass or a tool changed, and whether
//! the databases and styles a bibliography or index tool reads changed.

use std::collections::hash_map::DefaultHasher;
use std::collections::BTreeMap;
use std::fs;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use texfleet_sandbox::WORK_DIR;

/// Files larger than this are compared by size only: generated files read back are small.
const MAX_HASHED_BYTES: u64 = 16 * 1024 * 1024;

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

/// The fingerprints of `paths` (relative to the folder the compile runs in) as they are now.
pub fn fingerprints<'a>(
    paths: impl IntoIterator<Item = &'a PathBuf>,
) -> BTreeMap<PathBuf, Option<u64>> {
    paths
        .into_iter()
        .map(|path| (path.clone(), fingerprint(path)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_database_changes_its_kinds_text_and_too_deep_a_tree_never_repeats() {
        let scratch = tempfile::tempdir().unwrap();
        let root = scratch.path();
        fs::create_dir_all(root.join("bib")).unwrap();
        fs::write(root.join("bib/refs.bib"), "one").unwrap();
        fs::write(root.join("main.tex"), "not a database").unwrap();
        let first = contents_of_kinds_below(root, &["bib"]);
        assert_eq!(contents_of_kinds_below(root, &["bib"]), first);
        fs::write(root.join("bib/refs.bib"), "two").unwrap();
        assert_ne!(contents_of_kinds_below(root, &["bib"]), first);
        fs::write(root.join("main.tex"), "still not").unwrap();
        let second = contents_of_kinds_below(root, &["bib"]);
        assert_eq!(contents_of_kinds_below(root, &["bib"]), second);
        // Past the depth it can tell: a text that matches no earlier one.
        fs::create_dir_all(root.join("a/b/c/d/e/f/g/h/i/j")).unwrap();
        let deep = contents_of_kinds_below(root, &["bib"]);
        assert_ne!(contents_of_kinds_below(root, &["bib"]), deep);
    }
}
