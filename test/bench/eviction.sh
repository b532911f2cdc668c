#!/usr/bin/env bash
# The shmem store's keyed placement (SipHash under a per-server secret) and
# least-harm eviction (fair shares between zones, then the fewest missing
# tokens) against the commit before them: what a decision costs, before and
# after, and what a call that must evict costs next to one that finds its
# key.  One run; the variants interleaved repetition by repetition and round
# by round, which goes first alternating, so that the machine's noise hits
# each alike: compare the ratios of one run.
#
#   bash test/bench/eviction.sh
#
# Builds without assertions the commit EVICTION_BEFORE (git archive) and the
# work tree as it is (its files that git does not ignore, modified or new),
# each into a private copy of PostgreSQL (.pg-bench/before, .pg-bench/after;
# git-ignored): the system's PostgreSQL is left alone.  Three clusters, fsync
# off, shared_preload_libraries = 'ratelimit':
#   evict-before, evict-after  one per build: zone 'open_shmem', a token
#       bucket of 1e9 a second on the shmem store (never refuses), and
#       rl_token_bucket's shmem buckets (1e6 a second, window 1000 s), each
#       with the keys 'k1' .. 'k10000' made before measuring;
#   evict-full  the after build, ratelimit.shmem_max_keys = EVICTION_MAX_KEYS:
#       zone 'full', a token bucket of 1 a day, burst 1000, given 1.5 x that
#       many keys 'f1' .. of one call each: every key misses a token and none
#       recovers during the run, so the store is truly full (checked:
#       evicted > 0; the keys it holds are reported).  10,000 keys it holds
#       are picked from rl_keys and called once more (two tokens missing:
#       never the cheapest to forget).
#
# 1. In a statement (before and after): SELECT count(f) FROM
#    generate_series(1, 10000) i, f = rl_limit('open_shmem', 'k' || i) or
#    rl_token_bucket('k' || i, 1000000, 1000) (default_store = shmem), timed
#    inside the server (clock_timestamp() around EXECUTE, after one call in
#    the same session): µs a call, median of EVICTION_REPS repetitions after
#    an unrecorded one.
# 2. pgbench -M prepared -n, EVICTION_CLIENTS clients (-j = clients),
#    \set k random(1, 10000) and SELECT rl_limit('open_shmem', 'k' || :k),
#    EVICTION_SECONDS a run, EVICTION_ROUNDS rounds: median tps.
# 3. On the full store, in the repetitions of 1 (after build only: the build
#    before could not evict a key that has not recovered): hit, rl_limit
#    ('full', 'f' || i) over the 10,000 picked keys; evict, rl_limit('full',
#    'n<rep>_' || i) over the same i, keys never seen: each call must evict.
#    An evict session's call before the timed one is on a new key too: it
#    pays the search for a free way that a full store makes once a second,
#    whoever calls (milliseconds over 100,000 keys), and the timed calls
#    evict at once.
# Every measured call must be allowed; none may evict, except in "evict",
# where evicted must grow by one a call and full not at all (rl_counters,
# read around each timed statement); else the script dies.  Ratios: of the
# medians, and min-max of the ratios within a repetition or round.  Targets:
# after within 5 % of before; evict / hit <= 2.
#
# Prints a Markdown table; raw figures (and the table) go to
# test/bench/out/eviction.txt.
# Environment:
#   EVICTION_BEFORE    the commit before (default 0d4aac0)
#   EVICTION_REPS      in-statement repetitions (default 11)
#   EVICTION_ROUNDS    pgbench rounds (default 10)
#   EVICTION_SECONDS   seconds a pgbench run (default 3)
#   EVICTION_CLIENTS   pgbench client counts (default "1 2")
#   EVICTION_MAX_KEYS  the full store's shmem_max_keys (default 100000)
#   EVICTION_BUILD=0   reuse the copies a previous run built
set -uo pipefail
source "$(dirname "$0")/../../scripts/lib.sh"
source "$(dirname "$0")/pgbench.sh"
cd "$RL_ROOT" || exit 1

BEFORE=${EVICTION_BEFORE:-0d4aac0}
REPS=${EVICTION_REPS:-11}
ROUNDS=${EVICTION_ROUNDS:-10}
SECONDS_EACH=${EVICTION_SECONDS:-3}
CLIENTS=${EVICTION_CLIENTS:-1 2}
MAX_KEYS=${EVICTION_MAX_KEYS:-100000}
rl_require_positive_ints REPS ROUNDS SECONDS_EACH CLIENTS MAX_KEYS
BEFORE_SHA=$(git rev-parse --short "$BEFORE^{commit}") || rl_die "no commit $BEFORE"
OUT=test/bench/out
mkdir -p "$OUT"
RAW=$OUT/eviction.txt
PGB=$RL_ROOT/.pg-bench
VARIANTS=(before after)
CLUSTERS=(evict-before evict-after evict-full)
declare -A BIN PORT

dir=$(mktemp -d)
chmod 755 "$dir"
trap 'rl_clusters_stop "${CLUSTERS[@]}"; rm -rf "$dir"' EXIT

# The two builds, each in its own copy of PostgreSQL.
for v in "${VARIANTS[@]}"; do BIN[$v]=$PGB/$v/usr/lib/postgresql/$RL_PG_VERSION/bin; done
if [ "${EVICTION_BUILD:-1}" != 0 ]; then
	rl_install_packages "${RL_BUILD_PACKAGES[@]}"
	mkdir -p "$dir/before" "$dir/after"
	git archive "$BEFORE_SHA" | tar -x -C "$dir/before" || rl_die "git archive $BEFORE_SHA failed"
	git ls-files -z -c -o --exclude-standard | tar --null -T - --ignore-failed-read -cf - 2>/dev/null \
		| tar -x -C "$dir/after" || rl_die "copying the work tree failed"
	for v in "${VARIANTS[@]}"; do
		[ "$(rl_private_pg "$PGB/$v")" = "${BIN[$v]}" ] || rl_die "rl_private_pg $PGB/$v"
		rl_log "build '$v'"
		RL_ROOT=$dir/$v RL_PG_BIN=${BIN[$v]} RL_ASSERTS=0 MAKEFLAGS=-j$(nproc) rl_build_install
	done
fi
rl_allow_traverse "$PGB"
for v in "${VARIANTS[@]}"; do
	[ -f "$("${BIN[$v]}/pg_config" --pkglibdir)/ratelimit.so" ] || rl_die "no build in $PGB/$v (run without EVICTION_BUILD=0)"
done
so_md5() { md5sum "$("${BIN[$1]}/pg_config" --pkglibdir)/ratelimit.so" | cut -c1-12; }

RL_PRELOAD=ratelimit RL_PG_BIN=${BIN[before]} rl_cluster_start evict-before "fsync = off"
PORT[before]=$PGPORT
RL_PRELOAD=ratelimit RL_PG_BIN=${BIN[after]} rl_cluster_start evict-after "fsync = off"
PORT[after]=$PGPORT
RL_PRELOAD=ratelimit RL_PG_BIN=${BIN[after]} rl_cluster_start evict-full "fsync = off" \
	"ratelimit.shmem_max_keys = $MAX_KEYS"
PORT[full]=$PGPORT
on() { local c=$1; shift; PGPORT=${PORT[$c]} rl_psql -d postgres -tA "$@"; }

# measure(zone, query): µs a call of query (which returns its call count)
# and how zone's counters moved meanwhile.  Both builds' rl_counters have
# these four columns.
MEASURE_SQL=$(cat <<'SQL'
CREATE FUNCTION measure(zone_name text, query text, OUT us float8, OUT calls bigint,
                        OUT allowed bigint, OUT refused bigint, OUT evicted bigint, OUT "full" bigint)
LANGUAGE plpgsql AS $$
DECLARE
    b record;
    a record;
    started timestamptz;
BEGIN
    SELECT coalesce(sum(c.allowed), 0) AS allowed, coalesce(sum(c.refused), 0) AS refused,
           coalesce(sum(c.evicted), 0) AS evicted, coalesce(sum(c."full"), 0) AS "full"
      INTO b FROM rl_counters c WHERE c.zone = zone_name;
    started := clock_timestamp();
    EXECUTE query INTO calls;
    us := extract(epoch FROM clock_timestamp() - started) * 1e6 / calls;
    SELECT coalesce(sum(c.allowed), 0) AS allowed, coalesce(sum(c.refused), 0) AS refused,
           coalesce(sum(c.evicted), 0) AS evicted, coalesce(sum(c."full"), 0) AS "full"
      INTO a FROM rl_counters c WHERE c.zone = zone_name;
    allowed := a.allowed - b.allowed;
    refused := a.refused - b.refused;
    evicted := a.evicted - b.evicted;
    "full" := a."full" - b."full";
END $$
SQL
)
for v in "${VARIANTS[@]}"; do
	on "$v" -c "CREATE EXTENSION ratelimit" -c "$MEASURE_SQL" \
		-c "SELECT rl_zone_set('open_shmem', 'token_bucket', 1000000000, '1 second', store => 'shmem')" \
		-c "SET ratelimit.default_store = shmem" \
		-c "SELECT count(rl_limit('open_shmem', 'k' || i)) + count(rl_token_bucket('k' || i, 1000000, 1000))
		      FROM generate_series(1, 10000) i" >/dev/null || rl_die "setting up cluster '$v' failed"
done

FILL=$((MAX_KEYS * 3 / 2))
on full -c "CREATE EXTENSION ratelimit" -c "$MEASURE_SQL" \
	-c "SELECT rl_zone_set('full', 'token_bucket', 1, '1 day', burst => 1000, store => 'shmem')" \
	-c "SELECT count(rl_limit('full', 'f' || i)) FROM generate_series(1, $FILL) i" >/dev/null \
	|| rl_die "filling the full store failed"
read -r fill_evicted fill_full held < <(on full -F ' ' -c "SELECT evicted, \"full\", keys FROM rl_counters WHERE zone = 'full'")
[ "${fill_evicted:-0}" -gt 0 ] || rl_die "the fill evicted nothing: the store is not full"
on full -c "CREATE TABLE hit AS SELECT i FROM (SELECT substr(key, 2)::int AS i FROM rl_keys
	                                        WHERE zone = 'full' ORDER BY random() LIMIT 10000) s ORDER BY i" \
	-c "SELECT count(rl_limit('full', 'f' || i)) FROM hit" >/dev/null || rl_die "picking the held keys failed"
[ "$(on full -c "SELECT count(*) FROM hit")" = 10000 ] || rl_die "the full store holds fewer than 10,000 keys"
HIT_WARM=$(on full -c "SELECT 'f' || min(i) FROM hit")

# one MEASURE VARIANT REP: one timed statement in a session of its own
# (after one call: caches warm), checked against the zone's counters;
# appends its µs a call to the raw figures from the second repetition on.
one() {
	local m=$1 v=$2 rep=$3 cluster=$2 zone=open_shmem evicted=0 warm query r
	local keys="FROM generate_series(1, 10000) i"
	case $m/$v in
		limit/*) warm="SELECT rl_limit('open_shmem', 'k1')"
			query="SELECT count(rl_limit('open_shmem', 'k' || i)) $keys" ;;
		token_bucket/*) zone='(rl_token_bucket)' warm="SELECT rl_token_bucket('k1', 1000000, 1000)"
			query="SELECT count(rl_token_bucket('k' || i, 1000000, 1000)) $keys" ;;
		full/hit) cluster=full zone=full warm="SELECT rl_limit('full', '$HIT_WARM')"
			query="SELECT count(rl_limit('full', 'f' || i)) FROM hit" ;;
		full/evict) cluster=full zone=full warm="SELECT rl_limit('full', 'w$rep')" evicted=10000
			query="SELECT count(rl_limit('full', 'n${rep}_' || i)) FROM hit" ;;
	esac
	r=$(on "$cluster" -F ' ' -c "SET ratelimit.default_store = shmem" -c "$warm" \
		-c "SELECT * FROM measure('$zone', \$q\$$query\$q\$)" | tail -1)
	read -r us counts <<<"$r"
	[ "$counts" = "10000 10000 0 $evicted 0" ] \
		|| rl_die "$m $v: calls allowed refused evicted full = ${counts:-none} (expected 10000 10000 0 $evicted 0)"
	[ "$rep" = 0 ] || echo "$m $v $rep $us" >>"$RAW"
}

{
	echo "# eviction.sh $(date -u +%FT%TZ), $(nproc) cores: reps=$REPS rounds=$ROUNDS seconds=$SECONDS_EACH clients='$CLIENTS' max_keys=$MAX_KEYS"
	echo "# before: $BEFORE_SHA, ratelimit.so $(so_md5 before); after: work tree $(git describe --always --dirty), ratelimit.so $(so_md5 after)"
	echo "# full store: $FILL keys offered to $MAX_KEYS, holding $held, evicted $fill_evicted, full $fill_full"
	echo "# measure variant rep-or-round value (us a call, or tps)"
} >"$RAW"

rl_log "in a statement: $REPS repetitions after an unrecorded one"
for rep in $(seq 0 "$REPS"); do
	for pair in "limit before after" "token_bucket before after" "full hit evict"; do
		read -r m a b <<<"$pair"
		[ $((rep % 2)) = 1 ] && read -r m b a <<<"$pair"
		one "$m" "$a" "$rep" && one "$m" "$b" "$rep" || exit 1
	done
done

printf '\\set k random(1, 10000)\nSELECT rl_limit(%s, %s);\n' "'open_shmem'" "'k' || :k" >"$dir/limit.pgbench"
max_clients=$(tr ' ' '\n' <<<"$CLIENTS" | sort -n | tail -1)
for v in "${VARIANTS[@]}"; do	# warm-up
	PGPORT=${PORT[$v]} pgb_checked "$v warm-up" "$max_clients" "$dir/pgbench.log" "" -T 1 -f "$dir/limit.pgbench" >/dev/null
done
rl_log "pgbench: $ROUNDS rounds of ${SECONDS_EACH} s, clients $CLIENTS"
for round in $(seq 1 "$ROUNDS"); do
	order=("${VARIANTS[@]}")
	[ $((round % 2)) = 0 ] && order=(after before)
	for c in $CLIENTS; do
		for v in "${order[@]}"; do
			read -r tps _ < <(PGPORT=${PORT[$v]} pgb_checked "$v" "$c" "$dir/pgbench.log" "" -T "$SECONDS_EACH" -f "$dir/limit.pgbench")
			[ -n "${tps:-}" ] || exit 1
			echo "tps_$c $v $round $tps" >>"$RAW"
		done
	done
done
for v in "${VARIANTS[@]}"; do
	r=$(on "$v" -F ' ' -c "SELECT refused, evicted, \"full\" FROM rl_counters WHERE zone = 'open_shmem'")
	[ "$r" = "0 0 0" ] || rl_die "open_shmem on '$v': refused evicted full = $r"
done

# summary MEASURE A B: the medians of A and B, B / A, and min-max of B / A
# within a repetition or round.
summary() {
	awk -v m="$1" -v a="$2" -v b="$3" '
		function median(x, n,   i, j, t) {
			for (i = 2; i <= n; i++) for (j = i; j > 1 && x[j - 1] > x[j]; j--) { t = x[j]; x[j] = x[j - 1]; x[j - 1] = t }
			return n % 2 ? x[(n + 1) / 2] : (x[n / 2] + x[n / 2 + 1]) / 2
		}
		$1 == m && $2 == a { va[++na] = $4; at[$3] = $4 }
		$1 == m && $2 == b { vb[++nb] = $4; bt[$3] = $4 }
		END {
			lo = 1e99; hi = 0
			for (r in at) if (r in bt) { q = bt[r] / at[r]; if (q < lo) lo = q; if (q > hi) hi = q }
			ma = median(va, na); mb = median(vb, nb)
			printf "%s %s %.3f %.3f %.3f\n", ma, mb, mb / ma, lo, hi
		}' "$RAW"
}

{
echo
echo "Shmem store, 10,000 existing keys, every call admitted: before ($BEFORE_SHA) and after (the work tree)"
echo
echo "| measure | before | after | after / before | within a rep. or round | within 5 % |"
echo "| --- | ---: | ---: | ---: | ---: | --- |"
for m in limit token_bucket $(for c in $CLIENTS; do echo "tps_$c"; done); do
	read -r a b q lo hi < <(summary "$m" before after)
	case $m in
		limit) label="\`rl_limit\` in a statement, µs a call" f=%.3f ;;
		token_bucket) label="\`rl_token_bucket\` in a statement, µs a call" f=%.3f ;;
		tps_1) label="pgbench, 1 client, tps" f=%.0f ;;
		*) label="pgbench, ${m#tps_} clients, tps" f=%.0f ;;
	esac
	# Time a call: after / before <= 1.05; calls per second: >= 0.95.
	met=$(awk -v q="$q" -v tps="${m%%_*}" 'BEGIN { print (tps == "tps" ? q >= 0.95 : q <= 1.05) ? "yes" : "no" }')
	printf "| %s | $f | $f | %.3f | %.3f–%.3f | %s |\n" "$label" "$a" "$b" "$q" "$lo" "$hi" "$met"
done
echo
echo "A full store of $MAX_KEYS keys (after build; $FILL keys offered, $fill_evicted evicted), \`rl_limit\` over 10,000 keys in a statement"
echo
echo "| call | µs a call |"
echo "| --- | ---: |"
read -r hit evict q lo hi < <(summary full hit evict)
met=$(awk -v q="$q" 'BEGIN { print q <= 2 ? "met" : "missed" }')
printf '| hit: a key it holds | %.3f |\n| evict: a new key, evicting one | %.3f |\n' "$hit" "$evict"
printf '| evict / hit | %.3f (%.3f–%.3f within a repetition; target <= 2: %s) |\n' "$q" "$lo" "$hi" "$met"
} | tee -a "$RAW"
echo
echo "raw figures: $RAW"
