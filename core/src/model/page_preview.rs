//! Page previews: a PNG of one page of a Succeeded job's PDF at one width, rendered on demand
//! in a sandbox container (the PDF is as hostile as the document that made it) and kept beside
//! the PDF, so that an editor shows a document page by page without a PDF viewer.

use super::short_job_id;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

text_enum! {
    /// The states of a page preview: a queue entry of its own, run like a job.
    pub enum PreviewStatus {
        Queued,
        Running,
        Succeeded,
        Failed,
    }
}

/// The pages a preview may show: the first to the hundred thousandth (the PDF's own count is
/// known only once it is rendered).
pub const PREVIEW_PAGES: std::ops::RangeInclusive<u32> = 1..=100_000;

/// A page's sides, in hundredths of a point: PDF pages are 1 to 14,400 units a side, and a
/// page's user unit makes them larger (up to a million points told).
pub const PAGE_SIDES: std::ops::RangeInclusive<u32> = 100..=100_000_000;

/// A page preview as the API reads it.
#[derive(Debug, Clone)]
pub struct PagePreview {
    pub job_id: Uuid,
    pub project_id: Uuid,
    pub page: u32,
    pub width: u32,
    pub status: PreviewStatus,
    pub storage_key: Option<String>,
    pub sha256: Option<String>,
    /// For a Succeeded preview: the page's width and height as shown, in hundredths of a point.
    pub page_size: Option<[u32; 2]>,
    /// For a Failed preview of a page past the PDF's end: how many pages the PDF has.
    pub page_count: Option<u32>,
    pub error_message: Option<String>,
}

/// A page preview a scheduler has claimed, with what its render needs.
#[derive(Debug, Clone)]
pub struct ClaimedPreview {
    pub id: Uuid,
    pub job_id: Uuid,
    pub project_id: Uuid,
    pub page: u32,
    pub width: u32,
    pub attempt: i32,
    /// The job's stored PDF (a reused result's names the original's).
    pub pdf_storage_key: String,
}

/// How a render ended, as the scheduler records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rendered {
    /// Stored at `storage_key`, with its hex SHA-256 and the page's size as shown, in
    /// hundredths of a point (within [`PAGE_SIDES`]).
    Stored {
        storage_key: String,
        sha256: String,
        page_size: [u32; 2],
        /// The sandbox image that rendered it.
        image_id: String,
    },
    /// The PDF has only this many pages.
    PastTheEnd { page_count: u32 },
    /// No image came out: why.
    Failed { message: String },
}

/// `compiles/<short_job_id>/pages/<page>-<width>.png`: beside the job's PDF.
pub fn page_preview_key(job_id: Uuid, page: u32, width: u32) -> String {
    format!("{}{page}-{width}.png", page_previews_prefix(job_id))
}

/// The folder of a job's page previews (retention deletes what it holds).
pub fn page_previews_prefix(job_id: Uuid) -> String {
    format!("compiles/{}/pages/", short_job_id(job_id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn previews_live_beside_the_pdf() {
        let id = Uuid::parse_str("0b9f3c2a-1d4e-4f5a-9b6c-7d8e9f0a1b2c").unwrap();
        assert_eq!(
            page_preview_key(id, 3, 400),
            "compiles/0b9f3c2a/pages/3-400.png"
        );
        assert!(page_preview_key(id, 1, 16).starts_with(&page_previews_prefix(id)));
    }
}
