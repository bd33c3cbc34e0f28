//! Every S3 call texfleet makes, in one place. Objects live at `compiles/<short_job_id>/...`
//! (see [`crate::model::pdf_storage_key`]); nothing else is written to the bucket.

use crate::Config;
use aws_sdk_s3::config::{BehaviorVersion, Credentials, Region, RequestChecksumCalculation};
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::Client;

#[derive(Clone)]
pub struct Storage {
    client: Client,
    bucket: String,
}

#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("object {0} not found")]
    NotFound(String),
    #[error("object storage failed: {0}")]
    Failed(String),
}

/// A readable object: its length and a stream of its bytes.
pub struct Object {
    pub content_length: Option<i64>,
    pub body: ByteStream,
}

impl Storage {
    /// A client for any S3-compatible store (Garage in development): path-style addressing,
    /// static credentials, and checksums only where the API requires them, since not every
    /// S3-compatible store accepts the SDK's newer default checksum headers.
    pub fn new(config: &Config) -> Storage {
        let credentials = Credentials::new(
            &config.s3_access_key_id,
            &config.s3_secret_access_key,
            None,
            None,
            "texfleet-config",
        );
        let s3_config = aws_sdk_s3::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .endpoint_url(&config.s3_endpoint)
            .region(Region::new(config.s3_region.clone()))
            .credentials_provider(credentials)
            .force_path_style(true)
            .request_checksum_calculation(RequestChecksumCalculation::WhenRequired)
            .build();
        Storage {
            client: Client::from_conf(s3_config),
            bucket: config.s3_bucket.clone(),
        }
    }

    pub async fn put(
        &self,
        key: &str,
        bytes: Vec<u8>,
        content_type: &str,
    ) -> Result<(), StorageError> {
        self.client
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .content_type(content_type)
            .body(ByteStream::from(bytes))
            .send()
            .await
            .map_err(failed)?;
        Ok(())
    }

    pub async fn get(&self, key: &str) -> Result<Object, StorageError> {
        match self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
        {
            Ok(output) => Ok(Object {
                content_length: output.content_length,
                body: output.body,
            }),
            Err(error) if error.as_service_error().is_some_and(|e| e.is_no_such_key()) => {
                Err(StorageError::NotFound(key.to_string()))
            }
            Err(error) => Err(failed(error)),
        }
    }

    /// Deletes an object; deleting one that does not exist is not an error (S3 semantics).
    pub async fn delete(&self, key: &str) -> Result<(), StorageError> {
        self.client
            .delete_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
            .map_err(failed)?;
        Ok(())
    }

    /// Reads a whole object into memory; for small objects such as logs.
    pub async fn get_bytes(&self, key: &str) -> Result<Vec<u8>, StorageError> {
        let object = self.get(key).await?;
        let bytes = object
            .body
            .collect()
            .await
            .map_err(|e| StorageError::Failed(e.to_string()))?;
        Ok(bytes.into_bytes().to_vec())
    }
}

/// An SDK error with its whole chain of causes, which the SDK's Display alone leaves out.
fn failed(error: impl std::error::Error) -> StorageError {
    StorageError::Failed(aws_sdk_s3::error::DisplayErrorContext(error).to_string())
}
