#!/usr/bin/env bash
# Installs the Debian 12 packages rsc needs that are missing. Idempotent; run as root.
set -euo pipefail
packages=(
  g++ cmake ninja-build pkg-config dpkg-dev
  nlohmann-json3-dev libgtest-dev libgmock-dev libbenchmark-dev
  libcaf-dev libhiredis-dev libssl-dev openssl libboost-dev libboost-system-dev prometheus-cpp-dev libgoogle-perftools-dev
  redis-server prometheus faketime
  clang libclang-rt-14-dev
  curl python3 python3-yaml
  chromium fonts-dejavu-core
)
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
