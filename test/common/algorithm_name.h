// The name of an algorithm in test messages, for the unit tests and the
// fuzzer alike (the fuzzer is built without GoogleTest, so this is not in
// test/unit/zone_harness.h).  Unlike the SQL name in src/decision/zone.c, the cron
// variant is told apart from the inline token bucket.
#ifndef RL_TEST_ALGORITHM_NAME_H
#define RL_TEST_ALGORITHM_NAME_H

#include "core/rl_core.h"

inline const char *AlgorithmName(RlAlgorithm algorithm)
{
	switch (algorithm)
	{
		case RL_ALGORITHM_TOKEN_BUCKET:
			return "token_bucket";
		case RL_ALGORITHM_GCRA:
			return "gcra";
		case RL_ALGORITHM_SLIDING_WINDOW:
			return "sliding_window";
		case RL_ALGORITHM_SLIDING_WINDOW_COUNTER:
			return "sliding_window_counter";
		case RL_ALGORITHM_FIXED_WINDOW:
			return "fixed_window";
		case RL_ALGORITHM_CRON_TOKEN_BUCKET:
			return "token_bucket (cron refill)";
		case RL_ALGORITHM_CONCURRENCY:
			return "concurrency";
	}
	return "?";
}

#endif
