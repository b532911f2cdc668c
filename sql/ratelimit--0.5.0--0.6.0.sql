-- ratelimit 0.5.0 to 0.6.0: durable zones (state in a logged table that
-- survives a crash and a failover), and the shmem store saved periodically.
\echo Use "ALTER EXTENSION ratelimit UPDATE TO '0.6.0'" to load this file. \quit

-- The durable zones' state table and the zone option.
DO $do$
BEGIN
    EXECUTE 'CREATE TABLE ratelimit.durable_state (LIKE ratelimit.state INCLUDING ALL) WITH (fillfactor = 50)';
EXCEPTION WHEN feature_not_supported OR syntax_error OR invalid_parameter_value THEN
    EXECUTE 'CREATE TABLE ratelimit.durable_state (LIKE ratelimit.state INCLUDING ALL)';
END
$do$;
COMMENT ON TABLE ratelimit.durable_state IS
    'Rate-limit state of the zones with durable => true (logged: kept across a crash, replicated), as in ratelimit.state';
-- Unlike the UNLOGGED state, pg_dump keeps it: a quota survives a dump and
-- restore as it survives a crash (the zones and their ids come along).
SELECT pg_catalog.pg_extension_config_dump('ratelimit.durable_state', '');
ALTER TABLE ratelimit.zone
    ADD COLUMN durable boolean NOT NULL DEFAULT false CHECK (NOT durable OR store = 'table');

CREATE FUNCTION ratelimit.state_table(durable boolean)
RETURNS regclass
LANGUAGE sql STABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT CASE WHEN durable THEN 'ratelimit.durable_state' ELSE 'ratelimit.state' END::regclass
$fn$;

CREATE FUNCTION ratelimit.move_zone_state(zone_id int, to_durable boolean)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    source constant regclass := ratelimit.state_table(NOT to_durable);
    target constant regclass := ratelimit.state_table(to_durable);
    moved bigint;
BEGIN
    -- This transaction's own calls on the zone may sit in its cache: write
    -- them to the table, then drop the copies, which name the source's rows.
    PERFORM ratelimit.flush_zone_state(zone_id);
    PERFORM ratelimit.forget_zone_state(zone_id);
    EXECUTE format('LOCK TABLE %s, %s IN EXCLUSIVE MODE', source, target);
    EXECUTE format('WITH gone AS (DELETE FROM %s s WHERE s.zone_id = $1 RETURNING s.*)
                    INSERT INTO %s SELECT * FROM gone', source, target)
    USING zone_id;
    GET DIAGNOSTICS moved = ROW_COUNT;
    RETURN moved;
END
$fn$;

-- rl_zone_set gains durable, its last parameter: a new signature.  Whoever
-- could execute the old one can execute the new one.
SELECT pg_catalog.set_config('rl_upgrade.zone_set_grantees', coalesce(string_agg(a.grantee::regrole::text, ','), ''), true)
FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) a
WHERE p.oid = '@extschema@.rl_zone_set(text, text, numeric, interval, bigint, text, boolean, text, boolean, boolean)'::regprocedure
  AND a.privilege_type = 'EXECUTE' AND a.grantee <> 0 AND a.grantee <> p.proowner;
DROP FUNCTION @extschema@.rl_zone_set(text, text, numeric, interval, bigint, text, boolean, text, boolean, boolean);
CREATE FUNCTION rl_zone_set(
    zone      text,
    algorithm text DEFAULT NULL,
    rate      numeric DEFAULT NULL,
    period    interval DEFAULT NULL,
    burst     bigint DEFAULT NULL,
    store     text DEFAULT NULL,
    history   boolean DEFAULT NULL,
    refill    text DEFAULT NULL,
    shadow    boolean DEFAULT NULL,
    reset     boolean DEFAULT false,
    durable   boolean DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    existing ratelimit.zone;
    wanted ratelimit.zone;
    changes text[] := '{}';
    fresh boolean;
    name_shown text := left(zone, 128) || CASE WHEN length(zone) > 128 THEN '...' ELSE '' END;
BEGIN
    IF zone IS NULL OR zone = '' THEN
        RAISE EXCEPTION 'zone must not be null or empty' USING ERRCODE = CASE WHEN zone IS NULL THEN '22004' ELSE '22023' END;
    END IF;
    IF octet_length(zone) > 128 THEN
        RAISE EXCEPTION 'zone name is too long' USING ERRCODE = '22001',
            DETAIL = format('The name is %s bytes; the limit is 128.', octet_length(zone));
    END IF;
    -- Reserved: else a zone could add its counts to rl_token_bucket's row
    -- of rl_counters, or pass for rl_gcra's keys in rl_keys.
    IF left(zone, 1) = '(' THEN
        RAISE EXCEPTION 'zone names beginning with "(" are reserved' USING ERRCODE = '22023',
            DETAIL = 'rl_counters and rl_keys name what belongs to no zone so: (rl_token_bucket), (rl_gcra), (zone id N).',
            HINT = 'Choose a name that does not begin with "(".';
    END IF;
    IF reset IS NULL THEN
        RAISE EXCEPTION 'reset must not be null' USING ERRCODE = '22004';
    END IF;

    SELECT * INTO existing FROM ratelimit.zone z WHERE z.zone = rl_zone_set.zone FOR UPDATE;
    IF NOT FOUND THEN
        IF algorithm IS NULL OR rate IS NULL OR period IS NULL THEN
            RAISE EXCEPTION 'a new zone needs an algorithm, a rate and a period' USING ERRCODE = '22004',
                DETAIL = format('Zone "%s" does not exist yet; %s missing.', name_shown,
                                array_to_string(ARRAY[CASE WHEN algorithm IS NULL THEN 'algorithm' END,
                                                      CASE WHEN rate IS NULL THEN 'rate' END,
                                                      CASE WHEN period IS NULL THEN 'period' END], ', ')
                                || CASE WHEN num_nulls(algorithm, rate, period) > 1 THEN ' are' ELSE ' is' END),
                HINT = format('SELECT rl_zone_set(%L, ''token_bucket'', 10, ''1 minute'');', zone);
        END IF;
        existing.algorithm := algorithm;
        existing.burst := NULL;
        existing.store := 'table';
        existing.history := false;
        existing.refill := 'inline';
        existing.shadow := false;
        existing.durable := false;
    END IF;

    -- What the zone becomes: each option named, else its current value.
    wanted := existing;
    wanted.algorithm := coalesce(algorithm, existing.algorithm);
    wanted.rate := coalesce(rate, existing.rate);
    wanted.period := coalesce(period, existing.period);
    wanted.store := coalesce(store, existing.store);
    wanted.history := coalesce(history, existing.history);
    wanted.refill := coalesce(refill, existing.refill);
    wanted.shadow := coalesce(shadow, existing.shadow);
    wanted.durable := coalesce(durable, existing.durable);
    -- A burst is kept while the algorithm has one (token_bucket, gcra).
    wanted.burst := CASE WHEN burst IS NOT NULL THEN burst
                         WHEN wanted.algorithm IN ('token_bucket', 'gcra') THEN existing.burst END;

    -- Before check_zone: a definition error before what the server lacks.
    IF wanted.durable AND wanted.store <> 'table' THEN
        RAISE EXCEPTION 'durable => true needs the table store' USING ERRCODE = '0A000',
            DETAIL = CASE WHEN durable IS NULL
                          THEN format('Zone "%s" is durable; the shmem store keeps its keys in shared memory.', name_shown)
                          ELSE 'The shmem store keeps its keys in shared memory, saved to disk every ratelimit.shmem_save_interval.' END,
            HINT = CASE WHEN durable IS NULL THEN 'Pass durable => false as well.'
                        ELSE 'Use store => ''table'' for a zone that must survive a crash and a failover.' END;
    END IF;
    PERFORM ratelimit.check_zone(wanted.algorithm, wanted.rate, wanted.period, wanted.burst, wanted.store);
    IF wanted.refill NOT IN ('inline', 'cron') THEN
        RAISE EXCEPTION 'unknown refill mode "%"', left(wanted.refill, 128) || CASE WHEN length(wanted.refill) > 128 THEN '...' ELSE '' END USING ERRCODE = '22023',
            HINT = 'The refill modes are inline (at each call) and cron (by a pg_cron job).';
    END IF;
    IF wanted.refill = 'cron' THEN
        IF wanted.algorithm <> 'token_bucket' THEN
            RAISE EXCEPTION 'refill => ''cron'' needs a token_bucket zone, not %', left(wanted.algorithm, 128) || CASE WHEN length(wanted.algorithm) > 128 THEN '...' ELSE '' END
                USING ERRCODE = '0A000';
        END IF;
        IF wanted.store <> 'table' THEN
            RAISE EXCEPTION 'refill => ''cron'' needs the table store' USING ERRCODE = '0A000',
                DETAIL = 'The refill job is one UPDATE of ratelimit.state.';
        END IF;
        IF wanted.rate <> trunc(wanted.rate) THEN
            RAISE EXCEPTION 'refill => ''cron'' needs a whole rate' USING ERRCODE = '0A000',
                DETAIL = format('rate is %s; the refill job adds whole tokens per tick.', wanted.rate);
        END IF;
        -- Where the job could never run, no call would ever refill.
        IF existing.zone_id IS NULL OR existing.refill <> 'cron' THEN
            PERFORM ratelimit.pg_cron_version();
        END IF;
    END IF;

    IF existing.zone_id IS NULL THEN
        INSERT INTO ratelimit.zone (zone, algorithm, rate, period, burst, store, history, refill, shadow, durable)
        VALUES (rl_zone_set.zone, wanted.algorithm, wanted.rate, wanted.period, wanted.burst,
                wanted.store, wanted.history, wanted.refill, wanted.shadow, wanted.durable);
        PERFORM ratelimit.zones_changed();
        RETURN;
    END IF;

    IF wanted.algorithm IS DISTINCT FROM existing.algorithm THEN
        changes := changes || format('algorithm %s to %s', existing.algorithm, wanted.algorithm);
    END IF;
    IF wanted.store IS DISTINCT FROM existing.store THEN
        changes := changes || format('store %s to %s', existing.store, wanted.store);
    END IF;
    IF wanted.refill IS DISTINCT FROM existing.refill THEN
        changes := changes || format('refill %s to %s', existing.refill, wanted.refill);
    END IF;
    IF cardinality(changes) > 0 AND NOT reset THEN
        RAISE EXCEPTION 'changing the % of zone "%" would reset the state of its keys',
            CASE WHEN cardinality(changes) > 1 THEN 'algorithm, store or refill mode'
                 ELSE split_part(changes[1], ' ', 1) || CASE WHEN changes[1] LIKE 'refill%' THEN ' mode' ELSE '' END END,
            name_shown
            USING ERRCODE = '55000',
                  DETAIL = format('The change: %s.  Its keys'' state cannot be read the new way: every key would start afresh.',
                                  array_to_string(changes, ', ')),
                  HINT = 'Pass reset => true to accept that, or define a zone of another name.';
    END IF;
    fresh := reset;
    IF fresh THEN
        -- Start afresh under a new id, so that no session can mistake old
        -- rows for new ones; the old id's counters keep the zone's name.
        PERFORM ratelimit.forget_zone_state(existing.zone_id);
        DELETE FROM ratelimit.state s WHERE s.zone_id = existing.zone_id;
        DELETE FROM ratelimit.durable_state s WHERE s.zone_id = existing.zone_id;
        INSERT INTO ratelimit.retired_zone_id (zone_id, zone) VALUES (existing.zone_id, existing.zone);
        IF existing.refill = 'cron' THEN
            PERFORM ratelimit.unschedule_refill(existing.zone_id);
        END IF;
        wanted.zone_id := nextval('ratelimit.zone_id_seq')::int;
        wanted.refill_tick := NULL;
    ELSIF wanted.durable IS DISTINCT FROM existing.durable AND wanted.store = 'table' THEN
        PERFORM ratelimit.move_zone_state(existing.zone_id, wanted.durable);
    END IF;
    -- The new id is a constant here, not nextval() inside the UPDATE (a
    -- distributed table, Citus, refuses volatile functions there).
    UPDATE ratelimit.zone z
    SET zone_id = wanted.zone_id, algorithm = wanted.algorithm, store = wanted.store,
        rate = wanted.rate, period = wanted.period, burst = wanted.burst,
        history = wanted.history, refill = wanted.refill, refill_tick = wanted.refill_tick,
        shadow = wanted.shadow, durable = wanted.durable, updated_at = now()
    WHERE z.zone_id = existing.zone_id;
    -- A cron zone whose capacity grew: its full buckets are below the new
    -- capacity, and the refill job must visit them again.
    IF NOT fresh AND wanted.refill = 'cron' THEN
        EXECUTE format('UPDATE %s s SET refill_pending = true
                        WHERE s.zone_id = $1 AND s.refill_pending IS NULL AND s.tokens < $2',
                       ratelimit.state_table(wanted.durable))
        USING existing.zone_id, coalesce(wanted.burst, wanted.rate);
    END IF;
    PERFORM ratelimit.zones_changed();
END
$fn$;
COMMENT ON FUNCTION rl_zone_set(text, text, numeric, interval, bigint, text, boolean, text, boolean, boolean, boolean) IS
    'Creates a rate-limit zone (rate requests per period with the given algorithm), or changes the options named and keeps the rest; reset => true accepts starting the zone''s keys afresh; durable => true keeps its keys across a crash and a failover';

DO $do$
DECLARE
    grantee text;
BEGIN
    FOR grantee IN SELECT g FROM unnest(string_to_array(current_setting('rl_upgrade.zone_set_grantees'), ',')) g LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s.rl_zone_set(text, text, numeric, interval, bigint, text, boolean, text, boolean, boolean, boolean) TO %s',
                       '@extschema@', grantee);
    END LOOP;
END
$do$;

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
    DELETE FROM ratelimit.durable_state s WHERE s.zone_id = dropped;
    INSERT INTO ratelimit.retired_zone_id (zone_id, zone) VALUES (dropped, rl_zone_drop.zone);
    PERFORM ratelimit.unschedule_refill(dropped);
    PERFORM ratelimit.zones_changed();
END
$fn$;
COMMENT ON FUNCTION rl_zone_drop(text, boolean) IS 'Drops a rate-limit zone and its state';

CREATE OR REPLACE VIEW rl_zones AS
SELECT zone, algorithm, rate, period,
       -- a fractional rate's capacity: its whole requests, at least one
       coalesce(burst, greatest(1, floor(rate)))::bigint AS capacity, burst, store, history,
       created_at, updated_at, refill, refill_tick, shadow, durable
FROM ratelimit.zone;

-- The head rows of both state tables, each from the table its zone keeps
-- its keys in.
CREATE FUNCTION ratelimit.table_zone_keys(OUT key text, OUT zone_id int, OUT part int, OUT updated_at timestamptz)
RETURNS SETOF record
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT s.key, s.zone_id, s.part, s.updated_at FROM ratelimit.state s
    WHERE s.part OPERATOR(pg_catalog.=) 0
      AND NOT EXISTS (SELECT FROM ratelimit.zone z
                      WHERE z.zone_id OPERATOR(pg_catalog.=) s.zone_id AND z.durable)
    UNION ALL
    SELECT s.key, s.zone_id, s.part, s.updated_at FROM ratelimit.durable_state s
    JOIN ratelimit.zone z ON z.zone_id OPERATOR(pg_catalog.=) s.zone_id AND z.durable
    WHERE s.part OPERATOR(pg_catalog.=) 0
$fn$;

CREATE OR REPLACE FUNCTION ratelimit.keys(
    OUT zone text, OUT key text, OUT store text, OUT capacity bigint, OUT remaining bigint,
    OUT reset_after interval, OUT updated_at timestamptz)
RETURNS SETOF record
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    held record;
    distributed constant boolean := ratelimit.state_is_distributed();
BEGIN
    IF NOT distributed THEN
        RETURN QUERY
        SELECT z.zone, s.key, 'table'::text, p.capacity, p.remaining, p.reset_after, s.updated_at
        FROM ratelimit.table_zone_keys() s
        JOIN ratelimit.zone z ON z.zone_id OPERATOR(pg_catalog.=) s.zone_id
        CROSS JOIN LATERAL @extschema@.rl_peek(z.zone, s.key, 0) p
        WHERE s.part OPERATOR(pg_catalog.=) 0 AND z.store OPERATOR(pg_catalog.=) 'table';
    ELSE
        -- Citus: rl_peek runs here, a key at a time.  Inside the query on
        -- the state it would run on the shards, and a query on a shard may
        -- not run another distributed query (rl_peek's zone lookup).
        FOR held IN SELECT z.zone, s.key, s.updated_at
                    FROM ratelimit.table_zone_keys() s
                    JOIN ratelimit.zone z ON z.zone_id OPERATOR(pg_catalog.=) s.zone_id
                    WHERE s.part OPERATOR(pg_catalog.=) 0 AND z.store OPERATOR(pg_catalog.=) 'table'
        LOOP
            RETURN QUERY
            SELECT held.zone, held.key, 'table'::text, p.capacity, p.remaining, p.reset_after,
                   held.updated_at
            FROM @extschema@.rl_peek(held.zone, held.key, 0) p;
        END LOOP;
    END IF;
    RETURN QUERY
    SELECT CASE s.zone_id WHEN 0 THEN '(rl_token_bucket)' ELSE '(rl_gcra)' END, s.key, 'table'::text,
           -- an ad-hoc bucket's capacity, rate * window, from its params
           CASE s.zone_id WHEN 0 THEN trunc(split_part(s.params, ':', 1)::float8
                                            * split_part(s.params, ':', 2)::float8)::bigint END,
           CASE s.zone_id WHEN 0 THEN s.tokens END, NULL::interval, s.updated_at
    FROM ratelimit.state s
    WHERE s.zone_id OPERATOR(pg_catalog.<=) 0 AND s.part OPERATOR(pg_catalog.=) 0;
    IF NOT distributed THEN
        RETURN QUERY
        SELECT k.zone, k.key, 'shmem'::text, k.capacity, k.remaining, k.reset_after, k.updated_at
        FROM ratelimit.node_shmem_keys() k;
    ELSE
        -- Each node's shared memory holds the keys of its shards.
        RETURN QUERY
        SELECT k.zone, k.key, 'shmem'::text, k.capacity, k.remaining, k.reset_after, k.updated_at
        FROM ratelimit.on_every_node('SELECT coalesce(json_agg(k), ''[]'') FROM ratelimit.node_shmem_keys() k') n,
             json_to_record(n) AS k(zone text, key text, capacity bigint, remaining bigint,
                                    reset_after interval, updated_at timestamptz);
    END IF;
END
$fn$;

CREATE OR REPLACE FUNCTION rl_cron_refill(zone text)
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    z ratelimit.zone;
    run_at timestamptz;
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
    -- The session's user: current_user is the owner here.
    IF NOT pg_has_role(session_user, (SELECT e.extowner FROM pg_extension e
                                      WHERE e.extname OPERATOR(pg_catalog.=) 'ratelimit'), 'USAGE') THEN
        run_at := ratelimit.clock();
        INSERT INTO ratelimit.cron_refill_due AS d (zone_id, due_at)
        VALUES (z.zone_id, run_at + z.refill_tick)
        ON CONFLICT (zone_id) DO UPDATE
            SET due_at = greatest(d.due_at, run_at) + z.refill_tick
            WHERE d.due_at - z.refill_tick / 2 <= run_at;
        IF NOT FOUND THEN
            RETURN 0;           -- too early: a later run refills
        END IF;
    END IF;
    -- This transaction's own calls on the zone may sit in its cache, to be
    -- written at commit over this UPDATE: write them first, and have the
    -- cache read the refilled rows back.
    PERFORM ratelimit.flush_zone_state(z.zone_id);
    cap := coalesce(z.burst, z.rate);
    p := ratelimit.period_micros(z.period);
    per_tick := z.rate * ratelimit.period_micros(z.refill_tick);
    -- The part token is below one token (as the calls read it).
    -- p, cap, per_tick and the zone id are $1 to $4.
    EXECUTE format($sql$
    UPDATE %s AS s
    SET tokens = CASE WHEN s.tokens * $1 + least(s.counter, $1 - 1) + $3 >= $2 * $1 THEN $2
                      ELSE div(s.tokens * $1 + least(s.counter, $1 - 1) + $3, $1) END,
        counter = CASE WHEN s.tokens * $1 + least(s.counter, $1 - 1) + $3 >= $2 * $1 THEN 0
                       ELSE mod(s.tokens * $1 + least(s.counter, $1 - 1) + $3, $1) END,
        refill_pending = CASE WHEN s.tokens * $1 + least(s.counter, $1 - 1) + $3 >= $2 * $1 THEN NULL
                              ELSE true END
    WHERE s.zone_id OPERATOR(pg_catalog.=) $4 AND s.refill_pending$sql$, ratelimit.state_table(z.durable))
    USING p, cap, per_tick, z.zone_id;
    GET DIAGNOSTICS refilled = ROW_COUNT;
    RETURN refilled;
END
$fn$;
COMMENT ON FUNCTION rl_cron_refill(text) IS
    'One refill of a cron-refilled zone (what its pg_cron job runs, at most once a tick but for the owner); returns the buckets refilled';

CREATE OR REPLACE FUNCTION rl_citus_setup()
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    fn record;
    distributed regclass[];
    failures text;
BEGIN
    IF NOT EXISTS (SELECT FROM pg_extension WHERE extname = 'citus') THEN
        RAISE EXCEPTION 'Citus is not installed in database "%"', current_database() USING ERRCODE = '55000',
            HINT = 'CREATE EXTENSION citus on every node and add the workers (citus_add_node) first.';
    END IF;
    IF NOT citus_is_coordinator() THEN
        RAISE EXCEPTION 'rl_citus_setup() runs on the Citus coordinator' USING ERRCODE = '55000';
    END IF;
    SELECT array_agg(logicalrelid) INTO distributed FROM pg_dist_partition;
    distributed := coalesce(distributed, '{}');
    -- The zone table's trigger tells each node's sessions of a change; Citus
    -- keeps triggers on its shards only when told so.
    PERFORM set_config('citus.enable_unsafe_triggers', 'on', true);
    IF NOT 'ratelimit.zone'::regclass = ANY (distributed) THEN
        PERFORM create_reference_table('ratelimit.zone');
    END IF;
    -- Each node names the counters of retired zone ids.
    IF NOT 'ratelimit.retired_zone_id'::regclass = ANY (distributed) THEN
        PERFORM create_reference_table('ratelimit.retired_zone_id');
    END IF;
    IF NOT 'ratelimit.state'::regclass = ANY (distributed) THEN
        PERFORM create_distributed_table('ratelimit.state', 'key');
    END IF;
    IF NOT 'ratelimit.durable_state'::regclass = ANY (distributed) THEN
        PERFORM create_distributed_table('ratelimit.durable_state', 'key', colocate_with => 'ratelimit.state');
    END IF;
    IF NOT 'ratelimit.history'::regclass = ANY (distributed) THEN
        -- Kept with the state of its key, which Citus allows only for keys
        -- of the same collation, on every node.
        ALTER TABLE ratelimit.history ALTER COLUMN key TYPE text COLLATE "C";
        SELECT string_agg(format('%s:%s: %s', w.nodename, w.nodeport, w.result), '; ') INTO failures
        FROM run_command_on_workers('ALTER TABLE ratelimit.history ALTER COLUMN key TYPE text COLLATE "C"') w
        WHERE NOT w.success;
        IF failures IS NOT NULL THEN
            RAISE EXCEPTION 'could not prepare ratelimit.history on the workers' USING ERRCODE = '55000',
                DETAIL = failures;
        END IF;
        PERFORM create_distributed_table('ratelimit.history', 'key', colocate_with => 'ratelimit.state');
    END IF;
    -- Not rl_http_guard (nor its rl_http_guard_limit): it reads the
    -- request's headers, which are this session's settings, and runs in
    -- PostgREST's transaction; its shmem zone is decided where it runs.
    FOR fn IN SELECT * FROM (VALUES
            ('rl_limit(text, text, integer)', '$2'),
            ('rl_limit(text[], text, integer)', '$2'),
            ('rl_sliding_window(text, text, integer)', '$2'),
            ('rl_peek(text, text, integer)', '$2'),
            ('rl_reset(text, text)', '$2'),
            ('rl_refund(text, text, integer)', '$2'),
            ('rl_wait(text, text, integer, interval)', '$2'),
            ('rl_acquire(text, text, interval)', '$2'),
            ('rl_token_bucket(text, double precision, double precision, integer)', '$1'),
            ('rl_gcra(text, integer, integer, double precision, integer)', '$1')) AS f(signature, key_arg)
    LOOP
        -- force_delegation: Citus delegates the call inside a transaction
        -- block too, as it does the call that the library forwards there (a
        -- key on another node).  Done again on every run, which sets it on
        -- a function an older version distributed without it.
        PERFORM create_distributed_function(format('%s.%s', '@extschema@', fn.signature)::regprocedure,
                                            fn.key_arg, colocate_with => 'ratelimit.state',
                                            force_delegation => true);
    END LOOP;
END
$fn$;
COMMENT ON FUNCTION rl_citus_setup() IS
    'Citus: distributes the rate-limit state and history by key, makes the zones a reference table, and delegates the calls to the worker that holds their key';

-- The shmem store's save worker: its interval as it applies it (in ms; a
-- reload reaches it a moment after the sessions; NULL while it is not
-- running), when it last wrote the store's file, how many keys and bytes,
-- how long it took (copying, writing, syncing, renaming), and how many
-- saves since the server started (a round with nothing changed writes
-- none).  No row when ratelimit is not preloaded; NULLs before the first
-- save.  Admins only.
CREATE FUNCTION ratelimit.shmem_save_status(
    OUT save_interval_ms int, OUT saved_at timestamptz, OUT keys bigint, OUT bytes bigint,
    OUT save_ms float8, OUT saves bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'rl_shmem_save_status'
LANGUAGE C VOLATILE;

-- The sweep, last: PostgreSQL lets PUBLIC execute every new function.  Take
-- that back, and every other privilege PUBLIC holds, from every function
-- and relation the extension owns, but the two pure functions (rl_headers
-- and rl_client_address read no rate-limit state).  One loop over the
-- extension's members rather than a REVOKE per object: a function added
-- later is covered without anyone remembering to.  test/pgtap/audit.sql
-- checks the result.
DO $do$
DECLARE
    target text;
BEGIN
    FOR target IN SELECT m.target FROM ratelimit.members() m
                  WHERE m.name OPERATOR(pg_catalog.<>) ALL (ARRAY['rl_headers', 'rl_client_address'])
    LOOP
        EXECUTE pg_catalog.format('REVOKE ALL ON %s FROM PUBLIC', target);
    END LOOP;
END
$do$;
