# Shared by scripts/demo.sh, scripts/test.sh and test/bench/run.sh.
# Installs what is missing, builds, and runs throwaway PostgreSQL clusters
# inside the repository (.cluster/, git-ignored) on free loopback ports.

RL_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# The major under test: the host's (Debian 12's) 15, or the major of the
# chroot scripts/test.sh --pg N runs in.
RL_PG_VERSION=${RL_PG_VERSION:-15}
RL_PG_BIN=${RL_PG_BIN:-/usr/lib/postgresql/$RL_PG_VERSION/bin}

rl_log() { printf '==> %s\n' "$*" >&2; }
rl_die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# Runs a command as root: directly when we are root, else through sudo.
rl_as_root() {
	if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# rl_require_positive_ints VAR...: each variable holds a positive integer,
# or a space-separated list of them; dies naming the first that does not.
rl_require_positive_ints() {
	local v word
	for v in "$@"; do
		[ -n "${!v// /}" ] || rl_die "$v is empty"
		for word in ${!v}; do
			[[ $word =~ ^[1-9][0-9]*$ ]] || rl_die "$v must be a positive integer or a list of them (got '${!v}')"
		done
	done
}

# rl_command_with_env COMMAND VAR...: COMMAND after the VARs the environment
# sets (VAR='value' ...): how a benchmark report names the run.
rl_command_with_env() {
	local command=$1 v
	shift
	for v in "$@"; do
		if printenv "$v" >/dev/null; then command="$v='${!v}' $command"; fi
	done
	echo "$command"
}

# What building and running the extension needs (the demo's packages):
# Debian 12 builds PostgreSQL 15's JIT bitcode with clang 14 and llvm 14;
# the newer releases' server-dev packages bring their own clang.
if [ "$RL_PG_VERSION" = 15 ]; then
	RL_BUILD_PACKAGES=(make gcc g++ clang-14 llvm-14)
else
	RL_BUILD_PACKAGES=(make gcc g++ clang llvm)
fi
RL_BUILD_PACKAGES+=(postgresql-$RL_PG_VERSION postgresql-server-dev-$RL_PG_VERSION)
# ... and what the test suites need besides, on Debian 12 only (the other
# majors' chroots run neither): clang 14's libFuzzer runtime for the fuzz
# test; git and unzip for the release archive's test; psycopg and curl for
# the examples' test (Node.js and npm come with the machine, not Debian).
RL_TEST_TOOLS=()
[ "$RL_PG_VERSION" != 15 ] || RL_TEST_TOOLS=(libclang-rt-14-dev git unzip python3-psycopg curl)
# The Debian package's build (debian/control's Build-Depends; scripts/deb.sh,
# test/package/package.sh): on every major.
RL_DEB_PACKAGES=(debhelper dpkg-dev postgresql-server-dev-all postgresql-all)
RL_PACKAGES=(
	"${RL_BUILD_PACKAGES[@]}" "${RL_TEST_TOOLS[@]}" "${RL_DEB_PACKAGES[@]}"
	postgresql-$RL_PG_VERSION-cron postgresql-$RL_PG_VERSION-pgtap
	libtap-parser-sourcehandler-pgtap-perl
	libgtest-dev
	sqlsmith procps
)

# Installs the Debian packages in "$@" (default: RL_PACKAGES) that are missing.
rl_install_packages() {
	local wanted=("$@") missing=() p
	[ ${#wanted[@]} -gt 0 ] || wanted=("${RL_PACKAGES[@]}")
	for p in "${wanted[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	rl_log "installing: ${missing[*]}"
	rl_as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null
	rl_as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
		-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
		"${missing[@]}" >/dev/null
}

# Dies when the build or the install fails: a test run must never go on
# with the library an earlier build left installed.  Always from clean, so
# that RL_ASSERTS=1 (the test suite's build: the extension's Assert()s
# checked, on a server built without them) never leaks into a benchmark's
# build, nor the other way round.
rl_build_install() {
	local mode=""
	[ "${RL_ASSERTS:-0}" = 1 ] && mode=" with assertions"
	rl_log "building and installing the extension$mode"
	make -C "$RL_ROOT" -s clean PG_CONFIG="$RL_PG_BIN/pg_config" >/dev/null
	make -C "$RL_ROOT" -s PG_CONFIG="$RL_PG_BIN/pg_config" >/dev/null \
		|| rl_die "the extension did not build"
	rl_as_root make -C "$RL_ROOT" -s install PG_CONFIG="$RL_PG_BIN/pg_config" >/dev/null \
		|| rl_die "the extension did not install"
	cmp -s "$RL_ROOT/ratelimit.so" "$("$RL_PG_BIN/pg_config" --pkglibdir)/ratelimit.so" \
		|| rl_die "the installed ratelimit.so is not the one just built"
}

# rl_copy_tree DEST: this tree as a build starts from it, copied into the
# existing directory DEST: without .git, clusters, private servers, results,
# installed npm packages, build output and packages (a chroot has no git:
# no git archive).
rl_copy_tree() {
	tar -C "$RL_ROOT" -c \
		--exclude=./.git --exclude=./.cluster --exclude='./.pg*' --exclude=node_modules \
		--exclude=./results --exclude=./log --exclude=./output_iso --exclude=./test/bench/out \
		--exclude='*.o' --exclude='*.bc' --exclude='*.so' --exclude='*.deb' \
		--exclude='./*.buildinfo' --exclude='./*.changes' --exclude='./ratelimit-*.zip' . \
		| tar -C "$1" -x
}

# rl_private_pg DIR: a private copy of the system's PostgreSQL
# $RL_PG_VERSION (binaries, libraries, share and server headers) under DIR,
# which PostgreSQL finds relative to its binaries; prints its bin
# directory.  With RL_PG_BIN pointing there, a build installs into the copy
# and clusters load it: a test run then leaves the system's PostgreSQL alone
# and can run beside other work on the machine (test/repeat.sh does so).
rl_private_pg() {
	local dir=$1 part
	rm -rf "$dir"
	for part in lib share include; do
		local from=/usr/$part/postgresql/$RL_PG_VERSION
		[ "$part" = lib ] || [ -d "$from" ] || continue
		mkdir -p "$dir/usr/$part/postgresql"
		cp -a "$from" "$dir/usr/$part/postgresql/" || rl_die "could not copy $from"
	done
	chmod -R o+rX "$dir"
	echo "$dir/usr/lib/postgresql/$RL_PG_VERSION/bin"
}

# The OS user that runs clusters: PostgreSQL refuses to run as root.
rl_cluster_user() {
	if [ "$(id -u)" -eq 0 ]; then echo postgres; else id -un; fi
}

rl_as_cluster_user() {
	local user; user=$(rl_cluster_user)
	if [ "$(id -un)" = "$user" ]; then "$@"; else runuser -u "$user" -- "$@"; fi
}

# A loopback port nothing uses, below the kernel's ephemeral range: a port
# that a client connection holds as its own end accepts no connection (the
# probe below finds it free) but refuses the server's bind.
rl_free_port() {
	local port low=32768 first=20000
	read -r low _ 2>/dev/null </proc/sys/net/ipv4/ip_local_port_range || low=32768
	[ "$low" -gt $(( first + 1000 )) ] 2>/dev/null || low=50000
	for _ in $(seq 1 200); do
		port=$(( first + RANDOM % (low - first) ))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
			echo "$port"; return 0
		fi
	done
	rl_die "no free port found"
}

# The cluster user must be able to reach the data directory inside the repo.
rl_allow_traverse() {
	local dir=$1
	while [ "$dir" != "/" ]; do
		if ! rl_as_cluster_user test -x "$dir"; then
			rl_log "granting search permission on $dir to $(rl_cluster_user)"
			rl_as_root chmod o+x "$dir"
		fi
		dir=$(dirname "$dir")
	done
}

# rl_cluster_start NAME [extra postgresql.conf lines...]
# RL_PRELOAD: its shared_preload_libraries (default 'pg_cron, ratelimit';
# RL_PRELOAD='' preloads nothing: a server as installed).
# Sets PGHOST, PGPORT, PGUSER, RL_PGDATA, RL_CLUSTER_DIR.
# rl_cluster_use NAME: point RL_CLUSTER_DIR and RL_PGDATA at cluster NAME.
rl_cluster_use() {
	export RL_CLUSTER_DIR=$RL_ROOT/.cluster/$1
	export RL_PGDATA=$RL_CLUSTER_DIR/data
}

rl_cluster_start() {
	local name=$1; shift
	rl_cluster_use "$name"
	rl_as_root rm -rf "$RL_CLUSTER_DIR"
	mkdir -p "$RL_CLUSTER_DIR"
	rl_as_root chown "$(rl_cluster_user)" "$RL_CLUSTER_DIR"
	rl_allow_traverse "$RL_CLUSTER_DIR"
	rl_as_cluster_user "$RL_PG_BIN/initdb" -D "$RL_PGDATA" -U postgres -A trust \
		--no-sync -E UTF8 --locale=C.UTF-8 >"$RL_CLUSTER_DIR/initdb.log" 2>&1 \
		|| { cat "$RL_CLUSTER_DIR/initdb.log" >&2; rl_die "initdb failed"; }
	export PGHOST=127.0.0.1 PGUSER=postgres
	{
		echo "listen_addresses = '127.0.0.1'"
		echo "unix_socket_directories = ''"
		echo "shared_preload_libraries = '${RL_PRELOAD-pg_cron, ratelimit}'"
		[[ ${RL_PRELOAD-pg_cron} != *pg_cron* ]] || echo "cron.database_name = 'postgres'"
		echo "max_prepared_transactions = 10"
		echo "logging_collector = off"
		local line
		for line in "$@"; do echo "$line"; done
	} | rl_as_cluster_user tee -a "$RL_PGDATA/postgresql.conf" >/dev/null
	# A free port can be taken by another cluster before this one binds it:
	# then try another.
	local attempt
	export PGPORT
	for attempt in 1 2 3 4 5; do
		PGPORT=$(rl_free_port)
		if rl_cluster_ctl start -w -t 60 -o "-p $PGPORT" -l "$RL_CLUSTER_DIR/server.log" >/dev/null; then
			echo "port = $PGPORT" | rl_as_cluster_user tee -a "$RL_PGDATA/postgresql.conf" >/dev/null
			break
		fi
		grep -q 'Address already in use' "$RL_CLUSTER_DIR/server.log" && [ "$attempt" -lt 5 ] \
			|| { cat "$RL_CLUSTER_DIR/server.log" >&2; rl_die "server did not start"; }
		rl_log "port $PGPORT was taken; trying another"
	done
	rl_log "cluster '$name' running on 127.0.0.1:$PGPORT (data in $RL_PGDATA)"
}

rl_cluster_ctl() {
	rl_as_cluster_user "$RL_PG_BIN/pg_ctl" -D "$RL_PGDATA" "$@"
}

rl_cluster_stop() {
	[ -n "${RL_PGDATA:-}" ] && [ -f "$RL_PGDATA/postmaster.pid" ] || return 0
	rl_cluster_ctl stop -m fast -w >/dev/null 2>&1 || rl_cluster_ctl stop -m immediate -w >/dev/null 2>&1 || true
}

# rl_clusters_stop NAME...: stops each cluster NAME (scripts that run
# several, on exit).
rl_clusters_stop() {
	local name
	for name in "$@"; do
		rl_cluster_use "$name"
		rl_cluster_stop
	done
}

# rl_wait_answering [DB]: prints yes once the cluster answers in DB
# (default postgres) within 60 s (e.g. after a crash restart), else no.
rl_wait_answering() {
	for _ in $(seq 1 120); do
		[ "$(rl_psql -d "${1:-postgres}" -tA -c 'SELECT 1' 2>/dev/null)" = 1 ] && { echo yes; return; }
		sleep 0.5
	done
	echo no
}

rl_psql() {
	"$RL_PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 "$@"
}

# TAP checks for the scripts under test/: rl_check NAME EXPECTED ACTUAL
# prints "ok - NAME" or "not ok - ..." and counts into passed / failed.
passed=0 failed=0
rl_check() {
	if [ "$2" = "$3" ]; then
		echo "ok - $1"; passed=$((passed + 1))
	else
		echo "not ok - $1 (expected '$2', got '$3')"; failed=$((failed + 1))
	fi
}

# Numbered TAP for the scripts under test/ that end with "1..$n":
# rl_check_numbered NAME EXPECTED ACTUAL prints "ok N - NAME" or "not ok
# N - NAME" with both values, and counts into n and failed (set them to 0
# first).
rl_check_numbered() {
	n=$((n + 1))
	if [ "$2" = "$3" ]; then
		echo "ok $n - $1"
	else
		echo "not ok $n - $1"
		printf '#   expected: %s\n#        got: %s\n' "$2" "$(head -c 2000 <<<"$3" | sed '2,$s/^/#             /')"
		failed=$((failed + 1))
	fi
}

# For the scripts under test/: SQL that creates public.err_of(statement),
# which runs the statement and returns its SQLSTATE and hint, or "ok" when
# it raises nothing.
RL_ERR_OF_SQL="CREATE FUNCTION public.err_of(statement text) RETURNS text LANGUAGE plpgsql AS \$\$
DECLARE
    state text;
    hint text;
BEGIN
    EXECUTE statement;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, hint = PG_EXCEPTION_HINT;
    RETURN state || coalesce(' ' || nullif(hint, ''), '');
END \$\$"

# rl_kill_busy_backend DB PATTERN: SIGKILLs the active backend of DB whose
# query contains PATTERN, once it is known to be calling (READY_SQL, run in
# DB with PID replaced by the backend's pid, returns t; by default its
# transaction has an xid: it wrote state); prints its pid, or nothing when
# none was ready within 10 s.
# rl_kill_busy_backend DB PATTERN [READY_SQL]
rl_kill_busy_backend() {
	local db=$1 pattern=$2 pid="" ready=no
	local ready_sql=${3:-"SELECT backend_xid IS NOT NULL FROM pg_stat_activity WHERE pid = PID"}
	for _ in $(seq 1 100); do
		pid=$(rl_psql -d postgres -tA -c "SELECT pid FROM pg_stat_activity WHERE datname = '$db' AND query LIKE '%$pattern%' AND state = 'active' AND pid <> pg_backend_pid()" 2>/dev/null | head -1)
		if [ -n "$pid" ] && [ "$(rl_psql -d "$db" -tA -c "${ready_sql//PID/$pid}" 2>/dev/null)" = t ]; then
			ready=yes; break
		fi
		sleep 0.1
	done
	if [ "$ready" = yes ]; then
		rl_as_cluster_user kill -9 "$pid"
		echo "$pid"
	fi
}

# rl_npm_error LOG: what went wrong, from npm's log of npm ci: its error
# code and first message ("SELF_SIGNED_CERT_IN_CHAIN: request to ... failed").
rl_npm_error() {
	local code message
	code=$(sed -nE 's/^npm (error|ERR!) code //p' "$1" | head -1)
	message=$(grep -E '^npm (error|ERR!) ' "$1" | sed -E 's/^npm (error|ERR!) +//' \
		| grep -vE '^(code|errno) |^A complete log|^/.*\.log$|^$' | head -1)
	echo "${code:+$code: }${message:-npm ci failed (exit status non-zero, no message)}"
}
