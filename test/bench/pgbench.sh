# Sourced by the scripts of test/bench that run pgbench (after scripts/lib.sh).

# pgb_checked NAME CLIENTS LOG PGOPTIONS PGBENCH-ARGUMENT...: one pgbench run
# (-n -M prepared, a thread per client, database postgres) whose output goes
# to LOG; prints "tps transactions", or dies when pgbench failed, reported
# a failed transaction or printed something it could not read.  With
# PGB_CPUS set (a taskset CPU list), pgbench runs on those CPUs only.
pgb_checked() {
	local name=$1 clients=$2 log=$3 options=$4 tps xacts
	local pin=()
	shift 4
	[ -z "${PGB_CPUS:-}" ] || pin=(taskset -c "$PGB_CPUS")
	PGOPTIONS=$options "${pin[@]}" "$RL_PG_BIN/pgbench" -n -M prepared -c "$clients" -j "$clients" "$@" postgres \
		>"$log" 2>&1 || { cat "$log" >&2; rl_die "pgbench $name ($clients clients) failed"; }
	tps=$(sed -n 's/^tps = \([0-9.]*\) (without initial connection time)$/\1/p' "$log")
	xacts=$(sed -n 's/^number of transactions actually processed: \([0-9]*\)$/\1/p' "$log")
	if [ -z "$tps" ] || [ -z "$xacts" ] || [ "$xacts" -eq 0 ]; then
		cat "$log" >&2; rl_die "could not read pgbench output for $name ($clients clients)"
	fi
	if grep -qiE 'error|abort' "$log" || ! grep -q '^number of failed transactions: 0 ' "$log"; then
		cat "$log" >&2; rl_die "pgbench $name ($clients clients) reported errors"
	fi
	echo "$tps $xacts"
}

# pgb_upsert_script KEYS RATE WINDOW: the upsert bucket's pgbench script on
# stdout, a random key 'k1' .. 'k<KEYS>' (KEYS a number, or :keys for -D
# keys=N) at RATE tokens a second over WINDOW seconds, cost 1.  The
# statement is bench.upsert_bucket's own (test/bench/baselines.sql, in the
# database postgres), sent as is: a SQL function that writes is not inlined.
pgb_upsert_script() {
	printf '\\set k random(1, %s)\n%s;\n' "$1" \
		"$(rl_psql -d postgres -At -c "SELECT bench.upsert_bucket_sql(\$\$'k' || :k\$\$, '$2', '$3', '1')")"
}

# pgb_bucket_setup DIR: in the database postgres of the running cluster,
# the baselines of test/bench/baselines.sql, the extension, and keys 'k1'
# .. 'k10000' made for rl_token_bucket and for the upsert bucket (rate
# 1000000/s, window 60 s: every later call is admitted and writes); then
# the three one-client pgbench scripts of walwriter.sh, wakeup.sh and
# profile.sh in DIR: select1.pgbench, table.pgbench (run.sh's
# sql/token_bucket.pgbench, a key of -D keys=N) and upsert.pgbench.
pgb_bucket_setup() {
	rl_psql -d postgres -At -f "$RL_ROOT/test/bench/baselines.sql" >/dev/null
	rl_psql -d postgres -At -c "CREATE EXTENSION ratelimit" \
		-c "SELECT count(rl_token_bucket('k' || i, 1000000, 60, 1)) FROM generate_series(1, 10000) i" \
		-c "SELECT count(bench.upsert_bucket('k' || i, 1000000, 60, 1)) FROM generate_series(1, 10000) i" >/dev/null
	echo 'SELECT 1;' >"$1/select1.pgbench"
	cp "$RL_ROOT/test/bench/sql/token_bucket.pgbench" "$1/table.pgbench"
	pgb_upsert_script :keys 1000000 60 >"$1/upsert.pgbench"
}

# server_on_cpus LIST: the cluster's processes (the postmaster and its
# children; backends forked later inherit it) run on the CPUs of LIST only.
# server_cpus: the postmaster's CPU list now.
server_on_cpus() {
	local postmaster pid
	postmaster=$(head -1 "$RL_PGDATA/postmaster.pid")
	for pid in "$postmaster" $(pgrep -P "$postmaster"); do
		rl_as_root taskset -a -p -c "$1" "$pid" >/dev/null
	done
}
server_cpus() {
	taskset -p -c "$(head -1 "$RL_PGDATA/postmaster.pid")" | sed 's/.*: //'
}

# The guest's halt polling, on a KVM guest whose cpuidle driver is
# haltpoll: guest_halt_poll_ns, how long an idle CPU polls before it halts
# (0: it halts at once; the kernel's default, 200000, is what
# HALTPOLL_DEFAULT sets).  haltpoll_take WHO: dies unless this run may set
# it, and keeps the machine's value; haltpoll_on: the kernel's default;
# haltpoll_restore: the machine's value again (nothing before a take).
HALTPOLL_FILE=/sys/module/haltpoll/parameters/guest_halt_poll_ns
HALTPOLL_DEFAULT=200000
HALTPOLL_SAVED=""
haltpoll_take() {
	[ -w "$HALTPOLL_FILE" ] \
		|| rl_die "$1: $HALTPOLL_FILE is not there or not writable (not a KVM guest with cpuidle-haltpoll, or not root)"
	HALTPOLL_SAVED=$(cat "$HALTPOLL_FILE")
}
haltpoll_on() { echo "$HALTPOLL_DEFAULT" >"$HALTPOLL_FILE"; }
haltpoll_restore() { [ -z "$HALTPOLL_SAVED" ] || echo "$HALTPOLL_SAVED" >"$HALTPOLL_FILE"; }
