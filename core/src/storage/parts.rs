//! An object written in parts (S3 multipart upload), for project files too large to hold in
//! memory while their hash is checked: nothing is visible at the key until [`PartUpload::complete`],
//! and [`PartUpload::abort`] leaves nothing behind.

use super::{failed, Storage, StorageError, ORIGIN};
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart};

/// The size of every part but the last (S3 wants at least 5 MiB).
pub const PART_BYTES: usize = 8 * 1024 * 1024;

/// A multipart upload under way.
pub struct PartUpload {
    storage: Storage,
    key: String,
    upload_id: String,
    parts: Vec<CompletedPart>,
}

impl Storage {
    /// Starts writing `key` in parts.
    pub async fn start_parts(
        &self,
        key: &str,
        content_type: &str,
        origin: &str,
    ) -> Result<PartUpload, StorageError> {
        let started = self
            .client
            .create_multipart_upload()
            .bucket(&self.bucket)
            .key(key)
            .content_type(content_type)
            .metadata(ORIGIN, origin)
            .send()
            .await
            .map_err(failed)?;
        let upload_id = started
            .upload_id
            .ok_or_else(|| failed(std::io::Error::other("the store gave no upload id")))?;
        Ok(PartUpload {
            storage: self.clone(),
            key: key.to_string(),
            upload_id,
            parts: Vec::new(),
        })
    }
}

impl PartUpload {
    /// Writes the next part.
    pub async fn put(&mut self, bytes: Vec<u8>) -> Result<(), StorageError> {
        let number = self.parts.len() as i32 + 1;
        let written = self
            .storage
            .client
            .upload_part()
            .bucket(&self.storage.bucket)
            .key(&self.key)
            .upload_id(&self.upload_id)
            .part_number(number)
            .body(ByteStream::from(bytes))
            .send()
            .await
            .map_err(failed)?;
        self.parts.push(
            CompletedPart::builder()
                .part_number(number)
                .set_e_tag(written.e_tag)
                .build(),
        );
        Ok(())
    }

    /// Makes the object visible at its key, whole.
    pub async fn complete(self) -> Result<(), StorageError> {
        self.storage
            .client
            .complete_multipart_upload()
            .bucket(&self.storage.bucket)
            .key(&self.key)
            .upload_id(&self.upload_id)
            .multipart_upload(
                CompletedMultipartUpload::builder()
                    .set_parts(Some(self.parts))
                    .build(),
            )
            .send()
            .await
            .map_err(failed)?;
        Ok(())
    }

    /// Drops the parts written; the key is left as it was.
    pub async fn abort(self) -> Result<(), StorageError> {
        self.storage
            .client
            .abort_multipart_upload()
            .bucket(&self.storage.bucket)
            .key(&self.key)
            .upload_id(&self.upload_id)
            .send()
            .await
            .map_err(failed)?;
        Ok(())
    }
}
