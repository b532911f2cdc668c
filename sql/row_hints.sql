-- Where a key's row was last found.  The direct path remembers, per key,
-- the place (TID) its row was last found at and looks there first, instead
-- of through the primary key (src/store/row_hint.c).  A remembered place
-- can go wrong in two ways, each made to happen here on purpose:
--   1. VACUUM frees the key's row and another key's new row takes the same
--      place: the call must decide on its own key (a new bucket), and leave
--      the other key's row alone;
--   2. VACUUM cuts the table's empty tail and the place is past its end:
--      the call must decide, not fail reading a block that is gone.
-- It remembers two places: where the row's chain of versions begins (what
-- the primary key points to) and the newest version it found or wrote,
-- which it reads first (1b: that place taken by another key's row).
-- Reading the newest version straight away skips the pruning of the
-- page's dead versions that following the chain does; one lookup in four
-- follows the chain all the same, and the table keeps its size under many
-- transactions on few keys (4).
-- On the SPI path nothing is remembered: the same calls give the same
-- results.  On a fixed test clock; the comments give each result.
SET ratelimit.now_override = '2026-05-01 00:00:00+00';
SELECT rl_zone_set('rh', 'token_bucket', 10, '1 minute');
-- The test needs the state table to itself: its rows' places are the point.
TRUNCATE ratelimit.state;
-- VACUUM frees a dead row only when no other transaction of this database
-- may still see it, and autovacuum's ANALYZE of any table here holds a
-- snapshot while it runs (PostgreSQL 18 in CI once kept both rows below).
-- So autovacuum leaves the state table alone during the test, and before
-- each VACUUM the test waits (at most a minute) until no other backend of
-- this database holds a snapshot or a transaction id.
ALTER TABLE ratelimit.state SET (autovacuum_enabled = off);
CREATE FUNCTION pg_temp.alone_in_database() RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    FOR attempt IN 1..600 LOOP
        PERFORM pg_stat_clear_snapshot();
        IF NOT EXISTS (SELECT FROM pg_stat_activity
                        WHERE datname = current_database() AND pid <> pg_backend_pid()
                          AND (backend_xmin IS NOT NULL OR backend_xid IS NOT NULL)) THEN
            RETURN true;
        END IF;
        PERFORM pg_sleep(0.1);
    END LOOP;
    RETURN false;
END
$$;

-------------------------------------------------------------------------
-- 1. Key a's row is deleted, VACUUM frees its place, key b's row takes it.
-------------------------------------------------------------------------
-- Three calls on a (three transactions): 9, 8, 7 remaining.
SELECT (rl_limit('rh', 'rh:a')).remaining;
SELECT (rl_limit('rh', 'rh:a')).remaining;
SELECT (rl_limit('rh', 'rh:a')).remaining;
DELETE FROM ratelimit.state WHERE key = 'rh:a';
SELECT pg_temp.alone_in_database() AS alone;
VACUUM ratelimit.state;
-- b's new row: 9 remaining, in the place where a's chain of versions began
-- (the first line of the first page: a's row was the table's first).
SELECT (rl_limit('rh', 'rh:b')).remaining;
SELECT ctid = '(0,1)' AS b_took_the_first_place FROM ratelimit.state WHERE key = 'rh:b';
-- a again: a new bucket (9), not b's row taken for a's.
SELECT (rl_limit('rh', 'rh:a')).remaining;
-- b kept its 9, and each key has exactly one row.
SELECT key, tokens FROM ratelimit.state WHERE zone_id = (SELECT zone_id FROM ratelimit.zone WHERE zone = 'rh')
 ORDER BY key;
-- b's next call: 8.
SELECT (rl_limit('rh', 'rh:b')).remaining;

-------------------------------------------------------------------------
-- 1b. The same when the newest version a backend remembers for key c is
-- also where c's chain begins (one call on c): b's row takes that place.
-------------------------------------------------------------------------
TRUNCATE ratelimit.state;
SELECT (rl_limit('rh', 'rh:c')).remaining;
DELETE FROM ratelimit.state WHERE key = 'rh:c';
SELECT pg_temp.alone_in_database() AS alone;
VACUUM ratelimit.state;
SELECT (rl_limit('rh', 'rh:b')).remaining;
SELECT ctid = '(0,1)' AS b_took_the_first_place FROM ratelimit.state WHERE key = 'rh:b';
-- c twice and b: c's new bucket (9, 8), b's own (8).
SELECT (rl_limit('rh', 'rh:c')).remaining;
SELECT (rl_limit('rh', 'rh:c')).remaining;
SELECT (rl_limit('rh', 'rh:b')).remaining;
SELECT key, tokens FROM ratelimit.state WHERE zone_id = (SELECT zone_id FROM ratelimit.zone WHERE zone = 'rh')
 ORDER BY key;

-------------------------------------------------------------------------
-- 2. The table shrinks under a remembered place.
-------------------------------------------------------------------------
TRUNCATE ratelimit.state;
-- 400 keys fill several pages; key 400's row is on the last one.
SELECT count(*) FILTER (WHERE (rl_limit('rh', 'rh:' || i)).allowed) AS admitted
  FROM generate_series(1, 400) i;
SELECT pg_relation_size('ratelimit.state') / current_setting('block_size')::int > 2 AS several_pages;
SELECT (rl_limit('rh', 'rh:400')).remaining;
DELETE FROM ratelimit.state;
SELECT pg_temp.alone_in_database() AS alone;
VACUUM ratelimit.state;
SELECT pg_relation_size('ratelimit.state') AS size_after_vacuum;
-- A new bucket: 9 remaining, no error.
SELECT (rl_limit('rh', 'rh:400')).remaining;
SELECT (rl_limit('rh', 'rh:400')).remaining;

-------------------------------------------------------------------------
-- 3. More keys than a backend remembers (100,000): the places are
-- forgotten and remembered again, and every call still decides right.
-------------------------------------------------------------------------
TRUNCATE ratelimit.state;
SELECT count(*) FILTER (WHERE (rl_limit('rh', 'rh:' || i)).allowed) AS admitted
  FROM generate_series(1, 100001) i;
-- The first key and the last: 8 each (their second call).
SELECT (rl_limit('rh', 'rh:1')).remaining AS first, (rl_limit('rh', 'rh:100001')).remaining AS last;
SELECT count(*) AS rows FROM ratelimit.state;
TRUNCATE ratelimit.state;

-------------------------------------------------------------------------
-- 4. 10,000 transactions of one call over 20 keys, every call admitted and
-- written: each leaves a dead version of its key's row behind.  Pruning
-- (one lookup in four) keeps the rows' pages from filling up with them;
-- without it the rows would move out to new pages, some 100 of them.
-------------------------------------------------------------------------
SELECT rl_zone_set('rh_many', 'token_bucket', 1000000, '1 second');
SELECT count(*) FILTER (WHERE (rl_limit('rh_many', 'rh:' || i)).allowed) AS admitted
  FROM generate_series(1, 20) i;
SELECT pg_relation_size('ratelimit.state') / current_setting('block_size')::int AS pages_before;
CREATE PROCEDURE pg_temp.one_call_a_transaction(calls int) LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1..calls LOOP
        IF NOT (rl_limit('rh_many', 'rh:' || (i % 20 + 1))).allowed THEN
            RAISE EXCEPTION 'call % refused', i;
        END IF;
        COMMIT;
    END LOOP;
END
$$;
SELECT pg_temp.alone_in_database() AS alone;
CALL pg_temp.one_call_a_transaction(10000);
-- A few pages at most (a snapshot held elsewhere for a moment delays some
-- pruning): not the hundred that no pruning gives.
SELECT pg_relation_size('ratelimit.state') / current_setting('block_size')::int < 8 AS pages_kept;
SELECT sum(1000000 - tokens) AS taken FROM ratelimit.state
 WHERE zone_id = (SELECT zone_id FROM ratelimit.zone WHERE zone = 'rh_many');

-------------------------------------------------------------------------
-- 5. What the places are for: a call on a key whose place this backend
-- remembers reads no index.  20 calls on the keys of 4, in one
-- transaction, start no scan of the primary key on the direct path (the
-- SPI path looks every key up through it: not checked there).
-------------------------------------------------------------------------
-- The backend's scan counts are compared within one transaction block,
-- where they are not flushed (and so not reset) between statements.
BEGIN;
SELECT pg_stat_get_xact_numscans('ratelimit.state_pkey'::regclass) AS scans_before \gset
SELECT count(*) FILTER (WHERE (rl_limit('rh_many', 'rh:' || i)).allowed) AS admitted
  FROM generate_series(1, 20) i;
SELECT current_setting('ratelimit.table_access') = 'spi'
       OR pg_stat_get_xact_numscans('ratelimit.state_pkey'::regclass) = :scans_before
       AS no_index_scan;
COMMIT;
SELECT rl_zone_drop('rh_many');
TRUNCATE ratelimit.state;

ALTER TABLE ratelimit.state RESET (autovacuum_enabled);
SELECT rl_zone_drop('rh');
RESET ratelimit.now_override;
