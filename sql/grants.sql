-- Least privilege, as a user meets it: PUBLIC executes no rate-limit
-- function and reads no view of the extension; rl_grant gives a role the
-- decision functions ('limit') or the monitoring views ('monitor'), and a
-- refusal's hint names it.  The hint comes from the library: loaded here,
-- as shared_preload_libraries would have it.
LOAD 'ratelimit';
\set SHOW_CONTEXT never
SET ratelimit.now_override = '2026-02-01 00:00:00+00';
CREATE ROLE rl_regress_app NOLOGIN;
CREATE ROLE rl_regress_watch NOLOGIN;
SELECT rl_zone_set('grants', 'token_bucket', 2, '1 minute');

-- Not granted: refused, with a hint.
SET ROLE rl_regress_app;
SELECT rl_limit('grants', 'user:1');
SELECT rl_token_bucket('user:1');
SELECT zone FROM rl_zones;
-- The pure functions stay public.
SELECT rl_headers(ROW(false, 2, 0, '30 s', '1 min', NULL, false)::rl_result);
SELECT rl_client_address('10.0.0.1, 203.0.113.9', NULL);
RESET ROLE;

-- Granted the decision functions: it decides, and manages nothing.
SELECT rl_grant('rl_regress_app');
SET ROLE rl_regress_app;
SELECT allowed, remaining FROM rl_limit('grants', 'user:1');
SELECT rl_token_bucket('user:1', 1, 10);
SELECT rl_reset('grants', 'user:1');
SELECT rl_zone_set('grants', 'token_bucket', 1000, '1 second');
SELECT zone FROM rl_zones;
RESET ROLE;

-- Granted the monitoring views: it reads them, and decides nothing.
SELECT rl_grant('rl_regress_watch', 'monitor');
SET ROLE rl_regress_watch;
SELECT zone, rate, period FROM rl_zones WHERE zone = 'grants';
SELECT zone, allowed, refused FROM rl_counters WHERE zone = 'grants';
SELECT zone, key, remaining FROM rl_keys WHERE zone = 'grants';
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

SELECT rl_zone_drop('grants');
DROP OWNED BY rl_regress_app, rl_regress_watch;
DROP ROLE rl_regress_app, rl_regress_watch;
