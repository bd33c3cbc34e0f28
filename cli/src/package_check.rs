//! Before a compile, a warning for each LaTeX package or class a document loads that the
//! server's sandbox image lacks (`GET /info/packages/{name}`), so that a missing one is named
//! before the compile fails on it. Only a warning: the document may load it conditionally, and
//! a project file of that name (`name.sty`, `name.cls`) counts as present.

use crate::client::Client;
use std::collections::BTreeMap;

/// The most names asked about for one compile.
const MAX_ASKED: usize = 64;
const COMMANDS: [&str; 4] = [
    "\\documentclass",
    "\\usepackage",
    "\\RequirePackage",
    "\\LoadClass",
];

/// Where a document loads a package or class: the file and line of the first place.
#[derive(Debug, PartialEq, Eq)]
pub struct Loaded {
    pub file: String,
    pub line: usize,
}

/// The packages and classes the `.tex`, `.sty` and `.cls` files load, by name, less those
/// the project holds itself.
pub fn loaded(files: &[(String, Vec<u8>)]) -> BTreeMap<String, Loaded> {
    let mut names = BTreeMap::new();
    for (path, content) in files {
        if !(path.ends_with(".tex") || path.ends_with(".sty") || path.ends_with(".cls")) {
            continue;
        }
        let text = String::from_utf8_lossy(content);
        for (number, line) in text.lines().enumerate() {
            for name in names_on(uncommented(line)) {
                names.entry(name).or_insert_with(|| Loaded {
                    file: path.clone(),
                    line: number + 1,
                });
            }
        }
    }
    names.retain(|name, _| {
        !files.iter().any(|(path, _)| {
            let file = path.rsplit('/').next().unwrap_or(path);
            file == format!("{name}.sty") || file == format!("{name}.cls")
        })
    });
    names
}

/// The line up to its first `%` that no backslash escapes.
fn uncommented(line: &str) -> &str {
    let bytes = line.as_bytes();
    let mut index = 0;
    while index < bytes.len() {
        match bytes[index] {
            b'\\' => index += 2,
            b'%' => return &line[..index],
            _ => index += 1,
        }
    }
    line
}

/// The names each loading command on `line` names: `\usepackage[options]{a, b}`.
fn names_on(line: &str) -> Vec<String> {
    let mut names = Vec::new();
    for command in COMMANDS {
        let mut rest = line;
        while let Some(at) = rest.find(command) {
            rest = &rest[at + command.len()..];
            // \usepackagex is another command.
            if rest.starts_with(|c: char| c.is_ascii_alphabetic()) {
                continue;
            }
            let mut after = rest.trim_start();
            if let Some(options) = after.strip_prefix('[') {
                let Some(end) = options.find(']') else { break };
                after = options[end + 1..].trim_start();
            }
            let Some(list) = after.strip_prefix('{') else {
                continue;
            };
            let Some(end) = list.find('}') else { break };
            names.extend(
                list[..end]
                    .split(',')
                    .map(str::trim)
                    .filter(|name| {
                        !name.is_empty()
                            && name
                                .bytes()
                                .all(|b| b.is_ascii_alphanumeric() || b"-_.+@".contains(&b))
                    })
                    .map(str::to_string),
            );
        }
    }
    names
}

/// Asks the server about every name `files` load, in the image of TeX Live `year` (the
/// server's default when None), and warns on stderr about those it lacks. Says nothing when it
/// cannot ask: the compile tells what is wrong anyway.
pub async fn warn_about_missing(client: &Client, files: &[(String, Vec<u8>)], year: Option<&str>) {
    let loaded = loaded(files);
    let query = year.map_or(String::new(), |year| format!("?texlive={year}"));
    let query = &query;
    let asked = loaded.iter().take(MAX_ASKED).map(|(name, at)| async move {
        let path = format!("/info/packages/{name}{query}");
        let answer = client.call(reqwest::Method::GET, &path, None).await;
        (name, at, answer)
    });
    for (name, at, answer) in futures::future::join_all(asked).await {
        if let Ok(Some(info)) = answer {
            if info["installed"] == false {
                eprintln!(
                    "warning: {}:{}: the server's TeX Live {} has no package or class {name}",
                    at.file,
                    at.line,
                    info["texlive"].as_str().unwrap_or("?")
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_what_a_document_loads_but_not_in_comments_or_its_own_files() {
        let main = br"\documentclass[11pt]{IEEEtran}
\usepackage{amsmath, siunitx}\usepackage [T1] {fontenc}
% \usepackage{commented}
\usepackage{mine} 50\% \usepackage{afterpercent}
\usepackagex{not} \RequirePackage{tikz}
";
        let files = vec![
            ("main.tex".to_string(), main.to_vec()),
            (
                "styles/mine.sty".to_string(),
                b"\\LoadClass{article}".to_vec(),
            ),
            ("fig.png".to_string(), b"\\usepackage{binary}".to_vec()),
        ];
        let found = loaded(&files);
        let names: Vec<&str> = found.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            [
                "IEEEtran",
                "afterpercent",
                "amsmath",
                "article",
                "fontenc",
                "siunitx",
                "tikz"
            ]
        );
        assert_eq!(
            found["siunitx"],
            Loaded {
                file: "main.tex".into(),
                line: 2
            }
        );
    }
}
