//! Bearer-token authentication: the token's SHA-256 is looked up among live tokens, and the
//! request is then bound to that token's project.
//! The lookup itself is bounded per token and per client network ([`crate::token_lookups`]).

use crate::problem::Problem;
use crate::AppState;
use axum::extract::FromRequestParts;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter as GovernorLimiter};
use std::num::NonZeroU32;
use std::sync::Arc;
use texfleet_core::{token, Config};
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
            // The scheme is case-insensitive (RFC 9110, section 11.1).
            .and_then(|value| {
                let (scheme, token) = value.split_at_checked(7)?;
                scheme.eq_ignore_ascii_case("bearer ").then_some(token)
            })
            .map(str::trim)
            .filter(|token| !token.is_empty())
            .ok_or_else(|| {
                Problem::unauthorized("the Authorization header must be 'Bearer <token>'")
            })?;
        let token_hash = token::hash(token);
        let client = parts
            .extensions
            .get::<crate::client_address::Client>()
            .map(|client| client.0);
        let project_id = state
            .token_lookups
            .project(&state.pool, &token_hash, client)
            .await?
            .ok_or_else(|| Problem::unauthorized("the token is unknown, revoked or expired"))?;
        state.rate_limiter.check(token_hash)?;
        let reserved = state
            .sending
            .reserve(project_id)
            .ok_or_else(Problem::answers_held)?;
        if let Some(owner) = parts.extensions.get::<crate::sending::AnswerOwner>() {
            owner.set(project_id, reserved);
        }
        Ok(Authenticated { project_id })
    }
}

impl Authenticated {
    /// The project a route's path names, when it is the token's: another project's is `403`, a
    /// malformed id `404`.
    pub fn project_in_path(&self, project_id: &str) -> Result<Uuid, Problem> {
        let project_id =
            Uuid::parse_str(project_id).map_err(|_| Problem::not_found("no such project"))?;
        self.may_name(Some(project_id))?;
        Ok(project_id)
    }

    /// A body naming another project is `403`, whatever else is wrong with it.
    pub fn may_name(&self, project_id: Option<Uuid>) -> Result<(), Problem> {
        match project_id {
            Some(project_id) if project_id != self.project_id => Err(Problem::forbidden(
                "the token does not belong to this project",
            )),
            _ => Ok(()),
        }
    }
}

/// Requests per token: a token bucket per token (governor's GCRA), in this API process.
#[derive(Clone)]
pub struct RateLimiter {
    limiter: Option<Arc<DefaultKeyedRateLimiter<Vec<u8>>>>,
}

impl RateLimiter {
    pub fn new(config: &Config) -> RateLimiter {
        let limiter = NonZeroU32::new(config.rate_limit_per_second).map(|rate| {
            let burst = NonZeroU32::new(config.rate_limit_burst).unwrap_or(rate);
            Arc::new(GovernorLimiter::keyed(
                Quota::per_second(rate).allow_burst(burst),
            ))
        });
        RateLimiter { limiter }
    }

    fn check(&self, token_hash: Vec<u8>) -> Result<(), Problem> {
        let Some(limiter) = &self.limiter else {
            return Ok(());
        };
        limiter.check_key(&token_hash).map_err(|not_until| {
            crate::metrics::RATE_LIMITED
                .with_label_values(&["token"])
                .inc();
            let wait = not_until.wait_time_from(DefaultClock::default().now());
            Problem::rate_limited(
                "too many requests for this token; slow down",
                wait.as_secs_f64().ceil() as u64,
            )
        })
    }
}
