// Randomised comparison of the token bucket against an exact reference model.
//
// The model keeps tokens as exact rationals.  A rate p/q tokens per second and
// a window a/b seconds are both exact decimal-ish fractions; all token amounts
// are integers in units of 1/D with D = q * b * 10^6, so that
//   capacity           = p * a * 10^6      units
//   refill per 1 us    = p * b             units
//   a cost c           = c * D             units
//   a tolerance 1e-6   = q * b             units
// all held in __int128 without any rounding.  The implementation receives
// the doubles nearest to p/q and a/b.
//
// Tolerance: doubles cannot represent most decimal fractions, so the
// implementation may disagree with the exact model when the exact token count
// lies within 1e-6 token of the boundary being decided (cost for
// allowed/refused, a whole number for "remaining").  Such borderline
// disagreements are accepted, counted, and required to be rare; anything else
// is a failure.  One exception: when the exact count is exactly on the
// boundary (exactly cost tokens, exactly a whole number left) the call must
// be admitted / the whole number reported, which is what RL_TOKEN_EPSILON
// guarantees.  Capacities are kept <= 10^6 tokens so that double rounding
// (about 1e-10 token per operation at that size) stays far below 1e-6 over
// a sequence.  See token_bucket_precision_test.cpp for larger capacities.
//
// The model mirrors the storage protocol of the glue: the state is written
// back only when the decision says state_changed, which the model requires to
// be exactly "new key, or admitted with cost > 0".  A refused call or a cost-0
// call leaves the stored state alone; as clamping to the capacity is monotone
// this loses no refill.  With a clock going backwards, the model evaluates at
// max(stored stamp, now) like the header says ("counts as no time passing").
//
// Invariant checked independently of the model, over every
// contiguous sub-run of calls i..j of a sequence:
//   admitted cost in i..j <= capacity + rate * (max t - min t over i..j) + 1e-6
// (with a monotone clock max t - min t is simply t_j - t_i; with a clock going
// backwards this is the bound that still holds, since a refused or cost-0 call
// stores nothing).  The lower bound ("never more than one token below") is
// checked in ContinuousDemandAdmitsWithinOneToken.
#include "core/rl_core.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

using i128 = __int128;

constexpr int64_t kMicros = 1000000;

struct Fraction
{
	int64_t num;
	int64_t den;
};

// "Nice" decimal rates (tokens per second) and windows (seconds).
const Fraction kNiceRates[] = {
	{1, 10}, {3, 10}, {1, 2}, {1, 1}, {2, 1}, {5, 2}, {7, 10}, {3, 1}, {10, 1}, {100, 1},
	{1000, 1}, {1, 3}, {2, 3}, {1000, 60}, {1, 60}, {29, 100}, {12345, 100}, {1, 1000},
};
const Fraction kNiceWindows[] = {
	{1, 1}, {3, 1}, {10, 1}, {60, 1}, {1, 10}, {5, 2}, {3600, 1}, {100, 1}, {1, 1000},
	{86400, 1}, {7, 10}, {3, 10},
};
const int64_t kRandomRateDens[] = {1, 10, 100, 1000, 7, 60, 3600};
const int64_t kRandomWindowDens[] = {1, 10, 100, 1000};

long double ToLd(i128 v)
{
	// Exact for |v| < 2^64, which holds for every value converted here.
	return v < 0 ? -static_cast<long double>(static_cast<unsigned __int128>(-v))
				 : static_cast<long double>(static_cast<unsigned __int128>(v));
}

i128 FloorDiv(i128 a, i128 b)	 // b > 0
{
	i128 q = a / b;
	if (a % b != 0 && a < 0)
		q -= 1;
	return q;
}

i128 Abs(i128 v)
{
	return v < 0 ? -v : v;
}

int64_t Uniform(std::mt19937_64 &rng, int64_t lo, int64_t hi)	 // inclusive
{
	return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

bool Chance(std::mt19937_64 &rng, double p)
{
	return std::uniform_real_distribution<double>(0.0, 1.0)(rng) < p;
}

struct Params
{
	Fraction rate;	   // tokens per second
	Fraction window;   // seconds
	double rate_d;
	double window_d;
	// exact model constants, in units of 1/D tokens
	i128 D;
	i128 cap;
	i128 per_us;
	i128 tol;		   // 1e-6 token
	int64_t cap_floor;

	std::string Describe() const
	{
		std::ostringstream os;
		os.precision(17);
		os << "rate " << rate.num << "/" << rate.den << " (" << rate_d << "), window "
		   << window.num << "/" << window.den << " (" << window_d << "), capacity "
		   << ToLd(cap) / ToLd(D);
		return os.str();
	}
};

Params MakeParams(Fraction rate, Fraction window)
{
	Params p;
	p.rate = rate;
	p.window = window;
	p.rate_d = static_cast<double>(rate.num) / static_cast<double>(rate.den);
	p.window_d = static_cast<double>(window.num) / static_cast<double>(window.den);
	p.D = static_cast<i128>(rate.den) * window.den * kMicros;
	p.cap = static_cast<i128>(rate.num) * window.num * kMicros;
	p.per_us = static_cast<i128>(rate.num) * window.den;
	p.tol = static_cast<i128>(rate.den) * window.den;
	p.cap_floor = static_cast<int64_t>(p.cap / p.D);
	return p;
}

// Random parameters with min_cap <= capacity <= max_cap (in tokens).
Params RandomParams(std::mt19937_64 &rng, long double min_cap, int64_t max_cap)
{
	for (;;)
	{
		Fraction rate;
		Fraction window;
		if (Chance(rng, 0.5))
			rate = kNiceRates[Uniform(rng, 0, std::size(kNiceRates) - 1)];
		else
			rate = {Uniform(rng, 1, 100000),
					kRandomRateDens[Uniform(rng, 0, std::size(kRandomRateDens) - 1)]};
		if (Chance(rng, 0.5))
			window = kNiceWindows[Uniform(rng, 0, std::size(kNiceWindows) - 1)];
		else
			window = {Uniform(rng, 1, 100000),
					  kRandomWindowDens[Uniform(rng, 0, std::size(kRandomWindowDens) - 1)]};
		const Params p = MakeParams(rate, window);
		if (p.cap > p.D * max_cap)
			continue;
		if (ToLd(p.cap) < ToLd(p.D) * min_cap)
			continue;
		return p;
	}
}

// The exact bucket of one key, following the same storage protocol.
struct ExactKey
{
	bool has = false;
	i128 tokens = 0;
	int64_t stamp = 0;
};

struct CallResult
{
	bool ok = true;			 // no failure
	bool rejected = false;	 // rl_token_bucket_limit refused the cost
	bool allowed = false;
	bool borderline = false; // an accepted disagreement within the tolerance
	bool fractional = false; // the computed state held a non-zero fraction
};

// Runs one call against both the implementation and the model; reports any
// discrepancy with ADD_FAILURE and returns ok = false.
class Harness
{
public:
	explicit Harness(const Params &p) : p_(p) {}

	CallResult Call(int64_t now, int64_t cost, const std::string &where)
	{
		CallResult r;
		RlTokenBucketLimit limit{};
		const RlParamError err = rl_token_bucket_limit(p_.rate_d, p_.window_d, cost, &limit);
		const i128 cost_units = static_cast<i128>(cost) * p_.D;
		if (err != RL_PARAM_OK)
		{
			r.rejected = true;
			// Only "cost above capacity" can happen here.
			if (err != RL_PARAM_COST_ABOVE_CAPACITY || cost_units <= p_.cap - p_.tol)
				return Fail(r, where, "rl_token_bucket_limit returned " + std::to_string(err) +
									  " for cost " + std::to_string(cost));
			if (cost_units <= p_.cap)
				r.borderline = true;
			return r;
		}
		if (cost_units > p_.cap + p_.tol)
			return Fail(r, where, "cost " + std::to_string(cost) + " above capacity accepted");
		if (cost_units > p_.cap)
			r.borderline = true;

		// Model: the bucket at this instant.
		i128 cur;
		int64_t cur_stamp;
		if (!model_.has)
		{
			cur = p_.cap;
			cur_stamp = now;
		}
		else
		{
			const i128 elapsed =
				now > model_.stamp ? static_cast<i128>(now) - model_.stamp : i128{0};
			cur = std::min(p_.cap, model_.tokens + p_.per_us * elapsed);
			cur_stamp = std::max(model_.stamp, now);
		}
		const bool exact_allowed = cur >= cost_units;

		const RlTokenBucketDecision d =
			rl_token_bucket_take(stored_ ? &*stored_ : nullptr, now, &limit, cost);

		if (d.allowed != exact_allowed)
		{
			// Exactly enough tokens must always be enough: that is what
			// RL_TOKEN_EPSILON is for (0.3/s over 10/3 s is one token).
			if (Abs(cur - cost_units) > p_.tol || cur == cost_units)
				return Fail(r, where,
							std::string("decision ") + (d.allowed ? "allowed" : "refused") +
								", exact tokens " + Str(cur) + " for cost " +
								std::to_string(cost));
			r.borderline = true;
		}
		r.allowed = d.allowed;

		// Follow the implementation's decision from here on.
		if (d.allowed)
			cur -= cost_units;

		if (d.allowed)
		{
			const i128 fl = FloorDiv(cur, p_.D);
			const i128 rem = d.remaining;
			// An exact whole number of tokens must be reported as such.
			if (rem == fl)
			{
			}
			else if (rem == fl + 1 && (fl + 1) * p_.D - cur <= p_.tol)
				r.borderline = true;
			else if (rem == fl - 1 && cur != fl * p_.D && cur - fl * p_.D <= p_.tol)
				r.borderline = true;
			else if (rem == 0 && cur < 0 && -cur <= p_.tol)
				r.borderline = true;
			else
				return Fail(r, where,
							"remaining " + std::to_string(d.remaining) + ", exact tokens " +
								Str(cur));
			if (d.remaining < 0)
				return Fail(r, where, "allowed with negative remaining");
		}
		else if (d.remaining != -1)
			return Fail(r, where, "refused with remaining " + std::to_string(d.remaining));

		const bool expect_changed = !model_.has || (d.allowed && cost > 0);
		if (d.state_changed != expect_changed)
			return Fail(r, where, std::string("state_changed ") +
									  (d.state_changed ? "true" : "false"));

		// The computed state matches the model whatever the decision.
		if (d.next.stamp_us != cur_stamp)
			return Fail(r, where, "next.stamp_us " + std::to_string(d.next.stamp_us) +
									  ", expected " + std::to_string(cur_stamp));
		// The fraction is in [0, 1) after every call, whatever the decision.
		if (!(d.next.fraction >= 0.0 && d.next.fraction < 1.0))
			return Fail(r, where, "next.fraction out of [0, 1): " + Str(d.next.fraction));
		r.fractional = d.next.fraction != 0.0;
		// tokens + fraction in [0, capacity].  The sum of an int64 below 2^53
		// and a double is rounded monotonically in a long double (64-bit
		// mantissa), so it cannot step over the capacity by rounding.
		const long double next_tokens =
			static_cast<long double>(d.next.tokens) + static_cast<long double>(d.next.fraction);
		if (d.next.tokens < 0 || next_tokens > static_cast<long double>(limit.capacity))
			return Fail(r, where, "next tokens out of range: " + std::to_string(d.next.tokens) +
									  " + " + Str(d.next.fraction));
		// The difference from the exact model, computed without adding a
		// large whole part to the fraction: whole parts in units of 1/D.
		const long double diff =
			ToLd(static_cast<i128>(d.next.tokens) * p_.D - cur) / ToLd(p_.D) +
			static_cast<long double>(d.next.fraction);
		if (std::fabs(diff) > 1e-6L)
			return Fail(r, where, "next tokens " + std::to_string(d.next.tokens) + " + " +
									  Str(d.next.fraction) + ", exact " + Str(cur));

		if (d.state_changed)
		{
			stored_ = d.next;
			model_.has = true;
			model_.tokens = cur;
			model_.stamp = cur_stamp;
		}
		return r;
	}

	const Params &params() const { return p_; }

	static std::string Str(double value)
	{
		std::ostringstream os;
		os.precision(17);
		os << value;
		return os.str();
	}

	std::string Str(i128 units) const
	{
		std::ostringstream os;
		os.precision(20);
		os << ToLd(units) / ToLd(p_.D);
		return os.str();
	}

private:
	CallResult Fail(CallResult r, const std::string &where, const std::string &what)
	{
		ADD_FAILURE() << where << ": " << what << "\n  " << p_.Describe();
		r.ok = false;
		return r;
	}

	Params p_;
	ExactKey model_;
	std::optional<RlTokenBucketState> stored_;
};

// Checks admitted(i..j) <= capacity + rate * (max t - min t) + 1e-6 over every
// contiguous sub-run; returns false (after ADD_FAILURE) on the first breach.
bool CheckSubRuns(const Params &p, const std::vector<int64_t> &times,
				  const std::vector<int64_t> &admitted, const std::string &where)
{
	const size_t n = times.size();
	for (size_t i = 0; i < n; i++)
	{
		i128 sum = 0;
		int64_t lo = times[i];
		int64_t hi = times[i];
		for (size_t j = i; j < n; j++)
		{
			lo = std::min(lo, times[j]);
			hi = std::max(hi, times[j]);
			sum += admitted[j];
			const i128 bound = p.cap + p.per_us * (static_cast<i128>(hi) - lo) + p.tol;
			if (sum * p.D > bound)
			{
				ADD_FAILURE() << where << ": calls " << i << ".." << j << " admitted "
							  << static_cast<int64_t>(sum) << " tokens, bound "
							  << ToLd(bound) / ToLd(p.D) << "\n  " << p.Describe();
				return false;
			}
		}
	}
	return true;
}

int64_t RandomCost(std::mt19937_64 &rng, const Params &p)
{
	const int64_t top = p.cap_floor;
	const double x = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
	if (x < 0.15 || top == 0)
		return Chance(rng, 0.9) ? 0 : Uniform(rng, 1, 2);
	if (x < 0.60)
		return 1;
	if (x < 0.82)
		return Uniform(rng, 0, std::min<int64_t>(top, 5));
	if (x < 0.95)
		return Uniform(rng, 0, top);
	if (x < 0.97)
		return top;
	return top + Uniform(rng, 1, 3);	// above capacity: the limit rejects it
}

int64_t RandomStep(std::mt19937_64 &rng, const Params &p)
{
	// Microseconds for one token to refill.
	const double token_us = std::clamp(1e6 * p.rate.den / static_cast<double>(p.rate.num), 1.0, 1e12);
	const double window_us = std::clamp(1e6 * p.window.num / static_cast<double>(p.window.den), 1.0, 1e13);
	const double x = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
	if (x < 0.20)
		return 0;
	if (x < 0.65)
		return Uniform(rng, 1, static_cast<int64_t>(2 * token_us) + 1);
	if (x < 0.82)
		return Uniform(rng, 0, static_cast<int64_t>(10 * token_us) + 1);
	if (x < 0.88)
		return Uniform(rng, 0, static_cast<int64_t>(3 * window_us) + 1);
	if (x < 0.90)
		return Uniform(rng, 1000000000000LL, 100000000000000LL);	// 11 days .. 3 years
	if (x < 0.93)
		return Uniform(rng, 0, 3);	// a few microseconds
	return -Uniform(rng, 0, static_cast<int64_t>(3 * token_us) + 1);	// clock backwards
}

TEST(TokenBucketModel, RandomSequencesMatchExactModel)
{
	std::mt19937_64 rng(0x5eed0f7a11b0c4e7ULL);
	constexpr int kSequences = 4000;
	int64_t calls = 0;
	int64_t borderline = 0;
	int64_t admitted_calls = 0;
	int64_t refused_calls = 0;
	int64_t rejected_calls = 0;
	int64_t backwards = 0;
	int64_t fractional = 0;
	int failed_sequences = 0;

	for (int seq = 0; seq < kSequences && failed_sequences < 5; seq++)
	{
		const Params p = RandomParams(rng, Chance(rng, 0.05) ? 0.01L : 1.0L, 1000000);
		Harness h(p);
		int64_t now = Uniform(rng, -4000000000000000LL, 4000000000000000LL);
		const int n = static_cast<int>(Uniform(rng, 1, 150));
		std::vector<int64_t> times;
		std::vector<int64_t> admitted;
		bool ok = true;
		for (int k = 0; k < n && ok; k++)
		{
			if (k > 0)
			{
				const int64_t step = RandomStep(rng, p);
				backwards += step < 0;
				now += step;
			}
			const int64_t cost = RandomCost(rng, p);
			const std::string where =
				"sequence " + std::to_string(seq) + " call " + std::to_string(k) + " at " +
				std::to_string(now) + " cost " + std::to_string(cost);
			const CallResult r = h.Call(now, cost, where);
			ok = r.ok;
			calls++;
			borderline += r.borderline;
			fractional += r.fractional;
			if (r.rejected)
			{
				rejected_calls++;
				continue;
			}
			admitted_calls += r.allowed;
			refused_calls += !r.allowed;
			times.push_back(now);
			admitted.push_back(r.allowed ? cost : 0);
		}
		if (ok)
			ok = CheckSubRuns(p, times, admitted, "sequence " + std::to_string(seq));
		failed_sequences += !ok;
	}

	// The sequences exercised every branch.
	EXPECT_GT(calls, 200000);
	EXPECT_GT(admitted_calls, calls / 5);
	EXPECT_GT(refused_calls, calls / 20);
	EXPECT_GT(rejected_calls, 100);
	EXPECT_GT(backwards, 1000);
	// The fraction check above is not vacuous.
	EXPECT_GT(fractional, calls / 10);
	// Borderline disagreements are the exception: at most 1 call in 1000.
	EXPECT_LE(borderline * 1000, calls) << borderline << " borderline calls of " << calls;
	std::printf("[ model    ] %lld calls: %lld admitted, %lld refused, %lld cost rejected, "
				"%lld clock steps backwards, %lld borderline, %lld with a fraction\n",
				static_cast<long long>(calls), static_cast<long long>(admitted_calls),
				static_cast<long long>(refused_calls), static_cast<long long>(rejected_calls),
				static_cast<long long>(backwards), static_cast<long long>(borderline),
				static_cast<long long>(fractional));
}

// Dyadic rates and steps (multiples of 1/8 s): refills are exact binary
// fractions, so the stored fraction plus the refill often lands on exactly
// 1.0, which must carry into the whole tokens and never be stored as a
// fraction of 1 (random microsecond steps almost never hit it).
TEST(TokenBucketModel, DyadicStepsCarryFractionIntoWholeTokens)
{
	const Fraction rates[] = {{1, 1}, {1, 2}, {3, 2}, {5, 4}, {1, 4}, {3, 8}, {2, 1}, {7, 8}};
	const Fraction windows[] = {{10, 1}, {4, 1}, {5, 2}, {1, 1}, {3, 1}};
	std::mt19937_64 rng(0xd1ad1c0ffeeULL);
	int64_t calls = 0;
	int64_t fractional = 0;
	int64_t borderline = 0;
	int failed = 0;
	for (int seq = 0; seq < 400 && failed < 5; seq++)
	{
		const Params p = MakeParams(rates[Uniform(rng, 0, std::size(rates) - 1)],
									windows[Uniform(rng, 0, std::size(windows) - 1)]);
		Harness h(p);
		int64_t now = Uniform(rng, -4000000000000000LL, 4000000000000000LL);
		bool ok = true;
		for (int k = 0; k < 200 && ok; k++)
		{
			if (k > 0)
				now += (Chance(rng, 0.1) ? -1 : 1) * Uniform(rng, 0, 16) * (kMicros / 8);
			const int64_t cost = Chance(rng, 0.2) ? 0 : Uniform(rng, 1, std::max<int64_t>(1, p.cap_floor / 2));
			const CallResult r = h.Call(now, cost,
										"sequence " + std::to_string(seq) + " call " +
											std::to_string(k) + " at " + std::to_string(now) +
											" cost " + std::to_string(cost));
			ok = r.ok;
			calls++;
			fractional += r.fractional;
			borderline += r.borderline;
		}
		failed += !ok;
	}
	EXPECT_GT(calls, 50000);
	EXPECT_GT(fractional, calls / 10);
	// Binary fractions are exact: no call is ever borderline.
	EXPECT_EQ(borderline, 0);
}

// The documented example parameters through the harness: exercises the harness
// itself on known values.
TEST(TokenBucketModel, HarnessAgreesOnSpecExample)
{
	Harness h(MakeParams({1, 1}, {10, 1}));
	const int64_t t0 = 1000 * kMicros;
	for (int i = 0; i < 12; i++)
	{
		const CallResult r = h.Call(t0, 1, "call " + std::to_string(i));
		ASSERT_TRUE(r.ok);
		EXPECT_EQ(r.allowed, i < 10);
		EXPECT_FALSE(r.borderline);
	}
	const CallResult r = h.Call(t0 + 4 * kMicros, 1, "after 4 s");
	ASSERT_TRUE(r.ok);
	EXPECT_TRUE(r.allowed);
}

// Continuous demand: cost 1 every g microseconds with rate * g <= 0.5 token,
// so demand outruns the refill and the bucket empties.  Once it has refused a
// call, the tokens held stay below one at every call, i.e.
//   capacity + rate * elapsed - 1 < admitted <= capacity + rate * elapsed
// (each side with the 1e-6 tolerance), elapsed counted from the first call.
// This needs capacity >= 1.5 (cost + the largest refill between two calls):
// a smaller bucket can overflow between calls and lose refill, which is the
// nature of a token bucket, not a defect, so capacities here are >= 2.
TEST(TokenBucketModel, ContinuousDemandAdmitsWithinOneToken)
{
	std::mt19937_64 rng(0xc0ffee0ddba11ULL);
	constexpr int kRuns = 400;
	int failed = 0;
	int64_t checked = 0;
	for (int run = 0; run < kRuns && failed < 5; run++)
	{
		const Params p = RandomParams(rng, 2.0L, 300);
		// A gap of at most half a token (rates are at most 10^5 per second).
		const i128 max_gap = p.D / (2 * p.per_us);
		ASSERT_GE(max_gap, 1);
		Harness h(p);
		const int64_t t0 = Uniform(rng, -1000000000000000LL, 1000000000000000LL);
		int64_t now = t0;
		const int n = 2 * static_cast<int>(p.cap_floor) + 300;
		i128 admitted = 0;
		bool drained = false;
		bool ok = true;
		for (int k = 0; k < n && ok; k++)
		{
			if (k > 0)
				now += Uniform(rng, 1, static_cast<int64_t>(std::min<i128>(max_gap, 1000000000000LL)));
			const std::string where = "run " + std::to_string(run) + " call " + std::to_string(k);
			const CallResult r = h.Call(now, 1, where);
			ok = r.ok;
			if (!ok)
				break;
			admitted += r.allowed;
			drained = drained || !r.allowed;
			const i128 supply = p.cap + p.per_us * (static_cast<i128>(now) - t0);
			if (admitted * p.D > supply + p.tol)
			{
				ADD_FAILURE() << where << ": admitted " << static_cast<int64_t>(admitted)
							  << " above capacity + rate * elapsed = " << h.Str(supply) << "\n  "
							  << p.Describe();
				ok = false;
			}
			else if (drained && supply - admitted * p.D >= p.D + p.tol)
			{
				ADD_FAILURE() << where << ": admitted " << static_cast<int64_t>(admitted)
							  << " more than one token below capacity + rate * elapsed = "
							  << h.Str(supply) << "\n  " << p.Describe();
				ok = false;
			}
			checked += drained;
		}
		if (ok && !drained)
		{
			ADD_FAILURE() << "run " << run << " never refused a call: " << p.Describe();
			ok = false;
		}
		failed += !ok;
	}
	EXPECT_GT(checked, 100000);
}

}  // namespace
