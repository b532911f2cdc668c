-- Changing a zone with rl_zone_set, on the table store (shmem.sql does the
-- shmem store).  On a change every option the call leaves out (NULL) keeps
-- its current value; a new rate, period, burst, history or shadow keeps
-- every key's state (same zone id); another algorithm, store or refill
-- mode cannot read the keys' state, and is refused (55000) unless the call
-- passes reset => true, which starts the zone afresh under a new zone id
-- and retires the old one (ratelimit.retired_zone_id), also with nothing
-- else changed.  rl_counters counts by zone name across a zone's ids.  The
-- comments give the numbers each result must show.
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
SET ratelimit.now_override = '2026-03-01 00:00:00+00';
CREATE FUNCTION pg_temp.zone_id(zone text) RETURNS int LANGUAGE sql AS $$
    SELECT zone_id FROM ratelimit.zone z WHERE z.zone = $1
$$;
-- A zone's definition as rl_zones shows it.
CREATE FUNCTION pg_temp.def(zone text)
RETURNS TABLE (algorithm text, rate numeric, period interval, capacity bigint, burst bigint, store text,
               history boolean, refill text, refill_tick interval, shadow boolean)
LANGUAGE sql AS $$
    SELECT algorithm, rate, period, capacity, burst, store, history, refill, refill_tick, shadow
    FROM rl_zones z WHERE z.zone = $1
$$;
-- The whole row of ratelimit.zone and the state rows of a zone, as text:
-- "nothing changed" compares them before and after.
CREATE FUNCTION pg_temp.snapshot(zone text) RETURNS text LANGUAGE sql AS $$
    SELECT (SELECT z::text FROM ratelimit.zone z WHERE z.zone = $1)
           || coalesce((SELECT string_agg(s::text, ';' ORDER BY s.key, s.part)
                        FROM ratelimit.state s JOIN ratelimit.zone z USING (zone_id) WHERE z.zone = $1), '')
$$;

-------------------------------------------------------------------------
-- 1. A new zone needs an algorithm, a rate and a period (22004, the
-- missing ones named), and nothing is created; the other options take
-- their defaults: burst NULL (capacity = rate), store table, history and
-- shadow off, refill inline.
-------------------------------------------------------------------------
SELECT * FROM regress.error($$SELECT rl_zone_set('zc_new', rate => 10, period => '1 minute')$$);
SELECT regress.try($$SELECT rl_zone_set('zc_new', 'token_bucket', period => '1 minute')$$) AS no_rate,
       regress.try($$SELECT rl_zone_set('zc_new', 'token_bucket', 10)$$) AS no_period;
SELECT * FROM regress.error($$SELECT rl_zone_set('zc_new')$$);
SELECT * FROM regress.error($$SELECT rl_zone_set('zc_new', burst => 5, history => true, reset => true)$$);
SELECT count(*) AS created FROM ratelimit.zone WHERE zone = 'zc_new';
-- The zone name and reset are never optional.
SELECT regress.try($$SELECT rl_zone_set(NULL, 'token_bucket', 10, '1 minute')$$) AS null_zone,
       regress.try($$SELECT rl_zone_set('', 'token_bucket', 10, '1 minute')$$) AS empty_zone,
       regress.try($$SELECT rl_zone_set('zc_new', 'token_bucket', 10, '1 minute', reset => NULL)$$) AS null_reset;
SELECT rl_zone_set('zc_new', 'token_bucket', 10, '1 minute');
SELECT * FROM pg_temp.def('zc_new');
-- Every option NULL on an existing zone: nothing changes (the same id, the
-- same definition).
SELECT pg_temp.zone_id('zc_new') AS new_id \gset
SELECT rl_zone_set('zc_new', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
SELECT pg_temp.zone_id('zc_new') = :new_id AS same_id, * FROM pg_temp.def('zc_new');
SELECT rl_zone_drop('zc_new');

-------------------------------------------------------------------------
-- 2. Each option alone keeps all the others.  zc_all starts with every
-- option away from its default (burst 20, history and shadow on), and a
-- key with state (8 of 20 taken: 12 left).  After each change: the
-- definition, the same zone id, and the key's 12 tokens.
-------------------------------------------------------------------------
SELECT rl_zone_set('zc_all', 'token_bucket', 10, '1 minute', burst => 20, history => true, shadow => true);
SELECT pg_temp.zone_id('zc_all') AS all_id \gset
SELECT remaining FROM rl_limit('zc_all', 'k', 8);
SELECT 'before' AS change, * FROM pg_temp.def('zc_all');
CREATE FUNCTION pg_temp.after(change text)
RETURNS TABLE (change text, remaining bigint, algorithm text, rate numeric, period interval,
               capacity bigint, burst bigint, store text, history boolean, refill text, shadow boolean)
LANGUAGE sql AS $$
    SELECT $1, (SELECT p.remaining FROM rl_peek('zc_all', 'k', 0) p),
           d.algorithm, d.rate, d.period, d.capacity, d.burst, d.store, d.history, d.refill, d.shadow
    FROM pg_temp.def('zc_all') d
$$;
-- Every option NULL, named: NULL is "keep", not "default" (no 22004, and
-- no option goes back to its default).
SELECT rl_zone_set('zc_all', algorithm => NULL, rate => NULL, period => NULL, burst => NULL, store => NULL,
                   history => NULL, refill => NULL, shadow => NULL);
SELECT *, pg_temp.zone_id('zc_all') = :all_id AS same_zone_id FROM pg_temp.after('all NULL');
SELECT rl_zone_set('zc_all', rate => 12);
SELECT *, pg_temp.zone_id('zc_all') = :all_id AS same_zone_id FROM pg_temp.after('rate 12');
SELECT rl_zone_set('zc_all', period => '2 minutes');
SELECT *, pg_temp.zone_id('zc_all') = :all_id AS same_zone_id FROM pg_temp.after('period 2 min');
SELECT rl_zone_set('zc_all', burst => 30);
SELECT *, pg_temp.zone_id('zc_all') = :all_id AS same_zone_id FROM pg_temp.after('burst 30');
SELECT rl_zone_set('zc_all', history => false);
SELECT *, pg_temp.zone_id('zc_all') = :all_id AS same_zone_id FROM pg_temp.after('history off');
SELECT rl_zone_set('zc_all', shadow => false);
SELECT *, pg_temp.zone_id('zc_all') = :all_id AS same_zone_id FROM pg_temp.after('shadow off');
-- Naming the current algorithm, store or refill mode is no change: no
-- reset needed, nothing moves.
SELECT rl_zone_set('zc_all', algorithm => 'token_bucket', store => 'table', refill => 'inline');
SELECT *, pg_temp.zone_id('zc_all') = :all_id AS same_zone_id FROM pg_temp.after('same algorithm, store, refill');
-- The old README's pitfall, on the table store: the four positional
-- arguments alone on a zone with history and shadow on keep them (they
-- used to reset every option left out to its default).
SELECT rl_zone_set('zc_all', history => true, shadow => true);
SELECT rl_zone_set('zc_all', 'token_bucket', 200, '1 minute');
SELECT *, pg_temp.zone_id('zc_all') = :all_id AS same_zone_id FROM pg_temp.after('positional only');
SELECT rl_zone_drop('zc_all');

-------------------------------------------------------------------------
-- 3. A new rate, period or burst keeps each key's state: the key goes on
-- from what it has, at the new limit.  token_bucket 10 per minute, burst
-- 10; 'k' takes 8 at 00:00: 2 left.
-------------------------------------------------------------------------
SELECT rl_zone_set('zc_tb', 'token_bucket', 10, '1 minute');
SELECT remaining FROM rl_limit('zc_tb', 'k', 8);
-- rate 20 (no burst: the capacity follows the rate, 20): 2 left, reset 18
-- tokens at 3 s = 54 s.
SELECT rl_zone_set('zc_tb', rate => 20);
SELECT capacity, remaining, reset_after FROM rl_peek('zc_tb', 'k', 0);
-- period 2 minutes (20 per 2 min, a token per 6 s): 2 left, reset 108 s.
SELECT rl_zone_set('zc_tb', period => '2 minutes');
SELECT capacity, remaining, reset_after FROM rl_peek('zc_tb', 'k', 0);
-- burst 5: capacity 5, 2 left, reset 3 tokens = 18 s.
SELECT rl_zone_set('zc_tb', burst => 5);
SELECT capacity, remaining, reset_after FROM rl_peek('zc_tb', 'k', 0);
-- 12 s later 2 tokens more: 4 left, reset 6 s.
SET ratelimit.now_override = '2026-03-01 00:00:12+00';
SELECT capacity, remaining, reset_after FROM rl_peek('zc_tb', 'k', 0);
-- A smaller burst clamps what the key holds: burst 3: 3 left (full).
SELECT rl_zone_set('zc_tb', burst => 3);
SELECT capacity, remaining, reset_after FROM rl_peek('zc_tb', 'k', 0);

-- The other algorithms keep their keys' state under a new rate too (the
-- same window, the same admissions).  At 01:00:00 each takes 3 on 'k':
--   zc_gcra  gcra 10 per minute, burst 10: 7 left, reset 18 s
--   zc_fw    fixed_window 5 per minute: 2 left, reset 60 s
--   zc_swc   sliding_window_counter 5 per minute: 2 left
--   zc_sw    sliding_window 5 per minute: 2 left, reset 60 s
SET ratelimit.now_override = '2026-03-01 01:00:00+00';
SELECT rl_zone_set('zc_gcra', 'gcra', 10, '1 minute', burst => 10);
SELECT rl_zone_set('zc_fw', 'fixed_window', 5, '1 minute');
SELECT rl_zone_set('zc_swc', 'sliding_window_counter', 5, '1 minute');
SELECT rl_zone_set('zc_sw', 'sliding_window', 5, '1 minute');
SELECT zone, (rl_limit(zone, 'k', 3)).remaining
FROM unnest(ARRAY['zc_gcra', 'zc_fw', 'zc_swc', 'zc_sw']) AS zone ORDER BY zone;
-- rate 8 each (gcra: burst 20 as well): the 3 taken still count: the
-- windows have 5 left (reset: the window's end; the counter's, the end of
-- the next aligned window, 120 s); gcra's arrival time is still +18 s:
-- at the new 7.5 s interval 20 - 18 / 7.5 = 17.6, 17 whole left.
SELECT count(rl_zone_set(zone, rate => 8)) FROM unnest(ARRAY['zc_gcra', 'zc_fw', 'zc_swc', 'zc_sw']) AS zone;
SELECT rl_zone_set('zc_gcra', burst => 20);
SELECT p.zone, p.rate, p.capacity, p.remaining, p.reset_after
FROM unnest(ARRAY['zc_gcra', 'zc_fw', 'zc_swc', 'zc_sw']) AS z, rl_peek(z, 'k', 0) p ORDER BY 1;
-- rate 2: the windows' 3 taken are over the new limit: 0 left, refused.
SELECT count(rl_zone_set(zone, rate => 2)) FROM unnest(ARRAY['zc_fw', 'zc_swc', 'zc_sw']) AS zone;
SELECT p.zone, p.rate, p.allowed, p.remaining
FROM unnest(ARRAY['zc_fw', 'zc_swc', 'zc_sw']) AS z, rl_peek(z, 'k', 1) p ORDER BY 1;

-------------------------------------------------------------------------
-- 4. Another algorithm, store or refill mode without reset => true:
-- 55000 naming what would change (the detail lists it, the hint says
-- what to do), and nothing changed: the zone row and its state rows are
-- as they were.
-------------------------------------------------------------------------
SELECT pg_temp.snapshot('zc_tb') AS tb_before \gset
SELECT pg_temp.zone_id('zc_tb') AS tb_id \gset
SELECT * FROM regress.error($$SELECT rl_zone_set('zc_tb', 'gcra')$$);
SELECT * FROM regress.error($$SELECT rl_zone_set('zc_tb', store => 'shmem')$$);
SELECT * FROM regress.error($$SELECT rl_zone_set('zc_tb', 'fixed_window', store => 'shmem')$$);
-- Also with the other options named: none of them is applied.
SELECT regress.try($$SELECT rl_zone_set('zc_tb', 'sliding_window', 99, '1 hour', history => true, shadow => true)$$);
SELECT pg_temp.snapshot('zc_tb') = :'tb_before' AS unchanged;
-- A cron zone to inline (regress.cron_zone: see sql/setup.sql).
SELECT regress.cron_zone('zc_cron', 10, '1 minute');
SELECT remaining FROM rl_limit('zc_cron', 'k', 4);
-- refill => NULL keeps cron (and pg_cron is not checked: the mode does
-- not change); the key keeps its state.
SELECT rl_zone_set('zc_cron', rate => 10, refill => NULL);
SELECT refill, rate, (SELECT remaining FROM rl_peek('zc_cron', 'k', 0)) AS remaining FROM rl_zones WHERE zone = 'zc_cron';
SELECT pg_temp.snapshot('zc_cron') AS cron_before \gset
SELECT * FROM regress.error($$SELECT rl_zone_set('zc_cron', refill => 'inline')$$);
SELECT * FROM regress.error($$SELECT rl_zone_set('zc_cron', 'gcra', refill => 'inline')$$);
SELECT pg_temp.snapshot('zc_cron') = :'cron_before' AS unchanged;
-- A refused change in a transaction that goes on: nothing of it stays.
BEGIN;
SELECT regress.try($$SELECT rl_zone_set('zc_tb', 'gcra', burst => 50)$$);
SELECT pg_temp.snapshot('zc_tb') = :'tb_before' AS unchanged;
COMMIT;

-------------------------------------------------------------------------
-- 5. With reset => true: every key's state is deleted, the zone gets a new
-- zone id, and the old id is recorded in ratelimit.retired_zone_id under
-- the zone's name.  The options named change, the others are kept.
-------------------------------------------------------------------------
-- token_bucket -> gcra: rate, period and burst (3) kept (gcra has a burst).
SELECT count(*) AS rows_before FROM ratelimit.state WHERE zone_id = :tb_id;
SELECT rl_zone_set('zc_tb', 'gcra', reset => true);
SELECT pg_temp.zone_id('zc_tb') <> :tb_id AS new_id, * FROM pg_temp.def('zc_tb');
SELECT count(*) AS rows_under_old_id FROM ratelimit.state WHERE zone_id = :tb_id;
SELECT zone, retired_at IS NOT NULL AS dated FROM ratelimit.retired_zone_id WHERE zone_id = :tb_id;
-- The key starts full: 3 of 3, takes 1: 2 left.
SELECT capacity, remaining FROM rl_limit('zc_tb', 'k');
-- gcra -> fixed_window: the burst goes (a window has none): capacity =
-- rate 20.
SELECT pg_temp.zone_id('zc_tb') AS tb_id2 \gset
SELECT rl_zone_set('zc_tb', 'fixed_window', reset => true);
SELECT pg_temp.zone_id('zc_tb') NOT IN (:tb_id, :tb_id2) AS new_id, * FROM pg_temp.def('zc_tb');
SELECT count(*) AS retired_ids FROM ratelimit.retired_zone_id WHERE zone = 'zc_tb';
-- A burst with a window algorithm is refused, with or without reset.
SELECT regress.try($$SELECT rl_zone_set('zc_tb', burst => 5)$$) AS burst_on_window,
       regress.try($$SELECT rl_zone_set('zc_tb', 'sliding_window', burst => 5, reset => true)$$) AS burst_with_reset;
-- fixed_window -> token_bucket: no burst to keep: capacity = rate.
SELECT rl_zone_set('zc_tb', 'token_bucket', reset => true);
SELECT * FROM pg_temp.def('zc_tb');
-- reset => true with nothing else changed: the same definition, a new id,
-- the key's state gone.
SELECT remaining FROM rl_limit('zc_tb', 'k', 5);
SELECT pg_temp.zone_id('zc_tb') AS tb_id3 \gset
SELECT rl_zone_set('zc_tb', reset => true);
SELECT pg_temp.zone_id('zc_tb') <> :tb_id3 AS new_id, * FROM pg_temp.def('zc_tb');
SELECT count(*) AS rows_under_old_id FROM ratelimit.state WHERE zone_id = :tb_id3;
SELECT remaining FROM rl_peek('zc_tb', 'k', 0);
-- cron -> inline with reset: a new id, the old rows gone; rate kept.
SELECT pg_temp.zone_id('zc_cron') AS cron_id \gset
SELECT rl_zone_set('zc_cron', refill => 'inline', reset => true);
SELECT pg_temp.zone_id('zc_cron') <> :cron_id AS new_id, * FROM pg_temp.def('zc_cron');
SELECT count(*) AS rows_under_old_id FROM ratelimit.state WHERE zone_id = :cron_id;
-- A reset rolled back with its transaction: nothing of it stays (the id,
-- the rows, no retired id).
SELECT remaining FROM rl_limit('zc_cron', 'k', 3);
SELECT pg_temp.snapshot('zc_cron') AS cron_before \gset
SELECT pg_temp.zone_id('zc_cron') AS cron_id2 \gset
BEGIN;
SELECT rl_zone_set('zc_cron', reset => true);
SELECT pg_temp.zone_id('zc_cron') <> :cron_id2 AS new_id_inside;
ROLLBACK;
SELECT pg_temp.snapshot('zc_cron') = :'cron_before' AS unchanged,
       (SELECT count(*) FROM ratelimit.retired_zone_id WHERE zone_id = :cron_id2) AS retired;
-- rl_zone_drop retires the dropped id too.
SELECT rl_zone_drop('zc_cron');
SELECT zone FROM ratelimit.retired_zone_id WHERE zone_id = :cron_id2;
-- Every id retired in this file, by zone (ids never reused).
SELECT zone, count(*) AS retired_ids, count(DISTINCT zone_id) AS distinct_ids
FROM ratelimit.retired_zone_id WHERE zone LIKE 'zc\_%' GROUP BY zone ORDER BY zone;

-------------------------------------------------------------------------
-- 6. rl_counters counts by zone name: the counts of a zone's earlier ids
-- (a reset, a drop and a new zone of the same name) add up in one row.
-- (regress.counted: see sql/setup.sql.)
--   zc_cnt first id: 2 allowed, 1 refused; after the reset: 1 allowed;
--   dropped and created again: 1 allowed, 1 refused.  In all 4 / 2.
-------------------------------------------------------------------------
SET ratelimit.now_override = '2026-03-01 02:00:00+00';
SELECT rl_zone_set('zc_cnt', 'fixed_window', 2, '1 hour');
SELECT pg_temp.zone_id('zc_cnt') AS cnt_id1 \gset
SELECT count(*) FILTER (WHERE (r).allowed) AS allowed, count(*) FILTER (WHERE NOT (r).allowed) AS refused
FROM (SELECT rl_limit('zc_cnt', 'k') AS r FROM generate_series(1, 3) OFFSET 0) s;
SELECT * FROM regress.counted('zc_cnt');
SELECT rl_zone_set('zc_cnt', reset => true);
SELECT pg_temp.zone_id('zc_cnt') AS cnt_id2 \gset
SELECT allowed FROM rl_limit('zc_cnt', 'k');
SELECT * FROM regress.counted('zc_cnt');
SELECT rl_zone_drop('zc_cnt');
-- Dropped: its counts stay under its name.
SELECT * FROM regress.counted('zc_cnt');
SELECT rl_zone_set('zc_cnt', 'fixed_window', 1, '1 hour');
SELECT count(*) FILTER (WHERE (r).allowed) AS allowed, count(*) FILTER (WHERE NOT (r).allowed) AS refused
FROM (SELECT rl_limit('zc_cnt', 'k') AS r FROM generate_series(1, 2) OFFSET 0) s;
SELECT * FROM regress.counted('zc_cnt');
SELECT count(*) AS rows_of_zc_cnt FROM rl_counters WHERE zone = 'zc_cnt';
-- An id that neither a zone nor ratelimit.retired_zone_id names shows as
-- '(zone id N)': here the first id's retirement is forgotten.
DELETE FROM ratelimit.retired_zone_id WHERE zone_id = :cnt_id1;
SELECT zone = format('(zone id %s)', :cnt_id1) AS unknown_id_shown, allowed, refused
FROM regress.counted(format('(zone id %s)', :cnt_id1));
SELECT * FROM regress.counted('zc_cnt');
INSERT INTO ratelimit.retired_zone_id (zone_id, zone) VALUES (:cnt_id1, 'zc_cnt');
SELECT * FROM regress.counted('zc_cnt');

-------------------------------------------------------------------------
-- Clean up: the tests after this one list every zone.
-------------------------------------------------------------------------
SELECT count(rl_zone_drop(zone)) AS dropped FROM ratelimit.zone WHERE zone LIKE 'zc\_%';
