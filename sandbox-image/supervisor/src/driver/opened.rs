//! Which files of the work directory a program opened, as the kernel saw it (inotify), not as
//! the program recorded it: TeX writes its own recorder (`output.fls`) and a document can
//! overwrite it with `\openout`, hiding what its preamble read from the format's key.

use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};
use std::collections::{BTreeSet, HashMap};
use std::io;
use std::path::{Path, PathBuf};

/// Every folder below a root, watched for files opened and folders made.
pub struct Watch {
    inotify: Inotify,
    folders: HashMap<WatchDescriptor, PathBuf>,
}

impl Watch {
    /// Starts watching `root` and every folder below it (links are not followed).
    pub fn start(root: &Path) -> io::Result<Watch> {
        // Close-on-exec: the program watched must not read what it does.
        let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)
            .map_err(io::Error::other)?;
        let mut watch = Watch {
            inotify,
            folders: HashMap::new(),
        };
        let mut pending = vec![PathBuf::new()];
        while let Some(relative) = pending.pop() {
            let folder = root.join(&relative);
            let descriptor = watch
                .inotify
                .add_watch(&folder, AddWatchFlags::IN_OPEN | AddWatchFlags::IN_CREATE)
                .map_err(io::Error::other)?;
            watch.folders.insert(descriptor, relative.clone());
            for entry in std::fs::read_dir(&folder)? {
                let entry = entry?;
                if entry.file_type()?.is_dir() {
                    pending.push(relative.join(entry.file_name()));
                }
            }
        }
        Ok(watch)
    }

    /// The files opened since the start, relative to the root; an error when a folder was
    /// made (it was not watched) or the kernel dropped events.
    pub fn opened(self) -> Result<BTreeSet<PathBuf>, String> {
        let mut opened = BTreeSet::new();
        loop {
            let events = match self.inotify.read_events() {
                Ok(events) => events,
                Err(nix::errno::Errno::EAGAIN) => return Ok(opened),
                Err(errno) => return Err(format!("what it opened cannot be read: {errno}")),
            };
            for event in events {
                if event.mask.contains(AddWatchFlags::IN_Q_OVERFLOW) {
                    return Err("it opened more files than can be followed".into());
                }
                let (Some(folder), Some(name)) = (self.folders.get(&event.wd), event.name) else {
                    continue;
                };
                let path = folder.join(name);
                if event.mask.contains(AddWatchFlags::IN_ISDIR) {
                    if event.mask.contains(AddWatchFlags::IN_CREATE) {
                        return Err(format!("it made the folder {}", path.display()));
                    }
                } else if event.mask.contains(AddWatchFlags::IN_OPEN) {
                    opened.insert(path);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_opened_below_the_root_is_seen_and_a_folder_made_refused() {
        let root = std::env::temp_dir().join(format!("texfleet-opened-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("ch")).unwrap();
        std::fs::write(root.join("main.tex"), "x").unwrap();
        std::fs::write(root.join("ch/one.tex"), "x").unwrap();
        std::fs::write(root.join("unread.tex"), "x").unwrap();
        let watch = Watch::start(&root).unwrap();
        std::fs::read(root.join("ch/one.tex")).unwrap();
        std::fs::write(root.join("written.tex"), "x").unwrap();
        let opened = watch.opened().unwrap();
        let expected: BTreeSet<PathBuf> = ["ch/one.tex", "written.tex"].map(PathBuf::from).into();
        assert_eq!(opened, expected);
        let watch = Watch::start(&root).unwrap();
        std::fs::create_dir(root.join("new")).unwrap();
        assert!(watch.opened().unwrap_err().contains("made the folder new"));
        std::fs::remove_dir_all(&root).unwrap();
    }
}
