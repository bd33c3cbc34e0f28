-- The result cache and strong ETags.
--
-- The API records a hash of what the request decides about a job's output (input_hash); the
-- scheduler records the sandbox image that ran it and the SHA-256 of each stored output. A new
-- submission whose hash matches a retained Succeeded job of the same project, run by the image
-- every live scheduler runs now, on the same UTC day (the dates a compile writes), completes
-- at once with that job's outputs: it records the original in reused_from and stores nothing
-- of its own. Retention keeps an original while a job reuses it.
ALTER TABLE jobs
    ADD COLUMN input_hash bytea,
    ADD COLUMN image_id text,
    ADD COLUMN reused_from uuid,
    ADD COLUMN pdf_sha256 text,
    ADD COLUMN log_sha256 text;
CREATE INDEX jobs_cache_idx ON jobs (project_id, input_hash)
    WHERE status = 'Succeeded' AND reused_from IS NULL;
CREATE INDEX jobs_reused_idx ON jobs (reused_from) WHERE reused_from IS NOT NULL;

ALTER TABLE schedulers ADD COLUMN image_id text;

-- The image every scheduler alive within the last live_seconds runs, or NULL when there is
-- none or they differ (a rolling upgrade: no job can be sure which image would run it). The
-- API may not read the schedulers table; this reveals only the image id.
CREATE FUNCTION fleet_sandbox_image(live_seconds float8) RETURNS text
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public AS $$
    SELECT CASE WHEN count(*) > 0 AND count(*) = count(image_id)
                     AND count(DISTINCT image_id) = 1
                THEN min(image_id) END
    FROM schedulers
    WHERE heartbeat_at > now() - make_interval(secs => live_seconds)
$$;
REVOKE ALL ON FUNCTION fleet_sandbox_image(float8) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION fleet_sandbox_image(float8) TO texfleet_api;
