-- Before anything is measured, every variant must decide as rl_token_bucket
-- does, so that no baseline is faster for deciding something else.  On the
-- real clock, rate 1 per second, window 5 (capacity 5), cost 1: six calls at
-- one instant return 4, 3, 2, 1, 0, -1; calls 0.2, 0.4, 0.6 and 0.8 s later
-- are refused (the fraction refilled is kept, and a refused call takes
-- nothing); one 1.1 s after the first is admitted.
--
-- Variables: zones (1: also the sliding-window check, which needs
-- 4_zones_setup.sql).

SET client_min_messages = warning;
CREATE TEMP TABLE variant (n, variant, fn, access, store) AS VALUES
    (1, 'direct',  'rl_token_bucket',      'direct', 'table'),
    (2, 'spi',     'rl_token_bucket',      'spi',    'table'),
    (3, 'shmem',   'rl_token_bucket',      'direct', 'shmem'),
    (4, 'plpgsql', 'bench.plpgsql_bucket', 'direct', 'table'),
    (5, 'upsert',  'bench.upsert_bucket',  'direct', 'table');
CREATE TEMP TABLE got (variant text, step int, got text);

-- One statement per step, the sleeps between them on the real clock.
SELECT c.sql
  FROM variant v, LATERAL (VALUES
    (0, format('SET ratelimit.table_access = %L', v.access)),
    (1, format('SET ratelimit.default_store = %L', v.store)),
    (2, format($$INSERT INTO got SELECT %L, 2, string_agg(r::text, ',' ORDER BY i)
                   FROM (SELECT i, %s(%L, 1, 5, 1) AS r FROM generate_series(1, 6) i) s$$,
               v.variant, v.fn, 'sanity-' || v.variant)),
    (3, format('INSERT INTO got SELECT %L, 3, %s(%L, 1, 5, 1) FROM pg_sleep(0.2)', v.variant, v.fn, 'sanity-' || v.variant)),
    (4, format('INSERT INTO got SELECT %L, 4, %s(%L, 1, 5, 1) FROM pg_sleep(0.2)', v.variant, v.fn, 'sanity-' || v.variant)),
    (5, format('INSERT INTO got SELECT %L, 5, %s(%L, 1, 5, 1) FROM pg_sleep(0.2)', v.variant, v.fn, 'sanity-' || v.variant)),
    (6, format('INSERT INTO got SELECT %L, 6, %s(%L, 1, 5, 1) FROM pg_sleep(0.2)', v.variant, v.fn, 'sanity-' || v.variant)),
    (7, format('INSERT INTO got SELECT %L, 7, %s(%L, 1, 5, 1) FROM pg_sleep(0.3)', v.variant, v.fn, 'sanity-' || v.variant))
  ) AS c(step, sql)
 ORDER BY v.n, c.step
\gexec
RESET ratelimit.table_access;
RESET ratelimit.default_store;

SELECT bench.fail_if(format('%s (%s): token-bucket check', v.variant, v.fn),
                     format('expected %L, got %L', '4,3,2,1,0,-1 -1 -1 -1 -1 0', g.got))
  FROM variant v
  LEFT JOIN (SELECT variant, string_agg(got, ' ' ORDER BY step) AS got FROM got GROUP BY variant) g USING (variant)
 WHERE g.got IS DISTINCT FROM '4,3,2,1,0,-1 -1 -1 -1 -1 0'
 ORDER BY v.n;

\if :zones
-- The log table and rl_sliding_window apply the same rule, on the real
-- clock, limit 3 per second: four calls at one instant (t,t,t,f), one 0.5 s
-- later (f), then, once the first three have left the window, a call of
-- cost 2 (t), one of cost 1 (t) and one more (f).
CREATE TEMP TABLE sw_variant (n, variant, call) AS VALUES
    (1, 'ours', $$(rl_sliding_window('sw_sanity', 'sanity', %s)).allowed$$),
    (2, 'log',  $$bench.log_window('sanity', 3, interval '1 second', %s)$$);
TRUNCATE got;
SELECT c.sql
  FROM sw_variant v, LATERAL (VALUES
    (1, format($$INSERT INTO got SELECT %L, 1, string_agg(r::text, ',' ORDER BY i)
                   FROM (SELECT i, %s AS r FROM generate_series(1, 4) i) s$$, v.variant, format(v.call, 1))),
    (2, format('INSERT INTO got SELECT %L, 2, %s FROM pg_sleep(0.5)', v.variant, format(v.call, 1))),
    (3, format('INSERT INTO got SELECT %L, 3, %s FROM pg_sleep(0.6)', v.variant, format(v.call, 2))),
    (4, format('INSERT INTO got SELECT %L, 4, %s', v.variant, format(v.call, 1))),
    (5, format('INSERT INTO got SELECT %L, 5, %s', v.variant, format(v.call, 1)))
  ) AS c(step, sql)
 ORDER BY v.n, c.step
\gexec

SELECT bench.fail_if(format('sliding window check (%s)', v.variant),
                     format('expected %L, got %L', 'true,true,true,false false true true false', g.got))
  FROM sw_variant v
  LEFT JOIN (SELECT variant, string_agg(got, ' ' ORDER BY step) AS got FROM got GROUP BY variant) g USING (variant)
 WHERE g.got IS DISTINCT FROM 'true,true,true,false false true true false'
 ORDER BY v.n;
\endif
