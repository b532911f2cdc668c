-- rl_token_bucket behaviour under a fixed test clock.
-- Must pass with ratelimit.table_access set to auto, direct or spi.
--
-- The table store writes a key's row on its first call in a transaction and
-- keeps later calls in a per-transaction copy written back at commit, so
-- inside this (never committed) transaction the table can lag the calls:
-- state is checked through the function (cost 0 peeks), the table only
-- where a row must not exist.
--
-- pgTAP records its results in tables, so no assertion runs inside a
-- savepoint that is rolled back: values seen there go to psql variables
-- (\gset) and are asserted afterwards.
BEGIN;
SET LOCAL timezone = 'UTC';
SET LOCAL datestyle = 'ISO, YMD';
SET LOCAL client_min_messages = warning;

SELECT plan(154);

SET LOCAL ratelimit.now_override = '2026-01-01 00:00:00+00';

-- Moves the test clock to 2026-01-01 00:00:00+00 plus us microseconds.
CREATE FUNCTION pg_temp.clock(us bigint) RETURNS text
LANGUAGE sql VOLATILE AS $$
    SELECT set_config('ratelimit.now_override',
                      to_char(TIMESTAMP '2026-01-01 00:00:00' + us * INTERVAL '1 microsecond',
                              'YYYY-MM-DD HH24:MI:SS.US') || '+00',
                      true)
$$;

-- One call at 2026-01-01 00:00:00+00 plus us microseconds.
CREATE FUNCTION pg_temp.take_at(us bigint, id text, rate float8, win float8, cost int DEFAULT 1)
RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM pg_temp.clock(us);
    RETURN rl_token_bucket(id, rate, win, cost);
END
$$;

-- n calls of cost 1 on one key, the k-th (from 0) at start_us plus the sum
-- of the first k steps ((j * 7919) % modulo) * unit_us: returns how many
-- were admitted and the seconds from the first call to the last.
CREATE FUNCTION pg_temp.run(id text, rate float8, win float8, n int,
                            start_us bigint, modulo int, unit_us bigint,
                            OUT admitted bigint, OUT elapsed float8)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    t bigint := start_us;
BEGIN
    admitted := 0;
    FOR k IN 0 .. n - 1 LOOP
        IF k > 0 THEN
            t := t + ((k * 7919) % modulo) * unit_us;
        END IF;
        IF pg_temp.take_at(t, id, rate, win) >= 0 THEN
            admitted := admitted + 1;
        END IF;
    END LOOP;
    elapsed := (t - start_us) / 1e6;
END
$$;

-------------------------------------------------------------------------
-- The documented example: rate 1, window 10.
-------------------------------------------------------------------------
SELECT is((SELECT array_agg(rl_token_bucket('bh-spec', 1, 10)) FROM generate_series(1, 12)),
          ARRAY[9, 8, 7, 6, 5, 4, 3, 2, 1, 0, -1, -1]::bigint[],
          'twelve calls at one instant return 9 .. 0, -1, -1');
SET LOCAL ratelimit.now_override = '2026-01-01 00:00:04+00';
SELECT is(rl_token_bucket('bh-spec', 1, 10), 3::bigint,
          '4 seconds later the next call returns 3');
SELECT is(rl_token_bucket('bh-spec', 1, 10), 2::bigint, 'and the one after returns 2');
SELECT diag('ratelimit.table_access = ' || current_setting('ratelimit.table_access'));
SET LOCAL ratelimit.now_override = '2026-01-01 00:00:00+00';

-------------------------------------------------------------------------
-- The first call finds a full bucket.
-------------------------------------------------------------------------
SELECT is(rl_token_bucket('bh-first-default'), 119::bigint,
          'first call with the defaults (rate 2, window 60): 120 - 1');
SELECT is(rl_token_bucket('bh-first-all', 1, 10, 10), 0::bigint,
          'a first call may take the whole capacity');
SELECT is(rl_token_bucket('bh-first-all', 1, 10, 1), -1::bigint,
          'after which the bucket is empty');
SELECT is(rl_token_bucket('bh-first-frac', 0.5, 7, 0), 3::bigint,
          'a first peek at capacity 3.5 reports 3 whole tokens');
SELECT is(rl_token_bucket('bh-first-frac', 0.5, 7, 3), 0::bigint,
          'taking 3 of 3.5 leaves 0 whole tokens');
SELECT is(pg_temp.take_at(3600000000, 'bh-first-late', 1, 10), 9::bigint,
          'a key first seen an hour later also starts full');
SELECT is(pg_temp.take_at(-3600000000, 'bh-first-early', 1, 10), 9::bigint,
          'a key first seen at an earlier clock also starts full');
SET LOCAL ratelimit.now_override = '2026-01-01 00:00:00+00';
SELECT is(rl_token_bucket('bh-big', 134217728, 67108864, 2147483647),
          (9007199254740992 - 2147483647)::bigint,
          'capacity 2^53: remaining is exact after a cost of 2^31 - 1');
SELECT is(rl_token_bucket('bh-big', 134217728, 67108864, 1),
          (9007199254740992 - 2147483647 - 1)::bigint,
          'capacity 2^53: and after one more token');

-------------------------------------------------------------------------
-- Refused calls take nothing.
-------------------------------------------------------------------------
SELECT is(rl_token_bucket('bh-refuse', 1, 10, 6), 4::bigint, 'take 6 of 10');
SELECT is(rl_token_bucket('bh-refuse', 1, 10, 5), -1::bigint, 'cost 5 with 4 left is refused');
SELECT is(rl_token_bucket('bh-refuse', 1, 10, 5), -1::bigint, 'and refused again');
SELECT is(rl_token_bucket('bh-refuse', 1, 10, 4), 0::bigint, 'the refusals took nothing: 4 can be taken');

-------------------------------------------------------------------------
-- Fractions of tokens are kept.
-------------------------------------------------------------------------
SELECT is((SELECT array_agg(rl_token_bucket('bh-frac', 1, 10)) FROM generate_series(1, 11)),
          ARRAY[9, 8, 7, 6, 5, 4, 3, 2, 1, 0, -1]::bigint[],
          'fractions: empty the bucket');
SELECT is((SELECT array_agg(pg_temp.take_at(t, 'bh-frac', 1, 10) ORDER BY t)
           FROM generate_series(100000, 900000, 100000) t),
          array_fill(-1::bigint, ARRAY[9]),
          'fractions: nine calls at +0.1 s .. +0.9 s are refused');
SELECT is(pg_temp.take_at(1050000, 'bh-frac', 1, 10), 0::bigint,
          'fractions: a call at +1.05 s is admitted');
SELECT is(pg_temp.take_at(1100000, 'bh-frac', 1, 10), -1::bigint,
          'fractions: at +1.1 s only 0.1 token is there');
SELECT is(pg_temp.take_at(1999999, 'bh-frac', 1, 10), -1::bigint,
          'fractions: at +1.999999 s 0.999999 token is not enough');
SELECT is(pg_temp.take_at(2000000, 'bh-frac', 1, 10), 0::bigint,
          'fractions: at +2 s the 0.05 left at +1.05 s plus 0.95 make a token');
SELECT is(pg_temp.take_at(2000000, 'bh-frac', 1, 10, 0), 0::bigint,
          'fractions: and the bucket is empty again');

SELECT is(pg_temp.take_at(0, 'bh-third', 1.0 / 3, 3), 0::bigint,
          'rate 1/3, window 3: capacity 1, take it');
SELECT is(pg_temp.take_at(2999999, 'bh-third', 1.0 / 3, 3), -1::bigint,
          'rate 1/3: one microsecond short of 3 s there is no token');
SELECT is(pg_temp.take_at(3000000, 'bh-third', 1.0 / 3, 3), 0::bigint,
          'rate 1/3: after 3 s there is one (no rounding loss)');

SELECT is(pg_temp.take_at(0, 'bh-slow', 0.001, 1000, 1), 0::bigint,
          'rate 1/1000 per second: take the only token');
SELECT is((SELECT array_agg(pg_temp.take_at(t, 'bh-slow', 0.001, 1000) ORDER BY t)
           FROM generate_series(1000000, 999000000, 1000000) t) = array_fill(-1::bigint, ARRAY[999]),
          true,
          'rate 1/1000: 999 refused calls, one per second');
SELECT is(pg_temp.take_at(1000000000, 'bh-slow', 0.001, 1000), 0::bigint,
          'rate 1/1000: admitted after 1000 s, the refusals did not disturb the refill');

-- Accuracy over long runs: admitted <= capacity + rate * elapsed,
-- never more than one token below it.
SELECT admitted AS acc1_admitted, elapsed AS acc1_elapsed
FROM pg_temp.run('bh-acc-1', 0.7, 5, 2000, 0, 97, 1000) \gset
SELECT ok(:acc1_admitted <= 0.7 * 5 + 0.7 * :acc1_elapsed + 1e-6,
          format('accuracy, rate 0.7: %s admitted over %s s, at most capacity + rate * elapsed',
                 :acc1_admitted, :acc1_elapsed));
SELECT ok(:acc1_admitted > 0.7 * 5 + 0.7 * :acc1_elapsed - 1,
          'accuracy, rate 0.7: less than one token below the bound');

SELECT admitted AS acc2_admitted, elapsed AS acc2_elapsed
FROM pg_temp.run('bh-acc-2', 1000, 0.05, 3000, 7200000000, 11, 61) \gset
SELECT ok(:acc2_admitted <= 1000 * 0.05 + 1000 * :acc2_elapsed + 1e-6,
          format('accuracy, rate 1000: %s admitted over %s s, at most capacity + rate * elapsed',
                 :acc2_admitted, :acc2_elapsed));
SELECT ok(:acc2_admitted > 1000 * 0.05 + 1000 * :acc2_elapsed - 1,
          'accuracy, rate 1000: less than one token below the bound');

SELECT admitted AS acc3_admitted, elapsed AS acc3_elapsed
FROM pg_temp.run('bh-acc-3', 0.3, 10, 1000, 14400000000, 13, 250000) \gset
SELECT ok(:acc3_admitted <= 0.3 * 10 + 0.3 * :acc3_elapsed + 1e-6,
          format('accuracy, rate 0.3: %s admitted over %s s, at most capacity + rate * elapsed',
                 :acc3_admitted, :acc3_elapsed));
SELECT ok(:acc3_admitted > 0.3 * 10 + 0.3 * :acc3_elapsed - 1,
          'accuracy, rate 0.3: less than one token below the bound');
SET LOCAL ratelimit.now_override = '2026-01-01 00:00:00+00';

-------------------------------------------------------------------------
-- Cost 0 peeks.
-------------------------------------------------------------------------
SELECT is(rl_token_bucket('bh-peek-new', 1, 10, 0), 10::bigint,
          'peek at a new key: a full bucket');
SELECT is(rl_token_bucket('bh-peek-new', 1, 10, 1), 9::bigint,
          'the peek took nothing from the new key');
SELECT is((SELECT array_agg(rl_token_bucket('bh-peek', 1, 10)) FROM generate_series(1, 3)),
          ARRAY[9, 8, 7]::bigint[], 'take 3');
SELECT is(rl_token_bucket('bh-peek', 1, 10, 0), 7::bigint, 'peek: 7');
SELECT is(rl_token_bucket('bh-peek', 1, 10, 0), 7::bigint, 'peek again: still 7');
SELECT is(rl_token_bucket('bh-peek', 1, 10, 1), 6::bigint, 'a real call: 6');
SELECT is((SELECT array_agg(rl_token_bucket('bh-peek', 1, 10)) FROM generate_series(1, 7)),
          ARRAY[5, 4, 3, 2, 1, 0, -1]::bigint[], 'empty it');
SELECT is(rl_token_bucket('bh-peek', 1, 10, 0), 0::bigint,
          'a peek at an empty bucket is admitted and reports 0, not -1');
SELECT is((SELECT array_agg(pg_temp.take_at(t, 'bh-peek', 1, 10, 0) ORDER BY t)
           FROM generate_series(250000, 750000, 250000) t),
          ARRAY[0, 0, 0]::bigint[], 'peeks while refilling report 0 whole tokens');
SELECT is(pg_temp.take_at(1000000, 'bh-peek', 1, 10), 0::bigint,
          'the peeks did not disturb the refill: a token after 1 s');
SET LOCAL ratelimit.now_override = '2026-01-01 00:00:00+00';

-------------------------------------------------------------------------
-- Keys are matched byte for byte.
-------------------------------------------------------------------------
SELECT is(rl_token_bucket('a', 1, 10), 9::bigint, 'key a');
SELECT is(rl_token_bucket('A', 1, 10), 9::bigint, 'key A is another bucket');
SELECT is(rl_token_bucket('a ', 1, 10), 9::bigint, 'key ''a '' (trailing space) is another bucket');
SELECT is(rl_token_bucket(' a', 1, 10), 9::bigint, 'key '' a'' (leading space) is another bucket');
SELECT is(rl_token_bucket('a  ', 1, 10), 9::bigint, 'key ''a  '' (two trailing spaces) is another bucket');
SELECT is(rl_token_bucket('a'::char(3)::text, 1, 10), 8::bigint,
          'char(3) ''a'' cast to text drops its padding: the bucket of a');
SELECT is(rl_token_bucket('a', 1, 10), 7::bigint, 'key a again: its own bucket');
SELECT is(rl_token_bucket('%', 1, 10), 9::bigint, 'key % is not a pattern');
SELECT is(rl_token_bucket('_', 1, 10), 9::bigint, 'key _ is not a pattern');
SELECT is(rl_token_bucket($$it's$$, 1, 10), 9::bigint, 'key with a quote');
SELECT is(rl_token_bucket('it''s', 1, 10), 8::bigint, 'the same key written another way');
SELECT is(rl_token_bucket('its', 1, 10), 9::bigint, 'without the quote: another bucket');
SELECT is(rl_token_bucket(E'back\\slash', 1, 10), 9::bigint, 'key with a backslash');
SELECT is(rl_token_bucket('back\slash', 1, 10), 8::bigint, 'the same key as a standard string');
SELECT is(rl_token_bucket('back\\slash', 1, 10), 9::bigint, 'two backslashes: another bucket');
SELECT is(rl_token_bucket(E'tab\there', 1, 10), 9::bigint, 'key with a tab');
SELECT is(rl_token_bucket('tab here', 1, 10), 9::bigint, 'a space instead of the tab: another bucket');
SELECT is(rl_token_bucket(U&'caf\00E9', 1, 10), 9::bigint, 'key café, precomposed');
SELECT is(rl_token_bucket(U&'cafe\0301', 1, 10), 9::bigint, 'café decomposed is another bucket');
SELECT is(rl_token_bucket('café', 1, 10), 8::bigint, 'café typed in: the precomposed bucket');
SELECT is(rl_token_bucket(U&'\+01F600', 1, 10), 9::bigint, 'key of one 4-byte character');
SELECT is(rl_token_bucket('straße', 1, 10), 9::bigint, 'key straße');
SELECT is(rl_token_bucket('STRASSE', 1, 10), 9::bigint, 'STRASSE is another bucket');

-- Keys read from tables (short varlena headers, compressed, out of line)
-- find the same bucket as literals.
-- A row over TOAST_TUPLE_THRESHOLD (the pad cannot be toasted) has its
-- key moved out of line (STORAGE EXTERNAL) or compressed (EXTENDED).
CREATE TEMP TABLE bh_keys (k text, pad text);
ALTER TABLE bh_keys ALTER COLUMN k SET STORAGE EXTERNAL, ALTER COLUMN pad SET STORAGE PLAIN;
CREATE TEMP TABLE bh_keys_compressed (k text, pad text);
ALTER TABLE bh_keys_compressed ALTER COLUMN pad SET STORAGE PLAIN;
INSERT INTO bh_keys
SELECT k, (SELECT string_agg(md5(i::text), '') FROM generate_series(1, 50) i)
FROM (VALUES ('bh-short'), (repeat('x', 1000))) v(k);
INSERT INTO bh_keys_compressed
SELECT repeat('y', 1024), (SELECT string_agg(md5(i::text), '') FROM generate_series(1, 50) i);
SELECT ok((SELECT pg_column_size(k) < 200 FROM bh_keys_compressed),
          'setup: the 1024-byte key is stored compressed');
SELECT is(rl_token_bucket('bh-short', 1, 10), 9::bigint, 'literal key bh-short');
SELECT is((SELECT rl_token_bucket(k, 1, 10) FROM bh_keys WHERE k = 'bh-short'), 8::bigint,
          'the same key read from a table: the same bucket');
SELECT is((SELECT rl_token_bucket(k, 1, 10) FROM bh_keys WHERE length(k) = 1000), 9::bigint,
          'a key stored out of line');
SELECT is(rl_token_bucket(repeat('x', 1000), 1, 10), 8::bigint,
          'the same key as a literal: the same bucket');
SELECT is(rl_token_bucket(repeat('y', 1024), 1, 10), 9::bigint, 'a 1024-byte literal key');
SELECT is((SELECT rl_token_bucket(k, 1, 10) FROM bh_keys_compressed), 8::bigint,
          'the same key stored compressed: the same bucket');

-- A nondeterministic collation on the argument does not merge keys.  (From
-- 16 the catalog lists an ICU collation "unicode" even in a server built
-- without ICU: only imported ones show ICU is there.)
SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_collation WHERE collprovider = 'i' AND collname <> 'unicode') AS rl_has_icu \gset
\if :rl_has_icu
CREATE COLLATION public.rl_pgtap_ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
SELECT is(rl_token_bucket('bh-ci' COLLATE public.rl_pgtap_ci, 1, 10), 9::bigint,
          'key bh-ci under a case-insensitive collation');
SELECT is(rl_token_bucket('BH-CI' COLLATE public.rl_pgtap_ci, 1, 10), 9::bigint,
          'key BH-CI under the same collation is still another bucket');
\else
SELECT skip('no ICU collations in this server', 2);
\endif

-------------------------------------------------------------------------
-- Savepoints: a rolled-back subtransaction gives its tokens back; a
-- released one keeps its consumption.
-------------------------------------------------------------------------
-- A key first touched inside the savepoint.
SAVEPOINT sp1;
SELECT array_agg(rl_token_bucket('bh-sp-new', 1, 10, 2)) AS sp1_calls FROM generate_series(1, 3) \gset
ROLLBACK TO SAVEPOINT sp1;
RELEASE SAVEPOINT sp1;
SELECT is(:'sp1_calls'::bigint[], ARRAY[8, 6, 4]::bigint[], 'inside sp1: three calls on a new key');
SELECT is_empty($$SELECT 1 FROM ratelimit.token_bucket WHERE id = 'bh-sp-new'$$,
                'rolling back the first touch leaves no row');
SELECT is(rl_token_bucket('bh-sp-new', 1, 10, 0), 10::bigint,
          'after the rollback the key is new again: a full bucket');

-- A key touched before the savepoint and again inside it.
SELECT is(rl_token_bucket('bh-sp-old', 1, 10, 3), 7::bigint, 'bh-sp-old: take 3 before the savepoint');
SAVEPOINT sp2;
SELECT rl_token_bucket('bh-sp-old', 1, 10, 2) AS sp2_a,
       rl_token_bucket('bh-sp-old', 1, 10, 1) AS sp2_b \gset
ROLLBACK TO SAVEPOINT sp2;
RELEASE SAVEPOINT sp2;
SELECT is(ARRAY[:sp2_a, :sp2_b]::bigint[], ARRAY[5, 4]::bigint[], 'inside sp2: two calls on bh-sp-old');
SELECT is(rl_token_bucket('bh-sp-old', 1, 10, 0), 7::bigint,
          'after the rollback bh-sp-old has the 7 it had before');
SELECT is(rl_token_bucket('bh-sp-old', 1, 10, 1), 6::bigint, 'and goes on from there');

-- A key twice at top level (so its state is a per-transaction copy), then
-- many calls inside a savepoint.
SELECT is(rl_token_bucket('bh-sp-many'), 119::bigint, 'bh-sp-many: first call');
SELECT is(rl_token_bucket('bh-sp-many'), 118::bigint, 'bh-sp-many: second call');
SAVEPOINT sp3;
SELECT array_agg(rl_token_bucket('bh-sp-many')) AS sp3_calls FROM generate_series(1, 130) \gset
SELECT array_agg(rl_token_bucket('bh-sp-many-new')) AS sp3_new FROM generate_series(1, 60) \gset
ROLLBACK TO SAVEPOINT sp3;
RELEASE SAVEPOINT sp3;
SELECT is(:'sp3_calls'::bigint[],
          (SELECT array_agg(g::bigint) FROM generate_series(117, 0, -1) g) || array_fill(-1::bigint, ARRAY[12]),
          'inside sp3: 130 calls empty bh-sp-many');
SELECT is((:'sp3_new'::bigint[])[60], 60::bigint, 'inside sp3: 60 calls on a new key');
SELECT is(rl_token_bucket('bh-sp-many', 2, 60, 0), 118::bigint,
          'after the rollback bh-sp-many has its 118 back');
SELECT is(rl_token_bucket('bh-sp-many-new', 2, 60, 0), 120::bigint,
          'and the key first touched in sp3 is full again');

-- A key whose row existed before the transaction's first touch of it,
-- first touched inside a savepoint that is rolled back.
INSERT INTO ratelimit.state (key, zone_id, part, params, tokens, updated_at)
VALUES ('bh-sp-existing', 0, 0, '1:10', 5, '2026-01-01 00:00:00+00');
SAVEPOINT sp4;
SELECT rl_token_bucket('bh-sp-existing', 1, 10, 1) AS sp4_a,
       rl_token_bucket('bh-sp-existing', 1, 10, 1) AS sp4_b \gset
ROLLBACK TO SAVEPOINT sp4;
RELEASE SAVEPOINT sp4;
SELECT is(ARRAY[:sp4_a, :sp4_b]::bigint[], ARRAY[4, 3]::bigint[],
          'inside sp4: two calls on a key with an existing row');
SELECT results_eq($$SELECT tokens, updated_at FROM ratelimit.token_bucket WHERE id = 'bh-sp-existing'$$,
                  $$VALUES (5::bigint, '2026-01-01 00:00:00+00'::timestamptz)$$,
                  'its row is as it was');
SELECT is(rl_token_bucket('bh-sp-existing', 1, 10, 1), 4::bigint,
          'after the rollback the key goes on from its row: 5 - 1');
SELECT is(rl_token_bucket('bh-sp-existing', 1, 10, 1), 3::bigint, 'and again');

-- Released subtransactions keep their consumption.
SAVEPOINT sp5;
SELECT rl_token_bucket('bh-sp-rel', 1, 10, 4) AS sp5_a \gset
SELECT rl_token_bucket('bh-sp-rel', 1, 10, 1) AS sp5_b \gset
RELEASE SAVEPOINT sp5;
SELECT is(ARRAY[:sp5_a, :sp5_b]::bigint[], ARRAY[6, 5]::bigint[], 'inside sp5: two calls');
SELECT is(rl_token_bucket('bh-sp-rel', 1, 10, 0), 5::bigint,
          'after RELEASE the consumption stays');
SELECT is((SELECT count(*) FROM ratelimit.token_bucket WHERE id = 'bh-sp-rel'), 1::bigint,
          'and the row created in the released savepoint stays');

-- Nested savepoints.
SELECT is(rl_token_bucket('bh-sp-nest', 1, 10), 9::bigint, 'nest: 9 at top level');
SAVEPOINT a;
SELECT rl_token_bucket('bh-sp-nest', 1, 10) AS nest_a \gset
SAVEPOINT b;
SELECT rl_token_bucket('bh-sp-nest', 1, 10) AS nest_b \gset
RELEASE SAVEPOINT b;
SELECT rl_token_bucket('bh-sp-nest', 1, 10) AS nest_a2 \gset
SAVEPOINT c;
SELECT rl_token_bucket('bh-sp-nest', 1, 10) AS nest_c \gset
ROLLBACK TO SAVEPOINT c;
SELECT rl_token_bucket('bh-sp-nest', 1, 10, 0) AS nest_after_c \gset
RELEASE SAVEPOINT c;
ROLLBACK TO SAVEPOINT a;
RELEASE SAVEPOINT a;
SELECT is(ARRAY[:nest_a, :nest_b, :nest_a2, :nest_c]::bigint[], ARRAY[8, 7, 6, 5]::bigint[],
          'nest: calls in a, b (released), a, c');
SELECT is(:nest_after_c::bigint, 6::bigint, 'nest: rolling back c gives back only c''s token');
SELECT is(rl_token_bucket('bh-sp-nest', 1, 10, 0), 9::bigint,
          'nest: rolling back a gives back a''s, b''s and c''s tokens');

-- First touch in a released savepoint, then rolled-back ones.
SAVEPOINT m1;
SELECT rl_token_bucket('bh-sp-mix', 1, 10) AS mix1 \gset
RELEASE SAVEPOINT m1;
SAVEPOINT m2;
SELECT rl_token_bucket('bh-sp-mix', 1, 10) AS mix2 \gset
ROLLBACK TO SAVEPOINT m2;
SELECT rl_token_bucket('bh-sp-mix', 1, 10, 3) AS mix2b \gset
ROLLBACK TO SAVEPOINT m2;
RELEASE SAVEPOINT m2;
SAVEPOINT m3;
SAVEPOINT m4;
SELECT rl_token_bucket('bh-sp-mix', 1, 10) AS mix4 \gset
RELEASE SAVEPOINT m4;
SELECT rl_token_bucket('bh-sp-mix', 1, 10) AS mix3 \gset
ROLLBACK TO SAVEPOINT m3;
RELEASE SAVEPOINT m3;
SELECT is(ARRAY[:mix1, :mix2, :mix2b, :mix4, :mix3]::bigint[], ARRAY[9, 8, 6, 8, 7]::bigint[],
          'mix: the calls inside the savepoints');
SELECT is(rl_token_bucket('bh-sp-mix', 1, 10, 0), 9::bigint,
          'mix: only the call of the released savepoint m1 remains');

-- Subtransactions aborted by an error (as in a PL/pgSQL exception block).
SELECT is(rl_token_bucket('bh-sp-err-old', 1, 10), 9::bigint, 'bh-sp-err-old: 9 before');
SELECT throws_ok(
    $q$DO $do$
      DECLARE a bigint; b bigint;
      BEGIN
          a := rl_token_bucket('bh-sp-err-old', 1, 10, 5);
          b := rl_token_bucket('bh-sp-err-new', 1, 10, 5);
          RAISE EXCEPTION 'took, then failed: % %', a, b;
      END
      $do$
    $q$,
    'P0001', 'took, then failed: 4 5',
    'a statement that took tokens and then failed');
SELECT is(rl_token_bucket('bh-sp-err-old', 1, 10, 0), 9::bigint,
          'the failed statement gave bh-sp-err-old its tokens back');
SELECT is(rl_token_bucket('bh-sp-err-new', 1, 10, 0), 10::bigint,
          'the failed statement''s new key is full');

CREATE FUNCTION pg_temp.alternate(id text, n int) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    kept bigint := 0;
BEGIN
    FOR i IN 1 .. n LOOP
        BEGIN
            PERFORM rl_token_bucket(id);
            IF i % 2 = 0 THEN
                RAISE EXCEPTION 'roll back call %', i;
            END IF;
            kept := kept + 1;
        EXCEPTION WHEN raise_exception THEN
            NULL;
        END;
    END LOOP;
    RETURN kept;
END
$$;
SELECT is(pg_temp.alternate('bh-sp-alt', 200), 100::bigint,
          '200 calls in exception blocks, every other one rolled back');
SELECT is(rl_token_bucket('bh-sp-alt', 2, 60, 0), 20::bigint,
          'only the 100 kept calls consumed: 120 - 100');
SELECT is(pg_temp.alternate('bh-sp-alt', 40), 20::bigint, 'and 40 more');
SELECT is(rl_token_bucket('bh-sp-alt', 2, 60, 0), 0::bigint, 'the 20 kept ones emptied it');

-- The clock is a setting: rolling back a savepoint restores it too.
SAVEPOINT clk;
SET LOCAL ratelimit.now_override = '2026-01-01 00:10:00+00';
SELECT rl_token_bucket('bh-sp-alt', 2, 60, 0) AS clk_inside \gset
ROLLBACK TO SAVEPOINT clk;
RELEASE SAVEPOINT clk;
SELECT is(:clk_inside::bigint, 120::bigint, 'inside the savepoint ten minutes later the bucket is full');
SELECT is(current_setting('ratelimit.now_override'), '2026-01-01 00:00:00+00',
          'after the rollback the clock is back');
SELECT is(rl_token_bucket('bh-sp-alt', 2, 60, 0), 0::bigint, 'and the bucket is empty again');

-------------------------------------------------------------------------
-- A clock going backwards neither adds nor removes tokens.
-------------------------------------------------------------------------
SELECT is((SELECT array_agg(pg_temp.take_at(0, 'bh-back', 1, 10)) FROM generate_series(1, 10)),
          ARRAY[9, 8, 7, 6, 5, 4, 3, 2, 1, 0]::bigint[], 'back: empty the bucket at +0 s');
SELECT is(pg_temp.take_at(5000000, 'bh-back', 1, 10), 4::bigint, 'back: at +5 s, 5 tokens; take 1');
SELECT is(pg_temp.take_at(2000000, 'bh-back', 1, 10, 0), 4::bigint,
          'back: clock back to +2 s, a peek still sees 4');
SELECT is(pg_temp.take_at(2000000, 'bh-back', 1, 10), 3::bigint,
          'back: at +2 s a call takes 1 of the 4');
SELECT is(pg_temp.take_at(1000000, 'bh-back', 1, 10), 2::bigint,
          'back: at +1 s another call takes 1');
SELECT is(pg_temp.take_at(5000000, 'bh-back', 1, 10), 1::bigint,
          'back: at +5 s again, no refill for time already counted');
SELECT is(pg_temp.take_at(6000000, 'bh-back', 1, 10), 1::bigint,
          'back: at +6 s one second of refill');

SELECT is((SELECT array_agg(pg_temp.take_at(100000000, 'bh-back2', 1, 10)) FROM generate_series(1, 10)),
          ARRAY[9, 8, 7, 6, 5, 4, 3, 2, 1, 0]::bigint[], 'back2: empty the bucket at +100 s');
SELECT is(pg_temp.take_at(50000000, 'bh-back2', 1, 10), -1::bigint,
          'back2: at +50 s (earlier) an empty bucket is still empty');
SELECT is(pg_temp.take_at(50000000, 'bh-back2', 1, 10, 0), 0::bigint,
          'back2: and not below empty');
SELECT is(pg_temp.take_at(100500000, 'bh-back2', 1, 10), -1::bigint,
          'back2: at +100.5 s only half a token');
SELECT is(pg_temp.take_at(101000000, 'bh-back2', 1, 10), 0::bigint,
          'back2: at +101 s one token: the backwards call took nothing');

SELECT is(pg_temp.take_at(200000000, 'bh-back3', 1, 10, 5), 5::bigint, 'back3: take 5 at +200 s');
SELECT is(pg_temp.take_at(0, 'bh-back3', 1, 10, 0), 5::bigint,
          'back3: 200 s earlier the bucket still holds 5 (not refilled, not drained)');
SELECT is(pg_temp.take_at(0, 'bh-back3', 1, 10, 5), 0::bigint, 'back3: and they can be taken');
SELECT is(pg_temp.take_at(201000000, 'bh-back3', 1, 10, 0), 1::bigint,
          'back3: refill resumes from +200 s');
SET LOCAL ratelimit.now_override = '2026-01-01 00:00:00+00';

-------------------------------------------------------------------------
-- Another capacity (window) is another bucket of the same id: a smaller
-- one does not clamp the first, a larger one neither refills nor drains it.
-------------------------------------------------------------------------
SELECT is(rl_token_bucket('bh-cap', 1, 10), 9::bigint, 'cap: 9 of 10');
SELECT is(rl_token_bucket('bh-cap', 1, 3, 0), 3::bigint, 'cap: capacity 3 is a bucket of its own, full: 3');
SELECT is(rl_token_bucket('bh-cap', 1, 3), 2::bigint, 'cap: a call with capacity 3 leaves it 2');
SELECT is(rl_token_bucket('bh-cap', 1, 10, 0), 9::bigint, 'cap: the bucket of capacity 10 still holds 9');
SELECT is(rl_token_bucket('bh-cap', 1, 100, 0), 100::bigint, 'cap: capacity 100 is full, and gives the first nothing');
SELECT is(pg_temp.take_at(5000000, 'bh-cap', 1, 10), 9::bigint, 'cap: 5 s later 9 + 5, capped at 10, - 1');
SELECT is(pg_temp.take_at(5000000, 'bh-cap', 1, 3, 0), 3::bigint, 'cap: ... capacity 3: 2 + 5, capped at 3');
SELECT is(pg_temp.take_at(5000000, 'bh-cap', 1, 10, 0), 9::bigint, 'cap: the peek changed nothing');
SELECT is(pg_temp.take_at(100000000, 'bh-cap', 1, 10, 0), 10::bigint, 'cap: refill stops at the capacity');
SET LOCAL ratelimit.now_override = '2026-01-01 00:00:00+00';

-------------------------------------------------------------------------
-- The test clock: parsed as a timestamptz, any time zone, microseconds.
-------------------------------------------------------------------------
SET LOCAL ratelimit.now_override = '2026-01-01 00:00:00.123456+00';
SELECT is(rl_token_bucket('bh-clock-us', 1, 10), 9::bigint, 'clock: a call at .123456');
SELECT is((SELECT updated_at FROM ratelimit.token_bucket WHERE id = 'bh-clock-us'),
          '2026-01-01 00:00:00.123456+00'::timestamptz,
          'clock: the new row is stamped with the overridden time, to the microsecond');
SET LOCAL ratelimit.now_override = '2026-01-01 05:30:00+05:30';
SELECT is(rl_token_bucket('bh-clock-tz', 1, 10, 10), 0::bigint, 'clock: empty a bucket at 05:30+05:30');
SELECT is((SELECT updated_at FROM ratelimit.token_bucket WHERE id = 'bh-clock-tz'),
          '2026-01-01 00:00:00+00'::timestamptz,
          'clock: the row written at the first call carries the instant of 05:30+05:30');
SET LOCAL ratelimit.now_override = '2025-12-31 19:00:00-05';
SELECT is(rl_token_bucket('bh-clock-tz', 1, 10), -1::bigint, 'clock: the same instant at -05 adds nothing');
SET LOCAL ratelimit.now_override = '2026-01-01 00:00:01';
SELECT is(rl_token_bucket('bh-clock-tz', 1, 10), 0::bigint,
          'clock: without a zone the session time zone (UTC) applies: 1 s later, a token');

-- The whole timestamptz range is a valid clock: a bucket idle from the
-- first to the last representable instant (more microseconds than an
-- int64 holds) is full, not broken.
SET LOCAL ratelimit.now_override = '4714-11-24 00:00:00+00 BC';
SELECT is(rl_token_bucket('bh-clock-range', 1, 10, 10), 0::bigint,
          'range: empty a bucket at the earliest timestamptz');
SET LOCAL ratelimit.now_override = '294276-12-31 23:59:59+00';
SELECT is(rl_token_bucket('bh-clock-range', 1, 10, 0), 10::bigint,
          'range: at the latest timestamptz a peek finds it full');
SELECT is(rl_token_bucket('bh-clock-range', 1, 10, 1), 9::bigint,
          'range: and a call is admitted');
SELECT is(rl_token_bucket('bh-clock-range2', 1, 10, 10), 0::bigint,
          'range: empty another bucket at the latest timestamptz');
SET LOCAL ratelimit.now_override = '4714-11-24 00:00:00+00 BC';
SELECT is(rl_token_bucket('bh-clock-range2', 1, 10, 0), 0::bigint,
          'range: back at the earliest timestamptz it is still empty, not below');
SET LOCAL ratelimit.now_override = '2026-01-01 00:00:00+00';

-------------------------------------------------------------------------
-- Without the override, decisions use the wall clock at the call, not the
-- transaction's start.
-------------------------------------------------------------------------
SET LOCAL ratelimit.now_override = '';
SELECT clock_timestamp() AS wall_before \gset
SELECT rl_token_bucket('bh-wall', 100, 0.1, 10) AS wall_first \gset
SELECT clock_timestamp() AS wall_after \gset
SELECT is(:wall_first::bigint, 0::bigint, 'wall: a first call takes all 10 tokens');
SELECT ok((SELECT updated_at BETWEEN :'wall_before' AND :'wall_after'
           FROM ratelimit.token_bucket WHERE id = 'bh-wall'),
          'wall: the row is stamped with the time of the call');
SELECT ok(:'wall_before'::timestamptz > now(), 'wall: the transaction started earlier');
SELECT pg_sleep(0.06) \gset
SELECT cmp_ok(rl_token_bucket('bh-wall', 100, 0.1), '>=', 4::bigint,
              'wall: 60 ms later (100 tokens/s) at least 6 tokens are back');

SELECT * FROM finish();
ROLLBACK;
