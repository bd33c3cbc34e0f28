//! The key a preamble format is kept under, and which main files may have one: a format may
//! load only for a job whose preamble, and every source the dump read, are those it was
//! dumped from. The key covers the main file up to [`preamble_end`], and the driver dumps the
//! format from the main file cut there, so the format holds nothing of the main file beyond
//! the key. [`why_not_keyable`] refuses main files where TeX could read the preamble otherwise
//! than that text says (a `\begin{document}` hidden behind `^^25`, or in a macro's body,
//! would leave definitions in the format that the key does not cover; loading such a format, TeX
//! skips the preamble up to the first `\begin{document}` it sees, which need not be the key's).

use serde::{Deserialize, Serialize};
use texfleet_core::digest::sha256_hex;
use texfleet_core::model::ClaimedJob;
use texfleet_sandbox::{comment_start, preamble_end, BEGIN_DOCUMENT};

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

/// Everything a format's content depends on beyond TeX's trees (which the image fixes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FormatKey {
    image_id: String,
    source_date_epoch: i64,
    preamble_sha256: String,
    paths_sha256: String,
    /// The sources the dump read but the main file, each with the hex SHA-256 of its content.
    reads: Vec<(String, String)>,
}

impl FormatKey {
    /// The sources the dump read, but the main file.
    pub fn read_paths(&self) -> Vec<String> {
        self.reads.iter().map(|(path, _)| path.clone()).collect()
    }

    /// The key of `job`'s preamble if its dump read `reads`; None when one of them is not a
    /// source of the job.
    pub fn of(job: &ClaimedJob, image_id: &str, reads: &[String]) -> Option<FormatKey> {
        let source = |path: &str| job.files.iter().find(|file| file.path == path);
        let main = &source(&job.main)?.content;
        let preamble = &main[..preamble_end(main)];
        let mut paths: Vec<&str> = job.files.iter().map(|file| file.path.as_str()).collect();
        paths.sort_unstable();
        // The dump read the main file only up to `\begin{document}`: the preamble's hash.
        let reads = reads
            .iter()
            .filter(|path| **path != job.main)
            .map(|path| Some((path.clone(), sha256_hex(&source(path)?.content))))
            .collect::<Option<Vec<_>>>()?;
        Some(FormatKey {
            image_id: image_id.to_string(),
            source_date_epoch: job.source_date_epoch,
            preamble_sha256: sha256_hex(preamble),
            paths_sha256: sha256_hex(paths.join("\0").as_bytes()),
            reads,
        })
    }
}

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
    use texfleet_core::model::{Engine, SourceFile};
    use uuid::Uuid;

    fn job(main: &str, style: &str) -> ClaimedJob {
        ClaimedJob {
            id: Uuid::nil(),
            project_id: Uuid::nil(),
            engine: Engine::Pdflatex,
            texlive: "2024".into(),
            halt_on_error: false,
            timeout_seconds: 60,
            attempt: 1,
            main: "main.tex".into(),
            use_cache: true,
            waited_seconds: 0.0,
            source_date_epoch: 0,
            files: vec![
                SourceFile {
                    path: "main.tex".into(),
                    content: main.into(),
                },
                SourceFile {
                    path: "style.sty".into(),
                    content: style.into(),
                },
            ],
        }
    }

    #[test]
    fn the_key_covers_the_preamble_up_to_the_begin_document_tex_reads() {
        let keyed = |secret: &str| {
            let main = format!(
                "\\documentclass{{article}}\n% \\begin{{document}}\n\\def\\s{{{secret}}}\n\\begin{{document}}\\s\\end{{document}}"
            );
            FormatKey::of(&job(&main, "x"), "image", &["main.tex".into()])
        };
        assert_ne!(keyed("AAAA"), keyed("BBBB"));
    }

    #[test]
    fn a_format_fits_while_the_preamble_and_what_it_read_are_unchanged() {
        let reads = ["main.tex".to_string(), "style.sty".to_string()];
        let first = job("\\usepackage{style}\\begin{document}A\\end{document}", "x");
        let key = FormatKey::of(&first, "image", &reads).unwrap();
        let body_edited = job("\\usepackage{style}\\begin{document}B\\end{document}", "x");
        assert_eq!(
            FormatKey::of(&body_edited, "image", &reads),
            Some(key.clone())
        );
        let preamble_edited = job(
            "\\usepackage{style}%\n\\begin{document}A\\end{document}",
            "x",
        );
        assert_ne!(
            FormatKey::of(&preamble_edited, "image", &reads),
            Some(key.clone())
        );
        let style_edited = job("\\usepackage{style}\\begin{document}A\\end{document}", "y");
        assert_ne!(
            FormatKey::of(&style_edited, "image", &reads),
            Some(key.clone())
        );
        assert_ne!(
            FormatKey::of(&first, "other image", &reads),
            Some(key.clone())
        );
        let mut file_added = first.clone();
        file_added.files.push(SourceFile {
            path: "extra.tex".into(),
            content: vec![],
        });
        assert_ne!(FormatKey::of(&file_added, "image", &reads), Some(key));
        assert_eq!(
            FormatKey::of(&first, "image", &["gone.tex".to_string()]),
            None
        );
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
