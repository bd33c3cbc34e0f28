-- The sandbox image that rendered a stored page preview: which Ghostscript read the PDF, for
-- an operator who learns of a flaw in one (every preview is rendered by a scheduler's newest
-- image, whatever year compiled the PDF).
ALTER TABLE page_previews ADD COLUMN image_id text;
