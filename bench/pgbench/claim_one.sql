-- Postgres' ceiling for the queue one job at a time: claim the oldest queued job (FOR UPDATE
-- SKIP LOCKED, with a lease), then complete it, each in its own durable transaction.
UPDATE jobs SET status = 'Running', started_at = now(), attempts = attempts + 1,
                lease_owner = 'pgbench', lease_expires_at = now() + interval '60 seconds'
WHERE id = (SELECT id FROM jobs WHERE status = 'Queued' AND run_after <= now()
            ORDER BY run_after, created_at LIMIT 1
            FOR UPDATE SKIP LOCKED)
RETURNING id AS job \gset
UPDATE jobs SET status = 'Succeeded', finished_at = now(), lease_owner = NULL,
                lease_expires_at = NULL
WHERE id = ':job' AND lease_owner = 'pgbench' AND status = 'Running';
