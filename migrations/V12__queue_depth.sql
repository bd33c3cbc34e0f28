-- Each project's queue depth, kept by triggers in the transactions that change it, so that
-- the per-project queue limit is checked at once on every submission instead of by counting
-- the backlog. The count is split into 64 shards picked by the backend's pid, so concurrent
-- submissions of one project do not wait on one row lock; the depth is the sum of the shards.
-- A shard may go negative (a job queued through one connection, claimed through another).
-- No foreign key: the jobs' own key guards the project, and the counts of a deleted
-- project's cascading job deletions must not look for it.
CREATE TABLE queue_depth (
    project_id uuid NOT NULL,
    shard      smallint NOT NULL,
    queued     bigint NOT NULL,
    PRIMARY KEY (project_id, shard)
);
INSERT INTO queue_depth (project_id, shard, queued)
SELECT project_id, 0, count(*) FROM jobs WHERE status = 'Queued' GROUP BY project_id;

-- SECURITY DEFINER: the API (submit, cancel) and the scheduler (claim, retry, rescue) change
-- statuses; neither may write the counts themselves.
CREATE FUNCTION count_queued_jobs() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    project uuid;
    delta bigint;
BEGIN
    IF TG_OP = 'DELETE' OR (TG_OP = 'UPDATE' AND OLD.status = 'Queued') THEN
        project := OLD.project_id;
        delta := -1;
    ELSE
        project := NEW.project_id;
        delta := 1;
    END IF;
    INSERT INTO public.queue_depth AS depth (project_id, shard, queued)
    VALUES (project, pg_backend_pid() % 64, delta)
    ON CONFLICT (project_id, shard) DO UPDATE SET queued = depth.queued + delta;
    RETURN NULL;
END;
$$;
REVOKE ALL ON FUNCTION count_queued_jobs() FROM PUBLIC;
CREATE TRIGGER jobs_count_queued_on_insert
    AFTER INSERT ON jobs
    FOR EACH ROW WHEN (NEW.status = 'Queued')
    EXECUTE FUNCTION count_queued_jobs();
CREATE TRIGGER jobs_count_queued_on_update
    AFTER UPDATE OF status ON jobs
    FOR EACH ROW WHEN ((OLD.status = 'Queued') <> (NEW.status = 'Queued'))
    EXECUTE FUNCTION count_queued_jobs();
CREATE TRIGGER jobs_count_queued_on_delete
    AFTER DELETE ON jobs
    FOR EACH ROW WHEN (OLD.status = 'Queued')
    EXECUTE FUNCTION count_queued_jobs();

-- The API reads its own project's depth (the submission's queue limit).
ALTER TABLE queue_depth ENABLE ROW LEVEL SECURITY;
GRANT SELECT ON queue_depth TO texfleet_api;
CREATE POLICY api_depth_of_the_project ON queue_depth TO texfleet_api
    USING (project_id = current_project());

-- Authentication ran as a SQL function, which Postgres plans anew on every call (a quarter
-- of a millisecond, more than the lookup); in PL/pgSQL its plans are kept per connection.
-- Same contract: the live token's project, last_used_at refreshed at most once a minute.
CREATE OR REPLACE FUNCTION authenticate(presented_hash bytea) RETURNS uuid
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
    token record;
BEGIN
    SELECT id, project_id, last_used_at INTO token FROM api_tokens
    WHERE token_hash = presented_hash AND revoked_at IS NULL
      AND (expires_at IS NULL OR expires_at > now());
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF token.last_used_at IS NULL OR token.last_used_at < now() - interval '1 minute' THEN
        UPDATE api_tokens SET last_used_at = now() WHERE id = token.id;
    END IF;
    RETURN token.project_id;
END;
$$;
