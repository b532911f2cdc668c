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

/* A validated token-bucket limit. */
typedef struct RlTokenBucketLimit
{
	double		rate_per_second;
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

#ifdef __cplusplus
}
#endif

#endif							/* RL_CORE_H */
