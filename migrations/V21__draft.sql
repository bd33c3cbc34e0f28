-- Draft compiles: graphics drawn as boxes with their file names, for a fast preview. A job
-- asks for one when it is submitted; the result cache keys it (input_hash), and a preamble
-- format dumped in draft serves draft compiles only (the scheduler's format key).
ALTER TABLE jobs ADD COLUMN draft boolean NOT NULL DEFAULT false;
