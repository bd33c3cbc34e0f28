-- Webhooks: a project's endpoints, and an outbox of deliveries in Postgres.
--
-- An endpoint's secret is stored only sealed (AES-256-GCM under the operator's
-- webhook_secret_key, which is not in the database): a dump alone reveals no secret.
CREATE TABLE webhook_endpoints (
    id           uuid PRIMARY KEY,
    project_id   uuid NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    url          text NOT NULL,
    description  text NOT NULL DEFAULT '',
    sealed_secret bytea NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_endpoints_project_idx ON webhook_endpoints (project_id, created_at);

-- One row per endpoint per event. A worker claims due rows (FOR UPDATE SKIP LOCKED), holds a
-- lease on the attempt it sends, and records each attempt under that attempt's number.
CREATE TABLE webhook_deliveries (
    id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    endpoint_id      uuid NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    project_id       uuid NOT NULL,
    job_id           uuid NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    event            text NOT NULL DEFAULT 'compile.finished',
    status           text NOT NULL DEFAULT 'pending'
                     CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts         integer NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    lease_expires_at timestamptz,
    last_status_code integer,
    last_error       text,
    last_attempt_at  timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (next_attempt_at)
    WHERE status = 'pending';
CREATE INDEX webhook_deliveries_sending_idx ON webhook_deliveries (lease_expires_at)
    WHERE status = 'pending' AND lease_expires_at IS NOT NULL;
CREATE INDEX webhook_deliveries_endpoint_idx ON webhook_deliveries (endpoint_id, created_at);

-- The outbox: the statement that makes a job terminal (finish, failure, timeout, cancel,
-- attempts exhausted, rescue, or a reuse of an earlier result inserted as Succeeded) inserts
-- its deliveries in the same transaction, whichever role ran it, so no terminal job is ever
-- without its events. SECURITY DEFINER: the trigger sees every endpoint of the job's project
-- whatever row-level security shows the role that ended the job.
CREATE FUNCTION enqueue_job_webhooks() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    INSERT INTO public.webhook_deliveries (endpoint_id, project_id, job_id)
    SELECT id, project_id, NEW.id FROM public.webhook_endpoints
    WHERE project_id = NEW.project_id;
    IF FOUND THEN
        PERFORM pg_notify('texfleet_webhooks', '');
    END IF;
    RETURN NULL;
END;
$$;
REVOKE ALL ON FUNCTION enqueue_job_webhooks() FROM PUBLIC;
CREATE TRIGGER jobs_enqueue_webhooks_on_update
    AFTER UPDATE OF status ON jobs
    FOR EACH ROW WHEN (NEW.status IN ('Succeeded', 'Failed', 'TimedOut', 'Cancelled')
                       AND OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION enqueue_job_webhooks();
CREATE TRIGGER jobs_enqueue_webhooks_on_insert
    AFTER INSERT ON jobs
    FOR EACH ROW WHEN (NEW.status IN ('Succeeded', 'Failed', 'TimedOut', 'Cancelled'))
    EXECUTE FUNCTION enqueue_job_webhooks();

ALTER TABLE webhook_endpoints ENABLE ROW LEVEL SECURITY;
ALTER TABLE webhook_deliveries ENABLE ROW LEVEL SECURITY;
CREATE POLICY api_endpoints_of_the_project ON webhook_endpoints TO texfleet_api
    USING (project_id = current_project())
    WITH CHECK (project_id = current_project());
CREATE POLICY api_deliveries_of_the_project ON webhook_deliveries TO texfleet_api
    USING (project_id = current_project());
CREATE POLICY scheduler_all_endpoints ON webhook_endpoints TO texfleet_scheduler USING (true);
CREATE POLICY scheduler_all_deliveries ON webhook_deliveries TO texfleet_scheduler USING (true);
GRANT SELECT, INSERT, DELETE ON webhook_endpoints TO texfleet_api;
GRANT SELECT ON webhook_deliveries TO texfleet_api;
GRANT SELECT ON webhook_endpoints TO texfleet_scheduler;
GRANT SELECT, UPDATE ON webhook_deliveries TO texfleet_scheduler;
