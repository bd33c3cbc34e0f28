-- Wakes the API's waiters on a job when a scheduler starts it, so that a client waiting for the
-- start (GET /compile/{id}?until=started with Prefer: wait) hears of it at once.
CREATE FUNCTION notify_job_started() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('texfleet_job_started', NEW.id::text);
    RETURN NULL;
END;
$$;
CREATE TRIGGER jobs_notify_started
    AFTER UPDATE OF status ON jobs
    FOR EACH ROW WHEN (NEW.status = 'Running' AND OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION notify_job_started();
