#!/usr/bin/env bash
# Builds the Debian packages postgresql-NN-ratelimit (debian/) from this
# tree, for each PostgreSQL major that debian/pgversions and this Debian
# release support, or for the one given with --pg.  The build runs in a
# copy of the tree (nothing it writes lands here); the .deb files are put in
# the current directory, or in DIR with --out.
#
#   bash scripts/deb.sh                 every major this system supports
#   bash scripts/deb.sh --pg 17         PostgreSQL 17 only
#   bash scripts/deb.sh --out /tmp/debs
#
# Needs the packages of debian/control's Build-Depends (it says which are
# missing).  The build runs the regression tests against the files it is
# about to package (DEB_BUILD_OPTIONS=nocheck DEB_BUILD_PROFILES=nocheck
# skip them, and the need for postgresql-all).
set -euo pipefail

# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
root=$RL_ROOT
out=$PWD major=""
while [ $# -gt 0 ]; do
	case $1 in
		--pg) [ $# -ge 2 ] || { echo "error: --pg needs a major version" >&2; exit 2; }
			major=$2; shift 2 ;;
		--out) [ $# -ge 2 ] || { echo "error: --out needs a directory" >&2; exit 2; }
			out=$(cd "$2" && pwd); shift 2 ;;
		*) echo "usage: bash scripts/deb.sh [--pg MAJOR] [--out DIR]" >&2; exit 2 ;;
	esac
done
for tool in dpkg-buildpackage pg_buildext; do
	command -v "$tool" >/dev/null || {
		echo "error: $tool is missing: sudo apt-get install dpkg-dev debhelper postgresql-server-dev-all" >&2
		exit 1
	}
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The build-time tests run a cluster as another user (postgres, when we are
# root), which reads the staged files under the copy.
chmod 755 "$work"
version=$(sed -n '1s/^[^(]*(\([^)]*\)).*/\1/p' "$root/debian/changelog")
src=$work/postgresql-ratelimit-${version%-*}
mkdir "$src"
# What the build needs: the tree without what runs or was built in it.
rl_copy_tree "$src"

cd "$src"
# debian/control for the majors of this system (or --pg's): what
# pg_buildext updatecontrol writes here.
[ -z "$major" ] || export PG_SUPPORTED_VERSIONS=$major
pg_buildext updatecontrol
if [ -z "$(sed -n 's/^Package: //p' debian/control)" ]; then
	echo "error: no PostgreSQL major both in debian/pgversions and supported here${major:+ (--pg $major)}" >&2
	exit 1
fi
if ! unmet=$(dpkg-checkbuilddeps 2>&1); then
	missing=$(sed -n 's/.*Unmet build dependencies: //p' <<<"$unmet" | sed 's/ ([^)]*)//g')
	if [ -n "$missing" ]; then
		echo "error: the build needs: sudo apt-get install $missing" >&2
	else
		echo "$unmet" >&2
	fi
	exit 1
fi
dpkg-buildpackage -us -uc -b >"$work/build.log" 2>&1 || {
	tail -60 "$work/build.log" >&2
	echo "error: dpkg-buildpackage failed (the log's end above)" >&2
	exit 1
}
grep -E '^(### |test |ok |not ok |skipped| All | [0-9]+ of )' "$work/build.log" || true
for deb in "$work"/*.deb; do
	cp "$deb" "$out/" && echo "$out/$(basename "$deb")"
done
