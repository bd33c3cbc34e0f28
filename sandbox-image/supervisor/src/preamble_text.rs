//! Where a main file's preamble ends, as TeX reads it: the scheduler keys a preamble format by
//! the text up to there, and the driver dumps the format from exactly that text.

/// What ends a preamble.
pub const BEGIN_DOCUMENT: &[u8] = b"\\begin{document}";

/// Where a preamble ends: at the first `\begin{document}` outside a comment, as TeX reads it
/// (a commented-out one would end the key early, and the definitions after it would go
/// stale in the format). The whole file without one.
pub fn preamble_end(main: &[u8]) -> usize {
    let mut start = 0;
    for line in main.split_inclusive(|&byte| byte == b'\n') {
        let code = &line[..comment_start(line)];
        if let Some(at) = code
            .windows(BEGIN_DOCUMENT.len())
            .position(|window| window == BEGIN_DOCUMENT)
        {
            return start + at;
        }
        start += line.len();
    }
    main.len()
}

/// Where the comment of a line starts: its first `%` not escaped by an odd run of backslashes.
pub fn comment_start(line: &[u8]) -> usize {
    let mut backslashes = 0;
    for (at, &byte) in line.iter().enumerate() {
        match byte {
            b'%' if backslashes % 2 == 0 => return at,
            b'\\' => backslashes += 1,
            _ => backslashes = 0,
        }
    }
    line.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_preamble_ends_where_tex_reads_begin_document_not_in_a_comment() {
        assert_eq!(
            preamble_end(b"\\documentclass{x}\n% \\begin{document}\n\\begin{document}"),
            37
        );
        // An escaped percent sign starts no comment; an escaped backslash before one does not
        // escape it.
        assert_eq!(preamble_end(b"100\\%\\begin{document}"), 5);
        assert_eq!(
            preamble_end(b"\\\\%\\begin{document}\n\\begin{document}"),
            20
        );
        assert_eq!(preamble_end(b"no document"), 11);
    }
}
