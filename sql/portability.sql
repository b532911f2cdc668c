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

-- 2. Citus: a distributed state table is an empty shell locally, so the
--    planner-free path must not be used; auto takes SPI.  Citus's catalog is
--    faked: an extension row named citus and pg_dist_partition.
SET allow_system_table_mods = on;
CREATE TABLE pg_catalog.pg_dist_partition (logicalrelid regclass);
INSERT INTO pg_catalog.pg_dist_partition VALUES ('ratelimit.state');
INSERT INTO pg_extension (oid, extname, extowner, extnamespace, extrelocatable, extversion)
VALUES (pg_nextoid('pg_extension', 'oid', 'pg_extension_oid_index'), 'citus', 10, 11, false, '0');
RESET allow_system_table_mods;
\c
SET ratelimit.now_override = '2026-01-01 00:00:00+00';
SET ratelimit.table_access = direct;
SELECT rl_token_bucket('citus', 1, 10);
SET ratelimit.table_access = auto;
SELECT rl_token_bucket('citus', 1, 10), rl_token_bucket('citus', 1, 10);
SET ratelimit.table_access = spi;
SELECT rl_token_bucket('citus', 1, 10);
SET allow_system_table_mods = on;
DELETE FROM pg_extension WHERE extname = 'citus';
DROP TABLE pg_catalog.pg_dist_partition;
RESET allow_system_table_mods;
\c
SET ratelimit.now_override = '2026-01-01 00:00:00+00';
SET ratelimit.table_access = direct;
SELECT rl_token_bucket('citus', 1, 10) AS direct_again_after_citus_left;
