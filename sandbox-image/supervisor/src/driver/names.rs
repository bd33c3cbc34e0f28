//! Which names the driver puts on a command line. Names come from the document (an index it
//! opened, an aux file's `\bibdata`, a glossary's extension), so each is checked against a
//! strict allowlist before any program sees it: letters, digits, `.`, `_` and `-`, not
//! starting with `-` (no option injection) or `.` (no dot files, no `..`). A name that fails
//! is skipped and the skip is written to the log; it never reaches a program.

/// One file name component: `[A-Za-z0-9._-]+`, not starting with `-` or `.`.
pub fn is_safe_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 100
        && !name.starts_with(['-', '.'])
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// A relative path of safe names separated by `/` (an index or aux file in a subfolder).
pub fn is_safe_path(path: &str) -> bool {
    path.len() <= 255 && path.split('/').all(is_safe_name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_names_pass() {
        for good in [
            "output",
            "output.idx",
            "chapters/one",
            "a_b-c.2",
            "persons.ist",
        ] {
            assert!(is_safe_path(good), "{good}");
        }
        for bad in [
            "",
            "x`id>>output.pdf`",
            "x$(id)",
            "a b",
            "-shell-escape",
            "--output-directory=/x",
            ".hidden",
            "../up",
            "a/../b",
            "/etc/passwd",
            "a//b",
            "a;b",
            "a\"b",
            "a\nb",
            "é",
        ] {
            assert!(!is_safe_path(bad), "{bad:?} passed");
        }
    }
}
