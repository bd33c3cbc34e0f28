-- Delivery claims take turns across projects (`db::claim_deliveries`): a skip scan finds the
-- projects with pending deliveries, one index probe each, and each of their endpoints offers
-- its oldest due attempts, so that no project's backlog, however large, is all a claim sees.
CREATE INDEX webhook_deliveries_pending_project_idx ON webhook_deliveries (project_id)
    WHERE status = 'pending';
CREATE INDEX webhook_deliveries_pending_endpoint_idx ON webhook_deliveries (endpoint_id, next_attempt_at)
    WHERE status = 'pending';
