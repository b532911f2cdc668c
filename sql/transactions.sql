-- Consumption is transactional: rollback and savepoints give tokens back.
SET ratelimit.now_override = '2026-01-01 00:00:00+00';

BEGIN;
SELECT rl_token_bucket('tx', 1, 10, 4);
ROLLBACK;
SELECT rl_token_bucket('tx', 1, 10) AS after_rollback;

BEGIN;
SELECT rl_token_bucket('tx', 1, 10);
SAVEPOINT a;
SELECT rl_token_bucket('tx', 1, 10), rl_token_bucket('tx-new', 1, 10);
ROLLBACK TO SAVEPOINT a;
SELECT rl_token_bucket('tx', 1, 10) AS after_rollback_to_a,
       rl_token_bucket('tx-new', 1, 10) AS new_key_after_rollback_to_a;
SAVEPOINT b;
SELECT rl_token_bucket('tx', 1, 10);
SAVEPOINT c;
SELECT rl_token_bucket('tx', 1, 10);
ROLLBACK TO SAVEPOINT c;
RELEASE SAVEPOINT b;
SELECT rl_token_bucket('tx', 1, 10) AS after_release_b;
COMMIT;
SELECT id, tokens FROM ratelimit.token_bucket WHERE id LIKE 'tx%' ORDER BY id;

-- An error inside a PL/pgSQL exception block rolls that block's calls back.
DO $$
DECLARE
    before bigint := rl_token_bucket('plpgsql', 1, 10);
BEGIN
    BEGIN
        PERFORM rl_token_bucket('plpgsql', 1, 10, 5);
        RAISE EXCEPTION 'boom';
    EXCEPTION WHEN raise_exception THEN
        NULL;
    END;
    RAISE NOTICE 'before % after %', before, rl_token_bucket('plpgsql', 1, 10);
END $$;

-- Many calls on one key in one statement: exactly the capacity is admitted.
SELECT count(*) FILTER (WHERE r >= 0) AS admitted, count(*) FILTER (WHERE r < 0) AS refused
FROM (SELECT rl_token_bucket('bulk', 1000, 1) AS r FROM generate_series(1, 100000)) s;
SELECT tokens FROM ratelimit.token_bucket WHERE id = 'bulk';

-- A row trigger rate-limits inserts per user, in bulk.
CREATE TABLE comments (user_id int, body text);
CREATE FUNCTION comments_limit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF rl_token_bucket('comments:' || NEW.user_id, 5.0 / 60, 60) < 0 THEN
        RETURN NULL;            -- silently drop rows over the limit
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER comments_limit BEFORE INSERT ON comments
    FOR EACH ROW EXECUTE FUNCTION comments_limit();
INSERT INTO comments SELECT 1 + i % 2, 'hello' FROM generate_series(1, 50000) i;
SELECT user_id, count(*) FROM comments GROUP BY user_id ORDER BY user_id;

-- Two-phase commit writes the state at PREPARE.
BEGIN;
SELECT rl_token_bucket('2pc', 1, 10, 3);
PREPARE TRANSACTION 'rl_2pc';
COMMIT PREPARED 'rl_2pc';
SELECT rl_token_bucket('2pc', 1, 10, 0) AS after_commit_prepared;

DROP TABLE comments;
DROP FUNCTION comments_limit();
