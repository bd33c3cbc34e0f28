//! Writing the compile's files safely: the sources as sent, never through a link nor over an
//! existing file, and reading back only regular files.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use texfleet_sandbox::{is_plain_relative, FileSpec};

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
