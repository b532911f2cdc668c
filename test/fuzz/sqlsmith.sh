#!/usr/bin/env bash
# SQL-level fuzz test of the extension with sqlsmith (Debian package
# sqlsmith, 1.4).  Starts a cluster of its own (scripts/lib.sh; ratelimit
# and pg_cron preloaded, ratelimit.shmem_max_keys = 2000 so that the shmem
# store is full and evicts), sets up three databases and runs sqlsmith,
# seeded, against each in turn:
#   catalog      rl_smith: the extension next to the whole catalog, as any
#                database has it (few generated queries call the extension:
#                it has 15 of some 3000 functions)
#   focus        rl_smith_focus: sqlsmith sees the extension's functions,
#                wrappers that pick an existing zone by number (sqlsmith's
#                text arguments are column values or NULL, which rarely
#                name a zone) and a few dozen builtins; no catalog tables
#   focus-shmem  rl_smith_shmem: the same, with ratelimit.default_store =
#                shmem, table_access = spi and shmem_full_policy = deny
# Every database has zones of every algorithm on both stores (sliding_window
# needs the table store), some with history and shadow, a few hundred keys
# with state, and small tables whose text columns hold zone names (some
# named like the algorithms and stores), keys and odd strings.
#
# sqlsmith runs each generated statement in a transaction of its own and
# rolls it back, with statement_timeout 1 s.  Errors of the generated
# queries are expected.  Prints "ok"/"not ok" lines; fails on a server
# crash (signal, PANIC, TRAP, stuck spinlock, exit code other than 0/1) with
# the crashing query, its number and the seed; on a server that no longer
# answers; when a zone no longer answers rl_limit; when the zones, the table
# store's state or the history changed (everything was rolled back); or
# when no generated query called an rl_ function.
#
#   bash test/fuzz/sqlsmith.sh
#
# Environment:
#   SQLSMITH_SEED     seed S of the passes (default 1): they use S, S + 1000
#                     and S + 2000; a list ("1 2") runs them once per seed
#   SQLSMITH_QUERIES  queries of each focus pass (default 15000); the catalog
#                     pass runs half as many (slower queries)
#   SQLSMITH_SECONDS  wall-time cap of each pass (default 90); reaching it
#                     ends the pass normally (a slow machine runs fewer)
#   SQLSMITH_OUT      where the logs go (default results/sqlsmith), and the
#                     generated queries of a pass that failed (all passes'
#                     with SQLSMITH_KEEP_QUERIES=1)
# Reproduce a crash: the same SQLSMITH_SEED and SQLSMITH_QUERIES (the
# queries of a pass depend only on the seed and the schema, except for
# sqlsmith's feedback from failed queries); "not ok" prints the query, its
# number N in its pass and the sqlsmith command (--max-queries=N stops
# right after it).
set -uo pipefail
source "$(dirname "$0")/../../scripts/lib.sh"

SEEDS=${SQLSMITH_SEED:-1}
QUERIES=${SQLSMITH_QUERIES:-15000}
CAP=${SQLSMITH_SECONDS:-90}
OUT=${SQLSMITH_OUT:-$RL_ROOT/results/sqlsmith}
rl_require_positive_ints SEEDS QUERIES CAP
if ! command -v sqlsmith >/dev/null; then
	echo "not ok - sqlsmith not found (Debian: apt-get install sqlsmith; scripts/lib.sh installs it)"
	exit 1
fi
# Settings of the caller's sessions (scripts/test.sh exports
# ratelimit.table_access in PGOPTIONS) would override the databases' own.
unset PGOPTIONS
mkdir -p "$OUT"
rm -f "$OUT"/queries-*.sql* "$OUT"/sqlsmith-*.log "$OUT"/crash-*.sql "$OUT"/server.log

trap 'rl_cluster_use sqlsmith; rl_cluster_stop' EXIT
started=$(date +%s)
# A crash is logged at level LOG with the query the process was running
# (its first 1023 bytes); the errors of the generated queries are logged
# with their SQLSTATE (%e), without their statements.
rl_cluster_start sqlsmith "fsync = off" \
	"ratelimit.shmem_max_keys = 2000" \
	"log_min_messages = warning" \
	"log_min_error_statement = panic" \
	"log_line_prefix = '%m [%p] %e '" \
	"restart_after_crash = on"
LOG=$RL_CLUSTER_DIR/server.log

# The zones, the tables sqlsmith draws values from, and keys with state.
BASE_SQL=$(cat <<'EOF'
CREATE EXTENSION ratelimit;
SELECT rl_zone_set(zone, algorithm, rate, period::interval, burst => burst, store => store,
                   history => history, shadow => shadow)
FROM (VALUES
  ('token_bucket',           'token_bucket',           10,         '1 minute',    NULL::bigint, 'table', false, false),
  ('gcra',                   'gcra',                   30,         '1 minute',    16,   'table', false, false),
  ('sliding_window',         'sliding_window',         20,         '1 minute',    NULL, 'table', true,  false),
  ('sliding_window_counter', 'sliding_window_counter', 20,         '1 minute',    NULL, 'table', false, false),
  ('fixed_window',           'fixed_window',           5,          '1 hour',      NULL, 'table', false, false),
  ('table',                  'token_bucket',           3,          '1 second',    6,    'table', true,  true),
  ('gcra_hist',              'gcra',                   1,          '1 hour',      3,    'table', true,  true),
  ('sw_shadow',              'sliding_window',         3,          '1 second',    NULL, 'table', false, true),
  ('sw_big',                 'sliding_window',         1000000,    '1 day',       NULL, 'table', true,  false),
  ('swc_shadow',             'sliding_window_counter', 1000000000, '285 years',   NULL, 'table', false, true),
  ('huge',                   'fixed_window',           9007199254740992, '1 microsecond', NULL, 'table', false, false),
  ('shmem',                  'token_bucket',           10,         '1 minute',    NULL, 'shmem', false, false),
  ('tb_shmem_hist',          'token_bucket',           100,        '1 second',    5,    'shmem', true,  false),
  ('tiny',                   'token_bucket',           1,          '1 hour',      NULL, 'shmem', false, false),
  ('gcra_shmem',             'gcra',                   15,         '1 second',    4,    'shmem', false, true),
  ('swc_shmem',              'sliding_window_counter', 7,          '10 seconds',  NULL, 'shmem', true,  false),
  ('fw_shmem',               'fixed_window',           2,          '1 day',       NULL, 'shmem', false, false),
  ('fw_shmem_shadow',        'fixed_window',           1,          '1 minute',    NULL, 'shmem', true,  true)
) z(zone, algorithm, rate, period, burst, store, history, shadow);
-- rl_zone_set refuses a cron zone where pg_cron cannot run its job (this
-- database is not cron.database_name): the zone table takes it as a
-- restored dump would.
INSERT INTO ratelimit.zone (zone, algorithm, rate, period, refill) VALUES ('cron', 'token_bucket', 60, '1 minute', 'cron');

CREATE TABLE smith_calls (zone text, key text, cost int4, weight float8, at timestamptz);
CREATE TABLE smith_params (algorithm text, store text, rate int8, period interval, burst int8,
                           history bool, shadow bool, refill text);
CREATE TABLE smith_values (i int4, b int8, f float8, d interval, ts timestamptz, s text);
CREATE TABLE smith_settings (name text, value text);

INSERT INTO smith_calls
SELECT z.zone,
       CASE g % 7 WHEN 0 THEN z.zone WHEN 1 THEN 'k' || (g % 23) WHEN 2 THEN 'fill' || (g * 17 % 2500)
                  WHEN 3 THEN 'user:' || (g % 5) WHEN 4 THEN repeat('x', 40 + g % 20)
                  WHEN 5 THEN (ARRAY['', ' ', 'K1', 'k1 ', repeat('long', 300), E'\u00e9t\u00e9', NULL])[1 + g % 7]
                  ELSE md5(g::text) END,
       (ARRAY[1, 1, 1, 0, 2, 3, 5, 16, -1, 1000, 2147483647, NULL])[1 + g % 12],
       (ARRAY[1, 0.5, 0, 2, 60, 3600, 1e-7, -1, 'NaN', 'Infinity', 1e300, NULL])[1 + g % 12]::float8,
       '2026-01-01 00:00:00+00'::timestamptz + g * interval '17 minutes'
FROM generate_series(1, 200) g
JOIN (SELECT zone, row_number() OVER (ORDER BY zone) - 1 AS n, count(*) OVER () AS c FROM rl_zones) z
  ON z.n = (g * 7) % z.c;

INSERT INTO smith_params
SELECT (ARRAY['token_bucket', 'gcra', 'sliding_window', 'sliding_window_counter', 'fixed_window', 'bogus', NULL])[1 + g % 7],
       (ARRAY['table', 'shmem', 'table', 'shmem', 'redis'])[1 + g % 5],
       (ARRAY[1, 2, 5, 10, 100, 1000000, 1000001, 9007199254740992, 9007199254740993, 0, -5, NULL])[1 + g % 12],
       (ARRAY['1 second', '1 minute', '1 hour', '1 day', '1 mon', '285 years', '286 years', '0', '-1 minute',
              '1 microsecond', '0.5 seconds', NULL])[1 + g % 12]::interval,
       (ARRAY[NULL, 1, 3, 20, 0, -1, 9007199254740993])[1 + g % 7],
       g % 3 = 0, g % 4 = 0,
       (ARRAY['inline', 'cron', 'inline', 'hourly'])[1 + g % 4]
FROM generate_series(1, 60) g;

INSERT INTO smith_values
SELECT (ARRAY[0, 1, 2, 3, 10, 15, 30, 60, 100, -1, -2147483648, 2147483647, NULL])[1 + g % 13],
       (ARRAY[0, 1, 2, 20, 1000, 1000000, 9007199254740992, -1, 9223372036854775807, -9223372036854775808, NULL])[1 + g % 11],
       (ARRAY[0, 0.1, 1, 2, 15, 60, 86400, 1e-9, -0.5, 'NaN', '-Infinity', 'Infinity', 1e308, NULL])[1 + g % 14]::float8,
       (ARRAY['1 second', '1 minute', '15 minutes', '1 hour', '1 day', '30 days', '1 year', '285 years', '0',
              '-1 second', '1 microsecond', '178000000 years', NULL])[1 + g % 13]::interval,
       (ARRAY['2026-01-01 00:00:00+00', '2000-01-01 00:00:00+00', '1970-01-01 00:00:00+00', '4713-11-24 00:00:00+00 BC',
              '294276-12-31 23:59:59+00', 'infinity', '-infinity', NULL])[1 + g % 8]::timestamptz,
       (ARRAY['token_bucket', 'shmem', 'table', 'gcra', 'k1', 'fill7', 'sliding_window', 'fixed_window', 'tiny',
              'sliding_window_counter', 'no such zone', '', NULL])[1 + g % 13]
FROM generate_series(1, 80) g;

INSERT INTO smith_settings VALUES
  ('ratelimit.default_store', 'shmem'), ('ratelimit.default_store', 'table'),
  ('ratelimit.shmem_full_policy', 'deny'), ('ratelimit.shmem_full_policy', 'error'),
  ('ratelimit.shmem_full_policy', 'allow'), ('ratelimit.table_access', 'spi'),
  ('ratelimit.table_access', 'direct'), ('ratelimit.now_override', '2026-01-01 00:00:00+00'),
  ('ratelimit.now_override', '294276-12-31 23:59:59+00'), ('ratelimit.now_override', '2000-01-01 00:00:00+00'),
  ('ratelimit.now_override', ''), ('request.jwt.claims', '{"sub": "alice"}'),
  ('request.headers', '{"x-forwarded-for": "10.0.0.1, 10.0.0.2"}'), ('response.headers', '[]');

-- 20 keys with state on every zone, and rl_token_bucket's and rl_gcra's
-- buckets on both stores.
SELECT count(*) FROM (SELECT rl_limit(zone, 'k' || g, 1) FROM rl_zones, generate_series(1, 20) g) s;
SELECT count(*) FROM (SELECT rl_token_bucket('k' || g, 1, 10), rl_gcra('k' || g, 5, 10, 60) FROM generate_series(1, 20) g) s;
SET ratelimit.default_store = shmem;
SELECT count(*) FROM (SELECT rl_token_bucket('k' || g, 1, 10), rl_gcra('k' || g, 5, 10, 60) FROM generate_series(1, 20) g) s;
EOF
)

# sqlsmith 1.4 reads the functions it may call (and the aggregates) from
# "pg_proc", unqualified: a view of that name ahead of pg_catalog in the
# database's search_path narrows them to the extension's, the wrappers
# below and a few builtins that make or take the values they use.  Its
# option --exclude-catalog leaves out only the catalog's tables.
FOCUS_SQL=$(cat <<'EOF'
CREATE SCHEMA smith_focus;
CREATE VIEW smith_focus.pg_proc AS
SELECT * FROM pg_catalog.pg_proc p
WHERE p.pronamespace IN ('public'::regnamespace, 'ratelimit'::regnamespace, 'smith_focus'::regnamespace)
   OR (p.pronamespace = 'pg_catalog'::regnamespace AND p.proname IN (
        'md5', 'repeat', 'substr', 'textcat', 'int4', 'int8', 'float8', 'text',
        'make_interval', 'interval_mul', 'justify_interval',
        'jsonb_pretty', 'jsonb_object_field_text', 'row_to_json', 'set_config', 'current_setting',
        'count', 'sum', 'max', 'min', 'string_agg', 'bool_and', 'jsonb_agg'));

-- Wrappers sqlsmith can call with what it has (small integers, column
-- values, NULLs): an integer picks the zone, the algorithm, the store or
-- the setting, so that most calls reach a decision.  Settings are local to
-- the generated statement's transaction.
CREATE FUNCTION smith_focus.pick(names text[], n int4) RETURNS text LANGUAGE sql IMMUTABLE
AS $$ SELECT names[1 + ((n::int8 % cardinality(names)) + cardinality(names)) % cardinality(names)] $$;
CREATE FUNCTION smith_focus.zone(n int4) RETURNS text LANGUAGE sql STABLE
AS $$ SELECT smith_focus.pick(ARRAY(SELECT zone FROM ratelimit.zone ORDER BY zone), n) $$;
CREATE FUNCTION smith_focus.limit_zone(n int4, key text, cost int4) RETURNS rl_result LANGUAGE sql
AS $$ SELECT rl_limit(smith_focus.zone(n), key, cost) $$;
CREATE FUNCTION smith_focus.peek_zone(n int4, key text, cost int4) RETURNS rl_result LANGUAGE sql
AS $$ SELECT rl_peek(smith_focus.zone(n), key, cost) $$;
CREATE FUNCTION smith_focus.sliding_window_zone(n int4, key text, cost int4) RETURNS rl_result LANGUAGE sql
AS $$ SELECT rl_sliding_window(smith_focus.zone(n), key, cost) $$;
CREATE FUNCTION smith_focus.reset_zone(n int4, key text) RETURNS bool LANGUAGE sql
AS $$ SELECT rl_reset(smith_focus.zone(n), key) $$;
CREATE FUNCTION smith_focus.guard_zone(n int4, key text) RETURNS void LANGUAGE sql
AS $$ SELECT rl_http_guard(smith_focus.zone(n), key) $$;
CREATE FUNCTION smith_focus.gc_zone(n int4, max_window interval) RETURNS int8 LANGUAGE sql
AS $$ SELECT rl_gc(smith_focus.zone(n), max_window) $$;
CREATE FUNCTION smith_focus.drop_zone(n int4) RETURNS void LANGUAGE sql
AS $$ SELECT rl_zone_drop(smith_focus.zone(n)) $$;
CREATE FUNCTION smith_focus.set_zone(n int4, algorithm int4, rate int8, period interval, burst int8,
                                     store int4, history bool, shadow bool) RETURNS void LANGUAGE sql
AS $$ SELECT rl_zone_set(smith_focus.zone(n),
                         smith_focus.pick('{token_bucket,gcra,sliding_window,sliding_window_counter,fixed_window}', algorithm),
                         rate, period, burst => burst, store => smith_focus.pick('{table,shmem}', store),
                         history => history, shadow => shadow, reset => shadow) $$;
CREATE FUNCTION smith_focus.set_zone_rate(n int4, rate float8) RETURNS void LANGUAGE sql
AS $$ SELECT rl_zone_set(smith_focus.zone(n), rate => rate::numeric) $$;
CREATE FUNCTION smith_focus.limit_zones(n int4, m int4, key text, cost int4) RETURNS rl_result LANGUAGE sql
AS $$ SELECT rl_limit(ARRAY[smith_focus.zone(n), smith_focus.zone(m)], key, cost) $$;
CREATE FUNCTION smith_focus.refund_zone(n int4, key text, cost int4) RETURNS rl_result LANGUAGE sql
AS $$ SELECT rl_refund(smith_focus.zone(n), key, cost) $$;
CREATE FUNCTION smith_focus.use_store(n int4) RETURNS text LANGUAGE sql
AS $$ SELECT set_config('ratelimit.default_store', smith_focus.pick('{table,shmem}', n), true) $$;
CREATE FUNCTION smith_focus.full_policy(n int4) RETURNS text LANGUAGE sql
AS $$ SELECT set_config('ratelimit.shmem_full_policy', smith_focus.pick('{allow,deny,error}', n), true) $$;
CREATE FUNCTION smith_focus.clock(at timestamptz) RETURNS text LANGUAGE sql
AS $$ SELECT set_config('ratelimit.now_override', at::text, true) $$;
CREATE FUNCTION smith_focus.clock_shift(shift interval) RETURNS text LANGUAGE sql
AS $$ SELECT set_config('ratelimit.now_override', (clock_timestamp() + shift)::text, true) $$;
EOF
)

# Fills the shmem store (shared by all databases) past its 2000 keys once
# every database has its keys: keys of zone tiny recover in an hour (never
# evicted during the run), those of tb_shmem_hist within a second.
FILL_SQL="SELECT count(*) FROM (SELECT rl_limit('tb_shmem_hist', 'fill' || g) FROM generate_series(1, 600) g) s;
SELECT count(*) FROM (SELECT rl_limit('tiny', 'fill' || g) FROM generate_series(1, 2400) g) s;"

# What a rolled-back statement must leave as it was: one digest.
DIGEST_SQL="SELECT concat_ws(' ',
  (SELECT count(*) || ' zones ' || md5(string_agg(z::text, ',' ORDER BY z::text)) FROM ratelimit.zone z),
  (SELECT count(*) || ' state rows ' || md5(coalesce(string_agg(s::text, ',' ORDER BY s::text), '')) FROM ratelimit.state s),
  (SELECT count(*) || ' history rows ' || md5(coalesce(string_agg(h::text, ',' ORDER BY h::text), '')) FROM ratelimit.history h))"
DECISIONS_SQL="SELECT coalesce(sum(allowed + refused), 0) FROM rl_counters"

PASSES=(catalog focus focus-shmem)
declare -A DB=([catalog]=rl_smith [focus]=rl_smith_focus [focus-shmem]=rl_smith_shmem)
declare -A OPTS=([catalog]="" [focus]=--exclude-catalog [focus-shmem]=--exclude-catalog)
declare -A COUNT=([catalog]=$(( (QUERIES + 1) / 2 )) [focus]=$QUERIES [focus-shmem]=$QUERIES)

# setup PSQL_ARGS...: one psql run of the setup, its output in setup.log.
setup_ok=yes
: >"$OUT/setup.log"
setup() { rl_psql "$@" >>"$OUT/setup.log" 2>&1 || setup_ok=no; }
for pass in "${PASSES[@]}"; do
	db=${DB[$pass]}
	setup -d postgres -c "CREATE DATABASE $db"
	setup -d "$db" -c "$BASE_SQL"
	if [ "$pass" != catalog ]; then
		setup -d "$db" -c "$FOCUS_SQL" -c "ALTER DATABASE $db SET search_path = smith_focus, pg_catalog, public"
	fi
	setup -d postgres -c "ALTER DATABASE $db SET statement_timeout = '5s'"
done
setup -d rl_smith -c "$FILL_SQL"
setup -d postgres -c "ALTER DATABASE rl_smith_shmem SET ratelimit.default_store = shmem" \
	-c "ALTER DATABASE rl_smith_shmem SET ratelimit.table_access = spi" \
	-c "ALTER DATABASE rl_smith_shmem SET ratelimit.shmem_full_policy = deny"
keys=$(rl_psql -d rl_smith -tA -c "SELECT count(*) FILTER (WHERE store = 'table') || ' on the table store, '
	|| count(*) FILTER (WHERE store = 'shmem') || ' on the shmem store' FROM rl_keys" 2>&1)
full=$(rl_psql -d rl_smith -tA -c "SELECT sum(\"full\") FROM rl_counters" 2>&1)
echo "# setup: 19 zones (5 algorithms, both stores) in each of 3 databases; rl_smith's keys: $keys; $full calls found the shmem store full"
[ "$setup_ok" = yes ] || sed 's/^/#   /' "$OUT/setup.log" | tail -20
rl_check "setup: databases, zones, tables, keys, a full shmem store" yes \
	"$([ "$setup_ok" = yes ] && [[ $full =~ ^[1-9][0-9]*$ ]] && echo yes || echo no)"


# log_part FROM TO: the server log's bytes FROM to TO.
log_part() { tail -c +"$(($1 + 1))" "$LOG" | head -c "$(($2 - $1))"; }

# report_crashes FROM TO DUMP ERRLOG PASS SEED: when the server log's bytes
# FROM to TO show a crash, prints "# " lines: the log's lines, and for
# each failed process (up to 3) the query it was running, its number in
# DUMP (the pass's generated queries) and how to run the pass up to it.
# A process that was running sqlsmith's BEGIN or ROLLBACK around a query
# (a crash at the end of a transaction) points to no generated query: then
# the query is the one sqlsmith lost its connection at (ERRLOG, its
# progress: one character a query, C for a lost connection).
CRASH_RE='terminated by signal| PANIC: |server process .* was terminated|TRAP:|stuck spinlock|terminating any other active server processes|exited with exit code [2-9]'
report_crashes() {
	local dump=$3 errlog=$4 label=$5 seed=$6 region qfile n lost next=0 shown=0
	region=$(log_part "$1" "$2")
	grep -qE "$CRASH_RE" <<<"$region" || return 0
	echo "# pass $label, seed $seed: the server log shows a crash:"
	grep -E "$CRASH_RE" <<<"$region" | head -10 | sed 's/^/#   /'
	read -ra lost <<<"$(grep -E '^[.eStC]+$' "$errlog" | tr -d '\n' | grep -bo C | awk -F: '{ print $1 + 1 }' | tr '\n' ' ')"
	[ ${#lost[@]} -eq 0 ] || echo "# sqlsmith lost its connection at query ${lost[*]:0:10}"
	# "Failed process was running: QUERY": the query goes on over the
	# following lines (the log starts each with a tab), up to the next
	# line that starts with a timestamp.
	while IFS= read -r qfile; do
		shown=$((shown + 1))
		# The log gives the first 1023 bytes of the query: the generated
		# query that starts so (the one sqlsmith lost its connection at, if
		# several do).
		n=$(Q=$(cat "$qfile") L=" ${lost[*]} " awk 'BEGIN { RS = ";\n"; q = ENVIRON["Q"]; lost = ENVIRON["L"] }
			q != "" && substr($0, 1, length(q)) == q { n = NR; if (index(lost, " " NR " ")) m = NR }
			END { print (m ? m : n) + 0 }' "$dump")
		if [ "$n" -gt 0 ]; then
			awk -v n="$n" 'BEGIN { RS = ";\n" } NR == n { print; exit }' "$dump" >"$qfile"
		else
			echo "# the failed process was running: $(head -c 200 "$qfile" | tr '\n\t' '  ')"
			if [ "$next" -lt ${#lost[@]} ]; then
				n=${lost[$next]} next=$((next + 1))
				awk -v n="$n" 'BEGIN { RS = ";\n" } NR == n { print; exit }' "$dump" >"$qfile"
				echo "#   not a generated query: sqlsmith's own BEGIN/ROLLBACK around query $n, which it lost its connection at"
			else
				echo "#   not a generated query, and sqlsmith lost no connection"
				continue
			fi
		fi
		cp "$qfile" "$OUT/crash-$label-seed$seed-query$n.sql"
		echo "# crashing query: number $n of pass $label, seed $seed (saved as $OUT/crash-$label-seed$seed-query$n.sql)"
		echo "#   reproduce: SQLSMITH_SEED=$base_seed SQLSMITH_QUERIES=$QUERIES bash test/fuzz/sqlsmith.sh, or on its setup (database ${DB[$label]}):"
		echo "#   sqlsmith --seed=$seed --max-queries=$n ${OPTS[$label]} --target='host=127.0.0.1 port=PORT dbname=${DB[$label]} user=postgres'"
		sed 's/^/#     /' "$qfile"
	done < <(awk -v dir="$OUT" -v label="$label" '
		/Failed process was running: / { if (f) close(f); f = dir "/failed-" label "-" (++k) ".sql"
		                                  sub(/^.*Failed process was running: /, ""); print > f; on = 1; next }
		/^[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9] / { on = 0 }
		on { sub(/^\t/, ""); print >> f }
		END { for (i = 1; i <= k && i <= 3; i++) print dir "/failed-" label "-" i ".sql" }' <<<"$region")
	[ "$shown" -gt 0 ] || echo "# (the log names no failed process)"
	rm -f "$OUT"/failed-"$label"-*.sql
}

total_queries=0 total_rl=0 total_decisions=0 per_pass=() pass_crash_lines=0
for base_seed in $SEEDS; do
	for i in "${!PASSES[@]}"; do
		pass=${PASSES[$i]} seed=$((base_seed + 1000 * i))
		db=${DB[$pass]} n=${COUNT[$pass]}
		dump=$OUT/queries-$pass-seed$seed.sql errlog=$OUT/sqlsmith-$pass-seed$seed.log
		failed_before=$failed
		before_digest=$(rl_psql -d "$db" -tA -c "$DIGEST_SQL" 2>&1)
		before_decisions=$(rl_psql -d "$db" -tA -c "$DECISIONS_SQL" 2>&1)
		log_from=$(stat -c %s "$LOG")
		t0=$(date +%s)
		# shellcheck disable=SC2086
		timeout -s INT -k 15 "$CAP" sqlsmith --seed="$seed" --max-queries="$n" ${OPTS[$pass]} \
			--verbose --dump-all-queries \
			--target="host=$PGHOST port=$PGPORT dbname=$db user=postgres" >"$dump" 2>"$errlog"
		status=$?
		elapsed=$(( $(date +%s) - t0 ))
		generated=$(awk 'BEGIN { RS = ";\n" } END { print NR }' "$dump")
		rl_calls=$(awk 'BEGIN { RS = ";\n" } /(^|[^a-z_])rl_[a-z_]+\(/ { n++ } END { print n + 0 }' "$dump")
		other_calls=$(awk 'BEGIN { RS = ";\n" } /(smith_focus|ratelimit)\.[a-z_]+\(/ { n++ } END { print n + 0 }' "$dump")
		ended="after $n queries"
		[ "$status" -eq 124 ] && ended="at the ${CAP} s cap"
		echo "# pass $pass (seed $seed, $db): $generated queries in ${elapsed} s (ended $ended); $rl_calls called an rl_ function, $other_calls a wrapper or ratelimit.* function"
		echo "#   rl_ functions called: $(grep -oE '(^|[^a-z_])rl_[a-z_]+\(' "$dump" | sed 's/^[^r]*//; s/($//' | sort | uniq -c | sort -rn | awk '{ printf "%s%s %d", sep, $2, $1; sep = ", " }')"
		if [ "$status" -ne 0 ] && [ "$status" -ne 124 ]; then
			echo "not ok - pass $pass, seed $seed: sqlsmith exited with status $status"; failed=$((failed + 1))
			tail -5 "$errlog" | sed 's/^/#   /'
		fi

		answering=$(rl_wait_answering)
		log_to=$(stat -c %s "$LOG")
		pass_crash_lines=$((pass_crash_lines + $(log_part "$log_from" "$log_to" | grep -cE "$CRASH_RE")))
		crashes=$(report_crashes "$log_from" "$log_to" "$dump" "$errlog" "$pass" "$seed")
		if [ -z "$crashes" ]; then
			echo "ok - pass $pass, seed $seed: no server crash"; passed=$((passed + 1))
		else
			echo "not ok - pass $pass, seed $seed: the server crashed"; failed=$((failed + 1))
			echo "$crashes"
			echo "# (a crash restart empties the table store's state, which is unlogged, and the shmem store: the checks below see that)"
		fi
		rl_check "pass $pass, seed $seed: the server answers SELECT 1 afterwards" yes "$answering"
		internal=$(log_part "$log_from" "$log_to" | grep -E '^[0-9-]+ [0-9:.]+ [A-Z]+ \[[0-9]+\] XX[0-9A-Z]{3} ERROR:' \
			| sed -E 's/^.*\] (XX[0-9A-Z]{3}) ERROR: +/\1 /' | sort | uniq -c | sort -rn | head -5)
		[ -z "$internal" ] || { echo "#   internal errors (not failures):"; sed 's/^/#   /' <<<"$internal"; }

		after_decisions=$(rl_psql -d "$db" -tA -c "$DECISIONS_SQL" 2>&1)
		decisions=0
		if [[ $before_decisions =~ ^[0-9]+$ && $after_decisions =~ ^[0-9]+$ ]] && [ "$after_decisions" -gt "$before_decisions" ]; then
			decisions=$((after_decisions - before_decisions))
		fi
		rl_check "pass $pass, seed $seed: zones, table-store state and history as before (all rolled back)" \
			"$before_digest" "$(rl_psql -d "$db" -tA -c "$DIGEST_SQL" 2>&1)"
		zones=$(rl_psql -d "$db" -tA -c "SELECT count(*) FROM rl_zones" 2>&1)
		answered=$(rl_psql -d "$db" -tA -c "SET ratelimit.shmem_full_policy = deny" \
			-c "SELECT count(*) FROM rl_zones z, rl_limit(z.zone, 'smith-check', 0) r WHERE r.allowed IS NOT NULL" 2>&1)
		rl_check "pass $pass, seed $seed: every zone still answers rl_limit" "$zones" "$answered"
		rl_check "pass $pass, seed $seed: rl_keys, rl_counters and rl_gc still answer" ok \
			"$(rl_psql -d "$db" -tA -c "SELECT count(*) FROM rl_keys" -c "SELECT count(*) FROM rl_counters" \
				-c "SELECT rl_gc()" >/dev/null 2>&1 && echo ok || echo failed)"
		echo "#   the extension decided $decisions calls during the pass (rl_counters)"
		if [ "${SQLSMITH_KEEP_QUERIES:-0}" = 1 ] || [ "$failed" -gt "$failed_before" ]; then gzip -f "$dump"; else rm -f "$dump"; fi
		total_queries=$((total_queries + generated)) total_rl=$((total_rl + rl_calls))
		total_decisions=$((total_decisions + decisions))
		per_pass+=("$pass/$seed $rl_calls of $generated")
	done
done

per_pass_list=$(printf '%s, ' "${per_pass[@]}")
rl_check "generated queries that called an rl_ function: $total_rl of $total_queries (${per_pass_list%, }) > 0" yes \
	"$([ "$total_rl" -gt 0 ] && echo yes || echo no)"
echo "# the extension decided $total_decisions calls during the fuzz (most generated calls sit where they are never evaluated, or get NULL arguments)"
# Crashes outside the passes: during the setup or the checks after a pass.
all_crash_lines=$(grep -cE "$CRASH_RE" "$LOG")
rl_check "no server crash during the setup or the checks after the passes (crash lines in the whole log vs in the passes)" \
	"$pass_crash_lines" "$all_crash_lines"
[ "$all_crash_lines" -eq "$pass_crash_lines" ] || grep -E "$CRASH_RE" "$LOG" | head -10 | sed 's/^/#   /'
rl_cluster_stop
cp "$LOG" "$OUT/server.log"
echo "# $(( $(date +%s) - started )) s; queries and logs in $OUT"
echo "sqlsmith: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
