-- rl_http_guard(zone, key DEFAULT NULL) (0.5.0), PostgREST's db-pre-request
-- hook, called the way PostgREST calls it: inside the request's
-- transaction, with request.jwt.claims and request.headers set as
-- transaction-local settings (JSON; header names in lower case), and the
-- RateLimit headers read back from response.headers (a JSON array of
-- one-header objects).  Key precedence: the explicit key, else 'sub:' ||
-- the JWT subject, else 'ip:' || the first hop of X-Forwarded-For, else
-- 'anonymous'; keys over 1024 bytes become 'md5:' || md5(key).  A refusal
-- raises PT429 (HTTP 429).
--
-- Zones are token buckets of 2 per minute (a token every 30 s) on the fixed
-- test clock, one zone per case; what a key has taken is read with a
-- cost-0 rl_peek.
--
-- Two limits are asserted as documented (README): the Retry-After of a
-- refusal does not reach PostgREST (the error undoes response.headers; the
-- wait is in the error's detail), and a table-store zone cannot guard a GET
-- request (PostgREST runs GET and HEAD in READ ONLY transactions): the
-- guard says so with 25006 and a hint.
--
-- pgTAP records its results in tables, so no assertion runs inside a
-- savepoint that is rolled back: values seen there go to psql variables
-- (\gset) and are asserted afterwards.  Needs ratelimit in
-- shared_preload_libraries (one shmem zone).
BEGIN;
SET LOCAL timezone = 'UTC';
SET LOCAL client_min_messages = warning;

SELECT plan(64);

SET LOCAL ratelimit.now_override = '2026-01-01 00:00:00+00';

-- The request PostgREST would describe: claims and headers (NULL: unset).
CREATE FUNCTION pg_temp.request(claims text, headers text) RETURNS void LANGUAGE sql AS $$
    SELECT NULL::void FROM (SELECT set_config('request.jwt.claims', coalesce(claims, ''), true),
                                   set_config('request.headers', coalesce(headers, ''), true),
                                   set_config('response.headers', '', true)) s;
$$;
-- set_config(name, value, true), printing nothing.
CREATE FUNCTION pg_temp.setting(name text, value text) RETURNS void LANGUAGE sql AS $$
    SELECT NULL::void FROM (SELECT set_config(name, value, true)) s
$$;
-- What a key has left in a zone (cost-0 peek).
CREATE FUNCTION pg_temp.left_in(zone text, key text) RETURNS bigint LANGUAGE sql AS $$
    SELECT remaining FROM rl_peek(zone, key, 0)
$$;
-- response.headers as jsonb ('' is NULL).
CREATE FUNCTION pg_temp.response_headers() RETURNS jsonb LANGUAGE sql AS $$
    SELECT nullif(current_setting('response.headers', true), '')::jsonb
$$;
-- One header of response.headers (the last one of that name).
CREATE FUNCTION pg_temp.header(name text) RETURNS text LANGUAGE sql AS $$
    SELECT h ->> name FROM jsonb_array_elements(pg_temp.response_headers()) WITH ORDINALITY e(h, n)
    WHERE h ? name ORDER BY n DESC LIMIT 1
$$;
-- text as jsonb, NULL when it is not JSON.
CREATE FUNCTION pg_temp.json_or_null(t text) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
    RETURN t::jsonb;
EXCEPTION WHEN OTHERS THEN
    RETURN NULL;
END $$;
-- The SQLSTATE, message, detail and hint of a statement's error, with
-- response.headers as the statement's error left it (the caught error's
-- subtransaction is rolled back).
CREATE FUNCTION pg_temp.error_of(statement text,
    OUT state text, OUT message text, OUT detail text, OUT hint text, OUT headers_after text)
LANGUAGE plpgsql AS $$
BEGIN
    BEGIN
        EXECUTE statement;
        state := 'ok';
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, message = MESSAGE_TEXT,
                                detail = PG_EXCEPTION_DETAIL, hint = PG_EXCEPTION_HINT;
    END;
    headers_after := current_setting('response.headers', true);
END $$;

SELECT rl_zone_set('guard_' || z, 'token_bucket', 2, '1 minute')
FROM unnest(ARRAY['sub', 'ip', 'anon', 'explicit', 'nosub', 'badclaims', 'badheaders', 'empty',
                  'long', 'headers', 'refuse', 'keep', 'role', 'ro']) z;
SELECT rl_zone_set('guard_shadow', 'token_bucket', 2, '1 minute', shadow => true);
SELECT rl_zone_set('guard_ro_shm', 'token_bucket', 2, '1 minute', store => 'shmem');

-------------------------------------------------------------------------
-- 1. Key precedence, as PostgREST sets the request.
-------------------------------------------------------------------------
-- Claims with a subject and an X-Forwarded-For: the subject wins.
SELECT pg_temp.request('{"sub":"u1","role":"web"}', '{"x-forwarded-for":"203.0.113.7, 10.0.0.1"}');
SELECT lives_ok($$SELECT rl_http_guard('guard_sub')$$, 'a request with a JWT subject passes');
SELECT is(pg_temp.left_in('guard_sub', 'sub:u1'), 1::bigint, 'it is counted under sub:<subject>');
SELECT is(pg_temp.left_in('guard_sub', 'ip:203.0.113.7'), 2::bigint, '... not under the address');

-- No claims (an anonymous request): the first hop of X-Forwarded-For.
SELECT pg_temp.request(NULL, '{"x-forwarded-for":"203.0.113.7, 10.0.0.1","user-agent":"curl"}');
SELECT lives_ok($$SELECT rl_http_guard('guard_ip')$$, 'a request without claims passes');
SELECT is(pg_temp.left_in('guard_ip', 'ip:203.0.113.7'), 1::bigint,
          'it is counted under ip:<first hop of X-Forwarded-For>');
SELECT is(pg_temp.left_in('guard_ip', 'ip:10.0.0.1'), 2::bigint, '... not under a later hop');
-- Spaces around the first hop are trimmed.
SELECT pg_temp.request(NULL, '{"x-forwarded-for":"  198.51.100.2 ,10.0.0.1"}');
SELECT rl_http_guard('guard_ip');
SELECT is(pg_temp.left_in('guard_ip', 'ip:198.51.100.2'), 1::bigint, 'the first hop is trimmed');

-- Neither claims nor an address: one shared key.
SELECT pg_temp.request(NULL, NULL);
SELECT lives_ok($$SELECT rl_http_guard('guard_anon')$$, 'a request with neither passes');
SELECT is(pg_temp.left_in('guard_anon', 'anonymous'), 1::bigint, 'it is counted under anonymous');
SELECT pg_temp.request(NULL, '{"user-agent":"curl"}');
SELECT rl_http_guard('guard_anon');
SELECT is(pg_temp.left_in('guard_anon', 'anonymous'), 0::bigint, '... and so is one without X-Forwarded-For');
SELECT pg_temp.request(NULL, '{"x-forwarded-for":""}');
SELECT is((pg_temp.error_of($$SELECT rl_http_guard('guard_anon')$$)).state, 'PT429',
          '... and one with an empty X-Forwarded-For: the shared key is now refused');

-- An explicit key wins over claims and headers.
SELECT pg_temp.request('{"sub":"u1"}', '{"x-forwarded-for":"203.0.113.7"}');
SELECT rl_http_guard('guard_explicit', 'tenant:9');
SELECT results_eq(
    $$SELECT pg_temp.left_in('guard_explicit', k) FROM unnest(ARRAY['tenant:9', 'sub:u1', 'ip:203.0.113.7']) k$$,
    $$VALUES (1::bigint), (2), (2)$$,
    'an explicit key is used as given, before the subject and the address');

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
-- Malformed headers too: anonymous.
SELECT pg_temp.request(NULL, '{x-forwarded-for: 192.0.2.9');
SELECT lives_ok($$SELECT rl_http_guard('guard_badheaders')$$, 'malformed request.headers is tolerated');
SELECT is(pg_temp.left_in('guard_badheaders', 'anonymous'), 1::bigint, '... and the key is anonymous');

-- An empty explicit key is an error (22023), as for rl_limit; a NULL zone
-- 22004, an unknown one 42704.
SELECT pg_temp.request(NULL, NULL);
SELECT throws_ok($$SELECT rl_http_guard('guard_empty', '')$$, '22023', 'key must not be empty',
                 'an empty explicit key is refused');
SELECT throws_ok($$SELECT rl_http_guard(NULL)$$, '22004', 'zone must not be null', 'a NULL zone is refused');
SELECT throws_ok($$SELECT rl_http_guard('guard_nosuch')$$, '42704', 'rate-limit zone "guard_nosuch" does not exist',
                 'an unknown zone is refused');

-------------------------------------------------------------------------
-- 2. Long keys: a subject (or explicit key) making a key over 1024 bytes
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
-- 3. The headers: RateLimit-Limit, -Remaining, -Reset (whole seconds,
-- rounded up), in PostgREST's format, appended to what is there.
-------------------------------------------------------------------------
SELECT pg_temp.request('{"sub":"h"}', NULL);
SELECT rl_http_guard('guard_headers');
SELECT is(pg_temp.response_headers(),
          '[{"RateLimit-Limit": "2"}, {"RateLimit-Remaining": "1"}, {"RateLimit-Reset": "30"}]'::jsonb,
          'response.headers: an array of one-header objects, no Retry-After when allowed');
SELECT is(jsonb_typeof(pg_temp.response_headers()), 'array', 'response.headers is a JSON array');
SELECT pg_temp.setting('ratelimit.now_override', '2026-01-01 00:00:10.5+00');
SELECT pg_temp.setting('response.headers', '');
SELECT rl_http_guard('guard_headers');
SELECT is(pg_temp.response_headers(),
          '[{"RateLimit-Limit": "2"}, {"RateLimit-Remaining": "0"}, {"RateLimit-Reset": "50"}]'::jsonb,
          'at 10.5 s: 1.35 tokens, 0.35 after the call: full in 1.65 tokens = 49.5 s, rounded up to 50');
SELECT pg_temp.setting('ratelimit.now_override', '2026-01-01 00:00:00+00');

-- Headers already there (an earlier hook's, or PostgREST's own) are kept, first.
SELECT pg_temp.request('{"sub":"k"}', NULL);
SELECT pg_temp.setting('response.headers', '[{"X-Request-Id": "abc"}, {"Cache-Control": "no-store"}]');
SELECT rl_http_guard('guard_keep');
SELECT is(pg_temp.response_headers(),
          '[{"X-Request-Id": "abc"}, {"Cache-Control": "no-store"}, {"RateLimit-Limit": "2"},
            {"RateLimit-Remaining": "1"}, {"RateLimit-Reset": "30"}]'::jsonb,
          'existing response.headers are kept, ours appended');
-- A second guard in the same request replaces the first one's RateLimit
-- headers (PostgREST would send duplicates), and keeps the others.
SELECT rl_http_guard('guard_keep', 'other');
SELECT is(pg_temp.response_headers(),
          '[{"X-Request-Id": "abc"}, {"Cache-Control": "no-store"}, {"RateLimit-Limit": "2"},
            {"RateLimit-Remaining": "1"}, {"RateLimit-Reset": "30"}]'::jsonb,
          'a second guard replaces the RateLimit headers (its key ''other'' has 1 left too)');
SELECT is(pg_temp.header('RateLimit-Remaining'), '1', '... one RateLimit-Remaining, the second guard''s');
-- Unreadable earlier headers are replaced by ours.
SELECT pg_temp.setting('response.headers', 'not json');
SELECT lives_ok($$SELECT rl_http_guard('guard_keep', 'third')$$, 'unreadable response.headers is tolerated');
SELECT is(pg_temp.response_headers(),
          '[{"RateLimit-Limit": "2"}, {"RateLimit-Remaining": "1"}, {"RateLimit-Reset": "30"}]'::jsonb,
          '... and replaced by ours');

-------------------------------------------------------------------------
-- 4. A refusal: PT429 (PostgREST answers HTTP 429), message, detail and
-- hint.  The headers: set_config(..., true) inside the refused call is
-- undone with the subtransaction that catches the error (and in PostgREST
-- with the whole request's transaction).
-------------------------------------------------------------------------
SELECT pg_temp.request('{"sub":"r"}', NULL);
SELECT rl_http_guard('guard_refuse');
SELECT rl_http_guard('guard_refuse');
SELECT is(pg_temp.header('RateLimit-Remaining'), '0', 'two requests pass, the bucket is empty');
SELECT throws_ok($$SELECT rl_http_guard('guard_refuse')$$, 'PT429', 'rate limit of zone "guard_refuse" exceeded',
                 'the third is refused with PT429');
SELECT pg_temp.setting('response.headers', '[{"X-Before": "1"}]');
SELECT * FROM pg_temp.error_of($$SELECT rl_http_guard('guard_refuse')$$) \gset refused_
SELECT is(:'refused_state'::text, 'PT429', 'caught: PT429');
SELECT is(:'refused_detail'::text, 'Retry after 30 s.', 'the detail gives the wait in whole seconds');
SELECT is(:'refused_hint'::text, 'Wait for the Retry-After header''s seconds before the next request.', 'the hint');
SELECT is(:'refused_headers_after'::text, '[{"X-Before": "1"}]',
          'response.headers after the caught refusal: as before the call (the subtransaction''s set_config is undone)');
-- The headers of a refusal do not reach the client (documented): they are
-- set just before the RAISE, and the error undoes them (above; in
-- PostgREST the request's transaction rolls back).  The wait is in the
-- error's detail, which PostgREST sends in the 429's body.
SELECT is(pg_temp.json_or_null(:'refused_detail'), NULL,
          'the refusal''s detail is text for the 429 body, not PostgREST''s PGRST header JSON');
-- Refusals take nothing: 30 s later one request passes again.
SELECT pg_temp.setting('ratelimit.now_override', '2026-01-01 00:00:30+00');
SELECT lives_ok($$SELECT rl_http_guard('guard_refuse')$$, '30 s later a request passes');
SELECT pg_temp.setting('ratelimit.now_override', '2026-01-01 00:00:00+00');

-- A shadow zone refuses nothing: no PT429, no Retry-After, Remaining 0.
SELECT pg_temp.request('{"sub":"s"}', NULL);
SELECT rl_http_guard('guard_shadow') FROM generate_series(1, 2);
SELECT pg_temp.setting('response.headers', '');
SELECT lives_ok($$SELECT rl_http_guard('guard_shadow')$$, 'a shadow zone lets the third request through');
SELECT is(pg_temp.response_headers(),
          '[{"RateLimit-Limit": "2"}, {"RateLimit-Remaining": "0"}, {"RateLimit-Reset": "60"}]'::jsonb,
          '... with no Retry-After');
SELECT is((SELECT would_allow FROM rl_peek('guard_shadow', 'sub:s')), false, '... although its limit would refuse');

-------------------------------------------------------------------------
-- 5. PostgREST switches to the request's role (here a role with no
-- privileges beyond PUBLIC's) before db-pre-request runs.
-------------------------------------------------------------------------
CREATE ROLE rl_pgtap_guard_web NOLOGIN;
SELECT is(has_function_privilege('rl_pgtap_guard_web', 'rl_http_guard(text, text)', 'EXECUTE'), true,
          'PUBLIC may execute rl_http_guard');
SET LOCAL ROLE rl_pgtap_guard_web;
SELECT pg_temp.request('{"sub":"w","role":"rl_pgtap_guard_web"}', '{"x-forwarded-for":"203.0.113.50"}');
SELECT lives_ok($$SELECT rl_http_guard('guard_role')$$, 'a non-superuser role can call the guard');
SELECT is(pg_temp.header('RateLimit-Remaining'), '1', '... and gets the headers');
SELECT lives_ok($$SELECT rl_http_guard('guard_role')$$, '... a second time');
SELECT throws_ok($$SELECT rl_http_guard('guard_role')$$, 'PT429', NULL, '... and is refused the third time');
SELECT throws_ok($$SELECT * FROM rl_keys$$, '42501', NULL, '... without reading rl_keys');
SELECT throws_ok($$SELECT rl_gc()$$, '42501', NULL, '... or running rl_gc');
SELECT throws_ok($$SET LOCAL ratelimit.now_override = '2027-01-01 00:00:00+00'$$, '42501', NULL,
                 '... or moving the test clock');
RESET ROLE;
SELECT is(pg_temp.left_in('guard_role', 'sub:w'), 0::bigint, 'the role''s requests were counted under its subject');

-------------------------------------------------------------------------
-- 6. GET and HEAD requests: PostgREST runs them in READ ONLY
-- transactions, db-pre-request included.  A shmem zone decides there; a
-- table-store zone cannot write there: the guard raises 25006 with a hint
-- to use a shmem zone (documented), before any call.
-------------------------------------------------------------------------
SELECT pg_temp.request('{"sub":"g"}', NULL);
SAVEPOINT get_request;
SET TRANSACTION READ ONLY;
SELECT (pg_temp.error_of($$SELECT rl_http_guard('guard_ro_shm')$$)).state AS ro_shmem,
       (pg_temp.error_of($$SELECT rl_http_guard('guard_ro')$$)).state AS ro_table,
       (pg_temp.error_of($$SELECT rl_http_guard('guard_ro')$$)).hint AS ro_table_hint,
       current_setting('transaction_read_only') AS ro_mode \gset
ROLLBACK TO SAVEPOINT get_request;
SELECT is(:'ro_mode'::text, 'on', 'the savepoint ran READ ONLY, as a GET request does');
SELECT is(:'ro_shmem'::text, 'ok', 'a shmem zone guards a GET request');
SELECT is(pg_temp.left_in('guard_ro_shm', 'sub:g'), 1::bigint, '... and counted it (shmem is not transactional)');
SELECT is(:'ro_table'::text, '25006', 'a table-store zone cannot guard a GET request: 25006');
SELECT is(:'ro_table_hint'::text, 'Use a zone on the shmem store: rl_zone_set(..., store => ''shmem'').',
          '... with a hint to use a shmem zone');
SELECT is(pg_temp.left_in('guard_ro', 'sub:g'), 2::bigint, '... and took nothing');

-------------------------------------------------------------------------
-- 7. The guard's call is transactional on the table store: a request
-- whose transaction rolls back (PostgREST: any error after the hook) gives
-- its token back.
-------------------------------------------------------------------------
SELECT pg_temp.request('{"sub":"t"}', NULL);
SAVEPOINT failed_request;
SELECT rl_http_guard('guard_keep', NULL);
ROLLBACK TO SAVEPOINT failed_request;
SELECT is(pg_temp.left_in('guard_keep', 'sub:t'), 2::bigint, 'a rolled-back request takes nothing');

SELECT * FROM finish();
ROLLBACK;
