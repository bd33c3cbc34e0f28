//! Writing the compile's files safely: the sources as sent, never through a link nor over an
//! existing file.

use super::set_aside::SetAside;
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use texfleet_sandbox::{is_plain_relative, FileSpec, Streamed};

/// Where [`write_sources`] takes the streamed sources from.
pub enum StreamedFrom<'a> {
    /// Their bytes one after the other, as on stdin.
    Bytes(&'a mut dyn Read),
    /// Set aside whole ([`SetAside::take`]): each is moved back.
    SetAside(&'a SetAside),
}

/// Writes each source below `root`, refusing to follow or replace anything, the streamed ones
/// from `streamed` in their order. (The API has already refused unsafe paths; this is a second
/// line, not the first.)
pub fn write_sources(
    root: &Path,
    files: &[FileSpec],
    mut streamed: StreamedFrom,
) -> io::Result<()> {
    let mut streamed_index = 0;
    for file in files {
        let path = Path::new(&file.path);
        if !is_plain_relative(path) {
            return Err(io::Error::other(format!("unsafe path {:?}", file.path)));
        }
        let path = root.join(path);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent)?;
        }
        match &file.streamed {
            None => {
                let content = BASE64
                    .decode(&file.content_base64)
                    .map_err(io::Error::other)?;
                create_new(&path)?.write_all(&content)?;
            }
            Some(Streamed { bytes, .. }) => {
                match &mut streamed {
                    StreamedFrom::Bytes(input) => {
                        let copied =
                            io::copy(&mut (&mut **input).take(*bytes), &mut create_new(&path)?)?;
                        if copied != *bytes {
                            return Err(io::Error::other(format!("{} ended early", file.path)));
                        }
                    }
                    StreamedFrom::SetAside(aside) => aside.put_back(streamed_index, &path)?,
                }
                streamed_index += 1;
            }
        }
    }
    Ok(())
}

/// Writes a file that must not exist yet, never through a link.
pub fn write_new(path: &Path, bytes: &[u8]) -> io::Result<()> {
    create_new(path)?.write_all(bytes)
}

fn create_new(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)
}

/// Replaces the file at `path` (the compile's, in a folder of the compile) with `bytes`.
pub fn replace(path: &Path, bytes: &[u8]) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(error) if error.kind() != io::ErrorKind::NotFound => return Err(error),
        _ => {}
    }
    write_new(path, bytes)
}

#[cfg(test)]
pub mod tests {
    use super::super::read_back::first_rewritten;
    use super::*;
    use sha2::{Digest, Sha256};

    pub fn streamed(path: &str, content: &[u8]) -> FileSpec {
        FileSpec {
            path: path.into(),
            content_base64: String::new(),
            streamed: Some(Streamed {
                bytes: content.len() as u64,
                sha256: format!("{:x}", Sha256::digest(content)),
            }),
        }
    }

    #[test]
    fn streamed_sources_are_written_in_order_and_their_rewrites_seen_by_hash() {
        let root = tempfile::tempdir().unwrap();
        let files = [
            streamed("a.png", b"PNG"),
            FileSpec {
                path: "main.tex".into(),
                content_base64: BASE64.encode(b"tex"),
                streamed: None,
            },
            streamed("fig/b.pdf", b"%PDF"),
        ];
        let mut input: &[u8] = b"PNG%PDFrest";
        write_sources(root.path(), &files, StreamedFrom::Bytes(&mut input)).unwrap();
        assert_eq!(fs::read(root.path().join("a.png")).unwrap(), b"PNG");
        assert_eq!(fs::read(root.path().join("main.tex")).unwrap(), b"tex");
        assert_eq!(fs::read(root.path().join("fig/b.pdf")).unwrap(), b"%PDF");
        assert_eq!(input, b"rest");
        assert_eq!(first_rewritten(root.path(), &files), None);
        fs::write(root.path().join("fig/b.pdf"), b"%PDX").unwrap();
        assert_eq!(first_rewritten(root.path(), &files), Some("fig/b.pdf"));
        fs::write(root.path().join("fig/b.pdf"), b"%PDF+").unwrap();
        assert_eq!(first_rewritten(root.path(), &files), Some("fig/b.pdf"));
    }

    #[test]
    fn a_stream_that_ends_early_is_an_error() {
        let root = tempfile::tempdir().unwrap();
        let mut input: &[u8] = b"PN";
        let files = [streamed("a.png", b"PNG")];
        assert!(write_sources(root.path(), &files, StreamedFrom::Bytes(&mut input)).is_err());
    }
}
