-- Bad input: a precise SQLSTATE and message, nothing written.
SET ratelimit.now_override = '2026-01-01 00:00:00+00';

SELECT rl_token_bucket('err', 1, 10, 3);

SELECT sql, regress.try(sql) FROM (VALUES
    ($$SELECT rl_token_bucket(NULL, 1, 10)$$),
    ($$SELECT rl_token_bucket('err', NULL, 10)$$),
    ($$SELECT rl_token_bucket('err', 1, NULL)$$),
    ($$SELECT rl_token_bucket('err', 1, 10, NULL)$$),
    ($$SELECT rl_token_bucket('', 1, 10)$$),
    ($$SELECT rl_token_bucket(repeat('x', 1025), 1, 10)$$),
    ($$SELECT rl_token_bucket(repeat('x', 1024), 1, 10)$$),
    ($$SELECT rl_token_bucket(repeat('é', 513), 1, 10)$$),
    ($$SELECT rl_token_bucket('err', 0, 10)$$),
    ($$SELECT rl_token_bucket('err', -1, 10)$$),
    ($$SELECT rl_token_bucket('err', 'NaN', 10)$$),
    ($$SELECT rl_token_bucket('err', 'Infinity', 10)$$),
    ($$SELECT rl_token_bucket('err', '-Infinity', 10)$$),
    ($$SELECT rl_token_bucket('err', 1, 0)$$),
    ($$SELECT rl_token_bucket('err', 1, -5)$$),
    ($$SELECT rl_token_bucket('err', 1, 'NaN')$$),
    ($$SELECT rl_token_bucket('err', 1, 'Infinity')$$),
    ($$SELECT rl_token_bucket('err', 1e300, 1e300)$$),
    ($$SELECT rl_token_bucket('err', 1e10, 1e6)$$),
    ($$SELECT rl_token_bucket('err', 1, 10, -1)$$),
    ($$SELECT rl_token_bucket('err', 1, 10, 11)$$),
    ($$SELECT rl_token_bucket('err', 0.01, 10)$$),
    ($$SET ratelimit.now_override = 'not a time'$$),
    ($$SET ratelimit.now_override = 'infinity'$$),
    ($$SET ratelimit.now_override = '2026-01-01 00:00:00 No/Such_Zone'$$),
    ($$SELECT set_config('ratelimit.now_override', 'epoch', true)$$),
    ($$SET ratelimit.table_access = 'heap'$$)
) AS t(sql);

-- Nothing was written: the key still holds 7 tokens, and no other key exists.
SELECT left(id, 8) AS id_prefix, length(id), tokens FROM ratelimit.token_bucket ORDER BY id;

-- Read-only transactions are refused before anything is read or written.
BEGIN READ ONLY;
SELECT rl_token_bucket('err', 1, 10);
ROLLBACK;
SELECT rl_token_bucket('err', 1, 10, 0) AS still_seven;
