\echo Use "CREATE EXTENSION ratelimit" to load this file. \quit

-- Internal state lives in a schema of its own, which ordinary roles cannot
-- use; the functions go to the extension's schema (public by default).
CREATE SCHEMA ratelimit;
REVOKE ALL ON SCHEMA ratelimit FROM PUBLIC;
COMMENT ON SCHEMA ratelimit IS 'Internal state of the ratelimit extension';

-- One row per key, keyed by a primary key that starts with the key, so the
-- table hash-shards cleanly (YugabyteDB) and distributes by key (Citus).
-- UNLOGGED: no WAL per decision; emptied by crash recovery (fail-open).
-- COLLATE "C": keys match byte for byte, and comparisons are memcmp.
-- YugabyteDB before 2024.2 refuses UNLOGGED: fall back to a plain table.
DO $do$
BEGIN
    EXECUTE $sql$
        CREATE UNLOGGED TABLE ratelimit.token_bucket (
            id              text COLLATE "C" NOT NULL PRIMARY KEY,
            tokens          bigint NOT NULL,
            token_fraction  float8 NOT NULL DEFAULT 0,
            updated_at      timestamptz NOT NULL
        ) WITH (fillfactor = 50)
    $sql$;
EXCEPTION WHEN feature_not_supported OR syntax_error OR invalid_parameter_value THEN
    RAISE NOTICE 'UNLOGGED tables are refused here (%); ratelimit.token_bucket is an ordinary table', SQLERRM;
    EXECUTE $sql$
        CREATE TABLE ratelimit.token_bucket (
            id              text COLLATE "C" NOT NULL PRIMARY KEY,
            tokens          bigint NOT NULL,
            token_fraction  float8 NOT NULL DEFAULT 0,
            updated_at      timestamptz NOT NULL
        )
    $sql$;
END
$do$;

REVOKE ALL ON ratelimit.token_bucket FROM PUBLIC;
COMMENT ON TABLE ratelimit.token_bucket IS
    'rl_token_bucket state: tokens + token_fraction held by each id at updated_at';

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
