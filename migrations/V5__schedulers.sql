-- Schedulers announce themselves while they run (a heartbeat), so that what a dead scheduler
-- left behind (its warm sandbox containers, which hold no job and no lease) can be told from
-- what a live one holds, and removed by any other. A scheduler that stops cleanly removes its
-- own row. Only the scheduler role and the owner see this table.
CREATE TABLE schedulers (
    id            text PRIMARY KEY,
    heartbeat_at  timestamptz NOT NULL DEFAULT now()
);
ALTER TABLE schedulers ENABLE ROW LEVEL SECURITY;
CREATE POLICY scheduler_all_schedulers ON schedulers TO texfleet_scheduler USING (true);
GRANT SELECT, INSERT, UPDATE, DELETE ON schedulers TO texfleet_scheduler;
