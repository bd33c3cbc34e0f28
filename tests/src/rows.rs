//! The rows of a test's database, read and written as the owner role, past row-level
//! security: faults a test injects and outcomes it checks.

use crate::TestApp;
use uuid::Uuid;

impl TestApp {
    /// Runs `statement` as the owner role, past row-level security (a fault a test injects);
    /// returns how many rows it changed.
    pub async fn execute(&self, statement: &str) -> u64 {
        let client = self.pool.get().await.unwrap();
        client.execute(statement, &[]).await.unwrap()
    }

    /// `count` finished jobs of this app's project with one diagnostic each, whose message is
    /// `quotes` double quotes: twice that as JSON (a compile keeps up to about 150 kB; results
    /// reused from the cache copy theirs, at no cost).
    pub async fn insert_jobs_with_diagnostics(&self, count: usize, quotes: usize) {
        self.execute(&format!(
            "INSERT INTO jobs (id, project_id, engine, texlive, timeout_seconds, max_attempts,
                               status, finished_at, diagnostics)
             SELECT gen_random_uuid(), '{}', 'pdflatex', '2024', 30, 1, 'Failed', now(),
                    jsonb_build_array(jsonb_build_object(
                        'severity', 'error', 'file', NULL, 'line', NULL,
                        'message', repeat('\"', {quotes})))
             FROM generate_series(1, {count})",
            self.project_id
        ))
        .await;
    }

    /// One column of the job `id`'s row, read as the owner role.
    pub async fn job_column<T>(&self, id: &str, column: &str) -> T
    where
        T: for<'a> tokio_postgres::types::FromSql<'a>,
    {
        let client = self.pool.get().await.unwrap();
        let id: Uuid = id.parse().unwrap();
        client
            .query_one(&format!("SELECT {column} FROM jobs WHERE id = $1"), &[&id])
            .await
            .unwrap()
            .get(0)
    }

    /// The id of this app's deployment, which labels every container of its schedulers.
    pub async fn deployment_id(&self) -> String {
        let client = self.pool.get().await.unwrap();
        let deployment: Uuid = client
            .query_one("SELECT id FROM deployment", &[])
            .await
            .unwrap()
            .get(0);
        deployment.to_string()
    }

    /// How many jobs the database holds that match `condition` (SQL over the jobs table,
    /// `true` for all), read as the owner role, past row-level security.
    pub async fn count_jobs(&self, condition: &str) -> i64 {
        self.count_rows("jobs", condition).await
    }

    /// How many rows of `table` match `condition`, read as the owner role.
    pub async fn count_rows(&self, table: &str, condition: &str) -> i64 {
        let client = self.pool.get().await.unwrap();
        client
            .query_one(
                &format!("SELECT count(*) FROM {table} WHERE {condition}"),
                &[],
            )
            .await
            .unwrap()
            .get(0)
    }
}
