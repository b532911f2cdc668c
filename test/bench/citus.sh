#!/usr/bin/env bash
# ratelimit on Citus against what Citus itself costs: a coordinator and two
# workers (clusters citusbc, citusbw1, citusbw2; test/citus/lib.sh) and a
# plain PostgreSQL (citusbplain), all from RL_PG_BIN's PostgreSQL with Citus
# installed by hand (test/citus/README.md), fsync and synchronous_commit
# off.
#
#   RL_PG_BIN=/path/to/pg-with-citus/bin bash test/bench/citus.sh
#
# Setup: CREATE EXTENSION ratelimit on the coordinator, then rl_citus_setup()
# where the extension has it, else the manual recipe (create_distributed_table,
# create_reference_table with citus.enable_unsafe_triggers,
# create_distributed_function); zone 'bench' a token_bucket of 1e9 a second
# (never refuses), its 10,000 keys 'k1' .. 'k10000' made before measuring, on
# the Citus cluster and on the plain node alike.
#
# pgbench -M prepared -n, CITUS_BENCH_SECONDS (10) a run, clients 1, 2, 4,
# random key of 10,000; per round and client count the four variants one
# after the other (A B C D, A B C D, ...; CITUS_BENCH_ROUNDS rounds, 3):
#   ours     SELECT rl_limit('bench', 'k' || :k) through the coordinator
#   update   UPDATE bench_counter SET n = n + 1 WHERE k = 'k' || :k through
#            the coordinator: a router UPDATE of a distributed UNLOGGED table
#            (k text primary key, n bigint) of 10,000 rows
#   select1  SELECT 1 through the coordinator
#   plain    ours on the plain node
# and the call forms Citus does not delegate itself (the coordinator
# forwards them to the key's worker, src/api/forward.c), on zone 'benchcf'
# (the same bucket, its own 10,000 keys, made first):
#   expr     SELECT rl_limit('benchcf', 'k' || (1 + floor(random() * 10000))::int):
#            the key an expression the statement computes
#   field    SELECT (rl_limit('benchcf', 'k' || :k)).allowed
#   from     SELECT allowed FROM rl_limit('bench', 'k' || :k): the same answer,
#            the function in FROM, which Citus delegates (zone 'bench')
#   multi    SELECT rl_limit('benchcf', 'k' || :k), rl_limit('benchcf', 'k' || :k2):
#            two calls in one statement (two decisions a transaction)
#   block    BEGIN; SELECT rl_limit('benchcf', 'k' || :k); COMMIT;  (Citus
#            delegates it: rl_citus_setup() sets force_delegation)
#   update_block  BEGIN; the router UPDATE; COMMIT;  (what block is held to)
# The tables give each variant's median tps over the rounds, and each call
# form's decisions per second against the router UPDATE's (block: against
# update_block).  Then, once:
# the time of one call connected straight to worker 1, on the keys whose
# shard is there (SELECT count(rl_limit('bench', k)) FROM those keys,
# median of 3 runs), beside the same statement on the plain node.
# Every call must be admitted and every call decided on a worker (the
# zones' counters on each node: the coordinator decides none, the calls that
# made the keys included, which Citus does not delegate and the coordinator
# forwards), else the script dies.
set -uo pipefail
source "$(dirname "$0")/../../scripts/lib.sh"
source "$(dirname "$0")/pgbench.sh"
source "$(dirname "$0")/../citus/lib.sh"

SECONDS_EACH=${CITUS_BENCH_SECONDS:-10}
ROUNDS=${CITUS_BENCH_ROUNDS:-3}
CLIENTS=${CITUS_BENCH_CLIENTS:-1 2 4}
KEYS=${CITUS_BENCH_KEYS:-10000}
rl_require_positive_ints SECONDS_EACH ROUNDS CLIENTS KEYS

if ! citus_installed; then
	echo "# SKIP citus benchmark: Citus is not installed in $(citus_pkglibdir) (build it by hand: see test/citus/README.md)"
	exit 0
fi

OUT=$(mktemp -d)
trap 'rl_clusters_stop citusbc citusbw1 citusbw2 citusbplain; rm -rf "$OUT"' EXIT
CONF=("fsync = off" "synchronous_commit = off" "full_page_writes = off" "max_prepared_transactions = 100")

# The plain node first: rl_cluster_start exports PGPORT.
RL_PRELOAD='ratelimit' rl_cluster_start citusbplain "${CONF[@]}" 2>/dev/null
P_PORT=$PGPORT
citus_start citusb "${CONF[@]}"

echo "# $(date -u '+%Y-%m-%d %H:%M UTC'); $(nproc) cores; PostgreSQL $(on "$C_PORT" 'SHOW server_version'), Citus $(on "$C_PORT" "SELECT extversion FROM pg_extension WHERE extname = 'citus'")"
echo "# ratelimit: work tree $(git -C "$RL_ROOT" describe --always --dirty 2>/dev/null); installed ratelimit.so $(md5sum "$(citus_pkglibdir)/ratelimit.so" | cut -c1-12) in $(citus_pkglibdir)"
on "$C_PORT" 'SET client_min_messages = warning' 'CREATE EXTENSION ratelimit' >/dev/null || rl_die "CREATE EXTENSION ratelimit failed"
echo "# setup: $(citus_setup_any)"
on "$C_PORT" 'SET client_min_messages = warning' "$CITUS_HELPERS_SQL" >/dev/null
on "$P_PORT" 'CREATE EXTENSION ratelimit' >/dev/null || rl_die "CREATE EXTENSION ratelimit failed on the plain node"
for port in "$C_PORT" "$P_PORT"; do
	out=$(on "$port" "SELECT rl_zone_set('bench', 'token_bucket', 1e9, '1 second')" \
		"SELECT count(*) FILTER (WHERE (rl_limit('bench', 'k' || g)).allowed) FROM generate_series(1, $KEYS) g")
	[ "$(tail -1 <<<"$out")" = "$KEYS" ] || rl_die "making the keys failed on :$port: $out"
done
out=$(on "$C_PORT" "SELECT rl_zone_set('benchcf', 'token_bucket', 1e9, '1 second')" \
	"SELECT count(*) FILTER (WHERE (rl_limit('benchcf', 'k' || g)).allowed) FROM generate_series(1, $KEYS) g")
[ "$(tail -1 <<<"$out")" = "$KEYS" ] || rl_die "making the call forms' keys failed: $out"
out=$(on "$C_PORT" 'SET client_min_messages = warning' \
	'CREATE UNLOGGED TABLE bench_counter (k text PRIMARY KEY, n bigint NOT NULL)' \
	"SELECT create_distributed_table('bench_counter', 'k', colocate_with := 'none')" \
	"INSERT INTO bench_counter SELECT 'k' || g, 0 FROM generate_series(1, $KEYS) g" \
	'SELECT count(*) FROM bench_counter')
[ "$(tail -1 <<<"$out")" = "$KEYS" ] || rl_die "bench_counter: $out"
echo "# tables: $(on "$C_PORT" "SELECT string_agg(logicalrelid::regclass::text || ' ' || partmethod::text || '/' || repmodel::text, ', ' ORDER BY 1) FROM pg_dist_partition")"
on "$C_PORT" 'VACUUM ANALYZE bench_counter' >/dev/null

printf '\\set k random(1, %d)\nSELECT rl_limit('"'bench'"', '"'k'"' || :k);\n' "$KEYS" >"$OUT/ours.pgbench"
printf '\\set k random(1, %d)\nUPDATE bench_counter SET n = n + 1 WHERE k = '"'k'"' || :k;\n' "$KEYS" >"$OUT/update.pgbench"
printf 'SELECT 1;\n' >"$OUT/select1.pgbench"
printf 'SELECT rl_limit('"'benchcf'"', '"'k'"' || (1 + floor(random() * %d))::int);\n' "$KEYS" >"$OUT/expr.pgbench"
printf '\\set k random(1, %d)\nSELECT (rl_limit('"'benchcf'"', '"'k'"' || :k)).allowed;\n' "$KEYS" >"$OUT/field.pgbench"
printf '\\set k random(1, %d)\nSELECT allowed FROM rl_limit('"'bench'"', '"'k'"' || :k);\n' "$KEYS" >"$OUT/from.pgbench"
printf '\\set k random(1, %d)\n\\set k2 random(1, %d)\nSELECT rl_limit('"'benchcf'"', '"'k'"' || :k), rl_limit('"'benchcf'"', '"'k'"' || :k2);\n' "$KEYS" "$KEYS" >"$OUT/multi.pgbench"
printf '\\set k random(1, %d)\nBEGIN;\nSELECT rl_limit('"'benchcf'"', '"'k'"' || :k);\nCOMMIT;\n' "$KEYS" >"$OUT/block.pgbench"
printf '\\set k random(1, %d)\nBEGIN;\nUPDATE bench_counter SET n = n + 1 WHERE k = '"'k'"' || :k;\nCOMMIT;\n' "$KEYS" >"$OUT/update_block.pgbench"
VARIANTS=(ours update select1 plain expr field from multi block update_block)
port_of() { [ "$1" = plain ] && echo "$P_PORT" || echo "$C_PORT"; }
script_of() { [ "$1" = plain ] && echo "$OUT/ours.pgbench" || echo "$OUT/$1.pgbench"; }

# Warm-up: every variant a second at the most clients (connections cached,
# plans made).
max_clients=$(tr ' ' '\n' <<<"$CLIENTS" | sort -n | tail -1)
for v in "${VARIANTS[@]}"; do
	PGPORT=$(port_of "$v") pgb_checked "$v warm-up" "$max_clients" "$OUT/warmup.log" "" -T 2 -f "$(script_of "$v")" >/dev/null
done

echo "# pgbench -M prepared -n -T $SECONDS_EACH, $ROUNDS rounds (variants interleaved); tps per run:"
declare -A TPS
for round in $(seq 1 "$ROUNDS"); do
	for c in $CLIENTS; do
		line="round $round, $c clients:"
		for v in "${VARIANTS[@]}"; do
			r=$(PGPORT=$(port_of "$v") pgb_checked "$v" "$c" "$OUT/run.log" "" -T "$SECONDS_EACH" -f "$(script_of "$v")")
			TPS[$v,$c]+="${r%% *} "
			line+=" $v ${r%% *}"
		done
		echo "# $line"
	done
done

median() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

# allowed_refused ZONE PORT...: "allowed/refused" of ZONE's counters on each
# node, in order, one word a node.
allowed_refused() { zone_counters "coalesce(sum(allowed), 0) || '/' || coalesce(sum(refused), 0)" "$@"; }

# Every call admitted, none decided on the coordinator.
counts=$(allowed_refused bench "$C_PORT" "$W1_PORT" "$W2_PORT" "$P_PORT")
echo "# zone 'bench' allowed/refused on the coordinator, worker 1, worker 2, plain node: $counts"
grep -qE '(^| )[0-9]+/[1-9]' <<<"$counts" && rl_die "some call was refused"
[ "${counts%% *}" = 0/0 ] || rl_die "calls were decided on the coordinator (${counts%% *})"

# The call forms: every call admitted, none decided on the coordinator.
counts=$(allowed_refused benchcf "$C_PORT" "$W1_PORT" "$W2_PORT")
echo "# zone 'benchcf' (the call forms) allowed/refused on the coordinator, worker 1, worker 2: $counts"
grep -qE '(^| )[0-9]+/[1-9]' <<<"$counts" && rl_die "some call form's call was refused"
[ "${counts%% *}" = 0/0 ] || rl_die "call forms were decided on the coordinator (${counts%% *})"

echo
echo "| clients | ours tps | router UPDATE tps | ratio ours/UPDATE | SELECT 1 tps | plain node tps |"
echo "| ---: | ---: | ---: | ---: | ---: | ---: |"
for c in $CLIENTS; do
	o=$(median "${TPS[ours,$c]}") u=$(median "${TPS[update,$c]}")
	s=$(median "${TPS[select1,$c]}") p=$(median "${TPS[plain,$c]}")
	awk -v c="$c" -v o="$o" -v u="$u" -v s="$s" -v p="$p" \
		'BEGIN { printf "| %d | %.0f | %.0f | %.2f | %.0f | %.0f |\n", c, o, u, o / u, s, p }'
done

echo
echo "Every call form, decisions per second against a router UPDATE by key (a call in \`BEGIN … COMMIT\`: against the UPDATE in one):"
echo
echo "| clients | delegated \`SELECT rl_limit(…)\` | \`SELECT allowed FROM rl_limit(…)\` (delegated) | key an expression | \`(rl_limit(…)).allowed\` | two calls in a statement | in \`BEGIN … COMMIT\` | router UPDATE | UPDATE in \`BEGIN … COMMIT\` |"
echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for c in $CLIENTS; do
	u=$(median "${TPS[update,$c]}") ub=$(median "${TPS[update_block,$c]}")
	o=$(median "${TPS[ours,$c]}") e=$(median "${TPS[expr,$c]}") f=$(median "${TPS[field,$c]}")
	fr=$(median "${TPS[from,$c]}") m=$(median "${TPS[multi,$c]}") b=$(median "${TPS[block,$c]}")
	awk -v c="$c" -v u="$u" -v ub="$ub" -v o="$o" -v fr="$fr" -v e="$e" -v f="$f" -v m="$m" -v b="$b" \
		'BEGIN { printf "| %d | %.0f (%.2f×) | %.0f (%.2f×) | %.0f (%.2f×) | %.0f (%.2f×) | %.0f (%.2f×) | %.0f (%.2f×) | %.0f | %.0f |\n",
		         c, o, o / u, fr, fr / u, e, e / u, f, f / u, 2 * m, 2 * m / u, b, b / ub, u, ub }'
done

# One call's time straight on worker 1, on its own keys.
on "$W1_PORT" "SELECT rl_limit('bench', 'k1')" >/dev/null	# a first call on the worker: caches made
# per_call PORT PREFIX_SQL: the median of 3 timed runs of the count, µs a call.
per_call() {
	local port=$1 setup=$2 runs=() i ms n
	for i in 1 2 3; do
		out=$(PGPORT=$port "$RL_PG_BIN/psql" -X -q -tA -d postgres -c "$setup" -c '\timing on' \
			-c "SELECT count(rl_limit('bench', k)) FROM wk" 2>&1)
		n=$(grep -m1 -E '^[0-9]+$' <<<"$out")
		ms=$(sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' <<<"$out" | tail -1)
		[ -n "$n" ] && [ -n "$ms" ] || rl_die "timing on :$port failed: $out"
		runs+=("$(awk -v ms="$ms" -v n="$n" 'BEGIN { printf "%.2f", ms * 1000 / n }')")
	done
	echo "$(median "${runs[*]}") ($n calls a run)"
}
w1_keys="CREATE TEMP TABLE wk AS SELECT 'k' || g AS k FROM generate_series(1, $KEYS) g WHERE node_of('k' || g) = $W1_PORT"
echo
echo "Straight on worker 1, its own keys, \`SELECT count(rl_limit('bench', k)) FROM keys\`: $(per_call "$W1_PORT" "$w1_keys") µs a call"
echo "The same on the plain node, every key: $(per_call "$P_PORT" "CREATE TEMP TABLE wk AS SELECT 'k' || g AS k FROM generate_series(1, $KEYS) g") µs a call"
