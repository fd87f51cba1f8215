#!/usr/bin/env bash
# Configures and builds rsc into ./build (two jobs: the machines have two cores).
set -euo pipefail
cd "$(dirname "$0")/.."
# RSC_LEAN=1 (scripts/run.sh): the server and the tools only, no tests or benchmarks (nor their
# packages); otherwise everything, tests and benchmarks switched on again if a lean build left them off.
build_type=${BUILD_TYPE:-RelWithDebInfo}
if [ "${RSC_LEAN:-0}" = 1 ]; then
  parts=(-DRSC_BUILD_TESTS=OFF -DRSC_BUILD_BENCHMARKS=OFF)
  targets=(--target rsc-coordinator rsc-consume rsc-produce rsc-admin)
else
  parts=(-DRSC_BUILD_TESTS=ON -DRSC_BUILD_BENCHMARKS=ON)
  targets=()
fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="$build_type" "${parts[@]}" ${CMAKE_ARGS:-} >/dev/null
cmake --build build -j "${JOBS:-2}" "${targets[@]}"
