-- Section 9: rl_limit_trigger on a bulk INSERT ... SELECT whose rows all
-- carry one key, at each of :trigger_sizes rows, against the same INSERT
-- into a twin table without the trigger.  The zone never refuses (10^9 a
-- second), so every row is a call that takes a token; linear time means the
-- same time per row at every size.  The rows are deleted (TRUNCATE) after
-- each run, outside the timing.
--
-- Variables: reps, trigger_sizes (space-separated row counts).

SET client_min_messages = warning;
SELECT rl_zone_set('bench_trigger', 'token_bucket', 1000000000, '1 second');
CREATE TABLE bench.trigger_rows (user_id int NOT NULL, body text NOT NULL);
CREATE TABLE bench.plain_rows (LIKE bench.trigger_rows);
CREATE TRIGGER trigger_rows_limit BEFORE INSERT ON bench.trigger_rows
    FOR EACH ROW EXECUTE FUNCTION rl_limit_trigger('bench_trigger', 'user_id');

-- Each repetition, size after size: with the trigger, then without.
TRUNCATE bench.steps;
INSERT INTO bench.steps (n, phase, variant, access, calls, sql)
SELECT 10 * s.n + 2 * t.n - 1, 'trigger', t.t || ':' || s.rows, 'direct', s.rows::bigint,
       format('WITH i AS (INSERT INTO bench.%s_rows SELECT 1, ''comment'' FROM generate_series(1, %s) RETURNING 1) SELECT count(*) FROM i',
              t.t, s.rows)
  FROM unnest(string_to_array(:'trigger_sizes', ' ')) WITH ORDINALITY AS s(rows, n),
       (VALUES (1, 'trigger'), (2, 'plain')) AS t(n, t);
INSERT INTO bench.steps (n, sql)
SELECT 10 * s.n + 2 * t.n, format('TRUNCATE bench.%s_rows', t.t)
  FROM generate_series(1, cardinality(string_to_array(:'trigger_sizes', ' '))) AS s(n),
       (VALUES (1, 'trigger'), (2, 'plain')) AS t(n, t);
\set repeat :reps
\ir interleave.sql
