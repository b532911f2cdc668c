-- rl_refund(zone, key, cost) on the table store (shmem.sql does the shmem
-- store): gives back cost the key was charged ("don't count failed
-- requests"), never beyond its capacity, and returns what rl_peek(zone,
-- key, 0) shows afterwards (allowed true).  A key without state is full:
-- nothing happens, no row is written.  Every algorithm: token_bucket and
-- the cron token bucket add tokens, gcra moves its arrival time back (not
-- before now), fixed_window takes from the current window's count (an
-- expired window has nothing to give back), sliding_window_counter from
-- the current window's count, then the previous one's, sliding_window
-- (exact) removes the newest entries of the head row's back buffer, then
-- of its front (never reading sealed chunks: older entries, so it may
-- give back less, never more).
-- Transactional on the table store; with history on, recorded with a
-- negative cost when it gave something back (not a refund that found the
-- key full, nor one of cost 0).  On a fixed test clock; the comments give the numbers
-- each result must show.
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
SET ratelimit.now_override = '2026-06-01 00:00:00+00';
CREATE FUNCTION pg_temp.zone_id(zone text) RETURNS int LANGUAGE sql AS $$
    SELECT zone_id FROM ratelimit.zone z WHERE z.zone = $1
$$;
-- The state rows of a key in a zone.
CREATE FUNCTION pg_temp.rows_of(zone text, key text) RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FROM ratelimit.state s WHERE s.zone_id = pg_temp.zone_id($1) AND s.key = $2
$$;
-- Sets the test clock to base (UTC) plus us microseconds.
CREATE FUNCTION pg_temp.clock(base timestamp, us bigint) RETURNS text LANGUAGE sql AS $$
    SELECT set_config('ratelimit.now_override',
                      to_char(base + us * interval '1 microsecond', 'YYYY-MM-DD HH24:MI:SS.US') || '+00',
                      false)
$$;

-------------------------------------------------------------------------
-- 1. token_bucket, 10 per minute (a token per 6 s), capacity 10.
-------------------------------------------------------------------------
SELECT rl_zone_set('rf_tb', 'token_bucket', 10, '1 minute');
-- Take 6: 4 left.  Refund 2: 6 left, full in 4 tokens = 24 s; the result
-- is rl_peek's (cost 0) afterwards.
SELECT remaining FROM rl_limit('rf_tb', 'k', 6);
SELECT * FROM rl_refund('rf_tb', 'k', 2);
SELECT * FROM rl_peek('rf_tb', 'k', 0);
-- Never above capacity: refund 5 of the 4 missing: 10, full.
SELECT * FROM rl_refund('rf_tb', 'k', 5);
-- A refill and a refund together: take 10 at 0 s, 3 s later half a
-- token is back; refund 3: 3.5 tokens, 3 left, full in 6.5 tokens = 39 s.
SELECT remaining FROM rl_limit('rf_tb', 'k2', 10);
SET ratelimit.now_override = '2026-06-01 00:00:03+00';
SELECT allowed, remaining, reset_after FROM rl_refund('rf_tb', 'k2', 3);
-- The half token was kept: 3 s later 3.5 + 0.5 = 4 tokens: cost 4
-- admitted, 0 left.
SET ratelimit.now_override = '2026-06-01 00:00:06+00';
SELECT allowed, remaining FROM rl_limit('rf_tb', 'k2', 4);
-- Cost 0: nothing given back, the key as it is.
SELECT allowed, remaining, reset_after FROM rl_refund('rf_tb', 'k2', 0);
-- A key without state is full: nothing to give back, and no row written.
SELECT * FROM rl_refund('rf_tb', 'never', 3);
SELECT pg_temp.rows_of('rf_tb', 'never') AS rows_of_never;
-- A full key with state stays full, its row unchanged.
CREATE TEMP TABLE full_row AS
SELECT s.* FROM ratelimit.state s WHERE s.zone_id = pg_temp.zone_id('rf_tb') AND s.key = 'k';
SELECT allowed, remaining, reset_after FROM rl_refund('rf_tb', 'k', 1);
SELECT count(*) AS changed_rows
FROM (SELECT s.* FROM ratelimit.state s WHERE s.zone_id = pg_temp.zone_id('rf_tb') AND s.key = 'k'
      EXCEPT SELECT * FROM full_row) c;

-------------------------------------------------------------------------
-- 2. Errors: a negative cost (22023), NULL cost or key (22004), an
-- unknown zone (42704), an empty key (22023); nothing changes.
-------------------------------------------------------------------------
SELECT * FROM regress.error($$SELECT rl_refund('rf_tb', 'k2', -1)$$);
SELECT q, regress.try(q) FROM (VALUES
    ($$SELECT rl_refund('rf_tb', 'k2', NULL)$$),
    ($$SELECT rl_refund('rf_tb', NULL)$$),
    ($$SELECT rl_refund(NULL, 'k2')$$),
    ($$SELECT rl_refund('rf_nope', 'k2')$$),
    ($$SELECT rl_refund('rf_tb', '')$$)) v(q);
SELECT remaining FROM rl_peek('rf_tb', 'k2', 0);
-- A cost above the capacity is no error: it fills the key.
SELECT allowed, remaining FROM rl_refund('rf_tb', 'k2', 1000);
-- Table store in a read-only transaction: 25006.
BEGIN READ ONLY;
SELECT regress.try($$SELECT rl_refund('rf_tb', 'k2')$$);
COMMIT;

-------------------------------------------------------------------------
-- 3. Transactional: a rolled-back refund gives nothing back; a refund
-- and a call in one transaction see each other.
-------------------------------------------------------------------------
SET ratelimit.now_override = '2026-06-01 00:01:00+00';
SELECT remaining FROM rl_limit('rf_tb', 'tx', 8);
BEGIN;
SELECT remaining FROM rl_refund('rf_tb', 'tx', 5);
ROLLBACK;
SELECT remaining FROM rl_peek('rf_tb', 'tx', 0);
BEGIN;
SELECT remaining FROM rl_refund('rf_tb', 'tx', 5);
SELECT remaining FROM rl_limit('rf_tb', 'tx', 6);
SAVEPOINT s;
SELECT remaining FROM rl_refund('rf_tb', 'tx', 4);
ROLLBACK TO SAVEPOINT s;
COMMIT;
SELECT remaining FROM rl_peek('rf_tb', 'tx', 0);

-------------------------------------------------------------------------
-- 4. gcra, 6 per minute (an emission every 10 s), burst 5: a refund
-- moves the arrival time back by 10 s per request, never before now.
-------------------------------------------------------------------------
SET ratelimit.now_override = '2026-06-01 01:00:00+00';
SELECT rl_zone_set('rf_gcra', 'gcra', 6, '1 minute', burst => 5);
-- Take 4: arrival time +40 s: 1 left, reset 40 s.  Refund 1: +30 s, 2
-- left.  Refund 10: back to now, not before: full (5), reset 0.
SELECT remaining, reset_after FROM rl_limit('rf_gcra', 'k', 4);
SELECT allowed, remaining, reset_after FROM rl_refund('rf_gcra', 'k', 1);
SELECT allowed, remaining, reset_after FROM rl_refund('rf_gcra', 'k', 10);
-- The arrival time stored is now, not before: a take starts from the later
-- of it and now, so only the row shows it.
SELECT updated_at = current_setting('ratelimit.now_override')::timestamptz AS arrival_time_is_now
FROM ratelimit.state WHERE zone_id = pg_temp.zone_id('rf_gcra') AND key = 'k';
-- Not before now: after refunding more than was taken, the burst is 5,
-- not more: 5 admitted, the 6th refused (retry 10 s).
SELECT g, (r).allowed, (r).remaining, (r).retry_after
FROM (SELECT g, rl_limit('rf_gcra', 'k') AS r FROM generate_series(1, 6) g OFFSET 0) s;
-- 5 s later, refund 2 of the 5: arrival time +50 s - 20 s = +30 s, 25 s
-- from now: 2 left, reset 25 s.
SET ratelimit.now_override = '2026-06-01 01:00:05+00';
SELECT allowed, remaining, reset_after FROM rl_refund('rf_gcra', 'k', 2);
SELECT * FROM rl_refund('rf_gcra', 'never');
SELECT pg_temp.rows_of('rf_gcra', 'never') AS rows_of_never;

-------------------------------------------------------------------------
-- 5. fixed_window, 5 per minute: a refund takes from the current window's
-- count; an expired window has nothing to give back; an emptied window no
-- longer anchors: the next admitted call opens a window of its own.
-------------------------------------------------------------------------
SET ratelimit.now_override = '2026-06-01 02:00:00+00';
SELECT rl_zone_set('rf_fw', 'fixed_window', 5, '1 minute');
-- Window [0 s, 60 s): take 4, 1 left.  At 10 s refund 1: 2 left, reset
-- 50 s; refund 9: 0 counted, full, reset 0.
SELECT remaining, reset_after FROM rl_limit('rf_fw', 'k', 4);
SET ratelimit.now_override = '2026-06-01 02:00:10+00';
SELECT allowed, remaining, reset_after FROM rl_refund('rf_fw', 'k', 1);
SELECT allowed, remaining, reset_after FROM rl_refund('rf_fw', 'k', 9);
-- The count stored is 0, not below: a window counts only a positive count,
-- so only the row shows it.
SELECT tokens AS counted FROM ratelimit.state WHERE zone_id = pg_temp.zone_id('rf_fw') AND key = 'k';
-- At 30 s a call opens a new window [30 s, 90 s): reset 60 s, not the
-- emptied window's 30 s.
SET ratelimit.now_override = '2026-06-01 02:00:30+00';
SELECT remaining, reset_after FROM rl_limit('rf_fw', 'k');
-- Take 4 more (0 left, refused after); at 90 s the window has expired:
-- a refund gives nothing back and opens nothing: full, reset 0; the next
-- call opens [90 s, 150 s).
SELECT remaining FROM rl_limit('rf_fw', 'k', 4);
SELECT allowed, retry_after FROM rl_limit('rf_fw', 'k');
SET ratelimit.now_override = '2026-06-01 02:01:30+00';
SELECT allowed, remaining, reset_after FROM rl_refund('rf_fw', 'k', 3);
SELECT remaining, reset_after FROM rl_limit('rf_fw', 'k', 2);
-- A refund is never refused, even where a look would be: take 1 more (3
-- counted, 2 left), then lower the rate to 2: a peek of cost 1 is refused
-- (retry 60 s).  A refund of 1 is allowed, no retry_after; the count
-- reads as the rate (a smaller limit clamps, as it does for a call): 2 -
-- 1 = 1 counted, 1 left.  Back at rate 5: 4 left.
SELECT remaining FROM rl_limit('rf_fw', 'k');
SELECT rl_zone_set('rf_fw', rate => 2);
SELECT allowed, remaining, retry_after FROM rl_peek('rf_fw', 'k');
SELECT allowed, remaining, retry_after, would_allow FROM rl_refund('rf_fw', 'k');
SELECT rl_zone_set('rf_fw', rate => 5);
SELECT remaining FROM rl_peek('rf_fw', 'k', 0);
-- A refund inside a rolled-back transaction: the window count comes back.
BEGIN;
SELECT remaining FROM rl_refund('rf_fw', 'k', 2);
ROLLBACK;
SELECT remaining, reset_after FROM rl_peek('rf_fw', 'k', 0);

-------------------------------------------------------------------------
-- 6. sliding_window_counter, 4 per minute, windows aligned to whole
-- minutes: a refund takes from the current window's count, then from the
-- previous one's.
-------------------------------------------------------------------------
SET ratelimit.now_override = '2026-06-01 03:00:00+00';
SELECT rl_zone_set('rf_swc', 'sliding_window_counter', 4, '1 minute');
-- [0, 60 s): 3 taken: 1 left, reset 60 + 60 s.
SELECT remaining, reset_after FROM rl_limit('rf_swc', 'k', 3);
-- At 75 s (window [60, 120 s), 45 s of it left): previous 3 weighs
-- 3 * 45 / 60 = 2.25; take 1: 3.25, 0 left, reset 45 + 60 s.
SET ratelimit.now_override = '2026-06-01 03:01:15+00';
SELECT remaining, reset_after FROM rl_limit('rf_swc', 'k');
-- Refund 1: from the current window: 2.25, 1 left, reset 45 s (only the
-- previous window counts).  Refund 1: from the previous window (2):
-- 1.5, 2 left.  Refund 5: nothing counted: 4 left, reset 0.
SELECT allowed, remaining, reset_after FROM rl_refund('rf_swc', 'k');
SELECT allowed, remaining, reset_after FROM rl_refund('rf_swc', 'k');
SELECT allowed, remaining, reset_after FROM rl_refund('rf_swc', 'k', 5);
SELECT * FROM rl_refund('rf_swc', 'never');
SELECT pg_temp.rows_of('rf_swc', 'never') AS rows_of_never;

-------------------------------------------------------------------------
-- 7. sliding_window (exact), 3 per 10 s: a refund removes the newest
-- admissions.
-------------------------------------------------------------------------
SET ratelimit.now_override = '2026-06-01 04:00:00+00';
SELECT rl_zone_set('rf_sw', 'sliding_window', 3, '10 seconds');
-- Admissions at 0, 2 and 4 s: 0 left.
SELECT remaining FROM rl_limit('rf_sw', 'k');
SET ratelimit.now_override = '2026-06-01 04:00:02+00';
SELECT remaining FROM rl_limit('rf_sw', 'k');
SET ratelimit.now_override = '2026-06-01 04:00:04+00';
SELECT remaining FROM rl_limit('rf_sw', 'k');
-- At 5 s refund 1: the 4 s admission goes: 1 left, full when the 2 s one
-- leaves: 2 + 10 - 5 = 7 s.
SET ratelimit.now_override = '2026-06-01 04:00:05+00';
SELECT allowed, remaining, reset_after FROM rl_refund('rf_sw', 'k');
-- One call is admitted again (a refused one would wait 5 s for the 0 s
-- admission to leave: retry 5 s).
SELECT allowed, remaining, reset_after FROM rl_limit('rf_sw', 'k');
SELECT allowed, retry_after FROM rl_limit('rf_sw', 'k');
-- Refund 5: every admission goes: 3 left, reset 0.
SELECT allowed, remaining, reset_after FROM rl_refund('rf_sw', 'k', 5);
SELECT * FROM rl_refund('rf_sw', 'never');
SELECT pg_temp.rows_of('rf_sw', 'never') AS rows_of_never;
-- With sealed chunks: 2000 per hour, 1500 admissions 1 us apart (as in
-- zones.sql section 15: the head row keeps g 1..248 and g 1489..1500, 5
-- chunks hold the rest).  Refund 1000 gives back the 260 the head row
-- holds and reads no chunk: 1240 counted, 760 left, never more.  A
-- second refund finds nothing more to give back.
SELECT rl_zone_set('rf_big', 'sliding_window', 2000, '1 hour');
SELECT count(*) FILTER (WHERE (r).allowed) AS admitted
FROM (SELECT g, rl_limit('rf_big', 'k') AS r
      FROM (SELECT g, pg_temp.clock('2026-06-01 05:00:00', g) FROM generate_series(1, 1500) g OFFSET 0) c
      OFFSET 0) s;
SELECT array_agg(part ORDER BY part) AS parts, max(tokens) FILTER (WHERE part = 0) AS admitted
FROM ratelimit.state WHERE zone_id = pg_temp.zone_id('rf_big') AND key = 'k';
SELECT allowed, remaining FROM rl_refund('rf_big', 'k', 1000);
SELECT allowed, remaining FROM rl_refund('rf_big', 'k', 1000);
SELECT array_agg(part ORDER BY part) AS parts, max(tokens) FILTER (WHERE part = 0) AS admitted
FROM ratelimit.state WHERE zone_id = pg_temp.zone_id('rf_big') AND key = 'k';
-- 760 more are admitted, the 761st refused.
SELECT count(*) FILTER (WHERE (r).allowed) AS admitted, count(*) FILTER (WHERE NOT (r).allowed) AS refused
FROM (SELECT g, rl_limit('rf_big', 'k') AS r
      FROM (SELECT g, pg_temp.clock('2026-06-01 05:00:00', 1500 + g) FROM generate_series(1, 761) g OFFSET 0) c
      OFFSET 0) s;

-------------------------------------------------------------------------
-- 8. The cron token bucket (regress.cron_zone: see sql/setup.sql), 10 per
-- minute, a 1-second tick (1/6 token a refill): tokens += cost, capped;
-- the part token stays until the bucket is full.
-------------------------------------------------------------------------
SET ratelimit.now_override = '2026-06-01 06:00:00+00';
SELECT regress.cron_zone('rf_cron', 10, '1 minute');
UPDATE ratelimit.zone SET refill_tick = '1 second' WHERE zone = 'rf_cron';
-- Take 6 (4 left), one refill: 4 tokens and 1/6 (counter 10000000).
SELECT remaining FROM rl_limit('rf_cron', 'k', 6);
SELECT rl_cron_refill('rf_cron') AS refilled;
-- Refund 2: 6 tokens and 1/6, still pending refill; full in 3 5/6
-- tokens = 23 ticks = 23 s.
SELECT allowed, remaining, reset_after FROM rl_refund('rf_cron', 'k', 2);
SELECT tokens, counter, refill_pending FROM ratelimit.state
WHERE zone_id = pg_temp.zone_id('rf_cron') AND key = 'k';
-- Refund 5: capped at 10; full: the part token goes, no refill pending,
-- and the refill job has nothing to do.
SELECT allowed, remaining, reset_after FROM rl_refund('rf_cron', 'k', 5);
SELECT tokens, counter, refill_pending FROM ratelimit.state
WHERE zone_id = pg_temp.zone_id('rf_cron') AND key = 'k';
SELECT rl_cron_refill('rf_cron') AS refilled;
-- Without a job: 3 taken (7 left), refund 1: 8 left, and no time can be
-- promised (reset NULL).
UPDATE ratelimit.zone SET refill_tick = NULL WHERE zone = 'rf_cron';
SELECT remaining FROM rl_limit('rf_cron', 'k', 3);
SELECT * FROM rl_refund('rf_cron', 'k', 1);
SELECT * FROM rl_refund('rf_cron', 'never');
SELECT pg_temp.rows_of('rf_cron', 'never') AS rows_of_never;

-------------------------------------------------------------------------
-- 9. History: a refund is recorded with a negative cost, allowed; a
-- rolled-back refund's row goes with it; rl_refund's txn_id is the
-- transaction's.
-------------------------------------------------------------------------
SET ratelimit.now_override = '2026-06-01 07:00:00+00';
TRUNCATE ratelimit.history;
SELECT rl_zone_set('rf_hist', 'token_bucket', 10, '1 minute', history => true);
BEGIN;
SELECT remaining, txn_id = txid_current() AS is_txid_current FROM rl_limit('rf_hist', 'h', 5);
SELECT remaining, txn_id = txid_current() AS is_txid_current FROM rl_refund('rf_hist', 'h', 3);
COMMIT;
BEGIN;
SELECT remaining FROM rl_refund('rf_hist', 'h', 2);
ROLLBACK;
SELECT zone, key, cost, allowed FROM ratelimit.history ORDER BY cost DESC;
-- The history's sum is what the key is charged: 5 - 3 = 2 (8 left).
SELECT sum(cost) AS charged FROM ratelimit.history WHERE zone = 'rf_hist' AND key = 'h';
SELECT remaining FROM rl_peek('rf_hist', 'h', 0);

-------------------------------------------------------------------------
-- 10. A refund decides nothing: rl_counters counts no refund (only the
-- calls: rf_hist 1 allowed, counted from section 9); a shadow zone
-- refunds like any other.
-------------------------------------------------------------------------
SELECT zone, allowed, refused FROM regress.counted('rf_hist');
SELECT rl_zone_set('rf_shadow', 'fixed_window', 2, '1 minute', shadow => true);
SELECT count(*) FROM (SELECT rl_limit('rf_shadow', 'k') FROM generate_series(1, 3) OFFSET 0) s;
SELECT allowed, would_allow, remaining FROM rl_peek('rf_shadow', 'k');
SELECT allowed, would_allow, remaining FROM rl_refund('rf_shadow', 'k');
SELECT allowed, would_allow, remaining FROM rl_peek('rf_shadow', 'k');

-------------------------------------------------------------------------
-- 11. The same rules on every algorithm, the cron token bucket included
-- (rf_tb, rf_gcra, rf_fw, rf_swc, rf_sw, rf_cron), on a key 'm' that took
-- 2 at 08:00:00, history on:
--   cost 0 gives nothing back: the key as rl_peek(.., 0) shows it;
--   a negative cost is 22023, a NULL cost 22004, and nothing changes;
--   a refund rolled back gives nothing back;
--   refund 1: one more left; refund 100: full, never above capacity;
--   a key without state stays without (no row), full;
--   history: the take (2) and the refund of 1 (-1), allowed; the refund
--   of 0 gave nothing back and is not recorded.
-------------------------------------------------------------------------
SET ratelimit.now_override = '2026-06-01 08:00:00+00';
TRUNCATE ratelimit.history;
SELECT count(rl_zone_set(zone, history => true))
FROM unnest(ARRAY['rf_tb', 'rf_gcra', 'rf_fw', 'rf_swc', 'rf_sw', 'rf_cron']) zone;
CREATE TEMP TABLE every AS
SELECT zone, (rl_limit(zone, 'm', 2)).remaining AS after_take
FROM unnest(ARRAY['rf_tb', 'rf_gcra', 'rf_fw', 'rf_swc', 'rf_sw', 'rf_cron']) zone;
CREATE FUNCTION pg_temp.state_of(zone text, key text) RETURNS text LANGUAGE sql AS $$
    SELECT coalesce(string_agg(s::text, ';' ORDER BY s.part), '(none)')
    FROM ratelimit.state s WHERE s.zone_id = pg_temp.zone_id($1) AND s.key = $2
$$;
CREATE FUNCTION pg_temp.rules(zone text,
    OUT capacity bigint, OUT after_take bigint, OUT cost_0_same boolean, OUT negative text, OUT null_cost text,
    OUT rolled_back_same boolean, OUT after_refund_1 bigint, OUT after_refund_100 bigint,
    OUT no_state_remaining bigint, OUT no_state_rows bigint)
LANGUAGE plpgsql AS $$
DECLARE
    before text;
    p rl_result;
BEGIN
    p := rl_peek(zone, 'm', 0);
    capacity := p.capacity;
    after_take := p.remaining;
    before := pg_temp.state_of(zone, 'm');
    -- (all but txn_id: the refund is recorded, the peek is not)
    cost_0_same := (SELECT (r.allowed, r.capacity, r.remaining, r.retry_after, r.reset_after, r.would_allow,
                            r.zone, r.rate, r.period)
                           IS NOT DISTINCT FROM
                           (p.allowed, p.capacity, p.remaining, p.retry_after, p.reset_after, p.would_allow,
                            p.zone, p.rate, p.period)
                    FROM rl_refund(zone, 'm', 0) r)
                   AND pg_temp.state_of(zone, 'm') = before;
    negative := regress.try(format('SELECT rl_refund(%L, %L, -1)', zone, 'm'));
    null_cost := regress.try(format('SELECT rl_refund(%L, %L, NULL)', zone, 'm'));
    BEGIN
        PERFORM rl_refund(zone, 'm', 1);
        RAISE EXCEPTION 'roll back';
    EXCEPTION WHEN raise_exception THEN
        NULL;
    END;
    rolled_back_same := pg_temp.state_of(zone, 'm') = before;
    after_refund_1 := (rl_refund(zone, 'm', 1)).remaining;
    after_refund_100 := (rl_refund(zone, 'm', 100)).remaining;
    no_state_remaining := (rl_refund(zone, 'm-none', 3)).remaining;
    no_state_rows := pg_temp.rows_of(zone, 'm-none');
END $$;
SELECT zone, r.* FROM unnest(ARRAY['rf_tb', 'rf_gcra', 'rf_fw', 'rf_swc', 'rf_sw', 'rf_cron']) zone,
     pg_temp.rules(zone) r;
SELECT zone, key, array_agg(cost ORDER BY cost DESC) AS costs, bool_and(allowed) AS all_allowed
FROM ratelimit.history WHERE key = 'm' AND cost >= -1 GROUP BY zone, key ORDER BY zone, key;

-------------------------------------------------------------------------
-- Clean up: the tests after this one list every zone.
-------------------------------------------------------------------------
SELECT count(rl_zone_drop(zone)) AS dropped FROM ratelimit.zone WHERE zone LIKE 'rf\_%';
