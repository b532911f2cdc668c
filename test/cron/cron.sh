#!/usr/bin/env bash
# Integration test of the pg_cron refill mode with a real pg_cron:
# Debian's postgresql-NN-cron, 1.4 on PostgreSQL 15 (minute schedules only),
# 1.6 on 17 and 18 ('N seconds' schedules, run by background workers).
# Expected schedules and ticks follow the version.  Starts clusters of its
# own (scripts/lib.sh) and prints "ok"/"not ok" lines:
#   cronint     cron.database_name = 'rl_cron' (a dedicated database)
#               (f) errors that leave nothing half-created: pg_cron not yet
#               installed in the cron database, a missing role, ratelimit in
#               another database than the cron one;
#               (a) rl_cron_enable schedules one job per zone (jobname
#               ratelimit_refill:<zone id>, schedule, command, database,
#               username), re-enabling keeps one, a long zone name, a zone
#               named md5:<md5 of it> (once the long zone's job name), a
#               zone name with a quote;
#               (b) the job's command, run as the run_as role, refills
#               exactly (rate 7 per 3 minutes, burst 10: 2 1/3 a tick), and
#               at most once a tick;
#               (c) the run_as role, granted EXECUTE on rl_cron_refill
#               alone, can do nothing else (42501);
#               (d) the scheduler itself runs the job and the tokens come
#               back (real clock, rate 600 a minute: on 1.4 one minute's
#               tick fills a drained key; on 1.5+ a tick of 1 s brings
#               exactly 10 tokens, within seconds);
#               (e) rl_cron_disable, rl_zone_drop, refill => 'inline' and
#               DROP EXTENSION remove jobs; failed drops leave them
#   cronintnopre shared_preload_libraries = 'ratelimit' (no pg_cron):
#               (f) rl_cron_enable raises 55000 with a hint; calls and
#               rl_cron_refill still work
#   (h) the extension in a schema whose name needs quoting: grants, the
#               job's command and DROP EXTENSION work
#   (g) no server process was terminated by a signal in either cluster.
set -uo pipefail
source "$(dirname "$0")/../../scripts/lib.sh"

trap 'rl_clusters_stop cronint cronintnopre' EXIT

CRONDB=rl_cron
DB=$CRONDB
# The pg_cron this PostgreSQL has, and whether it takes 'N seconds'.
CRON_VERSION=$(sed -n "s/^default_version = '\(.*\)'/\1/p" \
	"$("$RL_PG_BIN/pg_config" --sharedir)/extension/pg_cron.control")
case $CRON_VERSION in 1.[0-4]|1.[0-4][.-]*) CRON_SECONDS=no ;; *) CRON_SECONDS=yes ;; esac
# plan_of RATE PERIOD_SECONDS: "schedule|tick" as rl_cron_enable picks them
# (ratelimit.cron_plan): a token's time in whole seconds (at least 1) on
# pg_cron 1.5+ when it is under a minute, else every minute.
plan_of() {
	local rate=$1 period=$2 secs
	if [ "$CRON_SECONDS" = yes ] && [ "$period" -lt $((60 * rate)) ]; then
		secs=$((period / rate)); [ "$secs" -ge 1 ] || secs=1
		printf '%s seconds|00:00:%02d\n' "$secs" "$secs"
	else
		echo '* * * * *|00:01:00'
	fi
}
schedule_of() { plan_of "$@" | cut -d'|' -f1; }
tick_of() { plan_of "$@" | cut -d'|' -f2; }
ROLE=ratelimit_refill
CLOCK='2026-01-01 00:00:00+00'
# q SQL: one statement on $DB as postgres at $CLOCK; output or error.
q() { rl_psql -d "$DB" -tA -c "SET ratelimit.now_override = '$CLOCK'" -c "$1" 2>&1; }
# qr SQL: one statement on $DB as the run_as role (as pg_cron connects).
qr() { rl_psql -U "$ROLE" -d "$DB" -tA -c "$1" 2>&1; }
err() { q "SELECT err_of(\$st\$$1\$st\$)"; }		# err SQL: as postgres
err_r() { qr "SELECT err_of(\$st\$$1\$st\$)"; }	# err_r SQL: as the run_as role
new_db() {
	rl_psql -d postgres -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $1" -c "CREATE DATABASE $1" >/dev/null
	rl_psql -d "$1" -c 'CREATE EXTENSION ratelimit' -c "$RL_ERR_OF_SQL" >/dev/null
}
has() { grep -qF -- "$1" <<<"$2" && echo yes || echo no; }	# has TEXT OUTPUT
# What the refill role holds in $DB: schema ratelimit usage, SELECT on the
# zone table, UPDATE of some state column, EXECUTE of rl_cron_refill (only
# the last is granted).
privs() {
	q "SELECT concat_ws(',', has_schema_privilege('$ROLE', 'ratelimit', 'USAGE'),
	                         has_table_privilege('$ROLE', 'ratelimit.zone', 'SELECT'),
	                         has_any_column_privilege('$ROLE', 'ratelimit.state', 'UPDATE'),
	                         has_function_privilege('$ROLE', 'public.rl_cron_refill(text)', 'EXECUTE'))"
}
# A zone's id, and the names of the jobs of every id it has had (a drop
# or a reset retires an id): ratelimit_refill:<zone id>.
zid() { q "SELECT zone_id FROM ratelimit.zone WHERE zone = '$1'"; }
job_names_of() {
	echo "(SELECT 'ratelimit_refill:' || zone_id FROM ratelimit.zone WHERE zone = '$1'
	       UNION ALL SELECT 'ratelimit_refill:' || zone_id FROM ratelimit.retired_zone_id WHERE zone = '$1')"
}
# Jobs of a zone in the cron database: how many, and the one row.
njobs() { DB=$CRONDB q "SELECT count(*) FROM cron.job WHERE jobname IN $(job_names_of "$1")"; }
job_row() {
	DB=$CRONDB q "SELECT jobid || '|' || jobname || '|' || schedule || '|' || command || '|' || database || '|' || username || '|' || active
	              FROM cron.job WHERE jobname IN $(job_names_of "$1")"
}
job_id() { DB=$CRONDB q "SELECT jobid FROM cron.job WHERE jobname IN $(job_names_of "$1")"; }
# rl_cron_refill meters the role's runs (one a tick): as if a tick had
# passed, the next run is due at once.
tick_passes() { q "DELETE FROM ratelimit.cron_refill_due" >/dev/null; }
all_rl_jobs() { DB=$CRONDB q "SELECT coalesce(string_agg(jobid::text, ',' ORDER BY jobid), '') FROM cron.job WHERE jobname ~ '^ratelimit_refill:[0-9]+\$'"; }
tick() { q "SELECT coalesce(refill_tick::text, 'null') FROM ratelimit.zone WHERE zone = '$1'"; }
# st ZONE KEY: tokens|counter|refill_pending of the key's state row.
st() {
	q "SELECT coalesce((SELECT s.tokens || '|' || s.counter || '|' || coalesce(s.refill_pending::text, 'null')
	                    FROM ratelimit.state s JOIN ratelimit.zone z USING (zone_id)
	                    WHERE z.zone = '$1' AND s.key = '$2' AND s.part = 0), 'no row')"
}
remaining() { q "SELECT remaining FROM rl_limit('$1', '$2', ${3:-0})"; }
launcher_db() {		# the database pg_cron's launcher is connected to
	rl_psql -d postgres -tA -c "SELECT coalesce(string_agg(coalesce(datname, '-'), ','), 'none')
	                           FROM pg_stat_activity WHERE backend_type = 'pg_cron launcher'" 2>&1
}
wait_launcher() {	# wait_launcher SECONDS: until it serves the cron database
	local i
	for i in $(seq 1 "$1"); do
		[ "$(launcher_db)" = "$CRONDB" ] && break
		sleep 1
	done
	launcher_db
}

###########################################################################
echo "# cronint: pg_cron $CRON_VERSION (seconds schedules: $CRON_SECONDS), cron.database_name = '$CRONDB'"
# From 1.5, jobs run in background workers: no connection, no pg_hba entry.
worker_settings=()
[ "$CRON_SECONDS" = no ] || worker_settings=("cron.use_background_workers = on" "max_worker_processes = 32")
rl_cluster_start cronint "fsync = off" "cron.database_name = '$CRONDB'" "${worker_settings[@]}"
rl_check "cron.database_name is $CRONDB" "$CRONDB" "$(rl_psql -d postgres -tA -c 'SHOW cron.database_name' 2>&1)"
rl_check "pg_cron's available version is the package's ($CRON_VERSION)" "$CRON_VERSION" \
	"$(rl_psql -d postgres -tA -c "SELECT default_version FROM pg_available_extensions WHERE name = 'pg_cron'" 2>&1)"
# The database does not exist yet at the start: does the launcher find it
# once it is created (it restarts after a failure), or only after a restart?
rl_psql -d postgres -c "CREATE DATABASE $CRONDB" >/dev/null
launcher=$(wait_launcher 15)
if [ "$launcher" = "$CRONDB" ]; then
	echo "# pg_cron's launcher picked up $CRONDB without a restart"
else
	echo "# pg_cron's launcher did not pick up $CRONDB (it shows: $launcher); restarting"
	rl_cluster_ctl restart -m fast -w -l "$RL_CLUSTER_DIR/server.log" >/dev/null
	launcher=$(wait_launcher 15)
fi
rl_check "pg_cron's launcher is connected to $CRONDB" "$CRONDB" "$launcher"
rl_psql -d "$CRONDB" -c 'CREATE EXTENSION ratelimit' -c "$RL_ERR_OF_SQL" >/dev/null
rl_psql -d postgres -c "CREATE ROLE $ROLE LOGIN" >/dev/null

# (f) pg_cron preloaded but not installed in the cron database yet.
rl_check "(f) pg_cron not installed in $CRONDB yet" 0 "$(q "SELECT count(*) FROM pg_extension WHERE extname = 'pg_cron'")"
rl_check "(f) rl_zone_set(refill => 'cron') before CREATE EXTENSION pg_cron: 55000 at once, with the hint" \
	"55000 Run CREATE EXTENSION pg_cron." "$(err "SELECT rl_zone_set('zf', 'token_bucket', 10, '1 minute', refill => 'cron')")"
rl_check "(f) ... and defines no zone" 0 "$(q "SELECT count(*) FROM ratelimit.zone WHERE zone = 'zf'")"
# A cron zone from before (or from a restored dump): the zone table holds
# it as this INSERT does, and rl_cron_enable says what is missing.
q "INSERT INTO ratelimit.zone (zone, algorithm, rate, period, refill) VALUES ('zf', 'token_bucket', 10, '1 minute', 'cron')" >/dev/null
rl_check "(f) rl_cron_enable before CREATE EXTENSION pg_cron: 55000 with the hint" \
	"55000 Run CREATE EXTENSION pg_cron." "$(err "SELECT rl_cron_enable('zf')")"
rl_check "(f) the error message names the database" yes \
	"$(has "ERROR:  pg_cron is not installed in database \"$CRONDB\"" "$(q "SELECT rl_cron_enable('zf')")")"
rl_check "(f) ... refill_tick unchanged (NULL)" null "$(tick zf)"
rl_check "(f) ... nothing granted to $ROLE" "f,f,f,f" "$(privs)"

rl_psql -d "$CRONDB" -c 'CREATE EXTENSION pg_cron' >/dev/null
rl_check "(a) CREATE EXTENSION pg_cron in $CRONDB" "$CRON_VERSION" "$(q "SELECT extversion FROM pg_extension WHERE extname = 'pg_cron'")"

# (f) a role that does not exist.
rl_check "(f) run_as a missing role: 42704 with the hint" \
	"42704 CREATE ROLE no_such_role LOGIN; rl_cron_enable grants it only what the refill needs." \
	"$(err "SELECT rl_cron_enable('zf', 'no_such_role')")"
rl_check "(f) ... the message" yes "$(has 'ERROR:  role "no_such_role" does not exist' "$(q "SELECT rl_cron_enable('zf', 'no_such_role')")")"
rl_check "(f) ... no job" 0 "$(njobs zf)"
rl_check "(f) ... no job at all in cron.job" 0 "$(q "SELECT count(*) FROM cron.job")"
rl_check "(f) ... refill_tick unchanged (NULL)" null "$(tick zf)"
rl_check "(f) ... nothing granted to $ROLE" "f,f,f,f" "$(privs)"
# The default role (ratelimit_refill) missing too: its hint names it.
rl_psql -d postgres -c "ALTER ROLE $ROLE RENAME TO ${ROLE}_away" >/dev/null
rl_check "(f) the default run_as missing: 42704 naming $ROLE" \
	"42704 CREATE ROLE $ROLE LOGIN; rl_cron_enable grants it only what the refill needs." \
	"$(err "SELECT rl_cron_enable('zf')")"
rl_psql -d postgres -c "ALTER ROLE ${ROLE}_away RENAME TO $ROLE" >/dev/null
# A zone that is not refilled by cron, and one that does not exist.
q "SELECT rl_zone_set('zi', 'token_bucket', 10, '1 minute')" >/dev/null
rl_check "(f) rl_cron_enable on an inline zone: 55000" 55000 "$(err "SELECT rl_cron_enable('zi')" | cut -d' ' -f1)"
rl_check "(f) rl_cron_enable on a missing zone: 42704" 42704 "$(err "SELECT rl_cron_enable('nope')" | cut -d' ' -f1)"
rl_check "(f) ... still no job at all, nothing granted" "0 f,f,f,f" "$(q "SELECT count(*) FROM cron.job") $(privs)"

# (f) ratelimit in another database than the cron one.  pg_cron itself
# refuses to be installed there.
new_db rl_other
rl_check "(f) CREATE EXTENSION pg_cron outside $CRONDB fails" yes \
	"$(has "ERROR:  can only create extension in database $CRONDB" "$(DB=rl_other q "CREATE EXTENSION pg_cron")")"
rl_check "(f) rl_zone_set(refill => 'cron') in another database: 55000 at once, the hint names $CRONDB" \
	"55000 Use ratelimit in database $CRONDB, or set cron.database_name = 'rl_other' and restart the server." \
	"$(DB=rl_other err "SELECT rl_zone_set('zo', 'token_bucket', 10, '1 minute', refill => 'cron')")"
rl_check "(f) ... and defines no zone" 0 "$(DB=rl_other q "SELECT count(*) FROM ratelimit.zone WHERE zone = 'zo'")"
# A cron zone that reached this database another way (a restored dump
# fills the zone table as this does): rl_cron_enable still says why not.
DB=rl_other q "INSERT INTO ratelimit.zone (zone, algorithm, rate, period, refill) VALUES ('zo', 'token_bucket', 10, '1 minute', 'cron')" >/dev/null
rl_check "(f) rl_cron_enable from another database: 55000, the hint names $CRONDB" \
	"55000 Use ratelimit in database $CRONDB, or set cron.database_name = 'rl_other' and restart the server." \
	"$(DB=rl_other err "SELECT rl_cron_enable('zo')")"
rl_check "(f) ... the message" yes \
	"$(has "ERROR:  pg_cron runs its jobs from database \"$CRONDB\", not \"rl_other\"" "$(DB=rl_other q "SELECT rl_cron_enable('zo')")")"
rl_check "(f) ... no job" 0 "$(njobs zo)"
rl_check "(f) ... refill_tick unchanged (NULL)" null "$(DB=rl_other tick zo)"
rl_check "(f) ... nothing granted to $ROLE there" "f,f,f,f" "$(DB=rl_other privs)"
rl_check "(f) ... calls on the zone work (take 4 of 10)" 6 "$(DB=rl_other remaining zo k 4)"
rl_check "(f) ... rl_cron_disable there: false" f "$(DB=rl_other q "SELECT rl_cron_disable('zo')")"
rl_check "(f) ... rl_zone_drop there works" "" "$(DB=rl_other q "SELECT rl_zone_drop('zo')")"

###########################################################################
# (a) Scheduling.
q "SELECT rl_zone_set('za', 'token_bucket', 10, '1 minute', refill => 'cron'),
          rl_zone_set('za2', 'token_bucket', 5, '1 hour', burst => 8, refill => 'cron')" >/dev/null
rl_check "(a) a cron zone has no refill_tick before rl_cron_enable" null "$(tick za)"
jid=$(q "SELECT rl_cron_enable('za')")
rl_check "(a) rl_cron_enable returns a job id" yes "$([[ $jid =~ ^[0-9]+$ ]] && echo yes || echo "no: $jid")"
rl_check "(a) cron.job has exactly one row for the zone" 1 "$(njobs za)"
rl_check "(a) the row: id, jobname, schedule, command, database, username, active" \
	"$jid|ratelimit_refill:$(zid za)|$(schedule_of 10 60)|SELECT public.rl_cron_refill('za')|$CRONDB|$ROLE|true" "$(job_row za)"
rl_check "(a) refill_tick is the schedule's ($(tick_of 10 60))" "$(tick_of 10 60)" "$(tick za)"
rl_check "(a) rl_zones shows refill and refill_tick" "cron|$(tick_of 10 60)" "$(q "SELECT refill || '|' || refill_tick FROM rl_zones WHERE zone = 'za'")"
rl_check "(a) $ROLE was granted what the refill needs: EXECUTE on rl_cron_refill alone" "f,f,f,t" "$(privs)"
rl_check "(a) ... no privilege on any column of any table of the extension" 0 \
	"$(q "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace, pg_attribute a
	      WHERE n.nspname = 'ratelimit' AND a.attrelid = c.oid AND a.attnum > 0 AND c.relkind IN ('r', 'v')
	        AND has_column_privilege('$ROLE', c.oid, a.attnum, 'SELECT, INSERT, UPDATE, REFERENCES')")"
jid2=$(q "SELECT rl_cron_enable('za')")
rl_check "(a) enabling again: still exactly one job" 1 "$(njobs za)"
rl_check "(a) ... and it is the id returned" "$jid2" "$(job_id za)"
rl_check "(a) ... with the same schedule, command, database and username" \
	"$jid2|ratelimit_refill:$(zid za)|$(schedule_of 10 60)|SELECT public.rl_cron_refill('za')|$CRONDB|$ROLE|true" "$(job_row za)"
jidb=$(q "SELECT rl_cron_enable('za2')")
rl_check "(a) a second zone gets its own job" "1|ratelimit_refill:$(zid za2)|$(schedule_of 5 3600)|SELECT public.rl_cron_refill('za2')|$CRONDB|$ROLE" \
	"$(njobs za2)|$(job_row za2 | cut -d'|' -f2-6)"
rl_check "(a) ... another id than the first zone's" yes "$([ "$jidb" != "$jid2" ] && [ -n "$jidb" ] && echo yes || echo no)"
rl_check "(a) ... the first zone's job is untouched" "$jid2" "$(job_id za)"
rl_check "(a) two ratelimit jobs in all" 2 "$(q "SELECT count(*) FROM cron.job WHERE jobname LIKE 'ratelimit\_refill:%'")"
# Altering the zone without changing its refill mode keeps its job.
q "SELECT rl_zone_set('za2', 'token_bucket', 6, '1 hour', burst => 8, refill => 'cron')" >/dev/null
rl_check "(a) a new rate for a cron zone keeps its job and tick" "$jidb $(tick_of 6 3600)" "$(job_id za2) $(tick za2)"
# A zone name with a quote: the command quotes it.
q "SELECT rl_zone_set('o''q', 'token_bucket', 10, '1 minute', refill => 'cron')" >/dev/null
q "SELECT rl_cron_enable('o''q')" >/dev/null
rl_check "(a) a zone name with a quote: the command quotes it" "SELECT public.rl_cron_refill('o''q')" \
	"$(q "SELECT command FROM cron.job WHERE jobname IN $(job_names_of "o''q")")"
rl_check "(a) ... and rl_cron_disable removes its job" "t 0" \
	"$(q "SELECT rl_cron_disable('o''q')") $(njobs "o''q")"
# Long zone names (a zone name may have 128 bytes; cron.job.jobname is of
# type name: 63 bytes).  Two zones whose names share their first 85 bytes.
LONG_A="long_zone_$(printf 'x%.0s' $(seq 1 75))_a" LONG_B="long_zone_$(printf 'x%.0s' $(seq 1 75))_b"
cmd_of() { echo "\$c\$SELECT public.rl_cron_refill('$1')\$c\$"; }
njobs_cmd() { DB=$CRONDB q "SELECT count(*) FROM cron.job WHERE command = $(cmd_of "$1")"; }
q "SELECT rl_zone_set('$LONG_A', 'token_bucket', 10, '1 minute', refill => 'cron'),
          rl_zone_set('$LONG_B', 'token_bucket', 10, '1 minute', refill => 'cron')" >/dev/null
rl_check "(a) a zone with a ${#LONG_A}-byte name: rl_cron_enable works, one job refills it" "ok 1" \
	"$(err "SELECT rl_cron_enable('$LONG_A')") $(njobs_cmd "$LONG_A")"
rl_check "(a) ... enabling it again: no error, still one job" "ok 1" \
	"$(err "SELECT rl_cron_enable('$LONG_A')") $(njobs_cmd "$LONG_A")"
rl_check "(a) ... a zone with the same first 85 bytes gets a job of its own (and the first keeps its)" "ok 1 1" \
	"$(err "SELECT rl_cron_enable('$LONG_B')") $(njobs_cmd "$LONG_B") $(njobs_cmd "$LONG_A")"
rl_check "(a) ... rl_cron_disable of the second: true, its job removed" "t 0" \
	"$(q "SELECT rl_cron_disable('$LONG_B')") $(njobs_cmd "$LONG_B")"
# Job names by zone name named a long zone's job ratelimit_refill:md5:<md5>,
# the name of zone md5:<md5>'s job too: enabling that zone unscheduled the
# long zone's job.  By zone id, no name can forge another zone's.
FORGED="md5:$(printf '%s' "$LONG_A" | md5sum | cut -d' ' -f1)"
q "SELECT rl_zone_set('$FORGED', 'token_bucket', 10, '1 minute', refill => 'cron')" >/dev/null
rl_check "(a) a zone named md5:<md5 of the long name>: a job of its own, the long zone keeps its" "ok 1 1" \
	"$(err "SELECT rl_cron_enable('$FORGED')") $(njobs_cmd "$FORGED") $(njobs_cmd "$LONG_A")"
rl_check "(a) ... disabling and dropping it leave the long zone's job alone" "t 0 1" \
	"$(q "SELECT rl_cron_disable('$FORGED')")$(q "SELECT rl_zone_drop('$FORGED')") $(njobs_cmd "$FORGED") $(njobs_cmd "$LONG_A")"
q "SELECT rl_zone_drop('$LONG_A')" >/dev/null
rl_check "(a) ... rl_zone_drop of the first removes its job" 0 "$(njobs_cmd "$LONG_A")"
# Whatever is left of them must not disturb what follows.
q "SELECT count(cron.unschedule(jobid)) FROM cron.job WHERE command IN ($(cmd_of "$LONG_A"), $(cmd_of "$LONG_B"))" >/dev/null
q "SELECT rl_zone_drop('$LONG_B')" >/dev/null
# Enabling again as another role replaces the job: one job, the new user.
rl_psql -d postgres -c "CREATE ROLE ${ROLE}_2 LOGIN" >/dev/null
q "SELECT rl_zone_set('zr', 'token_bucket', 10, '1 minute', refill => 'cron')" >/dev/null
q "SELECT rl_cron_enable('zr')" >/dev/null
jr=$(q "SELECT rl_cron_enable('zr', '${ROLE}_2')")
rl_check "(a) enabling again with run_as => ${ROLE}_2: one job, run as ${ROLE}_2" "1 $jr ${ROLE}_2" \
	"$(njobs zr) $(job_id zr) $(q "SELECT username FROM cron.job WHERE jobname IN $(job_names_of zr)")"
rl_check "(a) ... ${ROLE}_2 was granted the refill" t \
	"$(q "SELECT has_function_privilege('${ROLE}_2', 'public.rl_cron_refill(text)', 'EXECUTE')")"
q "SELECT rl_zone_drop('zr')" >/dev/null

###########################################################################
# (b) The job's command run as the role refills exactly.  Rate 7 per 3
# minutes, burst 10, a tick of one minute: 2 1/3 tokens a tick; the part
# token is counted in units of 1 / 180000000 token.
q "SELECT rl_zone_set('zb', 'token_bucket', 7, '3 minutes', burst => 10, refill => 'cron')" >/dev/null
# The scheduler must not run it meanwhile: this part runs the command
# itself.  Scheduled and made inactive in one statement, one transaction:
# the scheduler never sees the job active (in two, a minute starting in
# between ran it once: "job canceled", 1 run in 14 of test/repeat.sh).
jb=$(q "SELECT j FROM (SELECT rl_cron_enable('zb') AS j) s, LATERAL cron.alter_job(j, active => false)")
rl_check "(b) zb's job is inactive" f "$(q "SELECT active FROM cron.job WHERE jobid = $jb")"
rl_check "(b) ... its tick is the schedule's ($(tick_of 7 180))" "$(tick_of 7 180)" "$(tick zb)"
# The arithmetic below is worked out for a tick of one minute (2 1/3 tokens);
# pg_cron 1.5+ gave the zone a shorter one (above), which a superuser sets
# back for this part.  (h) checks a refill on the version's own tick.
q "UPDATE ratelimit.zone SET refill_tick = '1 minute' WHERE zone = 'zb'" >/dev/null
cmd=$(q "SELECT command FROM cron.job WHERE jobid = $jb")
rl_check "(b) the command from cron.job" "SELECT public.rl_cron_refill('zb')" "$cmd"
rl_check "(b) a new key is full: take 10 of 10" 0 "$(remaining zb a 10)"
rl_check "(b) ... a refused call waits one tick" "false|0|00:01:00" \
	"$(q "SELECT allowed || '|' || remaining || '|' || retry_after FROM rl_limit('zb', 'a')")"
rl_check "(b) another key takes 1 of 10" 9 "$(remaining zb b 1)"
rl_check "(b) a key asked at cost 0 keeps no state" 10 "$(remaining zb c 0)"
rl_check "(b) state before: a 0 tokens, pending" "0|0|true" "$(st zb a)"
rl_check "(b) state before: b 9 tokens, pending" "9|0|true" "$(st zb b)"
rl_check "(b) state before: c has no row" "no row" "$(st zb c)"
q "SELECT rl_zone_set('zinl', 'token_bucket', 10, '1 minute')" >/dev/null
remaining zinl x 3 >/dev/null
inline_before=$(q "SELECT tokens || '|' || s.updated_at FROM ratelimit.state s JOIN ratelimit.zone z USING (zone_id) WHERE z.zone = 'zinl'")
rl_check "(b) run 1 as $ROLE: 2 buckets refilled" 2 "$(qr "$cmd")"
rl_check "(b) ... a: 2 tokens + 1/3 (60000000 / 180000000)" "2|60000000|true" "$(st zb a)"
rl_check "(b) ... b: full (10), no longer pending" "10|0|null" "$(st zb b)"
rl_check "(b) ... c: still no row" "no row" "$(st zb c)"
rl_check "(b) the command again at once as $ROLE: metered, nothing refilled (the next run is due a tick later)" \
	"0 2|60000000|true" "$(qr "$cmd") $(st zb a)"
rl_check "(b) ... and again: still nothing" "0 2|60000000|true" "$(qr "$cmd") $(st zb a)"
rl_check "(b) run 2 (SET ROLE $ROLE, then the command): 1 bucket" "$ROLE 1" \
	"$(rl_psql -d "$DB" -tA -c "SET ROLE $ROLE" -c "SELECT current_user" -c "$cmd" 2>&1 | tr '\n' ' ' | sed 's/ $//')"
rl_check "(b) ... a: 4 tokens + 2/3" "4|120000000|true" "$(st zb a)"
tick_passes
rl_check "(b) run 3: a: 7 tokens, no part left" "1 7|0|true" "$(qr "$cmd") $(st zb a)"
tick_passes
rl_check "(b) run 4: a: 9 tokens + 1/3" "1 9|60000000|true" "$(qr "$cmd") $(st zb a)"
tick_passes
rl_check "(b) run 5: a: capped at 10, no longer pending" "1 10|0|null" "$(qr "$cmd") $(st zb a)"
tick_passes
rl_check "(b) run 6: nothing below capacity" 0 "$(qr "$cmd")"
rl_check "(b) a call sees 10 tokens" 10 "$(remaining zb a 0)"
rl_check "(b) take 3: 7 left, pending again" "7 7|0|true" "$(remaining zb a 3) $(st zb a)"
tick_passes
rl_check "(b) run 7: 9 1/3" "1 9|60000000|true" "$(qr "$cmd") $(st zb a)"
rl_check "(b) take 9: 0 left, the part token kept" "0 0|60000000|true" "$(remaining zb a 9) $(st zb a)"
tick_passes
rl_check "(b) run 8: 2 2/3" "1 2|120000000|true" "$(qr "$cmd") $(st zb a)"
rl_check "(b) an inline zone's row is left alone" "$inline_before" \
	"$(q "SELECT tokens || '|' || s.updated_at FROM ratelimit.state s JOIN ratelimit.zone z USING (zone_id) WHERE z.zone = 'zinl'")"
# The capacity grows: full buckets must be visited again.
q "SELECT rl_zone_set('zb', 'token_bucket', 7, '3 minutes', burst => 12, refill => 'cron')" >/dev/null
rl_check "(b) burst 10 -> 12: the full key b is pending again" "10|0|true" "$(st zb b)"
tick_passes
rl_check "(b) ... run 9: b 12 (capped), a 5" "2 12|0|null 5|0|true" "$(qr "$cmd") $(st zb b) $(st zb a)"
rl_check "(b) rl_cron_refill on an inline zone: 55000" 55000 "$(err "SELECT rl_cron_refill('zinl')" | cut -d' ' -f1)"

###########################################################################
# (c) The role may do only that.
rl_check "(c) $ROLE is no superuser" f "$(qr "SELECT usesuper FROM pg_user WHERE usename = current_user")"
c42501() { rl_check "(c) $ROLE: $1: 42501" 42501 "$(err_r "$2" | cut -d' ' -f1)"; }
c42501 "UPDATE ratelimit.state SET tokens" "UPDATE ratelimit.state SET tokens = 1000000"
c42501 "UPDATE ratelimit.state SET counter, refill_pending" "UPDATE ratelimit.state SET counter = 0, refill_pending = true"
c42501 "SELECT tokens FROM ratelimit.state" "SELECT tokens FROM ratelimit.state"
c42501 "DELETE FROM ratelimit.cron_refill_due (its meter)" "DELETE FROM ratelimit.cron_refill_due"
c42501 "ratelimit.flush_zone_state" "SELECT ratelimit.flush_zone_state(1)"
c42501 "UPDATE ratelimit.state SET key" "UPDATE ratelimit.state SET key = 'stolen' WHERE key = 'a'"
c42501 "UPDATE ratelimit.state SET zone_id" "UPDATE ratelimit.state SET zone_id = 0"
c42501 "UPDATE ratelimit.state SET updated_at" "UPDATE ratelimit.state SET updated_at = now()"
c42501 "UPDATE ratelimit.state SET part" "UPDATE ratelimit.state SET part = 1"
c42501 "UPDATE ratelimit.state SET entries" "UPDATE ratelimit.state SET entries = NULL"
c42501 "INSERT INTO ratelimit.state" "INSERT INTO ratelimit.state (key, zone_id, part, tokens, updated_at) VALUES ('x', 1, 0, 5, now())"
c42501 "DELETE FROM ratelimit.state" "DELETE FROM ratelimit.state"
c42501 "TRUNCATE ratelimit.state" "TRUNCATE ratelimit.state"
c42501 "SELECT key FROM ratelimit.state" "SELECT key FROM ratelimit.state"
c42501 "UPDATE ratelimit.zone" "UPDATE ratelimit.zone SET rate = 1000000"
c42501 "INSERT INTO ratelimit.zone" "INSERT INTO ratelimit.zone (zone, algorithm, rate, period) VALUES ('evil', 'token_bucket', 1, '1 s')"
c42501 "DELETE FROM ratelimit.zone" "DELETE FROM ratelimit.zone"
c42501 "INSERT INTO ratelimit.history" "INSERT INTO ratelimit.history VALUES (1, now(), 'zb', 'a', 1, true)"
c42501 "UPDATE ratelimit.history" "UPDATE ratelimit.history SET allowed = true"
c42501 "DELETE FROM ratelimit.history" "DELETE FROM ratelimit.history"
c42501 "rl_zone_set" "SELECT rl_zone_set('zb', 'token_bucket', 1000, '1 second', refill => 'cron')"
c42501 "rl_zone_drop" "SELECT rl_zone_drop('zb')"
c42501 "rl_reset" "SELECT rl_reset('zb', 'a')"
c42501 "rl_cron_enable" "SELECT rl_cron_enable('zb')"
c42501 "rl_cron_enable for itself" "SELECT rl_cron_enable('zb', '$ROLE')"
c42501 "rl_cron_disable" "SELECT rl_cron_disable('zb')"
c42501 "SET ratelimit.now_override" "SET ratelimit.now_override = '2030-01-01 00:00:00+00'"
c42501 "cron.alter_job" "SELECT cron.alter_job($jb, command => 'SELECT 1')"
rl_check "(c) nothing changed: zb's state and zone" "12|0|null 5|0|true 7|00:03:00|12" \
	"$(st zb b) $(st zb a) $(q "SELECT rate || '|' || period || '|' || burst FROM ratelimit.zone WHERE zone = 'zb'")"
tick_passes
rl_check "(c) ... but it can run the refill" 1 "$(qr "$cmd")"

###########################################################################
# (d) The scheduler runs the job itself: rate 600 a minute, the real
# clock.  pg_cron 1.4: a tick of one minute fills a drained key.  1.5+: a
# tick of one second brings exactly 10 tokens a run, the first within
# seconds.
q "SELECT rl_zone_set('zd', 'token_bucket', 600, '1 minute', refill => 'cron')" >/dev/null
jd=$(q "SELECT rl_cron_enable('zd')")
rl_check "(d) zd's schedule ($(schedule_of 600 60))" "$(schedule_of 600 60)" \
	"$(q "SELECT schedule FROM cron.job WHERE jobid = $jd")"
rl_check "(d) drain key k (real clock): 600 of 600" 0 \
	"$(rl_psql -d "$DB" -tA -c "SELECT remaining FROM rl_limit('zd', 'k', 600)" 2>&1)"
rl_check "(d) ... state: 0 tokens, pending" "0|0|true" "$(st zd k)"
t0=$(q "SELECT clock_timestamp()")
echo "# (d) waiting for pg_cron to run job $jd (up to 75 s) from $(date -u +%H:%M:%S)"
start=$SECONDS status=none
while [ $((SECONDS - start)) -lt 75 ]; do
	status=$(q "SELECT coalesce((SELECT string_agg(status, ',' ORDER BY runid) FROM cron.job_run_details
	                             WHERE jobid = $jd AND start_time > '$t0'), 'none')")
	case "$status" in *succeeded*|*failed*) break ;; esac
	sleep 1
done
waited=$((SECONDS - start))
echo "# (d) pg_cron ran the job after ${waited} s (runs: $status)"
rl_check "(d) a run of the job succeeded within 75 s" succeeded "$(tr ',' '\n' <<<"$status" | grep -m1 -E 'succeeded|failed' || echo none)"
if [ "$CRON_SECONDS" = yes ]; then
	rl_check "(d) ... within 10 s (a 1-second schedule)" yes "$([ "$waited" -le 10 ] && echo yes || echo "no: $waited s")"
	sleep 3
	# One snapshot: the tokens, and the runs that finished or started since
	# the drain (a run commits its refill before pg_cron marks it done).
	rl_check "(d) every run brought exactly 10 tokens: tokens = 10 x runs (finished <= runs <= started)" yes \
		"$(q "SELECT CASE WHEN s.counter = 0 AND s.tokens % 10 = 0
		                   AND s.tokens / 10 BETWEEN least(r.finished, 60) AND least(r.started, 60)
		                  THEN 'yes' ELSE format('no: %s tokens, counter %s, %s runs finished, %s started',
		                                         s.tokens, s.counter, r.finished, r.started) END
		      FROM ratelimit.state s JOIN ratelimit.zone z USING (zone_id),
		           (SELECT count(*) FILTER (WHERE status = 'succeeded') AS finished, count(*) AS started
		            FROM cron.job_run_details WHERE jobid = $jd AND start_time > '$t0') r
		      WHERE z.zone = 'zd' AND s.key = 'k'")"
	rl_check "(d) ... more than one run already (tokens > 10)" yes \
		"$(q "SELECT CASE WHEN tokens > 10 THEN 'yes' ELSE 'no: ' || tokens END FROM ratelimit.state s
		      JOIN ratelimit.zone z USING (zone_id) WHERE z.zone = 'zd' AND s.key = 'k'")"
fi
# The other active jobs: give them time to run (za2's is every minute).
for _ in $(seq 1 75); do
	[ "$(q "SELECT count(DISTINCT jobid) FROM cron.job_run_details
	        WHERE jobid IN ($jid2, $jidb) AND status = 'succeeded'")" = 2 ] && break
	sleep 1
done
# A run over a connection reports "1 row"; a background worker, the
# command tag.
run_message="1 row"
[ "$CRON_SECONDS" = no ] || run_message="SELECT 1"
rl_check "(d) ... its details" "$CRONDB|$ROLE|SELECT public.rl_cron_refill('zd')|$run_message" \
	"$(q "SELECT database || '|' || username || '|' || command || '|' || return_message FROM cron.job_run_details
	      WHERE jobid = $jd AND start_time > '$t0' AND status = 'succeeded' ORDER BY runid LIMIT 1")"
if [ "$CRON_SECONDS" = no ]; then
	rl_check "(d) the drained key is full again" "600|0|null" "$(st zd k)"
	rl_check "(d) ... a call sees 600 tokens" 600 "$(rl_psql -d "$DB" -tA -c "SELECT remaining FROM rl_limit('zd', 'k', 0)" 2>&1)"
fi
rl_check "(d) za's and za2's jobs ran too, and no ratelimit run failed" "yes 0" \
	"$(q "SELECT CASE WHEN count(DISTINCT jobid) FILTER (WHERE jobid IN ($jid2, $jidb) AND status = 'succeeded') = 2 THEN 'yes' ELSE 'no' END
	      || ' ' || count(*) FILTER (WHERE status = 'failed') FROM cron.job_run_details WHERE command LIKE '%rl_cron_refill%'")"
rl_check "(d) zb's inactive job never ran" 0 "$(q "SELECT count(*) FROM cron.job_run_details WHERE jobid = $jb")"
failures=$(q "SELECT string_agg(DISTINCT return_message, '; ') FROM cron.job_run_details WHERE status = 'failed'")
[ -n "$failures" ] && echo "# failed runs say: $failures"

###########################################################################
# (e) Removing jobs.
rl_check "(e) rl_cron_disable('za') returns true" t "$(q "SELECT rl_cron_disable('za')")"
rl_check "(e) ... no job left for za" 0 "$(njobs za)"
rl_check "(e) ... refill_tick NULL" null "$(tick za)"
rl_check "(e) ... a second time: false" f "$(q "SELECT rl_cron_disable('za')")"
rl_check "(e) ... za2's job is still there" "$jidb" "$(job_id za2)"
rl_check "(e) rl_cron_refill on a zone without a job: 55000 with the hint" \
	"55000 SELECT rl_cron_enable('za') schedules it." "$(err "SELECT rl_cron_refill('za')")"
rl_check "(e) rl_cron_disable on a missing zone: 42704" 42704 "$(err "SELECT rl_cron_disable('nope')" | cut -d' ' -f1)"
rl_check "(e) ... on an inline zone: false" f "$(q "SELECT rl_cron_disable('zinl')")"

q "SELECT rl_zone_set('ze1', 'token_bucket', 10, '1 minute', refill => 'cron'),
          rl_zone_set('ze2', 'token_bucket', 10, '1 minute', refill => 'cron')" >/dev/null
q "SELECT rl_cron_enable('ze1'), rl_cron_enable('ze2')" >/dev/null
rl_check "(e) ze1 and ze2 have a job each" "1 1" "$(njobs ze1) $(njobs ze2)"
q "SELECT rl_zone_drop('ze1')" >/dev/null
rl_check "(e) rl_zone_drop removes the zone's job" 0 "$(njobs ze1)"
remaining ze2 k 5 >/dev/null
rl_check "(e) refill => 'inline' without reset => true: 55000 (the keys would start afresh)" 55000 \
	"$(err "SELECT rl_zone_set('ze2', refill => 'inline')" | cut -d' ' -f1)"
rl_check "(e) ... the job stays" 1 "$(njobs ze2)"
q "SELECT rl_zone_set('ze2', refill => 'inline', reset => true)" >/dev/null
rl_check "(e) refill => 'inline', reset => true removes the zone's job" 0 "$(njobs ze2)"
rl_check "(e) ... refill inline, refill_tick NULL" "inline|null" \
	"$(q "SELECT refill || '|' || coalesce(refill_tick::text, 'null') FROM ratelimit.zone WHERE zone = 'ze2'")"
rl_check "(e) ... the zone starts afresh (10 left)" 10 "$(remaining ze2 k 0)"
rl_check "(e) ... rl_cron_enable on it now: 55000" 55000 "$(err "SELECT rl_cron_enable('ze2')" | cut -d' ' -f1)"
rl_check "(e) other zones' jobs untouched" "$jidb $jb $jd" "$(job_id za2) $(job_id zb) $(job_id zd)"

# DROP EXTENSION: failed drops leave the jobs, a successful one removes
# them all but leaves an unrelated job alone.
unrelated=$(q "SELECT cron.schedule('unrelated', '0 0 1 1 *', 'SELECT 1')")
# A job of the owner's own whose name begins like the extension's: only
# ratelimit_refill:<zone id> is the extension's.
own=$(q "SELECT cron.schedule('ratelimit_refill:nightly', '0 0 1 1 *', 'SELECT 2')")
before=$(all_rl_jobs)
rl_check "(e) three ratelimit jobs before the drops" "3" "$(tr ',' '\n' <<<"$before" | grep -c .)"
q "CREATE VIEW zone_names AS SELECT zone FROM rl_zones" >/dev/null
r=$(q "DROP EXTENSION ratelimit")
rl_check "(e) DROP EXTENSION with a dependent view fails (2BP01)" yes \
	"$(has 'ERROR:  cannot drop extension ratelimit because other objects depend on it' "$r")"
rl_check "(e) ... the jobs are still there" "$before" "$(all_rl_jobs)"
rl_check "(e) ... and refill_tick" "$(tick_of 600 60)" "$(tick zd)"
r=$(rl_psql -d "$DB" -tA -c "SET client_min_messages = warning" -c "BEGIN" -c "DROP EXTENSION ratelimit CASCADE" \
	-c "SELECT count(*) FROM cron.job WHERE jobname ~ '^ratelimit_refill:[0-9]+\$'" -c "ROLLBACK" 2>&1)
rl_check "(e) DROP EXTENSION CASCADE in a transaction: the jobs are gone inside it" 0 "$r"
rl_check "(e) ... rolled back: the jobs are back" "$before" "$(all_rl_jobs)"
rl_check "(e) ... the extension and the view too" "1 1" \
	"$(q "SELECT count(*) FROM pg_extension WHERE extname = 'ratelimit'") $(q "SELECT count(*) FROM pg_views WHERE viewname = 'zone_names'")"
q "DROP VIEW zone_names" >/dev/null
rl_check "(e) DROP EXTENSION ratelimit" "" "$(q "DROP EXTENSION ratelimit")"
rl_check "(e) ... removes every ratelimit job" "" "$(all_rl_jobs)"
rl_check "(e) ... leaves the unrelated job alone" "1|unrelated|0 0 1 1 *|SELECT 1" \
	"$(q "SELECT count(*) || '|' || min(jobname) || '|' || min(schedule) || '|' || min(command) FROM cron.job WHERE jobid = $unrelated")"
rl_check "(e) ... and ratelimit_refill:nightly, not a zone's" "1|SELECT 2" \
	"$(q "SELECT count(*) || '|' || min(command) FROM cron.job WHERE jobid = $own")"
q "SELECT cron.unschedule($own)" >/dev/null
rl_check "(e) ... pg_cron is still installed" 1 "$(q "SELECT count(*) FROM pg_extension WHERE extname = 'pg_cron'")"

# Again, with the drop run from a function (the statement's text is not the
# client's query) and an unrelated DROP EXTENSION whose query string names
# ratelimit.
rl_psql -d "$DB" -c 'CREATE EXTENSION ratelimit' >/dev/null
q "SELECT rl_zone_set('zg', 'token_bucket', 10, '1 minute', refill => 'cron')" >/dev/null
jg=$(q "SELECT rl_cron_enable('zg')")
rl_check "(e) after CREATE EXTENSION again: a new job" 1 "$(njobs zg)"
rl_check "(e) ... the role is granted again on the new rl_cron_refill (and nothing else)" "f,f,f,t" "$(privs)"
q "CREATE EXTENSION pg_trgm" >/dev/null
r=$(rl_psql -d "$DB" -tA -c "DROP EXTENSION pg_trgm; SELECT count(*) FROM ratelimit.zone WHERE refill_tick IS NOT NULL" 2>&1)
rl_check "(e) DROP EXTENSION pg_trgm in a query string that names ratelimit: zg keeps its job" "1 1" "$r $(njobs zg)"
q "SELECT cron.unschedule(jobid) FROM cron.job WHERE jobname IN $(job_names_of zg)" >/dev/null
jg=$(q "SELECT rl_cron_enable('zg')")
q "CREATE FUNCTION public.uninstall() RETURNS void LANGUAGE plpgsql AS \$\$ BEGIN DROP EXTENSION ratelimit; END \$\$" >/dev/null
rl_check "(e) DROP EXTENSION ratelimit inside a function" "" "$(q "SELECT public.uninstall()")"
rl_check "(e) ... the extension is gone" 0 "$(q "SELECT count(*) FROM pg_extension WHERE extname = 'ratelimit'")"
rl_check "(e) ... and so is zg's job" 0 "$(q "SELECT count(*) FROM cron.job WHERE jobid = $jg")"
q "SELECT cron.unschedule(jobid) FROM cron.job WHERE jobname LIKE 'ratelimit\_refill:%'" >/dev/null
rl_check "(e) the unrelated job is still there" 1 "$(q "SELECT count(*) FROM cron.job WHERE jobid = $unrelated")"

# (h) The extension in a schema whose name needs quoting: the grants and the
# job's command name it correctly (PostgreSQL hands @extschema@ quoted).
q 'CREATE SCHEMA "Rate Limit"' >/dev/null
rl_psql -d "$DB" -c 'CREATE EXTENSION ratelimit SCHEMA "Rate Limit"' >/dev/null
q "SELECT \"Rate Limit\".rl_zone_set('zq', 'token_bucket', 10, '1 minute', refill => 'cron')" >/dev/null
# Inactive at once (one statement): the scheduler must not refill zq while
# this part does.
jq=$(q "SELECT j FROM (SELECT \"Rate Limit\".rl_cron_enable('zq') AS j) s, LATERAL cron.alter_job(j, active => false)")
rl_check "(h) rl_cron_enable with the extension in schema \"Rate Limit\": a job" 1 "$(njobs zq)"
rl_check "(h) ... its command names the schema quoted" "SELECT \"Rate Limit\".rl_cron_refill('zq')" \
	"$(q "SELECT command FROM cron.job WHERE jobid = $jq")"
q "SELECT \"Rate Limit\".rl_limit('zq', 'k', 4)" >/dev/null
refilled=$(qr "$(q "SELECT command FROM cron.job WHERE jobid = $jq")")
zq_after=$(( 6 + 10 * $(tick_of 10 60 | awk -F: '{print $1 * 3600 + $2 * 60 + $3}') / 60 ))
[ "$zq_after" -le 10 ] || zq_after=10
rl_check "(h) ... the command runs as $ROLE and refills (6 + one tick's tokens, at most 10: $zq_after)" "1|$zq_after" \
	"$refilled|$(q "SELECT tokens FROM ratelimit.state WHERE key = 'k'")"
q "DROP EXTENSION ratelimit" >/dev/null
rl_check "(h) DROP EXTENSION removes its job" 0 "$(q "SELECT count(*) FROM cron.job WHERE jobid = $jq")"

rl_check "(g) cronint: no server process terminated by a signal" no \
	"$(grep -qE 'terminated by signal|was terminated' "$RL_CLUSTER_DIR/server.log" && echo yes || echo no)"
rl_check "(g) cronint: the server answers" 1 "$(rl_psql -d postgres -tA -c 'SELECT 1' 2>&1)"
rl_cluster_stop

###########################################################################
echo "# cronintnopre: shared_preload_libraries = 'ratelimit' (no pg_cron)"
# A later shared_preload_libraries line overrides the one rl_cluster_start writes.
rl_cluster_start cronintnopre "fsync = off" "shared_preload_libraries = 'ratelimit'"
rl_check "(f) shared_preload_libraries is ratelimit alone" ratelimit \
	"$(rl_psql -d postgres -tA -c "SHOW shared_preload_libraries" 2>&1)"
DB=rl_nopre
new_db $DB
rl_psql -d postgres -c "CREATE ROLE $ROLE LOGIN" >/dev/null
rl_check "(f) rl_zone_set(refill => 'cron') without pg_cron preloaded: 55000 at once, the hint says to preload it" \
	"55000 Add pg_cron to shared_preload_libraries in postgresql.conf, restart the server, and run CREATE EXTENSION pg_cron." \
	"$(err "SELECT rl_zone_set('zn', 'token_bucket', 10, '1 minute', refill => 'cron')")"
rl_check "(f) ... and defines no zone" 0 "$(q "SELECT count(*) FROM ratelimit.zone WHERE zone = 'zn'")"
# A cron zone from before pg_cron was unloaded (or a restored dump): the
# zone table holds it as this INSERT does.
q "INSERT INTO ratelimit.zone (zone, algorithm, rate, period, refill) VALUES ('zn', 'token_bucket', 10, '1 minute', 'cron')" >/dev/null
rl_check "(f) rl_cron_enable without pg_cron preloaded: 55000, the hint says to preload it" \
	"55000 Add pg_cron to shared_preload_libraries in postgresql.conf, restart the server, and run CREATE EXTENSION pg_cron." \
	"$(err "SELECT rl_cron_enable('zn')")"
rl_check "(f) ... the message" yes "$(has 'ERROR:  pg_cron is not loaded' "$(q "SELECT rl_cron_enable('zn')")")"
rl_check "(f) ... refill_tick unchanged (NULL)" null "$(tick zn)"
rl_check "(f) ... nothing granted to $ROLE" "f,f,f,f" "$(privs)"
rl_check "(f) rl_cron_disable: false" f "$(q "SELECT rl_cron_disable('zn')")"
rl_check "(f) calls on the cron zone work: take 4 of 10" 6 "$(remaining zn k 4)"
rl_check "(f) ... take 6 more" 0 "$(remaining zn k 6)"
rl_check "(f) ... refused, and with no job no wait is promised (retry_after and reset_after NULL)" "false|0|null|null" \
	"$(q "SELECT allowed || '|' || remaining || '|' || coalesce(retry_after::text, 'null') || '|' || coalesce(reset_after::text, 'null') FROM rl_limit('zn', 'k')")"
rl_check "(f) ... the calls only take (no refill an hour later)" 0 \
	"$(CLOCK='2026-01-01 01:00:00+00' remaining zn k 0)"
rl_check "(f) rl_cron_refill before any tick: 55000 (no refill job)" 55000 "$(err "SELECT rl_cron_refill('zn')" | cut -d' ' -f1)"
q "UPDATE ratelimit.zone SET refill_tick = '1 minute' WHERE zone = 'zn'" >/dev/null
rl_check "(f) a simulated tick: rl_cron_refill refills 1 bucket" 1 "$(q "SELECT rl_cron_refill('zn')")"
rl_check "(f) ... the key is full again" "10|0|null" "$(st zn k)"
rl_check "(f) ... a call sees 10" 10 "$(remaining zn k 0)"
rl_check "(f) rl_zone_drop of the cron zone works" "" "$(q "SELECT rl_zone_drop('zn')")"
rl_check "(f) DROP EXTENSION ratelimit works without pg_cron" "" "$(q "DROP EXTENSION ratelimit")"
rl_check "(g) cronintnopre: no server process terminated by a signal" no \
	"$(grep -qE 'terminated by signal|was terminated' "$RL_CLUSTER_DIR/server.log" && echo yes || echo no)"
rl_cluster_stop

echo "cron: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
