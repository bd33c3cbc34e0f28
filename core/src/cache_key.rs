//! The key of the result cache, and the identity of a request for `Idempotency-Key`.
//!
//! The result cache's key is a hash of everything a job's output depends on that the
//! request or the operator's limits decide (engine, TeX Live year, options, the main document's path, every
//! file's path and bytes; the sandbox's runtime and limits, which can fail a compile that
//! passed before). The rest of
//! what decides it is matched beside the key in [`crate::db`]: the project, the sandbox image
//! that ran the original, and the UTC day of submission, which sets the dates it writes.

use crate::model::{ContentHash, NewJob};
use crate::Config;
use sha2::{Digest, Sha256};

/// SHA-256 over the sandbox's settings, the job's options and its files in path order, each
/// field length-prefixed so that no two different jobs hash the same bytes.
pub fn input_hash(job: &NewJob, config: &Config) -> Vec<u8> {
    let mut fields = Fields::default();
    fields.add(config.sandbox_runtime.as_bytes());
    for limit in [
        config.sandbox_memory_mb as u64,
        config.sandbox_pids_limit as u64,
        config.sandbox_cpus.to_bits(),
        config.sandbox_tmpfs_mb as u64,
        config.max_pdf_bytes as u64,
        config.max_log_bytes as u64,
        config.max_synctex_bytes as u64,
        u64::from(config.kill_grace_seconds),
    ] {
        fields.add(&limit.to_be_bytes());
    }
    fields.add_job(job);
    fields.finish()
}

/// What makes two submissions the same request for `Idempotency-Key`: everything the client
/// asked for, whichever transport (JSON or multipart) and field names (`latex` or
/// `input_latex`) carried it.
pub fn request_hash(job: &NewJob) -> Vec<u8> {
    let mut fields = Fields::default();
    fields.add_job(job);
    fields.add(&[u8::from(job.use_cache)]);
    fields.finish()
}

/// A SHA-256 over length-prefixed fields.
#[derive(Default)]
struct Fields(Sha256);

impl Fields {
    fn add(&mut self, bytes: &[u8]) {
        self.0.update((bytes.len() as u64).to_be_bytes());
        self.0.update(bytes);
    }

    /// The job's options and its files in path order.
    fn add_job(&mut self, job: &NewJob) {
        self.add(job.engine.as_str().as_bytes());
        self.add(job.texlive.as_bytes());
        self.add(&[u8::from(job.halt_on_error)]);
        // The options added since the first keys, only when set, so that the keys of the jobs
        // stored before them stand; each marker is a word no other field here can be (the
        // timeout that follows is four bytes).
        if job.draft {
            self.add(b"draft");
        }
        // A result without a count or a check cannot stand for one asked for them.
        if job.wordcount {
            self.add(b"wordcount");
        }
        if let Some(check) = job.check {
            self.add(b"check");
            self.add(check.as_str().as_bytes());
        }
        if let Some(width) = job.thumbnail_width {
            self.add(b"thumbnail");
            self.add(&width.to_be_bytes());
        }
        self.add(&job.timeout_seconds.to_be_bytes());
        self.add(job.main.as_bytes());
        // Each file by its content's hash, so that a file sent with the request and the same
        // bytes named as a project file are the same input.
        let mut files: Vec<(&str, ContentHash)> = job
            .files
            .iter()
            .map(|file| (file.path.as_str(), ContentHash::of(&file.content)))
            .chain(
                job.stored_files
                    .iter()
                    .map(|file| (file.path.as_str(), file.sha256)),
            )
            .collect();
        files.sort();
        for (path, sha256) in files {
            self.add(path.as_bytes());
            self.add(&sha256.0);
        }
    }

    fn finish(self) -> Vec<u8> {
        self.0.finalize().to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{CheckMode, Engine, SourceFile, StoredFile};

    fn job(files: &[(&str, &str)]) -> NewJob {
        NewJob {
            project_id: uuid::Uuid::nil(),
            engine: Engine::Pdflatex,
            texlive: "2024".into(),
            halt_on_error: false,
            draft: false,
            wordcount: false,
            check: None,
            thumbnail_width: None,
            timeout_seconds: 30,
            main: "main.tex".into(),
            files: files
                .iter()
                .map(|(path, content)| SourceFile {
                    path: path.to_string(),
                    content: content.as_bytes().to_vec(),
                })
                .collect(),
            stored_files: vec![],
            use_cache: true,
        }
    }

    #[test]
    fn a_file_named_by_its_hash_is_the_same_input_as_its_bytes() {
        let config = Config::default();
        let sent = job(&[("main.tex", "x"), ("a.png", "PNG")]);
        let mut named = job(&[("main.tex", "x")]);
        named.stored_files.push(StoredFile {
            path: "a.png".into(),
            sha256: ContentHash::of(b"PNG"),
        });
        assert_eq!(input_hash(&sent, &config), input_hash(&named, &config));
        assert_eq!(request_hash(&sent), request_hash(&named));
        named.stored_files[0].sha256 = ContentHash::of(b"GIF");
        assert_ne!(input_hash(&sent, &config), input_hash(&named, &config));
        named.stored_files[0].sha256 = ContentHash::of(b"PNG");
        named.stored_files[0].path = "b.png".into();
        assert_ne!(input_hash(&sent, &config), input_hash(&named, &config));
    }

    #[test]
    fn the_order_of_files_does_not_matter_but_every_byte_and_option_does() {
        let config = Config::default();
        let base = job(&[("main.tex", "x"), ("a.tex", "y")]);
        assert_eq!(
            input_hash(&base, &config),
            input_hash(&job(&[("a.tex", "y"), ("main.tex", "x")]), &config)
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
        let mut draft = job(&[("main.tex", "x"), ("a.tex", "y")]);
        draft.draft = true;
        let mut counted = job(&[("main.tex", "x"), ("a.tex", "y")]);
        counted.wordcount = true;
        let mut warned = job(&[("main.tex", "x"), ("a.tex", "y")]);
        warned.check = Some(CheckMode::Warn);
        let mut stopped = job(&[("main.tex", "x"), ("a.tex", "y")]);
        stopped.check = Some(CheckMode::Error);
        let mut thumbnail = job(&[("main.tex", "x"), ("a.tex", "y")]);
        thumbnail.thumbnail_width = Some(200);
        let mut wider = job(&[("main.tex", "x"), ("a.tex", "y")]);
        wider.thumbnail_width = Some(201);
        let mut longer = job(&[("main.tex", "x"), ("a.tex", "y")]);
        longer.timeout_seconds = 31;
        let mut other_main = job(&[("main.tex", "x"), ("a.tex", "y")]);
        other_main.main = "a.tex".into();
        let mut other_year = job(&[("main.tex", "x"), ("a.tex", "y")]);
        other_year.texlive = "2022".into();
        changed.extend([
            engine, halting, draft, counted, warned, stopped, longer, other_main, other_year,
        ]);
        assert_ne!(input_hash(&thumbnail, &config), input_hash(&wider, &config));
        changed.extend([thumbnail, wider]);
        for other in changed {
            assert_ne!(
                input_hash(&base, &config),
                input_hash(&other, &config),
                "{:?}",
                other.files
            );
        }
        let tighter = Config {
            sandbox_memory_mb: config.sandbox_memory_mb / 2,
            ..Config::default()
        };
        assert_ne!(input_hash(&base, &config), input_hash(&base, &tighter));
    }

    #[test]
    fn a_request_is_the_same_whatever_the_sandbox_but_not_whatever_the_cache_option() {
        let base = job(&[("main.tex", "x")]);
        assert_eq!(
            request_hash(&base),
            request_hash(&job(&[("main.tex", "x")]))
        );
        let fresh = NewJob {
            use_cache: false,
            ..job(&[("main.tex", "x")])
        };
        assert_ne!(request_hash(&base), request_hash(&fresh));
        assert_ne!(
            request_hash(&base),
            request_hash(&job(&[("main.tex", "y")]))
        );
    }
}
