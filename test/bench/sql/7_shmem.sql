-- Section 7: the shared memory the shmem store asked for, per key of
-- ratelimit.shmem_max_keys.  Then, after every other measurement (it evicts
-- the measured keys): keys that do not recover for an hour (zone
-- bench_fill, 1 per hour), offered one by one, shmem_max_keys of them, with
-- shmem_full_policy = deny, so that an admitted call is a kept key: how
-- many were kept when a new key first found no room, and how many in all.

SET client_min_messages = warning;
SELECT rl_zone_set('bench_fill', 'token_bucket', 1, interval '1 hour', store => 'shmem');
SET ratelimit.shmem_full_policy = deny;
INSERT INTO bench.shmem
SELECT current_setting('ratelimit.shmem_max_keys')::bigint, a.size, a.allocated_size,
       f.first_full, f.offered, f.full_calls
  FROM (SELECT sum(size)::bigint AS size, sum(allocated_size)::bigint AS allocated_size
          FROM pg_shmem_allocations WHERE name LIKE 'ratelimit%') a,
       (SELECT coalesce(min(i) FILTER (WHERE NOT allowed) - 1, count(*)) AS first_full,
               count(*) AS offered, count(*) FILTER (WHERE NOT allowed) AS full_calls
          FROM (SELECT i, (rl_limit('bench_fill', 'f' || i, 1)).allowed
                  FROM generate_series(1, current_setting('ratelimit.shmem_max_keys')::bigint) i
                OFFSET 0) s) f;
RESET ratelimit.shmem_full_policy;

-- Every refusal was a key without room (rl_counters.full), and nothing else.
SELECT bench.fail_if('bench_fill', format('%s calls refused, rl_counters says refused %s, full %s',
                                          s.full_calls, c.refused, c.full))
  FROM bench.shmem s LEFT JOIN rl_counters c ON c.zone = 'bench_fill'
 WHERE c.full IS DISTINCT FROM s.full_calls OR c.refused IS DISTINCT FROM s.full_calls;
