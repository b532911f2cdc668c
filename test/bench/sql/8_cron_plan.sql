-- Section 8: the plan of run :variant's UPDATE (A, B or C of
-- 8_cron_refill.sql), by auto_explain, in a session of its own: the sixth
-- run, once PL/pgSQL may have moved to a generic plan, as in the timed
-- repetitions.  The plan comes as NOTICEs (stderr); run.sh hands them to
-- 8_cron_plan_parse.sql.
--
-- Variables: variant.

SELECT CASE :'variant'
           WHEN 'A' THEN 'SELECT rl_cron_refill(''bench_cron_a'')'
           WHEN 'B' THEN 'SELECT rl_cron_refill(''bench_cron_b'')'
           WHEN 'C' THEN 'SELECT bench.cron_refill_seqscan(''bench_cron_a'')'
       END AS refill
\gset
SELECT :'refill' FROM generate_series(1, 5)
\gexec
LOAD 'auto_explain';
SET auto_explain.log_min_duration = 0;
SET auto_explain.log_nested_statements = on;
SET auto_explain.log_analyze = on;
SET auto_explain.log_buffers = on;
SET auto_explain.log_timing = off;
SET auto_explain.log_level = notice;
SET client_min_messages = notice;
:refill;
