-- rl_http_guard(zone, key, trusted_proxies, proxy_header, ipv6_prefix)
-- (0.5.0), PostgREST's db-pre-request hook, called the way PostgREST calls
-- it: inside the request's transaction, as the request's role, with
-- request.jwt.claims and request.headers set as transaction-local settings
-- (JSON; header names in lower case), and the RateLimit headers read back
-- from response.headers (a JSON array of one-header objects).
-- guard_address.sql covers the key of a request without a subject (the
-- client's address, an IPv6 client's network, no address).
--
-- Covered:
-- 1. Key precedence: the explicit key, else 'sub:' || the JWT subject, else
--    'ip:' || the client address the trusted proxies appended, else a 400;
--    malformed claims are tolerated.
-- 2. A request that fails after the guard is still counted: the guard
--    takes only a shmem zone without history (whose charge no rollback
--    undoes) and refuses a table zone or a history zone with 55000 and the
--    fix in the hint (before: a table zone's charge went back with the
--    failed request: 10 of 10 failing logins reached the RPC on a zone of
--    3); played as PostgREST plays a failing login RPC (the RPC raises)
--    and a request with Prefer: tx=rollback.
-- 3. Keys over 1024 bytes are hashed.
-- 4. response.headers on an allowed request.
-- 5. The refusal: PostgREST's PGRST error (body in MESSAGE, status and
--    headers in DETAIL) by default, PT429 with ratelimit.guard_error =
--    'pt429'; refusals take nothing; a shadow zone refuses nothing.
-- 6. Least privilege: a role PostgREST switches to (anon) may not run the
--    guard until rl_grant; it can never choose its trusted proxies, header
--    or IPv6 prefix.
-- 7. GET and HEAD run READ ONLY: the shmem zone decides there.
-- 8. Bad arguments and their SQLSTATEs.
--
-- Zones are shmem token buckets on the fixed test clock, mostly one zone
-- per case; which key a request was counted under is read with a cost-0
-- rl_peek.  Zones and keys are private to this file (the shmem store is
-- shared by the cluster's databases, and not rolled back with this file's
-- transaction), and so is the role, created inside this file's
-- transaction (roles are cluster-wide).
--
-- pgTAP records its results in tables, so no assertion runs inside a
-- savepoint that is rolled back: values seen there go to psql variables
-- (\gset) or plpgsql variables and are asserted afterwards.  Needs
-- ratelimit in shared_preload_libraries (shmem zones) and a superuser (the
-- test clock and the guard's settings are superuser-only).
BEGIN;
SET LOCAL timezone = 'UTC';
SET LOCAL client_min_messages = warning;

SELECT plan(88);

SET LOCAL ratelimit.now_override = '2026-01-01 00:00:00+00';
\ir guard_helpers.psql

SELECT rl_zone_set('guard_' || z, 'token_bucket', 2, '1 minute', store => 'shmem')
FROM unnest(ARRAY['sub', 'ip', 'anon', 'explicit', 'nosub', 'badclaims', 'long', 'headers', 'refuse',
                  'keep', 'role', 'ro', 'args', 'rollback']) z;
SELECT rl_zone_set('guard_shadow', 'token_bucket', 2, '1 minute', shadow => true, store => 'shmem');
-- What the guard refuses: a table zone, a zone with history.
SELECT rl_zone_set('guard_table', 'token_bucket', 2, '1 minute');
SELECT rl_zone_set('guard_history', 'token_bucket', 2, '1 minute', store => 'shmem', history => true);
-- The issue's login zone: 3 an hour.
SELECT rl_zone_set('guard_login', 'token_bucket', 3, '1 hour');

-------------------------------------------------------------------------
-- 1. Key precedence, as PostgREST sets the request.
-------------------------------------------------------------------------
-- Claims with a subject and an X-Forwarded-For: the subject wins.
SELECT pg_temp.request('{"sub":"u1","role":"web"}', '{"x-forwarded-for":"203.0.113.7, 10.0.0.1"}');
SELECT lives_ok($$SELECT rl_http_guard('guard_sub')$$, 'a request with a JWT subject passes');
SELECT is(pg_temp.keys_of('guard_sub'), ARRAY['sub:u1'], 'it is counted under sub:<subject>, not the address');
SELECT is(pg_temp.left_in('guard_sub', 'sub:u1'), 1::bigint, '... one token');

-- No claims (an anonymous request): the entry the one trusted proxy
-- (ratelimit.trusted_proxies' default) appended, the rightmost.
SELECT pg_temp.request(NULL, '{"x-forwarded-for":"203.0.113.7, 10.0.0.1","user-agent":"curl"}');
SELECT lives_ok($$SELECT rl_http_guard('guard_ip')$$, 'a request without claims passes');
SELECT is(pg_temp.keys_of('guard_ip'), ARRAY['ip:10.0.0.1'],
          'it is counted under ip:<rightmost entry of X-Forwarded-For>, not an entry the client may have written');
-- Spaces around the entry are trimmed.
SELECT pg_temp.request(NULL, '{"x-forwarded-for":"10.0.0.1,  198.51.100.2 "}');
SELECT rl_http_guard('guard_ip');
SELECT is(pg_temp.left_in('guard_ip', 'ip:198.51.100.2'), 1::bigint, 'the entry is trimmed');

-- Neither claims nor an address: refused, with PostgREST's 400, and no
-- key charged (guard_address.sql tells every case).
SELECT pg_temp.request(NULL, NULL);
SELECT * FROM pg_temp.error_of($$SELECT rl_http_guard('guard_anon')$$) \gset anon_
SELECT is(ARRAY[:'anon_state', pg_temp.json_or_null(:'anon_detail') ->> 'status',
                pg_temp.json_or_null(:'anon_message') ->> 'code'],
          ARRAY['PGRST', '400', 'RL400'], 'a request with neither is refused: PGRST, status 400, code RL400');
SELECT pg_temp.request(NULL, '{"user-agent":"curl"}');
SELECT is((pg_temp.error_of($$SELECT rl_http_guard('guard_anon')$$)).state, 'PGRST',
          '... and so is one without X-Forwarded-For');
SELECT is(pg_temp.keys_of('guard_anon'), '{}'::text[], '... and no key was charged (there is no ip:unknown)');

-- An explicit key wins over claims and headers.
SELECT pg_temp.request('{"sub":"u1"}', '{"x-forwarded-for":"203.0.113.7"}');
SELECT rl_http_guard('guard_explicit', 'tenant:9');
SELECT is(pg_temp.keys_of('guard_explicit'), ARRAY['tenant:9'],
          'an explicit key is used as given, before the subject and the address');
SELECT pg_temp.request(NULL, 'not json');
SELECT lives_ok($$SELECT rl_http_guard('guard_explicit', 'tenant:9')$$,
                '... and needs no address: unreadable headers do not matter');

-- Claims without a subject, or a null one: the address.
SELECT pg_temp.request('{"role":"anon"}', '{"x-forwarded-for":"192.0.2.1"}');
SELECT rl_http_guard('guard_nosub');
SELECT pg_temp.request('{"sub":null,"role":"anon"}', '{"x-forwarded-for":"192.0.2.1"}');
SELECT rl_http_guard('guard_nosub');
SELECT is(pg_temp.left_in('guard_nosub', 'ip:192.0.2.1'), 0::bigint,
          'claims without a subject (or a null one) fall back to the address');
-- A numeric subject is used in its text form.
SELECT pg_temp.request('{"sub":42}', NULL);
SELECT rl_http_guard('guard_nosub');
SELECT is(pg_temp.left_in('guard_nosub', 'sub:42'), 1::bigint, 'a numeric subject is sub:42');

-- Malformed claims (not JSON) are tolerated: no subject.
SELECT pg_temp.request('not json', '{"x-forwarded-for":"192.0.2.9"}');
SELECT lives_ok($$SELECT rl_http_guard('guard_badclaims')$$, 'malformed claims JSON is tolerated');
SELECT is(pg_temp.left_in('guard_badclaims', 'ip:192.0.2.9'), 1::bigint, '... and the address is used');
SELECT pg_temp.request('"a JSON string"', '{"x-forwarded-for":"192.0.2.9"}');
SELECT lives_ok($$SELECT rl_http_guard('guard_badclaims')$$, 'claims that are JSON but not an object are tolerated');
SELECT is(pg_temp.left_in('guard_badclaims', 'ip:192.0.2.9'), 0::bigint, '... and the address is used');
-- With a subject, malformed headers are never read.
SELECT pg_temp.request('{"sub":"h1"}', '{x-forwarded-for: 192.0.2.9');
SELECT lives_ok($$SELECT rl_http_guard('guard_badclaims')$$, 'with a subject, malformed request.headers do not matter');

-------------------------------------------------------------------------
-- 2. A request that fails after the guard is still counted.  PostgREST
-- runs the guard and the request in one transaction and rolls it back
-- when the request fails (an RPC that raises: a wrong password; a
-- constraint violation) or asks for it (Prefer: tx=rollback).  A table
-- zone's charge would go back with it: a failed login would be free.  So
-- the guard refuses a table zone, and a zone with history (its history
-- row would go back the same way), with 55000 and the fix in the hint.
-------------------------------------------------------------------------
SELECT pg_temp.request('{"sub":"z"}', NULL);
SELECT * FROM pg_temp.error_of($$SELECT rl_http_guard('guard_table')$$) \gset table_
SELECT is(ARRAY[:'table_state', :'table_message'],
          ARRAY['55000', 'rl_http_guard() needs a shmem zone: zone "guard_table" keeps its state in a table'],
          'a table zone is refused: 55000, the message names the zone and why');
SELECT is(:'table_detail'::text,
          'A table zone''s charge is part of the request''s transaction: a request that fails after the guard '
          '(a wrong password, a constraint violation, Prefer: tx=rollback) would give its token back.',
          '... the detail: a failed request would give its token back');
SELECT is(:'table_hint'::text,
          'Give the guard a zone with store => ''shmem'', whose charge no rollback undoes: '
          'rl_zone_set(''guard_table'', store => ''shmem'', reset => true).',
          '... the hint: a shmem zone, with the statement that makes it one');
SELECT is(pg_temp.left_in('guard_table', 'sub:z'), 2::bigint, '... and it took nothing');
SELECT * FROM pg_temp.error_of($$SELECT rl_http_guard('guard_history', 'k')$$) \gset history_
SELECT is(ARRAY[:'history_state', :'history_message', :'history_hint'],
          ARRAY['55000', 'rl_http_guard() needs a zone without history: zone "guard_history" records every request in a table',
                'Give the guard a zone with history => false: rl_zone_set(''guard_history'', history => false).'],
          'a shmem zone with history is refused: 55000, the message and the hint');
SELECT is((SELECT count(*) FROM ratelimit.history WHERE zone = 'guard_history'), 0::bigint, '... recording nothing');

-- The issue's reproduction, as PostgREST runs it: a login RPC behind the
-- guard, 10 attempts with a wrong password on a zone of 3 an hour, each
-- request its own transaction (a savepoint here), rolled back by the RPC's
-- error.  Counts what reached the RPC and how each request ended.
CREATE FUNCTION pg_temp.login(password text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF password <> 'secret' THEN
        RAISE EXCEPTION 'wrong password' USING ERRCODE = 'invalid_password';
    END IF;
END $$;
GRANT EXECUTE ON FUNCTION pg_temp.login(text) TO PUBLIC;
CREATE FUNCTION pg_temp.logins(zone text, attempts int, OUT reached int, OUT answers text)
LANGUAGE plpgsql AS $$
DECLARE
    state text;
BEGIN
    reached := 0;
    answers := '';
    FOR i IN 1 .. attempts LOOP
        BEGIN
            SET LOCAL ROLE rl_pgtap_guard_web;
            PERFORM set_config('request.jwt.claims', '', true),
                    set_config('request.headers', '{"x-forwarded-for":"10.1.2.3, 198.51.100.200"}', true);
            PERFORM rl_http_guard(zone);     -- db-pre-request
            reached := reached + 1;
            PERFORM pg_temp.login('guess ' || i);   -- POST /rpc/login
            state := 'ok';
        EXCEPTION WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE;
        END;
        answers := ltrim(answers || ' ' || state);
    END LOOP;
END $$;
CREATE ROLE rl_pgtap_guard_web NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE;
SELECT rl_grant('rl_pgtap_guard_web');
SELECT * FROM pg_temp.logins('guard_login', 10) \gset table_login_
SELECT is(:'table_login_answers'::text, '55000 55000 55000 55000 55000 55000 55000 55000 55000 55000',
          'the login zone as a table zone: every request refused (55000), none reaches the RPC for free');
SELECT rl_zone_set('guard_login', store => 'shmem', reset => true);
SELECT * FROM pg_temp.logins('guard_login', 10) \gset login_
SELECT is(:'login_reached'::int, 3, 'as a shmem zone: 3 of 10 failing logins reach the RPC (before: 10 of 10)');
SELECT is(:'login_answers'::text, '28P01 28P01 28P01 PGRST PGRST PGRST PGRST PGRST PGRST PGRST',
          '... the first 3 fail in the RPC (wrong password), the other 7 are refused with 429');
SELECT is(pg_temp.left_in('guard_login', 'ip:198.51.100.200'), 0::bigint,
          '... and the client''s key stays drained after the rollbacks');
-- A request that succeeds and is rolled back (Prefer: tx=rollback).
SELECT pg_temp.request('{"sub":"t"}', NULL);
SAVEPOINT tx_rollback;
SELECT rl_http_guard('guard_rollback');
ROLLBACK TO SAVEPOINT tx_rollback;
SELECT is(pg_temp.left_in('guard_rollback', 'sub:t'), 1::bigint,
          'a request rolled back after the guard (Prefer: tx=rollback) is still counted');


-------------------------------------------------------------------------
-- 3. Long keys: a subject (or explicit key) making a key over 1024 bytes
-- is hashed: 'md5:' || md5 of the whole key ('sub:' included).
-------------------------------------------------------------------------
SELECT pg_temp.request(format('{"sub":"%s"}', repeat('s', 1020)), NULL);
SELECT lives_ok($$SELECT rl_http_guard('guard_long')$$, 'a 1024-byte key passes');
SELECT is(pg_temp.left_in('guard_long', 'sub:' || repeat('s', 1020)), 1::bigint, '... unhashed');
SELECT pg_temp.request(format('{"sub":"%s"}', repeat('s', 1021)), NULL);
SELECT lives_ok($$SELECT rl_http_guard('guard_long')$$, 'a 1025-byte key passes');
SELECT is(pg_temp.left_in('guard_long', 'md5:' || md5('sub:' || repeat('s', 1021))), 1::bigint,
          '... counted under md5:<md5 of sub:<subject>>');
SELECT pg_temp.request(format('{"sub":"%s"}', repeat('é', 3000)), NULL);
SELECT rl_http_guard('guard_long');
SELECT is(pg_temp.left_in('guard_long', 'md5:' || md5('sub:' || repeat('é', 3000))), 1::bigint,
          'a multibyte subject of 6000 bytes is hashed too');
SELECT pg_temp.request(NULL, NULL);
SELECT rl_http_guard('guard_long', repeat('k', 2000));
SELECT is(pg_temp.left_in('guard_long', 'md5:' || md5(repeat('k', 2000))), 1::bigint,
          'a long explicit key is hashed as well');

-------------------------------------------------------------------------
-- 4. The headers of the IETF draft (-09/-10): RateLimit-Policy (the
-- zone's quota and window) and RateLimit (remaining, and seconds until
-- full, rounded up), in PostgREST's format, appended to what is there.
-------------------------------------------------------------------------
SELECT pg_temp.request('{"sub":"h"}', NULL);
SELECT rl_http_guard('guard_headers');
SELECT is(pg_temp.response_headers(),
          '[{"RateLimit": "\"guard_headers\";r=1;t=30"}, {"RateLimit-Policy": "\"guard_headers\";q=2;w=60"}]'::jsonb,
          'response.headers: an array of one-header objects, no Retry-After when allowed');
SELECT is(jsonb_typeof(pg_temp.response_headers()), 'array', 'response.headers is a JSON array');
SELECT pg_temp.setting('ratelimit.now_override', '2026-01-01 00:00:10.5+00');
SELECT pg_temp.setting('response.headers', '');
SELECT rl_http_guard('guard_headers');
SELECT is(pg_temp.response_headers(),
          '[{"RateLimit": "\"guard_headers\";r=0;t=50"}, {"RateLimit-Policy": "\"guard_headers\";q=2;w=60"}]'::jsonb,
          'at 10.5 s: 1.35 tokens, 0.35 after the call: full in 1.65 tokens = 49.5 s, rounded up to 50');
SELECT pg_temp.setting('ratelimit.now_override', '2026-01-01 00:00:00+00');

-- Headers already there (an earlier hook's, or PostgREST's own) are kept, first.
SELECT pg_temp.request('{"sub":"k"}', NULL);
SELECT pg_temp.setting('response.headers', '[{"X-Request-Id": "abc"}, {"Cache-Control": "no-store"}]');
SELECT rl_http_guard('guard_keep');
SELECT is(pg_temp.response_headers(),
          '[{"X-Request-Id": "abc"}, {"Cache-Control": "no-store"},
            {"RateLimit": "\"guard_keep\";r=1;t=30"}, {"RateLimit-Policy": "\"guard_keep\";q=2;w=60"}]'::jsonb,
          'existing response.headers are kept, ours appended');
-- A second guard in the same request replaces the first one's RateLimit
-- headers (PostgREST would send duplicates), and keeps the others.
SELECT rl_http_guard('guard_headers', 'other');
SELECT is(pg_temp.response_headers(),
          '[{"X-Request-Id": "abc"}, {"Cache-Control": "no-store"},
            {"RateLimit": "\"guard_headers\";r=1;t=30"}, {"RateLimit-Policy": "\"guard_headers\";q=2;w=60"}]'::jsonb,
          'a second guard (another zone) replaces the RateLimit headers');
SELECT is((SELECT count(*) FROM jsonb_array_elements(pg_temp.response_headers()) h WHERE h ? 'RateLimit'), 1::bigint,
          '... one RateLimit header, the second guard''s');
-- The draft-06 names an older hook (or an older version of this guard)
-- wrote, and a Retry-After, are replaced too: a client must not read two
-- answers.
SELECT pg_temp.setting('response.headers',
    '[{"RateLimit-Limit": "99"}, {"X-Other": "1"}, {"RateLimit-Remaining": "98"}, {"RateLimit-Reset": "1"},
      {"Retry-After": "5"}, {"RateLimit-Policy": "\"x\";q=1;w=1"}]');
SELECT rl_http_guard('guard_keep', 'legacy');
SELECT is(pg_temp.response_headers(),
          '[{"X-Other": "1"}, {"RateLimit": "\"guard_keep\";r=1;t=30"}, {"RateLimit-Policy": "\"guard_keep\";q=2;w=60"}]'::jsonb,
          'earlier RateLimit-Limit, -Remaining, -Reset, -Policy and Retry-After headers are replaced, others kept');
-- Unreadable earlier headers are replaced by ours.
SELECT pg_temp.setting('response.headers', 'not json');
SELECT lives_ok($$SELECT rl_http_guard('guard_keep', 'third')$$, 'unreadable response.headers is tolerated');
SELECT is(pg_temp.response_headers(),
          '[{"RateLimit": "\"guard_keep\";r=1;t=30"}, {"RateLimit-Policy": "\"guard_keep\";q=2;w=60"}]'::jsonb,
          '... and replaced by ours');

-------------------------------------------------------------------------
-- 5. A refusal.  PostgREST (11 and later) turns SQLSTATE PGRST into the
-- response itself: MESSAGE is the JSON body, DETAIL the status and
-- headers; that is how Retry-After reaches the client (response.headers
-- is undone with the failing request).  Older PostgREST needs PT429
-- (ratelimit.guard_error = 'pt429'): a bare 429, the wait in the detail.
-------------------------------------------------------------------------
SELECT pg_temp.request('{"sub":"r"}', NULL);
SELECT rl_http_guard('guard_refuse');
SELECT rl_http_guard('guard_refuse');
SELECT is(pg_temp.header('RateLimit'), '"guard_refuse";r=0;t=60', 'two requests pass, the bucket is empty');
SELECT pg_temp.setting('response.headers', '[{"X-Before": "1"}]');
SELECT * FROM pg_temp.error_of($$SELECT rl_http_guard('guard_refuse')$$) \gset refused_
SELECT is(:'refused_state'::text, 'PGRST', 'the third is refused with SQLSTATE PGRST');
SELECT is(pg_temp.json_or_null(:'refused_message'),
          jsonb_build_object(
              'code', 'RL429',
              'message', 'rate limit of zone "guard_refuse" exceeded',
              'details', 'Retry after 30 s.',
              'hint', 'Wait for the Retry-After header''s seconds before the next request.'),
          'its message is the JSON body: code RL429, message, details with the wait, hint');
SELECT is(pg_temp.json_or_null(:'refused_detail'),
          '{"status": 429, "status_text": "Too Many Requests",
            "headers": {"RateLimit-Policy": "\"guard_refuse\";q=2;w=60", "RateLimit": "\"guard_refuse\";r=0;t=60",
                        "Retry-After": "30"}}'::jsonb,
          'its detail is the status, 429 Too Many Requests, and the RateLimit headers with Retry-After');
SELECT is(:'refused_headers_after'::text, '[{"X-Before": "1"}]',
          'response.headers after the caught refusal: as before the call');

SELECT pg_temp.setting('ratelimit.guard_error', 'pt429');
SELECT throws_ok($$SELECT rl_http_guard('guard_refuse')$$, 'PT429', 'rate limit of zone "guard_refuse" exceeded',
                 'ratelimit.guard_error = pt429: refused with PT429');
SELECT * FROM pg_temp.error_of($$SELECT rl_http_guard('guard_refuse')$$) \gset pt429_
SELECT is(:'pt429_detail'::text, 'Retry after 30 s.', '... the detail gives the wait in whole seconds');
SELECT is(:'pt429_hint'::text, 'Wait for the Retry-After header''s seconds before the next request.', '... the hint');
SELECT pg_temp.setting('ratelimit.guard_error', 'pgrst');

-- Refusals take nothing: 30 s later one request passes again.
SELECT pg_temp.setting('ratelimit.now_override', '2026-01-01 00:00:30+00');
SELECT lives_ok($$SELECT rl_http_guard('guard_refuse')$$, '30 s later a request passes');
SELECT pg_temp.setting('ratelimit.now_override', '2026-01-01 00:00:00+00');

-- A shadow zone refuses nothing: no error, no Retry-After, Remaining 0.
SELECT pg_temp.request('{"sub":"s"}', NULL);
SELECT rl_http_guard('guard_shadow') FROM generate_series(1, 2);
SELECT pg_temp.setting('response.headers', '');
SELECT lives_ok($$SELECT rl_http_guard('guard_shadow')$$, 'a shadow zone lets the third request through');
SELECT is(pg_temp.response_headers(),
          '[{"RateLimit": "\"guard_shadow\";r=0;t=60"}, {"RateLimit-Policy": "\"guard_shadow\";q=2;w=60"}]'::jsonb,
          '... with no Retry-After');
SELECT is((SELECT would_allow FROM rl_peek('guard_shadow', 'sub:s')), false, '... although its limit would refuse');

-- A cron zone is a table zone (pg_cron refills table-store buckets): the
-- guard refuses it as any table zone.  Written directly by the superuser,
-- as a restored dump fills the zone table: rl_zone_set refuses a cron
-- zone no job could refill.
INSERT INTO ratelimit.zone (zone, algorithm, rate, period, burst, refill)
VALUES ('guard_cron', 'token_bucket', 1, '1 minute', NULL, 'cron');
SELECT pg_temp.request('{"sub":"c"}', NULL);
SELECT is((pg_temp.error_of($$SELECT rl_http_guard('guard_cron')$$)).state, '55000',
          'a cron zone (a table zone) is refused: 55000');

-------------------------------------------------------------------------
-- 6. PostgREST switches to the request's role (here an anonymous one, as
-- anon) before db-pre-request runs.  PostgREST publishes every function
-- that role may execute as /rpc/...: it may execute no rate-limit
-- function until the owner grants it the decision functions.
-------------------------------------------------------------------------
CREATE ROLE rl_pgtap_guard_anon NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE;
SELECT pg_temp.request(NULL, '{"x-forwarded-for":"10.0.0.50, 203.0.113.50"}');
SET LOCAL ROLE rl_pgtap_guard_anon;
SELECT throws_ok($$SELECT rl_http_guard('guard_role')$$, '42501', 'permission denied for function rl_http_guard',
                 'an ungranted role may not run the guard');
SELECT throws_ok($$SELECT rl_limit('guard_role', 'ip:203.0.113.50')$$, '42501', 'permission denied for function rl_limit',
                 '... nor rl_limit');
SELECT is(rl_client_address('10.0.0.50, 203.0.113.50', NULL), '203.0.113.50'::inet,
          '... but it may run rl_client_address, which reads no rate-limit state');
RESET ROLE;
SELECT is(pg_temp.left_in('guard_role', 'ip:203.0.113.50'), 2::bigint, 'the refused calls took nothing');

SELECT rl_grant('rl_pgtap_guard_anon');
SET LOCAL ROLE rl_pgtap_guard_anon;
SELECT lives_ok($$SELECT rl_http_guard('guard_role')$$, 'after rl_grant the role can call the guard');
SELECT is(pg_temp.header('RateLimit'), '"guard_role";r=1;t=30', '... and gets the headers');
SELECT lives_ok($$SELECT rl_http_guard('guard_role')$$, '... a second time');
SELECT throws_ok($$SELECT rl_http_guard('guard_role')$$, 'PGRST', NULL, '... and is refused the third time');
SELECT throws_ok($$SELECT * FROM rl_keys$$, '42501', NULL, '... without reading rl_keys');
SELECT throws_ok($$SELECT rl_gc()$$, '42501', NULL, '... or running rl_gc');
SELECT throws_ok($$SET LOCAL ratelimit.now_override = '2027-01-01 00:00:00+00'$$, '42501', NULL,
                 '... or moving the test clock');
SELECT throws_ok($$SET LOCAL ratelimit.trusted_proxies = 2$$, '42501', NULL,
                 '... or trusting more proxies (it would choose its own key)');
SELECT throws_ok($$SET LOCAL ratelimit.proxy_header = 'forwarded'$$, '42501', NULL,
                 '... or another header');
SELECT throws_ok($$SET LOCAL ratelimit.ipv6_prefix = 128$$, '42501', NULL,
                 '... or a longer IPv6 prefix (it would have a key per address)');
RESET ROLE;
SELECT is(pg_temp.left_in('guard_role', 'ip:203.0.113.50'), 0::bigint,
          'the role''s requests were counted under the address its proxy appended');

-------------------------------------------------------------------------
-- 7. GET and HEAD requests: PostgREST runs them in READ ONLY
-- transactions, db-pre-request included.  The guard's shmem zone decides
-- there (a table zone could not write there either: refused above).
-------------------------------------------------------------------------
SELECT pg_temp.request('{"sub":"g"}', NULL);
SAVEPOINT get_request;
SET TRANSACTION READ ONLY;
SELECT (pg_temp.error_of($$SELECT rl_http_guard('guard_ro')$$)).state AS ro_shmem,
       current_setting('transaction_read_only') AS ro_mode \gset
SELECT (pg_temp.error_of($$SELECT rl_http_guard('guard_table')$$)).state AS ro_table \gset
ROLLBACK TO SAVEPOINT get_request;
SELECT is(:'ro_mode'::text, 'on', 'the savepoint ran READ ONLY, as a GET request does');
SELECT is(:'ro_shmem'::text, 'ok', 'a shmem zone guards a GET request');
SELECT is(pg_temp.left_in('guard_ro', 'sub:g'), 1::bigint, '... and counted it (shmem is not transactional)');
SELECT is(:'ro_table'::text, '55000', 'a table zone is refused there too, as everywhere (55000)');

-------------------------------------------------------------------------
-- 8. Bad arguments.  The address arguments are checked on every request,
-- not only on the anonymous ones that use them: a misconfigured wrapper
-- fails at once, not only for anonymous clients.
-------------------------------------------------------------------------
SELECT pg_temp.request(NULL, NULL);
SELECT throws_ok($$SELECT rl_http_guard('guard_args', '')$$, '22023', 'key must not be empty',
                 'an empty explicit key is refused');
SELECT throws_ok($$SELECT rl_http_guard(NULL)$$, '22004', 'zone must not be null', 'a NULL zone is refused');
SELECT throws_ok($$SELECT rl_http_guard('guard_nosuch')$$, '42704', 'rate-limit zone "guard_nosuch" does not exist',
                 'an unknown zone is refused');
SELECT pg_temp.request(NULL, '{"x-forwarded-for":"198.51.100.9"}');
SELECT throws_ok($$SELECT rl_http_guard('guard_args', NULL, -1)$$, '22023', 'trusted_proxies must be between 0 and 64',
                 'trusted_proxies -1 is refused');
SELECT throws_ok($$SELECT rl_http_guard('guard_args', NULL, 65)$$, '22023', 'trusted_proxies must be between 0 and 64',
                 'trusted_proxies 65 is refused');
SELECT throws_ok($$SELECT rl_http_guard('guard_args', NULL, NULL, 'x-real-ip')$$, '22023',
                 'unknown proxy header "x-real-ip"', 'proxy_header x-real-ip is refused');
SELECT throws_ok($$SELECT rl_http_guard('guard_args', NULL, NULL, NULL, 20)$$, '22023',
                 'ipv6_prefix must be between 32 and 128', 'ipv6_prefix 20 is refused');
SELECT is(pg_temp.keys_of('guard_args'), '{}'::text[], '... and none of them took anything');
SELECT pg_temp.request('{"sub":"args-user"}', NULL);
SELECT throws_ok($$SELECT rl_http_guard('guard_args', NULL, 65)$$, '22023', 'trusted_proxies must be between 0 and 64',
                 'trusted_proxies 65 is refused on a request with a subject');
SELECT throws_ok($$SELECT rl_http_guard('guard_args', 'explicit', NULL, 'x-real-ip')$$, '22023',
                 'unknown proxy header "x-real-ip"', 'proxy_header x-real-ip is refused with an explicit key');
SELECT throws_ok($$SELECT rl_http_guard('guard_args', 'explicit', NULL, NULL, 129)$$, '22023',
                 'ipv6_prefix must be between 32 and 128', 'ipv6_prefix 129 is refused with an explicit key');
SELECT is(pg_temp.keys_of('guard_args'), '{}'::text[], '... taking nothing');

SELECT * FROM finish();
ROLLBACK;
