//! Webhooks in SQL. The API registers, lists and deletes a project's endpoints and lists their
//! deliveries, inside a transaction bound to the project (row-level security, migration V10).
//! Deliveries are an outbox: the trigger that makes a job terminal inserts them; the delivery
//! worker then runs this protocol:
//!
//! - **claim** ([`claim_deliveries`]): due `pending` rows, `FOR UPDATE SKIP LOCKED`, taken in
//!   turns across projects, never more than the endpoint's and the project's concurrency in
//!   flight (exact across workers, under an advisory lock, as jobs are claimed); the claim
//!   counts the attempt and leases it, so two workers never send one attempt at once, and a
//!   worker that dies mid-send leaves a lease that expires into a retry, never a lost event;
//! - **record** ([`record_attempt`]): fenced by the attempt's number, `delivered`, or `pending`
//!   again after a back-off, or `failed` once the retry window is over.

use super::jobs::{job_from_row, JOB_COLUMNS};
use super::{DbResult, Pool};
use crate::model::Job;
use crate::webhook::model::{Delivery, Endpoint, LastDelivery};
use std::collections::HashMap;
use std::time::Duration;
use time::OffsetDateTime;
use tokio_postgres::{GenericClient, Row};
use uuid::Uuid;

/// The most endpoints a project may have.
pub const MAX_ENDPOINTS: i64 = 10;

/// Registers an endpoint unless the project has [`MAX_ENDPOINTS`] already (None).
pub async fn create_endpoint(
    client: &impl GenericClient,
    project_id: Uuid,
    id: Uuid,
    url: &str,
    description: &str,
    sealed_secret: &[u8],
) -> DbResult<Option<Endpoint>> {
    // Concurrent registrations of one project count one after the other.
    client
        .execute(
            "SELECT pg_advisory_xact_lock(hashtext($1::text))",
            &[&project_id.to_string()],
        )
        .await?;
    let row = client
        .query_opt(
            "INSERT INTO webhook_endpoints (id, project_id, url, description, sealed_secret)
             SELECT $1, $2, $3, $4, $5
             WHERE (SELECT count(*) FROM webhook_endpoints WHERE project_id = $2) < $6
             RETURNING id, url, description, created_at",
            &[
                &id,
                &project_id,
                &url,
                &description,
                &sealed_secret,
                &MAX_ENDPOINTS,
            ],
        )
        .await?;
    Ok(row.map(|row| Endpoint {
        id: row.get("id"),
        url: row.get("url"),
        description: row.get("description"),
        created_at: row.get("created_at"),
        last_delivery: None,
    }))
}

/// The project's endpoints, oldest first, each with its latest attempt.
pub async fn list_endpoints(
    client: &impl GenericClient,
    project_id: Uuid,
) -> DbResult<Vec<Endpoint>> {
    let rows = client
        .query(
            "SELECT e.id, e.url, e.description, e.created_at,
                    last.last_attempt_at, last.last_status_code, last.last_error
             FROM webhook_endpoints e
             LEFT JOIN LATERAL (
                 SELECT last_attempt_at, last_status_code, last_error FROM webhook_deliveries
                 WHERE endpoint_id = e.id AND last_attempt_at IS NOT NULL
                 ORDER BY last_attempt_at DESC LIMIT 1
             ) last ON true
             WHERE e.project_id = $1
             ORDER BY e.created_at, e.id",
            &[&project_id],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|row| Endpoint {
            id: row.get("id"),
            url: row.get("url"),
            description: row.get("description"),
            created_at: row.get("created_at"),
            last_delivery: row
                .get::<_, Option<OffsetDateTime>>("last_attempt_at")
                .map(|at| LastDelivery {
                    at,
                    status_code: row.get("last_status_code"),
                    error: row.get("last_error"),
                }),
        })
        .collect())
}

/// Deletes an endpoint (and its deliveries); false when the project has no such endpoint.
pub async fn delete_endpoint(
    client: &impl GenericClient,
    project_id: Uuid,
    id: Uuid,
) -> DbResult<bool> {
    let deleted = client
        .execute(
            "DELETE FROM webhook_endpoints WHERE id = $1 AND project_id = $2",
            &[&id, &project_id],
        )
        .await?;
    Ok(deleted == 1)
}

/// An endpoint's deliveries, newest first; None when the project has no such endpoint.
pub async fn list_deliveries(
    client: &impl GenericClient,
    project_id: Uuid,
    endpoint_id: Uuid,
    limit: i64,
) -> DbResult<Option<Vec<Delivery>>> {
    let exists = client
        .query_opt(
            "SELECT 1 FROM webhook_endpoints WHERE id = $1 AND project_id = $2",
            &[&endpoint_id, &project_id],
        )
        .await?;
    if exists.is_none() {
        return Ok(None);
    }
    let rows = client
        .query(
            "SELECT id, event, job_id, attempts, status, last_status_code, last_error,
                    CASE WHEN status = 'pending' THEN next_attempt_at END AS next_attempt_at,
                    created_at
             FROM webhook_deliveries WHERE endpoint_id = $1 AND project_id = $2
             ORDER BY created_at DESC, id DESC LIMIT $3",
            &[&endpoint_id, &project_id, &limit],
        )
        .await?;
    Ok(Some(rows.iter().map(delivery_from_row).collect()))
}

fn delivery_from_row(row: &Row) -> Delivery {
    Delivery {
        id: row.get("id"),
        event: row.get("event"),
        job_id: row.get("job_id"),
        attempts: row.get("attempts"),
        status: row.get("status"),
        last_status_code: row.get("last_status_code"),
        last_error: row.get("last_error"),
        next_attempt_at: row.get("next_attempt_at"),
        created_at: row.get("created_at"),
    }
}

/// A delivery attempt a worker holds: where it goes, the sealed secret, and the job it is
/// about.
pub struct DueDelivery {
    pub id: Uuid,
    pub attempt: i32,
    pub event: String,
    pub endpoint_id: Uuid,
    pub url: String,
    pub sealed_secret: Vec<u8>,
    pub job: Job,
}

/// Claims up to `limit` due deliveries, at most `per_endpoint` in flight for each endpoint and
/// `per_project` for each project, leasing each attempt for `lease`.
///
/// Fair as job claims are ([`super::claim_jobs`]): the projects with pending deliveries are
/// found first (a skip scan, one index probe per project), each endpoint with room that is not
/// paused offers its oldest due attempts, and offers are taken in turns (the project's
/// attempts in flight plus the offer's rank within the project); within a turn, endpoints that
/// have answered before go first, then the oldest attempt. A project's backlog of any size
/// therefore never hides another project's due delivery, a project's silent endpoints hold at
/// most `per_project` senders, and silent endpoints, paused after each failure, cannot keep a
/// healthy endpoint waiting.
pub async fn claim_deliveries(
    pool: &Pool,
    limit: usize,
    per_endpoint: usize,
    per_project: usize,
    lease: Duration,
) -> DbResult<Vec<DueDelivery>> {
    let mut client = pool.get().await?;
    let transaction = client.transaction().await?;
    transaction
        .execute("SELECT pg_advisory_xact_lock($1)", &[&WEBHOOK_CLAIM_LOCK])
        .await?;
    let claim = transaction.prepare_cached(CLAIM_DELIVERIES).await?;
    let claimed = transaction
        .query(
            &claim,
            &[
                &(limit as i64),
                &(per_endpoint as i64),
                &lease.as_secs_f64(),
                &(per_project as i64),
            ],
        )
        .await?;
    transaction.commit().await?;
    // The endpoints and jobs of the whole batch, in one query each.
    let endpoint_ids: Vec<Uuid> = claimed.iter().map(|row| row.get("endpoint_id")).collect();
    let job_ids: Vec<Uuid> = claimed.iter().map(|row| row.get("job_id")).collect();
    let endpoints: HashMap<Uuid, (String, Vec<u8>)> = client
        .query(
            "SELECT id, url, sealed_secret FROM webhook_endpoints WHERE id = ANY($1)",
            &[&endpoint_ids],
        )
        .await?
        .iter()
        .map(|row| (row.get("id"), (row.get("url"), row.get("sealed_secret"))))
        .collect();
    let mut jobs: HashMap<Uuid, Job> = HashMap::new();
    for row in client
        .query(
            &format!("SELECT {JOB_COLUMNS} FROM jobs WHERE id = ANY($1)"),
            &[&job_ids],
        )
        .await?
    {
        let job = job_from_row(&row)?;
        jobs.insert(job.id, job);
    }
    // A delivery whose endpoint was deleted since the claim went with it.
    Ok(claimed
        .iter()
        .filter_map(|row| {
            let endpoint_id: Uuid = row.get("endpoint_id");
            let (url, sealed_secret) = endpoints.get(&endpoint_id)?.clone();
            Some(DueDelivery {
                id: row.get("id"),
                attempt: row.get("attempts"),
                event: row.get("event"),
                endpoint_id,
                url,
                sealed_secret,
                job: jobs.get(&row.get::<_, Uuid>("job_id"))?.clone(),
            })
        })
        .collect())
}

/// The claim of [`claim_deliveries`]: `$1` attempts at most, `$2` per endpoint and `$4` per
/// project in flight, leased for `$3` seconds. Runs under [`WEBHOOK_CLAIM_LOCK`], so the
/// counts of attempts in flight are exact.
const CLAIM_DELIVERIES: &str = "
    WITH RECURSIVE pending (project_id) AS (
        (SELECT project_id FROM webhook_deliveries WHERE status = 'pending'
         ORDER BY project_id LIMIT 1)
        UNION ALL
        SELECT (SELECT next.project_id FROM webhook_deliveries AS next
                WHERE next.status = 'pending' AND next.project_id > pending.project_id
                ORDER BY next.project_id LIMIT 1)
        FROM pending WHERE pending.project_id IS NOT NULL
    ), sending AS (
        SELECT endpoint_id, project_id FROM webhook_deliveries
        WHERE status = 'pending' AND lease_expires_at > now()
    ), by_endpoint AS (
        SELECT endpoint_id, count(*) AS n FROM sending GROUP BY endpoint_id
    ), by_project AS (
        SELECT project_id, count(*) AS n FROM sending GROUP BY project_id
    ), offers AS (
        SELECT due.id, due.next_attempt_at,
               endpoint.last_delivered_at IS NOT NULL AS healthy,
               coalesce(in_project.n, 0)
                 + row_number() OVER (PARTITION BY pending.project_id
                                      ORDER BY endpoint.last_delivered_at IS NULL,
                                               due.next_attempt_at, due.id) AS turn
        FROM pending
        LEFT JOIN by_project AS in_project USING (project_id)
        JOIN webhook_endpoints AS endpoint ON endpoint.project_id = pending.project_id
        LEFT JOIN by_endpoint AS in_endpoint ON in_endpoint.endpoint_id = endpoint.id
        CROSS JOIN LATERAL (
            SELECT id, next_attempt_at FROM webhook_deliveries
            WHERE endpoint_id = endpoint.id AND status = 'pending' AND next_attempt_at <= now()
              AND (lease_expires_at IS NULL OR lease_expires_at <= now())
            ORDER BY next_attempt_at
            LIMIT greatest($2 - coalesce(in_endpoint.n, 0), 0)
        ) AS due
        WHERE coalesce(in_project.n, 0) < $4
          AND (endpoint.paused_until IS NULL OR endpoint.paused_until <= now())
    ), chosen AS (
        SELECT id FROM webhook_deliveries
        WHERE id IN (SELECT id FROM offers WHERE turn <= $4
                     ORDER BY turn, healthy DESC, next_attempt_at LIMIT $1)
        FOR UPDATE SKIP LOCKED
    )
    UPDATE webhook_deliveries AS delivery
    SET attempts = attempts + 1, lease_expires_at = now() + make_interval(secs => $3)
    FROM chosen WHERE delivery.id = chosen.id
    RETURNING delivery.id, delivery.attempts, delivery.event, delivery.endpoint_id, delivery.job_id";

/// Key of the advisory lock that serialises delivery claims ("texhooks").
const WEBHOOK_CLAIM_LOCK: i64 = 0x7465_7868_6f6f_6b73;

/// The longest an endpoint is paused after failed attempts.
const MAX_PAUSE: Duration = Duration::from_secs(3600);

/// What one attempt came to.
pub struct Attempt {
    pub status_code: Option<i32>,
    /// None when the endpoint answered 2xx.
    pub error: Option<String>,
}

/// Records attempt `attempt` of a delivery: `delivered` on success; else `pending` again after
/// `retry_in`, or `failed` when that would pass `retry_for` since the event. The endpoint's
/// health goes with it: a success clears its failures, a failure pauses it for `pause_base`
/// doubled with each failure in a row, at most an hour (see [`claim_deliveries`]). Fenced by
/// the attempt's number: a worker whose lease lapsed and whose attempt was taken over changes
/// nothing. Returns the status written, or None when fenced out.
pub async fn record_attempt(
    pool: &Pool,
    id: Uuid,
    attempt: i32,
    outcome: &Attempt,
    retry_in: Duration,
    retry_for: Duration,
    pause_base: Duration,
) -> DbResult<Option<String>> {
    let client = pool.get().await?;
    let row = client
        .query_opt(
            "WITH recorded AS (
                 UPDATE webhook_deliveries SET
                     status = CASE WHEN $3::text IS NULL THEN 'delivered'
                                   WHEN now() + make_interval(secs => $5) > created_at + make_interval(secs => $6)
                                       THEN 'failed'
                                   ELSE 'pending' END,
                     next_attempt_at = now() + make_interval(secs => $5),
                     lease_expires_at = NULL, last_status_code = $4, last_error = $3,
                     last_attempt_at = now()
                 WHERE id = $1 AND attempts = $2 AND status = 'pending'
                 RETURNING status, endpoint_id
             ), health AS (
                 UPDATE webhook_endpoints AS endpoint SET
                     failures = CASE WHEN $3::text IS NULL THEN 0 ELSE endpoint.failures + 1 END,
                     paused_until = CASE WHEN $3::text IS NULL THEN NULL
                         ELSE now() + make_interval(secs => least(
                             $7 * power(2, least(endpoint.failures, 20)), $8)) END,
                     last_delivered_at = CASE WHEN $3::text IS NULL THEN now()
                                              ELSE endpoint.last_delivered_at END
                 FROM recorded WHERE endpoint.id = recorded.endpoint_id
             )
             SELECT status FROM recorded",
            &[
                &id,
                &attempt,
                &outcome.error,
                &outcome.status_code,
                &retry_in.as_secs_f64(),
                &retry_for.as_secs_f64(),
                &pause_base.as_secs_f64(),
                &MAX_PAUSE.as_secs_f64(),
            ],
        )
        .await?;
    Ok(row.map(|row| row.get(0)))
}

/// How the outbox stands, in seconds: the age of the oldest pending delivery (receivers that
/// keep failing make it grow) and how overdue the most overdue attempt is (workers that do
/// not keep up, or none running); 0 when there is none.
pub struct OutboxAges {
    pub oldest_pending: f64,
    pub most_overdue: f64,
}

pub async fn outbox_ages(pool: &Pool) -> DbResult<OutboxAges> {
    let client = pool.get().await?;
    let row = client
        .query_one(
            "SELECT coalesce(extract(epoch FROM now() - (
                        SELECT min(created_at) FROM webhook_deliveries WHERE status = 'pending'
                    )), 0)::float8,
                    greatest(coalesce(extract(epoch FROM now() - (
                        SELECT min(next_attempt_at) FROM webhook_deliveries WHERE status = 'pending'
                    )), 0), 0)::float8",
            &[],
        )
        .await?;
    Ok(OutboxAges {
        oldest_pending: row.get(0),
        most_overdue: row.get(1),
    })
}
