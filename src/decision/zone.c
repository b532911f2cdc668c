/*
 * zone.c -- zones (named policies): validation, and a per-backend cache so
 * that a decision does not query the catalog.
 *
 * The cache is emptied whenever ratelimit.zone changes: a trigger on the
 * table sends a relcache invalidation for it, which every backend receives
 * at the changing transaction's commit (and the changing backend at its
 * next command, or again at abort).  A miss reads the table under the
 * latest snapshot, never a REPEATABLE READ transaction's older one, since
 * what it reads outlives the transaction.
 */
#include "postgres.h"

#include "catalog/pg_type_d.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/snapmgr.h"

#include "base/args.h"
#include "base/clock.h"
#include "base/pg_compat.h"
#include "base/spi_exec.h"
#include "decision/zone.h"
#include "store/shmem_leases.h"

typedef struct ZoneCacheEntry
{
	char		name[RL_MAX_ZONE_BYTES + 1];	/* hash key, NUL-padded */
	RlZone		zone;
} ZoneCacheEntry;

static HTAB *zone_cache = NULL;
/* The entry found last: calls in a row mostly name the same zone. */
static ZoneCacheEntry *last_zone = NULL;
static Oid	zone_table_relid = InvalidOid;
static SPIPlanPtr zone_lookup_plan = NULL;

static const char *const algorithm_names[] = {
	[RL_ALGORITHM_TOKEN_BUCKET] = "token_bucket",
	[RL_ALGORITHM_GCRA] = "gcra",
	[RL_ALGORITHM_SLIDING_WINDOW] = "sliding_window",
	[RL_ALGORITHM_SLIDING_WINDOW_COUNTER] = "sliding_window_counter",
	[RL_ALGORITHM_FIXED_WINDOW] = "fixed_window",
	/* found as token_bucket by name (the first match); refill => 'cron' picks it */
	[RL_ALGORITHM_CRON_TOKEN_BUCKET] = "token_bucket",
	[RL_ALGORITHM_CONCURRENCY] = "concurrency",
};

const char *
RlAlgorithmName(RlAlgorithm algorithm)
{
	return algorithm_names[algorithm];
}

static bool
AlgorithmFromName(const char *name, RlAlgorithm *algorithm)
{
	for (int i = 0; i < (int) lengthof(algorithm_names); i++)
	{
		if (strcmp(name, algorithm_names[i]) == 0)
		{
			*algorithm = (RlAlgorithm) i;
			return true;
		}
	}
	return false;
}

/* A period's microseconds, when it lies in (0, RL_MAX_PERIOD_US]. */
static bool
IntervalMicros(const Interval *interval, int64 *micros)
{
	__int128	total = RlIntervalTotalMicros(interval);

	if (total <= 0 || total > RL_MAX_PERIOD_US)
		return false;
	*micros = (int64) total;
	return true;
}

/* The largest number of decimals a rate may have: a millionth of a request. */
#define RL_RATE_MAX_DECIMALS 6

/*
 * A rate as whole requests: rate = whole / multiplier, with the smallest
 * multiplier (5.5 is 11 / 2).  Raises the errors of a rate that is not a
 * positive number of at most RL_RATE_MAX_DECIMALS decimals and 2^53.
 */
static void
WholeRate(Numeric rate, int64 *whole, int64 *multiplier, int64 *integer_part)
{
	char	   *text = DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(rate)));
	const char *integral_digits = text;
	const char *point;
	int			integral_len;
	int			decimals;
	int64		integral = 0;
	int64		fraction = 0;
	int64		denominator = 1;
	int64		numerator;
	int64		a;
	int64		b;

	/* numeric_out writes -?digits[.digits], NaN or [-]Infinity. */
	if (*text == '-' || strspn(text, "0.") == strlen(text))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("rate must be greater than zero"),
				 errdetail("rate is %s.", text)));
	if (!isdigit((unsigned char) *text))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("rate must be a finite number"),
				 errdetail("rate is %s.", text)));
	point = strchr(text, '.');
	integral_len = point != NULL ? (int) (point - text) : (int) strlen(text);
	decimals = point != NULL ? (int) strlen(point + 1) : 0;
	while (decimals > 0 && point[decimals] == '0')
		decimals--;
	while (integral_len > 1 && *integral_digits == '0')
	{
		integral_digits++;
		integral_len--;
	}
	if (decimals > RL_RATE_MAX_DECIMALS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("rate has more than %d decimals", RL_RATE_MAX_DECIMALS),
				 errdetail("rate is %s.", text),
				 errhint("A zone counts at most a millionth of a request.")));
	/* 2^53 has 16 digits: no more, and the checks below need no wider type. */
	if (integral_len > 16)
		integral = RL_MAX_LIMIT + 1;
	else
		for (int i = 0; i < integral_len; i++)
			integral = integral * 10 + (integral_digits[i] - '0');
	for (int i = 1; i <= decimals; i++)
	{
		fraction = fraction * 10 + (point[i] - '0');
		denominator *= 10;
	}
	if (integral > RL_MAX_LIMIT)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("rate is out of range"),
				 errdetail("rate is %s; the largest is " INT64_FORMAT ".", text, RL_MAX_LIMIT)));
	/* Lowest terms: 5.5 is 11 / 2, not 55 / 10. */
	a = fraction;
	b = denominator;
	while (b != 0)
	{
		int64		r = a % b;

		a = b;
		b = r;
	}
	denominator /= a;
	numerator = fraction / a;
	/* integral * denominator + numerator, which may pass 2^53 */
	if (integral > (RL_MAX_LIMIT - numerator) / denominator)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("rate is out of range"),
				 errdetail("rate %s is counted as whole requests over " INT64_FORMAT
						   " periods; that count must be at most " INT64_FORMAT ".",
						   text, denominator, RL_MAX_LIMIT)));
	*whole = integral * denominator + numerator;
	*multiplier = denominator;
	*integer_part = integral;
}

/* An interval of micros, as interval_out writes it. */
static char *
MicrosText(int64 micros)
{
	Interval	interval = {.time = micros, .day = 0, .month = 0};

	return DatumGetCString(DirectFunctionCall1(interval_out, IntervalPGetDatum(&interval)));
}

void
RlCheckZoneDefinition(const char *algorithm_name, Numeric rate,
					const Interval *period, bool burst_null, int64 burst,
					const char *store, RlZoneLimit *limit)
{
	RlAlgorithm algorithm;
	int64		period_us = 0;
	int64		whole_rate;
	int64		multiplier;
	int64		integer_part;

	if (algorithm_name == NULL)
		ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						errmsg("algorithm must not be null")));
	if (!AlgorithmFromName(algorithm_name, &algorithm))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown rate-limit algorithm \"%s\"", RlMessageText(algorithm_name)),
				 errhint("Use token_bucket, gcra, sliding_window, sliding_window_counter, fixed_window or concurrency.")));
	if (rate == NULL)
		ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						errmsg("rate must not be null")));
	if (period == NULL)
		ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						errmsg("period must not be null")));
	if (store == NULL)
		ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						errmsg("store must not be null")));
	if (strcmp(store, "table") != 0 && strcmp(store, "shmem") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("unknown rate-limit store \"%s\"", RlMessageText(store)),
				 errhint("The stores are table and shmem.")));
	if (strcmp(store, "shmem") == 0 && algorithm == RL_ALGORITHM_SLIDING_WINDOW)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("sliding_window zones need the table store"),
				 errdetail("An exact sliding window keeps every admission; "
						   "a shmem entry has a fixed size."),
				 errhint("Use store => 'table', or sliding_window_counter in shared memory.")));

	if (!burst_null && burst <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("burst must be greater than zero"),
				 errdetail("burst is " INT64_FORMAT ".", burst)));
	WholeRate(rate, &whole_rate, &multiplier, &integer_part);
	if (!IntervalMicros(period, &period_us))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("period must be greater than zero and at most 285 years")));
	if (multiplier > 1)
	{
		char	   *rate_text = DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(rate)));

		/* A window counts whole requests: a longer window is another limit. */
		if (algorithm != RL_ALGORITHM_TOKEN_BUCKET && algorithm != RL_ALGORITHM_GCRA)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("a %s zone needs a whole rate", algorithm_name),
					 errdetail("rate is %s; a window admits whole requests.", rate_text),
					 errhint("%s per %s is " INT64_FORMAT " per %s: use that window, "
							 "or token_bucket or gcra, which take fractional rates.",
							 rate_text, MicrosText(period_us), whole_rate,
							 period_us <= RL_MAX_PERIOD_US / multiplier
							 ? MicrosText(period_us * multiplier) : "more than 285 years")));
		if (period_us > RL_MAX_PERIOD_US / multiplier)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("period is too long for a rate of %s", rate_text),
					 errdetail("A fractional rate is counted as " INT64_FORMAT " per " INT64_FORMAT
							   " periods, which must be at most 285 years.", whole_rate, multiplier)));
		period_us *= multiplier;
		/* The capacity defaults to the whole requests of one period, at least one. */
		if (burst_null)
		{
			burst_null = false;
			burst = Max(integer_part, 1);
		}
	}

	switch (rl_zone_limit(algorithm, whole_rate, period_us, burst_null ? -1 : burst, limit))
	{
		case RL_ZONE_OK:
			if (strcmp(store, "shmem") == 0 && algorithm == RL_ALGORITHM_CONCURRENCY &&
				limit->capacity > RL_SHMEM_LEASE_SLOTS)
				ereport(ERROR,
						(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
						 errmsg("a concurrency zone in shared memory has at most %d slots",
								RL_SHMEM_LEASE_SLOTS),
						 errdetail("Each key keeps room for all its leases in a fixed-size entry."),
						 errhint("Use store => 'table' for more slots (up to " INT64_FORMAT ").",
								 RL_CONCURRENCY_MAX_SLOTS)));
			return;
		case RL_ZONE_RATE_INVALID:
			ereport(ERROR,
					(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
					 errmsg("rate is out of range"),
					 errdetail("rate is " INT64_FORMAT " per period; the largest is " INT64_FORMAT ".",
							   whole_rate, RL_MAX_LIMIT)));
			break;
		case RL_ZONE_PERIOD_INVALID:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("period must be greater than zero and at most 285 years")));
			break;
		case RL_ZONE_BURST_NOT_APPLICABLE:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("burst does not apply to %s", RlMessageText(algorithm_name)),
					 errhint("burst is the capacity of token_bucket and gcra zones; "
							 "window algorithms admit rate per period.")));
			break;
		case RL_ZONE_BURST_INVALID:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("burst must be greater than zero and refill within 285 years"),
					 errdetail("burst is " INT64_FORMAT ".", burst)));
			break;
		case RL_ZONE_TOO_MANY_SLOTS:
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("rate " INT64_FORMAT " is too many slots for a concurrency zone", whole_rate),
					 errdetail("A concurrency zone keeps every lease of a key in its state; "
							   "its largest rate is " INT64_FORMAT " slots.", RL_CONCURRENCY_MAX_SLOTS)));
			break;
		case RL_ZONE_LIMIT_TOO_LARGE_FOR_EXACT:
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("rate " INT64_FORMAT " is too large for an exact sliding window", whole_rate),
					 errdetail("An exact sliding window keeps every admission; its largest rate is "
							   INT64_FORMAT ".", RL_SLIDING_WINDOW_MAX_LIMIT),
					 errhint("Use sliding_window_counter, which keeps two counters.")));
			break;
	}
}

/* Counts the invalidations of the zone cache: see RlZoneGeneration. */
static uint64 zone_generation = 1;

static void
InvalidateZones(Datum arg, Oid relid)
{
	if (relid == InvalidOid || relid == zone_table_relid)
	{
		zone_generation++;
		if (zone_cache != NULL)
		{
			hash_destroy(zone_cache);
			zone_cache = NULL;
		}
		last_zone = NULL;
		/* The table itself may be gone (DROP EXTENSION): look it up again. */
		zone_table_relid = InvalidOid;
	}
}

void
RlZoneCacheInit(void)
{
	CacheRegisterRelcacheCallback(InvalidateZones, (Datum) 0);
}

static Oid
ZoneTable(void)
{
	if (!OidIsValid(zone_table_relid))
	{
		Oid			relid = RlInternalTable("zone");

		if (!OidIsValid(relid))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_TABLE),
					 errmsg("ratelimit zone table \"%s.zone\" does not exist", RL_INTERNAL_SCHEMA),
					 errhint("Run CREATE EXTENSION ratelimit in this database.")));
		zone_table_relid = relid;
	}
	return zone_table_relid;
}

/* Reads one zone from the table as its owner; false when there is none. */
static bool
LoadZone(const char *name, RlZone *zone)
{
	RlSpiSession session;
	Oid			argtypes[1] = {TEXTOID};
	Datum		values[1];
	SPIPlanPtr	plan;
	bool		found;

	values[0] = CStringGetTextDatum(name);
	RlSpiConnectAs(RlRelationOwner(ZoneTable()), &session);
	plan = RlKeepPlan(&zone_lookup_plan,
					  "SELECT zone_id, algorithm, rate, period, burst, store, history,"
					  " refill, refill_tick, shadow,"
					  /*
					   * Through the row's json: a server that runs this
					   * build before ALTER EXTENSION ratelimit UPDATE has
					   * zones of 0.5.0, which have no durable column.
					   */
					  " (pg_catalog.to_jsonb(z) OPERATOR(pg_catalog.->>) 'durable')::pg_catalog.bool"
					  " FROM " RL_INTERNAL_SCHEMA ".zone z"
					  " WHERE zone OPERATOR(pg_catalog.=) $1", 1, argtypes);
	if (SPI_execute_snapshot(plan, values, NULL, GetLatestSnapshot(),
							 InvalidSnapshot, true, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "ratelimit zone lookup failed");
	found = SPI_processed > 0;
	if (found)
	{
		HeapTuple	tuple = SPI_tuptable->vals[0];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		bool		burst_null;
		int64		burst;
		Datum		algorithm = SPI_getbinval(tuple, desc, 2, &isnull);
		Datum		store = SPI_getbinval(tuple, desc, 6, &isnull);
		Numeric		rate = DatumGetNumeric(SPI_getbinval(tuple, desc, 3, &isnull));
		Interval   *period = DatumGetIntervalP(SPI_getbinval(tuple, desc, 4, &isnull));

		burst = DatumGetInt64(SPI_getbinval(tuple, desc, 5, &burst_null));
		zone->zone_id = DatumGetInt32(SPI_getbinval(tuple, desc, 1, &isnull));
		zone->history = DatumGetBool(SPI_getbinval(tuple, desc, 7, &isnull));
		zone->shadow = DatumGetBool(SPI_getbinval(tuple, desc, 10, &isnull));
		zone->durable = DatumGetBool(SPI_getbinval(tuple, desc, 11, &isnull)) && !isnull;

		zone->store = strcmp(TextDatumGetCString(store), "shmem") == 0
			? RL_STORE_SHMEM : RL_STORE_TABLE;
		/* The table's CHECKs are looser than the algorithms: check again. */
		RlCheckZoneDefinition(TextDatumGetCString(algorithm), rate, period,
							burst_null, burst, TextDatumGetCString(store), &zone->limit);
		/* A key's leases do not fit the shmem store's fixed entries: a store of their own. */
		if (zone->store == RL_STORE_SHMEM && zone->limit.algorithm == RL_ALGORITHM_CONCURRENCY)
			zone->store = RL_STORE_SHMEM_LEASES;
		if (VARSIZE(rate) > sizeof(zone->rate))
			elog(ERROR, "rate of zone \"%s\" takes %u bytes", name, (unsigned) VARSIZE(rate));
		memcpy(zone->rate.bytes, rate, VARSIZE(rate));
		zone->period = *period;
		if (strcmp(TextDatumGetCString(SPI_getbinval(tuple, desc, 8, &isnull)), "cron") == 0 &&
			zone->limit.algorithm == RL_ALGORITHM_TOKEN_BUCKET && zone->store == RL_STORE_TABLE)
		{
			Datum		tick = SPI_getbinval(tuple, desc, 9, &isnull);

			zone->limit.algorithm = RL_ALGORITHM_CRON_TOKEN_BUCKET;
			if (isnull || !IntervalMicros(DatumGetIntervalP(tick), &zone->limit.refill_tick_us))
				zone->limit.refill_tick_us = 0;
		}
	}
	RlSpiFinish(&session);
	return found;
}

void
RlLookupZone(text *name, RlZone *zone)
{
	char		key[RL_MAX_ZONE_BYTES + 1];
	int			len = VARSIZE_ANY_EXHDR(name);
	ZoneCacheEntry *entry;
	bool		found;

	if (len == 0 || len > RL_MAX_ZONE_BYTES || memchr(VARDATA_ANY(name), '\0', len) != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("rate-limit zone \"%s\" does not exist", RlMessageTextOfText(name))));

	/*
	 * A transaction that already holds its locks takes in no invalidation
	 * until it ends; a zone change committed meanwhile must still apply to
	 * its next call.  Cheap when nothing is pending.
	 */
	AcceptInvalidationMessages();

	/* The entry is NUL-padded: equal bytes then a NUL is the same name. */
	if (last_zone != NULL && last_zone->name[len] == '\0' &&
		memcmp(last_zone->name, VARDATA_ANY(name), len) == 0)
	{
		*zone = last_zone->zone;
		return;
	}
	memset(key, 0, sizeof(key));
	memcpy(key, VARDATA_ANY(name), len);

	if (zone_cache == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(key);
		ctl.entrysize = sizeof(ZoneCacheEntry);
		zone_cache = hash_create("ratelimit zones", 16, &ctl, HASH_ELEM | HASH_BLOBS);
	}
	entry = hash_search(zone_cache, key, HASH_FIND, NULL);
	if (entry != NULL)
	{
		last_zone = entry;
		*zone = entry->zone;
		return;
	}

	if (!LoadZone(key, zone))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("rate-limit zone \"%s\" does not exist", key),
				 errhint("Create it with rl_zone_set().")));
	/*
	 * An invalidation taken in while reading dropped the cache: what we read
	 * may predate the change, so read again.
	 */
	if (zone_cache == NULL)
	{
		RlLookupZone(name, zone);
		return;
	}
	entry = hash_search(zone_cache, key, HASH_ENTER, &found);
	entry->zone = *zone;
	last_zone = entry;
}

uint64
RlZoneGeneration(void)
{
	return zone_generation;
}

/*
 * By name, through the zone cache: LoadZone is the one place that reads a
 * zone's options (the cache was dropped when the zone changed).
 */
bool
RlZoneDurableNow(int32 zone_id, bool if_missing)
{
	char	   *name = RlZoneNameOfId(zone_id);
	RlZone		zone;

	if (name == NULL)
		return if_missing;
	RlLookupZone(cstring_to_text(name), &zone);
	return zone.zone_id == zone_id ? zone.durable : if_missing;
}

char *
RlZoneNameOfId(int32 zone_id)
{
	static SPIPlanPtr plan = NULL;
	RlSpiSession session;
	Oid			argtypes[1] = {INT4OID};
	Datum		values[1];
	char	   *name = NULL;
	MemoryContext caller = CurrentMemoryContext;

	values[0] = Int32GetDatum(zone_id);
	RlSpiConnectAs(RlRelationOwner(ZoneTable()), &session);
	if (SPI_execute_snapshot(RlKeepPlan(&plan, "SELECT zone FROM " RL_INTERNAL_SCHEMA ".zone"
										" WHERE zone_id OPERATOR(pg_catalog.=) $1", 1, argtypes),
							 values, NULL, GetLatestSnapshot(), InvalidSnapshot, true, false, 1)
		!= SPI_OK_SELECT)
		elog(ERROR, "ratelimit zone lookup failed");
	if (SPI_processed > 0)
		name = MemoryContextStrdup(caller,
								   SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1));
	RlSpiFinish(&session);
	return name;
}
