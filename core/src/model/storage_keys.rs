//! Where a job's and a project's objects live in the bucket: a job's outputs at
//! `compiles/<short_job_id>/...`, what a project keeps beside them at `projects/<project_id>/...`.

use super::Engine;
use uuid::Uuid;

/// `<short_job_id>` of the contract: the part of the id before the first `-`.
pub fn short_job_id(id: Uuid) -> String {
    let id = id.to_string();
    id.split('-').next().unwrap_or(&id).to_string()
}

/// Where the scheduler keeps what compiles of one document (its main path) hand on to the
/// next: `projects/<project>/documents/<hash of the main path>/`, a folder per engine below.
/// Only that project's jobs read below it.
pub fn document_prefix(project_id: Uuid, main: &str) -> String {
    use sha2::{Digest, Sha256};
    let document = Sha256::digest(main);
    let hex: String = document[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("{}{hex}/", project_documents_prefix(project_id))
}

/// The folder of one engine's compiles of a document, below [`document_prefix`].
pub fn document_state_prefix(project_id: Uuid, engine: Engine, main: &str) -> String {
    format!("{}{}/", document_prefix(project_id, main), engine.as_str())
}

/// Where everything a project keeps beside its jobs' outputs lives: its documents' compile
/// states and its project files.
pub fn project_prefix(project_id: Uuid) -> String {
    format!("projects/{project_id}/")
}

/// Where the compile states of all of a project's documents live.
pub fn project_documents_prefix(project_id: Uuid) -> String {
    format!("{}documents/", project_prefix(project_id))
}

pub fn pdf_storage_key(id: Uuid) -> String {
    format!("compiles/{}/output.pdf", short_job_id(id))
}

pub fn log_storage_key(id: Uuid) -> String {
    format!("compiles/{}/output.log", short_job_id(id))
}

pub fn synctex_storage_key(id: Uuid) -> String {
    format!("compiles/{}/output.synctex.gz", short_job_id(id))
}

pub fn thumbnail_storage_key(id: Uuid) -> String {
    format!("compiles/{}/thumbnail.png", short_job_id(id))
}

/// Every object a job may own.
pub fn storage_keys(id: Uuid) -> [String; 4] {
    [
        pdf_storage_key(id),
        log_storage_key(id),
        synctex_storage_key(id),
        thumbnail_storage_key(id),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_keys_use_the_first_segment_of_the_id() {
        let id = Uuid::parse_str("0b9f3c2a-1d4e-4f5a-9b6c-7d8e9f0a1b2c").unwrap();
        assert_eq!(pdf_storage_key(id), "compiles/0b9f3c2a/output.pdf");
        assert_eq!(log_storage_key(id), "compiles/0b9f3c2a/output.log");
        assert_eq!(storage_keys(id)[2], "compiles/0b9f3c2a/output.synctex.gz");
        assert_eq!(storage_keys(id)[3], "compiles/0b9f3c2a/thumbnail.png");
    }
}
