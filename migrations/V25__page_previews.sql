-- Page previews: a PNG of one page of a Succeeded job's PDF at one width, rendered on demand
-- (GET /compile/{id}/pages/{page}) by a scheduler in a sandbox container and stored at
-- compiles/<short_job_id>/pages/<page>-<width>.png. Each row is a small queue entry with the
-- jobs' lease protocol: claimed with SKIP LOCKED, renewed, finished under the lease, rescued
-- when the lease expires. A row goes with its job (retention).
CREATE TABLE page_previews (
    id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    job_id           uuid NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    project_id       uuid NOT NULL,
    page             integer NOT NULL CHECK (page BETWEEN 1 AND 100000),
    width            integer NOT NULL CHECK (width BETWEEN 16 AND 1200),
    status           text NOT NULL DEFAULT 'Queued'
                     CHECK (status IN ('Queued', 'Running', 'Succeeded', 'Failed')),
    attempts         integer NOT NULL DEFAULT 0,
    lease_owner      text,
    lease_expires_at timestamptz,
    storage_key      text,
    sha256           text,
    -- Succeeded only: the page's width and height as shown, in hundredths of a point.
    page_width       integer CHECK (page_width BETWEEN 100 AND 100000000),
    page_height      integer CHECK (page_height BETWEEN 100 AND 100000000),
    -- Failed only: the PDF's page count when the page is past its end, else why it failed.
    page_count       integer,
    error_message    text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    started_at       timestamptz,
    finished_at      timestamptz,
    UNIQUE (job_id, page, width)
);
CREATE INDEX page_previews_queued ON page_previews (created_at) WHERE status = 'Queued';
CREATE INDEX page_previews_unfinished ON page_previews (project_id)
    WHERE status IN ('Queued', 'Running');
-- A project renders one page at a time across the fleet: two schedulers claiming at once
-- cannot both start one of its renders (the second claim fails and is tried again).
CREATE UNIQUE INDEX page_previews_one_running_per_project ON page_previews (project_id)
    WHERE status = 'Running';

ALTER TABLE page_previews ENABLE ROW LEVEL SECURITY;
-- The foreign key is checked past row-level security, so the policy itself requires the job to
-- be one the request's project sees: a preview of another project's job cannot be inserted.
CREATE POLICY api_previews_of_the_project ON page_previews TO texfleet_api
    USING (project_id = current_project())
    WITH CHECK (project_id = current_project()
                AND EXISTS (SELECT 1 FROM jobs WHERE jobs.id = page_previews.job_id));
CREATE POLICY scheduler_all_previews ON page_previews TO texfleet_scheduler USING (true);
GRANT SELECT, INSERT ON page_previews TO texfleet_api;
-- A render that failed without a page count (out of time or memory, perhaps under load) may be
-- asked for again a minute later.
GRANT UPDATE (status, attempts, error_message, finished_at) ON page_previews TO texfleet_api;
GRANT SELECT, UPDATE ON page_previews TO texfleet_scheduler;

-- Wakes idle schedulers, as a queued job does.
CREATE FUNCTION notify_preview_queued() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('texfleet_jobs', NEW.id::text);
    RETURN NULL;
END;
$$;
CREATE TRIGGER page_previews_notify_queued
    AFTER INSERT OR UPDATE OF status ON page_previews
    FOR EACH ROW WHEN (NEW.status = 'Queued')
    EXECUTE FUNCTION notify_preview_queued();

-- Wakes the requests waiting for a preview (payload: its job's id).
CREATE FUNCTION notify_preview_finished() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('texfleet_preview_finished', NEW.job_id::text);
    RETURN NULL;
END;
$$;
CREATE TRIGGER page_previews_notify_finished
    AFTER UPDATE OF status ON page_previews
    FOR EACH ROW WHEN (NEW.status IN ('Succeeded', 'Failed')
                       AND OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION notify_preview_finished();
