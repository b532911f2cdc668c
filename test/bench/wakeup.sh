#!/usr/bin/env bash
# What a one-client round trip waits for on this machine, and what that
# does to the table store's ratio over the upsert bucket (run.sh's
# section 2 target: >= 1.3x at 1 and 2 clients).  SELECT 1, rl_token_bucket
# on the table store and run.sh's upsert bucket, each at 1 client (and at
# every client count of WAKEUP_CLIENTS, e.g. "1 2"), in four conditions
# (five with WAKEUP_HALTPOLL=1), interleaved (round 1 of every condition
# and variant, then round 2 ...):
#
#   tcp        pgbench over TCP 127.0.0.1, server and pgbench free to use
#              both CPUs: run.sh's section 2
#   unix       the same over a Unix socket (pgbench's default connection)
#   tcp-busy   as tcp, with a busy loop at SCHED_IDLE priority on each
#              CPU: no CPU ever halts, and a process woken by a round trip
#              takes its CPU from the loop at once
#   one-cpu    as tcp, the server and pgbench bound to CPU 0: run.sh's
#              section 20
#   haltpoll   only with WAKEUP_HALTPOLL=1, on a KVM guest whose idle
#              driver is haltpoll: as tcp, with the guest's halt polling
#              on (guest_halt_poll_ns = 200000: an idle CPU polls up to
#              200 µs before it halts; this VM ships with 0, no polling).
#              The script sets it for those runs only and puts the old
#              value back, also when it fails.
#
# If tcp-busy and haltpoll run as fast as one-cpu, a one-client round trip
# across two idle CPUs mostly waits for a halted virtual CPU to wake, a
# cost paid once per transaction by both buckets alike, whatever the
# server does.
#
#   bash test/bench/wakeup.sh      PostgreSQL 15 (the host's)
#
# and 17 or 18 inside its Debian chroot (made by scripts/test.sh --pg 18,
# with the extension that run installed there):
#
#   bash -c '. scripts/lib.sh; . scripts/chroot.sh; rl_chroot_probe &&
#     rl_chroot_run 18 env RL_PG_VERSION=18 bash /repo/test/bench/wakeup.sh'
#
# (with WAKEUP_HALTPOLL=1 there, mount /sys in the chroot first: run
#   bash -c "mount -t sysfs sysfs /sys && env RL_PG_VERSION=18
#     WAKEUP_HALTPOLL=1 bash /repo/test/bench/wakeup.sh"
# in place of the env command above)
#
# One throwaway cluster of the installed build, shared_buffers = 256MB
# and otherwise server defaults, as run.sh; keys 'k1' .. 'k10000' made for
# both buckets first; each run after VACUUM of both tables.
# WAKEUP_ROUNDS (default 5) rounds of WAKEUP_SECONDS (default 2) a run.
# Prints a Markdown table: tps over all rounds, min-max, the ratio over the
# upsert bucket and 1 s / SELECT 1's tps (at 1 client: a round trip; at 2: the
# time between two transactions' ends).
set -euo pipefail
source "$(dirname "$0")/../../scripts/lib.sh"
source "$(dirname "$0")/pgbench.sh"

ROUNDS=${WAKEUP_ROUNDS:-5}
CLIENTS=${WAKEUP_CLIENTS:-1}
SECONDS_PER_RUN=${WAKEUP_SECONDS:-2}
rl_require_positive_ints ROUNDS SECONDS_PER_RUN
for clients in $CLIENTS; do rl_require_positive_ints clients; done
[ "$(nproc)" -ge 2 ] || rl_die "wakeup.sh compares one CPU with two: this machine has $(nproc)"
conditions="tcp unix tcp-busy one-cpu"
if [ "${WAKEUP_HALTPOLL:-0}" = 1 ]; then
	haltpoll_take WAKEUP_HALTPOLL=1
	conditions="$conditions haltpoll"
fi
spinners=()
stop_spinners() {
	[ "${#spinners[@]}" -gt 0 ] || return 0
	kill "${spinners[@]}" 2>/dev/null || true
	wait "${spinners[@]}" 2>/dev/null || true
	spinners=()
}
work=$(mktemp -d)
chmod 755 "$work"
trap 'stop_spinners; haltpoll_restore; rl_cluster_stop; rm -rf "$work"' EXIT

# The Unix socket goes in the cluster's own directory (rl_cluster_start
# makes it, owned by the cluster's user); TCP stays as rl_cluster_start
# sets it up.
rl_cluster_use wakeup
socket_dir=$RL_CLUSTER_DIR
rl_cluster_start wakeup "shared_buffers = '256MB'" "unix_socket_directories = '$socket_dir'" >/dev/null
psql_at() { rl_psql -d postgres -At "$@"; }
pgb_bucket_setup "$work"
psql_at -c "CREATE TABLE wakeup_runs (condition text, clients int, variant text, round int, tps float8, xacts bigint)" >/dev/null

cpus_before=$(server_cpus)
run_condition() {
	local condition=$1 round=$2 v result tps xacts host=127.0.0.1 pgbench_cpus=
	case $condition in
		unix) host=$socket_dir ;;
		tcp-busy)
			local cpu
			for cpu in $(seq 0 $(($(nproc) - 1))); do
				taskset -c "$cpu" chrt --idle 0 bash -c 'while :; do :; done' &
				spinners+=($!)
			done ;;
		one-cpu) server_on_cpus 0; pgbench_cpus=0 ;;
		haltpoll) haltpoll_on ;;
	esac
	for clients in $CLIENTS; do
		for v in select1 table upsert; do
			psql_at -c "VACUUM ratelimit.state, bench.upsert_bucket" >/dev/null
			result=$(PGHOST=$host PGB_CPUS=$pgbench_cpus \
				pgb_checked "$condition-$v" "$clients" "$work/$condition-$v-$clients-$round.log" "" \
				-D keys=10000 -T "$SECONDS_PER_RUN" -f "$work/$v.pgbench")
			read -r tps xacts <<<"$result"
			psql_at -c "INSERT INTO wakeup_runs VALUES ('$condition', $clients, '$v', $round, $tps, $xacts)" >/dev/null
		done
	done
	case $condition in
		tcp-busy) stop_spinners ;;
		one-cpu) server_on_cpus "$cpus_before" ;;
		haltpoll) haltpoll_restore ;;
	esac
}
for round in $(seq 1 "$ROUNDS"); do
	rl_log "round $round/$ROUNDS"
	for condition in $conditions; do
		run_condition "$condition" "$round"
	done
done

if [ -r "$HALTPOLL_FILE" ]; then
	idle="guest_halt_poll_ns $(cat "$HALTPOLL_FILE") outside the haltpoll runs"
else
	idle="no guest halt polling setting here"
fi
echo "PostgreSQL $(psql_at -c 'SHOW server_version'), $ROUNDS rounds of ${SECONDS_PER_RUN} s a run; $idle:"
echo
psql_at -F ' | ' <<'SQL'
WITH t AS (
	SELECT condition, clients, variant, sum(xacts) / sum(xacts / tps) AS tps,
		min(tps) AS lo, max(tps) AS hi
	FROM wakeup_runs GROUP BY condition, clients, variant
), w AS (
	SELECT condition, clients,
		max(tps) FILTER (WHERE variant = 'select1') AS select1,
		max(tps) FILTER (WHERE variant = 'table') AS tbl,
		max(tps) FILTER (WHERE variant = 'upsert') AS upsert,
		max(format('%s–%s', round(lo), round(hi))) FILTER (WHERE variant = 'table') AS tbl_range,
		max(format('%s–%s', round(lo), round(hi))) FILTER (WHERE variant = 'upsert') AS upsert_range
	FROM t GROUP BY condition, clients
)
SELECT '| condition | clients | `SELECT 1` tps | µs per `SELECT 1` (1 s / tps) | table store tps (min–max) | upsert tps (min–max) | table store × upsert |'
UNION ALL SELECT '| --- | ---: | ---: | ---: | ---: | ---: | ---: |'
UNION ALL (SELECT format('| %s | %s | %s | %s | %s (%s) | %s (%s) | %s× |', condition, clients, round(select1),
		round((1e6 / select1)::numeric, 1), round(tbl), tbl_range, round(upsert), upsert_range,
		round((tbl / upsert)::numeric, 2))
	FROM w ORDER BY clients, array_position(ARRAY['tcp', 'unix', 'tcp-busy', 'one-cpu', 'haltpoll'], condition));
SQL
