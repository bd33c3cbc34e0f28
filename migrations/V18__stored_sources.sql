-- What a project's sources may hold in the database is bounded. A job's files are needed only
-- until it ends (a job that ends is never compiled again; a job handed back to the queue has not
-- ended), so they are deleted when it does: cancelled uploads used to stay for the retention
-- period, 100 MB in 20 s from one client. And the sources of a project's queued jobs count
-- against `max_queued_bytes_per_project`, kept beside the queue's depth by the same trigger.
ALTER TABLE jobs ADD COLUMN source_bytes bigint NOT NULL DEFAULT 0;
ALTER TABLE queue_depth ADD COLUMN queued_bytes bigint NOT NULL DEFAULT 0;

DELETE FROM job_files USING jobs
WHERE jobs.id = job_files.job_id AND jobs.status NOT IN ('Queued', 'Running');
UPDATE jobs SET source_bytes = sizes.bytes
FROM (SELECT job_id, sum(octet_length(path) + octet_length(content)) AS bytes
      FROM job_files GROUP BY job_id) sizes
WHERE jobs.id = sizes.job_id;
INSERT INTO queue_depth AS depth (project_id, shard, queued, queued_bytes)
SELECT project_id, 0, 0, sum(source_bytes) FROM jobs WHERE status = 'Queued' GROUP BY project_id
ON CONFLICT (project_id, shard) DO UPDATE SET queued_bytes = EXCLUDED.queued_bytes;

CREATE OR REPLACE FUNCTION count_queued_jobs() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    project uuid;
    delta bigint;
    bytes bigint;
BEGIN
    IF TG_OP = 'DELETE' OR (TG_OP = 'UPDATE' AND OLD.status = 'Queued') THEN
        project := OLD.project_id;
        delta := -1;
        bytes := -OLD.source_bytes;
    ELSE
        project := NEW.project_id;
        delta := 1;
        bytes := NEW.source_bytes;
    END IF;
    INSERT INTO public.queue_depth AS depth (project_id, shard, queued, queued_bytes)
    VALUES (project, pg_backend_pid() % 64, delta, bytes)
    ON CONFLICT (project_id, shard)
    DO UPDATE SET queued = depth.queued + delta, queued_bytes = depth.queued_bytes + bytes;
    RETURN NULL;
END;
$$;

-- SECURITY DEFINER: neither the API (cancel) nor the scheduler (finish) may delete files.
CREATE FUNCTION drop_sources_of_ended_job() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    DELETE FROM public.job_files WHERE job_id = NEW.id;
    RETURN NULL;
END;
$$;
REVOKE ALL ON FUNCTION drop_sources_of_ended_job() FROM PUBLIC;
CREATE TRIGGER jobs_drop_sources_when_ended
    AFTER UPDATE OF status ON jobs
    FOR EACH ROW WHEN (OLD.status IN ('Queued', 'Running')
                       AND NEW.status NOT IN ('Queued', 'Running'))
    EXECUTE FUNCTION drop_sources_of_ended_job();
