//! Which preambles may become a format, the rules the scheduler and the compile driver share.
//! A preamble ends where TeX reads the first `\begin{document}` ([`preamble_end`]): the
//! scheduler keys a format by the text up to there, and the driver dumps the format from
//! exactly that text. [`why_not_keyable`] refuses main files where TeX could read the preamble
//! otherwise than that text says (a `\begin{document}` hidden behind `^^25`, or in a macro's
//! body, would leave definitions in the format that the key does not cover; loading such a
//! format, TeX skips the preamble up to the first `\begin{document}` it sees, which need not
//! be the key's), or that sets state a format does not keep; the driver refuses a dump that
//! read one of [`STATE_A_FORMAT_DROPS`].

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
fn comment_start(line: &[u8]) -> usize {
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

/// Files of TeX's trees that set pdfTeX state a format does not keep: glyph names' Unicode
/// values (`\input glyphtounicode` with `\pdfgentounicode=1`, common in CV templates), font
/// map lines, and what minted learns of the shell escape. A format of a preamble that reads
/// one would give later PDFs other text or other fonts than the same request without the
/// cache, and the check pass, which renders only this compile's pages, cannot tell (a font
/// remapped that the dumping body does not use).
pub const STATE_A_FORMAT_DROPS: &[&str] = &[
    "glyphtounicode",
    "pdfx.sty",
    "tagpdf.sty",
    "armtex.sty",
    "knitting.sty",
    "russ.sty",
    "typeface.sty",
    "oblivoir-utf.cls",
    // minted finds out at load time whether it may run latexminted; the dump runs without
    // shell escape, so a format would say it may not.
    "minted.sty",
];

/// What may move where TeX stops reading a preamble or hide text from [`comment_start`] (`^^`
/// notation: `^^25` is a `%`; catcode changes; mylatexformat's own end marker), and pdfTeX's
/// state that a format does not keep (font map lines, glyph names' Unicode values, the
/// document information and catalog entries and objects: a font remapped in the preamble
/// would render otherwise than the same request without the cache, and a preamble's
/// `\pdfinfo` title would be missing from every hit).
const UNKEYABLE: [&[u8]; 11] = [
    b"^^",
    b"\\catcode",
    b"endofdump",
    b"\\pdfmapline",
    b"\\pdfmapfile",
    b"\\pdfglyphtounicode",
    b"\\pdfinfo",
    b"\\pdfcatalog",
    b"\\pdfnames",
    b"\\pdftrailer",
    b"\\pdfobj",
];

/// Why a format of this main file's preamble could be stale, or None when it cannot: its
/// `\begin{document}` must be the only one in the file, at the start of its line, outside
/// any braces and comments, and the preamble must hold none of [`UNKEYABLE`]. Such a file
/// only costs its compiles the cache.
pub fn why_not_keyable(main: &[u8]) -> Option<&'static str> {
    let end = preamble_end(main);
    let occurrences = main
        .windows(BEGIN_DOCUMENT.len())
        .filter(|window| *window == BEGIN_DOCUMENT)
        .count();
    if end == main.len() || occurrences != 1 {
        return Some("the main file holds \\begin{document} other than once");
    }
    let preamble = &main[..end];
    let line_start = preamble
        .iter()
        .rposition(|&byte| byte == b'\n')
        .map_or(0, |at| at + 1);
    if !preamble[line_start..].iter().all(u8::is_ascii_whitespace) {
        return Some("\\begin{document} does not start its line");
    }
    let holds = |text: &[u8], token: &[u8]| text.windows(token.len()).any(|window| window == token);
    if UNKEYABLE.iter().any(|token| holds(preamble, token)) {
        return Some("the preamble holds what a format does not keep or what moves its end");
    }
    // Loading a format, mylatexformat skips the preamble up to a line with a `\begin` of any
    // environment whose name holds `document` (`xdocumentx`, say), not only
    // `\begin{document}`: what follows would run twice.
    let begins = preamble.windows(b"\\begin".len()).enumerate();
    for (at, _) in begins.filter(|(_, window)| *window == b"\\begin") {
        let name = &preamble[at + b"\\begin".len()..];
        let name = &name[..name
            .iter()
            .position(|&byte| byte == b'}')
            .unwrap_or(name.len())];
        if holds(name, b"document") {
            return Some("the preamble begins an environment named like document");
        }
    }
    let mut depth = 0i64;
    for line in preamble.split_inclusive(|&byte| byte == b'\n') {
        let mut escaped = false;
        for &byte in &line[..comment_start(line)] {
            match byte {
                b'{' if !escaped => depth += 1,
                b'}' if !escaped => depth -= 1,
                _ => {}
            }
            escaped = byte == b'\\' && !escaped;
        }
    }
    (depth != 0).then_some("\\begin{document} is inside braces")
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

    #[test]
    fn a_main_file_is_keyable_only_where_tex_stops_where_its_text_says() {
        let plain =
            "\\documentclass{article}\n\\newcommand{\\x}{\\{}\n  \\begin{document}x\\end{document}";
        assert_eq!(why_not_keyable(plain.as_bytes()), None);
        for stale in [
            // A second one, commented out or not: TeX may stop at either.
            "\\documentclass{article}\n%\\begin{document}\n\\begin{document}\\end{document}",
            // Skipped by TeX, or run later from a macro's body.
            "\\documentclass{article}\\iffalse\\begin{document}\\fi\n\\go x\\end{document}",
            "\\documentclass{article}\\def\\go{\n\\begin{document}}\n\\go x\\end{document}",
            // ^^25 is a comment character to TeX, and so may be any character after \catcode.
            "\\documentclass{article}\\def\\x{^^41}\n\\begin{document}\\x\\end{document}",
            "\\documentclass{article}\\catcode`\\|=14\n\\begin{document}\\end{document}",
            "\\documentclass{article}\\endofdump\n\\begin{document}\\end{document}",
            "\\documentclass{article}\\csname endofdump\\endcsname\n\\begin{document}\\end{document}",
            "\\documentclass{article}\\pdfmapline{=cmr10 CMR10 <cmtt10.pfb}\n\\begin{document}\\end{document}",
            "\\documentclass{article}\\pdfinfo{/Title (T)}\n\\begin{document}\\end{document}",
            "\\documentclass{article}\n\\begin{xdocumentx}\\end{xdocumentx}\n\\begin{document}\\end{document}",
            "\\documentclass{article}\\end{document}",
        ] {
            assert!(why_not_keyable(stale.as_bytes()).is_some(), "{stale}");
        }
    }
}
