/*
 * algorithms.c -- the core's algorithms over stored rows.  Each callback
 * turns the stored row into the core's state, runs the algorithm, and turns
 * the new state back into a row; it writes nothing itself, so a store can
 * run it again on a newer row.
 */
#include "postgres.h"

#include "miscadmin.h"

#include "base/args.h"
#include "base/pg_compat.h"
#include "decision/algorithms.h"
#include "store/shmem_leases.h"

/* A fixed-size state as the row keeps it, and back. */
static RlCounterState
CounterStateOf(const RlStateRow *row)
{
	RlCounterState state;

	state.a = row->tokens;
	state.fraction = row->fraction;
	state.stamp_us = row->stamp;
	state.b = row->counter;
	return state;
}

static void
SetCounterRow(const RlZoneLimit *limit, const RlCounterState *state, RlStateRow *row)
{
	row->tokens = state->a;
	row->fraction = state->fraction;
	row->stamp = state->stamp_us;
	row->counter = state->b;
	row->entries = NULL;
	row->refill_pending = rl_counter_needs_refill(limit, state);
}

/* The exact sliding window's head row: its header, and what it counts. */
static void
SetWindowRow(const RlSlidingWindowState *window, RlStateRow *row)
{
	bytea	   *header = palloc(VARHDRSZ + RL_SW_MAX_HEADER_BYTES);

	SET_VARSIZE(header, VARHDRSZ + rl_sw_encode_header(window, (uint8_t *) VARDATA(header)));
	row->tokens = window->admitted;
	row->fraction = 0.0;
	row->stamp = window->stamp_us;
	row->counter = rl_sw_chunk_count(window);
	row->entries = header;
	row->refill_pending = false;
}

bool
RlDecideTokenBucket(const RlStateRow *prior, RlStateRow *next, void *arg, RlStateAccess *access)
{
	RlCall	   *call = (RlCall *) arg;
	RlTokenBucketState prior_state;
	RlTokenBucketDecision decision;

	if (prior != NULL)
	{
		prior_state.tokens = prior->tokens;
		prior_state.fraction = prior->fraction;
		prior_state.stamp_us = prior->stamp;
	}
	decision = rl_token_bucket_take(prior != NULL ? &prior_state : NULL, call->request.now,
									&call->request.limit.bucket, call->cost);
	memset(&call->decision, 0, sizeof(call->decision));
	call->decision.allowed = decision.allowed;
	call->decision.remaining = decision.remaining;
	call->decision.state_changed = decision.state_changed;
	next->tokens = decision.next.tokens;
	next->fraction = decision.next.fraction;
	next->stamp = decision.next.stamp_us;
	next->counter = 0;
	next->entries = NULL;
	next->refill_pending = false;
	return decision.state_changed;
}

bool
RlDecideCounter(const RlStateRow *prior, RlStateRow *next, void *arg, RlStateAccess *access)
{
	RlCall	   *call = (RlCall *) arg;
	const RlZoneLimit *limit = &call->request.limit.zone;
	RlCounterState prior_state;
	RlCounterState next_state;

	if (prior != NULL)
		prior_state = CounterStateOf(prior);
	call->decision = rl_counter_take(limit, prior != NULL ? &prior_state : NULL,
									 call->request.now, call->cost, &next_state);
	SetCounterRow(limit, &next_state, next);
	return call->decision.state_changed;
}

static void
ReportCorruptState(const RlCall *call)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("rate-limit state of key \"%s\" in zone \"%s\" is corrupt",
					RlMessageTextOfText(call->request.key.key), RlMessageText(call->what)),
			 errhint("rl_reset() forgets the key's state.")));
}

/*
 * Decodes the head row, hands the algorithm the sealed chunks it asks for
 * (read ahead in doubling batches, so a call that expires many chunks reads
 * each once), and encodes the new head row.
 */
bool
RlDecideSlidingWindow(const RlStateRow *prior, RlStateRow *next, void *arg, RlStateAccess *access)
{
	RlCall	   *call = (RlCall *) arg;
	RlSlidingWindowState *window = call->window;
	RlSwDecision *result = call->window_result;
	RlSwChunk  *chunks = NULL;
	int32		loaded = 0;

	if (prior == NULL)
		rl_sw_init(window);
	else if (prior->entries == NULL ||
			 !rl_sw_decode_header((const uint8_t *) VARDATA_ANY(prior->entries),
								  VARSIZE_ANY_EXHDR(prior->entries),
								  prior->tokens, prior->stamp, window))
		ReportCorruptState(call);

	for (;;)
	{
		uint32		available;
		int32		wanted;

		if (!rl_sw_take(&call->request.limit.zone, window, call->request.now, call->cost,
						chunks, loaded, result))
			ReportCorruptState(call);
		if (result->need_chunks == 0)
			break;
		available = rl_sw_chunk_count(window);
		wanted = Min((int32) available, Max(result->need_chunks, 2 * loaded));
		if (wanted <= loaded || access == NULL)
			ReportCorruptState(call);
		chunks = chunks == NULL ? palloc(sizeof(RlSwChunk) * wanted)
			: repalloc(chunks, sizeof(RlSwChunk) * wanted);
		for (; loaded < wanted; loaded++)
		{
			RlStateRow	row;

			if (!access->read_part(access, (int32) rl_sw_chunk_seq(window->first_chunk, loaded), &row) ||
				row.entries == NULL)
				ReportCorruptState(call);
			chunks[loaded].bytes = (const uint8_t *) VARDATA_ANY(row.entries);
			chunks[loaded].len = VARSIZE_ANY_EXHDR(row.entries);
		}
	}
	call->decision = result->decision;
	if (!result->decision.state_changed && !call->holding)
		return false;

	SetWindowRow(window, next);
	return true;
}

/* What a call of cost 0 sees on prior (next: its state); the call's cost stays. */
static bool
DecideAtCostZero(RlCall *call, const RlStateRow *prior, RlStateRow *next, RlStateAccess *access)
{
	int64		cost = call->cost;
	bool		changed;

	call->cost = 0;
	changed = call->algorithm(prior, next, call, access);
	call->cost = cost;
	return changed;
}

bool
RlRefundCounter(const RlStateRow *prior, RlStateRow *next, void *arg, RlStateAccess *access)
{
	RlCall	   *call = (RlCall *) arg;
	const RlZoneLimit *limit = &call->request.limit.zone;
	RlCounterState prior_state;
	RlCounterState next_state;

	/* A key never seen is full: nothing to give back. */
	if (prior == NULL)
	{
		(void) DecideAtCostZero(call, NULL, next, access);
		return false;
	}
	prior_state = CounterStateOf(prior);
	call->decision = rl_counter_refund(limit, &prior_state, call->request.now, call->cost,
									   &next_state);
	SetCounterRow(limit, &next_state, next);
	return call->decision.state_changed;
}

bool
RlRefundSlidingWindow(const RlStateRow *prior, RlStateRow *next, void *arg, RlStateAccess *access)
{
	RlCall	   *call = (RlCall *) arg;
	RlSlidingWindowState *window = call->window;

	/* A key never seen is full: nothing to give back. */
	if (prior == NULL)
	{
		(void) DecideAtCostZero(call, NULL, next, access);
		return false;
	}
	if (prior->entries == NULL ||
		!rl_sw_decode_header((const uint8_t *) VARDATA_ANY(prior->entries),
							 VARSIZE_ANY_EXHDR(prior->entries),
							 prior->tokens, prior->stamp, window) ||
		!rl_sw_refund(&call->request.limit.zone, window, call->request.now, call->cost,
					  &call->decision))
		ReportCorruptState(call);
	if (!call->decision.state_changed)
		return false;
	SetWindowRow(window, next);
	return true;
}

bool
RlHoldKey(const RlStateRow *prior, RlStateRow *next, void *arg, RlStateAccess *access)
{
	RlCall	   *call = (RlCall *) arg;
	RlDecision	decision = call->decision;

	if (prior != NULL)
		return false;
	/* A call of cost 0 on a key never seen: its next state is that key's. */
	call->holding = true;
	(void) DecideAtCostZero(call, NULL, next, access);
	call->holding = false;
	call->decision = decision;
	return true;
}

void
RlApplyChunkChanges(const RlCall *call, const RlStore *store)
{
	const RlSwDecision *result = call->window_result;
	RlStateKey	part = call->request.key;

	for (int32 i = 0; i < result->consumed_chunks; i++)
	{
		part.part = (int32) rl_sw_chunk_seq(result->consumed_from, (uint32) i);
		(void) store->remove_part(&part);
	}
	if (result->sealed)
	{
		RlStateRow	row;
		bytea	   *bytes = palloc(VARHDRSZ + result->sealed_len);

		SET_VARSIZE(bytes, VARHDRSZ + result->sealed_len);
		memcpy(VARDATA(bytes), result->sealed_bytes, result->sealed_len);
		row.tokens = 0;
		row.fraction = 0.0;
		row.stamp = call->request.now;
		row.counter = 0;
		row.entries = bytes;
		row.refill_pending = false;
		part.part = (int32) result->sealed_seq;
		store->write_part(&part, &row);
	}
}

void
RlForgetChunks(const RlCall *call, const RlStore *store, const RlStateRow *removed)
{
	RlSlidingWindowState *window = palloc(sizeof(RlSlidingWindowState));

	/* A corrupt head leaves its chunks to rl_gc. */
	if (removed->entries != NULL &&
		rl_sw_decode_header((const uint8_t *) VARDATA_ANY(removed->entries),
							VARSIZE_ANY_EXHDR(removed->entries), removed->tokens,
							removed->stamp, window))
	{
		uint32		count = rl_sw_chunk_count(window);
		RlStateKey	part = call->request.key;

		for (uint32 i = 0; i < count; i++)
		{
			part.part = (int32) rl_sw_chunk_seq(window->first_chunk, i);
			(void) store->remove_part(&part);
		}
	}
}

/* ---- Leases (concurrency zones) ---- */

RlLease *
RlLeasesOfBytes(const bytea *bytes, int32 *count)
{
	int32		len = bytes != NULL ? VARSIZE_ANY_EXHDR(bytes) : 0;
	int32		room = len / RL_LEASE_BYTES + 1;	/* and one more: an acquire appends it */
	RlLease    *leases = palloc(sizeof(RlLease) * room);

	if (!rl_leases_decode(bytes != NULL ? (const uint8_t *) VARDATA_ANY(bytes) : NULL, len,
						  leases, room, count))
		return NULL;
	return leases;
}

/* The key's leases, those of sessions that are gone marked lapsed. */
static RlLease *
LeasesOf(const RlCall *call, const RlStateRow *row, int32 *count)
{
	RlLease    *leases = RlLeasesOfBytes(row != NULL ? row->entries : NULL, count);

	if (leases == NULL)
		ReportCorruptState(call);
	for (int32 i = 0; i < *count; i++)
		if (leases[i].holder_pid != 0 &&
			!RlLeaseHolderAlive(leases[i].holder_pid, leases[i].holder_proc))
			leases[i].expires_us = PG_INT64_MIN;
	return leases;
}

static void
SetLeasesRow(const RlLease *leases, int32 count, int64 stamp, RlStateRow *row)
{
	row->tokens = count;
	row->fraction = 0.0;
	row->stamp = stamp;
	row->counter = 0;
	row->refill_pending = false;
	row->entries = NULL;
	if (count > 0)
	{
		bytea	   *bytes = palloc(VARHDRSZ + (Size) count * RL_LEASE_BYTES);

		SET_VARSIZE(bytes, VARHDRSZ + rl_leases_encode(leases, count, (uint8_t *) VARDATA(bytes)));
		row->entries = bytes;
	}
}

bool
RlAcquireLease(const RlStateRow *prior, RlStateRow *next, void *arg, RlStateAccess *access)
{
	RlCall	   *call = (RlCall *) arg;
	int32		count;
	RlLease    *leases = LeasesOf(call, prior, &count);
	int64		decided_at = Max(call->request.now, prior != NULL ? prior->stamp : PG_INT64_MIN);

	/* From the decision's instant, as every time the core reports. */
	call->lease.expires_us = decided_at > PG_INT64_MAX - call->lease_ttl_us
		? PG_INT64_MAX : decided_at + call->lease_ttl_us;
	call->decision = rl_leases_acquire(&call->request.limit.zone, leases, &count,
									   prior != NULL ? prior->stamp : PG_INT64_MIN, call->request.now,
									   &call->lease);
	SetLeasesRow(leases, count, call->decision.decided_at_us, next);
	return call->decision.state_changed;
}

bool
RlReleaseLease(const RlStateRow *prior, RlStateRow *next, void *arg, RlStateAccess *access)
{
	RlCall	   *call = (RlCall *) arg;
	int32		count;
	RlLease    *leases = LeasesOf(call, prior, &count);

	call->decision = rl_leases_release(&call->request.limit.zone, leases, &count,
									   prior != NULL ? prior->stamp : PG_INT64_MIN, call->request.now,
									   call->lease.nonce, &call->lease_released);
	SetLeasesRow(leases, count, call->decision.decided_at_us, next);
	return call->decision.state_changed;
}

bool
RlPeekLeases(const RlStateRow *prior, RlStateRow *next, void *arg, RlStateAccess *access)
{
	RlCall	   *call = (RlCall *) arg;
	int32		count;
	RlLease    *leases = LeasesOf(call, prior, &count);

	call->decision = rl_leases_peek(&call->request.limit.zone, leases, count,
									prior != NULL ? prior->stamp : PG_INT64_MIN, call->request.now);
	return false;
}
