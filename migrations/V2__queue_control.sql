-- Idempotent submissions, per-project fairness and retention.

-- Idempotency-Key: one job per key and project; the hash of the request tells a replay (same
-- body, answered with the original job) from a conflict (another body under the same key).
ALTER TABLE jobs ADD COLUMN idempotency_key text, ADD COLUMN request_hash bytea;
CREATE UNIQUE INDEX jobs_idempotency_idx ON jobs (project_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;

-- The fair claim query walks the projects that have queued work and takes each one's oldest
-- jobs; the queue limit counts a project's queued jobs; the cap counts its running ones.
CREATE INDEX jobs_queued_by_project_idx ON jobs (project_id, created_at) WHERE status = 'Queued';
CREATE INDEX jobs_running_by_project_idx ON jobs (project_id) WHERE status = 'Running';
DROP INDEX jobs_claimable_idx;

-- Retention deletes the oldest finished jobs first.
CREATE INDEX jobs_finished_idx ON jobs (finished_at) WHERE finished_at IS NOT NULL;
