//! Reading the compile's files back: only regular files, and whether the sources still hold
//! what was sent (the passes may rewrite them with `\openout`).

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use sha2::{Digest, Sha256};
use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use texfleet_sandbox::{FileSpec, Streamed};

/// The first source below `root` whose content is no longer what was sent: the passes may
/// rewrite sources (`\openout`), and what reads them afterwards must know.
pub fn first_rewritten<'a>(root: &Path, files: &'a [FileSpec]) -> Option<&'a str> {
    let holds_sent = |file: &FileSpec| -> io::Result<bool> {
        let mut opened = open_regular(&root.join(&file.path))?;
        if let Some(streamed) = &file.streamed {
            return holds_streamed(&mut opened, streamed);
        }
        let sent = BASE64
            .decode(&file.content_base64)
            .map_err(io::Error::other)?;
        let mut now = Vec::with_capacity(sent.len());
        (&mut opened)
            .take(sent.len() as u64 + 1)
            .read_to_end(&mut now)?;
        Ok(now == sent)
    };
    files
        .iter()
        .find(|file| !holds_sent(file).unwrap_or(false))
        .map(|file| file.path.as_str())
}

/// Whether `file`, read from where it is, holds what was streamed.
pub fn holds_streamed(file: &mut File, streamed: &Streamed) -> io::Result<bool> {
    if file.metadata()?.len() != streamed.bytes {
        return Ok(false);
    }
    let mut hasher = Sha256::new();
    io::copy(&mut file.take(streamed.bytes + 1), &mut hasher)?;
    Ok(format!("{:x}", hasher.finalize()) == streamed.sha256)
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
