-- rl_limit(zones text[], key, cost): several limits on one key, one
-- decision, on the table store (shmem.sql does the shmem store and a
-- mixed call).  Admitted only if every zone admits (a shadow zone's
-- refusal does not block); when one refuses, none is charged.  The result
-- is the most restrictive zone's: refused, the refusing zone with the
-- longest retry_after; admitted, the zone with the fewest remaining (ties:
-- the longest reset_after); would_allow is whether every zone's limit
-- admitted.  Each zone counts the call, and records it in its history, as
-- the call went.  On a fixed test clock; the comments give the numbers
-- each result must show.
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
SET ratelimit.now_override = '2026-05-01 00:00:00+00';
-- Sets the test clock to 2026-05-01 00:00:00 plus us microseconds.
CREATE FUNCTION pg_temp.at(us bigint) RETURNS text LANGUAGE sql AS $$
    SELECT set_config('ratelimit.now_override',
                      to_char(timestamp '2026-05-01 00:00:00' + us * interval '1 microsecond',
                              'YYYY-MM-DD HH24:MI:SS.US') || '+00', false)
$$;

-------------------------------------------------------------------------
-- 1. 5 per second AND 2 per minute on one key.  Ten calls in the first
-- second (every 100 ms): exactly 2 admitted; the refusals are the
-- per-minute zone's (retry 30 s at first, then 100 ms less each call).
-------------------------------------------------------------------------
SELECT rl_zone_set('mz_sec', 'token_bucket', 5, '1 second');
SELECT rl_zone_set('mz_min', 'token_bucket', 2, '1 minute');
SELECT t / 1000 AS ms, (r).*
FROM (SELECT t, rl_limit(ARRAY['mz_sec', 'mz_min'], 'k') AS r
      FROM (SELECT t, pg_temp.at(t) FROM generate_series(0, 900000, 100000) t OFFSET 0) c OFFSET 0) s;
-- The per-second zone was charged for the 2 admitted calls only: 5 calls
-- at one instant on a new key admit 2, and the per-second zone has 3
-- left, not 0 (rl_peek shows it); the per-minute zone 0.
SELECT pg_temp.at(10000000);
SELECT g, (r).allowed, (r).remaining, (r).zone
FROM (SELECT g, rl_limit(ARRAY['mz_sec', 'mz_min'], 'k2') AS r FROM generate_series(1, 5) g OFFSET 0) s;
SELECT zone, remaining, reset_after FROM rl_peek('mz_sec', 'k2', 0);
SELECT zone, remaining, reset_after FROM rl_peek('mz_min', 'k2', 0);
-- The order of the array changes nothing: the same refusal.
SELECT allowed, remaining, retry_after, zone FROM rl_limit(ARRAY['mz_min', 'mz_sec'], 'k2');
-- A minute later the per-minute zone is full again: cost 2 admitted, the
-- per-second zone (full) has 3 left, the per-minute 0: the result is the
-- per-minute zone's (fewest left).
SELECT pg_temp.at(70000000);
SELECT allowed, remaining, reset_after, zone FROM rl_limit(ARRAY['mz_sec', 'mz_min'], 'k2', 2);

-------------------------------------------------------------------------
-- 2. Several zones refuse: the result is the one with the longest wait,
-- whatever the order.  mz_w10 admits 1 per 10 s, mz_w60 1 per minute
-- (fixed windows); mz_big (token_bucket, 100 per minute) admits.
-------------------------------------------------------------------------
SELECT pg_temp.at(100000000);
SELECT rl_zone_set('mz_w10', 'fixed_window', 1, '10 seconds');
SELECT rl_zone_set('mz_w60', 'fixed_window', 1, '1 minute');
SELECT rl_zone_set('mz_big', 'token_bucket', 100, '1 minute');
SELECT allowed, remaining, zone FROM rl_limit(ARRAY['mz_w10', 'mz_w60', 'mz_big'], 'k');
SELECT allowed, would_allow, remaining, retry_after, reset_after, zone
FROM rl_limit(ARRAY['mz_w10', 'mz_w60', 'mz_big'], 'k');
SELECT allowed, would_allow, remaining, retry_after, reset_after, zone
FROM rl_limit(ARRAY['mz_big', 'mz_w60', 'mz_w10'], 'k');
-- The first call: both windows have 0 left; the result is mz_w60's, full
-- again last (60 s against 10 s).  10 s on only mz_w60 refuses (retry
-- 50 s); mz_w10 would admit and is not charged: it still has its 1.
SELECT pg_temp.at(110000000);
SELECT allowed, would_allow, remaining, retry_after, zone FROM rl_limit(ARRAY['mz_w10', 'mz_w60'], 'k');
SELECT remaining FROM rl_peek('mz_w10', 'k', 0);
-- A refusing zone is the result even when an admitting one has fewer
-- left after the call (mz_one: 1 per hour, would be left with 0).
SELECT rl_zone_set('mz_one', 'fixed_window', 1, '1 hour');
SELECT allowed, would_allow, remaining, retry_after, zone FROM rl_limit(ARRAY['mz_one', 'mz_w60'], 'k');
SELECT remaining FROM rl_peek('mz_one', 'k', 0);

-------------------------------------------------------------------------
-- 3. Every zone admits: the result is the zone with the fewest left; of
-- zones with as many left, the one full again last.  mz_f1m and mz_f1h:
-- fixed windows of 3 per minute and per hour (2 left each after a call:
-- reset 60 s and 3600 s); mz_big 99 left.
-------------------------------------------------------------------------
SELECT pg_temp.at(200000000);
SELECT rl_zone_set('mz_f1m', 'fixed_window', 3, '1 minute');
SELECT rl_zone_set('mz_f1h', 'fixed_window', 3, '1 hour');
SELECT allowed, would_allow, remaining, reset_after, zone FROM rl_limit(ARRAY['mz_big', 'mz_f1m', 'mz_f1h'], 'tie');
SELECT allowed, would_allow, remaining, reset_after, zone FROM rl_limit(ARRAY['mz_f1h', 'mz_f1m', 'mz_big'], 'tie2');
-- Every zone was charged: 1 taken from each.
SELECT p.zone, p.remaining FROM unnest(ARRAY['mz_big', 'mz_f1m', 'mz_f1h']) z, rl_peek(z, 'tie', 0) p ORDER BY 1;
-- Fewest left wins: mz_one (0 left, reset 1 h) against mz_f1h (2 left,
-- reset 1 h less 3:20).
SELECT allowed, remaining, reset_after, zone FROM rl_limit(ARRAY['mz_f1h', 'mz_one'], 'few');

-------------------------------------------------------------------------
-- 4. A shadow zone's refusal does not block: mz_shadow (shadow, fixed
-- window 1 per minute) with mz_big.  The second call: mz_shadow would
-- refuse, the call is admitted and mz_big charged; the result is
-- mz_shadow's (0 left), allowed but would_allow false, retry_after when
-- its limit would admit (60 s).  With mz_one (a new key: admits, 0 left,
-- full in 1 h) as well, mz_shadow's refusal is still what the result must
-- explain: would_allow false with its retry_after, not mz_one's (an
-- admitting zone has no wait).  Then mz_one refuses: the call is refused,
-- the result is mz_one's, and mz_big is not charged.
-------------------------------------------------------------------------
SELECT pg_temp.at(300000000);
SELECT rl_zone_set('mz_shadow', 'fixed_window', 1, '1 minute', shadow => true);
SELECT allowed, would_allow, remaining, zone FROM rl_limit(ARRAY['mz_big', 'mz_shadow'], 'sh');
SELECT allowed, would_allow, remaining, retry_after, zone FROM rl_limit(ARRAY['mz_big', 'mz_shadow'], 'sh');
SELECT remaining AS big_left FROM rl_peek('mz_big', 'sh', 0);
SELECT allowed, would_allow, remaining, retry_after, zone FROM rl_limit(ARRAY['mz_shadow', 'mz_one', 'mz_big'], 'sh');
SELECT allowed, would_allow, remaining, retry_after, zone FROM rl_limit(ARRAY['mz_shadow', 'mz_one', 'mz_big'], 'sh');
SELECT remaining AS big_left FROM rl_peek('mz_big', 'sh', 0);

-------------------------------------------------------------------------
-- 5. A one-zone array is rl_limit(zone): twin zones of every algorithm
-- take the same calls (costs 1, 2, 3, 0 at steps 0.7 s apart), one by
-- rl_limit(ARRAY[zone]), its twin by rl_limit(zone): every result the
-- same but the zone's name.
-------------------------------------------------------------------------
SELECT count(rl_zone_set('mz_1' || a || s, algorithm, 3, '2 seconds',
                         CASE WHEN algorithm IN ('token_bucket', 'gcra') THEN 4 END))
FROM (VALUES ('tb', 'token_bucket'), ('gcra', 'gcra'), ('fw', 'fixed_window'),
             ('swc', 'sliding_window_counter'), ('sw', 'sliding_window')) v(a, algorithm),
     (VALUES ('_a'), ('_b')) t(s);
CREATE TEMP TABLE twins AS
SELECT a, step, rl_limit(ARRAY['mz_1' || a || '_a'], 'k', cost) AS by_array,
       rl_limit('mz_1' || a || '_b', 'k', cost) AS by_name
FROM unnest(ARRAY['tb', 'gcra', 'fw', 'swc', 'sw']) a,
     LATERAL (SELECT step, cost, pg_temp.at(400000000 + step * 700000), a AS same
              FROM generate_series(1, 12) step, LATERAL (SELECT (ARRAY[1, 2, 3, 0])[step % 4 + 1] AS cost) c) c
ORDER BY a, step;
SELECT a, count(*) AS calls, count(*) FILTER (WHERE (by_array).allowed) AS admitted,
       count(*) FILTER (WHERE (by_array).zone <> (by_name).zone) AS zone_named,
       count(*) FILTER (WHERE ((by_array).allowed, (by_array).capacity, (by_array).remaining,
                               (by_array).retry_after, (by_array).reset_after, (by_array).txn_id,
                               (by_array).would_allow, (by_array).rate, (by_array).period)
                              IS DISTINCT FROM
                              ((by_name).allowed, (by_name).capacity, (by_name).remaining,
                               (by_name).retry_after, (by_name).reset_after, (by_name).txn_id,
                               (by_name).would_allow, (by_name).rate, (by_name).period)) AS differing
FROM twins GROUP BY a ORDER BY a;

-------------------------------------------------------------------------
-- 6. History: each zone with history on records the call as it went
-- (allowed or refused), with the transaction's id; a zone without
-- history records nothing.  mz_h3 (token_bucket 3 per minute, history),
-- mz_h2 (fixed window 2 per minute, history), mz_big (no history): three
-- calls of cost 1: admitted, admitted, refused by mz_h2.  The result's
-- txn_id is the deciding zone's (mz_h2 keeps a history).
-------------------------------------------------------------------------
SELECT pg_temp.at(500000000);
TRUNCATE ratelimit.history;
SELECT rl_zone_set('mz_h3', 'token_bucket', 3, '1 minute', history => true);
SELECT rl_zone_set('mz_h2', 'fixed_window', 2, '1 minute', history => true);
BEGIN;
SELECT g, (r).allowed, (r).zone, (r).txn_id = txid_current() AS is_txid_current
FROM (SELECT g, rl_limit(ARRAY['mz_h3', 'mz_h2', 'mz_big'], 'h') AS r FROM generate_series(1, 3) g OFFSET 0) s;
SELECT zone, key, cost, allowed, txn_id = txid_current() AS is_txid_current
FROM ratelimit.history ORDER BY zone, allowed DESC;
COMMIT;
-- The refused call took nothing from mz_h3: 1 left.
SELECT remaining FROM rl_peek('mz_h3', 'h', 0);
-- A deciding zone without history (mz_one, capacity 1, has the fewest
-- left): txn_id is still the transaction's, since mz_h3 recorded the call.
SELECT allowed, zone, txn_id = txid_current() AS is_txid_current FROM rl_limit(ARRAY['mz_h3', 'mz_one'], 'h2');
SELECT zone, key, cost, allowed FROM ratelimit.history WHERE key = 'h2';
-- Cost 2: recorded with its cost.
SELECT allowed, zone FROM rl_limit(ARRAY['mz_h3', 'mz_big'], 'h3', 2);
SELECT zone, key, cost, allowed FROM ratelimit.history WHERE key = 'h3';

-------------------------------------------------------------------------
-- 7. Errors change nothing: NULL zones, element, key or cost (22004), an
-- empty array or a zone named twice (22023), a 2-dimensional array
-- (2202E), more than 16 zones (54000), an unknown zone (42704), a cost
-- above any zone's capacity (22023), a negative cost (22023), an empty
-- key (22023).
-------------------------------------------------------------------------
SELECT pg_temp.at(600000000);
SELECT q, regress.try(q) FROM (VALUES
    ($$SELECT rl_limit(NULL::text[], 'e')$$),
    ($$SELECT rl_limit(ARRAY['mz_big', NULL], 'e')$$),
    ($$SELECT rl_limit(ARRAY['mz_big'], NULL)$$),
    ($$SELECT rl_limit(ARRAY['mz_big'], 'e', NULL)$$),
    ($$SELECT rl_limit(ARRAY[]::text[], 'e')$$),
    ($$SELECT rl_limit(ARRAY['mz_big', 'mz_f1m', 'mz_big'], 'e')$$),
    ($$SELECT rl_limit(ARRAY[ARRAY['mz_big'], ARRAY['mz_f1m']], 'e')$$),
    ($$SELECT rl_limit(ARRAY['mz_big', 'mz_nope'], 'e')$$),
    ($$SELECT rl_limit(ARRAY['mz_big', 'mz_f1m'], 'e', 4)$$),
    ($$SELECT rl_limit(ARRAY['mz_big', 'mz_f1m'], 'e', -1)$$),
    ($$SELECT rl_limit(ARRAY['mz_big'], '')$$)) v(q);
SELECT * FROM regress.error($$SELECT rl_limit(ARRAY['mz_big', 'mz_f1m', 'mz_big'], 'e')$$);
SELECT * FROM regress.error($$SELECT rl_limit(ARRAY['mz_big', 'mz_f1m'], 'e', 4)$$);
-- 16 zones are fine, 17 too many (54000, before any is looked up).
SELECT count(rl_zone_set('mz_n' || g, 'token_bucket', 100, '1 minute')) FROM generate_series(1, 17) g;
SELECT allowed, remaining, zone FROM rl_limit((SELECT array_agg('mz_n' || g ORDER BY g) FROM generate_series(1, 16) g), 'e');
SELECT * FROM regress.error($$SELECT rl_limit((SELECT array_agg('mz_n' || g ORDER BY g) FROM generate_series(1, 17) g), 'e')$$);
SELECT regress.try($$SELECT rl_limit((SELECT array_agg('mz_nope' || g) FROM generate_series(1, 17) g), 'e')$$);
-- Nothing was taken by the calls that raised: mz_big and mz_f1m full,
-- mz_n1 99 (the 16-zone call), mz_n17 100.
SELECT p.zone, p.remaining FROM unnest(ARRAY['mz_big', 'mz_f1m', 'mz_n1', 'mz_n17']) z, rl_peek(z, 'e', 0) p ORDER BY 1;
-- Table-store zones in a read-only transaction: 25006, nothing taken.
BEGIN READ ONLY;
SELECT regress.try($$SELECT rl_limit(ARRAY['mz_big', 'mz_f1m'], 'e')$$);
COMMIT;
SELECT p.zone, p.remaining FROM unnest(ARRAY['mz_big', 'mz_f1m']) z, rl_peek(z, 'e', 0) p ORDER BY 1;

-------------------------------------------------------------------------
-- 8. Transactional on the table store: a rolled-back call gives back
-- every zone's charge; a savepoint rolled back, the calls after it.
-------------------------------------------------------------------------
SELECT pg_temp.at(700000000);
BEGIN;
SELECT allowed, remaining, zone FROM rl_limit(ARRAY['mz_big', 'mz_f1m', 'mz_f1h'], 'tx', 2);
ROLLBACK;
SELECT p.zone, p.remaining FROM unnest(ARRAY['mz_big', 'mz_f1m', 'mz_f1h']) z, rl_peek(z, 'tx', 0) p ORDER BY 1;
BEGIN;
SELECT allowed, remaining, zone FROM rl_limit(ARRAY['mz_big', 'mz_f1m'], 'tx');
SAVEPOINT s;
SELECT allowed, remaining, zone FROM rl_limit(ARRAY['mz_big', 'mz_f1m'], 'tx', 2);
ROLLBACK TO SAVEPOINT s;
COMMIT;
SELECT p.zone, p.remaining FROM unnest(ARRAY['mz_big', 'mz_f1m']) z, rl_peek(z, 'tx', 0) p ORDER BY 1;

-------------------------------------------------------------------------
-- 9. The exact sliding window in an array: charged only when the call is
-- admitted.  mz_sw (3 per 10 s) with mz_one (1 per hour): the
-- first call is admitted (mz_sw 2 left), the next two are refused by
-- mz_one: mz_sw keeps its 2.  mz_sw refusing blocks the other zones:
-- with mz_big, 2 more admitted, then mz_sw refuses (retry 10 s, the first
-- admission's age) and mz_big is not charged.
-------------------------------------------------------------------------
SELECT pg_temp.at(800000000);
SELECT rl_zone_set('mz_sw', 'sliding_window', 3, '10 seconds');
SELECT g, (r).allowed, (r).remaining, (r).zone
FROM (SELECT g, rl_limit(ARRAY['mz_sw', 'mz_one'], 'sw') AS r FROM generate_series(1, 3) g OFFSET 0) s;
SELECT remaining, reset_after FROM rl_peek('mz_sw', 'sw', 0);
SELECT g, (r).allowed, (r).remaining, (r).retry_after, (r).zone
FROM (SELECT g, rl_limit(ARRAY['mz_big', 'mz_sw'], 'sw') AS r FROM generate_series(1, 3) g OFFSET 0) s;
SELECT p.zone, p.remaining FROM unnest(ARRAY['mz_sw', 'mz_big']) z, rl_peek(z, 'sw', 0) p ORDER BY 1;
-- rl_sliding_window agrees: refused, nothing left.
SELECT allowed, remaining FROM rl_sliding_window('mz_sw', 'sw');
-- 10 s later the three admissions of 00:13:20 have left: admitted, 2
-- left.
SELECT pg_temp.at(810000000);
SELECT allowed, remaining, zone FROM rl_limit(ARRAY['mz_big', 'mz_sw'], 'sw');
-- In a rolled-back transaction the window's admission goes too.
BEGIN;
SELECT pg_temp.at(811000000);
SELECT allowed, remaining, zone FROM rl_limit(ARRAY['mz_big', 'mz_sw'], 'sw');
ROLLBACK;
SELECT remaining FROM rl_peek('mz_sw', 'sw', 0);

-------------------------------------------------------------------------
-- 10. Every algorithm in one call; then rl_counters: each zone counts
-- every call as it went overall (admitted, or refused when any zone
-- refused), so the zones of one call show the same counts.
-------------------------------------------------------------------------
SELECT pg_temp.at(900000000);
SELECT rl_zone_set('mz_c_tb', 'token_bucket', 4, '1 minute');
SELECT rl_zone_set('mz_c_gcra', 'gcra', 4, '1 minute', burst => 3);
SELECT rl_zone_set('mz_c_fw', 'fixed_window', 5, '1 minute');
SELECT rl_zone_set('mz_c_swc', 'sliding_window_counter', 5, '1 minute');
SELECT rl_zone_set('mz_c_sw', 'sliding_window', 5, '1 minute');
-- gcra (burst 3) runs out first: 3 admitted, then refused by it (retry
-- 15 s, its emission interval).
SELECT g, (r).allowed, (r).remaining, (r).retry_after, (r).zone
FROM (SELECT g, rl_limit(ARRAY['mz_c_tb', 'mz_c_gcra', 'mz_c_fw', 'mz_c_swc', 'mz_c_sw'], 'k') AS r
      FROM generate_series(1, 5) g OFFSET 0) s;
SELECT p.zone, p.remaining FROM unnest(ARRAY['mz_c_tb', 'mz_c_gcra', 'mz_c_fw', 'mz_c_swc', 'mz_c_sw']) z,
       rl_peek(z, 'k', 0) p ORDER BY 1;
SELECT c.* FROM unnest(ARRAY['mz_c_tb', 'mz_c_gcra', 'mz_c_fw', 'mz_c_swc', 'mz_c_sw']) z, regress.counted(z) c ORDER BY 1;
-- Section 1's zones count the same: 10 calls (2 admitted), 5 (2), 1
-- refused, 1 admitted: 5 admitted, 12 refused.
SELECT c.* FROM unnest(ARRAY['mz_sec', 'mz_min']) z, regress.counted(z) c ORDER BY 1;

-------------------------------------------------------------------------
-- Clean up: the tests after this one list every zone.
-------------------------------------------------------------------------
SELECT count(rl_zone_drop(zone)) AS dropped FROM ratelimit.zone WHERE zone LIKE 'mz\_%';
