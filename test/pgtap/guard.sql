-- rl_http_guard(zone, key, trusted_proxies, proxy_header) (0.5.0),
-- PostgREST's db-pre-request hook, called the way PostgREST calls it:
-- inside the request's transaction, as the request's role, with
-- request.jwt.claims and request.headers set as transaction-local settings
-- (JSON; header names in lower case), and the RateLimit headers read back
-- from response.headers (a JSON array of one-header objects).
--
-- Covered:
-- 1. Key precedence: the explicit key, else 'sub:' || the JWT subject, else
--    'ip:' || the client address the trusted proxies appended, else
--    'ip:unknown'; malformed claims or headers are tolerated.
-- 2. Spoofing: the address is counted from the right, so a client that
--    writes its own X-Forwarded-For (or Forwarded) entries still has one
--    key (before 0.5.0 the leftmost entry was used: 5 of 5 admitted).
-- 3. The address: what is no address (or too few hops) is 'ip:unknown',
--    never the client's choice; IPv6 normalised, IPv4-mapped IPv6 is the
--    IPv4 client, ports dropped; trusted_proxies and proxy_header as
--    arguments and as settings (the argument wins); the header not chosen
--    is ignored, since a client could write it.
-- 4. Keys over 1024 bytes are hashed.
-- 5. response.headers on an allowed request.
-- 6. The refusal: PostgREST's PGRST error (body in MESSAGE, status and
--    headers in DETAIL) by default, PT429 with ratelimit.guard_error =
--    'pt429'; refusals take nothing; a shadow zone refuses nothing.
-- 7. Least privilege: a role PostgREST switches to (anon) may not run the
--    guard until rl_grant; it can never choose its trusted proxies.
-- 8. GET and HEAD run READ ONLY: a shmem zone decides there, a table-store
--    zone (or one with history) refuses with 25006 naming the zone.
-- 9. A table-store call is undone with the request's transaction.
-- 10. Bad arguments and their SQLSTATEs.
--
-- Zones are token buckets on the fixed test clock, mostly one zone per
-- case; which key a request was counted under is read with a cost-0
-- rl_peek.  Zones and keys are private to this file (the shmem store is
-- shared by the cluster's databases), and so is the role, created inside
-- this file's transaction (roles are cluster-wide).
--
-- pgTAP records its results in tables, so no assertion runs inside a
-- savepoint that is rolled back: values seen there go to psql variables
-- (\gset) and are asserted afterwards.  Needs ratelimit in
-- shared_preload_libraries (shmem zones) and a superuser (the test clock,
-- ratelimit.trusted_proxies and ratelimit.proxy_header are superuser-only).
BEGIN;
SET LOCAL timezone = 'UTC';
SET LOCAL client_min_messages = warning;

SELECT plan(129);

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
-- What one anonymous request with these headers took from key: 1 if it was
-- counted under key, 0 if under another.
CREATE FUNCTION pg_temp.taken(zone text, headers jsonb, key text,
                              trusted_proxies int DEFAULT NULL, proxy_header text DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    before bigint := pg_temp.left_in(zone, key);
BEGIN
    PERFORM pg_temp.request(NULL, headers::text);
    PERFORM rl_http_guard(zone, NULL, trusted_proxies, proxy_header);
    RETURN before - pg_temp.left_in(zone, key);
END $$;
-- How many of these anonymous requests (one per headers object) the guard
-- admits; a refusal must be PostgREST's PGRST, any other error propagates.
CREATE FUNCTION pg_temp.admitted(zone text, requests jsonb[],
                                 trusted_proxies int DEFAULT NULL, proxy_header text DEFAULT NULL)
RETURNS int LANGUAGE plpgsql AS $$
DECLARE
    headers jsonb;
    n int := 0;
BEGIN
    FOREACH headers IN ARRAY requests LOOP
        PERFORM pg_temp.request(NULL, headers::text);
        BEGIN
            PERFORM rl_http_guard(zone, NULL, trusted_proxies, proxy_header);
            n := n + 1;
        EXCEPTION WHEN SQLSTATE 'PGRST' THEN
            NULL;
        END;
    END LOOP;
    RETURN n;
END $$;
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
                  'long', 'headers', 'refuse', 'keep', 'role', 'ro', 'args']) z;
SELECT rl_zone_set('guard_' || z, 'token_bucket', 1, '1 minute')
FROM unnest(ARRAY['spoof_xff', 'spoof_fwd', 'spoof_setting']) z;
-- Room for every address case below: none of them is ever refused.
SELECT rl_zone_set('guard_addr', 'token_bucket', 1000, '1 minute');
SELECT rl_zone_set('guard_shadow', 'token_bucket', 2, '1 minute', shadow => true);
SELECT rl_zone_set('guard_ro_shm', 'token_bucket', 2, '1 minute', store => 'shmem');
SELECT rl_zone_set('guard_ro_history', 'token_bucket', 2, '1 minute', store => 'shmem', history => true);

-------------------------------------------------------------------------
-- 1. Key precedence, as PostgREST sets the request.
-------------------------------------------------------------------------
-- Claims with a subject and an X-Forwarded-For: the subject wins.
SELECT pg_temp.request('{"sub":"u1","role":"web"}', '{"x-forwarded-for":"203.0.113.7, 10.0.0.1"}');
SELECT lives_ok($$SELECT rl_http_guard('guard_sub')$$, 'a request with a JWT subject passes');
SELECT is(pg_temp.left_in('guard_sub', 'sub:u1'), 1::bigint, 'it is counted under sub:<subject>');
SELECT is(pg_temp.left_in('guard_sub', 'ip:10.0.0.1'), 2::bigint, '... not under the address');

-- No claims (an anonymous request): the entry the one trusted proxy
-- (ratelimit.trusted_proxies' default) appended, the rightmost.
SELECT pg_temp.request(NULL, '{"x-forwarded-for":"203.0.113.7, 10.0.0.1","user-agent":"curl"}');
SELECT lives_ok($$SELECT rl_http_guard('guard_ip')$$, 'a request without claims passes');
SELECT is(pg_temp.left_in('guard_ip', 'ip:10.0.0.1'), 1::bigint,
          'it is counted under ip:<rightmost entry of X-Forwarded-For>');
SELECT is(pg_temp.left_in('guard_ip', 'ip:203.0.113.7'), 2::bigint,
          '... not under an entry the client may have written');
-- Spaces around the entry are trimmed.
SELECT pg_temp.request(NULL, '{"x-forwarded-for":"10.0.0.1,  198.51.100.2 "}');
SELECT rl_http_guard('guard_ip');
SELECT is(pg_temp.left_in('guard_ip', 'ip:198.51.100.2'), 1::bigint, 'the entry is trimmed');

-- Neither claims nor an address: one shared key.
SELECT pg_temp.request(NULL, NULL);
SELECT lives_ok($$SELECT rl_http_guard('guard_anon')$$, 'a request with neither passes');
SELECT is(pg_temp.left_in('guard_anon', 'ip:unknown'), 1::bigint, 'it is counted under ip:unknown');
SELECT pg_temp.request(NULL, '{"user-agent":"curl"}');
SELECT rl_http_guard('guard_anon');
SELECT is(pg_temp.left_in('guard_anon', 'ip:unknown'), 0::bigint, '... and so is one without X-Forwarded-For');
SELECT pg_temp.request(NULL, '{"x-forwarded-for":""}');
SELECT is((pg_temp.error_of($$SELECT rl_http_guard('guard_anon')$$)).state, 'PGRST',
          '... and one with an empty X-Forwarded-For: the shared key is now refused');
SELECT is(pg_temp.left_in('guard_anon', 'anonymous'), 2::bigint, 'the key is no longer ''anonymous''');

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
-- Malformed headers too: no address.
SELECT pg_temp.request(NULL, '{x-forwarded-for: 192.0.2.9');
SELECT lives_ok($$SELECT rl_http_guard('guard_badheaders')$$, 'malformed request.headers is tolerated');
SELECT is(pg_temp.left_in('guard_badheaders', 'ip:unknown'), 1::bigint, '... and the key is ip:unknown');
SELECT pg_temp.request(NULL, '["x-forwarded-for", "192.0.2.9"]');
SELECT rl_http_guard('guard_badheaders');
SELECT is(pg_temp.left_in('guard_badheaders', 'ip:unknown'), 0::bigint,
          'request.headers that is JSON but not an object: ip:unknown too');

-------------------------------------------------------------------------
-- 2. Spoofing (the issue's reproduction): a client sends its own
-- X-Forwarded-For, a new address each time, and the trusted proxy appends
-- the real one.  On a zone of 1 per minute, 1 of 5 is admitted: the
-- client has one key, whatever it writes.
-------------------------------------------------------------------------
SELECT is(pg_temp.admitted('guard_spoof_xff',
              ARRAY(SELECT jsonb_build_object('x-forwarded-for', format('10.0.0.%s, 203.0.113.9', n))
                    FROM generate_series(1, 5) n)),
          1, 'spoofed X-Forwarded-For entries: 1 of 5 requests admitted');
SELECT is(pg_temp.left_in('guard_spoof_xff', 'ip:203.0.113.9'), 0::bigint,
          '... all counted under the address the proxy appended');
SELECT is(ARRAY(SELECT pg_temp.left_in('guard_spoof_xff', format('ip:10.0.0.%s', n)) FROM generate_series(1, 5) n),
          ARRAY[1, 1, 1, 1, 1]::bigint[], '... none under a spoofed one');
-- The same with the Forwarded header, when the proxies write that one.
SELECT is(pg_temp.admitted('guard_spoof_fwd',
              ARRAY(SELECT jsonb_build_object('forwarded', format('for=10.0.0.%s, for=203.0.113.9;proto=https', n))
                    FROM generate_series(1, 5) n),
              proxy_header => 'forwarded'),
          1, 'spoofed Forwarded elements: 1 of 5 requests admitted');
-- Two trusted proxies (the setting): the client's entries are left of both.
SELECT pg_temp.setting('ratelimit.trusted_proxies', '2');
SELECT is(pg_temp.admitted('guard_spoof_setting',
              ARRAY(SELECT jsonb_build_object('x-forwarded-for', format('10.0.0.%s, 203.0.113.9, 10.1.1.1', n))
                    FROM generate_series(1, 5) n)),
          1, 'two trusted proxies, spoofed entries: 1 of 5 requests admitted');
SELECT pg_temp.setting('ratelimit.trusted_proxies', '1');

-------------------------------------------------------------------------
-- 3. The address: 'ip:unknown' whenever the trusted entry is not an
-- address (a client must not pick its key by writing garbage), one key per
-- client however a proxy writes its address, and the proxies counted as
-- configured.
-------------------------------------------------------------------------
SELECT is(pg_temp.taken('guard_addr', jsonb_build_object('x-forwarded-for', h), 'ip:unknown'), 1::bigint,
          format('X-Forwarded-For %L: ip:unknown', h))
FROM unnest(ARRAY['', ' , ', 'garbage', 'unknown', 'client.example.com', '1.2.3', 'fe80::1%eth0',
                  '198.51.100.1, unknown']) WITH ORDINALITY u(h, n)
ORDER BY n;
SELECT is(pg_temp.taken('guard_addr', '{"x-forwarded-for":"198.51.100.1"}', 'ip:unknown', 2), 1::bigint,
          'fewer entries than trusted_proxies (the request bypassed a proxy): ip:unknown');
SELECT pg_temp.setting('ratelimit.trusted_proxies', '2');
SELECT is(pg_temp.taken('guard_addr', '{"x-forwarded-for":"198.51.100.1"}', 'ip:unknown'), 1::bigint,
          '... and so with ratelimit.trusted_proxies = 2');
SELECT pg_temp.setting('ratelimit.trusted_proxies', '1');
SELECT is(pg_temp.taken('guard_addr', '{"x-forwarded-for":"198.51.100.1"}', 'ip:unknown', 0), 1::bigint,
          'trusted_proxies 0 trusts no header: ip:unknown');
SELECT pg_temp.setting('ratelimit.trusted_proxies', '0');
SELECT is(pg_temp.taken('guard_addr', '{"x-forwarded-for":"198.51.100.1"}', 'ip:unknown'), 1::bigint,
          '... and so does ratelimit.trusted_proxies = 0');
SELECT pg_temp.setting('ratelimit.trusted_proxies', '1');

-- IPv6 normalised, ports dropped, IPv4-mapped IPv6 is the IPv4 client.
SELECT is(pg_temp.taken('guard_addr', jsonb_build_object('x-forwarded-for', h), k), 1::bigint,
          format('X-Forwarded-For %L: %s', h, k))
FROM (VALUES (1, '2001:DB8:0:0:0:0:0:7', 'ip:2001:db8::7'),
             (2, '2001:0db8::0007', 'ip:2001:db8::7'),
             (3, '[2001:db8::7]', 'ip:2001:db8::7'),
             (4, '[2001:DB8::7]:443', 'ip:2001:db8::7'),
             (5, '203.0.113.7:51234', 'ip:203.0.113.7'),
             (6, '::ffff:192.0.2.5', 'ip:192.0.2.5'),
             (7, '[::FFFF:c000:0205]:80', 'ip:192.0.2.5'),
             (8, '192.0.2.5', 'ip:192.0.2.5')) v(n, h, k)
ORDER BY n;
SELECT is(pg_temp.left_in('guard_addr', 'ip:2001:db8::7'), 996::bigint,
          'four spellings of one IPv6 client: one key');

-- Many hops: the client is the entry trusted_proxies from the right.
SELECT is(pg_temp.taken('guard_addr', '{"x-forwarded-for":"192.0.2.1, 198.51.100.1, 198.51.100.2, 198.51.100.3"}',
                        'ip:198.51.100.2', 2), 1::bigint, 'trusted_proxies 2: the second entry from the right');
SELECT is(pg_temp.taken('guard_addr', '{"x-forwarded-for":"192.0.2.1, 198.51.100.1, 198.51.100.2, 198.51.100.3"}',
                        'ip:198.51.100.1', 3), 1::bigint, 'trusted_proxies 3: the third');
SELECT pg_temp.setting('ratelimit.trusted_proxies', '2');
SELECT is(pg_temp.taken('guard_addr', '{"x-forwarded-for":"192.0.2.1, 198.51.100.1, 198.51.100.2, 198.51.100.3"}',
                        'ip:198.51.100.2'), 1::bigint, 'ratelimit.trusted_proxies = 2: the second');
SELECT pg_temp.setting('ratelimit.trusted_proxies', '3');
SELECT is(pg_temp.taken('guard_addr', '{"x-forwarded-for":"192.0.2.1, 198.51.100.1, 198.51.100.2, 198.51.100.3"}',
                        'ip:198.51.100.1'), 1::bigint, 'ratelimit.trusted_proxies = 3: the third');
SELECT is(pg_temp.taken('guard_addr', '{"x-forwarded-for":"192.0.2.1, 198.51.100.1, 198.51.100.2, 198.51.100.3"}',
                        'ip:198.51.100.3', 1), 1::bigint, 'the argument wins over the setting');
SELECT is(pg_temp.taken('guard_addr', '{"x-forwarded-for":"unknown, 198.51.100.1, 198.51.100.2, 198.51.100.3"}',
                        'ip:198.51.100.1'), 1::bigint, 'a malformed entry left of the trusted ones does not matter');
SELECT pg_temp.setting('ratelimit.trusted_proxies', '1');

-- Forwarded (RFC 7239): its for= parameter, when the proxies write it.
SELECT is(pg_temp.taken('guard_addr', jsonb_build_object('forwarded', 'for=192.0.2.43, for="[2001:db8:cafe::17]:4711";proto=https'),
                        'ip:2001:db8:cafe::17', NULL, 'forwarded'), 1::bigint,
          'proxy_header forwarded: the for= of the rightmost element, unquoted, without its port');
SELECT is(pg_temp.taken('guard_addr', jsonb_build_object('forwarded', 'for=192.0.2.43, for="[2001:db8:cafe::17]:4711";proto=https'),
                        'ip:192.0.2.43', 2, 'forwarded'), 1::bigint,
          '... and with trusted_proxies 2, the second element');
SELECT is(pg_temp.taken('guard_addr', '{"forwarded":"for=unknown"}', 'ip:unknown', NULL, 'forwarded'), 1::bigint,
          '... an obfuscated node (for=unknown) is ip:unknown');
SELECT is(pg_temp.taken('guard_addr', '{"forwarded":"for=198.51.100.60;proto=https","x-forwarded-for":"10.9.9.9"}',
                        'ip:198.51.100.60', NULL, 'forwarded'), 1::bigint,
          '... and X-Forwarded-For, which a client could write, is ignored');
SELECT is(pg_temp.taken('guard_addr', '{"x-forwarded-for":"10.9.9.9"}', 'ip:unknown', NULL, 'forwarded'), 1::bigint,
          '... also when it is the only one');
SELECT pg_temp.setting('ratelimit.proxy_header', 'forwarded');
SELECT is(pg_temp.taken('guard_addr', '{"forwarded":"for=198.51.100.61","x-forwarded-for":"10.9.9.9"}',
                        'ip:198.51.100.61'), 1::bigint, 'ratelimit.proxy_header = forwarded: the same');
SELECT is(pg_temp.taken('guard_addr', '{"forwarded":"for=198.51.100.61","x-forwarded-for":"10.9.9.9"}',
                        'ip:10.9.9.9', NULL, 'x-forwarded-for'), 1::bigint, '... the argument wins over the setting');
SELECT pg_temp.setting('ratelimit.proxy_header', 'x-forwarded-for');
-- By default, a Forwarded header is the client's own.
SELECT is(pg_temp.taken('guard_addr', '{"forwarded":"for=10.9.9.9"}', 'ip:unknown'), 1::bigint,
          'by default a Forwarded header (spoofed) is ignored: ip:unknown');
SELECT is(pg_temp.taken('guard_addr', '{"forwarded":"for=10.9.9.9","x-forwarded-for":"198.51.100.70"}',
                        'ip:198.51.100.70'), 1::bigint, '... and X-Forwarded-For is used');
SELECT is(pg_temp.left_in('guard_addr', 'ip:10.9.9.9'), 999::bigint,
          'the spoofed address was counted only when the argument chose X-Forwarded-For');

-------------------------------------------------------------------------
-- 4. Long keys: a subject (or explicit key) making a key over 1024 bytes
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
-- 5. The headers of the IETF draft (-09/-10): RateLimit-Policy (the
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
-- 6. A refusal.  PostgREST (11 and later) turns SQLSTATE PGRST into the
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

-- A cron zone that no job refills: a refusal promises no time.  The
-- detail says so, and there is no Retry-After header (a client would wait
-- for nothing).  The zone is written directly by the superuser, as a
-- restored dump fills the zone table: rl_zone_set refuses a cron zone no
-- job could refill.
INSERT INTO ratelimit.zone (zone, algorithm, rate, period, burst, refill)
VALUES ('guard_cron', 'token_bucket', 1, '1 minute', NULL, 'cron');
SELECT pg_temp.request('{"sub":"c"}', NULL);
SELECT rl_http_guard('guard_cron');
SELECT * FROM pg_temp.error_of($$SELECT rl_http_guard('guard_cron')$$) \gset cron_
SELECT is(ARRAY[:'cron_state', pg_temp.json_or_null(:'cron_message') ->> 'details'],
          ARRAY['PGRST', 'No refill is scheduled.'],
          'a cron zone without a job refuses with PGRST, its details: no refill is scheduled');
-- The draft's t parameter (seconds until the quota resets) is optional:
-- with no time to promise it is left out, and r (what remains) is still
-- said.
SELECT is(ARRAY(SELECT jsonb_object_keys(pg_temp.json_or_null(:'cron_detail') -> 'headers') ORDER BY 1)
             @> ARRAY['Retry-After'], false,
          '... and its headers have no Retry-After');
SELECT is(pg_temp.json_or_null(:'cron_detail') -> 'headers',
          '{"RateLimit-Policy": "\"guard_cron\";q=1;w=60", "RateLimit": "\"guard_cron\";r=0"}'::jsonb,
          '... but the policy, and a RateLimit with r=0 and no t');
SELECT pg_temp.setting('ratelimit.guard_error', 'pt429');
SELECT * FROM pg_temp.error_of($$SELECT rl_http_guard('guard_cron')$$) \gset cron_pt429_
SELECT pg_temp.setting('ratelimit.guard_error', 'pgrst');
SELECT is(ARRAY[:'cron_pt429_state', :'cron_pt429_detail'], ARRAY['PT429', 'No refill is scheduled.'],
          'with guard_error = pt429: PT429, the detail says no refill is scheduled');

-------------------------------------------------------------------------
-- 7. PostgREST switches to the request's role (here an anonymous one, as
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
RESET ROLE;
SELECT is(pg_temp.left_in('guard_role', 'ip:203.0.113.50'), 0::bigint,
          'the role''s requests were counted under the address its proxy appended');

-------------------------------------------------------------------------
-- 8. GET and HEAD requests: PostgREST runs them in READ ONLY
-- transactions, db-pre-request included.  A shmem zone decides there; a
-- zone that keeps its state in a table, or records a history, cannot
-- write there: rl_limit raises 25006, naming the zone, with a hint to use
-- a shmem zone without history.
-------------------------------------------------------------------------
SELECT pg_temp.request('{"sub":"g"}', NULL);
SAVEPOINT get_request;
SET TRANSACTION READ ONLY;
SELECT (pg_temp.error_of($$SELECT rl_http_guard('guard_ro_shm')$$)).state AS ro_shmem,
       current_setting('transaction_read_only') AS ro_mode \gset
SELECT * FROM pg_temp.error_of($$SELECT rl_http_guard('guard_ro')$$) \gset ro_table_
SELECT * FROM pg_temp.error_of($$SELECT rl_http_guard('guard_ro_history')$$) \gset ro_history_
ROLLBACK TO SAVEPOINT get_request;
SELECT is(:'ro_mode'::text, 'on', 'the savepoint ran READ ONLY, as a GET request does');
SELECT is(:'ro_shmem'::text, 'ok', 'a shmem zone guards a GET request');
SELECT is(pg_temp.left_in('guard_ro_shm', 'sub:g'), 1::bigint, '... and counted it (shmem is not transactional)');
SELECT is(:'ro_table_state'::text, '25006', 'a table-store zone cannot guard a GET request: 25006');
SELECT is(:'ro_table_message'::text, 'cannot execute rl_limit() in a read-only transaction', '... the message');
SELECT is(:'ro_table_detail'::text, 'Zone "guard_ro" keeps its state in a table.', '... the detail names the zone');
SELECT is(left(:'ro_table_hint'::text, 64), 'A read-only transaction (PostgREST runs GET and HEAD requests so',
          '... the hint explains why and points to a shmem zone');
SELECT is(pg_temp.left_in('guard_ro', 'sub:g'), 2::bigint, '... and took nothing');
SELECT is(ARRAY[:'ro_history_state', :'ro_history_detail']::text[],
          ARRAY['25006', 'Zone "guard_ro_history" records every request in its history table.'],
          'a shmem zone with history cannot either: 25006, the detail says why');

-------------------------------------------------------------------------
-- 9. The guard's call is transactional on the table store: a request
-- whose transaction rolls back (PostgREST: any error after the hook) gives
-- its token back.
-------------------------------------------------------------------------
SELECT pg_temp.request('{"sub":"t"}', NULL);
SAVEPOINT failed_request;
SELECT rl_http_guard('guard_keep', NULL);
ROLLBACK TO SAVEPOINT failed_request;
SELECT is(pg_temp.left_in('guard_keep', 'sub:t'), 2::bigint, 'a rolled-back request takes nothing');

-------------------------------------------------------------------------
-- 10. Bad arguments.  The address arguments are checked on every request,
-- not only on the anonymous ones that use them: a misconfigured wrapper
-- fails at once, not only for anonymous clients.
-------------------------------------------------------------------------
SELECT pg_temp.request(NULL, NULL);
SELECT throws_ok($$SELECT rl_http_guard('guard_empty', '')$$, '22023', 'key must not be empty',
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
SELECT is(pg_temp.left_in('guard_args', 'ip:198.51.100.9'), 2::bigint, '... and none of them took anything');
SELECT pg_temp.request('{"sub":"args-user"}', NULL);
SELECT throws_ok($$SELECT rl_http_guard('guard_args', NULL, 65)$$, '22023', 'trusted_proxies must be between 0 and 64',
                 'trusted_proxies 65 is refused on a request with a subject');
SELECT throws_ok($$SELECT rl_http_guard('guard_args', 'explicit', NULL, 'x-real-ip')$$, '22023',
                 'unknown proxy header "x-real-ip"', 'proxy_header x-real-ip is refused with an explicit key');
SELECT is(pg_temp.left_in('guard_args', 'sub:args-user') + pg_temp.left_in('guard_args', 'explicit'), 4::bigint,
          '... taking nothing');

SELECT * FROM finish();
ROLLBACK;
