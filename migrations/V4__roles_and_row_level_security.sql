-- Project isolation in Postgres itself.
--
-- Three roles: the owner (who runs migrations and the operator CLI) owns every table; the API
-- role sees jobs only through row-level security, for the project its request set with
-- set_config('texfleet.project_id', ..., true) inside its transaction, and nothing when none is
-- set (fail closed); the scheduler role works across projects but cannot read tokens.
-- Roles belong to the whole cluster, so they are created only if missing (and a concurrent
-- creation by another database's migration is not an error).
DO $$
BEGIN
    BEGIN
        CREATE ROLE texfleet_api LOGIN NOBYPASSRLS;
    EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
    END;
    BEGIN
        CREATE ROLE texfleet_scheduler LOGIN NOBYPASSRLS;
    EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
    END;
END
$$;

GRANT USAGE ON SCHEMA public TO texfleet_api, texfleet_scheduler;
GRANT SELECT ON deployment TO texfleet_api, texfleet_scheduler;
GRANT SELECT, INSERT, UPDATE ON jobs TO texfleet_api;
GRANT SELECT, INSERT ON job_files TO texfleet_api;
GRANT SELECT, UPDATE, DELETE ON jobs TO texfleet_scheduler;
GRANT SELECT ON job_files TO texfleet_scheduler;

ALTER TABLE projects ENABLE ROW LEVEL SECURITY;
ALTER TABLE api_tokens ENABLE ROW LEVEL SECURITY;
ALTER TABLE jobs ENABLE ROW LEVEL SECURITY;
ALTER TABLE job_files ENABLE ROW LEVEL SECURITY;

-- The request's project, or NULL when none was set: every comparison with NULL is false.
CREATE FUNCTION current_project() RETURNS uuid LANGUAGE sql STABLE AS $$
    SELECT nullif(current_setting('texfleet.project_id', true), '')::uuid
$$;

CREATE POLICY api_jobs_of_the_project ON jobs TO texfleet_api
    USING (project_id = current_project())
    WITH CHECK (project_id = current_project());
-- A file is visible when its job is, and that subquery is itself filtered by the policy above.
CREATE POLICY api_files_of_the_project ON job_files TO texfleet_api
    USING (EXISTS (SELECT 1 FROM jobs WHERE jobs.id = job_files.job_id))
    WITH CHECK (EXISTS (SELECT 1 FROM jobs WHERE jobs.id = job_files.job_id));
CREATE POLICY scheduler_all_jobs ON jobs TO texfleet_scheduler USING (true);
CREATE POLICY scheduler_all_files ON job_files TO texfleet_scheduler USING (true);

-- Authentication happens before a project is known, so the API may not read api_tokens; it
-- calls this function instead, which runs as the owner and reveals only the project of a live
-- token whose hash it is given. last_used_at is refreshed at most once a minute.
CREATE FUNCTION authenticate(presented_hash bytea) RETURNS uuid
LANGUAGE sql SECURITY DEFINER SET search_path = public AS $$
    WITH live AS (
        SELECT id, project_id, last_used_at FROM api_tokens
        WHERE token_hash = presented_hash AND revoked_at IS NULL
          AND (expires_at IS NULL OR expires_at > now())
    ), touched AS (
        UPDATE api_tokens SET last_used_at = now()
        WHERE id IN (SELECT id FROM live
                     WHERE last_used_at IS NULL OR last_used_at < now() - interval '1 minute')
    )
    SELECT project_id FROM live
$$;
REVOKE ALL ON FUNCTION authenticate(bytea) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION authenticate(bytea) TO texfleet_api;
