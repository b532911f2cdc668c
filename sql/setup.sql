-- Runs first (the Makefile and scripts/test.sh put it before the others):
-- what every test file of this database shares.
--
-- regress.try(sql): runs a statement and returns 'ok: <its result>' or
-- '<SQLSTATE>: <message>', so that an expected error is one line of output
-- and the test goes on.  In a schema of its own, usable by the roles the
-- tests create.
CREATE SCHEMA regress;
GRANT USAGE ON SCHEMA regress TO PUBLIC;
CREATE FUNCTION regress.try(sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    result text;
BEGIN
    EXECUTE sql INTO result;
    RETURN 'ok: ' || result;
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END $$;

-- regress.cron_zone(zone, rate, period, burst): a token_bucket zone that a
-- pg_cron job refills (refill 'cron', no job yet: refill_tick NULL), made
-- by a direct INSERT into ratelimit.zone.  rl_zone_set refuses a cron zone
-- that no job could refill: pg_cron must run its jobs from this database,
-- and the test clusters run them from database postgres, not from the
-- regression database.  The zone table is the configuration, as a restored
-- dump fills it; the calls and rl_cron_refill take it from there.  The
-- tests that need a job set refill_tick themselves (what rl_cron_enable
-- leaves behind).  As superuser: the table is the extension's.
CREATE FUNCTION regress.cron_zone(zone text, rate numeric, period interval, burst bigint DEFAULT NULL)
RETURNS void LANGUAGE sql AS $$
    INSERT INTO ratelimit.zone (zone, algorithm, rate, period, burst, refill)
    VALUES ($1, 'token_bucket', $2, $3, $4, 'cron')
$$;

-- regress.error(sql): runs a statement that must fail and shows its error
-- field by field (sqlstate, message, detail, hint; the fields it has), or
-- one row 'no error' when it ran: for errors whose detail and hint are part
-- of what is tested.
CREATE FUNCTION regress.error(sql text) RETURNS TABLE (field text, value text) LANGUAGE plpgsql AS $$
DECLARE
    state text;
    message text;
    detail text;
    hint text;
BEGIN
    BEGIN
        EXECUTE sql;
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, message = MESSAGE_TEXT,
                                detail = PG_EXCEPTION_DETAIL, hint = PG_EXCEPTION_HINT;
        RETURN QUERY SELECT f, v FROM (VALUES (1, 'sqlstate', state), (2, 'message', message),
                                              (3, 'detail', nullif(detail, '')), (4, 'hint', nullif(hint, ''))) AS e(n, f, v)
                     WHERE v IS NOT NULL ORDER BY n;
        RETURN;
    END;
    RETURN QUERY SELECT 'no error'::text, NULL::text;
END $$;

-- regress.counted(zone): rl_counters' row of that name.  A zone id counts
-- from zero when it comes into use, also after portability.sql re-created
-- the extension (whose zone ids start at 1 again).
CREATE FUNCTION regress.counted(zone text)
RETURNS TABLE (zone text, allowed bigint, refused bigint, evicted bigint, "full" bigint)
LANGUAGE sql AS $$
    SELECT c.zone, c.allowed, c.refused, c.evicted, c."full" FROM rl_counters c WHERE c.zone = $1
$$;
