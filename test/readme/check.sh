#!/usr/bin/env bash
# Runs the SQL examples of README.md, so that they keep working as written.
#
#   bash test/readme/check.sh [FILE]     (default: the repository's README.md)
#
# Uses the installed extension as it is (builds and installs nothing): run
# it after `make install`, or after scripts/test.sh or scripts/demo.sh have
# installed the tree's build.  Starts a throwaway cluster of its own
# (.cluster/readme, preloading pg_cron and ratelimit, cron.database_name =
# 'readme'), prints one TAP line per block and ends with "N passed, N
# failed"; exits non-zero when a block failed.
#
# Which blocks run, and how:
#
#   ```sql         Runs.  Every block is a psql session of its own, as the
#                  superuser postgres, with ON_ERROR_STOP: the first error
#                  fails the block.  The blocks run in order, in database
#                  readme, where the check ran CREATE EXTENSION ratelimit
#                  first; later blocks see what earlier ones created.
#   ```sql new-database
#                  Runs in a new, empty database (no extension), and so do
#                  the ```sql blocks after it, until the next one marked so.
#                  For examples that create the extension themselves.
#                  (The word after "sql" is not shown by Markdown renderers.)
#   ```sql pg_cron Needs pg_cron (the README says so beside it): runs here,
#                  where the cluster preloads pg_cron; skipped, and listed
#                  as skipped, when RL_README_PRELOAD leaves pg_cron out.
#   ```output      Right after a ```sql block (blank lines between are
#                  fine): what psql prints for that block, compared line by
#                  line (trailing spaces ignored).  Shown as it would be in
#                  psql: result tables, NOTICE and WARNING lines, and for a
#                  block that ends in an error, that error: such a block must
#                  fail with exactly this output.
#   anything else  Not run: ```text, ```bash, ```ini, or a name such as
#                  ```sql-citus for SQL that needs another server.  A block
#                  opts out by its fence's language.
#
# The cluster has the roles a PostgREST or Supabase database has (anon,
# authenticated, authenticator), for the PostgREST recipe.
#
# RL_README_PRELOAD='ratelimit' runs the blocks as on the demo cluster
# (scripts/demo.sh preloads ratelimit alone): the blocks marked pg_cron are
# then skipped, each on a "# skipped" line, never counted as passed.
set -uo pipefail
readme=${1:-$(dirname "$0")/../../README.md}
[ -f "$readme" ] || { echo "error: no file $readme" >&2; exit 2; }
readme=$(cd "$(dirname "$readme")" && pwd)/$(basename "$readme")
cd "$(dirname "$0")/../.." || exit 1
source scripts/lib.sh

work=$(mktemp -d)
cleanup() {
	rl_cluster_stop
	rm -rf "$work"
}
trap cleanup EXIT

# Cut the file into blocks: $work/NNN.sql (and NNN.out for its output
# block); the manifest has a line "NNN LINE ATTRIBUTES" per ```sql block.
awk -v dir="$work" '
	function flush_close() { if (file != "") close(file); file = "" }
	{
		line = $0
		if (!infence) {
			if (match(line, /^ *```+/)) {
				fence_indent = index(line, "`") - 1
				fence = substr(line, RSTART + fence_indent, RLENGTH - fence_indent)
				info = substr(line, RSTART + RLENGTH)
				gsub(/^ +| +$/, "", info)
				n = split(info, words, / +/)
				lang = (n > 0) ? words[1] : ""
				attrs = ""
				for (i = 2; i <= n; i++) attrs = attrs (attrs == "" ? "" : ",") words[i]
				infence = 1
				file = ""
				if (lang == "sql") {
					blocks++
					name = sprintf("%03d", blocks)
					file = dir "/" name ".sql"
					printf "%s %d %s\n", name, NR, (attrs == "" ? "-" : attrs) > (dir "/manifest")
					last_sql = name
				} else if (lang == "output" && last_sql != "" && only_blank_since_sql) {
					file = dir "/" last_sql ".out"
				}
				printf "" > (file == "" ? "/dev/null" : file)
				only_blank_since_sql = 0
				next
			}
			if (line !~ /^[ \t]*$/) { only_blank_since_sql = 0; last_sql = "" }
			next
		}
		# Inside a fence: a closing fence ends it.
		if (match(line, /^ *```+ *$/)) {
			closing = line; gsub(/ /, "", closing)
			if (length(closing) >= length(fence)) {
				infence = 0
				flush_close()
				only_blank_since_sql = (lang == "sql")
				if (lang != "sql") last_sql = ""
				next
			}
		}
		if (file != "") {
			# Drop the fence'"'"'s indentation (a block inside a list item).
			for (i = 0; i < fence_indent && substr(line, 1, 1) == " "; i++) line = substr(line, 2)
			print line > file
		}
	}
	END { if (infence) { print "unclosed fence" > "/dev/stderr"; exit 1 } }
' "$readme" || { echo "error: could not read the blocks of $readme" >&2; exit 2; }
[ -s "$work/manifest" ] || { echo "error: $readme has no \`\`\`sql block" >&2; exit 2; }

preload=${RL_README_PRELOAD:-pg_cron, ratelimit}
RL_PRELOAD=$preload rl_cluster_start readme "cron.database_name = 'readme'" || exit 1
rl_psql -d postgres -c 'CREATE DATABASE readme' \
	-c 'CREATE ROLE anon NOLOGIN' -c 'CREATE ROLE authenticated NOLOGIN' \
	-c 'CREATE ROLE authenticator LOGIN NOINHERIT' \
	-c 'GRANT anon, authenticated TO authenticator' >/dev/null || exit 1
rl_psql -d readme -c 'CREATE EXTENSION ratelimit' >/dev/null || exit 1

# What psql printed, as a reader sees it: without the "psql:FILE:LINE: "
# prefix that it puts before messages of a script, and without trailing
# spaces and blank lines at either end.
normalise() {
	sed -E 's/^psql:[^:]*:[0-9]+: //; s/[[:space:]]+$//' "$1" \
		| sed -e :a -e '/^\n*$/{$d;N;ba' -e '}' | sed '/./,$!d'
}

db=readme databases=1 skipped=0
runnable=$(wc -l <"$work/manifest")
[[ $preload == *pg_cron* ]] || runnable=$((runnable - $(awk '$3 ~ /(^|,)pg_cron(,|$)/' "$work/manifest" | wc -l)))
echo "1..$runnable"
while read -r name line attrs; do
	label="README block $((10#$name)) (line $line)"
	if [[ ,$attrs, == *,pg_cron,* && $preload != *pg_cron* ]]; then
		echo "# skipped $label: needs pg_cron, not preloaded here"
		skipped=$((skipped + 1))
		continue
	fi
	if [[ ,$attrs, == *,new-database,* ]]; then
		databases=$((databases + 1)); db=readme_$databases
		rl_psql -d postgres -c "CREATE DATABASE $db" >/dev/null || exit 1
	fi
	"$RL_PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -d "$db" -f "$work/$name.sql" \
		>"$work/$name.got" 2>&1
	status=$?
	if [ -f "$work/$name.out" ]; then
		expected=$(normalise "$work/$name.out")
		actual=$(normalise "$work/$name.got")
		# A block shown ending in an error must fail, with that error.
		if grep -q '^ERROR:' <<<"$expected" && [ "$status" -ne 3 ]; then
			actual="$actual
(psql exited with $status, not with an error)"
		fi
		if [ "$expected" = "$actual" ]; then
			rl_check "$label" same same
		else
			rl_check "$label" "the output shown" "another output"
			diff <(echo "$expected") <(echo "$actual") | sed 's/^/# /'
		fi
	elif [ "$status" -eq 0 ]; then
		rl_check "$label" "" ""
	else
		rl_check "$label" "" "$(normalise "$work/$name.got" | grep -E '^(ERROR|DETAIL|HINT):' | head -5)"
	fi
done <"$work/manifest"
echo "$passed passed, $failed failed"
[ "$skipped" -eq 0 ] || echo "# $skipped skipped (need pg_cron; not counted as passed)"
if [ "$failed" -eq 0 ]; then
	rl_cluster_stop
	rl_as_root rm -rf "$RL_CLUSTER_DIR"
else
	echo "# server log: $RL_CLUSTER_DIR/server.log (kept; the cluster is stopped)"
fi
[ "$failed" -eq 0 ]
