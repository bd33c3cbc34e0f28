-- Each endpoint's health, kept by the delivery worker (`db::record_attempt`): an endpoint
-- whose attempt failed is paused, all its deliveries with it, for a back-off that doubles with
-- each failure in a row (10 s to an hour), and claims serve endpoints that have answered before
-- ahead of the others (`db::claim_deliveries`). So endpoints that never answer, however many
-- projects own them, take a sender once per pause, and a healthy endpoint's next delivery is
-- not queued behind them.
ALTER TABLE webhook_endpoints
    ADD COLUMN failures integer NOT NULL DEFAULT 0,
    ADD COLUMN paused_until timestamptz,
    ADD COLUMN last_delivered_at timestamptz;
GRANT UPDATE (failures, paused_until, last_delivered_at) ON webhook_endpoints TO texfleet_scheduler;
