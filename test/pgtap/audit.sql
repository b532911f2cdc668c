-- Privilege audit (0.5.0, least privilege).  PostgREST and Supabase publish
-- every function that a request's role may execute as /rpc/<name>, and
-- their anonymous role holds whatever PUBLIC holds: a function of the
-- extension that PUBLIC may execute is callable by any stranger on the
-- internet, a view PUBLIC may read is readable by anyone.  So this file
-- derives the extension's objects from the catalogs (pg_depend rows of
-- deptype 'e' on the pg_extension row of ratelimit, never a hand list) and
-- asserts exactly what PUBLIC holds on them:
--   * functions: PUBLIC executes exactly the allow-list of pure functions,
--     rl_headers(rl_result, boolean) and rl_client_address(text, text,
--     integer, text), matched by name and argument types (a new overload of an
--     allowed name is not allowed); one assertion per function, so a
--     function added later that stays executable by PUBLIC fails here by
--     name;
--   * tables, views, sequences (any relation) and their columns: PUBLIC
--     holds nothing;
--   * schemas of the extension (ratelimit): PUBLIC holds nothing; the
--     schema the extension is installed in is left as it was;
--   * types: PUBLIC keeps USAGE on rl_result, and only that (see below);
--   * every SECURITY DEFINER function pins its search_path, pg_temp last;
--   * a role that was granted nothing gets SQLSTATE 42501 from every
--     function of the extension's own schema but the allow-list, calling
--     it for real (the calls are generated from pg_proc, NULL arguments).
-- Sanity checks keep the catalog queries from finding nothing and passing
-- vacuously.  Any other kind of member object fails the audit until it is
-- audited too.
--
-- The plan is exact: a fixed number of assertions plus one per function of
-- the extension (counted from the same catalog query before any test).
BEGIN;
SET LOCAL client_min_messages = warning;

-------------------------------------------------------------------------
-- The extension's members, live from the catalogs (functions, so that the
-- fresh install at the end is audited by the very same queries).
-------------------------------------------------------------------------
-- Every function (any kind of routine) of the extension; public_execute:
-- whether PUBLIC (grantee 0) holds EXECUTE, default ACL included.
CREATE FUNCTION pg_temp.rl_functions()
RETURNS TABLE (fn oid, schema name, signature text, kind "char", rettype oid,
               secdef boolean, config text[], public_execute boolean)
LANGUAGE sql STABLE AS $$
    SELECT p.oid, n.nspname,
           p.proname || '(' || pg_catalog.oidvectortypes(p.proargtypes) || ')',
           p.prokind, p.prorettype, p.prosecdef, p.proconfig,
           EXISTS (SELECT 1 FROM pg_catalog.aclexplode(coalesce(p.proacl, pg_catalog.acldefault('f', p.proowner))) a
                   WHERE a.grantee = 0 AND a.privilege_type = 'EXECUTE')
    FROM pg_catalog.pg_depend d
    JOIN pg_catalog.pg_proc p ON p.oid = d.objid
    JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
    WHERE d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass
      AND d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass
      AND d.refobjid = (SELECT e.oid FROM pg_catalog.pg_extension e WHERE e.extname = 'ratelimit')
      AND d.deptype = 'e'
$$;
-- Every relation (table, view, matview, sequence, foreign table...) of the
-- extension, with what PUBLIC holds on it.
CREATE FUNCTION pg_temp.rl_relations()
RETURNS TABLE (rel oid, name text, relkind "char", public_privileges text[])
LANGUAGE sql STABLE AS $$
    SELECT c.oid, n.nspname || '.' || c.relname, c.relkind,
           ARRAY(SELECT a.privilege_type
                 FROM pg_catalog.aclexplode(coalesce(c.relacl, pg_catalog.acldefault(
                          CASE WHEN c.relkind = 'S' THEN 's' ELSE 'r' END::"char", c.relowner))) a
                 WHERE a.grantee = 0 ORDER BY 1)
    FROM pg_catalog.pg_depend d
    JOIN pg_catalog.pg_class c ON c.oid = d.objid
    JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
    WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass
      AND d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass
      AND d.refobjid = (SELECT e.oid FROM pg_catalog.pg_extension e WHERE e.extname = 'ratelimit')
      AND d.deptype = 'e'
$$;
-- The allow-list: the pure functions PUBLIC may execute.
CREATE TEMP TABLE allow_list (signature text PRIMARY KEY);
INSERT INTO allow_list VALUES ('rl_headers(rl_result, boolean)'), ('rl_client_address(text, text, integer, text)');

-- 23 fixed assertions, and one per function of the extension.
SELECT plan(23 + (SELECT count(*)::int FROM pg_temp.rl_functions()));

-------------------------------------------------------------------------
-- 1. The catalog queries find the extension (an empty result would make
-- every "nothing is public" assertion below pass vacuously).
-------------------------------------------------------------------------
SELECT cmp_ok((SELECT count(*) FROM pg_temp.rl_functions()), '>', 25::bigint,
              'the catalog query finds more than 25 functions of the extension');
SELECT set_has($$SELECT signature FROM pg_temp.rl_functions()$$,
               $$VALUES ('rl_limit(text, text, integer)'), ('rl_limit(text[], text, integer)'), ('rl_refund(text, text, integer)'),
                        ('rl_grant(regrole, text)'), ('rl_zone_set(text, text, numeric, interval, bigint, text, boolean, text, boolean, boolean, boolean)'),
                        ('rl_headers(rl_result, boolean)'), ('rl_client_address(text, text, integer, text)'), ('counters()'),
                        ('pg_cron_version()'), ('rl_limit_trigger()')$$,
               'among them both rl_limit, rl_refund, rl_grant, rl_zone_set, the allow-list, ratelimit.counters(), ratelimit.pg_cron_version() and the trigger function');
SELECT set_has($$SELECT name FROM pg_temp.rl_relations()$$,
               $$VALUES ('public.rl_zones'), ('public.rl_counters'), ('public.rl_keys'), ('ratelimit.zone'),
                        ('ratelimit.state'), ('ratelimit.history'), ('ratelimit.retired_zone_id'), ('ratelimit.zone_id_seq')$$,
               'the catalog query finds the views, the tables (retired_zone_id among them) and the sequence of the extension');
SELECT set_eq(
    $$SELECT DISTINCT d.classid::pg_catalog.regclass::text FROM pg_catalog.pg_depend d
      WHERE d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass AND d.deptype = 'e'
        AND d.refobjid = (SELECT e.oid FROM pg_catalog.pg_extension e WHERE e.extname = 'ratelimit')$$,
    -- pg_event_trigger has no privileges (an event trigger fires on DDL).
    -- Another kind of member (operator, cast, foreign server, language...)
    -- needs its own assertions here first.
    ARRAY['pg_proc', 'pg_class', 'pg_type', 'pg_namespace', 'pg_event_trigger'],
    'the extension''s members are functions, relations, types, schemas and an event trigger, every kind audited here');

-------------------------------------------------------------------------
-- 2. Functions: PUBLIC executes exactly the allow-list.
-------------------------------------------------------------------------
SELECT set_eq($$SELECT signature FROM pg_temp.rl_functions() WHERE public_execute$$,
              $$SELECT signature FROM allow_list$$,
              'PUBLIC executes exactly rl_headers(rl_result, boolean) and rl_client_address(text, text, integer, text)');
SELECT ok(f.public_execute = (f.signature IN (SELECT signature FROM allow_list)),
          format('%s%s: %s', CASE WHEN f.schema = 'ratelimit' THEN 'ratelimit.' ELSE '' END, f.signature,
                 CASE WHEN f.signature IN (SELECT signature FROM allow_list)
                      THEN 'PUBLIC executes it (allow-list)' ELSE 'PUBLIC may not execute it' END))
FROM (SELECT * FROM pg_temp.rl_functions() ORDER BY schema, signature) f;

-------------------------------------------------------------------------
-- 3. Relations and their columns: PUBLIC holds nothing.
-------------------------------------------------------------------------
SELECT is_empty($$SELECT name, relkind, public_privileges FROM pg_temp.rl_relations()
                  WHERE public_privileges <> '{}'$$,
                'PUBLIC holds no privilege on any table, view or sequence of the extension');
SELECT is_empty($$SELECT r.name, t.attname, a.privilege_type
                  FROM pg_temp.rl_relations() r
                  JOIN pg_catalog.pg_attribute t ON t.attrelid = r.rel AND t.attnum > 0 AND NOT t.attisdropped
                  CROSS JOIN LATERAL pg_catalog.aclexplode(t.attacl) a
                  WHERE a.grantee = 0$$,
                'PUBLIC holds no column privilege on them either');

-------------------------------------------------------------------------
-- 4. Schemas.  The internal schema ratelimit is the extension's: PUBLIC
-- has no USAGE on it.  The schema the extension is installed in (public
-- here) is not the extension's; a fresh install at the end shows that
-- CREATE EXTENSION leaves its privileges as they were.
-------------------------------------------------------------------------
SELECT set_eq($$SELECT n.nspname::text FROM pg_catalog.pg_depend d JOIN pg_catalog.pg_namespace n ON n.oid = d.objid
                WHERE d.classid = 'pg_catalog.pg_namespace'::pg_catalog.regclass
                  AND d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass AND d.deptype = 'e'
                  AND d.refobjid = (SELECT e.oid FROM pg_catalog.pg_extension e WHERE e.extname = 'ratelimit')$$,
              ARRAY['ratelimit'],
              'the extension''s one schema is ratelimit (not the schema it is installed in)');
SELECT is_empty($$SELECT a.privilege_type FROM pg_catalog.pg_namespace n,
                         pg_catalog.aclexplode(coalesce(n.nspacl, pg_catalog.acldefault('n', n.nspowner))) a
                  WHERE n.nspname = 'ratelimit' AND a.grantee = 0$$,
                'PUBLIC holds no privilege on schema ratelimit');

-------------------------------------------------------------------------
-- 5. Types.  PostgreSQL gives PUBLIC USAGE on every new type, and the
-- extension keeps it on rl_result and rl_lease: USAGE on a composite type only lets a
-- role name it (declare, cast, take it as an argument); it reads and
-- changes no rate-limit state, and PUBLIC needs it to call the allow-listed
-- rl_headers(rl_result, boolean).  Nothing more than that USAGE.
-------------------------------------------------------------------------
SELECT set_eq($$SELECT t.typname::text, a.privilege_type
                FROM pg_catalog.pg_depend d
                JOIN pg_catalog.pg_type t ON t.oid = d.objid
                CROSS JOIN LATERAL pg_catalog.aclexplode(coalesce(t.typacl, pg_catalog.acldefault('T', t.typowner))) a
                WHERE d.classid = 'pg_catalog.pg_type'::pg_catalog.regclass
                  AND d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass AND d.deptype = 'e'
                  AND d.refobjid = (SELECT e.oid FROM pg_catalog.pg_extension e WHERE e.extname = 'ratelimit')
                  AND a.grantee = 0
                  -- From 17 the row types of tables and views, and array
                  -- types, are members too; they give no access to what
                  -- they describe (the relations are audited above).
                  AND t.typcategory <> 'A'
                  AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_class c
                                  WHERE c.oid = t.typrelid AND c.relkind <> 'c')$$,
              $$VALUES ('rl_lease', 'USAGE'), ('rl_result', 'USAGE')$$,
              'PUBLIC holds USAGE on types rl_result and rl_lease (the default for types), and nothing else on the extension''s types');

-------------------------------------------------------------------------
-- 6. SECURITY DEFINER functions pin search_path, with pg_temp last (else
-- pg_temp is searched first for tables and types).
-------------------------------------------------------------------------
SELECT set_has($$SELECT signature FROM pg_temp.rl_functions() WHERE secdef$$,
               $$VALUES ('rl_zone_set(text, text, numeric, interval, bigint, text, boolean, text, boolean, boolean, boolean)'),
                        ('rl_zone_drop(text, boolean)'), ('counters()')$$,
               'the extension has SECURITY DEFINER functions (rl_zone_set, rl_zone_drop, ratelimit.counters() among them)');
SELECT is_empty($$SELECT schema, signature, config FROM pg_temp.rl_functions()
                  WHERE secdef AND NOT EXISTS (SELECT 1 FROM unnest(config) c WHERE c LIKE 'search\_path=%')$$,
                'every SECURITY DEFINER function of the extension sets search_path');
SELECT is_empty($$SELECT schema, signature, config FROM pg_temp.rl_functions()
                  WHERE secdef AND NOT EXISTS (SELECT 1 FROM unnest(config) c WHERE c ~ '^search_path=.*\mpg_temp$')$$,
                '... and puts pg_temp last in it');

-------------------------------------------------------------------------
-- 7. A role granted nothing calls every function of the extension's own
-- schema, NULL arguments built from pg_proc.proargtypes: 42501 from all but
-- the allow-list, which it may call.  Trigger functions (and any routine
-- that takes a pseudo-type) cannot be called directly: their EXECUTE is
-- checked with has_function_privilege.  (The internal schema ratelimit has
-- no PUBLIC USAGE: section 4.)
-------------------------------------------------------------------------
CREATE ROLE rl_pgtap_audit_nobody NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE;
CREATE TEMP TABLE audit_calls (signature text, kind text, expected text, got text);
DO $do$
DECLARE
    f record;
    call text;
    got text;
BEGIN
    FOR f IN
        SELECT r.fn, r.signature, r.kind, p.provariadic, p.pronargs,
               r.signature IN (SELECT signature FROM allow_list) AS allowed,
               r.rettype IN ('pg_catalog.trigger'::pg_catalog.regtype, 'pg_catalog.event_trigger'::pg_catalog.regtype)
               OR EXISTS (SELECT 1 FROM unnest(p.proargtypes) t JOIN pg_catalog.pg_type ty ON ty.oid = t
                          WHERE ty.typtype = 'p') AS not_callable
        FROM pg_temp.rl_functions() r JOIN pg_catalog.pg_proc p ON p.oid = r.fn
        WHERE r.schema = (SELECT n.nspname FROM pg_catalog.pg_extension e
                          JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace
                          WHERE e.extname = 'ratelimit')
        ORDER BY r.signature
    LOOP
        IF f.not_callable THEN
            INSERT INTO audit_calls VALUES (
                f.signature, 'has_function_privilege',
                CASE WHEN f.allowed THEN 'EXECUTE' ELSE 'no EXECUTE' END,
                CASE WHEN pg_catalog.has_function_privilege('rl_pgtap_audit_nobody', f.fn, 'EXECUTE')
                     THEN 'EXECUTE' ELSE 'no EXECUTE' END);
            CONTINUE;
        END IF;
        SELECT format('%s %s(%s)', CASE WHEN f.kind = 'p' THEN 'CALL' ELSE 'SELECT' END, f.fn::pg_catalog.regproc,
                      coalesce(string_agg(CASE WHEN a.ord = f.pronargs AND f.provariadic <> 0 THEN 'VARIADIC ' ELSE '' END
                                          || 'NULL::' || pg_catalog.format_type(a.t, NULL), ', ' ORDER BY a.ord), ''))
        INTO call
        FROM pg_catalog.pg_proc p, unnest(p.proargtypes) WITH ORDINALITY a(t, ord)
        WHERE p.oid = f.fn;
        EXECUTE 'SET LOCAL ROLE rl_pgtap_audit_nobody';
        BEGIN
            EXECUTE call;
            got := 'ok';
        EXCEPTION WHEN OTHERS THEN
            got := SQLSTATE;
        END;
        RESET ROLE;
        INSERT INTO audit_calls VALUES (f.signature, call, CASE WHEN f.allowed THEN 'ok' ELSE '42501' END, got);
    END LOOP;
END
$do$;
SELECT is(current_user::text, session_user::text, 'the calls ran as the role, then it was reset');
SELECT cmp_ok((SELECT count(*) FROM audit_calls WHERE kind <> 'has_function_privilege'), '>', 15::bigint,
              'the role called more than 15 functions of the extension''s schema');
SELECT set_has($$SELECT signature, expected FROM audit_calls$$,
               $$VALUES ('rl_limit(text, text, integer)', '42501'), ('rl_limit(text[], text, integer)', '42501'),
                        ('rl_refund(text, text, integer)', '42501'), ('rl_grant(regrole, text)', '42501'),
                        ('rl_zone_set(text, text, numeric, interval, bigint, text, boolean, text, boolean, boolean, boolean)', '42501'),
                        ('rl_http_guard(text, text, integer, text, integer)', '42501'),
                        ('rl_http_guard_limit(text, text, jsonb, integer, text, integer)', '42501'),
                        ('rl_gc(text, interval)', '42501'),
                        ('rl_headers(rl_result, boolean)', 'ok'), ('rl_client_address(text, text, integer, text)', 'ok'),
                        ('rl_limit_trigger()', 'no EXECUTE')$$,
               'among them the decision (both rl_limit, the guard and its decision), refund, grant, management and gc functions, the allow-list and the trigger function');
SELECT is_empty($$SELECT signature, kind, expected, got FROM audit_calls WHERE got IS DISTINCT FROM expected$$,
                'a role granted nothing gets 42501 from every function of the extension''s schema but the allow-list, and calls those');

-------------------------------------------------------------------------
-- 8. A fresh install in a new schema (rolled back with the rest): CREATE
-- EXTENSION changes no privilege of the schema it is installed in, and
-- the same queries find the same answer there.
-------------------------------------------------------------------------
SELECT lives_ok($$DROP EXTENSION ratelimit CASCADE$$, 'DROP EXTENSION ratelimit (until the rollback)');
CREATE SCHEMA rl_pgtap_audit_ext;
SELECT coalesce(n.nspacl::text, 'default') AS acl_before FROM pg_catalog.pg_namespace n WHERE n.nspname = 'rl_pgtap_audit_ext' \gset
SELECT lives_ok($$CREATE EXTENSION ratelimit SCHEMA rl_pgtap_audit_ext$$, 'CREATE EXTENSION ratelimit in a new schema');
SET LOCAL search_path = public, rl_pgtap_audit_ext;     -- pgTAP, and rl_result unqualified
SELECT is((SELECT coalesce(n.nspacl::text, 'default') FROM pg_catalog.pg_namespace n WHERE n.nspname = 'rl_pgtap_audit_ext'),
          :'acl_before',
          'CREATE EXTENSION left the privileges of the schema it is installed in as they were');
SELECT set_eq($$SELECT signature FROM pg_temp.rl_functions() WHERE public_execute$$,
              $$SELECT signature FROM allow_list$$,
              'a fresh install: PUBLIC executes exactly the allow-list');
SELECT is_empty($$SELECT name, public_privileges FROM pg_temp.rl_relations() WHERE public_privileges <> '{}'$$,
                'a fresh install: PUBLIC holds no privilege on any relation');
SELECT is_empty($$SELECT a.privilege_type FROM pg_catalog.pg_namespace n,
                         pg_catalog.aclexplode(coalesce(n.nspacl, pg_catalog.acldefault('n', n.nspowner))) a
                  WHERE n.nspname = 'ratelimit' AND a.grantee = 0$$,
                'a fresh install: PUBLIC holds no privilege on schema ratelimit');

SELECT * FROM finish();
ROLLBACK;
