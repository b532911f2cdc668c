-- Privileges (SPEC 2.6, 3): an ordinary role can decide but cannot touch
-- the state, the internal schema or the test clock; no SECURITY DEFINER
-- function of the extension runs with an unpinned search_path.
-- Must pass with ratelimit.table_access set to auto, direct or spi.
BEGIN;
SET LOCAL timezone = 'UTC';
SET LOCAL datestyle = 'ISO, YMD';
SET LOCAL client_min_messages = warning;

-- Whether this backend has not loaded the library yet (its settings are
-- then mere placeholders); checked before anything can load it.
SELECT NOT EXISTS (SELECT 1 FROM pg_catalog.pg_settings
                   WHERE name = 'ratelimit.now_override') AS rl_unloaded \gset

SELECT plan(52);

CREATE ROLE rl_pgtap_user NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE;

-------------------------------------------------------------------------
-- Before the library is loaded, PostgreSQL lets anyone SET a placeholder
-- ratelimit.* setting; when the library loads, a value that the role was
-- not allowed to set must be discarded, not applied.
-------------------------------------------------------------------------
\if :rl_unloaded
SET ROLE rl_pgtap_user;
SET LOCAL client_min_messages = error;  -- the discard is a WARNING
SET LOCAL ratelimit.now_override = '2000-01-01 00:00:00+00';
SET LOCAL ratelimit.table_access = 'spi';
SELECT rl_token_bucket('priv-placeholder', 1, 10) AS placeholder_call,
       current_setting('ratelimit.now_override') AS placeholder_clock \gset
SET LOCAL client_min_messages = warning;
RESET ROLE;
SELECT is(:'placeholder_clock'::text, '',
          'a now_override an ordinary role set before the library loaded is discarded at load');
SELECT ok((SELECT updated_at >= now() FROM ratelimit.token_bucket WHERE id = 'priv-placeholder'),
          'that role''s call used the real clock, not the discarded override');
\else
SELECT skip('the library was already loaded in this backend: no placeholder to test', 2);
\endif

-- Load the library for the superuser (a no-op if loaded) and fix the clock.
SELECT rl_token_bucket('priv-loader', 1, 10, 0) AS loader \gset
SET LOCAL ratelimit.now_override = '2026-01-01 00:00:00+00';
SELECT diag('ratelimit.table_access = ' || current_setting('ratelimit.table_access'));

-------------------------------------------------------------------------
-- Catalog view of the privileges.
-------------------------------------------------------------------------
SELECT function_privs_are('rl_token_bucket',
                          ARRAY['text', 'double precision', 'double precision', 'integer'],
                          'rl_pgtap_user', ARRAY['EXECUTE'],
                          'an ordinary role may execute rl_token_bucket');
SELECT schema_privs_are('ratelimit', 'rl_pgtap_user', ARRAY[]::name[],
                        'an ordinary role has no privilege on schema ratelimit');
SELECT table_privs_are('ratelimit', 'token_bucket', 'rl_pgtap_user', ARRAY[]::name[],
                       'an ordinary role has no privilege on ratelimit.token_bucket');
SELECT table_privs_are('ratelimit', 'state', 'rl_pgtap_user', ARRAY[]::name[],
                       'an ordinary role has no privilege on ratelimit.state (the table behind the view)');
SELECT is_empty(
    $$SELECT a.privilege_type
      FROM pg_catalog.pg_namespace n,
           aclexplode(coalesce(n.nspacl, acldefault('n', n.nspowner))) a
      WHERE n.nspname = 'ratelimit' AND a.grantee = 0$$,
    'PUBLIC holds no privilege on schema ratelimit');
SELECT is_empty(
    $$SELECT a.privilege_type
      FROM pg_catalog.pg_class c,
           aclexplode(coalesce(c.relacl, acldefault('r', c.relowner))) a
      WHERE c.oid = 'ratelimit.token_bucket'::regclass AND a.grantee = 0$$,
    'PUBLIC holds no privilege on ratelimit.token_bucket');
SELECT is_empty(
    $$SELECT a.privilege_type
      FROM pg_catalog.pg_class c,
           aclexplode(coalesce(c.relacl, acldefault('r', c.relowner))) a
      WHERE c.oid = 'ratelimit.state'::regclass AND a.grantee = 0$$,
    'PUBLIC holds no privilege on ratelimit.state');
SELECT is_empty(
    $$SELECT c.oid::regclass::text
      FROM pg_catalog.pg_class c
      JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = 'ratelimit'
        AND (has_table_privilege('rl_pgtap_user', c.oid, 'SELECT')
             OR has_table_privilege('rl_pgtap_user', c.oid, 'INSERT')
             OR has_table_privilege('rl_pgtap_user', c.oid, 'UPDATE')
             OR has_table_privilege('rl_pgtap_user', c.oid, 'DELETE')
             OR has_table_privilege('rl_pgtap_user', c.oid, 'TRUNCATE'))$$,
    'no relation in schema ratelimit is readable or writable by an ordinary role');

-------------------------------------------------------------------------
-- As the ordinary role.
-------------------------------------------------------------------------
SET ROLE rl_pgtap_user;

SELECT is(current_user::text, 'rl_pgtap_user', 'now running as the ordinary role');
SELECT ok(NOT (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user),
          'the role is not a superuser');

SELECT is(rl_token_bucket('priv-one', 1, 10, 1), 9::bigint,
          'the role can call rl_token_bucket (cost 1 of 10)');
SELECT is(rl_token_bucket('priv-three', 1, 10, 3), 7::bigint,
          'the role can call rl_token_bucket (cost 3 of 10)');
SELECT is(rl_token_bucket('priv-default'), 119::bigint,
          'the role gets the defaults (capacity 120)');
SELECT is((SELECT array_agg(rl_token_bucket('priv-hot', 1, 10)) FROM generate_series(1, 12)),
          ARRAY[9, 8, 7, 6, 5, 4, 3, 2, 1, 0, -1, -1]::bigint[],
          'the role gets the SPEC 2.1 sequence under the overridden clock');
SELECT is(rl_token_bucket('priv-hot', 1, 10, 0), 0::bigint,
          'the role sees the state its own calls left');
SELECT is(rl_token_bucket('priv-loader', 1, 10, 0), 10::bigint,
          'the role sees state the superuser created');
SELECT throws_ok($$SELECT rl_token_bucket('priv-bad', 0, 10)$$,
                 '22023', 'rate must be a finite number greater than zero',
                 'the role gets the same argument errors');

-- The state table and the schema are out of reach.
SELECT throws_ok($$SELECT * FROM ratelimit.token_bucket$$,
                 '42501', 'permission denied for schema ratelimit',
                 'the role cannot SELECT from ratelimit.token_bucket');
SELECT throws_ok($$INSERT INTO ratelimit.token_bucket VALUES ('priv-forged', 1e9, now())$$,
                 '42501', 'permission denied for schema ratelimit',
                 'the role cannot INSERT into ratelimit.token_bucket');
SELECT throws_ok($$UPDATE ratelimit.token_bucket SET tokens = 1e9$$,
                 '42501', 'permission denied for schema ratelimit',
                 'the role cannot UPDATE ratelimit.token_bucket');
SELECT throws_ok($$DELETE FROM ratelimit.token_bucket$$,
                 '42501', 'permission denied for schema ratelimit',
                 'the role cannot DELETE from ratelimit.token_bucket');
SELECT throws_ok($$TRUNCATE ratelimit.token_bucket$$,
                 '42501', 'permission denied for schema ratelimit',
                 'the role cannot TRUNCATE ratelimit.token_bucket');
SELECT throws_ok($$SELECT * FROM ratelimit.state$$,
                 '42501', 'permission denied for schema ratelimit',
                 'the role cannot SELECT from ratelimit.state');
SELECT throws_ok($$INSERT INTO ratelimit.state (key, tokens, updated_at) VALUES ('priv-forged', 1e9, now())$$,
                 '42501', 'permission denied for schema ratelimit',
                 'the role cannot INSERT into ratelimit.state');
SELECT throws_ok($$UPDATE ratelimit.state SET tokens = 1e9$$,
                 '42501', 'permission denied for schema ratelimit',
                 'the role cannot UPDATE ratelimit.state');
SELECT throws_ok($$DELETE FROM ratelimit.state$$,
                 '42501', 'permission denied for schema ratelimit',
                 'the role cannot DELETE from ratelimit.state');
SELECT throws_ok($$TRUNCATE ratelimit.state$$,
                 '42501', 'permission denied for schema ratelimit',
                 'the role cannot TRUNCATE ratelimit.state');
SELECT throws_ok($$CREATE TABLE ratelimit.priv_intruder (x int)$$,
                 '42501', 'permission denied for schema ratelimit',
                 'the role cannot create objects in schema ratelimit');
SELECT throws_ok($$SELECT 'ratelimit.token_bucket'::regclass$$,
                 '42501', 'permission denied for schema ratelimit',
                 'the role cannot even resolve names in schema ratelimit');

-- The test clock and the access path are superuser-only.
SELECT throws_ok($$SET ratelimit.now_override = '2030-01-01 00:00:00+00'$$,
                 '42501', 'permission denied to set parameter "ratelimit.now_override"',
                 'the role cannot SET ratelimit.now_override');
SELECT throws_ok($$SET LOCAL ratelimit.now_override = ''$$,
                 '42501', 'permission denied to set parameter "ratelimit.now_override"',
                 'the role cannot SET LOCAL ratelimit.now_override back to the real clock');
SELECT throws_ok($$SELECT set_config('ratelimit.now_override', '2030-01-01 00:00:00+00', true)$$,
                 '42501', 'permission denied to set parameter "ratelimit.now_override"',
                 'the role cannot set_config ratelimit.now_override');
SELECT throws_ok($$RESET ratelimit.now_override$$,
                 '42501', 'permission denied to set parameter "ratelimit.now_override"',
                 'the role cannot RESET ratelimit.now_override');
SELECT throws_ok($$SET ratelimit.table_access = 'spi'$$,
                 '42501', 'permission denied to set parameter "ratelimit.table_access"',
                 'the role cannot SET ratelimit.table_access');
SELECT throws_ok($$SELECT set_config('ratelimit.table_access', 'direct', true)$$,
                 '42501', 'permission denied to set parameter "ratelimit.table_access"',
                 'the role cannot set_config ratelimit.table_access');
SELECT throws_ok($$ALTER ROLE rl_pgtap_user SET ratelimit.now_override = '2030-01-01 00:00:00+00'$$,
                 '42501', 'permission denied to set parameter "ratelimit.now_override"',
                 'the role cannot give itself a now_override with ALTER ROLE');
SELECT is(current_setting('ratelimit.now_override'), '2026-01-01 00:00:00+00',
          'the clock the superuser set is still in force');
SELECT is(rl_token_bucket('priv-hot', 1, 10, 0), 0::bigint,
          'and the role''s decisions still use it (no refill)');

RESET ROLE;

-------------------------------------------------------------------------
-- Back as the superuser: the role's calls changed the stored state.
-------------------------------------------------------------------------
SELECT is(current_user::text, 'postgres', 'RESET ROLE is back to the superuser');
-- A key's first call in a transaction writes its row (later calls on the
-- same key are written back at commit), so single-call keys are exact.
SELECT results_eq(
    $$SELECT id, tokens, updated_at FROM ratelimit.token_bucket
      WHERE id IN ('priv-one', 'priv-three', 'priv-default') ORDER BY id$$,
    $$VALUES ('priv-default'::text COLLATE "C", 119::bigint, '2026-01-01 00:00:00+00'::timestamptz),
             ('priv-one', 9, '2026-01-01 00:00:00+00'),
             ('priv-three', 7, '2026-01-01 00:00:00+00')$$,
    'the rows the role''s calls wrote are in ratelimit.token_bucket');
SELECT is((SELECT count(*) FROM ratelimit.token_bucket WHERE id = 'priv-hot'), 1::bigint,
          'the role''s hot key has its row');
SELECT results_eq(
    $$SELECT key, zone_id, part, tokens FROM ratelimit.state
      WHERE key IN ('priv-one', 'priv-three', 'priv-default') ORDER BY key$$,
    $$VALUES ('priv-default'::text COLLATE "C", 0, 0, 119::bigint),
             ('priv-one', 0, 0, 9), ('priv-three', 0, 0, 7)$$,
    'those rows are ratelimit.state rows of zone 0, part 0');
SELECT is(rl_token_bucket('priv-hot', 1, 10, 0), 0::bigint,
          'the superuser sees the hot key emptied by the role');
SELECT is(rl_token_bucket('priv-three', 1, 10, 0), 7::bigint,
          'the superuser sees the tokens the role took');
SELECT is_empty($$SELECT 1 FROM ratelimit.token_bucket WHERE id IN ('priv-bad', 'priv-forged')$$,
                'the role''s refused attempts left no row');
SELECT is_empty($$SELECT 1 FROM ratelimit.state WHERE key IN ('priv-bad', 'priv-forged')$$,
                'nor any row in ratelimit.state, in any zone');

-------------------------------------------------------------------------
-- SECURITY DEFINER functions of the extension must pin search_path.
-------------------------------------------------------------------------
CREATE FUNCTION pg_temp.rl_unpinned_secdef() RETURNS SETOF text
LANGUAGE sql STABLE AS $$
    SELECT p.oid::pg_catalog.regprocedure::text
    FROM pg_catalog.pg_proc p
    JOIN pg_catalog.pg_depend d
      ON d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass
     AND d.objid = p.oid AND d.deptype = 'e'
    JOIN pg_catalog.pg_extension e
      ON d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass
     AND d.refobjid = e.oid
    WHERE e.extname = 'ratelimit'
      AND p.prosecdef
      AND NOT EXISTS (SELECT 1 FROM pg_catalog.unnest(p.proconfig) AS c(setting)
                      WHERE c.setting LIKE 'search\_path=%')
    ORDER BY 1
$$;

SELECT ok((SELECT count(*) FROM pg_catalog.pg_depend d
           JOIN pg_catalog.pg_extension e ON d.refobjid = e.oid
           WHERE e.extname = 'ratelimit' AND d.deptype = 'e'
             AND d.classid = 'pg_catalog.pg_proc'::regclass
             AND d.refclassid = 'pg_catalog.pg_extension'::regclass
             AND d.objid = 'rl_token_bucket(text, float8, float8, int)'::regprocedure) = 1,
          'the dependency query sees the extension''s functions (rl_token_bucket)');
SELECT is_empty($$SELECT * FROM pg_temp.rl_unpinned_secdef()$$,
                'every SECURITY DEFINER function of the extension pins search_path');

-- The check is real: a SECURITY DEFINER member without a pinned
-- search_path is reported, one with a pinned search_path is not.
CREATE FUNCTION public.rl_pgtap_unpinned() RETURNS int
    LANGUAGE sql SECURITY DEFINER AS 'SELECT 1';
CREATE FUNCTION public.rl_pgtap_pinned() RETURNS int
    LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS 'SELECT 1';
ALTER EXTENSION ratelimit ADD FUNCTION public.rl_pgtap_unpinned();
ALTER EXTENSION ratelimit ADD FUNCTION public.rl_pgtap_pinned();
SELECT results_eq($$SELECT * FROM pg_temp.rl_unpinned_secdef()$$,
                  ARRAY['rl_pgtap_unpinned()'],
                  'the check reports an unpinned SECURITY DEFINER member, and only it');
ALTER EXTENSION ratelimit DROP FUNCTION public.rl_pgtap_unpinned();
ALTER EXTENSION ratelimit DROP FUNCTION public.rl_pgtap_pinned();
DROP FUNCTION public.rl_pgtap_unpinned();
DROP FUNCTION public.rl_pgtap_pinned();
SELECT is_empty($$SELECT * FROM pg_temp.rl_unpinned_secdef()$$,
                'after removing the probes the extension is clean again');

SELECT * FROM finish();
ROLLBACK;
