//! The engine runs with `-recorder`, so after each pass its `.fls` lists what it read and
//! wrote. A pass must be followed by another when a file it read changed during it (an `.aux`
//! rewritten with new labels). File names from the `.fls` are only compared with files on
//! disk, never passed to a program.

use std::collections::HashSet;
use std::fs;
use std::path::{Component, Path, PathBuf};
use texfleet_sandbox::is_plain_relative;

/// The recorder's file, named by the job (`JOB_NAME`).
pub const RECORDER_FILE: &str = "output.fls";

/// What a pass read and wrote, from its `.fls`: paths relative to the folder it ran in, only
/// those inside it (TeX's own trees are not ours to watch).
#[derive(Debug, Default)]
pub struct Recorded {
    pub inputs: Vec<PathBuf>,
    pub outputs: Vec<PathBuf>,
}

pub fn read_recorder(fls: &Path, folder: &Path) -> Recorded {
    let mut recorded = Recorded::default();
    // A document may write tens of thousands of files: each is listed once, found in O(1).
    let mut seen: HashSet<(bool, PathBuf)> = HashSet::new();
    let text = fs::read(fls).unwrap_or_default();
    for line in String::from_utf8_lossy(&text).lines() {
        let (is_output, list, name) = match line.split_once(' ') {
            Some(("INPUT", name)) => (false, &mut recorded.inputs, name),
            Some(("OUTPUT", name)) => (true, &mut recorded.outputs, name),
            _ => continue,
        };
        let path = Path::new(name);
        let relative = if path.is_absolute() {
            match path.strip_prefix(folder) {
                Ok(inside) => inside.to_path_buf(),
                Err(_) => continue,
            }
        } else {
            path.components()
                .filter(|c| !matches!(c, Component::CurDir))
                .collect()
        };
        if is_plain_relative(&relative) && seen.insert((is_output, relative.clone())) {
            list.push(relative);
        }
    }
    recorded
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_recorder_list_keeps_only_files_of_the_compile() {
        let dir = tempfile::tempdir().unwrap();
        let fls = dir.path().join("output.fls");
        fs::write(
            &fls,
            "PWD /work/paper\nINPUT /usr/share/texlive/texmf-dist/tex/latex/base/article.cls\n\
             INPUT ./main.tex\nINPUT /work/paper/output.aux\nINPUT output.aux\n\
             INPUT /work/other/x.tex\nOUTPUT output.log\nOUTPUT ./chapters/one.aux\n\
             OUTPUT ../escape.aux\n",
        )
        .unwrap();
        let recorded = read_recorder(&fls, Path::new("/work/paper"));
        assert_eq!(
            recorded.inputs,
            [PathBuf::from("main.tex"), "output.aux".into()]
        );
        assert_eq!(
            recorded.outputs,
            [PathBuf::from("output.log"), "chapters/one.aux".into()]
        );
    }
}
