-- token_bucket zones with refill => 'cron' on a fixed test clock.
-- Calls only take whole tokens; rl_cron_refill(zone), what the pg_cron job
-- runs, adds rate * tick / period tokens to every bucket of the zone below
-- capacity.  The part token is kept in ratelimit.state.counter, in units of
-- 1 / period_us token (rate 10 per minute: a token is 60000000 units).
-- The comments give the numbers each result must show, worked out from
-- those rules; the expected output was checked against them.
--
-- pg_cron runs its jobs from database postgres on the test clusters, not
-- from this one, so rl_cron_enable cannot run here (test/pgtap/cron.sql
-- checks its errors, test/cron/cron.sh the real job), and rl_zone_set
-- refuses to create a cron zone that no job could refill (section 1).  The
-- cron zones are made by regress.cron_zone (sql/setup.sql), a direct
-- INSERT into ratelimit.zone, as a restored dump makes them.  What
-- rl_cron_enable leaves behind for the refill is ratelimit.zone.refill_tick:
-- this test sets it directly, as superuser, to simulate an enabled job (the
-- zone table's trigger makes every session see the change, as it does for
-- rl_cron_enable).
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
SET ratelimit.now_override = '2026-01-01 00:00:00+00';
CREATE FUNCTION pg_temp.zone_id(zone text) RETURNS int LANGUAGE sql AS $$
    SELECT zone_id FROM ratelimit.zone z WHERE z.zone = $1
$$;
-- Every state row of a zone.
CREATE FUNCTION pg_temp.state(zone text)
RETURNS TABLE (key text, tokens bigint, counter bigint, refill_pending boolean, updated_at timestamptz)
LANGUAGE sql AS $$
    SELECT s.key, s.tokens, s.counter, s.refill_pending, s.updated_at
    FROM ratelimit.state s WHERE s.zone_id = pg_temp.zone_id($1) AND s.part = 0 ORDER BY s.key
$$;
-- Simulates the job: n runs of rl_cron_refill(zone), each followed by the
-- state of one key.
CREATE FUNCTION pg_temp.refills(p_zone text, p_key text, n int)
RETURNS TABLE (run int, refilled bigint, tokens bigint, counter bigint, refill_pending boolean)
LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1 .. n LOOP
        run := i;
        refilled := rl_cron_refill(p_zone);
        SELECT s.tokens, s.counter, s.refill_pending INTO tokens, counter, refill_pending
        FROM ratelimit.state s
        WHERE s.zone_id = pg_temp.zone_id(p_zone) AND s.key = p_key AND s.part = 0;
        RETURN NEXT;
    END LOOP;
END $$;
-- Simulates rl_cron_enable (tick) or rl_cron_disable (NULL).
CREATE FUNCTION pg_temp.set_tick(zone text, tick interval) RETURNS interval LANGUAGE sql AS $$
    UPDATE ratelimit.zone z SET refill_tick = $2 WHERE z.zone = $1 RETURNING refill_tick
$$;

-------------------------------------------------------------------------
-- 1. Cron zones.  Only token_bucket on the table store; rl_zones shows
-- refill ('inline' by default) and refill_tick (NULL until a job exists).
-------------------------------------------------------------------------
SELECT regress.cron_zone('cr_a', 10, '1 minute');
SELECT regress.cron_zone('cr_b', 10, '1 minute', burst => 25);
SELECT regress.cron_zone('cr_odd', 7, '1 minute', burst => 20);
SELECT rl_zone_set('cr_inline', 'token_bucket', 10, '1 minute');
SELECT zone, algorithm, rate, period, capacity, burst, store, history, refill, refill_tick
FROM rl_zones WHERE zone LIKE 'cr\_%' ORDER BY zone;
-- rl_zone_set checks the definition first (0A000 for what a cron zone
-- cannot be, 22023 for an unknown mode), then that a job could run: here
-- pg_cron runs its jobs from database postgres, so a cron zone is refused
-- (55000, with the hint), not created to fail at its first refill.
SELECT regress.try($$SELECT rl_zone_set('cr_bad', 'gcra', 10, '1 minute', refill => 'cron')$$);
SELECT regress.try($$SELECT rl_zone_set('cr_bad', 'fixed_window', 10, '1 minute', refill => 'cron')$$);
SELECT regress.try($$SELECT rl_zone_set('cr_bad', 'token_bucket', 10, '1 minute', store => 'shmem', refill => 'cron')$$);
SELECT regress.try($$SELECT rl_zone_set('cr_bad', 'token_bucket', 10, '1 minute', refill => 'Cron')$$);
SELECT regress.try($$SELECT rl_zone_set('cr_bad', 'token_bucket', 10.5, '1 minute', refill => 'cron')$$);
SELECT regress.try($$SELECT rl_zone_set('cr_bad', 'token_bucket', 10, '1 minute', refill => 'cron')$$);
DO $$
DECLARE
    hint text;
BEGIN
    PERFORM rl_zone_set('cr_bad', 'token_bucket', 10, '1 minute', refill => 'cron');
EXCEPTION WHEN object_not_in_prerequisite_state THEN
    GET STACKED DIAGNOSTICS hint = PG_EXCEPTION_HINT;
    RAISE NOTICE 'hint: %', hint;
END $$;
SELECT count(*) AS bad_zones FROM ratelimit.zone WHERE zone = 'cr_bad';
-- A cron zone's rate is whole (the refill job adds whole tokens per
-- tick): an existing cron zone refuses a fractional rate too.
SELECT regress.try($$SELECT rl_zone_set('cr_a', rate => 10.5)$$);
-- refill => NULL is no refill option at all: a new zone refills inline.
SELECT rl_zone_set('cr_null', 'token_bucket', 10, '1 minute', refill => NULL);
SELECT zone, refill, refill_tick FROM rl_zones WHERE zone = 'cr_null';
SELECT rl_zone_drop('cr_null');

-------------------------------------------------------------------------
-- 2. Calls, no job yet (refill_tick NULL).  Rate 10 per minute, capacity
-- 10.  Without a job nothing refills the bucket: no time can be promised,
-- so retry_after and reset_after are NULL whenever tokens are missing (a
-- full key's reset_after is 0: nothing is missing).
-------------------------------------------------------------------------
-- A new key is full: take 1, 9 left, reset unknown (NULL).
SELECT * FROM rl_limit('cr_a', 'k');
-- Take 4: 5 left, reset NULL.
SELECT * FROM rl_limit('cr_a', 'k', 4);
-- The row: 5 whole tokens, no part, below capacity (refill_pending).
SELECT * FROM pg_temp.state('cr_a');
-- Take 5: empty, reset NULL.
SELECT * FROM rl_limit('cr_a', 'k', 5);
-- 10 s later, a call is refused: remaining 0, retry and reset NULL (no
-- job will bring a token), and the row is unchanged (updated_at still
-- 00:00:00).
SET ratelimit.now_override = '2026-01-01 00:00:10+00';
SELECT * FROM rl_limit('cr_a', 'k');
-- Cost 0: allowed, takes nothing.
SELECT * FROM rl_limit('cr_a', 'k', 0);
SELECT * FROM pg_temp.state('cr_a');
-- Calls never refill: an hour later it is still empty.
SET ratelimit.now_override = '2026-01-01 01:00:00+00';
SELECT * FROM rl_limit('cr_a', 'k');
SELECT * FROM rl_peek('cr_a', 'k', 0);
-- A peek at a key never seen: as if taken (9 left, reset NULL), but no row.
SELECT * FROM rl_peek('cr_a', 'never');
SELECT count(*) AS rows_of_peeked_key FROM ratelimit.state WHERE key = 'never';
-- Cost 0 on a key never seen: full, reset 0 (nothing to wait for).
SELECT * FROM rl_peek('cr_a', 'never', 0);
-- Rate 7 per minute (cr_odd, burst 20): take 1, 19 left, reset NULL.
SELECT * FROM rl_limit('cr_odd', 'once');
-- Errors of calls: a cost above capacity, the sliding-window entry point.
SELECT regress.try($$SELECT rl_limit('cr_a', 'k', 11)$$);
SELECT regress.try($$SELECT rl_sliding_window('cr_a', 'k')$$);
-- No job: rl_cron_refill refuses (and so on an inline or a missing zone).
SELECT regress.try($$SELECT rl_cron_refill('cr_a')$$);
SELECT regress.try($$SELECT rl_cron_refill('cr_inline')$$);
SELECT regress.try($$SELECT rl_cron_refill('cr_nope')$$);
SELECT regress.try($$SELECT rl_cron_refill(NULL)$$);

-------------------------------------------------------------------------
-- 3. A job with a 1-second tick: rate 10 * 1 s / 1 minute = 1/6 token a
-- refill (10000000 units).  The waits count whole ticks.
-------------------------------------------------------------------------
SELECT pg_temp.set_tick('cr_a', '1 second');
SELECT zone, refill, refill_tick FROM rl_zones WHERE zone = 'cr_a';
-- Empty: retry 60000000 / 10000000 = 6 ticks = 6 s, reset 60 ticks.
SELECT * FROM rl_limit('cr_a', 'k');
-- 13 refills: the counter grows by 10000000 a run and a whole token
-- appears exactly every 6 runs (runs 6 and 12); each run refills the one
-- row of the zone.
SELECT * FROM pg_temp.refills('cr_a', 'k', 13);
-- 2 tokens + 1/6: take 1, 1 left; reset (9 * 60000000 - 10000000) /
-- 10000000 = 53 ticks.
SELECT * FROM rl_limit('cr_a', 'k');
-- The part token survived the take: 1 token, counter 10000000.
SELECT key, tokens, counter, refill_pending FROM pg_temp.state('cr_a');
-- 2 refills: 1 token + 1/2 (30000000).
SELECT * FROM pg_temp.refills('cr_a', 'k', 2);
-- Cost 2 is refused: remaining 1; retry (60000000 - 30000000) / 10000000
-- = 3 ticks; reset (540000000 - 30000000) / 10000000 = 51 ticks.
SELECT * FROM rl_limit('cr_a', 'k', 2);
-- A 7-second tick (70000000 units, 7/6 token): retry ceil(30000000 /
-- 70000000) = 1 tick = 7 s; reset ceil(510000000 / 70000000) = 8 ticks =
-- 56 s.
SELECT pg_temp.set_tick('cr_a', '7 seconds');
SELECT * FROM rl_limit('cr_a', 'k', 2);
-- One refill of 7/6 token: 60000000 + 30000000 + 70000000 = 160000000:
-- 2 tokens, counter 40000000.
SELECT * FROM pg_temp.refills('cr_a', 'k', 1);
-- No job again (rl_cron_disable): 2 tokens held, cost 3 is refused, and
-- no time can be promised: retry and reset NULL.
SELECT pg_temp.set_tick('cr_a', NULL);
SELECT * FROM rl_limit('cr_a', 'k', 3);
SELECT regress.try($$SELECT rl_cron_refill('cr_a')$$);
SELECT key, tokens, counter, refill_pending FROM pg_temp.state('cr_a');

-------------------------------------------------------------------------
-- 4. The exact arithmetic over many ticks, capped at capacity.  Rate 7 per
-- minute, burst 20 (cr_odd); pg_cron 1.5's tick for it is 8 s (one token
-- takes 8.57 s): 7 * 8 / 60 = 14/15 token (56000000 units) a refill.
-------------------------------------------------------------------------
SELECT * FROM ratelimit.cron_plan('1.5', 7, '1 minute');
SELECT pg_temp.set_tick('cr_odd', (SELECT tick FROM ratelimit.cron_plan('1.5', 7, '1 minute')));
-- Empty the bucket ('once' took 1: 19 left, then 19 more).
SELECT allowed, remaining FROM rl_limit('cr_odd', 'once', 19);
-- 15 refills: run i holds i * 56000000 units: tokens = floor(i * 56 /
-- 60), counter = the rest; exactly 14 tokens, no part, after 15 runs.
SELECT * FROM pg_temp.refills('cr_odd', 'once', 15);
-- 8 more: 14 + 14/15 a run ... 19 tokens + 36000000 after 6 runs; the
-- 7th would make 20 + 32000000/60000000: capped at 20, counter 0, no
-- longer pending; the 8th finds no bucket below capacity (refilled 0).
SELECT * FROM pg_temp.refills('cr_odd', 'once', 8);
SELECT * FROM rl_limit('cr_odd', 'once', 0);

-------------------------------------------------------------------------
-- 5. burst > rate: cr_b, rate 10 per minute, burst 25.  Take all 25:
-- reset NULL without a job.  Then a 40-second tick: 10 * 40
-- / 60 = 6 2/3 tokens (400000000 units) a refill: 6 + 40000000, 13 +
-- 20000000, 20 + 0, then 26 2/3 >= 25: capped.
-------------------------------------------------------------------------
SELECT * FROM rl_limit('cr_b', 'k', 25);
SELECT pg_temp.set_tick('cr_b', '40 seconds');
SELECT * FROM pg_temp.refills('cr_b', 'k', 3);
-- 20 held, cost 25 refused: 5 tokens (300000000 units) short: 1 tick.
SELECT * FROM rl_limit('cr_b', 'k', 25);
-- 20 + 6 2/3 >= 25: capped, no longer pending; then nothing to refill.
SELECT * FROM pg_temp.refills('cr_b', 'k', 2);
-- All 25 again: reset ceil(1500000000 / 400000000) = 4 ticks = 160 s.
SELECT * FROM rl_limit('cr_b', 'k', 25);

-------------------------------------------------------------------------
-- 6. A refill touches only the rows of its own zone that are below
-- capacity.  cr_own and cr_other: rate 10 per minute, a 6-second tick
-- (1 token a refill); cr_inline is an inline token bucket.
-------------------------------------------------------------------------
SET ratelimit.now_override = '2026-01-01 02:00:00+00';
SELECT regress.cron_zone('cr_own', 10, '1 minute');
SELECT regress.cron_zone('cr_other', 10, '1 minute');
SELECT pg_temp.set_tick('cr_own', '6 seconds'), pg_temp.set_tick('cr_other', '6 seconds');
-- full: 9 left; low: 1 left.
SELECT remaining FROM rl_limit('cr_own', 'full', 1);
SELECT remaining FROM rl_limit('cr_own', 'low', 9);
-- One refill: full back to 10 (no longer pending), low 2.  2 rows.
SELECT rl_cron_refill('cr_own') AS refilled;
SELECT remaining FROM rl_limit('cr_own', 'mid', 2);
-- The same keys in the other zones.
SELECT remaining FROM rl_limit('cr_other', 'low', 9);
SELECT remaining FROM rl_limit('cr_inline', 'low', 9);
SELECT key, tokens, counter, refill_pending FROM pg_temp.state('cr_own');
CREATE TEMP TABLE before_refill AS
SELECT s.*, s.xmin::text AS row_xmin, s.ctid AS row_ctid FROM ratelimit.state s
WHERE s.zone_id IN (pg_temp.zone_id('cr_own'), pg_temp.zone_id('cr_other'), pg_temp.zone_id('cr_inline'));
-- low (2 -> 3) and mid (8 -> 9): 2 rows refilled.
SELECT rl_cron_refill('cr_own') AS refilled;
-- Rows rewritten by the refill (a new row version), and how: only the
-- refilled columns of cr_own's low and mid changed.
SELECT z.zone, b.key, b.tokens AS tokens_before, s.tokens AS tokens_after,
       s.counter, s.refill_pending,
       s.token_fraction = b.token_fraction AND s.updated_at = b.updated_at AS other_columns_kept
FROM before_refill b
JOIN ratelimit.state s USING (key, zone_id, part)
JOIN ratelimit.zone z ON z.zone_id = s.zone_id
WHERE s.xmin::text <> b.row_xmin OR s.ctid <> b.row_ctid
ORDER BY z.zone, b.key;
SELECT count(*) AS rows_gone FROM before_refill b
WHERE NOT EXISTS (SELECT 1 FROM ratelimit.state s WHERE (s.key, s.zone_id, s.part) = (b.key, b.zone_id, b.part));
-- Twice more: low 4, mid 10 (capped, 2 rows); then low 5 (1 row).
SELECT rl_cron_refill('cr_own') AS refilled;
SELECT rl_cron_refill('cr_own') AS refilled;
SELECT key, tokens, counter, refill_pending FROM pg_temp.state('cr_own');
-- cr_other's low is still at 1 (refilled by its own job only).
SELECT key, tokens, counter, refill_pending FROM pg_temp.state('cr_other');
SELECT rl_cron_refill('cr_other') AS refilled;
SELECT key, tokens, counter, refill_pending FROM pg_temp.state('cr_other');
-- The inline zone's row keeps refill_pending NULL.
SELECT key, tokens, refill_pending FROM ratelimit.state WHERE zone_id = pg_temp.zone_id('cr_inline');
DROP TABLE before_refill;

-------------------------------------------------------------------------
-- 7. The capacity changes.  cr_own holds full 10 (NULL), low 5, mid 10
-- (NULL).  Burst 12, the only option named: the same zone (same id, still
-- cron, tick kept), and the full rows are below the new capacity: pending
-- again.
-------------------------------------------------------------------------
SELECT pg_temp.zone_id('cr_own') AS own_id \gset
SELECT rl_zone_set('cr_own', burst => 12);
SELECT pg_temp.zone_id('cr_own') = :own_id AS same_zone, refill, refill_tick, capacity
FROM rl_zones WHERE zone = 'cr_own';
SELECT key, tokens, counter, refill_pending FROM pg_temp.state('cr_own');
-- full: 10 of 12, reset 2 tokens = 2 ticks = 12 s; a new key has 12.
SELECT * FROM rl_peek('cr_own', 'full', 0);
SELECT * FROM rl_peek('cr_own', 'fresh', 0);
-- Refills: 3 rows (full 11, low 6, mid 11), 3 rows (12 capped, 7, 12
-- capped), then 1 row (low 8).
SELECT rl_cron_refill('cr_own') AS refilled;
SELECT rl_cron_refill('cr_own') AS refilled;
SELECT rl_cron_refill('cr_own') AS refilled;
SELECT key, tokens, counter, refill_pending FROM pg_temp.state('cr_own');
-- Burst 4: the rows stay as they are (12, 8, 12), but every key reads as
-- full (4 left, nothing to wait for).
SELECT rl_zone_set('cr_own', 'token_bucket', 10, '1 minute', burst => 4, refill => 'cron');
SELECT key, tokens, counter, refill_pending FROM pg_temp.state('cr_own');
SELECT * FROM rl_peek('cr_own', 'low', 0);
SELECT * FROM rl_peek('cr_own', 'full', 0);
-- The refill caps the pending row above capacity (low: 4, no longer
-- pending) and leaves the full ones alone: 1 row.
SELECT rl_cron_refill('cr_own') AS refilled;
SELECT key, tokens, counter, refill_pending FROM pg_temp.state('cr_own');
-- A take from a row above capacity starts from the capacity: 3 left,
-- pending again.
SELECT * FROM rl_limit('cr_own', 'full');
SELECT key, tokens, counter, refill_pending FROM pg_temp.state('cr_own');
-- Reaching the capacity exactly through the part token: edge takes 2 (2
-- left), then a 1-second tick (1/6 token): run 5 makes 2 + 50000000, run
-- 6 makes 3 + 0, run 11 3 + 50000000, run 12 exactly 4: capped, no longer
-- pending.  Runs 1 to 6 also bring full from 3 to 4 (2 rows refilled),
-- runs 7 on refill edge alone.
SELECT remaining FROM rl_limit('cr_own', 'edge', 2);
SELECT pg_temp.set_tick('cr_own', '1 second');
SELECT * FROM pg_temp.refills('cr_own', 'edge', 12) WHERE run IN (5, 6, 11, 12);

-------------------------------------------------------------------------
-- 8. Changing the refill mode would start the zone afresh: refused
-- without reset => true (55000), and nothing changes.  With reset => true:
-- a new zone id, its state deleted, no tick, the old id retired.  Any other
-- change keeps id, state and tick.
-------------------------------------------------------------------------
SELECT regress.cron_zone('cr_mode', 10, '1 minute');
SELECT pg_temp.set_tick('cr_mode', '6 seconds');
SELECT remaining FROM rl_limit('cr_mode', 'k', 7);
SELECT pg_temp.zone_id('cr_mode') AS mode_id \gset
-- A new rate and burst, nothing else named: same id, still cron, the tick
-- and the row kept.
SELECT rl_zone_set('cr_mode', rate => 20, burst => 10);
SELECT pg_temp.zone_id('cr_mode') = :mode_id AS same_zone, algorithm, rate, burst, refill, refill_tick
FROM rl_zones WHERE zone = 'cr_mode';
SELECT key, tokens FROM pg_temp.state('cr_mode');
-- Refused: another algorithm with refill => 'cron' (0A000); to inline
-- without reset (55000, the refill mode named, the change in the detail);
-- nothing changed.
SELECT regress.try($$SELECT rl_zone_set('cr_mode', 'gcra', 20, '1 minute', refill => 'cron')$$);
SELECT regress.try($$SELECT rl_zone_set('cr_mode', refill => 'inline')$$);
DO $$
DECLARE
    detail text;
    hint text;
BEGIN
    PERFORM rl_zone_set('cr_mode', refill => 'inline');
EXCEPTION WHEN object_not_in_prerequisite_state THEN
    GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL, hint = PG_EXCEPTION_HINT;
    RAISE NOTICE 'detail: %', detail;
    RAISE NOTICE 'hint: %', hint;
END $$;
SELECT pg_temp.zone_id('cr_mode') = :mode_id AS same_zone, algorithm, refill, refill_tick
FROM rl_zones WHERE zone = 'cr_mode';
SELECT key, tokens FROM pg_temp.state('cr_mode');
-- To inline with reset => true: a new id, the old rows gone, no tick, the
-- old id retired under the zone's name; rate and burst kept; the key is
-- full.
SELECT rl_zone_set('cr_mode', refill => 'inline', reset => true);
SELECT pg_temp.zone_id('cr_mode') <> :mode_id AS new_zone, rate, burst, refill, refill_tick
FROM rl_zones WHERE zone = 'cr_mode';
SELECT count(*) AS old_rows FROM ratelimit.state WHERE zone_id = :mode_id;
SELECT zone FROM ratelimit.retired_zone_id WHERE zone_id = :mode_id;
SELECT * FROM rl_limit('cr_mode', 'k', 0);
SELECT remaining FROM rl_limit('cr_mode', 'k', 3);
SELECT pg_temp.zone_id('cr_mode') AS mode_id2 \gset
-- Back to cron is refused here even with reset => true: no job could
-- refill the zone in this database (55000); nothing changed (same id,
-- inline, the row kept: 7 left).
SELECT regress.try($$SELECT rl_zone_set('cr_mode', refill => 'cron', reset => true)$$);
SELECT pg_temp.zone_id('cr_mode') = :mode_id2 AS same_zone, refill, refill_tick
FROM rl_zones WHERE zone = 'cr_mode';
SELECT remaining FROM rl_peek('cr_mode', 'k', 0);
SELECT regress.try($$SELECT rl_cron_refill('cr_mode')$$);
-- reset => true with nothing else changed starts a cron zone afresh and
-- keeps it cron: a new id, its rows gone, no tick (the job went with the
-- old id), the old id retired.
SELECT rl_zone_drop('cr_mode');
SELECT regress.cron_zone('cr_mode', 20, '1 minute', burst => 10);
SELECT pg_temp.set_tick('cr_mode', '6 seconds');
SELECT remaining FROM rl_limit('cr_mode', 'k', 3);
SELECT pg_temp.zone_id('cr_mode') AS mode_id3 \gset
SELECT rl_zone_set('cr_mode', reset => true);
SELECT pg_temp.zone_id('cr_mode') NOT IN (:mode_id, :mode_id2, :mode_id3) AS new_zone,
       algorithm, rate, burst, refill, refill_tick
FROM rl_zones WHERE zone = 'cr_mode';
SELECT count(*) AS old_rows FROM ratelimit.state WHERE zone_id IN (:mode_id, :mode_id2, :mode_id3);
SELECT zone_id = :mode_id2 AS dropped_id, zone_id = :mode_id3 AS reset_id, zone
FROM ratelimit.retired_zone_id WHERE zone_id IN (:mode_id2, :mode_id3) ORDER BY zone_id;
SELECT * FROM rl_limit('cr_mode', 'k', 0);

-------------------------------------------------------------------------
-- 9. rl_reset forgets a cron key: the next call finds it full.
-------------------------------------------------------------------------
SELECT remaining FROM rl_limit('cr_mode', 'r', 10);
SELECT rl_reset('cr_mode', 'r') AS existed, rl_reset('cr_mode', 'r') AS existed_again;
SELECT count(*) AS rows_after_reset FROM ratelimit.state WHERE key = 'r' AND zone_id = pg_temp.zone_id('cr_mode');
SELECT * FROM rl_limit('cr_mode', 'r', 0);

-------------------------------------------------------------------------
-- 10. cron_plan: pg_cron 1.4 (and its Debian 1.4-1) runs cron expressions
-- only: a minute for every zone.  1.5 and later take 'N seconds', N =
-- period / rate seconds rounded down, at least 1; a minute once a token
-- takes 60 s or more.
-------------------------------------------------------------------------
SELECT c.rate, c.period,
       round(ratelimit.period_micros(c.period) / c.rate / 1000000, 6) AS token_seconds,
       v14.schedule AS "1.4", v141.schedule AS "1.4-1", v14.tick AS tick_14,
       v15.schedule AS "1.5", v152.schedule AS "1.5.2", v164.schedule AS "1.6.4",
       v20.schedule AS "2.0", v15.tick AS tick_15,
       v14.tick = v141.tick AND v15.tick = v152.tick AND v15.tick = v164.tick
           AND v15.tick = v20.tick AS same_ticks
FROM (VALUES (10, interval '1 minute'), (1, '1 minute'), (7, '1 minute'), (13, '1 minute'),
             (61, '1 minute'), (1000, '1 second'), (2, '119 seconds'),
             (1, '59.999999 seconds'), (120, '2 hours'), (1, '1 hour'), (3, '1 day'),
             (1, '1 mon')) AS c(rate, period),
     ratelimit.cron_plan('1.4', c.rate, c.period) v14,
     ratelimit.cron_plan('1.4-1', c.rate, c.period) v141,
     ratelimit.cron_plan('1.5', c.rate, c.period) v15,
     ratelimit.cron_plan('1.5.2', c.rate, c.period) v152,
     ratelimit.cron_plan('1.6.4', c.rate, c.period) v164,
     ratelimit.cron_plan('2.0', c.rate, c.period) v20
ORDER BY ratelimit.period_micros(c.period) / c.rate;
-- Other version strings: a major alone, two-digit minors; not a version.
SELECT v, (ratelimit.cron_plan(v, 10, '1 minute')).*
FROM (VALUES ('1'), ('1.10'), ('10.0'), ('1.5beta')) AS t(v);
SELECT regress.try($$SELECT ratelimit.cron_plan('abc', 10, '1 minute')$$);
SELECT regress.try($$SELECT ratelimit.cron_plan('', 10, '1 minute')$$);
SELECT ratelimit.cron_plan(NULL, 10, '1 minute') IS NULL AS strict;

-------------------------------------------------------------------------
-- 11. A new period, and a refill inside a calling transaction.
-------------------------------------------------------------------------
-- (a) The counter is in units of 1 / period_us token: a new period
-- rescales it (rounded down).  cr_period: 10 per minute with a 5-second
-- tick; an empty bucket refilled once holds 5/6 token (counter 50000000 of
-- 60000000).  Now 1 per second (burst 100), tick 1 s: the 5/6 token
-- becomes 833333 of 1000000 units, and one refill adds 1 * 1 s / 1 s = 1
-- token: tokens 1, the part below one token.  (Read unscaled, the counter
-- would be 50 whole tokens.)
SELECT regress.cron_zone('cr_period', 10, '1 minute');
SELECT pg_temp.set_tick('cr_period', '5 seconds');
SELECT remaining FROM rl_limit('cr_period', 'k', 10);
SELECT * FROM pg_temp.refills('cr_period', 'k', 1);
SELECT rl_zone_set('cr_period', 'token_bucket', 1, '1 second', burst => 100, refill => 'cron');
SELECT pg_temp.set_tick('cr_period', '1 second');
SELECT rl_cron_refill('cr_period') AS refilled;
SELECT tokens, counter < 1000000 AS part_below_one_token FROM pg_temp.state('cr_period');
SELECT remaining FROM rl_peek('cr_period', 'k', 0);
-- (b) A refill in a transaction that already called rl_limit on the key:
-- the calls' changes wait in the transaction's cache, to be written at
-- commit; the refill writes them first and the cache reads the refilled
-- rows back.  cr_txn: 10 per minute, a 6-second tick (1 token).  Take 5
-- (5 left), take 1 (4, cached), refill (5), take 1: 4 left, and 4 stored
-- at commit.
SELECT regress.cron_zone('cr_txn', 10, '1 minute');
SELECT pg_temp.set_tick('cr_txn', '6 seconds');
BEGIN;
SELECT remaining FROM rl_limit('cr_txn', 'k', 5);
SELECT remaining FROM rl_limit('cr_txn', 'k', 1);
SELECT rl_cron_refill('cr_txn') AS refilled;
SELECT remaining FROM rl_limit('cr_txn', 'k', 1);
COMMIT;
SELECT key, tokens, counter, refill_pending FROM pg_temp.state('cr_txn');
-- A savepoint rolled back undoes the refill and the calls after it: take
-- 1 (3), savepoint, refill (4), take 2 (2), rollback to the savepoint,
-- take 1: 2 left (from 3), and 2 stored.
BEGIN;
SELECT remaining FROM rl_limit('cr_txn', 'k', 1);
SAVEPOINT s;
SELECT rl_cron_refill('cr_txn') AS refilled;
SELECT remaining FROM rl_limit('cr_txn', 'k', 2);
ROLLBACK TO SAVEPOINT s;
SELECT remaining FROM rl_limit('cr_txn', 'k', 1);
COMMIT;
SELECT key, tokens, counter, refill_pending FROM pg_temp.state('cr_txn');

-------------------------------------------------------------------------
-- Clean up: the tests after this one list every zone.
-------------------------------------------------------------------------
SELECT count(rl_zone_drop(zone)) AS dropped FROM ratelimit.zone WHERE zone LIKE 'cr\_%';
SELECT count(*) AS cron_rows_left FROM ratelimit.state WHERE refill_pending;
