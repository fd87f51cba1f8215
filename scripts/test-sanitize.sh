#!/usr/bin/env bash
# Builds the core, membership machine, store, HTTP-API and actor tests with AddressSanitizer and UBSan into
# build-asan/ and runs them (the simulation with 40 seeds: sanitizers are slow).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DRSC_SANITIZE=ON -DRSC_BUILD_BENCHMARKS=OFF >/dev/null
targets=(test_codec test_assignor test_reconcile test_simulation test_time_rules test_pod_authority test_cached_group test_membership test_store test_cluster test_group_actor test_http_api)
cmake --build build-asan -j "${JOBS:-2}" --target "${targets[@]}"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export RSC_SIM_SEEDS=40
passed=0
failed=0
# The co-partitioned simulation run walks the same steps as the assignors run (its own code is in
# test_reconcile, sanitized too): left to the plain build, it saves CI a minute.
skip=(--gtest_filter=-Simulation.CoPartitionedAmongTheOtherAssignorsKeepsEveryInvariant)
for t in "${targets[@]}"; do
  echo "== sanitized $t"
  args=(--gtest_brief=1)
  [ "$t" = test_simulation ] && args+=("${skip[@]}")
  if ./build-asan/tests/"$t" "${args[@]}"; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
done
echo "sanitized test binaries: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
