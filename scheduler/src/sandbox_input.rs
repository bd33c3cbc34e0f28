//! What a sandbox reads on its stdin: the head (the spec as JSON, then a format) made in
//! memory, then the project files the spec marks streamed, copied from this scheduler's disk
//! cache as the sandbox takes them. A job of a hundred megabytes of figures is never held in
//! memory, nor base64'd.

use std::io;
use tokio::io::{AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};

/// The reads from the disk cache: large enough that a file costs few system calls.
const STREAM_BUFFER_BYTES: usize = 256 * 1024;

/// A project file a job streams into its sandbox, opened in the disk cache: an eviction
/// meanwhile unlinks its name, not the file.
pub struct OpenedFile {
    pub size: u64,
    pub file: tokio::fs::File,
}

/// A sandbox's whole stdin.
pub struct SandboxInput {
    head: Vec<u8>,
    streamed: Vec<OpenedFile>,
}

impl SandboxInput {
    /// `head`, then each of `streamed` in its order (that of the spec's streamed files).
    pub fn new(head: Vec<u8>, streamed: Vec<OpenedFile>) -> SandboxInput {
        SandboxInput { head, streamed }
    }

    /// Writes it all to `writer`; a cached file shorter than when it was opened is an error,
    /// not a sandbox reading on into the next one.
    pub async fn write_to(self, writer: &mut (impl AsyncWrite + Unpin)) -> io::Result<()> {
        writer.write_all(&self.head).await?;
        for OpenedFile { size, file } in self.streamed {
            let mut reader = BufReader::with_capacity(STREAM_BUFFER_BYTES, file.take(size));
            let copied = tokio::io::copy_buf(&mut reader, writer).await?;
            if copied != size {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("a cached project file ended at {copied} of its {size} bytes"),
                ));
            }
        }
        Ok(())
    }
}

impl From<Vec<u8>> for SandboxInput {
    fn from(head: Vec<u8>) -> SandboxInput {
        SandboxInput::new(head, Vec::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn opened(content: &[u8]) -> OpenedFile {
        let path = std::env::temp_dir().join(format!("texfleet-input-{}", uuid::Uuid::new_v4()));
        tokio::fs::write(&path, content).await.unwrap();
        let file = tokio::fs::File::open(&path).await.unwrap();
        tokio::fs::remove_file(&path).await.unwrap();
        OpenedFile {
            size: content.len() as u64,
            file,
        }
    }

    #[tokio::test]
    async fn the_head_then_each_streamed_file_in_order() {
        let streamed = vec![opened(b"first").await, opened(b"second").await];
        let mut written = Vec::new();
        let input = SandboxInput::new(b"head\n".to_vec(), streamed);
        input.write_to(&mut written).await.unwrap();
        assert_eq!(written, b"head\nfirstsecond");
    }

    #[tokio::test]
    async fn a_cached_file_shorter_than_opened_is_an_error() {
        let mut short = opened(b"abc").await;
        short.size = 4;
        let mut written = Vec::new();
        let input = SandboxInput::new(Vec::new(), vec![short]);
        let error = input.write_to(&mut written).await.unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::UnexpectedEof);
    }
}
