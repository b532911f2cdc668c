-- rl_token_bucket: every bad input gets a precise SQLSTATE and changes
-- nothing.  Must pass with ratelimit.table_access set to
-- auto, direct or spi.
BEGIN;
SET LOCAL timezone = 'UTC';
SET LOCAL datestyle = 'ISO, YMD';
SET LOCAL client_min_messages = warning;

SELECT plan(91);

SET LOCAL ratelimit.now_override = '2026-01-01 00:00:00+00';

-------------------------------------------------------------------------
-- Valid edge cases, and the state the error cases must leave alone.
-------------------------------------------------------------------------
SELECT is(rl_token_bucket('err-seed-a', 1, 10, 3), 7::bigint,
          'seed: first call on err-seed-a takes 3 of 10');
SELECT is(rl_token_bucket('err-seed-a', 1, 10, 1), 6::bigint,
          'seed: second call on err-seed-a leaves 6');
SELECT is(rl_token_bucket('err-seed-b'), 119::bigint,
          'seed: defaults are rate 2, window 60 (capacity 120)');
SELECT is(rl_token_bucket(repeat('k', 1024), 1, 10), 9::bigint,
          'an id of exactly 1024 bytes is accepted');
SELECT is(rl_token_bucket(repeat(U&'\00E9', 512), 1, 10), 9::bigint,
          'an id of 512 two-byte characters (1024 bytes) is accepted');
SELECT is(rl_token_bucket('err-cap-2^53', 134217728, 67108864), 9007199254740991::bigint,
          'capacity of exactly 2^53 is accepted and counted exactly');
SELECT is(rl_token_bucket('err-cap-0.1x10', 0.1, 10, 1), 0::bigint,
          'rate 0.1 * window 10 is a capacity of 1: cost 1 fits');
SELECT is(rl_token_bucket('err-cap-half', 0.5, 1, 0), 0::bigint,
          'cost 0 fits a capacity of 0.5');
SELECT is(rl_token_bucket('err-tiny', 5e-324, 1, 0), 0::bigint,
          'the smallest positive rate is accepted with cost 0');

SELECT diag('ratelimit.table_access = ' || current_setting('ratelimit.table_access'));

CREATE TEMP TABLE rl_before ON COMMIT DROP AS
    SELECT id, tokens, updated_at FROM ratelimit.token_bucket;
-- ratelimit.token_bucket is a view of zone 0 of ratelimit.state: the whole
-- table is compared too, every column.
CREATE TEMP TABLE rl_state_before ON COMMIT DROP AS
    SELECT * FROM ratelimit.state;

-------------------------------------------------------------------------
-- NULL arguments: 22004.
-------------------------------------------------------------------------
SELECT throws_ok($$SELECT rl_token_bucket(NULL)$$,
                 '22004', 'id must not be null', 'NULL id: 22004');
SELECT throws_ok($$SELECT rl_token_bucket(NULL::text, 1, 10, 1)$$,
                 '22004', 'id must not be null', 'NULL id with every argument: 22004');
SELECT throws_ok($$SELECT rl_token_bucket('err-null', NULL)$$,
                 '22004', 'rate must not be null', 'NULL rate: 22004');
SELECT throws_ok($$SELECT rl_token_bucket('err-null', 1, NULL)$$,
                 '22004', 'window must not be null', 'NULL window: 22004');
SELECT throws_ok($$SELECT rl_token_bucket('err-null', 1, 10, NULL)$$,
                 '22004', 'cost must not be null', 'NULL cost: 22004');
SELECT throws_ok($$SELECT rl_token_bucket(id => 'err-null', cost => NULL)$$,
                 '22004', 'cost must not be null', 'NULL cost by name: 22004');
SELECT throws_ok($$SELECT rl_token_bucket('err-seed-a', 1, 10, NULL)$$,
                 '22004', 'cost must not be null', 'NULL cost on an existing key: 22004');

-------------------------------------------------------------------------
-- Keys: empty (22023), over 1024 bytes (22001).
-------------------------------------------------------------------------
SELECT throws_ok($$SELECT rl_token_bucket('')$$,
                 '22023', 'id must not be empty', 'empty id: 22023');
SELECT throws_ok($$SELECT rl_token_bucket(repeat('k', 1025), 1, 10)$$,
                 '22001', 'id is too long', 'id of 1025 bytes: 22001');
SELECT throws_ok($$SELECT rl_token_bucket(repeat(U&'\00E9', 513), 1, 10)$$,
                 '22001', 'id is too long', 'id of 513 characters but 1026 bytes: 22001 (bytes count, not characters)');
SELECT throws_ok($$SELECT rl_token_bucket(repeat('k', 1000000), 1, 10)$$,
                 '22001', 'id is too long', 'id of a million bytes: 22001');

-------------------------------------------------------------------------
-- Rate: 22023 unless finite and > 0.
-------------------------------------------------------------------------
SELECT throws_ok($$SELECT rl_token_bucket('err-rate', 0, 10)$$,
                 '22023', 'rate must be a finite number greater than zero', 'rate 0: 22023');
SELECT throws_ok($$SELECT rl_token_bucket('err-rate', -0.0, 10)$$,
                 '22023', 'rate must be a finite number greater than zero', 'rate -0: 22023');
SELECT throws_ok($$SELECT rl_token_bucket('err-rate', -1, 10)$$,
                 '22023', 'rate must be a finite number greater than zero', 'rate -1: 22023');
SELECT throws_ok($$SELECT rl_token_bucket('err-rate', -5e-324, 10)$$,
                 '22023', 'rate must be a finite number greater than zero', 'rate just below 0: 22023');
SELECT throws_ok($$SELECT rl_token_bucket('err-rate', 'NaN', 10)$$,
                 '22023', 'rate must be a finite number greater than zero', 'rate NaN: 22023');
SELECT throws_ok($$SELECT rl_token_bucket('err-rate', 'Infinity', 10)$$,
                 '22023', 'rate must be a finite number greater than zero', 'rate Infinity: 22023');
SELECT throws_ok($$SELECT rl_token_bucket('err-rate', '-Infinity', 10)$$,
                 '22023', 'rate must be a finite number greater than zero', 'rate -Infinity: 22023');
SELECT throws_ok($$SELECT rl_token_bucket('err-seed-a', 0, 10)$$,
                 '22023', 'rate must be a finite number greater than zero', 'rate 0 on an existing key: 22023');

-------------------------------------------------------------------------
-- Window: 22023 unless finite and > 0.
-------------------------------------------------------------------------
SELECT throws_ok($$SELECT rl_token_bucket('err-window', 1, 0)$$,
                 '22023', 'window must be a finite number of seconds greater than zero', 'window 0: 22023');
SELECT throws_ok($$SELECT rl_token_bucket('err-window', 1, -10)$$,
                 '22023', 'window must be a finite number of seconds greater than zero', 'window -10: 22023');
SELECT throws_ok($$SELECT rl_token_bucket('err-window', 1, 'NaN')$$,
                 '22023', 'window must be a finite number of seconds greater than zero', 'window NaN: 22023');
SELECT throws_ok($$SELECT rl_token_bucket('err-window', 1, 'Infinity')$$,
                 '22023', 'window must be a finite number of seconds greater than zero', 'window Infinity: 22023');
SELECT throws_ok($$SELECT rl_token_bucket('err-window', 1, '-Infinity')$$,
                 '22023', 'window must be a finite number of seconds greater than zero', 'window -Infinity: 22023');
SELECT throws_ok($$SELECT rl_token_bucket('err-seed-a', 1, -1)$$,
                 '22023', 'window must be a finite number of seconds greater than zero', 'window -1 on an existing key: 22023');

-------------------------------------------------------------------------
-- Capacity rate * window out of range: 22003.
-------------------------------------------------------------------------
SELECT throws_ok($$SELECT rl_token_bucket('err-cap', 1e300, 1e300)$$,
                 '22003', 'bucket capacity rate * window is out of range', 'rate 1e300 * window 1e300 (infinite): 22003');
SELECT throws_ok($$SELECT rl_token_bucket('err-cap', 1e308, 10)$$,
                 '22003', 'bucket capacity rate * window is out of range', 'rate 1e308 * window 10 (infinite): 22003');
SELECT throws_ok($$SELECT rl_token_bucket('err-cap', 134217728, 67108865)$$,
                 '22003', 'bucket capacity rate * window is out of range', 'capacity 2^53 + 2^27: 22003');
SELECT throws_ok($$SELECT rl_token_bucket('err-cap', 1e16, 1)$$,
                 '22003', 'bucket capacity rate * window is out of range', 'capacity 1e16 (> 2^53): 22003');
SELECT throws_ok($$SELECT rl_token_bucket('err-cap-2^53', 134217728, 67108865)$$,
                 '22003', 'bucket capacity rate * window is out of range', 'capacity overflow on an existing key: 22003');

-------------------------------------------------------------------------
-- Cost: negative or above capacity, 22023.
-------------------------------------------------------------------------
SELECT throws_ok($$SELECT rl_token_bucket('err-cost', 1, 10, -1)$$,
                 '22023', 'cost must not be negative', 'cost -1: 22023');
SELECT throws_ok($$SELECT rl_token_bucket('err-cost', 1, 10, -2147483648)$$,
                 '22023', 'cost must not be negative', 'cost -2^31: 22023');
SELECT throws_ok($$SELECT rl_token_bucket('err-cost', 1, 10, 11)$$,
                 '22023', 'cost exceeds the bucket capacity', 'cost 11 above capacity 10: 22023');
SELECT throws_ok($$SELECT rl_token_bucket('err-cost', 0.5, 1, 1)$$,
                 '22023', 'cost exceeds the bucket capacity', 'cost 1 above capacity 0.5: 22023');
SELECT throws_ok($$SELECT rl_token_bucket('err-cost', 1, 1e-300, 1)$$,
                 '22023', 'cost exceeds the bucket capacity', 'cost 1 above capacity 1e-300: 22023');
SELECT throws_ok($$SELECT rl_token_bucket('err-cost', 2, 60, 2147483647)$$,
                 '22023', 'cost exceeds the bucket capacity', 'cost 2^31-1 above capacity 120: 22023');
SELECT throws_ok($$SELECT rl_token_bucket('err-seed-a', 1, 10, 11)$$,
                 '22023', 'cost exceeds the bucket capacity', 'cost above capacity on an existing key: 22023');
SELECT throws_ok($$SELECT rl_token_bucket('err-seed-a', 1, 10, -1)$$,
                 '22023', 'cost must not be negative', 'negative cost on an existing key: 22023');

-------------------------------------------------------------------------
-- Nothing changed: the table, and the keys' state as the function sees it.
-------------------------------------------------------------------------
-------------------------------------------------------------------------
-- Messages never echo unbounded input: at most 128 bytes of it, cut at a
-- character boundary, then "...".
-------------------------------------------------------------------------
SELECT throws_ok(format('SELECT rl_limit(%L, %L)', repeat('z', 1000000), 'k'),
                 '42704', 'rate-limit zone "' || repeat('z', 128) || '..." does not exist',
                 'a 1 MB unknown zone name: 42704, 128 bytes of it in the message');
SELECT throws_ok(format('SELECT rl_zone_set(%L, %L, 1, %L)', 'err-zone', repeat('a', 1000000), '1 minute'),
                 '22023', 'unknown rate-limit algorithm "' || repeat('a', 128) || '..."',
                 'a 1 MB algorithm name: 22023, 128 bytes of it in the message');
SELECT throws_ok(format('SELECT rl_zone_set(%L, %L, 1, %L)', 'err-zone', repeat(U&'\00E9', 100), '1 minute'),
                 '22023', 'unknown rate-limit algorithm "' || repeat(U&'\00E9', 64) || '..."',
                 'a 200-byte algorithm name of two-byte characters is cut between characters');
SELECT throws_ok(format('SELECT rl_zone_set(%L, %L, 1, %L)', 'err-zone', repeat('a', 128), '1 minute'),
                 '22023', 'unknown rate-limit algorithm "' || repeat('a', 128) || '"',
                 'an input of exactly 128 bytes is shown whole');

-------------------------------------------------------------------------
-- rl_headers refuses results no function returns.
-------------------------------------------------------------------------
-- rl_result: allowed, capacity, remaining, retry_after, reset_after,
-- txn_id, would_allow, zone, rate, period.
SELECT throws_ok($$SELECT rl_headers((true, 10, 11, NULL, '0', NULL, true, 'z', 10, '1 s')::rl_result)$$,
                 '22023', 'rl_headers() got an impossible rate-limit result',
                 'rl_headers: remaining above the capacity: 22023');
SELECT throws_ok($$SELECT rl_headers((true, 10, -1, NULL, '0', NULL, true, 'z', 10, '1 s')::rl_result)$$,
                 '22023', NULL, 'rl_headers: negative remaining: 22023');
SELECT throws_ok($$SELECT rl_headers((true, -1, 0, NULL, '0', NULL, true, 'z', 10, '1 s')::rl_result)$$,
                 '22023', NULL, 'rl_headers: negative capacity: 22023');
SELECT throws_ok($$SELECT rl_headers((false, 10, 0, '-1 s', '1 s', NULL, false, 'z', 10, '1 s')::rl_result)$$,
                 '22023', NULL, 'rl_headers: negative retry_after: 22023');
SELECT throws_ok($$SELECT rl_headers((true, 10, 0, NULL, '-1 s', NULL, true, 'z', 10, '1 s')::rl_result)$$,
                 '22023', NULL, 'rl_headers: negative reset_after: 22023');
SELECT throws_ok($$SELECT rl_headers((true, 10, 0, NULL, '1 s', NULL, true, 'z', 0, '1 s')::rl_result)$$,
                 '22023', NULL, 'rl_headers: rate 0: 22023');
SELECT throws_ok($$SELECT rl_headers((true, 10, 0, NULL, '1 s', NULL, true, 'z', -1.5, '1 s')::rl_result)$$,
                 '22023', NULL, 'rl_headers: negative rate: 22023');
SELECT throws_ok($$SELECT rl_headers((true, 10, 0, NULL, '1 s', NULL, true, 'z', 10, '0 s')::rl_result)$$,
                 '22023', NULL, 'rl_headers: period 0: 22023');
SELECT throws_ok($$SELECT rl_headers((true, 10, 0, NULL, '1 s', NULL, true, 'z', 10, '-1 minute')::rl_result)$$,
                 '22023', NULL, 'rl_headers: negative period: 22023');
-- What PUBLIC could hand it to make it work long: a name longer than a
-- zone's (the encoding was quadratic: 64 kB took 5 s, 10 MB never ended:
-- the statement timeout makes such a version fail here at once), a rate or
-- a period no zone takes.
SET LOCAL statement_timeout = '20s';
SELECT throws_ok(format('SELECT rl_headers((true, 10, 0, NULL, %L, NULL, true, %L, 10, %L)::rl_result)',
                        '1 s', repeat('z', 129), '1 s'),
                 '22001', 'rl_headers() got a zone name of more than 128 bytes',
                 'rl_headers: a zone name of 129 bytes: 22001');
SELECT throws_ok(format('SELECT rl_headers((true, 10, 0, NULL, %L, NULL, true, %L, 10, %L)::rl_result)',
                        '1 s', repeat('z', 10000000), '1 s'),
                 '22001', NULL, 'rl_headers: a zone name of 10 MB: 22001, at once');
-- Linear in the name's length: a ratio of two lengths measured side by
-- side, never a time (the quadratic encoding took 16 times as long for 4
-- times the bytes; a linear one at most 4, and a refusal less).
CREATE FUNCTION pg_temp.headers_seconds(len int) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE
    r rl_result := (true, 10, 0, NULL, '1 s', NULL, true, repeat('z', len), 10, '1 s')::rl_result;
    started timestamptz := clock_timestamp();
BEGIN
    FOR i IN 1 .. 20 LOOP
        BEGIN
            PERFORM rl_headers(r);
        EXCEPTION WHEN string_data_right_truncation THEN
            NULL;
        END;
    END LOOP;
    RETURN extract(epoch FROM clock_timestamp() - started);
END $$;
SELECT cmp_ok((SELECT min(pg_temp.headers_seconds(65536)) / min(pg_temp.headers_seconds(16384))
               FROM generate_series(1, 3)), '<', 8::float8,
              'rl_headers: 4 times the name takes less than 8 times as long (linear, not quadratic)');
SELECT is(rl_headers((true, 10, 0, NULL, '1 s', NULL, true, repeat(U&'\00E9', 64), 10, '1 s')::rl_result)->>'RateLimit',
          '"' || repeat('%C3%A9', 64) || '";r=0;t=1',
          'rl_headers: a zone name of 128 bytes is encoded whole');
SELECT throws_ok($$SELECT rl_headers((true, 10, 0, NULL, '1 s', NULL, true, 'z', 0.0000001, '1 s')::rl_result)$$,
                 '22023', 'rl_headers() got a rate no zone has', 'rl_headers: a rate with 7 decimals: 22023');
SELECT throws_ok($$SELECT rl_headers((true, 10, 0, NULL, '1 s', NULL, true, 'z', 1e30, '1 s')::rl_result)$$,
                 '22023', 'rl_headers() got a rate no zone has', 'rl_headers: a rate above 2^53: 22023');
SELECT throws_ok($$SELECT rl_headers((true, 10, 0, NULL, '1 s', NULL, true, 'z', 10, '300 years')::rl_result)$$,
                 '22023', 'rl_headers() got a period no zone has', 'rl_headers: a period above 2^53 us: 22023');
RESET statement_timeout;
SELECT is(rl_headers((false, 10, 0, '1.2 s', '3 s', NULL, false, 'z', 10, '1 minute')::rl_result),
          '{"Retry-After": "2", "RateLimit": "\"z\";r=0;t=3", "RateLimit-Policy": "\"z\";q=10;w=60"}'::jsonb,
          'rl_headers: a possible result gives its headers');

SELECT results_eq(
    $$SELECT id, tokens, updated_at FROM ratelimit.token_bucket ORDER BY id$$,
    $$SELECT id, tokens, updated_at FROM rl_before ORDER BY id$$,
    'bad arguments leave the rows of ratelimit.token_bucket unchanged');
SELECT is((SELECT count(*) FROM ratelimit.token_bucket),
          (SELECT count(*) FROM rl_before),
          'bad arguments add or remove no row');
SELECT results_eq(
    $$SELECT * FROM ratelimit.state ORDER BY key, zone_id, part$$,
    $$SELECT * FROM rl_state_before ORDER BY key, zone_id, part$$,
    'bad arguments leave every row and column of ratelimit.state unchanged');
SELECT is_empty(
    $$SELECT id FROM ratelimit.token_bucket
      WHERE id IN ('err-null', 'err-rate', 'err-window', 'err-cap', 'err-cost', '')
         OR octet_length(id) > 1024$$,
    'no row exists for a key that only saw failing calls');
SELECT is(rl_token_bucket('err-seed-a', 1, 10, 0), 6::bigint,
          'failing calls on err-seed-a took nothing from it');
SELECT is(rl_token_bucket('err-cap-2^53', 134217728, 67108864, 0), 9007199254740991::bigint,
          'a failing call on err-cap-2^53 took nothing from it');
SELECT is(rl_token_bucket('err-cost', 1, 10, 0), 10::bigint,
          'err-cost only saw failing calls: its first call finds a full bucket');

-------------------------------------------------------------------------
-- Read-only transactions: 25006.  A transaction cannot be made read-only
-- and then writable again, but a subtransaction can be made read-only
-- (SET LOCAL transaction_read_only = on) and its abort restores the
-- setting; throws_ok runs its statement in such a subtransaction.
-------------------------------------------------------------------------
SELECT throws_ok(
    $$SELECT set_config('transaction_read_only', 'on', true);
      SELECT rl_token_bucket('err-ro', 1, 10)$$,
    '25006', 'cannot execute rl_token_bucket() in a read-only transaction',
    'a call on a new key in a read-only transaction: 25006');
SELECT throws_ok(
    $$SELECT set_config('transaction_read_only', 'on', true);
      SELECT rl_token_bucket('err-seed-a', 1, 10, 1)$$,
    '25006', 'cannot execute rl_token_bucket() in a read-only transaction',
    'a call on an existing key in a read-only transaction: 25006');
SELECT is(current_setting('transaction_read_only'), 'off',
          'the transaction is read-write again after the read-only subtransaction');
SELECT is(rl_token_bucket('err-seed-a', 1, 10, 0), 6::bigint,
          'the read-only calls took nothing from err-seed-a');

-------------------------------------------------------------------------
-- Settings: bad values for ratelimit.now_override and
-- ratelimit.table_access are refused with 22023 (the GUC check).
-------------------------------------------------------------------------
SELECT throws_ok($$SELECT set_config('ratelimit.now_override', 'garbage', true)$$,
                 '22023', 'invalid value for parameter "ratelimit.now_override": "garbage"',
                 'now_override ''garbage'': 22023');
SELECT throws_ok($$SET LOCAL ratelimit.now_override = 'garbage'$$,
                 '22023', 'invalid value for parameter "ratelimit.now_override": "garbage"',
                 'SET now_override ''garbage'': 22023');
SELECT throws_ok($$SELECT set_config('ratelimit.now_override', 'infinity', true)$$,
                 '22023', 'invalid value for parameter "ratelimit.now_override": "infinity"',
                 'now_override ''infinity'': 22023');
SELECT throws_ok($$SELECT set_config('ratelimit.now_override', '-infinity', true)$$,
                 '22023', 'invalid value for parameter "ratelimit.now_override": "-infinity"',
                 'now_override ''-infinity'': 22023');
SELECT throws_ok($$SELECT set_config('ratelimit.now_override', '2026-13-01 00:00:00+00', true)$$,
                 '22023', 'invalid value for parameter "ratelimit.now_override": "2026-13-01 00:00:00+00"',
                 'now_override with month 13: 22023');
SELECT throws_ok($$SELECT set_config('ratelimit.now_override', '294277-01-01 00:00:00+00', true)$$,
                 '22023', 'invalid value for parameter "ratelimit.now_override": "294277-01-01 00:00:00+00"',
                 'now_override beyond the timestamptz range: 22023');
-- PostgreSQL 15's date parser raises (instead of returning an error code)
-- for an unknown time zone name.  A check hook must not raise: when the
-- value comes from postgresql.conf, the postmaster runs the hook on reload
-- and an error there is FATAL to it.  So the hook must catch this and
-- refuse the value like any other.
SELECT throws_ok($$SELECT set_config('ratelimit.now_override', '2026-01-01 00:00:00 No/Such_Zone', true)$$,
                 '22023', 'invalid value for parameter "ratelimit.now_override": "2026-01-01 00:00:00 No/Such_Zone"',
                 'now_override with an unknown time zone: 22023 from the GUC check, not from the date parser');
SELECT throws_ok($$SELECT set_config('ratelimit.table_access', 'bogus', true)$$,
                 '22023', 'invalid value for parameter "ratelimit.table_access": "bogus"',
                 'table_access ''bogus'': 22023');
SELECT is(current_setting('ratelimit.now_override'), '2026-01-01 00:00:00+00',
          'refused values leave ratelimit.now_override as it was');
SELECT is(rl_token_bucket('err-seed-a', 1, 10, 0), 6::bigint,
          'decisions still use the overridden clock (no refill since the seed)');

SELECT results_eq(
    $$SELECT id, tokens, updated_at FROM ratelimit.token_bucket ORDER BY id$$,
    $$SELECT id, tokens, updated_at FROM rl_before
      UNION ALL SELECT 'err-cost', 10, '2026-01-01 00:00:00+00' ORDER BY id$$,
    'at the end, the only new row is err-cost''s (its full-bucket peek)');
SELECT results_eq(
    $$SELECT key, zone_id, part FROM ratelimit.state ORDER BY key, zone_id, part$$,
    $$SELECT key, zone_id, part FROM rl_state_before
      UNION ALL SELECT 'err-cost', 0, 0 ORDER BY key, zone_id, part$$,
    'in ratelimit.state too: err-cost''s row, in zone 0, part 0');

SELECT * FROM finish();
ROLLBACK;
