//! Projects on disk, as a request sends them.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use serde_json::{json, Value};
use std::path::Path;

/// Every file below `dir`, at its path relative to `dir`, in a stable order.
pub fn files_of(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files = Vec::new();
    files_below(dir, dir, &mut files);
    files.sort();
    files
}

fn files_below(dir: &Path, base: &Path, files: &mut Vec<(String, Vec<u8>)>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files_below(&path, base, files);
        } else {
            let relative = path
                .strip_prefix(base)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            files.push((relative, std::fs::read(&path).unwrap()));
        }
    }
}

/// The `files` of a JSON request, each by its bytes in base64.
pub fn files_field(files: Vec<(String, Vec<u8>)>) -> Value {
    files
        .into_iter()
        .map(|(path, content)| json!({ "path": path, "content_base64": BASE64.encode(content) }))
        .collect()
}
