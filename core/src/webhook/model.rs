//! Webhook endpoints and deliveries as clients see them (docs/API.md, "Webhooks").

use serde::Serialize;
use time::OffsetDateTime;
use utoipa::ToSchema;
use uuid::Uuid;

/// An endpoint of a project; its secret is shown once, when it is registered.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Endpoint {
    pub id: Uuid,
    pub url: String,
    pub description: String,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    /// The latest attempt to deliver to it, if any.
    pub last_delivery: Option<LastDelivery>,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct LastDelivery {
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
    /// The HTTP status the endpoint answered; null when it gave none.
    pub status_code: Option<i32>,
    /// Why the attempt failed, when it did.
    pub error: Option<String>,
}

/// One event on its way to one endpoint.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Delivery {
    /// Also the `webhook-id` header of every attempt.
    pub id: Uuid,
    /// `compile.finished`.
    pub event: String,
    pub job_id: Uuid,
    pub attempts: i32,
    /// `pending`, `delivered` or `failed` (retries used up, or never attempted because the
    /// endpoint already had 1,000 deliveries pending).
    pub status: String,
    pub last_status_code: Option<i32>,
    pub last_error: Option<String>,
    /// When the next attempt is due; null once delivered or failed.
    #[serde(with = "time::serde::rfc3339::option")]
    pub next_attempt_at: Option<OffsetDateTime>,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
}
