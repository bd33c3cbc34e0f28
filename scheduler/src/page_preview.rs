//! One page preview from claim to recorded outcome: the job's stored PDF goes into a sandbox
//! container in render mode ([`preview_spec`]: nothing is compiled, Ghostscript renders the
//! page as it renders a thumbnail), the PNG that comes out is checked like a thumbnail
//! ([`is_thumbnail`]) and stored beside the PDF, and the outcome is recorded under the
//! preview's lease. The PDF is as hostile as the document that made it: a page that loops
//! Ghostscript or bombs its memory ends in the sandbox's limits, as a Failed preview.

use crate::compile::keep_lease;
use crate::job_spec::{preview_spec, PREVIEW_TIMEOUT_SECONDS};
use crate::metrics;
use crate::outcome::Interrupted;
use crate::sandbox_run::{self, Ran};
use crate::stop::{JobStop, StopReason};
use crate::thumbnail::is_thumbnail;
use crate::Context;
use std::time::{Duration, Instant};
use texfleet_core::db;
use texfleet_core::digest::sha256_hex;
use texfleet_core::model::{page_preview_key, ClaimedPreview, Rendered, PAGE_SIDES};
use tracing::Instrument;

pub async fn process(context: &Context, preview: ClaimedPreview, stop: &JobStop) {
    let span = tracing::info_span!("page_preview", preview_id = %preview.id, job_id = %preview.job_id, page = preview.page, width = preview.width);
    async {
        let started = Instant::now();
        let lease = context.config.lease_seconds;
        let renew = || db::renew_preview_lease(&context.db, preview.id, &context.owner, lease);
        let result = tokio::select! {
            result = render(context, &preview, stop) => result,
            never = keep_lease(context, stop, renew) => match never {},
        };
        let (db, owner) = (&context.db, context.owner.as_str());
        let (outcome, recorded) = match &result {
            Ok(rendered) => {
                let outcome = match rendered {
                    Rendered::Stored { .. } => "stored",
                    Rendered::PastTheEnd { .. } => "past_the_end",
                    Rendered::Failed { .. } => "failed",
                };
                (outcome, db::finish_preview(db, preview.id, owner, rendered).await)
            }
            Err(interrupted) => {
                tracing::warn!(error = %interrupted, "page preview interrupted; released");
                ("released", db::release_preview(db, preview.id, owner).await)
            }
        };
        match recorded {
            Ok(true) => {}
            Ok(false) => tracing::warn!("the page preview's lease was lost; nothing recorded"),
            Err(error) => tracing::warn!(%error, "could not record the page preview; its lease will expire into a retry"),
        }
        metrics::PAGE_PREVIEWS.with_label_values(&[outcome]).inc();
        if let Ok(Rendered::Stored { .. }) = result {
            metrics::PAGE_PREVIEW_TIME.observe(started.elapsed().as_secs_f64());
        }
    }
    .instrument(span)
    .await
}

async fn render(
    context: &Context,
    preview: &ClaimedPreview,
    stop: &JobStop,
) -> Result<Rendered, Interrupted> {
    let config = &context.config;
    let pdf = context.storage.get_bytes(&preview.pdf_storage_key).await?;
    // Any image renders a PDF, whatever year made it: the newest, whose Ghostscript has the
    // most fixes to its PDF reader.
    let sandbox = context
        .sandboxes
        .iter()
        .last()
        .ok_or(Interrupted::Unserved)?;
    let spec = preview_spec(config, preview, &pdf);
    drop(pdf);
    let nonce = spec.nonce.clone();
    let stdin = texfleet_sandbox::job_input(&spec, &[]).into();
    drop(spec);
    let deadline = Duration::from_secs(u64::from(
        PREVIEW_TIMEOUT_SECONDS + config.kill_grace_seconds,
    ));
    let attempt = preview.attempt.to_string();
    let work = (preview.id, attempt.as_str());
    let Ran { run, collected } =
        sandbox_run::run(context, sandbox, work, stdin, nonce, deadline, stop).await?;
    let state = collected.state.unwrap_or_default();
    let page_size = state
        .page_size
        .filter(|sides| sides.iter().all(|side| PAGE_SIDES.contains(side)));
    let png = collected
        .thumbnail
        .filter(|png| state.thumbnail && is_thumbnail(png, preview.width));
    let (Some(png), Some(page_size)) = (png, page_size) else {
        return Ok(match state.page_count {
            Some(page_count) if preview.page > page_count => Rendered::PastTheEnd { page_count },
            _ => Rendered::Failed {
                message: why_no_image(run.deadline_hit, run.oom_killed).into(),
            },
        });
    };
    let storage_key = page_preview_key(preview.job_id, preview.page, preview.width);
    let sha256 = sha256_hex(&png);
    // Fenced: a scheduler that lost the preview does not overwrite the image of the one that
    // has it.
    let lease = config.lease_seconds;
    if let Ok(false) = db::renew_preview_lease(&context.db, preview.id, &context.owner, lease).await
    {
        stop.stop(StopReason::LeaseLost);
    }
    if stop.token.is_cancelled() {
        return Err(Interrupted::Stopped);
    }
    let origin = format!("{} attempt {}", context.owner, preview.attempt);
    context
        .storage
        .put(&storage_key, png, "image/png", &origin)
        .await?;
    Ok(Rendered::Stored {
        storage_key,
        sha256,
        page_size,
        image_id: sandbox.image_id().to_string(),
    })
}

/// Why a render left no image, in the words the API shows.
fn why_no_image(deadline_hit: bool, oom_killed: bool) -> &'static str {
    match (deadline_hit, oom_killed) {
        (true, _) => "rendering the page took longer than its time",
        (_, true) => "rendering the page ran out of memory",
        _ => "Ghostscript could not render the page within its 10 s of CPU time and its memory",
    }
}
