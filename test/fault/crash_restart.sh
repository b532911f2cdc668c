#!/usr/bin/env bash
# Fault test: clean restarts keep the unlogged state; a crash (immediate
# stop) empties it (fail-open, documented) and the server keeps answering;
# a backend killed with SIGKILL mid-call takes the server through crash
# recovery and it answers again.  Runs against the cluster described by
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

rl_cluster_ctl restart -m fast -w -l "$RL_CLUSTER_DIR/server.log" >/dev/null
rl_check "state survives a clean restart" 6 "$(q "SELECT rl_token_bucket('crash', 1, 10, 0)")"

rl_cluster_ctl stop -m immediate -w >/dev/null
rl_cluster_ctl start -w -l "$RL_CLUSTER_DIR/server.log" >/dev/null
wait_ready
rl_check "unlogged state is empty after a crash (fail-open)" 0 "$(q "SELECT count(*) FROM ratelimit.token_bucket")"
rl_check "a key starts full again after a crash" 10 "$(q "SELECT rl_token_bucket('crash', 1, 10, 0)")"

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
