-- Zones: a hostile search_path cannot capture or change
-- zone management and decisions; every bad input gets its SQLSTATE and
-- changes nothing (state, zones, history); an ordinary role can neither
-- decide nor read rl_zones until the owner grants it (rl_grant: PUBLIC
-- executes no decision function since 0.5.0), and cannot manage, reset or
-- read the internal tables, unless granted.
-- Must pass with ratelimit.table_access set to auto, direct or spi.
--
-- The table store writes a key's row on its first call in a transaction and
-- keeps later calls in a per-transaction copy, so inside this (never
-- committed) transaction the state table can lag repeated calls: state is
-- checked through rl_peek, the tables where rows must (not) exist or must
-- not have changed.
BEGIN;
SET LOCAL timezone = 'UTC';
SET LOCAL datestyle = 'ISO, YMD';
SET LOCAL intervalstyle = 'postgres';
SET LOCAL client_min_messages = warning;

SELECT plan(266);

SET LOCAL ratelimit.now_override = '2026-01-01 00:00:00+00';

-- The SQLSTATE a statement raises ('ok' when none), for statements run
-- under a hostile search_path, where pgTAP itself cannot run.  No
-- operator or function call of its own besides EXECUTE.
CREATE FUNCTION pg_temp.sqlstate_of(statement text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE statement;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE;
END $$;
-- The detail and the hint of the error a statement raises.
CREATE FUNCTION pg_temp.error_detail_hint(statement text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    detail text;
    hint text;
BEGIN
    EXECUTE statement;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL, hint = PG_EXCEPTION_HINT;
    RETURN detail || ' | ' || hint;
END $$;
-- A statement's one value as text, or 'ERROR <sqlstate>' (an error is a
-- result to compare, not the end of the file); the same care.
CREATE FUNCTION pg_temp.text_of(statement text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    result text;
BEGIN
    EXECUTE statement INTO result;
    RETURN result;
EXCEPTION WHEN OTHERS THEN
    RETURN 'ERROR ' OPERATOR(pg_catalog.||) SQLSTATE;
END $$;

-------------------------------------------------------------------------
-- 1. A hostile search_path.  It runs first: the extension prepares its
-- SQL statements (zone lookup, history insert, SPI store) once per backend,
-- so here they are prepared while the hostile path is in force.  A zone
-- manager (granted EXECUTE on rl_zone_set and rl_zone_drop, and the
-- decision functions with rl_grant) puts a schema of its own first, with =
-- operators for text, int and bigint, functions shadowing octet_length,
-- nextval, now and ceil, and tables named zone,
-- state and history there and in pg_temp.  The first round uses the
-- configured access path, the second forces SPI.  pgTAP compares text with
-- =, so the results go to psql variables and are asserted afterwards.
-------------------------------------------------------------------------
SELECT n.nspname AS rl_ext_schema
FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace
WHERE e.extname = 'ratelimit' \gset

CREATE ROLE rl_pgtap_zone_attacker NOLOGIN;
CREATE SCHEMA rl_pgtap_zevil AUTHORIZATION rl_pgtap_zone_attacker;
GRANT EXECUTE ON FUNCTION rl_zone_set(text, text, numeric, interval, bigint, text, boolean, text, boolean, boolean, boolean),
    rl_zone_drop(text, boolean) TO rl_pgtap_zone_attacker;
SELECT rl_grant('rl_pgtap_zone_attacker');

SET ROLE rl_pgtap_zone_attacker;
CREATE TABLE rl_pgtap_zevil.log (who text, what text);
CREATE TABLE rl_pgtap_zevil.zone (zone text, algorithm text, rate bigint, period interval,
                                  burst bigint, store text, history boolean, zone_id int);
CREATE TABLE rl_pgtap_zevil.state (key text, zone_id int, part int, tokens bigint);
CREATE TABLE rl_pgtap_zevil.history (txn_id bigint, zone text, key text);
CREATE TEMP TABLE zone (zone text, algorithm text, rate bigint, period interval,
                        burst bigint, store text, history boolean, zone_id int);
CREATE TEMP TABLE state (key text, zone_id int, part int, tokens bigint);
CREATE TEMP TABLE history (txn_id bigint, zone text, key text);
CREATE FUNCTION rl_pgtap_zevil.texteq(a text, b text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO rl_pgtap_zevil.log VALUES (current_user, 'text: ' || a || ' = ' || b);
    RETURN a OPERATOR(pg_catalog.=) b;
END $$;
CREATE OPERATOR rl_pgtap_zevil.= (LEFTARG = text, RIGHTARG = text, FUNCTION = rl_pgtap_zevil.texteq);
CREATE FUNCTION rl_pgtap_zevil.int4eq(a int, b int) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO rl_pgtap_zevil.log VALUES (current_user, 'int: ' || a || ' = ' || b);
    RETURN a OPERATOR(pg_catalog.=) b;
END $$;
CREATE OPERATOR rl_pgtap_zevil.= (LEFTARG = int, RIGHTARG = int, FUNCTION = rl_pgtap_zevil.int4eq);
CREATE FUNCTION rl_pgtap_zevil.int8eq(a bigint, b bigint) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO rl_pgtap_zevil.log VALUES (current_user, 'bigint: ' || a || ' = ' || b);
    RETURN a OPERATOR(pg_catalog.=) b;
END $$;
CREATE OPERATOR rl_pgtap_zevil.= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = rl_pgtap_zevil.int8eq);
CREATE FUNCTION rl_pgtap_zevil.octet_length(t text) RETURNS int LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO rl_pgtap_zevil.log VALUES (current_user, 'octet_length');
    RETURN 1;
END $$;
CREATE FUNCTION rl_pgtap_zevil.nextval(r regclass) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO rl_pgtap_zevil.log VALUES (current_user, 'nextval');
    RETURN 1;
END $$;
CREATE FUNCTION rl_pgtap_zevil.now() RETURNS timestamptz LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO rl_pgtap_zevil.log VALUES (current_user, 'now');
    RETURN 'epoch';
END $$;
CREATE FUNCTION rl_pgtap_zevil.ceil(n numeric) RETURNS numeric LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO rl_pgtap_zevil.log VALUES (current_user, 'ceil');
    RETURN 999;
END $$;

SELECT set_config('search_path',
                  'rl_pgtap_zevil, pg_catalog, ' || quote_ident(:'rl_ext_schema'), true);
-- Round 1, the configured access path.
SELECT rl_zone_set('sp_tb', 'token_bucket', 5, '1 minute', history => true);
SELECT remaining AS sp_r1 FROM rl_limit('sp_tb', 'k1', 2) \gset
SELECT remaining AS sp_r2 FROM rl_limit('sp_tb', 'k1') \gset
SELECT rl_zone_set('sp_tb', 'token_bucket', 10, '1 minute', burst => 10, history => true);
SELECT remaining AS sp_r3 FROM rl_limit('sp_tb', 'k1') \gset
SELECT rl_zone_set('sp_sw', 'sliding_window', 3, '10 seconds');
SELECT remaining AS sp_r4 FROM rl_sliding_window('sp_sw', 'k1') \gset
SELECT remaining AS sp_r5 FROM rl_peek('sp_sw', 'k1') \gset
-- (rl_headers in text_of, the call outside it: an error of rl_headers
-- does not undo the call.)
SELECT pg_temp.text_of(format('SELECT rl_headers(%L::rl_result)::text', r)) AS sp_headers
FROM rl_limit('sp_sw', 'k1') r \gset
SELECT remaining AS sp_r6 FROM rl_gcra('sp-gcra', 15, 30, 60) \gset
SELECT pg_temp.sqlstate_of($$SELECT rl_zone_set('sp_tb', 'fixed_window', 3, '1 minute')$$) AS sp_no_reset \gset
SELECT rl_zone_set('sp_tb', 'fixed_window', 3, '1 minute', reset => true);
SELECT remaining AS sp_r7 FROM rl_limit('sp_tb', 'k1') \gset
SELECT pg_temp.sqlstate_of($$SELECT rl_zone_set(repeat('x', 129), 'token_bucket', 1, '1 s')$$) AS sp_long_name \gset
SELECT rl_zone_drop('sp_sw');
RESET ROLE;
SET LOCAL ratelimit.table_access = 'spi';
SET ROLE rl_pgtap_zone_attacker;
-- Round 2, SPI.
SELECT remaining AS sp_r8 FROM rl_limit('sp_tb', 'k2') \gset
SELECT remaining AS sp_r9 FROM rl_limit('sp_tb', 'k2', 2) \gset
SELECT allowed AS sp_r10 FROM rl_limit('sp_tb', 'k2') \gset
SELECT rl_zone_set('sp_sw2', 'sliding_window', 2, '10 seconds');
SELECT remaining AS sp_r11 FROM rl_sliding_window('sp_sw2', 'k2') \gset
SELECT remaining AS sp_r12 FROM rl_limit('sp_sw2', 'k2') \gset
SELECT allowed AS sp_r13 FROM rl_limit('sp_sw2', 'k2') \gset
SELECT rl_zone_drop('sp_sw2');
RESET ROLE;
SET LOCAL search_path TO DEFAULT;
RESET ratelimit.table_access;

SELECT is(:'sp_r1'::bigint, 3::bigint, 'hostile path: rl_limit cost 2 on a new zone of 5 leaves 3');
SELECT is(:'sp_r2'::bigint, 2::bigint, 'hostile path: the same key again leaves 2');
SELECT is(:'sp_r3'::bigint, 1::bigint, 'hostile path: after rl_zone_set altered the rate (capacity 10), the key kept its 2 and leaves 1');
SELECT is(:'sp_r4'::bigint, 2::bigint, 'hostile path: rl_sliding_window on a new zone of 3 leaves 2');
SELECT is(:'sp_r5'::bigint, 1::bigint, 'hostile path: rl_peek says 1 would be left');
SELECT is(:'sp_headers'::text, '{"RateLimit": "\"sp_sw\";r=1;t=10", "RateLimit-Policy": "\"sp_sw\";q=3;w=10"}',
          'hostile path: rl_headers ignores a shadowing ceil(), and the peek took nothing');
SELECT is(:'sp_r6'::bigint, 15::bigint, 'hostile path: rl_gcra as redis-cell');
SELECT is(:'sp_no_reset'::text, '55000', 'hostile path: another algorithm without reset => true is refused');
SELECT is(:'sp_r7'::bigint, 2::bigint, 'hostile path: another algorithm (reset => true) starts the key afresh (3 - 1), history kept on');
SELECT is(:'sp_long_name'::text, '22001', 'hostile path: a shadowing octet_length does not let a 129-byte zone name through');
SELECT is(:'sp_r8'::bigint, 2::bigint, 'hostile path, SPI: a new key of the fixed window leaves 2');
SELECT is(:'sp_r9'::bigint, 0::bigint, 'hostile path, SPI: cost 2 leaves 0');
SELECT is(:'sp_r10'::boolean, false, 'hostile path, SPI: the next call is refused');
SELECT is(:'sp_r11'::bigint, 1::bigint, 'hostile path, SPI: rl_sliding_window on a new zone of 2 leaves 1');
SELECT is(:'sp_r12'::bigint, 0::bigint, 'hostile path, SPI: then 0');
SELECT is(:'sp_r13'::boolean, false, 'hostile path, SPI: then refused');

SELECT is_empty($$SELECT who, what FROM rl_pgtap_zevil.log$$,
                'no shadowing operator or function was ever called (not as the extension''s owner either)');
SELECT is_empty($$SELECT * FROM rl_pgtap_zevil.zone UNION ALL SELECT * FROM pg_temp.zone$$,
                'the attacker''s zone tables were never touched');
SELECT is_empty($$SELECT * FROM rl_pgtap_zevil.state UNION ALL SELECT * FROM pg_temp.state$$,
                'the attacker''s state tables were never touched');
SELECT is_empty($$SELECT * FROM rl_pgtap_zevil.history UNION ALL SELECT * FROM pg_temp.history$$,
                'the attacker''s history tables were never touched');
SELECT results_eq(
    $$SELECT zone, algorithm, rate, period, burst, store, history FROM ratelimit.zone
      WHERE zone LIKE 'sp\_%' ORDER BY zone$$,
    $$VALUES ('sp_tb'::text COLLATE "C", 'fixed_window'::text, 3::numeric, interval '1 minute',
              NULL::bigint, 'table'::text, true)$$,
    'ratelimit.zone holds sp_tb as last set; sp_sw and sp_sw2 were dropped');
SELECT ok((SELECT zone_id > 0 AND created_at <= updated_at FROM ratelimit.zone WHERE zone = 'sp_tb'),
          'sp_tb got its id from the real sequence and real timestamps');
SELECT results_eq(
    $$SELECT key, count(*), sum(cost), count(*) FILTER (WHERE NOT allowed)
      FROM ratelimit.history WHERE zone = 'sp_tb' GROUP BY key ORDER BY key$$,
    $$VALUES ('k1'::text, 4::bigint, 5::bigint, 0::bigint), ('k2', 3, 4, 1)$$,
    'every sp_tb request went to ratelimit.history (k1: costs 2, 1, 1, 1; k2: 1, 2, 1 refused)');
SELECT results_eq(
    $$SELECT s.key, s.part FROM ratelimit.state s JOIN ratelimit.zone z USING (zone_id)
      WHERE z.zone = 'sp_tb' ORDER BY s.key$$,
    $$VALUES ('k1'::text COLLATE "C", 0), ('k2', 0)$$,
    'sp_tb''s state is under its new zone id');
SELECT is_empty(
    $$SELECT key, zone_id FROM ratelimit.state
      WHERE key IN ('k1', 'k2') AND zone_id NOT IN (SELECT zone_id FROM ratelimit.zone)$$,
    'no state is left under the old zone ids (algorithm change, drops)');

-------------------------------------------------------------------------
-- 2. Bad input: every error with its SQLSTATE, and nothing changes.
-------------------------------------------------------------------------
SELECT lives_ok($$SELECT rl_zone_set('e_tb', 'token_bucket', 10, '1 minute', burst => 20)$$,
                'seed: token_bucket zone, capacity 20');
SELECT lives_ok($$SELECT rl_zone_set('e_sw', 'sliding_window', 3, '10 seconds', history => true)$$,
                'seed: sliding_window zone of 3 with history');
SELECT lives_ok($$SELECT rl_zone_set('e_fw', 'fixed_window', 5, '1 minute')$$,
                'seed: fixed_window zone of 5');
SELECT lives_ok($$SELECT rl_zone_set('e_gcra', 'gcra', 30, '1 minute', burst => 16)$$,
                'seed: gcra zone');
SELECT is((SELECT remaining FROM rl_limit('e_tb', 'seed', 4)), 16::bigint, 'seed: e_tb takes 4 of 20');
SELECT is((SELECT remaining FROM rl_limit('e_sw', 'seed')), 2::bigint, 'seed: e_sw takes 1 of 3');
SELECT is((SELECT remaining FROM rl_limit('e_fw', 'seed')), 4::bigint, 'seed: e_fw takes 1 of 5');
SELECT is((SELECT remaining FROM rl_limit('e_gcra', 'seed')), 15::bigint, 'seed: e_gcra takes 1 of 16');
SELECT is((SELECT remaining FROM rl_gcra('seed', 15, 30, 60)), 15::bigint, 'seed: rl_gcra takes 1 of 16');

-- Edges that are accepted.
SELECT is((SELECT remaining FROM rl_limit('e_tb', repeat('k', 1024))), 19::bigint,
          'a key of exactly 1024 bytes is accepted');
SELECT is((SELECT remaining FROM rl_limit('e_tb', repeat(U&'\00E9', 512))), 19::bigint,
          'a key of 512 two-byte characters (1024 bytes) is accepted');
SELECT is((SELECT remaining FROM rl_limit('e_fw', 'whole', 5)), 0::bigint,
          'cost equal to the capacity is accepted');
SELECT is((SELECT remaining FROM rl_gcra('whole', 15, 30, 60, 16)), 0::bigint,
          'rl_gcra quantity max_burst + 1 is accepted');
SELECT lives_ok($$SELECT rl_zone_set(repeat('z', 128), 'fixed_window', 1, '1 s')$$,
                'a zone name of exactly 128 bytes is accepted');
SELECT lives_ok($$SELECT rl_zone_set('e_sw_max', 'sliding_window', 1000000, '1 hour')$$,
                'sliding_window rate 1000000 is accepted');
SELECT lives_ok($$SELECT rl_zone_set('e_month', 'token_bucket', 1, '1 mon')$$,
                'a period of a month is accepted');

-- A cron zone with state.  rl_zone_set refuses a cron zone no job could
-- refill (this database is not cron.database_name): the superuser writes
-- its configuration directly, as a restored dump fills the zone table.
INSERT INTO ratelimit.zone (zone, algorithm, rate, period, burst, refill)
VALUES ('e_cron', 'token_bucket', 10, '1 minute', NULL, 'cron');
SELECT is((SELECT remaining FROM rl_limit('e_cron', 'seed', 3)), 7::bigint, 'seed: e_cron takes 3 of 10');

CREATE TEMP TABLE z_state ON COMMIT DROP AS SELECT * FROM ratelimit.state;
CREATE TEMP TABLE z_zone ON COMMIT DROP AS SELECT * FROM ratelimit.zone;
CREATE TEMP TABLE z_history ON COMMIT DROP AS SELECT * FROM ratelimit.history;
SELECT ok((SELECT count(*) FROM z_history WHERE zone = 'e_sw') = 1,
          'the seed call on the history zone is in ratelimit.history');

-- Unknown zones: 42704 from every function that names one.
SELECT throws_ok($$SELECT rl_limit('e_nope', 'k')$$,
                 '42704', 'rate-limit zone "e_nope" does not exist', 'rl_limit, unknown zone: 42704');
SELECT throws_ok($$SELECT rl_peek('e_nope', 'k')$$,
                 '42704', 'rate-limit zone "e_nope" does not exist', 'rl_peek, unknown zone: 42704');
SELECT throws_ok($$SELECT rl_reset('e_nope', 'k')$$,
                 '42704', 'rate-limit zone "e_nope" does not exist', 'rl_reset, unknown zone: 42704');
SELECT throws_ok($$SELECT rl_sliding_window('e_nope', 'k')$$,
                 '42704', 'rate-limit zone "e_nope" does not exist', 'rl_sliding_window, unknown zone: 42704');
SELECT throws_ok($$SELECT rl_zone_drop('e_nope')$$,
                 '42704', 'rate-limit zone "e_nope" does not exist', 'rl_zone_drop, unknown zone: 42704');
SELECT lives_ok($$SELECT rl_zone_drop('e_nope', if_exists => true)$$,
                'rl_zone_drop(.., if_exists => true), unknown zone: only a notice');
SELECT throws_ok($$SELECT rl_limit('E_TB', 'k')$$,
                 '42704', 'rate-limit zone "E_TB" does not exist', 'zone names are case-sensitive: 42704');
SELECT throws_ok($$SELECT rl_limit('e_tb ', 'k')$$,
                 '42704', 'rate-limit zone "e_tb " does not exist', 'zone names match byte for byte: 42704');
SELECT throws_ok($$SELECT rl_limit('', 'k')$$,
                 '42704', 'rate-limit zone "" does not exist', 'rl_limit, empty zone name: 42704');
SELECT throws_ok($$SELECT rl_limit(repeat('z', 129), 'k')$$,
                 '42704', NULL, 'rl_limit, zone name of 129 bytes: 42704');
SELECT throws_ok($$SELECT rl_limit(NULL, 'k')$$,
                 '22004', 'zone must not be null', 'rl_limit, NULL zone: 22004');
SELECT throws_ok($$SELECT rl_peek(NULL, 'k')$$,
                 '22004', 'zone must not be null', 'rl_peek, NULL zone: 22004');
SELECT throws_ok($$SELECT rl_reset(NULL, 'k')$$,
                 '22004', 'zone must not be null', 'rl_reset, NULL zone: 22004');
SELECT throws_ok($$SELECT rl_sliding_window(NULL, 'k')$$,
                 '22004', 'zone must not be null', 'rl_sliding_window, NULL zone: 22004');
SELECT throws_ok($$SELECT rl_zone_drop(NULL)$$,
                 '22004', 'zone must not be null', 'rl_zone_drop, NULL zone: 22004');
SELECT throws_ok($$SELECT rl_sliding_window('e_tb', 'k')$$,
                 '42809', 'zone "e_tb" is a token_bucket zone, not a sliding_window zone',
                 'rl_sliding_window on a token_bucket zone: 42809');

-- Zone definitions.
SELECT throws_ok($$SELECT rl_zone_set('e_new', 'leaky_bucket', 10, '1 minute')$$,
                 '22023', 'unknown rate-limit algorithm "leaky_bucket"', 'unknown algorithm: 22023');
SELECT throws_ok($$SELECT rl_zone_set('e_new', 'Token_Bucket', 10, '1 minute')$$,
                 '22023', 'unknown rate-limit algorithm "Token_Bucket"', 'algorithm names are case-sensitive: 22023');
-- A new zone needs algorithm, rate and period; every other option has a
-- default (NULL is "the default" for a new zone, "as it is" for a zone
-- that exists).
SELECT throws_ok($$SELECT rl_zone_set('e_new', NULL, 10, '1 minute')$$,
                 '22004', 'a new zone needs an algorithm, a rate and a period', 'new zone, NULL algorithm: 22004');
SELECT throws_ok($$SELECT rl_zone_set('e_new', 'token_bucket', 0, '1 minute')$$,
                 '22023', 'rate must be greater than zero', 'rate 0: 22023');
SELECT throws_ok($$SELECT rl_zone_set('e_new', 'fixed_window', -5, '1 minute')$$,
                 '22023', 'rate must be greater than zero', 'rate -5: 22023');
SELECT throws_ok($$SELECT rl_zone_set('e_new', 'sliding_window', -9223372036854775808, '1 minute')$$,
                 '22023', 'rate must be greater than zero', 'rate -2^63: 22023');
SELECT throws_ok($$SELECT rl_zone_set('e_new', 'token_bucket', NULL, '1 minute')$$,
                 '22004', 'a new zone needs an algorithm, a rate and a period', 'new zone, NULL rate: 22004');
SELECT throws_ok($$SELECT rl_zone_set('e_new', 'sliding_window_counter', 9007199254740993, '1 minute')$$,
                 '22003', 'rate is out of range', 'rate 2^53 + 1: 22003');
SELECT throws_ok($$SELECT rl_zone_set('e_new', 'token_bucket', 10, '0 s')$$,
                 '22023', 'period must be greater than zero and at most 285 years', 'period 0: 22023');
SELECT throws_ok($$SELECT rl_zone_set('e_new', 'token_bucket', 10, '-1 minute')$$,
                 '22023', 'period must be greater than zero and at most 285 years', 'period -1 minute: 22023');
SELECT throws_ok($$SELECT rl_zone_set('e_new', 'gcra', 10, '1 day -86400 s')$$,
                 '22023', 'period must be greater than zero and at most 285 years', 'period 1 day - 86400 s (zero): 22023');
SELECT throws_ok($$SELECT rl_zone_set('e_new', 'fixed_window', 10, '0.0000001 s')$$,
                 '22023', 'period must be greater than zero and at most 285 years', 'period below a microsecond (zero): 22023');
SELECT throws_ok($$SELECT rl_zone_set('e_new', 'sliding_window', 10, '300 years')$$,
                 '22023', 'period must be greater than zero and at most 285 years', 'period 300 years: 22023');
SELECT throws_ok($$SELECT rl_zone_set('e_new', 'token_bucket', 10, NULL)$$,
                 '22004', 'a new zone needs an algorithm, a rate and a period', 'new zone, NULL period: 22004');
SELECT throws_ok($$SELECT rl_zone_set('e_new', 'fixed_window', 10, '1 minute', burst => 20)$$,
                 '22023', 'burst does not apply to fixed_window', 'burst on fixed_window: 22023');
SELECT throws_ok($$SELECT rl_zone_set('e_new', 'sliding_window', 10, '1 minute', burst => 20)$$,
                 '22023', 'burst does not apply to sliding_window', 'burst on sliding_window: 22023');
SELECT throws_ok($$SELECT rl_zone_set('e_new', 'sliding_window_counter', 10, '1 minute', burst => 10)$$,
                 '22023', 'burst does not apply to sliding_window_counter', 'burst (even = rate) on sliding_window_counter: 22023');
SELECT throws_ok($$SELECT rl_zone_set('e_new', 'token_bucket', 10, '1 minute', burst => 0)$$,
                 '22023', 'burst must be greater than zero', 'burst 0: 22023');
SELECT throws_ok($$SELECT rl_zone_set('e_new', 'gcra', 10, '1 minute', burst => -1)$$,
                 '22023', 'burst must be greater than zero', 'burst -1: 22023');
SELECT throws_ok($$SELECT rl_zone_set('e_new', 'fixed_window', 10, '1 minute', burst => -1)$$,
                 '22023', NULL::text, 'burst -1 on fixed_window: 22023');
SELECT throws_ok($$SELECT rl_zone_set('e_new', 'token_bucket', 1, '1 year', burst => 300)$$,
                 '22023', 'burst must be greater than zero and refill within 285 years', 'burst refilling in 300 years: 22023');
SELECT throws_ok($$SELECT rl_zone_set('e_new', 'sliding_window', 1000001, '1 hour')$$,
                 '54000', 'rate 1000001 is too large for an exact sliding window', 'sliding_window rate 1000001: 54000');
SELECT throws_ok($$SELECT rl_zone_set('e_new', 'token_bucket', 10, '1 minute', store => 'redis')$$,
                 '0A000', 'unknown rate-limit store "redis"', 'unknown store: 0A000');
SELECT throws_ok($$SELECT rl_zone_set('e_new')$$,
                 '22004', 'a new zone needs an algorithm, a rate and a period', 'new zone named alone: 22004');
SELECT throws_ok($$SELECT rl_zone_set('e_new', rate => 10, period => '1 minute', store => 'table', history => true)$$,
                 '22004', 'a new zone needs an algorithm, a rate and a period', 'new zone, options but no algorithm: 22004');
SELECT throws_ok($$SELECT rl_zone_set('e_new', 'token_bucket', 10, '1 minute', reset => NULL)$$,
                 '22004', 'reset must not be null', 'reset NULL: 22004');
-- Fractional rates: at most 6 decimals; the window algorithms count whole
-- requests per window.
SELECT throws_ok($$SELECT rl_zone_set('e_new', 'token_bucket', 0.0000001, '1 minute')$$,
                 '22023', 'rate has more than 6 decimals', 'rate with 7 decimals: 22023');
SELECT throws_ok($$SELECT rl_zone_set('e_new', 'gcra', 1.0000001, '1 minute')$$,
                 '22023', 'rate has more than 6 decimals', 'gcra rate with 7 decimals: 22023');
SELECT throws_ok($$SELECT rl_zone_set('e_new', 'fixed_window', 5.5, '1 second')$$,
                 '22023', 'a fixed_window zone needs a whole rate', 'fixed_window, rate 5.5: 22023');
SELECT throws_ok($$SELECT rl_zone_set('e_new', 'sliding_window', 0.5, '1 second')$$,
                 '22023', 'a sliding_window zone needs a whole rate', 'sliding_window, rate 0.5: 22023');
SELECT throws_ok($$SELECT rl_zone_set('e_new', 'sliding_window_counter', 2.000001, '1 second')$$,
                 '22023', 'a sliding_window_counter zone needs a whole rate', 'sliding_window_counter, rate 2.000001: 22023');
SELECT throws_ok($$SELECT rl_zone_set('e_new', 'token_bucket', 'NaN', '1 minute')$$,
                 '22023', 'rate must be a finite number', 'rate NaN: 22023');
SELECT throws_ok($$SELECT rl_zone_set('', 'token_bucket', 10, '1 minute')$$,
                 '22023', 'zone must not be null or empty', 'empty zone name: 22023');
SELECT throws_ok($$SELECT rl_zone_set(NULL, 'token_bucket', 10, '1 minute')$$,
                 '22004', 'zone must not be null or empty', 'NULL zone name: 22004');
SELECT throws_ok($$SELECT rl_zone_set(repeat('z', 129), 'token_bucket', 10, '1 minute')$$,
                 '22001', 'zone name is too long', 'zone name of 129 bytes: 22001');
SELECT throws_ok($$SELECT rl_zone_set(repeat(U&'\00E9', 65), 'token_bucket', 10, '1 minute')$$,
                 '22001', 'zone name is too long', 'zone name of 65 characters but 130 bytes: 22001');
-- Names beginning with "(" are how rl_counters and rl_keys show what is no
-- zone's: a zone so named would add its counts to rl_token_bucket's row.
SELECT throws_ok(format('SELECT rl_zone_set(%L, ''token_bucket'', 10, ''1 minute'')', name),
                 '22023', 'zone names beginning with "(" are reserved', format('zone name %s: 22023', name))
FROM unnest(ARRAY['(rl_token_bucket)', '(rl_gcra)', '(zone id 1)', '(']) name;
SELECT is(pg_temp.error_detail_hint($$SELECT rl_zone_set('(rl_token_bucket)', 'token_bucket', 10, '1 minute')$$),
          'rl_counters and rl_keys name what belongs to no zone so: (rl_token_bucket), (rl_gcra), (zone id N). | '
          'Choose a name that does not begin with "(".',
          '... with the detail and the hint');
SELECT throws_ok($$INSERT INTO ratelimit.zone (zone, algorithm, rate, period) VALUES ('(rl_gcra)', 'gcra', 1, '1 s')$$,
                 '23514', NULL, 'nor can the owner write such a zone into ratelimit.zone (a CHECK)');
SELECT lives_ok($$SELECT rl_zone_set('e_paren(1)', 'token_bucket', 10, '1 minute'), rl_zone_drop('e_paren(1)')$$,
                'a "(" further on is allowed');
-- A bad definition of an existing zone changes neither it nor its state.
SELECT throws_ok($$SELECT rl_zone_set('e_tb', 'leaky_bucket', 10, '1 minute')$$,
                 '22023', 'unknown rate-limit algorithm "leaky_bucket"', 'existing zone, unknown algorithm: 22023');
SELECT throws_ok($$SELECT rl_zone_set('e_tb', 'token_bucket', 0, '1 minute', burst => 20)$$,
                 '22023', 'rate must be greater than zero', 'existing zone, rate 0: 22023');
SELECT throws_ok($$SELECT rl_zone_set('e_tb', 'fixed_window', 10, '1 minute', burst => 20)$$,
                 '22023', 'burst does not apply to fixed_window', 'existing zone, new algorithm with a bad burst: 22023');
SELECT throws_ok($$SELECT rl_zone_set('e_sw', 'sliding_window', 1000001, '10 seconds')$$,
                 '54000', 'rate 1000001 is too large for an exact sliding window', 'existing sliding_window zone, rate too large: 54000');
SELECT throws_ok($$SELECT rl_zone_set('e_fw', rate => 5.5)$$,
                 '22023', 'a fixed_window zone needs a whole rate', 'existing fixed_window zone, a fractional rate alone: 22023');
SELECT throws_ok($$SELECT rl_zone_set('e_fw', burst => 5)$$,
                 '22023', 'burst does not apply to fixed_window', 'existing fixed_window zone, a burst alone: 22023');
SELECT throws_ok($$SELECT rl_zone_set('e_fw', reset => NULL)$$,
                 '22004', 'reset must not be null', 'existing zone, reset NULL: 22004');
-- Another algorithm, store or refill mode cannot read the keys' state:
-- refused without reset => true (never a silent reset), nothing changes.
SELECT throws_ok($$SELECT rl_zone_set('e_tb', 'gcra', 10, '1 minute')$$,
                 '55000', 'changing the algorithm of zone "e_tb" would reset the state of its keys',
                 'existing zone, another algorithm without reset: 55000');
SELECT throws_ok($$SELECT rl_zone_set('e_tb', algorithm => 'gcra', rate => 100)$$,
                 '55000', 'changing the algorithm of zone "e_tb" would reset the state of its keys',
                 'existing zone, another algorithm and a rate without reset: 55000 (the rate is not applied either)');
SELECT throws_ok($$SELECT rl_zone_set('e_tb', store => 'shmem')$$,
                 '55000', NULL::text, 'existing zone, another store without reset: 55000');
SELECT throws_ok($$SELECT rl_zone_set('e_cron', refill => 'inline')$$,
                 '55000', 'changing the refill mode of zone "e_cron" would reset the state of its keys',
                 'existing cron zone, refill inline without reset: 55000');
SELECT throws_ok($$SELECT rl_zone_set('e_cron', 'gcra', refill => 'inline', store => 'table')$$,
                 '55000', 'changing the algorithm, store or refill mode of zone "e_cron" would reset the state of its keys',
                 'existing zone, two of them at once: 55000 naming all three');
SELECT throws_ok($$SELECT rl_zone_set('e_tb', 'token_bucket', 10, '1 minute', refill => 'cron', reset => true)$$,
                 '55000', NULL::text, 'existing zone made cron here (no usable pg_cron in this database), even with reset: 55000');

-- Keys: NULL 22004, empty 22023, over 1024 bytes 22001, in every function.
SELECT throws_ok($$SELECT rl_limit('e_tb', NULL)$$, '22004', 'key must not be null', 'rl_limit, NULL key: 22004');
SELECT throws_ok($$SELECT rl_peek('e_tb', NULL)$$, '22004', 'key must not be null', 'rl_peek, NULL key: 22004');
SELECT throws_ok($$SELECT rl_reset('e_tb', NULL)$$, '22004', 'key must not be null', 'rl_reset, NULL key: 22004');
SELECT throws_ok($$SELECT rl_sliding_window('e_sw', NULL)$$, '22004', 'key must not be null', 'rl_sliding_window, NULL key: 22004');
SELECT throws_ok($$SELECT rl_gcra(NULL, 15, 30, 60)$$, '22004', 'key must not be null', 'rl_gcra, NULL key: 22004');
SELECT throws_ok($$SELECT rl_limit('e_tb', '')$$, '22023', 'key must not be empty', 'rl_limit, empty key: 22023');
SELECT throws_ok($$SELECT rl_peek('e_tb', '')$$, '22023', 'key must not be empty', 'rl_peek, empty key: 22023');
SELECT throws_ok($$SELECT rl_reset('e_tb', '')$$, '22023', 'key must not be empty', 'rl_reset, empty key: 22023');
SELECT throws_ok($$SELECT rl_sliding_window('e_sw', '')$$, '22023', 'key must not be empty', 'rl_sliding_window, empty key: 22023');
SELECT throws_ok($$SELECT rl_gcra('', 15, 30, 60)$$, '22023', 'key must not be empty', 'rl_gcra, empty key: 22023');
SELECT throws_ok($$SELECT rl_limit('e_tb', repeat('k', 1025))$$, '22001', 'key is too long', 'rl_limit, key of 1025 bytes: 22001');
SELECT throws_ok($$SELECT rl_limit('e_tb', repeat(U&'\00E9', 513))$$, '22001', 'key is too long',
                 'rl_limit, key of 513 characters but 1026 bytes: 22001');
SELECT throws_ok($$SELECT rl_peek('e_tb', repeat('k', 1025))$$, '22001', 'key is too long', 'rl_peek, key of 1025 bytes: 22001');
SELECT throws_ok($$SELECT rl_reset('e_tb', repeat('k', 1025))$$, '22001', 'key is too long', 'rl_reset, key of 1025 bytes: 22001');
SELECT throws_ok($$SELECT rl_sliding_window('e_sw', repeat('k', 1025))$$, '22001', 'key is too long', 'rl_sliding_window, key of 1025 bytes: 22001');
SELECT throws_ok($$SELECT rl_gcra(repeat('k', 1025), 15, 30, 60)$$, '22001', 'key is too long', 'rl_gcra, key of 1025 bytes: 22001');

-- Cost: negative or above the zone's capacity, 22023; NULL 22004.
SELECT throws_ok($$SELECT rl_limit('e_tb', 'seed', -1)$$, '22023', 'cost must not be negative', 'rl_limit, cost -1: 22023');
SELECT throws_ok($$SELECT rl_limit('e_tb', 'seed', -2147483648)$$, '22023', 'cost must not be negative', 'rl_limit, cost -2^31: 22023');
SELECT throws_ok($$SELECT rl_peek('e_tb', 'seed', -1)$$, '22023', 'cost must not be negative', 'rl_peek, cost -1: 22023');
SELECT throws_ok($$SELECT rl_sliding_window('e_sw', 'seed', -1)$$, '22023', 'cost must not be negative', 'rl_sliding_window, cost -1: 22023');
SELECT throws_ok($$SELECT rl_limit('e_tb', 'seed', 21)$$, '22023', 'cost exceeds the capacity of zone "e_tb"',
                 'rl_limit, cost 21 above capacity 20 (burst): 22023');
SELECT throws_ok($$SELECT rl_limit('e_fw', 'seed', 6)$$, '22023', 'cost exceeds the capacity of zone "e_fw"',
                 'rl_limit, cost 6 above capacity 5 (rate): 22023');
SELECT throws_ok($$SELECT rl_limit('e_gcra', 'seed', 17)$$, '22023', 'cost exceeds the capacity of zone "e_gcra"',
                 'rl_limit, cost 17 above gcra capacity 16: 22023');
SELECT throws_ok($$SELECT rl_limit('e_tb', 'e-cost', 2147483647)$$, '22023', 'cost exceeds the capacity of zone "e_tb"',
                 'rl_limit, cost 2^31 - 1 on a new key: 22023');
SELECT throws_ok($$SELECT rl_peek('e_tb', 'seed', 21)$$, '22023', 'cost exceeds the capacity of zone "e_tb"',
                 'rl_peek, cost above capacity: 22023');
SELECT throws_ok($$SELECT rl_sliding_window('e_sw', 'seed', 4)$$, '22023', 'cost exceeds the capacity of zone "e_sw"',
                 'rl_sliding_window, cost above capacity on a history zone: 22023');
SELECT throws_ok($$SELECT rl_limit('e_sw', 'seed', -1)$$, '22023', 'cost must not be negative',
                 'rl_limit, negative cost on a history zone: 22023');
SELECT throws_ok($$SELECT rl_limit('e_tb', 'seed', NULL)$$, '22004', 'cost must not be null', 'rl_limit, NULL cost: 22004');
SELECT throws_ok($$SELECT rl_peek('e_tb', 'seed', NULL)$$, '22004', 'cost must not be null', 'rl_peek, NULL cost: 22004');
SELECT throws_ok($$SELECT rl_sliding_window('e_sw', 'seed', NULL)$$, '22004', 'cost must not be null', 'rl_sliding_window, NULL cost: 22004');

-- rl_gcra's parameters.
SELECT throws_ok($$SELECT rl_gcra('e-gcra', -1, 30, 60)$$, '22023',
                 'max_burst must not be negative, and the burst must refill within 285 years', 'rl_gcra, max_burst -1: 22023');
SELECT throws_ok($$SELECT rl_gcra('e-gcra', 2147483647, 1, 10000)$$, '22023',
                 'max_burst must not be negative, and the burst must refill within 285 years',
                 'rl_gcra, a burst refilling in 680000 years: 22023');
SELECT throws_ok($$SELECT rl_gcra('e-gcra', 15, 0, 60)$$, '22023', 'count must be greater than zero', 'rl_gcra, count 0: 22023');
SELECT throws_ok($$SELECT rl_gcra('e-gcra', 15, -1, 60)$$, '22023', 'count must be greater than zero', 'rl_gcra, count -1: 22023');
SELECT throws_ok($$SELECT rl_gcra('e-gcra', 15, 30, 'NaN')$$, '22023',
                 'period must be a finite number of seconds, at least one microsecond and at most 285 years', 'rl_gcra, period NaN: 22023');
SELECT throws_ok($$SELECT rl_gcra('e-gcra', 15, 30, 'Infinity')$$, '22023',
                 'period must be a finite number of seconds, at least one microsecond and at most 285 years', 'rl_gcra, period Infinity: 22023');
SELECT throws_ok($$SELECT rl_gcra('e-gcra', 15, 30, '-Infinity')$$, '22023',
                 'period must be a finite number of seconds, at least one microsecond and at most 285 years', 'rl_gcra, period -Infinity: 22023');
SELECT throws_ok($$SELECT rl_gcra('e-gcra', 15, 30, 0)$$, '22023',
                 'period must be a finite number of seconds, at least one microsecond and at most 285 years', 'rl_gcra, period 0: 22023');
SELECT throws_ok($$SELECT rl_gcra('e-gcra', 15, 30, -60)$$, '22023',
                 'period must be a finite number of seconds, at least one microsecond and at most 285 years', 'rl_gcra, period -60: 22023');
SELECT throws_ok($$SELECT rl_gcra('e-gcra', 15, 30, 1e-7)$$, '22023',
                 'period must be a finite number of seconds, at least one microsecond and at most 285 years', 'rl_gcra, period 0.1 us: 22023');
SELECT throws_ok($$SELECT rl_gcra('e-gcra', 15, 30, 1e10)$$, '22023',
                 'period must be a finite number of seconds, at least one microsecond and at most 285 years', 'rl_gcra, period 317 years: 22023');
SELECT throws_ok($$SELECT rl_gcra('e-gcra', 15, 30, 60, -1)$$, '22023', 'quantity must not be negative', 'rl_gcra, quantity -1: 22023');
SELECT throws_ok($$SELECT rl_gcra('e-gcra', 15, 30, 60, 17)$$, '22023', 'quantity exceeds the limit max_burst + 1',
                 'rl_gcra, quantity 17 above max_burst + 1 = 16: 22023');
SELECT throws_ok($$SELECT rl_gcra('seed', 15, 30, 60, 17)$$, '22023', 'quantity exceeds the limit max_burst + 1',
                 'rl_gcra, quantity above the limit on an existing key: 22023');
SELECT throws_ok($$SELECT rl_gcra('e-gcra', NULL, 30, 60)$$, '22004', 'max_burst must not be null', 'rl_gcra, NULL max_burst: 22004');
SELECT throws_ok($$SELECT rl_gcra('e-gcra', 15, NULL, 60)$$, '22004', 'count must not be null', 'rl_gcra, NULL count: 22004');
SELECT throws_ok($$SELECT rl_gcra('e-gcra', 15, 30, NULL)$$, '22004', 'period must not be null', 'rl_gcra, NULL period: 22004');
SELECT throws_ok($$SELECT rl_gcra('e-gcra', 15, 30, 60, NULL)$$, '22004', 'quantity must not be null', 'rl_gcra, NULL quantity: 22004');

-- Read-only transactions: 25006 for everything that writes; rl_peek reads.
-- (throws_ok runs its statement in a subtransaction, which can be made
-- read-only and whose abort restores the setting.)
SELECT throws_ok($$SELECT set_config('transaction_read_only', 'on', true); SELECT rl_limit('e_tb', 'seed')$$,
                 '25006', 'cannot execute rl_limit() in a read-only transaction', 'rl_limit, read-only: 25006');
SELECT throws_ok($$SELECT set_config('transaction_read_only', 'on', true); SELECT rl_sliding_window('e_sw', 'seed')$$,
                 '25006', 'cannot execute rl_sliding_window() in a read-only transaction', 'rl_sliding_window, read-only: 25006');
SELECT throws_ok($$SELECT set_config('transaction_read_only', 'on', true); SELECT rl_reset('e_tb', 'seed')$$,
                 '25006', 'cannot execute rl_reset() in a read-only transaction', 'rl_reset, read-only: 25006');
SELECT throws_ok($$SELECT set_config('transaction_read_only', 'on', true); SELECT rl_gcra('seed', 15, 30, 60)$$,
                 '25006', 'cannot execute rl_gcra() in a read-only transaction', 'rl_gcra, read-only: 25006');
SELECT throws_ok($$SELECT set_config('transaction_read_only', 'on', true); SELECT rl_zone_set('e_tb', 'token_bucket', 1, '1 s')$$,
                 '25006', NULL::text, 'rl_zone_set, read-only: 25006');
SELECT throws_ok($$SELECT set_config('transaction_read_only', 'on', true); SELECT rl_zone_drop('e_tb')$$,
                 '25006', NULL::text, 'rl_zone_drop, read-only: 25006');
SELECT throws_ok(
    $$SELECT set_config('transaction_read_only', 'on', true);
      DO 'BEGIN IF (rl_peek(''e_tb'', ''seed'')).remaining = 15 THEN RAISE EXCEPTION USING ERRCODE = ''P0042''; END IF; END'$$,
    'P0042', NULL::text, 'rl_peek works in a read-only transaction (and sees 15 to be left)');
SELECT is(current_setting('transaction_read_only'), 'off', 'the transaction is read-write again');

-- Nothing changed.
SELECT results_eq($$SELECT * FROM ratelimit.state ORDER BY key, zone_id, part$$,
                  $$SELECT * FROM z_state ORDER BY key, zone_id, part$$,
                  'bad input left every row of ratelimit.state as it was');
SELECT results_eq($$SELECT * FROM ratelimit.zone ORDER BY zone_id$$,
                  $$SELECT * FROM z_zone ORDER BY zone_id$$,
                  'bad input left ratelimit.zone as it was');
SELECT results_eq($$SELECT * FROM ratelimit.history ORDER BY 1, 2, 3, 4, 5, 6$$,
                  $$SELECT * FROM z_history ORDER BY 1, 2, 3, 4, 5, 6$$,
                  'bad input recorded no history');
SELECT is((SELECT count(*) FROM ratelimit.state), (SELECT count(*) FROM z_state),
          'ratelimit.state has as many rows as before');
SELECT is((SELECT count(*) FROM ratelimit.zone), (SELECT count(*) FROM z_zone),
          'ratelimit.zone has as many rows as before');
SELECT is((SELECT count(*) FROM ratelimit.history), (SELECT count(*) FROM z_history),
          'ratelimit.history has as many rows as before');
SELECT is_empty($$SELECT key FROM ratelimit.state WHERE key IN ('k', 'e-cost', 'e-gcra', '') OR octet_length(key) > 1024$$,
                'no row for a key that only saw failing calls');
SELECT is_empty($$SELECT zone FROM ratelimit.zone WHERE zone IN ('e_new', '') OR octet_length(zone) > 128$$,
                'no zone from a failing rl_zone_set');
SELECT results_eq(
    $$SELECT zone, (rl_peek(zone, 'seed', 0)).remaining FROM unnest(ARRAY['e_tb', 'e_sw', 'e_fw', 'e_gcra', 'e_cron']) AS zone$$,
    $$VALUES ('e_tb', 16::bigint), ('e_sw', 2), ('e_fw', 4), ('e_gcra', 15), ('e_cron', 7)$$,
    'the seed keys hold what the seed calls left');
SELECT is((SELECT remaining FROM rl_gcra('seed', 15, 30, 60, 0)), 15::bigint,
          'rl_gcra''s seed key holds what its seed call left');

-------------------------------------------------------------------------
-- 3. Privileges of an ordinary role.
-------------------------------------------------------------------------
CREATE ROLE rl_pgtap_zone_user NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE;

SELECT function_privs_are('rl_zone_set', ARRAY['text', 'text', 'numeric', 'interval', 'bigint', 'text', 'boolean', 'text', 'boolean', 'boolean', 'boolean'],
                          'rl_pgtap_zone_user', ARRAY[]::text[], 'an ordinary role may not execute rl_zone_set');
SELECT function_privs_are('rl_zone_drop', ARRAY['text', 'boolean'],
                          'rl_pgtap_zone_user', ARRAY[]::text[], 'an ordinary role may not execute rl_zone_drop');
SELECT function_privs_are('rl_reset', ARRAY['text', 'text'],
                          'rl_pgtap_zone_user', ARRAY[]::text[], 'an ordinary role may not execute rl_reset');
SELECT function_privs_are('ratelimit', 'check_zone', ARRAY['text', 'numeric', 'interval', 'bigint', 'text'],
                          'rl_pgtap_zone_user', ARRAY[]::text[], 'an ordinary role may not execute ratelimit.check_zone');
SELECT function_privs_are('ratelimit', 'forget_zone_state', ARRAY['integer'],
                          'rl_pgtap_zone_user', ARRAY[]::text[], 'an ordinary role may not execute ratelimit.forget_zone_state');
SELECT function_privs_are('ratelimit', 'zone_changed', ARRAY[]::text[],
                          'rl_pgtap_zone_user', ARRAY[]::text[], 'an ordinary role may not execute ratelimit.zone_changed');
-- The decision functions and rl_zones are the owner's to grant (rl_grant);
-- rl_headers, pure, stays executable by PUBLIC.
SELECT function_privs_are('rl_limit', ARRAY['text', 'text', 'integer'],
                          'rl_pgtap_zone_user', ARRAY[]::text[], 'without a grant, an ordinary role may not execute rl_limit');
SELECT function_privs_are('rl_sliding_window', ARRAY['text', 'text', 'integer'],
                          'rl_pgtap_zone_user', ARRAY[]::text[], 'without a grant, an ordinary role may not execute rl_sliding_window');
SELECT function_privs_are('rl_peek', ARRAY['text', 'text', 'integer'],
                          'rl_pgtap_zone_user', ARRAY[]::text[], 'without a grant, an ordinary role may not execute rl_peek');
SELECT function_privs_are('rl_gcra', ARRAY['text', 'integer', 'integer', 'double precision', 'integer'],
                          'rl_pgtap_zone_user', ARRAY[]::text[], 'without a grant, an ordinary role may not execute rl_gcra');
SELECT function_privs_are('rl_headers', ARRAY['rl_result', 'boolean'],
                          'rl_pgtap_zone_user', ARRAY['EXECUTE'], 'an ordinary role may execute rl_headers');
SELECT table_privs_are('ratelimit', 'zone', 'rl_pgtap_zone_user', ARRAY[]::text[],
                       'an ordinary role has no privilege on ratelimit.zone');
SELECT table_privs_are('ratelimit', 'state', 'rl_pgtap_zone_user', ARRAY[]::text[],
                       'an ordinary role has no privilege on ratelimit.state');
SELECT table_privs_are('ratelimit', 'history', 'rl_pgtap_zone_user', ARRAY[]::text[],
                       'an ordinary role has no privilege on ratelimit.history');
SELECT sequence_privs_are('ratelimit', 'zone_id_seq', 'rl_pgtap_zone_user', ARRAY[]::text[],
                          'an ordinary role has no privilege on ratelimit.zone_id_seq');
SELECT table_privs_are('rl_zones', 'rl_pgtap_zone_user', ARRAY[]::text[],
                       'without a grant, an ordinary role has no privilege on rl_zones');

SET ROLE rl_pgtap_zone_user;
SELECT is(current_user::text, 'rl_pgtap_zone_user', 'now running as the ordinary role');

-- Management, reset and the internal functions are refused.
SELECT throws_ok($$SELECT rl_zone_set('u_zone', 'token_bucket', 10, '1 minute')$$,
                 '42501', 'permission denied for function rl_zone_set', 'the role cannot create a zone');
SELECT throws_ok($$SELECT rl_zone_set('e_tb', 'token_bucket', 1000, '1 second')$$,
                 '42501', 'permission denied for function rl_zone_set', 'the role cannot alter a zone');
SELECT throws_ok($$SELECT rl_zone_drop('e_tb')$$,
                 '42501', 'permission denied for function rl_zone_drop', 'the role cannot drop a zone');
SELECT throws_ok($$SELECT rl_reset('e_tb', 'seed')$$,
                 '42501', 'permission denied for function rl_reset', 'the role cannot reset a key');
SELECT throws_ok($$SELECT ratelimit.check_zone('token_bucket', 1, '1 s', NULL, 'table')$$,
                 '42501', 'permission denied for schema ratelimit', 'the role cannot call ratelimit.check_zone');
SELECT throws_ok($$SELECT ratelimit.forget_zone_state(1)$$,
                 '42501', 'permission denied for schema ratelimit', 'the role cannot call ratelimit.forget_zone_state');

-- The internal tables are out of reach.
SELECT throws_ok($$SELECT * FROM ratelimit.zone$$, '42501', 'permission denied for schema ratelimit',
                 'the role cannot SELECT from ratelimit.zone');
SELECT throws_ok($$INSERT INTO ratelimit.zone (zone, algorithm, rate, period) VALUES ('u_forged', 'fixed_window', 1000000, '1 s')$$,
                 '42501', 'permission denied for schema ratelimit', 'the role cannot INSERT into ratelimit.zone');
SELECT throws_ok($$UPDATE ratelimit.zone SET rate = 1000000$$, '42501', 'permission denied for schema ratelimit',
                 'the role cannot UPDATE ratelimit.zone');
SELECT throws_ok($$DELETE FROM ratelimit.zone$$, '42501', 'permission denied for schema ratelimit',
                 'the role cannot DELETE from ratelimit.zone');
SELECT throws_ok($$TRUNCATE ratelimit.zone$$, '42501', 'permission denied for schema ratelimit',
                 'the role cannot TRUNCATE ratelimit.zone');
SELECT throws_ok($$SELECT * FROM ratelimit.state$$, '42501', 'permission denied for schema ratelimit',
                 'the role cannot SELECT from ratelimit.state');
SELECT throws_ok($$INSERT INTO ratelimit.state (key, zone_id, tokens, updated_at) VALUES ('u_forged', 0, 1000000, now())$$,
                 '42501', 'permission denied for schema ratelimit', 'the role cannot INSERT into ratelimit.state');
SELECT throws_ok($$UPDATE ratelimit.state SET tokens = 1000000$$, '42501', 'permission denied for schema ratelimit',
                 'the role cannot UPDATE ratelimit.state');
SELECT throws_ok($$DELETE FROM ratelimit.state$$, '42501', 'permission denied for schema ratelimit',
                 'the role cannot DELETE from ratelimit.state');
SELECT throws_ok($$TRUNCATE ratelimit.state$$, '42501', 'permission denied for schema ratelimit',
                 'the role cannot TRUNCATE ratelimit.state');
SELECT throws_ok($$SELECT * FROM ratelimit.history$$, '42501', 'permission denied for schema ratelimit',
                 'the role cannot SELECT from ratelimit.history');
SELECT throws_ok($$INSERT INTO ratelimit.history VALUES (1, now(), 'e_sw', 'u_forged', 1, true)$$,
                 '42501', 'permission denied for schema ratelimit', 'the role cannot INSERT into ratelimit.history');
SELECT throws_ok($$UPDATE ratelimit.history SET allowed = false$$, '42501', 'permission denied for schema ratelimit',
                 'the role cannot UPDATE ratelimit.history');
SELECT throws_ok($$DELETE FROM ratelimit.history$$, '42501', 'permission denied for schema ratelimit',
                 'the role cannot DELETE from ratelimit.history');
SELECT throws_ok($$TRUNCATE ratelimit.history$$, '42501', 'permission denied for schema ratelimit',
                 'the role cannot TRUNCATE ratelimit.history');

-- Without a grant it cannot decide nor read rl_zones; rl_headers is open.
SELECT throws_ok($$SELECT rl_limit('e_tb', 'role-key')$$,
                 '42501', 'permission denied for function rl_limit', 'without a grant, the role cannot call rl_limit');
SELECT throws_ok($$SELECT rl_sliding_window('e_sw', 'role-key')$$,
                 '42501', 'permission denied for function rl_sliding_window',
                 'without a grant, the role cannot call rl_sliding_window');
SELECT throws_ok($$SELECT rl_peek('e_fw', 'role-key', 2)$$,
                 '42501', 'permission denied for function rl_peek', 'without a grant, the role cannot call rl_peek');
SELECT throws_ok($$SELECT rl_gcra('role-gcra', 15, 30, 60)$$,
                 '42501', 'permission denied for function rl_gcra', 'without a grant, the role cannot call rl_gcra');
SELECT throws_ok($$SELECT * FROM rl_zones$$,
                 '42501', 'permission denied for view rl_zones', 'without a grant, the role cannot read rl_zones');
SELECT lives_ok($$SELECT rl_headers(NULL::rl_result)$$, 'without a grant, the role can call rl_headers');
RESET ROLE;

-- The owner grants the decision functions and the monitoring views.
SELECT lives_ok($$SELECT rl_grant('rl_pgtap_zone_user')$$, 'rl_grant(role): the decision functions');
SELECT lives_ok($$SELECT rl_grant('rl_pgtap_zone_user', 'monitor')$$, 'rl_grant(role, ''monitor''): the views');
SELECT function_privs_are('rl_limit', ARRAY['text', 'text', 'integer'],
                          'rl_pgtap_zone_user', ARRAY['EXECUTE'], 'with rl_grant, an ordinary role may execute rl_limit');
SELECT function_privs_are('rl_sliding_window', ARRAY['text', 'text', 'integer'],
                          'rl_pgtap_zone_user', ARRAY['EXECUTE'], 'with rl_grant, an ordinary role may execute rl_sliding_window');
SELECT function_privs_are('rl_peek', ARRAY['text', 'text', 'integer'],
                          'rl_pgtap_zone_user', ARRAY['EXECUTE'], 'with rl_grant, an ordinary role may execute rl_peek');
SELECT function_privs_are('rl_gcra', ARRAY['text', 'integer', 'integer', 'double precision', 'integer'],
                          'rl_pgtap_zone_user', ARRAY['EXECUTE'], 'with rl_grant, an ordinary role may execute rl_gcra');
SELECT table_privs_are('rl_zones', 'rl_pgtap_zone_user', ARRAY['SELECT'],
                       'with rl_grant(..., ''monitor''), an ordinary role may only SELECT from rl_zones');
SELECT function_privs_are('rl_zone_set', ARRAY['text', 'text', 'numeric', 'interval', 'bigint', 'text', 'boolean', 'text', 'boolean', 'boolean', 'boolean'],
                          'rl_pgtap_zone_user', ARRAY[]::text[], 'rl_grant gives no zone management: still no rl_zone_set');
SET ROLE rl_pgtap_zone_user;

-- Deciding is open to it now.
SELECT results_eq($$SELECT allowed, capacity, remaining, txn_id IS NULL FROM rl_limit('e_tb', 'role-key')$$,
                  $$VALUES (true, 20::bigint, 19::bigint, true)$$,
                  'the role can call rl_limit');
SELECT results_eq($$SELECT allowed, remaining, txn_id = txid_current() FROM rl_sliding_window('e_sw', 'role-key')$$,
                  $$VALUES (true, 2::bigint, true)$$,
                  'the role can call rl_sliding_window, and gets the txn_id of a history zone');
SELECT results_eq($$SELECT allowed, remaining FROM rl_limit('e_sw', 'role-key', 2)$$,
                  $$VALUES (true, 0::bigint)$$,
                  'the role can call rl_limit on the history zone');
SELECT results_eq($$SELECT allowed, remaining FROM rl_limit('e_sw', 'role-key')$$,
                  $$VALUES (false, 0::bigint)$$,
                  'the role is refused on the history zone once the window is full');
SELECT results_eq($$SELECT allowed, remaining FROM rl_peek('e_fw', 'role-key', 2)$$,
                  $$VALUES (true, 3::bigint)$$,
                  'the role can call rl_peek');
SELECT results_eq($$SELECT allowed, capacity, remaining, reset_after FROM rl_gcra('role-gcra', 15, 30, 60)$$,
                  $$VALUES (true, 16::bigint, 15::bigint, interval '2 s')$$,
                  'the role can call rl_gcra');
-- (rl_headers in text_of, the call outside it: an error of rl_headers
-- does not undo the call.)
SELECT is(pg_temp.text_of(format('SELECT rl_headers(%L::rl_result)::text', r)),
          '{"RateLimit": "\"e_fw\";r=4;t=60", "RateLimit-Policy": "\"e_fw\";q=5;w=60"}',
          'the role can call rl_headers')
FROM rl_limit('e_fw', 'role-key') r;
SELECT results_eq($$SELECT zone, algorithm, rate, capacity, history FROM rl_zones WHERE zone LIKE 'e\_%' ORDER BY zone$$,
                  $$VALUES ('e_cron'::text COLLATE "C", 'token_bucket'::text, 10::numeric, 10::bigint, false),
                           ('e_fw', 'fixed_window', 5, 5, false),
                           ('e_gcra', 'gcra', 30, 16, false),
                           ('e_month', 'token_bucket', 1, 1, false),
                           ('e_sw', 'sliding_window', 3, 3, true),
                           ('e_sw_max', 'sliding_window', 1000000, 1000000, false),
                           ('e_tb', 'token_bucket', 10, 20, false)$$,
                  'the role can read rl_zones');
SELECT throws_ok($$SELECT rl_limit('e_nope', 'k')$$,
                 '42704', 'rate-limit zone "e_nope" does not exist', 'the role gets 42704 for an unknown zone');
SELECT throws_ok($$SELECT rl_limit('e_tb', 'role-key', 21)$$,
                 '22023', 'cost exceeds the capacity of zone "e_tb"', 'the role gets the same argument errors');
RESET ROLE;

SELECT results_eq(
    $$SELECT zone, key, cost, allowed, txn_id = txid_current(), recorded_at
      FROM ratelimit.history WHERE key = 'role-key' ORDER BY cost DESC, allowed DESC$$,
    $$VALUES ('e_sw'::text, 'role-key'::text, 2, true, true, timestamptz '2026-01-01 00:00:00+00'),
             ('e_sw', 'role-key', 1, true, true, '2026-01-01 00:00:00+00'),
             ('e_sw', 'role-key', 1, false, true, '2026-01-01 00:00:00+00')$$,
    'the role''s requests on the history zone were recorded, the refused one too');
SELECT ok((SELECT count(*) FROM ratelimit.state WHERE key = 'role-key') = 3,
          'the role''s calls wrote state rows (e_tb, e_sw, e_fw)');

-- With USAGE on the schema the tables, the sequence and the internal
-- functions are still refused, each by its own privilege.
GRANT USAGE ON SCHEMA ratelimit TO rl_pgtap_zone_user;
SET ROLE rl_pgtap_zone_user;
SELECT throws_ok($$SELECT * FROM ratelimit.zone$$, '42501', 'permission denied for table zone',
                 'with USAGE on the schema, ratelimit.zone is still unreadable');
SELECT throws_ok($$UPDATE ratelimit.state SET tokens = 1000000$$, '42501', 'permission denied for table state',
                 'with USAGE on the schema, ratelimit.state is still unwritable');
SELECT throws_ok($$DELETE FROM ratelimit.history$$, '42501', 'permission denied for table history',
                 'with USAGE on the schema, ratelimit.history is still unwritable');
SELECT throws_ok($$SELECT nextval('ratelimit.zone_id_seq')$$, '42501', 'permission denied for sequence zone_id_seq',
                 'with USAGE on the schema, the zone id sequence is still refused');
SELECT throws_ok($$SELECT ratelimit.check_zone('token_bucket', 1, '1 s', NULL, 'table')$$,
                 '42501', 'permission denied for function check_zone',
                 'with USAGE on the schema, ratelimit.check_zone is still refused');
SELECT throws_ok($$SELECT ratelimit.forget_zone_state(1)$$,
                 '42501', 'permission denied for function forget_zone_state',
                 'with USAGE on the schema, ratelimit.forget_zone_state is still refused');
RESET ROLE;
REVOKE USAGE ON SCHEMA ratelimit FROM rl_pgtap_zone_user;

-- A role granted EXECUTE on rl_zone_set (and rl_zone_drop, rl_reset) manages
-- zones: the functions are SECURITY DEFINER, the tables stay closed to it.
GRANT EXECUTE ON FUNCTION rl_zone_set(text, text, numeric, interval, bigint, text, boolean, text, boolean, boolean, boolean)
    TO rl_pgtap_zone_user;
SET ROLE rl_pgtap_zone_user;
SELECT lives_ok($$SELECT rl_zone_set('u_zone', 'fixed_window', 2, '1 minute', history => true)$$,
                'a role granted EXECUTE on rl_zone_set creates a zone');
SELECT results_eq($$SELECT zone, algorithm, rate, history FROM rl_zones WHERE zone = 'u_zone'$$,
                  $$VALUES ('u_zone'::text COLLATE "C", 'fixed_window'::text, 2::numeric, true)$$,
                  'its zone is listed');
SELECT results_eq($$SELECT allowed, remaining, txn_id IS NOT NULL FROM rl_limit('u_zone', 'k')$$,
                  $$VALUES (true, 1::bigint, true)$$,
                  'and works, with history');
SELECT lives_ok($$SELECT rl_zone_set('u_zone', 'fixed_window', 5, '1 minute')$$,
                'it alters the zone (history left out)');
SELECT results_eq($$SELECT allowed, remaining, txn_id IS NOT NULL FROM rl_limit('u_zone', 'k')$$,
                  $$VALUES (true, 3::bigint, true)$$,
                  'the altered zone keeps the key''s count (2 of 5 used), and its history on (left out: kept)');
SELECT throws_ok($$SELECT rl_zone_drop('u_zone')$$,
                 '42501', 'permission denied for function rl_zone_drop', 'without EXECUTE on rl_zone_drop it cannot drop');
SELECT throws_ok($$SELECT * FROM ratelimit.zone$$, '42501', 'permission denied for schema ratelimit',
                 'the zone manager still cannot read ratelimit.zone');
RESET ROLE;
GRANT EXECUTE ON FUNCTION rl_zone_drop(text, boolean), rl_reset(text, text) TO rl_pgtap_zone_user;
SET ROLE rl_pgtap_zone_user;
SELECT is(rl_reset('u_zone', 'k'), true, 'a role granted EXECUTE on rl_reset resets a key');
SELECT is((SELECT remaining FROM rl_peek('u_zone', 'k', 0)), 5::bigint, 'the key is full again');
SELECT lives_ok($$SELECT rl_limit('u_zone', 'k')$$, 'the key is used again');
SELECT lives_ok($$SELECT rl_zone_drop('u_zone')$$, 'a role granted EXECUTE on rl_zone_drop drops a zone');
SELECT throws_ok($$SELECT rl_limit('u_zone', 'k')$$,
                 '42704', 'rate-limit zone "u_zone" does not exist', 'the dropped zone is gone');
RESET ROLE;
SELECT is_empty($$SELECT 1 FROM ratelimit.zone WHERE zone = 'u_zone'$$, 'ratelimit.zone no longer has u_zone');
SELECT is_empty($$SELECT 1 FROM ratelimit.state s WHERE key = 'k' AND NOT EXISTS
                    (SELECT 1 FROM ratelimit.zone z WHERE z.zone_id = s.zone_id)$$,
                'and its state went with it');
SELECT results_eq($$SELECT count(*), count(*) FILTER (WHERE txn_id = txid_current()) FROM ratelimit.history WHERE zone = 'u_zone'$$,
                  $$VALUES (3::bigint, 3::bigint)$$,
                  'its three requests were recorded; history outlives the zone');

SELECT * FROM finish();
ROLLBACK;
