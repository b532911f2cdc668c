-- Section 5: the exact sliding window (rl_sliding_window) against the log
-- table (bench.log_window, 4_zones_setup.sql) at each limit of :sw_limits.
--
-- Each measured key holds prefill = 0.9 x limit admissions, :sw_spacing
-- apart, ending minutes before the measurements and expiring long after:
-- the window is 90 % full and nothing expires while measuring (checked at
-- the end).  Ours is pre-filled through rl_sliding_window itself (one call
-- per admission, the clock set by ratelimit.now_override), the log table by
-- INSERT ... SELECT of the same times.  A key takes a call in at most
-- (limit - prefill) repetitions, so that every measured call is admitted
-- (checked: only admitted calls are counted); at small limits the
-- repetitions take several key sets in turn.
--
-- Every limit is measured over the same number of keys per statement, so
-- that the fixed cost of a statement (planning, commit) weighs the same on
-- each call at every limit: as many keys as :sw_rows pre-filled admissions
-- allow at the largest limit, at most :sw_keys_max.
--
-- Variables: reps, sw_limits (space-separated), sw_period, sw_spacing,
-- sw_rows, sw_keys_max.

SET client_min_messages = warning;
SET ratelimit.table_access = direct;
SELECT now() - interval '20 minutes' AS sw_base \gset

-- sets = ceil((reps + 1) / (limit - prefill)): rep r takes key set r % sets.
WITH lim AS (
    SELECT l::bigint AS lim, l::bigint * 9 / 10 AS prefill
      FROM unnest(string_to_array(:'sw_limits', ' ')) l
), f AS (
    SELECT lim, prefill, (:reps + lim - prefill) / (lim - prefill) AS sets FROM lim
)
INSERT INTO bench.sw_setup (lim, prefill, keys, sets)
SELECT f.lim, f.prefill, greatest(1, least(:sw_keys_max, :sw_rows / (big.sets * big.prefill))), f.sets
  FROM f, (SELECT * FROM f ORDER BY lim DESC LIMIT 1) big;

-- Pre-fill, limit after limit: ours about 100k admissions per statement
-- (rep 0 of bench.measure: the count is checked, not recorded), then the
-- log table.
SELECT c.sql
  FROM bench.sw_setup u,
       LATERAL (SELECT greatest(1, 100000 / u.prefill) AS chunk) k,
       LATERAL (SELECT lo, format('CALL bench.measure(%L, %L, 0, NULL, %s, %L)', 'prefill', 'sw_' || u.lim,
                                  (least(lo + k.chunk - 1, u.sets * u.keys) - lo + 1) * u.prefill,
                                  format($$SELECT count((rl_sliding_window('sw_%1$s', key, 1)).allowed OR NULL) FROM (
    SELECT 'w%1$s-' || i AS key,
           set_config('ratelimit.now_override', (timestamptz %2$L + j * interval %3$L)::text, false) AS t
      FROM generate_series(%4$s, %5$s) i, generate_series(0, %6$s) j OFFSET 0) s
 WHERE t IS NOT NULL$$,
                                         u.lim, :'sw_base', :'sw_spacing', lo,
                                         least(lo + k.chunk - 1, u.sets * u.keys), u.prefill - 1))
                  FROM generate_series(1, u.sets * u.keys, k.chunk) lo
                UNION ALL
                SELECT u.sets * u.keys + 1, 'RESET ratelimit.now_override'
                UNION ALL
                SELECT u.sets * u.keys + 2,
                       format($$INSERT INTO bench.log_window (key, at)
SELECT 'w%1$s-' || i, timestamptz %2$L + j * interval %3$L
  FROM generate_series(1, %4$s) i, generate_series(0, %5$s) j$$,
                              u.lim, :'sw_base', :'sw_spacing', u.sets * u.keys, u.prefill - 1)) AS c(lo, sql)
 ORDER BY u.lim, c.lo
\gexec
VACUUM ANALYZE ratelimit.state, bench.log_window;

-- Each repetition: the statement without any call (its fixed cost), then
-- limit after limit ours and the log table, each over key set rep % sets;
-- then VACUUM.
TRUNCATE bench.steps;
INSERT INTO bench.steps (rep, n, phase, variant, calls, sql)
SELECT r, 0, 'sw', 'empty:0', keys, format('SELECT count(i) FROM generate_series(1, %s) i', keys)
  FROM (SELECT DISTINCT keys FROM bench.sw_setup) u, generate_series(0, :reps) r;
INSERT INTO bench.steps (rep, n, phase, variant, access, calls, sql)
SELECT r, 10 * dense_rank() OVER (PARTITION BY r ORDER BY u.lim) + v.n, 'sw', v.who || ':' || u.lim, v.access, u.keys,
       format(v.call, u.lim, (r % u.sets) * u.keys + 1, (r % u.sets) * u.keys + u.keys, :'sw_period')
  FROM bench.sw_setup u, generate_series(0, :reps) r,
       (VALUES (1, 'ours', 'direct',
                $$SELECT count((rl_sliding_window('sw_%1$s', 'w%1$s-' || i, 1)).allowed OR NULL) FROM generate_series(%2$s, %3$s) i$$),
               (2, 'log', NULL,
                $$SELECT count(bench.log_window('w%1$s-' || i, %1$s, interval %4$L, 1) OR NULL) FROM generate_series(%2$s, %3$s) i$$))
           AS v(n, who, access, call);
INSERT INTO bench.steps (n, sql) VALUES (1000, 'VACUUM ratelimit.state, bench.log_window');
\set repeat :reps
\ir interleave.sql

-- No pre-filled admission left the window before the last call.
SELECT bench.fail_if('section 5 took too long', 'pre-filled admissions expired')
 WHERE clock_timestamp() >= timestamptz :'sw_base' + interval :'sw_period';
