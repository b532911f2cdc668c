\echo Use "ALTER EXTENSION ratelimit UPDATE TO '0.3.0'" to load this file. \quit

-- 0.3.0: the shmem store (needs ratelimit in shared_preload_libraries).

ALTER TABLE ratelimit.zone DROP CONSTRAINT zone_store_check;
ALTER TABLE ratelimit.zone ADD CONSTRAINT zone_store_check CHECK (store IN ('table', 'shmem'));

-- Counters in shared memory, per zone: no row that every call updates.
CREATE FUNCTION ratelimit.shmem_counters(
    OUT zone_id int, OUT allowed bigint, OUT refused bigint, OUT evicted bigint, OUT full bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'rl_shmem_counters'
LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION ratelimit.shmem_counters() FROM PUBLIC;

-- Decisions per zone since the server started (both stores; empty unless
-- ratelimit is in shared_preload_libraries).  evicted: recovered keys the
-- shmem store forgot to make room; full: new keys it found no room for.
-- A view checks EXECUTE on the functions it calls against its reader: the
-- reader runs this SECURITY DEFINER function, never shmem_counters() itself.
CREATE FUNCTION ratelimit.counters(
    OUT zone text, OUT allowed bigint, OUT refused bigint, OUT evicted bigint, OUT full bigint)
RETURNS SETOF record
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT coalesce(z.zone, CASE c.zone_id WHEN 0 THEN '(rl_token_bucket)'
                                           WHEN -1 THEN '(rl_gcra)'
                                           ELSE '(dropped zone ' || c.zone_id || ')' END),
           c.allowed, c.refused, c.evicted, c.full
    FROM ratelimit.shmem_counters() c
    LEFT JOIN ratelimit.zone z ON z.zone_id OPERATOR(pg_catalog.=) c.zone_id
$fn$;
REVOKE ALL ON FUNCTION ratelimit.counters() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ratelimit.counters() TO PUBLIC;

CREATE VIEW rl_counters AS SELECT * FROM ratelimit.counters();
GRANT SELECT ON rl_counters TO PUBLIC;
COMMENT ON VIEW rl_counters IS
    'Allowed and refused calls per zone since the server started, and the shmem store''s evictions and full refusals';
