//! Removing what the compile made, for a compile again from nothing. The compile's user owns
//! every file the compile made, and may have made them hard to remove: folders without write
//! or search permission, paths longer than `PATH_MAX` (made by entering folders one by one),
//! links to elsewhere. Each folder is opened relative to its parent, never through a link, and
//! made the owner's to change first. Nothing of the compile runs meanwhile: the driver ends
//! every stray process after each step.

use nix::dir::Dir;
use nix::fcntl::{openat, AtFlags, OFlag};
use nix::sys::stat::{fchmodat, fstatat, FchmodatFlags, Mode, SFlag};
use nix::unistd::{getuid, unlinkat, UnlinkatFlags};
use std::ffi::{CString, OsStr};
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

const FOLDER_FLAGS: OFlag = OFlag::O_RDONLY
    .union(OFlag::O_DIRECTORY)
    .union(OFlag::O_NOFOLLOW)
    .union(OFlag::O_CLOEXEC);

/// Removes every entry below `folder` that this process's user owns (in `/tmp`, the image's
/// own entries stay), but its entry named `kept`. Fails at the first that cannot be removed.
pub fn own_files_under(folder: &Path, kept: Option<&OsStr>) -> io::Result<()> {
    let dir = Dir::open(folder, FOLDER_FLAGS, Mode::empty())?;
    clear(dir, getuid().as_raw(), kept)
}

fn clear(mut dir: Dir, owner: u32, kept: Option<&OsStr>) -> io::Result<()> {
    let fd = dir.as_raw_fd();
    let names: Vec<CString> = dir
        .iter()
        .collect::<Result<Vec<_>, _>>()?
        .into_iter()
        .map(|entry| entry.file_name().to_owned())
        .filter(|name| ![&b"."[..], b".."].contains(&name.as_bytes()))
        .filter(|name| kept.is_none_or(|kept| kept.as_bytes() != name.as_bytes()))
        .collect();
    for name in names {
        let status = fstatat(Some(fd), name.as_c_str(), AtFlags::AT_SYMLINK_NOFOLLOW)?;
        if status.st_uid != owner {
            continue;
        }
        if SFlag::from_bits_truncate(status.st_mode) & SFlag::S_IFMT == SFlag::S_IFDIR {
            clear(open_own_folder(fd, &name)?, owner, None)?;
            unlinkat(Some(fd), name.as_c_str(), UnlinkatFlags::RemoveDir)?;
        } else {
            unlinkat(Some(fd), name.as_c_str(), UnlinkatFlags::NoRemoveDir)?;
        }
    }
    Ok(())
}

/// The folder `name` in `parent`, made readable, searchable and writable by its owner, and
/// readable and searchable by others as a folder the driver makes is: should the clearing
/// fail below it, the supervisor must still reach the log.
fn open_own_folder(parent: RawFd, name: &CString) -> io::Result<Dir> {
    // Linux cannot change a mode without following a link; the entry was a folder a moment
    // ago and nothing of the compile runs, and the open below refuses a link anyway.
    fchmodat(
        Some(parent),
        name.as_c_str(),
        Mode::from_bits_truncate(0o755),
        FchmodatFlags::FollowSymlink,
    )?;
    let fd = openat(Some(parent), name.as_c_str(), FOLDER_FLAGS, Mode::empty())?;
    Ok(Dir::from_fd(fd)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::sys::wait::{waitpid, WaitStatus};
    use nix::unistd::{fork, mkdir, setgid, setuid, ForkResult, Gid, Uid};
    use std::fs;
    use std::os::fd::{FromRawFd, OwnedFd};
    use std::os::unix::fs::PermissionsExt;

    /// Not root, which may remove from any folder: a user like the compile's.
    const NOBODY: u32 = 65534;

    /// What the compile may leave: locked folders, a path deeper than PATH_MAX, a link out.
    fn leave_hard_to_remove(root: &Path, outside: &Path) -> io::Result<()> {
        fs::create_dir_all(root.join("locked/inner"))?;
        fs::write(root.join("locked/inner/aux.tex"), "x")?;
        std::os::unix::fs::symlink(outside, root.join("link"))?;
        let mut deep = fs::File::open(root)?;
        let level = CString::new("d".repeat(200))?;
        for _ in 0..30 {
            nix::sys::stat::mkdirat(Some(deep.as_raw_fd()), level.as_c_str(), Mode::S_IRWXU)?;
            let fd = openat(
                Some(deep.as_raw_fd()),
                level.as_c_str(),
                FOLDER_FLAGS,
                Mode::empty(),
            )?;
            // SAFETY: openat returned a new descriptor that nothing else owns.
            deep = fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
        }
        fs::write(format!("/proc/self/fd/{}/leaf", deep.as_raw_fd()), "x")?;
        for locked in ["locked/inner", "locked"] {
            fs::set_permissions(root.join(locked), fs::Permissions::from_mode(0o500))?;
        }
        Ok(())
    }

    #[test]
    fn clears_locked_folders_deep_paths_and_links_but_nothing_beyond() {
        let scratch = tempfile::tempdir().unwrap();
        let base = scratch.path();
        let (root, outside) = (base.join("work"), base.join("outside"));
        fs::create_dir_all(&outside).unwrap();
        fs::write(outside.join("kept"), "x").unwrap();
        fs::set_permissions(base, fs::Permissions::from_mode(0o777)).unwrap();
        // As another user than root, in a child of its own.
        // SAFETY: the child only makes files and exits; glibc's allocator survives a fork.
        let cleared = match unsafe { fork() }.unwrap() {
            ForkResult::Child => {
                let result = setgid(Gid::from_raw(NOBODY))
                    .and_then(|()| setuid(Uid::from_raw(NOBODY)))
                    .map_err(io::Error::from)
                    .and_then(|()| Ok(mkdir(&root, Mode::S_IRWXU)?))
                    .and_then(|()| leave_hard_to_remove(&root, &outside))
                    .and_then(|()| own_files_under(&root, None));
                // SAFETY: ends the child without running the test harness's exit handlers.
                unsafe { nix::libc::_exit(i32::from(result.is_err())) }
            }
            ForkResult::Parent { child } => waitpid(child, None).unwrap(),
        };

        assert_eq!(cleared, WaitStatus::Exited(cleared.pid().unwrap(), 0));
        assert_eq!(fs::read_dir(&root).unwrap().count(), 0);
        assert!(outside.join("kept").exists());
    }
}
