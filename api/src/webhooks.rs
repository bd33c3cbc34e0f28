//! A project's webhook endpoints: register (the secret shown once), list, delete, and the
//! deliveries of one. Every statement runs under row-level security for the token's project,
//! so another project's endpoint is `404` like one that does not exist. A URL is checked
//! before it is stored: its form, and every address its host resolves to
//! (`texfleet_core::webhook::target`); the delivery worker checks it again at each delivery.

use crate::auth::Authenticated;
use crate::problem::{AuthenticatedProblems, FieldError, Problem, ProblemBody};
use crate::receiving::read_body;
use crate::AppState;
use axum::body::Body;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::Json;
use ipnet::IpNet;
use serde::Serialize;
use serde_json::Value;
use std::collections::HashMap;
use std::time::Duration;
use texfleet_core::db;
use texfleet_core::webhook::model::{Delivery, Endpoint};
use texfleet_core::webhook::secret::SecretBox;
use texfleet_core::webhook::target;
use time::OffsetDateTime;
use utoipa::ToSchema;
use uuid::Uuid;

/// What the API needs for webhooks: the key that seals secrets and the allowed ranges.
#[derive(Clone)]
pub struct WebhookSettings {
    pub sealer: SecretBox,
    pub allowed: Vec<IpNet>,
}

/// The largest body of a registration.
const MAX_BODY_BYTES: usize = 16 * 1024;
const MAX_DESCRIPTION_CHARS: usize = 500;

/// `POST /projects/{project_id}/webhooks`.
#[derive(ToSchema)]
#[allow(dead_code)] // read by the OpenAPI derive only
pub struct NewEndpoint {
    /// `http` or `https`, without user or password, on a public address.
    #[schema(example = "https://ci.example.org/texfleet-hook")]
    url: String,
    /// Up to 500 characters, for people.
    description: Option<String>,
}

/// A registered endpoint with its secret, shown only in this answer.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({
    "id": "5c0e6f3a-8b1d-4e2f-9a3b-7c6d5e4f3a2b", "url": "https://ci.example.org/texfleet-hook",
    "description": "CI", "created_at": "2026-11-23T17:41:33Z",
    "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
}))]
pub struct RegisteredEndpoint {
    pub id: Uuid,
    pub url: String,
    pub description: String,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    /// `whsec_<base64>`: the key of the Standard Webhooks signature. Store it now.
    pub secret: String,
}

#[derive(Serialize, ToSchema)]
#[schema(example = json!({ "items": [{
    "id": "5c0e6f3a-8b1d-4e2f-9a3b-7c6d5e4f3a2b", "url": "https://ci.example.org/texfleet-hook",
    "description": "CI", "created_at": "2026-11-23T17:41:33Z",
    "last_delivery": { "at": "2026-11-23T17:42:01Z", "status_code": 200, "error": null }
}] }))]
pub struct EndpointList {
    pub items: Vec<Endpoint>,
}

#[derive(Serialize, ToSchema)]
#[schema(example = json!({ "items": [{
    "id": "0f3a2b1c-4d5e-4f6a-8b7c-9d0e1f2a3b4c", "event": "compile.finished",
    "job_id": "3f2b8c1e-5d6a-4b7c-8d9e-0f1a2b3c4d5e", "attempts": 2, "status": "pending",
    "last_status_code": 503, "last_error": "answered 503",
    "next_attempt_at": "2026-11-23T17:42:21Z", "created_at": "2026-11-23T17:42:01Z"
}] }))]
pub struct DeliveryList {
    pub items: Vec<Delivery>,
}

/// Register a webhook endpoint for the project's finished jobs.
#[utoipa::path(post, path = "/projects/{project_id}/webhooks", tag = "webhooks", security(("bearer" = [])),
    params(("project_id" = Uuid, Path, description = "Project id")),
    request_body(content = NewEndpoint, content_type = "application/json"),
    responses(
        (status = 201, description = "Registered; the secret is shown only now", body = RegisteredEndpoint),
        (status = 404, description = "The project id is malformed", content_type = "application/problem+json", body = ProblemBody),
        (status = 400, description = "The body is not JSON", content_type = "application/problem+json", body = ProblemBody),
        (status = 403, description = "The token belongs to another project", content_type = "application/problem+json", body = ProblemBody),
        (status = 422, description = "The URL is not allowed, or the project has 10 endpoints", content_type = "application/problem+json", body = ProblemBody),
        AuthenticatedProblems,
    ))]
pub async fn register(
    State(state): State<AppState>,
    auth: Authenticated,
    Path(project_id): Path<String>,
    body: Body,
) -> Result<(StatusCode, Json<RegisteredEndpoint>), Problem> {
    let project_id = auth.project_in_path(&project_id)?;
    let settings = enabled(&state)?;
    let timeout = Duration::from_secs(state.config.body_timeout_seconds);
    let (body, _place) = read_body(body, MAX_BODY_BYTES, timeout, &state.receiving, project_id)
        .await
        .map_err(|e| {
            Problem::unreadable_body(e, MAX_BODY_BYTES, state.config.body_timeout_seconds)
        })?;
    let value: Value = serde_json::from_slice(&body)
        .map_err(|e| Problem::invalid_json(format!("the body is not valid JSON: {e}")))?;
    let (url, description) = parse_new_endpoint(&value)?;
    let checked = target::parse(&url).map_err(|message| field("url", message))?;
    target::resolve(&checked, &settings.allowed, project_id)
        .await
        .map_err(|message| field("url", message))?;
    // What is stored is what was checked: the URL as the parser read it.
    let url = checked.url.to_string();
    let id = Uuid::new_v4();
    let (secret, sealed) = settings.sealer.new_secret(id);
    let mut client = state.database.client(auth.project_id).await?;
    let transaction = db::begin_project(&mut client, project_id).await?;
    let created =
        db::create_endpoint(&*transaction, project_id, id, &url, &description, &sealed).await?;
    transaction.commit().await.map_err(db::DbError::from)?;
    let endpoint = created.ok_or_else(|| {
        field(
            "url",
            format!(
                "the project has {} endpoints, the most it may have",
                db::MAX_ENDPOINTS
            ),
        )
    })?;
    tracing::info!(endpoint = %endpoint.id, %project_id, "webhook endpoint registered");
    Ok((
        StatusCode::CREATED,
        Json(RegisteredEndpoint {
            id: endpoint.id,
            url: endpoint.url,
            description: endpoint.description,
            created_at: endpoint.created_at,
            secret,
        }),
    ))
}

/// The body of every delivery (`compile.finished`).
#[derive(Serialize, ToSchema)]
#[allow(dead_code)] // read by the OpenAPI derive only
pub struct WebhookEvent {
    /// `compile.finished`.
    #[serde(rename = "type")]
    kind: String,
    /// When the job ended (RFC 3339); the same on every attempt.
    timestamp: String,
    /// The job as `GET /compile/{id}` shows it.
    data: texfleet_core::model::Job,
}

/// Adds the OpenAPI 3.1 `webhooks` section, which utoipa does not generate: what an endpoint
/// receives, with the Standard Webhooks headers.
pub fn document_events(document: &mut Value) {
    let header = |description: &str| {
        serde_json::json!({ "in": "header", "required": true, "description": description,
                            "schema": { "type": "string" } })
    };
    let mut parameters = Vec::new();
    for (name, description) in [
        ("webhook-id", "The delivery's id, the same on every attempt: deduplicate by it"),
        ("webhook-timestamp", "Unix seconds of this attempt"),
        ("webhook-signature", "v1,<base64 of HMAC-SHA256(key, \"<id>.<timestamp>.<body>\")>, the key being the base64 part of the endpoint's secret (Standard Webhooks v1)"),
    ] {
        let mut parameter = header(description);
        parameter["name"] = Value::from(name);
        parameters.push(parameter);
    }
    document["webhooks"] = serde_json::json!({
        "compile.finished": {
            "post": {
                "summary": "A job of the project reached a final state",
                "description": "Sent to every endpoint of the job's project, at least once: retried with back-off until a 2xx answer within 10 s or until webhook_retry_hours pass. Redirects are not followed.",
                "parameters": parameters,
                "requestBody": { "required": true, "content": { "application/json": {
                    "schema": { "$ref": "#/components/schemas/WebhookEvent" } } } },
                "responses": { "2XX": { "description": "Delivered; any other answer is retried" } }
            }
        }
    });
}

/// The project's webhook endpoints (never their secrets).
#[utoipa::path(get, path = "/projects/{project_id}/webhooks", tag = "webhooks", security(("bearer" = [])),
    params(("project_id" = Uuid, Path, description = "Project id")),
    responses(
        (status = 200, description = "The endpoints, oldest first", body = EndpointList),
        (status = 404, description = "The project id is malformed", content_type = "application/problem+json", body = ProblemBody),
        (status = 403, description = "The token belongs to another project", content_type = "application/problem+json", body = ProblemBody),
        AuthenticatedProblems,
    ))]
pub async fn list(
    State(state): State<AppState>,
    auth: Authenticated,
    Path(project_id): Path<String>,
) -> Result<Json<EndpointList>, Problem> {
    let project_id = auth.project_in_path(&project_id)?;
    let mut client = state.database.client(auth.project_id).await?;
    let transaction = db::begin_project(&mut client, project_id).await?;
    let items = db::list_endpoints(&*transaction, project_id).await?;
    Ok(Json(EndpointList { items }))
}

/// Delete an endpoint; its pending deliveries go with it.
#[utoipa::path(delete, path = "/projects/{project_id}/webhooks/{id}", tag = "webhooks", security(("bearer" = [])),
    params(("project_id" = Uuid, Path, description = "Project id"), ("id" = Uuid, Path, description = "Endpoint id")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 403, description = "The token belongs to another project", content_type = "application/problem+json", body = ProblemBody),
        (status = 404, description = "No such endpoint in this project, or a malformed id", content_type = "application/problem+json", body = ProblemBody),
        AuthenticatedProblems,
    ))]
pub async fn delete(
    State(state): State<AppState>,
    auth: Authenticated,
    Path((project_id, id)): Path<(String, String)>,
) -> Result<StatusCode, Problem> {
    let project_id = auth.project_in_path(&project_id)?;
    let id = endpoint_id(&id)?;
    let mut client = state.database.client(auth.project_id).await?;
    let transaction = db::begin_project(&mut client, project_id).await?;
    let deleted = db::delete_endpoint(&*transaction, project_id, id).await?;
    transaction.commit().await.map_err(db::DbError::from)?;
    if !deleted {
        return Err(no_endpoint());
    }
    Ok(StatusCode::NO_CONTENT)
}

/// An endpoint's deliveries, newest first.
#[utoipa::path(get, path = "/projects/{project_id}/webhooks/{id}/deliveries", tag = "webhooks", security(("bearer" = [])),
    params(("project_id" = Uuid, Path, description = "Project id"), ("id" = Uuid, Path, description = "Endpoint id"),
           ("limit" = Option<u32>, Query, description = "1 to 100, default 20", minimum = 1, maximum = 100)),
    responses(
        (status = 200, description = "The deliveries", body = DeliveryList),
        (status = 403, description = "The token belongs to another project", content_type = "application/problem+json", body = ProblemBody),
        (status = 404, description = "No such endpoint in this project, or a malformed id", content_type = "application/problem+json", body = ProblemBody),
        (status = 422, description = "limit is not 1 to 100", content_type = "application/problem+json", body = ProblemBody),
        AuthenticatedProblems,
    ))]
pub async fn deliveries(
    State(state): State<AppState>,
    auth: Authenticated,
    Path((project_id, id)): Path<(String, String)>,
    query: Result<Query<HashMap<String, String>>, QueryRejection>,
) -> Result<Json<DeliveryList>, Problem> {
    let project_id = auth.project_in_path(&project_id)?;
    let id = endpoint_id(&id)?;
    let Query(query) = query.map_err(|e| field("", e.body_text()))?;
    let limit = match query.get("limit") {
        None => 20,
        Some(text) => match text.parse::<i64>() {
            Ok(limit) if (1..=100).contains(&limit) => limit,
            _ => return Err(field("limit", "must be an integer from 1 to 100")),
        },
    };
    let mut client = state.database.client(auth.project_id).await?;
    let transaction = db::begin_project(&mut client, project_id).await?;
    let items = db::list_deliveries(&*transaction, project_id, id, limit)
        .await?
        .ok_or_else(no_endpoint)?;
    Ok(Json(DeliveryList { items }))
}

fn endpoint_id(id: &str) -> Result<Uuid, Problem> {
    Uuid::parse_str(id).map_err(|_| no_endpoint())
}

fn no_endpoint() -> Problem {
    Problem::not_found("no such webhook endpoint")
}

fn enabled(state: &AppState) -> Result<&WebhookSettings, Problem> {
    state.webhooks.as_ref().ok_or_else(|| {
        Problem::unavailable("webhooks are not enabled on this server (webhook_secret_key)")
    })
}

fn field(name: &str, message: impl Into<String>) -> Problem {
    Problem::validation(vec![FieldError::new(name, message)])
}

/// `{ "url", "description"? }`, every wrong field named.
fn parse_new_endpoint(value: &Value) -> Result<(String, String), Problem> {
    let Some(object) = value.as_object() else {
        return Err(field("", "the body must be a JSON object"));
    };
    let mut errors: Vec<FieldError> = object
        .keys()
        .filter(|key| !matches!(key.as_str(), "url" | "description"))
        .map(|key| FieldError::new(key.clone(), "unknown field"))
        .collect();
    let url = match object.get("url").and_then(Value::as_str) {
        Some(url) if url.chars().any(char::is_control) => {
            errors.push(FieldError::new(
                "url",
                "must not contain control characters",
            ));
            String::new()
        }
        Some(url) => url.to_string(),
        None => {
            errors.push(FieldError::new("url", "is required and must be a string"));
            String::new()
        }
    };
    let description = match object.get("description") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(text))
            if text.chars().count() <= MAX_DESCRIPTION_CHARS
                && !text.chars().any(char::is_control) =>
        {
            text.clone()
        }
        Some(_) => {
            errors.push(FieldError::new(
                "description",
                format!(
                    "must be a string of at most {MAX_DESCRIPTION_CHARS} characters, none a control character"
                ),
            ));
            String::new()
        }
    };
    if errors.is_empty() {
        Ok((url, description))
    } else {
        Err(Problem::validation(errors))
    }
}
