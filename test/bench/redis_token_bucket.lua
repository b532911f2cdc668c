-- The token bucket people run in Redis instead of a database call, measured
-- against rl_token_bucket by test/bench/redis.sh.  Same rule as
-- rl_token_bucket: a new key finds a full bucket, tokens refill
-- continuously (fractions kept), a refused call takes nothing and leaves the
-- refill alone.
--
--   EVALSHA <sha> 1 <key> <rate> <period> <cost>
--
-- rate: tokens per period, also the capacity; period: seconds.  Returns the
-- whole tokens left after taking cost, or -1 when refused.
local rate = tonumber(ARGV[1])
local period = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])

-- The server's clock, not the caller's: callers' clocks disagree.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

local state = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(state[1])
local ts = tonumber(state[2])
if tokens == nil or ts == nil then
    tokens = rate
    ts = now
end
-- A clock that steps back refills nothing rather than draining the bucket.
local elapsed = math.max(0, now - ts)
tokens = math.min(rate, tokens + elapsed * rate / (period * 1000000))

if tokens < cost then
    -- The benchmark's own check that nothing was refused: only the refused
    -- path pays for it.  (A key the script does not declare: fine on one
    -- server, not on a cluster.)
    redis.call('INCR', 'bench:refused')
    return -1
end

tokens = tokens - cost
redis.call('HSET', KEYS[1], 'tokens', tokens, 'ts', math.max(ts, now))
-- A bucket left alone for a period is full again, as a missing key is.
redis.call('PEXPIRE', KEYS[1], math.ceil(period * 1000))
return math.floor(tokens)
