-- rl_headers(result, legacy): the response header fields of
-- draft-ietf-httpapi-ratelimit-headers -09/-10 for a decision, as a JSON
-- object:
--   RateLimit-Policy: "<zone>";q=<quota>;w=<window in seconds>
--   RateLimit: "<zone>";r=<remaining>;t=<seconds until full, rounded up>
--   Retry-After: <seconds, rounded up>, when refused (and a time is known)
-- q and w are whole numbers: the rate over the smallest multiple of the
-- period that makes both whole (5.5 per second: q=11;w=2).  The zone name
-- is a structured-field string: printable ASCII kept, " and \ escaped
-- with a backslash, % and every other byte percent-encoded (%XX); an
-- rl_gcra result (no zone) is "default".  legacy => true adds draft-06's
-- RateLimit-Limit, -Remaining and -Reset.  A result no rate-limit
-- function returns (negative counts or times, more remaining than the
-- capacity, a rate or period not above 0) is refused (22023).  And
-- rl_http_guard, which sets them.  On a fixed test clock.
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
SET ratelimit.now_override = '2026-07-01 00:00:00+00';
-- A result built by hand: (allowed, capacity, remaining, retry_after,
-- reset_after, zone, rate, period).
CREATE FUNCTION pg_temp.r(allowed boolean, capacity bigint, remaining bigint, retry_after interval,
                          reset_after interval, zone text, rate numeric, period interval)
RETURNS rl_result LANGUAGE sql AS $$
    SELECT ROW($1, $2, $3, $4, $5, NULL, $1, $6, $7, $8)::rl_result
$$;

-------------------------------------------------------------------------
-- 1. A zone's decisions: token_bucket 10 per minute, burst 20.
-------------------------------------------------------------------------
SELECT rl_zone_set('hd_tb', 'token_bucket', 10, '1 minute', burst => 20);
-- Allowed: q=10;w=60, 19 left, full in 6 s; no Retry-After.
SELECT rl_headers(r) FROM rl_limit('hd_tb', 'k') r;
-- 19 more: 0 left, full in 120 s.
SELECT rl_headers(r) FROM rl_limit('hd_tb', 'k', 19) r;
-- Refused: Retry-After 6 (a token), the same RateLimit.
SELECT r.allowed, rl_headers(r) FROM rl_limit('hd_tb', 'k') r;
-- 0.5 s later: retry 5.5 s and reset 119.5 s, rounded up: 6 and 120.
SET ratelimit.now_override = '2026-07-01 00:00:00.5+00';
SELECT r.retry_after, r.reset_after, rl_headers(r) FROM rl_limit('hd_tb', 'k') r;
-- legacy => true adds the draft-06 fields: RateLimit-Limit (the
-- capacity), RateLimit-Remaining and RateLimit-Reset.
SELECT rl_headers(r, legacy => true) FROM rl_limit('hd_tb', 'k') r;
SELECT rl_headers(r, true) FROM rl_limit('hd_tb', 'k2') r;
-- legacy NULL is false.
SELECT rl_headers(r, NULL) FROM rl_limit('hd_tb', 'k2') r;
-- rl_peek's result has the same fields; an rl_gcra result has no zone:
-- "default", and its own count per period (30 per 60 s).
SELECT rl_headers(r) FROM rl_peek('hd_tb', 'k2', 0) r;
SELECT rl_headers(r) FROM rl_gcra('hd:gcra', 15, 30, 60) r;
SELECT rl_headers(r) FROM rl_gcra('hd:gcra2', 0, 1, 0.5) r;

-------------------------------------------------------------------------
-- 2. RateLimit-Policy's q and w: whole numbers, the rate over the
-- smallest multiple of the period in whole seconds that makes it whole.
-------------------------------------------------------------------------
SELECT rl_zone_set('hd_frac', 'token_bucket', 5.5, '1 second');
SELECT rl_zone_set('hd_sub', 'gcra', 10, '500 milliseconds');
SELECT rl_headers(r) FROM rl_limit('hd_frac', 'k') r;  -- q=11;w=2
SELECT rl_headers(r) FROM rl_limit('hd_sub', 'k') r;   -- q=20;w=1
SELECT v.rate, v.period, rl_headers(pg_temp.r(true, 1, 1, NULL, '0 s', 'p', v.rate, v.period)) ->> 'RateLimit-Policy' AS policy
FROM (VALUES (10::numeric, interval '1 minute'),
             (5.5, '1 second'),
             (10, '500 milliseconds'),
             (7, '300 milliseconds'),
             (1.5, '1 minute'),
             (0.333333, '1 second'),
             (0.5, '1 hour'),
             (3, '1 day'),
             (1, '1 mon'),
             (2, '1 mon 1 day'),
             (1, '0.000001 s'),
             (1000000, '1 second'),
             (2.25, '1.5 seconds')) v(rate, period);

-------------------------------------------------------------------------
-- 3. Zone names as structured-field strings: " and \ get a backslash,
-- printable ASCII stays (spaces too), % and the bytes beyond ASCII or
-- below space are percent-encoded, in upper case.
-------------------------------------------------------------------------
SELECT rl_zone_set('hd "quoted" \ 50%', 'fixed_window', 3, '1 minute');
SELECT rl_headers(r) FROM rl_limit('hd "quoted" \ 50%', 'k') r;
SELECT z, rl_headers(pg_temp.r(true, 1, 1, NULL, '0 s', z, 1, '1 s')) ->> 'RateLimit' AS ratelimit
FROM (VALUES ('plain'), ('a"b'), ('a\b'), ('\"'), ('100%'), ('%41'), ('zoné'), ('日本'),
             ('tab' || chr(9) || 'bed'), ('new' || chr(10) || 'line'), ('del' || chr(127)),
             ('~!#$&''()*+,-./:;<=>?@[]^_`{|}'), ('emoji 😀')) v(z);
-- The longest zone name (128 bytes) whole.
SELECT length(rl_headers(pg_temp.r(true, 1, 1, NULL, '0 s', repeat('z', 128), 1, '1 s')) ->> 'RateLimit') AS length;

-------------------------------------------------------------------------
-- 4. No time known: a cron zone without a refill job refuses with
-- retry_after and reset_after NULL: no Retry-After (a wait nobody keeps
-- is no promise), and RateLimit without its t, which is optional (r is
-- the draft's one required parameter: the client still learns that
-- nothing is left).  (regress.cron_zone: see sql/setup.sql.)
-------------------------------------------------------------------------
SELECT regress.cron_zone('hd_cron', 10, '1 minute', burst => 2);
SELECT r.allowed, r.remaining, r.reset_after, rl_headers(r) FROM rl_limit('hd_cron', 'k') r;
SELECT r.allowed, r.remaining, r.reset_after, rl_headers(r) FROM rl_limit('hd_cron', 'k') r;
SELECT r.allowed, r.retry_after, r.reset_after, rl_headers(r) FROM rl_limit('hd_cron', 'k') r;
SELECT rl_headers(r, legacy => true) FROM rl_limit('hd_cron', 'k') r;
-- A full key's reset is known (0).
SELECT rl_headers(r) FROM rl_peek('hd_cron', 'new', 0) r;
-- With a job (a 6-second tick: a token per tick), times are whole ticks:
-- retry 6, full in 12.
UPDATE ratelimit.zone SET refill_tick = '6 seconds' WHERE zone = 'hd_cron';
SELECT rl_headers(r) FROM rl_limit('hd_cron', 'k') r;

-------------------------------------------------------------------------
-- 5. Impossible results are refused (22023), with every value in the
-- detail.
-------------------------------------------------------------------------
SELECT * FROM regress.error($$SELECT rl_headers(ROW(true, 5, 6, NULL, '1 s', NULL, true, 'z', 5, '1 s')::rl_result)$$);
SELECT c, regress.try(format('SELECT rl_headers(%L::rl_result)', r::text)) AS result
FROM (VALUES ('negative capacity', pg_temp.r(true, -1, 0, NULL, '1 s', 'z', 5, '1 s')),
             ('negative remaining', pg_temp.r(true, 5, -1, NULL, '1 s', 'z', 5, '1 s')),
             ('remaining above capacity', pg_temp.r(true, 5, 6, NULL, '1 s', 'z', 5, '1 s')),
             ('negative reset_after', pg_temp.r(true, 5, 4, NULL, '-1 s', 'z', 5, '1 s')),
             ('negative retry_after', pg_temp.r(false, 5, 0, '-1 s', '1 s', 'z', 5, '1 s')),
             ('rate 0', pg_temp.r(true, 5, 4, NULL, '1 s', 'z', 0, '1 s')),
             ('negative rate', pg_temp.r(true, 5, 4, NULL, '1 s', 'z', -5, '1 s')),
             ('period 0', pg_temp.r(true, 5, 4, NULL, '1 s', 'z', 5, '0 s')),
             ('negative period', pg_temp.r(true, 5, 4, NULL, '1 s', 'z', 5, '-1 s')),
             ('a month less 30 days', pg_temp.r(true, 5, 4, NULL, '1 s', 'z', 5, '1 mon -30 days')),
             ('the largest counts', pg_temp.r(false, 9223372036854775807, 9223372036854775807, '0 s', '0 s', 'z', 5, '1 s')))
     AS v(c, r);

-------------------------------------------------------------------------
-- 6. rl_http_guard (PostgREST's db-pre-request) sets the same fields in
-- response.headers, replacing those of an earlier decision and keeping
-- the others; a refusal is PostgREST's error with the 429's headers, and
-- its details say when to retry.  A request without a key or an address
-- is PostgREST's error with a 400.  The guard takes a shmem zone only
-- (its charge must outlive the request's rollback).
-------------------------------------------------------------------------
SELECT rl_zone_set('hd_guard', 'fixed_window', 1, '1 minute', store => 'shmem');
BEGIN;
SELECT set_config('response.headers',
                  '[{"X-Request-Id": "abc"}, {"RateLimit-Limit": "9"}, {"RateLimit": "\"old\";r=9;t=9"}, {"Retry-After": "9"}]',
                  true) IS NOT NULL AS earlier_headers;
SELECT rl_http_guard('hd_guard', 'g');
SELECT current_setting('response.headers')::jsonb AS response_headers;
COMMIT;
-- The second call is refused: the error's detail carries the status and
-- the headers (Retry-After 60), its message the details.
CREATE FUNCTION pg_temp.guard(zone text, key text) RETURNS TABLE (part text, value jsonb)
LANGUAGE plpgsql AS $$
DECLARE
    message text;
    detail text;
BEGIN
    PERFORM rl_http_guard(zone, key);
    RETURN QUERY SELECT 'admitted', NULL::jsonb;
EXCEPTION WHEN SQLSTATE 'PGRST' THEN
    GET STACKED DIAGNOSTICS message = MESSAGE_TEXT, detail = PG_EXCEPTION_DETAIL;
    RETURN QUERY VALUES ('message', message::jsonb), ('detail', detail::jsonb);
END $$;
SELECT * FROM pg_temp.guard('hd_guard', 'g');
-- No key, no subject, no X-Forwarded-For: a 400, the reason in details.
SELECT set_config('request.headers', '{"user-agent": "curl"}', false) IS NOT NULL AS no_address;
SELECT * FROM pg_temp.guard('hd_guard', NULL);
-- The same with ratelimit.guard_error = 'pt429' (older PostgREST): a bare
-- PT429 whose detail says when to retry, and a bare PT400.
SET ratelimit.guard_error = 'pt429';
SELECT * FROM regress.error($$SELECT rl_http_guard('hd_guard', 'g')$$);
SELECT * FROM regress.error($$SELECT rl_http_guard('hd_guard')$$);
RESET ratelimit.guard_error;
RESET request.headers;
-- A cron zone is a table zone: refused, with the fix in the hint.
SELECT * FROM regress.error($$SELECT rl_http_guard('hd_cron', 'k')$$);

-------------------------------------------------------------------------
-- Clean up: the tests after this one list every zone.
-------------------------------------------------------------------------
SELECT count(rl_zone_drop(zone)) AS dropped FROM ratelimit.zone WHERE zone LIKE 'hd\_%' OR zone LIKE 'hd %';
