-- The pg_cron refill mode: every bad input of rl_zone_set's refill,
-- rl_cron_refill, rl_cron_enable and rl_cron_disable gets its SQLSTATE
-- (and, where it matters, its hint) and changes nothing: no zone, no state,
-- no tick, no grant.  An ordinary role can neither run the refill nor
-- manage jobs nor write the state; it decides once granted (rl_grant).  The
-- run_as role, granted what rl_cron_enable grants (EXECUTE on
-- rl_cron_refill, SECURITY DEFINER), refills at most once a tick and can do
-- nothing else.
--
-- Runs in a database with pgTAP and ratelimit but without pg_cron, on a
-- server that preloads pg_cron with cron.database_name = 'postgres' (as
-- scripts/lib.sh sets it up): rl_cron_enable then always stops at "another
-- database", and so does rl_zone_set when a zone is made cron (its setup
-- check; the other two pg_cron problems, not loaded and not installed,
-- need clusters of their own: test/zones/setup_errors.sh).  Cron zones
-- are therefore written directly into ratelimit.zone here, as a superuser
-- (the zone table is the configuration, as a restored dump fills it).
-- test/cron/cron.sh runs the real pg_cron.  The job's effect,
-- refill_tick, is set directly where a test needs an enabled job.  Job
-- removal is test/cron/cron.sh's (a real pg_cron); here a look-alike
-- schema cron, created in this (rolled back) transaction, must be ignored.
-- Must pass with ratelimit.table_access set to auto, direct or spi.
BEGIN;
SET LOCAL timezone = 'UTC';
SET LOCAL datestyle = 'ISO, YMD';
SET LOCAL intervalstyle = 'postgres';
SET LOCAL client_min_messages = warning;

SELECT plan(142);

SET LOCAL ratelimit.now_override = '2026-01-01 00:00:00+00';

-- SQLSTATE, message and hint of a statement ('ok' when it raises nothing).
CREATE FUNCTION pg_temp.error_of(statement text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    state text;
    message text;
    hint text;
BEGIN
    EXECUTE statement;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, message = MESSAGE_TEXT,
                            hint = PG_EXCEPTION_HINT;
    RETURN state || ': ' || message || coalesce(' | ' || nullif(hint, ''), '');
END $$;
-- The value of a one-value statement as text, or its SQLSTATE and message:
-- a refused call is a failed assertion, not the end of the file.
CREATE FUNCTION pg_temp.result_of(statement text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    result text;
BEGIN
    EXECUTE statement INTO result;
    RETURN result;
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END $$;

-------------------------------------------------------------------------
-- The environment this file is written for.
-------------------------------------------------------------------------
SELECT ok('pg_cron' = ANY (string_to_array(replace(current_setting('shared_preload_libraries'), ' ', ''), ',')),
          'pg_cron is preloaded');
SELECT is(current_setting('cron.database_name', true), 'postgres', 'cron.database_name is postgres');
SELECT isnt(current_database(), 'postgres', 'this is another database');
SELECT is_empty($$SELECT 1 FROM pg_extension WHERE extname = 'pg_cron'$$,
                'pg_cron is not installed in this database');
SELECT ok(to_regclass('cron.job') IS NULL, 'there is no cron.job here');

-------------------------------------------------------------------------
-- Fixtures: a cron zone with one key (4 taken: 6 left), an inline token
-- bucket, a fixed window; a role to run the job as, an ordinary role.
-------------------------------------------------------------------------
-- rl_zone_set refuses a cron zone that no job could refill (section 1):
-- the cron zone is written directly, as a restored dump would.
INSERT INTO ratelimit.zone (zone, algorithm, rate, period, burst, refill)
VALUES ('pc_cron', 'token_bucket', 10, '1 minute', NULL, 'cron');
SELECT rl_zone_set('pc_inline', 'token_bucket', 10, '1 minute');
SELECT rl_zone_set('pc_win', 'fixed_window', 10, '1 minute');
SELECT remaining AS pc_first FROM rl_limit('pc_cron', 'k', 4) \gset
SELECT remaining AS pc_inline_first FROM rl_limit('pc_inline', 'k', 4) \gset
SELECT is(:pc_first::bigint, 6::bigint, 'a new key of a cron zone is full: 4 taken, 6 left');
SELECT results_eq($$SELECT tokens, counter, refill_pending FROM ratelimit.state
                    WHERE key = 'k' AND zone_id = (SELECT zone_id FROM ratelimit.zone WHERE zone = 'pc_cron')$$,
                  $$VALUES (6::bigint, 0::bigint, true)$$,
                  'its row: 6 tokens, no part, refill_pending');
CREATE ROLE rl_pgtap_cron_run LOGIN;
CREATE ROLE rl_pgtap_cron_user NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE;

-- The zones and the state as they are now; pg_temp.unchanged() compares.
CREATE TEMP TABLE zones_before AS SELECT * FROM ratelimit.zone;
CREATE TEMP TABLE state_before AS SELECT * FROM ratelimit.state;
CREATE FUNCTION pg_temp.unchanged() RETURNS boolean LANGUAGE sql AS $$
    SELECT NOT EXISTS (SELECT * FROM ratelimit.zone EXCEPT SELECT * FROM zones_before)
       AND NOT EXISTS (SELECT * FROM zones_before EXCEPT SELECT * FROM ratelimit.zone)
       AND NOT EXISTS (SELECT * FROM ratelimit.state EXCEPT SELECT * FROM state_before)
       AND NOT EXISTS (SELECT * FROM state_before EXCEPT SELECT * FROM ratelimit.state)
$$;
CREATE FUNCTION pg_temp.snapshot() RETURNS void LANGUAGE sql AS $$
    DELETE FROM zones_before; INSERT INTO zones_before SELECT * FROM ratelimit.zone;
    DELETE FROM state_before; INSERT INTO state_before SELECT * FROM ratelimit.state;
$$;
-- What a role holds on the state, the zones and the refill's functions
-- (rl_cron_enable grants its run_as role the fifth alone).
CREATE FUNCTION pg_temp.granted(role name) RETURNS text LANGUAGE sql AS $$
    SELECT concat_ws(',', has_schema_privilege(role, 'ratelimit', 'USAGE'),
                     has_table_privilege(role, 'ratelimit.zone', 'SELECT'),
                     has_any_column_privilege(role, 'ratelimit.state', 'SELECT'),
                     has_any_column_privilege(role, 'ratelimit.state', 'UPDATE'),
                     has_function_privilege(role, 'rl_cron_refill(text)', 'EXECUTE'),
                     has_function_privilege(role, 'ratelimit.flush_zone_state(int)', 'EXECUTE'),
                     has_function_privilege(role, 'ratelimit.period_micros(interval)', 'EXECUTE'))
$$;
SELECT is(pg_temp.granted('rl_pgtap_cron_run'), 'f,f,f,f,f,f,f',
          'the run_as role holds nothing yet');

-------------------------------------------------------------------------
-- 1. rl_zone_set's refill: unknown 22023, another algorithm or store or a
-- fractional rate 0A000, and a zone made cron where no job could refill
-- it 55000 (what rl_cron_enable would say).  No zone is created, an
-- existing one is not changed.
-------------------------------------------------------------------------
SELECT throws_ok($$SELECT rl_zone_set('pc_new', 'token_bucket', 10, '1 minute', refill => 'cron')$$,
                 '55000', format('pg_cron runs its jobs from database "postgres", not "%s"', current_database()),
                 'a new cron zone in another database than cron.database_name: 55000');
SELECT is(pg_temp.error_of($$SELECT rl_zone_set('pc_new', 'token_bucket', 10, '1 minute', refill => 'cron')$$),
          format('55000: pg_cron runs its jobs from database "postgres", not "%s" | '
                 'Use ratelimit in database postgres, or set cron.database_name = %L and restart the server.',
                 current_database(), current_database()),
          '... the hint of rl_cron_enable, naming both databases');
SELECT throws_ok($$SELECT rl_zone_set('pc_new', 'token_bucket', 10, '1 minute', refill => 'cron', history => true, burst => 20)$$,
                 '55000', format('pg_cron runs its jobs from database "postgres", not "%s"', current_database()),
                 'with other options too: 55000');
SELECT throws_ok($$SELECT rl_zone_set('pc_inline', refill => 'cron')$$,
                 '55000', format('pg_cron runs its jobs from database "postgres", not "%s"', current_database()),
                 'an inline zone made cron: 55000 (the setup check comes before the reset''s)');
SELECT throws_ok($$SELECT rl_zone_set('pc_inline', refill => 'cron', reset => true)$$,
                 '55000', format('pg_cron runs its jobs from database "postgres", not "%s"', current_database()),
                 '... with reset => true as well: 55000, nothing reset');
SELECT throws_ok($$SELECT rl_zone_set('pc_new', 'token_bucket', 10.5, '1 minute', refill => 'cron')$$,
                 '0A000', 'refill => ''cron'' needs a whole rate', 'a cron zone with rate 10.5: 0A000');
SELECT throws_ok($$SELECT rl_zone_set('pc_cron', rate => 2.5)$$,
                 '0A000', 'refill => ''cron'' needs a whole rate', 'the cron zone given rate 2.5: 0A000');
SELECT throws_ok($$SELECT rl_zone_set('pc_new', 'token_bucket', 10, '1 minute', refill => 'sometimes')$$,
                 '22023', 'unknown refill mode "sometimes"', 'refill ''sometimes'': 22023');
SELECT throws_ok($$SELECT rl_zone_set('pc_new', 'token_bucket', 10, '1 minute', refill => 'CRON')$$,
                 '22023', 'unknown refill mode "CRON"', 'refill is case-sensitive: ''CRON'' is 22023');
SELECT throws_ok($$SELECT rl_zone_set('pc_new', 'token_bucket', 10, '1 minute', refill => '')$$,
                 '22023', 'unknown refill mode ""', 'refill '''': 22023');
SELECT throws_ok($$SELECT rl_zone_set('pc_new', 'token_bucket', 10, '1 minute', refill => 'cron ')$$,
                 '22023', 'unknown refill mode "cron "', 'refill ''cron '' (trailing space): 22023');
SELECT throws_ok($$SELECT rl_zone_set('pc_new', 'gcra', 10, '1 minute', refill => 'cron')$$,
                 '0A000', 'refill => ''cron'' needs a token_bucket zone, not gcra', 'gcra with cron: 0A000');
SELECT throws_ok($$SELECT rl_zone_set('pc_new', 'sliding_window', 10, '1 minute', refill => 'cron')$$,
                 '0A000', 'refill => ''cron'' needs a token_bucket zone, not sliding_window',
                 'sliding_window with cron: 0A000');
SELECT throws_ok($$SELECT rl_zone_set('pc_new', 'sliding_window_counter', 10, '1 minute', refill => 'cron')$$,
                 '0A000', 'refill => ''cron'' needs a token_bucket zone, not sliding_window_counter',
                 'sliding_window_counter with cron: 0A000');
SELECT throws_ok($$SELECT rl_zone_set('pc_new', 'fixed_window', 10, '1 minute', refill => 'cron')$$,
                 '0A000', 'refill => ''cron'' needs a token_bucket zone, not fixed_window',
                 'fixed_window with cron: 0A000');
SELECT throws_ok($$SELECT rl_zone_set('pc_new', 'token_bucket', 10, '1 minute', store => 'shmem', refill => 'cron')$$,
                 '0A000', 'refill => ''cron'' needs the table store', 'the shmem store with cron: 0A000');
-- On existing zones.
SELECT throws_ok($$SELECT rl_zone_set('pc_cron', 'gcra', 10, '1 minute', refill => 'cron')$$,
                 '0A000', 'refill => ''cron'' needs a token_bucket zone, not gcra',
                 'the cron zone to gcra, still cron: 0A000');
SELECT throws_ok($$SELECT rl_zone_set('pc_cron', 'token_bucket', 10, '1 minute', store => 'shmem', refill => 'cron')$$,
                 '0A000', 'refill => ''cron'' needs the table store',
                 'the cron zone to the shmem store: 0A000');
SELECT throws_ok($$SELECT rl_zone_set('pc_cron', 'token_bucket', 10, '1 minute', refill => 'weekly')$$,
                 '22023', 'unknown refill mode "weekly"', 'the cron zone to an unknown refill: 22023');
SELECT throws_ok($$SELECT rl_zone_set('pc_win', 'fixed_window', 10, '1 minute', refill => 'cron')$$,
                 '0A000', 'refill => ''cron'' needs a token_bucket zone, not fixed_window',
                 'the fixed window zone to cron: 0A000');
SELECT throws_ok($$SELECT rl_zone_set('pc_cron', refill => 'inline')$$,
                 '55000', 'changing the refill mode of zone "pc_cron" would reset the state of its keys',
                 'the cron zone to inline without reset => true: 55000');
-- Left out (NULL), refill keeps what the zone has: no error, no change.
SELECT lives_ok($$SELECT rl_zone_set('pc_inline', 'token_bucket', 10, '1 minute', refill => NULL)$$,
                'the inline zone with refill NULL: kept, no error');
SELECT lives_ok($$SELECT rl_zone_set('pc_cron', 'token_bucket', 10, '1 minute')$$,
                'the cron zone redefined without refill: kept cron, and no pg_cron check (it is cron already)');
SELECT is_empty($$SELECT 1 FROM ratelimit.zone WHERE zone = 'pc_new'$$, 'no zone pc_new was created');
SELECT ok(pg_temp.unchanged(), 'the failed rl_zone_set calls (and the ones that changed nothing) changed no zone and no state');
SELECT results_eq($$SELECT refill FROM rl_zones WHERE zone IN ('pc_cron', 'pc_inline', 'pc_win') ORDER BY zone$$,
                  ARRAY['cron', 'inline', 'inline'],
                  'rl_zones: pc_cron cron, pc_inline and pc_win inline (the default)');

-------------------------------------------------------------------------
-- 2. rl_cron_refill: NULL 22004, unknown zone 42704, not a cron zone
-- 55000, a cron zone without a job 55000, each with its hint.
-------------------------------------------------------------------------
SELECT throws_ok($$SELECT rl_cron_refill(NULL)$$, '22004', 'zone must not be null',
                 'rl_cron_refill(NULL): 22004');
SELECT throws_ok($$SELECT rl_cron_refill('pc_nope')$$, '42704', 'rate-limit zone "pc_nope" does not exist',
                 'rl_cron_refill on a missing zone: 42704');
SELECT throws_ok($$SELECT rl_cron_refill('')$$, '42704', 'rate-limit zone "" does not exist',
                 'rl_cron_refill(''''): 42704');
SELECT throws_ok($$SELECT rl_cron_refill('pc_inline')$$, '55000', 'zone "pc_inline" is not refilled by pg_cron',
                 'rl_cron_refill on an inline token bucket: 55000');
SELECT is(pg_temp.error_of($$SELECT rl_cron_refill('pc_inline')$$),
          '55000: zone "pc_inline" is not refilled by pg_cron | Its buckets refill at each call.  rl_zone_set(..., refill => ''cron'') changes that.',
          '... its hint');
SELECT throws_ok($$SELECT rl_cron_refill('pc_win')$$, '55000', 'zone "pc_win" is not refilled by pg_cron',
                 'rl_cron_refill on a fixed window: 55000');
SELECT throws_ok($$SELECT rl_cron_refill('pc_cron')$$, '55000', 'zone "pc_cron" has no refill job',
                 'rl_cron_refill on a cron zone without a job: 55000');
SELECT is(pg_temp.error_of($$SELECT rl_cron_refill('pc_cron')$$),
          '55000: zone "pc_cron" has no refill job | SELECT rl_cron_enable(''pc_cron'') schedules it.',
          '... its hint');
SELECT ok(pg_temp.unchanged(), 'the failed rl_cron_refill calls changed no zone and no state');

-------------------------------------------------------------------------
-- 3. rl_cron_enable: NULL 22004, unknown zone 42704, not a cron zone
-- 55000; a cron zone here: 55000, pg_cron runs its jobs from another
-- database (checked before the role, which may then be missing too).  No
-- tick, no job, no grant afterwards.
-------------------------------------------------------------------------
SELECT throws_ok($$SELECT rl_cron_enable(NULL)$$, '22004', 'zone must not be null',
                 'rl_cron_enable(NULL): 22004');
SELECT throws_ok($$SELECT rl_cron_enable('pc_cron', NULL)$$, '22004', 'run_as must not be null',
                 'rl_cron_enable(zone, NULL): 22004');
SELECT throws_ok($$SELECT rl_cron_enable(NULL, NULL)$$, '22004', 'zone must not be null',
                 'rl_cron_enable(NULL, NULL): 22004 for the zone');
SELECT throws_ok($$SELECT rl_cron_enable('pc_nope')$$, '42704', 'rate-limit zone "pc_nope" does not exist',
                 'rl_cron_enable on a missing zone: 42704');
SELECT throws_ok($$SELECT rl_cron_enable('pc_inline', 'rl_pgtap_cron_run')$$, '55000',
                 'zone "pc_inline" is not refilled by pg_cron', 'rl_cron_enable on an inline zone: 55000');
SELECT is(pg_temp.error_of($$SELECT rl_cron_enable('pc_inline', 'rl_pgtap_cron_run')$$),
          '55000: zone "pc_inline" is not refilled by pg_cron | Create it with rl_zone_set(..., refill => ''cron'').',
          '... its hint');
SELECT throws_ok($$SELECT rl_cron_enable('pc_win', 'rl_pgtap_cron_run')$$, '55000',
                 'zone "pc_win" is not refilled by pg_cron', 'rl_cron_enable on a fixed window zone: 55000');
SELECT throws_ok($$SELECT rl_cron_enable('pc_cron', 'rl_pgtap_cron_run')$$, '55000',
                 format('pg_cron runs its jobs from database "postgres", not "%s"', current_database()),
                 'rl_cron_enable in another database than cron.database_name: 55000');
SELECT is(pg_temp.error_of($$SELECT rl_cron_enable('pc_cron', 'rl_pgtap_cron_run')$$),
          format('55000: pg_cron runs its jobs from database "postgres", not "%s" | '
                 'Use ratelimit in database postgres, or set cron.database_name = %L and restart the server.',
                 current_database(), current_database()),
          '... its hint names both databases');
SELECT throws_ok($$SELECT rl_cron_enable('pc_cron')$$, '55000',
                 format('pg_cron runs its jobs from database "postgres", not "%s"', current_database()),
                 'rl_cron_enable with the default run_as: the same 55000');
SELECT throws_ok($$SELECT rl_cron_enable('pc_cron', 'rl_pgtap_no_such_role')$$, '55000',
                 format('pg_cron runs its jobs from database "postgres", not "%s"', current_database()),
                 'a missing run_as role: the database is checked first (55000)');
SELECT ok(pg_temp.unchanged(), 'the failed rl_cron_enable calls changed no zone (refill_tick) and no state');
SELECT ok((SELECT refill_tick IS NULL FROM rl_zones WHERE zone = 'pc_cron'), 'pc_cron still has no refill_tick');
SELECT is(pg_temp.granted('rl_pgtap_cron_run'), 'f,f,f,f,f,f,f',
          'the run_as role was granted nothing');
SELECT is_empty($$SELECT 1 FROM pg_roles WHERE rolname IN ('ratelimit_refill', 'rl_pgtap_no_such_role')$$,
                'no role was created');
SELECT ok(to_regclass('cron.job') IS NULL, 'no cron.job appeared (no job)');
SELECT is_empty($$SELECT 1 FROM pg_extension WHERE extname = 'pg_cron'$$, 'pg_cron was not installed');

-------------------------------------------------------------------------
-- 4. rl_cron_disable: NULL 22004, unknown zone 42704; without pg_cron it
-- removes no job (false) but clears refill_tick.
-------------------------------------------------------------------------
SELECT throws_ok($$SELECT rl_cron_disable(NULL)$$, '22004', 'zone must not be null',
                 'rl_cron_disable(NULL): 22004');
SELECT throws_ok($$SELECT rl_cron_disable('pc_nope')$$, '42704', 'rate-limit zone "pc_nope" does not exist',
                 'rl_cron_disable on a missing zone: 42704');
SELECT ok(pg_temp.unchanged(), 'the failed rl_cron_disable calls changed nothing');
SELECT is(rl_cron_disable('pc_inline'), false, 'rl_cron_disable on an inline zone: false');
SELECT is(rl_cron_disable('pc_cron'), false, 'rl_cron_disable on a cron zone without a job: false');
SELECT ok(pg_temp.unchanged(), '... and changed nothing');
-- An enabled job, as rl_cron_enable leaves it (here without pg_cron).
UPDATE ratelimit.zone SET refill_tick = '6 seconds' WHERE zone = 'pc_cron';
SELECT is((SELECT refill_tick FROM rl_zones WHERE zone = 'pc_cron'), '00:00:06'::interval,
          'a simulated job: refill_tick 6 s');
SELECT is(rl_cron_refill('pc_cron'), 1::bigint, 'with a tick, rl_cron_refill refills the one bucket');
SELECT results_eq($$SELECT tokens, counter, refill_pending FROM ratelimit.state
                    WHERE key = 'k' AND zone_id = (SELECT zone_id FROM ratelimit.zone WHERE zone = 'pc_cron')$$,
                  $$VALUES (7::bigint, 0::bigint, true)$$,
                  '... by 10 * 6 s / 1 minute = 1 token: 7');
SELECT is(rl_cron_disable('pc_cron'), false, 'rl_cron_disable: no job to remove here, false');
SELECT ok((SELECT refill_tick IS NULL FROM rl_zones WHERE zone = 'pc_cron'), '... but refill_tick is cleared');
SELECT throws_ok($$SELECT rl_cron_refill('pc_cron')$$, '55000', 'zone "pc_cron" has no refill job',
                 '... so rl_cron_refill refuses again');
-- A cron zone that stays cron is changed without the pg_cron check (only a
-- zone that becomes cron needs a usable pg_cron), and its keys keep their
-- state.
SELECT lives_ok($$SELECT rl_zone_set('pc_cron', rate => 20)$$,
                'the cron zone''s rate changed here, where pg_cron cannot run its job');
SELECT results_eq($$SELECT z.refill, z.rate, s.tokens FROM ratelimit.zone z JOIN ratelimit.state s USING (zone_id)
                    WHERE z.zone = 'pc_cron' AND s.key = 'k'$$,
                  $$VALUES ('cron'::text, 20::numeric, 7::bigint)$$,
                  '... still cron, rate 20, the key''s 7 tokens kept');
SELECT lives_ok($$SELECT rl_zone_set('pc_cron', rate => 10)$$, '... and back to 10');
SELECT pg_temp.snapshot();

-------------------------------------------------------------------------
-- 5. Privileges.  rl_cron_enable, rl_cron_disable, rl_cron_refill and the
-- internal helpers are not executable by PUBLIC; the state and the zones
-- are not writable.  An ordinary role decides once the owner granted it
-- the decision functions (rl_grant), which give nothing of the refill.
-------------------------------------------------------------------------
SELECT ok(NOT has_function_privilege('public', 'rl_cron_enable(text, name)', 'EXECUTE'),
          'PUBLIC may not execute rl_cron_enable');
SELECT ok(NOT has_function_privilege('public', 'rl_cron_disable(text)', 'EXECUTE'),
          'PUBLIC may not execute rl_cron_disable');
SELECT ok(NOT has_function_privilege('public', 'rl_cron_refill(text)', 'EXECUTE'),
          'PUBLIC may not execute rl_cron_refill');
SELECT ok(NOT has_function_privilege('public', 'ratelimit.cron_plan(text, numeric, interval)', 'EXECUTE'),
          'PUBLIC may not execute ratelimit.cron_plan');
SELECT ok(NOT has_function_privilege('public', 'ratelimit.pg_cron_version()', 'EXECUTE'),
          'PUBLIC may not execute ratelimit.pg_cron_version');
SELECT ok(NOT has_function_privilege('public', 'ratelimit.unschedule_refill(int)', 'EXECUTE'),
          'PUBLIC may not execute ratelimit.unschedule_refill');
SELECT ok(NOT has_function_privilege('public', 'ratelimit.cron_job_name(int)', 'EXECUTE'),
          'PUBLIC may not execute ratelimit.cron_job_name');
SELECT ok(NOT has_function_privilege('public', 'ratelimit.clock()', 'EXECUTE')
          AND NOT has_table_privilege('public', 'ratelimit.cron_refill_due', 'SELECT, INSERT, UPDATE, DELETE'),
          'PUBLIC may neither execute ratelimit.clock nor touch ratelimit.cron_refill_due');
SELECT is(pg_temp.granted('rl_pgtap_cron_user'), 'f,f,f,f,f,f,f',
          'an ordinary role holds nothing on the state, the zones or the refill');
SELECT ok(NOT has_function_privilege('rl_pgtap_cron_user', 'rl_limit(text, text, integer)', 'EXECUTE'),
          'without a grant, an ordinary role may not execute rl_limit');
SELECT ok(NOT has_function_privilege('rl_pgtap_cron_user', 'rl_zone_set(text, text, numeric, interval, bigint, text, boolean, text, boolean, boolean, boolean)', 'EXECUTE'),
          'an ordinary role may not execute rl_zone_set');

UPDATE ratelimit.zone SET refill_tick = '6 seconds' WHERE zone = 'pc_cron';
SELECT pg_temp.snapshot();
SET ROLE rl_pgtap_cron_user;
SELECT throws_ok($$SELECT rl_cron_enable('pc_cron')$$, '42501', 'permission denied for function rl_cron_enable',
                 'an ordinary role: rl_cron_enable 42501');
SELECT throws_ok($$SELECT rl_cron_enable('pc_cron', 'rl_pgtap_cron_user')$$, '42501',
                 'permission denied for function rl_cron_enable',
                 'an ordinary role: rl_cron_enable as itself 42501');
SELECT throws_ok($$SELECT rl_cron_disable('pc_cron')$$, '42501', 'permission denied for function rl_cron_disable',
                 'an ordinary role: rl_cron_disable 42501');
SELECT throws_ok($$SELECT rl_cron_refill('pc_cron')$$, '42501', 'permission denied for function rl_cron_refill',
                 'an ordinary role: rl_cron_refill 42501');
SELECT throws_ok($$SELECT * FROM ratelimit.cron_plan('1.5', 10, '1 minute')$$, '42501', NULL,
                 'an ordinary role: ratelimit.cron_plan 42501');
SELECT throws_ok($$UPDATE ratelimit.state SET tokens = 1000000$$, '42501', NULL,
                 'an ordinary role: UPDATE ratelimit.state 42501');
SELECT throws_ok($$UPDATE ratelimit.state SET refill_pending = true WHERE false$$, '42501', NULL,
                 'an ordinary role: UPDATE of refill_pending, even of no row, 42501');
SELECT throws_ok($$INSERT INTO ratelimit.state (key, zone_id, part, tokens, updated_at)
                   VALUES ('forged', 1, 0, 1000000, now())$$, '42501', NULL,
                 'an ordinary role: INSERT INTO ratelimit.state 42501');
SELECT throws_ok($$DELETE FROM ratelimit.state$$, '42501', NULL,
                 'an ordinary role: DELETE FROM ratelimit.state 42501');
SELECT throws_ok($$SELECT count(*) FROM ratelimit.state$$, '42501', NULL,
                 'an ordinary role: SELECT FROM ratelimit.state 42501');
SELECT throws_ok($$UPDATE ratelimit.zone SET refill_tick = '1 second'$$, '42501', NULL,
                 'an ordinary role: UPDATE ratelimit.zone (a tick of its own) 42501');
SELECT throws_ok($$SELECT rl_zone_set('pc_cron', 'token_bucket', 1000, '1 second', refill => 'cron')$$, '42501',
                 'permission denied for function rl_zone_set',
                 'an ordinary role: rl_zone_set 42501');
SELECT throws_ok($$SELECT rl_limit('pc_cron', 'u', 3)$$, '42501', 'permission denied for function rl_limit',
                 'an ordinary role without a grant: rl_limit 42501');
RESET ROLE;
SELECT lives_ok($$SELECT rl_grant('rl_pgtap_cron_user')$$, 'the owner grants the role the decision functions');
SELECT ok(has_function_privilege('rl_pgtap_cron_user', 'rl_limit(text, text, integer)', 'EXECUTE'),
          'with rl_grant, an ordinary role may execute rl_limit');
SELECT is(pg_temp.granted('rl_pgtap_cron_user'), 'f,f,f,f,f,f,f',
          '... and still holds nothing on the state, the zones or the refill');
SET ROLE rl_pgtap_cron_user;
-- It can decide on the cron zone: key u is full, 3 taken, 7 left.
SELECT remaining AS user_take FROM rl_limit('pc_cron', 'u', 3) \gset
RESET ROLE;
SELECT is(:user_take::bigint, 7::bigint, 'an ordinary role decides on a cron zone: 3 taken of 10, 7 left');
SELECT results_eq($$SELECT key COLLATE "default", tokens, counter, refill_pending FROM ratelimit.state
                    WHERE zone_id = (SELECT zone_id FROM ratelimit.zone WHERE zone = 'pc_cron') ORDER BY key$$,
                  $$VALUES ('k'::text, 7::bigint, 0::bigint, true), ('u', 7, 0, true)$$,
                  'the state: k untouched (7), u 7 and pending; nothing else');
SELECT ok(NOT EXISTS (SELECT * FROM ratelimit.zone EXCEPT SELECT * FROM zones_before)
          AND NOT EXISTS (SELECT * FROM zones_before EXCEPT SELECT * FROM ratelimit.zone),
          'the zones are unchanged (pc_cron''s tick too)');

-- Exactly what rl_cron_enable grants its run_as role: EXECUTE on
-- rl_cron_refill (SECURITY DEFINER) and USAGE on the extension's schema,
-- no privilege on any table.  The role refills, once a tick, and may do
-- nothing else.  It runs as a session of its own (SET SESSION
-- AUTHORIZATION: session_user is the role, as when pg_cron's job connects
-- as it); the test clock is the superuser's, set in between.
GRANT USAGE ON SCHEMA public TO rl_pgtap_cron_run;
GRANT EXECUTE ON FUNCTION rl_cron_refill(text) TO rl_pgtap_cron_run;
SELECT is(pg_temp.granted('rl_pgtap_cron_run'), 'f,f,f,f,t,f,f',
          'the role now holds what rl_cron_enable grants: EXECUTE on rl_cron_refill alone');
-- The meter is the zone's (pc_cron: a tick of 6 s, so a run may come up to
-- 3 s early): 00:00:00 refills and makes the next run due at 00:00:06.
SET SESSION AUTHORIZATION rl_pgtap_cron_run;
SELECT pg_temp.result_of($$SELECT rl_cron_refill('pc_cron')$$) AS job_refilled,
       pg_temp.result_of($$SELECT rl_cron_refill('pc_cron')$$) AS job_again \gset
SELECT pg_temp.error_of($$UPDATE ratelimit.state SET tokens = 1000000$$) AS job_upd_tokens,
       pg_temp.error_of($$UPDATE ratelimit.state SET updated_at = now()$$) AS job_upd_stamp,
       pg_temp.error_of($$UPDATE ratelimit.state SET key = 'x' WHERE false$$) AS job_upd_key,
       pg_temp.error_of($$DELETE FROM ratelimit.state WHERE false$$) AS job_delete,
       pg_temp.error_of($$INSERT INTO ratelimit.state (key, zone_id, part, tokens, updated_at)
                          VALUES ('forged', 1, 0, 1, now())$$) AS job_insert,
       pg_temp.error_of($$SELECT key FROM ratelimit.state$$) AS job_read_key,
       pg_temp.error_of($$UPDATE ratelimit.zone SET rate = 1000000$$) AS job_upd_zone_rate,
       pg_temp.error_of($$DELETE FROM ratelimit.cron_refill_due$$) AS job_delete_due,
       pg_temp.error_of($$SELECT ratelimit.flush_zone_state(1)$$) AS job_flush,
       pg_temp.error_of($$SELECT rl_cron_enable('pc_cron')$$) AS job_enable,
       pg_temp.error_of($$SELECT rl_limit('pc_cron', 'k', 1)$$) AS job_limit \gset
RESET SESSION AUTHORIZATION;
SELECT is(:'job_refilled'::text, '2', 'the role runs the refill: 2 buckets');
SELECT results_eq($$SELECT key COLLATE "default", tokens, counter, refill_pending FROM ratelimit.state
                    WHERE zone_id = (SELECT zone_id FROM ratelimit.zone WHERE zone = 'pc_cron') ORDER BY key$$,
                  $$VALUES ('k'::text, 8::bigint, 0::bigint, true), ('u', 8, 0, true)$$,
                  '... k and u one token more: 8');
SELECT is(:'job_again'::text, '0', '... a second run at once refills nothing (the next is due a tick later)');
SELECT is(left(:'job_upd_tokens', 5), '42501'::text, '... it may not UPDATE the tokens');
SELECT is(left(:'job_upd_stamp', 5), '42501'::text, '... nor updated_at');
SELECT is(left(:'job_upd_key', 5), '42501'::text, '... nor the key');
SELECT is(left(:'job_delete', 5), '42501'::text, '... nor DELETE');
SELECT is(left(:'job_insert', 5), '42501'::text, '... nor INSERT');
SELECT is(left(:'job_read_key', 5), '42501'::text, '... nor read the keys');
SELECT is(left(:'job_upd_zone_rate', 5), '42501'::text, '... nor change a zone');
SELECT is(left(:'job_delete_due', 5), '42501'::text, '... nor reset its meter');
SELECT is(left(:'job_flush', 5), '42501'::text, '... nor call the refill''s helpers');
SELECT is(left(:'job_enable', 5), '42501'::text, '... nor schedule jobs');
SELECT is(left(:'job_limit', 5), '42501'::text, '... nor decide');
-- Runs in a loop refill no faster than the schedule: at 00:00:02 (4 s
-- early) nothing; at 00:00:03 (3 s early) one refill, due again at
-- 00:00:12; at 00:00:08 nothing; at 00:00:09 one.
CREATE FUNCTION pg_temp.run_as_job_at(at text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    refilled text;
BEGIN
    PERFORM set_config('ratelimit.now_override', at, true);
    SET SESSION AUTHORIZATION rl_pgtap_cron_run;
    refilled := pg_temp.result_of($q$SELECT rl_cron_refill('pc_cron')$q$);
    RESET SESSION AUTHORIZATION;
    RETURN refilled;
END $$;
SELECT results_eq(
    $$SELECT pg_temp.run_as_job_at(t) FROM unnest(ARRAY['2026-01-01 00:00:02+00', '2026-01-01 00:00:03+00',
                                                         '2026-01-01 00:00:03+00', '2026-01-01 00:00:08+00',
                                                         '2026-01-01 00:00:09+00']) WITH ORDINALITY u(t, n)
      ORDER BY n$$,
    ARRAY['0', '2', '0', '0', '2'],
    'runs as the role are metered: up to half a tick early, one refill a tick');
SELECT results_eq($$SELECT key COLLATE "default", tokens FROM ratelimit.state
                    WHERE zone_id = (SELECT zone_id FROM ratelimit.zone WHERE zone = 'pc_cron') ORDER BY key$$,
                  $$VALUES ('k'::text, 10::bigint), ('u', 10)$$,
                  '... two refills more: k and u at 10');
SELECT is((SELECT due_at FROM ratelimit.cron_refill_due
           WHERE zone_id = (SELECT zone_id FROM ratelimit.zone WHERE zone = 'pc_cron')),
          '2026-01-01 00:00:18+00'::timestamptz, '... the next due at 00:00:18');
-- The owner's session is not metered (it could write the state anyway).
SELECT allowed FROM rl_limit('pc_cron', 'k', 2) \gset
SELECT set_config('ratelimit.now_override', '2026-01-01 00:00:09+00', true) \gset
SELECT is(rl_cron_refill('pc_cron') + rl_cron_refill('pc_cron'), 2::bigint,
          'a superuser''s session runs the refill as often as it likes');
SELECT set_config('ratelimit.now_override', '2026-01-01 00:00:00+00', true) \gset
REVOKE ALL ON FUNCTION rl_cron_refill(text) FROM rl_pgtap_cron_run;
REVOKE USAGE ON SCHEMA public FROM rl_pgtap_cron_run;
SELECT pg_temp.snapshot();

-------------------------------------------------------------------------
-- 6. Job names, and a look-alike of pg_cron: a schema cron with a table
-- job and a function unschedule(bigint) that deletes from it and logs, as
-- anyone with CREATE on the database could make.  It is not pg_cron's (not
-- a member of the extension), so the SECURITY DEFINER functions and the
-- DROP EXTENSION trigger must never call it.  Removing real jobs is
-- test/cron/cron.sh's, with a real pg_cron.  Job names are
-- 'ratelimit_refill:' || zone_id: no zone name can forge another zone's
-- (pg_cron's names have 63 bytes).
-------------------------------------------------------------------------
CREATE SCHEMA cron;
CREATE TABLE cron.job (jobid bigint PRIMARY KEY, jobname text, database text, command text);
CREATE TABLE cron.unscheduled (jobid bigint);
CREATE FUNCTION cron.unschedule(job_id bigint) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO cron.unscheduled VALUES (job_id);
    DELETE FROM cron.job WHERE jobid = job_id;
    RETURN FOUND;
END $$;
-- Cron zones written directly (rl_zone_set refuses them here: section 1).
INSERT INTO ratelimit.zone (zone, algorithm, rate, period, burst, refill)
VALUES ('pc_drop', 'token_bucket', 10, '1 minute', NULL, 'cron'),
       ('pc_mode', 'token_bucket', 10, '1 minute', NULL, 'cron'),
       (repeat('z', 100), 'token_bucket', 10, '1 minute', NULL, 'cron');
UPDATE ratelimit.zone SET refill_tick = '1 minute' WHERE zone IN ('pc_cron', 'pc_drop', 'pc_mode');
CREATE FUNCTION pg_temp.job_of(zone text) RETURNS text LANGUAGE sql AS $$
    SELECT 'ratelimit_refill:' || zone_id FROM ratelimit.zone z WHERE z.zone = $1
$$;
INSERT INTO cron.job VALUES
    (1, pg_temp.job_of('pc_cron'), current_database(), 'SELECT public.rl_cron_refill(''pc_cron'')'),
    (2, pg_temp.job_of('pc_cron'), 'elsewhere', 'SELECT public.rl_cron_refill(''pc_cron'')'),
    (3, pg_temp.job_of('pc_drop'), current_database(), ''),
    (4, pg_temp.job_of('pc_mode'), current_database(), ''),
    (5, 'ratelimit_refill:md5:' || md5(repeat('z', 100)), current_database(), ''),
    (6, pg_temp.job_of(repeat('z', 100)), current_database(), ''),
    (7, 'unrelated', current_database(), 'SELECT 1'),
    (8, 'ratelimit_refill:pc_inline_x', current_database(), '');
SELECT is(ratelimit.cron_job_name(7), 'ratelimit_refill:7', 'a job name: ratelimit_refill:<zone id>');
SELECT is(ratelimit.cron_job_name((SELECT zone_id FROM ratelimit.zone WHERE zone = 'pc_cron')), pg_temp.job_of('pc_cron'),
          'pc_cron''s job is named by its zone id');
SELECT ok(octet_length(ratelimit.cron_job_name(2147483647)) <= 63, 'every job name fits 63 bytes');
SELECT is(rl_cron_disable('pc_cron'), false, 'rl_cron_disable ignores a look-alike schema cron: false');
SELECT is_empty($$SELECT jobid FROM cron.unscheduled$$, '... and never calls its unschedule()');
SELECT is(rl_cron_disable('pc_cron'), false, '... a second time: false');
SELECT lives_ok($$SELECT rl_zone_drop('pc_drop')$$, 'rl_zone_drop of a zone with a job');
SELECT is_empty($$SELECT jobid FROM cron.unscheduled$$, '... without calling the look-alike''s unschedule()');
SELECT throws_ok($$SELECT rl_zone_set('pc_mode', refill => 'inline')$$, '55000', NULL,
                 'refill => ''inline'' on a zone with a job, without reset: 55000');
SELECT is_empty($$SELECT jobid FROM cron.unscheduled$$, '... nothing unscheduled');
SELECT lives_ok($$SELECT rl_zone_set('pc_mode', refill => 'inline', reset => true)$$,
                'refill => ''inline'' with reset => true on a zone with a job');
SELECT is_empty($$SELECT jobid FROM cron.unscheduled$$, '... nor does a refill change');
SELECT lives_ok($$SELECT rl_zone_set('pc_mode', 'token_bucket', 20, '1 minute')$$,
                'another change of an inline zone');
SELECT is(rl_cron_disable(repeat('z', 100)), false, 'rl_cron_disable of a zone with a 100-byte name: false too');
SELECT is_empty($$SELECT jobid FROM cron.unscheduled$$, '... nothing unscheduled');
SELECT lives_ok($$DROP EXTENSION ratelimit CASCADE$$, 'DROP EXTENSION ratelimit');
SELECT results_eq($$SELECT jobid FROM cron.job ORDER BY jobid$$, ARRAY[1::bigint, 2, 3, 4, 5, 6, 7, 8],
                  '... left the look-alike''s rows alone (its trigger runs only pg_cron''s unschedule)');
SELECT ok(to_regclass('ratelimit.state') IS NULL, '... the extension is gone (until the rollback)');

SELECT * FROM finish();
ROLLBACK;
