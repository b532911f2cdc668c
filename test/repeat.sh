#!/usr/bin/env bash
# Runs the whole test suite N times in a row (default 20), each time on a
# fresh clone of one commit, and reports which suites and which tests failed
# in which runs: a flaky test shows up as a line failing in some runs only.
#
#   bash test/repeat.sh [N]
#
#   REPEAT_REF      commit to test (default HEAD), resolved once at the start
#                   so a commit made during the runs does not change what is
#                   tested; uncommitted changes are never part of a run
#   REPEAT_COMMAND  command run in each clone (default: RL_PRIVATE_PG=1 bash
#                   scripts/test.sh: each run installs into a private copy of
#                   PostgreSQL inside its clone, so runs leave the system's
#                   installed extension alone and other work can go on)
#   REPEAT_OUT      output directory (default /tmp/ratelimit-repeat-<time>);
#                   must not exist or be empty.  Holds run-01.log ... (each
#                   run's full output), run-NN.results/ for failed runs (the
#                   suite logs and server logs), REPORT.md
#   REPEAT_TIMEOUT  seconds one run may take before it is killed and counted
#                   as failed (default 1800; 0: no limit)
#
# The report goes to stdout and REPORT.md; the last line is
# "N passed, M failed", counting runs, and the exit status is non-zero when
# a run failed.
#
# A run counts as passed only when its command exits 0 and prints a final
# "N passed, 0 failed" line: a suite runner that dies before its summary
# must not pass.  Failing tests are the lines of the output that look like
# "not ok ..." (TAP), "... FAILED" (pg_regress, isolation), "[  FAILED  ]"
# (GoogleTest) or "error: ..." (scripts/lib.sh's rl_die); each is put under
# the suite whose "<suite>: N passed, M failed" line follows it, which is
# where scripts/test.sh prints a failed suite's output.
#
# Note: with a REPEAT_COMMAND without RL_PRIVATE_PG=1, every run installs
# the extension it builds into the system's PostgreSQL, like
# scripts/test.sh does; then do not run this next to other test runs.
set -uo pipefail

RUNS=${1:-20}
REF=${REPEAT_REF:-HEAD}
COMMAND=${REPEAT_COMMAND:-RL_PRIVATE_PG=1 bash scripts/test.sh}
TIMEOUT=${REPEAT_TIMEOUT:-1800}
PG_BIN=${RL_PG_BIN:-/usr/lib/postgresql/15/bin}

die() { printf 'repeat.sh: %s\n' "$*" >&2; exit 2; }

[[ $RUNS =~ ^[1-9][0-9]*$ ]] || die "N must be a positive integer (got '$RUNS')"
[[ $TIMEOUT =~ ^[0-9]+$ ]] || die "REPEAT_TIMEOUT must be a number of seconds (got '$TIMEOUT')"

SRC=$(git -C "$(dirname "${BASH_SOURCE[0]}")" rev-parse --show-toplevel) \
	|| die "test/repeat.sh must live in a git repository"
SHA=$(git -C "$SRC" rev-parse --verify --quiet "$REF^{commit}") || die "no commit '$REF' in $SRC"
SUBJECT=$(git -C "$SRC" log -1 --format=%s "$SHA")
DIRTY=$(git -C "$SRC" status --porcelain --untracked-files=no | wc -l)

OUT=${REPEAT_OUT:-/tmp/ratelimit-repeat-$(date +%Y%m%d-%H%M%S)}
if [ -d "$OUT" ] && [ -n "$(ls -A "$OUT")" ]; then
	die "$OUT is not empty: results of different repeats would mix"
fi
mkdir -p "$OUT" || die "cannot create $OUT"
OUT=$(cd "$OUT" && pwd)
FACTS=$OUT/facts.tsv	# what each run found, one fact a line; the report is made from it
: >"$FACTS"

# Clusters run as postgres when we are root (PostgreSQL refuses root), as
# ourselves otherwise: the same rule as scripts/lib.sh.
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
as_cluster_user() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

# Stops whatever a run left running inside DIR.  scripts/test.sh stops its
# own clusters on exit, but not when it is killed (timeout, SIGKILL) or when
# a suite it calls dies between starting a cluster and stopping it.
leftovers=0
stop_leftovers() {
	local dir=$1 pidfile pid
	[ -d "$dir" ] || return 0
	while IFS= read -r -d '' pidfile; do
		leftovers=$((leftovers + 1))
		echo "repeat.sh: stopping the cluster left running in $(dirname "$pidfile")" >&2
		as_cluster_user "$PG_BIN/pg_ctl" -D "$(dirname "$pidfile")" stop -m immediate -w >/dev/null 2>&1 || true
	done < <(as_root find "$dir" -name postmaster.pid -print0 2>/dev/null)
	# A postmaster whose pid file is gone, a client stuck on a dead server:
	# anything whose command line names the clone.  The trailing slash keeps
	# it from matching a sibling directory with a longer name.
	for pid in $(pgrep -f -- "$dir/"); do
		leftovers=$((leftovers + 1))
		echo "repeat.sh: killing $pid, left running: $(ps -o args= -p "$pid" 2>/dev/null)" >&2
		as_root kill -KILL "$pid" 2>/dev/null || true
	done
}

clone_dir=""
remove_clone() {
	[ -n "$clone_dir" ] || return 0
	stop_leftovers "$clone_dir"
	as_root rm -rf "$clone_dir"	# the clusters' files belong to postgres
	clone_dir=""
}

child="" interrupted=0
# An interrupt has to reach the run: timeout puts it in a process group of
# its own, so the terminal's Ctrl-C does not.
on_signal() {
	interrupted=1
	[ -z "$child" ] || kill -TERM "$child" 2>/dev/null
}
trap on_signal INT TERM
trap remove_clone EXIT

# parse_run RUN LOG: appends to FACTS the run's suite summaries (S), its
# failing test lines (F, once a run for each suite) and its total (T).
# Two passes: the first finds the suites (the final summary table when the
# run got that far, else the "suite: N passed" lines it printed on the way),
# the second puts each failing line under the next such suite line, so a
# "fault: 3 passed, 1 failed" printed by a script inside a suite's log does
# not take the lines from the suite that ran it.
parse_run() {
	awk -v run="$1" '
	function summary(line, parts) {	# sets S_NAME, S_PASSED, S_FAILED, S_COLON
		if (!match(line, /^.*[^ ] +[0-9]+ passed, [0-9]+ failed *$/)) return 0
		split(line, parts, / passed, | failed/)
		S_NAME = parts[1]; sub(/ +[0-9]+$/, "", S_NAME)
		S_PASSED = parts[1]; sub(/^.* /, "", S_PASSED)
		S_FAILED = parts[2] + 0
		S_COLON = sub(/:$/, "", S_NAME)
		return 1
	}
	function failing(line) {
		return line ~ /^[ \t]*not ok([ \t]|$)/ || line ~ /\.\.\. FAILED/ ||
		       line ~ /^\[  FAILED  \] [A-Za-z]/ || line ~ /^error: /
	}
	# Timings differ from run to run; without them a test failing in two
	# runs is one line with a count of two.
	function normalize(line) {
		gsub(/[ \t]+/, " ", line); sub(/^ /, "", line); sub(/ $/, "", line)
		sub(/ \(?[0-9]+ ms\)?$/, "", line)
		return length(line) > 200 ? substr(line, 1, 197) "..." : line
	}
	{ sub(/\r$/, "") }
	NR == FNR {
		if ($0 ~ /^[0-9]+ passed, [0-9]+ failed *$/) {
			total = $0; have_total = 1
		} else if (summary($0)) {
			if (S_COLON) { colon[S_NAME] = S_PASSED "\t" S_FAILED; if (!(S_NAME in co)) co[S_NAME] = ++ncolon; corder[co[S_NAME]] = S_NAME }
			else { table[S_NAME] = S_PASSED "\t" S_FAILED; if (!(S_NAME in to)) to[S_NAME] = ++ntable; torder[to[S_NAME]] = S_NAME }
		}
		next
	}
	FNR == 1 {
		if (ntable) for (i = 1; i <= ntable; i++) { s = torder[i]; suite[s] = table[s]; order[++n] = s }
		else for (i = 1; i <= ncolon; i++) { s = corder[i]; suite[s] = colon[s]; order[++n] = s }
		for (i = 1; i <= n; i++) printf "S\t%s\t%s\t%s\n", run, order[i], suite[order[i]]
		if (have_total) { split(total, t, / passed, | failed/); printf "T\t%s\t%d\t%d\n", run, t[1], t[2] }
	}
	failing($0) { l = normalize($0); if (!(l in pending)) { pending[l] = 1; pend[++npend] = l } next }
	summary($0) && (S_NAME in suite) {
		for (i = 1; i <= npend; i++) if (!seen[S_NAME, pend[i]]++) printf "F\t%s\t%s\t%s\n", run, S_NAME, pend[i]
		delete pending; npend = 0
	}
	END {
		for (i = 1; i <= npend; i++) printf "F\t%s\t%s\t%s\n", run, "(no suite)", pend[i]
	}' "$2" "$2"
}

# report: the Markdown report of the runs in FACTS so far.
report() {
	awk -F'\t' -v runs_wanted="$RUNS" -v sha="$SHA" -v subject="$SUBJECT" -v command="$COMMAND" \
		-v out="$OUT" -v dirty="$DIRTY" -v started="$STARTED" -v interrupted="$interrupted" '
	function dur(s) { return s >= 60 ? sprintf("%dm %02ds", s / 60, s % 60) : s "s" }
	function add(list, item) { return list == "" ? item : list ", " item }
	function code(s) { gsub(/`/, "'\''", s); return "`" s "`" }
	$1 == "R" { nruns++; run[nruns] = $2; status[$2] = $3; secs[$2] = $4; verdict[$2] = $5; note[$2] = $6
	            if ($5 == "passed") npassed++; else nfailed++ }
	$1 == "S" { if (!($3 in sidx)) { sidx[$3] = ++nsuites; suites[nsuites] = $3 }
	            ran[$3]++
	            if (!($3 in pmin) || $4 + 0 < pmin[$3]) pmin[$3] = $4 + 0
	            if (!($3 in pmax) || $4 + 0 > pmax[$3]) pmax[$3] = $4 + 0
	            if ($5 > 0) { sfail[$3]++; sruns[$3] = add(sruns[$3], $2 + 0); rfail[$2] = add(rfail[$2], $3) } }
	$1 == "F" { key = $3 SUBSEP $4; if (!(key in lcount)) { lorder[$3] = lorder[$3] SUBSEP $4 }
	            lcount[key]++; lruns[key] = add(lruns[key], $2 + 0); fsuite[$3] = 1 }
	END {
		printf "# repeat.sh: %d run%s of %s\n\n", nruns, nruns == 1 ? "" : "s", code(command)
		printf "- commit: %s (%s)\n", substr(sha, 1, 12), subject
		if (dirty > 0) printf "- the work tree had %d uncommitted change(s); the runs did not include them\n", dirty
		printf "- started: %s; runs asked for: %d\n", started, runs_wanted
		if (interrupted) printf "- **interrupted** after %d complete run(s)\n", nruns
		printf "- logs: %s/run-NN.log\n\n", out

		print "## Runs\n"
		print "| run | result | exit | duration | failed suites / note |"
		print "|----:|--------|-----:|---------:|----------------------|"
		for (i = 1; i <= nruns; i++) {
			r = run[i]; what = rfail[r]
			if (note[r] != "") what = what == "" ? note[r] : what "; " note[r]
			printf "| %s | %s | %s | %s | %s |\n", r, verdict[r] == "passed" ? "passed" : "**FAILED**", status[r], dur(secs[r]), what
			s = secs[r] + 0; total_s += s
			if (i == 1 || s < min_s) min_s = s
			if (i == 1 || s > max_s) max_s = s
		}
		if (nruns) printf "\nDuration: min %s, mean %s, max %s; all runs %s.\n", dur(min_s), dur(int(total_s / nruns + 0.5)), dur(max_s), dur(total_s)

		print "\n## Suites\n"
		# tests passed, lowest and highest over the runs: a suite that
		# quietly runs fewer tests in some runs shows as a range
		print "| suite | runs failed | runs reported | tests passed | failed in runs |"
		print "|-------|------------:|--------------:|-------------:|----------------|"
		for (i = 1; i <= nsuites; i++) {
			s = suites[i]
			printf "| %s | %s | %d | %s | %s |\n", s, sfail[s] ? "**" sfail[s] "**" : 0, ran[s],
				pmin[s] == pmax[s] ? pmin[s] : pmin[s] "-" pmax[s], sruns[s]
		}
		for (s in fsuite) if (!(s in sidx)) { sidx[s] = ++nsuites; suites[nsuites] = s }

		print "\n## Failing tests\n"
		any = 0
		for (i = 1; i <= nsuites; i++) {
			s = suites[i]
			if (!(s in lorder)) continue
			any = 1
			printf "%s:\n\n", s
			n = split(substr(lorder[s], 2), lines, SUBSEP)
			# most frequent first; insertion sort, the lists are short
			for (a = 2; a <= n; a++) for (b = a; b > 1 && lcount[s, lines[b]] > lcount[s, lines[b - 1]]; b--) {
				tmp = lines[b]; lines[b] = lines[b - 1]; lines[b - 1] = tmp
			}
			for (a = 1; a <= n; a++)
				printf "- %s: %d of %d run%s (%s %s)\n", code(lines[a]), lcount[s, lines[a]], nruns, nruns == 1 ? "" : "s",
					lcount[s, lines[a]] == 1 ? "run" : "runs", lruns[s, lines[a]]
			print ""
		}
		if (!any) print "none\n"

		printf "runs passed: %d of %d\n", npassed, nruns
		printf "%d passed, %d failed\n", npassed, nfailed
	}' "$FACTS"
}

STARTED=$(date '+%Y-%m-%d %H:%M:%S %z')
echo "repeat.sh: $RUNS run(s) of '$COMMAND' at ${SHA:0:12} ($SUBJECT); output in $OUT"
[ "$DIRTY" -eq 0 ] || echo "repeat.sh: note: $DIRTY uncommitted change(s) in $SRC are not tested"

for ((i = 1; i <= RUNS; i++)); do
	[ "$interrupted" -eq 0 ] || break
	run=$(printf '%02d' "$i")
	log=$OUT/run-$run.log
	# /tmp, not the repository's directory: postgres needs search permission
	# on every directory above its data directory, and mktemp's 0700 would
	# deny it.
	clone_dir=$(mktemp -d /tmp/ratelimit-repeat-clone.XXXXXX) || die "mktemp failed"
	chmod 755 "$clone_dir"
	repo=$clone_dir/ratelimit
	if ! { git clone -q --no-checkout "$SRC" "$repo" && git -C "$repo" checkout -q --detach "$SHA"; } >"$log" 2>&1; then
		cat "$log" >&2
		die "could not clone $SRC at $SHA (see above); stopping after $((i - 1)) run(s)"
	fi

	start=$(date +%s)
	# In the background, so that the INT/TERM trap runs at once rather than
	# when the run ends; timeout kills the run's whole process group.
	(cd "$repo" && exec timeout --kill-after=30 "$TIMEOUT" bash -c "$COMMAND") >>"$log" 2>&1 </dev/null &
	child=$!
	while :; do
		wait "$child"; status=$?
		kill -0 "$child" 2>/dev/null || break	# wait was cut short by a signal: wait again
	done
	child=""
	secs=$(( $(date +%s) - start ))

	if [ "$interrupted" -eq 1 ]; then
		echo "repeat.sh: interrupted during run $run; it is not counted"
		remove_clone
		break
	fi

	# Before the verdict: what a run leaves running belongs in its note.
	leftovers=0
	stop_leftovers "$clone_dir"
	facts=$(parse_run "$run" "$log")
	total=$(awk -F'\t' '$1 == "T" { print $4 }' <<<"$facts")
	failed_suites=$(awk -F'\t' '$1 == "S" && $5 > 0' <<<"$facts" | wc -l)
	note=""
	if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then note="killed after ${TIMEOUT}s (REPEAT_TIMEOUT)"
	elif [ -z "$total" ]; then note="no final 'N passed, M failed' line"
	fi
	if [ "$leftovers" -gt 0 ]; then
		note="${note:+$note; }left $leftovers cluster(s) or process(es) running (stopped)"
	fi
	if [ "$status" -eq 0 ] && [ "${total:-1}" -eq 0 ] && [ "$failed_suites" -eq 0 ]; then
		verdict=passed
	else
		verdict=failed
		# The suites' own logs and the servers' logs go with the clone:
		# keep them for the runs worth looking into.
		mkdir -p "$OUT/run-$run.results"
		[ -d "$repo/results" ] && cp -a "$repo/results/." "$OUT/run-$run.results/" 2>/dev/null
		for server_log in "$repo"/.cluster/*/server.log; do
			[ -f "$server_log" ] || continue
			cp "$server_log" "$OUT/run-$run.results/server-$(basename "$(dirname "$server_log")").log"
		done
		rmdir "$OUT/run-$run.results" 2>/dev/null	# nothing to keep (not scripts/test.sh)
	fi
	{
		[ -z "$facts" ] || printf '%s\n' "$facts"
		printf 'R\t%s\t%s\t%s\t%s\t%s\n' "$run" "$status" "$secs" "$verdict" "$note"
	} >>"$FACTS"
	remove_clone

	printf 'repeat.sh: run %s/%02d %s in %dm %02ds%s\n' "$run" "$RUNS" "$verdict" $((secs / 60)) $((secs % 60)) \
		"$( [ "$verdict" = passed ] || echo " (exit $status; log $log)" )"
	report >"$OUT/REPORT.md"	# after every run: a killed repeat still leaves its report
done

report >"$OUT/REPORT.md"
echo
cat "$OUT/REPORT.md"
[ "$interrupted" -eq 0 ] || exit 130
! grep -q $'^R\t[^\t]*\t[^\t]*\t[^\t]*\tfailed' "$FACTS"
