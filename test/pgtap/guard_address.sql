-- rl_http_guard's key for a request without a JWT subject (0.5.0): the
-- client address the trusted proxies appended, called the way PostgREST
-- calls the guard (request.headers a transaction-local JSON setting,
-- header names in lower case).  guard.sql covers the rest of the guard.
--
-- Covered:
-- 1. Spoofing: the address is counted from the right, so a client that
--    writes its own X-Forwarded-For (or Forwarded) entries still has one
--    key (before 0.5.0 the leftmost entry was used: 5 of 5 admitted).
-- 2. One key per client however a proxy writes its address (IPv6
--    normalised, IPv4-mapped IPv6 is the IPv4 client, ports dropped); the
--    proxies counted as configured (arguments and settings, the argument
--    wins); the header not chosen is ignored, since a client could write
--    it; empty list elements are no hops ("a, , b", trailing commas).
-- 3. IPv6 clients keyed by their network (ratelimit.ipv6_prefix, default
--    56, or the ipv6_prefix argument), IPv4 clients by their address: a
--    client rotating its addresses inside its /64 behind one trusted proxy
--    (the issue's reproduction: 40 of 40 admitted on a zone of 20 before)
--    gets 20 of 40, as one IPv4 address does.
-- 4. A request with no usable address (request.headers no JSON object, the
--    header missing, too few entries, an entry that is no address: CIDR,
--    zone id, octal, quoted, a host name) is refused with PostgREST's 400,
--    the reason in its details, counted in rl_counters.unkeyed, and
--    charges no key: such requests share no bucket, so a client sending
--    garbage locks out nobody (before: all shared 'ip:unknown').  No proxy
--    trusted at all: 55000, the server's misconfiguration.
--
-- Zones are shmem token buckets (the guard takes no other) on the fixed
-- test clock; which key a request was counted under is read with a cost-0
-- rl_peek, and rl_keys.  Zones are private to this file (the shmem store is
-- shared by the cluster's databases).  Needs ratelimit in
-- shared_preload_libraries and a superuser (the test clock and the guard's
-- settings are superuser-only).
BEGIN;
SET LOCAL timezone = 'UTC';
SET LOCAL client_min_messages = warning;

SELECT plan(91);

SET LOCAL ratelimit.now_override = '2026-01-01 00:00:00+00';
\ir guard_helpers.psql

SELECT rl_zone_set('ga_' || z, 'token_bucket', 1, '1 minute', store => 'shmem')
FROM unnest(ARRAY['spoof_xff', 'spoof_fwd', 'spoof_setting']) z;
-- Room for every address case below: none of them is ever refused.
SELECT rl_zone_set('ga_addr', 'token_bucket', 1000, '1 minute', store => 'shmem');
-- The issue's zone: 20 a minute, bursts of 20.
SELECT rl_zone_set('ga_' || z, 'token_bucket', 20, '1 minute', burst => 20, store => 'shmem')
FROM unnest(ARRAY['v6_64', 'v6_56', 'v6_48', 'v4', 'v6_set', 'v6_arg']) z;
SELECT rl_zone_set('ga_' || z, 'token_bucket', 2, '1 minute', store => 'shmem')
FROM unnest(ARRAY['bad', 'noproxy', 'ok', 'pt']) z;

-------------------------------------------------------------------------
-- 1. Spoofing (the issue's reproduction): a client sends its own
-- X-Forwarded-For, a new address each time, and the trusted proxy appends
-- the real one.  On a zone of 1 per minute, 1 of 5 is admitted: the
-- client has one key, whatever it writes.
-------------------------------------------------------------------------
SELECT is(pg_temp.admitted('ga_spoof_xff',
              ARRAY(SELECT jsonb_build_object('x-forwarded-for', format('10.0.0.%s, 203.0.113.9', n))
                    FROM generate_series(1, 5) n)),
          1, 'spoofed X-Forwarded-For entries: 1 of 5 requests admitted');
SELECT is(pg_temp.keys_of('ga_spoof_xff'), ARRAY['ip:203.0.113.9'],
          '... all counted under the address the proxy appended, none under a spoofed one');
-- The same with the Forwarded header, when the proxies write that one.
SELECT is(pg_temp.admitted('ga_spoof_fwd',
              ARRAY(SELECT jsonb_build_object('forwarded', format('for=10.0.0.%s, for=203.0.113.9;proto=https', n))
                    FROM generate_series(1, 5) n),
              proxy_header => 'forwarded'),
          1, 'spoofed Forwarded elements: 1 of 5 requests admitted');
-- Two trusted proxies (the setting): the client's entries are left of both.
SELECT pg_temp.setting('ratelimit.trusted_proxies', '2');
SELECT is(pg_temp.admitted('ga_spoof_setting',
              ARRAY(SELECT jsonb_build_object('x-forwarded-for', format('10.0.0.%s, 203.0.113.9, 10.1.1.1', n))
                    FROM generate_series(1, 5) n)),
          1, 'two trusted proxies, spoofed entries: 1 of 5 requests admitted');
SELECT pg_temp.setting('ratelimit.trusted_proxies', '1');

-------------------------------------------------------------------------
-- 2. The address: one key per client however a proxy writes it, and the
-- proxies counted as configured.
-------------------------------------------------------------------------
-- IPv6 normalised (and keyed by its /56), ports dropped, IPv4-mapped IPv6
-- is the IPv4 client.
SELECT is(pg_temp.taken('ga_addr', jsonb_build_object('x-forwarded-for', h), k), 1::bigint,
          format('X-Forwarded-For %L: %s', h, k))
FROM (VALUES (1, '2001:DB8:0:0:0:0:0:7', 'ip:2001:db8::/56'),
             (2, '2001:0db8::0007', 'ip:2001:db8::/56'),
             (3, '[2001:db8::7]', 'ip:2001:db8::/56'),
             (4, '[2001:DB8::7]:443', 'ip:2001:db8::/56'),
             (5, '203.0.113.7:51234', 'ip:203.0.113.7'),
             (6, '::ffff:192.0.2.5', 'ip:192.0.2.5'),
             (7, '[::FFFF:c000:0205]:80', 'ip:192.0.2.5'),
             (8, '192.0.2.5', 'ip:192.0.2.5')) v(n, h, k)
ORDER BY n;
SELECT is(pg_temp.left_in('ga_addr', 'ip:2001:db8::/56'), 996::bigint,
          'four spellings of one IPv6 client: one key');

-- Many hops: the client is the entry trusted_proxies from the right.
SELECT is(pg_temp.taken('ga_addr', '{"x-forwarded-for":"192.0.2.1, 198.51.100.1, 198.51.100.2, 198.51.100.3"}',
                        'ip:198.51.100.2', 2), 1::bigint, 'trusted_proxies 2: the second entry from the right');
SELECT is(pg_temp.taken('ga_addr', '{"x-forwarded-for":"192.0.2.1, 198.51.100.1, 198.51.100.2, 198.51.100.3"}',
                        'ip:198.51.100.1', 3), 1::bigint, 'trusted_proxies 3: the third');
SELECT pg_temp.setting('ratelimit.trusted_proxies', '2');
SELECT is(pg_temp.taken('ga_addr', '{"x-forwarded-for":"192.0.2.1, 198.51.100.1, 198.51.100.2, 198.51.100.3"}',
                        'ip:198.51.100.2'), 1::bigint, 'ratelimit.trusted_proxies = 2: the second');
SELECT pg_temp.setting('ratelimit.trusted_proxies', '3');
SELECT is(pg_temp.taken('ga_addr', '{"x-forwarded-for":"192.0.2.1, 198.51.100.1, 198.51.100.2, 198.51.100.3"}',
                        'ip:198.51.100.1'), 1::bigint, 'ratelimit.trusted_proxies = 3: the third');
SELECT is(pg_temp.taken('ga_addr', '{"x-forwarded-for":"192.0.2.1, 198.51.100.1, 198.51.100.2, 198.51.100.3"}',
                        'ip:198.51.100.3', 1), 1::bigint, 'the argument wins over the setting');
SELECT is(pg_temp.taken('ga_addr', '{"x-forwarded-for":"unknown, 198.51.100.1, 198.51.100.2, 198.51.100.3"}',
                        'ip:198.51.100.1'), 1::bigint, 'a malformed entry left of the trusted ones does not matter');
SELECT pg_temp.setting('ratelimit.trusted_proxies', '1');

-- Empty list elements are no hops (RFC 9110 5.6.1): a client that ends
-- its own X-Forwarded-For with commas ("a,", "a, ,"), which nginx's
-- $proxy_add_x_forwarded_for then extends with ", <address>", must not
-- shift which entry the trusted proxies' count reaches.
SELECT is(pg_temp.taken('ga_addr', jsonb_build_object('x-forwarded-for', h), k, t), 1::bigint,
          format('X-Forwarded-For %L, trusted_proxies %s: %s', h, t, k))
FROM (VALUES (1, '198.51.100.5, , 203.0.113.40', 2, 'ip:198.51.100.5'),
             (2, '198.51.100.5,,203.0.113.40', 2, 'ip:198.51.100.5'),
             (3, '198.51.100.5, ,, 203.0.113.40, 192.0.2.40', 3, 'ip:198.51.100.5'),
             (4, '10.0.0.1, , 203.0.113.41', 1, 'ip:203.0.113.41'),
             (5, '203.0.113.42,', 1, 'ip:203.0.113.42'),
             (6, '203.0.113.43, , ', 1, 'ip:203.0.113.43'),
             (7, ', 203.0.113.44', 1, 'ip:203.0.113.44')) v(n, h, t, k)
ORDER BY n;
SELECT is(pg_temp.taken('ga_addr', '{"forwarded":"for=198.51.100.6, , for=203.0.113.45;proto=https"}',
                        'ip:198.51.100.6', 2, 'forwarded'), 1::bigint,
          'Forwarded "for=a, , for=b", trusted_proxies 2: a (the empty element is no hop)');
SELECT is(ARRAY(SELECT a.state || ' ' || a.status
                FROM unnest(ARRAY[' , 203.0.113.46', '203.0.113.46, ,', ',,,']) WITH ORDINALITY h(h, n),
                     LATERAL pg_temp.answer('ga_addr', jsonb_build_object('x-forwarded-for', h)::text, 2) a
                ORDER BY n),
          ARRAY['PGRST 400', 'PGRST 400', 'PGRST 400'],
          'empty elements do not make up a missing hop: one entry behind two trusted proxies is refused');

-- Forwarded (RFC 7239): its for= parameter, when the proxies write it.
SELECT is(pg_temp.taken('ga_addr', jsonb_build_object('forwarded', 'for=192.0.2.43, for="[2001:db8:cafe::17]:4711";proto=https'),
                        'ip:2001:db8:cafe::/56', NULL, 'forwarded'), 1::bigint,
          'proxy_header forwarded: the for= of the rightmost element, unquoted, without its port');
SELECT is(pg_temp.taken('ga_addr', jsonb_build_object('forwarded', 'for=192.0.2.43, for="[2001:db8:cafe::17]:4711";proto=https'),
                        'ip:192.0.2.43', 2, 'forwarded'), 1::bigint,
          '... and with trusted_proxies 2, the second element');
SELECT is(pg_temp.taken('ga_addr', '{"forwarded":"for=198.51.100.60;proto=https","x-forwarded-for":"10.9.9.9"}',
                        'ip:198.51.100.60', NULL, 'forwarded'), 1::bigint,
          '... and X-Forwarded-For, which a client could write, is ignored');
SELECT pg_temp.setting('ratelimit.proxy_header', 'forwarded');
SELECT is(pg_temp.taken('ga_addr', '{"forwarded":"for=198.51.100.61","x-forwarded-for":"10.9.9.9"}',
                        'ip:198.51.100.61'), 1::bigint, 'ratelimit.proxy_header = forwarded: the same');
SELECT is(pg_temp.taken('ga_addr', '{"forwarded":"for=198.51.100.61","x-forwarded-for":"10.9.9.9"}',
                        'ip:10.9.9.9', NULL, 'x-forwarded-for'), 1::bigint, '... the argument wins over the setting');
SELECT pg_temp.setting('ratelimit.proxy_header', 'x-forwarded-for');
-- By default, a Forwarded header is the client's own.
SELECT is(pg_temp.taken('ga_addr', '{"forwarded":"for=10.9.9.9","x-forwarded-for":"198.51.100.70"}',
                        'ip:198.51.100.70'), 1::bigint, 'by default X-Forwarded-For is used, a Forwarded header ignored');
SELECT is(pg_temp.left_in('ga_addr', 'ip:10.9.9.9'), 999::bigint,
          'the spoofed address was counted only when the argument chose X-Forwarded-For');

-------------------------------------------------------------------------
-- 3. IPv6 clients by their network.  The issue: behind one trusted proxy,
-- a client rotating its addresses inside its /64 got 40 of 40 requests
-- through a zone with burst 20 (one IPv4 address: 20 of 40).
-------------------------------------------------------------------------
-- rotating(prefix, n): n requests behind one proxy, each from another
-- address starting with prefix (whole groups, ending in ':'); the group
-- after prefix is the request's number (below 0x100).
CREATE FUNCTION pg_temp.rotating(prefix text, n int) RETURNS jsonb[] LANGUAGE sql AS $$
    SELECT array_agg(jsonb_build_object('x-forwarded-for', '10.0.0.1, ' || prefix || array_to_string(
               (ARRAY[to_hex(i), to_hex(i * 7919 % 65536), to_hex(i + 1), to_hex(i * 3), 'ab'])
                   [1:8 - length(regexp_replace(prefix, '[^:]', '', 'g'))], ':'))
           ORDER BY i)
    FROM generate_series(1, n) i
$$;
SELECT is(pg_temp.admitted('ga_v6_64', pg_temp.rotating('2001:db8:1200:5:', 40)), 20,
          'the issue: 40 requests from 40 addresses of one /64 on a zone of 20: 20 admitted');
SELECT is(pg_temp.keys_of('ga_v6_64'), ARRAY['ip:2001:db8:1200::/56'],
          '... all under one key: the client''s /56 (ratelimit.ipv6_prefix defaults to 56)');
SELECT is(pg_temp.admitted('ga_v6_56', pg_temp.rotating('2001:db8:12ab:', 40)), 20,
          '40 requests from 40 /64s of one /56: 20 admitted');
SELECT is(pg_temp.admitted('ga_v4', ARRAY(SELECT '{"x-forwarded-for":"198.51.100.77"}'::jsonb
                                          FROM generate_series(1, 40))), 20,
          'as for one IPv4 address: 20 of 40');
SELECT is(pg_temp.admitted('ga_v4', ARRAY(SELECT jsonb_build_object('x-forwarded-for', '198.51.100.' || i)
                                          FROM generate_series(100, 109) i)), 10,
          'IPv4 stays per address: 10 neighbours of one /24 are 10 clients');
SELECT is(pg_temp.admitted('ga_v4', ARRAY['{"x-forwarded-for":"::ffff:198.51.100.77"}'::jsonb]), 0,
          'an IPv4-mapped IPv6 address is its IPv4 client (already drained)');
-- Other /56s are other clients.
SELECT is(pg_temp.admitted('ga_v6_64', ARRAY['{"x-forwarded-for":"2001:db8:1300::1"}'::jsonb,
                                             '{"x-forwarded-for":"2001:db8:1201::1"}'::jsonb]), 2,
          'addresses of two other /56s: admitted, two other clients');
-- A longer prefix, by the setting (superuser-only: guard.sql) or by the
-- argument, which wins.
SELECT pg_temp.setting('ratelimit.ipv6_prefix', '64');
SELECT is(pg_temp.admitted('ga_v6_set', pg_temp.rotating('2001:db8:1200:5:', 40)), 20,
          'ratelimit.ipv6_prefix = 64: 40 addresses of one /64, 20 admitted');
SELECT is(pg_temp.admitted('ga_v6_set', pg_temp.rotating('2001:db8:1200:6:', 5)), 5,
          '... and another /64 of the same /56 is another client');
SELECT is(pg_temp.keys_of('ga_v6_set'), ARRAY['ip:2001:db8:1200:5::/64', 'ip:2001:db8:1200:6::/64'],
          '... keyed ip:<network>/64');
SELECT is(pg_temp.admitted('ga_v6_arg', ARRAY(SELECT jsonb_build_object('x-forwarded-for',
                                                                         format('2001:db8:1200:%s::%s', to_hex(i * 256), i))
                                              FROM generate_series(1, 40) i),
                           ipv6_prefix => 48), 20,
          'the argument ipv6_prefix => 48 wins over the setting: 40 /56s of one /48, 20 admitted');
SELECT is(pg_temp.keys_of('ga_v6_arg'), ARRAY['ip:2001:db8:1200::/48'], '... under ip:2001:db8:1200::/48');
SELECT pg_temp.setting('ratelimit.ipv6_prefix', '56');
SELECT is(pg_temp.taken('ga_addr', '{"x-forwarded-for":"2001:db8::abcd"}', 'ip:2001:db8::abcd/128',
                        ipv6_prefix => 128), 1::bigint,
          'ipv6_prefix 128: the address, with its /128');
SELECT is(pg_temp.taken('ga_addr', '{"x-forwarded-for":"2001:db8:ffff:ffff::1"}', 'ip:2001:db8:8000::/33',
                        ipv6_prefix => 33), 1::bigint,
          'ipv6_prefix 33: the prefix bits only, inside a group');
SELECT is(pg_temp.taken('ga_addr', '{"x-forwarded-for":"198.51.100.90"}', 'ip:198.51.100.90',
                        ipv6_prefix => 32), 1::bigint, 'an IPv4 client whatever the IPv6 prefix');
SELECT is((pg_temp.error_of($$SELECT rl_http_guard('ga_addr', NULL, NULL, NULL, 31)$$)).state, '22023',
          'ipv6_prefix 31 is refused (22023)');
SELECT is((pg_temp.error_of($$SELECT rl_http_guard('ga_addr', NULL, NULL, NULL, 129)$$)).message,
          'ipv6_prefix must be between 32 and 128', '... and so is 129');
SELECT is((pg_temp.error_of($$SET LOCAL ratelimit.ipv6_prefix = 24$$)).state, '22023',
          'ratelimit.ipv6_prefix = 24 is refused');
SELECT is(rl_client_address('2001:db8:1200:5::7', NULL), '2001:db8:1200:5::7'::inet,
          'rl_client_address still gives the whole address');

-------------------------------------------------------------------------
-- 4. No usable address: refused with PostgREST's 400 (PGRST, the status
-- in its detail), the reason in the body's details, counted in
-- rl_counters.unkeyed, and nothing charged, so that no such request
-- shares a bucket with another: a client sending garbage hurts only
-- itself.  Before 0.5.0 each of these was counted under 'ip:unknown'.
-------------------------------------------------------------------------
CREATE TEMP TABLE bad_requests (n int, what text, headers text, details text);
INSERT INTO bad_requests VALUES
    (1, 'no request.headers', NULL, 'request.headers is not set, or not a JSON object.'),
    (2, 'request.headers no JSON', '{x-forwarded-for: 192.0.2.9', 'request.headers is not set, or not a JSON object.'),
    (3, 'request.headers an array', '["x-forwarded-for", "192.0.2.9"]', 'request.headers is not set, or not a JSON object.'),
    (4, 'request.headers a number', '42', 'request.headers is not set, or not a JSON object.'),
    (5, 'request.headers null', 'null', 'request.headers is not set, or not a JSON object.'),
    (6, 'request.headers a string', '"x-forwarded-for: 192.0.2.9"', 'request.headers is not set, or not a JSON object.'),
    (7, 'no X-Forwarded-For', '{"user-agent":"curl"}', 'The request has no X-Forwarded-For header.'),
    (8, 'an empty X-Forwarded-For', '{"x-forwarded-for":""}', 'The request has no X-Forwarded-For header.'),
    (9, 'only commas', '{"x-forwarded-for":" , "}', 'X-Forwarded-For holds fewer entries than the trusted proxies append (1).'),
    (10, 'a CIDR', '{"x-forwarded-for":"203.0.113.0/24"}', 'X-Forwarded-For: the entry 1 from the right, which the outermost trusted proxy wrote, is not an IP address.'),
    (11, 'a zone id', '{"x-forwarded-for":"fe80::1%eth0"}', 'X-Forwarded-For: the entry 1 from the right, which the outermost trusted proxy wrote, is not an IP address.'),
    (12, 'octal', '{"x-forwarded-for":"0300.0000.0002.0001"}', 'X-Forwarded-For: the entry 1 from the right, which the outermost trusted proxy wrote, is not an IP address.'),
    (13, 'quoted', '{"x-forwarded-for":"\"203.0.113.9\""}', 'X-Forwarded-For: the entry 1 from the right, which the outermost trusted proxy wrote, is not an IP address.'),
    (14, 'a host name', '{"x-forwarded-for":"client.example.com"}', 'X-Forwarded-For: the entry 1 from the right, which the outermost trusted proxy wrote, is not an IP address.'),
    (15, 'unknown', '{"x-forwarded-for":"198.51.100.1, unknown"}', 'X-Forwarded-For: the entry 1 from the right, which the outermost trusted proxy wrote, is not an IP address.'),
    (16, 'not a string', '{"x-forwarded-for":["203.0.113.9"]}', 'X-Forwarded-For: the entry 1 from the right, which the outermost trusted proxy wrote, is not an IP address.'),
    (17, 'a Forwarded header only', '{"forwarded":"for=203.0.113.9"}', 'The request has no X-Forwarded-For header.');
SELECT is(a.state || ' ' || a.status || ': ' || a.details, 'PGRST 400: ' || b.details,
          format('%s: refused, HTTP 400, the details say why', b.what))
FROM bad_requests b, LATERAL pg_temp.answer('ga_bad', b.headers) a
ORDER BY b.n;
SELECT is((SELECT ARRAY[state, status::text, details] FROM pg_temp.answer('ga_bad', '{"x-forwarded-for":"198.51.100.1"}', 2)),
          ARRAY['PGRST', '400', 'X-Forwarded-For holds fewer entries than the trusted proxies append (2).'],
          'fewer entries than trusted proxies (the request bypassed one): refused, HTTP 400');
SELECT is((SELECT ARRAY[state, status::text, details] FROM pg_temp.answer('ga_bad', '{"forwarded":"for=unknown"}', NULL, 'forwarded')),
          ARRAY['PGRST', '400', 'Forwarded: the entry 1 from the right, which the outermost trusted proxy wrote, is not an IP address.'],
          'an obfuscated Forwarded node (for=unknown): refused, the details name the header');
SELECT is((SELECT ARRAY[state, status::text, details] FROM pg_temp.answer('ga_bad', '{"x-forwarded-for":"10.9.9.9"}', NULL, 'forwarded')),
          ARRAY['PGRST', '400', 'The request has no Forwarded header.'],
          '... and with proxy_header forwarded, an X-Forwarded-For alone is no address');
-- Every one of them refused, again and again, and none charged: the zone
-- (2 a minute) holds no key, and its counters show them.
SELECT is((SELECT count(*) FROM bad_requests b, generate_series(1, 3) i,
                  LATERAL pg_temp.answer('ga_bad', b.headers || repeat(' ', i)) a  -- a call per (b, i)
           WHERE a.state = 'PGRST' AND a.status = 400),
          51::bigint, 'three more rounds of them: all 51 refused with 400, none with 429');
SELECT is(pg_temp.keys_of('ga_bad'), '{}'::text[], '... and no key was charged: they share no bucket');
SELECT is(pg_temp.unkeyed('ga_bad'), 71::bigint, 'rl_counters.unkeyed counts the 71 refused requests');
SELECT is((SELECT allowed + refused FROM rl_counters WHERE zone = 'ga_bad'), 0::bigint,
          '... as neither allowed nor refused by the limit');
-- A client with an address is not locked out by them.
SELECT is(pg_temp.admitted('ga_bad', ARRAY['{"x-forwarded-for":"garbage, 203.0.113.99"}'::jsonb,
                                           '{"x-forwarded-for":"203.0.113.98"}'::jsonb]), 2,
          'after them, two clients with addresses are admitted');
-- The body and the status as PostgREST sends them.
SELECT pg_temp.request(NULL, '{"user-agent":"curl"}');
SELECT * FROM pg_temp.error_of($$SELECT rl_http_guard('ga_ok')$$) \gset bad_
SELECT is(pg_temp.json_or_null(:'bad_message'),
          jsonb_build_object(
              'code', 'RL400',
              'message', 'no client address to rate-limit the request by',
              'details', 'The request has no X-Forwarded-For header.',
              'hint', 'Send the request through the API''s proxy, or sign in. (Operators: ratelimit.trusted_proxies '
                      'and ratelimit.proxy_header must describe the proxies in front of PostgREST.)'),
          'the refusal''s message is the JSON body: code RL400, message, details, hint');
SELECT is(pg_temp.json_or_null(:'bad_detail'), '{"status": 400, "status_text": "Bad Request", "headers": {}}'::jsonb,
          'its detail: status 400 Bad Request, and the headers PostgREST requires (none)');
-- ratelimit.guard_error = 'pt429' (PostgREST before 11): a bare PT400.
SELECT pg_temp.setting('ratelimit.guard_error', 'pt429');
SELECT * FROM pg_temp.error_of($$SELECT rl_http_guard('ga_pt')$$) \gset pt_
SELECT pg_temp.setting('ratelimit.guard_error', 'pgrst');
SELECT is(ARRAY[:'pt_state', :'pt_message', :'pt_detail'],
          ARRAY['PT400', 'no client address to rate-limit the request by', 'The request has no X-Forwarded-For header.'],
          'with guard_error = pt429: PT400 (a 400), the reason in the detail');
SELECT is(pg_temp.unkeyed('ga_pt'), 1::bigint, '... counted too');
-- A key or a subject needs no address.
SELECT pg_temp.request('{"sub":"u1"}', NULL);
SELECT lives_ok($$SELECT rl_http_guard('ga_ok')$$, 'a request with a JWT subject needs no address');
SELECT pg_temp.request(NULL, NULL);
SELECT lives_ok($$SELECT rl_http_guard('ga_ok', 'tenant:1')$$, '... nor one with an explicit key');
SELECT is(pg_temp.keys_of('ga_ok'), ARRAY['sub:u1', 'tenant:1'], '... counted under them');

-- No proxy trusted at all: no request can have an address, whatever it
-- sends.  The server's misconfiguration, not the client's: 55000, which
-- PostgREST answers with a 500, the fix in the hint.  Counted too.
SELECT pg_temp.request(NULL, '{"x-forwarded-for":"198.51.100.1"}');
SELECT * FROM pg_temp.error_of($$SELECT rl_http_guard('ga_noproxy', NULL, 0)$$) \gset noproxy_
SELECT is(ARRAY[:'noproxy_state', :'noproxy_message', :'noproxy_detail'],
          ARRAY['55000', 'rl_http_guard() has no client address to key a request without a JWT subject by',
                'No proxy is trusted (trusted_proxies is 0): any proxy header is the client''s own text.'],
          'trusted_proxies 0: 55000, the message and detail say why');
SELECT is(:'noproxy_hint'::text,
          'Set ratelimit.trusted_proxies (or pass trusted_proxies) to the proxies in front of PostgREST, '
          'or pass a key for requests without a subject.', '... the hint gives the fixes');
SELECT pg_temp.setting('ratelimit.trusted_proxies', '0');
SELECT is((pg_temp.error_of($$SELECT rl_http_guard('ga_noproxy')$$)).state, '55000',
          '... and so with ratelimit.trusted_proxies = 0');
SELECT pg_temp.request('{"sub":"u2"}', NULL);
SELECT lives_ok($$SELECT rl_http_guard('ga_noproxy')$$, '... where a request with a subject passes');
SELECT pg_temp.setting('ratelimit.trusted_proxies', '1');
SELECT is(ARRAY[pg_temp.unkeyed('ga_noproxy')::text, array_to_string(pg_temp.keys_of('ga_noproxy'), ',')],
          ARRAY['2', 'sub:u2'], 'the two refusals counted in unkeyed, nothing charged but the subject''s request');

SELECT * FROM finish();
ROLLBACK;
