#!/usr/bin/env bash
# Fault audit.  Starts a cluster of its own (scripts/lib.sh; name
# from RL_AUDIT_CLUSTER, default audit) and prints "ok"/"not ok" lines:
#   (a) a backend SIGKILLed in the middle of a stream of calls: the server
#       goes through crash recovery and answers again; the unlogged state is
#       empty (a drained key starts full: fail-open) while ratelimit.history
#       (logged) keeps every committed record and none of the killed
#       transaction's; zones survive
#   (b) the table store, once per access path (direct, spi):
#       statement_timeout and pg_cancel_backend hitting a long
#       count(rl_limit(...)) over generate_series: the transaction's tokens
#       are all given back (every state row as before), the session goes on
#       without error, no lock is left behind, a call waiting on the same key
#       proceeds and decides on the committed state; for the exact sliding
#       window, a cancelled statement that had deleted and sealed chunk rows
#       leaves every row as it was, rl_peek sees the committed window, and a
#       later call works and leaves the chunk rows consistent
#   (c) the shmem store (not transactional): a cancelled statement's calls
#       stay taken, even when its transaction rolls back, and the tokens taken
#       are exactly what rl_counters counted; a history zone on the shmem
#       store keeps the tokens taken but loses the history rows with the
#       rollback; sessions go on, no lock is left
set -uo pipefail
source "$(dirname "$0")/../../scripts/lib.sh"

CLUSTER=${RL_AUDIT_CLUSTER:-audit}
trap 'rl_cluster_use "$CLUSTER"; rl_cluster_stop' EXIT

DB=rl_audit
CLOCK='2026-01-01 00:00:00+00'
# q SQL: one statement on $DB at the test clock; its output, or the error.
q() { rl_psql -d "$DB" -tA -c "SET ratelimit.now_override = '$CLOCK'" -c "$1" 2>&1; }
# session: a script on one connection that goes on after errors (stdin).
session() { "$RL_PG_BIN/psql" -X -q -d "$DB" -tA -v ON_ERROR_STOP=0 2>&1; }
# busy_pid PATTERN [CONDITION]: the pid of the active backend of $DB whose
# query contains PATTERN (and that meets CONDITION on pg_stat_activity),
# once it has run a moment more; waits up to 20 s, else prints nothing.
busy_pid() {
	local pid=""
	for _ in $(seq 1 200); do
		pid=$(rl_psql -d postgres -tA -c "SELECT pid FROM pg_stat_activity WHERE datname = '$DB'
			AND query LIKE '%$1%' AND state = 'active' AND pid <> pg_backend_pid() ${2:-}" 2>/dev/null | head -1)
		[ -n "$pid" ] && break
		sleep 0.1
	done
	[ -n "$pid" ] && sleep 0.3
	echo "$pid"
}
# A long stream of calls: SQL_CALL (using g) once per row of a set-returning
# function in the target list, which streams (in FROM, generate_series would
# first materialize all its rows, and no call would run for seconds).
stream() { echo "SELECT count($1) AS $2 FROM (SELECT generate_series(1, 1000000000) AS g) s"; }
# Locks other backends of $DB hold on the extension's relations, rows,
# transactions or advisory keys.
LOCKS_SQL="SELECT count(*) FROM pg_locks l
	WHERE l.pid <> pg_backend_pid() AND l.database IS DISTINCT FROM 0
	  AND (l.locktype IN ('tuple', 'transactionid', 'advisory', 'speculative token')
	       OR l.relation IN (SELECT oid FROM pg_class WHERE relnamespace = 'ratelimit'::regnamespace))"
# The same, for the session itself (run inside it).
OWN_LOCKS_SQL="SELECT 'own locks: ' || count(*) FROM pg_locks l
	WHERE l.pid = pg_backend_pid()
	  AND (l.locktype IN ('tuple', 'transactionid', 'advisory', 'speculative token')
	       OR l.relation IN (SELECT oid FROM pg_class WHERE relnamespace = 'ratelimit'::regnamespace))"
# Every row of the state table, as one digest.
SNAPSHOT_SQL="SELECT count(*) || ' rows ' || coalesce(md5(string_agg(
	concat_ws('|', key, zone_id, part, tokens, token_fraction, updated_at, counter, entries, refill_pending),
	',' ORDER BY key, zone_id, part)), '-') FROM ratelimit.state"
has() { grep -qF -- "$1" <<<"$2" && echo yes || echo no; }	# has TEXT OUTPUT
# Calls a zone admitted since the server started (rl_counters: shared
# memory, not transactional, both stores): how many calls a cancelled
# statement made.
allowed_of() { q "SELECT coalesce((SELECT allowed FROM rl_counters WHERE zone = '$1'), 0)"; }
line() { grep -F -- "$1" <<<"$2" | head -1 | sed "s/^.*$1//"; }	# line PREFIX OUTPUT

rl_cluster_start "$CLUSTER" "fsync = off"
rl_psql -d postgres -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB" >/dev/null
rl_psql -d "$DB" -c 'CREATE EXTENSION ratelimit' >/dev/null

###########################################################################
echo "# (a) SIGKILL in the middle of a stream of calls"
q "SELECT rl_zone_set('a_hist', 'token_bucket', 1000000, '1 hour', history => true),
          rl_zone_set('a_small', 'token_bucket', 5, '1 hour', history => true),
          rl_zone_set('a_sw', 'sliding_window', 1000, '1 hour', history => true),
          rl_zone_set('a_plain', 'fixed_window', 10, '1 hour')" >/dev/null
for i in 1 2 3 4 5; do
	q "SELECT count(*) FROM (SELECT rl_limit('a_hist', 'k' || (g % 10)) FROM generate_series(1, 200) g OFFSET 0) s" >/dev/null
done
rl_check "(a) a key drained: 5 admitted of 8" 5 \
	"$(q "SELECT count(*) FILTER (WHERE (r).allowed) FROM (SELECT rl_limit('a_small', 'drained') AS r FROM generate_series(1, 8) OFFSET 0) s")"
rl_check "(a) a sliding window: 3 admitted" "3" \
	"$(q "SELECT count(*) FILTER (WHERE (r).allowed) FROM (SELECT rl_sliding_window('a_sw', 'w') AS r FROM generate_series(1, 3) OFFSET 0) s")"
rl_check "(a) a zone without history: 4 of 10 taken" 6 "$(q "SELECT remaining FROM rl_limit('a_plain', 'p', 4)")"
history_before=$(q "SELECT count(*) FROM ratelimit.history")
rl_check "(a) committed history before the kill: 1000 + 8 + 3 rows" 1011 "$history_before"
rl_check "(a) the state table holds the committed keys" 13 "$(q "SELECT count(*) FROM ratelimit.state")"
rl_check "(a) ratelimit.history is logged, ratelimit.state unlogged, ratelimit.zone logged" "p u p" \
	"$(q "SELECT string_agg(relpersistence::text, ' ' ORDER BY relname) FROM pg_class
	      WHERE oid IN ('ratelimit.history'::regclass, 'ratelimit.zone'::regclass, 'ratelimit.state'::regclass)")"

# A stream of calls with history, in one long transaction, killed once it
# has written (it has a transaction id).
q "$(stream "rl_limit('a_hist', 'killed-' || (g % 100))" killme)" >/dev/null 2>&1 &
bulk=$!
pid=$(busy_pid killme "AND backend_xid IS NOT NULL")
[ -n "$pid" ] && rl_as_cluster_user kill -9 "$pid"
wait "$bulk" 2>/dev/null
rl_check "(a) found the busy backend, writing, and killed it" yes "$([ -n "$pid" ] && echo yes || echo no)"
rl_check "(a) the server answers after crash recovery" yes "$(rl_wait_answering "$DB")"
rl_check "(a) the server log shows the kill and the recovery" "yes yes" \
	"$(grep -q "(PID $pid) was terminated by signal 9" "$RL_CLUSTER_DIR/server.log" && echo yes || echo no) $(grep -q 'all server processes terminated; reinitializing' "$RL_CLUSTER_DIR/server.log" && echo yes || echo no)"
rl_check "(a) ratelimit.history kept every committed record" "$history_before" "$(q "SELECT count(*) FROM ratelimit.history")"
rl_check "(a) and none of the killed transaction's" 0 "$(q "SELECT count(*) FROM ratelimit.history WHERE key LIKE 'killed-%'")"
rl_check "(a) the history per zone is intact" "a_hist 1000 0|a_small 5 3|a_sw 3 0" \
	"$(q "SELECT string_agg(zone || ' ' || a || ' ' || r, '|' ORDER BY zone) FROM (
	        SELECT zone, count(*) FILTER (WHERE allowed) a, count(*) FILTER (WHERE NOT allowed) r
	        FROM ratelimit.history GROUP BY zone) h")"
rl_check "(a) the unlogged state is empty after crash recovery" 0 "$(q "SELECT count(*) FROM ratelimit.state")"
rl_check "(a) the zones survive" "a_hist a_plain a_small a_sw" "$(q "SELECT string_agg(zone, ' ' ORDER BY zone) FROM rl_zones")"
rl_check "(a) the drained key starts full (fail-open)" 5 "$(q "SELECT remaining FROM rl_peek('a_small', 'drained', 0)")"
rl_check "(a) the sliding window starts empty" 1000 "$(q "SELECT remaining FROM rl_peek('a_sw', 'w', 0)")"
rl_check "(a) the zone without history starts full" 10 "$(q "SELECT remaining FROM rl_peek('a_plain', 'p', 0)")"
rl_check "(a) decisions work after recovery" "true 4" "$(q "SELECT allowed || ' ' || remaining FROM rl_limit('a_small', 'drained')")"
rl_check "(a) and are recorded again" "$((history_before + 1))" "$(q "SELECT count(*) FROM ratelimit.history")"
rl_check "(a) no lock is left" 0 "$(q "$LOCKS_SQL")"

###########################################################################
for access in direct spi; do
	export PGOPTIONS="-c ratelimit.table_access=$access"
	echo "# (b) table store, access path $access: statement_timeout and pg_cancel_backend"
	rl_check "(b $access) the access path is in force" "$access" "$(q "SHOW ratelimit.table_access")"
	tb=b_tb_$access sw=b_sw_$access
	q "SELECT rl_zone_set('$tb', 'token_bucket', 1000000000, '1 hour'),
	          rl_zone_set('$sw', 'sliding_window', 1000000, '1 hour')" >/dev/null
	rl_check "(b $access) a key with 7 tokens taken" 999999993 "$(q "SELECT remaining FROM rl_limit('$tb', 'to', 7)")"
	before=$(q "$SNAPSHOT_SQL")

	# statement_timeout, in a transaction that took tokens before.
	counted=$(allowed_of "$tb")
	out=$(session <<-SQL
		SET ratelimit.now_override = '$CLOCK';
		BEGIN;
		SELECT 'first call: ' || remaining FROM rl_limit('$tb', 'to', 5);
		SET LOCAL statement_timeout = '500ms';
		$(stream "rl_limit('$tb', 'to')" calls);
		ROLLBACK;
		$OWN_LOCKS_SQL;
		SELECT 'snapshot: ' || ($SNAPSHOT_SQL);
		SELECT 'after: ' || remaining FROM rl_peek('$tb', 'to', 0);
		SELECT 'next: ' || remaining FROM rl_limit('$tb', 'to');
	SQL
	)
	calls=$(( $(allowed_of "$tb") - counted - 2 ))
	echo "# (b $access) observed: the cancelled statement had made $calls calls (rl_counters)"
	rl_check "(b $access) timeout: the cancelled statement had made calls" yes "$([ "$calls" -gt 0 ] && echo yes || echo no)"
	rl_check "(b $access) timeout: the transaction's first call took 5" 999999988 "$(line 'first call: ' "$out")"
	rl_check "(b $access) timeout: statement_timeout cancelled the long statement" yes \
		"$(has 'canceling statement due to statement timeout' "$out")"
	rl_check "(b $access) timeout: the session holds no lock afterwards" 0 "$(line 'own locks: ' "$out")"
	rl_check "(b $access) timeout: every state row is as before the transaction" "$before" "$(line 'snapshot: ' "$out")"
	rl_check "(b $access) timeout: every token of the transaction is back" 999999993 "$(line 'after: ' "$out")"
	rl_check "(b $access) timeout: the next call in the same session works" 999999992 "$(line 'next: ' "$out")"
	rl_check "(b $access) timeout: no other error" 1 "$(grep -c 'ERROR' <<<"$out")"

	# pg_cancel_backend, while another session waits for the key.
	session >"$RL_CLUSTER_DIR/cancel.out" <<-SQL &
		SET ratelimit.now_override = '$CLOCK';
		$(stream "rl_limit('$tb', 'to', 1)" cancelme);
		$OWN_LOCKS_SQL;
		SELECT pg_sleep(1) IS NULL;	-- let the waiting call commit
		SELECT 'snapshot: ' || ($SNAPSHOT_SQL);
		SELECT 'after: ' || remaining FROM rl_peek('$tb', 'to', 0);
	SQL
	long=$!
	pid=$(busy_pid cancelme "AND backend_xid IS NOT NULL")
	rl_check "(b $access) cancel: found the busy backend, writing" yes "$([ -n "$pid" ] && echo yes || echo no)"
	q "SELECT remaining FROM rl_limit('$tb', 'to')" >"$RL_CLUSTER_DIR/waiter.out" 2>&1 &
	waiter=$!
	sleep 0.5
	rl_check "(b $access) cancel: a call on the same key waits for the long transaction" yes \
		"$(kill -0 $waiter 2>/dev/null && [ -n "$(rl_psql -d postgres -tA -c "SELECT 1 FROM pg_stat_activity
			WHERE datname = '$DB' AND wait_event_type = 'Lock' LIMIT 1")" ] && echo yes || echo no)"
	rl_check "(b $access) cancel: pg_cancel_backend" t "$(rl_psql -d postgres -tA -c "SELECT pg_cancel_backend($pid)")"
	wait "$long" "$waiter"
	out=$(cat "$RL_CLUSTER_DIR/cancel.out")
	rl_check "(b $access) cancel: the long statement was cancelled" yes "$(has 'canceling statement due to user request' "$out")"
	rl_check "(b $access) cancel: the session holds no lock afterwards" 0 "$(line 'own locks: ' "$out")"
	rl_check "(b $access) cancel: the waiting call decided on the committed state" 999999991 "$(cat "$RL_CLUSTER_DIR/waiter.out")"
	rl_check "(b $access) cancel: every state row is as committed (the waiting call's token taken, none of its own)" \
		"$(q "$SNAPSHOT_SQL")" "$(line 'snapshot: ' "$out")"
	rl_check "(b $access) cancel: the cancelled session saw that (no token of its own taken)" 999999991 "$(line 'after: ' "$out")"
	rl_check "(b $access) no lock is left" 0 "$(q "$LOCKS_SQL")"

	# The exact sliding window: 600 admissions a second apart (2000-01-01),
	# committed: sealed chunk rows.  Then, on the real clock, a long
	# statement expires them all (deleting the chunk rows), admits and seals
	# new ones, and is cancelled.
	q "DO \$\$ BEGIN
	     FOR i IN 1..600 LOOP
	       PERFORM set_config('ratelimit.now_override', ('2000-01-01 00:00:00+00'::timestamptz + make_interval(secs => i))::text, true);
	       PERFORM rl_sliding_window('$sw', 'w');
	     END LOOP;
	   END \$\$" >/dev/null
	chunks=$(q "SELECT count(*) FROM ratelimit.state s JOIN ratelimit.zone z USING (zone_id) WHERE z.zone = '$sw' AND s.part > 0")
	rl_check "(b $access) window: the committed log has chunk rows ($chunks)" yes "$([ "${chunks:-0}" -ge 3 ] 2>/dev/null && echo yes || echo no)"
	before=$(q "$SNAPSHOT_SQL")
	counted=$(allowed_of "$sw")
	# 2 s: long enough for well over 1000 admissions on a loaded machine (at
	# 700 ms, one CI run beside compilers admitted none on the SPI path).
	out=$(session <<-SQL
		SET statement_timeout = '2s';
		$(stream "rl_sliding_window('$sw', 'w')" calls);
		RESET statement_timeout;
		$OWN_LOCKS_SQL;
	SQL
	)
	rl_check "(b $access) window: statement_timeout cancelled the long statement" yes \
		"$(has 'canceling statement due to statement timeout' "$out")"
	rl_check "(b $access) window: the session holds no lock afterwards" 0 "$(line 'own locks: ' "$out")"
	calls=$(( $(allowed_of "$sw") - counted ))
	echo "# (b $access) observed: the cancelled statement had admitted $calls calls (rl_counters)"
	rl_check "(b $access) window: the cancelled statement had admitted enough calls to seal chunks" yes \
		"$([ "$calls" -gt 1000 ] && echo yes || echo no)"
	rl_check "(b $access) window: every row (head and chunks) is as before" "$before" "$(q "$SNAPSHOT_SQL")"
	rl_check "(b $access) window: rl_peek at the last admission sees the 600 committed" 999400 \
		"$(CLOCK='2000-01-01 00:10:00+00' q "SELECT remaining FROM rl_peek('$sw', 'w', 0)")"
	rl_check "(b $access) window: an hour and 3 minutes in, 420 are left in the window (chunks read)" 999580 \
		"$(CLOCK='2000-01-01 01:03:00+00' q "SELECT remaining FROM rl_peek('$sw', 'w', 0)")"
	rl_check "(b $access) window: a later call on the real clock works (everything expired)" "true 999999" \
		"$(rl_psql -d "$DB" -tA -c "SELECT allowed || ' ' || remaining FROM rl_sliding_window('$sw', 'w')" 2>&1)"
	rl_check "(b $access) window: it deleted every expired chunk row" 0 \
		"$(q "SELECT count(*) FROM ratelimit.state s JOIN ratelimit.zone z USING (zone_id) WHERE z.zone = '$sw' AND s.part > 0")"
	rl_check "(b $access) window: and the next call sees its admission" "true 999998" \
		"$(rl_psql -d "$DB" -tA -c "SELECT allowed || ' ' || remaining FROM rl_sliding_window('$sw', 'w')" 2>&1)"
	rl_check "(b $access) no lock is left" 0 "$(q "$LOCKS_SQL")"
done
unset PGOPTIONS

###########################################################################
echo "# (c) shmem store: statement_timeout and pg_cancel_backend"
q "SELECT rl_zone_set('c_shm', 'token_bucket', 1000000000, '1 hour', store => 'shmem'),
          rl_zone_set('c_shm_h', 'token_bucket', 1000000000, '1 hour', store => 'shmem', history => true)" >/dev/null

counted=$(allowed_of c_shm)
out=$(session <<-SQL
	SET ratelimit.now_override = '$CLOCK';
	BEGIN;
	SELECT 'first call: ' || remaining FROM rl_limit('c_shm', 'k', 5);
	SET LOCAL statement_timeout = '500ms';
	$(stream "rl_limit('c_shm', 'k')" calls);
	ROLLBACK;
	$OWN_LOCKS_SQL;
	SELECT 'after: ' || remaining FROM rl_peek('c_shm', 'k', 0);
	SELECT 'next: ' || remaining FROM rl_limit('c_shm', 'k');
SQL
)
calls=$(( $(allowed_of c_shm) - counted ))
after=$(line 'after: ' "$out")
rl_check "(c) timeout: the first call took 5" 999999995 "$(line 'first call: ' "$out")"
rl_check "(c) timeout: statement_timeout cancelled the long statement" yes "$(has 'canceling statement due to statement timeout' "$out")"
rl_check "(c) timeout: the calls made before the cancel stay taken, the rollback gives nothing back" yes \
	"$([ -n "$after" ] && [ "$after" -lt 999999994 ] && echo yes || echo no)"
echo "# (c) observed: the cancelled statement made $((999999995 - ${after:-0})) calls before the cancel; all stay taken"
rl_check "(c) timeout: tokens taken = what rl_counters counted (5 + 1 per call, and the next call)" \
	"$((1000000000 - 5 - (calls - 2)))" "$after"
rl_check "(c) timeout: the session holds no lock afterwards" 0 "$(line 'own locks: ' "$out")"
rl_check "(c) timeout: the next call works" "$((after - 1))" "$(line 'next: ' "$out")"
rl_check "(c) timeout: no other error" 1 "$(grep -c 'ERROR' <<<"$out")"

# pg_cancel_backend; the zone keeps history, which rolls back.
counted=$(allowed_of c_shm_h)
history=$(q "SELECT count(*) FROM ratelimit.history WHERE zone = 'c_shm_h'")
session >"$RL_CLUSTER_DIR/cancel.out" <<-SQL &
	SET ratelimit.now_override = '$CLOCK';
	$(stream "rl_limit('c_shm_h', 'k')" cancelme);
	$OWN_LOCKS_SQL;
	SELECT 'after: ' || remaining FROM rl_peek('c_shm_h', 'k', 0);
SQL
long=$!
pid=$(busy_pid cancelme "AND backend_xid IS NOT NULL")
rl_check "(c) cancel: found the busy backend, writing history" yes "$([ -n "$pid" ] && echo yes || echo no)"
rl_check "(c) cancel: another session's call on the same key does not wait (no row lock)" t \
	"$(timeout 10 "$RL_PG_BIN/psql" -X -q -d "$DB" -tA -c "SET ratelimit.now_override = '$CLOCK'" \
		-c "SELECT allowed FROM rl_limit('c_shm_h', 'k')" 2>&1)"
rl_check "(c) cancel: pg_cancel_backend" t "$(rl_psql -d postgres -tA -c "SELECT pg_cancel_backend($pid)")"
wait "$long"
out=$(cat "$RL_CLUSTER_DIR/cancel.out")
calls=$(( $(allowed_of c_shm_h) - counted ))
after=$(line 'after: ' "$out")
rl_check "(c) cancel: the long statement was cancelled" yes "$(has 'canceling statement due to user request' "$out")"
rl_check "(c) cancel: the calls made before the cancel stay taken" yes \
	"$([ -n "$after" ] && [ "$after" -lt 999999999 ] && echo yes || echo no)"
echo "# (c) observed: $((1000000000 - ${after:-0})) calls before pg_cancel_backend; all stay taken"
rl_check "(c) cancel: tokens taken = what rl_counters counted (the other session's call too)" "$((1000000000 - calls))" "$after"
rl_check "(c) cancel: the history rows of the cancelled statement rolled back (the tokens did not)" "$((history + 1))" \
	"$(q "SELECT count(*) FROM ratelimit.history WHERE zone = 'c_shm_h'")"
rl_check "(c) cancel: the session holds no lock afterwards" 0 "$(line 'own locks: ' "$out")"
rl_check "(c) cancel: the next call works" "$((after - 1))" "$(q "SELECT remaining FROM rl_limit('c_shm_h', 'k')")"
rl_check "(c) no lock is left" 0 "$(q "$LOCKS_SQL")"
rl_check "(c) nothing of the shmem zones is in the state table" 0 \
	"$(q "SELECT count(*) FROM ratelimit.state s JOIN ratelimit.zone z USING (zone_id) WHERE z.store = 'shmem'")"
rl_check "(c) no backend crashed after (a)" 1 "$(grep -c 'terminated by signal' "$RL_CLUSTER_DIR/server.log")"

rl_psql -d postgres -c "DROP DATABASE $DB" >/dev/null
echo "fault (audit): $passed passed, $failed failed"
[ "$failed" -eq 0 ]
