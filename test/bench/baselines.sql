-- The hand-written token buckets that the benchmarks measure rl_token_bucket
-- against (SPEC §5), shared by test/bench/run.sh and test/bench/redis.sh so
-- that both measure the same baselines.  Loaded with psql into a database
-- without a "bench" schema.
--
-- Both take the arguments of rl_token_bucket (id, rate per second, window
-- in seconds, cost) and return what it returns: the whole tokens left, or
-- -1 when refused.  They use the layout users hand-write, with the same key,
-- storage and fill as ratelimit.state (text COLLATE "C" key, float8 tokens,
-- timestamptz, UNLOGGED, fillfactor 50), so that the comparison is about the
-- access path, not about the layout.

CREATE SCHEMA bench;

-- What users hand-write: UPDATE ... RETURNING, then INSERT when missing.
CREATE UNLOGGED TABLE bench.plpgsql_bucket (
    id          text COLLATE "C" NOT NULL PRIMARY KEY,
    tokens      float8 NOT NULL,
    updated_at  timestamptz NOT NULL
) WITH (fillfactor = 50);

CREATE FUNCTION bench.plpgsql_bucket(
    p_id text, p_rate float8 DEFAULT 2, p_window float8 DEFAULT 60, p_cost int DEFAULT 1)
RETURNS bigint LANGUAGE plpgsql AS $fn$
DECLARE
    v_now    timestamptz := clock_timestamp();
    v_cap    float8 := p_rate * p_window;
    v_tokens float8;
BEGIN
    LOOP
        -- Admitted: take p_cost from the refilled bucket (fractions kept).
        UPDATE bench.plpgsql_bucket
           SET tokens = least(v_cap, tokens + p_rate * greatest(0, date_part('epoch', v_now - updated_at))) - p_cost,
               updated_at = greatest(updated_at, v_now)
         WHERE id = p_id
           AND least(v_cap, tokens + p_rate * greatest(0, date_part('epoch', v_now - updated_at))) >= p_cost
        RETURNING tokens INTO v_tokens;
        IF FOUND THEN
            RETURN floor(v_tokens)::bigint;
        END IF;
        -- Refused (the row exists): take nothing, leave the refill alone.
        PERFORM 1 FROM bench.plpgsql_bucket WHERE id = p_id;
        IF FOUND THEN
            RETURN -1;
        END IF;
        IF p_cost > v_cap THEN
            RETURN -1;
        END IF;
        -- New key: a full bucket.  A concurrent insert sends us round again.
        INSERT INTO bench.plpgsql_bucket (id, tokens, updated_at)
        VALUES (p_id, v_cap - p_cost, v_now)
        ON CONFLICT (id) DO NOTHING;
        IF FOUND THEN
            RETURN floor(v_cap - p_cost)::bigint;
        END IF;
    END LOOP;
END
$fn$;

-- One statement: INSERT ... ON CONFLICT (id) DO UPDATE ... RETURNING.
CREATE UNLOGGED TABLE bench.upsert_bucket (
    id          text COLLATE "C" NOT NULL PRIMARY KEY,
    tokens      float8 NOT NULL,
    updated_at  timestamptz NOT NULL,
    allowed     boolean NOT NULL
) WITH (fillfactor = 50);

-- A refused call stores the refilled bucket as of now without taking
-- anything, which is the same bucket as leaving the row alone (the refill is
-- continuous and capped), and keeps the statement small: the executor builds
-- every expression of the statement again on each execution.  "allowed"
-- records the decision for RETURNING, which cannot see the old row.
--
-- Under pgbench the statement is sent as it is, not through this function:
-- a SQL function that writes is not inlined, and would be planned again at
-- every call.  bench.upsert_bucket_sql (below) gives the statement from this
-- body, so that the body is the one place where it is written.
CREATE FUNCTION bench.upsert_bucket(
    p_id text, p_rate float8 DEFAULT 2, p_window float8 DEFAULT 60, p_cost int DEFAULT 1)
RETURNS bigint LANGUAGE sql AS $fn$
INSERT INTO bench.upsert_bucket AS b (id, tokens, updated_at, allowed)
VALUES ($1,
        CASE WHEN $2 * $3 >= $4 THEN $2 * $3 - $4 ELSE $2 * $3 END,
        clock_timestamp(),
        $2 * $3 >= $4)
ON CONFLICT (id) DO UPDATE SET
    tokens = least($2 * $3, b.tokens + $2 * greatest(0, date_part('epoch', excluded.updated_at - b.updated_at))) - CASE WHEN least($2 * $3, b.tokens + $2 * greatest(0, date_part('epoch', excluded.updated_at - b.updated_at))) >= $4 THEN $4 ELSE 0 END,
    updated_at = greatest(b.updated_at, excluded.updated_at),
    allowed = least($2 * $3, b.tokens + $2 * greatest(0, date_part('epoch', excluded.updated_at - b.updated_at))) >= $4
RETURNING CASE WHEN b.allowed THEN floor(b.tokens)::bigint ELSE -1 END;
$fn$;

-- bench.upsert_bucket's statement with its parameters replaced by SQL text
-- (e.g. '''k'' || :k', '1000000', '60', '1' for a pgbench script), without
-- the final semicolon.
CREATE FUNCTION bench.upsert_bucket_sql(p_id text, p_rate text, p_window text, p_cost text)
RETURNS text LANGUAGE sql STABLE AS $fn$
SELECT replace(replace(replace(replace(
           rtrim(btrim(prosrc, E' \n'), ';'),
           '$1', p_id), '$2', p_rate), '$3', p_window), '$4', p_cost)
  FROM pg_proc
 WHERE oid = 'bench.upsert_bucket(text, float8, float8, int)'::regprocedure;
$fn$;
