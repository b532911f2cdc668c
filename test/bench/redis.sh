#!/usr/bin/env bash
# Benchmark against Redis (the speed target: the shmem store's rl_token_bucket under
# pgbench -M prepared ≥ 0.85× SELECT 1 and ≥ a Redis + Lua token bucket at
# the same client count).
#
#   bash test/bench/redis.sh
#
# Measures in one run, on a throwaway PostgreSQL cluster (.cluster/redisbench)
# and a throwaway Redis server (.cluster/redisbench-redis), both on loopback:
#   - pgbench -M prepared, a random key among 10k per transaction: SELECT 1,
#     the PL/pgSQL and upsert buckets of test/bench/baselines.sql,
#     rl_token_bucket on the table store (table_access=direct) and on the
#     shmem store, rl_limit on a shmem zone of each algorithm that the shmem
#     store has (sliding_window needs the table store: reported, not run);
#   - redis-benchmark: the Lua token bucket of test/bench/redis_token_bucket.lua
#     by EVALSHA on a random key among 10k;
# every variant at every client count in each round, rounds interleaved, with
# the same limit everywhere (3,600,000 per hour: every call is admitted and
# writes; checked).  Writes test/bench/REDIS.md and test/bench/redis.png; raw
# data in test/bench/out/redis/ (git-ignored).
#
# Measures the installed extension as it is: builds nothing.
#
# Environment:
#   REDIS_BENCH_SECONDS  length of each run, seconds (default 5)
#   REDIS_BENCH_ROUNDS   interleaved rounds (default 3)
#   REDIS_BENCH_CLIENTS  client counts (default "1 2 4")
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../../scripts/lib.sh disable=SC1091
. "$HERE/../../scripts/lib.sh"
# shellcheck source=pgbench.sh
. "$HERE/pgbench.sh"

REDIS_BENCH_SECONDS=${REDIS_BENCH_SECONDS:-5}
REDIS_BENCH_ROUNDS=${REDIS_BENCH_ROUNDS:-3}
REDIS_BENCH_CLIENTS=${REDIS_BENCH_CLIENTS:-"1 2 4"}
[ $# -eq 0 ] || rl_die "usage: [REDIS_BENCH_SECONDS=5 ...] bash test/bench/redis.sh (no arguments)"
rl_require_positive_ints REDIS_BENCH_SECONDS REDIS_BENCH_ROUNDS REDIS_BENCH_CLIENTS
read -r -a CLIENTS <<<"$REDIS_BENCH_CLIENTS"

# The exact command, with the settings that change what it measures.
COMMAND=$(rl_command_with_env "bash test/bench/redis.sh" REDIS_BENCH_CLIENTS REDIS_BENCH_ROUNDS REDIS_BENCH_SECONDS)

KEYS=10000
# One limit for every variant: LIMIT per PERIOD seconds, capacity LIMIT
# (rl_token_bucket and the baselines take a rate per second and a window:
# LIMIT / PERIOD per second over PERIOD seconds is the same bucket).  Far
# above the calls made, so every call is admitted and writes.  The period
# is long because the Lua bucket's key expires a period after its last call
# (it would be full again by then): a shorter one would let Redis's keys
# expire while the PostgreSQL variants run, and its runs would create keys
# instead of updating them.
LIMIT=3600000
PERIOD=3600
RATE_PER_SEC=$(( LIMIT / PERIOD ))
SHMEM_ZONE_ALGOS=(token_bucket gcra fixed_window sliding_window_counter)
SHMEM_MAX_KEYS=500000
CLUSTER=redisbench
REDIS_DIR=$RL_ROOT/.cluster/redisbench-redis
LUA=$HERE/redis_token_bucket.lua
OUT=$HERE/out/redis      # git-ignored: pgbench scripts and output, redis-benchmark CSV
REPORT=$HERE/REDIS.md
PLOT=$HERE/redis.png
PGBENCH=$RL_PG_BIN/pgbench
REDIS_PORT=""

# PostgreSQL variants first, then Redis: the order of every round.
PG_VARIANTS=(select1 plpgsql upsert table shmem)
for a in "${SHMEM_ZONE_ALGOS[@]}"; do PG_VARIANTS+=("zone_$a"); done
VARIANTS=("${PG_VARIANTS[@]}" redis)

rcli() { redis-cli -h 127.0.0.1 -p "$REDIS_PORT" "$@"; }

redis_stop() {
	[ -n "$REDIS_PORT" ] || return 0
	rcli shutdown nosave >/dev/null 2>&1 || true
	# Still there (it did not answer): end the server this script started.
	local pid
	pid=$(cat "$REDIS_DIR/redis.pid" 2>/dev/null || true)
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then kill "$pid" 2>/dev/null || true; fi
	REDIS_PORT=""
}

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	redis_stop
	rl_cluster_stop
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

rl_install_packages
rl_install_packages redis-server redis-tools gnuplot-nox
for tool in "$PGBENCH" "$(command -v redis-server)" "$(command -v redis-benchmark)" "$(command -v gnuplot)"; do
	[ -x "$tool" ] || rl_die "not found: $tool"
done
PKGLIBDIR=$("$RL_PG_BIN/pg_config" --pkglibdir)
[ -f "$PKGLIBDIR/ratelimit.so" ] || rl_die "the extension is not installed ($PKGLIBDIR/ratelimit.so): run make install first"

START_SECONDS=$SECONDS
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
rm -rf "$OUT"
mkdir -p "$OUT"

# ------------------------------------------------------------- servers --

rl_cluster_start "$CLUSTER" "shared_preload_libraries = 'ratelimit'" \
	"shared_buffers = '256MB'" "ratelimit.shmem_max_keys = $SHMEM_MAX_KEYS"
psql_q() { rl_psql -d postgres "$@"; }
psql_at() { rl_psql -d postgres -At "$@"; }

# As the cluster user, like PostgreSQL: its data directory is in the repo.
rl_as_root rm -rf "$REDIS_DIR"
mkdir -p "$REDIS_DIR"
rl_as_root chown "$(rl_cluster_user)" "$REDIS_DIR"
for attempt in 1 2 3 4 5; do
	REDIS_PORT=$(rl_free_port)
	rl_as_cluster_user redis-server --bind 127.0.0.1 --port "$REDIS_PORT" \
		--save '' --appendonly no --dir "$REDIS_DIR" \
		--daemonize yes --pidfile "$REDIS_DIR/redis.pid" --logfile "$REDIS_DIR/redis.log"
	for _ in $(seq 1 50); do
		[ "$(rcli ping 2>/dev/null)" = PONG ] && break
		sleep 0.1
	done
	# Ours, not a server that took the port first: the trap shuts it down.
	if [ "$(rcli ping 2>/dev/null)" = PONG ]; then
		[ "$(rcli info server | tr -d '\r' | sed -n 's/^process_id://p')" = "$(cat "$REDIS_DIR/redis.pid")" ] \
			|| { REDIS_PORT=""; rl_die "another Redis server answers on the port this one was given"; }
		break
	fi
	# A free port can be taken by another server before this one binds it.
	if ! grep -q 'Address already in use' "$REDIS_DIR/redis.log" || [ "$attempt" -eq 5 ]; then
		cat "$REDIS_DIR/redis.log" >&2; REDIS_PORT=""; rl_die "redis-server did not start"
	fi
	rl_log "port $REDIS_PORT was taken; trying another"
done
rl_log "redis running on 127.0.0.1:$REDIS_PORT (data in $REDIS_DIR, no persistence)"

# --------------------------------------------------------------- setup --

rl_log "setting up the extension, the baselines and the zones"
psql_q -c "CREATE EXTENSION ratelimit"
psql_q -f "$HERE/baselines.sql"
psql_q >/dev/null <<SQL
$(for a in "${SHMEM_ZONE_ALGOS[@]}"; do
	echo "SELECT rl_zone_set('bench_shmem_$a', '$a', $LIMIT, interval '$PERIOD seconds', store => 'shmem');"
done)
CREATE TABLE bench.runs (
    round    int NOT NULL,
    clients  int NOT NULL,
    variant  text NOT NULL,
    tps      float8 NOT NULL,   -- pgbench: without initial connection time
    xacts    bigint NOT NULL,   -- transactions (pgbench) or requests (redis-benchmark)
    p50_us   float8 NOT NULL,   -- latency seen by the client
    p99_us   float8 NOT NULL
);
CREATE TABLE bench.counters_before AS SELECT * FROM rl_counters WITH NO DATA;
SQL

# Said in the report rather than left out silently: the exact sliding
# window's state grows with its limit, so the shmem store refuses it.
if SW_ERROR=$(psql_q -c "SELECT rl_zone_set('bench_shmem_sliding_window', 'sliding_window', $LIMIT, interval '$PERIOD seconds', store => 'shmem')" 2>&1); then
	rl_die "the shmem store accepted a sliding_window zone: measure it here"
fi
SW_ERROR=$(sed -n 's/^.*ERROR: *//p' <<<"$SW_ERROR" | head -1)
[ -n "$SW_ERROR" ] || rl_die "could not read the error of a shmem sliding_window zone"
rl_log "rl_limit on sliding_window is not measured: $SW_ERROR"

SHA=$(rcli -x SCRIPT LOAD <"$LUA")
[[ $SHA =~ ^[0-9a-f]{40}$ ]] || rl_die "SCRIPT LOAD failed: $SHA"

# The Lua bucket must follow the rule rl_token_bucket follows (the token bucket's rule,
# the check run.sh makes of its baselines, slower: each redis-cli call adds
# its start-up to the times): 5 tokens per 10 s, capacity 5; six calls at
# one instant return 4, 3, 2, 1, 0, -1; calls 0.2, 0.4, 0.6 and 0.8 s later
# are refused (fractions are kept, and a refusal takes nothing); one 2.2 s
# after the first is admitted.
rl_log "checking that the Lua bucket implements the token bucket's rule"
lua_call() { echo "EVALSHA $SHA 1 sanity 5 10 1"; }
got=$(
	for _ in 1 2 3 4 5 6; do lua_call; done | rcli | paste -sd,
	for _ in 1 2 3 4; do sleep 0.2; lua_call | rcli; done
	sleep 1.4; lua_call | rcli
)
got=$(paste -sd' ' <<<"$got")
want="4,3,2,1,0,-1 -1 -1 -1 -1 0"
[ "$got" = "$want" ] || rl_die "Lua bucket: token bucket check: expected '$want', got '$got'"
# ... and its refusal counter counts refusals.
[ "$(rcli get bench:refused)" = 5 ] || rl_die "Lua bucket: the refusal counter did not count 5 refusals"
rcli del sanity bench:refused >/dev/null
rcli config resetstat >/dev/null

# -------------------------------------------------------------- pre-warm --

# Every measured key exists before it is measured, on every store: the runs
# measure updates of existing state, not inserts.
rl_log "pre-warming $KEYS keys on every store"
got=$(psql_at <<SQL | paste -sd' '
SET ratelimit.table_access = direct;
SELECT count(*) FILTER (WHERE rl_token_bucket('k' || i, $RATE_PER_SEC, $PERIOD, 1) >= 0) FROM generate_series(1, $KEYS) i;
SET ratelimit.default_store = shmem;
SELECT count(*) FILTER (WHERE rl_token_bucket('k' || i, $RATE_PER_SEC, $PERIOD, 1) >= 0) FROM generate_series(1, $KEYS) i;
RESET ratelimit.default_store;
SELECT count(*) FILTER (WHERE bench.plpgsql_bucket('k' || i, $RATE_PER_SEC, $PERIOD, 1) >= 0) FROM generate_series(1, $KEYS) i;
SELECT count(*) FILTER (WHERE bench.upsert_bucket('k' || i, $RATE_PER_SEC, $PERIOD, 1) >= 0) FROM generate_series(1, $KEYS) i;
$(for a in "${SHMEM_ZONE_ALGOS[@]}"; do
	echo "SELECT count(*) FILTER (WHERE r.allowed) FROM generate_series(1, $KEYS) i, rl_limit('bench_shmem_$a', 'k' || i) r;"
done)
VACUUM ANALYZE ratelimit.state, bench.plpgsql_bucket, bench.upsert_bucket;
SQL
)
want=$(for _ in $(seq 1 $(( 4 + ${#SHMEM_ZONE_ALGOS[@]} ))); do echo "$KEYS"; done | paste -sd' ')
[ "$got" = "$want" ] || rl_die "pre-warm: expected every call admitted ($want), got $got"

# redis-benchmark's -r writes __rand_int__ as 12 digits, 0 .. KEYS-1.
got=$(for ((i = 0; i < KEYS; i++)); do printf 'EVALSHA %s 1 k:%012d %s %s 1\n' "$SHA" "$i" "$LIMIT" "$PERIOD"; done \
	| rcli | grep -c '^[0-9][0-9]*$' || true)
[ "$got" = "$KEYS" ] || rl_die "pre-warm: $got of $KEYS Lua calls admitted"
[ "$(rcli dbsize)" = "$KEYS" ] || rl_die "pre-warm: Redis holds $(rcli dbsize) keys, expected $KEYS"
REDIS_CALLS=$KEYS   # EVALSHA calls since the statistics were reset

psql_q -c "INSERT INTO bench.counters_before SELECT * FROM rl_counters"

# ---------------------------------------------------------------- runs --

pgb_script() {
	case $1 in
		# The \set that the other scripts have is not for the key: pgbench
		# reuses one clock reading through a transaction that runs no
		# meta-command, so a reply already there when pgbench first looks
		# (often, with clients and servers sharing the cores) is logged with
		# latency 0.  A meta-command makes it read the clock again.
		select1) printf '\\set k random(1, %d)\nSELECT 1;\n' "$KEYS" ;;
		plpgsql) printf '\\set k random(1, %d)\nSELECT bench.plpgsql_bucket('"'k'"' || :k, %s, %s, 1);\n' "$KEYS" "$RATE_PER_SEC" "$PERIOD" ;;
		# As run.sh sends it: the statement itself, not the SQL function.
		upsert) pgb_upsert_script "$KEYS" "$RATE_PER_SEC" "$PERIOD" ;;
		table|shmem) printf '\\set k random(1, %d)\nSELECT rl_token_bucket('"'k'"' || :k, %s, %s, 1);\n' "$KEYS" "$RATE_PER_SEC" "$PERIOD" ;;
		zone_*) printf '\\set k random(1, %d)\nSELECT allowed FROM rl_limit('"'bench_shmem_%s'"', '"'k'"' || :k);\n' "$KEYS" "${1#zone_}" ;;
	esac
}
pgb_options() {
	case $1 in
		table) echo "-c ratelimit.table_access=direct" ;;
		shmem) echo "-c ratelimit.default_store=shmem" ;;
		*) echo "" ;;
	esac
}
for v in "${PG_VARIANTS[@]}"; do pgb_script "$v" >"$OUT/$v.pgb"; done

# The options reached the server.
got=$(PGOPTIONS="$(pgb_options table)" psql_at -c "SHOW ratelimit.table_access")
[ "$got" = direct ] || rl_die "PGOPTIONS did not select table_access=direct (got $got)"
got=$(PGOPTIONS="$(pgb_options shmem)" psql_at -c "SHOW ratelimit.default_store")
[ "$got" = shmem ] || rl_die "PGOPTIONS did not select default_store=shmem (got $got)"

# pctl P FILE: the P-th percentile (nearest rank) of FILE's sorted numbers.
pctl() {
	local n rank
	n=$(wc -l <"$2")
	rank=$(( (n * $1 + 99) / 100 ))
	[ "$rank" -ge 1 ] || rank=1
	sed -n "${rank}p" "$2"
}

# pgb_run VARIANT CLIENTS ROUND: one pgbench run; prints "tps xacts p50 p99"
# (µs, from the per-transaction log: its third column is the latency).
pgb_run() {
	local v=$1 c=$2 name="$1-$2-$3" result tps xacts n
	local prefix=$OUT/tx-$name
	result=$(pgb_checked "$v" "$c" "$OUT/pgbench-$name.log" "$(pgb_options "$v")" \
		-T "$REDIS_BENCH_SECONDS" -l --log-prefix="$prefix" -f "$OUT/$v.pgb") || exit 1
	read -r tps xacts <<<"$result"
	# The logs are large (a line per transaction): kept sorted only until
	# their percentiles are read.
	cat "$prefix".* | awk '{ print $3 }' | sort -n >"$prefix.sorted"
	n=$(wc -l <"$prefix.sorted")
	[ "$n" -eq "$xacts" ] || rl_die "pgbench $v ($c clients): $n transactions logged, $xacts reported"
	echo "$tps $xacts $(pctl 50 "$prefix.sorted") $(pctl 99 "$prefix.sorted")"
	rm -f "$prefix".*
}

# redis_run CLIENTS REQUESTS NAME: one redis-benchmark run; prints
# "rps requests p50 p99" (µs; redis-benchmark reports ms to the µs).
redis_run() {
	local c=$1 n=$2 csv=$OUT/redis-$3.csv line
	redis-benchmark -h 127.0.0.1 -p "$REDIS_PORT" -c "$c" -n "$n" -r "$KEYS" --csv \
		EVALSHA "$SHA" 1 'k:__rand_int__' "$LIMIT" "$PERIOD" 1 >"$csv" 2>"$csv.err" \
		|| { cat "$csv" "$csv.err" >&2; rl_die "redis-benchmark ($c clients) failed"; }
	[ ! -s "$csv.err" ] || { cat "$csv.err" >&2; rl_die "redis-benchmark ($c clients) reported errors"; }
	# "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
	line=$(sed -n '2p' "$csv" | tr -d '"')
	awk -F, -v n="$n" 'NF == 8 && $2 > 0 { printf "%s %d %.0f %.0f\n", $2, n, $5 * 1000, $7 * 1000; ok = 1 }
		END { exit !ok }' <<<"$line" || { cat "$csv" >&2; rl_die "could not read redis-benchmark's CSV ($c clients)"; }
}

# redis-benchmark runs a number of requests, not a time: each run asks for
# the requests the last run at that client count made in REDIS_BENCH_SECONDS
# (the first from a short run here, which the statistics count too).
declare -A REDIS_RPS
for c in "${CLIENTS[@]}"; do
	result=$(redis_run "$c" 20000 "calibrate-$c")
	read -r rps n _ <<<"$result"
	REDIS_RPS[$c]=$rps
	REDIS_CALLS=$(( REDIS_CALLS + n ))
done

# Interleaved (round 1 of every variant at every client count, then round 2
# ...), so that a slow spell of the machine does not fall on one variant.
for round in $(seq 1 "$REDIS_BENCH_ROUNDS"); do
	rl_log "round $round/$REDIS_BENCH_ROUNDS: ${#VARIANTS[@]} variants x ${#CLIENTS[@]} client counts, ${REDIS_BENCH_SECONDS}s each"
	for c in "${CLIENTS[@]}"; do
		for v in "${VARIANTS[@]}"; do
			if [ "$v" = redis ]; then
				n=$(awk -v r="${REDIS_RPS[$c]}" -v s="$REDIS_BENCH_SECONDS" 'BEGIN { n = int(r * s); print (n < 1000 ? 1000 : n) }')
				result=$(redis_run "$c" "$n" "$c-$round")
				read -r tps xacts _ <<<"$result"
				REDIS_RPS[$c]=$tps
				REDIS_CALLS=$(( REDIS_CALLS + xacts ))
			else
				psql_q -c "VACUUM ratelimit.state, bench.plpgsql_bucket, bench.upsert_bucket"
				result=$(pgb_run "$v" "$c" "$round")
			fi
			read -r tps xacts p50 p99 <<<"$result"
			printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$c" "$v" "$tps" "$xacts" "$p50" "$p99" >>"$OUT/runs.tsv"
			psql_q -c "INSERT INTO bench.runs VALUES ($round, $c, '$v', $tps, $xacts, $p50, $p99)"
		done
	done
done

# --------------------------------------------------------------- checks --

rl_log "checking that every call was admitted"
# rl_counters: every pgbench transaction of the zones and of rl_token_bucket
# (both stores count as '(rl_token_bucket)') was counted as allowed, none
# refused; the shmem store evicted no key and never ran out of room.
bad=$(psql_at -F ' ' <<'SQL'
WITH expected(zone, calls) AS (
    SELECT CASE WHEN variant IN ('table', 'shmem') THEN '(rl_token_bucket)'
                ELSE 'bench_shmem_' || substr(variant, 6) END,
           sum(xacts)
      FROM bench.runs WHERE variant IN ('table', 'shmem') OR variant LIKE 'zone\_%'
     GROUP BY 1)
SELECT e.zone, e.calls, c.allowed - coalesce(b.allowed, 0), c.refused - coalesce(b.refused, 0),
       c.evicted - coalesce(b.evicted, 0), c.full - coalesce(b.full, 0)
  FROM expected e
  LEFT JOIN rl_counters c USING (zone)
  LEFT JOIN bench.counters_before b USING (zone)
 WHERE c.zone IS NULL OR c.allowed - coalesce(b.allowed, 0) <> e.calls
    OR c.refused > coalesce(b.refused, 0) OR c.evicted > coalesce(b.evicted, 0)
    OR c.full > coalesce(b.full, 0);
SQL
)
[ -z "$bad" ] || rl_die "rl_counters (zone, transactions, allowed, refused, evicted, full): $bad"
# The hand-written buckets count nothing: none of their buckets came near
# empty (capacity LIMIT), and they hold the pre-warmed keys and no other.
got=$(psql_at -F ' ' <<SQL
SELECT count(*), min(tokens) >= 1 FROM bench.plpgsql_bucket;
SELECT count(*), min(tokens) >= 1 FROM bench.upsert_bucket;
SQL
)
[ "$(paste -sd' ' <<<"$got")" = "$KEYS t $KEYS t" ] || rl_die "baseline buckets (keys, none empty): $got"
# Redis: every EVALSHA ran without error, none was refused (the script
# counts refusals in bench:refused), and the runs used the pre-warmed keys.
stats=$(rcli info commandstats | tr -d '\r' | sed -n 's/^cmdstat_evalsha://p')
[ "$stats" != "${stats#calls="$REDIS_CALLS",}" ] || rl_die "Redis ran EVALSHA other than $REDIS_CALLS times: $stats"
[[ $stats == *",rejected_calls=0,failed_calls=0" ]] || rl_die "Redis: failed EVALSHA calls: $stats"
[ -z "$(rcli info errorstats | tr -d '\r' | grep '^errorstat_' || true)" ] || rl_die "Redis: errors: $(rcli info errorstats)"
[ -z "$(rcli get bench:refused)" ] || rl_die "Redis: $(rcli get bench:refused) calls refused"
[ "$(rcli dbsize)" = "$KEYS" ] || rl_die "Redis holds $(rcli dbsize) keys after the runs, expected $KEYS"
# What the script costs inside Redis, the time the clients do not see.
REDIS_USEC=$(sed -n 's/.*,usec_per_call=\([0-9.]*\),.*/\1/p' <<<"$stats")
[ -n "$REDIS_USEC" ] || rl_die "could not read usec_per_call from Redis: $stats"

# --------------------------------------------------------------- report --

rl_log "writing $REPORT and $PLOT"
PG_VERSION=$(psql_at -c "SHOW server_version")
RL_VERSION=$(psql_at -c "SELECT extversion FROM pg_extension WHERE extname = 'ratelimit'")
# Which build was measured: the installed one, maybe not the tree's.
BUILD_NOTE="tree at $(git -C "$RL_ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')"
if [ -f "$RL_ROOT/ratelimit.so" ] && ! cmp -s "$RL_ROOT/ratelimit.so" "$PKGLIBDIR/ratelimit.so"; then
	BUILD_NOTE+=", whose build (ratelimit.so) differs from the installed one"
fi
REDIS_VERSION=$(redis-server --version | sed -n 's/.* v=\([^ ]*\).*/\1/p')

psql_q -f - <<SQL
CREATE TABLE bench.variants (variant text PRIMARY KEY, ord int NOT NULL, label text NOT NULL, plot text NOT NULL);
INSERT INTO bench.variants VALUES
    ('select1', 1, '\`SELECT 1\`', 'SELECT 1'),
    ('plpgsql', 2, 'PL/pgSQL bucket', 'PL/pgSQL bucket'),
    ('upsert', 3, 'upsert bucket', 'upsert bucket'),
    ('table', 4, '\`rl_token_bucket\`, table store', 'rl_token_bucket, table'),
    ('shmem', 5, '**\`rl_token_bucket\`, shmem store**', 'rl_token_bucket, shmem'),
$(i=6; for a in "${SHMEM_ZONE_ALGOS[@]}"; do
	echo "    ('zone_$a', $i, '\`rl_limit\`, shmem $a', 'rl_limit, shmem $a'),"
	i=$((i + 1))
done)
    ('redis', 20, '**Redis + Lua bucket**', 'Redis + Lua bucket');
-- All rounds pooled: calls over the time spent; latencies: median of the
-- runs' percentiles.
CREATE VIEW bench.agg AS
SELECT variant, clients, sum(xacts) / sum(xacts / tps) AS tps, min(tps) AS tps_min, max(tps) AS tps_max,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY p50_us) AS p50_us,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY p99_us) AS p99_us
  FROM bench.runs GROUP BY variant, clients;
SQL

# The plot's data: a column of tps per variant, a row per client count.
psql_at -F ' ' >"$OUT/plot.dat" <<'SQL'
SELECT 'clients ' || string_agg(format('"%s"', plot), ' ' ORDER BY ord) FROM bench.variants;
SELECT a.clients, string_agg(round(a.tps)::text, ' ' ORDER BY v.ord)
  FROM bench.agg a JOIN bench.variants v USING (variant) GROUP BY a.clients ORDER BY a.clients;
SQL
# Line styles: the two lines the targets compare stand out; the baselines
# are thin; SELECT 1 is dashed, a ceiling rather than a rate limiter.
declare -A STYLE=(
	[select1]="lc rgb '#555555' dt 2 lw 1.5 pt 1"
	[plpgsql]="lc rgb '#8c564b' lw 1.2 pt 4"
	[upsert]="lc rgb '#e377c2' lw 1.2 pt 6"
	[table]="lc rgb '#ff7f0e' lw 1.5 pt 8"
	[shmem]="lc rgb '#1f77b4' lw 3.5 pt 7"
	[zone_token_bucket]="lc rgb '#17becf' dt 3 lw 1.5 pt 2"
	[zone_gcra]="lc rgb '#2ca02c' dt 3 lw 1.5 pt 3"
	[zone_fixed_window]="lc rgb '#bcbd22' dt 3 lw 1.5 pt 10"
	[zone_sliding_window_counter]="lc rgb '#9467bd' dt 3 lw 1.5 pt 12"
	[redis]="lc rgb '#d62728' lw 3.5 pt 5"
)
# plot.dat's columns follow bench.variants.ord, which follows VARIANTS.
PLOT_CMD="plot"
col=2
for v in "${VARIANTS[@]}"; do
	PLOT_CMD+=" '$OUT/plot.dat' using 1:$col with linespoints ${STYLE[$v]} title columnheader($col),"
	col=$((col + 1))
done
PLOT_CMD=${PLOT_CMD%,}
read -r CMIN CMAX <<<"$(printf '%s\n' "${CLIENTS[@]}" | sort -n | sed -n '1p;$p' | paste -sd' ')"
CMAX=${CMAX:-$CMIN}
XTICS=$(printf '%s,' "${CLIENTS[@]}"); XTICS=${XTICS%,}
gnuplot <<GNUPLOT
set terminal pngcairo size 1000,700 font "sans,10" noenhanced
set output '$PLOT'
set title "Calls per second by client count: pgbench -M prepared and redis-benchmark, 10k keys,\nevery call admitted and written; $(nproc) cores shared by clients and servers"
set xlabel "clients"
set ylabel "calls per second (log scale)"
set logscale x 2
set logscale y
set autoscale yfix
set ytics (1000, 1500, 2000, 3000, 5000, 7000, 10000, 15000, 20000, 30000, 50000, 70000, 100000, 150000, 200000, 300000, 500000)
set format y "%.0f"
set offsets 0, 0, graph 0.08, graph 0.08
set xtics ($XTICS)
set xrange [$CMIN * 0.9:$CMAX * 1.1]
set grid
set key below maxrows 4 width 2 height 1
$PLOT_CMD
GNUPLOT
[ -s "$PLOT" ] || rl_die "gnuplot wrote no $PLOT"

WALL=$(( SECONDS - START_SECONDS ))
psql_at >"$OUT/report.md" <<'SQL'
\echo '| variant | clients | tps | min–max tps | p50 ms | p99 ms | × `SELECT 1` | × Redis script |'
\echo '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |'
SELECT format('| %s | %s | %s | %s–%s | %s | %s | %s | %s |', v.label, a.clients,
              round(a.tps), round(a.tps_min), round(a.tps_max),
              to_char(a.p50_us / 1000, 'FM990.000'), to_char(a.p99_us / 1000, 'FM990.000'),
              to_char(a.tps / s.tps, 'FM990.00'), to_char(a.tps / r.tps, 'FM990.00'))
  FROM bench.agg a JOIN bench.variants v USING (variant)
  JOIN bench.agg s ON s.clients = a.clients AND s.variant = 'select1'
  JOIN bench.agg r ON r.clients = a.clients AND r.variant = 'redis'
 ORDER BY a.clients, v.ord;
\echo ''
\echo '| Target (shmem `rl_token_bucket`, pgbench `-M prepared`) | clients | this run | result |'
\echo '| --- | ---: | ---: | --- |'
SELECT format('| %s | %s | %s× (%s vs %s tps) | %s |', t.what, m.clients, to_char(m.tps / o.tps, 'FM990.00'),
              round(m.tps), round(o.tps), CASE WHEN m.tps >= t.factor * o.tps THEN 'met' ELSE '**missed**' END)
  FROM (VALUES (1, '≥ a Redis + Lua token bucket', 'redis', 1.0),
               (2, '≥ 0.85× `SELECT 1`', 'select1', 0.85)) t(n, what, other, factor)
  JOIN bench.agg m ON m.variant = 'shmem'
  JOIN bench.agg o ON o.variant = t.other AND o.clients = m.clients
 ORDER BY t.n, m.clients;
SQL

{
	echo "# ratelimit against Redis"
	echo
	echo "Written by \`$COMMAND\` (run time $(( WALL / 60 )) min $(( WALL % 60 )) s) on $(date -u '+%Y-%m-%d')."
	echo "PostgreSQL $PG_VERSION with ratelimit $RL_VERSION as installed ($BUILD_NOTE), Redis $REDIS_VERSION;" \
	     "$(nproc) cores (\`nproc\`), load average $LOAD_START at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end."
	echo
	echo "How it was measured: a throwaway PostgreSQL cluster (\`.cluster/$CLUSTER\`, server defaults except" \
	     "shared_buffers = 256MB, shared_preload_libraries = 'ratelimit', ratelimit.shmem_max_keys = $SHMEM_MAX_KEYS)" \
	     "and a throwaway Redis server (\`--save '' --appendonly no\`), both on loopback TCP, the same limit everywhere" \
	     "($LIMIT per $PERIOD s, capacity $LIMIT: every call is admitted and writes) over $KEYS keys, each created before the" \
	     "runs on every store. PostgreSQL: \`pgbench -n -M prepared -c N -j N -T $REDIS_BENCH_SECONDS -l\`, scripts of" \
	     "\`\\set k random(1, $KEYS)\` and one statement: \`SELECT 1\` (the \`\\set\` too, for the latencies: in a script" \
	     "without a meta-command pgbench logs 0 µs for a reply that is there when it first looks); the PL/pgSQL and upsert" \
	     "buckets of [\`baselines.sql\`](baselines.sql) (the upsert statement itself, as run.sh sends it);" \
	     "\`rl_token_bucket('k' || :k, $RATE_PER_SEC, $PERIOD, 1)\` on the table store (\`PGOPTIONS='-c ratelimit.table_access=direct'\`)" \
	     "and on the shmem store (\`PGOPTIONS='-c ratelimit.default_store=shmem'\`); \`SELECT allowed FROM" \
	     "rl_limit('bench_shmem_<algorithm>', 'k' || :k)\` on \`rl_zone_set('bench_shmem_<algorithm>', '<algorithm>', $LIMIT," \
	     "'$PERIOD seconds', store => 'shmem')\`. Redis: the Lua bucket [\`redis_token_bucket.lua\`](redis_token_bucket.lua)" \
	     "(TIME, HMGET, HSET, PEXPIRE; it passes run.sh's token bucket check), by SCRIPT LOAD and" \
	     "\`redis-benchmark -c N -r $KEYS --csv EVALSHA <sha> 1 k:__rand_int__ $LIMIT $PERIOD 1\`, asking for the requests" \
	     "the last run at N clients made in $REDIS_BENCH_SECONDS s (it has no time limit). $REDIS_BENCH_ROUNDS rounds, interleaved" \
	     "(round 1 of every variant at every client count, then round 2 …), each run $REDIS_BENCH_SECONDS s; tps: all calls" \
	     "of the rounds over their time (pgbench's, without connecting), min–max over the rounds; p50, p99: client-side" \
	     "latency (pgbench's per-transaction log, redis-benchmark's CSV), median over the rounds. Checked: \`rl_counters\`" \
	     "counted every transaction of \`rl_token_bucket\` and of the zones as allowed, none refused, no shmem key evicted;" \
	     "no baseline bucket fell below one token; Redis ran every EVALSHA without error, the script counted no refusal," \
	     "and Redis held the $KEYS keys and no other. The clients (pgbench with a thread per client, redis-benchmark with" \
	     "one) run on the same $(nproc) cores as the servers, and Redis answers on one thread where PostgreSQL runs a" \
	     "backend per client."
	echo
	echo "\`rl_limit\` on \`sliding_window\` is not measured: the exact sliding window needs the table store" \
	     "(\`rl_zone_set(…, 'sliding_window', …, store => 'shmem')\` fails: \"$SW_ERROR\")."
	echo
	echo "Redis's own time per EVALSHA of the script, over all calls of the run (\`INFO commandstats\`," \
	     "\`usec_per_call\`): $REDIS_USEC µs, on its one thread."
	echo
	echo "![calls per second by client count](redis.png)"
	echo
	cat "$OUT/report.md"
} >"$REPORT.tmp"
mv "$REPORT.tmp" "$REPORT"
cat "$REPORT"
rl_log "done in ${WALL}s"
