#!/usr/bin/env bash
# Benchmark of rl_token_bucket against hand-written token buckets, of the
# zones against each other and against a log table, and of the shmem store
# against the table store, SELECT 1 and a hashtext loop.
#
#   bash test/bench/run.sh
#
# Starts a throwaway cluster (.cluster/bench), measures in one run:
#   1. in-backend calls/s:  SELECT count(f(...)) FROM generate_series(1, N) i
#      over 10k existing keys, each key once per statement, on the table
#      store (both access paths) and the shmem store, against the hand-written
#      buckets and a hashtext(i::text) loop;
#   2. pgbench -M prepared -n, 1 and 2 clients, random key among 10k, both
#      stores, the hand-written buckets and SELECT 1; then 1 client again
#      with the server and pgbench on one CPU (taskset), where a round trip
#      costs no wake-up of an idle CPU;
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
# then writes the report (Markdown) to test/bench/RESULTS.md, keeping the
# hand-written sections that follow its generated part there (see
# write_report), and prints it.
#
# What each section runs is in test/bench/sql/: a .sql file per section
# (psql variables for the settings below), .pgbench scripts, and
# report.sql.  This script starts the cluster, runs those files in order,
# runs pgbench and records its figures.  Every timed variant runs in
# interleaved repetitions (A B C A B C ...: sql/interleave.sql in the
# server, pgb_rounds here), so that a slow spell of the machine hits every
# variant alike; the report takes medians (in-backend) or pools the rounds
# (pgbench).
#
# The shmem store is not transactional and keeps its state across
# statements: every measured call is admitted (rates far above the calls
# made) and every measured key exists before it is measured (warm-up); the
# shared-memory counters (rl_counters) check that no call of the measured
# phases was refused and that the shmem store evicted no key and never ran
# out of room during them.  Before anything is measured, every bucket
# variant must pass the same token-bucket check (sql/sanity.sql).
#
# Environment:
#   BENCH_SECONDS  pgbench time of each variant and client count, seconds
#                  (default 20), split into BENCH_PGBENCH_ROUNDS interleaved
#                  runs (default 10: -T 2 each; more, shorter runs spread
#                  bursts of other work on the machine over every variant)
#   BENCH_REPS     in-backend repetitions of each variant, sections 1, 4,
#                  5, 8 and 9 (default 11)
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
#   BENCH_PG       the PostgreSQL major to measure (default 15, the host's):
#                  17 and 18 run inside their Debian chroot
#                  (scripts/chroot.sh), as scripts/test.sh --pg does
#   BENCH_HALTPOLL=1  on a KVM guest whose idle driver is haltpoll, run
#                  with the guest's halt polling at the kernel's default
#                  (guest_halt_poll_ns = 200000: an idle CPU polls up to
#                  200 µs before it halts) and put the machine's own value
#                  back at the end (default 0: the machine as it is).  A VM
#                  shipped with 0 halts at once, and a one-client round
#                  trip then mostly waits for a halted CPU to wake
#                  (test/bench/wakeup.sh); the report says which it was.
#                  Needs root (it writes /sys/module/haltpoll/...).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SQL=$HERE/sql
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
BENCH_PG=${BENCH_PG:-$RL_PG_VERSION}
BENCH_HALTPOLL=${BENCH_HALTPOLL:-0}

rl_require_positive_ints BENCH_SECONDS BENCH_PGBENCH_ROUNDS BENCH_REPS BENCH_HOT_REPS BENCH_SW_ROWS BENCH_SHMEM_KEYS
for v in BENCH_ZONES BENCH_CRON BENCH_TRIGGER BENCH_HALTPOLL; do
	[[ ${!v} =~ ^[01]$ ]] || rl_die "$v must be 0 or 1 (got '${!v}')"
done

# The exact command, with the settings that change what it measures.
BENCH_SETTINGS=(BENCH_BUILD BENCH_SHMEM_KEYS BENCH_SW_ROWS BENCH_TRIGGER BENCH_CRON BENCH_ZONES
	BENCH_HOT_REPS BENCH_REPS BENCH_PGBENCH_ROUNDS BENCH_SECONDS BENCH_PG BENCH_HALTPOLL)
COMMAND=$(rl_command_with_env "bash test/bench/run.sh" "${BENCH_SETTINGS[@]}")
[ $# -eq 0 ] || rl_die "usage: [BENCH_SECONDS=20 ...] bash test/bench/run.sh (no arguments)"

# The machine's idle setting, for the report; with BENCH_HALTPOLL=1, halt
# polling on for the run.  A run inside a chroot (no /sys there) gets the
# note from the run that set it, outside (RL_BENCH_IDLE).
if [ -n "${RL_BENCH_IDLE:-}" ] && [ ! -d /sys/module ]; then
	IDLE_NOTE=$RL_BENCH_IDLE
elif [ "$BENCH_HALTPOLL" = 1 ]; then
	haltpoll_take BENCH_HALTPOLL=1
	trap haltpoll_restore EXIT
	haltpoll_on
	IDLE_NOTE="guest halt polling $HALTPOLL_DEFAULT ns for this run (BENCH_HALTPOLL=1, the kernel's default; this machine's own setting: $HALTPOLL_SAVED ns, put back after)"
elif [ -r "$HALTPOLL_FILE" ]; then
	machine_poll=$(cat "$HALTPOLL_FILE")
	IDLE_NOTE="guest halt polling $machine_poll ns (this machine's setting$([ "$machine_poll" != 0 ] || echo ': an idle CPU halts at once'))"
else
	IDLE_NOTE="no guest halt polling setting here (not a KVM guest with cpuidle-haltpoll)"
fi

# Another major: the same script inside that major's chroot, with the
# settings given here (the repository is /repo there).
if [ "$BENCH_PG" != "$RL_PG_VERSION" ]; then
	# shellcheck source=../../scripts/chroot.sh disable=SC1091
	. "$HERE/../../scripts/chroot.sh"
	rl_chroot_probe || rl_die "PostgreSQL $BENCH_PG runs in a chroot, which cannot be made here: $RL_CHROOT_WHY"
	passed=()
	for v in "${BENCH_SETTINGS[@]}"; do
		if printenv "$v" >/dev/null; then passed+=("$v=${!v}"); fi
	done
	results=${BENCH_RESULTS:-$HERE/RESULTS.md}
	results=$(realpath -m "$results")
	case $results in
		"$RL_ROOT"/*) passed+=("BENCH_RESULTS=/repo/${results#"$RL_ROOT"/}") ;;
		*) rl_die "BENCH_RESULTS must be inside the repository for a chroot run (got $results)" ;;
	esac
	rl_log "PostgreSQL $BENCH_PG: measuring inside its Debian chroot"
	rl_chroot_run "$BENCH_PG" env RL_PG_VERSION="$BENCH_PG" RL_BENCH_IDLE="$IDLE_NOTE" "${passed[@]}" \
		bash /repo/test/bench/run.sh
	exit
fi

# pgbench: ROUNDS interleaved runs of -T RUN_SECONDS (at least one second).
PGB_ROUNDS=$(( BENCH_PGBENCH_ROUNDS < BENCH_SECONDS ? BENCH_PGBENCH_ROUNDS : BENCH_SECONDS ))
PGB_RUN_SECONDS=$(( (BENCH_SECONDS + PGB_ROUNDS - 1) / PGB_ROUNDS ))

KEYS=10000          # existing keys
RATE=1000000        # tokens/s: every call is admitted, so every call writes
WINDOW=60           # seconds; sql/*.pgbench write RATE and WINDOW out: change them together
ZONE_ALGOS="token_bucket gcra fixed_window sliding_window_counter sliding_window"
SHMEM_ZONE_ALGOS="token_bucket gcra fixed_window sliding_window_counter"  # sliding_window: table store only
[ "$BENCH_ZONES" = 1 ] || ZONE_ALGOS="" SHMEM_ZONE_ALGOS=""
# Every psql variable the files of sql/ use (each names its own).
VARS=(
	-v keys="$KEYS" -v rate="$RATE" -v window="$WINDOW"
	-v reps="$BENCH_REPS" -v hot_reps="$BENCH_HOT_REPS"
	-v hot_calls=100000           # section 3: calls in one statement
	-v zones="$BENCH_ZONES" -v cron="$BENCH_CRON" -v trigger="$BENCH_TRIGGER"
	-v zone_algos="$ZONE_ALGOS" -v shmem_zone_algos="$SHMEM_ZONE_ALGOS"
	-v zone_rate=1000000 -v zone_period='1 second'   # section 4: every call admitted
	-v sw_limits='10 100 1000 10000'
	-v sw_period='1 hour'         # section 5: no pre-filled admission expires during the run
	-v sw_spacing='100 milliseconds'  # section 5: between pre-filled admissions
	-v sw_rows="$BENCH_SW_ROWS" -v sw_keys_max=1000   # section 5: keys per statement
	-v size_period='3 hours'      # section 6: holds 10,000 admissions one second apart
	-v cron_full=100000 -v cron_pending=1000 -v cron_cap=1000   # section 8's refill
	-v trigger_sizes='10000 100000'
	-v rounds="$PGB_ROUNDS" -v seconds="$PGB_RUN_SECONDS"
)
OUT=$HERE/out/run   # git-ignored scratch space (logs, generated pgbench script)
RESULTS=${BENCH_RESULTS:-$HERE/RESULTS.md}

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	rl_cluster_stop
	haltpoll_restore
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ "$BENCH_BUILD" = 1 ]; then
	# shellcheck disable=SC2119  # no arguments: every package it knows
	rl_install_packages
	rl_build_install
fi
[ -x "$RL_PG_BIN/pgbench" ] || rl_die "pgbench not found at $RL_PG_BIN/pgbench"

# Warn when the installed module is not the one built in the tree.
SO_NOTE=""
PKGLIBDIR=$("$RL_PG_BIN/pg_config" --pkglibdir)
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
# run_sql FILE [psql options]: runs sql/FILE with every variable; its
# output goes to $OUT/FILE.log.
run_sql() {
	local file=$1
	shift
	psql_q "${VARS[@]}" "$@" -f "$SQL/$file" >"$OUT/$file.log"
}

# pgbench variants: the script and PGOPTIONS of each.
pgb_script() {
	case $1 in
		direct|spi|shmem|cron-direct) echo "$SQL/token_bucket.pgbench" ;;
		upsert) echo "$OUT/upsert.pgbench" ;;
		cron-cron) echo "$SQL/cron_zone.pgbench" ;;
		cron-inline) echo "$SQL/inline_zone.pgbench" ;;
		*) echo "$SQL/$1.pgbench" ;;
	esac
}
pgb_options() {
	case $1 in
		direct|spi) echo "-c ratelimit.table_access=$1" ;;
		shmem) echo "-c ratelimit.default_store=shmem" ;;
		cron-*) echo "-c ratelimit.table_access=direct" ;;
	esac
}

# pgb_rounds SECTION PREFIX VACUUM VARIANT...: PGB_ROUNDS interleaved rounds
# (round 1 of every variant at 1 then 2 clients, or at the client counts of
# PGB_CLIENTS, then round 2 ...), so that
# a slow spell of the machine does not fall on one variant only; each run
# -T PGB_RUN_SECONDS after VACUUM of the tables the variants write, its tps
# and transactions recorded in bench.pgbench.  PREFIX: of the variants'
# names in pgb_script and pgb_options.
pgb_rounds() {
	local section=$1 prefix=$2 vacuum=$3 round clients v result tps xacts
	shift 3
	for round in $(seq 1 "$PGB_ROUNDS"); do
		rl_log "section $section: pgbench round $round/$PGB_ROUNDS: $# variants, clients ${PGB_CLIENTS:-1 2}, ${PGB_RUN_SECONDS}s each"
		for clients in ${PGB_CLIENTS:-1 2}; do
			for v in "$@"; do
				psql_q -c "VACUUM $vacuum"
				result=$(pgb_checked "$prefix$v" "$clients" "$OUT/pgbench-$section-$prefix$v-$clients-$round.log" \
					"$(pgb_options "$prefix$v")" -D keys="$KEYS" -T "$PGB_RUN_SECONDS" -f "$(pgb_script "$prefix$v")")
				read -r tps xacts <<<"$result"
				psql_q -c "INSERT INTO bench.pgbench VALUES ($section, $round, $clients, '$v', $tps, $xacts)"
			done
		done
	done
}

rl_log "setting up the bench schema"
run_sql setup.sql
[ "$BENCH_ZONES" = 0 ] || run_sql 4_zones_setup.sql
rl_log "checking that every variant decides as a token bucket does"
run_sql sanity.sql

rl_log "sections 1, 3 and 4: in-backend, $BENCH_REPS reps, then hot key, $BENCH_HOT_REPS reps"
run_sql 1_in_backend.sql

pgb_upsert_script :keys "$RATE" "$WINDOW" >"$OUT/upsert.pgbench"
pgb_rounds 2 "" "ratelimit.state, bench.plpgsql_bucket, bench.upsert_bucket" \
	select1 hashtext_k direct spi shmem plpgsql upsert
# Section 2 at 1 client again with the server and pgbench on CPU 0
# (recorded as section 20): on a VM, a round trip across two CPUs mostly
# waits for an idle CPU to wake (SELECT 1 at 1 client runs several times
# slower than on one CPU), which hides what the server spends per call.
cpus_before=$(server_cpus)
server_on_cpus 0
PGB_CLIENTS=1 PGB_CPUS=0 pgb_rounds 20 "" "ratelimit.state, bench.upsert_bucket" \
	select1 direct shmem upsert
server_on_cpus "$cpus_before"
# The access path and store really were the ones asked for (PGOPTIONS
# reached the server).
for v in direct spi shmem; do
	case $v in shmem) guc=default_store want=shmem ;; *) guc=table_access want=$v ;; esac
	got=$(PGOPTIONS="$(pgb_options "$v")" psql_at -c "SHOW ratelimit.$guc")
	[ "$got" = "$want" ] || rl_die "PGOPTIONS did not select $guc=$want (got $got)"
done
run_sql counters_check.sql

if [ "$BENCH_CRON" = 1 ]; then
	rl_log "section 8: pg_cron refill mode, in-backend, $BENCH_REPS reps"
	run_sql 8_cron.sql
	pgb_rounds 8 cron- ratelimit.state cron inline direct
	rl_log "section 8: one refill run, $BENCH_REPS reps, and its plans"
	run_sql 8_cron_refill.sql
	for v in A B C; do
		# The plan comes as NOTICEs, on stderr.
		psql_q "${VARS[@]}" -v variant="$v" -f "$SQL/8_cron_plan.sql" >"$OUT/8_cron_plan-$v.log" 2>&1
		run_sql 8_cron_plan_parse.sql -v variant="$v" -v log="$(cat "$OUT/8_cron_plan-$v.log")"
	done
fi

if [ "$BENCH_TRIGGER" = 1 ]; then
	rl_log "section 9: row trigger, $BENCH_REPS reps"
	run_sql 9_trigger.sql
fi

if [ "$BENCH_ZONES" = 1 ]; then
	rl_log "section 5: exact sliding window vs log table, $BENCH_REPS reps"
	run_sql 5_sliding_window.sql
	rl_log "section 6: state bytes per key"
	run_sql 6_sizes.sql
fi

# Last: it evicts the measured keys of the shmem store.
rl_log "section 7: shmem store, keys kept of $BENCH_SHMEM_KEYS offered"
run_sql 7_shmem.sql

# write_report: report.sql's output, then what follows the generated part
# in the RESULTS file there already: hand-written sections ("## ..."
# after the Targets and their notes), which a run must not lose.
write_report() {
	local history=""
	[ ! -f "$RESULTS" ] || history=$(awk '/^## Targets/ { t = 1; next } t && /^## / { h = 1 } h' "$RESULTS")
	{
		psql_at "${VARS[@]}" -v nproc="$(nproc)" -v uname="$(uname -srm)" \
			-v load_start="$LOAD_START" -v load_end="$(cut -d' ' -f1-3 /proc/loadavg)" \
			-v command="$COMMAND" -v minutes=$(( (SECONDS - START_SECONDS + 30) / 60 )) \
			-v shmem_keys="$BENCH_SHMEM_KEYS" -v so_note="$SO_NOTE" -v idle="$IDLE_NOTE" -f "$SQL/report.sql"
		[ -z "$history" ] || printf '\n%s\n' "$history"
	} >"$RESULTS.tmp"
	mv "$RESULTS.tmp" "$RESULTS"
}
rl_log "writing $RESULTS"
write_report
cat "$RESULTS"
