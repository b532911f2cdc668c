#!/usr/bin/env bash
# Failover test with real servers: a primary (cluster failover-primary,
# ratelimit preloaded) and a streaming standby made from it with
# `pg_basebackup -R` (cluster failover-standby), both of this build, on
# free ports, as the cluster user, in git-ignored directories under
# .cluster/.  Prints TAP lines ("ok N - ..."), then a count; exits non-zero
# when a check failed.
#   (a) the standby replays: zones made and changed on the primary are there
#   (b) on the standby (in recovery), a table-store decision is refused with
#       25006, saying it is a standby: a durable zone, an unlogged one,
#       rl_token_bucket, a shmem zone with history (its history is a table);
#       rl_peek of a durable key reads what the primary wrote
#   (c) a shmem zone decides on the standby, per node: a key drained on the
#       primary is full there; one the primary had saved before the base
#       backup is drained there too (the backup copies the store's file)
#   (d) keys drained on the primary (durable zones of four algorithms, an
#       unlogged zone), the standby caught up, then promoted: the durable
#       keys refuse exactly as on the primary (0 admissions in a loop), the
#       unlogged key starts full (documented fail-open), the zones are there;
#       a key half used keeps exactly its remaining; a zone made durable on
#       the primary after its key was drained (the keys moved) refuses it;
#       leases held in a durable concurrency zone are still held
#   (e) pg_dump of the primary restored into a new database of the promoted
#       server: the durable keys still refuse (the durable state is dumped)
# The test clock (ratelimit.now_override) fixes every decision's time.
# Where it cannot run (no pg_basebackup in RL_PG_BIN), prints "# SKIP
# failover: <why>" and exits 0: skipped, never counted as passed.
set -uo pipefail
source "$(dirname "$0")/../../scripts/lib.sh"

DB=rl_failover
NOW="2026-01-01 00:00:00+00"
n=0 failed=0
PRIMARY_PORT="" STANDBY_PORT=""
trap 'rl_clusters_stop failover-standby failover-primary' EXIT

P() { PGPORT=$PRIMARY_PORT rl_psql -d "$DB" -tA -c "SET ratelimit.now_override = '$NOW'" -c "$1" 2>&1; }
S() { PGPORT=$STANDBY_PORT rl_psql -d "${2:-$DB}" -tA -c "SET ratelimit.now_override = '$NOW'" -c "$1" 2>&1; }
# The SQLSTATE and message of a statement on the standby, or "ok".
S_error() {
	PGPORT=$STANDBY_PORT rl_psql -d "$DB" -tA -v VERBOSITY=verbose -c "SET ratelimit.now_override = '$NOW'" \
		-c "$1" 2>&1 >/dev/null | sed -n 's/^ERROR:  \([0-9A-Z]\{5\}\): \(.*\)$/\1 \2/p' | head -1
}
# caught_up: waits (up to 60 s) until the standby has replayed all the
# primary has written so far; prints yes or no.
caught_up() {
	local target
	target=$(PGPORT=$PRIMARY_PORT rl_psql -d postgres -tA -c "SELECT pg_current_wal_lsn()")
	for _ in $(seq 1 600); do
		[ "$(PGPORT=$STANDBY_PORT rl_psql -d postgres -tA -c \
			"SELECT pg_last_wal_replay_lsn() >= '$target'::pg_lsn" 2>/dev/null)" = t ] && { echo yes; return; }
		sleep 0.1
	done
	echo no
}
S_restored() { S "$1" rl_restored; }
# admitted ON ZONE KEY CALLS: how many of CALLS calls are admitted.
admitted() {
	$1 "SELECT count(*) FILTER (WHERE (rl_limit('$2', '$3')).allowed) FROM generate_series(1, $4)"
}

echo "# failover: a primary, a streaming standby from pg_basebackup -R, a promotion"
if [ ! -x "$RL_PG_BIN/pg_basebackup" ]; then
	echo "# SKIP failover: $RL_PG_BIN has no pg_basebackup (it comes with the server's client package)"
	exit 0
fi
RL_PRELOAD=ratelimit rl_cluster_start failover-primary "fsync = off" "wal_level = replica" \
	"max_wal_senders = 4" "hot_standby = on" >/dev/null
PRIMARY_PORT=$PGPORT
PRIMARY_DATA=$RL_PGDATA
P_SQL() { PGPORT=$PRIMARY_PORT rl_psql -d "$DB" -q "$@"; }
PGPORT=$PRIMARY_PORT rl_psql -d postgres -c "CREATE DATABASE $DB" >/dev/null
P_SQL >/dev/null <<'SQL'
CREATE EXTENSION ratelimit;
SELECT rl_zone_set('fo_tb', 'token_bucket', 3, '1 day', durable => true);
SELECT rl_zone_set('fo_fw', 'fixed_window', 3, '1 day', durable => true);
SELECT rl_zone_set('fo_sw', 'sliding_window', 3, '1 day', durable => true);
SELECT rl_zone_set('fo_gcra', 'gcra', 3, '1 day', durable => true);
SELECT rl_zone_set('fo_unlogged', 'fixed_window', 3, '1 day');
SELECT rl_zone_set('fo_shmem', 'fixed_window', 3, '1 day', store => 'shmem');
SELECT rl_zone_set('fo_shmem_hist', 'fixed_window', 3, '1 day', store => 'shmem', history => true);
SELECT rl_zone_set('fo_leases', 'concurrency', 2, '1 hour', durable => true);
SQL

# A shmem key drained before the base backup, and saved by the primary's
# save worker: the backup copies the store's file, and the standby starts
# with it.
admitted P fo_shmem before-backup 5 >/dev/null
since=$(P "SELECT clock_timestamp()" | tail -1)
for _ in $(seq 1 300); do
	[ "$(P "SELECT saved_at > '$since' FROM ratelimit.shmem_save_status()" | tail -1)" = t ] && break
	sleep 0.1
done

# The standby: a base backup with the replication settings (-R), streaming.
rl_cluster_use failover-standby
rl_as_root rm -rf "$RL_CLUSTER_DIR"
mkdir -p "$RL_CLUSTER_DIR"
rl_as_root chown "$(rl_cluster_user)" "$RL_CLUSTER_DIR"
rl_allow_traverse "$RL_CLUSTER_DIR"
if ! rl_as_cluster_user "$RL_PG_BIN/pg_basebackup" -h 127.0.0.1 -p "$PRIMARY_PORT" -U postgres \
	-D "$RL_PGDATA" -R -X stream -c fast >"$RL_CLUSTER_DIR/basebackup.log" 2>&1; then
	# The primary is this script's, with replication set up: a refusal is a
	# failure to look into, not a host that cannot run the test.
	cat "$RL_CLUSTER_DIR/basebackup.log"
	rl_die "pg_basebackup from the primary failed"
fi
STANDBY_PORT=$(rl_free_port)
echo "port = $STANDBY_PORT" | rl_as_cluster_user tee -a "$RL_PGDATA/postgresql.conf" >/dev/null
rl_cluster_ctl start -w -t 60 -l "$RL_CLUSTER_DIR/server.log" >/dev/null \
	|| { cat "$RL_CLUSTER_DIR/server.log"; rl_die "the standby did not start"; }

# (a) Replication: the standby is in recovery and has the zones.
rl_check_numbered "(a) the standby runs in recovery" t "$(S "SELECT pg_is_in_recovery()" postgres | tail -1)"
rl_check_numbered "(a) the standby caught up with the primary" yes "$(caught_up)"
rl_check_numbered "(a) the zones made on the primary are on the standby, durable ones marked" \
	"fo_fw|true fo_gcra|true fo_leases|true fo_shmem|false fo_shmem_hist|false fo_sw|true fo_tb|true fo_unlogged|false" \
	"$(S "SELECT string_agg(zone || '|' || durable, ' ' ORDER BY zone) FROM rl_zones" | tail -1)"
P "SELECT rl_zone_set('fo_unlogged', rate => 4)" >/dev/null
rl_check_numbered "(a) a zone changed on the primary is changed on the standby" "yes 4" \
	"$(caught_up) $(S "SELECT rate FROM rl_zones WHERE zone = 'fo_unlogged'" | tail -1)"

# Drain a key of every zone on the primary (3 admitted, then refused).
for zone in fo_tb fo_fw fo_sw fo_gcra fo_unlogged fo_shmem; do
	admitted P "$zone" drained 5 >/dev/null
done
# A key half used in every durable zone: what remains must go on exactly.
DURABLE="fo_tb fo_fw fo_sw fo_gcra"
for zone in $DURABLE; do
	admitted P "$zone" partial 1 >/dev/null
done
remaining_of() {	# ON KEY: each durable zone's remaining for KEY (rl_peek)
	$1 "SELECT string_agg((rl_peek(z, '$2')).remaining::text, ' ' ORDER BY z)
	    FROM unnest(string_to_array('$DURABLE', ' ')) z" | tail -1
}
PARTIAL_ON_PRIMARY=$(remaining_of P partial)
# (rl_peek's remaining is what a call now would leave: 2 left, it says 1.)
rl_check_numbered "(d) on the primary, the half-used keys have 2 of 3 left (rl_peek: 1 after a call)" "1 1 1 1" \
	"$PARTIAL_ON_PRIMARY"
# A zone made durable after its key was drained: the move of its keys to
# the logged table must reach the standby.
P "SELECT rl_zone_set('fo_moved', 'fixed_window', 3, '1 day')" >/dev/null
admitted P fo_moved drained 5 >/dev/null
P "SELECT rl_zone_set('fo_moved', durable => true)" >/dev/null
rl_check_numbered "(d) on the primary, a zone made durable keeps its drained key" 0 "$(admitted P fo_moved drained 2 | tail -1)"
# Leases held in a durable concurrency zone (2 slots): both taken.
rl_check_numbered "(d) on the primary, both slots of the durable concurrency zone taken, a third refused" \
	"true true false" \
	"$(P "SELECT string_agg((rl_acquire('fo_leases', 'held')).allowed::text, ' ') FROM generate_series(1, 3)" | tail -1)"
rl_check_numbered "(d) on the primary, every drained key is refused" "false false false false false false" \
	"$(P "SELECT string_agg((rl_limit(z, 'drained')).allowed::text, ' ' ORDER BY z)
	      FROM unnest(ARRAY['fo_tb', 'fo_fw', 'fo_sw', 'fo_gcra', 'fo_unlogged', 'fo_shmem']) z" | tail -1)"
rl_check_numbered "(a) the standby caught up with the drained keys" yes "$(caught_up)"

# (b) A standby cannot write: table-store decisions are refused, saying why.
for call in "rl_limit('fo_tb', 'other')" "rl_limit('fo_unlogged', 'other')" "rl_token_bucket('other', 1, 10)" \
	"rl_limit(ARRAY['fo_tb', 'fo_fw'], 'other')" "rl_acquire('fo_leases', 'other')" \
	"rl_limit('fo_shmem_hist', 'other')"; do
	err=$(S_error "SELECT $call")
	rl_check_numbered "(b) on the standby, SELECT $call is refused with 25006 naming the standby" "25006 standby" \
		"$(echo "$err" | cut -c1-5) $(echo "$err" | grep -o 'standby' | head -1)"
done
rl_check_numbered "(b) on the standby, rl_peek reads a durable key as the primary left it" f \
	"$(S "SELECT allowed FROM rl_peek('fo_tb', 'drained')" | tail -1)"

# (c) Shared memory is each node's own: the standby decides a shmem zone by
# itself, and the key drained on the primary is full here.
rl_check_numbered "(c) a shmem zone decides on the standby, per node: the primary's drained key is full" "true|2" \
	"$(S "SELECT allowed || '|' || remaining FROM rl_limit('fo_shmem', 'drained')" | tail -1)"

rl_check_numbered "(c) the standby started with the shmem state the primary had saved before the backup" 0 \
	"$(admitted S fo_shmem before-backup 5 | tail -1)"

# (d) The promotion.
rl_check_numbered "(d) the standby caught up before the promotion" yes "$(caught_up)"
rl_cluster_ctl promote -w -t 60 >/dev/null 2>&1
promoted=no
for _ in $(seq 1 300); do
	[ "$(S "SELECT pg_is_in_recovery()" postgres | tail -1)" = f ] && { promoted=yes; break; }
	sleep 0.1
done
rl_check_numbered "(d) pg_ctl promote: the standby is a primary" yes "$promoted"
# The old primary goes away, as in a failover.
rl_as_cluster_user "$RL_PG_BIN/pg_ctl" -D "$PRIMARY_DATA" stop -m immediate -w >/dev/null 2>&1
rl_check_numbered "(d) on the promoted server, the zones are there" 9 "$(S "SELECT count(*) FROM rl_zones" | tail -1)"
for zone in fo_tb fo_fw fo_sw fo_gcra; do
	rl_check_numbered "(d) durable zone $zone: the drained key is admitted 0 times in 5 calls on the promoted server" 0 \
		"$(admitted S "$zone" drained 5 | tail -1)"
	rl_check_numbered "(d) durable zone $zone: a new key is admitted 3 times in 5 (the limit still holds)" 3 \
		"$(admitted S "$zone" fresh 5 | tail -1)"
done
rl_check_numbered "(d) durable zones: the half-used keys have exactly what they had on the primary" \
	"$PARTIAL_ON_PRIMARY" "$(remaining_of S partial)"
rl_check_numbered "(d) durable zones: the half-used keys admit exactly their remaining 2, of 5 calls each" "2 2 2 2" \
	"$(for zone in $DURABLE; do admitted S "$zone" partial 5 | tail -1; done | tr '\n' ' ' | sed 's/ $//')"
rl_check_numbered "(d) the zone made durable on the primary: its drained key is admitted 0 times in 5" 0 \
	"$(admitted S fo_moved drained 5 | tail -1)"
rl_check_numbered "(d) the durable concurrency zone: the leases taken on the primary are still held" f \
	"$(S "SELECT allowed FROM rl_acquire('fo_leases', 'held')" | tail -1)"
rl_check_numbered "(d) the unlogged zone's drained key starts full on the promoted server (4 of 5: its rate is 4)" 4 \
	"$(admitted S fo_unlogged drained 5 | tail -1)"
rl_check_numbered "(d) the promoted server writes: rl_token_bucket decides" 9 \
	"$(S "SELECT rl_token_bucket('after-promotion', 1, 10)" | tail -1)"

# (e) pg_dump keeps the durable keys: restored into a new database, still
# refused.  (The dump is taken of the promoted server: the old primary is gone.)
S "CREATE DATABASE rl_restored" postgres >/dev/null
if PGPORT=$STANDBY_PORT rl_as_cluster_user "$RL_PG_BIN/pg_dump" -h 127.0.0.1 -p "$STANDBY_PORT" -U postgres "$DB" \
	| PGPORT=$STANDBY_PORT rl_psql -d rl_restored -q -v ON_ERROR_STOP=1 >/dev/null 2>&1; then
	restored=yes
else
	restored=no
fi
rl_check_numbered "(e) pg_dump | psql into a new database" yes "$restored"
rl_check_numbered "(e) in the restored database the durable keys still refuse, the unlogged one starts full" \
	"0 0 0 0 4" \
	"$(for zone in fo_tb fo_fw fo_sw fo_gcra fo_unlogged; do admitted "S_restored" "$zone" drained 5; done | tr '\n' ' ' | sed 's/ $//')"

echo "1..$n"
echo "failover: $((n - failed)) passed, $failed failed"
[ "$failed" -eq 0 ]
