// libFuzzer target for the C++ core (src/core/): every algorithm, driven
// with extreme parameters and clocks, against the invariants the README and
// rl_core.h promise.  Any violation prints the case and aborts; ASan and
// UBSan (-fno-sanitize-recover=all) turn undefined behaviour into a crash.
//
// The input (read through FuzzedDataProvider) first picks a mode:
//   zone      a zone algorithm (token_bucket, gcra, sliding_window_counter,
//             fixed_window, cron token bucket) with a sequence of calls
//             (time deltas, possibly negative or huge, and costs), cron
//             refills emulating rl_cron_refill(), refunds (rl_counter_refund:
//             any time, any cost, or of the take just made); checked against
//             the documented bounds and a model
//   window    the exact sliding window with the chunk-store protocol (sealed
//             chunks kept in a map, need_chunks served) and refunds
//             (rl_sw_refund), checked exactly against a brute-force log of
//             admissions
//   bucket    rl_token_bucket's ad-hoc bucket (float rate and window, which
//             may change between calls)
//   header    rl_sw_decode_header on raw bytes, then calls and refunds on
//             what decodes, with raw chunk bytes; refunds of corrupt states
//   edited    fixed-state algorithms from an arbitrary (hand-edited) stored
//             state, takes and refunds
//
// Build and run: test/fuzz/run.sh.
#include "core/rl_core.h"
#include "../common/algorithm_name.h"

#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <vector>

namespace {

using Wide = __int128;

// PostgreSQL's TimestampTz range (4714-11-24 BC .. 294276-12-31 AD): what
// the glue can pass as now (ratelimit.now_override accepts any of it).
constexpr int64_t kPgMinTime = -211813488000000000LL;
constexpr int64_t kPgMaxTime = 9223371331200000000LL;
constexpr int64_t kT2026 = 820454400000000LL;	// 2026-01-01 in PostgreSQL's epoch
// The latest time the model checks use.  PostgreSQL's last timestamps lie
// only 8 days below INT64_MAX, where a gcra key whose tolerance exceeds 8
// days saturates its stored arrival time (and over-admits): a known edge,
// out of reach of any real clock (year 294276).  RL_FUZZ_FULL_RANGE=1
// checks up to kPgMaxTime anyway.
int64_t MaxTime()
{
	static const int64_t max_time = std::getenv("RL_FUZZ_FULL_RANGE") != nullptr
		? kPgMaxTime : kPgMaxTime - 2 * RL_MAX_PERIOD_US;
	return max_time;
}
constexpr int kMaxCalls = 400;

char g_context[512];
int g_call = -1;

[[noreturn]] void Fail(const char *file, int line, const char *cond, const char *detail)
{
	std::fprintf(stderr, "core_fuzz: invariant violated at %s:%d: %s\n  %s\n  case: %s, call %d\n",
				 file, line, cond, detail, g_context, g_call);
	std::abort();
}

char g_detail[1024];

// What the inputs exercised, printed at exit with RL_FUZZ_STATS=1 (e.g. over
// the corpus: core_fuzz -runs=0 CORPUS_DIR).
enum Stat
{
	kZoneCalls, kZoneRefused, kIdleChecks, kRetryChecks, kCronRefills, kWindowCalls,
	kWindowRefused, kChunkLoads, kSealed, kConsumed, kBucketCalls, kHeadersDecoded,
	kEditedCalls, kZoneRefunds, kZoneRefundsGiven, kZoneUndone, kWindowRefunds, kWindowRefundsGiven,
	kWindowRefundsPastChunks, kWindowRefundsUnderstated, kWindowUndone, kHeaderRefunds, kCorruptRefunds,
	kEditedRefunds, kStatCount
};
long g_stats[kStatCount];
const char *const kStatNames[kStatCount] = {
	"zone calls", "zone refusals", "idle checks", "retry checks", "cron refills",
	"window calls", "window refusals", "chunk loads", "chunks sealed", "chunks consumed",
	"bucket calls", "headers decoded", "edited-state calls", "zone refunds", "zone refunds giving back",
	"zone takes undone", "window refunds", "window refunds giving back", "window refunds past chunks",
	"window refunds understating", "window takes undone", "raw-header refunds", "corrupt-state refunds",
	"edited-state refunds"};

void PrintStats()
{
	for (int i = 0; i < kStatCount; i++)
		std::fprintf(stderr, "core_fuzz stat: %s %ld\n", kStatNames[i], g_stats[i]);
}

// RL_FUZZ_TRACE=1 prints every call (to replay one input: core_fuzz FILE).
bool Trace()
{
	static const bool trace = std::getenv("RL_FUZZ_TRACE") != nullptr;
	return trace;
}
#define CHECK(cond, ...)                                                        \
	do                                                                          \
	{                                                                           \
		if (!(cond))                                                            \
		{                                                                       \
			std::snprintf(g_detail, sizeof g_detail, __VA_ARGS__);              \
			Fail(__FILE__, __LINE__, #cond, g_detail);                          \
		}                                                                       \
	} while (0)

#define DFMT "{allowed %d, capacity %" PRId64 ", remaining %" PRId64 ", retry_after %" PRId64 \
	", reset_after %" PRId64 ", decided_at %" PRId64 ", state_changed %d}"
#define DARGS(d) (int) (d).allowed, (d).capacity, (d).remaining, (d).retry_after_us, \
	(d).reset_after_us, (d).decided_at_us, (int) (d).state_changed

int64_t Clamp(Wide value, int64_t lo, int64_t hi)
{
	return value < lo ? lo : value > hi ? hi : static_cast<int64_t>(value);
}

// One of the specials, a value in [lo, hi], or any int64.
int64_t Pick(FuzzedDataProvider &in, const std::vector<int64_t> &specials, int64_t lo, int64_t hi)
{
	const size_t choice = in.ConsumeIntegralInRange<size_t>(0, specials.size() + 1);
	if (choice < specials.size())
		return specials[choice];
	if (choice == specials.size())
		return in.ConsumeIntegralInRange<int64_t>(lo, hi);
	return in.ConsumeIntegral<int64_t>();
}

RlAlgorithm PickAlgorithm(FuzzedDataProvider &in, bool with_window)
{
	static const RlAlgorithm fixed[] = {RL_ALGORITHM_TOKEN_BUCKET, RL_ALGORITHM_GCRA,
										RL_ALGORITHM_SLIDING_WINDOW_COUNTER,
										RL_ALGORITHM_FIXED_WINDOW, RL_ALGORITHM_CRON_TOKEN_BUCKET};
	if (with_window && in.ConsumeIntegralInRange<int>(0, 5) == 5)
		return RL_ALGORITHM_SLIDING_WINDOW;
	return fixed[in.ConsumeIntegralInRange<int>(0, 4)];
}

// A zone limit from the input, or false when rl_zone_limit refuses it (after
// checking that it refuses exactly what it documents).
bool PickLimit(FuzzedDataProvider &in, RlAlgorithm algorithm, RlZoneLimit *limit)
{
	const int64_t rate = Pick(in, {1, 2, 3, 7, 10, 60, 1000, 1000000, 1000001, RL_MAX_LIMIT,
								   RL_MAX_LIMIT - 1, RL_MAX_LIMIT + 1, 0, -1, INT64_MAX},
							  1, 1000);
	const int64_t period = Pick(in, {1, 2, 1000, 1000000, 60000000, 3600000000LL, 86400000000LL,
									 RL_MAX_PERIOD_US, RL_MAX_PERIOD_US - 1, RL_MAX_PERIOD_US + 1,
									 0, -1, INT64_MIN},
								1, 10000000);
	const int64_t burst = Pick(in, {-1, -1, -1, 0, 1, 2, rate, Clamp(static_cast<Wide>(rate) + 1, INT64_MIN, INT64_MAX),
									Clamp(2 * static_cast<Wide>(rate), INT64_MIN, INT64_MAX), RL_MAX_LIMIT,
									RL_MAX_LIMIT + 1, INT64_MAX},
							   -1, 1000);
	std::snprintf(g_context, sizeof g_context, "%s rate %" PRId64 " period_us %" PRId64 " burst %" PRId64,
				  AlgorithmName(algorithm), rate, period, burst);
	const RlZoneError error = rl_zone_limit(algorithm, rate, period, burst, limit);
	const bool has_burst = algorithm == RL_ALGORITHM_TOKEN_BUCKET || algorithm == RL_ALGORITHM_GCRA ||
		algorithm == RL_ALGORITHM_CRON_TOKEN_BUCKET;
	const int64_t capacity = burst >= 0 ? burst : rate;
	RlZoneError expected = RL_ZONE_OK;
	if (rate <= 0 || rate > RL_MAX_LIMIT)
		expected = RL_ZONE_RATE_INVALID;
	else if (period <= 0 || period > RL_MAX_PERIOD_US)
		expected = RL_ZONE_PERIOD_INVALID;
	else if (burst >= 0 && !has_burst)
		expected = RL_ZONE_BURST_NOT_APPLICABLE;
	else if (capacity <= 0 || capacity > RL_MAX_LIMIT ||
			 static_cast<Wide>(capacity) * period > static_cast<Wide>(rate) * RL_MAX_PERIOD_US)
		expected = RL_ZONE_BURST_INVALID;
	else if (algorithm == RL_ALGORITHM_SLIDING_WINDOW && rate > RL_SLIDING_WINDOW_MAX_LIMIT)
		expected = RL_ZONE_LIMIT_TOO_LARGE_FOR_EXACT;
	CHECK(error == expected, "rl_zone_limit returned %d, expected %d", (int) error, (int) expected);
	if (error != RL_ZONE_OK)
		return false;
	CHECK(limit->algorithm == algorithm && limit->rate == rate && limit->period_us == period &&
		  limit->capacity == capacity && limit->refill_tick_us == 0,
		  "limit fields: capacity %" PRId64, limit->capacity);
	return true;
}

int64_t PickStart(FuzzedDataProvider &in)
{
	return Clamp(Pick(in, {kT2026, 0, -1, kPgMinTime, kPgMaxTime, MaxTime(), MaxTime() - RL_MAX_PERIOD_US,
						   kPgMinTime + RL_MAX_PERIOD_US},
					  kT2026 - 1000000000LL, kT2026 + 1000000000LL),
				 kPgMinTime, MaxTime());
}

int64_t PickDelta(FuzzedDataProvider &in, const RlZoneLimit &limit)
{
	const int64_t period = limit.period_us;
	const int64_t per_token = std::max<int64_t>(1, period / limit.rate);
	return Pick(in, {0, 0, 1, -1, per_token, per_token - 1, per_token + 1, period - 1, period,
					 period + 1, 2 * period, period / 2, 1000, 1000000, -period,
					 INT64_MAX, INT64_MIN, RL_MAX_PERIOD_US},
				0, std::max<int64_t>(1, 2 * std::min<int64_t>(period, INT64_MAX / 4)));
}

int64_t PickCost(FuzzedDataProvider &in, int64_t capacity)
{
	return Pick(in, {1, 1, 1, 0, 2, capacity, capacity - 1, capacity + 1, capacity / 2, -1,
					 INT64_MAX},
				0, capacity);
}

// A refund's cost: rl_refund passes any bigint, so beyond the costs a take
// accepts also 0, negatives and more than could ever have been charged.
int64_t PickRefundCost(FuzzedDataProvider &in, int64_t capacity)
{
	return Pick(in, {1, 1, 0, 2, capacity, capacity - 1, capacity + 1, 2 * capacity, -1, INT64_MIN,
					 INT64_MAX, RL_MAX_LIMIT},
				0, capacity);
}

// What every refund reports (rl_counter_refund, rl_sw_refund): never refused,
// what a call of cost 0 sees, so the bounds of any decision.
void CheckRefund(const RlZoneLimit &limit, int64_t now, const RlDecision &d)
{
	CHECK(d.allowed && d.retry_after_us == 0, "a refund refused: " DFMT, DARGS(d));
	CHECK(d.capacity == limit.capacity, "capacity " DFMT, DARGS(d));
	CHECK(d.decided_at_us >= now, "refund decided before now %" PRId64 ": " DFMT, now, DARGS(d));
	CHECK(d.remaining >= 0 && d.remaining <= limit.capacity, "refund remaining out of range: " DFMT, DARGS(d));
	if (limit.algorithm == RL_ALGORITHM_CRON_TOKEN_BUCKET && limit.refill_tick_us <= 0)
		CHECK(d.reset_after_us == (d.remaining >= limit.capacity ? 0 : -1), "refund reset_after without a job: "
			  DFMT, DARGS(d));
	else
		CHECK(d.reset_after_us >= 0, "refund with a negative reset_after: " DFMT, DARGS(d));
}

// Bitwise, as the core compares states (a NaN fraction is the same state).
bool SameState(const RlCounterState &a, const RlCounterState &b)
{
	return std::memcmp(&a, &b, sizeof a) == 0;
}

// Takes amount off the newest admissions of a log: the model of a refund,
// which gives back the newest cost first.  Returns what it could not take.
Wide TakeOffNewest(std::vector<std::pair<int64_t, int64_t>> *log, Wide amount)
{
	while (amount > 0 && !log->empty())
	{
		const Wide share = std::min<Wide>(log->back().second, amount);
		log->back().second -= static_cast<int64_t>(share);
		amount -= share;
		if (log->back().second == 0)
			log->pop_back();
	}
	return amount;
}

void CheckGeneric(const RlZoneLimit &limit, int64_t now, int64_t cost, const RlDecision &d)
{
	CHECK(d.capacity == limit.capacity, "capacity " DFMT, DARGS(d));
	CHECK(d.decided_at_us >= now, "decided before now %" PRId64 ": " DFMT, now, DARGS(d));
	CHECK(d.state_changed == (d.allowed && cost > 0), "state_changed, cost %" PRId64 ": " DFMT, cost, DARGS(d));
	CHECK(d.remaining >= 0 && d.remaining <= limit.capacity, "remaining out of range: " DFMT, DARGS(d));
	// A cron token bucket that no job refills promises no wait: -1.
	const bool unrefilled = limit.algorithm == RL_ALGORITHM_CRON_TOKEN_BUCKET && limit.refill_tick_us <= 0;
	if (d.allowed)
		CHECK(d.retry_after_us == 0, "allowed with a retry_after: " DFMT, DARGS(d));
	else
	{
		CHECK(unrefilled ? d.retry_after_us == -1 : d.retry_after_us >= 1,
			  "refused without a retry_after: " DFMT, DARGS(d));
		CHECK(d.remaining < cost, "refused with enough left for cost %" PRId64 ": " DFMT, cost, DARGS(d));
	}
	if (unrefilled)
		CHECK(d.reset_after_us == (d.remaining >= limit.capacity ? 0 : -1), "reset_after without a job: " DFMT,
			  DARGS(d));
	else
		CHECK(d.reset_after_us >= 0, "negative reset_after: " DFMT, DARGS(d));
}

bool SameOutcome(const RlDecision &a, const RlDecision &b)
{
	return a.allowed == b.allowed && a.capacity == b.capacity && a.remaining == b.remaining &&
		a.retry_after_us == b.retry_after_us && a.reset_after_us == b.reset_after_us;
}

// Microseconds a token bucket's reported waits may be off (default 0: the
// contract, exact).  With RL_FUZZ_TB_WAIT_SLACK_US=N: N us plus the time
// the 1e-9 token the take rounds up takes to refill, to look past the
// known imprecisions of long periods (see test/fuzz/run.sh).
int64_t TbWaitSlack(const RlZoneLimit &limit)
{
	static const int64_t slack = [] {
		const char *value = std::getenv("RL_FUZZ_TB_WAIT_SLACK_US");
		return value != nullptr ? std::strtoll(value, nullptr, 10) : -1;
	}();
	if (slack < 0)
		return 0;
	return slack + static_cast<int64_t>(std::ceil(RL_TOKEN_EPSILON * static_cast<double>(limit.period_us) /
												   static_cast<double>(limit.rate)));
}

// How much later than at a call of cost first passes (0: at at), searched
// up to 2^40 us.
int64_t Shortfall(const RlZoneLimit &limit, const RlCounterState *state, int64_t at, int64_t cost)
{
	RlCounterState scratch{};
	auto passes = [&](int64_t extra) {
		return static_cast<Wide>(at) + extra > INT64_MAX ||
			rl_counter_take(&limit, state, at + extra, cost, &scratch).allowed;
	};
	if (passes(0))
		return 0;
	int64_t lo = 0;
	int64_t hi = 1;
	while (!passes(hi) && hi < (INT64_C(1) << 40))
	{
		lo = hi;
		hi *= 2;
	}
	while (hi - lo > 1)
	{
		const int64_t mid = lo + (hi - lo) / 2;
		if (passes(mid))
			hi = mid;
		else
			lo = mid;
	}
	return hi;
}

// reset_after (of a take, or of a refund: what a call of cost 0 sees): the
// key, stored as state, is back to its full allowance then: idle (a store
// may forget it), or for the token bucket, whose waits allow the 1e-9 token
// the take rounds up (a microsecond or more when a token takes over
// 1000 s), able to pass a call of its capacity.  Not for the cron token
// bucket: its waits count refill ticks that may not come.
void CheckReset(const RlZoneLimit &limit, const RlCounterState &state, const RlDecision &d)
{
	if (static_cast<Wide>(d.decided_at_us) + d.reset_after_us > MaxTime())
		return;
	const int64_t at = d.decided_at_us + d.reset_after_us;
	if (limit.algorithm == RL_ALGORITHM_TOKEN_BUCKET)
	{
		const int64_t late = Shortfall(limit, &state, at, limit.capacity);
		CHECK(late <= TbWaitSlack(limit), "a call of the capacity at reset_after is refused; it passes %"
			  PRId64 " us later; after " DFMT, late, DARGS(d));
	}
	else
		CHECK(rl_counter_idle(&limit, &state, at), "not idle at reset %" PRId64 " after " DFMT, at, DARGS(d));
}

// ---------------------------------------------------------------------------
// Zone algorithms with a fixed-size state.
// ---------------------------------------------------------------------------

void RunZone(FuzzedDataProvider &in)
{
	const RlAlgorithm algorithm = PickAlgorithm(in, false);
	RlZoneLimit limit;
	if (!PickLimit(in, algorithm, &limit))
		return;
	const bool cron = algorithm == RL_ALGORITHM_CRON_TOKEN_BUCKET;
	if (cron && in.ConsumeBool())
		limit.refill_tick_us = Pick(in, {1, 1000000, 60000000, limit.period_us,
										 std::max<int64_t>(1, limit.period_us / limit.rate)},
									1, std::min<int64_t>(RL_MAX_PERIOD_US, 2 * limit.period_us));
	const Wide period = limit.period_us;
	const Wide rate = limit.rate;
	const Wide capacity = limit.capacity;

	int64_t now = PickStart(in);
	bool stored = false;
	RlCounterState state{};
	// The model: admissions since the key's first stored state.
	bool started = false;
	int64_t t0 = 0;
	int64_t latest = INT64_MIN;
	Wide admitted = 0;
	Wide refilled = 0;			// cron: tokens the emulated refills added (rounded up)
	int calls = 0;
	// (decided_at, cost) of admissions; a refund takes its cost off the
	// newest, as the fixed and sliding-window counters give back from the
	// window open at the time (then the previous one).
	std::vector<std::pair<int64_t, int64_t>> log;
	// What refunds gave back, off admitted in the bounds: whole tokens (both
	// token buckets; the token bucket's counted as its remaining grew, which
	// is never less than the level did) or, for gcra, ticks of 1/rate us the
	// theoretical arrival time moved back.
	Wide given_back = 0;
	// The take just made, while nothing else has happened since: what a
	// refund of its cost at its instant must undo.
	struct
	{
		bool valid;
		int64_t cost;
		bool stored;			// the key held prior before it
		RlCounterState prior;
		RlDecision look;		// what a call of cost 0 saw before it
	} last{};

	// A refund: of the take just made, at its instant and of its cost (a
	// request that failed at once), or at any time of any cost.
	auto Refund = [&](bool undo) {
		int64_t cost = last.cost;
		if (!undo)
		{
			now = Clamp(static_cast<Wide>(now) + PickDelta(in, limit), kPgMinTime, MaxTime());
			cost = PickRefundCost(in, limit.capacity);
		}
		const RlCounterState *prior = stored ? &state : nullptr;
		RlCounterState scratch{};
		const RlDecision look = rl_counter_take(&limit, prior, now, 0, &scratch);
		// Owed as of the time the refund decides at (a key's clock never goes back).
		const bool owed = stored && !rl_counter_idle(&limit, &state, std::max(now, look.decided_at_us));
		const RlCounterState before = state;
		RlCounterState next{1, 1.0, 1, 1};	// must be overwritten
		const RlDecision d = rl_counter_refund(&limit, prior, now, cost, &next);
		if (Trace())
			std::fprintf(stderr, "call %d: refund%s now %" PRId64 " cost %" PRId64 " -> " DFMT "\n", g_call,
						 undo ? " (undo)" : "", now, cost, DARGS(d));
		CHECK(SameState(before, state), "prior written through");
		CheckRefund(limit, now, d);
		g_stats[kZoneRefunds]++;
		g_stats[kZoneRefundsGiven] += d.state_changed;
		latest = std::max(latest, d.decided_at_us);
		// next is what to store, or prior itself (zeroed for a key never
		// seen) exactly when nothing changed.
		const RlCounterState unchanged = stored ? state : RlCounterState{};
		CHECK(d.state_changed == !SameState(next, unchanged),
			  "state_changed %d, but next {%" PRId64 ", %g, %" PRId64 ", %" PRId64 "} vs prior {%" PRId64
			  ", %g, %" PRId64 ", %" PRId64 "}", (int) d.state_changed, next.a, next.fraction, next.stamp_us,
			  next.b, unchanged.a, unchanged.fraction, unchanged.stamp_us, unchanged.b);
		// Something comes back exactly when something is owed: a key never
		// seen, one back to full and a cost <= 0 give nothing.
		CHECK(d.state_changed == (owed && cost > 0), "owed %d, cost %" PRId64 ", refund " DFMT, (int) owed, cost,
			  DARGS(d));
		const RlCounterState *kept = d.state_changed ? &next : prior;
		// The decision is what a call of cost 0 sees on what is stored.
		RlDecision seen = rl_counter_take(&limit, kept, now, 0, &scratch);
		seen.allowed = true;
		seen.retry_after_us = 0;
		CHECK(SameOutcome(d, seen) && d.decided_at_us == seen.decided_at_us,
			  "refund " DFMT ", but a call of cost 0 then " DFMT, DARGS(d), DARGS(seen));
		// Never allowance taken away, never more back than the cost, and
		// exactly that up to the capacity, but for the sliding-window
		// counter, whose previous window weighs less than one a request.
		const Wide most = std::min<Wide>(capacity, static_cast<Wide>(look.remaining) + std::max<int64_t>(cost, 0));
		CHECK(d.remaining >= look.remaining, "a refund of %" PRId64 " lowered remaining from %" PRId64 ": " DFMT,
			  cost, look.remaining, DARGS(d));
		CHECK(algorithm == RL_ALGORITHM_SLIDING_WINDOW_COUNTER ? d.remaining <= most : d.remaining == most,
			  "a refund of %" PRId64 " from remaining %" PRId64 ": " DFMT, cost, look.remaining, DARGS(d));
		// At one instant a key never admits more than its capacity, however
		// much was given back: of a take of split and one of the capacity
		// less split plus one, not both pass (and one within what the refund
		// reported left does).
		const int64_t split = Clamp(Pick(in, {d.remaining, 1, limit.capacity, Clamp(static_cast<Wide>(d.remaining) + 1,
																					  1, limit.capacity)},
										 1, limit.capacity),
									1, limit.capacity);
		RlCounterState first{};
		const RlDecision one = rl_counter_take(&limit, kept, d.decided_at_us, split, &first);
		CHECK(one.allowed || split > d.remaining, "refund reported %" PRId64 " left, a take of %" PRId64
			  " is refused: " DFMT, d.remaining, split, DARGS(one));
		if (one.allowed)
		{
			const RlDecision two = rl_counter_take(&limit, &first, d.decided_at_us, limit.capacity - split + 1,
												   &scratch);
			CHECK(!two.allowed, "after a refund, %" PRId64 " then %" PRId64 " admitted at %" PRId64
				  " over a capacity of %" PRId64, split, limit.capacity - split + 1, d.decided_at_us,
				  limit.capacity);
		}
		if (d.state_changed)
		{
			// The clock never runs backwards: a call dated before the refund
			// is decided at it.
			const RlDecision early = rl_counter_take(&limit, &next, kPgMinTime, 0, &scratch);
			CHECK(early.decided_at_us >= d.decided_at_us, "a refund at %" PRId64 " let a later call decide at %"
				  PRId64, d.decided_at_us, early.decided_at_us);
			// What came back, for the bounds, and the windows against the log.
			switch (algorithm)
			{
				case RL_ALGORITHM_TOKEN_BUCKET:
					given_back += d.remaining - look.remaining;
					break;
				case RL_ALGORITHM_CRON_TOKEN_BUCKET:
					CHECK(next.a > before.a && next.a - before.a <= cost, "cron tokens %" PRId64 " -> %" PRId64
						  " for a refund of %" PRId64, before.a, next.a, cost);
					given_back += next.a - before.a;
					break;
				case RL_ALGORITHM_GCRA:
				{
					const Wide old_tat = static_cast<Wide>(before.stamp_us) * rate + before.a;
					const Wide new_tat = static_cast<Wide>(next.stamp_us) * rate + next.a;
					CHECK(next.a >= 0 && next.a < limit.rate && new_tat < old_tat &&
						  old_tat - new_tat <= period * cost && new_tat >= static_cast<Wide>(d.decided_at_us) * rate,
						  "gcra arrival time moved back from %" PRId64 "+%" PRId64 "/rate to %" PRId64 "+%" PRId64
						  "/rate for a refund of %" PRId64, before.stamp_us, before.a, next.stamp_us, next.a, cost);
					given_back += old_tat - new_tat;
					break;
				}
				case RL_ALGORITHM_FIXED_WINDOW:
				{
					const Wide given = std::min<int64_t>(before.a, limit.rate) - next.a;
					CHECK(next.stamp_us == before.stamp_us && given > 0 && given <= cost,
						  "fixed window %" PRId64 " at %" PRId64 " -> %" PRId64 " at %" PRId64 " for a refund of %"
						  PRId64, before.a, before.stamp_us, next.a, next.stamp_us, cost);
					CHECK(TakeOffNewest(&log, given) == 0, "gave back more than was admitted");
					// The open window's count: what its admissions left.
					Wide in_window = 0;
					for (const auto &e : log)
						if (e.first >= next.stamp_us)
							in_window += e.second;
					CHECK(in_window == next.a, "window count %" PRId64 ", its admissions less refunds %" PRId64,
						  next.a, (int64_t) in_window);
					break;
				}
				case RL_ALGORITHM_SLIDING_WINDOW_COUNTER:
				{
					// Both windows as the refund sees them (rotated to its time).
					const Wide seen_before = next.stamp_us == before.stamp_us ? static_cast<Wide>(before.a) + before.b
						: static_cast<Wide>(next.stamp_us) == static_cast<Wide>(before.stamp_us) + period ? before.a
						: 0;
					const Wide given = seen_before - next.a - next.b;
					CHECK(given > 0 && given <= cost, "sliding window counter {%" PRId64 ", %" PRId64 "} at %" PRId64
						  " -> {%" PRId64 ", %" PRId64 "} at %" PRId64 " for a refund of %" PRId64, before.a, before.b,
						  before.stamp_us, next.a, next.b, next.stamp_us, cost);
					CHECK(TakeOffNewest(&log, given) == 0, "gave back more than was admitted");
					// Each aligned window's count: what its admissions left.
					auto index = [&](int64_t t) {
						return static_cast<Wide>(t) / period - (t < 0 && t % limit.period_us != 0 ? 1 : 0);
					};
					Wide current = 0;
					Wide previous = 0;
					for (const auto &e : log)
					{
						current += index(e.first) == index(next.stamp_us) ? e.second : 0;
						previous += index(e.first) == index(next.stamp_us) - 1 ? e.second : 0;
					}
					CHECK(current == next.a && previous == next.b, "windows {%" PRId64 ", %" PRId64
						  "}, their admissions less refunds {%" PRId64 ", %" PRId64 "}", next.a, next.b,
						  (int64_t) current, (int64_t) previous);
					break;
				}
				case RL_ALGORITHM_SLIDING_WINDOW:
				case RL_ALGORITHM_CONCURRENCY:	// leases: its own state, fuzzed by the unit model
					break;
			}
			state = next;
		}
		if (undo)
		{
			// The take given back at once: what a call of cost 0 saw before
			// it, and (but for the token bucket, whose waits are searched from
			// its stamp, which moved: a microsecond apart) every later call
			// decides as if the take had never been.
			g_stats[kZoneUndone]++;
			const RlDecision &was = last.look;
			CHECK(d.state_changed && d.remaining == was.remaining && d.decided_at_us == was.decided_at_us &&
				  (algorithm == RL_ALGORITHM_TOKEN_BUCKET || d.reset_after_us == was.reset_after_us),
				  "a take of %" PRId64 " given back at once: " DFMT ", before it " DFMT, cost, DARGS(d), DARGS(was));
			if (algorithm != RL_ALGORITHM_TOKEN_BUCKET)
			{
				// Later: a call dated before the take is decided at its time.
				const int64_t ahead = Pick(in, {0, 1, std::max<int64_t>(1, limit.period_us / limit.rate),
												limit.period_us - 1, limit.period_us},
										   0, 2 * limit.period_us);
				const int64_t t = Clamp(static_cast<Wide>(d.decided_at_us) + std::max<int64_t>(0, ahead),
										kPgMinTime, MaxTime());
				const int64_t probe = in.ConsumeIntegralInRange<int64_t>(0, limit.capacity);
				const RlDecision never = rl_counter_take(&limit, last.stored ? &last.prior : nullptr, t, probe, &scratch);
				const RlDecision undone = rl_counter_take(&limit, &state, t, probe, &scratch);
				CHECK(SameOutcome(never, undone) && never.decided_at_us == undone.decided_at_us,
					  "a take of %" PRId64 " given back at once, then a call of %" PRId64 " at %" PRId64 ": " DFMT
					  ", without the take " DFMT, cost, probe, t, DARGS(undone), DARGS(never));
			}
		}
		if (stored && !cron)
			CheckReset(limit, state, d);
	};

	for (g_call = 0; g_call < kMaxCalls && in.remaining_bytes() > 0; g_call++)
	{
		// Ops 0 to 7 as before the refunds came (the seeds keep their
		// meaning); 12, 13: a refund; 14, 15: a refund of the take just made.
		const int op = in.ConsumeIntegralInRange<int>(0, 15);
		const bool undoable = last.valid;
		last.valid = false;
		if (op >= 12)
		{
			Refund(op >= 14 && undoable);
			continue;
		}
		if (op == 7 && cron)
		{
			// rl_cron_refill(): rate * tick / period per tick, exact, up to
			// capacity, only on buckets below it (the partial index).
			if (!stored || limit.refill_tick_us <= 0 || !rl_counter_needs_refill(&limit, &state))
				continue;
			const Wide per_tick = rate * limit.refill_tick_us;
			const Wide total = static_cast<Wide>(state.a) * period + state.b + per_tick;
			if (total >= capacity * period)
				state = RlCounterState{limit.capacity, 0.0, state.stamp_us, 0};
			else
				state = RlCounterState{static_cast<int64_t>(total / period), 0.0, state.stamp_us,
									   static_cast<int64_t>(total % period)};
			refilled += (per_tick + period - 1) / period;
			g_stats[kCronRefills]++;
			continue;
		}
		now = Clamp(static_cast<Wide>(now) + PickDelta(in, limit), kPgMinTime, MaxTime());
		const int64_t cost = PickCost(in, limit.capacity);
		if (!rl_zone_cost_valid(&limit, cost))
		{
			CHECK(cost < 0 || cost > limit.capacity, "valid cost %" PRId64 " refused", cost);
			continue;
		}
		CHECK(cost >= 0 && cost <= limit.capacity, "invalid cost %" PRId64 " accepted", cost);

		RlCounterState next{};
		// Idle: the next decision is a new key's (a store may forget the key).
		if (stored && rl_counter_idle(&limit, &state, now))
		{
			g_stats[kIdleChecks]++;
			const RlDecision fresh = rl_counter_take(&limit, nullptr, now, cost, &next);
			const RlDecision kept = rl_counter_take(&limit, &state, now, cost, &next);
			// The token bucket calls a key idle within the 1e-9 token its take
			// rounds up; its waits may then differ by that much.
			const int64_t slack = algorithm == RL_ALGORITHM_TOKEN_BUCKET ? TbWaitSlack(limit) : 0;
			CHECK(fresh.allowed == kept.allowed && fresh.capacity == kept.capacity &&
				  fresh.remaining == kept.remaining &&
				  std::llabs(fresh.retry_after_us - kept.retry_after_us) <= slack &&
				  std::llabs(fresh.reset_after_us - kept.reset_after_us) <= slack,
				  "idle key at %" PRId64 " decides " DFMT " but a new key " DFMT, now, DARGS(kept), DARGS(fresh));
		}

		const RlCounterState before = state;
		const bool was_stored = stored;
		const RlDecision look = rl_counter_take(&limit, stored ? &state : nullptr, now, 0, &next);
		const RlDecision d = rl_counter_take(&limit, stored ? &state : nullptr, now, cost, &next);
		if (Trace())
			std::fprintf(stderr, "call %d: now %" PRId64 " cost %" PRId64 " -> " DFMT "\n", g_call, now, cost, DARGS(d));
		CHECK(std::memcmp(&before, &state, sizeof state) == 0, "prior written through");
		CheckGeneric(limit, now, cost, d);
		last = {d.state_changed, cost, was_stored, before, look};
		calls++;
		g_stats[kZoneCalls]++;
		g_stats[kZoneRefused] += !d.allowed;
		latest = std::max(latest, d.decided_at_us);
		if (d.state_changed)
		{
			if (!started)
			{
				started = true;
				t0 = d.decided_at_us;
			}
			state = next;
			stored = true;
			admitted += cost;
			log.emplace_back(d.decided_at_us, cost);
		}
		const Wide elapsed = started ? static_cast<Wide>(latest) - t0 : 0;

		switch (algorithm)
		{
			case RL_ALGORITHM_TOKEN_BUCKET:
			{
				// admitted <= capacity + rate * elapsed / period, up to the
				// 1e-9 token a take may round up and double rounding.
				const long double bound = static_cast<long double>(capacity) +
					static_cast<long double>(rate) * static_cast<long double>(elapsed) /
					static_cast<long double>(period);
				const long double slack = calls * 1e-9L + bound * calls * 0x1p-50L + 1e-6L;
				CHECK(static_cast<long double>(admitted - given_back) <= bound + slack,
					  "token bucket admitted %.0Lf (%.0Lf given back) > %.6Lf", static_cast<long double>(admitted),
					  static_cast<long double>(given_back), bound);
				if (stored)
					CHECK(state.a >= 0 && state.a <= limit.capacity && state.fraction >= 0.0 &&
						  state.fraction < 1.0, "stored level %" PRId64 " + %g", state.a, state.fraction);
				break;
			}
			case RL_ALGORITHM_GCRA:
				// Exact: the theoretical arrival time advances period / rate
				// per unit of cost and may lead now by capacity units.
				CHECK(admitted * period - given_back <= capacity * period + rate * elapsed,
					  "gcra admitted %" PRId64 " (%" PRId64 " ticks given back) over %" PRId64 " us",
					  (int64_t) admitted, (int64_t) given_back, (int64_t) elapsed);
				break;
			case RL_ALGORITHM_FIXED_WINDOW:
				if (d.state_changed)
				{
					// Within any trailing period, at most two windows' worth.
					Wide recent = 0;
					for (const auto &e : log)
						if (static_cast<Wide>(e.first) > static_cast<Wide>(d.decided_at_us) - period)
							recent += e.second;
					CHECK(recent <= 2 * rate, "fixed window admitted %" PRId64 " in a period", (int64_t) recent);
					CHECK(state.a >= 0 && state.a <= limit.rate, "window count %" PRId64, state.a);
				}
				break;
			case RL_ALGORITHM_SLIDING_WINDOW_COUNTER:
				if (d.state_changed)
				{
					// At most rate within one aligned window.
					Wide window = 0;
					const Wide index = static_cast<Wide>(d.decided_at_us) / period -
						(d.decided_at_us < 0 && d.decided_at_us % limit.period_us != 0 ? 1 : 0);
					for (const auto &e : log)
					{
						const Wide i = static_cast<Wide>(e.first) / period -
							(e.first < 0 && e.first % limit.period_us != 0 ? 1 : 0);
						if (i == index)
							window += e.second;
					}
					CHECK(window <= rate, "sliding window counter admitted %" PRId64 " in one window",
						  (int64_t) window);
				}
				break;
			case RL_ALGORITHM_CRON_TOKEN_BUCKET:
				CHECK(d.remaining <= limit.capacity, "cron remaining");
				if (stored)
				{
					CHECK(state.a >= 0 && state.a <= limit.capacity, "cron tokens %" PRId64, state.a);
					CHECK(state.b >= 0 && state.b < limit.period_us, "cron part %" PRId64, state.b);
				}
				CHECK(admitted - given_back <= capacity + refilled, "cron admitted %" PRId64 " (%" PRId64
					  " given back) > capacity + %" PRId64, (int64_t) admitted, (int64_t) given_back,
					  (int64_t) refilled);
				break;
			case RL_ALGORITHM_SLIDING_WINDOW:
			case RL_ALGORITHM_CONCURRENCY:	// leases: its own state, fuzzed by the unit model
				break;
		}

		if (cron)
			continue;			// its waits count refill ticks that may not come
		// retry_after: the same call passes then; for exact algorithms, not
		// a microsecond earlier.
		RlCounterState scratch{};
		if (!d.allowed && static_cast<Wide>(d.decided_at_us) + d.retry_after_us <= MaxTime())
		{
			const int64_t at = d.decided_at_us + d.retry_after_us;
			g_stats[kRetryChecks]++;
			const int64_t late = Shortfall(limit, stored ? &state : nullptr, at, cost);
			CHECK(late <= (algorithm == RL_ALGORITHM_TOKEN_BUCKET ? TbWaitSlack(limit) : 0),
				  "the same call retried at retry_after is refused; it passes %" PRId64 " us later; after " DFMT,
				  late, DARGS(d));
			if (d.retry_after_us > 1 && algorithm != RL_ALGORITHM_TOKEN_BUCKET &&
				algorithm != RL_ALGORITHM_SLIDING_WINDOW_COUNTER)
			{
				const RlDecision early = rl_counter_take(&limit, stored ? &state : nullptr, at - 1, cost, &scratch);
				CHECK(!early.allowed, "retry_after not the earliest: allowed at %" PRId64 " after " DFMT,
					  at - 1, DARGS(d));
			}
		}
		if (stored)
			CheckReset(limit, state, d);
	}
}

// ---------------------------------------------------------------------------
// The exact sliding window and its chunk store.
// ---------------------------------------------------------------------------

bool SameBuffer(const RlSwBuffer &a, const RlSwBuffer &b)
{
	if (a.count != b.count || a.bytes != b.bytes)
		return false;
	for (int32_t i = 0; i < a.count; i++)
		if (a.entries[i].time_us != b.entries[i].time_us || a.entries[i].cost != b.entries[i].cost)
			return false;
	return true;
}

// Field by field: a buffer's entries past its count are not its state.
bool SameSwState(const RlSlidingWindowState &a, const RlSlidingWindowState &b)
{
	return a.admitted == b.admitted && a.stamp_us == b.stamp_us && a.newest_us == b.newest_us &&
		a.first_chunk == b.first_chunk && a.next_chunk == b.next_chunk && SameBuffer(a.front, b.front) &&
		SameBuffer(a.back, b.back);
}

struct SwStore
{
	RlZoneLimit limit;
	std::vector<uint8_t> header;	// empty: a key never seen
	int64_t admitted = 0;
	int64_t stamp_us = 0;
	std::map<uint32_t, std::vector<uint8_t>> chunks;

	void Load(RlSlidingWindowState *state) const
	{
		if (header.empty())
			rl_sw_init(state);
		else
			CHECK(rl_sw_decode_header(header.data(), static_cast<int32_t>(header.size()), admitted,
									  stamp_us, state), "a stored header does not decode");
	}

	// Every stored entry, oldest first: front, the sealed chunks (read from
	// the store), back.
	std::vector<RlSwEntry> Log() const
	{
		static RlSlidingWindowState state;
		static RlSlidingWindowState chunk;
		Load(&state);
		std::vector<RlSwEntry> log(state.front.entries, state.front.entries + state.front.count);
		for (uint32_t i = 0; i < rl_sw_chunk_count(&state); i++)
		{
			const auto found = chunks.find(rl_sw_chunk_seq(state.first_chunk, i));
			CHECK(found != chunks.end(), "chunk %u of %u missing", i, rl_sw_chunk_count(&state));
			// A chunk decodes as the back of a header with an empty front.
			std::vector<uint8_t> bytes{1, 1, 1, 0, 0};
			bytes.insert(bytes.end(), found->second.begin(), found->second.end());
			CHECK(rl_sw_decode_header(bytes.data(), static_cast<int32_t>(bytes.size()), 0, 0, &chunk),
				  "stored chunk %u does not decode", i);
			log.insert(log.end(), chunk.back.entries, chunk.back.entries + chunk.back.count);
		}
		log.insert(log.end(), state.back.entries, state.back.entries + state.back.count);
		return log;
	}

	// One call on the stored state with the chunk protocol; apply = false
	// stores nothing.
	RlDecision Call(int64_t now, int64_t cost, bool apply)
	{
		static RlSlidingWindowState stored;
		static RlSlidingWindowState state;
		static RlSwDecision out;
		Load(&stored);
		state = stored;
		std::vector<RlSwChunk> loaded;
		for (;;)
		{
			CHECK(rl_sw_take(&limit, &state, now, cost, loaded.data(), static_cast<int32_t>(loaded.size()), &out),
				  "rl_sw_take failed on a state it wrote");
			if (out.need_chunks == 0)
				break;
			CHECK(std::memcmp(&state, &stored, sizeof state) == 0, "need_chunks changed the state");
			CHECK(out.need_chunks > static_cast<int32_t>(loaded.size()) &&
				  static_cast<uint32_t>(out.need_chunks) <= rl_sw_chunk_count(&stored),
				  "need_chunks %d with %zu loaded of %u", out.need_chunks, loaded.size(),
				  rl_sw_chunk_count(&stored));
			while (static_cast<int32_t>(loaded.size()) < out.need_chunks)
			{
				const uint32_t seq = rl_sw_chunk_seq(stored.first_chunk, static_cast<uint32_t>(loaded.size()));
				const auto found = chunks.find(seq);
				CHECK(found != chunks.end(), "chunk %u asked for but not stored", seq);
				loaded.push_back(RlSwChunk{found->second.data(), static_cast<int32_t>(found->second.size())});
				g_stats[kChunkLoads]++;
			}
		}
		const RlDecision d = out.decision;
		CheckGeneric(limit, now, cost, d);
		if (!d.state_changed)
		{
			CHECK(std::memcmp(&state, &stored, sizeof state) == 0, "a call that changed nothing changed the state");
			CHECK(out.consumed_chunks == 0 && !out.sealed, "a call that changed nothing changed chunks");
			return d;
		}
		if (!apply)
			return d;
		CHECK(out.consumed_from == stored.first_chunk, "consumed_from %u, first chunk %u",
			  out.consumed_from, stored.first_chunk);
		for (int32_t i = 0; i < out.consumed_chunks; i++)
		{
			const uint32_t seq = rl_sw_chunk_seq(out.consumed_from, static_cast<uint32_t>(i));
			CHECK(chunks.erase(seq) == 1, "consumed chunk %u was not stored", seq);
			g_stats[kConsumed]++;
		}
		if (out.sealed)
		{
			CHECK(out.sealed_len > 0 && out.sealed_len <= RL_SW_BUFFER_BYTES, "sealed_len %d", out.sealed_len);
			CHECK(chunks.count(out.sealed_seq) == 0, "chunk %u overwritten", out.sealed_seq);
			chunks[out.sealed_seq].assign(out.sealed_bytes, out.sealed_bytes + out.sealed_len);
			g_stats[kSealed]++;
		}
		uint8_t bytes[RL_SW_MAX_HEADER_BYTES + 64];
		const int32_t len = rl_sw_encode_header(&state, bytes);
		CHECK(len > 0 && len <= RL_SW_MAX_HEADER_BYTES, "header of %d bytes", len);
		header.assign(bytes, bytes + len);
		admitted = state.admitted;
		stamp_us = state.stamp_us;
		static RlSlidingWindowState reloaded;
		Load(&reloaded);
		uint8_t again[RL_SW_MAX_HEADER_BYTES + 64];
		CHECK(rl_sw_encode_header(&reloaded, again) == len && std::memcmp(again, bytes, len) == 0 &&
			  reloaded.admitted == state.admitted && reloaded.stamp_us == state.stamp_us &&
			  reloaded.newest_us == state.newest_us && reloaded.first_chunk == state.first_chunk &&
			  reloaded.next_chunk == state.next_chunk, "header round trip");
		const uint32_t count = rl_sw_chunk_count(&state);
		CHECK(chunks.size() == count, "%zu chunks stored, %u referenced", chunks.size(), count);
		for (uint32_t i = 0; i < count; i++)
			CHECK(chunks.count(rl_sw_chunk_seq(state.first_chunk, i)) == 1, "chunk %u of %u missing", i, count);
		return d;
	}
};

void RunWindow(FuzzedDataProvider &in)
{
	static SwStore store;
	store = SwStore{};
	if (!PickLimit(in, RL_ALGORITHM_SLIDING_WINDOW, &store.limit))
		return;
	const RlZoneLimit &limit = store.limit;
	const Wide period = limit.period_us;
	int64_t now = PickStart(in);
	// The model: every admission still in the window, oldest first.
	std::deque<std::pair<int64_t, int64_t>> window;
	// The key's clock: its latest admission or refund that gave back.  A
	// call at an earlier time is decided then (refusals, cost 0 and refunds
	// that give nothing store nothing, so they do not move it).
	int64_t clock = INT64_MIN;
	// The newest entry's time as the key may report it (reset_after): the
	// latest admission, or after a refund the newest entry left in a buffer;
	// when only a sealed chunk could tell, the last known, never earlier
	// than the truth.
	int64_t newest = INT64_MIN;
	// The take just made, while nothing else has happened since.
	struct
	{
		bool valid;
		int64_t cost;
		RlDecision look;		// what a call of cost 0 saw before it
	} last{};

	// A refund: of the take just made, at its instant and of its cost (a
	// request that failed at once), or at any time of any cost.  Checked
	// against the log as stored: the newest entries of the back lose the
	// cost first, then (back emptied) those of the front; the chunks, and
	// entries that have left the period, give nothing.
	auto Refund = [&](bool undo) {
		int64_t cost = last.cost;
		if (!undo)
		{
			now = Clamp(static_cast<Wide>(now) + PickDelta(in, limit), kPgMinTime, MaxTime());
			cost = PickRefundCost(in, limit.rate);
		}
		static RlSlidingWindowState before;
		static RlSlidingWindowState state;
		store.Load(&before);
		state = before;
		const uint32_t chunk_count = rl_sw_chunk_count(&before);
		const std::vector<RlSwEntry> log = store.Log();
		const int64_t at = std::max(now, clock);
		const Wide horizon = static_cast<Wide>(at) - period;
		// The store holds what the model has in the period.
		Wide live = 0;
		for (const RlSwEntry &e : log)
			live += e.time_us > horizon ? e.cost : 0;
		Wide in_window = 0;
		for (const auto &e : window)
			in_window += e.first > horizon ? e.second : 0;
		CHECK(live == in_window, "%" PRId64 " stored in the period, model %" PRId64, (int64_t) live,
			  (int64_t) in_window);
		const RlDecision look = store.Call(now, 0, false);

		std::vector<RlSwEntry> expected = log;
		Wide refunded = 0;
		if (cost > 0)
		{
			// Newest first within [begin, end), stopping at an expired entry;
			// whether it emptied the range.
			auto take_off = [&](size_t begin, size_t end) {
				size_t i = end;
				while (i > begin && refunded < cost && expected[i - 1].time_us > horizon)
				{
					const int64_t share = static_cast<int64_t>(std::min<Wide>(expected[i - 1].cost, cost - refunded));
					expected[i - 1].cost -= share;
					refunded += share;
					if (expected[i - 1].cost > 0)
						break;
					i--;
				}
				return i == begin;
			};
			if (take_off(log.size() - static_cast<size_t>(before.back.count), log.size()) && refunded < cost)
				take_off(0, static_cast<size_t>(before.front.count));
			expected.erase(std::remove_if(expected.begin(), expected.end(),
										  [](const RlSwEntry &e) { return e.cost == 0; }),
						   expected.end());
		}

		RlDecision d{};
		CHECK(rl_sw_refund(&limit, &state, now, cost, &d), "rl_sw_refund failed on a state it wrote");
		if (Trace())
			std::fprintf(stderr, "call %d: refund%s now %" PRId64 " cost %" PRId64 " -> " DFMT "\n", g_call,
						 undo ? " (undo)" : "", now, cost, DARGS(d));
		CheckRefund(limit, now, d);
		g_stats[kWindowRefunds]++;
		g_stats[kWindowRefundsGiven] += d.state_changed;
		CHECK(d.decided_at_us == at, "refund decided at %" PRId64 ", expected %" PRId64, d.decided_at_us, at);
		CHECK(d.state_changed == (refunded > 0), "refund of %" PRId64 " gave back %" PRId64 " of the log, " DFMT,
			  cost, (int64_t) refunded, DARGS(d));
		// state_changed exactly when there is a new state to store; the
		// state is untouched otherwise.
		CHECK(d.state_changed == !SameSwState(state, before), "state_changed %d, state %s",
			  (int) d.state_changed, SameSwState(state, before) ? "the same" : "changed");
		if (!d.state_changed)
			CHECK(std::memcmp(&state, &before, sizeof state) == 0, "a refund that gave nothing wrote the state");
		else
		{
			// Stored as the glue stores it: the header, admitted and stamp;
			// the chunks as they are (a refund never reads nor writes one).
			CHECK(state.first_chunk == before.first_chunk && state.next_chunk == before.next_chunk,
				  "a refund moved the chunks [%u, %u) to [%u, %u)", before.first_chunk, before.next_chunk,
				  state.first_chunk, state.next_chunk);
			CHECK(state.front.bytes <= before.front.bytes && state.back.bytes <= before.back.bytes,
				  "a refund grew a buffer: front %d -> %d, back %d -> %d bytes", before.front.bytes,
				  state.front.bytes, before.back.bytes, state.back.bytes);
			CHECK(state.stamp_us == at, "refund stamped %" PRId64 ", decided at %" PRId64, state.stamp_us, at);
			uint8_t bytes[RL_SW_MAX_HEADER_BYTES + 64];
			const int32_t len = rl_sw_encode_header(&state, bytes);
			CHECK(len > 0 && len <= RL_SW_MAX_HEADER_BYTES, "header of %d bytes after a refund", len);
			store.header.assign(bytes, bytes + len);
			store.admitted = state.admitted;
			store.stamp_us = state.stamp_us;
			static RlSlidingWindowState reloaded;
			store.Load(&reloaded);
			CHECK(SameSwState(reloaded, state), "header round trip after a refund");
			if (state.back.count > 0)
				newest = state.back.entries[state.back.count - 1].time_us;
			else if (chunk_count == 0 && state.front.count > 0)
				newest = state.front.entries[state.front.count - 1].time_us;
			CHECK(state.newest_us == newest, "newest %" PRId64 " after a refund, expected %" PRId64,
				  state.newest_us, newest);
			clock = at;
		}
		const std::vector<RlSwEntry> after = store.Log();
		bool same_log = after.size() == expected.size();
		for (size_t i = 0; same_log && i < after.size(); i++)
			same_log = after[i].time_us == expected[i].time_us && after[i].cost == expected[i].cost;
		CHECK(same_log, "a refund of %" PRId64 " left %zu entries, expected %zu (of %zu; front %d, %u chunks, back %d)",
			  cost, after.size(), expected.size(), log.size(), before.front.count, chunk_count, before.back.count);
		// admitted is the cost of every stored entry (a refund expires none).
		Wide total = 0;
		for (const RlSwEntry &e : after)
			total += e.cost;
		CHECK(total == state.admitted, "admitted %" PRId64 ", the entries hold %" PRId64, state.admitted,
			  (int64_t) total);
		if (!after.empty() && d.state_changed)
			CHECK(state.newest_us >= after.back().time_us, "newest %" PRId64 " before the newest entry %" PRId64,
				  state.newest_us, after.back().time_us);
		if (d.state_changed)
		{
			window.clear();
			for (const RlSwEntry &e : after)
				if (e.time_us > horizon)
					window.emplace_back(e.time_us, e.cost);
		}
		g_stats[kWindowRefundsPastChunks] += chunk_count > 0 && !SameBuffer(state.front, before.front);

		// The decision: what a call of cost 0 sees, without a chunk to read:
		// where only one could tell that entries have expired, they count as
		// in the period (never more left, never an earlier reset).
		const RlDecision seen = store.Call(now, 0, false);
		bool front_live = false;
		for (int32_t i = 0; i < state.front.count; i++)
			front_live = front_live || state.front.entries[i].time_us > horizon;
		if (chunk_count == 0 || front_live)
			CHECK(SameOutcome(d, seen) && d.decided_at_us == seen.decided_at_us,
				  "refund " DFMT ", but a call of cost 0 then " DFMT, DARGS(d), DARGS(seen));
		else
		{
			g_stats[kWindowRefundsUnderstated]++;
			CHECK(d.remaining <= seen.remaining && d.reset_after_us >= seen.reset_after_us &&
				  d.decided_at_us == seen.decided_at_us,
				  "refund " DFMT " overstates a call of cost 0 then " DFMT, DARGS(d), DARGS(seen));
		}
		// Never allowance taken away, never more back than the cost.
		CHECK(seen.remaining >= look.remaining &&
			  seen.remaining <= std::min<Wide>(limit.rate, static_cast<Wide>(look.remaining) + std::max<int64_t>(cost, 0)),
			  "a refund of %" PRId64 " took remaining from %" PRId64 " to %" PRId64, cost, look.remaining,
			  seen.remaining);

		// At one instant the window never admits more than its rate: of a
		// take of split and one of the rate less split plus one, not both
		// pass (and one within what the refund reported left does).
		const int64_t split = Clamp(Pick(in, {d.remaining, 1, limit.rate, Clamp(static_cast<Wide>(d.remaining) + 1,
																				 1, limit.rate)},
										 1, limit.rate),
									1, limit.rate);
		static SwStore scratch;
		scratch = store;
		const RlDecision one = scratch.Call(at, split, true);
		CHECK(one.allowed || split > d.remaining, "refund reported %" PRId64 " left, a take of %" PRId64
			  " is refused: " DFMT, d.remaining, split, DARGS(one));
		if (one.allowed)
		{
			const RlDecision two = scratch.Call(at, limit.rate - split + 1, false);
			CHECK(!two.allowed, "after a refund, %" PRId64 " then %" PRId64 " admitted at %" PRId64
				  " over a rate of %" PRId64, split, limit.rate - split + 1, at, limit.rate);
		}

		if (undo)
		{
			// The take given back at once: a call of cost 0 sees what it saw
			// before it (reset_after aside: the newest time may be one only a
			// chunk could correct, checked against the model on every take).
			g_stats[kWindowUndone]++;
			CHECK(d.state_changed && seen.remaining == last.look.remaining &&
				  seen.decided_at_us == last.look.decided_at_us,
				  "a take of %" PRId64 " given back at once: then " DFMT ", before it " DFMT, cost, DARGS(seen),
				  DARGS(last.look));
		}
	};

	for (g_call = 0; g_call < kMaxCalls && in.remaining_bytes() > 0; g_call++)
	{
		// 0 to 5: a take; 6: a refund; 7: a refund of the take just made.
		const int op = in.ConsumeIntegralInRange<int>(0, 7);
		const bool undoable = last.valid;
		last.valid = false;
		if (op >= 6)
		{
			Refund(op == 7 && undoable);
			continue;
		}
		now = Clamp(static_cast<Wide>(now) + PickDelta(in, limit), kPgMinTime, MaxTime());
		const int64_t cost = PickCost(in, limit.rate);
		if (!rl_zone_cost_valid(&limit, cost))
			continue;
		const bool fresh_key = store.header.empty();

		// Idle: decides as a key never seen.
		if (!fresh_key)
		{
			static RlSlidingWindowState state;
			store.Load(&state);
			if (rl_sw_idle(&limit, &state, now))
			{
				g_stats[kIdleChecks]++;
				SwStore empty;
				empty.limit = limit;
				const RlDecision fresh = empty.Call(now, cost, false);
				const RlDecision kept = store.Call(now, cost, false);
				CHECK(SameOutcome(fresh, kept) && fresh.decided_at_us == kept.decided_at_us,
					  "idle window decides " DFMT ", a new key " DFMT, DARGS(kept), DARGS(fresh));
			}
		}

		const int64_t at = std::max(now, clock);
		auto in_period = [&](const std::pair<int64_t, int64_t> &e) {
			return static_cast<Wide>(e.first) > static_cast<Wide>(at) - period;
		};
		Wide in_window = 0;
		for (const auto &e : window)
			if (in_period(e))
				in_window += e.second;
		const bool model_allowed = in_window + cost <= limit.rate;
		Wide model_retry = 0;
		if (!model_allowed)
		{
			const Wide need = in_window + cost - limit.rate;
			Wide freed = 0;
			for (const auto &e : window)
			{
				if (!in_period(e))
					continue;
				freed += e.second;
				if (freed >= need)
				{
					model_retry = std::max<Wide>(1, static_cast<Wide>(e.first) + period - at);
					break;
				}
			}
		}

		const RlDecision look = store.Call(now, 0, false);
		const RlDecision d = store.Call(now, cost, true);
		g_stats[kWindowCalls]++;
		g_stats[kWindowRefused] += !d.allowed;
		if (Trace())
			std::fprintf(stderr, "call %d: now %" PRId64 " cost %" PRId64 " -> " DFMT "\n", g_call, now, cost, DARGS(d));
		last = {d.state_changed, cost, look};
		CHECK(d.decided_at_us == at, "decided at %" PRId64 ", expected %" PRId64, d.decided_at_us, at);
		CHECK(d.allowed == model_allowed, "allowed %d, but %" PRId64 " admitted in the window + cost %" PRId64
			  " vs rate %" PRId64, (int) d.allowed, (int64_t) in_window, cost, limit.rate);
		if (d.allowed && cost > 0)
		{
			window.emplace_back(at, cost);
			in_window += cost;
			clock = at;
			newest = at;
			// No later call is decided before the clock.
			while (static_cast<Wide>(window.front().first) <= static_cast<Wide>(clock) - period)
				window.pop_front();
		}
		CHECK(d.remaining == limit.rate - in_window, "remaining %" PRId64 ", model %" PRId64,
			  d.remaining, (int64_t) (limit.rate - in_window));
		if (!d.allowed)
			CHECK(d.retry_after_us == model_retry, "retry_after %" PRId64 ", model %" PRId64,
				  d.retry_after_us, (int64_t) model_retry);
		const Wide model_reset = in_window > 0 ? static_cast<Wide>(newest) + period - at : 0;
		CHECK(d.reset_after_us == model_reset, "reset_after %" PRId64 ", model %" PRId64,
			  d.reset_after_us, (int64_t) model_reset);
		if (d.state_changed)
			CHECK(store.admitted == in_window, "stored admitted %" PRId64 ", model %" PRId64,
				  store.admitted, (int64_t) in_window);
		// Any trailing period holds at most rate (brute force over the model,
		// which is exact: the checks above keep it in step).
		CHECK(in_window <= limit.rate, "window over its rate");
	}
}

// ---------------------------------------------------------------------------
// rl_token_bucket's ad-hoc bucket.
// ---------------------------------------------------------------------------

double PickDouble(FuzzedDataProvider &in)
{
	static const double specials[] = {1, 2, 0.1, 0.3, 0.5, 1e-9, 5e-324, 1e6, 60, 3600,
									  9007199254740992.0, 134217728, 67108864, 1e300,
									  NAN, INFINITY, -INFINITY, -1, 0, -0.0};
	const size_t choice = in.ConsumeIntegralInRange<size_t>(0, sizeof specials / sizeof *specials + 1);
	if (choice < sizeof specials / sizeof *specials)
		return specials[choice];
	if (choice == sizeof specials / sizeof *specials)
		return in.ConsumeFloatingPointInRange<double>(1e-6, 1e6);
	uint64_t bits = in.ConsumeIntegral<uint64_t>();
	double value;
	std::memcpy(&value, &bits, sizeof value);
	return value;
}

bool BucketLimit(double rate, double window, int64_t cost, RlTokenBucketLimit *limit)
{
	const RlParamError error = rl_token_bucket_limit(rate, window, cost, limit);
	RlParamError expected = RL_PARAM_OK;
	const double capacity = rate * window;
	if (!(std::isfinite(rate) && rate > 0))
		expected = RL_PARAM_RATE_INVALID;
	else if (!(std::isfinite(window) && window > 0))
		expected = RL_PARAM_WINDOW_INVALID;
	else if (!std::isfinite(capacity) || capacity > RL_MAX_CAPACITY)
		expected = RL_PARAM_CAPACITY_OVERFLOW;
	else if (cost < 0)
		expected = RL_PARAM_COST_NEGATIVE;
	else if (cost > RL_MAX_CAPACITY_INT || static_cast<double>(cost) > capacity + RL_TOKEN_EPSILON)
		expected = RL_PARAM_COST_ABOVE_CAPACITY;
	CHECK(error == expected, "rl_token_bucket_limit(%g, %g, %" PRId64 ") = %d, expected %d",
		  rate, window, cost, (int) error, (int) expected);
	return error == RL_PARAM_OK;
}

void RunBucket(FuzzedDataProvider &in)
{
	double rate = PickDouble(in);
	double window = PickDouble(in);
	const bool vary = in.ConsumeIntegralInRange<int>(0, 3) == 0;
	std::snprintf(g_context, sizeof g_context, "rl_token_bucket rate %.17g window %.17g%s", rate, window,
				  vary ? " (varying)" : "");
	int64_t now = PickStart(in);
	bool stored = false;
	RlTokenBucketState state{};
	bool started = false;
	int64_t t0 = 0;
	int64_t latest = INT64_MIN;
	long double admitted = 0;
	int calls = 0;

	for (g_call = 0; g_call < kMaxCalls && in.remaining_bytes() > 0; g_call++)
	{
		if (vary && in.ConsumeIntegralInRange<int>(0, 7) == 0)
		{
			rate = PickDouble(in);
			window = PickDouble(in);
		}
		const double capacity_d = rate * window;
		const int64_t capacity_i = std::isfinite(capacity_d) && capacity_d >= 0 && capacity_d < 9.2e18
			? static_cast<int64_t>(capacity_d) : 1000;
		const int64_t cost = PickCost(in, capacity_i);
		RlTokenBucketLimit limit;
		if (!BucketLimit(rate, window, cost, &limit))
			continue;
		const RlZoneLimit fake{RL_ALGORITHM_TOKEN_BUCKET, 1, 1000000, 1, 0};
		now = Clamp(static_cast<Wide>(now) + PickDelta(in, fake), kPgMinTime, MaxTime());

		if (stored && rl_token_bucket_idle(&state, now, &limit))
		{
			const RlTokenBucketDecision fresh = rl_token_bucket_take(nullptr, now, &limit, cost);
			const RlTokenBucketDecision kept = rl_token_bucket_take(&state, now, &limit, cost);
			CHECK(fresh.allowed == kept.allowed && fresh.remaining == kept.remaining,
				  "idle bucket decides %d/%" PRId64 ", a new one %d/%" PRId64, (int) kept.allowed,
				  kept.remaining, (int) fresh.allowed, fresh.remaining);
		}
		const RlTokenBucketState before = state;
		const RlTokenBucketDecision d = rl_token_bucket_take(stored ? &state : nullptr, now, &limit, cost);
		g_stats[kBucketCalls]++;
		CHECK(std::memcmp(&before, &state, sizeof state) == 0, "prior written through");
		calls++;
		CHECK(d.allowed == (d.remaining >= 0), "allowed %d with remaining %" PRId64, (int) d.allowed, d.remaining);
		CHECK(d.remaining >= -1 && static_cast<double>(d.remaining) <= limit.capacity + 2 * RL_TOKEN_EPSILON,
			  "remaining %" PRId64 " of capacity %.17g", d.remaining, limit.capacity);
		if (!d.allowed && stored)
			CHECK(!d.state_changed, "a refusal changed the state");
		if (stored && cost == 0)
			CHECK(!d.state_changed, "cost 0 changed the state");
		CHECK(d.next.tokens >= 0 && d.next.fraction >= 0.0 && d.next.fraction < 1.0 &&
			  static_cast<double>(d.next.tokens) <= limit.capacity,
			  "next level %" PRId64 " + %.17g of %.17g", d.next.tokens, d.next.fraction, limit.capacity);
		CHECK(d.next.stamp_us >= now, "stamp went back");
		if (d.state_changed)
		{
			if (!started)
			{
				started = true;
				t0 = d.next.stamp_us;
			}
			state = d.next;
			stored = true;
			if (d.allowed)
				admitted += cost;
		}
		latest = std::max(latest, d.next.stamp_us);
		if (!vary && started)
		{
			const long double capacity = limit.capacity;
			const long double bound = capacity + static_cast<long double>(rate) *
				(static_cast<long double>(latest) - t0) / 1e6L;
			const long double slack = calls * 1e-9L + bound * calls * 0x1p-50L + 1e-6L;
			CHECK(admitted <= bound + slack, "bucket admitted %.0Lf > %.6Lf", admitted, bound);
		}
	}
}

// ---------------------------------------------------------------------------
// Raw headers and chunks: decoding never reads out of bounds, and a state
// that decodes is handled without undefined behaviour.
// ---------------------------------------------------------------------------

void RunHeader(FuzzedDataProvider &in)
{
	RlZoneLimit limit;
	if (!PickLimit(in, RL_ALGORITHM_SLIDING_WINDOW, &limit))
		return;
	const int64_t admitted = in.ConsumeIntegral<int64_t>();
	const int64_t stamp = in.ConsumeIntegral<int64_t>();
	std::vector<uint8_t> header;
	if (in.ConsumeBool())
	{
		// Well-formed up to the entries: format 1, chunk numbers, newest
		// time and the front's length as varints, then raw entry bytes.
		auto varint = [&header](uint64_t value) {
			while (value >= 0x80)
			{
				header.push_back(static_cast<uint8_t>(value | 0x80));
				value >>= 7;
			}
			header.push_back(static_cast<uint8_t>(value));
		};
		header.push_back(1);
		varint(Pick(in, {1, 2, RL_SW_MAX_CHUNK_SEQ, RL_SW_MAX_CHUNK_SEQ - 1, 0}, 1, 8));
		varint(Pick(in, {1, 2, RL_SW_MAX_CHUNK_SEQ, 0, INT64_C(1) << 32}, 1, 8));
		const int64_t newest = in.ConsumeIntegral<int64_t>();
		varint((static_cast<uint64_t>(newest) << 1) ^ static_cast<uint64_t>(newest >> 63));
		const std::vector<uint8_t> entries =
			in.ConsumeBytes<uint8_t>(in.ConsumeIntegralInRange<size_t>(0, 2 * RL_SW_BUFFER_BYTES + 40));
		varint(Pick(in, {0, static_cast<int64_t>(entries.size()), static_cast<int64_t>(entries.size() / 2),
						 RL_SW_BUFFER_BYTES, RL_SW_BUFFER_BYTES + 20, RL_SW_BUFFER_BYTES + 21},
					0, static_cast<int64_t>(entries.size())));
		header.insert(header.end(), entries.begin(), entries.end());
	}
	else
		header = in.ConsumeBytes<uint8_t>(in.ConsumeIntegralInRange<size_t>(0, RL_SW_MAX_HEADER_BYTES + 40));
	std::vector<std::vector<uint8_t>> raw_chunks(in.ConsumeIntegralInRange<size_t>(0, 4));
	for (auto &chunk : raw_chunks)
		chunk = in.ConsumeBytes<uint8_t>(in.ConsumeIntegralInRange<size_t>(0, RL_SW_BUFFER_BYTES + 40));
	std::vector<RlSwChunk> chunks;
	for (const auto &chunk : raw_chunks)
		chunks.push_back(RlSwChunk{chunk.data(), static_cast<int32_t>(chunk.size())});

	static RlSlidingWindowState state;
	// A copy on the heap, exactly the header's size: ASan sees any overread.
	std::vector<uint8_t> exact(header);
	if (!rl_sw_decode_header(exact.empty() ? nullptr : exact.data(), static_cast<int32_t>(exact.size()),
							 admitted, stamp, &state))
		return;
	g_stats[kHeadersDecoded]++;
	CHECK(state.front.count >= 0 && state.front.count <= RL_SW_BUFFER_ENTRIES &&
		  state.back.count >= 0 && state.back.count <= RL_SW_BUFFER_ENTRIES, "buffer counts");
	uint8_t bytes[RL_SW_MAX_HEADER_BYTES + 64];
	const int32_t len = rl_sw_encode_header(&state, bytes);
	CHECK(len > 0 && len <= RL_SW_MAX_HEADER_BYTES, "a decoded header re-encodes to %d bytes", len);
	(void) rl_sw_chunk_count(&state);
	(void) rl_sw_idle(&limit, &state, in.ConsumeIntegral<int64_t>());

	// rl_sw_refund takes the state as decoded, not bytes: a buffer no
	// decode would return (a count out of range, a cost out of range, times
	// out of order) is corrupt, refused, and left as it was.
	if (in.ConsumeIntegralInRange<int>(0, 3) == 0)
	{
		static RlSlidingWindowState bad;
		static RlSlidingWindowState kept;
		bad = state;
		RlSwBuffer &buffer = in.ConsumeBool() ? bad.front : bad.back;
		const int how = in.ConsumeIntegralInRange<int>(0, 5);
		const int32_t i = buffer.count > 0 ? in.ConsumeIntegralInRange<int32_t>(0, buffer.count - 1) : 0;
		if (how == 0)
			buffer.count = in.ConsumeBool() ? -1 : RL_SW_BUFFER_ENTRIES + 1;
		else if (buffer.count == 0)
			buffer.count = INT32_MIN;
		else if (how <= 3)
			buffer.entries[i].cost = how == 1 ? 0 : how == 2 ? -in.ConsumeIntegralInRange<int64_t>(1, INT64_MAX)
				: in.ConsumeIntegralInRange<int64_t>(RL_MAX_LIMIT + 1, INT64_MAX);
		else if (i > 0 && buffer.entries[i - 1].time_us > INT64_MIN)
			buffer.entries[i].time_us = buffer.entries[i - 1].time_us - in.ConsumeIntegralInRange<int64_t>(
				1, static_cast<int64_t>(std::min<Wide>(INT64_MAX, static_cast<Wide>(buffer.entries[i - 1].time_us) -
														   INT64_MIN)));
		else
			buffer.count = -1;
		kept = bad;
		RlDecision d{};
		CHECK(!rl_sw_refund(&limit, &bad, in.ConsumeIntegral<int64_t>(), in.ConsumeIntegral<int64_t>(), &d),
			  "rl_sw_refund accepted a corrupt buffer (how %d)", how);
		CHECK(std::memcmp(&bad, &kept, sizeof bad) == 0, "rl_sw_refund wrote a corrupt state it refused");
		g_stats[kCorruptRefunds]++;
	}

	static RlSwDecision out;
	for (g_call = 0; g_call < 8 && in.remaining_bytes() > 0; g_call++)
	{
		const int64_t now = in.ConsumeIntegral<int64_t>();
		if (in.ConsumeIntegralInRange<int>(0, 3) == 0)
		{
			// A refund of any cost on whatever decodes (admitted and stamp as
			// hand-edited): no overflow, and what it stores still fits and
			// reads back.
			const int64_t cost = in.ConsumeIntegral<int64_t>();
			static RlSlidingWindowState before;
			before = state;
			RlDecision d{};
			// A take on hand-edited times (entries newer than the stamp) can
			// store entries out of order, which the next decode calls corrupt:
			// a refund must accept exactly what decodes.
			static uint8_t encoded[RL_SW_MAX_HEADER_BYTES];
			static RlSlidingWindowState reread;
			const bool decodes = rl_sw_decode_header(encoded, rl_sw_encode_header(&state, encoded), state.admitted,
													 state.stamp_us, &reread);
			if (!decodes)
			{
				(void) rl_sw_refund(&limit, &state, now, cost, &d);
				break;			// no promise left to check: it ran without a fault
			}
			// What a store keeps is the encoded header: refund that.
			state = reread;
			before = state;
			CHECK(rl_sw_refund(&limit, &state, now, cost, &d), "rl_sw_refund refused a state that decodes");
			g_stats[kHeaderRefunds]++;
			CheckRefund(limit, now, d);
			CHECK(d.state_changed == !SameSwState(state, before), "refund state_changed %d", (int) d.state_changed);
			if (!d.state_changed)
			{
				CHECK(std::memcmp(&state, &before, sizeof state) == 0, "a refund that gave nothing wrote the state");
				continue;
			}
			CHECK(state.admitted >= 0 && state.admitted <= RL_MAX_LIMIT && state.first_chunk == before.first_chunk &&
				  state.next_chunk == before.next_chunk, "refund stored admitted %" PRId64 ", chunks [%u, %u)",
				  state.admitted, state.first_chunk, state.next_chunk);
			const int32_t size = rl_sw_encode_header(&state, bytes);
			CHECK(size > 0 && size <= RL_SW_MAX_HEADER_BYTES, "header of %d bytes after a refund", size);
			static RlSlidingWindowState reloaded;
			CHECK(rl_sw_decode_header(bytes, size, state.admitted, state.stamp_us, &reloaded) &&
				  SameSwState(reloaded, state), "header round trip after a refund");
			continue;
		}
		const int64_t cost = in.ConsumeIntegralInRange<int64_t>(0, limit.rate);
		const int32_t given = in.ConsumeIntegralInRange<int32_t>(0, static_cast<int32_t>(chunks.size()));
		if (!rl_sw_take(&limit, &state, now, cost, chunks.data(), given, &out))
			return;				// corrupt: the glue raises XX001
		if (out.need_chunks > 0)
		{
			CHECK(out.need_chunks > given, "need_chunks %d with %d given", out.need_chunks, given);
			continue;
		}
		CHECK(out.decision.remaining >= 0 && out.decision.remaining <= limit.rate, "remaining %" PRId64,
			  out.decision.remaining);
		CHECK(out.decision.capacity == limit.rate, "capacity");
		if (out.sealed)
			CHECK(out.sealed_len > 0 && out.sealed_len <= RL_SW_BUFFER_BYTES, "sealed_len %d", out.sealed_len);
		const int32_t size = rl_sw_encode_header(&state, bytes);
		CHECK(size > 0 && size <= RL_SW_MAX_HEADER_BYTES, "header of %d bytes after a call", size);
	}
}

// ---------------------------------------------------------------------------
// Fixed-state algorithms from an arbitrary stored state (a hand-edited row).
// ---------------------------------------------------------------------------

void RunEdited(FuzzedDataProvider &in)
{
	const RlAlgorithm algorithm = PickAlgorithm(in, false);
	RlZoneLimit limit;
	if (!PickLimit(in, algorithm, &limit))
		return;
	if (algorithm == RL_ALGORITHM_CRON_TOKEN_BUCKET && in.ConsumeBool())
		limit.refill_tick_us = in.ConsumeIntegralInRange<int64_t>(1, RL_MAX_PERIOD_US);
	RlCounterState state{};
	state.a = in.ConsumeIntegral<int64_t>();
	const uint64_t bits = in.ConsumeIntegral<uint64_t>();
	std::memcpy(&state.fraction, &bits, sizeof state.fraction);
	state.stamp_us = in.ConsumeIntegral<int64_t>();
	state.b = in.ConsumeIntegral<int64_t>();
	for (g_call = 0; g_call < 8 && in.remaining_bytes() > 0; g_call++)
	{
		const int64_t now = in.ConsumeBool() ? in.ConsumeIntegral<int64_t>()
			: in.ConsumeIntegralInRange<int64_t>(kPgMinTime, MaxTime());
		const int64_t least_wait =
			algorithm == RL_ALGORITHM_CRON_TOKEN_BUCKET && limit.refill_tick_us <= 0 ? -1 : 0;
		if (in.ConsumeIntegralInRange<int>(0, 3) == 0)
		{
			// A refund of any cost from the edited state: no overflow, never
			// refused, bounded; next is the state exactly when it changed.
			const int64_t cost = in.ConsumeIntegral<int64_t>();
			RlCounterState next{1, 1.0, 1, 1};	// must be overwritten
			const RlDecision d = rl_counter_refund(&limit, &state, now, cost, &next);
			g_stats[kEditedRefunds]++;
			CHECK(d.allowed && d.retry_after_us == 0 && d.capacity == limit.capacity && d.decided_at_us >= now,
				  "edited refund: " DFMT, DARGS(d));
			CHECK(d.remaining >= 0 && d.remaining <= limit.capacity && d.reset_after_us >= least_wait,
				  "edited refund out of range: " DFMT, DARGS(d));
			CHECK(d.state_changed == !SameState(next, state), "edited refund state_changed %d", (int) d.state_changed);
			CHECK(cost > 0 || !d.state_changed, "a refund of %" PRId64 " changed the state", cost);
			state = next;
			continue;
		}
		const int64_t cost = in.ConsumeIntegralInRange<int64_t>(0, limit.capacity);
		RlCounterState next{};
		const RlDecision d = rl_counter_take(&limit, &state, now, cost, &next);
		g_stats[kEditedCalls]++;
		CHECK(d.capacity == limit.capacity, "capacity");
		CHECK(d.remaining >= 0 && d.remaining <= limit.capacity, "remaining out of range: " DFMT, DARGS(d));
		CHECK(d.retry_after_us >= least_wait && d.reset_after_us >= least_wait, "negative wait: " DFMT, DARGS(d));
		CHECK(d.state_changed == (d.allowed && cost > 0), "state_changed: " DFMT, DARGS(d));
		(void) rl_counter_idle(&limit, &state, now);
		(void) rl_counter_needs_refill(&limit, &state);
		if (d.state_changed)
			state = next;
	}
}

// Leases: stored bytes as a hand edit or a corruption may leave them must
// decode (and encode back to the same bytes) or be refused, never read
// beyond them; then random acquires, releases and looks, the clock moving
// both ways, never leave more live leases than the capacity after an
// admission, and a look agrees with what an acquire decides.
void RunLeases(FuzzedDataProvider &in)
{
	RlZoneLimit limit{};
	const int64_t slots = in.ConsumeIntegralInRange<int64_t>(1, 80);
	const int64_t period = Pick(in, {1, 1000000, 60000000, RL_MAX_PERIOD_US}, 1, RL_MAX_PERIOD_US);
	if (rl_zone_limit(RL_ALGORITHM_CONCURRENCY, slots, period, -1, &limit) != RL_ZONE_OK)
		return;
	std::snprintf(g_context, sizeof g_context, "concurrency %" PRId64 " slots, period %" PRId64, slots, period);
	const std::vector<uint8_t> raw = in.ConsumeBytes<uint8_t>(in.ConsumeIntegralInRange<size_t>(0, 100 * RL_LEASE_BYTES));
	const int32_t room = in.ConsumeIntegralInRange<int32_t>(0, 100);
	std::vector<RlLease> leases(static_cast<size_t>(room) + 1 + 200);
	int32_t count = -1;
	const bool decoded = rl_leases_decode(raw.empty() ? nullptr : raw.data(), static_cast<int32_t>(raw.size()),
										  leases.data(), room, &count);
	CHECK(decoded == (raw.size() % RL_LEASE_BYTES == 0 && raw.size() / RL_LEASE_BYTES <= static_cast<size_t>(room)),
		  "%zu bytes into room for %d leases: decoded %d", raw.size(), room, decoded);
	if (!decoded)
		return;
	std::vector<uint8_t> again(static_cast<size_t>(count) * RL_LEASE_BYTES + 1);
	CHECK(rl_leases_encode(leases.data(), count, again.data()) == static_cast<int32_t>(raw.size()) &&
		  (raw.empty() || std::memcmp(again.data(), raw.data(), raw.size()) == 0),
		  "%d leases did not encode back", count);

	int64_t stamp = in.ConsumeBool() ? PickStart(in) : INT64_MIN;
	int64_t now = PickStart(in);
	for (int step = 0; step < 200 && in.remaining_bytes() > 0; step++)
	{
		now = Clamp(static_cast<Wide>(now) + PickDelta(in, limit), kPgMinTime, MaxTime());
		const int64_t at = std::max(now, stamp);
		const int32_t before = count;
		const RlDecision look = rl_leases_peek(&limit, leases.data(), count, stamp, now);
		CHECK(look.decided_at_us == at && !look.state_changed, "a look changed the key or its time");
		RlDecision d{};
		switch (in.ConsumeIntegralInRange<int>(0, 2))
		{
			case 0:
			{
				RlLease wanted{in.ConsumeIntegral<uint64_t>(),
							   Clamp(static_cast<Wide>(at) + in.ConsumeIntegralInRange<int64_t>(1, RL_MAX_PERIOD_US),
									 INT64_MIN, INT64_MAX),
							   in.ConsumeIntegral<int32_t>(), in.ConsumeIntegral<int32_t>()};
				d = rl_leases_acquire(&limit, leases.data(), &count, stamp, now, &wanted);
				CHECK(d.allowed == look.allowed && d.remaining == (d.allowed ? look.remaining - 1 : look.remaining),
					  "acquire %d (%" PRId64 " left) after a look saying %d (%" PRId64 " left)", d.allowed,
					  d.remaining, look.allowed, look.remaining);
				if (d.allowed)
					CHECK(count <= limit.capacity && count >= 1 && leases[count - 1].nonce == wanted.nonce,
						  "admitted with %d leases held of %" PRId64, count, limit.capacity);
				else
					CHECK(count <= before && d.retry_after_us > 0, "refused: %d leases, retry %" PRId64, count,
						  d.retry_after_us);
				break;
			}
			case 1:
			{
				bool released = false;
				const uint64_t nonce = count > 0 && in.ConsumeBool()
					? leases[in.ConsumeIntegralInRange<int32_t>(0, count - 1)].nonce : in.ConsumeIntegral<uint64_t>();
				d = rl_leases_release(&limit, leases.data(), &count, stamp, now, nonce, &released);
				CHECK(count <= before && (!released || count < before), "release of a held lease kept %d of %d",
					  count, before);
				break;
			}
			default:
				d = look;
				break;
		}
		CHECK(d.decided_at_us == at && d.remaining >= 0 && d.remaining <= limit.capacity,
			  "decided at %" PRId64 " (expected %" PRId64 "), %" PRId64 " left", d.decided_at_us, at, d.remaining);
		for (int32_t i = 0; i < count; i++)
			CHECK(leases[i].expires_us > at || d.state_changed == false,
				  "a lapsed lease was kept by a call that changed the key");
		if (d.state_changed)
			stamp = d.decided_at_us;
	}
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***)
{
	if (std::getenv("RL_FUZZ_STATS") != nullptr)
		std::atexit(PrintStats);
	return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	FuzzedDataProvider in(data, size);
	g_call = -1;
	std::snprintf(g_context, sizeof g_context, "(no limit yet)");
	switch (in.ConsumeIntegralInRange<int>(0, 10))
	{
		case 10:
			RunLeases(in);
			break;
		case 0:
		case 1:
		case 2:
			RunZone(in);
			break;
		case 3:
		case 4:
		case 5:
			RunWindow(in);
			break;
		case 6:
		case 7:
			RunBucket(in);
			break;
		case 8:
			RunHeader(in);
			break;
		default:
			RunEdited(in);
			break;
	}
	return 0;
}
