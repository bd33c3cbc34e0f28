//! What the sandbox reads on its stdin for a job: the [`JobSpec`] with the job's files, its
//! limits and a fresh nonce the report must carry back; how long a run may take and how much
//! stdout it may write.

use crate::sandbox_input::OpenedFile;
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use std::time::Duration;
use texfleet_core::model::{CheckMode, ClaimedJob, ClaimedPreview, Engine};
use texfleet_core::Config;
use texfleet_sandbox::{
    FileSpec, JobSpec, Streamed, MAX_FORMAT_BYTES, MAX_STATE_BYTES, MAX_THUMBNAIL_BYTES,
};

/// Room in the sandbox's stdout for the archive's own headers and the report.
const ARCHIVE_OVERHEAD_BYTES: usize = 1024 * 1024;

/// The spec of one run of `job`, with a nonce drawn for this run alone: the files it sent in
/// the spec, those it names by hash streamed after it (`streamed`, in the order of
/// `job.stored_files`).
pub fn job_spec(config: &Config, job: &ClaimedJob, streamed: &[OpenedFile]) -> JobSpec {
    assert_eq!(
        job.stored_files.len(),
        streamed.len(),
        "every file named by hash is opened, none twice"
    );
    JobSpec {
        nonce: format!("{:032x}", rand::random::<u128>()),
        engine: sandbox_engine(job.engine),
        halt_on_error: job.halt_on_error,
        draft: job.draft,
        wordcount: job.wordcount,
        check: job.check.map(|check| match check {
            CheckMode::Warn => texfleet_sandbox::CheckMode::Warn,
            CheckMode::Error => texfleet_sandbox::CheckMode::Error,
        }),
        thumbnail_width: job.thumbnail_width,
        preview_page: None,
        timeout_seconds: job.timeout_seconds,
        max_pdf_bytes: config.max_pdf_bytes as u64,
        max_log_bytes: config.max_log_bytes as u64,
        max_synctex_bytes: config.max_synctex_bytes as u64,
        main: job.main.clone(),
        source_date_epoch: job.source_date_epoch,
        files: job
            .files
            .iter()
            .map(|f| FileSpec {
                path: f.path.clone(),
                content_base64: BASE64.encode(&f.content),
                streamed: None,
            })
            .chain(
                job.stored_files
                    .iter()
                    .zip(streamed)
                    .map(|(named, opened)| FileSpec {
                        path: named.path.clone(),
                        content_base64: String::new(),
                        streamed: Some(Streamed {
                            bytes: opened.size,
                            sha256: named.sha256.hex(),
                        }),
                    }),
            )
            .collect(),
        preamble: Default::default(),
        previous: Default::default(),
    }
}

/// The longest a page preview may render: counting the pages and reading the page's size,
/// then the render, each of which the driver stops at 10 s.
pub const PREVIEW_TIMEOUT_SECONDS: u32 = 25;
/// The name the PDF of a page preview has in the sandbox: not an output's, which the
/// supervisor would take.
const PREVIEW_PDF: &str = "document.pdf";

/// The spec of one page preview of `pdf`: no compile, the page rendered as the thumbnail is.
pub fn preview_spec(config: &Config, preview: &ClaimedPreview, pdf: &[u8]) -> JobSpec {
    JobSpec {
        nonce: format!("{:032x}", rand::random::<u128>()),
        engine: texfleet_sandbox::Engine::Pdflatex,
        halt_on_error: false,
        draft: false,
        wordcount: false,
        check: None,
        thumbnail_width: Some(preview.width),
        preview_page: Some(preview.page),
        timeout_seconds: PREVIEW_TIMEOUT_SECONDS,
        max_pdf_bytes: config.max_pdf_bytes as u64,
        max_log_bytes: config.max_log_bytes as u64,
        max_synctex_bytes: config.max_synctex_bytes as u64,
        main: PREVIEW_PDF.into(),
        source_date_epoch: 0,
        files: vec![FileSpec {
            path: PREVIEW_PDF.into(),
            content_base64: BASE64.encode(pdf),
            streamed: None,
        }],
        preamble: Default::default(),
        previous: Default::default(),
    }
}

/// The job's engine as the spec names it.
fn sandbox_engine(engine: Engine) -> texfleet_sandbox::Engine {
    match engine {
        Engine::Pdflatex => texfleet_sandbox::Engine::Pdflatex,
        Engine::Xelatex => texfleet_sandbox::Engine::Xelatex,
        Engine::Lualatex => texfleet_sandbox::Engine::Lualatex,
    }
}

/// Our outer deadline for a run of a job: the time its `streamed_bytes` take to reach the
/// sandbox (whose own deadline starts once they are in), its `timeout_seconds`, then the grace
/// the supervisor has to stop the compile and report.
pub fn deadline(config: &Config, timeout_seconds: u32, streamed_bytes: u64) -> Duration {
    let run = Duration::from_secs(u64::from(timeout_seconds + config.kill_grace_seconds));
    run + streaming_time(streamed_bytes)
}

/// The slowest rate at which streamed files are counted to arrive, from the store into the disk
/// cache and from there into the sandbox: far below what either gives (159 MiB in under a
/// second on two cores from the disk cache).
const STREAMED_BYTES_PER_SECOND: u64 = 16 * 1024 * 1024;

pub fn streaming_time(streamed_bytes: u64) -> Duration {
    Duration::from_secs(streamed_bytes.div_ceil(STREAMED_BYTES_PER_SECOND))
}

/// The most a run may write to stdout: every output at its cap (a thumbnail's too, asked for
/// or not: the sandbox's archive may hold one), what it hands on to the next compile, and the
/// archive around them.
pub fn max_stdout(config: &Config) -> usize {
    config.max_pdf_bytes
        + config.max_log_bytes
        + config.max_synctex_bytes
        + (MAX_STATE_BYTES + MAX_FORMAT_BYTES + MAX_THUMBNAIL_BYTES) as usize
        + ARCHIVE_OVERHEAD_BYTES
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streamed_files_lengthen_the_deadline_by_their_time_to_arrive() {
        let config = Config {
            kill_grace_seconds: 5,
            ..Config::default()
        };
        assert_eq!(deadline(&config, 60, 0), Duration::from_secs(65));
        assert_eq!(deadline(&config, 60, 1), Duration::from_secs(66));
        let most = 160 * 1024 * 1024;
        assert_eq!(deadline(&config, 60, most), Duration::from_secs(75));
    }
}
