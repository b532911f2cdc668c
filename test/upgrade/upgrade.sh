#!/usr/bin/env bash
# The upgrade test: a database made by the last release, with its zones and
# its drained keys, taken over by this tree's library and updated with
# ALTER EXTENSION ratelimit UPDATE, must decide as before and be exactly
# what a fresh install of this tree gives.
#
#   bash test/upgrade/upgrade.sh
#
# The releases are listed in test/upgrade/releases (a version and its
# commit).  The newest one not newer than the Makefile's EXTVERSION is the
# starting point, built from its commit (git archive, make) into a private
# copy of the server (.cluster/upgrade-pg, scripts/lib.sh rl_private_pg), so
# the system's PostgreSQL is left alone.
#
#  - When EXTVERSION is that release, its install script is frozen: this
#    tree's sql/ratelimit.sql must be the release's, byte for byte.  A
#    change to the SQL surface takes a new EXTVERSION and an update script
#    sql/ratelimit--<release>--<new>.sql.
#  - In a cluster of the release: database rl_upgraded gets CREATE
#    EXTENSION; rl_upgraded_zone a table-store zone and a shmem zone whose
#    key 'drained' is refused.  The cluster stops cleanly, this tree's
#    build is installed over the release's (its update scripts included),
#    the cluster starts again, and both databases run ALTER EXTENSION
#    UPDATE: the drained keys are still refused, other keys admitted.
#  - rl_fresh gets CREATE EXTENSION of this tree; test/upgrade/compare_schema.sh
#    compares it with rl_upgraded (catalogs and pg_dump --binary-upgrade; a
#    difference is printed as TAP comments).
#
# Prints "ok - ..." / "not ok - ..." lines and "upgrade: N passed, N
# failed"; exits non-zero when a check failed.  With no release listed, it
# prints "# SKIP upgrade: ..." and exits 0 (the test command reports it as
# skipped, never as passed).
set -uo pipefail
source "$(dirname "$0")/../../scripts/lib.sh"
cd "$RL_ROOT" || exit 2

EXTENSION=ratelimit
NEW=$(sed -n 's/^EXTVERSION *= *//p' Makefile | head -1)
[ -n "$NEW" ] || rl_die "no EXTVERSION in the Makefile"

# The newest release not newer than NEW.
newest() { printf '%s\n' "$@" | sort -V | tail -1; }
OLD="" COMMIT=""
while read -r version commit _; do
	case $version in '' | '#'*) continue ;; esac
	[ "$(newest "$version" "$NEW")" = "$NEW" ] || continue
	if [ -z "$OLD" ] || [ "$(newest "$version" "$OLD")" = "$version" ]; then OLD=$version COMMIT=$commit; fi
done <test/upgrade/releases
if [ -z "${OLD:-}" ]; then
	echo "# SKIP upgrade: test/upgrade/releases lists no release up to $NEW"
	exit 0
fi
echo "# upgrade: from release $OLD (commit $COMMIT) to this tree's $NEW"

fail_now() { echo "upgrade: $passed passed, $((failed)) failed"; exit 1; }

if ! git -C "$RL_ROOT" cat-file -e "$COMMIT^{commit}" 2>/dev/null; then
	rl_check "the commit of release $OLD is in this repository" "$COMMIT" "missing (a shallow clone?)"
	fail_now
fi
rl_check "the commit of release $OLD is version $OLD" "$OLD" \
	"$(git -C "$RL_ROOT" show "$COMMIT:Makefile" | sed -n 's/^EXTVERSION *= *//p' | head -1)"

if [ "$OLD" = "$NEW" ]; then
	rl_check "the install script of $OLD is frozen: this tree's sql/$EXTENSION.sql is the release's" same \
		"$(git -C "$RL_ROOT" show "$COMMIT:sql/$EXTENSION.sql" | cmp -s - "sql/$EXTENSION.sql" && echo same \
		   || echo "different: the SQL surface changed since $OLD; give the Makefile a new EXTVERSION and ship sql/$EXTENSION--$OLD--<new>.sql")"
else
	rl_check "an update script from $OLD ships with $NEW" yes \
		"$(ls sql/"$EXTENSION--$OLD--"*.sql >/dev/null 2>&1 && echo yes || echo "no sql/$EXTENSION--$OLD--*.sql")"
fi

work=$RL_ROOT/.cluster/upgrade-build
PG_COPY=$RL_ROOT/.cluster/upgrade-pg
cleanup() { rl_cluster_stop; rm -rf "$work" "$PG_COPY"; }
trap cleanup EXIT
rm -rf "$work"; mkdir -p "$work/release"

# A private server: the release's library, then this tree's, go there.
RL_PG_BIN=$(rl_private_pg "$PG_COPY") || fail_now
export RL_PG_BIN
rl_allow_traverse "$RL_PG_BIN"
# build_install DIR WHAT: make and make install of the tree in DIR into the
# private server, checked as "WHAT builds and installs"; the run ends on a
# failure, with the end of the build's log.
build_install() {
	if make -C "$1" -s -j2 PG_CONFIG="$RL_PG_BIN/pg_config" all >>"$work/build.log" 2>&1 		&& make -C "$1" -s PG_CONFIG="$RL_PG_BIN/pg_config" install >>"$work/build.log" 2>&1; then
		rl_check "$2 builds and installs" ok ok
	else
		tail -20 "$work/build.log" | sed 's/^/# /'
		rl_check "$2 builds and installs" ok failed
		fail_now
	fi
}
git -C "$RL_ROOT" archive "$COMMIT" | tar -x -C "$work/release"
build_install "$work/release" "release $OLD, from its commit,"

RL_PRELOAD=ratelimit rl_cluster_start upgrade
q() { rl_psql -d "$1" -tA -c "SET client_min_messages = warning" -c "$2" 2>&1; }
for db in rl_upgraded rl_fresh rl_upgraded_zone; do q postgres "CREATE DATABASE $db" >/dev/null; done
rl_check "CREATE EXTENSION $EXTENSION on release $OLD" "$OLD" \
	"$(q rl_upgraded "CREATE EXTENSION $EXTENSION; SELECT extversion FROM pg_extension WHERE extname = '$EXTENSION'" | grep -v '^$')"

# Zones and drained keys of the release (a zone advances
# ratelimit.zone_id_seq: a database of its own, outside the comparison).
allowed_three_times() {	# the three decisions of one key, then of another
	q rl_upgraded_zone "SELECT string_agg((rl_limit(z, k)).allowed::text, ',' ORDER BY z, k, i)
	                    FROM unnest(ARRAY['upgrade_table', 'upgrade_shmem']) z,
	                         unnest(ARRAY[$1]) k, generate_series(1, $2) i"
}
q rl_upgraded_zone "CREATE EXTENSION $EXTENSION;
	SELECT rl_zone_set(zone => 'upgrade_table', algorithm => 'token_bucket', rate => 2, period => '1 day');
	SELECT rl_zone_set(zone => 'upgrade_shmem', algorithm => 'token_bucket', rate => 2, period => '1 day',
	                   store => 'shmem');
	DROP ROLE IF EXISTS upgrade_zone_manager; CREATE ROLE upgrade_zone_manager;
	GRANT EXECUTE ON FUNCTION rl_zone_set TO upgrade_zone_manager" >/dev/null
rl_check "release $OLD: key 'drained' admitted twice then refused, in each store" \
	"true,true,false,true,true,false" "$(allowed_three_times "'drained'" 3)"

# This tree's build over the release's: the release's install script stays
# (another name, or the same bytes), the update scripts arrive.
rl_cluster_stop
build_install "$RL_ROOT" "this tree, over release $OLD,"
rl_cluster_ctl start -w -t 60 -l "$RL_CLUSTER_DIR/server.log" >/dev/null || { cat "$RL_CLUSTER_DIR/server.log"; fail_now; }

# Between the package's install and ALTER EXTENSION UPDATE, the new
# library runs on the release's tables: it must decide as before.
rl_check "before the update, this tree's library decides on release $OLD's tables: key 'drained' refused" \
	"false,false" "$(q rl_upgraded_zone "SELECT string_agg((rl_limit(z, 'drained')).allowed::text, ',' ORDER BY z)
	                                     FROM unnest(ARRAY['upgrade_table', 'upgrade_shmem']) z")"
rl_check "an update path leads from $OLD to $NEW" yes \
	"$(q postgres "SELECT CASE WHEN '$OLD' = '$NEW' OR EXISTS (SELECT FROM pg_extension_update_paths('$EXTENSION')
	                                                          WHERE source = '$OLD' AND target = '$NEW' AND path IS NOT NULL)
	               THEN 'yes' ELSE 'no' END")"
for db in rl_upgraded rl_upgraded_zone; do
	rl_check "ALTER EXTENSION $EXTENSION UPDATE in $db gives $NEW" "$NEW" \
		"$(q $db "ALTER EXTENSION $EXTENSION UPDATE; SELECT extversion FROM pg_extension WHERE extname = '$EXTENSION'" | grep -v '^$')"
done
rl_check "after the update: key 'drained' still refused, key 'new' admitted, in each store" \
	"false,true,false,true" "$(allowed_three_times "'drained', 'new'" 1)"
rl_check "CREATE EXTENSION $EXTENSION (a fresh $NEW)" "" "$(q rl_fresh "CREATE EXTENSION $EXTENSION")"
if [ "$NEW" = 0.6.0 ]; then
	# What 0.6.0 brought: rl_zone_set has a new signature, and who could
	# run the old one runs it; durable => true moves the drained key.
	rl_check "after the update to 0.6.0, a role granted the old rl_zone_set may run the new one" t \
		"$(q rl_upgraded_zone "SELECT has_function_privilege('upgrade_zone_manager',
		   'rl_zone_set(text, text, numeric, interval, bigint, text, boolean, text, boolean, boolean, boolean)', 'EXECUTE')")"
	rl_check "after the update to 0.6.0, durable => true moves key 'drained', still refused" "false|1" \
		"$(q rl_upgraded_zone "SELECT rl_zone_set('upgrade_table', durable => true);
		   SELECT (rl_limit('upgrade_table', 'drained')).allowed || '|' || count(*)
		   FROM ratelimit.durable_state WHERE key = 'drained'" | grep -v '^$')"
fi

if diff=$(bash "$RL_ROOT/test/upgrade/compare_schema.sh" rl_upgraded rl_fresh "$EXTENSION" 2>&1); then
	rl_check "the update from $OLD gives what a fresh install of $NEW gives" same same
else
	rl_check "the update from $OLD gives what a fresh install of $NEW gives" same "different (diff below)"
	echo "$diff" | sed 's/^/# /'
fi

echo "upgrade: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
