//! What the tests of kept state share (the preamble format, the auxiliary files, and whose
//! state it is): documents that leave something to keep, and the text a compile printed.

use crate::{ApiObject as _, TestApp};
use serde_json::{json, Value};

/// A document whose preamble reads a file of the project (`macros.sty`, defining `\Greeting`
/// as `style`), and whose body has a table of contents and a forward reference, which cold
/// take two passes.
pub fn two_sections_with_style(preamble_extra: &str, body: &str, style: &str) -> Value {
    let main = format!(
        "\\documentclass{{article}}\\usepackage{{amsmath}}\\usepackage{{macros}}{preamble_extra}\n\
         \\begin{{document}}\\tableofcontents\n\
         \\section{{First}}\\label{{first}}\\Greeting{{}} {body} See section~\\ref{{second}}.\n\
         \\section{{Second}}\\label{{second}}Text.\\end{{document}}\n"
    );
    json!({
        "input_latex": main,
        "files": [{ "path": "macros.sty", "content": format!("\\newcommand{{\\Greeting}}{{{style}}}\n") }],
    })
}

/// A pasted document with `body`, whose preamble is the line `\documentclass{article}`.
pub fn pasted(body: &str) -> Value {
    json!({ "input_latex": format!("\\documentclass{{article}}\n\\begin{{document}}\n{body}\n\\end{{document}}\n") })
}

/// TeX that writes `text` into the file `name` of the compile's folder.
pub fn write_file(name: &str, text: &str) -> String {
    format!("\\immediate\\openout15={name} \\immediate\\write15{{{text}}}\\immediate\\closeout15 ")
}

/// Tells whether `flag.aux` was there when the compile began (as a restored file).
pub const FLAG_CHECK: &str = "\\IfFileExists{flag.aux}{FLAGGED}{CLEAN}";
/// Leaves `flag.aux` among the compile's files.
pub const WRITE_FLAG: &str =
    "\\immediate\\openout15=flag.aux \\immediate\\write15{\\relax}\\immediate\\closeout15 Flag.";

/// The text of a job that must have succeeded, its white space folded.
pub async fn succeeded_text(app: &TestApp, job: &Value) -> String {
    assert_eq!(job["status"], "Succeeded", "{job:#}");
    let text = app.text_of(job.id()).await;
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The second of two compiles at the same main path, each with `timeout_seconds` 10: the
/// first leaves its files or format, and the second (whose sources are fine) must still end
/// in time, having compiled again from nothing or without the format.
pub async fn second_after(app: &TestApp, first: Value, second: Value) -> Value {
    let first = app.compile(first).await;
    assert_eq!(first["status"], "Succeeded", "{first:#}");
    let mut second = second;
    second["timeout_seconds"] = json!(10);
    let second = app.compile(second).await;
    let log = app.log(second.id()).await;
    assert_eq!(second["status"], "Succeeded", "{second:#}\n{log}");
    second
}
