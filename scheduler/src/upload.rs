//! Uploading a job's outputs to the object store. Each object carries its origin (the
//! scheduler and the attempt that wrote it), so that what is stored can be traced to one
//! compile; each PUT is fenced by the lease and retried with back-off while the job is still
//! ours, and every retry is counted.

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
/// their keys in `outcome`.
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
    if let Some(log) = log {
        let key = log_storage_key(job.id);
        outcome.log_sha256 = Some(sha256_hex(&log));
        put(context, job, &key, log, "text/plain; charset=utf-8", stop).await?;
        outcome.log_storage_key = Some(key);
    }
    if outcome.status == JobStatus::Succeeded {
        let key = pdf_storage_key(job.id);
        let pdf = pdf.unwrap_or_default();
        outcome.pdf_sha256 = Some(sha256_hex(&pdf));
        put(context, job, &key, pdf, "application/pdf", stop).await?;
        tracing::info!(key, "pdf uploaded");
        outcome.pdf_storage_key = Some(key);
        let limit = context
            .config
            .max_synctex_bytes
            .saturating_mul(UNCOMPRESSED_SYNCTEX_FACTOR);
        match synctex {
            Some(synctex) if synctex::is_synctex(&synctex, limit) => {
                let key = synctex_storage_key(job.id);
                outcome.synctex_sha256 = Some(sha256_hex(&synctex));
                put(context, job, &key, synctex, "application/gzip", stop).await?;
                outcome.synctex_storage_key = Some(key);
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
                put(context, job, &key, png, "image/png", stop).await?;
                outcome.thumbnail_storage_key = Some(key);
            }
            Some(_) => {
                tracing::warn!("the sandbox's thumbnail is not the PNG asked for; not stored")
            }
            None => {}
        }
    }
    metrics::UPLOAD_TIME.observe(uploading.elapsed().as_secs_f64());
    Ok(outcome)
}

/// One PUT, retried for about half a minute of back-off unless the job is taken from us.
/// Fenced: the lease is renewed first, so that a scheduler that lost the job (paused past its
/// lease, say) does not overwrite the outputs of the one that has it. A Postgres error does
/// not stop it: the lease outlives short outages.
async fn put(
    context: &Context,
    job: &ClaimedJob,
    key: &str,
    bytes: Vec<u8>,
    content_type: &str,
    stop: &JobStop,
) -> Result<(), Interrupted> {
    let lease = context.config.lease_seconds;
    if let Ok(false) = db::renew_lease(&context.db, job.id, &context.owner, lease).await {
        stop.stop(StopReason::LeaseLost);
    }
    if stop.token.is_cancelled() {
        return Err(Interrupted::Stopped);
    }
    let origin = format!("{} attempt {}", context.owner, job.attempt);
    let put = || {
        context
            .storage
            .put(key, bytes.clone(), content_type, &origin)
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
