#!/usr/bin/env bash
# ratelimit beside the Node.js PostgreSQL rate limiters (peers.js says
# which, and how each is called).  Starts a cluster of its own (peers,
# ratelimit preloaded), installs the pinned npm packages (npm ci, from
# package-lock.json), then:
#
#   bash test/bench/peers/peers.sh            correctness only (the test
#       command runs this): every limiter admits exactly its limit under 16
#       concurrent workers; TAP lines, no timing
#   bash test/bench/peers/peers.sh --bench [CLIENTS SECONDS ROUNDS]
#       the benchmark too (default "1,4,16" 1 5): decisions per second,
#       interleaved slices; raw lines and the table in
#       test/bench/out/peers.txt
#
# Where node or npm is missing, or npm ci fails (no registry), prints
# "# SKIP peers: <why>" and exits 0: skipped, never passed.
set -uo pipefail
source "$(dirname "$0")/../../../scripts/lib.sh"

HERE=$RL_ROOT/test/bench/peers
DB=rl_peers
trap 'rl_cluster_stop' EXIT

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
	echo "# SKIP peers: node or npm is not installed"
	exit 0
fi
log=$(mktemp)
if ! (cd "$HERE" && npm ci --no-audit --no-fund </dev/null >"$log" 2>&1); then
	echo "# SKIP peers: npm could not install the peers' packages: $(rl_npm_error "$log")"
	rm -f "$log"
	exit 0
fi
rm -f "$log"

RL_PRELOAD=ratelimit rl_cluster_start peers "fsync = off" "max_connections = 200" >/dev/null
rl_psql -d postgres -c "CREATE DATABASE $DB" >/dev/null
# fixed_window, as the two peers count: a window's count against a limit.
rl_psql -d "$DB" -q -c "CREATE EXTENSION ratelimit" \
	-c "SELECT rl_zone_set('peers_table', 'fixed_window', 20, '1 hour'),
	           rl_zone_set('peers_shmem', 'fixed_window', 20, '1 hour', store => 'shmem')" >/dev/null
export PGDATABASE=$DB

echo "# peers: every limiter admits exactly its limit under concurrency"
(cd "$HERE" && node peers.js check)
status=$?
[ "$status" -eq 0 ] || exit "$status"

if [ "${1:-}" = --bench ]; then
	out=$RL_ROOT/test/bench/out/peers.txt
	mkdir -p "$(dirname "$out")"
	# Limits out of reach: every call writes.
	rl_psql -d "$DB" -q -c "SELECT rl_zone_set('peers_table', rate => 1000000000),
	                               rl_zone_set('peers_shmem', rate => 1000000000)" >/dev/null
	{
		echo "# test/bench/peers/peers.sh --bench ${2:-1,4,16} ${3:-1} ${4:-5}, $(date -u '+%Y-%m-%d %H:%M UTC')"
		echo "# $("$RL_PG_BIN/postgres" --version), node $(node --version), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
	} >"$out"
	(cd "$HERE" && node peers.js bench "${2:-1,4,16}" "${3:-1}" "${4:-5}") | tee -a "$out" | grep -v '^{'
fi
