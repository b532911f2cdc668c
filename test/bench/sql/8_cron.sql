-- Section 8, pg_cron refill mode (refill => 'cron'): its zones, and the
-- in-backend calls.  Runs after counters_check.sql (its zones would count
-- there) and before sections 5 and 6 (section 6 empties ratelimit.state).
-- No pg_cron job is scheduled (rl_cron_enable needs CREATE EXTENSION
-- pg_cron): refill_tick is set by UPDATE ratelimit.zone, as rl_cron_enable
-- would, and a refill runs only when 8_cron_refill.sql calls rl_cron_refill.
--
-- Calls: rl_limit on a cron-refilled token_bucket zone (bench_cron, calls
-- only take; capacity far above the calls made, so nothing is refused and
-- nothing needs a refill) against the inline token_bucket zone of section 4
-- (bench_token_bucket, same rate and period; created here when section 4
-- does not run) and rl_token_bucket (table store, direct), over the same
-- keys, in interleaved repetitions as in section 1; pgbench rounds follow
-- (run.sh), then 8_cron_refill.sql.
--
-- Variables: keys, rate, window, reps, zones, zone_rate, zone_period, cron_cap.

SET client_min_messages = warning;
CREATE TABLE bench.cron_counters_before AS SELECT * FROM rl_counters;
CREATE TABLE bench.cron_setup (
    zone_a_keys     bigint NOT NULL,   -- rows of zone A
    zone_a_pending  bigint NOT NULL,   -- of which below capacity (refill_pending)
    zone_b_keys     bigint NOT NULL,
    state_rows      bigint NOT NULL,   -- ratelimit.state, every zone
    state_pages     bigint NOT NULL,
    idx_entries     bigint NOT NULL,   -- rows with refill_pending (every cron zone)
    idx_bytes       bigint NOT NULL    -- state_refill_idx
);
CREATE TABLE bench.cron_plan (
    variant  text NOT NULL,
    scan     text NOT NULL,   -- the UPDATE's scan node (auto_explain)
    buffers  text             -- the UPDATE's buffers
);

-- rl_zone_set refuses refill => 'cron' where no pg_cron job could run it:
-- pg_cron must be created in this database (the bench cluster preloads it
-- with cron.database_name = 'postgres').  No job is scheduled.
CREATE EXTENSION IF NOT EXISTS pg_cron;

\if :zones
\else
SELECT rl_zone_set('bench_token_bucket', 'token_bucket', :zone_rate, interval :'zone_period');
\endif
SELECT rl_zone_set('bench_cron', 'token_bucket', :zone_rate, interval :'zone_period', refill => 'cron');
-- The tick rl_cron_enable would pick with the installed pg_cron.
UPDATE ratelimit.zone
   SET refill_tick = coalesce((ratelimit.cron_plan(
           (SELECT default_version FROM pg_available_extensions WHERE name = 'pg_cron'), rate, period)).tick,
       interval '1 minute')
 WHERE zone = 'bench_cron';
-- The zones of 8_cron_refill.sql: 1 token per minute, capacity :cron_cap.
SELECT rl_zone_set('bench_cron_a', 'token_bucket', 1, interval '1 minute', burst => :cron_cap, refill => 'cron');
SELECT rl_zone_set('bench_cron_b', 'token_bucket', 1, interval '1 minute', burst => :cron_cap, refill => 'cron');
UPDATE ratelimit.zone SET refill_tick = interval '1 minute' WHERE zone IN ('bench_cron_a', 'bench_cron_b');

-- Run (C) of 8_cron_refill.sql: rl_cron_refill as installed, with the
-- UPDATE's WHERE on the zone and the tokens (below the capacity, $2 of its
-- dynamic statement) instead of the partial index's predicate, and index
-- scans off: the primary key (key, zone_id, part, params) does
-- not lead with zone_id, so without state_refill_idx the UPDATE reads the
-- whole table.  Made from rl_cron_refill's own source, so that it stays the
-- same UPDATE whatever rl_cron_refill becomes.
SELECT bench.fail_if('rl_cron_refill', 'its UPDATE no longer ends with "AND s.refill_pending$sql$": adapt 8_cron.sql')
  FROM pg_proc
 WHERE oid = 'rl_cron_refill(text)'::regprocedure AND prosrc NOT LIKE '%AND s.refill_pending$sql$%';
SELECT format($$CREATE FUNCTION bench.cron_refill_seqscan(zone text)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET enable_indexscan = off
SET enable_bitmapscan = off
SET enable_indexonlyscan = off
AS %L$$,
              replace(replace(prosrc, 'AND s.refill_pending$sql$', 'AND s.tokens < $2$sql$'),
                      'rl_cron_refill.zone', 'cron_refill_seqscan.zone'))
  FROM pg_proc
 WHERE oid = 'rl_cron_refill(text)'::regprocedure
\gexec

-- The three variants, each the argument of count(...) over the keys; the
-- rl_limit ones count admitted calls only.
CREATE TEMP TABLE variant (n, variant, call) AS VALUES
    (1, 'cron',   '(rl_limit(''bench_cron'', ''k'' || i, 1)).allowed OR NULL'),
    (2, 'inline', '(rl_limit(''bench_token_bucket'', ''k'' || i, 1)).allowed OR NULL'),
    (3, 'direct', format('rl_token_bucket(''k'' || i, %s, %s, 1)', :rate, :window));

-- Warm-up: the keys 'k0' .. 'k:keys' in every variant (the cron zone's are
-- new), 1000 per transaction.
SET ratelimit.table_access = direct;
SELECT format('SELECT count(%s) FROM generate_series(%s, %s) i', v.call, lo, least(lo + 999, :keys))
  FROM variant v, generate_series(0, :keys, 1000) lo
 ORDER BY v.n, lo
\gexec
VACUUM ANALYZE ratelimit.state;

-- Each repetition: cron zone, inline zone, rl_token_bucket, then VACUUM.
TRUNCATE bench.steps;
INSERT INTO bench.steps (n, phase, variant, access, calls, sql)
SELECT n, 'cron_calls', variant, 'direct', :keys, format('SELECT count(%s) FROM generate_series(1, %s) i', call, :keys)
  FROM variant;
INSERT INTO bench.steps (n, sql) VALUES (1000, 'VACUUM ratelimit.state');
\set repeat :reps
\ir interleave.sql
