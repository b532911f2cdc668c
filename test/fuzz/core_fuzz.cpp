// libFuzzer target for the C++ core (src/core/): every algorithm, driven
// with extreme parameters and clocks, against the invariants the README and
// rl_core.h promise.  Any violation prints the case and aborts; ASan and
// UBSan (-fno-sanitize-recover=all) turn undefined behaviour into a crash.
//
// The input (read through FuzzedDataProvider) first picks a mode:
//   zone      a zone algorithm (token_bucket, gcra, sliding_window_counter,
//             fixed_window, cron token bucket) with a sequence of calls
//             (time deltas, possibly negative or huge, and costs), cron
//             refills emulating rl_cron_refill(); checked against the
//             documented bounds and a model
//   window    the exact sliding window with the chunk-store protocol (sealed
//             chunks kept in a map, need_chunks served), checked exactly
//             against a brute-force log of admissions
//   bucket    rl_token_bucket's ad-hoc bucket (float rate and window, which
//             may change between calls)
//   header    rl_sw_decode_header on raw bytes, then calls on what decodes,
//             with raw chunk bytes
//   edited    fixed-state algorithms from an arbitrary (hand-edited) stored
//             state
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
	kEditedCalls, kStatCount
};
long g_stats[kStatCount];
const char *const kStatNames[kStatCount] = {
	"zone calls", "zone refusals", "idle checks", "retry checks", "cron refills",
	"window calls", "window refusals", "chunk loads", "chunks sealed", "chunks consumed",
	"bucket calls", "headers decoded", "edited-state calls"};

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
	std::vector<std::pair<int64_t, int64_t>> log;	// (decided_at, cost) of admissions

	for (g_call = 0; g_call < kMaxCalls && in.remaining_bytes() > 0; g_call++)
	{
		const int op = in.ConsumeIntegralInRange<int>(0, 7);
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
		const RlDecision d = rl_counter_take(&limit, stored ? &state : nullptr, now, cost, &next);
		if (Trace())
			std::fprintf(stderr, "call %d: now %" PRId64 " cost %" PRId64 " -> " DFMT "\n", g_call, now, cost, DARGS(d));
		CHECK(std::memcmp(&before, &state, sizeof state) == 0, "prior written through");
		CheckGeneric(limit, now, cost, d);
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
				CHECK(static_cast<long double>(admitted) <= bound + slack,
					  "token bucket admitted %.0Lf > %.6Lf", static_cast<long double>(admitted), bound);
				if (stored)
					CHECK(state.a >= 0 && state.a <= limit.capacity && state.fraction >= 0.0 &&
						  state.fraction < 1.0, "stored level %" PRId64 " + %g", state.a, state.fraction);
				break;
			}
			case RL_ALGORITHM_GCRA:
				// Exact: the theoretical arrival time advances period / rate
				// per unit of cost and may lead now by capacity units.
				CHECK(admitted * period <= capacity * period + rate * elapsed,
					  "gcra admitted %" PRId64 " over %" PRId64 " us", (int64_t) admitted, (int64_t) elapsed);
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
				CHECK(admitted <= capacity + refilled, "cron admitted %" PRId64 " > capacity + %" PRId64,
					  (int64_t) admitted, (int64_t) refilled);
				break;
			case RL_ALGORITHM_SLIDING_WINDOW:
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
		// reset_after: the key is back to its full allowance then: idle (a
		// store may forget it), or for the token bucket, whose waits allow
		// the 1e-9 token the take rounds up (a microsecond or more when a
		// token takes over 1000 s), able to pass a call of its capacity.
		if (stored && static_cast<Wide>(d.decided_at_us) + d.reset_after_us <= MaxTime())
		{
			const int64_t at = d.decided_at_us + d.reset_after_us;
			if (algorithm == RL_ALGORITHM_TOKEN_BUCKET)
			{
				const int64_t late = Shortfall(limit, &state, at, limit.capacity);
				CHECK(late <= TbWaitSlack(limit), "a call of the capacity at reset_after is refused; it passes %"
					  PRId64 " us later; after " DFMT, late, DARGS(d));
			}
			else
				CHECK(rl_counter_idle(&limit, &state, at), "not idle at reset %" PRId64 " after " DFMT,
					  at, DARGS(d));
		}
	}
}

// ---------------------------------------------------------------------------
// The exact sliding window and its chunk store.
// ---------------------------------------------------------------------------

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
	int64_t latest_admission = INT64_MIN;

	for (g_call = 0; g_call < kMaxCalls && in.remaining_bytes() > 0; g_call++)
	{
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

		// The key's clock is its latest admission: a call at an earlier time
		// is decided then (refusals and cost 0 store nothing, so a later call
		// that was not admitted does not move it).
		const int64_t at = std::max(now, latest_admission);
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

		const RlDecision d = store.Call(now, cost, true);
		g_stats[kWindowCalls]++;
		g_stats[kWindowRefused] += !d.allowed;
		if (Trace())
			std::fprintf(stderr, "call %d: now %" PRId64 " cost %" PRId64 " -> " DFMT "\n", g_call, now, cost, DARGS(d));
		CHECK(d.decided_at_us == at, "decided at %" PRId64 ", expected %" PRId64, d.decided_at_us, at);
		CHECK(d.allowed == model_allowed, "allowed %d, but %" PRId64 " admitted in the window + cost %" PRId64
			  " vs rate %" PRId64, (int) d.allowed, (int64_t) in_window, cost, limit.rate);
		if (d.allowed && cost > 0)
		{
			window.emplace_back(at, cost);
			in_window += cost;
			latest_admission = at;
			// No later call is decided before the latest admission.
			while (static_cast<Wide>(window.front().first) <= static_cast<Wide>(latest_admission) - period)
				window.pop_front();
		}
		CHECK(d.remaining == limit.rate - in_window, "remaining %" PRId64 ", model %" PRId64,
			  d.remaining, (int64_t) (limit.rate - in_window));
		if (!d.allowed)
			CHECK(d.retry_after_us == model_retry, "retry_after %" PRId64 ", model %" PRId64,
				  d.retry_after_us, (int64_t) model_retry);
		const Wide model_reset = in_window > 0 ? static_cast<Wide>(window.back().first) + period - at : 0;
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

	static RlSwDecision out;
	for (g_call = 0; g_call < 8 && in.remaining_bytes() > 0; g_call++)
	{
		const int64_t now = in.ConsumeIntegral<int64_t>();
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
		const int64_t cost = in.ConsumeIntegralInRange<int64_t>(0, limit.capacity);
		RlCounterState next{};
		const RlDecision d = rl_counter_take(&limit, &state, now, cost, &next);
		g_stats[kEditedCalls]++;
		CHECK(d.capacity == limit.capacity, "capacity");
		CHECK(d.remaining >= 0 && d.remaining <= limit.capacity, "remaining out of range: " DFMT, DARGS(d));
		const int64_t least_wait =
			algorithm == RL_ALGORITHM_CRON_TOKEN_BUCKET && limit.refill_tick_us <= 0 ? -1 : 0;
		CHECK(d.retry_after_us >= least_wait && d.reset_after_us >= least_wait, "negative wait: " DFMT, DARGS(d));
		CHECK(d.state_changed == (d.allowed && cost > 0), "state_changed: " DFMT, DARGS(d));
		(void) rl_counter_idle(&limit, &state, now);
		(void) rl_counter_needs_refill(&limit, &state);
		if (d.state_changed)
			state = next;
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
	switch (in.ConsumeIntegralInRange<int>(0, 9))
	{
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
