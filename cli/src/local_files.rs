//! Writing what the server sent onto the user's disk, where the folder may come from a
//! repository nobody checked: a PDF or log path that is a symbolic link must not lead the
//! write elsewhere (`paper.log -> ~/.ssh/authorized_keys`), so each file is written beside its
//! destination under a fresh name and renamed over it, which replaces a link, never its target.

use anyhow::Context as _;
use std::io::Write as _;
use std::path::Path;

/// Writes `bytes` to `path`, replacing whatever is there (a link included) as a whole.
pub fn write_replacing(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let folder = match path.parent() {
        Some(folder) if !folder.as_os_str().is_empty() => folder,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .with_context(|| format!("{}: not a file name", path.display()))?;
    let temporary = folder.join(format!(
        ".{}.{}.partial",
        name.to_string_lossy(),
        uuid::Uuid::new_v4().simple()
    ));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&temporary)
        .and_then(|mut file| file.write_all(bytes))
        .and_then(|()| std::fs::rename(&temporary, path));
    if written.is_err() {
        std::fs::remove_file(&temporary).ok();
    }
    written.with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_in_the_way_is_replaced_and_its_target_left_alone() {
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path();
        let target = dir.join("precious.txt");
        std::fs::write(&target, "precious").unwrap();
        let link = dir.join("paper.log");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        write_replacing(&link, b"the log").unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "precious");
        assert_eq!(std::fs::read_to_string(&link).unwrap(), "the log");
        assert!(!std::fs::symlink_metadata(&link).unwrap().is_symlink());
        assert_eq!(
            std::fs::read_dir(dir).unwrap().count(),
            2,
            "no partial file is left"
        );
    }
}
