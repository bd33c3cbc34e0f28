-- When a compile from nothing ("cache": false) had deleted what its document's earlier
-- compiles left. A result is reused only when every such compile of its document had cleared
-- the state before the result's compile began (`find_reusable`): a compile that read the old
-- state, even one submitted after the compile from nothing, may carry what was planted there.
ALTER TABLE jobs ADD COLUMN state_cleared_at timestamptz;
CREATE INDEX jobs_from_nothing_idx ON jobs (project_id, main_path) WHERE NOT use_cache;
