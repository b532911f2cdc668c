#!/usr/bin/env bash
# Fault test of the shmem store.  Starts clusters of its own
# (scripts/lib.sh) and prints "ok"/"not ok" lines:
# The crash checks run with ratelimit.shmem_save_interval = 0 (saves at
# clean shutdown only); test/fault/shmem_save.sh checks the periodic saves.
#   shmemfault  (a) a clean restart (fast, then smart) keeps the state, the
#               log says how many keys were loaded, the file is removed
#               once loaded; (c) a backend killed with SIGKILL: crash
#               recovery, the state is empty (the file is not loaded
#               again) and the server answers; (b) an immediate stop: the
#               state is empty after the start; (f) two databases: a
#               zone's keys, rl_token_bucket's keys and the counters are
#               each database's own, as on the table store
#   shmemfull   (d) ratelimit.shmem_max_keys = 62 (2 sets of 31): thousands
#               of keys, no crash; recovered keys are evicted (counted),
#               then by fair shares (a zone holding fewer keys takes room
#               from one holding more, drained keys too); a key that
#               recovered only under its zone's old limit forgives its
#               missing tokens under the new one; with no room (a zone's
#               own keys all drained), shmem_full_policy allow / deny /
#               error, counted in rl_counters.full; a dropped zone frees
#               its entries
#   shmemgrow   (g) 50000 keys in a store that starts with 806 entries
#               in use: it grows, each key kept once and found again, also
#               after a restart that loads them; grown to its end, a store
#               of 2000 keys keeps all 68 x 31 entries its sets hold
#               (h) placement keyed by the server's secret: keys chosen
#               to share a set under the old unkeyed hash spread; the
#               secret survives a clean restart and not a crash;
#               any N keys fit whatever their hashes: 400 keys that
#               share one set of 31 are all kept beside 1500 others in a
#               store of 2000 (lent ways), found again, after a restart
#               too; a reset and a zone drop give the lent ways back;
#               two clients race to create and decide on 400 such keys;
#               20000 keys that never recover in a store of 20000 all fit
#   nopreload   (e) without ratelimit in shared_preload_libraries: a shmem
#               call raises 55000 with a hint, everything else works
set -uo pipefail
source "$(dirname "$0")/../../scripts/lib.sh"

cleanup() {
	local c
	for c in shmemfault shmemfull shmemgrow nopreload; do
		rl_cluster_use "$c"
		rl_cluster_stop
	done
}
trap cleanup EXIT

DB=rl_shmem
CLOCK='2026-01-01 00:00:00+00'
# q SQL [setting=value ...]: one statement on $DB at $CLOCK; output or error.
q() {
	local sql=$1; shift
	local args=(-c "SET ratelimit.now_override = '$CLOCK'") s
	for s in "$@"; do args+=(-c "SET ${s%%=*} = '${s#*=}'"); done
	rl_psql -d "$DB" -tA "${args[@]}" -c "$sql" 2>&1
}
new_db() {
	rl_psql -d postgres -c "DROP DATABASE IF EXISTS $1" -c "CREATE DATABASE $1" >/dev/null
	rl_psql -d "$1" -c 'CREATE EXTENSION ratelimit' -c "$RL_ERR_OF_SQL" >/dev/null
}
state_file() {		# present / absent
	if rl_as_cluster_user test -e "$RL_PGDATA/pg_stat/ratelimit_shmem.state"; then echo present; else echo absent; fi
}
loaded_lines() { grep -c "ratelimit: loaded .* keys of the shmem store" "$RL_CLUSTER_DIR/server.log"; }
has() { grep -qF -- "$1" <<<"$2" && echo yes || echo no; }	# has TEXT OUTPUT
counters() { q "SELECT allowed || ' ' || refused || ' ' || evicted || ' ' || \"full\" FROM rl_counters WHERE zone = '$1'"; }
room() { q "SELECT evicted || ' ' || forgiven || ' ' || keys FROM rl_counters WHERE zone = '$1'"; }	# room ZONE

###########################################################################
echo "# shmemfault: restarts, crash, immediate stop, two databases"
# Saves only at a clean shutdown (the interval 0): what this part checks.
# The periodic saves (a crash loads the last one) are test/fault/shmem_save.sh's.
rl_cluster_start shmemfault "fsync = off" "ratelimit.shmem_save_interval = 0"
new_db $DB
q "SELECT rl_zone_set('f_tb', 'token_bucket', 10, '1 minute', store => 'shmem'),
          rl_zone_set('f_fw', 'fixed_window', 5, '1 hour', store => 'shmem')" >/dev/null

# (a) Four keys: a token_bucket zone (capacity 10, one token every 6 s), a
# fixed_window zone (5 per hour), rl_token_bucket and rl_gcra on the shmem
# store.  The test clock stands still, so the next values are exact.
rl_check "(a) shmem zone: take 4 of 10" 6 "$(q "SELECT remaining FROM rl_limit('f_tb', 'k', 4)")"
rl_check "(a) a 100-byte key (kept as a keyed 128-bit hash): take 3 of 10" 7 \
	"$(q "SELECT remaining FROM rl_limit('f_tb', repeat('x', 99) || 'y', 3)")"
rl_check "(a) fixed_window shmem zone: take 2 of 5" 3 "$(q "SELECT remaining FROM rl_limit('f_fw', 'k', 2)")"
rl_check "(a) rl_token_bucket on shmem: take 4 of 10" 6 "$(q "SELECT rl_token_bucket('fault', 1, 10, 4)" ratelimit.default_store=shmem)"
rl_check "(a) rl_gcra on shmem: take 5 of 16" 11 "$(q "SELECT remaining FROM rl_gcra('fault', 15, 30, 60, 5)" ratelimit.default_store=shmem)"
rl_check "(a) nothing of it is in the state table" 0 "$(q "SELECT count(*) FROM ratelimit.state")"
rl_check "(a) no state file while running" absent "$(state_file)"
rl_check "(a) no key was loaded at the first start" 0 "$(loaded_lines)"

rl_cluster_ctl restart -m fast -w -l "$RL_CLUSTER_DIR/server.log" >/dev/null
rl_check "(a) restart -m fast: the log says 5 keys were loaded" 1 \
	"$(grep -c 'ratelimit: loaded 5 keys of the shmem store from "pg_stat/ratelimit_shmem.state"' "$RL_CLUSTER_DIR/server.log")"
rl_check "(a) the state file is removed once loaded" absent "$(state_file)"
rl_check "(a) counters start again with the server: no call counted, only the keys loaded" \
	"(rl_gcra):0,0,1 (rl_token_bucket):0,0,1 f_fw:0,0,1 f_tb:0,0,2" \
	"$(q "SELECT string_agg(zone || ':' || allowed || ',' || refused || ',' || keys, ' ' ORDER BY zone) FROM rl_counters")"
rl_check "(a) shmem zone key survives: 6 left" 6 "$(q "SELECT remaining FROM rl_limit('f_tb', 'k', 0)")"
rl_check "(a) the 100-byte key survives (its hash is keyed by the secret saved with it): 7 left" 7 \
	"$(q "SELECT remaining FROM rl_limit('f_tb', repeat('x', 99) || 'y', 0)")"
rl_check "(a) fixed_window key survives: 3 left" 3 "$(q "SELECT remaining FROM rl_limit('f_fw', 'k', 0)")"
rl_check "(a) rl_token_bucket key survives: 6 left" 6 "$(q "SELECT rl_token_bucket('fault', 1, 10, 0)" ratelimit.default_store=shmem)"
rl_check "(a) rl_gcra key survives: 11 left" 11 "$(q "SELECT remaining FROM rl_gcra('fault', 15, 30, 60, 0)" ratelimit.default_store=shmem)"
rl_check "(a) a new key is still full" 10 "$(q "SELECT remaining FROM rl_limit('f_tb', 'new', 0)")"
rl_check "(a) take 1 more: 5 left" 5 "$(q "SELECT remaining FROM rl_limit('f_tb', 'k')")"

# A smart shutdown is clean too: stopped, the file is there (and no .tmp).
rl_cluster_ctl stop -m smart -w >/dev/null
rl_check "(a) stop -m smart writes the state file" present "$(state_file)"
rl_check "(a) no temporary file left" absent \
	"$(rl_as_cluster_user test -e "$RL_PGDATA/pg_stat/ratelimit_shmem.state.tmp" && echo present || echo absent)"
rl_cluster_ctl start -w -l "$RL_CLUSTER_DIR/server.log" >/dev/null
rl_check "(a) smart stop + start: the log says 5 keys were loaded again" 2 \
	"$(grep -c 'ratelimit: loaded 5 keys of the shmem store' "$RL_CLUSTER_DIR/server.log")"
rl_check "(a) the key survives a second restart: 5 left" 5 "$(q "SELECT remaining FROM rl_limit('f_tb', 'k', 0)")"
rl_check "(a) the state file is removed once loaded (again)" absent "$(state_file)"

# (c) Kill a backend in the middle of a long bulk call on a shmem key.  The
# postmaster reinitializes shared memory: every key starts afresh, and the
# state file of the last clean start (removed once loaded) does not come
# back.
rl_check "(c) take 4 of 10 on a second key" 6 "$(q "SELECT remaining FROM rl_limit('f_tb', 'before-kill', 4)")"
q "SELECT count(*) FILTER (WHERE (r).allowed)
   FROM (SELECT rl_limit('f_tb', 'killed') AS r FROM (SELECT generate_series(1, 100000000)) g OFFSET 0) s" >/dev/null 2>&1 &
bulk=$!
# Killed once its calls have emptied the key (the shmem store writes no xid).
pid=$(rl_kill_busy_backend "$DB" killed \
	"SET ratelimit.now_override = '$CLOCK'; SELECT remaining = 0 FROM rl_limit('f_tb', 'killed', 0)")
wait "$bulk" 2>/dev/null
rl_check "(c) killed the busy backend while it was calling (its key emptied)" yes "$([ -n "$pid" ] && echo yes || echo no)"
rl_check "(c) the server answers after crash recovery" yes "$(rl_wait_answering)"
rl_check "(c) the server log shows the crash" yes \
	"$(grep -q 'terminated by signal 9' "$RL_CLUSTER_DIR/server.log" && echo yes || echo no)"
rl_check "(c) nothing was loaded at the reinitialization" 2 "$(loaded_lines)"
rl_check "(c) the key of the killed call starts full" 10 "$(q "SELECT remaining FROM rl_limit('f_tb', 'killed', 0)")"
rl_check "(c) the other key starts full" 10 "$(q "SELECT remaining FROM rl_limit('f_tb', 'before-kill', 0)")"
rl_check "(c) the key saved at the last clean stop is not loaded again" 10 "$(q "SELECT remaining FROM rl_limit('f_tb', 'k', 0)")"
rl_check "(c) rl_token_bucket's key starts full" 10 "$(q "SELECT rl_token_bucket('fault', 1, 10, 0)" ratelimit.default_store=shmem)"
rl_check "(c) decisions work after recovery" 9 "$(q "SELECT remaining FROM rl_limit('f_tb', 'after-kill')")"

# (b) An immediate stop writes no file: every key starts afresh.
rl_check "(b) take 7 of 10" 3 "$(q "SELECT remaining FROM rl_limit('f_tb', 'k', 7)")"
rl_check "(b) rl_token_bucket: take 8 of 10" 2 "$(q "SELECT rl_token_bucket('fault', 1, 10, 8)" ratelimit.default_store=shmem)"
rl_cluster_ctl stop -m immediate -w >/dev/null
rl_check "(b) stop -m immediate writes no state file" absent "$(state_file)"
rl_cluster_ctl start -w -l "$RL_CLUSTER_DIR/server.log" >/dev/null
rl_check "(b) the server answers after the immediate stop" yes "$(rl_wait_answering)"
rl_check "(b) nothing was loaded" 2 "$(loaded_lines)"
rl_check "(b) the zone key starts full" 10 "$(q "SELECT remaining FROM rl_limit('f_tb', 'k', 0)")"
rl_check "(b) the fixed_window key starts full" 5 "$(q "SELECT remaining FROM rl_limit('f_fw', 'k', 0)")"
rl_check "(b) rl_token_bucket's key starts full" 10 "$(q "SELECT rl_token_bucket('fault', 1, 10, 0)" ratelimit.default_store=shmem)"
rl_check "(b) rl_gcra's key starts full" 16 "$(q "SELECT remaining FROM rl_gcra('fault', 15, 30, 60, 0)" ratelimit.default_store=shmem)"
rl_check "(b) decisions work" 9 "$(q "SELECT remaining FROM rl_limit('f_tb', 'k')")"

# (f) Two databases, each with a fresh extension: their first zones have
# the same zone id.  On the table store everything is per database; the
# shmem store must keep them apart as well.
new_db rl_shmem_a
new_db rl_shmem_b
DB=rl_shmem_a q "SELECT rl_zone_set('xdb_a', 'token_bucket', 10, '1 minute', store => 'shmem')" >/dev/null
DB=rl_shmem_b q "SELECT rl_zone_set('xdb_b', 'fixed_window', 10, '1 minute', store => 'shmem')" >/dev/null
rl_check "(f) precondition: both databases' zones have zone id 1" "1 1" \
	"$(DB=rl_shmem_a q "SELECT zone_id FROM ratelimit.zone") $(DB=rl_shmem_b q "SELECT zone_id FROM ratelimit.zone")"
rl_check "(f) database a: take 7 of 10 on key xk" 3 "$(DB=rl_shmem_a q "SELECT remaining FROM rl_limit('xdb_a', 'xk', 7)")"
rl_check "(f) database b: key xk of its own zone is new (9 of 10 left after one call)" 9 \
	"$(DB=rl_shmem_b q "SELECT remaining FROM rl_limit('xdb_b', 'xk')")"
rl_check "(f) database b's rl_counters counts only its zone's call" "1 0 0 0" "$(DB=rl_shmem_b counters xdb_b)"
rl_check "(f) database a: rl_token_bucket on shmem, take 4 of 10" 6 \
	"$(DB=rl_shmem_a q "SELECT rl_token_bucket('xdb', 1, 10, 4)" ratelimit.default_store=shmem)"
rl_check "(f) database b: rl_token_bucket key of the same name is its own (9 left)" 9 \
	"$(DB=rl_shmem_b q "SELECT rl_token_bucket('xdb', 1, 10)" ratelimit.default_store=shmem)"
DB=rl_shmem_b q "SELECT rl_zone_drop('xdb_b')" >/dev/null
rl_check "(f) dropping database b's zone leaves database a's key alone (3 left)" 3 \
	"$(DB=rl_shmem_a q "SELECT remaining FROM rl_limit('xdb_a', 'xk', 0)")"
rl_cluster_stop

###########################################################################
echo "# shmemfull: ratelimit.shmem_max_keys = 62"
rl_cluster_start shmemfull "fsync = off" "ratelimit.shmem_max_keys = 62"
DB=rl_shmem
new_db $DB
rl_check "(d) ratelimit.shmem_max_keys is 62" 62 "$(q "SHOW ratelimit.shmem_max_keys")"
# Capacity 1, one token a minute: a key that took its token has recovered
# 60 s later.  62 entries = 2 sets of 31; 5000 keys fill both.
q "SELECT rl_zone_set('full_tb', 'token_bucket', 1, '1 minute', store => 'shmem')" >/dev/null
# many CLOCK ZONE PREFIX N [settings]: N calls on new keys; "allowed refused".
# The store-full WARNING goes to the server log only (checked there).
many() {
	local clock=$1 zone=$2 prefix=$3 n=$4; shift 4
	CLOCK=$clock q "SELECT count(*) FILTER (WHERE (r).allowed) || ' ' || count(*) FILTER (WHERE NOT (r).allowed)
	                FROM (SELECT rl_limit('$zone', '$prefix' || g) AS r FROM generate_series(1, $n) g OFFSET 0) s" \
		client_min_messages=error "$@"
}
full_started=$(date +%s)
T0='2026-01-01 00:00:00+00' T1='2026-01-01 00:01:01+00' T2='2026-01-01 00:02:02+00' T3='2026-01-01 00:03:03+00'

rl_check "(d) 5000 new keys, policy allow: all admitted" "5000 0" "$(many "$T0" full_tb k 5000)"
rl_check "(d) 62 stored, 4938 found no room (counted as full)" "5000 0 0 4938" "$(counters full_tb)"
rl_check "(d) the same keys again: the 62 stored ones are empty (refused), the others decide as new (allow)" \
	"4938 62" "$(many "$T0" full_tb k 5000)"
rl_check "(d) counters: 9938 allowed, 62 refused, nothing evicted (no key has recovered)" \
	"9938 62 0 9876" "$(counters full_tb)"
rl_check "(d) policy deny: 100 new keys refused" "0 100" "$(many "$T0" full_tb d 100 ratelimit.shmem_full_policy=deny)"
rl_check "(d) policy deny: remaining 0, retry after 1 s" "0|00:00:01" \
	"$(CLOCK=$T0 q "SELECT remaining || '|' || retry_after FROM rl_limit('full_tb', 'd-one')" ratelimit.shmem_full_policy=deny)"
rl_check "(d) policy error: 53400" 53400 \
	"$(CLOCK=$T0 q "SELECT err_of(\$\$SELECT rl_limit('full_tb', 'e1')\$\$)" ratelimit.shmem_full_policy=error | cut -d' ' -f1)"
rl_check "(d) policy error: the message says why" yes \
	"$(has 'ERROR:  the ratelimit shmem store has no room for a new key of full_tb' \
		"$(CLOCK=$T0 q "SELECT rl_limit('full_tb', 'e2')" ratelimit.shmem_full_policy=error)")"
rl_check "(d) counters: refusals of deny counted as refused and full; errors as full only" \
	"9938 163 0 9979" "$(counters full_tb)"
# Fair shares: rl_token_bucket's buckets are a zone of their own, which
# holds no key; full_tb holds all 62.  100 drained buckets (1 a second,
# capacity 1, cost 1) take room from full_tb, though its keys are drained
# too, until both hold 31 (each set keeps a key of full_tb until then);
# the other 69 find their own zone's keys drained: the policy decides.
rl_check "(d) 100 drained rl_token_bucket buckets, allow: all admitted" "100 0" \
	"$(CLOCK=$T0 q "SELECT count(*) FILTER (WHERE r >= 0) || ' ' || count(*) FILTER (WHERE r < 0)
	                FROM (SELECT rl_token_bucket('fill' || g, 1, 1) AS r FROM generate_series(1, 100) g OFFSET 0) s" \
	   ratelimit.default_store=shmem client_min_messages=error)"
rl_check "(d) 31 of full_tb's keys evicted for them, 1 token forgiven each; both zones hold 31" "31 31 31 0 31" \
	"$(room full_tb) $(room '(rl_token_bucket)' | cut -d' ' -f2-)"
rl_check "(d) 69 buckets found their own zone's keys drained (full)" "100 0 0 69" "$(counters '(rl_token_bucket)')"
rl_check "(d) rl_token_bucket, no room, allow: decided as a new bucket (59 of 60)" 59 \
	"$(CLOCK=$T0 q "SELECT rl_token_bucket('full-adhoc', 1, 60)" ratelimit.default_store=shmem)"
rl_check "(d) rl_token_bucket, no room, deny: -1" -1 \
	"$(CLOCK=$T0 q "SELECT rl_token_bucket('full-adhoc', 1, 60)" ratelimit.default_store=shmem ratelimit.shmem_full_policy=deny)"
rl_check "(d) rl_token_bucket, no room, error: 53400" 53400 \
	"$(CLOCK=$T0 q "SELECT err_of(\$\$SELECT rl_token_bucket('full-adhoc', 1, 60)\$\$)" ratelimit.default_store=shmem ratelimit.shmem_full_policy=error | cut -d' ' -f1)"
rl_check "(d) (rl_token_bucket) counters: 101 allowed, 1 refused, 72 full" "101 1 0 72" "$(counters '(rl_token_bucket)')"

# 61 s later every stored key has its token back: evicted for new keys.
rl_check "(d) 61 s later, 5000 other new keys: all admitted" "5000 0" "$(many "$T1" full_tb r 5000)"
rl_check "(d) the 62 recovered keys (31 of them buckets) were evicted (and counted), 4938 more found no room" \
	"14938 163 62 14917" "$(counters full_tb)"
rl_check "(d) keys that have not recovered are not evicted: deny refuses 100 more new keys" "0 100" \
	"$(many "$T1" full_tb n 100 ratelimit.shmem_full_policy=deny)"
rl_check "(d) evicted still 62" "14938 263 62 15017" "$(counters full_tb)"

# A key that recovered under its zone's old limit but not under the new one
# has not recovered: the zone's capacity grows from 1 to 10 (same
# algorithm, state kept); 61 s after taking its token a key holds ~1 token
# of 10, and forgetting it forgives 9 (a new key would get 10), not 0.
q "SELECT rl_zone_set('grow', 'token_bucket', 1, '1 minute', store => 'shmem')" >/dev/null
rl_check "(d) zone grow fills the table at T2 (the r keys, recovered, are evicted)" "5000 0" "$(many "$T2" grow g 5000)"
rl_check "(d) 62 of full_tb's keys evicted for it" "14938 263 124 15017" "$(counters full_tb)"
q "SELECT rl_zone_set('grow', 'token_bucket', 1, '1 minute', burst => 10, store => 'shmem')" >/dev/null
q "SELECT rl_zone_set('probe', 'token_bucket', 1, '1 minute', store => 'shmem')" >/dev/null
rl_check "(d) 61 s later, 100 new keys of another zone (allow)" "100 0" "$(many "$T3" probe p 100)"
rl_check "(d) they took room from grow, the larger zone, until both held 31: 31 evicted, 9 tokens forgiven each" \
	"5000 0 31 4938 279 31 31" "$(counters grow) $(room grow | cut -d' ' -f2-) $(room probe | cut -d' ' -f3)"
rl_check "(d) grow's 31 stored keys decide from their state (~1 token: cost 1 leaves 0), the rest as new keys (9)" \
	"31 4969" "$(CLOCK=$T3 q "SELECT count(*) FILTER (WHERE (r).remaining = 0) || ' ' || count(*) FILTER (WHERE (r).remaining = 9)
	                          FROM (SELECT rl_peek('grow', 'g' || g) AS r FROM generate_series(1, 5000) g OFFSET 0) s")"

# Dropping a zone frees its entries at once (its keys have not recovered).
q "SELECT rl_zone_drop('grow'), rl_zone_drop('probe')" >/dev/null
q "SELECT rl_zone_set('after_drop', 'token_bucket', 1, '1 minute', store => 'shmem')" >/dev/null
rl_check "(d) after the drops, 5000 new keys of a new zone" "5000 0" "$(many "$T3" after_drop a 5000)"
rl_check "(d) all 62 entries were free: 4938 found no room, nothing evicted" "5000 0 0 4938" "$(counters after_drop)"
# Never silent, never a flood: one WARNING per 10 s for the whole server.
full_warnings=$(grep -c 'WARNING:  the ratelimit shmem store is full' "$RL_CLUSTER_DIR/server.log")
full_seconds=$(( $(date +%s) - full_started ))
rl_check "(d) the server log warns that the store is full, at most once per 10 s ($full_warnings in ${full_seconds}s)" yes \
	"$([ "$full_warnings" -ge 1 ] && [ "$full_warnings" -le $(( full_seconds / 10 + 1 )) ] && echo yes || echo no)"
rl_check "(d) the warning names the setting to raise" yes \
	"$(grep -q 'HINT:  Raise ratelimit.shmem_max_keys (now 62' "$RL_CLUSTER_DIR/server.log" && echo yes || echo no)"
rl_check "(d) the server is healthy" yes "$(rl_wait_answering)"
rl_check "(d) no backend crashed" no \
	"$(grep -qE 'terminated by signal|server process .* was terminated' "$RL_CLUSTER_DIR/server.log" && echo yes || echo no)"
rl_cluster_stop

###########################################################################
echo "# shmemgrow: the store grows with its keys"
# ratelimit.shmem_max_keys = 200000: 6452 sets of 31, allocated as 26 << 8
# (6656); the store starts with 26 in use and splits one more at a time.
rl_cluster_start shmemgrow "fsync = off" "ratelimit.shmem_max_keys = 200000"
DB=rl_shmem
new_db $DB
q "SELECT rl_zone_set('grow', 'token_bucket', 100, '100000 seconds', store => 'shmem')" >/dev/null
# grown TAKEN: "rows distinct wrong" over the 50000 keys 'g1' ... of zone
# grow, each of which should hold 100 - TAKEN - (i % 7) tokens.
grown() {
	q "SELECT count(*) || ' ' || count(DISTINCT key) || ' '
	          || count(*) FILTER (WHERE remaining <> 100 - $1 - substr(key, 2)::int % 7)
	   FROM rl_keys WHERE zone = 'grow'"
}
rl_check "(g) 50000 new keys in a store that starts with 26 sets (806 entries) in use, taking 1 to 7 each" 50000 \
	"$(q "SELECT count(*) FILTER (WHERE (rl_limit('grow', 'g' || i, 1 + i % 7)).allowed)
	      FROM generate_series(1, 50000) i")"
rl_check "(g) rl_keys: each key once, with what it took" "50000 50000 0" "$(grown 1)"
rl_check "(g) none evicted, none found its set full" "50000 0 0 0" "$(counters grow)"
rl_check "(g) each key taken from again is found where it was put" 50000 \
	"$(q "SELECT count(*) FILTER (WHERE (rl_limit('grow', 'g' || i, 1)).allowed)
	      FROM generate_series(1, 50000) i")"
rl_check "(g) rl_keys: still each key once, one token less" "50000 50000 0" "$(grown 2)"
rl_cluster_ctl restart -m fast -w -l "$RL_CLUSTER_DIR/server.log" >/dev/null
rl_check "(g) restart -m fast: the log says 50000 keys were loaded" 1 \
	"$(grep -c 'ratelimit: loaded 50000 keys of the shmem store' "$RL_CLUSTER_DIR/server.log")"
rl_check "(g) the loaded store grew as it loaded: each key once, as it was" "50000 50000 0" "$(grown 2)"
rl_check "(g) each loaded key is found where the load put it" 50000 \
	"$(q "SELECT count(*) FILTER (WHERE (rl_limit('grow', 'g' || i, 1)).allowed)
	      FROM generate_series(1, 50000) i")"
rl_check "(g) rl_keys after the restart: each key once, one token less" "50000 50000 0" "$(grown 3)"
# Fully grown, a store holds every set of 31 it was allocated: 2000 keys
# need 65 sets, allocated as 17 << 2 (68, 2108 entries).  Keys that do not
# recover, offered until every set is full, are all kept until then; after
# that each new one pushes out one of its zone's (each misses 1 token).
rl_cluster_stop
rl_cluster_start shmemgrow "fsync = off" "ratelimit.shmem_max_keys = 2000"
new_db $DB
q "SELECT rl_zone_set('grow', 'token_bucket', 100, '100000 seconds', store => 'shmem')" >/dev/null
rl_check "(g) shmem_max_keys = 2000, policy deny: 20000 keys that miss 1 token each, all admitted" "20000 0" \
	"$(many "$CLOCK" grow f 20000 ratelimit.shmem_full_policy=deny)"
rl_check "(g) 2108 kept (68 full sets of 31), 17892 evicted for newer ones, 1 token forgiven each, none refused" \
	"20000 0 17892 0 17892 2108" "$(counters grow) $(room grow | cut -d' ' -f2-)"
rl_check "(g) rl_keys shows the 2108" 2108 "$(q "SELECT count(DISTINCT key) FROM rl_keys WHERE zone = 'grow'")"

# Placement is keyed by the server's secret.  Before it, the store hashed a
# key with hash_bytes_extended seeded with the database and the zone id,
# which SQL computes too (hashtextextended): 400 keys chosen that way to
# share one set of 68 (the base set of the top 16 bits of the high half,
# plus 17 times its 2 lowest bits) now land all over the store.
#
# Any N keys fit, whatever their hashes: 400 keys that share one set of 31
# (found by asking the owner-only ratelimit.shmem_placement) beside 1500
# keys spread as usual, 1900 of shmem_max_keys = 2000.  A set that is full
# lends the others' ways; none of it may be refused.
rl_cluster_stop
rl_cluster_start shmemgrow "fsync = off" "ratelimit.shmem_max_keys = 2000" "ratelimit.shmem_save_interval = 0"
new_db $DB
q "SELECT rl_zone_set('spread', 'token_bucket', 100, '100000 seconds', store => 'shmem'),
          rl_zone_set('hot', 'token_bucket', 100, '100000 seconds', store => 'shmem')" >/dev/null
# unkeyed ZONE TABLE: TABLE(key) of 400 keys of ZONE that shared one set
# under the unkeyed hash.
unkeyed() {
	q "CREATE TABLE $2 AS
	   WITH seed AS (SELECT ((SELECT oid FROM pg_database WHERE datname = current_database())::bigint << 32)
	                        | (SELECT zone_id FROM ratelimit.zone WHERE zone = '$1') AS seed),
	        hashed AS (SELECT i, 'c' || i AS key,
	                          (hashtextextended('c' || i, seed) >> 32) & 4294967295 AS high
	                   FROM seed, generate_series(1, 100000) i),
	        placed AS (SELECT i, key, ((high >> 16) * 17 >> 16) + 17 * (high & 3) AS set_index FROM hashed)
	   SELECT key FROM placed
	   WHERE set_index = (SELECT set_index FROM placed WHERE i = 1) ORDER BY i LIMIT 400" >/dev/null
}
# colliding ZONE TABLE: creates TABLE(key) of 400 keys of ZONE that share one set.
colliding() {
	q "CREATE TABLE $2 AS
	   WITH placed AS (SELECT i, 'c' || i AS key,
	                          ratelimit.shmem_placement((SELECT zone_id FROM ratelimit.zone WHERE zone = '$1'), 'c' || i) AS set_index
	                   FROM generate_series(1, 100000) i)
	   SELECT key FROM placed
	   WHERE set_index = (SELECT set_index FROM placed WHERE i = 1) ORDER BY i LIMIT 400" >/dev/null
}
unkeyed hot unkeyed
rl_check "(h) the unkeyed hash's 400 keys of one set spread: in 50 or more of the 68 sets, 25 or fewer in any" "400 true" \
	"$(q "SELECT count(*) || ' ' || (count(DISTINCT set_index) >= 50 AND max(n) <= 25)
	      FROM (SELECT set_index, count(*) OVER (PARTITION BY set_index) AS n
	            FROM unkeyed, ratelimit.shmem_placement((SELECT zone_id FROM ratelimit.zone WHERE zone = 'hot'), key) set_index) p")"
rl_check "(h) ordinary roles may not ask where a key is placed" "42501" \
	"$(q "CREATE ROLE nosy; GRANT USAGE ON SCHEMA ratelimit TO nosy; SET ROLE nosy;
	      SELECT err_of('SELECT ratelimit.shmem_placement(1, ''k'')')" | cut -d' ' -f1)"
colliding hot colliding
rl_check "(h) 400 keys of one set (of 68) found" 400 "$(q "SELECT count(*) FROM colliding")"
q "CREATE TABLE colliding_placed AS
   SELECT key, z.zone_id, ratelimit.shmem_placement(z.zone_id, key) AS set_index
   FROM colliding, ratelimit.zone z WHERE z.zone = 'hot'" >/dev/null
rl_check "(h) policy deny: 1500 spread keys, then the 400 of one set, all admitted" "1500 0 400 0" \
	"$(many "$CLOCK" spread s 1500 ratelimit.shmem_full_policy=deny) $(
	   q "SELECT count(*) FILTER (WHERE (r).allowed) || ' ' || count(*) FILTER (WHERE NOT (r).allowed)
	      FROM (SELECT rl_limit('hot', key, 3) AS r FROM colliding OFFSET 0) s" ratelimit.shmem_full_policy=deny)"
rl_check "(h) none found the store full, none evicted" "1500 0 0 0 400 0 0 0" "$(counters spread) $(counters hot)"
# hot_keys TAKEN: "rows distinct wrong" of zone hot in rl_keys.
hot_keys() {
	q "SELECT count(*) || ' ' || count(DISTINCT key) || ' ' || count(*) FILTER (WHERE remaining <> 100 - $1)
	   FROM rl_keys WHERE zone = 'hot'"
}
rl_check "(h) rl_keys: each of the 400 once, with its 3 tokens taken" "400 400 0" "$(hot_keys 3)"
rl_check "(h) each is found again where it was put (96 left)" 400 \
	"$(q "SELECT count(*) FILTER (WHERE (rl_limit('hot', key, 1)).remaining = 96) FROM colliding")"
rl_cluster_ctl restart -m fast -w -l "$RL_CLUSTER_DIR/server.log" >/dev/null
rl_check "(h) restart -m fast: all 1900 keys loaded, none dropped" "1 0" \
	"$(grep -c 'ratelimit: loaded 1900 keys of the shmem store' "$RL_CLUSTER_DIR/server.log") $(grep -c 'did not fit' "$RL_CLUSTER_DIR/server.log")"
rl_check "(h) the secret came back with the keys: each of the 400 is placed where it was" 400 \
	"$(q "SELECT count(*) FROM colliding_placed c WHERE c.set_index = ratelimit.shmem_placement(c.zone_id, c.key)")"
rl_check "(h) after the restart each is found again (95 left), and rl_keys agrees" "400 400 400 0" \
	"$(q "SELECT count(*) FILTER (WHERE (rl_limit('hot', key, 1)).remaining = 95) FROM colliding") $(hot_keys 5)"
rl_check "(h) rl_reset forgets a key that sits in a lent way: it is new again (99 left)" "t 99 399" \
	"$(q "SELECT rl_reset('hot', key) FROM colliding ORDER BY key DESC LIMIT 1") $(
	   q "SELECT remaining FROM rl_limit('hot', (SELECT key FROM colliding ORDER BY key DESC LIMIT 1))") $(
	   q "SELECT count(*) FROM rl_keys WHERE zone = 'hot' AND remaining = 95")"
q "SELECT rl_zone_drop('hot'), rl_zone_set('after', 'token_bucket', 100, '100000 seconds', store => 'shmem')" >/dev/null
rl_check "(h) dropping the zone frees its 400 ways, lent ones too: 608 new keys fit in the 2108, none refused" \
	"1500 608 0" "$(q "SELECT count(*) FROM rl_keys WHERE zone = 'spread'") $(many "$CLOCK" after f 608 ratelimit.shmem_full_policy=deny)"
rl_check "(h) the store is now truly full: one more key of after takes room from spread, which holds more keys" "1 0 1 1 0" \
	"$(many "$CLOCK" after one 1 ratelimit.shmem_full_policy=deny) $(room spread | cut -d' ' -f1-2) $(counters after | cut -d' ' -f4)"
# A truly full store skips the search for a second of decision time, but
# not once a key has gone: at the same clock, the next new key fits.
rl_check "(h) a key reset on the full store: a new key takes its way (nothing evicted), the next evicts again" "t 1 0 1 1 0 2" \
	"$(q "SELECT rl_reset('after', 'f1')") $(many "$CLOCK" after two 1 ratelimit.shmem_full_policy=deny) $(
	   room spread | cut -d' ' -f1) $(many "$CLOCK" after three 1 ratelimit.shmem_full_policy=deny) $(room spread | cut -d' ' -f1)"
# The same, concurrently: two clients each call all 400 keys of one set,
# 30 times, racing to create every key (each needs a lent way) and then to
# decide on keys that sit in lent ways.  Every call is admitted (a limit
# out of reach), so each key must have taken exactly 60.
q "SELECT rl_zone_drop('after'), rl_zone_set('race', 'fixed_window', 1000000000, '100 days', store => 'shmem')" >/dev/null
colliding race colliding_race
race_script=$(mktemp)
chmod 644 "$race_script"
echo "SELECT count(rl_limit('race', key, 1)) FROM colliding_race;" >"$race_script"
PGOPTIONS="-c ratelimit.now_override=${CLOCK// /\\ } -c ratelimit.shmem_full_policy=deny" \
	"$RL_PG_BIN/pgbench" -n -c 2 -j 2 -t 30 -f "$race_script" "$DB" >/dev/null 2>&1
race_status=$?
rm -f "$race_script"
rl_check "(h) two clients, 30 times each over the 400 keys of one set: pgbench ran" 0 "$race_status"
rl_check "(h) each key once, each took exactly 60; 24000 allowed, none refused, evicted or full" \
	"400 400 0 24000 0 0 0" \
	"$(q "SELECT count(*) || ' ' || count(DISTINCT key) || ' ' || count(*) FILTER (WHERE remaining <> 1000000000 - 60)
	      FROM rl_keys WHERE zone = 'race'") $(counters race)"
rl_check "(h) no backend crashed" no \
	"$(grep -qE 'terminated by signal|server process .* was terminated|TRAP' "$RL_CLUSTER_DIR/server.log" && echo yes || echo no)"
# With saves at clean shutdown only (this cluster's interval 0), nothing
# vouches for the state after an immediate stop: it starts empty, and the
# server makes a new secret.  The 400 keys that shared a set are
# placed anew, 400 / 68 in a set on average.
rl_cluster_ctl stop -m immediate -w >/dev/null
rl_cluster_ctl start -w -l "$RL_CLUSTER_DIR/server.log" >/dev/null
rl_check "(h) after an immediate stop, a new secret: fewer than 40 of the 400 stay in their set" yes \
	"$(q "SELECT count(*) < 40 FROM colliding_placed c WHERE c.set_index = ratelimit.shmem_placement(c.zone_id, c.key)" | sed 's/t/yes/;s/f/no/')"
# The case that made this design: as many keys that never recover as the
# store was sized for.  Before lent entries, 20000 in a store of 20000
# kept 18943 and refused 1057 (their sets were full).
rl_cluster_stop
rl_cluster_start shmemgrow "fsync = off" "ratelimit.shmem_max_keys = 20000"
new_db $DB
q "SELECT rl_zone_set('sized', 'token_bucket', 100, '100000 seconds', store => 'shmem')" >/dev/null
rl_check "(h) shmem_max_keys = 20000: 20000 keys that never recover, all admitted (policy deny)" "20000 0" \
	"$(many "$CLOCK" sized s 20000 ratelimit.shmem_full_policy=deny)"
rl_check "(h) all 20000 kept and found again, none refused for room or evicted" "20000 20000 20000 0 0 0" \
	"$(q "SELECT count(*) || ' ' || count(DISTINCT key) FROM rl_keys WHERE zone = 'sized' AND remaining = 99") $(
	   q "SELECT count(*) FILTER (WHERE (rl_limit('sized', 's' || i)).remaining = 98) FROM generate_series(1, 20000) i") $(
	   counters sized | cut -d' ' -f2-)"
# Keys that have recovered could be evicted for new ones: a store that can
# still grow makes room instead.  20000 keys that recover within a
# microsecond, then 20000 more a second later (none of the first is kept
# for anything but its place).
rl_cluster_stop
rl_cluster_start shmemgrow "fsync = off" "ratelimit.shmem_max_keys = 200000"
new_db $DB
q "SELECT rl_zone_set('grow_idle', 'token_bucket', 1000000, '1 second', store => 'shmem')" >/dev/null
rl_check "(g) 20000 keys that recover at once, then 20000 more a second later" "20000 20000" \
	"$(q "SELECT count(*) FILTER (WHERE (rl_limit('grow_idle', 'i' || i)).allowed) FROM generate_series(1, 20000) i") $(
	   CLOCK='2026-01-01 00:00:01+00' q "SELECT count(*) FILTER (WHERE (rl_limit('grow_idle', 'j' || i)).allowed) FROM generate_series(1, 20000) i")"
rl_check "(g) the store grew for them: nothing evicted, all 40000 kept" "40000 0 0 0 40000" \
	"$(counters grow_idle) $(q "SELECT count(*) FROM rl_keys WHERE zone = 'grow_idle'")"
rl_check "(g) the server is healthy" yes "$(rl_wait_answering)"
rl_cluster_stop

###########################################################################
echo "# nopreload: ratelimit not in shared_preload_libraries"
# A later shared_preload_libraries line overrides the one rl_cluster_start writes.
rl_cluster_start nopreload "fsync = off" "shared_preload_libraries = 'pg_cron'"
rl_check "(e) shared_preload_libraries is pg_cron alone" pg_cron \
	"$(rl_psql -d postgres -tA -c "SHOW shared_preload_libraries" 2>&1)"
rl_check "(e) LOAD 'ratelimit' works without preloading" loaded \
	"$(rl_psql -d postgres -tA -c "LOAD 'ratelimit'" -c "SELECT 'loaded'" 2>&1)"
rl_psql -d postgres -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB" >/dev/null
created=$(rl_psql -d $DB -tA -c 'CREATE EXTENSION ratelimit' -c "$RL_ERR_OF_SQL" -c "SELECT 'created'" 2>&1)
rl_check "(e) CREATE EXTENSION ratelimit works without preloading" created "$created"
if [ "$created" != created ]; then
	echo "not ok - (e) the other 12 checks need the extension: not run"; failed=$((failed + 1))
else
	hint="Add ratelimit to shared_preload_libraries in postgresql.conf (shared_preload_libraries = 'ratelimit') and restart the server."
	rl_check "(e) rl_zone_set(store => 'shmem') is refused at once: 55000 with the hint" "55000 $hint" \
		"$(q "SELECT err_of(\$\$SELECT rl_zone_set('np_shmem', 'token_bucket', 10, '1 minute', store => 'shmem')\$\$)")"
	rl_check "(e) ... and defines no zone" 0 "$(q "SELECT count(*) FROM ratelimit.zone WHERE zone = 'np_shmem'")"
	# A shmem zone defined while ratelimit was preloaded, on a server since
	# restarted without it (the zone table is the configuration, as a
	# restored dump fills it): every call says why.
	q "INSERT INTO ratelimit.zone (zone, algorithm, rate, period, store) VALUES ('np_shmem', 'token_bucket', 10, '1 minute', 'shmem')" >/dev/null
	rl_check "(e) rl_limit on a shmem zone: 55000 with the hint" "55000 $hint" \
		"$(q "SELECT err_of(\$\$SELECT rl_limit('np_shmem', 'k')\$\$)")"
	rl_check "(e) the error message" yes \
		"$(has 'ERROR:  the shmem store needs ratelimit in shared_preload_libraries' "$(q "SELECT rl_limit('np_shmem', 'k')")")"
	rl_check "(e) rl_peek on a shmem zone: 55000" "55000 $hint" "$(q "SELECT err_of(\$\$SELECT rl_peek('np_shmem', 'k')\$\$)")"
	rl_check "(e) rl_reset on a shmem zone: 55000" "55000 $hint" "$(q "SELECT err_of(\$\$SELECT rl_reset('np_shmem', 'k')\$\$)")"
	rl_check "(e) rl_token_bucket with default_store shmem: 55000" "55000 $hint" \
		"$(q "SELECT err_of(\$\$SELECT rl_token_bucket('np', 1, 10)\$\$)" ratelimit.default_store=shmem)"
	rl_check "(e) rl_gcra with default_store shmem: 55000" "55000 $hint" \
		"$(q "SELECT err_of(\$\$SELECT rl_gcra('np', 15, 30, 60)\$\$)" ratelimit.default_store=shmem)"
	q "SELECT rl_zone_set('np_table', 'token_bucket', 10, '1 minute')" >/dev/null
	rl_check "(e) a table zone works" 9 "$(q "SELECT remaining FROM rl_limit('np_table', 'k')")"
	rl_check "(e) rl_token_bucket (default_store table) works" 9 "$(q "SELECT rl_token_bucket('np', 1, 10)")"
	rl_check "(e) rl_gcra (default_store table) works" 15 "$(q "SELECT remaining FROM rl_gcra('np', 15, 30, 60)")"
	rl_check "(e) rl_counters is empty" 0 "$(q "SELECT count(*) FROM rl_counters")"
	rl_check "(e) a shmem zone can be dropped" "" "$(q "SELECT rl_zone_drop('np_shmem')")"
fi
rl_check "(e) the server is healthy" yes "$(rl_wait_answering)"
rl_cluster_stop

echo "fault (shmem): $passed passed, $failed failed"
[ "$failed" -eq 0 ]
