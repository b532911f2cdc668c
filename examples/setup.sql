-- The zone and the role the example apps (examples/python, examples/node)
-- expect.  Run it as the extension's owner (e.g. a superuser) in the
-- database where CREATE EXTENSION ratelimit has run:
--   psql -f examples/setup.sql          (the database from PGDATABASE)
-- Running it again changes nothing.  It is all or nothing: the first error
-- stops it and rolls everything back.
-- test/examples/run.sh runs it too, and reads the zone back from rl_zones
-- to know what the apps must answer.
\set ON_ERROR_STOP on
BEGIN;

-- Zone 'example_api': a token bucket of 3 requests, refilled at 3 per
-- minute (one request every 20 s).  Small on purpose: a few requests reach
-- the 429.  A name of its own, apart from the README's and the demo's
-- zones.  rl_zone_set creates the zone, or leaves it as it is when it is
-- already this; its keys keep their state.
SELECT rl_zone_set('example_api', 'token_bucket', 3, '1 minute');

-- Role 'app': what the apps log in as.  Not a superuser; rl_grant gives it
-- the decision functions (rl_limit, ...) and nothing else.  No password:
-- set one (ALTER ROLE app PASSWORD '...', or psql's \password app) where
-- pg_hba.conf asks for it.
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'app') THEN
        CREATE ROLE app LOGIN;
    END IF;
END
$$;
SELECT rl_grant('app');

COMMIT;
