#!/usr/bin/env bash
# Steady heartbeats over HTTPS vs HTTP, side by side in one run, measured by two independent load
# generators (rsc-load: keep-alive connections per thread; wrk: its own connections and Lua
# script), against PODS coordinator pods (behind rsc-proxy when PODS > 1, which passes TLS through
# as a Kubernetes Service would; the pods then forward to each other over HTTPS too). Each run
# starts its own redis-server and pods on free loopback ports and stops them (scripts/load.sh,
# scripts/wrk-heartbeats.sh). Prints one row per generator and scheme and the HTTPS/HTTP ratios.
#   bash scripts/bench-https.sh [PODS] [SECONDS] [GROUPS] [MEMBERS_PER_GROUP]
set -euo pipefail
cd "$(dirname "$0")/.."
pods=${1:-1} secs=${2:-5} groups=${3:-100} per=${4:-10}
proxy=0
[ "$pods" -gt 1 ] && proxy=1
declare -A rate p99 cpu
for gen in rsc-load wrk; do
  for scheme in http https; do
    h=0
    [ "$scheme" = https ] && h=1
    if [ "$gen" = rsc-load ]; then
      out=$(RSC_LOAD_PROXY=$proxy RSC_LOAD_HTTPS=$h bash scripts/load.sh "$pods" "$groups" "$per" 8 "$secs" 2>&1)
      rate[$gen.$scheme]=$(echo "$out" | grep -oP '[0-9.]+(?= heartbeats/s)' | tail -1)
      p99[$gen.$scheme]=$(echo "$out" | grep -oP 'heartbeats/s; latency ms .*p99 \K[0-9.]+' | tail -1)
      cpu[$gen.$scheme]=$(echo "$out" | grep -oP 'coordinator CPU \K[0-9.]+(?= us per heartbeat)' | tail -1)
    else
      out=$(RSC_WRK_PODS=$pods RSC_WRK_HTTPS=$h bash scripts/wrk-heartbeats.sh "$groups" "$per" "$secs" 2>&1)
      rate[$gen.$scheme]=$(echo "$out" | grep -oP 'heartbeat: Requests/sec:\s+\K[0-9.]+' | head -1)
      # wrk prints "99%  1.71ms" (or us, or s): in ms.
      p99[$gen.$scheme]=$(echo "$out" | grep -m1 -P 'heartbeat: +99%' | awk '{v=$NF; u=v; sub(/[0-9.]+/, "", u); sub(/[a-z]+$/, "", v);
        printf "%.3f", u == "us" ? v / 1000 : u == "s" ? v * 1000 : v}')
      cpu[$gen.$scheme]=$(echo "$out" | grep -oP '^heartbeat: [0-9]+ requests, coordinator CPU \K[0-9.]+' | head -1)
    fi
    if [ -z "${rate[$gen.$scheme]}" ] || [ -z "${cpu[$gen.$scheme]}" ]; then
      echo "bench-https: $gen over $scheme printed no figure:" >&2
      echo "$out" | tail -20 >&2
      exit 1
    fi
    printf 'bench-https: %-8s %-5s %d pod(s): %10.0f heartbeats/s  p99 %7.3f ms  coordinator CPU %6.1f us/heartbeat\n' \
      "$gen" "$scheme" "$pods" "${rate[$gen.$scheme]}" "${p99[$gen.$scheme]:-0}" "${cpu[$gen.$scheme]}"
  done
done
for gen in rsc-load wrk; do
  awk -v g="$gen" -v n="$pods" -v r1="${rate[$gen.http]}" -v r2="${rate[$gen.https]}" -v p1="${p99[$gen.http]:-0}" \
    -v p2="${p99[$gen.https]:-0}" -v c1="${cpu[$gen.http]}" -v c2="${cpu[$gen.https]}" \
    'BEGIN { printf "bench-https: %s, %d pod(s): HTTPS/HTTP throughput %.2f, p99 %.2f, coordinator CPU per heartbeat %.2f\n",
             g, n, r2 / r1, (p1 > 0 ? p2 / p1 : 0), c2 / c1 }'
done
