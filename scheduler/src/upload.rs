//! Uploading a job's outputs to the object store. Each object carries its origin (the
//! scheduler and the attempt that wrote it), so that what is stored can be traced to one
//! compile; the PUTs are fenced by the lease and each is retried with back-off while the job
//! is still ours, and every retry is counted.

use crate::metrics;
use crate::outcome::Interrupted;
use crate::stop::{JobStop, StopReason};
use crate::synctex;
use crate::thumbnail::is_thumbnail;
use crate::Context;
use backon::{ExponentialBuilder, Retryable};
use std::time::{Duration, Instant};
use texfleet_core::db::{self, Outcome};
use texfleet_core::digest::sha256_hex;
use texfleet_core::model::{
    log_storage_key, pdf_storage_key, synctex_storage_key, thumbnail_storage_key, ClaimedJob,
    JobStatus,
};

/// How much larger than its cap a SyncTeX file may grow when decompressed.
const UNCOMPRESSED_SYNCTEX_FACTOR: usize = 4;

/// What a compile left to store, as collected from the sandbox (caps and types checked).
pub struct Outputs {
    pub log: Option<Vec<u8>>,
    pub pdf: Option<Vec<u8>>,
    pub synctex: Option<Vec<u8>>,
    pub thumbnail: Option<Vec<u8>>,
}

/// Uploads the log, and the PDF, SyncTeX file and thumbnail of a Succeeded job, and records
/// their keys in `outcome`. One lease renewal fences them all; the PUTs run at once.
pub async fn upload_outputs(
    context: &Context,
    job: &ClaimedJob,
    stop: &JobStop,
    outputs: Outputs,
    mut outcome: Outcome,
) -> Result<Outcome, Interrupted> {
    let uploading = Instant::now();
    let Outputs {
        log,
        pdf,
        synctex,
        thumbnail,
    } = outputs;
    let mut puts = Vec::new();
    if let Some(log) = log {
        let key = log_storage_key(job.id);
        outcome.log_sha256 = Some(sha256_hex(&log));
        outcome.log_storage_key = Some(key.clone());
        puts.push((key, log, "text/plain; charset=utf-8"));
    }
    if outcome.status == JobStatus::Succeeded {
        let key = pdf_storage_key(job.id);
        let pdf = pdf.unwrap_or_default();
        outcome.pdf_sha256 = Some(sha256_hex(&pdf));
        outcome.pdf_storage_key = Some(key.clone());
        puts.push((key, pdf, "application/pdf"));
        let limit = context
            .config
            .max_synctex_bytes
            .saturating_mul(UNCOMPRESSED_SYNCTEX_FACTOR);
        match synctex {
            Some(synctex) if synctex::is_synctex(&synctex, limit) => {
                let key = synctex_storage_key(job.id);
                outcome.synctex_sha256 = Some(sha256_hex(&synctex));
                outcome.synctex_storage_key = Some(key.clone());
                puts.push((key, synctex, "application/gzip"));
            }
            Some(_) => {
                tracing::warn!("the sandbox's output.synctex.gz is not a SyncTeX file; not stored")
            }
            None => {}
        }
        let asked = job.thumbnail_width;
        match thumbnail.zip(asked) {
            Some((png, width)) if is_thumbnail(&png, width) => {
                let key = thumbnail_storage_key(job.id);
                outcome.thumbnail_sha256 = Some(sha256_hex(&png));
                outcome.thumbnail_storage_key = Some(key.clone());
                puts.push((key, png, "image/png"));
            }
            Some(_) => {
                tracing::warn!("the sandbox's thumbnail is not the PNG asked for; not stored")
            }
            None => {}
        }
    }
    fence(context, job, stop).await?;
    let origin = format!("{} attempt {}", context.owner, job.attempt);
    let puts = puts
        .into_iter()
        .map(|(key, bytes, content_type)| put(context, key, bytes, content_type, &origin, stop));
    futures::future::try_join_all(puts).await?;
    if let Some(key) = &outcome.pdf_storage_key {
        tracing::info!(key, "pdf uploaded");
    }
    metrics::UPLOAD_TIME.observe(uploading.elapsed().as_secs_f64());
    Ok(outcome)
}

/// Renews the lease before anything is stored, so that a scheduler that lost the job (paused
/// past its lease, say) does not overwrite the outputs of the one that has it. A Postgres
/// error does not stop the upload: the lease outlives short outages.
async fn fence(context: &Context, job: &ClaimedJob, stop: &JobStop) -> Result<(), Interrupted> {
    let lease = context.config.lease_seconds;
    if let Ok(false) = db::renew_lease(&context.db, job.id, &context.owner, lease).await {
        stop.stop(StopReason::LeaseLost);
    }
    match stop.token.is_cancelled() {
        true => Err(Interrupted::Stopped),
        false => Ok(()),
    }
}

/// One PUT, retried for about half a minute of back-off unless the job is taken from us.
async fn put(
    context: &Context,
    key: String,
    bytes: Vec<u8>,
    content_type: &str,
    origin: &str,
    stop: &JobStop,
) -> Result<(), Interrupted> {
    let put = || {
        context
            .storage
            .put(&key, bytes.clone(), content_type, origin)
    };
    put.retry(
        ExponentialBuilder::default()
            .with_min_delay(Duration::from_millis(200))
            .with_max_delay(Duration::from_secs(10))
            .with_max_times(8)
            .with_jitter(),
    )
    .when(|_| !stop.token.is_cancelled())
    .notify(|error, delay| {
        metrics::UPLOAD_RETRIES.inc();
        tracing::warn!(%error, ?delay, key, "upload failed; retrying")
    })
    .await?;
    Ok(())
}
