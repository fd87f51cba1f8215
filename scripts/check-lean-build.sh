#!/usr/bin/env bash
# The lean path: scripts/run.sh installs only what building and running the
# server and the tools needs, and builds only them. Checked without uninstalling anything: the
# --run package list holds no test, fuzz, benchmark or browser package, and a configure of the lean
# build with CMake forbidden to find GoogleTest and Google Benchmark succeeds and generates the four
# binaries and nothing of the tests. Configures into a temp dir (seconds); builds nothing.
#   bash scripts/check-lean-build.sh
set -uo pipefail
cd "$(dirname "$0")/.."
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
lean=$(bash scripts/install-deps.sh --list --run)
full=$(bash scripts/install-deps.sh --list)
for p in chromium clang libclang-rt-14-dev prometheus faketime libgtest-dev libgmock-dev libbenchmark-dev \
  libgoogle-perftools-dev python3-yaml fonts-dejavu-core; do
  grep -qx "$p" <<<"$lean" && fail "the run path installs $p"
  grep -qx "$p" <<<"$full" || fail "the full list lost $p"
done
echo "ok: run path: $(wc -l <<<"$lean") packages ($(tr '\n' ' ' <<<"$lean")); everything: $(wc -l <<<"$full")"
grep -q 'install-deps.sh --run' scripts/run.sh && grep -q 'RSC_LEAN=1 bash scripts/build.sh' scripts/run.sh ||
  fail "scripts/run.sh does not take the lean path"
dir=$(mktemp -d /tmp/rsc-lean.XXXXXX)
trap 'rm -rf "$dir"' EXIT
if ! cmake -S . -B "$dir" -G Ninja -DRSC_BUILD_TESTS=OFF -DRSC_BUILD_BENCHMARKS=OFF \
  -DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON -DCMAKE_DISABLE_FIND_PACKAGE_benchmark=ON >"$dir.log" 2>&1; then
  fail "the lean configure needs a test or benchmark package: $(tail -5 "$dir.log")"
else
  targets=$(ninja -C "$dir" -t targets all 2>/dev/null | cut -d: -f1)
  for b in rsc-coordinator rsc-consume rsc-produce rsc-admin; do
    grep -qx "$b" <<<"$targets" || fail "the lean build has no target $b"
  done
  n=$(grep -c -E '^tests/|^benchmarks/' <<<"$targets" || true)
  [ "$n" -eq 0 ] || fail "the lean build generates $n test or benchmark targets"
  echo "ok: the lean configure succeeds without GoogleTest or Google Benchmark and builds the four binaries"
fi
rm -f "$dir.log"
[ "$fails" -eq 0 ] && echo "check-lean-build: PASS" || { echo "check-lean-build: $fails failed"; exit 1; }
