#!/usr/bin/env bash
# Load test of the exact sliding window: pgbench clients hammer ONE key of a
# zone with history, so every decision is recorded with the time it was
# decided at.  Then, from the history:
#   - exactness: in every trailing period (t - period, t] the admitted cost
#     is at most the rate (checked at every admission, ties included);
#   - no needless refusal: at every refusal the admitted cost in its
#     trailing period plus its own exceeded the rate;
#   - the state agrees: the key's head row holds the admitted cost of the
#     last period as the history counts it.
# The rate is large enough that the log spans several sealed chunks, so the
# chunk rows are exercised under concurrency too.
# Usage: sliding_window.sh [CLIENTS] [SECONDS]; uses PGHOST/PGPORT from
# scripts/lib.sh and the access path chosen by PGOPTIONS.
set -uo pipefail
source "$(dirname "$0")/../../scripts/lib.sh"
clients=${1:-2}
seconds=${2:-3}
rate=1500
period_ms=1000
db=rl_load_sw

rl_psql -d postgres -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" >/dev/null 2>&1
rl_psql -d $db >/dev/null <<SQL
CREATE EXTENSION ratelimit;
SELECT rl_zone_set('sw', 'sliding_window', $rate, interval '$period_ms milliseconds', history => true);
SQL

# A paced load (-R): well above the rate, so that calls are refused and the
# log spans several chunks, yet a history the checks below read in seconds
# however fast the machine (unpaced, a fast one wrote 200k rows, and the
# window query over them outlived the suite's time limit).
script=$(mktemp)
echo "SELECT allowed FROM rl_sliding_window('sw', 'hot');" > "$script"
"$RL_PG_BIN/pgbench" -n -M prepared -c "$clients" -j "$clients" -T "$seconds" -R $((rate * 3)) \
	-f "$script" $db >/dev/null 2>&1
status=$?
rm -f "$script"

# (t - period, t] is RANGE period - 1 us PRECEDING on microsecond times.
# The frame takes in ties at t: admissions decided at the same microsecond,
# before or after the row; that only adds to a refusal's count, and the
# largest count at t is what the last admission at t saw.
result=$(rl_psql -d $db -tA -F ' ' <<SQL
WITH windowed AS (
    SELECT allowed, cost,
           sum(CASE WHEN allowed THEN cost ELSE 0 END)
               OVER (ORDER BY recorded_at
                     RANGE BETWEEN interval '$period_ms milliseconds' - interval '1 microsecond'
                     PRECEDING AND CURRENT ROW) AS in_period
    FROM ratelimit.history),
last AS (
    SELECT coalesce(sum(cost), 0) AS in_period FROM ratelimit.history
    WHERE allowed AND recorded_at > (SELECT max(updated_at) FROM ratelimit.state WHERE part = 0)
                                    - interval '$period_ms milliseconds')
SELECT count(*) FILTER (WHERE allowed),
       count(*) FILTER (WHERE NOT allowed),
       coalesce(max(in_period) FILTER (WHERE allowed), 0),
       count(*) FILTER (WHERE NOT allowed AND in_period + cost <= $rate),
       (SELECT count(*) FROM ratelimit.state WHERE part > 0),
       (SELECT max(counter) FROM ratelimit.state WHERE part = 0),
       (SELECT tokens FROM ratelimit.state WHERE part = 0) - (SELECT in_period FROM last)
FROM windowed;
SQL
)
rl_psql -d postgres -c "DROP DATABASE $db" >/dev/null 2>&1
read -r admitted refused max_in_period needless chunk_rows chunks_in_head head_mismatch <<<"$result"
echo "# $clients clients, ${seconds}s, rate $rate per ${period_ms} ms: admitted $admitted, refused $refused," \
	"most admitted in one period $max_in_period, chunk rows $chunk_rows (head says $chunks_in_head)"
failed=0
check() {
	if eval "$2"; then echo "ok - $1"; else echo "not ok - $1"; failed=1; fi
}
check "pgbench ran" '[ "$status" -eq 0 ]'
check "calls were refused, so the window was full" '[ "${refused:-0}" -gt 0 ]'
check "at most $rate admitted in every trailing period (got $max_in_period)" \
	'[ -n "$max_in_period" ] && [ "$max_in_period" -le "$rate" ]'
check "no refusal while the period had room ($needless needless)" '[ "${needless:-1}" -eq 0 ]'
check "the log spans sealed chunk rows, as many as the head row counts" \
	'[ "${chunk_rows:-0}" -gt 0 ] && [ "$chunk_rows" = "$chunks_in_head" ]'
check "the head row's admitted cost matches the history's last period" '[ "${head_mismatch:-1}" = 0 ]'
exit $failed
