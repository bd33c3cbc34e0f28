//! Rules for the paths of a job's extra files, checked by the API before anything is queued.
//!
//! The rules are an allowlist rather than a list of dangers: a path is relative, made of short
//! components of `[A-Za-z0-9._+-]` and single inner spaces, that do not start with `.` or `-`,
//! so there is nothing for `..`, absolute paths, control characters, shell metacharacters,
//! option injection or hidden files to hide in. Spaces are allowed because projects from other
//! editors have them (`my figure.png`); no name reaches a shell, and the compile driver puts on
//! a command line only names without them. The names the compile writes its outputs to, beside the main document,
//! are reserved.

pub const MAX_FILES: usize = 500;
/// The most bytes a job's files may take, sent and named together: they are written into the
/// sandbox's work directory (`sandbox_tmpfs_mb`, 256 MB by default), which keeps room for
/// what the compile writes. (Sent files travel base64 in the sandbox's spec, capped at
/// 128 MiB, and are bounded by `max_body_bytes`; files named by hash follow it raw.)
pub const MAX_JOB_FILES_BYTES: i64 = 160 * 1024 * 1024;
pub const MAX_PATH_BYTES: usize = 255;
pub const MAX_COMPONENT_BYTES: usize = 100;
pub const MAX_DEPTH: usize = 8;

/// Why a path is refused, in words for the API's `errors[].message`.
pub fn check_path(path: &str) -> Result<(), String> {
    if path.is_empty() {
        return Err("must not be empty".into());
    }
    if path.len() > MAX_PATH_BYTES {
        return Err(format!("must be at most {MAX_PATH_BYTES} bytes"));
    }
    if path.starts_with('/') {
        return Err("must be relative, not absolute".into());
    }
    let components: Vec<&str> = path.split('/').collect();
    if components.len() > MAX_DEPTH {
        return Err(format!("must be at most {MAX_DEPTH} directories deep"));
    }
    for component in &components {
        match *component {
            "" => return Err("must not contain empty components or a trailing '/'".into()),
            "." | ".." => return Err("must not contain '.' or '..' components".into()),
            _ => {}
        }
        if component.len() > MAX_COMPONENT_BYTES {
            return Err(format!(
                "components must be at most {MAX_COMPONENT_BYTES} bytes"
            ));
        }
        if let Some(bad) = component
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '+' | ' ')))
        {
            return Err(format!(
                "may contain only ASCII letters, digits, spaces and . _ - + (found {:?})",
                bad
            ));
        }
        if component.starts_with('.') || component.starts_with('-') {
            return Err("components must not start with '.' or '-'".into());
        }
        if component.starts_with(' ') || component.ends_with(' ') || component.contains("  ") {
            return Err(
                "components must not start or end with a space, or hold two in a row".into(),
            );
        }
    }
    Ok(())
}

/// Why `path` may not be a file of a job whose main document is `main`: the compile runs in
/// the main document's folder and writes `output.pdf`, `output.log`, ... there.
pub fn reserved_beside_main(path: &str, main: &str) -> Option<String> {
    let beside = match main.rsplit_once('/') {
        Some((folder, _)) => path.strip_prefix(folder)?.strip_prefix('/')?,
        None => path,
    };
    beside.starts_with("output.").then(|| {
        "names output.* beside the main document are reserved for the compiler's output".into()
    })
}

/// Paths of one job that cannot all exist: a file where another path needs a folder (`a` and
/// `a/b.tex`). Returns, for each such path, its index and why.
pub fn folder_conflicts(paths: &[&str]) -> Vec<(usize, String)> {
    let files: std::collections::HashSet<&str> = paths.iter().copied().collect();
    let mut conflicts = Vec::new();
    for (index, path) in paths.iter().enumerate() {
        let mut prefix = String::new();
        for component in path.split('/').take(path.split('/').count() - 1) {
            if !prefix.is_empty() {
                prefix.push('/');
            }
            prefix.push_str(component);
            if files.contains(prefix.as_str()) {
                conflicts.push((
                    index,
                    format!("needs a folder {prefix:?}, but {prefix:?} is a file of this job"),
                ));
                break;
            }
        }
    }
    conflicts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_ordinary_project_paths() {
        for path in [
            "img/a.png",
            "chapters/01-intro.tex",
            "refs.bib",
            "a+b_c.sty",
            "x/y/z/w.tex",
            "figures/my figure.png",
        ] {
            assert_eq!(check_path(path), Ok(()), "{path}");
        }
    }

    #[test]
    fn refuses_hostile_paths() {
        for path in [
            "",
            "/etc/passwd",
            "../x.tex",
            "a/../../x",
            "a//b",
            "a/",
            "./a",
            ".latexmkrc",
            "-shell-escape.tex",
            " a.tex",
            "a /b.tex",
            "a  b.tex",
            "a\tb.tex",
            "a;rm.tex",
            "a$(x).tex",
            "a\nb",
            "a\0b",
            "a\\b",
            "é.tex",
        ] {
            assert!(check_path(path).is_err(), "{path:?} was accepted");
        }
        assert!(check_path("a/".repeat(MAX_DEPTH).trim_end_matches('/')).is_ok());
        assert!(check_path("a/".repeat(MAX_DEPTH + 1).trim_end_matches('/')).is_err());
        assert!(check_path(&"a".repeat(MAX_COMPONENT_BYTES + 1)).is_err());
    }

    #[test]
    fn outputs_are_reserved_in_the_main_documents_folder_only() {
        for (path, main) in [
            ("output.pdf", "main.tex"),
            ("output.pdf/x.tex", "main.tex"),
            ("paper/output.log", "paper/main.tex"),
            ("paper/output.aux/x", "paper/main.tex"),
        ] {
            assert!(reserved_beside_main(path, main).is_some(), "{path} {main}");
        }
        for (path, main) in [
            ("paper/output.pdf", "main.tex"),
            ("output.pdf", "paper/main.tex"),
            ("paper2/output.pdf", "paper/main.tex"),
            ("paper/figures/output.png", "paper/main.tex"),
            ("outputs.tex", "main.tex"),
        ] {
            assert_eq!(reserved_beside_main(path, main), None, "{path} {main}");
        }
    }

    #[test]
    fn a_file_cannot_stand_where_a_folder_must() {
        let conflicts =
            folder_conflicts(&["main.tex", "a", "a/b.tex", "main.tex/x.tex", "c/d.tex"]);
        let indexes: Vec<usize> = conflicts.iter().map(|(i, _)| *i).collect();
        assert_eq!(indexes, [2, 3]);
        assert!(folder_conflicts(&["main.tex", "a/b.tex", "a/c.tex"]).is_empty());
    }
}
