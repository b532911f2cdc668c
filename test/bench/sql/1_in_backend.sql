-- Sections 1, 3 and 4: calls inside the server, timed per statement.
--   1. SELECT count(f('k' || i, :rate, :window, 1)) FROM generate_series(1, :keys) i
--      over existing keys, each key once per statement: rl_token_bucket on
--      the table store (both access paths) and the shmem store, the
--      hand-written buckets, and the same statement without a bucket;
--   4. the same shape through rl_limit, one zone per algorithm and store,
--      in the same repetitions as 1;
--   3. :hot_calls calls in one statement on one key vs over :keys keys.
--
-- Variables: keys, rate, window, reps, hot_reps, hot_calls, zone_algos,
-- shmem_zone_algos (empty without section 4).

SET client_min_messages = warning;

-- The shared-memory counters before anything is measured: no call of the
-- measured phases may be refused, and the shmem store may neither evict nor
-- run out of room (counters_check.sql, after section 2).
INSERT INTO bench.counters_before SELECT * FROM rl_counters;

-- Warm-up: the calls measure updates of existing state, so every measured
-- key is created first ('k0' .. 'k:keys' and the hot key, on both stores),
-- 1000 keys per transaction (builds before 3184fbe held a lock per created
-- key until commit, which filled the lock table).
SET ratelimit.table_access = direct;
SELECT c.sql
  FROM (VALUES (1, 'table', 'rl_token_bucket'), (2, 'shmem', 'rl_token_bucket'),
               (3, 'table', 'bench.plpgsql_bucket'), (4, 'table', 'bench.upsert_bucket')) AS f(n, store, fn),
       LATERAL (SELECT -1, format('SET ratelimit.default_store = %L', f.store)
                UNION ALL
                SELECT lo, format('SELECT count(%s(''k'' || i, %s, %s, 1)) FROM generate_series(%s, %s) i',
                                  f.fn, :rate, :window, lo, least(lo + 999, :keys))
                  FROM generate_series(0, :keys, 1000) lo
                UNION ALL
                SELECT :keys + 1, format('SELECT %s(''hot'', %s, %s, 1)', f.fn, :rate, :window)) AS c(k, sql)
 ORDER BY f.n, c.k
\gexec
-- The keys i::text of the shmem_i variant.
SET ratelimit.default_store = shmem;
SELECT count(rl_token_bucket(i::text, :rate, :window, 1)) FROM generate_series(0, :keys) i;
SET ratelimit.default_store = 'table';
SELECT format('SELECT count(rl_limit(%L, ''k'' || i, 1)) FROM generate_series(%s, %s) i',
              z.zone, lo, least(lo + 999, :keys))
  FROM unnest(array(SELECT 'bench_' || a FROM unnest(string_to_array(:'zone_algos', ' ')) a)
              || array(SELECT 'bench_shmem_' || a FROM unnest(string_to_array(:'shmem_zone_algos', ' ')) a))
       WITH ORDINALITY AS z(zone, n),
       generate_series(0, :keys, 1000) lo
 ORDER BY z.n, lo
\gexec
VACUUM ANALYZE ratelimit.state, bench.plpgsql_bucket, bench.upsert_bucket;

-- Sections 1 and 4, each repetition: the variants of section 1, the zones
-- on the table store, the zones on the shmem store, then VACUUM.
-- shmem: rl_token_bucket with ratelimit.default_store = shmem; shmem_i: the
-- same over the keys i::text, those of the hashtext(i::text) loop; hashtext
-- and hashtext_k: that loop and the same over the keys as the calls build
-- them, no bucket at all.  access NULL: table_access does not matter.
-- The zones count admitted calls only: a refusal fails the run.
TRUNCATE bench.steps;
INSERT INTO bench.steps (n, phase, variant, access, store, calls, sql)
SELECT n, 'inbackend', variant, access, store, :keys,
       format('SELECT count(%s) FROM generate_series(1, %s) i',
              CASE WHEN fn = 'hashtext' THEN format('hashtext(%s)', key)
                   ELSE format('%s(%s, %s, %s, 1)', fn, key, :rate, :window) END,
              :keys)
  FROM (VALUES
    (1, 'direct',     'direct', 'table', 'rl_token_bucket',      '''k'' || i'),
    (2, 'spi',        'spi',    'table', 'rl_token_bucket',      '''k'' || i'),
    (3, 'shmem',      'direct', 'shmem', 'rl_token_bucket',      '''k'' || i'),
    (4, 'shmem_i',    'direct', 'shmem', 'rl_token_bucket',      'i::text'),
    (5, 'plpgsql',    NULL,     'table', 'bench.plpgsql_bucket', '''k'' || i'),
    (6, 'upsert',     NULL,     'table', 'bench.upsert_bucket',  '''k'' || i'),
    (7, 'hashtext',   NULL,     'table', 'hashtext',             'i::text'),
    (8, 'hashtext_k', NULL,     'table', 'hashtext',             '''k'' || i')
  ) AS v(n, variant, access, store, fn, key);
INSERT INTO bench.steps (n, phase, variant, access, calls, sql)
SELECT 100 * z.tier + z.n, z.phase, z.algo, 'direct', :keys,
       format('SELECT count((rl_limit(%L, ''k'' || i, 1)).allowed OR NULL) FROM generate_series(1, %s) i',
              z.prefix || z.algo, :keys)
  FROM (SELECT 1, 'zones', 'bench_', a, n FROM unnest(string_to_array(:'zone_algos', ' ')) WITH ORDINALITY a(a, n)
        UNION ALL
        SELECT 2, 'zones_shmem', 'bench_shmem_', a, n
          FROM unnest(string_to_array(:'shmem_zone_algos', ' ')) WITH ORDINALITY a(a, n)) AS z(tier, phase, prefix, algo, n);
INSERT INTO bench.steps (n, sql) VALUES (1000, 'VACUUM ratelimit.state, bench.plpgsql_bucket, bench.upsert_bucket');
\set repeat :reps
\ir interleave.sql

-- Section 3: the hot key vs spread keys, each repetition: hot then spread
-- for each of the three, then VACUUM.
TRUNCATE bench.steps;
INSERT INTO bench.steps (n, phase, variant, access, store, calls, sql)
SELECT 10 * v.n + k.n, k.phase, v.variant, v.access, v.store, :hot_calls,
       format('SELECT count(rl_token_bucket(%s, %s, %s, 1)) FROM generate_series(1, %s) i',
              k.key, :rate, :window, :hot_calls)
  FROM (VALUES (1, 'direct', 'direct', 'table'), (2, 'spi', 'spi', 'table'), (3, 'shmem', 'direct', 'shmem'))
           AS v(n, variant, access, store),
       (VALUES (1, 'hot', '''hot'''), (2, 'spread', format('''k'' || (i %% %s)', :keys))) AS k(n, phase, key);
INSERT INTO bench.steps (n, sql) VALUES (1000, 'VACUUM ratelimit.state');
\set repeat :hot_reps
\ir interleave.sql
