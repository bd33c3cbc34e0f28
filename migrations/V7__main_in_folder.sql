-- The main document's path among a job's files. A request that sends input_latex has it stored
-- as main.tex at the top level; a request may instead name any of its files ("main":
-- "paper/main.tex"), and the compile then runs in that file's folder.
ALTER TABLE jobs ADD COLUMN main_path text NOT NULL DEFAULT 'main.tex';
