#!/usr/bin/env bash
# Stress test of the shmem store's growth under concurrent readers.  The
# store grows by linear hashing (src/store/shmem_sets.c): it starts with base
# sets in use (16 to 31), splits one more whenever a new key lands in a set
# holding more than 24, and goes up a level (base << level sets, then
# splits from set 0 again) each time the split order wraps, up to
# max_level (StoreShape).  Each round here, on a fresh store:
#   - HOT keys (default 256) of a zone that never recovers (fixed_window,
#     1000000000 per day) are made, one call each;
#   - READERS pgbench clients (default 2) call every hot key once per
#     transaction, for as long as the round lasts: sets split under their
#     lookups and decisions all the time;
#   - once the readers are running, WRITERS clients (default 2) make new
#     keys of another such zone as fast as they can, in batches of BATCH
#     (default 1000) keys numbered by a sequence (disjoint), until they
#     fill FILL percent (default 40, at most 42) of the fully grown store's
#     entries: the store goes up every level but the last, thousands of
#     splits in about a second.  (Growing splits a set at 25 keys, so
#     sets in use hold about 13 on average: the store is fully grown at
#     about 43 %; past that a full set lends its new keys ways of other
#     sets, which test/fault/shmem.sh checks, and the shape check below,
#     which expects every key in its own set, would not hold.)
# Then, exactly:
#   - every new key is in rl_keys once, none else, each with the 999999999
#     that its one call left, and a lookup (rl_peek) finds each of them;
#   - every hot key is in rl_keys once, and took exactly 1 + the readers'
#     transactions (rl_keys and rl_peek agree);
#   - pgbench: every transaction ran, none failed, no call was refused;
#     rl_counters agrees (allowed, none refused, evicted or full);
#   - the readers ran before, during and after the growth;
#   - the store's shape: rl_keys' scan visits sets in order, so from each
#     key's set in the fully grown store (ratelimit.shmem_placement: its
#     base set and the low bits of its hash, which SetIndexOf's arithmetic,
#     mirrored here, takes level by level) there must be exactly one level whose
#     shape puts every key in a set consistent with that order: every key
#     is in the set its hash picks.  The level is the number of level
#     changes of the round;
#   - the server log shows no PANIC, TRAP, stuck spinlock or crash.
# The store sizes (ratelimit.shmem_max_keys) cycle through SIZES (default
# "400000 1000000 100000 25000": up 8, 9, 6 and 4 levels from 26 or 32
# sets); ROUNDS rounds (default 20, about 75 s), each after
# an immediate restart (no state file: the store starts empty).  Starts a
# cluster of its own (scripts/lib.sh).  Prints "ok"/"not ok" lines; exits
# non-zero on a failure.
set -uo pipefail
source "$(dirname "$0")/../../scripts/lib.sh"
ROUNDS=${ROUNDS:-20}
SIZES=${SIZES:-"400000 1000000 100000 25000"}
HOT=${HOT:-256}
READERS=${READERS:-2}
WRITERS=${WRITERS:-2}
BATCH=${BATCH:-1000}
FILL=${FILL:-40}
rl_require_positive_ints ROUNDS SIZES HOT READERS WRITERS BATCH FILL
[ "$FILL" -le 42 ] || rl_die "FILL above 42 % can grow the store to its end, where keys of full sets sit in other sets (the shape check expects none)"
CAP=1000000000
db=rl_growth
unset PGOPTIONS

tmp=$(mktemp -d)
chmod 755 "$tmp"
trap 'rl_cluster_stop; rm -rf "$tmp"' EXIT
first_size=${SIZES%% *}
# Saves at clean shutdown only (interval 0): an immediate restart then starts
# the store empty, the fresh store each round needs.
rl_cluster_start growth "fsync = off" "ratelimit.shmem_max_keys = $first_size" "ratelimit.shmem_save_interval = 0"
log=$RL_CLUSTER_DIR/server.log

rl_psql -d postgres -c "CREATE DATABASE $db" >/dev/null
rl_psql -d $db >/dev/null <<SQL
CREATE EXTENSION ratelimit;
SELECT rl_zone_set('hot', 'fixed_window', $CAP, '1 day', store => 'shmem'),
       rl_zone_set('new', 'fixed_window', $CAP, '1 day', store => 'shmem');
CREATE SEQUENCE batch;
CREATE UNLOGGED TABLE reads (at timestamptz DEFAULT clock_timestamp(), admitted int);
CREATE UNLOGGED TABLE wrote (b bigint, started timestamptz, at timestamptz DEFAULT clock_timestamp(), admitted int);
SQL
q() { rl_psql -d $db -tA -F ' ' -c "$1" 2>&1; }

# Each reader transaction: every hot key once.  Each writer transaction: a
# batch of BATCH new keys, its number from the sequence.
cat >"$tmp/reader.sql" <<SQL
INSERT INTO reads (admitted) SELECT count(*) FILTER (WHERE r.allowed) FROM generate_series(1, $HOT) i, LATERAL rl_limit('hot', 'h-' || i, 1) r;
SQL
cat >"$tmp/writer.sql" <<SQL
INSERT INTO wrote (b, started, admitted) SELECT s.b, min(clock_timestamp()), count(*) FILTER (WHERE r.allowed) FROM (SELECT nextval('batch') AS b OFFSET 0) s, generate_series((s.b - 1) * $BATCH + 1, s.b * $BATCH) i, LATERAL rl_limit('new', 'n-' || i, 1) r GROUP BY s.b;
SQL

# store_shape SIZE: "base max_level", as StoreShape computes them.
store_shape() {
	local needed=$(( ($1 + 30) / 31 )) level=0
	while [ "$level" -lt 16 ] && [ $((needed >> (level + 1))) -ge 16 ]; do level=$((level + 1)); done
	echo "$(( (needed + (1 << level) - 1) >> level )) $level"
}

# pgbench_figures FILE: "exit processed failed" of a pgbench run.
pgbench_figures() {
	local processed tx_failed
	processed=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$1")
	tx_failed=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' "$1")
	echo "$(cat "$1.status") ${processed:-none} ${tx_failed:-0}"
}

# The levels at which every key's set (SetIndexOf for that level, with the
# split point and the sets split early unknown) agrees with the order in
# which ratelimit.shmem_keys() scans the sets: the scan visits the first
# base << level sets in order (keys of sets split already have the level
# bit clear), then the sets they split into, in order (keys with the bit
# set).  So the keys' sets at that level ascend, but once (where the scan
# passes to the split halves); from there every key has the bit set, and
# no set of the first part that shows up after it holds a key with the bit
# set.  Prints "level sets" for each level that fits, with base << level
# <= sets < 2 * (base << level) (a shape split to its end is the next level
# with nothing split yet); one line is expected.
shape_levels() {
	local base=$1 max_level=$2
	# The final set is base_set + base * (the hash's low max_level bits).
	q "SELECT ratelimit.shmem_placement(s.zone_id, s.key) % $base, ratelimit.shmem_placement(s.zone_id, s.key) / $base
	   FROM ratelimit.shmem_keys() WITH ORDINALITY AS s(zone_id, key, capacity, remaining, reset_after, updated_at, ord)
	   ORDER BY s.ord" |
	awk -v base="$base" -v max_level="$max_level" '
		{ base_set[NR] = $1 + 0; low_bits[NR] = $2 + 0 }
		END {
			n = NR
			for (l = 0; l <= max_level; l++) {
				w = base * 2 ^ l
				if (w > n || 62 * w < n) continue	# sets in use: < n, >= n / 31
				descents = 0; cut = n + 1; prev = -1
				for (i = 1; i <= n; i++) {
					lo[i] = base_set[i] + base * (low_bits[i] % (2 ^ l))
					bit[i] = int(low_bits[i] / 2 ^ l) % 2
					if (lo[i] < prev) { descents++; if (cut > n) cut = i }
					prev = lo[i]
				}
				if (descents > 1) continue
				split("", low); split("", high); split("", ones)
				bad = 0; sets = 0
				for (i = 1; i <= n; i++) {
					if (i >= cut) {
						if (bit[i] != 1) bad++
						if (!(lo[i] in high)) { high[lo[i]] = 1; sets++ }
					} else {
						if (!(lo[i] in low)) { low[lo[i]] = 1; sets++ }
						if (bit[i] == 1) ones[lo[i]]++
					}
				}
				for (s in high) if (s in ones) bad += ones[s]
				if (bad == 0 && sets >= w && sets < 2 * w) print l, sets
			}
		}'
}

total_levels=0 total_splits=0 total_new=0 total_reads=0 rounds_run=0
keys_per_second=100000		# a guess for the first round; then measured
started_all=$SECONDS
sizes=($SIZES)
for round in $(seq 1 "$ROUNDS"); do
	size=${sizes[$(( (round - 1) % ${#sizes[@]} ))]}
	read -r base max_level <<<"$(store_shape "$size")"
	entries=$(( (base << max_level) * 31 ))
	per_writer=$(( entries * FILL / 100 / (WRITERS * BATCH) ))
	[ "$per_writer" -ge 1 ] || rl_die "shmem_max_keys $size is too small for $WRITERS writers of $BATCH keys"
	new=$(( per_writer * WRITERS * BATCH ))
	# The readers run until well after the writers (at the last round's pace).
	seconds=$(( 2 + 2 * new / keys_per_second ))
	name="round $round (shmem_max_keys $size: $base sets << $max_level)"
	round_started=$SECONDS
	log_from=$(( $(wc -l <"$log") + 1 ))

	# A fresh, empty store of this size.
	rl_psql -d postgres -c "ALTER SYSTEM SET ratelimit.shmem_max_keys = $size" >/dev/null
	rl_cluster_ctl restart -m immediate -w -t 60 -l "$log" >/dev/null
	for _ in $(seq 1 120); do [ "$(q 'SELECT 1')" = 1 ] && break; sleep 0.5; done
	q "TRUNCATE reads, wrote; ALTER SEQUENCE batch RESTART" >/dev/null
	rl_check "$name: a fresh store, empty" "$size 0" \
		"$(q "SELECT current_setting('ratelimit.shmem_max_keys'), count(*) FROM rl_keys")"
	rl_check "$name: $HOT hot keys made" $HOT \
		"$(q "SELECT count(*) FILTER (WHERE r.allowed) FROM generate_series(1, $HOT) i, LATERAL rl_limit('hot', 'h-' || i, 1) r")"

	# Readers first; the writers once they are calling.
	( "$RL_PG_BIN/pgbench" -n -M prepared -c "$READERS" -j "$READERS" -T "$seconds" -f "$tmp/reader.sql" $db \
		>"$tmp/readers" 2>&1; echo $? >"$tmp/readers.status" ) &
	readers=$!
	for _ in $(seq 1 100); do [ "$(q 'SELECT count(*) > 0 FROM reads')" = t ] && break; sleep 0.1; done
	"$RL_PG_BIN/pgbench" -n -M prepared -c "$WRITERS" -j "$WRITERS" -t "$per_writer" -f "$tmp/writer.sql" $db \
		>"$tmp/writers" 2>&1
	echo $? >"$tmp/writers.status"
	wait "$readers"

	read -r batches written wrote_bad growth_ms <<<"$(q "SELECT count(*), coalesce(sum(admitted), 0),
	        count(*) FILTER (WHERE admitted <> $BATCH),
	        coalesce(round(extract(epoch FROM max(at) - min(started)) * 1000), 0) FROM wrote")"
	read -r reads reads_bad before during after <<<"$(q "SELECT count(*), count(*) FILTER (WHERE admitted <> $HOT),
	        count(*) FILTER (WHERE at < g.s), count(*) FILTER (WHERE at BETWEEN g.s AND g.e), count(*) FILTER (WHERE at > g.e)
	        FROM reads, (SELECT min(started) AS s, max(at) AS e FROM wrote) g")"
	# A figure the server could not give (it crashed: an error message) is
	# -1, which fails the checks, rather than ending the script in an
	# arithmetic error.
	for v in batches written wrote_bad growth_ms reads reads_bad before during after; do
		[[ ${!v:-} =~ ^[0-9]+$ ]] || printf -v "$v" '%s' -1
	done
	read -r w_status w_processed w_failed <<<"$(pgbench_figures "$tmp/writers")"
	read -r r_status r_processed r_failed <<<"$(pgbench_figures "$tmp/readers")"
	echo "# $name: $new new keys in ${growth_ms} ms; readers: $reads transactions of $HOT calls ($during during the growth), ${seconds}s"
	for f in writers readers; do
		[ "$(cat "$tmp/$f.status")" = 0 ] || grep -m 3 -E 'aborted|ERROR|error' "$tmp/$f" | sed "s/^/#   $f: /"
	done
	rl_check "$name: writers ran $((per_writer * WRITERS)) batches of $BATCH new keys, none failed, no call refused" \
		"0 $((per_writer * WRITERS)) 0 $((per_writer * WRITERS)) $new 0" \
		"$w_status $w_processed $w_failed $batches $written $wrote_bad"
	rl_check "$name: readers ran $reads transactions (pgbench: $r_processed), none failed, no call refused" \
		"0 $reads 0 0" "$r_status $r_processed $r_failed $reads_bad"
	rl_check "$name: the readers called before, during ($during transactions) and after the growth" "yes yes yes" \
		"$([ "${before:-0}" -gt 0 ] && echo yes || echo no) $([ "${during:-0}" -gt 0 ] && echo yes || echo no) $([ "${after:-0}" -gt 0 ] && echo yes || echo no)"

	# Counters first: the checks below call rl_peek.
	rl_check "$name: rl_counters: new $new allowed, hot $((HOT * (1 + reads))) allowed; none refused, evicted or full" \
		"new $new 0 0 0 hot $((HOT * (1 + reads))) 0 0 0" \
		"$(q "SELECT string_agg(zone || ' ' || allowed || ' ' || refused || ' ' || evicted || ' ' || \"full\", ' ' ORDER BY zone DESC)
		      FROM rl_counters WHERE zone IN ('new', 'hot')")"
	rl_check "$name: rl_keys: each of the $new new keys once, none else, each with $((CAP - 1)) left" "$new $new 0 0" \
		"$(q "SELECT count(*), count(DISTINCT key), count(*) FILTER (WHERE remaining <> $((CAP - 1)) OR capacity <> $CAP),
		             count(*) FILTER (WHERE CASE WHEN key ~ '^n-[1-9][0-9]{0,9}\$' THEN substr(key, 3)::bigint > $new ELSE true END)
		      FROM rl_keys WHERE zone = 'new'")"
	rl_check "$name: a lookup finds each new key, with $((CAP - 1)) left" 0 \
		"$(q "SELECT count(*) FILTER (WHERE (rl_peek('new', 'n-' || i, 0)).remaining <> $((CAP - 1))) FROM generate_series(1, $new) i")"
	rl_check "$name: rl_keys: each of the $HOT hot keys once, none else, each took 1 + $reads calls" \
		"$HOT $HOT 0 $((1 + reads)) $((1 + reads))" \
		"$(q "SELECT count(*), count(DISTINCT key), count(*) FILTER (WHERE key NOT IN (SELECT 'h-' || i FROM generate_series(1, $HOT) i)),
		             min($CAP - remaining), max($CAP - remaining)
		      FROM rl_keys WHERE zone = 'hot'")"
	rl_check "$name: a lookup finds each hot key, with $((CAP - 1 - reads)) left" 0 \
		"$(q "SELECT count(*) FILTER (WHERE (rl_peek('hot', 'h-' || i, 0)).remaining <> $((CAP - 1 - reads))) FROM generate_series(1, $HOT) i")"

	levels=$(shape_levels "$base" "$max_level")
	level=none sets=0
	[ "$(wc -l <<<"$levels")" -eq 1 ] && [ -n "$levels" ] && read -r level sets <<<"$levels"
	rl_check "$name: every key in the set its hash picks, at level ${level} ($level level changes, $sets of $((base << max_level)) sets in use)" \
		one "$([ "$level" != none ] && echo one || echo "levels that fit: '${levels//$'\n'/, }'")"

	rl_check "$name: the server log shows no crash" "" \
		"$(tail -n +"$log_from" "$log" | grep -E 'PANIC|TRAP|stuck spinlock|terminated by signal|was terminated' | head -3)"

	[ "$level" != none ] && total_levels=$((total_levels + level)) total_splits=$((total_splits + sets - base))
	total_new=$((total_new + new)) total_reads=$((total_reads + reads)) rounds_run=$round
	[ "$growth_ms" -gt 0 ] && keys_per_second=$(( new * 1000 / growth_ms ))
	[ "$keys_per_second" -ge 10000 ] || keys_per_second=10000
	echo "# $name: $((SECONDS - round_started)) s"
done

echo "# $rounds_run rounds in $((SECONDS - started_all)) s: $total_levels level changes, $total_splits splits, $total_new new keys; the readers made $((total_reads * HOT)) calls on $HOT hot keys"
echo "shmem growth: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
