-- Section 8, after its pgbench rounds: the check of its calls, then one
-- rl_cron_refill run, timed in the server, on zone A (:cron_full full
-- buckets and :cron_pending below capacity) and zone B (the same buckets
-- below capacity, alone), and (C) the same UPDATE on A without the partial
-- index (bench.cron_refill_seqscan: a sequential scan).  One token per run
-- (rate 1 per minute, tick 1 minute, capacity :cron_cap, from 0 tokens), so
-- the buckets below capacity stay so through every run and every run
-- refills the same :cron_pending.
--
-- Variables: keys, reps, cron_full, cron_pending, cron_cap.

SET client_min_messages = warning;

-- Every call of the section admitted (rl_counters, since 8_cron.sql began):
-- no refusal in the three variants, and the cron zone counted at least its
-- in-backend calls (warm-up and rep 0 included) and pgbench's transactions.
SELECT bench.fail_if('pg_cron refill mode: refused or uncounted calls (zone, allowed, refused)',
                     string_agg(concat_ws(' ', c.zone, c.allowed - coalesce(b.allowed, 0),
                                          c.refused - coalesce(b.refused, 0)), ', '))
  FROM rl_counters c LEFT JOIN bench.cron_counters_before b USING (zone)
 WHERE c.zone IN ('bench_cron', 'bench_token_bucket', '(rl_token_bucket)')
   AND (c.refused > coalesce(b.refused, 0)
        OR (c.zone = 'bench_cron' AND c.allowed - coalesce(b.allowed, 0)
            < (:keys + 1) + (:reps + 1) * :keys
              + (SELECT sum(xacts) FROM bench.pgbench WHERE section = 8 AND variant = 'cron')));
SELECT bench.fail_if('pg_cron refill mode', 'no counters for bench_cron')
 WHERE NOT EXISTS (SELECT FROM rl_counters WHERE zone = 'bench_cron');

-- The refill zones' state, written directly: key by key 'r1' ..
-- 'r<cron_full + cron_pending>' in zone A, every step-th below capacity
-- (0 tokens, refill_pending) and the others full (capacity, refill_pending
-- NULL, as a call or a refill leaves a full bucket); zone B holds the keys
-- below capacity only, each row right after A's row of the same key, so
-- that A's and B's refills update rows of the same pages.
SELECT (:cron_full + :cron_pending) / :cron_pending AS cron_step \gset
INSERT INTO ratelimit.state (key, zone_id, part, tokens, token_fraction, updated_at, counter, entries, refill_pending)
SELECT 'r' || i, z.zone_id, 0, CASE WHEN f.full THEN :cron_cap ELSE 0 END, 0, now(), 0, NULL,
       CASE WHEN f.full THEN NULL ELSE true END
  FROM generate_series(1, :cron_full + :cron_pending) i
 CROSS JOIN LATERAL (SELECT i % :cron_step <> 0 AS full) f
  JOIN ratelimit.zone z ON z.zone = 'bench_cron_a' OR (z.zone = 'bench_cron_b' AND NOT f.full)
 ORDER BY i, z.zone;
VACUUM ANALYZE ratelimit.state;
INSERT INTO bench.cron_setup
SELECT count(*) FILTER (WHERE s.zone_id = a.zone_id),
       count(*) FILTER (WHERE s.zone_id = a.zone_id AND s.refill_pending),
       count(*) FILTER (WHERE s.zone_id = b.zone_id),
       count(*), pg_relation_size('ratelimit.state') / current_setting('block_size')::int,
       count(*) FILTER (WHERE s.refill_pending), pg_relation_size('ratelimit.state_refill_idx')
  FROM ratelimit.state s, ratelimit.zone a, ratelimit.zone b
 WHERE a.zone = 'bench_cron_a' AND b.zone = 'bench_cron_b';

-- Each repetition: A, B and C, each after a VACUUM.  Each run refills
-- exactly the buckets below capacity (checked: the count returned).
TRUNCATE bench.steps;
INSERT INTO bench.steps (n, phase, variant, calls, sql)
SELECT 2 * n, 'cron_refill', variant, :cron_pending, sql
  FROM (VALUES (1, 'A', 'SELECT rl_cron_refill(''bench_cron_a'')'),
               (2, 'B', 'SELECT rl_cron_refill(''bench_cron_b'')'),
               (3, 'C', 'SELECT bench.cron_refill_seqscan(''bench_cron_a'')')) AS v(n, variant, sql);
INSERT INTO bench.steps (n, sql) SELECT 2 * n - 1, 'VACUUM ratelimit.state' FROM generate_series(1, 3) n;
\set repeat :reps
\ir interleave.sql
VACUUM ratelimit.state;
