-- Checks: a job may ask for chktex to check its sources before the compile ("check": "warn"
-- or "error", part of the result cache's key). Its findings are kept among the job's
-- diagnostics, with "source": "chktex"; `checked` says chktex ran, so that a job whose check
-- did not run is not reused for a request that asks for one.
ALTER TABLE jobs ADD COLUMN check_mode text CHECK (check_mode IN ('warn', 'error'));
ALTER TABLE jobs ADD COLUMN checked boolean NOT NULL DEFAULT false;
