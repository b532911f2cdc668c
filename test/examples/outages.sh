# shellcheck shell=bash
# Sourced by test/examples/run.sh: what an app does when the database
# cannot decide.  A role, app_pw, that pg_hba.conf asks a SCRAM password of
# (the rule of a stock Debian cluster for TCP: host ... scram-sha-256); the
# app gets the connection from PG* variables alone, and no ~/.pgpass of the
# user running the test (PGPASSFILE points at a file that does not exist,
# or at one the test wrote).

PW_ROLE=app_pw
PW_SECRET=example-secret

alive() { kill -0 "$app_pid" 2>/dev/null && echo yes || echo no; }
logged() { grep -q "$1" "$tmp/$2.log" && echo yes || echo "no: $(tail -3 "$tmp/$2.log" | tr '\n' ' ')"; }
db_stop() { rl_cluster_ctl stop -m fast -w >/dev/null 2>&1; }
db_start() {
	rl_cluster_ctl start -w -t 60 -l "$RL_CLUSTER_DIR/server.log" >/dev/null 2>&1
	[ "$(rl_wait_answering)" = yes ] || rl_die "the cluster did not come back"
}
# recovers: GETs, up to 20 half a second apart, until one is 200 (the
# first after an outage may find the old connection broken: 503).
recovers() {
	for _ in $(seq 1 20); do
		get
		[ "$status" = 200 ] && break
		sleep 0.5
	done
	echo "$status"
}

# The role, its password, and the pg_hba.conf rule, once.
password_setup() {
	sql -c "CREATE ROLE $PW_ROLE LOGIN PASSWORD '$PW_SECRET'" -c "SELECT rl_grant('$PW_ROLE')" >/dev/null
	rl_as_cluster_user sed -i "1i host all $PW_ROLE 127.0.0.1/32 scram-sha-256" "$RL_PGDATA/pg_hba.conf"
	rl_cluster_ctl reload >/dev/null
	printf '127.0.0.1:%s:*:%s:%s\n' "$PGPORT" "$PW_ROLE" "$PW_SECRET" >"$tmp/pgpass"
	chmod 600 "$tmp/pgpass"
	# The rule is in force: psql itself needs the password.
	rl_check "pg_hba.conf asks $PW_ROLE for a password" no \
		"$(PGPASSFILE=$tmp/none rl_psql -U $PW_ROLE -d postgres -w -tA -c 'SELECT 1' >/dev/null 2>&1 && echo yes || echo no)"
	password_ready=yes
}
password_ready=no

# test_outages NAME COMMAND...: the app (COMMAND, then the port) without
# its password, with a wrong one, with it (PGPASSWORD, a password file),
# through a database stop, and started while the database is down.
test_outages() {
	local name=$1
	shift
	app_cmd=("$@")
	[ "$password_ready" = yes ] || password_setup
	local as=("PGUSER=$PW_ROLE" PGDATABASE=postgres "PGPASSFILE=$tmp/none")
	local how
	for how in "no password" "a wrong password"; do
		local vars=("${as[@]}")
		[ "$how" = "no password" ] || vars+=("PGPASSWORD=wrong-$PW_SECRET")
		launch "$name-refused" "${vars[@]}"
		rl_check "$name, $how: the app starts and answers" yes "$up"
		get
		rl_check "$name, $how: 503" 503 "$status"
		rl_check "$name, $how: the app logs the error" yes "$(logged 'rate limiter:' "$name-refused")"
		rl_check "$name, $how: the app keeps running" yes "$(alive)"
		stop_app
	done

	reset_keys
	launch "$name-pgpass" PGUSER=$PW_ROLE PGDATABASE=postgres PGPASSFILE="$tmp/pgpass"
	get
	rl_check "$name, the password in PGPASSFILE (as ~/.pgpass): 200" 200 "$status"
	stop_app

	reset_keys
	launch "$name-pw" "${as[@]}" PGPASSWORD=$PW_SECRET
	get
	rl_check "$name, the password in PGPASSWORD: 200" 200 "$status"
	rl_check "$name, ... logged in as $PW_ROLE" $PW_ROLE \
		"$(logins)"
	db_stop
	get
	rl_check "$name, the database stopped: 503" 503 "$status"
	rl_check "$name, ... and the app keeps running" yes "$(alive)"
	db_start
	reset_keys
	rl_check "$name, the database back: 200 again" 200 "$(recovers)"
	stop_app

	db_stop
	launch "$name-down" "${as[@]}" PGPASSWORD=$PW_SECRET
	rl_check "$name, started while the database is down: it answers" yes "$up"
	get
	rl_check "$name, ... 503" 503 "$status"
	db_start
	reset_keys
	rl_check "$name, ... then 200 once the database is up" 200 "$(recovers)"
	stop_app
}
