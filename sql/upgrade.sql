-- ALTER EXTENSION ratelimit UPDATE from 0.1.0 to the current version: the buckets of
-- rl_token_bucket move from 0.1.0's table ratelimit.token_bucket into
-- ratelimit.state with their tokens and fractions, the next call continues
-- the count, and zones work.  Ends with the default version installed
-- afresh, as the tests after this one expect.
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
SET ratelimit.now_override = '2026-01-01 00:00:00+00';
DROP EXTENSION ratelimit;
CREATE EXTENSION ratelimit VERSION '0.1.0';
SELECT extversion FROM pg_extension WHERE extname = 'ratelimit';
SELECT relkind, relpersistence FROM pg_class WHERE oid = 'ratelimit.token_bucket'::regclass;
SELECT to_regclass('ratelimit.state') AS state_table;

-- The installed library keeps state in ratelimit.state
-- only: until the update, calls fail with a hint (and change nothing).
SELECT rl_token_bucket('up', 1, 10, 4);

-- The state 0.1.0's rl_token_bucket leaves in its table:
--   up    rate 1, window 10: took 4 at 00:00:00         -> 6 tokens
--   frac  rate 0.3, window 10: took 1 at 00:00:00 (2
--         left), 1 at 00:00:00.5 (2 + 0.15 - 1)          -> 1 token + 0.15
INSERT INTO ratelimit.token_bucket (id, tokens, token_fraction, updated_at) VALUES
    ('up', 6, 0, '2026-01-01 00:00:00+00'),
    ('frac', 1, 0.15, '2026-01-01 00:00:00.5+00');

-- One step at a time.  At 0.3.0 the tables lack 0.4.0's columns (the cron
-- refill mode's): this library refuses with a hint, and changes nothing.
ALTER EXTENSION ratelimit UPDATE TO '0.3.0';
SELECT rl_token_bucket('up', 1, 10);
SELECT rl_limit('any_zone', 'k');

ALTER EXTENSION ratelimit UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'ratelimit';
SELECT c.oid::regclass AS relation, c.relkind, c.relpersistence
FROM pg_class c
WHERE c.oid IN ('ratelimit.token_bucket'::regclass, 'ratelimit.state'::regclass,
                'ratelimit.zone'::regclass, 'ratelimit.history'::regclass)
ORDER BY c.oid::regclass::text;
-- The rows moved as they were, into zone 0, part 0.
SELECT key, zone_id, part, tokens, token_fraction, updated_at, counter, entries, refill_pending
FROM ratelimit.state ORDER BY key;
SELECT id, tokens, token_fraction, updated_at FROM ratelimit.token_bucket ORDER BY id;

-- The next calls continue the count: 'up' has 6, takes 1 -> 5.
SELECT rl_token_bucket('up', 1, 10);
-- 'frac' at 00:00:03.5: 1.15 + 0.3 * 3 = 2.05 tokens, so cost 2 passes and
-- leaves 0 (had the fraction been lost: 1.9 tokens, refused).
SET ratelimit.now_override = '2026-01-01 00:00:03.5+00';
SELECT rl_token_bucket('frac', 0.3, 10, 2);
SELECT rl_token_bucket('frac', 0.3, 10, 0) AS still_zero;
-- A new key starts full.
SELECT rl_token_bucket('new', 1, 10);

-- Zones work on the updated extension.
SELECT rl_zone_set('up_zone', 'token_bucket', 2, '1 second', burst => 3);
SELECT rl_zone_set('up_sw', 'sliding_window', 2, '1 minute', history => true);
SELECT zone, algorithm, rate, period, capacity, burst, store, history FROM rl_zones ORDER BY zone;
SELECT g, (r).*
FROM (SELECT g, rl_limit('up_zone', 'k') AS r FROM generate_series(1, 4) g OFFSET 0) s;
SELECT g, (r).allowed, (r).remaining, (r).retry_after, (r).txn_id IS NOT NULL AS has_txn_id
FROM (SELECT g, rl_sliding_window('up_sw', 'k') AS r FROM generate_series(1, 3) g OFFSET 0) s;
SELECT zone, key, cost, allowed FROM ratelimit.history ORDER BY allowed DESC;
SELECT * FROM rl_gcra('up_gcra', 15, 30, 60);
SELECT zone_id, count(*) FROM ratelimit.state GROUP BY zone_id ORDER BY zone_id;

-- The updated extension has the same members as a fresh install.
CREATE TEMP TABLE updated_members AS
SELECT pg_describe_object(classid, objid, objsubid) AS member
FROM pg_depend
WHERE refclassid = 'pg_extension'::regclass AND deptype = 'e'
  AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'ratelimit');
SELECT count(*) > 0 AS has_members FROM updated_members;
DROP EXTENSION ratelimit;
CREATE EXTENSION ratelimit;
SELECT extversion FROM pg_extension WHERE extname = 'ratelimit';
CREATE TEMP TABLE fresh_members AS
SELECT pg_describe_object(classid, objid, objsubid) AS member
FROM pg_depend
WHERE refclassid = 'pg_extension'::regclass AND deptype = 'e'
  AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'ratelimit');
(SELECT 'only after update' AS side, member FROM updated_members
 EXCEPT SELECT 'only after update', member FROM fresh_members)
UNION ALL
(SELECT 'only in fresh install', member FROM fresh_members
 EXCEPT SELECT 'only in fresh install', member FROM updated_members);
-- And it is empty: no zone, no state, no history.
SELECT (SELECT count(*) FROM ratelimit.zone) AS zones,
       (SELECT count(*) FROM ratelimit.state) AS state_rows,
       (SELECT count(*) FROM ratelimit.history) AS history_rows;
