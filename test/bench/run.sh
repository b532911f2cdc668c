#!/usr/bin/env bash
# Benchmark of rl_token_bucket against hand-written token buckets (SPEC §5),
# of the zones (SPEC §2.2) against each other and against a log table, and
# of the shmem store (SPEC §2.4) against the table store, SELECT 1 and a
# hashtext loop.
#
#   bash test/bench/run.sh
#
# Starts a throwaway cluster (.cluster/bench), measures in one run:
#   1. in-backend calls/s:  SELECT count(f(...)) FROM generate_series(1, N) i
#      over 10k existing keys, each key once per statement, on the table
#      store (both access paths) and the shmem store, against the hand-written
#      buckets and a hashtext(i::text) loop;
#   2. pgbench -M prepared -n, 1 and 2 clients, random key among 10k, both
#      stores, the hand-written buckets and SELECT 1;
#   3. hot key: 100k calls on one key vs 100k calls over 10k keys, both stores;
#   4. zones: rl_limit in-backend calls/s of each algorithm on both stores,
#      same shape as 1 and measured in the same interleaved repetitions as 1;
#   5. exact sliding window: rl_sliding_window vs a PL/pgSQL log table
#      (UNLOGGED (key, at), index on (key, at)) at limits 10 .. 10,000, each
#      measured key holding 0.9 x limit admissions in a 1-hour window;
#   6. state bytes per key, measured in ratelimit.state (emptied before each
#      measurement): every algorithm after one call, and the exact sliding
#      window with a full window at limits 10 .. 10,000;
#   7. the shmem store's shared memory (pg_shmem_allocations) per key of
#      ratelimit.shmem_max_keys, and how many keys it kept before a new key
#      first found no room (keys that do not recover, offered one by one);
#   8. pg_cron refill mode: rl_limit on a refill => 'cron' token_bucket zone
#      against the inline zone and rl_token_bucket, in-backend (as 1) and
#      under pgbench (as 2); one rl_cron_refill run on a zone of 100k full +
#      1k non-full buckets vs 1k non-full alone, and the same UPDATE without
#      the partial index (a sequential scan);
#   9. rl_limit_trigger: a bulk INSERT ... SELECT of 10k and 100k rows for
#      one key, against the same INSERT without the trigger;
# prints a Markdown report and writes it to test/bench/RESULTS.md.
#
# The shmem store is not transactional and keeps its state across
# statements: every measured call is admitted (rates far above the calls
# made) and every measured key exists before it is measured (warm-up); the
# shared-memory counters (rl_counters) check that no call of the measured
# phases was refused and that the shmem store evicted no key and never ran
# out of room during them.
#
# Environment:
#   BENCH_SECONDS  pgbench time of each variant and client count, seconds
#                  (default 20), split into BENCH_PGBENCH_ROUNDS interleaved
#                  runs (default 10: -T 2 each; more, shorter runs spread
#                  bursts of other work on the machine over every variant)
#   BENCH_REPS     in-backend repetitions of each variant, sections 1, 4
#                  and 5 (default 11)
#   BENCH_HOT_REPS hot-key repetitions of each variant (default 5)
#   BENCH_ZONES=0  skip sections 4, 5 and 6 (default 1)
#   BENCH_CRON=0   skip section 8 (default 1); its repetitions are
#                  BENCH_REPS, its pgbench rounds those of section 2
#   BENCH_TRIGGER=0  skip section 9, the row trigger (default 1)
#   BENCH_SHMEM_KEYS  ratelimit.shmem_max_keys of the cluster (default
#                  500000): room for the ~50k measured keys without a full
#                  8-entry set (at the default 100000, 50 % full, some sets
#                  overflow and keys are evicted while measured)
#   BENCH_SW_ROWS  section 5: admissions pre-filled at the largest limit in
#                  each of the two approaches (default 2000000); sets the
#                  keys per statement at every limit (at most 1000)
#   BENCH_RESULTS  where the report goes (default test/bench/RESULTS.md)
#   BENCH_BUILD=0  measure the installed extension as it is (default 1:
#                  install missing packages, build and install the tree's)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../../scripts/lib.sh disable=SC1091
. "$HERE/../../scripts/lib.sh"
# shellcheck source=pgbench.sh
. "$HERE/pgbench.sh"

BENCH_SECONDS=${BENCH_SECONDS:-20}
BENCH_PGBENCH_ROUNDS=${BENCH_PGBENCH_ROUNDS:-10}
BENCH_REPS=${BENCH_REPS:-11}
BENCH_HOT_REPS=${BENCH_HOT_REPS:-5}
BENCH_ZONES=${BENCH_ZONES:-1}
BENCH_CRON=${BENCH_CRON:-1}
BENCH_TRIGGER=${BENCH_TRIGGER:-1}
BENCH_SW_ROWS=${BENCH_SW_ROWS:-2000000}
BENCH_BUILD=${BENCH_BUILD:-1}
BENCH_SHMEM_KEYS=${BENCH_SHMEM_KEYS:-500000}

rl_require_positive_ints BENCH_SECONDS BENCH_PGBENCH_ROUNDS BENCH_REPS BENCH_HOT_REPS BENCH_SW_ROWS BENCH_SHMEM_KEYS
[[ $BENCH_ZONES =~ ^[01]$ ]] || rl_die "BENCH_ZONES must be 0 or 1 (got '$BENCH_ZONES')"
[[ $BENCH_CRON =~ ^[01]$ ]] || rl_die "BENCH_CRON must be 0 or 1 (got '$BENCH_CRON')"
[[ $BENCH_TRIGGER =~ ^[01]$ ]] || rl_die "BENCH_TRIGGER must be 0 or 1 (got '$BENCH_TRIGGER')"

# The exact command, with the settings that change what it measures.
COMMAND=$(rl_command_with_env "bash test/bench/run.sh" BENCH_BUILD BENCH_SHMEM_KEYS BENCH_SW_ROWS \
	BENCH_TRIGGER BENCH_CRON BENCH_ZONES BENCH_HOT_REPS BENCH_REPS BENCH_PGBENCH_ROUNDS BENCH_SECONDS)
[ $# -eq 0 ] || rl_die "usage: [BENCH_SECONDS=20 ...] bash test/bench/run.sh (no arguments)"

# pgbench: ROUNDS interleaved runs of -T RUN_SECONDS (at least one second).
PGB_ROUNDS=$(( BENCH_PGBENCH_ROUNDS < BENCH_SECONDS ? BENCH_PGBENCH_ROUNDS : BENCH_SECONDS ))
PGB_RUN_SECONDS=$(( (BENCH_SECONDS + PGB_ROUNDS - 1) / PGB_ROUNDS ))

KEYS=10000          # existing keys
HOT_CALLS=100000    # calls in one statement for the hot-key row
RATE=1000000        # tokens/s: every call is admitted, so every call writes
WINDOW=60
# Zones (sections 4 to 6).
ZONE_ALGOS=(token_bucket gcra fixed_window sliding_window_counter sliding_window)
SHMEM_ZONE_ALGOS=(token_bucket gcra fixed_window sliding_window_counter)  # sliding_window: table store only
ZONE_RATE=1000000   # per ZONE_PERIOD: every call of section 4 is admitted
ZONE_PERIOD='1 second'
SW_LIMITS=(10 100 1000 10000)
SW_PERIOD='1 hour'  # section 5: no pre-filled admission expires during the run
SW_SPACING='100 milliseconds'  # section 5: between pre-filled admissions
SW_KEYS_MAX=1000    # section 5: at most this many keys per statement
SIZE_PERIOD='3 hours'  # section 6: holds 10,000 admissions one second apart
OUT=$HERE/out       # git-ignored scratch space (pgbench scripts and logs)
RESULTS=${BENCH_RESULTS:-$HERE/RESULTS.md}
PGBENCH=$RL_PG_BIN/pgbench

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	rl_cluster_stop
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ "$BENCH_BUILD" = 1 ]; then
	rl_install_packages
	rl_build_install
fi
[ -x "$PGBENCH" ] || rl_die "pgbench not found at $PGBENCH"

# Warn when the installed module is not the one built in the tree.
PKGLIBDIR=$("$RL_PG_BIN/pg_config" --pkglibdir)
SO_NOTE=""
if [ -f "$RL_ROOT/ratelimit.so" ] && ! cmp -s "$RL_ROOT/ratelimit.so" "$PKGLIBDIR/ratelimit.so"; then
	SO_NOTE="warning: the installed $PKGLIBDIR/ratelimit.so differs from the tree's ratelimit.so (run with BENCH_BUILD=1 to install the tree's build)"
	rl_log "$SO_NOTE"
fi

rm -rf "$OUT"
mkdir -p "$OUT"
START_SECONDS=$SECONDS
# Other work on the machine skews every figure: recorded in the report.
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)

rl_cluster_start bench "shared_buffers = '256MB'" "ratelimit.shmem_max_keys = $BENCH_SHMEM_KEYS"

psql_q() { rl_psql -d postgres "$@"; }
psql_at() { rl_psql -d postgres -At "$@"; }

# ---------------------------------------------------------------- setup --

rl_log "setting up the bench schema"
# The PL/pgSQL and upsert buckets (schema bench), shared with redis.sh.
psql_q -f "$HERE/baselines.sql"
psql_q <<SQL
CREATE EXTENSION ratelimit;

CREATE TABLE bench.timings (
    phase    text NOT NULL,
    variant  text NOT NULL,
    rep      int NOT NULL,
    calls    bigint NOT NULL,
    secs     float8 NOT NULL
);

CREATE TABLE bench.pgbench (
    round    int NOT NULL,
    clients  int NOT NULL,
    variant  text NOT NULL,
    tps      float8 NOT NULL,   -- pgbench's, without initial connection time
    xacts    bigint NOT NULL
);

-- rl_counters (shared memory, both stores) before the measured phases.
CREATE TABLE bench.counters_before AS SELECT * FROM rl_counters WITH NO DATA;

-- Section 7.
CREATE TABLE bench.shmem (
    max_keys        bigint NOT NULL,   -- ratelimit.shmem_max_keys
    alloc_size      bigint NOT NULL,   -- sum(size) of pg_shmem_allocations 'ratelimit%'
    alloc_allocated bigint NOT NULL,   -- sum(allocated_size)
    first_full      bigint,            -- fill keys kept when a new one first found no room
    offered         bigint,            -- fill keys offered in all
    full_calls      bigint             -- of those, calls that found no room
);

-- Times one statement returning count(...) inside the server, commit
-- included (rl_token_bucket writes back repeated keys before commit).
-- p_store: ratelimit.default_store for the statement (rl_token_bucket's
-- store; zones name their own), 'table' when NULL.
CREATE PROCEDURE bench.measure(
    p_phase text, p_variant text, p_rep int, p_access text, p_calls int, p_sql text,
    p_store text DEFAULT NULL)
LANGUAGE plpgsql AS \$fn\$
DECLARE
    t0 timestamptz;
    t1 timestamptz;
    n  bigint;
BEGIN
    IF p_access IS NOT NULL THEN
        PERFORM set_config('ratelimit.table_access', p_access, false);
    END IF;
    PERFORM set_config('ratelimit.default_store', coalesce(p_store, 'table'), false);
    COMMIT;
    t0 := clock_timestamp();
    EXECUTE p_sql INTO n;
    COMMIT;
    t1 := clock_timestamp();
    IF n IS DISTINCT FROM p_calls THEN
        RAISE EXCEPTION '% %: counted % calls, expected %', p_phase, p_variant, n, p_calls;
    END IF;
    IF p_rep > 0 THEN
        INSERT INTO bench.timings VALUES (p_phase, p_variant, p_rep, p_calls, date_part('epoch', t1 - t0));
    END IF;
    COMMIT;
END
\$fn\$;
SQL

# ------------------------------------------------- sanity of the baselines --

# SPEC §2.1 on the real clock, rate 1, window 5: six calls at one instant
# return 4, 3, 2, 1, 0, -1; calls 0.2, 0.4, 0.6 and 0.8 s later are refused;
# one 1.1 s later is admitted (refused calls take nothing and do not disturb
# the refill).  Every variant must pass, so that no baseline is cheating.
rl_log "checking that every variant implements SPEC 2.1"
for v in direct spi shmem plpgsql upsert; do
	case $v in
		direct|spi|shmem) f=rl_token_bucket ;;
		plpgsql) f=bench.plpgsql_bucket ;;
		upsert) f=bench.upsert_bucket ;;
	esac
	got=$(psql_at <<SQL | paste -sd' '
SET ratelimit.table_access = $([ "$v" = spi ] && echo spi || echo direct);
SET ratelimit.default_store = '$([ "$v" = shmem ] && echo shmem || echo table)';
SELECT string_agg(r::text, ',' ORDER BY i) FROM (
    SELECT i, $f('sanity-$v', 1, 5, 1) AS r FROM generate_series(1, 6) i) s;
$(for _ in 1 2 3 4; do echo "SELECT $f('sanity-$v', 1, 5, 1) FROM pg_sleep(0.2);"; done)
SELECT $f('sanity-$v', 1, 5, 1) FROM pg_sleep(0.3);
SQL
)
	want="4,3,2,1,0,-1 -1 -1 -1 -1 0"
	[ "$got" = "$want" ] || rl_die "$v ($f): SPEC 2.1 check: expected '$want', got '$got'"
done

# ----------------------------------------------------------- zone setup --

# Section 5's baseline: the exact sliding window as a log table, one row
# per admitted unit of cost, counted over the trailing period (an
# index-only scan on (key, at) once vacuumed).  Same admission rule as
# rl_sliding_window: admitted iff the cost admitted in the trailing period
# plus cost stays within the limit.  The advisory lock on the key makes
# count-then-insert atomic under READ COMMITTED, as rl_sliding_window is
# (without it, concurrent calls on one key over-admit); expired rows of the
# key are deleted on the way, so that the log stays bounded.
if [ "$BENCH_ZONES" = 1 ]; then
	rl_log "setting up the zones and the log-table sliding window"
	psql_q <<SQL
$(for a in "${ZONE_ALGOS[@]}"; do
	echo "SELECT rl_zone_set('bench_$a', '$a', $ZONE_RATE, interval '$ZONE_PERIOD');"
done)
$(for a in "${SHMEM_ZONE_ALGOS[@]}"; do
	echo "SELECT rl_zone_set('bench_shmem_$a', '$a', $ZONE_RATE, interval '$ZONE_PERIOD', store => 'shmem');"
done)
$(for l in "${SW_LIMITS[@]}"; do
	echo "SELECT rl_zone_set('sw_$l', 'sliding_window', $l, interval '$SW_PERIOD');"
done)
SELECT rl_zone_set('sw_sanity', 'sliding_window', 3, interval '1 second');

CREATE UNLOGGED TABLE bench.log_window (
    key  text COLLATE "C" NOT NULL,
    at   timestamptz NOT NULL
);
CREATE INDEX log_window_key_at ON bench.log_window (key, at);

CREATE FUNCTION bench.log_window(p_key text, p_limit bigint, p_period interval, p_cost int DEFAULT 1)
RETURNS boolean LANGUAGE plpgsql AS \$fn\$
DECLARE
    v_now  timestamptz;
    v_used bigint;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended(p_key, 0));
    v_now := clock_timestamp();
    DELETE FROM bench.log_window WHERE key = p_key AND at <= v_now - p_period;
    SELECT count(*) INTO v_used FROM bench.log_window WHERE key = p_key AND at > v_now - p_period;
    IF v_used + p_cost > p_limit THEN
        RETURN false;
    END IF;
    INSERT INTO bench.log_window (key, at) SELECT p_key, v_now FROM generate_series(1, p_cost);
    RETURN true;
END
\$fn\$;

-- Section 5: keys measured per statement, and how they were filled.
CREATE TABLE bench.sw_setup (
    lim      bigint NOT NULL,
    prefill  bigint NOT NULL,   -- admissions per key before the first repetition
    keys     int NOT NULL,      -- keys per statement (one call each)
    sets     int NOT NULL       -- key sets taken in turn by the repetitions
);

-- Section 6.
CREATE TABLE bench.sizes (
    what          text NOT NULL,     -- 'algorithm', 'sliding_window' or 'log_table'
    variant       text NOT NULL,     -- algorithm, or spacing of the admissions
    lim           bigint,            -- admissions held per key (full window)
    keys          bigint NOT NULL,
    rows          bigint NOT NULL,   -- rows of those keys
    tuple_bytes   bigint NOT NULL,   -- sum(pg_column_size(t.*)): heap tuples, header included
    entries_bytes bigint,            -- sum(octet_length(entries))
    heap_bytes    bigint NOT NULL,   -- main fork after VACUUM FULL
    index_bytes   bigint NOT NULL    -- primary key / (key, at) index after VACUUM FULL
);
SQL

	# The log table and rl_sliding_window apply the same rule, on the real
	# clock, limit 3 per second: four calls at one instant (t,t,t,f), one
	# 0.5 s later (f), then, once the first three have left the window, a
	# call of cost 2 (t), one of cost 1 (t) and one more (f).
	rl_log "checking that the log table and rl_sliding_window apply the same rule"
	for v in ours log; do
		case $v in
			ours) f() { echo "(rl_sliding_window('sw_sanity', 'sanity', $1)).allowed"; } ;;
			log) f() { echo "bench.log_window('sanity', 3, interval '1 second', $1)"; } ;;
		esac
		got=$(psql_at <<SQL | paste -sd' '
SELECT string_agg(r::text, ',' ORDER BY i) FROM (
    SELECT i, $(f 1) AS r FROM generate_series(1, 4) i) s;
SELECT $(f 1) FROM pg_sleep(0.5);
SELECT $(f 2) FROM pg_sleep(0.6);
SELECT $(f 1);
SELECT $(f 1);
SQL
)
		want="true,true,true,false f t t f"
		[ "$got" = "$want" ] || rl_die "sliding window check ($v): expected '$want', got '$got'"
	done
fi

# ------------------------------------------------------------ in-backend --

# shmem: rl_token_bucket with ratelimit.default_store = shmem (set by
# bench.measure); shmem_i: the same over the keys i::text, those of the
# SPEC's loop; hashtext and hashtext_k: the SPEC's trivial loop and the
# same over the keys as the calls build them, no bucket at all.
INB_VARIANTS=(direct spi shmem shmem_i plpgsql upsert hashtext hashtext_k)
ZONE_VARIANTS=()
SHMEM_ZONE_VARIANTS=()
[ "$BENCH_ZONES" = 0 ] || ZONE_VARIANTS=("${ZONE_ALGOS[@]}")
[ "$BENCH_ZONES" = 0 ] || SHMEM_ZONE_VARIANTS=("${SHMEM_ZONE_ALGOS[@]}")
inb_access() { case $1 in direct|spi) echo "'$1'" ;; shmem*) echo "'direct'" ;; *) echo NULL ;; esac; }
inb_store() { case $1 in shmem*) echo "'shmem'" ;; *) echo "'table'" ;; esac; }
inb_sql() {
	case $1 in
		direct|spi|shmem) echo "SELECT count(rl_token_bucket('k' || i, $RATE, $WINDOW, 1)) FROM generate_series(1, $KEYS) i" ;;
		shmem_i) echo "SELECT count(rl_token_bucket(i::text, $RATE, $WINDOW, 1)) FROM generate_series(1, $KEYS) i" ;;
		plpgsql) echo "SELECT count(bench.plpgsql_bucket('k' || i, $RATE, $WINDOW, 1)) FROM generate_series(1, $KEYS) i" ;;
		upsert) echo "SELECT count(bench.upsert_bucket('k' || i, $RATE, $WINDOW, 1)) FROM generate_series(1, $KEYS) i" ;;
		hashtext) echo "SELECT count(hashtext(i::text)) FROM generate_series(1, $KEYS) i" ;;
		hashtext_k) echo "SELECT count(hashtext('k' || i)) FROM generate_series(1, $KEYS) i" ;;
	esac
}

# The shared-memory counters before anything is measured: no call of the
# measured phases may be refused, and the shmem store may neither evict nor
# run out of room (checked after pgbench).
psql_q -c "INSERT INTO bench.counters_before SELECT * FROM rl_counters"

rl_log "in-backend: $KEYS keys x $(( ${#INB_VARIANTS[@]} + ${#ZONE_VARIANTS[@]} + ${#SHMEM_ZONE_VARIANTS[@]} )) variants x $BENCH_REPS reps, then hot key x $BENCH_HOT_REPS reps"
{
	echo "SET client_min_messages = warning;"
	# Pre-warm: create the keys ('k0' .. 'k$KEYS', plus the hot key), 1000
	# per transaction (builds before 3184fbe held a lock per created key until
	# commit, which filled the lock table); on the shmem store too.
	echo "SET ratelimit.table_access = direct;"
	for f in rl_token_bucket shmem bench.plpgsql_bucket bench.upsert_bucket; do
		if [ "$f" = shmem ]; then f=rl_token_bucket; echo "SET ratelimit.default_store = shmem;"; fi
		for ((lo = 0; lo <= KEYS; lo += 1000)); do
			echo "SELECT count($f('k' || i, $RATE, $WINDOW, 1)) FROM generate_series($lo, least($lo + 999, $KEYS)) i;"
		done
		echo "SELECT $f('hot', $RATE, $WINDOW, 1);"
		echo "SET ratelimit.default_store = 'table';"
	done
	echo "SET ratelimit.default_store = shmem;"
	echo "SELECT count(rl_token_bucket(i::text, $RATE, $WINDOW, 1)) FROM generate_series(0, $KEYS) i;"
	echo "SET ratelimit.default_store = 'table';"
	for a in "${ZONE_VARIANTS[@]}"; do
		for ((lo = 0; lo <= KEYS; lo += 1000)); do
			echo "SELECT count(rl_limit('bench_$a', 'k' || i, 1)) FROM generate_series($lo, least($lo + 999, $KEYS)) i;"
		done
	done
	for a in "${SHMEM_ZONE_VARIANTS[@]}"; do
		echo "SELECT count(rl_limit('bench_shmem_$a', 'k' || i, 1)) FROM generate_series(0, $KEYS) i;"
	done
	echo "VACUUM ANALYZE ratelimit.state, bench.plpgsql_bucket, bench.upsert_bucket;"
	# Rep 0 warms the backend's caches and is not recorded.
	for rep in $(seq 0 "$BENCH_REPS"); do
		for v in "${INB_VARIANTS[@]}"; do
			echo "CALL bench.measure('inbackend', '$v', $rep, $(inb_access "$v"), $KEYS, \$q\$$(inb_sql "$v")\$q\$, $(inb_store "$v"));"
		done
		# Section 4, in the same repetitions: only admitted calls are
		# counted, so a refusal fails the run.
		for a in "${ZONE_VARIANTS[@]}"; do
			sql="SELECT count((rl_limit('bench_$a', 'k' || i, 1)).allowed OR NULL) FROM generate_series(1, $KEYS) i"
			echo "CALL bench.measure('zones', '$a', $rep, 'direct', $KEYS, \$q\$$sql\$q\$);"
		done
		for a in "${SHMEM_ZONE_VARIANTS[@]}"; do
			sql="SELECT count((rl_limit('bench_shmem_$a', 'k' || i, 1)).allowed OR NULL) FROM generate_series(1, $KEYS) i"
			echo "CALL bench.measure('zones_shmem', '$a', $rep, 'direct', $KEYS, \$q\$$sql\$q\$);"
		done
		echo "VACUUM ratelimit.state, bench.plpgsql_bucket, bench.upsert_bucket;"
	done
	# Hot key vs spread keys, 100k calls in one statement each.
	for rep in $(seq 0 "$BENCH_HOT_REPS"); do
		for v in direct spi shmem; do
			hot="SELECT count(rl_token_bucket('hot', $RATE, $WINDOW, 1)) FROM generate_series(1, $HOT_CALLS) i"
			spread="SELECT count(rl_token_bucket('k' || (i % $KEYS), $RATE, $WINDOW, 1)) FROM generate_series(1, $HOT_CALLS) i"
			echo "CALL bench.measure('hot', '$v', $rep, $(inb_access "$v"), $HOT_CALLS, \$q\$$hot\$q\$, $(inb_store "$v"));"
			echo "CALL bench.measure('spread', '$v', $rep, $(inb_access "$v"), $HOT_CALLS, \$q\$$spread\$q\$, $(inb_store "$v"));"
		done
		echo "VACUUM ratelimit.state;"
	done
} >"$OUT/inbackend.sql"
psql_q -f "$OUT/inbackend.sql" >"$OUT/inbackend.log"

# --------------------------------------------------------------- pgbench --

# hashtext_k: the buckets' script (a random key, one function call on
# 'k' || :k) without a bucket: what any call of that shape costs.
PGB_VARIANTS=(select1 hashtext_k direct spi shmem plpgsql upsert)
printf 'SELECT 1;\n' >"$OUT/select1.pgb"
printf '\\set k random(1, %d)\nSELECT hashtext('"'k'"' || :k);\n' "$KEYS" >"$OUT/hashtext_k.pgb"
printf '\\set k random(1, %d)\nSELECT rl_token_bucket('"'k'"' || :k, %s, %s, 1);\n' \
	"$KEYS" "$RATE" "$WINDOW" >"$OUT/direct.pgb"
cp "$OUT/direct.pgb" "$OUT/spi.pgb"
cp "$OUT/direct.pgb" "$OUT/shmem.pgb"
printf '\\set k random(1, %d)\nSELECT bench.plpgsql_bucket('"'k'"' || :k, %s, %s, 1);\n' \
	"$KEYS" "$RATE" "$WINDOW" >"$OUT/plpgsql.pgb"
printf '\\set k random(1, %d)\n%s;\n' "$KEYS" \
	"$(psql_at -c "SELECT bench.upsert_bucket_sql(\$\$'k' || :k\$\$, '$RATE', '$WINDOW', '1')")" >"$OUT/upsert.pgb"

pgb_options() {
	case $1 in
		direct|spi) echo "-c ratelimit.table_access=$1" ;;
		shmem) echo "-c ratelimit.default_store=shmem" ;;
		*) echo "" ;;
	esac
}

# pgb_run NAME SCRIPT CLIENTS LOG OPTIONS: one pgbench run of -T
# PGB_RUN_SECONDS with PGOPTIONS=OPTIONS; prints "tps transactions", or
# dies when it failed or reported errors.
pgb_run() {
	pgb_checked "$1" "$3" "$4" "$5" -T "$PGB_RUN_SECONDS" -f "$2"
}

# Interleaved (round 1: all variants and client counts, round 2: ...), so
# that a slow spell of the machine does not fall on one variant only.
for round in $(seq 1 "$PGB_ROUNDS"); do
	rl_log "pgbench round $round/$PGB_ROUNDS: ${#PGB_VARIANTS[@]} variants x 1 and 2 clients, ${PGB_RUN_SECONDS}s each"
	for clients in 1 2; do
		for v in "${PGB_VARIANTS[@]}"; do
			psql_q -c "VACUUM ratelimit.state, bench.plpgsql_bucket, bench.upsert_bucket"
			result=$(pgb_run "$v" "$OUT/$v.pgb" "$clients" "$OUT/pgbench-$v-$clients-$round.log" "$(pgb_options "$v")")
			read -r tps xacts <<<"$result"
			psql_q -c "INSERT INTO bench.pgbench VALUES ($round, $clients, '$v', $tps, $xacts)"
		done
	done
done

# The access path really was the one asked for (PGOPTIONS reached the server).
for access in direct spi; do
	got=$(PGOPTIONS="-c ratelimit.table_access=$access" psql_at -c "SHOW ratelimit.table_access")
	[ "$got" = "$access" ] || rl_die "PGOPTIONS did not select table_access=$access (got $got)"
done
got=$(PGOPTIONS="$(pgb_options shmem)" psql_at -c "SHOW ratelimit.default_store")
[ "$got" = shmem ] || rl_die "PGOPTIONS did not select default_store=shmem (got $got)"

# Since the snapshot before the in-backend phase (sections 1 to 4 and the
# warm-up): no call refused (rl_token_bucket's decisions on both stores are
# counted under '(rl_token_bucket)'), no shmem key evicted, no new shmem key
# without room.  Sections 5 and 6 use the table store only.
bad=$(psql_at -F ' ' <<'SQL'
SELECT c.zone, c.allowed - coalesce(b.allowed, 0), c.refused - coalesce(b.refused, 0),
       c.evicted - coalesce(b.evicted, 0), c.full - coalesce(b.full, 0)
  FROM rl_counters c LEFT JOIN bench.counters_before b USING (zone)
 WHERE c.refused > coalesce(b.refused, 0) OR c.evicted > coalesce(b.evicted, 0)
    OR c.full > coalesce(b.full, 0);
SQL
)
[ -z "$bad" ] || rl_die "refused, evicted or no-room calls while measuring (zone, allowed, refused, evicted, full): $bad"
# ... and the counters did count: every zone call of section 4 and its
# warm-up exactly, and at least the in-backend and hot-key calls of
# rl_token_bucket (pgbench's come on top).
zone_calls=$(( (KEYS + 1) + (BENCH_REPS + 1) * KEYS ))
tb_calls=$(( 2 * (KEYS + 2) + (KEYS + 1) + (BENCH_REPS + 1) * 4 * KEYS + (BENCH_HOT_REPS + 1) * 3 * 2 * HOT_CALLS ))
bad=$(psql_at -F ' ' <<SQL
SELECT c.zone, c.allowed - coalesce(b.allowed, 0)
  FROM rl_counters c LEFT JOIN bench.counters_before b USING (zone)
 WHERE CASE WHEN c.zone = '(rl_token_bucket)' THEN c.allowed - coalesce(b.allowed, 0) < $tb_calls
            WHEN c.zone LIKE 'bench\_%' THEN c.allowed - coalesce(b.allowed, 0) <> $zone_calls
            ELSE false END;
SELECT 'zones counted: ' || count(*) FROM rl_counters WHERE zone LIKE 'bench\_%'
HAVING count(*) <> $(( ${#ZONE_VARIANTS[@]} + ${#SHMEM_ZONE_VARIANTS[@]} ));
SQL
)
[ -z "$bad" ] || rl_die "rl_counters did not count the measured calls (zone, allowed): $bad"

# ---------------------------------------------------- pg_cron refill mode --

# Section 8 (SPEC 2.4, refill => 'cron').  Runs here: after the rl_counters
# checks of sections 1 to 4 (its zones would count there) and before
# sections 5 and 6 (section 6 empties ratelimit.state).  No pg_cron job is
# scheduled (rl_cron_enable needs CREATE EXTENSION pg_cron): refill_tick is
# set by UPDATE ratelimit.zone, as rl_cron_enable would, and the refill runs
# only when the benchmark calls rl_cron_refill.
#
# Calls: rl_limit on a cron-refilled token_bucket zone (bench_cron, calls
# only take; capacity far above the calls made, so nothing is refused and
# nothing needs a refill) against the inline token_bucket zone of section 4
# (bench_token_bucket, same rate and period; created here when BENCH_ZONES=0)
# and rl_token_bucket (table store, direct), over the same 10k keys: in-backend
# in interleaved repetitions, and pgbench in interleaved rounds, as in
# sections 1 and 2.
#
# Refill: one rl_cron_refill run, timed in the server, on zone A (100k full
# buckets and 1k below capacity) and zone B (the same 1k below capacity,
# alone), and (C) the same UPDATE on A without the partial index (WHERE
# zone_id = A AND tokens < capacity, index scans off: a sequential scan).
# One token per run (rate 1 per minute, tick 1 minute, capacity 1000, from
# 0 tokens), so the 1k buckets stay below capacity through every run.
if [ "$BENCH_CRON" = 1 ]; then
	CRON_VARIANTS=(cron inline direct)
	CRON_FULL=100000    # zone A: full buckets
	CRON_PENDING=1000   # zones A and B: buckets below capacity
	CRON_CAP=1000       # zones A and B: capacity (burst), 1 token per minute
	CRON_STEP=$(( (CRON_FULL + CRON_PENDING) / CRON_PENDING ))  # every 101st key of A is below capacity
	cron_sql() {
		case $1 in
			cron) echo "SELECT count((rl_limit('bench_cron', 'k' || i, 1)).allowed OR NULL) FROM generate_series(1, $KEYS) i" ;;
			inline) echo "SELECT count((rl_limit('bench_token_bucket', 'k' || i, 1)).allowed OR NULL) FROM generate_series(1, $KEYS) i" ;;
			direct) inb_sql direct ;;
		esac
	}
	rl_log "pg_cron refill mode: setting up the zones"
	psql_q <<SQL
SET client_min_messages = warning;
CREATE TABLE bench.cron_counters_before AS SELECT * FROM rl_counters;
CREATE TABLE bench.cron_pgbench (LIKE bench.pgbench);
CREATE TABLE bench.cron_setup (
    zone_a_keys     bigint NOT NULL,   -- rows of zone A
    zone_a_pending  bigint NOT NULL,   -- of which below capacity (refill_pending)
    zone_b_keys     bigint NOT NULL,
    state_rows      bigint NOT NULL,   -- ratelimit.state, every zone
    state_pages     bigint NOT NULL,
    idx_entries     bigint NOT NULL,   -- rows with refill_pending (every cron zone)
    idx_bytes       bigint NOT NULL    -- state_refill_idx
);
CREATE TABLE bench.cron_plan (
    variant  text NOT NULL,
    scan     text NOT NULL,   -- the UPDATE's scan node (auto_explain)
    buffers  text             -- the UPDATE's buffers
);
$([ "$BENCH_ZONES" = 1 ] || echo "SELECT rl_zone_set('bench_token_bucket', 'token_bucket', $ZONE_RATE, interval '$ZONE_PERIOD');")
SELECT rl_zone_set('bench_cron', 'token_bucket', $ZONE_RATE, interval '$ZONE_PERIOD', refill => 'cron');
-- The tick rl_cron_enable would pick with the installed pg_cron.
UPDATE ratelimit.zone
   SET refill_tick = coalesce((ratelimit.cron_plan(
           (SELECT default_version FROM pg_available_extensions WHERE name = 'pg_cron'), rate, period)).tick,
       interval '1 minute')
 WHERE zone = 'bench_cron';
SELECT rl_zone_set('bench_cron_a', 'token_bucket', 1, interval '1 minute', burst => $CRON_CAP, refill => 'cron');
SELECT rl_zone_set('bench_cron_b', 'token_bucket', 1, interval '1 minute', burst => $CRON_CAP, refill => 'cron');
UPDATE ratelimit.zone SET refill_tick = interval '1 minute' WHERE zone IN ('bench_cron_a', 'bench_cron_b');

-- (C): rl_cron_refill (sql/ratelimit--0.3.0--0.4.0.sql) with the UPDATE's
-- WHERE on the zone and the tokens instead of the partial index's
-- predicate, and index scans off: the primary key (key, zone_id, part) does
-- not lead with zone_id, so without state_refill_idx the UPDATE reads the
-- whole table.
CREATE FUNCTION bench.cron_refill_seqscan(p_zone text)
RETURNS bigint
LANGUAGE plpgsql
SET enable_indexscan = off
SET enable_bitmapscan = off
SET enable_indexonlyscan = off
AS \$fn\$
DECLARE
    z ratelimit.zone;
    cap numeric;
    p numeric;
    per_tick numeric;
    refilled bigint;
BEGIN
    SELECT * INTO z FROM ratelimit.zone AS zz WHERE zz.zone = p_zone;
    cap := coalesce(z.burst, z.rate);
    p := ratelimit.period_micros(z.period);
    per_tick := z.rate * ratelimit.period_micros(z.refill_tick);
    UPDATE ratelimit.state AS s
    SET tokens = CASE WHEN s.tokens * p + s.counter + per_tick >= cap * p THEN cap
                      ELSE div(s.tokens * p + s.counter + per_tick, p) END,
        counter = CASE WHEN s.tokens * p + s.counter + per_tick >= cap * p THEN 0
                       ELSE mod(s.tokens * p + s.counter + per_tick, p) END,
        refill_pending = CASE WHEN s.tokens * p + s.counter + per_tick >= cap * p THEN NULL
                              ELSE true END
    WHERE s.zone_id = z.zone_id AND s.tokens < cap;
    GET DIAGNOSTICS refilled = ROW_COUNT;
    RETURN refilled;
END
\$fn\$;
SQL

	rl_log "pg_cron refill mode: in-backend, $KEYS keys x ${#CRON_VARIANTS[@]} variants x $BENCH_REPS reps"
	{
		echo "SET client_min_messages = warning;"
		echo "SET ratelimit.table_access = direct;"
		# Warm-up: the keys 'k0' .. 'k$KEYS' in every variant (the cron
		# zone's are new), 1000 per transaction.
		for v in "${CRON_VARIANTS[@]}"; do
			for ((lo = 0; lo <= KEYS; lo += 1000)); do
				case $v in
					cron) f="(rl_limit('bench_cron', 'k' || i, 1)).allowed OR NULL" ;;
					inline) f="(rl_limit('bench_token_bucket', 'k' || i, 1)).allowed OR NULL" ;;
					direct) f="rl_token_bucket('k' || i, $RATE, $WINDOW, 1)" ;;
				esac
				echo "SELECT count($f) FROM generate_series($lo, least($lo + 999, $KEYS)) i;"
			done
		done
		echo "VACUUM ANALYZE ratelimit.state;"
		# Rep 0 warms the backend's caches and is not recorded.
		for rep in $(seq 0 "$BENCH_REPS"); do
			for v in "${CRON_VARIANTS[@]}"; do
				echo "CALL bench.measure('cron_calls', '$v', $rep, 'direct', $KEYS, \$q\$$(cron_sql "$v")\$q\$);"
			done
			echo "VACUUM ratelimit.state;"
		done
	} >"$OUT/cron_calls.sql"
	psql_q -f "$OUT/cron_calls.sql" >"$OUT/cron_calls.log"

	printf '\\set k random(1, %d)\nSELECT rl_limit('"'bench_cron'"', '"'k'"' || :k, 1);\n' "$KEYS" >"$OUT/cron-cron.pgb"
	printf '\\set k random(1, %d)\nSELECT rl_limit('"'bench_token_bucket'"', '"'k'"' || :k, 1);\n' "$KEYS" >"$OUT/cron-inline.pgb"
	cp "$OUT/direct.pgb" "$OUT/cron-direct.pgb"
	for round in $(seq 1 "$PGB_ROUNDS"); do
		rl_log "pg_cron refill mode: pgbench round $round/$PGB_ROUNDS: ${#CRON_VARIANTS[@]} variants x 1 and 2 clients, ${PGB_RUN_SECONDS}s each"
		for clients in 1 2; do
			for v in "${CRON_VARIANTS[@]}"; do
				psql_q -c "VACUUM ratelimit.state"
				result=$(pgb_run "cron-$v" "$OUT/cron-$v.pgb" "$clients" "$OUT/pgbench-cron-$v-$clients-$round.log" \
					"-c ratelimit.table_access=direct")
				read -r tps xacts <<<"$result"
				psql_q -c "INSERT INTO bench.cron_pgbench VALUES ($round, $clients, '$v', $tps, $xacts)"
			done
		done
	done

	# Every call of the section admitted (rl_counters, since its start): no
	# refusal in the three, and the cron zone counted at least its
	# in-backend calls and pgbench's transactions.
	bad=$(psql_at -F ' ' <<SQL
SELECT c.zone, c.allowed - coalesce(b.allowed, 0), c.refused - coalesce(b.refused, 0)
  FROM rl_counters c LEFT JOIN bench.cron_counters_before b USING (zone)
 WHERE c.zone IN ('bench_cron', 'bench_token_bucket', '(rl_token_bucket)')
   AND (c.refused > coalesce(b.refused, 0)
        OR (c.zone = 'bench_cron' AND c.allowed - coalesce(b.allowed, 0)
            < $(( (KEYS + 1) + (BENCH_REPS + 1) * KEYS )) + (SELECT sum(xacts) FROM bench.cron_pgbench WHERE variant = 'cron')));
SELECT 'no counters for bench_cron' WHERE NOT EXISTS (SELECT FROM rl_counters WHERE zone = 'bench_cron');
SQL
)
	[ -z "$bad" ] || rl_die "pg_cron refill mode: refused or uncounted calls (zone, allowed, refused): $bad"

	# The refill zones' state, written directly: key by key 'r1' ..
	# 'r$(( CRON_FULL + CRON_PENDING ))' in zone A, every ${CRON_STEP}th below
	# capacity (0 tokens, refill_pending) and the others full (capacity,
	# refill_pending NULL, as a call or a refill leaves a full bucket); zone B
	# holds the keys below capacity only, each row right after A's row of the
	# same key, so that A's and B's refills update rows of the same pages.
	rl_log "pg_cron refill mode: refill of $CRON_PENDING buckets, with and without $CRON_FULL full ones, x $BENCH_REPS reps"
	{
		echo "SET client_min_messages = warning;"
		echo "INSERT INTO ratelimit.state (key, zone_id, part, tokens, token_fraction, updated_at, counter, entries, refill_pending)
SELECT 'r' || i, z.zone_id, 0, CASE WHEN f.full THEN $CRON_CAP ELSE 0 END, 0, now(), 0, NULL,
       CASE WHEN f.full THEN NULL ELSE true END
  FROM generate_series(1, $(( CRON_FULL + CRON_PENDING ))) i
 CROSS JOIN LATERAL (SELECT i % $CRON_STEP <> 0 AS full) f
  JOIN ratelimit.zone z ON z.zone = 'bench_cron_a' OR (z.zone = 'bench_cron_b' AND NOT f.full)
 ORDER BY i, z.zone;"
		echo "VACUUM ANALYZE ratelimit.state;"
		echo "INSERT INTO bench.cron_setup
SELECT count(*) FILTER (WHERE s.zone_id = a.zone_id),
       count(*) FILTER (WHERE s.zone_id = a.zone_id AND s.refill_pending),
       count(*) FILTER (WHERE s.zone_id = b.zone_id),
       count(*), pg_relation_size('ratelimit.state') / current_setting('block_size')::int,
       count(*) FILTER (WHERE s.refill_pending), pg_relation_size('ratelimit.state_refill_idx')
  FROM ratelimit.state s, ratelimit.zone a, ratelimit.zone b
 WHERE a.zone = 'bench_cron_a' AND b.zone = 'bench_cron_b';"
		# Rep 0 is not recorded.  Each run refills exactly the buckets below
		# capacity (checked: the count returned).
		for rep in $(seq 0 "$BENCH_REPS"); do
			for v in A B C; do
				case $v in
					A) sql="SELECT rl_cron_refill('bench_cron_a')" ;;
					B) sql="SELECT rl_cron_refill('bench_cron_b')" ;;
					C) sql="SELECT bench.cron_refill_seqscan('bench_cron_a')" ;;
				esac
				echo "VACUUM ratelimit.state;"
				echo "CALL bench.measure('cron_refill', '$v', $rep, NULL, $CRON_PENDING, \$q\$$sql\$q\$);"
			done
		done
		echo "VACUUM ratelimit.state;"
	} >"$OUT/cron_refill.sql"
	psql_q -f "$OUT/cron_refill.sql" >"$OUT/cron_refill.log"

	# The plan of each run's UPDATE (auto_explain), in a session of its
	# own: the sixth run, once PL/pgSQL may have moved to a generic plan.
	for v in A B C; do
		case $v in
			A) sql="SELECT rl_cron_refill('bench_cron_a')" ;;
			B) sql="SELECT rl_cron_refill('bench_cron_b')" ;;
			C) sql="SELECT bench.cron_refill_seqscan('bench_cron_a')" ;;
		esac
		psql_q >"$OUT/cron_plan-$v.log" 2>&1 <<SQL
$(for _ in 1 2 3 4 5; do echo "$sql;"; done)
LOAD 'auto_explain';
SET auto_explain.log_min_duration = 0;
SET auto_explain.log_nested_statements = on;
SET auto_explain.log_analyze = on;
SET auto_explain.log_buffers = on;
SET auto_explain.log_timing = off;
SET auto_explain.log_level = notice;
SET client_min_messages = notice;
$sql;
SQL
		# The UPDATE's block: its scan node and the Update node's buffers.
		scan=$(awk '/Query Text: UPDATE ratelimit.state/ { u = 1; next } u && /Scan/ { print; exit }' "$OUT/cron_plan-$v.log" \
			| sed -e 's/^ *//' -e 's/^->  *//' -e 's/  *(cost=[^)]*)//')
		buffers=$(awk '/Query Text: UPDATE ratelimit.state/ { u = 1; next } u && /Buffers:/ { print; exit }' "$OUT/cron_plan-$v.log" \
			| sed -e 's/^ *Buffers: *//')
		[ -n "$scan" ] || { cat "$OUT/cron_plan-$v.log" >&2; rl_die "pg_cron refill mode: no plan found for $v"; }
		psql_q -v variant="$v" -v scan="$scan" -v buffers="$buffers" <<'SQL'
INSERT INTO bench.cron_plan VALUES (:'variant', :'scan', NULLIF(:'buffers', ''));
SQL
	done
fi

# ------------------------------------------------------------ row trigger --

# Section 9 (issue 6): rl_limit_trigger on a bulk INSERT ... SELECT whose
# rows all carry one key, at two sizes, against the same INSERT into a twin
# table without the trigger.  The zone never refuses (10^9 a second), so
# every row is a call that takes a token; linear time means the same time
# per row at both sizes.  The rows are deleted (TRUNCATE) after each run,
# outside the timing.
TRIGGER_SIZES=(10000 100000)
if [ "$BENCH_TRIGGER" = 1 ]; then
	rl_log "row trigger: INSERT ... SELECT of ${TRIGGER_SIZES[*]} rows for one key, with and without rl_limit_trigger"
	psql_q <<SQL
SET client_min_messages = warning;
SELECT rl_zone_set('bench_trigger', 'token_bucket', 1000000000, '1 second');
CREATE TABLE bench.trigger_rows (user_id int NOT NULL, body text NOT NULL);
CREATE TABLE bench.plain_rows (LIKE bench.trigger_rows);
CREATE TRIGGER trigger_rows_limit BEFORE INSERT ON bench.trigger_rows
    FOR EACH ROW EXECUTE FUNCTION rl_limit_trigger('bench_trigger', 'user_id');
SQL
	{
		echo "SET client_min_messages = warning;"
		for rep in $(seq 0 "$BENCH_REPS"); do
			for n in "${TRIGGER_SIZES[@]}"; do
				for t in trigger plain; do
					echo "CALL bench.measure('trigger', '$t:$n', $rep, 'direct', $n, \$q\$WITH i AS (INSERT INTO bench.${t}_rows SELECT 1, 'comment' FROM generate_series(1, $n) RETURNING 1) SELECT count(*) FROM i\$q\$);"
					echo "TRUNCATE bench.${t}_rows;"
				done
			done
		done
	} >"$OUT/trigger.sql"
	psql_q -f "$OUT/trigger.sql" >"$OUT/trigger.log"
fi

# ------------------------------------------- exact sliding window vs log --

if [ "$BENCH_ZONES" = 1 ]; then
	# Each measured key holds prefill = 0.9 x limit admissions, 100 ms apart,
	# ending about 5 minutes before the measurements and expiring 40 minutes
	# after the pre-fill: the window is 90 % full and nothing expires while
	# measuring.  Ours is pre-filled through rl_sliding_window itself (one
	# call per admission, the clock set by ratelimit.now_override), the log
	# table by INSERT ... SELECT of the same times.  A key takes a call in
	# at most (limit - prefill) repetitions, so that every measured call is
	# admitted (checked: only admitted calls are counted); at small limits
	# the repetitions take several key sets in turn.
	#
	# Every limit is measured over the same number of keys per statement, so
	# that the fixed cost of a statement (planning, commit) weighs the same
	# on each call at every limit: as many keys as BENCH_SW_ROWS pre-filled
	# admissions allow at the largest limit.
	sw_prefill() { echo $(( $1 * 9 / 10 )); }
	sw_sets() { # ceil((BENCH_REPS + 1) / (limit - prefill))
		local h=$(( $1 - $(sw_prefill "$1") ))
		echo $(( (BENCH_REPS + h) / h ))
	}
	l=${SW_LIMITS[-1]}
	k=$(( BENCH_SW_ROWS / ($(sw_sets "$l") * $(sw_prefill "$l")) ))
	(( k <= SW_KEYS_MAX )) || k=$SW_KEYS_MAX
	(( k >= 1 )) || k=1
	SW_BASE=$(psql_at -c "SELECT now() - interval '20 minutes'")
	{
		echo "SET client_min_messages = warning;"
		echo "SET ratelimit.table_access = direct;"
		for l in "${SW_LIMITS[@]}"; do
			p=$(sw_prefill "$l")
			sets=$(sw_sets "$l")
			echo "INSERT INTO bench.sw_setup VALUES ($l, $p, $k, $sets);"
			# Ours: about 100k admissions per statement (rep 0 of
			# bench.measure: the count is checked, not recorded).
			chunk=$(( 100000 / p )); (( chunk >= 1 )) || chunk=1
			for ((lo = 1; lo <= sets * k; lo += chunk)); do
				hi=$(( lo + chunk - 1 )); (( hi <= sets * k )) || hi=$(( sets * k ))
				sql="SELECT count((rl_sliding_window('sw_$l', key, 1)).allowed OR NULL) FROM (
    SELECT 'w$l-' || i AS key,
           set_config('ratelimit.now_override', (timestamptz '$SW_BASE' + j * interval '$SW_SPACING')::text, false) AS t
      FROM generate_series($lo, $hi) i, generate_series(0, $(( p - 1 ))) j OFFSET 0) s
 WHERE t IS NOT NULL"
				echo "CALL bench.measure('prefill', 'sw_$l', 0, NULL, $(( (hi - lo + 1) * p )), \$q\$$sql\$q\$);"
			done
			echo "RESET ratelimit.now_override;"
			echo "INSERT INTO bench.log_window (key, at)
SELECT 'w$l-' || i, timestamptz '$SW_BASE' + j * interval '$SW_SPACING'
  FROM generate_series(1, $(( sets * k ))) i, generate_series(0, $(( p - 1 ))) j;"
		done
		echo "VACUUM ANALYZE ratelimit.state, bench.log_window;"
		for rep in $(seq 0 "$BENCH_REPS"); do
			# The statement without any call, for its fixed cost.
			empty="SELECT count(i) FROM generate_series(1, $k) i"
			echo "CALL bench.measure('sw', 'empty:0', $rep, NULL, $k, \$q\$$empty\$q\$);"
			for l in "${SW_LIMITS[@]}"; do
				sets=$(sw_sets "$l")
				lo=$(( (rep % sets) * k + 1 )); hi=$(( lo + k - 1 ))
				ours="SELECT count((rl_sliding_window('sw_$l', 'w$l-' || i, 1)).allowed OR NULL) FROM generate_series($lo, $hi) i"
				log="SELECT count(bench.log_window('w$l-' || i, $l, interval '$SW_PERIOD', 1) OR NULL) FROM generate_series($lo, $hi) i"
				echo "CALL bench.measure('sw', 'ours:$l', $rep, 'direct', $k, \$q\$$ours\$q\$);"
				echo "CALL bench.measure('sw', 'log:$l', $rep, NULL, $k, \$q\$$log\$q\$);"
			done
			echo "VACUUM ratelimit.state, bench.log_window;"
		done
		# No pre-filled admission left the window before the last call.
		echo "DO \$\$ BEGIN IF clock_timestamp() >= timestamptz '$SW_BASE' + interval '$SW_PERIOD' THEN
    RAISE EXCEPTION 'section 5 took too long: pre-filled admissions expired'; END IF; END \$\$;"
	} >"$OUT/sliding.sql"
	rl_log "exact sliding window vs log table: limits ${SW_LIMITS[*]}, pre-fill, then $BENCH_REPS reps"
	psql_q -f "$OUT/sliding.sql" >"$OUT/sliding.log"
fi

# ------------------------------------------------------ state bytes/key --

if [ "$BENCH_ZONES" = 1 ]; then
	# Measured in ratelimit.state itself, emptied (TRUNCATE) before each
	# case, so that it holds only the keys measured; then VACUUM FULL
	# (heap rewritten at the table's fillfactor 50, index rebuilt).  Heap
	# tuple bytes: sum(pg_column_size(t.*)) over the rows (24-byte header and
	# data; not the 4-byte line pointer).  On disk: main fork + index.
	size_row() { # WHAT VARIANT LIM TABLE ENTRIES
		echo "INSERT INTO bench.sizes
SELECT '$1', '$2', $3, count(DISTINCT key), count(*), sum(pg_column_size(t.*)),
       sum(octet_length($5)), pg_relation_size('$4'), pg_indexes_size('$4')
  FROM $4 t;"
	}
	SIZE_BASE=$(psql_at -c "SELECT now() - interval '4 hours'")
	{
		echo "SET client_min_messages = warning;"
		echo "SET ratelimit.table_access = direct;"
		# Every algorithm: $KEYS keys after one call each.
		for a in "${ZONE_ALGOS[@]}"; do
			echo "TRUNCATE ratelimit.state;"
			sql="SELECT count((rl_limit('bench_$a', 'k' || i, 1)).allowed OR NULL) FROM generate_series(1, $KEYS) i"
			echo "CALL bench.measure('size', '$a', 0, NULL, $KEYS, \$q\$$sql\$q\$);"
			echo "VACUUM FULL ratelimit.state;"
			size_row algorithm "$a" NULL ratelimit.state entries
		done
		# The exact sliding window with a full window: limit admissions one
		# second or one millisecond apart (then one more call, refused).
		echo "CREATE UNLOGGED TABLE bench.log_size (LIKE bench.log_window);"
		echo "CREATE INDEX ON bench.log_size (key, at);"
		for l in "${SW_LIMITS[@]}"; do
			k=$(( 200000 / l )); (( k <= SW_KEYS_MAX )) || k=$SW_KEYS_MAX
			echo "SELECT rl_zone_set('size_sw_$l', 'sliding_window', $l, interval '$SIZE_PERIOD');"
			for spacing in '1 second' '1 millisecond'; do
				echo "TRUNCATE ratelimit.state;"
				fill="SELECT count((rl_sliding_window('size_sw_$l', key, 1)).allowed OR NULL) FROM (
    SELECT 'c$l-' || i AS key,
           set_config('ratelimit.now_override', (timestamptz '$SIZE_BASE' + j * interval '$spacing')::text, false) AS t
      FROM generate_series(1, $k) i, generate_series(0, $(( l - 1 ))) j OFFSET 0) s
 WHERE t IS NOT NULL"
				echo "CALL bench.measure('size', 'sw_$l', 0, NULL, $(( k * l )), \$q\$$fill\$q\$);"
				echo "SELECT set_config('ratelimit.now_override', (timestamptz '$SIZE_BASE' + $l * interval '$spacing')::text, false);"
				full="SELECT count((rl_sliding_window('size_sw_$l', 'c$l-' || i, 1)).allowed OR NULL) FROM generate_series(1, $k) i"
				echo "CALL bench.measure('size', 'sw_$l full', 0, NULL, 0, \$q\$$full\$q\$);"
				echo "RESET ratelimit.now_override;"
				echo "VACUUM FULL ratelimit.state;"
				size_row sliding_window "$spacing" "$l" ratelimit.state entries
			done
			# The log table holding the same admissions (its size does not
			# depend on their spacing).
			echo "TRUNCATE bench.log_size;"
			echo "INSERT INTO bench.log_size (key, at)
SELECT 'c$l-' || i, timestamptz '$SIZE_BASE' + j * interval '1 second'
  FROM generate_series(1, $k) i, generate_series(0, $(( l - 1 ))) j;"
			echo "VACUUM FULL bench.log_size;"
			size_row log_table '' "$l" bench.log_size NULL::bytea
		done
	} >"$OUT/sizes.sql"
	rl_log "state bytes per key: ${#ZONE_ALGOS[@]} algorithms, sliding window at limits ${SW_LIMITS[*]}"
	psql_q -f "$OUT/sizes.sql" >"$OUT/sizes.log"
fi

# ------------------------------------------------- shmem store: memory --

# The shared memory the shmem store asked for, per key of shmem_max_keys.
# Then, after every other measurement (it evicts the measured keys): keys
# that do not recover for an hour (zone bench_fill, 1 per hour), offered one
# by one, shmem_max_keys of them, with shmem_full_policy = deny, so that an
# admitted call is a kept key: how many were kept when a new key first found
# its 8-entry set full, and how many in all.
rl_log "shmem store: shared memory, and keys kept of $BENCH_SHMEM_KEYS offered"
psql_q <<SQL
SET client_min_messages = warning;
SELECT rl_zone_set('bench_fill', 'token_bucket', 1, interval '1 hour', store => 'shmem');
SET ratelimit.shmem_full_policy = deny;
INSERT INTO bench.shmem
SELECT current_setting('ratelimit.shmem_max_keys')::bigint, a.size, a.allocated_size,
       f.first_full, f.offered, f.full_calls
  FROM (SELECT sum(size)::bigint AS size, sum(allocated_size)::bigint AS allocated_size
          FROM pg_shmem_allocations WHERE name LIKE 'ratelimit%') a,
       (SELECT coalesce(min(i) FILTER (WHERE NOT allowed) - 1, count(*)) AS first_full,
               count(*) AS offered, count(*) FILTER (WHERE NOT allowed) AS full_calls
          FROM (SELECT i, (rl_limit('bench_fill', 'f' || i, 1)).allowed
                  FROM generate_series(1, current_setting('ratelimit.shmem_max_keys')::bigint) i
                OFFSET 0) s) f;
RESET ratelimit.shmem_full_policy;
DO \$\$
DECLARE
    r record;
BEGIN
    SELECT s.full_calls, c.full, c.refused INTO r
      FROM bench.shmem s, rl_counters c WHERE c.zone = 'bench_fill';
    IF r.full IS DISTINCT FROM r.full_calls OR r.refused IS DISTINCT FROM r.full_calls THEN
        RAISE EXCEPTION 'bench_fill: % calls refused, rl_counters says refused %, full %',
            r.full_calls, r.refused, r.full;
    END IF;
END
\$\$;
SQL

# ----------------------------------------------------------------- report --

rl_log "writing $RESULTS"
PG_VERSION=$(psql_at -c "SELECT version()")

psql_at -v seconds="$PGB_RUN_SECONDS" -v rounds="$PGB_ROUNDS" -v keys="$KEYS" \
	-v zones="$BENCH_ZONES" -v zone_rate="$ZONE_RATE" -v zone_period="$ZONE_PERIOD" \
	-v sw_period="$SW_PERIOD" -v sw_spacing="$SW_SPACING" -v size_period="$SIZE_PERIOD" \
	-v cron="$BENCH_CRON" -v rate="$RATE" -v window="$WINDOW" -v cron_cap="${CRON_CAP:-0}" \
	-v trigger="$BENCH_TRIGGER" \
	>"$OUT/report.md" <<'SQL'
CREATE TEMP VIEW label(variant, label) AS VALUES
    ('select1', '`SELECT 1`'),
    ('direct', '`rl_token_bucket`, table store, table_access=direct'),
    ('spi', '`rl_token_bucket`, table store, table_access=spi'),
    ('shmem', '`rl_token_bucket`, shmem store'),
    ('shmem_i', '`rl_token_bucket`, shmem store, keys `i::text`'),
    ('plpgsql', 'PL/pgSQL bucket (UPDATE … RETURNING, then INSERT)'),
    ('upsert', '`INSERT … ON CONFLICT DO UPDATE` bucket'),
    ('hashtext', '`hashtext(i::text)` (no bucket)'),
    ('hashtext_k', '`hashtext(''k'' || …)` (no bucket)');
CREATE TEMP VIEW ord(variant, n) AS VALUES
    ('select1', 0), ('hashtext', 1), ('hashtext_k', 2), ('direct', 3), ('spi', 4), ('shmem', 5),
    ('shmem_i', 6), ('plpgsql', 7), ('upsert', 8);

CREATE TEMP VIEW inb AS
SELECT variant,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY secs / calls) * 1e6 AS us,
       min(secs / calls) * 1e6 AS us_min,
       max(secs / calls) * 1e6 AS us_max,
       count(*) AS reps
  FROM bench.timings WHERE phase = 'inbackend' GROUP BY variant;

-- All rounds pooled: transactions over time spent (without connecting).
CREATE TEMP VIEW pgb AS
SELECT clients, variant, sum(xacts) / sum(xacts / tps) AS tps,
       min(tps) AS tps_min, max(tps) AS tps_max, count(*) AS runs
  FROM bench.pgbench GROUP BY clients, variant;

CREATE TEMP VIEW hot AS
SELECT h.variant, h.s AS hot_s, s.s AS spread_s, h.s / s.s AS ratio
  FROM (SELECT variant, percentile_cont(0.5) WITHIN GROUP (ORDER BY secs) AS s
          FROM bench.timings WHERE phase = 'hot' GROUP BY variant) h
  JOIN (SELECT variant, percentile_cont(0.5) WITHIN GROUP (ORDER BY secs) AS s
          FROM bench.timings WHERE phase = 'spread' GROUP BY variant) s USING (variant);

\echo '## 1. In-backend calls/s'
\echo ''
SELECT format('`SELECT count(f(''k'' || i, %s, %s, 1)) FROM generate_series(1, %s) i` over keys that already exist (created by a warm-up, on each store), each key once per statement; every call is admitted and writes (no call refused, and the shmem store neither evicted a key nor ran out of room: checked with `rl_counters` over sections 1 to 4). Both stores run the same statement; the store is `ratelimit.default_store` (`table` or `shmem`, set before each statement). The two hashtext loops are the same statement with `hashtext(i::text)` (SPEC §5''s trivial loop) or `hashtext(''k'' || i)` (the keys the calls build) instead of a bucket. The shmem store also runs the statement over the keys `i::text` (`rl_token_bucket(i::text, …)`, keys created by the warm-up too): the SPEC loop''s own keys, built by the same expression. Timed inside the server (clock_timestamp() around EXECUTE + COMMIT); median of %s interleaved repetitions (after one unrecorded warm-up round). The ratio columns are the row''s calls/s over the named variant''s (PL/pgSQL and upsert: buckets only).',
              1000000, 60, max(calls), max(reps))
  FROM bench.timings, inb WHERE phase = 'inbackend';
\echo ''
\echo '| variant | µs/call (median) | min–max µs/call | calls/s | × PL/pgSQL | × upsert | × `hashtext(i::text)` loop |'
\echo '| --- | ---: | ---: | ---: | ---: | ---: | ---: |'
SELECT format('| %s | %s | %s–%s | %s | %s | %s | %s |', l.label,
              to_char(i.us, 'FM990.00'), to_char(i.us_min, 'FM990.00'), to_char(i.us_max, 'FM990.00'),
              to_char(1e6 / i.us, 'FM9999999990'),
              CASE WHEN i.variant LIKE 'hashtext%' THEN '—' ELSE to_char(p.us / i.us, 'FM990.00') END,
              CASE WHEN i.variant LIKE 'hashtext%' THEN '—' ELSE to_char(u.us / i.us, 'FM990.00') END,
              to_char(h.us / i.us, 'FM990.00'))
  FROM inb i JOIN label l USING (variant) JOIN ord o USING (variant)
 CROSS JOIN (SELECT us FROM inb WHERE variant = 'plpgsql') p
 CROSS JOIN (SELECT us FROM inb WHERE variant = 'upsert') u
 CROSS JOIN (SELECT us FROM inb WHERE variant = 'hashtext') h
 ORDER BY o.n;
\echo ''

\echo '## 2. pgbench -M prepared -n'
\echo ''
SELECT format('`\set k random(1, 10000)`, one call per transaction; `-j` = clients. Each variant and client count runs %s × `-T %s`, interleaved with the others (round 1 of every variant, then round 2 …); tps = all transactions of those runs / their time (without connecting), min–max over the runs. table_access chosen with `PGOPTIONS=''-c ratelimit.table_access=…''`, the shmem store with `PGOPTIONS=''-c ratelimit.default_store=shmem''` (same script as the table store; its keys were created in section 1 and are kept across statements; no call refused, checked); the upsert statement is sent as is (not wrapped in a function). `hashtext(''k'' || …)` runs the buckets'' script with `SELECT hashtext(''k'' || :k)` instead of a bucket: what a prepared statement with a parameter and a function call costs here, against `SELECT 1`.',
              :'rounds', :'seconds');
\echo ''
\echo '| variant | clients | tps | min–max tps | × upsert | × `SELECT 1` |'
\echo '| --- | ---: | ---: | ---: | ---: | ---: |'
SELECT format('| %s | %s | %s | %s–%s | %s | %s |', l.label, b.clients, to_char(b.tps, 'FM9999999990'),
              to_char(b.tps_min, 'FM9999999990'), to_char(b.tps_max, 'FM9999999990'),
              to_char(b.tps / u.tps, 'FM990.00'), to_char(b.tps / s.tps, 'FM990.00'))
  FROM pgb b JOIN label l USING (variant) JOIN ord o USING (variant)
  JOIN pgb u ON u.clients = b.clients AND u.variant = 'upsert'
  JOIN pgb s ON s.clients = b.clients AND s.variant = 'select1'
 ORDER BY b.clients, o.n;
\echo ''

\echo '## 3. Hot key'
\echo ''
SELECT format('100k calls in one statement (commit included), on ONE key (`''hot''`) vs over 10k keys (`''k'' || (i %% 10000)`, each key 10 times), every call admitted (checked); median of %s repetitions, the variants interleaved.',
              count(*) / (2 * count(DISTINCT variant)))
  FROM bench.timings WHERE phase IN ('hot', 'spread');
\echo ''
\echo '| variant | one key, s | 10k keys, s | one key / 10k keys |'
\echo '| --- | ---: | ---: | ---: |'
SELECT format('| %s | %s | %s | %s |', l.label, to_char(h.hot_s, 'FM990.000'),
              to_char(h.spread_s, 'FM990.000'), to_char(h.ratio, 'FM990.00'))
  FROM hot h JOIN label l USING (variant) JOIN ord o USING (variant) ORDER BY o.n;
\echo ''

\if :zones
CREATE TEMP VIEW zon AS
SELECT variant,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY secs / calls) * 1e6 AS us,
       min(secs / calls) * 1e6 AS us_min,
       max(secs / calls) * 1e6 AS us_max,
       count(*) AS reps
  FROM bench.timings WHERE phase = 'zones' GROUP BY variant;
CREATE TEMP VIEW zon_shmem AS
SELECT variant,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY secs / calls) * 1e6 AS us,
       min(secs / calls) * 1e6 AS us_min,
       max(secs / calls) * 1e6 AS us_max,
       count(*) AS reps
  FROM bench.timings WHERE phase = 'zones_shmem' GROUP BY variant;
CREATE TEMP VIEW zord(variant, n) AS VALUES
    ('token_bucket', 1), ('gcra', 2), ('fixed_window', 3), ('sliding_window_counter', 4), ('sliding_window', 5);

-- Section 5: the fill of a measured key is prefill + the calls it took in
-- earlier repetitions (warm-up included).
CREATE TEMP VIEW sw AS
SELECT split_part(t.variant, ':', 1) AS who, split_part(t.variant, ':', 2)::bigint AS lim,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY secs / calls) * 1e6 AS us,
       min(secs / calls) * 1e6 AS us_min,
       max(secs / calls) * 1e6 AS us_max,
       count(*) AS reps
  FROM bench.timings t WHERE phase = 'sw' GROUP BY t.variant;
CREATE TEMP VIEW swr AS
SELECT o.lim, u.keys, u.prefill, u.prefill + (count(*) + 1 + u.sets - 1) / u.sets - 1 AS fill_max,
       o.us AS ours_us, o.us_min AS ours_min, o.us_max AS ours_max,
       l.us AS log_us, l.us_min AS log_min, l.us_max AS log_max, o.reps
  FROM sw o JOIN sw l ON l.lim = o.lim AND l.who = 'log'
  JOIN bench.sw_setup u ON u.lim = o.lim
  JOIN bench.timings t ON t.phase = 'sw' AND t.variant = 'ours:' || o.lim
 WHERE o.who = 'ours'
 GROUP BY o.lim, u.keys, u.prefill, u.sets, o.us, o.us_min, o.us_max, l.us, l.us_min, l.us_max, o.reps;

\echo '## 4. Zones: `rl_limit` in-backend calls/s per algorithm'
\echo ''
SELECT format('`SELECT count((rl_limit(''bench_<algorithm>'', ''k'' || i, 1)).allowed OR NULL) FROM generate_series(1, %s) i` over keys that already exist (created by a warm-up), each key once per statement; each zone allows %s calls per %s (`rl_zone_set(''bench_<algorithm>'', ''<algorithm>'', %s, ''%s'')`), so every call is admitted and writes; only admitted calls are counted and the count is checked. The same zones on the shmem store (`rl_zone_set(''bench_shmem_<algorithm>'', …, store => ''shmem'')`; not `sliding_window`, which needs the table store) run the same statement over the same keys. Measured in the same interleaved repetitions as section 1 (each repetition: the variants of section 1, then the five table-store zones, then the four shmem zones, then VACUUM), table_access=direct; median of %s repetitions. The × columns are the µs/call of `rl_token_bucket` (table store, direct) and of the PL/pgSQL bucket in section 1 over the zone''s (above 1: the zone is faster); the last one, table store over shmem store.',
              :'keys', :'zone_rate', :'zone_period', :'zone_rate', :'zone_period', max(reps))
  FROM zon;
\echo ''
\echo '| algorithm | table: µs/call (median) | min–max | calls/s | × `rl_token_bucket` (direct) | × PL/pgSQL bucket | shmem: µs/call (median) | min–max | calls/s | × `rl_token_bucket` (shmem) | table / shmem |'
\echo '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |'
SELECT format('| `%s` | %s | %s–%s | %s | %s | %s | %s | %s | %s | %s | %s |', z.variant,
              to_char(z.us, 'FM990.00'), to_char(z.us_min, 'FM990.00'), to_char(z.us_max, 'FM990.00'),
              to_char(1e6 / z.us, 'FM9999999990'),
              to_char(d.us / z.us, 'FM990.00'), to_char(p.us / z.us, 'FM990.00'),
              coalesce(to_char(m.us, 'FM990.00'), '—'),
              coalesce(to_char(m.us_min, 'FM990.00') || '–' || to_char(m.us_max, 'FM990.00'), '—'),
              coalesce(to_char(1e6 / m.us, 'FM9999999990'), '—'),
              coalesce(to_char(s.us / m.us, 'FM990.00'), '—'),
              coalesce(to_char(z.us / m.us, 'FM990.00'), '—'))
  FROM zon z JOIN zord o USING (variant)
  LEFT JOIN zon_shmem m USING (variant)
 CROSS JOIN (SELECT us FROM inb WHERE variant = 'direct') d
 CROSS JOIN (SELECT us FROM inb WHERE variant = 'plpgsql') p
 CROSS JOIN (SELECT us FROM inb WHERE variant = 'shmem') s
 ORDER BY o.n;
\echo ''

\echo '## 5. Exact sliding window vs a log table'
\echo ''
SELECT format('`rl_sliding_window(''sw_<limit>'', key, 1)` on zones of `<limit>` per %s, against `bench.log_window(key, limit, period, 1)`: a PL/pgSQL function over an UNLOGGED table (key text COLLATE "C", at timestamptz) with an index on (key, at), one row per admitted unit of cost; it takes an advisory lock on the key (so that count-then-insert is atomic under READ COMMITTED, as `rl_sliding_window` is), deletes the key''s expired rows, counts its rows in the trailing period (an index-only scan) and inserts the request if the count plus the cost stays within the limit. Both pass the same admission check before the run (limit 3 per second on the real clock). Every measured key was pre-filled with 0.9 × limit admissions %s apart within the period (ours: one `rl_sliding_window` call per admission, at times set by `ratelimit.now_override`; the log table: `INSERT … SELECT` of the same times) and vacuumed; nothing expires during the measurement. Each statement calls once per key, over the same number of keys at every limit, `SELECT count((f(…)).allowed OR NULL) FROM generate_series(…) i`, on the real clock; every call is admitted (checked), so a key holds between 0.9 × limit and the column "held" admissions when measured. Ours and the log table alternate, limit after limit, in each repetition (VACUUM after each); median of %s repetitions.',
              :'sw_period', :'sw_spacing', max(reps))
  FROM swr;
\echo ''
\echo '| limit | keys per statement | held | ours µs/call (median) | ours min–max | ours calls/s | log table µs/call (median) | log min–max | log calls/s | log / ours |'
\echo '| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |'
SELECT format('| %s | %s | %s–%s | %s | %s–%s | %s | %s | %s–%s | %s | %s |',
              to_char(lim, 'FM999G999'), keys, prefill, fill_max,
              to_char(ours_us, 'FM9990.00'), to_char(ours_min, 'FM9990.00'), to_char(ours_max, 'FM9990.00'),
              to_char(1e6 / ours_us, 'FM9999999990'),
              to_char(log_us, 'FM9990.00'), to_char(log_min, 'FM9990.00'), to_char(log_max, 'FM9990.00'),
              to_char(1e6 / log_us, 'FM9999999990'), to_char(log_us / ours_us, 'FM99990.0'))
  FROM swr ORDER BY lim;
\echo ''
SELECT format('As the limit grows from 10 to 10,000 (0.9 × limit admissions held): ours %s µs → %s µs per call, **%s×** (from 1,000 to 10,000: %s×); the log table %s µs → %s µs, %s× (from 1,000 to 10,000: %s×).',
              to_char(a.ours_us, 'FM9990.00'), to_char(b.ours_us, 'FM9990.00'), to_char(b.ours_us / a.ours_us, 'FM990.00'),
              to_char(b.ours_us / m.ours_us, 'FM990.00'),
              to_char(a.log_us, 'FM9990.00'), to_char(b.log_us, 'FM9990.00'), to_char(b.log_us / a.log_us, 'FM99990.0'),
              to_char(b.log_us / m.log_us, 'FM99990.0'))
  FROM swr a, swr m, swr b WHERE a.lim = 10 AND m.lim = 1000 AND b.lim = 10000;
\echo ''
SELECT format('The same statement without any call (`SELECT count(i) FROM generate_series(…) i`, through the same timing procedure, commit included) takes %s µs per key (median): a fixed cost of the statement, included in both columns above.',
              to_char(us, 'FM9990.00'))
  FROM sw WHERE who = 'empty';
\echo ''

\echo '## 6. State bytes per key'
\echo ''
\echo 'Measured in `ratelimit.state` itself, emptied by `TRUNCATE` before each case so that it holds only the keys measured, after `VACUUM FULL` (heap rewritten at the table''s fillfactor 50, primary-key index rebuilt at its default fillfactor 90). *Heap tuple bytes*: `sum(pg_column_size(t.*))` over the key''s rows, i.e. the 24-byte tuple header plus the data, without the 4-byte line pointer and without the fillfactor slack. *On disk*: `pg_relation_size` (main fork) + `pg_indexes_size` of the table, divided by the keys: line pointers, page headers, the free half of every heap page (fillfactor 50) and the index included. No value is TOASTed (the largest, the sliding window''s head row, is bounded by 2 × 256 bytes of log + a small header).'
\echo ''
SELECT format('Every algorithm: %s keys (`''k1''` … `''k%s''`) after one call each, in the zones of section 4.', :'keys', :'keys');
\echo ''
\echo '| algorithm | rows/key | heap tuple bytes/key | on disk bytes/key | of which index |'
\echo '| --- | ---: | ---: | ---: | ---: |'
SELECT format('| `%s` | %s | %s | %s | %s |', s.variant,
              to_char(s.rows::numeric / s.keys, 'FM990.00'),
              to_char(s.tuple_bytes::numeric / s.keys, 'FM99990.0'),
              to_char((s.heap_bytes + s.index_bytes)::numeric / s.keys, 'FM99990.0'),
              to_char(s.index_bytes::numeric / s.keys, 'FM99990.0'))
  FROM bench.sizes s JOIN zord o ON o.variant = s.variant
 WHERE s.what = 'algorithm' ORDER BY o.n;
\echo ''
SELECT format('Exact sliding window with a full window: zones of `<limit>` per %s, each key (`''c<limit>-<n>''`) given exactly `<limit>` admissions one second or one millisecond apart (times set by `ratelimit.now_override`), all admitted and still in the window (a further call is refused; checked). Log bytes/key: the varint-encoded buffers and chunks (`entries`, head row and parts 1..). The raw log is 8 bytes × limit (one timestamptz per admission, nothing else); the log table (same key, one row per admission, index on (key, at), after VACUUM FULL, default fillfactor) is measured the same way below.',
              :'size_period');
\echo ''
\echo '| limit | apart | keys | rows/key | log bytes/key (`entries`) | heap tuple bytes/key | heap tuple bytes / (8 B × limit) | on disk bytes/key | on disk / (8 B × limit) |'
\echo '| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |'
SELECT format('| %s | %s | %s | %s | %s | %s | %s | %s | %s |',
              to_char(lim, 'FM999G999'), variant, keys,
              to_char(rows::numeric / keys, 'FM99990.00'),
              to_char(entries_bytes::numeric / keys, 'FM9999990'),
              to_char(tuple_bytes::numeric / keys, 'FM9999990'),
              to_char(tuple_bytes::numeric / keys / (8 * lim), 'FM990.00'),
              to_char((heap_bytes + index_bytes)::numeric / keys, 'FM9999990'),
              to_char((heap_bytes + index_bytes)::numeric / keys / (8 * lim), 'FM990.00'))
  FROM bench.sizes WHERE what = 'sliding_window' ORDER BY lim, variant DESC;
\echo ''
\echo 'The log table of section 5 holding the same admissions:'
\echo ''
\echo '| limit | keys | heap tuple bytes/key | on disk bytes/key | on disk / (8 B × limit) | on disk / ours (1 s apart) |'
\echo '| ---: | ---: | ---: | ---: | ---: | ---: |'
SELECT format('| %s | %s | %s | %s | %s | %s |',
              to_char(l.lim, 'FM999G999'), l.keys,
              to_char(l.tuple_bytes::numeric / l.keys, 'FM9999990'),
              to_char((l.heap_bytes + l.index_bytes)::numeric / l.keys, 'FM9999990'),
              to_char((l.heap_bytes + l.index_bytes)::numeric / l.keys / (8 * l.lim), 'FM990.00'),
              to_char(((l.heap_bytes + l.index_bytes)::numeric / l.keys)
                      / ((o.heap_bytes + o.index_bytes)::numeric / o.keys), 'FM990.0'))
  FROM bench.sizes l JOIN bench.sizes o ON o.what = 'sliding_window' AND o.lim = l.lim AND o.variant = '1 second'
 WHERE l.what = 'log_table' ORDER BY l.lim;
\echo ''
\endif

\echo '## 7. Shared memory of the shmem store'
\echo ''
SELECT format('`ratelimit.shmem_max_keys = %s` in this cluster (`BENCH_SHMEM_KEYS`; the default is 100000). *Shared memory*: `sum(size)` of `pg_shmem_allocations WHERE name LIKE ''ratelimit%%''` (%s bytes allocated with alignment), asked for at server start whatever the keys held; per key: divided by `shmem_max_keys` (it includes a part that does not grow with the keys, the per-zone counter slots). *Kept*: after every other measurement, keys of a shmem zone that do not recover for an hour (`token_bucket`, 1 per hour), `shmem_max_keys` of them (`''f1''` … `''f%s''`), offered one by one in one statement with `ratelimit.shmem_full_policy = deny`, so that an admitted call is a kept key (the measured keys, recovered by then, are evicted for them); a new key finds no room only when every entry of the store holds a key that has not recovered: a key whose set is full borrows an entry of another set (refusals checked against `rl_counters.full`).',
              max_keys, alloc_allocated, max_keys)
  FROM bench.shmem;
\echo ''
\echo '| shmem_max_keys | shared memory, bytes | bytes per key of shmem_max_keys | keys kept when a new key first found no room | keys kept of shmem_max_keys offered | bytes per kept key |'
\echo '| ---: | ---: | ---: | ---: | ---: | ---: |'
SELECT format('| %s | %s | %s | %s (%s %%) | %s (%s %%) | %s |',
              max_keys, alloc_size, to_char(alloc_size::numeric / max_keys, 'FM9990.0'),
              first_full, to_char(100.0 * first_full / max_keys, 'FM990.0'),
              offered - full_calls, to_char(100.0 * (offered - full_calls) / max_keys, 'FM990.0'),
              to_char(alloc_size::numeric / (offered - full_calls), 'FM9990.0'))
  FROM bench.shmem;
\echo ''

\if :cron
CREATE TEMP VIEW cron_label(variant, label, n) AS VALUES
    ('cron', '`rl_limit`, `token_bucket` zone, `refill => ''cron''`', 1),
    ('inline', '`rl_limit`, `token_bucket` zone, inline refill', 2),
    ('direct', '`rl_token_bucket`, table store, table_access=direct', 3);
CREATE TEMP VIEW cron_inb AS
SELECT variant,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY secs / calls) * 1e6 AS us,
       min(secs / calls) * 1e6 AS us_min,
       max(secs / calls) * 1e6 AS us_max,
       count(*) AS reps
  FROM bench.timings WHERE phase = 'cron_calls' GROUP BY variant;
CREATE TEMP VIEW cron_pgb AS
SELECT clients, variant, sum(xacts) / sum(xacts / tps) AS tps,
       min(tps) AS tps_min, max(tps) AS tps_max, count(*) AS runs
  FROM bench.cron_pgbench GROUP BY clients, variant;
CREATE TEMP VIEW cron_ref AS
SELECT variant,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY secs) * 1e3 AS ms,
       min(secs) * 1e3 AS ms_min,
       max(secs) * 1e3 AS ms_max,
       max(calls) AS refilled,
       count(*) AS reps
  FROM bench.timings WHERE phase = 'cron_refill' GROUP BY variant;

\echo '## 8. pg_cron refill mode'
\echo ''
\echo '### Calls'
\echo ''
SELECT format('`SELECT count((rl_limit(''bench_cron'', ''k'' || i, 1)).allowed OR NULL) FROM generate_series(1, %s) i` on a cron-refilled zone, `rl_zone_set(''bench_cron'', ''token_bucket'', %s, ''%s'', refill => ''cron'')`, against the same statement on the inline zone `bench_token_bucket` (`rl_zone_set(''bench_token_bucket'', ''token_bucket'', %s, ''%s'')`, section 4''s) and `SELECT count(rl_token_bucket(''k'' || i, %s, %s, 1)) FROM generate_series(1, %s) i` (table store, table_access=direct), over the keys `''k1''` … `''k%s''` (created by a warm-up in each), each key once per statement. The cron zone''s `refill_tick` is %s, set by `UPDATE ratelimit.zone` (what `rl_cron_enable` picks with the installed pg_cron %s); no pg_cron job is scheduled, so a call only takes tokens and nothing refills while measuring (every key holds far more tokens than the calls it gets: the capacity is the rate). Timed inside the server (clock_timestamp() around EXECUTE + COMMIT), table_access=direct; median of %s repetitions, the three interleaved (each repetition: cron zone, inline zone, `rl_token_bucket`, then VACUUM), after one unrecorded warm-up round. Every call is admitted: the `rl_limit` statements count admitted calls only (checked), and `rl_counters` shows no refused call of the three over the whole section, pgbench included. The × columns are the named variant''s µs/call over the row''s (above 1: the row is faster).',
              :'keys', :'zone_rate', :'zone_period', :'zone_rate', :'zone_period', :'rate', :'window', :'keys', :'keys',
              (SELECT refill_tick FROM ratelimit.zone WHERE zone = 'bench_cron'),
              coalesce((SELECT default_version FROM pg_available_extensions WHERE name = 'pg_cron'), '(none)'),
              max(reps))
  FROM cron_inb;
\echo ''
\echo '| variant | µs/call (median) | min–max µs/call | calls/s | × inline zone | × `rl_token_bucket` |'
\echo '| --- | ---: | ---: | ---: | ---: | ---: |'
SELECT format('| %s | %s | %s–%s | %s | %s | %s |', l.label,
              to_char(c.us, 'FM990.00'), to_char(c.us_min, 'FM990.00'), to_char(c.us_max, 'FM990.00'),
              to_char(1e6 / c.us, 'FM9999999990'),
              to_char(i.us / c.us, 'FM990.00'), to_char(d.us / c.us, 'FM990.00'))
  FROM cron_inb c JOIN cron_label l USING (variant)
 CROSS JOIN (SELECT us FROM cron_inb WHERE variant = 'inline') i
 CROSS JOIN (SELECT us FROM cron_inb WHERE variant = 'direct') d
 ORDER BY l.n;
\echo ''
SELECT format('pgbench -M prepared -n, `\set k random(1, 10000)` then `SELECT rl_limit(''bench_cron'', ''k'' || :k, 1);` (the inline zone: `''bench_token_bucket''`; `rl_token_bucket`: section 2''s script), one call per transaction, `-j` = clients, `PGOPTIONS=''-c ratelimit.table_access=direct''` for all three. Rounds of their own, after section 2''s: each variant and client count runs %s × `-T %s`, interleaved with the others (round 1 of every variant and client count, then round 2 …; VACUUM before each run); tps = all transactions of those runs / their time (without connecting), min–max over the runs. The × columns are the row''s tps over the named variant''s.',
              max(runs), :'seconds')
  FROM cron_pgb;
\echo ''
\echo '| variant | clients | tps | min–max tps | × inline zone | × `rl_token_bucket` |'
\echo '| --- | ---: | ---: | ---: | ---: | ---: |'
SELECT format('| %s | %s | %s | %s–%s | %s | %s |', l.label, b.clients, to_char(b.tps, 'FM9999999990'),
              to_char(b.tps_min, 'FM9999999990'), to_char(b.tps_max, 'FM9999999990'),
              to_char(b.tps / i.tps, 'FM990.00'), to_char(b.tps / d.tps, 'FM990.00'))
  FROM cron_pgb b JOIN cron_label l USING (variant)
  JOIN cron_pgb i ON i.clients = b.clients AND i.variant = 'inline'
  JOIN cron_pgb d ON d.clients = b.clients AND d.variant = 'direct'
 ORDER BY b.clients, l.n;
\echo ''
\echo '### One refill run'
\echo ''
SELECT format('Two zones `rl_zone_set(''bench_cron_a'' | ''bench_cron_b'', ''token_bucket'', 1, ''1 minute'', burst => %s, refill => ''cron'')`, their `refill_tick` set to 1 minute by `UPDATE ratelimit.zone` (no pg_cron job): a run adds rate × tick / period = 1 token to each bucket below capacity, so buckets that start at 0 tokens stay below capacity through every run, and every run refills the same %s buckets (checked: the count each run returns). Their state is written by one `INSERT INTO ratelimit.state … SELECT` (as superuser), key by key `''r1''` … `''r%s''`: zone A (`bench_cron_a`) holds all %s keys, %s full (tokens = capacity, `refill_pending` NULL, as a call or a refill leaves a full bucket: not in the partial index `state_refill_idx`) and one key in %s below capacity (0 tokens, `refill_pending` true); zone B (`bench_cron_b`) holds the same %s keys below capacity and nothing else, each row inserted right after A''s row of the same key, so that A''s and B''s refills update rows on the same heap pages; then VACUUM ANALYZE. At that point `ratelimit.state` holds %s rows in %s pages (every zone of the run so far), and the partial index %s entries (%s bytes; the cron zone of the calls above has its keys there too). Measured: (A) `SELECT rl_cron_refill(''bench_cron_a'')`, (B) `SELECT rl_cron_refill(''bench_cron_b'')`, and (C) `SELECT bench.cron_refill_seqscan(''bench_cron_a'')`: `rl_cron_refill`''s body (same zone lookup, same `UPDATE … SET`) with `WHERE s.zone_id = z.zone_id AND s.tokens < cap` instead of `… AND s.refill_pending`, and `SET enable_indexscan = off, enable_bitmapscan = off, enable_indexonlyscan = off` on the function: without the partial index the UPDATE has no index leading with zone_id (the primary key is (key, zone_id, part)) and reads the whole table. Timed inside the server (clock_timestamp() around the SELECT + COMMIT, the procedure of section 1); VACUUM ratelimit.state before each run; A, B and C in turn in each repetition; median of %s repetitions after one unrecorded round. Plans: the UPDATE''s scan node and buffers, by auto_explain (`log_analyze`, `log_buffers`, `log_nested_statements`) on the sixth run in a session of its own, after the repetitions.',
              :'cron_cap', c.zone_b_keys, c.zone_a_keys, c.zone_a_keys, c.zone_a_keys - c.zone_a_pending,
              c.zone_a_keys / c.zone_a_pending, c.zone_b_keys, c.state_rows, c.state_pages, c.idx_entries, c.idx_bytes,
              (SELECT max(reps) FROM cron_ref))
  FROM bench.cron_setup c;
\echo ''
\echo '| run | zone | keys in the zone | refilled per run | ms (median) | min–max ms | µs per refilled bucket | × B | the UPDATE''s scan (auto_explain) | its buffers |'
\echo '| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |'
SELECT format('| %s | `%s` | %s | %s | %s | %s–%s | %s | %s | %s | %s |',
              CASE r.variant WHEN 'A' THEN 'A: `rl_cron_refill`'
                             WHEN 'B' THEN 'B: `rl_cron_refill`'
                             ELSE 'C: same UPDATE, no partial index' END,
              CASE r.variant WHEN 'B' THEN 'bench_cron_b' ELSE 'bench_cron_a' END,
              CASE r.variant WHEN 'B' THEN c.zone_b_keys ELSE c.zone_a_keys END,
              r.refilled, to_char(r.ms, 'FM9990.00'), to_char(r.ms_min, 'FM9990.00'), to_char(r.ms_max, 'FM9990.00'),
              to_char(r.ms * 1e3 / r.refilled, 'FM9990.00'), to_char(r.ms / b.ms, 'FM9990.00'),
              coalesce('`' || p.scan || '`', '—'), coalesce(p.buffers, '—'))
  FROM cron_ref r CROSS JOIN bench.cron_setup c
 CROSS JOIN (SELECT ms FROM cron_ref WHERE variant = 'B') b
  LEFT JOIN bench.cron_plan p USING (variant)
 ORDER BY r.variant;
\echo ''
SELECT format('**A / B = %s×** (%s ms vs %s ms): the zone''s %s full buckets change the time of a refill of its %s buckets below capacity by %s %%. Without the partial index (C) the same refill reads all %s rows of `ratelimit.state` and takes %s ms, **%s× A**.',
              to_char(a.ms / b.ms, 'FM990.00'), to_char(a.ms, 'FM9990.00'), to_char(b.ms, 'FM9990.00'),
              to_char(s.zone_a_keys - s.zone_a_pending, 'FM999G999G999'), to_char(s.zone_a_pending, 'FM999G999G999'),
              to_char(100 * (a.ms / b.ms - 1), 'FMSG9990'),
              to_char(s.state_rows, 'FM999G999G999'), to_char(c.ms, 'FM9990.00'), to_char(c.ms / a.ms, 'FM9990.0'))
  FROM cron_ref a, cron_ref b, cron_ref c, bench.cron_setup s
 WHERE a.variant = 'A' AND b.variant = 'B' AND c.variant = 'C';
\echo ''
\endif

\if :trigger
\echo '## 9. Row trigger: a bulk insert for one key'
\echo ''
SELECT format('`rl_zone_set(''bench_trigger'', ''token_bucket'', 1000000000, ''1 second'')`; `bench.trigger_rows (user_id int, body text)` with `BEFORE INSERT … FOR EACH ROW EXECUTE FUNCTION rl_limit_trigger(''bench_trigger'', ''user_id'')`, and a twin table `bench.plain_rows` without it. Measured: `INSERT INTO bench.<table> SELECT 1, ''comment'' FROM generate_series(1, N)` (every row has the key 1; the zone never refuses, so each row takes a token), timed inside the server (clock_timestamp() around the statement + COMMIT), TRUNCATE after each run; median of %s interleaved repetitions after one unrecorded round. Linear time: the same µs per row at both sizes (the transaction cache makes each call on the one key O(1)).',
              (SELECT max(rep) FROM bench.timings WHERE phase = 'trigger'));
\echo ''
\echo '| rows | with the trigger: ms (median) | min–max | µs/row | without: ms | µs/row | trigger cost per row, µs |'
\echo '| ---: | ---: | ---: | ---: | ---: | ---: | ---: |'
WITH t AS (
    SELECT split_part(variant, ':', 1) AS kind, split_part(variant, ':', 2)::int AS n,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY secs) * 1000 AS ms,
           min(secs) * 1000 AS lo, max(secs) * 1000 AS hi
      FROM bench.timings WHERE phase = 'trigger' GROUP BY variant)
SELECT format('| %s | %s | %s–%s | %s | %s | %s | %s |',
              to_char(a.n, 'FM999G999G999'), to_char(a.ms, 'FM99990.0'), to_char(a.lo, 'FM99990.0'),
              to_char(a.hi, 'FM99990.0'), to_char(1000 * a.ms / a.n, 'FM990.00'), to_char(b.ms, 'FM99990.0'),
              to_char(1000 * b.ms / b.n, 'FM990.00'), to_char(1000 * (a.ms - b.ms) / a.n, 'FM990.00'))
  FROM t a JOIN t b ON b.kind = 'plain' AND b.n = a.n
 WHERE a.kind = 'trigger' ORDER BY a.n;
\echo ''
WITH t AS (
    SELECT variant, percentile_cont(0.5) WITHIN GROUP (ORDER BY secs) AS s
      FROM bench.timings WHERE phase = 'trigger' GROUP BY variant)
SELECT format('µs per row with the trigger, %s rows over %s rows: **%s×** (1.00× is linear).',
              '100,000', '10,000',
              to_char((big.s / 100000) / (small.s / 10000), 'FM990.00'))
  FROM t big, t small WHERE big.variant = 'trigger:100000' AND small.variant = 'trigger:10000';
\echo ''
\endif

\echo '## Targets (SPEC §5)'
\echo ''
\echo '| target | measured | result |'
\echo '| --- | --- | --- |'
SELECT format('| `rl_token_bucket` in-backend ≥ 3× the PL/pgSQL bucket | %s× (direct, %s µs vs %s µs) | %s |',
              to_char(p.us / d.us, 'FM990.00'), to_char(d.us, 'FM990.00'), to_char(p.us, 'FM990.00'),
              CASE WHEN p.us / d.us >= 3 THEN 'met' ELSE '**MISSED**' END)
  FROM inb d, inb p WHERE d.variant = 'direct' AND p.variant = 'plpgsql';
SELECT format('| `rl_token_bucket` pgbench ≥ 1.3× the upsert bucket, %s client%s | %s× (direct, %s vs %s tps) | %s |',
              b.clients, CASE WHEN b.clients > 1 THEN 's' ELSE '' END,
              to_char(b.tps / u.tps, 'FM990.00'), to_char(b.tps, 'FM9999999990'), to_char(u.tps, 'FM9999999990'),
              CASE WHEN b.tps / u.tps >= 1.3 THEN 'met' ELSE '**MISSED**' END)
  FROM pgb b JOIN pgb u ON u.clients = b.clients AND u.variant = 'upsert'
 WHERE b.variant = 'direct' ORDER BY b.clients;
SELECT format('| shmem store: `rl_token_bucket` pgbench ≥ 0.85× `SELECT 1`, %s client%s | %s× (%s vs %s tps) | %s |',
              b.clients, CASE WHEN b.clients > 1 THEN 's' ELSE '' END,
              to_char(b.tps / s.tps, 'FM990.00'), to_char(b.tps, 'FM9999999990'), to_char(s.tps, 'FM9999999990'),
              CASE WHEN b.tps / s.tps >= 0.85 THEN 'met' ELSE '**MISSED**' END)
  FROM pgb b JOIN pgb s ON s.clients = b.clients AND s.variant = 'select1'
 WHERE b.variant = 'shmem' ORDER BY b.clients;
\echo '| shmem store: `rl_token_bucket` pgbench ≥ a Redis + Lua token bucket at the same client count | measured by `bash test/bench/redis.sh`: see [REDIS.md](REDIS.md) | — |'
SELECT format('| shmem store: `rl_token_bucket` in-backend ≥ 0.5× a `hashtext(i::text)` loop (over the same keys: `rl_token_bucket(i::text, …)`) | %s× (%s µs vs %s µs); over the keys `''k'' || i`: %s× the `hashtext(''k'' || i)` loop (%s µs vs %s µs), %s× the `hashtext(i::text)` loop | %s |',
              to_char(h.us / m.us, 'FM990.00'), to_char(m.us, 'FM990.00'), to_char(h.us, 'FM990.00'),
              to_char(hk.us / mk.us, 'FM990.00'), to_char(mk.us, 'FM990.00'), to_char(hk.us, 'FM990.00'),
              to_char(h.us / mk.us, 'FM990.00'),
              CASE WHEN h.us / m.us >= 0.5 THEN 'met' ELSE '**MISSED**' END)
  FROM inb m, inb h, inb mk, inb hk
 WHERE m.variant = 'shmem_i' AND h.variant = 'hashtext' AND mk.variant = 'shmem' AND hk.variant = 'hashtext_k';
SELECT format('| 100k calls on one key ≤ 3× 100k calls over 10k keys, %s | %s× (%s s vs %s s) | %s |',
              CASE h.variant WHEN 'shmem' THEN 'shmem store' ELSE 'table_access=' || h.variant END,
              to_char(h.ratio, 'FM990.00'), to_char(h.hot_s, 'FM990.000'), to_char(h.spread_s, 'FM990.000'),
              CASE WHEN h.ratio <= 3 THEN 'met' ELSE '**MISSED**' END)
  FROM hot h JOIN ord o USING (variant) ORDER BY o.n;
\echo ''
\echo 'Not targets, for reference (what each store costs, from sections 1 and 2):'
\echo ''
SELECT format('- in-backend, `rl_token_bucket` µs/call: table store %s (direct), %s (spi); shmem store %s; the `hashtext(i::text)` loop %s, the `hashtext(''k'' || i)` loop %s. The table store (direct) runs at %s× the `hashtext(i::text)` loop; the shmem store is %s× as fast as the table store (direct).',
              to_char(d.us, 'FM990.00'), to_char(s.us, 'FM990.00'), to_char(m.us, 'FM990.00'),
              to_char(h.us, 'FM990.00'), to_char(k.us, 'FM990.00'),
              to_char(h.us / d.us, 'FM990.00'), to_char(d.us / m.us, 'FM990.00'))
  FROM inb d, inb s, inb m, inb h, inb k
 WHERE d.variant = 'direct' AND s.variant = 'spi' AND m.variant = 'shmem'
   AND h.variant = 'hashtext' AND k.variant = 'hashtext_k';
SELECT format('- pgbench, %s client%s: `SELECT 1` %s tps; the same script without a bucket (`hashtext(''k'' || :k)`) %s tps (%s× `SELECT 1`); `rl_token_bucket` on the shmem store %s tps (%s× `SELECT 1`, %s× the script without a bucket), on the table store %s tps with direct (%s×, %s×), %s with spi (%s×, %s×).',
              b.clients, CASE WHEN b.clients > 1 THEN 's' ELSE '' END, to_char(b.tps, 'FM9999999990'),
              to_char(h.tps, 'FM9999999990'), to_char(h.tps / b.tps, 'FM990.00'),
              to_char(m.tps, 'FM9999999990'), to_char(m.tps / b.tps, 'FM990.00'), to_char(m.tps / h.tps, 'FM990.00'),
              to_char(d.tps, 'FM9999999990'), to_char(d.tps / b.tps, 'FM990.00'), to_char(d.tps / h.tps, 'FM990.00'),
              to_char(s.tps, 'FM9999999990'), to_char(s.tps / b.tps, 'FM990.00'), to_char(s.tps / h.tps, 'FM990.00'))
  FROM pgb b
  JOIN pgb h ON h.clients = b.clients AND h.variant = 'hashtext_k'
  JOIN pgb m ON m.clients = b.clients AND m.variant = 'shmem'
  JOIN pgb d ON d.clients = b.clients AND d.variant = 'direct'
  JOIN pgb s ON s.clients = b.clients AND s.variant = 'spi'
 WHERE b.variant = 'select1' ORDER BY b.clients;
\echo ''
\echo 'Not targets, for reference (the portable SPI path):'
\echo ''
SELECT format('- in-backend, table_access=spi: %s× the PL/pgSQL bucket, %s× the upsert bucket.',
              to_char(p.us / s.us, 'FM990.00'), to_char(u.us / s.us, 'FM990.00'))
  FROM inb s, inb p, inb u WHERE s.variant = 'spi' AND p.variant = 'plpgsql' AND u.variant = 'upsert';
SELECT format('- pgbench, table_access=spi, %s client%s: %s× the upsert bucket.',
              b.clients, CASE WHEN b.clients > 1 THEN 's' ELSE '' END, to_char(b.tps / u.tps, 'FM990.00'))
  FROM pgb b JOIN pgb u ON u.clients = b.clients AND u.variant = 'upsert'
 WHERE b.variant = 'spi' ORDER BY b.clients;
\if :zones
\echo ''
\echo 'Not a §5 target, stated as measured (SPEC §2.2: the exact sliding window is O(1) amortised per call, "not a count over a log table"; issue 3: it stays flat as the limit grows):'
\echo ''
SELECT format('- `rl_sliding_window` µs/call at limit 10,000 / at limit 10, windows 90 %% full: %s× (%s µs vs %s µs; the log table: %s×).',
              to_char(b.ours_us / a.ours_us, 'FM990.00'), to_char(b.ours_us, 'FM9990.00'), to_char(a.ours_us, 'FM9990.00'),
              to_char(b.log_us / a.log_us, 'FM99990.0'))
  FROM swr a, swr b WHERE a.lim = 10 AND b.lim = 10000;
\endif
\if :cron
\echo ''
\echo 'Not a §5 target, stated as measured (SPEC §2.4, pg_cron refill mode; the issue: one refill run costs about the same however many full buckets the zone holds):'
\echo ''
SELECT format('- one `rl_cron_refill` run over %s buckets below capacity, in a zone that also holds %s full buckets (A) / alone (B): %s× (%s ms vs %s ms); the same UPDATE without the partial index (a sequential scan of the %s rows of `ratelimit.state`): %s ms, %s× A.',
              to_char(s.zone_a_pending, 'FM999G999G999'), to_char(s.zone_a_keys - s.zone_a_pending, 'FM999G999G999'),
              to_char(a.ms / b.ms, 'FM990.00'), to_char(a.ms, 'FM9990.00'), to_char(b.ms, 'FM9990.00'),
              to_char(s.state_rows, 'FM999G999G999'), to_char(c.ms, 'FM9990.00'), to_char(c.ms / a.ms, 'FM9990.0'))
  FROM cron_ref a, cron_ref b, cron_ref c, bench.cron_setup s
 WHERE a.variant = 'A' AND b.variant = 'B' AND c.variant = 'C';
SELECT format('- `rl_limit` on a cron zone, in-backend: %s µs/call, against %s µs on the inline zone and %s µs for `rl_token_bucket` (its calls/s: %s× and %s× theirs).',
              to_char(c.us, 'FM990.00'), to_char(i.us, 'FM990.00'), to_char(d.us, 'FM990.00'),
              to_char(i.us / c.us, 'FM990.00'), to_char(d.us / c.us, 'FM990.00'))
  FROM cron_inb c, cron_inb i, cron_inb d WHERE c.variant = 'cron' AND i.variant = 'inline' AND d.variant = 'direct';
SELECT format('- `rl_limit` on a cron zone, pgbench, %s client%s: %s tps, %s× the inline zone (%s tps), %s× `rl_token_bucket` (%s tps).',
              c.clients, CASE WHEN c.clients > 1 THEN 's' ELSE '' END, to_char(c.tps, 'FM9999999990'),
              to_char(c.tps / i.tps, 'FM990.00'), to_char(i.tps, 'FM9999999990'),
              to_char(c.tps / d.tps, 'FM990.00'), to_char(d.tps, 'FM9999999990'))
  FROM cron_pgb c JOIN cron_pgb i ON i.clients = c.clients AND i.variant = 'inline'
  JOIN cron_pgb d ON d.clients = c.clients AND d.variant = 'direct'
 WHERE c.variant = 'cron' ORDER BY c.clients;
\endif
SQL

{
	echo "# ratelimit benchmark"
	echo
	echo "- date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
	echo "- machine: $(nproc) CPUs (\`nproc\`), $(uname -srm);" \
	     "load average (1, 5, 15 min) $LOAD_START at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end"
	echo "- PostgreSQL: $PG_VERSION"
	echo "- command: \`$COMMAND\`"
	echo "- run time: $(( (SECONDS - START_SECONDS + 30) / 60 )) min (build excluded)"
	echo "- throwaway cluster (\`.cluster/bench\`), server defaults except shared_buffers = 256MB," \
	     "shared_preload_libraries = 'pg_cron, ratelimit' and ratelimit.shmem_max_keys = $BENCH_SHMEM_KEYS;" \
	     "keys \`'k1'\` … \`'k$KEYS'\`, rate $RATE/s, window $WINDOW s, cost 1."
	echo "- baselines: UNLOGGED tables with a text COLLATE \"C\" primary key, float8 tokens," \
	     "a timestamptz and fillfactor 50 (\`ratelimit.state\`, which holds every algorithm's state, keeps" \
	     "whole tokens in a bigint plus a float8 fraction and its primary key is (key, zone_id, part)); the PL/pgSQL" \
	     "bucket and the upsert statement are in \`test/bench/baselines.sql\`, and all variants (\`rl_token_bucket\` on both stores" \
	     "included) pass the SPEC §2.1 check (fractions kept, refused calls take nothing) before the run."
	[ -z "$SO_NOTE" ] || echo "- **$SO_NOTE**"
	echo
	cat "$OUT/report.md"
} >"$RESULTS.tmp"
mv "$RESULTS.tmp" "$RESULTS"
cat "$RESULTS"
