-- Durable zones (0.6.0): rl_zone_set(..., durable => true) keeps a table
-- zone's keys in ratelimit.durable_state, a logged table (kept across a
-- crash, replicated to standbys), instead of the UNLOGGED ratelimit.state.
-- Decisions are the same in both tables; what test/fault/crash_restart.sh
-- and test/fault/failover.sh check with real crashes and a promoted standby
-- rests on the rows being where this file shows them.  On the test clock.
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
SET ratelimit.now_override = '2026-01-01 00:00:00+00';

-- Where a zone's rows are: 'state', 'durable_state', 'both' or 'none'.
CREATE FUNCTION pg_temp.rows_of(zone text) RETURNS text LANGUAGE sql AS $$
    SELECT CASE WHEN u > 0 AND d > 0 THEN 'both' WHEN u > 0 THEN 'state'
                WHEN d > 0 THEN 'durable_state' ELSE 'none' END
    FROM (SELECT (SELECT count(*) FROM ratelimit.state s JOIN ratelimit.zone z USING (zone_id) WHERE z.zone = $1) AS u,
                 (SELECT count(*) FROM ratelimit.durable_state s JOIN ratelimit.zone z USING (zone_id) WHERE z.zone = $1) AS d) c
$$;

-- The tables: one unlogged, one logged, with the same columns and keys.
SELECT relname, relpersistence FROM pg_class
WHERE oid IN ('ratelimit.state'::regclass, 'ratelimit.durable_state'::regclass) ORDER BY relname;
SELECT (SELECT array_agg(attname || ':' || format_type(atttypid, atttypmod) ORDER BY attnum)
        FROM pg_attribute WHERE attrelid = 'ratelimit.state'::regclass AND attnum > 0)
     = (SELECT array_agg(attname || ':' || format_type(atttypid, atttypmod) ORDER BY attnum)
        FROM pg_attribute WHERE attrelid = 'ratelimit.durable_state'::regclass AND attnum > 0) AS same_columns;
SELECT indexrelid::regclass, indisprimary, pg_get_expr(indpred, indrelid) AS partial
FROM pg_index WHERE indrelid = 'ratelimit.durable_state'::regclass ORDER BY 1;
-- pg_dump keeps the durable state (a configuration table of the
-- extension), and not the unlogged one.
SELECT c::regclass AS dumped_with_data FROM pg_extension e, unnest(e.extconfig) c
WHERE e.extname = 'ratelimit' ORDER BY c::regclass::text;

-- A durable zone of each algorithm: the same decisions as an unlogged twin,
-- the rows in durable_state only.
SELECT rl_zone_set('du_' || a, a, 3, '1 minute', durable => true),
       rl_zone_set('un_' || a, a, 3, '1 minute')
FROM unnest(ARRAY['token_bucket', 'gcra', 'sliding_window', 'sliding_window_counter', 'fixed_window']) a;
SELECT zone, store, durable FROM rl_zones WHERE zone LIKE 'du\_%' OR zone LIKE 'un\_%' ORDER BY zone;
-- (The calls of a zone in a subquery of their own: one after the other, in
-- the order of i, on every PostgreSQL version.)
SELECT a, (SELECT string_agg(format('%s/%s', (rl_limit('du_' || a, 'k')).remaining,
                                    (rl_limit('un_' || a, 'k')).remaining), ' ' ORDER BY i)
           FROM generate_series(1, 4) i) AS durable_and_unlogged
FROM unnest(ARRAY['token_bucket', 'gcra', 'sliding_window', 'sliding_window_counter', 'fixed_window']) a
ORDER BY a;
SELECT a, pg_temp.rows_of('du_' || a) AS durable_zone, pg_temp.rows_of('un_' || a) AS unlogged_zone
FROM unnest(ARRAY['token_bucket', 'gcra', 'sliding_window', 'sliding_window_counter', 'fixed_window']) a ORDER BY a;

-- A concurrency zone: leases in the durable table too.
SELECT rl_zone_set('du_leases', 'concurrency', 2, '1 minute', durable => true);
SELECT (rl_acquire('du_leases', 'job')).allowed, (rl_acquire('du_leases', 'job')).allowed,
       (rl_acquire('du_leases', 'job')).allowed AS third;
SELECT pg_temp.rows_of('du_leases'), count(*) AS leases_listed FROM rl_leases WHERE zone = 'du_leases';

-- rl_peek, rl_refund, rl_reset, rl_keys and the several-zones call on a
-- durable zone.
SELECT remaining FROM rl_peek('du_token_bucket', 'k');
SELECT remaining FROM rl_refund('du_token_bucket', 'k', 2);
SELECT zone, key, store, remaining FROM rl_keys WHERE zone LIKE 'du\_%' ORDER BY zone, key;
SELECT allowed, zone, remaining FROM rl_limit(ARRAY['du_token_bucket', 'un_token_bucket'], 'both');
SELECT pg_temp.rows_of('du_token_bucket') AS du, pg_temp.rows_of('un_token_bucket') AS un;
SELECT rl_reset('du_token_bucket', 'both') AS reset_had_state;
SELECT count(*) AS rows_left FROM ratelimit.durable_state WHERE key = 'both';

-- Durable needs the table store: refused, and nothing changes.
SELECT regress.try($$SELECT rl_zone_set('du_shmem', 'token_bucket', 3, '1 minute', store => 'shmem', durable => true)$$);
SELECT regress.try($$SELECT rl_zone_set('du_token_bucket', store => 'shmem', reset => true)$$);
SELECT count(*) AS du_shmem_zones FROM rl_zones WHERE zone = 'du_shmem';
SELECT store, durable FROM rl_zones WHERE zone = 'du_token_bucket';
SELECT regress.try($$SELECT rl_zone_set('du_token_bucket', durable => NULL::boolean, reset => NULL)$$);

-- Changing durable moves the keys with their state (no reset): the next
-- call goes on from where the key was, in the other table.
SELECT rl_zone_set('mv', 'sliding_window', 4, '1 minute');
SELECT (rl_limit('mv', 'k', 3)).remaining AS before_move;
SELECT rl_zone_set('mv', durable => true);
SELECT pg_temp.rows_of('mv') AS after_move, (rl_limit('mv', 'k')).remaining AS goes_on,
       (rl_limit('mv', 'k')).allowed AS fifth_refused;
SELECT rl_zone_set('mv', durable => false);
SELECT pg_temp.rows_of('mv') AS moved_back, (rl_peek('mv', 'k')).allowed AS next_allowed;
-- Other options keep the table: a new rate keeps the keys where they are.
SELECT rl_zone_set('mv', durable => true);
SELECT rl_zone_set('mv', rate => 5);
SELECT pg_temp.rows_of('mv') AS after_rate_change, (rl_peek('mv', 'k')).allowed AS one_more_allowed;

-- In one transaction: calls, then the move, then more calls.  The calls
-- before the move are in the transaction's cache; the move writes them
-- first, and the later calls decide on the moved rows.
BEGIN;
SELECT rl_zone_set('tx', 'fixed_window', 5, '1 hour');
SELECT (rl_limit('tx', 'k')).remaining, (rl_limit('tx', 'k')).remaining;
SELECT rl_zone_set('tx', durable => true);
SELECT (rl_limit('tx', 'k')).remaining AS after_move_in_transaction;
COMMIT;
SELECT pg_temp.rows_of('tx'), (rl_peek('tx', 'k')).remaining AS committed;
-- A rolled-back move leaves the keys where they were.
BEGIN;
SELECT rl_zone_set('tx', durable => false);
ROLLBACK;
SELECT pg_temp.rows_of('tx') AS after_rollback, durable FROM rl_zones WHERE zone = 'tx';

-- reset => true empties the zone in either table; rl_zone_drop drops its rows.
SELECT rl_zone_set('tx', reset => true);
SELECT pg_temp.rows_of('tx') AS after_reset, (rl_limit('tx', 'k')).remaining AS fresh;
SELECT rl_zone_drop('tx');
SELECT count(*) AS rows_of_dropped FROM ratelimit.durable_state WHERE key = 'k' AND zone_id NOT IN (SELECT zone_id FROM ratelimit.zone);

-- A cron-refilled durable zone: rl_cron_refill updates the durable table.
SELECT regress.cron_zone('du_cron', 4, '4 seconds');
SELECT rl_zone_set('du_cron', durable => true);
UPDATE ratelimit.zone SET refill_tick = '1 second' WHERE zone = 'du_cron';
SELECT (rl_limit('du_cron', 'c', 3)).remaining AS drained_to;
SELECT pg_temp.rows_of('du_cron'), rl_cron_refill('du_cron') AS refilled, (rl_peek('du_cron', 'c')).remaining AS after_refill;
SELECT refill_pending FROM ratelimit.durable_state s JOIN ratelimit.zone z USING (zone_id) WHERE z.zone = 'du_cron';

-- rl_gc sweeps the durable table too: a key that has fully recovered goes.
SET ratelimit.now_override = '2026-01-01 01:00:00+00';
SELECT count(*) > 0 AS durable_rows_before FROM ratelimit.durable_state s JOIN ratelimit.zone z USING (zone_id) WHERE z.zone = 'du_token_bucket';
SELECT rl_gc('du_token_bucket') AS removed;
SELECT count(*) AS durable_rows_after FROM ratelimit.durable_state s JOIN ratelimit.zone z USING (zone_id) WHERE z.zone = 'du_token_bucket';
-- A row left in the table a zone's keys moved out of (here put there by
-- hand) is swept as no call reads it.
INSERT INTO ratelimit.state (key, zone_id, tokens, updated_at)
SELECT 'stray', zone_id, 0, '2026-01-01' FROM ratelimit.zone WHERE zone = 'du_fixed_window';
SELECT rl_gc('du_fixed_window') >= 1 AS swept;
SELECT count(*) AS strays_left FROM ratelimit.state WHERE key = 'stray';

-- rl_token_bucket and rl_gcra's ad-hoc buckets stay in the unlogged table.
SELECT rl_token_bucket('adhoc', 1, 10), (rl_gcra('adhoc', 2, 1, 1)).remaining;
SELECT (SELECT count(*) FROM ratelimit.state WHERE key = 'adhoc') AS unlogged,
       (SELECT count(*) FROM ratelimit.durable_state WHERE key = 'adhoc') AS durable;
DELETE FROM ratelimit.state WHERE key = 'adhoc';   -- the later files count the ad-hoc buckets

SELECT rl_zone_drop(zone) FROM rl_zones WHERE zone LIKE 'du\_%' OR zone LIKE 'un\_%' OR zone = 'mv';
SELECT count(*) AS durable_rows_left FROM ratelimit.durable_state;
