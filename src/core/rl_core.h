/*
 * rl_core.h -- the rate-limiting algorithms, free of PostgreSQL headers.
 *
 * Pure functions of (state, now, parameters) -> (new state, decision).
 * The interface is C-compatible so that the PostgreSQL glue (C) calls it
 * directly; the implementation is C++17 and never throws or allocates.
 *
 * Time is an int64 count of microseconds on any fixed epoch (the glue uses
 * PostgreSQL's TimestampTz).
 */
#ifndef RL_CORE_H
#define RL_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#define RL_NOEXCEPT noexcept	/* nothing may unwind into PostgreSQL */
extern "C" {
#else
#define RL_NOEXCEPT
#endif

/*
 * Largest capacity accepted: every whole number of tokens up to it is exact
 * in a double, so rate * window and cost compare exactly.
 */
#define RL_MAX_CAPACITY 9007199254740992.0 /* 2^53 */
#define RL_MAX_CAPACITY_INT INT64_C(9007199254740992)

/*
 * Tolerance when comparing fractional token counts: a refill that lands a
 * few ulps short of a whole token (0.3 * 3 = 0.8999999999999999) must still
 * count as that token.  1e-9 token is far below anything observable.
 */
#define RL_TOKEN_EPSILON 1e-9

typedef enum RlParamError
{
	RL_PARAM_OK = 0,
	RL_PARAM_RATE_INVALID,		/* rate not finite or <= 0 */
	RL_PARAM_WINDOW_INVALID,	/* window not finite or <= 0 */
	RL_PARAM_CAPACITY_OVERFLOW, /* rate * window above RL_MAX_CAPACITY */
	RL_PARAM_COST_NEGATIVE,
	RL_PARAM_COST_ABOVE_CAPACITY
} RlParamError;

/*
 * A validated token-bucket limit: refill_tokens every refill_interval_us,
 * continuously.  Kept as a ratio (not tokens per microsecond) so that whole
 * refills are exact: 10 per minute over 6 s is 10 * 6e6 / 60e6 = 1 token.
 */
typedef struct RlTokenBucketLimit
{
	double		refill_tokens;
	double		refill_interval_us;
	double		capacity;
} RlTokenBucketLimit;

/*
 * The stored state of one key: tokens + fraction held at the instant
 * stamp_us.  Whole tokens are an integer so that no capacity, however
 * large, rounds away the fraction (a double near 2^53 has no fractions).
 */
typedef struct RlTokenBucketState
{
	int64_t		tokens;			/* whole tokens, 0 .. capacity */
	double		fraction;		/* part of the next token, in [0, 1) */
	int64_t		stamp_us;
} RlTokenBucketState;

typedef struct RlTokenBucketDecision
{
	bool		allowed;
	/* whole tokens left after the call, or -1 when refused */
	int64_t		remaining;
	/* whether next must be stored (false: the stored state stays valid) */
	bool		state_changed;
	RlTokenBucketState next;
} RlTokenBucketDecision;

/* Checks the SQL-level parameters and derives the limit. */
RlParamError rl_token_bucket_limit(double rate, double window, int64_t cost,
								   RlTokenBucketLimit *limit) RL_NOEXCEPT;

/*
 * Takes cost tokens at now_us.  prior is NULL for a key never seen (a full
 * bucket).  A refused call changes nothing, so refusals never delay the
 * refill.  A clock that goes backwards counts as no time passing.
 */
RlTokenBucketDecision rl_token_bucket_take(const RlTokenBucketState *prior,
										   int64_t now_us,
										   const RlTokenBucketLimit *limit,
										   int64_t cost) RL_NOEXCEPT;

/* Whether the bucket is full again at now_us (as a new key would be). */
bool		rl_token_bucket_idle(const RlTokenBucketState *state, int64_t now_us,
								 const RlTokenBucketLimit *limit) RL_NOEXCEPT;

/* ---------------------------------------------------------------------------
 * Zones: named policies of rate requests per period.
 * ------------------------------------------------------------------------- */

typedef enum RlAlgorithm
{
	RL_ALGORITHM_TOKEN_BUCKET,
	RL_ALGORITHM_GCRA,
	RL_ALGORITHM_SLIDING_WINDOW,
	RL_ALGORITHM_SLIDING_WINDOW_COUNTER,
	RL_ALGORITHM_FIXED_WINDOW,
	RL_ALGORITHM_CRON_TOKEN_BUCKET,	/* token_bucket with refill => 'cron' */
	RL_ALGORITHM_CONCURRENCY	/* leases: rate slots held at once (leases.cpp) */
} RlAlgorithm;

/*
 * Longest period: 2^53 microseconds (285 years).  Every product below stays
 * within 128 bits and every time difference within 62 bits.
 */
#define RL_MAX_PERIOD_US INT64_C(9007199254740992)

/* Largest rate (or burst): capacities stay exact in a double. */
#define RL_MAX_LIMIT RL_MAX_CAPACITY_INT

/*
 * Largest limit of an exact sliding window: its state holds one admission
 * time per admitted request (at most about 3 bytes each, see
 * sliding_window.cpp), so a million is a few megabytes per key.  Larger
 * limits use sliding_window_counter.
 */
#define RL_SLIDING_WINDOW_MAX_LIMIT INT64_C(1000000)

typedef enum RlZoneError
{
	RL_ZONE_OK = 0,
	RL_ZONE_RATE_INVALID,		/* rate <= 0 or above RL_MAX_LIMIT */
	RL_ZONE_PERIOD_INVALID,		/* period <= 0 or above RL_MAX_PERIOD_US */
	RL_ZONE_BURST_INVALID,		/* burst <= 0 or above RL_MAX_LIMIT */
	RL_ZONE_BURST_NOT_APPLICABLE,	/* burst given to a window algorithm */
	RL_ZONE_LIMIT_TOO_LARGE_FOR_EXACT,	/* sliding_window above its maximum */
	RL_ZONE_TOO_MANY_SLOTS		/* concurrency above RL_CONCURRENCY_MAX_SLOTS */
} RlZoneError;

/* A validated zone limit. */
typedef struct RlZoneLimit
{
	RlAlgorithm algorithm;
	int64_t		rate;			/* requests per period */
	int64_t		period_us;
	int64_t		capacity;		/* most admitted at one instant */
	int64_t		refill_tick_us; /* cron refill: time between refills; 0 when unscheduled */
} RlZoneLimit;

/*
 * Checks a zone definition.  burst < 0 means "not given": the capacity is
 * then rate.  burst applies to token_bucket and gcra only.
 */
RlZoneError rl_zone_limit(RlAlgorithm algorithm, int64_t rate, int64_t period_us,
						  int64_t burst, RlZoneLimit *limit) RL_NOEXCEPT;

/* cost must lie in [0, capacity]: a larger cost could never be admitted. */
bool		rl_zone_cost_valid(const RlZoneLimit *limit, int64_t cost) RL_NOEXCEPT;

/*
 * The fixed-size state of one key for every algorithm but the exact sliding
 * window.  Field use per algorithm (b or fraction keeps the last decision
 * time where the rest does not imply it: the clock never runs backwards):
 *   token_bucket            a = whole tokens, fraction = part token, stamp = as of
 *   gcra                    stamp, a = theoretical arrival time in microseconds
 *                           plus a / rate (exact: no rounding of period / rate);
 *                           b = last decision time
 *   fixed_window            stamp = start of the window, a = cost admitted in it
 *                           (a <= 0: no window, the next admission opens one),
 *                           b = last decision time
 *   sliding_window_counter  stamp = start of the current aligned window,
 *                           a = its admitted cost, b = the previous window's,
 *                           fraction = last decision time - stamp (whole us)
 *   cron token bucket       a = whole tokens, b = the part token the refills
 *                           have added, in units of 1 / period_us token;
 *                           stamp = last decision time.  Calls only take;
 *                           the refill job (SQL, rl_cron_refill) adds
 *                           rate * tick / period per tick, up to capacity.
 */
typedef struct RlCounterState
{
	int64_t		a;
	double		fraction;
	int64_t		stamp_us;
	int64_t		b;
} RlCounterState;

/*
 * What every zone-based check reports (rl_result).  A wait of -1 means that
 * no time can be promised: a cron token bucket without a refill job is
 * refilled by nobody (the glue shows NULL).
 */
typedef struct RlDecision
{
	bool		allowed;
	int64_t		capacity;
	int64_t		remaining;		/* left after this call; refused: available now */
	int64_t		retry_after_us; /* when refused: until this call would pass, or -1 */
	int64_t		reset_after_us; /* until the key is back to full allowance, or -1 */
	int64_t		decided_at_us;	/* the time decided at: now, or later if the clock went back */
	bool		state_changed;	/* false: the stored state stays valid */
} RlDecision;

/*
 * Decides a call of cost at now_us for every algorithm but the exact sliding
 * window.  prior is NULL for a key never seen.  Refusals and cost 0 change
 * nothing; a clock that goes backwards counts as no time passing.
 */
RlDecision	rl_counter_take(const RlZoneLimit *limit, const RlCounterState *prior,
							int64_t now_us, int64_t cost, RlCounterState *next) RL_NOEXCEPT;

/*
 * Gives back cost that the key was charged (a request that failed should not
 * count), for every algorithm rl_counter_take decides, at now_us: never above
 * the full allowance, never below an empty state.  prior is NULL for a key
 * never seen, which is full: nothing to give back; so is cost <= 0.
 *   token_bucket            refilled up to now, then tokens += cost, capped
 *                           at the capacity (a full bucket has no fraction)
 *   cron token bucket       tokens += cost, capped at the capacity (full: the
 *                           part token is dropped, as the refill job does)
 *   gcra                    the theoretical arrival time moves back cost
 *                           emission intervals, never before now
 *   fixed_window            the window open at now admitted cost less, not
 *                           below 0; an expired window has nothing to give
 *   sliding_window_counter  rotated to now, then cost less in the current
 *                           window, the rest (if any) in the previous one
 * The clock never runs backwards for a key, as in rl_counter_take.  The
 * decision is what a call of cost 0 at now_us sees after the refund
 * (allowed, with retry_after_us 0: a refund is never refused);
 * state_changed says whether next differs from prior and must be stored
 * (when it is false, next is prior, or zeroed when prior is NULL).
 */
RlDecision	rl_counter_refund(const RlZoneLimit *limit, const RlCounterState *prior,
							  int64_t now_us, int64_t cost, RlCounterState *next) RL_NOEXCEPT;

/*
 * Whether the refill job must visit the key: a cron token bucket below its
 * capacity.  False for every other algorithm.
 */
bool		rl_counter_needs_refill(const RlZoneLimit *limit, const RlCounterState *state) RL_NOEXCEPT;

/*
 * Whether a key holding state has fully recovered at now_us: every call
 * from now on decides as for a key never seen (a store may forget it).
 */
bool		rl_counter_idle(const RlZoneLimit *limit, const RlCounterState *state,
							int64_t now_us) RL_NOEXCEPT;

/* ---------------------------------------------------------------------------
 * What forgetting a key would cost (key_debt.cpp, token_bucket.cpp): a store
 * short of room forgets the key whose state tells least.
 * ------------------------------------------------------------------------- */

/*
 * A key's debt at now_us: what it is missing from its full allowance.
 *   missing    whole tokens (or counted cost): the capacity less what a call
 *              of cost 0 reports as remaining.  A store that forgets the key
 *              lets at most this many more calls through than the limit
 *              would have (a forgotten key starts full).
 *   shortfall  the same, with the fraction of a token a bucket has refilled
 *              (equal to missing for the window algorithms): to rank keys
 *              of one limit by how close to full they are.
 *   idle       fully recovered: every call from now on decides as for a key
 *              never seen (rl_counter_idle), and missing is 0.
 *   refusing   a call of cost 1 now would be refused.
 */
typedef struct RlKeyDebt
{
	int64_t		missing;
	double		shortfall;
	bool		idle;
	bool		refusing;
} RlKeyDebt;

/* The debt of a zone's key, for every algorithm with a fixed-size state. */
RlKeyDebt	rl_counter_debt(const RlZoneLimit *limit, const RlCounterState *state,
							int64_t now_us) RL_NOEXCEPT;

/* The debt of an ad-hoc bucket (rl_token_bucket); missing counts whole tokens of the capacity. */
RlKeyDebt	rl_token_bucket_debt(const RlTokenBucketState *state, int64_t now_us,
								 const RlTokenBucketLimit *limit) RL_NOEXCEPT;

/*
 * A quick weighing of a key, for a store that ranks every key of a set and
 * then takes the debt of the one it chooses: shortfall, idle and refusing
 * without missing (left 0).  For the window algorithms and GCRA they are
 * the debt's own, from integer arithmetic without a division.  For a token
 * bucket they come from a few floating-point operations, where the debt
 * keeps part tokens exactly: shortfall agrees to a millionth of a token,
 * idle is set within a millionth of a token of full (the debt tells), and
 * refusing may differ within RL_TOKEN_EPSILON of a whole token.
 */
RlKeyDebt	rl_counter_weigh(const RlZoneLimit *limit, const RlCounterState *state,
							 int64_t now_us) RL_NOEXCEPT;
RlKeyDebt	rl_token_bucket_weigh(const RlTokenBucketState *state, int64_t now_us,
								  const RlTokenBucketLimit *limit) RL_NOEXCEPT;

/* ---------------------------------------------------------------------------
 * Exact sliding window (sliding_window.cpp).
 *
 * The state is the admission times (with costs) of the requests still in the
 * trailing period, oldest first, split into a front buffer, sealed chunks
 * kept by the store as rows of their own, and a back buffer.  A call reads
 * and writes the two buffers (bounded bytes) and, every few hundred
 * admissions, one chunk: O(1) amortised in work and bytes at any limit.
 * ------------------------------------------------------------------------- */

/* Encoded bytes per buffer or chunk before it is sealed. */
#define RL_SW_BUFFER_BYTES 256
/* An entry takes at least one byte. */
#define RL_SW_BUFFER_ENTRIES RL_SW_BUFFER_BYTES
/* Chunk sequence numbers cycle through 1 .. RL_SW_MAX_CHUNK_SEQ. */
#define RL_SW_MAX_CHUNK_SEQ INT32_MAX
/* Largest encoded header (see rl_sw_encode_header). */
#define RL_SW_MAX_HEADER_BYTES (2 * RL_SW_BUFFER_BYTES + 64)

typedef struct RlSwEntry
{
	int64_t		time_us;
	int64_t		cost;
} RlSwEntry;

typedef struct RlSwBuffer
{
	int32_t		count;
	int32_t		bytes;			/* encoded size */
	RlSwEntry	entries[RL_SW_BUFFER_ENTRIES];
} RlSwBuffer;

typedef struct RlSlidingWindowState
{
	int64_t		admitted;		/* total cost of every stored entry */
	int64_t		stamp_us;		/* latest decision time: the clock never goes back */
	int64_t		newest_us;		/* time of the newest entry */
	uint32_t	first_chunk;	/* sealed chunks are [first_chunk, next_chunk) */
	uint32_t	next_chunk;
	RlSwBuffer	front;			/* the oldest entries; empty only if all is,
								 * or after a refund emptied it (the next
								 * take then loads the oldest chunk) */
	RlSwBuffer	back;			/* the newest entries */
} RlSlidingWindowState;

/* A sealed chunk as stored, handed back to the algorithm when it asks. */
typedef struct RlSwChunk
{
	const uint8_t *bytes;
	int32_t		len;
} RlSwChunk;

typedef struct RlSwDecision
{
	RlDecision	decision;
	/*
	 * More chunks are needed: load the first need_chunks sealed chunks and
	 * call again.  Nothing else in this result is meaningful then.
	 */
	int32_t		need_chunks;
	/* Chunks emptied by expiry: delete them (first_chunk onwards). */
	int32_t		consumed_chunks;
	uint32_t	consumed_from;
	/* A chunk sealed by this call: store it under sealed_seq. */
	bool		sealed;
	uint32_t	sealed_seq;
	int32_t		sealed_len;
	uint8_t		sealed_bytes[RL_SW_BUFFER_BYTES];
} RlSwDecision;

/* A new key: no entries. */
void		rl_sw_init(RlSlidingWindowState *state) RL_NOEXCEPT;

/* Number of sealed chunks. */
uint32_t	rl_sw_chunk_count(const RlSlidingWindowState *state) RL_NOEXCEPT;

/*
 * Whether the window has fully recovered at now_us: every entry has left the
 * trailing period (no chunk needs reading to tell), so every call from now
 * on decides as for a key never seen.
 */
bool		rl_sw_idle(const RlZoneLimit *limit, const RlSlidingWindowState *state,
					   int64_t now_us) RL_NOEXCEPT;

/* The sequence number of the chunk index places after first_chunk. */
uint32_t	rl_sw_chunk_seq(uint32_t first, uint32_t index) RL_NOEXCEPT;

/*
 * Decides a call of cost at now_us.  chunks are the first nchunks sealed
 * chunks, oldest first (nchunks may be 0).  When it needs more it sets
 * need_chunks and leaves state untouched; otherwise, when
 * decision.state_changed, state is the new state and the caller applies the
 * chunk changes.  Refusals and cost 0 change nothing.  Returns false when a
 * stored buffer or chunk does not decode (corrupt state).
 */
bool		rl_sw_take(const RlZoneLimit *limit, RlSlidingWindowState *state,
					   int64_t now_us, int64_t cost,
					   const RlSwChunk *chunks, int32_t nchunks,
					   RlSwDecision *result) RL_NOEXCEPT;

/*
 * Gives back cost that the key was charged, at now_us.  The refunded request
 * is normally the newest, so the newest entries of the back buffer lose the
 * cost first (an entry that reaches 0 is dropped), then, if the back cannot
 * cover it, the newest entries of the front buffer: sealed chunks are never
 * read nor rewritten, and taking from older entries never admits more than
 * the exact window would.  Entries that have left the trailing period give
 * nothing back, and nothing is expired or dropped here.  When
 * decision->state_changed, state is the new state to store (the chunks stay
 * as they are); otherwise state is untouched.  The decision is what a call
 * of cost 0 at now_us sees without reading a chunk (allowed, retry_after_us
 * 0); where only a chunk could tell that an entry has expired, it counts
 * as still in the window, so remaining is never overstated.  Returns false
 * when a buffer is not well formed (corrupt state).
 */
bool		rl_sw_refund(const RlZoneLimit *limit, RlSlidingWindowState *state,
						 int64_t now_us, int64_t cost, RlDecision *decision) RL_NOEXCEPT;

/*
 * The header as stored (everything but the sealed chunks): at most
 * RL_SW_MAX_HEADER_BYTES.  admitted, stamp_us are stored by the caller in
 * columns of their own; decode takes them back.
 */
int32_t		rl_sw_encode_header(const RlSlidingWindowState *state, uint8_t *out) RL_NOEXCEPT;
bool		rl_sw_decode_header(const uint8_t *bytes, int32_t len, int64_t admitted,
								int64_t stamp_us, RlSlidingWindowState *state) RL_NOEXCEPT;

/* ---------------------------------------------------------------------------
 * Concurrency (leases, leases.cpp): at most capacity leases of a key are
 * held at once.  A lease is acquired before some work and released after
 * it; one not released by expires_us lapses by itself, so a crashed client
 * never holds its slot for ever.  The key's state is the list of leases it
 * holds (encoded in the row's bytes, RL_LEASE_BYTES each), plus the latest
 * decision time (the clock never runs backwards for a key).
 * ------------------------------------------------------------------------- */

/* Largest number of slots of a concurrency zone: its state lists every lease. */
#define RL_CONCURRENCY_MAX_SLOTS INT64_C(10000)

/* Encoded size of one lease. */
#define RL_LEASE_BYTES 24

typedef struct RlLease
{
	uint64_t	nonce;			/* the lease's secret part: random, from the glue */
	int64_t		expires_us;		/* held until then unless released; <= now: lapsed */
	int32_t		holder_pid;		/* the session that holds it where that matters; 0: none */
	int32_t		holder_proc;	/* that session's process slot (the glue tells it is gone) */
} RlLease;

/*
 * Decodes a key's leases from len bytes (NULL or 0 bytes: none) into leases,
 * which has room for max.  False when the bytes are not a whole number of
 * leases or hold more than max (corrupt state).
 */
bool		rl_leases_decode(const uint8_t *bytes, int32_t len, RlLease *leases, int32_t max,
							 int32_t *count) RL_NOEXCEPT;

/* Encodes count leases into out (count * RL_LEASE_BYTES bytes); returns the length. */
int32_t		rl_leases_encode(const RlLease *leases, int32_t count, uint8_t *out) RL_NOEXCEPT;

/*
 * Acquires wanted (its nonce, expires_us and holder set by the caller) at
 * now_us against the limit's capacity: the leases that have lapsed at now
 * are dropped first (in place, order kept), then wanted is appended if a
 * slot is free; leases must have room for *count + 1.  A wanted that has
 * lapsed at now already (expires_us <= the decision time) is granted but
 * not appended: it would hold no slot.  stamp_us is the key's latest
 * decision time (0 for a new key, which makes a now before the epoch count
 * as 0: INT64_MIN does not); a now before it counts as it.  The decision:
 * capacity; remaining, the free slots after the call (0 when refused, even
 * above a lowered capacity); retry_after_us when refused, until enough
 * held leases lapse for a slot to be free (the first, unless the key holds
 * more than a since lowered capacity); reset_after_us until the last one
 * does (0 when none is held); decided_at_us; state_changed when leases
 * were dropped or added (store the list and decided_at_us as the new
 * stamp).  Every wait saturates at INT64_MAX.
 */
RlDecision	rl_leases_acquire(const RlZoneLimit *limit, RlLease *leases, int32_t *count,
							  int64_t stamp_us, int64_t now_us,
							  const RlLease *wanted) RL_NOEXCEPT;

/*
 * Releases the lease of nonce at now_us, dropping lapsed leases as acquire
 * does.  *released says whether it was held (a lapsed lease is not: its
 * slot may already be another's).  The decision is what an acquire would
 * see next (allowed when a slot is free, without taking it, remaining the
 * free slots); state_changed when a lease was released or dropped.
 */
RlDecision	rl_leases_release(const RlZoneLimit *limit, RlLease *leases, int32_t *count,
							  int64_t stamp_us, int64_t now_us, uint64_t nonce,
							  bool *released) RL_NOEXCEPT;

/*
 * What an acquire at now_us would decide, changing nothing (leases is not
 * compacted; state_changed is false).
 */
RlDecision	rl_leases_peek(const RlZoneLimit *limit, const RlLease *leases, int32_t count,
						   int64_t stamp_us, int64_t now_us) RL_NOEXCEPT;

/* Whether every lease has lapsed at now_us: the key is as good as new. */
bool		rl_leases_idle(const RlLease *leases, int32_t count, int64_t now_us) RL_NOEXCEPT;

/* ---------------------------------------------------------------------------
 * Keyed hashing (keyed_hash.cpp): where a key's state is placed in shared
 * memory must not be predictable by whoever chooses keys, or chosen keys
 * pile onto one place.  SipHash (Aumasson and Bernstein), keyed by a secret
 * the server makes at its first start.
 * ------------------------------------------------------------------------- */

typedef struct RlHashKey
{
	uint64_t	k0;
	uint64_t	k1;
} RlHashKey;

/*
 * SipHash-1-3 of an 8-byte word (little-endian, e.g. a database and a zone)
 * followed by len bytes: 64 bits no caller can steer without the key.
 */
uint64_t	rl_keyed_hash(const RlHashKey *key, uint64_t word, const void *bytes,
						  size_t len) RL_NOEXCEPT;

/*
 * The same of the word, first, a NUL byte and second, as one message, with
 * nothing copied: a pair (first free of NUL bytes, as a text is) that no
 * other pair hashes as.
 */
uint64_t	rl_keyed_hash_pair(const RlHashKey *key, uint64_t word, const void *first, size_t first_len,
							   const void *second, size_t second_len) RL_NOEXCEPT;

/* SipHash-c-d of len bytes, for the tests: 2-4 (the paper's) and 1-3 only. */
uint64_t	rl_siphash(const RlHashKey *key, int c_rounds, int d_rounds, const void *bytes,
					   size_t len) RL_NOEXCEPT;

/* ---------------------------------------------------------------------------
 * redis-cell's CL.THROTTLE key max_burst count period quantity.
 * ------------------------------------------------------------------------- */

typedef enum RlGcraError
{
	RL_GCRA_OK = 0,
	RL_GCRA_MAX_BURST_INVALID,	/* < 0 or too large */
	RL_GCRA_COUNT_INVALID,		/* <= 0 */
	RL_GCRA_PERIOD_INVALID,		/* not finite, or not 1 us .. RL_MAX_PERIOD_US */
	RL_GCRA_QUANTITY_NEGATIVE,
	RL_GCRA_QUANTITY_ABOVE_LIMIT	/* quantity > max_burst + 1 */
} RlGcraError;

/* The zone limit equivalent to redis-cell's parameters (period in seconds). */
RlGcraError rl_gcra_limit(int64_t max_burst, int64_t count, double period_s,
						  int64_t quantity, RlZoneLimit *limit) RL_NOEXCEPT;

#ifdef __cplusplus
}
#endif

#endif							/* RL_CORE_H */
