#!/usr/bin/env bash
# Fault test of the shmem store's save worker (ratelimit.shmem_save_interval)
# with a real server: a cluster of its own (shmemsave, ratelimit preloaded).
# Prints TAP lines ("ok N - ..."); exits non-zero when a check failed.
#   (a) keys drained, a save taken after them, then pg_ctl stop -m immediate
#       and a start: the drained keys still refuse
#   (b) the same after a backend killed with SIGKILL (the postmaster's crash
#       restart reloads the store)
#   (c) with a long interval, what was decided after the last save is lost
#       in a crash (and only that): at most one interval of decisions
#   (d) interval 0: saves only at a clean shutdown; a crash empties the store
#   (e) a file that is not whole (truncated, a byte changed, random bytes)
#       is ignored (LOG): the store starts empty; 0.5.0's format still loads
#   (f) files saved while the store grows (splits between the worker's
#       copies) hold every key once and every key decided before the save
# Every decision runs on the test clock (ratelimit.now_override).
set -uo pipefail
source "$(dirname "$0")/../../scripts/lib.sh"

DB=rl_shmemsave
FILE=pg_stat/ratelimit_shmem.state
n=0 failed=0
trap 'rl_cluster_stop' EXIT

q() { rl_psql -d "$DB" -tA -c "SET ratelimit.now_override = '2026-01-01 00:00:00+00'" -c "$1" 2>&1; }
admitted() {	# KEY: how many of 5 calls on zone 'saved' are admitted
	q "SELECT count(*) FROM generate_series(1, 5) WHERE (rl_limit('saved', '$1')).allowed"
}
# saved_since [SINCE]: waits (up to 30 s) for a save that began after
# SINCE (a timestamptz; default: now); prints yes or no.
saved_since() {
	local since=${1:-$(q "SELECT clock_timestamp()")}
	for _ in $(seq 1 300); do
		[ "$(q "SELECT saved_at > '$since' FROM ratelimit.shmem_save_status()")" = t ] && { echo yes; return; }
		sleep 0.1
	done
	echo no
}
crash_and_start() {	# immediate stop, start; prints yes when it answers
	rl_cluster_ctl stop -m immediate -w >/dev/null 2>&1
	rl_cluster_ctl start -w -t 60 -l "$RL_CLUSTER_DIR/server.log" >/dev/null 2>&1
	rl_wait_answering "$DB"
}
# set_interval VALUE MS: sets ratelimit.shmem_save_interval and reloads;
# returns once the worker applies it (shmem_save_status shows the worker's).
set_interval() {
	rl_psql -d postgres -tA -c "ALTER SYSTEM SET ratelimit.shmem_save_interval = '$1'" -c "SELECT pg_reload_conf()" >/dev/null
	for _ in $(seq 1 100); do
		[ "$(q "SELECT save_interval_ms FROM ratelimit.shmem_save_status()")" = "$2" ] && return
		sleep 0.1
	done
}

echo "# shmemsave: the shmem store's save worker across crashes"
RL_PRELOAD=ratelimit rl_cluster_start shmemsave "fsync = off" >/dev/null
rl_psql -d postgres -c "CREATE DATABASE $DB" >/dev/null
q "CREATE EXTENSION ratelimit" >/dev/null
q "SELECT rl_zone_set('saved', 'fixed_window', 3, '1 day', store => 'shmem')" >/dev/null

rl_check_numbered "ratelimit.shmem_save_interval is 1000 ms by default" 1000 \
	"$(q "SELECT save_interval_ms FROM ratelimit.shmem_save_status()")"

# (a) An immediate stop after a save.
rl_check_numbered "(a) key a: 3 of 5 calls admitted" 3 "$(admitted a)"
rl_check_numbered "(a) a save began after the calls" yes "$(saved_since)"
rl_check_numbered "(a) the save holds the key" 1 "$(q "SELECT keys FROM ratelimit.shmem_save_status()")"
rl_check_numbered "(a) pg_ctl stop -m immediate, start: the server answers" yes "$(crash_and_start)"
rl_check_numbered "(a) the start loaded the saved keys (LOG)" yes \
	"$(grep -q 'ratelimit: loaded 1 keys of the shmem store' "$RL_CLUSTER_DIR/server.log" && echo yes || echo no)"
rl_check_numbered "(a) after the crash, key a still refuses (0 of 5)" 0 "$(admitted a)"
rl_check_numbered "(a) a new key is admitted as before (3 of 5)" 3 "$(admitted a2)"

# (b) A backend killed with SIGKILL: the postmaster restarts every process
# and sets shared memory up again, loading the last save.
rl_check_numbered "(b) key b: 3 of 5 calls admitted" 3 "$(admitted b)"
rl_check_numbered "(b) a save began after the calls" yes "$(saved_since)"
rl_psql -d "$DB" -tA -c "SELECT pg_sleep(60)" >/dev/null 2>&1 &
victim=""
for _ in $(seq 1 100); do
	victim=$(rl_psql -d postgres -tA -c "SELECT pid FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(60)' AND state = 'active'" | head -1)
	[ -n "$victim" ] && break
	sleep 0.1
done
[ -n "$victim" ] && rl_as_root kill -9 "$victim"
wait 2>/dev/null
rl_check_numbered "(b) a backend killed with SIGKILL" yes "$([ -n "$victim" ] && echo yes || echo no)"
rl_check_numbered "(b) the server answers after its crash restart" yes "$(rl_wait_answering "$DB")"
rl_check_numbered "(b) after the crash restart, keys a and b still refuse" "0 0" "$(admitted a) $(admitted b)"

# (c) A long interval: the worker saves once at the change of setting,
# then not for an hour.  What is decided after that save is lost in a
# crash, and nothing before it.
before_change=$(q "SELECT clock_timestamp()")
admitted before-c >/dev/null	# a change, saved by the 1 s worker or at the reload
set_interval 1h 3600000
rl_check_numbered "(c) a save began when the interval became 1 h" yes "$(saved_since "$before_change")"
rl_check_numbered "(c) key c: 3 of 5 calls admitted, after the last save" 3 "$(admitted c)"
rl_check_numbered "(c) pg_ctl stop -m immediate, start" yes "$(crash_and_start)"
rl_check_numbered "(c) key c's calls were after the last save: lost, it starts full (3 of 5)" 3 "$(admitted c)"
rl_check_numbered "(c) keys a and b, saved before, still refuse" "0 0" "$(admitted a) $(admitted b)"

# (d) Interval 0: no file while running; a clean restart keeps the keys
# (saved at shutdown), a crash empties the store.
set_interval 0 0
rl_check_numbered "(d) with interval 0 the file is removed" no \
	"$([ -e "$RL_PGDATA/$FILE" ] && echo yes || echo no)"
rl_check_numbered "(d) key d: 3 of 5 calls admitted" 3 "$(admitted d)"
rl_cluster_ctl restart -m fast -w -t 60 -l "$RL_CLUSTER_DIR/server.log" >/dev/null 2>&1
rl_check_numbered "(d) a clean restart keeps the keys (saved at shutdown): a, b, d refuse" "0 0 0" \
	"$(admitted a) $(admitted b) $(admitted d)"
rl_check_numbered "(d) the file loaded at start is removed (interval 0)" no \
	"$([ -e "$RL_PGDATA/$FILE" ] && echo yes || echo no)"
rl_check_numbered "(d) a crash with interval 0" yes "$(crash_and_start)"
rl_check_numbered "(d) empties the store: key d starts full (3 of 5)" 3 "$(admitted d)"

# (e) Damaged files, at a start with saves on: a file that is not whole
# is ignored (LOG) and the store starts empty, never loaded in part.  The
# file saved after key e is kept aside; each start gets a variant of it
# (the saved file itself first: what makes the others start full is the
# damage).
set_interval 1s 1000
rl_check_numbered "(e) key e: 3 of 5 calls admitted, saved" "3 yes" "$(admitted e) $(saved_since)"
rl_cluster_ctl stop -m immediate -w >/dev/null 2>&1
VARIANTS=$(mktemp -d)
trap 'rl_cluster_stop; rm -rf "$VARIANTS"' EXIT
rl_as_cluster_user cat "$RL_PGDATA/$FILE" > "$VARIANTS/saved"
size=$(stat -c %s "$VARIANTS/saved")
cp "$VARIANTS/saved" "$VARIANTS/truncated"
truncate -s $((size - 64)) "$VARIANTS/truncated"
# One byte inverted, in the last key: the size is right, the checksum not.
cp "$VARIANTS/saved" "$VARIANTS/flipped"
byte=$(od -An -tu1 -j $((size - 100)) -N1 "$VARIANTS/saved" | tr -d ' ')
printf "\\$(printf %03o $((byte ^ 255)))" | dd of="$VARIANTS/flipped" bs=1 seek=$((size - 100)) conv=notrunc status=none
head -c 4096 /dev/urandom > "$VARIANTS/random"
# 0.5.0 wrote version 6, the same without the checksum, at a clean shutdown.
cp "$VARIANTS/saved" "$VARIANTS/v6"
truncate -s $((size - 4)) "$VARIANTS/v6"
printf '\006' | dd of="$VARIANTS/v6" bs=1 seek=4 conv=notrunc status=none

# start_with VARIANT: the server stopped at once, the file replaced by
# that variant, started; prints yes when it answers.  The log of that start
# alone goes to $VARIANTS/start.log.
start_with() {
	rl_cluster_ctl stop -m immediate -w >/dev/null 2>&1
	rl_as_cluster_user tee "$RL_PGDATA/$FILE" < "$VARIANTS/$1" >/dev/null
	local lines answers
	lines=$(wc -l < "$RL_CLUSTER_DIR/server.log")
	rl_cluster_ctl start -w -t 60 -l "$RL_CLUSTER_DIR/server.log" >/dev/null 2>&1
	answers=$(rl_wait_answering "$DB")
	tail -n +$((lines + 1)) "$RL_CLUSTER_DIR/server.log" > "$VARIANTS/start.log"
	echo "$answers"
}
logged() {	# PATTERN: yes when the last start logged it
	grep -q "$1" "$VARIANTS/start.log" && echo yes || echo no
}

rl_check_numbered "(e) the saved file as it is: the server starts" yes "$(start_with saved)"
rl_check_numbered "(e) ... loads it (LOG), and key e still refuses (0 of 5)" "yes 0" \
	"$(logged 'ratelimit: loaded [0-9]* keys') $(admitted e)"
rl_check_numbered "(e) a truncated file: the server starts" yes "$(start_with truncated)"
rl_check_numbered "(e) ... ignores it, saying why (LOG), and key e starts full (3 of 5)" "yes 3" \
	"$(logged 'ignoring ratelimit shmem state file.*size') $(admitted e)"
rl_check_numbered "(e) a file with one byte changed: the server starts" yes "$(start_with flipped)"
rl_check_numbered "(e) ... ignores it, its checksum wrong (LOG), and key e starts full (3 of 5)" "yes 3" \
	"$(logged 'ignoring ratelimit shmem state file.*checksum') $(admitted e)"
rl_check_numbered "(e) a file of random bytes: the server starts" yes "$(start_with random)"
rl_check_numbered "(e) ... ignores it, saying so (LOG), and key e starts full (3 of 5)" "yes 3" \
	"$(logged 'ignoring ratelimit shmem state file') $(admitted e)"
rl_check_numbered "(e) the same state in 0.5.0's format (version 6): the server starts" yes "$(start_with v6)"
rl_check_numbered "(e) ... loads it after an update of the library (LOG), and key e refuses (0 of 5)" "yes 0" \
	"$(logged 'ratelimit: loaded [0-9]* keys') $(admitted e)"

# (f) Saves while the store grows: a split moves keys between two sets,
# and one may fall between the worker's copies of them.  A background
# client drains new keys g1, g2, ... (a zone of 1 a day) in batches, the
# store splitting sets all along, while another calls the first 2,000 again
# and the worker saves every 10 ms; files
# are taken as they are saved.  Each, loaded at a start, must hold every
# key once (none written twice) and every key decided before the save
# began (none missed).
q "SELECT rl_zone_set('grown', 'fixed_window', 1, '1 day', store => 'shmem')" >/dev/null
set_interval 10ms 10
(
	for b in $(seq 1 100); do
		q "SELECT count(rl_limit('grown', 'g' || i)) FROM generate_series($(( (b - 1) * 500 + 1 )), $((b * 500))) i" >/dev/null
		echo "$b" >> "$VARIANTS/batches"
	done
) &
grower=$!
# Another client calls the first keys again and again (refused: they stay
# drained), so that most sets change every round and a round copies them.
(
	sleep 0.5
	while kill -0 "$grower" 2>/dev/null; do
		q "SELECT count(rl_limit('grown', 'g' || i)) FROM generate_series(1, 2000) i" >/dev/null
	done
) &
toucher=$!
snapshots=0
while kill -0 "$grower" 2>/dev/null && [ "$snapshots" -lt 60 ]; do
	done_keys=$(( $(tail -1 "$VARIANTS/batches" 2>/dev/null || echo 0) * 500 ))
	[ "$(saved_since)" = yes ] || break
	snapshots=$((snapshots + 1))
	rl_as_cluster_user cat "$RL_PGDATA/$FILE" > "$VARIANTS/grown$snapshots"
	echo "$done_keys" > "$VARIANTS/grown$snapshots.keys"
done
wait "$grower" "$toucher"
rl_check_numbered "(f) files saved while the store grew (at least 8)" yes \
	"$([ "$snapshots" -ge 8 ] && echo yes || echo "no: $snapshots")"
# Each file's size, against what its header says: the header (its size
# known from the file of (e)), count entries of entry_size, the checksum.
header_bytes() {	# FILE: the bytes before the entries, from the header's count
	echo $(( $(stat -c %s "$1") - 4 - $(od -An -tu4 -j8 -N4 "$1") * $(od -An -tu8 -j16 -N8 "$1") ))
}
header=$(header_bytes "$VARIANTS/saved")
wrong=""
for i in $(seq 1 "$snapshots"); do
	[ "$(header_bytes "$VARIANTS/grown$i")" = "$header" ] || wrong+=" $i"
done
rl_check_numbered "(f) every file holds as many keys as its header says" "" "$wrong"
# Four of them loaded at a start, spread over the growth.
for i in $(seq "$((snapshots / 4))" "$((snapshots / 4))" "$snapshots" | tail -4); do
	expected=$(cat "$VARIANTS/grown$i.keys")
	start_with "grown$i" >/dev/null
	rl_check_numbered "(f) file $i: loaded, each key once, the $expected keys decided before its save all there" \
		"yes 0 $expected" "$(logged 'ratelimit: loaded [0-9]* keys') $(q "
		SELECT count(*) - count(DISTINCT key),
		       count(*) FILTER (WHERE substr(key, 2)::int <= $expected)
		  FROM ratelimit.shmem_keys()
		 WHERE zone_id = (SELECT zone_id FROM ratelimit.zone WHERE zone = 'grown')" | tr '|' ' ')"
done

echo "1..$n"
echo "shmemsave: $((n - failed)) passed, $failed failed"
[ "$failed" -eq 0 ]
