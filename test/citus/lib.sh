# Sourced by test/citus/citus.sh and test/bench/citus.sh (after
# scripts/lib.sh): a Citus coordinator and two workers on loopback, and the
# helpers that find where a key's shard lives.  Citus itself is not part of
# the repository: RL_PG_BIN points at a PostgreSQL into which Citus was
# installed by hand (test/citus/README.md).

# citus_pkglibdir: where citus.so must be.
citus_pkglibdir() { "$RL_PG_BIN/pg_config" --pkglibdir; }
citus_installed() { [ -f "$(citus_pkglibdir)/citus.so" ]; }

# citus_start PREFIX [postgresql.conf lines...]: clusters PREFIXc (the
# coordinator) and PREFIXw1, PREFIXw2, each with citus and ratelimit
# preloaded (citus first) and CREATE EXTENSION citus in database postgres;
# the coordinator registered as such and the workers added to it.  Sets
# C_PORT, W1_PORT, W2_PORT and CITUS_NODES (the three cluster names).
citus_start() {
	local prefix=$1 name
	shift
	CITUS_NODES="${prefix}c ${prefix}w1 ${prefix}w2"
	for name in $CITUS_NODES; do
		RL_PRELOAD='citus, ratelimit' rl_cluster_start "$name" "$@" 2>/dev/null
		case $name in
			*c) C_PORT=$PGPORT ;;
			*w1) W1_PORT=$PGPORT ;;
			*w2) W2_PORT=$PGPORT ;;
		esac
		rl_psql -d postgres -c 'SET client_min_messages = warning' -c 'CREATE EXTENSION citus' >/dev/null \
			|| rl_die "CREATE EXTENSION citus failed on $name"
	done
	export PGPORT=$C_PORT
	rl_psql -d postgres -c 'SET client_min_messages = warning' \
		-c "SELECT citus_set_coordinator_host('127.0.0.1', $C_PORT)" \
		-c "SELECT citus_add_node('127.0.0.1', $W1_PORT)" \
		-c "SELECT citus_add_node('127.0.0.1', $W2_PORT)" >/dev/null \
		|| rl_die "registering the Citus nodes failed"
}

# on PORT SQL: one statement (or several, -c each) on the node at PORT, in
# database postgres; its output (unaligned, tuples only), or psql's error.
on() {
	local port=$1
	shift
	local args=() s
	for s in "$@"; do args+=(-c "$s"); done
	PGPORT=$port rl_psql -d postgres -tA "${args[@]}" 2>&1
}

# The README's Citus recipe: the ```sql-citus block, as written.
citus_readme_recipe() {
	sed -n '/^```sql-citus$/,/^```$/p' "$RL_ROOT/README.md" | sed '1d;$d'
}

# The recipe of the code before rl_citus_setup() (the README's, plus the
# setting that lets Citus distribute a table with triggers); each step only
# if it was not done yet, so that it can follow a recipe that stopped half
# way.
CITUS_MANUAL_RECIPE="
SET citus.enable_unsafe_triggers = on;
SELECT create_distributed_table('ratelimit.state', 'key')
  WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'ratelimit.state'::regclass);
SELECT create_reference_table('ratelimit.zone')
  WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'ratelimit.zone'::regclass);
SELECT create_distributed_function('rl_token_bucket(text, float8, float8, int)', '\$1', colocate_with := 'ratelimit.state');
SELECT create_distributed_function('rl_limit(text, text, int)', '\$2', colocate_with := 'ratelimit.state');
"

# citus_setup_any: rl_citus_setup() where the extension has it, else the
# manual recipe; prints which ran.
citus_setup_any() {
	if [ "$(on "$C_PORT" "SELECT to_regproc('rl_citus_setup') IS NOT NULL")" = t ]; then
		PGPORT=$C_PORT rl_psql -d postgres -c 'SET client_min_messages = warning' \
			-c 'SELECT rl_citus_setup()' >/dev/null || rl_die "rl_citus_setup() failed"
		echo "rl_citus_setup()"
	else
		PGPORT=$C_PORT rl_psql -d postgres -c 'SET client_min_messages = warning' \
			-c "$CITUS_MANUAL_RECIPE" >/dev/null || rl_die "the manual Citus recipe failed"
		echo "manual recipe (create_distributed_table, create_reference_table with citus.enable_unsafe_triggers, create_distributed_function)"
	fi
}

# SQL creating public.node_of(key) (the port of the worker that holds the
# key's shard of ratelimit.state) and public.shard_of(key) (that shard's
# table name), on the coordinator (Citus propagates them to the workers).
CITUS_HELPERS_SQL="
CREATE FUNCTION public.node_of(k text) RETURNS int LANGUAGE sql STABLE AS \$\$
    SELECT n.nodeport FROM pg_dist_placement p JOIN pg_dist_node n ON n.groupid = p.groupid
    WHERE p.shardid = get_shard_id_for_distribution_column('ratelimit.state', k)
\$\$;
CREATE FUNCTION public.shard_of(k text) RETURNS text LANGUAGE sql STABLE AS \$\$
    SELECT shard_name('ratelimit.state'::regclass, get_shard_id_for_distribution_column('ratelimit.state', k))
\$\$;
"

# zone_counters EXPR ZONE PORT...: EXPR over ZONE's counters
# (ratelimit.shmem_counters(): allowed, refused, ...; aggregates, as
# coalesce(sum(allowed), 0)) on the node at each PORT, in order, one word a
# node.  The zone by name: its id may differ between clusters.
zone_counters() {
	local expr=$1 zone=$2 port out=()
	shift 2
	for port in "$@"; do
		out+=("$(on "$port" "SELECT $expr FROM ratelimit.shmem_counters() JOIN ratelimit.zone z USING (zone_id)
		                     WHERE z.zone = '$zone'")")
	done
	echo "${out[*]}"
}

# key_on PORT PREFIX [SKIP]: the first key PREFIX<n> whose shard is on the
# worker at PORT (the SKIP first such keys passed over).
key_on() {
	on "$C_PORT" "SELECT k FROM (SELECT '$2' || g AS k, g FROM generate_series(1, 1000) g) s
	              WHERE node_of(k) = $1 ORDER BY g OFFSET ${3:-0} LIMIT 1"
}
