-- Sections 4 to 6: the zones, and the log table that section 5 measures
-- the exact sliding window against.
--
-- Variables: zone_algos, shmem_zone_algos (space-separated algorithms),
-- zone_rate, zone_period, sw_limits (space-separated), sw_period.

SET client_min_messages = warning;

-- Section 4: one zone per algorithm on each store, rates far above the
-- calls made, so that every call is admitted and writes.
SELECT rl_zone_set('bench_' || a, a, :zone_rate, interval :'zone_period')
  FROM unnest(string_to_array(:'zone_algos', ' ')) a;
SELECT rl_zone_set('bench_shmem_' || a, a, :zone_rate, interval :'zone_period', store => 'shmem')
  FROM unnest(string_to_array(:'shmem_zone_algos', ' ')) a;
-- Section 5: one exact sliding window per limit; sanity.sql's rule check.
SELECT rl_zone_set('sw_' || l, 'sliding_window', l::bigint, interval :'sw_period')
  FROM unnest(string_to_array(:'sw_limits', ' ')) l;
SELECT rl_zone_set('sw_sanity', 'sliding_window', 3, interval '1 second');

-- Section 5's baseline: the exact sliding window as a log table, one row
-- per admitted unit of cost, counted over the trailing period (an
-- index-only scan on (key, at) once vacuumed).  Same admission rule as
-- rl_sliding_window: admitted iff the cost admitted in the trailing period
-- plus cost stays within the limit.  The advisory lock on the key makes
-- count-then-insert atomic under READ COMMITTED, as rl_sliding_window is
-- (without it, concurrent calls on one key over-admit); expired rows of the
-- key are deleted on the way, so that the log stays bounded.
CREATE UNLOGGED TABLE bench.log_window (
    key  text COLLATE "C" NOT NULL,
    at   timestamptz NOT NULL
);
CREATE INDEX log_window_key_at ON bench.log_window (key, at);

CREATE FUNCTION bench.log_window(p_key text, p_limit bigint, p_period interval, p_cost int DEFAULT 1)
RETURNS boolean LANGUAGE plpgsql AS $fn$
DECLARE
    v_now  timestamptz;
    v_used bigint;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended(p_key, 0));
    v_now := clock_timestamp();
    DELETE FROM bench.log_window WHERE key = p_key AND at <= v_now - p_period;
    SELECT count(*) INTO v_used FROM bench.log_window WHERE key = p_key AND at > v_now - p_period;
    IF v_used + p_cost > p_limit THEN
        RETURN false;
    END IF;
    INSERT INTO bench.log_window (key, at) SELECT p_key, v_now FROM generate_series(1, p_cost);
    RETURN true;
END
$fn$;

-- Section 5: keys measured per statement, and how they were filled.
CREATE TABLE bench.sw_setup (
    lim      bigint NOT NULL,
    prefill  bigint NOT NULL,   -- admissions per key before the first repetition
    keys     int NOT NULL,      -- keys per statement (one call each)
    sets     int NOT NULL       -- key sets taken in turn by the repetitions
);

-- Section 6.
CREATE TABLE bench.sizes (
    what          text NOT NULL,     -- 'algorithm', 'sliding_window' or 'log_table'
    variant       text NOT NULL,     -- algorithm, or spacing of the admissions
    lim           bigint,            -- admissions held per key (full window)
    keys          bigint NOT NULL,
    rows          bigint NOT NULL,   -- rows of those keys
    tuple_bytes   bigint NOT NULL,   -- sum(pg_column_size(t.*)): heap tuples, header included
    entries_bytes bigint,            -- sum(octet_length(entries))
    heap_bytes    bigint NOT NULL,   -- main fork after VACUUM FULL
    index_bytes   bigint NOT NULL    -- primary key / (key, at) index after VACUUM FULL
);
