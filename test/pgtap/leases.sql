-- Leases and rl_wait (0.5.0).  A concurrency zone admits rate leases of a
-- key at once: rl_acquire(zone, key, ttl) takes a slot (lease NULL when
-- refused, retry_after until the first held lease lapses), rl_release
-- (lease) gives it back (false when lapsed, released already or its zone
-- gone), a lease lapses at expires_at on the decision clock, rl_leases
-- shows the leases held but never a lease text.  rl_wait is rl_limit that
-- waits; on the fixed test clock a refusal whose tokens come after the
-- deadline returns at once.  Bad input gets its SQLSTATE.  Privileges:
-- rl_acquire and rl_release come with rl_grant(role, 'limit'), rl_wait
-- with 'wait', rl_leases with 'monitor', nothing without a grant.  (Sessions racing
-- for slots and waiting on each other: test/isolation.)
-- Needs ratelimit in shared_preload_libraries for the shmem part (skipped
-- otherwise).  Must pass with ratelimit.table_access set to auto, direct or
-- spi.
BEGIN;
SET LOCAL timezone = 'UTC';
SET LOCAL intervalstyle = 'postgres';
SET LOCAL client_min_messages = warning;

SELECT plan(69);

SET LOCAL ratelimit.now_override = '2026-01-01 00:00:00+00';
SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_settings WHERE name = 'ratelimit.shmem_max_keys')
       AS shmem_preloaded \gset
-- at(seconds): moves the test clock to 2026-01-01 00:00:00 + seconds.
CREATE FUNCTION pg_temp.at(seconds numeric) RETURNS void LANGUAGE sql AS $$
    SELECT NULL::void FROM (SELECT set_config('ratelimit.now_override',
        ('2026-01-01 00:00:00+00'::timestamptz + make_interval(secs => seconds))::text, true)) s
$$;
CREATE FUNCTION pg_temp.free(zone text, key text) RETURNS bigint LANGUAGE sql AS $$
    SELECT remaining FROM rl_peek(zone, key, 0)
$$;

SELECT rl_zone_set('p_conc', 'concurrency', 2, '1 minute'),
       rl_zone_set('p_tb', 'token_bucket', 10, '1 minute'),
       rl_zone_set('p_hist', 'concurrency', 1, '1 minute', history => true) \gset

-------------------------------------------------------------------------
-- 1. Defining a concurrency zone.
-------------------------------------------------------------------------
SELECT throws_ok($$SELECT rl_zone_set('p_bad', 'concurrency', 2, '1 minute', burst => 2)$$, '22023', NULL,
                 'a concurrency zone takes no burst: 22023');
SELECT throws_ok($$SELECT rl_zone_set('p_bad', 'concurrency', 1.5, '1 minute')$$, '22023', NULL,
                 'a fractional number of slots: 22023');
SELECT throws_ok($$SELECT rl_zone_set('p_bad', 'concurrency', 10001, '1 minute')$$, '54000', NULL,
                 'more than 10,000 slots: 54000');
SELECT throws_ok($$SELECT rl_zone_set('p_bad', 'concurrency', 65, '1 minute', store => 'shmem')$$, '54000', NULL,
                 'more than 64 slots on the shmem store: 54000');
SELECT is((SELECT count(*) FROM ratelimit.zone WHERE zone = 'p_bad'), 0::bigint, 'the refused zones were not created');
SELECT is((SELECT capacity FROM rl_zones WHERE zone = 'p_conc'), 2::bigint, 'rl_zones: capacity is the slots');

-------------------------------------------------------------------------
-- 2. Acquire and release.
-------------------------------------------------------------------------
SELECT lease AS l1, slots AS l1_slots, remaining AS l1_left, expires_at AS l1_expires
FROM rl_acquire('p_conc', 'k') \gset
SELECT ok(:'l1' ~ '^[0-9]+:[0-9a-f]{16}:k$', 'a lease is "<zone id>:<16 hex digits>:<key>"');
SELECT is(:'l1_slots'::bigint, 2::bigint, 'slots: 2');
SELECT is(:'l1_left'::bigint, 1::bigint, 'one slot left');
SELECT is(:'l1_expires'::timestamptz, '2026-01-01 00:01:00+00'::timestamptz, 'expires after the zone''s period (NULL ttl)');
SELECT lease AS l2, expires_at AS l2_expires FROM rl_acquire('p_conc', 'k', '10 seconds') \gset
SELECT is(:'l2_expires'::timestamptz, '2026-01-01 00:00:10+00'::timestamptz, 'a ttl of its own');
SELECT isnt(:'l1'::text, :'l2'::text, 'two leases are two texts');
SELECT results_eq($$SELECT lease IS NULL, allowed, remaining, retry_after, expires_at IS NULL, would_allow
                    FROM rl_acquire('p_conc', 'k')$$,
                  $$VALUES (true, false, 0::bigint, interval '10 seconds', true, false)$$,
                  'every slot held: refused, no lease, retry when the 10 s lease lapses');
SELECT results_eq($$SELECT allowed, remaining, retry_after FROM rl_peek('p_conc', 'k')$$,
                  $$VALUES (false, 0::bigint, interval '10 seconds')$$,
                  'rl_peek shows no free slot and when one frees');
SELECT is(pg_temp.free('p_conc', 'other'), 2::bigint, 'another key has its own slots');
SELECT results_eq($$SELECT key, expires_at, holder_pid, store FROM rl_leases WHERE zone = 'p_conc' ORDER BY expires_at$$,
                  $$VALUES ('k'::text, '2026-01-01 00:00:10+00'::timestamptz, NULL::int, 'table'::text),
                           ('k', '2026-01-01 00:01:00+00', NULL, 'table')$$,
                  'rl_leases: the two leases held, table store, no holder session (also in the transaction that took them)');
SELECT is(rl_release(:'l2'), true, 'rl_release: true');
SELECT is(rl_release(:'l2'), false, 'rl_release again: false');
SELECT is(pg_temp.free('p_conc', 'k'), 1::bigint, 'the slot is free again');
SELECT is(rl_release(regexp_replace(:'l1', ':[0-9a-f]{16}:', ':0000000000000001:')), false,
          'a lease with a forged nonce releases nothing');
SELECT is(rl_release(regexp_replace(:'l1', ':([0-9a-f]{8})([0-9a-f]{8}):',
                                    ':' || lpad(to_hex(('x' || substr(:'l1', strpos(:'l1', ':') + 1, 8))::bit(32)::int # 1), 8, '0')
                                        || '\2:')),
          false, 'a nonce that differs only in its high 32 bits releases nothing');
SELECT is(pg_temp.free('p_conc', 'k'), 1::bigint, '... and the real one is still held');

-------------------------------------------------------------------------
-- 3. Lapse on the decision clock.
-------------------------------------------------------------------------
SELECT lease AS l3 FROM rl_acquire('p_conc', 'k', '5 seconds') \gset
SELECT pg_temp.at(4.999999);
SELECT is(pg_temp.free('p_conc', 'k'), 0::bigint, 'a microsecond before expires_at the lease is held');
SELECT pg_temp.at(5);
SELECT is(pg_temp.free('p_conc', 'k'), 1::bigint, 'at expires_at it has lapsed');
SELECT is((SELECT count(*) FROM rl_leases WHERE zone = 'p_conc' AND key = 'k'), 1::bigint,
          'rl_leases no longer shows it');
SELECT is(rl_release(:'l3'), false, 'releasing a lapsed lease: false');

-------------------------------------------------------------------------
-- 4. Errors.
-------------------------------------------------------------------------
SELECT throws_ok($$SELECT rl_acquire('p_conc', 'k', '0 seconds')$$, '22023', NULL, 'ttl 0: 22023');
SELECT throws_ok($$SELECT rl_acquire('p_conc', 'k', '-1 second')$$, '22023', NULL, 'a negative ttl: 22023');
-- A 'limit' role must not hold another's slot for a century: a lease lasts
-- at most its zone's period (1 minute here).
SELECT throws_ok($$SELECT rl_acquire('p_conc', 'k', '100 years')$$, '22023',
                 'ttl is longer than the period of zone "p_conc"', 'a ttl of 100 years on a 1-minute zone: 22023');
SELECT throws_ok($$SELECT rl_acquire('p_conc', 'k', '60.000001 seconds')$$, '22023', NULL,
                 'a ttl a microsecond over the period: 22023');
SELECT throws_ok($$SELECT rl_acquire(NULL, 'k')$$, '22004', 'zone must not be null', 'NULL zone: 22004');
SELECT throws_ok($$SELECT rl_acquire('p_conc', NULL)$$, '22004', 'key must not be null', 'NULL key: 22004');
SELECT throws_ok($$SELECT rl_acquire('p_nope', 'k')$$, '42704', NULL, 'unknown zone: 42704');
SELECT throws_ok($$SELECT rl_acquire('p_tb', 'k')$$, '42809', NULL, 'rl_acquire on a rate zone: 42809');
SELECT throws_ok($$SELECT rl_limit('p_conc', 'k')$$, '42809', NULL, 'rl_limit on a concurrency zone: 42809');
SELECT throws_ok($$SELECT rl_limit(ARRAY['p_tb', 'p_conc'], 'k')$$, '42809', NULL,
                 'rl_limit(zones[]) with a concurrency zone: 42809');
SELECT throws_ok($$SELECT rl_wait('p_conc', 'k', 1, '0')$$, '42809', NULL, 'rl_wait on a concurrency zone: 42809');
SELECT throws_ok($$SELECT rl_refund('p_conc', 'k')$$, '42809', NULL, 'rl_refund on a concurrency zone: 42809');
SELECT throws_ok($$SELECT rl_release('nonsense')$$, '22023', '"nonsense" is not a lease', 'a text that is not a lease: 22023');
SELECT throws_ok($$SELECT rl_release(NULL)$$, '22004', 'lease must not be null', 'NULL lease: 22004');
SELECT throws_ok($$SELECT rl_wait('p_tb', 'k', 1, '-1 second')$$, '22023', 'timeout must not be negative',
                 'rl_wait: a negative timeout: 22023');
SELECT throws_ok($$SELECT rl_wait('p_tb', 'k', 11)$$, '22023', NULL, 'rl_wait: a cost above the capacity: 22023');
SELECT throws_ok($$SELECT rl_wait('p_tb', 'k', NULL)$$, '22004', 'cost must not be null', 'rl_wait: NULL cost: 22004');
SELECT is(pg_temp.free('p_tb', 'k'), 10::bigint, 'the refused calls took nothing');

-------------------------------------------------------------------------
-- 5. Transactions, history.
-------------------------------------------------------------------------
SAVEPOINT before_acquire;
SELECT lease AS rolled_back FROM rl_acquire('p_conc', 'tx') \gset
ROLLBACK TO SAVEPOINT before_acquire;
SELECT is(pg_temp.free('p_conc', 'tx'), 2::bigint, 'a rolled-back rl_acquire holds nothing (table store)');
SELECT is(rl_release(:'rolled_back'), false, 'and its lease releases nothing');
SELECT lease AS h1 FROM rl_acquire('p_hist', 'h') \gset
SELECT is((rl_acquire('p_hist', 'h')).allowed, false, 'p_hist: its one slot is held');
SELECT is(rl_release(:'h1'), true, 'p_hist: released');
SELECT results_eq($$SELECT cost, allowed FROM ratelimit.history WHERE zone = 'p_hist' ORDER BY cost DESC, allowed DESC$$,
                  $$VALUES (1, true), (1, false), (-1, true)$$,
                  'history: each acquire with cost 1, the release with cost -1');

-------------------------------------------------------------------------
-- 6. rl_wait on the test clock.
-------------------------------------------------------------------------
SELECT results_eq($$SELECT allowed, remaining FROM rl_wait('p_tb', 'w', 10)$$, $$VALUES (true, 0::bigint)$$,
                  'rl_wait: admitted at once');
SELECT clock_timestamp() AS t0 \gset
SELECT results_eq($$SELECT allowed, retry_after FROM rl_wait('p_tb', 'w', 1, '5 seconds')$$,
                  $$VALUES (false, interval '6 seconds')$$,
                  'rl_wait: a token due in 6 s, a timeout of 5 s: refused with retry_after');
SELECT ok(clock_timestamp() - :'t0'::timestamptz < interval '1 second', '... at once');
SELECT results_eq($$SELECT allowed, retry_after FROM rl_wait('p_tb', 'w', 1, '0')$$,
                  $$VALUES (false, interval '6 seconds')$$, 'rl_wait, timeout 0: one attempt');

-------------------------------------------------------------------------
-- 7. Privileges.
-------------------------------------------------------------------------
CREATE ROLE rl_lease_user NOLOGIN;
SELECT lease AS owners FROM rl_acquire('p_conc', 'priv') \gset
SET ROLE rl_lease_user;
SELECT throws_ok($$SELECT rl_acquire('p_conc', 'u')$$, '42501', NULL, 'ungranted: rl_acquire is refused');
SELECT throws_ok(format('SELECT rl_release(%L)', :'owners'), '42501', NULL, 'ungranted: rl_release is refused');
SELECT throws_ok($$SELECT rl_wait('p_tb', 'u', 1, '0')$$, '42501', NULL, 'ungranted: rl_wait is refused');
SELECT throws_ok($$SELECT * FROM rl_leases$$, '42501', NULL, 'ungranted: rl_leases is refused');
RESET ROLE;
SELECT rl_grant('rl_lease_user', 'limit') \gset
SET ROLE rl_lease_user;
SELECT lease AS users FROM rl_acquire('p_conc', 'u') \gset
SELECT ok(:'users' IS NOT NULL, 'granted ''limit'': rl_acquire works');
SELECT is(rl_release(:'users'), true, 'granted ''limit'': rl_release works');
SELECT throws_ok($$SELECT rl_wait('p_tb', 'u', 1, '0')$$, '42501', NULL,
                 '''limit'' does not give rl_wait (a set of its own: ''wait'')');
SELECT throws_ok($$SELECT * FROM rl_leases$$, '42501', NULL, '''limit'' does not open rl_leases');
RESET ROLE;
SELECT rl_grant('rl_lease_user', 'wait') \gset
SET ROLE rl_lease_user;
SELECT is((rl_wait('p_tb', 'u', 1, '0')).allowed, true, 'granted ''wait'': rl_wait works');
RESET ROLE;
SELECT rl_grant('rl_lease_user', 'monitor') \gset
SET ROLE rl_lease_user;
SELECT is((SELECT count(*) FROM rl_leases WHERE zone = 'p_conc' AND key = 'priv'), 1::bigint,
          'granted ''monitor'': the role reads rl_leases');
SELECT is((SELECT count(*) FROM rl_leases l WHERE strpos(l::text, split_part(:'owners', ':', 2)) > 0), 0::bigint,
          'no row of rl_leases holds a lease''s nonce');
SELECT throws_ok($$SELECT * FROM ratelimit.lease_list()$$, '42501', NULL,
                 'nor may the role call the function behind the view');
RESET ROLE;
SELECT is(rl_release(:'owners'), true, 'the owner''s lease was untouched');

-------------------------------------------------------------------------
-- 8. The shmem store: a lease belongs to the session that took it, and a
-- rolled-back acquire keeps it.
-------------------------------------------------------------------------
\if :shmem_preloaded
SELECT rl_zone_set('p_shm', 'concurrency', 2, '1 minute', store => 'shmem') \gset
SAVEPOINT before_shmem;
SELECT lease AS s1 FROM rl_acquire('p_shm', 'k') \gset
ROLLBACK TO SAVEPOINT before_shmem;
SELECT results_eq($$SELECT holder_pid = pg_backend_pid(), store FROM rl_leases WHERE zone = 'p_shm'$$,
                  $$VALUES (true, 'shmem'::text)$$,
                  'shmem: a rolled-back acquire keeps its lease, held by this session');
SELECT is(rl_release(:'s1'), true, 'shmem: released');
SELECT is(pg_temp.free('p_shm', 'k'), 2::bigint, 'shmem: every slot free');
\else
SELECT skip('ratelimit is not in shared_preload_libraries: no shmem store', 3);
\endif

SELECT * FROM finish();
ROLLBACK;
