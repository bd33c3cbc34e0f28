-- TeX Live years side by side: each job names the year it compiles with, and each scheduler
-- runs one image per year it serves.
--
-- A job's year is chosen when it is submitted (the API's default when the request names
-- none); jobs submitted before this migration compiled with TeX Live 2024, the one image
-- there was.
ALTER TABLE jobs ADD COLUMN texlive text NOT NULL DEFAULT '2024';
ALTER TABLE jobs ALTER COLUMN texlive DROP DEFAULT;

-- The images a scheduler runs, by year ({"2024": "sha256:..."}), replacing the one image_id.
ALTER TABLE schedulers ADD COLUMN images jsonb NOT NULL DEFAULT '{}';
UPDATE schedulers SET images = jsonb_build_object('2024', image_id) WHERE image_id IS NOT NULL;
ALTER TABLE schedulers DROP COLUMN image_id;

-- The image every live scheduler that serves `year` runs for it, or NULL when none serves it
-- or they differ (a rolling upgrade: no job can be sure which image would run it). The result
-- cache reuses only a job that ran with that image. The API may not read the schedulers
-- table; this reveals only image ids.
DROP FUNCTION fleet_sandbox_image(float8);
CREATE FUNCTION fleet_sandbox_image(live_seconds float8, year text) RETURNS text
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
    SELECT CASE WHEN count(DISTINCT s.images ->> year) = 1 THEN min(s.images ->> year) END
    FROM public.schedulers s
    WHERE s.heartbeat_at > now() - make_interval(secs => live_seconds) AND s.images ? year
$$;
REVOKE ALL ON FUNCTION fleet_sandbox_image(float8, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION fleet_sandbox_image(float8, text) TO texfleet_api;
