-- rl_wait(zone, key, cost, timeout) on the table store: rl_limit that, when
-- refused, sleeps until its tokens are due and tries again, until admitted
-- or timeout has passed.  When the tokens would come only after the
-- deadline it returns the refusal at once (fail fast).  On the fixed test
-- clock (ratelimit.now_override) nothing comes back by waiting, so every
-- refusal below has a timeout shorter than its retry_after and returns at
-- once; timeout 0 is a single attempt.  Only section 6 runs on the real
-- clock, for one wait of about 10 ms.  Needs ratelimit in
-- shared_preload_libraries (rl_counters).
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
SET ratelimit.now_override = '2026-06-01 00:00:00+00';
-- Nothing here waits longer than a few milliseconds: a wait that lost its
-- timeout fails with 57014 within a minute instead of hanging the suite.
SET statement_timeout = '60s';

-------------------------------------------------------------------------
-- 1. token_bucket, 10 per minute (a token per 6 s), capacity 10.
-------------------------------------------------------------------------
SELECT rl_zone_set('w_tb', 'token_bucket', 10, '1 minute');
-- Admitted at once, as rl_limit would be (the default cost 1, no timeout).
SELECT * FROM rl_wait('w_tb', 'k');
-- Cost 7: 2 left; cost 0 takes nothing.
SELECT allowed, remaining FROM rl_wait('w_tb', 'k', 7);
SELECT allowed, remaining FROM rl_wait('w_tb', 'k', 0);
-- Cost 2 with a timeout: admitted at once, 0 left.
SELECT allowed, remaining, retry_after FROM rl_wait('w_tb', 'k', 2, '1 minute');
-- Empty.  Cost 1 is due in 6 s: with a timeout of 5 s it could never be
-- admitted in time: refused at once, retry 6 s.
SELECT clock_timestamp() AS t0 \gset
SELECT * FROM rl_wait('w_tb', 'k', 1, '5 seconds');
SELECT clock_timestamp() - :'t0'::timestamptz < interval '1 second' AS returned_at_once;
-- Cost 3 is due in 18 s, cost 10 in 60 s: refused at once with those.
SELECT allowed, remaining, retry_after FROM rl_wait('w_tb', 'k', 3, '10 seconds');
SELECT allowed, remaining, retry_after FROM rl_wait('w_tb', 'k', 10, '59 seconds');
-- Timeout 0: one attempt, refused, retry 6 s.
SELECT allowed, remaining, retry_after, would_allow FROM rl_wait('w_tb', 'k', 1, '0');
-- A refused call takes nothing: 12 s later 2 tokens are back, cost 2
-- admitted at once (timeout 0), 0 left.
SET ratelimit.now_override = '2026-06-01 00:00:12+00';
SELECT allowed, remaining FROM rl_wait('w_tb', 'k', 2, '0');
-- rl_wait and rl_limit see the same key: rl_limit is refused now.
SELECT allowed, retry_after FROM rl_limit('w_tb', 'k');

-------------------------------------------------------------------------
-- 2. The other algorithms: fail fast on each (timeout below retry_after).
-------------------------------------------------------------------------
SELECT rl_zone_set('w_gcra', 'gcra', 6, '1 minute', burst => 2),
       rl_zone_set('w_fw', 'fixed_window', 2, '1 minute'),
       rl_zone_set('w_swc', 'sliding_window_counter', 2, '1 minute'),
       rl_zone_set('w_sw', 'sliding_window', 2, '1 minute');
SELECT zone, g, (r).allowed, (r).remaining, (r).retry_after
FROM unnest(ARRAY['w_gcra', 'w_fw', 'w_swc', 'w_sw']) zone,
     LATERAL (SELECT g, rl_wait(zone, 'k', 1, '1 second') AS r FROM generate_series(1, 3) g OFFSET 0) s
ORDER BY zone, g;

-------------------------------------------------------------------------
-- 3. Errors: a negative timeout (22023), NULL zone, key or cost (22004),
-- a cost above the capacity (22023), an unknown zone (42704), a
-- concurrency zone (42809); nothing is taken.
-------------------------------------------------------------------------
SELECT rl_zone_set('w_conc', 'concurrency', 2, '1 minute');
SELECT * FROM regress.error($$SELECT rl_wait('w_tb', 'e', 1, '-1 second')$$);
SELECT * FROM regress.error($$SELECT rl_wait('w_tb', 'e', 11)$$);
SELECT * FROM regress.error($$SELECT rl_wait('w_conc', 'e')$$);
SELECT q, regress.try(q) FROM (VALUES
    ($$SELECT rl_wait(NULL, 'e')$$),
    ($$SELECT rl_wait('w_tb', NULL)$$),
    ($$SELECT rl_wait('w_tb', 'e', NULL)$$),
    ($$SELECT rl_wait('w_tb', 'e', -1)$$),
    ($$SELECT rl_wait('w_nope', 'e')$$),
    ($$SELECT rl_wait('w_tb', '')$$),
    ($$SELECT rl_wait('w_conc', 'e', 1, '0')$$)) v(q);
-- Nothing was taken from 'e'; a NULL timeout is no error (no timeout).
SELECT allowed, remaining FROM rl_peek('w_tb', 'e', 0);
SELECT allowed, remaining FROM rl_wait('w_tb', 'e', 1, NULL);

-------------------------------------------------------------------------
-- 4. A shadow zone never waits: refused by the limit, the call is let
-- through at once (allowed, would_allow false) and takes nothing.
-------------------------------------------------------------------------
SELECT rl_zone_set('w_shadow', 'fixed_window', 1, '1 minute', shadow => true);
SELECT allowed, would_allow, remaining FROM rl_wait('w_shadow', 'k');
SELECT clock_timestamp() AS t0 \gset
SELECT allowed, would_allow, remaining, retry_after FROM rl_wait('w_shadow', 'k', 1, NULL);
SELECT allowed, would_allow, remaining, retry_after FROM rl_wait('w_shadow', 'k', 1, '30 seconds');
SELECT clock_timestamp() - :'t0'::timestamptz < interval '1 second' AS returned_at_once;

-------------------------------------------------------------------------
-- 5. A cron zone (regress.cron_zone: see sql/setup.sql) without a refill
-- job: no time can be promised, so a refused call returns at once, with
-- retry_after NULL, even without a timeout.
-------------------------------------------------------------------------
SELECT regress.cron_zone('w_cron', 10, '1 minute');
SELECT allowed, remaining FROM rl_wait('w_cron', 'k', 10);
SELECT * FROM rl_wait('w_cron', 'k');
SELECT allowed, remaining, retry_after FROM rl_wait('w_cron', 'k', 1, '1 hour');

-------------------------------------------------------------------------
-- 6. Counted once and recorded once per call, however many attempts: a
-- zone with history on the test clock, then one on the real clock for
-- one short wait.
-------------------------------------------------------------------------
TRUNCATE ratelimit.history;
SELECT rl_zone_set('w_hist', 'token_bucket', 10, '1 minute', history => true);
-- On the test clock: admitted, refused at once (timeout 0), refused at
-- once (fail fast): one history row each, with txn_id.
BEGIN;
SELECT allowed, remaining, txn_id = txid_current() AS is_txid_current FROM rl_wait('w_hist', 'h', 10);
SELECT allowed, remaining, txn_id = txid_current() AS is_txid_current FROM rl_wait('w_hist', 'h', 1, '0');
SELECT allowed, remaining, txn_id = txid_current() AS is_txid_current FROM rl_wait('w_hist', 'h', 2, '5 seconds');
COMMIT;
SELECT zone, key, cost, allowed FROM ratelimit.history WHERE zone = 'w_hist' ORDER BY cost DESC, allowed;
SELECT zone, allowed, refused FROM regress.counted('w_hist');
-- On the real clock: take the one token, then wait for the next (about
-- 10 ms): admitted, whether after one attempt or two.  One history row
-- per call, and one decision each in rl_counters.
RESET ratelimit.now_override;
SELECT rl_zone_set('w_fast', 'token_bucket', 100, '1 second', burst => 1, history => true);
SELECT allowed FROM rl_limit('w_fast', 'f');
SELECT allowed FROM rl_wait('w_fast', 'f', 1, '10 seconds');
SELECT zone, key, cost, allowed FROM ratelimit.history WHERE zone = 'w_fast';
SELECT zone, allowed, refused FROM regress.counted('w_fast');
SET ratelimit.now_override = '2026-06-01 00:00:00+00';
-- rl_counters counts the calls of sections 1 to 5 once each (w_tb: 6
-- admitted, cost 0 among them, and 5 refused, the rl_limit among them;
-- errors count nothing; the shadow zone counts what the limit decided:
-- 1 admitted, 2 refused).
SELECT zone, allowed, refused FROM rl_counters
WHERE zone IN ('w_tb', 'w_gcra', 'w_fw', 'w_swc', 'w_sw', 'w_shadow', 'w_cron') ORDER BY zone;

-------------------------------------------------------------------------
-- 7. Read-only transactions: a table-store zone is refused (25006), as
-- rl_limit is, and takes nothing.
-------------------------------------------------------------------------
BEGIN READ ONLY;
SELECT regress.try($$SELECT rl_wait('w_tb', 'ro')$$);
COMMIT;
BEGIN READ ONLY;
SELECT * FROM regress.error($$SELECT rl_wait('w_tb', 'ro', 1, '0')$$);
COMMIT;
BEGIN READ ONLY;
SELECT regress.try($$SELECT rl_limit('w_tb', 'ro')$$);
COMMIT;
SELECT remaining FROM rl_peek('w_tb', 'ro', 0);

-------------------------------------------------------------------------
-- 8. Transactional on the table store, as rl_limit: a rolled-back rl_wait
-- gives its tokens back.
-------------------------------------------------------------------------
BEGIN;
SELECT allowed, remaining FROM rl_wait('w_tb', 'tx', 4);
ROLLBACK;
SELECT remaining FROM rl_peek('w_tb', 'tx', 0);

-------------------------------------------------------------------------
-- Clean up: the tests after this one list every zone.
-------------------------------------------------------------------------
SELECT count(rl_zone_drop(zone)) AS dropped FROM ratelimit.zone WHERE zone LIKE 'w\_%';
