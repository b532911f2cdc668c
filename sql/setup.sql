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

-- regress.count_from_here() and regress.counted(zone): rl_counters counts
-- per zone id for the server's lifetime, and a re-created extension
-- (portability.sql) starts its zone ids at 1 again, so a zone can find the
-- counts of an earlier zone of the same id.  count_from_here() notes every
-- id's counts now; counted(zone) is rl_counters' row of that name less
-- what was noted for the ids that carry the name (the zone's own, those
-- retired under it, or N for '(zone id N)').
CREATE TABLE regress.counter_base (zone_id int PRIMARY KEY, allowed bigint, refused bigint,
                                   evicted bigint, "full" bigint);
CREATE FUNCTION regress.count_from_here() RETURNS bigint LANGUAGE sql AS $$
    DELETE FROM regress.counter_base;
    INSERT INTO regress.counter_base SELECT * FROM ratelimit.shmem_counters();
    SELECT count(*) FROM regress.counter_base;
$$;
CREATE FUNCTION regress.counted(zone text)
RETURNS TABLE (zone text, allowed bigint, refused bigint, evicted bigint, "full" bigint)
LANGUAGE sql AS $$
    WITH ids AS (
        SELECT z.zone_id FROM ratelimit.zone z WHERE z.zone = $1
        UNION SELECT r.zone_id FROM ratelimit.retired_zone_id r WHERE r.zone = $1
        UNION SELECT substring($1 FROM '^\(zone id (-?[0-9]+)\)$')::int),
    base AS (
        SELECT coalesce(sum(b.allowed), 0) AS allowed, coalesce(sum(b.refused), 0) AS refused,
               coalesce(sum(b.evicted), 0) AS evicted, coalesce(sum(b."full"), 0) AS "full"
        FROM regress.counter_base b WHERE b.zone_id IN (SELECT zone_id FROM ids))
    SELECT c.zone, (c.allowed - base.allowed)::bigint, (c.refused - base.refused)::bigint,
           (c.evicted - base.evicted)::bigint, (c."full" - base."full")::bigint
    FROM rl_counters c, base WHERE c.zone = $1
$$;
