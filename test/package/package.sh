#!/usr/bin/env bash
# The Debian package of the major under test (RL_PG_VERSION), as a user
# gets it: built by scripts/deb.sh from a copy of the tree (its build runs
# the regression tests against the staged files), installed with apt-get
# install ./postgresql-NN-ratelimit_….deb, then used where the build tree
# plays no part: throwaway clusters of pg_virtualenv (outside the tree)
# load the package's files (dpkg says they are its own, unchanged), CREATE
# EXTENSION works on a server as installed (no preload), the shmem store
# once ratelimit is preloaded, and autopkgtest's debian/tests/installcheck
# passes from a copy of only the tests (no source, nothing built there).
# At the end the package is purged and the files that make install had put
# in its place are back (scripts/test.sh tests the tree built before).
#
# Installs into the system's PostgreSQL: with RL_PG_BIN pointing elsewhere
# (a private copy), only the build and the package's contents are checked.
# Prints TAP lines and "N passed, N failed"; exits non-zero on a failure.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
# shellcheck source=../../scripts/lib.sh disable=SC1091
source scripts/lib.sh

major=$RL_PG_VERSION
pkg=postgresql-$major-ratelimit
extversion=$(sed -n "s/^default_version = '\(.*\)'/\1/p" ratelimit.control)
system_bin=/usr/lib/postgresql/$major/bin
pkglibdir=/usr/lib/postgresql/$major/lib
extdir=/usr/share/postgresql/$major/extension
work=$(mktemp -d)
chmod 755 "$work"	# pg_virtualenv's clusters run as postgres

# Build.
bash scripts/deb.sh --pg "$major" --out "$work" >"$work/build.log" 2>&1
status=$?
deb=$(find "$work" -maxdepth 1 -name "${pkg}_*.deb" | head -1)
rl_check "scripts/deb.sh --pg $major builds $pkg" "0 yes" "$status $([ -f "$deb" ] && echo yes || echo no)"
if [ -z "$deb" ]; then
	tail -40 "$work/build.log"
	echo "$passed passed, $failed failed"; rm -rf "$work"; exit 1
fi
built_tests=$(grep -cE '^test .* \.\.\. ok|^ok [0-9]+ ' "$work/build.log")
build_failures=$(grep -cE '^test .* \.\.\. FAILED|^not ok [0-9]+ ' "$work/build.log")
echo "# the build's own installcheck: $built_tests passed, $build_failures failed"
grep '^skipped' "$work/build.log" | sed 's/^/# build: /'

contents=$(dpkg-deb -c "$deb" | awk '{print $6}')
has() { grep -qx "\./${1#/}" <<<"$contents" && echo yes || echo no; }
rl_check "the package holds ratelimit.so, the control file and the install script" "yes yes yes" \
	"$(has "$pkglibdir/ratelimit.so") $(has "$extdir/ratelimit.control") $(has "$extdir/ratelimit--$extversion.sql")"
rl_check "the package holds no header and nothing of the build tree" "" \
	"$(grep -E '\.(h|o|cpp|c)$|/src/[a-z_]+\.(c|cpp)' <<<"$contents" | grep -v '\.bc$' | head -3)"
depends=$(dpkg-deb -f "$deb" Depends)
rl_check "it depends on postgresql-$major and libstdc++" "yes yes" \
	"$(grep -q "postgresql-$major\b" <<<"$depends" && echo yes || echo no) $(grep -q 'libstdc++6' <<<"$depends" && echo yes || echo no)"

if [ "$RL_PG_BIN" != "$system_bin" ]; then
	echo "# SKIP install: RL_PG_BIN=$RL_PG_BIN is not the system's PostgreSQL $major: the package goes into the system's"
	echo "$passed passed, $failed failed"; rm -rf "$work"; [ "$failed" -eq 0 ]; exit
fi

# What make install put where the package goes, kept to be put back.
# Kept before a package left installed (by a run that was killed) is
# purged: make install wrote over the package's files, and the purge
# deletes every file the package owned, make install's among them.
(cd / && find "${pkglibdir#/}/ratelimit.so" "${pkglibdir#/}/bitcode/ratelimit.index.bc" \
	"${pkglibdir#/}/bitcode/ratelimit" "${extdir#/}"/ratelimit.control "${extdir#/}"/ratelimit--*.sql \
	-maxdepth 0 2>/dev/null | tar -cf "$work/make-installed.tar" -T -)
installed() { dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; }
# restore: no package, and make install's files where they were.
restore() {
	if installed; then
		rl_as_root apt-get purge -y -q "$pkg" >/dev/null 2>&1
	fi
	[ -s "$work/make-installed.tar" ] && rl_as_root tar -C / -xf "$work/make-installed.tar"
}
if installed; then
	echo "# $pkg was installed before this suite: purged first, make install's files put back"
	restore
fi
trap 'restore; rm -rf "$work"' EXIT

# Install, the way the README says.
(cd "$work" && rl_as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "./$(basename "$deb")") \
	>"$work/install.log" 2>&1
status=$?
[ "$status" -eq 0 ] || tail -20 "$work/install.log"
rl_check "apt-get install ./$(basename "$deb")" 0 "$status"
owner() { dpkg -S "$1" 2>/dev/null | cut -d: -f1; }
rl_check "the server's ratelimit.so and control file are the package's" "$pkg $pkg" \
	"$(owner "$pkglibdir/ratelimit.so") $(owner "$extdir/ratelimit.control")"
rl_check "dpkg --verify: the installed files are the package's, unchanged" "" "$(dpkg --verify "$pkg" 2>&1)"

# Throwaway clusters of the system's server, outside the tree.
venv() { (cd "$work" && pg_virtualenv -t -v "$major" "$@"); }
sql() { psql -X -A -t -q -v ON_ERROR_STOP=1 "$@"; }
export -f sql
plain=$(venv bash -c "sql -c 'SHOW shared_preload_libraries' -c 'CREATE EXTENSION ratelimit' \
	-c \"SELECT extversion FROM pg_extension WHERE extname = 'ratelimit'\" \
	-c \"SELECT string_agg(rl_token_bucket('pkg', 1, 3)::text, ' ') FROM generate_series(1, 4)\"" 2>&1 \
	| grep -v -e '^Creating' -e '^Dropping' | tr '\n' '|')
rl_check "a server as installed (no preload): CREATE EXTENSION ratelimit, a bucket decides" \
	"|$extversion|2 1 0 -1|" "$plain"
preloaded=$(venv -o shared_preload_libraries=ratelimit bash -c "sql -c 'SHOW shared_preload_libraries' \
	-c 'CREATE EXTENSION ratelimit' \
	-c \"SELECT rl_zone_set('pkg', 'token_bucket', 2, '1 minute', store => 'shmem')\" \
	-c \"SELECT string_agg((rl_limit('pkg', 'k')).allowed::text, ' ') FROM generate_series(1, 3)\"" 2>&1 \
	| grep -v -e '^Creating' -e '^Dropping' | tr '\n' '|')
rl_check "ratelimit preloaded: a shmem zone decides" "ratelimit||true true false|" "$preloaded"

# autopkgtest's test, from a copy of what it needs: the tests, the
# Makefile that runs them and debian/ (no src/: nothing can be built).
tests=$work/tests
mkdir "$tests"
tar -C "$RL_ROOT" -c --exclude="sql/ratelimit--$extversion.sql" Makefile sql expected debian \
	| tar -C "$tests" -x
chmod -R a+rX "$tests"
(cd "$tests" && debian/tests/installcheck) >"$work/autopkgtest.log" 2>&1
status=$?
sed -nE 's/^test ([a-z_]+) +\.\.\. ok.*/ok - installcheck of the installed package: \1/p;
	s/^test ([a-z_]+) +\.\.\. FAILED.*/not ok - installcheck of the installed package: \1/p;
	s/^ok [0-9]+ +- ([a-z_]+) .*/ok - installcheck of the installed package: \1/p;
	s/^not ok [0-9]+ +- ([a-z_]+) .*/not ok - installcheck of the installed package: \1/p;
	s/^(skipped.*)/# \1/p' "$work/autopkgtest.log"
[ "$status" -eq 0 ] || { grep -A40 'regression.diffs' "$work/autopkgtest.log" | head -80; }
rl_check "debian/tests/installcheck (autopkgtest) exits 0" 0 "$status"
passed=$((passed + $(grep -cE '^test .* \.\.\. ok|^ok [0-9]+ ' "$work/autopkgtest.log")))
failed=$((failed + $(grep -cE '^test .* \.\.\. FAILED|^not ok [0-9]+ ' "$work/autopkgtest.log")))
rl_check "nothing was built in the tests' copy" "" "$(find "$tests" -name '*.so' -o -name '*.o' | head -3)"

restore
rl_check "purged: $pkg is no longer installed" no \
	"$(installed && echo yes || echo no)"
if [ -s "$work/make-installed.tar" ]; then
	rl_check "the make-installed ratelimit.so is back" yes \
		"$(tar -C "$work" -xf "$work/make-installed.tar" "${pkglibdir#/}/ratelimit.so" \
			&& cmp -s "$work/${pkglibdir#/}/ratelimit.so" "$pkglibdir/ratelimit.so" && echo yes || echo no)"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
