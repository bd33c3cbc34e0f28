-- Projects, API tokens and the job queue.
--
-- The queue follows the shape of River and pg-boss: one row per job, claimed with
-- SELECT ... FOR UPDATE SKIP LOCKED through a partial index on queued rows, and a lease
-- (owner + expiry) on running rows. Sources live in job_files so the jobs rows that the claim
-- query and the listing scan stay narrow.

CREATE TABLE projects (
    id          uuid PRIMARY KEY,
    name        text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE api_tokens (
    id            uuid PRIMARY KEY,
    project_id    uuid NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    name          text NOT NULL DEFAULT '',
    -- SHA-256 of the token; the token itself is shown once and never stored.
    token_hash    bytea NOT NULL UNIQUE,
    created_at    timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz,
    revoked_at    timestamptz,
    last_used_at  timestamptz
);
CREATE INDEX api_tokens_project_idx ON api_tokens (project_id);

CREATE TABLE jobs (
    id                uuid PRIMARY KEY,
    project_id        uuid NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    status            text NOT NULL DEFAULT 'Queued'
                      CHECK (status IN ('Queued', 'Running', 'Succeeded', 'Failed', 'TimedOut', 'Cancelled')),
    engine            text NOT NULL CHECK (engine IN ('pdflatex', 'xelatex', 'lualatex')),
    halt_on_error     boolean NOT NULL DEFAULT false,
    timeout_seconds   integer NOT NULL CHECK (timeout_seconds > 0),
    created_at        timestamptz NOT NULL DEFAULT now(),
    started_at        timestamptz,
    finished_at       timestamptz,
    -- Earliest time the job may be claimed; pushed into the future by retry back-off.
    run_after         timestamptz NOT NULL DEFAULT now(),
    attempts          integer NOT NULL DEFAULT 0,
    max_attempts      integer NOT NULL CHECK (max_attempts > 0),
    lease_owner       text,
    lease_expires_at  timestamptz,
    error_code        text,
    error_message     text,
    diagnostics       jsonb NOT NULL DEFAULT '[]',
    pdf_storage_key   text,
    log_storage_key   text,
    duration_ms       bigint,
    CHECK ((status = 'Running') = (lease_owner IS NOT NULL))
);
-- The claim query reads this index in order and stops after the first free rows.
CREATE INDEX jobs_claimable_idx ON jobs (run_after, created_at) WHERE status = 'Queued';
-- Lease rescue looks only at running jobs.
CREATE INDEX jobs_running_lease_idx ON jobs (lease_expires_at) WHERE status = 'Running';
-- Listing a project's jobs, newest first, with keyset pagination.
CREATE INDEX jobs_project_created_idx ON jobs (project_id, created_at DESC, id DESC);

CREATE TABLE job_files (
    job_id   uuid NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    path     text NOT NULL,
    content  bytea NOT NULL,
    PRIMARY KEY (job_id, path)
);

-- Wakes idle schedulers (LISTEN texfleet_jobs) whenever a job becomes claimable.
CREATE FUNCTION notify_job_queued() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('texfleet_jobs', NEW.id::text);
    RETURN NULL;
END;
$$;
CREATE TRIGGER jobs_notify_queued
    AFTER INSERT OR UPDATE OF status ON jobs
    FOR EACH ROW WHEN (NEW.status = 'Queued')
    EXECUTE FUNCTION notify_job_queued();

-- Wakes waiters on a job (the API's Prefer: wait, tests) whenever a job reaches a final state.
CREATE FUNCTION notify_job_finished() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('texfleet_job_finished', NEW.id::text);
    RETURN NULL;
END;
$$;
CREATE TRIGGER jobs_notify_finished
    AFTER UPDATE OF status ON jobs
    FOR EACH ROW WHEN (NEW.status IN ('Succeeded', 'Failed', 'TimedOut', 'Cancelled') AND OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION notify_job_finished();

-- Storage keys use only the first 8 hex digits of the id (the contract's <short_job_id>), so two
-- live jobs must never share them, or one job's PDF would overwrite another's. The API draws a
-- new random id on the rare conflict.
CREATE UNIQUE INDEX jobs_short_id_idx ON jobs ((left(id::text, 8)));
