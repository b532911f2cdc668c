#!/usr/bin/env bash
# How often the commit of a one-call transaction wakes the WAL writer, on
# the table store (an unlogged table: the commit is asynchronous) and on
# run.sh's upsert bucket (unlogged too), beside SELECT 1 (no transaction
# id, no commit record).  PostgreSQL 15 wakes the WAL writer whenever its
# flush lags a page behind the commit record; 17 and later only when the
# lag reaches wal_writer_flush_after.  The wake-up is a signal from the
# committing backend and a context switch of the WAL writer, paid by both
# variants alike, so it narrows their ratio.
#
#   bash test/bench/walwriter.sh      PostgreSQL 15 (the host's)
#
# and 17 or 18 inside its Debian chroot (made by scripts/test.sh --pg 18,
# with the extension that run installed there):
#
#   bash -c '. scripts/lib.sh; . scripts/chroot.sh; rl_chroot_probe &&
#     rl_chroot_run 18 env RL_PG_VERSION=18 bash /repo/test/bench/walwriter.sh'
#
# One throwaway cluster of the installed build, server defaults; keys 'k1'
# .. 'k10000' made in each variant first.  Each variant: pgbench -M
# prepared -n -c 1 for WALWRITER_SECONDS (default 5), the WAL writer's
# voluntary context switches (/proc) before and after, and the
# transactions pgbench made.  Prints a Markdown table: wake-ups per 1,000
# transactions and tps.
set -euo pipefail
source "$(dirname "$0")/../../scripts/lib.sh"
source "$(dirname "$0")/pgbench.sh"

SECONDS_PER_RUN=${WALWRITER_SECONDS:-5}
rl_require_positive_ints SECONDS_PER_RUN
work=$(mktemp -d)
chmod 755 "$work"
trap 'rl_cluster_stop; rm -rf "$work"' EXIT

rl_cluster_start walwriter "ratelimit.shmem_max_keys = 100000" >/dev/null
psql_at() { rl_psql -d postgres -At "$@"; }
pgb_bucket_setup "$work"

walwriter=$(psql_at -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'walwriter'")
[ -n "$walwriter" ] || rl_die "no WAL writer in pg_stat_activity"
wakeups() { awk '/^voluntary_ctxt_switches/ { print $2 }' "/proc/$walwriter/status"; }

echo "PostgreSQL $(psql_at -c 'SHOW server_version'), pgbench 1 client, ${SECONDS_PER_RUN} s a variant:"
echo
echo "| variant | WAL writer wake-ups per 1,000 transactions | tps |"
echo "| --- | ---: | ---: |"
for v in select1 table upsert; do
	before=$(wakeups)
	read -r tps xacts <<<"$(pgb_checked "$v" 1 "$work/$v.log" "" -D keys=10000 -T "$SECONDS_PER_RUN" -f "$work/$v.pgbench")"
	after=$(wakeups)
	awk -v v="$v" -v wakes=$((after - before)) -v xacts="$xacts" -v tps="$tps" \
		'BEGIN { printf "| %s | %.0f | %.0f |\n", v, wakes * 1000 / xacts, tps }'
done
