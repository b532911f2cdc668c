-- Section 6: state bytes per key, measured in ratelimit.state itself,
-- emptied (TRUNCATE) before each case so that it holds only the keys
-- measured; then VACUUM FULL (heap rewritten at the table's fillfactor 50,
-- index rebuilt).  Heap tuple bytes: sum(pg_column_size(t.*)) over the rows
-- (24-byte header and data; not the 4-byte line pointer).  On disk: main
-- fork + index.  Empties ratelimit.state: runs after every section that
-- needs its keys.
--
-- Variables: keys, zone_algos, sw_limits (space-separated), sw_keys_max,
-- size_period.

SET client_min_messages = warning;
SET ratelimit.table_access = direct;
SELECT now() - interval '4 hours' AS size_base \gset

-- One row of bench.sizes: what p_table holds (p_entries: its log column).
CREATE FUNCTION bench.record_size(p_what text, p_variant text, p_lim bigint, p_table regclass, p_entries text)
RETURNS void LANGUAGE plpgsql AS $fn$
BEGIN
    EXECUTE format('INSERT INTO bench.sizes
                    SELECT $1, $2, $3, count(DISTINCT key), count(*), sum(pg_column_size(t.*)),
                           sum(octet_length(%s)), pg_relation_size($4), pg_indexes_size($4)
                      FROM %s t', p_entries, p_table)
        USING p_what, p_variant, p_lim, p_table;
END
$fn$;

-- Every algorithm: :keys keys after one call each, in the zones of section 4.
SELECT 'TRUNCATE ratelimit.state',
       format('CALL bench.measure(''size'', %L, 0, NULL, %s, %L)', a, :keys,
              format('SELECT count((rl_limit(%L, ''k'' || i, 1)).allowed OR NULL) FROM generate_series(1, %s) i',
                     'bench_' || a, :keys)),
       'VACUUM FULL ratelimit.state',
       format('SELECT bench.record_size(''algorithm'', %L, NULL, ''ratelimit.state'', ''entries'')', a)
  FROM unnest(string_to_array(:'zone_algos', ' ')) WITH ORDINALITY AS z(a, n)
 ORDER BY n
\gexec

-- The exact sliding window with a full window: limit admissions one second
-- or one millisecond apart (then one more call, refused), then the log
-- table holding the same admissions (its size does not depend on their
-- spacing).
CREATE UNLOGGED TABLE bench.log_size (LIKE bench.log_window);
CREATE INDEX ON bench.log_size (key, at);
SELECT c.sql
  FROM unnest(string_to_array(:'sw_limits', ' ')::bigint[]) AS l(lim),
       LATERAL (SELECT least(200000 / l.lim, :sw_keys_max) AS keys) k,
       LATERAL (
    SELECT 0 AS step, format('SELECT rl_zone_set(%L, ''sliding_window'', %s, interval %L)',
                             'size_sw_' || l.lim, l.lim, :'size_period') AS sql
    UNION ALL
    SELECT 10 * s.n + c.step, c.sql
      FROM (VALUES (1, '1 second'), (2, '1 millisecond')) AS s(n, spacing),
           LATERAL (VALUES
        (1, 'TRUNCATE ratelimit.state'),
        (2, format('CALL bench.measure(''size'', %L, 0, NULL, %s, %L)', 'sw_' || l.lim, k.keys * l.lim,
                   format($$SELECT count((rl_sliding_window('size_sw_%1$s', key, 1)).allowed OR NULL) FROM (
    SELECT 'c%1$s-' || i AS key,
           set_config('ratelimit.now_override', (timestamptz %2$L + j * interval %3$L)::text, false) AS t
      FROM generate_series(1, %4$s) i, generate_series(0, %5$s) j OFFSET 0) s
 WHERE t IS NOT NULL$$, l.lim, :'size_base', s.spacing, k.keys, l.lim - 1))),
        (3, format('SELECT set_config(''ratelimit.now_override'', (timestamptz %L + %s * interval %L)::text, false)',
                   :'size_base', l.lim, s.spacing)),
        (4, format('CALL bench.measure(''size'', %L, 0, NULL, 0, %L)', 'sw_' || l.lim || ' full',
                   format($$SELECT count((rl_sliding_window('size_sw_%1$s', 'c%1$s-' || i, 1)).allowed OR NULL) FROM generate_series(1, %2$s) i$$,
                          l.lim, k.keys))),
        (5, 'RESET ratelimit.now_override'),
        (6, 'VACUUM FULL ratelimit.state'),
        (7, format('SELECT bench.record_size(''sliding_window'', %L, %s, ''ratelimit.state'', ''entries'')', s.spacing, l.lim))
      ) AS c(step, sql)
    UNION ALL
    SELECT 30 + c.step, c.sql
      FROM (VALUES
        (1, 'TRUNCATE bench.log_size'),
        (2, format($$INSERT INTO bench.log_size (key, at)
SELECT 'c%1$s-' || i, timestamptz %2$L + j * interval '1 second'
  FROM generate_series(1, %3$s) i, generate_series(0, %4$s) j$$, l.lim, :'size_base', k.keys, l.lim - 1)),
        (3, 'VACUUM FULL bench.log_size'),
        (4, format('SELECT bench.record_size(''log_table'', '''', %s, ''bench.log_size'', ''NULL::bytea'')', l.lim))
      ) AS c(step, sql)
  ) AS c
 ORDER BY l.lim, c.step
\gexec
