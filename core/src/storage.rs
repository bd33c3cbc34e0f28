//! Every S3 call texfleet makes, in one place. Objects live at `compiles/<short_job_id>/...`
//! (see [`crate::model::pdf_storage_key`]), and what a document's compiles hand on to the next
//! at `projects/<project_id>/documents/...` ([`crate::model::document_state_prefix`]), and the
//! files a project uploads at `projects/<project_id>/files/...` ([`crate::model::project_file_key`],
//! written in parts when large: [`parts`]); nothing else is written to the bucket.

mod parts;

use crate::Config;
use aws_sdk_s3::config::{BehaviorVersion, Credentials, Region, RequestChecksumCalculation};
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::Client;
use std::time::{SystemTime, UNIX_EPOCH};

pub use parts::{PartUpload, PART_BYTES};

/// The metadata key naming who stored an object.
const ORIGIN: &str = "texfleet-origin";

/// One object of a listing.
#[derive(Debug, Clone)]
pub struct Listed {
    pub key: String,
    pub written: SystemTime,
    pub bytes: u64,
}

#[derive(Clone)]
pub struct Storage {
    client: Client,
    bucket: String,
}

#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("object {0} not found")]
    NotFound(String),
    /// `context` is the SDK error with its whole chain of causes, which its Display leaves out.
    #[error("object storage failed: {context}")]
    Failed {
        context: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
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

    /// Stores `bytes` at `key`; `origin` (who wrote it, for tracing) goes into the object's
    /// metadata as `texfleet-origin`.
    pub async fn put(
        &self,
        key: &str,
        bytes: Vec<u8>,
        content_type: &str,
        origin: &str,
    ) -> Result<(), StorageError> {
        self.client
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .content_type(content_type)
            .metadata(ORIGIN, origin)
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

    /// The `origin` an object was stored with, or None when it does not exist.
    pub async fn origin(&self, key: &str) -> Result<Option<String>, StorageError> {
        match self
            .client
            .head_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
        {
            Ok(head) => Ok(head.metadata().and_then(|m| m.get(ORIGIN).cloned())),
            Err(error) if error.as_service_error().is_some_and(|e| e.is_not_found()) => Ok(None),
            Err(error) => Err(failed(error)),
        }
    }

    /// The keys stored under `prefix`.
    pub async fn list(&self, prefix: &str) -> Result<Vec<String>, StorageError> {
        let objects = self.list_with_sizes(prefix).await?;
        Ok(objects.into_iter().map(|object| object.key).collect())
    }

    /// The objects stored under `prefix`, with their sizes and when each was last written,
    /// all pages.
    pub async fn list_with_sizes(&self, prefix: &str) -> Result<Vec<Listed>, StorageError> {
        let mut pages = self
            .client
            .list_objects_v2()
            .bucket(&self.bucket)
            .prefix(prefix)
            .into_paginator()
            .send();
        let mut objects = Vec::new();
        while let Some(page) = pages.next().await {
            for object in page.map_err(failed)?.contents() {
                let written = object
                    .last_modified()
                    .and_then(|at| SystemTime::try_from(*at).ok());
                if let Some(key) = object.key() {
                    objects.push(Listed {
                        key: key.to_string(),
                        written: written.unwrap_or(UNIX_EPOCH),
                        bytes: object.size().unwrap_or(0).max(0) as u64,
                    });
                }
            }
        }
        Ok(objects)
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
        let bytes = object.body.collect().await.map_err(failed)?;
        Ok(bytes.into_bytes().to_vec())
    }
}

fn failed(error: impl std::error::Error + Send + Sync + 'static) -> StorageError {
    StorageError::Failed {
        context: aws_sdk_s3::error::DisplayErrorContext(&error).to_string(),
        source: Box::new(error),
    }
}
