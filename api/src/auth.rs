//! Bearer-token authentication: the token's SHA-256 is looked up among live tokens, and the
//! request is then bound to that token's project.
//!
//! Requests of one token share its lookup in flight ([`TokenLookups`]): a token's flood of
//! concurrent requests costs the database one query at a time, not one each, before its rate
//! limit refuses most of them, so other projects' lookups are not queued behind it. Nothing is
//! remembered once a lookup ends, so a revoked token is refused from the next lookup on.

use crate::problem::Problem;
use crate::AppState;
use axum::extract::FromRequestParts;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter as GovernorLimiter};
use std::num::NonZeroU32;
use async_singleflight::Group;
use std::sync::Arc;
use std::time::Duration;
use texfleet_core::db::{self, Pool};
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
            .and_then(|value| value.strip_prefix("Bearer "))
            .map(str::trim)
            .filter(|token| !token.is_empty())
            .ok_or_else(|| {
                Problem::unauthorized("the Authorization header must be 'Bearer <token>'")
            })?;
        let token_hash = token::hash(token);
        let project_id = state
            .token_lookups
            .project(&state.pool, &token_hash)
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

/// The lookups in flight, by token hash.
pub struct TokenLookups {
    in_flight: Group<Vec<u8>, Option<Uuid>, db::DbError>,
}

/// How often lookups whose first caller left before the end are forgotten.
const FORGET_EVERY: Duration = Duration::from_secs(60);

impl TokenLookups {
    pub fn new() -> Arc<TokenLookups> {
        let lookups = Arc::new(TokenLookups {
            in_flight: Group::new(),
        });
        let weak = Arc::downgrade(&lookups);
        tokio::spawn(async move {
            let mut every = tokio::time::interval(FORGET_EVERY);
            loop {
                every.tick().await;
                let Some(lookups) = weak.upgrade() else {
                    return;
                };
                lookups.in_flight.purge_stale().await;
            }
        });
        lookups
    }

    /// The project of the live token whose hash is `token_hash`, joining a lookup of the same
    /// token already in flight.
    async fn project(&self, pool: &Pool, token_hash: &[u8]) -> Result<Option<Uuid>, Problem> {
        let lookup = async {
            let client = pool.get().await?;
            db::authenticate(&client, token_hash).await
        };
        match self.in_flight.work(token_hash, lookup).await {
            Ok(project) => Ok(project),
            Err(Some(error)) => Err(error.into()),
            // The lookup this request joined failed; its own caller was told why.
            Err(None) => Err(Problem::unavailable(
                "the database is unavailable; retry shortly",
            )),
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
