-- The bench schema: the hand-written buckets (baselines.sql, shared with
-- redis.sh), the extension, the tables the sections record into, and the
-- procedures every section times its statements with.

\ir ../baselines.sql
CREATE EXTENSION ratelimit;

-- One row per timed statement (bench.measure); rep 0 is never recorded.
CREATE TABLE bench.timings (
    phase    text NOT NULL,
    variant  text NOT NULL,
    rep      int NOT NULL,
    calls    bigint NOT NULL,
    secs     float8 NOT NULL
);

-- One row per pgbench run (sections 2 and 8).
CREATE TABLE bench.pgbench (
    section  int NOT NULL,
    round    int NOT NULL,
    clients  int NOT NULL,
    variant  text NOT NULL,
    tps      float8 NOT NULL,   -- pgbench's, without initial connection time
    xacts    bigint NOT NULL
);

-- rl_counters (shared memory, both stores) before the measured phases.
CREATE TABLE bench.counters_before AS SELECT * FROM rl_counters WITH NO DATA;

-- Section 7.
CREATE TABLE bench.shmem (
    max_keys        bigint NOT NULL,   -- ratelimit.shmem_max_keys
    alloc_size      bigint NOT NULL,   -- sum(size) of pg_shmem_allocations 'ratelimit%'
    alloc_allocated bigint NOT NULL,   -- sum(allocated_size)
    first_full      bigint,            -- fill keys kept when a new one first found no room
    offered         bigint,            -- fill keys offered in all
    full_calls      bigint             -- of those, calls that found no room
);

-- What interleave.sql runs in each repetition, in the order of n: a timed
-- statement (bench.measure) when phase is set, else sql as it is (VACUUM,
-- TRUNCATE ...: what cannot run inside a procedure).  A section fills it,
-- then includes interleave.sql.
CREATE TABLE bench.steps (
    rep      int,               -- only in this repetition; NULL: in every one
    n        int NOT NULL,      -- order within a repetition
    phase    text,
    variant  text,
    access   text,              -- ratelimit.table_access; NULL: left as it is
    store    text,              -- ratelimit.default_store; NULL: table
    calls    bigint,            -- what the statement's count(...) must return
    sql      text NOT NULL
);

-- Times one statement returning count(...) inside the server, commit
-- included (rl_token_bucket writes back repeated keys before commit).
-- p_store: ratelimit.default_store for the statement (rl_token_bucket's
-- store; zones name their own), 'table' when NULL.  A count other than
-- p_calls fails the run: the measured statements count admitted calls only,
-- so a refusal cannot pass for a fast call.
CREATE PROCEDURE bench.measure(
    p_phase text, p_variant text, p_rep int, p_access text, p_calls bigint, p_sql text,
    p_store text DEFAULT NULL)
LANGUAGE plpgsql AS $fn$
DECLARE
    t0 timestamptz;
    t1 timestamptz;
    n  bigint;
BEGIN
    IF p_access IS NOT NULL THEN
        PERFORM set_config('ratelimit.table_access', p_access, false);
    END IF;
    PERFORM set_config('ratelimit.default_store', coalesce(p_store, 'table'), false);
    COMMIT;
    t0 := clock_timestamp();
    EXECUTE p_sql INTO n;
    COMMIT;
    t1 := clock_timestamp();
    IF n IS DISTINCT FROM p_calls THEN
        RAISE EXCEPTION '% %: counted % calls, expected %', p_phase, p_variant, n, p_calls;
    END IF;
    IF p_rep > 0 THEN
        INSERT INTO bench.timings VALUES (p_phase, p_variant, p_rep, p_calls, date_part('epoch', t1 - t0));
    END IF;
    COMMIT;
END
$fn$;

-- Fails the run with "what: problem" when problem is not NULL: the checks
-- of the sections are queries that return what went wrong, or NULL.
CREATE FUNCTION bench.fail_if(what text, problem text) RETURNS void
LANGUAGE plpgsql AS $fn$
BEGIN
    IF problem IS NOT NULL THEN
        RAISE EXCEPTION '%: %', what, problem;
    END IF;
END
$fn$;
