/*
 * shmem_store.c -- the shmem store: rate-limit state in shared memory.
 *
 * Not transactional: a decision is final when the call returns, whatever
 * the transaction does.  The algorithms are the same as on the table store:
 * this store runs the same decide callbacks on a row kept in an entry of a
 * set-associative table (shmem_layout.h), under the set's spinlock.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/shmem.h"

#include "base/counters.h"
#include "base/pg_compat.h"
#include "base/settings.h"
#include "store/shmem_layout.h"
#include "store/shmem_store.h"

void
RlRequireShmemStore(void)
{
	if (rl_shmem == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the shmem store needs ratelimit in shared_preload_libraries"),
				 errhint("Add ratelimit to shared_preload_libraries in postgresql.conf "
						 "(shared_preload_libraries = 'ratelimit') and restart the server.")));
}

static void
SetEntryLimit(ShmemEntry *entry, const RlKeyLimit *limit)
{
	if (limit->is_bucket)
	{
		entry->limit_kind = RL_SHMEM_KIND_BUCKET;
		entry->limit.bucket = limit->bucket;
	}
	else
	{
		entry->limit_kind = (uint8) limit->zone.algorithm;
		entry->limit.zone.rate = limit->zone.rate;
		entry->limit.zone.period_us = limit->zone.period_us;
		entry->limit.zone.capacity = limit->zone.capacity;
	}
}

static void
SetEntryState(ShmemEntry *entry, const RlStateRow *row, const RlKeyLimit *limit)
{
	entry->tokens = row->tokens;
	entry->fraction = row->fraction;
	entry->stamp = row->stamp;
	entry->counter = row->counter;
	SetEntryLimit(entry, limit);
}

static void
FillEntry(ShmemEntry *entry, const ShmemKey *key, const RlKeyLimit *limit, const RlStateRow *row)
{
	memset(entry, 0, sizeof(*entry));
	entry->hash_high = key->hash_high;
	entry->dbid = key->dbid;
	entry->zone_id = key->zone_id;
	entry->tag = key->tag;
	entry->key_len = key->key_len;
	memcpy(entry->key, key->key, sizeof(entry->key));
	SetEntryState(entry, row, limit);
}

/* An ad-hoc bucket's parameters (NULL for any other key), and their length. */
static const char *
KeyParams(const RlStateKey *key, Size *len)
{
	*len = key->params != NULL ? VARSIZE_ANY_EXHDR(key->params) : 0;
	return key->params != NULL ? VARDATA_ANY(key->params) : NULL;
}

/*
 * The salt of an ad-hoc bucket's parameters (0 for any other key), kept for
 * the last parameters seen: callers mostly pass the same rate and window,
 * and a bucket then costs the hash of its id alone.
 */
static uint64
ParamsSalt(const RlStateKey *key)
{
	static char last[RL_MAX_PARAMS_BYTES];
	static Size last_len = 0;
	static uint64 last_salt = 0;
	Size		len;
	const char *params = KeyParams(key, &len);

	if (params == NULL)
		return 0;
	if (last_salt == 0 || len != last_len || memcmp(params, last, len) != 0)
	{
		Assert(len <= RL_MAX_PARAMS_BYTES);
		memcpy(last, params, len);
		last_len = len;
		last_salt = RlKeyParamsSalt(params, len);
	}
	return last_salt;
}

/*
 * The hash of a key, its zone and the database, keyed by the server's
 * secret: it picks the set and the tag.  An ad-hoc bucket's parameters salt
 * it: a call with other parameters has a bucket of its own.
 */
static uint64
KeyHash(const RlStateKey *key)
{
	return RlKeyPlacementHash(MyDatabaseId, key->zone_id, VARDATA_ANY(key->key),
							  VARSIZE_ANY_EXHDR(key->key), ParamsSalt(key));
}

/*
 * A key short enough is kept as it is (rl_keys shows it); an ad-hoc
 * bucket's parameters are then matched as its limit, which a bucket's
 * entry always holds (limit is the call's: NULL where the key has no
 * parameters).  A longer one is kept as the hash of its bytes, parameters
 * included.
 */
static void
MakeShmemKey(const RlStateKey *key, const RlKeyLimit *limit, uint64 hash, ShmemKey *out)
{
	int			key_len = VARSIZE_ANY_EXHDR(key->key);

	memset(out, 0, sizeof(*out));
	out->hash_high = (uint32) (hash >> 32);
	out->tag = TagOf(hash);
	out->dbid = MyDatabaseId;
	out->zone_id = key->zone_id;
	if (key_len <= RL_SHMEM_INLINE_KEY)
	{
		out->key_len = (uint8) key_len;
		memcpy(out->key, VARDATA_ANY(key->key), key_len);
		if (key->params != NULL)
		{
			Assert(limit != NULL && limit->is_bucket);
			out->match_bucket = true;
			out->bucket = limit->bucket;
		}
	}
	else
	{
		Size		params_len;
		const char *params = KeyParams(key, &params_len);
		uint64		digest[2];

		RlKeyDigest(VARDATA_ANY(key->key), key_len, params, params_len, digest);
		out->key_len = RL_SHMEM_KEY_HASHED;
		memcpy(out->key, digest, sizeof(digest));
	}
}

/*
 * The set's first line and the key's home entry are fetched from here on,
 * while the caller checks arguments and reads the clock: with 10k keys and
 * more they are rarely in the CPU's caches, and the two fetches overlap
 * instead of following each other (the entry's place is known before the
 * tags are read when the key sits in its home way, as most do).
 */
static void
ShmemLocate(RlStoreCall *call)
{
	call->located_hash = KeyHash(&call->key);
	call->located_set = 0;
	if (rl_shmem != NULL)
	{
		call->located_set = SetIndexOf((uint32) (call->located_hash >> 32),
									   pg_atomic_read_u64(&rl_shmem->shape));
#ifdef __GNUC__
		{
			ShmemSet   *set = SetAt(call->located_set);
			ShmemEntry *home = &set->entries[HomeWay(TagOf(call->located_hash))];

			__builtin_prefetch(set, 1);
			__builtin_prefetch(home, 0);
			__builtin_prefetch(&home->tokens, 1);
		}
#endif
	}
}

/* The entry of key in the set at index, which the caller holds locked. */
static ShmemEntry *
FindLocked(ShmemSet *set, uint32 index, const ShmemKey *key)
{
	int			way = FindInSet(set, key);

	if (way >= 0)
		return &set->entries[way];
	if (rl_overflow_heads[index] != 0)
	{
		WayRef	   *link = RlFindInChain(index, key);

		if (link != NULL)
			return ForeignEntry(*link);
	}
	return NULL;
}

/* The way or chain entry room was made in, for a new key. */
static ShmemEntry *
RoomEntry(ShmemSet *set, const RlRoom *room)
{
	return room->way >= 0 ? &set->entries[room->way] : ForeignEntry(*room->link);
}

/*
 * Runs decide on the key's state under its set's lock and stores the result
 * (unless peek).  decide must neither raise errors nor read parts: the
 * algorithms this store takes do neither.  A new key takes a free way of
 * its set, else the store grows, else a way another set lends it, else a
 * key of its set is forgotten for it (shmem_eviction.c); when none may be,
 * nothing is stored (RL_STORE_NO_ROOM).
 */
static RlStoreOutcome
ShmemDecide(RlStoreCall *call, RlDecideFn decide, void *arg, bool peek)
{
	const RlStateKey *key = &call->key;
	const RlKeyLimit *limit = &call->limit;
	TimestampTz now = call->now;
	ShmemKey	skey;
	ShmemSet   *set;
	uint32		set_index = call->located_set;
	ShmemEntry *found;
	RlStateRow	next;
	RlStoreOutcome outcome = RL_STORE_DECIDED;
	bool		grow = false;
	bool		need_room = false;
	bool		need_foreign_way = false;
	bool		searched = false;	/* no set had a way to lend */
	bool		stored_new = false;
	WayRef		reserved = 0;	/* a way lent by another set, not linked yet */
	RlEvicted	evicted = {0};	/* a key forgotten for this one */

	RlRequireShmemStore();
	MakeShmemKey(key, &call->limit, call->located_hash, &skey);

retry:
	set = LockKeySet(skey.hash_high, &set_index);
	/* decide neither raises nor allocates for the algorithms this store takes. */
	found = FindLocked(set, set_index, &skey);
	if (found != NULL)
	{
		RlStateRow	current;

		EntryRow(found, &current);
		if (decide(&current, &next, arg, NULL) && !peek)
			SetEntryState(found, &next, limit);
	}
	else if (decide(NULL, &next, arg, NULL) && !peek)
	{
		int			claimed = RlFreeWay(set, skey.tag);
		RlRoom		room;

		if (claimed >= 0)
		{
			FillEntry(&set->entries[claimed], &skey, limit, &next);
			set->tags[claimed] = skey.tag;
			grow = RlSetKeys(set) > RL_SHMEM_GROW_AT;
			stored_new = true;
		}
		else if (!RlStoreFullyGrown())
			need_room = true;
		else if (reserved != 0)
		{
			FillEntry(ForeignEntry(reserved), &skey, limit, &next);
			RlLinkForeign(set_index, reserved);
			reserved = 0;
			stored_new = true;
		}
		else if (RlLeastHarm(set, set_index, &skey, now, searched || RlStoreKnownFull(now), &room))
		{
			ShmemEntry *entry = RoomEntry(set, &room);
			WayRef		chain_next = entry->overflow_next;

			FillEntry(entry, &skey, limit, &next);
			if (room.way >= 0)
				set->tags[room.way] = skey.tag;
			else
				entry->overflow_next = chain_next;
			evicted = room.evicted;
			stored_new = true;
		}
		else if (!searched && !RlStoreKnownFull(now))
			need_foreign_way = true;
		else
			outcome = RL_STORE_NO_ROOM;
	}
	SpinLockRelease(&set->mutex);
	if (need_room)
	{
		/*
		 * Splits in order until this set's turn, unless room appears first;
		 * once the store is fully grown, the retry borrows or evicts.
		 */
		(void) RlGrowStore(true, skey.hash_high);
		need_room = false;
		goto retry;
	}
	if (need_foreign_way)
	{
		/* No lock held while searching; the retry decides again. */
		need_foreign_way = false;
		reserved = RlReserveForeignWay(set_index, now, &evicted);
		RlCountEvicted(&evicted);
		evicted.any = false;
		searched = reserved == 0;
		goto retry;
	}
	if (reserved != 0)
		RlReleaseForeignWay(reserved);	/* the key found room at home, or nothing was stored */
	if (grow)
		(void) RlGrowStore(false, 0);
	if (evicted.any && evicted.dbid == MyDatabaseId && evicted.zone_id == key->zone_id)
	{
		/* A zone's key for another of its keys: it holds as many as before. */
		stored_new = false;
		evicted.keys_replaced = true;
	}
	if (stored_new)
		RlCountAdd(MyDatabaseId, key->zone_id, RL_COUNT_KEYS, 1);
	if (evicted.any)
		RlCountEvicted(&evicted);
	if (outcome == RL_STORE_NO_ROOM)
		RlCount(MyDatabaseId, key->zone_id, RL_COUNT_FULL);
	return outcome;
}

static int
CompareSetIndexes(const void *a, const void *b)
{
	uint32		x = *(const uint32 *) a;
	uint32		y = *(const uint32 *) b;

	return x < y ? -1 : x > y;
}

/* Holding a key can lose to an eviction in between only so often. */
#define MAX_HOLD_ATTEMPTS 8

/*
 * Every key gets an entry first (hold); then the sets of all keys are
 * locked at once, in ascending order as a split locks its two sets, so no
 * two backends wait for each other.  A key evicted or moved by a split
 * between the two steps sends us round again.
 */
static bool
ShmemUpdateTogether(RlStoreCall **calls, void **args, int n, RlDecideFn decide,
					RlDecideFn hold, RlAdmitFn admit, void *admit_arg,
					RlStoreOutcome *outcomes)
{
	ShmemKey   *keys = palloc(sizeof(ShmemKey) * n);
	uint32	   *key_sets = palloc(sizeof(uint32) * n);
	uint32	   *sets = palloc(sizeof(uint32) * n);
	ShmemEntry **entries = palloc(sizeof(ShmemEntry *) * n);
	RlStateRow *next = palloc(sizeof(RlStateRow) * n);
	bool	   *changed = palloc(sizeof(bool) * n);

	RlRequireShmemStore();
	for (int i = 0; i < n; i++)
	{
		MakeShmemKey(&calls[i]->key, &calls[i]->limit, calls[i]->located_hash, &keys[i]);
		outcomes[i] = RL_STORE_DECIDED;
	}
	for (int attempt = 0;; attempt++)
	{
		bool		no_room = false;
		bool		lost = false;
		bool		admitted;
		uint64		shape;
		int			nsets = 0;

		for (int i = 0; i < n; i++)
		{
			if (ShmemDecide(calls[i], hold, args[i], false) == RL_STORE_NO_ROOM)
			{
				outcomes[i] = RL_STORE_NO_ROOM;
				no_room = true;
			}
		}
		if (no_room)
			return false;

		shape = pg_atomic_read_u64(&rl_shmem->shape);
		for (int i = 0; i < n; i++)
			sets[i] = key_sets[i] = SetIndexOf(keys[i].hash_high, shape);
		qsort(sets, n, sizeof(uint32), CompareSetIndexes);
		for (int i = 0; i < n; i++)
			if (nsets == 0 || sets[nsets - 1] != sets[i])
				sets[nsets++] = sets[i];
		for (int j = 0; j < nsets; j++)
		{
			SpinLockAcquire(&SetAt(sets[j])->mutex);
			MarkSetChanged(sets[j]);
		}
		shape = pg_atomic_read_u64(&rl_shmem->shape);
		for (int i = 0; i < n && !lost; i++)
		{
			entries[i] = NULL;
			if (SetIndexOf(keys[i].hash_high, shape) == key_sets[i])
				entries[i] = FindLocked(SetAt(key_sets[i]), key_sets[i], &keys[i]);
			lost = entries[i] == NULL;
		}
		if (lost)
		{
			for (int j = nsets - 1; j >= 0; j--)
				SpinLockRelease(&SetAt(sets[j])->mutex);
			if (attempt + 1 < MAX_HOLD_ATTEMPTS)
				continue;
			ereport(ERROR,
					(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					 errmsg("could not hold the keys of a rate-limit call on several zones"),
					 errdetail("The shmem store evicted or moved one of them %d times in a row.",
							   MAX_HOLD_ATTEMPTS),
					 errhint("The store is short of room: raise ratelimit.shmem_max_keys.")));
		}
		/* decide and admit neither raise nor allocate: the spinlocks are held. */
		for (int i = 0; i < n; i++)
		{
			RlStateRow	current;

			EntryRow(entries[i], &current);
			changed[i] = decide(&current, &next[i], args[i], NULL);
		}
		admitted = admit(admit_arg);
		if (admitted)
			for (int i = 0; i < n; i++)
				if (changed[i])
					SetEntryState(entries[i], &next[i], &calls[i]->limit);
		for (int j = nsets - 1; j >= 0; j--)
			SpinLockRelease(&SetAt(sets[j])->mutex);
		return admitted;
	}
}

/*
 * A store that refuses keys is a misconfiguration an operator must hear
 * of, but a flood of new keys must not flood the log: one WARNING every
 * RL_FULL_WARNING_INTERVAL for the whole server (counted per zone always).
 */
#define RL_FULL_WARNING_INTERVAL (10 * USECS_PER_SEC)

static void
WarnStoreFull(const char *what, const char *policy)
{
	TimestampTz real_now = GetCurrentTimestamp();
	uint64		last = pg_atomic_read_u64(&rl_shmem->last_full_warning);

	if (real_now - (TimestampTz) last < RL_FULL_WARNING_INTERVAL ||
		!pg_atomic_compare_exchange_u64(&rl_shmem->last_full_warning, &last, (uint64) real_now))
		return;
	ereport(WARNING,
			(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
			 errmsg("the ratelimit shmem store is full: a new key of %s found no room", what),
			 errdetail("Every key it could take room from would refuse its next call: the zone holds at least "
					   "as many keys as any other in the key's set, and they are drained.  "
					   "ratelimit.shmem_full_policy = %s.  rl_counters counts these calls "
					   "per zone in \"full\"; this warning is repeated at most every 10 seconds.",
					   policy),
			 errhint("Raise ratelimit.shmem_max_keys (now %d; a restart is needed).",
					 rl_shmem_max_keys)));
}

/*
 * A new key found no room in the shmem store: ratelimit.shmem_full_policy
 * says what the call gets (allow: the decision for a new key, unstored).
 */
static void
ShmemNoRoom(RlDecision *decision, const char *what)
{
	switch (rl_shmem_full_policy)
	{
		case RL_SHMEM_FULL_ALLOW:
			WarnStoreFull(what, "allow: this call was decided as for a new key and its key is not limited");
			break;
		case RL_SHMEM_FULL_DENY:
			decision->allowed = false;
			decision->remaining = 0;
			decision->retry_after_us = USECS_PER_SEC;
			WarnStoreFull(what, "deny: this call was refused");
			break;
		case RL_SHMEM_FULL_ERROR:
			ereport(ERROR,
					(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
					 errmsg("the ratelimit shmem store has no room for a new key of %s", what),
					 errdetail("The store holds ratelimit.shmem_max_keys = %d keys, and every key the new one "
							   "could push out would refuse its next call.",
							   rl_shmem_max_keys),
					 errhint("Raise ratelimit.shmem_max_keys (a restart is needed), or set "
							 "ratelimit.shmem_full_policy to allow or deny.")));
	}
}

static bool
ShmemRemove(const RlStateKey *key, RlStateRow *removed)
{
	ShmemKey	skey;
	ShmemSet   *set;
	int			index;

	uint32		set_index;
	bool		existed = false;

	/* A removed head row is read only for parts, which no shmem key has. */
	memset(removed, 0, sizeof(*removed));
	RlRequireShmemStore();
	Assert(key->params == NULL);	/* zones' keys only (rl_reset, rl_zone_drop) */
	MakeShmemKey(key, NULL, KeyHash(key), &skey);
	set_index = SetIndexOf(skey.hash_high, pg_atomic_read_u64(&rl_shmem->shape));
	set = LockKeySet(skey.hash_high, &set_index);
	index = FindInSet(set, &skey);
	if (index >= 0)
	{
		RlFreeEntry(set, index);
		existed = true;
	}
	else
	{
		WayRef	   *link = RlFindInChain(set_index, &skey);

		if (link != NULL)
		{
			RlUnlinkForeign(link);
			existed = true;
		}
	}
	SpinLockRelease(&set->mutex);
	if (existed)
		RlCountAdd(MyDatabaseId, key->zone_id, RL_COUNT_KEYS, -1);
	return existed;
}

/*
 * Visits this database's entries of a zone: removes them (relimit NULL) or
 * gives them a new limit.  Returns how many it visited.
 */
static int64
VisitZoneEntries(int32 zone_id, const RlZoneLimit *relimit)
{
	int64		visited = 0;
	uint64		shape;
	RlKeyLimit limit = {.is_bucket = false};

	if (rl_shmem == NULL)
		return 0;
	if (relimit != NULL)
		limit.zone = *relimit;
	LWLockAcquire(rl_grow_lock, LW_SHARED);
	shape = pg_atomic_read_u64(&rl_shmem->shape);
	for (uint32 s = NextSetInUse(0, shape); s < rl_shmem->nsets; s = NextSetInUse(s + 1, shape))
	{
		ShmemSet   *set = SetAt(s);

		SpinLockAcquire(&set->mutex);
		MarkSetChanged(s);
		for (int i = 0; i < RL_SHMEM_WAYS; i++)
		{
			ShmemEntry *entry = &set->entries[i];

			if (!NativeTag(set->tags[i]) || entry->dbid != MyDatabaseId || entry->zone_id != zone_id)
				continue;
			if (relimit == NULL)
				RlFreeEntry(set, i);
			else
				SetEntryLimit(entry, &limit);
			visited++;
		}
		for (WayRef *link = &rl_overflow_heads[s]; *link != 0;)
		{
			ShmemEntry *entry = ForeignEntry(*link);

			if (entry->dbid != MyDatabaseId || entry->zone_id != zone_id)
				link = &entry->overflow_next;
			else
			{
				visited++;
				if (relimit == NULL)
					RlUnlinkForeign(link);	/* *link is now the next one */
				else
				{
					SetEntryLimit(entry, &limit);
					link = &entry->overflow_next;
				}
			}
		}
		SpinLockRelease(&set->mutex);
	}
	LWLockRelease(rl_grow_lock);
	if (relimit == NULL)
		RlCountAdd(MyDatabaseId, zone_id, RL_COUNT_KEYS, -visited);
	return visited;
}

static void
ShmemForgetZone(int32 zone_id)
{
	(void) VisitZoneEntries(zone_id, NULL);
}

static void
ShmemRelimitZone(int32 zone_id, const RlZoneLimit *limit)
{
	(void) VisitZoneEntries(zone_id, limit);
}

/*
 * The set a key belongs to once every set is in use (a store that is still
 * growing holds it in the set this one splits from).
 */
int32
RlShmemPlacement(int32 zone_id, text *key)
{
	RlStateKey	state_key = {key, zone_id, 0, NULL, false};

	RlRequireShmemStore();
	return (int32) FinalSetIndexOf((uint32) (KeyHash(&state_key) >> 32));
}

static RlStoreOutcome
ShmemUpdate(RlStoreCall *call, RlDecideFn decide, void *arg)
{
	return ShmemDecide(call, decide, arg, false);
}

static void
ShmemRead(RlStoreCall *call, RlDecideFn decide, void *arg)
{
	(void) ShmemDecide(call, decide, arg, true);
}

/* Nothing is cached per transaction: every decision is in shared memory already. */
static void
ShmemFlushZone(int32 zone_id)
{
}

const RlStore RlShmemStore = {
	.name = "shmem",
	.writes_tables = false,
	.locate = ShmemLocate,
	.update = ShmemUpdate,
	.update_together = ShmemUpdateTogether,
	.read = ShmemRead,
	.remove = ShmemRemove,
	.write_part = NULL,
	.remove_part = NULL,
	.forget_zone = ShmemForgetZone,
	.relimit_zone = ShmemRelimitZone,
	.flush_zone = ShmemFlushZone,
	.no_room = ShmemNoRoom,
};
