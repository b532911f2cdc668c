\echo Use "ALTER EXTENSION ratelimit UPDATE TO '0.5.0'" to load this file. \quit

-- 0.5.0: triggers, shadow mode, the PostgREST guard (SPEC 2.5).

-- What the zone's limit decided; allowed differs only in shadow mode.
ALTER TYPE rl_result ADD ATTRIBUTE would_allow boolean;
COMMENT ON TYPE rl_result IS
    'A rate-limit decision: allowed, capacity, what remains, when to retry (refused only), when the key is full again, the history transaction id, and what the limit decided (would_allow; allowed is true in shadow mode)';

-- Shadow (dry-run) mode: decisions are computed, counted and recorded, and
-- nothing is refused.
ALTER TABLE ratelimit.zone ADD COLUMN shadow boolean NOT NULL DEFAULT false;

-- rl_zone_set gains shadow.
DROP FUNCTION rl_zone_set(text, text, bigint, interval, bigint, text, boolean, text);
CREATE FUNCTION rl_zone_set(
    zone      text,
    algorithm text,
    rate      bigint,
    period    interval,
    burst     bigint DEFAULT NULL,
    store     text DEFAULT 'table',
    history   boolean DEFAULT false,
    refill    text DEFAULT 'inline',
    shadow    boolean DEFAULT false)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    existing ratelimit.zone;
    fresh boolean;
BEGIN
    IF zone IS NULL OR zone = '' THEN
        RAISE EXCEPTION 'zone must not be null or empty' USING ERRCODE = CASE WHEN zone IS NULL THEN '22004' ELSE '22023' END;
    END IF;
    IF octet_length(zone) > 128 THEN
        RAISE EXCEPTION 'zone name is too long' USING ERRCODE = '22001',
            DETAIL = format('The name is %s bytes; the limit is 128.', octet_length(zone));
    END IF;
    PERFORM ratelimit.check_zone(algorithm, rate, period, burst, store);
    IF history IS NULL THEN
        RAISE EXCEPTION 'history must not be null' USING ERRCODE = '22004';
    END IF;
    IF shadow IS NULL THEN
        RAISE EXCEPTION 'shadow must not be null' USING ERRCODE = '22004';
    END IF;
    IF refill IS NULL THEN
        RAISE EXCEPTION 'refill must not be null' USING ERRCODE = '22004';
    END IF;
    IF refill NOT IN ('inline', 'cron') THEN
        RAISE EXCEPTION 'unknown refill mode "%"', left(refill, 128) || CASE WHEN length(refill) > 128 THEN '...' ELSE '' END USING ERRCODE = '22023',
            HINT = 'The refill modes are inline (at each call) and cron (by a pg_cron job).';
    END IF;
    IF refill = 'cron' AND algorithm <> 'token_bucket' THEN
        RAISE EXCEPTION 'refill => ''cron'' needs a token_bucket zone, not %', left(algorithm, 128) || CASE WHEN length(algorithm) > 128 THEN '...' ELSE '' END
            USING ERRCODE = '0A000';
    END IF;
    IF refill = 'cron' AND store <> 'table' THEN
        RAISE EXCEPTION 'refill => ''cron'' needs the table store' USING ERRCODE = '0A000',
            DETAIL = 'The refill job is one UPDATE of ratelimit.state.';
    END IF;

    SELECT * INTO existing FROM ratelimit.zone z WHERE z.zone = rl_zone_set.zone FOR UPDATE;
    IF NOT FOUND THEN
        INSERT INTO ratelimit.zone (zone, algorithm, rate, period, burst, store, history, refill, shadow)
        VALUES (rl_zone_set.zone, rl_zone_set.algorithm, rl_zone_set.rate, rl_zone_set.period,
                rl_zone_set.burst, rl_zone_set.store, rl_zone_set.history, rl_zone_set.refill,
                rl_zone_set.shadow);
    ELSE
        fresh := existing.algorithm IS DISTINCT FROM rl_zone_set.algorithm
                 OR existing.store IS DISTINCT FROM rl_zone_set.store
                 OR existing.refill IS DISTINCT FROM rl_zone_set.refill;
        -- Another algorithm, store or refill mode cannot read the old
        -- state: start afresh under a new id, so no session can mistake old
        -- rows for new ones.  Otherwise (shadow too) existing keys keep
        -- their state under the new limit.
        IF fresh THEN
            PERFORM ratelimit.forget_zone_state(existing.zone_id);
            DELETE FROM ratelimit.state s WHERE s.zone_id = existing.zone_id;
            IF existing.refill = 'cron' THEN
                PERFORM ratelimit.unschedule_refill(existing.zone);
            END IF;
        END IF;
        UPDATE ratelimit.zone z
        SET zone_id = CASE WHEN fresh THEN nextval('ratelimit.zone_id_seq')::int ELSE z.zone_id END,
            algorithm = rl_zone_set.algorithm, store = rl_zone_set.store,
            rate = rl_zone_set.rate, period = rl_zone_set.period, burst = rl_zone_set.burst,
            history = rl_zone_set.history, refill = rl_zone_set.refill,
            refill_tick = CASE WHEN fresh THEN NULL ELSE z.refill_tick END,
            shadow = rl_zone_set.shadow,
            updated_at = now()
        WHERE z.zone_id = existing.zone_id;
        -- A cron zone whose capacity grew: its full buckets are below the
        -- new capacity, and the refill job must visit them again.
        IF NOT fresh AND rl_zone_set.refill = 'cron' THEN
            UPDATE ratelimit.state s SET refill_pending = true
            WHERE s.zone_id = existing.zone_id AND s.refill_pending IS NULL
              AND s.tokens < coalesce(rl_zone_set.burst, rl_zone_set.rate);
        END IF;
    END IF;
END
$fn$;
REVOKE ALL ON FUNCTION rl_zone_set(text, text, bigint, interval, bigint, text, boolean, text, boolean) FROM PUBLIC;
COMMENT ON FUNCTION rl_zone_set(text, text, bigint, interval, bigint, text, boolean, text, boolean) IS
    'Creates or alters a rate-limit zone: rate requests per period with the given algorithm';

CREATE OR REPLACE VIEW rl_zones AS
SELECT zone, algorithm, rate, period,
       coalesce(burst, rate) AS capacity, burst, store, history, created_at, updated_at,
       refill, refill_tick, shadow
FROM ratelimit.zone;

-- BEFORE INSERT OR UPDATE ... FOR EACH ROW EXECUTE FUNCTION
-- rl_limit_trigger('zone', 'key_column' [, 'cost_column']): a row over the
-- limit raises SQLSTATE RL429.
CREATE FUNCTION rl_limit_trigger()
RETURNS trigger
AS 'MODULE_PATHNAME', 'rl_limit_trigger'
LANGUAGE C;
COMMENT ON FUNCTION rl_limit_trigger() IS
    'Row trigger: each inserted or updated row is a call on the zone (trigger arguments: zone, key column, optional cost column); a row over the limit raises SQLSTATE RL429';

-- The client's address as the trusted proxies wrote it: the entry
-- trusted_proxies from the right of X-Forwarded-For (or of Forwarded,
-- RFC 7239), normalised; NULL when there is none to trust.  Reads no
-- rate-limit state: PUBLIC may execute it.
CREATE FUNCTION rl_client_address(x_forwarded_for text, forwarded text,
                                  trusted_proxies int DEFAULT NULL,
                                  proxy_header text DEFAULT NULL)
RETURNS inet
AS 'MODULE_PATHNAME', 'rl_client_address'
LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION rl_client_address(text, text, int, text) IS
    'The client address the trusted proxies appended (counted from the right; NULL arguments: ratelimit.trusted_proxies and ratelimit.proxy_header), or NULL when there is none to trust';

-- PostgREST's db-pre-request hook (and Supabase's): one call per request,
-- keyed by the JWT subject (PostgREST verified its signature), else the
-- client address the trusted proxies appended, else 'ip:unknown'.  The
-- RateLimit headers go into response.headers; a refusal raises PostgREST's
-- PGRST error, which becomes a 429 carrying Retry-After and the RateLimit
-- headers (ratelimit.guard_error = 'pt429': a bare PT429 instead).
CREATE FUNCTION rl_http_guard(zone text, key text DEFAULT NULL,
                              trusted_proxies int DEFAULT NULL,
                              proxy_header text DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    k text := key;
    claims jsonb;
    request_headers jsonb;
    result @extschema@.rl_result;
    headers jsonb;
    response jsonb;
    message text;
    detail text;
    hint text := 'Wait for the Retry-After header''s seconds before the next request.';
BEGIN
    IF zone IS NULL THEN
        RAISE EXCEPTION 'zone must not be null' USING ERRCODE = '22004';
    END IF;
    -- Bad proxy arguments fail every request, not only the anonymous ones
    -- (the settings were checked when they were set).
    IF trusted_proxies IS NOT NULL OR proxy_header IS NOT NULL THEN
        PERFORM @extschema@.rl_client_address(NULL, NULL, trusted_proxies, proxy_header);
    END IF;
    IF k IS NULL THEN
        BEGIN
            claims := nullif(current_setting('request.jwt.claims', true), '')::jsonb;
        EXCEPTION WHEN invalid_text_representation THEN
            claims := NULL;     -- not PostgREST's JSON: no subject
        END;
        IF jsonb_typeof(claims) = 'object' THEN
            k := 'sub:' || (claims ->> 'sub');
        END IF;
    END IF;
    IF k IS NULL THEN
        BEGIN
            request_headers := nullif(current_setting('request.headers', true), '')::jsonb;
        EXCEPTION WHEN invalid_text_representation THEN
            request_headers := NULL;
        END;
        IF jsonb_typeof(request_headers) <> 'object' THEN
            request_headers := NULL;
        END IF;
        k := 'ip:' || coalesce(host(@extschema@.rl_client_address(
                                   request_headers ->> 'x-forwarded-for',
                                   request_headers ->> 'forwarded',
                                   trusted_proxies, proxy_header)),
                               'unknown');
    END IF;
    -- A subject can be longer than a key may be.
    IF octet_length(k) > 1024 THEN
        k := 'md5:' || md5(k);
    END IF;

    result := @extschema@.rl_limit(zone, k);
    headers := @extschema@.rl_headers(result);

    IF NOT result.allowed THEN
        message := format('rate limit of zone "%s" exceeded', zone);
        detail := format('Retry after %s s.', ceil(extract(epoch FROM result.retry_after))::bigint);
        IF current_setting('ratelimit.guard_error') = 'pt429' THEN
            RAISE EXCEPTION USING ERRCODE = 'PT429', MESSAGE = message, DETAIL = detail, HINT = hint;
        END IF;
        -- PostgREST takes the response from the error: MESSAGE is the body,
        -- DETAIL the status and headers.
        RAISE EXCEPTION USING ERRCODE = 'PGRST',
            MESSAGE = jsonb_build_object('code', 'RL429', 'message', message,
                                         'details', detail, 'hint', hint)::text,
            DETAIL = jsonb_build_object(
                'status', 429,
                'status_text', 'Too Many Requests',
                'headers', headers)::text;
    END IF;

    -- PostgREST's format: an array of one-header objects.  Keep what was
    -- set before, but the RateLimit headers of an earlier guard call: the
    -- latest decision replaces them.
    SELECT coalesce(jsonb_agg(jsonb_build_object(h.key, h.value) ORDER BY h.key), '[]'::jsonb)
    INTO response
    FROM jsonb_each_text(headers) h;
    BEGIN
        SELECT coalesce(jsonb_agg(e.header), '[]'::jsonb) || response
        INTO response
        FROM jsonb_array_elements(coalesce(nullif(current_setting('response.headers', true), '')::jsonb,
                                           '[]'::jsonb)) e(header)
        WHERE NOT (jsonb_typeof(e.header) = 'object'
                   AND e.header ?| ARRAY['RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset', 'Retry-After']);
    EXCEPTION WHEN invalid_text_representation OR invalid_parameter_value THEN
        NULL;                   -- unreadable earlier headers: ours alone
    END;
    PERFORM set_config('response.headers', response::text, true);
END
$fn$;
COMMENT ON FUNCTION rl_http_guard(text, text, int, text) IS
    'For PostgREST''s db-pre-request: rate-limits the request by JWT subject or by the client address the trusted proxies appended, sets the RateLimit headers, and refuses with HTTP 429 and Retry-After';

-- Garbage collection: removes the state of keys that have fully recovered
-- (a recovered key decides exactly as a new one), and of dropped zones.
-- rl_token_bucket's and rl_gcra's buckets record no limit: they go only
-- when max_window is given and they were last written longer ago.
CREATE FUNCTION rl_gc(zone text DEFAULT NULL, max_window interval DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'rl_gc'
LANGUAGE C;
REVOKE ALL ON FUNCTION rl_gc(text, interval) FROM PUBLIC;
COMMENT ON FUNCTION rl_gc(text, interval) IS
    'Deletes the state of keys that have fully recovered (of one zone, or all and dropped zones); returns how many keys';

-- The shmem store's keys of this database, as a call of cost 0 sees them.
CREATE FUNCTION ratelimit.shmem_keys(
    OUT zone_id int, OUT key text, OUT capacity bigint, OUT remaining bigint,
    OUT reset_after interval, OUT updated_at timestamptz)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'rl_shmem_keys'
LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION ratelimit.shmem_keys() FROM PUBLIC;

-- Every key with state, on both stores, and what it has left now.  Zones'
-- keys show what rl_peek shows for cost 0; rl_token_bucket's buckets record
-- no limit: their tokens as of updated_at.  updated_at is the state's own
-- time (the last decision for buckets, the window's start for windows, the
-- theoretical arrival time for gcra).  SECURITY DEFINER: a reader granted
-- SELECT on rl_keys and EXECUTE on this function needs no access to the
-- state table.
CREATE FUNCTION ratelimit.keys(
    OUT zone text, OUT key text, OUT store text, OUT capacity bigint, OUT remaining bigint,
    OUT reset_after interval, OUT updated_at timestamptz)
RETURNS SETOF record
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT z.zone, s.key, 'table', p.capacity, p.remaining, p.reset_after, s.updated_at
    FROM ratelimit.state s
    JOIN ratelimit.zone z ON z.zone_id OPERATOR(pg_catalog.=) s.zone_id
    CROSS JOIN LATERAL @extschema@.rl_peek(z.zone, s.key, 0) p
    WHERE s.part OPERATOR(pg_catalog.=) 0 AND z.store OPERATOR(pg_catalog.=) 'table'
    UNION ALL
    SELECT CASE s.zone_id WHEN 0 THEN '(rl_token_bucket)' ELSE '(rl_gcra)' END, s.key, 'table',
           NULL, CASE s.zone_id WHEN 0 THEN s.tokens END, NULL, s.updated_at
    FROM ratelimit.state s
    WHERE s.zone_id OPERATOR(pg_catalog.<=) 0 AND s.part OPERATOR(pg_catalog.=) 0
    UNION ALL
    SELECT coalesce(z.zone, CASE k.zone_id WHEN 0 THEN '(rl_token_bucket)'
                                           WHEN -1 THEN '(rl_gcra)' END),
           k.key, 'shmem', k.capacity, k.remaining, k.reset_after, k.updated_at
    FROM ratelimit.shmem_keys() k
    LEFT JOIN ratelimit.zone z ON z.zone_id OPERATOR(pg_catalog.=) k.zone_id
$fn$;
REVOKE ALL ON FUNCTION ratelimit.keys() FROM PUBLIC;

CREATE VIEW rl_keys AS SELECT * FROM ratelimit.keys();
REVOKE ALL ON rl_keys FROM PUBLIC;
-- (grant a monitoring role: GRANT SELECT ON rl_keys, and
-- GRANT EXECUTE ON FUNCTION ratelimit.keys() plus USAGE ON SCHEMA ratelimit)
COMMENT ON VIEW rl_keys IS
    'Keys with rate-limit state, per zone and store, with what they have left now (admins only)';

-- rl_headers refuses values no rate-limit function returns (a negative
-- count or time, more remaining than the capacity): headers built from
-- them would tell a client something false.
CREATE OR REPLACE FUNCTION rl_headers(result rl_result)
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF result.capacity < 0 OR result.remaining < 0 OR result.remaining > result.capacity
       OR result.reset_after < interval '0' OR result.retry_after < interval '0' THEN
        RAISE EXCEPTION 'rl_headers() got an impossible rate-limit result'
            USING ERRCODE = '22023',
                  DETAIL = format('capacity %s, remaining %s, reset_after %s, retry_after %s: '
                                  'counts and times are never negative, and remaining is at most the capacity.',
                                  result.capacity, result.remaining, result.reset_after, result.retry_after);
    END IF;
    RETURN jsonb_strip_nulls(jsonb_build_object(
        'RateLimit-Limit', result.capacity::text,
        'RateLimit-Remaining', result.remaining::text,
        'RateLimit-Reset', ceil(extract(epoch FROM result.reset_after))::bigint::text,
        'Retry-After', CASE WHEN NOT result.allowed
                            THEN ceil(extract(epoch FROM result.retry_after))::bigint::text END));
END
$fn$;

-- ---------------------------------------------------------------------------
-- Least privilege.  PostgREST and Supabase publish every function that a
-- request's role may execute as /rpc/...: a function PUBLIC may execute is
-- callable by any stranger.  So PUBLIC executes nothing that reads or
-- changes rate-limit state, and reads no view of it; the owner grants the
-- decision functions (and, separately, the monitoring views) to the roles
-- that need them, with rl_grant.
-- ---------------------------------------------------------------------------

-- What each privilege set of rl_grant and rl_revoke covers: the names of
-- functions and views of the extension (every overload of a name).
CREATE FUNCTION ratelimit.privilege_set(privileges text)
RETURNS text[]
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    CASE privileges
    WHEN 'limit' THEN
        RETURN ARRAY['rl_limit', 'rl_token_bucket', 'rl_sliding_window', 'rl_gcra', 'rl_peek',
                     'rl_http_guard', 'rl_limit_trigger'];
    WHEN 'monitor' THEN
        -- The views call these as their reader: it needs EXECUTE on them.
        RETURN ARRAY['rl_zones', 'rl_counters', 'rl_keys', 'counters', 'keys'];
    ELSE
        RAISE EXCEPTION 'unknown privilege set "%"', left(privileges, 128)
            USING ERRCODE = '22023',
                  HINT = 'Use ''limit'' (the decision functions) or ''monitor'' (the views rl_zones, rl_counters and rl_keys).';
    END CASE;
END
$fn$;

-- Every function and relation the extension owns, by name, as a GRANT or
-- REVOKE target ('FUNCTION public.rl_limit(text,text,integer)', 'TABLE
-- rl_zones', 'SEQUENCE ratelimit.zone_id_seq').  The privilege audit test
-- (test/pgtap/audit.sql) reads the same catalogs on its own.
CREATE FUNCTION ratelimit.members(OUT name name, OUT target text)
RETURNS SETOF record
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT p.proname, 'FUNCTION ' || p.oid::regprocedure::text
    FROM pg_depend d
    JOIN pg_proc p ON p.oid OPERATOR(pg_catalog.=) d.objid
    WHERE d.classid OPERATOR(pg_catalog.=) 'pg_proc'::regclass
      AND d.refclassid OPERATOR(pg_catalog.=) 'pg_extension'::regclass
      AND d.refobjid OPERATOR(pg_catalog.=) (SELECT e.oid FROM pg_extension e
                                             WHERE e.extname OPERATOR(pg_catalog.=) 'ratelimit')
      AND d.deptype OPERATOR(pg_catalog.=) 'e'
    UNION ALL
    SELECT c.relname, CASE c.relkind WHEN 'S' THEN 'SEQUENCE ' ELSE 'TABLE ' END || c.oid::regclass::text
    FROM pg_depend d
    JOIN pg_class c ON c.oid OPERATOR(pg_catalog.=) d.objid
    WHERE d.classid OPERATOR(pg_catalog.=) 'pg_class'::regclass
      AND d.refclassid OPERATOR(pg_catalog.=) 'pg_extension'::regclass
      AND d.refobjid OPERATOR(pg_catalog.=) (SELECT e.oid FROM pg_extension e
                                             WHERE e.extname OPERATOR(pg_catalog.=) 'ratelimit')
      AND d.deptype OPERATOR(pg_catalog.=) 'e'
$fn$;

-- GRANT or REVOKE the privilege set to or from grantee, and for GRANT
-- USAGE on the extension's schema when the role lacks it.  The callers
-- have checked that the caller owns the extension.
CREATE FUNCTION ratelimit.change_privileges(verb text, grantee regrole, privileges text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    target text;
    extension_schema oid := (SELECT e.extnamespace FROM pg_extension e
                             WHERE e.extname OPERATOR(pg_catalog.=) 'ratelimit');
BEGIN
    IF grantee IS NULL OR privileges IS NULL THEN
        RAISE EXCEPTION 'grantee and privileges must not be null' USING ERRCODE = '22004';
    END IF;
    PERFORM ratelimit.privilege_set(privileges);      -- refuses unknown sets
    IF verb OPERATOR(pg_catalog.=) 'GRANT' AND NOT has_schema_privilege(grantee, extension_schema, 'USAGE') THEN
        EXECUTE format('GRANT USAGE ON SCHEMA %I TO %s',
                       (SELECT n.nspname FROM pg_namespace n WHERE n.oid OPERATOR(pg_catalog.=) extension_schema),
                       grantee);
    END IF;
    FOR target IN SELECT m.target FROM ratelimit.members() m
                  WHERE m.name OPERATOR(pg_catalog.=) ANY (ratelimit.privilege_set(privileges))
                  ORDER BY 1 LOOP
        EXECUTE format('%s %s ON %s %s %s', verb,
                       CASE WHEN target LIKE 'FUNCTION %' THEN 'EXECUTE' ELSE 'SELECT' END,
                       target, CASE verb WHEN 'GRANT' THEN 'TO' ELSE 'FROM' END, grantee);
    END LOOP;
END
$fn$;

-- rl_grant(role, 'limit'): the role may make rate-limit decisions
-- (rl_limit, rl_token_bucket, rl_sliding_window, rl_gcra, rl_peek,
-- rl_http_guard, and create rl_limit_trigger triggers), and use the
-- extension's schema.  rl_grant(role, 'monitor'): it may read rl_zones,
-- rl_counters and rl_keys.  Runs with the caller's rights.  GRANT by a
-- role without the grant option only warns ("no privileges were
-- granted"): rl_grant and rl_revoke refuse such a caller instead, before
-- anything else (ratelimit.change_privileges would fail on the schema).
CREATE FUNCTION rl_grant(grantee regrole, privileges text DEFAULT 'limit')
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF NOT pg_has_role(current_user, (SELECT e.extowner FROM pg_extension e
                                      WHERE e.extname OPERATOR(pg_catalog.=) 'ratelimit'), 'USAGE') THEN
        RAISE EXCEPTION 'rl_grant can only be run by the owner of extension ratelimit' USING ERRCODE = '42501';
    END IF;
    PERFORM ratelimit.change_privileges('GRANT', grantee, privileges);
END
$fn$;
COMMENT ON FUNCTION rl_grant(regrole, text) IS
    'Grants a role the decision functions (''limit'', the default) or the monitoring views (''monitor''), and USAGE on the extension''s schema';

-- Takes back what rl_grant gave (USAGE on the schema stays: the role may
-- have had it before).
CREATE FUNCTION rl_revoke(grantee regrole, privileges text DEFAULT 'limit')
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF NOT pg_has_role(current_user, (SELECT e.extowner FROM pg_extension e
                                      WHERE e.extname OPERATOR(pg_catalog.=) 'ratelimit'), 'USAGE') THEN
        RAISE EXCEPTION 'rl_revoke can only be run by the owner of extension ratelimit' USING ERRCODE = '42501';
    END IF;
    PERFORM ratelimit.change_privileges('REVOKE', grantee, privileges);
END
$fn$;
COMMENT ON FUNCTION rl_revoke(regrole, text) IS
    'Revokes what rl_grant granted (''limit'' or ''monitor''); USAGE on the schema stays';

-- Functions are created executable by PUBLIC, and earlier versions granted
-- the views to PUBLIC: take it all back, from every object the extension
-- owns, but the two pure functions.
DO $do$
DECLARE
    target text;
BEGIN
    FOR target IN SELECT m.target FROM ratelimit.members() m
                  WHERE m.name OPERATOR(pg_catalog.<>) ALL (ARRAY['rl_headers', 'rl_client_address'])
    LOOP
        EXECUTE pg_catalog.format('REVOKE ALL ON %s FROM PUBLIC', target);
    END LOOP;
END
$do$;
