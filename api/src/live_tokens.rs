//! The hashes of the live tokens, kept in memory so that a token the database does not hold
//! is refused without a query of its own.
//!
//! Made-up tokens are what anyone can send, from as many networks as they have. Looked up one
//! by one, they would queue before the first request of every token this process had not
//! seen yet (every token, after a restart). Here they cost the database at most one query per
//! [`MIN_GAP`], whatever their number: a token missing from the set waits for a refresh that
//! starts after it arrived, and is refused if that refresh does not find it either. A token
//! created a moment ago is found by that refresh, since its client had it only once its
//! creation committed.
//!
//! A refresh reads the tokens created since a minute before the newest one it knows (creation
//! times are taken when a transaction starts, not when it commits); every [`FULL_EVERY`] the
//! set is read whole, which drops revoked and expired tokens. Being in the set only spares
//! the wait: each request's token is still looked up, so revoking takes effect at once.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use texfleet_core::db::{self, Pool};
use time::OffsetDateTime;
use tokio::sync::{watch, Notify};
use tokio::time::Instant;

/// The shortest time between two refreshes' starts.
const MIN_GAP: Duration = Duration::from_secs(1);
/// How often the set is read whole.
const FULL_EVERY: Duration = Duration::from_secs(300);
/// How far before the newest known token a refresh looks for tokens committed late.
const OVERLAP: time::Duration = time::Duration::minutes(1);

pub struct LiveTokens {
    known: Mutex<Known>,
    refreshed: watch::Sender<Refreshed>,
    wanted: Arc<Notify>,
}

#[derive(Default)]
struct Known {
    hashes: HashSet<Vec<u8>>,
    newest: Option<OffsetDateTime>,
}

/// The last refresh: when it started, and whether it read the database.
#[derive(Clone, Copy)]
struct Refreshed {
    started: Option<Instant>,
    read: bool,
}

/// Why a token missing from the set could not be told live or not.
#[derive(Debug, PartialEq)]
pub enum Unsure {
    /// The refresh failed (the database is unavailable).
    Unread,
    /// No refresh ended within the caller's wait.
    TooSlow,
}

impl LiveTokens {
    /// The set, read whole at once and then kept fresh from `pool` while it is held.
    pub fn new(pool: Pool) -> Arc<LiveTokens> {
        let wanted = Arc::new(Notify::new());
        let live = Arc::new(LiveTokens::empty(wanted.clone()));
        refresh_while_held(Arc::downgrade(&live), wanted, pool);
        live
    }

    /// A set never read, for unit tests.
    #[cfg(test)]
    pub fn unread() -> Arc<LiveTokens> {
        Arc::new(LiveTokens::empty(Arc::default()))
    }

    fn empty(wanted: Arc<Notify>) -> LiveTokens {
        let never = Refreshed {
            started: None,
            read: false,
        };
        LiveTokens {
            known: Mutex::default(),
            refreshed: watch::Sender::new(never),
            wanted,
        }
    }

    /// Whether the set holds `token_hash` now.
    pub fn holds(&self, token_hash: &[u8]) -> bool {
        self.known().hashes.contains(token_hash)
    }

    /// Whether `token_hash` is live after a refresh that started once this call began, waiting
    /// at most `wait` for it.
    pub async fn after_refresh(&self, token_hash: &[u8], wait: Duration) -> Result<bool, Unsure> {
        let asked = Instant::now();
        let mut refreshed = self.refreshed.subscribe();
        self.wanted.notify_one();
        let refresh = async {
            loop {
                let last = *refreshed.borrow_and_update();
                if last.started.is_some_and(|started| started >= asked) {
                    return last;
                }
                if refreshed.changed().await.is_err() {
                    return last;
                }
            }
        };
        match tokio::time::timeout(wait, refresh).await {
            Ok(last) if !last.read || last.started.is_none_or(|started| started < asked) => {
                Err(Unsure::Unread)
            }
            Ok(_) => Ok(self.holds(token_hash)),
            Err(_) => Err(Unsure::TooSlow),
        }
    }

    /// Drops a token its lookup no longer finds (revoked or expired).
    pub fn forget(&self, token_hash: &[u8]) {
        self.known().hashes.remove(token_hash);
    }

    fn known(&self) -> std::sync::MutexGuard<'_, Known> {
        self.known.lock().expect("never poisoned")
    }

    /// Reads the live tokens created since shortly before the newest known one, or all of them.
    async fn refresh(&self, pool: &Pool, whole: bool) {
        let started = Instant::now();
        let since = match (whole, self.known().newest) {
            (false, Some(newest)) => newest - OVERLAP,
            _ => OffsetDateTime::UNIX_EPOCH,
        };
        let read = match pool.get().await {
            Ok(client) => db::live_token_hashes(&client, since)
                .await
                .map_err(|error| error.to_string()),
            Err(error) => Err(error.to_string()),
        };
        let read = match read {
            Ok(tokens) => {
                self.take(tokens, whole);
                true
            }
            Err(error) => {
                tracing::warn!(%error, "the live tokens could not be read");
                false
            }
        };
        self.refreshed.send_replace(Refreshed {
            started: Some(started),
            read,
        });
    }

    fn take(&self, tokens: Vec<(Vec<u8>, OffsetDateTime)>, whole: bool) {
        let mut known = self.known();
        if whole {
            known.hashes.clear();
        }
        for (hash, created) in tokens {
            known.newest = known.newest.max(Some(created));
            known.hashes.insert(hash);
        }
    }
}

/// Refreshes `live` when a request asks for it, at most once per [`MIN_GAP`], and reads it
/// whole at first and every [`FULL_EVERY`], until it is dropped.
fn refresh_while_held(live: Weak<LiveTokens>, wanted: Arc<Notify>, pool: Pool) {
    tokio::spawn(async move {
        let mut whole_at = Instant::now();
        loop {
            let Some(tokens) = live.upgrade() else {
                return;
            };
            let whole = Instant::now() >= whole_at;
            if whole {
                whole_at = Instant::now() + FULL_EVERY;
            }
            tokens.refresh(&pool, whole).await;
            drop(tokens);
            tokio::time::sleep(MIN_GAP).await;
            let _ = tokio::time::timeout_at(whole_at, wanted.notified()).await;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn created(seconds: i64) -> OffsetDateTime {
        OffsetDateTime::UNIX_EPOCH + time::Duration::seconds(seconds)
    }

    #[test]
    fn a_partial_read_adds_tokens_and_a_whole_read_replaces_them() {
        let live = LiveTokens::unread();
        live.take(vec![(b"one".to_vec(), created(10))], false);
        live.take(vec![(b"two".to_vec(), created(5))], false);
        assert!(live.holds(b"one") && live.holds(b"two"));
        assert_eq!(live.known().newest, Some(created(10)));
        live.take(vec![(b"two".to_vec(), created(5))], true);
        assert!(!live.holds(b"one") && live.holds(b"two"));
        live.forget(b"two");
        assert!(!live.holds(b"two"));
    }

    #[tokio::test(start_paused = true)]
    async fn a_missing_token_waits_for_a_refresh_that_started_after_it_asked() {
        let live = LiveTokens::unread();
        let earlier = Instant::now();
        tokio::time::advance(Duration::from_millis(10)).await;
        let asking = tokio::spawn({
            let live = live.clone();
            async move { live.after_refresh(b"new", Duration::from_secs(5)).await }
        });
        tokio::task::yield_now().await;
        // A refresh that started before the request cannot have seen the token.
        live.refreshed.send_replace(Refreshed {
            started: Some(earlier),
            read: true,
        });
        tokio::task::yield_now().await;
        assert!(!asking.is_finished());
        live.take(vec![(b"new".to_vec(), created(1))], false);
        live.refreshed.send_replace(Refreshed {
            started: Some(Instant::now()),
            read: true,
        });
        assert_eq!(asking.await.unwrap(), Ok(true));
        // A later request waits for a refresh of its own, which does not come here.
        tokio::time::advance(Duration::from_millis(10)).await;
        assert_eq!(
            live.after_refresh(b"made up", Duration::from_secs(1)).await,
            Err(Unsure::TooSlow)
        );
    }
}
