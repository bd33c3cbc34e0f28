//! What the compile driver hands the supervisor for the document's next compile: its
//! [`DriverState`] and the preamble format it dumped, written once, when the driver ends by
//! itself, through a pipe that only the driver holds.
//!
//! Not through a file: any file the driver can write, the document (the same user) can write
//! too, and a driver that failed before its end would leave the document's file to be taken as
//! its own. The pipe's writer is the driver's standard output, which the driver moves to a
//! close-on-exec descriptor before anything of the document runs ([`take_channel`]); being
//! non-dumpable, the driver cannot have it taken through `/proc` either.
//!
//! The stream: the format's length on a line, the state as JSON on a line, the format's bytes,
//! and nothing after. Anything else, or more than the caps allow, hands nothing on.

use nix::fcntl::{fcntl, FcntlArg};
use nix::unistd::dup2;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use texfleet_sandbox::{DriverState, MAX_FORMAT_BYTES, MAX_STATE_BYTES};

/// The longest first line: a u64 in decimal and its newline.
const MAX_LENGTH_LINE: u64 = 21;

/// What the supervisor passes on: the state's JSON as the driver wrote it (the scheduler
/// parses and bounds it), and the format, empty without one.
#[derive(Debug, PartialEq, Eq)]
pub struct Handover {
    pub state: Vec<u8>,
    pub format: Vec<u8>,
}

/// In the driver, first thing: takes its standard output (the pipe) as the channel, on a
/// descriptor that no program it starts inherits, and puts `/dev/null` in its place, so that
/// nothing else the driver prints (a panic) gets into the stream.
pub fn take_channel() -> io::Result<File> {
    let fd = fcntl(1, FcntlArg::F_DUPFD_CLOEXEC(3)).map_err(io::Error::other)?;
    // SAFETY: fcntl returned a new descriptor that nothing else owns.
    let channel = unsafe { File::from_raw_fd(fd) };
    let null = File::options().write(true).open("/dev/null")?;
    for standard in [1, 2] {
        dup2(null.as_raw_fd(), standard).map_err(io::Error::other)?;
    }
    Ok(channel)
}

/// In the driver, last thing: hands on `state` and `format`.
pub fn write(channel: File, state: &DriverState, format: &[u8]) -> io::Result<()> {
    let mut writer = io::BufWriter::new(channel);
    writeln!(writer, "{}", format.len())?;
    serde_json::to_writer(&mut writer, state).map_err(io::Error::other)?;
    writer.write_all(b"\n")?;
    writer.write_all(format)?;
    writer.flush()
}

/// In the supervisor: reads the whole handover, or None when the driver wrote none. Stops
/// reading at the first byte out of the protocol or over a cap, so that a driver writing on
/// meets a closed pipe instead of blocking.
pub fn read(channel: impl Read) -> io::Result<Option<Handover>> {
    let mut reader = BufReader::new(channel);
    let mut length = Vec::new();
    (&mut reader)
        .take(MAX_LENGTH_LINE)
        .read_until(b'\n', &mut length)?;
    if length.is_empty() {
        return Ok(None);
    }
    let format_bytes = line(length)
        .and_then(|digits| String::from_utf8(digits).ok())
        .and_then(|digits| digits.parse::<u64>().ok())
        .filter(|&bytes| bytes <= MAX_FORMAT_BYTES)
        .ok_or_else(|| io::Error::other("the handover's format length is not one"))?;
    let mut state = Vec::new();
    (&mut reader)
        .take(MAX_STATE_BYTES + 1)
        .read_until(b'\n', &mut state)?;
    let state = line(state)
        .filter(|state| state.len() as u64 <= MAX_STATE_BYTES)
        .ok_or_else(|| io::Error::other("the handover's state is not one line within its cap"))?;
    let mut format = Vec::new();
    (&mut reader)
        .take(format_bytes + 1)
        .read_to_end(&mut format)?;
    if format.len() as u64 != format_bytes {
        return Err(io::Error::other(
            "the handover's format is not of its length",
        ));
    }
    Ok(Some(Handover { state, format }))
}

/// `bytes` without the newline that must end it.
fn line(mut bytes: Vec<u8>) -> Option<Vec<u8>> {
    (bytes.pop() == Some(b'\n')).then_some(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hands_on_exactly_what_the_driver_wrote_and_nothing_else() {
        let state = DriverState {
            restarted: true,
            ..DriverState::default()
        };
        let (reader, writer) = nix::unistd::pipe().unwrap();
        write(File::from(writer), &state, b"\n\0fmt").unwrap();
        let mut stream = Vec::new();
        File::from(reader).read_to_end(&mut stream).unwrap();
        let handover = read(stream.as_slice()).unwrap().unwrap();
        assert_eq!(
            serde_json::from_slice::<DriverState>(&handover.state).unwrap(),
            state
        );
        assert_eq!(handover.format, b"\n\0fmt");

        assert_eq!(read(&b""[..]).unwrap(), None);
        let cut = &stream[..stream.len() - 1];
        let longer = [stream.as_slice(), b"x"].concat();
        let no_length = [b"five\n".as_slice(), &stream[2..]].concat();
        let over_cap = format!("{}\n{{}}\n", MAX_FORMAT_BYTES + 1);
        for forged in [cut, &longer, &no_length, over_cap.as_bytes()] {
            assert!(
                read(forged).is_err(),
                "{:?}",
                String::from_utf8_lossy(forged)
            );
        }
    }
}
