//! The webhook delivery worker, in every scheduler process: it claims due deliveries from the
//! outbox (`db::claim_deliveries`), sends each as the Standard Webhooks specification says,
//! and records every attempt (`db::record_attempt`). Several schedulers share the outbox as
//! they share the queue.
//!
//! A delivery is the service's own request to a client's URL, so it is made as if the URL
//! were hostile: the host is resolved and every address checked again now (DNS may have
//! changed since registration), the connection goes to the checked address and no other (no
//! second resolution, no proxy), redirects are not followed, the whole attempt ends within
//! 10 s, and at most 64 KiB of the answer is read, then dropped.

use crate::metrics;
use ipnet::IpNet;
use std::sync::Arc;
use std::time::{Duration, Instant};
use texfleet_core::db::{self, Attempt, DueDelivery, Pool};
use texfleet_core::webhook::secret::SecretBox;
use texfleet_core::webhook::{signature, target};
use texfleet_core::Config;
use time::OffsetDateTime;
use tokio::sync::{Notify, Semaphore};

/// The whole of one attempt: connect, send, answer.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
/// The lease of a claimed attempt: longer than the attempt, so that no other worker sends it
/// while it may still be under way.
const LEASE: Duration = Duration::from_secs(30);
/// The most of an answer that is read.
const MAX_ANSWER_BYTES: usize = 64 * 1024;
/// Attempts in flight at once in this process: sending is waiting on the network, so many.
const SENDERS: usize = 64;
/// Of those, the senders only a project with no attempt in flight may take, so that projects
/// whose endpoints never answer, however many, cannot hold every sender for a whole attempt.
const IDLE_PROJECT_SENDERS: usize = 8;
/// The longest back-off between two attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(3600);
/// How often the worker looks for retries that came due, when nothing wakes it.
const POLL: Duration = Duration::from_secs(1);

/// What the worker needs: the outbox, the key that opens the secrets, the allowed ranges.
pub struct Deliverer {
    pub db: Pool,
    pub sealer: SecretBox,
    pub allowed: Vec<IpNet>,
    pub retry_base: Duration,
    pub retry_for: Duration,
    pub per_endpoint: usize,
}

impl Deliverer {
    /// The worker of `config`, or None when webhooks are off.
    pub fn new(config: &Config, db: Pool) -> anyhow::Result<Option<Deliverer>> {
        let Some(sealer) = SecretBox::from_setting(&config.webhook_secret_key)? else {
            return Ok(None);
        };
        Ok(Some(Deliverer {
            db,
            sealer,
            allowed: target::allowed_ranges(&config.webhook_allowed_cidrs)?,
            retry_base: Duration::from_secs_f64(config.webhook_retry_base_seconds.max(0.001)),
            retry_for: Duration::from_secs(u64::from(config.webhook_retry_hours) * 3600),
            per_endpoint: config.webhook_endpoint_concurrency.max(1),
        }))
    }

    /// Delivers until the task is dropped; `wake` is notified when the outbox trigger queued
    /// deliveries. An attempt cut off by shutdown keeps its lease, which expires into a retry.
    pub async fn run(self: Arc<Self>, wake: Arc<Notify>) {
        let senders = Arc::new(Semaphore::new(SENDERS));
        let mut gauge_updated = Instant::now() - POLL * 5;
        loop {
            let free = senders.available_permits();
            // Any project may take the senders beyond the reserved ones; the reserved go to
            // projects with nothing in flight (a per-project cap of one).
            let for_anyone = free.saturating_sub(IDLE_PROJECT_SENDERS);
            let mut claimed = self.claim(for_anyone, self.per_endpoint * 2).await;
            claimed.extend(self.claim(free - for_anyone, 1).await);
            let full = !claimed.is_empty() && claimed.len() == free;
            for delivery in claimed {
                let permit = senders.clone().acquire_owned().await.expect("never closed");
                let (deliverer, wake) = (self.clone(), wake.clone());
                tokio::spawn(async move {
                    deliverer.attempt(delivery).await;
                    drop(permit);
                    wake.notify_one();
                });
            }
            if gauge_updated.elapsed() >= POLL * 5 {
                if let Ok(ages) = db::outbox_ages(&self.db).await {
                    metrics::WEBHOOK_OLDEST_PENDING.set(ages.oldest_pending);
                    metrics::WEBHOOK_MOST_OVERDUE.set(ages.most_overdue);
                }
                gauge_updated = Instant::now();
            }
            if !full {
                tokio::select! {
                    _ = wake.notified() => {}
                    _ = tokio::time::sleep(POLL) => {}
                }
            }
        }
    }

    /// Claims up to `limit` due attempts, at most `per_project` of a project in flight.
    async fn claim(&self, limit: usize, per_project: usize) -> Vec<DueDelivery> {
        if limit == 0 {
            return Vec::new();
        }
        db::claim_deliveries(&self.db, limit, self.per_endpoint, per_project, LEASE)
            .await
            .unwrap_or_else(|error| {
                tracing::warn!(%error, "claiming webhook deliveries failed");
                Vec::new()
            })
    }

    /// Sends one attempt and records it.
    async fn attempt(&self, delivery: DueDelivery) {
        let outcome = self.send(&delivery).await;
        let retry_in = backoff(self.retry_base, delivery.attempt);
        match db::record_attempt(
            &self.db,
            delivery.id,
            delivery.attempt,
            &outcome,
            retry_in,
            self.retry_for,
            self.retry_base,
        )
        .await
        {
            Ok(Some(status)) => {
                let result = match (status.as_str(), &outcome.error) {
                    ("delivered", _) => "delivered",
                    ("failed", _) => "failed",
                    _ => "retried",
                };
                metrics::WEBHOOK_DELIVERIES
                    .with_label_values(&[result])
                    .inc();
                tracing::info!(
                    delivery = %delivery.id,
                    attempt = delivery.attempt,
                    status,
                    error = outcome.error.as_deref().unwrap_or(""),
                    "webhook attempt"
                );
            }
            Ok(None) => {
                tracing::warn!(delivery = %delivery.id, "webhook attempt taken over; not recorded")
            }
            Err(error) => {
                tracing::warn!(%error, "could not record a webhook attempt; its lease will expire into a retry")
            }
        }
    }

    /// One attempt, resolution included, within [`ATTEMPT_TIMEOUT`] (well inside its lease):
    /// the answer's status, or why there was none.
    async fn send(&self, delivery: &DueDelivery) -> Attempt {
        let attempt = tokio::time::timeout(ATTEMPT_TIMEOUT, self.try_send(delivery)).await;
        let attempt = attempt
            .unwrap_or_else(|_| Err(format!("no answer within {} s", ATTEMPT_TIMEOUT.as_secs())));
        match attempt {
            Ok(status) if (200..300).contains(&status) => Attempt {
                status_code: Some(i32::from(status)),
                error: None,
            },
            Ok(status) => Attempt {
                status_code: Some(i32::from(status)),
                error: Some(if (300..400).contains(&status) {
                    format!("answered {status}; redirects are not followed")
                } else {
                    format!("answered {status}")
                }),
            },
            Err(error) => Attempt {
                status_code: None,
                error: Some(error),
            },
        }
    }

    async fn try_send(&self, delivery: &DueDelivery) -> Result<u16, String> {
        let key = self
            .sealer
            .open(delivery.endpoint_id, &delivery.sealed_secret)
            .ok_or("the endpoint's secret does not open with this server's webhook_secret_key")?;
        let target = target::parse(&delivery.url)?;
        let address = target::resolve(&target, &self.allowed, delivery.job.project_id)
            .await
            .map_err(|refusal| format!("refused: {refusal}"))?;
        let finished = delivery.job.finished_at.unwrap_or(delivery.job.created_at);
        let body = serde_json::to_vec(&serde_json::json!({
            "type": delivery.event,
            "timestamp": finished.format(&time::format_description::well_known::Rfc3339).map_err(|e| e.to_string())?,
            "data": delivery.job,
        }))
        .map_err(|e| e.to_string())?;
        let id = delivery.id.to_string();
        let timestamp = OffsetDateTime::now_utc().unix_timestamp();
        // One client per attempt: its only address for the host is the one checked above.
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .timeout(ATTEMPT_TIMEOUT)
            .resolve(&target.host, address)
            .user_agent(concat!("texfleet-webhooks/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| e.to_string())?;
        let mut response = client
            .post(target.url.clone())
            .header("content-type", "application/json")
            .header("webhook-id", &id)
            .header("webhook-timestamp", timestamp.to_string())
            .header(
                "webhook-signature",
                signature::sign(&key, &id, timestamp, &body),
            )
            .body(body)
            .send()
            .await
            .map_err(|e| transport_error(&e))?;
        let status = response.status().as_u16();
        let mut read = 0;
        while read < MAX_ANSWER_BYTES {
            match response.chunk().await {
                Ok(Some(chunk)) => read += chunk.len(),
                Ok(None) => break,
                // The status is what counts; an answer cut short or too slow after it is
                // dropped with the connection.
                Err(_) => break,
            }
        }
        Ok(status)
    }
}

/// The delay before the next attempt after attempt `attempt`: `base` doubled for each attempt
/// so far, up to an hour, times a jitter between 3/4 and 1, so each wait is longer than the
/// one before and workers retrying together spread out.
fn backoff(base: Duration, attempt: i32) -> Duration {
    let doubled = base.saturating_mul(1 << attempt.clamp(1, 20).saturating_sub(1) as u32);
    doubled
        .min(MAX_BACKOFF)
        .mul_f64(0.75 + rand::random::<f64>() * 0.25)
}

/// A transport failure in a few words: a timeout, a refused connection, and so on.
fn transport_error(error: &reqwest::Error) -> String {
    if error.is_timeout() {
        return format!("no answer within {} s", ATTEMPT_TIMEOUT.as_secs());
    }
    let mut cause: &dyn std::error::Error = error;
    while let Some(source) = cause.source() {
        cause = source;
    }
    format!("no answer: {cause}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_wait_is_longer_than_the_one_before() {
        let base = Duration::from_secs(1);
        for _ in 0..100 {
            let waits: Vec<Duration> = (1..=6).map(|attempt| backoff(base, attempt)).collect();
            assert!(waits.windows(2).all(|pair| pair[0] < pair[1]), "{waits:?}");
            assert!(waits[0] >= Duration::from_millis(750) && waits[0] <= base);
        }
        assert!(backoff(base, 40) <= MAX_BACKOFF);
    }
}
