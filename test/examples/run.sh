#!/usr/bin/env bash
# End-to-end test of the example apps (examples/python, examples/node): each
# one runs against a throwaway cluster (scripts/lib.sh, .cluster/examples)
# where examples/setup.sql made zone 'example_api' and role 'app', as role
# 'app', on a free loopback port, the connection given by libpq's PG*
# variables alone; curl sends it requests.  Expectations come from the
# zone as setup.sql defined it (rl_zones): N = its capacity, T = period /
# rate, the seconds one request takes to come back.  For each app:
#   - requests 1..N are 200, with every header rl_headers() returns for an
#     admitted call and none it adds only to a refusal; RateLimit-Policy
#     "example_api";q=<rate>;w=<period s>, RateLimit "example_api";r=N - i;t= in
#     [i*T - elapsed, i*T];
#   - request N+1 is 429 with every header rl_headers() returns for a
#     refusal: Retry-After in [T - elapsed, T], r=0, t in [N*T - elapsed,
#     N*T];
#   - another request with X-Forwarded-For set is still 429 (the header is
#     not the key; a refusal takes nothing), a request from 127.0.0.2 is 200
#     with Remaining N - 1 (its own allowance);
#   - the database holds exactly those two keys, with those allowances;
#   - all of it within T seconds (then the clock's refill cannot have given
#     back a whole request, so the counts above are exact);
#   - password authentication and outages (test/examples/outages.sh): as a
#     role that pg_hba.conf asks a SCRAM password of, with no password or a
#     wrong one the app starts, answers 503 and keeps running; with it in
#     PGPASSWORD or in a password file (PGPASSFILE, as ~/.pgpass), 200;
#     with the database stopped under it, 503, then 200 once it is back;
#     started while the database is down, 503, then 200 once it is up.
# setup.sql: applied beside the README's zone 'api' and the demo's zone,
# then again (no change); against a zone of its name with another algorithm
# it fails and leaves nothing applied (no grant).
# The demo (test/examples/demo_check.sh): scripts/demo.sh, run twice in a copy of
# the repository on a private copy of PostgreSQL, shows a refusal and
# rl_token_bucket's -1, and prints export PG* lines that reach its cluster;
# with them, setup.sql applies (twice) and an app answers 200; `demo.sh
# stop` stops it (the app then answers 503).
# Installs what is missing (python3-psycopg; node's pg with npm ci); an app
# whose tools cannot be installed prints "# SKIP <app>: <reason>" (npm's error
# code and message when npm ci failed) and counts neither passed nor failed;
# scripts/test.sh lists it as skipped in its summary.  Ends with "N passed, N failed"; exits non-zero
# on any failure.  Stops the apps and the cluster on exit.
#   bash test/examples/run.sh
set -uo pipefail
source "$(dirname "$0")/../../scripts/lib.sh"
unset PGOPTIONS PGSERVICE PGDATABASE PGPASSWORD
EXAMPLES=$RL_ROOT/examples
# Debian's interpreter, where python3-psycopg installs (not a pyenv's or a
# virtualenv's python3 that PATH may find first).
PYTHON=${RL_PYTHON:-/usr/bin/python3}
ZONE=example_api
skipped=0

tmp=$(mktemp -d)
app_pid=""
stop_app() {
	if [ -n "$app_pid" ]; then
		kill "$app_pid" 2>/dev/null
		wait "$app_pid" 2>/dev/null
		app_pid=""
	fi
}
cleanup() {
	stop_app
	demo_stop
	rl_cluster_stop
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

skip() {
	echo "# SKIP $1: $2"
	skipped=$((skipped + 1))
}

# What each app needs; prints the reason when it cannot be had.
need_python() {
	"$PYTHON" -c 'import psycopg' 2>/dev/null && return 0
	rl_install_packages python3-psycopg </dev/null 2>/dev/null \
		|| { echo "apt-get install -y python3-psycopg failed"; return 1; }
	"$PYTHON" -c 'import psycopg' 2>/dev/null && return 0
	echo "$PYTHON cannot import psycopg (python3-psycopg is installed)"
	return 1
}
need_node() {
	command -v node >/dev/null || rl_install_packages nodejs </dev/null 2>/dev/null
	command -v npm >/dev/null || rl_install_packages npm </dev/null 2>/dev/null
	command -v node >/dev/null && command -v npm >/dev/null \
		|| { echo "node or npm is missing and could not be installed"; return 1; }
	# node_modules holds exactly the pinned pg, or npm ci installs the lock.
	local dir=$EXAMPLES/node wanted have
	wanted=$(cd "$dir" && node -p "require('./package.json').dependencies.pg")
	have=$(cd "$dir" && node -p "require('./node_modules/pg/package.json').version" 2>/dev/null)
	if [ "$have" != "$wanted" ]; then
		rl_log "npm ci in examples/node"
		(cd "$dir" && npm ci --no-audit --no-fund </dev/null >"$tmp/npm.log" 2>&1) \
			|| { echo "npm could not install examples/node's packages: $(rl_npm_error "$tmp/npm.log")"; return 1; }
	fi
}

# get [CURL OPTIONS...]: one GET to the app under test; sets status and
# hdrs (the response's header lines, CRs removed).
get() {
	hdrs=$(curl -sS -m 10 -D - -o /dev/null "$@" "http://127.0.0.1:$port/" 2>&1 | tr -d '\r')
	status=$(head -1 <<<"$hdrs" | awk '/^HTTP\// {print $2}')
}
# header NAME: the value of header NAME (any case) in hdrs.
header() {
	grep -i "^$1:" <<<"$hdrs" | head -1 | sed 's/^[^:]*:[[:space:]]*//'
}
# ratelimit PARAM: parameter PARAM (r or t) of the RateLimit header, when
# it names the zone.
ratelimit() {
	header RateLimit | sed -n "s/^\"$ZONE\";\(.*;\)\{0,1\}$1=\([0-9]*\).*/\2/p"
}
# missing NAMES...: those NAMES that hdrs lacks (empty when it has all).
missing() {
	local n out=""
	for n in "$@"; do [ -n "$(header "$n")" ] || out+="$n "; done
	echo "${out% }"
}
# present NAMES...: those NAMES that hdrs has.
present() {
	local n out=""
	for n in "$@"; do [ -z "$(header "$n")" ] || out+="$n "; done
	echo "${out% }"
}
elapsed() {
	awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f", b - a }'
}
# check_range NAME LOW HIGH VALUE: an integer VALUE with LOW <= VALUE <= HIGH.
check_range() {
	local want="an integer in [$2, $3]" got=$4
	if [[ $got =~ ^[0-9]+$ ]] && awk -v v="$got" -v lo="$2" -v hi="$3" 'BEGIN { exit !(v >= lo && v <= hi) }'; then
		got=$want
	fi
	rl_check "$1" "$want" "$got"
}
sub() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a - b }'; }
mul() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%g", a * b }'; }

# launch LABEL ENV...: starts the app ("${app_cmd[@]}", then the port) with
# ENV... added to the environment, on a free port; up=yes once it answers a
# GET with a status that matches ANSWERS (a regular expression; default:
# any status), else no (it exited, or did not answer so within 30 s: its
# log is shown).
launch() {
	local label=$1
	shift
	port=$(rl_free_port)
	env "$@" "${app_cmd[@]}" "$port" >"$tmp/$label.log" 2>&1 &
	app_pid=$!
	up=no
	for _ in $(seq 1 60); do
		kill -0 "$app_pid" 2>/dev/null || break
		get
		if [[ $status =~ ${ANSWERS:-.} ]]; then up=yes; break; fi
		sleep 0.5
	done
	[ "$up" = yes ] || sed 's/^/# /' "$tmp/$label.log"
}
# reset_keys: the zone's keys forgotten (a request spent by a check is back).
reset_keys() { sql -c "SELECT count(rl_reset(zone, key)) FROM rl_keys WHERE zone = '$ZONE'" >/dev/null; }
# logins: the roles the apps' connections logged in as.
logins() {
	sql -c "SELECT string_agg(DISTINCT usename, ' ') FROM pg_stat_activity
	        WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
}

source "$(dirname "$0")/setup_sql.sh"
source "$(dirname "$0")/outages.sh"
source "$(dirname "$0")/demo_check.sh"

command -v curl >/dev/null || rl_install_packages curl </dev/null || rl_die "curl could not be installed"
RL_PRELOAD=ratelimit rl_cluster_start examples "fsync = off"
sql() { rl_psql -d postgres -tA "$@"; }
sql -c 'CREATE EXTENSION ratelimit' >/dev/null
check_setup_sql

# The zone as setup.sql made it.  The expectations below are a token
# bucket's: a request comes back every T seconds, up to N.
IFS='|' read -r algorithm N T RATE PERIOD_S < <(sql -c \
	"SELECT algorithm, capacity, extract(epoch FROM period) / rate, rate, extract(epoch FROM period) FROM rl_zones WHERE zone = '$ZONE'")
rl_check "setup.sql makes zone $ZONE a token bucket" token_bucket "${algorithm:-none}"
rl_check "role app is no superuser" f "$(sql -c "SELECT rolsuper FROM pg_roles WHERE rolname = 'app'")"
[ "$algorithm" = token_bucket ] || { echo "$passed passed, $failed failed"; exit 1; }
T=$(awk -v t="$T" 'BEGIN { printf "%g", t }')
echo "# zone $ZONE: capacity N=$N, one request back every T=$T s"

# The header names rl_headers returns for an admitted and for a refused
# call of this zone (from literal results: nothing is hard-coded here).
names_of() {
	sql -c "SELECT string_agg(k, ' ' ORDER BY k) FROM jsonb_object_keys(rl_headers($1::rl_result)) k"
}
limit_of="'$ZONE', $RATE, make_interval(secs => $PERIOD_S)"
allowed_names=$(names_of "ROW(true, $N, $((N - 1)), NULL, make_interval(secs => $T), NULL, true, $limit_of)")
refused_names=$(names_of "ROW(false, $N, 0, make_interval(secs => $T), make_interval(secs => $(mul "$T" "$N")), NULL, false, $limit_of)")
# The policy the zone announces (a whole rate per whole seconds here).
POLICY="\"$ZONE\";q=$RATE;w=$(awk -v p="$PERIOD_S" 'BEGIN { printf "%d", p }')"
refusal_only=$(comm -13 <(tr ' ' '\n' <<<"$allowed_names" | sort) <(tr ' ' '\n' <<<"$refused_names" | sort) | tr '\n' ' ')
refusal_only=${refusal_only% }
echo "# rl_headers: admitted: $allowed_names; refused: $refused_names"

# test_app NAME COMMAND...: starts the app (COMMAND, then the port), as role
# app, and checks it.
test_app() {
	local name=$1 i reset_hi
	shift
	app_cmd=("$@")
	# Up when it answers a GET with a decision; that GET spent a request,
	# so the zone's keys are reset afterwards.
	ANSWERS='^(200|429)$' launch "$name" PGUSER=app PGDATABASE=postgres
	rl_check "$name: the app answers on 127.0.0.1:$port" yes "$up"
	if [ "$up" != yes ]; then
		stop_app
		return
	fi
	reset_keys

	start=$(date +%s.%N)
	for i in $(seq 1 "$N"); do
		get
		rl_check "$name: request $i of $N is admitted" 200 "$status"
		rl_check "$name: request $i carries rl_headers' headers" "" "$(missing $allowed_names)"
		rl_check "$name: request $i carries no refusal header" "" "$(present $refusal_only)"
		rl_check "$name: request $i RateLimit-Policy" "$POLICY" "$(header RateLimit-Policy)"
		rl_check "$name: request $i RateLimit r (remaining)" "$((N - i))" "$(ratelimit r)"
		reset_hi=$(mul "$T" "$i")
		check_range "$name: request $i RateLimit t (until full)" "$(sub "$reset_hi" "$(elapsed)")" "$reset_hi" "$(ratelimit t)"
	done

	get
	rl_check "$name: request $((N + 1)) is refused" 429 "$status"
	rl_check "$name: request $((N + 1)) carries rl_headers' headers" "" "$(missing $refused_names)"
	check_range "$name: request $((N + 1)) Retry-After" "$(sub "$T" "$(elapsed)")" "$T" "$(header Retry-After)"
	rl_check "$name: request $((N + 1)) RateLimit-Policy" "$POLICY" "$(header RateLimit-Policy)"
	rl_check "$name: request $((N + 1)) RateLimit r (remaining)" 0 "$(ratelimit r)"
	reset_hi=$(mul "$T" "$N")
	check_range "$name: request $((N + 1)) RateLimit t (until full)" "$(sub "$reset_hi" "$(elapsed)")" "$reset_hi" "$(ratelimit t)"

	get -H 'X-Forwarded-For: 127.0.0.9'
	rl_check "$name: a request with X-Forwarded-For is still refused" 429 "$status"
	rl_check "$name: ... and the refusals took nothing" 0 "$(ratelimit r)"
	get --interface 127.0.0.2
	rl_check "$name: a request from 127.0.0.2 is admitted" 200 "$status"
	rl_check "$name: ... from its own allowance" "$((N - 1))" "$(ratelimit r)"
	local took; took=$(elapsed)
	rl_check "$name: the requests took less than T=$T s (exact counts)" yes \
		"$(awk -v e="$took" -v t="$T" 'BEGIN { print (e < t) ? "yes" : "no: " e " s" }')"

	rl_check "$name: the zone's keys in the database" \
		"ip:127.0.0.1=0 ip:127.0.0.2=$((N - 1))" \
		"$(sql -c "SELECT string_agg(key || '=' || remaining, ' ' ORDER BY key) FROM rl_keys WHERE zone = '$ZONE'")"
	rl_check "$name: the app's connections log in as app" app "$(logins)"
	stop_app
}

demo_app=()	# the first app that runs: the demo's check starts it too
if reason=$(need_python); then
	test_app python "$PYTHON" "$EXAMPLES/python/app.py"
	test_outages python "$PYTHON" "$EXAMPLES/python/app.py"
	demo_app=("$PYTHON" "$EXAMPLES/python/app.py")
else
	skip python "$reason"
fi
if reason=$(need_node); then
	test_app node node "$EXAMPLES/node/app.js"
	test_outages node node "$EXAMPLES/node/app.js"
	[ ${#demo_app[@]} -gt 0 ] || demo_app=(node "$EXAMPLES/node/app.js")
else
	skip node "$reason"
fi
test_demo "${demo_app[@]}"

if [ "$skipped" -gt 0 ]; then
	echo "$passed passed, $failed failed, $skipped skipped"
else
	echo "$passed passed, $failed failed"
fi
[ "$failed" -eq 0 ]
