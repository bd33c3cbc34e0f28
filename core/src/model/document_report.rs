//! What a compile says about its document besides its outputs: the diagnostics of TeX's log
//! and of a chktex check, and texcount's word count.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

/// What found a diagnostic: TeX (its log) or chktex (a job's `check`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum DiagnosticSource {
    #[default]
    Tex,
    Chktex,
}

text_enum! {
    /// What a check of the sources with chktex does with its findings (a job's `check`).
    #[serde(rename_all = "lowercase")]
    #[strum(serialize_all = "lowercase")]
    pub enum CheckMode {
        /// They are reported as diagnostics beside the compile's.
        Warn,
        /// Any finding fails the job before the compile.
        Error,
    }
}

/// One error or warning parsed from the compile log, or found by chktex.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Diagnostic {
    pub severity: Severity,
    /// The file named, relative to the project; null when the log does not say.
    pub file: Option<String>,
    pub line: Option<u32>,
    /// The column, where chktex gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub column: Option<u32>,
    #[serde(default)]
    pub source: DiagnosticSource,
    pub message: String,
    /// For an error, TeX's context line: where in the source line it stopped
    /// (`l.2 Here is \undefinedmacro`).
    #[serde(default)]
    pub context: Option<String>,
}

/// The words and the rest of a job's sources as TeX Live's texcount counts them, the main
/// document with the files it includes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WordCount {
    /// Words in the text.
    pub text_words: u32,
    /// Words in headings (sections, titles).
    pub header_words: u32,
    /// Words outside the text: captions, footnotes and the like.
    pub other_words: u32,
    /// Headings.
    pub headers: u32,
    /// Floats (figures, tables).
    pub floats: u32,
    /// Formulas in the text.
    pub inline_math: u32,
    /// Displayed formulas.
    pub displayed_math: u32,
}
