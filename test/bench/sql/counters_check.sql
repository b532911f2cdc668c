-- After sections 1 to 4 (warm-up and pgbench included), against the
-- snapshot 1_in_backend.sql took before them: no call refused
-- (rl_token_bucket's decisions on both stores are counted under
-- '(rl_token_bucket)'), no shmem key evicted, no new shmem key without room.
-- A refusal is a call that did not write, and an evicted key one that was
-- created again: either would time something other than what the report
-- says.  Sections 5 and 6 use the table store only.
--
-- Variables: keys, reps, hot_reps, hot_calls, zone_algos, shmem_zone_algos.

SELECT bench.fail_if('refused, evicted or no-room calls while measuring (zone, allowed, refused, evicted, full)',
                     string_agg(concat_ws(' ', c.zone, c.allowed - coalesce(b.allowed, 0),
                                          c.refused - coalesce(b.refused, 0), c.evicted - coalesce(b.evicted, 0),
                                          c.full - coalesce(b.full, 0)), ', '))
  FROM rl_counters c LEFT JOIN bench.counters_before b USING (zone)
 WHERE c.refused > coalesce(b.refused, 0) OR c.evicted > coalesce(b.evicted, 0)
    OR c.full > coalesce(b.full, 0);

-- ... and the counters did count: every zone call of section 4 and its
-- warm-up exactly, and at least the in-backend and hot-key calls of
-- rl_token_bucket (pgbench's come on top): the warm-up ('k0' .. 'k:keys'
-- and the hot key, on both stores, then i::text on the shmem store), four
-- variants per repetition of section 1, three variants hot and spread per
-- repetition of section 3, rep 0 included.
SELECT (:keys + 1) + (:reps + 1) * :keys AS zone_calls,
       2 * (:keys + 2) + (:keys + 1) + (:reps + 1) * 4 * :keys + (:hot_reps + 1) * 3 * 2 * :hot_calls AS tb_calls,
       cardinality(string_to_array(:'zone_algos', ' ')) + cardinality(string_to_array(:'shmem_zone_algos', ' ')) AS zone_count
\gset
SELECT bench.fail_if('rl_counters did not count the measured calls (zone, allowed)',
                     string_agg(c.zone || ' ' || (c.allowed - coalesce(b.allowed, 0)), ', '))
  FROM rl_counters c LEFT JOIN bench.counters_before b USING (zone)
 WHERE CASE WHEN c.zone = '(rl_token_bucket)' THEN c.allowed - coalesce(b.allowed, 0) < :tb_calls
            WHEN c.zone LIKE 'bench\_%' THEN c.allowed - coalesce(b.allowed, 0) <> :zone_calls
            ELSE false END;
SELECT bench.fail_if('rl_counters did not count the measured calls',
                     format('%s zones counted, expected %s', count(*), :zone_count))
  FROM rl_counters WHERE zone LIKE 'bench\_%'
HAVING count(*) <> :zone_count;
