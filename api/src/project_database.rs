//! The connections of the database pool one project may hold at once. The pool is every
//! project's: a project whose statements are slow (a listing over millions of jobs, a delete
//! that cascades) holds a quarter of it at most and waits for its own, and the others are
//! served. A quarter of the pool is no project's: token lookups and health checks find a
//! connection there whatever the projects hold, so projects filling their part together
//! delay only project work, not every client's authentication.

use crate::problem::Problem;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use texfleet_core::db::{self, Pool, PooledClient};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use uuid::Uuid;

/// How long a request waits for one of its project's connections.
const WAIT: Duration = Duration::from_secs(5);

#[derive(Clone)]
pub struct ProjectDatabase {
    pool: Pool,
    shares: Shares,
}

/// A connection of the pool, held as its project's until dropped.
pub struct ProjectClient {
    client: Option<PooledClient>,
    /// Closed when dropped, not handed back to the pool.
    closing: bool,
    _share: OwnedSemaphorePermit,
    _projects_part: OwnedSemaphorePermit,
}

impl ProjectDatabase {
    pub fn new(pool: Pool) -> ProjectDatabase {
        let size = pool.status().max_size;
        ProjectDatabase {
            pool,
            shares: Shares::new((size / 4).max(1), (size - size / 4).max(1)),
        }
    }

    /// A connection for `project`, once it holds fewer than its share and the projects'
    /// part of the pool has one.
    pub async fn client(&self, project: Uuid) -> Result<ProjectClient, Problem> {
        let (share, projects_part) = self.shares.take(project).await?;
        let client = self.pool.get().await.map_err(db::DbError::from)?;
        Ok(ProjectClient {
            client: Some(client),
            closing: false,
            _share: share,
            _projects_part: projects_part,
        })
    }
}

impl ProjectClient {
    /// Closes the connection when it is dropped instead of handing it back to the pool, even
    /// when the request is dropped halfway: tokio-postgres keeps the buffers of a connection's
    /// largest message for as long as the connection lives, so one that carried a large
    /// submission would go on holding its size.
    pub fn close_when_dropped(&mut self) {
        self.closing = true;
    }
}

impl Drop for ProjectClient {
    fn drop(&mut self) {
        if let Some(client) = self.client.take().filter(|_| self.closing) {
            drop(PooledClient::take(client));
        }
    }
}

impl std::ops::Deref for ProjectClient {
    type Target = PooledClient;

    fn deref(&self) -> &PooledClient {
        self.client.as_ref().expect("held until dropped")
    }
}

impl std::ops::DerefMut for ProjectClient {
    fn deref_mut(&mut self) -> &mut PooledClient {
        self.client.as_mut().expect("held until dropped")
    }
}

/// Each project's share of the pool, keyed by authenticated projects only, and the part of
/// the pool all projects together may hold.
#[derive(Clone)]
struct Shares {
    per_project: usize,
    shares: Arc<Mutex<HashMap<Uuid, Arc<Semaphore>>>>,
    projects_part: Arc<Semaphore>,
}

impl Shares {
    fn new(per_project: usize, projects_part: usize) -> Shares {
        Shares {
            per_project,
            shares: Arc::default(),
            projects_part: Arc::new(Semaphore::new(projects_part)),
        }
    }

    async fn take(
        &self,
        project: Uuid,
    ) -> Result<(OwnedSemaphorePermit, OwnedSemaphorePermit), Problem> {
        let share = self
            .shares
            .lock()
            .expect("not poisoned")
            .entry(project)
            .or_insert_with(|| Arc::new(Semaphore::new(self.per_project)))
            .clone();
        let taken = tokio::time::timeout(WAIT, share.acquire_owned()).await;
        let busy = "this project's requests hold their share of the database; retry";
        let share = taken
            .map_err(|_| Problem::unavailable(busy))?
            .expect("never closed");
        let taken = tokio::time::timeout(WAIT, self.projects_part.clone().acquire_owned()).await;
        let busy = "the projects' requests hold the database; retry";
        let projects_part = taken
            .map_err(|_| Problem::unavailable(busy))?
            .expect("never closed");
        Ok((share, projects_part))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_project_waits_for_its_own_share_while_others_are_served() {
        let shares = Shares::new(2, 3);
        let (one, other) = (Uuid::new_v4(), Uuid::new_v4());
        let held = (
            shares.take(one).await.unwrap(),
            shares.take(one).await.unwrap(),
        );
        assert!(
            shares.take(one).await.is_err(),
            "a third waits, then gives up"
        );
        let others = shares.take(other).await.unwrap();
        assert!(
            shares.take(Uuid::new_v4()).await.is_err(),
            "the projects' part is held"
        );
        drop((held, others));
        assert!(shares.take(one).await.is_ok());
    }
}
