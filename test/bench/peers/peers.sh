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
#       test/bench/out/peers.txt, the plot (random keys, decisions per
#       second by client count) in test/bench/peers.png
#   bash test/bench/peers/peers.sh --plot
#       draws the plots again from the last runs' data (test/bench/out)
#
# The server runs with PostgreSQL's defaults for durability (fsync on,
# synchronous_commit on), as users run it: both peers keep their counts in
# logged tables, so each of their decisions waits for a WAL flush, as a
# durable zone's does (rl_durable); the default zones are unlogged.  With
# PEERS_FSYNC=off the server runs with fsync off instead (no flush waits
# for anyone: the CPU cost of each limiter alone); the output files are
# then peers-fsync-off.txt and peers-fsync-off.png.  PEERS_SETTINGS adds
# server settings (one "name = value" per line, e.g. "wal_writer_flush_after
# = 0"), and PEERS_TAG a tag to the output files' names (peers-TAG.txt).
#
# Where node or npm is missing, or npm ci fails (no registry), prints
# "# SKIP peers: <why>" and exits 0: skipped, never passed.
set -uo pipefail
source "$(dirname "$0")/../../../scripts/lib.sh"

HERE=$RL_ROOT/test/bench/peers
DB=rl_peers
trap 'rl_cluster_stop' EXIT

# draw_plot DAT PNG: decisions per second by client count, one line per
# limiter (DAT: what peers.js bench wrote to PEERS_PLOT_DAT).
draw_plot() {
	local dat=$1 png=$2 clients
	rl_install_packages gnuplot-nox >/dev/null 2>&1 || true
	if ! command -v gnuplot >/dev/null; then
		echo "# no gnuplot: no plot (apt-get install gnuplot-nox)"
		return 0
	fi
	clients=$(awk '$1 ~ /^[0-9]+$/ { printf "%s%s", sep, $1; sep = "," }' "$dat")
	gnuplot <<GNUPLOT
set terminal pngcairo size 900,640 font "sans,10" noenhanced
set output '$png'
set title "Decisions per second by client count (one Node process, a pg Pool, 10,000 random keys, every call written)\n$(sed -n 's/^# \(.*\)/\1/p' "$dat" | head -1)"
set xlabel "clients (pool connections = concurrent workers)"
set ylabel "decisions per second"
set logscale x 2
set xtics ($clients)
set xrange [0.8:$(( $(tr ',' '\n' <<<"$clients" | sort -n | tail -1) * 5 / 4 + 1 ))]
set yrange [0:*]
set grid
set key below maxrows 3 width 1
plot '$dat' using 1:2 with linespoints lc rgb '#555555' dt 2 lw 1.5 pt 1 title 'SELECT 1: a round trip, no limiter', \\
     '' using 1:3 with linespoints lc rgb '#d62728' lw 2 pt 5 title 'rate-limiter-flexible (RateLimiterPostgres)', \\
     '' using 1:4 with linespoints lc rgb '#e377c2' lw 2 pt 6 title 'express-rate-limit + rate-limit-postgresql', \\
     '' using 1:5 with linespoints lc rgb '#ff7f0e' lw 2.5 pt 8 title 'rl_limit, table store', \\
     '' using 1:6 with linespoints lc rgb '#2ca02c' lw 2 pt 4 title 'rl_limit, durable zone', \\
     '' using 1:7 with linespoints lc rgb '#1f77b4' lw 3 pt 7 title 'rl_limit, shmem store'
GNUPLOT
	[ -s "$png" ] && echo "# plot: $png"
}

# --plot: draw the plots again from the last runs' data (test/bench/out).
if [ "${1:-}" = --plot ]; then
	for dat in "$RL_ROOT"/test/bench/out/peers*.dat; do
		[ -e "$dat" ] || rl_die "no test/bench/out/peers*.dat: run --bench first"
		name=$(basename "$dat" .dat)
		draw_plot "$dat" "$RL_ROOT/test/bench/$name.png"
	done
	exit 0
fi

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

FSYNC=${PEERS_FSYNC:-on}
case $FSYNC in
	on) SUFFIX= ;;
	off) SUFFIX=-fsync-off ;;
	*) rl_die "PEERS_FSYNC must be on or off, not '$FSYNC'" ;;
esac
SUFFIX+=${PEERS_TAG:+-$PEERS_TAG}
settings=("fsync = $FSYNC" "max_connections = 200")
while IFS= read -r line; do
	[ -n "$line" ] && settings+=("$line")
done <<<"${PEERS_SETTINGS:-}"
RL_PRELOAD=ratelimit rl_cluster_start peers "${settings[@]}" >/dev/null
rl_psql -d postgres -c "CREATE DATABASE $DB" >/dev/null
# fixed_window, as the two peers count: a window's count against a limit.
rl_psql -d "$DB" -q -c "CREATE EXTENSION ratelimit" \
	-c "SELECT rl_zone_set('peers_table', 'fixed_window', 20, '1 hour'),
	           rl_zone_set('peers_durable', 'fixed_window', 20, '1 hour', durable => true),
	           rl_zone_set('peers_shmem', 'fixed_window', 20, '1 hour', store => 'shmem')" >/dev/null
export PGDATABASE=$DB

echo "# peers: every limiter admits exactly its limit under concurrency"
(cd "$HERE" && node peers.js check)
status=$?
[ "$status" -eq 0 ] || exit "$status"

if [ "${1:-}" = --bench ]; then
	out=$RL_ROOT/test/bench/out/peers$SUFFIX.txt
	plot=$RL_ROOT/test/bench/peers$SUFFIX.png
	dat=$RL_ROOT/test/bench/out/peers$SUFFIX.dat
	mkdir -p "$(dirname "$out")"
	# Limits out of reach: every call writes.
	rl_psql -d "$DB" -q -c "SELECT rl_zone_set('peers_table', rate => 1000000000),
	                               rl_zone_set('peers_durable', rate => 1000000000),
	                               rl_zone_set('peers_shmem', rate => 1000000000)" >/dev/null
	{
		echo "# PEERS_FSYNC=$FSYNC test/bench/peers/peers.sh --bench ${2:-1,4,16} ${3:-1} ${4:-5}, $(date -u '+%Y-%m-%d %H:%M UTC')"
		echo "# $("$RL_PG_BIN/postgres" --version), fsync $FSYNC, synchronous_commit on${PEERS_SETTINGS:+, $(tr '\n' ' ' <<<"$PEERS_SETTINGS")}, node $(node --version), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
	} >"$out"
	(cd "$HERE" && PEERS_PLOT_DAT=$dat PEERS_PLOT_NOTE="fsync $FSYNC${PEERS_SETTINGS:+, $(tr '\n' ' ' <<<"$PEERS_SETTINGS")}; $(nproc) cores shared by Node and PostgreSQL" node peers.js bench "${2:-1,4,16}" "${3:-1}" "${4:-5}") |
		tee -a "$out" | grep -v '^{'
	[ "${PIPESTATUS[0]}" -eq 0 ] || rl_die "the benchmark failed"
	echo "# load at the end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out"
	draw_plot "$dat" "$plot"
fi
