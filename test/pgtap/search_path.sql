-- Every SQL statement the extension issues is schema-qualified:
-- an ordinary role that puts its own schema first in search_path, with a
-- token_bucket table and a text = operator of its own, and a temporary
-- token_bucket table, cannot capture or observe the extension's statements
-- (which run as the state table's owner).  PUBLIC executes no check, so
-- the role is refused until the owner grants it 'limit'.  The SPI path
-- issues SQL, so this file forces it for its second round; the first
-- round uses whatever path ratelimit.table_access selects.  Both rounds
-- must run before anything else in this backend prepares the extension's
-- SPI statements.
BEGIN;
SET LOCAL timezone = 'UTC';
SET LOCAL datestyle = 'ISO, YMD';
SET LOCAL client_min_messages = warning;

SELECT plan(13);

SET LOCAL ratelimit.now_override = '2026-01-01 00:00:00+00';
SELECT n.nspname AS rl_ext_schema
FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace
WHERE e.extname = 'ratelimit' \gset

CREATE ROLE rl_pgtap_attacker NOLOGIN;
CREATE SCHEMA rl_pgtap_evil AUTHORIZATION rl_pgtap_attacker;

-- Existing rows, so that first calls update (not only insert) state:
-- buckets of rate 1 and window 10 (params '1:10').
INSERT INTO ratelimit.state (key, zone_id, part, params, tokens, updated_at) VALUES
    ('sp-existing-1', 0, 0, '1:10', 5, '2026-01-01 00:00:00+00'),
    ('sp-existing-2', 0, 0, '1:10', 5, '2026-01-01 00:00:00+00');

SET ROLE rl_pgtap_attacker;
CREATE TABLE rl_pgtap_evil.log (who text, what text);
CREATE TABLE rl_pgtap_evil.token_bucket (id text, tokens bigint, token_fraction float8, updated_at timestamptz);
CREATE TEMP TABLE token_bucket (id text, tokens bigint, token_fraction float8, updated_at timestamptz);
CREATE FUNCTION rl_pgtap_evil.texteq(a text, b text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO rl_pgtap_evil.log VALUES (current_user, a || ' = ' || b);
    RETURN a OPERATOR(pg_catalog.=) b;
END
$$;
CREATE OPERATOR rl_pgtap_evil.= (LEFTARG = text, RIGHTARG = text,
                                 FUNCTION = rl_pgtap_evil.texteq);

SELECT throws_ok($$SELECT rl_token_bucket('sp-refused', 1, 10)$$,
                 '42501', 'permission denied for function rl_token_bucket',
                 'the attacker, not granted ''limit'', cannot call rl_token_bucket');
RESET ROLE;
SELECT rl_grant('rl_pgtap_attacker') \gset
SET ROLE rl_pgtap_attacker;

-- pgTAP itself compares text with =, so no assertion runs while the
-- hostile search_path is in force: the results go to psql variables.
SELECT set_config('search_path',
                  'rl_pgtap_evil, pg_catalog, ' || quote_ident(:'rl_ext_schema'), true);
SELECT rl_token_bucket('sp-new-1', 1, 10, 2) AS new1 \gset
SELECT rl_token_bucket('sp-new-1', 1, 10, 1) AS new1_again \gset
SELECT rl_token_bucket('sp-existing-1', 1, 10, 1) AS existing1 \gset
RESET ROLE;
SET LOCAL ratelimit.table_access = 'spi';
SET ROLE rl_pgtap_attacker;
SELECT rl_token_bucket('sp-new-2', 1, 10, 2) AS new2 \gset
SELECT rl_token_bucket('sp-new-2', 1, 10, 1) AS new2_again \gset
SELECT rl_token_bucket('sp-existing-2', 1, 10, 1) AS existing2 \gset
RESET ROLE;
SET LOCAL search_path TO DEFAULT;

SELECT is(:'new1'::bigint, 8::bigint, 'configured path: new key under a hostile search_path');
SELECT is(:'new1_again'::bigint, 7::bigint, 'configured path: same key again');
SELECT is(:'existing1'::bigint, 4::bigint, 'configured path: existing key under a hostile search_path');
SELECT is(:'new2'::bigint, 8::bigint, 'SPI path: new key under a hostile search_path');
SELECT is(:'new2_again'::bigint, 7::bigint, 'SPI path: same key again');
SELECT is(:'existing2'::bigint, 4::bigint, 'SPI path: existing key under a hostile search_path');

SELECT is_empty($$SELECT who, what FROM rl_pgtap_evil.log$$,
                'the attacker''s text = operator was never called');
SELECT is_empty($$SELECT * FROM rl_pgtap_evil.token_bucket$$,
                'the attacker''s schema-level token_bucket was never touched');
SELECT is_empty($$SELECT * FROM pg_temp.token_bucket$$,
                'the attacker''s temporary token_bucket was never touched');
SELECT results_eq(
    $$SELECT id, tokens, updated_at FROM ratelimit.token_bucket
      WHERE id IN ('sp-new-1', 'sp-new-2', 'sp-existing-1', 'sp-existing-2') ORDER BY id$$,
    $$VALUES ('sp-existing-1'::text COLLATE "C", 4::bigint, '2026-01-01 00:00:00+00'::timestamptz),
             ('sp-existing-2', 4, '2026-01-01 00:00:00+00'),
             ('sp-new-1', 7, '2026-01-01 00:00:00+00'),
             ('sp-new-2', 7, '2026-01-01 00:00:00+00')$$,
    'the calls wrote ratelimit.token_bucket itself (a query in their transaction sees the last call''s state)');
SELECT is(rl_token_bucket('sp-new-1', 1, 10, 0), 7::bigint, 'sp-new-1 kept its state');
SELECT is(rl_token_bucket('sp-new-2', 1, 10, 0), 7::bigint, 'sp-new-2 kept its state');

SELECT * FROM finish();
ROLLBACK;
