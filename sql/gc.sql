-- rl_gc(zone DEFAULT NULL, max_window DEFAULT NULL) (0.5.0): deletes the
-- table-store state of keys that have fully recovered (a recovered key
-- decides every later call exactly as a key never seen), the rows of
-- dropped zones, and -- only with max_window -- rl_token_bucket's and
-- rl_gcra's buckets (zone ids 0 and -1) last written at least max_window
-- ago.  Returns how many keys it removed.  A GC must never change a later
-- decision: section 9 checks that on random call sequences.
--
-- rl_gc() over every zone would also see the rows other tests left in this
-- database (written on clocks from 2000 on, or the real clock).  Rows
-- written "in the future" are kept, so the sections that run rl_gc() with
-- no zone run on a clock in 1990: their counts are this file's rows only.
-- The other sections name their zone.
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
SET ratelimit.now_override = '2026-01-01 00:00:00+00';

-- The keys with state in a zone, with their number of chunk rows.
CREATE FUNCTION pg_temp.keys_of(zone text) RETURNS text LANGUAGE sql AS $$
    SELECT coalesce(string_agg(key || CASE WHEN parts > 1 THEN '+' || (parts - 1) ELSE '' END,
                               ' ' ORDER BY key), '(none)')
    FROM (SELECT s.key, count(*) AS parts FROM ratelimit.state s
          JOIN ratelimit.zone z USING (zone_id) WHERE z.zone = $1 GROUP BY s.key) k
$$;
-- Sets the test clock to base (UTC) plus seconds; returns the seconds.
CREATE FUNCTION pg_temp.at(base timestamp, seconds numeric) RETURNS numeric LANGUAGE sql AS $$
    SELECT set_config('ratelimit.now_override',
                      to_char(base + seconds * interval '1 second', 'YYYY-MM-DD HH24:MI:SS.US') || '+00',
                      false);
    SELECT seconds
$$;

-------------------------------------------------------------------------
-- 1. Each algorithm: a key is removed once it has fully recovered, not a
-- microsecond before.  k1 and k2 take at t = 0 (fixed_window's k2 at 5 s,
-- sliding_window's k1 again at 4 s).
-------------------------------------------------------------------------
SELECT rl_zone_set('gc_tb', 'token_bucket', 2, '10 seconds', burst => 4);   -- a token per 5 s
SELECT rl_zone_set('gc_gcra', 'gcra', 1, '2 seconds', burst => 3);          -- a request per 2 s
SELECT rl_zone_set('gc_fw', 'fixed_window', 3, '10 seconds');
SELECT rl_zone_set('gc_swc', 'sliding_window_counter', 3, '10 seconds');
SELECT rl_zone_set('gc_sw', 'sliding_window', 3, '10 seconds');
SELECT count(*) FILTER (WHERE allowed) AS admitted FROM (
    SELECT (rl_limit('gc_tb', 'k1', 2)).allowed UNION ALL SELECT (rl_limit('gc_tb', 'k2', 4)).allowed
    UNION ALL SELECT (rl_limit('gc_gcra', 'k1', 1)).allowed UNION ALL SELECT (rl_limit('gc_gcra', 'k2', 3)).allowed
    UNION ALL SELECT (rl_limit('gc_fw', 'k1', 1)).allowed
    UNION ALL SELECT (rl_limit('gc_swc', 'k1', 1)).allowed
    UNION ALL SELECT (rl_limit('gc_sw', 'k1', 1)).allowed) s;
SELECT pg_temp.at('2026-01-01', 4);
SELECT allowed FROM rl_limit('gc_sw', 'k1');
SELECT pg_temp.at('2026-01-01', 5);
SELECT allowed FROM rl_limit('gc_fw', 'k2');
-- Nothing has recovered at 1 s.
SELECT pg_temp.at('2026-01-01', 1) AS t, rl_gc('gc_tb') AS tb, rl_gc('gc_gcra') AS gcra, rl_gc('gc_fw') AS fw,
       rl_gc('gc_swc') AS swc, rl_gc('gc_sw') AS sw;

-- gcra: k1's arrival time is 2 s, k2's 6 s.
SELECT pg_temp.at('2026-01-01', 1.999999) AS t, rl_gc('gc_gcra'), pg_temp.keys_of('gc_gcra');
SELECT pg_temp.at('2026-01-01', 2) AS t, rl_gc('gc_gcra'), pg_temp.keys_of('gc_gcra');
SELECT pg_temp.at('2026-01-01', 6) AS t, rl_gc('gc_gcra'), pg_temp.keys_of('gc_gcra');

-- token_bucket: k1 lacks 2 tokens (10 s), k2 4 tokens (20 s).
SELECT pg_temp.at('2026-01-01', 9.999999) AS t, rl_gc('gc_tb'), pg_temp.keys_of('gc_tb');
SELECT pg_temp.at('2026-01-01', 10) AS t, rl_gc('gc_tb'), pg_temp.keys_of('gc_tb');
-- A removed key decides as a key never seen: k1 and k9 alike.
SELECT k, (r).* FROM (SELECT k, rl_peek('gc_tb', k, 1) AS r FROM (VALUES ('k1'), ('k9')) v(k)) s;
SELECT pg_temp.at('2026-01-01', 19.999999) AS t, rl_gc('gc_tb'), pg_temp.keys_of('gc_tb');
SELECT pg_temp.at('2026-01-01', 20) AS t, rl_gc('gc_tb'), pg_temp.keys_of('gc_tb');

-- fixed_window: k1's window ends at 10 s, k2's at 15 s.
SELECT pg_temp.at('2026-01-01', 9.999999) AS t, rl_gc('gc_fw'), pg_temp.keys_of('gc_fw');
SELECT pg_temp.at('2026-01-01', 10) AS t, rl_gc('gc_fw'), pg_temp.keys_of('gc_fw');
SELECT pg_temp.at('2026-01-01', 15) AS t, rl_gc('gc_fw'), pg_temp.keys_of('gc_fw');

-- sliding_window: k1's newest admission (4 s) leaves the window at 14 s.
SELECT pg_temp.at('2026-01-01', 13.999999) AS t, rl_gc('gc_sw'), pg_temp.keys_of('gc_sw');
SELECT pg_temp.at('2026-01-01', 14) AS t, rl_gc('gc_sw'), pg_temp.keys_of('gc_sw');

-- sliding_window_counter: k1's count of window [0, 10 s) still weighs in
-- the next window, until 20 s.
SELECT pg_temp.at('2026-01-01', 19.999999) AS t, rl_gc('gc_swc'), pg_temp.keys_of('gc_swc');
SELECT pg_temp.at('2026-01-01', 20) AS t, rl_gc('gc_swc'), pg_temp.keys_of('gc_swc');

-- A key that keeps being used is never removed; rl_gc(zone) touches no
-- other zone's keys.
SELECT rl_zone_set('gc_other', 'token_bucket', 2, '10 seconds', burst => 4);
SELECT a.allowed, b.allowed FROM rl_limit('gc_tb', 'busy') a, rl_limit('gc_other', 'idle') b;
SELECT pg_temp.at('2026-01-01', 23);
SELECT allowed FROM rl_limit('gc_tb', 'busy');
SELECT pg_temp.at('2026-01-01', 26);
SELECT allowed FROM rl_limit('gc_tb', 'busy');
SELECT pg_temp.at('2026-01-01', 29) AS t, rl_gc('gc_tb'), pg_temp.keys_of('gc_tb'), pg_temp.keys_of('gc_other');
SELECT rl_gc('gc_other'), pg_temp.keys_of('gc_other');

-------------------------------------------------------------------------
-- 2. A clock behind a row: the next call would decide at the row's time,
-- not at now, so the row is kept, however idle it looks from now.  Each
-- zone gets a key 'late' at 100 s; at 50 s only gc_tb's 'busy' (full
-- again since 36 s) goes; at 110 s every 'late' has recovered.
-------------------------------------------------------------------------
SELECT pg_temp.at('2026-01-01', 100);
SELECT a.allowed, b.allowed, c.allowed FROM rl_limit('gc_tb', 'late') a, rl_limit('gc_fw', 'late') b,
    rl_limit('gc_sw', 'late') c;
SELECT pg_temp.at('2026-01-01', 50) AS t, rl_gc('gc_tb') AS tb, rl_gc('gc_fw') AS fw, rl_gc('gc_sw') AS sw;
-- Deleting it would have changed this decision: decided at 100 s, one
-- token short; a new key would be full.
SELECT allowed, remaining, reset_after FROM rl_peek('gc_tb', 'late', 0);
SELECT pg_temp.at('2026-01-01', 110) AS t, rl_gc('gc_tb') AS tb, rl_gc('gc_fw') AS fw, rl_gc('gc_sw') AS sw;

-------------------------------------------------------------------------
-- 3. Cron-refill zones: calls only take, so a key below its capacity is
-- never idle, whatever the clock; a full one is.  Lowering the burst to 3
-- makes c1 (3 left) and c2 (4, held as 3) full; c3 (1 left) stays.
-------------------------------------------------------------------------
SELECT regress.cron_zone('gc_cron', 60, '1 minute', burst => 5);
SELECT pg_temp.at('2026-01-01', 0);
SELECT remaining FROM rl_limit('gc_cron', 'c1', 2);
SELECT remaining FROM rl_limit('gc_cron', 'c2', 1);
SELECT remaining FROM rl_limit('gc_cron', 'c3', 4);
SELECT pg_temp.at('2027-01-01', 0) AS t, rl_gc('gc_cron'), pg_temp.keys_of('gc_cron');
SELECT rl_zone_set('gc_cron', burst => 3);
SELECT rl_gc('gc_cron'), pg_temp.keys_of('gc_cron');
-- A refill to capacity (what rl_cron_refill's UPDATE does) makes c3 idle too.
UPDATE ratelimit.state s SET tokens = 3, counter = 0, refill_pending = NULL
FROM ratelimit.zone z WHERE z.zone_id = s.zone_id AND z.zone = 'gc_cron' AND s.key = 'c3';
SELECT rl_gc('gc_cron'), pg_temp.keys_of('gc_cron');

-------------------------------------------------------------------------
-- 4. The exact sliding window with sealed chunks: 400 admissions 10 ms
-- apart (limit 1000 per minute) fill the head row's two buffers and seal
-- chunk rows (parts 1, 2, ...).  The key goes, chunks and all, only when
-- its newest admission has left the window.
-------------------------------------------------------------------------
SELECT rl_zone_set('gc_chunks', 'sliding_window', 1000, '1 minute');
DO $$
BEGIN
    FOR i IN 0 .. 399 LOOP
        PERFORM pg_temp.at('2026-01-01', i * 0.01);
        IF NOT (SELECT allowed FROM rl_limit('gc_chunks', 'chunky')) THEN
            RAISE EXCEPTION 'call % refused', i;
        END IF;
    END LOOP;
END $$;
SELECT allowed, remaining FROM rl_limit('gc_chunks', 'small');
SELECT s.key, count(*) FILTER (WHERE part = 0) AS head_rows, count(*) FILTER (WHERE part > 0) AS chunk_rows
FROM ratelimit.state s JOIN ratelimit.zone z USING (zone_id) WHERE z.zone = 'gc_chunks'
GROUP BY s.key ORDER BY s.key;
-- At 63.989999 s every admission but the last (3.99 s) has left the
-- window: the key stays, chunks and all.  At 63.99 s it goes, and so does
-- 'small' (admitted at 3.99 s too).
SELECT pg_temp.at('2026-01-01', 63.989999) AS t, rl_gc('gc_chunks');
SELECT count(*) AS rows FROM ratelimit.state s JOIN ratelimit.zone z USING (zone_id) WHERE z.zone = 'gc_chunks';
SELECT pg_temp.at('2026-01-01', 63.99) AS t, rl_gc('gc_chunks');
SELECT count(*) AS rows FROM ratelimit.state s JOIN ratelimit.zone z USING (zone_id) WHERE z.zone = 'gc_chunks';
SELECT remaining, reset_after FROM rl_peek('gc_chunks', 'chunky', 0);

-------------------------------------------------------------------------
-- 5. Rows of dropped zones (orphans).  rl_zone_drop and rl_zone_set's
-- reset => true delete the zone's rows, but not a row that a concurrent
-- transaction created and had not committed yet: here a prepared
-- transaction.  Such rows belong to no zone; rl_gc() (every zone) removes
-- them, whatever they hold, sliding-window chunks included.  On the 1990
-- clock (see the top).
-------------------------------------------------------------------------
SET ratelimit.now_override = '1990-01-01 00:00:00+00';
SELECT rl_zone_set('gc_drop', 'token_bucket', 5, '1 minute');
SELECT rl_zone_set('gc_refill', 'token_bucket', 5, '1 minute');
SELECT rl_zone_set('gc_drop_sw', 'sliding_window', 1000, '1 hour');
BEGIN;
SELECT a.allowed, b.allowed FROM rl_limit('gc_drop', 'gc:orphan') a, rl_limit('gc_refill', 'gc:orphan') b;
DO $$
BEGIN
    FOR i IN 0 .. 399 LOOP
        PERFORM pg_temp.at('1990-01-01', i * 0.01);
        PERFORM rl_limit('gc_drop_sw', 'gc:orphan');
    END LOOP;
END $$;
PREPARE TRANSACTION 'gc_orphans';
CREATE TEMP TABLE dropped AS
SELECT zone_id, zone FROM ratelimit.zone WHERE zone IN ('gc_drop', 'gc_refill', 'gc_drop_sw');
SELECT rl_zone_drop('gc_drop');
SELECT rl_zone_drop('gc_drop_sw');
SELECT rl_zone_set('gc_refill', reset => true);
COMMIT PREPARED 'gc_orphans';
SELECT d.zone, count(*) FILTER (WHERE s.part = 0) AS heads, count(*) FILTER (WHERE s.part > 0) AS chunks
FROM dropped d JOIN ratelimit.state s USING (zone_id) GROUP BY d.zone ORDER BY d.zone;
-- The new gc_refill does not see the old row: its key is new.
SELECT remaining FROM rl_peek('gc_refill', 'gc:orphan', 0);
-- rl_gc of one zone leaves orphans alone; a dropped zone has no name.
SELECT rl_gc('gc_refill');
SELECT regress.try($$SELECT rl_gc('gc_drop')$$);
-- Orphans go whatever they hold (the two token buckets lack a token),
-- but one written in the future is kept like any row: at 3.98 s the two
-- buckets written at 0 s go, the sliding window (last admitted at 3.99 s)
-- stays; at 3.99 s it goes with its chunks.
SELECT pg_temp.at('1990-01-01', 3.98) AS t, rl_gc();
SELECT pg_temp.at('1990-01-01', 3.99) AS t, rl_gc();
SELECT count(*) AS orphan_rows FROM dropped d JOIN ratelimit.state s USING (zone_id);

-------------------------------------------------------------------------
-- 6. rl_token_bucket's buckets (zone 0) and rl_gcra's (zone -1) record no
-- limit: rl_gc() keeps them; rl_gc(NULL, max_window) removes those last
-- written at least max_window ago.  (rl_gcra's row keeps its theoretical
-- arrival time, which is ahead of the call: 10 s here.)  max_window must
-- cover the longest window in use, or a bucket that has not refilled
-- would be forgotten.  Still on the 1990 clock.
-------------------------------------------------------------------------
SET ratelimit.now_override = '1990-01-01 00:00:00+00';
SELECT rl_token_bucket('gc:tb', 1, 10, 5) AS tb_left,
       (SELECT remaining FROM rl_gcra('gc:gcra', 1, 1, 10)) AS gcra_left;
SELECT key, zone_id, updated_at FROM ratelimit.state WHERE key LIKE 'gc:%' AND zone_id <= 0 ORDER BY zone_id DESC;
SELECT pg_temp.at('1990-01-01', 3600) AS t, rl_gc() AS no_max_window;
SELECT rl_gc(NULL, '1 hour 1 second') AS one_hour_one_second;
SELECT rl_gc(NULL, '1 hour') AS one_hour;
SELECT key, zone_id FROM ratelimit.state WHERE key LIKE 'gc:%' AND zone_id <= 0 ORDER BY zone_id DESC;
SELECT pg_temp.at('1990-01-01', 3610) AS t, rl_gc(NULL, '1 hour') AS one_hour;
SELECT count(*) AS left FROM ratelimit.state WHERE key LIKE 'gc:%' AND zone_id <= 0;
-- With a zone, rl_gc(zone, max_window) touches that zone only.
SELECT pg_temp.at('1990-01-01', 7300), rl_token_bucket('gc:tb', 1, 10, 5);
SELECT pg_temp.at('1990-01-01', 7400), rl_gc('gc_refill', '1 second');
SELECT count(*) AS left FROM ratelimit.state WHERE key LIKE 'gc:%' AND zone_id <= 0;
-- A bucket written in the future (7300 s) is kept, even with max_window 0.
SELECT pg_temp.at('1990-01-01', 7200), rl_gc(NULL, '0');
SELECT pg_temp.at('1990-01-01', 7300), rl_gc(NULL, '0');
-- max_window: months count 30 days.
SELECT pg_temp.at('1990-01-01', 7400), rl_token_bucket('gc:tb', 1, 10, 5);
SELECT pg_temp.at('1990-01-31', 7399.999999), rl_gc(NULL, '1 mon');
SELECT pg_temp.at('1990-01-31', 7400), rl_gc(NULL, '1 mon');
-- A negative max_window is refused (22023), also when its parts disagree;
-- '-1 day 25 hours' is one hour.
SELECT regress.try($$SELECT rl_gc(NULL, '-1 second')$$);
SELECT regress.try($$SELECT rl_gc(NULL, '1 day -25 hours')$$);
SELECT regress.try($$SELECT rl_gc(NULL, '-1 day 25 hours')$$);
-- A max_window longer than anything can be old (here 1,000,000 years, in
-- microseconds beyond 64 bits) is not negative: nothing is that old, so
-- nothing is removed.
SELECT pg_temp.at('1990-01-31', 7400), rl_token_bucket('gc:tb', 1, 10, 5);
SELECT regress.try($$SELECT rl_gc(NULL, '1000000 years')$$);
SELECT count(*) AS left FROM ratelimit.state WHERE key LIKE 'gc:%' AND zone_id <= 0;
-- rl_token_bucket's buckets of one id with other parameters (rate 1,
-- window 10; rate 2, window 5) are rows of their own, here holding the
-- same tokens at the same time: each goes on its own, counted once (with
-- gc:tb, 3 in all).
SELECT pg_temp.at('1990-02-01', 0), rl_token_bucket('gc:tb2', 1, 10, 1), rl_token_bucket('gc:tb2', 2, 5, 1);
SELECT pg_temp.at('1990-02-01', 10), rl_gc(NULL, '10 seconds') AS removed;
SELECT count(*) AS left FROM ratelimit.state WHERE key LIKE 'gc:%' AND zone_id <= 0;

-------------------------------------------------------------------------
-- 7. Where rl_gc refuses to run.
-------------------------------------------------------------------------
SET ratelimit.now_override = '2026-01-01 00:00:00+00';
-- In a transaction that has made a table-store call: 25001 (its cached
-- copies would write deleted rows back).
BEGIN;
SELECT allowed FROM rl_limit('gc_tb', 'tx');
SELECT rl_gc('gc_tb');
ROLLBACK;
BEGIN;
SELECT rl_token_bucket('gc:tx', 1, 10);
SELECT rl_gc('gc_tb');
ROLLBACK;
-- Looking is not a call that writes: rl_peek, then rl_gc, then a call.
BEGIN;
SELECT remaining FROM rl_peek('gc_tb', 'tx');
SELECT rl_gc('gc_tb');
SELECT remaining FROM rl_limit('gc_tb', 'tx');
COMMIT;
-- A read-only transaction: 25006.
BEGIN READ ONLY;
SELECT regress.try($$SELECT rl_gc()$$);
ROLLBACK;
-- An unknown zone: 42704.
SELECT regress.try($$SELECT rl_gc('gc_nosuch')$$);
-- A shmem zone has no table state: nothing to do.
SELECT rl_zone_set('gc_shm', 'token_bucket', 1, '1 second', store => 'shmem');
SELECT allowed FROM rl_limit('gc_shm', 'gc:shm');
SELECT pg_temp.at('2026-01-02', 0) AS t, rl_gc('gc_shm');
-- Not executable by PUBLIC: 42501.
CREATE ROLE rl_gc_nobody;
SET ROLE rl_gc_nobody;
SELECT regress.try($$SELECT rl_gc()$$);
SELECT regress.try($$SELECT rl_gc('gc_tb')$$);
RESET ROLE;
DROP ROLE rl_gc_nobody;

-------------------------------------------------------------------------
-- 8. Rolled back, rl_gc deletes nothing.
-------------------------------------------------------------------------
SET ratelimit.now_override = '2026-01-01 00:00:00+00';
SELECT allowed FROM rl_limit('gc_tb', 'rb');
SELECT pg_temp.at('2026-01-01', 60);
BEGIN;
SELECT rl_gc('gc_tb');
SELECT pg_temp.keys_of('gc_tb');
ROLLBACK;
SELECT pg_temp.keys_of('gc_tb');

-------------------------------------------------------------------------
-- 9. A GC never changes a later decision.  For each algorithm, two zones
-- A and B with the same limit get the same seeded pseudo-random calls
-- (20 keys, costs 0 .. 3; the clock moves forward by up to 0.1 s (90 %
-- of the steps), up to half the period (8 %) or by one to two periods
-- (2 %)); B is garbage-collected before every 5th call and right after
-- each such jump, each GC in a transaction of its own (the procedure
-- commits).  Every result of A must equal B's:
-- allowed, capacity, remaining, retry_after, reset_after, would_allow.
-- The totals show that calls were refused and keys removed.  swbig: an
-- exact sliding window of 300 per 10 s on 3 keys, calls up to 10 ms
-- apart and a jump past the period after about 500 calls, so that keys
-- have chunk rows when they are collected.
-------------------------------------------------------------------------
SET ratelimit.now_override = '2026-01-01 00:00:00+00';
CREATE TEMP TABLE equivalence (
    algorithm text, calls int, refused int, gc_removed bigint, mismatches int,
    first_mismatch text, a_rows bigint, b_rows bigint, b_chunk_rows_max bigint,
    gc_chunk_rows_removed bigint);

CREATE PROCEDURE pg_temp.equivalence(name text, algorithm text, rate bigint, period_s int,
                                     burst bigint, keys int, calls int, max_cost int,
                                     p_short float8, short_step_us bigint, p_medium float8,
                                     seed float8)
LANGUAGE plpgsql AS $$
DECLARE
    a rl_result;
    b rl_result;
    key text;
    cost int;
    step float8;
    clock_us bigint := 0;
    period_us bigint := period_s * 1000000::bigint;
    refused int := 0;
    removed bigint := 0;
    mismatches int := 0;
    first_mismatch text;
    chunks bigint := 0;
    chunks_now bigint;
    chunks_removed bigint := 0;
    zone_a text := 'gc_eq_' || name || '_a';
    zone_b text := 'gc_eq_' || name || '_b';
BEGIN
    PERFORM rl_zone_set(zone_a, algorithm, rate, period_s * interval '1 second', burst);
    PERFORM rl_zone_set(zone_b, algorithm, rate, period_s * interval '1 second', burst);
    PERFORM setseed(seed);
    FOR i IN 1 .. calls LOOP
        key := 'key' || floor(random() * keys)::int;
        cost := floor(random() * (max_cost + 1))::int;
        step := random();
        clock_us := clock_us + CASE
            WHEN step < p_short THEN floor(random() * short_step_us)::bigint
            WHEN step < p_short + p_medium THEN floor(random() * period_us / 2)::bigint
            ELSE period_us + floor(random() * period_us)::bigint END;
        PERFORM pg_temp.at('2026-01-01', clock_us / 1000000.0);
        -- GC before every 5th call, and right after each jump of the clock.
        IF i % 5 = 0 OR step >= p_short + p_medium THEN
            chunks_now := (SELECT count(*) FROM ratelimit.state s JOIN ratelimit.zone z USING (zone_id)
                           WHERE z.zone = zone_b AND s.part > 0);
            chunks := greatest(chunks, chunks_now);
            COMMIT;
            removed := removed + rl_gc(zone_b);
            chunks_removed := chunks_removed + chunks_now
                - (SELECT count(*) FROM ratelimit.state s JOIN ratelimit.zone z USING (zone_id)
                   WHERE z.zone = zone_b AND s.part > 0);
        END IF;
        SELECT * INTO a FROM rl_limit(zone_a, key, cost);
        SELECT * INTO b FROM rl_limit(zone_b, key, cost);
        IF NOT a.allowed THEN
            refused := refused + 1;
        END IF;
        IF (a.allowed, a.capacity, a.remaining, a.retry_after, a.reset_after, a.would_allow)
           IS DISTINCT FROM (b.allowed, b.capacity, b.remaining, b.retry_after, b.reset_after, b.would_allow) THEN
            mismatches := mismatches + 1;
            first_mismatch := coalesce(first_mismatch, format('call %s at %s us, %s cost %s: A %s, B %s',
                                                              i, clock_us, key, cost, a, b));
        END IF;
    END LOOP;
    INSERT INTO equivalence
    SELECT name, calls, refused, removed, mismatches, first_mismatch,
           (SELECT count(*) FROM ratelimit.state s JOIN ratelimit.zone z USING (zone_id) WHERE z.zone = zone_a),
           (SELECT count(*) FROM ratelimit.state s JOIN ratelimit.zone z USING (zone_id) WHERE z.zone = zone_b),
           chunks, chunks_removed;
    COMMIT;
END $$;

CALL pg_temp.equivalence('tb', 'token_bucket', 5, 10, 6, 20, 2000, 3, 0.9, 100000, 0.08, 0.11);
CALL pg_temp.equivalence('gcra', 'gcra', 5, 10, 4, 20, 2000, 3, 0.9, 100000, 0.08, 0.22);
CALL pg_temp.equivalence('fw', 'fixed_window', 6, 10, NULL, 20, 2000, 3, 0.9, 100000, 0.08, 0.33);
CALL pg_temp.equivalence('swc', 'sliding_window_counter', 6, 10, NULL, 20, 2000, 3, 0.9, 100000, 0.08, 0.44);
CALL pg_temp.equivalence('sw', 'sliding_window', 6, 10, NULL, 20, 2000, 3, 0.9, 100000, 0.08, 0.55);
CALL pg_temp.equivalence('swbig', 'sliding_window', 300, 10, NULL, 3, 2000, 3, 0.998, 10000, 0, 0.66);
SELECT algorithm, calls, refused > 0 AS some_refused, gc_removed > 0 AS some_removed, mismatches,
       first_mismatch, b_rows <= a_rows AS b_not_larger
FROM equivalence ORDER BY algorithm;
-- The exact totals (deterministic for these seeds).
SELECT algorithm, refused, gc_removed, a_rows, b_rows, b_chunk_rows_max, gc_chunk_rows_removed
FROM equivalence ORDER BY algorithm;

SELECT count(rl_zone_drop(zone)) AS zones_dropped FROM rl_zones WHERE zone LIKE 'gc\_%';
DELETE FROM ratelimit.state WHERE key LIKE 'gc:%' AND zone_id <= 0;
