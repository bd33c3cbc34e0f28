//! The compile's outputs, taken out of the work directory without trusting it: only regular
//! files with one link, never through a symlink, only up to their caps; and the signs that the
//! compile hit a disk limit, which TeX reports only as a failed write.

use nix::fcntl::{openat, OFlag};
use nix::libc;
use nix::sys::stat::Mode;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Component, Path};
use texfleet_sandbox::{Limit, Report};

/// What may be left of the work directory when it counts as full.
const NEARLY_FULL_BYTES: u64 = 1024 * 1024;
const NEARLY_FULL_INODES: u64 = 16;

/// Whether `bytes` more in `files` new files leave the work directory short of full as
/// [`disk_limit_reached`] judges it. A file system that reports no totals (gVisor's tmpfs) says
/// nothing about fullness. "Nearly full" counts: TeX deletes its unfinished SyncTeX file when it
/// dies of a full directory, which frees a little again.
pub fn leaves_room(work: &Path, bytes: u64, files: u64) -> bool {
    let Ok(stats) = nix::sys::statvfs::statvfs(work) else {
        return true;
    };
    let free_bytes = stats.blocks_available() * stats.fragment_size();
    let space = stats.blocks() == 0 || free_bytes >= bytes.saturating_add(NEARLY_FULL_BYTES);
    let inodes = stats.files() == 0 || stats.files_available() >= files + NEARLY_FULL_INODES;
    space && inodes
}

/// Whether the compile filled its tmpfs (space or inodes) or grew a file to the file-size
/// limit, which TeX reports only as a failed write or a SIGXFSZ death.
pub fn disk_limit_reached(work: &Path, largest_file: u64) -> Option<String> {
    if !leaves_room(work, 0, 0) {
        return Some("the work directory is full".to_string());
    }
    let mut pending = vec![work.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in fs::read_dir(&dir).into_iter().flatten().flatten() {
            // symlink_metadata: a link is never followed out of the work directory.
            let Ok(metadata) = entry.path().symlink_metadata() else {
                continue;
            };
            if metadata.is_dir() {
                pending.push(entry.path());
            } else if metadata.is_file() && metadata.len() + 1 >= largest_file {
                return Some(format!(
                    "{} reached the file size limit",
                    entry.path().display()
                ));
            }
        }
    }
    None
}

/// Opens `relative` below `root` without following a symlink anywhere on the way: each
/// folder with `O_NOFOLLOW | O_DIRECTORY`, the file with `O_NOFOLLOW` and `O_NONBLOCK` (a
/// FIFO does not block). The compile owns every folder below `root` and may have replaced
/// one with a link to somewhere else.
fn open_beneath(root: &Path, relative: &Path) -> io::Result<File> {
    let mut current = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY)
        .open(root)?;
    let components: Vec<Component> = relative.components().collect();
    for (index, component) in components.iter().enumerate() {
        let Component::Normal(name) = component else {
            return Err(io::Error::other("not a plain relative path"));
        };
        let last = index + 1 == components.len();
        let flags = if last {
            OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC
        } else {
            OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC
        };
        let fd = openat(Some(current.as_raw_fd()), *name, flags, Mode::empty())?;
        // SAFETY: openat returned a new descriptor that nothing else owns.
        current = unsafe { File::from_raw_fd(fd) };
    }
    Ok(current)
}

/// Reads `directory/name` below `root` only if it is a regular file with one link, reached
/// without following a symlink ([`open_beneath`]), and only up to its cap: a larger one is
/// truncated and the compile hit its output limit.
pub fn take_output(
    root: &Path,
    directory: &Path,
    name: &str,
    cap: u64,
    report: &mut Report,
) -> Option<Vec<u8>> {
    let mut content = take(root, &directory.join(name), cap, report)?;
    if content.len() as u64 > cap {
        content.truncate(cap as usize);
        report.limit.get_or_insert(Limit::Output);
        report
            .notes
            .push(format!("{name}: larger than {cap} bytes; truncated"));
    }
    Some(content)
}

/// Up to `cap + 1` bytes of the regular, singly linked file at `relative` below `root`.
fn take(root: &Path, relative: &Path, cap: u64, report: &mut Report) -> Option<Vec<u8>> {
    let name = relative.display();
    let file = match open_beneath(root, relative) {
        Ok(file) => file,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return None,
        Err(error) => {
            report.notes.push(format!("{name}: not opened: {error}"));
            return None;
        }
    };
    let metadata = file.metadata().ok()?;
    if !metadata.file_type().is_file() || metadata.nlink() != 1 {
        report
            .notes
            .push(format!("{name}: not a regular file with one link; ignored"));
        return None;
    }
    let mut content = Vec::new();
    if let Err(error) = (&file).take(cap + 1).read_to_end(&mut content) {
        report.notes.push(format!("{name}: read failed: {error}"));
        return None;
    }
    Some(content)
}

pub fn append<W: Write>(
    archive: &mut tar::Builder<W>,
    name: &str,
    content: &[u8],
) -> io::Result<()> {
    let mut header = tar::Header::new_gnu();
    header.set_size(content.len() as u64);
    header.set_mode(0o644);
    header.set_entry_type(tar::EntryType::Regular);
    header.set_cksum();
    archive.append_data(&mut header, name, content)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_a_regular_output_up_to_its_cap() {
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path();
        fs::write(dir.join("output.log"), b"0123456789").unwrap();
        let mut report = Report::default();
        assert_eq!(
            take_output(dir, Path::new(""), "output.log", 100, &mut report).unwrap(),
            b"0123456789"
        );
        assert_eq!(report.limit, None);
        assert_eq!(
            take_output(dir, Path::new(""), "output.log", 4, &mut report).unwrap(),
            b"0123"
        );
        assert_eq!(report.limit, Some(Limit::Output));
        assert!(take_output(dir, Path::new(""), "missing.pdf", 100, &mut report).is_none());
    }

    #[test]
    fn refuses_symlinks_hard_links_fifos_and_directories() {
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path();
        fs::write(dir.join("secret"), b"secret").unwrap();
        std::os::unix::fs::symlink(dir.join("secret"), dir.join("symlinked.pdf")).unwrap();
        fs::hard_link(dir.join("secret"), dir.join("linked.pdf")).unwrap();
        nix::unistd::mkfifo(&dir.join("fifo.pdf"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        fs::create_dir(dir.join("dir.pdf")).unwrap();
        let mut report = Report::default();
        for name in ["symlinked.pdf", "linked.pdf", "fifo.pdf", "dir.pdf"] {
            assert!(
                take_output(dir, Path::new(""), name, 100, &mut report).is_none(),
                "{name} was taken"
            );
        }
        assert_eq!(report.notes.len(), 4, "{:?}", report.notes);
    }

    #[test]
    fn refuses_a_folder_replaced_by_a_symlink() {
        let (scratch, other) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (dir, elsewhere) = (scratch.path(), other.path());
        fs::write(elsewhere.join("output.pdf"), b"planted").unwrap();
        std::os::unix::fs::symlink(elsewhere, dir.join("paper")).unwrap();
        fs::create_dir(dir.join("real")).unwrap();
        fs::write(dir.join("real/output.pdf"), b"honest").unwrap();
        let mut report = Report::default();
        let taken = |folder: &str, report: &mut Report| {
            take_output(dir, Path::new(folder), "output.pdf", 100, report)
        };
        assert_eq!(taken("real", &mut report).as_deref(), Some(&b"honest"[..]));
        assert!(taken("paper", &mut report).is_none());
        assert!(taken("../elsewhere", &mut report).is_none());
    }

    #[test]
    fn a_full_or_capped_work_directory_is_an_output_limit() {
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path();
        fs::create_dir(dir.join("sub")).unwrap();
        fs::write(dir.join("sub/small.txt"), b"abc").unwrap();
        assert_eq!(disk_limit_reached(dir, 100), None);
        fs::write(dir.join("sub/big.txt"), vec![b'x'; 99]).unwrap();
        assert!(disk_limit_reached(dir, 100).is_some());
    }
}
