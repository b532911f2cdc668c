-- rl_token_bucket as a user sees it, on a fixed test clock.
SET ratelimit.now_override = '2026-01-01 00:00:00+00';

-- Rate 1/s, window 10: capacity 10; the first call finds a full bucket.
SELECT i, rl_token_bucket('user:42', 1, 10) AS remaining
FROM generate_series(1, 12) AS i;

-- 4 seconds later four tokens are back.
SET ratelimit.now_override = '2026-01-01 00:00:04+00';
SELECT rl_token_bucket('user:42', 1, 10);
SELECT rl_token_bucket('user:42', 1, 10);
SELECT rl_token_bucket('user:42', 1, 10);
SELECT rl_token_bucket('user:42', 1, 10);
SELECT rl_token_bucket('user:42', 1, 10);

-- Fractions are kept and refusals do not disturb the refill: empty at
-- t=10, refused every 0.1 s, admitted at t=11.05 (1.05 tokens).
SET ratelimit.now_override = '2026-01-01 00:00:10+00';
SELECT count(*) FILTER (WHERE r >= 0) AS admitted
FROM (SELECT rl_token_bucket('frac', 1, 10) AS r FROM generate_series(1, 10)) s;
DO $$
BEGIN
    FOR i IN 1..9 LOOP
        PERFORM set_config('ratelimit.now_override',
                           (timestamptz '2026-01-01 00:00:10+00' + i * interval '0.1 s')::text, false);
        IF rl_token_bucket('frac', 1, 10) <> -1 THEN
            RAISE EXCEPTION 'call % admitted too early', i;
        END IF;
    END LOOP;
END $$;
SET ratelimit.now_override = '2026-01-01 00:00:11.05+00';
SELECT rl_token_bucket('frac', 1, 10) AS admitted_after_1_05_s;

-- Defaults: rate 2/s over a 60 s window = 120 tokens, cost 1.
SELECT rl_token_bucket('defaults');
-- A cost takes several tokens; cost 0 only looks.
SELECT rl_token_bucket('defaults', cost => 19);
SELECT rl_token_bucket('defaults', cost => 0);
SELECT rl_token_bucket('defaults', 2, 60, 101);
SELECT rl_token_bucket('defaults', 2, 60, 100);
SELECT rl_token_bucket('defaults', 2, 60, 0);

-- Keys are matched byte for byte.
SELECT rl_token_bucket('Key', 1, 3), rl_token_bucket('key', 1, 3),
       rl_token_bucket('key ', 1, 3), rl_token_bucket('k''e\y', 1, 3),
       rl_token_bucket('ключ', 1, 3), rl_token_bucket('key', 1, 3);

-- Whole tokens after fractional refills: 0.3/s for 10 s is 3 tokens.
SET ratelimit.now_override = '2026-01-01 00:01:00+00';
SELECT rl_token_bucket('slow', 0.3, 10, 3);
SET ratelimit.now_override = '2026-01-01 00:01:10+00';
SELECT rl_token_bucket('slow', 0.3, 10, 3) AS after_10_s;

-- The clock never runs backwards for a bucket.
SET ratelimit.now_override = '2026-01-01 00:00:00+00';
SELECT rl_token_bucket('slow', 0.3, 10, 0) AS earlier_clock_adds_nothing;
SET ratelimit.now_override = '2026-01-01 00:01:20+00';
SELECT rl_token_bucket('slow', 0.3, 10, 0) AS ten_seconds_after_latest;

-- A bucket is its id and its parameters (issue 30): a call with another
-- rate or window has a bucket of its own, full at first, and takes nothing
-- from the other, nor refills it.  Were the id shared, a call at rate
-- 1000000 10 ms after the drain would refill it (10000 tokens), and the
-- next call at rate 1 would find it full again (9 left).
SET ratelimit.now_override = '2026-01-01 00:02:00+00';
SELECT string_agg(rl_token_bucket('shared', 1, 10)::text, ' ') FROM generate_series(1, 11);
SET ratelimit.now_override = '2026-01-01 00:02:00.01+00';
SELECT rl_token_bucket('shared', 1000000, 10) AS own_bucket_of_10000000;
SET ratelimit.now_override = '2026-01-01 00:02:00.02+00';
SELECT rl_token_bucket('shared', 1, 10) AS still_empty;
SELECT rl_token_bucket('shared', 1, 20) AS another_window_another_bucket;
SELECT rl_token_bucket('shared', 1000000, 10, 0) AS large_one_full_again_in_10_ms;
-- The same float8s however written are the same bucket.
SELECT rl_token_bucket('shared', 1.0, 10.0) AS one, rl_token_bucket('shared', 1e0, 1e1) AS two,
       rl_token_bucket('shared', '1.000'::float8, 10) AS three;
-- The nearest float8 above 1 is another rate: another bucket.  The name of
-- a rate is its shortest exact text, whatever extra_float_digits says:
-- with 1 digit, 1 and 1.4 would print alike, and 1.4 must not share 1's
-- bucket.
SELECT rl_token_bucket('shared', 1.0000000000000002, 10) AS next_float8;
SET extra_float_digits = -15;
SELECT rl_token_bucket('shared', 1.4, 10) AS rate_1_4, rl_token_bucket('shared', 1, 10) AS rate_1,
       rl_token_bucket('shared', 1.0000000000000002, 10) AS next_float8_again;
RESET extra_float_digits;
-- A smaller capacity is another bucket: it does not clamp the larger one.
SELECT rl_token_bucket('clamp', 10, 10, 0);
SELECT rl_token_bucket('clamp', 1, 5, 0);
SELECT rl_token_bucket('clamp', 10, 10, 0);
-- Ids that look like parameters stay ids: params is a column of its own.
SELECT rl_token_bucket('shared:1:10', 1, 10) AS id_with_colons, rl_token_bucket('shared', 1, 10) AS shared_still_empty;
-- An id of 1024 bytes (the limit) with long parameters.
SELECT rl_token_bucket(repeat('p', 1024), 1.2345678901234567e-300, 1.2345678901234567e300) AS long_id_long_params;

-- The state table holds one row per bucket: id, rate and window.
SELECT id, rate, "window", tokens, token_fraction, updated_at FROM ratelimit.token_bucket
WHERE id IN ('user:42', 'frac', 'slow', 'shared', 'clamp') ORDER BY id, rate, "window";
SELECT left(id, 4) AS id, length(id), rate, "window" FROM ratelimit.token_bucket WHERE id = repeat('p', 1024);

-- rl_gcra keeps redis-cell's semantics: one state per key, whatever the
-- parameters.  That state, a theoretical arrival time, only moves forward:
-- a call with larger parameters is judged against it (refused here: its
-- tolerance is 1 ms, the key is 60 s ahead), and no call gives back what
-- another took.
SET ratelimit.now_override = '2026-01-01 00:03:00+00';
SELECT allowed, remaining, retry_after FROM rl_gcra('gcra-shared', 0, 1, 60);
SELECT allowed, remaining, retry_after FROM rl_gcra('gcra-shared', 1000, 1000000, 1) AS larger;
SELECT allowed, remaining, retry_after FROM rl_gcra('gcra-shared', 0, 1, 60) AS still_refused;
SET ratelimit.now_override = '2026-01-01 00:03:30+00';
SELECT allowed, remaining, retry_after FROM rl_gcra('gcra-shared', 100000, 1000, 1) AS burst_of_100001;
SELECT allowed, remaining, retry_after FROM rl_gcra('gcra-shared', 0, 1, 60) AS pushed_back;
