-- How long the last render of a preview took and when it ended, kept when the preview is
-- queued again: the claim's turns count each project's render time from these, so that a
-- render that failed and is asked for again still counts.
ALTER TABLE page_previews ADD COLUMN last_render_seconds double precision;
ALTER TABLE page_previews ADD COLUMN last_render_at timestamptz;
