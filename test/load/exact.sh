#!/usr/bin/env bash
# Load test: an exact lost-update check, on both stores.  A lost update (two
# backends deciding on one key, one writing over the other's decision) can
# hide inside concurrency.sh's bounds (admitted within capacity + rate x
# elapsed, one token below); here it cannot.  The limits are out of reach
# for the whole run, so every call is admitted and takes exactly its cost:
#   fixed_window  1000000000 per '1 day'
#   token_bucket  rate 1 per '10 minutes', burst 10000000: it refills
#                 1/600 of a token a second, under one token while a case
#                 lasts under 10 minutes (checked), so the whole tokens left
#                 are exactly burst - taken
#   rl_token_bucket(key, 2^-16, 65536e9): capacity exactly 1e9 (powers of
#                 two: no float rounding), refilling 2^-16 token a second
# pgbench clients (-t: a fixed number of transactions each) run a script
# that calls each of the three on ONE hot key, once more on one of 5 keys
# picked at random, and BULK times (default 10) in one statement on a third
# key (the shmem store decides them back to back, so two clients collide
# on the set lock far more often than with a round trip between calls; the
# table store holds the row for the statement and keeps its calls in the
# transaction cache).  Afterwards, per algorithm:
#   capacity - remaining (rl_peek(zone, key, 0), or rl_token_bucket(...,
#   0)) = the calls made x cost, exactly: on the hot key, summed over the
#   5 keys, and on the bulk key,
# and no call was refused (each refusal would be logged in a table), and
# pgbench ran every transaction, none failed.  Every case uses new keys, so
# the first calls also race to create them.
#
# Cases: the shmem store, and the table store on each access path
# (ratelimit.table_access = direct, spi), each with CASES, a list of
# CLIENTS:COST (default "2:1 4:3": 2 clients cost 1, 4 clients cost 3).
# TX transactions per client (default 6000).  Starts a cluster of its own
# (scripts/lib.sh); PGOPTIONS from the environment is not used.
# Prints "ok"/"not ok" lines; exits non-zero on a failure.
set -uo pipefail
source "$(dirname "$0")/../../scripts/lib.sh"
CASES=${CASES:-"2:1 4:3"}
TX=${TX:-6000}
BULK=${BULK:-10}
rl_require_positive_ints TX BULK
for c in $CASES; do
	[[ $c =~ ^[1-9][0-9]*:[1-9][0-9]*$ ]] || rl_die "CASES must be a list of CLIENTS:COST (got '$CASES')"
	# The token_bucket zone's burst must stay out of reach.
	[ $(( ${c%%:*} * TX * BULK * ${c##*:} )) -lt 10000000 ] \
		|| rl_die "case $c: clients x TX x BULK x cost must stay under 10000000"
done
db=rl_exact
unset PGOPTIONS

trap 'rl_cluster_stop' EXIT
rl_cluster_start exact "fsync = off"

rl_psql -d postgres -c "CREATE DATABASE $db" >/dev/null
rl_psql -d $db >/dev/null <<'SQL'
CREATE EXTENSION ratelimit;
CREATE UNLOGGED TABLE refused (label text, what text, key text, remaining bigint);
SELECT rl_zone_set('t_fw', 'fixed_window', 1000000000, '1 day'),
       rl_zone_set('t_tb', 'token_bucket', 1, '10 minutes', burst => 10000000),
       rl_zone_set('s_fw', 'fixed_window', 1000000000, '1 day', store => 'shmem'),
       rl_zone_set('s_tb', 'token_bucket', 1, '10 minutes', burst => 10000000, store => 'shmem');
SQL
TB_RATE=0.0000152587890625		# 2^-16
TB_WINDOW=65536e9				# capacity 2^-16 x 65536e9 = 1e9
FW_CAP=1000000000 TB_CAP=10000000 ADHOC_CAP=1000000000
NFEW=5

# q PGOPTIONS SQL: one query, unaligned, fields separated by spaces.
q() { PGOPTIONS=$1 rl_psql -d $db -tA -F ' ' -c "$2" 2>&1; }

# The ad-hoc bucket's capacity, as a new key sees it, on either store.
for store in table shmem; do
	rl_check "rl_token_bucket($TB_RATE, $TB_WINDOW) on the $store store: a new key holds $ADHOC_CAP" $ADHOC_CAP \
		"$(q "-c ratelimit.default_store=$store" "SELECT rl_token_bucket('probe', $TB_RATE, $TB_WINDOW, 0)")"
done

script=$(mktemp)
trap 'rm -f "$script"; rl_cluster_stop' EXIT

# run_case LABEL PGOPTIONS FW_ZONE TB_ZONE STORE CLIENTS COST
run_case() {
	local label=$1 opts=$2 fw=$3 tb=$4 store=$5 clients=$6 cost=$7
	local name="$label, $clients clients, cost $cost"
	local tag="${label//[^a-z]/}-c$clients-x$cost"
	local txns=$((clients * TX)) out status
	# Every statement logs the calls it saw refused (none should be).
	cat >"$script" <<SQL
\set k random(1, $NFEW)
INSERT INTO refused SELECT '$tag', 'fixed_window', 'hot', r.remaining FROM rl_limit('$fw', 'hot-$tag', $cost) r WHERE NOT r.allowed;
INSERT INTO refused SELECT '$tag', 'token_bucket', 'hot', r.remaining FROM rl_limit('$tb', 'hot-$tag', $cost) r WHERE NOT r.allowed;
INSERT INTO refused SELECT '$tag', 'rl_token_bucket', 'hot', r FROM rl_token_bucket('hot-$tag', $TB_RATE, $TB_WINDOW, $cost) r WHERE r < 0;
INSERT INTO refused SELECT '$tag', 'fixed_window', 'few', r.remaining FROM rl_limit('$fw', 'few-$tag-' || :k, $cost) r WHERE NOT r.allowed;
INSERT INTO refused SELECT '$tag', 'token_bucket', 'few', r.remaining FROM rl_limit('$tb', 'few-$tag-' || :k, $cost) r WHERE NOT r.allowed;
INSERT INTO refused SELECT '$tag', 'rl_token_bucket', 'few', r FROM rl_token_bucket('few-$tag-' || :k, $TB_RATE, $TB_WINDOW, $cost) r WHERE r < 0;
INSERT INTO refused SELECT '$tag', what, 'bulk', $BULK - admitted FROM (
    SELECT 'fixed_window' AS what, count(*) FILTER (WHERE (rl_limit('$fw', 'bulk-$tag', $cost)).allowed) AS admitted FROM generate_series(1, $BULK)
    UNION ALL SELECT 'token_bucket', count(*) FILTER (WHERE (rl_limit('$tb', 'bulk-$tag', $cost)).allowed) FROM generate_series(1, $BULK)
    UNION ALL SELECT 'rl_token_bucket', count(*) FILTER (WHERE rl_token_bucket('bulk-$tag', $TB_RATE, $TB_WINDOW, $cost) >= 0) FROM generate_series(1, $BULK)
) a WHERE admitted <> $BULK;
SQL
	local started=$SECONDS
	out=$(PGOPTIONS=$opts "$RL_PG_BIN/pgbench" -n -M prepared -c "$clients" -j "$clients" -t "$TX" -f "$script" $db 2>&1)
	status=$?
	local processed tx_failed refused
	processed=$(sed -n 's/^number of transactions actually processed: \([0-9]*\)\/.*/\1/p' <<<"$out")
	tx_failed=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' <<<"$out")
	refused=$(q "$opts" "SELECT count(*) FROM refused WHERE label = '$tag'")
	echo "# $name: pgbench exit $status, ${processed:-?} transactions in $((SECONDS - started)) s, ${tx_failed:-?} failed, $refused statements saw a refusal"
	if [ "$status" -ne 0 ]; then grep -m 3 -E 'aborted|ERROR|error' <<<"$out" | sed 's/^/#   /'; fi
	rl_check "$name: pgbench ran $txns of $txns transactions, none failed, no call refused" \
		"0 $txns 0 0" "$status ${processed:-none} ${tx_failed:-0} $refused"

	# Where the hot keys are: rows of ratelimit.state on the table store
	# (the zones' and zone 0's), none on the shmem store.
	rl_check "$name: the hot keys are in the $store store" \
		"$([ "$store" = shmem ] && echo 0 || echo 3) 3" \
		"$(q "$opts" "SELECT (SELECT count(*) FROM ratelimit.state WHERE key = 'hot-$tag'),
		                     (SELECT count(*) FROM rl_keys WHERE key = 'hot-$tag' AND store = '$store')")"

	# Taken (capacity - remaining) per algorithm: on the hot key, over the
	# few keys, on the bulk key.
	local algorithm hot few bulk
	for algorithm in fixed_window token_bucket rl_token_bucket; do
		case $algorithm in
			fixed_window) left() { echo "$FW_CAP - (rl_peek('$fw', $1, 0)).remaining"; } ;;
			token_bucket) left() { echo "$TB_CAP - (rl_peek('$tb', $1, 0)).remaining"; } ;;
			rl_token_bucket) left() { echo "$ADHOC_CAP - rl_token_bucket($1, $TB_RATE, $TB_WINDOW, 0)"; } ;;
		esac
		read -r hot few bulk <<<"$(q "$opts" "SELECT $(left "'hot-$tag'"),
		        (SELECT sum($(left "'few-$tag-' || i")) FROM generate_series(1, $NFEW) i),
		        $(left "'bulk-$tag'")")"
		local what="$label $algorithm, $clients clients" calls="calls" bulk_calls=$((txns * BULK))
		[ "$cost" -eq 1 ] || calls="calls of cost $cost"
		rl_check "$what: hot key $txns $calls, ${hot:-?} taken (exact)" $((txns * cost)) "$hot"
		rl_check "$what: $NFEW keys $txns $calls, ${few:-?} taken (exact)" $((txns * cost)) "$few"
		rl_check "$what: bulk key $bulk_calls $calls, ${bulk:-?} taken (exact)" $((bulk_calls * cost)) "$bulk"
	done
	# The token_bucket zone refills 1/600 token a second: under one token
	# only while its keys are younger than 10 minutes.
	[ $((SECONDS - started)) -lt 590 ] \
		|| rl_check "$name: the case took under 590 s (token_bucket refills a token in 600 s)" "<590" $((SECONDS - started))
}

# run_store LABEL PGOPTIONS FW_ZONE TB_ZONE STORE SETTING VALUE
run_store() {
	local label=$1 opts=$2 setting=$6 value=$7 c
	rl_check "$label: $setting is $value" "$value" "$(q "$opts" "SHOW $setting")"
	for c in $CASES; do
		run_case "$1" "$2" "$3" "$4" "$5" "${c%%:*}" "${c##*:}"
	done
}

echo "# $TX transactions per client, cases (clients:cost) $CASES"
run_store shmem "-c ratelimit.default_store=shmem" s_fw s_tb shmem ratelimit.default_store shmem
for access in direct spi; do
	run_store "table ($access)" "-c ratelimit.table_access=$access" t_fw t_tb table ratelimit.table_access $access
done

rl_check "the server log shows no crash" "" \
	"$(grep -E 'PANIC|TRAP|stuck spinlock|terminated by signal' "$RL_CLUSTER_DIR/server.log" | head -3)"

echo "exact: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
