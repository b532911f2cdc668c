#!/usr/bin/env bash
# Fault test of leases and of rl_wait's lines.  Starts a cluster of its own
# (leasefault, scripts/lib.sh) and prints numbered TAP lines:
#   (a) shmem store: a session holding every slot is terminated
#       (pg_terminate_backend): its leases go with it, a new acquire is
#       admitted at once
#   (b) shmem store: a session that ends normally (psql exits) likewise
#   (c) table store: a lease survives a clean restart (pg_ctl restart -m
#       fast: the UNLOGGED state table is kept), the shmem leases of the
#       sessions the restart ended do not
#   (d) after pg_ctl stop -m immediate and a start (crash recovery resets
#       unlogged tables) the table lease is gone, as every shmem lease
#   (e) rl_wait, both stores: a waiter killed (pg_terminate_backend) while
#       first in its key's line does not hold up the waiter behind it: a
#       refund admits that one
set -uo pipefail
source "$(dirname "$0")/../../scripts/lib.sh"

trap 'rl_cluster_stop; kill $(jobs -p) 2>/dev/null' EXIT

DB=rl_leasefault
n=0 failed=0
tmp=$(mktemp -d)
chmod 755 "$tmp"

q() { rl_psql -d "$DB" -tA -c "$1" 2>&1; }
# until SQL EXPECTED: polls SQL (every 0.05 s, up to 20 s) until it prints
# EXPECTED; prints what it printed last.
until_is() {
	local out=""
	for _ in $(seq 1 400); do
		out=$(q "$1")
		[ "$out" = "$2" ] && break
		sleep 0.05
	done
	echo "$out"
}
# A backend of application_name $1 sleeping in rl_wait (its pid), or nothing.
asleep_pid() {
	until_is "SELECT count(*) FROM pg_stat_activity WHERE application_name = '$1' AND state = 'active' AND wait_event_type = 'Extension'" 1 >/dev/null
	q "SELECT pid FROM pg_stat_activity WHERE application_name = '$1' AND state = 'active' AND wait_event_type = 'Extension'"
}
gone() { until_is "SELECT count(*) FROM pg_stat_activity WHERE pid = $1" 0; }

echo "# leasefault: leases and rl_wait lines across session ends, restarts and a crash"
rl_cluster_start leasefault "fsync = off"
rl_psql -d postgres -c "CREATE DATABASE $DB" >/dev/null
rl_psql -d $DB >/dev/null <<'SQL'
CREATE EXTENSION ratelimit;
SELECT rl_zone_set('f_shm', 'concurrency', 2, '1 hour', store => 'shmem');
SELECT rl_zone_set('f_tab', 'concurrency', 1, '1 hour');
SQL

# (a) A session takes both slots and stays; it is terminated.
PGAPPNAME=holder "$RL_PG_BIN/psql" -X -d $DB -tA \
	-c "SELECT a.allowed AND b.allowed FROM rl_acquire('f_shm', 'k') a, rl_acquire('f_shm', 'k') b" \
	-c "SELECT pg_sleep(600)" >"$tmp/holder.out" 2>&1 &
rl_check_numbered "(a) a session holds both slots (rl_leases: 2, its pid)" 2 \
	"$(until_is "SELECT count(*) FROM rl_leases l JOIN pg_stat_activity a ON a.pid = l.holder_pid WHERE l.zone = 'f_shm' AND a.application_name = 'holder'" 2)"
rl_check_numbered "(a) a third acquire is refused" f "$(q "SELECT allowed FROM rl_acquire('f_shm', 'k')")"
holder=$(q "SELECT pid FROM pg_stat_activity WHERE application_name = 'holder'")
rl_check_numbered "(a) pg_terminate_backend(holder)" t "$(q "SELECT pg_terminate_backend($holder)")"
rl_check_numbered "(a) the holder is gone" 0 "$(gone "$holder")"
wait
rl_check_numbered "(a) its leases went with it: rl_leases empty" 0 "$(q "SELECT count(*) FROM rl_leases WHERE zone = 'f_shm'")"
rl_check_numbered "(a) a new acquire is admitted at once, 1 slot left after it" "t|1" \
	"$(q "SELECT allowed, remaining FROM rl_acquire('f_shm', 'k')")"

# (b) A session takes both slots and ends normally (psql exits).
out=$(PGAPPNAME=holder2 rl_psql -d $DB -tA \
	-c "SELECT a.allowed AND b.allowed FROM rl_acquire('f_shm', 'k2') a, rl_acquire('f_shm', 'k2') b" \
	-c "SELECT pg_backend_pid()")
rl_check_numbered "(b) a session took both slots and exited" t "$(head -1 <<<"$out")"
rl_check_numbered "(b) its backend is gone" 0 "$(gone "$(tail -1 <<<"$out")")"
rl_check_numbered "(b) its leases went with it: a new acquire is admitted, 1 slot left" "t|1" \
	"$(q "SELECT allowed, remaining FROM rl_acquire('f_shm', 'k2')")"

# (c) A table lease (1 slot, 1 hour), and a shmem lease of a session that
# stays until the restart ends it.
rl_check_numbered "(c) a table lease taken" t "$(q "SELECT allowed FROM rl_acquire('f_tab', 'k')")"
PGAPPNAME=holder3 "$RL_PG_BIN/psql" -X -d $DB -tA \
	-c "SELECT allowed FROM rl_acquire('f_shm', 'k3')" -c "SELECT pg_sleep(600)" >"$tmp/holder3.out" 2>&1 &
rl_check_numbered "(c) a shmem lease held by a session" 1 \
	"$(until_is "SELECT count(*) FROM rl_leases WHERE zone = 'f_shm' AND key = 'k3'" 1)"
rl_cluster_ctl restart -m fast -w -l "$RL_CLUSTER_DIR/server.log" >/dev/null
wait
rl_check_numbered "(c) the server answers after restart -m fast" yes "$(rl_wait_answering $DB)"
rl_check_numbered "(c) the table lease is still held (rl_leases)" "f_tab|k|table" \
	"$(q "SELECT zone, key, store FROM rl_leases WHERE zone = 'f_tab'")"
rl_check_numbered "(c) the table zone's one slot is still taken: acquire refused" "f|0" \
	"$(q "SELECT allowed, remaining FROM rl_acquire('f_tab', 'k')")"
rl_check_numbered "(c) the shmem lease of the session the restart ended is gone (rl_leases)" 0 \
	"$(q "SELECT count(*) FROM rl_leases WHERE zone = 'f_shm'")"
rl_check_numbered "(c) its key admits, 1 slot left" "t|1" "$(q "SELECT allowed, remaining FROM rl_acquire('f_shm', 'k3')")"

# (d) A crash (immediate stop): unlogged tables are reset.
PGAPPNAME=holder4 "$RL_PG_BIN/psql" -X -d $DB -tA \
	-c "SELECT allowed FROM rl_acquire('f_shm', 'k4')" -c "SELECT pg_sleep(600)" >"$tmp/holder4.out" 2>&1 &
rl_check_numbered "(d) a shmem lease held by a session" 1 \
	"$(until_is "SELECT count(*) FROM rl_leases WHERE zone = 'f_shm' AND key = 'k4'" 1)"
rl_cluster_ctl stop -m immediate -w >/dev/null
wait
rl_cluster_ctl start -w -l "$RL_CLUSTER_DIR/server.log" >/dev/null
rl_check_numbered "(d) the server answers after stop -m immediate and start" yes "$(rl_wait_answering $DB)"
rl_check_numbered "(d) no lease is left (rl_leases empty)" 0 "$(q "SELECT count(*) FROM rl_leases")"
rl_check_numbered "(d) the table zone admits again" "t|0" "$(q "SELECT allowed, remaining FROM rl_acquire('f_tab', 'k')")"
rl_check_numbered "(d) the shmem zone admits again, 1 left" "t|1" "$(q "SELECT allowed, remaining FROM rl_acquire('f_shm', 'k4')")"

# (e) rl_wait: the first of the line is terminated; the one behind it is
# admitted by the next refund.  1 token per 10 minutes: only refunds bring
# tokens within the test.
for store in table shmem; do
	zone=w_$store
	q "SELECT rl_zone_set('$zone', 'token_bucket', 1, '10 minutes', store => '$store')" >/dev/null
	rl_check_numbered "(e) $store: the one token taken" t "$(q "SELECT allowed FROM rl_limit('$zone', 'k')")"
	PGAPPNAME=first_$store "$RL_PG_BIN/psql" -X -d $DB -tA \
		-c "SELECT allowed FROM rl_wait('$zone', 'k', 1, '1 hour')" >"$tmp/first_$store.out" 2>&1 &
	first=$(asleep_pid "first_$store")
	rl_check_numbered "(e) $store: the first waiter sleeps in rl_wait" yes "$([ -n "$first" ] && echo yes || echo no)"
	PGAPPNAME=second_$store PGOPTIONS="-c statement_timeout=20s ${PGOPTIONS:-}" "$RL_PG_BIN/psql" -X -d $DB -tA \
		-c "SELECT allowed, remaining FROM rl_wait('$zone', 'k', 1, '1 hour')" >"$tmp/second_$store.out" 2>&1 &
	second_job=$!
	second=$(asleep_pid "second_$store")
	rl_check_numbered "(e) $store: the second waiter sleeps behind it" yes "$([ -n "$second" ] && echo yes || echo no)"
	rl_check_numbered "(e) $store: pg_terminate_backend(first waiter)" t "$(q "SELECT pg_terminate_backend(${first:-0})")"
	rl_check_numbered "(e) $store: the first waiter is gone" 0 "$(gone "${first:-0}")"
	rl_check_numbered "(e) $store: the second still waits (no token yet)" 1 \
		"$(q "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'second_$store' AND state = 'active'")"
	rl_check_numbered "(e) $store: a refund" "t|1" "$(q "SELECT allowed, remaining FROM rl_refund('$zone', 'k')")"
	wait "$second_job"
	rl_check_numbered "(e) $store: the second waiter is admitted (0 left)" "t|0" "$(cat "$tmp/second_$store.out")"
	rl_check_numbered "(e) $store: the key was charged once: 0 left" 0 "$(q "SELECT remaining FROM rl_peek('$zone', 'k', 0)")"
	wait
done

rl_cluster_stop
rm -rf "$tmp"
echo "1..$n"
[ "$failed" -eq 0 ]
