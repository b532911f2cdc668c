-- Zones in 0.5.0: changing a zone, fractional rates, the headers.
--   1. rl_zone_set changes the options a call names and keeps the others;
--      keys keep their state under a new rate, period, burst, history or
--      shadow setting (same zone_id); a burst is kept while the algorithm
--      has one.  Another algorithm, store or refill mode needs
--      reset => true (55000 otherwise, DETAIL and HINT), which, as
--      reset => true alone, starts the keys afresh under a new zone_id and
--      records the old one in ratelimit.retired_zone_id (as rl_zone_drop
--      does).
--   2. Fractional rates (at most 6 decimals) for token_bucket and gcra,
--      counted exactly as whole requests over a multiple of the period;
--      the capacity is max(1, floor(rate)) unless a burst is given.
--   3. rl_headers: the draft's RateLimit-Policy (q and w whole) and
--      RateLimit, Retry-After when refused, the zone's name escaped,
--      "default" for rl_gcra, draft-06's names with legacy => true.
--   4. A fixed window in which nothing was admitted does not anchor: the
--      next admitted call starts a new window.
-- (Errors of rl_zone_set: zones.sql and cron.sql.  rl_counters by zone
-- name across resets and drops: shmem.sql, which runs on a fresh server,
-- where the counters' slots are not used up.)  Needs ratelimit in
-- shared_preload_libraries (a shmem zone).
-- Must pass with ratelimit.table_access set to auto, direct or spi.
BEGIN;
SET LOCAL timezone = 'UTC';
SET LOCAL intervalstyle = 'postgres';
SET LOCAL client_min_messages = warning;

SELECT plan(70);

SET LOCAL ratelimit.now_override = '2026-01-01 00:00:00+00';
CREATE FUNCTION pg_temp.at(seconds numeric) RETURNS void LANGUAGE sql AS $$
    SELECT NULL::void FROM (SELECT set_config('ratelimit.now_override',
        ('2026-01-01 00:00:00+00'::timestamptz + make_interval(secs => seconds::float8))::text, true)) s
$$;
CREATE FUNCTION pg_temp.left_in(zone text, key text) RETURNS bigint LANGUAGE sql AS $$
    SELECT remaining FROM rl_peek(zone, key, 0)
$$;
-- A zone's definition as one line: algorithm, rate, period, burst, store,
-- history, refill, shadow.
CREATE FUNCTION pg_temp.def(zone text) RETURNS text LANGUAGE sql AS $$
    SELECT concat_ws(' ', z.algorithm, z.rate, z.period, coalesce(z.burst::text, '-'), z.store,
                     z.history::text, z.refill, z.shadow::text)
    FROM ratelimit.zone z WHERE z.zone = def.zone
$$;
CREATE FUNCTION pg_temp.id_of(zone text) RETURNS int LANGUAGE sql AS $$
    SELECT zone_id FROM ratelimit.zone z WHERE z.zone = id_of.zone
$$;
-- SQLSTATE, message, detail and hint of a statement ('ok' when none).
CREATE FUNCTION pg_temp.error_of(statement text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    state text;
    message text;
    detail text;
    hint text;
BEGIN
    EXECUTE statement;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, message = MESSAGE_TEXT,
                            detail = PG_EXCEPTION_DETAIL, hint = PG_EXCEPTION_HINT;
    RETURN concat_ws(' | ', state || ': ' || message, nullif(detail, ''), nullif(hint, ''));
END $$;

-------------------------------------------------------------------------
-- 1. Changing a zone.
-------------------------------------------------------------------------
SELECT rl_zone_set('c_tb', 'token_bucket', 10, '1 minute', burst => 20) \gset
SELECT pg_temp.id_of('c_tb') AS c_tb_id \gset
SELECT is((rl_limit('c_tb', 'k', 5)).remaining, 15::bigint, 'c_tb: 5 taken of 20');
SELECT lives_ok($$SELECT rl_zone_set('c_tb', rate => 20)$$, 'the rate alone');
SELECT is(pg_temp.def('c_tb'), 'token_bucket 20 00:01:00 20 table false inline false',
          '... changes the rate and keeps the rest, the burst too');
SELECT is(pg_temp.left_in('c_tb', 'k'), 15::bigint, '... the key keeps its 15');
SELECT lives_ok($$SELECT rl_zone_set('c_tb', period => '2 minutes', history => true)$$, 'the period and history');
SELECT is(pg_temp.def('c_tb'), 'token_bucket 20 00:02:00 20 table true inline false', '... both changed, the rest kept');
SELECT lives_ok($$SELECT rl_zone_set('c_tb', shadow => true)$$, 'shadow alone');
SELECT is(pg_temp.def('c_tb'), 'token_bucket 20 00:02:00 20 table true inline true', '... shadow on, the rest kept');
SELECT lives_ok($$SELECT rl_zone_set('c_tb', burst => 30, shadow => false)$$, 'the burst, shadow off');
SELECT is(pg_temp.def('c_tb'), 'token_bucket 20 00:02:00 30 table true inline false', '... burst 30, shadow off');
SELECT lives_ok($$SELECT rl_zone_set('c_tb', 'token_bucket', 20, '2 minutes')$$,
                'the same algorithm, rate and period, every option left out');
SELECT is(pg_temp.def('c_tb'), 'token_bucket 20 00:02:00 30 table true inline false', '... changes nothing');
SELECT results_eq($$SELECT zone_id, remaining FROM ratelimit.zone z, rl_peek('c_tb', 'k', 0) WHERE z.zone = 'c_tb'$$,
                  format('VALUES (%s, 15::bigint)', :c_tb_id),
                  'through all of it the zone kept its id, and the key its 15 (burst 30 now)');
SELECT is((SELECT count(*) FROM ratelimit.history WHERE zone = 'c_tb'), 0::bigint, 'no history before it was on');
SELECT is((rl_limit('c_tb', 'k')).txn_id, txid_current(), 'a call records its history now');

-- Another algorithm: refused without reset (DETAIL and HINT), nothing
-- changes; with reset the keys start afresh under a new id.
SELECT is(pg_temp.error_of($$SELECT rl_zone_set('c_tb', 'gcra')$$),
          '55000: changing the algorithm of zone "c_tb" would reset the state of its keys'
          || ' | The change: algorithm token_bucket to gcra.  Its keys'' state cannot be read the new way: every key would start afresh.'
          || ' | Pass reset => true to accept that, or define a zone of another name.',
          'another algorithm without reset: 55000, the change in the detail, the way out in the hint');
SELECT is(pg_temp.error_of($$SELECT rl_zone_set('c_tb', 'gcra', store => 'shmem')$$),
          '55000: changing the algorithm, store or refill mode of zone "c_tb" would reset the state of its keys'
          || ' | The change: algorithm token_bucket to gcra, store table to shmem.  Its keys'' state cannot be read the new way: every key would start afresh.'
          || ' | Pass reset => true to accept that, or define a zone of another name.',
          'two changes at once: the detail lists both');
SELECT results_eq($$SELECT pg_temp.def('c_tb'), zone_id, pg_temp.left_in('c_tb', 'k') FROM ratelimit.zone WHERE zone = 'c_tb'$$,
                  format($$VALUES ('token_bucket 20 00:02:00 30 table true inline false', %s, 14::bigint)$$, :c_tb_id),
                  '... the refused changes left the zone, its id and its key as they were');
SELECT lives_ok($$SELECT rl_zone_set('c_tb', 'gcra', reset => true)$$, 'gcra with reset => true');
SELECT is(pg_temp.def('c_tb'), 'gcra 20 00:02:00 30 table true inline false',
          '... the algorithm changed; rate, period, history kept; burst kept (gcra has one)');
SELECT isnt(pg_temp.id_of('c_tb'), :c_tb_id, '... under a new zone_id');
SELECT is(pg_temp.left_in('c_tb', 'k'), 30::bigint, '... the key starts afresh: full (30)');
SELECT is_empty(format('SELECT 1 FROM ratelimit.state WHERE zone_id = %s', :c_tb_id), '... no state under the old id');
SELECT results_eq(format('SELECT zone FROM ratelimit.retired_zone_id WHERE zone_id = %s', :c_tb_id),
                  $$VALUES ('c_tb'::text COLLATE "C")$$, '... the old id is retired under the zone''s name');
SELECT lives_ok($$SELECT rl_zone_set('c_tb', 'fixed_window', reset => true)$$, 'fixed_window with reset => true');
SELECT is(pg_temp.def('c_tb'), 'fixed_window 20 00:02:00 - table true inline false',
          '... the burst is dropped (a fixed window has none)');
SELECT lives_ok($$SELECT rl_zone_set('c_tb', 'token_bucket', reset => true)$$, 'back to token_bucket');
SELECT is(pg_temp.def('c_tb'), 'token_bucket 20 00:02:00 - table true inline false',
          '... no burst comes back: the capacity is the rate');
SELECT lives_ok($$SELECT rl_zone_set('c_tb', store => 'shmem', reset => true)$$, 'the shmem store with reset => true');
SELECT is(pg_temp.def('c_tb'), 'token_bucket 20 00:02:00 - shmem true inline false', '... on the shmem store');
SELECT is((rl_limit('c_tb', 'k', 5)).remaining, 15::bigint, '... its keys start afresh there (15 of 20 after 5)');
-- reset => true alone: the definition stays, the keys start afresh.
SELECT pg_temp.id_of('c_tb') AS c_tb_shm_id \gset
SELECT lives_ok($$SELECT rl_zone_set('c_tb', reset => true)$$, 'reset => true alone');
SELECT is(pg_temp.def('c_tb'), 'token_bucket 20 00:02:00 - shmem true inline false', '... the definition is kept');
SELECT isnt(pg_temp.id_of('c_tb'), :c_tb_shm_id, '... a new id');
SELECT is(pg_temp.left_in('c_tb', 'k'), 20::bigint, '... the shmem key starts afresh too');
SELECT is((SELECT count(*) FROM ratelimit.retired_zone_id WHERE zone = 'c_tb'), 5::bigint,
          'five resets: five retired ids of c_tb');
-- rl_zone_drop retires its id as well.
SELECT pg_temp.id_of('c_tb') AS c_tb_last_id \gset
SELECT lives_ok($$SELECT rl_zone_drop('c_tb')$$, 'rl_zone_drop');
SELECT results_eq(format('SELECT zone FROM ratelimit.retired_zone_id WHERE zone_id = %s', :c_tb_last_id),
                  $$VALUES ('c_tb'::text COLLATE "C")$$, '... retires the dropped zone''s id');

-------------------------------------------------------------------------
-- 2. Fractional rates.
-------------------------------------------------------------------------
SELECT rl_zone_set('fr_tb', 'token_bucket', 5.5, '1 second', burst => 11),
       rl_zone_set('fr_def', 'token_bucket', 5.5, '1 second'),
       rl_zone_set('fr_gc', 'gcra', 0.5, '1 second'),
       rl_zone_set('fr_min', 'token_bucket', 0.000001, '1 second'),
       rl_zone_set('fr_whole', 'fixed_window', 5.000, '1 second') \gset
SELECT results_eq($$SELECT zone::text, rate::text, capacity FROM rl_zones WHERE zone LIKE 'fr\_%' ORDER BY zone$$,
                  $$VALUES ('fr_def'::text COLLATE "C", '5.5', 5::bigint), ('fr_gc', '0.5', 1), ('fr_min', '0.000001', 1),
                           ('fr_tb', '5.5', 11), ('fr_whole', '5.000', 5)$$,
                  'rl_zones: the rate as given, the capacity max(1, floor(rate)) or the burst');
SELECT results_eq($$SELECT allowed, capacity, remaining, zone, rate, period FROM rl_limit('fr_tb', 'a', 11)$$,
                  $$VALUES (true, 11::bigint, 0::bigint, 'fr_tb'::text, 5.5, interval '1 second')$$,
                  '5.5 per second, burst 11: 11 at once; the result carries the rate 5.5');
SELECT results_eq($$SELECT allowed, retry_after FROM rl_limit('fr_tb', 'a')$$,
                  $$VALUES (false, interval '0.181819 seconds')$$,
                  'the 12th is refused: one request every 2/11 s (rounded up to the microsecond)');
SELECT pg_temp.at(2);
SELECT results_eq($$SELECT allowed, remaining FROM rl_limit('fr_tb', 'a', 11)$$, $$VALUES (true, 0::bigint)$$,
                  'two seconds later exactly 11 are back (11 per 2 s)');
SELECT pg_temp.at(0);
SELECT is((rl_limit('fr_tb', 'b', 11)).remaining, 0::bigint, 'key b: 11 at once');
SELECT pg_temp.at(1);
SELECT is((rl_limit('fr_tb', 'b', 5)).allowed, true, 'a second later 5.5 are back: 5 are admitted');
SELECT is((rl_limit('fr_tb', 'b', 1)).allowed, false, '... the half is not a request');
SELECT pg_temp.at(1.090909);
SELECT is((rl_limit('fr_tb', 'b', 1)).allowed, false, '... 1/11 s later, a microsecond short of the 6th: refused');
SELECT pg_temp.at(1.090910);
SELECT is((rl_limit('fr_tb', 'b', 1)).allowed, true, '... at 1/11 s (rounded up): admitted');
SELECT pg_temp.at(0);
SELECT results_eq($$SELECT capacity, remaining FROM rl_limit('fr_def', 'a', 5)$$, $$VALUES (5::bigint, 0::bigint)$$,
                  'without a burst the capacity of 5.5 per second is 5');
SELECT throws_ok($$SELECT rl_limit('fr_def', 'a', 6)$$, '22023', 'cost exceeds the capacity of zone "fr_def"',
                 '... and a cost of 6 can never be admitted: 22023');
SELECT results_eq($$SELECT allowed, capacity FROM rl_limit('fr_gc', 'a')$$, $$VALUES (true, 1::bigint)$$,
                  'gcra 0.5 per second: capacity 1, the first call admitted');
SELECT results_eq($$SELECT allowed, retry_after FROM rl_limit('fr_gc', 'a')$$, $$VALUES (false, interval '2 seconds')$$,
                  '... the second refused for 2 s');
SELECT results_eq($$SELECT allowed, capacity FROM rl_limit('fr_min', 'a')$$, $$VALUES (true, 1::bigint)$$,
                  'a millionth per second: capacity 1, the first call admitted');
SELECT ok((rl_limit('fr_min', 'a')).retry_after > interval '277 hours',
          '... the next one is about 11.6 days away (a million seconds)');
SELECT is((rl_limit('fr_whole', 'a', 5)).remaining, 0::bigint, 'a whole rate written with decimals (5.000) suits a fixed window');

-------------------------------------------------------------------------
-- 3. rl_headers.
-------------------------------------------------------------------------
-- rl_result: allowed, capacity, remaining, retry_after, reset_after,
-- txn_id, would_allow, zone, rate, period.
CREATE FUNCTION pg_temp.policy(rate numeric, period interval) RETURNS text LANGUAGE sql AS $$
    SELECT rl_headers(ROW(true, 1, 1, NULL, '0', NULL, true, 'z', rate, period)::rl_result) ->> 'RateLimit-Policy'
$$;
SELECT is(pg_temp.policy(10, '1 minute'), '"z";q=10;w=60', '10 per minute: q=10;w=60');
SELECT is(pg_temp.policy(5.5, '1 second'), '"z";q=11;w=2', '5.5 per second: q=11;w=2');
SELECT is(pg_temp.policy(10, '500 milliseconds'), '"z";q=20;w=1', '10 per 500 ms: q=20;w=1');
SELECT is(pg_temp.policy(2.5, '1.5 seconds'), '"z";q=5;w=3', '2.5 per 1.5 s: q=5;w=3');
SELECT is(pg_temp.policy(0.25, '1 second'), '"z";q=1;w=4', '0.25 per second: q=1;w=4');
SELECT is(pg_temp.policy(1, '1 mon'), '"z";q=1;w=2592000', 'one a month (30 days): w=2592000');
SELECT is(rl_headers(r), jsonb_build_object('RateLimit-Policy', '"fr_tb";q=11;w=2', 'RateLimit', '"fr_tb";r=0;t=2'),
          'a zone''s own result: its name, quota and window')
FROM rl_peek('fr_tb', 'a', 0) r;
SELECT is(rl_headers(ROW(false, 10, 0, '1.2 s', '30.000001 s', NULL, false, 'z', 10, '1 minute')::rl_result)
              - 'RateLimit-Policy',
          '{"RateLimit": "\"z\";r=0;t=31", "Retry-After": "2"}'::jsonb,
          'refused: Retry-After, seconds rounded up (1.2 s: 2; 30.000001 s: 31)');
SELECT is(rl_headers(ROW(false, 10, 0, '1 s', '1 s', NULL, false, 'z', 10, '1 minute')::rl_result, legacy => true)
              - 'RateLimit-Policy' - 'RateLimit',
          '{"Retry-After": "1", "RateLimit-Limit": "10", "RateLimit-Remaining": "0", "RateLimit-Reset": "1"}'::jsonb,
          'legacy => true adds draft-06''s RateLimit-Limit, -Remaining and -Reset');
SELECT is(rl_headers(ROW(true, 10, 3, NULL, '1 s', NULL, true, E'a"b\\c d', 10, '1 minute')::rl_result) ->> 'RateLimit',
          '"a\"b\\c d";r=3;t=1', 'a zone name''s " and \ are escaped with \, a space kept');
SELECT is(rl_headers(ROW(true, 10, 3, NULL, '1 s', NULL, true, U&'caf\00E9 100%' || E'\t', 10, '1 minute')::rl_result) ->> 'RateLimit',
          '"caf%C3%A9 100%25%09";r=3;t=1', '... other bytes and % are percent-encoded (uppercase)');
SELECT is(rl_headers(r) ->> 'RateLimit-Policy', '"default";q=30;w=60', 'rl_gcra''s result: "default", its count per its period')
FROM rl_gcra('hdr-gcra', 15, 30, 60) r;

-------------------------------------------------------------------------
-- 4. A fixed window where nothing was admitted does not anchor.
-------------------------------------------------------------------------
SELECT rl_zone_set('fw_anchor', 'fixed_window', 2, '1 minute') \gset
SELECT results_eq($$SELECT allowed, remaining, reset_after FROM rl_limit('fw_anchor', 'e', 0)$$,
                  $$VALUES (true, 2::bigint, interval '0')$$, 'a call of cost 0 on a new key admits nothing');
SELECT pg_temp.at(50);
SELECT results_eq($$SELECT remaining, reset_after FROM rl_limit('fw_anchor', 'e')$$,
                  $$VALUES (1::bigint, interval '1 minute')$$,
                  '50 s later the first admitted call starts the window: a whole minute until it resets');
SELECT pg_temp.at(0);
SELECT is((rl_limit('fw_anchor', 'x')).remaining, 1::bigint, 'key x: one at 0 s');
SELECT pg_temp.at(90);
SELECT results_eq($$SELECT remaining, reset_after FROM rl_limit('fw_anchor', 'x')$$,
                  $$VALUES (1::bigint, interval '1 minute')$$,
                  'at 90 s (its window ended at 60 s) a call starts a window of its own: 60 s, not 30');

SELECT * FROM finish();
ROLLBACK;
