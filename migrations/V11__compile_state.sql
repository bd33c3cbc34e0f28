-- What the compile got from the document's earlier compiles in its project: the preamble
-- format cache's answer ('hit', 'miss', 'unavailable'; null when the cache is off or the job
-- ran no compile of its own) and whether it started from the last compile's auxiliary files.
ALTER TABLE jobs ADD COLUMN preamble_cache text
    CHECK (preamble_cache IN ('hit', 'miss', 'unavailable'));
ALTER TABLE jobs ADD COLUMN incremental boolean NOT NULL DEFAULT false;
-- A request's "cache": false asks for a compile from nothing: no reused result, no preamble
-- format, no auxiliary files of earlier compiles.
ALTER TABLE jobs ADD COLUMN use_cache boolean NOT NULL DEFAULT true;
