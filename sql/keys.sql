-- rl_keys (0.5.0): every key with state, per zone and store, with what it
-- has left now -- table-store zone keys (as rl_peek sees them), the
-- buckets of rl_token_bucket and rl_gcra, and the shmem store's keys of
-- this database (keys over 48 bytes are kept as a hash: key NULL).  Admins
-- only.  On the fixed test clock; the comments give the numbers each row
-- must show, worked out from the algorithms' definitions.
--
-- "What it has left now" is what a call of cost 0 sees: remaining is what
-- the key holds, reset_after the wait until it is full.  The shmem store
-- shows exactly that (ratelimit.shmem_keys: "as a call of cost 0 sees
-- them"), so a table zone and a shmem zone with the same limit and the
-- same calls must show the same row.
--
-- updated_at is the time stored with the state: the last admission for
-- token_bucket and sliding_window, the start of the window for
-- fixed_window and sliding_window_counter, and the theoretical arrival
-- time for gcra (ahead of the clock while the key has not recovered).
-- Needs ratelimit in shared_preload_libraries (shmem store).
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
SET ratelimit.now_override = '2026-01-01 00:00:00+00';

-- How a key is shown: long keys by their length.
CREATE FUNCTION pg_temp.show(key text) RETURNS text LANGUAGE sql AS $$
    SELECT CASE WHEN length($1) > 20 THEN format('<%s bytes>', octet_length($1)) ELSE $1 END
$$;
-- This file's rows of rl_keys (other tests' keys may share the database).
CREATE VIEW pg_temp.my_keys AS
SELECT zone, pg_temp.show(key) AS key, store, capacity, remaining, reset_after, updated_at
FROM rl_keys WHERE zone LIKE 'keys\_%' OR key LIKE 'keys:%';

-------------------------------------------------------------------------
-- 1. Table-store zones, one per algorithm, and a cron-refill zone.  Calls
-- at 0 s (sliding_window also at 2 s); rl_keys read at 4 s.
-------------------------------------------------------------------------
SELECT rl_zone_set('keys_tb', 'token_bucket', 5, '1 minute');                -- a token per 12 s
SELECT rl_zone_set('keys_gcra', 'gcra', 1, '2 seconds', burst => 3);
SELECT rl_zone_set('keys_fw', 'fixed_window', 3, '10 seconds');
SELECT rl_zone_set('keys_swc', 'sliding_window_counter', 4, '10 seconds');
SELECT rl_zone_set('keys_sw', 'sliding_window', 3, '10 seconds');
SELECT regress.cron_zone('keys_cron', 60, '1 minute', burst => 5);
SELECT count(*) FILTER (WHERE allowed) AS admitted FROM (
    SELECT (rl_limit('keys_tb', 'keys:a', 1)).allowed
    UNION ALL SELECT (rl_limit('keys_tb', 'keys:b', 5)).allowed
    UNION ALL SELECT (rl_limit('keys_gcra', 'keys:a', 3)).allowed
    UNION ALL SELECT (rl_limit('keys_fw', 'keys:a', 2)).allowed
    UNION ALL SELECT (rl_limit('keys_swc', 'keys:a', 1)).allowed
    UNION ALL SELECT (rl_limit('keys_sw', 'keys:a', 1)).allowed
    UNION ALL SELECT (rl_limit('keys_cron', 'keys:a', 2)).allowed) s;
SET ratelimit.now_override = '2026-01-01 00:00:02+00';
SELECT allowed FROM rl_limit('keys_sw', 'keys:a');
SET ratelimit.now_override = '2026-01-01 00:00:04+00';
-- At 4 s:
--   keys_tb   keys:a  4 + 4/12 tokens: remaining 4, full in 2/3 token = 8 s
--   keys_tb   keys:b  1/3 token: remaining 0, full in 4 2/3 tokens = 56 s
--   keys_gcra keys:a  arrival time 6 s: 2 s of 6 s of tolerance used:
--                     remaining (6 - 2) / 2 = 2, reset 2 s; updated_at 00:00:06
--   keys_fw   keys:a  2 of 3 in the window [0, 10 s): remaining 1, reset 6 s
--   keys_swc  keys:a  1 of 4 in [0, 10 s): remaining 3, reset 6 + 10 = 16 s
--   keys_sw   keys:a  admissions at 0 and 2 s: remaining 1, reset 2 + 10 - 4 = 8 s
--   keys_cron keys:a  3 of 5, no refill job: remaining 3, reset NULL
--                     (nothing refills it: no time can be promised)
SELECT * FROM pg_temp.my_keys WHERE store = 'table' ORDER BY zone, key;
-- What a call of cost 0 sees, for comparison: the same numbers.
SELECT v.zone, v.key, p.capacity, p.remaining, p.reset_after
FROM (VALUES ('keys_tb', 'keys:a'), ('keys_tb', 'keys:b'), ('keys_gcra', 'keys:a'), ('keys_fw', 'keys:a'),
             ('keys_swc', 'keys:a'), ('keys_sw', 'keys:a'), ('keys_cron', 'keys:a')) v(zone, key)
CROSS JOIN LATERAL rl_peek(v.zone, v.key, 0) p
ORDER BY 1, 2;
-- Reading rl_keys takes nothing.
SELECT remaining FROM rl_peek('keys_tb', 'keys:a', 0);

-------------------------------------------------------------------------
-- 2. A sliding window with chunk rows is one key; a rolled-back key has
-- no row; a key that was only looked at (rl_peek) has none either.
-------------------------------------------------------------------------
SELECT rl_zone_set('keys_sw_big', 'sliding_window', 1000, '1 minute');
DO $$
BEGIN
    FOR i IN 0 .. 399 LOOP
        PERFORM set_config('ratelimit.now_override',
                           to_char(timestamp '2026-01-01 00:00:04' + i * interval '10 milliseconds',
                                   'YYYY-MM-DD HH24:MI:SS.US') || '+00', false);
        PERFORM rl_limit('keys_sw_big', 'keys:chunky');
    END LOOP;
END $$;
SELECT count(*) FILTER (WHERE s.part > 0) > 0 AS has_chunk_rows
FROM ratelimit.state s JOIN ratelimit.zone z USING (zone_id) WHERE z.zone = 'keys_sw_big';
SET ratelimit.now_override = '2026-01-01 00:00:10+00';
-- 400 admitted from 4 s to 7.99 s: remaining 600, full at 67.99 s.
SELECT * FROM pg_temp.my_keys WHERE zone = 'keys_sw_big';
BEGIN;
SELECT allowed FROM rl_limit('keys_tb', 'keys:rolled-back');
ROLLBACK;
SELECT remaining FROM rl_peek('keys_tb', 'keys:peeked');
SELECT count(*) AS rows FROM pg_temp.my_keys WHERE key IN ('keys:rolled-back', 'keys:peeked');

-------------------------------------------------------------------------
-- 3. rl_token_bucket's and rl_gcra's buckets on the table store.  A
-- bucket of rl_token_bucket is named by its rate and window too: capacity
-- is rate * window, remaining the stored tokens as of updated_at.  rl_gcra
-- records no limit: capacity and remaining NULL (its updated_at is the
-- theoretical arrival time).  reset_after is NULL for both.
-------------------------------------------------------------------------
SET ratelimit.now_override = '2026-01-01 00:00:00+00';
SELECT rl_token_bucket('keys:bucket', 1, 10, 3);                  -- 7 left
SELECT rl_token_bucket('keys:bucket', 0.5, 5, 1);                 -- another bucket: capacity 2, 1 left
SELECT remaining FROM rl_gcra('keys:gcra', 2, 1, 5);             -- capacity 3, 2 left, arrival 5 s
SET ratelimit.now_override = '2026-01-01 00:00:04+00';
SELECT * FROM pg_temp.my_keys WHERE zone LIKE '(%' AND store = 'table' ORDER BY zone, key, capacity;

-------------------------------------------------------------------------
-- 4. The shmem store: zone keys of 5, 48, 49 and 60 bytes (the longer two
-- kept as a hash: key NULL), a fixed window, and rl_token_bucket and
-- rl_gcra with ratelimit.default_store = shmem.  Calls at 0 s, read at 4 s.
-------------------------------------------------------------------------
SET ratelimit.now_override = '2026-01-01 00:00:00+00';
SELECT rl_zone_set('keys_shm', 'token_bucket', 5, '1 minute', store => 'shmem');
SELECT rl_zone_set('keys_shm_fw', 'fixed_window', 3, '10 seconds', store => 'shmem');
SELECT count(*) FILTER (WHERE allowed) AS admitted FROM (
    SELECT (rl_limit('keys_shm', 'keys:a', 1)).allowed
    UNION ALL SELECT (rl_limit('keys_shm', 'keys:' || repeat('4', 43), 2)).allowed   -- 48 bytes
    UNION ALL SELECT (rl_limit('keys_shm', 'keys:' || repeat('5', 44), 3)).allowed   -- 49 bytes
    UNION ALL SELECT (rl_limit('keys_shm', 'keys:' || repeat('6', 55), 5)).allowed   -- 60 bytes
    UNION ALL SELECT (rl_limit('keys_shm_fw', 'keys:a', 2)).allowed) s;
SET ratelimit.default_store = shmem;
SELECT rl_token_bucket('keys:shm-bucket', 1, 10, 8);             -- 2 left, capacity 10
SELECT rl_token_bucket('keys:shm-bucket', 2, 10, 1);             -- another bucket: 19 left, capacity 20
SELECT remaining FROM rl_gcra('keys:shm-gcra', 2, 1, 5);         -- 2 left, arrival 5 s
RESET ratelimit.default_store;
SET ratelimit.now_override = '2026-01-01 00:00:04+00';
-- At 4 s:
--   keys_shm keys:a      4 1/3 tokens: remaining 4, reset 8 s (as keys_tb above)
--   keys_shm 48 bytes    3 1/3: remaining 3, reset 20 s
--   keys_shm 49 bytes    2 1/3: remaining 2, reset 32 s; key NULL
--   keys_shm 60 bytes    1/3: remaining 0, reset 56 s; key NULL
--   keys_shm_fw keys:a   remaining 1, reset 6 s (as keys_fw above)
--   (rl_token_bucket)    2 + 4 tokens: remaining 6 of 10; no reset_after
--   (rl_token_bucket)    19 + 8, capped: remaining 20 of 20 (the same id
--                        at rate 2: a bucket of its own)
--   (rl_gcra)            arrival 5 s, emission 5 s, tolerance 15 s: 1 s
--                        used, remaining 14 / 5 = 2, reset 1 s
SELECT * FROM pg_temp.my_keys WHERE store = 'shmem' ORDER BY zone, key NULLS LAST, remaining DESC;
SELECT zone, key IS NULL AS hashed, count(*) FROM rl_keys
WHERE zone = 'keys_shm' GROUP BY 1, 2 ORDER BY 2;
-- A table zone and a shmem zone with the same limit and calls show the
-- same numbers.
SELECT t.capacity = s.capacity AND t.remaining = s.remaining AND t.reset_after = s.reset_after
       AND t.updated_at = s.updated_at AS same
FROM rl_keys t, rl_keys s
WHERE t.zone = 'keys_tb' AND t.key = 'keys:a' AND s.zone = 'keys_shm' AND s.key = 'keys:a';
SELECT t.capacity = s.capacity AND t.remaining = s.remaining AND t.reset_after = s.reset_after
       AND t.updated_at = s.updated_at AS same
FROM rl_keys t, rl_keys s
WHERE t.zone = 'keys_fw' AND t.key = 'keys:a' AND s.zone = 'keys_shm_fw' AND s.key = 'keys:a';
-- rl_reset forgets a shmem key.
SELECT rl_reset('keys_shm', 'keys:a');
SELECT count(*) AS rows FROM pg_temp.my_keys WHERE zone = 'keys_shm' AND key = 'keys:a';

-------------------------------------------------------------------------
-- 5. Admins only: PUBLIC can read neither the view nor the functions
-- behind it (42501).  Granting SELECT on the view alone is not enough: it
-- calls ratelimit.keys(), which runs as the reader.
-------------------------------------------------------------------------
CREATE ROLE rl_keys_reader;
SET ROLE rl_keys_reader;
SELECT regress.try($$SELECT count(*) FROM rl_keys$$);
SELECT regress.try($$SELECT count(*) FROM ratelimit.keys()$$);
SELECT regress.try($$SELECT count(*) FROM ratelimit.shmem_keys()$$);
RESET ROLE;
GRANT SELECT ON rl_keys TO rl_keys_reader;
SET ROLE rl_keys_reader;
SELECT regress.try($$SELECT count(*) FROM rl_keys$$);
RESET ROLE;
REVOKE SELECT ON rl_keys FROM rl_keys_reader;
DROP ROLE rl_keys_reader;
SELECT grantee, privilege_type FROM information_schema.role_table_grants
WHERE table_name = 'rl_keys' AND grantee = 'PUBLIC';

-------------------------------------------------------------------------
-- 6. Dropping a zone drops its keys from the view (both stores).
-------------------------------------------------------------------------
SELECT rl_zone_drop('keys_tb'), rl_zone_drop('keys_shm');
SELECT count(*) AS rows FROM pg_temp.my_keys WHERE zone IN ('keys_tb', 'keys_shm');

SELECT count(rl_zone_drop(zone)) AS zones_dropped FROM rl_zones WHERE zone LIKE 'keys\_%';
DELETE FROM ratelimit.state WHERE key LIKE 'keys:%' AND zone_id <= 0;
