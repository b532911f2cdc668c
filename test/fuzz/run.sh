#!/usr/bin/env bash
# Builds the libFuzzer target of the C++ core (test/fuzz/core_fuzz.cpp) with
# ASan and UBSan and runs it for a bounded time, then the proxy-header
# parser's (test/fuzz/client_address_fuzz.cpp) for a third of that; prints
# a TAP line for each, "ok - ..." or "not ok - ...", and exits non-zero on
# a failure.
#
#   bash test/fuzz/run.sh [SECONDS]       default 30 (or RL_FUZZ_TIME)
#
# It first replays the seeds in test/fuzz/corpus/ (regression inputs of the
# bugs fuzzing found) and the working corpus of earlier runs, then fuzzes.
# Needs clang++-14 and libFuzzer (Debian: clang-14 and libclang-rt-14-dev).
#
# Environment:
#   RL_FUZZ_OUT              build and working corpus (default results/fuzz)
#   RL_FUZZ_TIME             seconds of fuzzing (default 30)
#   RL_FUZZ_TB_WAIT_SLACK_US tolerate token-bucket waits off by N us plus the
#                            1e-9 token's worth (the known imprecision of long
#                            periods, seed tb-reset-short-2-per-30-days), to
#                            fuzz past it; unset: the contract, exact
#   RL_FUZZ_FULL_RANGE=1     check the models up to PostgreSQL's last
#                            timestamp (seed gcra-top-of-timestamp-range fails)
#   RL_FUZZ_STATS=1          print what the inputs exercised
#   RL_FUZZ_TRACE=1          print every call (with one input file as argument
#                            to $RL_FUZZ_OUT/core_fuzz)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"

seconds=${1:-${RL_FUZZ_TIME:-30}}
out=${RL_FUZZ_OUT:-$ROOT/results/fuzz}
cxx=${RL_FUZZ_CXX:-clang++-14}
name="libFuzzer core_fuzz (src/core, ASan+UBSan, ${seconds} s)"
mkdir -p "$out/corpus"

not_ok() {
	echo "not ok - $name: $1"
	exit 1
}

command -v "$cxx" >/dev/null || not_ok "$cxx not found (Debian: apt-get install clang-14 libclang-rt-14-dev)"
if ! "$cxx" -std=c++17 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
	-I src src/core/*.cpp test/fuzz/core_fuzz.cpp -o "$out/core_fuzz" >"$out/build.log" 2>&1; then
	sed 's/^/# /' "$out/build.log" | head -20
	grep -q 'libclang_rt.fuzzer\|FuzzedDataProvider' "$out/build.log" &&
		echo "# libFuzzer is missing: apt-get install libclang-rt-14-dev"
	not_ok "build failed"
fi

rm -f "$out"/crash-* "$out"/leak-* "$out"/timeout-* "$out"/oom-*
# New inputs go to the first directory only: the checked-in seeds stay as
# they are.
"$out/core_fuzz" -max_total_time="$seconds" -max_len=4096 -timeout=20 -rss_limit_mb=2048 \
	-print_final_stats=1 -artifact_prefix="$out/" "$out/corpus" test/fuzz/corpus >"$out/fuzz.log" 2>&1
status=$?
runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out/fuzz.log" | tail -1)
rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$out/fuzz.log" | tail -1)
units=$(find "$out/corpus" -type f | wc -l)
if [ "$status" -ne 0 ]; then
	grep -E -A3 'invariant violated|runtime error|ERROR: AddressSanitizer|ERROR: libFuzzer' "$out/fuzz.log" |
		grep -v '^    #' | head -12 | sed 's/^/# /'
	artifact=$(ls "$out"/crash-* "$out"/leak-* "$out"/timeout-* "$out"/oom-* 2>/dev/null | head -1)
	[ -n "$artifact" ] && echo "# input: $artifact (replay: RL_FUZZ_TRACE=1 $out/core_fuzz $artifact)"
	echo "# log: $out/fuzz.log"
	not_ok "failed after ${runs:-?} executions"
fi
echo "ok - $name: ${runs:-?} executions (${rate:-?}/s), corpus of $units inputs, no invariant violated"

# The proxy-header parser reads what clients send: its own target, a third
# of the time (at least 5 s).
address_seconds=$(( seconds / 3 > 5 ? seconds / 3 : 5 ))
name="libFuzzer client_address_fuzz (proxy headers, ASan+UBSan, ${address_seconds} s)"
mkdir -p "$out/address-corpus"
if ! "$cxx" -std=c++17 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
	-I src src/core/client_address.cpp test/fuzz/client_address_fuzz.cpp -o "$out/client_address_fuzz" \
	>"$out/address-build.log" 2>&1; then
	sed 's/^/# /' "$out/address-build.log" | head -20
	not_ok "build failed"
fi
rm -f "$out"/crash-* "$out"/leak-* "$out"/timeout-* "$out"/oom-*
"$out/client_address_fuzz" -max_total_time="$address_seconds" -max_len=2048 -timeout=20 \
	-print_final_stats=1 -artifact_prefix="$out/" "$out/address-corpus" >"$out/address-fuzz.log" 2>&1
status=$?
runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out/address-fuzz.log" | tail -1)
if [ "$status" -ne 0 ]; then
	grep -E -A3 'invariant violated|runtime error|ERROR: AddressSanitizer|ERROR: libFuzzer' "$out/address-fuzz.log" |
		grep -v '^    #' | head -12 | sed 's/^/# /'
	echo "# log: $out/address-fuzz.log"
	not_ok "failed after ${runs:-?} executions"
fi
echo "ok - $name: ${runs:-?} executions, no invariant violated"
