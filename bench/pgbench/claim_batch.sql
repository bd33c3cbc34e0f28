-- Postgres' ceiling for the queue in batches: claim the 16 oldest queued jobs in one
-- transaction, then complete all 16 in another. A pgbench transaction here is 16 jobs.
WITH claimed AS (
    UPDATE jobs SET status = 'Running', started_at = now(), attempts = attempts + 1,
                    lease_owner = 'pgbench', lease_expires_at = now() + interval '60 seconds'
    WHERE id IN (SELECT id FROM jobs WHERE status = 'Queued' AND run_after <= now()
                 ORDER BY run_after, created_at LIMIT 16
                 FOR UPDATE SKIP LOCKED)
    RETURNING id
)
SELECT array_agg(id) AS jobs FROM claimed \gset
UPDATE jobs SET status = 'Succeeded', finished_at = now(), lease_owner = NULL,
                lease_expires_at = NULL
WHERE id = ANY(':jobs'::uuid[]) AND lease_owner = 'pgbench' AND status = 'Running';
