#!/usr/bin/env bash
# Benchmark of rl_token_bucket against hand-written token buckets (SPEC §5).
#
#   bash test/bench/run.sh
#
# Starts a throwaway cluster (.cluster/bench), measures in one run:
#   1. in-backend calls/s:  SELECT count(f(...)) FROM generate_series(1, N) i
#      over 10k existing keys, each key once per statement;
#   2. pgbench -M prepared -n, 1 and 2 clients, random key among 10k;
#   3. hot key: 100k calls on one key vs 100k calls over 10k keys;
# prints a Markdown report and writes it to test/bench/RESULTS.md.
#
# Environment:
#   BENCH_SECONDS  pgbench time of each variant and client count, seconds
#                  (default 10), split into BENCH_PGBENCH_ROUNDS interleaved
#                  runs (default 5: -T 2 each)
#   BENCH_REPS     in-backend repetitions of each variant (default 11)
#   BENCH_HOT_REPS hot-key repetitions of each variant (default 5)
#   BENCH_BUILD=0  measure the installed extension as it is (default 1:
#                  install missing packages, build and install the tree's)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../../scripts/lib.sh disable=SC1091
. "$HERE/../../scripts/lib.sh"

BENCH_SECONDS=${BENCH_SECONDS:-10}
BENCH_PGBENCH_ROUNDS=${BENCH_PGBENCH_ROUNDS:-5}
BENCH_REPS=${BENCH_REPS:-11}
BENCH_HOT_REPS=${BENCH_HOT_REPS:-5}
BENCH_BUILD=${BENCH_BUILD:-1}

for v in BENCH_SECONDS BENCH_PGBENCH_ROUNDS BENCH_REPS BENCH_HOT_REPS; do
	[[ ${!v} =~ ^[1-9][0-9]*$ ]] || rl_die "$v must be a positive integer (got '${!v}')"
done

# The exact command, with the settings that change what it measures.
COMMAND="bash test/bench/run.sh"
for v in BENCH_BUILD BENCH_HOT_REPS BENCH_REPS BENCH_PGBENCH_ROUNDS BENCH_SECONDS; do
	if printenv "$v" >/dev/null; then COMMAND="$v=${!v} $COMMAND"; fi
done
[ $# -eq 0 ] || rl_die "usage: [BENCH_SECONDS=10 ...] bash test/bench/run.sh (no arguments)"

# pgbench: ROUNDS interleaved runs of -T RUN_SECONDS (at least one second).
PGB_ROUNDS=$(( BENCH_PGBENCH_ROUNDS < BENCH_SECONDS ? BENCH_PGBENCH_ROUNDS : BENCH_SECONDS ))
PGB_RUN_SECONDS=$(( (BENCH_SECONDS + PGB_ROUNDS - 1) / PGB_ROUNDS ))

KEYS=10000          # existing keys
HOT_CALLS=100000    # calls in one statement for the hot-key row
RATE=1000000        # tokens/s: every call is admitted, so every call writes
WINDOW=60
OUT=$HERE/out       # git-ignored scratch space (pgbench scripts and logs)
RESULTS=$HERE/RESULTS.md
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

rl_cluster_start bench "shared_buffers = '256MB'"

psql_q() { rl_psql -d postgres "$@"; }
psql_at() { rl_psql -d postgres -At "$@"; }

# ---------------------------------------------------------------- setup --

# The two baselines use the layout users hand-write, with the same key,
# storage and fill as ratelimit.token_bucket (text COLLATE "C" primary key,
# float8 tokens, timestamptz, UNLOGGED, fillfactor 50), so that the
# comparison is about the access path, not about the layout.
#
# The upsert statement, with placeholders @ID@ @RATE@ @WINDOW@ @COST@.
# A refused call stores the refilled bucket as of now without taking
# anything, which is the same bucket as leaving the row alone (the refill is
# continuous and capped), and keeps the statement small: the executor builds
# every expression of the statement again on each execution.  "allowed"
# records the decision for RETURNING, which cannot see the old row.
AVAIL="least(@RATE@ * @WINDOW@, b.tokens + @RATE@ * greatest(0, date_part('epoch', excluded.updated_at - b.updated_at)))"
UPSERT_SQL="INSERT INTO bench.upsert_bucket AS b (id, tokens, updated_at, allowed)
VALUES (@ID@,
        CASE WHEN @RATE@ * @WINDOW@ >= @COST@ THEN @RATE@ * @WINDOW@ - @COST@ ELSE @RATE@ * @WINDOW@ END,
        clock_timestamp(),
        @RATE@ * @WINDOW@ >= @COST@)
ON CONFLICT (id) DO UPDATE SET
    tokens = $AVAIL - CASE WHEN $AVAIL >= @COST@ THEN @COST@ ELSE 0 END,
    updated_at = greatest(b.updated_at, excluded.updated_at),
    allowed = $AVAIL >= @COST@
RETURNING CASE WHEN b.allowed THEN floor(b.tokens)::bigint ELSE -1 END"

upsert_sql() { # ID RATE WINDOW COST
	local s=$UPSERT_SQL
	s=${s//@ID@/$1}; s=${s//@RATE@/$2}; s=${s//@WINDOW@/$3}; s=${s//@COST@/$4}
	printf '%s' "$s"
}

# shellcheck disable=SC2016  # $1 .. $4 are the SQL function's parameters
UPSERT_FN_SQL=$(upsert_sql '$1' '$2' '$3' '$4')

rl_log "setting up the bench schema"
psql_q <<SQL
CREATE EXTENSION ratelimit;
CREATE SCHEMA bench;

-- What users hand-write: UPDATE ... RETURNING, then INSERT when missing.
CREATE UNLOGGED TABLE bench.plpgsql_bucket (
    id          text COLLATE "C" NOT NULL PRIMARY KEY,
    tokens      float8 NOT NULL,
    updated_at  timestamptz NOT NULL
) WITH (fillfactor = 50);

CREATE FUNCTION bench.plpgsql_bucket(
    p_id text, p_rate float8 DEFAULT 2, p_window float8 DEFAULT 60, p_cost int DEFAULT 1)
RETURNS bigint LANGUAGE plpgsql AS \$fn\$
DECLARE
    v_now    timestamptz := clock_timestamp();
    v_cap    float8 := p_rate * p_window;
    v_tokens float8;
BEGIN
    LOOP
        -- Admitted: take p_cost from the refilled bucket (fractions kept).
        UPDATE bench.plpgsql_bucket
           SET tokens = least(v_cap, tokens + p_rate * greatest(0, date_part('epoch', v_now - updated_at))) - p_cost,
               updated_at = greatest(updated_at, v_now)
         WHERE id = p_id
           AND least(v_cap, tokens + p_rate * greatest(0, date_part('epoch', v_now - updated_at))) >= p_cost
        RETURNING tokens INTO v_tokens;
        IF FOUND THEN
            RETURN floor(v_tokens)::bigint;
        END IF;
        -- Refused (the row exists): take nothing, leave the refill alone.
        PERFORM 1 FROM bench.plpgsql_bucket WHERE id = p_id;
        IF FOUND THEN
            RETURN -1;
        END IF;
        IF p_cost > v_cap THEN
            RETURN -1;
        END IF;
        -- New key: a full bucket.  A concurrent insert sends us round again.
        INSERT INTO bench.plpgsql_bucket (id, tokens, updated_at)
        VALUES (p_id, v_cap - p_cost, v_now)
        ON CONFLICT (id) DO NOTHING;
        IF FOUND THEN
            RETURN floor(v_cap - p_cost)::bigint;
        END IF;
    END LOOP;
END
\$fn\$;

-- One statement: INSERT ... ON CONFLICT (id) DO UPDATE ... RETURNING.
CREATE UNLOGGED TABLE bench.upsert_bucket (
    id          text COLLATE "C" NOT NULL PRIMARY KEY,
    tokens      float8 NOT NULL,
    updated_at  timestamptz NOT NULL,
    allowed     boolean NOT NULL
) WITH (fillfactor = 50);

CREATE FUNCTION bench.upsert_bucket(
    p_id text, p_rate float8 DEFAULT 2, p_window float8 DEFAULT 60, p_cost int DEFAULT 1)
RETURNS bigint LANGUAGE sql AS \$fn\$
$UPSERT_FN_SQL;
\$fn\$;

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

-- Times one statement returning count(...) inside the server, commit
-- included (rl_token_bucket writes back repeated keys before commit).
CREATE PROCEDURE bench.measure(
    p_phase text, p_variant text, p_rep int, p_access text, p_calls int, p_sql text)
LANGUAGE plpgsql AS \$fn\$
DECLARE
    t0 timestamptz;
    t1 timestamptz;
    n  bigint;
BEGIN
    IF p_access IS NOT NULL THEN
        PERFORM set_config('ratelimit.table_access', p_access, false);
    END IF;
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
for v in direct spi plpgsql upsert; do
	case $v in
		direct|spi) f=rl_token_bucket ;;
		plpgsql) f=bench.plpgsql_bucket ;;
		upsert) f=bench.upsert_bucket ;;
	esac
	got=$(psql_at <<SQL | paste -sd' '
SET ratelimit.table_access = $([ "$v" = spi ] && echo spi || echo direct);
SELECT string_agg(r::text, ',' ORDER BY i) FROM (
    SELECT i, $f('sanity-$v', 1, 5, 1) AS r FROM generate_series(1, 6) i) s;
$(for _ in 1 2 3 4; do echo "SELECT $f('sanity-$v', 1, 5, 1) FROM pg_sleep(0.2);"; done)
SELECT $f('sanity-$v', 1, 5, 1) FROM pg_sleep(0.3);
SQL
)
	want="4,3,2,1,0,-1 -1 -1 -1 -1 0"
	[ "$got" = "$want" ] || rl_die "$v ($f): SPEC 2.1 check: expected '$want', got '$got'"
done

# ------------------------------------------------------------ in-backend --

INB_VARIANTS=(direct spi plpgsql upsert)
inb_access() { case $1 in direct|spi) echo "'$1'" ;; *) echo NULL ;; esac; }
inb_fn() {
	case $1 in
		direct|spi) echo rl_token_bucket ;;
		plpgsql) echo bench.plpgsql_bucket ;;
		upsert) echo bench.upsert_bucket ;;
	esac
}

rl_log "in-backend: $KEYS keys x ${#INB_VARIANTS[@]} variants x $BENCH_REPS reps, then hot key x $BENCH_HOT_REPS reps"
{
	echo "SET client_min_messages = warning;"
	# Pre-warm: create the keys ('k0' .. 'k$KEYS', plus the hot key), 1000
	# per transaction (builds before 3184fbe held a lock per created key until
	# commit, which filled the lock table).
	echo "SET ratelimit.table_access = direct;"
	for f in rl_token_bucket bench.plpgsql_bucket bench.upsert_bucket; do
		for ((lo = 0; lo <= KEYS; lo += 1000)); do
			echo "SELECT count($f('k' || i, $RATE, $WINDOW, 1)) FROM generate_series($lo, least($lo + 999, $KEYS)) i;"
		done
		echo "SELECT $f('hot', $RATE, $WINDOW, 1);"
	done
	echo "VACUUM ANALYZE ratelimit.token_bucket, bench.plpgsql_bucket, bench.upsert_bucket;"
	# Rep 0 warms the backend's caches and is not recorded.
	for rep in $(seq 0 "$BENCH_REPS"); do
		for v in "${INB_VARIANTS[@]}"; do
			sql="SELECT count($(inb_fn "$v")('k' || i, $RATE, $WINDOW, 1)) FROM generate_series(1, $KEYS) i"
			echo "CALL bench.measure('inbackend', '$v', $rep, $(inb_access "$v"), $KEYS, \$q\$$sql\$q\$);"
		done
		echo "VACUUM ratelimit.token_bucket, bench.plpgsql_bucket, bench.upsert_bucket;"
	done
	# Hot key vs spread keys, 100k calls in one statement each.
	for rep in $(seq 0 "$BENCH_HOT_REPS"); do
		for v in direct spi; do
			hot="SELECT count(rl_token_bucket('hot', $RATE, $WINDOW, 1)) FROM generate_series(1, $HOT_CALLS) i"
			spread="SELECT count(rl_token_bucket('k' || (i % $KEYS), $RATE, $WINDOW, 1)) FROM generate_series(1, $HOT_CALLS) i"
			echo "CALL bench.measure('hot', '$v', $rep, '$v', $HOT_CALLS, \$q\$$hot\$q\$);"
			echo "CALL bench.measure('spread', '$v', $rep, '$v', $HOT_CALLS, \$q\$$spread\$q\$);"
		done
		echo "VACUUM ratelimit.token_bucket;"
	done
} >"$OUT/inbackend.sql"
psql_q -f "$OUT/inbackend.sql" >"$OUT/inbackend.log"

# --------------------------------------------------------------- pgbench --

PGB_VARIANTS=(select1 direct spi plpgsql upsert)
printf 'SELECT 1;\n' >"$OUT/select1.pgb"
printf '\\set k random(1, %d)\nSELECT rl_token_bucket('"'k'"' || :k, %s, %s, 1);\n' \
	"$KEYS" "$RATE" "$WINDOW" >"$OUT/direct.pgb"
cp "$OUT/direct.pgb" "$OUT/spi.pgb"
printf '\\set k random(1, %d)\nSELECT bench.plpgsql_bucket('"'k'"' || :k, %s, %s, 1);\n' \
	"$KEYS" "$RATE" "$WINDOW" >"$OUT/plpgsql.pgb"
printf '\\set k random(1, %d)\n%s;\n' "$KEYS" "$(upsert_sql "'k' || :k" "$RATE" "$WINDOW" 1)" >"$OUT/upsert.pgb"

pgb_options() { case $1 in direct|spi) echo "-c ratelimit.table_access=$1" ;; *) echo "" ;; esac; }

# Interleaved (round 1: all variants and client counts, round 2: ...), so
# that a slow spell of the machine does not fall on one variant only.
for round in $(seq 1 "$PGB_ROUNDS"); do
	rl_log "pgbench round $round/$PGB_ROUNDS: ${#PGB_VARIANTS[@]} variants x 1 and 2 clients, ${PGB_RUN_SECONDS}s each"
	for clients in 1 2; do
		for v in "${PGB_VARIANTS[@]}"; do
			psql_q -c "VACUUM ratelimit.token_bucket, bench.plpgsql_bucket, bench.upsert_bucket"
			log="$OUT/pgbench-$v-$clients-$round.log"
			PGOPTIONS=$(pgb_options "$v") "$PGBENCH" -n -M prepared -c "$clients" -j "$clients" \
				-T "$PGB_RUN_SECONDS" -f "$OUT/$v.pgb" postgres >"$log" 2>&1 \
				|| { cat "$log" >&2; rl_die "pgbench $v ($clients clients) failed"; }
			tps=$(sed -n 's/^tps = \([0-9.]*\) (without initial connection time)$/\1/p' "$log")
			xacts=$(sed -n 's/^number of transactions actually processed: \([0-9]*\)$/\1/p' "$log")
			if [ -z "$tps" ] || [ -z "$xacts" ] || [ "$xacts" -eq 0 ]; then
				cat "$log" >&2; rl_die "could not read pgbench output for $v ($clients clients)"
			fi
			if grep -qiE 'error|abort' "$log" || ! grep -q '^number of failed transactions: 0 ' "$log"; then
				cat "$log" >&2; rl_die "pgbench $v ($clients clients) reported errors"
			fi
			psql_q -c "INSERT INTO bench.pgbench VALUES ($round, $clients, '$v', $tps, $xacts)"
		done
	done
done

# The access path really was the one asked for (PGOPTIONS reached the server).
for access in direct spi; do
	got=$(PGOPTIONS="-c ratelimit.table_access=$access" psql_at -c "SHOW ratelimit.table_access")
	[ "$got" = "$access" ] || rl_die "PGOPTIONS did not select table_access=$access (got $got)"
done

# ----------------------------------------------------------------- report --

rl_log "writing $RESULTS"
PG_VERSION=$(psql_at -c "SELECT version()")

psql_at -v seconds="$PGB_RUN_SECONDS" -v rounds="$PGB_ROUNDS" >"$OUT/report.md" <<'SQL'
CREATE TEMP VIEW label(variant, label) AS VALUES
    ('select1', '`SELECT 1`'),
    ('direct', '`rl_token_bucket`, table_access=direct'),
    ('spi', '`rl_token_bucket`, table_access=spi'),
    ('plpgsql', 'PL/pgSQL bucket (UPDATE … RETURNING, then INSERT)'),
    ('upsert', '`INSERT … ON CONFLICT DO UPDATE` bucket');
CREATE TEMP VIEW ord(variant, n) AS VALUES
    ('select1', 0), ('direct', 1), ('spi', 2), ('plpgsql', 3), ('upsert', 4);

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
SELECT format('`SELECT count(f(''k'' || i, %s, %s, 1)) FROM generate_series(1, %s) i` over keys that already exist, each key once per statement; every call is admitted and writes. Timed inside the server (clock_timestamp() around EXECUTE + COMMIT); median of %s interleaved repetitions (after one unrecorded warm-up round).',
              1000000, 60, max(calls), max(reps))
  FROM bench.timings, inb WHERE phase = 'inbackend';
\echo ''
\echo '| variant | µs/call (median) | min–max µs/call | calls/s | × PL/pgSQL | × upsert |'
\echo '| --- | ---: | ---: | ---: | ---: | ---: |'
SELECT format('| %s | %s | %s–%s | %s | %s | %s |', l.label,
              to_char(i.us, 'FM990.00'), to_char(i.us_min, 'FM990.00'), to_char(i.us_max, 'FM990.00'),
              to_char(1e6 / i.us, 'FM9999999990'),
              to_char(p.us / i.us, 'FM990.00'), to_char(u.us / i.us, 'FM990.00'))
  FROM inb i JOIN label l USING (variant) JOIN ord o USING (variant)
 CROSS JOIN (SELECT us FROM inb WHERE variant = 'plpgsql') p
 CROSS JOIN (SELECT us FROM inb WHERE variant = 'upsert') u
 ORDER BY o.n;
\echo ''

\echo '## 2. pgbench -M prepared -n'
\echo ''
SELECT format('`\set k random(1, 10000)`, one call per transaction; `-j` = clients. Each variant and client count runs %s × `-T %s`, interleaved with the others (round 1 of every variant, then round 2 …); tps = all transactions of those runs / their time (without connecting), min–max over the runs. table_access chosen with `PGOPTIONS=''-c ratelimit.table_access=…''`; the upsert statement is sent as is (not wrapped in a function).',
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
SELECT format('100k calls in one statement (commit included), on ONE key (`''hot''`) vs over 10k keys (`''k'' || (i %% 10000)`, each key 10 times); median of %s repetitions.',
              count(*) / 4)
  FROM bench.timings WHERE phase IN ('hot', 'spread');
\echo ''
\echo '| variant | one key, s | 10k keys, s | one key / 10k keys |'
\echo '| --- | ---: | ---: | ---: |'
SELECT format('| %s | %s | %s | %s |', l.label, to_char(h.hot_s, 'FM990.000'),
              to_char(h.spread_s, 'FM990.000'), to_char(h.ratio, 'FM990.00'))
  FROM hot h JOIN label l USING (variant) JOIN ord o USING (variant) ORDER BY o.n;
\echo ''

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
SELECT format('| 100k calls on one key ≤ 3× 100k calls over 10k keys, table_access=%s | %s× (%s s vs %s s) | %s |',
              h.variant, to_char(h.ratio, 'FM990.00'), to_char(h.hot_s, 'FM990.000'), to_char(h.spread_s, 'FM990.000'),
              CASE WHEN h.ratio <= 3 THEN 'met' ELSE '**MISSED**' END)
  FROM hot h JOIN ord o USING (variant) ORDER BY o.n;
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
SQL

{
	echo "# ratelimit benchmark"
	echo
	echo "- date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
	echo "- machine: $(nproc) CPUs (\`nproc\`), $(uname -srm)"
	echo "- PostgreSQL: $PG_VERSION"
	echo "- command: \`$COMMAND\`"
	echo "- throwaway cluster (\`.cluster/bench\`), server defaults except shared_buffers = 256MB;" \
	     "keys \`'k1'\` … \`'k$KEYS'\`, rate $RATE/s, window $WINDOW s, cost 1."
	echo "- baselines: UNLOGGED tables with a text COLLATE \"C\" primary key, float8 tokens," \
	     "a timestamptz and fillfactor 50 (\`ratelimit.token_bucket\` itself keeps whole tokens in a" \
	     "bigint plus a float8 fraction); the PL/pgSQL" \
	     "bucket and the upsert statement are in \`test/bench/run.sh\`, and all variants pass the" \
	     "SPEC §2.1 check (fractions kept, refused calls take nothing) before the run."
	[ -z "$SO_NOTE" ] || echo "- **$SO_NOTE**"
	echo
	cat "$OUT/report.md"
} >"$RESULTS.tmp"
mv "$RESULTS.tmp" "$RESULTS"
cat "$RESULTS"
