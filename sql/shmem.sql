-- The shmem store on a fixed test clock.  The same calls on a
-- table zone and a shmem zone with identical parameters must give the same
-- results, for every algorithm the shmem store takes (all but the exact
-- sliding_window); rl_token_bucket and rl_gcra likewise with
-- ratelimit.default_store = table and shmem.  Then what differs around the
-- decision: not transactional, works in read-only transactions (unless the
-- zone keeps a history), no exact sliding window; changing a zone's store,
-- dropping a zone, and rl_counters.  The comments give the numbers each
-- result must show, worked out from the algorithms' definitions (the same
-- sequences as zones.sql, whose numbers are explained there).
--
-- Needs ratelimit in shared_preload_libraries.  The shmem store and its
-- counters belong to the server, not to this database: scripts/test.sh runs
-- this file once, first, on a fresh cluster (`make installcheck
-- REGRESS=shmem`), and the exact counts below assume no earlier database
-- used the same zone ids or rl_token_bucket / rl_gcra keys in shared memory.
-- (Today shared memory does not tell databases apart: a second run on the
-- same server finds the first run's keys and counts under the same zone
-- ids, although its database is new.  test/fault/shmem.sh (f) tests that.)
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
SET ratelimit.now_override = '2026-01-01 00:00:00+00';
CREATE FUNCTION pg_temp.zone_id(zone text) RETURNS int LANGUAGE sql AS $$
    SELECT zone_id FROM ratelimit.zone z WHERE z.zone = $1
$$;
-- How a key is shown: long keys by their length and last character.
CREATE FUNCTION pg_temp.show(key text) RETURNS text LANGUAGE sql AS $$
    SELECT CASE WHEN length($1) > 12 THEN format('<%s bytes, ends %s>', length($1), right($1, 1)) ELSE $1 END
$$;

-------------------------------------------------------------------------
-- 1. A table zone (t_*) and a shmem zone (s_*) per algorithm, identical
-- parameters.  The store option is the only difference.
-------------------------------------------------------------------------
SELECT count(rl_zone_set(prefix || alg, algorithm, rate, period, burst, store)) AS zones_created
FROM (VALUES ('tb', 'token_bucket', 10, interval '1 minute', 20),
             ('gcra', 'gcra', 30, interval '1 minute', 16),
             ('fw', 'fixed_window', 3, interval '1 minute', NULL),
             ('swc', 'sliding_window_counter', 4, interval '7 seconds', NULL)) AS a(alg, algorithm, rate, period, burst),
     (VALUES ('t_', 'table'), ('s_', 'shmem')) AS s(prefix, store);
SELECT zone, algorithm, rate, period, capacity, burst, store, history
FROM rl_zones ORDER BY substr(zone, 3), zone;

-------------------------------------------------------------------------
-- 2. One call sequence per algorithm (op limit = rl_limit, peek = rl_peek,
-- reset = rl_reset), run on the table zone, then on the shmem zone.
-------------------------------------------------------------------------
CREATE TEMP TABLE steps (alg text, step int, at timestamptz, op text, key text, cost int);
-- Keys over 48 bytes are kept by a hash in shared memory, shorter ones as
-- they are: 48 and 49 bytes with the same first 48, and two 109-byte keys
-- that differ in their last byte, must be four keys.
\set k48 '''kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk'''
\set k49 '''kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk'''
\set long_x '''long-key/long-key/long-key/long-key/long-key/long-key/long-key/long-key/long-key/long-key/long-key/long-key/x'''
\set long_y '''long-key/long-key/long-key/long-key/long-key/long-key/long-key/long-key/long-key/long-key/long-key/long-key/y'''
SELECT length(:k48) AS k48, length(:k49) AS k49, length(:long_x) AS long_x, length(:long_y) AS long_y;

-- token_bucket, capacity 20, one token every 6 s (zones.sql section 2):
--   1..20 at 00:00:00: remaining 19 .. 0, reset 6 s per missing token;
--   21: refused, retry 6 s, reset 120 s
--   22 at :30: 5 back, remaining 4, reset 96 s
--   23 at :33: cost 5 of 4.5: refused, remaining 4, retry 3 s, reset 93 s
--   24 at :36: peek cost 5 = what 25 returns: allowed, 0 left, reset 120 s
--   26: cost 0 on the empty key: allowed, remaining 0, reset 120 s
--   27: peek cost 1: refused, retry 6 s, reset 120 s (24, 27 took nothing)
--   28, 29: rl_reset true, then false; 30: a fresh key: 19, reset 6 s
--   31 at 00:10:00: cost 0: full again (20), reset 0
--   32: cost 0 on a new key: 20, reset 0, and nothing kept: 33 reset false
--   34: peek cost 3 on a new key: 17, reset 18 s; kept nothing: 35 false
--   36..38 a 109-byte key, cost 7: 13 (42 s), 6 (84 s), refused (retry 6 s)
--   39 the other 109-byte key, cost 7: a fresh 13
--   40..42 48 bytes: 13, 49 bytes: a fresh 13, 48 bytes again: 6
--   43 reset of the 109-byte key: true; 44 peek cost 7 on it: fresh, 13
INSERT INTO steps
SELECT 'tb', g, '2026-01-01 00:00:00+00', 'limit', 'a', 1 FROM generate_series(1, 21) g
UNION ALL VALUES
    ('tb', 22, timestamptz '2026-01-01 00:00:30+00', 'limit', 'a', 1),
    ('tb', 23, '2026-01-01 00:00:33+00', 'limit', 'a', 5),
    ('tb', 24, '2026-01-01 00:00:36+00', 'peek', 'a', 5),
    ('tb', 25, '2026-01-01 00:00:36+00', 'limit', 'a', 5),
    ('tb', 26, '2026-01-01 00:00:36+00', 'limit', 'a', 0),
    ('tb', 27, '2026-01-01 00:00:36+00', 'peek', 'a', 1),
    ('tb', 28, '2026-01-01 00:00:36+00', 'reset', 'a', NULL),
    ('tb', 29, '2026-01-01 00:00:36+00', 'reset', 'a', NULL),
    ('tb', 30, '2026-01-01 00:00:36+00', 'limit', 'a', 1),
    ('tb', 31, '2026-01-01 00:10:00+00', 'limit', 'a', 0),
    ('tb', 32, '2026-01-01 00:10:00+00', 'limit', 'zero', 0),
    ('tb', 33, '2026-01-01 00:10:00+00', 'reset', 'zero', NULL),
    ('tb', 34, '2026-01-01 00:10:00+00', 'peek', 'never', 3),
    ('tb', 35, '2026-01-01 00:10:00+00', 'reset', 'never', NULL),
    ('tb', 36, '2026-01-01 00:10:00+00', 'limit', :long_x, 7),
    ('tb', 37, '2026-01-01 00:10:00+00', 'limit', :long_x, 7),
    ('tb', 38, '2026-01-01 00:10:00+00', 'limit', :long_x, 7),
    ('tb', 39, '2026-01-01 00:10:00+00', 'limit', :long_y, 7),
    ('tb', 40, '2026-01-01 00:10:00+00', 'limit', :k48, 7),
    ('tb', 41, '2026-01-01 00:10:00+00', 'limit', :k49, 7),
    ('tb', 42, '2026-01-01 00:10:00+00', 'limit', :k48, 7),
    ('tb', 43, '2026-01-01 00:10:00+00', 'reset', :long_x, NULL),
    ('tb', 44, '2026-01-01 00:10:00+00', 'peek', :long_x, 7);

-- gcra, capacity 16, emission interval 2 s, tolerance 32 s (section 3):
--   1..16 at 01:00:00: remaining 15 .. 0, reset 2 .. 32 s; 17 refused,
--   retry 2 s, reset 32 s
--   18 at :02: allowed, 0 left, reset 32 s (TAT :34)
--   19 at :12: cost 3: TAT :40, remaining 2, reset 28 s; 20 cost 3 again:
--   refused, retry 2 s, remaining 2, reset 28 s
--   21 peek cost 2: TAT :44 is 32 s ahead: allowed, 0 left, reset 32 s
--   22 cost 0: remaining 2, reset 28 s (21 took nothing)
--   23 at 01:01:00 (TAT :40 passed): cost 0: 16, reset 0
--   24, 25 reset true, false; 26 cost 0 new key: 16, 27 reset false
--   28 peek cost 16: allowed, 0 left, reset 32 s; 29 the same call; 30
--   refused, retry 2 s, reset 32 s
INSERT INTO steps
SELECT 'gcra', g, '2026-01-01 01:00:00+00', 'limit', 'a', 1 FROM generate_series(1, 17) g
UNION ALL VALUES
    ('gcra', 18, timestamptz '2026-01-01 01:00:02+00', 'limit', 'a', 1),
    ('gcra', 19, '2026-01-01 01:00:12+00', 'limit', 'a', 3),
    ('gcra', 20, '2026-01-01 01:00:12+00', 'limit', 'a', 3),
    ('gcra', 21, '2026-01-01 01:00:12+00', 'peek', 'a', 2),
    ('gcra', 22, '2026-01-01 01:00:12+00', 'limit', 'a', 0),
    ('gcra', 23, '2026-01-01 01:01:00+00', 'limit', 'a', 0),
    ('gcra', 24, '2026-01-01 01:01:00+00', 'reset', 'a', NULL),
    ('gcra', 25, '2026-01-01 01:01:00+00', 'reset', 'a', NULL),
    ('gcra', 26, '2026-01-01 01:01:00+00', 'limit', 'zero', 0),
    ('gcra', 27, '2026-01-01 01:01:00+00', 'reset', 'zero', NULL),
    ('gcra', 28, '2026-01-01 01:01:00+00', 'peek', 'a', 16),
    ('gcra', 29, '2026-01-01 01:01:00+00', 'limit', 'a', 16),
    ('gcra', 30, '2026-01-01 01:01:00+00', 'limit', 'a', 1);

-- fixed_window, 3 per minute, the window opens at a key's first call
-- (section 4):
--   1 at 01:00:10: 2 left, reset 60 s; 2 at :20: 1, 50 s; 3 at :30: 0, 40 s
--   4 at :40: refused, retry 30 s; 5 at 01:01:00: retry 10 s;
--   6 at 01:01:09.999999: retry 1 us; 7 at 01:01:10: new window, 2, 60 s
--   8 at :20 cost 2: 0 left, reset 50 s; 9 refused, retry 50 s; 10 peek:
--   the same; 11 cost 0: allowed, 0 left, reset 50 s
--   12 cost 0 new key: 3, reset 0; 13 reset false; 14 reset of 'a' true
--   15 cost 3: a fresh window, 0 left, reset 60 s
--   16 at 01:02:20, exactly a period later: peek cost 3: a new window,
--   allowed, 0 left, reset 60 s
INSERT INTO steps VALUES
    ('fw', 1, '2026-01-01 01:00:10+00', 'limit', 'a', 1),
    ('fw', 2, '2026-01-01 01:00:20+00', 'limit', 'a', 1),
    ('fw', 3, '2026-01-01 01:00:30+00', 'limit', 'a', 1),
    ('fw', 4, '2026-01-01 01:00:40+00', 'limit', 'a', 1),
    ('fw', 5, '2026-01-01 01:01:00+00', 'limit', 'a', 1),
    ('fw', 6, '2026-01-01 01:01:09.999999+00', 'limit', 'a', 1),
    ('fw', 7, '2026-01-01 01:01:10+00', 'limit', 'a', 1),
    ('fw', 8, '2026-01-01 01:01:20+00', 'limit', 'a', 2),
    ('fw', 9, '2026-01-01 01:01:20+00', 'limit', 'a', 1),
    ('fw', 10, '2026-01-01 01:01:20+00', 'peek', 'a', 1),
    ('fw', 11, '2026-01-01 01:01:20+00', 'limit', 'a', 0),
    ('fw', 12, '2026-01-01 01:01:20+00', 'limit', 'zero', 0),
    ('fw', 13, '2026-01-01 01:01:20+00', 'reset', 'zero', NULL),
    ('fw', 14, '2026-01-01 01:01:20+00', 'reset', 'a', NULL),
    ('fw', 15, '2026-01-01 01:01:20+00', 'limit', 'a', 3),
    ('fw', 16, '2026-01-01 01:02:20+00', 'peek', 'a', 3);

-- sliding_window_counter, 4 per 7 s; 2026-01-01 00:00:00 is 2 s into an
-- aligned window [-2 s, 5 s), then [5, 12), [12, 19), [19, 26), [26, 33)
-- (section 5):
--   1..4 at 00:00:00: 3 .. 0 left, reset 5 + 7 = 12 s; 5 refused, retry
--   6.75 s (4 * 5.25 / 7 + 1 = 4 at 6.75 s), reset 12 s
--   6 at :05: 4 * 7/7 + 1 > 4: refused, retry 1.75 s, reset 7 s
--   7 at :06.75: allowed, 0 left, reset 5.25 + 7 = 12.25 s
--   8 at :12 (previous 1): 2 left, reset 7 + 7 = 14 s
--   9 at :30 (window [26, 33), nothing before): 3 left, reset 3 + 7 = 10 s
--   10 peek cost 3: 1 + 3 = 4: allowed, 0 left, reset 10 s
--   11 cost 0: 3 left, reset 10 s
--   12 cost 0 new key: 4, reset 0; 13 reset false; 14 reset of 'a' true
--   15 cost 4 on the fresh key: 0 left, reset 10 s
--   16 cost 1: refused until 4 * (40 - t) / 7 + 1 <= 4, t = 34.75 s:
--   retry 4.75 s, reset 10 s
INSERT INTO steps
SELECT 'swc', g, '2026-01-01 00:00:00+00', 'limit', 'a', 1 FROM generate_series(1, 5) g
UNION ALL VALUES
    ('swc', 6, timestamptz '2026-01-01 00:00:05+00', 'limit', 'a', 1),
    ('swc', 7, '2026-01-01 00:00:06.75+00', 'limit', 'a', 1),
    ('swc', 8, '2026-01-01 00:00:12+00', 'limit', 'a', 1),
    ('swc', 9, '2026-01-01 00:00:30+00', 'limit', 'a', 1),
    ('swc', 10, '2026-01-01 00:00:30+00', 'peek', 'a', 3),
    ('swc', 11, '2026-01-01 00:00:30+00', 'limit', 'a', 0),
    ('swc', 12, '2026-01-01 00:00:30+00', 'limit', 'zero', 0),
    ('swc', 13, '2026-01-01 00:00:30+00', 'reset', 'zero', NULL),
    ('swc', 14, '2026-01-01 00:00:30+00', 'reset', 'a', NULL),
    ('swc', 15, '2026-01-01 00:00:30+00', 'limit', 'a', 4),
    ('swc', 16, '2026-01-01 00:00:30+00', 'limit', 'a', 1);

CREATE TEMP TABLE results (store text, alg text, step int, allowed boolean, capacity bigint,
    remaining bigint, retry_after interval, reset_after interval, txn_id bigint, had_state boolean);
CREATE FUNCTION pg_temp.run_steps(store text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    s record;
    r rl_result;
    zone text;
BEGIN
    FOR s IN SELECT * FROM steps ORDER BY alg, step LOOP
        zone := CASE store WHEN 'table' THEN 't_' ELSE 's_' END || s.alg;
        PERFORM set_config('ratelimit.now_override', s.at::text, false);
        IF s.op = 'reset' THEN
            INSERT INTO results (store, alg, step, had_state)
            VALUES (store, s.alg, s.step, rl_reset(zone, s.key));
        ELSE
            IF s.op = 'limit' THEN
                SELECT * INTO r FROM rl_limit(zone, s.key, s.cost);
            ELSE
                SELECT * INTO r FROM rl_peek(zone, s.key, s.cost);
            END IF;
            INSERT INTO results VALUES (store, s.alg, s.step, r.allowed, r.capacity, r.remaining,
                                        r.retry_after, r.reset_after, r.txn_id, NULL);
        END IF;
    END LOOP;
    RETURN (SELECT count(*) FROM results x WHERE x.store = run_steps.store);
END $$;
SELECT pg_temp.run_steps('table') AS table_calls;
SELECT pg_temp.run_steps('shmem') AS shmem_calls;
-- Every step on both stores, the same results: no row may differ.
SELECT alg, step, t.allowed AS t_allowed, s.allowed AS s_allowed, t.remaining AS t_remaining,
       s.remaining AS s_remaining, t.retry_after AS t_retry, s.retry_after AS s_retry,
       t.reset_after AS t_reset, s.reset_after AS s_reset, t.had_state AS t_had, s.had_state AS s_had
FROM (SELECT * FROM results WHERE store = 'table') t
FULL JOIN (SELECT * FROM results WHERE store = 'shmem') s USING (alg, step)
WHERE (t.allowed, t.capacity, t.remaining, t.retry_after, t.reset_after, t.txn_id, t.had_state)
      IS DISTINCT FROM (s.allowed, s.capacity, s.remaining, s.retry_after, s.reset_after, s.txn_id, s.had_state)
   OR t.step IS NULL OR s.step IS NULL
ORDER BY alg, step;
-- The shmem results themselves (had_state: rl_reset's result).
SELECT r.alg, r.step, to_char(st.at, 'HH24:MI:SS.US') AS at, st.op, pg_temp.show(st.key) AS key,
       st.cost, r.allowed, r.capacity, r.remaining, r.retry_after, r.reset_after, r.txn_id, r.had_state
FROM results r JOIN steps st USING (alg, step)
WHERE r.store = 'shmem'
ORDER BY CASE r.alg WHEN 'tb' THEN 1 WHEN 'gcra' THEN 2 WHEN 'fw' THEN 3 ELSE 4 END, r.step;

-------------------------------------------------------------------------
-- 3. rl_token_bucket and rl_gcra: ratelimit.default_store = table, then
-- shmem, the same calls at the same instants.  The stores are apart: the
-- shmem run starts with full buckets although the table run emptied the
-- same keys.
-------------------------------------------------------------------------
SELECT name, setting, context FROM pg_settings
WHERE name IN ('ratelimit.default_store', 'ratelimit.shmem_full_policy', 'ratelimit.shmem_max_keys')
ORDER BY name;
CREATE TEMP TABLE adhoc (store text, fn text, step int, at timestamptz, remaining bigint, r rl_result);
CREATE FUNCTION pg_temp.run_adhoc(store text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    step int := 0;
    r rl_result;
    clock constant timestamptz[] := ARRAY['2026-01-01 08:00:00+00', '2026-01-01 08:00:04+00',
                                          '2026-01-01 08:00:04.5+00', '2026-01-01 08:00:05.05+00'];
BEGIN
    PERFORM set_config('ratelimit.default_store', store, true);
    -- The documented example, rate 1, window 10: twelve calls at one instant 9 .. 0, -1,
    -- -1; 4 s later 3; cost 3 empties it; 100 refused calls at 4.5 s; at
    -- 5.05 s (1.05 tokens since 4 s) one is admitted (0), the next refused.
    PERFORM set_config('ratelimit.now_override', clock[1]::text, true);
    FOR i IN 1 .. 12 LOOP
        step := step + 1;
        INSERT INTO adhoc VALUES (store, 'tb', step, clock[1], rl_token_bucket('spec', 1, 10));
    END LOOP;
    PERFORM set_config('ratelimit.now_override', clock[2]::text, true);
    step := step + 1;
    INSERT INTO adhoc VALUES (store, 'tb', step, clock[2], rl_token_bucket('spec', 1, 10));
    step := step + 1;
    INSERT INTO adhoc VALUES (store, 'tb', step, clock[2], rl_token_bucket('spec', 1, 10, 3));
    PERFORM set_config('ratelimit.now_override', clock[3]::text, true);
    FOR i IN 1 .. 100 LOOP
        step := step + 1;
        INSERT INTO adhoc VALUES (store, 'tb', step, clock[3], rl_token_bucket('spec', 1, 10));
    END LOOP;
    PERFORM set_config('ratelimit.now_override', clock[4]::text, true);
    FOR i IN 1 .. 2 LOOP
        step := step + 1;
        INSERT INTO adhoc VALUES (store, 'tb', step, clock[4], rl_token_bucket('spec', 1, 10));
    END LOOP;
    step := step + 1;
    INSERT INTO adhoc VALUES (store, 'tb', step, clock[4], rl_token_bucket('spec', 1, 10, 0));

    -- redis-cell's CL.THROTTLE user123 15 30 60 (section 14 of zones.sql).
    step := 0;
    PERFORM set_config('ratelimit.now_override', '2026-01-01 08:00:00+00', true);
    FOR i IN 1 .. 17 LOOP
        step := step + 1;
        SELECT * INTO r FROM rl_gcra('user123', 15, 30, 60, 1);
        INSERT INTO adhoc VALUES (store, 'gcra', step, '2026-01-01 08:00:00+00', NULL, r);
    END LOOP;
    PERFORM set_config('ratelimit.now_override', '2026-01-01 08:00:01.999999+00', true);
    step := step + 1;
    SELECT * INTO r FROM rl_gcra('user123', 15, 30, 60);
    INSERT INTO adhoc VALUES (store, 'gcra', step, '2026-01-01 08:00:01.999999+00', NULL, r);
    PERFORM set_config('ratelimit.now_override', '2026-01-01 08:00:02+00', true);
    step := step + 1;
    SELECT * INTO r FROM rl_gcra('user123', 15, 30, 60);
    INSERT INTO adhoc VALUES (store, 'gcra', step, '2026-01-01 08:00:02+00', NULL, r);
    step := step + 1;
    SELECT * INTO r FROM rl_gcra('half', 0, 1, 0.5);
    INSERT INTO adhoc VALUES (store, 'gcra', step, '2026-01-01 08:00:02+00', NULL, r);
    step := step + 1;
    SELECT * INTO r FROM rl_gcra('half', 0, 1, 0.5, 0);
    INSERT INTO adhoc VALUES (store, 'gcra', step, '2026-01-01 08:00:02+00', NULL, r);
    step := step + 1;
    SELECT * INTO r FROM rl_gcra('half', 0, 1, 0.5);
    INSERT INTO adhoc VALUES (store, 'gcra', step, '2026-01-01 08:00:02+00', NULL, r);
    RETURN (SELECT count(*) FROM adhoc a WHERE a.store = run_adhoc.store);
END $$;
CREATE TEMP TABLE counters_before AS SELECT * FROM ratelimit.shmem_counters() WHERE zone_id IN (0, -1);
BEGIN;
SELECT pg_temp.run_adhoc('table') AS table_calls;
COMMIT;
CREATE TEMP TABLE table_rows AS SELECT * FROM ratelimit.state WHERE key IN ('spec', 'user123', 'half');
SELECT key, zone_id FROM table_rows ORDER BY key;  -- spec under 0, the others under -1
BEGIN;
SELECT pg_temp.run_adhoc('shmem') AS shmem_calls;
COMMIT;
-- The shmem calls wrote no row and changed none.
SELECT (SELECT count(*) FROM ratelimit.state WHERE key IN ('spec', 'user123', 'half')) AS rows_now,
       (SELECT count(*) FROM (SELECT * FROM ratelimit.state WHERE key IN ('spec', 'user123', 'half')
                              EXCEPT SELECT * FROM table_rows) s) AS changed_rows;
SHOW ratelimit.default_store;  -- SET LOCAL: back to table
-- No call differs between the stores.
SELECT fn, step, t.remaining AS t_remaining, s.remaining AS s_remaining, t.r AS t_result, s.r AS s_result
FROM (SELECT * FROM adhoc WHERE store = 'table') t
FULL JOIN (SELECT * FROM adhoc WHERE store = 'shmem') s USING (fn, step)
WHERE (t.at, t.remaining, t.r) IS DISTINCT FROM (s.at, s.remaining, s.r) OR t.step IS NULL OR s.step IS NULL;
-- rl_token_bucket on the shmem store, per instant: 9 8 7 6 5 4 3 2 1 0 -1
-- -1, then 3 0, then 100 times -1, then 0 -1 and cost 0: 0.
SELECT to_char(at, 'HH24:MI:SS.US') AS at, count(*) AS calls,
       CASE WHEN count(DISTINCT remaining) = 1 AND count(*) > 2 THEN count(*) || ' x ' || min(remaining)
            ELSE string_agg(remaining::text, ' ' ORDER BY step) END AS remaining
FROM adhoc WHERE store = 'shmem' AND fn = 'tb'
GROUP BY at ORDER BY at;
-- rl_gcra on the shmem store: 16 admitted (15 .. 0 left, reset 2 .. 32 s),
-- the 17th refused (retry 2 s); 1 us before 08:00:02 refused (retry 1 us,
-- reset 30.000001 s); at 08:00:02 admitted (0 left, reset 32 s).  'half'
-- (max_burst 0, 1 per 0.5 s): capacity 1, 0 left, reset 0.5 s; quantity 0
-- allowed, 0 left; then refused, retry 0.5 s.
SELECT step, to_char(at, 'HH24:MI:SS.US') AS at, (r).*
FROM adhoc WHERE store = 'shmem' AND fn = 'gcra' ORDER BY step;

-------------------------------------------------------------------------
-- 4. Not transactional: a rolled-back call gives its tokens back on the
-- table store and not on the shmem store (documented).
-------------------------------------------------------------------------
SET ratelimit.now_override = '2026-01-01 00:20:00+00';
BEGIN;
SELECT 'table' AS store, * FROM rl_limit('t_tb', 'txn', 5)
UNION ALL
SELECT 'shmem', * FROM rl_limit('s_tb', 'txn', 5);  -- both: 15 left, reset 30 s
ROLLBACK;
-- Cost 0 after the rollback: table 20 (given back), shmem 15 (still taken,
-- reset 30 s).
SELECT 'table' AS store, * FROM rl_limit('t_tb', 'txn', 0)
UNION ALL
SELECT 'shmem', * FROM rl_limit('s_tb', 'txn', 0);

-------------------------------------------------------------------------
-- 5. Read-only transactions: the shmem store writes no row, so its calls
-- work; the table store and a shmem zone with history (a table) raise
-- 25006 and take nothing.
-------------------------------------------------------------------------
SELECT rl_zone_set('s_hist', 'token_bucket', 2, '1 minute', store => 'shmem', history => true);
SET ratelimit.now_override = '2026-01-01 00:30:00+00';
BEGIN READ ONLY;
SELECT * FROM rl_limit('s_tb', 'ro');  -- 19 left, reset 6 s
SELECT regress.try($$SELECT rl_limit('t_tb', 'ro')$$) AS table_zone,
       regress.try($$SELECT rl_limit('s_hist', 'ro')$$) AS shmem_zone_with_history;
-- Peeks (cost 1) work on either store: t_tb's 'ro' is new (the call above
-- raised and took nothing): 19 left, reset 6 s; s_tb's has 19: 18 left,
-- reset 12 s; s_hist still has both tokens: 1 left, reset 30 s.
SELECT 'table' AS store, * FROM rl_peek('t_tb', 'ro')
UNION ALL
SELECT 'shmem', * FROM rl_peek('s_tb', 'ro')
UNION ALL
SELECT 'shmem, history', * FROM rl_peek('s_hist', 'ro');
SET LOCAL ratelimit.default_store = shmem;
SELECT rl_token_bucket('ro', 1, 10) AS shmem_bucket;  -- 9
SELECT * FROM rl_gcra('ro', 15, 30, 60);  -- 16, 15 left, reset 2 s
SET LOCAL ratelimit.default_store = 'table';
SELECT regress.try($$SELECT rl_token_bucket('ro', 1, 10)$$) AS table_bucket,
       regress.try($$SELECT (rl_gcra('ro', 15, 30, 60)).allowed$$) AS table_gcra;
COMMIT;
-- Outside it, the history zone decides in shared memory and records the
-- call: 1 left, txn_id is this transaction's.
BEGIN;
SELECT allowed, remaining, txn_id = txid_current() AS is_txid_current FROM rl_limit('s_hist', 'ro');
COMMIT;
SELECT zone, key, cost, allowed FROM ratelimit.history WHERE zone = 's_hist';

-------------------------------------------------------------------------
-- 6. The exact sliding window keeps every admission: not in shared memory
-- (0A000), neither for a new zone nor by altering one; nothing changes.
-------------------------------------------------------------------------
SELECT rl_zone_set('t_sw', 'sliding_window', 3, '10 seconds');
SELECT regress.try($$SELECT rl_zone_set('s_sw', 'sliding_window', 3, '10 seconds', store => 'shmem')$$) AS new_zone,
       regress.try($$SELECT rl_zone_set('t_sw', 'sliding_window', 3, '10 seconds', store => 'shmem')$$) AS table_to_shmem,
       regress.try($$SELECT rl_zone_set('s_tb', 'sliding_window', 3, '10 seconds', store => 'shmem')$$) AS shmem_to_sliding;
SELECT zone, algorithm, store FROM rl_zones WHERE zone IN ('s_sw', 't_sw', 's_tb') ORDER BY zone;

-------------------------------------------------------------------------
-- 7. Altering a zone without changing algorithm or store keeps its keys'
-- state on both stores (zones.sql section 12); changing the store cannot
-- carry the keys' state: refused without reset => true (55000), and with
-- it every key starts afresh under a new zone id.
-------------------------------------------------------------------------
SET ratelimit.now_override = '2026-01-01 00:40:00+00';
SELECT count(rl_zone_set(zone, 'token_bucket', 10, '1 minute', store => store)) AS zones_created
FROM (VALUES ('t_alter', 'table'), ('s_alter', 'shmem')) v(zone, store);
SELECT zone, (r).remaining
FROM (SELECT zone, rl_limit(zone, 'k', 8) AS r FROM unnest(ARRAY['t_alter', 's_alter']) zone OFFSET 0) s
ORDER BY zone;  -- 2 left of 10 on both
SELECT count(rl_zone_set(zone, 'token_bucket', 20, '1 minute', burst => 20, store => store)) AS zones_altered
FROM (VALUES ('t_alter', 'table'), ('s_alter', 'shmem')) v(zone, store);
-- Same instant: the 2 tokens are still there; 1 left of 20, reset 19
-- tokens at the new rate, 3 s each = 57 s, on both.
SELECT zone, (r).*
FROM (SELECT zone, rl_limit(zone, 'k') AS r FROM unnest(ARRAY['t_alter', 's_alter']) zone OFFSET 0) s
ORDER BY 1;

-- 'mv': table -> shmem -> table.
SELECT rl_zone_set('mv', 'token_bucket', 10, '1 minute');
SELECT pg_temp.zone_id('mv') AS mv_table_id \gset
SELECT * FROM rl_limit('mv', 'k', 8);  -- 2 left, reset 48 s
-- Without reset: refused, the zone and its row as they were.
SELECT regress.try($$SELECT rl_zone_set('mv', 'token_bucket', 10, '1 minute', store => 'shmem')$$);
SELECT store, pg_temp.zone_id('mv') = :mv_table_id AS same_zone_id,
       (SELECT count(*) FROM ratelimit.state WHERE zone_id = :mv_table_id) AS table_rows
FROM rl_zones WHERE zone = 'mv';
SELECT rl_zone_set('mv', 'token_bucket', 10, '1 minute', store => 'shmem', reset => true);
SELECT store, pg_temp.zone_id('mv') <> :mv_table_id AS new_zone_id,
       (SELECT count(*) FROM ratelimit.state WHERE zone_id = :mv_table_id) AS old_table_rows
FROM rl_zones WHERE zone = 'mv';
SELECT pg_temp.zone_id('mv') AS mv_shmem_id \gset
SELECT * FROM rl_limit('mv', 'k', 3);  -- afresh: 7 left, reset 18 s
-- Back to the table store, the store alone named: refused without reset
-- (the shmem key keeps its 7), then afresh with it.
SELECT regress.try($$SELECT rl_zone_set('mv', store => 'table')$$);
SELECT remaining FROM rl_peek('mv', 'k', 0);
SELECT rl_zone_set('mv', store => 'table', reset => true);
SELECT store, pg_temp.zone_id('mv') NOT IN (:mv_table_id, :mv_shmem_id) AS new_zone_id FROM rl_zones WHERE zone = 'mv';
SELECT * FROM rl_limit('mv', 'k', 1);  -- afresh again: 9 left, reset 6 s
-- The shmem key of the old id is gone, not only unreachable: no key of
-- that id is left in shared memory.
SELECT count(*) AS shmem_keys_of_old_id FROM ratelimit.shmem_keys() WHERE zone_id = :mv_shmem_id;

-------------------------------------------------------------------------
-- 8. rl_zone_drop removes the zone's keys from shared memory.  In shared
-- memory a zone's keys are told apart by its zone id alone, so to see that
-- the entry is gone (and not just unreachable under a new id) the zone is
-- created again under the same id: the sequence is set back (s_drop is
-- the last zone created, so nothing else uses the id).
-------------------------------------------------------------------------
SET ratelimit.now_override = '2026-01-01 00:50:00+00';
SELECT rl_zone_set('s_drop', 'fixed_window', 2, '1 hour', store => 'shmem');
SELECT pg_temp.zone_id('s_drop') AS drop_id \gset
SELECT pg_temp.zone_id('s_drop') = (SELECT max(zone_id) FROM ratelimit.zone) AS last_zone_created;
SELECT g, (r).allowed, (r).remaining, (r).retry_after
FROM (SELECT g, rl_limit('s_drop', 'k') AS r FROM generate_series(1, 3) g OFFSET 0) s;  -- 1, 0, refused (1 h)
SELECT rl_zone_drop('s_drop');
SELECT setval('ratelimit.zone_id_seq', :drop_id, false) = :drop_id AS id_given_back;
SELECT rl_zone_set('s_drop', 'fixed_window', 2, '1 hour', store => 'shmem');
SELECT pg_temp.zone_id('s_drop') = :drop_id AS same_zone_id;
SELECT * FROM rl_limit('s_drop', 'k');  -- a fresh window: 1 left, reset 1 h
SELECT rl_reset('s_drop', 'k') AS had_state, rl_reset('s_drop', 'k') AS again;

-------------------------------------------------------------------------
-- 9. rl_counters: calls allowed and refused per zone, on both stores
-- (rl_limit only: peeks, resets and calls that raised an error are not
-- decisions; the rolled-back calls of section 4 were).  The table and
-- shmem zone of each algorithm show the same numbers:
--   tb:   steps 1..21 (20, 1), 22, 23 (refused), 25, 26, 30, 31, 32, 36,
--         37, 38 (refused), 39 .. 42: 32 allowed, 3 refused; section 4:
--         2 more (the rolled-back call and cost 0); section 5: s_tb 1
--         ('ro'), t_tb's raised: t_tb 34 / 3, s_tb 35 / 3
--   gcra: 1..17 (16, 1), 18, 19, 20 (refused), 22, 23, 26, 29, 30
--         (refused): 22 / 3
--   fw:   1..9: 5 allowed (1, 2, 3, 7, 8), 4 refused (4, 5, 6, 9); 11,
--         12, 15: 8 / 4
--   swc:  1..5 (4, 1), 6 (refused), 7, 8, 9, 11, 12, 15, 16 (refused):
--         10 / 3
--   s_hist 1 / 0 (the read-only call raised); t_alter, s_alter 2 / 0;
--   mv 1 / 0 under each of its three ids (table, shmem, table: the
--   refused changes decided nothing), counted by its name: 3 / 0; s_drop
--   2 / 1 under its first life, and 1 / 0 under its second: its id,
--   given back, starts with no counts (as an id of a new CREATE EXTENSION
--   does, section 12).
-- No zone of this file has a key evicted or refused for room.
-------------------------------------------------------------------------
SELECT zone, allowed, refused, evicted, "full"
FROM rl_counters
WHERE zone ~ '^(t|s)_' OR zone = 'mv'
ORDER BY substr(zone, 3), zone;
-- mv's two earlier ids are retired under its name (so they count as
-- 'mv'), and no counted id is left without a name.
SELECT zone_id = :mv_table_id AS table_id, zone_id = :mv_shmem_id AS shmem_id, zone
FROM ratelimit.retired_zone_id WHERE zone_id IN (:mv_table_id, :mv_shmem_id) ORDER BY zone_id;
SELECT count(*) AS unnamed_ids FROM rl_counters WHERE zone LIKE '(zone id %';
-- rl_token_bucket and rl_gcra count under pseudo-zones of their own; this
-- file's share (counted from before section 3):
--   rl_token_bucket: section 3, per store 12 calls (10, 2), 2 allowed, 100
--   refused, 1 allowed, 1 refused, cost 0 allowed: 14 / 103, twice = 28 /
--   206; section 5: 1 allowed on shmem (the table call raised): 29 / 206
--   rl_gcra: per store 17 (16, 1), 1 refused, 1 allowed, 'half' 2 allowed
--   and 1 refused: 19 / 3, twice 38 / 6; section 5: 1 allowed: 39 / 6
SELECT c.zone, c.allowed - coalesce(b.allowed, 0) AS allowed, c.refused - coalesce(b.refused, 0) AS refused,
       c.evicted - coalesce(b.evicted, 0) AS evicted, c."full" - coalesce(b."full", 0) AS "full"
FROM rl_counters c
LEFT JOIN counters_before b ON b.zone_id = CASE c.zone WHEN '(rl_token_bucket)' THEN 0 ELSE -1 END
WHERE c.zone IN ('(rl_token_bucket)', '(rl_gcra)')
ORDER BY c.zone;

-------------------------------------------------------------------------
-- 10. Changing a shmem zone (zone_changes.sql does the table store): an
-- option left out keeps its value; a new rate, period, burst, history or
-- shadow keeps the keys' state in shared memory; another algorithm (or
-- store) without reset => true is refused (55000) and changes nothing;
-- with it, the zone's keys leave shared memory, the zone gets a new id
-- and the old one is retired under its name.
-------------------------------------------------------------------------
SET ratelimit.now_override = '2026-01-01 02:00:00+00';
-- The README's old pitfall: a shmem zone in shadow mode, then a new rate
-- given with the four positional arguments alone.  It stays on the shmem
-- store and in shadow mode, and its keys keep their state: 's2:k' took 8
-- of 10 (2 left); without a burst the capacity follows the rate (200):
-- still 2 left, full in 198 tokens at 200 per minute = 59.4 s.
SELECT rl_zone_set('s2', 'token_bucket', 10, '1 minute', store => 'shmem', shadow => true);
SELECT pg_temp.zone_id('s2') AS s2_id \gset
SELECT remaining FROM rl_limit('s2', 's2:k', 8);
SELECT rl_zone_set('s2', 'token_bucket', 200, '1 minute');
SELECT pg_temp.zone_id('s2') = :s2_id AS same_zone_id, algorithm, rate, store, shadow, history
FROM rl_zones WHERE zone = 's2';
SELECT capacity, remaining, reset_after, would_allow FROM rl_peek('s2', 's2:k', 0);
-- Each option alone keeps the others, and the key its state: burst 20,
-- period 2 minutes (100 per minute), history on, shadow off, one at a
-- time: the key still holds 2 of 20, full in 18 tokens = 10.8 s.
SELECT rl_zone_set('s2', burst => 20);
SELECT rl_zone_set('s2', period => '2 minutes');
SELECT rl_zone_set('s2', history => true);
SELECT rl_zone_set('s2', shadow => false);
SELECT pg_temp.zone_id('s2') = :s2_id AS same_zone_id, algorithm, rate, period, capacity, burst, store,
       history, shadow
FROM rl_zones WHERE zone = 's2';
SELECT capacity, remaining, reset_after FROM rl_peek('s2', 's2:k', 0);
SELECT rl_zone_set('s2', history => false);
-- Another algorithm without reset: refused, nothing changed (the zone
-- row, the key in shared memory).
SELECT (SELECT z::text FROM ratelimit.zone z WHERE z.zone = 's2') AS s2_row \gset
SELECT regress.try($$SELECT rl_zone_set('s2', 'fixed_window', 5, '1 minute')$$);
SELECT (SELECT z::text FROM ratelimit.zone z WHERE z.zone = 's2') = :'s2_row' AS unchanged;
SELECT capacity, remaining, reset_after FROM rl_peek('s2', 's2:k', 0);
SELECT count(*) AS shmem_keys FROM ratelimit.shmem_keys() WHERE zone_id = :s2_id;
-- The exact sliding window is refused on shmem (0A000), with reset too.
SELECT regress.try($$SELECT rl_zone_set('s2', 'sliding_window', reset => true)$$);
-- With reset => true: a new id, the old id's keys gone from shared
-- memory, the old id retired under the name; the key starts full.
SELECT rl_zone_set('s2', 'fixed_window', 5, '1 minute', reset => true);
SELECT pg_temp.zone_id('s2') <> :s2_id AS new_zone_id, algorithm, rate, capacity, burst, store, shadow
FROM rl_zones WHERE zone = 's2';
SELECT count(*) AS old_id_shmem_keys FROM ratelimit.shmem_keys() WHERE zone_id = :s2_id;
SELECT zone FROM ratelimit.retired_zone_id WHERE zone_id = :s2_id;
SELECT capacity, remaining FROM rl_limit('s2', 's2:k');
-- reset => true alone: the same definition, afresh again.
SELECT pg_temp.zone_id('s2') AS s2_id2 \gset
SELECT rl_zone_set('s2', reset => true);
SELECT pg_temp.zone_id('s2') NOT IN (:s2_id, :s2_id2) AS new_zone_id, algorithm, rate, store
FROM rl_zones WHERE zone = 's2';
SELECT count(*) AS old_id_shmem_keys FROM ratelimit.shmem_keys() WHERE zone_id = :s2_id2;
SELECT remaining FROM rl_peek('s2', 's2:k', 0);

-------------------------------------------------------------------------
-- 11. rl_counters by name on the shmem store: a zone's counts survive a
-- reset and a drop and re-creation under the same name, in one row.
--   first id: 2 allowed, 1 refused; after the reset: 1 allowed; created
--   again: 1 allowed, 1 refused: 4 / 2.  s2 (section 10): 2 allowed (a
--   call of cost 8, one of cost 1 after the first reset), in one row
--   with its three ids.
-------------------------------------------------------------------------
SET ratelimit.now_override = '2026-01-01 02:10:00+00';
SELECT rl_zone_set('s_cnt', 'fixed_window', 2, '1 hour', store => 'shmem');
SELECT count(*) FILTER (WHERE (r).allowed) AS allowed, count(*) FILTER (WHERE NOT (r).allowed) AS refused
FROM (SELECT rl_limit('s_cnt', 'k') AS r FROM generate_series(1, 3) OFFSET 0) s;
SELECT rl_zone_set('s_cnt', reset => true);
SELECT allowed FROM rl_limit('s_cnt', 'k');
SELECT zone, allowed, refused FROM rl_counters WHERE zone = 's_cnt';
SELECT rl_zone_drop('s_cnt');
SELECT zone, allowed, refused FROM rl_counters WHERE zone = 's_cnt';
SELECT rl_zone_set('s_cnt', 'fixed_window', 1, '1 hour', store => 'shmem');
SELECT count(*) FILTER (WHERE (r).allowed) AS allowed, count(*) FILTER (WHERE NOT (r).allowed) AS refused
FROM (SELECT rl_limit('s_cnt', 'k') AS r FROM generate_series(1, 2) OFFSET 0) s;
SELECT zone, allowed, refused, evicted, "full" FROM rl_counters WHERE zone IN ('s_cnt', 's2') ORDER BY zone;
SELECT count(*) AS unnamed_ids FROM rl_counters WHERE zone LIKE '(zone id %';

-------------------------------------------------------------------------
-- 12. Fractional rates on the shmem store, as on the table store
-- (fractional.sql): 5.5 per second, capacity 5; paced every 0.5 s after
-- emptying it, 2, 3, 3, 3 admitted (11 in 2 s), then a wait of 1 / 5.5 s
-- rounded up; gcra alike.  No step differs between the stores.
-------------------------------------------------------------------------
SELECT count(rl_zone_set(p || alg, alg, 5.5, '1 second', store => store))
FROM (VALUES ('t_f_', 'table'), ('s_f_', 'shmem')) s(p, store), unnest(ARRAY['token_bucket', 'gcra']) alg;
SELECT zone, rate, capacity, store FROM rl_zones WHERE zone LIKE '%\_f\_%' ORDER BY zone;
CREATE TEMP TABLE frac AS
SELECT alg, store, step, (r).allowed, (r).remaining, (r).retry_after, (r).reset_after
FROM (SELECT alg, store, step,
             rl_limit(CASE store WHEN 'table' THEN 't_f_' ELSE 's_f_' END || alg, 'k', cost) AS r
      FROM unnest(ARRAY['token_bucket', 'gcra']) alg, unnest(ARRAY['table', 'shmem']) store,
           LATERAL (SELECT step, cost, set_config('ratelimit.now_override',
                                                  (timestamptz '2026-01-01 03:00:00+00' + t * interval '1 second')::text, false),
                           alg AS a, store AS s
                    FROM (VALUES (1, 0.0, 5), (2, 0.5, 2), (3, 0.5, 1), (4, 1.0, 3), (5, 1.5, 3), (6, 2.0, 3), (7, 2.0, 1))
                         v(step, t, cost)) c
      OFFSET 0) x;
SELECT alg, step, allowed, remaining, retry_after, reset_after FROM frac WHERE store = 'shmem' ORDER BY alg DESC, step;
SELECT count(*) AS differing
FROM frac t JOIN frac s USING (alg, step)
WHERE t.store = 'table' AND s.store = 'shmem'
  AND (t.allowed, t.remaining, t.retry_after, t.reset_after) IS DISTINCT FROM (s.allowed, s.remaining, s.retry_after, s.reset_after);

-------------------------------------------------------------------------
-- 13. rl_limit(zones text[]) on the shmem store, and mixed with the table
-- store (multi_zone.sql does the table store alone).  5 per second AND 2
-- per minute: 5 calls at one instant admit 2, and the refused calls
-- charged neither zone (the per-second zone has 3 left); the same with
-- the per-minute zone on the table store.
-------------------------------------------------------------------------
SET ratelimit.now_override = '2026-01-01 04:00:00+00';
SELECT rl_zone_set('m_s_sec', 'token_bucket', 5, '1 second', store => 'shmem');
SELECT rl_zone_set('m_s_min', 'token_bucket', 2, '1 minute', store => 'shmem');
SELECT rl_zone_set('m_t_min', 'token_bucket', 2, '1 minute');
SELECT g, (r).allowed, (r).remaining, (r).retry_after, (r).zone
FROM (SELECT g, rl_limit(ARRAY['m_s_sec', 'm_s_min'], 'all-shmem') AS r FROM generate_series(1, 5) g OFFSET 0) s;
SELECT p.zone, p.remaining FROM unnest(ARRAY['m_s_sec', 'm_s_min']) z, rl_peek(z, 'all-shmem', 0) p ORDER BY 1;
SELECT g, (r).allowed, (r).remaining, (r).retry_after, (r).zone
FROM (SELECT g, rl_limit(ARRAY['m_s_sec', 'm_t_min'], 'mixed') AS r FROM generate_series(1, 5) g OFFSET 0) s;
SELECT p.zone, p.remaining FROM unnest(ARRAY['m_s_sec', 'm_t_min']) z, rl_peek(z, 'mixed', 0) p ORDER BY 1;
-- Refused by the shmem zone: the table zone is not charged.  'mixed2':
-- the per-second zone emptied alone (5), then the array refused (retry
-- 0.2 s); the table zone still has its 2.
SELECT remaining FROM rl_limit('m_s_sec', 'mixed2', 5);
SELECT allowed, remaining, retry_after, zone FROM rl_limit(ARRAY['m_t_min', 'm_s_sec'], 'mixed2');
SELECT remaining FROM rl_peek('m_t_min', 'mixed2', 0);
-- Rolled back: the table zone's charge comes back, the shmem zone's does
-- not (the shmem store is not transactional).
BEGIN;
SELECT allowed, remaining, zone FROM rl_limit(ARRAY['m_s_sec', 'm_t_min'], 'rb');
ROLLBACK;
SELECT p.zone, p.remaining FROM unnest(ARRAY['m_s_sec', 'm_t_min']) z, rl_peek(z, 'rb', 0) p ORDER BY 1;
-- Read-only: shmem zones alone decide; with a table zone, 25006 and
-- nothing charged on either store.
BEGIN READ ONLY;
SELECT allowed, remaining, zone FROM rl_limit(ARRAY['m_s_sec', 'm_s_min'], 'ro');
SELECT regress.try($$SELECT rl_limit(ARRAY['m_s_sec', 'm_t_min'], 'ro2')$$);
COMMIT;
SELECT p.zone, p.remaining FROM unnest(ARRAY['m_s_sec', 'm_t_min']) z, rl_peek(z, 'ro2', 0) p ORDER BY 1;
-- A one-zone array is rl_limit(zone) on the shmem store too: the twins of
-- section 1 (t_* on the table store, s_* on shmem, same limits) take the
-- same calls, one zone by an array: no result differs but the name.
SET ratelimit.now_override = '2026-01-01 05:00:00+00';
CREATE TEMP TABLE one_zone AS
SELECT alg, step, rl_limit(ARRAY['s_' || alg], 'one', cost) AS by_array, rl_limit('t_' || alg, 'one', cost) AS by_name
FROM unnest(ARRAY['tb', 'gcra', 'fw', 'swc']) alg,
     LATERAL (SELECT step, cost, set_config('ratelimit.now_override',
                                            (timestamptz '2026-01-01 05:00:00+00' + step * interval '3 seconds')::text, false),
                     alg AS a
              FROM generate_series(1, 12) step, LATERAL (SELECT (ARRAY[1, 2, 3, 0])[step % 4 + 1] AS cost) c) c
ORDER BY alg, step;
SELECT alg, count(*) AS calls, count(*) FILTER (WHERE (by_array).allowed) AS admitted,
       count(*) FILTER (WHERE ((by_array).allowed, (by_array).capacity, (by_array).remaining,
                               (by_array).retry_after, (by_array).reset_after, (by_array).would_allow)
                              IS DISTINCT FROM
                              ((by_name).allowed, (by_name).capacity, (by_name).remaining,
                               (by_name).retry_after, (by_name).reset_after, (by_name).would_allow)) AS differing
FROM one_zone GROUP BY alg ORDER BY alg;
-- History on a shmem zone in an array: recorded as the call went.
SET ratelimit.now_override = '2026-01-01 06:00:00+00';
SELECT rl_zone_set('m_s_hist', 'fixed_window', 1, '1 minute', store => 'shmem', history => true);
SELECT g, (r).allowed, (r).zone FROM (SELECT g, rl_limit(ARRAY['m_s_hist', 'm_t_min'], 'h') AS r FROM generate_series(1, 2) g OFFSET 0) s;
SELECT zone, key, cost, allowed FROM ratelimit.history WHERE zone = 'm_s_hist' ORDER BY allowed DESC;
-- Each zone counts every call as it went (also the rolled-back one: the
-- counters are not transactional; not the read-only call that raised):
--   m_s_sec: 'all-shmem' 2 / 3, 'mixed' 2 / 3, its own call 1 / 0, the
--            refused 'mixed2' 0 / 1, 'rb' 1 / 0, 'ro' 1 / 0: 7 / 7
--   m_s_min: 'all-shmem' 2 / 3, 'ro' 1 / 0: 3 / 3
--   m_t_min: 'mixed' 2 / 3, 'mixed2' 0 / 1, 'rb' 1 / 0, 'h' 1 / 1: 4 / 5
--   m_s_hist: 'h' 1 / 1
SELECT zone, allowed, refused FROM rl_counters WHERE zone IN ('m_s_sec', 'm_s_min', 'm_t_min', 'm_s_hist') ORDER BY zone;

-------------------------------------------------------------------------
-- 14. rl_refund on the shmem store (refund.sql does the table store): the
-- section 1 twins take and get back the same; no result differs between
-- the stores.  token_bucket (20 of 20): take 12, refund 5, refund 100;
-- gcra (16): take 10, refund 4, refund 100; fixed_window (3): take 3,
-- refund 2, refund 5; sliding_window_counter (4): take 4, refund 1,
-- refund 9; then each a key without state.
-------------------------------------------------------------------------
SET ratelimit.now_override = '2026-01-01 07:00:00+00';
CREATE TEMP TABLE refunds AS
SELECT alg, step, op, store, r
FROM (VALUES ('tb', 1, 'limit', 12), ('tb', 2, 'refund', 5), ('tb', 3, 'refund', 100),
             ('gcra', 1, 'limit', 10), ('gcra', 2, 'refund', 4), ('gcra', 3, 'refund', 100),
             ('fw', 1, 'limit', 3), ('fw', 2, 'refund', 2), ('fw', 3, 'refund', 5),
             ('swc', 1, 'limit', 4), ('swc', 2, 'refund', 1), ('swc', 3, 'refund', 9)) v(alg, step, op, cost),
     unnest(ARRAY['t_', 's_']) p,
     LATERAL (SELECT CASE p WHEN 't_' THEN 'table' ELSE 'shmem' END AS store,
                     CASE op WHEN 'limit' THEN rl_limit(p || alg, 'rf', cost)
                             ELSE rl_refund(p || alg, 'rf', cost) END AS r) x
ORDER BY alg, step, p;
SELECT alg, step, op, (r).allowed, (r).capacity, (r).remaining, (r).reset_after
FROM refunds WHERE store = 'shmem' ORDER BY CASE alg WHEN 'tb' THEN 1 WHEN 'gcra' THEN 2 WHEN 'fw' THEN 3 ELSE 4 END, step;
SELECT count(*) AS differing
FROM refunds t JOIN refunds s USING (alg, step)
WHERE t.store = 'table' AND s.store = 'shmem'
  AND ((t.r).allowed, (t.r).capacity, (t.r).remaining, (t.r).retry_after, (t.r).reset_after)
      IS DISTINCT FROM ((s.r).allowed, (s.r).capacity, (s.r).remaining, (s.r).retry_after, (s.r).reset_after);
-- A key without state: full, and no key created in shared memory.
SELECT p.zone, p.allowed, p.remaining, p.reset_after
FROM unnest(ARRAY['s_tb', 's_gcra', 's_fw', 's_swc']) z, rl_refund(z, 'rf-never', 3) p ORDER BY 1;
SELECT count(*) AS shmem_keys_of_never FROM ratelimit.shmem_keys() WHERE key = 'rf-never';
-- Not transactional: a refund rolled back stays given back (s_tb 'rf2'
-- took 10: 10 left; refund 4 in a rolled-back transaction: 14).
SELECT remaining FROM rl_limit('s_tb', 'rf2', 10);
BEGIN;
SELECT remaining FROM rl_refund('s_tb', 'rf2', 4);
ROLLBACK;
SELECT remaining FROM rl_peek('s_tb', 'rf2', 0);
-- Read-only: a shmem zone without history refunds; with history (a
-- table row) 25006.
BEGIN READ ONLY;
SELECT allowed, remaining FROM rl_refund('s_tb', 'rf2', 1);
SELECT regress.try($$SELECT rl_refund('s_hist', 'ro')$$);
COMMIT;
-- With history: recorded with a negative cost (s_hist, 2 per minute:
-- take 2, refund 1: 1 left).
SELECT allowed, remaining FROM rl_limit('s_hist', 'rf', 2);
SELECT allowed, remaining FROM rl_refund('s_hist', 'rf', 1);
SELECT zone, key, cost, allowed FROM ratelimit.history WHERE zone = 's_hist' AND key = 'rf' ORDER BY cost DESC;

-------------------------------------------------------------------------
-- 15. Leases on the shmem store (leases.sql does the table store): a
-- concurrency zone of at most 64 slots; a lease belongs to the session
-- that took it (rl_leases.holder_pid); not transactional, and usable in a
-- read-only transaction (without history).  A lease lapses at expires_at
-- on the decision clock; rl_reset forgets a key's leases.
-------------------------------------------------------------------------
SET ratelimit.now_override = '2026-01-01 08:00:00+00';
SELECT * FROM regress.error($$SELECT rl_zone_set('s_conc_big', 'concurrency', 65, '1 minute', store => 'shmem')$$);
SELECT regress.try($$SELECT rl_zone_set('s_conc', 'concurrency', 64, '1 minute', store => 'shmem', reset => true)$$) AS sixty_four;
SELECT regress.try($$SELECT rl_zone_set('s_conc', rate => 65)$$) AS raised_to_65;
SELECT rl_zone_set('s_conc', 'concurrency', 2, '1 minute', store => 'shmem');
SELECT zone, algorithm, rate, capacity, store FROM rl_zones WHERE zone LIKE 's\_conc%' ORDER BY zone;
-- Two slots, the third refused until the 10 s lease lapses.
SELECT lease AS sl1 FROM rl_acquire('s_conc', 'k') \gset
SELECT lease AS sl2 FROM rl_acquire('s_conc', 'k', '10 seconds') \gset
SELECT :'sl1' ~ '^[0-9]+:[0-9a-f]{16}:k$' AS sl1_is_lease, :'sl2' ~ '^[0-9]+:[0-9a-f]{16}:k$' AS sl2_is_lease;
SELECT lease IS NULL AS no_lease, allowed, slots, remaining, retry_after, expires_at, would_allow, zone
FROM rl_acquire('s_conc', 'k');
SELECT allowed, capacity, remaining, retry_after FROM rl_peek('s_conc', 'k');
-- rl_leases: store shmem, held by this session; nothing in the state table.
SELECT zone, key, expires_at, holder_pid = pg_backend_pid() AS held_by_this_session, store
FROM rl_leases WHERE zone = 's_conc' ORDER BY expires_at;
SELECT count(*) AS state_rows FROM ratelimit.state WHERE zone_id = pg_temp.zone_id('s_conc');
-- Release: true once, then false.
SELECT rl_release(:'sl2') AS released, rl_release(:'sl2') AS released_again;
SELECT remaining FROM rl_peek('s_conc', 'k', 0);
-- Not transactional: a rolled-back acquire keeps its lease, a rolled-back
-- release stays released.
BEGIN;
SELECT lease AS sl3 FROM rl_acquire('s_conc', 'k') \gset
ROLLBACK;
SELECT remaining FROM rl_peek('s_conc', 'k', 0);
SELECT count(*) AS leases_of_k FROM rl_leases WHERE zone = 's_conc' AND key = 'k';
BEGIN;
SELECT rl_release(:'sl3') AS released;
ROLLBACK;
SELECT remaining FROM rl_peek('s_conc', 'k', 0);
-- Read-only: a shmem zone without history acquires and releases.
BEGIN READ ONLY;
SELECT lease AS sl4 FROM rl_acquire('s_conc', 'ro') \gset
SELECT remaining FROM rl_peek('s_conc', 'ro', 0);
SELECT rl_release(:'sl4') AS released_read_only;
COMMIT;
-- A lease lapses at expires_at: a microsecond before, still held.
SELECT lease AS short FROM rl_acquire('s_conc', 'lapse', '5 seconds') \gset
SELECT lease AS long FROM rl_acquire('s_conc', 'lapse', '1 minute') \gset
SET ratelimit.now_override = '2026-01-01 08:00:04.999999+00';
SELECT allowed, remaining, retry_after FROM rl_peek('s_conc', 'lapse');
SET ratelimit.now_override = '2026-01-01 08:00:05+00';
SELECT allowed, remaining FROM rl_peek('s_conc', 'lapse');
SELECT key, expires_at, store FROM rl_leases WHERE zone = 's_conc' AND key = 'lapse';
SELECT rl_release(:'short') AS released_lapsed;
SELECT lease IS NOT NULL AS got_lease, remaining, expires_at FROM rl_acquire('s_conc', 'lapse');
-- rl_reset forgets a key's leases: the old ones release nothing.
SELECT rl_reset('s_conc', 'lapse') AS had_state;
SELECT allowed, remaining FROM rl_peek('s_conc', 'lapse', 0);
SELECT count(*) AS leases_of_lapse FROM rl_leases WHERE zone = 's_conc' AND key = 'lapse';
SELECT rl_release(:'long') AS released_after_reset;
-- The rate calls refuse the zone (42809), rl_acquire refuses a rate zone.
SELECT regress.try($$SELECT rl_limit('s_conc', 'k')$$);
SELECT regress.try($$SELECT rl_wait('s_conc', 'k', 1, '0')$$);
SELECT regress.try($$SELECT rl_refund('s_conc', 'k')$$);
SELECT regress.try($$SELECT rl_acquire('s_tb', 'k')$$);
-- History (a table row): acquires cost 1, a release -1; in a read-only
-- transaction refused (25006).  rl_counters counts the acquires.
SELECT rl_zone_set('s_conc_hist', 'concurrency', 1, '1 minute', store => 'shmem', history => true);
SELECT lease AS hl FROM rl_acquire('s_conc_hist', 'h') \gset
SELECT allowed FROM rl_acquire('s_conc_hist', 'h');
SELECT rl_release(:'hl') AS released;
SELECT zone, key, cost, allowed FROM ratelimit.history WHERE zone = 's_conc_hist' ORDER BY cost DESC, allowed DESC;
BEGIN READ ONLY;
SELECT regress.try($$SELECT rl_acquire('s_conc_hist', 'ro')$$);
COMMIT;
SELECT zone, allowed, refused FROM rl_counters WHERE zone IN ('s_conc', 's_conc_hist') ORDER BY zone;
-- A dropped zone takes its leases with it.
SELECT lease AS dl FROM rl_acquire('s_conc', 'drop') \gset
SELECT count(rl_zone_drop(z)) AS dropped FROM unnest(ARRAY['s_conc', 's_conc_hist']) z;
SELECT count(*) AS leases_left FROM rl_leases WHERE zone LIKE 's\_conc%';
SELECT rl_release(:'dl') AS released_dropped;
SET ratelimit.now_override = '2026-01-01 07:00:00+00';

-------------------------------------------------------------------------
-- 12. A new CREATE EXTENSION starts its zone ids at 1 again: a new zone
-- with the id of a dropped extension's zone starts with no counts and no
-- shmem keys of that zone (the counters and the shmem store outlive the
-- extension, and are keyed by database and zone id).
-------------------------------------------------------------------------
-- The id of a shmem zone with keys and counts, before the drop:
SELECT min(zone_id) AS old_id FROM ratelimit.shmem_keys() WHERE zone_id > 0 \gset
SELECT z.zone AS old_zone, c.allowed + c.refused > 0 AS counted,
       (SELECT count(*) > 0 FROM ratelimit.shmem_keys() k WHERE k.zone_id = :old_id) AS has_shmem_keys
FROM ratelimit.zone z JOIN ratelimit.shmem_counters() c USING (zone_id) WHERE z.zone_id = :old_id;
-- CASCADE: this file's tables have rl_result columns (its NOTICE lists
-- them, in an order of no interest here).
SET client_min_messages = warning;
DROP EXTENSION ratelimit CASCADE;
RESET client_min_messages;
CREATE EXTENSION ratelimit;
-- The new extension's zone takes that id (the sequence set to it).
SELECT setval('ratelimit.zone_id_seq', :old_id, false) = :old_id AS id_reused;
SET ratelimit.now_override = '2026-01-01 00:00:00+00';
SELECT rl_zone_set('fresh', 'token_bucket', 10, '1 minute', store => 'shmem');
SELECT zone_id = :old_id AS same_id FROM ratelimit.zone WHERE zone = 'fresh';
SELECT zone, allowed, refused FROM rl_counters WHERE zone = 'fresh';   -- 0 / 0
SELECT count(*) AS shmem_keys_of_the_id FROM ratelimit.shmem_keys() WHERE zone_id = :old_id;   -- 0
SELECT count(rl_limit('fresh', 'k')) FROM generate_series(1, 2);
SELECT zone, allowed, refused FROM rl_counters WHERE zone = 'fresh';   -- 2 / 0

-------------------------------------------------------------------------
-- 14. rl_token_bucket on the shmem store: a bucket is its id and its
-- parameters, as on the table store (token_bucket.sql).  A call at rate
-- 1000000 10 ms after a drain has a bucket of its own: the drained one at
-- rate 1 stays empty (were the id shared, it would be full again).  An id
-- of up to 48 bytes is kept as it is (rl_keys shows it), its parameters
-- matched as the entry's limit; a longer one as a hash of the id and the
-- parameters (key NULL).
-------------------------------------------------------------------------
SET ratelimit.default_store = shmem;
SET ratelimit.now_override = '2026-01-02 00:00:00+00';
SELECT string_agg(rl_token_bucket('sh-params', 1, 10)::text, ' ') FROM generate_series(1, 11);
SET ratelimit.now_override = '2026-01-02 00:00:00.01+00';
SELECT rl_token_bucket('sh-params', 1000000, 10) AS own_bucket;          -- 9999999
SET ratelimit.now_override = '2026-01-02 00:00:00.02+00';
SELECT rl_token_bucket('sh-params', 1, 10) AS still_empty;               -- -1
SELECT rl_token_bucket('sh-params', 1, 20) AS another_window;            -- 19
-- 48 bytes of id, kept as they are, at two rates: two buckets; 49 bytes,
-- kept as a hash.
SELECT rl_token_bucket(repeat('a', 48), 1, 10) AS id_48, rl_token_bucket(repeat('a', 48), 2, 10) AS id_48_rate_2,
       rl_token_bucket(repeat('a', 48), 1, 10) AS id_48_again, rl_token_bucket(repeat('b', 49), 1, 10) AS id_49;
-- An id of 1024 bytes (the limit) with the longest parameters: 1074 bytes
-- in all, kept as a hash; another window is another bucket.
SELECT rl_token_bucket(repeat('p', 1024), 1.2345678901234567e-300, 1.2345678901234567e300) AS long_1,
       rl_token_bucket(repeat('p', 1024), 1.2345678901234567e-300, 1.2345678901234567e300) AS long_again,
       rl_token_bucket(repeat('p', 1024), 1.2345678901234567e-300, 2.2345678901234567e300) AS long_other;
RESET ratelimit.default_store;
SELECT pg_temp.show(key) AS key, capacity, remaining FROM rl_keys
WHERE zone = '(rl_token_bucket)' AND store = 'shmem'
  AND (key IS NULL OR key IN ('sh-params', repeat('a', 48)))
ORDER BY key NULLS LAST, capacity;
-- None of them reached the table store.
SELECT count(*) AS table_rows FROM ratelimit.token_bucket
WHERE id IN ('sh-params', repeat('a', 48), repeat('b', 49), repeat('p', 1024));
