//! LISTEN: triggers (migrations V1 and V8) notify `texfleet_jobs` when a job becomes claimable,
//! `texfleet_job_started` when a scheduler starts one and `texfleet_job_finished` when one
//! reaches a final state. Schedulers wake on the first and stop cancelled compiles on the
//! last; the API wakes `Prefer: wait` requests on the last two.

use futures::StreamExt;
use std::time::Duration;
use tokio_postgres::{AsyncMessage, NoTls};

/// Channel a trigger notifies whenever a job becomes claimable (payload: the job id).
pub const JOBS_QUEUED_CHANNEL: &str = "texfleet_jobs";
/// Channel a trigger notifies whenever a scheduler starts a job (payload: the job id).
pub const JOBS_STARTED_CHANNEL: &str = "texfleet_job_started";
/// Channel the outbox trigger notifies when it queued webhook deliveries (migration V10).
pub const WEBHOOKS_CHANNEL: &str = "texfleet_webhooks";
/// Channel a trigger notifies whenever a job reaches a final state (payload: the job id).
pub const JOBS_FINISHED_CHANNEL: &str = "texfleet_job_finished";
/// Channel a trigger notifies whenever a page preview is rendered or fails (migration V25;
/// payload: its job's id).
pub const PREVIEWS_FINISHED_CHANNEL: &str = "texfleet_preview_finished";

/// A notification: its channel and payload. [`RECONNECTED`] as payload means notifications
/// may have been missed while the connection was down, so listeners should look again.
pub struct Notification {
    pub channel: String,
    pub payload: String,
}

pub const RECONNECTED: &str = "";

/// Keeps a connection that LISTENs on `channels` and hands every notification to `deliver`,
/// reconnecting after failures (and then delivering [`RECONNECTED`] on each channel).
pub async fn listen(
    database_url: String,
    channels: &'static [&'static str],
    deliver: impl Fn(Notification),
) {
    loop {
        match listen_once(&database_url, channels, &deliver).await {
            Ok(()) => tracing::warn!("notification connection closed; reconnecting"),
            Err(error) => tracing::warn!(%error, "notification connection failed; retrying"),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

async fn listen_once(
    database_url: &str,
    channels: &[&str],
    deliver: &impl Fn(Notification),
) -> anyhow::Result<()> {
    let (client, mut connection) = tokio_postgres::connect(database_url, NoTls).await?;
    let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
    let statement: String = channels.iter().map(|c| format!("LISTEN {c};")).collect();
    let listen = client.batch_execute(&statement);
    // The connection must be polled for LISTEN to complete, so drive both until LISTEN is done.
    tokio::pin!(listen);
    loop {
        tokio::select! {
            result = &mut listen => { result?; break; }
            message = messages.next() => match message {
                Some(Ok(_)) => {}
                Some(Err(error)) => return Err(error.into()),
                None => return Ok(()),
            },
        }
    }
    for channel in channels {
        deliver(Notification {
            channel: channel.to_string(),
            payload: RECONNECTED.to_string(),
        });
    }
    while let Some(message) = messages.next().await {
        if let AsyncMessage::Notification(n) = message? {
            deliver(Notification {
                channel: n.channel().to_string(),
                payload: n.payload().to_string(),
            });
        }
    }
    Ok(())
}
