-- The SyncTeX file of a Succeeded job (compiles/<short_job_id>/output.synctex.gz) and its
-- SHA-256, the strong ETag of GET /compile/{id}/synctex; null when the engine wrote none or
-- what it wrote was not a SyncTeX file.
ALTER TABLE jobs ADD COLUMN synctex_storage_key text;
ALTER TABLE jobs ADD COLUMN synctex_sha256 text;
