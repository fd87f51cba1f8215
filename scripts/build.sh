#!/usr/bin/env bash
# Configures and builds rsc into ./build (two jobs: the machines have two cores).
set -euo pipefail
cd "$(dirname "$0")/.."
build_type=${BUILD_TYPE:-RelWithDebInfo}
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="$build_type" ${CMAKE_ARGS:-} >/dev/null
cmake --build build -j "${JOBS:-2}"
