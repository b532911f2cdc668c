-- rl_limit(zones text[], key text, cost int): several limits, one
-- decision (0.5.0).  Every bad input gets its SQLSTATE and charges no
-- zone; a call is admitted only if every zone admits (a shadow zone's
-- refusal does not block), and when any refuses none is charged, on the
-- table store, the shmem store and both at once, also inside one
-- transaction that used the keys before (the table store's per-transaction
-- copies).  The result is the most restrictive zone's: of the refusing
-- zones the longest retry_after, else the fewest remaining (ties: the
-- longest reset_after).  Each zone records the call in its history as the
-- call went overall (the counters: shmem.sql).  The concurrent
-- cases are test/isolation/specs/multi_zone.spec and shmem_multi_zone.spec.
-- Needs ratelimit in shared_preload_libraries (shmem zones, counters).
-- Must pass with ratelimit.table_access set to auto, direct or spi.
BEGIN;
SET LOCAL timezone = 'UTC';
SET LOCAL intervalstyle = 'postgres';
SET LOCAL client_min_messages = warning;

SELECT plan(66);

SET LOCAL ratelimit.now_override = '2026-01-01 00:00:00+00';

-- What each zone has left for a key, "zone=remaining" in the array's order
-- (cost-0 peeks: they take nothing).
CREATE FUNCTION pg_temp.left_in(zones text[], key text) RETURNS text LANGUAGE sql AS $$
    SELECT string_agg(z || '=' || (rl_peek(z, key, 0)).remaining, ' ' ORDER BY n)
    FROM unnest(zones) WITH ORDINALITY u(z, n)
$$;
-- SQLSTATE, message and hint of a statement ('ok' when it raises nothing).
CREATE FUNCTION pg_temp.error_of(statement text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    state text;
    message text;
    hint text;
BEGIN
    EXECUTE statement;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, message = MESSAGE_TEXT, hint = PG_EXCEPTION_HINT;
    RETURN state || ': ' || message || coalesce(' | ' || nullif(hint, ''), '');
END $$;

-- The zones.  mz_* hold one key each algorithm; r_* refuse with different
-- waits; t_* tie on what is left.
SELECT rl_zone_set('mz_tb', 'token_bucket', 10, '1 minute'),
       rl_zone_set('mz_fw', 'fixed_window', 3, '1 minute'),
       rl_zone_set('mz_gc', 'gcra', 5, '1 minute'),
       rl_zone_set('mz_sw', 'sliding_window', 4, '1 minute'),
       rl_zone_set('mz_swc', 'sliding_window_counter', 4, '1 minute'),
       rl_zone_set('mz_hist', 'token_bucket', 10, '1 minute', history => true),
       rl_zone_set('mz_shadow', 'fixed_window', 1, '1 minute', shadow => true),
       rl_zone_set('mz_shm', 'token_bucket', 3, '1 minute', store => 'shmem'),
       rl_zone_set('mz_shm_hist', 'token_bucket', 3, '1 minute', store => 'shmem', history => true),
       rl_zone_set('r_fw', 'fixed_window', 2, '1 minute'),
       rl_zone_set('r_tb', 'token_bucket', 2, '10 seconds'),
       rl_zone_set('t_tb', 'token_bucket', 10, '1 minute'),
       rl_zone_set('t_fw', 'fixed_window', 10, '1 minute') \gset

-------------------------------------------------------------------------
-- 1. Bad input: its SQLSTATE, and no zone charged.
-------------------------------------------------------------------------
-- Seed: key k takes one in every zone of mz_all.
CREATE FUNCTION pg_temp.mz_all() RETURNS text[] LANGUAGE sql AS $$ SELECT ARRAY['mz_tb', 'mz_fw', 'mz_gc', 'mz_sw', 'mz_swc'] $$;
SELECT results_eq($$SELECT allowed, capacity, remaining, zone, rate, period, would_allow, retry_after IS NULL
                    FROM rl_limit(ARRAY['mz_tb', 'mz_fw', 'mz_gc', 'mz_sw', 'mz_swc'], 'k')$$,
                  $$VALUES (true, 3::bigint, 2::bigint, 'mz_fw'::text, 3::numeric, interval '1 minute', true, true)$$,
                  'seed: one call on all five algorithms is admitted; the result is mz_fw''s (2 left of 3, the fewest)');
SELECT is(pg_temp.left_in(pg_temp.mz_all(), 'k'), 'mz_tb=9 mz_fw=2 mz_gc=4 mz_sw=3 mz_swc=3',
          '... and every zone was charged one');
CREATE TEMP TABLE mz_state_before AS SELECT * FROM ratelimit.state;

SELECT throws_ok($$SELECT rl_limit(NULL::text[], 'k')$$, '22004', 'zones must not be null', 'NULL array: 22004');
SELECT throws_ok($$SELECT rl_limit(ARRAY['mz_tb', NULL], 'k')$$, '22004', 'zones must not contain null',
                 'a NULL zone in the array: 22004');
SELECT throws_ok($$SELECT rl_limit(ARRAY['mz_tb'], NULL)$$, '22004', 'key must not be null', 'NULL key: 22004');
SELECT throws_ok($$SELECT rl_limit(ARRAY['mz_tb'], 'k', NULL)$$, '22004', 'cost must not be null', 'NULL cost: 22004');
SELECT throws_ok($$SELECT rl_limit(ARRAY[]::text[], 'k')$$, '22023', 'zones must name at least one zone',
                 'an empty array: 22023');
SELECT throws_ok($$SELECT rl_limit('{}'::text[], 'k')$$, '22023', 'zones must name at least one zone',
                 'an empty array literal: 22023');
SELECT is(pg_temp.error_of($$SELECT rl_limit(ARRAY['mz_tb', 'mz_fw', 'mz_tb'], 'k')$$),
          '22023: zone "mz_tb" is named twice | Each zone takes the call''s cost once.',
          'a zone named twice: 22023, with its hint');
SELECT throws_ok($$SELECT rl_limit(array_fill('mz_tb'::text, ARRAY[17]), 'k')$$, '54000',
                 'a call may name at most 16 zones', '17 zones: 54000');
SELECT throws_ok($$SELECT rl_limit(ARRAY['mz_tb', 'mz_fw', 'mz_gc', 'mz_sw', 'mz_swc', 'mz_hist', 'mz_shadow',
                                        'mz_shm', 'mz_shm_hist', 'r_fw', 'r_tb', 't_tb', 't_fw',
                                        'mz_tb', 'mz_fw', 'mz_gc', 'mz_sw'], 'k')$$,
                 '54000', 'a call may name at most 16 zones', '17 zones, some twice: 54000 (the count is checked first)');
SELECT throws_ok($$SELECT rl_limit(ARRAY['mz_tb', 'mz_nope'], 'k')$$, '42704', 'rate-limit zone "mz_nope" does not exist',
                 'an unknown zone after a known one: 42704');
SELECT throws_ok($$SELECT rl_limit(ARRAY['mz_tb', 'MZ_FW'], 'k')$$, '42704', 'rate-limit zone "MZ_FW" does not exist',
                 'zone names are case-sensitive: 42704');
SELECT throws_ok($$SELECT rl_limit(ARRAY['mz_tb', 'mz_fw'], 'k', 4)$$, '22023', 'cost exceeds the capacity of zone "mz_fw"',
                 'cost 4 above mz_fw''s capacity 3 (below mz_tb''s 10): 22023');
SELECT throws_ok($$SELECT rl_limit(ARRAY['mz_tb', 'mz_fw'], 'k', -1)$$, '22023', 'cost must not be negative',
                 'cost -1: 22023');
SELECT throws_ok($$SELECT rl_limit(ARRAY['mz_tb', 'mz_fw'], '')$$, '22023', 'key must not be empty', 'empty key: 22023');
SELECT throws_ok($$SELECT rl_limit(ARRAY['mz_tb', 'mz_fw'], repeat('k', 1025))$$, '22001', 'key is too long',
                 'a key of 1025 bytes: 22001');
SELECT throws_ok($$SELECT rl_limit(ARRAY[['mz_tb', 'mz_fw'], ['mz_gc', 'mz_sw']], 'k')$$, '2202E',
                 'zones must be a one-dimensional array', 'a two-dimensional array: 2202E');
SELECT throws_ok($$SELECT set_config('transaction_read_only', 'on', true); SELECT rl_limit(ARRAY['mz_shm', 'mz_tb'], 'k')$$,
                 '25006', 'cannot execute rl_limit() in a read-only transaction',
                 'a table-store zone in a read-only transaction: 25006');
SELECT throws_ok($$SELECT set_config('transaction_read_only', 'on', true); SELECT rl_limit(ARRAY['mz_shm', 'mz_shm_hist'], 'k')$$,
                 '25006', 'cannot execute rl_limit() in a read-only transaction',
                 'a shmem zone with history in a read-only transaction: 25006');
SELECT is(current_setting('transaction_read_only'), 'off', 'the transaction is read-write again');
SELECT is(pg_temp.left_in(ARRAY['mz_shm', 'mz_shm_hist'], 'k'), 'mz_shm=3 mz_shm_hist=3',
          'the refused read-only calls charged no shmem zone either');
SELECT results_eq($$SELECT * FROM ratelimit.state ORDER BY key, zone_id, part$$,
                  $$SELECT * FROM mz_state_before ORDER BY key, zone_id, part$$,
                  'bad input changed no row of ratelimit.state');
SELECT is(pg_temp.left_in(pg_temp.mz_all(), 'k'), 'mz_tb=9 mz_fw=2 mz_gc=4 mz_sw=3 mz_swc=3',
          'bad input charged no zone');

-------------------------------------------------------------------------
-- 2. One decision: admitted only if every zone admits; refused, none is
-- charged.
-------------------------------------------------------------------------
-- Cost 3: mz_fw has 2 (refuses); the others would admit.
SELECT results_eq($$SELECT allowed, would_allow, remaining, zone, retry_after FROM rl_limit(pg_temp.mz_all(), 'k', 3)$$,
                  $$VALUES (false, false, 2::bigint, 'mz_fw'::text, interval '1 minute')$$,
                  'cost 3: refused by mz_fw (2 left), the result is its own');
SELECT is(pg_temp.left_in(pg_temp.mz_all(), 'k'), 'mz_tb=9 mz_fw=2 mz_gc=4 mz_sw=3 mz_swc=3',
          '... and none of the five zones was charged, not even those that would admit');
SELECT results_eq($$SELECT allowed, remaining, zone FROM rl_limit(pg_temp.mz_all(), 'k', 2)$$,
                  $$VALUES (true, 0::bigint, 'mz_fw'::text)$$,
                  'cost 2: admitted (mz_fw''s last two)');
SELECT is(pg_temp.left_in(pg_temp.mz_all(), 'k'), 'mz_tb=7 mz_fw=0 mz_gc=2 mz_sw=1 mz_swc=1',
          '... every zone charged two');
SELECT results_eq($$SELECT allowed, remaining, zone FROM rl_limit(pg_temp.mz_all(), 'k', 0)$$,
                  $$VALUES (true, 0::bigint, 'mz_fw'::text)$$,
                  'cost 0: admitted, mz_fw has nothing left');
SELECT is(pg_temp.left_in(pg_temp.mz_all(), 'k'), 'mz_tb=7 mz_fw=0 mz_gc=2 mz_sw=1 mz_swc=1', '... and charges nothing');
-- The array's order is not the decision's.
SELECT results_eq($$SELECT allowed, zone FROM rl_limit(ARRAY['mz_swc', 'mz_sw', 'mz_gc', 'mz_fw', 'mz_tb'], 'k')$$,
                  $$VALUES (false, 'mz_fw'::text)$$,
                  'the same zones in another order: refused by mz_fw');
SELECT is(pg_temp.left_in(pg_temp.mz_all(), 'k'), 'mz_tb=7 mz_fw=0 mz_gc=2 mz_sw=1 mz_swc=1', '... nothing charged');

-- The most restrictive refusal: the longest wait.  r_fw refuses until its
-- window ends (60 s), r_tb until its next token (5 s).
SELECT rl_limit(ARRAY['r_fw', 'r_tb'], 'w', 2) \gset
SELECT results_eq($$SELECT allowed, remaining, retry_after, zone FROM rl_limit(ARRAY['r_tb', 'r_fw'], 'w')$$,
                  $$VALUES (false, 0::bigint, interval '1 minute', 'r_fw'::text)$$,
                  'both refuse: the result is the longer wait, r_fw''s 60 s (not r_tb''s 5 s)');
SELECT results_eq($$SELECT allowed, remaining, retry_after, zone FROM rl_limit(ARRAY['r_fw', 'r_tb'], 'w')$$,
                  $$VALUES (false, 0::bigint, interval '1 minute', 'r_fw'::text)$$,
                  '... in either order');
SELECT results_eq($$SELECT allowed, retry_after, zone FROM rl_limit(ARRAY['r_tb', 'mz_tb'], 'w')$$,
                  $$VALUES (false, interval '5 seconds', 'r_tb'::text)$$,
                  'one refuses: its result (r_tb, 5 s), whatever the admitting zone says');
SELECT is(pg_temp.left_in(ARRAY['mz_tb'], 'w'), 'mz_tb=10', '... and the admitting zone was not charged');

-- Admitted: the fewest left, ties broken by the longest time until full
-- (t_tb: 4 tokens back in 24 s; t_fw: its window ends in 60 s).
SELECT results_eq($$SELECT allowed, remaining, reset_after, zone FROM rl_limit(ARRAY['t_tb', 't_fw'], 'tie', 4)$$,
                  $$VALUES (true, 6::bigint, interval '1 minute', 't_fw'::text)$$,
                  'a tie on 6 left: the zone full again later (t_fw) is the result');
SELECT results_eq($$SELECT allowed, remaining, reset_after, zone FROM rl_limit(ARRAY['t_fw', 't_tb'], 'tie2', 4)$$,
                  $$VALUES (true, 6::bigint, interval '1 minute', 't_fw'::text)$$,
                  '... in either order');
SELECT results_eq($$SELECT allowed, remaining, reset_after, zone FROM rl_limit(ARRAY['t_fw', 't_tb'], 'tie', 1)$$,
                  $$VALUES (true, 5::bigint, interval '1 minute', 't_fw'::text)$$,
                  '... and again (both 5 left)');
SELECT results_eq($$SELECT allowed, remaining, zone FROM rl_limit(ARRAY['t_fw', 'mz_gc'], 'few', 3)$$,
                  $$VALUES (true, 2::bigint, 'mz_gc'::text)$$,
                  'no tie: the fewest left (mz_gc 2 of 5, t_fw 7 of 10)');

-------------------------------------------------------------------------
-- 3. Shadow zones: their refusal lets the call through (would_allow
-- false); the other zones are charged.
-------------------------------------------------------------------------
SELECT allowed FROM rl_limit('mz_shadow', 's') \gset
-- (As a single call on a shadow zone: allowed, and the wait its limit
-- would impose, for the record.)
SELECT results_eq($$SELECT allowed, would_allow, retry_after, zone FROM rl_limit(ARRAY['mz_tb', 'mz_shadow'], 's')$$,
                  $$VALUES (true, false, interval '1 minute', 'mz_shadow'::text)$$,
                  'a shadow zone that would refuse: admitted, would_allow false, the shadow zone''s would-be wait');
SELECT is(pg_temp.left_in(ARRAY['mz_tb', 'mz_shadow'], 's'), 'mz_tb=9 mz_shadow=0',
          '... the other zone was charged');
SELECT results_eq($$SELECT allowed, would_allow, zone FROM rl_limit(ARRAY['mz_shadow', 'r_fw'], 'w')$$,
                  $$VALUES (false, false, 'r_fw'::text)$$,
                  'a shadow zone beside a real refusal: refused by the real one');
SELECT results_eq($$SELECT allowed, would_allow FROM rl_limit(ARRAY['mz_tb', 'mz_gc'], 's')$$,
                  $$VALUES (true, true)$$,
                  'without the shadow zone: would_allow true');

-------------------------------------------------------------------------
-- 4. Within one transaction: calls before and after a refused multi-zone
-- call see every zone as the refused call left it (untouched), on each
-- algorithm's per-transaction copy.
-------------------------------------------------------------------------
SELECT count(rl_limit(z, 'tx')) FROM unnest(pg_temp.mz_all()) z \gset
SELECT rl_limit(ARRAY['r_fw'], 'tx', 2) \gset
SELECT is(pg_temp.left_in(pg_temp.mz_all(), 'tx'), 'mz_tb=9 mz_fw=2 mz_gc=4 mz_sw=3 mz_swc=3',
          'key tx: one taken in each zone, single calls');
SELECT is((SELECT allowed FROM rl_limit(pg_temp.mz_all() || 'r_fw'::text, 'tx')), false,
          'a call on the five and r_fw (exhausted) is refused');
SELECT is(pg_temp.left_in(pg_temp.mz_all(), 'tx'), 'mz_tb=9 mz_fw=2 mz_gc=4 mz_sw=3 mz_swc=3',
          '... the five kept what they had');
SELECT is((SELECT string_agg(z || '=' || (rl_limit(z, 'tx')).remaining, ' ' ORDER BY n)
           FROM unnest(pg_temp.mz_all()) WITH ORDINALITY u(z, n)),
          'mz_tb=8 mz_fw=1 mz_gc=3 mz_sw=2 mz_swc=2',
          '... and single calls go on from there');
-- A sliding window with several entries, then a refused call, then more.
SELECT rl_zone_set('mz_sw2', 'sliding_window', 3, '1 minute') \gset
SELECT rl_limit('mz_sw2', 'tx') \gset
SELECT set_config('ratelimit.now_override', '2026-01-01 00:00:20+00', true) \gset
SELECT is((SELECT allowed FROM rl_limit(ARRAY['mz_sw2', 'r_fw'], 'tx')), false,
          'a sliding window of one entry, 20 s later, beside r_fw: refused');
SELECT results_eq($$SELECT remaining, reset_after FROM rl_limit('mz_sw2', 'tx')$$,
                  $$VALUES (1::bigint, interval '1 minute')$$,
                  '... the window holds its first entry only: a call leaves 1');
SELECT set_config('ratelimit.now_override', '2026-01-01 00:01:00+00', true) \gset
SELECT is((rl_peek('mz_sw2', 'tx', 0)).remaining, 2::bigint,
          'a minute after the first entry it has expired: 2 left (the refused call left no entry)');
SELECT set_config('ratelimit.now_override', '2026-01-01 00:00:00+00', true) \gset

-------------------------------------------------------------------------
-- 5. The table store and the shmem store in one call.
-------------------------------------------------------------------------
SELECT results_eq($$SELECT allowed, remaining, zone FROM rl_limit(ARRAY['mz_tb', 'mz_shm'], 'mix', 3)$$,
                  $$VALUES (true, 0::bigint, 'mz_shm'::text)$$,
                  'a table and a shmem zone: admitted, the shmem zone''s 3 taken');
SELECT results_eq($$SELECT allowed, zone FROM rl_limit(ARRAY['mz_tb', 'mz_shm'], 'mix')$$,
                  $$VALUES (false, 'mz_shm'::text)$$, 'then refused by the shmem zone');
SELECT is(pg_temp.left_in(ARRAY['mz_tb', 'mz_shm'], 'mix'), 'mz_tb=7 mz_shm=0', '... the table zone was not charged');
SELECT rl_limit('r_fw', 'mix2', 2) \gset
SELECT results_eq($$SELECT allowed, zone FROM rl_limit(ARRAY['mz_shm', 'r_fw'], 'mix2')$$,
                  $$VALUES (false, 'r_fw'::text)$$, 'refused by the table zone');
SELECT is(pg_temp.left_in(ARRAY['mz_shm', 'r_fw'], 'mix2'), 'mz_shm=3 r_fw=0', '... the shmem zone was not charged');
-- In a read-only transaction, shmem zones without history decide.
SELECT throws_ok($$SELECT set_config('transaction_read_only', 'on', true);
                   DO 'BEGIN IF (rl_limit(ARRAY[''mz_shm''], ''ro'')).remaining = 2 THEN RAISE EXCEPTION USING ERRCODE = ''P0042''; END IF; END'$$,
                 'P0042', NULL, 'a shmem zone without history decides in a read-only transaction (2 left)');
SELECT is(pg_temp.left_in(ARRAY['mz_shm'], 'ro'), 'mz_shm=2', '... and its charge stands (shmem is not transactional)');

-------------------------------------------------------------------------
-- 6. History: each zone records the call as the call went overall.  (Each
-- zone counts it in rl_counters likewise: shmem.sql, which runs on a fresh
-- server, where the counters' slots are not used up.)
-------------------------------------------------------------------------
SELECT rl_zone_set('c_a', 'token_bucket', 2, '1 minute', history => true),
       rl_zone_set('c_b', 'token_bucket', 1, '1 minute') \gset
SELECT is((SELECT allowed FROM rl_limit(ARRAY['c_a', 'c_b'], 'h')), true, 'c_a and c_b: the first call is admitted');
SELECT is((SELECT allowed FROM rl_limit(ARRAY['c_a', 'c_b'], 'h')), false, '... the second refused by c_b');
SELECT results_eq($$SELECT key, cost, allowed, txn_id = txid_current() FROM ratelimit.history WHERE zone = 'c_a'
                    ORDER BY allowed DESC$$,
                  $$VALUES ('h'::text, 1, true, true), ('h', 1, false, true)$$,
                  'c_a''s history: the admitted call, and the refused one as refused');
SELECT is(pg_temp.left_in(ARRAY['c_a', 'c_b'], 'h'), 'c_a=1 c_b=0', 'c_a was charged once');
-- txn_id finds the call's history rows, whichever zone kept them.
SELECT results_eq($$SELECT allowed, txn_id = txid_current(), zone FROM rl_limit(ARRAY['c_b', 'mz_hist'], 'h2')$$,
                  $$VALUES (true, true, 'c_b'::text)$$,
                  'the result is c_b''s (0 left), which keeps no history: the txn_id is still the call''s');
SELECT is((SELECT count(*) FROM ratelimit.history WHERE zone = 'mz_hist' AND key = 'h2' AND allowed), 1::bigint,
          '... mz_hist recorded the call');
SELECT results_eq($$SELECT zone, txn_id = txid_current() FROM rl_limit(ARRAY['mz_tb', 'c_a'], 'h3')$$,
                  $$VALUES ('c_a'::text, true)$$,
                  'the result is c_a''s (1 left), which keeps a history: its txn_id');

-------------------------------------------------------------------------
-- 7. One zone in the array: the single call's result.
-------------------------------------------------------------------------
SELECT rl_zone_set('one_a', 'gcra', 6, '1 minute'), rl_zone_set('one_b', 'gcra', 6, '1 minute') \gset
SELECT results_eq($$SELECT allowed, capacity, remaining, retry_after, reset_after, would_allow, rate, period
                    FROM rl_limit(ARRAY['one_a'], 'k', 2)$$,
                  $$SELECT allowed, capacity, remaining, retry_after, reset_after, would_allow, rate, period
                    FROM rl_limit('one_b', 'k', 2)$$,
                  'an array of one zone decides as rl_limit(zone, ...) does');

SELECT * FROM finish();
ROLLBACK;
