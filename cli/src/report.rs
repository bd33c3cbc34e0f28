//! How the client commands print what they found: `text` for people (compiler-style
//! diagnostics, `file:line: error: message`, on stderr), `json` for scripts (one JSON document
//! on stdout), `github` for GitHub Actions (diagnostics as workflow annotations on stdout).

use serde_json::Value;
use std::path::PathBuf;

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// For people: progress and diagnostics like a compiler's.
    Text,
    /// For scripts: one JSON document on stdout (the job, or what the command returns).
    Json,
    /// For GitHub Actions: diagnostics as ::error and ::warning annotations on stdout.
    Github,
}

#[derive(clap::Args, Clone)]
pub struct OutputArgs {
    /// How to print the result.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    format: OutputFormat,
    /// The same as --format json.
    #[arg(long)]
    json: bool,
}

impl OutputArgs {
    pub fn format(&self) -> OutputFormat {
        if self.json {
            OutputFormat::Json
        } else {
            self.format
        }
    }
}

/// Where the project's files are on this machine, to name a diagnostic's file as the user
/// knows it: below the `--files` folder, and the main document as it was given.
#[derive(Default)]
pub struct Locations {
    /// The `--files` folder, if one was sent.
    pub root: Option<PathBuf>,
    /// The main document's path in the project and as the user named it.
    pub main: Option<(String, String)>,
}

impl Locations {
    fn local(&self, file: &str) -> String {
        match (&self.main, &self.root) {
            (Some((project, given)), _) if project == file => given.clone(),
            (_, Some(root)) if !file.starts_with('/') => root.join(file).display().to_string(),
            _ => file.to_string(),
        }
    }
}

/// Prints the job's diagnostics as `format` asks (nothing for `json`, whose document holds
/// them).
pub fn diagnostics(job: &Value, format: OutputFormat, locations: &Locations) {
    for diagnostic in job["diagnostics"].as_array().into_iter().flatten() {
        match format {
            OutputFormat::Text => eprintln!("{}", compiler_line(diagnostic, locations)),
            OutputFormat::Github => println!("{}", annotation(diagnostic, locations)),
            OutputFormat::Json => {}
        }
    }
}

/// texcount's count of the job's sources, or why there is none, on `out`.
pub fn word_count(job: &Value, out: &mut impl std::io::Write) {
    let count = &job["word_count"];
    // A closed stdout loses the line and nothing else.
    let _ = match count.is_object() {
        true => writeln!(
            out,
            "words: {} in text, {} in headings, {} elsewhere (captions, footnotes); {} headings, {} floats, {} inline and {} displayed formulas",
            count["text_words"], count["header_words"], count["other_words"], count["headers"],
            count["floats"], count["inline_math"], count["displayed_math"]
        ),
        false => writeln!(out, "no word count: texcount gave none (the log says why)"),
    };
}

/// How many LaTeX errors the job has (chktex's findings are not TeX's errors).
pub fn error_count(job: &Value) -> usize {
    job["diagnostics"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|d| d["severity"] == "error" && !is_chktex(d))
        .count()
}

fn is_chktex(diagnostic: &Value) -> bool {
    diagnostic["source"] == "chktex"
}

fn severity(diagnostic: &Value) -> &'static str {
    if diagnostic["severity"] == "warning" {
        "warning"
    } else {
        "error"
    }
}

/// `file:line: error: message`, as compilers print them (and as problem matchers read them),
/// TeX's context line below an error; a diagnostic of no known file gets no location.
fn compiler_line(diagnostic: &Value, locations: &Locations) -> String {
    let file = diagnostic["file"].as_str().map(|f| locations.local(f));
    let line_number = diagnostic["line"].as_u64();
    let location = match (file, line_number, diagnostic["column"].as_u64()) {
        (Some(file), Some(line), Some(column)) => format!("{file}:{line}:{column}: "),
        (Some(file), Some(line), None) => format!("{file}:{line}: "),
        (Some(file), None, _) => format!("{file}: "),
        (None, ..) => String::new(),
    };
    let source = match is_chktex(diagnostic) {
        true => " (chktex)",
        false => "",
    };
    let mut line = format!(
        "{location}{}: {}{source}",
        severity(diagnostic),
        diagnostic["message"].as_str().unwrap_or("")
    );
    if let Some(context) = diagnostic["context"].as_str() {
        line.push_str("\n    ");
        line.push_str(context);
    }
    line
}

/// `::error file=F,line=L,title=LaTeX::message`, GitHub's workflow command, escaped as its
/// runner expects.
fn annotation(diagnostic: &Value, locations: &Locations) -> String {
    let mut properties = Vec::new();
    if let Some(file) = diagnostic["file"].as_str() {
        properties.push(format!("file={}", escape_property(&locations.local(file))));
        if let Some(line) = diagnostic["line"].as_u64() {
            properties.push(format!("line={line}"));
        }
        if let Some(column) = diagnostic["column"].as_u64() {
            properties.push(format!("col={column}"));
        }
    }
    properties.push(match is_chktex(diagnostic) {
        true => "title=chktex".to_string(),
        false => "title=LaTeX".to_string(),
    });
    let mut message = diagnostic["message"].as_str().unwrap_or("").to_string();
    if let Some(context) = diagnostic["context"].as_str() {
        message.push('\n');
        message.push_str(context);
    }
    format!(
        "::{} {}::{}",
        severity(diagnostic),
        properties.join(","),
        escape_data(&message)
    )
}

fn escape_data(text: &str) -> String {
    text.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

fn escape_property(text: &str) -> String {
    escape_data(text).replace(':', "%3A").replace(',', "%2C")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn locations() -> Locations {
        Locations {
            root: Some(PathBuf::from("proj")),
            main: Some(("paper/main.tex".into(), "proj/paper/main.tex".into())),
        }
    }

    #[test]
    fn diagnostics_read_like_a_compiler_s() {
        let error = json!({ "severity": "error", "file": "paper/main.tex", "line": 4,
                            "message": "Undefined control sequence.", "context": "l.4 \\foo" });
        assert_eq!(
            compiler_line(&error, &locations()),
            "proj/paper/main.tex:4: error: Undefined control sequence.\n    l.4 \\foo"
        );
        let warning = json!({ "severity": "warning", "file": "ch1.tex", "line": null, "message": "Overfull" });
        assert_eq!(
            compiler_line(&warning, &locations()),
            "proj/ch1.tex: warning: Overfull"
        );
        let nowhere = json!({ "severity": "warning", "file": null, "line": 5, "message": "Citation `x' undefined" });
        assert_eq!(
            compiler_line(&nowhere, &locations()),
            "warning: Citation `x' undefined"
        );
    }

    #[test]
    fn annotations_are_escaped_as_github_reads_them() {
        let error = json!({ "severity": "error", "file": "a,b:c.tex", "line": 2,
                            "message": "100% wrong", "context": "l.2 x" });
        assert_eq!(
            annotation(&error, &Locations::default()),
            "::error file=a%2Cb%3Ac.tex,line=2,title=LaTeX::100%25 wrong%0Al.2 x"
        );
        let warning = json!({ "severity": "warning", "file": null, "line": 3, "message": "Label(s) may have changed." });
        assert_eq!(
            annotation(&warning, &Locations::default()),
            "::warning title=LaTeX::Label(s) may have changed."
        );
    }

    #[test]
    fn chktex_findings_name_their_column_and_are_no_latex_errors() {
        let finding = json!({ "severity": "error", "file": "paper/main.tex", "line": 3,
                              "column": 6, "source": "chktex", "message": "Unmatched" });
        assert_eq!(
            compiler_line(&finding, &locations()),
            "proj/paper/main.tex:3:6: error: Unmatched (chktex)"
        );
        assert_eq!(
            annotation(&finding, &Locations::default()),
            "::error file=paper/main.tex,line=3,col=6,title=chktex::Unmatched"
        );
        let job = json!({ "diagnostics": [finding, { "severity": "error", "message": "x" }] });
        assert_eq!(error_count(&job), 1);
    }
}
