#!/usr/bin/env bash
# The upgrade test: ALTER EXTENSION ratelimit UPDATE from the newest released
# version to this tree's must give exactly what a fresh install gives.
#
#   bash test/upgrade/upgrade.sh
#
# A release is a git tag v<version> (v0.5.0, v1.2.3).  The newest release
# older than the Makefile's EXTVERSION is the starting point: its install
# script is that tag's sql/ratelimit.sql (git show v<version>:sql/...).  The
# update scripts (sql/ratelimit--<from>--<to>.sql) and the install script of
# EXTVERSION are this tree's, installed with the library beforehand (make
# install, as scripts/test.sh does); this test checks that they are.
#
# In a cluster of its own (.cluster/upgrade, scripts/lib.sh), it installs
# the release's script into the server's extension directory (removed at
# the end), then in database rl_upgraded: CREATE EXTENSION ratelimit
# VERSION '<release>' and ALTER EXTENSION ratelimit UPDATE; in database
# rl_fresh: CREATE EXTENSION ratelimit; in rl_upgraded_zone: a zone made on
# the release decides after the update.  test/upgrade/compare_schema.sh
# compares the two (catalogs and pg_dump --binary-upgrade; a difference is
# printed as TAP comments).  Prints "ok - ..." / "not ok - ..." lines and
# "upgrade: N passed, N failed"; exits non-zero when a check failed.
#
# With no release older than EXTVERSION, it prints one line
#   # SKIP upgrade: no released version before <EXTVERSION> (no git tag v*)
# checks nothing and exits 0.
set -uo pipefail
source "$(dirname "$0")/../../scripts/lib.sh"
cd "$RL_ROOT" || exit 2

EXTENSION=ratelimit
NEW=$(sed -n 's/^EXTVERSION *= *//p' Makefile | head -1)
[ -n "$NEW" ] || rl_die "no EXTVERSION in the Makefile"

# The released versions: tags v<digits>(.<digits>)*, newest first; the
# first one older than NEW is the starting point.
if ! tags=$(git -C "$RL_ROOT" tag --list 'v*' 2>&1); then
	echo "not ok - upgrade: git cannot list the tags ($tags)"
	echo "upgrade: 0 passed, 1 failed"
	exit 1
fi
OLD=$({ echo "$tags" | sed -n 's/^v\([0-9][0-9]*\(\.[0-9][0-9]*\)*\)$/\1/p'; echo "$NEW"; } \
	| sort -V -u | awk -v new="$NEW" '$0 == new { print prev; exit } { prev = $0 }')
if [ -z "$OLD" ]; then
	echo "# SKIP upgrade: no released version before $NEW (no git tag v*)"
	exit 0
fi
echo "# upgrade: from $OLD (tag v$OLD) to $NEW"

SHAREDIR=$("$RL_PG_BIN/pg_config" --sharedir)/extension
OLD_SCRIPT=$SHAREDIR/$EXTENSION--$OLD.sql
work=$(mktemp -d)
installed_old=no
cleanup() {
	rl_cluster_stop
	[ "$installed_old" = no ] || rl_as_root rm -f "$OLD_SCRIPT"
	rm -rf "$work"
}
trap cleanup EXIT

# The release's install script, from its tag.
if git -C "$RL_ROOT" show "v$OLD:sql/$EXTENSION.sql" >"$work/old.sql" 2>"$work/git.err"; then
	rl_check "the install script of $OLD comes from tag v$OLD" yes yes
else
	rl_check "the install script of $OLD comes from tag v$OLD" "sql/$EXTENSION.sql" "$(head -1 "$work/git.err")"
	echo "upgrade: $passed passed, $failed failed"
	exit 1
fi

# What is installed is this tree's: the install script of NEW and every
# update script (make install copies them; a stale copy would test
# something else).
stale=""
cmp -s "sql/$EXTENSION.sql" "$SHAREDIR/$EXTENSION--$NEW.sql" || stale="$stale $EXTENSION--$NEW.sql"
for f in sql/"$EXTENSION"--*--*.sql; do
	[ -e "$f" ] || continue
	cmp -s "$f" "$SHAREDIR/$(basename "$f")" || stale="$stale $(basename "$f")"
done
rl_check "the installed install and update scripts are this tree's (make install)" "" "${stale# }"

# Where a file of that name is installed already (the release installed by
# hand), it must be the tag's: it is then left in place.
if [ -e "$OLD_SCRIPT" ]; then
	rl_check "the installed $EXTENSION--$OLD.sql is the one of tag v$OLD" same \
		"$(cmp -s "$work/old.sql" "$OLD_SCRIPT" && echo same || echo different)"
else
	rl_as_root install -m 644 "$work/old.sql" "$OLD_SCRIPT" && installed_old=yes
fi

rl_cluster_start upgrade
q() { rl_psql -d "$1" -tA -c "SET client_min_messages = warning" -c "$2" 2>&1; }

rl_check "an update path leads from $OLD to $NEW" yes \
	"$(q postgres "SELECT CASE WHEN path IS NULL THEN 'no' ELSE 'yes' END FROM pg_available_extension_versions v
	               CROSS JOIN LATERAL pg_extension_update_paths('$EXTENSION') p
	               WHERE v.name = '$EXTENSION' AND v.version = '$OLD' AND p.source = '$OLD' AND p.target = '$NEW'")"

for db in rl_upgraded rl_fresh rl_upgraded_zone; do q postgres "CREATE DATABASE $db" >/dev/null; done
rl_check "CREATE EXTENSION $EXTENSION VERSION '$OLD'" "" "$(q rl_upgraded "CREATE EXTENSION $EXTENSION VERSION '$OLD'")"
rl_check "... installs $OLD" "$OLD" "$(q rl_upgraded "SELECT extversion FROM pg_extension WHERE extname = '$EXTENSION'")"
rl_check "ALTER EXTENSION $EXTENSION UPDATE" "" "$(q rl_upgraded "ALTER EXTENSION $EXTENSION UPDATE")"
rl_check "... updates to $NEW" "$NEW" "$(q rl_upgraded "SELECT extversion FROM pg_extension WHERE extname = '$EXTENSION'")"
rl_check "CREATE EXTENSION $EXTENSION (a fresh $NEW)" "" "$(q rl_fresh "CREATE EXTENSION $EXTENSION")"

# A zone made before the update (configuration, which pg_dump keeps)
# survives it, and decides.  In a database of its own: the comparison below
# is of schemas, and the zone advances ratelimit.zone_id_seq.
rl_check "a zone created on $OLD survives the update, and decides" "token_bucket|5|t" \
	"$(q rl_upgraded_zone "CREATE EXTENSION $EXTENSION VERSION '$OLD';
	                       SELECT rl_zone_set(zone => 'upgrade_zone', algorithm => 'token_bucket',
	                                          rate => 5, period => '1 minute');
	                       ALTER EXTENSION $EXTENSION UPDATE;
	                       SELECT algorithm, rate, (rl_limit('upgrade_zone', 'k')).allowed
	                       FROM rl_zones WHERE zone = 'upgrade_zone'" | grep -v '^$')"

if diff=$(bash "$RL_ROOT/test/upgrade/compare_schema.sh" rl_upgraded rl_fresh "$EXTENSION" 2>&1); then
	rl_check "the update from $OLD gives what a fresh install of $NEW gives" same same
else
	rl_check "the update from $OLD gives what a fresh install of $NEW gives" same "different (diff below)"
	echo "$diff" | sed 's/^/# /'
fi

echo "upgrade: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
