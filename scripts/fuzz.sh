#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/) with clang, AddressSanitizer and UBSan into build-fuzz/ and
# runs each for SECONDS on a copy of its seed corpus (fuzz/corpus/<target>). Fails on any crash,
# leak or sanitizer report (the input is left in build-fuzz/). Prints executions/s and coverage.
#   bash scripts/fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
targets=(codec http state config pod_link)
CXX=clang++ CC=clang cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRSC_FUZZ=ON \
  -DRSC_BUILD_TESTS=OFF -DRSC_BUILD_BENCHMARKS=OFF >/dev/null
cmake --build build-fuzz -j "${JOBS:-2}" --target "${targets[@]/#/fuzz_}"
export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
failed=0
passed=0
for t in "${targets[@]}"; do
  work=$(mktemp -d "/tmp/rsc-fuzz-$t.XXXXXX")
  cp fuzz/corpus/"$t"/* "$work"/
  log=build-fuzz/fuzz_$t.log
  if (cd build-fuzz && ./fuzz/fuzz_"$t" -max_total_time="$secs" -print_final_stats=1 -timeout=10 -rss_limit_mb=1024 \
        -artifact_prefix="$PWD/fuzz_$t-" "$work" >"fuzz_$t.log" 2>&1); then
    passed=$((passed + 1))
    runs=$(awk '/stat::number_of_executed_units/ {print $2}' "$log")
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
    echo "fuzz_$t: ok, $runs runs in ${secs}s ($((runs / secs))/s), $cov edges, corpus $(ls "$work" | wc -l) inputs"
  else
    failed=$((failed + 1))
    echo "fuzz_$t: FAILED; see $log"
    grep -E "ERROR|runtime error|SUMMARY|==[0-9]+==" "$log" | head -20 || true
  fi
  rm -rf "$work"
done
echo "fuzz targets: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
