#!/usr/bin/env bash
# What ratelimit.shmem_max_keys costs a call: the shmem store's
# rl_token_bucket over the same 10k keys in stores of several sizes.
#
#   bash test/bench/capacity.sh
#
# Starts one throwaway cluster per size (.cluster/capacity_<keys>), all at
# once, each holding the same 50k keys (rl_token_bucket on the shmem store:
# 'k' || i, 'a' || i, 'b' || i, 'c' || i and i::text for i in 0 .. 10000),
# then times, in rounds that visit every cluster in turn,
#   SELECT count(rl_token_bucket(i::text, 1000000, 60, 1)) FROM generate_series(1, 10000) i
# against the speed target's loop SELECT count(hashtext(i::text)) ... in the same
# session.  Every call is admitted (checked).  Also reports the shared memory
# each store asked for (pg_shmem_allocations) and how much of the machine's
# shared memory the cluster made resident (Shmem of /proc/meminfo before
# the cluster started and after its keys were created, one cluster at a
# time: the whole cluster's, shared_buffers and all), and the slowest calls
# while 100k more new keys make each store grow.
# Writes test/bench/CAPACITY.md.  Measures the installed extension as it
# is: builds nothing.
#
# Environment:
#   CAPACITY_SIZES   shmem_max_keys of the clusters (default
#                    "100000 500000 2000000 10000000")
#   CAPACITY_ROUNDS  rounds (default 20); each times both statements 3 times
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../../scripts/lib.sh disable=SC1091
. "$HERE/../../scripts/lib.sh"

CAPACITY_SIZES=${CAPACITY_SIZES:-"100000 500000 2000000 10000000"}
CAPACITY_ROUNDS=${CAPACITY_ROUNDS:-20}
rl_require_positive_ints CAPACITY_SIZES CAPACITY_ROUNDS
read -r -a SIZES <<<"$CAPACITY_SIZES"
COMMAND=$(rl_command_with_env "bash test/bench/capacity.sh" CAPACITY_SIZES CAPACITY_ROUNDS)

OUT=$HERE/out/capacity
rm -rf "$OUT"; mkdir -p "$OUT"
declare -A PORT

stop_all() {
	local s
	for s in "${SIZES[@]}"; do
		rl_cluster_use "capacity_$s"
		rl_cluster_stop
	done
}
trap stop_all EXIT

shmem_kb() { awk '$1 == "Shmem:" { print $2 }' /proc/meminfo; }
psql_on() { local size=$1; shift; PGPORT=${PORT[$size]} rl_psql -d postgres -tA "$@"; }

# One cluster after another: started, then given its keys, between two
# readings of the machine's resident shared memory.
{
	echo "size|allocated_bytes|resident_kb|admitted"
	for s in "${SIZES[@]}"; do
		before=$(shmem_kb)
		rl_cluster_start "capacity_$s" "ratelimit.shmem_max_keys = $s" >&2
		PORT[$s]=$PGPORT
		psql_on "$s" -c "CREATE EXTENSION ratelimit" >/dev/null
		admitted=$(psql_on "$s" -c "SET ratelimit.default_store = shmem" -c "
			SELECT count(*) FILTER (WHERE rl_token_bucket(p || i, 1000000, 60, 1) >= 0)
			  FROM unnest(ARRAY['k', 'a', 'b', 'c', '']) p, generate_series(0, 10000) i" | tail -1)
		after=$(shmem_kb)
		alloc=$(psql_on "$s" -c "SELECT sum(size) FROM pg_shmem_allocations WHERE name LIKE 'ratelimit%'")
		echo "$s|$alloc|$((after - before))|$admitted"
	done
} >"$OUT/memory.txt"

MEASURE="SET client_min_messages = warning;
SET ratelimit.default_store = shmem;
CREATE TEMP TABLE t (variant text, us float8, admitted bigint);
CREATE FUNCTION pg_temp.m(variant text, q text) RETURNS void LANGUAGE plpgsql AS \$\$
DECLARE t0 timestamptz; n bigint;
BEGIN
    t0 := clock_timestamp();
    EXECUTE q INTO n;
    INSERT INTO t VALUES (variant, extract(epoch FROM clock_timestamp() - t0) * 1e6 / 10000, n);
END \$\$;
DO \$\$ BEGIN FOR r IN 1..3 LOOP
    PERFORM pg_temp.m('hashtext', 'SELECT count(hashtext(i::text)) FROM generate_series(1, 10000) i');
    PERFORM pg_temp.m('bucket', 'SELECT count(*) FILTER (WHERE rl_token_bucket(i::text, 1000000, 60, 1) >= 0) FROM generate_series(1, 10000) i');
END LOOP; END \$\$;
SELECT variant, us, admitted FROM t;"
: >"$OUT/timings.txt"
for ((round = 1; round <= CAPACITY_ROUNDS; round++)); do
	for s in "${SIZES[@]}"; do
		psql_on "$s" -F '|' -c "$MEASURE" | sed "s/^/$s|/" >>"$OUT/timings.txt"
	done
done

# Growth: 100k new keys, one call each, each call timed on its own (in
# PL/pgSQL: its loop and timing are in every figure), after the timings
# above.  A store still growing splits sets as they come.
GROWTH="SET client_min_messages = warning;
SET ratelimit.default_store = shmem;
CREATE TEMP TABLE d (us float8);
DO \$\$ DECLARE t0 timestamptz; BEGIN
    FOR i IN 1..100000 LOOP
        t0 := clock_timestamp();
        PERFORM rl_token_bucket('new' || i, 0.001, 100000);
        INSERT INTO d VALUES (extract(epoch FROM clock_timestamp() - t0) * 1e6);
    END LOOP;
END \$\$;
SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY us), percentile_cont(0.999) WITHIN GROUP (ORDER BY us),
       max(us), count(*) FILTER (WHERE us > 100), count(*) FILTER (WHERE us > 1000)
  FROM d;"
for s in "${SIZES[@]}"; do
	echo "$s|$(psql_on "$s" -F '|' -c "$GROWTH")"
done >"$OUT/growth.txt"

python3 - "$OUT/memory.txt" "$OUT/timings.txt" "$COMMAND" "$CAPACITY_ROUNDS" "$OUT/growth.txt" >"$HERE/CAPACITY.md" <<'PY'
import collections, statistics, sys, datetime, os
memory_file, timings_file, command, rounds, growth_file = sys.argv[1:]
memory = {}
for line in open(memory_file).read().split('\n')[1:]:
    if line:
        size, alloc, resident, admitted = line.split('|')
        memory[int(size)] = (int(alloc), int(resident), int(admitted))
times = collections.defaultdict(list)
for line in open(timings_file):
    size, variant, us, admitted = line.strip().split('|')
    if variant == 'bucket' and int(admitted) != 10000:
        sys.exit(f'capacity {size}: {admitted} of 10000 calls admitted')
    times[(int(size), variant)].append(float(us))
for size, (alloc, resident, admitted) in memory.items():
    if admitted != 50005:
        sys.exit(f'capacity {size}: {admitted} of 50005 warm-up calls admitted')
print('# What ratelimit.shmem_max_keys costs a call')
print()
print(f'- date: {datetime.datetime.utcnow():%Y-%m-%d %H:%M:%S} UTC; machine: {os.cpu_count()} CPUs')
print(f'- command: `{command}`')
print()
print('One throwaway cluster per `ratelimit.shmem_max_keys`, all running at once, each holding the same 50,005 keys on the shmem store (`rl_token_bucket` over `\'k\' || i`, `\'a\' || i`, `\'b\' || i`, `\'c\' || i` and `i::text`, i = 0 … 10000). '
      f'Timed inside the server: `SELECT count(*) FILTER (WHERE rl_token_bucket(i::text, 1000000, 60, 1) >= 0) FROM generate_series(1, 10000) i` (every call admitted, checked) against the speed target\'s loop `SELECT count(hashtext(i::text)) FROM generate_series(1, 10000) i` in the same session; {rounds} rounds visiting the clusters in turn, 3 of each statement per visit; medians. '
      '*Resident*: how much `Shmem` in `/proc/meminfo` grew from before the cluster started to after its 50,005 keys were created (clusters one after another, before any timing): the shared memory the whole cluster made resident (shared_buffers is the default 128 MB, mostly untouched), against what the store asked for at start.')
print()
print('| shmem_max_keys | store asked for at start, MB | cluster resident with 50k keys, MB | `rl_token_bucket` µs/call | `hashtext(i::text)` µs/call | ratio |')
print('| ---: | ---: | ---: | ---: | ---: | ---: |')
for size in sorted(memory):
    alloc, resident, _ = memory[size]
    bucket = statistics.median(times[(size, 'bucket')])
    loop = statistics.median(times[(size, 'hashtext')])
    print(f'| {size} | {alloc / 1e6:.1f} | {resident / 1024:.1f} | {bucket:.3f} | {loop:.3f} | {loop / bucket:.2f} |')
print()
print('While the store grows: 100,000 new keys on top of those, one `rl_token_bucket` call each (capacity 100, so none recovers), each call timed on its own in a PL/pgSQL loop (the loop, the clock reads and an INSERT of the time are in every figure); a store that is still growing splits sets as the keys come (a store of 100,000 fills up and refuses room to some, under the default policy allow).')
print()
print('| shmem_max_keys | median µs | 99.9th percentile µs | slowest µs | calls over 100 µs | calls over 1 ms |')
print('| ---: | ---: | ---: | ---: | ---: | ---: |')
for line in open(growth_file):
    size, p50, p999, worst, over100, over1000 = line.strip().split('|')
    print(f'| {size} | {float(p50):.1f} | {float(p999):.1f} | {float(worst):.0f} | {over100} | {over1000} |')
PY
cat "$HERE/CAPACITY.md"
