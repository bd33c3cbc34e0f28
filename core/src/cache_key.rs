//! The key of the result cache: a hash of everything a job's output depends on that the
//! request decides (engine, options, every file's path and bytes). The rest of what decides
//! it is matched beside the key in [`crate::db`]: the project, the sandbox image that ran the
//! original, and the UTC day of submission, which sets the dates the compile writes.

use crate::model::NewJob;
use sha2::{Digest, Sha256};

/// SHA-256 over the job's options and its files in path order, each field length-prefixed so
/// that no two different jobs hash the same bytes.
pub fn input_hash(job: &NewJob) -> Vec<u8> {
    let mut hasher = Sha256::new();
    let mut field = |bytes: &[u8]| {
        hasher.update((bytes.len() as u64).to_be_bytes());
        hasher.update(bytes);
    };
    field(job.engine.as_str().as_bytes());
    field(&[u8::from(job.halt_on_error)]);
    field(&job.timeout_seconds.to_be_bytes());
    let mut files: Vec<_> = job.files.iter().collect();
    files.sort_by(|a, b| a.path.cmp(&b.path));
    for file in files {
        field(file.path.as_bytes());
        field(&file.content);
    }
    hasher.finalize().to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Engine, SourceFile};

    fn job(files: &[(&str, &str)]) -> NewJob {
        NewJob {
            project_id: uuid::Uuid::nil(),
            engine: Engine::Pdflatex,
            halt_on_error: false,
            timeout_seconds: 30,
            files: files
                .iter()
                .map(|(path, content)| SourceFile {
                    path: path.to_string(),
                    content: content.as_bytes().to_vec(),
                })
                .collect(),
            use_cache: true,
        }
    }

    #[test]
    fn the_order_of_files_does_not_matter_but_every_byte_and_option_does() {
        let base = job(&[("main.tex", "x"), ("a.tex", "y")]);
        assert_eq!(
            input_hash(&base),
            input_hash(&job(&[("a.tex", "y"), ("main.tex", "x")]))
        );
        let mut changed = vec![
            job(&[("main.tex", "x"), ("a.tex", "z")]),
            job(&[("main.tex", "x"), ("b.tex", "y")]),
            // The same bytes split differently between path and content.
            job(&[("main.tex", "x"), ("a.te", "xy")]),
            job(&[("main.tex", "x")]),
        ];
        let mut engine = job(&[("main.tex", "x"), ("a.tex", "y")]);
        engine.engine = Engine::Xelatex;
        let mut halting = job(&[("main.tex", "x"), ("a.tex", "y")]);
        halting.halt_on_error = true;
        let mut longer = job(&[("main.tex", "x"), ("a.tex", "y")]);
        longer.timeout_seconds = 31;
        changed.extend([engine, halting, longer]);
        for other in changed {
            assert_ne!(input_hash(&base), input_hash(&other), "{:?}", other.files);
        }
    }
}
