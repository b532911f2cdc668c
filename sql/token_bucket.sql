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

-- A smaller capacity on a later call clamps what the bucket holds.
SELECT rl_token_bucket('clamp', 10, 10, 0);
SELECT rl_token_bucket('clamp', 1, 5, 0);

-- The state table holds one row per key.
SELECT id, tokens, token_fraction, updated_at FROM ratelimit.token_bucket
WHERE id IN ('user:42', 'frac', 'slow') ORDER BY id;
