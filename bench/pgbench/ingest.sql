-- Postgres' ceiling for ingest: one durable transaction per submission that writes a queued
-- job and its one file (the jobs triggers send the NOTIFY and keep the queue counts), as
-- `POST /compile` does, without the API's checks. Run by `texfleet bench` with
-- `-D project=<uuid> -D texlive=<year>`.
BEGIN;
INSERT INTO jobs (id, project_id, engine, texlive, timeout_seconds, max_attempts,
                  input_hash, main_path, source_bytes)
VALUES (gen_random_uuid(), ':project', 'pdflatex', ':texlive', 60, 3,
        sha256(random()::text::bytea), 'main.tex', 90)
RETURNING id AS job \gset
INSERT INTO job_files (job_id, path, content)
VALUES (':job', 'main.tex',
        convert_to('\documentclass{article}\begin{document}Hello, world!\end{document}',
                   'UTF8'));
COMMIT;
