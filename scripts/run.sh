#!/usr/bin/env bash
# Installs what is missing, builds, and runs the coordinator.
# Until rsc-coordinator lands (issue 4), this runs the pure core's demo instead.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
exec ./build/rsc-core-demo
