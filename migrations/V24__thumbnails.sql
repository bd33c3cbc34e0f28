-- First-page thumbnails: a job asks for one when it is submitted ("thumbnail_width", part of
-- the result cache's key); Ghostscript renders it in the job's sandbox after the compile, and
-- the scheduler stores it at compiles/<short_job_id>/thumbnail.png with its SHA-256, the
-- strong ETag of GET /compile/{id}/thumbnail (both null when none was asked for, or none was
-- made).
ALTER TABLE jobs ADD COLUMN thumbnail_width integer;
ALTER TABLE jobs ADD COLUMN thumbnail_storage_key text;
ALTER TABLE jobs ADD COLUMN thumbnail_sha256 text;
