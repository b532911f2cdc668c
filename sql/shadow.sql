-- Shadow mode (0.5.0): rl_zone_set(..., shadow => true) decides, counts and
-- records as usual but lets every call through.  rl_result.would_allow is
-- what the limit decided; in shadow mode allowed is always true while
-- remaining, retry_after and reset_after describe the real decision, and a
-- call the limit refuses takes nothing.  On the fixed test clock.
--
-- Every shadow zone sh_X has an enforcing twin sh_X_real with the same
-- parameters, and every call goes to both: the shadow zone must show the
-- twin's numbers, with would_allow = the twin's allowed ("same").  The
-- comments give the numbers each result must show, worked out from the
-- algorithms' definitions (the expected output was checked against them).
-- Needs ratelimit in shared_preload_libraries (shmem store, rl_counters).
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
SET ratelimit.now_override = '2026-01-01 00:00:00+00';


-- n calls of cost on key 'sh:key' of zone sh_<name> and of its twin.
CREATE FUNCTION pg_temp.calls(name text, n int, cost int DEFAULT 1)
RETURNS TABLE (call int, allowed boolean, remaining bigint, retry_after interval,
               reset_after interval, would_allow boolean, real_allowed boolean, same boolean)
LANGUAGE plpgsql AS $$
DECLARE
    s rl_result;
    r rl_result;
BEGIN
    FOR i IN 1 .. n LOOP
        SELECT * INTO s FROM rl_limit('sh_' || name, 'sh:key', cost);
        SELECT * INTO r FROM rl_limit('sh_' || name || '_real', 'sh:key', cost);
        call := i;
        allowed := s.allowed;
        remaining := s.remaining;
        retry_after := s.retry_after;
        reset_after := s.reset_after;
        would_allow := s.would_allow;
        real_allowed := r.allowed;
        same := (s.capacity, s.remaining, s.retry_after, s.reset_after, s.would_allow)
                IS NOT DISTINCT FROM (r.capacity, r.remaining, r.retry_after, r.reset_after, r.allowed)
                AND r.would_allow = r.allowed;
        RETURN NEXT;
    END LOOP;
END $$;

-------------------------------------------------------------------------
-- 1. The zones.  rl_zones shows shadow.
-------------------------------------------------------------------------
SELECT rl_zone_set('sh_tb', 'token_bucket', 2, '10 seconds', burst => 3, history => true, shadow => true);
SELECT rl_zone_set('sh_tb_real', 'token_bucket', 2, '10 seconds', burst => 3, history => true);
SELECT rl_zone_set('sh_gcra', 'gcra', 1, '2 seconds', burst => 2, shadow => true);
SELECT rl_zone_set('sh_gcra_real', 'gcra', 1, '2 seconds', burst => 2);
SELECT rl_zone_set('sh_fw', 'fixed_window', 2, '10 seconds', shadow => true);
SELECT rl_zone_set('sh_fw_real', 'fixed_window', 2, '10 seconds');
SELECT rl_zone_set('sh_swc', 'sliding_window_counter', 2, '10 seconds', shadow => true);
SELECT rl_zone_set('sh_swc_real', 'sliding_window_counter', 2, '10 seconds');
SELECT rl_zone_set('sh_sw', 'sliding_window', 2, '10 seconds', shadow => true);
SELECT rl_zone_set('sh_sw_real', 'sliding_window', 2, '10 seconds');
SELECT rl_zone_set('sh_shm', 'token_bucket', 2, '10 seconds', burst => 3, store => 'shmem', shadow => true);
SELECT rl_zone_set('sh_shm_real', 'token_bucket', 2, '10 seconds', burst => 3, store => 'shmem');
SELECT zone, algorithm, capacity, store, history, shadow FROM rl_zones WHERE zone LIKE 'sh\_%' ORDER BY zone;
-- rl_counters is per zone id since the server started (a recreated
-- extension reuses ids): count from here.
CREATE TEMP TABLE counted AS
SELECT z.zone, coalesce(c.allowed, 0) AS allowed, coalesce(c.refused, 0) AS refused
FROM rl_zones z LEFT JOIN rl_counters c USING (zone) WHERE z.zone LIKE 'sh\_%';

-------------------------------------------------------------------------
-- 2. token_bucket: capacity 3, one token back every 5 s.
-------------------------------------------------------------------------
-- t = 0: three pass (remaining 2, 1, 0; reset 5, 10, 15 s); the limit
-- refuses the next two (retry 5 s), which shadow mode lets through.
SELECT * FROM pg_temp.calls('tb', 5);
-- t = 5: one token back; the refusals took nothing, so one call passes.
SET ratelimit.now_override = '2026-01-01 00:00:05+00';
SELECT * FROM pg_temp.calls('tb', 2);
-- t = 7: 0.4 token; cost 2 lacks 1.6 tokens (8 s); full in 2.6 tokens (13 s).
SET ratelimit.now_override = '2026-01-01 00:00:07+00';
SELECT * FROM pg_temp.calls('tb', 1, 2);
-- rl_peek applies the same override, and takes nothing.
SELECT * FROM rl_peek('sh_tb', 'sh:key');
SELECT * FROM rl_peek('sh_tb_real', 'sh:key');
-- The headers of a shadow refusal: no Retry-After, the call was let
-- through; the policy is the zone's (2 per 10 s), 0 left, full in 13 s.
SELECT rl_headers(r) FROM rl_peek('sh_tb', 'sh:key') r;
-- History records the real decisions (4 allowed, 4 refused), identical
-- for the shadow zone and its twin.
SELECT h.recorded_at, h.cost, h.allowed, t.allowed AS real_allowed
FROM (SELECT *, row_number() OVER (ORDER BY recorded_at, allowed DESC) AS n
      FROM ratelimit.history WHERE zone = 'sh_tb') h
JOIN (SELECT *, row_number() OVER (ORDER BY recorded_at, allowed DESC) AS n
      FROM ratelimit.history WHERE zone = 'sh_tb_real') t USING (n)
ORDER BY n;
SELECT count(*) FILTER (WHERE txn_id IS NULL) AS without_txn_id, count(*) AS calls
FROM (SELECT (rl_limit('sh_tb', 'sh:other')).txn_id) s;

-------------------------------------------------------------------------
-- 3. gcra: capacity 2, one request per 2 s.
-------------------------------------------------------------------------
SET ratelimit.now_override = '2026-01-01 00:00:00+00';
-- t = 0: remaining 1, 0 (reset 2, 4 s); then refused, retry 2 s.
SELECT * FROM pg_temp.calls('gcra', 4);
-- t = 5: the theoretical arrival time (4 s) has passed: full again.
SET ratelimit.now_override = '2026-01-01 00:00:05+00';
SELECT * FROM pg_temp.calls('gcra', 3);
-- t = 7: arrival time 9 s: cost 2 needs it at 5 s, waits 2 s; one is left.
SET ratelimit.now_override = '2026-01-01 00:00:07+00';
SELECT * FROM pg_temp.calls('gcra', 1, 2);

-------------------------------------------------------------------------
-- 4. fixed_window: 2 per 10 s, the window starts at its first call.
-------------------------------------------------------------------------
SET ratelimit.now_override = '2026-01-01 00:00:00+00';
SELECT * FROM pg_temp.calls('fw', 3);
-- t = 5: still the first window: retry 5 s.
SET ratelimit.now_override = '2026-01-01 00:00:05+00';
SELECT * FROM pg_temp.calls('fw', 1);
-- t = 10: a new window: two pass, then retry 10 s.
SET ratelimit.now_override = '2026-01-01 00:00:10+00';
SELECT * FROM pg_temp.calls('fw', 3);
-- t = 17: cost 2 in a full window: retry 3 s.
SET ratelimit.now_override = '2026-01-01 00:00:17+00';
SELECT * FROM pg_temp.calls('fw', 1, 2);

-------------------------------------------------------------------------
-- 5. sliding_window_counter: 2 per 10 s, windows aligned to 10 s.
-------------------------------------------------------------------------
SET ratelimit.now_override = '2026-01-01 00:00:00+00';
-- t = 0: remaining 1, 0, reset 20 s; the third waits until 15 s, when
-- 2 x 5/10 + 1 = 2.
SELECT * FROM pg_temp.calls('swc', 3);
-- t = 5: retry 10 s, reset 15 s.
SET ratelimit.now_override = '2026-01-01 00:00:05+00';
SELECT * FROM pg_temp.calls('swc', 1);
-- t = 15: 2 x 5/10 + 1 = 2 passes (remaining 0, reset 15 s); the next
-- waits for the next window (5 s), where 1 x 10/10 + 1 = 2.
SET ratelimit.now_override = '2026-01-01 00:00:15+00';
SELECT * FROM pg_temp.calls('swc', 2);

-------------------------------------------------------------------------
-- 6. sliding_window (exact): 2 in any trailing 10 s.
-------------------------------------------------------------------------
SET ratelimit.now_override = '2026-01-01 00:00:00+00';
SELECT * FROM pg_temp.calls('sw', 3);
-- t = 4: retry 6 s, reset 6 s.
SET ratelimit.now_override = '2026-01-01 00:00:04+00';
SELECT * FROM pg_temp.calls('sw', 1);
-- t = 10: both admissions of t = 0 left the window (an entry at t is in
-- it while t > now - 10 s).
SET ratelimit.now_override = '2026-01-01 00:00:10+00';
SELECT * FROM pg_temp.calls('sw', 3);
-- rl_sliding_window applies the override too.
SELECT allowed, remaining, retry_after, would_allow FROM rl_sliding_window('sh_sw', 'sh:key');

-------------------------------------------------------------------------
-- 7. The shmem store: the token bucket of section 2, same numbers.
-------------------------------------------------------------------------
SET ratelimit.now_override = '2026-01-01 00:00:00+00';
SELECT * FROM pg_temp.calls('shm', 5);
SET ratelimit.now_override = '2026-01-01 00:00:05+00';
SELECT * FROM pg_temp.calls('shm', 2);
SET ratelimit.now_override = '2026-01-01 00:00:07+00';
SELECT * FROM pg_temp.calls('shm', 1, 2);
SELECT allowed, remaining, retry_after, would_allow FROM rl_peek('sh_shm', 'sh:key');

-------------------------------------------------------------------------
-- 8. rl_counters counts the real decisions: each shadow zone as its twin.
-- Allowed and refused: tb 3 + 1 + 0 and 2 + 1 + 1 (sh_tb: plus
-- sh:other's call, 5 allowed); gcra 2 + 2 + 0 and 2 + 1 + 1; fw 2 + 0 +
-- 2 + 0 and 1 + 1 + 1 + 1; swc 2 + 0 + 1 and 1 + 1 + 1; sw 2 + 0 + 2 and
-- 1 + 1 + 1 (sh_sw: plus the refused rl_sliding_window call, 4); shm as tb.
-------------------------------------------------------------------------
SELECT z.zone, c.allowed - z.allowed AS allowed, c.refused - z.refused AS refused
FROM counted z JOIN rl_counters c USING (zone) ORDER BY z.zone;

-------------------------------------------------------------------------
-- 9. Changing shadow keeps every key's state (same zone id): switched off,
-- sh_tb refuses what its limit refuses; switched on again, it lets it
-- through.  would_allow = allowed outside shadow mode.
-------------------------------------------------------------------------
SET ratelimit.now_override = '2026-01-01 00:00:07+00';
CREATE TEMP TABLE ids AS SELECT zone_id FROM ratelimit.zone WHERE zone = 'sh_tb';
SELECT rl_zone_set('sh_tb', 'token_bucket', 2, '10 seconds', burst => 3, history => true, shadow => false);
SELECT (SELECT zone_id FROM ratelimit.zone WHERE zone = 'sh_tb') = zone_id AS same_zone_id FROM ids;
SELECT zone, shadow FROM rl_zones WHERE zone = 'sh_tb';
SELECT allowed, remaining, retry_after, would_allow FROM rl_limit('sh_tb', 'sh:key');
SELECT rl_zone_set('sh_tb', 'token_bucket', 2, '10 seconds', burst => 3, history => true, shadow => true);
SELECT allowed, remaining, retry_after, would_allow FROM rl_limit('sh_tb', 'sh:key');
-- Altering the rate with shadow on keeps the state too: emptied at 5 s,
-- refilled for 2 s at the new rate of 4 per 10 s: 0.8 token, 0.2 short,
-- 0.5 s.
SELECT rl_zone_set('sh_tb', 'token_bucket', 4, '10 seconds', burst => 3, history => true, shadow => true);
SELECT allowed, remaining, retry_after, would_allow FROM rl_limit('sh_tb', 'sh:key');
-- Errors are not shadowed: a cost above the capacity is still 22023.
SELECT regress.try($$SELECT allowed FROM rl_limit('sh_tb', 'sh:key', 4)$$);
-- Functions outside zones have no shadow mode: would_allow = allowed.
SELECT allowed, would_allow FROM rl_gcra('sh:gcra', 0, 1, 60);
SELECT allowed, would_allow, retry_after FROM rl_gcra('sh:gcra', 0, 1, 60);

SELECT count(rl_zone_drop(zone)) AS zones_dropped FROM rl_zones WHERE zone LIKE 'sh\_%';
