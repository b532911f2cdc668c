-- Statements on the state table in a transaction that made calls.  From its
-- second call on a key a transaction decides on a copy of the key's row
-- that it holds locked, and writes the copy back at commit
-- (src/store/table_cache.c).  Another statement of the same transaction
-- that reads or changes ratelimit.state first gets the copies written back,
-- and a later call reads the row again (src/store/state_statements.c): a
-- deleted row is a new bucket, an updated row is what the call decides on.
-- Without that, COMMIT failed ("could not read block", "attempted to update
-- invisible tuple") or calls went on with the old copy.  The same on both
-- paths (ratelimit.table_access).  On a fixed test clock: nothing refills.
SET ratelimit.now_override = '2026-03-01 00:00:00+00';
-- The test needs the state table to itself (1 and 6 look at its places).
TRUNCATE ratelimit.state;
CREATE FUNCTION pg_temp.tokens(k text) RETURNS bigint LANGUAGE sql AS $$
    SELECT tokens FROM ratelimit.state WHERE key = k AND zone_id = 0
$$;

-- 1. TRUNCATE after two calls: the next call starts a new bucket (59, not
-- 57), and COMMIT keeps it.  A call on another key first takes the new
-- table's first place, where the truncated row was: the key's remembered
-- place (row hints) holds another key's row now.
BEGIN;
SELECT rl_token_bucket('stw:t', 1, 60) AS first, rl_token_bucket('stw:t', 1, 60) AS second;
TRUNCATE ratelimit.state;
SELECT rl_token_bucket('stw:other', 1, 60) AS other;        -- 59
SELECT rl_token_bucket('stw:t', 1, 60) AS after_truncate;   -- 59
COMMIT;
SELECT pg_temp.tokens('stw:t') AS t, pg_temp.tokens('stw:other') AS other;

-- Two calls, then TRUNCATE and no call: COMMIT succeeds, the table is empty.
BEGIN;
SELECT rl_token_bucket('stw:t', 1, 60) AS first, rl_token_bucket('stw:t', 1, 60) AS second;
TRUNCATE ratelimit.state;
COMMIT;
SELECT count(*) AS rows_after_truncate FROM ratelimit.state;

-- 2. DELETE of one key's row: that key starts a new bucket, the other
-- goes on from its copy.
BEGIN;
SELECT rl_token_bucket('stw:d1', 1, 60) AS d1, rl_token_bucket('stw:d1', 1, 60) AS d1_again,
       rl_token_bucket('stw:d2', 1, 60) AS d2, rl_token_bucket('stw:d2', 1, 60) AS d2_again;
DELETE FROM ratelimit.state WHERE key = 'stw:d1';
SELECT rl_token_bucket('stw:d1', 1, 60) AS d1_after_delete,  -- 59
       rl_token_bucket('stw:d2', 1, 60) AS d2_after_delete;  -- 57
COMMIT;
SELECT pg_temp.tokens('stw:d1') AS d1, pg_temp.tokens('stw:d2') AS d2;

-- 3. UPDATE of a key's row: the next call decides on the updated row.
BEGIN;
SELECT rl_token_bucket('stw:u', 1, 60) AS first, rl_token_bucket('stw:u', 1, 60) AS second;
UPDATE ratelimit.state SET tokens = 5 WHERE key = 'stw:u';
SELECT rl_token_bucket('stw:u', 1, 60) AS after_update;     -- 4
COMMIT;
SELECT pg_temp.tokens('stw:u') AS u;
-- ... and without a call after it, the update is what COMMIT keeps.
BEGIN;
SELECT rl_token_bucket('stw:u', 1, 60) AS first, rl_token_bucket('stw:u', 1, 60) AS second;
UPDATE ratelimit.state SET tokens = tokens + 50 WHERE key = 'stw:u';
COMMIT;
SELECT pg_temp.tokens('stw:u') AS u;                        -- 52

-- 4. A query reading ratelimit.state sees what the calls decided so far:
-- a CTE, a subquery, a function's query.
BEGIN;
SELECT rl_token_bucket('stw:q', 1, 60) AS first, rl_token_bucket('stw:q', 1, 60) AS second;
WITH s AS (SELECT tokens FROM ratelimit.state WHERE key = 'stw:q') SELECT tokens AS cte FROM s;
SELECT rl_token_bucket('stw:q', 1, 60) AS third;
SELECT (SELECT tokens FROM ratelimit.state WHERE key = 'stw:q') AS subquery,
       pg_temp.tokens('stw:q') AS in_function;
COMMIT;

-- 5. ROLLBACK TO SAVEPOINT over a TRUNCATE or a DELETE gives back the
-- bucket as it was at the savepoint.
BEGIN;
SELECT rl_token_bucket('stw:s', 1, 60) AS first, rl_token_bucket('stw:s', 1, 60) AS second;
SAVEPOINT before_truncate;
TRUNCATE ratelimit.state;
SELECT rl_token_bucket('stw:s', 1, 60) AS after_truncate;   -- 59
ROLLBACK TO SAVEPOINT before_truncate;
SELECT rl_token_bucket('stw:s', 1, 60) AS after_rollback_to;  -- 57
SAVEPOINT before_delete;
DELETE FROM ratelimit.state WHERE key = 'stw:s';
SELECT rl_token_bucket('stw:s', 1, 60) AS after_delete;     -- 59
ROLLBACK TO SAVEPOINT before_delete;
SELECT rl_token_bucket('stw:s', 1, 60) AS after_rollback_to;  -- 56
COMMIT;
SELECT pg_temp.tokens('stw:s') AS s;

-- 6. Other statements: a DELETE in a PL/pgSQL function (a query through
-- SPI that is not the extension's), a prepared DELETE, LOCK TABLE, COPY
-- of the table itself, and CLUSTER, which moves every row.
CREATE FUNCTION pg_temp.forget(k text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM ratelimit.state WHERE key = k;
END $$;
BEGIN;
SELECT rl_token_bucket('stw:f', 1, 60) AS first, rl_token_bucket('stw:f', 1, 60) AS second;
SELECT pg_temp.forget('stw:f');
SELECT rl_token_bucket('stw:f', 1, 60) AS after_function_delete;  -- 59
PREPARE stw_forget AS DELETE FROM ratelimit.state WHERE key = $1;
SELECT rl_token_bucket('stw:f', 1, 60) AS again;
EXECUTE stw_forget('stw:f');
SELECT rl_token_bucket('stw:f', 1, 60) AS after_execute;    -- 59
DEALLOCATE stw_forget;
COMMIT;
SELECT pg_temp.tokens('stw:f') AS f;

BEGIN;
TRUNCATE ratelimit.state;
SELECT rl_token_bucket('stw:c', 1, 60) AS first, rl_token_bucket('stw:c', 1, 60) AS second;
LOCK TABLE ratelimit.state IN SHARE ROW EXCLUSIVE MODE;
SELECT rl_token_bucket('stw:c', 1, 60) AS after_lock;       -- 57
COPY ratelimit.state (key, tokens) TO STDOUT;
CLUSTER ratelimit.state USING state_pkey;
SELECT rl_token_bucket('stw:c', 1, 60) AS after_cluster;    -- 56
ALTER TABLE ratelimit.state SET WITHOUT CLUSTER;
COMMIT;
SELECT pg_temp.tokens('stw:c') AS c;

-- 7. The calls' own statements write nothing early: two calls on each of
-- two keys insert two rows and update none (on the SPI path, a call's
-- statements on the table do not write the other key's copy back).  The
-- counts include earlier transactions' until the backend reports them:
-- compared within the transaction.
BEGIN;
SELECT pg_stat_get_xact_tuples_inserted('ratelimit.state'::regclass) AS inserted_before,
       pg_stat_get_xact_tuples_updated('ratelimit.state'::regclass) AS updated_before \gset
SELECT rl_token_bucket('stw:n1', 1, 60), rl_token_bucket('stw:n1', 1, 60);
SELECT rl_token_bucket('stw:n2', 1, 60), rl_token_bucket('stw:n2', 1, 60);
SELECT pg_stat_get_xact_tuples_inserted('ratelimit.state'::regclass) - :inserted_before AS inserted,
       pg_stat_get_xact_tuples_updated('ratelimit.state'::regclass) - :updated_before AS updated;
COMMIT;
SELECT pg_temp.tokens('stw:n1') AS n1, pg_temp.tokens('stw:n2') AS n2;

-- 8. After such a statement, a read-only transaction's rl_peek reads its
-- key's row again without locking it (SELECT ... FOR UPDATE is refused
-- there: 25006 on the SPI path).
SELECT rl_zone_set('stw_zone', 'token_bucket', 10, '1 minute');
BEGIN;
SELECT (rl_limit('stw_zone', 'k')).remaining AS first, (rl_limit('stw_zone', 'k')).remaining AS second;
SELECT tokens FROM ratelimit.state s JOIN ratelimit.zone z USING (zone_id) WHERE z.zone = 'stw_zone';
SET LOCAL transaction_read_only = on;
SELECT (rl_peek('stw_zone', 'k')).remaining AS peek_read_only;  -- 7 (what a call would leave)
COMMIT;
SELECT rl_zone_drop('stw_zone');

-- Transactions that never touch the table themselves decide as before.
BEGIN;
SELECT rl_token_bucket('stw:plain', 1, 60), rl_token_bucket('stw:plain', 1, 60);
SAVEPOINT a;
SELECT rl_token_bucket('stw:plain', 1, 60);
ROLLBACK TO SAVEPOINT a;
SELECT rl_token_bucket('stw:plain', 1, 60) AS after_rollback_to;  -- 57
COMMIT;
SELECT pg_temp.tokens('stw:plain') AS plain;
DELETE FROM ratelimit.state WHERE key LIKE 'stw:%';
RESET ratelimit.now_override;
