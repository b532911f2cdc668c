#!/usr/bin/env bash
# The release archive (make dist): what PGXN and a user who downloads it
# get.  Checks that META.json is valid PGXN metadata that agrees with the
# control file and the Makefile, that the archive holds sources only, and
# that it builds and installs by itself with PGXS (into a staging
# directory: DESTDIR), installing the extension's files and no headers.
#
#   bash test/dist/dist.sh          (from a git checkout; archives HEAD)
#
# Prints TAP lines and "N passed, N failed"; exits non-zero on a failure.
set -uo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=../../scripts/lib.sh disable=SC1091
source scripts/lib.sh

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

version=$(sed -n 's/^EXTVERSION = //p' Makefile)
# With no PostgreSQL at all: a pg_config that does not exist.
make -s dist PG_CONFIG=/nonexistent/pg_config >"$work/dist.log" 2>&1 || cat "$work/dist.log" >&2
zip=ratelimit-$version.zip
rl_check "make dist writes $zip" yes "$([ -f "$zip" ] && echo yes || echo no)"
mv -f "$zip" "$work/" 2>/dev/null
(cd "$work" && unzip -q "$zip") || rl_die "cannot unzip $zip"
src=$work/ratelimit-$version

# META.json against the PGXN meta spec 1.0.0's required keys, and against the tree.
meta_check=$(python3 - "$src" "$version" <<'PY'
import json, re, sys, os
src, version = sys.argv[1], sys.argv[2]
meta = json.load(open(os.path.join(src, "META.json")))
problems = []
for key in ("name", "abstract", "version", "maintainer", "license", "provides", "meta-spec"):
    if key not in meta:
        problems.append("missing " + key)
semver = r"^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$"
if not re.match(semver, meta.get("version", "")):
    problems.append("version is not semver")
if meta.get("version") != version:
    problems.append("version %s, Makefile says %s" % (meta.get("version"), version))
if meta.get("release_status") not in ("stable", "testing", "unstable"):
    problems.append("release_status %r is not stable, testing or unstable" % meta.get("release_status"))
if meta.get("license") != "postgresql":
    problems.append("license %r is not postgresql" % meta.get("license"))
lic = os.path.join(src, "LICENSE")
if not os.path.isfile(lic) or not open(lic).readline().startswith("PostgreSQL License"):
    problems.append("the archive has no LICENSE with the PostgreSQL License")
if meta.get("meta-spec", {}).get("version") != "1.0.0":
    problems.append("meta-spec version is not 1.0.0")
for name, p in meta.get("provides", {}).items():
    if not os.path.isfile(os.path.join(src, p.get("file", ""))):
        problems.append("provides.%s.file %s is not in the archive" % (name, p.get("file")))
    if p.get("version") != version:
        problems.append("provides.%s.version differs" % name)
control = open(os.path.join(src, "ratelimit.control")).read()
if "default_version = '%s'" % version not in control:
    problems.append("ratelimit.control's default_version is not " + version)
print("; ".join(problems) or "ok")
PY
)
rl_check "META.json is valid PGXN metadata and agrees with the tree" ok "$meta_check"

built=$(cd "$src" && find . \( -name '*.o' -o -name '*.so' -o -name '*.bc' \
	-o \( -name 'ratelimit--*.sql' ! -name 'ratelimit--*--*.sql' \) \) | head -5 | tr '\n' ' ')
rl_check "the archive holds no build output and no generated install script" "" "$built"
cluster=$(cd "$src" && find . -path ./.cluster -prune -print -o -name 'node_modules' -print | head -1)
rl_check "the archive holds no cluster and no node_modules" "" "$cluster"

stage=$work/stage
if (cd "$src" && make -s -j2 PG_CONFIG="$RL_PG_BIN/pg_config" >"$work/build.log" 2>&1 \
	&& make -s install PG_CONFIG="$RL_PG_BIN/pg_config" DESTDIR="$stage" >>"$work/build.log" 2>&1); then
	build=ok
else
	build=failed; cat "$work/build.log" >&2
fi
rl_check "the archive builds and installs with PGXS" ok "$build"
sharedir=$stage$("$RL_PG_BIN/pg_config" --sharedir)/extension
libdir=$stage$("$RL_PG_BIN/pg_config" --pkglibdir)
# Besides these two, only upgrade scripts (ratelimit--FROM--TO.sql).
installed=$( (cd "$sharedir" 2>/dev/null && ls ratelimit* | grep -v -- '--.*--') | tr '\n' ' ')
rl_check "it installs the control file and one install script" "ratelimit--$version.sql ratelimit.control " "$installed"
rl_check "it installs the library" yes "$([ -f "$libdir/ratelimit.so" ] && echo yes || echo no)"
headers=$(find "$stage" -name '*.h' | head -3 | tr '\n' ' ')
rl_check "it installs no header" "" "$headers"
first_line=$(head -1 "$sharedir/ratelimit--$version.sql" 2>/dev/null)
rl_check "the install script refuses to run in psql" \
	'\echo Use "CREATE EXTENSION ratelimit" to load this file. \quit' "$first_line"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
