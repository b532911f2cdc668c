#!/usr/bin/env bash
# Fault test: clean restarts keep the unlogged state; a crash (immediate
# stop) empties it (fail-open, documented) and the server keeps answering,
# while durable zones (logged state) refuse their drained keys exactly as
# before and a half-used key keeps exactly its remaining; a backend killed
# with SIGKILL mid-call takes the server through crash recovery and it
# answers again, a durable zone keeping what committed before the kill and
# nothing of the killed transaction.  Runs against the cluster described by
# RL_PGDATA/PGHOST/PGPORT (scripts/lib.sh); prints "ok"/"not ok" lines.
set -uo pipefail
source "$(dirname "$0")/../../scripts/lib.sh"

q() { rl_psql -d rl_fault -tA -c "SET ratelimit.now_override = '2026-01-01 00:00:00+00'" -c "$1" 2>&1; }
wait_ready() {
	for _ in $(seq 1 60); do
		"$RL_PG_BIN/pg_isready" -q -h "$PGHOST" -p "$PGPORT" && return 0
		sleep 0.5
	done
	return 1
}

rl_psql -d postgres -c 'DROP DATABASE IF EXISTS rl_fault' -c 'CREATE DATABASE rl_fault' >/dev/null
rl_psql -d rl_fault -c 'CREATE EXTENSION ratelimit' >/dev/null

rl_check "take 4 of 10 tokens" 6 "$(q "SELECT rl_token_bucket('crash', 1, 10, 4)")"

# Durable zones (logged state) beside an unlogged one, keys drained: 3
# admitted of 5 calls each.
q "SELECT rl_zone_set('crash_' || a, a, 3, '1 day', durable => true)
   FROM unnest(ARRAY['token_bucket', 'fixed_window', 'sliding_window', 'gcra']) a" >/dev/null
q "SELECT rl_zone_set('crash_unlogged', 'fixed_window', 3, '1 day')" >/dev/null
DURABLE_ZONES="'crash_token_bucket', 'crash_fixed_window', 'crash_sliding_window', 'crash_gcra'"
admitted_of_5() {	# ZONES KEY: per zone, how many of 5 calls are admitted
	q "SELECT string_agg((SELECT count(*) FROM generate_series(1, 5) WHERE (rl_limit(z, '$2')).allowed)::text,
	                     ' ' ORDER BY z) FROM unnest(ARRAY[$1]) z"
}
rl_check "durable zones: 3 of 5 admitted on a drained key, then an unlogged zone" "3 3 3 3 3" \
	"$(admitted_of_5 "$DURABLE_ZONES, 'crash_unlogged'" drained)"

# A key half used in every durable zone (1 of 3): what remains must go on
# exactly.  rl_peek's remaining is what a call now would leave (2 left: 1).
q "SELECT rl_limit(z, 'partial') FROM unnest(ARRAY[$DURABLE_ZONES]) z" >/dev/null
remaining_of() {	# KEY: each durable zone's remaining for KEY, by rl_peek
	q "SELECT string_agg((rl_peek(z, '$1')).remaining::text, ' ' ORDER BY z) FROM unnest(ARRAY[$DURABLE_ZONES]) z"
}
rl_check "durable zones: the half-used keys have 2 of 3 left (rl_peek: 1 after a call)" "1 1 1 1" \
	"$(remaining_of partial)"

rl_cluster_ctl restart -m fast -w -l "$RL_CLUSTER_DIR/server.log" >/dev/null
rl_check "state survives a clean restart" 6 "$(q "SELECT rl_token_bucket('crash', 1, 10, 0)")"
rl_check "durable zones after a clean restart: the drained keys refuse (0 of 5 each)" "0 0 0 0" \
	"$(admitted_of_5 "$DURABLE_ZONES" drained)"
rl_check "an unlogged zone after a clean restart: its drained key still refuses (0 of 5)" 0 \
	"$(admitted_of_5 "'crash_unlogged'" drained)"

rl_cluster_ctl stop -m immediate -w >/dev/null
rl_cluster_ctl start -w -l "$RL_CLUSTER_DIR/server.log" >/dev/null
wait_ready
rl_check "unlogged state is empty after a crash (fail-open)" 0 "$(q "SELECT count(*) FROM ratelimit.token_bucket")"
rl_check "a key starts full again after a crash" 10 "$(q "SELECT rl_token_bucket('crash', 1, 10, 0)")"
rl_check "durable zones after a crash: the drained keys refuse exactly as before (0 of 5 each)" "0 0 0 0" \
	"$(admitted_of_5 "$DURABLE_ZONES" drained)"
rl_check "an unlogged zone after a crash: its drained key starts full (3 of 5)" 3 \
	"$(admitted_of_5 "'crash_unlogged'" drained)"
rl_check "durable zones after a crash: the half-used keys have exactly what they had" "1 1 1 1" \
	"$(remaining_of partial)"
rl_check "durable zones after a crash: the half-used keys admit exactly their remaining 2 (of 5 each)" "2 2 2 2" \
	"$(admitted_of_5 "$DURABLE_ZONES" partial)"

# Kill a backend in the middle of a long bulk call on one key, once its
# calls have written state (generate_series in a subquery's target list
# streams: in FROM it would be materialised before the first call).
q "SELECT pg_sleep(0) FROM (SELECT rl_token_bucket('killed', 1e6, 60) FROM (SELECT generate_series(1, 50000000)) g) s" >/dev/null 2>&1 &
bulk=$!
pid=$(rl_kill_busy_backend rl_fault killed)
wait "$bulk" 2>/dev/null
rl_check "killed the busy backend while it was calling (its transaction had written)" yes "$([ -n "$pid" ] && echo yes || echo no)"
wait_ready
ready=no
for _ in $(seq 1 60); do
	[ "$(q 'SELECT 1' | tail -1)" = 1 ] && { ready=yes; break; }
	sleep 0.5
done
rl_check "server answers after a backend was killed" yes "$ready"
rl_check "decisions work after recovery" 9 "$(q "SELECT rl_token_bucket('after-kill', 1, 10)")"
rl_check "bulk call's key was never committed" 0 "$(q "SELECT count(*) FROM ratelimit.token_bucket WHERE id = 'killed'")"

# The same kill in a durable zone: what committed before it stays (crash
# recovery replays it), the killed transaction's decisions do not.
q "SELECT rl_zone_set('crash_killed', 'token_bucket', 1000000, '1 second', burst => 100000000, durable => true)" >/dev/null
rl_check "durable zone: 5 calls committed before the kill" 5 \
	"$(q "SELECT count(*) FILTER (WHERE (rl_limit('crash_killed', 'k')).allowed) FROM generate_series(1, 5)")"
q "SELECT pg_sleep(0) FROM (SELECT rl_limit('crash_killed', 'k') FROM (SELECT generate_series(1, 50000000)) g) s" >/dev/null 2>&1 &
bulk=$!
pid=$(rl_kill_busy_backend rl_fault crash_killed)
wait "$bulk" 2>/dev/null
rl_check "killed the busy backend in the middle of its durable calls" yes "$([ -n "$pid" ] && echo yes || echo no)"
rl_check "server answers after the kill" yes "$(rl_wait_answering rl_fault)"
rl_check "durable zone after the kill: the committed decisions are kept, the killed transaction's are not" \
	"99999995" "$(q "SELECT remaining + 1 FROM rl_peek('crash_killed', 'k')")"
rl_check "durable zones after the kill: the drained keys still refuse" "0 0 0 0" "$(admitted_of_5 "$DURABLE_ZONES" drained)"

# A cancelled call (statement_timeout) leaves consistent state.
q "SELECT rl_token_bucket('timeout', 1, 10, 2)" >/dev/null
out=$(rl_psql -d rl_fault -tA -c "SET ratelimit.now_override = '2026-01-01 00:00:00+00'" -c "SET statement_timeout = '200ms'" \
	-c "SELECT count(*) FROM (SELECT rl_token_bucket('timeout', 1e6, 600) FROM (SELECT generate_series(1, 50000000)) g) s" 2>&1)
rl_check "statement_timeout cancels a long call" yes "$(echo "$out" | grep -q 'canceling statement due to statement timeout' && echo yes || echo no)"
rl_check "cancelled call changed nothing" 8 "$(q "SELECT rl_token_bucket('timeout', 1, 10, 0)")"

# A bad test-clock value in postgresql.conf is refused at reload; it must
# not take down a backend that has the library loaded (PostgreSQL 15 raises
# for an unknown time zone inside the parser the check hook uses).
conf=$RL_PGDATA/postgresql.conf
rl_as_cluster_user cp "$conf" "$conf.orig"
echo "ratelimit.now_override = '2026-01-01 00:00:00 No/Such_Zone'" | rl_as_cluster_user tee -a "$conf" >/dev/null
out=$(rl_psql -d rl_fault -tA -c "SELECT rl_token_bucket('reload', 1, 10, 0)" -c "SELECT pg_reload_conf()" \
	-c "SELECT pg_sleep(1)" -c "SELECT 'alive'" 2>&1 | tail -1)
rl_as_cluster_user mv "$conf.orig" "$conf"
rl_psql -d postgres -tA -c "SELECT pg_reload_conf()" >/dev/null
rl_check "a bad ratelimit.now_override at reload leaves the session alive" alive "$out"

rl_psql -d postgres -c 'DROP DATABASE rl_fault' >/dev/null
echo "fault: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
