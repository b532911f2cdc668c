/*
 * shmem_eviction.c -- which key of a full set makes room for a new one.
 *
 * Callers choose keys, so a caller with many keys can fill the store.  The
 * store must then forget something, and what it forgets decides what the
 * flood achieves.  nginx forgets the least recently used state, which
 * hands a flooder every key it pushes out; a full store that refuses new
 * keys locks everyone out; one that admits them unlimited switches the
 * limits off.  Here:
 *
 *   1. A key that has fully recovered tells nothing (it decides as a new
 *      key would): it goes first, whoever's it is.
 *   2. Otherwise room is taken by fair shares: from the zone (of a
 *      database) that holds the most keys among those with keys in the new
 *      key's set, when it holds more than the new key's own zone; else
 *      from the new key's own zone.  A flood in one zone fills the store
 *      with its keys, becomes the largest, and from then on makes room only
 *      out of its own keys: a zone or database holding fewer keys than the
 *      flooding one never loses a key to it.
 *   3. Within the zone that gives room, the key with the smallest debt
 *      goes: the fewest tokens missing from its full allowance (for a
 *      window, the least counted), a key that would refuse its next call
 *      only once no other is left.  Forgetting a key lets through at most
 *      its missing tokens more than the limit would have (rl_counters
 *      counts them, "forgiven").  Between keys missing as many whole
 *      tokens, a key that still admits goes first when it is closer to
 *      full; drained keys, all missing the whole capacity, go in random
 *      order: whoever drained a key cannot make it the one forgotten.
 *   4. When the new key's own zone gives room and even its cheapest key
 *      would refuse its next call, nothing is forgotten:
 *      ratelimit.shmem_full_policy decides the new key's call.  That is a
 *      flood of drained keys, whose state is worth more than a new key's.
 *
 * The candidates are the keys of the new key's set and its overflow chain
 * (about 31), under the set's lock, with no global lock.  Once the store is
 * full, 2 and 3 first weigh 8 of them, from a way drawn at random, and take
 * the key chosen among those when it would still admit a call: a flood's
 * keys are nearly all of every set, and weighing all 31 (62 cache lines)
 * made a call that evicts cost 2.5 times a call that finds its key.  When
 * the 8 would all refuse, the whole set and its chain decide, so that a
 * drained key goes only when none of its zone's keys in the set admits.
 * Keys are weighed quickly (rl_counter_weigh); the exact debt is worked out
 * for a key found recovered and for the one chosen.  The keys each zone holds are counted in shared memory
 * (counters.c), read without a lock: an estimate that is exact when calls
 * are not racing.
 */
#include "postgres.h"

#include "common/pg_prng.h"

#include "base/counters.h"
#include "store/shmem_layout.h"

/* At most this many keys of a set and its chain are weighed. */
#define MAX_CANDIDATES 64

/* The quick way weighs this many keys of a set (of 31). */
#define SAMPLED_KEYS 8

typedef struct Candidate
{
	ShmemEntry *entry;
	int			way;			/* a way of the set, or -1: an entry of its chain */
	WayRef	   *link;			/* the chain's link to it */
	int			group;
	RlKeyDebt	debt;
	uint32		lot;			/* drawn at random: the last tie-break */
} Candidate;

/* The keys of one zone of one database among the candidates. */
typedef struct Group
{
	Oid			dbid;
	int32		zone_id;
	int64		keys;			/* the keys it holds in the whole store */
} Group;

/* The key's debt (exact: weigh false), or its quicker weighing (rl_counter_weigh). */
static RlKeyDebt
EntryDebtOrWeight(const ShmemEntry *entry, TimestampTz now, bool weigh)
{
	if (entry->limit_kind == RL_SHMEM_KIND_BUCKET)
	{
		RlTokenBucketState state = RlEntryBucketState(entry);

		return weigh ? rl_token_bucket_weigh(&state, now, &entry->limit.bucket)
			: rl_token_bucket_debt(&state, now, &entry->limit.bucket);
	}
	else
	{
		RlCounterState state = RlEntryCounterState(entry);
		RlZoneLimit limit = RlEntryZoneLimit(entry);

		return weigh ? rl_counter_weigh(&limit, &state, now) : rl_counter_debt(&limit, &state, now);
	}
}

RlKeyDebt
RlEntryDebt(const ShmemEntry *entry, TimestampTz now)
{
	return EntryDebtOrWeight(entry, now, false);
}

/*
 * Weighs a candidate, true when its key has recovered: its weighing says so
 * and its debt agrees (c->debt is then the debt).
 */
static bool
WeighCandidate(Candidate *c, TimestampTz now)
{
	c->debt = EntryDebtOrWeight(c->entry, now, true);
	if (!c->debt.idle)
		return false;
	c->debt = RlEntryDebt(c->entry, now);
	return c->debt.idle;
}

static void
NoteEvicted(RlRoom *room, const ShmemEntry *entry, const RlKeyDebt *debt)
{
	room->evicted.any = true;
	room->evicted.dbid = entry->dbid;
	room->evicted.zone_id = entry->zone_id;
	room->evicted.forgiven = debt->missing;
}

static int
GroupOf(Group *groups, int *ngroups, Oid dbid, int32 zone_id)
{
	for (int g = 0; g < *ngroups; g++)
		if (groups[g].dbid == dbid && groups[g].zone_id == zone_id)
			return g;
	groups[*ngroups].dbid = dbid;
	groups[*ngroups].zone_id = zone_id;
	groups[*ngroups].keys = RlCountOf(dbid, zone_id, RL_COUNT_KEYS);
	return (*ngroups)++;
}

/*
 * Whether a should go before b, by their weighings: a key that would still
 * admit a call before one that would refuse it, then the one closer to full;
 * keys that refuse in random order (a zone's all miss its whole capacity).
 */
static bool
Cheaper(const Candidate *a, const Candidate *b)
{
	if (a->debt.refusing != b->debt.refusing)
		return b->debt.refusing;
	if (!a->debt.refusing && a->debt.shortfall != b->debt.shortfall)
		return a->debt.shortfall < b->debt.shortfall;
	return a->lot < b->lot;
}

/*
 * Takes the candidate for the new key: its way or its chain entry, and what
 * it forgives (c->debt is its exact debt).
 */
static bool
Take(const Candidate *chosen, RlRoom *room)
{
	room->way = chosen->way;
	room->link = chosen->link;
	NoteEvicted(room, chosen->entry, &chosen->debt);
	return true;
}

/* Fetches both lines of the entries of ways first .. first + count - 1 (mod the ways). */
static void
PrefetchWays(const ShmemSet *set, int first, int count)
{
#ifdef __GNUC__
	for (int j = 0; j < count; j++)
	{
		const ShmemEntry *entry = &set->entries[(first + j) % RL_SHMEM_WAYS];

		__builtin_prefetch(entry, 0);
		__builtin_prefetch(&entry->tokens, 0);
	}
#endif
}

/*
 * Adds the keys of the set's ways from first on (mod the ways) to the
 * candidates, weighed, until want keys are in or every way was seen (ways
 * lent to other sets hold none); a key that has recovered is taken at once
 * (true).
 */
static bool
WeighWays(ShmemSet *set, int first, int want, TimestampTz now, Candidate *candidates,
		  int *ncandidates, RlRoom *room)
{
	int			added = 0;

	for (int j = 0; j < RL_SHMEM_WAYS && added < want; j++)
	{
		int			way = (first + j) % RL_SHMEM_WAYS;
		Candidate  *c = &candidates[*ncandidates];

		if (!NativeTag(set->tags[way]))
			continue;
		c->entry = &set->entries[way];
		c->way = way;
		c->link = NULL;
		if (WeighCandidate(c, now))
			return Take(c, room);
		(*ncandidates)++;
		added++;
	}
	return false;
}

/* The same for the keys of the set's chain. */
static bool
WeighChain(uint32 index, TimestampTz now, Candidate *candidates, int *ncandidates, RlRoom *room)
{
	for (WayRef *link = &rl_overflow_heads[index]; *link != 0 && *ncandidates < MAX_CANDIDATES;
		 link = &ForeignEntry(*link)->overflow_next)
	{
		Candidate  *c = &candidates[*ncandidates];

		c->entry = ForeignEntry(*link);
		c->way = -1;
		c->link = link;
		if (WeighCandidate(c, now))
			return Take(c, room);
		(*ncandidates)++;
	}
	return false;
}

/*
 * 2 and 3 over the candidates: the zone that gives room (*own_gives when
 * it is the new key's), and its key of the smallest weight; NULL when it
 * has none among them.
 */
static Candidate *
ChooseAmong(Candidate *candidates, int ncandidates, const ShmemKey *key, bool *own_gives)
{
	Group		groups[MAX_CANDIDATES + 1];
	int			ngroups = 0;
	int			own = GroupOf(groups, &ngroups, key->dbid, key->zone_id);
	int			giver = own;
	Candidate  *chosen = NULL;
	uint64		lots = pg_prng_uint64(&pg_global_prng_state);

	for (int i = 0; i < ncandidates; i++)
		candidates[i].group = GroupOf(groups, &ngroups, candidates[i].entry->dbid,
									  candidates[i].entry->zone_id);
	for (int g = 0; g < ngroups; g++)
		if (groups[g].keys > groups[giver].keys)
			giver = g;
	/* The lots from one random draw, a generator step each. */
	for (int i = 0; i < ncandidates; i++)
	{
		if (candidates[i].group != giver)
			continue;
		lots = lots * UINT64CONST(6364136223846793005) + UINT64CONST(1442695040888963407);
		candidates[i].lot = (uint32) (lots >> 32);
		if (chosen == NULL || Cheaper(&candidates[i], chosen))
			chosen = &candidates[i];
	}
	*own_gives = giver == own;
	return chosen;
}

/*
 * The quick way, once the store is full: SAMPLED_KEYS keys of the set, from
 * a way drawn at random.  Room is taken there only when the key chosen
 * would still admit a call (least harm among the sample; a flood's keys
 * are nearly all of every set); otherwise the whole set and its chain
 * decide.
 */
static bool
TrySample(ShmemSet *set, const ShmemKey *key, TimestampTz now, RlRoom *room)
{
	Candidate	candidates[SAMPLED_KEYS];
	int			ncandidates = 0;
	int			first = (int) (pg_prng_uint32(&pg_global_prng_state) % RL_SHMEM_WAYS);
	bool		own_gives;
	Candidate  *chosen;

	PrefetchWays(set, first, SAMPLED_KEYS);
	if (WeighWays(set, first, SAMPLED_KEYS, now, candidates, &ncandidates, room))
		return true;
	chosen = ChooseAmong(candidates, ncandidates, key, &own_gives);
	if (chosen == NULL || chosen->debt.refusing)
		return false;
	chosen->debt = RlEntryDebt(chosen->entry, now);
	return !chosen->debt.refusing && Take(chosen, room);
}

bool
RlLeastHarm(ShmemSet *set, uint32 index, const ShmemKey *key, TimestampTz now,
			bool store_full, RlRoom *room)
{
	Candidate	candidates[MAX_CANDIDATES];
	int			ncandidates = 0;
	bool		own_gives;
	Candidate  *chosen;

	memset(room, 0, sizeof(*room));
	room->way = -1;
	if (store_full && TrySample(set, key, now, room))
		return true;

	/* 1: a key that has recovered, in the set, then in its chain. */
	PrefetchWays(set, 0, RL_SHMEM_WAYS);
	if (WeighWays(set, 0, RL_SHMEM_WAYS, now, candidates, &ncandidates, room) ||
		WeighChain(index, now, candidates, &ncandidates, room))
		return true;
	/* Until no set of the store has a free or recovered way, keys borrow one. */
	if (!store_full)
		return false;

	/* 2 and 3. */
	chosen = ChooseAmong(candidates, ncandidates, key, &own_gives);

	/* 4: a zone's new key never pushes out one of its keys that is worth more. */
	if (chosen == NULL)
		return false;
	chosen->debt = RlEntryDebt(chosen->entry, now);
	if (own_gives && chosen->debt.refusing)
		return false;
	return Take(chosen, room);
}

void
RlCountEvicted(const RlEvicted *evicted)
{
	if (!evicted->any)
		return;
	RlCount(evicted->dbid, evicted->zone_id, RL_COUNT_EVICTED);
	RlCountAdd(evicted->dbid, evicted->zone_id, RL_COUNT_FORGIVEN, evicted->forgiven);
	if (!evicted->keys_replaced)
		RlCountAdd(evicted->dbid, evicted->zone_id, RL_COUNT_KEYS, -1);
}
