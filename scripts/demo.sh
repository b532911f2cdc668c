#!/usr/bin/env bash
# Builds and installs ratelimit, starts a throwaway PostgreSQL cluster of its
# own (.cluster/demo, on a free loopback port) and shows, in real time, a
# zone deciding with rl_limit (a refusal: allowed = f and retry_after) and
# the ad-hoc rl_token_bucket (-1 = refused).  Ends with the PG* variables
# that reach the cluster (for psql and examples/), also written to
# .cluster/demo/env (removed by stop).  Running it again starts a new
# cluster in place of the old one.
#   bash scripts/demo.sh         run the demo (leaves the cluster running)
#   bash scripts/demo.sh stop    stop the demo cluster
set -euo pipefail
source "$(dirname "$0")/lib.sh"

rl_cluster_use demo
if [ "${1:-}" = "stop" ]; then
	rl_cluster_stop
	rm -f "$RL_CLUSTER_DIR/env"	# its variables reach nothing now
	echo "demo cluster stopped"
	exit 0
fi
rl_cluster_stop

# Only what building and running it needs: the test command installs the
# test tools.
rl_install_packages "${RL_BUILD_PACKAGES[@]}"
rl_build_install
RL_PRELOAD=ratelimit rl_cluster_start demo
export PGDATABASE=postgres
rl_psql -c 'CREATE EXTENSION ratelimit' >/dev/null

# A zone: a named policy, defined once; each request is one rl_limit call.
zone_set="SELECT rl_zone_set('demo_api', 'token_bucket', 3, '1 minute');"
limit="SELECT allowed, remaining, retry_after FROM rl_limit('demo_api', 'user:42');"
rl_psql -c "$zone_set" >/dev/null
# Five requests, each its own statement (as an application makes them),
# collected into one table to show.
requests=(-c "CREATE TEMP TABLE requests (request int, allowed boolean, remaining bigint, retry_after interval)")
for i in 1 2 3 4 5; do
	requests+=(-c "INSERT INTO requests ${limit/SELECT/SELECT $i,}")
done
requests+=(-c "SELECT * FROM requests ORDER BY request")
echo
echo "A zone of 3 requests, refilled at 3 a minute (one every 20 s), defined once:"
echo "  $zone_set"
echo "Five requests of key 'user:42' in quick succession, each one call:"
echo "  $limit"
echo
rl_psql -P footer=off "${requests[@]}" | sed "/^$/d; s/^/  /"
echo
echo "Requests 4 and 5 are refused: allowed = f, and retry_after says when a"
echo "request of this key would be admitted again.  A refusal takes nothing."

# The ad-hoc token bucket: no zone, the parameters in the call.
call="SELECT rl_token_bucket('demo:user:42', 1, 10);"
calls() {
	local n=$1 args=() i
	for i in $(seq 1 "$n"); do args+=(-c "$call"); done
	rl_psql -tA "${args[@]}" | tr '\n' ' '
}
echo
echo "rl_token_bucket(id, rate, window): no zone, a bucket of rate x window tokens"
echo "refilled at rate a second; each call takes one and returns the tokens left,"
echo "or -1 when there are too few: -1 means refused (and takes nothing)."
echo "  $call    -- 1 a second, capacity 10"
echo "  12 calls in quick succession: $(calls 12)"
echo "  sleeping 4 seconds (4 tokens come back)..."
sleep 4
echo "  5 calls in quick succession:  $(calls 5)"

env_file=$RL_CLUSTER_DIR/env
printf 'export PGHOST=%s\nexport PGPORT=%s\nexport PGUSER=%s\nexport PGDATABASE=%s\n' \
	"$PGHOST" "$PGPORT" "$PGUSER" "$PGDATABASE" >"$env_file"
echo
echo "The cluster keeps running. These variables reach it (no password: trust on"
echo "127.0.0.1) for psql and for the apps of examples/ (examples/README.md):"
echo
cat "$env_file"
echo
echo "(or: source $env_file), then e.g."
echo "  psql -c 'SELECT zone, algorithm, rate, period FROM rl_zones'"
echo "Stop it with:"
echo "  bash $RL_ROOT/scripts/demo.sh stop"
