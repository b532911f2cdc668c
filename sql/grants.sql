-- Least privilege, as a user meets it: PUBLIC executes no rate-limit
-- function and reads no view of the extension; rl_grant gives a role the
-- decision functions ('limit'), rl_refund ('refund') or the monitoring
-- views ('monitor'), and a refusal's hint names it (the grant that would
-- let the call through).  The hint comes from the library: loaded here, as
-- shared_preload_libraries would have it.
LOAD 'ratelimit';
\set SHOW_CONTEXT never
SET ratelimit.now_override = '2026-02-01 00:00:00+00';
CREATE ROLE rl_regress_app NOLOGIN;
CREATE ROLE rl_regress_watch NOLOGIN;
SELECT rl_zone_set('grants', 'token_bucket', 2, '1 minute');
SELECT rl_zone_set('grants_guard', 'token_bucket', 2, '1 minute', store => 'shmem');

-- Not granted: refused, with a hint.
SET ROLE rl_regress_app;
SELECT rl_limit('grants', 'user:1');
SELECT rl_token_bucket('user:1');
SELECT rl_limit(ARRAY['grants'], 'user:1');
SELECT rl_refund('grants', 'user:1');
SELECT zone FROM rl_zones;
-- The pure functions stay public: a role without any grant (nor USAGE on
-- the schema ratelimit) gets the headers of a result.
SELECT rl_headers(ROW(false, 2, 0, '30 s', '1 min', NULL, false, 'grants', 2, '1 min')::rl_result);
SELECT rl_client_address('10.0.0.1, 203.0.113.9', NULL);
RESET ROLE;

-- Granted the decision functions: it decides, and manages nothing.
SELECT rl_grant('rl_regress_app');
SET ROLE rl_regress_app;
SELECT allowed, remaining FROM rl_limit('grants', 'user:1');
SELECT allowed, remaining, zone FROM rl_limit(ARRAY['grants'], 'user:1');
-- The guard, as PostgREST runs it (as the request's role): decided, and
-- the RateLimit headers in response.headers (1 left of 2, full in 30 s);
-- then rl_headers of the next call (0 left, 60 s).
BEGIN;
SELECT rl_http_guard('grants_guard', 'user:guard');
SELECT current_setting('response.headers', true) AS response_headers;
COMMIT;
SELECT rl_headers(r) FROM rl_limit('grants_guard', 'user:guard') r;
SELECT rl_token_bucket('user:1', 1, 10);
-- rl_refund is not a decision function: a role that may refund its own
-- key is not limited at all.
SELECT rl_refund('grants', 'user:1');
SELECT rl_reset('grants', 'user:1');
SELECT rl_zone_set('grants', 'token_bucket', 1000, '1 second');
SELECT zone FROM rl_zones;
RESET ROLE;

-- Granted 'refund' as well: it gives back what it was charged (the key
-- had 0 left: 1 after).  rl_revoke takes 'refund' back alone.
SELECT rl_grant('rl_regress_app', 'refund');
SET ROLE rl_regress_app;
SELECT allowed, remaining FROM rl_refund('grants', 'user:1');
RESET ROLE;
SELECT rl_revoke('rl_regress_app', 'refund');
SET ROLE rl_regress_app;
SELECT rl_refund('grants', 'user:1');
SELECT allowed, remaining FROM rl_limit('grants', 'user:1');
RESET ROLE;
-- 'refund' alone: rl_refund, and no decision function.
SELECT rl_grant('rl_regress_watch', 'refund');
SET ROLE rl_regress_watch;
SELECT allowed, remaining FROM rl_refund('grants', 'user:1');
SELECT rl_limit('grants', 'user:1');
RESET ROLE;
SELECT rl_revoke('rl_regress_watch', 'refund');

-- Granted the monitoring views: it reads them, and decides nothing.
SELECT rl_grant('rl_regress_watch', 'monitor');
SET ROLE rl_regress_watch;
SELECT zone, rate, period FROM rl_zones WHERE zone = 'grants';
SELECT zone, allowed, refused FROM rl_counters WHERE zone = 'grants';
SELECT zone, key, remaining FROM rl_keys WHERE zone = 'grants' ORDER BY key;
SELECT rl_limit('grants', 'user:1');
RESET ROLE;

-- Taken back.
SELECT rl_revoke('rl_regress_app');
SET ROLE rl_regress_app;
SELECT rl_limit('grants', 'user:1');
-- Nor may it grant itself.
SELECT rl_grant('rl_regress_app');
RESET ROLE;

-- Bad arguments.
SELECT rl_grant('rl_regress_app', 'everything');
SELECT rl_grant('no_such_role');
SELECT rl_grant(NULL);

-- A table-store zone in a read-only transaction (PostgREST's GET).
BEGIN READ ONLY;
SELECT rl_limit('grants', 'user:2');
ROLLBACK;

SELECT rl_zone_drop('grants'), rl_zone_drop('grants_guard');
DROP OWNED BY rl_regress_app, rl_regress_watch;
DROP ROLE rl_regress_app, rl_regress_watch;
