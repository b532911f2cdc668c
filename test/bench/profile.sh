#!/usr/bin/env bash
# Where a one-call transaction's server time goes: rl_token_bucket on the
# table store, run.sh's upsert bucket and SELECT 1, each run alone by
# pgbench at 1 client while perf samples its backend.  Prints, per
# variant, the backend's CPU time per transaction and its parts by the
# PostgreSQL functions (exported symbols of Debian's stripped binary; a
# part includes what it calls) that cover the round trip:
#
#   executor      standard_ExecutorStart + standard_ExecutorRun (the
#                 statement; for the table store: the decision and its row)
#   commit        CommitTransactionCommand, and within it the signal
#                 (kill) that wakes the WAL writer after an asynchronous
#                 commit record
#   client I/O    send (the result) and pq_getbyte (reading the next
#                 message, the wait for it included while on CPU)
#
#   bash test/bench/profile.sh         PostgreSQL 15 (the host's)
#
# Needs perf (Debian's linux-perf) and root.  One throwaway cluster of the
# installed build, shared_buffers = 256MB and otherwise server defaults;
# keys 'k1' .. 'k10000' made for both buckets first.  Each variant runs
# PROFILE_SECONDS (default 4) under perf record -e cpu-clock -F 5000 -g
# (cpu-clock: the event counts nanoseconds, which the report divides),
# after 2 s without; its transactions in that window are counted from
# pgbench's per-transaction log (the window starts just before perf
# attaches, so a transaction or two without samples may be counted).
set -euo pipefail
source "$(dirname "$0")/../../scripts/lib.sh"
source "$(dirname "$0")/pgbench.sh"

SECONDS_PER_RUN=${PROFILE_SECONDS:-4}
rl_require_positive_ints SECONDS_PER_RUN
command -v perf >/dev/null || rl_die "profile.sh needs perf: apt-get install linux-perf"
[ "$(id -u)" = 0 ] || rl_die "profile.sh samples another user's process: run it as root"
work=$(mktemp -d)
chmod 755 "$work"
trap 'rl_cluster_stop; rm -rf "$work"' EXIT

rl_cluster_start profile "shared_buffers = '256MB'" >/dev/null
psql_at() { rl_psql -d postgres -At "$@"; }
pgb_bucket_setup "$work"

# report VARIANT XACTS: the perf profile of VARIANT as a table row, in µs
# of backend CPU a transaction.
report() {
	perf report -i "$work/$1.data" --children --sort sym --stdio -g none 2>/dev/null \
		| awk -v v="$1" -v xacts="$2" '
			/^# Event count \(approx\.\):/ { total = $NF }
			$3 == "[.]" || $3 == "[k]" { share[$4] = $1 + 0 }
			function us(s) { return sprintf("%.1f", total / 1000 * s / 100 / xacts) }
			END {
				printf "| %s | %d | %s | %s | %s | %s | %s |\n", v, xacts, us(100),
					us(share["standard_ExecutorStart"] + share["standard_ExecutorRun"]),
					us(share["CommitTransactionCommand"]),
					us(share["__GI___kill"] + share["kill"]),
					us(share["__send"] + share["send"] + share["pq_getbyte"])
			}'
}

rows=()
for v in table upsert select1; do
	psql_at -c "VACUUM ratelimit.state, bench.upsert_bucket" >/dev/null
	(cd "$work" && "$RL_PG_BIN/pgbench" -n -M prepared -c 1 -j 1 -T $((SECONDS_PER_RUN + 3)) \
		-l --log-prefix="$v" -D keys=10000 -f "$work/$v.pgbench" postgres >"$work/$v.log" 2>&1) &
	pgbench=$!
	sleep 2
	backend=$(psql_at -c "SELECT pid FROM pg_stat_activity WHERE application_name = 'pgbench'")
	[ -n "$backend" ] || rl_die "no pgbench backend for $v"
	start=$(date +%s.%N)
	perf record -e cpu-clock -F 5000 -g -p "$backend" -o "$work/$v.data" -- sleep "$SECONDS_PER_RUN" >/dev/null 2>&1
	end=$(date +%s.%N)
	wait "$pgbench" || { cat "$work/$v.log" >&2; rl_die "pgbench $v failed"; }
	# Log lines: client, transaction, µs, script, epoch seconds, µs.
	xacts=$(cat "$work/$v".[0-9]* | awk -v a="$start" -v b="$end" \
		'{ t = $5 + $6 / 1e6; if (t >= a && t < b) n++ } END { print n + 0 }')
	[ "$xacts" -gt 0 ] || rl_die "no $v transaction in the perf window"
	rows+=("$(report "$v" "$xacts")")
done

echo "PostgreSQL $(psql_at -c 'SHOW server_version'), 1 client, ${SECONDS_PER_RUN} s of perf record -F 5000 a variant; µs of the backend's CPU a transaction:"
echo
echo "| variant | transactions sampled | backend CPU | executor | commit | of which the WAL writer's wake-up (kill) | client I/O (send, pq_getbyte) |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
printf '%s\n' "${rows[@]}"
