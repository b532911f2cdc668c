-- ratelimit 0.5.0 to 0.6.0: durable zones (state in a logged table that
-- survives a crash and a failover), and the shmem store saved periodically.
\echo Use "ALTER EXTENSION ratelimit UPDATE TO '0.6.0'" to load this file. \quit
