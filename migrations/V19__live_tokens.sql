-- The API keeps the hashes of live tokens in memory, so that a made-up token is refused
-- without a query: made-up tokens, however many networks send them, then cost the database
-- one query a second at most, and a token created a moment ago waits at most for the next.
-- The API role still may not read api_tokens; this function gives it the hashes (SHA-256 of
-- the tokens, which they cannot be recovered from) of the live tokens created since a time.
CREATE INDEX api_tokens_created_idx ON api_tokens (created_at);

CREATE FUNCTION live_token_hashes(created_since timestamptz)
RETURNS TABLE (token_hash bytea, created_at timestamptz)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
    SELECT t.token_hash, t.created_at FROM public.api_tokens t
    WHERE t.created_at >= created_since AND t.revoked_at IS NULL
      AND (t.expires_at IS NULL OR t.expires_at > now());
$$;
REVOKE ALL ON FUNCTION live_token_hashes(timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION live_token_hashes(timestamptz) TO texfleet_api;
