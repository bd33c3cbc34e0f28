//! The maps stay true: every `module::name` path that ARCHITECTURE.md and SECURITY.md name in
//! backticks is made of names the code has, so that a rename or a removal fails here instead
//! of leaving a reader looking for a function that is gone. No stack needed.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// Crates outside the workspace that the documents name paths of.
const EXTERNAL: &[&str] = &["std", "axum", "tokio", "hyper", "serde", "bollard"];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every word of every Rust file of the workspace, and every file and folder name.
fn names_in_the_code() -> HashSet<String> {
    let mut names = HashSet::new();
    let mut folders = vec![workspace()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                if !name.starts_with('.') && name != "target" {
                    names.insert(name);
                    folders.push(path);
                }
            } else if let Some(stem) = name.strip_suffix(".rs") {
                names.insert(stem.to_string());
                let text = std::fs::read_to_string(&path).unwrap();
                names.extend(
                    text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
                        .filter(|word| !word.is_empty())
                        .map(str::to_string),
                );
            }
        }
    }
    names
}

/// The `a::b` paths a Markdown text names in backticks (a trailing `()` allowed), outside
/// fenced code blocks.
fn paths_named(text: &str) -> Vec<&str> {
    let mut fenced = false;
    text.lines()
        .filter(|line| {
            fenced ^= line.trim_start().starts_with("```");
            !fenced && !line.trim_start().starts_with("```")
        })
        .flat_map(paths_in_line)
        .collect()
}

fn paths_in_line(line: &str) -> Vec<&str> {
    line.split('`')
        .skip(1)
        .step_by(2)
        .map(|span| span.strip_suffix("()").unwrap_or(span))
        .filter(|span| {
            span.contains("::")
                && span.split("::").all(|segment| {
                    segment.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                        && segment.chars().all(|c| c.is_alphanumeric() || c == '_')
                })
        })
        .collect()
}

#[test]
fn every_path_the_maps_name_is_in_the_code() {
    let names = names_in_the_code();
    let mut missing = Vec::new();
    for document in ["ARCHITECTURE.md", "SECURITY.md"] {
        let text = std::fs::read_to_string(workspace().join(document)).unwrap();
        for path in paths_named(&text) {
            let mut segments = path.split("::");
            if EXTERNAL.contains(&path.split("::").next().unwrap()) {
                continue;
            }
            if segments.any(|segment| !names.contains(segment)) {
                missing.push(format!("{document}: `{path}`"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "named but not in the code: {missing:#?}"
    );
}

#[test]
fn backticked_paths_are_found_and_prose_is_not() {
    assert_eq!(
        paths_named(
            "`db::claim_jobs` and `Open::to_close()`, not `a b::c` or `x`\n\
             ```sh\nnot::this\n```\nbut `this::one`"
        ),
        ["db::claim_jobs", "Open::to_close", "this::one"]
    );
}
