/*
 * clock.c -- the decision clock.  Tests fix it with ratelimit.now_override,
 * so that every decision of a regression test is reproducible.
 */
#include "postgres.h"

#include "utils/datetime.h"

#include "base/args.h"
#include "base/clock.h"
#include "base/pg_compat.h"

static bool now_is_overridden = false;
static TimestampTz now_override = 0;

/*
 * Parses a timestamptz without raising: a GUC check hook must report bad
 * values through its return code, and at a configuration reload an error
 * would be FATAL.  PostgreSQL 15's DecodeDateTime raises for an unknown
 * time zone name rather than returning an error code, so that one error is
 * caught here; nothing it allocates outlives the call.
 */
static bool
ParseTimestampTz(const char *str, TimestampTz *result)
{
	char		workbuf[MAXDATELEN + MAXDATEFIELDS];
	char	   *field[MAXDATEFIELDS];
	int			ftype[MAXDATEFIELDS];
	int			nf;
	int			dtype = 0;
	struct pg_tm tt;
	fsec_t		fsec;
	int			tz;
	int			dterr = 0;
	MemoryContext context = CurrentMemoryContext;

	if (ParseDateTime(str, workbuf, sizeof(workbuf), field, ftype,
					  MAXDATEFIELDS, &nf) != 0)
		return false;
	PG_TRY();
	{
		dterr = RlDecodeDateTime(field, ftype, nf, &dtype, &tt, &fsec, &tz);
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(context);
		FlushErrorState();
		dterr = -1;
	}
	PG_END_TRY();
	if (dterr != 0)
		return false;
	switch (dtype)
	{
		case DTK_DATE:
			return tm2timestamp(&tt, fsec, &tz, result) == 0;
		case DTK_EPOCH:
			*result = SetEpochTimestamp();
			return true;
		default:
			return false;		/* infinity and -infinity make no clock */
	}
}

bool
RlCheckNowOverride(char **newval, void **extra, GucSource source)
{
	TimestampTz parsed;
	TimestampTz *stored;

	if (*newval == NULL || (*newval)[0] == '\0')
		return true;
	if (!ParseTimestampTz(*newval, &parsed))
	{
		GUC_check_errdetail("\"%s\" is not a finite timestamp with time zone.", RlMessageText(*newval));
		return false;
	}
	stored = RlGucMalloc(sizeof(TimestampTz));
	if (stored == NULL)
		return false;
	*stored = parsed;
	*extra = stored;
	return true;
}

void
RlAssignNowOverride(const char *newval, void *extra)
{
	now_is_overridden = (extra != NULL);
	if (extra != NULL)
		now_override = *(TimestampTz *) extra;
}

TimestampTz
RlNow(void)
{
	if (now_is_overridden)
		return now_override;
	/* The moment of the call, not of the transaction's start. */
	return GetCurrentTimestamp();
}

__int128
RlIntervalTotalMicros(const Interval *interval)
{
	return (__int128) interval->time + (__int128) interval->day * USECS_PER_DAY +
		(__int128) interval->month * DAYS_PER_MONTH * USECS_PER_DAY;
}
