\echo Use "CREATE EXTENSION ratelimit" to load this file. \quit

-- The ratelimit extension: rate limiting as one SQL call.
--
-- This file is the whole install script (the build copies it to
-- ratelimit--<version>.sql); it is one file of over a thousand lines
-- because CREATE EXTENSION runs one script, and the schema reads best where
-- it is defined in one piece.  In order:
--
--   1. The internal schema ratelimit and the tables: state (every key's
--      state), zone (the named policies) and history.
--   2. The token bucket: rl_token_bucket(id, rate, window, cost), which
--      needs no zone, and the view ratelimit.token_bucket of its buckets.
--   3. Zones: their configuration (rl_zone_set, rl_zone_drop), the
--      decision type rl_result, and the calls on a zone (rl_limit,
--      rl_sliding_window, rl_peek, rl_reset), rl_gcra and rl_headers.
--   4. Triggers: rl_limit_trigger, a rate limit on rows.
--   5. Monitoring: the views rl_zones, rl_counters and rl_keys.
--   6. The pg_cron refill mode: rl_cron_refill, rl_cron_enable,
--      rl_cron_disable, and the event trigger that removes the jobs at
--      DROP EXTENSION.
--   7. Garbage collection: rl_gc.
--   8. The HTTP guard: rl_client_address, rl_http_guard (PostgREST's
--      db-pre-request) and its decision, rl_http_guard_limit.
--   9. Privileges: rl_grant and rl_revoke, and the sweep that leaves PUBLIC
--      nothing but the two pure functions.
--
-- The user-facing functions, views and type go to the extension's schema
-- (@extschema@, public by default); everything else to the schema
-- ratelimit.  PUBLIC executes nothing that reads or changes rate-limit
-- state and reads no view of it: PostgreSQL lets PUBLIC execute every new
-- function, and the sweep at the end of this file takes that back from all
-- but rl_headers and rl_client_address (section 9 says why).


-- ===========================================================================
-- 1. The schema ratelimit and the tables
-- ===========================================================================

-- Internal state lives in a schema of its own, which ordinary roles cannot
-- use; the functions go to the extension's schema (public by default).
CREATE SCHEMA ratelimit;
REVOKE ALL ON SCHEMA ratelimit FROM PUBLIC;
COMMENT ON SCHEMA ratelimit IS 'Internal state of the ratelimit extension';

-- One state table for every algorithm.  A row is one key's state in one
-- zone (zone_id 0: rl_token_bucket's ad-hoc buckets; -1: rl_gcra's); the
-- exact sliding window keeps sealed chunks of its log in parts 1 and up.
-- An ad-hoc bucket is named by its id and its parameters, params =
-- 'rate:window' (each float8's shortest exact text): a call with other
-- parameters has a bucket of its own, and cannot refill another caller's.
-- Every other row has params ''.  The primary key starts with the key, so
-- every row of a key shards with it (YugabyteDB) and distributes by key
-- (Citus), and a call is routed by the key alone.
--   UNLOGGED: no WAL per decision; crash recovery empties it, and every key
--     starts afresh (fail-open).  YugabyteDB before 2024.2 refuses UNLOGGED:
--     there it is an ordinary table.
--   fillfactor 50: room on the page for the new version of a row, so the
--     updates stay HOT.
--   COLLATE "C": keys match byte for byte, and comparisons are memcmp.
--   refill_pending: rows the pg_cron refill job must visit (cron buckets
--     below capacity, section 6).  Every other row keeps it NULL and never
--     changes it, so their updates stay HOT.
-- ratelimit.durable_state has the same columns for the zones created with
-- durable => true: a logged table, so their keys survive a crash and reach
-- the streaming standbys (each decision writes WAL, and waits for it at
-- commit unless synchronous_commit is off).
-- The C code reads and writes these columns by position: keep their order.
DO $do$
DECLARE
    columns constant text := $cols$(
            key             text COLLATE "C" NOT NULL,
            zone_id         int NOT NULL DEFAULT 0,
            part            int NOT NULL DEFAULT 0,
            tokens          bigint NOT NULL,
            token_fraction  float8 NOT NULL DEFAULT 0,
            updated_at      timestamptz NOT NULL,
            counter         bigint NOT NULL DEFAULT 0,
            entries         bytea,
            refill_pending  boolean,
            params          text COLLATE "C" NOT NULL DEFAULT '',
            PRIMARY KEY (key, zone_id, part, params)
        )$cols$;
BEGIN
    EXECUTE 'CREATE UNLOGGED TABLE ratelimit.state ' || columns || ' WITH (fillfactor = 50)';
EXCEPTION WHEN feature_not_supported OR syntax_error OR invalid_parameter_value THEN
    RAISE NOTICE 'UNLOGGED tables are refused here (%); ratelimit.state is an ordinary table', SQLERRM;
    EXECUTE 'CREATE TABLE ratelimit.state ' || columns;
END
$do$;
CREATE INDEX state_refill_idx ON ratelimit.state (zone_id) WHERE refill_pending;
COMMENT ON TABLE ratelimit.state IS
    'Rate-limit state: one row per key and zone (part 0), plus sealed sliding-window chunks (parts 1..)';
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

-- Zones: the named policies.  A logged table: policies survive crashes, and
-- pg_dump keeps them (they are the extension's configuration; the state is
-- not).  A zone whose state starts afresh (rl_zone_set's reset) gets a new
-- zone_id from the sequence, so that no session mistakes the old state for
-- the new; ratelimit.retired_zone_id keeps the old id's name.
CREATE SEQUENCE ratelimit.zone_id_seq AS int MINVALUE 1;
CREATE TABLE ratelimit.zone (
    zone_id     int NOT NULL DEFAULT nextval('ratelimit.zone_id_seq') PRIMARY KEY,
    -- A name beginning with "(" is how rl_counters and rl_keys show what
    -- is no zone's: "(rl_token_bucket)", "(rl_gcra)", "(zone id N)".
    zone        text COLLATE "C" NOT NULL UNIQUE
                CHECK (zone <> '' AND octet_length(zone) <= 128 AND left(zone, 1) <> '('),
    algorithm   text NOT NULL
                CHECK (algorithm IN ('token_bucket', 'gcra', 'sliding_window',
                                     'sliding_window_counter', 'fixed_window', 'concurrency')),
    -- requests per period; a fraction for token_bucket and gcra (5.5 per
    -- second is counted as 11 per 2 seconds)
    rate        numeric NOT NULL CHECK (rate > 0),
    period      interval NOT NULL CHECK (period > interval '0'),
    burst       bigint CHECK (burst > 0),
    -- shmem: the keys live in shared memory (needs ratelimit in
    -- shared_preload_libraries), not in ratelimit.state.
    store       text NOT NULL DEFAULT 'table' CHECK (store IN ('table', 'shmem')),
    -- Every request of the zone goes to ratelimit.history.
    history     boolean NOT NULL DEFAULT false,
    -- cron: calls only take tokens, and a pg_cron job refills (section 6).
    refill      text NOT NULL DEFAULT 'inline' CHECK (refill IN ('inline', 'cron')),
    refill_tick interval CHECK (refill_tick > interval '0'),
    -- Shadow (dry-run) mode: decisions are computed, counted and recorded,
    -- and nothing is refused.
    shadow      boolean NOT NULL DEFAULT false,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    -- The keys live in ratelimit.durable_state (logged), not ratelimit.state.
    durable     boolean NOT NULL DEFAULT false CHECK (NOT durable OR store = 'table')
);
ALTER SEQUENCE ratelimit.zone_id_seq OWNED BY ratelimit.zone.zone_id;
COMMENT ON TABLE ratelimit.zone IS 'Rate-limit zones (named policies); change them with rl_zone_set and rl_zone_drop';
COMMENT ON COLUMN ratelimit.zone.refill_tick IS
    'Time between two runs of the zone''s refill job (set by rl_cron_enable); NULL: no job';
SELECT pg_catalog.pg_extension_config_dump('ratelimit.zone', '');
SELECT pg_catalog.pg_extension_config_dump('ratelimit.zone_id_seq', '');

-- The names of zone ids no longer in use (a reset zone's old id, a dropped
-- zone's): rl_counters counts by zone name, and the shared-memory counters
-- of the server's lifetime are kept per id.  Not dumped: the counters start
-- afresh with the server.
CREATE TABLE ratelimit.retired_zone_id (
    zone_id     int PRIMARY KEY,
    zone        text COLLATE "C" NOT NULL,
    retired_at  timestamptz NOT NULL DEFAULT now()
);

-- Every request of a zone with history on: durable, so logged.  txn_id is
-- the deciding transaction's id (rl_result.txn_id), to find its requests.
CREATE TABLE ratelimit.history (
    txn_id      bigint NOT NULL,
    recorded_at timestamptz NOT NULL,
    zone        text NOT NULL,
    key         text NOT NULL,
    cost        int NOT NULL,
    allowed     boolean NOT NULL
);
CREATE INDEX history_zone_key_idx ON ratelimit.history (zone, key, recorded_at);
COMMENT ON TABLE ratelimit.history IS 'Requests of zones with history on, allowed and refused';


-- ===========================================================================
-- 2. The token bucket without a zone: rl_token_bucket
-- ===========================================================================

-- The bucket is named by the call's id and sized by its arguments: it keeps
-- its state in zone 0 of ratelimit.state.
-- Not STRICT: a NULL argument is an error (22004), not a silent NULL.
CREATE FUNCTION rl_token_bucket(
    id       text,
    rate     float8 DEFAULT 2,
    "window" float8 DEFAULT 60,
    cost     int DEFAULT 1)
RETURNS bigint
AS 'MODULE_PATHNAME', 'rl_token_bucket'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION rl_token_bucket(text, float8, float8, int) IS
    'Takes cost tokens from the bucket of id (refill rate per second, capacity rate * window); returns whole tokens left, or -1 when refused';

-- rl_token_bucket's buckets, in the terms of its arguments (id, rate,
-- window: the text of params reads back as the exact float8s).
CREATE VIEW ratelimit.token_bucket AS
SELECT key AS id, tokens, token_fraction, updated_at,
       split_part(params, ':', 1)::float8 AS rate, split_part(params, ':', 2)::float8 AS "window"
FROM ratelimit.state
WHERE zone_id = 0;
COMMENT ON VIEW ratelimit.token_bucket IS
    'rl_token_bucket state: tokens + token_fraction held by each bucket (id, rate, window) at updated_at';


-- ===========================================================================
-- 3. Zones: configuration and decisions
-- ===========================================================================

-- Every session caches zones; a change anywhere tells them all (at commit).
-- The keys of an altered shmem zone are judged idle under its new limit.
CREATE FUNCTION ratelimit.zone_changed() RETURNS trigger
AS 'MODULE_PATHNAME', 'rl_zone_changed'
LANGUAGE C;
CREATE TRIGGER zone_changed
    AFTER INSERT OR UPDATE OR DELETE ON ratelimit.zone
    FOR EACH ROW EXECUTE FUNCTION ratelimit.zone_changed();
CREATE TRIGGER zone_truncated
    AFTER TRUNCATE ON ratelimit.zone
    FOR EACH STATEMENT EXECUTE FUNCTION ratelimit.zone_changed();

-- Tells this node's sessions that the zones changed (at commit).  The
-- trigger does it where it fires; on Citus it fires in the zone table's
-- shards, on the workers, and not on a coordinator that holds none: the
-- functions that change zones call this too.
CREATE FUNCTION ratelimit.zones_changed() RETURNS void
AS 'MODULE_PATHNAME', 'rl_zones_changed'
LANGUAGE C;

-- Checks a definition with the algorithms' own rules (precise SQLSTATEs).
-- A shmem zone needs ratelimit preloaded: refused here, not at its first call.
CREATE FUNCTION ratelimit.check_zone(algorithm text, rate numeric, period interval, burst bigint, store text)
RETURNS void
AS 'MODULE_PATHNAME', 'rl_check_zone'
LANGUAGE C;

-- Drops this transaction's cached copies of a zone's state before it is
-- deleted (and the zone's keys in the shmem store).
CREATE FUNCTION ratelimit.forget_zone_state(zone_id int)
RETURNS void
AS 'MODULE_PATHNAME', 'rl_forget_zone_state'
LANGUAGE C STRICT;

-- The table that keeps a table zone's keys.
CREATE FUNCTION ratelimit.state_table(durable boolean)
RETURNS regclass
LANGUAGE sql STABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT CASE WHEN durable THEN 'ratelimit.durable_state' ELSE 'ratelimit.state' END::regclass
$fn$;

-- Moves a table zone's keys to the other state table (rl_zone_set's
-- durable); returns the rows moved.  Decisions on every table zone wait
-- for the move to commit (the tables' lock); one that looked its zone up
-- before and got the lock after is refused (40001) and takes nothing, so
-- no decision is lost in the move.
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

-- Zones are changed only through these two SECURITY DEFINER functions,
-- which check the definition and keep the zone's state consistent with it.
--
-- rl_zone_set creates a zone, or changes the options a call names and keeps
-- the others (a new zone takes the defaults: burst = rate, store 'table',
-- history, shadow and durable off, refill 'inline').  Keys keep their
-- state under a new rate, burst, period, history or shadow setting, and a
-- change of durable moves them to the other state table.  Another
-- algorithm, store or refill mode cannot read the old state: such a change
-- is refused unless the call passes reset => true, which starts the zone
-- afresh (also with nothing else changed).  Never a silent reset.
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

-- Dropping a zone drops its state and its refill job with it.
CREATE FUNCTION rl_zone_drop(zone text, if_exists boolean DEFAULT false)
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

-- What every call on a zone returns.  would_allow is what the zone's limit
-- decided; allowed differs from it only in shadow mode.  zone, rate and
-- period are the deciding zone's (what the RateLimit headers name).
-- retry_after is NULL when allowed, and (as reset_after) when no time can
-- be promised: a cron zone that no job refills.  The C code builds it by
-- position: keep the order of the attributes.
CREATE TYPE rl_result AS (
    allowed     boolean,
    capacity    bigint,
    remaining   bigint,
    retry_after interval,
    reset_after interval,
    txn_id      bigint,
    would_allow boolean,
    zone        text,
    rate        numeric,
    period      interval
);
COMMENT ON TYPE rl_result IS
    'A rate-limit decision: allowed, capacity, what remains, when to retry (refused only), when the key is full again, the history transaction id, what the limit decided (would_allow; allowed is true in shadow mode), and the deciding zone with its rate per period';

-- The calls on a zone.  Not STRICT: a NULL argument is an error (22004),
-- not a silent NULL.
CREATE FUNCTION rl_limit(zone text, key text, cost int DEFAULT 1)
RETURNS rl_result
AS 'MODULE_PATHNAME', 'rl_limit'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION rl_limit(text, text, int) IS 'Applies the zone''s algorithm to a call of cost on key';

CREATE FUNCTION rl_sliding_window(zone text, key text, cost int DEFAULT 1)
RETURNS rl_result
AS 'MODULE_PATHNAME', 'rl_sliding_window'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION rl_sliding_window(text, text, int) IS
    'Exact sliding window: admitted iff the cost admitted in the trailing period plus cost stays within rate';

CREATE FUNCTION rl_peek(zone text, key text, cost int DEFAULT 1)
RETURNS rl_result
AS 'MODULE_PATHNAME', 'rl_peek'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION rl_peek(text, text, int) IS
    'What rl_limit would return now, without consuming anything or recording history';

CREATE FUNCTION rl_reset(zone text, key text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'rl_reset'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION rl_reset(text, text) IS 'Forgets a key''s state in a zone; true when it had some';

-- rl_limit that waits: a refused call sleeps (on the latch: no lock held,
-- cancel and statement_timeout interrupt it) until its tokens are due, and
-- tries again, until admitted or timeout has passed.  When the tokens would
-- come only after the deadline it returns the refusal at once.  timeout
-- NULL: as long as it takes.  Waiters on one key are served in arrival
-- order when ratelimit is preloaded.
CREATE FUNCTION rl_wait(zone text, key text, cost int DEFAULT 1, timeout interval DEFAULT NULL)
RETURNS rl_result
AS 'MODULE_PATHNAME', 'rl_wait'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION rl_wait(text, text, int, interval) IS
    'rl_limit that sleeps until the call is admitted or timeout has passed (NULL: no timeout); waiters on a key go in arrival order where ratelimit is preloaded';

-- Leases: a concurrency zone (algorithm => 'concurrency') admits rate
-- leases of a key at once; period is a lease's default time to live.
-- rl_acquire takes a slot and returns the lease (NULL when refused, with
-- retry_after until the first held lease lapses); rl_release gives it back.
-- A lease not released lapses by itself after its ttl.  Table store: a
-- rolled-back rl_acquire holds nothing.  Shmem store: a lease goes when the
-- session that took it ends.  The C code builds rl_lease by position.
CREATE TYPE rl_lease AS (
    lease       text,
    allowed     boolean,
    slots       bigint,
    remaining   bigint,
    retry_after interval,
    expires_at  timestamptz,
    txn_id      bigint,
    would_allow boolean,
    zone        text
);
COMMENT ON TYPE rl_lease IS
    'A lease of a concurrency zone: the lease to pass to rl_release (NULL when refused), allowed, the zone''s slots and how many are free, when to retry (refused only), when the lease lapses, the history transaction id, what the limit decided (would_allow), the zone';

CREATE FUNCTION rl_acquire(zone text, key text, ttl interval DEFAULT NULL)
RETURNS rl_lease
AS 'MODULE_PATHNAME', 'rl_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION rl_acquire(text, text, interval) IS
    'Takes one of the concurrency zone''s slots for key until rl_release, or until ttl (NULL: the zone''s period, also the longest) has passed; refused when every slot is held';

CREATE FUNCTION rl_release(lease text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'rl_release'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION rl_release(text) IS
    'Gives back the slot of a lease rl_acquire returned; false when it had lapsed or was released already';

-- Several limits, one decision: admitted only if every zone admits, and
-- when one refuses none is charged.  The result is the most restrictive
-- zone's: of the refusing zones the longest wait, else the fewest left.
CREATE FUNCTION rl_limit(zones text[], key text, cost int DEFAULT 1)
RETURNS rl_result
AS 'MODULE_PATHNAME', 'rl_limit_zones'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION rl_limit(text[], text, int) IS
    'One call of cost on key against several zones: admitted only if every zone admits; when one refuses, none is charged';

-- Gives back cost the key was charged ("don't count failed requests"),
-- never beyond a full allowance.  Returns what rl_peek(zone, key, 0) sees
-- afterwards.
CREATE FUNCTION rl_refund(zone text, key text, cost int DEFAULT 1)
RETURNS rl_result
AS 'MODULE_PATHNAME', 'rl_refund'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION rl_refund(text, text, int) IS
    'Gives cost back to key in zone (never above its capacity); returns what the key has afterwards';

-- redis-cell's CL.THROTTLE without a zone: the limit comes with the call,
-- and the state lives in zone -1 of ratelimit.state.
CREATE FUNCTION rl_gcra(key text, max_burst int, count int, period float8, quantity int DEFAULT 1)
RETURNS rl_result
AS 'MODULE_PATHNAME', 'rl_gcra'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION rl_gcra(text, int, int, float8, int) IS
    'redis-cell''s CL.THROTTLE key max_burst count period quantity; capacity is max_burst + 1';

-- The response headers of the IETF draft (draft-ietf-httpapi-ratelimit-
-- headers-09 and -10):
--   RateLimit-Policy: "<zone>";q=<quota>;w=<window in seconds>
--   RateLimit: "<zone>";r=<remaining>;t=<seconds until the key is full again>
-- and, when refused, Retry-After (seconds).  q and w are whole numbers: a
-- zone of 5.5 per second is q=11;w=2, of 10 per 500 ms q=20;w=1.  Seconds
-- are rounded up.  legacy => true adds draft-06's RateLimit-Limit (the
-- capacity), RateLimit-Remaining and RateLimit-Reset, which older clients
-- read.  Reads no state: PUBLIC may execute it.  It refuses values no
-- rate-limit function returns (a negative count or time, more remaining
-- than the capacity, a rate no zone takes, a zone name longer than any
-- zone's): headers built from them would tell a client something false,
-- and PUBLIC must not be able to make it work for long.  Linear in the
-- zone name, which it encodes once.
CREATE FUNCTION rl_headers(result rl_result, legacy boolean DEFAULT false)
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    name_bytes bytea := convert_to(coalesce(result.zone, 'default'), 'UTF8');
    policy_name text;
    period_us numeric;
    multiplier numeric;
    rate_denominator numeric;
    headers jsonb;
BEGIN
    IF result.capacity < 0 OR result.remaining < 0 OR result.remaining > result.capacity
       OR result.reset_after < interval '0' OR result.retry_after < interval '0'
       OR result.rate <= 0 OR result.period <= interval '0' THEN
        RAISE EXCEPTION 'rl_headers() got an impossible rate-limit result'
            USING ERRCODE = '22023',
                  DETAIL = format('capacity %s, remaining %s, reset_after %s, retry_after %s, rate %s, period %s: '
                                  'counts and times are never negative, remaining is at most the capacity, '
                                  'and a rate and its period are positive.',
                                  result.capacity, result.remaining, result.reset_after, result.retry_after,
                                  result.rate, result.period);
    END IF;
    -- What rl_zone_set accepts: a name of at most 128 bytes, a rate of at
    -- most 2^53 with at most 6 decimals, a period of at most 2^53 us.
    IF octet_length(name_bytes) > 128 THEN
        RAISE EXCEPTION 'rl_headers() got a zone name of more than 128 bytes'
            USING ERRCODE = '22001',
                  DETAIL = format('It has %s bytes: no zone has such a name.', octet_length(name_bytes));
    END IF;
    IF result.rate > 9007199254740992 OR scale(result.rate) > 6 THEN
        RAISE EXCEPTION 'rl_headers() got a rate no zone has'
            USING ERRCODE = '22023',
                  DETAIL = 'A zone''s rate is at most 2^53, with at most 6 decimals.';
    END IF;
    -- A structured-field string holds printable ASCII; \ and " are escaped,
    -- other bytes (and %) percent-encoded, so that every name stays itself.
    SELECT '"' || coalesce(string_agg(
               CASE WHEN b BETWEEN 32 AND 126 AND b <> 37 THEN
                        CASE WHEN b IN (34, 92) THEN '\' ELSE '' END || chr(b)
                    ELSE '%' || upper(lpad(to_hex(b), 2, '0')) END, '' ORDER BY i), '') || '"'
    INTO policy_name
    FROM (SELECT i, get_byte(name_bytes, i) AS b FROM generate_series(0, octet_length(name_bytes) - 1) AS i) bytes;
    -- The smallest multiple of the period in whole seconds over which the
    -- rate is a whole number of requests.
    IF result.rate IS NOT NULL AND result.period IS NOT NULL THEN
        -- As ratelimit.period_micros counts it (a month is 30 days), written
        -- out: PUBLIC, which may run this function, cannot use that schema.
        period_us := (extract(year FROM result.period) * 12 + extract(month FROM result.period)) * 30 * 86400000000
                     + extract(day FROM result.period) * 86400000000
                     + (extract(hour FROM result.period) * 3600 + extract(minute FROM result.period) * 60) * 1000000
                     + extract(microseconds FROM result.period);
        IF period_us > 9007199254740992 THEN
            RAISE EXCEPTION 'rl_headers() got a period no zone has'
                USING ERRCODE = '22023',
                      DETAIL = 'A zone''s period is at most 2^53 microseconds (285 years).';
        END IF;
        rate_denominator := power(10::numeric, scale(result.rate))
                            / gcd(result.rate * power(10::numeric, scale(result.rate)),
                                  power(10::numeric, scale(result.rate)));
        multiplier := 1000000 / gcd(period_us, 1000000);
        multiplier := multiplier * rate_denominator / gcd(multiplier, rate_denominator);
    END IF;
    headers := jsonb_build_object(
        'RateLimit-Policy', CASE WHEN multiplier IS NOT NULL THEN
            policy_name || ';q=' || trunc(result.rate * multiplier)::text
                        || ';w=' || trunc(period_us * multiplier / 1000000)::text END,
        -- r is required; t is left out where no time can be promised (a
        -- cron zone that no job refills).
        'RateLimit', policy_name || ';r=' || result.remaining::text
                     || coalesce(';t=' || ceil(extract(epoch FROM result.reset_after))::bigint::text, ''),
        'Retry-After', CASE WHEN NOT result.allowed
                            THEN ceil(extract(epoch FROM result.retry_after))::bigint::text END);
    IF legacy THEN
        headers := headers || jsonb_build_object(
            'RateLimit-Limit', result.capacity::text,
            'RateLimit-Remaining', result.remaining::text,
            'RateLimit-Reset', ceil(extract(epoch FROM result.reset_after))::bigint::text);
    END IF;
    RETURN jsonb_strip_nulls(headers);
END
$fn$;
COMMENT ON FUNCTION rl_headers(rl_result, boolean) IS
    'The IETF draft''s RateLimit-Policy and RateLimit headers (and Retry-After when refused) for an rl_result, as a JSON object; legacy => true adds draft-06''s RateLimit-Limit, -Remaining and -Reset';


-- ===========================================================================
-- 4. Triggers: a rate limit on rows
-- ===========================================================================

-- BEFORE INSERT OR UPDATE ... FOR EACH ROW EXECUTE FUNCTION
-- rl_limit_trigger('zone', 'key_column' [, 'cost_column']): a row over the
-- limit raises SQLSTATE RL429.
CREATE FUNCTION rl_limit_trigger()
RETURNS trigger
AS 'MODULE_PATHNAME', 'rl_limit_trigger'
LANGUAGE C;
COMMENT ON FUNCTION rl_limit_trigger() IS
    'Row trigger: each inserted or updated row is a call on the zone (trigger arguments: zone, key column, optional cost column); a row over the limit raises SQLSTATE RL429';


-- ===========================================================================
-- 5. Monitoring: rl_zones, rl_counters, rl_keys
-- ===========================================================================
-- A view checks EXECUTE on the functions it calls against its reader: the
-- views below call SECURITY DEFINER functions of the schema ratelimit
-- (counters(), keys()), never the C functions that read shared memory or
-- the state table.  A monitoring role needs SELECT on the views and EXECUTE
-- on those two functions: rl_grant(role, 'monitor') grants them.

CREATE VIEW rl_zones AS
SELECT zone, algorithm, rate, period,
       -- a fractional rate's capacity: its whole requests, at least one
       coalesce(burst, greatest(1, floor(rate)))::bigint AS capacity, burst, store, history,
       created_at, updated_at, refill, refill_tick, shadow, durable
FROM ratelimit.zone;
COMMENT ON VIEW rl_zones IS 'Rate-limit zones';

-- Counters in shared memory, per zone: no row that every call updates.
CREATE FUNCTION ratelimit.shmem_counters(
    OUT zone_id int, OUT allowed bigint, OUT refused bigint, OUT evicted bigint, OUT full bigint,
    OUT forgiven bigint, OUT keys bigint, OUT unkeyed bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'rl_shmem_counters'
LANGUAGE C VOLATILE;

-- Decisions per zone since the server started (both stores; empty unless
-- ratelimit is in shared_preload_libraries).  evicted: keys the shmem store
-- forgot to make room; forgiven: the tokens they were missing (at most that
-- many calls more were let through); full: new keys it found no room for;
-- keys: the keys it holds now; unkeyed: requests rl_http_guard refused for
-- want of a client address to key them by.  By zone name: the counts of a zone's
-- earlier ids (before a reset, or a drop and a new zone of the same name)
-- add up under it.
CREATE FUNCTION ratelimit.node_counters(
    OUT zone text, OUT allowed bigint, OUT refused bigint, OUT evicted bigint, OUT full bigint,
    OUT forgiven bigint, OUT keys bigint, OUT unkeyed bigint)
RETURNS SETOF record
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT coalesce(z.zone, r.zone, CASE c.zone_id WHEN 0 THEN '(rl_token_bucket)'
                                                   WHEN -1 THEN '(rl_gcra)'
                                                   ELSE '(zone id ' || c.zone_id || ')' END),
           sum(c.allowed)::bigint, sum(c.refused)::bigint, sum(c.evicted)::bigint, sum(c.full)::bigint,
           sum(c.forgiven)::bigint, sum(c.keys)::bigint, sum(c.unkeyed)::bigint
    FROM ratelimit.shmem_counters() c
    LEFT JOIN ratelimit.zone z ON z.zone_id OPERATOR(pg_catalog.=) c.zone_id
    LEFT JOIN ratelimit.retired_zone_id r ON r.zone_id OPERATOR(pg_catalog.=) c.zone_id
    GROUP BY 1
$fn$;

-- On Citus: what query (one JSON array) gives on every node, an element a
-- row.  A node that cannot be reached is named in a WARNING.
CREATE FUNCTION ratelimit.on_every_node(query text)
RETURNS SETOF json
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    node record;
BEGIN
    FOR node IN SELECT r.nodeid, r.success, r.result FROM run_command_on_all_nodes(query) r LOOP
        IF node.success THEN
            RETURN QUERY SELECT json_array_elements(node.result::json);
        ELSE
            RAISE WARNING 'Citus node % could not be read: %', node.nodeid, node.result;
        END IF;
    END LOOP;
END
$fn$;

-- On Citus each node counts what it decided: the counters of every node,
-- added up.
CREATE FUNCTION ratelimit.counters(
    OUT zone text, OUT allowed bigint, OUT refused bigint, OUT evicted bigint, OUT full bigint,
    OUT forgiven bigint, OUT keys bigint, OUT unkeyed bigint)
RETURNS SETOF record
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF NOT ratelimit.state_is_distributed() THEN
        RETURN QUERY SELECT * FROM ratelimit.node_counters();
        RETURN;
    END IF;
    RETURN QUERY
    SELECT c.zone, sum(c.allowed)::bigint, sum(c.refused)::bigint, sum(c.evicted)::bigint, sum(c."full")::bigint,
           sum(c.forgiven)::bigint, sum(c.keys)::bigint, sum(c.unkeyed)::bigint
    FROM ratelimit.on_every_node('SELECT coalesce(json_agg(c), ''[]'') FROM ratelimit.node_counters() c') n,
         json_to_record(n) AS c(zone text, allowed bigint, refused bigint, evicted bigint, "full" bigint,
                                forgiven bigint, keys bigint, unkeyed bigint)
    GROUP BY c.zone;
END
$fn$;

CREATE VIEW rl_counters AS SELECT * FROM ratelimit.counters();
COMMENT ON VIEW rl_counters IS
    'Allowed and refused calls per zone since the server started, the shmem store''s evictions, the tokens they forgave, its full refusals and the keys it holds, and the requests rl_http_guard found no client address for';

-- The shmem store's keys of this database, as a call of cost 0 sees them.
CREATE FUNCTION ratelimit.shmem_keys(
    OUT zone_id int, OUT key text, OUT capacity bigint, OUT remaining bigint,
    OUT reset_after interval, OUT updated_at timestamptz)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'rl_shmem_keys'
LANGUAGE C VOLATILE;

-- The set of the shmem store a key of a zone (its id; 0 rl_token_bucket,
-- -1 rl_gcra) of this database belongs to once the store is fully grown:
-- where the server's secret puts it, which callers cannot predict.  For tests and diagnosis, the owner's
-- only: whoever can ask it can choose keys that share a set.
CREATE FUNCTION ratelimit.shmem_placement(zone_id int, key text)
RETURNS int
AS 'MODULE_PATHNAME', 'rl_shmem_placement'
LANGUAGE C VOLATILE STRICT;

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

-- Every key with state, on both stores, and what it has left now.  Zones'
-- keys show what rl_peek shows for cost 0; rl_token_bucket's buckets on the
-- table store their capacity (rate * window, from params) and their tokens
-- as of updated_at; rl_gcra's nothing.  updated_at is the state's own
-- time (the last decision for buckets, the window's start for windows, the
-- theoretical arrival time for gcra).  SECURITY DEFINER: a reader granted
-- SELECT on rl_keys and EXECUTE on this function needs no access to the
-- state table.
CREATE FUNCTION ratelimit.state_is_distributed() RETURNS boolean
AS 'MODULE_PATHNAME', 'rl_state_is_distributed'
LANGUAGE C STABLE;

-- The shmem keys of this node, with their zones' names.
CREATE FUNCTION ratelimit.node_shmem_keys(
    OUT zone text, OUT key text, OUT capacity bigint, OUT remaining bigint,
    OUT reset_after interval, OUT updated_at timestamptz)
RETURNS SETOF record
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT coalesce(z.zone, CASE k.zone_id WHEN 0 THEN '(rl_token_bucket)'
                                           WHEN -1 THEN '(rl_gcra)' END),
           k.key, k.capacity, k.remaining, k.reset_after, k.updated_at
    FROM ratelimit.shmem_keys() k
    LEFT JOIN ratelimit.zone z ON z.zone_id OPERATOR(pg_catalog.=) k.zone_id
$fn$;

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

CREATE FUNCTION ratelimit.keys(
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

CREATE VIEW rl_keys AS SELECT * FROM ratelimit.keys();
COMMENT ON VIEW rl_keys IS
    'Keys with rate-limit state, per zone and store, with what they have left now (admins only)';

-- The leases held now, in both stores (the nonces stay hidden: a reader of
-- the view cannot release them).  holder_pid: the session a shmem lease
-- goes with.
CREATE FUNCTION ratelimit.lease_list(
    OUT zone_id int, OUT key text, OUT expires_at timestamptz, OUT holder_pid int, OUT store text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'rl_leases'
LANGUAGE C VOLATILE;

CREATE FUNCTION ratelimit.leases(
    OUT zone text, OUT key text, OUT expires_at timestamptz, OUT holder_pid int, OUT store text)
RETURNS SETOF record
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT z.zone, l.key, l.expires_at, l.holder_pid, l.store
    FROM ratelimit.lease_list() l
    JOIN ratelimit.zone z ON z.zone_id OPERATOR(pg_catalog.=) l.zone_id
    ORDER BY z.zone, l.key, l.expires_at
$fn$;

CREATE VIEW rl_leases AS SELECT * FROM ratelimit.leases();
COMMENT ON VIEW rl_leases IS
    'Leases of concurrency zones held now: zone, key, when each lapses, the session a shmem lease goes with (admins only)';


-- ===========================================================================
-- 6. The pg_cron refill mode
-- ===========================================================================
-- A token_bucket zone with refill => 'cron': calls only take tokens, and a
-- pg_cron job runs rl_cron_refill(zone) every tick.  Only the buckets below
-- capacity are visited (ratelimit.state.refill_pending and its partial
-- index).

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
CREATE FUNCTION ratelimit.cron_plan(pg_cron_version text, rate numeric, period interval,
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

-- The decision clock (ratelimit.now_override, else the wall clock): what
-- rl_cron_refill meters its runs by.
CREATE FUNCTION ratelimit.clock()
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'rl_clock'
LANGUAGE C VOLATILE;

-- When each cron zone's next refill is due.  rl_cron_refill meters the runs
-- of the job's role (and of whoever else logs in as it) as gcra meters
-- calls: a refill makes the next one due a tick after this one was due (or
-- after now, if that is later), and a run more than half a tick before
-- that refills nothing.  So however often it is called, it never refills
-- faster than the schedule: in any stretch of time, at most one refill
-- more than the ticks in it.  The half tick absorbs the scheduler's
-- delays.  Removed with the zone's job (ratelimit.unschedule_refill).
CREATE TABLE ratelimit.cron_refill_due (
    zone_id int PRIMARY KEY,
    due_at  timestamptz NOT NULL
);

-- One refill: every bucket of the zone below capacity gets
-- rate * tick / period tokens, up to capacity; the part token carries over
-- exactly (in units of 1 / period microseconds).  Full buckets are not in
-- the partial index and are not touched.  Returns the buckets refilled (0
-- for a metered run that came too early).
-- SECURITY DEFINER: the job's role holds EXECUTE on this function and no
-- privilege on any table, so whoever logs in as it can do no more than the
-- job does, as often as the schedule would.  A session of the extension's
-- owner (a member of its role, a superuser) is not metered: it may write
-- the state anyway, and a refill by hand is its way to catch up.
CREATE FUNCTION rl_cron_refill(zone text)
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

-- pg_cron keeps job names as type name (63 bytes).  A zone's job is named
-- by the zone's id, which no name a zone manager chooses can forge (by
-- name, a long name's 'ratelimit_refill:md5:<md5>' was also the job of a
-- zone named 'md5:<md5>').  An id is the zone's until a drop or a reset,
-- which remove its job.
CREATE FUNCTION ratelimit.cron_job_name(zone_id int)
RETURNS text
LANGUAGE sql IMMUTABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT 'ratelimit_refill:' || zone_id::text
$fn$;

-- Removes the refill jobs of a zone id, if pg_cron is installed here, and
-- when its next refill is due; returns how many jobs.  Its callers are
-- SECURITY DEFINER: a schema named cron that is not pg_cron's (anyone with
-- CREATE on the database can make one) is ignored.
CREATE FUNCTION ratelimit.unschedule_refill(zone_id int)
RETURNS int
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    removed int := 0;
    job bigint;
BEGIN
    DELETE FROM ratelimit.cron_refill_due d WHERE d.zone_id OPERATOR(pg_catalog.=) unschedule_refill.zone_id;
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
               USING ratelimit.cron_job_name(zone_id)
    LOOP
        EXECUTE 'SELECT cron.unschedule($1)' USING job;
        removed := removed + 1;
    END LOOP;
    RETURN removed;
END
$fn$;

-- The version of a pg_cron that can run this database's refill jobs:
-- loaded, running its jobs from this database, and installed here.
CREATE FUNCTION ratelimit.pg_cron_version()
RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    cron_database text := current_setting('cron.database_name', true);
    cron_version text;
BEGIN
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
    RETURN cron_version;
END
$fn$;

-- Schedules the zone's refill job, run as run_as, and grants that role
-- what the refill needs and nothing more: EXECUTE on rl_cron_refill.
CREATE FUNCTION rl_cron_enable(zone text, run_as name DEFAULT 'ratelimit_refill')
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    z ratelimit.zone;
    cron_version text;
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
    cron_version := ratelimit.pg_cron_version();
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = run_as) THEN
        RAISE EXCEPTION 'role "%" does not exist', left(run_as, 128) || CASE WHEN length(run_as) > 128 THEN '...' ELSE '' END USING ERRCODE = '42704',
            HINT = format('CREATE ROLE %s LOGIN; rl_cron_enable grants it only what the refill needs.',
                          quote_ident(left(run_as, 128) || CASE WHEN length(run_as) > 128 THEN '...' ELSE '' END));
    END IF;

    plan := ratelimit.cron_plan(cron_version, z.rate, z.period);

    -- What the refill needs, and nothing more: the job calls rl_cron_refill
    -- (SECURITY DEFINER, metered: no faster than the schedule), by its
    -- schema's name.  No privilege on any table, nor on schema ratelimit.
    -- @extschema@ comes quoted already.
    EXECUTE format('GRANT USAGE ON SCHEMA %s TO %I', '@extschema@', run_as);
    EXECUTE format('GRANT EXECUTE ON FUNCTION %s.rl_cron_refill(text) TO %I', '@extschema@', run_as);

    -- Also starts the meter afresh: the new tick may be shorter.
    PERFORM ratelimit.unschedule_refill(z.zone_id);
    EXECUTE 'SELECT cron.schedule($1, $2, $3)' INTO job
        USING ratelimit.cron_job_name(z.zone_id), plan.schedule,
              format('SELECT %s.rl_cron_refill(%L)', '@extschema@', zone);
    EXECUTE 'SELECT cron.alter_job(job_id => $1, username => $2)' USING job, run_as::text;
    UPDATE ratelimit.zone AS zz SET refill_tick = plan.tick WHERE zz.zone_id = z.zone_id;
    PERFORM ratelimit.zones_changed();
    RETURN job;
END
$fn$;
COMMENT ON FUNCTION rl_cron_enable(text, name) IS
    'Schedules the pg_cron job that refills a cron-refilled zone, run as run_as; returns its job id';

CREATE FUNCTION rl_cron_disable(zone text)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    id int;
    removed int;
BEGIN
    IF zone IS NULL THEN
        RAISE EXCEPTION 'zone must not be null' USING ERRCODE = '22004';
    END IF;
    SELECT zz.zone_id INTO id FROM ratelimit.zone AS zz WHERE zz.zone = rl_cron_disable.zone FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'rate-limit zone "%" does not exist', left(zone, 128) || CASE WHEN length(zone) > 128 THEN '...' ELSE '' END USING ERRCODE = '42704';
    END IF;
    removed := ratelimit.unschedule_refill(id);
    UPDATE ratelimit.zone AS zz SET refill_tick = NULL WHERE zz.zone_id = id;
    PERFORM ratelimit.zones_changed();
    RETURN removed > 0;
END
$fn$;
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


-- ===========================================================================
-- 7. Garbage collection
-- ===========================================================================

-- Removes the state of keys that have fully recovered (a recovered key
-- decides exactly as a new one), and of dropped zones.  rl_token_bucket's
-- and rl_gcra's buckets record no limit: they go only when max_window is
-- given and they were last written longer ago.  It leaves ratelimit.history
-- alone.
CREATE FUNCTION rl_gc(zone text DEFAULT NULL, max_window interval DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'rl_gc'
LANGUAGE C;
COMMENT ON FUNCTION rl_gc(text, interval) IS
    'Deletes the state of keys that have fully recovered (of one zone, or all and dropped zones); returns how many keys';


-- ===========================================================================
-- 8. The HTTP guard
-- ===========================================================================

-- The client's address as the trusted proxies wrote it: the entry
-- trusted_proxies from the right of X-Forwarded-For (or of Forwarded,
-- RFC 7239), normalised; NULL when there is none to trust.  Reads no
-- rate-limit state: PUBLIC may execute it.
CREATE FUNCTION rl_client_address(x_forwarded_for text, forwarded text,
                                  trusted_proxies int DEFAULT NULL,
                                  proxy_header text DEFAULT NULL)
RETURNS inet
AS 'MODULE_PATHNAME', 'rl_client_address'
LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION rl_client_address(text, text, int, text) IS
    'The client address the trusted proxies appended (counted from the right; NULL arguments: ratelimit.trusted_proxies and ratelimit.proxy_header), or NULL when there is none to trust';

-- rl_http_guard's decision, in C: rl_limit(zone, key) on a zone whose
-- charge survives the request's rollback (a shmem zone without history;
-- 55000 otherwise), keyed by key, else by 'ip:' and the client's network
-- from request_headers (IPv4: the address; IPv6: its /ipv6_prefix); a
-- request with neither is refused with a 400 (PostgREST's PGRST, or PT400)
-- and counted in rl_counters.unkeyed.  On Citus, decided on this node.
-- In the 'limit' set: the guard runs as the request's role.
CREATE FUNCTION rl_http_guard_limit(zone text, key text, request_headers jsonb,
                                    trusted_proxies int, proxy_header text, ipv6_prefix int)
RETURNS rl_result
AS 'MODULE_PATHNAME', 'rl_http_guard_limit'
LANGUAGE C;
COMMENT ON FUNCTION rl_http_guard_limit(text, text, jsonb, int, text, int) IS
    'rl_http_guard''s decision: rl_limit on a shmem zone without history, keyed by key or by the client network the trusted proxies appended to request_headers; refuses a request with neither (HTTP 400)';

-- PostgREST's db-pre-request hook (and Supabase's): one call per request,
-- keyed by the JWT subject (PostgREST verified its signature), else the
-- client address the trusted proxies appended (an IPv6 client by its
-- network), else refused (HTTP 400).  The RateLimit headers go into
-- response.headers; a refusal raises PostgREST's PGRST error, which
-- becomes a 429 carrying Retry-After and the RateLimit headers
-- (ratelimit.guard_error = 'pt429': a bare PT429 instead).  The zone must
-- be a shmem zone without history: the charge must survive the request's
-- rollback, or a failed request would be free.
CREATE FUNCTION rl_http_guard(zone text, key text DEFAULT NULL,
                              trusted_proxies int DEFAULT NULL,
                              proxy_header text DEFAULT NULL,
                              ipv6_prefix int DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    k text := key;
    claims jsonb;
    request_headers jsonb;
    result @extschema@.rl_result;
    headers jsonb;
    response jsonb;
    message text;
    detail text;
    hint constant text := 'Wait for the Retry-After header''s seconds before the next request.';
BEGIN
    IF zone IS NULL THEN
        RAISE EXCEPTION 'zone must not be null' USING ERRCODE = '22004';
    END IF;
    IF k IS NULL THEN
        BEGIN
            claims := nullif(current_setting('request.jwt.claims', true), '')::jsonb;
        EXCEPTION WHEN invalid_text_representation THEN
            claims := NULL;     -- not PostgREST's JSON: no subject
        END;
        IF jsonb_typeof(claims) = 'object' THEN
            k := 'sub:' || (claims ->> 'sub');
        END IF;
    END IF;
    IF k IS NULL THEN
        BEGIN
            request_headers := nullif(current_setting('request.headers', true), '')::jsonb;
        EXCEPTION WHEN invalid_text_representation THEN
            request_headers := NULL;    -- no address: refused
        END;
    END IF;
    -- A subject can be longer than a key may be.
    IF octet_length(k) > 1024 THEN
        k := 'md5:' || md5(k);
    END IF;

    result := @extschema@.rl_http_guard_limit(zone, k, request_headers, trusted_proxies, proxy_header,
                                              ipv6_prefix);
    headers := @extschema@.rl_headers(result);

    IF NOT result.allowed THEN
        message := format('rate limit of zone "%s" exceeded', zone);
        detail := format('Retry after %s s.', ceil(extract(epoch FROM result.retry_after))::bigint);
        IF current_setting('ratelimit.guard_error') = 'pt429' THEN
            RAISE EXCEPTION USING ERRCODE = 'PT429', MESSAGE = message, DETAIL = detail, HINT = hint;
        END IF;
        -- PostgREST takes the response from the error: MESSAGE is the body,
        -- DETAIL the status and headers.
        RAISE EXCEPTION USING ERRCODE = 'PGRST',
            MESSAGE = jsonb_build_object('code', 'RL429', 'message', message,
                                         'details', detail, 'hint', hint)::text,
            DETAIL = jsonb_build_object(
                'status', 429,
                'status_text', 'Too Many Requests',
                'headers', headers)::text;
    END IF;

    -- PostgREST's format: an array of one-header objects.  Keep what was
    -- set before, but the RateLimit headers of an earlier guard call: the
    -- latest decision replaces them.
    SELECT coalesce(jsonb_agg(jsonb_build_object(h.key, h.value) ORDER BY h.key), '[]'::jsonb)
    INTO response
    FROM jsonb_each_text(headers) h;
    BEGIN
        SELECT coalesce(jsonb_agg(e.header), '[]'::jsonb) || response
        INTO response
        FROM jsonb_array_elements(coalesce(nullif(current_setting('response.headers', true), '')::jsonb,
                                           '[]'::jsonb)) e(header)
        WHERE NOT (jsonb_typeof(e.header) = 'object'
                   AND e.header ?| ARRAY['RateLimit-Policy', 'RateLimit', 'RateLimit-Limit',
                                         'RateLimit-Remaining', 'RateLimit-Reset', 'Retry-After']);
    EXCEPTION WHEN invalid_text_representation OR invalid_parameter_value THEN
        NULL;                   -- unreadable earlier headers: ours alone
    END;
    PERFORM set_config('response.headers', response::text, true);
END
$fn$;
COMMENT ON FUNCTION rl_http_guard(text, text, int, text, int) IS
    'For PostgREST''s db-pre-request: rate-limits the request by JWT subject or by the client address (IPv6: network) the trusted proxies appended, on a shmem zone, sets the RateLimit headers, and refuses with HTTP 429 and Retry-After (HTTP 400 without a subject or an address)';


-- ===========================================================================
-- 8b. Citus
-- ===========================================================================
-- Run once on the coordinator, after CREATE EXTENSION citus and ratelimit
-- and the workers' citus_add_node: the state and the history are distributed
-- by key (a key's rows, and its calls, on one worker), the zones become a
-- reference table (on every node, and a change seen by every session), and
-- every function that takes a key is delegated to the worker that holds it.
-- Running it again distributes only what is not distributed yet (and marks
-- the functions for delegation inside transaction blocks).
CREATE FUNCTION rl_citus_setup()
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


-- ===========================================================================
-- 9. Privileges
-- ===========================================================================
-- Least privilege.  PostgREST and Supabase publish every function that a
-- request's role may execute as /rpc/...: a function PUBLIC may execute is
-- callable by any stranger.  So PUBLIC executes nothing that reads or
-- changes rate-limit state, and reads no view of it; the owner grants the
-- decision functions (and, separately, the monitoring views) to the roles
-- that need them, with rl_grant.

-- What each privilege set of rl_grant and rl_revoke covers: the names of
-- functions and views of the extension (every overload of a name).
CREATE FUNCTION ratelimit.privilege_set(privileges text)
RETURNS text[]
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    CASE privileges
    WHEN 'limit' THEN
        RETURN ARRAY['rl_limit', 'rl_token_bucket', 'rl_sliding_window', 'rl_gcra', 'rl_peek',
                     'rl_http_guard', 'rl_http_guard_limit', 'rl_limit_trigger', 'rl_acquire', 'rl_release'];
    WHEN 'wait' THEN
        -- Not with 'limit': a call that sleeps holds its connection, and
        -- behind PostgREST a stranger calling it could hold them all.
        RETURN ARRAY['rl_wait'];
    WHEN 'refund' THEN
        -- Not with 'limit': a role that may refund its own key is not
        -- limited at all (PostgREST publishes every function it may run).
        RETURN ARRAY['rl_refund'];
    WHEN 'monitor' THEN
        -- The views call these as their reader: it needs EXECUTE on them.
        RETURN ARRAY['rl_zones', 'rl_counters', 'rl_keys', 'rl_leases', 'counters', 'keys', 'leases'];
    ELSE
        RAISE EXCEPTION 'unknown privilege set "%"', left(privileges, 128)
            USING ERRCODE = '22023',
                  HINT = 'Use ''limit'' (the decision functions), ''wait'' (rl_wait), ''refund'' (rl_refund) or ''monitor'' (the views rl_zones, rl_counters, rl_keys and rl_leases).';
    END CASE;
END
$fn$;

-- Every function and relation the extension owns, by name, as a GRANT or
-- REVOKE target ('FUNCTION public.rl_limit(text,text,integer)', 'TABLE
-- rl_zones', 'SEQUENCE ratelimit.zone_id_seq').  The privilege audit test
-- (test/pgtap/audit.sql) reads the same catalogs on its own.
CREATE FUNCTION ratelimit.members(OUT name name, OUT target text)
RETURNS SETOF record
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT p.proname, 'FUNCTION ' || p.oid::regprocedure::text
    FROM pg_depend d
    JOIN pg_proc p ON p.oid OPERATOR(pg_catalog.=) d.objid
    WHERE d.classid OPERATOR(pg_catalog.=) 'pg_proc'::regclass
      AND d.refclassid OPERATOR(pg_catalog.=) 'pg_extension'::regclass
      AND d.refobjid OPERATOR(pg_catalog.=) (SELECT e.oid FROM pg_extension e
                                             WHERE e.extname OPERATOR(pg_catalog.=) 'ratelimit')
      AND d.deptype OPERATOR(pg_catalog.=) 'e'
    UNION ALL
    SELECT c.relname, CASE c.relkind WHEN 'S' THEN 'SEQUENCE ' ELSE 'TABLE ' END || c.oid::regclass::text
    FROM pg_depend d
    JOIN pg_class c ON c.oid OPERATOR(pg_catalog.=) d.objid
    WHERE d.classid OPERATOR(pg_catalog.=) 'pg_class'::regclass
      AND d.refclassid OPERATOR(pg_catalog.=) 'pg_extension'::regclass
      AND d.refobjid OPERATOR(pg_catalog.=) (SELECT e.oid FROM pg_extension e
                                             WHERE e.extname OPERATOR(pg_catalog.=) 'ratelimit')
      AND d.deptype OPERATOR(pg_catalog.=) 'e'
$fn$;

-- GRANT or REVOKE the privilege set to or from grantee, and for GRANT
-- USAGE on the extension's schema when the role lacks it.  The callers
-- have checked that the caller owns the extension.
CREATE FUNCTION ratelimit.change_privileges(verb text, grantee regrole, privileges text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    target text;
    extension_schema oid := (SELECT e.extnamespace FROM pg_extension e
                             WHERE e.extname OPERATOR(pg_catalog.=) 'ratelimit');
BEGIN
    IF grantee IS NULL OR privileges IS NULL THEN
        RAISE EXCEPTION 'grantee and privileges must not be null' USING ERRCODE = '22004';
    END IF;
    PERFORM ratelimit.privilege_set(privileges);      -- refuses unknown sets
    IF verb OPERATOR(pg_catalog.=) 'GRANT' AND NOT has_schema_privilege(grantee, extension_schema, 'USAGE') THEN
        EXECUTE format('GRANT USAGE ON SCHEMA %I TO %s',
                       (SELECT n.nspname FROM pg_namespace n WHERE n.oid OPERATOR(pg_catalog.=) extension_schema),
                       grantee);
    END IF;
    FOR target IN SELECT m.target FROM ratelimit.members() m
                  WHERE m.name OPERATOR(pg_catalog.=) ANY (ratelimit.privilege_set(privileges))
                  ORDER BY 1 LOOP
        EXECUTE format('%s %s ON %s %s %s', verb,
                       CASE WHEN target LIKE 'FUNCTION %' THEN 'EXECUTE' ELSE 'SELECT' END,
                       target, CASE verb WHEN 'GRANT' THEN 'TO' ELSE 'FROM' END, grantee);
    END LOOP;
END
$fn$;

-- rl_grant(role, 'limit'): the role may make rate-limit decisions
-- (rl_limit, rl_token_bucket, rl_sliding_window, rl_gcra, rl_peek,
-- rl_acquire, rl_release, rl_http_guard and its rl_http_guard_limit, and
-- create rl_limit_trigger triggers), and use the extension's schema.  rl_grant(role, 'wait'):
-- rl_wait (a separate set: a call that sleeps holds its connection).
-- rl_grant(role, 'refund'): it may give back what it was charged
-- (rl_refund; a separate set, since a role that may refund is not
-- limited).  rl_grant(role, 'monitor'): it may read rl_zones,
-- rl_counters, rl_keys and rl_leases.  Runs with the caller's rights.  GRANT by a
-- role without the grant option only warns ("no privileges were
-- granted"): rl_grant and rl_revoke refuse such a caller instead, before
-- anything else (ratelimit.change_privileges would fail on the schema).
CREATE FUNCTION rl_grant(grantee regrole, privileges text DEFAULT 'limit')
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF NOT pg_has_role(current_user, (SELECT e.extowner FROM pg_extension e
                                      WHERE e.extname OPERATOR(pg_catalog.=) 'ratelimit'), 'USAGE') THEN
        RAISE EXCEPTION 'rl_grant can only be run by the owner of extension ratelimit' USING ERRCODE = '42501';
    END IF;
    PERFORM ratelimit.change_privileges('GRANT', grantee, privileges);
END
$fn$;
COMMENT ON FUNCTION rl_grant(regrole, text) IS
    'Grants a role the decision functions (''limit'', the default), rl_wait (''wait''), rl_refund (''refund'') or the monitoring views (''monitor''), and USAGE on the extension''s schema';

-- Takes back what rl_grant gave (USAGE on the schema stays: the role may
-- have had it before).
CREATE FUNCTION rl_revoke(grantee regrole, privileges text DEFAULT 'limit')
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF NOT pg_has_role(current_user, (SELECT e.extowner FROM pg_extension e
                                      WHERE e.extname OPERATOR(pg_catalog.=) 'ratelimit'), 'USAGE') THEN
        RAISE EXCEPTION 'rl_revoke can only be run by the owner of extension ratelimit' USING ERRCODE = '42501';
    END IF;
    PERFORM ratelimit.change_privileges('REVOKE', grantee, privileges);
END
$fn$;
COMMENT ON FUNCTION rl_revoke(regrole, text) IS
    'Revokes what rl_grant granted (''limit'', ''wait'', ''refund'' or ''monitor''); USAGE on the schema stays';

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
