# shellcheck shell=bash
# Sourced by test/examples/run.sh: scripts/demo.sh as the README's quick
# start runs it, then examples/ against its cluster as examples/README.md
# says.  The demo builds and installs the extension and keeps its cluster
# in the repository (.cluster/demo): it runs in a copy of the repository
# (rl_copy_tree: without .git and build output) on a private copy of PostgreSQL,
# so that neither the extension under test nor a demo of the developer's
# is touched.

demo_repo=""
demo_bin=""
demo() { RL_PG_BIN=$demo_bin bash "$demo_repo/scripts/demo.sh" "$@" </dev/null; }
# On exit: the demo's cluster, when one may be running.
demo_stop() { [ -z "$demo_repo" ] || demo stop >/dev/null 2>&1; }
# exports_of FILE: the demo's "export PG...=..." lines.
exports_of() { grep -E '^export PG[A-Z]+=[^ ]+$' "$1"; }
# connects EXPORTS: the zones in the database the EXPORTS lines reach, or
# "no connection".
connects() {
	(eval "$1"; "$demo_bin/psql" -X -tA -c 'SELECT string_agg(zone, $$ $$ ORDER BY zone) FROM rl_zones' 2>/dev/null) \
		|| echo "no connection"
}

# test_demo [APP COMMAND...]: the demo, twice, its output, and the app
# (COMMAND, then the port; none: that part is skipped) against it.
test_demo() {
	local pg=/usr/lib/postgresql/$RL_PG_VERSION
	if [ ! -x "$pg/bin/pg_config" ]; then
		skip demo "no $pg to copy for the demo (it builds and installs into its PostgreSQL)"
		return
	fi
	demo_repo=$tmp/repo
	mkdir -p "$demo_repo"
	rl_copy_tree "$demo_repo" || rl_die "could not copy the repository for the demo"
	demo_bin=$(rl_private_pg "$tmp/pg") || rl_die "could not copy $pg"
	rl_allow_traverse "$demo_bin"

	local run out status
	for run in 1 2; do
		out=$tmp/demo.$run.out
		demo >"$out" 2>&1
		status=$?
		rl_check "demo, run $run: exits 0" 0 "$status"
		[ "$status" = 0 ] || tail -20 "$out" | sed 's/^/# /'
	done
	local exports first
	exports=$(exports_of "$out")
	first=$(exports_of "$tmp/demo.1.out")
	rl_check "demo: prints export lines for PGHOST, PGPORT, PGUSER, PGDATABASE" \
		"PGDATABASE PGHOST PGPORT PGUSER" "$(sed 's/^export \(PG[A-Z]*\)=.*/\1/' <<<"$exports" | sort | paste -sd ' ')"
	rl_check "demo: the lines reach its cluster (its zone)" demo_api "$(connects "$exports")"
	rl_check "demo: ... and are in .cluster/demo/env" "$exports" "$(cat "$demo_repo/.cluster/demo/env" 2>&1)"
	rl_check "demo: run 2 replaced run 1's cluster" "no connection" "$(connects "$first")"
	rl_check "demo: shows the rl_limit call" yes \
		"$(grep -qF "SELECT allowed, remaining, retry_after FROM rl_limit('demo_api', 'user:42')" "$out" && echo yes || echo no)"
	# A refused row: request | f | 0 | an interval.
	rl_check "demo: shows a refusal (allowed f, remaining 0, retry_after)" yes \
		"$(grep -qE '^ *[0-9]+ \| f +\| +0 \| [0-9]{2}:[0-9]{2}:[0-9]{2}' "$out" && echo yes || echo no)"
	rl_check "demo: says what a refusal is" yes \
		"$(grep -q 'refused: allowed = f, and retry_after' "$out" && echo yes || echo no)"
	rl_check "demo: rl_token_bucket's calls reach -1" yes \
		"$(grep -qE '^ *12 calls in quick succession:( [0-9]+)* -1( |$)' "$out" && echo yes || echo no)"
	rl_check "demo: says that -1 means refused" yes \
		"$(grep -q -- '-1 means refused' "$out" && echo yes || echo no)"

	# examples/README.md: the exports, setup.sql with psql, the app as role
	# app.
	local psql_setup="\"$demo_bin/psql\" -X -q -f \"$demo_repo/examples/setup.sql\""
	rl_check "demo: setup.sql applies on its cluster" 0 \
		"$( (eval "$exports"; eval "$psql_setup") >"$tmp/demo-setup.log" 2>&1; echo $?)"
	rl_check "demo: ... and again" 0 \
		"$( (eval "$exports"; eval "$psql_setup") >>"$tmp/demo-setup.log" 2>&1; echo $?)"
	rl_check "demo: ... beside its zone" "demo_api example_api" "$(connects "$exports")"
	if [ $# -eq 0 ]; then
		skip "demo with an app" "neither app can run here"
	else
		app_cmd=("$@")
		local vars
		read -ra vars <<<"$(sed 's/^export //' <<<"$exports" | paste -sd ' ')"
		launch demo-app "${vars[@]}" PGUSER=app
		get
		rl_check "demo: an app on its cluster (the exports, PGUSER=app): 200" 200 "$status"
		rl_check "demo: ... for zone $ZONE" "\"$ZONE\"" "$(header RateLimit | cut -d';' -f1)"
	fi
	local said
	said=$(demo stop 2>&1)
	rl_check "demo: 'demo.sh stop' stops it (and removes its env file)" \
		"demo cluster stopped/no connection/no env file" \
		"$said/$(connects "$exports")/$([ -e "$demo_repo/.cluster/demo/env" ] && echo env file || echo no env file)"
	demo_repo=""
	if [ $# -gt 0 ]; then
		get
		rl_check "demo: ... then the app answers 503" 503 "$status"
		rl_check "demo: ... and keeps running" yes "$(alive)"
		stop_app
	fi
}
