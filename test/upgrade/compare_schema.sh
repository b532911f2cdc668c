#!/usr/bin/env bash
# Compares what an extension is in two databases of a running cluster:
# exits 0 when they are the same, 1 and prints a diff when they differ, 2
# when it could not compare.
#
#   test/upgrade/compare_schema.sh DB_A DB_B [EXTENSION]
#
# EXTENSION defaults to ratelimit.  The cluster is the one the PG*
# environment variables (PGHOST, PGPORT, PGUSER) point at, as a superuser;
# psql and pg_dump come from RL_PG_BIN when set, else from PATH.
# RL_COMPARE_OUT=DIR keeps the two descriptions compared (DIR/DB.catalog,
# DIR/DB.dump).
#
# Two descriptions of each database are compared:
#
#  1. The extension's catalog entries, read by name, never by OID: the
#     extension row (version, schema, configuration tables and their
#     conditions); every member and every object that hangs off one
#     (indexes, constraints, column defaults, triggers, rules, row types);
#     each function's full definition (pg_get_functiondef: signature,
#     defaults, language, volatility, strictness, parallel safety, SECURITY
#     DEFINER, SET options, body) with its owner and ACL; each relation's
#     kind, persistence, access method, options, owner and ACL; columns in
#     their order with type, NOT NULL, default, collation, storage and
#     ACL; constraint, index, trigger, rule, policy and view definitions;
#     sequence parameters; types; schemas; event triggers; pg_init_privs;
#     comments; and every dependency of those objects (pg_depend, by
#     description).
#  2. pg_dump --schema-only --binary-upgrade of the whole database, which
#     dumps each extension member with ALTER EXTENSION ... ADD.  So the two
#     databases should hold nothing but the extension (or the same other
#     objects).
#
# Left out, because they differ between equal schemas and mean nothing to
# them:
#   * OIDs, relfilenodes, relfrozenxid/relminmxid and pg_dump's per-run
#     \restrict key: the binary_upgrade_set_next_* calls, the relfrozenxid
#     updates and the OIDs of pg_extension.extconfig in the dump (the
#     catalog part compares extconfig by name);
#   * a column's "missing value" (pg_attribute.atthasmissing and
#     attmissingval; binary_upgrade_set_missing_value in the dump): ALTER
#     TABLE ADD COLUMN with a default stores the default there for the rows
#     written before the column existed, and a row read without the column
#     reads that value.  The column's DEFAULT, compared above, is what every
#     row written since gets, and a fresh table has no older rows;
#   * the attribute versions that recent PostgreSQL minor releases keep
#     (pg_attver in pg_attribute.attoptions, the
#     binary_upgrade_set_next_attribute_versions calls): a WAL position of
#     when each column was created;
#   * the order of pg_dump's entries (sorted before the comparison) and of
#     an extension's configuration tables (compared as a set of pairs).
set -uo pipefail

usage() { echo "usage: $0 DB_A DB_B [EXTENSION]" >&2; exit 2; }
[ $# -ge 2 ] && [ $# -le 3 ] || usage
db_a=$1 db_b=$2 ext=${3:-ratelimit}
bin=${RL_PG_BIN:+$RL_PG_BIN/}
psql_cmd=("${bin}psql" -X -q -v ON_ERROR_STOP=1)

work=$(mktemp -d) || exit 2
trap 'rm -rf "$work"' EXIT

# The catalog description: one line (or block) per fact, sorted.
catalog_sql=$(cat <<'SQL'
SET search_path = pg_catalog;
SET intervalstyle = postgres;
SET datestyle = 'ISO, YMD';
\pset format unaligned
\pset tuples_only on
-- The objects: the members, and what depends on them automatically or
-- internally (recursively), but TOAST tables and their indexes (named by OID).
CREATE TEMP TABLE cmp_obj AS
WITH RECURSIVE o(classid, objid, member) AS (
    SELECT d.classid, d.objid, true
    FROM pg_depend d
    WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
      AND d.refobjid = (SELECT e.oid FROM pg_extension e WHERE e.extname = :'ext')
  UNION
    SELECT d.classid, d.objid, false
    FROM pg_depend d JOIN o ON d.refclassid = o.classid AND d.refobjid = o.objid
    WHERE d.deptype IN ('a', 'i')
)
SELECT o.classid, o.objid, bool_or(o.member) AS member
FROM o
WHERE coalesce((pg_identify_object(o.classid, o.objid, 0)).schema, '') <> 'pg_toast'
GROUP BY o.classid, o.objid;
CREATE TEMP TABLE cmp_rel AS
SELECT objid AS oid FROM cmp_obj WHERE classid = 'pg_class'::regclass
UNION
SELECT t.typrelid FROM cmp_obj o JOIN pg_type t ON t.oid = o.objid
WHERE o.classid = 'pg_type'::regclass AND t.typrelid <> 0;
CREATE FUNCTION pg_temp.acl(a aclitem[]) RETURNS text LANGUAGE sql IMMUTABLE
AS $$ SELECT coalesce(a::text, '(default)') $$;

SELECT line FROM (
-- The extension.
SELECT format('extension %s: version %s, schema %s, relocatable %s, owner %s',
              e.extname, e.extversion, e.extnamespace::regnamespace, e.extrelocatable,
              e.extowner::regrole) AS line
FROM pg_extension e WHERE e.extname = :'ext'
UNION ALL
SELECT format('extension %s: configuration table %s, condition %L', e.extname,
              c.rel::regclass, e.extcondition[c.n])
FROM pg_extension e, unnest(e.extconfig) WITH ORDINALITY c(rel, n)
WHERE e.extname = :'ext'
UNION ALL
-- Every object, member or owned by one.
SELECT format('object %s %s (%s)', i.type, i.identity, CASE WHEN o.member THEN 'member' ELSE 'owned' END)
FROM cmp_obj o, pg_identify_object(o.classid, o.objid, 0) i
UNION ALL
-- Dependencies of those objects.
SELECT format('depend %s -> %s (%s)', pg_describe_object(d.classid, d.objid, d.objsubid),
              pg_describe_object(d.refclassid, d.refobjid, d.refobjsubid), d.deptype)
FROM pg_depend d JOIN cmp_obj o ON o.classid = d.classid AND o.objid = d.objid
WHERE coalesce((pg_identify_object(d.refclassid, d.refobjid, 0)).schema, '') <> 'pg_toast'
UNION ALL
-- Functions.
SELECT format(E'function %s owner %s acl %s\n%s', p.oid::regprocedure, p.proowner::regrole,
              pg_temp.acl(p.proacl),
              CASE WHEN p.prokind = 'a' THEN '(aggregate)' ELSE pg_get_functiondef(p.oid) END)
FROM cmp_obj o JOIN pg_proc p ON p.oid = o.objid WHERE o.classid = 'pg_proc'::regclass
UNION ALL
-- Relations (tables, views, sequences, indexes, composite types' relations).
SELECT format('relation %s: kind %s, persistence %s, am %s, options %s, owner %s, acl %s, '
              'row security %s/%s, replica identity %s, has toast %s, partition %s',
              c.oid::regclass, c.relkind, c.relpersistence, coalesce(am.amname, '-'),
              coalesce(c.reloptions::text, '-'), c.relowner::regrole, pg_temp.acl(c.relacl),
              c.relrowsecurity, c.relforcerowsecurity, c.relreplident, c.reltoastrelid <> 0,
              c.relispartition)
FROM cmp_rel r JOIN pg_class c ON c.oid = r.oid LEFT JOIN pg_am am ON am.oid = c.relam
UNION ALL
-- Columns, with their position.
SELECT format('column %s.%s #%s: %s, not null %s, default %s, collation %s, identity %s, '
              'generated %s, dropped %s, storage %s, compression %s, statistics %s, '
              'options %s, acl %s',
              a.attrelid::regclass, quote_ident(a.attname), a.attnum,
              format_type(a.atttypid, a.atttypmod), a.attnotnull,
              coalesce(pg_get_expr(ad.adbin, ad.adrelid), '-'),
              CASE WHEN a.attcollation = 0 THEN '-' ELSE a.attcollation::regcollation::text END,
              a.attidentity::text, a.attgenerated::text, a.attisdropped,
              a.attstorage, a.attcompression::text, coalesce(a.attstattarget::text, '-'),
              coalesce(nullif(array(SELECT x FROM unnest(a.attoptions) x
                                    WHERE x NOT LIKE 'pg\_attver=%' ORDER BY x)::text, '{}'), '-'),
              coalesce(a.attacl::text, '-'))
FROM cmp_rel r JOIN pg_attribute a ON a.attrelid = r.oid AND a.attnum > 0
LEFT JOIN pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
UNION ALL
-- Constraints.
SELECT format('constraint %s on %s: %s, deferrable %s, deferred %s, validated %s, local %s, no inherit %s',
              quote_ident(c.conname),
              CASE WHEN c.conrelid <> 0 THEN c.conrelid::regclass::text ELSE c.contypid::regtype::text END,
              pg_get_constraintdef(c.oid), c.condeferrable, c.condeferred, c.convalidated,
              c.conislocal, c.connoinherit)
FROM cmp_obj o JOIN pg_constraint c ON c.oid = o.objid WHERE o.classid = 'pg_constraint'::regclass
UNION ALL
-- Indexes.
SELECT format('index %s: %s, primary %s, immediate %s, clustered %s, valid %s, replica identity %s',
              i.indexrelid::regclass, pg_get_indexdef(i.indexrelid), i.indisprimary, i.indimmediate,
              i.indisclustered, i.indisvalid, i.indisreplident)
FROM cmp_rel r JOIN pg_index i ON i.indexrelid = r.oid
UNION ALL
-- Triggers (the internal ones are their constraints').
SELECT format('trigger %s on %s: %s, enabled %s', quote_ident(t.tgname), t.tgrelid::regclass,
              pg_get_triggerdef(t.oid), t.tgenabled)
FROM cmp_obj o JOIN pg_trigger t ON t.oid = o.objid
WHERE o.classid = 'pg_trigger'::regclass AND NOT t.tgisinternal
UNION ALL
-- Views, and rules other than a view's own.
SELECT format(E'view %s:\n%s', c.oid::regclass, pg_get_viewdef(c.oid))
FROM cmp_rel r JOIN pg_class c ON c.oid = r.oid WHERE c.relkind IN ('v', 'm')
UNION ALL
SELECT format('rule %s on %s: %s, enabled %s', quote_ident(w.rulename), w.ev_class::regclass,
              pg_get_ruledef(w.oid), w.ev_enabled)
FROM cmp_obj o JOIN pg_rewrite w ON w.oid = o.objid
WHERE o.classid = 'pg_rewrite'::regclass AND w.rulename <> '_RETURN'
UNION ALL
SELECT format('policy %s on %s: command %s, permissive %s, roles %s, using %s, check %s',
              quote_ident(p.polname), p.polrelid::regclass, p.polcmd, p.polpermissive,
              p.polroles::regrole[], coalesce(pg_get_expr(p.polqual, p.polrelid), '-'),
              coalesce(pg_get_expr(p.polwithcheck, p.polrelid), '-'))
FROM cmp_rel r JOIN pg_policy p ON p.polrelid = r.oid
UNION ALL
-- Sequences.
SELECT format('sequence %s: %s, start %s, increment %s, min %s, max %s, cache %s, cycle %s',
              s.seqrelid::regclass, s.seqtypid::regtype, s.seqstart, s.seqincrement, s.seqmin,
              s.seqmax, s.seqcache, s.seqcycle)
FROM cmp_rel r JOIN pg_sequence s ON s.seqrelid = r.oid
UNION ALL
-- Types.
SELECT format('type %s: type %s, category %s, owner %s, acl %s, not null %s, default %s, '
              'base type %s, collation %s',
              t.oid::regtype, t.typtype, t.typcategory, t.typowner::regrole, pg_temp.acl(t.typacl),
              t.typnotnull, coalesce(t.typdefault, '-'),
              CASE WHEN t.typbasetype = 0 THEN '-' ELSE t.typbasetype::regtype::text END,
              CASE WHEN t.typcollation = 0 THEN '-' ELSE t.typcollation::regcollation::text END)
FROM cmp_obj o JOIN pg_type t ON t.oid = o.objid WHERE o.classid = 'pg_type'::regclass
UNION ALL
-- Schemas.
SELECT format('schema %s: owner %s, acl %s', n.oid::regnamespace, n.nspowner::regrole, pg_temp.acl(n.nspacl))
FROM cmp_obj o JOIN pg_namespace n ON n.oid = o.objid WHERE o.classid = 'pg_namespace'::regclass
UNION ALL
-- Event triggers.
SELECT format('event trigger %s: on %s, function %s, enabled %s, tags %s, owner %s',
              quote_ident(t.evtname), t.evtevent, t.evtfoid::regprocedure, t.evtenabled,
              coalesce(t.evttags::text, '-'), t.evtowner::regrole)
FROM cmp_obj o JOIN pg_event_trigger t ON t.oid = o.objid WHERE o.classid = 'pg_event_trigger'::regclass
UNION ALL
-- The privileges the extension's script left (pg_dump restores them).
SELECT format('init privs %s (%s): %s', pg_describe_object(ip.classoid, ip.objoid, ip.objsubid),
              ip.privtype, ip.initprivs)
FROM cmp_obj o JOIN pg_init_privs ip ON ip.classoid = o.classid AND ip.objoid = o.objid
UNION ALL
-- Comments.
SELECT format('comment on %s: %s', pg_describe_object(d.classoid, d.objoid, d.objsubid), d.description)
FROM cmp_obj o JOIN pg_description d ON d.classoid = o.classid AND d.objoid = o.objid
UNION ALL
SELECT format('comment on %s: %s', pg_describe_object(d.classoid, d.objoid, d.objsubid), d.description)
FROM cmp_rel r JOIN pg_description d ON d.classoid = 'pg_class'::regclass AND d.objoid = r.oid
     AND d.objsubid > 0
) facts
ORDER BY line COLLATE "C";
SQL
)

# describe DB: writes $work/DB.catalog and $work/DB.dump.
describe() {
	local db=$1 found
	found=$("${psql_cmd[@]}" -d "$db" -tA -c "SELECT count(*) FROM pg_extension WHERE extname = '$ext'") \
		|| { echo "error: cannot read database $db" >&2; return 2; }
	[ "$found" = 1 ] || { echo "error: extension $ext is not installed in database $db" >&2; return 2; }
	"${psql_cmd[@]}" -d "$db" -v ext="$ext" >"$work/$db.catalog" <<<"$catalog_sql" \
		|| { echo "error: the catalog queries failed in database $db" >&2; return 2; }
	# One line per pg_dump entry (they start at "-- Name: "), sorted, and
	# back to lines.
	"${bin}pg_dump" --schema-only --binary-upgrade -d "$db" >"$work/$db.raw" \
		|| { echo "error: pg_dump failed for database $db" >&2; return 2; }
	grep -v -E -e 'binary_upgrade_set_next_' -e 'binary_upgrade_set_missing_value' \
		-e '^-- set missing value\.$' \
		-e '^\\(un)?restrict ' -e '^SET relfrozenxid = ' -e "^WHERE oid = '[0-9]+';$" \
		"$work/$db.raw" \
		| sed -E "s/(binary_upgrade_create_empty_extension\(.*)'\{[0-9,]*\}'/\1'{OIDS}'/" \
		| cat -s \
		| awk '/^-- Name: / { if (entry != "") print entry; entry = "" } { entry = entry $0 "\001" } END { print entry }' \
		| LC_ALL=C sort | tr '\001' '\n' >"$work/$db.dump"
	rm -f "$work/$db.raw"
}

[ "$db_a" != "$db_b" ] || { echo "error: give two different databases" >&2; exit 2; }
describe "$db_a" || exit 2
describe "$db_b" || exit 2
if [ -n "${RL_COMPARE_OUT:-}" ]; then
	mkdir -p "$RL_COMPARE_OUT" && cp "$work"/*.catalog "$work"/*.dump "$RL_COMPARE_OUT"/
fi

status=0
for part in catalog dump; do
	if ! diff -u --label "$db_a ($part)" --label "$db_b ($part)" "$work/$db_a.$part" "$work/$db_b.$part"; then
		status=1
	fi
done
if [ "$status" -eq 0 ]; then
	echo "extension $ext: databases $db_a and $db_b are the same ($(wc -l <"$work/$db_a.catalog") catalog lines, $(wc -l <"$work/$db_a.dump") dump lines)"
fi
exit "$status"
