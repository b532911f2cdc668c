\echo Use "ALTER EXTENSION ratelimit UPDATE TO '0.4.0'" to load this file. \quit

-- 0.4.0: pg_cron refill mode (SPEC 2.4).  A token_bucket zone with
-- refill => 'cron': calls only take tokens, and a pg_cron job runs
-- rl_cron_refill(zone) every tick.

-- Rows the refill job must visit: cron buckets below capacity.  Every other
-- row keeps it NULL and never changes it, so their updates stay HOT.
ALTER TABLE ratelimit.state ADD COLUMN refill_pending boolean;
CREATE INDEX state_refill_idx ON ratelimit.state (zone_id) WHERE refill_pending;

ALTER TABLE ratelimit.zone
    ADD COLUMN refill text NOT NULL DEFAULT 'inline' CHECK (refill IN ('inline', 'cron')),
    ADD COLUMN refill_tick interval CHECK (refill_tick > interval '0');
COMMENT ON COLUMN ratelimit.zone.refill_tick IS
    'Time between two runs of the zone''s refill job (set by rl_cron_enable); NULL: no job';

-- Writes this transaction's cached changes of a zone to the table, to be
-- read back after a statement that changes its rows (rl_cron_refill).
CREATE FUNCTION ratelimit.flush_zone_state(zone_id int)
RETURNS void
AS 'MODULE_PATHNAME', 'rl_flush_zone_state'
LANGUAGE C STRICT;

-- A period in microseconds as the C code counts it (a month is 30 days).
CREATE FUNCTION ratelimit.period_micros(period interval)
RETURNS numeric
LANGUAGE sql IMMUTABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT (extract(year FROM period) * 12 + extract(month FROM period)) * 30 * 86400000000
           + extract(day FROM period) * 86400000000
           + (extract(hour FROM period) * 3600 + extract(minute FROM period) * 60) * 1000000
           + extract(microseconds FROM period)
$fn$;

-- What pg_cron can run for a zone: 1.5 and later take 'N seconds' (1-59);
-- 1.4 only cron expressions, whose finest step is a minute.  A tick shorter
-- than one token's worth of time (period / rate) would change no decision
-- (the whole tokens arrive at the same moments) while running the job more
-- often, so the tick is that, within what the version accepts.
CREATE FUNCTION ratelimit.cron_plan(pg_cron_version text, rate bigint, period interval,
                                    OUT schedule text, OUT tick interval)
LANGUAGE plpgsql IMMUTABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    parts int[] := string_to_array(substring(pg_cron_version FROM '^[0-9]+(?:\.[0-9]+)?'), '.')::int[];
    seconds_ok boolean;
    per_token numeric := ratelimit.period_micros(period) / rate / 1000000;
BEGIN
    IF parts IS NULL OR parts[1] IS NULL THEN
        RAISE EXCEPTION 'unrecognised pg_cron version "%"', pg_cron_version USING ERRCODE = '22023';
    END IF;
    seconds_ok := parts[1] > 1 OR (parts[1] = 1 AND coalesce(parts[2], 0) >= 5);
    IF seconds_ok AND per_token < 60 THEN
        tick := make_interval(secs => greatest(1, floor(per_token))::int);
        schedule := extract(second FROM tick)::int || ' seconds';
    ELSE
        tick := interval '1 minute';
        schedule := '* * * * *';
    END IF;
END
$fn$;

-- One refill: every bucket of the zone below capacity gets
-- rate * tick / period tokens, up to capacity; the part token carries over
-- exactly (in units of 1 / period microseconds).  Full buckets are not in
-- the partial index and are not touched.  Returns the buckets refilled.
CREATE FUNCTION rl_cron_refill(zone text)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    z ratelimit.zone;
    cap numeric;
    p numeric;
    per_tick numeric;
    refilled bigint;
BEGIN
    IF zone IS NULL THEN
        RAISE EXCEPTION 'zone must not be null' USING ERRCODE = '22004';
    END IF;
    SELECT * INTO z FROM ratelimit.zone AS zz WHERE zz.zone OPERATOR(pg_catalog.=) rl_cron_refill.zone;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'rate-limit zone "%" does not exist', left(zone, 128) || CASE WHEN length(zone) > 128 THEN '...' ELSE '' END USING ERRCODE = '42704';
    END IF;
    IF z.refill <> 'cron' THEN
        RAISE EXCEPTION 'zone "%" is not refilled by pg_cron', zone USING ERRCODE = '55000',
            HINT = 'Its buckets refill at each call.  rl_zone_set(..., refill => ''cron'') changes that.';
    END IF;
    IF z.refill_tick IS NULL THEN
        RAISE EXCEPTION 'zone "%" has no refill job', zone USING ERRCODE = '55000',
            HINT = format('SELECT rl_cron_enable(%L) schedules it.', zone);
    END IF;
    -- This transaction's own calls on the zone may sit in its cache, to be
    -- written at commit over this UPDATE: write them first, and have the
    -- cache read the refilled rows back.
    PERFORM ratelimit.flush_zone_state(z.zone_id);
    cap := coalesce(z.burst, z.rate);
    p := ratelimit.period_micros(z.period);
    per_tick := z.rate * ratelimit.period_micros(z.refill_tick);
    -- The part token is below one token (as the calls read it).
    UPDATE ratelimit.state AS s
    SET tokens = CASE WHEN s.tokens * p + least(s.counter, p - 1) + per_tick >= cap * p THEN cap
                      ELSE div(s.tokens * p + least(s.counter, p - 1) + per_tick, p) END,
        counter = CASE WHEN s.tokens * p + least(s.counter, p - 1) + per_tick >= cap * p THEN 0
                       ELSE mod(s.tokens * p + least(s.counter, p - 1) + per_tick, p) END,
        refill_pending = CASE WHEN s.tokens * p + least(s.counter, p - 1) + per_tick >= cap * p THEN NULL
                              ELSE true END
    WHERE s.zone_id OPERATOR(pg_catalog.=) z.zone_id AND s.refill_pending;
    GET DIAGNOSTICS refilled = ROW_COUNT;
    RETURN refilled;
END
$fn$;
REVOKE ALL ON FUNCTION rl_cron_refill(text) FROM PUBLIC;
COMMENT ON FUNCTION rl_cron_refill(text) IS
    'One refill of a cron-refilled zone (what its pg_cron job runs); returns the buckets refilled';

-- pg_cron keeps job names as type name (63 bytes): a longer zone name is
-- named by its md5, so that every zone's job has a name of its own.
CREATE FUNCTION ratelimit.cron_job_name(zone text)
RETURNS text
LANGUAGE sql IMMUTABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT CASE WHEN octet_length(zone) <= 46 THEN 'ratelimit_refill:' || zone
                ELSE 'ratelimit_refill:md5:' || md5(zone) END
$fn$;

-- Removes the zone's refill jobs, if pg_cron is installed here; how many.
-- Its callers are SECURITY DEFINER: a schema named cron that is not
-- pg_cron's (anyone with CREATE on the database can make one) is ignored.
CREATE FUNCTION ratelimit.unschedule_refill(zone text)
RETURNS int
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    removed int := 0;
    job bigint;
BEGIN
    -- pg_cron creates its schema in its script: the schema is a member of
    -- the extension (its extnamespace is where it was created from).
    IF NOT EXISTS (SELECT FROM pg_depend d
                   JOIN pg_extension e ON e.oid = d.refobjid
                   JOIN pg_namespace n ON n.oid = d.objid
                   WHERE d.classid = 'pg_namespace'::regclass AND d.refclassid = 'pg_extension'::regclass
                     AND d.deptype = 'e' AND e.extname = 'pg_cron' AND n.nspname = 'cron') THEN
        RETURN 0;
    END IF;
    FOR job IN EXECUTE 'SELECT jobid FROM cron.job WHERE jobname OPERATOR(pg_catalog.=) $1'
                       ' AND database OPERATOR(pg_catalog.=) pg_catalog.current_database()'
               USING ratelimit.cron_job_name(zone)
    LOOP
        EXECUTE 'SELECT cron.unschedule($1)' USING job;
        removed := removed + 1;
    END LOOP;
    RETURN removed;
END
$fn$;

CREATE FUNCTION rl_cron_enable(zone text, run_as name DEFAULT 'ratelimit_refill')
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    z ratelimit.zone;
    cron_version text;
    cron_database text := current_setting('cron.database_name', true);
    plan record;
    job bigint;
BEGIN
    IF zone IS NULL OR run_as IS NULL THEN
        RAISE EXCEPTION '% must not be null', CASE WHEN zone IS NULL THEN 'zone' ELSE 'run_as' END
            USING ERRCODE = '22004';
    END IF;
    SELECT * INTO z FROM ratelimit.zone AS zz WHERE zz.zone = rl_cron_enable.zone FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'rate-limit zone "%" does not exist', left(zone, 128) || CASE WHEN length(zone) > 128 THEN '...' ELSE '' END USING ERRCODE = '42704';
    END IF;
    IF z.refill <> 'cron' THEN
        RAISE EXCEPTION 'zone "%" is not refilled by pg_cron', zone USING ERRCODE = '55000',
            HINT = 'Create it with rl_zone_set(..., refill => ''cron'').';
    END IF;
    IF NOT 'pg_cron' = ANY (string_to_array(replace(current_setting('shared_preload_libraries'), ' ', ''), ',')) THEN
        RAISE EXCEPTION 'pg_cron is not loaded' USING ERRCODE = '55000',
            HINT = 'Add pg_cron to shared_preload_libraries in postgresql.conf, restart the server, and run CREATE EXTENSION pg_cron.';
    END IF;
    IF cron_database IS DISTINCT FROM current_database() THEN
        RAISE EXCEPTION 'pg_cron runs its jobs from database "%", not "%"', cron_database, current_database()
            USING ERRCODE = '55000',
            HINT = format('Use ratelimit in database %s, or set cron.database_name = %L and restart the server.',
                          quote_ident(cron_database), current_database());
    END IF;
    SELECT extversion INTO cron_version FROM pg_extension WHERE extname = 'pg_cron';
    IF NOT FOUND THEN
        RAISE EXCEPTION 'pg_cron is not installed in database "%"', current_database()
            USING ERRCODE = '55000', HINT = 'Run CREATE EXTENSION pg_cron.';
    END IF;
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = run_as) THEN
        RAISE EXCEPTION 'role "%" does not exist', left(run_as, 128) || CASE WHEN length(run_as) > 128 THEN '...' ELSE '' END USING ERRCODE = '42704',
            HINT = format('CREATE ROLE %s LOGIN; rl_cron_enable grants it only what the refill needs.',
                          quote_ident(left(run_as, 128) || CASE WHEN length(run_as) > 128 THEN '...' ELSE '' END));
    END IF;

    plan := ratelimit.cron_plan(cron_version, z.rate, z.period);

    -- What the refill needs, and nothing more: read the zone, rewrite the
    -- refilled columns of the state.
    -- @extschema@ comes quoted already.
    EXECUTE format('GRANT USAGE ON SCHEMA ratelimit, %s TO %I', '@extschema@', run_as);
    EXECUTE format('GRANT SELECT ON ratelimit.zone TO %I', run_as);
    EXECUTE format('GRANT SELECT (zone_id, tokens, counter, refill_pending),'
                   ' UPDATE (tokens, counter, refill_pending) ON ratelimit.state TO %I', run_as);
    EXECUTE format('GRANT EXECUTE ON FUNCTION %s.rl_cron_refill(text) TO %I', '@extschema@', run_as);
    -- rl_cron_refill runs with the job role's rights and calls these two
    -- (PUBLIC executes neither).
    EXECUTE format('GRANT EXECUTE ON FUNCTION ratelimit.flush_zone_state(int),'
                   ' ratelimit.period_micros(interval) TO %I', run_as);

    PERFORM ratelimit.unschedule_refill(zone);
    EXECUTE 'SELECT cron.schedule($1, $2, $3)' INTO job
        USING ratelimit.cron_job_name(zone), plan.schedule,
              format('SELECT %s.rl_cron_refill(%L)', '@extschema@', zone);
    EXECUTE 'SELECT cron.alter_job(job_id => $1, username => $2)' USING job, run_as::text;
    UPDATE ratelimit.zone AS zz SET refill_tick = plan.tick WHERE zz.zone_id = z.zone_id;
    RETURN job;
END
$fn$;

CREATE FUNCTION rl_cron_disable(zone text)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    removed int;
BEGIN
    IF zone IS NULL THEN
        RAISE EXCEPTION 'zone must not be null' USING ERRCODE = '22004';
    END IF;
    IF NOT EXISTS (SELECT FROM ratelimit.zone AS zz WHERE zz.zone = rl_cron_disable.zone) THEN
        RAISE EXCEPTION 'rate-limit zone "%" does not exist', left(zone, 128) || CASE WHEN length(zone) > 128 THEN '...' ELSE '' END USING ERRCODE = '42704';
    END IF;
    removed := ratelimit.unschedule_refill(zone);
    UPDATE ratelimit.zone AS zz SET refill_tick = NULL WHERE zz.zone = rl_cron_disable.zone;
    RETURN removed > 0;
END
$fn$;

REVOKE ALL ON FUNCTION rl_cron_enable(text, name), rl_cron_disable(text),
    ratelimit.unschedule_refill(text), ratelimit.cron_plan(text, bigint, interval),
    ratelimit.cron_job_name(text) FROM PUBLIC;
COMMENT ON FUNCTION rl_cron_enable(text, name) IS
    'Schedules the pg_cron job that refills a cron-refilled zone, run as run_as; returns its job id';
COMMENT ON FUNCTION rl_cron_disable(text) IS 'Removes a zone''s refill job; false when it had none';

-- DROP EXTENSION ratelimit leaves no refill job behind.  An event trigger
-- of this extension does not fire at the end of its own drop (it is gone by
-- then), so it acts at the start of the command, on the statement's parse
-- tree: only a DROP EXTENSION that names ratelimit removes the jobs.
CREATE FUNCTION ratelimit.drop_refill_jobs()
RETURNS event_trigger
AS 'MODULE_PATHNAME', 'rl_drop_refill_jobs'
LANGUAGE C;
CREATE EVENT TRIGGER ratelimit_drop_refill_jobs ON ddl_command_start
    WHEN TAG IN ('DROP EXTENSION')
    EXECUTE FUNCTION ratelimit.drop_refill_jobs();

-- rl_zone_set gains refill.
DROP FUNCTION rl_zone_set(text, text, bigint, interval, bigint, text, boolean);
CREATE FUNCTION rl_zone_set(
    zone      text,
    algorithm text,
    rate      bigint,
    period    interval,
    burst     bigint DEFAULT NULL,
    store     text DEFAULT 'table',
    history   boolean DEFAULT false,
    refill    text DEFAULT 'inline')
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    existing ratelimit.zone;
    fresh boolean;
BEGIN
    IF zone IS NULL OR zone = '' THEN
        RAISE EXCEPTION 'zone must not be null or empty' USING ERRCODE = CASE WHEN zone IS NULL THEN '22004' ELSE '22023' END;
    END IF;
    IF octet_length(zone) > 128 THEN
        RAISE EXCEPTION 'zone name is too long' USING ERRCODE = '22001',
            DETAIL = format('The name is %s bytes; the limit is 128.', octet_length(zone));
    END IF;
    PERFORM ratelimit.check_zone(algorithm, rate, period, burst, store);
    IF history IS NULL THEN
        RAISE EXCEPTION 'history must not be null' USING ERRCODE = '22004';
    END IF;
    IF refill IS NULL THEN
        RAISE EXCEPTION 'refill must not be null' USING ERRCODE = '22004';
    END IF;
    IF refill NOT IN ('inline', 'cron') THEN
        RAISE EXCEPTION 'unknown refill mode "%"', refill USING ERRCODE = '22023',
            HINT = 'The refill modes are inline (at each call) and cron (by a pg_cron job).';
    END IF;
    IF refill = 'cron' AND algorithm <> 'token_bucket' THEN
        RAISE EXCEPTION 'refill => ''cron'' needs a token_bucket zone, not %', algorithm
            USING ERRCODE = '0A000';
    END IF;
    IF refill = 'cron' AND store <> 'table' THEN
        RAISE EXCEPTION 'refill => ''cron'' needs the table store' USING ERRCODE = '0A000',
            DETAIL = 'The refill job is one UPDATE of ratelimit.state.';
    END IF;

    SELECT * INTO existing FROM ratelimit.zone z WHERE z.zone = rl_zone_set.zone FOR UPDATE;
    IF NOT FOUND THEN
        INSERT INTO ratelimit.zone (zone, algorithm, rate, period, burst, store, history, refill)
        VALUES (rl_zone_set.zone, rl_zone_set.algorithm, rl_zone_set.rate, rl_zone_set.period,
                rl_zone_set.burst, rl_zone_set.store, rl_zone_set.history, rl_zone_set.refill);
    ELSE
        fresh := existing.algorithm IS DISTINCT FROM rl_zone_set.algorithm
                 OR existing.store IS DISTINCT FROM rl_zone_set.store
                 OR existing.refill IS DISTINCT FROM rl_zone_set.refill;
        -- Another algorithm, store or refill mode cannot read the old
        -- state: start afresh under a new id, so no session can mistake old
        -- rows for new ones.  Otherwise existing keys keep their state under
        -- the new limit.
        IF fresh THEN
            PERFORM ratelimit.forget_zone_state(existing.zone_id);
            DELETE FROM ratelimit.state s WHERE s.zone_id = existing.zone_id;
            IF existing.refill = 'cron' THEN
                PERFORM ratelimit.unschedule_refill(existing.zone);
            END IF;
        END IF;
        UPDATE ratelimit.zone z
        SET zone_id = CASE WHEN fresh THEN nextval('ratelimit.zone_id_seq')::int ELSE z.zone_id END,
            algorithm = rl_zone_set.algorithm, store = rl_zone_set.store,
            rate = rl_zone_set.rate, period = rl_zone_set.period, burst = rl_zone_set.burst,
            history = rl_zone_set.history, refill = rl_zone_set.refill,
            refill_tick = CASE WHEN fresh THEN NULL ELSE z.refill_tick END,
            updated_at = now()
        WHERE z.zone_id = existing.zone_id;
        IF NOT fresh AND rl_zone_set.refill = 'cron' THEN
            -- The part token is counted in units of 1 / period: keep its
            -- value under a new period (rounded down, never a gift).
            IF existing.period <> rl_zone_set.period THEN
                UPDATE ratelimit.state s
                SET counter = div(least(s.counter, ratelimit.period_micros(existing.period) - 1)
                                  * ratelimit.period_micros(rl_zone_set.period),
                                  ratelimit.period_micros(existing.period))
                WHERE s.zone_id = existing.zone_id AND s.counter <> 0;
            END IF;
            -- A capacity that grew: full buckets are below it now, and the
            -- refill job must visit them again.
            UPDATE ratelimit.state s SET refill_pending = true
            WHERE s.zone_id = existing.zone_id AND s.refill_pending IS NULL
              AND s.tokens < coalesce(rl_zone_set.burst, rl_zone_set.rate);
        END IF;
    END IF;
END
$fn$;

CREATE OR REPLACE FUNCTION rl_zone_drop(zone text, if_exists boolean DEFAULT false)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    dropped int;
BEGIN
    IF zone IS NULL THEN
        RAISE EXCEPTION 'zone must not be null' USING ERRCODE = '22004';
    END IF;
    DELETE FROM ratelimit.zone z WHERE z.zone = rl_zone_drop.zone RETURNING z.zone_id INTO dropped;
    IF NOT FOUND THEN
        IF if_exists THEN
            RAISE NOTICE 'rate-limit zone "%" does not exist, skipping', left(zone, 128) || CASE WHEN length(zone) > 128 THEN '...' ELSE '' END;
            RETURN;
        END IF;
        RAISE EXCEPTION 'rate-limit zone "%" does not exist', left(zone, 128) || CASE WHEN length(zone) > 128 THEN '...' ELSE '' END USING ERRCODE = '42704';
    END IF;
    PERFORM ratelimit.forget_zone_state(dropped);
    DELETE FROM ratelimit.state s WHERE s.zone_id = dropped;
    PERFORM ratelimit.unschedule_refill(zone);
END
$fn$;

REVOKE ALL ON FUNCTION rl_zone_set(text, text, bigint, interval, bigint, text, boolean, text) FROM PUBLIC;
COMMENT ON FUNCTION rl_zone_set(text, text, bigint, interval, bigint, text, boolean, text) IS
    'Creates or alters a rate-limit zone: rate requests per period with the given algorithm';

CREATE OR REPLACE VIEW rl_zones AS
SELECT zone, algorithm, rate, period,
       coalesce(burst, rate) AS capacity, burst, store, history, created_at, updated_at,
       refill, refill_tick
FROM ratelimit.zone;
