#!/usr/bin/env bash
# Builds and installs ratelimit, starts a throwaway PostgreSQL cluster of its
# own and shows rl_token_bucket working in real time.
#   bash scripts/demo.sh         run the demo (leaves the cluster running)
#   bash scripts/demo.sh stop    stop the demo cluster
set -euo pipefail
source "$(dirname "$0")/lib.sh"

rl_cluster_use demo
if [ "${1:-}" = "stop" ]; then
	rl_cluster_stop
	echo "demo cluster stopped"
	exit 0
fi
rl_cluster_stop

# Only what building and running it needs: the test command installs the
# test tools.
rl_install_packages "${RL_BUILD_PACKAGES[@]}"
rl_build_install
RL_PRELOAD=ratelimit rl_cluster_start demo
rl_psql -d postgres -c 'CREATE EXTENSION ratelimit' >/dev/null

call="SELECT rl_token_bucket('demo:user:42', 1, 10)"
calls() {
	local n=$1 args=() i
	for i in $(seq 1 "$n"); do args+=(-c "$call"); done
	rl_psql -d postgres -tA "${args[@]}" | tr '\n' ' '
}
echo
echo "rate 1 token/s, window 10 s (capacity 10); each call takes one token:"
echo "  $call"
echo "12 calls in quick succession: $(calls 12)"
echo "sleeping 4 seconds..."
sleep 4
echo "5 calls in quick succession:  $(calls 5)"
echo
echo "The cluster keeps running. Connect with:"
echo "  $RL_PG_BIN/psql -h $PGHOST -p $PGPORT -U postgres postgres"
echo "Stop it with:"
echo "  bash $RL_ROOT/scripts/demo.sh stop"
