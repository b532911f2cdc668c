#!/usr/bin/env bash
# Setup-time errors of rl_zone_set: a zone that every request would fail
# on is refused when it is defined, not at its first request.  Starts
# clusters of its own (scripts/lib.sh) and prints TAP ("ok N - ...",
# "not ok N - ...", then "1..N"); exits non-zero when a check failed.
#   zsetnoshm   shared_preload_libraries = 'pg_cron' (no ratelimit),
#               cron.database_name = 'postgres':
#               (a) store => 'shmem' raises 55000 "the shmem store needs
#               ratelimit in shared_preload_libraries" with its hint, for a
#               new zone (no row is created) and for a table zone moved
#               with reset => true (the zone and its keys stay as they
#               were); table zones work
#               (b) refill => 'cron' in a database that is not
#               cron.database_name: 55000 "pg_cron runs its jobs from
#               database ..." with its hint; in the cron database before
#               CREATE EXTENSION pg_cron: 55000 "pg_cron is not installed
#               in database ..."; after it, the cron zone is created
#   zsetnocron  shared_preload_libraries = 'ratelimit' (no pg_cron):
#               (c) refill => 'cron' raises 55000 "pg_cron is not loaded"
#               with its hint, for a new zone (no row) and for an inline
#               zone made cron with reset => true (unchanged, keys kept);
#               a cron zone that exists (written directly, as a restored
#               dump does) is still changed without the check; shmem zones
#               work
#   (d) no server process was terminated by a signal.
set -uo pipefail
source "$(dirname "$0")/../../scripts/lib.sh"

trap 'rl_clusters_stop zsetnoshm zsetnocron' EXIT

DB=rl_zones_setup
CLOCK='2026-01-01 00:00:00+00'
n=0 failed=0
check() { rl_check_numbered "$@"; }
# q SQL [DB]: one statement at $CLOCK; its output, or psql's error.
q() { rl_psql -d "${2:-$DB}" -tA -c "SET ratelimit.now_override = '$CLOCK'" -c "$1" 2>&1; }
# err SQL [DB]: "SQLSTATE hint" of the statement's error, "ok" if none.
err() { q "SELECT err_of(\$st\$$1\$st\$)" "${2:-$DB}"; }
has() { grep -qF -- "$1" <<<"$2" && echo yes || echo no; }	# has TEXT OUTPUT
# new_db NAME: a fresh database with ratelimit and err_of().
new_db() {
	rl_psql -d postgres -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $1" \
		-c "CREATE DATABASE $1" >/dev/null
	rl_psql -d "$1" -c 'CREATE EXTENSION ratelimit' -c "$RL_ERR_OF_SQL" >/dev/null
}
# zone_row ZONE [DB]: its store, refill and rate, or nothing.
zone_row() { q "SELECT store || '|' || refill || '|' || rate FROM ratelimit.zone WHERE zone = '$1'" "${2:-$DB}"; }
no_signal() {
	grep -qE 'terminated by signal|was terminated' "$RL_CLUSTER_DIR/server.log" && echo yes || echo no
}

SHMEM_HINT="Add ratelimit to shared_preload_libraries in postgresql.conf (shared_preload_libraries = 'ratelimit') and restart the server."
CRON_LOAD_HINT="Add pg_cron to shared_preload_libraries in postgresql.conf, restart the server, and run CREATE EXTENSION pg_cron."

###########################################################################
echo "# zsetnoshm: pg_cron preloaded, ratelimit not"
RL_PRELOAD='pg_cron' rl_cluster_start zsetnoshm "fsync = off"
check "(a) shared_preload_libraries is pg_cron alone" pg_cron \
	"$(rl_psql -d postgres -tA -c 'SHOW shared_preload_libraries' 2>&1)"
new_db $DB
check "(a) CREATE EXTENSION ratelimit works without preloading it" 1 \
	"$(q "SELECT count(*) FROM pg_extension WHERE extname = 'ratelimit'")"
check "(a) a new shmem zone: 55000 with the hint" "55000 $SHMEM_HINT" \
	"$(err "SELECT rl_zone_set('z_shm', 'token_bucket', 10, '1 minute', store => 'shmem')")"
check "(a) ... the message" yes \
	"$(has 'ERROR:  the shmem store needs ratelimit in shared_preload_libraries' \
		"$(q "SELECT rl_zone_set('z_shm', 'token_bucket', 10, '1 minute', store => 'shmem')")")"
check "(a) ... with every other option too: 55000" "55000 $SHMEM_HINT" \
	"$(err "SELECT rl_zone_set('z_shm', 'gcra', 2.5, '1 second', burst => 5, store => 'shmem', history => false, shadow => true)")"
check "(a) ... no zone row was created" 0 "$(q "SELECT count(*) FROM ratelimit.zone")"
check "(a) ... and no id was used up (the sequence was never called)" f \
	"$(q "SELECT is_called FROM ratelimit.zone_id_seq")"
check "(a) a table zone works" 7 \
	"$(q "SELECT rl_zone_set('z_tab', 'token_bucket', 10, '1 minute')" >/dev/null
	   q "SELECT remaining FROM rl_limit('z_tab', 'k', 3)")"
check "(a) the table zone moved to shmem with reset => true: 55000 with the hint" "55000 $SHMEM_HINT" \
	"$(err "SELECT rl_zone_set('z_tab', store => 'shmem', reset => true)")"
check "(a) ... without reset => true: 55000 too" 55000 \
	"$(err "SELECT rl_zone_set('z_tab', store => 'shmem')" | cut -d' ' -f1)"
check "(a) ... the zone is as it was" "table|inline|10" "$(zone_row z_tab)"
check "(a) ... its key kept its state (7 left), nothing retired" "7|0" \
	"$(q "SELECT (rl_peek('z_tab', 'k', 0)).remaining || '|' || (SELECT count(*) FROM ratelimit.retired_zone_id)")"

# (b) pg_cron is preloaded and runs its jobs from database postgres.
check "(b) cron.database_name is postgres" postgres \
	"$(rl_psql -d postgres -tA -c 'SHOW cron.database_name' 2>&1)"
check "(b) a new cron zone in another database: 55000 with the hint naming both databases" \
	"55000 Use ratelimit in database postgres, or set cron.database_name = '$DB' and restart the server." \
	"$(err "SELECT rl_zone_set('z_cron', 'token_bucket', 10, '1 minute', refill => 'cron')")"
check "(b) ... the message" yes \
	"$(has "ERROR:  pg_cron runs its jobs from database \"postgres\", not \"$DB\"" \
		"$(q "SELECT rl_zone_set('z_cron', 'token_bucket', 10, '1 minute', refill => 'cron')")")"
check "(b) an inline zone made cron (reset => true) there: 55000, the zone unchanged" \
	"55000|table|inline|10" \
	"$(err "SELECT rl_zone_set('z_tab', refill => 'cron', reset => true)" | cut -d' ' -f1)|$(zone_row z_tab)"
check "(b) no cron zone was created" 0 "$(q "SELECT count(*) FROM ratelimit.zone WHERE refill = 'cron'")"
# The cron database itself, before pg_cron is installed there.
rl_psql -d postgres -c 'CREATE EXTENSION ratelimit' -c "$RL_ERR_OF_SQL" >/dev/null
check "(b) in the cron database without CREATE EXTENSION pg_cron: 55000, the hint says to run it" \
	"55000 Run CREATE EXTENSION pg_cron." \
	"$(err "SELECT rl_zone_set('z_cron', 'token_bucket', 10, '1 minute', refill => 'cron')" postgres)"
check "(b) ... the message" yes \
	"$(has 'ERROR:  pg_cron is not installed in database "postgres"' \
		"$(q "SELECT rl_zone_set('z_cron', 'token_bucket', 10, '1 minute', refill => 'cron')" postgres)")"
check "(b) ... no zone row" 0 "$(q "SELECT count(*) FROM ratelimit.zone" postgres)"
rl_psql -d postgres -c 'CREATE EXTENSION pg_cron' >/dev/null 2>&1
check "(b) after CREATE EXTENSION pg_cron the cron zone is created" "table|cron|10" \
	"$(q "SELECT rl_zone_set('z_cron', 'token_bucket', 10, '1 minute', refill => 'cron')" postgres >/dev/null
	   zone_row z_cron postgres)"
check "(b) ... and takes calls" 9 "$(q "SELECT remaining FROM rl_limit('z_cron', 'k')" postgres)"
rl_psql -d postgres -c 'DROP EXTENSION ratelimit' -c 'DROP EXTENSION pg_cron' >/dev/null 2>&1
check "(d) zsetnoshm: no server process terminated by a signal" no "$(no_signal)"
rl_cluster_stop

###########################################################################
echo "# zsetnocron: ratelimit preloaded, pg_cron not"
RL_PRELOAD='ratelimit' rl_cluster_start zsetnocron "fsync = off"
check "(c) shared_preload_libraries is ratelimit alone" ratelimit \
	"$(rl_psql -d postgres -tA -c 'SHOW shared_preload_libraries' 2>&1)"
new_db $DB
check "(c) a new cron zone: 55000, the hint says to preload pg_cron" "55000 $CRON_LOAD_HINT" \
	"$(err "SELECT rl_zone_set('z_cron', 'token_bucket', 10, '1 minute', refill => 'cron')")"
check "(c) ... the message" yes \
	"$(has 'ERROR:  pg_cron is not loaded' \
		"$(q "SELECT rl_zone_set('z_cron', 'token_bucket', 10, '1 minute', refill => 'cron')")")"
check "(c) ... with a burst and history too: 55000" "55000 $CRON_LOAD_HINT" \
	"$(err "SELECT rl_zone_set('z_cron', 'token_bucket', 10, '1 minute', burst => 20, history => true, refill => 'cron')")"
check "(c) ... no zone row was created" 0 "$(q "SELECT count(*) FROM ratelimit.zone")"
check "(c) the shmem store works here" 9 \
	"$(q "SELECT rl_zone_set('z_shm', 'token_bucket', 10, '1 minute', store => 'shmem')" >/dev/null
	   q "SELECT remaining FROM rl_limit('z_shm', 'k')")"
q "SELECT rl_zone_set('z_tab', 'token_bucket', 10, '1 minute')" >/dev/null
q "SELECT rl_limit('z_tab', 'k', 4)" >/dev/null
check "(c) an inline zone made cron with reset => true: 55000 with the hint" "55000 $CRON_LOAD_HINT" \
	"$(err "SELECT rl_zone_set('z_tab', refill => 'cron', reset => true)")"
check "(c) ... the zone is as it was, its key kept its state (6 left), nothing retired" "table|inline|10|6|0" \
	"$(zone_row z_tab)|$(q "SELECT (rl_peek('z_tab', 'k', 0)).remaining || '|' || (SELECT count(*) FROM ratelimit.retired_zone_id)")"
# A cron zone from before pg_cron was unloaded (or a restored dump): the
# zone table holds it as this INSERT does.  Only a zone that becomes cron
# is checked: this one can still be changed, and calls on it work.
q "INSERT INTO ratelimit.zone (zone, algorithm, rate, period, refill) VALUES ('z_old_cron', 'token_bucket', 10, '1 minute', 'cron')" >/dev/null
q "SELECT rl_limit('z_old_cron', 'k', 3)" >/dev/null
check "(c) an existing cron zone's rate is changed without the check" ok \
	"$(err "SELECT rl_zone_set('z_old_cron', rate => 20)")"
check "(c) ... still cron, rate 20, its key kept its 7 tokens" "table|cron|20|7" \
	"$(zone_row z_old_cron)|$(q "SELECT remaining FROM rl_peek('z_old_cron', 'k', 0)")"
check "(c) ... reset => true alone (still cron) is accepted too, and starts the key afresh" "ok|20" \
	"$(err "SELECT rl_zone_set('z_old_cron', reset => true)")|$(q "SELECT remaining FROM rl_peek('z_old_cron', 'k', 0)")"
check "(d) zsetnocron: no server process terminated by a signal" no "$(no_signal)"
rl_cluster_stop

echo "1..$n"
echo "# zones (setup errors): $((n - failed)) passed, $failed failed"
[ "$failed" -eq 0 ]
