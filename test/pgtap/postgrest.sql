-- The README's PostgREST / Supabase recipe, played as PostgREST plays it,
-- with the extension in a schema the API does not expose:
--
--   CREATE EXTENSION ratelimit SCHEMA extensions;
--   one parameterless SECURITY DEFINER wrapper with a pinned search_path,
--   in a schema of its own, as db-pre-request.
--
-- PostgREST switches to the request's role (anon, or the JWT's role), sets
-- request.jwt.claims and request.headers with set_config(..., true), runs
-- the pre-request function, then the request, all in one transaction per
-- request.  The wrapper limits; the same role calling rl_limit or
-- rl_http_guard itself (PostgREST would publish them as /rpc/... if it
-- could execute them) is refused, so no stranger can drain another
-- caller's key.
--
-- What a security review tried against the recipe (issue 30), replayed:
-- a client rotating its IPv6 address inside its /64 has one key (its
-- /56); failing login RPCs behind the wrapper, each rolled back by
-- PostgREST, are still counted; the recipe on a table zone fails loudly
-- (55000); a request without a usable address is refused with a 400 and
-- shares no bucket.
--
-- And everything works from a non-default schema: every SQL-callable part
-- of the extension is used here schema-qualified while the session's
-- search_path does not contain the schema (pgTAP lives in public).
--
-- Run by scripts/test.sh in a database where the extension was created
-- in schema extensions (RL_PGTAP_SCHEMA=extensions); needs ratelimit in
-- shared_preload_libraries (a shmem zone: PostgREST runs GET requests
-- read-only).
BEGIN;
SET LOCAL timezone = 'UTC';
SET LOCAL client_min_messages = warning;

SELECT plan(63);

SELECT is((SELECT n.nspname::text FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
           WHERE e.extname = 'ratelimit'),
          'extensions', 'the extension lives in schema extensions');
SELECT is(to_regproc('rl_limit'), NULL, 'rl_limit is not on this session''s search_path');

SET LOCAL ratelimit.now_override = '2026-03-01 12:00:00+00';

-- The roles of a PostgREST or Supabase database.  Supabase grants anon
-- and authenticated USAGE on schema extensions: so does this test, so
-- that what refuses the direct calls below is the functions' own
-- privilege, not the schema's.
CREATE ROLE rl_pgrst_authenticator NOINHERIT NOLOGIN;
CREATE ROLE rl_pgrst_anon NOLOGIN;
CREATE ROLE rl_pgrst_user NOLOGIN;
GRANT rl_pgrst_anon, rl_pgrst_user TO rl_pgrst_authenticator;
GRANT USAGE ON SCHEMA extensions TO rl_pgrst_anon, rl_pgrst_user;

-------------------------------------------------------------------------
-- The recipe, as the README gives it (role names adapted).
-------------------------------------------------------------------------
SELECT extensions.rl_zone_set('api', 'token_bucket', 2, '1 minute', store => 'shmem');

CREATE SCHEMA rl_pgrst_private;
CREATE FUNCTION rl_pgrst_private.check_request() RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM extensions.rl_http_guard('api');
END
$$;
REVOKE ALL ON FUNCTION rl_pgrst_private.check_request() FROM PUBLIC;
GRANT USAGE ON SCHEMA rl_pgrst_private TO rl_pgrst_anon, rl_pgrst_user;
GRANT EXECUTE ON FUNCTION rl_pgrst_private.check_request() TO rl_pgrst_anon, rl_pgrst_user;

-- One request: what PostgREST does before the request's own query, in a
-- savepoint standing for the request's transaction (a refused request
-- rolls back).  Returns 'ok' or the error's SQLSTATE, and the error's
-- message and detail.  pgTAP records results in tables, so assertions are
-- made on what this returns, after the rollback.
CREATE FUNCTION pg_temp.request(request_role name, claims text, headers text, call text DEFAULT NULL,
                                OUT state text, OUT message text, OUT detail text)
LANGUAGE plpgsql AS $$
BEGIN
    BEGIN
        EXECUTE format('SET LOCAL ROLE %I', request_role);
        PERFORM set_config('request.jwt.claims', coalesce(claims, ''), true),
                set_config('request.headers', coalesce(headers, ''), true),
                set_config('response.headers', '', true);
        EXECUTE coalesce(call, 'SELECT rl_pgrst_private.check_request()');
        state := 'ok';
        RAISE SQLSTATE 'RLTST';     -- the request ends: roll it back
    EXCEPTION
        WHEN SQLSTATE 'RLTST' THEN NULL;
        WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, message = MESSAGE_TEXT,
                                    detail = PG_EXCEPTION_DETAIL;
    END;
END $$;
GRANT EXECUTE ON FUNCTION pg_temp.request(name, text, text, text) TO PUBLIC;
-- What a key has left (cost-0 peek, as the superuser).
CREATE FUNCTION pg_temp.left_in(zone text, key text) RETURNS bigint LANGUAGE sql AS $$
    SELECT remaining FROM extensions.rl_peek(zone, key, 0)
$$;

-------------------------------------------------------------------------
-- 1. The wrapper limits an anonymous client by the address its proxy
-- appended, and a signed-in user by the JWT subject.
-------------------------------------------------------------------------
SELECT * INTO TEMP anon_requests FROM (
    SELECT n, r.* FROM generate_series(1, 3) n,
    LATERAL pg_temp.request('rl_pgrst_anon', NULL,
        format('{"x-forwarded-for":"10.9.9.%s, 198.51.100.20"}', n)) r) s;
SELECT results_eq('SELECT state FROM anon_requests ORDER BY n',
                  ARRAY['ok', 'ok', 'PGRST'],
                  'anon: 2 of 3 requests pass on a zone of 2 per minute, whatever X-Forwarded-For the client sent');
SELECT is(pg_temp.left_in('api', 'ip:198.51.100.20'), 0::bigint,
          'the key is the address the proxy appended');
SELECT is(pg_temp.left_in('api', 'ip:10.9.9.1'), 2::bigint, 'the client''s own entries are no key');
SELECT is((SELECT message::jsonb FROM anon_requests WHERE n = 3),
          '{"code": "RL429", "message": "rate limit of zone \"api\" exceeded", "details": "Retry after 30 s.", "hint": "Wait for the Retry-After header''s seconds before the next request."}'::jsonb,
          'the refusal is PostgREST''s PGRST error: its message is the JSON body');
SELECT is((SELECT detail::jsonb FROM anon_requests WHERE n = 3),
          '{"status": 429, "status_text": "Too Many Requests", "headers": {"Retry-After": "30", "RateLimit-Policy": "\"api\";q=2;w=60", "RateLimit": "\"api\";r=0;t=60"}}'::jsonb,
          'its detail carries status 429 and the Retry-After and RateLimit headers');

-- (Each request's arguments depend on n: with constant arguments the
-- planner may run a function scan once for all rows.)
SELECT * INTO TEMP user_requests FROM (
    SELECT n, r.* FROM generate_series(1, 3) n,
    LATERAL pg_temp.request('rl_pgrst_user', '{"sub":"user-7","role":"rl_pgrst_user"}',
        format('{"x-forwarded-for":"198.51.100.%s"}', 30 + n)) r) s;
SELECT results_eq('SELECT state FROM user_requests ORDER BY n', ARRAY['ok', 'ok', 'PGRST'],
                  'a signed-in user is limited by its JWT subject, apart from its address');
SELECT is(pg_temp.left_in('api', 'sub:user-7'), 0::bigint, 'the subject''s key took the calls');

-- The allowed request's RateLimit headers reach PostgREST.
SELECT is((SELECT r.state FROM pg_temp.request('rl_pgrst_anon', NULL, '{"x-forwarded-for":"198.51.100.21"}',
              $c$SELECT rl_pgrst_private.check_request();
                 DO $d$ BEGIN
                     IF current_setting('response.headers')::jsonb
                        @> '[{"RateLimit": "\"api\";r=1;t=30"}, {"RateLimit-Policy": "\"api\";q=2;w=60"}]'::jsonb THEN
                         RAISE SQLSTATE 'RLHDR';
                     END IF;
                 END $d$$c$) r),
          'RLHDR', 'an allowed request leaves the RateLimit headers in response.headers');

-------------------------------------------------------------------------
-- 1b. What the security review tried against the recipe.
-------------------------------------------------------------------------
-- A client rotating its IPv6 address inside its /64 behind the proxy: one
-- client, one key (its /56).  Before 0.5.0 every address was a key: 5 of 5.
SELECT * INTO TEMP v6_requests FROM (
    SELECT n, r.* FROM generate_series(1, 5) n,
    LATERAL pg_temp.request('rl_pgrst_anon', NULL,
        format('{"x-forwarded-for":"2001:db8:77:1:%s::1"}', n)) r) s;
SELECT results_eq('SELECT state FROM v6_requests ORDER BY n', ARRAY['ok', 'ok', 'PGRST', 'PGRST', 'PGRST'],
                  'anon rotating its IPv6 address inside one /64: 2 of 5 pass on a zone of 2');
SELECT is(pg_temp.left_in('api', 'ip:2001:db8:77::/56'), 0::bigint, 'all counted under its /56');

-- A request that fails after the guard (the RPC raises: a wrong password)
-- is rolled back by PostgREST, and still counted: before 0.5.0 a table
-- zone gave the token back (10 of 10 failing logins reached the RPC).
CREATE SCHEMA rl_pgrst_api;
CREATE FUNCTION rl_pgrst_api.login(password text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    IF password <> 'secret' THEN
        RAISE EXCEPTION 'wrong password' USING ERRCODE = 'invalid_password';
    END IF;
    RETURN 'token';
END $$;
GRANT USAGE ON SCHEMA rl_pgrst_api TO rl_pgrst_anon;
SELECT * INTO TEMP login_requests FROM (
    SELECT n, r.* FROM generate_series(1, 4) n,
    LATERAL pg_temp.request('rl_pgrst_anon', NULL, '{"x-forwarded-for":"198.51.100.40"}',
        format($c$SELECT rl_pgrst_private.check_request(); SELECT rl_pgrst_api.login('guess %s')$c$, n)) r) s;
SELECT results_eq('SELECT state FROM login_requests ORDER BY n', ARRAY['28P01', '28P01', 'PGRST', 'PGRST'],
                  'failing logins, each rolled back: 2 reach the RPC, the others are refused (429)');
-- And the recipe with a table zone fails loudly, at once, for everyone.
SELECT extensions.rl_zone_set('api', store => 'table', reset => true);
SELECT is((pg_temp.request('rl_pgrst_user', '{"sub":"user-9"}', NULL)).message,
          'rl_http_guard() needs a shmem zone: zone "api" keeps its state in a table',
          'the wrapper on a table zone: refused with 55000, naming the fix''s store');
SELECT extensions.rl_zone_set('api', store => 'shmem', reset => true);

-- No usable address (a request that bypassed the proxy, or garbage):
-- refused with a 400, never a bucket shared with other such clients.
SELECT is(ARRAY(SELECT r.state || ' ' || (r.detail::jsonb ->> 'status')
                FROM unnest(ARRAY['{"user-agent":"curl"}', '{"x-forwarded-for":"fe80::1%eth0"}', 'null'])
                         WITH ORDINALITY h(h, n),
                     LATERAL pg_temp.request('rl_pgrst_anon', NULL, h) r
                ORDER BY n),
          ARRAY['PGRST 400', 'PGRST 400', 'PGRST 400'],
          'anon without a usable address: PGRST, status 400, every time');
SELECT is((SELECT unkeyed FROM extensions.rl_counters WHERE zone = 'api'), 3::bigint,
          '... counted in rl_counters.unkeyed');

-------------------------------------------------------------------------
-- 2. Calling the extension directly, as PostgREST would for /rpc/...:
-- refused for the request's roles, whatever key they name.
-------------------------------------------------------------------------
SELECT is((pg_temp.request(r, NULL, NULL, c)).state, '42501',
          format('%s may not run %s', r, c))
FROM unnest(ARRAY['rl_pgrst_anon', 'rl_pgrst_user']) r,
     unnest(ARRAY[$$SELECT extensions.rl_limit('api', 'sub:victim', 2)$$,
                  $$SELECT extensions.rl_limit(ARRAY['api'], 'sub:victim', 2)$$,
                  $$SELECT extensions.rl_refund('api', 'sub:victim', 2)$$,
                  $$SELECT extensions.rl_http_guard('api', 'sub:victim')$$,
                  $$SELECT extensions.rl_token_bucket('victim', 0.001, 1000)$$,
                  $$SELECT extensions.rl_peek('api', 'sub:victim')$$,
                  $$SELECT extensions.rl_reset('api', 'sub:victim')$$,
                  $$SELECT extensions.rl_zone_set('api', 'token_bucket', 1, '1 day')$$,
                  $$SELECT * FROM extensions.rl_zones$$]) c;
SELECT is(pg_temp.left_in('api', 'sub:victim'), 2::bigint, 'the victim''s key is untouched');
SELECT is((SELECT rate FROM extensions.rl_zones WHERE zone = 'api'), 2::numeric, 'the zone is unchanged');
SELECT is((pg_temp.request('rl_pgrst_anon', NULL, NULL,
              $$SELECT extensions.rl_headers(ROW(true, 2, 1, NULL, '30 s', NULL, true, 'api', 2, '1 minute')::extensions.rl_result)$$)).state,
          'ok', 'the pure rl_headers stays callable');
SELECT is((pg_temp.request('rl_pgrst_anon', NULL, NULL,
              $$SELECT extensions.rl_client_address('1.2.3.4, 5.6.7.8', NULL)$$)).state,
          'ok', 'the pure rl_client_address stays callable');

-------------------------------------------------------------------------
-- 3. Everything works from schema extensions, schema-qualified, with the
-- schema off the search_path.
-------------------------------------------------------------------------
SELECT extensions.rl_zone_set('x_tb', 'token_bucket', 2, '1 minute');
SELECT extensions.rl_zone_set('x_sw', 'sliding_window', 2, '1 minute', history => true);
SELECT extensions.rl_zone_set('x_shm', 'gcra', 2, '1 minute', store => 'shmem');
-- Calls in the select list: one per row.
SELECT is((SELECT array_agg((extensions.rl_limit('x_tb', 'k')).allowed ORDER BY n)
           FROM generate_series(1, 3) n),
          ARRAY[true, true, false], 'rl_limit, table store');
SELECT is((SELECT array_agg((extensions.rl_sliding_window('x_sw', 'k')).allowed ORDER BY n)
           FROM generate_series(1, 3) n),
          ARRAY[true, true, false], 'rl_sliding_window, with history');
SELECT is((SELECT count(*) FROM ratelimit.history WHERE zone = 'x_sw'),
          3::bigint, 'the history recorded the three calls');
SELECT is((SELECT array_agg((extensions.rl_limit('x_shm', 'k')).allowed ORDER BY n)
           FROM generate_series(1, 3) n),
          ARRAY[true, true, false], 'rl_limit, shmem store');
SELECT is((SELECT array_agg(extensions.rl_token_bucket('x-adhoc', 1, 2) ORDER BY n)
           FROM generate_series(1, 3) n),
          ARRAY[1, 0, -1]::bigint[], 'rl_token_bucket');
SELECT is((SELECT (r).remaining FROM extensions.rl_gcra('x-cell', 15, 30, 60) r), 15::bigint, 'rl_gcra');
SELECT is((SELECT array_agg((extensions.rl_limit(ARRAY['x_sw', 'x_shm'], 'm')).allowed ORDER BY n)
           FROM generate_series(1, 3) n),
          ARRAY[true, true, false], 'rl_limit on two zones, table and shmem stores');
SELECT is((extensions.rl_refund('x_shm', 'm', 1)).remaining, 1::bigint, 'rl_refund');
SELECT is((extensions.rl_peek('x_tb', 'k', 0)).remaining, 0::bigint, 'rl_peek');
SELECT is((SELECT count(*) FROM extensions.rl_keys WHERE zone IN ('x_tb', 'x_sw', 'x_shm') AND key = 'k'), 3::bigint, 'rl_keys');
SELECT is((SELECT allowed + refused FROM extensions.rl_counters WHERE zone = 'x_tb'), 3::bigint, 'rl_counters');
SELECT is(extensions.rl_reset('x_tb', 'k'), true, 'rl_reset');
SELECT is((extensions.rl_peek('x_tb', 'k', 0)).remaining, 2::bigint, 'the reset key is full again');
-- rl_gc runs in a transaction of its own; here it is found and refuses.
SELECT throws_ok('SELECT extensions.rl_gc()', '25001',
                 'rl_gc() must run in a transaction that has made no rate-limit call', 'rl_gc');
SELECT is(extensions.rl_headers(extensions.rl_peek('x_tb', 'k')) ->> 'RateLimit', '"x_tb";r=1;t=30', 'rl_headers');
SELECT is(extensions.rl_headers(extensions.rl_peek('x_tb', 'k'), legacy => true) ->> 'RateLimit-Limit', '2',
          'rl_headers, legacy => true');

-- A trigger, named by its schema.
CREATE TABLE rl_pgrst_posts (author text, body text);
CREATE TRIGGER posts_limit BEFORE INSERT ON rl_pgrst_posts
    FOR EACH ROW EXECUTE FUNCTION extensions.rl_limit_trigger('x_tb', 'author');
INSERT INTO rl_pgrst_posts VALUES ('ann', 'one'), ('ann', 'two');
SELECT throws_ok($$INSERT INTO rl_pgrst_posts VALUES ('ann', 'three')$$, 'RL429', NULL,
                 'rl_limit_trigger limits from schema extensions');

-- rl_grant from schema extensions: the granted role calls unqualified
-- once the schema is on its search_path, as an application would.
SELECT extensions.rl_grant('rl_pgrst_user');
SELECT is((pg_temp.request('rl_pgrst_user', NULL, NULL,
              $$SET LOCAL search_path = extensions; SELECT rl_limit('x_tb', 'granted')$$)).state,
          'ok', 'after rl_grant the role decides, unqualified with the schema on its search_path');
SELECT extensions.rl_revoke('rl_pgrst_user');
SELECT is((pg_temp.request('rl_pgrst_user', NULL, NULL,
              $$SELECT extensions.rl_limit('x_tb', 'granted')$$)).state,
          '42501', 'after rl_revoke it is refused again');

-- The zone table and its cache follow the schema too: a change is seen.
SELECT extensions.rl_zone_set('x_tb', 'token_bucket', 5, '1 minute');
SELECT is((extensions.rl_peek('x_tb', 'fresh')).capacity, 5::bigint, 'a zone change is seen');
SELECT extensions.rl_zone_drop('x_tb');
SELECT throws_ok($$SELECT extensions.rl_limit('x_tb', 'k')$$, '42704', NULL, 'a dropped zone is gone');

-- Unqualified from the schema itself, and the result type by its name.
SET LOCAL search_path = extensions, public;
SELECT is((rl_limit('x_shm', 'other')).allowed, true, 'unqualified with the schema on the search_path');
SELECT is(pg_typeof(rl_peek('x_shm', 'other'))::text, 'rl_result', 'rl_result resolves in the schema');
RESET search_path;

-- Dropped and created again in the same schema (the DROP EXTENSION event
-- trigger finds its functions there).
DROP TABLE rl_pgrst_posts;
DROP EXTENSION ratelimit;
SELECT is(to_regprocedure('extensions.rl_limit(text,text,integer)'), NULL, 'DROP EXTENSION removes the functions');
CREATE EXTENSION ratelimit SCHEMA extensions;
SELECT is((SELECT count(*) FROM extensions.rl_zones), 0::bigint, 'CREATE EXTENSION in schema extensions again');

SELECT * FROM finish();
ROLLBACK;
