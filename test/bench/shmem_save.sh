#!/usr/bin/env bash
# The shmem store's save worker (ratelimit.shmem_save_interval): what it
# costs decisions, and what a save costs at 100,000 and 1,000,000 keys.
#
#   bash test/bench/shmem_save.sh
#
# One cluster of the installed build (RL_PG_BIN, default PostgreSQL 15),
# fsync on (a save ends with a flush and a durable rename), ratelimit
# preloaded, ratelimit.shmem_max_keys = 1,000,000.
#  1. pgbench -M prepared -n, SHMEM_SAVE_CLIENTS clients, \set k random(1,
#     10000) and SELECT rl_limit('bench_shmem', 'k' || :k) (a token bucket
#     of 1e9 a second on the shmem store: every call changes its key, so
#     every round of the worker has sets to copy and a file to write), with
#     the interval 0 (no worker saves), the default 1 s and 100 ms, switched
#     by ALTER SYSTEM and a reload between runs; SHMEM_SAVE_SECONDS a run,
#     SHMEM_SAVE_ROUNDS rounds, the order turned round each round: median
#     tps, and its ratio to the interval 0.
#  2. The store filled to 100,000 then 1,000,000 keys of zone 'bench_fill'
#     (a token bucket of 1 a day, burst 100,000: no key is idle, none is
#     forgotten; every key called again before each save, so that every set
#     is copied and written; the 10,000 keys of part 1 are there too):
#     ratelimit.shmem_save_status() after each of SHMEM_SAVE_SAVES saves:
#     the file's bytes and the save's time (copy, write, fsync, rename),
#     median.
# Prints Markdown tables; raw figures go to test/bench/out/shmem_save.txt.
set -euo pipefail
source "$(dirname "$0")/../../scripts/lib.sh"
source "$(dirname "$0")/pgbench.sh"

ROUNDS=${SHMEM_SAVE_ROUNDS:-5}
SECONDS_PER_RUN=${SHMEM_SAVE_SECONDS:-3}
CLIENTS=${SHMEM_SAVE_CLIENTS:-1 2}
SAVES=${SHMEM_SAVE_SAVES:-3}
OUT=$RL_ROOT/test/bench/out
mkdir -p "$OUT"
raw=$OUT/shmem_save.txt
work=$(mktemp -d)
chmod 755 "$work"
trap 'rl_cluster_stop; rm -rf "$work"' EXIT

RL_PRELOAD=ratelimit rl_cluster_start bench-shmem-save "fsync = on" "ratelimit.shmem_max_keys = 1000000" >/dev/null
q() { rl_psql -d postgres -tA -c "$1"; }
q "CREATE EXTENSION ratelimit" >/dev/null
q "SELECT rl_zone_set('bench_shmem', 'token_bucket', 1000000000, '1 second', store => 'shmem')" >/dev/null
# Keys that stay missing a token (1 a day, a burst of 100,000): never idle, so
# none is forgotten to make room, and the store holds all of them.
q "SELECT rl_zone_set('bench_fill', 'token_bucket', 1, '1 day', burst => 100000, store => 'shmem')" >/dev/null
q "SELECT count(rl_limit('bench_shmem', 'k' || i)) FROM generate_series(1, 10000) i" >/dev/null
{
	echo "# test/bench/shmem_save.sh, $(date -u '+%Y-%m-%d %H:%M UTC'), $("$RL_PG_BIN/postgres" --version)"
	echo "# $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); data directory on $(df -T "$RL_PGDATA" | awk 'NR==2 {print $2}')"
} >"$raw"

set_interval() {
	q "ALTER SYSTEM SET ratelimit.shmem_save_interval = '$1'" >/dev/null
	q "SELECT pg_reload_conf()" >/dev/null
	for _ in $(seq 1 100); do
		[ "$(q "SELECT save_interval_ms FROM ratelimit.shmem_save_status()")" = "$2" ] && return
		sleep 0.1
	done
	rl_die "the interval did not become $1"
}
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

# 1. pgbench with and without the worker.
printf '\\set k random(1, 10000)\nSELECT rl_limit(%s, %s);\n' "'bench_shmem'" "'k' || :k" >"$work/shmem.sql"
declare -A tps
variants=("0:0" "1s:1000" "100ms:100")
saves_before=$(q "SELECT saves FROM ratelimit.shmem_save_status()")
for round in $(seq 1 "$ROUNDS"); do
	list=("${variants[@]}")
	[ $((round % 2)) -eq 0 ] && list=("${variants[2]}" "${variants[1]}" "${variants[0]}")
	for clients in $CLIENTS; do
		for v in "${list[@]}"; do
			set_interval "${v%%:*}" "${v##*:}"
			read -r t _ < <(pgb_checked "interval ${v%%:*}" "$clients" "$work/pgbench.log" "" \
				-T "$SECONDS_PER_RUN" -f "$work/shmem.sql")
			tps[${v%%:*}:$clients]+="$t "
			echo "pgbench interval ${v%%:*} clients $clients round $round: $t tps" >>"$raw"
		done
	done
done
saves_during=$(( $(q "SELECT saves FROM ratelimit.shmem_save_status()") - saves_before ))
echo "saves during the pgbench runs: $saves_during" >>"$raw"
[ "$saves_during" -gt 0 ] || rl_die "the worker saved nothing during the runs"

# 2. A save at 100,000 and 1,000,000 keys.
declare -A bytes ms
set_interval 1s 1000
for keys in 100000 1000000; do
	for save in $(seq 1 "$SAVES"); do
		q "SELECT count(rl_limit('bench_fill', 'f' || i)) FROM generate_series(1, $keys) i" >/dev/null
		since=$(q "SELECT clock_timestamp()")
		for _ in $(seq 1 600); do
			[ "$(q "SELECT saved_at > '$since' FROM ratelimit.shmem_save_status()")" = t ] && break
			sleep 0.1
		done
		read -r k b m < <(q "SELECT keys, bytes, save_ms FROM ratelimit.shmem_save_status()" | tr '|' ' ')
		[ "$k" -ge "$keys" ] || rl_die "the save held $k keys, fewer than $keys"
		bytes[$keys]+="$b "
		ms[$keys]+="$m "
		echo "save at $keys keys ($save): $k keys, $b bytes, $m ms" >>"$raw"
	done
done

{
	echo
	echo "| pgbench, shmem store, 10,000 keys | interval 0 (no saves) | 1 s (default) | 100 ms |"
	echo "| --- | ---: | ---: | ---: |"
	for clients in $CLIENTS; do
		t0=$(echo "${tps[0:$clients]}" | median)
		t1=$(echo "${tps[1s:$clients]}" | median)
		t2=$(echo "${tps[100ms:$clients]}" | median)
		printf '| %d client(s), tps (median of %d) | %.0f | %.0f (%.3f×) | %.0f (%.3f×) |\n' "$clients" "$ROUNDS" \
			"$t0" "$t1" "$(echo "$t1 / $t0" | bc -l)" "$t2" "$(echo "$t2 / $t0" | bc -l)"
	done
	echo
	echo "| keys in the store | file | a save (copy, write, fsync, rename; median of $SAVES) |"
	echo "| ---: | ---: | ---: |"
	for keys in 100000 1000000; do
		printf '| %d | %.1f MB | %.0f ms |\n' "$keys" "$(echo "$(echo "${bytes[$keys]}" | median) / 1000000" | bc -l)" \
			"$(echo "${ms[$keys]}" | median)"
	done
} | tee -a "$raw"
