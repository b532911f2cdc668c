-- Security audit.  PUBLIC executes only the two pure functions
-- and reads nothing: an ordinary role is refused every check until the
-- owner runs rl_grant.  Granted 'limit', it checks limits but still cannot
-- read state, history or the views, write them, change zones, reset keys,
-- run the garbage collector, set the test clock or the store and proxy
-- settings, schedule refill jobs or grant itself more.  Every SECURITY
-- DEFINER function of the extension (the list is asserted: a new one
-- fails this file until it is covered here), rl_grant and rl_revoke (run
-- with the owner's rights), and every internal SQL statement the C code
-- runs as a table's owner, are immune to a hostile search_path: an
-- attacker plants, in a schema it puts before pg_catalog,
-- functions named like the pg_catalog functions those bodies call,
-- operators = <> < > || ~~ for the types they compare, and relations named
-- like the catalogs they read; every planted object logs its calls.  Nor
-- may a schema named cron that is not pg_cron's (a role with CREATE on the
-- database can make one) have its functions run by the definers that
-- remove refill jobs, or by DROP EXTENSION.  Keys
-- with quotes, backslashes, control characters, SQL-injection attempts and
-- multibyte text are stored and matched byte for byte; 1025 bytes and 1 MB
-- are refused with 22001 and store nothing (table and shmem stores).
-- Must pass with ratelimit.table_access set to auto, direct or spi; the
-- shmem part is skipped unless ratelimit is in shared_preload_libraries.
BEGIN;
SET LOCAL timezone = 'UTC';
SET LOCAL datestyle = 'ISO, YMD';
SET LOCAL client_min_messages = warning;

SELECT plan(315);

LOAD 'ratelimit';
SET LOCAL ratelimit.now_override = '2026-01-01 00:00:00+00';
SELECT diag('ratelimit.table_access = ' || current_setting('ratelimit.table_access'));
SELECT n.nspname AS ext_schema
FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace
WHERE e.extname = 'ratelimit' \gset
SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_settings WHERE name = 'ratelimit.shmem_max_keys')
       AS shmem_preloaded \gset
-- The shmem store is not transactional: this run's shmem keys are its own.
SELECT 's' || txid_current() || ':' AS pfx \gset

CREATE ROLE rl_sec_user NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE;
CREATE ROLE rl_sec_attacker NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE;
-- The attacker checks limits, refunds, manages zones and keys (it is
-- granted every admin function of the extension) and monitors them, but
-- is no superuser: none of it may run its code with the extension owner's
-- rights.
GRANT EXECUTE ON FUNCTION
    rl_zone_set(text, text, numeric, interval, bigint, text, boolean, text, boolean, boolean, boolean),
    rl_zone_drop(text, boolean), rl_reset(text, text), rl_gc(text, interval),
    rl_cron_enable(text, name), rl_cron_disable(text), rl_cron_refill(text)
    TO rl_sec_attacker;
SELECT rl_grant('rl_sec_attacker', 'limit'), rl_grant('rl_sec_attacker', 'wait'), rl_grant('rl_sec_attacker', 'refund'),
       rl_grant('rl_sec_attacker', 'monitor') \gset
CREATE SCHEMA rl_sec_evil AUTHORIZATION rl_sec_attacker;

-- A statement's result as text, or 'ERROR <sqlstate>'.  Runs under the
-- hostile search_path: no operator or function of its own is looked up.
CREATE FUNCTION pg_temp.sec_try(statement text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    result text;
BEGIN
    EXECUTE statement INTO result;
    RETURN result;
EXCEPTION WHEN OTHERS THEN
    RETURN 'ERROR ' OPERATOR(pg_catalog.||) SQLSTATE;
END
$$;
CREATE TEMP TABLE sec_out (label text PRIMARY KEY, got text);
GRANT INSERT, SELECT ON sec_out TO PUBLIC;

-------------------------------------------------------------------------
-- The attacker's traps.  Each planted function or operator logs who called
-- it (and returns what pg_catalog's would, so that a capture changes no
-- result); each planted relation logs when it is read.
-------------------------------------------------------------------------
SET ROLE rl_sec_attacker;
CREATE TABLE rl_sec_evil.log (who text, what text);
GRANT INSERT ON rl_sec_evil.log TO PUBLIC;
CREATE FUNCTION rl_sec_evil.trap(what text) RETURNS boolean
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN
    INSERT INTO rl_sec_evil.log VALUES (current_user, what);
    RETURN true;
END
$$;
DO $plant$
DECLARE
    f record;
    refs text;
BEGIN
    -- Functions: name, argument types, result type.
    FOR f IN SELECT * FROM (VALUES
        ('octet_length', 'text', 'integer'),
        ('format', 'text', 'text'),
        ('format', 'text, text', 'text'),
        ('format', 'text, integer', 'text'),
        ('format', 'text, text, text', 'text'),
        ('nextval', 'regclass', 'bigint'),
        ('nextval', 'text', 'bigint'),
        ('now', '', 'timestamptz'),
        ('current_setting', 'text', 'text'),
        ('current_setting', 'text, boolean', 'text'),
        ('set_config', 'text, text, boolean', 'text'),
        ('md5', 'text', 'text'),
        ('to_regclass', 'text', 'regclass'),
        ('current_database', '', 'name'),
        ('replace', 'text, text, text', 'text'),
        ('string_to_array', 'text, text', 'text[]'),
        ('quote_ident', 'text', 'text'),
        ('split_part', 'text, text, integer', 'text'),
        ('btrim', 'text', 'text'),
        ('txid_current', '', 'bigint'),
        ('jsonb_strip_nulls', 'jsonb', 'jsonb'),
        ('jsonb_each_text', 'jsonb', 'SETOF record'),
        -- rl_zone_set's partial changes and refusals, rl_headers
        ('left', 'text, integer', 'text'),
        ('length', 'text', 'integer'),
        ('trunc', 'numeric', 'numeric'),
        ('cardinality', 'text[]', 'integer'),
        ('array_to_string', 'text[], text', 'text'),
        ('gcd', 'numeric, numeric', 'numeric'),
        ('scale', 'numeric', 'integer'),
        ('to_hex', 'integer', 'text'),
        -- rl_cron_refill's meter
        ('pg_has_role', 'name, oid, text', 'boolean')
    ) v(name, args, ret) LOOP
        SELECT string_agg('$' || i, ', ') INTO refs
        FROM generate_series(1, coalesce(array_length(string_to_array(f.args, ','), 1), 0)) i;
        IF f.ret = 'SETOF record' THEN
            EXECUTE format($f$
                CREATE FUNCTION rl_sec_evil.%I(%s, OUT key text, OUT value text) RETURNS SETOF record
                LANGUAGE plpgsql SET search_path = pg_catalog AS $b$
                BEGIN
                    PERFORM rl_sec_evil.trap(%L);
                    RETURN QUERY SELECT * FROM pg_catalog.%I(%s);
                END $b$$f$, f.name, f.args, f.name || '(' || f.args || ')', f.name, coalesce(refs, ''));
        ELSE
            EXECUTE format($f$
                CREATE FUNCTION rl_sec_evil.%I(%s) RETURNS %s
                LANGUAGE plpgsql SET search_path = pg_catalog AS $b$
                BEGIN
                    PERFORM rl_sec_evil.trap(%L);
                    RETURN pg_catalog.%I(%s);
                END $b$$f$, f.name, f.args, f.ret, f.name || '(' || f.args || ')', f.name, coalesce(refs, ''));
        END IF;
    END LOOP;
    -- Operators: symbol, left and right types, pg_catalog's result type.
    FOR f IN SELECT row_number() OVER () AS n, * FROM (VALUES
        ('=', 'text', 'text', 'boolean'),
        ('=', 'integer', 'integer', 'boolean'),
        ('=', 'bigint', 'bigint', 'boolean'),
        ('=', 'name', 'name', 'boolean'),
        ('=', 'text', 'name', 'boolean'),
        ('=', 'name', 'text', 'boolean'),
        ('=', 'bytea', 'bytea', 'boolean'),
        ('<>', 'text', 'text', 'boolean'),
        ('<>', 'integer', 'integer', 'boolean'),
        ('<>', 'numeric', 'numeric', 'boolean'),
        ('<=', 'numeric', 'numeric', 'boolean'),
        ('<', 'bigint', 'bigint', 'boolean'),
        ('<=', 'integer', 'integer', 'boolean'),
        ('>', 'integer', 'integer', 'boolean'),
        ('||', 'text', 'text', 'text'),
        ('~~', 'text', 'text', 'boolean')
    ) v(op, l, r, ret) LOOP
        EXECUTE format($f$
            CREATE FUNCTION rl_sec_evil.op%s(a %s, b %s) RETURNS %s
            LANGUAGE plpgsql SET search_path = pg_catalog AS $b$
            BEGIN
                PERFORM rl_sec_evil.trap(%L);
                RETURN a OPERATOR(pg_catalog.%s) b;
            END $b$$f$, f.n, f.l, f.r, f.ret, f.op || '(' || f.l || ',' || f.r || ')', f.op);
        EXECUTE format('CREATE OPERATOR rl_sec_evil.%s (LEFTARG = %s, RIGHTARG = %s, FUNCTION = rl_sec_evil.op%s)',
                       f.op, f.l, f.r, f.n);
    END LOOP;
END
$plant$;
-- Relations named like what the definers read unqualified or from schema
-- ratelimit: reading them logs, and they claim pg_cron is installed and
-- every role exists.
CREATE VIEW rl_sec_evil.pg_extension AS
    SELECT 'pg_cron'::name AS extname, '1.5'::text AS extversion WHERE rl_sec_evil.trap('pg_extension');
CREATE VIEW rl_sec_evil.pg_roles AS
    SELECT r::name AS rolname FROM unnest(ARRAY['ratelimit_refill', 'rl_sec_attacker']) r
    WHERE rl_sec_evil.trap('pg_roles');
CREATE VIEW rl_sec_evil.state AS SELECT 1 AS key WHERE rl_sec_evil.trap('state');
CREATE VIEW rl_sec_evil.zone AS SELECT 1 AS zone WHERE rl_sec_evil.trap('zone');
CREATE VIEW rl_sec_evil.history AS SELECT 1 AS zone WHERE rl_sec_evil.trap('history');
RESET ROLE;

-- The hostile search_path: the attacker's schema before pg_catalog.
SELECT 'rl_sec_evil, pg_catalog, ' || quote_ident(:'ext_schema') AS hostile_path \gset

-------------------------------------------------------------------------
-- 1. rl_gc, first (it must run before any rate-limit call of this
-- transaction): its statements run as the state table's owner under the
-- caller's search_path.
-------------------------------------------------------------------------
-- Idle rows: an old bucket of rl_token_bucket, and an empty sliding window
-- (header: format 1, chunks 1..1, newest 0, no entries).
SELECT rl_zone_set('sec_gc_sw', 'sliding_window', 10, '1 minute') \gset
INSERT INTO ratelimit.state (key, zone_id, part, tokens, updated_at, entries)
VALUES ('sec-gc-old', 0, 0, 3, '2025-01-01 00:00:00+00', NULL),
       ('sec-gc-sw', (SELECT zone_id FROM ratelimit.zone WHERE zone = 'sec_gc_sw'), 0, 0,
        '2025-01-01 00:00:00+00', '\x0101010000');
SET ROLE rl_sec_attacker;
SELECT set_config('search_path', :'hostile_path', true) \gset
INSERT INTO pg_temp.sec_out VALUES ('gc', pg_temp.sec_try($q$SELECT rl_gc(NULL, '1 day') OPERATOR(pg_catalog.>=) 1$q$));
RESET ROLE;
SET LOCAL search_path TO DEFAULT;
SELECT is((SELECT got FROM sec_out WHERE label = 'gc'), 'true',
          'rl_gc under a hostile search_path removed idle keys');
SELECT is_empty($$SELECT 1 FROM ratelimit.state WHERE key IN ('sec-gc-old', 'sec-gc-sw')$$,
                'the idle bucket and the idle sliding window are gone');
SELECT is_empty($$SELECT who, what FROM rl_sec_evil.log$$,
                'rl_gc ran none of the attacker''s objects (its SQL, run as the state table''s owner, is schema-qualified)');
TRUNCATE rl_sec_evil.log;

-------------------------------------------------------------------------
-- 2. Catalog view of the privileges.
-------------------------------------------------------------------------
CREATE FUNCTION pg_temp.ext_functions() RETURNS TABLE (fn text, secdef boolean, nsp name)
LANGUAGE sql STABLE AS $$
    SELECT p.oid::pg_catalog.regprocedure::text, p.prosecdef, n.nspname
    FROM pg_catalog.pg_proc p
    JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
    JOIN pg_catalog.pg_depend d
      ON d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND d.objid = p.oid AND d.deptype = 'e'
    JOIN pg_catalog.pg_extension e
      ON d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass AND d.refobjid = e.oid
    WHERE e.extname = 'ratelimit'
$$;

SELECT results_eq(
    $$SELECT fn FROM pg_temp.ext_functions() WHERE secdef ORDER BY fn COLLATE "C"$$,
    ARRAY['ratelimit.counters()',
          'ratelimit.keys()',
          'ratelimit.leases()',
          'ratelimit.node_counters()',
          'ratelimit.node_shmem_keys()',
          'rl_cron_disable(text)',
          'rl_cron_enable(text,name)',
          'rl_cron_refill(text)',
          'rl_zone_drop(text,boolean)',
          'rl_zone_set(text,text,numeric,interval,bigint,text,boolean,text,boolean,boolean,boolean)'],
    'the SECURITY DEFINER functions of the extension are exactly the ten this file attacks');
-- The owner is the one role that runs rl_grant and rl_revoke, with its own
-- rights: they, and the helpers they call, pin search_path as well.
SELECT results_eq(
    $$SELECT fn, s.setting COLLATE "default"
      FROM pg_temp.ext_functions() f, pg_catalog.pg_proc p, unnest(p.proconfig) s(setting)
      WHERE p.oid = f.fn::regprocedure
        AND p.proname IN ('rl_grant', 'rl_revoke', 'privilege_set', 'members', 'change_privileges')
        AND s.setting LIKE 'search\_path=%'
      ORDER BY fn COLLATE "C"$$,
    $$VALUES ('ratelimit.change_privileges(text,regrole,text)'::text, 'search_path=pg_catalog, pg_temp'::text),
             ('ratelimit.members()', 'search_path=pg_catalog, pg_temp'),
             ('ratelimit.privilege_set(text)', 'search_path=pg_catalog, pg_temp'),
             ('rl_grant(regrole,text)', 'search_path=pg_catalog, pg_temp'),
             ('rl_revoke(regrole,text)', 'search_path=pg_catalog, pg_temp')$$,
    'rl_grant, rl_revoke and their helpers privilege_set(), members() and change_privileges() pin search_path');
-- PostgREST publishes whatever a request's role may execute, and anyone's
-- role may execute what PUBLIC may.
SELECT results_eq(
    $$SELECT fn FROM pg_temp.ext_functions() f, pg_catalog.pg_proc p,
             aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
      WHERE p.oid = f.fn::regprocedure AND a.grantee = 0
      ORDER BY fn COLLATE "C"$$,
    ARRAY['rl_client_address(text,text,integer,text)', 'rl_headers(rl_result,boolean)'],
    'PUBLIC executes two functions of the extension, both pure: rl_client_address and rl_headers');
CREATE FUNCTION pg_temp.ext_relations_for(role name) RETURNS SETOF text
LANGUAGE sql STABLE AS $$
    SELECT c.oid::regclass::text FROM pg_catalog.pg_class c
    JOIN pg_catalog.pg_depend d ON d.classid = 'pg_catalog.pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e'
    JOIN pg_catalog.pg_extension e ON d.refobjid = e.oid AND e.extname = 'ratelimit'
    WHERE has_table_privilege(role, c.oid, 'SELECT, INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER')
       OR CASE WHEN c.relkind = 'S' THEN has_sequence_privilege(role, c.oid, 'USAGE, SELECT, UPDATE') END
$$;
SELECT is_empty(
    $$SELECT c.oid::regclass::text, a.privilege_type FROM pg_catalog.pg_class c
      JOIN pg_catalog.pg_depend d ON d.classid = 'pg_catalog.pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e'
      JOIN pg_catalog.pg_extension e ON d.refobjid = e.oid AND e.extname = 'ratelimit',
      aclexplode(coalesce(c.relacl, acldefault(CASE WHEN c.relkind = 'S' THEN 's' ELSE 'r' END::"char", c.relowner))) a
      WHERE a.grantee = 0$$,
    'PUBLIC holds no privilege on any relation of the extension (rl_zones and rl_counters included)');
SELECT results_eq(
    $$SELECT fn FROM pg_temp.ext_functions()
      WHERE has_function_privilege('rl_sec_user', fn::regprocedure, 'EXECUTE')
      ORDER BY fn COLLATE "C"$$,
    ARRAY['rl_client_address(text,text,integer,text)', 'rl_headers(rl_result,boolean)'],
    'an ungranted role may execute those two and nothing else, internal functions included');
SELECT is_empty($$SELECT * FROM pg_temp.ext_relations_for('rl_sec_user')$$,
                'an ungranted role has no privilege on any relation of the extension');
SELECT is_empty(
    $$SELECT a.privilege_type FROM pg_catalog.pg_namespace n,
             aclexplode(coalesce(n.nspacl, acldefault('n', n.nspowner))) a
      WHERE n.nspname = 'ratelimit' AND a.grantee = 0$$,
    'PUBLIC holds no privilege on schema ratelimit');
-- guard_error only chooses how rl_http_guard words its refusal; how many
-- proxies to trust (and in which header) decides whose key a request
-- takes, and the IPv6 prefix how many keys a client has, so those three
-- are the superuser's.
SELECT results_eq(
    $$SELECT name::text, context::text FROM pg_catalog.pg_settings WHERE name LIKE 'ratelimit.%' ORDER BY 1$$,
    CASE WHEN :'shmem_preloaded'
         THEN $$VALUES ('ratelimit.default_store', 'superuser'), ('ratelimit.guard_error', 'user'),
                       ('ratelimit.ipv6_prefix', 'superuser'),
                       ('ratelimit.now_override', 'superuser'), ('ratelimit.proxy_header', 'superuser'),
                       ('ratelimit.shmem_full_policy', 'superuser'), ('ratelimit.shmem_max_keys', 'postmaster'),
                       ('ratelimit.shmem_max_lease_keys', 'postmaster'),
                       ('ratelimit.shmem_save_interval', 'sighup'),
                       ('ratelimit.table_access', 'superuser'), ('ratelimit.trusted_proxies', 'superuser')$$
         ELSE $$VALUES ('ratelimit.default_store', 'superuser'), ('ratelimit.guard_error', 'user'),
                       ('ratelimit.ipv6_prefix', 'superuser'),
                       ('ratelimit.now_override', 'superuser'), ('ratelimit.proxy_header', 'superuser'),
                       ('ratelimit.shmem_full_policy', 'superuser'),
                       ('ratelimit.table_access', 'superuser'), ('ratelimit.trusted_proxies', 'superuser')$$ END,
    'every ratelimit.* setting but guard_error is superuser-only (or set in postgresql.conf: at server start, or at a reload)');

-------------------------------------------------------------------------
-- 3. As an ordinary role: refused until granted, then what it may do.
-------------------------------------------------------------------------
SELECT rl_zone_set('sec_pub_tb', 'token_bucket', 10, '1 minute'),
       rl_zone_set('sec_pub_sw', 'sliding_window', 10, '1 minute'),
       rl_zone_set('sec_conc', 'concurrency', 2, '1 minute', history => true) \gset
-- A cron zone without a usable pg_cron here (this database is not
-- cron.database_name): rl_zone_set refuses a cron zone no job could
-- refill, so the superuser writes the configuration directly, as a
-- restored dump fills the zone table.
INSERT INTO ratelimit.zone (zone, algorithm, rate, period, burst, refill)
VALUES ('sec_pub_cron', 'token_bucket', 10, '1 minute', NULL, 'cron');
INSERT INTO ratelimit.history VALUES (1, '2026-01-01 00:00:00+00', 'sec_pub_tb', 'sec-hist', 1, true);
SELECT count(*) AS zones_before FROM ratelimit.zone \gset
SELECT count(*) AS state_before FROM ratelimit.state \gset

-- Never granted: PostgreSQL refuses before any code of the extension runs.
SET ROLE rl_sec_user;
SELECT throws_ok(s, '42501', 'permission denied for function ' || f, 'an ungranted role cannot call ' || f)
FROM (VALUES ('rl_token_bucket', $s$SELECT rl_token_bucket('sec-pub', 1, 10, 2)$s$),
             ('rl_limit', $s$SELECT rl_limit('sec_pub_tb', 'sec-pub', 3)$s$),
             ('rl_limit', $s$SELECT rl_limit(ARRAY['sec_pub_tb', 'sec_pub_sw'], 'sec-pub', 3)$s$),
             ('rl_refund', $s$SELECT rl_refund('sec_pub_tb', 'sec-pub', 3)$s$),
             ('rl_sliding_window', $s$SELECT rl_sliding_window('sec_pub_sw', 'sec-pub', 4)$s$),
             ('rl_peek', $s$SELECT rl_peek('sec_pub_tb', 'sec-pub', 1)$s$),
             ('rl_gcra', $s$SELECT rl_gcra('sec-pub', 15, 30, 60)$s$),
             ('rl_http_guard', $s$SELECT rl_http_guard('sec_pub_tb', 'sec-guard')$s$),
             ('rl_wait', $s$SELECT rl_wait('sec_pub_tb', 'sec-pub', 1, '0')$s$),
             ('rl_acquire', $s$SELECT rl_acquire('sec_conc', 'sec-pub')$s$),
             ('rl_release', $s$SELECT rl_release('1:0123456789abcdef:sec-pub')$s$)) t(f, s);
SELECT throws_ok('SELECT * FROM ' || v, '42501', 'permission denied for view ' || v, 'an ungranted role cannot read ' || v)
FROM (VALUES ('rl_zones'), ('rl_counters'), ('rl_leases')) t(v);
RESET ROLE;

SELECT rl_grant('rl_sec_user') \gset
-- (What 'limit' grants exactly: privileges.sql.)
SELECT results_eq(
    $$SELECT fn FROM pg_temp.ext_functions()
      WHERE nsp <> 'ratelimit' AND NOT has_function_privilege('rl_sec_user', fn::regprocedure, 'EXECUTE')
      ORDER BY fn COLLATE "C"$$,
    ARRAY['rl_citus_setup()',
          'rl_cron_disable(text)',
          'rl_cron_enable(text,name)',
          'rl_cron_refill(text)',
          'rl_gc(text,interval)',
          'rl_grant(regrole,text)',
          'rl_refund(text,text,integer)',
          'rl_reset(text,text)',
          'rl_revoke(regrole,text)',
          'rl_wait(text,text,integer,interval)',
          'rl_zone_drop(text,boolean)',
          'rl_zone_set(text,text,numeric,interval,bigint,text,boolean,text,boolean,boolean,boolean)'],
    'and none of the admin functions, nor rl_refund and rl_wait (sets of their own), nor rl_grant and rl_revoke');
-- A role that has USAGE on schema ratelimit (the refill job's role does)
-- must find nothing there to call.
SELECT is_empty(
    $$SELECT fn FROM pg_temp.ext_functions()
      WHERE nsp = 'ratelimit' AND has_function_privilege('rl_sec_user', fn::regprocedure, 'EXECUTE')$$,
    'nor any internal function');
SELECT is_empty($$SELECT * FROM pg_temp.ext_relations_for('rl_sec_user')$$,
                'nor any relation of the extension');

SET ROLE rl_sec_user;
SELECT is(rl_token_bucket('sec-pub', 1, 10, 2), 8::bigint, 'an ordinary role calls rl_token_bucket');
SELECT results_eq($$SELECT allowed, remaining FROM rl_limit('sec_pub_tb', 'sec-pub', 3)$$,
                  $$VALUES (true, 7::bigint)$$, 'an ordinary role calls rl_limit');
SELECT results_eq($$SELECT allowed, remaining, zone FROM rl_limit(ARRAY['sec_pub_tb', 'sec_pub_sw'], 'sec-pub-multi', 2)$$,
                  $$VALUES (true, 8::bigint, 'sec_pub_sw'::text)$$,
                  'an ordinary role calls rl_limit on two zones (8 left in each: the one full again later decides)');
SELECT results_eq($$SELECT allowed, remaining FROM rl_sliding_window('sec_pub_sw', 'sec-pub', 4)$$,
                  $$VALUES (true, 6::bigint)$$, 'an ordinary role calls rl_sliding_window');
SELECT results_eq($$SELECT allowed, remaining FROM rl_peek('sec_pub_tb', 'sec-pub', 1)$$,
                  $$VALUES (true, 6::bigint)$$, 'an ordinary role calls rl_peek');
SELECT results_eq($$SELECT allowed, capacity, remaining FROM rl_gcra('sec-pub', 15, 30, 60)$$,
                  $$VALUES (true, 16::bigint, 15::bigint)$$, 'an ordinary role calls rl_gcra');
-- (sec_try: an error is a result to compare, not the end of the file.)
SELECT is(pg_temp.sec_try($q$SELECT rl_headers(r)::text FROM rl_limit('sec_pub_tb', 'sec-pub', 0) r$q$),
          '{"RateLimit": "\"sec_pub_tb\";r=7;t=18", "RateLimit-Policy": "\"sec_pub_tb\";q=10;w=60"}',
          'an ordinary role calls rl_headers');
SELECT is(pg_temp.sec_try($q$SELECT rl_http_guard('sec_pub_tb', 'sec-guard')$q$), 'ERROR 55000',
          'an ordinary role calls rl_http_guard (which refuses a table zone; a shmem zone: section 8)');
SELECT results_eq($$SELECT allowed, remaining FROM rl_limit('sec_pub_cron', 'sec-pub', 2)$$,
                  $$VALUES (true, 8::bigint)$$, 'an ordinary role calls rl_limit on a cron-refilled zone');
SELECT throws_ok($$SELECT rl_wait('sec_pub_tb', 'sec-pub-wait', 2, '0')$$, '42501',
                 'permission denied for function rl_wait', 'granted ''limit'' only, a role cannot call rl_wait');
RESET ROLE;
SELECT rl_grant('rl_sec_user', 'wait') \gset
SET ROLE rl_sec_user;
SELECT results_eq($$SELECT allowed, remaining FROM rl_wait('sec_pub_tb', 'sec-pub-wait', 2, '0')$$,
                  $$VALUES (true, 8::bigint)$$, 'granted ''wait'', an ordinary role calls rl_wait');
RESET ROLE;
SELECT rl_revoke('rl_sec_user', 'wait') \gset
SET ROLE rl_sec_user;
SELECT lease AS sec_pub_lease FROM rl_acquire('sec_conc', 'sec-pub') \gset
SELECT ok(:'sec_pub_lease' IS NOT NULL, 'an ordinary role calls rl_acquire');
SELECT is(rl_release(:'sec_pub_lease'), true, 'an ordinary role calls rl_release');
-- 'limit' opens no view.
SELECT throws_ok('SELECT * FROM ' || v, '42501', 'permission denied for view ' || v,
                 'granted ''limit'' only, a role cannot read ' || v)
FROM (VALUES ('rl_zones'), ('rl_counters'), ('rl_leases')) t(v);
RESET ROLE;

SELECT rl_grant('rl_sec_user', 'monitor') \gset
SELECT results_eq($$SELECT r FROM pg_temp.ext_relations_for('rl_sec_user') r ORDER BY r COLLATE "C"$$,
                  ARRAY['rl_counters', 'rl_keys', 'rl_leases', 'rl_zones'],
                  'granted ''monitor'' as well, it may read the four views and no other relation');
SET ROLE rl_sec_user;
SELECT results_eq($$SELECT zone::text, rate FROM rl_zones WHERE zone LIKE 'sec\_pub\_%' ORDER BY zone COLLATE "C"$$,
                  $$VALUES ('sec_pub_cron'::text COLLATE "C", 10::numeric), ('sec_pub_sw', 10), ('sec_pub_tb', 10)$$,
                  'an ordinary role granted ''monitor'' reads rl_zones');
SELECT lives_ok($$SELECT * FROM rl_counters$$, 'an ordinary role granted ''monitor'' reads rl_counters');
SELECT lives_ok($$SELECT * FROM rl_leases$$, 'an ordinary role granted ''monitor'' reads rl_leases');
RESET ROLE;
-- What follows holds for 'limit' alone.
SELECT rl_revoke('rl_sec_user', 'monitor') \gset

-------------------------------------------------------------------------
-- 4. Granted 'limit': what it still may not do (42501).
-------------------------------------------------------------------------
CREATE FUNCTION pg_temp.denied(what text) RETURNS TABLE (statement text, label text)
LANGUAGE sql AS $$
    SELECT s, format('%s: %s', what, s)
    FROM unnest(ARRAY[
        'SELECT * FROM ratelimit.state',
        $s$INSERT INTO ratelimit.state (key, tokens, updated_at) VALUES ('sec-forged', 1000000, now())$s$,
        'UPDATE ratelimit.state SET tokens = 1000000',
        'DELETE FROM ratelimit.state',
        'TRUNCATE ratelimit.state',
        'SELECT * FROM ratelimit.zone',
        $s$INSERT INTO ratelimit.zone (zone, algorithm, rate, period) VALUES ('sec_forged', 'token_bucket', 1000000, '1 second')$s$,
        'UPDATE ratelimit.zone SET rate = 1000000',
        'DELETE FROM ratelimit.zone',
        'TRUNCATE ratelimit.zone',
        'SELECT * FROM ratelimit.history',
        $s$INSERT INTO ratelimit.history VALUES (1, now(), 'sec_pub_tb', 'sec-forged', 1, true)$s$,
        'UPDATE ratelimit.history SET allowed = true',
        'DELETE FROM ratelimit.history',
        'TRUNCATE ratelimit.history',
        'SELECT * FROM ratelimit.token_bucket',
        $s$INSERT INTO ratelimit.token_bucket VALUES ('sec-forged', 1000000, 0, now())$s$,
        'UPDATE ratelimit.token_bucket SET tokens = 1000000',
        'DELETE FROM ratelimit.token_bucket',
        'SELECT * FROM ratelimit.retired_zone_id',
        $s$INSERT INTO ratelimit.retired_zone_id VALUES (1000000, 'sec_forged')$s$,
        'DELETE FROM ratelimit.retired_zone_id',
        'SELECT * FROM ratelimit.zone_id_seq',
        $s$SELECT nextval('ratelimit.zone_id_seq')$s$,
        $s$SELECT setval('ratelimit.zone_id_seq', 1)$s$,
        'UPDATE ratelimit.zone_id_seq SET last_value = 1',
        'INSERT INTO ratelimit.zone_id_seq VALUES (1, 0, false)',
        'DELETE FROM ratelimit.zone_id_seq',
        'SELECT * FROM rl_zones',
        'SELECT * FROM rl_counters',
        'SELECT ratelimit.counters()',
        'SELECT ratelimit.shmem_counters()',
        'SELECT ratelimit.shmem_keys()',
        'SELECT ratelimit.keys()',
        'SELECT ratelimit.leases()',
        'SELECT ratelimit.lease_list()',
        'SELECT * FROM rl_leases',
        'SELECT ratelimit.node_counters()',
        'SELECT ratelimit.node_shmem_keys()',
        'SELECT ratelimit.zones_changed()',
        'SELECT ratelimit.state_is_distributed()',
        $s$SELECT ratelimit.on_every_node('SELECT ''[]''')$s$,
        'SELECT rl_citus_setup()',
        $s$SELECT ratelimit.check_zone('token_bucket', 1, '1 s', NULL, 'table')$s$,
        'SELECT ratelimit.forget_zone_state(1)',
        'SELECT ratelimit.unschedule_refill(1)',
        $s$SELECT ratelimit.cron_plan('1.4', 1, '1 s')$s$,
        'SELECT ratelimit.cron_job_name(1)',
        'SELECT ratelimit.clock()',
        'SELECT * FROM ratelimit.cron_refill_due',
        $s$INSERT INTO ratelimit.cron_refill_due VALUES (1, 'infinity')$s$,
        'DELETE FROM ratelimit.cron_refill_due',
        'SELECT ratelimit.pg_cron_version()',
        'SELECT ratelimit.flush_zone_state(1)',
        $s$SELECT ratelimit.period_micros('1 second')$s$,
        'SELECT ratelimit.drop_refill_jobs()',
        'SELECT ratelimit.zone_changed()',
        $s$SELECT ratelimit.privilege_set('limit')$s$,
        $s$SELECT * FROM ratelimit.members()$s$,
        $s$SELECT ratelimit.change_privileges('GRANT', 'rl_sec_user', 'monitor')$s$,
        $s$SELECT rl_grant('rl_sec_user', 'monitor')$s$,
        $s$SELECT rl_grant('rl_sec_user', 'refund')$s$,
        $s$SELECT rl_revoke('rl_sec_user')$s$,
        $s$SELECT rl_zone_set('sec_forged', 'token_bucket', 1000000, '1 second')$s$,
        $s$SELECT rl_zone_set('sec_pub_tb', 'token_bucket', 1000000, '1 second')$s$,
        $s$SELECT rl_zone_drop('sec_pub_tb')$s$,
        $s$SELECT rl_reset('sec_pub_tb', 'sec-pub')$s$,
        $s$SELECT rl_refund('sec_pub_tb', 'sec-pub', 3)$s$,
        'SELECT rl_gc()',
        $s$SELECT rl_gc('sec_pub_tb', '1 second')$s$,
        $s$SELECT rl_cron_enable('sec_pub_cron')$s$,
        $s$SELECT rl_cron_enable('sec_pub_cron', 'rl_sec_user')$s$,
        $s$SELECT rl_cron_disable('sec_pub_cron')$s$,
        $s$SELECT rl_cron_refill('sec_pub_cron')$s$,
        'SELECT * FROM rl_keys',
        $s$SET ratelimit.now_override = '2030-01-01 00:00:00+00'$s$,
        $s$SET LOCAL ratelimit.now_override = ''$s$,
        'RESET ratelimit.now_override',
        $s$SELECT set_config('ratelimit.now_override', '2030-01-01 00:00:00+00', true)$s$,
        'SET ratelimit.default_store = shmem',
        $s$SELECT set_config('ratelimit.default_store', 'shmem', true)$s$,
        'SET ratelimit.table_access = spi',
        $s$SELECT set_config('ratelimit.table_access', 'direct', true)$s$,
        'SET ratelimit.shmem_full_policy = deny',
        $s$SELECT set_config('ratelimit.shmem_full_policy', 'error', true)$s$,
        'SET ratelimit.trusted_proxies = 5',
        $s$SELECT set_config('ratelimit.trusted_proxies', '0', true)$s$,
        'SET ratelimit.proxy_header = forwarded',
        $s$SELECT set_config('ratelimit.proxy_header', 'forwarded', true)$s$,
        $s$ALTER ROLE rl_sec_user SET ratelimit.now_override = '2030-01-01 00:00:00+00'$s$,
        'ALTER ROLE rl_sec_user SET ratelimit.default_store = shmem'
    ]) WITH ORDINALITY AS t(s, n)
    ORDER BY n
$$;
SET ROLE rl_sec_user;
SELECT throws_ok(statement, '42501', NULL, label) FROM pg_temp.denied('no USAGE on schema ratelimit');
SELECT throws_ok('TRUNCATE ratelimit.zone_id_seq', '42501', NULL,
                 'no USAGE on schema ratelimit: TRUNCATE ratelimit.zone_id_seq');
SELECT results_eq($$SELECT current_setting('ratelimit.now_override'), current_setting('ratelimit.default_store'),
                           current_setting('ratelimit.table_access') IN ('auto', 'direct', 'spi'),
                           current_setting('ratelimit.shmem_full_policy'),
                           current_setting('ratelimit.trusted_proxies'), current_setting('ratelimit.proxy_header')$$,
                  $$VALUES ('2026-01-01 00:00:00+00'::text, 'table'::text, true, 'allow'::text,
                            '1'::text, 'x-forwarded-for'::text)$$,
                  'the refused SETs changed no setting');
RESET ROLE;

-- Defence in depth: a role with USAGE on the schema (as the refill job's
-- role has) still meets each object's own privileges.
GRANT USAGE ON SCHEMA ratelimit TO rl_sec_user;
SET ROLE rl_sec_user;
SELECT throws_ok(statement, '42501', NULL, label) FROM pg_temp.denied('USAGE on schema ratelimit');
RESET ROLE;
REVOKE USAGE ON SCHEMA ratelimit FROM rl_sec_user;

SELECT results_eq($$SELECT count(*) FROM ratelimit.zone$$, ARRAY[:'zones_before'::bigint],
                  'the refused calls left the zones alone');
SELECT is_empty($$SELECT 1 FROM ratelimit.zone WHERE rate = 1000000 OR zone = 'sec_forged'$$,
                'no forged or altered zone');
SELECT is_empty($$SELECT 1 FROM ratelimit.state WHERE key = 'sec-forged' OR tokens >= 1000000$$,
                'no forged state');
SELECT is_empty($$SELECT 1 FROM ratelimit.retired_zone_id WHERE zone = 'sec_forged'$$,
                'no forged retired zone id');
SELECT results_eq($$SELECT key, allowed FROM ratelimit.history WHERE zone = 'sec_pub_tb' ORDER BY key COLLATE "C"$$,
                  $$VALUES ('sec-hist'::text, true)$$,
                  'the history holds nothing forged');
SELECT is((SELECT tokens FROM ratelimit.state s JOIN ratelimit.zone z USING (zone_id)
           WHERE z.zone = 'sec_pub_tb' AND s.key = 'sec-pub'), 7::bigint,
          'the role''s key in sec_pub_tb was neither reset, refunded nor refilled');
SELECT is((SELECT refill_tick FROM ratelimit.zone WHERE zone = 'sec_pub_cron'), NULL::interval,
          'no refill job was enabled for the role');
SELECT is(current_setting('ratelimit.now_override'), '2026-01-01 00:00:00+00',
          'the test clock is the superuser''s');
SELECT is_empty($$SELECT 1 FROM pg_catalog.pg_db_role_setting s JOIN pg_catalog.pg_roles r ON r.oid = s.setrole
                  WHERE r.rolname = 'rl_sec_user'$$,
                'the role gave itself no setting with ALTER ROLE');

-------------------------------------------------------------------------
-- 5. The traps are live: a SECURITY DEFINER function that does not pin its
-- search_path is captured by them (so the checks below can fail).
-------------------------------------------------------------------------
CREATE FUNCTION public.rl_sec_unpinned_probe(z text) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    n int;
BEGIN
    IF octet_length(z) > 128 OR z = '' THEN
        RETURN 'long';
    END IF;
    SELECT count(*) INTO n FROM pg_extension WHERE extname = 'pg_cron';
    RETURN format('%s', z) || n;
END
$$;
GRANT EXECUTE ON FUNCTION public.rl_sec_unpinned_probe(text) TO rl_sec_attacker;
SET ROLE rl_sec_attacker;
SELECT set_config('search_path', :'hostile_path', true) \gset
INSERT INTO pg_temp.sec_out VALUES ('probe', pg_temp.sec_try($q$SELECT rl_sec_unpinned_probe('z')$q$));
RESET ROLE;
SET LOCAL search_path TO DEFAULT;
DROP FUNCTION public.rl_sec_unpinned_probe(text);
SELECT is((SELECT got FROM sec_out WHERE label = 'probe'), 'z1', 'the unpinned probe returned what it would anyway');
SELECT is_empty($$SELECT 1 FROM rl_sec_evil.log WHERE who <> current_user$$,
                'the traps ran as the probe''s owner');
SELECT results_eq(
    $$SELECT what FROM (SELECT DISTINCT what FROM rl_sec_evil.log) t ORDER BY what COLLATE "C"$$,
    ARRAY['=(name,name)', '=(text,text)', '>(integer,integer)', 'format(text, text)', 'octet_length(text)', 'pg_extension'],
    'the probe ran the planted functions, operators and catalog view');
TRUNCATE rl_sec_evil.log;

-------------------------------------------------------------------------
-- 6. Every SECURITY DEFINER function, called by the attacker under the
-- hostile search_path.
-------------------------------------------------------------------------
-- Counters of a dropped zone exercise counters()'s name of a retired id.
SELECT rl_zone_set('sec_dropped', 'token_bucket', 10, '1 minute') \gset
SELECT allowed FROM rl_limit('sec_dropped', 'k') \gset
SELECT rl_zone_drop('sec_dropped') \gset
-- A cron zone for the attacker to change: rl_zone_set refuses to create
-- one here (this database is not cron.database_name), so the superuser
-- writes the configuration directly, as a restored dump fills the table.
INSERT INTO ratelimit.zone (zone, algorithm, rate, period, burst, refill)
VALUES ('sec_cron', 'token_bucket', 60, '1 minute', NULL, 'cron');
-- A lease held, for rl_leases (ratelimit.leases()) to show.
SELECT lease IS NOT NULL AS held FROM rl_acquire('sec_conc', 'sec-held') \gset

SET ROLE rl_sec_attacker;
SELECT set_config('search_path', :'hostile_path', true) \gset
INSERT INTO pg_temp.sec_out VALUES
    ('def01 create', pg_temp.sec_try($q$SELECT rl_zone_set('sec_tb', 'token_bucket', 10, '1 minute')$q$)),
    ('def02 name too long', pg_temp.sec_try($q$SELECT rl_zone_set(repeat('z', 129), 'token_bucket', 10, '1 minute')$q$)),
    ('def03 empty name', pg_temp.sec_try($q$SELECT rl_zone_set('', 'token_bucket', 10, '1 minute')$q$)),
    ('def04 bad refill', pg_temp.sec_try($q$SELECT rl_zone_set('sec_x', 'token_bucket', 10, '1 minute', refill => 'x')$q$)),
    ('def05 alter', pg_temp.sec_try($q$SELECT rl_zone_set('sec_tb', 'token_bucket', 20, '1 minute', burst => 5)$q$)),
    ('def06 calls', pg_temp.sec_try($q$SELECT remaining FROM rl_limit('sec_tb', 'k', 2)$q$)),
    ('def07a new algorithm', pg_temp.sec_try($q$SELECT rl_zone_set('sec_tb', 'fixed_window', 20, '1 minute')$q$)),
    ('def07b new algorithm, reset', pg_temp.sec_try($q$SELECT rl_zone_set('sec_tb', 'fixed_window', 20, '1 minute', reset => true)$q$)),
    ('def07c partial change', pg_temp.sec_try($q$SELECT rl_zone_set('sec_tb', rate => 30)$q$)),
    ('def08 cron zone', pg_temp.sec_try($q$SELECT rl_zone_set('sec_cron_new', 'token_bucket', 60, '1 minute', refill => 'cron')$q$)),
    ('def09 cron call', pg_temp.sec_try($q$SELECT remaining FROM rl_limit('sec_cron', 'k', 50)$q$)),
    ('def10 cron burst', pg_temp.sec_try($q$SELECT rl_zone_set('sec_cron', 'token_bucket', 60, '1 minute', burst => 100, refill => 'cron')$q$)),
    ('def11 cron_enable', pg_temp.sec_try($q$SELECT rl_cron_enable('sec_cron')$q$)),
    ('def12 cron_enable role', pg_temp.sec_try($q$SELECT rl_cron_enable('sec_cron', 'rl_sec_attacker')$q$)),
    ('def13 cron_enable inline', pg_temp.sec_try($q$SELECT rl_cron_enable('sec_tb')$q$)),
    ('def14 cron_enable unknown', pg_temp.sec_try($q$SELECT rl_cron_enable('sec_nope')$q$)),
    ('def15 cron_disable', pg_temp.sec_try($q$SELECT rl_cron_disable('sec_cron')$q$)),
    ('def16 cron_disable unknown', pg_temp.sec_try($q$SELECT rl_cron_disable('sec_nope')$q$)),
    ('def17a cron to inline', pg_temp.sec_try($q$SELECT rl_zone_set('sec_cron', refill => 'inline')$q$)),
    ('def17b cron to inline, reset', pg_temp.sec_try($q$SELECT rl_zone_set('sec_cron', refill => 'inline', reset => true)$q$)),
    ('def18 drop', pg_temp.sec_try($q$SELECT rl_zone_drop('sec_tb')$q$)),
    ('def19 drop if exists', pg_temp.sec_try($q$SELECT rl_zone_drop('sec_nope', true)$q$)),
    ('def20 drop unknown', pg_temp.sec_try($q$SELECT rl_zone_drop('sec_nope')$q$)),
    ('def21 counters', pg_temp.sec_try($q$SELECT count(*) OPERATOR(pg_catalog.=) 1 FROM rl_counters WHERE zone OPERATOR(pg_catalog.=) 'sec_dropped'$q$)),
    ('def22 counters direct', pg_temp.sec_try($q$SELECT count(*) FROM ratelimit.counters()$q$)),
    ('def23 keys', pg_temp.sec_try($q$SELECT count(*) FROM rl_keys$q$)),
    ('def24 keys of one zone', pg_temp.sec_try($q$SELECT count(*) FROM rl_keys WHERE zone OPERATOR(pg_catalog.=) 'sec_pub_tb'$q$)),
    ('def25 leases', pg_temp.sec_try($q$SELECT count(*) FROM rl_leases$q$)),
    ('def26 leases of one zone', pg_temp.sec_try($q$SELECT count(*) FROM rl_leases WHERE zone OPERATOR(pg_catalog.=) 'sec_conc'$q$)),
    ('def27 leases direct', pg_temp.sec_try($q$SELECT count(*) FROM ratelimit.leases()$q$));
RESET ROLE;
SET LOCAL search_path TO DEFAULT;

SELECT results_eq(
    $$SELECT label, got FROM sec_out WHERE label LIKE 'def%' AND label < 'def23' ORDER BY label COLLATE "C"$$,
    format($$VALUES ('def01 create'::text, ''::text), ('def02 name too long', 'ERROR 22001'),
                    ('def03 empty name', 'ERROR 22023'), ('def04 bad refill', 'ERROR 22023'),
                    ('def05 alter', ''), ('def06 calls', '3'), ('def07a new algorithm', 'ERROR 55000'),
                    ('def07b new algorithm, reset', ''), ('def07c partial change', ''),
                    ('def08 cron zone', 'ERROR 55000'), ('def09 cron call', '10'), ('def10 cron burst', ''),
                    ('def11 cron_enable', 'ERROR 55000'), ('def12 cron_enable role', 'ERROR 55000'),
                    ('def13 cron_enable inline', 'ERROR 55000'), ('def14 cron_enable unknown', 'ERROR 42704'),
                    ('def15 cron_disable', 'false'), ('def16 cron_disable unknown', 'ERROR 42704'),
                    ('def17a cron to inline', 'ERROR 55000'), ('def17b cron to inline, reset', ''),
                    ('def18 drop', ''), ('def19 drop if exists', ''),
                    ('def20 drop unknown', 'ERROR 42704'), ('def21 counters', %L),
                    ('def22 counters direct', 'ERROR 42501')$$,
           -- As a superuser reads it under the default search_path (the
           -- counters' slots may be used up by earlier suites: then
           -- neither sees the dropped zone).
           (SELECT (count(*) = 1)::text FROM rl_counters WHERE zone = 'sec_dropped')),
    'every SECURITY DEFINER function gives its documented result under the hostile search_path');
SELECT results_eq(
    $$SELECT got FROM sec_out WHERE label IN ('def23 keys', 'def24 keys of one zone') ORDER BY label$$,
    $$SELECT count(*)::text FROM rl_keys UNION ALL SELECT count(*)::text FROM rl_keys WHERE zone = 'sec_pub_tb'$$,
    'rl_keys (ratelimit.keys(), SECURITY DEFINER) shows the attacker what it shows a superuser');
SELECT results_eq(
    $$SELECT got FROM sec_out WHERE label IN ('def25 leases', 'def26 leases of one zone') ORDER BY label$$,
    $$SELECT count(*)::text FROM rl_leases UNION ALL SELECT count(*)::text FROM rl_leases WHERE zone = 'sec_conc'$$,
    'rl_leases (ratelimit.leases(), SECURITY DEFINER) shows the attacker what it shows a superuser');
-- rl_acquire, rl_release and rl_wait are no definers, but their history
-- and lease statements run as the tables' owner.
SET ROLE rl_sec_attacker;
SELECT set_config('search_path', :'hostile_path', true) \gset
INSERT INTO pg_temp.sec_out VALUES
    ('def28 acquire', pg_temp.sec_try($q$SELECT allowed FROM rl_acquire('sec_conc', 'sec-att')$q$)),
    ('def29 release', pg_temp.sec_try($q$SELECT rl_release(lease) FROM rl_acquire('sec_conc', 'sec-att2')$q$)),
    ('def30 wait', pg_temp.sec_try($q$SELECT allowed FROM rl_wait('sec_pub_tb', 'sec-att', 1, '0')$q$));
RESET ROLE;
SET LOCAL search_path TO DEFAULT;
SELECT results_eq(
    $$SELECT label, got FROM sec_out WHERE label >= 'def27' AND label < 'def31' ORDER BY label COLLATE "C"$$,
    $$VALUES ('def27 leases direct'::text, 'ERROR 42501'::text), ('def28 acquire', 'true'),
             ('def29 release', 'true'), ('def30 wait', 'true')$$,
    'ratelimit.leases() is not the attacker''s to call; rl_acquire, rl_release and rl_wait work under the hostile search_path');
-- rl_cron_refill, as the job's role runs it: a session of its own
-- (session_user is the attacker, so the meter runs), one refill a tick.  A
-- cron zone written directly (as above), its job simulated (refill_tick),
-- one key drained.
INSERT INTO ratelimit.zone (zone, algorithm, rate, period, burst, refill, refill_tick)
VALUES ('sec_refill', 'token_bucket', 60, '1 minute', 200, 'cron', '1 minute');
SELECT allowed FROM rl_limit('sec_refill', 'k', 200) \gset
SET SESSION AUTHORIZATION rl_sec_attacker;
SELECT set_config('search_path', :'hostile_path', true) \gset
INSERT INTO pg_temp.sec_out VALUES
    ('def31 cron_refill', pg_temp.sec_try($q$SELECT rl_cron_refill('sec_refill')$q$)),
    ('def32 cron_refill again', pg_temp.sec_try($q$SELECT rl_cron_refill('sec_refill')$q$)),
    ('def33 cron_refill unknown', pg_temp.sec_try($q$SELECT rl_cron_refill('sec_nope')$q$));
RESET SESSION AUTHORIZATION;
SET LOCAL search_path TO DEFAULT;
SELECT results_eq(
    $$SELECT label, got FROM sec_out WHERE label >= 'def31' AND label < 'def34' ORDER BY label COLLATE "C"$$,
    $$VALUES ('def31 cron_refill'::text, '1'::text), ('def32 cron_refill again', '0'),
             ('def33 cron_refill unknown', 'ERROR 42704')$$,
    'rl_cron_refill under the hostile search_path: one refill, the second metered away, an unknown zone 42704');
SELECT is((SELECT tokens FROM ratelimit.state s JOIN ratelimit.zone z USING (zone_id)
           WHERE z.zone = 'sec_refill' AND s.key = 'k'), 60::bigint,
          '... the drained key got one tick''s 60 tokens, once');
SELECT is_empty($$SELECT who, what FROM rl_sec_evil.log$$,
                'no SECURITY DEFINER function ran any of the attacker''s objects');
SELECT results_eq(
    $$SELECT zone::text, algorithm, rate, burst, refill, refill_tick FROM ratelimit.zone
      WHERE zone IN ('sec_tb', 'sec_cron', 'sec_cron_new', 'sec_x', '') ORDER BY 1$$,
    $$VALUES ('sec_cron'::text COLLATE "C", 'token_bucket'::text, 60::numeric, 100::bigint, 'inline'::text, NULL::interval)$$,
    'the zones are as the calls left them (sec_tb dropped, no sec_cron_new, sec_cron back to inline, its burst kept)');
SELECT results_eq(
    $$SELECT zone::text, count(*) FROM ratelimit.retired_zone_id
      WHERE zone IN ('sec_tb', 'sec_cron', 'sec_dropped') GROUP BY 1 ORDER BY 1$$,
    $$VALUES ('sec_cron'::text COLLATE "C", 1::bigint), ('sec_dropped', 1), ('sec_tb', 2)$$,
    'the retired ids are recorded: sec_tb''s reset and drop, sec_cron''s reset, sec_dropped''s drop');
SELECT is_empty($$SELECT 1 FROM ratelimit.state s JOIN ratelimit.zone z USING (zone_id) WHERE z.zone = 'sec_cron'$$,
                'changing the refill mode started sec_cron''s keys afresh');
SELECT is(has_any_column_privilege('rl_sec_attacker', 'ratelimit.state', 'SELECT, INSERT, UPDATE'), false,
          'rl_cron_enable''s refused calls granted the attacker nothing on ratelimit.state');
TRUNCATE rl_sec_evil.log;

-- rl_grant and rl_revoke are no SECURITY DEFINER functions, but the one
-- role that may run them is the owner: under the owner's hostile
-- search_path they must not run the attacker's objects either.
SELECT set_config('search_path', :'hostile_path', true) \gset
INSERT INTO pg_temp.sec_out VALUES
    ('own1 grant', pg_temp.sec_try($q$SELECT rl_grant('rl_sec_user', 'monitor')$q$)),
    ('own2 granted', pg_temp.sec_try($q$SELECT has_table_privilege('rl_sec_user', 'rl_keys', 'SELECT')$q$)),
    ('own3 revoke', pg_temp.sec_try($q$SELECT rl_revoke('rl_sec_user', 'monitor')$q$)),
    ('own4 revoked', pg_temp.sec_try($q$SELECT has_table_privilege('rl_sec_user', 'rl_keys', 'SELECT')$q$)),
    ('own5 unknown set', pg_temp.sec_try($q$SELECT rl_grant('rl_sec_user', 'everything')$q$));
SET LOCAL search_path TO DEFAULT;
SELECT results_eq($$SELECT label, got FROM sec_out WHERE label LIKE 'own%' ORDER BY label COLLATE "C"$$,
                  $$VALUES ('own1 grant'::text, ''::text), ('own2 granted', 'true'), ('own3 revoke', ''),
                           ('own4 revoked', 'false'), ('own5 unknown set', 'ERROR 22023')$$,
                  'the owner''s rl_grant and rl_revoke do their work under the hostile search_path');
SELECT is_empty($$SELECT who, what FROM rl_sec_evil.log$$,
                'and run none of the attacker''s objects with the owner''s rights');
TRUNCATE rl_sec_evil.log;

-------------------------------------------------------------------------
-- 7. The checks and the admin C functions under the hostile search_path:
-- their statements (zone lookup, history, the SPI access path, chunk rows,
-- rl_reset) run as the tables' owner.  Once with the configured access
-- path, once with the SPI path.
-------------------------------------------------------------------------
SELECT rl_zone_set('sec_h_tb', 'token_bucket', 10, '1 minute', history => true),
       rl_zone_set('sec_h_sw', 'sliding_window', 1000, '1 hour', history => true),
       rl_zone_set('sec_h_gcra', 'gcra', 10, '1 minute'),
       rl_zone_set('sec_h_fw', 'fixed_window', 10, '1 minute'),
       rl_zone_set('sec_h_swc', 'sliding_window_counter', 10, '1 minute') \gset
-- The attacker's calls, then the superuser's (who may move the clock, and
-- puts the attacker's schema first as well): a sliding window long enough
-- to seal chunk rows, read back and deleted by later calls.  Keys are the
-- round's own (the transaction cache keeps the keys a round used).  Every
-- operator and function of the round's own statements is qualified.
CREATE FUNCTION pg_temp.sec_round(round text) RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
    calls text[] := ARRAY[
        'a tb', $q$SELECT remaining FROM rl_limit('sec_h_tb', '@k', 3)$q$,
        'b tb again', $q$SELECT remaining FROM rl_limit('sec_h_tb', '@k', 2)$q$,
        'c tb refused', $q$SELECT allowed FROM rl_limit('sec_h_tb', '@k', 9)$q$,
        'd peek', $q$SELECT remaining FROM rl_peek('sec_h_tb', '@k', 1)$q$,
        'e sw', $q$SELECT remaining FROM rl_sliding_window('sec_h_sw', '@k', 7)$q$,
        'f gcra zone', $q$SELECT remaining FROM rl_limit('sec_h_gcra', '@k', 4)$q$,
        'g fixed', $q$SELECT remaining FROM rl_limit('sec_h_fw', '@k', 4)$q$,
        'h swc', $q$SELECT remaining FROM rl_limit('sec_h_swc', '@k', 4)$q$,
        'i rl_gcra', $q$SELECT remaining FROM rl_gcra('@k', 15, 30, 60, 5)$q$,
        'j token_bucket', $q$SELECT rl_token_bucket('@k', 1, 10, 4)$q$,
        'k guard', $q$SELECT rl_http_guard('sec_h_tb', '@k-guard')$q$,
        'l headers', $q$SELECT rl_headers(r) FROM rl_peek('sec_h_tb', '@k-guard') r$q$,
        'm reset', $q$SELECT rl_reset('sec_h_fw', '@k')$q$,
        'n reset again', $q$SELECT rl_reset('sec_h_fw', '@k')$q$,
        'r multi', $q$SELECT remaining FROM rl_limit(ARRAY['sec_h_tb', 'sec_h_gcra'], '@k-multi', 2)$q$,
        's multi refused', $q$SELECT allowed FROM rl_limit(ARRAY['sec_h_gcra', 'sec_h_tb'], '@k-multi', 9)$q$,
        't refund', $q$SELECT remaining FROM rl_refund('sec_h_tb', '@k', 3)$q$];
BEGIN
    SET LOCAL ROLE rl_sec_attacker;
    FOR i IN 1 .. pg_catalog.array_length(calls, 1) / 2 LOOP
        INSERT INTO pg_temp.sec_out VALUES
            (round OPERATOR(pg_catalog.||) ' ' OPERATOR(pg_catalog.||) calls[2 * i - 1],
             pg_temp.sec_try(pg_catalog.replace(calls[2 * i], '@k', round)));
    END LOOP;
    RESET ROLE;
    FOR i IN 1 .. 600 LOOP
        PERFORM pg_catalog.set_config('ratelimit.now_override',
            ('2026-01-01 00:00:00+00'::timestamptz OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs => i))::text, true);
        PERFORM rl_sliding_window('sec_h_sw', round OPERATOR(pg_catalog.||) '-long');
    END LOOP;
    PERFORM pg_catalog.set_config('ratelimit.now_override', '2026-01-01 00:40:00+00', true);
    INSERT INTO pg_temp.sec_out VALUES (round OPERATOR(pg_catalog.||) ' o sw peek',
        pg_temp.sec_try(pg_catalog.replace($q$SELECT remaining FROM rl_peek('sec_h_sw', '@k-long', 0)$q$, '@k', round)));
    -- 65 minutes in: the first 300 admissions have expired, and the
    -- chunks that held them are read back and deleted.
    PERFORM pg_catalog.set_config('ratelimit.now_override', '2026-01-01 01:05:00+00', true);
    INSERT INTO pg_temp.sec_out VALUES (round OPERATOR(pg_catalog.||) ' p sw expiry',
        pg_temp.sec_try(pg_catalog.replace($q$SELECT remaining FROM rl_sliding_window('sec_h_sw', '@k-long', 1)$q$, '@k', round)));
    SET LOCAL ROLE rl_sec_attacker;
    INSERT INTO pg_temp.sec_out VALUES (round OPERATOR(pg_catalog.||) ' q reset sw',
        pg_temp.sec_try(pg_catalog.replace($q$SELECT rl_reset('sec_h_sw', '@k-long')$q$, '@k', round)));
    RESET ROLE;
    PERFORM pg_catalog.set_config('ratelimit.now_override', '2026-01-01 00:00:00+00', true);
END
$fn$;
CREATE FUNCTION pg_temp.sec_round_expected(round text) RETURNS TABLE (label text, got text)
LANGUAGE sql AS $$
    SELECT round || ' ' || v.label COLLATE "C", v.got FROM (VALUES
        ('a tb', '7'), ('b tb again', '5'), ('c tb refused', 'false'), ('d peek', '4'),
        ('e sw', '993'), ('f gcra zone', '6'), ('g fixed', '6'), ('h swc', '6'),
        ('i rl_gcra', '11'), ('j token_bucket', '6'), ('k guard', 'ERROR 55000'),
        ('l headers', '{"RateLimit": "\"sec_h_tb\";r=9;t=6", "RateLimit-Policy": "\"sec_h_tb\";q=10;w=60"}'),
        ('m reset', 'true'), ('n reset again', 'false'),
        ('o sw peek', '400'), ('p sw expiry', '699'), ('q reset sw', 'true'),
        ('r multi', '8'), ('s multi refused', 'false'), ('t refund', '8')) v(label, got)
    ORDER BY 1
$$;

SELECT set_config('search_path', :'hostile_path', true) \gset
SELECT pg_temp.sec_round('c1') \gset
SET LOCAL search_path TO DEFAULT;
SELECT results_eq($$SELECT label, got FROM sec_out WHERE label LIKE 'c1 %' ORDER BY label COLLATE "C"$$,
                  $$SELECT * FROM pg_temp.sec_round_expected('c1')$$,
                  'configured access path: the checks, rl_reset and the history give their results under the hostile search_path');
SELECT is_empty($$SELECT who, what FROM rl_sec_evil.log$$,
                'configured access path: no call ran any of the attacker''s objects');
TRUNCATE rl_sec_evil.log;
SET LOCAL ratelimit.table_access = 'spi';
SELECT set_config('search_path', :'hostile_path', true) \gset
SELECT pg_temp.sec_round('c2') \gset
SET LOCAL search_path TO DEFAULT;
SELECT results_eq($$SELECT label, got FROM sec_out WHERE label LIKE 'c2 %' ORDER BY label COLLATE "C"$$,
                  $$SELECT * FROM pg_temp.sec_round_expected('c2')$$,
                  'SPI access path: the checks, rl_reset and the history give their results under the hostile search_path');
SELECT is_empty($$SELECT who, what FROM rl_sec_evil.log$$,
                'SPI access path: no call ran any of the attacker''s objects');
TRUNCATE rl_sec_evil.log;
RESET ratelimit.table_access;
SELECT results_eq(
    $$SELECT zone, key, count(*) FILTER (WHERE allowed), count(*) FILTER (WHERE NOT allowed)
      FROM ratelimit.history WHERE zone LIKE 'sec\_h\_%' GROUP BY 1, 2 ORDER BY zone COLLATE "C", key COLLATE "C"$$,
    $$VALUES ('sec_h_sw'::text, 'c1'::text, 1::bigint, 0::bigint), ('sec_h_sw', 'c1-long', 601, 0),
             ('sec_h_sw', 'c2', 1, 0), ('sec_h_sw', 'c2-long', 601, 0),
             ('sec_h_tb', 'c1', 3, 1), ('sec_h_tb', 'c1-multi', 1, 1),
             ('sec_h_tb', 'c2', 3, 1), ('sec_h_tb', 'c2-multi', 1, 1)$$,
    'the history recorded every request of both rounds, the refund as an allowed row (rl_peek none; the guard refused the history zone)');
SELECT results_eq(
    $$SELECT key, cost FROM ratelimit.history WHERE zone = 'sec_h_tb' AND cost < 0 ORDER BY key COLLATE "C"$$,
    $$VALUES ('c1'::text, -3), ('c2', -3)$$,
    'each round''s refund is in the history with a negative cost');
SELECT is_empty($$SELECT 1 FROM ratelimit.state s JOIN ratelimit.zone z USING (zone_id)
                  WHERE z.zone = 'sec_h_sw' AND s.key LIKE '%-long'$$,
                'rl_reset removed the sliding window''s head row and every chunk row');

-------------------------------------------------------------------------
-- 8. Keys: stored and matched byte for byte, or refused (22001) when over
-- 1024 bytes, storing nothing.
-------------------------------------------------------------------------
CREATE TEMP TABLE sec_keys (n int PRIMARY KEY, k text COLLATE "C" NOT NULL UNIQUE);
INSERT INTO sec_keys VALUES
    (1, :'pfx' || 'it''s'),
    (2, :'pfx' || 'back\slash\\'),
    (3, :'pfx' || '''; DROP TABLE sec_victim; --'),
    (4, :'pfx' || '"); DELETE FROM ratelimit.state; --'),
    (5, :'pfx' || '$1 $$ $q$ %s %n'),
    (6, :'pfx' || E'\\x00ff'),
    (7, :'pfx' || E'\x01\x02\x1b[0m\x7f\t\n\r'),
    (8, :'pfx' || U&'\043A\043B\044E\0447-\+01F511-\9375'),
    (9, :'pfx' || 'Key'),
    (10, :'pfx' || 'key'),
    (11, :'pfx' || 'key '),
    (12, :'pfx' || 'a%'),
    (13, :'pfx' || 'a_'),
    (14, :'pfx' || 'ab'),
    (15, :'pfx' || U&'e\0301'),
    (16, :'pfx' || U&'\00E9');
-- Exactly 1024 bytes: ASCII, two-byte characters, and one that differs in
-- its last byte only.
INSERT INTO sec_keys
SELECT 17, :'pfx' || repeat('x', 1024 - octet_length(:'pfx'))
UNION ALL
SELECT 18, :'pfx' || repeat('x', 1023 - octet_length(:'pfx')) || 'y'
UNION ALL
SELECT 19, :'pfx' || repeat(U&'\00E9', (1024 - octet_length(:'pfx')) / 2)
       || repeat('z', (1024 - octet_length(:'pfx')) % 2);
GRANT SELECT ON sec_keys TO PUBLIC;
CREATE TABLE public.sec_victim (x int);
SELECT results_eq($$SELECT octet_length(k) FROM sec_keys WHERE n >= 17 ORDER BY n$$,
                  ARRAY[1024, 1024, 1024], 'keys 17-19 are exactly 1024 bytes');
SELECT :'pfx' || repeat('x', 1025 - octet_length(:'pfx')) AS key1025,
       :'pfx' || repeat('x', 1023 - octet_length(:'pfx')) || U&'\00E9' AS key1025mb \gset

SELECT rl_zone_set('sec_k_tb', 'token_bucket', 100, '1 hour', history => true),
       rl_zone_set('sec_k_sw', 'sliding_window', 100, '1 hour') \gset
SELECT count(*) AS state_rows FROM ratelimit.state \gset
SELECT count(*) AS history_rows FROM ratelimit.history \gset

-- The table store, as an ordinary role: key n takes n.
SET ROLE rl_sec_user;
SELECT results_eq($$SELECT n, (SELECT remaining FROM rl_limit('sec_k_tb', k, n)) FROM sec_keys ORDER BY n$$,
                  $$SELECT n, 100::bigint - n FROM sec_keys ORDER BY n$$,
                  'rl_limit: each key takes its own tokens');
SELECT results_eq($$SELECT n, (SELECT remaining FROM rl_sliding_window('sec_k_sw', k, n)) FROM sec_keys ORDER BY n$$,
                  $$SELECT n, 100::bigint - n FROM sec_keys ORDER BY n$$,
                  'rl_sliding_window: each key takes its own');
SELECT results_eq($$SELECT n, rl_token_bucket(k, 100, 1, n) FROM sec_keys ORDER BY n$$,
                  $$SELECT n, 100::bigint - n FROM sec_keys ORDER BY n$$,
                  'rl_token_bucket: each key takes its own tokens');
SELECT results_eq($$SELECT n, (SELECT remaining FROM rl_gcra(k, 99, 100, 3600, n)) FROM sec_keys ORDER BY n$$,
                  $$SELECT n, 100::bigint - n FROM sec_keys ORDER BY n$$,
                  'rl_gcra: each key takes its own');
SELECT results_eq($$SELECT n, (SELECT remaining FROM rl_peek('sec_k_tb', k, 0)) FROM sec_keys ORDER BY n$$,
                  $$SELECT n, 100::bigint - n FROM sec_keys ORDER BY n$$,
                  'rl_peek matches each key to its own state');
SELECT results_eq($$SELECT n, (SELECT remaining FROM rl_peek('sec_k_sw', k, 0)) FROM sec_keys ORDER BY n$$,
                  $$SELECT n, 100::bigint - n FROM sec_keys ORDER BY n$$,
                  'rl_peek matches each sliding-window key to its own state');
SELECT results_eq($$SELECT n, rl_token_bucket(k, 100, 1, 0) FROM sec_keys ORDER BY n$$,
                  $$SELECT n, 100::bigint - n FROM sec_keys ORDER BY n$$,
                  'rl_token_bucket matches each key to its own bucket');
SELECT throws_ok(format('SELECT rl_limit(%L, %L)', 'sec_k_tb', :'key1025'), '22001', 'key is too long',
                 'rl_limit: a 1025-byte key is refused');
SELECT throws_ok(format('SELECT rl_limit(%L, %L)', 'sec_k_tb', :'key1025mb'), '22001', 'key is too long',
                 'rl_limit: a key of 1023 bytes and a two-byte character is refused');
SELECT throws_ok($$SELECT rl_limit('sec_k_tb', repeat('k', 1048576))$$, '22001', 'key is too long',
                 'rl_limit: a 1 MB key is refused');
SELECT throws_ok($$SELECT rl_sliding_window('sec_k_sw', repeat('k', 1048576))$$, '22001', 'key is too long',
                 'rl_sliding_window: a 1 MB key is refused');
SELECT throws_ok($$SELECT rl_peek('sec_k_tb', repeat('k', 1048576))$$, '22001', 'key is too long',
                 'rl_peek: a 1 MB key is refused');
SELECT throws_ok(format('SELECT rl_token_bucket(%L, 1, 10)', :'key1025'), '22001', 'id is too long',
                 'rl_token_bucket: a 1025-byte id is refused');
SELECT throws_ok($$SELECT rl_token_bucket(repeat('k', 1048576), 1, 10)$$, '22001', 'id is too long',
                 'rl_token_bucket: a 1 MB id is refused');
SELECT throws_ok($$SELECT rl_gcra(repeat('k', 1048576), 1, 1, 1)$$, '22001', 'key is too long',
                 'rl_gcra: a 1 MB key is refused');
RESET ROLE;
SELECT throws_ok($$SELECT rl_reset('sec_k_tb', repeat('k', 1048576))$$, '22001', 'key is too long',
                 'rl_reset: a 1 MB key is refused');

SELECT results_eq($$SELECT key, tokens FROM ratelimit.state s JOIN ratelimit.zone z USING (zone_id)
                    WHERE z.zone = 'sec_k_tb' ORDER BY key$$,
                  $$SELECT k, 100::bigint - n FROM sec_keys ORDER BY k$$,
                  'ratelimit.state holds each rl_limit key verbatim with its own tokens');
SELECT results_eq($$SELECT key, tokens FROM ratelimit.state
                    WHERE zone_id = 0 AND key IN (SELECT k FROM sec_keys) ORDER BY key$$,
                  $$SELECT k, 100::bigint - n FROM sec_keys ORDER BY k$$,
                  'ratelimit.state holds each rl_token_bucket id verbatim with its own tokens');
SELECT results_eq($$SELECT DISTINCT key FROM ratelimit.state s JOIN ratelimit.zone z USING (zone_id)
                    WHERE z.zone = 'sec_k_sw' ORDER BY key$$,
                  $$SELECT k FROM sec_keys ORDER BY k$$,
                  'ratelimit.state holds each sliding-window key verbatim');
SELECT results_eq($$SELECT key COLLATE "C", cost FROM ratelimit.history WHERE zone = 'sec_k_tb' ORDER BY 1$$,
                  $$SELECT k, n FROM sec_keys ORDER BY k$$,
                  'ratelimit.history records each key verbatim');
SELECT is((SELECT count(*) FROM ratelimit.state), :'state_rows'::bigint + 3 * 19 + 19,
          'the refused keys stored nothing: 19 rows for each of rl_limit, rl_sliding_window, rl_token_bucket, rl_gcra');
SELECT is_empty($$SELECT 1 FROM ratelimit.state WHERE octet_length(key) > 1024$$, 'no stored key is over 1024 bytes');
SELECT is((SELECT count(*) FROM ratelimit.history), :'history_rows'::bigint + 19,
          'the refused keys recorded no history');
SELECT has_table('public', 'sec_victim', 'the injection keys dropped nothing');
SELECT is((SELECT count(*) FROM ratelimit.state WHERE starts_with(key, :'pfx')), 76::bigint,
          'and deleted nothing');

-- Zone names are matched verbatim too.
SELECT rl_zone_set(E'sec''z"; DROP TABLE sec_victim; --', 'token_bucket', 5, '1 minute') \gset
SELECT is((SELECT remaining FROM rl_limit(E'sec''z"; DROP TABLE sec_victim; --', 'k', 2)), 3::bigint,
          'a zone named with quotes and an injection attempt works');
SELECT throws_ok($$SELECT rl_limit('sec''z', 'k')$$, '42704', NULL, 'a prefix of its name is another (unknown) zone');
SELECT lives_ok($$SELECT rl_zone_drop(E'sec''z"; DROP TABLE sec_victim; --')$$, 'and it can be dropped');
SELECT has_table('public', 'sec_victim', 'the zone name dropped nothing');

\if :shmem_preloaded
-- The shmem store: rl_token_bucket and rl_gcra with default_store = shmem,
-- and a shmem zone.  Keys of up to 48 bytes are kept as they are.
SELECT rl_zone_set('sec_k_shm', 'token_bucket', 100, '1 hour', store => 'shmem') \gset
SELECT count(*) AS shmem_rows FROM ratelimit.shmem_keys() \gset
SET LOCAL ratelimit.default_store = shmem;
SET ROLE rl_sec_user;
SELECT results_eq($$SELECT n, (SELECT remaining FROM rl_limit('sec_k_shm', k, n)) FROM sec_keys ORDER BY n$$,
                  $$SELECT n, 100::bigint - n FROM sec_keys ORDER BY n$$,
                  'shmem zone: each key takes its own tokens');
SELECT results_eq($$SELECT n, rl_token_bucket(k, 100, 1, n) FROM sec_keys ORDER BY n$$,
                  $$SELECT n, 100::bigint - n FROM sec_keys ORDER BY n$$,
                  'shmem rl_token_bucket: each key takes its own tokens');
SELECT results_eq($$SELECT n, (SELECT remaining FROM rl_peek('sec_k_shm', k, 0)) FROM sec_keys ORDER BY n$$,
                  $$SELECT n, 100::bigint - n FROM sec_keys ORDER BY n$$,
                  'shmem zone: rl_peek matches each key to its own state');
SELECT results_eq($$SELECT n, rl_token_bucket(k, 100, 1, 0) FROM sec_keys ORDER BY n$$,
                  $$SELECT n, 100::bigint - n FROM sec_keys ORDER BY n$$,
                  'shmem rl_token_bucket matches each key to its own bucket');
SELECT throws_ok(format('SELECT rl_limit(%L, %L)', 'sec_k_shm', :'key1025'), '22001', 'key is too long',
                 'shmem zone: a 1025-byte key is refused');
SELECT throws_ok($$SELECT rl_limit('sec_k_shm', repeat('k', 1048576))$$, '22001', 'key is too long',
                 'shmem zone: a 1 MB key is refused');
SELECT throws_ok(format('SELECT rl_token_bucket(%L, 1, 10)', :'key1025mb'), '22001', 'id is too long',
                 'shmem rl_token_bucket: a 1025-byte id is refused');
SELECT throws_ok($$SELECT rl_token_bucket(repeat('k', 1048576), 1, 10)$$, '22001', 'id is too long',
                 'shmem rl_token_bucket: a 1 MB id is refused');
RESET ROLE;
SET LOCAL ratelimit.default_store = 'table';
SELECT is((SELECT count(*) FROM ratelimit.shmem_keys()), :'shmem_rows'::bigint + 2 * 19,
          'shmem: the refused keys stored nothing (19 keys each for the zone and rl_token_bucket)');
SELECT results_eq(
    $$SELECT k.key, k.remaining FROM ratelimit.shmem_keys() k JOIN ratelimit.zone z USING (zone_id)
      WHERE z.zone = 'sec_k_shm' AND k.key IS NOT NULL ORDER BY k.key COLLATE "C"$$,
    $$SELECT k COLLATE "default", 100::bigint - n FROM sec_keys WHERE octet_length(k) <= 48 ORDER BY k$$,
    'shmem: keys of up to 48 bytes are kept verbatim, each with its own tokens');
SELECT is((SELECT count(*) FROM ratelimit.shmem_keys() k JOIN ratelimit.zone z USING (zone_id)
           WHERE z.zone = 'sec_k_shm' AND k.key IS NULL),
          (SELECT count(*) FROM sec_keys WHERE octet_length(k) > 48),
          'shmem: longer keys are kept as hashes, one entry each');
SELECT is_empty($$SELECT 1 FROM ratelimit.state s JOIN ratelimit.zone z USING (zone_id) WHERE z.zone = 'sec_k_shm'$$,
                'shmem: nothing went to the state table');
-- rl_http_guard's keys come from request settings a client controls (its
-- zone is a shmem zone: the guard takes no other).
SELECT rl_zone_set('sec_guard_shm', 'token_bucket', 100, '1 hour', store => 'shmem') \gset
SELECT set_config('request.jwt.claims', json_build_object('sub', 'x''; DROP TABLE sec_victim; --')::text, true) \gset
SELECT lives_ok($$SELECT rl_http_guard('sec_guard_shm')$$, 'rl_http_guard takes a JWT subject with an injection attempt');
SELECT set_config('request.jwt.claims', json_build_object('sub', repeat('s', 1048576))::text, true) IS NULL AS ignored \gset
SELECT lives_ok($$SELECT rl_http_guard('sec_guard_shm')$$, 'rl_http_guard takes a 1 MB JWT subject');
SELECT set_config('request.jwt.claims', '', true) \gset
-- The client writes the left of X-Forwarded-For; the one trusted proxy
-- (ratelimit.trusted_proxies = 1) appends the address it saw.
SELECT set_config('request.headers', json_build_object('x-forwarded-for', ' 10.0.0.1''-- , 10.0.0.2')::text, true) \gset
SELECT lives_ok($$SELECT rl_http_guard('sec_guard_shm')$$, 'rl_http_guard takes a forged X-Forwarded-For');
SELECT set_config('request.headers', '', true) \gset
SELECT results_eq($$SELECT k.key COLLATE "C", k.remaining FROM ratelimit.shmem_keys() k JOIN ratelimit.zone z USING (zone_id)
                    WHERE z.zone = 'sec_guard_shm' ORDER BY 1$$,
                  format($$VALUES ('ip:10.0.0.2'::text COLLATE "C", 99::bigint), ('md5:%s', 99),
                                  ('sub:x''; DROP TABLE sec_victim; --', 99)$$,
                         md5('sub:' || repeat('s', 1048576))),
                  'rl_http_guard stored those keys verbatim, the long subject as its md5, the address as the proxy appended it (the forged entry ignored)');

-- And under the hostile search_path (nothing but the call runs under it).
TRUNCATE rl_sec_evil.log;
SELECT set_config('search_path', :'hostile_path', true) \gset
SELECT pg_temp.sec_try($q$SELECT rl_http_guard('sec_guard_shm', 'guard-hostile')$q$) AS guard_hostile \gset
SET LOCAL search_path TO DEFAULT;
SELECT is(:'guard_hostile'::text, '', 'rl_http_guard decides under the hostile search_path');
SELECT is_empty($$SELECT who, what FROM rl_sec_evil.log$$,
                '... running none of the attacker''s objects');
TRUNCATE rl_sec_evil.log;
\else
SELECT skip('ratelimit is not in shared_preload_libraries: no shmem store', 18);
\endif

-------------------------------------------------------------------------
-- 9. A schema named cron that is not pg_cron's.  In a database without
-- pg_cron, a role with CREATE on the database (e.g. its owner) that
-- manages zones creates schema cron, a table cron.job and a function
-- cron.unschedule(bigint).  The definers that remove refill jobs must not
-- run it with the extension owner's rights, nor must DROP EXTENSION.
-------------------------------------------------------------------------
SELECT to_regnamespace('cron') IS NULL AS no_cron_schema \gset
\if :no_cron_schema
SAVEPOINT sec_cron_schema;
-- Cron zones without pg_cron: written directly by the superuser, as a
-- restored dump fills the zone table (rl_zone_set refuses a cron zone no
-- job could refill).
INSERT INTO ratelimit.zone (zone, algorithm, rate, period, burst, refill)
VALUES ('sec_cronz', 'token_bucket', 60, '1 minute', NULL, 'cron'),
       ('sec_cronz2', 'token_bucket', 60, '1 minute', NULL, 'cron');
DO $$ BEGIN EXECUTE format('GRANT CREATE ON DATABASE %I TO rl_sec_attacker', current_database()); END $$;
SET ROLE rl_sec_attacker;
CREATE SCHEMA cron;
CREATE TABLE cron.job (jobid bigint, jobname text, database text);
INSERT INTO cron.job
SELECT 1, 'ratelimit_refill:' || z, current_database() FROM unnest(ARRAY['sec_cronz', 'sec_cronz2']) z;
CREATE FUNCTION cron.unschedule(job bigint) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    -- What a real attack would do here: ALTER ROLE rl_sec_attacker SUPERUSER.
    INSERT INTO rl_sec_evil.log
    SELECT current_user, 'cron.unschedule as ' || CASE WHEN rolsuper THEN 'superuser' ELSE 'non-superuser' END
    FROM pg_catalog.pg_roles WHERE rolname = current_user;
    RETURN true;
END
$$;
GRANT USAGE ON SCHEMA cron TO PUBLIC;
INSERT INTO pg_temp.sec_out VALUES
    ('cron1 disable', pg_temp.sec_try($q$SELECT rl_cron_disable('sec_cronz')$q$)),
    ('cron2 to inline', pg_temp.sec_try($q$SELECT rl_zone_set('sec_cronz', refill => 'inline', reset => true)$q$)),
    ('cron3 drop', pg_temp.sec_try($q$SELECT rl_zone_drop('sec_cronz')$q$)),
    ('cron4 enable', pg_temp.sec_try($q$SELECT rl_cron_enable('sec_cronz2')$q$));
RESET ROLE;
-- Read out before the rollback to the savepoint (which would take pgTAP's
-- own bookkeeping with it): assertions come after.
SELECT string_agg(label || '=' || got, ', ' ORDER BY label COLLATE "C") AS cron_results
FROM sec_out WHERE label LIKE 'cron%' \gset
SELECT coalesce(string_agg(who || ': ' || what, '; '), '') AS cron_definer_log FROM rl_sec_evil.log \gset
TRUNCATE rl_sec_evil.log;
DROP EXTENSION ratelimit;
SELECT coalesce(string_agg(who || ': ' || what, '; '), '') AS cron_drop_log FROM rl_sec_evil.log \gset
ROLLBACK TO SAVEPOINT sec_cron_schema;
SELECT is(:'cron_results'::text, 'cron1 disable=false, cron2 to inline=, cron3 drop=, cron4 enable=ERROR 55000',
          'with a fake schema cron: the definers give their results (no pg_cron here, so no job to remove)');
SELECT is(:'cron_definer_log'::text, '',
          'rl_cron_disable, rl_zone_set and rl_zone_drop did not run the fake cron.unschedule() with the extension owner''s rights');
SELECT is(:'cron_drop_log'::text, '',
          'DROP EXTENSION ratelimit (by a superuser) did not run the fake cron.unschedule()');
\else
SELECT skip('this database has a schema cron (pg_cron?): the fake-cron attack needs a database without one', 3);
\endif

SELECT * FROM finish();
ROLLBACK;
