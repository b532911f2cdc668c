-- The shmem store's privileges: an ordinary role can neither
-- decide nor read rl_counters until the owner grants it (rl_grant 'limit'
-- and 'monitor': PUBLIC executes no decision function and reads no view
-- since 0.5.0); then it decides on shmem zones (and with rl_token_bucket /
-- rl_gcra when a superuser chose the shmem store) and reads rl_counters,
-- but cannot choose the store, the full-table policy, nor call
-- ratelimit.shmem_counters() directly; ratelimit.shmem_max_keys is fixed at
-- server start for everyone.
-- Needs ratelimit in shared_preload_libraries (the test clusters preload
-- it).  The shmem store is not transactional: what these calls take stays
-- taken after the final ROLLBACK, so the keys are this file's own
-- (pgtap-shmem-*) and rl_counters is checked by differences.  Last,
-- rl_counters by zone name (0.5.0), which scripts/test.sh runs first
-- thing on a fresh server.
BEGIN;
SET LOCAL timezone = 'UTC';
SET LOCAL client_min_messages = warning;

SELECT plan(48);

SET LOCAL ratelimit.now_override = '2026-01-01 00:00:00+00';
CREATE ROLE rl_pgtap_shmem_user NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE;

SELECT ok(EXISTS (SELECT 1 FROM pg_catalog.pg_settings WHERE name = 'ratelimit.shmem_max_keys'),
          'ratelimit is preloaded: ratelimit.shmem_max_keys exists');
SELECT results_eq(
    $$SELECT name::text, context::text FROM pg_catalog.pg_settings
      WHERE name IN ('ratelimit.default_store', 'ratelimit.shmem_full_policy', 'ratelimit.shmem_max_keys')
      ORDER BY name$$,
    $$VALUES ('ratelimit.default_store', 'superuser'), ('ratelimit.shmem_full_policy', 'superuser'),
             ('ratelimit.shmem_max_keys', 'postmaster')$$,
    'default_store and shmem_full_policy are superuser settings, shmem_max_keys is set at server start');

-- Without a grant the role can neither decide nor read rl_counters (the
-- refusal comes before any of the extension's code runs: nothing taken).
SELECT ok(NOT has_table_privilege('rl_pgtap_shmem_user', 'rl_counters', 'SELECT'),
          'without a grant, an ordinary role may not SELECT from rl_counters');
SET ROLE rl_pgtap_shmem_user;
SELECT throws_ok($$SELECT rl_limit('pgtap_shmem', 'pgtap-shmem-k')$$,
                 '42501', 'permission denied for function rl_limit',
                 'without a grant, the role cannot call rl_limit');
SELECT throws_ok($$SELECT rl_token_bucket('pgtap-shmem-nogrant', 1, 10, 3)$$,
                 '42501', 'permission denied for function rl_token_bucket',
                 'without a grant, the role cannot call rl_token_bucket');
SELECT throws_ok($$SELECT * FROM rl_counters$$,
                 '42501', 'permission denied for view rl_counters',
                 'without a grant, the role cannot read rl_counters');
RESET ROLE;
SELECT lives_ok($$SELECT rl_grant('rl_pgtap_shmem_user')$$, 'the owner grants the role the decision functions');
SELECT lives_ok($$SELECT rl_grant('rl_pgtap_shmem_user', 'monitor')$$, 'and the monitoring views');

-- Catalog view of the privileges.
SELECT ok(has_table_privilege('rl_pgtap_shmem_user', 'rl_counters', 'SELECT'),
          'with rl_grant(..., ''monitor''), an ordinary role may SELECT from rl_counters');
SELECT function_privs_are('ratelimit', 'shmem_counters', ARRAY[]::text[],
                          'rl_pgtap_shmem_user', ARRAY[]::text[],
                          'an ordinary role may not execute ratelimit.shmem_counters()');
SELECT is_empty(
    $$SELECT a.privilege_type
      FROM pg_catalog.pg_proc p,
           aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
      WHERE p.oid = 'ratelimit.shmem_counters()'::regprocedure AND a.grantee = 0$$,
    'PUBLIC holds no privilege on ratelimit.shmem_counters()');

-- A shmem zone (token_bucket, 10 per minute) and its counters so far.
SELECT rl_zone_set('pgtap_shmem', 'token_bucket', 10, '1 minute', store => 'shmem') AS zone_set,
       rl_reset('pgtap_shmem', 'pgtap-shmem-k') AS reset_before \gset
-- rl_token_bucket's and rl_gcra's keys cannot be reset: this run's own.
SELECT 'pgtap-shmem-tb-' || txid_current() AS tb_key, 'pgtap-shmem-gcra-' || txid_current() AS gcra_key \gset
CREATE TEMP TABLE counters_before AS
    SELECT coalesce((SELECT allowed FROM rl_counters WHERE zone = 'pgtap_shmem'), 0) AS allowed,
           coalesce((SELECT refused FROM rl_counters WHERE zone = 'pgtap_shmem'), 0) AS refused;
GRANT SELECT ON counters_before TO rl_pgtap_shmem_user;
-- The zone's calls since counters_before, as whoever calls it reads
-- rl_counters (or the error it gets).
CREATE FUNCTION pg_temp.counted() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    counted text;
BEGIN
    SELECT format('%s allowed, %s refused', c.allowed - b.allowed, c.refused - b.refused) INTO counted
    FROM rl_counters c, counters_before b WHERE c.zone = 'pgtap_shmem';
    RETURN counted;
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END $$;
-- rl_token_bucket and rl_gcra keep state in shared memory for this
-- transaction; an ordinary role uses what a superuser chose.
SET LOCAL ratelimit.default_store = shmem;

-------------------------------------------------------------------------
-- As the ordinary role.
-------------------------------------------------------------------------
SET ROLE rl_pgtap_shmem_user;
SELECT is(current_user::text, 'rl_pgtap_shmem_user', 'now running as the ordinary role');

SELECT is((SELECT remaining FROM rl_limit('pgtap_shmem', 'pgtap-shmem-k')), 9::bigint,
          'the role calls a shmem zone: 9 of 10 left');
SELECT is((SELECT remaining FROM rl_limit('pgtap_shmem', 'pgtap-shmem-k')), 8::bigint,
          'and again: 8 left');
SELECT is((SELECT remaining FROM rl_peek('pgtap_shmem', 'pgtap-shmem-k')), 7::bigint,
          'rl_peek on the shmem zone: 7 would be left');
SELECT results_eq($$SELECT allowed, remaining, retry_after FROM rl_limit('pgtap_shmem', 'pgtap-shmem-k', 9)$$,
                  $$VALUES (false, 8::bigint, interval '6 seconds')$$,
                  'a call of cost 9 with 8 left is refused, retry after one token (6 s); the peek took nothing');
SELECT is(current_setting('ratelimit.default_store'), 'shmem', 'the superuser''s store choice applies to the role');
SELECT is(rl_token_bucket(:'tb_key', 1, 10, 3), 7::bigint,
          'the role calls rl_token_bucket on the shmem store');
SELECT is((SELECT remaining FROM rl_gcra(:'gcra_key', 15, 30, 60)), 15::bigint,
          'the role calls rl_gcra on the shmem store');

SELECT lives_ok($$SELECT * FROM rl_counters$$, 'the role can read rl_counters');
SELECT is(pg_temp.counted(), '2 allowed, 1 refused',
          'the role reads its calls on the zone in rl_counters: 2 allowed, 1 refused (the peek is not a decision)');

-- Settings the role may not change.
SELECT throws_ok($$SET ratelimit.default_store = 'table'$$,
                 '42501', 'permission denied to set parameter "ratelimit.default_store"',
                 'the role cannot SET ratelimit.default_store');
SELECT throws_ok($$SET LOCAL ratelimit.default_store = shmem$$,
                 '42501', 'permission denied to set parameter "ratelimit.default_store"',
                 'the role cannot SET LOCAL ratelimit.default_store');
SELECT throws_ok($$SELECT set_config('ratelimit.default_store', 'table', false)$$,
                 '42501', 'permission denied to set parameter "ratelimit.default_store"',
                 'the role cannot set_config ratelimit.default_store');
SELECT throws_ok($$SET ratelimit.shmem_full_policy = deny$$,
                 '42501', 'permission denied to set parameter "ratelimit.shmem_full_policy"',
                 'the role cannot SET ratelimit.shmem_full_policy');
SELECT throws_ok($$SELECT set_config('ratelimit.shmem_full_policy', 'error', true)$$,
                 '42501', 'permission denied to set parameter "ratelimit.shmem_full_policy"',
                 'the role cannot set_config ratelimit.shmem_full_policy');
SELECT throws_ok($$SET ratelimit.shmem_max_keys = 128$$,
                 '55P02', 'parameter "ratelimit.shmem_max_keys" cannot be changed without restarting the server',
                 'the role cannot SET ratelimit.shmem_max_keys');
SELECT results_eq(
    $$SELECT current_setting('ratelimit.default_store'), current_setting('ratelimit.shmem_full_policy')$$,
    $$VALUES ('shmem', 'allow')$$,
    'the refused attempts changed nothing');

-- What the role may not call.
SELECT throws_ok($$SELECT * FROM ratelimit.shmem_counters()$$,
                 '42501', 'permission denied for schema ratelimit',
                 'the role cannot call ratelimit.shmem_counters() (no access to the schema)');
RESET ROLE;
GRANT USAGE ON SCHEMA ratelimit TO rl_pgtap_shmem_user;
SET ROLE rl_pgtap_shmem_user;
SELECT throws_ok($$SELECT * FROM ratelimit.shmem_counters()$$,
                 '42501', 'permission denied for function shmem_counters',
                 'nor with USAGE on the schema: no EXECUTE on the function');
RESET ROLE;
REVOKE USAGE ON SCHEMA ratelimit FROM rl_pgtap_shmem_user;
SET ROLE rl_pgtap_shmem_user;
SELECT throws_ok($$SELECT rl_reset('pgtap_shmem', 'pgtap-shmem-k')$$,
                 '42501', 'permission denied for function rl_reset',
                 'the role cannot reset a key of a shmem zone');
SELECT throws_ok($$SELECT rl_zone_set('pgtap_shmem2', 'token_bucket', 10, '1 minute', store => 'shmem')$$,
                 '42501', 'permission denied for function rl_zone_set',
                 'the role cannot create a shmem zone');
SELECT throws_ok($$SELECT rl_zone_set('pgtap_shmem', 'token_bucket', 10, '1 minute', store => 'table')$$,
                 '42501', 'permission denied for function rl_zone_set',
                 'the role cannot move a zone out of shared memory');

RESET ROLE;

-------------------------------------------------------------------------
-- As the superuser again.
-------------------------------------------------------------------------
SELECT is((SELECT remaining FROM rl_peek('pgtap_shmem', 'pgtap-shmem-k', 0)), 8::bigint,
          'the key still has the 8 tokens the role''s calls left');
SELECT is(pg_temp.counted(), '2 allowed, 1 refused',
          'a superuser reads the same counts in rl_counters');
SELECT is_empty($$SELECT 1 FROM ratelimit.state WHERE key LIKE 'pgtap-shmem-%'$$,
                'the role''s shmem calls wrote no row to ratelimit.state');
SELECT throws_ok($$SET ratelimit.shmem_max_keys = 128$$,
                 '55P02', 'parameter "ratelimit.shmem_max_keys" cannot be changed without restarting the server',
                 'not even a superuser can SET ratelimit.shmem_max_keys');
SELECT throws_ok($$SELECT set_config('ratelimit.shmem_max_keys', '128', false)$$,
                 '55P02', 'parameter "ratelimit.shmem_max_keys" cannot be changed without restarting the server',
                 'nor set_config it');
SELECT throws_ok($$SET LOCAL ratelimit.shmem_max_keys = 128$$,
                 '55P02', 'parameter "ratelimit.shmem_max_keys" cannot be changed without restarting the server',
                 'nor SET LOCAL it');
SELECT lives_ok($$SET LOCAL ratelimit.default_store = 'table'$$, 'a superuser can set ratelimit.default_store');
SELECT lives_ok($$SET LOCAL ratelimit.shmem_full_policy = deny$$, 'a superuser can set ratelimit.shmem_full_policy');
SELECT results_eq(
    $$SELECT current_setting('ratelimit.default_store'), current_setting('ratelimit.shmem_full_policy')$$,
    $$VALUES ('table', 'deny')$$,
    'and the values took');
SELECT lives_ok($$SELECT * FROM ratelimit.shmem_counters()$$, 'a superuser can call ratelimit.shmem_counters()');
SELECT isnt_empty($$SELECT 1 FROM ratelimit.shmem_counters() c JOIN ratelimit.zone z USING (zone_id)
                    WHERE z.zone = 'pgtap_shmem'$$,
                  'ratelimit.shmem_counters() has the zone''s counters under its zone_id');

-------------------------------------------------------------------------
-- rl_counters counts by zone name (0.5.0).  Here, first thing on a fresh
-- server: the counters keep a slot per zone id for the server's lifetime
-- (1024 in all), which the suites that run later use up.
-------------------------------------------------------------------------
-- A zone's earlier ids (reset => true, or a drop and a zone of the same
-- name) add up under its name.
SELECT rl_zone_set('pgtap_cnt', 'token_bucket', 1, '1 minute') \gset
SELECT zone_id AS cnt_id1 FROM ratelimit.zone WHERE zone = 'pgtap_cnt' \gset
SELECT count(rl_limit('pgtap_cnt', 'k')) FROM generate_series(1, 3) \gset
SELECT rl_zone_set('pgtap_cnt', reset => true) \gset
SELECT zone_id AS cnt_id2 FROM ratelimit.zone WHERE zone = 'pgtap_cnt' \gset
SELECT count(rl_limit('pgtap_cnt', 'k')) FROM generate_series(1, 2) \gset
SELECT rl_zone_drop('pgtap_cnt') \gset
SELECT rl_zone_set('pgtap_cnt', 'fixed_window', 5, '1 minute', store => 'shmem') \gset
SELECT count(rl_limit('pgtap_cnt', 'k')) \gset
SELECT results_eq($$SELECT allowed, refused FROM rl_counters WHERE zone = 'pgtap_cnt'$$,
                  $$VALUES (3::bigint, 3::bigint)$$,
                  'one row for a zone reset, then dropped and defined again: its three ids'' counts add up (1 + 1 + 1, 2 + 1)');
-- An id that no table names any more shows as such, with its own counts.
DELETE FROM ratelimit.retired_zone_id WHERE zone = 'pgtap_cnt';
SELECT results_eq(format($$SELECT zone, allowed, refused FROM rl_counters
                           WHERE zone IN ('pgtap_cnt', '(zone id %s)', '(zone id %s)') ORDER BY zone$$,
                         :cnt_id1, :cnt_id2),
                  format($$VALUES ('(zone id %s)'::text, 1::bigint, 2::bigint), ('(zone id %s)', 1, 1), ('pgtap_cnt', 1, 0)$$,
                         :cnt_id1, :cnt_id2),
                  'ids no table names show as (zone id N), each with its own counts');
-- rl_limit(zones text[], ...): each zone counts the call as it went
-- overall, also a zone that would have admitted it.
SELECT rl_zone_set('pgtap_cnt_a', 'token_bucket', 2, '1 minute'),
       rl_zone_set('pgtap_cnt_b', 'token_bucket', 1, '1 minute', store => 'shmem') \gset
SELECT is(array_agg((rl_limit(ARRAY['pgtap_cnt_a', 'pgtap_cnt_b'], 'k')).allowed ORDER BY n), ARRAY[true, false],
          'two zones: the first call admitted, the second refused by pgtap_cnt_b')
FROM generate_series(1, 2) n;
SELECT results_eq($$SELECT zone, allowed, refused FROM rl_counters WHERE zone LIKE 'pgtap\_cnt\__' ORDER BY zone$$,
                  $$VALUES ('pgtap_cnt_a'::text, 1::bigint, 1::bigint), ('pgtap_cnt_b', 1, 1)$$,
                  '... each zone counted one allowed and one refused call (pgtap_cnt_a too, which had room)');

SELECT * FROM finish();
ROLLBACK;
