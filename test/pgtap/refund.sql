-- rl_refund(zone, key, cost) (0.5.0): gives cost back to a key ("don't
-- count failed requests"), never above its capacity, and returns what
-- rl_peek(zone, key, 0) shows afterwards (allowed true).  Per algorithm:
-- token_bucket and the cron token bucket add tokens; gcra moves its
-- theoretical arrival time back, never before now; fixed_window takes from
-- the current window (an expired window gives nothing back);
-- sliding_window_counter from the current window, then the previous one;
-- sliding_window removes the newest entries.  A key without state is
-- full: nothing to do, no row written.  Bad input gets its SQLSTATE and
-- changes nothing.  On the table store a refund is transactional; on the
-- shmem store it stands at once.  With history on it is recorded with a
-- negative cost.  (Refunds racing other sessions:
-- test/isolation/specs/refund.spec.)
-- Needs ratelimit in shared_preload_libraries (a shmem zone).
-- Must pass with ratelimit.table_access set to auto, direct or spi.
BEGIN;
SET LOCAL timezone = 'UTC';
SET LOCAL intervalstyle = 'postgres';
SET LOCAL client_min_messages = warning;

SELECT plan(55);

SET LOCAL ratelimit.now_override = '2026-01-01 00:00:00+00';
-- at(seconds): moves the test clock to 2026-01-01 00:00:00 + seconds.
CREATE FUNCTION pg_temp.at(seconds int) RETURNS void LANGUAGE sql AS $$
    SELECT NULL::void FROM (SELECT set_config('ratelimit.now_override',
        ('2026-01-01 00:00:00+00'::timestamptz + make_interval(secs => seconds))::text, true)) s
$$;
-- What a key has left (cost-0 peek).
CREATE FUNCTION pg_temp.left_in(zone text, key text) RETURNS bigint LANGUAGE sql AS $$
    SELECT remaining FROM rl_peek(zone, key, 0)
$$;

SELECT rl_zone_set('f_tb', 'token_bucket', 10, '1 minute'),
       rl_zone_set('f_gc', 'gcra', 10, '1 minute'),
       rl_zone_set('f_fw', 'fixed_window', 5, '1 minute'),
       rl_zone_set('f_swc', 'sliding_window_counter', 5, '1 minute'),
       rl_zone_set('f_sw', 'sliding_window', 5, '1 minute'),
       rl_zone_set('f_hist', 'token_bucket', 10, '1 minute', history => true),
       rl_zone_set('f_shm', 'token_bucket', 10, '1 minute', store => 'shmem') \gset
-- A cron zone without a job.  rl_zone_set refuses a cron zone no job could
-- refill (this database is not cron.database_name): the superuser writes
-- its configuration directly, as a restored dump fills the zone table.
INSERT INTO ratelimit.zone (zone, algorithm, rate, period, burst, refill)
VALUES ('f_cron', 'token_bucket', 10, '1 minute', NULL, 'cron');

-------------------------------------------------------------------------
-- 1. Bad input: its SQLSTATE, and nothing changes.
-------------------------------------------------------------------------
SELECT is((rl_limit('f_tb', 'k', 6)).remaining, 4::bigint, 'seed: f_tb''s key k takes 6 of 10');
CREATE TEMP TABLE f_state_before AS SELECT * FROM ratelimit.state;
SELECT throws_ok($$SELECT rl_refund('f_tb', 'k', -1)$$, '22023', 'cost must not be negative', 'cost -1: 22023');
SELECT throws_ok($$SELECT rl_refund('f_tb', 'k', -2147483648)$$, '22023', 'cost must not be negative', 'cost -2^31: 22023');
SELECT throws_ok($$SELECT rl_refund('f_tb', 'k', NULL)$$, '22004', 'cost must not be null', 'NULL cost: 22004');
SELECT throws_ok($$SELECT rl_refund('f_tb', NULL)$$, '22004', 'key must not be null', 'NULL key: 22004');
SELECT throws_ok($$SELECT rl_refund(NULL, 'k')$$, '22004', 'zone must not be null', 'NULL zone: 22004');
SELECT throws_ok($$SELECT rl_refund('f_nope', 'k')$$, '42704', 'rate-limit zone "f_nope" does not exist',
                 'unknown zone: 42704');
SELECT throws_ok($$SELECT rl_refund('f_tb', '')$$, '22023', 'key must not be empty', 'empty key: 22023');
SELECT throws_ok($$SELECT rl_refund('f_tb', repeat('k', 1025))$$, '22001', 'key is too long', 'a key of 1025 bytes: 22001');
SELECT throws_ok($$SELECT set_config('transaction_read_only', 'on', true); SELECT rl_refund('f_tb', 'k')$$,
                 '25006', 'cannot execute rl_refund() in a read-only transaction',
                 'a table-store zone in a read-only transaction: 25006');
SELECT is(current_setting('transaction_read_only'), 'off', 'the transaction is read-write again');
SELECT results_eq($$SELECT * FROM ratelimit.state ORDER BY key, zone_id, part$$,
                  $$SELECT * FROM f_state_before ORDER BY key, zone_id, part$$,
                  'bad input changed no row of ratelimit.state');
SELECT is(pg_temp.left_in('f_tb', 'k'), 4::bigint, '... and the key still has 4');

-------------------------------------------------------------------------
-- 2. Per algorithm.
-------------------------------------------------------------------------
-- token_bucket: tokens back, capped at the capacity; the result is what a
-- cost-0 peek shows.
SELECT results_eq($$SELECT * FROM rl_refund('f_tb', 'k', 2)$$,
                  $$VALUES (true, 10::bigint, 6::bigint, NULL::interval, interval '24 seconds', NULL::bigint, true,
                            'f_tb'::text, 10::numeric, interval '1 minute')$$,
                  'token_bucket: 4 + 2 = 6, the whole rl_result (allowed, 24 s until full, the zone''s rate and period)');
SELECT results_eq($$SELECT * FROM rl_peek('f_tb', 'k', 0)$$, $$SELECT * FROM rl_refund('f_tb', 'k', 0)$$,
                  'cost 0: changes nothing, returns what rl_peek(zone, key, 0) returns');
SELECT is((rl_refund('f_tb', 'k', 100)).remaining, 10::bigint, 'token_bucket: never above the capacity (6 + 100: 10)');
SELECT is((rl_limit('f_tb', 'k', 10)).allowed, true, '... and the full bucket admits 10 at once');
SELECT is((rl_limit('f_tb', 'k', 1)).allowed, false, '... but not 11 (the refund was capped)');

-- gcra: the theoretical arrival time moves back, never before now.
SELECT is((rl_limit('f_gc', 'k', 4)).remaining, 6::bigint, 'gcra: take 4 of 10');
SELECT results_eq($$SELECT remaining, reset_after FROM rl_refund('f_gc', 'k', 3)$$,
                  $$VALUES (9::bigint, interval '6 seconds')$$, 'gcra: refund 3: 9 left, full in one emission (6 s)');
SELECT results_eq($$SELECT remaining, reset_after FROM rl_refund('f_gc', 'k', 5)$$,
                  $$VALUES (10::bigint, interval '0')$$, 'gcra: refund 5 more: full, not beyond');
SELECT is((rl_limit('f_gc', 'k', 10)).allowed, true, '... 10 at once are admitted');
SELECT is((rl_limit('f_gc', 'k', 1)).allowed, false, '... the 11th is not');

-- fixed_window: from the current window; an expired window gives nothing.
SELECT is((rl_limit('f_fw', 'k', 3)).remaining, 2::bigint, 'fixed_window: take 3 of 5');
SELECT pg_temp.at(20);
SELECT results_eq($$SELECT remaining, reset_after FROM rl_refund('f_fw', 'k', 2)$$,
                  $$VALUES (4::bigint, interval '40 seconds')$$,
                  'fixed_window: refund 2 twenty seconds in: 4 left, the window still ends at 60 s');
SELECT is((rl_refund('f_fw', 'k', 9)).remaining, 5::bigint, 'fixed_window: a refund beyond what was admitted: 5, not more');
-- The window is empty now: it no longer anchors, the next admitted call
-- starts a new one.
SELECT results_eq($$SELECT remaining, reset_after FROM rl_limit('f_fw', 'k', 5)$$,
                  $$VALUES (0::bigint, interval '1 minute')$$,
                  '... 5 are admitted, in a new window from 20 s (the emptied one no longer anchors)');
SELECT pg_temp.at(80);
SELECT is((rl_refund('f_fw', 'k', 3)).remaining, 5::bigint, 'fixed_window: after the window ended, a refund changes nothing');
SELECT is((rl_limit('f_fw', 'k', 5)).allowed, true, '... a new window admits its 5');
SELECT is((rl_limit('f_fw', 'k', 1)).allowed, false, '... and no more (the late refund gave nothing)');
SELECT pg_temp.at(0);

-- sliding_window_counter: the current window first, then the previous.
SELECT is((rl_limit('f_swc', 'k', 4)).remaining, 1::bigint, 'sliding_window_counter: take 4 of 5 in the first window');
SELECT pg_temp.at(60);
SELECT is((rl_limit('f_swc', 'k', 1)).remaining, 0::bigint,
          'at the next window''s start the previous 4 weigh fully: one more, 0 left');
SELECT results_eq($$SELECT remaining, reset_after FROM rl_refund('f_swc', 'k', 3)$$,
                  $$VALUES (3::bigint, interval '1 minute')$$,
                  'refund 3: the current window''s 1, then 2 of the previous 4: 3 left');
SELECT pg_temp.at(0);

-- sliding_window (exact): the newest entries go first.
SELECT is((rl_limit('f_sw', 'k', 1)).remaining, 4::bigint, 'sliding_window: 1 at 0 s');
SELECT pg_temp.at(10);
SELECT is((rl_limit('f_sw', 'k', 1)).remaining, 3::bigint, '... 1 at 10 s');
SELECT pg_temp.at(20);
SELECT is((rl_limit('f_sw', 'k', 2)).remaining, 1::bigint, '... 2 at 20 s');
SELECT results_eq($$SELECT remaining, reset_after FROM rl_refund('f_sw', 'k', 2)$$,
                  $$VALUES (3::bigint, interval '50 seconds')$$,
                  'refund 2: the entry of 20 s goes; full when the one of 10 s expires (50 s)');
SELECT results_eq($$SELECT remaining, reset_after FROM rl_refund('f_sw', 'k', 1)$$,
                  $$VALUES (4::bigint, interval '40 seconds')$$,
                  'refund 1: the entry of 10 s goes; full when the one of 0 s expires (40 s)');
SELECT pg_temp.at(60);
SELECT is(pg_temp.left_in('f_sw', 'k'), 5::bigint, 'at 60 s the entry of 0 s expired: 5');
SELECT is((rl_limit('f_sw', 'k', 5)).allowed, true, '... and 5 are admitted at once');
SELECT pg_temp.at(0);

-- The cron token bucket: tokens back, capped; with no job, a bucket below
-- its capacity promises no time (reset_after NULL).
SELECT is((rl_limit('f_cron', 'k', 6)).remaining, 4::bigint, 'cron token bucket: take 6 of 10');
SELECT results_eq($$SELECT allowed, remaining, reset_after FROM rl_refund('f_cron', 'k', 3)$$,
                  $$VALUES (true, 7::bigint, NULL::interval)$$, 'refund 3: 7, no time promised without a job');
SELECT results_eq($$SELECT remaining, reset_after FROM rl_refund('f_cron', 'k', 30)$$,
                  $$VALUES (10::bigint, interval '0')$$, 'refund 30: full (10), not beyond');

-- A key without state is full: nothing to give back, nothing written.
SELECT results_eq($$SELECT allowed, remaining FROM rl_refund('f_tb', 'ghost', 3)$$,
                  $$VALUES (true, 10::bigint)$$, 'a key without state: full');
SELECT is_empty($$SELECT 1 FROM ratelimit.state WHERE key = 'ghost'$$, '... and no row was written for it');

-------------------------------------------------------------------------
-- 3. History, transactions, the shmem store.
-------------------------------------------------------------------------
SELECT is((rl_limit('f_hist', 'k', 4)).remaining, 6::bigint, 'a zone with history: take 4');
SELECT results_eq($$SELECT remaining, txn_id = txid_current() FROM rl_refund('f_hist', 'k', 3)$$,
                  $$VALUES (9::bigint, true)$$, 'refund 3: 9, and the result carries the history txn_id');
SELECT results_eq($$SELECT cost, allowed FROM ratelimit.history WHERE zone = 'f_hist' AND key = 'k' ORDER BY cost DESC$$,
                  $$VALUES (4, true), (-3, true)$$,
                  'the history holds the call (4) and the refund as a negative cost, allowed');
SELECT is((SELECT sum(cost) FROM ratelimit.history WHERE zone = 'f_hist' AND key = 'k'), 1::bigint,
          '... so the sum of the costs is what the key was charged in the end');

-- The table store: a refund is undone with its (sub)transaction.
SELECT is((rl_limit('f_tb', 'tx', 5)).remaining, 5::bigint, 'table store: take 5');
SAVEPOINT refund;
SELECT (rl_refund('f_tb', 'tx', 4)).remaining AS tx_refunded \gset
ROLLBACK TO SAVEPOINT refund;
SELECT is(:'tx_refunded'::bigint, 9::bigint, 'refunded 4 inside a savepoint: 9');
SELECT is(pg_temp.left_in('f_tb', 'tx'), 5::bigint, '... rolled back: 5 again');

-- The shmem store: a refund stands at once, whatever the transaction does.
SELECT is((rl_limit('f_shm', 'tx', 5)).remaining, 5::bigint, 'shmem store: take 5');
SAVEPOINT refund_shm;
SELECT (rl_refund('f_shm', 'tx', 4)).remaining AS shm_refunded \gset
ROLLBACK TO SAVEPOINT refund_shm;
SELECT is(:'shm_refunded'::bigint, 9::bigint, 'refunded 4 inside a savepoint: 9');
SELECT is(pg_temp.left_in('f_shm', 'tx'), 9::bigint, '... the rollback leaves it: 9 (shmem is not transactional)');

SELECT * FROM finish();
ROLLBACK;
