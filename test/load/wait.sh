#!/usr/bin/env bash
# Load test of rl_wait and of leases, on the table store then the shmem
# store, with the cluster of scripts/lib.sh (PGHOST/PGPORT; PGOPTIONS
# passes a ratelimit.table_access on).
#
# rl_wait: pgbench clients call rl_wait(zone, ONE key, 1, '30 seconds') on
# a token_bucket zone of RATE per second, burst BURST, each call logged with
# the server clock just before and after it.  The clients always wait, so
# the tokens are taken as they arrive:
#   every call admitted (no lost wake-up: nobody waited 30 s in vain)
#   admitted <= capacity + rate * (last end - first start) + 1
#   admitted >= capacity + rate * (last start - first end) - 1
# Leases: clients acquire a lease of a concurrency zone of SLOTS slots, note
# that they are in (n = n + 1, logged), sleep 2 ms, leave (n - 1) and
# release: at most SLOTS were ever in, some acquires were refused (there was
# contention), every release returned true, and nothing is held at the end.
# Usage: wait.sh [CLIENTS] [SECONDS]
set -uo pipefail
source "$(dirname "$0")/../../scripts/lib.sh"
clients=${1:-8}
seconds=${2:-5}
rl_require_positive_ints clients seconds
rate=50
burst=5
slots=3
db=rl_wait_load
n=0 failed=0

rl_psql -d postgres -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" >/dev/null 2>&1
rl_psql -d $db >/dev/null <<SQL || rl_die "could not set up $db"
CREATE EXTENSION ratelimit;
CREATE UNLOGGED TABLE calls (store text, started timestamptz, finished timestamptz, allowed boolean);
CREATE FUNCTION logged_wait(zone text) RETURNS void LANGUAGE plpgsql AS \$\$
DECLARE
    started timestamptz := clock_timestamp();
    admitted boolean := (rl_wait(zone, 'hot', 1, '30 seconds')).allowed;
BEGIN
    INSERT INTO calls VALUES (zone, started, clock_timestamp(), admitted);
END \$\$;
CREATE UNLOGGED TABLE inside (zone text PRIMARY KEY, n int NOT NULL);
CREATE UNLOGGED TABLE acquires (zone text, got boolean);
CREATE UNLOGGED TABLE entered (zone text, n int);
CREATE UNLOGGED TABLE releases (zone text, released boolean);
SQL

wait_script=$(mktemp) lease_script=$(mktemp)
trap 'rm -f "$wait_script" "$lease_script" "$wait_script.log" "$lease_script.log"' EXIT

for store in table shmem; do
	zone=wait_$store lzone=lease_$store
	rl_psql -d $db -tA >/dev/null <<SQL || rl_die "could not define the zones"
SELECT rl_zone_set('$zone', 'token_bucket', $rate, '1 second', burst => $burst, store => '$store');
SELECT rl_zone_set('$lzone', 'concurrency', $slots, '1 minute', store => '$store');
INSERT INTO inside VALUES ('$lzone', 0);
SQL
	capacity=$(rl_psql -d $db -tA -c "SELECT capacity FROM rl_zones WHERE zone = '$zone'")

	# --- rl_wait on one key
	echo "SELECT logged_wait('$zone');" >"$wait_script"
	"$RL_PG_BIN/pgbench" -n -c "$clients" -j "$clients" -T "$seconds" -f "$wait_script" $db \
		>"$wait_script.log" 2>&1
	status=$?
	rl_check_numbered "$store store, rl_wait: pgbench ran without an error" "0 0" \
		"$status $(grep -ciE 'error|abort' "$wait_script.log")"
	[ "$status" -eq 0 ] || sed 's/^/# /' "$wait_script.log" | tail -5
	read -r calls admitted refused upper lower <<<"$(rl_psql -d $db -tA -F ' ' <<SQL
WITH agg AS (
    SELECT count(*) AS calls,
           count(*) FILTER (WHERE allowed) AS admitted,
           count(*) FILTER (WHERE NOT allowed) AS refused,
           extract(epoch FROM max(finished)) AS last_end,
           extract(epoch FROM max(started)) AS last_start,
           extract(epoch FROM min(started)) AS first_start,
           extract(epoch FROM min(finished)) AS first_end
    FROM calls WHERE store = '$zone')
SELECT calls, admitted, refused,
       round(($capacity + $rate * (last_end - first_start) + 1)::numeric, 3),
       round(($capacity + $rate * (last_start - first_end) - 1)::numeric, 3)
FROM agg;
SQL
)"
	echo "# $store store: $clients clients, ${seconds}s, rate $rate/s, capacity $capacity: $calls calls, admitted $admitted, refused $refused, bounds [$lower, $upper]"
	rl_check_numbered "$store store, rl_wait: every call admitted (no lost wake-up, none timed out)" \
		"yes 0" "$([ "${calls:-0}" -gt 0 ] && echo yes || echo no) ${refused:-?}"
	rl_check_numbered "$store store, rl_wait: admitted <= capacity + rate * (last end - first start) + 1" yes \
		"$(awk -v a="${admitted:-0}" -v u="${upper:-0}" 'BEGIN { print (a <= u) ? "yes" : "no (" a " > " u ")" }')"
	rl_check_numbered "$store store, rl_wait: admitted >= capacity + rate * (last start - first end) - 1 (tokens taken as they came)" yes \
		"$(awk -v a="${admitted:-0}" -v l="${lower:-0}" 'BEGIN { print (a >= l) ? "yes" : "no (" a " < " l ")" }')"

	# --- leases: in, 2 ms, out, release
	cat >"$lease_script" <<SQL
WITH a AS (SELECT * FROM rl_acquire('$lzone', 'hot')),
     noted AS (INSERT INTO acquires SELECT '$lzone', lease IS NOT NULL FROM a)
SELECT (lease IS NOT NULL)::int AS got, coalesce(lease, '') AS lease FROM a \gset
\if :got = 1
WITH u AS (UPDATE inside SET n = n + 1 WHERE zone = '$lzone' RETURNING n)
INSERT INTO entered SELECT '$lzone', n FROM u;
SELECT pg_sleep(0.002);
UPDATE inside SET n = n - 1 WHERE zone = '$lzone';
INSERT INTO releases SELECT '$lzone', rl_release(:lease);
\endif
SQL
	"$RL_PG_BIN/pgbench" -n -M extended -c "$clients" -j "$clients" -T "$seconds" -f "$lease_script" $db \
		>"$lease_script.log" 2>&1
	status=$?
	rl_check_numbered "$store store, leases: pgbench ran without an error" "0 0" \
		"$status $(grep -ciE 'error|abort' "$lease_script.log")"
	[ "$status" -eq 0 ] || sed 's/^/# /' "$lease_script.log" | tail -5
	read -r got refused_acq max_in released not_released left held <<<"$(rl_psql -d $db -tA -F ' ' <<SQL
SELECT (SELECT count(*) FILTER (WHERE got) FROM acquires WHERE zone = '$lzone'),
       (SELECT count(*) FILTER (WHERE NOT got) FROM acquires WHERE zone = '$lzone'),
       (SELECT coalesce(max(n), 0) FROM entered WHERE zone = '$lzone'),
       (SELECT count(*) FILTER (WHERE released) FROM releases WHERE zone = '$lzone'),
       (SELECT count(*) FILTER (WHERE NOT released) FROM releases WHERE zone = '$lzone'),
       (SELECT n FROM inside WHERE zone = '$lzone'),
       (SELECT count(*) FROM rl_leases WHERE zone = '$lzone');
SQL
)"
	echo "# $store store: $clients clients, ${seconds}s, $slots slots: $got leases, $refused_acq acquires refused, at most $max_in in at once, $released released"
	rl_check_numbered "$store store, leases: never more than $slots in at once (and some in)" yes \
		"$([ "${max_in:-0}" -ge 1 ] && [ "${max_in:-0}" -le "$slots" ] && echo yes || echo "no (max $max_in)")"
	rl_check_numbered "$store store, leases: some acquires refused (contention)" yes \
		"$([ "${refused_acq:-0}" -gt 0 ] && echo yes || echo "no ($refused_acq refused)")"
	rl_check_numbered "$store store, leases: every lease released once, with true; none held, none in at the end" \
		"$got 0 0 0" "$released $not_released $left $held"
done
rl_psql -d postgres -c "DROP DATABASE $db" >/dev/null 2>&1
echo "1..$n"
[ "$failed" -eq 0 ]
