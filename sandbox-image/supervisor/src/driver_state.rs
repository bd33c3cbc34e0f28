//! What the compile driver hands the supervisor at its end ([`DriverState`]): for the next
//! compile of the document, its auxiliary files and tool signatures and what came of dumping
//! its preamble; for this job, chktex's findings, texcount's count and whether a thumbnail
//! was rendered. The compile's user
//! writes it, so both sides bound it before they use it.

use crate::{is_handed_on, FileSpec, MAX_STATE_FILES};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The most tool signatures a compile hands on, and the longest tool run each names.
const MAX_TOOL_SIGNATURES: usize = 64;
const MAX_TOOL_KEY_BYTES: usize = 1024;
/// The most files a dumped format may say it read, and the longest reason for a refused dump.
const MAX_FORMAT_READS: usize = 1000;
const MAX_REFUSAL_CHARS: usize = 300;

/// The auxiliary files (`.aux`, `.bbl`, `.toc`, ...) of a compile, at paths relative to the
/// main document's folder, and the input signature each tool last ran on, so that the next
/// compile of the same document starts where this one ended.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompileState {
    pub files: Vec<FileSpec>,
    pub tools: BTreeMap<String, u64>,
}

impl CompileState {
    /// What either side keeps of a state that the compile's user wrote: at most
    /// [`MAX_STATE_FILES`] files, each of a kind handed on ([`is_handed_on`]) and carried in
    /// the state (never [`Streamed`](crate::Streamed)), and a bounded
    /// number of tool signatures, each for a run named in a bounded length.
    pub fn bounded(mut self) -> CompileState {
        self.files.retain(|file| {
            file.streamed.is_none() && is_handed_on(std::path::Path::new(&file.path))
        });
        self.files.truncate(MAX_STATE_FILES);
        self.tools
            .retain(|tool, _| tool.len() <= MAX_TOOL_KEY_BYTES);
        self.tools = self.tools.into_iter().take(MAX_TOOL_SIGNATURES).collect();
        self
    }
}

/// What the compile driver leaves in [`DRIVER_STATE_FILE`](crate::DRIVER_STATE_FILE). Written by the compile's user: the
/// scheduler bounds it and keeps it for the same project's same document only.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DriverState {
    pub next: CompileState,
    pub dump: Option<Dump>,
    /// A format was given and the engine could not load it; the compile ran without it.
    #[serde(default)]
    pub format_refused: bool,
    /// The compile from the last compile's auxiliary files failed and ran again from nothing.
    #[serde(default)]
    pub restarted: bool,
    /// The compile from nothing could not run here (the passes rewrote a source streamed in,
    /// or left what cannot be cleared): the scheduler runs the job again in a new sandbox,
    /// without the last compile's files.
    #[serde(default)]
    pub again_in_a_new_sandbox: bool,
    /// texcount's count of the sources, when the spec asked for one and texcount gave it.
    #[serde(default)]
    pub word_count: Option<WordCount>,
    /// chktex's findings on the sources, when the spec asked for a check and chktex ran.
    #[serde(default)]
    pub findings: Option<Vec<Finding>>,
    /// Ghostscript rendered [`THUMBNAIL_FILE`](crate::THUMBNAIL_FILE): the supervisor takes a
    /// file of that name only then (the document can write one).
    #[serde(default)]
    pub thumbnail: bool,
    /// How many pages the PDF has, as Ghostscript counted them for a page preview.
    #[serde(default)]
    pub page_count: Option<u32>,
    /// The rendered page's width and height as shown (its rotation applied), in hundredths of
    /// a point: where a click on the image is in the page.
    #[serde(default)]
    pub page_size: Option<[u32; 2]>,
}

/// The most chktex findings a compile hands over, and the longest message or file name of one.
pub const MAX_FINDINGS: usize = 100;
pub const MAX_FINDING_CHARS: usize = 500;

/// One of chktex's findings: where, whether chktex calls it an error, its warning number and
/// message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// As chktex names it: relative to the main document's folder.
    pub file: String,
    pub line: u32,
    pub column: u32,
    pub error: bool,
    pub number: u32,
    pub message: String,
}

impl Finding {
    /// Its message and file name cut to [`MAX_FINDING_CHARS`] characters.
    pub fn bounded(mut self) -> Finding {
        truncate_chars(&mut self.file, MAX_FINDING_CHARS);
        truncate_chars(&mut self.message, MAX_FINDING_CHARS);
        self
    }
}

fn truncate_chars(text: &mut String, chars: usize) {
    if let Some((cut, _)) = text.char_indices().nth(chars) {
        text.truncate(cut);
    }
}

/// What texcount counts of a document, its template's seven numbers in its order: words in the
/// text, in headings and elsewhere (captions), headings, floats, inline and displayed formulas.
pub type WordCount = [u32; 7];

impl DriverState {
    /// [`CompileState::bounded`], at most [`MAX_FINDINGS`] findings, each bounded, a dump that
    /// read more files than are kept in its key
    /// refused (a format keyed by some of its inputs could be stale), as is one that names a
    /// file twice (the driver never does; the scheduler hashes each name it gets), and a
    /// refusal's reason shortened: the scheduler logs and looks up what the compile's user
    /// wrote.
    pub fn bounded(mut self) -> DriverState {
        self.next = self.next.bounded();
        match &mut self.dump {
            Some(Dump::Built { reads }) if reads.len() > MAX_FORMAT_READS => {
                self.dump = Some(Dump::Refused {
                    why: format!("the preamble read more than {MAX_FORMAT_READS} files"),
                });
            }
            Some(Dump::Built { reads })
                if reads.iter().collect::<std::collections::HashSet<_>>().len() < reads.len() =>
            {
                self.dump = Some(Dump::Refused {
                    why: "the dump names a file it read twice".into(),
                });
            }
            Some(Dump::Built { .. }) => {}
            Some(Dump::Refused { why }) => truncate_chars(why, MAX_REFUSAL_CHARS),
            None => {}
        }
        if let Some(findings) = &mut self.findings {
            findings.truncate(MAX_FINDINGS);
            *findings = std::mem::take(findings)
                .into_iter()
                .map(Finding::bounded)
                .collect();
        }
        self
    }
}

/// What came of [`Preamble::Dump`](crate::Preamble::Dump).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "result")]
pub enum Dump {
    /// [`FORMAT_FILE`](crate::FORMAT_FILE) holds the preamble; it read these files of the job (paths relative to
    /// the work directory) and nothing else outside TeX's own trees.
    Built { reads: Vec<String> },
    /// The preamble cannot be kept as a format, and why.
    Refused { why: String },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_is_bounded_in_files_paths_tools_and_words() {
        let file = |path: &str| FileSpec {
            path: path.into(),
            content_base64: String::new(),
            streamed: None,
        };
        let mut files: Vec<FileSpec> = [
            "/etc/passwd",
            "../up.aux",
            "./x.aux",
            "",
            "article.cls",
            "a/b.aux",
        ]
        .map(file)
        .into();
        files.insert(
            0,
            FileSpec {
                streamed: Some(crate::Streamed {
                    bytes: 1,
                    sha256: String::new(),
                }),
                ..file("streamed.aux")
            },
        );
        files.extend((0..MAX_STATE_FILES + 5).map(|n| file(&format!("f{n}.aux"))));
        let mut tools: BTreeMap<String, u64> = (0..MAX_TOOL_SIGNATURES + 5)
            .map(|n| (format!("bibtex {n}"), 1))
            .collect();
        tools.insert("a".repeat(MAX_TOOL_KEY_BYTES + 1), 1);
        let state = DriverState {
            next: CompileState { files, tools },
            dump: Some(Dump::Refused {
                why: "é".repeat(MAX_REFUSAL_CHARS * 10),
            }),
            ..DriverState::default()
        }
        .bounded();
        assert_eq!(state.next.files.len(), MAX_STATE_FILES);
        assert_eq!(state.next.files[0].path, "a/b.aux");
        assert!(state
            .next
            .files
            .iter()
            .all(|file| !["../up.aux", "article.cls"].contains(&file.path.as_str())));
        assert_eq!(state.next.tools.len(), MAX_TOOL_SIGNATURES);
        assert!(state
            .next
            .tools
            .keys()
            .all(|tool| tool.len() <= MAX_TOOL_KEY_BYTES));
        let Some(Dump::Refused { why }) = state.dump else {
            panic!("the refusal went");
        };
        assert_eq!(why.chars().count(), MAX_REFUSAL_CHARS);

        let dumped = |reads: Vec<String>| {
            let state = DriverState {
                dump: Some(Dump::Built { reads }),
                ..DriverState::default()
            };
            state.bounded().dump
        };
        let many: Vec<String> = (0..=MAX_FORMAT_READS).map(|n| format!("{n}.sty")).collect();
        assert!(matches!(dumped(many), Some(Dump::Refused { .. })));
        let twice = vec!["big.sty".to_string(), "big.sty".to_string()];
        assert!(matches!(dumped(twice), Some(Dump::Refused { .. })));
        let once = vec!["big.sty".to_string(), "other.sty".to_string()];
        assert!(matches!(dumped(once), Some(Dump::Built { .. })));
    }
}
