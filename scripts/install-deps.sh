#!/usr/bin/env bash
# Installs the Debian 12 packages rsc needs that are missing. Idempotent; run as root.
#   bash scripts/install-deps.sh          everything: building, the tests, the fuzzers, the benchmarks
#   bash scripts/install-deps.sh --run    only what building and running the server and tools needs
#                                         (and a local redis-server), as scripts/run.sh uses it
#   bash scripts/install-deps.sh --list [--run]   print the package list, install nothing
set -euo pipefail
run=(
  g++ cmake ninja-build pkg-config
  nlohmann-json3-dev libcaf-dev libhiredis-dev libssl-dev openssl libboost-dev libboost-system-dev prometheus-cpp-dev
  redis-server
)
packages=(
  "${run[@]}" dpkg-dev lintian
  libgtest-dev libgmock-dev libbenchmark-dev libgoogle-perftools-dev
  prometheus faketime
  clang libclang-rt-14-dev
  curl python3 python3-yaml
  chromium fonts-dejavu-core
)
list=0
for a in "$@"; do
  case $a in
    --run) packages=("${run[@]}") ;;
    --list) list=1 ;;
    *) echo "install-deps: unknown argument $a (--run, --list)" >&2; exit 2 ;;
  esac
done
if [ "$list" = 1 ]; then
  printf '%s\n' "${packages[@]}"
  exit 0
fi
missing=()
for p in "${packages[@]}"; do
  [[ $(dpkg-query -W -f='${Status}' "$p" 2>/dev/null) == *"install ok installed"* ]] || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing ${missing[*]}; run as root to install them" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
