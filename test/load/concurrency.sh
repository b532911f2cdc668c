#!/usr/bin/env bash
# Load test: pgbench clients hammer ONE key; every call is logged with the
# server clock just before and after it.  The bucket stays full until the
# first decision d1, which lies between the first call's start and the
# first call's end, so:
#   admitted <= capacity + rate * (end of last call - first start)
#   admitted >= capacity + rate * (start of last refused call - first end) - 1
# (a refused call proves the bucket held under one token at that moment).
# Usage: concurrency.sh [CLIENTS] [SECONDS]; uses PGHOST/PGPORT from
# scripts/lib.sh and the path chosen by PGOPTIONS (or the shmem store:
# PGOPTIONS="-c ratelimit.default_store=shmem").  The key is new on every
# run: shmem state outlives the test database, and the bounds need a key
# that starts full.
# NEW_KEYS=1: a call in four is on a key never seen before, from the
# same clients, up to NEW_KEYS_MAX (20000) of them: on the shmem store they
# make it grow (split sets) under the calls on the hot key, which must keep
# its bounds; every new key must then be kept exactly once.  The cap keeps
# the outcome the same on any host: a fast one would otherwise make more
# keys that never recover than the store holds (ratelimit.shmem_max_keys,
# 100000), and the store would rightly forget some (test/fault/shmem_flood.sh
# tests that, on a store of its own).
set -uo pipefail
source "$(dirname "$0")/../../scripts/lib.sh"
clients=${1:-2}
seconds=${2:-3}
rate=200
window=1
db=rl_load
key="hot-$$-$(date +%s%N)"

rl_psql -d postgres -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" >/dev/null 2>&1
rl_psql -d $db >/dev/null <<SQL
CREATE EXTENSION ratelimit;
CREATE UNLOGGED TABLE calls (started timestamptz, finished timestamptz, allowed boolean);
CREATE FUNCTION logged_call() RETURNS void LANGUAGE plpgsql AS \$\$
DECLARE
    started timestamptz := clock_timestamp();
    remaining bigint := rl_token_bucket('$key', $rate, $window);
BEGIN
    INSERT INTO calls VALUES (started, clock_timestamp(), remaining >= 0);
END \$\$;
SELECT rl_token_bucket('$key', $rate, $window, 0);
CREATE SEQUENCE new_keys;
SQL

script=$(mktemp) new_script=$(mktemp)
echo "SELECT logged_call();" > "$script"
scripts=(-f "$script")
if [ "${NEW_KEYS:-0}" = 1 ]; then
	# Capacity 100, refilled at 0.001/s: a new key holds 99 tokens for
	# the whole test, and has not recovered (the store keeps it while it
	# has room).  Past the cap a call does nothing.
	echo "SELECT rl_token_bucket('$key-new-' || n, 0.001, 100000)
	      FROM (SELECT nextval('new_keys') AS n) s WHERE n <= ${NEW_KEYS_MAX:-20000};" > "$new_script"
	scripts=(-f "$script@3" -f "$new_script@1")
fi
"$RL_PG_BIN/pgbench" -n -M prepared -c "$clients" -j "$clients" -T "$seconds" "${scripts[@]}" $db >/dev/null 2>&1
status=$?
rm -f "$script" "$new_script"

result=$(rl_psql -d $db -tA -F ' ' <<SQL
WITH agg AS (
    SELECT count(*) FILTER (WHERE allowed) AS admitted,
           count(*) FILTER (WHERE NOT allowed) AS refused,
           extract(epoch FROM max(finished)) AS last_end,
           extract(epoch FROM max(started) FILTER (WHERE NOT allowed)) AS last_refused_start,
           extract(epoch FROM min(started)) AS first_start,
           extract(epoch FROM min(finished)) AS first_end
    FROM calls)
SELECT admitted, refused,
       round(($rate * $window + $rate * (last_end - first_start))::numeric, 3) AS upper_bound,
       round(($rate * $window + $rate * (last_refused_start - first_end) - 1)::numeric, 3) AS lower_bound
FROM agg;
SQL
)
# Where the bucket was kept: one row of ratelimit.state, or none in shmem.
read -r store rows <<<"$(rl_psql -d $db -tA -F ' ' \
	-c "SELECT current_setting('ratelimit.default_store'), count(*) FROM ratelimit.state WHERE key = '$key'")"
if [ "${NEW_KEYS:-0}" = 1 ]; then
	# Each new key once more, now that the store has grown: found where it
	# was put, or it would be made twice (one of them with 99 tokens).
	read -r new_calls new_kept new_distinct new_full <<<"$(rl_psql -d $db -tA -F ' ' <<SQL
DO \$\$ BEGIN
    PERFORM count(rl_token_bucket('$key-new-' || i, 0.001, 100000))
    FROM generate_series(1, (SELECT CASE WHEN is_called THEN least(last_value, ${NEW_KEYS_MAX:-20000}) ELSE 0 END FROM new_keys)) i;
END \$\$;
SELECT (SELECT CASE WHEN is_called THEN least(last_value, ${NEW_KEYS_MAX:-20000}) ELSE 0 END FROM new_keys),
       count(*), count(DISTINCT key), count(*) FILTER (WHERE remaining <> 98)
FROM rl_keys WHERE key LIKE '$key-new-%';
SQL
)"
fi
rl_psql -d postgres -c "DROP DATABASE $db" >/dev/null 2>&1
read -r admitted refused upper lower <<<"$result"
echo "# $clients clients, ${seconds}s, rate $rate/s, capacity $((rate * window)), $store store: admitted $admitted, refused $refused, bounds [$lower, $upper]"
if [ "$rows" = "$([ "$store" = shmem ] && echo 0 || echo 1)" ]; then
	echo "ok - the bucket was kept in the $store store ($rows row in ratelimit.state)"
	other_checks_ok=1
else
	echo "not ok - store $store, but $rows rows in ratelimit.state"
	other_checks_ok=0
fi
ok=1
[ "$status" -eq 0 ] || { echo "not ok - pgbench failed ($status)"; ok=0; }
if [ "${NEW_KEYS:-0}" = 1 ]; then
	if [ "$new_calls" -gt 0 ] && [ "$new_kept" = "$new_calls" ] && [ "$new_distinct" = "$new_calls" ] \
		&& [ "$new_full" = 0 ]; then
		echo "ok - $new_calls new keys, made at the same time, each kept once and found again (98 tokens)"
	else
		echo "not ok - $new_calls new keys: $new_kept kept, $new_distinct distinct, $new_full with other than 98 tokens"
		other_checks_ok=0
	fi
fi
if [ "$ok" -eq 1 ] && [ "$refused" -gt 0 ] \
	&& awk -v a="$admitted" -v u="$upper" -v l="$lower" 'BEGIN { exit !(a <= u && a >= l) }'; then
	echo "ok - admitted within capacity + rate * elapsed, at most one token below"
	[ "$other_checks_ok" -eq 1 ]
	exit
fi
echo "not ok - admitted $admitted outside [$lower, $upper] (refused $refused)"
exit 1
