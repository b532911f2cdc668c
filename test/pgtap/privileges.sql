-- Privileges.  PostgREST publishes every function a request's
-- role may execute, so PUBLIC executes no stateful function and reads no
-- view: a role meets PostgreSQL's own 42501 until the extension's owner
-- runs rl_grant, and again after rl_revoke.  With 'limit' a role decides
-- (and may arm rl_limit_trigger) but still cannot touch zones, the state,
-- the internal schema or the test clock; 'refund' alone gives rl_refund
-- (a role that may refund is not limited); 'monitor' alone opens the views.
-- Only the owner grants: otherwise a role given EXECUTE on rl_grant could
-- hand out what it does not own.  No SECURITY DEFINER function of the
-- extension runs with an unpinned search_path.
-- Must pass with ratelimit.table_access set to auto, direct or spi.
BEGIN;
SET LOCAL timezone = 'UTC';
SET LOCAL datestyle = 'ISO, YMD';
SET LOCAL client_min_messages = warning;

-- Whether this backend has not loaded the library yet (its settings are
-- then mere placeholders); checked before anything can load it.
SELECT NOT EXISTS (SELECT 1 FROM pg_catalog.pg_settings
                   WHERE name = 'ratelimit.now_override') AS rl_unloaded \gset

SELECT plan(159);

CREATE ROLE rl_pgtap_user NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE;
CREATE ROLE rl_pgtap_priv_grantee NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE;
CREATE ROLE rl_pgtap_priv_stranger NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE;
CREATE ROLE "rl_pgtap_priv Odd" NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE;

-- The extension's functions a role may execute (whatever its schema USAGE).
CREATE FUNCTION pg_temp.priv_executable(role name) RETURNS text[]
LANGUAGE sql STABLE AS $$
    SELECT coalesce(array_agg(p.oid::pg_catalog.regprocedure::text
                              ORDER BY p.oid::pg_catalog.regprocedure::text COLLATE "C"), '{}')
    FROM pg_catalog.pg_proc p
    JOIN pg_catalog.pg_depend d
      ON d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND d.objid = p.oid AND d.deptype = 'e'
    JOIN pg_catalog.pg_extension e
      ON d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass AND d.refobjid = e.oid
    WHERE e.extname = 'ratelimit' AND has_function_privilege(role, p.oid, 'EXECUTE')
$$;
-- The extension's relations a role may read.
CREATE FUNCTION pg_temp.priv_readable(role name) RETURNS text[]
LANGUAGE sql STABLE AS $$
    SELECT coalesce(array_agg(c.oid::pg_catalog.regclass::text
                              ORDER BY c.oid::pg_catalog.regclass::text COLLATE "C"), '{}')
    FROM pg_catalog.pg_class c
    JOIN pg_catalog.pg_depend d
      ON d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.objid = c.oid AND d.deptype = 'e'
    JOIN pg_catalog.pg_extension e
      ON d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass AND d.refobjid = e.oid
    WHERE e.extname = 'ratelimit' AND has_table_privilege(role, c.oid, 'SELECT')
$$;

-------------------------------------------------------------------------
-- Never granted anything, the role holds only what PUBLIC holds: no
-- decision.  PostgreSQL refuses before any code of the library runs, so
-- this call loads nothing (the placeholder test below depends on that).
-------------------------------------------------------------------------
SET ROLE rl_pgtap_user;
SELECT throws_ok($$SELECT rl_token_bucket('priv-refused', 1, 10)$$,
                 '42501', 'permission denied for function rl_token_bucket',
                 'an ungranted role cannot call rl_token_bucket');
RESET ROLE;
SELECT function_privs_are('rl_token_bucket',
                          ARRAY['text', 'double precision', 'double precision', 'integer'],
                          'rl_pgtap_user', ARRAY[]::text[],
                          'an ungranted role holds no privilege on rl_token_bucket');
SELECT lives_ok($$SELECT rl_grant('rl_pgtap_user')$$,
                'the owner grants the role the decision functions with rl_grant (''limit'' by default)');

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
                          'a role granted ''limit'' may execute rl_token_bucket');
SELECT schema_privs_are('ratelimit', 'rl_pgtap_user', ARRAY[]::name[],
                        'rl_grant gave it no privilege on schema ratelimit');
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
-- As the ordinary role, granted 'limit'.
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
          'the role gets the documented sequence under the overridden clock');
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

-- 'limit' is the decisions only: zones, resets, the garbage collector,
-- the views and the grants stay with the owner.
SELECT throws_ok($$SELECT rl_zone_set('priv_forged', 'token_bucket', 1000000, '1 second')$$,
                 '42501', 'permission denied for function rl_zone_set',
                 'the role cannot call rl_zone_set');
SELECT throws_ok($$SELECT rl_zone_drop('priv_forged', true)$$,
                 '42501', 'permission denied for function rl_zone_drop',
                 'the role cannot call rl_zone_drop');
SELECT throws_ok($$SELECT rl_reset('priv_forged', 'priv-hot')$$,
                 '42501', 'permission denied for function rl_reset',
                 'the role cannot call rl_reset');
SELECT throws_ok($$SELECT rl_gc()$$,
                 '42501', 'permission denied for function rl_gc',
                 'the role cannot call rl_gc');
SELECT throws_ok($$SELECT * FROM rl_zones$$,
                 '42501', 'permission denied for view rl_zones',
                 'the role cannot read rl_zones');
SELECT throws_ok($$SELECT * FROM rl_counters$$,
                 '42501', 'permission denied for view rl_counters',
                 'the role cannot read rl_counters');
SELECT throws_ok($$SELECT * FROM rl_keys$$,
                 '42501', 'permission denied for view rl_keys',
                 'the role cannot read rl_keys');
SELECT throws_ok($$SELECT rl_grant('rl_pgtap_user', 'monitor')$$,
                 '42501', 'permission denied for function rl_grant',
                 'the role cannot grant itself more');

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
-- rl_grant and rl_revoke both ways, on a role of their own: 'limit'.
-------------------------------------------------------------------------
SELECT rl_zone_set('priv_conc', 'concurrency', 10, '1 minute'),
       rl_zone_set('priv_tb', 'token_bucket', 10, '1 minute'),
       rl_zone_set('priv_tb2', 'gcra', 10, '1 minute'),
       rl_zone_set('priv_sw', 'sliding_window', 10, '1 minute'),
       rl_zone_set('priv_shm', 'token_bucket', 10, '1 minute', store => 'shmem') \gset
-- One call of each decision function (fn: its name, as the error names
-- it; called: which overload).
CREATE FUNCTION pg_temp.priv_decisions() RETURNS TABLE (fn text, called text, statement text)
LANGUAGE sql AS $$
    VALUES ('rl_limit', 'rl_limit', $s$SELECT rl_limit('priv_tb', 'priv-g', 1)$s$),
           ('rl_limit', 'rl_limit(text[])', $s$SELECT rl_limit(ARRAY['priv_tb', 'priv_tb2'], 'priv-g', 1)$s$),
           ('rl_token_bucket', 'rl_token_bucket', $s$SELECT rl_token_bucket('priv-g', 1, 10, 1)$s$),
           ('rl_sliding_window', 'rl_sliding_window', $s$SELECT rl_sliding_window('priv_sw', 'priv-g', 1)$s$),
           ('rl_gcra', 'rl_gcra', $s$SELECT rl_gcra('priv-g', 9, 10, 60)$s$),
           ('rl_peek', 'rl_peek', $s$SELECT rl_peek('priv_tb', 'priv-g')$s$),
           ('rl_http_guard', 'rl_http_guard', $s$SELECT rl_http_guard('priv_shm', 'priv-g')$s$),
           ('rl_http_guard_limit', 'rl_http_guard_limit',
            $s$SELECT rl_http_guard_limit('priv_shm', 'priv-g', NULL, NULL, NULL, NULL)$s$),
           ('rl_acquire', 'rl_acquire', $s$SELECT rl_acquire('priv_conc', 'priv-g')$s$),
           ('rl_release', 'rl_release', $s$SELECT rl_release('999999:0123456789abcdef:priv-g')$s$)
$$;

SELECT is(pg_temp.priv_executable('rl_pgtap_priv_grantee'),
          ARRAY['rl_client_address(text,text,integer,text)', 'rl_headers(rl_result,boolean)'],
          'of the extension''s functions, an ungranted role executes only the two pure ones');
SET ROLE rl_pgtap_priv_grantee;
-- ... and they work for it: rl_headers on a whole result (a zone's rate
-- and period, as every call returns them; a NULL rate would skip the
-- policy) needs nothing the role lacks.
-- (errors.sql checks the headers' values.)
SELECT lives_ok($$SELECT rl_headers(ROW(true, 10, 9, NULL, '6 seconds', NULL, true, 'priv_tb', 10, '1 minute')::rl_result)$$,
                'an ungranted role calls rl_headers (PUBLIC executes it) on a result with a rate and a period');
SELECT throws_ok(statement, '42501', 'permission denied for function ' || fn,
                 'before rl_grant: ' || called || ' is refused')
FROM pg_temp.priv_decisions();
RESET ROLE;
SELECT lives_ok($$SELECT rl_grant('rl_pgtap_priv_grantee', 'limit')$$,
                'the owner runs rl_grant(role, ''limit'')');
SELECT is(pg_temp.priv_executable('rl_pgtap_priv_grantee'),
          ARRAY['rl_acquire(text,text,interval)',
                'rl_client_address(text,text,integer,text)',
                'rl_gcra(text,integer,integer,double precision,integer)',
                'rl_headers(rl_result,boolean)',
                'rl_http_guard(text,text,integer,text,integer)',
                'rl_http_guard_limit(text,text,jsonb,integer,text,integer)',
                'rl_limit(text,text,integer)',
                'rl_limit(text[],text,integer)',
                'rl_limit_trigger()',
                'rl_peek(text,text,integer)',
                'rl_release(text)',
                'rl_sliding_window(text,text,integer)',
                'rl_token_bucket(text,double precision,double precision,integer)'],
          '''limit'' is every decision function (both rl_limit, rl_acquire and rl_release, the guard and its decision) and the trigger function, and nothing else (no rl_refund, no rl_wait)');
SELECT is(pg_temp.priv_readable('rl_pgtap_priv_grantee'), '{}'::text[],
          '''limit'' opens no view');
SET ROLE rl_pgtap_priv_grantee;
SELECT lives_ok(statement, 'after rl_grant: ' || called || ' works')
FROM pg_temp.priv_decisions();
RESET ROLE;
SELECT lives_ok($$SELECT rl_revoke('rl_pgtap_priv_grantee')$$,
                'the owner runs rl_revoke(role) (''limit'' by default)');
SELECT is(pg_temp.priv_executable('rl_pgtap_priv_grantee'),
          ARRAY['rl_client_address(text,text,integer,text)', 'rl_headers(rl_result,boolean)'],
          'rl_revoke took back every function rl_grant gave');
SET ROLE rl_pgtap_priv_grantee;
SELECT throws_ok(statement, '42501', 'permission denied for function ' || fn,
                 'after rl_revoke: ' || called || ' is refused again')
FROM pg_temp.priv_decisions();
RESET ROLE;

-------------------------------------------------------------------------
-- 'wait': rl_wait alone (a call that sleeps holds its connection: not
-- with 'limit').
-------------------------------------------------------------------------
SET ROLE rl_pgtap_priv_grantee;
SELECT throws_ok($$SELECT rl_wait('priv_tb', 'priv-w', 1, '0')$$, '42501', 'permission denied for function rl_wait',
                 'before rl_grant ''wait'': rl_wait is refused');
RESET ROLE;
SELECT lives_ok($$SELECT rl_grant('rl_pgtap_priv_grantee', 'wait')$$, 'the owner runs rl_grant(role, ''wait'')');
SELECT is(pg_temp.priv_executable('rl_pgtap_priv_grantee'),
          ARRAY['rl_client_address(text,text,integer,text)', 'rl_headers(rl_result,boolean)',
                'rl_wait(text,text,integer,interval)'],
          '''wait'' is rl_wait, and no other decision function');
SET ROLE rl_pgtap_priv_grantee;
SELECT lives_ok($$SELECT rl_wait('priv_tb', 'priv-w', 1, '0')$$, 'after rl_grant ''wait'': rl_wait works');
RESET ROLE;
SELECT lives_ok($$SELECT rl_revoke('rl_pgtap_priv_grantee', 'wait')$$, 'the owner runs rl_revoke(role, ''wait'')');
SET ROLE rl_pgtap_priv_grantee;
SELECT throws_ok($$SELECT rl_wait('priv_tb', 'priv-w', 1, '0')$$, '42501', 'permission denied for function rl_wait',
                 'after rl_revoke ''wait'': rl_wait is refused again');
RESET ROLE;

-------------------------------------------------------------------------
-- 'monitor' both ways: the views, and the SECURITY DEFINER functions
-- behind them (a view calls them as its reader).
-------------------------------------------------------------------------
CREATE FUNCTION pg_temp.priv_views() RETURNS SETOF text
LANGUAGE sql AS $$ VALUES ('rl_zones'), ('rl_counters'), ('rl_keys'), ('rl_leases') $$;

SET ROLE rl_pgtap_priv_grantee;
SELECT throws_ok(format('SELECT * FROM %I', v), '42501', 'permission denied for view ' || v,
                 'before rl_grant ''monitor'': ' || v || ' is refused')
FROM pg_temp.priv_views() v;
RESET ROLE;
SELECT lives_ok($$SELECT rl_grant('rl_pgtap_priv_grantee', 'monitor')$$,
                'the owner runs rl_grant(role, ''monitor'')');
SELECT is(pg_temp.priv_readable('rl_pgtap_priv_grantee'), ARRAY['rl_counters', 'rl_keys', 'rl_leases', 'rl_zones'],
          '''monitor'' opens the four views, and no other relation');
SELECT is(pg_temp.priv_executable('rl_pgtap_priv_grantee'),
          ARRAY['ratelimit.counters()', 'ratelimit.keys()', 'ratelimit.leases()',
                'rl_client_address(text,text,integer,text)', 'rl_headers(rl_result,boolean)'],
          '''monitor'' adds the functions behind the views, and no decision function');
SET ROLE rl_pgtap_priv_grantee;
SELECT is((SELECT zone::text FROM rl_zones WHERE zone = 'priv_tb'), 'priv_tb',
          'after rl_grant ''monitor'': the role reads rl_zones');
SELECT lives_ok($$SELECT * FROM rl_counters$$,
                'after rl_grant ''monitor'': the role reads rl_counters');
SELECT is((SELECT key FROM rl_keys WHERE zone = 'priv_tb' AND key = 'priv-g'), 'priv-g',
          'after rl_grant ''monitor'': the role reads rl_keys');
SELECT throws_ok($$SELECT rl_limit('priv_tb', 'priv-g', 1)$$,
                 '42501', 'permission denied for function rl_limit',
                 '''monitor'' does not let the role decide');
SELECT throws_ok($$SELECT * FROM ratelimit.counters()$$,
                 '42501', 'permission denied for schema ratelimit',
                 'nor call ratelimit.counters() itself (no USAGE on schema ratelimit)');
RESET ROLE;
SELECT lives_ok($$SELECT rl_revoke('rl_pgtap_priv_grantee', 'monitor')$$,
                'the owner runs rl_revoke(role, ''monitor'')');
SET ROLE rl_pgtap_priv_grantee;
SELECT throws_ok(format('SELECT * FROM %I', v), '42501', 'permission denied for view ' || v,
                 'after rl_revoke ''monitor'': ' || v || ' is refused again')
FROM pg_temp.priv_views() v;
RESET ROLE;
SELECT is(pg_temp.priv_executable('rl_pgtap_priv_grantee'),
          ARRAY['rl_client_address(text,text,integer,text)', 'rl_headers(rl_result,boolean)'],
          'and the functions behind them are taken back too');

-------------------------------------------------------------------------
-- 'refund' both ways: rl_refund alone.  It is not in 'limit' (the list
-- above has no rl_refund): a role that may refund its own key is not
-- limited at all, and PostgREST publishes every function a role may run.
-- The sets are independent: revoking 'limit' leaves 'refund'.
-------------------------------------------------------------------------
SET ROLE rl_pgtap_priv_grantee;
SELECT throws_ok($$SELECT rl_refund('priv_tb', 'priv-g', 1)$$,
                 '42501', 'permission denied for function rl_refund',
                 'before rl_grant ''refund'': rl_refund is refused');
RESET ROLE;
SELECT lives_ok($$SELECT rl_grant('rl_pgtap_priv_grantee', 'refund')$$,
                'the owner runs rl_grant(role, ''refund'')');
SELECT is(pg_temp.priv_executable('rl_pgtap_priv_grantee'),
          ARRAY['rl_client_address(text,text,integer,text)', 'rl_headers(rl_result,boolean)',
                'rl_refund(text,text,integer)'],
          '''refund'' is rl_refund, and no decision function');
SELECT is(pg_temp.priv_readable('rl_pgtap_priv_grantee'), '{}'::text[],
          '''refund'' opens no view');
SET ROLE rl_pgtap_priv_grantee;
SELECT is((rl_refund('priv_tb', 'priv-g', 1)).allowed, true,
          'after rl_grant ''refund'': the role refunds');
SELECT throws_ok($$SELECT rl_limit(ARRAY['priv_tb'], 'priv-g', 1)$$,
                 '42501', 'permission denied for function rl_limit',
                 '''refund'' does not let the role decide');
RESET ROLE;
SELECT lives_ok($$SELECT rl_grant('rl_pgtap_priv_grantee', 'limit'), rl_revoke('rl_pgtap_priv_grantee', 'limit')$$,
                'the owner grants ''limit'' beside it, and revokes ''limit''');
SELECT is(pg_temp.priv_executable('rl_pgtap_priv_grantee'),
          ARRAY['rl_client_address(text,text,integer,text)', 'rl_headers(rl_result,boolean)',
                'rl_refund(text,text,integer)'],
          'revoking ''limit'' left ''refund'' alone');
SELECT lives_ok($$SELECT rl_revoke('rl_pgtap_priv_grantee', 'refund')$$,
                'the owner runs rl_revoke(role, ''refund'')');
SELECT is(pg_temp.priv_executable('rl_pgtap_priv_grantee'),
          ARRAY['rl_client_address(text,text,integer,text)', 'rl_headers(rl_result,boolean)'],
          'rl_revoke ''refund'' took rl_refund back');
SET ROLE rl_pgtap_priv_grantee;
SELECT throws_ok($$SELECT rl_refund('priv_tb', 'priv-g', 1)$$,
                 '42501', 'permission denied for function rl_refund',
                 'after rl_revoke ''refund'': rl_refund is refused again');
RESET ROLE;
-- The hint of an unknown set is how a caller learns the sets' names.
CREATE FUNCTION pg_temp.priv_hint(statement text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    hint text;
BEGIN
    EXECUTE statement;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS hint = PG_EXCEPTION_HINT;
    RETURN SQLSTATE || ' ' || hint;
END $$;
SELECT is(pg_temp.priv_hint($$SELECT rl_grant('rl_pgtap_priv_grantee', 'admin')$$),
          '22023 Use ''limit'' (the decision functions), ''wait'' (rl_wait), ''refund'' (rl_refund) or ''monitor'' (the views rl_zones, rl_counters, rl_keys and rl_leases).',
          'an unknown privilege set: 22023, and the hint names ''limit'', ''wait'', ''refund'' and ''monitor''');

-------------------------------------------------------------------------
-- Only the owner grants; bad arguments are refused.
-------------------------------------------------------------------------
-- GRANT by a role without the grant option only warns: rl_grant must
-- refuse outright, even to a role that was given EXECUTE on it.
GRANT EXECUTE ON FUNCTION rl_grant(regrole, text), rl_revoke(regrole, text) TO rl_pgtap_priv_stranger;
SET ROLE rl_pgtap_priv_stranger;
SELECT throws_ok($$SELECT rl_grant('rl_pgtap_priv_stranger')$$,
                 '42501', 'rl_grant can only be run by the owner of extension ratelimit',
                 'a role that is not the owner cannot run rl_grant, even with EXECUTE on it');
SELECT throws_ok($$SELECT rl_grant('rl_pgtap_priv_grantee', 'monitor')$$,
                 '42501', 'rl_grant can only be run by the owner of extension ratelimit',
                 'nor grant another role');
SELECT throws_ok($$SELECT rl_revoke('rl_pgtap_user')$$,
                 '42501', 'rl_revoke can only be run by the owner of extension ratelimit',
                 'nor run rl_revoke');
RESET ROLE;
SELECT is(pg_temp.priv_executable('rl_pgtap_priv_stranger'),
          ARRAY['rl_client_address(text,text,integer,text)', 'rl_grant(regrole,text)',
                'rl_headers(rl_result,boolean)', 'rl_revoke(regrole,text)'],
          'the refused rl_grant gave the stranger nothing');
SELECT is(pg_temp.priv_readable('rl_pgtap_priv_grantee'), '{}'::text[],
          'nor the other role');
SELECT ok(has_function_privilege('rl_pgtap_user', 'rl_token_bucket(text, float8, float8, int)', 'EXECUTE'),
          'the refused rl_revoke took nothing away');

SELECT throws_ok($$SELECT rl_grant('rl_pgtap_priv_grantee', 'admin')$$,
                 '22023', 'unknown privilege set "admin"',
                 'rl_grant refuses an unknown privilege set');
SELECT throws_ok($$SELECT rl_revoke('rl_pgtap_priv_grantee', 'admin')$$,
                 '22023', 'unknown privilege set "admin"',
                 'rl_revoke refuses an unknown privilege set');
SELECT throws_ok($$SELECT rl_grant(NULL)$$,
                 '22004', 'grantee and privileges must not be null',
                 'rl_grant refuses a NULL role');
SELECT throws_ok($$SELECT rl_grant('rl_pgtap_priv_grantee', NULL)$$,
                 '22004', 'grantee and privileges must not be null',
                 'rl_grant refuses a NULL privilege set');
SELECT throws_ok($$SELECT rl_revoke('rl_pgtap_priv_grantee', NULL)$$,
                 '22004', 'grantee and privileges must not be null',
                 'rl_revoke refuses a NULL privilege set');
-- PUBLIC is no role to regrole, so rl_grant cannot open the extension to
-- everyone again.
SELECT throws_ok($$SELECT rl_grant('public')$$,
                 '42704', 'role "public" does not exist',
                 'rl_grant(''public'') is refused');
SELECT is(pg_temp.priv_executable('rl_pgtap_priv_grantee'),
          ARRAY['rl_client_address(text,text,integer,text)', 'rl_headers(rl_result,boolean)'],
          'the refused calls granted nothing');
-- rl_grant builds GRANT statements from the role's name.
SELECT lives_ok($$SELECT rl_grant('"rl_pgtap_priv Odd"')$$,
                'rl_grant takes a role whose name needs quoting');
SELECT ok(has_function_privilege('rl_pgtap_priv Odd', 'rl_limit(text, text, int)', 'EXECUTE'),
          'and that role may then execute rl_limit');

-------------------------------------------------------------------------
-- rl_limit_trigger: arming it takes 'limit'.
-------------------------------------------------------------------------
SELECT rl_zone_set('priv_trg', 'token_bucket', 2, '1 hour') \gset
CREATE TABLE public.rl_pgtap_priv_posts (author text NOT NULL);
ALTER TABLE public.rl_pgtap_priv_posts OWNER TO rl_pgtap_user;
CREATE TABLE public.rl_pgtap_priv_notes (author text NOT NULL);
ALTER TABLE public.rl_pgtap_priv_notes OWNER TO rl_pgtap_priv_stranger;

SET ROLE rl_pgtap_priv_stranger;
SELECT throws_ok($$CREATE TRIGGER priv_limit BEFORE INSERT ON public.rl_pgtap_priv_notes
                   FOR EACH ROW EXECUTE FUNCTION rl_limit_trigger('priv_trg', 'author')$$,
                 '42501', 'permission denied for function rl_limit_trigger',
                 'an ungranted role cannot put rl_limit_trigger on its own table');
RESET ROLE;

SET ROLE rl_pgtap_user;
SELECT lives_ok($$CREATE TRIGGER priv_limit BEFORE INSERT ON public.rl_pgtap_priv_posts
                  FOR EACH ROW EXECUTE FUNCTION rl_limit_trigger('priv_trg', 'author')$$,
                'a role granted ''limit'' puts rl_limit_trigger on its own table');
SELECT lives_ok($$INSERT INTO public.rl_pgtap_priv_posts VALUES ('u'), ('u')$$,
                'its first two rows pass (2 per hour)');
SELECT throws_ok($$INSERT INTO public.rl_pgtap_priv_posts VALUES ('u')$$,
                 'RL429', 'rate limit of zone "priv_trg" exceeded for key "u": retry after 1800.000 s',
                 'its third row is refused');
GRANT INSERT ON public.rl_pgtap_priv_posts TO rl_pgtap_priv_stranger;
RESET ROLE;

-- The server checks EXECUTE on a trigger's function at CREATE TRIGGER
-- only, not when it fires: a role that may insert into the table is
-- limited by the trigger without any grant of its own.
SET ROLE rl_pgtap_priv_stranger;
SELECT lives_ok($$INSERT INTO public.rl_pgtap_priv_posts VALUES ('s'), ('s')$$,
                'an ungranted role inserting into that table: the trigger fires, two rows pass');
SELECT throws_ok($$INSERT INTO public.rl_pgtap_priv_posts VALUES ('s')$$,
                 'RL429', 'rate limit of zone "priv_trg" exceeded for key "s": retry after 1800.000 s',
                 'and its third row is refused');
RESET ROLE;

-- For the same reason rl_revoke leaves a trigger already created armed.
SELECT rl_revoke('rl_pgtap_user') \gset
SET ROLE rl_pgtap_user;
SELECT throws_ok($$INSERT INTO public.rl_pgtap_priv_posts VALUES ('u')$$,
                 'RL429', 'rate limit of zone "priv_trg" exceeded for key "u": retry after 1800.000 s',
                 'after rl_revoke the owner''s trigger still fires');
RESET ROLE;
SELECT results_eq($$SELECT author, count(*) FROM public.rl_pgtap_priv_posts
                    GROUP BY author ORDER BY author COLLATE "C"$$,
                  $$VALUES ('s'::text, 2::bigint), ('u', 2)$$,
                  'the table holds the rows the trigger let through, and no other');

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
