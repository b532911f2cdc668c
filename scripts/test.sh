#!/usr/bin/env bash
# Runs every test suite against a throwaway cluster and ends with one line
# "N passed, N failed" (tests).  Installs missing packages, builds and
# installs the extension first.  Exit status is non-zero when anything
# failed.
#
#   bash scripts/test.sh              PostgreSQL 15, 17 and 18 in turn
#   bash scripts/test.sh --pg 17      one major (17 and 18: in a chroot)
#   RL_PG_BIN=DIR bash scripts/test.sh --pg 16
#                                     a server built elsewhere
#
# The summary above that line: each suite's counts; "  skipped: SUITE
# (REASON)" for each suite, or part of one, that did not run (never counted
# as passed); "failed: SUITES" when any failed.  With several majors, one
# line per major: its counts, or "failed: ..." with the failing suites,
# "did not finish: ..." with its last error, or "skipped: ..." with the
# reason, then the suites it skipped.  A chroot major that cannot run here
# (nothing can be mounted: a container without CAP_SYS_ADMIN; see
# scripts/chroot.sh) prints "# SKIP PostgreSQL N: REASON" and exits with
# status 77; among several majors it is listed as skipped and fails the run
# only when no major ran at all.  A major that failed or did not finish
# always fails the run.
#
#   GoogleTest  test/unit/           the C++ core, no server
#   pg_regress  sql/ + expected/     make installcheck        } once per
#   isolation   test/isolation/      pg_isolation_regress     } access path:
#   pgTAP       test/pgtap/          pg_prove                 } direct, spi
#               (test/pgtap/postgrest.sql once, the extension in schema
#               extensions: the PostgREST recipe)
#   fault       test/fault/          restarts, crash, SIGKILL }
#   flood       test/fault/shmem_flood.sh  a role granted 'limit' floods
#                                    a zone with 20 x shmem_max_keys keys:
#                                    other zones and databases decide as
#                                    before, under each full policy (own
#                                    clusters)
#   load        test/load/           pgbench on one key: token }
#                                    bucket, sliding window   }
#   fuzz        test/fuzz/run.sh     libFuzzer over src/core (ASan, UBSan),
#                                    30 s, and over the proxy-header parser,
#                                    10 s
#   audit       test/fault/audit.sh  SIGKILL, statement_timeout and cancel in
#                                    the middle of calls (own cluster)
#   cron        test/cron/cron.sh    the pg_cron refill mode with a real
#                                    pg_cron (own clusters; waits up to
#                                    75 s for the scheduler)
#   exact       test/load/exact.sh   pgbench, limits out of reach: every key
#                                    took exactly its calls (a lost update
#                                    shows), both stores and access paths
#   growth      test/load/shmem_growth.sh  the shmem store splitting through
#                                    many levels under concurrent readers
#                                    (own cluster, ~75 s)
#   readme      test/readme/check.sh every ```sql block of README.md, in
#                                    order, against its own cluster; the
#                                    ```output blocks must match
#   dist        test/dist/dist.sh    make dist: META.json, a source-only
#                                    archive that builds and installs
#   upgrade     test/upgrade/upgrade.sh  the last release, built from the
#                                    commit test/upgrade/releases names,
#                                    its keys taken over by this build,
#                                    ALTER EXTENSION UPDATE, compared with
#                                    a fresh install (own private server)
#   peers       test/bench/peers/peers.sh  rate-limiter-flexible's and
#                                    express-rate-limit's PostgreSQL stores
#                                    and ours admit exactly their limit under
#                                    16 concurrent workers (correctness only;
#                                    the benchmark is --bench) (own cluster)
#   examples    test/examples/run.sh the Python and Node apps of examples/
#                                    against their own cluster: 200s, the
#                                    429 and its headers; a SCRAM password
#                                    (none, wrong: 503), the database down
#                                    (503, then 200); setup.sql twice; the
#                                    demo (in a copy, private PostgreSQL)
#   sqlsmith    test/fuzz/sqlsmith.sh  random SQL over the extension's
#                                    functions, seeded (own cluster, ~2.5
#                                    min); fails on any server crash
#   zones       test/zones/setup_errors.sh  zones refused when defined:
#                                    shmem without the preload, cron
#                                    without pg_cron (own clusters)
#   citus       test/citus/citus.sh  a Citus coordinator and two workers:
#                                    the README's recipe, routing, zone
#                                    changes, shmem keys, monitoring,
#                                    concurrency; skipped (never counted as
#                                    passed) where Citus is not installed
#                                    in the server under test
#   wait        test/load/wait.sh    pgbench: many rl_wait callers on one
#                                    key (all admitted, within bounds) and
#                                    leases of a 3-slot zone (never more
#                                    than 3 in), both stores
#   leases      test/fault/leases.sh a lease's session terminated or ended,
#                                    restarts and a crash; a killed waiter
#                                    does not hold up its line (own cluster)
#   shmem save  test/fault/shmem_save.sh  the save worker: drained shmem
#                                    keys survive an immediate stop and a
#                                    SIGKILL; at most an interval is lost;
#                                    interval 0; damaged files (own cluster)
#   failover    test/fault/failover.sh  a standby from pg_basebackup -R
#                                    refuses table decisions, decides shmem
#                                    per node; promoted, durable keys go on
#                                    exactly, unlogged ones start full; a
#                                    dump keeps durable keys (own clusters);
#                                    skipped (never counted as passed) where
#                                    pg_basebackup is missing
#   multi-zone  test/load/multi_zone.sh  pgbench on rl_limit(zones[]): none
#                                    charged when one refuses, no deadlock;
#                                    both stores, mixed (own cluster)
#   package     test/package/package.sh  the Debian package of the major
#                                    (debian/, scripts/deb.sh): built from a
#                                    copy of the tree, installed with apt-get
#                                    install ./….deb, CREATE EXTENSION and
#                                    autopkgtest's installcheck on throwaway
#                                    clusters (pg_virtualenv), purged; last,
#                                    the make-installed files put back
#
# The shmem store's suites (sql/shmem.sql, test/isolation/specs/shmem_*,
# test/pgtap/shmem.sql, test/fault/shmem.sh, test/fault/shmem_flood.sh,
# the load test with ratelimit.default_store = shmem) do not depend on the
# table access path:
# they run once, before the per-path loop, first thing on the fresh
# cluster (the shmem store and its counters belong to the server, and
# sql/shmem.sql counts exactly).  test/fault/shmem.sh starts clusters of
# its own.
set -uo pipefail

# Without --pg: every major in CI_MAJORS (15, 17 and 18) in turn, and the
# sum.  --pg N: PostgreSQL N alone.  Where this system has no PostgreSQL N
# (15 is Debian 12's), that run goes on inside a Debian chroot that has it
# (scripts/chroot.sh: 17 from trixie, 18 from forky).
CI_MAJORS=(15 17 18)
majors=()
while [ $# -gt 0 ]; do
	case $1 in
		--pg) [ $# -ge 2 ] || { echo "error: --pg needs a major version" >&2; exit 2; }
			majors+=("$2"); shift 2 ;;
		--pg=*) majors+=("${1#--pg=}"); shift ;;
		*) echo "usage: bash scripts/test.sh [--pg MAJOR]..." >&2; exit 2 ;;
	esac
done
[ ${#majors[@]} -gt 0 ] || majors=("${CI_MAJORS[@]}")
# The summary of several majors: one line each, with its counts, or why it
# failed, did not finish or was skipped, and the suites it skipped; then
# the tests of all of them in one line.  A major skipped for a reason of
# the machine (its chroot cannot mount /proc here: exit status 77 and a
# "# SKIP" line) is listed, and fails the run only when no major ran at all;
# a major that failed or did not finish always fails it.
if [ ${#majors[@]} -gt 1 ]; then
	all_passed=0 all_failed=0 lines=() ran=0 bad=0 not_passed=()
	logs=$(mktemp -d)
	trap 'rm -rf "$logs"' EXIT
	for major in "${majors[@]}"; do
		echo "======== PostgreSQL $major"
		start=$SECONDS
		# Its output to the terminal as it comes, its stdout and stderr
		# kept apart for the summary.
		( bash "$0" --pg "$major" 2>&1 1>&3 3>&- | tee "$logs/$major.err" >&2 3>&-
		  exit "${PIPESTATUS[0]}" ) 3>&1 | tee "$logs/$major.log"
		status=${PIPESTATUS[0]}
		# Interrupted (Ctrl-C, SIGTERM): the run stops there.
		if [ "$status" -eq 130 ] || [ "$status" -eq 143 ]; then
			echo "PostgreSQL $major: interrupted; the majors after it did not run" >&2
			exit "$status"
		fi
		took=$(printf '(%d min %02d s)' $(((SECONDS - start) / 60)) $(((SECONDS - start) % 60)))
		last=$(tail -n 1 "$logs/$major.log")
		skip=$(grep -m1 "^# SKIP PostgreSQL $major: " "$logs/$major.log" | sed "s/^# SKIP PostgreSQL $major: //")
		if [ "$status" -eq 77 ] && [ -n "$skip" ]; then
			result="skipped: $skip"
		elif [[ $last =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then
			ran=$((ran + 1))
			all_passed=$((all_passed + BASH_REMATCH[1])); all_failed=$((all_failed + BASH_REMATCH[2]))
			result=$last
			if [ "$status" -ne 0 ] || [ "${BASH_REMATCH[2]}" -ne 0 ]; then
				bad=$((bad + 1))
				why=$(sed -n 's/^failed: //p' "$logs/$major.log" | tail -1)
				result="failed: $last${why:+; failing suites: $why}"
			fi
		else
			ran=$((ran + 1)) bad=$((bad + 1))
			# Why: its last "error:" line with the line before it (what
			# failed under it), else the last line it wrote.
			why=$(grep -hv -e '^==> ' -e '^[[:space:]]*$' "$logs/$major.err" \
				| awk '/^error: / { why = $0; if (prev != "" && prev !~ /^error: /) why = why " (" prev ")" }
				       { prev = $0 } END { print why }')
			[ -n "$why" ] || why=$(cat "$logs/$major.err" "$logs/$major.log" | grep -v '^[[:space:]]*$' | tail -1)
			result="did not finish: ${why:-no output} (exit status $status)"
		fi
		lines+=("$(printf 'PostgreSQL %-3s %s  %s' "$major" "$result" "$took")")
		[[ $result =~ ^[0-9] ]] || not_passed+=("$major (${result%%:*})")
		while IFS= read -r skipped; do
			lines+=("               $skipped")
		done < <(sed -n 's/^  skipped: /skipped: /p' "$logs/$major.log")
	done
	echo
	printf '%s\n' "${lines[@]}"
	[ ${#not_passed[@]} -eq 0 ] || echo "majors that did not pass: $(printf '%s, ' "${not_passed[@]}" | sed 's/, $//')"
	[ "$ran" -gt 0 ] || echo "no major ran: the run fails"
	echo "$all_passed passed, $all_failed failed"
	[ "$all_failed" -eq 0 ] && [ "$bad" -eq 0 ] && [ "$ran" -gt 0 ]
	exit
fi
export RL_PG_VERSION=${majors[0]}
# RL_PG_BIN=DIR: a server of that major built elsewhere (PostgreSQL 16 has
# no Debian package): used as it is, with pg_cron and pgTAP installed into
# it beforehand; only the packages that are not PostgreSQL's are installed.
own_server=${RL_PG_BIN:+yes}
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/chroot.sh"
cd "$RL_ROOT"

if [ "$own_server" = yes ]; then
	[ -x "$RL_PG_BIN/pg_config" ] || rl_die "RL_PG_BIN=$RL_PG_BIN has no pg_config"
	[ "$("$RL_PG_BIN/pg_config" --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')" = "$RL_PG_VERSION" ] \
		|| rl_die "RL_PG_BIN=$RL_PG_BIN is not PostgreSQL $RL_PG_VERSION (give --pg with its major)"
	RL_PACKAGES=($(printf '%s\n' "${RL_PACKAGES[@]}" | grep -v '^postgresql-'))
elif [ ! -x "/usr/lib/postgresql/$RL_PG_VERSION/bin/pg_config" ] \
	&& [ "$RL_PG_VERSION" != 15 ]; then
	rl_log "PostgreSQL $RL_PG_VERSION: testing inside its Debian chroot"
	# Where no chroot can mount /proc (a container without CAP_SYS_ADMIN),
	# this major cannot run here: it says why, exit status 77.
	if ! rl_chroot_probe; then
		echo "# SKIP PostgreSQL $RL_PG_VERSION: $RL_CHROOT_WHY"
		exit 77
	fi
	case $RL_CHROOT_MODE in
		self-bind) rl_log "/ is no mount point here (a chroot?): the chroot's mounts go in a namespace of their own under a bind of its directory onto itself" ;;
		plain) rl_log "no mount namespace can be made here: the chroot's mounts are made here and unmounted (umount -l) when it ends" ;;
	esac
	rl_chroot_run "$RL_PG_VERSION" env RL_SUITE_TIMEOUT="${RL_SUITE_TIMEOUT:-}" \
		bash /repo/scripts/test.sh --pg "$RL_PG_VERSION"
	exit
fi

rl_install_packages
# RL_PRIVATE_PG=1: test in a private copy of PostgreSQL (.pg/), leaving the
# system's installed extension alone.
if [ "${RL_PRIVATE_PG:-0}" = 1 ]; then
	RL_PG_BIN=$(rl_private_pg "$RL_ROOT/.pg") || exit 1
	export RL_PG_BIN
	rl_allow_traverse "$RL_PG_BIN"
	rl_log "testing in a private copy of PostgreSQL: $RL_PG_BIN"
fi
RL_ASSERTS=1 rl_build_install

RESULTS=$RL_ROOT/results
rm -rf "$RESULTS"; mkdir -p "$RESULTS"
total_passed=0 total_failed=0
summary=() skips=() failing=()

# record SUITE PASSED FAILED STATUS [NOTE]: a suite that exits non-zero
# without a counted failure (it could not run) counts as one failure.
record() {
	local suite=$1 passed=$2 failed=$3 status=$4 note=${5:-}
	if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi
	if [ "$passed" -eq 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi	# ran nothing
	total_passed=$((total_passed + passed)); total_failed=$((total_failed + failed))
	[ "$failed" -eq 0 ] || failing+=("$suite")
	summary+=("$(printf '%-28s %5d passed, %d failed%s' "$suite" "$passed" "$failed" "$note")")
	printf '%s: %d passed, %d failed\n' "$suite" "$passed" "$failed"
}

count() { grep -cE "$1" "$2" || true; }

# bounded CMD...: CMD, stopped after RL_SUITE_TIMEOUT seconds (default 900,
# several times the slowest suite): a suite that waits for something that
# never comes fails with a message, the run goes on.
RL_SUITE_TIMEOUT=${RL_SUITE_TIMEOUT:-900}
bounded() {
	local status
	timeout --kill-after=30 "$RL_SUITE_TIMEOUT" "$@"; status=$?
	if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
		echo "not ok - timed out after $RL_SUITE_TIMEOUT s: $*"
	fi
	return "$status"
}

run_unit() {
	local log=$RESULTS/unit.log status
	bounded make -s unit >"$log" 2>&1; status=$?
	local passed failed
	passed=$(count '^\[       OK \]' "$log")
	failed=$(count '^\[  FAILED  \] [A-Za-z].*\(' "$log")
	[ "$status" -eq 0 ] || tail -40 "$log"
	record "googletest" "$passed" "$failed" "$status"
}

# Suites of the pg_regress family: one line per test, "... ok" /
# "... FAILED" up to PostgreSQL 15, TAP's "ok N - name" / "not ok N - name"
# from 16.
run_regress_like() {
	local suite=$1 log=$2; shift 2
	local status
	bounded "$@" >"$log" 2>&1; status=$?
	local passed failed
	passed=$(( $(count '\.\.\. ok' "$log") + $(count '^ok [0-9]+ ' "$log") ))
	failed=$(( $(count '\.\.\. FAILED' "$log") + $(count '^not ok [0-9]+ ' "$log") ))
	if [ "$status" -ne 0 ]; then
		tail -20 "$log"
		for diffs in "$RL_ROOT/regression.diffs" "$RESULTS"/*/regression.diffs; do
			[ -s "$diffs" ] && head -80 "$diffs"
		done
	fi
	record "$suite" "$passed" "$failed" "$status"
}

# run_pgtap LABEL FILE...: in a fresh database, the extension in its
# default schema, or in schema RL_PGTAP_SCHEMA when that is set.
run_pgtap() {
	local label=$1 log=$RESULTS/pgtap-$1.log db=rl_pgtap status; shift
	local create='CREATE EXTENSION ratelimit'
	[ -z "${RL_PGTAP_SCHEMA:-}" ] || create="CREATE SCHEMA $RL_PGTAP_SCHEMA; $create SCHEMA $RL_PGTAP_SCHEMA"
	rl_psql -d postgres -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" >/dev/null
	rl_psql -d $db -c 'CREATE EXTENSION pgtap' -c "$create" >/dev/null
	bounded pg_prove -v -h "$PGHOST" -p "$PGPORT" -U "$PGUSER" -d $db "$@" >"$log" 2>&1; status=$?
	local passed failed skipped
	skipped=$(count '^ *ok [0-9]+ .*# (SKIP|skip)' "$log")
	passed=$(( $(count '^ *ok [0-9]+' "$log") - skipped ))
	failed=$(count '^ *not ok [0-9]+' "$log")
	[ "$skipped" -eq 0 ] || skipped "pgtap ($label), $skipped tests" \
		"$(grep -m1 -E '^ *ok [0-9]+ .*# (SKIP|skip)' "$log" | sed -E 's/.*# (SKIP|skip) *//')"
	[ "$status" -eq 0 ] || grep -E '^ *not ok|^#|Failed|Dubious' "$log" | head -60
	record "pgtap ($label)" "$passed" "$failed" "$status"
}

# skipped SUITE REASON: SUITE (or a part of it) did not run, for REASON;
# listed at the end, never counted as passed nor as failed.
skipped() {
	skips+=("$1 ($2)")
	printf '%s: skipped (%s)\n' "$1" "$2"
}

# A TAP script.  One that ran nothing and says why ("# SKIP SUITE: REASON",
# exit 0) is reported as skipped; a part it skipped ("# SKIP PART: REASON"
# beside its tests) is listed as skipped too, apart from its counts.
run_tap_script() {
	local suite=$1 log=$2 line; shift 2
	local status
	bounded "$@" >"$log" 2>&1; status=$?
	[ "$status" -eq 0 ] || cat "$log"
	if [ "$status" -eq 0 ] && [ "$(count '^(not )?ok ' "$log")" -eq 0 ] && grep -q '^# SKIP' "$log"; then
		line=$(grep -m1 '^# SKIP' "$log" | sed 's/^# SKIP //')
		summary+=("$(printf '%-28s       skipped' "$suite")")
		skipped "$suite" "${line#*: }"
		return
	fi
	local parts=""
	while IFS= read -r line; do
		skipped "$suite, ${line%%: *}" "${line#*: }"
		parts+="${parts:+, }${line%%: *}"
	done < <(sed -n 's/^# SKIP //p' "$log")
	record "$suite" "$(count '^ok ' "$log")" "$(count '^not ok ' "$log")" "$status" \
		${parts:+"; skipped: $parts"}
}

echo "---- PostgreSQL $("$RL_PG_BIN/pg_config" --version | sed 's/^PostgreSQL //')"
run_unit
# The fuzzers exercise src/core, which no PostgreSQL version changes: they
# run in the host's run (Debian 12's clang 14 and its libFuzzer).
if [ "$RL_PG_VERSION" = 15 ]; then
	run_tap_script "fuzz (core)" "$RESULTS/fuzz.log" bash test/fuzz/run.sh 30
fi
# What needs git or the example apps' runtimes (Python's psycopg, Node's pg),
# which the chroots of the other majors lack; each starts its own cluster.
if [ "$RL_PG_VERSION" = 15 ]; then
	run_tap_script "dist (make dist)" "$RESULTS/dist.log" bash test/dist/dist.sh
	run_tap_script "upgrade (N-1 to N)" "$RESULTS/upgrade.log" bash test/upgrade/upgrade.sh
	run_tap_script "examples (Python, Node)" "$RESULTS/examples.log" bash test/examples/run.sh
	run_tap_script "peers (Node limiters, correctness)" "$RESULTS/peers.log" bash test/bench/peers/peers.sh
fi

trap 'rl_cluster_stop' EXIT
rl_cluster_start test "fsync = off"

PG_ISOLATION_REGRESS=$("$RL_PG_BIN/pg_config" --pkglibdir)/pgxs/src/test/isolation/pg_isolation_regress
SHMEM_SPECS=$(cd test/isolation/specs && ls shmem_*.spec | sed 's/\.spec$//')
ISOLATION_SPECS=$(cd test/isolation/specs && ls *.spec | grep -v '^shmem_' | sed 's/\.spec$//')
REGRESS_TESTS="setup $(cd sql && ls *.sql | grep -v -e '^ratelimit--' -e '^ratelimit\.sql$' -e '^shmem\.sql$' -e '^setup\.sql$' | sed 's/\.sql$//' | tr '\n' ' ')"
PGTAP_FILES=$(ls test/pgtap/*.sql | grep -v -e '/shmem\.sql$' -e '/postgrest\.sql$')

echo "---- shmem store (once, on the fresh cluster)"
run_regress_like "pg_regress (shmem)" "$RESULTS/regress-shmem.log" \
	make -s installcheck PG_CONFIG="$RL_PG_BIN/pg_config" REGRESS="setup shmem"
# shellcheck disable=SC2086
run_regress_like "isolation (shmem)" "$RESULTS/isolation-shmem.log" \
	"$PG_ISOLATION_REGRESS" --inputdir=test/isolation --outputdir="$RESULTS/isolation-shmem" \
	--load-extension=ratelimit $SHMEM_SPECS
run_pgtap shmem test/pgtap/shmem.sql
RL_PGTAP_SCHEMA=extensions run_pgtap "postgrest recipe" test/pgtap/postgrest.sql
seen=$(PGOPTIONS="-c ratelimit.default_store=shmem" rl_psql -d postgres -tA -c 'SHOW ratelimit.default_store')
[ "$seen" = shmem ] || rl_die "ratelimit.default_store is '$seen', expected 'shmem'"
run_tap_script "load (shmem)" "$RESULTS/load-shmem.log" \
	env PGOPTIONS="-c ratelimit.default_store=shmem" NEW_KEYS=1 bash test/load/concurrency.sh 2 3
run_tap_script "fault (shmem)" "$RESULTS/fault-shmem.log" bash test/fault/shmem.sh
run_tap_script "fault (shmem flood)" "$RESULTS/fault-shmem-flood.log" bash test/fault/shmem_flood.sh
run_tap_script "fault (shmem save)" "$RESULTS/fault-shmem-save.log" bash test/fault/shmem_save.sh
echo "---- faults in the middle of calls (once)"
run_tap_script "fault (audit)" "$RESULTS/fault-audit.log" bash test/fault/audit.sh
echo "---- pg_cron refill mode, end to end (once)"
run_tap_script "cron (pg_cron)" "$RESULTS/cron.log" bash test/cron/cron.sh
echo "---- zones refused when defined: no preload, no pg_cron (once, own clusters)"
run_tap_script "zones (setup errors)" "$RESULTS/zones-setup.log" bash test/zones/setup_errors.sh
echo "---- several zones in one call under load, both stores (once, own cluster)"
run_tap_script "load, multi-zone" "$RESULTS/load-multi-zone.log" bash test/load/multi_zone.sh
echo "---- rl_wait and leases under load, both stores (once)"
run_tap_script "load, wait and leases" "$RESULTS/load-wait.log" bash test/load/wait.sh 8 5
echo "---- leases and rl_wait lines across session ends, restarts, a crash (once, own cluster)"
run_tap_script "fault (leases)" "$RESULTS/fault-leases.log" bash test/fault/leases.sh
echo "---- a streaming standby, its promotion, a dump and restore (once, own clusters)"
run_tap_script "fault (failover)" "$RESULTS/fault-failover.log" bash test/fault/failover.sh
echo "---- Citus: coordinator + 2 workers, the README recipe (once, own clusters; skipped without Citus)"
run_tap_script "citus" "$RESULTS/citus.log" bash test/citus/citus.sh
echo "---- the README's SQL examples, as written (once, own cluster)"
run_tap_script "readme examples" "$RESULTS/readme.log" bash test/readme/check.sh
echo "---- sqlsmith over the SQL API (once, own cluster)"
run_tap_script "fuzz (sqlsmith)" "$RESULTS/sqlsmith.log" bash test/fuzz/sqlsmith.sh
echo "---- exact counts under concurrency: both stores, both access paths (once, own cluster)"
run_tap_script "load, exact" "$RESULTS/load-exact.log" bash test/load/exact.sh
echo "---- shmem store growth under concurrent readers (once, own cluster)"
run_tap_script "load, shmem growth" "$RESULTS/load-shmem-growth.log" bash test/load/shmem_growth.sh

for access in direct spi; do
	export PGOPTIONS="-c ratelimit.table_access=$access"
	seen=$(rl_psql -d postgres -tA -c "LOAD 'ratelimit'" -c 'SHOW ratelimit.table_access')
	[ "$seen" = "$access" ] || rl_die "ratelimit.table_access is '$seen', expected '$access'"
	echo "---- access path: $access"

	run_regress_like "pg_regress ($access)" "$RESULTS/regress-$access.log" \
		make -s installcheck PG_CONFIG="$RL_PG_BIN/pg_config" REGRESS="$REGRESS_TESTS"
	# shellcheck disable=SC2086
	run_regress_like "isolation ($access)" "$RESULTS/isolation-$access.log" \
		"$PG_ISOLATION_REGRESS" --inputdir=test/isolation --outputdir="$RESULTS/isolation-$access" \
		--load-extension=ratelimit $ISOLATION_SPECS
	# shellcheck disable=SC2086
	run_pgtap "$access" $PGTAP_FILES
	run_tap_script "load ($access)" "$RESULTS/load-$access.log" bash test/load/concurrency.sh 2 3
	run_tap_script "load, sliding window ($access)" "$RESULTS/load-sw-$access.log" \
		bash test/load/sliding_window.sh 2 3
	run_tap_script "fault ($access)" "$RESULTS/fault-$access.log" bash test/fault/crash_restart.sh
done

# Last: while it runs, the package's files replace the extension built
# above (put back at its end); its clusters are pg_virtualenv's own.
unset PGOPTIONS
rl_cluster_stop
echo "---- the Debian package: build, apt-get install ./….deb, test, purge (once, last)"
run_tap_script "package (.deb)" "$RESULTS/package.log" bash test/package/package.sh

# The summary: each suite's counts; the suites (or parts) skipped, each
# with its reason; the failing suites; the tests in one line.
echo
printf '%s\n' "${summary[@]}"
[ ${#skips[@]} -eq 0 ] || printf '  skipped: %s\n' "${skips[@]}"
[ ${#failing[@]} -eq 0 ] || echo "failed: $(printf '%s, ' "${failing[@]}" | sed 's/, $//')"
echo "$total_passed passed, $total_failed failed"
[ "$total_failed" -eq 0 ]
