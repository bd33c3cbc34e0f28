//! The streamed sources kept through a compile again from nothing. Their bytes came once, on
//! stdin; the work directory may not hold them twice (a job's files take up to 160 MiB of
//! its 256 MB). So each is checked against its hash and moved, not copied, into a folder of
//! its own that clearing the work directory passes over, then moved back into place.
//! Nothing of the compile runs meanwhile: the driver ends every stray process after each
//! step.

use super::read_back::{holds_streamed, open_regular};
use nix::fcntl::{renameat2, RenameFlags};
use std::ffi::OsStr;
use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use texfleet_sandbox::FileSpec;

/// The folder in the work directory that holds them meanwhile. A name no job file may have
/// (the API refuses names that start with `.`); should the compile have made one, the compile
/// cannot start again and ends with its log.
const FOLDER: &str = ".texfleet-set-aside";

pub struct SetAside {
    folder: PathBuf,
}

impl SetAside {
    /// Moves the streamed sources below `root` aside, in their order. Fails at the first the
    /// compile rewrote, and at one that is not the file just checked once moved.
    pub fn take(root: &Path, files: &[FileSpec]) -> io::Result<SetAside> {
        let folder = root.join(FOLDER);
        fs::create_dir(&folder)?;
        let streamed = files
            .iter()
            .filter_map(|file| Some((&file.path, file.streamed.as_ref()?)));
        for (index, (path, sent)) in streamed.enumerate() {
            let at = root.join(path);
            let mut checked = open_regular(&at)?;
            if !holds_streamed(&mut checked, sent)? {
                return Err(io::Error::other(format!("the compile rewrote {path}")));
            }
            let aside = folder.join(index.to_string());
            fs::rename(&at, &aside)?;
            let (moved, checked) = (fs::symlink_metadata(&aside)?, checked.metadata()?);
            if !moved.is_file() || (moved.dev(), moved.ino()) != (checked.dev(), checked.ino()) {
                return Err(io::Error::other(format!("{path} changed while set aside")));
            }
        }
        Ok(SetAside { folder })
    }

    /// The name of the folder, in the work directory, that clearing passes over.
    pub fn folder_name(&self) -> &OsStr {
        OsStr::new(FOLDER)
    }

    /// Moves the `index`th streamed source back, to `path`, never over a file already there.
    pub fn put_back(&self, index: usize, path: &Path) -> io::Result<()> {
        let aside = self.folder.join(index.to_string());
        renameat2(None, &aside, None, path, RenameFlags::RENAME_NOREPLACE)?;
        Ok(())
    }

    /// Removes the folder, empty once every source is back.
    pub fn finish(self) -> io::Result<()> {
        fs::remove_dir(&self.folder)
    }
}

#[cfg(test)]
mod tests {
    use super::super::clear::own_files_under;
    use super::super::files::tests::streamed;
    use super::super::files::{write_sources, StreamedFrom};
    use super::*;

    #[test]
    fn streamed_sources_are_moved_back_as_sent_through_a_clearing_and_never_as_rewritten() {
        let root = tempfile::tempdir().unwrap();
        let files = [streamed("a.png", b"PNG"), streamed("fig/b.pdf", b"%PDF")];
        let sent = StreamedFrom::Bytes(&mut &b"PNG%PDF"[..]);
        write_sources(root.path(), &files, sent).unwrap();
        let inode = |path: &str| fs::metadata(root.path().join(path)).unwrap().ino();
        let before = inode("fig/b.pdf");

        let aside = SetAside::take(root.path(), &files).unwrap();
        own_files_under(root.path(), Some(aside.folder_name())).unwrap();
        assert!(!root.path().join("fig").exists(), "the rest is cleared");
        write_sources(root.path(), &files, StreamedFrom::SetAside(&aside)).unwrap();
        aside.finish().unwrap();
        assert_eq!(fs::read(root.path().join("a.png")).unwrap(), b"PNG");
        assert_eq!(fs::read(root.path().join("fig/b.pdf")).unwrap(), b"%PDF");
        assert_eq!(inode("fig/b.pdf"), before, "moved, not copied");
        assert!(!root.path().join(FOLDER).exists());

        fs::write(root.path().join("fig/b.pdf"), b"%PDX").unwrap();
        let Err(error) = SetAside::take(root.path(), &files) else {
            panic!("a rewritten source is set aside");
        };
        assert!(error.to_string().contains("rewrote fig/b.pdf"), "{error}");
    }

    #[test]
    fn a_source_is_never_put_back_over_a_file() {
        let root = tempfile::tempdir().unwrap();
        let files = [streamed("a.png", b"PNG")];
        write_sources(root.path(), &files, StreamedFrom::Bytes(&mut &b"PNG"[..])).unwrap();
        let aside = SetAside::take(root.path(), &files).unwrap();
        fs::write(root.path().join("a.png"), b"there").unwrap();
        let Err(error) = aside.put_back(0, &root.path().join("a.png")) else {
            panic!("a source is put back over a file");
        };
        assert_eq!(error.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(fs::read(root.path().join("a.png")).unwrap(), b"there");
    }
}
