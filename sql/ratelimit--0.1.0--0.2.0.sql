\echo Use "ALTER EXTENSION ratelimit UPDATE TO '0.2.0'" to load this file. \quit

-- 0.2.0: zones (named policies) and the algorithm family, SPEC 2.2 and 2.3.

-- One state table for every algorithm.  A row is one key's state in one
-- zone (zone_id 0: rl_token_bucket's ad-hoc buckets; -1: rl_gcra's); the
-- exact sliding window keeps sealed chunks of its log in parts 1 and up.
-- The primary key starts with the key, so every row of a key shards with it
-- (YugabyteDB) and distributes by key (Citus).
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
            PRIMARY KEY (key, zone_id, part)
        )$cols$;
BEGIN
    EXECUTE 'CREATE UNLOGGED TABLE ratelimit.state ' || columns || ' WITH (fillfactor = 50)';
EXCEPTION WHEN feature_not_supported OR syntax_error OR invalid_parameter_value THEN
    RAISE NOTICE 'UNLOGGED tables are refused here (%); ratelimit.state is an ordinary table', SQLERRM;
    EXECUTE 'CREATE TABLE ratelimit.state ' || columns;
END
$do$;

REVOKE ALL ON ratelimit.state FROM PUBLIC;
COMMENT ON TABLE ratelimit.state IS
    'Rate-limit state: one row per key and zone (part 0), plus sealed sliding-window chunks (parts 1..)';

INSERT INTO ratelimit.state (key, zone_id, part, tokens, token_fraction, updated_at)
SELECT id, 0, 0, tokens, token_fraction, updated_at FROM ratelimit.token_bucket;
DROP TABLE ratelimit.token_bucket;

-- The ad-hoc buckets as 0.1.0 showed them.
CREATE VIEW ratelimit.token_bucket AS
SELECT key AS id, tokens, token_fraction, updated_at
FROM ratelimit.state
WHERE zone_id = 0;
REVOKE ALL ON ratelimit.token_bucket FROM PUBLIC;
COMMENT ON VIEW ratelimit.token_bucket IS
    'rl_token_bucket state: tokens + token_fraction held by each id at updated_at';

-- Zones.  A logged table: policies survive crashes, and pg_dump keeps them.
CREATE SEQUENCE ratelimit.zone_id_seq AS int MINVALUE 1;
CREATE TABLE ratelimit.zone (
    zone_id     int NOT NULL DEFAULT nextval('ratelimit.zone_id_seq') PRIMARY KEY,
    zone        text COLLATE "C" NOT NULL UNIQUE
                CHECK (zone <> '' AND octet_length(zone) <= 128),
    algorithm   text NOT NULL
                CHECK (algorithm IN ('token_bucket', 'gcra', 'sliding_window',
                                     'sliding_window_counter', 'fixed_window')),
    rate        bigint NOT NULL CHECK (rate > 0),
    period      interval NOT NULL CHECK (period > interval '0'),
    burst       bigint CHECK (burst > 0),
    store       text NOT NULL DEFAULT 'table' CHECK (store IN ('table')),
    history     boolean NOT NULL DEFAULT false,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
ALTER SEQUENCE ratelimit.zone_id_seq OWNED BY ratelimit.zone.zone_id;
REVOKE ALL ON ratelimit.zone, ratelimit.zone_id_seq FROM PUBLIC;
COMMENT ON TABLE ratelimit.zone IS 'Rate-limit zones (named policies); change them with rl_zone_set and rl_zone_drop';
SELECT pg_catalog.pg_extension_config_dump('ratelimit.zone', '');
SELECT pg_catalog.pg_extension_config_dump('ratelimit.zone_id_seq', '');

-- Every session caches zones; a change anywhere tells them all (at commit).
CREATE FUNCTION ratelimit.zone_changed() RETURNS trigger
AS 'MODULE_PATHNAME', 'rl_zone_changed'
LANGUAGE C;
CREATE TRIGGER zone_changed
    AFTER INSERT OR UPDATE OR DELETE ON ratelimit.zone
    FOR EACH ROW EXECUTE FUNCTION ratelimit.zone_changed();
CREATE TRIGGER zone_truncated
    AFTER TRUNCATE ON ratelimit.zone
    FOR EACH STATEMENT EXECUTE FUNCTION ratelimit.zone_changed();

-- Every request of a zone with history: durable, so logged.
CREATE TABLE ratelimit.history (
    txn_id      bigint NOT NULL,
    recorded_at timestamptz NOT NULL,
    zone        text NOT NULL,
    key         text NOT NULL,
    cost        int NOT NULL,
    allowed     boolean NOT NULL
);
CREATE INDEX history_zone_key_idx ON ratelimit.history (zone, key, recorded_at);
REVOKE ALL ON ratelimit.history FROM PUBLIC;
COMMENT ON TABLE ratelimit.history IS 'Requests of zones with history on, allowed and refused';

-- Checks a definition with the algorithms' own rules (precise SQLSTATEs).
CREATE FUNCTION ratelimit.check_zone(algorithm text, rate bigint, period interval, burst bigint, store text)
RETURNS void
AS 'MODULE_PATHNAME', 'rl_check_zone'
LANGUAGE C;

-- Drops this transaction's cached copies of a zone's state before it is deleted.
CREATE FUNCTION ratelimit.forget_zone_state(zone_id int)
RETURNS void
AS 'MODULE_PATHNAME', 'rl_forget_zone_state'
LANGUAGE C STRICT;

REVOKE ALL ON FUNCTION ratelimit.check_zone(text, bigint, interval, bigint, text),
    ratelimit.forget_zone_state(int), ratelimit.zone_changed() FROM PUBLIC;

CREATE TYPE rl_result AS (
    allowed     boolean,
    capacity    bigint,
    remaining   bigint,
    retry_after interval,
    reset_after interval,
    txn_id      bigint
);
COMMENT ON TYPE rl_result IS
    'A rate-limit decision: allowed, capacity, what remains, when to retry (refused only), when the key is full again, and the history transaction id';

CREATE FUNCTION rl_zone_set(
    zone      text,
    algorithm text,
    rate      bigint,
    period    interval,
    burst     bigint DEFAULT NULL,
    store     text DEFAULT 'table',
    history   boolean DEFAULT false)
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

    SELECT * INTO existing FROM ratelimit.zone z WHERE z.zone = rl_zone_set.zone FOR UPDATE;
    IF NOT FOUND THEN
        INSERT INTO ratelimit.zone (zone, algorithm, rate, period, burst, store, history)
        VALUES (rl_zone_set.zone, rl_zone_set.algorithm, rl_zone_set.rate, rl_zone_set.period,
                rl_zone_set.burst, rl_zone_set.store, rl_zone_set.history);
    ELSE
        fresh := existing.algorithm IS DISTINCT FROM rl_zone_set.algorithm
                 OR existing.store IS DISTINCT FROM rl_zone_set.store;
        -- Another algorithm or store cannot read the old state: start afresh
        -- under a new id, so no session can mistake old rows for new ones.
        -- Otherwise existing keys keep their state under the new limit.
        IF fresh THEN
            PERFORM ratelimit.forget_zone_state(existing.zone_id);
            DELETE FROM ratelimit.state s WHERE s.zone_id = existing.zone_id;
        END IF;
        UPDATE ratelimit.zone z
        SET zone_id = CASE WHEN fresh THEN nextval('ratelimit.zone_id_seq')::int ELSE z.zone_id END,
            algorithm = rl_zone_set.algorithm, store = rl_zone_set.store,
            rate = rl_zone_set.rate, period = rl_zone_set.period, burst = rl_zone_set.burst,
            history = rl_zone_set.history, updated_at = now()
        WHERE z.zone_id = existing.zone_id;
    END IF;
END
$fn$;

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
            RAISE NOTICE 'rate-limit zone "%" does not exist, skipping', zone;
            RETURN;
        END IF;
        RAISE EXCEPTION 'rate-limit zone "%" does not exist', zone USING ERRCODE = '42704';
    END IF;
    PERFORM ratelimit.forget_zone_state(dropped);
    DELETE FROM ratelimit.state s WHERE s.zone_id = dropped;
END
$fn$;

REVOKE ALL ON FUNCTION rl_zone_set(text, text, bigint, interval, bigint, text, boolean),
    rl_zone_drop(text, boolean) FROM PUBLIC;
COMMENT ON FUNCTION rl_zone_set(text, text, bigint, interval, bigint, text, boolean) IS
    'Creates or alters a rate-limit zone: rate requests per period with the given algorithm';
COMMENT ON FUNCTION rl_zone_drop(text, boolean) IS 'Drops a rate-limit zone and its state';

CREATE VIEW rl_zones AS
SELECT zone, algorithm, rate, period,
       coalesce(burst, rate) AS capacity, burst, store, history, created_at, updated_at
FROM ratelimit.zone;
GRANT SELECT ON rl_zones TO PUBLIC;
COMMENT ON VIEW rl_zones IS 'Rate-limit zones';

-- Not STRICT: a NULL argument is an error (22004), not a silent NULL.
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
REVOKE ALL ON FUNCTION rl_reset(text, text) FROM PUBLIC;
COMMENT ON FUNCTION rl_reset(text, text) IS 'Forgets a key''s state in a zone; true when it had some';

CREATE FUNCTION rl_gcra(key text, max_burst int, count int, period float8, quantity int DEFAULT 1)
RETURNS rl_result
AS 'MODULE_PATHNAME', 'rl_gcra'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION rl_gcra(text, int, int, float8, int) IS
    'redis-cell''s CL.THROTTLE key max_burst count period quantity; capacity is max_burst + 1';

-- The standard response headers: RateLimit-Limit, -Remaining, -Reset (whole
-- seconds, rounded up) and, when refused, Retry-After.
CREATE FUNCTION rl_headers(result rl_result)
RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT jsonb_strip_nulls(jsonb_build_object(
        'RateLimit-Limit', result.capacity::text,
        'RateLimit-Remaining', result.remaining::text,
        'RateLimit-Reset', ceil(extract(epoch FROM result.reset_after))::bigint::text,
        'Retry-After', CASE WHEN NOT result.allowed
                            THEN ceil(extract(epoch FROM result.retry_after))::bigint::text END))
$fn$;
COMMENT ON FUNCTION rl_headers(rl_result) IS
    'RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset and Retry-After for an rl_result, as a JSON object';
