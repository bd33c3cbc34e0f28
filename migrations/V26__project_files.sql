-- Project files by content: a project uploads a file once (PUT /projects/{id}/files/{sha256}),
-- stored in S3 at projects/<project_id>/files/<sha256 hex>, and its submissions then name it by
-- its SHA-256. A row is the project's claim on one content:
--   Uploading: an upload is streaming it; its bytes count against the project's quota from the
--              start, so that concurrent uploads cannot pass the quota together. An upload that
--              died (expired deadline) is taken over by the next upload of the same content.
--   Stored:    the object is in S3 and submissions may name it.
--   Deleting:  unused past its grace period; the collector deletes the object, then the row.
-- Never shared across projects: no project can learn whether another holds a content.
CREATE TABLE project_files (
    project_id   uuid NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    sha256       bytea NOT NULL CHECK (octet_length(sha256) = 32),
    size         bigint NOT NULL CHECK (size >= 0),
    status       text NOT NULL DEFAULT 'Uploading'
                 CHECK (status IN ('Uploading', 'Stored', 'Deleting')),
    upload_expires_at timestamptz,
    created_at   timestamptz NOT NULL DEFAULT now(),
    -- Kept for the grace period after its last upload, and while a retained job names it: the
    -- last job that named it is retained for the retention period after this.
    last_uploaded_at timestamptz NOT NULL DEFAULT now(),
    last_named_at    timestamptz,
    PRIMARY KEY (project_id, sha256)
);
CREATE INDEX project_files_last_uploaded ON project_files (last_uploaded_at);

-- One row per project that has uploaded anything: uploads of a project lock it, so that the
-- quota check and the reservation are one step.
CREATE TABLE project_file_quotas (
    project_id uuid PRIMARY KEY REFERENCES projects (id) ON DELETE CASCADE
);

ALTER TABLE project_files ENABLE ROW LEVEL SECURITY;
ALTER TABLE project_file_quotas ENABLE ROW LEVEL SECURITY;
CREATE POLICY api_files_of_the_project ON project_files TO texfleet_api
    USING (project_id = current_project())
    WITH CHECK (project_id = current_project());
CREATE POLICY api_quota_of_the_project ON project_file_quotas TO texfleet_api
    USING (project_id = current_project())
    WITH CHECK (project_id = current_project());
CREATE POLICY scheduler_all_project_files ON project_files TO texfleet_scheduler USING (true);
GRANT SELECT, INSERT, UPDATE, DELETE ON project_files TO texfleet_api;
GRANT SELECT, INSERT, UPDATE ON project_file_quotas TO texfleet_api;
GRANT SELECT, UPDATE, DELETE ON project_files TO texfleet_scheduler;

-- A job's file is either its bytes (content) or a project file named by its hash (sha256, with
-- its size), fetched from S3 by the scheduler.
ALTER TABLE job_files ALTER COLUMN content DROP NOT NULL;
ALTER TABLE job_files ADD COLUMN sha256 bytea CHECK (octet_length(sha256) = 32);
ALTER TABLE job_files ADD COLUMN size bigint CHECK (size >= 0);
ALTER TABLE job_files ADD CONSTRAINT job_files_content_or_hash
    CHECK ((content IS NULL) = (sha256 IS NOT NULL AND size IS NOT NULL));
-- The collector keeps what a queued or running job names.
CREATE INDEX job_files_sha256 ON job_files (sha256) WHERE sha256 IS NOT NULL;
