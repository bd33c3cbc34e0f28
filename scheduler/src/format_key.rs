//! The key a preamble format is kept under: a format may load only for a job whose preamble,
//! and every source the dump read, are those it was dumped from. The key covers the main file
//! up to [`preamble_end`], and the driver dumps the format from the main file cut there, so the
//! format holds nothing of the main file beyond the key. Which main files may have one is
//! `texfleet_sandbox::why_not_keyable`'s to say.

use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use texfleet_core::digest::sha256_hex;
use texfleet_core::model::{ClaimedJob, ContentHash};
use texfleet_sandbox::preamble_end;

/// Everything a format's content depends on beyond TeX's trees (which the image fixes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FormatKey {
    image_id: String,
    source_date_epoch: i64,
    /// Dumped in draft: graphicx's option is in the format.
    #[serde(default)]
    draft: bool,
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
    /// source of the job, or the main file is not read into the job (a streamed one).
    pub fn of(job: &ClaimedJob, image_id: &str, reads: &[String]) -> Option<FormatKey> {
        let main = &job.files.iter().find(|file| file.path == job.main)?.content;
        let preamble = &main[..preamble_end(main)];
        // Only the sources the dump read are hashed (a job's files may be many megabytes).
        let sent = (job.files.iter()).map(|file| (&file.path, Source::Sent(&file.content)));
        let named = (job.stored_files.iter()).map(|file| (&file.path, Source::Named(&file.sha256)));
        let sources: HashMap<&String, Source> = sent.chain(named).collect();
        let mut paths: Vec<&str> = sources.keys().map(|path| path.as_str()).collect();
        paths.sort_unstable();
        // The dump read the main file only up to `\begin{document}`: the preamble's hash.
        let reads = reads
            .iter()
            .filter(|path| **path != job.main)
            .map(|path| Some((path.clone(), sources.get(path)?.sha256_hex())))
            .collect::<Option<Vec<_>>>()?;
        Some(FormatKey {
            image_id: image_id.to_string(),
            source_date_epoch: job.source_date_epoch,
            draft: job.draft,
            preamble_sha256: sha256_hex(preamble),
            paths_sha256: sha256_hex(paths.join("\0").as_bytes()),
            reads,
        })
    }
}

/// A source of the job: its bytes sent, or its hash named.
enum Source<'a> {
    Sent(&'a [u8]),
    Named(&'a ContentHash),
}

impl Source<'_> {
    fn sha256_hex(&self) -> String {
        match self {
            Source::Sent(content) => sha256_hex(content),
            Source::Named(sha256) => sha256.hex(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use texfleet_core::model::{Engine, SourceFile, StoredFile};
    use uuid::Uuid;

    fn job(main: &str, style: &str) -> ClaimedJob {
        ClaimedJob {
            id: Uuid::nil(),
            project_id: Uuid::nil(),
            engine: Engine::Pdflatex,
            texlive: "2024".into(),
            halt_on_error: false,
            draft: false,
            wordcount: false,
            check: None,
            thumbnail_width: None,
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
            stored_files: Vec::new(),
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
    fn a_file_named_by_hash_keys_as_its_content_does() {
        let reads = ["main.tex".to_string(), "style.sty".to_string()];
        let sent = job("\\usepackage{style}\\begin{document}A\\end{document}", "x");
        let mut named = sent.clone();
        named.files.pop();
        named.stored_files.push(StoredFile {
            path: "style.sty".into(),
            sha256: ContentHash::of(b"x"),
        });
        let key = FormatKey::of(&sent, "image", &reads);
        assert!(key.is_some());
        assert_eq!(FormatKey::of(&named, "image", &reads), key);
        let mut edited = named.clone();
        edited.stored_files[0].sha256 = ContentHash::of(b"y");
        assert_ne!(FormatKey::of(&edited, "image", &reads), key);
        let mut added = named.clone();
        added.stored_files.push(StoredFile {
            path: "extra.png".into(),
            sha256: ContentHash::of(b"PNG"),
        });
        assert_ne!(FormatKey::of(&added, "image", &reads), key);
        let mut main_streamed = named;
        let main = main_streamed.files.remove(0);
        main_streamed.stored_files.push(StoredFile {
            path: main.path,
            sha256: ContentHash::of(&main.content),
        });
        assert_eq!(FormatKey::of(&main_streamed, "image", &reads), None);
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
        let mut draft = first.clone();
        draft.draft = true;
        assert_ne!(FormatKey::of(&draft, "image", &reads), Some(key.clone()));
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
}
