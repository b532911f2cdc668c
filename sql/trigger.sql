-- rl_limit_trigger() (0.5.0): a BEFORE INSERT OR UPDATE ... FOR EACH ROW
-- trigger that makes every row one rl_limit() call on a zone, keyed by a
-- column's text form, weighed by an optional integer cost column.  A row
-- over the limit raises RL429.  On the fixed test clock; the comments give
-- the numbers each result must show, worked out from the algorithms'
-- definitions (the expected output was checked against them).
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
SET ratelimit.now_override = '2026-01-01 00:00:00+00';

-- Runs a statement; 'ok: N rows', or the error's SQLSTATE, message and
-- detail.  The statement runs in a subtransaction, rolled back on error,
-- just as a failed statement is.
CREATE FUNCTION pg_temp.try(sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    n bigint;
    state text;
    msg text;
    detail text;
BEGIN
    EXECUTE sql;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN 'ok: ' || n || ' rows';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                            detail = PG_EXCEPTION_DETAIL;
    RETURN state || ': ' || msg || coalesce(' [' || nullif(detail, '') || ']', '');
END $$;

-- What a key has left now: a call of cost 0 takes nothing.
CREATE FUNCTION pg_temp.left_in(zone text, key text) RETURNS bigint LANGUAGE sql AS $$
    SELECT remaining FROM rl_peek(zone, key, 0)
$$;

-------------------------------------------------------------------------
-- 1. The README's example, "at most 5 comments per user per minute", as a
-- zone and the C trigger instead of a PL/pgSQL function: a token bucket of
-- 5, one token back every 12 s.
-------------------------------------------------------------------------
CREATE TABLE comments (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id    int NOT NULL,
    body       text NOT NULL
);
SELECT rl_zone_set('trg_comments', 'token_bucket', 5, '1 minute');
CREATE TRIGGER comments_limit BEFORE INSERT ON comments
    FOR EACH ROW EXECUTE FUNCTION rl_limit_trigger('trg_comments', 'user_id');

-- User 42 posts five comments at one instant: all pass.
INSERT INTO comments (user_id, body) VALUES (42, 'first');
INSERT INTO comments (user_id, body) VALUES (42, 'second'), (42, 'third');
INSERT INTO comments (user_id, body) SELECT 42, 'more ' || g FROM generate_series(1, 2) g;
-- The sixth is refused: RL429, one token comes back after 12 s, 0 of 5 left.
INSERT INTO comments (user_id, body) VALUES (42, 'sixth');
SELECT pg_temp.try($$INSERT INTO comments (user_id, body) VALUES (42, 'sixth')$$);
-- The key is the column's text form: the zone's key '42' is empty.
SELECT allowed, remaining, retry_after, would_allow FROM rl_peek('trg_comments', '42');
-- The error names the table (schema and table fields of the error report).
DO $$
DECLARE
    state text;
    schema_name text;
    table_name text;
BEGIN
    INSERT INTO comments (user_id, body) VALUES (42, 'sixth');
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, schema_name = SCHEMA_NAME,
                            table_name = TABLE_NAME;
    RAISE NOTICE 'SQLSTATE %, table %.%', state, schema_name, table_name;
END $$;
-- Other users are not affected.
INSERT INTO comments (user_id, body) VALUES (7, 'hello');
-- PL/pgSQL catches RL429 by its SQLSTATE.
DO $$
BEGIN
    INSERT INTO comments (user_id, body) VALUES (42, 'caught');
EXCEPTION WHEN SQLSTATE 'RL429' THEN
    RAISE NOTICE 'caught %: %', SQLSTATE, SQLERRM;
END $$;
-- 12 s later one token is back: one comment passes, the next waits 12 s.
SET ratelimit.now_override = '2026-01-01 00:00:12+00';
SELECT pg_temp.try($$INSERT INTO comments (user_id, body) VALUES (42, 'after 12 s')$$);
SELECT pg_temp.try($$INSERT INTO comments (user_id, body) VALUES (42, 'too soon')$$);
-- At 15 s: 0.25 token, the rest (0.75 token) takes 9 s.
SET ratelimit.now_override = '2026-01-01 00:00:15+00';
SELECT pg_temp.try($$INSERT INTO comments (user_id, body) VALUES (42, 'at 15 s')$$);
-- At 40 s: 28 s since 12 s = 2 1/3 tokens: two pass, the third waits for
-- the missing 2/3 token, 8 s.  One statement of three rows fails whole.
SET ratelimit.now_override = '2026-01-01 00:00:40+00';
SELECT pg_temp.try($$INSERT INTO comments (user_id, body) VALUES (42, 'a'), (42, 'b'), (42, 'c')$$);
SELECT pg_temp.left_in('trg_comments', '42') AS left_after_failed_statement;
SELECT pg_temp.try($$INSERT INTO comments (user_id, body) VALUES (42, 'a'), (42, 'b')$$);
SELECT pg_temp.try($$INSERT INTO comments (user_id, body) VALUES (42, 'c')$$);
-- 5 + 1 + 2 comments for user 42, 1 for user 7.
SELECT user_id, count(*) FROM comments GROUP BY user_id ORDER BY user_id;
-- COPY goes through the trigger too: user 8 copies 6 rows, the sixth is
-- refused and the COPY keeps none of them.
COPY comments (user_id, body) FROM stdin;
8	c1
8	c2
8	c3
8	c4
8	c5
8	c6
\.
SELECT count(*) AS user_8_comments, pg_temp.left_in('trg_comments', '8') AS user_8_left
FROM comments WHERE user_id = 8;

-------------------------------------------------------------------------
-- 2. Misuse: 39P01 (trigger protocol violated) for everything but a
-- BEFORE INSERT OR UPDATE row trigger with 2 or 3 arguments; nothing is
-- inserted and nothing is taken.
-------------------------------------------------------------------------
SELECT rl_zone_set('trg_misuse', 'fixed_window', 3, '1 hour');
CREATE TABLE misuse (id int, k text, c int, n numeric, t text, s smallint, b bigint);
CREATE VIEW misuse_view AS SELECT * FROM misuse;
-- AFTER INSERT
CREATE TRIGGER m AFTER INSERT ON misuse FOR EACH ROW EXECUTE FUNCTION rl_limit_trigger('trg_misuse', 'k');
SELECT pg_temp.try($$INSERT INTO misuse (k) VALUES ('a')$$);
DROP TRIGGER m ON misuse;
-- AFTER UPDATE
INSERT INTO misuse (id, k) VALUES (1, 'a');
CREATE TRIGGER m AFTER UPDATE ON misuse FOR EACH ROW EXECUTE FUNCTION rl_limit_trigger('trg_misuse', 'k');
SELECT pg_temp.try($$UPDATE misuse SET c = 1$$);
DROP TRIGGER m ON misuse;
-- statement level
CREATE TRIGGER m BEFORE INSERT ON misuse FOR EACH STATEMENT EXECUTE FUNCTION rl_limit_trigger('trg_misuse', 'k');
SELECT pg_temp.try($$INSERT INTO misuse (k) VALUES ('a')$$);
DROP TRIGGER m ON misuse;
-- BEFORE DELETE (a row trigger on INSERT OR DELETE: the INSERT works)
CREATE TRIGGER m BEFORE INSERT OR DELETE ON misuse FOR EACH ROW EXECUTE FUNCTION rl_limit_trigger('trg_misuse', 'k');
SELECT pg_temp.try($$INSERT INTO misuse (k) VALUES ('a')$$);
SELECT pg_temp.try($$DELETE FROM misuse$$);
DROP TRIGGER m ON misuse;
-- INSTEAD OF on a view
CREATE TRIGGER m INSTEAD OF INSERT ON misuse_view FOR EACH ROW EXECUTE FUNCTION rl_limit_trigger('trg_misuse', 'k');
SELECT pg_temp.try($$INSERT INTO misuse_view (k) VALUES ('a')$$);
DROP TRIGGER m ON misuse_view;
-- 0, 1 and 4 arguments
CREATE TRIGGER m BEFORE INSERT ON misuse FOR EACH ROW EXECUTE FUNCTION rl_limit_trigger();
SELECT pg_temp.try($$INSERT INTO misuse (k) VALUES ('a')$$);
DROP TRIGGER m ON misuse;
CREATE TRIGGER m BEFORE INSERT ON misuse FOR EACH ROW EXECUTE FUNCTION rl_limit_trigger('trg_misuse');
SELECT pg_temp.try($$INSERT INTO misuse (k) VALUES ('a')$$);
DROP TRIGGER m ON misuse;
CREATE TRIGGER m BEFORE INSERT ON misuse FOR EACH ROW EXECUTE FUNCTION rl_limit_trigger('trg_misuse', 'k', 'c', 'c');
SELECT pg_temp.try($$INSERT INTO misuse (k) VALUES ('a')$$);
DROP TRIGGER m ON misuse;
-- Called as a function, not as a trigger
SELECT pg_temp.try($$SELECT rl_limit_trigger()$$);

-- Unknown key or cost column: 42703 (names are matched exactly, as
-- written in the trigger's arguments; a dropped column is gone).
CREATE TRIGGER m BEFORE INSERT ON misuse FOR EACH ROW EXECUTE FUNCTION rl_limit_trigger('trg_misuse', 'nope');
SELECT pg_temp.try($$INSERT INTO misuse (k) VALUES ('a')$$);
DROP TRIGGER m ON misuse;
CREATE TRIGGER m BEFORE INSERT ON misuse FOR EACH ROW EXECUTE FUNCTION rl_limit_trigger('trg_misuse', 'K');
SELECT pg_temp.try($$INSERT INTO misuse (k) VALUES ('a')$$);
DROP TRIGGER m ON misuse;
CREATE TRIGGER m BEFORE INSERT ON misuse FOR EACH ROW EXECUTE FUNCTION rl_limit_trigger('trg_misuse', 'k', 'nope');
SELECT pg_temp.try($$INSERT INTO misuse (k, c) VALUES ('a', 1)$$);
DROP TRIGGER m ON misuse;
CREATE TABLE misuse_drop (k text, gone text);
CREATE TRIGGER m BEFORE INSERT ON misuse_drop FOR EACH ROW EXECUTE FUNCTION rl_limit_trigger('trg_misuse', 'gone');
ALTER TABLE misuse_drop DROP COLUMN gone;
SELECT pg_temp.try($$INSERT INTO misuse_drop (k) VALUES ('a')$$);
DROP TABLE misuse_drop;

-- A cost column of another type than smallint, integer or bigint: 42804.
CREATE TRIGGER m BEFORE INSERT ON misuse FOR EACH ROW EXECUTE FUNCTION rl_limit_trigger('trg_misuse', 'k', 'n');
SELECT pg_temp.try($$INSERT INTO misuse (k, n) VALUES ('a', 1)$$);
DROP TRIGGER m ON misuse;
CREATE TRIGGER m BEFORE INSERT ON misuse FOR EACH ROW EXECUTE FUNCTION rl_limit_trigger('trg_misuse', 'k', 't');
SELECT pg_temp.try($$INSERT INTO misuse (k, t) VALUES ('a', '1')$$);
DROP TRIGGER m ON misuse;

-- NULL key or cost: 22004.
CREATE TRIGGER m BEFORE INSERT ON misuse FOR EACH ROW EXECUTE FUNCTION rl_limit_trigger('trg_misuse', 'k', 'c');
SELECT pg_temp.try($$INSERT INTO misuse (k, c) VALUES (NULL, 1)$$);
SELECT pg_temp.try($$INSERT INTO misuse (k, c) VALUES ('a', NULL)$$);
-- Cost above the capacity (3) or negative: 22023.
SELECT pg_temp.try($$INSERT INTO misuse (k, c) VALUES ('a', 4)$$);
SELECT pg_temp.try($$INSERT INTO misuse (k, c) VALUES ('a', -1)$$);
-- Empty key: 22023; a key over 1024 bytes: 22001; 1024 bytes pass.
SELECT pg_temp.try($$INSERT INTO misuse (k, c) VALUES ('', 1)$$);
SELECT pg_temp.try($$INSERT INTO misuse (k, c) VALUES (repeat('x', 1025), 1)$$);
SELECT pg_temp.try($$INSERT INTO misuse (k, c) VALUES (repeat('é', 513), 1)$$);
SELECT pg_temp.try($$INSERT INTO misuse (k, c) VALUES (repeat('x', 1024), 1)$$);
DROP TRIGGER m ON misuse;
-- Unknown zone: 42704, also when the zone is dropped after the trigger was made.
CREATE TRIGGER m BEFORE INSERT ON misuse FOR EACH ROW EXECUTE FUNCTION rl_limit_trigger('trg_nosuch', 'k');
SELECT pg_temp.try($$INSERT INTO misuse (k) VALUES ('a')$$);
DROP TRIGGER m ON misuse;
SELECT rl_zone_set('trg_dropped', 'token_bucket', 1, '1 hour');
CREATE TRIGGER m BEFORE INSERT ON misuse FOR EACH ROW EXECUTE FUNCTION rl_limit_trigger('trg_dropped', 'k');
SELECT pg_temp.try($$INSERT INTO misuse (k) VALUES ('a')$$);
SELECT rl_zone_drop('trg_dropped');
SELECT pg_temp.try($$INSERT INTO misuse (k) VALUES ('a')$$);
DROP TRIGGER m ON misuse;
-- What the misuses left: the row inserted before the AFTER UPDATE case
-- (c still NULL: the failed UPDATE was undone), the INSERT that the INSERT
-- OR DELETE trigger let through, the row of trg_dropped and the 1024-byte
-- key.  In trg_misuse, key 'a' has 2 of 3 left: only the INSERT OR DELETE
-- trigger's row took a token; the 1024-byte key took its 1.
SELECT id, length(k) AS key_bytes, c FROM misuse ORDER BY length(k), id;
SELECT pg_temp.left_in('trg_misuse', 'a') AS a_left, pg_temp.left_in('trg_misuse', repeat('x', 1024)) AS long_left;

-------------------------------------------------------------------------
-- 3. Bulk: one INSERT ... SELECT of 10 000 rows for one key into a zone of
-- capacity 10 000 (refilled 10 000 per hour: one token per 0.36 s) passes
-- whole; one more row is refused.
-------------------------------------------------------------------------
SELECT rl_zone_set('trg_bulk', 'token_bucket', 10000, '1 hour');
CREATE TABLE events (id bigint GENERATED ALWAYS AS IDENTITY, account text NOT NULL, n int);
CREATE TRIGGER events_limit BEFORE INSERT ON events
    FOR EACH ROW EXECUTE FUNCTION rl_limit_trigger('trg_bulk', 'account');
INSERT INTO events (account, n) SELECT 'acme', g FROM generate_series(1, 10000) g;
SELECT count(*) FROM events;
SELECT pg_temp.try($$INSERT INTO events (account, n) VALUES ('acme', 10001)$$);
SELECT pg_temp.left_in('trg_bulk', 'acme') AS acme_left;
-- The hot key is one row of state.
SELECT count(*) AS state_rows FROM ratelimit.state s JOIN ratelimit.zone z USING (zone_id)
WHERE z.zone = 'trg_bulk';
-- 10 001 rows for another key: the last row is refused, the statement's
-- 10 000 rows are rolled back and their tokens given back.
SELECT pg_temp.try($$INSERT INTO events (account, n) SELECT 'other', g FROM generate_series(1, 10001) g$$);
SELECT count(*) FILTER (WHERE account = 'other') AS other_rows,
       pg_temp.left_in('trg_bulk', 'other') AS other_left
FROM events;

-------------------------------------------------------------------------
-- 4. UPDATE: each updated row is a call, keyed by the new row.  A fixed
-- window of 3 edits per hour per author.
-------------------------------------------------------------------------
SELECT rl_zone_set('trg_edits', 'fixed_window', 3, '1 hour');
CREATE TABLE posts (id int PRIMARY KEY, author text NOT NULL, title text);
CREATE TRIGGER posts_limit BEFORE INSERT OR UPDATE ON posts
    FOR EACH ROW EXECUTE FUNCTION rl_limit_trigger('trg_edits', 'author');
INSERT INTO posts VALUES (1, 'ann', 'one'), (2, 'ann', 'two');   -- ann: 2 of 3
UPDATE posts SET title = 'one!' WHERE id = 1;                    -- ann: 3 of 3
UPDATE posts SET author = 'bob' WHERE id = 2;                    -- the new row's key: bob 1 of 3
SELECT pg_temp.left_in('trg_edits', 'ann') AS ann_left, pg_temp.left_in('trg_edits', 'bob') AS bob_left;
-- ann's next edit is refused until her window (from 00:00:40) ends: 3600 s.
SELECT pg_temp.try($$UPDATE posts SET title = 'one!!' WHERE id = 1$$);
-- An UPDATE of both rows: bob's row passes, ann's fails, bob's token is
-- given back with the statement.
SELECT pg_temp.try($$UPDATE posts SET title = upper(title)$$);
SELECT pg_temp.left_in('trg_edits', 'bob') AS bob_left;
SELECT * FROM posts ORDER BY id;
-- An update that changes nothing is still a row the trigger sees.
SELECT pg_temp.try($$UPDATE posts SET title = title WHERE id = 2$$);
SELECT pg_temp.left_in('trg_edits', 'bob') AS bob_left;

-------------------------------------------------------------------------
-- 5. A cost column: smallint, integer and bigint columns weigh each row.
-- Three tables share one zone (capacity 100, 100 per hour: one token per
-- 36 s) and one key.
-------------------------------------------------------------------------
SELECT rl_zone_set('trg_quota', 'token_bucket', 100, '1 hour');
CREATE TABLE up2 (account text, kb smallint);
CREATE TABLE up4 (account text, kb integer);
CREATE TABLE up8 (account text, kb bigint);
CREATE TRIGGER up2_limit BEFORE INSERT ON up2 FOR EACH ROW EXECUTE FUNCTION rl_limit_trigger('trg_quota', 'account', 'kb');
CREATE TRIGGER up4_limit BEFORE INSERT ON up4 FOR EACH ROW EXECUTE FUNCTION rl_limit_trigger('trg_quota', 'account', 'kb');
CREATE TRIGGER up8_limit BEFORE INSERT ON up8 FOR EACH ROW EXECUTE FUNCTION rl_limit_trigger('trg_quota', 'account', 'kb');
SELECT pg_temp.try($$INSERT INTO up2 VALUES ('acct', 30)$$), pg_temp.left_in('trg_quota', 'acct');   -- 70
SELECT pg_temp.try($$INSERT INTO up4 VALUES ('acct', 50)$$), pg_temp.left_in('trg_quota', 'acct');   -- 20
SELECT pg_temp.try($$INSERT INTO up8 VALUES ('acct', 0)$$), pg_temp.left_in('trg_quota', 'acct');    -- 20: cost 0 takes nothing
-- 21 when 20 are left: refused, 1 token short = 36 s.
SELECT pg_temp.try($$INSERT INTO up8 VALUES ('acct', 21)$$), pg_temp.left_in('trg_quota', 'acct');   -- 20
SELECT pg_temp.try($$INSERT INTO up8 VALUES ('acct', 20)$$), pg_temp.left_in('trg_quota', 'acct');   -- 0
-- A bigint cost far above the capacity, a negative smallint: 22023.
SELECT pg_temp.try($$INSERT INTO up8 VALUES ('acct', 5000000000)$$);
SELECT pg_temp.try($$INSERT INTO up2 VALUES ('acct', -1)$$);
-- Another account, rows of 40 in one statement: the third is refused
-- (20 left, 20 short: 720 s) and the statement keeps none.
SELECT pg_temp.try($$INSERT INTO up4 SELECT 'acct2', 40 FROM generate_series(1, 3)$$), pg_temp.left_in('trg_quota', 'acct2');
SELECT (SELECT count(*) FROM up2) AS up2_rows, (SELECT count(*) FROM up4) AS up4_rows,
       (SELECT count(*) FROM up8) AS up8_rows;

-------------------------------------------------------------------------
-- 6. Rollback gives the tokens back (table store): a rolled-back
-- transaction, a savepoint, an exception block.
-------------------------------------------------------------------------
BEGIN;
INSERT INTO comments (user_id, body) SELECT 99, 'x' FROM generate_series(1, 3);
SELECT pg_temp.left_in('trg_comments', '99') AS inside;        -- 2
ROLLBACK;
SELECT pg_temp.left_in('trg_comments', '99') AS after_rollback;  -- 5
BEGIN;
INSERT INTO comments (user_id, body) VALUES (99, 'kept 1'), (99, 'kept 2');
SAVEPOINT s;
INSERT INTO comments (user_id, body) VALUES (99, 'undone 1'), (99, 'undone 2');
SELECT pg_temp.left_in('trg_comments', '99') AS before_rollback_to;  -- 1
ROLLBACK TO SAVEPOINT s;
INSERT INTO comments (user_id, body) VALUES (99, 'kept 3');
COMMIT;
SELECT pg_temp.left_in('trg_comments', '99') AS after_commit,        -- 2
       (SELECT string_agg(body, ', ' ORDER BY id) FROM comments WHERE user_id = 99) AS bodies;
DO $$
BEGIN
    INSERT INTO comments (user_id, body) VALUES (99, 'undone 3');
    RAISE EXCEPTION 'boom';
EXCEPTION WHEN raise_exception THEN
    RAISE NOTICE 'left after the block: %', pg_temp.left_in('trg_comments', '99');  -- 2
END $$;
-- The shmem store is not transactional: a rollback keeps what was taken.
SELECT rl_zone_set('trg_shmem', 'token_bucket', 5, '1 minute', store => 'shmem');
CREATE TABLE shm (k text);
CREATE TRIGGER shm_limit BEFORE INSERT ON shm FOR EACH ROW EXECUTE FUNCTION rl_limit_trigger('trg_shmem', 'k');
BEGIN;
INSERT INTO shm SELECT 'trg:shm' FROM generate_series(1, 3);
ROLLBACK;
SELECT count(*) AS shm_rows, pg_temp.left_in('trg_shmem', 'trg:shm') AS shm_left FROM shm;   -- 0, 2

-------------------------------------------------------------------------
-- 7. A shadow zone: the trigger lets every row through; the zone's history
-- and rl_peek tell what the limit decided.  Turning shadow off enforces the
-- limit on the same state.
-------------------------------------------------------------------------
SELECT rl_zone_set('trg_shadow', 'token_bucket', 2, '1 minute', history => true, shadow => true);
CREATE TABLE drafts (author text, body text);
CREATE TRIGGER drafts_limit BEFORE INSERT OR UPDATE ON drafts
    FOR EACH ROW EXECUTE FUNCTION rl_limit_trigger('trg_shadow', 'author');
INSERT INTO drafts SELECT 'zoe', 'draft ' || g FROM generate_series(1, 5) g;
UPDATE drafts SET body = body || '!' WHERE body = 'draft 1';
SELECT count(*) AS drafts FROM drafts;
-- allowed, yet the limit would refuse: 0 left, a token every 30 s.
SELECT allowed, remaining, retry_after, would_allow FROM rl_peek('trg_shadow', 'zoe');
-- History records the real decisions: two admitted, four refused.
SELECT key, cost, allowed, count(*) FROM ratelimit.history WHERE zone = 'trg_shadow'
GROUP BY key, cost, allowed ORDER BY allowed DESC;
SELECT rl_zone_set('trg_shadow', 'token_bucket', 2, '1 minute', history => true, shadow => false);
SELECT pg_temp.try($$INSERT INTO drafts VALUES ('zoe', 'enforced')$$);
SELECT pg_temp.try($$INSERT INTO drafts VALUES ('yan', 'enforced')$$);

-------------------------------------------------------------------------
-- A cron zone (regress.cron_zone: see sql/setup.sql) that no job refills:
-- once its 2 tokens are taken, a row is refused and the message says no
-- refill is scheduled (no time can be promised); with a job (a 30-second
-- tick: a token per tick), the wait in whole ticks.
-------------------------------------------------------------------------
SELECT regress.cron_zone('trg_cron', 2, '1 minute');
CREATE TABLE jobs (queue text);
CREATE TRIGGER jobs_limit BEFORE INSERT ON jobs
    FOR EACH ROW EXECUTE FUNCTION rl_limit_trigger('trg_cron', 'queue');
SELECT pg_temp.try($$INSERT INTO jobs VALUES ('q'), ('q')$$);
SELECT pg_temp.try($$INSERT INTO jobs VALUES ('q')$$);
UPDATE ratelimit.zone SET refill_tick = '30 seconds' WHERE zone = 'trg_cron';
SELECT pg_temp.try($$INSERT INTO jobs VALUES ('q')$$);
SELECT count(*) AS jobs FROM jobs;

DROP TABLE comments, misuse, events, posts, up2, up4, up8, shm, drafts, jobs CASCADE;
SELECT count(rl_zone_drop(zone)) AS zones_dropped FROM rl_zones WHERE zone LIKE 'trg\_%';
