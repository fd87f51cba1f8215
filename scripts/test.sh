#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test with ctest. Tests that need Redis start
# their own redis-server on a free loopback port in a temp dir.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
cd build
ctest --output-on-failure -j "${JOBS:-2}" --timeout 900
