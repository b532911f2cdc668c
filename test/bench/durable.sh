#!/usr/bin/env bash
# What a durable zone costs next to an unlogged one: the same token bucket
# (1e9 a second: never refuses, so every call writes its row) in
# ratelimit.state (UNLOGGED) and in ratelimit.durable_state (logged, WAL for
# every decision).  One run, the variants interleaved round by round, which
# goes first alternating: compare the ratios of one run.
#
#   bash test/bench/durable.sh
#
# One cluster of the installed build (RL_PG_BIN, default PostgreSQL 15),
# fsync on (the cost of durability is the flush), ratelimit preloaded; zones
# 'bench_unlogged' and 'bench_durable' (durable => true), keys 'k1' ..
# 'k10000' made in each before measuring.
#  1. In a statement: SELECT count(f) FROM generate_series(1, 10000) i,
#     f = rl_limit(zone, 'k' || i), timed inside the server
#     (clock_timestamp() around it, after one call in the session): µs a
#     call, median of DURABLE_REPS repetitions.  One commit per 10,000
#     decisions: this is the WAL's cost, not the flush's.
#  2. pgbench -M prepared -n, DURABLE_CLIENTS clients, \set k random(1,
#     10000) and SELECT rl_limit(zone, 'k' || :k): one decision and one
#     commit a transaction; with synchronous_commit on (each durable commit
#     waits for its WAL flush) and off (PGOPTIONS); DURABLE_SECONDS a run,
#     DURABLE_ROUNDS rounds: median tps.  SELECT 1 runs beside them as the
#     floor.
# Prints a Markdown table; raw figures go to test/bench/out/durable.txt.
# Environment: DURABLE_REPS (default 9), DURABLE_ROUNDS (5), DURABLE_SECONDS
# (3), DURABLE_CLIENTS ("1 2").
set -euo pipefail
source "$(dirname "$0")/../../scripts/lib.sh"
source "$(dirname "$0")/pgbench.sh"

REPS=${DURABLE_REPS:-9}
ROUNDS=${DURABLE_ROUNDS:-5}
SECONDS_PER_RUN=${DURABLE_SECONDS:-3}
CLIENTS=${DURABLE_CLIENTS:-1 2}
OUT=$RL_ROOT/test/bench/out
mkdir -p "$OUT"
raw=$OUT/durable.txt
work=$(mktemp -d)
trap 'rl_cluster_stop; rm -rf "$work"' EXIT

RL_PRELOAD=ratelimit rl_cluster_start bench-durable "fsync = on" "synchronous_commit = on" >/dev/null
q() { rl_psql -d postgres -tA -c "$1"; }
q "CREATE EXTENSION ratelimit" >/dev/null
q "SELECT rl_zone_set('bench_unlogged', 'token_bucket', 1000000000, '1 second'),
          rl_zone_set('bench_durable', 'token_bucket', 1000000000, '1 second', durable => true)" >/dev/null
q "SELECT count(rl_limit(z, 'k' || i)) FROM unnest(ARRAY['bench_unlogged', 'bench_durable']) z,
          generate_series(1, 10000) i" >/dev/null
rl_check_quiet() { [ "$2" = "$3" ] || rl_die "$1: expected $2, got $3"; }
rl_check_quiet "rows in the unlogged table" 10000 "$(q "SELECT count(*) FROM ratelimit.state")"
rl_check_quiet "rows in the durable table" 10000 "$(q "SELECT count(*) FROM ratelimit.durable_state")"
{
	echo "# test/bench/durable.sh, $(date -u '+%Y-%m-%d %H:%M UTC'), $("$RL_PG_BIN/postgres" --version)"
	echo "# $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); data directory on $(df -T "$RL_PGDATA" | awk 'NR==2 {print $2}')"
} >"$raw"

# 1. In a statement.
in_statement() {	# ZONE: µs a call over 10,000 keys
	rl_psql -d postgres -tA -c "SELECT count(rl_limit('$1', 'k1'))" -c "
		DO \$\$
		DECLARE t0 timestamptz; n bigint;
		BEGIN
			t0 := clock_timestamp();
			SELECT count(rl_limit('$1', 'k' || i)) INTO n FROM generate_series(1, 10000) i;
			IF n <> 10000 THEN RAISE EXCEPTION 'counted %', n; END IF;
			RAISE NOTICE 'us=%', round(extract(epoch FROM clock_timestamp() - t0) * 1e6 / 10000, 3);
		END \$\$" 2>&1 | sed -n 's/.*us=\([0-9.]*\).*/\1/p'
}
declare -A stmt
for rep in $(seq 1 "$REPS"); do
	order=(bench_unlogged bench_durable)
	[ $((rep % 2)) -eq 0 ] && order=(bench_durable bench_unlogged)
	for zone in "${order[@]}"; do
		v=$(in_statement "$zone")
		[ -n "$v" ] || rl_die "no timing for $zone"
		stmt[$zone]+="$v "
		echo "in-statement $zone rep $rep: $v us" >>"$raw"
	done
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

# 2. pgbench.
echo 'SELECT 1;' >"$work/select1.sql"
for zone in bench_unlogged bench_durable; do
	printf '\\set k random(1, 10000)\nSELECT rl_limit(%s, %s);\n' "'$zone'" "'k' || :k" >"$work/$zone.sql"
done
declare -A tps
variants=("select1:on" "bench_unlogged:on" "bench_durable:on" "bench_unlogged:off" "bench_durable:off")
for round in $(seq 1 "$ROUNDS"); do
	for clients in $CLIENTS; do
		list=("${variants[@]}")
		if [ $((round % 2)) -eq 0 ]; then
			list=()
			for ((i = ${#variants[@]} - 1; i >= 0; i--)); do list+=("${variants[$i]}"); done
		fi
		for v in "${list[@]}"; do
			script=${v%%:*} sync=${v##*:}
			read -r t _ < <(pgb_checked "$v" "$clients" "$work/pgbench.log" "-c synchronous_commit=$sync" \
				-T "$SECONDS_PER_RUN" -f "$work/$script.sql")
			tps[$v:$clients]+="$t "
			echo "pgbench $v clients $clients round $round: $t tps" >>"$raw"
		done
	done
done

u=$(echo "${stmt[bench_unlogged]}" | median)
d=$(echo "${stmt[bench_durable]}" | median)
{
	echo
	echo "| measure | unlogged | durable | durable / unlogged |"
	echo "| --- | ---: | ---: | ---: |"
	printf '| in a statement, µs a call (median of %d) | %s | %s | %.2f× the time |\n' "$REPS" "$u" "$d" "$(echo "$d / $u" | bc -l)"
	for clients in $CLIENTS; do
		for sync in on off; do
			tu=$(echo "${tps[bench_unlogged:$sync:$clients]}" | median)
			td=$(echo "${tps[bench_durable:$sync:$clients]}" | median)
			printf '| pgbench, %d client(s), synchronous_commit %s, tps (median of %d) | %.0f | %.0f | %.2f× the rate |\n' \
				"$clients" "$sync" "$ROUNDS" "$tu" "$td" "$(echo "$td / $tu" | bc -l)"
		done
		printf '| pgbench, %d client(s), SELECT 1 (the floor), tps | %.0f | | |\n' "$clients" \
			"$(echo "${tps[select1:on:$clients]}" | median)"
	done
} | tee -a "$raw"
