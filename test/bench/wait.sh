#!/usr/bin/env bash
# rl_wait: what it costs when nothing waits, and how late a waiter returns
# after its token arrives.  One run, one cluster (fsync off), variants
# interleaved round by round so that machine noise hits each alike.
#
#   bash test/bench/wait.sh [SECONDS_PER_RUN] [ROUNDS]    (default 5 3)
#   RL_BUILD=0 ...   use the extension already installed
#
# 1. Overhead, in-backend: SELECT count(f('z', 'k' || i)) over 10,000
#    existing keys, f = rl_limit or rl_wait, a zone whose limit is out of
#    reach, table and shmem store: microseconds a call, and the ratio.
# 2. Overhead, pgbench -M prepared, one client: SELECT f('z', 'k' || :k)
#    over the same keys: tps and the ratio.
# 3. Wake-up latency, one waiter: a token bucket of 20 per second, burst 1,
#    drained; before each rl_wait, rl_peek says when the next token
#    arrives (t_before + retry_after, t_before read before the peek, so
#    the arrival is never placed late); lateness = return - arrival.
# 4. Wake-up latency, a line of four waiters (pgbench -c 4 on one key of
#    20 per second, burst 5, drained first, rl_wait with a 30 s timeout):
#    the k-th admission after the first is due k / 20 s after it (below
#    its burst the bucket refills on a fixed schedule, whoever takes the
#    tokens and however late); lateness = return - due, anchored at the
#    earliest.  (At burst 1 a late taker would lose the time it was late:
#    a full bucket refills no further.)
# Lateness is compared with the scheduler tick (CONFIG_HZ, from
# /proc/config.gz when the kernel exposes it).  Raw figures go to
# test/bench/out/wait.txt.
set -uo pipefail
source "$(dirname "$0")/../../scripts/lib.sh"
source "$(dirname "$0")/pgbench.sh"
cd "$RL_ROOT"

SECONDS_PER_RUN=${1:-5}
ROUNDS=${2:-3}
rl_require_positive_ints SECONDS_PER_RUN ROUNDS
OUT=test/bench/out
mkdir -p "$OUT"
RAW=$OUT/wait.txt

if [ "${RL_BUILD:-1}" != 0 ]; then
	rl_install_packages
	rl_build_install
fi
dir=$(mktemp -d)
chmod 755 "$dir"
trap 'rl_cluster_stop; rm -rf "$dir"' EXIT
rl_cluster_start bench-wait "fsync = off"

rl_psql -d postgres <<'SQL' >/dev/null
CREATE EXTENSION ratelimit;
SELECT rl_zone_set('open_table', 'token_bucket', 1000000000, '1 second');
SELECT rl_zone_set('open_shmem', 'token_bucket', 1000000000, '1 second', store => 'shmem');
SELECT count(rl_limit(z, 'k' || i)) FROM generate_series(1, 10000) i,
       unnest(ARRAY['open_table', 'open_shmem']) z;
SELECT rl_zone_set('tick_table', 'token_bucket', 20, '1 second', burst => 1);
SELECT rl_zone_set('tick_shmem', 'token_bucket', 20, '1 second', burst => 1, store => 'shmem');
SELECT rl_zone_set('line_table', 'token_bucket', 20, '1 second', burst => 5);
SELECT rl_zone_set('line_shmem', 'token_bucket', 20, '1 second', burst => 5, store => 'shmem');

CREATE FUNCTION per_call_us(query text) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE
    started timestamptz := clock_timestamp();
    calls bigint;
BEGIN
    EXECUTE query INTO calls;
    RETURN extract(epoch FROM clock_timestamp() - started) * 1e6 / calls;
END $$;

CREATE FUNCTION lateness_us(zone text, samples int) RETURNS SETOF float8 LANGUAGE plpgsql AS $$
DECLARE
    next_token rl_result;
    before_peek timestamptz;
    waited rl_result;
    returned timestamptz;
BEGIN
    PERFORM rl_limit(zone, 'one');
    FOR i IN 1 .. samples LOOP
        before_peek := clock_timestamp();
        next_token := rl_peek(zone, 'one', 1);
        waited := rl_wait(zone, 'one', 1, '10 seconds');
        returned := clock_timestamp();
        IF NOT waited.allowed THEN
            RAISE EXCEPTION 'rl_wait timed out on %', zone;
        END IF;
        IF NOT next_token.allowed THEN
            RETURN NEXT extract(epoch FROM returned - (before_peek + next_token.retry_after)) * 1e6;
        END IF;
    END LOOP;
END $$;

CREATE UNLOGGED TABLE admitted (zone text, at timestamptz);
CREATE FUNCTION wait_in_line(zone text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    waited rl_result := rl_wait(zone, 'line', 1, '30 seconds');
BEGIN
    IF NOT waited.allowed THEN
        RAISE EXCEPTION 'rl_wait timed out on %', zone;
    END IF;
    INSERT INTO admitted VALUES (zone, clock_timestamp());
END $$;
SQL

for f in rl_limit rl_wait; do
	for store in table shmem; do
		printf '\\set k random(1, 10000)\nSELECT %s(%s, %s);\n' "$f" "'open_$store'" "'k' || :k" >"$dir/${f}_$store.sql"
	done
done

tick_ms=""
if [ -r /proc/config.gz ]; then
	hz=$(zcat /proc/config.gz | sed -n 's/^CONFIG_HZ=\([0-9]*\)$/\1/p')
	[ -n "$hz" ] && tick_ms=$(awk -v hz="$hz" 'BEGIN { printf "%.1f", 1000 / hz }')
fi

: >"$RAW"
echo "# wait.sh $(date -u +%FT%TZ) seconds=$SECONDS_PER_RUN rounds=$ROUNDS tick_ms=${tick_ms:-unknown}" >>"$RAW"
for round in $(seq "$ROUNDS"); do
	for store in table shmem; do
		for f in rl_limit rl_wait; do
			us=$(rl_psql -d postgres -tA -c \
				"SELECT per_call_us('SELECT count($f(''open_$store'', ''k'' || i)) FROM generate_series(1, 10000) i')")
			echo "in_backend $store $f $round $us" >>"$RAW"
		done
	done
	for store in table shmem; do
		for f in rl_limit rl_wait; do
			read -r tps _ < <(pgb_checked "${f}_$store" 1 "$dir/pgbench.log" "" -T "$SECONDS_PER_RUN" -f "$dir/${f}_$store.sql")
			echo "pgbench $store $f $round $tps" >>"$RAW"
		done
	done
	for store in table shmem; do
		rl_psql -d postgres -tA -c "SELECT 'one_waiter $store - $round ' || l FROM lateness_us('tick_$store', 40) l" >>"$RAW"
	done
	for store in table shmem; do
		rl_psql -d postgres -q -c "TRUNCATE admitted" -c "SELECT rl_limit('line_$store', 'line', 5)" >/dev/null
		printf 'SELECT wait_in_line(%s);\n' "'line_$store'" >"$dir/line.sql"
		pgb_checked "line_$store" 4 "$dir/pgbench.log" "" -T "$SECONDS_PER_RUN" -f "$dir/line.sql" >/dev/null
		# The k-th admission after the first is due k * 50 ms after it.
		rl_psql -d postgres -tA <<SQL >>"$RAW"
WITH ordered AS (
    SELECT at, row_number() OVER (ORDER BY at) - 1 AS k FROM admitted WHERE zone = 'line_$store'
), offsets AS (
    SELECT k, extract(epoch FROM at) * 1e6 - k * 50000 AS offset_us FROM ordered WHERE k > 0
)
SELECT 'line $store - $round ' || (offset_us - (SELECT min(offset_us) FROM offsets)) FROM offsets;
SQL
	done
done

rl_psql -d postgres -q -c "CREATE TEMP TABLE raw (line text)" -c "\\copy raw FROM '$RAW'" \
	-c "CREATE TEMP VIEW r AS SELECT split_part(line, ' ', 1) AS kind, split_part(line, ' ', 2) AS store,
	           split_part(line, ' ', 3) AS f, split_part(line, ' ', 4) AS round,
	           split_part(line, ' ', 5) AS value FROM raw WHERE line NOT LIKE '#%'" \
	-c "\\echo '1-2. rl_wait when nothing waits, next to rl_limit (median of $ROUNDS rounds)'" \
	-c "SELECT store,
	           round(percentile_cont(0.5) WITHIN GROUP (ORDER BY value::float8) FILTER (WHERE kind = 'in_backend' AND f = 'rl_limit')::numeric, 3) AS limit_us,
	           round(percentile_cont(0.5) WITHIN GROUP (ORDER BY value::float8) FILTER (WHERE kind = 'in_backend' AND f = 'rl_wait')::numeric, 3) AS wait_us,
	           round((percentile_cont(0.5) WITHIN GROUP (ORDER BY value::float8) FILTER (WHERE kind = 'in_backend' AND f = 'rl_wait')
	                / percentile_cont(0.5) WITHIN GROUP (ORDER BY value::float8) FILTER (WHERE kind = 'in_backend' AND f = 'rl_limit'))::numeric, 3) AS in_backend_ratio,
	           round(percentile_cont(0.5) WITHIN GROUP (ORDER BY value::float8) FILTER (WHERE kind = 'pgbench' AND f = 'rl_limit')::numeric) AS limit_tps,
	           round(percentile_cont(0.5) WITHIN GROUP (ORDER BY value::float8) FILTER (WHERE kind = 'pgbench' AND f = 'rl_wait')::numeric) AS wait_tps,
	           round((percentile_cont(0.5) WITHIN GROUP (ORDER BY value::float8) FILTER (WHERE kind = 'pgbench' AND f = 'rl_wait')
	                / percentile_cont(0.5) WITHIN GROUP (ORDER BY value::float8) FILTER (WHERE kind = 'pgbench' AND f = 'rl_limit'))::numeric, 3) AS pgbench_ratio
	    FROM r WHERE kind IN ('in_backend', 'pgbench') GROUP BY store ORDER BY store DESC" \
	-c "\\echo '3-4. lateness after the token arrived, ms (tick ${tick_ms:-unknown} ms)'" \
	-c "SELECT kind AS waiters, store, count(*) AS samples,
	           round((percentile_cont(0.5) WITHIN GROUP (ORDER BY value::float8) / 1000)::numeric, 3) AS p50_ms,
	           round((percentile_cont(0.99) WITHIN GROUP (ORDER BY value::float8) / 1000)::numeric, 3) AS p99_ms,
	           round((max(value::float8) / 1000)::numeric, 3) AS max_ms,
	           count(*) FILTER (WHERE value::float8 > ${tick_ms:-4} * 1000) AS over_a_tick
	    FROM r WHERE kind IN ('one_waiter', 'line') GROUP BY kind, store ORDER BY kind DESC, store DESC"
echo "raw figures: $RAW"
