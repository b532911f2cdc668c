#!/usr/bin/env bash
# The PostgREST guard's cost per request, next to the rl_limit call it
# makes: pgbench, one client, the same shmem zone (limit out of reach), in
# one run, rounds interleaved so that machine noise hits every variant.
#
#   bash test/bench/guard.sh [SECONDS_PER_RUN] [ROUNDS]    (default 5 3)
#
# Variants, each one transaction of four statements as PostgREST sends it
# (BEGIN, set_config of the request, the call, COMMIT), so that all pay the
# same round trips:
#   rl_limit       rl_limit('api', 'ip:203.0.113.9'): the decision alone
#   guard, ip      request.headers with a 3-entry X-Forwarded-For, then
#                  rl_http_guard('api'): JSON, the header parser, rl_limit,
#                  rl_headers, response.headers
#   guard, sub     request.jwt.claims with a subject, then rl_http_guard
#   wrapper        the README's SECURITY DEFINER wrapper around the guard,
#                  called as a role that may execute only the wrapper
# Prints the median tps per variant, its ratio to rl_limit and the time a
# request spends beyond rl_limit's; raw figures go to
# test/bench/out/guard.txt.
set -uo pipefail
source "$(dirname "$0")/../../scripts/lib.sh"
source "$(dirname "$0")/pgbench.sh"
cd "$RL_ROOT"

SECONDS_PER_RUN=${1:-5}
ROUNDS=${2:-3}
rl_require_positive_ints SECONDS_PER_RUN ROUNDS
OUT=test/bench/out
mkdir -p "$OUT"

rl_install_packages
rl_build_install
trap 'rl_cluster_stop' EXIT
rl_cluster_start bench-guard "fsync = off"

rl_psql -d postgres <<'SQL' >/dev/null
CREATE EXTENSION ratelimit;
SELECT rl_zone_set('api', 'token_bucket', 1000000000, '1 second', store => 'shmem');
CREATE ROLE bench_anon LOGIN;
CREATE SCHEMA private;
CREATE FUNCTION private.rate_limit() RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$ BEGIN PERFORM public.rl_http_guard('api'); END $$;
REVOKE ALL ON FUNCTION private.rate_limit() FROM PUBLIC;
GRANT USAGE ON SCHEMA private TO bench_anon;
GRANT EXECUTE ON FUNCTION private.rate_limit() TO bench_anon;
SQL

dir=$(mktemp -d)
trap 'rl_cluster_stop; rm -rf "$dir"' EXIT
cat >"$dir/limit.sql" <<'SQL'
BEGIN;
SELECT set_config('request.headers', '{"x-forwarded-for":"10.0.0.1, 192.0.2.7, 203.0.113.9","user-agent":"bench"}', true);
SELECT rl_limit('api', 'ip:203.0.113.9');
COMMIT;
SQL
cat >"$dir/guard_ip.sql" <<'SQL'
BEGIN;
SELECT set_config('request.headers', '{"x-forwarded-for":"10.0.0.1, 192.0.2.7, 203.0.113.9","user-agent":"bench"}', true);
SELECT rl_http_guard('api');
COMMIT;
SQL
cat >"$dir/guard_sub.sql" <<'SQL'
BEGIN;
SELECT set_config('request.jwt.claims', '{"sub":"user-42","role":"authenticated"}', true);
SELECT rl_http_guard('api');
COMMIT;
SQL
cat >"$dir/wrapper.sql" <<'SQL'
BEGIN;
SELECT set_config('request.headers', '{"x-forwarded-for":"10.0.0.1, 192.0.2.7, 203.0.113.9","user-agent":"bench"}', true);
SELECT private.rate_limit();
COMMIT;
SQL

variants=(limit guard_ip guard_sub wrapper)
declare -A label=([limit]="rl_limit" [guard_ip]="guard, ip" [guard_sub]="guard, sub" [wrapper]="wrapper")
declare -A runs
: >"$OUT/guard.txt"
for round in $(seq 1 "$ROUNDS"); do
	for v in "${variants[@]}"; do
		user=postgres
		[ "$v" = wrapper ] && user=bench_anon
		read -r tps _ < <(PGUSER=$user pgb_checked "$v" 1 "$dir/$v.log" "" -T "$SECONDS_PER_RUN" -f "$dir/$v.sql")
		[ -n "${tps:-}" ] || rl_die "no result for ${label[$v]}"
		echo "round $round ${label[$v]}: $tps tps" | tee -a "$OUT/guard.txt" >&2
		runs[$v]="${runs[$v]:-} $tps"
	done
done

median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
base=$(echo "${runs[limit]}" | median)
printf '| variant | tps (median of %s x %s s) | vs rl_limit | µs per request over rl_limit |\n| --- | ---: | ---: | ---: |\n' "$ROUNDS" "$SECONDS_PER_RUN"
for v in "${variants[@]}"; do
	m=$(echo "${runs[$v]}" | median)
	awk -v l="${label[$v]}" -v m="$m" -v b="$base" \
		'BEGIN { printf "| %s | %.0f | %.2f | %.0f |\n", l, m, m / b, 1e6 / m - 1e6 / b }'
done
