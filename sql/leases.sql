-- Leases on the table store (shmem.sql does the shmem store): a
-- concurrency zone (algorithm 'concurrency') admits rate leases of a key at
-- once, period is a lease's default time to live.  rl_acquire(zone, key,
-- ttl) takes a slot and returns an rl_lease (lease NULL when refused, with
-- retry_after until the first held lease lapses); rl_release(lease) gives
-- it back (false when it had lapsed, was released already, or its zone is
-- gone).  A lease lapses at expires_at on the decision clock.  The lease
-- text embeds a random nonce: this file never prints one (it checks its
-- form, and passes it back through \gset).  On a fixed test clock.
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
SET ratelimit.now_override = '2026-06-01 00:00:00+00';
CREATE FUNCTION pg_temp.zone_id(zone text) RETURNS int LANGUAGE sql AS $$
    SELECT zone_id FROM ratelimit.zone z WHERE z.zone = $1
$$;
-- Whether a text is a lease of that zone and key: "<zone id>:<16 hex>:<key>".
CREATE FUNCTION pg_temp.is_lease(lease text, zone text, key text) RETURNS boolean LANGUAGE sql AS $$
    SELECT $1 ~ ('^' || pg_temp.zone_id($2) || ':[0-9a-f]{16}:') AND
           substr($1, length(pg_temp.zone_id($2)::text) + 19) = $3
$$;

-------------------------------------------------------------------------
-- 1. Defining a concurrency zone: rate is the number of slots (whole, at
-- most 10,000), period the default ttl, no burst.
-------------------------------------------------------------------------
SELECT rl_zone_set('l_c', 'concurrency', 2, '1 minute');
SELECT zone, algorithm, rate, period, burst, capacity, store FROM rl_zones WHERE zone = 'l_c';
SELECT * FROM regress.error($$SELECT rl_zone_set('l_bad', 'concurrency', 2, '1 minute', burst => 3)$$);
SELECT * FROM regress.error($$SELECT rl_zone_set('l_bad', 'concurrency', 2.5, '1 minute')$$);
SELECT * FROM regress.error($$SELECT rl_zone_set('l_bad', 'concurrency', 10001, '1 minute')$$);
SELECT rl_zone_set('l_max', 'concurrency', 10000, '1 minute');
SELECT count(*) AS bad_zones FROM ratelimit.zone WHERE zone = 'l_bad';

-------------------------------------------------------------------------
-- 2. Acquire: two slots, the third refused until the first lease lapses.
-------------------------------------------------------------------------
SELECT pg_temp.is_lease(lease, 'l_c', 'k') AS is_lease, allowed, slots, remaining, retry_after, expires_at,
       txn_id, would_allow, zone
FROM rl_acquire('l_c', 'k');
-- A ttl of its own: 10 s (the first lapses in 60 s).
SELECT lease AS lease2, expires_at AS expires2 FROM rl_acquire('l_c', 'k', '10 seconds') \gset
SELECT pg_temp.is_lease(:'lease2', 'l_c', 'k') AS is_lease, :'expires2' AS expires_at;
-- Every slot is held: refused, no lease, retry when the 10 s lease lapses.
SELECT lease IS NULL AS no_lease, allowed, slots, remaining, retry_after, expires_at, txn_id, would_allow, zone
FROM rl_acquire('l_c', 'k');
-- Another key has its own slots.
SELECT lease IS NOT NULL AS got_lease, allowed, remaining FROM rl_acquire('l_c', 'other');
-- rl_peek shows the free slots (and, with none, when one frees); it takes
-- nothing.
SELECT allowed, capacity, remaining, retry_after FROM rl_peek('l_c', 'k');
SELECT allowed, capacity, remaining, retry_after FROM rl_peek('l_c', 'other');
SELECT allowed, capacity, remaining, retry_after FROM rl_peek('l_c', 'nobody');
-- rl_leases: one row per lease held, never its text.
SELECT * FROM rl_leases WHERE zone = 'l_c';
SELECT count(*) AS columns_with_the_nonce
FROM information_schema.columns WHERE table_name = 'rl_leases' AND column_name = 'lease';
SELECT array_agg(attname ORDER BY attnum) AS rl_leases_columns
FROM pg_attribute WHERE attrelid = 'rl_leases'::regclass AND attnum > 0;

-------------------------------------------------------------------------
-- 3. Release: true once, then false; the slot is free again.
-------------------------------------------------------------------------
SELECT rl_release(:'lease2') AS released;
SELECT rl_release(:'lease2') AS released_again;
SELECT remaining FROM rl_peek('l_c', 'k', 0);
SELECT count(*) AS leases_of_k FROM rl_leases WHERE zone = 'l_c' AND key = 'k';
-- A lease with another nonce, or of another key, releases nothing.
SELECT lease AS lease3 FROM rl_acquire('l_c', 'k') \gset
-- A nonce that differs only in its high 32 bits is another nonce.
SELECT rl_release(regexp_replace(:'lease3', ':[0-9a-f]{8}([0-9a-f]{8}):',
                                 ':' || CASE WHEN substr(:'lease3', strpos(:'lease3', ':') + 1, 1) = '0' THEN '1' ELSE '0' END
                                     || '0000000\1:')) AS forged_high_bits;
SELECT rl_release(regexp_replace(:'lease3', ':[0-9a-f]{16}:', ':0123456789abcdef:')) AS forged_nonce,
       rl_release(regexp_replace(:'lease3', ':k$', ':other')) AS other_key,
       rl_release(pg_temp.zone_id('l_max') || substr(:'lease3', length(pg_temp.zone_id('l_c')::text) + 1))
           AS other_zone;
SELECT count(*) AS leases_of_k FROM rl_leases WHERE zone = 'l_c' AND key = 'k';
-- Errors: not a lease (22023), NULL (22004).
SELECT * FROM regress.error($$SELECT rl_release('not a lease')$$);
SELECT q, regress.try(q) FROM (VALUES
    ($$SELECT rl_release(NULL)$$),
    ($$SELECT rl_release('')$$),
    ($$SELECT rl_release('1:0123:k')$$),
    ($$SELECT rl_release('x:0123456789abcdef:k')$$),
    ($$SELECT rl_release('0:0123456789abcdef:k')$$),
    ($$SELECT rl_release('1:0123456789abcdefk')$$)) v(q);
-- A well-formed lease of a zone that does not exist: false.
SELECT rl_release('999999:0123456789abcdef:k') AS unknown_zone;

-------------------------------------------------------------------------
-- 4. A lease lapses at expires_at on the decision clock: its slot is free
-- again, rl_leases no longer shows it, and releasing it says false.
-------------------------------------------------------------------------
SET ratelimit.now_override = '2026-06-01 00:03:00+00';
SELECT lease AS short FROM rl_acquire('l_c', 'lapse', '5 seconds') \gset
SELECT lease AS long FROM rl_acquire('l_c', 'lapse', '1 minute') \gset
SELECT allowed, remaining, retry_after FROM rl_acquire('l_c', 'lapse');
-- A microsecond before: still held.
SET ratelimit.now_override = '2026-06-01 00:03:04.999999+00';
SELECT allowed, remaining, retry_after FROM rl_peek('l_c', 'lapse');
SELECT key, expires_at FROM rl_leases WHERE zone = 'l_c' AND key = 'lapse';
-- At expires_at: lapsed.
SET ratelimit.now_override = '2026-06-01 00:03:05+00';
SELECT allowed, remaining FROM rl_peek('l_c', 'lapse');
SELECT key, expires_at FROM rl_leases WHERE zone = 'l_c' AND key = 'lapse';
SELECT rl_release(:'short') AS released_lapsed;
SELECT lease IS NOT NULL AS got_lease, remaining, expires_at FROM rl_acquire('l_c', 'lapse');
SELECT rl_release(:'long') AS released_long;

-------------------------------------------------------------------------
-- 5. Errors of rl_acquire: a ttl not above 0 or above the zone's period
-- (22023: a lease lasts at most that), NULL zone or key (22004), an empty
-- key (22023), an unknown zone (42704), a zone of requests per period
-- (42809); and the calls of such zones refuse a concurrency zone (42809).
-- Nothing is taken.
-------------------------------------------------------------------------
SET ratelimit.now_override = '2026-06-01 00:10:00+00';
SELECT rl_zone_set('l_tb', 'token_bucket', 10, '1 minute');
SELECT * FROM regress.error($$SELECT rl_acquire('l_c', 'e', '0 seconds')$$);
SELECT * FROM regress.error($$SELECT rl_acquire('l_c', 'e', '100 years')$$);
SELECT regress.try($$SELECT rl_acquire('l_c', 'e', '1 minute 0.000001 seconds')$$) AS a_microsecond_over;
SELECT * FROM regress.error($$SELECT rl_acquire('l_tb', 'e')$$);
SELECT * FROM regress.error($$SELECT rl_limit('l_c', 'e')$$);
SELECT q, regress.try(q) FROM (VALUES
    ($$SELECT rl_acquire('l_c', 'e', '-1 second')$$),
    ($$SELECT rl_acquire(NULL, 'e')$$),
    ($$SELECT rl_acquire('l_c', NULL)$$),
    ($$SELECT rl_acquire('l_c', '')$$),
    ($$SELECT rl_acquire('l_nope', 'e')$$),
    ($$SELECT rl_acquire('l_tb', 'e', '1 minute')$$),
    ($$SELECT rl_limit('l_c', 'e')$$),
    ($$SELECT rl_limit('l_c', 'e', 0)$$),
    ($$SELECT rl_wait('l_c', 'e')$$),
    ($$SELECT rl_wait('l_c', 'e', 1, '0')$$),
    ($$SELECT rl_refund('l_c', 'e')$$),
    ($$SELECT rl_limit(ARRAY['l_tb', 'l_c'], 'e')$$),
    ($$SELECT rl_limit(ARRAY['l_c'], 'e')$$)) v(q);
SELECT count(*) AS leases_of_e FROM rl_leases WHERE key = 'e';
SELECT remaining FROM rl_peek('l_tb', 'e', 0);
-- A NULL ttl is the zone's period, and so is the longest ttl.
SELECT expires_at FROM rl_acquire('l_c', 'e', NULL);
SELECT expires_at FROM rl_acquire('l_c', 'e2', '1 minute');

-------------------------------------------------------------------------
-- 6. Transactional: a rolled-back rl_acquire holds nothing, a rolled-back
-- rl_release gives nothing back.
-------------------------------------------------------------------------
SET ratelimit.now_override = '2026-06-01 00:20:00+00';
BEGIN;
SELECT lease AS rolled_back FROM rl_acquire('l_c', 'tx') \gset
SELECT remaining FROM rl_peek('l_c', 'tx', 0);
ROLLBACK;
SELECT remaining FROM rl_peek('l_c', 'tx', 0);
SELECT count(*) AS leases_of_tx FROM rl_leases WHERE key = 'tx';
SELECT rl_release(:'rolled_back') AS released_rolled_back;
SELECT lease AS held FROM rl_acquire('l_c', 'tx') \gset
BEGIN;
SELECT rl_release(:'held') AS released;
ROLLBACK;
SELECT count(*) AS leases_of_tx FROM rl_leases WHERE key = 'tx';
SELECT rl_release(:'held') AS released;
-- Read-only: the table store is refused (25006), taking nothing.
BEGIN READ ONLY;
SELECT regress.try($$SELECT rl_acquire('l_c', 'ro')$$);
COMMIT;
SELECT lease AS ro_lease FROM rl_acquire('l_c', 'ro') \gset
BEGIN READ ONLY;
SELECT regress.try(format('SELECT rl_release(%L)', :'ro_lease'));
COMMIT;
SELECT count(*) AS leases_of_ro FROM rl_leases WHERE key = 'ro';

-------------------------------------------------------------------------
-- 7. History: an acquire is recorded with cost 1 (allowed or not), a
-- release with cost -1; a release that found nothing is not recorded.
-- The history's sum is the slots held.  rl_counters counts the acquires.
-------------------------------------------------------------------------
SET ratelimit.now_override = '2026-06-01 00:30:00+00';
TRUNCATE ratelimit.history;
SELECT rl_zone_set('l_hist', 'concurrency', 1, '1 minute', history => true);
BEGIN;
SELECT lease AS h1, txn_id = txid_current() AS is_txid_current FROM rl_acquire('l_hist', 'h') \gset
SELECT :'is_txid_current' AS is_txid_current;
SELECT allowed, txn_id = txid_current() AS is_txid_current FROM rl_acquire('l_hist', 'h');
COMMIT;
SELECT rl_release(:'h1') AS released, rl_release(:'h1') AS released_again;
SELECT lease IS NOT NULL AS got_lease FROM rl_acquire('l_hist', 'h');
SELECT zone, key, cost, allowed FROM ratelimit.history WHERE zone = 'l_hist' ORDER BY recorded_at, cost DESC, allowed DESC;
SELECT sum(cost) FILTER (WHERE allowed) AS held FROM ratelimit.history WHERE zone = 'l_hist';
SELECT zone, allowed, refused FROM regress.counted('l_hist');

-------------------------------------------------------------------------
-- 8. rl_reset forgets a key's leases: every slot free, the old leases
-- release nothing.
-------------------------------------------------------------------------
SET ratelimit.now_override = '2026-06-01 00:40:00+00';
SELECT lease AS r1 FROM rl_acquire('l_c', 'reset') \gset
SELECT lease AS r2 FROM rl_acquire('l_c', 'reset') \gset
SELECT allowed, remaining FROM rl_peek('l_c', 'reset', 0);
SELECT rl_reset('l_c', 'reset') AS had_state;
SELECT allowed, remaining FROM rl_peek('l_c', 'reset', 0);
SELECT count(*) AS leases_of_reset FROM rl_leases WHERE key = 'reset';
SELECT rl_release(:'r1') AS released_r1, rl_release(:'r2') AS released_r2;
SELECT rl_reset('l_c', 'reset') AS had_state_again;

-------------------------------------------------------------------------
-- 9. rl_gc keeps a key while any of its leases is held, and removes it
-- once all have lapsed.
-------------------------------------------------------------------------
SET ratelimit.now_override = '2026-06-01 01:00:00+00';
SELECT rl_zone_set('l_gc', 'concurrency', 3, '1 minute');
SELECT count(*) FROM (SELECT rl_acquire('l_gc', 'g', ttl) FROM unnest(ARRAY[interval '10 seconds', '20 seconds']) ttl) a;
CREATE FUNCTION pg_temp.gc_rows() RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FROM ratelimit.state WHERE zone_id = pg_temp.zone_id('l_gc')
$$;
SELECT rl_gc('l_gc') AS removed, pg_temp.gc_rows() AS rows_left;
SET ratelimit.now_override = '2026-06-01 01:00:15+00';
SELECT rl_gc('l_gc') AS removed, pg_temp.gc_rows() AS rows_left;
SELECT allowed, remaining FROM rl_peek('l_gc', 'g', 0);
SET ratelimit.now_override = '2026-06-01 01:00:20+00';
SELECT rl_gc('l_gc') AS removed, pg_temp.gc_rows() AS rows_left;
SELECT allowed, remaining FROM rl_peek('l_gc', 'g', 0);

-------------------------------------------------------------------------
-- 10. A dropped zone takes its leases with it: releasing one says false,
-- also when a new zone of the same name exists.
-------------------------------------------------------------------------
SELECT lease AS dropped FROM rl_acquire('l_gc', 'd') \gset
SELECT rl_zone_drop('l_gc');
SELECT rl_release(:'dropped') AS released_dropped;
SELECT rl_zone_set('l_gc', 'concurrency', 3, '1 minute');
SELECT rl_release(:'dropped') AS released_dropped_recreated;
SELECT count(*) AS leases_of_d FROM rl_leases WHERE key = 'd';

-------------------------------------------------------------------------
-- Clean up: the tests after this one list every zone.
-------------------------------------------------------------------------
SELECT count(rl_zone_drop(zone)) AS dropped FROM ratelimit.zone WHERE zone LIKE 'l\_%';
