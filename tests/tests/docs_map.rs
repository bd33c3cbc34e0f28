//! The maps stay true: every `module::name` or `Type::name` path that ARCHITECTURE.md and
//! SECURITY.md name in backticks names something the code defines there (a function, type,
//! constant, variant, field or submodule of that module, or of that type's `impl`s), so that a
//! rename, a move or a removal fails here instead of leaving a reader looking for a function
//! that is gone. No stack needed.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Crates outside the workspace that the documents name paths of.
const EXTERNAL: &[&str] = &["std", "axum", "tokio", "hyper", "serde", "bollard"];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every Rust file of the workspace, by path.
fn rust_files() -> HashMap<PathBuf, String> {
    let mut files = HashMap::new();
    let mut folders = vec![workspace()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                if !name.starts_with('.') && name != "target" {
                    folders.push(path);
                }
            } else if name.ends_with(".rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                files.insert(path, text);
            }
        }
    }
    files
}

/// The files where `scope` (a module, a crate or a type) defines its names: the module's
/// file (`scope.rs`, or `scope/mod.rs`), the crate's `lib.rs`, or every file with an `impl`
/// or the definition of the type.
fn files_of<'a>(files: &'a HashMap<PathBuf, String>, scope: &str) -> Vec<(&'a Path, &'a str)> {
    let is_type = scope.starts_with(|c: char| c.is_ascii_uppercase());
    files
        .iter()
        .filter(|(path, text)| {
            let stem = path.file_stem().unwrap().to_string_lossy();
            let folder = path.parent().unwrap();
            let folder_name = folder.file_name().unwrap().to_string_lossy();
            if is_type {
                let words = words(text);
                words.windows(2).any(|pair| {
                    matches!(pair[0], "impl" | "for" | "struct" | "enum" | "trait")
                        && pair[1] == scope
                })
            } else if stem == "mod" {
                folder_name == scope
            } else if stem == "lib" {
                let package = folder.parent().unwrap().join("Cargo.toml");
                std::fs::read_to_string(package).is_ok_and(|toml| {
                    toml.lines().any(|line| {
                        line.replace(' ', "") == format!("name=\"{}\"", scope.replace('_', "-"))
                    })
                })
            } else {
                stem == scope
            }
        })
        .map(|(path, text)| (path.as_path(), text.as_str()))
        .collect()
}

fn words(text: &str) -> Vec<&str> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '!'))
        .filter(|word| !word.is_empty())
        .collect()
}

/// Whether `text` (the file at `path`) defines `name`: an item, a variant or field, a
/// re-export, or a submodule file beside it.
fn defines(path: &Path, text: &str, name: &str) -> bool {
    const ITEMS: &[&str] = &[
        "fn",
        "struct",
        "enum",
        "const",
        "static",
        "mod",
        "type",
        "trait",
        "macro_rules!",
    ];
    let words = words(text);
    let item = words
        .windows(2)
        .any(|pair| ITEMS.contains(&pair[0]) && pair[1] == name);
    let member = text.lines().any(|line| {
        let line = line.trim_start();
        let line = line.strip_prefix("pub ").unwrap_or(line);
        line.strip_prefix(name)
            .is_some_and(|rest| rest.starts_with(['(', '{', ',', ':', ' ']))
    });
    let exported = text.lines().any(|line| {
        line.trim_start().starts_with("pub use") && words_of(line).any(|word| word == name)
    });
    let folder = path.parent().unwrap();
    let stem = path.file_stem().unwrap();
    let submodule = folder.join(format!("{name}.rs")).exists()
        || folder.join(stem).join(format!("{name}.rs")).exists();
    item || member || exported || submodule
}

/// A module's file with the files of the submodules it re-exports whole (`pub use claim::*;`).
fn with_glob_exports<'a>(
    files: &'a HashMap<PathBuf, String>,
    (path, text): (&'a Path, &'a str),
) -> Vec<(&'a Path, &'a str)> {
    let stem = path.file_stem().unwrap();
    let folder = match stem.to_str() {
        Some("mod" | "lib") => path.parent().unwrap().to_path_buf(),
        _ => path.parent().unwrap().join(stem),
    };
    let mut found = vec![(path, text)];
    for line in text.lines() {
        let Some(module) = line
            .trim_start()
            .strip_prefix("pub use ")
            .and_then(|rest| rest.strip_suffix("::*;"))
        else {
            continue;
        };
        if let Some((path, text)) = files.get_key_value(&folder.join(format!("{module}.rs"))) {
            found.push((path.as_path(), text.as_str()));
        }
    }
    found
}

fn words_of(line: &str) -> impl Iterator<Item = &str> {
    line.split(|c: char| !(c.is_alphanumeric() || c == '_'))
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
    let files = rust_files();
    let mut missing = Vec::new();
    for document in ["ARCHITECTURE.md", "SECURITY.md"] {
        let text = std::fs::read_to_string(workspace().join(document)).unwrap();
        for path in paths_named(&text) {
            let segments: Vec<&str> = path.split("::").collect();
            if EXTERNAL.contains(&segments[0]) {
                continue;
            }
            let [.., scope, name] = segments[..] else {
                continue;
            };
            if !files_of(&files, scope)
                .into_iter()
                .flat_map(|scope| with_glob_exports(&files, scope))
                .any(|(file, text)| defines(file, text, name))
            {
                missing.push(format!("{document}: `{path}`"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "named but not defined there: {missing:#?}"
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
