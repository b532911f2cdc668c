-- Section 8: records what 8_cron_plan.sql printed for run :variant (the
-- psql output in :log): the UPDATE's block, its first scan node (without
-- the cost estimate) and its first Buffers line, those of the Update node.
--
-- Variables: variant, log.

WITH block AS (
    -- The lines after "UPDATE ratelimit.state ...": on the "Query Text:" line
    -- itself, or on the next (rl_cron_refill's UPDATE is a dynamic statement
    -- that begins with a line break).
    SELECT l.line, l.n
      FROM regexp_split_to_table(:'log', E'\n') WITH ORDINALITY AS l(line, n)
     WHERE l.n > (SELECT min(n) FROM regexp_split_to_table(:'log', E'\n') WITH ORDINALITY AS q(line, n)
                   WHERE q.line ~ '(Query Text: |^ *)UPDATE ratelimit\.state')
), found AS (
    SELECT (SELECT regexp_replace(regexp_replace(line, '^ *(->  *)?', ''), '  *\(cost=[^)]*\)', '')
              FROM block WHERE line LIKE '%Scan%' ORDER BY n LIMIT 1) AS scan,
           (SELECT regexp_replace(line, '^ *Buffers: *', '')
              FROM block WHERE line LIKE '%Buffers:%' ORDER BY n LIMIT 1) AS buffers
)
INSERT INTO bench.cron_plan
SELECT :'variant', scan, NULLIF(buffers, '') FROM found WHERE scan <> '';

SELECT bench.fail_if('pg_cron refill mode', format('no plan found for %s in:%s%s', :'variant', E'\n', :'log'))
 WHERE NOT EXISTS (SELECT FROM bench.cron_plan WHERE variant = :'variant');
