-- The report, in Markdown on stdout: what ran where, sections 1 to 9 (those
-- that ran), then the targets, from what the sections recorded in the
-- bench schema.  Medians over the repetitions are taken here (view med);
-- the tables are written by bench.md_head and bench.md_row.
--
-- Variables: the sections' (keys, rate, window, zone_rate, zone_period,
-- sw_period, sw_spacing, size_period, cron_cap), which sections ran (zones,
-- cron, trigger), pgbench's rounds and seconds per run, and the run's
-- description: nproc, uname, load_start, load_end, idle (the machine's
-- idle setting), command, minutes, shmem_keys, so_note (empty: none).

-- A Markdown table's header: the titles, then the alignment of each column
-- ('l' left, 'r' right, one letter per column).
CREATE FUNCTION bench.md_head(align text, VARIADIC titles text[]) RETURNS text
LANGUAGE sql AS $fn$
SELECT '| ' || array_to_string(titles, ' | ') || E' |\n| '
       || (SELECT string_agg(CASE substr(align, i, 1) WHEN 'r' THEN '---:' ELSE '---' END, ' | ' ORDER BY i)
             FROM generate_series(1, cardinality(titles)) i)
       || ' |'
$fn$;
-- A row of that table; a NULL cell is left empty.
CREATE FUNCTION bench.md_row(VARIADIC cells text[]) RETURNS text
LANGUAGE sql AS $fn$
SELECT '| ' || array_to_string(cells, ' | ', '') || ' |'
$fn$;

-- A row of the targets' table: met or missed.
CREATE FUNCTION bench.target(target text, measured text, met boolean) RETURNS text
LANGUAGE sql AS $fn$
SELECT bench.md_row(target, measured, CASE WHEN met THEN 'met' ELSE '**MISSED**' END)
$fn$;
-- "1 client", "2 clients".
CREATE FUNCTION bench.clients(n int) RETURNS text
LANGUAGE sql AS $fn$
SELECT n || ' client' || CASE WHEN n > 1 THEN 's' ELSE '' END
$fn$;

-- Every timed phase and variant: per call (µs) and per statement (s), the
-- median, min and max over the recorded repetitions.
CREATE TEMP VIEW med AS
SELECT phase, variant,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY secs / calls) * 1e6 AS us,
       min(secs / calls) * 1e6 AS us_min,
       max(secs / calls) * 1e6 AS us_max,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY secs) AS secs,
       min(secs) AS secs_min,
       max(secs) AS secs_max,
       max(calls) AS calls,
       count(*) AS reps
  FROM bench.timings GROUP BY phase, variant;

-- All rounds of a pgbench variant pooled: transactions over time spent
-- (without connecting).
CREATE TEMP VIEW pgb_all AS
SELECT section, clients, variant, sum(xacts) / sum(xacts / tps) AS tps,
       min(tps) AS tps_min, max(tps) AS tps_max, count(*) AS runs
  FROM bench.pgbench GROUP BY section, clients, variant;

-- The table store (direct) over the upsert bucket round by round: the two
-- ran one after the other in each round, so a round's ratio shows how far
-- the pooled ratio moves with the machine within one run.
CREATE TEMP VIEW pgb_round_ratio AS
SELECT d.section, d.clients,
       format('round by round: median %s×, %s× to %s×, %s of %s rounds ≥ 1.3×',
              to_char(percentile_cont(0.5) WITHIN GROUP (ORDER BY d.tps / u.tps), 'FM990.00'),
              to_char(min(d.tps / u.tps), 'FM990.00'), to_char(max(d.tps / u.tps), 'FM990.00'),
              count(*) FILTER (WHERE d.tps / u.tps >= 1.3), count(*)) AS summary
  FROM bench.pgbench d
  JOIN bench.pgbench u ON u.section = d.section AND u.round = d.round
                      AND u.clients = d.clients AND u.variant = 'upsert'
 WHERE d.variant = 'direct'
 GROUP BY d.section, d.clients;

\echo '# ratelimit benchmark'
\echo ''
SELECT format('- date: %s', to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS "UTC"'));
SELECT format('- machine: %s CPUs (`nproc`), %s; load average (1, 5, 15 min) %s at the start, %s at the end; %s',
              :'nproc', :'uname', :'load_start', :'load_end', :'idle');
SELECT format('- PostgreSQL: %s', version());
SELECT format('- command: `%s`', :'command');
SELECT format('- run time: %s min (build excluded)', :'minutes');
SELECT format('- throwaway cluster (`.cluster/bench`), server defaults except shared_buffers = 256MB, shared_preload_libraries = %L and ratelimit.shmem_max_keys = %s; keys `''k1''` … `''k%s''`, rate %s/s, window %s s, cost 1.',
              current_setting('shared_preload_libraries'), :'shmem_keys', :'keys', :'rate', :'window');
\echo '- baselines: UNLOGGED tables with a text COLLATE "C" primary key, float8 tokens, a timestamptz and fillfactor 50 (`ratelimit.state`, which holds every algorithm''s state, keeps whole tokens in a bigint plus a float8 fraction and its primary key is (key, zone_id, part, params)); the PL/pgSQL bucket and the upsert statement are in `test/bench/baselines.sql`, and all variants (`rl_token_bucket` on both stores included) pass the token bucket check (fractions kept, refused calls take nothing) before the run.'
SELECT format('- **%s**', :'so_note') WHERE :'so_note' <> '';
\echo ''

-- The variants of sections 1 to 3, in the order of their rows.
CREATE TEMP VIEW label(variant, label, n) AS VALUES
    ('select1', '`SELECT 1`', 0),
    ('hashtext', '`hashtext(i::text)` (no bucket)', 1),
    ('hashtext_k', '`hashtext(''k'' || …)` (no bucket)', 2),
    ('direct', '`rl_token_bucket`, table store, table_access=direct', 3),
    ('spi', '`rl_token_bucket`, table store, table_access=spi', 4),
    ('shmem', '`rl_token_bucket`, shmem store', 5),
    ('shmem_i', '`rl_token_bucket`, shmem store, keys `i::text`', 6),
    ('plpgsql', 'PL/pgSQL bucket (UPDATE … RETURNING, then INSERT)', 7),
    ('upsert', '`INSERT … ON CONFLICT DO UPDATE` bucket', 8);
CREATE TEMP VIEW inb AS SELECT * FROM med WHERE phase = 'inbackend';
CREATE TEMP VIEW pgb AS SELECT * FROM pgb_all WHERE section = 2;
-- Section 2's variants at 1 client with the server and pgbench on one CPU.
CREATE TEMP VIEW pgb_one_cpu AS SELECT * FROM pgb_all WHERE section = 20;
CREATE TEMP VIEW hot AS
SELECT h.variant, h.secs AS hot_s, s.secs AS spread_s, h.secs / s.secs AS ratio
  FROM med h JOIN med s ON s.phase = 'spread' AND s.variant = h.variant
 WHERE h.phase = 'hot';

\echo '## 1. In-backend calls/s'
\echo ''
SELECT format('`SELECT count(f(''k'' || i, %s, %s, 1)) FROM generate_series(1, %s) i` over keys that already exist (created by a warm-up, on each store), each key once per statement; every call is admitted and writes (no call refused, and the shmem store neither evicted a key nor ran out of room: checked with `rl_counters` over sections 1 to 4). Both stores run the same statement; the store is `ratelimit.default_store` (`table` or `shmem`, set before each statement). The two hashtext loops are the same statement with `hashtext(i::text)` (the trivial loop of the speed target) or `hashtext(''k'' || i)` (the keys the calls build) instead of a bucket. The shmem store also runs the statement over the keys `i::text` (`rl_token_bucket(i::text, …)`, keys created by the warm-up too): the trivial loop''s own keys, built by the same expression. Timed inside the server (clock_timestamp() around EXECUTE + COMMIT); median of %s interleaved repetitions (after one unrecorded warm-up round). The ratio columns are the row''s calls/s over the named variant''s (PL/pgSQL and upsert: buckets only).',
              :'rate', :'window', max(calls), max(reps))
  FROM inb;
\echo ''
SELECT bench.md_head('lrrrrrr', 'variant', 'µs/call (median)', 'min–max µs/call', 'calls/s', '× PL/pgSQL', '× upsert',
                     '× `hashtext(i::text)` loop');
SELECT bench.md_row(l.label,
                    to_char(i.us, 'FM990.00'), to_char(i.us_min, 'FM990.00') || '–' || to_char(i.us_max, 'FM990.00'),
                    to_char(1e6 / i.us, 'FM9999999990'),
                    CASE WHEN i.variant LIKE 'hashtext%' THEN '—' ELSE to_char(p.us / i.us, 'FM990.00') END,
                    CASE WHEN i.variant LIKE 'hashtext%' THEN '—' ELSE to_char(u.us / i.us, 'FM990.00') END,
                    to_char(h.us / i.us, 'FM990.00'))
  FROM inb i JOIN label l USING (variant)
 CROSS JOIN (SELECT us FROM inb WHERE variant = 'plpgsql') p
 CROSS JOIN (SELECT us FROM inb WHERE variant = 'upsert') u
 CROSS JOIN (SELECT us FROM inb WHERE variant = 'hashtext') h
 ORDER BY l.n;
\echo ''

\echo '## 2. pgbench -M prepared -n'
\echo ''
SELECT format('`\set k random(1, %s)`, one call per transaction; `-j` = clients. Each variant and client count runs %s × `-T %s`, interleaved with the others (round 1 of every variant, then round 2 …); tps = all transactions of those runs / their time (without connecting), min–max over the runs. table_access chosen with `PGOPTIONS=''-c ratelimit.table_access=…''`, the shmem store with `PGOPTIONS=''-c ratelimit.default_store=shmem''` (same script as the table store; its keys were created in section 1 and are kept across statements; no call refused, checked); the upsert statement is sent as is (not wrapped in a function). `hashtext(''k'' || …)` runs the buckets'' script with `SELECT hashtext(''k'' || :k)` instead of a bucket: what a prepared statement with a parameter and a function call costs here, against `SELECT 1`.',
              :'keys', :'rounds', :'seconds');
\echo ''
SELECT bench.md_head('lrrrrr', 'variant', 'clients', 'tps', 'min–max tps', '× upsert', '× `SELECT 1`');
SELECT bench.md_row(l.label, b.clients::text, to_char(b.tps, 'FM9999999990'),
                    to_char(b.tps_min, 'FM9999999990') || '–' || to_char(b.tps_max, 'FM9999999990'),
                    to_char(b.tps / u.tps, 'FM990.00'), to_char(b.tps / s.tps, 'FM990.00'))
  FROM pgb b JOIN label l USING (variant)
  JOIN pgb u ON u.clients = b.clients AND u.variant = 'upsert'
  JOIN pgb s ON s.clients = b.clients AND s.variant = 'select1'
 ORDER BY b.clients, l.n;
\echo ''
\echo '### 1 client, the server and pgbench on one CPU'
\echo ''
SELECT format('The same runs at 1 client (%s × `-T %s` each, interleaved), with every process of the cluster and pgbench bound to CPU 0 (`taskset`). Across two CPUs, a round trip at 1 client also waits for the idle CPU to wake, which on a VM that halts its idle CPUs at once (see the machine line above) is most of it; on one CPU it is a context switch, and the tps is what the server and pgbench spend per transaction. `SELECT 1` here against `SELECT 1` across two CPUs: %s×.',
              :'rounds', :'seconds', to_char(o.tps / t.tps, 'FM990.00'))
  FROM pgb_one_cpu o JOIN pgb t ON t.clients = 1 AND t.variant = 'select1'
 WHERE o.variant = 'select1';
\echo ''
SELECT bench.md_head('lrrrr', 'variant', 'tps', 'min–max tps', '× upsert', '× `SELECT 1`');
SELECT bench.md_row(l.label, to_char(b.tps, 'FM9999999990'),
                    to_char(b.tps_min, 'FM9999999990') || '–' || to_char(b.tps_max, 'FM9999999990'),
                    to_char(b.tps / u.tps, 'FM990.00'), to_char(b.tps / s.tps, 'FM990.00'))
  FROM pgb_one_cpu b JOIN label l USING (variant)
 CROSS JOIN (SELECT tps FROM pgb_one_cpu WHERE variant = 'upsert') u
 CROSS JOIN (SELECT tps FROM pgb_one_cpu WHERE variant = 'select1') s
 ORDER BY l.n;
\echo ''

\echo '## 3. Hot key'
\echo ''
SELECT format('100k calls in one statement (commit included), on ONE key (`''hot''`) vs over 10k keys (`''k'' || (i %% 10000)`, each key 10 times), every call admitted (checked); median of %s repetitions, the variants interleaved.',
              max(reps))
  FROM med WHERE phase IN ('hot', 'spread');
\echo ''
SELECT bench.md_head('lrrr', 'variant', 'one key, s', '10k keys, s', 'one key / 10k keys');
SELECT bench.md_row(l.label, to_char(h.hot_s, 'FM990.000'), to_char(h.spread_s, 'FM990.000'), to_char(h.ratio, 'FM990.00'))
  FROM hot h JOIN label l USING (variant) ORDER BY l.n;
\echo ''

\if :zones
CREATE TEMP VIEW zon AS SELECT * FROM med WHERE phase = 'zones';
CREATE TEMP VIEW zon_shmem AS SELECT * FROM med WHERE phase = 'zones_shmem';
CREATE TEMP VIEW zord(variant, n) AS VALUES
    ('token_bucket', 1), ('gcra', 2), ('fixed_window', 3), ('sliding_window_counter', 4), ('sliding_window', 5);

-- Section 5: the fill of a measured key is prefill + the calls it took in
-- earlier repetitions (warm-up included).
CREATE TEMP VIEW sw AS
SELECT split_part(variant, ':', 1) AS who, split_part(variant, ':', 2)::bigint AS lim, *
  FROM med WHERE phase = 'sw';
CREATE TEMP VIEW swr AS
SELECT o.lim, u.keys, u.prefill, u.prefill + (count(*) + 1 + u.sets - 1) / u.sets - 1 AS fill_max,
       o.us AS ours_us, o.us_min AS ours_min, o.us_max AS ours_max,
       l.us AS log_us, l.us_min AS log_min, l.us_max AS log_max, o.reps
  FROM sw o JOIN sw l ON l.lim = o.lim AND l.who = 'log'
  JOIN bench.sw_setup u ON u.lim = o.lim
  JOIN bench.timings t ON t.phase = 'sw' AND t.variant = 'ours:' || o.lim
 WHERE o.who = 'ours'
 GROUP BY o.lim, u.keys, u.prefill, u.sets, o.us, o.us_min, o.us_max, l.us, l.us_min, l.us_max, o.reps;

\echo '## 4. Zones: `rl_limit` in-backend calls/s per algorithm'
\echo ''
SELECT format('`SELECT count((rl_limit(''bench_<algorithm>'', ''k'' || i, 1)).allowed OR NULL) FROM generate_series(1, %s) i` over keys that already exist (created by a warm-up), each key once per statement; each zone allows %s calls per %s (`rl_zone_set(''bench_<algorithm>'', ''<algorithm>'', %s, ''%s'')`), so every call is admitted and writes; only admitted calls are counted and the count is checked. The same zones on the shmem store (`rl_zone_set(''bench_shmem_<algorithm>'', …, store => ''shmem'')`; not `sliding_window`, which needs the table store) run the same statement over the same keys. Measured in the same interleaved repetitions as section 1 (each repetition: the variants of section 1, then the five table-store zones, then the four shmem zones, then VACUUM), table_access=direct; median of %s repetitions. The × columns are the µs/call of `rl_token_bucket` (table store, direct) and of the PL/pgSQL bucket in section 1 over the zone''s (above 1: the zone is faster); the last one, table store over shmem store.',
              :'keys', :'zone_rate', :'zone_period', :'zone_rate', :'zone_period', max(reps))
  FROM zon;
\echo ''
SELECT bench.md_head('lrrrrrrrrrr', 'algorithm', 'table: µs/call (median)', 'min–max', 'calls/s',
                     '× `rl_token_bucket` (direct)', '× PL/pgSQL bucket', 'shmem: µs/call (median)', 'min–max',
                     'calls/s', '× `rl_token_bucket` (shmem)', 'table / shmem');
SELECT bench.md_row('`' || z.variant || '`',
                    to_char(z.us, 'FM990.00'), to_char(z.us_min, 'FM990.00') || '–' || to_char(z.us_max, 'FM990.00'),
                    to_char(1e6 / z.us, 'FM9999999990'),
                    to_char(d.us / z.us, 'FM990.00'), to_char(p.us / z.us, 'FM990.00'),
                    coalesce(to_char(m.us, 'FM990.00'), '—'),
                    coalesce(to_char(m.us_min, 'FM990.00') || '–' || to_char(m.us_max, 'FM990.00'), '—'),
                    coalesce(to_char(1e6 / m.us, 'FM9999999990'), '—'),
                    coalesce(to_char(s.us / m.us, 'FM990.00'), '—'),
                    coalesce(to_char(z.us / m.us, 'FM990.00'), '—'))
  FROM zon z JOIN zord o USING (variant)
  LEFT JOIN zon_shmem m USING (variant)
 CROSS JOIN (SELECT us FROM inb WHERE variant = 'direct') d
 CROSS JOIN (SELECT us FROM inb WHERE variant = 'plpgsql') p
 CROSS JOIN (SELECT us FROM inb WHERE variant = 'shmem') s
 ORDER BY o.n;
\echo ''

\echo '## 5. Exact sliding window vs a log table'
\echo ''
SELECT format('`rl_sliding_window(''sw_<limit>'', key, 1)` on zones of `<limit>` per %s, against `bench.log_window(key, limit, period, 1)`: a PL/pgSQL function over an UNLOGGED table (key text COLLATE "C", at timestamptz) with an index on (key, at), one row per admitted unit of cost; it takes an advisory lock on the key (so that count-then-insert is atomic under READ COMMITTED, as `rl_sliding_window` is), deletes the key''s expired rows, counts its rows in the trailing period (an index-only scan) and inserts the request if the count plus the cost stays within the limit. Both pass the same admission check before the run (limit 3 per second on the real clock). Every measured key was pre-filled with 0.9 × limit admissions %s apart within the period (ours: one `rl_sliding_window` call per admission, at times set by `ratelimit.now_override`; the log table: `INSERT … SELECT` of the same times) and vacuumed; nothing expires during the measurement. Each statement calls once per key, over the same number of keys at every limit, `SELECT count((f(…)).allowed OR NULL) FROM generate_series(…) i`, on the real clock; every call is admitted (checked), so a key holds between 0.9 × limit and the column "held" admissions when measured. Ours and the log table alternate, limit after limit, in each repetition (VACUUM after each); median of %s repetitions.',
              :'sw_period', :'sw_spacing', max(reps))
  FROM swr;
\echo ''
SELECT bench.md_head('rrrrrrrrrr', 'limit', 'keys per statement', 'held', 'ours µs/call (median)', 'ours min–max',
                     'ours calls/s', 'log table µs/call (median)', 'log min–max', 'log calls/s', 'log / ours');
SELECT bench.md_row(to_char(lim, 'FM999G999'), keys::text, prefill || '–' || fill_max,
                    to_char(ours_us, 'FM9990.00'), to_char(ours_min, 'FM9990.00') || '–' || to_char(ours_max, 'FM9990.00'),
                    to_char(1e6 / ours_us, 'FM9999999990'),
                    to_char(log_us, 'FM9990.00'), to_char(log_min, 'FM9990.00') || '–' || to_char(log_max, 'FM9990.00'),
                    to_char(1e6 / log_us, 'FM9999999990'), to_char(log_us / ours_us, 'FM99990.0'))
  FROM swr ORDER BY lim;
\echo ''
SELECT format('As the limit grows from 10 to 10,000 (0.9 × limit admissions held): ours %s µs → %s µs per call, **%s×** (from 1,000 to 10,000: %s×); the log table %s µs → %s µs, %s× (from 1,000 to 10,000: %s×).',
              to_char(a.ours_us, 'FM9990.00'), to_char(b.ours_us, 'FM9990.00'), to_char(b.ours_us / a.ours_us, 'FM990.00'),
              to_char(b.ours_us / m.ours_us, 'FM990.00'),
              to_char(a.log_us, 'FM9990.00'), to_char(b.log_us, 'FM9990.00'), to_char(b.log_us / a.log_us, 'FM99990.0'),
              to_char(b.log_us / m.log_us, 'FM99990.0'))
  FROM swr a, swr m, swr b WHERE a.lim = 10 AND m.lim = 1000 AND b.lim = 10000;
\echo ''
SELECT format('The same statement without any call (`SELECT count(i) FROM generate_series(…) i`, through the same timing procedure, commit included) takes %s µs per key (median): a fixed cost of the statement, included in both columns above.',
              to_char(us, 'FM9990.00'))
  FROM sw WHERE who = 'empty';
\echo ''

\echo '## 6. State bytes per key'
\echo ''
\echo 'Measured in `ratelimit.state` itself, emptied by `TRUNCATE` before each case so that it holds only the keys measured, after `VACUUM FULL` (heap rewritten at the table''s fillfactor 50, primary-key index rebuilt at its default fillfactor 90). *Heap tuple bytes*: `sum(pg_column_size(t.*))` over the key''s rows, i.e. the 24-byte tuple header plus the data, without the 4-byte line pointer and without the fillfactor slack. *On disk*: `pg_relation_size` (main fork) + `pg_indexes_size` of the table, divided by the keys: line pointers, page headers, the free half of every heap page (fillfactor 50) and the index included. No value is TOASTed (the largest, the sliding window''s head row, is bounded by 2 × 256 bytes of log + a small header).'
\echo ''
SELECT format('Every algorithm: %s keys (`''k1''` … `''k%s''`) after one call each, in the zones of section 4.', :'keys', :'keys');
\echo ''
SELECT bench.md_head('lrrrr', 'algorithm', 'rows/key', 'heap tuple bytes/key', 'on disk bytes/key', 'of which index');
SELECT bench.md_row('`' || s.variant || '`',
                    to_char(s.rows::numeric / s.keys, 'FM990.00'),
                    to_char(s.tuple_bytes::numeric / s.keys, 'FM99990.0'),
                    to_char((s.heap_bytes + s.index_bytes)::numeric / s.keys, 'FM99990.0'),
                    to_char(s.index_bytes::numeric / s.keys, 'FM99990.0'))
  FROM bench.sizes s JOIN zord o ON o.variant = s.variant
 WHERE s.what = 'algorithm' ORDER BY o.n;
\echo ''
SELECT format('Exact sliding window with a full window: zones of `<limit>` per %s, each key (`''c<limit>-<n>''`) given exactly `<limit>` admissions one second or one millisecond apart (times set by `ratelimit.now_override`), all admitted and still in the window (a further call is refused; checked). Log bytes/key: the varint-encoded buffers and chunks (`entries`, head row and parts 1..). The raw log is 8 bytes × limit (one timestamptz per admission, nothing else); the log table (same key, one row per admission, index on (key, at), after VACUUM FULL, default fillfactor) is measured the same way below.',
              :'size_period');
\echo ''
SELECT bench.md_head('rlrrrrrrr', 'limit', 'apart', 'keys', 'rows/key', 'log bytes/key (`entries`)', 'heap tuple bytes/key',
                     'heap tuple bytes / (8 B × limit)', 'on disk bytes/key', 'on disk / (8 B × limit)');
SELECT bench.md_row(to_char(lim, 'FM999G999'), variant, keys::text,
              to_char(rows::numeric / keys, 'FM99990.00'),
              to_char(entries_bytes::numeric / keys, 'FM9999990'),
              to_char(tuple_bytes::numeric / keys, 'FM9999990'),
              to_char(tuple_bytes::numeric / keys / (8 * lim), 'FM990.00'),
              to_char((heap_bytes + index_bytes)::numeric / keys, 'FM9999990'),
              to_char((heap_bytes + index_bytes)::numeric / keys / (8 * lim), 'FM990.00'))
  FROM bench.sizes WHERE what = 'sliding_window' ORDER BY lim, variant DESC;
\echo ''
\echo 'The log table of section 5 holding the same admissions:'
\echo ''
SELECT bench.md_head('rrrrrr', 'limit', 'keys', 'heap tuple bytes/key', 'on disk bytes/key', 'on disk / (8 B × limit)',
                     'on disk / ours (1 s apart)');
SELECT bench.md_row(to_char(l.lim, 'FM999G999'), l.keys::text,
              to_char(l.tuple_bytes::numeric / l.keys, 'FM9999990'),
              to_char((l.heap_bytes + l.index_bytes)::numeric / l.keys, 'FM9999990'),
              to_char((l.heap_bytes + l.index_bytes)::numeric / l.keys / (8 * l.lim), 'FM990.00'),
              to_char(((l.heap_bytes + l.index_bytes)::numeric / l.keys)
                      / ((o.heap_bytes + o.index_bytes)::numeric / o.keys), 'FM990.0'))
  FROM bench.sizes l JOIN bench.sizes o ON o.what = 'sliding_window' AND o.lim = l.lim AND o.variant = '1 second'
 WHERE l.what = 'log_table' ORDER BY l.lim;
\echo ''
\endif

\echo '## 7. Shared memory of the shmem store'
\echo ''
SELECT format('`ratelimit.shmem_max_keys = %s` in this cluster (`BENCH_SHMEM_KEYS`; the default is 100000). *Shared memory*: `sum(size)` of `pg_shmem_allocations WHERE name LIKE ''ratelimit%%''` (%s bytes allocated with alignment), asked for at server start whatever the keys held; per key: divided by `shmem_max_keys` (it includes a part that does not grow with the keys, the per-zone counter slots). *Kept*: after every other measurement, keys of a shmem zone that do not recover for an hour (`token_bucket`, 1 per hour), `shmem_max_keys` of them (`''f1''` … `''f%s''`), offered one by one in one statement with `ratelimit.shmem_full_policy = deny`, so that an admitted call is a kept key (the measured keys, recovered by then, are evicted for them); a new key finds no room only when every entry of the store holds a key that has not recovered: a key whose set is full borrows an entry of another set (refusals checked against `rl_counters.full`).',
              max_keys, alloc_allocated, max_keys)
  FROM bench.shmem;
\echo ''
SELECT bench.md_head('rrrrrr', 'shmem_max_keys', 'shared memory, bytes', 'bytes per key of shmem_max_keys',
                     'keys kept when a new key first found no room', 'keys kept of shmem_max_keys offered', 'bytes per kept key');
SELECT bench.md_row(max_keys::text, alloc_size::text, to_char(alloc_size::numeric / max_keys, 'FM9990.0'),
                    format('%s (%s %%)', first_full, to_char(100.0 * first_full / max_keys, 'FM990.0')),
                    format('%s (%s %%)', offered - full_calls, to_char(100.0 * (offered - full_calls) / max_keys, 'FM990.0')),
                    to_char(alloc_size::numeric / (offered - full_calls), 'FM9990.0'))
  FROM bench.shmem;
\echo ''

\if :cron
CREATE TEMP VIEW cron_label(variant, label, n) AS VALUES
    ('cron', '`rl_limit`, `token_bucket` zone, `refill => ''cron''`', 1),
    ('inline', '`rl_limit`, `token_bucket` zone, inline refill', 2),
    ('direct', '`rl_token_bucket`, table store, table_access=direct', 3);
CREATE TEMP VIEW cron_inb AS SELECT * FROM med WHERE phase = 'cron_calls';
CREATE TEMP VIEW cron_pgb AS SELECT * FROM pgb_all WHERE section = 8;
CREATE TEMP VIEW cron_ref AS
SELECT variant, secs * 1e3 AS ms, secs_min * 1e3 AS ms_min, secs_max * 1e3 AS ms_max, calls AS refilled, reps
  FROM med WHERE phase = 'cron_refill';

\echo '## 8. pg_cron refill mode'
\echo ''
\echo '### Calls'
\echo ''
SELECT format('`SELECT count((rl_limit(''bench_cron'', ''k'' || i, 1)).allowed OR NULL) FROM generate_series(1, %s) i` on a cron-refilled zone, `rl_zone_set(''bench_cron'', ''token_bucket'', %s, ''%s'', refill => ''cron'')`, against the same statement on the inline zone `bench_token_bucket` (`rl_zone_set(''bench_token_bucket'', ''token_bucket'', %s, ''%s'')`, section 4''s) and `SELECT count(rl_token_bucket(''k'' || i, %s, %s, 1)) FROM generate_series(1, %s) i` (table store, table_access=direct), over the keys `''k1''` … `''k%s''` (created by a warm-up in each), each key once per statement. The cron zone''s `refill_tick` is %s, set by `UPDATE ratelimit.zone` (what `rl_cron_enable` picks with the installed pg_cron %s); no pg_cron job is scheduled, so a call only takes tokens and nothing refills while measuring (every key holds far more tokens than the calls it gets: the capacity is the rate). Timed inside the server (clock_timestamp() around EXECUTE + COMMIT), table_access=direct; median of %s repetitions, the three interleaved (each repetition: cron zone, inline zone, `rl_token_bucket`, then VACUUM), after one unrecorded warm-up round. Every call is admitted: the `rl_limit` statements count admitted calls only (checked), and `rl_counters` shows no refused call of the three over the whole section, pgbench included. The × columns are the named variant''s µs/call over the row''s (above 1: the row is faster).',
              :'keys', :'zone_rate', :'zone_period', :'zone_rate', :'zone_period', :'rate', :'window', :'keys', :'keys',
              (SELECT refill_tick FROM ratelimit.zone WHERE zone = 'bench_cron'),
              coalesce((SELECT default_version FROM pg_available_extensions WHERE name = 'pg_cron'), '(none)'),
              max(reps))
  FROM cron_inb;
\echo ''
SELECT bench.md_head('lrrrrr', 'variant', 'µs/call (median)', 'min–max µs/call', 'calls/s', '× inline zone',
                     '× `rl_token_bucket`');
SELECT bench.md_row(l.label,
                    to_char(c.us, 'FM990.00'), to_char(c.us_min, 'FM990.00') || '–' || to_char(c.us_max, 'FM990.00'),
              to_char(1e6 / c.us, 'FM9999999990'),
              to_char(i.us / c.us, 'FM990.00'), to_char(d.us / c.us, 'FM990.00'))
  FROM cron_inb c JOIN cron_label l USING (variant)
 CROSS JOIN (SELECT us FROM cron_inb WHERE variant = 'inline') i
 CROSS JOIN (SELECT us FROM cron_inb WHERE variant = 'direct') d
 ORDER BY l.n;
\echo ''
SELECT format('pgbench -M prepared -n, `\set k random(1, %s)` then `SELECT rl_limit(''bench_cron'', ''k'' || :k, 1);` (the inline zone: `''bench_token_bucket''`; `rl_token_bucket`: section 2''s script), one call per transaction, `-j` = clients, `PGOPTIONS=''-c ratelimit.table_access=direct''` for all three. Rounds of their own, after section 2''s: each variant and client count runs %s × `-T %s`, interleaved with the others (round 1 of every variant and client count, then round 2 …; VACUUM before each run); tps = all transactions of those runs / their time (without connecting), min–max over the runs. The × columns are the row''s tps over the named variant''s.',
              :'keys', max(runs), :'seconds')
  FROM cron_pgb;
\echo ''
SELECT bench.md_head('lrrrrr', 'variant', 'clients', 'tps', 'min–max tps', '× inline zone', '× `rl_token_bucket`');
SELECT bench.md_row(l.label, b.clients::text, to_char(b.tps, 'FM9999999990'),
                    to_char(b.tps_min, 'FM9999999990') || '–' || to_char(b.tps_max, 'FM9999999990'),
              to_char(b.tps / i.tps, 'FM990.00'), to_char(b.tps / d.tps, 'FM990.00'))
  FROM cron_pgb b JOIN cron_label l USING (variant)
  JOIN cron_pgb i ON i.clients = b.clients AND i.variant = 'inline'
  JOIN cron_pgb d ON d.clients = b.clients AND d.variant = 'direct'
 ORDER BY b.clients, l.n;
\echo ''
\echo '### One refill run'
\echo ''
SELECT format('Two zones `rl_zone_set(''bench_cron_a'' | ''bench_cron_b'', ''token_bucket'', 1, ''1 minute'', burst => %s, refill => ''cron'')`, their `refill_tick` set to 1 minute by `UPDATE ratelimit.zone` (no pg_cron job): a run adds rate × tick / period = 1 token to each bucket below capacity, so buckets that start at 0 tokens stay below capacity through every run, and every run refills the same %s buckets (checked: the count each run returns). Their state is written by one `INSERT INTO ratelimit.state … SELECT` (as superuser), key by key `''r1''` … `''r%s''`: zone A (`bench_cron_a`) holds all %s keys, %s full (tokens = capacity, `refill_pending` NULL, as a call or a refill leaves a full bucket: not in the partial index `state_refill_idx`) and one key in %s below capacity (0 tokens, `refill_pending` true); zone B (`bench_cron_b`) holds the same %s keys below capacity and nothing else, each row inserted right after A''s row of the same key, so that A''s and B''s refills update rows on the same heap pages; then VACUUM ANALYZE. At that point `ratelimit.state` holds %s rows in %s pages (every zone of the run so far), and the partial index %s entries (%s bytes; the cron zone of the calls above has its keys there too). Measured: (A) `SELECT rl_cron_refill(''bench_cron_a'')`, (B) `SELECT rl_cron_refill(''bench_cron_b'')`, and (C) `SELECT bench.cron_refill_seqscan(''bench_cron_a'')`: `rl_cron_refill`''s body (same zone lookup, same `UPDATE … SET`) with `WHERE s.zone_id = z.zone_id AND s.tokens < cap` instead of `… AND s.refill_pending`, and `SET enable_indexscan = off, enable_bitmapscan = off, enable_indexonlyscan = off` on the function: without the partial index the UPDATE has no index leading with zone_id (the primary key is (key, zone_id, part, params)) and reads the whole table. Timed inside the server (clock_timestamp() around the SELECT + COMMIT, the procedure of section 1); VACUUM ratelimit.state before each run; A, B and C in turn in each repetition; median of %s repetitions after one unrecorded round. Plans: the UPDATE''s scan node and buffers, by auto_explain (`log_analyze`, `log_buffers`, `log_nested_statements`) on the sixth run in a session of its own, after the repetitions.',
              :'cron_cap', c.zone_b_keys, c.zone_a_keys, c.zone_a_keys, c.zone_a_keys - c.zone_a_pending,
              c.zone_a_keys / c.zone_a_pending, c.zone_b_keys, c.state_rows, c.state_pages, c.idx_entries, c.idx_bytes,
              (SELECT max(reps) FROM cron_ref))
  FROM bench.cron_setup c;
\echo ''
SELECT bench.md_head('llrrrrrrll', 'run', 'zone', 'keys in the zone', 'refilled per run', 'ms (median)', 'min–max ms',
                     'µs per refilled bucket', '× B', 'the UPDATE''s scan (auto_explain)', 'its buffers');
SELECT bench.md_row(CASE r.variant WHEN 'A' THEN 'A: `rl_cron_refill`'
                                   WHEN 'B' THEN 'B: `rl_cron_refill`'
                                   ELSE 'C: same UPDATE, no partial index' END,
                    CASE r.variant WHEN 'B' THEN '`bench_cron_b`' ELSE '`bench_cron_a`' END,
                    (CASE r.variant WHEN 'B' THEN c.zone_b_keys ELSE c.zone_a_keys END)::text,
                    r.refilled::text, to_char(r.ms, 'FM9990.00'), to_char(r.ms_min, 'FM9990.00') || '–' || to_char(r.ms_max, 'FM9990.00'),
              to_char(r.ms * 1e3 / r.refilled, 'FM9990.00'), to_char(r.ms / b.ms, 'FM9990.00'),
              coalesce('`' || p.scan || '`', '—'), coalesce(p.buffers, '—'))
  FROM cron_ref r CROSS JOIN bench.cron_setup c
 CROSS JOIN (SELECT ms FROM cron_ref WHERE variant = 'B') b
  LEFT JOIN bench.cron_plan p USING (variant)
 ORDER BY r.variant;
\echo ''
SELECT format('**A / B = %s×** (%s ms vs %s ms): the zone''s %s full buckets change the time of a refill of its %s buckets below capacity by %s %%. Without the partial index (C) the same refill reads all %s rows of `ratelimit.state` and takes %s ms, **%s× A**.',
              to_char(a.ms / b.ms, 'FM990.00'), to_char(a.ms, 'FM9990.00'), to_char(b.ms, 'FM9990.00'),
              to_char(s.zone_a_keys - s.zone_a_pending, 'FM999G999G999'), to_char(s.zone_a_pending, 'FM999G999G999'),
              to_char(100 * (a.ms / b.ms - 1), 'FMSG9990'),
              to_char(s.state_rows, 'FM999G999G999'), to_char(c.ms, 'FM9990.00'), to_char(c.ms / a.ms, 'FM9990.0'))
  FROM cron_ref a, cron_ref b, cron_ref c, bench.cron_setup s
 WHERE a.variant = 'A' AND b.variant = 'B' AND c.variant = 'C';
\echo ''
\endif

\if :trigger
\echo '## 9. Row trigger: a bulk insert for one key'
\echo ''
SELECT format('`rl_zone_set(''bench_trigger'', ''token_bucket'', 1000000000, ''1 second'')`; `bench.trigger_rows (user_id int, body text)` with `BEFORE INSERT … FOR EACH ROW EXECUTE FUNCTION rl_limit_trigger(''bench_trigger'', ''user_id'')`, and a twin table `bench.plain_rows` without it. Measured: `INSERT INTO bench.<table> SELECT 1, ''comment'' FROM generate_series(1, N)` (every row has the key 1; the zone never refuses, so each row takes a token), timed inside the server (clock_timestamp() around the statement + COMMIT), TRUNCATE after each run; median of %s interleaved repetitions after one unrecorded round. Linear time: the same µs per row at both sizes (the transaction cache makes each call on the one key O(1)).',
              (SELECT max(rep) FROM bench.timings WHERE phase = 'trigger'));
\echo ''
SELECT bench.md_head('rrrrrrr', 'rows', 'with the trigger: ms (median)', 'min–max', 'µs/row', 'without: ms', 'µs/row',
                     'trigger cost per row, µs');
WITH t AS (
    SELECT split_part(variant, ':', 1) AS kind, split_part(variant, ':', 2)::int AS n,
           secs * 1000 AS ms, secs_min * 1000 AS lo, secs_max * 1000 AS hi
      FROM med WHERE phase = 'trigger')
SELECT bench.md_row(to_char(a.n, 'FM999G999G999'), to_char(a.ms, 'FM99990.0'),
                    to_char(a.lo, 'FM99990.0') || '–' || to_char(a.hi, 'FM99990.0'),
                    to_char(1000 * a.ms / a.n, 'FM990.00'), to_char(b.ms, 'FM99990.0'),
                    to_char(1000 * b.ms / b.n, 'FM990.00'), to_char(1000 * (a.ms - b.ms) / a.n, 'FM990.00'))
  FROM t a JOIN t b ON b.kind = 'plain' AND b.n = a.n
 WHERE a.kind = 'trigger' ORDER BY a.n;
\echo ''
-- The largest size over the smallest.
SELECT format('µs per row with the trigger, %s rows over %s rows: **%s×** (1.00× is linear).',
              to_char(big.calls, 'FM999G999G999'), to_char(small.calls, 'FM999G999G999'),
              to_char((big.secs / big.calls) / (small.secs / small.calls), 'FM990.00'))
  FROM (SELECT * FROM med WHERE phase = 'trigger' AND variant LIKE 'trigger:%' ORDER BY calls DESC LIMIT 1) big,
       (SELECT * FROM med WHERE phase = 'trigger' AND variant LIKE 'trigger:%' ORDER BY calls LIMIT 1) small;
\echo ''
\endif

\echo '## Targets'
\echo ''
SELECT bench.md_head('lll', 'target', 'measured', 'result');
SELECT bench.target('`rl_token_bucket` in-backend ≥ 3× the PL/pgSQL bucket',
                    format('%s× (direct, %s µs vs %s µs)',
                           to_char(p.us / d.us, 'FM990.00'), to_char(d.us, 'FM990.00'), to_char(p.us, 'FM990.00')),
                    p.us / d.us >= 3)
  FROM inb d, inb p WHERE d.variant = 'direct' AND p.variant = 'plpgsql';
SELECT bench.target(format('`rl_token_bucket` pgbench ≥ 1.3× the upsert bucket, %s', bench.clients(b.clients)),
                    format('%s× (direct, %s vs %s tps; %s)',
                           to_char(b.tps / u.tps, 'FM990.00'), to_char(b.tps, 'FM9999999990'), to_char(u.tps, 'FM9999999990'),
                           r.summary),
                    b.tps / u.tps >= 1.3)
  FROM pgb b JOIN pgb u ON u.clients = b.clients AND u.variant = 'upsert'
  JOIN pgb_round_ratio r ON r.section = 2 AND r.clients = b.clients
 WHERE b.variant = 'direct' ORDER BY b.clients;
SELECT bench.target('`rl_token_bucket` pgbench ≥ 1.3× the upsert bucket, 1 client, server and pgbench on one CPU',
                    format('%s× (direct, %s vs %s tps; %s)',
                           to_char(b.tps / u.tps, 'FM990.00'), to_char(b.tps, 'FM9999999990'), to_char(u.tps, 'FM9999999990'),
                           r.summary),
                    b.tps / u.tps >= 1.3)
  FROM pgb_one_cpu b, pgb_one_cpu u, pgb_round_ratio r
 WHERE b.variant = 'direct' AND u.variant = 'upsert' AND r.section = 20;
SELECT bench.target(format('shmem store: `rl_token_bucket` pgbench ≥ 0.85× `SELECT 1`, %s', bench.clients(b.clients)),
                    format('%s× (%s vs %s tps)',
                           to_char(b.tps / s.tps, 'FM990.00'), to_char(b.tps, 'FM9999999990'), to_char(s.tps, 'FM9999999990')),
                    b.tps / s.tps >= 0.85)
  FROM pgb b JOIN pgb s ON s.clients = b.clients AND s.variant = 'select1'
 WHERE b.variant = 'shmem' ORDER BY b.clients;
SELECT bench.md_row('shmem store: `rl_token_bucket` pgbench ≥ a Redis + Lua token bucket at the same client count',
                    'measured by `bash test/bench/redis.sh`: see [REDIS.md](REDIS.md)', '—');
SELECT bench.target('shmem store: `rl_token_bucket` in-backend ≥ 0.5× a `hashtext(i::text)` loop (over the same keys: `rl_token_bucket(i::text, …)`)',
                    format('%s× (%s µs vs %s µs); over the keys `''k'' || i`: %s× the `hashtext(''k'' || i)` loop (%s µs vs %s µs), %s× the `hashtext(i::text)` loop',
                           to_char(h.us / m.us, 'FM990.00'), to_char(m.us, 'FM990.00'), to_char(h.us, 'FM990.00'),
                           to_char(hk.us / mk.us, 'FM990.00'), to_char(mk.us, 'FM990.00'), to_char(hk.us, 'FM990.00'),
                           to_char(h.us / mk.us, 'FM990.00')),
                    h.us / m.us >= 0.5)
  FROM inb m, inb h, inb mk, inb hk
 WHERE m.variant = 'shmem_i' AND h.variant = 'hashtext' AND mk.variant = 'shmem' AND hk.variant = 'hashtext_k';
SELECT bench.target(format('100k calls on one key ≤ 3× 100k calls over 10k keys, %s',
                           CASE h.variant WHEN 'shmem' THEN 'shmem store' ELSE 'table_access=' || h.variant END),
                    format('%s× (%s s vs %s s)',
                           to_char(h.ratio, 'FM990.00'), to_char(h.hot_s, 'FM990.000'), to_char(h.spread_s, 'FM990.000')),
                    h.ratio <= 3)
  FROM hot h JOIN label l USING (variant) ORDER BY l.n;
\echo ''
\echo 'Not targets, for reference (what each store costs, from sections 1 and 2):'
\echo ''
SELECT format('- in-backend, `rl_token_bucket` µs/call: table store %s (direct), %s (spi); shmem store %s; the `hashtext(i::text)` loop %s, the `hashtext(''k'' || i)` loop %s. The table store (direct) runs at %s× the `hashtext(i::text)` loop; the shmem store is %s× as fast as the table store (direct).',
              to_char(d.us, 'FM990.00'), to_char(s.us, 'FM990.00'), to_char(m.us, 'FM990.00'),
              to_char(h.us, 'FM990.00'), to_char(k.us, 'FM990.00'),
              to_char(h.us / d.us, 'FM990.00'), to_char(d.us / m.us, 'FM990.00'))
  FROM inb d, inb s, inb m, inb h, inb k
 WHERE d.variant = 'direct' AND s.variant = 'spi' AND m.variant = 'shmem'
   AND h.variant = 'hashtext' AND k.variant = 'hashtext_k';
SELECT format('- pgbench, %s: `SELECT 1` %s tps; the same script without a bucket (`hashtext(''k'' || :k)`) %s tps (%s× `SELECT 1`); `rl_token_bucket` on the shmem store %s tps (%s× `SELECT 1`, %s× the script without a bucket), on the table store %s tps with direct (%s×, %s×), %s with spi (%s×, %s×).',
              bench.clients(b.clients), to_char(b.tps, 'FM9999999990'),
              to_char(h.tps, 'FM9999999990'), to_char(h.tps / b.tps, 'FM990.00'),
              to_char(m.tps, 'FM9999999990'), to_char(m.tps / b.tps, 'FM990.00'), to_char(m.tps / h.tps, 'FM990.00'),
              to_char(d.tps, 'FM9999999990'), to_char(d.tps / b.tps, 'FM990.00'), to_char(d.tps / h.tps, 'FM990.00'),
              to_char(s.tps, 'FM9999999990'), to_char(s.tps / b.tps, 'FM990.00'), to_char(s.tps / h.tps, 'FM990.00'))
  FROM pgb b
  JOIN pgb h ON h.clients = b.clients AND h.variant = 'hashtext_k'
  JOIN pgb m ON m.clients = b.clients AND m.variant = 'shmem'
  JOIN pgb d ON d.clients = b.clients AND d.variant = 'direct'
  JOIN pgb s ON s.clients = b.clients AND s.variant = 'spi'
 WHERE b.variant = 'select1' ORDER BY b.clients;
\echo ''
\echo 'Not targets, for reference (the portable SPI path):'
\echo ''
SELECT format('- in-backend, table_access=spi: %s× the PL/pgSQL bucket, %s× the upsert bucket.',
              to_char(p.us / s.us, 'FM990.00'), to_char(u.us / s.us, 'FM990.00'))
  FROM inb s, inb p, inb u WHERE s.variant = 'spi' AND p.variant = 'plpgsql' AND u.variant = 'upsert';
SELECT format('- pgbench, table_access=spi, %s: %s× the upsert bucket.',
              bench.clients(b.clients), to_char(b.tps / u.tps, 'FM990.00'))
  FROM pgb b JOIN pgb u ON u.clients = b.clients AND u.variant = 'upsert'
 WHERE b.variant = 'spi' ORDER BY b.clients;
\if :zones
\echo ''
\echo 'Not a speed target, stated as measured (the exact sliding window is O(1) amortised per call, not a count over a log table: it stays flat as the limit grows):'
\echo ''
SELECT format('- `rl_sliding_window` µs/call at limit 10,000 / at limit 10, windows 90 %% full: %s× (%s µs vs %s µs; the log table: %s×).',
              to_char(b.ours_us / a.ours_us, 'FM990.00'), to_char(b.ours_us, 'FM9990.00'), to_char(a.ours_us, 'FM9990.00'),
              to_char(b.log_us / a.log_us, 'FM99990.0'))
  FROM swr a, swr b WHERE a.lim = 10 AND b.lim = 10000;
\endif
\if :cron
\echo ''
\echo 'Not a speed target, stated as measured (pg_cron refill mode: one refill run costs about the same however many full buckets the zone holds):'
\echo ''
SELECT format('- one `rl_cron_refill` run over %s buckets below capacity, in a zone that also holds %s full buckets (A) / alone (B): %s× (%s ms vs %s ms); the same UPDATE without the partial index (a sequential scan of the %s rows of `ratelimit.state`): %s ms, %s× A.',
              to_char(s.zone_a_pending, 'FM999G999G999'), to_char(s.zone_a_keys - s.zone_a_pending, 'FM999G999G999'),
              to_char(a.ms / b.ms, 'FM990.00'), to_char(a.ms, 'FM9990.00'), to_char(b.ms, 'FM9990.00'),
              to_char(s.state_rows, 'FM999G999G999'), to_char(c.ms, 'FM9990.00'), to_char(c.ms / a.ms, 'FM9990.0'))
  FROM cron_ref a, cron_ref b, cron_ref c, bench.cron_setup s
 WHERE a.variant = 'A' AND b.variant = 'B' AND c.variant = 'C';
SELECT format('- `rl_limit` on a cron zone, in-backend: %s µs/call, against %s µs on the inline zone and %s µs for `rl_token_bucket` (its calls/s: %s× and %s× theirs).',
              to_char(c.us, 'FM990.00'), to_char(i.us, 'FM990.00'), to_char(d.us, 'FM990.00'),
              to_char(i.us / c.us, 'FM990.00'), to_char(d.us / c.us, 'FM990.00'))
  FROM cron_inb c, cron_inb i, cron_inb d WHERE c.variant = 'cron' AND i.variant = 'inline' AND d.variant = 'direct';
SELECT format('- `rl_limit` on a cron zone, pgbench, %s: %s tps, %s× the inline zone (%s tps), %s× `rl_token_bucket` (%s tps).',
              bench.clients(c.clients), to_char(c.tps, 'FM9999999990'),
              to_char(c.tps / i.tps, 'FM990.00'), to_char(i.tps, 'FM9999999990'),
              to_char(c.tps / d.tps, 'FM990.00'), to_char(d.tps, 'FM9999999990'))
  FROM cron_pgb c JOIN cron_pgb i ON i.clients = c.clients AND i.variant = 'inline'
  JOIN cron_pgb d ON d.clients = c.clients AND d.variant = 'direct'
 WHERE c.variant = 'cron' ORDER BY c.clients;
\endif
