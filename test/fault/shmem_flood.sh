#!/usr/bin/env bash
# A flood of junk keys against the shmem store, as an attacker makes it: a
# role granted only the 'limit' set calls one zone with 20 x
# ratelimit.shmem_max_keys keys of its own choosing.  Starts a cluster of
# its own per full policy (allow, deny, error), with shmem_max_keys = 1000
# (34 sets of 31: 1054 keys) and shmem_max_lease_keys = 16, so that it runs
# in seconds and no other suite's store is touched.  Decisions run on the
# test clock: nothing refills, every count below is exact.
#
#   (a) one-call junk keys (each misses 1 token of 5) fill the store: all
#       admitted, the store makes room out of the flooding zone's own junk;
#       a drained key of the flooded zone stays refused, a half-used one
#       keeps its count; drained, half-used and new keys of another zone,
#       of a fixed-window zone and of a zone in another database decide as
#       their twin zones on the table store (and as the numbers say); a new
#       key of the flooded zone is limited normally; the other zones lose
#       no key and find the store never full
#   (b) the junk keys called again: what the flood was let through stays
#       within capacity x keys + forgiven (the bound rl_counters counts)
#   (c) a flood of drained keys (cost 5 of 5) in a second zone: it takes
#       room from the larger zone until the two hold as many, then finds
#       only its own drained keys: the policy decides (allow: admitted
#       unstored, deny: refused, error: 53400), counted in "full" and
#       logged; the other zones still decide as their twins; the bound
#       holds (the larger zone's keys it took room from were drained too:
#       forgiven, and counted); a call on several zones with such a key is
#       refused whole (deny, error) or decided without it (allow)
#   (d) leases: junk leases fill shmem_max_lease_keys; a 2-slot zone's
#       new key is then refused, whatever the policy (fail closed,
#       counted); once a junk lease is released it gets 2 slots, never 3
set -uo pipefail
source "$(dirname "$0")/../../scripts/lib.sh"

trap 'rl_cluster_stop' EXIT
CLOCK='2026-01-01 00:00:00+00'
MAX_KEYS=1000
FLOOD=$((20 * MAX_KEYS))

# q DB SQL [role]: one statement on DB at CLOCK (as role when given).
q() {
	local db=$1 sql=$2 role=${3:-}
	local args=(-c "SET ratelimit.now_override = '$CLOCK'")
	[ -z "$role" ] || args+=(-c "SET ROLE $role")
	rl_psql -d "$db" -tA "${args[@]}" -c "$sql" 2>&1
}

# setup DB ZONE_SQL...: a fresh database with the extension, the helpers
# below and the zones.
setup() {
	local db=$1; shift
	rl_psql -d postgres -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" >/dev/null
	rl_psql -d "$db" >/dev/null <<'SQL'
CREATE EXTENSION ratelimit;
DO $$ BEGIN CREATE ROLE flooder; EXCEPTION WHEN duplicate_object THEN NULL; END $$;
SELECT rl_grant('flooder');
-- flood(zone, prefix, n, cost): n calls on the keys prefix || 1 .. n, each
-- in a subtransaction (policy error raises 53400): "admitted refused errors".
CREATE FUNCTION flood(zone text, prefix text, n int, cost int) RETURNS text LANGUAGE plpgsql
SET client_min_messages = error AS $$
DECLARE
    admitted int := 0;
    refused int := 0;
    errors int := 0;
BEGIN
    FOR i IN 1 .. n LOOP
        BEGIN
            IF (rl_limit(zone, prefix || i, cost)).allowed THEN
                admitted := admitted + 1;
            ELSE
                refused := refused + 1;
            END IF;
        EXCEPTION WHEN configuration_limit_exceeded THEN
            errors := errors + 1;
        END;
    END LOOP;
    RETURN admitted || ' ' || refused || ' ' || errors;
END $$;
-- trace(zone, key, n): n calls of cost 1, each its remaining count, or x
-- when refused.
CREATE FUNCTION trace(zone text, key text, n int) RETURNS text LANGUAGE sql AS $$
    SELECT string_agg(CASE WHEN (r).allowed THEN (r).remaining::text ELSE 'x' END, ',' ORDER BY i)
    FROM (SELECT i, rl_limit(zone, key) AS r FROM generate_series(1, n) i OFFSET 0) calls
$$;
-- legit(zone): a drained key and a half-used one, before any flood.
CREATE FUNCTION legit(zone text) RETURNS void LANGUAGE sql AS $$
    SELECT rl_limit(zone, 'drained', 5), rl_limit(zone, 'partial', 2)
$$;
-- how(zone): the calls a user of the zone makes after the flood: the
-- drained key once, the half-used one 4 times, a new key 7 times.
CREATE FUNCTION how(zone text) RETURNS text LANGUAGE sql AS $$
    SELECT trace(zone, 'drained', 1) || '|' || trace(zone, 'partial', 4) || '|' || trace(zone, 'fresh', 7)
$$;
-- try_acquire(zone, key): granted, refused, or the SQLSTATE it raised.
CREATE FUNCTION try_acquire(zone text, key text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    RETURN CASE WHEN (rl_acquire(zone, key)).allowed THEN 'granted' ELSE 'refused' END;
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE;
END $$;
-- try_limit(zones, key): allowed, refused, or the SQLSTATE it raised.
CREATE FUNCTION try_limit(zones text[], key text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    RETURN CASE WHEN (rl_limit(zones, key)).allowed THEN 'allowed' ELSE 'refused' END;
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE;
END $$;
-- anew(zone): the drained, half-used and new keys forgotten and made again.
CREATE FUNCTION anew(zone text) RETURNS void LANGUAGE sql AS $$
    SELECT rl_reset(zone, k) FROM unnest(ARRAY['drained', 'partial', 'fresh']) k;
    SELECT legit(zone);
$$;
GRANT EXECUTE ON FUNCTION flood(text, text, int, int), try_acquire(text, text) TO flooder;
SQL
	local zone
	for zone in "$@"; do rl_psql -d "$db" -c "SELECT $zone" >/dev/null; done
}

# room DB ZONE: "evicted forgiven full keys" of the zone in rl_counters.
room() {
	q "$1" "SELECT evicted || ' ' || forgiven || ' ' || \"full\" || ' ' || keys FROM rl_counters WHERE zone = '$2'"
}
# bound DB ZONE CAPACITY KEYS [allow]: whether the zone admitted at most
# CAPACITY x KEYS + forgiven (+ full under allow, whose calls it lets
# through unstored): on the test clock nothing refills.
bound() {
	local extra=0
	[ "${5:-}" = allow ] && extra='"full"'
	q "$1" "SELECT allowed <= $3 * $4 + forgiven + $extra FROM rl_counters WHERE zone = '$2'"
}
AFTER='x|2,1,0,x|4,3,2,1,0,x,x'	# how() of a zone that kept its keys

for policy in allow deny error; do
	echo "# shmem_full_policy = $policy"
	rl_cluster_start "flood-$policy" "fsync = off" "ratelimit.shmem_max_keys = $MAX_KEYS" \
		"ratelimit.shmem_max_lease_keys = 16" "ratelimit.shmem_full_policy = $policy"
	shmem="store => 'shmem'"
	setup rl_flood \
		"rl_zone_set('victim', 'token_bucket', 5, '1 minute', $shmem)" \
		"rl_zone_set('victim_t', 'token_bucket', 5, '1 minute')" \
		"rl_zone_set('drain', 'token_bucket', 5, '1 minute', $shmem)" \
		"rl_zone_set('other', 'token_bucket', 5, '1 minute', $shmem)" \
		"rl_zone_set('other_t', 'token_bucket', 5, '1 minute')" \
		"rl_zone_set('other_fw', 'fixed_window', 5, '1 minute', $shmem)" \
		"rl_zone_set('other_fw_t', 'fixed_window', 5, '1 minute')" \
		"rl_zone_set('slots', 'concurrency', 2, '1 hour', $shmem)" \
		"rl_zone_set('junk_slots', 'concurrency', 2, '1 hour', $shmem)"
	setup rl_flood_b \
		"rl_zone_set('other_db', 'token_bucket', 5, '1 minute', $shmem)" \
		"rl_zone_set('other_db_t', 'token_bucket', 5, '1 minute')"
	for zone in victim victim_t other other_t other_fw other_fw_t; do q rl_flood "SELECT legit('$zone')" >/dev/null; done
	for zone in other_db other_db_t; do q rl_flood_b "SELECT legit('$zone')" >/dev/null; done

	# (a) The flood: one call on each of 20000 junk keys, as the flooder.
	rl_check "(a $policy) the flooder's $FLOOD one-call keys: all admitted (each misses 1 token)" "$FLOOD 0 0" \
		"$(q rl_flood "SELECT flood('victim', 'junk', $FLOOD, 1)" flooder)"
	# The store holds 1054 keys; the other zones' 6 stay.
	rl_check "(a $policy) the store made room out of the flooding zone's own junk: 1 token forgiven a key, none found it full" \
		"$((FLOOD + 2 - 1048)) $((FLOOD + 2 - 1048)) 0 1048" "$(room rl_flood victim)"
	rl_check "(a $policy) a drained key of the flooded zone stays refused; a half-used one keeps its count" \
		"x|2,1,0,x" "$(q rl_flood "SELECT trace('victim', 'drained', 1) || '|' || trace('victim', 'partial', 4)")"
	rl_check "(a $policy) a new key of the flooded zone: admitted up to its capacity, then refused" \
		"4,3,2,1,0,x,x" "$(q rl_flood "SELECT trace('victim', 'newcomer', 7)")"
	rl_check "(a $policy) another zone decides as its twin on the table store" "$AFTER $AFTER" \
		"$(q rl_flood "SELECT how('other') || ' ' || how('other_t')")"
	rl_check "(a $policy) a fixed-window zone decides as its twin" "$AFTER $AFTER" \
		"$(q rl_flood "SELECT how('other_fw') || ' ' || how('other_fw_t')")"
	rl_check "(a $policy) a zone of another database decides as its twin" "$AFTER $AFTER" \
		"$(q rl_flood_b "SELECT how('other_db') || ' ' || how('other_db_t')")"
	rl_check "(a $policy) the other zones lost no key and never found the store full" "0 0 0 3 0 0 0 3 0 0 0 3" \
		"$(room rl_flood other) $(room rl_flood other_fw) $(room rl_flood_b other_db)"

	# (b) The junk keys again, 5 calls each: a kept key admits 4 more, a
	# forgotten one 5.  Over the whole test the zone may admit 5 a key, plus
	# what evictions forgave.
	q rl_flood "SELECT flood('victim', 'junk', $FLOOD, 1) FROM generate_series(1, 5)" flooder >/dev/null
	rl_check "(b $policy) the flooded zone admitted at most 5 x its keys + forgiven (+ full under allow)" t \
		"$(bound rl_flood victim 5 $((FLOOD + 3)) $policy)"

	# (c) A flood of drained keys in another zone: nothing cheap to forget.
	read -r admitted refused errors <<<"$(q rl_flood "SELECT flood('drain', 'dry', $FLOOD, 5)" flooder)"
	read -r evicted forgiven full keys <<<"$(room rl_flood drain)"
	read -r victim_keys <<<"$(room rl_flood victim | cut -d' ' -f4)"
	# Until then, each set keeps a key of the flooded zone (or the last of
	# a set's 31 went to the drained flood a little early).
	rl_check "(c $policy) the drained flood took room from the flooded zone until the two held about as many" yes \
		"$([ $((victim_keys - keys)) -ge -1 ] && [ $((victim_keys - keys)) -le 31 ] && echo yes || echo no)"
	case $policy in
		allow) want="$FLOOD 0 0" ;;
		deny) want="$keys $((FLOOD - keys)) 0" ;;
		error) want="$keys 0 $((FLOOD - keys))" ;;
	esac
	rl_check "(c $policy) then its own keys, all drained, could not make room: the policy decided ($want)" \
		"$want $((FLOOD - keys)) 0" "$admitted $refused $errors $full $evicted"
	if [ "$policy" = error ]; then
		said=$(q rl_flood "SELECT rl_limit('drain', 'one-more', 5)" | grep -c 'ERROR:  the ratelimit shmem store has no room for a new key of drain')
	else
		said=$(grep -c "WARNING:  the ratelimit shmem store is full: a new key of drain found no room" "$RL_CLUSTER_DIR/server.log")
	fi
	rl_check "(c $policy) the caller or the server log is told the store is full" yes \
		"$([ "$said" -ge 1 ] && echo yes || echo no)"
	q rl_flood "SELECT anew(z) FROM unnest(ARRAY['other', 'other_t', 'other_fw', 'other_fw_t']) z" >/dev/null
	q rl_flood_b "SELECT anew(z) FROM unnest(ARRAY['other_db', 'other_db_t']) z" >/dev/null
	rl_check "(c $policy) keys made again in the other zones decide as their twins" "$AFTER $AFTER|$AFTER $AFTER|$AFTER $AFTER" \
		"$(q rl_flood "SELECT how('other') || ' ' || how('other_t')")|$(
		   q rl_flood "SELECT how('other_fw') || ' ' || how('other_fw_t')")|$(
		   q rl_flood_b "SELECT how('other_db') || ' ' || how('other_db_t')")"
	rl_check "(c $policy) the other zones lost no key and never found the store full" "0 0 0 3 0 0 0 3 0 0 0 3" \
		"$(room rl_flood other) $(room rl_flood other_fw) $(room rl_flood_b other_db)"
	# Several zones in one call, one of them the drained zone, whose new key
	# the policy decides: refused (deny) or raising (error), none of the
	# others is charged; let through (allow), the others decide without it.
	case $policy in
		allow) want="allowed 4 4" ;;
		deny) want="refused 5 5" ;;
		error) want="53400 5 5" ;;
	esac
	rl_check "(c $policy) rl_limit(zones[]) with the drained zone's new key: $want" "$want" \
		"$(q rl_flood "SELECT try_limit(ARRAY['other_t', 'other', 'drain'], 'multi')") $(
		   q rl_flood "SELECT (rl_peek('other_t', 'multi', 0)).remaining || ' ' || (rl_peek('other', 'multi', 0)).remaining")"
	q rl_flood "SELECT flood('drain', 'dry', $FLOOD, 5)" flooder >/dev/null
	rl_check "(c $policy) both flooded zones admitted at most 5 x their keys + forgiven (+ full under allow)" "t t" \
		"$(bound rl_flood drain 1 $FLOOD $policy) $(bound rl_flood victim 5 $((FLOOD + 3)))"

	# (d) Leases.  A shmem lease lasts as long as the session that took it:
	# the flooder's session holds a lease on each of 16 junk keys while the
	# tenant tries.
	rl_psql -d rl_flood -tA -c "SET ratelimit.now_override = '$CLOCK'" -c "SET ROLE flooder" \
		-c "SELECT count(*) FILTER (WHERE (rl_acquire('junk_slots', 'j' || i)).allowed) FROM generate_series(1, 16) i" \
		-c "SELECT pg_sleep(120)" >/dev/null 2>&1 &
	holder=$!
	for _ in $(seq 1 100); do
		[ "$(q rl_flood "SELECT count(*) FROM rl_leases WHERE zone = 'junk_slots'")" = 16 ] && break
		sleep 0.1
	done
	rl_check "(d $policy) 16 junk keys hold a lease each: the lease table is full" 16 \
		"$(q rl_flood "SELECT count(*) FROM rl_leases WHERE zone = 'junk_slots'")"
	want=refused
	[ "$policy" = error ] && want=53400
	# tenant: 3 acquires, then the tenant's leases, in one session.
	tenant() {
		rl_psql -d rl_flood -tA -c "SET ratelimit.now_override = '$CLOCK'" -c "SET client_min_messages = error" \
			-c "SELECT string_agg(try_acquire('slots', 'tenant'), ' ') FROM generate_series(1, 3)" \
			-c "SELECT count(*) FROM rl_leases WHERE zone = 'slots'" 2>&1 | tr '\n' ' ' | sed 's/ $//'
	}
	rl_check "(d $policy) a 2-slot zone's new key is refused 3 times (fail closed), holding nothing" "$want $want $want 0" "$(tenant)"
	rl_check "(d $policy) counted as full" 3 "$(room rl_flood slots | cut -d' ' -f3)"
	q rl_flood "SELECT rl_reset('junk_slots', 'j1')" >/dev/null
	rl_check "(d $policy) a junk key's lease gone: the tenant gets its 2 slots, the third is refused" \
		"granted granted refused 2" "$(tenant)"
	kill "$holder" 2>/dev/null; wait "$holder" 2>/dev/null
	rl_check "(d $policy) no backend crashed" no \
		"$(grep -qE 'terminated by signal|server process .* was terminated|TRAP' "$RL_CLUSTER_DIR/server.log" && echo yes || echo no)"
	rl_cluster_stop
done

echo "fault (shmem flood): $passed passed, $failed failed"
[ "$failed" -eq 0 ]
