-- Fractional rates.  A zone's rate is a numeric with at most 6 decimals,
-- above 0.  token_bucket and gcra take a fraction, counted exactly as
-- whole requests over a multiple of the period (5.5 per second is 11 per
-- 2 s: no rounding drifts over time); their capacity defaults to
-- max(1, floor(rate)).  The window algorithms count whole requests per
-- window: a fraction is refused (22023) with a hint naming the whole rate
-- over a longer window.  On a fixed test clock; the comments give the
-- numbers each result must show.
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
SET ratelimit.now_override = '2026-04-01 00:00:00+00';
-- Sets the test clock to 2026-04-01 00:00:00 plus us microseconds.
CREATE FUNCTION pg_temp.at(us bigint) RETURNS text LANGUAGE sql AS $$
    SELECT set_config('ratelimit.now_override',
                      to_char(timestamp '2026-04-01 00:00:00' + us * interval '1 microsecond',
                              'YYYY-MM-DD HH24:MI:SS.US') || '+00', false)
$$;

-------------------------------------------------------------------------
-- 1. Zones with a fractional rate: rl_zones shows the rate as given and
-- the capacity: floor(rate) (5 for 5.5), at least 1 (0.5 and 0.000001),
-- or the burst.
-------------------------------------------------------------------------
SELECT rl_zone_set('fr_tb', 'token_bucket', 5.5, '1 second');
SELECT rl_zone_set('fr_gcra', 'gcra', 5.5, '1 second');
SELECT rl_zone_set('fr_tb11', 'token_bucket', 5.5, '1 second', burst => 11);
SELECT rl_zone_set('fr_gcra11', 'gcra', 5.5, '1 second', burst => 11);
SELECT rl_zone_set('fr_half', 'token_bucket', 0.5, '1 second');
SELECT rl_zone_set('fr_micro', 'gcra', 0.000001, '1 second');
SELECT rl_zone_set('fr_min', 'token_bucket', 1.5, '1 minute', burst => 3);
SELECT zone, algorithm, rate, period, capacity, burst FROM rl_zones WHERE zone LIKE 'fr\_%' ORDER BY zone;

-------------------------------------------------------------------------
-- 2. What is refused (22023), and nothing is created.
-------------------------------------------------------------------------
-- The window algorithms: the hint names the whole rate over a longer
-- window (5.5 per second is 11 per 2 seconds), or a bucket algorithm.
SELECT * FROM regress.error($$SELECT rl_zone_set('fr_bad', 'fixed_window', 5.5, '1 second')$$);
SELECT * FROM regress.error($$SELECT rl_zone_set('fr_bad', 'sliding_window', 2.25, '1 minute')$$);
SELECT regress.try($$SELECT rl_zone_set('fr_bad', 'sliding_window_counter', 0.5, '10 seconds')$$);
-- More than 6 decimals.
SELECT * FROM regress.error($$SELECT rl_zone_set('fr_bad', 'token_bucket', 5.1234567, '1 second')$$);
SELECT regress.try($$SELECT rl_zone_set('fr_bad', 'gcra', 0.0000001, '1 second')$$) AS seven_decimals;
-- Not above 0, not a number.
SELECT regress.try($$SELECT rl_zone_set('fr_bad', 'token_bucket', 0, '1 second')$$) AS zero,
       regress.try($$SELECT rl_zone_set('fr_bad', 'token_bucket', -0.5, '1 second')$$) AS negative,
       regress.try($$SELECT rl_zone_set('fr_bad', 'token_bucket', 'NaN', '1 second')$$) AS nan;
SELECT count(*) AS created FROM ratelimit.zone WHERE zone = 'fr_bad';
-- An existing window zone refuses a fractional rate, and keeps its own.
SELECT rl_zone_set('fr_fw', 'fixed_window', 5, '1 second');
SELECT regress.try($$SELECT rl_zone_set('fr_fw', rate => 5.5)$$);
SELECT zone, rate FROM rl_zones WHERE zone = 'fr_fw';
SELECT rl_zone_drop('fr_fw');

-------------------------------------------------------------------------
-- 3. token_bucket, 5.5 per second, capacity 5: 5.5 tokens a second, 2.75
-- every 0.5 s.  Taking all there is every 0.5 s after emptying it at 0:
--   0.5 s: 2.75 tokens: 2 admitted (0.75 left; a 3rd is refused, retry
--          0.25 token = 0.045455 s rounded up)
--   1.0 s: 0.75 + 2.75 = 3.5: 3 admitted (0.5 left)
--   1.5 s: 0.5 + 2.75 = 3.25: 3 admitted (0.25 left)
--   2.0 s: 0.25 + 2.75 = 3: 3 admitted, nothing left
-- 11 admitted in 2 s, exactly; then a call waits a whole token, 1 / 5.5 s
-- = 0.181819 s rounded up, and the bucket is full again in 5 tokens =
-- 0.909091 s.  The result carries the rate as given.
-------------------------------------------------------------------------
SELECT * FROM rl_limit('fr_tb', 'paced', 5);
SELECT pg_temp.at(500000);
SELECT * FROM rl_limit('fr_tb', 'paced', 2);
SELECT allowed, remaining, retry_after, reset_after FROM rl_limit('fr_tb', 'paced');
SELECT pg_temp.at(1000000);
SELECT allowed, remaining, retry_after, reset_after FROM rl_limit('fr_tb', 'paced', 3);
SELECT pg_temp.at(1500000);
SELECT allowed, remaining, retry_after, reset_after FROM rl_limit('fr_tb', 'paced', 3);
SELECT pg_temp.at(2000000);
SELECT allowed, remaining, retry_after, reset_after FROM rl_limit('fr_tb', 'paced', 3);
SELECT allowed, remaining, retry_after, reset_after FROM rl_limit('fr_tb', 'paced');

-------------------------------------------------------------------------
-- 4. Exact over a long run: a call every 10 ms for 20 s (2001 calls,
-- 0 s to 20 s) admits the full bucket at 0 s plus 5.5 * 20 = 110, 115 in
-- all, on both bucket algorithms; the last one exactly at 20 s.
-------------------------------------------------------------------------
SELECT zone, count(*) AS calls, count(*) FILTER (WHERE (r).allowed) AS admitted,
       max(t) FILTER (WHERE (r).allowed) * interval '1 microsecond' AS last_admitted
FROM (SELECT zone, t, rl_limit(zone, 'run') AS r
      FROM unnest(ARRAY['fr_tb', 'fr_gcra']) AS zone,
           -- (zone in the subquery: it sets the clock again for each zone)
           LATERAL (SELECT t, pg_temp.at(t), zone AS z FROM generate_series(0, 20000000, 10000) t) c
      OFFSET 0) s
GROUP BY zone ORDER BY zone;

-------------------------------------------------------------------------
-- 5. The 11 per 2 s is exact to the microsecond: with burst 11, an empty
-- key has 11 again after exactly 2 s, not a microsecond sooner.
-------------------------------------------------------------------------
SELECT pg_temp.at(30000000);
SELECT p.zone, p.allowed, p.remaining FROM unnest(ARRAY['fr_tb11', 'fr_gcra11']) AS z, rl_limit(z, 'edge', 11) p ORDER BY 1;
SELECT pg_temp.at(31999999);
SELECT p.zone, p.allowed, p.remaining, p.retry_after FROM unnest(ARRAY['fr_tb11', 'fr_gcra11']) AS z, rl_peek(z, 'edge', 11) p ORDER BY 1;
SELECT pg_temp.at(32000000);
SELECT p.zone, p.allowed, p.remaining, p.reset_after FROM unnest(ARRAY['fr_tb11', 'fr_gcra11']) AS z, rl_limit(z, 'edge', 11) p ORDER BY 1;
-- 0.5 per second, capacity 1: one call, then the next exactly 2 s later.
SELECT pg_temp.at(40000000);
SELECT allowed, remaining, reset_after FROM rl_limit('fr_half', 'k');
SELECT pg_temp.at(41999999);
SELECT allowed, retry_after FROM rl_limit('fr_half', 'k');
SELECT pg_temp.at(42000000);
SELECT allowed, remaining, reset_after FROM rl_limit('fr_half', 'k');
-- 1.5 per minute, burst 3: a token every 40 s; two taken, 80 s to full.
SELECT allowed, remaining, reset_after FROM rl_limit('fr_min', 'k', 2);
-- 0.000001 per second: one request per 1000000 s (277:46:40).
SELECT allowed, remaining, reset_after FROM rl_limit('fr_micro', 'k');
SELECT allowed, retry_after FROM rl_limit('fr_micro', 'k');

-------------------------------------------------------------------------
-- 6. A token_bucket zone changed to a fractional rate keeps its keys'
-- state: 10 per second, burst 10, 'k' takes 8 (2 left); rate 2.5: the 2
-- are still there, full in 8 / 2.5 = 3.2 s; 2 s later 5 more: 7 left.
-------------------------------------------------------------------------
SELECT pg_temp.at(50000000);
SELECT rl_zone_set('fr_change', 'token_bucket', 10, '1 second', burst => 10);
SELECT remaining FROM rl_limit('fr_change', 'k', 8);
SELECT rl_zone_set('fr_change', rate => 2.5);
SELECT rate, capacity, remaining, reset_after FROM rl_peek('fr_change', 'k', 0);
SELECT pg_temp.at(52000000);
SELECT rate, capacity, remaining, reset_after FROM rl_peek('fr_change', 'k', 0);
-- Without a burst the capacity follows the rate: 2.5 gives 2.
SELECT rl_zone_set('fr_nob', 'token_bucket', 10, '1 second');
SELECT rl_zone_set('fr_nob', rate => 2.5);
SELECT rate, capacity, burst FROM rl_zones WHERE zone = 'fr_nob';

-------------------------------------------------------------------------
-- Clean up: the tests after this one list every zone.
-------------------------------------------------------------------------
SELECT count(rl_zone_drop(zone)) AS dropped FROM ratelimit.zone WHERE zone LIKE 'fr\_%';
