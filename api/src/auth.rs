//! Bearer-token authentication: the token's SHA-256 is looked up among live tokens, and the
//! request is then bound to that token's project.

use crate::problem::Problem;
use crate::AppState;
use axum::extract::FromRequestParts;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use texfleet_core::{db, token};
use uuid::Uuid;

/// The project the request's token belongs to.
pub struct Authenticated {
    pub project_id: Uuid,
}

impl FromRequestParts<AppState> for Authenticated {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Problem> {
        let header = parts
            .headers
            .get(AUTHORIZATION)
            .ok_or_else(|| Problem::unauthorized("missing Authorization header"))?;
        let token = header
            .to_str()
            .ok()
            .and_then(|value| value.strip_prefix("Bearer "))
            .map(str::trim)
            .filter(|token| !token.is_empty())
            .ok_or_else(|| {
                Problem::unauthorized("the Authorization header must be 'Bearer <token>'")
            })?;
        let client = state.pool.get().await.map_err(db::DbError::from)?;
        match db::authenticate(&**client, &token::hash(token)).await? {
            Some(project_id) => Ok(Authenticated { project_id }),
            None => Err(Problem::unauthorized(
                "the token is unknown, revoked or expired",
            )),
        }
    }
}
