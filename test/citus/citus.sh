#!/usr/bin/env bash
# ratelimit on Citus: a coordinator and two workers (clusters citusc,
# citusw1, citusw2; test/citus/lib.sh) from the Citus installed in
# RL_PG_BIN's PostgreSQL, set up with the README's Citus recipe as written.
# Prints TAP ("ok N - ...", "not ok N - ...", then "1..N"); exits non-zero
# when a check failed.  Where Citus is not installed, prints "# SKIP ..."
# and exits 0 (scripts/test.sh reports it as skipped, never as passed).
#   (r) the ```sql-citus block of README.md runs on the coordinator (after
#       CREATE EXTENSION ratelimit there, unless the block does it); Citus
#       creates the extension on the workers; the state and the history are
#       distributed by key, the zones a reference table, rl_limit
#       distributed by its key and colocated with the state; every function
#       marked force_delegation, again by rl_citus_setup() run again
#   (a) routing: calls through the coordinator decide on the worker that
#       holds the key (the key's state row is in that worker's shard, its
#       counters count them there, none on the coordinator); a zone of N
#       admits N of N + 5 calls; also with PREPARE/EXECUTE x 7 (generic
#       plans)
#   (b) zone coherence: sessions already open (on the coordinator, whose
#       calls go through its cached connections to the workers, and
#       straight on a worker) see a changed rate at their next call; after
#       rl_zone_drop and rl_zone_set of the same name they write under the
#       new zone id; changing an existing zone works
#   (c) shmem zones: routed calls decide on the key's worker; so do calls
#       inside BEGIN ... COMMIT on the coordinator, calls straight on the
#       other worker and SELECT (rl_limit(...)).allowed (forwarded); 10
#       routed + 10 in-transaction calls on a zone of 5 admit at most 5; so
#       do 5 routed + 5 straight on the other worker, and 5 routed + 5
#       SELECT (rl_limit(...)).allowed
#   (d) pgbench, 4 clients x 10 s through the coordinator on 200 keys of a
#       zone with history, the key a constant (delegated to its worker) and
#       an expression of random() (forwarded to its worker): no key
#       admitted more than capacity + rate x elapsed, every call recorded
#   (e) rl_keys and ratelimit.history from the coordinator show keys of
#       both workers; rl_counters on every node (run_command_on_all_nodes)
#   (f) straight on a worker: rl_limit on a key of its own shard and on a
#       key of the other worker's shard, each state row in its key's shard
#   (h) a shard moved to the other worker under load (pgbench on one key
#       while citus_move_shard_placement runs): no call fails, every call
#       is counted in the key's state and recorded in its history, the
#       state follows the shard
#   (i) rl_limit_trigger on a table distributed by the trigger's key column
#       and colocated with the state: 2 rows of 3 per key, the third RL429
#   (j) rl_wait and leases (rl_acquire, rl_release, rl_leases) through the
#       coordinator on a table zone: delegated, decided on the key's worker
#   (k) rl_http_guard as PostgREST runs it on the coordinator (inside the
#       request's transaction: never delegated): its shmem zone decided in
#       the coordinator's shared memory, whichever worker holds the key's
#       shard (2 of 3 requests of one client on a zone of 2, all 3 counted
#       there); requests rolled back after the guard still counted; a table
#       zone refused with 55000; straight on a worker, counted apart
#   (l) the call forms Citus does not delegate itself (a key computed by
#       random(), (rl_limit(...)).allowed, two calls in a statement, a
#       PL/pgSQL expression, a call in BEGIN ... COMMIT, rl_token_bucket in
#       an expression), each through the coordinator on a zone of 5: 5 of 8
#       admitted, every call decided on the key's worker, and one statement
#       to the worker a call (worker 1's log; in a block BEGIN, the call,
#       COMMIT), also under plan_cache_mode = force_generic_plan; calls in
#       blocks that roll back take nothing; a read-only transaction's call
#       is refused with 25006 and decided nowhere; a forwarded statement
#       Citus does not delegate (a function it does not know) decides on the
#       coordinator, exact under 4 clients, its rows reached in a
#       transaction block on the worker (BEGIN, FOR UPDATE, INSERT, COMMIT)
#   (g) no server process of any node was terminated by a signal.
set -uo pipefail
source "$(dirname "$0")/../../scripts/lib.sh"
source "$(dirname "$0")/lib.sh"

if ! citus_installed; then
	echo "# SKIP citus: Citus is not installed in $(citus_pkglibdir) (build it by hand: see test/citus/README.md)"
	exit 0
fi

WORK=$(mktemp -d)
SESSIONS=()
cleanup() {
	local fd
	for fd in "${SESSIONS[@]}"; do exec {fd}>&- 2>/dev/null; done
	wait 2>/dev/null
	rl_clusters_stop citusc citusw1 citusw2
	rm -rf "$WORK"
}
trap cleanup EXIT

n=0 failed=0
check() { rl_check_numbered "$@"; }
has() { grep -qF -- "$1" <<<"$2" && echo yes || echo no; }	# has TEXT OUTPUT
C() { on "$C_PORT" "$@"; }

# allowed_of OUTPUT: how many rl_result rows in OUTPUT were allowed.
allowed_of() { grep -c '^(t,' <<<"$1"; }
# calls PORT N SQL: runs SQL (a call) N times in one session on PORT, each
# its own transaction; prints its output (errors included).
calls() {
	local port=$1 count=$2 sql=$3
	for _ in $(seq 1 "$count"); do echo "$sql;"; done \
		| PGPORT=$port "$RL_PG_BIN/psql" -X -q -tA -d postgres 2>&1
}
# zone_id ZONE: its id, from the coordinator.
zone_id() { C "SELECT zone_id FROM ratelimit.zone WHERE zone = '$1'"; }
# decided ZONE: the calls each node decided for the zone (its counters,
# allowed + refused): "coordinator w1 w2".
decided() { zone_counters 'coalesce(sum(allowed + refused), 0)' "$1" "$C_PORT" "$W1_PORT" "$W2_PORT"; }
# state_rows PORT ZONE KEY: the key's rows of ZONE in its shard, read on the
# node at PORT (the shard table itself: no routing).
state_rows() {
	on "$1" "SELECT count(*) FROM $(C "SELECT shard_of('$3')") WHERE key = '$3' AND zone_id = $(zone_id "$2")"
}

# Sessions kept open: a psql reading a FIFO.  session_open NAME PORT;
# session_run NAME SQL prints what SQL printed (errors included).
declare -A SESSION_FD
session_open() {
	local name=$1 port=$2 fd
	mkfifo "$WORK/$name.in"
	: >"$WORK/$name.out"
	PGPORT=$port "$RL_PG_BIN/psql" -X -q -tA -d postgres <"$WORK/$name.in" >"$WORK/$name.out" 2>&1 &
	exec {fd}>"$WORK/$name.in"
	SESSION_FD[$name]=$fd
	echo 0 >"$WORK/$name.seq"
	SESSIONS+=("$fd")
}
session_run() {
	local name=$1 sql=$2 seq
	# The count is in a file: session_run runs in $(...), a subshell.
	seq=$(($(cat "$WORK/$name.seq") + 1))
	echo "$seq" >"$WORK/$name.seq"
	printf '%s;\n\\echo __end_%s\n' "$sql" "$seq" >&"${SESSION_FD[$name]}"
	for _ in $(seq 1 600); do
		grep -q "^__end_$seq\$" "$WORK/$name.out" && break
		sleep 0.05
	done
	awk -v a="__end_$((seq - 1))" -v b="__end_$seq" -v found="$([ "$seq" = 1 ] && echo 1 || echo 0)" \
		'found && $0 == b { exit } found { print } $0 == a { found = 1 }' "$WORK/$name.out"
}
# capacity_of OUTPUT: the capacity of the (one) rl_result in OUTPUT, or the
# output itself when it holds none.
capacity_of() {
	local c
	c=$(sed -n 's/^(\([tf]\),\([0-9]*\),.*/\2/p' <<<"$1" | head -1)
	echo "${c:-$1}"
}

###########################################################################
citus_start citus "fsync = off" "max_prepared_transactions = 100"
echo "# Citus $(C "SELECT extversion FROM pg_extension WHERE extname = 'citus'") on PostgreSQL $(C 'SHOW server_version'); coordinator :$C_PORT, workers :$W1_PORT :$W2_PORT"
check "the coordinator sees two workers" 2 "$(C 'SELECT count(*) FROM citus_get_active_worker_nodes()')"
# (r) The README's recipe, as written.
citus_readme_recipe >"$WORK/recipe.sql"
echo "# the README's recipe:"; sed 's/^/#   /' "$WORK/recipe.sql"
# CREATE EXTENSION ratelimit on the coordinator only, unless the recipe does.
if ! grep -qiE 'create extension( if not exists)? ratelimit' "$WORK/recipe.sql"; then
	check "CREATE EXTENSION ratelimit on the coordinator" "" \
		"$(C 'SET client_min_messages = warning' 'CREATE EXTENSION ratelimit')"
fi
recipe_out=$(PGPORT=$C_PORT rl_psql -d postgres -f "$WORK/recipe.sql" 2>&1)
recipe_status=$?
check "(r) the README's Citus recipe runs as written on the coordinator" "0" \
	"$recipe_status$(grep -m1 ERROR <<<"$recipe_out" | sed 's/^/ /')"
if ! C "SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'ratelimit.zone'::regclass" | grep -q 1 \
	|| ! C "SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'ratelimit.state'::regclass" | grep -q 1; then
	echo "# the recipe did not distribute both tables: the checks below run after the manual recipe"
	PGPORT=$C_PORT rl_psql -d postgres -c 'SET client_min_messages = warning' \
		-c 'CREATE EXTENSION IF NOT EXISTS ratelimit' -c "$CITUS_MANUAL_RECIPE" >/dev/null 2>&1
fi
check "ratelimit is installed on the coordinator and (by Citus) on both workers" "1 1 1" \
	"$(for port in "$C_PORT" "$W1_PORT" "$W2_PORT"; do on "$port" "SELECT count(*) FROM pg_extension WHERE extname = 'ratelimit'"; done | tr '\n' ' ' | sed 's/ $//')"
# table_kind TABLE: how Citus holds it (pg_dist_partition: citus_tables
# leaves out an extension's tables).
table_kind() {
	C "SELECT CASE WHEN partmethod = 'h' THEN 'distributed by ' || column_to_column_name(logicalrelid, partkey)
	               WHEN partmethod = 'n' AND repmodel = 't' THEN 'reference'
	               ELSE partmethod::text || '/' || repmodel::text END
	   FROM pg_dist_partition WHERE logicalrelid = '$1'::regclass"
}
check "(r) ratelimit.state is distributed by key" "distributed by key" "$(table_kind ratelimit.state)"
check "(r) ratelimit.zone is a reference table" reference "$(table_kind ratelimit.zone)"
check "(r) ratelimit.history is distributed by key" "distributed by key" "$(table_kind ratelimit.history)"
if [ "$(C "SELECT to_regclass('ratelimit.durable_state') IS NOT NULL")" = t ]; then
	check "(r) ratelimit.durable_state is distributed by key, colocated with the state" "distributed by key|t" \
		"$(table_kind ratelimit.durable_state)|$(C "SELECT d.colocationid = s.colocationid FROM pg_dist_partition d, pg_dist_partition s
		   WHERE d.logicalrelid = 'ratelimit.durable_state'::regclass AND s.logicalrelid = 'ratelimit.state'::regclass")"
fi
check "(r) rl_limit(text, text, int) is distributed by its key, colocated with the state" "1|true" \
	"$(C "SELECT o.distribution_argument_index || '|' || (o.colocationid = p.colocationid)
	      FROM pg_dist_object o, pg_dist_partition p
	      WHERE o.objid = 'rl_limit(text, text, int)'::regprocedure AND p.logicalrelid = 'ratelimit.state'::regclass")"
# force_delegation: Citus delegates the calls inside a transaction block
# too, and the forwarded ones everywhere.  rl_citus_setup() marks every
# function on each run, so running it again marks one distributed without
# it (0.5.0's setup, or the manual recipe).
forced() {
	C "SELECT count(*) FILTER (WHERE o.force_delegation) || '/' || count(*)
	     FROM pg_dist_object o JOIN pg_proc p ON p.oid = o.objid
	    WHERE o.classid = 'pg_proc'::regclass AND p.proname LIKE 'rl\_%'"
}
check "(r) every distributed rl_ function is marked force_delegation" 10/10 "$(forced)"
C "SELECT create_distributed_function('rl_limit(text, text, int)'::regprocedure, '\$2',
          colocate_with := 'ratelimit.state', force_delegation := false)" >/dev/null
check "(r) ... rl_limit distributed again without it" 9/10 "$(forced)"
check "(r) ... rl_citus_setup() run again marks it" "|10/10" \
	"$(C 'SET client_min_messages = warning' 'SELECT rl_citus_setup()' | grep -m1 ERROR)|$(forced)"
echo "# Citus tables: $(C "SELECT string_agg(logicalrelid::regclass::text || ' ' || partmethod::text || '/' || repmodel::text, ', ' ORDER BY 1) FROM pg_dist_partition")"
echo "# the coordinator's placements of ratelimit.zone: $(C "SELECT count(*) FROM pg_dist_placement p JOIN pg_dist_node n USING (groupid) JOIN pg_dist_shard s USING (shardid) WHERE s.logicalrelid = 'ratelimit.zone'::regclass AND n.groupid = 0")"

C 'SET client_min_messages = warning' "$CITUS_HELPERS_SQL" "$RL_ERR_OF_SQL" >/dev/null
K1=$(key_on "$W1_PORT" a) K1B=$(key_on "$W1_PORT" a 1) K2=$(key_on "$W2_PORT" a) K2B=$(key_on "$W2_PORT" a 1)
echo "# keys on worker 1: $K1 $K1B; on worker 2: $K2 $K2B"
check "keys found on each worker" "yes yes yes yes" \
	"$( for k in "$K1" "$K1B" "$K2" "$K2B"; do [ -n "$k" ] && echo -n yes || echo -n no; echo -n ' '; done | sed 's/ $//')"

###########################################################################
# (a) Routing.
C "SELECT rl_zone_set('za', 'token_bucket', 10, '1 hour')" >/dev/null
ZA=$(zone_id za)
for w in 1 2; do
	key=K$w port=W${w}_PORT
	check "(a) worker $w's key ${!key}: 10 of 15 calls through the coordinator admitted (zone of 10)" 10 \
		"$(allowed_of "$(calls "$C_PORT" 15 "SELECT rl_limit('za', '${!key}')")")"
	check "(a) ... its state row is in its shard on worker $w" 1 "$(state_rows "${!port}" za "${!key}")"
	check "(a) ... and seen through the coordinator" "1|0" \
		"$(C "SELECT count(*) || '|' || min(tokens) FROM ratelimit.state WHERE key = '${!key}' AND zone_id = $ZA")"
done
check "(a) the calls were decided on the keys' workers (decided: coordinator, w1, w2)" "0 15 15" "$(decided za)"
C "SELECT rl_zone_set('zp', 'token_bucket', 2, '1 hour')" >/dev/null
out=$(PGPORT=$C_PORT "$RL_PG_BIN/psql" -X -q -tA -d postgres 2>&1 <<SQL
PREPARE p(text) AS SELECT rl_limit('zp', \$1);
$(for _ in 1 2 3 4 5 6 7; do echo "EXECUTE p('$K2');"; done)
SQL
)
check "(a) PREPARE/EXECUTE x 7 (generic plans) on worker 2's key: 2 admitted (zone of 2)" 2 "$(allowed_of "$out")"
check "(a) ... all 7 decided on worker 2" "0 0 7" "$(decided zp)"
check "(a) ... its state row is in its shard on worker 2" 1 "$(state_rows "$W2_PORT" zp "$K2")"

###########################################################################
# (b) Zone coherence, sessions already open.
C "SELECT rl_zone_set('zc', 'token_bucket', 3, '1 hour')" "SELECT rl_zone_set('zd', 'token_bucket', 3, '1 hour')" >/dev/null
session_open sc "$C_PORT"
session_open sw "$W1_PORT"
check "(b) open coordinator session: capacity 3" 3 "$(capacity_of "$(session_run sc "SELECT rl_limit('zc', '$K1')")")"
check "(b) open coordinator session, worker 2's key: capacity 3" 3 "$(capacity_of "$(session_run sc "SELECT rl_limit('zc', '$K2')")")"
check "(b) open worker-1 session, its own key: capacity 3" 3 "$(capacity_of "$(session_run sw "SELECT rl_limit('zc', '$K1B')")")"
check "(b) open worker-1 session, worker 2's key: capacity 3" 3 "$(capacity_of "$(session_run sw "SELECT rl_limit('zc', '$K2')")")"
session_run sc "SELECT rl_limit('zd', '$K1')" >/dev/null
session_run sw "SELECT rl_limit('zd', '$K1B')" >/dev/null
check "(b) rl_zone_set changes an existing zone's rate (3 -> 10)" ok "$(C "SELECT err_of('SELECT rl_zone_set(''zc'', rate => 10)')")"
check "(b) ... rl_zone_set on an existing zone: no error text" "" "$(C "SELECT rl_zone_set('zc', burst => 10)" | grep -m1 ERROR)"
check "(b) the open coordinator session's next call sees capacity 10" 10 "$(capacity_of "$(session_run sc "SELECT rl_limit('zc', '$K1')")")"
check "(b) ... and for worker 2's key" 10 "$(capacity_of "$(session_run sc "SELECT rl_limit('zc', '$K2')")")"
check "(b) the open worker-1 session sees capacity 10 (own key)" 10 "$(capacity_of "$(session_run sw "SELECT rl_limit('zc', '$K1B')")")"
check "(b) ... and for worker 2's key" 10 "$(capacity_of "$(session_run sw "SELECT rl_limit('zc', '$K2')")")"
check "(b) a new session straight on worker 2 sees capacity 10" 10 "$(capacity_of "$(on "$W2_PORT" "SELECT rl_limit('zc', '$K2B')")")"
# Dropped and made again: the open sessions must write under the new id.
old_zd=$(zone_id zd)
check "(b) rl_zone_drop then rl_zone_set of the same name" "ok|ok" \
	"$(C "SELECT err_of('SELECT rl_zone_drop(''zd'')') || '|' || err_of('SELECT rl_zone_set(''zd'', ''token_bucket'', 7, ''1 hour'')')")"
new_zd=$(zone_id zd)
echo "# zd: id $old_zd dropped, now $new_zd"
check "(b) the open coordinator session's call sees the new zone (capacity 7)" 7 "$(capacity_of "$(session_run sc "SELECT rl_limit('zd', '$K1')")")"
check "(b) ... its key's state is under the new zone id only" "$new_zd" \
	"$(C "SELECT string_agg(DISTINCT zone_id::text, ',') FROM ratelimit.state WHERE key = '$K1' AND zone_id IN ($old_zd, $new_zd)")"
check "(b) the open worker-1 session's call sees the new zone (capacity 7)" 7 "$(capacity_of "$(session_run sw "SELECT rl_limit('zd', '$K1B')")")"
check "(b) ... its key's state is under the new zone id only" "$new_zd" \
	"$(C "SELECT string_agg(DISTINCT zone_id::text, ',') FROM ratelimit.state WHERE key = '$K1B' AND zone_id IN ($old_zd, $new_zd)")"

###########################################################################
# (c) Shmem zones.
C "SELECT rl_zone_set('zs', 'token_bucket', 5, '1 hour', store => 'shmem')" >/dev/null
routed=$(allowed_of "$(calls "$C_PORT" 10 "SELECT rl_limit('zs', '$K1')")")
check "(c) 10 routed calls on worker 1's key: 5 admitted" 5 "$routed"
check "(c) ... decided on worker 1" "0 10 0" "$(decided zs)"
out=$(PGPORT=$C_PORT "$RL_PG_BIN/psql" -X -q -tA -d postgres -v VERBOSITY=verbose 2>&1 <<SQL
\set VERBOSITY verbose
BEGIN;
$(for _ in $(seq 1 10); do echo "SELECT rl_limit('zs', '$K1');"; done)
COMMIT;
SQL
)
in_txn=$(allowed_of "$out")
state=$(grep -m1 -oE '^ERROR:  [0-9A-Z]{5}' <<<"$out" | cut -c9-)
echo "# (c) in BEGIN ... COMMIT: $in_txn admitted; first error: $(grep -m1 '^ERROR' <<<"$out")"
decided_now=$(decided zs)
check "(c) calls inside BEGIN ... COMMIT on the coordinator: no error" "" "$state"
check "(c) ... decided on worker 1 (decided: coordinator, w1, w2)" "0 20 0" "$decided_now"
check "(c) 10 routed + 10 in-transaction calls on a zone of 5 admit at most 5" yes \
	"$([ $((routed + in_txn)) -le 5 ] && echo yes || echo "no: $((routed + in_txn))")"
check "(c) no call was decided on the coordinator" 0 "$(cut -d' ' -f1 <<<"$decided_now")"
# Straight on worker 2 for worker 1's key: decided on worker 1.
C "SELECT rl_zone_set('zs2', 'token_bucket', 5, '1 hour', store => 'shmem')" >/dev/null
a=$(allowed_of "$(calls "$C_PORT" 5 "SELECT rl_limit('zs2', '$K1')")")
b=$(allowed_of "$(calls "$W2_PORT" 5 "SELECT rl_limit('zs2', '$K1')")")
check "(c) 5 routed calls + 5 straight on worker 2 for worker 1's key (zone of 5) admit at most 5" yes \
	"$([ $((a + b)) -le 5 ] && echo yes || echo "no: $a routed + $b on worker 2")"
check "(c) ... all 10 decided on worker 1 (decided: coordinator, w1, w2)" "0 10 0" "$(decided zs2)"

# A call Citus does not delegate itself (a field of the result): forwarded
# to the key's worker, never decided on the coordinator.
C "SELECT rl_zone_set('zs3', 'token_bucket', 5, '1 hour', store => 'shmem')" >/dev/null
a=$(allowed_of "$(calls "$C_PORT" 5 "SELECT rl_limit('zs3', '$K1')")")
out=$(calls "$C_PORT" 5 "SELECT (rl_limit('zs3', '$K1')).allowed")
b=$(grep -c '^t$' <<<"$out")
echo "# (c) SELECT (rl_limit(...)).allowed on the coordinator: $b admitted; first error: $(grep -m1 '^ERROR' <<<"$out")"
check "(c) 5 routed calls + 5 SELECT (rl_limit(...)).allowed (not delegated) on a zone of 5 admit at most 5" yes \
	"$([ $((a + b)) -le 5 ] && echo yes || echo "no: $a routed + $b")"
check "(c) ... all 10 decided on worker 1 (decided: coordinator, w1, w2)" "0 10 0" "$(decided zs3)"

###########################################################################
# (d) Concurrency: pgbench through the coordinator on 200 keys, twice: the
# key a constant in each statement (\set: Citus delegates the call to the
# key's worker), and the key an expression of random() (not delegated: the
# coordinator decides, reaching the shard through Citus's router).
CAP=40 RATE=1 PGB_SECONDS=${CITUS_PGBENCH_SECONDS:-10}
# per_key ZONE: "key admitted calls" per key of ZONE's history: through the
# coordinator when ratelimit.history is a Citus table, else each node's own
# table added up.
per_key() {
	if [ -n "$(C "SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'ratelimit.history'::regclass")" ]; then
		C "SELECT key || ' ' || count(*) FILTER (WHERE allowed) || ' ' || count(*) FROM ratelimit.history WHERE zone = '$1' GROUP BY key"
	else
		local port
		for port in "$C_PORT" "$W1_PORT" "$W2_PORT"; do
			on "$port" "SELECT key || ' ' || count(*) FILTER (WHERE allowed) || ' ' || count(*) FROM ratelimit.history WHERE zone = '$1' GROUP BY key"
		done | awk '{ a[$1] += $2; c[$1] += $3 } END { for (k in a) print k, a[k], c[k] }'
	fi
}
# concurrency ZONE LABEL SCRIPT: one pgbench run (4 clients) and its checks.
# Sets XACTS, PER_KEY.
concurrency() {
	local zone=$1 label=$2 t0 t1 status elapsed bound
	C "SELECT rl_zone_set('$zone', 'token_bucket', $RATE, '1 second', burst => $CAP, history => true)" >/dev/null
	printf '%s\n' "$3" >"$WORK/$zone.pgbench"
	t0=$(date +%s.%N)
	PGPORT=$C_PORT "$RL_PG_BIN/pgbench" -n -c 4 -j 4 -T "$PGB_SECONDS" -f "$WORK/$zone.pgbench" postgres >"$WORK/$zone.log" 2>&1
	status=$?
	t1=$(date +%s.%N)
	XACTS=$(sed -n 's/^number of transactions actually processed: \([0-9]*\)$/\1/p' "$WORK/$zone.log")
	elapsed=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%d", b - a + 1 }')
	echo "# (d) $label: $XACTS calls in <= $elapsed s ($(sed -n 's/^tps = \([0-9.]*\) (without.*/\1/p' "$WORK/$zone.log") tps); decided (coordinator, w1, w2): $(decided "$zone")"
	check "(d) $label: pgbench 4 clients x $PGB_SECONDS s through the coordinator, no failed transaction" "0 0" \
		"$status $(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' "$WORK/$zone.log")"
	PER_KEY=$(per_key "$zone")
	bound=$((CAP + RATE * elapsed))
	check "(d) $label: every call is in the history" "${XACTS:-none}" "$(awk '{ s += $3 } END { print s + 0 }' <<<"$PER_KEY")"
	check "(d) $label: no key admitted more than capacity + rate x elapsed ($bound)" 0 \
		"$(awk -v b="$bound" '$2 > b { n++ } END { print n + 0 }' <<<"$PER_KEY")"
	check "(d) $label: the limit was reached (some key refused)" yes \
		"$(awk '$3 > $2 { n++ } END { print (n > 0) ? "yes" : "no" }' <<<"$PER_KEY")"
	echo "# (d) $label: keys $(wc -l <<<"$PER_KEY"), refused at least once $(awk '$3 > $2 { n++ } END { print n + 0 }' <<<"$PER_KEY"), most admitted $(awk '$2 > m { m = $2 } END { print m + 0 }' <<<"$PER_KEY")"
}
concurrency zq2 "key an expression (forwarded to its worker)" \
	"SELECT rl_limit('zq2', 'k' || (random() * 199)::int);"
check "(d) key an expression: every call decided on a worker (coordinator's share)" 0 \
	"$(decided zq2 | cut -d' ' -f1)"
concurrency zq "key a constant (routed)" \
	"\\set k random(0, 199)
SELECT rl_limit('zq', 'k' || :k);"
check "(d) key a constant: every call decided on a worker (coordinator's share)" 0 \
	"$(decided zq | cut -d' ' -f1)"
per_key=$PER_KEY xacts=$XACTS
total_allowed=$(awk '{ s += $2 } END { print s + 0 }' <<<"$per_key")

###########################################################################
# (e) Monitoring from the coordinator.
out=$(C "SELECT count(DISTINCT node_of(key)) || '|' || count(*) FROM rl_keys WHERE zone = 'zq'")
check "(e) rl_keys through the coordinator: keys of both workers, one row per key" "2|$(wc -l <<<"$per_key")" "$out"
check "(e) ratelimit.history through the coordinator: rows of both workers, every call" "2|$xacts" \
	"$(C "SELECT count(DISTINCT node_of(key)) || '|' || count(*) FROM ratelimit.history WHERE zone = 'zq'")"
out=$(C "SELECT string_agg(success::text || ':' || result, ' ' ORDER BY nodeid) FROM run_command_on_all_nodes(\$\$SELECT coalesce(sum(allowed), 0) FROM rl_counters WHERE zone = 'zq'\$\$)")
echo "# rl_counters allowed for zq on each node (coordinator, w1, w2): $out"
# Per node (each its own decisions: they add up to the history's), or
# gathered (every node shows the cluster's total).
check "(e) rl_counters on every node (run_command_on_all_nodes): all answer; per node they add up to the history's allowed, or each shows that total" \
	"true true true $total_allowed" \
	"$(awk -v t="$total_allowed" '{ s = 0; ok = ""; all = 1; for (i = 1; i <= NF; i++) { split($i, p, ":"); ok = ok p[1] " "; s += p[2]; if (p[2] != t) all = 0 } print ok (all ? t : s) }' <<<"$out")"
check "(e) rl_counters straight on worker 1 answers" yes \
	"$(on "$W1_PORT" "SELECT count(*) FROM rl_counters" | grep -qE '^[0-9]+$' && echo yes || on "$W1_PORT" "SELECT count(*) FROM rl_counters" | head -1)"

###########################################################################
# (f) Straight on worker 1.
C "SELECT rl_zone_set('zf', 'token_bucket', 5, '1 hour')" >/dev/null
check "(f) on worker 1, its own key: 5 of 8 admitted (zone of 5)" 5 \
	"$(allowed_of "$(calls "$W1_PORT" 8 "SELECT rl_limit('zf', '$K1B')")")"
check "(f) ... the state row is in worker 1's shard" 1 "$(state_rows "$W1_PORT" zf "$K1B")"
check "(f) on worker 1, worker 2's key: 5 of 8 admitted" 5 \
	"$(allowed_of "$(calls "$W1_PORT" 8 "SELECT rl_limit('zf', '$K2B')")")"
check "(f) ... the state row is in worker 2's shard" 1 "$(state_rows "$W2_PORT" zf "$K2B")"
check "(f) ... the key's remaining seen through the coordinator" 0 \
	"$(C "SELECT tokens FROM ratelimit.state WHERE key = '$K2B' AND zone_id = $(zone_id zf)")"

###########################################################################
# (h) A shard moved under load: calls on a key of worker 1 (each routed
# there, working on its shard directly) while Citus moves that shard to
# worker 2.  The move waits for the calls holding the shard and they for
# it; afterwards the calls follow the shard.  Every call counts in a fixed
# window out of reach: a call whose update went to the shard left behind
# would show as a count short of the calls made.
LIMIT=100000000
C "SELECT rl_zone_set('zm', 'fixed_window', $LIMIT, '1 day', history => true)" >/dev/null
KM=$(key_on "$W1_PORT" m)
SHARD=$(C "SELECT get_shard_id_for_distribution_column('ratelimit.state', '$KM')")
printf "SELECT rl_limit('zm', '%s');\n" "$KM" >"$WORK/move.pgbench"
PGPORT=$C_PORT "$RL_PG_BIN/pgbench" -n -M prepared -c 4 -j 4 -T 10 -f "$WORK/move.pgbench" postgres >"$WORK/move.log" 2>&1 &
pgbench_pid=$!
sleep 3
move_out=$(C "SELECT citus_move_shard_placement($SHARD, '127.0.0.1', $W1_PORT, '127.0.0.1', $W2_PORT, shard_transfer_mode => 'block_writes')")
wait "$pgbench_pid"
check "(h) citus_move_shard_placement of key $KM's shard to worker 2, under load, succeeds" "" "$move_out"
check "(h) ... the shard is on worker 2 now" "$W2_PORT" "$(C "SELECT node_of('$KM')")"
check "(h) ... no call failed (pgbench: failed transactions)" 0 \
	"$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' "$WORK/move.log")"
moved_calls=$(sed -n 's/^number of transactions actually processed: \([0-9]*\)$/\1/p' "$WORK/move.log")
echo "# (h) $moved_calls calls, the shard moved under them"
check "(h) ... every call counted in the key's state (remaining = limit - calls)" \
	"$((LIMIT - ${moved_calls:-0}))" "$(C "SELECT remaining FROM rl_peek('zm', '$KM', 0)")"
check "(h) ... every call is in the key's history" "${moved_calls:-none}" \
	"$(C "SELECT count(*) FROM ratelimit.history WHERE zone = 'zm' AND key = '$KM'")"
check "(h) ... the key's state row is in its shard on worker 2" 1 \
	"$(on "$W2_PORT" "SELECT count(*) FROM $(C "SELECT shard_of('$KM')") WHERE key = '$KM' AND zone_id = $(zone_id zm)")"

###########################################################################
# (i) rl_limit_trigger on a distributed table keyed by its distribution
# column and colocated with the state: each row is decided on its worker,
# on the key's shard.
C "SELECT rl_zone_set('zt', 'token_bucket', 2, '1 hour')" >/dev/null
out=$(C 'SET client_min_messages = warning' 'SET citus.enable_unsafe_triggers = on' \
	'CREATE TABLE public.comments (user_id text COLLATE "C", body text)' \
	"CREATE TRIGGER comments_limit BEFORE INSERT ON public.comments FOR EACH ROW EXECUTE FUNCTION rl_limit_trigger('zt', 'user_id')" \
	"SELECT create_distributed_table('public.comments', 'user_id', colocate_with => 'ratelimit.state')")
check "(i) a table with rl_limit_trigger, distributed by its key colocated with the state" "" "$(grep ERROR <<<"$out")"
for k in "$K1" "$K2"; do
	check "(i) key $k (worker $([ "$k" = "$K1" ] && echo 1 || echo 2)): 2 rows of 3 inserted through the coordinator, the third refused with RL429" "ok ok RL429" \
		"$(for _ in 1 2 3; do C "SELECT err_of(\$\$INSERT INTO public.comments VALUES ('$k', 'hi')\$\$)" | cut -d' ' -f1; done | tr '\n' ' ' | sed 's/ $//')"
done
check "(i) ... the rows are in the table" 4 "$(C 'SELECT count(*) FROM public.comments')"

###########################################################################
# (j) rl_wait and leases through the coordinator: delegated to the key's
# worker, decided there (counters), state in the key's shard.
C "SELECT rl_zone_set('zw', 'token_bucket', 10, '1 second', burst => 1)" >/dev/null
check "(j) rl_wait through the coordinator on worker 1's key: 3 of 3 admitted, the last two after waiting" 3 \
	"$(allowed_of "$(calls "$C_PORT" 3 "SELECT rl_wait('zw', '$K1', 1, '10 seconds')")")"
check "(j) ... decided on worker 1" "0 3 0" "$(decided zw)"
C "SELECT rl_zone_set('zl', 'concurrency', 2, '1 hour')" >/dev/null
out=$(PGPORT=$C_PORT "$RL_PG_BIN/psql" -X -q -tA -d postgres 2>&1 <<SQL
SELECT lease FROM rl_acquire('zl', '$K2') \gset
SELECT allowed FROM rl_acquire('zl', '$K2');
SELECT allowed FROM rl_acquire('zl', '$K2');
SELECT rl_release(:'lease');
SELECT allowed FROM rl_acquire('zl', '$K2');
SELECT count(*) FROM rl_leases WHERE zone = 'zl';
SQL
)
check "(j) leases through the coordinator on worker 2's key: 2 of 2 slots, refused, released, taken again, 2 listed" \
	"t f t t 2" "$(tr '\n' ' ' <<<"$out" | sed 's/ $//')"
check "(j) ... acquires decided on worker 2" "0 0 4" "$(decided zl)"
check "(j) ... the leases are in the key's shard on worker 2" 1 "$(state_rows "$W2_PORT" zl "$K2")"

###########################################################################
# (k) rl_http_guard, as PostgREST runs it: BEGIN, the request's headers as
# transaction-local settings, the guard (db-pre-request), then COMMIT, or
# ROLLBACK when the request fails.  The guard reads this session's settings
# and runs inside the request's transaction: Citus cannot delegate it, so
# its shmem zone is decided where PostgREST connects (here the
# coordinator), whichever worker holds the key's shard.
# guard_request PORT ZONE ADDRESS END: one request from ADDRESS behind one
# proxy, ended by END (COMMIT or ROLLBACK); prints ok or the SQLSTATE.
guard_request() {
	PGPORT=$1 "$RL_PG_BIN/psql" -X -q -tA -d postgres 2>&1 <<SQL | grep -m1 -oE '^(ok|ERROR:  [0-9A-Z]{5})' | sed 's/^ERROR:  //'
\\set VERBOSITY verbose
BEGIN;
SELECT set_config('request.headers', '{"x-forwarded-for": "10.9.9.9, $3"}', true) IS NULL AS unset;
SELECT rl_http_guard('$2');
SELECT 'ok';
$4;
SQL
}
C "SELECT rl_zone_set('zg', 'token_bucket', 2, '1 hour', store => 'shmem')" \
	"SELECT rl_zone_set('zg2', 'token_bucket', 2, '1 hour', store => 'shmem')" \
	"SELECT rl_zone_set('zgt', 'token_bucket', 2, '1 hour')" >/dev/null
GA=$(C "SELECT '198.51.100.' || n FROM generate_series(1, 250) n WHERE node_of('ip:198.51.100.' || n) = $W1_PORT LIMIT 1")
echo "# (k) client $GA: key ip:$GA on worker 1"
check "(k) 3 guard requests of one client through the coordinator (zone of 2): ok ok PGRST" "ok ok PGRST" \
	"$(for _ in 1 2 3; do guard_request "$C_PORT" zg "$GA" COMMIT; done | tr '\n' ' ' | sed 's/ $//')"
check "(k) ... all 3 decided on the coordinator (decided: coordinator, w1, w2)" "3 0 0" "$(decided zg)"
check "(k) 2 requests rolled back after the guard, then a third (zone of 2): ok ok PGRST (a failed request is counted)" \
	"ok ok PGRST" \
	"$(for end in ROLLBACK ROLLBACK COMMIT; do guard_request "$C_PORT" zg2 "$GA" "$end"; done | tr '\n' ' ' | sed 's/ $//')"
check "(k) a table zone is refused by the guard: 55000" 55000 "$(guard_request "$C_PORT" zgt "$GA" COMMIT)"
check "(k) straight on worker 1, the same client's request is counted apart (shared memory is per node)" ok \
	"$(guard_request "$W1_PORT" zg "$GA" COMMIT)"
check "(k) ... decided there (decided: coordinator, w1, w2)" "3 1 0" "$(decided zg)"

###########################################################################
# (l) The call forms Citus does not delegate itself, through the
# coordinator: each call is forwarded to its key's worker as one statement
# (src/api/forward.c) and decided there, exactly.  Worker 1 logs every
# statement it receives (log_statement = all) to count the round trips.
on "$W1_PORT" "ALTER SYSTEM SET log_statement = 'all'" "SELECT pg_reload_conf()" >/dev/null
W1_LOG=$RL_ROOT/.cluster/citusw1/server.log
# received_since LINE: the statements of a call worker 1 received after
# line LINE of its log: the call, its rows' statements, BEGIN and COMMIT (not
# Citus's own, such as its deadlock detector's; a statement the worker ran
# for itself is followed by CONTEXT: not counted).
received_since() {
	tail -n +"$(($1 + 1))" "$W1_LOG" | awk '
		/^[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9] .* CONTEXT:  / { pending = 0; next }
		/^[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9] / { n += pending; pending = 0 }
		/ LOG:  (statement|execute [^:]*): .*(rl_limit|rl_token_bucket|BEGIN|COMMIT|ratelimit\.state_)/ { pending = 1 }
		END { print n + pending }'
}
C "CREATE FUNCTION cf_allowed(zone text, key text) RETURNS boolean LANGUAGE plpgsql
   AS \$\$ BEGIN RETURN (rl_limit(zone, key)).allowed; END \$\$" >/dev/null
# call_form NAME SQL ADMITTED_PATTERN ROUND_TRIPS: on a zone of 5 of its
# own, SQL (with Z for the zone and K for a key of worker 1) 8 times through
# the coordinator, then once more while worker 1's log is counted.
call_form() {
	local name=$1 sql=$2 pattern=$3 trips=$4 zone="zcf$5" key out lines calls
	key=$(key_on "$W1_PORT" "cf$5")
	C "SELECT rl_zone_set('$zone', 'token_bucket', 5, '1 hour')" >/dev/null
	sql=${sql//Z/$zone}
	sql=${sql//K/$key}
	out=$(calls "$C_PORT" 8 "$sql")
	calls=$((8 * $(grep -oE 'rl_limit|cf_allowed' <<<"$sql" | wc -l)))
	check "(l) $name: 5 of $calls admitted on a zone of 5" 5 "$(grep -oE "$pattern" <<<"$out" | wc -l)"
	check "(l) ... every call decided on worker 1 (decided: coordinator, w1, w2)" "0 $calls 0" "$(decided "$zone")"
	check "(l) ... the key's state row is in worker 1's shard" 1 "$(state_rows "$W1_PORT" "$zone" "$key")"
	sleep 0.2	# the log caught up with the calls above
	lines=$(wc -l <"$W1_LOG")
	out=$(calls "$C_PORT" 1 "$sql")
	sleep 0.2
	check "(l) ... one more: $trips statement(s) to worker 1" "$trips" "$(received_since "$lines")"
}
call_form "key an expression of random()" \
	"SELECT rl_limit('Z', CASE WHEN random() < 2 THEN 'K' END)" '^\(t,' 1 1
call_form "SELECT (rl_limit(...)).allowed" "SELECT (rl_limit('Z', 'K')).allowed" '^t$' 1 2
call_form "two calls in one statement" "SELECT rl_limit('Z', 'K'), rl_limit('Z', 'K')" '\(t,' 2 3
call_form "in a PL/pgSQL expression" "SELECT cf_allowed('Z', 'K')" '^t$' 1 4
call_form "in BEGIN ... COMMIT (BEGIN, the call, COMMIT)" "BEGIN; SELECT rl_limit('Z', 'K'); COMMIT" '^\(t,' 3 5
call_form "(rl_limit(...)).allowed in BEGIN ... COMMIT" "BEGIN; SELECT (rl_limit('Z', 'K')).allowed; COMMIT" '^t$' 3 6
call_form "rl_token_bucket beside it in one statement" \
	"SELECT rl_token_bucket('K', 5, 3600), (rl_limit('Z', 'K')).allowed" '\|t$' 2 7
call_form "(rl_limit(...)).allowed under plan_cache_mode = force_generic_plan" \
	"SET plan_cache_mode = force_generic_plan; SELECT (rl_limit('Z', 'K')).allowed" '^t$' 1 8

# A forwarded call in a block that rolls back is taken back (a table zone);
# so is one Citus delegates itself there.
C "SELECT rl_zone_set('zcfrb', 'token_bucket', 5, '1 hour')" >/dev/null
KRB=$(key_on "$W1_PORT" cfrb)
out=$(calls "$C_PORT" 3 "BEGIN; SELECT (rl_limit('zcfrb', '$KRB')).allowed; ROLLBACK")
out+=$'\n'$(calls "$C_PORT" 3 "BEGIN; SELECT rl_limit('zcfrb', '$KRB'); ROLLBACK")
check "(l) 6 calls in blocks that roll back, each admitted there" 6 "$(grep -cE '^(t|\(t,.*)$' <<<"$out")"
check "(l) ... then 5 of 6 admitted on the zone of 5: the rolled-back calls took nothing" 5 \
	"$(allowed_of "$(calls "$C_PORT" 6 "SELECT rl_limit('zcfrb', '$KRB')")")"

# A read-only transaction is not forwarded: a table zone's call is refused
# there as on one node (25006), and takes nothing.
C "SELECT rl_zone_set('zcfro', 'token_bucket', 5, '1 hour')" >/dev/null
KRO=$(key_on "$W1_PORT" cfro)
# ro_state BEFORE AFTER: the SQLSTATE of the call (err_of) between the
# statements BEFORE and AFTER, in one session.
ro_state() {
	C "$1" "SELECT 'state ' || err_of(\$\$SELECT (rl_limit('zcfro', '$KRO')).allowed\$\$)" "$2" \
		| sed -n 's/^state \([^ ]*\).*/\1/p'
}
check "(l) BEGIN; SET TRANSACTION READ ONLY; SELECT (rl_limit(...)).allowed: refused with 25006" 25006 \
	"$(ro_state "BEGIN; SET TRANSACTION READ ONLY" "COMMIT")"
check "(l) default_transaction_read_only = on, SELECT (rl_limit(...)).allowed: refused with 25006" 25006 \
	"$(ro_state "SET default_transaction_read_only = on" "")"
check "(l) ... neither decided anywhere (decided: coordinator, w1, w2)" "0 0 0" "$(decided zcfro)"

# A forwarded statement that Citus does not delegate (here: a function it
# does not know) runs on the coordinator, which then decides through
# Citus's router, in a transaction block on the worker as before
# forwarding: exact under 4 concurrent clients.
C "CREATE FUNCTION rl_limit_undistributed(zone text, key text, cost int DEFAULT 1) RETURNS rl_result
   AS 'ratelimit', 'rl_limit' LANGUAGE C" \
  "SELECT rl_zone_set('zcfu', 'token_bucket', 20, '1 hour')" >/dev/null
KU=$(key_on "$W1_PORT" cfu)
printf "SELECT (rl_limit_undistributed('zcfu', '%s')).allowed;\n" "$KU" >"$WORK/undistributed.pgbench"
PGPORT=$C_PORT "$RL_PG_BIN/pgbench" -n -c 4 -j 4 -t 25 -f "$WORK/undistributed.pgbench" postgres >"$WORK/undistributed.log" 2>&1
check "(l) not delegated: pgbench 4 clients x 25 calls on one key, no failed transaction" "0 100" \
	"$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' "$WORK/undistributed.log") $(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$WORK/undistributed.log")"
check "(l) ... 20 of 100 admitted on a zone of 20, all decided on the coordinator (allowed/decided: coordinator, w1, w2)" \
	"20/100 0/0 0/0" \
	"$(zone_counters "coalesce(sum(allowed), 0) || '/' || coalesce(sum(allowed + refused), 0)" zcfu "$C_PORT" "$W1_PORT" "$W2_PORT")"
sleep 0.2
lines=$(wc -l <"$W1_LOG")
calls "$C_PORT" 1 "SELECT (rl_limit_undistributed('zcfu', '$(key_on "$W1_PORT" cfu 1)')).allowed" >/dev/null
sleep 0.2
check "(l) ... a new key's row reached in a transaction block on worker 1: BEGIN, SELECT ... FOR UPDATE, INSERT, COMMIT" 4 \
	"$(received_since "$lines")"
on "$W1_PORT" "ALTER SYSTEM RESET log_statement" "SELECT pg_reload_conf()" >/dev/null

###########################################################################
for name in citusc citusw1 citusw2; do
	check "(g) $name: no server process terminated by a signal" no \
		"$(grep -qE 'terminated by signal|was terminated' "$RL_ROOT/.cluster/$name/server.log" && echo yes || echo no)"
done

echo "1..$n"
echo "# citus: $((n - failed)) passed, $failed failed"
[ "$failed" -eq 0 ]
