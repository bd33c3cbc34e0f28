-- What one project can make the API's and the delivery worker's statements scan is bounded by
-- indexes, not by the size of its history: a listing by status, an endpoint's latest attempt,
-- and the outbox's ages each take an index probe.
CREATE INDEX jobs_project_status_created_idx ON jobs (project_id, status, created_at DESC, id DESC);
CREATE INDEX webhook_deliveries_endpoint_attempt_idx ON webhook_deliveries (endpoint_id, last_attempt_at)
    WHERE last_attempt_at IS NOT NULL;
CREATE INDEX webhook_deliveries_pending_created_idx ON webhook_deliveries (created_at)
    WHERE status = 'pending';

-- An endpoint holds at most 1,000 pending deliveries: the events of a project that keeps ending
-- jobs towards an endpoint that never answers are recorded as failed, not attempted, beyond
-- that, so the outbox stays bounded while the endpoint is paused.
CREATE OR REPLACE FUNCTION enqueue_job_webhooks() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    INSERT INTO public.webhook_deliveries (endpoint_id, project_id, job_id, status, last_error)
    SELECT e.id, e.project_id, NEW.id,
           CASE WHEN backlog.full THEN 'failed' ELSE 'pending' END,
           CASE WHEN backlog.full
                THEN 'not attempted: the endpoint already had 1000 deliveries pending' END
    FROM public.webhook_endpoints e
    CROSS JOIN LATERAL (
        SELECT count(*) >= 1000 AS full FROM (
            SELECT 1 FROM public.webhook_deliveries d
            WHERE d.endpoint_id = e.id AND d.status = 'pending' LIMIT 1000
        ) pending
    ) backlog
    WHERE e.project_id = NEW.project_id;
    IF FOUND THEN
        PERFORM pg_notify('texfleet_webhooks', '');
    END IF;
    RETURN NULL;
END;
$$;
