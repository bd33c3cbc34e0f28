-- Checks: a job may ask for chktex to check its sources before the compile ("check": "warn"
-- or "error", part of the result cache's key). Its findings are kept among the job's
-- diagnostics, with "source": "chktex".
ALTER TABLE jobs ADD COLUMN check_mode text CHECK (check_mode IN ('warn', 'error'));
