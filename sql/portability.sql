-- Behaviour on engines this machine does not have, simulated in PostgreSQL.

-- 1. YugabyteDB before 2024.2 refuses UNLOGGED (0A000): the install script
--    falls back to an ordinary table.  An event trigger refuses it here.
CREATE FUNCTION refuse_unlogged() RETURNS event_trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_event_trigger_ddl_commands() c
               JOIN pg_class r ON r.oid = c.objid
               WHERE c.classid = 'pg_class'::regclass AND r.relpersistence = 'u') THEN
        RAISE EXCEPTION 'UNLOGGED is not supported' USING ERRCODE = 'feature_not_supported';
    END IF;
END $$;
CREATE EVENT TRIGGER refuse_unlogged ON ddl_command_end EXECUTE FUNCTION refuse_unlogged();
DROP EXTENSION ratelimit;
CREATE EXTENSION ratelimit;
DROP EVENT TRIGGER refuse_unlogged;
DROP FUNCTION refuse_unlogged();
SELECT relpersistence FROM pg_class WHERE oid = 'ratelimit.state'::regclass;
SET ratelimit.now_override = '2026-01-01 00:00:00+00';
SELECT rl_token_bucket('logged', 1, 10), rl_token_bucket('logged', 1, 10);
DROP EXTENSION ratelimit;
CREATE EXTENSION ratelimit;
SELECT relpersistence FROM pg_class WHERE oid = 'ratelimit.state'::regclass;

-- 2. Citus: a distributed state table is an empty shell locally and the
--    rows live in shards.  A key whose shard is placed on this node takes
--    the planner-free path on that shard; any other key takes SPI (Citus
--    routes it).  A call on a key placed elsewhere is first forwarded as
--    SELECT r FROM <the function>(...) r, which Citus would delegate to the
--    key's node; here, without Citus, that statement runs in this backend,
--    which then decides as described (errors show it as their CONTEXT).
--    Citus's catalog is faked: an extension row named citus,
--    pg_dist_partition/shard/placement/local_group and shard_name(), with
--    two shards: hashes below 0 in ratelimit.state_1 here, the rest
--    placed on another node (group 2).
-- Without Citus, rl_citus_setup() says what is missing.
SELECT rl_citus_setup();
SET allow_system_table_mods = on;
CREATE TABLE pg_catalog.pg_dist_partition (logicalrelid regclass, partmethod "char", colocationid int);
CREATE TABLE pg_catalog.pg_dist_shard (logicalrelid regclass, shardid bigint, shardminvalue text, shardmaxvalue text);
CREATE TABLE pg_catalog.pg_dist_placement (shardid bigint, groupid int);
CREATE TABLE pg_catalog.pg_dist_local_group (groupid int);
CREATE FUNCTION pg_catalog.shard_name(regclass, bigint) RETURNS text LANGUAGE sql AS $$ SELECT $1::text || '_' || $2 $$;
INSERT INTO pg_catalog.pg_dist_partition VALUES ('ratelimit.state', 'h', 7), ('ratelimit.history', 'h', 7);
INSERT INTO pg_catalog.pg_dist_shard VALUES ('ratelimit.state', 1, '-2147483648', '-1'),
                                            ('ratelimit.state', 2, '0', '2147483647'),
                                            ('ratelimit.history', 3, '-2147483648', '-1'),
                                            ('ratelimit.history', 4, '0', '2147483647');
INSERT INTO pg_catalog.pg_dist_placement VALUES (1, 1), (2, 2), (3, 1), (4, 2);
INSERT INTO pg_catalog.pg_dist_local_group VALUES (1);
INSERT INTO pg_extension (oid, extname, extowner, extnamespace, extrelocatable, extversion)
VALUES (pg_nextoid('pg_extension', 'oid', 'pg_extension_oid_index'), 'citus', 10, 11, false, '0');
RESET allow_system_table_mods;
CREATE TABLE ratelimit.state_1 (LIKE ratelimit.state INCLUDING ALL);
CREATE TABLE ratelimit.state_2 (LIKE ratelimit.state INCLUDING ALL);
CREATE TABLE ratelimit.history_3 (LIKE ratelimit.history INCLUDING ALL);
CREATE TABLE ratelimit.history_4 (LIKE ratelimit.history INCLUDING ALL);
\c
SET ratelimit.now_override = '2026-01-01 00:00:00+00';
-- 'k1' hashes into shard 1 (here), 'citus' into shard 2 (elsewhere).
SELECT hashtext('k1') < 0 AS k1_here, hashtext('citus') < 0 AS citus_here;
SET ratelimit.table_access = direct;
SELECT rl_token_bucket('citus', 1, 10);
SELECT rl_token_bucket('k1', 1, 10), rl_token_bucket('k1', 1, 10);
SET ratelimit.table_access = auto;
SELECT rl_token_bucket('citus', 1, 10), rl_token_bucket('citus', 1, 10);
SELECT rl_token_bucket('k1', 1, 10);
SET ratelimit.table_access = spi;
SELECT rl_token_bucket('citus', 1, 10);
-- The direct path wrote k1 into its shard; SPI wrote citus through the
-- table (the fake has no Citus to route it).
SELECT 'shard 1' AS holds, key, tokens FROM ratelimit.state_1
UNION ALL SELECT 'shard 2', key, tokens FROM ratelimit.state_2
UNION ALL SELECT 'table', key, tokens FROM ratelimit.state ORDER BY 1, 2;
-- A history zone records each request beside its key's state: in the
-- history shard placed here, else through SQL (Citus would route it).
SELECT rl_zone_set('portable_hist', 'token_bucket', 5, '1 minute', history => true);
SELECT (rl_limit('portable_hist', 'k1')).allowed, (rl_limit('portable_hist', 'citus')).allowed;
SELECT 'shard 3' AS holds, key, cost, allowed FROM ratelimit.history_3
UNION ALL SELECT 'shard 4', key, cost, allowed FROM ratelimit.history_4
UNION ALL SELECT 'table', key, cost, allowed FROM ratelimit.history WHERE zone = 'portable_hist'
ORDER BY 1, 2;
SELECT rl_zone_drop('portable_hist');
-- A shard written here is share-locked against a move until the
-- transaction ends: Citus's lock on the metadata of the shard's index in
-- its colocation group (advisory, class 8: shard index, group 7).
SET ratelimit.table_access = auto;
BEGIN;
SELECT rl_token_bucket('k1', 1, 10);
SELECT locktype, classid AS shard_index, objid AS colocation_id, objsubid, mode FROM pg_locks
WHERE pid = pg_backend_pid() AND locktype = 'advisory' AND objsubid IN (4, 8);
COMMIT;
-- A shmem key is decided where its shard is: a forwarded call that nobody
-- delegated is refused, not counted apart in this node's shared memory.
SELECT rl_zone_set('portable_shm', 'token_bucket', 5, '1 minute', store => 'shmem');
SELECT (rl_limit('portable_shm', 'k1')).remaining;
SELECT (rl_limit('portable_shm', 'citus')).remaining;
SELECT rl_zone_drop('portable_shm');
-- A table Citus holds otherwise (a reference or Citus-local table) has no
-- shard map: every key goes through SQL.
SET allow_system_table_mods = on;
UPDATE pg_catalog.pg_dist_partition SET partmethod = 'n';
RESET allow_system_table_mods;
\c
SET ratelimit.now_override = '2026-01-01 00:00:00+00';
SET ratelimit.table_access = direct;
SELECT rl_token_bucket('k1', 1, 10);
SET ratelimit.table_access = auto;
SELECT rl_token_bucket('k1', 1, 10) AS k1_through_sql;
DROP TABLE ratelimit.state_1, ratelimit.state_2, ratelimit.history_3, ratelimit.history_4;
SET allow_system_table_mods = on;
DELETE FROM pg_extension WHERE extname = 'citus';
DROP TABLE pg_catalog.pg_dist_partition, pg_catalog.pg_dist_shard, pg_catalog.pg_dist_placement,
           pg_catalog.pg_dist_local_group;
DROP FUNCTION pg_catalog.shard_name(regclass, bigint);
RESET allow_system_table_mods;
\c
SET ratelimit.now_override = '2026-01-01 00:00:00+00';
SET ratelimit.table_access = direct;
SELECT rl_token_bucket('citus', 1, 10) AS direct_again_after_citus_left;
