# shellcheck shell=bash
# Sourced by test/examples/run.sh, on its cluster (sql, the extension
# created in database postgres): examples/setup.sql applied as a user
# would, with plain psql -f (the file sets ON_ERROR_STOP itself).

# setup_psql DB: psql -f examples/setup.sql in DB; prints its exit status.
setup_psql() {
	"$RL_PG_BIN/psql" -X -q -d "$1" -f "$EXAMPLES/setup.sql" >"$tmp/setup.log" 2>&1
	echo $?
}

# check_setup_sql: applies setup.sql in postgres, beside the README's zone
# 'api' and the demo's zone, then again; and, in a database of its own,
# against a zone of its name of another algorithm.  Dies when the zone it
# makes is missing (nothing else can run).
check_setup_sql() {
	local demo_zone zone_row
	# The README's first example and the demo's own definition, as written.
	demo_zone=$(grep -o "SELECT rl_zone_set('demo_api'[^;]*)" "$RL_ROOT/scripts/demo.sh")
	rl_check "scripts/demo.sh defines zone demo_api" yes "$([ -n "$demo_zone" ] && echo yes || echo no)"
	sql -c "SELECT rl_zone_set('api', 'sliding_window', 100, '1 minute')" \
		${demo_zone:+-c "$demo_zone"} >/dev/null
	rl_check "setup.sql applies beside the README's and the demo's zones" 0 "$(setup_psql postgres)"
	[ "$(sql -c "SELECT count(*) FROM rl_zones WHERE zone = '$ZONE'")" = 1 ] \
		|| { cat "$tmp/setup.log"; rl_die "examples/setup.sql made no zone $ZONE"; }
	rl_check "... and leaves the README's zone as it was" sliding_window \
		"$(sql -c "SELECT algorithm FROM rl_zones WHERE zone = 'api'")"
	# Again, with a key of the zone part spent: its definition and the
	# key's state stay.
	local definition="SELECT algorithm, rate, period, capacity, store, refill, shadow FROM rl_zones WHERE zone = '$ZONE'"
	local spent="SELECT remaining FROM rl_peek('$ZONE', 'setup-check', 0)"
	zone_row=$(sql -c "$definition")
	sql -c "SELECT rl_limit('$ZONE', 'setup-check')" >/dev/null
	rl_check "setup.sql applied a second time" 0 "$(setup_psql postgres)"
	rl_check "... leaves the zone's definition as it was" "$zone_row" "$(sql -c "$definition")"
	rl_check "... and its keys' state" 2 "$(sql -c "$spent")"
	sql -c "SELECT rl_reset('$ZONE', 'setup-check')" >/dev/null

	# All or nothing: the zone's name taken by a zone of another algorithm
	# (which rl_zone_set refuses to change without reset => true).
	local db=setup_conflict can
	sql -c 'SET client_min_messages = warning' -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" >/dev/null
	rl_psql -d $db -c 'CREATE EXTENSION ratelimit' \
		-c "SELECT rl_zone_set('$ZONE', 'sliding_window', 3, '1 minute')" >/dev/null
	rl_check "setup.sql against a zone $ZONE of another algorithm fails" 3 "$(setup_psql $db)"
	rl_check "... and names the zone" yes \
		"$(grep -q "zone \"$ZONE\"" "$tmp/setup.log" && echo yes || echo no)"
	can=$(rl_psql -d $db -tA -c "SELECT has_function_privilege('app', 'rl_limit(text, text, integer)', 'EXECUTE')")
	rl_check "... and grants nothing (all or nothing)" f "$can"
	rl_check "... and leaves that zone as it was" sliding_window \
		"$(rl_psql -d $db -tA -c "SELECT algorithm FROM rl_zones WHERE zone = '$ZONE'")"
	sql -c "DROP DATABASE $db" >/dev/null
}
