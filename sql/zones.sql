-- Zones and rl_headers on a fixed test clock.  The
-- comments give the numbers each result must show, worked out from the
-- algorithms' definitions; the expected output was checked against them.
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
SET ratelimit.now_override = '2026-01-01 00:00:00+00';
-- The history counts below (sections 10 and 16) are of this file's zones:
-- the earlier files' history (shadow, trigger) goes.
TRUNCATE ratelimit.history;
-- The ids of a zone's rows in ratelimit.state.
CREATE FUNCTION pg_temp.zone_id(zone text) RETURNS int LANGUAGE sql AS $$
    SELECT zone_id FROM ratelimit.zone z WHERE z.zone = $1
$$;
-- Sets the test clock to base (UTC) plus us microseconds.
CREATE FUNCTION pg_temp.clock(base timestamp, us bigint) RETURNS text LANGUAGE sql AS $$
    SELECT set_config('ratelimit.now_override',
                      to_char(base + us * interval '1 microsecond', 'YYYY-MM-DD HH24:MI:SS.US') || '+00',
                      false)
$$;

-------------------------------------------------------------------------
-- 1. One zone per algorithm; rl_zones lists them (capacity: burst, else rate).
-------------------------------------------------------------------------
SELECT rl_zone_set('z_tb', 'token_bucket', 10, '1 minute', burst => 20);
SELECT rl_zone_set('z_gcra', 'gcra', 30, '1 minute', burst => 16);
SELECT rl_zone_set('z_fw', 'fixed_window', 3, '1 minute');
SELECT rl_zone_set('z_swc', 'sliding_window_counter', 4, '7 seconds');
SELECT rl_zone_set('z_sw', 'sliding_window', 3, '10 seconds');
SELECT rl_zone_set('z_hist', 'token_bucket', 2, '1 hour', history => true);
SELECT zone, algorithm, rate, period, capacity, burst, store, history,
       created_at = updated_at AS never_altered
FROM rl_zones ORDER BY zone;

-------------------------------------------------------------------------
-- 2. token_bucket: capacity = burst (20), refilled 10 per minute, one token
-- every 6 s.  21 calls at one instant: remaining 19 .. 0, reset_after
-- 6 s per missing token; the 21st is refused, retry_after 6 s.
-------------------------------------------------------------------------
SELECT g, (r).*
FROM (SELECT g, rl_limit('z_tb', 'a') AS r FROM generate_series(1, 21) g OFFSET 0) s;
-- 30 s later 5 tokens are back: remaining 4, reset (20 - 4) * 6 = 96 s.
SET ratelimit.now_override = '2026-01-01 00:00:30+00';
SELECT * FROM rl_limit('z_tb', 'a');
-- 3 s later 4.5 tokens: cost 5 is refused, nothing taken (remaining 4),
-- retry_after 0.5 token = 3 s, reset_after 15.5 tokens = 93 s.
SET ratelimit.now_override = '2026-01-01 00:00:33+00';
SELECT * FROM rl_limit('z_tb', 'a', 5);
-- 3 s later exactly 5: admitted, empty, reset 120 s.
SET ratelimit.now_override = '2026-01-01 00:00:36+00';
SELECT * FROM rl_limit('z_tb', 'a', 5);
-- A whole minute of refill caps at capacity: 20 tokens, not 10 + 20.
SET ratelimit.now_override = '2026-01-01 00:10:00+00';
SELECT * FROM rl_limit('z_tb', 'a', 0);

-------------------------------------------------------------------------
-- 3. gcra zone: rate 30 per minute (emission interval 2 s), capacity =
-- burst = 16: redis-cell's (max_burst 15, count 30, period 60).  16 calls
-- at one instant: remaining 15 .. 0, reset_after 2 .. 32 s; the 17th is
-- refused, retry_after 2 s, reset_after 32 s.
-------------------------------------------------------------------------
SET ratelimit.now_override = '2026-01-01 01:00:00+00';
SELECT g, (r).*
FROM (SELECT g, rl_limit('z_gcra', 'a') AS r FROM generate_series(1, 17) g OFFSET 0) s;
-- 2 s later one emission interval has passed: admitted, remaining 0,
-- reset 32 s (the theoretical arrival time is now + 32 s).
SET ratelimit.now_override = '2026-01-01 01:00:02+00';
SELECT * FROM rl_limit('z_gcra', 'a');
-- At +12 s the TAT (+34 s) is 22 s ahead: 5 free.  Cost 3: admitted, TAT
-- +40 s, remaining (32 - 28) / 2 = 2, reset 28 s.  Cost 3 again: refused,
-- retry 2 s (TAT + 6 - 32 = +14 s), remaining 2, reset 28 s.
SET ratelimit.now_override = '2026-01-01 01:00:12+00';
SELECT * FROM rl_limit('z_gcra', 'a', 3);
SELECT * FROM rl_limit('z_gcra', 'a', 3);

-------------------------------------------------------------------------
-- 4. fixed_window, 3 per minute: the whole allowance comes back a period
-- after the first call of a window (01:00:10 -> 01:01:10), not at the
-- minute.
-------------------------------------------------------------------------
SET ratelimit.now_override = '2026-01-01 01:00:10+00';
SELECT * FROM rl_limit('z_fw', 'a');  -- remaining 2, reset 60 s
SET ratelimit.now_override = '2026-01-01 01:00:20+00';
SELECT * FROM rl_limit('z_fw', 'a');  -- remaining 1, reset 50 s
SET ratelimit.now_override = '2026-01-01 01:00:30+00';
SELECT * FROM rl_limit('z_fw', 'a');  -- remaining 0, reset 40 s
SET ratelimit.now_override = '2026-01-01 01:00:40+00';
SELECT * FROM rl_limit('z_fw', 'a');  -- refused, retry 30 s, reset 30 s
SET ratelimit.now_override = '2026-01-01 01:01:00+00';
SELECT * FROM rl_limit('z_fw', 'a');  -- still refused at the minute: retry 10 s
SET ratelimit.now_override = '2026-01-01 01:01:09.999999+00';
SELECT * FROM rl_limit('z_fw', 'a');  -- refused, retry 1 microsecond
SET ratelimit.now_override = '2026-01-01 01:01:10+00';
SELECT * FROM rl_limit('z_fw', 'a');  -- new window: remaining 2, reset 60 s
SET ratelimit.now_override = '2026-01-01 01:01:20+00';
SELECT * FROM rl_limit('z_fw', 'a', 2);  -- cost 2 fits exactly: remaining 0, reset 50 s
SELECT * FROM rl_limit('z_fw', 'a');  -- refused, retry 50 s

-------------------------------------------------------------------------
-- 5. sliding_window_counter, 4 per 7 s.  Windows are aligned to multiples
-- of 7 s since 2000-01-01 00:00:00+00 (PostgreSQL's epoch): 2026-01-01 is
-- 9497 days = 820540800 s later, 2 s past a multiple of 7, so the windows
-- around it are [-2 s, 5 s), [5 s, 12 s), [12 s, 19 s) ...  The estimate is
-- previous * (time left in the current window) / 7 s + current.
-------------------------------------------------------------------------
SET ratelimit.now_override = '2026-01-01 00:00:00+00';
-- 4 admitted (remaining 3 .. 0, reset = 5 s left + 7 s = 12 s); the 5th is
-- refused: in the next window current becomes previous (4), and
-- 4 * left / 7 + 1 <= 4 once left <= 5.25 s, i.e. 1.75 s into it:
-- retry_after = 5 + 1.75 = 6.75 s.
SELECT g, (r).*
FROM (SELECT g, rl_limit('z_swc', 'a') AS r FROM generate_series(1, 5) g OFFSET 0) s;
-- At 5 s (a new window, all 7 s of it left): 4 * 7 / 7 + 1 = 5 > 4, refused
-- although an aligned fixed window would admit; retry 1.75 s; reset 7 s.
SET ratelimit.now_override = '2026-01-01 00:00:05+00';
SELECT * FROM rl_limit('z_swc', 'a');
-- At 6.75 s: 4 * 5.25 / 7 + 1 = 4, admitted, remaining 0, reset 5.25 + 7 s.
SET ratelimit.now_override = '2026-01-01 00:00:06.75+00';
SELECT * FROM rl_limit('z_swc', 'a');
-- At 12 s (window [12, 19), previous = 1): 1 + 1 = 2, remaining 2, reset 14 s.
SET ratelimit.now_override = '2026-01-01 00:00:12+00';
SELECT * FROM rl_limit('z_swc', 'a');
-- The state: current 1, previous 1, window start 00:00:12, a multiple of 7 s
-- since 2000-01-01.
SELECT tokens AS current_count, counter AS previous_count, updated_at AS window_start,
       extract(epoch FROM updated_at - timestamptz '2000-01-01 00:00:00+00') % 7 AS seconds_past_multiple_of_7
FROM ratelimit.state WHERE key = 'a' AND zone_id = pg_temp.zone_id('z_swc');
-- At 30 s (window [26, 33)): two windows on, the key is fresh again:
-- remaining 3, reset 3 s left + 7 s = 10 s.
SET ratelimit.now_override = '2026-01-01 00:00:30+00';
SELECT * FROM rl_limit('z_swc', 'a');

-------------------------------------------------------------------------
-- 6. sliding_window (exact), 3 per 10 s: admitted iff the cost admitted in
-- the trailing 10 s (an entry at t counts while t > now - 10 s) plus the
-- cost stays within 3.
-------------------------------------------------------------------------
SET ratelimit.now_override = '2026-01-01 02:00:00+00';
SELECT * FROM rl_limit('z_sw', 'a');  -- remaining 2, reset 10 s
SET ratelimit.now_override = '2026-01-01 02:00:02+00';
SELECT * FROM rl_limit('z_sw', 'a');  -- remaining 1, reset 10 s
SET ratelimit.now_override = '2026-01-01 02:00:04+00';
SELECT * FROM rl_sliding_window('z_sw', 'a');  -- remaining 0, reset 10 s
SET ratelimit.now_override = '2026-01-01 02:00:05+00';
SELECT * FROM rl_limit('z_sw', 'a');  -- refused: retry 5 s (the 0 s entry leaves at 10 s), reset 4 + 10 - 5 = 9 s
SET ratelimit.now_override = '2026-01-01 02:00:09.999999+00';
SELECT * FROM rl_sliding_window('z_sw', 'a');  -- refused: retry 1 microsecond, reset 4.000001 s
SET ratelimit.now_override = '2026-01-01 02:00:10+00';
SELECT * FROM rl_sliding_window('z_sw', 'a');  -- admitted (0 s entry gone): remaining 0, reset 10 s
SET ratelimit.now_override = '2026-01-01 02:00:11+00';
SELECT * FROM rl_limit('z_sw', 'a');  -- refused: the 2 s entry leaves at 12 s: retry 1 s, reset 9 s
SET ratelimit.now_override = '2026-01-01 02:00:12+00';
SELECT * FROM rl_limit('z_sw', 'a');  -- admitted: entries 4, 10, 12; remaining 0
-- At 14.5 s the 4 s entry has left: 2 in the window.  Cost 2 is refused
-- (remaining 1; the 10 s entry leaves at 20 s: retry 5.5 s; reset
-- 12 + 10 - 14.5 = 7.5 s); cost 1 is admitted.
SET ratelimit.now_override = '2026-01-01 02:00:14.5+00';
SELECT * FROM rl_sliding_window('z_sw', 'a', 2);
SELECT * FROM rl_sliding_window('z_sw', 'a', 1);
-- rl_sliding_window is for sliding_window zones only: 42809 elsewhere,
-- and nothing is taken.
SELECT zone, regress.try(format('SELECT rl_sliding_window(%L, %L)', zone, 'sw-wrong'))
FROM unnest(ARRAY['z_tb', 'z_gcra', 'z_fw', 'z_swc']) AS zone;
SELECT count(*) AS rows_of_refused_calls FROM ratelimit.state WHERE key = 'sw-wrong';

-------------------------------------------------------------------------
-- 7. rl_peek returns what rl_limit would (same cost, same instant) and
-- consumes nothing.  On every zone, at 03:00:00, a fresh key 'pk' gets a
-- peek then rl_limit with cost 1, then 2, then 1:
--   z_fw   remaining 2, 0, then refused (retry 60 s)
--   z_gcra remaining 15, 13, 12; reset 2, 6, 8 s
--   z_sw   remaining 2, 0, then refused (retry 10 s)
--   z_swc  (1 s into a 7 s window) remaining 3, 1, 0; reset 6 + 7 = 13 s
--   z_tb   remaining 19, 17, 16; reset 6, 18, 24 s
-------------------------------------------------------------------------
CREATE FUNCTION pg_temp.peek_then_limit(zone text, key text, cost int,
    OUT peek_matches_limit boolean, OUT allowed boolean, OUT remaining bigint,
    OUT retry_after interval, OUT reset_after interval)
LANGUAGE plpgsql AS $$
DECLARE
    p rl_result;
    l rl_result;
BEGIN
    p := rl_peek(zone, key, cost);
    l := rl_limit(zone, key, cost);
    peek_matches_limit := p IS NOT DISTINCT FROM l;
    allowed := l.allowed;
    remaining := l.remaining;
    retry_after := l.retry_after;
    reset_after := l.reset_after;
END $$;
SET ratelimit.now_override = '2026-01-01 03:00:00+00';
SELECT zone, cost, (r).*
FROM (SELECT zone, cost, pg_temp.peek_then_limit(zone, 'pk', cost) AS r
      FROM unnest(ARRAY['z_tb', 'z_gcra', 'z_fw', 'z_swc', 'z_sw']) AS zone,
           (VALUES (1)) AS c(cost) OFFSET 0) s
ORDER BY zone;
SELECT zone, cost, (r).*
FROM (SELECT zone, cost, pg_temp.peek_then_limit(zone, 'pk', cost) AS r
      FROM unnest(ARRAY['z_tb', 'z_gcra', 'z_fw', 'z_swc', 'z_sw']) AS zone,
           (VALUES (2)) AS c(cost) OFFSET 0) s
ORDER BY zone;
SELECT zone, cost, (r).*
FROM (SELECT zone, cost, pg_temp.peek_then_limit(zone, 'pk', cost) AS r
      FROM unnest(ARRAY['z_tb', 'z_gcra', 'z_fw', 'z_swc', 'z_sw']) AS zone,
           (VALUES (1)) AS c(cost) OFFSET 0) s
ORDER BY zone;
-- Peeks consume nothing and write nothing, at any instant and cost: the
-- rows of 'pk' are the same before and after 140 peeks (every zone, costs
-- 0..3, every 15 s from 03:00:00 to 03:01:30), and rl_limit afterwards
-- still sees the state the three calls left.
CREATE TEMP TABLE state_before AS
    SELECT * FROM ratelimit.state WHERE key = 'pk';
SELECT count(*) AS rows_of_pk FROM state_before;
DO $$
DECLARE
    peeks int := 0;
    zone text;
BEGIN
    FOR step IN 0 .. 6 LOOP
        PERFORM pg_temp.clock('2026-01-01 03:00:00', step * 15000000);
        FOREACH zone IN ARRAY ARRAY['z_tb', 'z_gcra', 'z_fw', 'z_swc', 'z_sw'] LOOP
            FOR cost IN 0 .. 3 LOOP
                PERFORM rl_peek(zone, 'pk', cost);
                peeks := peeks + 1;
            END LOOP;
        END LOOP;
    END LOOP;
    RAISE NOTICE '% peeks', peeks;
END $$;
SELECT count(*) AS changed_or_new_rows
FROM (SELECT * FROM ratelimit.state WHERE key = 'pk' EXCEPT SELECT * FROM state_before) s;
SELECT count(*) AS rows_now FROM ratelimit.state WHERE key = 'pk';
-- Cost 0 at 03:00:00: tb 16 left, gcra 12, the others 0.
SET ratelimit.now_override = '2026-01-01 03:00:00+00';
SELECT zone, (r).remaining
FROM (SELECT zone, rl_limit(zone, 'pk', 0) AS r
      FROM unnest(ARRAY['z_tb', 'z_gcra', 'z_fw', 'z_swc', 'z_sw']) AS zone OFFSET 0) s
ORDER BY zone;
SELECT count(*) AS rows_of_peeked_new_key FROM ratelimit.state WHERE key = 'never-taken';
SELECT * FROM rl_peek('z_tb', 'never-taken', 3);  -- a fresh bucket: remaining 17, reset 18 s
SELECT count(*) AS rows_after_peek FROM ratelimit.state WHERE key = 'never-taken';

-------------------------------------------------------------------------
-- 8. Cost 0 always passes, takes nothing and writes no row for a new key;
-- on an exhausted key it reports remaining 0.
-------------------------------------------------------------------------
SET ratelimit.now_override = '2026-01-01 04:00:00+00';
SELECT zone, (r).*
FROM (SELECT zone, rl_limit(zone, 'zero', 0) AS r
      FROM unnest(ARRAY['z_tb', 'z_gcra', 'z_fw', 'z_swc', 'z_sw']) AS zone OFFSET 0) s
ORDER BY 1;
SELECT count(*) AS rows_of_zero_cost_key FROM ratelimit.state WHERE key = 'zero';
-- Exhaust every zone's key 'zero' in one statement (20 calls each), then cost 0.
SELECT zone, count(*) FILTER (WHERE (r).allowed) AS admitted
FROM (SELECT zone, rl_limit(zone, 'zero') AS r
      FROM unnest(ARRAY['z_tb', 'z_gcra', 'z_fw', 'z_swc', 'z_sw']) AS zone,
           generate_series(1, 20) OFFSET 0) s
GROUP BY zone ORDER BY zone;
SELECT zone, (r).*
FROM (SELECT zone, rl_limit(zone, 'zero', 0) AS r
      FROM unnest(ARRAY['z_tb', 'z_gcra', 'z_fw', 'z_swc', 'z_sw']) AS zone OFFSET 0) s
ORDER BY 1;

-------------------------------------------------------------------------
-- 9. rl_reset: true when the key had state, false otherwise; the key is
-- back to a full allowance.
-------------------------------------------------------------------------
SELECT zone, rl_reset(zone, 'zero') AS had_state, rl_reset(zone, 'zero') AS again,
       rl_reset(zone, 'no-such-key') AS unknown_key
FROM unnest(ARRAY['z_tb', 'z_gcra', 'z_fw', 'z_swc', 'z_sw']) AS zone ORDER BY zone;
SELECT count(*) AS rows_after_reset FROM ratelimit.state WHERE key = 'zero';
SELECT zone, (r).*
FROM (SELECT zone, rl_limit(zone, 'zero') AS r
      FROM unnest(ARRAY['z_tb', 'z_gcra', 'z_fw', 'z_swc', 'z_sw']) AS zone OFFSET 0) s
ORDER BY 1;
-- rl_reset of a key in one zone leaves the same key in the others alone.
SELECT rl_reset('z_tb', 'zero');
SELECT z.zone, count(s.key) AS rows_of_zero
FROM ratelimit.zone z LEFT JOIN ratelimit.state s ON s.zone_id = z.zone_id AND s.key = 'zero'
WHERE z.zone IN ('z_tb', 'z_gcra', 'z_fw', 'z_swc', 'z_sw')
GROUP BY z.zone ORDER BY z.zone;

-------------------------------------------------------------------------
-- 10. History: every request of a history zone, allowed and refused, with
-- the transaction id txid_current() returns; rl_result.txn_id is it.
-------------------------------------------------------------------------
SELECT count(*) AS history_rows_so_far FROM ratelimit.history;
SET ratelimit.now_override = '2026-01-01 05:00:00+00';
BEGIN;
SELECT r.allowed, r.remaining, r.txn_id IS NOT NULL AS has_txn_id,
       r.txn_id = txid_current() AS is_txid_current
FROM rl_limit('z_hist', 'h') r;
SELECT txid_current() AS txn1 \gset
SET ratelimit.now_override = '2026-01-01 05:00:01+00';
SELECT r.allowed, r.remaining, r.txn_id = txid_current() AS is_txid_current
FROM rl_limit('z_hist', 'h') r;
SET ratelimit.now_override = '2026-01-01 05:00:02+00';
SELECT r.allowed, r.remaining, r.txn_id = txid_current() AS is_txid_current
FROM rl_limit('z_hist', 'h') r;  -- capacity 2: refused, recorded too
SELECT recorded_at, zone, key, cost, allowed, txn_id = txid_current() AS is_txid_current
FROM ratelimit.history ORDER BY recorded_at;
COMMIT;
-- A call in another transaction has that transaction's id; rl_peek
-- records nothing and has no txn_id.
SET ratelimit.now_override = '2026-01-01 05:00:03+00';
SELECT r.allowed, r.txn_id AS txn2 FROM rl_limit('z_hist', 'h', 0) r \gset
SELECT :'allowed' AS allowed, :txn2 <> :txn1 AS other_transaction,
       (SELECT txn_id = :txn2 FROM ratelimit.history WHERE recorded_at = '2026-01-01 05:00:03+00') AS recorded_with_it,
       (SELECT cost FROM ratelimit.history WHERE recorded_at = '2026-01-01 05:00:03+00') AS cost;
SELECT allowed, remaining, txn_id FROM rl_peek('z_hist', 'h');
SELECT count(*) AS history_rows, count(*) FILTER (WHERE txn_id = :txn1) AS in_txn1,
       count(DISTINCT txn_id) AS transactions
FROM ratelimit.history;
-- A rolled-back transaction's history goes with it (as its tokens do).
BEGIN;
SELECT (rl_limit('z_hist', 'h2')).allowed;
ROLLBACK;
SELECT count(*) AS history_of_rolled_back FROM ratelimit.history WHERE key = 'h2';
-- Zones without history wrote nothing: every row is z_hist's.
SELECT zone, count(*) FROM ratelimit.history GROUP BY zone;
-- Turning history off (same algorithm, state kept) stops recording; on again records.
-- (An option left out keeps its value: history => false turns it off.)
SELECT rl_zone_set('z_hist', 'token_bucket', 2, '1 hour', history => false);
SELECT allowed, remaining, txn_id FROM rl_limit('z_hist', 'h', 0);
SELECT count(*) AS history_rows_after_off FROM ratelimit.history;
SELECT rl_zone_set('z_tb', 'token_bucket', 10, '1 minute', burst => 20, history => true);
SET ratelimit.now_override = '2026-01-01 05:00:04+00';
SELECT r.allowed, r.txn_id IS NOT NULL AS has_txn_id FROM rl_limit('z_tb', 'h-on') r;
SELECT zone, key, cost, allowed FROM ratelimit.history WHERE recorded_at = '2026-01-01 05:00:04+00';
SELECT rl_zone_set('z_tb', history => false);

-------------------------------------------------------------------------
-- 11. rl_headers (headers.sql tests it in full): RateLimit-Policy
-- "<zone>";q=<rate>;w=<period s>, RateLimit "<zone>";r=<remaining>;t=<reset,
-- whole seconds rounded up> and, refused only, Retry-After (rounded up).
-------------------------------------------------------------------------
SET ratelimit.now_override = '2026-01-01 06:00:00+00';
SELECT rl_headers(r) FROM rl_limit('z_tb', 'hdr') r;  -- q=10;w=60, r=19;t=6
SELECT rl_headers(r) FROM rl_limit('z_tb', 'hdr', 19) r;  -- r=0;t=120
SELECT rl_headers(r) FROM rl_limit('z_tb', 'hdr') r;  -- refused: Retry-After 6
-- The sliding-window counter's 6.75 s and 12 s (section 5)
-- at 06:00:02 (2 s past a multiple of 7 s since 2000-01-01, as 00:00:00 was).
SET ratelimit.now_override = '2026-01-01 06:00:02+00';
SELECT count(*) FROM (SELECT rl_limit('z_swc', 'hdr') FROM generate_series(1, 4) OFFSET 0) s;
SELECT r.retry_after, r.reset_after, rl_headers(r) FROM rl_limit('z_swc', 'hdr') r;  -- q=4;w=7, Retry-After 7, t=12
-- Rounded up: 1 us is 1 s; a full key t=0; whole seconds stay.
SELECT rl_headers(ROW(true, 5, 4, NULL, '0.000001 s', NULL, true, 'z', 5, '1 s')::rl_result) AS tiny_reset,
       rl_headers(ROW(true, 5, 5, NULL, '0 s', NULL, true, 'z', 5, '1 s')::rl_result) AS full_key,
       rl_headers(ROW(false, 5, 0, '2 s', '3 s', 42, false, 'z', 5, '1 s')::rl_result) AS whole_seconds;

-------------------------------------------------------------------------
-- 12. Altering a zone: the same algorithm keeps every key's state and the
-- next call uses the new limit.
-------------------------------------------------------------------------
SET ratelimit.now_override = '2026-01-01 07:00:00+00';
SELECT rl_zone_set('z_alter', 'token_bucket', 10, '1 minute');
SELECT pg_temp.zone_id('z_alter') AS alter_id \gset
SELECT (r).remaining FROM (SELECT rl_limit('z_alter', 'k', 8) AS r OFFSET 0) s;  -- 2 left of 10
SELECT rl_zone_set('z_alter', 'token_bucket', 20, '1 minute', burst => 20);
SELECT zone, rate, capacity, updated_at > created_at AS altered FROM rl_zones WHERE zone = 'z_alter';
SELECT pg_temp.zone_id('z_alter') = :alter_id AS same_zone_id;
-- Same instant: the 2 tokens are still there (not a fresh 20): remaining 1
-- of capacity 20, reset 19 tokens at the new rate (3 s each) = 57 s.
SELECT * FROM rl_limit('z_alter', 'k');
-- 3 s later the new rate has refilled 1 token (the old one only 0.5):
-- remaining 1 after the call.
SET ratelimit.now_override = '2026-01-01 07:00:03+00';
SELECT * FROM rl_limit('z_alter', 'k');
-- A smaller capacity clamps what the key holds: 60 s later it would hold
-- 20; with burst 5 it holds 5, and takes 1: remaining 4.
SET ratelimit.now_override = '2026-01-01 07:01:03+00';
SELECT rl_zone_set('z_alter', 'token_bucket', 20, '1 minute', burst => 5);
SELECT * FROM rl_limit('z_alter', 'k');

-- Another algorithm cannot read the keys' state: refused without
-- reset => true (55000), and nothing changes (same id, the key's 4 tokens:
-- peek cost 0 shows 4 of 5).
SELECT regress.try($$SELECT rl_zone_set('z_alter', 'fixed_window', 5, '1 minute')$$);
SELECT pg_temp.zone_id('z_alter') = :alter_id AS same_zone_id, algorithm, rate, capacity
FROM rl_zones WHERE zone = 'z_alter';
SELECT remaining FROM rl_peek('z_alter', 'k', 0);
-- With reset => true every key starts afresh: a new zone id, the old rows
-- deleted (zone_changes.sql tests the changes in full).
SELECT rl_zone_set('z_alter', 'fixed_window', 5, '1 minute', reset => true);
SELECT pg_temp.zone_id('z_alter') <> :alter_id AS new_zone_id;
SELECT count(*) AS rows_under_old_id FROM ratelimit.state WHERE zone_id = :alter_id;
SELECT count(*) AS rows_under_new_id FROM ratelimit.state WHERE zone_id = pg_temp.zone_id('z_alter');
SELECT * FROM rl_limit('z_alter', 'k');  -- fresh window of 5: remaining 4, reset 60 s
-- A window zone's new rate applies to the open window: 5 -> 2 with 1 used.
SELECT rl_zone_set('z_alter', 'fixed_window', 2, '1 minute');
SELECT * FROM rl_limit('z_alter', 'k');  -- remaining 0
SELECT * FROM rl_limit('z_alter', 'k');  -- refused, retry 60 s
SELECT pg_temp.zone_id('z_alter') AS alter_id \gset

-------------------------------------------------------------------------
-- 13. rl_zone_drop removes the zone and its state.
-------------------------------------------------------------------------
SELECT count(*) AS rows_before_drop FROM ratelimit.state WHERE zone_id = :alter_id;
SELECT rl_zone_drop('z_alter');
SELECT count(*) AS rows_after_drop FROM ratelimit.state WHERE zone_id = :alter_id;
SELECT count(*) AS listed FROM rl_zones WHERE zone = 'z_alter';
SELECT regress.try($$SELECT rl_limit('z_alter', 'k')$$) AS limit_after_drop,
       regress.try($$SELECT rl_zone_drop('z_alter')$$) AS drop_again;
SELECT rl_zone_drop('z_alter', if_exists => true);
-- Created again: a fresh zone, the old state does not come back.
SELECT rl_zone_set('z_alter', 'fixed_window', 2, '1 minute');
SELECT * FROM rl_limit('z_alter', 'k');  -- remaining 1
SELECT rl_zone_drop('z_alter');

-------------------------------------------------------------------------
-- 14. rl_gcra with redis-cell's documented numbers: CL.THROTTLE user123
-- 15 30 60 1 -> allowed, limit 16, remaining 15, retry -1, reset 2 s.
-------------------------------------------------------------------------
SET ratelimit.now_override = '2026-01-01 08:00:00+00';
SELECT * FROM rl_gcra('user123', 15, 30, 60, 1);
-- 16 calls in one instant exhaust it; the 17th is refused, retry 2 s.
SELECT g, (r).*
FROM (SELECT g, rl_gcra('user123', 15, 30, 60) AS r FROM generate_series(2, 17) g OFFSET 0) s;
SET ratelimit.now_override = '2026-01-01 08:00:01.999999+00';
SELECT * FROM rl_gcra('user123', 15, 30, 60);  -- refused, retry 1 microsecond
SET ratelimit.now_override = '2026-01-01 08:00:02+00';
SELECT * FROM rl_gcra('user123', 15, 30, 60);  -- 2 s later: allowed, remaining 0, reset 32 s
-- A fractional period: max_burst 0, 1 per 0.5 s.  quantity 0 looks.
SELECT * FROM rl_gcra('half', 0, 1, 0.5);  -- capacity 1, remaining 0, reset 0.5 s
SELECT * FROM rl_gcra('half', 0, 1, 0.5, 0);  -- allowed, remaining 0, reset 0.5 s
SELECT * FROM rl_gcra('half', 0, 1, 0.5);  -- refused, retry 0.5 s
-- rl_gcra's state lives apart from every zone (zone_id -1).
SELECT key, zone_id, part FROM ratelimit.state WHERE key IN ('user123', 'half') ORDER BY key;

-------------------------------------------------------------------------
-- 15. An exact sliding window with a large limit, 2000 per hour, whose log
-- is sealed into chunks (parts 1, 2, ... of the key).  Admission g is at
-- 09:00:00 + g microseconds.  An entry is 1 byte (delta 1 us) after a 9-byte
-- first one, and a buffer is sealed at 256 bytes: 248 entries per buffer.
-- The front holds g 1..248, then the back fills and is sealed as a chunk
-- every 248 admissions: chunks 1..5 hold g 249..1488, the back 1489..1500.
-------------------------------------------------------------------------
SELECT rl_zone_set('z_big', 'sliding_window', 2000, '1 hour');
-- 1500 admissions in one statement (the transaction's cached state)...
SELECT count(*) FILTER (WHERE (r).allowed) AS admitted, min((r).remaining) AS remaining
FROM (SELECT g, rl_limit('z_big', 'one-statement') AS r
      FROM (SELECT g, pg_temp.clock('2026-01-01 09:00:00', g) FROM generate_series(1, 1500) g OFFSET 0) c
      OFFSET 0) s;
-- ... and the same 1500 committed one by one (the state table every call).
CREATE PROCEDURE pg_temp.take_each(zone text, key text, first int, last int, INOUT admitted int)
LANGUAGE plpgsql AS $$
BEGIN
    admitted := 0;
    FOR g IN first .. last LOOP
        PERFORM pg_temp.clock('2026-01-01 09:00:00', g);
        IF (rl_limit(zone, key)).allowed THEN
            admitted := admitted + 1;
        END IF;
        COMMIT;
    END LOOP;
END $$;
CALL pg_temp.take_each('z_big', 'one-by-one', 1, 1500, NULL);
-- Both: head row (part 0) with admitted = 1500 and 5 chunks, parts 1..5.
SELECT key, array_agg(part ORDER BY part) AS parts,
       max(tokens) FILTER (WHERE part = 0) AS admitted,
       max(counter) FILTER (WHERE part = 0) AS chunks
FROM ratelimit.state WHERE zone_id = pg_temp.zone_id('z_big')
GROUP BY key ORDER BY key;
-- Another 600 at g 1501..2100: exactly 500 admitted (2000 in the hour),
-- 100 refused.  The back is sealed twice more (g 1489..1736, 1737..1984):
-- chunks 1..7, back g 1985..2000.  A refusal at g waits for g 1 to leave
-- the hour: retry 1 h - (g - 1) us, from 59:59.998 (g 2001) to
-- 59:59.997901 (g 2100).
SELECT count(*) FILTER (WHERE (r).allowed) AS admitted,
       count(*) FILTER (WHERE NOT (r).allowed) AS refused,
       max((r).retry_after) AS longest_retry, min((r).retry_after) AS shortest_retry
FROM (SELECT g, rl_limit('z_big', 'one-statement') AS r
      FROM (SELECT g, pg_temp.clock('2026-01-01 09:00:00', g) FROM generate_series(1501, 2100) g OFFSET 0) c
      OFFSET 0) s;
SELECT array_agg(part ORDER BY part) AS parts,
       max(tokens) FILTER (WHERE part = 0) AS admitted,
       max(counter) FILTER (WHERE part = 0) AS chunks
FROM ratelimit.state WHERE zone_id = pg_temp.zone_id('z_big') AND key = 'one-statement';
-- A peek of cost 1000 at g 2100 reads the chunks: 1000 must leave, the
-- 1000th admission (g 1000, in chunk 4) leaves at 10:00:00.001:
-- retry 1 h - 1100 us = 59:59.9989.
SELECT * FROM rl_peek('z_big', 'one-statement', 1000);
-- An hour and 600 us after 09:00:00, g 1..600 have left: the front (1..248)
-- and chunk 1 (249..496) are consumed, chunk 2 becomes the front; parts 1
-- and 2 are deleted.  1400 + 1 in the window: remaining 599.
SELECT pg_temp.clock('2026-01-01 10:00:00', 600);
SELECT * FROM rl_limit('z_big', 'one-statement');
SELECT array_agg(part ORDER BY part) AS parts,
       max(tokens) FILTER (WHERE part = 0) AS admitted,
       max(counter) FILTER (WHERE part = 0) AS chunks
FROM ratelimit.state WHERE zone_id = pg_temp.zone_id('z_big') AND key = 'one-statement';
-- Two hours later everything has left: every chunk is deleted unread.
SET ratelimit.now_override = '2026-01-01 12:00:00+00';
SELECT * FROM rl_limit('z_big', 'one-statement');  -- remaining 1999, reset 1 h
SELECT array_agg(part ORDER BY part) AS parts, max(tokens) AS admitted
FROM ratelimit.state WHERE zone_id = pg_temp.zone_id('z_big') AND key = 'one-statement';
-- rl_reset removes the head row and every chunk.
SELECT rl_reset('z_big', 'one-by-one') AS had_state;
SELECT count(*) AS rows_after_reset FROM ratelimit.state WHERE key = 'one-by-one';
SELECT * FROM rl_limit('z_big', 'one-by-one');  -- a fresh key: remaining 1999
-- rl_zone_drop removes every part of every key.
SELECT rl_zone_drop('z_big');
SELECT count(*) AS rows_after_drop FROM ratelimit.state WHERE key IN ('one-by-one', 'one-statement');

-------------------------------------------------------------------------
-- 16. The zones left, and no history from any zone but z_hist and z_tb's
-- history interlude.
-------------------------------------------------------------------------
SELECT zone, algorithm, rate, period, capacity, burst, history FROM rl_zones ORDER BY zone;
SELECT zone, count(*) FROM ratelimit.history GROUP BY zone ORDER BY zone;
