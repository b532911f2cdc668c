#!/usr/bin/env bash
# Load test: rl_limit(zones[], key) under concurrency.  Two limits on each
# key, out of refill's reach for the run (fixed windows of a day):
#   A  200 per day       B  60 per day, history on
# pgbench clients call rl_limit(ARRAY[A, B], key) on 5 keys, half of the
# calls naming the zones the other way round (ARRAY[B, A]: the locks are
# still taken in one order, so no deadlock).  More calls per key than B
# admits, so B refuses most of them.  Afterwards, per key:
#   - B admitted exactly its 60 (rl_peek shows 0 left; its history has 60
#     allowed rows, and one row per call);
#   - A was charged only for those 60, never for a call B refused:
#     rl_peek(A) shows 140 left, exactly;
# and every pgbench transaction ran, none failed (a deadlock or a
# serialization failure would fail one).
# Cases: the table store on each access path (direct, spi), the shmem
# store, and a mixed call (A on the table store, B on shmem).  CLIENTS
# (default 4) x TX (default 300) calls per case.  Starts a cluster of its
# own (scripts/lib.sh).  Prints "ok"/"not ok" lines; exits non-zero on a
# failure.
#   bash test/load/multi_zone.sh
set -uo pipefail
source "$(dirname "$0")/../../scripts/lib.sh"
CLIENTS=${CLIENTS:-4}
TX=${TX:-300}
rl_require_positive_ints CLIENTS TX
KEYS=5 CAP_A=200 CAP_B=60
[ $((CLIENTS * TX)) -gt $((KEYS * CAP_B * 2)) ] \
	|| rl_die "CLIENTS x TX must exceed $((KEYS * CAP_B * 2)), or B refuses too little to test anything"
db=rl_multi
unset PGOPTIONS

dir=$(mktemp -d)
trap 'rm -rf "$dir"; rl_cluster_stop' EXIT
rl_cluster_start multi_zone "fsync = off"
rl_psql -d postgres -c "CREATE DATABASE $db" >/dev/null
rl_psql -d $db >/dev/null <<SQL
CREATE EXTENSION ratelimit;
SELECT rl_zone_set('t_a', 'fixed_window', $CAP_A, '1 day'),
       rl_zone_set('t_b', 'fixed_window', $CAP_B, '1 day', history => true),
       rl_zone_set('s_a', 'fixed_window', $CAP_A, '1 day', store => 'shmem'),
       rl_zone_set('s_b', 'fixed_window', $CAP_B, '1 day', store => 'shmem', history => true),
       rl_zone_set('m_a', 'fixed_window', $CAP_A, '1 day'),
       rl_zone_set('m_b', 'fixed_window', $CAP_B, '1 day', store => 'shmem', history => true);
SQL

q() { PGOPTIONS=$1 rl_psql -d $db -tA -F ' ' -c "$2" 2>&1; }

# run_case LABEL PGOPTIONS ZONE_A ZONE_B
run_case() {
	local label=$1 opts=$2 a=$3 b=$4 log status
	printf '\\set k random(1, %d)\nSELECT rl_limit(ARRAY[%s, %s], %s || :k);\n' \
		$KEYS "'$a'" "'$b'" "'$label:'" >"$dir/ab.sql"
	printf '\\set k random(1, %d)\nSELECT rl_limit(ARRAY[%s, %s], %s || :k);\n' \
		$KEYS "'$b'" "'$a'" "'$label:'" >"$dir/ba.sql"
	log=$dir/$label.log
	PGOPTIONS=$opts "$RL_PG_BIN/pgbench" -n -c "$CLIENTS" -j "$CLIENTS" -t "$TX" -M prepared \
		-f "$dir/ab.sql@1" -f "$dir/ba.sql@1" "$db" >"$log" 2>&1
	status=$?
	rl_check "$label: pgbench ran every call (exit status)" 0 "$status"
	rl_check "$label: ... no transaction failed" \
		"$((CLIENTS * TX))/$((CLIENTS * TX))" \
		"$(sed -n 's/^number of transactions actually processed: \([0-9]*\/[0-9]*\)$/\1/p' "$log")"
	[ "$status" -eq 0 ] || sed 's/^/# /' "$log" | tail -20
	rl_check "$label: every call is in B's history" "$((CLIENTS * TX))" \
		"$(q "$opts" "SELECT count(*) FROM ratelimit.history WHERE zone = '$b' AND key LIKE '$label:%'")"
	local k
	for k in $(seq 1 $KEYS); do
		rl_check "$label key $k: B admitted exactly $CAP_B (history; none left)" "$CAP_B 0" \
			"$(q "$opts" "SELECT (SELECT count(*) FROM ratelimit.history WHERE zone = '$b' AND key = '$label:$k' AND allowed),
			                     (SELECT remaining FROM rl_peek('$b', '$label:$k', 0))")"
		rl_check "$label key $k: A was charged only for B's admissions" "$((CAP_A - CAP_B))" \
			"$(q "$opts" "SELECT remaining FROM rl_peek('$a', '$label:$k', 0)")"
	done
}

run_case direct "-c ratelimit.table_access=direct" t_a t_b
run_case spi "-c ratelimit.table_access=spi" t_a t_b
run_case shmem "" s_a s_b
run_case mixed "" m_a m_b

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
